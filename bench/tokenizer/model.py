"""The Letter8 tokenizer: what keeps codes alive, what each loss costs, how fast it encodes.

  python bench/tokenizer/model.py                 # all three parts (about 15 minutes on 2 cores)
  python bench/tokenizer/model.py --parts ablation --epochs 10
  python bench/tokenizer/model.py --parts speed,encode

1. ablation: the built-in catalog (20,000 items, 128-d) at 8x256, one run per anti-collapse choice, same seed;
   codes used per level and the share of items whose full 8-letter ID collides, before collision resolution.
2. speed: a training step at LETTER's architecture (768-d input, 8x256, batch 1024) against a bare
   forward-backward of the same encoder+decoder without quantisation, adding one term at a time.
3. encode: 1,000,000 items x 768 (float16 memmap) streamed through `encode`, items/s and peak RSS.
Writes bench/results/model.json (the parts not run keep their numbers from the file there).
"""
import argparse, json, subprocess, sys, tempfile, time
from pathlib import Path
import numpy as np, torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, write_result
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.model import build_tokenizer, encode, refresh_groups, compute_losses, Letter8
from letter8_tokenizer.train import init_codebooks, make_optimizer, train_step

# LETTER's network (the ablation and speed parts measure it, not the kit's defaults): plain MLP to a 32-d latent
LETTER_ARCH = {'model.hidden': [2048, 1024, 512, 256, 128, 64], 'model.e_dim': 32, 'model.skip': False, 'optim.lr': 1e-3}

VARIANTS = {
    'LETTER as shipped (grad codebooks, Sinkhorn on h, no re-seeding)': {'quantizer.update': 'grad', 'quantizer.reseed': False, 'quantizer.sinkhorn_levels': [7]},
    'grad codebooks + re-seeding': {'quantizer.update': 'grad'},
    'EMA 0.99, no re-seeding': {'quantizer.ema_decay': 0.99, 'quantizer.reseed': False},
    'EMA 0.9, no re-seeding': {'quantizer.reseed': False},
    'EMA 0.99 + re-seeding': {'quantizer.ema_decay': 0.99},
    'EMA 0.9 + re-seeding (default)': {},
    'default + Sinkhorn on h': {'quantizer.sinkhorn_levels': [7]},
    "default, LETTER's encoder 2048-1024-512-256-128-64": {'model.hidden': [2048, 1024, 512, 256, 128, 64]},
}

def code_stats(codes):
    used = [int(len(np.unique(codes[:, l]))) for l in range(codes.shape[1])]
    _, inv, cnt = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    return used, float((cnt[inv.ravel()] > 1).mean())

def train(items, cfg, epochs):
    model = build_tokenizer(cfg, items); init_codebooks(model, items); opt = make_optimizer(model)
    t = time.perf_counter()
    for ep in range(epochs):
        if ep and cfg.loss.diversity and ep % cfg.loss.diversity_refresh_epochs == 0: refresh_groups(model)
        for b in items.batches(cfg.optim.batch_size, seed=cfg.seed, epoch=ep): losses = train_step(model, opt, b.emb, b.cf)
    return model, losses, time.perf_counter() - t

def ablation(epochs, hidden, work, only=None):
    items = synthetic_catalog(work/'catalog20k', n_items=20_000)
    rows = []
    for name, ov in VARIANTS.items():
        if only and not any(o in name for o in only): continue
        cfg = override(Config(), {**LETTER_ARCH, 'model.hidden': hidden, 'optim.epochs': epochs, **ov})
        model, losses, secs = train(items, cfg, epochs)
        used, coll = code_stats(encode(model, items))
        rows.append(dict(variant=name, min_used=min(used), used_per_level=used, collide=coll, recon=losses['recon'], seconds=secs))
        print(f"{name:<66} min used {min(used):>3}/256  collide {coll:7.2%}  recon {losses['recon']:.4f}  {secs:5.0f}s", flush=True)
    return dict(items=20_000, dim=128, hidden=hidden, epochs=epochs, rows=rows)

def step_fn(model, opt, x, cf, mode):
    "One training step of `model`: bare (encoder+decoder, MSE) or full (quantiser and every enabled loss)."
    def bare():
        out = model.decoder(model.encoder(x)); loss = torch.nn.functional.mse_loss(out, x)
        opt.zero_grad(); loss.backward(); opt.step()
    def full():
        out = model(x); losses = compute_losses(model, out, x, cf)
        opt.zero_grad(); losses['total'].backward(); opt.step()
        for lvl, r, c in zip(model.levels, out['residuals'], out['codes'].T): lvl.ema_step(r.detach(), c)
    return bare if mode == 'bare' else full

def speed(reps):
    "Median step time of each configuration; the configurations take turns, so load drifts hit all alike."
    g = torch.Generator().manual_seed(0)
    x, cf = torch.randn(1024, 768, generator=g), torch.randn(1024, 32, generator=g)
    steps = [('bare encoder+decoder (no quantisation)', 'bare', {}),
             ('+ 8x256 quantisation, EMA, re-seeding, commitment', 'full', {'loss.cf': 0.0, 'loss.diversity': 0.0}),
             ('+ CF alignment', 'full', {'loss.diversity': 0.0}),
             ('+ code diversity (all terms, the default)', 'full', {}),
             ('+ Sinkhorn on level h', 'full', {'quantizer.sinkhorn_levels': [7]})]
    fns = []
    for name, mode, ov in steps:
        cfg = override(Config(), {**LETTER_ARCH, 'model.in_dim': 768, 'model.cf_dim': 32, **ov})
        torch.manual_seed(0); model = Letter8(cfg); refresh_groups(model); opt = make_optimizer(model)
        f = step_fn(model, opt, x, cf if cfg.loss.cf else None, mode); f(); f()
        fns.append(f)
    times = [[] for _ in steps]
    for _ in range(reps):
        for i, f in enumerate(fns):
            t = time.perf_counter(); f(); times[i].append(time.perf_counter() - t)
    rows, base, prev = [], None, None
    for (name, _, _), ts in zip(steps, times):
        t = float(np.median(ts)); base = base or t
        rows.append(dict(step=name, seconds=t, vs_bare=t / base, share_of_bare=(t - (prev or t)) / base)); prev = t
        print(f"{name:<52} {t*1000:7.1f} ms   {t/base:5.2f}x bare   this term {rows[-1]['share_of_bare']:+6.1%}", flush=True)
    return dict(in_dim=768, levels=8, k=256, batch=1024, threads=torch.get_num_threads(), reps=reps, rows=rows)

ENCODE_CHILD = r'''
import sys, time, resource, json, numpy as np, torch
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items
from letter8_tokenizer.model import Letter8, encode
items = Items(sys.argv[1], validate=False)
torch.manual_seed(0); model = Letter8(override(Config(), {'model.in_dim': items.dim, 'model.hidden': [2048, 1024, 512, 256, 128, 64], 'model.e_dim': 32, 'model.skip': False}))
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter(); codes = encode(model, items); secs = time.perf_counter() - t
print(json.dumps(dict(items=len(items), seconds=secs, items_per_s=len(items) / secs, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      rss_before_mb=rss0 / 1024, file_mb=items.emb.nbytes / 2**20, codes_shape=list(codes.shape))))
'''

def encode_throughput(n, work):
    path = work/'catalog1m'
    if not (path/'items.npy').exists(): synthetic_catalog(path, n_items=n, dim=768, dtype='float16')
    out = subprocess.run([sys.executable, '-c', ENCODE_CHILD, str(path/'items.npy')], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"encode {r['items']:,} x 768 float16 ({r['file_mb']:.0f} MB memmap): {r['items_per_s']:,.0f} items/s, {r['seconds']:.1f}s, peak RSS {r['peak_rss_mb']:.0f} MB")
    return r

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--parts', default='ablation,speed,encode')
    p.add_argument('--epochs', type=int, default=10)
    p.add_argument('--hidden', default='512,256,128,64', help='encoder widths for the ablation (LETTER: 2048,1024,512,256,128,64)')
    p.add_argument('--reps', type=int, default=10)
    p.add_argument('--variants', default='', help='comma-separated substrings: run only the ablation variants whose name contains one')
    p.add_argument('--encode-items', type=int, default=1_000_000)
    p.add_argument('--work', default=None, help='folder for the built catalogs (default: a temporary one, removed after)')
    p.add_argument('--out', default=str(RESULTS/'model.json'))
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.work or tmp); work.mkdir(parents=True, exist_ok=True)
        run_parts(a, work)

def run_parts(a, work):
    out = Path(a.out); res = json.loads(out.read_text()) if out.exists() else {}
    parts = a.parts.split(',')
    if 'ablation' in parts:
        print('\n## What keeps the codes alive (built-in catalog, 8x256, %d epochs)\n' % a.epochs)
        res['ablation'] = ablation(a.epochs, [int(h) for h in a.hidden.split(',')], work, [v for v in a.variants.split(',') if v])
    if 'speed' in parts:
        print('\n## Step time at LETTER\'s architecture, 768-d, 8x256, batch 1024, %d threads\n' % torch.get_num_threads())
        res['speed'] = speed(a.reps)
    if 'encode' in parts:
        print('\n## Encoding throughput\n'); res['encode'] = encode_throughput(a.encode_items, work)
    res.pop('machine', None)  # meta.env says it
    write_result(out, res)

if __name__ == '__main__': main()
