#!/usr/bin/python3
# test_schedule.py: the learning-rate schedules against a transcription of OLMo-core's
# (allenai/OLMo-core fa6c5014, src/olmo_core/optim/scheduler.py: CosWithWarmup.get_lr
# 481-500, HalfCosWithWarmup.get_lr 536-558, LinearWithWarmup.get_lr 380-399, WSD.get_lr
# 208-229, _linear_warmup 830-835, _linear_decay 838-847), and the schedule length its
# trainer derives from a Duration.tokens (src/olmo_core/train/trainer.py:522-527:
# global_step + ceil(tokens_remaining / tokens_per_batch), = ceil(max_tokens / tokens per
# step) when the run started at 0 with a fixed batch).
#  1. The OLMo 3 7B recipes: `olmo info RECIPE --lr-at 1,2000,597046,1000000,1413814` for
#     stage 1 part 1 (cosine over 5e12 tokens), part 2 (half cosine over 7e12 tokens,
#     warmup 597,046), stage 2 and 3 (linear to 0). Tolerances: half_cos_with_warmup and
#     wsd are the same operations in the same order as OLMo-core's Python (IEEE doubles,
#     libm cos): bitwise. linear: bitwise before t_max (same operations); at and past t_max
#     OLMo-core returns eta_min where olmo.c computes peak - (peak - eta_min) * 1: within
#     1 ulp of peak. cosine: olmo.c rounds the cosine's argument as pi * (c / t) where
#     OLMo-core rounds (pi * c) / t: the arguments differ by <= 2 ulp (< 1e-15 rad), the
#     LR by <= 1e-15 x (peak - eta_min) / 2: checked at 1e-12 x peak.
#  2. A stopped run does not move the schedule: schedule.t_max (steps) and t_max_tokens
#     give the same LR whatever train.max_steps is; wsd ends at its decay_min_lr.
#  3. A real (tiny) training run: the lr of every metrics.jsonl record is the formula's
#     (bitwise, half_cos_with_warmup over a t_max past the run's end); and stage 1's two
#     parts in miniature (a cosine stopped early, resumed with its state under a half cosine).
#  4. Bad schedule input: exit 2 naming the recipe and the key, nothing written.
import json, math, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import check, finish, olmo, tmpdir  # noqa: E402 (after the path)

TMP = tmpdir("schedule_")


# ---- OLMo-core, transcribed (scheduler.py at fa6c5014; warmup_min_lr 0, as every OLMo 3 script) ----
def _linear_warmup(initial_lr, current, warmup, warmup_min_lr=0.0):
    return warmup_min_lr + (initial_lr - warmup_min_lr) * min(current, warmup) / warmup


def _linear_decay(initial_lr, step_from_end, decay, decay_min_lr=0.0):
    return decay_min_lr + (initial_lr - decay_min_lr) * min(step_from_end, decay) / decay


def cos_with_warmup(initial_lr, current, t_max, warmup, alpha_f=0.1):
    eta_min = initial_lr * alpha_f
    if current < warmup:
        return _linear_warmup(initial_lr, current, warmup)
    elif current >= t_max:
        return eta_min
    else:
        current = current - warmup
        t_max = t_max - warmup
        return eta_min + (initial_lr - eta_min) * (1 + math.cos(math.pi * current / t_max)) / 2


def half_cos_with_warmup(initial_lr, current, t_max, warmup, alpha_f=0.1):
    eta_min = initial_lr * alpha_f
    if current < warmup:
        max_lr = eta_min + (initial_lr - eta_min) / 2
        return _linear_warmup(max_lr, current, warmup)
    elif current >= t_max:
        return eta_min
    else:
        current = current - warmup
        t_max = t_max - warmup
        current += t_max
        t_max *= 2
        return eta_min + (initial_lr - eta_min) * (1 + math.cos(math.pi * current / t_max)) / 2


def linear_with_warmup(initial_lr, current, t_max, warmup, alpha_f=0.1):
    eta_min = initial_lr * alpha_f
    if current < warmup:
        return _linear_warmup(initial_lr, current, warmup)
    elif current >= t_max:
        return eta_min
    else:
        current = current - warmup
        t_max = t_max - warmup
        return initial_lr - (initial_lr - eta_min) * (current / t_max)


def wsd(initial_lr, current, t_max, warmup, decay, decay_min_lr=0.0):
    if current <= warmup:
        return _linear_warmup(initial_lr, current, warmup)
    if current >= t_max - decay:
        return _linear_decay(initial_lr, t_max - current, decay, decay_min_lr)
    return initial_lr


def steps_of_tokens(tokens, per_step):   # trainer.py:522-527 from step 0
    return 0 + math.ceil(max(tokens - 0, 0) / per_step)


def lr_at(recipe, steps, *ov):
    p = olmo("info", recipe, *ov, "--lr-at", ",".join(map(str, steps)))
    if p.returncode != 0:
        sys.exit(f"olmo info {recipe} {ov}: exit {p.returncode}: {p.stderr}")
    got = {}
    for line in p.stdout.splitlines():
        if line.startswith("  lr at step "):
            a, b = line[len("  lr at step "):].split(": ")
            got[int(a)] = float(b)
    assert sorted(got) == sorted(steps), (got, steps)
    return got


def compare(name, got, want, tol):
    for s in sorted(got):
        w = want(s)
        t = tol(s, w)
        ok = got[s] == w if t == 0 else abs(got[s] - w) <= t
        check(ok, f"{name} step {s}: olmo {got[s]!r}, OLMo-core {w!r} (tolerance {t:g})")


STEPS = [1, 2000, 597046, 1000000, 1413814]
TPB = 512 * 8192
PEAK1 = 3e-4
# 1. The OLMo 3 7B recipes
t1 = steps_of_tokens(int(5e12), TPB)          # pretrain-1.py:99
t2 = steps_of_tokens(int(7e12), TPB)          # pretrain-2.py:110
w2 = int(5e12) // TPB // 2 + 2000 // 2          # pretrain-2.py:71-72, 86
check((t1, t2, w2) == (1192093, 1668931, 597046), f"t_max / warmup {t1} {t2} {w2}")
p1 = lr_at("configs/olmo3-7b-stage1.yml", STEPS + [t1, t1 + 5])
compare("stage 1 part 1 (cosine)", p1, lambda s: cos_with_warmup(PEAK1, s, t1, 2000), lambda s, w: 1e-12 * PEAK1)
p2 = lr_at("configs/olmo3-7b-stage1-part2.yml", STEPS + [597047, t2, t2 + 5])
compare("stage 1 part 2 (half cosine)", p2, lambda s: half_cos_with_warmup(PEAK1, s, t2, w2), lambda s, w: 0)
LR2 = 0.00020712352850360292                   # midtrain.py:43, long-context.py:39
t3 = steps_of_tokens(100_000_000_000, 2**21)   # midtrain.py:41-42, 105
check(t3 == 47684, f"stage 2 t_max {t3}")
s2 = lr_at("configs/olmo3-7b-stage2.yml", [1, 2, 200, 23842, 47683, 47684])
compare("stage 2 (linear)", s2, lambda s: linear_with_warmup(LR2, s, t3, 0, 0.0), lambda s, w: 0 if s < t3 else 1.2e-16 * LR2)
t4 = steps_of_tokens(50_000_000_000, 65536 * 64)   # OLMo 3 report: 50B tokens (the script says 5e12: docs/reproducing-olmo3.md)
s3 = lr_at("configs/olmo3-7b-stage3.yml", [1, 199, 200, 201, 6000, t4 - 1, t4])
compare("stage 3 (linear)", s3, lambda s: linear_with_warmup(LR2, s, t4, 200, 0.0), lambda s, w: 0 if s < t4 else 1.2e-16 * LR2)
print("7B stage 1, OLMo-core's two parts (part 1 up to step 597,046, part 2 after):")
for s in STEPS:
    v = p1[s] if s <= 597046 else p2[s]
    print(f"  step {s:>8}: lr {v:.17g}")

# 2. The schedule's length is its own: a tiny recipe, any train.max_steps
rec = os.path.join(TMP, "r.yml")
open(rec, "w").write(f"""model: {{preset: olmo3-tiny}}
train: {{seq_len: 32, global_batch: 8, micro_batch: 2, max_steps: 6, run_dir: {TMP}/run}}
optim: {{lr: 0.003}}
schedule: {{warmup_steps: 2}}
data: {{paths: [{TMP}/tok.npy]}}
perf: {{peak_flops: 1e11}}
eval: {{off: true}}
""")
S = list(range(0, 31))
for stop in (6, 12, 40):
    a = lr_at(rec, S, f"train.max_steps={stop}", "schedule.t_max=25")
    b = lr_at(rec, S, f"train.max_steps={stop}", "schedule.t_max_tokens=6145")   # ceil(6145 / 256) = 25
    check(a == b, f"t_max 25 steps vs 6145 tokens differ (max_steps {stop})")
    compare(f"cosine t_max 25, max_steps {stop}", a, lambda s: cos_with_warmup(0.003, s, 25, 2), lambda s, w: 1e-12 * 0.003)
    h = lr_at(rec, S, f"train.max_steps={stop}", "schedule.t_max=25", "schedule.name=half_cos_with_warmup",
              "schedule.warmup_steps=5", "schedule.alpha_f=0.2")
    compare(f"half cosine t_max 25, max_steps {stop}", h, lambda s: half_cos_with_warmup(0.003, s, 25, 5, 0.2), lambda s, w: 0)
w = lr_at(rec, S[1:], "schedule.name=wsd", "schedule.t_max=25", "schedule.decay_steps=7", "schedule.decay_min_lr=1e-4")
compare("wsd decay_min_lr 1e-4", {s: v for s, v in w.items() if s <= 25}, lambda s: wsd(0.003, s, 25, 2, 7, 1e-4), lambda s, v: 0)
check(all(w[s] == 1e-4 for s in w if s >= 25), f"wsd past t_max: {[w[s] for s in w if s >= 25]}")
w0 = lr_at(rec, [25], "schedule.name=wsd", "schedule.t_max=25", "schedule.decay_steps=7")
check(w0[25] == 0.0, f"wsd's default end is decay_min_lr 0 (OLMo-core), got {w0[25]}")

# 3. A real run trains at those LRs: half cosine over 25 steps, the run stops after 6
import random, struct
random.seed(3)
n = 20000
open(os.path.join(TMP, "tok.npy"), "wb").write(struct.pack("<%dI" % n, *[random.randrange(1000) for _ in range(n)]))
env = dict(os.environ, OMP_NUM_THREADS="1")
p = olmo("train", rec, "schedule.name=half_cos_with_warmup", "schedule.t_max=25", "schedule.warmup_steps=3",
         "ckpt.interval=0", env=env)
check(p.returncode == 0, f"train: exit {p.returncode}: {p.stdout[-2000:]} {p.stderr[-2000:]}")
if p.returncode == 0:
    recs = [json.loads(l) for l in open(os.path.join(TMP, "run", "metrics.jsonl"))]
    tr = [r for r in recs if r.get("kind") == "train"]
    check([r["step"] for r in tr] == list(range(1, 7)), f"steps {[r['step'] for r in tr]}")
    for r in tr:
        want = half_cos_with_warmup(0.003, r["step"], 25, 3)
        check(r["lr"] == want, f"run step {r['step']}: lr {r['lr']!r}, OLMo-core {want!r}")

# 3b. Stage 1's two parts in miniature: part 1 a cosine over t_max 20 stopped at step 6, part 2
#     resumes its checkpoint with trainer and optimizer state (train.load_path,
#     load_trainer_state, load_optim) under a half cosine (warmup 20 // 2 + 2 // 2 = 11,
#     t_max 30) to step 12: steps 7..12 continue the count and train at part 2's LRs.
rec1 = [rec, "schedule.t_max=20", f"train.run_dir={TMP}/p1", "ckpt.interval=0"]
rec2 = [rec, "schedule.name=half_cos_with_warmup", "schedule.warmup_steps=11", "schedule.t_max=30", "train.max_steps=12",
        f"train.run_dir={TMP}/p2", f"train.load_path={TMP}/p1", "train.load_trainer_state=true", "train.load_optim=true",
        "ckpt.interval=0"]
p = olmo("train", *rec1, env=env)
check(p.returncode == 0, f"part 1: exit {p.returncode}: {p.stderr[-1500:]}")
p = olmo("train", *rec2, env=env)
check(p.returncode == 0, f"part 2: exit {p.returncode}: {p.stdout[-1500:]} {p.stderr[-1500:]}")
if p.returncode == 0:
    t1r = [json.loads(l) for l in open(os.path.join(TMP, "p1", "metrics.jsonl"))]
    t2r = [json.loads(l) for l in open(os.path.join(TMP, "p2", "metrics.jsonl"))]
    t1r = [r for r in t1r if r.get("kind") == "train"]
    t2r = [r for r in t2r if r.get("kind") == "train"]
    check([r["step"] for r in t1r] == list(range(1, 7)) and [r["step"] for r in t2r] == list(range(7, 13)),
          f"part steps {[r['step'] for r in t1r]} {[r['step'] for r in t2r]}")
    for r in t1r:
        want = cos_with_warmup(0.003, r["step"], 20, 2)
        check(abs(r["lr"] - want) <= 1e-12 * 0.003, f"part 1 step {r['step']}: lr {r['lr']!r}, OLMo-core {want!r}")
    for r in t2r:
        want = half_cos_with_warmup(0.003, r["step"], 30, 11)
        check(r["lr"] == want, f"part 2 step {r['step']}: lr {r['lr']!r}, OLMo-core {want!r}")
    check(t2r[0]["tokens"] == 7 * 256, f"part 2 continues the token count: {t2r[0]['tokens']}")

# 4. bad input: exit 2, the recipe file, the key, what was expected; nothing written
for ov, want in [(["schedule.name=half_cos"], "r.yml: schedule.name must be one of cosine, linear, constant, wsd, half_cos_with_warmup; got 'half_cos'"),
                 (["schedule.t_max=-3"], "r.yml: schedule.t_max must be >= 0 steps"),
                 (["schedule.t_max_tokens=-1"], "r.yml: schedule.t_max_tokens must be >= 0 tokens")]:
    p = olmo("train", rec, f"train.run_dir={TMP}/bad", *ov, env=env)
    check(p.returncode == 2 and want in p.stderr, f"{ov}: exit {p.returncode}, stderr {p.stderr!r}")
    check(not os.path.exists(os.path.join(TMP, "bad")), f"{ov}: wrote {TMP}/bad")
p = olmo("info", rec, "--lr-at", "1,x")
check(p.returncode == 2 and "--lr-at: expected comma-separated steps" in p.stderr, f"--lr-at 1,x: {p.returncode} {p.stderr!r}")

finish("test_schedule", TMP)
