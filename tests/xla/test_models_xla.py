"""SASRec (`CFTask`) and the retriever (`RetrieverTask`) through the one training loop on an XLA device: each reaches `done`,
compiles no new graph after its first epoch (one batch shape, no host reads in the step; the TIGER preset's warm-up
learning rate changes every step without a new graph), leaves its step losses on the device, and resumes bit-exactly (dropout draws from XLA's own generator, which the checkpoint keeps)."""
import numpy as np, pytest, torch
import torch_xla
import torch_xla.debug.metrics as met
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.sequences import synthetic_sequences, leave_one_out
from letter8_tokenizer.cf import CFTask
from letter8_tokenizer.ids import rqkmeans_scheme
from letter8_tokenizer.retriever import RetrieverTask
from letter8_tokenizer.loop import run_segment, read_metrics
from letter8_tokenizer.checkpoint import Checkpointer

def compilations() -> int: return (met.metric_data('CompileTime') or (0,))[0]

CF = dict(dim=16, max_len=10, blocks=1, heads=1, batch_size=64, epochs=3, patience=10)
RET = dict(d_model=32, heads=2, enc_layers=1, dec_layers=1, ff=64, batch_size=128, epochs=3, patience=10, max_len=10, beam=10,
           valid_users=100, eval_batch=100)
TIGER = dict(RET, preset='tiger', head_dim=12, enc_layers=2, dec_layers=2, ff=32, user_buckets=7, warmup=4)

@pytest.fixture(scope='module')
def world(tmp_path_factory):
    "300 items in a 4 x 4 x 4 tree and 400 users who mostly stay in a leaf category; RQ-KMeans IDs of the items."
    cat = synthetic_catalog(tmp_path_factory.mktemp('cat'), n_items=300, dim=16, cf_dim=8, branching=(4, 4, 4), seed=3)
    seqs = synthetic_sequences(np.asarray(cat.labels), n_users=400, min_len=5, max_len=15, seed=3)
    split = leave_one_out(seqs, max_len=10)
    return split, rqkmeans_scheme(np.asarray(cat.emb), levels=2, k=16, seed=0)

def tasks(world):
    split, scheme = world
    return {'sasrec': lambda: CFTask(split, CF, device=torch_xla.device()),
            'retriever': lambda: RetrieverTask(scheme, split, RET, device=torch_xla.device()),
            'tiger': lambda: RetrieverTask(scheme, split, TIGER, device=torch_xla.device())}

def counted_run(task, d, **kw):
    "A run of `task`, the compile count as each epoch starts (the previous epoch's end and validation done) and at the end."
    seen, batches = [], task.batches
    def counting(epoch, start=0):
        seen.append(compilations()); return batches(epoch, start)
    task.batches = counting
    r = run_segment(task, d, progress=False, **kw)
    return r, seen + [compilations()]

@pytest.mark.parametrize('name', ['sasrec', 'retriever', 'tiger'])
def test_every_batch_has_the_full_size(world, name):
    "The last batch of an epoch is topped up with the epoch's first rows: one shape, one graph."
    task = tasks(world)[name]()
    sizes = [len(b) if isinstance(b, np.ndarray) else len(b.hist) for b in task.batches(0)]
    assert len(sizes) == task.n_batches() and set(sizes) == {task.cfg.batch_size}, sizes

@pytest.mark.parametrize('name', ['sasrec', 'retriever', 'tiger'])
def test_no_new_graph_after_the_first_epoch(world, name, tmp_path):
    r, seen = counted_run(tasks(world)[name](), tmp_path)
    assert (r.status, r.epoch, len(seen)) == ('done', 3, 4)
    assert seen[1] > seen[0] and seen[-1] == seen[1], f"{name}: compiles as each epoch started, then at the end: {seen}"
    rows = read_metrics(tmp_path)
    assert len(rows) == r.step and all(isinstance(x['loss'], float) and np.isfinite(x['loss']) for x in rows)

@pytest.mark.parametrize('name', ['sasrec', 'retriever'])
def test_step_losses_stay_on_the_device(world, name):
    task = tasks(world)[name]()
    loss = task.step(next(iter(task.batches(0))))['loss']
    assert torch.is_tensor(loss) and loss.device.type == 'xla' and loss.dim() == 0

@pytest.mark.parametrize('name', ['sasrec', 'retriever', 'tiger'])
def test_resume_on_xla_is_bit_exact(world, name, tmp_path):
    make = tasks(world)[name]
    whole = run_segment(make(), tmp_path/'whole', progress=False)
    first = run_segment(make(), tmp_path/'split', progress=False, max_steps=5)
    rest = run_segment(make(), tmp_path/'split', progress=False)
    assert (whole.status, first.status, rest.status, rest.resumed_from) == ("done", "step_limit", "done", 5)
    a, b = Checkpointer(tmp_path/'whole').load().state['model'], Checkpointer(tmp_path/'split').load().state['model']
    assert all(torch.equal(a[k], b[k]) for k in a), f"{name}: the resumed run's weights differ from the whole run's"
