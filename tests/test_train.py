"""train_segment under real process kills: every restart resumes from a committed checkpoint, and the run ends
bit-identical (weights and codes) to one uninterrupted run."""
import json, random, re, signal, subprocess, sys, time
from pathlib import Path
import numpy as np, pytest, torch
from letter8_tokenizer.config import Config, override
from letter8_tokenizer.data import synthetic_catalog, Items
from letter8_tokenizer.train import train_segment
from letter8_tokenizer.checkpoint import (Checkpointer, verify_checkpoint, verified_checkpoints, step_dirs, load_state,
                                          nonfinite_tensors, ResumeRefused, step_dir_name)
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

def wait_for_training(p, ck=None, timeout=120):
    """Read lines until the segment says where it starts; return the step it resumed from (0 when fresh). On a fresh
    start in `ck`, also wait for the step-0 commit: on a loaded machine the k-means init can outlast the kill's delay,
    and a run killed before its first commit leaves nothing to resume (that is a fresh start again, not a resume)."""
    t = time.time()
    while time.time() - t < timeout:
        line = p.stdout.readline()
        if not line: raise AssertionError(f'driver ended early, rc={p.wait()}')
        if m := re.match(r'resumed from .* \(step (\d+),', line): return int(m[1])
        if line.startswith('no checkpoint'):
            while ck is not None and not verified_checkpoints(ck):
                assert time.time() - t < timeout and p.poll() is None, 'no step-0 commit'
                time.sleep(0.02)
            return 0
    raise AssertionError('driver never started training')

def rows(ck): return [json.loads(l) for l in (Path(ck)/'metrics.jsonl').read_text().splitlines()]

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
        resumes.append(wait_for_training(p, ck))
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
    out, _ = p.communicate(timeout=1200)  # the rest of the run: minutes on a loaded 2-core machine
    assert json.loads(out.split('RESULT ')[1])['status'] == 'done', out
    (a, ma), (b, mb) = final_model(tmp_path/'whole'), final_model(ck)
    assert a.step == b.step == whole.step
    sa, sb = a.state['model'], b.state['model']
    assert all(torch.equal(sa[k], sb[k]) for k in sa), 'weights differ from the uninterrupted run'
    assert all(torch.equal(x, y) for x, y in zip(a.state['groups'], b.state['groups']))
    np.testing.assert_array_equal(encode(ma, items), encode(mb, items))
    ledger = b.meta['ledger']
    assert ledger[-1]['stop_reason'] == 'done' and ledger[-1]['end_step'] == whole.step
    # every step's losses exactly once, as in the uninterrupted run: no row a kill left behind, none missing
    assert (ck/'metrics.jsonl').read_bytes() == (tmp_path/'whole'/'metrics.jsonl').read_bytes()
    assert [r['step'] for r in rows(ck)] == list(range(1, whole.step + 1))
    assert b.meta['history'] == a.meta['history'] and b.meta['history_stride'] == a.meta['history_stride']

def test_sigterm_saves_and_stops_cleanly(tmp_path, catalog):
    p = start(catalog, tmp_path/'ck')
    wait_for_training(p)
    t = time.time()  # the loop (and its signal handler) runs once a periodic commit lands, however loaded the machine
    while not any(s >= 3 for s, _ in step_dirs(tmp_path/'ck')):
        assert time.time() - t < 120 and p.poll() is None, 'no periodic commit'
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    r = json.loads(out.split('RESULT ')[1])
    assert r['status'] == 'signal'
    found = Checkpointer(tmp_path/'ck').load()
    assert found.step == r['step'] and found.meta['ledger'][-1]['stop_reason'] == 'signal'

# ---------------------------------------------------------------------------------------------------------------
# divergence, no silent fresh start, the same data

SMALL = {**OVERRIDES, 'optim.epochs': 2}

def test_diverging_run_stops_and_commits_nothing_nonfinite(tmp_path, catalog):
    items = Items(catalog/'items.npy', cf=catalog/'cf.npy')
    cfg = override(Config(), {**SMALL, 'optim.lr': 1e6, 'schedule.save_every_steps': 1, 'schedule.keep': 2})
    r = train_segment(cfg, items, tmp_path/'ck', progress=False)
    assert r.status == 'diverged' and not r.done
    assert ('not finite' in r.message or 'NaN or inf' in r.message) and 'optim.lr' in r.message and 'optim.grad_clip' in r.message, r.message  # losses or optimiser state
    assert f"diverged at step {r.step + 1}" in r.message and r.checkpoint in r.message
    assert verified_checkpoints(tmp_path/'ck')[0] == (r.step, Path(r.checkpoint))
    for _, p in step_dirs(tmp_path/'ck'): assert nonfinite_tensors(load_state(p/'state.pt')) == [], p
    assert [h['step'] for h in rows(tmp_path/'ck')] == list(range(1, r.step + 1))  # no row of the diverged step
    found = Checkpointer(tmp_path/'ck').load()
    assert all(s['stop_reason'] != 'diverged' for s in found.meta['ledger'])  # the diverged segment committed nothing
    assert r.ledger[-1]['stop_reason'] == 'diverged' and r.ledger[-1]['diverged_at'] == r.step + 1
    again = train_segment(cfg, items, tmp_path/'ck', progress=False)  # the same config diverges again, commits nothing
    assert (again.status, again.step, again.resumed_from) == ('diverged', r.step, r.step)

def test_no_silent_fresh_start(tmp_path, catalog):
    items = Items(catalog/'items.npy', cf=catalog/'cf.npy')
    cfg = override(Config(), SMALL)
    first = train_segment(cfg, items, tmp_path/'run', progress=False, max_steps=4)
    for _, p in step_dirs(tmp_path/'run'): (p/'state.pt').write_bytes((p/'state.pt').read_bytes()[:-10])
    with pytest.raises(ResumeRefused) as e: train_segment(cfg, items, tmp_path/'run', progress=False)
    msg = str(e.value)
    assert str(tmp_path/'run'/step_dir_name(first.step)) in msg and 'truncated' in msg and 'allow_fresh_start=True' in msg
    (tmp_path/'empty').mkdir()
    for root, words in [(tmp_path/'empty', 'it is empty'), (tmp_path/'nowhere', 'does not exist'), (catalog, 'items.npy')]:
        with pytest.raises(ResumeRefused, match=words): train_segment(cfg, items, tmp_path/f'new-{root.name}', read_roots=[root], progress=False)
        assert not (tmp_path/f'new-{root.name}').exists() or not step_dirs(tmp_path/f'new-{root.name}')
    damaged = {p.name: (p/'state.pt').read_bytes() for _, p in step_dirs(tmp_path/'run') if p.name != step_dir_name(0)}
    r = train_segment(cfg, items, tmp_path/'run', progress=False, allow_fresh_start=True, max_steps=2)
    assert (r.resumed_from, r.step) == (None, 2)
    for name, data in damaged.items(): assert (tmp_path/'run'/name/'state.pt').read_bytes() == data  # kept for salvage

def test_other_items_of_the_same_shape_are_refused(tmp_path, catalog):
    from letter8_tokenizer.data import synthetic_catalog
    items = Items(catalog/'items.npy', cf=catalog/'cf.npy')
    cfg = override(Config(), SMALL)
    train_segment(cfg, items, tmp_path/'run', progress=False, max_steps=2)
    synthetic_catalog(tmp_path/'other', n_items=1500, dim=32, seed=7)
    other = Items(tmp_path/'other'/'items.npy', cf=tmp_path/'other'/'cf.npy')
    with pytest.raises(ResumeRefused) as e: train_segment(cfg, other, tmp_path/'run', progress=False)
    msg = str(e.value)
    saved = Checkpointer(tmp_path/'run').load().manifest['data']['id']
    assert saved in msg and 'allow_data_change=True' in msg and 'emb.sample_sha256' in msg
    r = train_segment(cfg, other, tmp_path/'run', progress=False, allow_data_change=True, max_steps=1)
    assert (r.resumed_from, r.step) == (2, 3)

def test_train_distributed_forwards_the_new_flags(tmp_path, catalog):
    from letter8_tokenizer.train import train_distributed
    items = Items(catalog/'items.npy', cf=catalog/'cf.npy')
    cfg = override(Config(), SMALL)
    with pytest.raises(RuntimeError, match='ResumeRefused'):
        train_distributed(cfg, items, tmp_path/'run', nproc=1, read_roots=[tmp_path/'nowhere'], progress=False)
    r = train_distributed(cfg, items, tmp_path/'run', nproc=1, read_roots=[tmp_path/'nowhere'], allow_fresh_start=True, max_steps=2, progress=False)
    assert (r.status, r.step, r.resumed_from) == ('step_limit', 2, None)

def test_refit_at_epoch_ends_resumes_bit_exact(catalog, tmp_path):
    "`quantizer.refit_every_epochs`: the epoch-end refit is part of the run's state; stopping and resuming changes nothing."
    torch.set_num_threads(1)  # speed only: both runs use the same setting
    cfg = override(Config(), {**OVERRIDES, 'optim.epochs': 4, 'quantizer.refit_every_epochs': 1})
    items = Items(catalog/'items.npy', cf=catalog/'cf.npy')
    whole = train_segment(cfg, items, tmp_path/'whole', progress=False)
    first = train_segment(cfg, items, tmp_path/'split', max_steps=17, progress=False)  # stops inside epoch 2 (12 batches/epoch)
    rest = train_segment(cfg, items, tmp_path/'split', progress=False)
    assert (whole.status, first.status, rest.status, rest.resumed_from) == ('done', 'step_limit', 'done', 17)
    a, b = Checkpointer(tmp_path/'whole').load().state['model'], Checkpointer(tmp_path/'split').load().state['model']
    assert all(torch.equal(a[k], b[k]) for k in a)
    train_segment(override(cfg, {'quantizer.refit_every_epochs': 0}), items, tmp_path/'plain', progress=False)
    c = Checkpointer(tmp_path/'plain').load().state['model']
    assert not torch.equal(a['levels.0.codebook'], c['levels.0.codebook']), 'the refit changed nothing'

def test_bfloat16_run_trains_and_resumes_bit_exact(catalog, tmp_path):
    "`model.precision='bfloat16'`: the MLPs run in bfloat16, the weights stay float32, and a stopped run resumes to the same weights."
    cfg = override(Config(), {**OVERRIDES, 'optim.epochs': 2, 'model.precision': 'bfloat16'})
    items = Items(catalog/'items.npy', cf=catalog/'cf.npy')
    whole = train_segment(cfg, items, tmp_path/'whole', progress=False)
    first = train_segment(cfg, items, tmp_path/'split', max_steps=7, progress=False)
    rest = train_segment(cfg, items, tmp_path/'split', progress=False)
    assert (whole.status, first.status, rest.status, rest.resumed_from) == ('done', 'step_limit', 'done', 7)
    a, b = Checkpointer(tmp_path/'whole').load().state['model'], Checkpointer(tmp_path/'split').load().state['model']
    assert all(a[k].dtype == b[k].dtype for k in a) and a['encoder.0.weight'].dtype == torch.float32
    assert all(torch.equal(a[k], b[k]) for k in a)
    train_segment(override(cfg, {'model.precision': 'float32'}), items, tmp_path/'f32', progress=False)
    c = Checkpointer(tmp_path/'f32').load().state['model']
    assert not torch.equal(a['encoder.0.weight'], c['encoder.0.weight']), 'bfloat16 changed nothing'
