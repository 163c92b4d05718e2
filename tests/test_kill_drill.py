"""The kill drill, small: SIGKILLs of the `letter8 run` runner, its kernel, or both, at random instants
(training, saves, export); every run then finishes with the same code table, tokenizer weights, probe numbers and
loss history as an uninterrupted run, and no status ever says done without a committed export.
`bench/checkpoint/kill_drill.py --kills 30` is the full drill."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the clone's root, for the bench package
from bench.checkpoint.kill_drill import drill

def test_kill_drill(tmp_path):
    res = drill(5, tmp_path, seed=1, log=lambda *a: None)
    assert res['kills'] >= 5
    assert res['identical'] == res['runs'], res['detail']
    assert sum(res['by_target'].values()) == res['kills']
