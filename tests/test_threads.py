"""A run resumes bit-exactly with as many threads as torch has, not only with one: every model's training step is free
of the one CPU kernel whose order of summation follows thread timing (`loop.RacyAccumulation`), and the tokenizer,
trained with 2 threads, stopped and resumed in a new process, ends bit-identical to one uninterrupted run. (`make test`
runs one thread a worker, so without these tests a race would only show on a user's machine.)"""
import subprocess, sys, tempfile
from pathlib import Path
import numpy as np, pytest
from letter8_tokenizer.checkpoint import Checkpointer
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.loop import RacyAccumulation, run_segment
from letter8_tokenizer.train import TokenizerTask
from letter8_tokenizer.cf import CFConfig, CFTask
from letter8_tokenizer.ids import rqkmeans_scheme
from letter8_tokenizer.retriever import RetrieverTask
from letter8_tokenizer.sequences import synthetic_sequences, leave_one_out
from test_loop import assert_same_state

@pytest.fixture(scope='module')
def world():
    "2,048 synthetic items (more than a codebook's 256 rows, so the first-letter term takes its gathered path) and 400 users."
    tmp = Path(tempfile.mkdtemp())
    cat = synthetic_catalog(tmp/'cat', n_items=2048, dim=32, cf_dim=16, branching=(4, 4, 4), seed=0)
    seqs = synthetic_sequences(np.asarray(cat.labels)[:256], n_users=400, min_len=5, max_len=12, stay=0.7, wander=0.2, seed=0)
    return tmp, cat, leave_one_out(seqs, 10), rqkmeans_scheme(np.asarray(cat.emb)[:256], levels=2, k=16, seed=0)

RETRIEVER = dict(d_model=32, heads=2, enc_layers=1, dec_layers=1, ff=64, batch_size=64, epochs=1, max_len=10, beam=10, valid_users=50)
TASKS = {
    'tokenizer': lambda cat, split, sem: TokenizerTask(override(Config(), {'optim.epochs': 1, 'optim.batch_size': 512}), cat, 'cpu'),
    'sasrec': lambda cat, split, sem: CFTask(split, CFConfig(dim=16, max_len=10, epochs=1, batch_size=64), 'cpu'),
    'retriever': lambda cat, split, sem: RetrieverTask(sem, split, RETRIEVER),
    'tiger': lambda cat, split, sem: RetrieverTask(sem, split, dict(RETRIEVER, preset='tiger', head_dim=12, enc_layers=2, dec_layers=2,
                                                                     ff=32, user_buckets=7, warmup=4)),
}

@pytest.mark.parametrize('name', TASKS)
def test_no_step_sums_in_thread_order(world, tmp_path, name):
    tmp, cat, split, sem = world
    with RacyAccumulation(): r = run_segment(TASKS[name](cat, split, sem), tmp_path/name, progress=False, max_steps=3)
    assert r.status == 'step_limit' and r.step == 3, r

DRIVER = r'''
import sys, torch
torch.set_num_threads(2)
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items
from letter8_tokenizer.train import train_segment
cat, ck, max_steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
items = Items(f'{cat}/items.npy', f'{cat}/cf.npy', f'{cat}/labels.npy')
r = train_segment(override(Config(), {'optim.epochs': 4}), items, ck, progress=False, max_steps=max_steps or None)
print('RESULT', r.status, r.step)
'''

def train(cat, ck, max_steps=0) -> str:
    p = subprocess.run([sys.executable, '-c', DRIVER, str(cat), str(ck), str(max_steps)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout.split('RESULT ')[1].split()[0]

def test_two_threads_stop_and_resume_bit_identical(world, tmp_path):
    "The default tokenizer (batch 1,024: large enough for torch to split the work) with 2 threads: stopped at step 5 and resumed in a new process, it ends as the uninterrupted run."
    cat = world[0]/'cat'
    assert train(cat, tmp_path/'whole') == 'done'
    assert train(cat, tmp_path/'resumed', max_steps=5) == 'step_limit' and train(cat, tmp_path/'resumed') == 'done'
    assert_same_state(Checkpointer(tmp_path/'whole').load().state, Checkpointer(tmp_path/'resumed').load().state)
    assert (tmp_path/'resumed'/'metrics.jsonl').read_bytes() == (tmp_path/'whole'/'metrics.jsonl').read_bytes()
