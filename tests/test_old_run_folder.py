"""A run folder written by the kit at f86bc8d, before the run's core moved out of `segments` (issue 62), resumes with
today's code: its tokenizer, stopped after 10 of 24 steps, goes on from the committed step, and the run ends where an
uninterrupted run of today's code ends, bit for bit (weights, code table, status). The folder was made by
tests/fixtures/make_run_f86bc8d.py with the code of f86bc8d."""
import json, tarfile
from pathlib import Path
import numpy as np
import pytest
import torch
from letter8_tokenizer.stages import run_stages
from letter8_tokenizer.runfolder import run_paths, read_status
from letter8_tokenizer.checkpoint import Checkpointer

FIXTURE = Path(__file__).parent/'fixtures'/'run_f86bc8d.tar.gz'
PARAMS = dict(experiment='old', catalog_items=300,
              overrides=json.dumps({'optim.epochs': 12, 'schedule.save_every_steps': 5, 'schedule.keep': 2}))

@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    old, fresh = tmp_path_factory.mktemp('old'), tmp_path_factory.mktemp('fresh')
    with tarfile.open(FIXTURE) as t: t.extractall(old, filter='data')
    assert read_status(run_paths(old, 'old').status)['status'] == 'step_limit'  # the f86bc8d session stopped mid-training
    return {name: (work, run_stages(dict(PARAMS, work_dir=str(work)), segment=name)) for name, work in (('resumed', old), ('fresh', fresh))}

def test_old_run_resumes_from_its_checkpoint(runs):
    work, results = runs['resumed']
    st = read_status(run_paths(work, 'old').status)
    assert (st['status'], st['done']) == ('done', True)
    assert results['train'].done and 'resumed from' in results['train'].message
    assert st['resumed_from'] == 10

def test_resumed_run_equals_an_uninterrupted_one(runs):
    (old, _), (fresh, _) = runs['resumed'], runs['fresh']
    a, b = run_paths(old, 'old'), run_paths(fresh, 'old')
    sa, sb = Checkpointer(a.checkpoints).load().state, Checkpointer(b.checkpoints).load().state
    assert sa['model'].keys() == sb['model'].keys()
    for k in sa['model']: assert torch.equal(sa['model'][k], sb['model'][k]), k
    assert np.array_equal(np.load(a.codes/'codes.npy'), np.load(b.codes/'codes.npy'))
    assert read_status(a.status)['step'] == read_status(b.status)['step'] == 24
