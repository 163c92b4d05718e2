"""How far does the depth-1 neighbour ratio move by chance? Exact against drawn pairs, ten pair seeds, three init seeds.

  python bench/learning/neighbour_noise.py                       # WordNet 20k (bench/results/neighbour_noise_20k.json)
  python bench/learning/neighbour_noise.py --n 80000 --threads 2   # WordNet 80k (bench/results/neighbour_noise_80k.json)

`learning_health` compares the trained codes' neighbour ratio with the inits'. This fits `residual_init` (8 x 256)
on every item with seeds 0-2 and reads each table's ratio with pair seeds 0-9, two ways: `neighbour_ratio` as it is
(every pair sharing a first letter measured; 200,000 random pairs for the denominator) and as it was (20,000 drawn
pairs of each kind: `pairs=20_000, max_pairs=0`). The spread across pair seeds is the metric's sampling noise; what
a comparison feels is the spread of the difference between two tables' ratios read with the same seed. The spread
across init seeds is what another k-means run gives. Prints a table; writes JSON.
"""
import argparse, sys, time
from pathlib import Path
import numpy as np, torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, catalog_tag, wordnet, write_result
from letter8_tokenizer.kmeans import residual_init
from letter8_tokenizer.probe import neighbour_ratio

WAYS = {'exact': {}, 'drawn (as it was)': dict(pairs=20_000, max_pairs=0)}

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=20000, help='WordNet synsets (0: all); the catalog is built in the cache root the first time')
    ap.add_argument('--catalog', default=None, help='a catalog folder (items.npy) instead of WordNet')
    ap.add_argument('--init-seeds', type=int, default=3)
    ap.add_argument('--pair-seeds', type=int, default=10)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--out', default=None, help='result file; default bench/results/neighbour_noise_<size>.json')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    x = np.asarray(wordnet(a.n, a.catalog).emb, np.float32)
    rows, ratios = [], {w: [] for w in WAYS}  # ratios[way][init seed] = one ratio per pair seed
    print(f'| init seed | way | ratio, mean of {a.pair_seeds} pair seeds | s.d. across pair seeds | least | most | s per read |\n|---|---|---|---|---|---|---|')
    for s in range(a.init_seeds):
        t = time.perf_counter(); codes = residual_init(x, levels=8, k=256, seed=s).codes; fit_s = time.perf_counter() - t
        for way, kw in WAYS.items():
            t = time.perf_counter(); r = [neighbour_ratio(codes, x, seed=p, depths=1, **kw)[0] for p in range(a.pair_seeds)]
            read_s = (time.perf_counter() - t) / a.pair_seeds
            ratios[way].append(r)
            rows.append(dict(init_seed=s, way=way, ratios=r, mean=float(np.mean(r)), sd=float(np.std(r, ddof=1)), init_s=round(fit_s, 1), read_s=round(read_s, 2)))
            print(f'| {s} | {way} | {np.mean(r):.5f} | {np.std(r, ddof=1):.5f} | {min(r):.5f} | {max(r):.5f} | {read_s:.2f} |')
    summary = {}
    for way, per_init in ratios.items():
        r = np.array(per_init)  # [init seeds, pair seeds]
        diff_sd = float(np.std(r[1:] - r[:1], axis=1, ddof=1).mean()) if len(r) > 1 else float('nan')
        summary[way] = dict(pair_sd=float(np.std(r, axis=1, ddof=1).mean()), diff_sd=diff_sd, init_means=r.mean(1).tolist())
        print(f"\n{way}: pair-seed s.d. {summary[way]['pair_sd']:.5f}; s.d. of another init's ratio minus seed 0's, same pair seed: {diff_sd:.5f}; "
              f"init seeds' means {min(r.mean(1)):.5f} to {max(r.mean(1)):.5f} (range {np.ptp(r.mean(1)):.5f})")
    write_result(a.out or RESULTS/f'neighbour_noise_{catalog_tag(a.n, a.catalog)}.json', dict(catalog=a.catalog or f'WordNet {a.n or "all"}', items=len(x),
                 threads=a.threads, rows=rows, summary=summary))

if __name__ == '__main__': main()
