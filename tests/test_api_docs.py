"""Every public function and class of the package is documented: a docstring, a docment on every parameter, and a
place on its module's docs page.

For each module of `letter8_tokenizer` and each name in its `__all__` that is a function or a class defined there:

- it has a docstring;
- every parameter has a docment (a `# comment` after it, read by `fastcore.docments`), except `self`, `cls`,
  `*args` and `**kwargs`; for a class, the parameters of its constructor (for a dataclass or a NamedTuple, its
  fields); for the public methods a class defines itself, the same two rules;
- it appears on the module's docs page: its notebook (the one whose `default_exp` is the module) shows it, either
  because an exported cell defines it (nbdev adds the `show_doc` cell; the same processor, `add_show_docs`, is run
  here) or through an explicit `show_doc(...)`.

The page check reads the notebooks, not `_docs/`, so it needs no docs build: what nbdev renders for a page is fixed
by those `show_doc` cells.
"""
import importlib, inspect, pkgutil, re
from pathlib import Path

import pytest
from dataclasses import is_dataclass

from fastcore.docments import docments

import letter8_tokenizer

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
SKIP_PARAMS = {'self', 'cls', 'return'}


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(letter8_tokenizer.__path__) if not m.name.startswith('_'))


def notebooks() -> dict[str, Path]:
    "Module name -> the notebook that exports it (its `#| default_exp`)."
    out = {}
    for nb in sorted(NBS.rglob('*.ipynb')):
        if any(p.startswith(('.', '_')) for p in nb.relative_to(NBS).parts): continue
        m = re.search(r'#\|\s*default_exp\s+([\w.]+)', nb.read_text())
        if m: out[m[1]] = nb
    return out


def _namedtuple_docments(cls) -> dict:
    "Field -> comment for a `typing.NamedTuple` (fastcore's docments reads dataclasses, not NamedTuples)."
    found = {}
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r'\s*(\w+)\s*:[^#]*#\s*(.+?)\s*$', line)
        if m: found[m[1]] = m[2]
    return {f: found.get(f) for f in cls._fields}


def _params(obj) -> dict:
    "Parameter -> docment (None when missing) for a function, method or class constructor."
    if inspect.isclass(obj) and issubclass(obj, tuple) and hasattr(obj, '_fields'): return _namedtuple_docments(obj)
    if inspect.isclass(obj) and not is_dataclass(obj) and getattr(obj.__init__, '__module__', None) != obj.__module__:
        return {}  # the constructor comes from elsewhere (object, an exception, a library base class)
    try: dm = docments(obj, full=True, returns=False)
    except (TypeError, OSError): return {}  # a builtin or a class without Python source: nothing to read
    kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return {k: v.get('docment') for k, v in dm.items() if k not in SKIP_PARAMS and v.get('kind') not in kinds}


def _own_methods(cls) -> dict:
    "Public methods (and properties) a class defines in its own body or gets from the module by assignment/patch."
    out = {}
    for name, v in vars(cls).items():
        if name.startswith('_'): continue
        f = v.fget if isinstance(v, property) else getattr(v, '__func__', v)
        if inspect.isfunction(f) and f.__module__ == cls.__module__: out[name] = f
    return out


def public_api(mod) -> list[tuple[str, object]]:
    "Functions and classes in `__all__` that the module defines itself."
    return [(n, o) for n in getattr(mod, '__all__', []) if (o := getattr(mod, n, None)) is not None
            and (inspect.isfunction(o) or inspect.isclass(o)) and getattr(o, '__module__', None) == mod.__name__]


def doc_failures(mod) -> list[str]:
    bad = []
    for name, obj in public_api(mod):
        if not inspect.getdoc(obj) or (inspect.isclass(obj) and obj.__doc__ is None):
            bad.append(f'{name}: no docstring')
        missing = [p for p, d in _params(obj).items() if not d]
        if missing: bad.append(f'{name}: no docment for {", ".join(missing)}')
        if inspect.isclass(obj):
            for m, f in _own_methods(obj).items():
                if not f.__doc__: bad.append(f'{name}.{m}: no docstring')
                missing = [p for p, d in _params(f).items() if not d]
                if missing: bad.append(f'{name}.{m}: no docment for {", ".join(missing)}')
    return bad


def shown_on_page(nb: Path) -> set[str]:
    "Names the page of `nb` documents: the `show_doc` cells nbdev adds after exported cells, and explicit ones."
    from nbdev.process import NBProcessor
    from nbdev.processors import add_show_docs
    proc = NBProcessor(nb, procs=[add_show_docs])
    proc.process()
    shown = set()
    for c in proc.nb.cells:
        if c.cell_type != 'code': continue
        for m in re.finditer(r'show_doc\(\s*([\w.]+)', c.source): shown.add(m[1])
    return shown


def page_failures(mod, nb: Path) -> list[str]:
    shown = shown_on_page(nb)
    return [f'{name}: not on its page ({nb.relative_to(ROOT)})' for name, _ in public_api(mod) if name not in shown]


MODULES = modules()


def test_every_module_has_a_notebook():
    nbs = notebooks()
    assert set(MODULES) <= set(nbs), f'modules with no notebook exporting them: {sorted(set(MODULES) - set(nbs))}'


@pytest.mark.parametrize('name', MODULES)
def test_docstrings_and_docments(name):
    mod = importlib.import_module(f'letter8_tokenizer.{name}')
    bad = doc_failures(mod)
    assert not bad, f'letter8_tokenizer.{name}: {len(bad)} undocumented:\n  ' + '\n  '.join(bad)


@pytest.mark.parametrize('name', MODULES)
def test_on_its_page(name):
    mod = importlib.import_module(f'letter8_tokenizer.{name}')
    nb = notebooks().get(name)
    if nb is None: pytest.fail(f'no notebook exports letter8_tokenizer.{name}')
    bad = page_failures(mod, nb)
    assert not bad, f'letter8_tokenizer.{name}: {len(bad)} missing from the docs page:\n  ' + '\n  '.join(bad)
