#!/usr/bin/python3
"""test_olmes_inloop.py: OLMo 3's downstream suite (eval.downstream) in the training loop.

test_olmes.py checks `olmo eval`'s downstream numbers against a float64 reference; this one
checks that the same numbers reach everything a training run writes (issue 53 item 3), with
test_olmes.py's task folders (every request type: rc acc, rc len_norm, bpb, fast_mc):
1. a 2-step run (olmo3-tiny, dolma2 vocabulary, seq_len 32) with eval.interval 1 writes an
   eval record at steps 0, 1 and 2 holding every key `olmo eval` gives for the labels
   (downstream/<label>/<metric>, /samples, /chance);
2. the last record's downstream numbers equal `olmo eval` on the run's saved weights, as
   printed (both are the same fp32 forward of the same rows on the CPU model: bitwise);
3. the same run at W = 2 (mpirun, one micro-batch per rank: the weights are bitwise those
   of W = 1, test_dist.sh) writes the same downstream numbers at every step, bitwise;
4. TensorBoard: every downstream number of every eval record is a scalar at its step, equal
   to metrics.jsonl's rounded to float32 (1 float32 ulp: test_tensorboard.py says why) --
   an eval record of the whole suite holds ~250 numbers, over the event writer's old cap;
5. `olmo compare` of the two runs lines up the downstream keys (acc / len_norm judged with
   --tol-task, the others printed; samples and chance not compared) and finds them equal;
6. `olmo report` of the two runs has the suite's panel: per label a chart of its primary
   metric (len_norm_v1, acc_v1 or bpb_v1) with both runs' series, a chance line and the
   chance in the title exactly where the metric is an accuracy.
"""
import glob
import json
import os
import random
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lib import OLMO, check, finish, tmpdir  # noqa: E402
from test_olmes import make_tasks, write_tasks  # noqa: E402
from tfevents_read import f32, read_events  # noqa: E402

ENV = dict(os.environ, OMP_NUM_THREADS="1")


def ds(rec):
    return {k: v for k, v in rec.items() if k.startswith("downstream/")}


def evals(run):
    return [r for r in map(json.loads, open(os.path.join(run, "metrics.jsonl"))) if r.get("kind") == "eval"]


def main():
    tmp = tmpdir("olmes_inloop_")
    tasks = make_tasks(random.Random(11))
    # seven more labels on copies of the rows (the rest of basic_skills, arc_easy's fast_mc,
    # arc_challenge's bpb): 13 labels, an eval record of over 128 numbers, the most the event
    # writer once kept
    for sk in ["coding", "common_knowledge", "logical_reasoning", "pattern", "string_operations"]:
        tasks[f"basic_skills_{sk}_rc_5shot"] = (f"basic_skills_{sk}",) + tasks["basic_skills_arithmetic_rc_5shot"][1:]
    tasks["arc_easy_test_mc_5shot_fast"] = ("arc_easy", "test_mc_5shot") + tasks["arc_challenge_test_mc_5shot_fast"][2:]
    tasks["arc_challenge_test_bpb_5shot"] = ("arc_challenge", "test_rc_5shot") + tasks["arc_easy_test_bpb_5shot"][2:]
    root = os.path.join(tmp, "olmo_eval")
    write_tasks(root, tasks)
    rng = random.Random(3)
    tok = os.path.join(tmp, "tok.npy")
    open(tok, "wb").write(struct.pack("<4000I", *[rng.randrange(5000) for _ in range(4000)]))
    held = os.path.join(tmp, "held.npy")
    ids = [rng.randrange(5000) for _ in range(60)]
    ids[19] = ids[59] = 100257   # two documents ending at dolma2's EOS
    open(held, "wb").write(struct.pack("<60I", *ids))
    recipe = os.path.join(tmp, "r.yml")
    with open(recipe, "w") as f:
        f.write("model: {preset: olmo3-tiny, vocab_size: 100278}\n"
                "train: {seq_len: 32, global_batch: 2, micro_batch: 1, max_steps: 2}\n"
                "schedule: {warmup_steps: 1}\n"
                f"data: {{paths: [{tok}]}}\n"
                "perf: {peak_flops: 1e11}\nckpt: {interval: 0}\n"
                f"eval: {{sets: [held={held}], eos_id: 100257, interval: 1, downstream: [{', '.join(tasks)}], "
                f"downstream_dir: {root}}}\n")
    runs = {1: os.path.join(tmp, "w1"), 2: os.path.join(tmp, "w2")}
    for w, run in runs.items():
        cmd = [OLMO, "train", recipe, f"train.run_dir={run}"]
        if w > 1:
            cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(w), "-x", "OMP_NUM_THREADS=1"] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        if r.returncode != 0:
            sys.exit(f"train W={w} failed ({r.returncode}): {r.stdout[-1500:]}{r.stderr[-1500:]}")

    # 2. olmo eval on the saved weights: the reference key set and numbers
    r = subprocess.run([OLMO, "eval", os.path.join(runs[1], "model.safetensors"), "--recipe", recipe, "--json"],
                       capture_output=True, text=True, env=ENV)
    check(r.returncode == 0, f"olmo eval: {r.stderr[-800:]}")
    want = ds(json.loads(r.stdout)) if r.returncode == 0 else {}
    check(all(f"downstream/{label}/samples" in want for label in tasks), "olmo eval scores every label")

    # 1. an eval record with every key at steps 0, 1, 2
    ev1 = evals(runs[1])
    nnum = sum(1 for v in ev1[-1].values() if isinstance(v, (int, float)) and not isinstance(v, bool))
    check(nnum > 128, f"an eval record of {nnum} numbers, want > 128")
    check([e["step"] for e in ev1] == [0, 1, 2], f"W=1 eval steps {[e['step'] for e in ev1]}, want [0, 1, 2]")
    for e in ev1:
        check(sorted(ds(e)) == sorted(want), f"step {e['step']}: downstream keys differ from olmo eval's: "
              f"{sorted(set(ds(e)) ^ set(want))[:4]}")
    last = ds(ev1[-1])
    diff = [k for k in want if last.get(k) != want[k]]
    check(not diff, f"last in-loop record vs olmo eval on the saved weights: {[(k, last.get(k), want[k]) for k in diff[:3]]}")
    check(ds(ev1[0]) != last, "the downstream numbers moved between step 0 and step 2 (the evaluation sees the weights)")

    # 3. W = 2: the same numbers at every step
    ev2 = evals(runs[2])
    check([e["step"] for e in ev2] == [0, 1, 2], f"W=2 eval steps {[e['step'] for e in ev2]}")
    for a, b in zip(ev1, ev2):
        d = [k for k in ds(a) if ds(b).get(k) != ds(a)[k]]
        check(not d and sorted(ds(a)) == sorted(ds(b)), f"step {a['step']}: W=2 differs from W=1: "
              f"{[(k, ds(a)[k], ds(b).get(k)) for k in d[:3]]}")

    # 4. TensorBoard: each downstream number a scalar at its step (float32)
    tb = glob.glob(os.path.join(runs[1], "tb", "events.out.tfevents.*"))
    check(len(tb) == 1, f"one event file ({tb})")
    got = {}
    for e in (read_events(tb[0]) if tb else []):
        for tag, v in e["scalars"]:
            got[(tag, e["step"])] = v
    n = 0
    for e in ev1:
        for k, v in ds(e).items():
            if v is None:
                continue
            n += 1
            g = got.get((k, e["step"]))
            check(g is not None and abs(g - f32(v)) <= abs(f32(v)) * 2.0 ** -23,
                  f"tensorboard {k} at step {e['step']}: {g}, metrics.jsonl {v}")
    print(f"tensorboard: {n} downstream scalars checked against metrics.jsonl")

    # 5. olmo compare lines the keys up, judges the accuracies, finds no gap
    r = subprocess.run([OLMO, "compare", runs[1], runs[2]], capture_output=True, text=True, env=ENV)
    out = r.stdout + r.stderr
    check(r.returncode == 0 and "verdict: MATCH" in out, f"olmo compare W=1 W=2: exit {r.returncode}: {out[-800:]}")
    lab = "arc_challenge_test_mc_5shot_fast"
    rows = {}
    for ln in out.splitlines():   # the table's row (the per-landmark part repeats the key)
        if ln.startswith("downstream/"):
            rows.setdefault(ln.split()[0], ln)
    check(f"downstream/{lab}/acc_v1" in rows and " ok" in rows.get(f"downstream/{lab}/acc_v1", ""),
          f"compare judges {lab}/acc_v1: {rows.get(f'downstream/{lab}/acc_v1')}")
    check("(info)" in rows.get(f"downstream/{lab}/bpb_v1", ""), f"compare prints bpb_v1 as info: {rows.get(f'downstream/{lab}/bpb_v1')}")
    check(not any(k.endswith(("/samples", "/chance")) for k in rows), "compare must not compare samples or chance")

    # 6. olmo report: the suite's panel, per label its primary metric over steps per run,
    # a chance line for the accuracies (acc: rc and fast_mc tasks; len_norm) and none for bpb
    html = os.path.join(tmp, "report.html")
    r = subprocess.run([OLMO, "report", runs[1], runs[2], "-o", html, "--x", "step"], capture_output=True, text=True)
    check(r.returncode == 0, f"olmo report: {r.stderr[-500:]}")
    page = open(html).read() if r.returncode == 0 else ""
    check("OLMo 3 downstream suite" in page, "report: the suite's panel")
    primary = {"acc": "acc_v1", "len_norm": "len_norm_v1", "bpb": "bpb_v1"}
    for label, t in tasks.items():
        m = primary[t[2]]
        for w in (1, 2):
            check(f'data-series="{os.path.basename(runs[w])}:downstream/{label}/{m}"' in page,
                  f"report: {label} {m} series of w{w}")
        ch = ev1[-1].get(f"downstream/{label}/chance")
        title = f"{label}: {m} (chance {ch:.3f})" if ch is not None else f"{label}: {m}<"
        check((ch is not None) == (t[2] != "bpb") and title in page, f"report: chart title '{title}'")
    nch = page.count('data-series="chance"')
    check(nch == sum(1 for t in tasks.values() if t[2] != "bpb"), f"report: one chance line per accuracy label ({nch})")
    finish("test_olmes_inloop", tmp)


if __name__ == "__main__":
    main()
