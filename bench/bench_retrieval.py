"""Generative retrieval on LETTER's Amazon Beauty: LETTER's released IDs vs random IDs of the same shape (3 seeds)
vs plain item IDs (vs RQ-KMeans IDs of an item embedding built from the training interactions only).

  .venv/bin/python bench/bench_retrieval.py                      # every scheme, full data
  .venv/bin/python bench/bench_retrieval.py --users 3000 --epochs 2 --schemes letter,random   # a quick slice

Prints a table (mean ± half the spread over seeds), each scheme's ratio to the random IDs' mean, whether LETTER's
IDs beat random IDs by more than the spread over seeds on Recall@10 and NDCG@10, the time per scheme and the
machine's load; writes bench/results/retrieval.json (and the HTML report next to it with --report).
The data is read from ../shared/data/beauty (never copied into the project)."""
import argparse, json, os, platform, subprocess, sys, time
from pathlib import Path
import numpy as np
import torch
from letter8_tokenizer.retrieval import (scheme_from_index_json, random_like, item_scheme, rqkmeans_scheme, evaluate_scheme,
                                         results_table, summarise, write_retrieval_report, retriever_config, METRICS,
                                         paired_table, paired_markdown)
from letter8_tokenizer.sequences import read_inter_json, leave_one_out, from_lists, check_no_leakage

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent/'shared'/'data'/'beauty'


def cooc_embedding(split, dim=64, seed=0):
    "Item vectors from the training interactions only: truncated SVD of the item-item co-occurrence within a window."
    from scipy.sparse import coo_matrix
    from scipy.sparse.linalg import svds
    inter, n = split.inter, split.inter.n_items
    # each training sample's target with the previous 3 items of its history (training positions only)
    items, rows, cols = np.asarray(inter.items), [], []
    for back in (1, 2, 3):
        ok = split.train[:, 1] - back >= split.train[:, 0]
        rows.append(items[split.train[ok, 1]]); cols.append(items[split.train[ok, 1] - back])
    r, c = np.concatenate(rows), np.concatenate(cols)
    m = coo_matrix((np.ones(2 * len(r)), (np.r_[r, c], np.r_[c, r])), shape=(n, n)).tocsr()
    m.data = np.log1p(m.data)
    deg = np.asarray(m.sum(1)).ravel() + 1.0
    m = m.multiply(1 / np.sqrt(deg)[:, None]).multiply(1 / np.sqrt(deg)[None]).tocsr()
    u, s, _ = svds(m, k=dim, random_state=seed)
    x = u * np.sqrt(s)
    return (x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-8)).astype(np.float32)


def subset(inter, n_users):
    "The first n_users users (all items kept), for quick slices."
    if not n_users or n_users >= len(inter): return inter
    return from_lists([inter[u].tolist() for u in range(n_users)], inter.n_items, inter.users[:n_users])


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--data', default=str(DATA), help='folder with Beauty.inter.json and Beauty.index.json')
    p.add_argument('--schemes', default='letter,random,items,cooc', help='comma list of letter, random, items, cooc')
    p.add_argument('--seeds', default='0,1,2', help='random-ID seeds, a comma list')
    p.add_argument('--users', type=int, default=0, help='use only the first N users (0: all)')
    p.add_argument('--epochs', type=int, default=8, help='at most this many epochs per scheme')
    p.add_argument('--patience', type=int, default=2)
    p.add_argument('--valid-users', type=int, default=1000)
    p.add_argument('--history', default='items', help="'items' (fast) or 'tokens' (TIGER's flattened input)")
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--test-users', type=int, default=0, help='score a fixed random sample of this many test users (0: all)')
    p.add_argument('--out', default=str(ROOT/'bench'/'results'/'retrieval.json'))
    p.add_argument('--report', default='', help='also write the HTML/PNG report into this folder')
    p.add_argument('--combine', nargs='*', default=None, help='only merge the rows of these result JSONs (runs split over processes) into --out')
    a = p.parse_args()
    if a.combine is not None:
        docs = [json.loads(Path(f).read_text()) for f in a.combine]
        meta = dict(docs[0]['meta'], parts=[d['meta'] for d in docs], combined=a.combine)
        return report([r for d in docs for r in d['results']], meta, a.out, a.report)
    torch.set_num_threads(a.threads)
    data = Path(a.data)
    t0 = time.perf_counter()
    inter = subset(read_inter_json(data/'Beauty.inter.json'), a.users)
    split = leave_one_out(inter, 20)
    check_no_leakage(split)
    test = split.test
    if a.test_users and a.test_users < len(test): test = test[np.sort(np.random.default_rng(12345).choice(len(test), a.test_users, replace=False))]
    cfg = retriever_config(dict(epochs=a.epochs, patience=a.patience, valid_users=a.valid_users, history=a.history))
    print(f"{inter}; {split}; read + split {time.perf_counter() - t0:.1f} s; config {cfg}", flush=True)
    letter = scheme_from_index_json(data/'Beauty.index.json', n_items=inter.n_items, sizes=256, name="LETTER's released IDs")
    want = a.schemes.split(',')
    schemes = []
    if 'letter' in want: schemes.append((letter, 'letter'))
    if 'random' in want: schemes += [(random_like(letter, int(seed)), 'random') for seed in a.seeds.split(',')]
    if 'items' in want: schemes.append((item_scheme(inter.n_items), 'item ids'))
    if 'cooc' in want:
        t = time.perf_counter()
        emb = cooc_embedding(split)
        schemes.append((rqkmeans_scheme(emb, levels=4, k=256, name='rq-kmeans of training co-occurrence'), 'rq-kmeans (train cooc)'))
        print(f"co-occurrence SVD + RQ-KMeans: {time.perf_counter() - t:.1f} s; {schemes[-1][0]}", flush=True)
    rows = []
    for s, g in schemes:
        print(f"--- {s}", flush=True)
        r = evaluate_scheme(s, split, cfg, group=g, test=test, log=lambda row: print('   ', {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True))
        r['load_after'] = os.getloadavg()
        print("    test: " + ', '.join(f"{m} {r[m]:.4f}" for m in METRICS) + f"; train {r['train_s']:.0f} s (cpu {r['train_cpu_s']:.0f}), test {r['test_s']:.0f} s (cpu {r['test_cpu_s']:.0f}), "
              f"{r['epochs']} epochs (best {r['best_epoch']}), load {os.getloadavg()[0]:.1f}", flush=True)
        rows.append(r)
    meta = dict(data=str(data), users=len(inter), config=cfg.__dict__, threads=a.threads, python=platform.python_version(),
                torch=torch.__version__, cpus=os.cpu_count(), uptime=subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip(),
                total_s=round(time.perf_counter() - t0, 1), argv=sys.argv[1:])
    report(rows, meta, a.out, a.report)


def report(rows, meta, out, report_dir=''):
    "Print the table, the ratios to random IDs and the bar's verdict; write the JSON (and the HTML report)."
    print(results_table(rows))
    summ = {r['group']: r for r in summarise(rows)}
    verdict = {}
    if 'random' in summ:
        rnd = summ['random']
        for g, r in summ.items():
            print(f"{g:40s} " + '  '.join(f"{m} x{r[m] / rnd[m]:.2f}" if rnd[m] > 0 else f"{m} n/a" for m in METRICS))
        if 'letter' in summ:
            for m in ('recall@10', 'ndcg@10'):
                verdict[m] = dict(letter=summ['letter'][m], random_mean=rnd[m], random_spread=rnd[m + '_spread'],
                                  beats=bool(summ['letter'][m] - rnd[m] > rnd[m + '_spread']))
            print('LETTER beats random by more than the seed spread:', verdict)
    meta = dict(meta, verdict=verdict)
    pairs = paired_table(rows) if all('ranks' in r for r in rows) and len(summ) > 1 else []
    if pairs: print(paired_markdown(pairs))
    out = Path(out); out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(meta=meta, summary=list(summ.values()), paired=pairs, results=[{k: v for k, v in r.items() if k != 'ranks'} for r in rows]), indent=1))
    if report_dir: write_retrieval_report(rows, report_dir, meta)
    print(f"wrote {out}; {meta.get('uptime', '')}")


if __name__ == '__main__': main()
