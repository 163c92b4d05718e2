"""Write README.md from nbs/index.ipynb (what `nbdev-readme` does, without quarto).

  python scripts/make_readme.py          # write README.md
  python scripts/make_readme.py --check  # exit 1 when README.md is out of step
"""
import json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def render(nb_path=ROOT/'nbs'/'index.ipynb') -> str:
    "README text of the index notebook: markdown as is, visible code cells as python blocks."
    cells = json.loads(Path(nb_path).read_text())['cells']
    parts = []
    for c in cells:
        src = ''.join(c['source']).strip()
        if not src: continue
        if c['cell_type'] == 'markdown': parts.append(src)
        elif c['cell_type'] == 'code' and not src.startswith('#| hide'):
            parts.append('```python\n' + '\n'.join(l for l in src.splitlines() if not l.startswith('#|')) + '\n```')
    return '<!-- Generated from nbs/index.ipynb by scripts/make_readme.py: edit the notebook, not this file. -->\n\n' + '\n\n'.join(parts) + '\n'

def main():
    text, readme = render(), ROOT/'README.md'
    if '--check' in sys.argv[1:]:
        if not readme.exists() or readme.read_text() != text:
            print('README.md is out of step with nbs/index.ipynb: run `python scripts/make_readme.py`.'); sys.exit(1)
        print('README.md matches nbs/index.ipynb'); return
    readme.write_text(text); print(f'wrote {readme}')

if __name__ == '__main__': main()
