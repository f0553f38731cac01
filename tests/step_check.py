"""step_check.py: one training run's steps checked against another's, each step from the
same state (tests/ref/README.md, "Why step by step"), for runs whose only difference is
the order of fp32 sums (context parallelism, another data-parallel tree, another world).

  step_check.py LABEL REF_RUN CAND_PATTERN STEPS [--rho-grad X] [--rho-loss X] [--rho-norm X]

STEPS: a list like 1-10 or 1,2,6-10. --rho-grad none: the step's loss terms and grad norm
only (runs in another precision, whose gradients no fp32 bound covers).

REF_RUN wrote a checkpoint after every step (ckpt.interval=1, keep_last >= STEPS).
CAND_PATTERN with {k} in it names, for each step k of STEPS, a run directory that did
step k alone from REF_RUN's state after step k-1 (`train.resume=REF/checkpoints/step-(k-1)
train.stop_at=k`; a fresh start for k = 1, the same seed giving the same initial weights)
and so holds checkpoints/step-k and step k's metrics record.

What is compared, per step (u = 2^-24, the fp32 unit roundoff):
  - loss, ce, z_loss: |c - r| <= rho_loss |r| (rho_loss 0: bitwise); grad_norm:
    |c - r| <= rho_norm |r|; lr bitwise (the same schedule arithmetic).
  - the clipped gradient g, through AdamW's first moment: both runs start from the same
    m0 (bits), so m_c - m_r = (1 - b1)(g_c - g_r) up to the roundings of m = m0 b1 +
    (g clip)(1 - b1) that can differ (the clip product, the product, the sum; m0 b1 is the
    same bits on both sides): |m_c - m_r| <= (1 - b1)(delta + 4 u |g|) + u (|m_c| + |m_r|),
    delta = rho max|g| per tensor
    (rho = rho_grad, + rho_norm on a clipped step: the clip factor's error), 0 where the
    reference gradient is exactly 0 (rows of tokens absent from the batch). g is read back
    from the reference: (m_r - b1 m0) / (1 - b1).
  - the second moment (v = v0 b2 + (1 - b2) g g, three roundings of the g term and the sum):
    |v_c - v_r| <= (1 - b2)(2|g| delta + delta^2 + 6 u g^2) + u (|v_c| + |v_r|).
  - the parameters: AdamW's first-order band of this one step (tests/ref/olmo_ref.py
    Trainer._track_band): lr min((1 + c_t) delta / (sqrt(vhat) + eps), 2 c_t), plus the
    roundings that can differ: the update lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps) (five fp32
    operations, at most lr c_t in size) on each side, 10 u lr c_t, and the subtraction from
    p (p0 (1 - lr wd) is the same bits on both sides), u (|p_c| + |p_r|).
Exit 1 with every failing row printed; else one line per step with each group's worst
fraction of its allowance.
"""
import functools
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ref"))
from safetensors_io import read  # noqa: E402

U = 2.0 ** -24


@functools.lru_cache(maxsize=None)   # step k's reference is step k+1's starting state
def ckpt(run, k):
    d = f"{run}/checkpoints/step-{k:08d}"
    if not os.path.isdir(d):
        sys.exit(f"step_check: {d}: no such checkpoint (the reference needs ckpt.interval=1 and keep_last >= steps)")
    p = read(f"{d}/model.safetensors")
    o, meta = read(f"{d}/optim.safetensors", with_metadata=True)
    st = json.load(open(f"{d}/train_state.json"))
    return {n: v.astype(np.float64) for n, v in p.items()}, o, int(meta["adam_step"]), st


def train_record(run, k):
    rows = [r for r in map(json.loads, open(f"{run}/metrics.jsonl")) if r.get("kind") == "train" and r["step"] == k]
    if len(rows) != 1:
        sys.exit(f"step_check: {run}/metrics.jsonl: {len(rows)} train records of step {k}, expected 1")
    return rows[0]


def recipe_optim(st):
    import yaml
    r = yaml.safe_load(st["recipe"])
    o = r.get("optim", {})
    return (float(o["beta1"]), float(o["beta2"]), float(o["eps"]), float(o["weight_decay"]),
            float(o["max_grad_norm"]))


def main():
    args = sys.argv[1:]
    opts = {"--rho-grad": 1e-6, "--rho-loss": 1e-6, "--rho-norm": 1e-6}
    pos = []
    while args:
        a = args.pop(0)
        if a in opts:
            v = args.pop(0)
            opts[a] = None if v == "none" else float(v)
        else:
            pos.append(a)
    label, ref, pattern = pos[0], pos[1], pos[2]
    steps = [k for part in pos[3].split(",") for k in
             (range(int(part.split("-")[0]), int(part.split("-")[1]) + 1) if "-" in part else [int(part)])]
    rho_g, rho_l, rho_n = opts["--rho-grad"], opts["--rho-loss"], opts["--rho-norm"]
    failures, worst_all = [], {}
    for k in steps:
        cand = pattern.replace("{k}", str(k))
        pr, orf, t, st = ckpt(ref, k)
        pc, oc, tc, _ = ckpt(cand, k)
        b1, b2, eps, wd, max_norm = recipe_optim(st)
        if tc != t:
            failures.append(f"step {k}: adam_step {tc}, reference {t}")
        rr, rc = train_record(ref, k), train_record(cand, k)
        row = {}
        for key, tol in (("loss", rho_l), ("ce", rho_l), ("z_loss", rho_l), ("grad_norm", rho_n)):
            e = abs(rc[key] - rr[key]) / max(abs(rr[key]), 1e-30)
            row[key] = e / tol if tol > 0 else (0.0 if e == 0 else math.inf)
            if e > tol:
                failures.append(f"step {k}: {key} {rc[key]!r} vs {rr[key]!r}: relative {e:.3g} > {tol:g}")
        if rc["lr"] != rr["lr"]:
            failures.append(f"step {k}: lr {rc['lr']!r} vs {rr['lr']!r}")
        lr = rr["lr"]
        if k > 1:
            _, o0, _, _ = ckpt(ref, k - 1)
        clipped = max_norm > 0 and rr["grad_norm"] > max_norm
        rho = (rho_g or 0.0) + (rho_n if clipped else 0.0)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        c_t = (1 - b1) / bc1 * math.sqrt(bc2 / (1 - b2)) * math.sqrt(sum((b1 * b1 / b2) ** i for i in range(t)))
        grp = {"grad(m)": 0.0, "v": 0.0, "param": 0.0} if rho_g is not None else {}
        for n in (pr if rho_g is not None else ()):
            m_r, v_r = orf[n + ".exp_avg"].astype(np.float64), orf[n + ".exp_avg_sq"].astype(np.float64)
            m_c, v_c = oc[n + ".exp_avg"].astype(np.float64), oc[n + ".exp_avg_sq"].astype(np.float64)
            m0 = o0[n + ".exp_avg"].astype(np.float64) if k > 1 else np.zeros_like(m_r)
            g = (m_r - b1 * m0) / (1 - b1)
            delta = rho * np.abs(g).max() * (g != 0)
            ag = np.abs(g)
            allow = {"grad(m)": (1 - b1) * (delta + 4 * U * ag) + U * (np.abs(m_c) + np.abs(m_r)),
                     "v": (1 - b2) * (2 * ag * delta + delta ** 2 + 6 * U * ag * ag) + U * (np.abs(v_c) + np.abs(v_r)),
                     "param": lr * np.minimum((1 + c_t) * delta / (np.sqrt(v_r / bc2) + eps), 2 * c_t)
                              + 10 * U * lr * c_t + U * (np.abs(pc[n]) + np.abs(pr[n]))}
            err = {"grad(m)": np.abs(m_c - m_r), "v": np.abs(v_c - v_r), "param": np.abs(pc[n] - pr[n])}
            for gname in grp:
                a, e = allow[gname], err[gname]
                over = e > a
                if over.any():
                    i = int(np.argmax(np.where(over, e - a, -np.inf)))
                    failures.append(f"step {k}: {gname} of {n}: {int(over.sum())} elements over their allowance, "
                                    f"e.g. [{i}] {e.flat[i]:.3g} > {a.flat[i]:.3g}")
                with np.errstate(divide="ignore", invalid="ignore"):
                    r = np.where(a > 0, e / a, np.where(e > 0, np.inf, 0.0))
                grp[gname] = max(grp[gname], float(r.max()))
        row.update(grp)
        for key, v in row.items():
            worst_all[key] = max(worst_all.get(key, 0.0), v)
        print(f"{label} step {k}{' (clipped)' if clipped else ''}: " + ", ".join(f"{key} {v:.2f}" for key, v in row.items()))
    print(f"{label}: worst fraction of the allowance over steps {pos[3]}: "
          + ", ".join(f"{key} {v:.2f}" for key, v in worst_all.items()))
    if failures:
        print("\n".join(f"{label} FAIL {f}" for f in failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
