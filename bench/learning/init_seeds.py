"""How far apart are two RQ-KMeans inits? The seed-to-seed spread of `residual_init` on the probes, next to trained runs' gaps.

  python bench/learning/init_seeds.py                              # WordNet 20k, seeds 1-4 against seed 0, one thread
  python bench/learning/init_seeds.py --seeds 8 --runs bench/results/learning_20k.json   # runs scored on every item, no holdout
  python bench/learning/init_seeds.py --seeds 10 --judge 3         # how often does each rule call an init's own table worse?

`learning_health` judges a trained tokenizer against one init, `residual_init` with the run's seed, on the paired
rule: a probe is worse when its gap to that init lies more than two paired standard errors below 0. The paired
standard error is the noise of the items, for two fixed code tables; it leaves out how much the table itself would
differ had the k-means drawn another seed. This bench fits `residual_init` on the catalog's raw embeddings (8 x 256,
every item) with seed 0, the reference `learning_health` uses, and with seeds 1..N-1, and scores each later seed
against seed 0 exactly as `learning_health` scores a trained run: `probe_gaps` (every item tested once, 5-fold, paired),
the paired rule (`stats.verdict`), reconstruction MSE, neighbour ratio at depth 1 and collisions. With --runs, the
probe gaps recorded in those runs' health (`health.numbers.probe_gap`, trained against the same seed-0 init on the
same items; a run with data.holdout was scored against an init of its training rows instead, so leave it out) are
printed beside them.

Then the rule `learning_health` applies by default is checked the same way: with --judge S, seeds 0..S-1 are the
inits, and every later seed's table is judged against them as a trained run is (`init_gaps`: the gap to their mean,
its s.e. holding the paired errors and their spread over seeds; worse beyond 2 s.e.). A table the init itself makes
should seldom be called worse: the share of later seeds flagged is the rule's false-alarm rate on these labels, printed
beside the one-init rule's (seed 0 alone, paired). Writes bench/results/init_seeds.json (or --out).
"""
import argparse, json, sys, time
from pathlib import Path
import numpy as np, torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, wordnet, write_result
from letter8_tokenizer.kmeans import residual_init
from letter8_tokenizer.health import probe_gaps, code_metrics, init_gaps
from letter8_tokenizer.stats import verdict

def init_row(x, y, ref, seed, levels, k):
    "`residual_init` with `seed`, scored against the reference init's codes as `learning_health` scores a trained run."
    t0 = time.perf_counter()
    init = residual_init(x, levels=levels, k=k, seed=seed)
    gaps = probe_gaps(init.codes, ref.codes, y, 0)
    m = code_metrics(init.codes, x, [k] * levels, None, float(((init.decode(init.codes) - x) ** 2).mean()), 0)
    return dict(seed=seed, fit_s=round(time.perf_counter() - t0, 1), mse=m['mse'], neighbour_d1=m['neighbour_d1'], collide=m['collide'],
                probe_gap=gaps, worse=worse_rows(gaps)), init.codes

def worse_rows(gaps):
    "The probes whose gap lies more than 2 s.e. below zero (`stats.verdict`'s 'worse')."
    return [p for p, g in gaps.items() if verdict(g['delta'], g['se']) == 'worse']

def judged(codes, y, judge):
    "Every seed from `judge` on, judged against the inits of seeds 0..judge-1 by `init_gaps` (`learning_health`'s default rule)."
    out = []
    for s in range(judge, len(codes)):
        gaps = init_gaps(codes[s], codes[:judge], y, 0)
        out.append(dict(seed=s, gap=gaps, worse=worse_rows(gaps)))
    return out

def fmt(gaps): return ' | '.join(f"{g['delta']:+.4f} ± {g['se']:.4f}" for g in gaps.values())

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=20000, help='WordNet synsets (0: all); the catalog is built in the cache root the first time')
    ap.add_argument('--catalog', default=None, help='a catalog folder (items.npy, labels.npy) instead of WordNet')
    ap.add_argument('--seeds', type=int, default=5, help='inits: seed 0 (the reference) and seeds 1 .. N-1')
    ap.add_argument('--levels', type=int, default=8); ap.add_argument('--k', type=int, default=256)
    ap.add_argument('--threads', type=int, default=1, help='torch threads (faiss uses its own)')
    ap.add_argument('--judge', type=int, default=3, help="inits (seeds 0..S-1) the later seeds are judged against by init_gaps (0: skip)")
    ap.add_argument('--runs', nargs='*', default=[], help='bench JSONs with a health.numbers.probe_gap, printed beside the seeds')
    ap.add_argument('--out', default=str(RESULTS/'init_seeds.json'))
    a = ap.parse_args()
    if a.seeds < 2: sys.exit(f"--seeds {a.seeds}: at least 2 are needed (seed 0 and one to compare with it).")
    if a.judge and not 2 <= a.judge < a.seeds: sys.exit(f"--judge {a.judge}: pass 0, or 2 to {a.seeds - 1} (fewer than --seeds {a.seeds}, so some seeds are left to judge).")
    torch.set_num_threads(a.threads)
    items = wordnet(a.n, a.catalog)
    x, y = np.asarray(items.emb, np.float32), np.asarray(items.labels).reshape(len(items), -1)
    ref = residual_init(x, levels=a.levels, k=a.k, seed=0)
    ref_m = code_metrics(ref.codes, x, [a.k] * a.levels, None, float(((ref.decode(ref.codes) - x) ** 2).mean()), 0)
    fits = [init_row(x, y, ref, s, a.levels, a.k) for s in range(1, a.seeds)]
    rows, codes = [r for r, _ in fits], [ref.codes] + [c for _, c in fits]
    runs = [dict(run=f, probe_gap=json.loads(Path(f).read_text())['health']['numbers']['probe_gap']) for f in a.runs]
    names = list(rows[0]['probe_gap'])
    print(f"\n{len(items):,} items, {a.levels} x {a.k}; every gap is against residual_init seed 0 (recon MSE {ref_m['mse']:.4g}, "
          f"neighbour d1 {ref_m['neighbour_d1']:.4f}, collisions {ref_m['collide']:.5f}), paired s.e. after ±\n")
    print('| codes | ' + ' | '.join(names) + ' | rows 2 s.e. below | recon / seed 0 | neighbour d1 | collisions |')
    print('|---|' + '---|' * (len(names) + 4))
    for r in rows:
        print(f"| residual_init seed {r['seed']} | {fmt(r['probe_gap'])} | {len(r['worse'])} | {r['mse'] / ref_m['mse']:.4f} | {r['neighbour_d1']:.4f} | {r['collide']:.5f} |")
    for r in runs:
        worse = sum(verdict(g['delta'], g['se']) == 'worse' for g in r['probe_gap'].values())
        print(f"| {Path(r['run']).stem} (trained) | {fmt(r['probe_gap'])} | {worse} | | | |")
    spread = {p: dict(min=min(r['probe_gap'][p]['delta'] for r in rows), max=max(r['probe_gap'][p]['delta'] for r in rows),
                      sd=float(np.std([r['probe_gap'][p]['delta'] for r in rows], ddof=1)) if len(rows) > 1 else float('nan')) for p in names}
    flagged = sum(bool(r['worse']) for r in rows)
    print(f"\n{flagged} of {len(rows)} inits of another seed have a probe more than 2 paired s.e. below seed 0's; "
          f"per probe, the seeds' gaps span {min(s['min'] for s in spread.values()):+.4f} to {max(s['max'] for s in spread.values()):+.4f}")
    judge = judged(codes, y, a.judge) if a.judge else []
    if judge:
        print(f"\n| seed, judged against the mean of seeds 0-{a.judge - 1} | " + ' | '.join(names) + ' | rows 2 s.e. below |\n|---|' + '---|' * (len(names) + 1))
        for r in judge: print(f"| {r['seed']} | {fmt(r['gap'])} | {len(r['worse'])} |")
        old = sum(bool(r['worse']) for r in rows if r['seed'] >= a.judge)
        print(f"\nfalse alarms on seeds {a.judge}-{a.seeds - 1}: against {a.judge} inits {sum(bool(r['worse']) for r in judge)} of {len(judge)}; "
              f"against seed 0 alone {old} of {len(judge)}")
    out = dict(catalog=a.catalog or f'WordNet {a.n or "all"}', items=len(items), levels=a.levels, k=a.k, threads=a.threads,
               reference=dict(seed=0, mse=ref_m['mse'], neighbour_d1=ref_m['neighbour_d1'], collide=ref_m['collide']),
               seeds=rows, spread=spread, flagged=flagged, runs=runs, judge=a.judge, judged=judge)
    write_result(a.out, out)

if __name__ == '__main__': main()
