"""Does the tokenizer learn on real text? One run on WordNet, its codes against the init's and random codes, in one process.

  python bench/learning/train_wordnet.py                          # the default config on WordNet 20k, one thread
  python bench/learning/train_wordnet.py --n 80000                # WordNet 80k (bench/results/learning_80k.json)
  python bench/learning/train_wordnet.py --inputs x1e-3           # the embeddings scaled by 1e-3 (and standardised, x1e3, l2)
  python bench/learning/train_wordnet.py --holdout 0.2 --patience 5 --out bench/results/early_stop.json   # early stopping
  python bench/learning/train_wordnet.py --set '{"loss.first_letter": 0.3}' --keep <folder>   # a setting, its run kept
  python bench/learning/train_wordnet.py --score <folder> --report <folder>/probe   # score a kept run again, with its probe report

The run is the product's own path: `train_segment` on the catalog's `.npy` files with the default config (8 levels x
256 codes, CPU), `--set`'s overrides, `data.holdout` and `optim.patience`. The WordNet catalog (`wordnet_catalog`: noun
synsets' lemmas and gloss embedded with the bundled MiniLM, 384-d; labels: lexicographer file, hypernym at depth 1
and 2) is built in the cache root the first time (`bench/common.py`). With a holdout, the held-out items stay out of
the batches, of the init's sample and of the refits; after each epoch the task scores them, and the run ends on the
best epoch's weights. Then `learning_health` (which finds the run's held-out rows itself) scores, in the same process,
the trained codes against `residual_init` (RQ-KMeans fit on the training rows) and random codes (the trained codes
permuted per level) on every training item (--health-sample: a seeded sample), each probe testing every item once
(5-fold) with the trained codes' gap to the init's paired item by item and to the mean of three inits of seeds 0-2 (the
verdict's rule: `init_gaps`), and rebuilds the held-out items with the tokenizer and with the init.

--inputs transforms the catalog's embeddings first (`bench/common.py`'s TRANSFORMS) and trains on that copy. --keep DIR
keeps the run (DIR/run) and that copy (DIR/inputs); `--score DIR` scores such a run again without training (pass the
same --set: the checkpoint holds the weights, not the config), and `--report DIR` writes the probe report the export
would write for it (`probe` with `probe_inputs`), whose verdict judges the IDs where `learning_health` judges the
tokenizer. Prints the per-epoch curve and a table of ratios; writes JSON (--out; default learning_<size>[_<inputs>].json).
"""
import argparse, json, shutil, sys, tempfile, time
from pathlib import Path
from types import SimpleNamespace
import numpy as np, torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, TRANSFORMS, catalog_tag, transformed, wordnet, write_result
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items
from letter8_tokenizer.train import train_segment
from letter8_tokenizer.export import load_trained
from letter8_tokenizer.health import learning_health
from letter8_tokenizer.loop import read_metrics

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
    print(f'\n| measured in the same run | trained | init (residual_init) | random | trained / init | trained - init (paired s.e.) | '
          f'trained - {n_inits} inits\' mean (s.e.) |\n|---|---|---|---|---|---|---|')
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

def kept_copy(items, name, folder):
    "The catalog with `TRANSFORMS[name]` applied to its embeddings, as `.npy` files in `folder` (the catalog itself when 'as-is')."
    if name == 'as-is': return items
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder/'items.npy', transformed(items.emb, name)); np.save(folder/'labels.npy', np.asarray(items.labels))
    names = Path(items.path).parent/'label_names.json'  # so a probe report of the kept copy names its label levels
    if names.exists(): shutil.copy(names, folder/names.name)
    return Items(folder/'items.npy', labels=folder/'labels.npy')

def probe_report(model, items, folder:str):
    "The export's probe report of `model` on `items`, written to `folder`."
    from letter8_tokenizer.export import encode_run, probe_inputs
    from letter8_tokenizer.probe_report import probe, write_report
    codes, z, _ = encode_run(model, items)
    names = Path(items.path).parent/'label_names.json'
    rep = probe(codes, items.emb, labels=items.labels, label_names=json.loads(names.read_text())['levels'] if names.exists() else None,
                **probe_inputs(model, z))
    write_report(rep, folder, title=f'probe: {Path(items.path).parent.name}')
    return dict(verdict=rep.verdict, headline=rep.headline(), init=rep.meta['init'], comparison=rep.comparison)

def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=20000, help='WordNet synsets (0: all 82,115); the catalog is built in the cache root the first time')
    ap.add_argument('--catalog', default=None, help='a catalog folder (items.npy, labels.npy) instead of WordNet')
    ap.add_argument('--inputs', default='as-is', choices=list(TRANSFORMS), help="transform of the catalog's embeddings the run trains on")
    ap.add_argument('--set', default='{}', help='JSON config overrides, dotted keys (default: the default config)')
    ap.add_argument('--holdout', type=float, default=0.0, help='data.holdout: share of the items held out of training (0: none)')
    ap.add_argument('--patience', type=int, default=0, help='optim.patience: epochs without a lower held-out error that end the joint '
                                                           'epochs (then the decoder phase) or, in the decoder phase, the run (0: none)')
    ap.add_argument('--threads', type=int, default=1, help='torch threads (1: the recorded runs)')
    ap.add_argument('--health-sample', type=int, default=0, help="items learning_health checks (0: every item the run trained on)")
    ap.add_argument('--keep', default=None, help='folder that keeps the run (DIR/run) and its inputs (DIR/inputs) for --score')
    ap.add_argument('--score', default=None, help='a --keep folder: score its run again instead of training')
    ap.add_argument('--report', default=None, help='also write the probe report (probe.html, probe.json) to this folder')
    ap.add_argument('--out', default=None, help='result file; default bench/results/learning_<size>[_<inputs>].json')
    a = ap.parse_args()
    if a.keep and Path(a.keep).exists() and any(Path(a.keep).iterdir()):
        sys.exit(f"--keep {a.keep} is not empty: name a new folder, so no earlier run is resumed or overwritten")
    if a.score and not (Path(a.score)/'run').is_dir(): sys.exit(f"--score {a.score}: no run folder there; give a folder --keep wrote.")
    return a

def main():
    a = parse()
    torch.set_num_threads(a.threads)
    out = a.out or RESULTS/f"learning_{catalog_tag(a.n, a.catalog)}{'' if a.inputs == 'as-is' else '_' + a.inputs}.json"
    cfg = override(Config(), {**json.loads(a.set), 'data.holdout': a.holdout, 'optim.patience': a.patience or None, 'schedule.log_every_s': 60})
    res = dict(catalog=a.catalog or f'WordNet {a.n or "all"}', inputs=a.inputs, kept=a.keep, config_overrides=json.loads(a.set),
               holdout=a.holdout, patience=a.patience, threads=a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        keep = Path(a.score or a.keep or tmp)
        if a.score:
            items = wordnet(catalog=keep/'inputs') if (keep/'inputs'/'items.npy').exists() else wordnet(a.n, a.catalog)
        else:
            items = kept_copy(wordnet(a.n, a.catalog), a.inputs, keep/'inputs')
            t0 = time.perf_counter()
            status = train_segment(cfg, items, keep/'run', progress=True).status
            res.update(train_s=round(time.perf_counter() - t0, 1), status=status)
        model = load_trained(cfg, items, SimpleNamespace(checkpoints=keep/'run'))
        epochs = curve(keep/'run')
        t1 = time.perf_counter()
        health = learning_health(model, items, sample=a.health_sample or None)
        res.update(items=len(items), held_out=health.numbers.get('held_out', {}).get('items', 0), health_s=round(time.perf_counter() - t1, 1))
        if a.report: res['report'] = probe_report(model, items, a.report)
    print('\n| epoch | training batches recon / variance | held-out recon / variance |\n|---|---|---|')
    for e in epochs: print(f"| {e['epoch']} | {e['train_recon']:.4f} | {e.get('held_out_recon', float('nan')):.4f} |")
    best = (model.held_out or {}).get('best_epoch')
    print(f"\nstopped after epoch {epochs[-1]['epoch']} of {cfg.optim.epochs}" + (f"; best epoch {best}" if best is not None else '')
          + (f"; {res['train_s']:.0f} s of training" if 'train_s' in res else '') + f", {res['health_s']:.0f} s of scoring")
    table(health.numbers)
    print(f"\nverdict: {health.verdict}: {health}")
    if a.report: print(f"\nprobe report ({a.report}/probe.html): {res['report']['headline']}")
    write_result(out, dict(res, stopped_after=epochs[-1]['epoch'], best_epoch=best, step=model.step,
                           device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu', epochs=epochs, health=health.to_dict()))

if __name__ == '__main__': main()
