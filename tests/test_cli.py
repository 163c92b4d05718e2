"""The `letter8` console entry point: every subcommand, `--help` everywhere, and exit codes scripts can use
(0 ok, 1 failed, 2 usage); `letter8 run` end to end with a real papermill kernel, then `encode` and `probe` on
what it trained."""
import contextlib, io, json, os, subprocess, sys, time
from pathlib import Path
import numpy as np
import pytest, yaml
from letter8_tokenizer.cli import main, COMMANDS
from letter8_tokenizer.codes import CodeTable

LETTER8 = str(Path(sys.executable).parent/'letter8')

def call(*argv):
    "Exit code, stdout and stderr of `letter8 argv` run in-process."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(list(map(str, argv)))
    return rc, out.getvalue(), err.getvalue()

def test_console_script_exit_codes():
    r = subprocess.run([LETTER8, '--help'], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and all(name in r.stdout for name in ('demo', 'run', 'new', 'encode', 'probe', 'env'))
    r = subprocess.run([LETTER8, 'rnu'], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "did you mean 'run'" in r.stderr

def test_help_everywhere_and_usage_errors():
    assert set(COMMANDS) == {'demo', 'run', 'new', 'encode', 'probe', 'env', 'kaggle', 'cf', 'retrieval'}
    assert call()[0] == 2 and call('--help')[0] == 0
    for name in COMMANDS:
        rc, out, _ = call(name, '--help')
        assert rc == 0 and f'letter8 {name}' in out, name
    assert call('run', '--no-such-flag')[0] == 2
    assert call('encode')[0] == 2  # missing positional arguments

def test_env():
    rc, out, _ = call('env', '--json-out')
    e = json.loads(out)
    assert rc == 0 and {'python', 'torch', 'faiss', 'cpus', 'gpus', 'ram_gb', 'accelerator', 'session_left_s'} <= set(e)
    assert call('env')[0] == 0

def test_new_writes_a_kaggle_ready_folder(tmp_path):
    rc, out, _ = call('new', 'cli-exp', '--dest', tmp_path, '--username', 'carol', '--catalog-items', 500, '--no-gpu')
    assert rc == 0 and 'kaggle kernels push' in out
    f = tmp_path/'cli-exp'
    meta = json.loads((f/'kernel-metadata.json').read_text())
    assert meta['id'] == 'carol/cli-exp' and meta['code_file'] == 'cli-exp.ipynb' and (f/meta['code_file']).exists()
    assert meta['language'] == 'python' and meta['kernel_type'] == 'notebook' and meta['is_private'] is True
    assert meta['enable_gpu'] is False and meta['enable_internet'] is False and meta['dataset_sources'] == []
    assert yaml.safe_load((f/'parameters.yaml').read_text()) == {'experiment': 'cli-exp', 'catalog_items': 500}
    rc, _, err = call('new', 'cli-exp', '--dest', tmp_path)
    assert rc == 1 and 'already exists' in err

@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    "`letter8 new` then `letter8 run --params` to the end: one segment of the tiny default model."
    tmp = tmp_path_factory.mktemp('cli')
    assert call('new', 'tiny-run', '--dest', tmp, '--catalog-items', 600)[0] == 0
    rc, out, err = call('run', '--params', tmp/'tiny-run'/'parameters.yaml', '--out', tmp/'runs', '--threads', 1, '--max-segments', 2)
    return tmp, rc, out, err

def test_run_end_to_end(trained):
    tmp, rc, out, err = trained
    assert rc == 0, out + err
    assert 'segment-000' in out and 'done' in out
    lines = out.splitlines()
    relayed = [l for l in lines if l.startswith('  | ')]  # the kernel's own lines, shown while it ran, before the ledger line
    assert any('this session: train' in l for l in relayed) and any(l.startswith('  | step ') for l in relayed), out
    assert lines.index(relayed[0]) < next(i for i, l in enumerate(lines) if l.startswith('segment-000:'))
    tail = out[out.rindex('collisions before resolution'):]  # ends with the summary `letter8 demo` prints
    assert 'probe: ' in tail and 'code table: ' in tail and 'perplexity' in out[:out.rindex('collisions before resolution')]
    run = tmp/'runs'/'tiny-run'
    st = json.loads((run/'status.json').read_text())
    assert st['done'] and st['segment'] == 'segment-000'
    assert len(CodeTable.load(run/'codes')) == 600

def test_encode_and_probe(trained):
    tmp, rc, _, _ = trained
    assert rc == 0
    run = tmp/'runs'/'tiny-run'
    items, labels = run/'catalog'/'items.npy', run/'catalog'/'labels.npy'
    rc, out, err = call('encode', run/'tokenizer', items, tmp/'codes.npy')
    assert rc == 0, err
    assert np.load(tmp/'codes.npy').shape == (600, 8)
    rc, out, err = call('encode', run/'tokenizer', items, tmp/'table')
    assert rc == 0, err
    assert (CodeTable.load(tmp/'table').codes == CodeTable.load(run/'codes').codes).all()  # same table as the run's
    rc, out, err = call('probe', tmp/'table', items, tmp/'probe', '--labels', labels, '--no-raw')
    assert rc == 0, err
    rep = json.loads((tmp/'probe'/'probe.json').read_text())
    assert rep['meta']['items'] == 600 and rep['probes'] and (tmp/'probe'/'probe.html').exists()
    rc, _, err = call('probe', tmp/'codes.npy', items, tmp/'probe2', '--labels', labels, '--no-raw')
    assert rc == 0, err
    rc, _, err = call('encode', tmp/'no-tokenizer', items, tmp/'x.npy')
    assert rc == 1 and 'letter8 encode:' in err and 'save_tokenizer' in err

def test_run_that_keeps_failing_exits_1(tmp_path):
    rc, out, err = call('run', '--experiment', 'bad', '--items-path', tmp_path/'missing.npy', '--out', tmp_path, '--retries', 0, '--threads', 1, '--quiet')
    assert rc == 2 and f"--items-path {tmp_path/'missing.npy'}" in err and not list(tmp_path.iterdir())  # bad input: refused, nothing written
    rc, out, err = call('run', '--experiment', 'bad', '--catalog-items', 300, '--kill-after-s', 0.01, '--out', tmp_path, '--retries', 0, '--threads', 1, '--quiet')
    assert rc == 1 and 'failed' in out and 'killed' in out
    assert not [l for l in out.splitlines() if l.startswith('  | ')] and 'collisions before resolution' not in out

def test_run_on_two_ranks(tmp_path):
    "`letter8 run --gpus 2`: the segment notebook trains data-parallel under torchrun (gloo on this CPU machine)."
    from letter8_tokenizer.checkpoint import Checkpointer
    rc, out, err = call('run', '--experiment', 'ddp-run', '--catalog-items', 600, '--out', tmp_path, '--gpus', 2, '--threads', 1, '--max-segments', 2)
    assert rc == 0, out + err
    run = tmp_path/'ddp-run'
    assert json.loads((run/'status.json').read_text())['done']
    assert [s['world_size'] for s in Checkpointer(run/'checkpoints').load().meta['ledger']] == [2]
    table = CodeTable.load(run/'codes')
    assert len(table) == 600 and len(np.unique(table.codes, axis=0)) == 600

RUN_TINY = ['--catalog-items', 500, '--threads', 1]

def test_two_runs_on_one_folder(tmp_path):
    "A second `letter8 run` on a folder another run is writing fails at once, naming the holder; the first run loses nothing."
    from letter8_tokenizer.runfolder import read_lock, RunPaths
    from letter8_tokenizer.export import verify_export
    args = ['run', '--experiment', 'one', '--out', tmp_path, '--overrides', '{"optim.epochs": 30}', *RUN_TINY]
    a = subprocess.Popen([LETTER8, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run, t = tmp_path/'one', time.time()
    while read_lock(run) is None and a.poll() is None and time.time() - t < 300: time.sleep(0.05)
    assert a.poll() is None, a.communicate()
    rc, out, err = call(*args)
    assert rc == 1 and f'locked by pid {a.pid}' in err and 'letter8 run --force' in err, err
    so, se = a.communicate(timeout=600)
    assert a.returncode == 0, so + se
    st = json.loads((run/'status.json').read_text())
    assert st['done'] and verify_export(RunPaths(run), st['step']) is None and read_lock(run) is None
    ledger = [json.loads(l) for l in (tmp_path/'segments.jsonl').read_text().splitlines()]
    assert [l['segment'] for l in ledger] == ['segment-000'] and ledger[0]['stop_reason'] == 'done'

HOOK = """import errno, os
if os.environ.get('LETTER8_SEGMENT'):  # only inside segment kernels: the probe report hits a full disk half-way
    import letter8_tokenizer.probe_report as _probe
    def _full(report, out_dir, title=''):
        os.makedirs(out_dir, exist_ok=True)
        open(os.path.join(out_dir, 'probe.html'), 'w').write('<html>half a page')
        raise OSError(errno.ENOSPC, 'No space left on device', os.path.join(str(out_dir), 'probe.json'))
    _probe.write_report = _full
"""

def test_disk_full_during_export(tmp_path, monkeypatch):
    "ENOSPC while the export is written: a clear message, no retry, the run stays 'trained' with no half folder; the next run exports only."
    from letter8_tokenizer.runfolder import read_status, RunPaths
    from letter8_tokenizer.export import verify_export
    from letter8_tokenizer.checkpoint import step_dirs
    (tmp_path/'hook').mkdir(); (tmp_path/'hook'/'sitecustomize.py').write_text(HOOK)
    monkeypatch.setenv('PYTHONPATH', os.pathsep.join([str(tmp_path/'hook'), *filter(None, [os.environ.get('PYTHONPATH')])]))
    args = ['run', '--experiment', 'full', '--out', tmp_path/'runs', *RUN_TINY]
    rc, out, err = call(*args)
    assert rc == 1 and 'No space left on device' in out and 'Free disk space and run again' in out and 'not retried' in out, out + err
    run = tmp_path/'runs'/'full'
    st = read_status(run)
    assert st['status'] == 'trained' and not st['done']
    assert not (run/'export.json').exists() and not (run/'probe').exists()
    assert not [p.name for p in run.glob('.*') if p.is_dir()]  # no temporary folder left behind
    ckpts = sorted(p.name for _, p in step_dirs(run/'checkpoints'))
    monkeypatch.undo()
    rc, out, err = call(*args)
    assert rc == 0, out + err
    ledger = [json.loads(l) for l in (tmp_path/'runs'/'segments.jsonl').read_text().splitlines()]
    assert [(l['stop_reason'], l['steps']) for l in ledger] == [('error', ledger[0]['steps']), ('done', 0)]
    assert sorted(p.name for _, p in step_dirs(run/'checkpoints')) == ckpts
    assert verify_export(RunPaths(run), st['step']) is None

def test_encode_wrong_width(trained, tmp_path):
    tmp, rc, _, _ = trained
    np.save(tmp_path/'wide.npy', np.zeros((4, 300), np.float32))
    rc, _, err = call('encode', tmp/'runs'/'tiny-run'/'tokenizer', tmp_path/'wide.npy', tmp_path/'c.npy')
    assert rc == 1 and 'width 300' in err and 'trained on width 128' in err and 'mat1' not in err

@pytest.fixture(scope='module')
def partial(tmp_path_factory):
    "A run cut short: its only segment SIGKILLed 2 s into training, leaving committed checkpoints and no export."
    tmp = tmp_path_factory.mktemp('partial')
    rc, out, err = call('run', '--experiment', 'part', '--out', tmp, '--overrides', '{"optim.epochs": 400}', '--max-segments', 1,
                        '--retries', 0, '--kill-segment', 0, '--kill-after-s', 2, *RUN_TINY)
    assert rc == 1 and 'killed' in out, out + err
    return tmp/'part'

def rerun(src, tmp_path, *extra, prepare=None):
    "Copy the partial run (`prepare` it) and run it again; exit code, output, the run folder, and its checkpoint files before the rerun."
    import shutil
    run = tmp_path/'part'; shutil.copytree(src, run)
    if prepare: prepare(run)
    before = {p.relative_to(run/'checkpoints').as_posix(): p.read_bytes() for p in (run/'checkpoints').glob('step-*/*') if p.is_file()}
    rc, out, err = call('run', '--experiment', 'part', '--out', tmp_path, '--overrides', '{"optim.epochs": 400}', *RUN_TINY, *extra)
    return rc, out + err, run, before

def kept(run, before):
    "Every file of every checkpoint that existed before is still there, byte for byte (metrics rows past the last commit may be cut)."
    return all((run/'checkpoints'/k).is_file() and (run/'checkpoints'/k).read_bytes() == v for k, v in before.items())

def test_all_checkpoints_corrupt(partial, tmp_path):
    def corrupt(run):
        for st in (run/'checkpoints').glob('step-*/state.pt'): st.write_bytes(st.read_bytes()[:-7])
    rc, out, run, before = rerun(partial, tmp_path, prepare=corrupt)
    assert rc == 1 and 'ResumeRefused' in out and 'not retried' in out and 'allow_fresh_start' in out, out
    assert 'segment-001' not in out  # one segment, no retries
    assert kept(run, before) and not (run/'export.json').exists()

def test_wrong_resume_root(tmp_path):
    "A new session told to resume from a folder that holds no checkpoint refuses to start afresh."
    (tmp_path/'empty').mkdir()
    rc, out, err = call('run', '--experiment', 'fresh', '--out', tmp_path, '--resume-from', tmp_path/'empty', *RUN_TINY)
    assert rc == 1 and 'ResumeRefused' in out and str(tmp_path/'empty') in out and 'not retried' in out, out + err
    assert not list((tmp_path/'fresh'/'checkpoints').glob('step-*'))  # nothing trained from scratch

def test_changed_items_file(partial, tmp_path):
    cat = partial/'catalog'
    np.save(tmp_path/'other.npy', np.load(cat/'items.npy')[::-1].copy())  # same shape and dtype, other rows
    rc, out, run, before = rerun(partial, tmp_path, '--items-path', tmp_path/'other.npy', '--cf-path', cat/'cf.npy', '--labels-path', cat/'labels.npy')
    assert rc == 2 and 'was started with other parameters' in out and f"items_path: '' -> '{tmp_path/'other.npy'}'" in out, out  # refused before any kernel
    assert kept(run, before) and not list(tmp_path.glob('segment-001*'))
