"""Issue 50: a run's records tell the truth after a failure. A full disk at the export (an injected ENOSPC) gives one
message with the path and the fix, leaves a valid ledger and notebook and a status that is not `running`, and the
run resumes to the codes of an uninterrupted run; a segment whose runner was killed is recorded as `killed`."""
import contextlib, io
import nbformat, numpy as np
import pytest
from letter8_tokenizer.cli import main
from letter8_tokenizer.codes import CodeTable
from letter8_tokenizer.runner import segment_notebook, read_ledger, record_segment, run_notebooks
from letter8_tokenizer.runfolder import read_status, run_paths, write_status
from letter8_tokenizer.params import notebook_parameters, RUN_PARAMETERS, InputError

ARGS = ['--experiment', 'full', '--catalog-items', 300, '--overrides', '{"optim.epochs": 1}', '--retries', 1, '--threads', 1, '--quiet']

def call(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(list(map(str, argv)))
    return rc, out.getvalue(), err.getvalue()

def disk_full_notebook(path):
    "The template with a cell before the export that makes the export fail as a full disk does."
    nb = nbformat.read(segment_notebook(), 4)
    i = next(i for i, c in enumerate(nb.cells) if c.cell_type == 'code' and "session.stage('export')" in c.source)
    nb.cells.insert(i, nbformat.v4.new_code_cell("import errno, letter8_tokenizer.stages as stages\n"
        "def full(*a, **k): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(session.run.codes/'codes.npy'))\n"
        "stages.export_run = full"))
    nbformat.write(nb, str(path))
    return path

def test_disk_full_at_the_export_then_resume(tmp_path):
    nb = disk_full_notebook(tmp_path/'full.ipynb')
    rc, out, err = call('run', '--notebook', nb, '--out', tmp_path/'a', *ARGS)
    run = tmp_path/'a'/'full'
    assert rc == 1 and 'the disk is full' in out and str(run/'codes'/'codes.npy') in out and 'Free space' in out, out + err
    ledger = read_ledger(tmp_path/'a'/'segments.jsonl')  # valid JSON lines
    assert [(r['segment'], r['stop_reason'], r['permanent']) for r in ledger] == [('segment-000', 'error', True)]
    nbformat.read(str(tmp_path/'a'/'segment-000.ipynb'), 4)  # a whole notebook
    assert read_status(run)['status'] == 'trained' and not (run/'export.json').exists()
    rc, out, err = call('run', '--out', tmp_path/'a', *ARGS)  # space is back
    assert rc == 0, out + err
    assert [r['stop_reason'] for r in read_ledger(tmp_path/'a'/'segments.jsonl')] == ['error', 'done']
    rc, _, err = call('run', '--out', tmp_path/'b', *ARGS)  # an uninterrupted run
    assert rc == 0, err
    a, b = CodeTable.load(run/'codes'), CodeTable.load(tmp_path/'b'/'full'/'codes')
    assert np.array_equal(a.codes, b.codes) and (run/'metrics.jsonl').read_text() == (tmp_path/'b'/'full'/'metrics.jsonl').read_text()

def test_killed_runner_is_recorded(tmp_path):
    "A segment still `running` in the ledger (its runner was SIGKILLed) is settled as `killed` by the next runner, and status.json too."
    run = run_paths(tmp_path, 'k')
    write_status(run, status='running', segment='segment-000', params={**{k: notebook_parameters()[k] for k in RUN_PARAMETERS}, 'catalog_items': 300})
    record_segment(tmp_path/'segments.jsonl', dict(segment='segment-000', notebook=str(tmp_path/'segment-000.ipynb'), stop_reason='running', end=None))
    with pytest.raises(InputError, match='catalog_items: 300 -> 500'):  # refused after the records are settled
        run_notebooks(None, tmp_path, dict(experiment='k', catalog_items=500), progress=False)
    assert read_ledger(tmp_path/'segments.jsonl')[0]['stop_reason'] == 'killed' and read_status(run.root)['status'] == 'killed'
