"""Issue 50: bad input is refused before anything is written, in the user's words, and destroys nothing.

Each case runs `letter8 ...` in-process (`main`) in a folder of real files and asserts a non-zero exit, a message that
shows the value as typed, and that every file of the folder is unchanged (same names, same sha256): nothing was
deleted, overwritten or created."""
import contextlib, importlib.util, io, json, os
from pathlib import Path
import numpy as np
import pytest
from letter8_tokenizer.cli import main
from letter8_tokenizer.files import sha256_file
from letter8_tokenizer.params import notebook_parameters, RUN_PARAMETERS, segment_config
from letter8_tokenizer.runfolder import run_paths, segment_items, write_status
from letter8_tokenizer.sequences import synthetic_sequences, save_csr

def call(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(list(map(str, argv)))
    return rc, out.getvalue(), err.getvalue()

def snapshot(root):
    "sha256 of every file under root (symlinks as their target path)."
    root = Path(root)
    return {str(p.relative_to(root)): (os.readlink(p) if p.is_symlink() else sha256_file(p)) for p in sorted(root.rglob('*')) if p.is_file() or p.is_symlink()}

@pytest.fixture(scope='module')
def data(tmp_path_factory):
    "A folder of inputs: items, CF, labels, interactions (good, one-item users, malformed), a trained tokenizer, a started run."
    d = tmp_path_factory.mktemp('bad')
    rng = np.random.default_rng(0)
    np.save(d/'items.npy', rng.normal(size=(120, 24)).astype(np.float32))
    np.save(d/'cf.npy', rng.normal(size=(120, 8)).astype(np.float32))
    np.save(d/'cf_short.npy', rng.normal(size=(50, 8)).astype(np.float32))
    np.save(d/'labels_float.npy', rng.normal(size=120))
    (d/'notes.txt').write_text('not an array\n')
    np.save(d/'huge_codes.npy', rng.integers(0, 10**9, size=(120, 3)))  # values, not code indices
    (d/'folder').mkdir(); (d/'folder'/'readme.txt').write_text('x')
    (d/'bad.yaml').write_text('model: [unclosed\n')
    (d/'one.inter.json').write_text(json.dumps({f'u{i}': [i] for i in range(30)}))
    (d/'broken.inter.json').write_text('{"u0": [1, 2, 3], ')
    (d/'bad.index.json').write_text('{"0": ["<a_1>"')
    save_csr(synthetic_sequences(np.stack([np.arange(120) // 30, np.arange(120) // 6], 1), n_users=200, max_len=12), d/'inter')
    (d/'params.yaml').write_text('catalog_items: -5\n')
    (d/'otherrun').mkdir(); (d/'otherrun'/'results.json').write_text('{}')
    # a trained tokenizer on a built-in catalog of 300 items
    r = run_paths(d, 'tiny'); its = segment_items(r, catalog_items=300); cfg = segment_config(overrides={'optim.epochs': 1})
    from letter8_tokenizer.train import train_segment
    from letter8_tokenizer.export import export_run
    train_segment(cfg, its, r.checkpoints, progress=False); export_run(cfg, its, r, probe_report=False)
    (d/'link.npy').symlink_to(r.catalog/'items.npy')
    # runs in two states the runner must not touch: a stopped run of 300 items, a status without its checkpoints
    stopped = run_paths(d/'runs', 'stopped'); segment_items(stopped, catalog_items=300)
    write_status(stopped, status='deadline', step=12, segment='segment-000', params={**{k: notebook_parameters()[k] for k in RUN_PARAMETERS}, 'catalog_items': 300})
    lost = run_paths(d/'runs', 'lost'); write_status(lost, status='deadline', step=95, segment='segment-003', params={k: notebook_parameters()[k] for k in RUN_PARAMETERS})
    odd = run_paths(d/'runs', 'odd'); odd.checkpoints.mkdir(); (odd.checkpoints/'model.bin').write_text('weights from elsewhere')
    (d/'demo'/'whole').mkdir(parents=True); (d/'demo'/'whole'/'status.json').write_text('{"done": true}')
    (d/'demo'/'segmented').mkdir(); (d/'demo'/'segmented'/'codes.npy').write_bytes(b'earlier demo')
    return d

TOK, CAT = 'tiny/tokenizer', 'tiny/catalog/items.npy'
NEW = ['new', 'exp', '--username', 'bob']
RUN = ['run', '--out', 'runs', '--quiet']

CASES = [  # (argv, what the message must show)
    # letter8 new: the checks `run` makes, before the folder is written
    (NEW + ['--overrides', '{"optim.lr": 0}'], "'optim.lr': 0 is out of range"),
    (NEW + ['--overrides', '{"model.levels": 100}'], "'model.levels': 100 is out of range"),
    (NEW + ['--overrides', '{"optim.epoch": 3}'], "unknown config key 'optim.epoch'"),
    (NEW + ['--overrides', '{"model.codebook_size": 1}'], "model.codebook_size"),
    (NEW + ['--overrides', 'epochs=3'], "--overrides epochs=3: 'epochs=3' is not JSON"),
    (NEW + ['--overrides', '[1, 2]'], "must be a JSON object of dotted keys, got [1, 2]"),
    (NEW + ['--catalog-items', '-5'], '--catalog-items -5'),
    (NEW + ['--catalog-items', '0'], '--catalog-items 0'),
    (NEW + ['--catalog-items', '10'], '--catalog-items 10: the built-in catalog needs at least one item per code'),
    (NEW + ['--items-path', 'notes.txt'], '--items-path notes.txt'),
    (NEW + ['--items-path', 'folder'], '--items-path folder'),
    (NEW + ['--items-path', 'cf'], '--items-path cf: trains on the CF table'),
    (NEW + ['--items-path', 'items.npy', '--cf-path', 'cf_short.npy'], '--cf-path cf_short.npy'),
    (NEW + ['--items-path', 'items.npy', '--labels-path', 'labels_float.npy'], '--labels-path labels_float.npy'),
    (NEW + ['--cf-path', 'cf.npy'], '--cf-path cf.npy: is read with items_path only'),
    (NEW + ['--labels-path', 'labels_float.npy'], '--labels-path labels_float.npy: is read with items_path only'),
    (NEW + ['--margin-s', '1e9'], '--margin-s 1000000000.0'),
    (NEW + ['--session-limit-s', '-1'], '--session-limit-s -1.0'),
    (NEW + ['--session-limit-s', '60', '--margin-s', '40'], '--margin-s 40.0'),
    (NEW + ['--export-s', '-3'], '--export-s -3.0'),
    (NEW + ['--kill-after-s', 'nan'], '--kill-after-s nan'),
    (NEW + ['--gpus', '-1'], '--gpus -1'),
    (NEW + ['--config-path', 'folder'], '--config-path folder: no such file (it is a folder)'),
    (NEW + ['--config-path', 'bad.yaml'], '--config-path bad.yaml'),
    (NEW + ['--cf-overrides', '{"dimm": 8}'], "did you mean 'dim'"),
    (NEW + ['--cf-overrides', '{"dim": 0}'], "config key 'dim': 0 is out of range"),
    (NEW + ['--retriever-overrides', '{"epochs": -1}'], "'epochs': -1"),
    (NEW + ['--retrieval-ids', 'random:0'], '--retrieval-ids random:0: reads interactions'),
    (NEW + ['--cf-path', 'sasrec'], '--cf-path sasrec: reads interactions'),
    (NEW + ['--interactions-path', 'one.inter.json', '--retrieval-ids', 'items'], 'fewer than 3 interactions'),
    (NEW + ['--interactions-path', 'broken.inter.json', '--retrieval-ids', 'items'], 'broken.inter.json'),
    (NEW + ['--interactions-path', 'inter', '--catalog-items', '120', '--retrieval-ids', 'random:x'], "'random:x': the seed must be an integer"),
    (NEW + ['--interactions-path', 'inter', '--catalog-items', '120', '--retrieval-ids', 'nope.npy'], 'nope.npy: no such file'),
    (NEW + ['--resume-from', 'no/such/checkpoints'], '--resume-from no/such/checkpoints'),
    (NEW + ['--resume-from', 'folder'], 'but no step-NNNNNNNNN/ folder'),
    # letter8 run: refused before a kernel starts or the run folder is touched
    (RUN + ['--catalog-items', '-5'], '--catalog-items -5'),
    (RUN + ['--margin-s', '1e9'], '--margin-s 1000000000.0'),
    (RUN + ['--overrides', '{"optim.epoch": 3}'], "unknown config key 'optim.epoch'"),
    (RUN + ['--notebook', 'notes.txt'], '--notebook notes.txt: not a Jupyter notebook'),
    (RUN + ['--notebook', 'missing.ipynb'], '--notebook missing.ipynb: no such file'),
    (RUN + ['--notebook', 'items.npy'], '--notebook items.npy: not a Jupyter notebook'),
    (RUN + ['--max-segments', '0'], '--max-segments 0'),
    (RUN + ['--retries', '-1'], '--retries -1'),
    (RUN + ['--threads', '-2'], '--threads -2'),
    (RUN + ['--kill-segment', '0'], '--kill-segment 0 needs --kill-after-s'),
    (['run', '--out', 'notes.txt'], '--out notes.txt: it is a file'),
    (['run', '--params', 'params.yaml', '--out', 'runs'], 'params.yaml: catalog_items: -5'),
    (['run', '--params', 'bad.yaml', '--out', 'runs'], '--params bad.yaml: not valid YAML'),
    (['run', '--params', 'folder', '--out', 'runs'], '--params folder: it is a folder'),
    (RUN + ['--work-dir', 'runs', '--experiment', 'stopped', '--catalog-items', '500'], "catalog_items: 300 -> 500"),
    (RUN + ['--work-dir', 'runs', '--experiment', 'lost'], 'says step 95, but no checkpoint'),
    (RUN + ['--work-dir', 'runs', '--experiment', 'odd'], 'model.bin but no step-NNNNNNNNN/ folder'),
    # letter8 encode: an output that is, lies in, or holds an input
    (['encode', TOK, CAT, CAT], f'OUT {CAT}: it is the ITEMS file'),
    (['encode', TOK, 'link.npy', CAT], f'OUT {CAT}: it is the ITEMS file'),
    (['encode', TOK, CAT, 'link.npy'], 'OUT link.npy: it is the ITEMS file'),
    (['encode', TOK, CAT, TOK], f'OUT {TOK}: it is the TOKENIZER folder'),
    (['encode', TOK, CAT, f'{TOK}/codes.npy'], f'OUT {TOK}/codes.npy: it lies inside the TOKENIZER folder'),
    (['encode', TOK, CAT, 'tiny'], 'OUT tiny: it holds the TOKENIZER folder'),
    (['encode', TOK, CAT, 'otherrun'], 'OUT otherrun: the folder exists and holds other files'),
    (['encode', TOK, CAT, 'folder.npy/..'], 'folder'),
    (['encode', TOK, CAT, 'codes.npy', '--index-json', CAT], f'--index-json {CAT}: it is the ITEMS file'),
    (['probe', 'codes.npy', CAT, CAT], f'OUT {CAT}: it is the ITEMS file'),
    (['probe', 'codes.npy', CAT, 'otherrun'], 'OUT otherrun: the folder exists and holds other files'),
    # an output under a file, or where nobody may write (issue 60's held-out cases)
    (['encode', TOK, CAT, 'notes.txt/codes.npy'], 'OUT notes.txt/codes.npy: notes.txt is a file, not a folder'),
    (['encode', TOK, CAT, '/proc/letter8/codes.npy'], 'OUT /proc/letter8/codes.npy: cannot write in /proc'),
    (['probe', 'huge_codes.npy', CAT, 'huge_probe'], 'over the 16,777,216 a probe counts'),
    (['kaggle', 'plan', '--steps-left', '1000000000000000', '--step-s', '0.1'], 'check steps_left'),
    (['kaggle', 'plan', '--steps-left', '100', '--step-s', '1e15'], 'one step is longer than'),
    # letter8 demo: every flag checked before the last demo's runs are moved
    (['demo', '--out', 'demo', '--items', '0'], '--items 0'),
    (['demo', '--out', 'demo', '--items', '-3'], '--items -3'),
    (['demo', '--out', 'demo', '--items', '10'], '--items 10'),
    (['demo', '--out', 'demo', '--epochs', '0'], '--epochs 0'),
    (['demo', '--out', 'demo', '--segment-budget', '-1'], '--segment-budget -1.0'),
    (['demo', '--out', 'demo', '--kill-after', 'nan'], '--kill-after nan'),
    (['demo', '--out', 'demo', '--threads', '-1'], '--threads -1'),
    (['demo', '--out', 'notes.txt'], '--out notes.txt: it is a file'),
    # letter8 cf / retrieval
    (['cf', 'one.inter.json', '--out', 'cfrun'], 'INTER one.inter.json: 30 users, 30 of them with fewer than 3'),
    (['retrieval', 'one.inter.json', '--ids', 'items', '--out', 'ret'], 'INTER one.inter.json'),
    (['cf', 'broken.inter.json', '--out', 'cfrun'], 'broken.inter.json'),
    (['cf', 'nope.inter.json', '--out', 'cfrun'], 'INTER nope.inter.json: no such file'),
    (['cf', 'inter', '--out', 'cfrun', '--device', 'cuda'] if not __import__('torch').cuda.is_available() else ['cf', 'inter', '--out', 'cfrun', '--device', 'cuda:99'], '--device cuda'),
    (['cf', 'inter', '--out', 'cfrun', '--device', 'gpu0'], '--device gpu0'),
    (['cf', 'inter', '--out', 'cfrun', '--n-items', '0'], '--n-items 0'),
    (['cf', 'inter', '--out', 'inter'], '--out inter: it is, lies inside or holds the interactions'),
    (['cf', 'inter', '--out', 'otherrun'], '--out otherrun: the folder holds other files'),
    (['cf', 'inter', '--out', 'cfrun', '--dim', '0'], '--dim 0'),
    (['cf', 'inter', '--out', 'cfrun', '--dropout', '1.5'], '--dropout 1.5'),
    (['retrieval', 'inter', '--ids', 'bad.index.json', '--out', 'ret'], '--ids bad.index.json'),
    (['retrieval', 'inter', '--ids', 'items', '--out', 'ret', '--epochs', '-1'], '--epochs -1'),
    (['retrieval', 'inter', '--ids', 'items', '--out', 'ret', '--metric', 'mrr'], '--metric mrr'),
    # letter8 kaggle: the plan checks what the chain checks
    (['kaggle', 'plan', '--step-s', '1', '--steps-left', '100', '--quota-left-h', '-1'], '--quota-left-h -1.0'),
    (['kaggle', 'plan', '--step-s', '1', '--steps-left', '100', '--accelerator', 'P100X'], "--accelerator 'P100X'"),
    (['kaggle', 'plan', '--step-s', '0', '--steps-left', '100'], '--step-s 0.0'),
    (['kaggle', 'plan', '--step-s', '1', '--steps-left', '-5'], '--steps-left -5'),
    (['kaggle', 'chain', '--experiment', 'nowhere', '--dataset', 'bob/ckpt'], '--experiment nowhere: no kernel-metadata.json'),
    (['kaggle', 'chain', '--experiment', 'nowhere', '--dataset', 'bob/ckpt', '--accelerator', 'A100'], "--accelerator 'A100'"),
]
if importlib.util.find_spec('torch_xla') is None:  # Kaggle's torch 2.8 environment (`make test-floor`) has torch_xla: xla is allowed there
    CASES.append((['cf', 'inter', '--out', 'cfrun', '--device', 'xla'], '--device xla: needs torch_xla'))

@pytest.mark.parametrize('argv,shown', CASES, ids=[' '.join(a)[:60] for a, _ in CASES])
def test_refused_and_nothing_touched(data, argv, shown, monkeypatch):
    monkeypatch.chdir(data)
    monkeypatch.delenv('KAGGLE_USERNAME', raising=False)
    before = snapshot(data)
    rc, out, err = call(*argv)
    assert rc != 0, (argv, out, err)
    assert shown in err, (shown, err)
    assert len(err.strip().splitlines()) == 1 and 'Traceback' not in err, err  # one line, no traceback
    assert snapshot(data) == before  # nothing deleted, overwritten or created
    assert not (data/'experiments').exists() and not (data/'cfrun').exists() and not (data/'ret').exists()

def test_input_errors_exit_2(data, monkeypatch):
    "An input error is a usage error: exit code 2, like argparse's."
    monkeypatch.chdir(data)
    assert call(*NEW, '--catalog-items', '-5')[0] == 2 and call('encode', TOK, CAT, CAT)[0] == 2 and call('demo', '--out', 'demo', '--items', '0')[0] == 2

def test_relative_paths_are_the_users(tmp_path, monkeypatch):
    "`run_notebooks` makes relative data paths absolute from the caller's folder: the kernel runs elsewhere."
    from letter8_tokenizer.params import resolve_paths
    monkeypatch.chdir(tmp_path)
    p = resolve_paths({'items_path': 'data/items.npy', 'cf_path': 'sasrec', 'config_path': '../c.yaml', 'retrieval_ids': 'items,random:0,ids/x.npy',
                       'resume_from': 'a/checkpoints, /abs/ck'})
    assert p['items_path'] == str(tmp_path/'data'/'items.npy') and p['cf_path'] == 'sasrec' and p['config_path'] == str(tmp_path.parent/'c.yaml')
    assert p['retrieval_ids'] == f"items,random:0,{tmp_path/'ids'/'x.npy'}" and p['resume_from'] == f"{tmp_path/'a'/'checkpoints'},/abs/ck"
