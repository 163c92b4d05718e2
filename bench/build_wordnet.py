"""Build (or reuse) the WordNet noun catalog and time each step.

  python bench/build_wordnet.py --n 20000 --out /work/cache/wordnet-20k
  python bench/build_wordnet.py --out /work/cache/wordnet-full          # all 82,115 synsets

Prints the time of parsing (the peer: the work that does not embed), embedding and the whole build, texts per
second, and the label classes per level; writes bench/results/build_wordnet-<n>.json. A second run on the same
folder reuses the cache and reports the time of that too.
"""
import argparse, json, os, platform, time
from pathlib import Path
import numpy as np
from letter8_tokenizer.data import WORDNET_NOUNS, read_synsets, hypernym_chains, wordnet_labels, wordnet_catalog

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=None, help='synsets sampled; default all')
    ap.add_argument('--out', default=None, help='catalog folder; default /work/cache/wordnet-<n|full>')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--batch-size', type=int, default=256)
    ap.add_argument('--source', default=WORDNET_NOUNS)
    ap.add_argument('--rebuild', action='store_true', help='build even when the folder holds a matching catalog')
    a = ap.parse_args()
    out = Path(a.out or f"/work/cache/wordnet-{a.n or 'full'}")
    t = time.perf_counter()
    every = read_synsets(a.source); labels, _ = wordnet_labels(every, hypernym_chains(every))
    parse_s = time.perf_counter() - t
    t = time.perf_counter()
    items = wordnet_catalog(out, n_items=a.n, seed=a.seed, source=a.source, batch_size=a.batch_size, rebuild=a.rebuild)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    wordnet_catalog(out, n_items=a.n, seed=a.seed, source=a.source, batch_size=a.batch_size)
    cached_s = time.perf_counter() - t
    lab = np.asarray(items.labels)
    r = dict(n=len(items), dim=items.dim, out=str(out), parse_s=round(parse_s, 2), build_s=round(build_s, 1),
             cached_s=round(cached_s, 3), texts_per_s=round(len(items) / build_s, 1),
             classes=[int(len(np.unique(lab[:, j]))) for j in range(lab.shape[1])],
             cpus=os.cpu_count(), load=os.getloadavg()[0], host=platform.node(), when=time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()))
    print("| step | seconds | ratio to parse |\n|---|---|---|")
    for k in ('parse_s', 'build_s', 'cached_s'): print(f"| {k[:-2]} | {r[k]} | {r[k] / max(parse_s, 1e-9):.2f} |")
    print(f"{r['n']:,} items x {r['dim']} in {out}; {r['texts_per_s']} texts/s; classes per level {r['classes']}; load {r['load']:.1f} on {r['cpus']} CPUs")
    res = Path(__file__).parent/'results'; res.mkdir(exist_ok=True)
    (res/f"build_wordnet-{a.n or 'full'}.json").write_text(json.dumps(r, indent=1))

if __name__ == '__main__': main()
