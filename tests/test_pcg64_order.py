#!/usr/bin/python3
# test_pcg64_order.py: the C global instance order (src/data/pcg64) and rank slicing
# (src/data/order) against numpy, the oracle (Debian's python3-numpy):
#   np.random.Generator(np.random.PCG64(seed)).shuffle(np.arange(n, dtype=np.uint32))
#   perm[:nb*ipb].reshape(nb, ipb)[bp:][:, r::W].reshape(-1)
# Drives build/tests/tool_pcg64 (OLMO_BUILD overrides build/); results travel through
# binary files and are compared with np.array_equal.
import os, subprocess, sys, tempfile
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("OLMO_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD),
                    "tests", "tool_pcg64")
TMP = tempfile.mkdtemp(prefix="pcg64_")
failures = 0


def tool(*args):
    return subprocess.run([TOOL, *map(str, args)], check=True, capture_output=True,
                          text=True).stdout


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL", what)


def numpy_order(seed, n):
    a = np.arange(n, dtype=np.uint32)
    np.random.Generator(np.random.PCG64(seed=seed)).shuffle(a)
    return a


def c_order(seed, n):
    path = os.path.join(TMP, "perm.bin")
    tool("perm", seed, n, path)
    return np.fromfile(path, dtype="<u4")


# 1. SeedSequence words and the raw generator (64-bit draws, then buffered 32-bit ones).
for seed in [0, 1, 42, 34521, 34523, 2**32 - 1, 2**32, 2**32 + 5, 2**63 + 1, 2**64 - 1]:
    want = ["%016x" % w for w in np.random.SeedSequence(seed).generate_state(4, np.uint64)]
    check(tool("words", seed).split() == want, f"SeedSequence words seed={seed}")
    bg = np.random.PCG64(seed)
    k = 7
    want = [int(x) for x in bg.random_raw(k)]
    want += [int(bg.ctypes.next_uint32(bg.ctypes.state)) for _ in range(k)]
    check([int(x) for x in tool("raw", seed, k).split()] == want, f"raw draws seed={seed}")

# 2. Permutations. 16777259 > 2^24 (beyond float32-exact indices); 1e6 and up only
# for some seeds to keep the test short.
seeds = [0, 1, 42, 34521, 34521 + 1, 34521 + 7, 2**32 + 5, 2**63 + 1]
for seed in seeds:
    sizes = [1, 2, 3, 10, 1000, 65537]
    if seed in (0, 42, 34521, 2**63 + 1):
        sizes += [10**6]
    if seed in (34521, 2**32 + 5):
        sizes += [16777259]
    for n in sizes:
        check(np.array_equal(c_order(seed, n), numpy_order(seed, n)), f"order seed={seed} n={n}")
check(c_order(5, 0).size == 0, "order n=0")

# 3. Batch/rank slicing: truncation to whole batches, batches_processed skipping, W=1,2,3.
for seed, n, ipb in [(34521, 1000, 16), (34522, 1003, 12), (7, 999, 7), (2**32 + 5, 50, 50),
                     (1, 49, 50), (3, 10, 3)]:
    perm = numpy_order(seed, n)
    nb = n // ipb
    batches = perm[: nb * ipb].reshape(nb, ipb)
    for bp in sorted({0, 1, 5, nb - 1, nb, nb + 2}):
        if bp < 0:
            continue
        for W in (1, 2, 3):
            for r in range(W):
                want = batches[bp:][:, r::W].reshape(-1)
                path = os.path.join(TMP, "slice.bin")
                tool("slice", seed, n, ipb, bp, W, r, path)
                got = np.fromfile(path, dtype="<u4")
                check(np.array_equal(got, want),
                      f"slice seed={seed} n={n} ipb={ipb} bp={bp} W={W} r={r}")

print("failures:", failures)
sys.exit(1 if failures else 0)
