#!/usr/bin/env bash
# gpu-check.sh OUTDIR: the one prepared GPU session for the CUDA backend (docs/cuda.md).
# Runs on a machine with one NVIDIA GPU (an H200 here). The whole check fits in 7.5 minutes
# (BUDGET_S = 450 s: every step's limit is cut to what is left of it), so a 15-minute
# device session can rerun it once after a fix. NEVER RUN ON A GPU in its current form
# (the ops bench, SDPA, ncu and prediction steps were added without a device). Steps, each
# under its own time limit:
#   env          nvidia-smi, nvcc, torch/transformers versions, clocks (SM, memory:
#                current and maximum), power, temperature                          10 s
#   build        prebuilt binaries from build-gpu-prebuilt/ (made here with --prepare and
#                carried); without them `make BUILD=build-gpu MPI=0 NCCL=0` on the GPU
#                machine (200 s: that case does not fit the 5 minutes)            15 s
#   libs         our binaries' shared libraries; a CUDA library not found where the build
#                machine had it (/usr/local/cuda/lib64) is looked up with ldconfig -p, in
#                /usr/local/cuda*/lib64 and in the nvidia/*/lib directories of python's
#                torch wheels, and the directories found go into LD_LIBRARY_PATH
#   test_cuda    GPU vs CPU: fp32 tight, bf16 with stated tolerances, determinism,
#                YaRN + document mask                                             40 s
#                a failed case is rerun alone under CUDA_LAUNCH_BLOCKING=1 (the error
#                then names the failing launch), appended to test_cuda.log         25 s
#   attention    test_cuda_attention: the attention ops vs the CPU on tile-edge shapes,
#                every path (fp32, bf16 SIMT, bf16 WMMA), appended to test_cuda.log 15 s
#   backend_ops  test_backend_ops: every op of kernels/ops.h, forward and backward, on
#                cpu, cpu-bf16, cuda-fp32 and cuda-bf16 vs the CPU fp32 kernels     10 s
#   launch_codes test_cuemu: the launches a device refuses, with its error codes (the
#                emulation returns the same ones: a difference is a bug there)    10 s
#   sanitizer    compute-sanitizer (where the machine has it) on test_cuda_attention:
#                racecheck (shared-memory races between threads of a block: the one
#                class of bug the CPU emulation cannot show) and memcheck, appended to
#                test_cuda.log                                                     35 s
#   test_cuda_sh checkpoints across backends (CPU -> GPU -> CPU), GPU determinism  55 s
#   shard_w1     tests/test_cuda_shard.sh on one GPU: dist.shard grads and full (the part
#                buffers, gather stream, events) bitwise vs the unsharded step, appended
#                to test_cuda_sh.log                                               30 s
#   hf_compare   our logits (CPU, GPU fp32, GPU bf16) vs HF transformers Olmo3, then
#                YaRN (CPU logits, full layers only) vs HF's Olmo3 YaRN: one HF_YARN line
#                (match | HF applies YaRN to all layers, the known transformers
#                regression, reported but not failed | MISMATCH | ERROR)             40 s
#   bench_ours   training step, T = 8192, micro-batch 1, 3 timed steps after 1 warm-up: the
#                full OLMo 3 7B with activation recompute (70 s), and 7B width with 16
#                of its 32 layers (40 s), nvidia-smi sampled meanwhile (peak device
#                memory in use, SM / memory clocks under load)                    110 s
#   ops_bench    tests/cuda_ops_bench: each op family alone at 7B shapes (attention fwd /
#                bwd at windows 8192 and 4096, norms, RoPE, SwiGLU, the qkv and MLP-up
#                matmuls, one layer's AdamW), cudaEvents, 3 reps after 1 warm-up;
#                appended to bench_ours.log                                         30 s
#   bench_torch  HF Olmo3, 16 layers, eager (45 s); torch.compile only with the time
#                left after everything else (last), at most 60 s (else skipped, said so)
#   sdpa         scripts/gpu_attn_sdpa.py: torch's flash SDPA, fwd and bwd, B 1, 32
#                heads, T 8192, D 128, causal; appended to bench_torch.log          30 s
#   predict      the measured attention times beside scripts/gpu_cost_model.sh's counted
#                predictions (docs/gpu_cost_model.txt) and beside SDPA
#   ncu          where the machine has Nsight Compute: the attention kernels (fwd, Di,
#                dK/dV, dQ) of one ops_bench pass at T 4096: time, shared-memory
#                wavefronts and bank conflicts (the cost model's counts), tensor-pipe
#                instructions, occupancy, registers; appended to bench_ours.log      60 s
# Multi-rank NCCL is not exercised: NCCL refuses two ranks on one device and the session
# has one GPU (the prebuilt binaries are MPI=0). Every failing step's log tail goes into
# the summary. Writes OUTDIR/{env,build,test_cuda,test_cuda_sh,hf_compare,bench_ours,
# bench_torch}.log and OUTDIR/summary.txt (8 files: the device tool returns at most 8);
# the summary is printed last.
#
#   scripts/gpu-check.sh --prepare   (on the build machine) compiles MPI=0 NCCL=0 binaries
#       for a generic x86-64-v3 CPU into build-gpu-prebuilt/ with the shared libraries
#       they need beyond glibc and CUDA (carry that folder to the GPU machine).
set -u
if [ -n "${1:-}" ] && [ "$1" != "--prepare" ]; then mkdir -p "$1" && OUT=$(cd "$1" && pwd); fi
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "${1:-}" = "--prepare" ]; then
  P=build-gpu-prebuilt
  rm -rf "$P" && mkdir -p "$P/bin" "$P/lib"
  # DT_RPATH (not RUNPATH) $ORIGIN/../lib: found by the binaries and by their libraries'
  # own dependencies (openblas -> gfortran), without an LD_LIBRARY_PATH that would leak
  # these older libraries into python3 and torch. NCCL=0: one GPU, one rank, and
  # libnccl (hundreds of MB) need not travel.
  CFLAGS="-O3 -march=x86-64-v3" LDFLAGS="-Wl,--disable-new-dtags -Wl,-rpath,'\$\$ORIGIN/../lib'" \
    make -s BUILD=build-gpu-obj MPI=0 CUDA=1 NCCL=0 -j"$(nproc)" all || exit 1
  cp build-gpu-obj/olmo build-gpu-obj/tests/test_cuda build-gpu-obj/tests/test_cuda_attention build-gpu-obj/tests/test_backend_ops build-gpu-obj/tests/test_cuemu build-gpu-obj/tests/test_cuda_bench build-gpu-obj/tests/cuda_ops_bench "$P/bin/"
  strip "$P"/bin/*
  for b in "$P"/bin/*; do
    ldd "$b" | awk '$3 ~ /^\// {print $3}'
  done | sort -u | grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcudart|libcublas[^/]*|libnccl|libstdc\+\+|libgcc_s|libz|libcrypto)\.so' |
    while read -r l; do cp -L "$l" "$P/lib/"; done
  du -sh "$P"; ls "$P/lib"
  exit 0
fi

[ -n "${OUT:-}" ] || { echo "usage: scripts/gpu-check.sh OUTDIR | --prepare" >&2; exit 2; }
S="$OUT/summary.txt"
: >"$S"
T_START=$(date +%s)
BUDGET_S=${GPU_CHECK_BUDGET_S:-450}
FAILED=()
note() { echo "$*" | tee -a "$S"; }
left() { echo $(( BUDGET_S - ($(date +%s) - T_START) )); }
# run NAME LIMIT_S CMD...: output to OUTDIR/NAME.log (appended with APPEND=1), status line
# to the summary; the limit is cut to the time left in the budget.
run() {
  local name=$1 limit=$2; shift 2
  local l; l=$(left)
  [ "$limit" -le "$l" ] || limit=$l
  if [ "$limit" -lt 5 ]; then note "[$name] SKIPPED: the ${BUDGET_S}s budget is spent"; FAILED+=("$name"); return 125; fi
  local t0; t0=$(date +%s)
  local rc=0
  local log=$OUT/${LOG:-$name}.log   # LOG=other: into other.log (the tool returns at most 8 files)
  if [ "${APPEND:-0}" = 1 ]; then timeout -k 5 "$limit" "$@" >>"$log" 2>&1 || rc=$?
  else timeout -k 5 "$limit" "$@" >"$log" 2>&1 || rc=$?; fi
  local dt=$(( $(date +%s) - t0 ))
  local what=ok; [ $rc = 0 ] || what="FAILED rc=$rc"; [ $rc = 124 ] && what="TIMEOUT after ${limit}s"
  note "[$name] $what (${dt}s)"
  [ $rc = 0 ] || FAILED+=("$name")
  return $rc
}
excerpt() { grep -E "$2" "$OUT/$1.log" 2>/dev/null | head -"${3:-12}" | sed 's/^/  /' | tee -a "$S"; }
# noskip NAME: the GPU tests exit 0 with "SKIP: no CUDA device (...)" where they see no
# usable device (a driver older than the CUDA 13 runtime, no device visible); on the GPU
# machine that is a failure, not a pass.
noskip() {
  local l; l=$(grep -m1 '^SKIP: no CUDA device' "$OUT/$1.log" 2>/dev/null) || return 0
  note "[$1] FAILED: the test saw no CUDA device: $l"; FAILED+=("$1")
}

note "gpu-check $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), budget ${BUDGET_S}s"
run env 10 bash -c 'nvidia-smi; nvcc --version; python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"; nproc; free -g
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu --format=csv'
grep -m1 -E "H200|H100|NVIDIA" "$OUT/env.log" | tee -a "$S"
grep -A1 -m1 "^clocks.sm" "$OUT/env.log" | sed 's/^/  idle: /' | tee -a "$S"
note "multi-rank NCCL: not run (one GPU; NCCL refuses two ranks on one device; the binaries are MPI=0)"

# ---- build (or prebuilt)
BIN=""
if [ -x build-gpu-prebuilt/bin/olmo ]; then
  if run build 15 build-gpu-prebuilt/bin/olmo --help; then BIN=$ROOT/build-gpu-prebuilt/bin; fi
fi
if [ -z "$BIN" ]; then
  note "no usable prebuilt binaries: building here (about 200 s: this run will not fit ${BUDGET_S}s)"
  BUDGET_S=$(( BUDGET_S + 200 ))
  if APPEND=1 run build 200 make -s BUILD=build-gpu MPI=0 CUDA=1 NCCL=0 -j"$(nproc)" all; then BIN=$ROOT/build-gpu; fi
fi
if [ -z "$BIN" ]; then
  note "no binaries: stopping"
  tail -30 "$OUT/build.log" | sed 's/^/  | /' | tee -a "$S"
  exit 1
fi
TC=$BIN/test_cuda; TB=$BIN/test_cuda_bench; TA=$BIN/test_cuda_attention
[ -x "$TC" ] || TC=$BIN/tests/test_cuda
[ -x "$TB" ] || TB=$BIN/tests/test_cuda_bench
[ -x "$TA" ] || TA=$BIN/tests/test_cuda_attention
TE=$BIN/test_cuemu; [ -x "$TE" ] || TE=$BIN/tests/test_cuemu
TO=$BIN/test_backend_ops; [ -x "$TO" ] || TO=$BIN/tests/test_backend_ops
TOB=$BIN/cuda_ops_bench; [ -x "$TOB" ] || TOB=$BIN/tests/cuda_ops_bench
export OLMO_BIN=$BIN/olmo
export PYTHON=$(command -v python3)

# ---- libraries: CUDA not under /usr/local/cuda on this machine
missing=$(ldd "$BIN/olmo" "$TC" 2>/dev/null | awk '/not found/ {print $1}' | sort -u)
if [ -n "$missing" ]; then
  dirs=$( { ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib 2>/dev/null
            ldconfig -p 2>/dev/null | awk -F'=> ' '/libcu|libnccl/ {print $2}' | xargs -r -n1 dirname
            python3 -c 'import glob, os, nvidia; [print(d) for p in nvidia.__path__ for d in glob.glob(os.path.join(p, "*", "lib"))]' 2>/dev/null
          } | sort -u)
  add=""
  for lib in $missing; do
    hit=""
    for d in $dirs; do [ -e "$d/$lib" ] && { hit=$d; break; }; done
    if [ -n "$hit" ]; then note "libs: $lib found in $hit"; case ":$add:" in *":$hit:"*) ;; *) add=${add:+$add:}$hit;; esac
    else note "libs: $lib NOT FOUND (ldconfig -p, /usr/local/cuda*, python nvidia/*/lib)"; fi
  done
  [ -z "$add" ] || export LD_LIBRARY_PATH=$add${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  still=$(ldd "$BIN/olmo" "$TC" 2>/dev/null | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
  [ -z "$still" ] || note "libs: still missing after the fallback: $still"
else
  note "libs: all found ($(ldd "$TC" | awk '/libcudart|libcublasLt/ {print $3}' | tr '\n' ' '))"
fi

# ---- correctness
if ! run test_cuda 40 "$TC"; then
  # The case that failed (the last "== case N" header before the first FAIL, or before a
  # crash), alone again with synchronous launches.
  c=$(awk '/^== case / {c = $3} /^FAIL/ {print c; f = 1; exit} END {if (!f) print c}' "$OUT/test_cuda.log" | tr -d ':')
  { echo; echo "==== rerun: OLMO_TEST_CUDA_CASE=${c:-all} CUDA_LAUNCH_BLOCKING=1"; } >>"$OUT/test_cuda.log"
  APPEND=1 run test_cuda 25 env OLMO_TEST_CUDA_CASE="${c:-}" CUDA_LAUNCH_BLOCKING=1 "$TC"
fi
noskip test_cuda
excerpt test_cuda "^== |memory plan|logits|gradients|loss:|determinism|worst|FAIL|passed|SKIP|error|rerun" 24
{ echo; echo "==== test_cuda_attention"; } >>"$OUT/test_cuda.log"
APPEND=1 LOG=test_cuda run attention 15 "$TA"
{ echo; echo "==== test_backend_ops"; } >>"$OUT/test_cuda.log"
APPEND=1 LOG=test_cuda run backend_ops 10 "$TO"
excerpt test_cuda "^(cpu|cuda)|test_backend_ops:" 8
# the launch refusals the emulation imitates: the real device's error codes
{ echo; echo "==== test_cuemu (launch refusals and their error codes, as the emulation gives them)"; } >>"$OUT/test_cuda.log"
APPEND=1 LOG=test_cuda run launch_codes 10 "$TE"
excerpt test_cuda "^(1025|grid y|64 KiB|256 threads|legal)|test_cuemu:" 8
grep -q "^SKIP: no CUDA device" "$OUT/test_cuda.log" && { note "[attention] FAILED: no CUDA device seen"; FAILED+=(attention); }
excerpt test_cuda "^(fp32|bf16) (simt|wmma)|test_cuda_attention:" 16
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$SAN" ]; then
  { echo; echo "==== compute-sanitizer racecheck + memcheck: test_cuda_attention"; } >>"$OUT/test_cuda.log"
  APPEND=1 LOG=test_cuda run sanitizer 35 bash -c "'$SAN' --tool racecheck --error-exitcode 3 '$TA' && '$SAN' --tool memcheck --error-exitcode 3 '$TA'"
  excerpt test_cuda "ERROR SUMMARY|RACECHECK SUMMARY|Race reported|Invalid" 8
else
  note "[sanitizer] compute-sanitizer not found on this machine: not run"
fi
run test_cuda_sh 55 bash tests/test_cuda.sh
noskip test_cuda_sh
excerpt test_cuda_sh "continue|determinism|FAIL|passed|SKIP|mismatch|step |error" 12
# dist.shard grads/full on one GPU (tests/test_cuda_shard.sh's W = 1 part; the binaries are
# MPI=0, so its multi-rank part says SKIP): the part buffers, the gather stream and its
# events on a real device, bitwise against the unsharded step; appended to test_cuda_sh.log
{ echo; echo "==== test_cuda_shard.sh (shard_w1)"; } >>"$OUT/test_cuda_sh.log"
APPEND=1 LOG=test_cuda_sh run shard_w1 30 bash tests/test_cuda_shard.sh
excerpt test_cuda_sh "one GPU: dist.shard|W=1 .*(failed|!=)|test_cuda_shard.sh: all" 4
WORK=$(mktemp -d)
run hf_compare 40 python3 scripts/gpu_hf_compare.py --olmo "$BIN/olmo" --test-cuda "$TC" --work "$WORK/hf"
excerpt hf_compare "rel-to-max|HF_COMPARE|HF_YARN|rotary|Error|error" 14
rm -rf "$WORK"

# ---- benchmark: OLMo 3 7B shapes, T = 8192, micro-batch 1, bf16.
# (a) the full 7B (32 layers) with activation recompute: `olmo info olmo3-7b --backend
#     cuda` plans 129.7 GiB on one GPU (bf16 weights, one fp32 gradient, fp32 master +
#     Adam, fp32 residual stream, one block's activations);
# (b) 16 of the 32 layers without recompute, the side-by-side with PyTorch.
# nvidia-smi every 500 ms while the benchmarks run: peak memory in use, clocks under load
SMI_LOG=$(mktemp)
nvidia-smi --query-gpu=memory.used,memory.total,clocks.sm,clocks.mem,power.draw --format=csv,noheader,nounits -lms 500 >"$SMI_LOG" 2>/dev/null &
SMI_PID=$!
run bench_ours 110 bash -c "timeout -k 5 70 '$TB' preset=olmo3-7b T=8192 B=1 steps=3 warmup=1 precision=bf16 recompute=1;
  echo '---'; timeout -k 5 40 '$TB' preset=olmo3-7b layers=16 T=8192 B=1 steps=3 warmup=1 precision=bf16"
noskip bench_ours
excerpt bench_ours "RESULT|device:|^step|error|note|bench:" 14
{ echo; echo "==== cuda_ops_bench T=8192 reps=3 (each op family alone, cudaEvents)"; } >>"$OUT/bench_ours.log"
APPEND=1 LOG=bench_ours run ops_bench 30 "$TOB" T=8192 reps=3
kill "$SMI_PID" 2>/dev/null; wait "$SMI_PID" 2>/dev/null
{ echo; echo "==== nvidia-smi during the benchmarks (memory.used MiB, memory.total, clocks.sm MHz, clocks.mem, power W)"; cat "$SMI_LOG"; } >>"$OUT/bench_ours.log"
awk -F', *' 'NF >= 5 {n++; if ($1 > m) m = $1; t = $2; if (!lo || $3 < lo) lo = $3; if ($3 > hi) hi = $3; if ($5 > p) p = $5}
  END {if (n) printf "  nvidia-smi (%d samples): peak memory in use %d of %d MiB; SM clock %d-%d MHz; peak power %.0f W\n", n, m, t, lo, hi, p}' "$SMI_LOG" | tee -a "$S"
rm -f "$SMI_LOG"
excerpt bench_ours "^MEASURE|^MEMORY" 16
eager=0
run bench_torch 45 env PYTHONUNBUFFERED=1 python3 scripts/gpu_bench_torch.py --layers 16 --T 8192 --steps 2 --no-compile || eager=$?
# (after the eager run, which starts bench_torch.log afresh)
{ echo; echo "==== flash SDPA (torch), B 1, 32 heads, T 8192, D 128, causal"; } >>"$OUT/bench_torch.log"
APPEND=1 LOG=bench_torch run sdpa 30 env PYTHONUNBUFFERED=1 python3 scripts/gpu_attn_sdpa.py --T 8192 --reps 3
excerpt bench_torch "^SDPA|^torch |Error" 4
# predicted (the counted cost model, docs/gpu_cost_model.txt) beside measured, per layer
if [ -f docs/gpu_cost_model.txt ]; then
  note "predict: attention per layer, ms: measured (ours) | predicted by the cost model ($(head -1 docs/gpu_cost_model.txt | sed 's/^# //; s/:.*//')) | flash SDPA"
  for wl in "8192 full" "4096 sliding"; do
    set -- $wl
    meas_f=$(awk -v n="attn_fwd_w$1" '$1 == "MEASURE" && $2 == n {print $4}' "$OUT/bench_ours.log")
    meas_b=$(awk -v n="attn_bwd_w$1" '$1 == "MEASURE" && $2 == n {print $4}' "$OUT/bench_ours.log")
    pred_f=$(awk -v l="$2" '$1 == "PREDICT" && $2 == "attn_fwd" && $3 == l {print $5}' docs/gpu_cost_model.txt)
    pred_b=$(awk -v l="$2" '$1 == "PREDICT" && ($2 == "attn_dkdv" || $2 == "attn_dq") && $3 == l {s += $5} END {if (NR) printf "%.3f", s}' docs/gpu_cost_model.txt)
    sd_f=$(awk -v n="attn_fwd_w$1" '$1 == "SDPA" && $2 == n {print $4}' "$OUT/bench_torch.log")
    sd_b=$(awk -v n="attn_bwd_w$1" '$1 == "SDPA" && $2 == n {print $4}' "$OUT/bench_torch.log")
    note "  $2 (window $1): fwd ${meas_f:-?} | ${pred_f:-?} | ${sd_f:--}; bwd ${meas_b:-?} | ${pred_b:-?} (dK/dV + dQ, Di not modelled) | ${sd_b:--}"
  done
  grep "^PREDICT attention micro_batch" docs/gpu_cost_model.txt | sed 's/^/  /' | tee -a "$S"
  # the whole step: the bench's 7B step (1 micro-batch + the optimizer) beside the model's
  meas_step=$(awk '/^RESULT olmo.c cuda/ && /layers=32/ {for (i = 2; i <= NF; i++) if ($i == "s/step") print $(i - 1)}' "$OUT/bench_ours.log" | head -1)
  pred_step=$(awk '$1 == "PREDICT" && $2 == "bench_step_s" {print $3}' docs/gpu_cost_model.txt)
  note "predict: 7B bench step (recompute, T 8192, B 1), s: measured ${meas_step:-?} | predicted ${pred_step:-?}"
  grep "^PREDICT step_7b" docs/gpu_cost_model.txt | sed 's/^/  /' | tee -a "$S"
else
  note "predict: docs/gpu_cost_model.txt missing (scripts/gpu_cost_model.sh writes it): no predictions to compare"
fi
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  # one pass at T 4096: forward (warm-up + 1 timed) then the backward's Di, dK/dV, dQ
  { echo; echo "==== ncu: attention kernels of cuda_ops_bench T=4096 reps=1"; } >>"$OUT/bench_ours.log"
  APPEND=1 LOG=bench_ours run ncu 60 "$NCU" --kernel-name regex:attn_ --launch-count 5 --section SpeedOfLight --section LaunchStats \
    --section Occupancy --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed_pipe_tensor.sum,gpu__time_duration.sum \
    "$TOB" T=4096 reps=1
  excerpt bench_ours "attn_[a-z_]*wmma|attn_di|Duration|wavefronts_mem_shared|bank_conflicts|pipe_tensor|Registers Per|Achieved Occupancy|==PROF==|ERR" 40
else
  note "[ncu] Nsight Compute not found on this machine: not run"
fi
l=$(left)
if [ "$eager" != 0 ]; then
  note "[bench_torch] torch.compile skipped: the eager run failed"
elif [ "$l" -ge 30 ]; then
  [ "$l" -le 60 ] || l=60
  { echo; echo "==== torch.compile (limit ${l}s: what is left of the budget)"; } >>"$OUT/bench_torch.log"
  APPEND=1 run bench_torch "$l" env PYTHONUNBUFFERED=1 python3 scripts/gpu_bench_torch.py --layers 16 --T 8192 --steps 2 --compile-only
else
  note "[bench_torch] torch.compile skipped: ${l}s left of the ${BUDGET_S}s budget"
fi
excerpt bench_torch "RESULT|out of memory|Error|====" 8

# ---- every failing step's log, the tail of it, in the summary (the logs come back too,
# but the summary is what the device tool prints).
for f in $(printf '%s\n' "${FAILED[@]:-}" | sort -u); do
  [ -f "$OUT/$f.log" ] || continue
  note "---- $f.log (last 40 lines)"
  tail -40 "$OUT/$f.log" | sed 's/^/  | /' | tee -a "$S"
done
note "total $(( $(date +%s) - T_START ))s; failed: ${FAILED[*]:-none}"
echo "=== summary ($S) ==="
cat "$S"
