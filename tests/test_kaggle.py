"""The Kaggle chain end to end, against the local stand-in, `letter8_tokenizer.standin` (nbs/12_standin.ipynb).

Kaggle's servers cannot be reached from here; the chain uses the real `kaggle` client, pointed at a stand-in
on 127.0.0.1 that runs every pushed notebook with papermill in a fake /kaggle layout. Most tests use a tiny
segment notebook generated below (same parameters and outputs as nbs/segment.ipynb: step-NNNNNNNNN
checkpoint dirs with manifest.json, status.json, codes/); one uses the real nbs/segment.ipynb when it exists.
"""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import nbformat
import numpy as np
import pytest

# Import the client while the environment holds no token: `import kaggle` authenticates at import time, and a
# KAGGLE_API_TOKEN set then would be checked against api.kaggle.com.
for _k in [k for k in os.environ if k.startswith('KAGGLE_')]: os.environ.pop(_k)
import contextlib, io  # noqa: E402
from letter8_tokenizer.chain import kaggle_config_dir  # noqa: E402
kaggle_config_dir()  # the client makes it at import without exist_ok: two xdist workers importing at once on a fresh machine race
with contextlib.redirect_stdout(io.StringIO()): import kaggle  # noqa: E402,F401  (prints auth help when no creds)

from letter8_tokenizer.standin import KaggleStandin  # noqa: E402
from letter8_tokenizer.chain import KaggleAuthError, KaggleChain, KaggleKernelError, KaggleQuotaExhausted, kaggle_api  # noqa: E402
from letter8_tokenizer.install import build_wheelhouse, install_offline  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
KEY = 'k3y-that-must-never-leak-0123456789'

PARAMS = '''experiment: str = "run"
items_path: str = ""
cf_path: str = ""
labels_path: str = ""
catalog_items: int = 64
resume_from: str = ""
work_dir: str = "."
session_limit_s: float = 0.0
margin_s: float = 0.0
config_path: str = ""
overrides: str = "{}"
kill_after_s: float = 0.0
'''

BODY = '''
import hashlib, json, time
from pathlib import Path
import numpy as np
t0 = time.time()
ov = json.loads(overrides)
total, step_s = ov.get('steps', 30), ov.get('step_s', 0.05)
exp = Path(work_dir)/experiment; ck = exp/'checkpoints'; ck.mkdir(parents=True, exist_ok=True)
def committed(root):
    root = Path(root)
    if not root.is_dir(): return []
    return [(int(p.name[5:]), p) for p in root.iterdir() if p.name.startswith('step-') and (p/'manifest.json').is_file()]
found = [c for r in [ck] + [Path(r) for r in resume_from.split(',') if r] for c in committed(r)]
step, state = 0, np.zeros(8)
if found:
    step, path = max(found)
    state = np.load(path/'state.npy')
print('resuming at step', step, 'from', len(found), 'checkpoints')
limit = session_limit_s or 43200
while step < total:
    if time.time() - t0 + step_s + margin_s > limit: break
    marker = ov.get('fail_once_marker')
    if ov.get('fail_at_step') == step and (not marker or not Path(marker).exists()):
        if marker: Path(marker).write_text('failed once')
        raise RuntimeError(f'injected failure at step {step}')
    time.sleep(step_s)
    state = state * 0.9 + np.random.default_rng(step).normal(size=8)
    step += 1
    tmp = ck/f'.tmp-{step}'; tmp.mkdir()
    np.save(tmp/'state.npy', state); b = (tmp/'state.npy').read_bytes()  # a manifest `checkpoint.verify_checkpoint` accepts
    (tmp/'manifest.json').write_text(json.dumps({'step': step, 'files': {'state.npy': {'size': len(b), 'sha256': hashlib.sha256(b).hexdigest()}}}))
    tmp.rename(ck/f'step-{step:09d}')
    for s, p in sorted(committed(ck))[:-2]:
        for f in p.iterdir(): f.unlink()
        p.rmdir()
done = step >= total
if done:
    (exp/'codes').mkdir(exist_ok=True)
    codes = (np.abs(np.outer(np.arange(catalog_items) + 1, state)) * 1000).astype(np.int64) % 256
    np.save(exp/'codes'/'codes.npy', codes)
    (exp/'codes'/'codes.json').write_text(json.dumps({'levels': 8, 'n': catalog_items}))
(exp/'status.json').write_text(json.dumps({'status': 'done' if done else 'stopped', 'done': done, 'step': step}))
print('stopped at step', step, 'done', done)
'''


def make_fake_segment(path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PARAMS, metadata={'tags': ['parameters']}),
                                         nbformat.v4.new_code_cell(BODY)])
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    nbformat.write(nb, str(path))
    return path


def local_run(nb, work, **params):
    "One uninterrupted local run: the reference code table."
    import papermill as pm
    work.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(str(nb), str(work/'out.ipynb'), parameters={'work_dir': str(work), **params},
                        kernel_name='python3', progress_bar=False, cwd=str(work))
    return work


@pytest.fixture
def env(tmp_path, monkeypatch):
    "Client credentials only through the client's own mechanism (env vars); no ~/.kaggle of the user."
    monkeypatch.setenv('HOME', str(tmp_path/'home'))
    monkeypatch.setenv('KAGGLE_CONFIG_DIR', str(tmp_path/'home'/'.kaggle'))
    monkeypatch.setenv('KAGGLE_USERNAME', 'tester')
    monkeypatch.setenv('KAGGLE_KEY', KEY)
    (tmp_path/'home'/'.kaggle').mkdir(parents=True)
    return tmp_path


@pytest.fixture
def standin(env):
    s = KaggleStandin(env/'standin', username='tester', key=KEY).start()
    yield s
    s.stop()


@pytest.fixture
def fake_nb(env): return make_fake_segment(env/'segment.ipynb')


def chain_for(env, standin, nb, state='chain', **kw):
    args = dict(experiment='run', params={'overrides': json.dumps({'steps': 36, 'step_s': 0.05}), 'catalog_items': 64},
                accelerator='T4', session_limit_s=0.5, margin_s=0.0, timeout_s=60, poll_s=0.2,
                endpoint=standin.url, sleep=lambda s: time.sleep(min(s, 0.2)), log=lambda *a: None)
    args.update(kw)
    return KaggleChain(env/state, nb, 'tester/letter8-segment', 'tester/letter8-checkpoints', **args)


def all_bytes(*dirs):
    for d in dirs:
        for p in Path(d).rglob('*'):
            if p.is_file(): yield p, p.read_bytes()


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
    d = tmp_path_factory.mktemp('ref')
    nb = make_fake_segment(d/'segment.ipynb')
    local_run(nb, d/'work', overrides=json.dumps({'steps': 36, 'step_s': 0.0}), catalog_items=64)
    return np.load(d/'work'/'run'/'codes'/'codes.npy')


def test_full_chain_matches_one_local_run(env, standin, fake_nb, reference):
    state = chain_for(env, standin, fake_nb).run()
    assert state['done'] and state['session'] >= 3, state
    np.testing.assert_array_equal(np.load(env/'chain'/'codes'/'codes.npy'), reference)
    assert len(standin.calls('SaveKernel')) == state['session']
    # the first session starts fresh; every later one resumes from the checkpoint dataset, mounted read-only
    first, later = standin.pushes[0], standin.pushes[1:]
    assert 'resume_from = ""' in json.loads(first['text'])['cells'][1]['source']
    assert all(p['datasetDataSources'] == ['tester/letter8-checkpoints'] for p in later)
    assert all('/kaggle/input/letter8-checkpoints/checkpoints' in json.loads(p['text'])['cells'][1]['source'] for p in later)
    assert first['enableGpu'] and first['machineShape'] == 'NvidiaTeslaT4' and not first['enableInternet']
    assert len(standin.datasets['letter8-checkpoints']['versions']) == state['session'] - 1
    steps = [h['step'] for h in state['history']]
    assert steps == sorted(steps) and steps[-1] == 36
    # credentials never land in a notebook, log, checkpoint, state or metadata file
    for p, b in all_bytes(env/'chain', standin.root):
        assert KEY.encode() not in b, p


def test_auth_failure_stops_with_a_clear_message(env, standin, fake_nb, monkeypatch):
    monkeypatch.setenv('KAGGLE_KEY', 'wrong-key')
    with pytest.raises(KaggleAuthError, match=r'refused the credentials \(HTTP 401\)') as e:
        chain_for(env, standin, fake_nb).run()
    assert 'wrong-key' not in str(e.value) and not standin.pushes
    # a bearer token the server rejects, and no credentials at all
    monkeypatch.delenv('KAGGLE_USERNAME'); monkeypatch.delenv('KAGGLE_KEY')
    standin.token = 'good-token'
    monkeypatch.setenv('KAGGLE_API_TOKEN', 'bad-token')
    with pytest.raises(KaggleAuthError): kaggle_api(standin.url)
    monkeypatch.setenv('KAGGLE_API_TOKEN', 'good-token')
    kaggle_api(standin.url).quota_view()  # the right token works
    monkeypatch.delenv('KAGGLE_API_TOKEN')
    with pytest.raises(KaggleAuthError, match='no credentials'): kaggle_api(standin.url)


def test_http_500_then_success(env, standin, fake_nb):
    standin.fail_next.update(SaveKernel=[500], GetKernelSessionStatus=[500, 503], GetAcceleratorQuotaStatistics=[502],
                             ListKernelSessionOutput=[500])
    waits = []
    ch = chain_for(env, standin, fake_nb, params={'overrides': json.dumps({'steps': 4, 'step_s': 0.0})},
                   session_limit_s=0, sleep=waits.append)
    state = ch.run()
    assert state['done'] and state['session'] == 1
    assert len(standin.calls('SaveKernel')) == 2 and len(standin.pushes) == 1
    assert not any(standin.fail_next.values()) and len(waits) >= 5


def test_kernel_error_reads_the_log(env, standin, fake_nb, tmp_path):
    ov = {'steps': 6, 'step_s': 0.0, 'fail_at_step': 2}
    ch = chain_for(env, standin, fake_nb, params={'overrides': json.dumps(ov)}, session_limit_s=0, error_retries=0)
    with pytest.raises(KaggleKernelError, match='ended in ERROR') as e: ch.run()
    assert 'injected failure at step 2' in str(e.value)
    assert json.loads((env/'chain'/'chain.json').read_text())['phase'] == 'push'
    # a failure that does not repeat: the chain retries the segment once and finishes
    ov['fail_once_marker'] = str(tmp_path/'failed-once')
    ch = chain_for(env, standin, fake_nb, state='chain2', params={'overrides': json.dumps(ov)}, session_limit_s=0,
                   error_retries=1)
    state = ch.run()
    assert state['done'] and [h['status'] for h in state['history']] == ['ERROR', 'COMPLETE']


def test_quota_exhausted_mid_chain_then_resumed(env, standin, fake_nb, reference):
    standin.quota_total_s, standin.charge_s = 2 * 3600, 3600  # each session charges an hour; two fit
    ch = chain_for(env, standin, fake_nb, timeout_s=3600)
    with pytest.raises(KaggleQuotaExhausted, match='0.00 h left'): ch.run()
    s = json.loads((env/'chain'/'chain.json').read_text())
    assert (s['session'], s['phase'], len(standin.pushes)) == (3, 'push', 2) and 'refresh' in s['stopped']
    standin.quota_used_s, standin.quota_total_s = 0, 30 * 3600  # the weekly refresh
    state = chain_for(env, standin, fake_nb, timeout_s=3600).run()
    assert state['done']
    np.testing.assert_array_equal(np.load(env/'chain'/'codes'/'codes.npy'), reference)


def test_plan_warns_over_quota(env, standin, fake_nb):
    standin.quota_total_s, standin.quota_used_s = 30 * 3600, 25 * 3600
    ch = chain_for(env, standin, fake_nb, session_limit_s=12 * 3600, timeout_s=None)
    with pytest.warns(UserWarning, match='5.0 are left'):
        p = ch.plan(step_s=1.0, steps_left=200_000)
    assert p['over_quota'] and p['sessions'] == 5


CHAIN_SCRIPT = '''
import json, sys, time
from letter8_tokenizer.chain import KaggleChain
a = json.loads(sys.argv[1])
KaggleChain(a['state'], a['nb'], 'tester/letter8-segment', 'tester/letter8-checkpoints', experiment='run',
            params={'overrides': json.dumps({'steps': 36, 'step_s': 0.05}), 'catalog_items': 64}, accelerator='T4',
            session_limit_s=0.5, margin_s=0.0, timeout_s=60, poll_s=0.2, endpoint=a['url']).run()
'''


def test_chain_killed_and_restarted(env, standin, fake_nb, reference):
    args = json.dumps({'state': str(env/'chain'), 'nb': str(fake_nb), 'url': standin.url})
    p = subprocess.Popen([PY, '-c', CHAIN_SCRIPT, args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sf, t0 = env/'chain'/'chain.json', time.time()
    try:
        while time.time() - t0 < 120:
            s = json.loads(sf.read_text()) if sf.exists() else {}
            if s.get('session', 0) >= 2 and s.get('phase') == 'wait': break
            assert p.poll() is None, p.stderr.read().decode()[-3000:]
            time.sleep(0.05)
        else: pytest.fail('the chain never reached session 2')
    finally:
        p.send_signal(signal.SIGKILL); p.wait()
    state = chain_for(env, standin, fake_nb).run()
    assert state['done']
    assert len(standin.pushes) == state['session']  # the pushed kernel was polled, not pushed again
    np.testing.assert_array_equal(np.load(env/'chain'/'codes'/'codes.npy'), reference)


def test_offline_install_from_a_wheel_folder(tmp_path):
    wheels = build_wheelhouse(tmp_path/'wheels', 'tester/letter8-wheels', project=ROOT, resolve=False)
    assert list(wheels.glob('letter8_tokenizer-*.whl')) and (wheels/'dataset-metadata.json').is_file()
    cmd = install_offline(wheels, extra='cpu', no_deps=True, target=tmp_path/'site')
    assert cmd[3:7] == ['install', '--no-index', '--find-links', str(wheels)] and cmd[-1] == 'letter8-tokenizer[cpu]'
    assert (tmp_path/'site'/'letter8_tokenizer'/'chain.py').is_file()


SEGMENT = ROOT/'nbs'/'segment.ipynb'


def test_real_segment_notebook_chain(env, standin, reference):
    "The real segment notebook, chained over sessions, gives the same code table as one local run."
    # A 1 s session limit has always run out by the first step, so each session trains exactly one step and
    # commits: 384 items in batches of 128 make 3 training sessions, however fast the machine is; the third has no
    # time left for the export, so a fourth exports (a session with nothing left to train exports whatever its limit).
    params = {'catalog_items': 384, 'overrides': json.dumps({'optim.batch_size': 128, 'optim.epochs': 1})}
    ref = local_run(SEGMENT, env/'local', experiment='real', **params)
    want = np.load(ref/'real'/'codes'/'codes.npy')
    state = chain_for(env, standin, SEGMENT, experiment='real', params=params, session_limit_s=1, margin_s=0,
                      timeout_s=240, accelerator='none', max_sessions=8).run()
    assert state['done'] and state['session'] == 4, state['history']  # 3 sessions of one step each, then one that exports
    np.testing.assert_array_equal(np.load(env/'chain'/'codes'/'codes.npy'), want)


STAGED = '''
import json
from pathlib import Path
exp = Path(work_dir)/experiment; exp.mkdir(parents=True, exist_ok=True)
seen = [r.parent/'cf'/'cf.txt' for r in map(Path, filter(None, resume_from.split(','))) if (r.parent/'cf'/'cf.txt').is_file()]
if not seen:  # session 1: only SASRec's step ran (no tokenizer checkpoint), and was cut off
    (exp/'cf'/'checkpoints'/'step-000000005').mkdir(parents=True)
    (exp/'cf'/'checkpoints'/'step-000000005'/'manifest.json').write_text('{}')
    (exp/'cf'/'cf.txt').write_text('learned in session 1')
    status = {'status': 'deadline', 'done': False, 'step': None, 'aux_steps': 5}
else:  # session 2: SASRec's folder came back through the checkpoint dataset
    (exp/'codes').mkdir(); (exp/'codes'/'codes.json').write_text('{}')
    (exp/'retrieval'/'checkpoints').mkdir(parents=True); (exp/'retrieval'/'retrieval.json').write_text('{"rows": []}')
    status = {'status': 'done', 'done': True, 'step': 3, 'cf': seen[0].read_text()}
(exp/'status.json').write_text(json.dumps(status))
'''


def test_chain_hands_over_the_cf_and_retrieval_folders(env, standin):
    "A session that only ran the CF step counts as progress, and its cf/ folder reaches the next session; the retriever's report comes home."
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PARAMS, metadata={'tags': ['parameters']}),
                                         nbformat.v4.new_code_cell(STAGED)])
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    nbformat.write(nb, str(env/'staged.ipynb'))
    state = chain_for(env, standin, env/'staged.ipynb', params={}, accelerator='none', max_sessions=3).run()
    assert state['done'] and state['session'] == 2, state['history']
    last = json.loads((env/'chain'/'sessions'/'002'/'run'/'status.json').read_text())
    assert last['cf'] == 'learned in session 1'
    assert (env/'chain'/'retrieval'/'retrieval.json').is_file() and not (env/'chain'/'retrieval'/'checkpoints').exists()
