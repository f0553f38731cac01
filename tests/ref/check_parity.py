#!/usr/bin/python3
"""Compare a parity dump (written by build/tests/tool_parity_dump DUMPDIR, or by
olmo_ref.py --write-dump) against the PyTorch reference.

  /usr/bin/python3 tests/ref/check_parity.py DUMPDIR [--threads N] [--all] [--tol-scale X] [--bf16]

The reference loads config.json + init.safetensors (fp32 values, widened exactly to
float64) and checks every training step k = 1..steps on batch.safetensors from the C
state before it (init for k = 1, else steps.safetensors' step<k-1> parameters and AdamW
moments): the step's logits (k = 1), gradient, loss parts, grad norm and lr, and the
parameters, m and v after it:
  tensors (logits, gradients): err = max|c - ref| / max|ref|  (per tensor)
  parameters, m, v: per element |c - ref| <= tol * max|ref| + the step's first-order band
  scalars (loss, ce, z_loss, grad_norm, lr per step): err = |c - ref| / |ref|
final.safetensors must equal the last step's parameters. Exit 0 if every comparison is
within tolerance (and no tensor is missing, extra or of the wrong shape), 1 otherwise. See
tests/ref/README.md for the tolerances and why.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import olmo_ref  # noqa: E402
import safetensors_io as st  # noqa: E402

# Relative-to-max tolerances for an fp32 implementation against the float64 reference.
TOL = {
    "logits": 1e-5,      # forward only: fp32 rounding of matmuls/norms/softmax
    "scalar": 1e-5,      # loss, ce, z_loss, grad_norm (relative to |ref|)
    "lr": 1e-6,          # pure schedule arithmetic; fp32 storage alone is 6e-8
    "grad": 1e-5,        # step-0 gradient of every parameter (before clipping)
    "final": 1e-5,       # parameters after `steps` AdamW updates
}
# --bf16: a dump of the CUDA backend's bf16 mode (tool_parity_dump backend=cuda
# precision=bf16): bf16 GEMM operands (unit roundoff 2^-9 = 2e-3 each), fp32 accumulation,
# residual stream, logits and optimizer. The bounds test_cuda states for the same mode
# against the fp32 CPU (docs/cuda.md, "Tests"): logits 3e-2, per-tensor gradients 1.5e-1,
# losses 2e-2, grad norm 5e-2; the parameters, m and v after a step then get the AdamW band
# of a 1.5e-1 gradient error (at most 2 lr a parameter: the Adam band test_cuda checks). The
# schedule is plain fp32 arithmetic in either mode (1e-6), and so is AdamW's own rounding.
TOL_BF16 = {"logits": 3e-2, "scalar": 2e-2, "grad_norm": 5e-2, "lr": 1e-6, "grad": 1.5e-1, "final": 1e-5}


def rel_err(c, r):
    c = np.asarray(c, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    d = np.abs(c - r)
    mad = float(d.max()) if d.size else 0.0
    scale = float(np.abs(r).max()) if r.size else 0.0
    if not np.all(np.isfinite(c)):
        return float("inf"), float("inf")
    if scale == 0.0:
        return mad, (0.0 if mad == 0.0 else float("inf"))
    return mad, mad / scale


STATE_KINDS = ("grad", "param", "m", "v")  # steps.safetensors: step<k>.<kind>.<name>


def check_step(cfg, k, P, moments, ids, labels, tol):
    """Step k (from 1) by the float64 reference from parameters P and, for k > 1, AdamW
    moments {name: (m, v)} after k-1 steps. Returns the reference's logits (k = 1), pre-clip
    gradients, metrics, parameters and moments after the step, and per element the
    allowance of each: params tol * max|ref| + the AdamW band of this one step (the
    gradient tolerance, plus the norm's on a clipped step, through clip + AdamW); m and v
    the same perturbation delta through their recursions."""
    tr = olmo_ref.Trainer(cfg, P, torch.float64, band_rho=tol["grad"])
    tr.band_rho_clip = tol.get("grad_norm", tol["scalar"])
    if k > 1:
        tr.set_state(k - 1, {n: mv[0] for n, mv in moments.items()}, {n: mv[1] for n, mv in moments.items()})
    loss, ce, z, logits = tr.accumulate(ids[k - 1], labels[k - 1], keep_logits=(k == 1))
    grads = tr.grads()
    norm, lr = tr.update()
    b1, b2 = cfg.beta1, cfg.beta2
    out = {"logits": logits, "grad": grads, "param": tr.params(), "m": {}, "v": {}, "allow": {},
           "metrics": {"loss": loss, "ce": ce, "z_loss": z, "grad_norm": norm, "lr": lr}}
    for n in tr.names:
        m, v = tr.moments()[n]
        d = tr.delta[n]
        g = tr.P[n].grad.abs()  # clipped
        out["m"][n], out["v"][n] = m, v
        out["allow"][n] = {"param": tol["final"] * float(out["param"][n].abs().max()) + tr.band[n],
                           "m": tol["final"] * float(m.abs().max()) + (1 - b1) * d,
                           "v": tol["final"] * float(v.abs().max()) + (1 - b2) * (2 * g * d + d * d)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dumpdir")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--all", action="store_true", help="print every row, not only the worst per group + failures")
    ap.add_argument("--tol-scale", type=float, default=1.0,
                    help="multiply every tolerance (diagnostics only; the test uses 1)")
    ap.add_argument("--bf16", action="store_true", help="the bf16 tolerances (TOL_BF16: a CUDA bf16-mode dump)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    d = a.dumpdir
    tol = {k: v * a.tol_scale for k, v in (TOL_BF16 if a.bf16 else TOL).items()}

    cfg, init, batch = olmo_ref.load_dump_inputs(d)
    step0 = st.read(os.path.join(d, "step0.safetensors"))
    final = st.read(os.path.join(d, "final.safetensors"))
    steps = st.read(os.path.join(d, "steps.safetensors"))
    with open(os.path.join(d, "metrics.json")) as f:
        metrics = json.load(f)

    shapes = olmo_ref.param_shapes(cfg)
    problems = []
    step_names = {f"step{k}.{kind}.{n}": s for k in range(1, cfg.steps + 1) for kind in STATE_KINDS
                  for n, s in shapes.items()}
    for fname, tens, prefix in (("init", init, ""), ("final", final, ""), ("step0", step0, "grad."),
                                ("steps", steps, None)):
        want = {prefix + n: s for n, s in shapes.items()} if prefix is not None else step_names
        if fname == "step0":
            want["logits"] = (cfg.global_batch, cfg.seq_len, cfg.padded_vocab)
        for n, s in want.items():
            if n not in tens:
                problems.append(f"{fname}.safetensors: missing {n}")
            elif tuple(tens[n].shape) != tuple(s):
                problems.append(f"{fname}.safetensors: {n} shape {tuple(tens[n].shape)} != {tuple(s)}")
        for n in tens:
            if n not in want:
                problems.append(f"{fname}.safetensors: unexpected tensor {n}")
    S, G, T = cfg.steps, cfg.global_batch, cfg.seq_len
    for n in ("input_ids", "labels"):
        if n not in batch or tuple(batch[n].shape) != (S, G, T):
            problems.append(f"batch.safetensors: {n} missing or not shape {(S, G, T)}")
    if len(metrics) != S:
        problems.append(f"metrics.json: {len(metrics)} entries, want {S}")
    if not problems:  # the files must tell one story: step 1's gradient, the last parameters
        for n in shapes:
            if not np.array_equal(step0["grad." + n], steps[f"step1.grad.{n}"]):
                problems.append(f"steps.safetensors: step1.grad.{n} differs from step0.safetensors grad.{n}")
            if not np.array_equal(final[n], steps[f"step{S}.param.{n}"]):
                problems.append(f"final.safetensors: {n} differs from steps.safetensors step{S}.param.{n}")
    if problems:
        for p in problems:
            print("FAIL", p)
        return 1
    ids = batch["input_ids"].astype(np.int64)
    labels = batch["labels"].astype(np.int64)
    if ids.min() < 0 or ids.max() >= cfg.padded_vocab:
        print("FAIL input_ids out of range")
        return 1

    # coverage: a parity config should keep every feature on (docs/olmo3.md section 1)
    warn = []
    if cfg.n_kv_heads == cfg.n_heads:
        warn.append("n_kv_heads == n_heads: GQA not exercised")
    sl = [t == "sliding_attention" for t in cfg.layer_types]
    if not any(sl) or all(sl):
        warn.append("layer_types not mixed: sliding and full attention not both exercised")
    if any(sl) and cfg.sliding_window >= cfg.seq_len:
        warn.append("sliding_window >= seq_len: the window never masks anything")
    if not (labels == olmo_ref.IGNORE).any():
        warn.append("no masked (-100) labels")
    if cfg.z_loss == 0:
        warn.append("z_loss is 0")
    if cfg.global_batch == cfg.micro_batch:
        warn.append("micro_batch == global_batch: gradient accumulation not exercised")
    if cfg.padded_vocab == cfg.vocab_size:
        warn.append("padded_vocab == vocab_size: vocab padding not exercised")
    # init.safetensors vs OLMo init (trunc normal std 0.02 cut at +-0.06, norms 1): informational
    tn_std = 0.02 * math.sqrt(1 - 2 * 3 * math.exp(-4.5) / math.sqrt(2 * math.pi) / math.erf(3 / math.sqrt(2)))
    for n, w in init.items():
        w = w.astype(np.float64)
        if olmo_ref.is_norm(n):
            if not np.all(w == 1.0):
                warn.append(f"init {n}: norm weights not all 1")
        elif np.abs(w).max() > 0.06 + 1e-7 or abs(w.std() / tn_std - 1) > 5 / math.sqrt(2 * w.size) + 0.01 \
                or abs(w.mean()) > 5 * tn_std / math.sqrt(w.size):
            warn.append(f"init {n}: not like trunc normal(0, 0.02, +-0.06): std {w.std():.5f} "
                        f"(want {tn_std:.5f}) max|w| {np.abs(w).max():.4f} mean {w.mean():.2e}")
    for w_ in warn:
        print("WARNING:", w_)

    print(f"reference: float64, {S} steps from the C state before each, global batch {G} x {T}, "
          f"micro {cfg.micro_batch}, z_loss {cfg.z_loss}, max_grad_norm {cfg.max_grad_norm}, schedule {cfg.schedule}")
    rows = []  # (group, name, max abs diff, max rel-to-max, tol, ratio = worst err / allowed)

    def add(group, name, c, r, t):
        mad, rel = rel_err(c, r)
        rows.append((group, name, mad, rel, t, rel / t if t > 0 else float("inf")))

    def add_elementwise(group, name, c, r, allowed, t):
        c = np.asarray(c, dtype=np.float64)
        r = r.numpy()
        mad, rel = rel_err(c, r)
        ratio = float(np.max(np.abs(c - r) / allowed.numpy())) if np.all(np.isfinite(c)) else float("inf")
        rows.append((group, name, mad, rel, t, ratio))

    ref_metrics = []
    P, moments = init, None
    for k in range(1, S + 1):
        ref = check_step(cfg, k, P, moments, ids, labels, tol)
        if k == 1:
            add("logits", "logits", step0["logits"], ref["logits"].numpy(), tol["logits"])
            for n in shapes:
                add("grad", "grad." + n, step0["grad." + n], ref["grad"][n].numpy(), tol["grad"])
        for n in shapes:
            if k > 1:
                add("grad", f"step{k}.grad.{n}", steps[f"step{k}.grad.{n}"], ref["grad"][n].numpy(), tol["grad"])
            for kind in ("param", "m", "v"):
                add_elementwise(kind, f"step{k}.{kind}.{n}", steps[f"step{k}.{kind}.{n}"], ref[kind][n],
                                ref["allow"][n][kind], tol["final"])
        ref_metrics.append(dict(ref["metrics"], step=k))
        P = {n: steps[f"step{k}.param.{n}"] for n in shapes}
        moments = {n: (steps[f"step{k}.m.{n}"], steps[f"step{k}.v.{n}"]) for n in shapes}
    for m_c, m_r in zip(metrics, ref_metrics):
        s = m_r["step"]
        if int(m_c.get("step", -1)) != s:
            rows.append(("metric", f"step{s}.step", float("inf"), float("inf"), 0.0, float("inf")))
        for k in ("loss", "ce", "z_loss", "grad_norm", "lr"):
            if k not in m_c:
                rows.append(("metric", f"step{s}.{k} (missing)", float("inf"), float("inf"), 0.0, float("inf")))
                continue
            add("metric", f"step{s}.{k}", m_c[k], m_r[k], tol[k] if k in ("lr", "grad_norm") and k in tol else tol["scalar"])

    clipped = [m["grad_norm"] > cfg.max_grad_norm for m in ref_metrics]
    print(f"clipping active on steps: {[i + 1 for i, c in enumerate(clipped) if c]} "
          f"(max_grad_norm {cfg.max_grad_norm})")
    if all(clipped) or not any(clipped):
        print("WARNING: clipping is active on " + ("every" if all(clipped) else "no") + " step: AdamW is "
              "invariant to a constant gradient scale (up to eps), so clipping errors are barely "
              "visible in final params; pick max_grad_norm between the smallest and largest grad_norm")

    def ok(r):
        return math.isfinite(r[5]) and r[5] <= 1.0

    print(f"{'name':58s} {'max abs diff':>13s} {'max rel':>10s} {'tol':>8s} {'err/allow':>9s}  ok")
    groups = {}
    for r in rows:
        groups.setdefault(r[0], []).append(r)
    n_fail = 0
    for g, rs in groups.items():
        worst = max(rs, key=lambda r: (r[5] if math.isfinite(r[5]) else 1e300))
        for r in rs:
            good = ok(r)
            n_fail += not good
            if a.all or not good or r is worst:
                tag = "" if a.all or not good else f"  (worst of {len(rs)} {g})"
                tols = f"{r[4]:8.1e}" + ("+" if g in ("param", "m", "v") else " ")
                print(f"{r[1]:58s} {r[2]:13.3e} {r[3]:10.3e} {tols} {r[5]:9.3f}  {'ok' if good else 'FAIL'}{tag}")
    print("param/m/v: allowed per element = tol * max|ref| + this step's band (first-order propagation of the "
          f"{tol['grad']:.0e} gradient tolerance, + {tol.get('grad_norm', tol['scalar']):.0e} of the norm on clipped steps, through "
          "clip + AdamW from the C state before the step; see tests/ref/README.md)")
    print(f"{len(rows) - n_fail}/{len(rows)} comparisons within tolerance")
    print("PARITY PASS" if n_fail == 0 else "PARITY FAIL")
    return 0 if n_fail == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
