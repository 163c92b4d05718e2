"""What crash safety costs: plain torch.save against our atomic commit and our asynchronous save, same state, one run.

  python bench/checkpoint/save.py                  # ~50M params + Adam (~600 MB), 3 repeats (~1 min)
  python bench/checkpoint/save.py --params 10e6 --repeats 5

The state is an MLP's state_dict plus Adam's (two moments per parameter) plus RNG state, as a training loop
saves it. Measured, each the median over `--repeats` rounds (the methods interleaved within a round):
  torch.save           one file, overwritten in place, no fsync: the common baseline (not crash safe)
  ours blocking        Checkpointer.save(blocking=True): temp dir, fsync every file, sha256, manifest, rename
  ours async: stall    Checkpointer.save(blocking=False) until it returns (CPU snapshot), the training-loop cost
  ours async: commit   the same save until committed in the background thread (wait())
  torch.load           plain load of the torch.save file (weights_only, numpy RNG state allowlisted as ours)
  ours load            Checkpointer.load(): sha256-verify every file, then load
Then the history stall (`--history-steps`, default 400,000): the training-thread blocking time of one save of a run
that far along, as train_segment saves it, before and after the bounded history:
  before               the pre-issue-14 Checkpointer (read from git, --before-rev) with meta.json holding every
                       step's losses, serialised on the training thread
  after: full meta     today's Checkpointer given that same full history (serialised off the training thread)
  after: bounded       today's train_segment meta: a History of at most 2,000 points, plus the rows since the last
                       save (--rows-per-save) appended to metrics.jsonl in the commit
  floor: state only    the same save with an empty meta: what the state alone costs
each as an async save (stall) and as a blocking save (the final save of a segment), median of --repeats.
And the cost of `data_fingerprint` on a --fingerprint-gb memmap (sparse file: page-cache reads, not a cold disk).
Writes bench/results/checkpoint.json (keys of the parts not run are kept from the previous file).
"""
import argparse, importlib.util, json, random, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path
import numpy as np, torch
from torch import nn
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, ROOT, write_result
from letter8_tokenizer.checkpoint import Checkpointer, History, data_fingerprint, rng_state, load_state

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

def checkpoint_before(rev):
    "The checkpoint module as it was at `rev` (before issue 14), or None when git cannot show it."
    try: src = subprocess.run(['git', 'show', f'{rev}:letter8_tokenizer/checkpoint.py'], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError): return None
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader('checkpoint_before', loader=None))
    exec(compile(src, f'{rev}:checkpoint.py', 'exec'), mod.__dict__)
    return mod

def history_rows(n, seed=0):
    "`n` per-step records shaped like train_segment's: step, epoch and eight loss terms rounded to 6 digits."
    rng, terms = random.Random(seed), ['recon', 'codebook', 'commitment', 'cf', 'diversity', 'total', 'latent_spread', 'recon_rel']
    return [dict(step=s, epoch=s // 1000, **{k: round(rng.random() * 3, 6) for k in terms}) for s in range(1, n + 1)]

def history_stall(a, work):
    "Stall and commit time of one save at `a.history_steps` steps of history, before and after; meta.json sizes."
    before = checkpoint_before(a.before_rev)
    model, opt = build(1e6)
    state = lambda: {'model': model.state_dict(), 'opt': opt.state_dict(), 'rng': rng_state()}
    rows = history_rows(a.history_steps)
    hist = History(max_points=2000)
    for r in rows: hist.append(r)
    ledger = [{'segment': f'segment-{i:03d}', 'end_step': i * 1000} for i in range(40)]
    cases = {'after: full meta': (Checkpointer, lambda: dict(history=rows, ledger=ledger), {}),
             'after: bounded': (Checkpointer, lambda: dict(hist.meta(), ledger=ledger), {'rows': rows[-a.rows_per_save:]}),
             'floor: state only': (Checkpointer, lambda: {}, {})}
    if before is not None: cases = {'before': (before.Checkpointer, lambda: dict(history=rows, ledger=ledger), {}), **cases}
    res = {k: {'async_stall_s': [], 'async_commit_s': [], 'blocking_s': []} for k in cases}
    for r in range(a.repeats):
        for name, (cls, meta, kw) in cases.items():
            ck = cls(work/f'hist-{r}-{name.replace(":", "").replace(" ", "_")}', keep=2)
            t = time.perf_counter(); ck.save(a.history_steps, state(), meta(), blocking=False, **kw)
            res[name]['async_stall_s'].append(time.perf_counter() - t)
            ck.wait(); res[name]['async_commit_s'].append(ck.stats[-1]['commit_s'])
            t = time.perf_counter(); ck.save(a.history_steps + 1, state(), meta(), **kw)
            res[name]['blocking_s'].append(time.perf_counter() - t)
            res[name]['meta_json_bytes'] = (ck.last_committed/'meta.json').stat().st_size
    return {k: {**{m: statistics.median(v[m]) for m in ('async_stall_s', 'async_commit_s', 'blocking_s')},
                'meta_json_bytes': v['meta_json_bytes'], 'all': v} for k, v in res.items()}, before is not None

def fingerprint_cost(gb, work):
    "Seconds `data_fingerprint` takes on a sparse float32 memmap of `gb` GB with 768 columns (page-cache reads)."
    n = int(gb * 1e9 / (768 * 4))
    arr = np.lib.format.open_memmap(work/'big.npy', 'w+', np.float32, (n, 768)); del arr
    mm = np.load(work/'big.npy', mmap_mode='r')
    times = []
    for _ in range(3):
        t = time.perf_counter(); data_fingerprint(mm); times.append(time.perf_counter() - t)
    (work/'big.npy').unlink()
    return {'rows': n, 'gb': gb, 'median_s': statistics.median(times), 'all_s': times}

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--params', type=float, default=50e6, help='model parameters (Adam adds 2x in state)')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--dir', default=None, help='where to write (default: a temp dir, removed after)')
    p.add_argument('--out', default=str(RESULTS/'checkpoint.json'))
    p.add_argument('--history-steps', type=int, default=400_000, help='steps of loss history at the measured save')
    p.add_argument('--rows-per-save', type=int, default=1000, help='metrics rows appended by that save')
    p.add_argument('--before-rev', default='ab652b2', help='git revision holding the checkpoint module before issue 14')
    p.add_argument('--fingerprint-gb', type=float, default=2.0, help='size of the memmap data_fingerprint is timed on (0: skip)')
    p.add_argument('--only-history', action='store_true', help='skip the 50M-param save/load comparison')
    a = p.parse_args()
    out = Path(a.out)
    res = json.loads(out.read_text()) if out.exists() else {}
    work = Path(a.dir or tempfile.mkdtemp(prefix='bench_checkpoint_'))
    work.mkdir(parents=True, exist_ok=True)
    try:
        hs, have_before = history_stall(a, work)
        fp = fingerprint_cost(a.fingerprint_gb, work) if a.fingerprint_gb else None
    finally:
        if a.dir is None: shutil.rmtree(work, ignore_errors=True)
    base = hs['before' if have_before else 'after: full meta']
    rows = [dict(case=k, async_stall_s=f"{v['async_stall_s']:.3f}", stall_vs_before=f"{v['async_stall_s'] / base['async_stall_s']:.3f}x",
                 blocking_s=f"{v['blocking_s']:.3f}", blocking_vs_before=f"{v['blocking_s'] / base['blocking_s']:.3f}x",
                 meta_json_MB=f"{v['meta_json_bytes'] / 1e6:.2f}") for k, v in hs.items()]
    print(f"\n## One save at {a.history_steps:,} steps of history (1M params + Adam), median of {a.repeats}\n")
    print(table(rows, list(rows[0])))
    if not have_before: print(f"(git could not show {a.before_rev}: no 'before' row; ratios are against 'after: full meta')")
    if fp: print(f"\ndata_fingerprint on a {fp['gb']:.1f} GB memmap ({fp['rows']:,} x 768 float32): {fp['median_s'] * 1e3:.1f} ms")
    res.update(history_stall=dict(history_steps=a.history_steps, rows_per_save=a.rows_per_save, before_rev=a.before_rev if have_before else None,
                                  repeats=a.repeats, cases=hs, rows=rows), data_fingerprint=fp)
    if a.only_history:
        write_result(out, res)
        return
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
    res.pop('machine', None)  # meta.env says it
    res.update(params=n_params, bytes=size, repeats=a.repeats, median_s=med, all_s=times, rows=rows)
    write_result(out, res)

if __name__ == '__main__': main()
