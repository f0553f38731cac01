#!/usr/bin/python3
# test_skip_step.py: the skip-step guard (src/train/skipstep.c) in both rules against
# references written here from their definitions:
#   OlmoCore  OLMo-core's SkipStepOptimizer.get_step_factor (olmo_core/optim/
#             skip_step_optimizer.py at fa6c5014, lines 66-109), fed as its train module
#             feeds it (train_module/transformer/train_module.py 433-441, 514-523: the
#             batch CE, the pre-clip norm only when clipping is on), with torch.std_mean; its
#             history is not in the optimizer's state dict, so a resume empties it.
#   OlmoC     olmo.c's rule as docs/recipes.md ("Skip-step") states it.
# 1. Scripted sequences (random, spikes, NaN/inf before and after the history fills, windows
#    2..5, constant values, a resume mid-window, the norm untested) through build/tests/
#    tool_skipstep: every decision equal to the reference's.
# 2. The effect of an olmo_core skip on m, v and the weights against adamw.py's foreach_adamw_step
#    with step_factor 0 (fp32 torch), and the clip factor against clip_grads_with_norm_.
# 3. Training runs (tiny model, window 8, sigma 1: real skips): each step's logged decision
#    equals the reference fed with that run's logged CE and norm, in both rules, with a
#    resume mid-window, with clipping off, and with a NaN gradient (OLMO_FAULT_NAN_STEP)
#    before and after the history fills; olmo_core lets that NaN reach the weights, olmo_c
#    does not; on 2 ranks (ZeRO-1) the same decisions and bits as on 1.
# 4. Where train.backend=cuda runs (a device; or the emulator: OLMO_BIN=build-emu/olmo
#    CUEMU_DEVICES=1, about 3 minutes): the same checks of both rules on the device.
# Decisions compared exactly, except where the reference's margin sigma*std - (x - mean) is
# nonzero and within 1e-12 of the values' scale: both sides evaluate mean and std in double
# over <= 1025 values (relative rounding <= 1025 * 2^-53 = 1.1e-13 each, different summation
# orders), so there either answer is right; the test prints how many such ties it met.
import atexit, json, math, os, random, shutil, struct, subprocess, sys, tempfile
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("OLMO_BUILD", os.path.join(ROOT, "build"))
BUILD = BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD)
TOOL = os.path.join(BUILD, "tests", "tool_skipstep")
OLMO = os.environ.get("OLMO_BIN", os.path.join(BUILD, "olmo"))
TMP = tempfile.mkdtemp(prefix="skipstep_")
atexit.register(shutil.rmtree, TMP, True)
failures, ties = 0, 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL", what)


def fin(x):
    return math.isfinite(x)


class Decision:
    """A skip decision with its reference margins (None: no comparison was made)."""

    def __init__(self, skipped, margins=()):
        self.skipped, self.margins = skipped, margins

    def tie(self):
        # margin = sigma*std - (x - mean), scale = |x| + |mean| + |sigma*std|
        return any(m != 0 and math.isfinite(m) and abs(m) <= 1e-12 * s for m, s in self.margins)


def within(hist, x, sigma):
    """(x - mean) <= sigma * std of hist, torch.std_mean (Bessel), with the margin."""
    std, mean = torch.std_mean(torch.tensor(hist, dtype=torch.float64))
    std, mean = float(std), float(mean)
    margin = sigma * std - (x - mean)
    return (x - mean) <= sigma * std, (margin, abs(x) + abs(mean) + abs(sigma * std))


class OlmoCore:
    def __init__(self, window, sigma, clipping=True):
        self.w, self.sigma, self.clipping = window, sigma, clipping
        self.losses, self.norms = [], []

    def resume(self):
        self.losses, self.norms = [], []

    def step(self, ce, loss, norm):
        self.losses = (self.losses + [ce])[-(self.w + 1):]
        if self.clipping:
            self.norms = (self.norms + [norm])[-(self.w + 1):]
        if len(self.losses) < max(2, self.w // 2):
            return Decision(False)
        ok, m1 = within(self.losses[:-1], ce, self.sigma)
        if not self.norms:
            return Decision(not ok, (m1,))
        ok2, m2 = within(self.norms[:-1], norm, self.sigma)
        return Decision(not (ok and ok2), (m1, m2))


class OlmoC:
    def __init__(self, window, sigma, enabled=True):
        self.w, self.sigma, self.enabled = window, sigma, enabled
        self.hist = []

    def resume(self):
        pass   # kept in train_state.json

    def step(self, ce, loss, norm):
        if not (fin(loss) and fin(norm)):
            return Decision(True)
        if not self.enabled:
            return Decision(False)
        if not fin(ce):
            return Decision(True)
        self.hist = (self.hist + [(ce, norm)])[-(self.w + 1):]
        earlier = self.hist[:-1]
        if len(earlier) < max(2, self.w // 2 - 1):
            return Decision(False)
        ok, m1 = within([c for c, _ in earlier], ce, self.sigma)
        ok2, m2 = within([g for _, g in earlier], norm, self.sigma)
        return Decision(not (ok and ok2), (m1, m2))


def agree(c_skipped, ref, what):
    global ties
    if c_skipped == ref.skipped:
        return True
    if ref.tie():
        ties += 1
        return True
    check(False, f"{what}: C skipped={c_skipped}, reference {ref.skipped} (margins {ref.margins})")
    return False


# ---- 1. scripted sequences through the tool -------------------------------------------------
class Tool:
    def __init__(self):
        self.p = subprocess.Popen([TOOL], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().split()


tool = Tool()


def run_script(name, rule, window, sigma, seq, clipping=True, enabled=True):
    """seq: (ce, loss, norm) triples or the string 'resume'. Returns the C decisions."""
    assert tool.ask(f"init {window} {sigma!r} {rule} {int(clipping)}") == ["ok"]
    ref = OlmoCore(window, sigma, clipping) if rule == "olmo_core" else OlmoC(window, sigma, enabled)
    out = []
    for i, e in enumerate(seq):
        if e == "resume":
            tool.ask("resume")
            ref.resume()
            continue
        ce, loss, norm = e
        c = tool.ask(f"step {ce!r} {loss!r} {norm!r} {int(enabled)}")[0] == "1"
        agree(c, ref.step(ce, loss, norm), f"{name} [{rule} w={window} sigma={sigma}] entry {i} {e}")
        out.append(c)
    return out


def noisy(n, rng, spikes=(), bad=()):
    seq = []
    for i in range(n):
        ce = 3.0 - 0.01 * i + rng.gauss(0, 0.02)
        norm = abs(1.0 + rng.gauss(0, 0.1))
        if i in spikes:
            ce += 1.0 if i % 2 else 0.0
            norm += 0.0 if i % 2 else 5.0
        if i in bad:
            ce, norm = bad[i]
        seq.append((ce, ce + 1e-4 * ce * ce, norm))
    return seq


rng = random.Random(35)
nan, inf = float("nan"), float("inf")
cases = []
for w in (2, 3, 4, 5, 6, 7, 8, 16, 128):
    cases.append((f"noisy w={w}", w, 6.0, noisy(3 * w + 20, rng, spikes={w + 3, 2 * w + 5, 2 * w + 6})))
    cases.append((f"sigma 1 w={w}", w, 1.0, noisy(2 * w + 20, rng)))
    cases.append((f"NaN early w={w}", w, 6.0, noisy(2 * w + 10, rng, bad={1: (nan, nan)})))
    cases.append((f"NaN/inf late w={w}", w, 6.0,
                  noisy(3 * w + 12, rng, bad={w + 2: (2.5, nan), w + 4: (inf, 1.0), 2 * w + 3: (nan, inf)})))
    seq = noisy(3 * w + 10, rng, spikes={2 * w})
    cases.append((f"resume mid-window w={w}", w, 6.0, seq[:w + 1] + ["resume"] + seq[w + 1:]))
cases.append(("constant", 8, 6.0, [(2.0, 2.0, 0.5)] * 12 + [(2.0, 2.0, 0.75)] + [(2.0, 2.0, 0.5)] * 3))
cases.append(("w=2 edge", 2, 6.0, [(1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (3.0, 3.0, 1.0)]))
# CE against CE + z: a z-loss spike alone (the CE steady) is no spike to either rule.
zs = noisy(40, rng)
zs[30] = (zs[30][0], zs[30][0] + 50.0, zs[30][2])
cases.append(("z-loss spike", 8, 6.0, zs))
n_dec = 0
for name, w, sigma, seq in cases:
    for rule in ("olmo_core", "olmo_c"):
        n_dec += len(run_script(name, rule, w, sigma, seq))
    n_dec += len(run_script(name + ", norm untested", "olmo_core", w, sigma, seq, clipping=False))
    n_dec += len(run_script(name + ", skip_step off", "olmo_c", w, sigma, seq, enabled=False))

# Spot checks of the stated rules themselves (the reference could share a misreading).
d = run_script("one earlier value", "olmo_core", 4, 6.0, [(1.0, 1.0, 1.0), (0.5, 0.5, 0.5), (0.4, 0.4, 0.4)])
check(d == [False, True, False], f"olmo_core w=4: the one-earlier-value step is skipped (NaN std): {d}")
d = run_script("one earlier value", "olmo_c", 4, 6.0, [(1.0, 1.0, 1.0), (1.5, 1.5, 1.5), (9.0, 9.0, 1.0)])
check(d == [False, False, True], f"olmo_c w=4: no test on one earlier value, then two: {d}")
d = run_script("NaN in window", "olmo_core", 8, 6.0, [(1.0 + 0.01 * i, 0, 1.0) for i in range(6)] + [(nan, 0, nan)] +
               [(1.0, 0, 1.0)] * 10)
check(d == [False] * 6 + [True] * 9 + [False] * 2, f"olmo_core: a NaN skips while in the window: {d}")
d = run_script("NaN not kept", "olmo_c", 8, 6.0, [(1.0 + 0.01 * i, 1.0, 1.0) for i in range(6)] + [(nan, nan, nan)] +
               [(1.0 + 0.01 * i, 1.0, 1.0) for i in range(6)])
check(d == [False] * 6 + [True] + [False] * 6, f"olmo_c: a NaN is skipped and leaves no trace: {d}")
d = run_script("NaN before the history fills", "olmo_core", 8, 6.0, [(nan, 0, nan), (1.0, 0, 1.0)])
check(d == [False, False], f"olmo_core: a NaN before the history fills is applied: {d}")
print(f"ok: {n_dec} scripted decisions in {len(cases)} sequences x 4 modes equal the references")


# ---- 2. the effect of a skip on the optimizer state, the clip factor --------------------------
def olmo_core_adamw(p, g, m, v, step, f, lr=3e-4, b1=0.9, b2=0.95, eps=1e-8, wd=0.1):
    """adamw.py foreach_adamw_step (lines 50-102, the config's default foreach) on fp32 tensors."""
    p.mul_(1 - f * (lr * wd))
    w1 = f * (1 - b1)
    m.mul_(1.0 - w1)
    m.add_(g * w1)
    w2 = f * (1 - b2)
    v.mul_(1.0 - w2)
    v.add_(g * g * w2)
    bc1 = 1 - torch.pow(torch.tensor(b1), step + 1)
    bc2 = 1 - torch.pow(torch.tensor(b2), step + 1)
    denom = v.sqrt() / bc2.sqrt() + eps
    p.add_((m / denom) * (-f * (lr / bc1)))
    return step + f


def parse(t):
    return float("nan") if "nan" in t else float.fromhex(t)


n = 64
for trial, (gnorm, bad) in enumerate([(nan, {3: nan}), (inf, {5: inf, 9: -inf}), (nan, {i: nan for i in range(n)}),
                                      (nan, {0: nan, 7: inf}), (1.25, {})]):
    g = torch.tensor([rng.gauss(0, 1) for _ in range(n)], dtype=torch.float32)
    for i, x in bad.items():
        g[i] = x
    m = torch.tensor([rng.gauss(0, 0.1) for _ in range(n)], dtype=torch.float32)
    v = torch.tensor([rng.random() * 0.01 for _ in range(n)], dtype=torch.float32)
    p = torch.tensor([rng.gauss(0, 0.02) for _ in range(n)], dtype=torch.float32)
    m[1], p[2] = 0.0, 0.0
    args = " ".join(repr(float(x)) for t in (g, m, v, p) for x in t)
    for rule in ("olmo_core", "olmo_c"):
        out = tool.ask(f"zero {rule} {gnorm!r} {n} {args}")
        changed, vals = out[0] == "1", [parse(x) for x in out[1:]]
        cm, cv, cp = (torch.tensor(vals[k * n:(k + 1) * n], dtype=torch.float32) for k in range(3))
        if rule == "olmo_c":
            check(not changed and torch.equal(cm, m) and torch.equal(cv, v) and torch.equal(cp, p),
                  f"zero-factor trial {trial}: olmo_c touched the state")
            continue
        rm, rv, rp = m.clone(), v.clone(), p.clone()
        step = olmo_core_adamw(rp, g, rm, rv, torch.tensor(7.0), torch.tensor(0.0))
        check(float(step) == 7.0, "OLMo-core: a skipped step leaves Adam's step count")
        check(changed == (not math.isfinite(gnorm)), f"zero-factor trial {trial}: returned {changed}")
        for name, c, r in (("m", cm, rm), ("v", cv, rv), ("p", cp, rp)):
            # equal values (a signed zero may differ: +-0 added), NaN exactly where OLMo-core's is
            same = torch.equal(torch.isnan(c), torch.isnan(r)) and torch.equal(c[~torch.isnan(c)], r[~torch.isnan(r)])
            check(same, f"zero-factor trial {trial}: {name} differs from adamw.py with step_factor 0")
        check(int(torch.isnan(cp).sum()) == len(bad), f"zero-factor trial {trial}: NaN count {int(torch.isnan(cp).sum())}")
for norm, mx in ((nan, 1.0), (inf, 1.0), (0.5, 1.0), (3.0, 1.0), (nan, 0.0), (2.0, 0.0)):
    for rule in ("olmo_core", "olmo_c"):
        c = parse(tool.ask(f"clip {rule} {norm!r} {mx!r}")[0])
        if mx > 0 and (rule == "olmo_core" or not math.isnan(norm)):   # clip_grads_with_norm_ (torch)
            ref = float(torch.clamp(torch.tensor(mx, dtype=torch.float64) / (norm + 1e-6), max=1.0))
        else:   # clipping off, or olmo_c: a NaN norm is not a scale
            ref = 1.0
        check(c == ref or (math.isnan(c) and math.isnan(ref)), f"clip {rule} norm {norm} max {mx}: {c} vs {ref}")
print("ok: an olmo_core skip leaves m, v, p as adamw.py's step_factor 0 (NaN where the gradient is not finite); "
      "clip factor as torch's")
tool.p.stdin.close()
tool.p.wait()

# ---- 3. training runs -------------------------------------------------------------------------
tok = os.path.join(TMP, "tok.npy")
r2 = random.Random(7)
open(tok, "wb").write(struct.pack("<60000I", *[r2.randrange(1000) for _ in range(60000)]))
recipe = os.path.join(TMP, "r.yml")
open(recipe, "w").write(f"""model: {{preset: olmo3-tiny}}
train: {{seq_len: 32, global_batch: 8, micro_batch: 2, max_steps: 40, z_loss: 0.05}}
optim: {{lr: 0.003, skip_step_window: 8, skip_step_sigma: 1}}
schedule: {{warmup_steps: 2}}
data: {{paths: [{tok}]}}
perf: {{peak_flops: 1e11}}
ckpt: {{interval: 100}}
eval: {{off: true}}
""")
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def train(name, *over, env=None, want_rc=0):
    d = os.path.join(TMP, name)
    r = subprocess.run([OLMO, "train", recipe, f"train.run_dir={d}", *over], capture_output=True, text=True,
                       env=dict(ENV, **(env or {})))
    check(want_rc is None or r.returncode == want_rc, f"{name}: exit {r.returncode}, want {want_rc}: {r.stderr[-400:]}")
    return d if want_rc is not None else r.returncode


def records(d):
    t = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    t = [x for x in t if x.get("kind") == "train"]
    steps = [x["step"] for x in t]
    check(steps == list(range(1, len(t) + 1)), f"{d}: steps {steps}")
    val = lambda x: float("nan") if x is None else x   # a non-finite value is logged as null
    return [(x["step"], val(x["ce"]), val(x["loss"]), val(x["grad_norm"]), bool(x["skipped"])) for x in t]


def replay(d, ref, resume_after=None, key=1):
    """Each logged decision against ref fed the logged (ce, loss, norm); key 2 feeds loss as ce."""
    rec, got, want = records(d), [], []
    for step, ce, loss, norm, skipped in rec:
        x = (ce, loss, norm) if key == 1 else (loss, loss, norm)
        r = ref.step(*x)
        if key == 1:
            agree(skipped, r, f"{os.path.basename(d)} step {step}")
        got.append(skipped)
        want.append(r.skipped)
        if step == resume_after:
            ref.resume()
    return got, want


def nonfinite(path):
    b = open(path, "rb").read()
    hlen = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + hlen])
    bad = total = 0
    for k, e in h.items():
        if k == "__metadata__" or e["dtype"] != "F32":
            continue
        a, z = e["data_offsets"]
        t = torch.frombuffer(bytearray(b[8 + hlen + a:8 + hlen + z]), dtype=torch.float32)
        bad += int((~torch.isfinite(t)).sum())
        total += t.numel()
    return bad, total


def last_ckpt(d):
    c = os.path.join(d, "checkpoints")
    return os.path.join(c, sorted(x for x in os.listdir(c) if x.startswith("step-"))[-1])


core = train("core", "optim.skip_step_compat=olmo_core")
got, _ = replay(core, OlmoCore(8, 1.0))
olmoc = train("olmoc")
got_c, _ = replay(olmoc, OlmoC(8, 1.0))
check(sum(got) >= 3 and sum(got_c) >= 3, f"too few skips to test anything: {sum(got)}, {sum(got_c)}")
# The same logs judged on CE + z: some decision changes, so step 3's agreement tests the CE.
_, on_loss = replay(core, OlmoCore(8, 1.0), key=2)
_, on_loss_c = replay(olmoc, OlmoC(8, 1.0), key=2)
check(on_loss != got or on_loss_c != got_c, "CE + z gives the same decisions: the CE test is not discriminated")
print(f"ok: training runs skip where the references say: olmo_core {sum(got)}/40, olmo_c {sum(got_c)}/40 steps")

# a resume mid-window: olmo_core restarts its history, olmo_c continues it (same bits as straight)
for rule, ref, straight in (("olmo_core", OlmoCore(8, 1.0), core), ("olmo_c", OlmoC(8, 1.0), olmoc)):
    d = train(f"resume-{rule}", f"optim.skip_step_compat={rule}", "train.stop_at=13", "ckpt.interval=13")
    train(f"resume-{rule}", f"optim.skip_step_compat={rule}", "ckpt.interval=13")
    replay(d, ref, resume_after=13)
    if rule == "olmo_c":
        same = open(os.path.join(d, "model.safetensors"), "rb").read() == \
            open(os.path.join(straight, "model.safetensors"), "rb").read()
        check(same, "olmo_c: a resume mid-window changes the final weights")
print("ok: resume mid-window: olmo_core's history restarts, olmo_c's continues (final weights as straight through)")

d = train("noclip", "optim.skip_step_compat=olmo_core", "optim.max_grad_norm=0")
replay(d, OlmoCore(8, 1.0, clipping=False))
print("ok: olmo_core with clipping off tests the CE alone")

# a NaN gradient (finite loss) after and before the history fills (need 4 values at window 8)
for at in (12, 2):
    d = train(f"nan-core-{at}", "optim.skip_step_compat=olmo_core", "optim.skip_step_sigma=6",
              env={"OLMO_FAULT_NAN_STEP": str(at)}, want_rc=1)
    got, _ = replay(d, OlmoCore(8, 6.0))
    rec = records(d)
    check(got[at - 1] == (at >= 4), f"olmo_core NaN at {at}: skipped {got[at - 1]}")
    check(all(not fin(c) for _, c, _, _, _ in rec[at:]), f"olmo_core NaN at {at}: later losses not all NaN")
    ck = last_ckpt(d)
    for f in ("model.safetensors", "optim.safetensors"):
        bad, total = nonfinite(os.path.join(ck, f))
        check(bad == total, f"olmo_core NaN at {at}: {f} has {bad}/{total} non-finite (OLMo-core: all NaN)")
    d = train(f"nan-c-{at}", "optim.skip_step_sigma=6", env={"OLMO_FAULT_NAN_STEP": str(at)})
    got, _ = replay(d, OlmoC(8, 6.0))
    check([i + 1 for i, s in enumerate(got) if s] == [at], f"olmo_c NaN at {at}: skipped {got}")
    for p in (os.path.join(d, "model.safetensors"), os.path.join(last_ckpt(d), "optim.safetensors")):
        check(nonfinite(p)[0] == 0, f"olmo_c NaN at {at}: non-finite values in {p}")
# data parallel (2 ranks, ZeRO-1): the same decisions and bits as 1 rank (2 micro-batches per
# rank: the step is bitwise the single-process one, step.h); the NaN poisons every shard
MPI = shutil.which("mpirun")
if MPI:
    def mtrain(name, *over, env=None, want_rc=0):
        d = os.path.join(TMP, name)
        r = subprocess.run([MPI, "--oversubscribe", "--allow-run-as-root", "-np", "2", "-x", "OMP_NUM_THREADS=1",
                            *sum((["-x", k] for k in (env or {})), []), OLMO, "train", recipe, f"train.run_dir={d}",
                            *over], capture_output=True, text=True,
                           env=dict(ENV, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **(env or {})))
        check(r.returncode == want_rc, f"{name}: exit {r.returncode}, want {want_rc}: {r.stderr[-400:]}")
        return d
    d = mtrain("core-w2", "optim.skip_step_compat=olmo_core")
    check([x[4] for x in records(d)] == [x[4] for x in records(core)], "olmo_core W=2: other decisions than W=1")
    check(open(os.path.join(d, "model.safetensors"), "rb").read() == open(os.path.join(core, "model.safetensors"), "rb").read(),
          "olmo_core W=2: final weights differ from W=1")
    d = mtrain("nan-core-w2", "optim.skip_step_compat=olmo_core", "optim.skip_step_sigma=6",
               env={"OLMO_FAULT_NAN_STEP": "12"}, want_rc=1)
    replay(d, OlmoCore(8, 6.0))
    for f in ("model.safetensors", "optim.safetensors"):
        bad, total = nonfinite(os.path.join(last_ckpt(d), f))
        check(bad == total, f"olmo_core W=2 NaN at 12: {f} has {bad}/{total} non-finite")
    print("ok: 2 ranks: olmo_core's decisions and bits as 1 rank; a NaN poisons every shard")
else:
    print("note: mpirun missing: the 2-rank cases skipped")
print("ok: a NaN gradient: olmo_core applies it before the history fills, poisons m, v and the weights when "
      "skipping it, then skips; olmo_c skips that step only and stays finite")

# 4. train.backend=cuda where it runs (a device, or OLMO_BIN=build-emu/olmo under CUEMU_DEVICES=1):
# the same rules on the device's state (the bf16 compute copy refreshed from the NaN master)
if train("cuda-probe", "train.backend=cuda", "train.max_steps=1", want_rc=None) == 0:
    d = train("cuda-core", "train.backend=cuda", "optim.skip_step_compat=olmo_core", "train.max_steps=24")
    got, _ = replay(d, OlmoCore(8, 1.0))
    check(sum(got) >= 2, f"cuda olmo_core: {sum(got)} skips, too few to test")
    d = train("cuda-nan-core", "train.backend=cuda", "optim.skip_step_compat=olmo_core", "optim.skip_step_sigma=6",
              env={"OLMO_FAULT_NAN_STEP": "12"}, want_rc=1)
    replay(d, OlmoCore(8, 6.0))
    for f in ("model.safetensors", "optim.safetensors"):
        bad, total = nonfinite(os.path.join(last_ckpt(d), f))
        check(bad == total, f"cuda olmo_core NaN at 12: {f} has {bad}/{total} non-finite")
    d = train("cuda-nan-c", "train.backend=cuda", "optim.skip_step_sigma=6", "train.max_steps=16",
              env={"OLMO_FAULT_NAN_STEP": "12"})
    got, _ = replay(d, OlmoC(8, 6.0))
    check([i + 1 for i, x in enumerate(got) if x] == [12], f"cuda olmo_c NaN at 12: skipped {got}")
    check(nonfinite(os.path.join(d, "model.safetensors"))[0] == 0, "cuda olmo_c NaN at 12: non-finite weights")
    print("ok: train.backend=cuda: both rules' decisions as the references, olmo_core's NaN in m, v and weights")
else:
    print("note: train.backend=cuda does not run here (no device): the CUDA cases skipped")

print(f"{ties} ties within rounding")
if failures:
    print(f"{failures} failures")
    sys.exit(1)
print("all skip-step checks passed")
