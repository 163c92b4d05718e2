"""Does the tokenizer learn on real embeddings? Trained codes against residual_init codes and random codes.

  python bench/bench_learning.py                          # WordNet 20k, all input transforms (default config)
  python bench/bench_learning.py --n 0 --inputs as-is     # all 82,115 synsets
  python bench/bench_learning.py --catalog /work/cache/wordnet-20k --epochs 10 --inputs as-is,l2
  python bench/bench_learning.py --epochs 10 --no-refit                # without the per-epoch codebook refit
  # the recorded runs of the current defaults (one thread each, bfloat16 MLPs; bench/results/learning_activation.json):
  python bench/bench_learning.py --catalog /work/cache/wordnet-20k --threads 1 --inputs as-is --epochs 80 --no-health \
      --set '{"model.precision": "bfloat16"}' --tag _bfloat16_silu_lr1e-3_e80 --out bench/results/learning_activation.json
  python bench/bench_learning.py --catalog /work/cache/wordnet-20k --threads 1 --inputs l2,standardised,x1e-3,x1e3 --epochs 100 \
      --set '{"model.precision": "bfloat16"}' --tag _bfloat16_silu_lr1e-3_e100_transforms --out bench/results/learning_activation.json
  python bench/bench_learning.py --catalog /work/cache/wordnet-full --threads 1 --inputs as-is --epochs 100 \
      --set '{"model.precision": "bfloat16"}' --tag _bfloat16_silu_lr1e-3_e100 --out bench/results/learning_activation.json
  # balanced refits (the default since), all 82,115 synsets, 50 epochs (bench/results/learning_full_balanced.json):
  python bench/bench_learning.py --catalog /work/cache/wordnet-full --threads 1 --inputs as-is --epochs 50 \
      --set '{"model.precision": "bfloat16"}' --tag _bfloat16_e50_balanced --out bench/results/learning_full_balanced.json
  # balanced refits, standardised inputs, WordNet 20k, the default's 200 epochs (bench/results/learning_standardised_200.json):
  python bench/bench_learning.py --catalog /work/cache/wordnet-20k --threads 2 --inputs standardised --epochs 200 --no-health \
      --set '{"model.precision": "bfloat16"}' --tag _bfloat16_e200_balanced --out bench/results/learning_standardised_200.json
  # the old defaults: --set '{"model.activation": "relu", "optim.lr": 3e-4}'
  # do the gains hold on items neither was fit on? 20% held out of the tokenizer's training and of the init's fit:
  python bench/bench_learning.py --catalog /work/cache/wordnet-20k --threads 1 --inputs as-is --epochs 80 --no-health --holdout 0.2 \
      --set '{"model.precision": "bfloat16"}' --tag _bfloat16_e80_holdout --out bench/results/learning_holdout.json

The catalog: WordNet noun synsets (`wordnet_catalog`: lemmas + gloss embedded with the bundled MiniLM, 384-d,
L2-normalised; labels: lexicographer file, hypernym at depth 1 and at depth 2). For each input transform (as
given, L2-normalised again, standardised per dimension, scaled by 1e-3 and by 1e3) one run of the default config
(8 levels x 256 codes) is trained on CPU, with `refit_codebooks` every `quantizer.refit_every_epochs` (default 1; --no-refit: never),
and in the same run `residual_init` (RQ-KMeans on the transformed embeddings, the training-free init) and random codes (the trained codes permuted per level) are scored the same
way: reconstruction MSE in the input space, linear probes at depths 1 and 2 per label level (5-fold: every item
tested once; the trained codes' gap to the init's paired item by item, with its standard error), neighbour ratio at
depth 1, code usage and perplexity per level, collisions before resolution. Issue 13's bars are checked and
printed, then one summary row per transform (ratios against init and random). With --holdout, a share of the items
is kept out of both fits and scored the same way, each coding them with its own codebooks (nearest code per level):
is the gain learned, or memorised? Writes bench/results/learning.json (or --out).
"""
import argparse, json, os, platform, sys, time
from pathlib import Path
import numpy as np, torch
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items, wordnet_catalog
from letter8_tokenizer.kmeans import residual_init
from letter8_tokenizer.probe import shuffle_codes, probe_gaps, code_metrics, learning_health
from letter8_tokenizer.model import (build_tokenizer, init_codebooks, make_optimizer, train_step, refresh_groups, refit_codebooks,
                                     encode, decode)

TRANSFORMS = {'as-is': lambda x: x, 'l2': lambda x: x / np.linalg.norm(x, axis=1, keepdims=True), 'standardised': lambda x: (x - x.mean(0)) / x.std(0),
              'x1e-3': lambda x: x * 1e-3, 'x1e3': lambda x: x * 1e3}

class Memory:
    "An in-memory catalog with the interface `init_codebooks` reads."
    def __init__(self, x): self.emb = x
    def __len__(self): return len(self.emb)
    def take(self, rows): return type('Rows', (), dict(emb=self.emb[rows]))()

def train(x, cfg, log_every=5):
    "Train `cfg` on the rows of `x` (shuffled each epoch with the config's seed; `refit_codebooks` every `quantizer.refit_every_epochs`); the model and the per-epoch history."
    model = build_tokenizer(cfg); init_codebooks(model, Memory(x)); opt = make_optimizer(model)
    rng, hist, t = np.random.default_rng(cfg.seed), [], time.perf_counter()
    for ep in range(cfg.optim.epochs):
        if ep and cfg.loss.diversity and ep % cfg.loss.diversity_refresh_epochs == 0: refresh_groups(model)
        perm, sums = rng.permutation(len(x)), {}
        for i in range(0, len(x), cfg.optim.batch_size):
            for k, v in train_step(model, opt, x[perm[i:i + cfg.optim.batch_size]]).items(): sums.setdefault(k, []).append(v)
        every = cfg.quantizer.refit_every_epochs
        if every and (ep + 1) % every == 0: sums['refit_latent_mse'] = [refit_codebooks(model, Memory(x))]
        hist.append({k: float(np.mean(v)) for k, v in sums.items()})
        if log_every and (ep % log_every == 0 or ep == cfg.optim.epochs - 1):
            h = hist[-1]
            print(f"  epoch {ep + 1:3d}: recon_rel {h['recon_rel']:.3f}  latent_spread {h['latent_spread']:.3f}  commitment {h['commitment']:.3g}  "
                  f"{time.perf_counter() - t:.0f}s", flush=True)
    return model, hist, time.perf_counter() - t

def bars(t, i, r, gap):
    "Issue 13's bars for one input transform: name -> passed. `gap`: `probe_gaps` of the trained codes against the init's."
    probes = [p for p in t if p.startswith('probe')]
    return {'mse <= 0.8x init': t['mse'] <= 0.8 * i['mse'],
            'probes >= init': all(t[p] >= i[p] for p in probes),
            'probes not below init (2 s.e.)': all(g['delta'] >= -2 * g['se'] for g in gap.values()),
            'probes > random + 0.05': all(t[p] > r[p] + 0.05 for p in probes),
            'neighbour d1 < init': t['neighbour_d1'] < i['neighbour_d1'],
            'usage >= 90%': t['min_used'] >= 0.9, 'perplexity >= k/2': t['min_perplexity'] >= 0.5,
            'collisions <= init': t['collide'] <= i['collide']}

def heldout_split(n, share, seed=0):
    "Row ids `(train, held_out)`: a seeded `share` of the n rows is held out of training (and of the init's fit)."
    perm = np.random.default_rng(seed + 1).permutation(n)
    cut = int(round(n * share))
    return np.sort(perm[cut:]), np.sort(perm[:cut])

def run(x0, labels, name, cfg, seed=0, health=True, holdout=0.0):
    x = np.ascontiguousarray(TRANSFORMS[name](x0.astype(np.float64)).astype(np.float32))
    if holdout:  # the tokenizer and the init are both fit on the training rows only; the held-out rows are coded by each
        train_rows, held_rows = heldout_split(len(x), holdout, seed)
        x, x_held, labels, labels_held = x[train_rows], x[held_rows], labels[train_rows], labels[held_rows]
    sizes = [cfg.model.codebook_size] * cfg.model.levels
    print(f"{name}: training {cfg.optim.epochs} epochs on {len(x):,} items", flush=True)
    model, hist, secs = train(x, cfg)
    codes = encode(model, x)
    t0 = time.perf_counter()
    init = residual_init(x, levels=cfg.model.levels, k=cfg.model.codebook_size, seed=seed)
    init_s = time.perf_counter() - t0
    init_mse = float(((init.decode() - x) ** 2).mean())
    rows = score(model, codes, init.codes, init_mse, x, labels, sizes, seed)
    health = learning_health(model, x, sample=5000, labels=labels, seed=seed, held_out=x_held if holdout else None) if health else None
    out = dict(transform=name, refit=cfg.quantizer.refit_every_epochs, item_var=float(x.var(0).mean()), train_s=secs, init_s=init_s, history=hist, health=health and health.verdict,
               health_message=health and str(health), bars=bars(rows['trained'], rows['init'], rows['random'], rows['probe_gap']), **rows)
    if holdout: out['held_out'] = held_out_rows(model, init, x_held, labels_held, sizes, seed)
    return out

def score(model, codes, init_codes, init_mse, x, labels, sizes, seed):
    "`code_metrics` of the trained codes, the init's and random codes (the trained ones permuted per level) on the rows `x`, and the trained probes' paired gaps to the init's."
    rand = shuffle_codes(codes, seed)
    mse = lambda c: float(((decode(model, c) - x) ** 2).mean())
    return dict(trained=code_metrics(codes, x, sizes, labels, mse(codes), seed), init=code_metrics(init_codes, x, sizes, labels, init_mse, seed),
                random=code_metrics(rand, x, sizes, labels, mse(rand), seed), probe_gap=probe_gaps(codes, init_codes, labels, seed))

def held_out_rows(model, init, x, labels, sizes, seed):
    "The same metrics on rows neither the tokenizer nor the init saw: each codes them (nearest code per level) and rebuilds them."
    init_codes = init.encode(x)
    rows = dict(n=len(x), **score(model, encode(model, x), init_codes, float(((init.decode(init_codes) - x) ** 2).mean()), x, labels, sizes, seed))
    rows['bars'] = bars(rows['trained'], rows['init'], rows['random'], rows['probe_gap'])
    return rows

def table(r, title=None):
    keys = [k for k in r['trained'] if k != 'mse']
    print(title or f"\n{r['transform']}, refit {r['refit']} (item variance per dim {r['item_var']:.3g}; health: {r['health']})")
    print('| metric | trained | init (residual_init) | random | trained / init | trained / random |\n|---|---|---|---|---|---|')
    for k in ['mse'] + keys:
        t, i, rnd = r['trained'].get(k), r['init'].get(k), r['random'].get(k)
        f = lambda v: '' if v is None else f"{v:.4g}"
        print(f"| {k} | {f(t)} | {f(i)} | {f(rnd)} | {f(t / i) if i else ''} | {f(t / rnd) if rnd else ''} |")
    print('probes, trained - init on the same items (5-fold, paired s.e.): ' + ', '.join(f"{k} {g['delta']:+.4f} ± {g['se']:.4f}" for k, g in r['probe_gap'].items()))
    print('bars: ' + ', '.join(f"{k}: {'PASS' if v else 'FAIL'}" for k, v in r['bars'].items()), flush=True)
    if 'held_out' in r: table(r['held_out'], f"\n{r['transform']}, the {r['held_out']['n']:,} held-out items (coded, never trained on)")

def summary(runs):
    "One row per input transform: the trained codes as ratios of the init's and differences from random codes, measured in the same run."
    print('\n| inputs | mse / init | mse / random | probes - init (min ± s.e.) | probes - random (min) | neighbour d1 / init | least perplexity | least used | collide / init | bars passed |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for r in runs + [dict(h['held_out'], transform=f"{h['transform']}, held out") for h in runs if 'held_out' in h]:
        t, i, rnd = r['trained'], r['init'], r['random']
        probes, least = [k for k in t if k.startswith('probe')], min(r['probe_gap'].values(), key=lambda g: g['delta'])
        print(f"| {r['transform']} | {t['mse'] / i['mse']:.3f} | {t['mse'] / rnd['mse']:.3f} | {least['delta']:+.4f} ± {least['se']:.4f} | "
              f"{min(t[p] - rnd[p] for p in probes):+.3f} | {t['neighbour_d1'] / i['neighbour_d1']:.4f} | {t['min_perplexity']:.3f} | {t['min_used']:.3f} | "
              f"{t['collide'] / max(i['collide'], 1e-12):.2f} | {sum(r['bars'].values())}/{len(r['bars'])} |")

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--catalog', default=None, help='folder of a wordnet_catalog; default /work/cache/wordnet-<n|full>, built if missing')
    ap.add_argument('--n', type=int, default=20000, help='synsets (0: all)')
    ap.add_argument('--inputs', default=','.join(TRANSFORMS), help='comma-separated transforms: ' + ', '.join(TRANSFORMS))
    ap.add_argument('--epochs', type=int, default=None, help='default: the config default')
    ap.add_argument('--set', default='{}', help='JSON of dotted config overrides')
    ap.add_argument('--threads', type=int, default=None)
    ap.add_argument('--no-health', action='store_true', help='skip learning_health (it fits another residual_init on 5,000 items)')
    ap.add_argument('--no-refit', action='store_true', help='quantizer.refit_every_epochs 0: the EMA codebooks alone')
    ap.add_argument('--holdout', type=float, default=0.0, help='share of the items held out of training and of the init, then coded and scored too (0: none)')
    ap.add_argument('--tag', default='', help='suffix of the JSON key, so runs in parallel processes keep each other')
    ap.add_argument('--out', default=str(Path(__file__).parent/'results'/'learning.json'))
    a = ap.parse_args()
    if a.threads: torch.set_num_threads(a.threads)
    folder = a.catalog or f"/work/cache/wordnet-{a.n if a.n else 'full'}"
    items = wordnet_catalog(folder, n_items=a.n or None, seed=0, progress=False) if not (Path(folder)/'items.npy').exists() else \
            Items(Path(folder)/'items.npy', labels=Path(folder)/'labels.npy')
    x0, labels = np.asarray(items.emb, np.float32), np.asarray(items.labels)
    ov = json.loads(a.set)
    if a.epochs: ov['optim.epochs'] = a.epochs
    if a.no_refit: ov['quantizer.refit_every_epochs'] = 0
    cfg = override(Config(), {'model.in_dim': x0.shape[1], **ov})
    out = dict(catalog=folder, n=len(x0), dim=x0.shape[1], config=ov, levels=cfg.model.levels, k=cfg.model.codebook_size,
               epochs=cfg.optim.epochs, torch_threads=torch.get_num_threads(), host=platform.node(), cpus=os.cpu_count(),
               cuda=torch.cuda.is_available(), when=time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()),
               holdout=a.holdout, command=' '.join(sys.argv), runs=[])
    for name in a.inputs.split(','):
        out['runs'].append(run(x0, labels, name, override(cfg, {}), health=not a.no_health, holdout=a.holdout))
        table(out['runs'][-1])
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        kept = json.loads(Path(a.out).read_text()) if Path(a.out).exists() else {}
        kept[f"cpu_n{len(x0)}{a.tag}"] = out  # other sizes and the recorded sweep stay
        Path(a.out).write_text(json.dumps(kept, indent=1))
    summary(out['runs'])
    print(f"\nwrote {a.out}")

if __name__ == '__main__': main()
