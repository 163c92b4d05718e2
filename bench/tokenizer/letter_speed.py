"""Training throughput of letter8 against LETTER's own RQ-VAE code, same data, same run, interleaved.

  python bench/tokenizer/letter_speed.py --letter <LETTER checkout>/RQ-VAE        # 3 rounds x 5 steps each, + 1 epoch
  python bench/tokenizer/letter_speed.py --letter ... --rounds 2 --steps 3 --no-epoch   # quicker
  python bench/tokenizer/letter_speed.py --letter ... --no-epoch --experiments --threads 1
      # also letter8 with the old optimiser (AdamW's for-loop) or foreach, and the old log-domain Sinkhorn (monkeypatched; equality checked)
  python bench/tokenizer/letter_speed.py --letter ... --device cuda --no-epoch --rounds 5   # both on the GPU (weights, batches, losses)

LETTER (github.com/HonghuiBao2000/LETTER, folder RQ-VAE) is imported at run time from the checkout given by
--letter; none of its code lives in this project. Both sides get LETTER's architecture at 768-d input (MLP
768-2048-1024-512-256-128-64-32 and its mirror), 8 levels x 256 codes, batch 1024, AdamW lr 1e-3 wd 1e-4,
alpha (CF) 0.01, beta (diversity) 1e-4, Sinkhorn on the last level (LETTER's default puts it on its last
level), on the CPU (or --device cuda: both models, the batches and the bare MLPs on the GPU, each timed step closed by
`torch.cuda.synchronize`; LETTER indexes its numpy CF table with CPU indices, as its trainer does). They start from the SAME weights and codebooks (letter8's init, copied into LETTER's
modules; init time is excluded) and see the same batches in the same order.

letter8's default config has one term LETTER lacks, `loss.first_letter` (the first letter's codeword decoded too: the
decoder on the codebook's rows, then one gradient pass per row); a row without it times what that costs.
letter8 runs in float32 (its default, LETTER's precision) and with `model.precision='bfloat16'` (the MLPs'
matrix products in bfloat16 under autocast; weights, codebooks, quantiser and losses float32).
The item embeddings are WordNet 20k's (the catalog `bench/learning/build_wordnet.py --n 20000` builds in the cache root,
$LETTER8_CACHE: carry that folder to a GPU machine) projected to 768-d, or with --catalog synthetic the synthetic catalog.
Measured: seconds per training step (median over rounds, models interleaved A, B, A, B) and, unless
--no-epoch, one whole epoch each: LETTER's own `Trainer._train_epoch` (which first re-clusters every level's
codebook with k-means-constrained, n_init=10) against letter8's `refresh_groups` + `train_step` over the
catalog. Then one letter8 step of each precision is profiled. The floor is timed in the same rounds: LETTER's encoder
and mirror decoder as bare torch.nn layers, forward, MSE and backward only (no quantiser, no losses of its own, no
optimiser step), in float32 and bfloat16; its speedup over LETTER's step is the most any implementation of this
architecture could reach on this machine with torch's kernels. Prints tables and writes JSON (--out; one file per machine).
LETTER imports `wandb` at module level but only logs in commented-out lines; when wandb is not installed an
empty stand-in module is registered so the import succeeds (nothing else is replaced).
"""
import argparse, cProfile, io, os, platform, pstats, sys, tempfile, time, types
from argparse import Namespace
from pathlib import Path
import numpy as np, torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the clone's root, for bench.common
from bench.common import RESULTS, wordnet_folder, write_result
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items, synthetic_catalog
from letter8_tokenizer.model import build_tokenizer, refresh_groups, model_device
from letter8_tokenizer.train import init_codebooks, make_optimizer, train_step

WORDNET = wordnet_folder(20000)/'items.npy'
HIDDEN, E_DIM, LEVELS, K, BATCH, DIM = [2048, 1024, 512, 256, 128, 64], 32, 8, 256, 1024, 768
BF16 = 'letter8 default, bfloat16 MLPs (model.precision)'
NO_FL = 'letter8 default without loss.first_letter (no second decoder pass)'
FLOOR = 'floor: the bare MLPs alone, forward + backward, {}'

def load_letter(path):
    "LETTER's RQVAE and Trainer classes, imported from its checkout."
    path = Path(path).resolve()
    if not (path/'models'/'rqvae.py').exists(): raise SystemExit(f"{path} is not LETTER's RQ-VAE folder (no models/rqvae.py): "
                                                                  "check out github.com/HonghuiBao2000/LETTER and pass --letter <checkout>/RQ-VAE.")
    try: import wandb  # noqa: F401
    except ImportError: sys.modules['wandb'] = types.ModuleType('wandb')
    sys.path.insert(0, str(path))
    from models.rqvae import RQVAE
    from trainer import Trainer
    return RQVAE, Trainer

def make_data(work, n, source):
    "`(Items, description)`: n x 768 item embeddings and 32-d CF embeddings written under `work`."
    if source in ('auto', 'wordnet') and WORDNET.exists():
        w = np.load(WORDNET)[:n].astype(np.float32)
        rng = np.random.default_rng(0)
        emb = w @ (rng.normal(0, 1, (w.shape[1], DIM)) / np.sqrt(w.shape[1])).astype(np.float32)
        cf = w @ (rng.normal(0, 1, (w.shape[1], E_DIM)) / np.sqrt(w.shape[1])).astype(np.float32)
        np.save(work/'items.npy', emb.astype(np.float32)); np.save(work/'cf.npy', cf.astype(np.float32))
        return Items(work/'items.npy', cf=work/'cf.npy'), f'WordNet {len(w):,} x {w.shape[1]} (MiniLM) randomly projected to {DIM}-d; CF: a random 32-d projection'
    if source == 'wordnet': raise SystemExit(f"{WORDNET} does not exist: build it (bench/learning/build_wordnet.py --n 20000), or use --catalog synthetic")
    return synthetic_catalog(work, n_items=n, dim=DIM), f'synthetic_catalog(n_items={n}, dim={DIM}) with its 32-d CF'

def letter8_config(variant):
    cfg = override(Config(), {'model.in_dim': DIM, 'model.hidden': HIDDEN, 'model.e_dim': E_DIM, 'model.levels': LEVELS,
                              'model.codebook_size': K, 'model.cf_dim': E_DIM, 'optim.batch_size': BATCH,
                              'quantizer.sinkhorn_levels': [LEVELS - 1], 'model.skip': False, 'model.normalize': False, 'model.activation': 'relu', 'optim.lr': 1e-3})  # LETTER's network, not the kit's defaults
    if variant == 'grad': cfg = override(cfg, {'quantizer.update': 'grad', 'quantizer.reseed': False})
    if variant == 'bf16': cfg = override(cfg, {'model.precision': 'bfloat16'})
    if variant == 'no_first_letter': cfg = override(cfg, {'loss.first_letter': 0.0})
    return cfg

def build_letter8(items, variant, init_from=None, device='cpu'):
    model = build_tokenizer(letter8_config(variant), items)
    if init_from is None: init_codebooks(model, items)
    else:  # same starting point: copy every parameter and buffer (the shapes agree: same architecture)
        with torch.no_grad():
            for (name, t), (_, src) in zip(model.state_dict().items(), init_from.state_dict().items()): t.copy_(src)
    model.to(device)
    if init_from is not None or model_device(model).type != 'cpu': refresh_groups(model)  # init_codebooks grouped on the CPU already
    return model, make_optimizer(model)

def build_letter(RQVAE, Trainer, l8, items, work, device='cpu'):
    "LETTER's model and trainer with letter8's starting weights and codebooks copied in."
    cf = np.asarray(items.cf, np.float32)  # LETTER indexes its CF table by item id
    model = RQVAE(in_dim=DIM, num_emb_list=[K]*LEVELS, e_dim=E_DIM, layers=HIDDEN, dropout_prob=0.0, bn=False, loss_type='mse',
                  quant_loss_weight=1.0, kmeans_init=False, sk_epsilons=[0.0]*(LEVELS-1) + [0.003], sk_iters=50,
                  alpha=0.01, beta=1e-4, n_clusters=10, cf_embedding=cf)
    with torch.no_grad():
        for mine, theirs in ((l8.encoder, model.encoder), (l8.decoder, model.decoder)):
            a = [m for m in mine.modules() if isinstance(m, torch.nn.Linear)]
            b = [m for m in theirs.modules() if isinstance(m, torch.nn.Linear)]
            assert [tuple(m.weight.shape) for m in a] == [tuple(m.weight.shape) for m in b]
            for x, y in zip(a, b): y.weight.copy_(x.weight); y.bias.copy_(x.bias)
        for lvl, vq in zip(l8.levels, model.rq.vq_layers): vq.embedding.weight.copy_(lvl.codebook)
    args = Namespace(lr=1e-3, learner='AdamW', weight_decay=1e-4, epochs=1, eval_step=1, device=str(device), ckpt_dir=str(work/'ckpt'),
                     data_path=str(items.path), num_workers=0)
    return model, Trainer(args, model)

def has_kmc():
    try: import k_means_constrained  # noqa: F401
    except ImportError: return False
    return True

def letter_groups(Trainer, model):
    "LETTER's per-epoch grouping of each level's codes (k-means-constrained, 10 groups), as its trainer does it."
    if not has_kmc():  # the groups only pick diversity targets: any balanced grouping costs the step the same
        from letter8_tokenizer.model import balanced_groups
        print('k-means-constrained is not installed: LETTER gets letter8 balanced_groups as its code groups (same step cost)')
        return {str(i): balanced_groups(vq.embedding.weight.detach().cpu().numpy(), 10, seed=i).tolist() for i, vq in enumerate(model.rq.vq_layers)}
    return {str(i): Trainer.constrained_km(None, vq.embedding.weight.detach().cpu().numpy())[1] for i, vq in enumerate(model.rq.vq_layers)}

def letter_step(model, trainer, x, idx):
    "The body of LETTER's `Trainer._train_epoch` loop, on one batch."
    trainer.optimizer.zero_grad()
    out, rq_loss, indices, dense_out = model(x, trainer.labels)
    loss, cf_loss, loss_recon, quant_loss = model.compute_loss(out, rq_loss, idx, dense_out, xs=x)
    trainer._check_nan(loss); loss.backward(); trainer.optimizer.step()
    return loss.item(), loss_recon.item(), cf_loss.item(), quant_loss.item()

def adamw(model, kind):
    "letter8's optimiser (make_optimizer's settings, which use torch's `fused` kernel) with another AdamW kernel: 'for-loop' (the default before 2026-12) or 'foreach'."
    o = model.cfg.optim
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=o.lr, weight_decay=o.weight_decay,
                             **({'foreach': True} if kind == 'foreach' else {'foreach': False}))

def assign_log(self, r):
    "`QuantizerLevel.assign` with the log-domain `sinkhorn_log` (the kit's form before 2026-12) in place of the scaled one (monkeypatch, experiment only)."
    from letter8_tokenizer.model import sqdist, sinkhorn_log
    dist = sqdist(r.detach(), self.codebook.detach())
    if not (self.sinkhorn and self.training): return dist.argmin(1)
    logk = dist.double() / -(dist.max().clamp_min(1e-12).double() * self.sinkhorn_eps)
    return sinkhorn_log(logk - logk.amax(1, keepdim=True), self.sinkhorn_iters)

def sinkhorn_check(cases=8):
    "Do both Sinkhorn forms give the same codes? Random batches of 1024 residuals x 256 codes at several scales."
    from letter8_tokenizer.model import sinkhorn_codes, sinkhorn_log, sqdist
    agree = []
    for s in range(cases):
        g = torch.Generator().manual_seed(s)
        d = sqdist(torch.randn(1024, 32, generator=g) * (0.2 + s), torch.randn(256, 32, generator=g))
        logk = d.double() / -(d.max().double() * 0.003)
        agree.append(float((sinkhorn_codes(d) == sinkhorn_log(logk - logk.amax(1, keepdim=True))).float().mean()))
    print(f'Sinkhorn scaled (the default) vs log-domain: share of equal codes per batch {agree}')
    return agree

def optimizer_check(items, l8, x, cf, steps=3):
    "Do the AdamW variants change results? Same start, same seed, `steps` steps each; max parameter difference to the default."
    state = {k: v.clone() for k, v in l8.state_dict().items()}
    out = {}
    for kind in ('default', 'for-loop', 'foreach'):
        m, _ = build_letter8(items, 'ema', init_from=l8)
        with torch.no_grad():
            for k, v in m.state_dict().items(): v.copy_(state[k])
        o = make_optimizer(m) if kind == 'default' else adamw(m, kind)
        torch.manual_seed(1); t = time.perf_counter()
        for _ in range(steps): losses = train_step(m, o, x, cf)
        out[kind] = dict(params=[p.detach().clone() for p in m.parameters()], total=losses['total'])
        ts = []
        for _ in range(10):  # the optimiser's own step on the last gradients (the weights move on; only the time is kept)
            t = time.perf_counter(); o.step(); ts.append(time.perf_counter() - t)
        out[kind]['opt_step_ms'] = 1000 * float(np.median(ts))
    ref = out['default']['params']
    res = {kind: dict(max_param_diff=max(float((a - b).abs().max()) for a, b in zip(ref, v['params'])),
                      bit_identical=all(torch.equal(a, b) for a, b in zip(ref, v['params'])), final_total_loss=v['total'],
                      opt_step_ms=v['opt_step_ms'])
           for kind, v in out.items()}
    print('AdamW variants after %d steps from the same state: ' % steps + '; '.join(f"{k}: bit-identical {v['bit_identical']}, max param diff {v['max_param_diff']:.1e}, "
                                                                                 f"optimiser step alone {v['opt_step_ms']:.1f} ms" for k, v in res.items()))
    return res

def bare_mlps(precision, device='cpu'):
    "LETTER's encoder and its mirror decoder as plain torch.nn layers: `run(x)` does forward, MSE and backward only, the floor of a step."
    def stack(d): return torch.nn.Sequential(*[m for a, b in zip(d, d[1:]) for m in (torch.nn.Linear(a, b), torch.nn.ReLU())][:-1])
    dims = [DIM, *HIDDEN, E_DIM]
    enc, dec = stack(dims).to(device), stack(dims[::-1]).to(device)
    def run(x):
        with torch.autocast(torch.device(device).type, torch.bfloat16, enabled=precision == 'bfloat16'):
            loss = torch.nn.functional.mse_loss(dec(enc(x)).float(), x)
        enc.zero_grad(set_to_none=True); dec.zero_grad(set_to_none=True); loss.backward()
        return float(loss)
    return run

def uptime():
    return os.getloadavg()

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--letter', required=True, help="LETTER's RQ-VAE folder (a checkout outside this project)")
    p.add_argument('--n', type=int, default=20_000, help='items')
    p.add_argument('--catalog', default='auto', choices=['auto', 'wordnet', 'synthetic'], help='auto: WordNet 20k when built, else synthetic')
    p.add_argument('--rounds', type=int, default=3); p.add_argument('--steps', type=int, default=5, help='timed steps per model per round')
    p.add_argument('--no-epoch', action='store_true', help='skip the whole-epoch comparison')
    p.add_argument('--experiments', action='store_true', help="also time letter8 with AdamW's for-loop (the old optimiser) or foreach kernel, and with the old log-domain Sinkhorn (monkeypatched)")
    p.add_argument('--threads', type=int, default=None, help='torch intra-op threads for both (default: torch default)')
    p.add_argument('--device', default='cpu', help="'cpu' or 'cuda': where both models train")
    p.add_argument('--out', default=str(RESULTS/'letter_speed.json'))
    a = p.parse_args()
    RQVAE, Trainer = load_letter(a.letter)
    dev = torch.device(a.device)
    if dev.type == 'cuda' and not torch.cuda.is_available(): raise SystemExit("--device cuda but torch sees no GPU: run on a machine with CUDA, or use --device cpu.")
    if dev.type == 'cuda' and not a.no_epoch: raise SystemExit("--device cuda times steps only (LETTER's epoch regroups with k-means-constrained on the CPU): add --no-epoch.")
    sync = torch.cuda.synchronize if dev.type == 'cuda' else (lambda: None)
    if a.threads: torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    res = dict(threads=torch.get_num_threads(), torch=torch.__version__, cpus=os.cpu_count(), python=platform.python_version(),
               load_before=uptime(), letter=str(Path(a.letter).resolve()), device=str(dev), cpu=platform.processor() or platform.machine(),
               **({'gpu': torch.cuda.get_device_name(dev)} if dev.type == 'cuda' else {}))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp); items, res['data'] = make_data(work, a.n, a.catalog)
        print(f"data: {res['data']}; torch {torch.__version__}, {torch.get_num_threads()} threads; load {res['load_before']}", flush=True)
        t = time.perf_counter(); l8, l8_opt = build_letter8(items, 'ema', device=dev); res['letter8_init_s'] = time.perf_counter() - t
        l8g, l8g_opt = build_letter8(items, 'grad', init_from=l8, device=dev)
        l8b, l8b_opt = build_letter8(items, 'bf16', init_from=l8, device=dev)
        l8n, l8n_opt = build_letter8(items, 'no_first_letter', init_from=l8, device=dev)
        lt, trainer = build_letter(RQVAE, Trainer, l8, items, work, device=dev)
        t = time.perf_counter(); trainer.labels = letter_groups(Trainer, lt); res['letter_regroup_s'] = time.perf_counter() - t
        res['letter_regroup_by'] = 'k-means-constrained' if has_kmc() else 'balanced_groups (k-means-constrained not installed)'
        t = time.perf_counter(); refresh_groups(l8); res['letter8_regroup_s'] = time.perf_counter() - t
        all_rows = items.take(np.arange(len(items)))
        emb, cf = (torch.as_tensor(np.asarray(v, np.float32), device=dev) for v in (all_rows.emb, all_rows.cf))
        perm = torch.randperm(len(items), generator=torch.Generator().manual_seed(0))
        batches = [perm[i:i + BATCH] for i in range(0, len(perm) - BATCH + 1, BATCH)]
        runners = {"LETTER (its RQVAE + trainer step)": lambda b: letter_step(lt, trainer, emb[b], b),
                   'letter8 default (EMA codebooks, re-seeding)': lambda b: train_step(l8, l8_opt, emb[b], cf[b]),
                   'letter8 LETTER-like (grad codebooks, no re-seeding)': lambda b: train_step(l8g, l8g_opt, emb[b], cf[b]),
                   BF16: lambda b: train_step(l8b, l8b_opt, emb[b], cf[b]),
                   NO_FL: lambda b: train_step(l8n, l8n_opt, emb[b], cf[b]),
                   **{FLOOR.format(pr): (lambda b, f=bare_mlps(pr, dev): f(emb[b])) for pr in ('float32', 'bfloat16')}}
        if a.experiments:  # letter8 default with another AdamW implementation (same math; see optimizer_check) or the old Sinkhorn
            def old_sinkhorn(m):
                for lvl in m.levels:
                    if lvl.sinkhorn: lvl.assign = types.MethodType(assign_log, lvl)
                return m
            for kind in ('for-loop', 'foreach'):
                m, _ = build_letter8(items, 'ema', init_from=l8, device=dev); o = adamw(m, kind)
                runners[f'letter8 default, AdamW {kind} (experiment)'] = lambda b, m=m, o=o: train_step(m, o, emb[b], cf[b])
            m, o = build_letter8(items, 'ema', init_from=l8, device=dev)
            runners['letter8 default, log-domain Sinkhorn (experiment)'] = lambda b, m=old_sinkhorn(m), o=o: train_step(m, o, emb[b], cf[b])
            for variant, name in (('ema', 'float32'), ('bf16', 'bfloat16')):  # both changes undone: the kit before 2026-12
                m, _ = build_letter8(items, variant, init_from=l8, device=dev); o = adamw(m, 'for-loop')
                runners[f'letter8 {name} before 2026-12 (AdamW for-loop, log-domain Sinkhorn)'] = lambda b, m=old_sinkhorn(m), o=o: train_step(m, o, emb[b], cf[b])
            res['optimizer_check'] = optimizer_check(items, l8, emb[batches[0]], cf[batches[0]])
            res['sinkhorn_check'] = sinkhorn_check()
        times = {k: [] for k in runners}
        for name, run in runners.items(): run(batches[0]); run(batches[0])  # warm-up (on a GPU: kernels chosen, memory pooled), not timed
        sync()
        step = 1
        for r in range(a.rounds):
            for name, run in runners.items():
                for s in range(a.steps):
                    b = batches[(step + s) % len(batches)]
                    sync(); t = time.perf_counter(); run(b); sync(); times[name].append(time.perf_counter() - t)
            step += a.steps
            print(f"round {r + 1}/{a.rounds}: " + ', '.join(f'{k.split(" (")[0]} {np.median(v[-a.steps:]):.3f}s' for k, v in times.items()), flush=True)
        ref = np.median(times["LETTER (its RQVAE + trainer step)"])
        rows = [dict(method=k, median_step_s=round(float(np.median(v)), 4), items_per_s=round(BATCH / float(np.median(v)), 1),
                     speedup_vs_LETTER=round(ref / float(np.median(v)), 2), steps=len(v)) for k, v in times.items()]
        res['steps'] = rows; res['step_times'] = times
        print(f"\n## training step, batch {BATCH}, {LEVELS}x{K}, {DIM}-d input, LETTER's MLP, on {res.get('gpu', res['cpu'])} (median of {a.rounds * a.steps} steps each)\n")
        print(table(rows, ['method', 'median_step_s', 'items_per_s', 'speedup_vs_LETTER']))
        fl = {r['method']: r for r in rows}
        print("the floor: LETTER's MLPs alone, forward and backward, no quantiser and no optimiser step, reach "
              + ', '.join(f"{fl[FLOOR.format(pr)]['speedup_vs_LETTER']}x LETTER's step in {pr}" for pr in ('float32', 'bfloat16'))
              + f"; letter8's whole step: {fl['letter8 default (EMA codebooks, re-seeding)']['speedup_vs_LETTER']}x and {fl[BF16]['speedup_vs_LETTER']}x")
        print(f"per-epoch regrouping of codes (10 groups per level): LETTER {res['letter_regroup_by']} {res['letter_regroup_s']:.2f}s, "
              f"letter8 balanced_groups {res['letter8_regroup_s']:.3f}s")
        if not a.no_epoch: res['epoch'] = epoch_compare(lt, trainer, {'letter8 default': (l8, l8_opt), 'letter8 bfloat16': (l8b, l8b_opt)}, items)
        res['profile'] = {name: profile_step(m, o, emb[batches[0]], cf[batches[0]], name, dev) for name, (m, o) in
                          {'float32': (l8, l8_opt), 'bfloat16': (l8b, l8b_opt)}.items()}
    res['load_after'] = uptime()
    speedup = {r['method']: r['speedup_vs_LETTER'] for r in rows}
    res['goal_5x'] = dict(step_speedup=speedup['letter8 default (EMA codebooks, re-seeding)'], step_speedup_bfloat16=speedup[BF16], step_speedup_no_first_letter=speedup[NO_FL],
                          floor_speedup_float32=speedup[FLOOR.format('float32')], floor_speedup_bfloat16=speedup[FLOOR.format('bfloat16')],
                          **({f'epoch_speedup_{k}': v for k, v in res['epoch']['speedup'].items()} if 'epoch' in res else {}))
    print(f"load average before {res['load_before']}, after {res['load_after']}")
    write_result(a.out, res)

def epoch_compare(lt, trainer, mine, items):
    "One epoch each, LETTER through its own `_train_epoch` (regrouping included), letter8's models (`{name: (model, opt)}`) through its loop."
    from torch.utils.data import DataLoader
    from datasets import EmbDataset
    loader = DataLoader(EmbDataset(trainer.args.data_path), batch_size=BATCH, shuffle=True, num_workers=0)
    t = time.perf_counter(); trainer._train_epoch(loader, 0); secs = {'LETTER': time.perf_counter() - t}
    for name, (model, opt) in mine.items():
        t = time.perf_counter()
        refresh_groups(model)
        for b in items.batches(BATCH, seed=0, epoch=1): train_step(model, opt, b.emb, b.cf)
        secs[name] = time.perf_counter() - t
    n = len(items)
    out = dict(items=n, seconds=secs, items_per_s={k: n / v for k, v in secs.items()}, speedup={k: secs['LETTER'] / v for k, v in secs.items()})
    print(f"\n## one epoch of {n:,} items (LETTER: Trainer._train_epoch, k-means-constrained regrouping included; letter8: refresh_groups + train_step)\n")
    print(table([dict(method=k, seconds=f'{v:.1f}', items_per_s=f'{n/v:.0f}', speedup=f"{secs['LETTER']/v:.2f}") for k, v in secs.items()],
                ['method', 'seconds', 'items_per_s', 'speedup']))
    return out

def profile_step(model, opt, x, cf, name, device=torch.device('cpu')):
    "torch.profiler and cProfile of one letter8 step: where the time goes (on a GPU: the kernels' own time)."
    from torch.profiler import profile, ProfilerActivity
    cuda = device.type == 'cuda'
    train_step(model, opt, x, cf)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof: train_step(model, opt, x, cf)
    ka = prof.key_averages()
    if cuda:  # each kernel's time shows twice, under the operator that launched it and as its own event: sum the kernels, rank the operators
        from torch.autograd import DeviceType
        own, ops = (lambda e: e.self_device_time_total), [e for e in ka if e.device_type != DeviceType.CUDA]
        total = sum(own(e) for e in ka if e.device_type == DeviceType.CUDA) or 1
    else: own, ops, total = (lambda e: e.self_cpu_time_total), list(ka), sum(e.self_cpu_time_total for e in ka) or 1
    top = sorted(ops, key=lambda e: -own(e))[:15]
    rows = [dict(op=e.key, self_ms=round(own(e) / 1000, 2), share=f'{own(e) / total:.1%}', calls=e.count) for e in top]
    mm = sum(own(e) for e in ops if e.key in ('aten::addmm', 'aten::mm', 'aten::bmm', 'aten::matmul', 'aten::linear'))
    print(f"\n## one letter8 step ({name} MLPs) under torch.profiler: {total/1000:.1f} ms of {'GPU kernel' if cuda else 'op self'} time, matrix products {mm/total:.0%}\n")
    print(table(rows, ['op', 'self_ms', 'share', 'calls']))
    pr = cProfile.Profile(); pr.enable(); train_step(model, opt, x, cf); pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats('cumtime').print_stats(12)
    return dict(op_self_ms_total=total / 1000, matmul_share=mm / total, top_ops=rows, cprofile=s.getvalue()[-4000:])

def table(rows, cols):
    w = [max(len(str(c)), *(len(str(r[c])) for r in rows)) for c in cols]
    line = lambda vals: '  '.join(str(v).rjust(n) if i else str(v).ljust(n) for i, (v, n) in enumerate(zip(vals, w)))
    return '\n'.join([line(cols), line(['-'*n for n in w])] + [line([r[c] for c in cols]) for r in rows])

if __name__ == '__main__': main()
