#!/usr/bin/env bash
# gpu-check.sh OUTDIR: the one prepared GPU session for the CUDA backend (docs/cuda.md).
# Runs on a machine with one NVIDIA GPU (an H200 here), each step under its own time limit
# so one failure cannot eat the budget (limits add up to 545 s; a passing run is shorter):
#   build        prebuilt binaries from build-gpu-prebuilt/ (made here with --prepare and
#                carried), else `make BUILD=build-gpu MPI=0` on the GPU machine
#   test_cuda    GPU vs CPU on olmo3-tiny: fp32 mode tight, bf16 mode with stated
#                tolerances, determinism
#   test_cuda.sh checkpoints across backends (CPU -> GPU -> CPU), GPU run determinism
#   hf_compare   our logits (CPU, GPU fp32, GPU bf16) vs HF transformers Olmo3, same weights
#   bench_ours   training step, T = 8192, micro-batch 1: the full OLMo 3 7B with activation
#                recompute, and 7B width with 16 of its 32 layers without
#   bench_torch  HF Olmo3 (same shapes), eager and torch.compile
# Writes OUTDIR/{env,build,test_cuda,test_cuda_sh,hf_compare,bench_ours,bench_torch}.log and
# OUTDIR/summary.txt (8 files: the device tool returns at most 8).
#
#   scripts/gpu-check.sh --prepare   (on the build machine) compiles MPI=0 binaries for a
#       generic x86-64-v3 CPU into build-gpu-prebuilt/ with the shared libraries they need
#       beyond glibc and CUDA (carry that folder to the GPU machine).
set -u
if [ -n "${1:-}" ] && [ "$1" != "--prepare" ]; then mkdir -p "$1" && OUT=$(cd "$1" && pwd); fi
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "${1:-}" = "--prepare" ]; then
  P=build-gpu-prebuilt
  rm -rf "$P" && mkdir -p "$P/bin" "$P/lib"
  # DT_RPATH (not RUNPATH) $ORIGIN/../lib: found by the binaries and by their libraries'
  # own dependencies (openblas -> gfortran), without an LD_LIBRARY_PATH that would leak
  # these older libraries into python3 and torch.
  CFLAGS="-O3 -march=x86-64-v3" LDFLAGS="-Wl,--disable-new-dtags -Wl,-rpath,'\$\$ORIGIN/../lib'" \
    make -s BUILD=build-gpu-obj MPI=0 CUDA=1 -j"$(nproc)" all || exit 1
  cp build-gpu-obj/olmo build-gpu-obj/tests/test_cuda build-gpu-obj/tests/test_cuda_bench "$P/bin/"
  strip "$P"/bin/*
  for b in "$P"/bin/*; do
    ldd "$b" | awk '$3 ~ /^\// {print $3}'
  done | sort -u | grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcudart|libcublas[^/]*|libstdc\+\+|libgcc_s|libz|libcrypto)\.so' |
    while read -r l; do cp -L "$l" "$P/lib/"; done
  du -sh "$P"; ls "$P/lib"
  exit 0
fi

[ -n "${OUT:-}" ] || { echo "usage: scripts/gpu-check.sh OUTDIR | --prepare" >&2; exit 2; }
S="$OUT/summary.txt"
: >"$S"
T_START=$(date +%s)
note() { echo "$*" | tee -a "$S"; }
# run NAME LIMIT_S CMD...: output to OUTDIR/NAME.log, status line to the summary
run() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s) rc=0
  timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  local dt=$(( $(date +%s) - t0 ))
  local what=ok; [ $rc = 0 ] || what="FAILED rc=$rc"; [ $rc = 124 ] && what="TIMEOUT after ${limit}s"
  note "[$name] $what (${dt}s)"
  return $rc
}

note "gpu-check $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
run env 20 bash -c 'nvidia-smi; nvcc --version; python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"; nproc; free -g'
grep -m1 -E "H200|H100|NVIDIA" "$OUT/env.log" | tee -a "$S"

# ---- build (or prebuilt)
BIN=""
if [ -x build-gpu-prebuilt/bin/olmo ]; then
  if run build 20 build-gpu-prebuilt/bin/olmo --help; then BIN=$ROOT/build-gpu-prebuilt/bin; fi
fi
if [ -z "$BIN" ]; then
  if run build 200 make -s BUILD=build-gpu MPI=0 CUDA=1 -j"$(nproc)" all; then BIN=$ROOT/build-gpu; fi
fi
if [ -z "$BIN" ]; then note "no binaries: stopping (see build.log)"; exit 1; fi
TC=$BIN/test_cuda; TB=$BIN/test_cuda_bench
[ -x "$TC" ] || TC=$BIN/tests/test_cuda
[ -x "$TB" ] || TB=$BIN/tests/test_cuda_bench
export OLMO_BIN=$BIN/olmo
export PYTHON=$(command -v python3)

# ---- correctness
run test_cuda 45 "$TC"
grep -E "logits|gradients|loss:|determinism|FAIL|passed|SKIP" "$OUT/test_cuda.log" | head -20 | sed 's/^/  /' | tee -a "$S"
run test_cuda_sh 80 bash tests/test_cuda.sh
grep -E "continue|determinism|FAIL|passed|SKIP|mismatch|step " "$OUT/test_cuda_sh.log" | head -12 | sed 's/^/  /' | tee -a "$S"
WORK=$(mktemp -d)
run hf_compare 50 python3 scripts/gpu_hf_compare.py --olmo "$BIN/olmo" --test-cuda "$TC" --work "$WORK/hf"
grep -E "rel-to-max|HF_COMPARE|Error|error" "$OUT/hf_compare.log" | head -10 | sed 's/^/  /' | tee -a "$S"
rm -rf "$WORK"

# ---- benchmark: OLMo 3 7B shapes, T = 8192, micro-batch 1, bf16.
# (a) the full 7B (32 layers) with activation recompute: fp32 master + grads + Adam m, v
#     + bf16 weights are 131 GB, which leaves ~8 GB for activations on the H200's 141 GB:
#     only recompute (one block's activations + the residual stream, ~5 GB) fits;
# (b) 16 of the 32 layers without recompute (~95 GB), the side-by-side with PyTorch.
run bench_ours 210 bash -c "timeout -k 5 130 '$TB' preset=olmo3-7b T=8192 B=1 steps=2 warmup=1 precision=bf16 recompute=1;
  echo '---'; timeout -k 5 75 '$TB' preset=olmo3-7b layers=16 T=8192 B=1 steps=2 warmup=1 precision=bf16"
grep -E "RESULT|device:|^step|error|bench:" "$OUT/bench_ours.log" | head -14 | sed 's/^/  /' | tee -a "$S"
run bench_torch 120 env PYTHONUNBUFFERED=1 python3 scripts/gpu_bench_torch.py --layers 16 --T 8192 --steps 2
grep -E "RESULT|out of memory|Error" "$OUT/bench_torch.log" | head -6 | sed 's/^/  /' | tee -a "$S"

note "total $(( $(date +%s) - T_START ))s"
echo "=== summary ($S) ==="
cat "$S"
