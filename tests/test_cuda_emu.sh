#!/usr/bin/env bash
# test_cuda_emu.sh: the CUDA backend executed on this CPU (tests/cuemu, docs/cuda.md
# "Emulation"): builds build-emu/ with `make CUDA_EMU=1` (the real src/kernels/cuda/*.cu,
# each CUDA thread a fiber, cuBLASLt and NCCL-over-MPI in software), then runs
#   0. tests/test_cuemu: the device semantics themselves (launches refused with the real
#      error codes; barrier mismatches, early exits, out-of-bounds accesses and host
#      pointers reported naming the kernel; a missing __syncwarp made visible), then
#      tests/test_cuemu_cost: the counted cost model (tests/cuemu/cost.cpp) on kernels
#      whose bank conflicts and sectors are known by construction, and its table for the
#      attention kernels at head dim 128, T = 256 (scripts/gpu_cost_model.sh: 7B shapes);
#   1. tests/test_backend_ops (every op of kernels/ops.h, forward and backward, on the CPU
#      and the emulated CUDA backend, fp32 and bf16, against the CPU fp32 kernels),
#      tests/test_cuda_attention (the attention ops forward and backward against the CPU on
#      tile-edge shapes, every path) and tests/test_cuda (the whole model against the CPU:
#      fp32, bf16 WMMA and SIMT attention, window, GQA, head dim 128, YaRN + document mask,
#      accumulation, recompute, memory plan == allocation), with each block's threads run
#      in forward order; then the op and attention tests again warp-serial (each warp alone
#      up to the next block barrier), in reverse and in a seeded random order (CUEMU_ORDER),
#      and test_cuda's case 1 in the seeded random order;
#   2. tests/test_cuda.sh with the emulated binary: train.backend=cuda training, resume
#      CPU -> CUDA and CUDA -> CPU, determinism, in-loop device evaluation, host-MPI data
#      parallelism, and NCCL ZeRO-1 on two emulated devices (W=2 vs W=1, a lost peer);
#   3. tests/test_cuda_shard.sh: dist.shard grads and full over NCCL on 2 and 4 emulated
#      devices (parity with the CPU, bitwise run to run and with ZeRO-1, a lost peer);
#   4. scripts/gpu-check.sh's training-step parity: tool_parity_dump backend=cuda (fp32,
#      bf16; 3 steps) against the float64 PyTorch reference (tests/ref/check_parity.py, the
#      bf16 dump with --bf16).
# The measured time of this test is in the README.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-emu
command -v python3 >/dev/null || { echo "FAIL: the emulation's nvcc stand-in needs python3"; exit 1; }
log=$(mktemp); trap 'rm -f "$log"' EXIT
if ! make -s CUDA_EMU=1 BUILD=$B -j"$(nproc)" $B/olmo $B/tests/test_cuda $B/tests/test_cuda_attention $B/tests/test_backend_ops $B/tests/test_cuemu $B/tests/test_cuemu_cost $B/tests/tool_parity_dump >"$log" 2>&1; then
  grep -v "pragma unroll" "$log" | tail -40
  echo "FAIL: the emulated build (make CUDA_EMU=1 BUILD=$B) failed"
  exit 1
fi
export OMP_NUM_THREADS=1
t0=$(date +%s)
$B/tests/test_cuemu   # the emulation's own refusals and aborts (the cuemu: lines are its diagnostics)
$B/tests/test_cuemu_cost          # the cost model's counter against known conflicts
$B/tests/test_cuemu_cost table 256   # and what it counts for attention
$B/tests/test_backend_ops
$B/tests/test_cuda_attention
$B/tests/test_cuda
# Every op alone in each order; the whole model (test_cuda case 1: ~60 s an order here) in
# the seeded random one only: each kernel it launches is one test_backend_ops or
# test_cuda_attention already ran in all three orders, so the other two whole-model runs
# repeated that coverage for 2 minutes of the suite.
for order in warps reverse random:7; do
  echo "== CUEMU_ORDER=$order: test_backend_ops, test_cuda_attention"
  CUEMU_ORDER=$order $B/tests/test_backend_ops | tail -1
  CUEMU_ORDER=$order $B/tests/test_cuda_attention | tail -1
done
echo "== CUEMU_ORDER=random:7: test_cuda case 1"
CUEMU_ORDER=random:7 OLMO_TEST_CUDA_CASE=1 $B/tests/test_cuda | grep -E "worst|determinism|passed|FAIL"
t1=$(date +%s)
OLMO_BIN="$PWD/$B/olmo" CUEMU_DEVICES=2 OLMO_TEST_NCCL_RANKS=2 bash tests/test_cuda.sh
t2=$(date +%s)
OLMO_BIN="$PWD/$B/olmo" CUEMU_DEVICES=4 OLMO_TEST_NCCL_RANKS=4 bash tests/test_cuda_shard.sh
t3=$(date +%s)
pd=$(mktemp -d); trap 'rm -f "$log"; rm -rf "$pd"' EXIT
for prec in fp32 bf16; do
  $B/tests/tool_parity_dump "$pd/$prec" backend=cuda precision=$prec steps=3 >/dev/null
  out=$(/usr/bin/python3 tests/ref/check_parity.py "$pd/$prec" $([ $prec = bf16 ] && echo --bf16)) ||
    { echo "$out"; echo "FAIL: the CUDA backend's $prec steps against the reference"; exit 1; }
  echo "== parity of the CUDA backend's $prec steps with the reference: $(tail -2 <<<"$out" | tr '\n' ' ')"
done
t4=$(date +%s)
echo "test_cuda_emu.sh: test_cuda $((t1 - t0)) s, test_cuda.sh $((t2 - t1)) s, test_cuda_shard.sh $((t3 - t2)) s, parity $((t4 - t3)) s"
