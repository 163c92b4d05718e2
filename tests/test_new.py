"""`letter8 new`: the forked notebook carries the experiment that was asked for, so the printed
`kaggle kernels push -p experiments/NAME` pushes it, and it runs as it is (Kaggle runs no papermill).

The bar of issue 17: `letter8 new X --items-path ...` then `papermill --help-notebook experiments/X/X.ipynb` shows the
user's values as the defaults. Then the forked notebook, executed with no parameters at all, trains on the given
items; and what `new` checks and says: the placeholder user name, data paths that must travel as datasets.
"""
import json, os, subprocess, sys
from pathlib import Path
import numpy as np
import yaml

BIN = Path(sys.executable).parent
LETTER8, PAPERMILL = str(BIN/'letter8'), str(BIN/'papermill')

def sh(*cmd, cwd, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith('KAGGLE_')}
    return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, cwd=cwd, env={**e, **(env or {})}, timeout=600)

def test_help_notebook_shows_the_users_values(tmp_path):
    args = ['--items-path', '/kaggle/input/beauty-items/items.npy', '--cf-path', '/kaggle/input/beauty-items/cf.npy',
            '--labels-path', '/kaggle/input/beauty-items/labels.npy', '--catalog-items', 777, '--overrides', '{"optim.epochs": 20}']
    r = sh(LETTER8, 'new', 'beauty', '--username', 'alice', *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert 'kaggle kernels push -p experiments/beauty' in r.stdout and "attach the dataset 'beauty-items'" in r.stdout
    h = sh(PAPERMILL, '--help-notebook', 'experiments/beauty/beauty.ipynb', cwd=tmp_path)
    assert h.returncode == 0, h.stderr
    for shown in ('experiment: str (default "beauty")', 'items_path: str (default "/kaggle/input/beauty-items/items.npy")',
                  'cf_path: str (default "/kaggle/input/beauty-items/cf.npy")', 'labels_path: str (default "/kaggle/input/beauty-items/labels.npy")',
                  'catalog_items: int (default 777)', 'overrides: str (default "{\\"optim.epochs\\": 20}")'):
        assert shown in h.stdout, (shown, h.stdout)
    assert 'run name; the run folder is' in h.stdout  # the help comments survive the baking
    nb = json.loads((tmp_path/'experiments'/'beauty'/'beauty.ipynb').read_text())
    assert not [c for c in nb['cells'] if 'injected-parameters' in c['metadata'].get('tags', [])]  # one place to edit on Kaggle
    assert yaml.safe_load((tmp_path/'experiments'/'beauty'/'parameters.yaml').read_text())['catalog_items'] == 777

def test_forked_notebook_runs_as_pushed(tmp_path):
    "Executed with no parameters, as Kaggle runs a pushed notebook, the fork trains on the items given to `new`."
    x = np.random.default_rng(0).normal(size=(300, 24)).astype(np.float32)
    (tmp_path/'data').mkdir(); np.save(tmp_path/'data'/'items.npy', x)
    r = sh(LETTER8, 'new', 'mine', '--username', 'alice', '--items-path', 'data/items.npy', '--overrides', '{"optim.epochs": 1}', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert 'on Kaggle it must travel as a dataset' in r.stdout and 'items_path=/kaggle/input/data/items.npy' in r.stdout
    run = sh(PAPERMILL, 'experiments/mine/mine.ipynb', 'out.ipynb', '--cwd', '.', '-k', 'python3', cwd=tmp_path,
             env={'OMP_NUM_THREADS': '1', 'PATH': f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert run.returncode == 0, run.stderr[-3000:]
    st = json.loads((tmp_path/'runs'/'mine'/'status.json').read_text())
    assert st['done'] and st['experiment'] == 'mine' and st['params']['items_path'] == 'data/items.npy'
    assert st['exported']['items'] == 300

def test_what_new_checks_and_says(tmp_path):
    r = sh(LETTER8, 'new', 'anon', cwd=tmp_path)
    assert r.returncode == 0 and 'your-kaggle-username/letter8-anon' in r.stdout
    assert 'set KAGGLE_USERNAME or pass --username' in r.stderr and '--overwrite' in r.stderr, r.stderr
    r = sh(LETTER8, 'new', 'anon', cwd=tmp_path, env={'KAGGLE_USERNAME': 'bob'})
    assert r.returncode == 1 and 'letter8 new --overwrite' in r.stderr
    r = sh(LETTER8, 'new', 'anon', '--overwrite', cwd=tmp_path, env={'KAGGLE_USERNAME': 'bob'})
    assert r.returncode == 0 and 'bob/letter8-anon' in r.stdout and 'warning' not in r.stderr
    r = sh(LETTER8, 'new', 'lost', '--config', 'configs/big.yaml', cwd=tmp_path)  # the tutorial's spelling: a unique prefix of --config-path
    assert r.returncode == 1 and 'config_path=configs/big.yaml is not on this machine' in r.stderr and not (tmp_path/'experiments'/'lost').exists()
    r = sh(LETTER8, 'new', 'typo', '--username', 'bob', '--catalog-items', 'many', cwd=tmp_path)
    assert r.returncode == 2
