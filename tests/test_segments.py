"""The segment runner end to end with real papermill kernels: a kernel SIGKILLed mid-segment, a deadline stop,
a failing cell, the ledger, the notebook's parameters as papermill sees them, and saved notebooks that show
the final progress panel (no stale 0% bar, no widget)."""
import json, subprocess, sys
from pathlib import Path
import pytest
from letter8_tokenizer.runner import run_notebooks, segment_notebook
from letter8_tokenizer.runfolder import read_status, RunPaths, read_lock
from letter8_tokenizer.params import InputError
from letter8_tokenizer.export import verify_export
from letter8_tokenizer.checkpoint import step_dirs
from letter8_tokenizer.codes import CodeTable

ROOT = Path(__file__).resolve().parent.parent
NB = ROOT/'nbs'/'segment.ipynb'
ENV = {'OMP_NUM_THREADS': 1, 'MKL_NUM_THREADS': 1}
CONTRACT = {'experiment': ('str', '"demo"'), 'items_path': ('str', '""'), 'cf_path': ('str', '""'), 'interactions_path': ('str', '""'),
            'cf_overrides': ('str', '"{}"'), 'labels_path': ('str', '""'), 'catalog_items': ('int', '2000'), 'resume_from': ('str', '""'),
            'work_dir': ('str', '"runs"'), 'session_limit_s': ('float', '0.0'), 'margin_s': ('float', '5.0'), 'config_path': ('str', '""'),
            'overrides': ('str', '"{}"'), 'kill_after_s': ('float', '0.0'), 'export_s': ('float', '0.0'), 'gpus': ('int', '0'),
            'device': ('str', '"auto"'),
            'retrieval_ids': ('str', '""'), 'retriever_overrides': ('str', '"{}"')}

def outputs(nb_path):
    "Every output of every code cell of a saved notebook, and the notebook."
    nb = json.loads(Path(nb_path).read_text())
    return [o for c in nb['cells'] if c['cell_type'] == 'code' for o in c.get('outputs', [])], nb

def text_of(o):
    t = o.get('text') or o.get('data', {}).get('text/plain') or ''
    return ''.join(t) if isinstance(t, list) else t

def html_of(o):
    h = o.get('data', {}).get('text/html') or ''
    return ''.join(h) if isinstance(h, list) else h

@pytest.fixture(scope='module')
def chain(tmp_path_factory):
    "Segment 0 killed mid-step by the fault drill, segment 1 stopped by a 12 s session deadline, then segments until done."
    out = tmp_path_factory.mktemp('chain')
    params = dict(experiment='chain', overrides=json.dumps({'optim.epochs': 120}))
    rep = run_notebooks(NB, out, params, max_segments=6, retries=2, env=ENV, progress=False,
                       segment_parameters={0: {'kill_after_s': 1.0}, 1: {'session_limit_s': 12.0, 'margin_s': 1.0}})
    return out, rep

def test_chain_survives_kill_and_deadline(chain):
    out, rep = chain
    assert rep.status == 'done', rep
    reasons = [s.stop_reason for s in rep.segments]
    assert reasons[0] == 'killed' and reasons[-1] == 'done', reasons
    # segment 1 stops at its 12 s deadline; a fast machine finishes training in it instead and either exports there
    # (2 segments) or, short of time for the export, says 'trained' and leaves the export to segment 2
    assert 'deadline' in reasons or 'trained' in reasons or len(reasons) == 2, reasons
    for a, b in zip(rep.segments, rep.segments[1:]): assert b.start_step == a.end_step
    assert rep.segments[-1].end_step == rep.final['step'] == 120 * 8
    st = read_status(Path(rep.run_dir))
    assert st['done'] and st['status'] == 'done' and st['segment'] == rep.segments[-1].segment
    assert {'status', 'done', 'step', 'epoch', 'checkpoint', 'segment', 'steps', 'seconds', 'time_utc'} <= set(st)
    run = Path(rep.run_dir)
    assert len((run/'metrics.jsonl').read_text().splitlines()) == 120 * 8
    assert len(CodeTable.load(run/'codes')) == 2000
    assert (run/'tokenizer'/'model.pt').exists() and (run/'probe'/'probe.html').exists() and (run/'probe'/'probe.json').exists()
    assert verify_export(RunPaths(run), st['step']) is None and read_lock(run) is None  # export committed, lock released

def test_ledger_and_segment_files(chain):
    out, rep = chain
    ledger = [json.loads(l) for l in (out/'segments.jsonl').read_text().splitlines()]
    assert [l['segment'] for l in ledger] == [f'segment-{i:03d}' for i in range(len(rep.segments))]
    for l in ledger:
        assert {'start', 'end', 'steps', 'stop_reason', 'checkpoint', 'error'} <= set(l)
        assert Path(l['notebook']).exists()
    assert ledger[0]['stop_reason'] == 'killed' and 'Kernel died' in ledger[0]['error']
    assert ledger[-1]['error'] is None

def test_resume_from_last_commit(chain):
    out, rep = chain
    outs, _ = outputs(out/'segment-001.ipynb')
    text = '\n'.join(text_of(o) for o in outs)
    first = rep.segments[0]  # killed; on a slow machine after its step-0 checkpoint committed, which segment 1 must resume
    assert ('resumed from' in text and f'(step {first.end_step},' in text) if first.checkpoint else 'fresh start' in text

def test_saved_notebooks_show_final_progress(chain):
    out, rep = chain
    for s in rep.segments:
        outs, nb = outputs(s.notebook)
        raw = json.dumps(nb)
        assert 'application/vnd.jupyter.widget-view+json' not in raw and 'Error displaying widget' not in raw
        assert 'widgets' not in nb['metadata']
        if s.stop_reason == 'killed' or s.start_step == s.end_step: continue  # killed, or a session that only exported
        panels = [html_of(o) for o in outs if 'step ' in html_of(o) and '/ ' in html_of(o)]
        assert len(panels) == 1, [s.segment, len(panels)]  # one panel, updated in place
        assert f"<b>step {s.end_step:,} / {120 * 8:,}" in panels[0], panels[0][:120]
        if s.stop_reason == 'done': assert '(100.0%)' in panels[0]
        trained = 'done' if s.stop_reason == 'trained' else s.stop_reason  # training done, export left to the next session
        assert 'status' in panels[0] and trained in panels[0]

def test_already_done_runs_nothing(chain):
    out, rep = chain
    again = run_notebooks(NB, out, dict(experiment='chain', overrides=json.dumps({'optim.epochs': 120})), progress=False)
    assert again.status == 'done' and again.segments == [] and 'already done' in again.message

def test_partial_export_is_redone_without_training(chain):
    """A done run whose export was cut short (a 0-byte model.pt, a lost probe.json) is not 'already done': the next
    segment redoes the export from the last checkpoint, and trains nothing."""
    out, rep = chain
    run = Path(rep.run_dir)
    weights = (run/'tokenizer'/'model.pt').read_bytes()
    (run/'tokenizer'/'model.pt').write_bytes(b''); (run/'probe'/'probe.json').unlink()
    ckpts, metrics = sorted(p.name for _, p in step_dirs(run/'checkpoints')), (run/'metrics.jsonl').read_text()
    again = run_notebooks(NB, out, dict(experiment='chain', overrides=json.dumps({'optim.epochs': 120})), env=ENV, progress=False)
    assert again.status == 'done' and len(again.segments) == 1, again
    s = again.segments[0]
    assert s.stop_reason == 'done' and s.steps == 0 and s.start_step == s.end_step == 120 * 8
    assert sorted(p.name for _, p in step_dirs(run/'checkpoints')) == ckpts and (run/'metrics.jsonl').read_text() == metrics
    assert verify_export(RunPaths(run), 120 * 8) is None and (run/'tokenizer'/'model.pt').read_bytes() == weights
    text = '\n'.join(text_of(o) for o in outputs(s.notebook)[0])
    assert 'this session: export' in text and 'tokenizer/model.pt does not match export.json' in text

def test_done_run_with_other_parameters_is_refused(chain):
    out, rep = chain
    with pytest.raises(ValueError, match=r"already done, made with other parameters \(overrides: .*optim.epochs.*99"):
        run_notebooks(NB, out, dict(experiment='chain', overrides=json.dumps({'optim.epochs': 99})), progress=False)
    assert read_lock(Path(rep.run_dir)) is None

def test_export_deferred_to_next_session_when_time_is_short(tmp_path):
    """Segment 0 finishes training but its session has less time left than the export needs (export_s): it stops
    'trained', with no export and not done; segment 1 exports only."""
    rep = run_notebooks(NB, tmp_path, dict(experiment='late', catalog_items=500), max_segments=3, env=ENV, progress=False,
                       segment_parameters={0: {'export_s': 1e6}})
    assert rep.status == 'done', rep
    s0, s1 = rep.segments
    assert (s0.stop_reason, s0.done, s0.steps > 0) == ('trained', False, True)
    assert (s1.stop_reason, s1.done, s1.steps, s1.start_step) == ('done', True, 0, s0.end_step)
    text = '\n'.join(text_of(o) for o in outputs(s0.notebook)[0])
    assert 'the next session exports' in text
    assert verify_export(RunPaths(Path(rep.run_dir)), s0.end_step) is None

def test_permanent_error_is_not_retried(tmp_path):
    "Checked before any kernel starts, a missing file is refused up front; given to one segment only, it fails that segment, not retried."
    with pytest.raises(InputError, match=r"items_path='.*missing.npy': item embeddings file not found"):
        run_notebooks(NB, tmp_path, dict(experiment='bad', items_path=str(tmp_path/'missing.npy')), progress=False)
    assert not list(tmp_path.iterdir())
    rep = run_notebooks(NB, tmp_path, dict(experiment='bad', catalog_items=300), max_segments=5, retries=3, env=ENV, progress=False,
                       segment_parameters={0: {'items_path': str(tmp_path/'missing.npy')}})
    assert rep.status == 'failed' and len(rep.segments) == 1 and rep.segments[0].permanent
    assert rep.message.startswith('failed: InputError:') and 'missing.npy' in rep.message and 'not retried' in rep.message
    assert read_lock(Path(rep.run_dir)) is None

def test_failing_cell_is_recorded_and_retries_are_bounded(tmp_path):
    rep = run_notebooks(NB, tmp_path, dict(experiment='bad', catalog_items=300, session_limit_s=30.5), max_segments=5,
                       retries=0, env=ENV, progress=False, segment_parameters={0: {'items_path': str(tmp_path/'missing.npy')}})
    assert rep.status == 'failed' and len(rep.segments) == 1
    s = rep.segments[0]
    assert s.stop_reason == 'error' and 'InputError' in s.error and 'missing.npy' in s.error
    assert rep.message.startswith('failed: InputError') and s.notebook in rep.message
    _, nb = outputs(s.notebook)
    assert nb['metadata']['papermill']['exception'] is True
    assert read_status(Path(rep.run_dir)) is None  # refused by the notebook's own check, before it wrote anything
    ledger = [json.loads(l) for l in (tmp_path/'segments.jsonl').read_text().splitlines()]
    assert [(r['segment'], r['stop_reason']) for r in ledger] == [('segment-000', 'error')]
    _, nb = outputs(s.notebook)
    assert 'session_limit_s = 30.5' in json.dumps(nb)  # the budget reached the notebook as its session limit

def test_transient_failures_are_retried_and_bounded(tmp_path):
    "Killed kernels (an OOM kill, a preemption) are retried in a new kernel, `retries` times in a row, then the run fails."
    rep = run_notebooks(NB, tmp_path, dict(experiment='flaky', catalog_items=500, overrides=json.dumps({'optim.epochs': 400})),
                       max_segments=5, retries=1, env=ENV, progress=False,
                       segment_parameters={0: {'kill_after_s': 0.5}, 1: {'kill_after_s': 0.5}})
    assert rep.status == 'failed' and [s.stop_reason for s in rep.segments] == ['killed', 'killed']
    assert not any(s.permanent for s in rep.segments) and 'retries=1' in rep.message and 'Kernel died' in rep.message

def test_help_notebook_lists_the_contract():
    r = subprocess.run([str(Path(sys.executable).parent/'papermill'), '--help-notebook', str(NB)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for name, (tp, default) in CONTRACT.items():
        assert f"{name}: {tp} (default {default})" in r.stdout, name
    import papermill as pm
    params = pm.inspect_notebook(str(NB))
    assert list(params) == list(CONTRACT)
    assert all(p['help'] for p in params.values())

def test_parameters_are_declared_once(tmp_path):
    """`notebook_parameters` is the one declaration. The notebook's `parameters` cell is its text and papermill reads the
    same names, types, defaults and help; `letter8 run` and `letter8 new` have one flag per parameter, of the same name,
    type and help, and no option of their own that carries a notebook parameter; `KaggleChain` sends exactly the declared
    names. A parameter added to (or renamed in) any one of these places and not the declaration fails here."""
    import inspect, papermill as pm
    from fastcore.docments import docments
    from letter8_tokenizer.params import notebook_parameters, parameters_cell_source, RUN_PARAMETERS
    from letter8_tokenizer.cli import run, new, parser, forwarded
    from letter8_tokenizer.chain import KaggleChain, CHAIN_SETS
    from letter8_tokenizer.kernels import DATA_PARAMETERS
    decl = docments(notebook_parameters, full=True, returns=False)
    show = lambda v: json.dumps(v) if isinstance(v, str) else repr(v)
    cell = [c for c in json.loads(NB.read_text())['cells'] if 'parameters' in c['metadata'].get('tags', [])]
    assert [''.join(c['source']) for c in cell] == [parameters_cell_source()]
    seen = pm.inspect_notebook(str(NB))
    assert {k: (p['inferred_type_name'], p['default'], p['help']) for k, p in seen.items()} == \
           {k: (d.anno.__name__, show(d.default), d.docment) for k, d in decl.items()}
    runner = {'params', 'out', 'max_segments', 'retries', 'notebook', 'threads', 'kill_segment', 'force', 'quiet'}
    for f, own, skip in ((run, runner, set()), (new, {'name', 'dest', 'username', 'accelerator', 'no_gpu', 'overwrite'}, {'experiment'})):
        assert set(inspect.signature(f).parameters) - set(decl) == own, f"{f.__name__}: a new option? a notebook parameter goes in notebook_parameters"
        assert forwarded(f) == [k for k in decl if k not in skip]
        acts = {a.dest: a for a in parser(f, f.__name__)._actions}
        for k in forwarded(f):
            a = acts[k]
            assert (a.option_strings, a.type, a.default) == (['--' + k.replace('_', '-')], decl[k].anno, None), k
            assert a.help.startswith(decl[k].docment), k
    chain = KaggleChain(tmp_path, NB, 'alice/letter8-seg', 'alice/letter8-ckpt',
                        params={k: v for k, v in notebook_parameters().items() if k not in CHAIN_SETS})
    assert list(chain.segment_params()) and set(chain.segment_params()) == set(decl)
    assert set(RUN_PARAMETERS) <= set(decl) and set(DATA_PARAMETERS) <= set(decl) and set(CHAIN_SETS) <= set(decl)

def test_parameters_tag_survives_nbdev_clean():
    nb = json.loads(NB.read_text())
    tagged = [c for c in nb['cells'] if 'parameters' in c.get('metadata', {}).get('tags', [])]
    assert len(tagged) == 1 and 'experiment: str = "demo"' in ''.join(tagged[0]['source'])
    assert nb['metadata']['kernelspec']['name'] == 'python3'
    assert segment_notebook().read_bytes() == NB.read_bytes(), 'the packaged copy is stale: run `make sync`'
