"""Constrained k-means against its peers, measured in one run on the same data.

  python bench/kmeans/constrained.py            # full: 3 seeds at n=20k (k-means-constrained takes ~1 min a seed), 1M, residual init
  python bench/kmeans/constrained.py --kmc-seeds 1   # k-means-constrained on the first seed only (bench/results/kmeans.json)
  python bench/kmeans/constrained.py --quick    # 1 seed, smaller large-n case
  python bench/kmeans/constrained.py --seeds 3 --skip-large --threads 1   # only the n=20k ratios, every method on one thread

At n=20k there are two inputs: a Gaussian mixture and, when the WordNet catalog of 20,000 synsets is in the cache
(`bench/learning/build_wordnet.py --n 20000`; WordNet noun glosses through MiniLM, 384-d), those real embeddings under a fixed random projection to 32-d, the size of
LETTER's encoder output. Per seed the three methods run back to back (ours, faiss, k-means-constrained), so a
busy machine slows all of them alike; ours and faiss (fast) are timed --repeats times per seed, alternating, after
one untimed warm-up call each; times are medians, inertias means. Each method's wall time and
its CPU time (this process, all threads) are both reported: with --threads 1, CPU time is the steadier measure on a
machine that other jobs share.

Prints a table of ratios and writes bench/results/kmeans.json.
"""
import argparse, os, sys, time
from pathlib import Path
import numpy as np
import faiss
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, wordnet_folder, write_result
from letter8_tokenizer.kmeans import constrained_kmeans, residual_init, inertia, letter_bounds

def gaussian_mixture(n, d=32, centers=512, seed=0):
    "Points around `centers` random means, the same for a given seed."
    rng = np.random.default_rng(seed)
    means = rng.normal(0, 3, (centers, d))
    return (means[rng.integers(0, centers, n)] + rng.normal(0, 1, (n, d))).astype(np.float32)

def timed(f):
    "`f()`, its wall seconds, and this process's CPU seconds (all threads) while it ran."
    t, c = time.perf_counter(), time.process_time(); out = f(); return out, time.perf_counter() - t, time.process_time() - c

def sizes_ok(labels, k, lo, hi):
    s = np.bincount(labels, minlength=k); return bool(s.min() >= lo and s.max() <= hi), int(s.min()), int(s.max())

def run_ours(x, k, seed):
    (C, lab), t, c = timed(lambda: constrained_kmeans(x, k, seed=seed))
    return dict(time=t, cpu=c, inertia=inertia(x, C, lab), labels=lab)

def run_faiss(x, k, seed):
    def fit():
        km = faiss.Kmeans(x.shape[1], k, niter=20, seed=seed); km.train(x)
        return km.centroids, km.index.search(x, 1)[1][:, 0]
    (C, lab), t, c = timed(fit)
    return dict(time=t, cpu=c, inertia=inertia(x, C, lab), labels=lab)

def run_kmc(x, k, seed, lo, hi):
    from k_means_constrained import KMeansConstrained
    m = KMeansConstrained(n_clusters=k, size_min=lo, size_max=hi, max_iter=10, n_init=1, random_state=seed)
    _, t, c = timed(lambda: m.fit(x))
    return dict(time=t, cpu=c, inertia=inertia(x, m.cluster_centers_.astype(np.float32), m.labels_), labels=m.labels_)

def table(rows, cols):
    w = [max(len(str(c)), *(len(str(r[c])) for r in rows)) for c in cols]
    line = lambda vals: '  '.join(str(v).rjust(n) for v, n in zip(vals, w))
    return '\n'.join([line(cols), line(['-'*n for n in w])] + [line([r[c] for c in cols]) for r in rows])

WORDNET = wordnet_folder(20000)/'items.npy'

def project32(w):
    "Rows of `w` under a fixed Gaussian random projection to 32-d (seed 0), the size of LETTER's encoder output."
    return w @ np.random.default_rng(0).normal(0, 1 / np.sqrt(32), (w.shape[1], 32)).astype(np.float32)

def datasets(n, real=WORDNET):
    "The n=20k inputs: a Gaussian mixture, and real sentence embeddings projected to 32-d when the file exists."
    out = {'gaussian mixture (512 centres, d=32)': gaussian_mixture(n, 32)}
    real = Path(real)
    if real.exists():
        w = np.load(real)[:n].astype(np.float32)
        out[f'{real.parent.name}/{real.name} ({len(w):,} x {w.shape[1]}' + (', random projection to 32-d)' if w.shape[1] > 32 else ')')] = project32(w) if w.shape[1] > 32 else w
    else: print(f'({real} not built: real-embedding case skipped)')
    return out

def repeated(runs, repeats, x, k, s):
    "Time each of `runs` (name -> run function) `repeats` times on seed `s`, alternating them; the first result with the median times."
    reps = {m: [] for m in runs}
    for _ in range(repeats):
        for m, f in runs.items(): reps[m].append(f(x, k, s))
    return {m: dict(rs[0], time=float(np.median([r['time'] for r in rs])), cpu=float(np.median([r['cpu'] for r in rs]))) for m, rs in reps.items()}

def compare(x, k, seeds, kmc_seeds=None, repeats=3):
    "letter8, faiss and k-means-constrained on the same data, interleaved per seed; rows of medians."
    n = len(x); lo, hi = letter_bounds(n, k)
    try: import k_means_constrained  # noqa: F401
    except ImportError: kmc = False; print('k-means-constrained not installed: its column is skipped')
    else: kmc = kmc_seeds is None or kmc_seeds > 0
    runs = {'letter8 constrained_kmeans': [], 'faiss.Kmeans (unconstrained)': [], **({'k-means-constrained': []} if kmc else {})}
    fast = {'letter8 constrained_kmeans': run_ours, 'faiss.Kmeans (unconstrained)': run_faiss}
    repeated(fast, 1, x, k, seeds[0])  # warm-up: first calls load libraries and fault pages in
    for s in seeds:
        for m, r in repeated(fast, repeats, x, k, s).items(): runs[m].append(r)
        if kmc and (kmc_seeds is None or s < kmc_seeds): runs['k-means-constrained'].append(run_kmc(x, k, s, lo, hi))
    med = {m: float(np.median([r['time'] for r in rs])) for m, rs in runs.items()}
    cpu = {m: float(np.median([r['cpu'] for r in rs])) for m, rs in runs.items()}
    nk = len(runs['k-means-constrained']) if kmc else len(seeds)  # inertias compared over the seeds every method ran
    mean_i = {m: float(np.mean([r['inertia'] for r in rs[:nk]])) for m, rs in runs.items()}
    ref_i = mean_i['k-means-constrained' if kmc else 'letter8 constrained_kmeans']
    rows = []
    for name, rs in runs.items():
        ok = all(sizes_ok(r['labels'], k, lo, hi)[0] for r in rs)
        rows.append(dict(method=name, median_s=f'{med[name]:.3f}', cpu_s=f'{cpu[name]:.3f}', time_vs_ours=f"{med[name]/med['letter8 constrained_kmeans']:.2f}x",
                         inertia=f'{mean_i[name]:.6g}', inertia_vs_kmc=f'{mean_i[name]/ref_i:.4f}' if kmc else '-', bounds_exact='yes' if ok else 'no',
                         sizes='%d..%d' % (min(sizes_ok(r['labels'], k, lo, hi)[1] for r in rs), max(sizes_ok(r['labels'], k, lo, hi)[2] for r in rs))))
    goals = {'ours / faiss time (goal <= 2)': med['letter8 constrained_kmeans'] / med['faiss.Kmeans (unconstrained)'],
             'ours / faiss CPU time': cpu['letter8 constrained_kmeans'] / cpu['faiss.Kmeans (unconstrained)'],
             'ours / faiss inertia': mean_i['letter8 constrained_kmeans'] / mean_i['faiss.Kmeans (unconstrained)']}
    if kmc: goals.update({'k-means-constrained / ours time (goal >= 100)': med['k-means-constrained'] / med['letter8 constrained_kmeans'],
                          'ours / k-means-constrained inertia (goal <= 1)': mean_i['letter8 constrained_kmeans'] / mean_i['k-means-constrained']})
    return dict(n=n, d=x.shape[1], k=k, size_min=lo, size_max=hi, seeds=list(seeds), repeats=repeats, rows=rows, goals=goals,
                per_seed={m: [dict(time=r['time'], cpu=r['cpu'], inertia=r['inertia']) for r in rs] for m, rs in runs.items()})

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--quick', action='store_true', help='one seed, 200k instead of 1M')
    p.add_argument('--seeds', type=int, default=None, help='seeds at n=20k (default 3, --quick 1)')
    p.add_argument('--threads', type=int, default=None, help="faiss OpenMP threads for every method (default: faiss's)")
    p.add_argument('--repeats', type=int, default=3, help='time ours and faiss this many times per seed, alternating (median); k-means-constrained once')
    p.add_argument('--kmc-seeds', type=int, default=None, help='run k-means-constrained (about a minute each) on the first this many seeds only')
    p.add_argument('--real', default=str(WORDNET), help='real embeddings (.npy); projected to 32-d when wider')
    p.add_argument('--skip-large', action='store_true', help='only the n=20k comparison')
    p.add_argument('--out', default=str(RESULTS/'kmeans.json'))
    a = p.parse_args()
    if a.threads: faiss.omp_set_num_threads(a.threads)
    seeds = list(range(a.seeds or (1 if a.quick else 3)))
    k, d, res = 256, 32, dict(load_before=os.getloadavg())
    print(f'faiss threads {faiss.omp_get_max_threads()}, load average {res["load_before"]}')

    # 1. n=20,000 against k-means-constrained (LETTER's peer) and unconstrained faiss, each dataset
    res['n20k'] = {}
    for name, x in datasets(20_000, a.real).items():
        r = res['n20k'][name] = compare(x, k, seeds, a.kmc_seeds, a.repeats)
        print(f"\n## {name}: n={r['n']:,}, k={k}, bounds [{r['size_min']}, {r['size_max']}], seeds {seeds} (median time; mean inertia over the seeds k-means-constrained ran)\n")
        print(table(r['rows'], ['method', 'median_s', 'cpu_s', 'time_vs_ours', 'inertia', 'inertia_vs_kmc', 'bounds_exact', 'sizes']))
        print('\n'.join(f'{g}: {v:.3f}' for g, v in r['goals'].items()))
    if not a.skip_large: large(res, a.quick, k, d)
    res['load_after'] = os.getloadavg()
    res['machine'] = dict(faiss_threads=faiss.omp_get_max_threads())
    print(f"\nload average before {res['load_before']}, after {res['load_after']}")
    write_result(a.out, res)

def large(res, quick, k, d):
    "A million points (200k with --quick), and the 8-level residual init on 100k."
    n = 200_000 if quick else 1_000_000; x = gaussian_mixture(n, d, seed=1); lo, hi = letter_bounds(n, k)
    ours, faiss_r = run_ours(x, k, 0), run_faiss(x, k, 0)
    ok, smin, smax = sizes_ok(ours['labels'], k, lo, hi)
    rows = [dict(method='letter8 constrained_kmeans', seconds=f"{ours['time']:.2f}", inertia=f"{ours['inertia']:.6g}", bounds_exact='yes' if ok else 'no', sizes=f'{smin}..{smax}'),
            dict(method='faiss.Kmeans (unconstrained)', seconds=f"{faiss_r['time']:.2f}", inertia=f"{faiss_r['inertia']:.6g}",
                 bounds_exact='yes' if sizes_ok(faiss_r['labels'], k, lo, hi)[0] else 'no', sizes='%d..%d' % sizes_ok(faiss_r['labels'], k, lo, hi)[1:])]
    print(f"\n## n={n:,}, d={d}, k={k}, bounds [{lo}, {hi}]\n"); print(table(rows, ['method', 'seconds', 'inertia', 'bounds_exact', 'sizes']))
    res['large'] = dict(n=n, size_min=lo, size_max=hi, rows=rows, goal_1M_le_60s=ours['time'])
    x = gaussian_mixture(100_000, d, seed=2)
    init, t, _ = timed(lambda: residual_init(x, levels=8, k=256))
    lo, hi = letter_bounds(len(x), 256)
    ok = all(sizes_ok(init.codes[:, l], 256, lo, hi)[0] for l in range(8))
    print(f"\n## residual_init 8x256 on {len(x):,} x {d}: {t:.2f} s, bounds exact at every level: {ok}")
    print('residual norm after each level: ' + ' '.join(f'{v:.3f}' for v in init.residual_norms))
    res['residual_init'] = dict(n=len(x), d=d, levels=8, k=256, seconds=t, bounds_exact=ok, residual_norms=init.residual_norms.tolist())

if __name__ == '__main__': main()
