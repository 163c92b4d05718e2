"""The tokenizer through the one training loop on an XLA device (XLA's CPU backend standing in for a TPU): a run reaches
`done`, a second run in the same process finds its graphs compiled (the decoder phase's too), checkpoints hold host
tensors, a stopped run resumes bit-exactly, a checkpoint moves between XLA and the CPU, and the deadline stops in time."""
import itertools
import pytest, torch
import torch_xla
import torch_xla.debug.metrics as met
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import synthetic_catalog, Items
from letter8_tokenizer.checkpoint import Checkpointer
from letter8_tokenizer.train import train_segment, TokenizerTask
from letter8_tokenizer.loop import run_segment
from letter8_tokenizer.session import Deadline

CFG = override(Config(), {'optim.batch_size': 256, 'optim.epochs': 2, 'schedule.log_every_s': 3600.0})  # the default tokenizer

def compilations() -> int: return (met.metric_data('CompileTime') or (0,))[0]

@pytest.fixture(scope='module')
def items(tmp_path_factory):
    d = tmp_path_factory.mktemp('catalog')
    synthetic_catalog(d, n_items=2000, dim=64)
    return Items(d/'items.npy', cf=d/'cf.npy')

@pytest.fixture(scope='module')
def whole(items, tmp_path_factory):
    "One uninterrupted run on the XLA device: its folder, its result and the graphs it compiled."
    d, before = tmp_path_factory.mktemp('whole'), compilations()
    r = train_segment(CFG, items, d, device=torch_xla.device(), progress=False)
    return d, r, compilations() - before

def test_tokenizer_reaches_done_on_xla(whole):
    d, r, compiled = whole
    assert (r.status, r.step, r.epoch) == ('done', 16, 2)
    assert 'xla' in r.ledger[-1]['device'] and r.ledger[-1]['xla_devices'] >= 1 and r.ledger[-1]['spmd'] is False
    state = Checkpointer(d).load().state
    assert all(t.device.type == 'cpu' for t in state['model'].values()), 'checkpoints must hold host tensors'
    assert compiled > 0

def test_every_batch_has_the_full_size(items):
    "2,000 items in batches of 256: the eighth batch is topped up with the epoch's first rows, so XLA compiles one shape."
    t = TokenizerTask(CFG, items, torch_xla.device())
    assert t.n_batches() == 8 and [len(b.index) for b in t.batches(0)] == [256] * 8

def test_second_run_compiles_at_most_10_graphs(items, whole, tmp_path):
    before = compilations()
    r = train_segment(CFG, items, tmp_path/'again', device=torch_xla.device(), progress=False)
    assert r.status == 'done'
    assert compilations() - before <= 10, f"{compilations() - before} new graphs (the first run compiled {whole[2]})"
    a, b = Checkpointer(whole[0]).load().state['model'], Checkpointer(tmp_path/'again').load().state['model']
    assert all(torch.equal(a[k], b[k]) for k in a), 'the same run on the same device must give the same weights'

def test_resume_on_xla_is_bit_exact(items, whole, tmp_path):
    first = train_segment(CFG, items, tmp_path/'split', device=torch_xla.device(), progress=False, max_steps=5)
    rest = train_segment(CFG, items, tmp_path/'split', device=torch_xla.device(), progress=False)
    assert (first.status, rest.status, rest.resumed_from) == ('step_limit', 'done', 5)
    a, b = Checkpointer(whole[0]).load().state['model'], Checkpointer(tmp_path/'split').load().state['model']
    assert all(torch.equal(a[k], b[k]) for k in a)

def test_xla_checkpoint_resumes_on_the_cpu_and_back(items, whole, tmp_path):
    "A checkpoint written on XLA resumes on the CPU and back; not bit-exactly (other kernels, and the masked re-seeding draws its own random stream)."
    first = train_segment(CFG, items, tmp_path/'moved', device=torch_xla.device(), progress=False, max_steps=5)
    mid = train_segment(CFG, items, tmp_path/'moved', device='cpu', progress=False, max_steps=5)
    rest = train_segment(CFG, items, tmp_path/'moved', device=torch_xla.device(), progress=False)
    assert (first.status, mid.status, mid.resumed_from, rest.status, rest.resumed_from) == ('step_limit', 'step_limit', 5, 'done', 10)
    assert [l['device'] for l in rest.ledger] == ['xla:0', 'cpu', 'xla:0']
    state = Checkpointer(tmp_path/'moved').load().state['model']
    assert all(torch.isfinite(t).all() for t in state.values() if t.is_floating_point())

def test_decoder_phase_on_xla_compiles_once(tmp_path):
    "Two joint epochs, then two of the decoder alone on kept codes (`decoder_step`): done, and a second run compiles nothing new."
    synthetic_catalog(tmp_path/'cat', n_items=512, dim=32)
    small = Items(tmp_path/'cat'/'items.npy', cf=tmp_path/'cat'/'cf.npy')
    cfg = override(Config(), {'model.hidden': [64, 32], 'model.e_dim': 8, 'model.codebook_size': 16, 'optim.batch_size': 128,
                              'optim.epochs': 4, 'optim.decoder_share': 0.5, 'schedule.log_every_s': 3600.0})
    first = train_segment(cfg, small, tmp_path/'one', device=torch_xla.device(), progress=False)
    before = compilations()
    again = train_segment(cfg, small, tmp_path/'two', device=torch_xla.device(), progress=False)
    assert (first.status, first.step, again.status) == ('done', 16, 'done')
    assert 'codebook' not in first.metrics and first.metrics == again.metrics  # the last step was the decoder's
    assert compilations() - before <= 10

def test_deadline_on_xla_stops_and_commits_in_time(items, tmp_path):
    "The fake clock of the training page's deadline example: on XLA too the run stops before the cutoff, committed, and resumes to `done`."
    ticks = itertools.count(80)
    tight = Deadline(limit_s=100, start=0, margin_s=0, clock=lambda: next(ticks))
    r = train_segment(CFG, items, tmp_path/'tight', device=torch_xla.device(), deadline=tight, progress=False)
    assert r.status == 'deadline' and 0 < r.steps < 16 and tight.time_left() > 0, (r.status, r.steps, tight.time_left())
    assert Checkpointer(tmp_path/'tight').load().step == r.step
    rest = train_segment(CFG, items, tmp_path/'tight', device=torch_xla.device(), progress=False)
    assert (rest.status, rest.resumed_from) == ('done', r.step)

def test_deadline_times_xla_steps_at_read_points(items, tmp_path, monkeypatch):
    "XLA runs ahead of the host, so the deadline times its steps where reading the losses waits for the device: the wait is spread over the steps it served."
    import letter8_tokenizer.loop as loop
    clock, read = [0.0], loop.host_floats
    def device_catching_up(values):
        clock[0] += 40.0
        return read(values)
    monkeypatch.setattr(loop, 'host_floats', device_catching_up)
    timed = Deadline(limit_s=10**6, start=0, clock=lambda: clock[0])
    r = train_segment(CFG, items, tmp_path/'timed', device=torch_xla.device(), deadline=timed, progress=False)
    assert (r.status, r.steps, len(timed.steps)) == ('done', 16, 16), 'every step timed once'
    assert 0 < max(timed.steps) < 40 and sum(timed.steps) >= 40, list(timed.steps)

def test_losses_stay_on_the_device_and_every_step_is_recorded(items, whole):
    "`train_step` leaves its losses on the XLA device (no host read in the step); the loop reads them at its read points and still records every step."
    from letter8_tokenizer.model import build_tokenizer
    from letter8_tokenizer.train import init_codebooks, make_optimizer, train_step
    from letter8_tokenizer.loop import read_metrics
    model = build_tokenizer(CFG, items).to(torch_xla.device()); init_codebooks(model, items); opt = make_optimizer(model)
    b = next(iter(items.batches(CFG.optim.batch_size, seed=0, epoch=0, drop_last=True)))
    losses = train_step(model, opt, b.emb, b.cf)
    assert all(torch.is_tensor(v) and v.device.type == 'xla' and v.dim() == 0 for v in losses.values()), losses
    rows = read_metrics(whole[0])
    assert [r['step'] for r in rows] == list(range(1, 17)) and all(isinstance(r['total'], float) for r in rows)

def test_no_new_graph_after_each_phases_first_epoch(items, tmp_path):
    """Six epochs in one run, three joint and three of the decoder alone, counted as each epoch starts and after the last
    epoch's end: only each phase's first epoch compiles. (The run's final commit, its first since step 0, may then compile
    one tiny graph for its finiteness check of a 0-d state tensor; it is no part of the step.)"""
    task = TokenizerTask(override(CFG, {'optim.epochs': 6, 'optim.decoder_share': 0.5}), items, torch_xla.device())
    assert task.decoder_from == 3
    seen, batches, end_epoch = [], task.batches, task.end_epoch
    def counting(epoch, start=0):
        seen.append(compilations()); return batches(epoch, start)
    def ending(epoch):
        out = end_epoch(epoch)
        if epoch == 6: seen.append(compilations())
        return out
    task.batches, task.end_epoch = counting, ending
    r = run_segment(task, tmp_path/'six', progress=False)
    assert (r.status, r.epoch, len(seen)) == ('done', 6, 7)
    # (the first epoch compiles unless an earlier run in this process did: the graph cache is the process's)
    assert seen[1] == seen[2] == seen[3] and seen[4] == seen[5] == seen[6], f"compiles as each epoch started, then after the last epoch: {seen}"
