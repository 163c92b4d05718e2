"""The `letter8` console entry point: every subcommand, `--help` everywhere, and exit codes scripts can use
(0 ok, 1 failed, 2 usage); `letter8 run` end to end with a real papermill kernel, then `encode` and `probe` on
what it trained."""
import contextlib, io, json, subprocess, sys
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
    assert set(COMMANDS) == {'demo', 'run', 'new', 'encode', 'probe', 'env', 'kaggle'}
    assert call()[0] == 2 and call('--help')[0] == 0
    for name in COMMANDS:
        rc, out, _ = call(name, '--help')
        assert rc == 0 and f'letter8 {name}' in out, name
    assert call('run', '--no-such-flag')[0] == 2
    assert call('encode')[0] == 2  # missing positional arguments

def test_env():
    rc, out, _ = call('env', '--json-out')
    e = json.loads(out)
    assert rc == 0 and {'python', 'torch', 'faiss', 'cpus', 'gpus', 'ram_gib'} <= set(e)
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
    rc, out, err = call('run', '--experiment', 'bad', '--items', tmp_path/'missing.npy', '--out', tmp_path, '--retries', 0, '--threads', 1)
    assert rc == 1 and 'failed' in out and 'missing.npy' in out

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
