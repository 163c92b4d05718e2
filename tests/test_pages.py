"""The pages teach: what a part does, why, and a small example; measured runs live in `bench/results/` and on the
Results page. Checked on the sources: no notebook over 6,000 words of prose, no path of one machine's scratch space
in any notebook, every line of the exported config at most 160 characters (a docment is one line: what and unit)."""
import json, re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT/'nbs').rglob('*.ipynb'))
MAX_WORDS, MAX_LINE = 6000, 160
# a scratch path anywhere in a notebook; /tmp/ only in prose (code may use a fake path as a test value)
SCRATCH = re.compile(r'[^\s`\'"]*(?:/work/|/cache/|\bh4/|\bexp\.py\b|/home/\w+/)[^\s`\'"]*')
SCRATCH_PROSE = re.compile(r'[^\s`\'"]*(?:/work/|/cache/|\bh4/|\bexp\.py\b|/home/\w+/|/tmp/|/var/folders/)[^\s`\'"]*')

def cells(nb:Path) -> list: return json.loads(nb.read_text())['cells']
def prose_words(nb:Path) -> int: return sum(len(''.join(c['source']).split()) for c in cells(nb) if c['cell_type'] == 'markdown')

def test_notebooks_found():
    assert len(NOTEBOOKS) > 20 and ROOT/'nbs'/'results.ipynb' in NOTEBOOKS

def test_no_notebook_over_6000_words_of_prose():
    big = {nb.relative_to(ROOT).as_posix(): w for nb in NOTEBOOKS if (w := prose_words(nb)) > MAX_WORDS}
    assert not big, f'notebooks over {MAX_WORDS} words of markdown (move run logs to bench/results and the Results page): {big}'

def test_prose_word_count_counts_markdown_only(tmp_path):
    nb = tmp_path/'x.ipynb'
    nb.write_text(json.dumps({'cells': [{'cell_type': 'markdown', 'source': ['two words\n', 'and three']},
                                        {'cell_type': 'code', 'source': ['x = 1  # not prose']}]}))
    assert prose_words(nb) == 4

def scratch_hits(nb:Path) -> list:
    hits = []
    for c in cells(nb):
        s = ''.join(c['source'])
        rx = SCRATCH_PROSE if c['cell_type'] == 'markdown' else SCRATCH
        hits += [m.group(0) for m in rx.finditer(s)]
    return hits

def test_no_scratch_path_in_notebooks():
    bad = {nb.relative_to(ROOT).as_posix(): h[:3] for nb in NOTEBOOKS if (h := scratch_hits(nb))}
    assert not bad, f'scratch paths of one machine in nbs/ (name the command with a placeholder, e.g. <folder>): {bad}'

def test_scratch_check_catches_a_scratch_path(tmp_path):
    nb = tmp_path/'x.ipynb'
    nb.write_text(json.dumps({'cells': [{'cell_type': 'markdown', 'source': ['run `python /work/cache/h4/exp.py`']},
                                        {'cell_type': 'code', 'source': ["roots('/tmp/fake')"]}]}))
    assert scratch_hits(nb) == ['/work/cache/h4/exp.py']

def test_config_lines_at_most_160_characters():
    long = [(i, len(l)) for i, l in enumerate((ROOT/'letter8_tokenizer'/'config.py').read_text().splitlines(), 1) if len(l) > MAX_LINE]
    assert not long, f'letter8_tokenizer/config.py lines over {MAX_LINE} characters (line, length): {long}; shorten them in nbs/02_config.ipynb'
