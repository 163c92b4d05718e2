"""What a missing prerequisite means for a test. `make test` installs the system packages (`make system-deps`), so a
missing one fails the test, saying what to run; `../shared` (the real interaction data beside the clone) is the one
thing a clone may lack: outside the project's CI its tests skip with the reason, in CI (`CI` set) they fail."""
import os
from pathlib import Path
import pytest

SHARED = Path(__file__).resolve().parents[2]/'shared'

def require_system(path, package:str):
    "Fail unless `path` (a file a Debian package installs) exists."
    if not Path(path).exists(): pytest.fail(f"{path} is missing: run `make system-deps` (installs Debian's {package})", pytrace=False)

def require_shared(path) -> Path:
    "A file under ../shared: skip where the clone has no ../shared beside it, fail in the project's CI."
    path = Path(path)
    if path.exists(): return path
    msg = f"{path} is missing: the real data lives in ../shared beside the clone"
    if os.environ.get('CI'): pytest.fail(msg + " (CI must have it)", pytrace=False)
    pytest.skip(msg)
