#!/usr/bin/python3
"""The CPU bf16 matmul mode against PyTorch (Debian's torch 1.13).

build/tests/test_bf16 --dump writes random values (a quarter of them exact ties between two
bf16 neighbours, some scaled by 1e30) with our bf16 rounding, and a linear layer's
forward and backward computed under PRECISION_BF16, on every engine this CPU has (the default,
then OLMO_BF16_ENGINE=avx512bf16 and emulated). Checked here:
  * rounding: identical bits to torch's float32 -> bfloat16 conversion (nearest, ties to
    even) for every value (none is denormal: there our rounding flushes to zero, as the
    hardware's VCVTNE2PS2BF16 does, and torch keeps the denormal);
  * y = x W^T, dx = dy W, dW = dy^T x against torch in float64 on bfloat16-rounded operands:
    1e-5 relative to the largest magnitude (products of bf16 are exact in fp32; what is left
    is fp32 accumulation, the fp32 matmul tolerance).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("OLMO_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD), "tests", "test_bf16")
N, C, OC = 40, 72, 50
failures = 0


def check(ok, msg):
    global failures
    print(("ok   " if ok else "FAIL ") + msg)
    failures += 0 if ok else 1


def run(engine_env):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, **engine_env)
        out = subprocess.run([TOOL, "--dump", d], env=env, check=True, capture_output=True, text=True).stdout
        engine = out.strip().split("engine=")[-1]
        rd = lambda n, dt: np.fromfile(os.path.join(d, n), dtype=dt)
        v, h = rd("round.f32", np.float32), rd("round.u16", np.uint16)
        tv = torch.from_numpy(v).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        bad = np.nonzero(tv != h)[0]
        check(len(bad) == 0, f"[{engine}] bf16 rounding of {len(v)} values (ties, large) equals torch: "
              f"{len(bad)} differ" + (f", first {v[bad[0]]!r}: ours 0x{h[bad[0]]:04x} torch 0x{tv[bad[0]]:04x}" if len(bad) else ""))
        b = lambda a: torch.from_numpy(a).to(torch.bfloat16).double()
        x, W, dy = rd("x.f32", np.float32).reshape(N, C), rd("W.f32", np.float32).reshape(OC, C), \
            rd("dy.f32", np.float32).reshape(N, OC)
        refs = {"y = x W^T": (rd("y.f32", np.float32).reshape(N, OC), b(x) @ b(W).T),
                "dx = dy W": (rd("dx.f32", np.float32).reshape(N, C), b(dy) @ b(W)),
                "dW = dy^T x": (rd("dW.f32", np.float32).reshape(OC, C), b(dy).T @ b(x))}
        for name, (ours, ref) in refs.items():
            ref = ref.numpy()
            err = np.abs(ours - ref).max() / np.abs(ref).max()
            check(err < 1e-5, f"[{engine}] {name} vs torch float64 on bf16 operands: rel err {err:.2e} (tol 1e-5)")
        return engine


if __name__ == "__main__":
    if not os.path.exists(TOOL):
        sys.exit(f"{TOOL} missing: run make first")
    default = run({})
    has_avx512bf16 = "avx512_bf16" in open("/proc/cpuinfo").read().split()
    for engine in ("avx512bf16", "emulated"):
        if engine != default and (engine != "avx512bf16" or has_avx512bf16):
            run({"OLMO_BF16_ENGINE": engine})
    print("FAIL" if failures else "ok", f"({failures} failures)")
    sys.exit(1 if failures else 0)
