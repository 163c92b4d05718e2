"""Data-parallel training on 2 and 3 gloo ranks under torchrun: equal to one process, resumable after a rank is
killed, resumable on a different world size, and stopping together.

Tolerance. Ranks average gradients in another order than one process sums them, so a distributed step equals
the single-process step to float32 rounding, not bit for bit. Over a short run the gap stays at rounding
level: every logged loss within `LOSS_RTOL` (relative) and every weight within `WEIGHT_ATOL` of the
single-process run. Over long runs a rounding difference eventually flips one item's nearest code, after which
the runs drift apart like two runs with different seeds (measured: identical to 1e-6 for 150 steps, then
apart), which is why the runs here are short. The last of the 4 epochs is the decoder phase (`decoder_step`: the
decoder alone, its gradients averaged over ranks by `average_grads` rather than by DDP), so it is held to the same
tolerance.
"""
import signal, threading, time
import psutil, pytest, torch
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.checkpoint import Checkpointer, step_dirs
from letter8_tokenizer.train import train_segment, train_distributed

LOSS_RTOL, WEIGHT_ATOL = 1e-5, 1e-4  # the history logs 6 decimals: two units of the last one are rounding (abs=2e-6 below)

@pytest.fixture(scope='module')
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('ddp')
    items = synthetic_catalog(tmp/'catalog', n_items=2000, dim=32)  # 16 batches of 128 per epoch, the last one of 80
    cfg = override(Config(), {'model.hidden': [64, 32], 'model.e_dim': 8, 'model.codebook_size': 16, 'optim.batch_size': 128,
                              'optim.epochs': 4, 'optim.decoder_share': 0.25, 'schedule.save_every_steps': 4, 'schedule.log_every_s': 3600,
                              'loss.first_letter': 0.3})  # the decoder runs twice in a step's forward pass: DDP must average both paths' gradients
    # the epoch-end refit is on (the default): rank 0 refits and the others take its codebooks in place
    ref = train_segment(cfg, items, tmp/'single', progress=False)
    assert (ref.status, ref.step) == ('done', 64)
    return tmp, items, cfg, Checkpointer(tmp/'single').load()

def assert_close_to_single(ref, ckpt_dir):
    got = Checkpointer(ckpt_dir).load()
    assert got.step == ref.step
    a, b = ref.state['model'], got.state['model']
    gap = max((a[k].float() - b[k].float()).abs().max().item() for k in a if a[k].is_floating_point())
    assert gap <= WEIGHT_ATOL, f"largest weight difference {gap:.2e} > {WEIGHT_ATOL}"
    ha, hb = ref.meta['history'], got.meta['history']
    assert [h['step'] for h in hb] == [h['step'] for h in ha]
    for x, y in zip(ha, hb):
        for k in x:
            if k not in ('step', 'epoch'): assert y[k] == pytest.approx(x[k], rel=LOSS_RTOL, abs=2e-6), (x['step'], k, x[k], y[k])
    # groups are `balanced_groups` of the codebooks: float64 without BLAS, canonical labels, so codebooks equal to
    # float32 rounding give the same partition whatever the thread count (torchrun gives each rank one thread)
    for g_ref, g in zip(ref.state['groups'], got.state['groups']): assert torch.equal(g_ref.cpu(), g.cpu())
    return got

def rank_processes(rank):
    "Worker processes of our torchrun children with this LOCAL_RANK."
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if 'letter8_tokenizer.loop' in ' '.join(p.cmdline()) and p.environ().get('LOCAL_RANK') == str(rank): out.append(p)
        except psutil.Error: pass
    return out

def in_background(fn, **kw):
    box = {}
    def target():
        try: box['result'] = fn(**kw)
        except BaseException as e: box['error'] = e
    t = threading.Thread(target=target, daemon=True); t.start()
    return t, box

def wait_for(cond, timeout=180, what=''):
    t0 = time.time()
    while not cond():
        if time.time() - t0 > timeout: raise TimeoutError(what)
        time.sleep(0.02)

def test_two_ranks_equal_one_process(run):
    tmp, items, cfg, ref = run
    r = train_distributed(cfg, items, tmp/'two', nproc=2, progress=False)
    assert (r.status, r.step, r.ledger[-1]['world_size']) == ('done', 64, 2)
    got = assert_close_to_single(ref, tmp/'two')
    assert [('commitment' in h) for h in got.meta['history']] == [h['step'] <= 48 for h in got.meta['history']]  # epoch 4: the decoder phase
    assert [('first_letter' in h) for h in got.meta['history']] == [h['step'] <= 48 for h in got.meta['history']]
    assert got.state['world_size'] == 2 and [x['rank'] for x in got.state['ranks']] == [0, 1]
    # ranks share the stream of batch-wide decisions, so their CPU generators end equal
    assert torch.equal(got.state['ranks'][0]['rng']['torch'], got.state['ranks'][1]['rng']['torch'])

def test_sigkill_one_rank_restart_and_resume(run):
    tmp, items, cfg, ref = run
    ckpt_dir = tmp/'killed'
    t, box = in_background(train_distributed, cfg=cfg, items=items, checkpoint_dir=ckpt_dir, nproc=2, max_restarts=1, progress=False)
    wait_for(lambda: any(step >= 8 for step, _ in step_dirs(ckpt_dir)), what='a commit at step >= 8')
    victims = rank_processes(1)
    assert len(victims) == 1, victims
    victims[0].send_signal(signal.SIGKILL)
    t.join(300)
    assert 'error' not in box, box.get('error')
    r = box['result']
    assert r.status == 'done' and r.step == 64
    assert r.resumed_from is not None and 8 <= r.resumed_from < 64, r.resumed_from  # the restarted ranks resumed mid-run
    assert_close_to_single(ref, ckpt_dir)

def test_resume_on_three_ranks(run):
    tmp, items, cfg, ref = run
    first = train_distributed(cfg, items, tmp/'grow', nproc=2, max_steps=21, progress=False)
    assert (first.status, first.step) == ('step_limit', 21)
    rest = train_distributed(cfg, items, tmp/'grow', nproc=3, progress=False)  # 80-row last batches split 27/27/26
    assert (rest.status, rest.resumed_from, rest.step) == ('done', 21, 64)
    assert [s['world_size'] for s in rest.ledger] == [2, 3]
    assert_close_to_single(ref, tmp/'grow')

def test_sigterm_on_one_rank_stops_all(run):
    tmp, items, cfg, ref = run
    ckpt_dir = tmp/'term'
    slow = override(cfg, {'optim.epochs': 400})
    t, box = in_background(train_distributed, cfg=slow, items=items, checkpoint_dir=ckpt_dir, nproc=2, progress=False)
    wait_for(lambda: len(step_dirs(ckpt_dir)) >= 2, what='two commits')
    rank_processes(1)[0].send_signal(signal.SIGTERM)
    t.join(300)
    assert 'error' not in box, box.get('error')
    r = box['result']
    assert r.status == 'signal' and 0 < r.step < 400 * 16
    assert Checkpointer(ckpt_dir).load().step == r.step  # the agreed stop committed the step every rank reached
