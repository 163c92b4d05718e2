"""`make test` installs the system packages its tests need, from one list (scripts/system-packages.txt), before anything
else; without root or apt-get it stops with one line that names the packages and the command. Fakes of `id` and
`apt-get` on PATH stand in for a non-root user and for Debian's installer, so nothing is installed here."""
import os, subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT/'scripts'/'system_deps.sh'

def fake_bin(tmp_path, uid:int):
    "A folder with `id` printing `uid` and an `apt-get` that logs its arguments and installs by touching the checked file."
    b = tmp_path/'bin'; b.mkdir(exist_ok=True)
    (b/'id').write_text(f'#!/bin/sh\necho {uid}\n')
    (b/'apt-get').write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/apt.log\n'
                             f'case "$1" in install) touch {tmp_path}/installed.flag;; esac\n')
    for f in b.iterdir(): f.chmod(0o755)
    return b

def run_deps(tmp_path, uid, *args):
    listing = tmp_path/'packages.txt'
    listing.write_text(f'# package   present when\nletter8-test-pkg  {tmp_path}/installed.flag  # a comment\nbash  bash\n')
    env = dict(os.environ, SYSTEM_PACKAGES_FILE=str(listing), PATH=f"{fake_bin(tmp_path, uid)}:{os.environ['PATH']}")
    return subprocess.run(['bash', str(SCRIPT), *args], env=env, capture_output=True, text=True)

def test_non_root_names_the_packages_and_the_command(tmp_path):
    r = run_deps(tmp_path, 1000)
    assert r.returncode == 1 and r.stdout == ''
    assert r.stderr.count('\n') == 1 and 'letter8-test-pkg' in r.stderr and 'sudo apt-get install -y letter8-test-pkg' in r.stderr
    assert 'bash' not in r.stderr.split('install -y')[1]  # what is present is not asked for
    assert not (tmp_path/'apt.log').exists()  # nothing installed

def test_root_installs_what_is_missing(tmp_path):
    r = run_deps(tmp_path, 0)
    assert r.returncode == 0, r.stderr
    assert (tmp_path/'apt.log').read_text().splitlines() == ['update -qq', 'install -y -qq letter8-test-pkg']
    r = run_deps(tmp_path, 0)  # now present: nothing more to install
    assert r.returncode == 0 and r.stdout == '' and len((tmp_path/'apt.log').read_text().splitlines()) == 2

def test_check_only_reports(tmp_path):
    r = run_deps(tmp_path, 0, '--check')
    assert r.returncode == 1 and 'letter8-test-pkg' in r.stdout and not (tmp_path/'apt.log').exists()

def test_this_machine_has_every_declared_package():
    "`make test` ran `make system-deps` first, so the real list is complete here."
    r = subprocess.run(['bash', str(SCRIPT), '--check'], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout

def test_make_test_installs_them_first_and_ci_does_not():
    plan = subprocess.run(['make', '-n', 'test'], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    first = next(i for i, l in enumerate(plan) if 'scripts/system_deps.sh' in l)
    assert first < next(i for i, l in enumerate(plan) if 'pytest' in l)
    assert all('pip install' not in l for l in plan[:first])  # nothing is installed before the system packages
    ci = (ROOT/'.ci'/'run').read_text()
    assert 'make test' in ci and not any(p in ci for p in ('wordnet', 'chromium'))
