"""How long does the judge take to converge on one scheme? The slowest scheme of the length table, trained and scored.

The judge's verdicts need converged models (each scheme stops when its validation NDCG@10 has stopped improving,
under an epoch cap it does not reach), and the length table trains about a dozen schemes, so one scheme's time is
the judge's unit of cost. This script trains the default judge (the small preset; the Beauty judge's cap and
patience, as `bench/judge/beauty.py` sets them) on one scheme, by default the kit's 8-letter IDs of a judge run,
the slowest shape, until it stops, then scores every test user of Beauty, and reports the seconds of each part,
the best epoch and whether it converged. The bar: converged and scored within 15 minutes on 2 cores.

  python bench/judge/converge.py --ids <work>/judge/codes --threads 2
  python bench/judge/converge.py --ids <work>/judge/codes --threads 2 --set '{"dropout": 0.0}'   # a candidate

Writes bench/results/judge_converge.json (the row without per-user ranks, with each epoch's validation scores). The
data are read from <data>/beauty (bench/common.py: --data, $LETTER8_DATA).
"""
import argparse, json, sys, time
from dataclasses import asdict
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, add_data_flag, beauty, write_result
from letter8_tokenizer.sequences import read_interactions, leave_one_out
from letter8_tokenizer.ids import load_scheme
from letter8_tokenizer.retriever import retriever_config
from letter8_tokenizer.judge import evaluate_scheme

BAR_S = 15 * 60

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_data_flag(ap)
    ap.add_argument('--ids', required=True, help="the scheme (`ids.load_scheme`): e.g. a judge run's <work>/judge/codes")
    ap.add_argument('--epochs', type=int, default=100, help="the epoch cap (the Beauty judge's)")
    ap.add_argument('--patience', type=int, default=5, help="epochs without a better validation NDCG@10 before it stops (the Beauty judge's)")
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--set', default='{}', help='JSON of retriever config overrides, e.g. \'{"dropout": 0.0}\' (default: the default judge)')
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--out', default=str(RESULTS/'judge_converge.json'))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    split = leave_one_out(read_interactions(beauty(a.data)/'Beauty.inter.json'), retriever_config().max_len)
    scheme = load_scheme(a.ids, split.inter.n_items)[0]
    cfg = retriever_config(dict(json.loads(a.set), epochs=a.epochs, patience=a.patience, seed=a.seed))
    row = evaluate_scheme(scheme, split, cfg, log=lambda r: print(r, flush=True))
    total = time.perf_counter() - t0
    row = {k: v for k, v in row.items() if k != 'ranks'}
    verdict = ('converged' if row['converged'] else 'not converged') + f" and scored in {total / 60:.1f} min: " + \
              ('within' if total <= BAR_S and row['converged'] else 'over') + f" the bar of {BAR_S // 60} minutes"
    print(f"{scheme.name}: best epoch {row['best_epoch']} of {row['epochs']} (cap {row['cap']}); train {row['train_s']:.0f} s, "
          f"test {row['test_s']:.0f} s on {row['test_users']} users; Recall@10 {row['recall@10']:.4f} NDCG@10 {row['ndcg@10']:.4f}; {verdict}")
    write_result(a.out, dict(meta=dict(data='beauty', ids=Path(a.ids).name, threads=a.threads, config=asdict(cfg), bar_s=BAR_S),
                             note=f"One seed, one scheme ({len(scheme.base_sizes)} letters): {verdict}.",
                             total_s=round(total, 1), row=row))

if __name__ == '__main__': main()
