"""The segment loop against its protocol, on `loop.LinearTask` (a least-squares task with an RNG draw per step):
SIGKILLed at random instants and resumed, a run ends bit-identical to one uninterrupted run (weights, optimiser,
task state, every step's row); data-parallel ranks equal one process to float rounding, resume after a rank is
killed, and resume on another world size. `sigkill_until_done` is shared with the CF and retriever tests."""
import json, random, shutil, signal, subprocess, sys, threading, time
import numpy as np, psutil, pytest, torch
from letter8_tokenizer.checkpoint import Checkpointer, verify_checkpoint, step_dirs
from letter8_tokenizer.loop import LinearTask, run_segment, run_distributed

def _run(driver, args, timeout):
    p = subprocess.run([sys.executable, '-c', driver, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr

def sigkill_until_done(driver:str, args:list, ck, kills:int=3, window=(0.1, 0.6), seed:int=0, timeout:float=600) -> dict:
    """Run `python -c driver *args kill_after_s` with `kill_after_s` drawn from `window` until `kills` SIGKILLs
    landed (the newest checkpoint must verify after each), then once more without a kill; the last RESULT line.
    A machine fast enough to finish the whole run inside the window before any kill landed starts over in a
    window four times shorter, so that kills land whatever the machine's speed."""
    rng, landed, (lo, hi) = random.Random(seed), 0, window
    for _ in range(4 * kills):
        if landed >= kills: break
        rc, out = _run(driver, [*args, rng.uniform(lo, hi)], timeout)
        if rc == -signal.SIGKILL:
            landed += 1
            if found := Checkpointer(ck).checkpoints():
                assert verify_checkpoint(found[0][1]) is None, f'newest checkpoint {found[0][1]} does not verify after a kill'
            continue
        assert rc == 0 and 'RESULT ' in out, out
        if landed: break
        shutil.rmtree(ck, ignore_errors=True); lo, hi = lo / 4, hi / 4
    rc, out = _run(driver, [*args, 0], timeout)
    assert rc == 0 and 'RESULT ' in out, out
    return dict(kills=landed, result=json.loads(out.split('RESULT ')[1].splitlines()[0]))

def same(x, y) -> bool:
    "Bit-equal nested states: tensors and arrays exactly (dtype too), dicts, lists, plain values."
    if torch.is_tensor(x): return torch.is_tensor(y) and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
    if isinstance(x, np.ndarray): return isinstance(y, np.ndarray) and x.dtype == y.dtype and np.array_equal(x, y)
    if isinstance(x, dict): return isinstance(y, dict) and x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)): return isinstance(y, (list, tuple)) and len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    return x == y

def assert_same_state(a:dict, b:dict):
    "Two checkpoint states bit-identical: weights, optimiser, task state, position and the torch generator."
    assert a.keys() == b.keys(), (a.keys(), b.keys())
    for k in a:
        if k == 'rng':  # the tasks seed torch; python's and numpy's global generators start wherever the process left them
            assert same(a[k]['torch'], b[k]['torch']), 'torch generator differs'
        else: assert same(a[k], b[k]), f'{k} differs'

# a run long enough (3,072 steps, a commit every 25) for kills to land mid-training
TASK = dict(n=8192, dim=8, batch_size=8, epochs=3, lr=0.01)
DRIVER = r'''
import sys, json, torch
torch.set_num_threads(1)
from letter8_tokenizer.loop import LinearTask, run_segment
ck, task, kill = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])
t = LinearTask(**task); t.save_every_steps = 25
r = run_segment(t, ck, kill_after_s=kill or None, progress=False)
print('RESULT ' + json.dumps(dict(status=r.status, step=r.step, resumed=r.resumed_from)), flush=True)
'''

def test_sigkill_at_random_instants_ends_bit_identical(tmp_path):
    torch.set_num_threads(1)
    t = LinearTask(**TASK); t.save_every_steps = 25
    whole = run_segment(t, tmp_path/'whole', progress=False)
    assert (whole.status, whole.step) == ('done', 3072)
    res = sigkill_until_done(DRIVER, [tmp_path/'killed', json.dumps(TASK)], tmp_path/'killed', kills=4, window=(0.2, 1.0))
    print(res)
    assert res['kills'] >= 1 and res['result']['status'] == 'done' and res['result']['resumed'] is not None, res
    a, b = Checkpointer(tmp_path/'whole').load(), Checkpointer(tmp_path/'killed').load()
    assert a.step == b.step == 3072
    assert_same_state(a.state, b.state)
    assert (tmp_path/'killed'/'metrics.jsonl').read_bytes() == (tmp_path/'whole'/'metrics.jsonl').read_bytes()

def test_max_steps_resume_and_refusals(tmp_path):
    whole = run_segment(LinearTask(), tmp_path/'whole', progress=False)
    parts = [run_segment(LinearTask(), tmp_path/'parts', max_steps=7, progress=False) for _ in range(4)]
    assert [p.status for p in parts] == ['step_limit'] * 3 + ['done'] and parts[-1].step == whole.step
    assert_same_state(Checkpointer(tmp_path/'whole').load().state, Checkpointer(tmp_path/'parts').load().state)
    with pytest.raises(ValueError, match='allow_config_change=True'): run_segment(LinearTask(lr=0.5), tmp_path/'parts', progress=False)
    with pytest.raises(ValueError, match='allow_data_change=True'): run_segment(LinearTask(seed=3), tmp_path/'parts', progress=False, allow_config_change=True)

# ---------------------------------------------------------------------------------------------------------------
# data-parallel: ranks average gradients in another order than one process sums them, so equal to float rounding

DDP = dict(n=500, dim=4, batch_size=32, epochs=3)  # 16 batches per epoch, the last of 20 rows (7/7/6 on three ranks)

def ddp(ck, nproc, task=DDP, max_restarts=0, **kw):
    return run_distributed('letter8_tokenizer.loop:linear_segment', dict(checkpoint_dir=str(ck), task=task, progress=False, **kw), ck,
                           nproc=nproc, progress=False, max_restarts=max_restarts)

def assert_close(a, b, atol=1e-5):
    for k in a['model']: torch.testing.assert_close(a['model'][k], b['model'][k], atol=atol, rtol=0)
    assert a['seen'] == b['seen']

@pytest.fixture(scope='module')
def single(tmp_path_factory):
    ck = tmp_path_factory.mktemp('single')
    assert run_segment(LinearTask(**DDP), ck, progress=False).step == 48
    return Checkpointer(ck).load().state

def test_two_ranks_equal_one_process_then_three_resume(tmp_path, single):
    r = ddp(tmp_path/'grow', 2, max_steps=20)
    assert (r['status'], r['step'], r['ledger'][-1]['world_size']) == ('step_limit', 20, 2)
    got = Checkpointer(tmp_path/'grow').load().state
    assert got['world_size'] == 2 and [x['rank'] for x in got['ranks']] == [0, 1]
    assert torch.equal(got['ranks'][0]['rng']['torch'], got['ranks'][1]['rng']['torch'])  # every rank draws the batch's noise
    r = ddp(tmp_path/'grow', 3)
    assert (r['status'], r['resumed_from'], r['step'], [s['world_size'] for s in r['ledger']]) == ('done', 20, 48, [2, 3])
    assert_close(single, Checkpointer(tmp_path/'grow').load().state)

def test_sigkill_one_rank_restart_and_resume(tmp_path, single):
    ck, box = tmp_path/'killed', {}
    slow = dict(DDP, epochs=60)  # 960 steps, a commit every 0.2 s
    def target():
        try: box['r'] = ddp(ck, 2, task=slow, max_restarts=1, deadline=dict(limit_s=1e6, start=time.time(), save_every_s=0.2))
        except BaseException as e: box['error'] = e
    th = threading.Thread(target=target, daemon=True); th.start()
    t0 = time.time()
    while not any(s > 0 for s, _ in step_dirs(ck)):  # the first periodic commit; the fresh start committed step 0
        assert time.time() - t0 < 180 and th.is_alive(), box
        time.sleep(0.02)
    victims = [p for p in psutil.Process().children(recursive=True) if 'letter8_tokenizer.loop' in ' '.join(p.cmdline()) and p.environ().get('LOCAL_RANK') == '1']
    assert len(victims) == 1, victims
    victims[0].send_signal(signal.SIGKILL)
    th.join(300)
    assert 'error' not in box, box.get('error')
    r = box['r']
    assert r['status'] == 'done' and r['step'] == 960 and r['resumed_from'] is not None and r['resumed_from'] > 0, r
