"""Data-parallel training against one process: how close the results are, and what the ranks cost, in one run.

  python bench/devices/ddp.py                   # 2,000 items, 64 steps; 1, 2 and 3 ranks (~1 min on 2 cores)
  python bench/devices/ddp.py --items 4000 --epochs 10 --ranks 1 2

Each world size trains the same run from scratch with `train_distributed` (gloo on a CPU machine, NCCL on GPUs);
world size 1 is the plain `train_segment` in this process, the reference. For every run it reports the largest
weight difference and the largest relative loss difference (over every logged step and loss term) from the
reference, the step at which a loss first differs by more than 1e-5, and the wall time, as a ratio to the
reference. Wall time includes torchrun's start-up; on a CPU machine the ranks share the same cores, so the
times say what the collectives and processes cost, not how training scales on GPUs.
Writes bench/results/ddp.json.
"""
import argparse, shutil, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, write_result
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.checkpoint import Checkpointer
from letter8_tokenizer.train import train_segment, train_distributed

def compare(ref, got):
    a, b = ref.state['model'], got.state['model']
    weight = max((a[k].float() - b[k].float()).abs().max().item() for k in a if a[k].is_floating_point())
    rels = [(x['step'], max(abs(x[k] - y[k]) / max(abs(x[k]), 1e-9) for k in x if k not in ('step', 'epoch')))
            for x, y in zip(ref.meta['history'], got.meta['history'])]
    first = next((s for s, r in rels if r > 1e-5), None)
    return dict(max_weight_diff=weight, max_loss_rel_diff=max(r for _, r in rels), first_step_over_1e5=first)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--items', type=int, default=2000)
    ap.add_argument('--epochs', type=int, default=4)
    ap.add_argument('--batch', type=int, default=128)
    ap.add_argument('--ranks', type=int, nargs='+', default=[1, 2, 3])
    ap.add_argument('--out', default=str(RESULTS/'ddp.json'))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix='bench-ddp-'))
    try:
        items = synthetic_catalog(tmp/'catalog', n_items=args.items, dim=32)
        cfg = override(Config(), {'model.hidden': [64, 32], 'model.e_dim': 8, 'model.codebook_size': 16, 'optim.batch_size': args.batch,
                                  'optim.epochs': args.epochs, 'schedule.save_every_steps': 4, 'schedule.log_every_s': 3600})
        rows = []
        for n in sorted(set([1, *args.ranks])):
            t = time.perf_counter()
            r = (train_segment(cfg, items, tmp/f'w{n}', progress=False) if n == 1
                 else train_distributed(cfg, items, tmp/f'w{n}', nproc=n, progress=False))
            rows.append(dict(ranks=n, steps=r.step, seconds=time.perf_counter() - t))
            print(f"{n} rank(s): {r.step} steps in {rows[-1]['seconds']:.1f} s", flush=True)
        ref = Checkpointer(tmp/'w1').load()
        for row in rows:
            row.update(compare(ref, Checkpointer(tmp/f"w{row['ranks']}").load()), time_vs_one=row['seconds'] / rows[0]['seconds'])
    finally: shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{args.items} items, batch {args.batch}, {args.epochs} epochs; reference: one process\n")
    print("| ranks | steps | max weight diff | max loss rel diff | first step > 1e-5 | time | vs one process |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['ranks']} | {r['steps']} | {r['max_weight_diff']:.1e} | {r['max_loss_rel_diff']:.1e} | {r['first_step_over_1e5'] or '-'} "
              f"| {r['seconds']:.1f} s | {r['time_vs_one']:.2f}x |")
    write_result(args.out, dict(args={k: v for k, v in vars(args).items() if k != 'out'}, rows=rows))

if __name__ == '__main__': main()
