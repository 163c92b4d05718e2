"""The architecture rules of the Architecture page (nbs/architecture.ipynb), checked on the source: every module on one
floor, no module reads a floor above its own, no import circles, the infrastructure knows nothing of tokenizers or
recommendation, the modules that drive notebooks and files load without torch, and the code stays readable (no module
over 700 lines, no line over 140 characters, no notebook cell over 40 lines, no exported function over 50).
`FLOORS`, `NO_TORCH` and the limits are read from that page, so the page and this test hold one map."""
import ast, json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT/'letter8_tokenizer'
PAGE = ROOT/'nbs'/'architecture.ipynb'

def page_rules() -> dict:
    "The names the Architecture page defines in its cell that starts with `FLOORS = `."
    src = next(''.join(c['source']) for c in json.loads(PAGE.read_text())['cells']
               if c['cell_type'] == 'code' and ''.join(c['source']).startswith('FLOORS = '))
    ns = {}; exec(src, ns)
    return ns

RULES = page_rules()
FLOORS = RULES['FLOORS']
INFRA = set(FLOORS['infrastructure'])

def imports_of(path:Path) -> set:
    "Every module of the package that `path` imports, at the top or inside a function."
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom):
            mod = n.module or ''
            if n.level == 1 and mod: out.add(mod.split('.')[0])
            elif mod.startswith('letter8_tokenizer.'): out.add(mod.split('.')[1])
            elif mod == 'letter8_tokenizer' or (n.level == 1 and not mod): out.update(a.name for a in n.names if (PKG/f'{a.name}.py').exists())
        elif isinstance(n, ast.Import):
            out.update(a.name.split('.')[1] for a in n.names if a.name.startswith('letter8_tokenizer.'))
    return out - {'', '_modidx', path.stem}

def graph() -> dict:
    return {p.stem: imports_of(p) for p in PKG.glob('*.py') if not p.stem.startswith('_')}

def floor_of(m:str) -> int:
    return next(i for i, mods in enumerate(FLOORS.values()) if m in mods)

def test_every_module_on_one_floor():
    listed = [m for mods in FLOORS.values() for m in mods]
    assert len(listed) == len(set(listed)), f'modules on two floors: {sorted({m for m in listed if listed.count(m) > 1})}'
    assert set(graph()) == set(listed), f'on no floor: {sorted(set(graph()) - set(listed))}; listed but gone: {sorted(set(listed) - set(graph()))}'

def test_no_module_reads_a_floor_above():
    up = [(m, d) for m, ds in graph().items() for d in sorted(ds) if floor_of(d) > floor_of(m)]
    assert not up, f'imports of a floor above (module, imported), see nbs/architecture.ipynb: {up}'

def test_no_import_circles():
    g, state, cycle = graph(), {}, []
    def visit(m, path):
        if state.get(m) == 'done': return
        if state.get(m) == 'open': cycle.append(path[path.index(m):] + [m]); return
        state[m] = 'open'
        for d in sorted(g.get(m, ())): visit(d, path + [m])
        state[m] = 'done'
    for m in sorted(g): visit(m, [])
    assert not cycle, f'import circles: {cycle}'

def test_infrastructure_knows_no_models():
    g = graph()
    bad = {m: sorted(g[m] - INFRA) for m in INFRA if m in g and g[m] - INFRA}
    assert INFRA <= set(g), f'missing modules: {INFRA - set(g)}'
    assert not bad, f'infrastructure modules importing model-level parts: {bad}'

def test_notebook_drivers_load_no_torch():
    code = ('import sys; ' + '; '.join(f'import letter8_tokenizer.{m}' for m in RULES['NO_TORCH'])
            + '; print("torch" in sys.modules)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == 'False', f"importing {RULES['NO_TORCH']} loads torch"

def test_modules_and_lines_stay_short():
    big, wide = [], []
    for p in sorted(PKG.glob('*.py')):
        if p.stem.startswith('_'): continue
        lines = p.read_text().splitlines()
        if len(lines) > RULES['MAX_MODULE_LINES']: big.append(f'{p.name}: {len(lines)} lines')
        wide += [f'{p.name}:{i}: {len(l)} characters' for i, l in enumerate(lines, 1) if len(l) > RULES['MAX_LINE']]
    assert not big, f"modules over {RULES['MAX_MODULE_LINES']} lines (split them by concept): {big}"
    assert not wide, f"lines over {RULES['MAX_LINE']} characters (wrap them in the notebooks): {wide[:20]} ... {len(wide)} in all"

def _cells():
    for nb in sorted((ROOT/'nbs').rglob('*.ipynb')):
        if any(p.startswith(('.', '_')) for p in nb.relative_to(ROOT/'nbs').parts): continue
        for i, c in enumerate(json.loads(nb.read_text())['cells']):
            if c['cell_type'] == 'code': yield nb.relative_to(ROOT).as_posix(), i, ''.join(c['source'])

def test_cells_and_functions_stay_short():
    long = []
    for nb, i, src in _cells():
        lines = src.splitlines()
        if len(lines) > 40: long.append(f'{nb} cell {i}: {len(lines)} lines (at most 40)')
        if not lines or not lines[0].replace(' ', '').startswith('#|export'): continue
        for n in ast.walk(ast.parse('\n'.join(l for l in lines if not l.lstrip().startswith(('%', '!'))))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno >= 50:
                long.append(f'{nb} cell {i}: {n.name} has {n.end_lineno - n.lineno + 1} lines (at most 50)')
    assert not long, 'split these (a definition, a sentence, an example):\n  ' + '\n  '.join(long)
