"""Each environment `make` builds checks the free disk first (scripts/need_disk.sh): an install that would not fit stops
before pip with the space needed, the space free and the fix, instead of failing halfway with ENOSPC. A fake `df` on
PATH stands in for a full disk."""
import os, subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT/'scripts'/'need_disk.sh'

def run_check(tmp_path, free_kib:int, need_gib=10, target='sub/.venv-xla'):
    b = tmp_path/'bin'; b.mkdir(exist_ok=True)
    (b/'df').write_text('#!/bin/sh\necho "Filesystem 1024-blocks Used Available Capacity Mounted"\n'
                        f'echo "/dev/x 999999999 1 {free_kib} 1% /"\n')
    (b/'df').chmod(0o755)
    env = dict(os.environ, PATH=f"{b}:{os.environ['PATH']}")
    return subprocess.run(['bash', str(SCRIPT), str(need_gib), str(tmp_path/target), 'the test env'],
                          env=env, capture_output=True, text=True)

def test_enough_space_passes_quietly(tmp_path):
    r = run_check(tmp_path, 12 * 1048576)
    assert r.returncode == 0 and r.stdout == r.stderr == ''

def test_too_little_space_names_need_free_and_fix(tmp_path):
    r = run_check(tmp_path, 3 * 1048576 + 5)
    assert r.returncode == 1
    assert 'the test env needs about 10 GiB free' in r.stderr and 'only 3 GiB' in r.stderr
    assert str(tmp_path) in r.stderr and 'XLA_VENV=' in r.stderr and 'pip cache purge' in r.stderr
    assert not (tmp_path/'sub').exists()  # nothing was made

def test_make_checks_the_disk_before_pip(tmp_path):
    for target, var in (('test-xla', 'XLA_VENV'), ('pytest', 'VENV')):
        plan = subprocess.run(['make', '-n', target, f'{var}={tmp_path}/v'], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.splitlines()
        check = next(i for i, l in enumerate(plan) if 'need_disk.sh' in l)
        assert check < next(i for i, l in enumerate(plan) if 'pip install' in l), target
        assert all('--no-cache-dir' in l for l in plan if 'pip install' in l), target
