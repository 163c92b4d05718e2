"""Early stopping on held-out items: where does a real run stop, and how do its codes compare with the init's and random codes?

  python bench/bench_early_stop.py                                  # WordNet 20k, 20% held out, patience 5, bfloat16 MLPs
  python bench/bench_early_stop.py --catalog /work/cache/wordnet-full --holdout 0.1
  python bench/bench_early_stop.py --set '{"optim.patience": 10}' --out bench/results/early_stop_p10.json
  python bench/bench_early_stop.py --holdout 0 --patience 0 --threads 2 --out bench/results/learning_balanced_200.json  # the default: no split, 200 epochs
  # standardised inputs, the default config as it is (float32), kept for rescoring (bench/results/learning_standardised_fp32.json):
  python bench/bench_early_stop.py --holdout 0 --patience 0 --threads 2 --inputs standardised --keep /work/runs/std --set '{}' \
      --out bench/results/learning_standardised_fp32.json
  python bench/score_run.py /work/runs/std/run --catalog /work/runs/std/inputs --out bench/results/rescore_standardised_fp32.json
  # the decoder phase (optim.decoder_share), the default as shipped and shorter runs (bench/results/learning_decoder_*.json):
  python bench/bench_early_stop.py --holdout 0 --patience 0 --threads 1 --set '{}' --out bench/results/learning_decoder_20k_default.json
  python bench/bench_early_stop.py --catalog /work/cache/wordnet-80k --n 80000 --holdout 0 --patience 0 --threads 1 \
      --set '{"optim.epochs": 40, "optim.decoder_share": 0.5}' --out bench/results/learning_decoder_80k_e40.json
  # the joint phase bounded in steps (optim.joint_steps; bench/results/learning_joint_steps_*.json): the default is 20 + 40 epochs on 80k, 79 + 40 on 20k
  python bench/bench_early_stop.py --catalog /work/cache/wordnet-80k --n 80000 --holdout 0 --patience 0 --threads 1 --keep /work/runs/80k-default \
      --set '{}' --out bench/results/learning_joint_steps_80k_default.json
  python bench/bench_early_stop.py --holdout 0 --patience 0 --threads 1 --set '{}' --out bench/results/learning_joint_steps_20k_default.json
  python bench/bench_early_stop.py --holdout 0 --patience 0 --threads 1 --inputs standardised --set '{}' \
      --out bench/results/learning_joint_steps_20k_default_standardised.json    # and --inputs x1e-3, x1e3
  python bench/bench_early_stop.py --catalog /work/cache/wordnet-80k --n 80000 --holdout 0 --patience 0 --threads 1 \
      --set '{"optim.joint_steps": 3600, "optim.decoder_share": 0.1}' --out bench/results/learning_joint_steps_80k_j46_d20.json   # 46 + 20
  # the first letter's own reconstruction (loss.first_letter; bench/results/learning_first_letter_*.json):
  python bench/bench_early_stop.py --catalog /work/cache/wordnet-80k --n 80000 --holdout 0 --patience 0 --threads 1 \
      --set '{"optim.epochs": 40, "optim.decoder_share": 0.5, "loss.first_letter": 0.3}' --out bench/results/learning_first_letter_80k_w0.3.json

The run is the product's own path: `train_segment` on the catalog's `.npy` files with `data.holdout` and
`optim.patience` (the default config otherwise; 8 levels x 256 codes, CPU). The held-out items stay out of the
batches, of the init's sample and of the refits; after each epoch the task scores them, and the run ends on the
best epoch's weights. Then `learning_health` (which finds the run's held-out rows itself) scores, in the same
run, the trained codes against `residual_init` (RQ-KMeans fit on the training rows) and random codes (the trained
codes permuted per level) on every training item (--health-sample: a seeded sample), each probe testing every
item once (5-fold) with the trained codes' gap to the init's paired item by item (and to the mean of three inits of
seeds 0-2, the verdict's rule: `init_gaps`), and rebuilds the held-out items
with the tokenizer and with the init. --inputs transforms the catalog's embeddings first (bench_learning's TRANSFORMS: standardised
per dimension, scaled by 1e-3 or 1e3, L2-normalised again) and trains on that copy; --keep DIR keeps the run (its
checkpoints, in DIR/run) and that copy (DIR/inputs), so `bench/score_run.py` can score it again later. Prints the per-epoch held-out curve and a table of ratios; writes bench/results/early_stop.json (or --out).
"""
import argparse, json, platform, shutil, sys, tempfile, time
from pathlib import Path
import numpy as np, torch
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items, wordnet_catalog
from letter8_tokenizer.train import train_segment, resolve_config
from letter8_tokenizer.model import build_tokenizer
from letter8_tokenizer.probe import learning_health
from letter8_tokenizer.loop import read_metrics
from letter8_tokenizer.checkpoint import Checkpointer
from bench_learning import TRANSFORMS

def trained_model(cfg, items, workdir):
    "The tokenizer of the run's last committed checkpoint (the best epoch's weights), and that checkpoint's state."
    st = Checkpointer(workdir).load(required=True).state
    model = build_tokenizer(resolve_config(cfg, items), items); model.load_state_dict(st['model'])
    return model.eval(), st

def curve(workdir):
    "Per epoch: the training batches' mean relative reconstruction error, and the held-out one when the run holds items out."
    out, batch, done = [], [], 0
    for r in read_metrics(workdir):
        batch.append(r['recon_rel'])
        if int(r['epoch']) > done:  # the epoch's last step
            done = int(r['epoch'])
            out.append(dict(epoch=done, train_recon=float(np.mean(batch)), **({'held_out_recon': r['held_out_recon']} if 'held_out_recon' in r else {})))
            batch = []
    return out

def table(h):
    "Trained codes against the init's and random codes, training items and held-out items."
    t, i, r, held = h['trained'], h['init'], h['random'], h.get('held_out')
    probes = [k for k in t if k.startswith('probe')]
    gap, inits = h.get('probe_gap', {}), h.get('probe_gap_inits', {})
    n_inits = len(next(iter(inits.values()))['deltas']) if inits else 0
    print(f'\n| measured in the same run | trained | init (residual_init) | random | trained / init | trained - init (paired s.e.) | trained - {n_inits} inits\' mean (s.e.) |\n|---|---|---|---|---|---|---|')
    print(f"| reconstruction MSE, {h['items']:,} training items | {t['mse']:.4g} | {i['mse']:.4g} | | {t['mse'] / i['mse']:.3f} |")
    if held: print(f"| reconstruction MSE, {held['items']:,} held-out items | {held['mse']:.4g} | {held['init_mse']:.4g} | | {held['mse'] / held['init_mse']:.3f} |")
    for k in probes + ['neighbour_d1', 'min_used', 'min_perplexity', 'collide']:
        g, m = (f"{d[k]['delta']:+.4f} ± {d[k]['se']:.4f}" if k in d else '' for d in (gap, inits))
        print(f"| {k} | {t[k]:.4g} | {i[k]:.4g} | {r[k]:.4g} | {t[k] / i[k] if i[k] else float('nan'):.3f} | {g} | {m} |")
    if len(v := h.get('init_neighbour_d1') or []) > 1:  # the verdict reads the neighbour ratio against the inits' mean
        print(f"| neighbour_d1, {len(v)} inits ({min(v):.4f} to {max(v):.4f}) | {t['neighbour_d1']:.4f} | {np.mean(v):.4f} (mean) | | "
              f"{t['neighbour_d1'] / np.mean(v):.4f} | | {t['neighbour_d1'] - np.mean(v):+.4f} |")
    if len(v := h.get('init_collide') or []) > 1:  # one seed's collisions are a small count: 14 to 28 items over three inits of WordNet 20k
        print(f"| collide, {len(v)} inits ({min(v):.4g} to {max(v):.4g}) | {t['collide']:.4g} | {np.mean(v):.4g} (mean) | | "
              f"{t['collide'] / np.mean(v) if np.mean(v) else float('nan'):.3f} | | {t['collide'] - np.mean(v):+.4g} |")

def transformed(items, name, folder):
    "The catalog with `TRANSFORMS[name]` applied to its embeddings, as `.npy` files in `folder` (the catalog itself when `name` is 'as-is')."
    if name == 'as-is': return items
    folder.mkdir(parents=True, exist_ok=True)
    x = np.ascontiguousarray(TRANSFORMS[name](np.asarray(items.emb, np.float64)).astype(np.float32))
    np.save(folder/'items.npy', x); np.save(folder/'labels.npy', np.asarray(items.labels))
    names = Path(items.path).parent/'label_names.json'  # so a probe report of the kept copy names its label levels
    if names.exists(): shutil.copy(names, folder/names.name)
    return Items(folder/'items.npy', labels=folder/'labels.npy')

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--catalog', default='/work/cache/wordnet-20k', help='a WordNet catalog folder (bench/build_wordnet.py), built when missing')
    ap.add_argument('--n', type=int, default=20000, help='synsets when the catalog must be built (0: all)')
    ap.add_argument('--holdout', type=float, default=0.2, help='data.holdout: share of the items held out of training (0: none, every epoch runs)')
    ap.add_argument('--patience', type=int, default=5, help='optim.patience: epochs without a lower held-out error that end the joint epochs (then the decoder phase) or, in the decoder phase, the run (0: none)')
    ap.add_argument('--threads', type=int, default=1, help='torch threads (1: the recorded runs)')
    ap.add_argument('--set', default='{"model.precision": "bfloat16"}', help='JSON config overrides, dotted keys')
    ap.add_argument('--health-sample', type=int, default=0, help="items learning_health checks (0: every item the run trained on; its default is 5,000)")
    ap.add_argument('--inputs', default='as-is', choices=list(TRANSFORMS), help="transform of the catalog's embeddings the run trains on")
    ap.add_argument('--keep', default=None, help='folder that keeps the run (its checkpoints) for bench/score_run.py; default: a temporary one, deleted')
    ap.add_argument('--out', default='bench/results/early_stop.json')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cat = Path(a.catalog)
    items = Items(cat/'items.npy', labels=cat/'labels.npy') if (cat/'items.npy').exists() else wordnet_catalog(cat, n_items=a.n or None)
    cfg = override(Config(), {**json.loads(a.set), 'data.holdout': a.holdout, 'optim.patience': a.patience or None, 'schedule.log_every_s': 60})
    if a.keep and Path(a.keep).exists() and any(Path(a.keep).iterdir()): sys.exit(f"--keep {a.keep} is not empty: name a new folder, so no earlier run is resumed or overwritten")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(a.keep or tmp)/'run'
        items = transformed(items, a.inputs, Path(a.keep or tmp)/'inputs')
        t0 = time.perf_counter()
        res = train_segment(cfg, items, d, progress=True)
        train_s = time.perf_counter() - t0
        model, st = trained_model(cfg, items, d)
        epochs = curve(d)
        t1 = time.perf_counter()
        health = learning_health(model, items, sample=a.health_sample or None)
        health_s = time.perf_counter() - t1
    print('\n| epoch | training batches recon / variance | held-out recon / variance |\n|---|---|---|')
    for e in epochs: print(f"| {e['epoch']} | {e['train_recon']:.4f} | {e.get('held_out_recon', float('nan')):.4f} |")
    print(f"\nstopped after epoch {epochs[-1]['epoch']} of {cfg.optim.epochs} ({res.status}); best epoch {st['best']['epoch']}; "
          f"{train_s:.0f} s of training, {health_s:.0f} s of scoring")
    table(health.numbers)
    print(f"\nverdict: {health.verdict}: {health}")
    out = dict(command=' '.join(sys.argv), catalog=str(cat), items=len(items), held_out=health.numbers.get('held_out', {}).get('items', 0),
               inputs=a.inputs, kept=a.keep, config_overrides=json.loads(a.set), holdout=a.holdout, patience=a.patience, threads=a.threads, platform=platform.processor() or platform.machine(),
               device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu',
               torch=torch.__version__, stopped_after=epochs[-1]['epoch'], best_epoch=st['best']['epoch'], train_s=round(train_s, 1),
               epochs=epochs, health=health.to_dict())
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1, default=float))
    print(f"wrote {a.out}")

if __name__ == '__main__': main()
