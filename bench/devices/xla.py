"""The tokenizer on XLA's CPU backend (the stand-in for a TPU) against the eager CPU, through the one training loop.

  PJRT_DEVICE=CPU .venv-xla/bin/python bench/devices/xla.py                           # the issue's size: 20,000 x 384
  PJRT_DEVICE=CPU .venv-xla/bin/python bench/devices/xla.py --items 2000 --dim 64 --batch 256 --out xla_small.json

Needs torch_xla (`make test-xla` builds `.venv-xla`). The same default config and synthetic catalog train twice on each
device, each run from a fresh folder: the first XLA run compiles its graphs, the second finds them compiled, which is
what a long run sees after its first epoch. Per run: steps per second (segment wall time, k-means init, epoch ends and
commits included), compilations per epoch and device-to-host transfers per step (`torch_xla.debug.metrics`; most are
the k-means init's and the commits', which read the state on the host), and the same counts for `train_step` alone. XLA's CPU
backend has a TPU's graphs, compilations and host transfers, not its speed: the XLA-CPU steps per second say nothing of
a TPU's. Prints a table and writes JSON.
"""
import argparse, os, sys, tempfile, time
from pathlib import Path
import torch_xla  # the XLA device must exist before any autograd runs on the CPU in this process
XLA = torch_xla.device()
import torch
import torch_xla.debug.metrics as met
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, write_result
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.train import train_segment
from letter8_tokenizer.model import build_tokenizer
from letter8_tokenizer.train import init_codebooks, make_optimizer, train_step

def counts() -> tuple[int, int]:
    "Compilations and device-to-host transfers so far in this process."
    return tuple((met.metric_data(m) or (0,))[0] for m in ('CompileTime', 'TransferFromDeviceTime'))

def run(cfg, items, device, folder) -> dict:
    (c0, x0), t = counts(), time.time()
    r = train_segment(cfg, items, folder, device=device, progress=False)
    (c1, x1), secs = counts(), time.time() - t
    assert r.status == 'done', r
    return dict(device=str(device), steps=r.steps, epochs=r.epoch, seconds=round(secs, 2), steps_per_s=round(r.steps / secs, 3),
                compilations_per_epoch=round((c1 - c0) / r.epoch, 2), transfers_per_step=round((x1 - x0) / r.steps, 2),
                final_total=round(r.metrics['total'], 6))

def step_transfers(cfg, items, steps:int=8) -> dict:
    "Compilations and transfers of `train_step` alone on XLA (no init, epoch end or commit), after one step to warm up."
    model = build_tokenizer(cfg, items).to(XLA); init_codebooks(model, items); opt = make_optimizer(model)
    batches = list(items.batches(cfg.optim.batch_size, seed=cfg.seed, epoch=0, drop_last=True))[:steps + 1]
    train_step(model, opt, batches[0].emb, batches[0].cf)
    c0, x0 = counts()
    for b in batches[1:]: train_step(model, opt, b.emb, b.cf)
    c1, x1 = counts()
    return dict(steps=len(batches) - 1, compilations=c1 - c0, transfers_per_step=(x1 - x0) / (len(batches) - 1))

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--items', type=int, default=20_000)
    ap.add_argument('--dim', type=int, default=384)
    ap.add_argument('--batch', type=int, default=1024)
    ap.add_argument('--epochs', type=int, default=2)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--out', default=str(RESULTS/'xla.json'))
    a = ap.parse_args()
    if a.items // a.batch < 2: ap.error(f"--items {a.items} makes {a.items // a.batch} full batch(es) of --batch {a.batch}; train_step alone needs 2: give a smaller --batch.")
    torch.set_num_threads(a.threads)
    tmp = Path(tempfile.mkdtemp())
    items = synthetic_catalog(tmp/'catalog', n_items=a.items, dim=a.dim)
    cfg = override(Config(), {'optim.batch_size': a.batch, 'optim.epochs': a.epochs, 'schedule.log_every_s': 3600.0})
    rows = [dict(run=f"{name} #{i + 1}", **run(cfg, items, dev, tmp/f"{name}-{i}")) for name, dev in (('eager cpu', torch.device('cpu')), ('xla cpu', XLA))
            for i in range(2)]
    base = rows[1]['steps_per_s']  # the warm eager run: the peer every run is measured against
    for r in rows: r['speed_vs_eager'] = round(r['steps_per_s'] / base, 3)
    alone = step_transfers(cfg, items)
    print(f"train_step alone on XLA, {alone['steps']} steps after a warm-up: {alone['compilations']} compilations, {alone['transfers_per_step']:.1f} transfers/step")
    for r in rows: print(f"{r['run']:12} {r['steps_per_s']:8.2f} steps/s  {r['speed_vs_eager']:6.2f}x eager  {r['compilations_per_epoch']:7.1f} compilations/epoch  "
                         f"{r['transfers_per_step']:7.1f} transfers/step  {r['seconds']:7.1f} s  total {r['final_total']}")
    write_result(a.out, dict(args={k: v for k, v in vars(a).items() if k != 'out'}, pjrt_device=os.environ.get('PJRT_DEVICE'),
                             torch_xla=torch_xla.__version__, rows=rows, xla_train_step_alone=alone,
                             note="XLA's CPU backend stands in for a TPU: same graphs, compilations and transfers, not a TPU's speed. "
                                  "Not run on a TPU here."))

if __name__ == '__main__': main()
