#!/usr/bin/python3
# test_loss_norm.py: train.loss_norm (src/train/step.c) against a float64 computation with the
# PyTorch reference (tests/ref/olmo_ref.py) on packed instances (data.packing: packed, the
# oracle tests/ref/packing_oracle.py), whose padding gives the ranks different target counts.
# OLMo-core (train_module.py:354-408 at fa6c5014) divides each rank's loss by that rank's
# own count (batch_num_tokens_for_loss) and averages the gradients over ranks:
#     loss = 1/W sum_r (sum_{i in r} ce_i + z_i) / N_r
# where olmo.c's global rule is sum_i (ce_i + z_i) / sum_r N_r. One step at W = 2 from known
# weights: the reported ce and grad_norm equal the reference of the rule in force (auto =
# rank with packed data; global when asked) within the parity tolerance for scalars (1e-5
# relative, tests/ref/README.md: an fp32 implementation against float64), and the two rules'
# references differ by more than 10x that (measured: 2.3e-4 in ce, 9.4e-3 in grad_norm), so
# the test tells them apart. At W = 1 the rules
# are the same: the final weights are bitwise equal. The packing's counts reach
# metrics.jsonl and `olmo report`.
import json, os, subprocess, sys
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import lib  # noqa: E402
import olmo_ref as ref  # noqa: E402
import packing_oracle as po  # noqa: E402
import safetensors_io as st  # noqa: E402
from lib import check, finish  # noqa: E402

TMP = lib.tmpdir("loss_norm_")
EOS, PAD, T, GB, SEED, Z = 998, 999, 64, 4, 34521, 1e-5
TOL = 1e-5   # check_parity.py's "scalar" tolerance

# Documents of very different lengths: instances with little and much padding.
rng = np.random.default_rng(3)
paths = []
for f in range(2):
    parts = []
    for L in rng.choice([3, 7, 20, 33, 50, 64], size=14):
        parts += [rng.integers(0, EOS, L - 1), [EOS]]
    p = os.path.join(TMP, f"f{f}.npy")
    np.concatenate(parts).astype("<u4").tofile(p)
    paths.append(p)

cfg = ref.Config(dict(ref.TINY, seq_len=T, eos_id=EOS, document_mask=True))
P = ref.init_params(cfg, seed=5)
for n in P:   # larger weights: per-token losses that differ between instances (at init they are all ~ln V)
    if not ref.is_norm(n):
        P[n] = P[n] * 5.0
init = os.path.join(TMP, "init.safetensors")
st.write(init, {n: t.numpy() for n, t in P.items()})


def recipe(name, train_extra=""):
    p = os.path.join(TMP, name + ".yml")
    with open(p, "w") as f:
        f.write("model: {preset: olmo3-tiny}\n"
                f"train: {{seq_len: {T}, global_batch: {GB}, micro_batch: 1, max_steps: 1, z_loss: {Z}, "
                f"run_dir: {TMP}/{name}, load_path: {init}, log_every: 1{train_extra}}}\n"
                f"data:\n  paths: [{', '.join(paths)}]\n  packing: packed\n  eos_id: {EOS}\n  pad_id: {PAD}\n"
                f"  document_mask: true\n  seed: {SEED}\neval: {{off: true}}\n")
    return p


def train(name, world, train_extra=""):
    """Step 1's metrics record of a run at `world` ranks."""
    cmd = [lib.OLMO, "train", recipe(name, train_extra)]
    if world > 1:
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(world), "-x", "OMP_NUM_THREADS=1"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=lib.ROOT)
    check(p.returncode == 0, f"{name}: exit {p.returncode}: {p.stderr[-2000:]}")
    if p.returncode:
        return {}
    rows = [json.loads(l) for l in open(os.path.join(TMP, name, "metrics.jsonl"))]
    return next((r for r in rows if r.get("step") == 1 and "ce" in r), {})


# The first global batch as the loader serves it: order positions 0..GB-1, rank r takes a block.
ds = po.build(paths, T, EOS, PAD)
order = po.global_order(len(ds["instances"]), SEED, 1)[:GB]
ids = torch.tensor(np.stack([ds["instances"][i]["ids"] for i in order]), dtype=torch.long)
real = [T - ds["instances"][i]["n_pad"] for i in order]
labels = torch.full((GB, T), ref.IGNORE, dtype=torch.long)
for b in range(GB):   # get_labels: a target only where the next token is no padding
    labels[b, :real[b] - 1] = ids[b, 1:real[b]]


def reference(world, per_rank):
    P64 = {n: t.to(torch.float64).requires_grad_(True) for n, t in P.items()}
    logits = ref.forward(P64, cfg, ids)
    per = GB // world
    counts = [int((labels[r * per:(r + 1) * per] != ref.IGNORE).sum()) for r in range(world)]
    loss = ce = 0
    for r in range(world):
        sl = slice(r * per, (r + 1) * per)
        denom = world * counts[r] if per_rank else sum(counts)
        l, c, _ = ref.loss_sums(logits[sl], labels[sl], Z, denom)
        loss, ce = loss + l, ce + c
    loss.backward()
    gn = float(torch.sqrt(sum((p.grad * p.grad).sum() for p in P64.values())))
    return float(ce), gn, counts


rank_ce, rank_gn, counts = reference(2, True)
glob_ce, glob_gn, _ = reference(2, False)
check(counts[0] != counts[1], f"the ranks' target counts should differ: {counts}")
check(abs(rank_ce - glob_ce) > 10 * TOL * abs(glob_ce), f"rules too close to tell apart: ce {rank_ce} vs {glob_ce}")
check(abs(rank_gn - glob_gn) > 10 * TOL * abs(glob_gn), f"rules too close to tell apart: grad_norm {rank_gn} vs {glob_gn}")
m_auto = train("w2-auto", 2)
m_glob = train("w2-global", 2, ", loss_norm: global")
for name, m, want_ce, want_gn in [("rank (auto)", m_auto, rank_ce, rank_gn), ("global", m_glob, glob_ce, glob_gn)]:
    ce, gn = m.get("ce", float("nan")), m.get("grad_norm", float("nan"))
    check(abs(ce - want_ce) <= TOL * abs(want_ce), f"{name}: ce {ce} vs reference {want_ce}")
    check(abs(gn - want_gn) <= TOL * abs(want_gn), f"{name}: grad_norm {gn} vs reference {want_gn}")
    print(f"W=2 {name}: ce {ce:.9f} (reference {want_ce:.9f}, rel {abs(ce - want_ce) / abs(want_ce):.1e}), "
          f"grad_norm {gn:.9f} (reference {want_gn:.9f}, rel {abs(gn - want_gn) / abs(want_gn):.1e})")
print(f"target counts per rank {counts}; rank vs global rule: ce {rank_ce:.9f} vs {glob_ce:.9f}")

# W = 1: the rules coincide, bit for bit
train("w1-auto", 1)
train("w1-global", 1, ", loss_norm: global")
a, b = (open(os.path.join(TMP, n, "model.safetensors"), "rb").read() for n in ("w1-auto", "w1-global"))
check(a == b, "W=1: rank and global normalisation give different weights")

# The packing's counts reach metrics.jsonl and the report (all documents here fit: kept whole)
rows = [json.loads(l) for l in open(os.path.join(TMP, "w1-auto", "metrics.jsonl"))]
last = [r for r in rows if "loader_docs_whole" in r][-1]
n_docs = sum(len(x["bin_lengths"]) for x in ds["instances"])
check((last["loader_docs_whole"], last["loader_docs_fragmented"], last["loader_docs_truncated"],
       last["loader_tokens_dropped"]) == (n_docs, 0, 0, 0), f"metrics packing counts {last}")
pad = sum(ds["instances"][i]["n_pad"] for i in order) / (GB * T)
check(abs(last["loader_padding_frac"] - pad) < 1e-12, f"padding_frac {last['loader_padding_frac']} vs {pad}")
html = os.path.join(TMP, "r.html")
p = subprocess.run([lib.OLMO, "report", os.path.join(TMP, "w1-auto"), "-o", html], capture_output=True, text=True)
check(p.returncode == 0 and f"packed: {n_docs} documents kept whole, 0 fragmented, 0 truncated, 0 tokens dropped"
      in open(html).read(), f"report: {p.returncode} {p.stderr[-500:]}")
finish("test_loss_norm", TMP)
