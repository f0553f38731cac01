#!/usr/bin/env python3
# test_instance_filter.py: the repetition instance filter (data.instance_filter; OLMo-core's
# InstanceFilterConfig, src/data/repetition.h):
# 1. repetition_max_times (build/tests/tool_repetition) equals, on every sequence, the largest
#    `times` of a numpy port of OLMo-core's find_periodic_sequences (olmo_core/data/utils.py:
#    607-718 at fa6c5014, ported below from that code): 3000 random sequences with planted
#    runs (periods 1-15, 1-45 repeats, any offset, touching either end, two runs, runs of
#    period p that are also runs of 2p), lengths 3-300, periods [1, 13] and [2, 5].
# 2. Training: instances 0-3 ordinary, 4-7 each one token repeated 32 times. With the filter, step 1's CE is the ordinary
#    instances' CE sum over 4 (T - 1) + 4 T positions, OLMo-core's denominator: it equals the
#    CE of a run on instances 0-3 alone times 4 (T - 1) / (4 (T - 1) + 4 T), within 1e-6
#    relative (fp32 sums over 4 x 31 tokens, summed in another micro-batch order: a few ulp).
#    A batch whose instances are all filtered has CE 0. Bad settings exit 2 naming the key.
import json, os, random, struct, subprocess, sys
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import OLMO, ROOT, check, finish, tmpdir  # noqa: E402 (after the path)

TMP = tmpdir("instfilter_")
BUILD = os.environ.get("OLMO_BUILD", os.path.join(ROOT, "build"))


# ---- OLMo-core's find_periodic_sequences, ported from utils.py:607-718 ----------------------
def end_first_consecutive_true(arr):
    if not arr[0]:
        return 0
    prog = np.cumsum(arr)
    if prog[-1] == len(arr):
        return len(arr)
    return np.where(prog[:-1:] == prog[1::])[0][0] + 1


def start_last_consecutive_true(arr):
    reverse = end_first_consecutive_true(arr[::-1])
    return len(arr) - reverse if reverse > 0 else -1


def periodic_max_times(arr, max_period, min_period=1, mask_value=-1):
    max_period = min(max_period, len(arr) // 3)
    best = 0
    for period in range(min_period, max_period + 1):
        padded = np.pad(arr, (0, period - (len(arr) % period)), constant_values=mask_value)
        shaped = padded.reshape(-1, period)
        eq = shaped == np.roll(shaped, shift=1, axis=0)
        rows, *_ = np.where(eq.all(axis=1))
        if len(rows) == 0:
            continue
        for seq in np.split(rows, np.where(np.diff(rows) != 1)[0] + 1):
            s, e = seq[0], seq[-1]
            so = start_last_consecutive_true(eq[s - 1])
            so = period - so if so > 0 else 0
            eo = end_first_consecutive_true(eq[e + 1])
            start, end = (s - 1) * period - so, (e + 1) * period + eo
            times = (end - start) // period
            if times > 2:
                best = max(best, times)
    return best


# ---- 1. the detector against the port ---------------------------------------------------------
rng = random.Random(11)
seqs = []
for i in range(3000):
    n = rng.randrange(3, 301)
    x = [rng.randrange(50) for _ in range(n)]
    for _ in range(rng.choice((0, 1, 1, 2))):
        p = rng.randrange(1, 16)
        motif = [rng.randrange(50) for _ in range(p)]
        if rng.random() < 0.2:
            motif = motif[: max(1, p // 2)] * 2   # a run of period p is also one of period p/2
        reps = rng.randrange(1, 46)
        run = (motif * reps)[: n]
        at = rng.choice((0, n - len(run), rng.randrange(0, n - len(run) + 1)))
        x[at:at + len(run)] = run
    seqs.append(np.array(x, dtype=np.int32))
path = os.path.join(TMP, "seqs.bin")
with open(path, "wb") as f:
    for s in seqs:
        f.write(struct.pack("<i", len(s)) + s.tobytes())
for lo, hi in ((1, 13), (2, 5)):
    out = subprocess.run([os.path.join(BUILD, "tests", "tool_repetition"), path, str(lo), str(hi)],
                         capture_output=True, text=True, check=True).stdout.split()
    ours = [int(v) for v in out]
    ref = [periodic_max_times(s, hi, lo) for s in seqs]
    bad = [i for i in range(len(seqs)) if ours[i] != ref[i]]
    hits = sum(r >= 32 for r in ref)
    check(len(ours) == len(seqs) and not bad,
          f"periods [{lo}, {hi}]: {len(seqs)} sequences ({sum(r > 0 for r in ref)} with runs, {hits} filtered at 32), "
          f"max times equal to OLMo-core's" + (f"; first mismatch {bad[0]}: {ours[bad[0]]} vs {ref[bad[0]]}" if bad else ""))

# ---- 2. training --------------------------------------------------------------------------
T = 32
r2 = random.Random(3)
good = [[r2.randrange(1000) for _ in range(T)] for _ in range(4)]


def write(name, insts):
    p = os.path.join(TMP, name)
    with open(p, "wb") as f:
        f.write(struct.pack("<%dI" % (len(insts) * T), *[t for i in insts for t in i]))
    return p


# each filtered instance: one token 32 times (period 1, times = T = 32)
both = write("both.npy", good + [[7] * T, [8] * T, [9] * T, [11] * T])
only = write("good.npy", good)
allrep = write("rep.npy", [[7] * T, [8] * T, [9] * T, [11] * T])


def train(name, path, gb, *over):
    d = os.path.join(TMP, name)
    yml = os.path.join(TMP, name + ".yml")
    open(yml, "w").write(f"""model: {{preset: olmo3-tiny}}
train: {{seq_len: {T}, global_batch: {gb}, micro_batch: 2, max_steps: 1, run_dir: {d}}}
optim: {{lr: 0.001}}
data: {{paths: [{path}], order: sequential}}
perf: {{peak_flops: 1e11}}
eval: {{off: true}}
""")
    p = subprocess.run([OLMO, "train", yml, *over], capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        return p, None
    rec = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    return p, [r for r in rec if r.get("kind") == "train"][0]


_, on = train("on", both, 8, "data.instance_filter=true")
_, ref = train("ref", only, 4)
_, off = train("off", both, 8)
_, zero = train("zero", allrep, 4, "data.instance_filter=true")
want = ref["ce"] * 4 * (T - 1) / (4 * (T - 1) + 4 * T)
rel = abs(on["ce"] - want) / want
check(rel <= 1e-6, f"filtered step CE {on['ce']:.9g} = CE of the ordinary instances x 4(T-1)/(4(T-1)+4T) = {want:.9g} "
                   f"(rel {rel:.2g}, tolerance 1e-6)")
check(abs(off["ce"] - on["ce"]) > 1e-3, f"without the filter the repeated instances count: CE {off['ce']:.6g}")
check(zero["ce"] == 0.0, f"a batch of filtered instances has CE 0 (got {zero['ce']!r})")

for over, key in (("data.repetition_max_count=2", "data.repetition_max_count"),
                  ("data.repetition_min_period=0", "data.repetition_min_period"),
                  ("data.repetition_max_period=0", "data.repetition_min_period")):
    p, _ = train("bad", both, 8, "data.instance_filter=true", over)
    check(p.returncode == 2 and key in p.stderr, f"{over}: exit {p.returncode}, names {key}")

finish("test_instance_filter", TMP)
