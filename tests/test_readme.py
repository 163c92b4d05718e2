"README.md is generated from nbs/index.ipynb; the two must never drift apart."
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def test_readme_matches_index_notebook():
    spec = importlib.util.spec_from_file_location('make_readme', ROOT/'scripts'/'make_readme.py')
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    assert (ROOT/'README.md').read_text() == mod.render(), 'run `python scripts/make_readme.py` after editing nbs/index.ipynb'

def test_readme_states_the_two_commands():
    text = (ROOT/'README.md').read_text()
    assert 'make demo' in text and 'make test' in text
