"""The default tokenizer on a Kaggle TPU session: XLA devices, compilations, steps per second and memory, to report back.

Run it in a Kaggle notebook with a TPU attached (Settings > Accelerator > TPU; `letter8 new NAME --accelerator TPU`), after
the kit's install cell:

  !python bench/devices/kaggle_tpu.py                          # 20,000 x 384 synthetic items, batch 1024, 2 epochs, SPMD over every chip
  !python bench/devices/kaggle_tpu.py --items 2000 --dim 64    # a quick look

and paste the printed table (or the JSON it writes, `tpu_bench.json` by default) into the issue. It trains the default config on
a synthetic catalog twice through the one training loop (`train.train_segment`, the segment notebook's path), each run from a
fresh folder: the first run compiles its graphs, the second finds them compiled, as a long run does after its first epoch. Per run:
steps per second (wall time, k-means init, epoch ends and commits included), compilations per epoch and device-to-host transfers
per step (`torch_xla.debug.metrics`), and the XLA memory of the device (`xm.get_memory_info`; torch_xla gives none for
SPMD's virtual device, so `--no-spmd` shows one chip's) and the host's peak RSS.

It has NOT run on a TPU here: only on XLA's CPU backend (`PJRT_DEVICE=CPU`), which has a TPU's graphs, compilations and
transfers but not its speed or memory. A JSON written on the CPU backend is not a TPU result.
"""
import argparse, os, resource, sys, tempfile, time
from pathlib import Path
import torch_xla  # the XLA device must exist before any autograd runs on the CPU in this process
import torch_xla.runtime as xr
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import write_result

def counts() -> tuple:
    "Compilations and device-to-host transfers so far in this process."
    return tuple((met.metric_data(m) or (0,))[0] for m in ('CompileTime', 'TransferFromDeviceTime'))

def memory(device) -> dict:
    "XLA memory of `device` as torch_xla reports it (its keys differ by backend), and the host's peak RSS in MiB."
    try: info = {k: v for k, v in xm.get_memory_info(device).items()}
    except Exception as e: info = {'unavailable': f"{type(e).__name__}: {e}"[:200]}
    return dict(xla=info, host_peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))

def run(cfg, items, device, folder) -> dict:
    from letter8_tokenizer.train import train_segment
    (c0, x0), t = counts(), time.time()
    r = train_segment(cfg, items, folder, device=device, progress=False)
    (c1, x1), secs = counts(), time.time() - t
    return dict(status=r.status, steps=r.steps, epochs=r.epoch, seconds=round(secs, 2), steps_per_s=round(r.steps / max(secs, 1e-9), 3),
                compilations_per_epoch=round((c1 - c0) / max(r.epoch, 1), 2), transfers_per_step=round((x1 - x0) / max(r.steps, 1), 2),
                final_total=round(r.metrics['total'], 6) if r.metrics else None, ledger=(r.ledger or [{}])[-1], memory=memory(device))

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--items', type=int, default=20_000, help='synthetic catalog rows')
    ap.add_argument('--dim', type=int, default=384, help='embedding width')
    ap.add_argument('--batch', type=int, default=1024, help='batch size (split over the chips under SPMD: a multiple of their count)')
    ap.add_argument('--epochs', type=int, default=2)
    ap.add_argument('--runs', type=int, default=2, help='runs, each from a fresh folder (the first compiles)')
    ap.add_argument('--no-spmd', action='store_true', help='train on one chip only')
    ap.add_argument('--out', default='tpu_bench.json', help='JSON written here')
    a = ap.parse_args()
    if not a.no_spmd: xr.use_spmd()  # before the runtime is asked anything: forced later, it crashed on XLA's CPU backend
    device = torch_xla.device()
    from letter8_tokenizer.config import Config, override
    from letter8_tokenizer.data import synthetic_catalog
    from letter8_tokenizer.distributed import spmd_on
    found = dict(pjrt_device=os.environ.get('PJRT_DEVICE'), device_type=xr.device_type(), xla_devices=xr.global_runtime_device_count(),
                 spmd=spmd_on(), device=str(device))
    print(f"XLA: {found['device_type']}, {found['xla_devices']} device(s), SPMD {'on' if found['spmd'] else 'off'}, training on {device}")
    tmp = Path(tempfile.mkdtemp())
    items = synthetic_catalog(tmp/'catalog', n_items=a.items, dim=a.dim)
    cfg = override(Config(), {'optim.batch_size': a.batch, 'optim.epochs': a.epochs, 'schedule.log_every_s': 3600.0})
    rows = []
    for i in range(a.runs):
        rows.append(dict(run=f"run {i + 1}", **run(cfg, items, device, tmp/f"run-{i}")))
        r = rows[-1]
        print(f"{r['run']:6} {r['status']:6} {r['steps_per_s']:8.2f} steps/s  {r['compilations_per_epoch']:7.1f} compilations/epoch  "
              f"{r['transfers_per_step']:7.1f} transfers/step  {r['seconds']:7.1f} s  host peak RSS {r['memory']['host_peak_rss_mib']} MiB  "
              f"XLA memory {r['memory']['xla']}", flush=True)
    write_result(a.out, dict(args={k: v for k, v in vars(a).items() if k != 'out'}, **found, torch_xla=torch_xla.__version__,
                             kaggle=bool(os.environ.get('KAGGLE_KERNEL_RUN_TYPE')), rows=rows,
                             note=None if found['device_type'] == 'TPU' else f"ran on XLA's {found['device_type']} backend, not a TPU: not a TPU result"))

if __name__ == '__main__': main()
