"""SASRec CF embeddings on LETTER's Amazon Beauty: the kit's CF model against the numbers the literature reports.

  python bench/judge/cf.py                                  # <data>/beauty/Beauty.inter.json (bench/common.py: --data, $LETTER8_DATA)
  python bench/judge/cf.py --epochs 60 --patience 6 --device cuda     # bench/results/cf.json
  python bench/judge/cf.py --cf-out <folder>/beauty_cf.npy             # and keep the CF table

Leave-one-out with full ranking over all 12,101 items (TIGER's and LETTER's protocol). Peers, as published for the
same protocol on Amazon Beauty: SASRec in TIGER (Rajput et al., NeurIPS 2023, Table 2) and in the open
reimplementation genrec (cross-entropy SASRec). Prints a table with our numbers, theirs and the ratios, and writes
JSON with the per-epoch history. The data are read from the path given, never copied into the project.
"""
import argparse, sys, time
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, add_data_flag, beauty, write_result
from letter8_tokenizer.sequences import read_inter_json, leave_one_out
from letter8_tokenizer.cf import CFConfig, CFTask, fit_cf, save_cf

PUBLISHED = {  # SASRec on Amazon Beauty, leave-one-out, full ranking
    'SASRec (TIGER, Table 2)': {'recall@5': 0.0387, 'ndcg@5': 0.0249, 'recall@10': 0.0605, 'ndcg@10': 0.0318},
    'SASRec, cross-entropy (genrec)': {'recall@5': 0.0469, 'ndcg@5': 0.0305, 'recall@10': 0.0688, 'ndcg@10': 0.0375},
}

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_flag(ap)
    ap.add_argument('--epochs', type=int, default=200)
    ap.add_argument('--patience', type=int, default=10)
    ap.add_argument('--dim', type=int, default=64)
    ap.add_argument('--dropout', type=float, default=0.5)
    ap.add_argument('--threads', type=int, default=0, help='torch threads (0: leave as is)')
    ap.add_argument('--device', default=None)
    ap.add_argument('--out', default=str(RESULTS/'cf.json'))
    ap.add_argument('--cf-out', default=None, help='also write the CF table here (.npy)')
    a = ap.parse_args()
    if a.threads: torch.set_num_threads(a.threads)
    t0 = time.time()
    split = leave_one_out(read_inter_json(beauty(a.data)/'Beauty.inter.json'))
    cfg = CFConfig(dim=a.dim, epochs=a.epochs, patience=a.patience, dropout=a.dropout)
    trainer = CFTask(split, cfg, device=a.device)
    res = fit_cf(trainer)
    secs = time.time() - t0
    if a.cf_out: save_cf(trainer.model, a.cf_out)
    print(f"\n{split}\ntrained {len(trainer.history)} epochs (best {res['best_epoch']}) in {secs:.0f} s on {trainer.device}\n")
    print("| model | Recall@5 | NDCG@5 | Recall@10 | NDCG@10 | ours / theirs (NDCG@10) |\n|---|---|---|---|---|---|")
    ours = res['test']
    print(f"| letter8 SASRec (this run) | {ours['recall@5']:.4f} | {ours['ndcg@5']:.4f} | {ours['recall@10']:.4f} | {ours['ndcg@10']:.4f} | - |")
    for name, m in PUBLISHED.items():
        print(f"| {name} | {m['recall@5']:.4f} | {m['ndcg@5']:.4f} | {m['recall@10']:.4f} | {m['ndcg@10']:.4f} | {ours['ndcg@10'] / m['ndcg@10']:.2f} |")
    out = dict(data='beauty/Beauty.inter.json', split=repr(split), config=cfg.__dict__, device=str(trainer.device), seconds=secs, epochs=len(trainer.history),
               best_epoch=res['best_epoch'], valid=res['valid'], test=ours, published=PUBLISHED, history=res['history'])
    write_result(a.out, out)

if __name__ == '__main__': main()
