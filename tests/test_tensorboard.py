#!/usr/bin/env python3
# test_tensorboard.py: RUN_DIR/tb, TensorBoard event files written natively (train/tfevents.h).
# A tiny run with in-loop held-out evaluation, then a resume: each segment has its own
# events.out.tfevents.* file; every record's framing is checked (length, its masked CRC-32C,
# the data's masked CRC-32C, computed here from the polynomial), every Event decoded by hand
# from the protobuf wire format (the first carries file_version "brain.Event:2"), and every
# number of every train and eval record of metrics.jsonl is a scalar with its step and the
# value rounded to float32 (simple_value is a float; within 1 float32 ulp, see below), nothing
# else is. train.tensorboard=false
# writes no tb directory.
import glob, json, os, random, struct, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import OLMO, ROOT, check, finish, tmpdir  # noqa: E402 (after the path)
from tfevents_read import f32, read_events  # noqa: E402

TMP = tmpdir("tboard_")

random.seed(5)
tok = os.path.join(TMP, "tok.npy")
open(tok, "wb").write(struct.pack("<20000I", *[random.randrange(1000) for _ in range(20000)]))
held = os.path.join(TMP, "held.npy")
open(held, "wb").write(struct.pack("<3000I", *[random.randrange(1000) for _ in range(3000)]))
run = os.path.join(TMP, "run")
yml = os.path.join(TMP, "r.yml")
open(yml, "w").write(f"""model: {{preset: olmo3-tiny, vocab_size: 1000}}
train: {{seq_len: 32, global_batch: 8, micro_batch: 4, max_steps: 6, run_dir: {run}}}
data: {{paths: [{tok}], eos_id: 5}}
perf: {{peak_flops: 1e11}}
ckpt: {{interval: 3}}
eval: {{sets: [held={held}], interval: 3, eos_id: 5}}
""")
env = dict(os.environ, OMP_NUM_THREADS="1")
r1 = subprocess.run([OLMO, "train", yml, "train.stop_at=3"], capture_output=True, text=True, env=env)
r2 = subprocess.run([OLMO, "train", yml], capture_output=True, text=True, env=env)
check(r1.returncode == 0 and r2.returncode == 0, f"train 3 steps, resume to 6: {r1.stderr[-300:]}{r2.stderr[-300:]}")
files = sorted(glob.glob(os.path.join(run, "tb", "events.out.tfevents.*")))
check(len(files) == 2, f"one event file per run segment: {files}")
events, bad = [], None
for p in files:
    try:
        ev = read_events(p)
    except AssertionError as e:
        bad = str(e); break
    check(ev and ev[0].get("file_version") == "brain.Event:2" and not ev[0]["scalars"], f"{os.path.basename(p)}: first record is file_version brain.Event:2")
    events += ev[1:]
check(bad is None, f"every record's two masked CRC-32C match ({bad or 'all'})")
got = {}
for e in events:
    for tag, v in e["scalars"]:
        got.setdefault((tag, e["step"]), []).append(v)
want = {}
for line in open(os.path.join(run, "metrics.jsonl")):
    rec = json.loads(line)
    for k, v in rec.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
            tag = k if "/" in k else f"{rec['kind']}/{k}"
            want[(tag, rec["step"])] = f32(float(v))
kinds = sorted({t.split("/")[0] for t, _ in want})
check({"train", "eval"} <= set(kinds), f"metrics.jsonl has train and eval numbers ({kinds})")
missing = [k for k in want if k not in got]
check(not missing, f"every number of metrics.jsonl is a scalar at its step ({len(want)}; missing {missing[:3]})")
# cJSON prints a double with 15 significant digits when they read back within DBL_EPSILON
# (not always bit-exactly), so the value metrics.jsonl shows can sit one float32 rounding
# step away from the float the event file got from the exact double: 1 float32 ulp allowed.
wrong = [k for k in want if k in got and abs(got[k][-1] - want[k]) > abs(want[k]) * 2.0 ** -23]
check(not wrong, f"values equal metrics.jsonl's rounded to float32 (first wrong: {[(k, got[k], want[k]) for k in wrong[:1]]})")
# A resume rewrites metrics.jsonl from the checkpoint on; the event files keep what each
# segment logged, so a key may appear in both: only the last segment's must match.
extra = [k for k in got if k not in want]
check(not extra, f"no scalar that metrics.jsonl does not have ({extra[:3]})")
run2 = os.path.join(TMP, "off")
r3 = subprocess.run([OLMO, "train", yml, f"train.run_dir={run2}", "train.tensorboard=false", "train.max_steps=2"],
                    capture_output=True, text=True, env=env)
check(r3.returncode == 0 and not os.path.exists(os.path.join(run2, "tb")), "train.tensorboard=false: no tb directory")
finish("test_tensorboard", TMP)
