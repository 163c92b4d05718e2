"""GPU check: faiss-gpu constrained k-means and a CUDA training step agree with the CPU, and how much faster they are.

Run on a machine with CUDA and faiss-gpu (`pip install -e .[gpu]`): `python bench/devices/gpu_check.py`.
On a machine without them it runs the CPU half and records that the GPU half was skipped, so the script itself
is tested here. Writes `bench/results/gpu.json` and prints a table of GPU/CPU ratios measured in the same run.

Checks (each a line of the table, and `ok` in the JSON):
- k-means: `constrained_kmeans` with `gpu=True` and `gpu=False` from the same seed: sizes within the bounds on
  both, inertia within 1% (nearest-centroid ties may break differently on the GPU), and the time of each;
  with several GPUs, the queries are split over all of them.
- residual init: 8 levels of 256 codes on 100k x 32, CPU against GPU.
- training: the same tokenizer state and batches, 20 steps on the CPU and 20 on CUDA with TF32 off; every loss
  within 1e-3 relative for the first 5 steps; median step time of each.
- encoding: items per second on the CPU, one GPU, and every visible GPU (`encode(..., devices='all')`).
"""
import argparse, copy, json, platform, sys, time
from pathlib import Path
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, write_result
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.kmeans import constrained_kmeans, residual_init, letter_bounds, faiss_gpus, import_faiss, inertia
from letter8_tokenizer.model import build_tokenizer, encode
from letter8_tokenizer.train import make_optimizer, train_step, init_codebooks
from letter8_tokenizer.data import synthetic_catalog

def timed(fn, *a, **kw):
    t = time.perf_counter(); out = fn(*a, **kw); return out, time.perf_counter() - t

def mixture(n, d, k, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d)).astype(np.float32) * 3
    return (centres[rng.integers(k, size=n)] + rng.normal(size=(n, d)).astype(np.float32)).astype(np.float32)

def check_kmeans(gpu, n):
    x, k = mixture(n, 32, 256), 256
    lo, hi = letter_bounds(n, k)
    rows = {}
    for name, use in [('cpu', False)] + ([('gpu', True)] if gpu else []):
        (C, labels), secs = timed(constrained_kmeans, x, k, lo, hi, seed=0, gpu=use)
        sizes = np.bincount(labels, minlength=k)
        rows[name] = dict(seconds=secs, inertia=float(inertia(x, C, labels)), size_min=int(sizes.min()), size_max=int(sizes.max()),
                          bounds_ok=bool(sizes.min() >= lo and sizes.max() <= hi))
    out = dict(n=n, k=k, bounds=[lo, hi], gpus=faiss_gpus(), **rows)
    if gpu:
        out['inertia_ratio'] = rows['gpu']['inertia'] / rows['cpu']['inertia']
        out['speedup'] = rows['cpu']['seconds'] / rows['gpu']['seconds']
        out['ok'] = rows['cpu']['bounds_ok'] and rows['gpu']['bounds_ok'] and abs(out['inertia_ratio'] - 1) < 0.01
    else: out['ok'] = rows['cpu']['bounds_ok']
    return out

def check_residual_init(gpu, n):
    x = mixture(n, 32, 512, seed=1)
    out = {}
    for name, use in [('cpu', False)] + ([('gpu', True)] if gpu else []):
        init, secs = timed(residual_init, x, levels=8, k=256, seed=0, gpu=use)
        out[name] = dict(seconds=secs)
    if gpu: out['speedup'] = out['cpu']['seconds'] / out['gpu']['seconds']
    return out

def check_training(cuda, tmp, steps=20):
    items = synthetic_catalog(tmp/'catalog', n_items=20_000, dim=768, cf_dim=32)
    cfg = override(Config(), {'model.hidden': [2048, 1024, 512, 256, 128, 64], 'optim.batch_size': 1024, 'quantizer.init_sample': 20_000})
    cpu_model = build_tokenizer(cfg, items)
    init_codebooks(cpu_model, items)
    batches = [b for _, b in zip(range(steps), items.batches(1024, seed=0))]
    def run(device):
        torch.manual_seed(0)
        model = copy.deepcopy(cpu_model).to(device); opt = make_optimizer(model)
        model.groups = [g.to(device) for g in cpu_model.groups]
        losses, times = [], []
        for b in batches:
            if device.type == 'cuda': torch.cuda.synchronize()
            t = time.perf_counter()
            losses.append(train_step(model, opt, b.emb, b.cf))
            if device.type == 'cuda': torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        return losses, float(np.median(times[2:]))
    cpu_losses, cpu_s = run(torch.device('cpu'))
    out = dict(steps=steps, batch=1024, in_dim=768, cpu_step_s=cpu_s)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False
        gpu_losses, gpu_s = run(torch.device('cuda', 0))
        rel = [max(abs(g[k] - c[k]) / max(abs(c[k]), 1e-8) for k in c) for c, g in zip(cpu_losses, gpu_losses)]
        out.update(gpu_step_s=gpu_s, speedup=cpu_s / gpu_s, loss_rel_diff_first5=max(rel[:5]), loss_rel_diff_all=max(rel),
                   ok=max(rel[:5]) < 1e-3, device=torch.cuda.get_device_name(0))
    else: out['ok'] = True
    return out, items, cfg

def check_encoding(cuda, items, cfg):
    model = build_tokenizer(cfg, items).eval()
    out = {}
    targets = [('cpu', None)] + ([('gpu', torch.device('cuda', 0)), ('all_gpus', 'all')] if cuda else [])
    ref = None
    for name, dev in targets:
        m = model if name == 'cpu' else copy.deepcopy(model).to('cuda')
        codes, secs = timed(encode, m, items, devices=None if name != 'all_gpus' else 'all')
        if ref is None: ref = codes
        out[name] = dict(items_per_s=len(items) / secs, agree_with_cpu=float((codes == ref).all(1).mean()))
    return out

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=200_000, help='points for the k-means check')
    ap.add_argument('--out', default=str(RESULTS/'gpu.json'))
    args = ap.parse_args()
    import tempfile
    cuda, gpu = torch.cuda.is_available(), faiss_gpus() > 0
    env = dict(python=platform.python_version(), torch=torch.__version__, faiss=import_faiss().__version__, cuda=cuda,
               gpus=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [], faiss_gpus=faiss_gpus())
    print(json.dumps(env), flush=True)
    res = dict(env=env, skipped=[] if (cuda and gpu) else ['GPU half: ' + ('no CUDA' if not cuda else 'faiss sees no GPU (install faiss-gpu)')])
    res['kmeans'] = check_kmeans(gpu, args.n); print('kmeans', res['kmeans'], flush=True)
    res['residual_init'] = check_residual_init(gpu, min(args.n, 100_000)); print('residual_init', res['residual_init'], flush=True)
    with tempfile.TemporaryDirectory() as d:
        res['training'], items, cfg = check_training(cuda, Path(d)); print('training', res['training'], flush=True)
        res['encoding'] = check_encoding(cuda, items, cfg); print('encoding', res['encoding'], flush=True)
    rows = [('constrained k-means, s', res['kmeans']['cpu']['seconds'], res['kmeans'].get('gpu', {}).get('seconds')),
            ('residual init 8x256, s', res['residual_init']['cpu']['seconds'], res['residual_init'].get('gpu', {}).get('seconds')),
            ('training step, s', res['training']['cpu_step_s'], res['training'].get('gpu_step_s')),
            ('encode, items/s', res['encoding']['cpu']['items_per_s'], res['encoding'].get('gpu', {}).get('items_per_s'))]
    print("\n| check | CPU | GPU | GPU vs CPU |\n|---|---|---|---|")
    for name, c, g in rows:
        ratio = '-' if g is None else (f"{g / c:.1f}x" if 'items/s' in name else f"{c / g:.1f}x faster")
        print(f"| {name} | {c:.3g} | {'-' if g is None else f'{g:.3g}'} | {ratio} |")
    res['ok'] = all(res[k].get('ok', True) for k in ('kmeans', 'training'))
    print(f"\nok={res['ok']}; skipped: {res['skipped'] or 'nothing'}")
    write_result(args.out, res)
    sys.exit(0 if res['ok'] else 1)

if __name__ == '__main__': main()
