"""Build (or reuse) the WordNet noun catalog in the cache root and time each step.

  python bench/learning/build_wordnet.py --n 20000        # $LETTER8_CACHE/wordnet-20k, the catalog most benches read
  python bench/learning/build_wordnet.py --n 80000
  python bench/learning/build_wordnet.py --n 0            # all 82,115 synsets (bench/results/build_wordnet-full.json)

The catalog goes to the cache root (`bench/common.py`: $LETTER8_CACHE, else the user's cache folder), where the other
benches find it by its size; --out builds it elsewhere. Prints the time of parsing (the peer: the work that does not
embed), embedding and the whole build, texts per second, and the label classes per level; writes
bench/results/build_wordnet-<n>.json. A second run on the same folder reuses the cache and reports the time of that too.
"""
import argparse, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, wordnet_folder, write_result
from letter8_tokenizer.text import WORDNET_NOUNS, read_synsets, hypernym_chains, wordnet_labels, wordnet_catalog

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=0, help='synsets sampled (0: all)')
    ap.add_argument('--out', default=None, help='catalog folder; default: wordnet-<n> in the cache root')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--batch-size', type=int, default=256)
    ap.add_argument('--source', default=WORDNET_NOUNS)
    ap.add_argument('--rebuild', action='store_true', help='build even when the folder holds a matching catalog')
    ap.add_argument('--results', default=None, help='result file; default bench/results/build_wordnet-<n|full>.json')
    a = ap.parse_args()
    n = a.n or None
    out = Path(a.out) if a.out else wordnet_folder(n)
    t = time.perf_counter()
    every = read_synsets(a.source); labels, _ = wordnet_labels(every, hypernym_chains(every))
    parse_s = time.perf_counter() - t
    t = time.perf_counter()
    items = wordnet_catalog(out, n_items=n, seed=a.seed, source=a.source, batch_size=a.batch_size, rebuild=a.rebuild)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    wordnet_catalog(out, n_items=n, seed=a.seed, source=a.source, batch_size=a.batch_size)
    cached_s = time.perf_counter() - t
    lab = np.asarray(items.labels)
    r = dict(n=len(items), dim=items.dim, out=out.name, parse_s=round(parse_s, 2), build_s=round(build_s, 1),
             cached_s=round(cached_s, 3), texts_per_s=round(len(items) / build_s, 1),
             classes=[int(len(np.unique(lab[:, j]))) for j in range(lab.shape[1])])
    print("| step | seconds | ratio to parse |\n|---|---|---|")
    for k in ('parse_s', 'build_s', 'cached_s'): print(f"| {k[:-2]} | {r[k]} | {r[k] / max(parse_s, 1e-9):.2f} |")
    print(f"{r['n']:,} items x {r['dim']} in {out}; {r['texts_per_s']} texts/s; classes per level {r['classes']}")
    write_result(a.results or RESULTS/f"build_wordnet-{n or 'full'}.json", r)

if __name__ == '__main__': main()
