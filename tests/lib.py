"""lib.py: what the Python tests share (import it after `sys.path.insert(0, tests/)`, as
the tests do): the repository root, the binary under test, a temporary directory, the
failure counter with check(), running the binary, and the ending that removes the
temporary directory and exits non-zero when a check failed. Not a test itself (run.sh runs
tests/test_*.py only)."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OLMO = os.environ.get("OLMO_BIN", os.path.join(ROOT, "build", "olmo"))
failures = 0


def tmpdir(prefix):
    """A fresh temporary directory for the test's files (finish() removes it)."""
    return tempfile.mkdtemp(prefix=prefix)


def check(ok, what):
    """Count and print a failed check; the test goes on (finish() reports the count)."""
    global failures
    if not ok:
        failures += 1
        print("FAIL", what)
    return ok


def olmo(*args, **kw):
    """Run the binary with args (str() each), capturing text output; from the repository root
    unless cwd= says otherwise."""
    kw.setdefault("cwd", ROOT)
    return subprocess.run([OLMO, *map(str, args)], capture_output=True, text=True, **kw)


def finish(name, tmp):
    """Remove tmp; exit 1 naming the failure count, or print "<name>: ok"."""
    shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        sys.exit(f"{name}: {failures} check(s) failed")
    print(f"{name}: ok")
