"""Constrained k-means against its peers, measured in one run on the same data.

  python bench/bench_kmeans.py            # full: 3 seeds at n=20k (k-means-constrained takes ~1 min a seed), 1M, residual init
  python bench/bench_kmeans.py --quick    # 1 seed, smaller large-n case

Prints a table of ratios and writes bench/results/kmeans.json.
"""
import argparse, json, os, platform, time
from pathlib import Path
import numpy as np
import faiss
from letter8_tokenizer.kmeans import constrained_kmeans, residual_init, inertia, letter_bounds

def gaussian_mixture(n, d=32, centers=512, seed=0):
    "Points around `centers` random means, the same for a given seed."
    rng = np.random.default_rng(seed)
    means = rng.normal(0, 3, (centers, d))
    return (means[rng.integers(0, centers, n)] + rng.normal(0, 1, (n, d))).astype(np.float32)

def timed(f):
    t = time.perf_counter(); out = f(); return out, time.perf_counter() - t

def sizes_ok(labels, k, lo, hi):
    s = np.bincount(labels, minlength=k); return bool(s.min() >= lo and s.max() <= hi), int(s.min()), int(s.max())

def run_ours(x, k, seed):
    (C, lab), t = timed(lambda: constrained_kmeans(x, k, seed=seed))
    return dict(time=t, inertia=inertia(x, C, lab), labels=lab)

def run_faiss(x, k, seed):
    def fit():
        km = faiss.Kmeans(x.shape[1], k, niter=20, seed=seed); km.train(x)
        return km.centroids, km.index.search(x, 1)[1][:, 0]
    (C, lab), t = timed(fit)
    return dict(time=t, inertia=inertia(x, C, lab), labels=lab)

def run_kmc(x, k, seed, lo, hi):
    from k_means_constrained import KMeansConstrained
    m = KMeansConstrained(n_clusters=k, size_min=lo, size_max=hi, max_iter=10, n_init=1, random_state=seed)
    _, t = timed(lambda: m.fit(x))
    return dict(time=t, inertia=inertia(x, m.cluster_centers_.astype(np.float32), m.labels_), labels=m.labels_)

def table(rows, cols):
    w = [max(len(str(c)), *(len(str(r[c])) for r in rows)) for c in cols]
    line = lambda vals: '  '.join(str(v).rjust(n) for v, n in zip(vals, w))
    return '\n'.join([line(cols), line(['-'*n for n in w])] + [line([r[c] for c in cols]) for r in rows])

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--quick', action='store_true', help='one seed, 200k instead of 1M')
    p.add_argument('--out', default=str(Path(__file__).parent/'results'/'kmeans.json'))
    a = p.parse_args()
    seeds = [0] if a.quick else [0, 1, 2]
    k, d, res = 256, 32, {}

    # 1. n=20,000 against k-means-constrained (LETTER's peer) and unconstrained faiss
    n = 20_000; x = gaussian_mixture(n, d); lo, hi = letter_bounds(n, k)
    runs = {'letter8 constrained_kmeans': [], 'k-means-constrained': [], 'faiss.Kmeans (unconstrained)': []}
    for s in seeds:
        runs['letter8 constrained_kmeans'].append(run_ours(x, k, s))
        runs['faiss.Kmeans (unconstrained)'].append(run_faiss(x, k, s))
        runs['k-means-constrained'].append(run_kmc(x, k, s, lo, hi))
    ours_t = np.mean([r['time'] for r in runs['letter8 constrained_kmeans']])
    kmc_i = np.mean([r['inertia'] for r in runs['k-means-constrained']])
    rows = []
    for name, rs in runs.items():
        t, i = np.mean([r['time'] for r in rs]), np.mean([r['inertia'] for r in rs])
        ok = all(sizes_ok(r['labels'], k, lo, hi)[0] for r in rs)
        rows.append(dict(method=name, seconds=f'{t:.3f}', time_vs_ours=f'{t/ours_t:.1f}x', inertia=f'{i:.6g}',
                         inertia_vs_kmc=f'{i/kmc_i:.4f}', bounds_exact='yes' if ok else 'no',
                         sizes='%d..%d' % (min(sizes_ok(r['labels'], k, lo, hi)[1] for r in rs), max(sizes_ok(r['labels'], k, lo, hi)[2] for r in rs))))
    print(f"\n## n={n:,}, d={d}, k={k}, bounds [{lo}, {hi}], seeds {seeds} (mean over seeds)\n")
    print(table(rows, ['method', 'seconds', 'time_vs_ours', 'inertia', 'inertia_vs_kmc', 'bounds_exact', 'sizes']))
    res['n20k'] = dict(n=n, d=d, k=k, size_min=lo, size_max=hi, seeds=seeds, rows=rows,
                       per_seed={m: [dict(time=r['time'], inertia=r['inertia']) for r in rs] for m, rs in runs.items()})

    # 2. a million points
    n = 200_000 if a.quick else 1_000_000; x = gaussian_mixture(n, d, seed=1); lo, hi = letter_bounds(n, k)
    ours, faiss_r = run_ours(x, k, 0), run_faiss(x, k, 0)
    ok, smin, smax = sizes_ok(ours['labels'], k, lo, hi)
    rows = [dict(method='letter8 constrained_kmeans', seconds=f"{ours['time']:.2f}", inertia=f"{ours['inertia']:.6g}", bounds_exact='yes' if ok else 'no', sizes=f'{smin}..{smax}'),
            dict(method='faiss.Kmeans (unconstrained)', seconds=f"{faiss_r['time']:.2f}", inertia=f"{faiss_r['inertia']:.6g}",
                 bounds_exact='yes' if sizes_ok(faiss_r['labels'], k, lo, hi)[0] else 'no', sizes='%d..%d' % sizes_ok(faiss_r['labels'], k, lo, hi)[1:])]
    print(f"\n## n={n:,}, d={d}, k={k}, bounds [{lo}, {hi}]\n"); print(table(rows, ['method', 'seconds', 'inertia', 'bounds_exact', 'sizes']))
    res['large'] = dict(n=n, size_min=lo, size_max=hi, rows=rows)

    # 3. residual init, 8 levels x 256 codes on 100k x 32
    x = gaussian_mixture(100_000, d, seed=2)
    init, t = timed(lambda: residual_init(x, levels=8, k=256))
    lo, hi = letter_bounds(len(x), 256)
    ok = all(sizes_ok(init.codes[:, l], 256, lo, hi)[0] for l in range(8))
    print(f"\n## residual_init 8x256 on {len(x):,} x {d}: {t:.2f} s, bounds exact at every level: {ok}")
    print('residual norm after each level: ' + ' '.join(f'{v:.3f}' for v in init.residual_norms))
    res['residual_init'] = dict(n=len(x), d=d, levels=8, k=256, seconds=t, bounds_exact=ok, residual_norms=init.residual_norms.tolist())

    r20 = res['n20k']['per_seed']
    t_ours = np.mean([r['time'] for r in r20['letter8 constrained_kmeans']])
    goals = {'>=100x faster than k-means-constrained': float(np.mean([r['time'] for r in r20['k-means-constrained']]) / t_ours),
             'inertia <= k-means-constrained (ratio)': float(np.mean([r['inertia'] for r in r20['letter8 constrained_kmeans']]) / kmc_i),
             '<=2x unconstrained faiss time (ratio)': float(t_ours / np.mean([r['time'] for r in r20['faiss.Kmeans (unconstrained)']])),
             '1M points <=60 s': ours['time'], 'residual_init 100k <=15 s': t}
    print('\n## goals\n' + '\n'.join(f'{k_}: {v:.3f}' for k_, v in goals.items()))
    res['goals'] = goals
    res['machine'] = dict(cpus=os.cpu_count(), faiss_threads=faiss.omp_get_max_threads(), faiss=faiss.__version__,
                          numpy=np.__version__, python=platform.python_version(), processor=platform.processor() or platform.machine())
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1, default=float))
    print(f'\nwrote {a.out}')

if __name__ == '__main__': main()
