"""lib.py: what the Python tests share (import it after `sys.path.insert(0, tests/)`, as
the tests do): the repository root, the binary under test, a temporary directory, the
failure counter with check(), running the binary, and the ending that removes the
temporary directory and exits non-zero when a check failed, and a tiny dolma2-vocabulary
checkpoint for the tests that score text against tests/ref/olmo_ref.py. Not a test itself (run.sh runs
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


def tiny_dolma2_checkpoint(d, seq_len, seed):
    """olmo3-tiny's shape with the dolma2 vocabulary (olmo_ref's init, every weight but the
    norms x5 so that the distributions are far from uniform) written as d/ckpt/
    model.safetensors; returns (olmo_ref Config, float64 parameters, the ckpt directory)."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
    import olmo_ref as ref
    import safetensors_io as st
    cfg = ref.Config(dict(ref.TINY, vocab_size=100278, padded_vocab=100352, seq_len=seq_len))
    cfg.check()
    P = ref.init_params(cfg, seed=seed)
    for n in P:
        if not ref.is_norm(n):
            P[n] = P[n] * 5.0
    ckpt = os.path.join(d, "ckpt")
    os.makedirs(ckpt)
    st.write(os.path.join(ckpt, "model.safetensors"), {n: t.numpy() for n, t in P.items()})
    return cfg, {n: t.to(torch.float64) for n, t in P.items()}, ckpt
