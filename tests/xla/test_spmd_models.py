"""SPMD for SASRec and the retriever: each batch's rows split over four XLA CPU devices give one device's losses and
weights, within the DDP test's tolerance (dropout off: SPMD draws its masks per shard). Each run is its own process:
`use_spmd()` must come before any XLA tensor exists."""
import json, os, subprocess, sys
from pathlib import Path
import pytest, torch
from letter8_tokenizer.checkpoint import Checkpointer
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_ddp_models import max_gap  # the attention key biases apart: their gradient is rounding noise that Adam scales up

LOSS_RTOL, WEIGHT_ATOL = 1e-5, 1e-4  # tests/xla/test_spmd.py's
DRIVER = r'''
import sys, json
import numpy as np, torch_xla, torch_xla.runtime as xr
if sys.argv[2] == 'spmd': xr.use_spmd()
from letter8_tokenizer.data import synthetic_catalog
from letter8_tokenizer.sequences import synthetic_sequences, leave_one_out
from letter8_tokenizer.cf import CFTask
from letter8_tokenizer.ids import rqkmeans_scheme
from letter8_tokenizer.retriever import RetrieverTask
from letter8_tokenizer.loop import run_segment
from letter8_tokenizer.distributed import spmd_on
out = sys.argv[1]
cat = synthetic_catalog(out + '/cat', n_items=300, dim=16, cf_dim=8, branching=(4, 4, 4), seed=3)
split = leave_one_out(synthetic_sequences(np.asarray(cat.labels), n_users=400, min_len=5, max_len=15, seed=3), max_len=10)
scheme = rqkmeans_scheme(np.asarray(cat.emb), levels=2, k=16, seed=0)
cf = CFTask(split, dict(dim=16, max_len=10, blocks=1, heads=1, dropout=0.0, batch_size=64, epochs=2), device=torch_xla.device())
ret = RetrieverTask(scheme, split, dict(d_model=32, heads=2, enc_layers=1, dec_layers=1, ff=64, dropout=0.0, batch_size=128, epochs=2,
                                        max_len=10, beam=10, valid_users=100, eval_batch=100), device=torch_xla.device())
res = {name: run_segment(task, out + '/' + name, progress=False).status for name, task in (('sasrec', cf), ('retriever', ret))}
print('RESULT ' + json.dumps(dict(res, spmd=spmd_on(), devices=xr.global_runtime_device_count())), flush=True)
'''

def run(out, mode):
    env = dict(os.environ, PJRT_DEVICE='CPU', CPU_NUM_DEVICES='4')
    p = subprocess.run([sys.executable, '-c', DRIVER, str(out), mode], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads([l for l in p.stdout.splitlines() if l.startswith('RESULT ')][-1][7:])

def test_spmd_over_four_devices_matches_one_for_sasrec_and_the_retriever(tmp_path):
    one, four = run(tmp_path/'one', 'single'), run(tmp_path/'four', 'spmd')
    assert (one['spmd'], four['spmd'], four['devices']) == (False, True, 4)
    for name in ('sasrec', 'retriever'):
        assert one[name] == four[name] == 'done'
        ref, got = Checkpointer(tmp_path/'one'/name).load(), Checkpointer(tmp_path/'four'/name).load()
        assert got.step == ref.step > 0
        gap, keys = max_gap(ref.state['model'], got.state['model'])
        print(f"{name}: largest weight difference, SPMD over 4 devices vs one: {gap:.2e} (attention key biases {keys:.2e})")
        assert gap <= WEIGHT_ATOL, f"{name}: largest weight difference {gap:.2e} > {WEIGHT_ATOL}"
        for x, y in zip(ref.meta['history'], got.meta['history']):
            assert y['loss'] == pytest.approx(x['loss'], rel=LOSS_RTOL, abs=2e-6), (name, x['step'], x['loss'], y['loss'])
