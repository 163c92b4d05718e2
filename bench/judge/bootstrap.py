"""The judge's paired standard error against a bootstrap over users, on LETTER's Amazon Beauty: LETTER's released IDs
against random IDs of their shape, one short run of the small retriever (a few epochs, all test users).

  OMP_NUM_THREADS=1 python bench/judge/bootstrap.py --epochs 2      # about 10-15 minutes on one thread
  python bench/judge/bootstrap.py --epochs 1 --users 3000           # a quick slice

For Recall@10 and NDCG@10 it prints the difference, the paired s.e. (s.d. of per-user differences / sqrt(n)), the
bootstrap s.e. over users and their ratio, and writes bench/results/judge_bootstrap_beauty.json. The data is read from
<data>/beauty (`bench/common.py`: --data, $LETTER8_DATA), never copied into the project."""
import argparse, sys, time
from pathlib import Path
import numpy as np
import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, add_data_flag, beauty, write_result
from letter8_tokenizer.stats import user_scores, paired, bootstrap_se
from letter8_tokenizer.ids import scheme_from_index_json, random_like
from letter8_tokenizer.retriever import retriever_config, METRICS
from letter8_tokenizer.judge import evaluate_scheme, paired_table, PAIRED, judge_note
from letter8_tokenizer.sequences import read_inter_json, leave_one_out, from_lists, check_no_leakage


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_data_flag(p)
    p.add_argument('--users', type=int, default=0, help='only the first N users (0: all)')
    p.add_argument('--epochs', type=int, default=2)
    p.add_argument('--draws', type=int, default=2000, help='bootstrap resamples')
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--out', default=str(RESULTS/'judge_bootstrap_beauty.json'))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    data = beauty(a.data)
    inter = read_inter_json(data/'Beauty.inter.json')
    if a.users: inter = from_lists([inter[u].tolist() for u in range(a.users)], inter.n_items)
    split = leave_one_out(inter, 20); check_no_leakage(split)
    cfg = retriever_config(dict(d_model=64, heads=4, ff=256, history='items', epochs=a.epochs, patience=a.epochs, valid_users=1000))
    letter = scheme_from_index_json(data/'Beauty.index.json', n_items=inter.n_items, sizes=256, name="LETTER's released IDs")
    rows = []
    for s in (letter, random_like(letter, 0)):
        print(f"--- {s}", flush=True)
        rows.append(evaluate_scheme(s, split, cfg, log=lambda r: print('   ', r, flush=True)))
        print('    test: ' + ', '.join(f"{m} {rows[-1][m]:.4f}" for m in METRICS) + f"; train {rows[-1]['train_s']:.0f} s", flush=True)
    pair = paired_table(rows)[0]
    check = {}
    for m in PAIRED:
        sa, sb = (user_scores(np.asarray(r['ranks']['test']))[m] for r in rows)
        d, se = paired(sa, sb); boot = bootstrap_se(sa, sb, a.draws)
        check[m] = dict(diff=d, paired_se=se, bootstrap_se=boot, ratio=se / boot, within_10pct=bool(abs(se / boot - 1) < 0.1), verdict=pair[f'{m}_verdict'])
        print(f"{m}: LETTER - random {d:+.4f}; paired s.e. {se:.5f}, bootstrap s.e. {boot:.5f} ({a.draws} draws), ratio {se / boot:.3f}", flush=True)
    doc = dict(note=(f"A SHORT run ({a.epochs} epochs of the small judge at 64-d, history='items', on {a.threads} CPU thread(s)): it checks the "
                     "paired standard error against a bootstrap over users; its Recall/NDCG are far from converged and are no result about the IDs."),
               judge=judge_note('small'), users=len(split.test), config=cfg.__dict__, check=check, paired=pair,
               results=[{k: v for k, v in r.items() if k not in ('ranks', 'history')} for r in rows], total_s=round(time.perf_counter() - t0, 1))
    write_result(a.out, doc)


if __name__ == '__main__': main()
