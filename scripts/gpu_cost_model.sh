#!/usr/bin/env bash
# gpu_cost_model.sh [T_EMU] [OUT]: the counted cost model of the CUDA emulation
# (tests/cuemu/cost.cpp, docs/cuda.md "Cost model") for OLMo 3 7B's attention, and the
# other kernels of a training step, with predicted H100 SXM times.
#   1. builds build-emu (make CUDA_EMU=1) and runs tests/test_cuemu_cost table T_EMU
#      (default 1024): the bf16 tensor-core attention, forward and backward, head dim 128,
#      one head, causal (window = T_EMU) and sliding (window = T_EMU / 2: the 7B's
#      4096 / 8192), every access counted;
#   2. scales each kernel's counts to the 7B's T = 8192, 32 heads, by the ratio of the
#      (warp, tile) pairs the kernel visits at 7B to those at T_EMU (computed here from
#      the kernels' tiling: exact for the mma count; shared wavefronts and global sectors
#      are per tile, so the ratio carries them up to the edge tiles' share, a few per cent
#      at T_EMU = 1024), then sums the 24 sliding and 8 full layers of a micro-batch:
#      forward + backward (train.recompute, the 7B's plan, keeps att + lse: no attention
#      in the recompute);
#   3. the other kernels: tests/test_backend_ops (every op of kernels/ops.h, forward and
#      backward, fp32 and bf16, small shapes) with CUEMU_COST=1: their sector efficiency
#      and conflicts, not their 7B time; cuBLASLt is software here and not counted;
#   4. the whole 7B micro-batch and its MFU: attention and Di as counted, the GEMMs at an
#      assumed fraction of the tensor peak (cuBLASLt is not counted; 60/70/80% shown), the
#      memory-bound kernels at the bytes an analytic count says they move, and the bench's
#      step (that micro-batch plus the whole model's optimizer pass);
#   5. the kernel launches of one micro-batch of the 7B's graph, counted: build-emu/olmo
#      trains one step of olmo3-tiny with 32 layers and recompute (the launch count does not
#      depend on the widths, bar the LM head's 1024-token chunks) under CUEMU_COST=1;
# and prints PREDICT lines (attention, per layer and per micro-batch; the step) that
# scripts/gpu-check.sh prints beside the measured times. OUT (default
# docs/gpu_cost_model.txt): the whole report, written atomically.
# Takes minutes (the emulation counts every access of every lane).
set -euo pipefail
cd "$(dirname "$0")/.."
TE=${1:-1024}
OUTF=${2:-docs/gpu_cost_model.txt}
case $TE in ''|*[!0-9]*) echo "gpu_cost_model.sh: T_EMU '$TE' is not a token count" >&2; exit 2;; esac
[ "$TE" -ge 256 ] && [ "$TE" -le 8192 ] && [ $((TE % 128)) = 0 ] || { echo "gpu_cost_model.sh: T_EMU $TE: want a multiple of 128 in [256, 8192]" >&2; exit 2; }
B=build-emu
make -s CUDA_EMU=1 BUILD=$B -j2 $B/olmo $B/tests/test_cuemu_cost $B/tests/test_backend_ops >/dev/null 2>&1 ||
  { echo "gpu_cost_model.sh: the emulated build (make CUDA_EMU=1 BUILD=$B) failed" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
$B/tests/test_cuemu_cost table "$TE" "$((TE / 2))" >"$tmp/attn.txt"
CUEMU_COST=1 CUEMU_COST_OUT="$tmp/ops.txt" $B/tests/test_backend_ops >"$tmp/ops.log" 2>&1 ||
  { tail -20 "$tmp/ops.log"; echo "gpu_cost_model.sh: test_backend_ops under the cost model failed" >&2; exit 1; }
/usr/bin/python3 -c "import struct; open('$tmp/tok.npy', 'wb').write(struct.pack('<4096I', *[(i * 7919) % 1000 for i in range(4096)]))"
printf 'model: {preset: olmo3-tiny, n_layers: 32}\ntrain: {seq_len: 64, global_batch: 2, micro_batch: 2, max_steps: 1}\ndata: {paths: [%s]}\nckpt: {interval: 0}\neval: {off: true}\n' "$tmp/tok.npy" >"$tmp/l32.yml"
CUEMU_COST=1 CUEMU_COST_OUT="$tmp/l32.txt" $B/olmo train "$tmp/l32.yml" train.run_dir="$tmp/l32" train.backend=cuda \
  train.recompute=on >"$tmp/l32.log" 2>&1 || { tail -20 "$tmp/l32.log"; echo "gpu_cost_model.sh: the 32-layer emulated step failed" >&2; exit 1; }
/usr/bin/python3 - "$TE" "$tmp/attn.txt" "$tmp/ops.txt" "$tmp/l32.txt" >"$tmp/report.txt" <<'EOF'
import sys, re
TE = int(sys.argv[1])
T7, H7, LFULL, LSLIDE, W7 = 8192, 32, 8, 24, 4096

def warp_tiles(kind, T, W):
    """(warp, tile) pairs a kernel computes (its tiling and per-warp skip, attention.cu)."""
    n = 0
    if kind == 'fwd' or kind == 'dq':
        QT, KT = (128, 64) if kind == 'fwd' else (64, 64)
        for q0 in range(0, T, QT):
            q1 = min(q0 + QT, T) - 1
            klo = max(0, q0 - W + 1)
            for k0 in range(klo // KT * KT, q1 + 1, KT):
                for r0 in range(0, QT, 16):
                    lo = q0 + r0
                    hi = min(lo + 15, T - 1)
                    if lo < T and not (k0 > hi or k0 + KT - 1 <= lo - W):
                        n += 1
    else:   # dkdv: key tiles of 64 (warps of 16 keys) over query tiles of 64
        for k0 in range(0, T, 64):
            k1 = min(k0 + 64, T) - 1
            qhi = min(T - 1, k1 + W - 1)
            for q0 in range(k0 // 64 * 64, qhi + 1, 64):
                for r0 in range(0, 64, 16):
                    lo = k0 + r0
                    hi = min(lo + 15, T - 1)
                    if lo < T and not (q0 + 63 < lo or q0 > hi + W - 1):
                        n += 1
    return n

# the table: "== attention ... window W" then rows
sections, cur = {}, None
for line in open(sys.argv[2]):
    m = re.match(r'== attention.*window (\d+)', line)
    if m:
        cur = int(m.group(1)); sections[cur] = {}
        continue
    f = line.split()
    if cur is not None and f and f[0].startswith('attn_'):
        name = f[0]
        # columns after the bracketed key: launch blocks mma GFLOP smem_wf confl wf/mma gld_MB gst_MB est_us bound
        tail = line[line.index(']') + 1:].split()
        sections[cur][name] = dict(mma=float(tail[2]), wf=float(tail[4]), confl=float(tail[5]),
                                   gld=float(tail[7]) * 1e6, gst=float(tail[8]) * 1e6)
kinds = {'attn_fwd_wmma<DD>': 'fwd', 'attn_dkdv_wmma<DD>': 'dkdv', 'attn_dq_wmma<DD>': 'dq'}
PEAK, WFS, HBM = 989e12, 132 * 1.755e9, 3.35e12
def est(mma, wf, byt):
    t = (mma * 8192 / PEAK, wf / WFS, byt / HBM)
    return max(t), ('mma', 'smem', 'global')[t.index(max(t))]

print('attention at OLMo 3 7B shapes (B 1, T %d, %d heads, D 128), scaled from the emulation at T %d, 1 head' % (T7, H7, TE))
print('%-20s %-7s %10s %9s %7s %7s %10s %9s %6s' % ('kernel', 'layer', 'TFLOP', 'wf/mma', 'confl', 'scale', 'GB(L2)', 'est_ms', 'bound'))
per_layer = {}
for wemu, layer, w7 in ((TE, 'full', T7), (TE // 2, 'sliding', W7)):
    if wemu not in sections:
        sys.exit('gpu_cost_model: no table for window %d in the emulation output' % wemu)
    tot = 0.0
    for name, kind in kinds.items():
        s = sections[wemu][name]
        ratio = warp_tiles(kind, T7, w7) / warp_tiles(kind, TE, wemu) * H7
        mma, wf, byt = s['mma'] * ratio, s['wf'] * ratio, (s['gld'] + s['gst']) * ratio
        t, bound = est(mma, wf, byt)
        per_layer[(kind, layer)] = t
        tot += t
        print('%-20s %-7s %10.3f %9.2f %7.2f %7.0f %10.2f %9.3f %6s' % (name, layer, mma * 8192 / 1e12, s['wf'] / s['mma'],
              s['confl'], ratio, byt / 1e9, t * 1e3, bound))
    per_layer[('all', layer)] = tot
for layer in ('full', 'sliding'):
    for kind in ('fwd', 'dkdv', 'dq'):
        print('PREDICT attn_%s %s layer_ms %.3f' % (kind, layer, per_layer[(kind, layer)] * 1e3))
fwd = LFULL * per_layer[('fwd', 'full')] + LSLIDE * per_layer[('fwd', 'sliding')]
bwd = sum(L * (per_layer[('dkdv', ly)] + per_layer[('dq', ly)]) for L, ly in ((LFULL, 'full'), (LSLIDE, 'sliding')))
# (train.recompute on CUDA keeps every layer's attention output and lse where they fit:
# the recompute skips attention, so the forward runs once; graph.h GRAPH_RECOMPUTE_KEEP_ATT)
print('PREDICT attention micro_batch_ms %.1f (forward %.1f once: the recompute keeps att + lse, backward %.1f; 8 full + 24 sliding layers)'
      % ((fwd + bwd) * 1e3, fwd * 1e3, bwd * 1e3))

# The whole 7B micro-batch (B 1, T 8192, recompute) and its MFU. Counted: attention (above)
# and Di (its sectors scale with rows x heads). Not counted (cuBLASLt is software in the
# emulation): the GEMMs, at GEMM_EFF of the bf16 peak (an assumption, printed with its
# range); the memory-bound kernels, at the bytes they must move (an analytic count below) at
# HBM_EFF of the peak bandwidth. MFU with OLMo-core's FLOP counts (docs/olmo3.md s.8).
D7, F7, V7, L7, HD = 4096, 11008, 100352, LFULL + LSLIDE, 128
GEMM_EFF, HBM_EFF = 0.70, 0.85
di = sections[TE].get('attn_di_kernel<T>')
di_s = (di['gld'] + di['gst']) * T7 * H7 / TE / HBM * L7 if di else 0.0
w_layer = D7 * 3 * D7 + D7 * D7 + D7 * 2 * F7 + F7 * D7   # qkv, o, MLP up (gate + up), down
gemm_fwd = 2.0 * T7 * (L7 * w_layer + V7 * D7)
gemm = gemm_fwd * 3 + 2.0 * T7 * L7 * w_layer   # forward, backward (2x), the recompute's forward
# The memory-bound kernels: the bytes each must move (every tensor read or written once a
# kernel; what a kernel re-reads of its own rows is taken to hit L1/L2), a layer, before and
# after issue 38's fusions (src/model/graph.c, kernels/cuda/qkv_split.cu, norm.cu).
# E: one (T, d) tensor's elements (d = Q = KV for the 7B's MHA), Hn: one (T, MLP); bf16
# activations (2 B), the fp32 residual stream and gradient (4 B); PARTS: the norm
# weight-gradient partials (doubles, written and read once), 64 before, 264 after.
E, Hn = T7 * D7, T7 * F7
def norm_dw(parts): return 2 * 8 * parts * D7
swiglu_f, swiglu_b = 6 * Hn, 10 * Hn        # gu read, out written; dout + gu read, dgu written
def mem_model(fused):
    cast = 6 * E                             # x fp32 read, its bf16 copy written
    # QK-norm (qkv slice read, q/k written), the V copy, RoPE in place on q and k; fused: qkv
    # read once, q, k, v written once
    qkv_f = 12 * E if fused else 8 * E + 4 * E + 8 * E
    attn_norm = 12 * E                       # ao read, x (fp32) read, h fp32 + bf16 written
    mlp_norm = 10 * E + (2 * E if fused else 0)   # mo, h read, y written (+ the next block's bf16 x)
    first = cast if fused else 0             # fused: only the first block casts (and the recompute)
    fwd = (qkv_f + attn_norm + swiglu_f + mlp_norm + (0 if fused else cast)) * L7 + first - (2 * E if fused else 0)
    rec = (cast + qkv_f + attn_norm + swiglu_f + 10 * E) * (L7 - 1)
    # a norm backward: dy, x read, dx written (+ dy, x read again by the unfused partial kernel)
    nb_res = (4 + 2 + 2) * E + (0 if fused else 6 * E)          # the post-norms: dy fp32
    nb_qk = (2 + 2 + 2) * E + (0 if fused else 4 * E)           # QK-norm: dy bf16
    rope_b = 0 if fused else 8 * E                               # RoPE backward in place on dq, dk
    parts = norm_dw(264 if fused else 64)
    bwd = (2 * nb_res + swiglu_b + rope_b + 2 * nb_qk + 4 * E + 4 * parts) * L7
    return fwd + rec + bwd, (fwd, rec, bwd)
head = 3 * T7 * V7 * 4                       # the LM head's fp32 logits, dlogits
mem_before, parts_before = mem_model(False)
mem_after, parts_after = mem_model(True)
mem = mem_after + head
t_gemm, t_mem = gemm / (PEAK * GEMM_EFF), mem / (HBM * HBM_EFF)
t_attn = fwd + bwd + di_s
t_mb = t_gemm + t_attn + t_mem
f_plain = 6 * (L7 * (w_layer + 4 * D7) + V7 * D7) + 12 * L7 * H7 * HD * T7
f_win = f_plain - 12 * LSLIDE * H7 * HD * (T7 - W7)
tok_s = T7 / t_mb
print('7B micro-batch (B 1, T %d, recompute): GEMMs %.1f TFLOP at %.0f%% of %.0f TFLOP/s (assumed) %.3f s; attention'
      ' (counted) %.3f s + Di %.3f s; memory-bound kernels %.0f GB (analytic) at %.0f%% of %.2f TB/s %.3f s'
      % (T7, gemm / 1e12, GEMM_EFF * 100, PEAK / 1e12, t_gemm, fwd + bwd, di_s, mem / 1e9, HBM_EFF * 100, HBM / 1e12, t_mem))
print('memory-bound kernels, bytes they must move (analytic, per micro-batch): before the fusions %.1f GB (forward %.1f,'
      ' recompute %.1f, backward %.1f), after %.1f GB (%.1f, %.1f, %.1f); + the LM head %.1f GB'
      % ((mem_before + head) / 1e9, *(x / 1e9 for x in parts_before), (mem_after + head) / 1e9,
         *(x / 1e9 for x in parts_after), head / 1e9))
for eff in (0.6, 0.8):
    t = gemm / (PEAK * eff) + t_attn + t_mem
    print('  with GEMMs at %.0f%%: %.3f s, MFU %.1f%% (window-aware) / %.1f%% (plain)'
          % (eff * 100, t, f_win * T7 / t / PEAK * 100, f_plain * T7 / t / PEAK * 100))
print('PREDICT step_7b micro_batch_s %.3f tokens_per_s %.0f mfu_window %.1f%% mfu_plain %.1f%% (GEMMs at %.0f%%; %.2f / %.2f GFLOP a token)'
      % (t_mb, tok_s, f_win * tok_s / PEAK * 100, f_plain * tok_s / PEAK * 100, GEMM_EFF * 100, f_win / 1e9, f_plain / 1e9))
# tests/test_cuda_bench's step: one micro-batch, then the whole 7B's optimizer on this GPU:
# zero the gradient (4 B), the norm's sum of squares (4 B), AdamW (p, m, v, g read; p, m, v
# and the bf16 copy written: 30 B) an element
NP = L7 * (w_layer + 4 * D7) + 2 * V7 * D7 + D7   # + 4 norms a layer, embedding, head, final norm
t_opt = NP * (4 + 4 + 30) / (HBM * HBM_EFF)
print('PREDICT bench_step_s %.3f (micro-batch %.3f + the optimizer over %.2fB parameters %.3f)' % (t_mb + t_opt, t_mb, NP / 1e9, t_opt))
# 5. launches: every kernel of the step's table but the optimizer's (sumsq, adamw*) and the
# one cast of the weights to bf16 before the first step
launches, per = 0, []
for line in open(sys.argv[4]).readlines()[2:]:
    f = line.split()
    if not f or f[0].startswith(('sumsq', 'adamw')):
        continue
    n = int(line[line.index(']') + 1:].split()[0])
    launches += n
    per.append('%s %d' % (f[0], n))
print('non-GEMM kernel launches a micro-batch of the 7B graph (32 layers, recompute; counted, the weight cast taken off): %d'
      % (launches - 1))
print('  ' + ', '.join(per))
print()
print('every kernel: tests/test_backend_ops under the emulation (each op forward and backward, fp32 and bf16, small shapes);')
print('gld/gst MB against the bytes a kernel needs tell its sector efficiency; est_us is not a 7B time')
print(open(sys.argv[3]).read().rstrip())
EOF
{
  dirty=""; git diff --quiet HEAD -- src tests 2>/dev/null || dirty=" + uncommitted changes"
  echo "# scripts/gpu_cost_model.sh $TE, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$dirty: the counted model (tests/cuemu/cost.cpp)"
  cat "$tmp/report.txt"
  echo
  echo "the emulation's counts for attention (T $TE, 1 head):"
  cat "$tmp/attn.txt"
} >"$OUTF.tmp"
mv "$OUTF.tmp" "$OUTF"
cat "$OUTF"
