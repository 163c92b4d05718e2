"""The offline install path for Kaggle, with pip's own resolver and installer.

1. pip's resolver, asked for Kaggle's Python and platform tags (`--dry-run --report`), resolves the kit with both
   extras; the wheelhouse keeps only what Kaggle's image lacks: the kit and faiss (faiss-gpu only exists as
   manylinux_2_28 wheels, which a lone manylinux2014 tag never found), not torch or its CUDA libraries.
2. A wheelhouse built for Kaggle (extra `cpu`: faiss-gpu's 135 MB are left out here) installs the kit into a fresh
   venv with `--no-index`, where the "image" is this project's own environment minus the kit and faiss; the
   installed kit then imports and runs a k-means from the venv, not from the source tree.

Both talk to the package index (PyPI) while building; the install itself uses no index.
"""
import subprocess, sys, venv
from pathlib import Path
import pytest
from letter8_tokenizer.install import own_wheel, wheelhouse_plan, build_wheelhouse

ROOT = Path(__file__).resolve().parents[1]

@pytest.fixture(scope='module')
def wheel(tmp_path_factory): return own_wheel(tmp_path_factory.mktemp('own'), ROOT)

def test_plan_with_pips_resolver_for_kaggle(wheel):
    plan = wheelhouse_plan(wheel)
    needed = {(r['extra'], r['name'].lower()) for r in plan if r['needed']}
    assert needed == {('cpu', 'letter8-tokenizer'), ('cpu', 'faiss-cpu'), ('gpu', 'letter8-tokenizer'), ('gpu', 'faiss-gpu')}, needed
    gpu = next(r for r in plan if r['name'].lower() == 'faiss-gpu')
    assert 'manylinux_2_28' in gpu['url'] or 'manylinux_2_27' in gpu['url'], gpu['url']
    torch = [r for r in plan if r['name'].lower() == 'torch']
    assert torch and all(r['on_image'] and not r['needed'] for r in torch)  # resolved, but the image brings it

def _image_without(site:Path, out:Path, hidden=('letter8', '__editable__', 'faiss', '_letter8')) -> Path:
    "A folder that links every package of `site` except the kit and faiss: what a Kaggle image would hold."
    out.mkdir()
    for p in site.iterdir():
        if not p.name.lower().startswith(hidden) and not p.name.endswith('.pth'): (out/p.name).symlink_to(p)
    return out

def test_offline_install_into_a_fresh_venv(tmp_path):
    wh = build_wheelhouse(tmp_path/'wheels', 'tester/letter8-wheels', project=ROOT, extras=('cpu',))
    assert {p.name.split('-')[0] for p in wh.glob('*.whl')} == {'letter8_tokenizer', 'faiss_cpu'}
    assert (wh/'dataset-metadata.json').is_file() and (wh/'wheelhouse.json').is_file()
    env = tmp_path/'venv'
    venv.EnvBuilder(with_pip=True).create(env)
    py = env/'bin'/'python'
    subprocess.run([str(py), '-m', 'pip', 'uninstall', '-q', '-y', 'setuptools'], capture_output=True)  # the image's own is used
    site = Path(subprocess.check_output([str(py), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], text=True).strip())
    here = Path(next(p for p in sys.path if p.endswith('site-packages') and Path(p, 'torch').exists()))
    (site/'_kaggle_image.pth').write_text(str(_image_without(here, tmp_path/'image')) + '\n')
    out = subprocess.run([str(py), '-m', 'pip', 'install', '--no-index', '--find-links', str(wh), 'letter8-tokenizer[cpu]'],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    check = ("import letter8_tokenizer, faiss, numpy as np; from letter8_tokenizer.kmeans import constrained_kmeans; "
             "x = np.random.default_rng(0).normal(size=(500, 8)).astype('float32'); C, l = constrained_kmeans(x, 10, 20, 80); "
             "print(letter8_tokenizer.__file__, np.bincount(l).min(), np.bincount(l).max())")
    got = subprocess.run([str(py), '-c', check], capture_output=True, text=True, cwd=tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    path, lo, hi = got.stdout.split()
    assert path.startswith(str(site)) and 20 <= int(lo) and int(hi) <= 80, got.stdout
