"""How far does the depth-1 neighbour ratio move by chance? One table of codes, ten pair draws; and three init seeds.

  python bench/bench_neighbour_noise.py                                   # WordNet 20k (bench/results/neighbour_noise_20k.json)
  python bench/bench_neighbour_noise.py --catalog /work/cache/wordnet-80k --out bench/results/neighbour_noise_80k.json

`neighbour_ratio` draws 20,000 pairs of items sharing a first letter and 20,000 random pairs; `learning_health`
compares the trained codes' ratio with the init's. This fits `residual_init` (8 x 256) on every item with seeds
0-2 and reads each table's ratio with pair seeds 0-9: the spread across pair seeds is the metric's sampling noise,
the spread across init seeds what another k-means run would give. Prints a table; writes JSON.
"""
import argparse, json, platform, sys, time
from pathlib import Path
import numpy as np, torch
from letter8_tokenizer.data import Items
from letter8_tokenizer.kmeans import residual_init
from letter8_tokenizer.probe import neighbour_ratio

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--catalog', default='/work/cache/wordnet-20k', help='a WordNet catalog folder (bench/build_wordnet.py)')
    ap.add_argument('--init-seeds', type=int, default=3)
    ap.add_argument('--pair-seeds', type=int, default=10)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--out', default='bench/results/neighbour_noise_20k.json')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cat = Path(a.catalog)
    x = np.asarray(Items(cat/'items.npy', labels=cat/'labels.npy').emb, np.float32)
    rows = []
    print(f'| init seed | ratio, mean of {a.pair_seeds} pair seeds | s.d. across pair seeds | least | most | init s |\n|---|---|---|---|---|---|')
    for s in range(a.init_seeds):
        t = time.perf_counter(); codes = residual_init(x, levels=8, k=256, seed=s).codes; fit_s = time.perf_counter() - t
        r = [neighbour_ratio(codes, x, seed=p)[0] for p in range(a.pair_seeds)]
        rows.append(dict(init_seed=s, ratios=r, mean=float(np.mean(r)), sd=float(np.std(r, ddof=1)), init_s=round(fit_s, 1)))
        print(f'| {s} | {np.mean(r):.4f} | {np.std(r, ddof=1):.4f} | {min(r):.4f} | {max(r):.4f} | {fit_s:.0f} |')
    means, sd = [r['mean'] for r in rows], float(np.mean([r['sd'] for r in rows]))
    print(f'\nacross init seeds: {min(means):.4f} to {max(means):.4f} (range {max(means) - min(means):.4f}); '
          f'pair-sampling s.d. {sd:.4f}, so a difference of two ratios has s.d. about {np.sqrt(2) * sd:.4f}')
    out = dict(command='python ' + ' '.join(sys.argv), catalog=str(cat), items=len(x), threads=a.threads,
               platform=platform.processor() or platform.machine(), torch=torch.__version__, rows=rows)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True); Path(a.out).write_text(json.dumps(out, indent=1))
    print(f'wrote {a.out}')

if __name__ == '__main__': main()
