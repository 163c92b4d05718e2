"""The architecture rules of DESIGN.md, checked on the source: no import circles, the infrastructure knows nothing of
tokenizers or recommendation, `segments` and `kaggle` drive notebooks and files without loading torch, and the pages
stay readable (no notebook cell over 40 lines, no exported function over 50)."""
import ast, json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT/'letter8_tokenizer'
# the parts that save and resume any training: they may import each other, never the kit's models or data
INFRA = {'files', 'session', 'progress', 'arrays', 'checkpoint', 'distributed', 'loop'}

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

def test_segments_and_kaggle_load_no_torch():
    code = 'import sys, letter8_tokenizer.segments, letter8_tokenizer.kaggle; print("torch" in sys.modules)'
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == 'False', 'importing segments or kaggle loads torch'

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
