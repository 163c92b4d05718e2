"""train_segment under real process kills: every restart resumes from a committed checkpoint, and the run ends
bit-identical (weights and codes) to one uninterrupted run."""
import json, os, random, re, signal, subprocess, sys, time
from pathlib import Path
import numpy as np, pytest, torch
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import synthetic_catalog, Items
from letter8_tokenizer.train import train_segment
from letter8_tokenizer.checkpoint import Checkpointer, verify_checkpoint
from letter8_tokenizer.model import Letter8, encode

OVERRIDES = {'model.hidden': [64, 32], 'model.e_dim': 8, 'model.codebook_size': 16, 'optim.batch_size': 128,
             'optim.epochs': 120, 'schedule.save_every_steps': 3, 'schedule.log_every_s': 3600.0}

DRIVER = r'''
import sys, json
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import Items
from letter8_tokenizer.train import train_segment
cat, ck, overrides, kill_after = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
items = Items(cat + '/items.npy', cf=cat + '/cf.npy')
r = train_segment(override(Config(), overrides), items, ck, kill_after_s=kill_after or None)
print('RESULT ' + json.dumps(dict(status=r.status, step=r.step, resumed=r.resumed_from)), flush=True)
'''

@pytest.fixture(scope='module')
def catalog(tmp_path_factory):
    d = tmp_path_factory.mktemp('catalog')
    synthetic_catalog(d, n_items=1500, dim=32)
    return d

def start(catalog, ck, kill_after=0.0):
    return subprocess.Popen([sys.executable, '-c', DRIVER, str(catalog), str(ck), json.dumps(OVERRIDES), str(kill_after)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

def wait_for_training(p, timeout=120):
    "Read lines until the segment says where it starts; return the step it resumed from (0 when fresh)."
    t = time.time()
    while time.time() - t < timeout:
        line = p.stdout.readline()
        if not line: raise AssertionError(f'driver ended early, rc={p.wait()}')
        if m := re.match(r'resumed from .* \(step (\d+),', line): return int(m[1])
        if line.startswith('no checkpoint'): return 0
    raise AssertionError('driver never started training')

def final_model(ck):
    found = Checkpointer(ck).load()
    model = Letter8(override(Config(), {**OVERRIDES, 'model.in_dim': 32, 'model.cf_dim': 32}))
    model.load_state_dict(found.state['model'])
    return found, model

def test_sigkill_at_random_instants_ends_bit_identical(tmp_path, catalog):
    items = Items(catalog/'items.npy', cf=catalog/'cf.npy')
    whole = train_segment(override(Config(), OVERRIDES), items, tmp_path/'whole', progress=False)
    assert whole.status == 'done'
    ck, rng, resumes, kills = tmp_path/'killed', random.Random(0), [], 0
    while kills < 22:
        drill = kills >= 20  # the last two use the fault drill: the process SIGKILLs itself
        p = start(catalog, ck, kill_after=rng.uniform(0.2, 1.0) if drill else 0.0)
        resumes.append(wait_for_training(p))
        if not drill:
            time.sleep(rng.uniform(0.0, 0.8)); p.kill()
        out, _ = p.communicate(timeout=120)
        if 'RESULT' in out: break  # finished before the kill landed
        assert p.returncode == -signal.SIGKILL, out
        kills += 1
        newest = Checkpointer(ck).checkpoints()[0][1]
        assert verify_checkpoint(newest) is None, f'newest checkpoint {newest} does not verify after a kill'
    assert kills >= 20 and resumes == sorted(resumes), resumes
    p = start(catalog, ck); wait_for_training(p)
    out, _ = p.communicate(timeout=300)
    assert json.loads(out.split('RESULT ')[1])['status'] == 'done', out
    (a, ma), (b, mb) = final_model(tmp_path/'whole'), final_model(ck)
    assert a.step == b.step == whole.step
    sa, sb = a.state['model'], b.state['model']
    assert all(torch.equal(sa[k], sb[k]) for k in sa), 'weights differ from the uninterrupted run'
    assert all(torch.equal(x, y) for x, y in zip(a.state['groups'], b.state['groups']))
    np.testing.assert_array_equal(encode(ma, items), encode(mb, items))
    ledger = b.meta['ledger']
    assert ledger[-1]['stop_reason'] == 'done' and ledger[-1]['end_step'] == whole.step

def test_sigterm_saves_and_stops_cleanly(tmp_path, catalog):
    p = start(catalog, tmp_path/'ck')
    wait_for_training(p); time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    r = json.loads(out.split('RESULT ')[1])
    assert r['status'] == 'signal'
    found = Checkpointer(tmp_path/'ck').load()
    assert found.step == r['step'] and found.meta['ledger'][-1]['stop_reason'] == 'signal'
