"""The segment notebook's first cell on a kernel that does not have the kit (a fresh Kaggle kernel).

The cell is `install.install_cell_source()`: `ensure_installed`'s own source and a call. Here it runs, as the
notebook holds it, in a fresh virtual environment whose "image" is this project's environment minus the kit
(what a Kaggle image has), with a wheels folder built by `build_wheelhouse` (the kit's wheel and
`wheelhouse.json`, no download) mounted under a fake `/kaggle/input`. No package index is used.
"""
import os, subprocess, sys, venv
from pathlib import Path
import nbformat
import pytest
from letter8_tokenizer.install import build_wheelhouse, install_cell_source

ROOT = Path(__file__).resolve().parents[1]

def first_code_cell(path):
    return next(c.source for c in nbformat.read(str(path), 4).cells if c.cell_type == 'code')

def test_the_cell_is_the_generated_one():
    "The notebook (and its copy shipped in the package) holds exactly `install_cell_source()`, ahead of the parameters cell."
    assert first_code_cell(ROOT/'nbs'/'segment.ipynb') == install_cell_source()
    assert first_code_cell(ROOT/'letter8_tokenizer'/'segment.ipynb') == install_cell_source()
    cells = [c for c in nbformat.read(str(ROOT/'nbs'/'segment.ipynb'), 4).cells if c.cell_type == 'code']
    assert 'parameters' in cells[1].metadata.get('tags', [])
    assert 'letter8_tokenizer import' not in cells[0].source and 'import letter8_tokenizer' not in cells[0].source

@pytest.fixture(scope='module')
def kernel(tmp_path_factory):
    "A fresh venv without the kit, and a fake /kaggle whose input holds a wheels dataset two levels deep."
    tmp = tmp_path_factory.mktemp('fresh')
    wheels = build_wheelhouse(tmp/'kaggle'/'input'/'datasets'/'tester'/'letter8-wheels', 'tester/letter8-wheels', project=ROOT, resolve=False)
    (tmp/'kaggle'/'input'/'my-items').mkdir(); (tmp/'kaggle'/'working').mkdir()
    env = tmp/'venv'
    venv.EnvBuilder(with_pip=True).create(env)
    py = env/'bin'/'python'
    subprocess.run([str(py), '-m', 'pip', 'uninstall', '-q', '-y', 'setuptools'], capture_output=True)  # the image's own is used
    site = Path(subprocess.check_output([str(py), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], text=True).strip())
    here = Path(next(p for p in sys.path if p.endswith('site-packages') and Path(p, 'torch').exists()))
    image = tmp/'image'; image.mkdir()
    for p in here.iterdir():
        if not p.name.lower().startswith(('letter8', '__editable__', '_letter8')) and not p.name.endswith('.pth'): (image/p.name).symlink_to(p)
    (site/'_kaggle_image.pth').write_text(f'{image}\n')
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(('LETTER8_', 'PYTHONPATH', 'VIRTUAL_ENV'))}
    run_env.update(LETTER8_KAGGLE_ROOT=str(tmp/'kaggle'), PIP_NO_INDEX='1')
    gone = subprocess.run([str(py), '-c', 'import letter8_tokenizer'], capture_output=True, text=True, env=run_env, cwd=tmp)
    assert gone.returncode != 0 and 'No module named' in gone.stderr  # the kit is really absent
    return py, tmp, wheels, run_env

def test_cell_installs_from_the_attached_wheels(kernel):
    "Run as it stands in the notebook: it finds the wheels dataset, installs with --no-index, and the kit imports in the same process."
    py, tmp, wheels, env = kernel
    script = tmp/'cell.py'
    script.write_text(install_cell_source() + "\nimport letter8_tokenizer, letter8_tokenizer.install\nprint('imported', letter8_tokenizer.__file__)\n")
    out = subprocess.run([str(py), str(script)], capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert f'letter8_tokenizer: installed from the wheels in {wheels}' in out.stdout, out.stdout
    assert f"imported {tmp/'venv'}" in out.stdout, out.stdout
    again = subprocess.run([str(py), str(script)], capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    assert again.returncode == 0 and 'letter8_tokenizer: present' in again.stdout, again.stderr[-2000:]

def test_cell_without_wheels_or_internet_names_the_three_ways(kernel, tmp_path):
    "No wheels under /kaggle/input and the repository unreachable: a RuntimeError that says what to set up, and nothing installed."
    py, tmp, wheels, env = kernel
    (tmp_path/'input').mkdir()
    body = install_cell_source().rsplit('\n', 1)[0]
    script = tmp_path/'cell.py'
    script.write_text(body + "\ntry: ensure_installed(root=%r, online=lambda: False, module='letter8_tokenizer_not_here')\n"
                             "except RuntimeError as e: print('ERROR', e)\n" % str(tmp_path))
    out = subprocess.run([str(py), str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith('ERROR'), out.stdout + out.stderr
    for way in ('letter8 kaggle wheelhouse', 'LETTER8_WHEELS', 'internet on', 'install the kit into this environment yourself'):
        assert way in out.stdout, (way, out.stdout)

def test_open_in_kaggle_badge_points_at_the_segment_notebook():
    "The tutorial's badge is Kaggle's, and opens the raw segment notebook of the repository pyproject.toml names."
    import re, tomllib
    repo = tomllib.loads((ROOT/'pyproject.toml').read_text())['project']['urls']['Repository']
    raw = repo.replace('https://github.com/', 'https://raw.githubusercontent.com/') + '/main/nbs/segment.ipynb'
    text = ''.join(c.source for c in nbformat.read(str(ROOT/'nbs'/'tutorials'/'train_on_kaggle.ipynb'), 4).cells if c.cell_type == 'markdown')
    badge = re.search(r'\[!\[Open in Kaggle\]\((.+?)\)\]\((.+?)\)', text)
    assert badge and badge[1] == 'https://kaggle.com/static/images/open-in-kaggle.svg'
    assert badge[2] == f'https://kaggle.com/kernels/welcome?src={raw}'
    for step in ('Import Notebook', 'Add Input', 'Accelerator', 'Save & Run All (Commit)', 'Output', 'New Dataset', 'resume_from'):
        assert step in text, step
    assert 'never checked against real Kaggle' in text.lower() or 'What was never checked against real Kaggle' in text

def test_cell_on_a_tpu_image_keeps_its_torch(kernel, tmp_path):
    "Where torch_xla is importable (Kaggle's TPU image), the cell as the notebook holds it hands pip the image's torch as an exact requirement."
    py, tmp, wheels, env = kernel
    (tmp_path/'image'/'torch_xla').mkdir(parents=True); (tmp_path/'image'/'torch_xla'/'__init__.py').write_text('')
    body = install_cell_source().rsplit('\n', 1)[0]
    script = tmp_path/'cell.py'
    script.write_text(f"import sys, subprocess; sys.path.insert(0, {str(tmp_path/'image')!r})\n" + body +
                      f"\nprint(ensure_installed({str(wheels)!r}, module='letter8_tokenizer_not_here', run=lambda c: print('PIP', c) or subprocess.CompletedProcess(c, 0, '', '')))\n"
                      "import importlib.metadata as md; print('TORCH', md.version('torch'))\n")  # as pip knows it (PyPI's 2.8.0: no +cu128)
    out = subprocess.run([str(py), str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    torch_version = next(l.split()[1] for l in out.stdout.splitlines() if l.startswith('TORCH '))
    pip = next(l for l in out.stdout.splitlines() if l.startswith('PIP '))
    assert f"'torch=={torch_version}'" in pip and '--no-index' in pip, pip
    assert f'kept torch=={torch_version}' in out.stdout, out.stdout
