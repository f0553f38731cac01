#!/usr/bin/env python3
"""gpu_cost_range.py [docs/gpu_cost_model.txt]: the counted cost model's attention and 7B step
estimate with what the counter leaves out, as a range (docs/cuda.md, "Cost model").

The counted model (scripts/gpu_cost_model.sh) times each attention kernel as
max(mma FLOPs / 989 TFLOP/s, shared wavefronts / (132 SMs x 1.755 GHz), L2 bytes / 3.35 TB/s):
perfect overlap, no latency, the softmax free. Added here, per kernel, from its row of the
file (layer, TFLOP, wavefronts a mma, GB, est_ms):
  mma.sync's ceiling: our kernels' WMMA compiles to mma.sync; H100's 989 TFLOP/s needs
      wgmma. A mma.sync-only loop reaches about half to two thirds of it (MMA_SYNC_EFF; the
      FlashAttention-3 paper measured FlashAttention-2, mma.sync + cp.async, at ~35% of
      peak in its forward). The mma time at that ceiling replaces the 989 one in the max().
  pipe overlap: the counted max() assumes the tensor pipe and the shared-memory (or
      global) traffic overlap perfectly. With 8 warps an SM (the forward: one 256-thread
      block) or 8 (dK/dV: two of 128) and ldmatrix feeding each mma, they may not:
      PIPE_OVERLAP of the shorter one is hidden (high end: none, the two add).
  the softmax: exp and its row arithmetic on the FP32/MUFU pipes, one element per visible
      (query, key) pair of the visited tiles: the forward and dK/dV (which recomputes P and
      forms dS) have it, dQ has not. An accurate expf is 9 instructions (sm_90 PTX of
      expf(x) without fast math, `nvcc -ptx`: 4 fma, cvt.sat, add, shl, mul, ex2.approx;
      __expf is mul + ex2.approx); with the row max, scale, subtract, sum and the dS
      product, SOFTMAX_INSTR per element, issued at 128 lanes a clock per SM (4 schedulers
      x 32), no faster than MUFU's 16 ex2 a clock per SM. In FlashAttention-2's structure the
      softmax runs between a warp's two GEMMs, so it adds to them; SOFTMAX_OVERLAP of it is
      taken as hidden by other warps.
  exposed load latency: without cp.async each K/V (or Q/dO) tile is loaded synchronously
      (global -> registers -> shared, then a barrier): a block waits LOAD_LAT per tile
      iteration; other blocks on the SM compute meanwhile, so what shows per iteration is
      max(0, LOAD_LAT - (blocks per SM - 1) x the iteration's counted time). Blocks per SM
      (ptxas registers and shared memory, docs/cuda.md "Kernels"): forward 1, dK/dV 2, dQ 4.
Each parameter has a low and a high value; low = the favourable end of every one. Printed:
per kernel and layer the counted time and the range, the micro-batch's attention (8 full +
24 sliding layers, forward once: the recompute keeps attention's output) and the 7B step's
micro-batch time and MFU with GEMMs at 60-80% of peak and the memory-bound kernels as the
file has them. An estimate with stated assumptions, not a measurement: gpu-check.sh's ops
bench measures the same kernels.
"""
import re
import sys

PEAK, SMS, CLK = 989e12, 132, 1.755e9
MMA_SYNC_EFF = (0.67, 0.50)          # low end of time = the higher efficiency
SOFTMAX_INSTR = {"fwd": (12, 16), "dkdv": (10, 14), "dq": (0, 0)}   # instructions a visible pair
SOFTMAX_OVERLAP = (0.5, 0.0)
LOAD_LAT = (0.25e-6, 0.5e-6)         # s a tile load: ~440-880 cycles at 1.755 GHz (L2 / HBM + barrier)
BLOCKS = {"fwd": 1, "dkdv": 2, "dq": 4}
TILE = {"fwd": 128 * 64, "dkdv": 64 * 64, "dq": 64 * 64}    # (query, key) pairs a tile iteration
FLOP_PER_PAIR = {"fwd": 4 * 128, "dkdv": 8 * 128, "dq": 2 * 128}   # head dim 128: QK+PV; S,dP,dV,dK; dS K
LAYERS = {"full": 8, "sliding": 24}
PIPE_OVERLAP = (1.0, 0.0)


def kernel_times(kind, tflop, est_ms, end):
    """(mma-ceiling, softmax, latency) adjusted time of one kernel for one layer, s."""
    i = 0 if end == "low" else 1
    pairs = tflop * 1e12 / FLOP_PER_PAIR[kind]
    t_counted = est_ms * 1e-3
    t_mma = tflop * 1e12 / (PEAK * MMA_SYNC_EFF[i])
    # the counted max() with mma at mma.sync's ceiling, the shorter part hidden PIPE_OVERLAP
    base = max(t_counted, t_mma) + (1 - PIPE_OVERLAP[i]) * min(t_counted, t_mma)
    n = SOFTMAX_INSTR[kind][i]
    per_pair_clk = max(n / 128.0, 1 / 16.0) if n else 0.0
    t_soft = pairs * per_pair_clk / (SMS * CLK) * (1 - SOFTMAX_OVERLAP[i])
    iters = pairs / TILE[kind]
    per_sm = iters / SMS
    c = t_counted / per_sm           # SM time of one tile iteration (counted)
    exposed = max(0.0, LOAD_LAT[i] - (BLOCKS[kind] - 1) * c)
    t_lat = per_sm / BLOCKS[kind] * exposed
    return base + t_soft + t_lat, (t_mma, t_soft, t_lat)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "docs/gpu_cost_model.txt"
    text = open(path).read()
    rows = {}
    for m in re.finditer(r"^attn_(fwd|dkdv|dq)_wmma<DD>\s+(full|sliding)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+\d+\s+([\d.]+)\s+([\d.]+)",
                         text, re.M):
        kind, layer, tflop, wfmma, gb, est = m.groups()
        rows[(kind, layer)] = (float(tflop), float(est))
    mb = re.search(r"GEMMs ([\d.]+) TFLOP at .*?attention \(counted\) ([\d.]+) s \+ Di ([\d.]+) s; memory-bound kernels .*? ([\d.]+) s$",
                   text, re.M)
    tok = re.search(r"PREDICT step_7b .*?\(GEMMs at \d+%; ([\d.]+) / ([\d.]+) GFLOP a token\)", text)
    if len(rows) != 6 or not mb or not tok:
        print("gpu_cost_range.py: %s lacks the attention rows or the 7B lines of scripts/gpu_cost_model.sh" % path)
        return 1
    print("attention, one layer (T 8192, 32 heads, D 128), ms: counted -> with mma.sync's ceiling, the softmax and "
          "exposed load latency (low .. high; the high end's additions: mma at mma.sync's ceiling, not overlapped | "
          "softmax | latency)")
    tot = {"counted": 0.0, "low": 0.0, "high": 0.0}
    for kind in ("fwd", "dkdv", "dq"):
        for layer in ("full", "sliding"):
            tflop, est = rows[(kind, layer)]
            lo, _ = kernel_times(kind, tflop, est, "low")
            hi, parts = kernel_times(kind, tflop, est, "high")
            print("  RANGE attn_%-5s %-8s %7.3f -> %6.3f .. %6.3f   (%.3f | %.3f | %.3f)"
                  % (kind, layer, est, lo * 1e3, hi * 1e3, *(p * 1e3 for p in parts)))
            for k, v in (("counted", est * 1e-3), ("low", lo), ("high", hi)):
                tot[k] += LAYERS[layer] * v
    gemm_tflop, att_counted, di, t_mem = (float(x) for x in mb.groups())
    f_win, f_plain = (float(x) * 1e9 for x in tok.groups())
    print("RANGE attention micro_batch_ms counted %.1f (file: %.1f) -> %.1f .. %.1f"
          % (tot["counted"] * 1e3, att_counted * 1e3, tot["low"] * 1e3, tot["high"] * 1e3))
    T = 8192
    for eff in (0.8, 0.7, 0.6):
        t_g = gemm_tflop * 1e12 / (PEAK * eff)
        lo, hi = (t_g + tot[k] + di + t_mem for k in ("low", "high"))
        print("RANGE step_7b GEMMs at %.0f%%: micro-batch %.3f .. %.3f s, MFU %.1f .. %.1f%% window-aware, %.1f .. %.1f%% plain"
              % (eff * 100, lo, hi, f_win * T / hi / PEAK * 100, f_win * T / lo / PEAK * 100,
                 f_plain * T / hi / PEAK * 100, f_plain * T / lo / PEAK * 100))
    return 0


if __name__ == "__main__":
    sys.exit(main())
