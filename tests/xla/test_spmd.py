"""SPMD over four XLA CPU devices (`CPU_NUM_DEVICES=4`): the batch's rows split over a one-axis `data` mesh give the
losses and weights of one device, within the DDP test's tolerance. Each run is its own process: `use_spmd()` must come
before any XLA tensor exists."""
import json, os, subprocess, sys
import pytest, torch
from letter8_tokenizer.checkpoint import Checkpointer
from letter8_tokenizer.data import synthetic_catalog

LOSS_RTOL, WEIGHT_ATOL = 1e-5, 1e-4  # tests/test_ddp.py's
DRIVER = r'''
import sys, json
import torch_xla, torch_xla.runtime as xr
if sys.argv[3] == 'spmd': xr.use_spmd()
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items
from letter8_tokenizer.distributed import spmd_on
from letter8_tokenizer.train import train_segment
cfg = override(Config(), {'model.hidden': [64, 32], 'model.e_dim': 8, 'model.codebook_size': 16, 'optim.batch_size': 128,
                          'optim.epochs': 2, 'quantizer.refit_every_epochs': 0, 'schedule.log_every_s': 3600.0})
r = train_segment(cfg, Items(sys.argv[1] + '/items.npy', cf=sys.argv[1] + '/cf.npy'), sys.argv[2], device=torch_xla.device(), progress=False)
print('RESULT ' + json.dumps(dict(status=r.status, step=r.step, spmd=spmd_on(), devices=xr.global_runtime_device_count(), ledger=r.ledger[-1])), flush=True)
'''

def run(cat, out, mode):
    env = dict(os.environ, PJRT_DEVICE='CPU', CPU_NUM_DEVICES='4')
    p = subprocess.run([sys.executable, '-c', DRIVER, str(cat), str(out), mode], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads([l for l in p.stdout.splitlines() if l.startswith('RESULT ')][-1][7:])

def test_spmd_over_four_devices_matches_one(tmp_path):
    synthetic_catalog(tmp_path/'cat', n_items=1024, dim=32)
    one, four = run(tmp_path/'cat', tmp_path/'one', 'single'), run(tmp_path/'cat', tmp_path/'four', 'spmd')
    assert (one['status'], one['spmd'], four['status'], four['spmd'], four['devices']) == ('done', False, 'done', True, 4)
    assert (four['ledger']['xla_devices'], four['ledger']['spmd'], one['ledger']['spmd']) == (4, True, False)
    ref, got = Checkpointer(tmp_path/'one').load(), Checkpointer(tmp_path/'four').load()
    assert got.step == ref.step == 16
    a, b = ref.state['model'], got.state['model']
    gap = max((a[k].float() - b[k].float()).abs().max().item() for k in a if a[k].is_floating_point())
    assert gap <= WEIGHT_ATOL, f"largest weight difference {gap:.2e} > {WEIGHT_ATOL}"
    for x, y in zip(ref.meta['history'], got.meta['history']):
        for k in x:
            if k not in ('step', 'epoch'): assert y[k] == pytest.approx(x[k], rel=LOSS_RTOL, abs=2e-6), (x['step'], k, x[k], y[k])
