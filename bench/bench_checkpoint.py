"""What crash safety costs: plain torch.save against our atomic commit and our asynchronous save, same state, one run.

  python bench/bench_checkpoint.py                  # ~50M params + Adam (~600 MB), 3 repeats (~1 min)
  python bench/bench_checkpoint.py --params 10e6 --repeats 5

The state is an MLP's state_dict plus Adam's (two moments per parameter) plus RNG state, as a training loop
saves it. Measured, each the median over `--repeats` rounds (the methods interleaved within a round):
  torch.save           one file, overwritten in place, no fsync: the common baseline (not crash safe)
  ours blocking        Checkpointer.save(blocking=True): temp dir, fsync every file, sha256, manifest, rename
  ours async: stall    Checkpointer.save(blocking=False) until it returns (CPU snapshot), the training-loop cost
  ours async: commit   the same save until committed in the background thread (wait())
  torch.load           plain load of the torch.save file (weights_only, numpy RNG state allowlisted as ours)
  ours load            Checkpointer.load(): sha256-verify every file, then load
Writes bench/results/checkpoint.json.
"""
import argparse, json, os, platform, shutil, statistics, tempfile, time
from pathlib import Path
import torch
from torch import nn
from letter8_tokenizer.checkpoint import Checkpointer, rng_state, library_versions, load_state

def table(rows, cols):
    w = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    line = lambda r: '| ' + ' | '.join(str(r[c]).ljust(w[c]) for c in cols) + ' |'
    return '\n'.join([line({c: c for c in cols}), '|' + '|'.join('-' * (w[c] + 2) for c in cols) + '|', *map(line, rows)])

def build(params):
    "An MLP of square layers with about `params` parameters, and Adam with its state populated."
    width = 4096 if params >= 20e6 else 1024
    layers = max(1, round(params / (width * width + width)))
    model = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for p in model.parameters(): p.grad = torch.full_like(p, 1e-3)
    opt.step()
    return model, opt

def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--params', type=float, default=50e6, help='model parameters (Adam adds 2x in state)')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--dir', default=None, help='where to write (default: a temp dir, removed after)')
    p.add_argument('--out', default=str(Path(__file__).parent/'results'/'checkpoint.json'))
    a = p.parse_args()
    torch.manual_seed(0)
    model, opt = build(a.params)
    n_params = sum(p.numel() for p in model.parameters())
    state = lambda step: {'model': model.state_dict(), 'opt': opt.state_dict(), 'rng': rng_state(), 'step': step}
    work = Path(a.dir or tempfile.mkdtemp(prefix='bench_checkpoint_'))
    work.mkdir(parents=True, exist_ok=True)
    times = {k: [] for k in ['torch.save', 'ours blocking', 'ours async: stall', 'ours async: commit',
                             'torch.load', 'ours load']}
    try:
        ck = Checkpointer(work/'ours', keep=2)
        step = 0
        for r in range(a.repeats):
            _, t = timed(lambda: torch.save(state(step), work/'plain.pt'))
            times['torch.save'].append(t)
            step += 1
            _, t = timed(lambda: ck.save(step, state(step)))
            times['ours blocking'].append(t)
            step += 1
            t0 = time.perf_counter()
            ck.save(step, state(step), blocking=False)
            times['ours async: stall'].append(time.perf_counter() - t0)
            ck.wait()
            times['ours async: commit'].append(ck.stats[-1]['commit_s'])
            _, t = timed(lambda: load_state(work/'plain.pt'))  # torch.load, weights_only with numpy allowed
            times['torch.load'].append(t)
            got, t = timed(lambda: ck.load())
            assert got.step == step
            times['ours load'].append(t)
            del got
        size = (work/'plain.pt').stat().st_size
    finally:
        if a.dir is None: shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med['torch.save']
    rows = [dict(method=k, seconds=f'{v:.3f}', vs_torch_save=f'{v / base:.2f}x',
                 GB_per_s=f'{size / v / 1e9:.2f}' if 'stall' not in k else '-') for k, v in med.items()]
    print(f"\n## {n_params / 1e6:.1f}M params + Adam: {size / 1e9:.2f} GB per checkpoint, median of {a.repeats}\n")
    print(table(rows, ['method', 'seconds', 'vs_torch_save', 'GB_per_s']))
    print(f"\nasync stall is {100 * med['ours async: stall'] / med['ours async: commit']:.0f}% of its commit time; "
          f"blocking commit costs {med['ours blocking'] / base:.2f}x torch.save")
    res = dict(params=n_params, bytes=size, repeats=a.repeats, median_s=med, all_s=times, rows=rows,
               machine=dict(cpus=os.cpu_count(), torch_threads=torch.get_num_threads(), **library_versions(),
                            processor=platform.processor() or platform.machine()))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(f'wrote {a.out}')

if __name__ == '__main__': main()
