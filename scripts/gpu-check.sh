#!/usr/bin/env bash
# gpu-check.sh OUTDIR: the one prepared GPU session for the CUDA backend (docs/cuda.md, "The
# GPU session"). Runs on a machine with one NVIDIA GPU (an H100 or H200), decisive facts
# first, each part's log written into OUTDIR as it runs; the summary (OUTDIR/summary.txt)
# grows line by line and is printed last. Budget BUDGET_S = 450 s: each part's limit is cut
# to what is left of it, so what comes last is what a slow machine loses. Parts and their
# limits (sum 428 s + torch.compile only with what is left):
#   env           nvidia-smi, GPU memory (total, free), nvcc, torch/transformers, clocks,
#                 power, temperature                                                 10 s
#   unpack/libs   build-gpu-prebuilt.tar.xz (scripts/gpu-check.sh --prepare, carried over)
#                 unpacked; its MANIFEST says which glibc and CUDA libraries it needs; every
#                 binary's ldd is checked: missing CUDA libraries are looked up (ldconfig -p,
#                 /usr/local/cuda*, python's nvidia/*/lib), libstdc++/libgcc_s too old or
#                 missing come from the bundle's lib/fallback, and a glibc older than the
#                 binaries need switches to the bundled glibc (lib/glibc: each binary run
#                 through the bundle's ld-linux with wrappers in wrap/). Without the archive
#                 the script builds here (needs the -dev packages; ~200 s; said so)
#   test_cuda     GPU vs CPU: fp32 tight, bf16 with stated tolerances, determinism,
#                 YaRN + document mask (a failed case is rerun alone under
#                 CUDA_LAUNCH_BLOCKING=1, 25 s, only then)                           40 s
#   attention     test_cuda_attention: the attention ops vs the CPU on tile-edge shapes  12 s
#   backend_ops   test_backend_ops: every op of kernels/ops.h on cpu / cuda fp32 / bf16 10 s
#   launch_codes  test_cuemu: the launches a device refuses and their error codes      6 s
#   ops_bench     tests/cuda_ops_bench at T 8192 on random inputs: attention fwd/bwd
#                 (windows 8192, 4096), norms, RoPE, SwiGLU, every GEMM of a block (qkv,
#                 attention output, MLP up and down, fwd and bwd) and the LM head (GEMMs in
#                 1024-token chunks, loss rows), AdamW; each beside the cost model's
#                 prediction (PREDICT: GEMMs at 70% of peak, memory at 85% of HBM, attention
#                 counted: docs/gpu_cost_model.txt)                                  35 s
#   shape         the largest 7B-shaped configuration (d 4096, 32 heads, MLP 11008, vocab
#                 100352; T 8192, micro-batch 1) whose `olmo info --backend cuda` plan fits
#                 the GPU's memory with margin (plan <= total - 6% - 2 GiB): layers 32, 24,
#                 16, 12, 8, each without then with recompute
#   bench_ours    test_cuda_bench at that shape: tokens/s, MFU (both FLOP counts), the step
#                 beside PREDICT when the shape is the cost model's (32 layers,
#                 recompute); nvidia-smi sampled (peak memory, SM clock, power)        65 s
#   parity        one training step (3, each from the state before it) of the CUDA
#                 backend against the float64 PyTorch reference (tests/ref/check_parity.py):
#                 logits, loss parts, grad norm, lr, every gradient, parameters, m, v;
#                 fp32 mode at tests/ref/README.md's tolerances, bf16 mode at test_cuda's
#                 stated bf16 bounds (check_parity.py --bf16)                         30 s
#   bench_torch   HF Olmo3 at the same shape (--recompute: gradient checkpointing when
#                 ours recomputes), eager; OOM retries with half the layers           55 s
#   sdpa          torch SDPA at the attention shape, flash and cuDNN backends          20 s
#   hf_compare    our logits (CPU, GPU fp32, GPU bf16) vs HF transformers, then YaRN     35 s
#   test_cuda_sh  checkpoints across backends (CPU -> GPU -> CPU), GPU determinism      35 s
#   shard_w1      tests/test_cuda_shard.sh on one GPU (dist.shard grads/full)           15 s
#   ncu           Nsight Compute, --clock-control none (base clocks would skew the times
#                 against PREDICT), on the attention kernels at T 4096; "unavailable" (not
#                 FAILED) where it cannot attach (gVisor, counters not permitted)       35 s
#   sanitizer     compute-sanitizer racecheck + memcheck on test_cuda_attention;
#                 "unavailable" where it cannot run                                  25 s
#   torch_compile with what is left of the budget (at most 60 s; else "skipped")
# Logs (8 files): env, test_cuda, bench_ours, parity, bench_torch, hf_compare,
# test_cuda_sh .log and summary.txt. Multi-rank NCCL is not exercised (one GPU; the
# binaries are MPI=0).
#
#   scripts/gpu-check.sh --prepare   (on the build machine) compiles MPI=0 NCCL=0 binaries
#       for a generic x86-64-v3 CPU into build-gpu-prebuilt/ with the shared libraries they
#       need beyond CUDA (lib/: forced by DT_RPATH; lib/fallback: libstdc++, libgcc_s;
#       lib/glibc: the loader and C library, used only where the machine's glibc is too old)
#       and packs it into build-gpu-prebuilt.tar.xz: carry ["build-gpu-prebuilt.tar.xz"].
set -u
if [ -n "${1:-}" ] && [ "$1" != "--prepare" ]; then mkdir -p "$1" && OUT=$(cd "$1" && pwd); fi
cd "$(dirname "$0")/.."
ROOT=$PWD
P=build-gpu-prebuilt
ARCHIVE=$P.tar.xz
BINS="olmo test_cuda test_cuda_attention test_backend_ops test_cuemu test_cuda_bench cuda_ops_bench tool_parity_dump"
# the GLIBC_x.y symbol versions a file needs, highest last
glibc_need() { grep -aoE 'GLIBC_2\.[0-9]+' "$@" 2>/dev/null | sed 's/.*GLIBC_//' | sort -t. -k1,1n -k2,2n -u | tail -1; }
ver_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -t. -k1,1n -k2,2n | head -1)" = "$2" ]; }   # $1 >= $2

if [ "${1:-}" = "--prepare" ]; then
  rm -rf "$P" "$ARCHIVE" && mkdir -p "$P/bin" "$P/lib/fallback" "$P/lib/glibc"
  # DT_RPATH (not RUNPATH) $ORIGIN/../lib: found by the binaries and by their libraries'
  # own dependencies (openblas -> gfortran), ahead of LD_LIBRARY_PATH, without an
  # LD_LIBRARY_PATH that would leak these libraries into python3 and torch. NCCL=0: one
  # GPU, one rank, and libnccl (hundreds of MB) need not travel.
  CFLAGS="-O3 -march=x86-64-v3" LDFLAGS="-Wl,--disable-new-dtags -Wl,-rpath,'\$\$ORIGIN/../lib'" \
    make -s BUILD=build-gpu-obj MPI=0 CUDA=1 NCCL=0 -j"$(nproc)" all || exit 1
  for b in $BINS; do
    if [ -x "build-gpu-obj/tests/$b" ]; then cp "build-gpu-obj/tests/$b" "$P/bin/"; else cp "build-gpu-obj/$b" "$P/bin/" || exit 1; fi
  done
  strip "$P"/bin/*
  # every library the binaries resolve here, by kind: CUDA's stay behind (the GPU machine's
  # own, matching its driver); glibc's go to lib/glibc (the fallback loader's); libstdc++ and
  # libgcc_s to lib/fallback (the machine's own are used unless missing or too old: host
  # CUDA libraries may need a newer libstdc++ than ours); the rest to lib/ (always used)
  cuda_re='/(libcuda|libcudart|libcublas[^/]*|libnccl)\.so'
  glibc_re='/(libc|libm|libdl|librt|libpthread|libresolv|ld-linux[^/]*)\.so'
  cxx_re='/(libstdc\+\+|libgcc_s)\.so'
  ldd "$P"/bin/* | awk '$3 ~ /^\// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}' | sort -u >"$P/.libs"
  while read -r l; do
    if [[ $l =~ $cuda_re ]]; then echo "$(basename "$l")" >>"$P/.cuda"
    elif [[ $l =~ $glibc_re ]]; then cp -L "$l" "$P/lib/glibc/"
    elif [[ $l =~ $cxx_re ]]; then cp -L "$l" "$P/lib/fallback/"
    else cp -L "$l" "$P/lib/"; fi
  done <"$P/.libs"
  # the bundled libraries' own dependencies (one level is enough here: gfortran -> quadmath)
  ldd "$P"/lib/*.so* 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r l; do
    [[ $l =~ $cuda_re || $l =~ $glibc_re || $l =~ $cxx_re ]] && continue
    [ -e "$P/lib/$(basename "$l")" ] || cp -L "$l" "$P/lib/"
  done
  {
    echo "commit $(git describe --always --dirty 2>/dev/null || echo unknown)"
    echo "built $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
    echo "glibc_needed $(glibc_need "$P"/bin/* "$P"/lib/*.so*)"
    echo "glibc_needed_by_fallback $(glibc_need "$P"/lib/fallback/*)"
    echo "cuda_libs $(sort -u "$P/.cuda" | tr '\n' ' ')"
    echo "lib $(cd "$P/lib" && ls -p | grep -v / | tr '\n' ' ')"
    echo "lib/fallback $(ls "$P/lib/fallback" | tr '\n' ' ')"
    echo "lib/glibc $(ls "$P/lib/glibc" | tr '\n' ' ')"
  } >"$P/MANIFEST"
  rm -f "$P/.libs" "$P/.cuda"
  tar -cJf "$ARCHIVE" "$P" || exit 1
  cat "$P/MANIFEST"
  echo "$P: $(du -sh "$P" | cut -f1) unpacked; $ARCHIVE: $(du -h "$ARCHIVE" | cut -f1) (the device tool carries at most 64 MiB)"
  echo "carry: [\"$ARCHIVE\"]   command: bash scripts/gpu-check.sh \$OUT   timeout_s: 500 (the budget is 450 s)"
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
# run NAME LIMIT_S CMD...: output to OUTDIR/NAME.log (LOG=other: other.log; APPEND=1: appended
# after a header), a status line to the summary; the limit is cut to the time left.
run() {
  local name=$1 limit=$2; shift 2
  local l; l=$(left)
  [ "$limit" -le "$l" ] || limit=$l
  if [ "$limit" -lt 5 ]; then note "[$name] SKIPPED: the ${BUDGET_S}s budget is spent"; FAILED+=("$name"); return 125; fi
  local t0; t0=$(date +%s)
  local rc=0
  local log=$OUT/${LOG:-$name}.log
  if [ "${APPEND:-0}" = 1 ]; then { echo; echo "==== $name: $*"; } >>"$log"; timeout -k 5 "$limit" "$@" >>"$log" 2>&1 || rc=$?
  else timeout -k 5 "$limit" "$@" >"$log" 2>&1 || rc=$?; fi
  local dt=$(( $(date +%s) - t0 ))
  local what=ok; [ $rc = 0 ] || what="FAILED rc=$rc"; [ $rc = 124 ] && what="TIMEOUT after ${limit}s"
  RUN_STATUS="[$name] $what (${dt}s)"
  if [ $rc != 0 ] && [ "${OPTIONAL:-0}" = 1 ]; then return $rc; fi   # optional() decides what it was
  note "$RUN_STATUS"
  [ $rc = 0 ] || FAILED+=("$name")
  return $rc
}
excerpt() { grep -E "$2" "$OUT/$1.log" 2>/dev/null | head -"${3:-12}" | sed 's/^/  /' | tee -a "$S"; }
# noskip NAME: the GPU tests exit 0 with "SKIP: no CUDA device (...)" where they see no
# usable device; on the GPU machine that is a failure, not a pass.
noskip() {
  local l; l=$(grep -m1 '^SKIP: no CUDA device' "$OUT/${2:-$1}.log" 2>/dev/null) || return 0
  note "[$1] FAILED: the test saw no CUDA device: $l"; FAILED+=("$1")
}

note "gpu-check $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), budget ${BUDGET_S}s"
# ---- 1. environment and memory
run env 10 bash -c 'nvidia-smi; nvidia-smi --query-gpu=name,memory.total,memory.free,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu --format=csv
  nvcc --version 2>&1 | tail -1; python3 -c "import torch, transformers; print(\"torch\", torch.__version__, \"transformers\", transformers.__version__, \"cuda\", torch.version.cuda)"
  nproc; free -g; ldd --version | head -1; cat /etc/os-release 2>/dev/null | head -2'
GPU=$(nvidia-smi --query-gpu=name,memory.total,memory.free --format=csv,noheader,nounits 2>/dev/null | head -1)
MEM_MIB=$(echo "$GPU" | awk -F', *' '{print $2 + 0}')
note "gpu: ${GPU:-nvidia-smi gave nothing} (name, total MiB, free MiB)"
grep -A1 -m1 "^name, memory.total" "$OUT/env.log" | tail -1 | sed 's/^/  idle: /' | tee -a "$S"
case "$GPU" in *H200*) HBM=4.8e12;; *H100*PCIe*) HBM=2.0e12;; *) HBM=3.35e12;; esac   # the ops bench's memory model
note "multi-rank NCCL: not run (one GPU; NCCL refuses two ranks on one device; the binaries are MPI=0)"

# ---- 2. binaries: the carried archive, its libraries checked first
BIN=""
if [ -f "$ARCHIVE" ]; then
  if [ ! -x "$P/bin/olmo" ] || [ "$ARCHIVE" -nt "$P/bin/olmo" ]; then
    rm -rf "$P"
    if command -v xz >/dev/null; then tar -xJf "$ARCHIVE" || note "unpack: tar -xJf $ARCHIVE FAILED"
    else   # no xz binary (a minimal image): python's tarfile reads .xz through its lzma module
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall()' "$ARCHIVE" || note "unpack: no xz, and python3's tarfile FAILED"
    fi
  fi
  touch "$P/bin/olmo" 2>/dev/null
fi
if [ -x "$P/bin/olmo" ]; then
  { echo; echo "==== $P/MANIFEST"; cat "$P/MANIFEST"; } >>"$OUT/env.log"
  need=$(awk '$1 == "glibc_needed" {print $2}' "$P/MANIFEST")
  have=$(ldd --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+$')
  LIBPATH=""
  addpath() { case ":$LIBPATH:" in *":$1:"*) ;; *) LIBPATH=${LIBPATH:+$LIBPATH:}$1;; esac; }
  # the missing sonames and unmet symbol versions of every binary, with LD_LIBRARY_PATH as set
  problems() { for b in "$P"/bin/*; do LD_LIBRARY_PATH=$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$b" 2>&1; done |
               grep -E 'not found' | sed 's/^[[:space:]]*//' | sort -u; }
  LOADER=0
  if [ -z "$have" ] || [ -z "$need" ] || ! ver_ge "$have" "$need" || [ "${GPU_CHECK_FORCE_LOADER:-0}" = 1 ]; then
    LOADER=1; note "libs: the binaries need glibc $need, this machine has ${have:-?}: using the bundled glibc (lib/glibc)"
  fi
  p=$(problems)
  # CUDA libraries not where the build machine had them
  if echo "$p" | grep -qE 'lib(cudart|cublas)'; then
    for d in $( { ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib 2>/dev/null
                  ldconfig -p 2>/dev/null | awk -F'=> ' '/libcudart|libcublasLt/ {print $2}' | xargs -r -n1 dirname
                  python3 -c 'import glob, os, nvidia; [print(d) for p in nvidia.__path__ for d in glob.glob(os.path.join(p, "*", "lib"))]' 2>/dev/null
                } | sort -u); do
      for lib in $(echo "$p" | grep -oE 'lib(cudart|cublasLt|cublas)\.so\.[0-9]+' | sort -u); do
        [ -e "$d/$lib" ] && { addpath "$d"; note "libs: $lib found in $d"; }
      done
    done
    p=$(problems)
  fi
  # libstdc++ / libgcc_s missing or too old (GLIBCXX_, CXXABI_, GCC_ versions not found)
  if echo "$p" | grep -qE 'libstdc\+\+|libgcc_s|GLIBCXX|CXXABI|GCC_'; then
    addpath "$ROOT/$P/lib/fallback"; note "libs: libstdc++/libgcc_s from the bundle (lib/fallback): $(echo "$p" | grep -E 'libstdc|libgcc|GLIBCXX|CXXABI|GCC_' | head -2 | tr '\n' ' ')"
    p=$(problems)
  fi
  if echo "$p" | grep -q 'GLIBC_'; then [ $LOADER = 1 ] || { LOADER=1; note "libs: glibc symbols missing: using the bundled glibc"; }; fi
  BIN=$ROOT/$P/bin
  if [ $LOADER = 1 ]; then
    # every binary through the bundle's loader: wrappers in wrap/, the same names. The
    # OpenBLAS core is chosen here (blas_core_init's re-exec of /proc/self/exe would run the
    # loader, not the binary: with OPENBLAS_CORETYPE set it does not re-exec).
    core=Haswell; grep -qw avx512bw /proc/cpuinfo && core=SkylakeX
    mkdir -p "$P/wrap"
    for b in "$P"/bin/*; do
      printf '#!/bin/sh\n: "${OPENBLAS_CORETYPE:=%s}"; export OPENBLAS_CORETYPE\nexec "%s/lib/glibc/%s" --library-path "%s" "%s" "$@"\n' \
        "$core" "$ROOT/$P" "$(cd "$P/lib/glibc" && ls ld-linux* | head -1)" "$ROOT/$P/lib/glibc:$ROOT/$P/lib:$ROOT/$P/lib/fallback${LIBPATH:+:$LIBPATH}" "$ROOT/$b" >"$P/wrap/${b##*/}"
      chmod +x "$P/wrap/${b##*/}"
    done
    BIN=$ROOT/$P/wrap
  elif [ -n "$LIBPATH" ]; then
    export LD_LIBRARY_PATH=$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  p=$( [ $LOADER = 1 ] || problems )
  [ -z "$p" ] || note "libs: still unresolved: $(echo "$p" | head -4 | tr '\n' ' ')"
  if "$BIN/olmo" --help >>"$OUT/env.log" 2>&1; then
    note "binaries: $P ($(awk '$1 == "commit" {print $2}' "$P/MANIFEST"); glibc needed $need, here ${have:-?}; $([ $LOADER = 1 ] && echo "bundled glibc loader" || echo "system loader")${LIBPATH:+; library path += $LIBPATH}): olmo --help ok"
  else
    note "binaries: $BIN/olmo --help FAILED (env.log)"; tail -5 "$OUT/env.log" | sed 's/^/  | /' | tee -a "$S"; BIN=""
  fi
fi
if [ -z "$BIN" ]; then
  note "no usable prebuilt binaries (carry $ARCHIVE, made by --prepare): building here (about 200 s, needs the -dev packages: this run will not fit ${BUDGET_S}s)"
  BUDGET_S=$(( BUDGET_S + 200 ))
  if APPEND=1 LOG=env run build 200 make -s BUILD=build-gpu MPI=0 CUDA=1 NCCL=0 -j"$(nproc)" all; then BIN=$ROOT/build-gpu; fi
fi
if [ -z "$BIN" ]; then
  note "no binaries: stopping"
  tail -30 "$OUT/env.log" | sed 's/^/  | /' | tee -a "$S"
  exit 1
fi
t() { if [ -x "$BIN/$1" ]; then echo "$BIN/$1"; else echo "$BIN/tests/$1"; fi; }
TC=$(t test_cuda); TA=$(t test_cuda_attention); TO=$(t test_backend_ops); TE=$(t test_cuemu)
TB=$(t test_cuda_bench); TOB=$(t cuda_ops_bench); TPD=$(t tool_parity_dump)
export OLMO_BIN=$BIN/olmo
export PYTHON=$(command -v python3)

# ---- 3. correctness on the device
if ! run test_cuda 40 "$TC"; then
  c=$(awk '/^== case / {c = $3} /^FAIL/ {print c; f = 1; exit} END {if (!f) print c}' "$OUT/test_cuda.log" | tr -d ':')
  APPEND=1 LOG=test_cuda run test_cuda_rerun 25 env OLMO_TEST_CUDA_CASE="${c:-}" CUDA_LAUNCH_BLOCKING=1 "$TC"
fi
noskip test_cuda
excerpt test_cuda "^== |memory plan|logits|gradients|loss:|determinism|worst|FAIL|passed|SKIP|error" 24
APPEND=1 LOG=test_cuda run attention 12 "$TA"
APPEND=1 LOG=test_cuda run backend_ops 10 "$TO"
APPEND=1 LOG=test_cuda run launch_codes 6 "$TE"
excerpt test_cuda "^(cpu|cuda)|test_backend_ops:|^(fp32|bf16) (simt|wmma)|test_cuda_attention:|test_cuemu:" 20

# ---- 4. per-op benchmark beside the cost model, at once
PRED=docs/gpu_cost_model.txt
LOG=bench_ours run ops_bench 35 "$TOB" T=8192 reps=3 hbm="$HBM" predict="$PRED"
noskip ops_bench bench_ours
excerpt bench_ours "^MEASURE|^MEMORY|^cuda_ops_bench" 30
# the counted model's attention with what it leaves out (mma.sync's ceiling, the softmax,
# exposed load latency, pipe overlap) as a range, beside the MEASURE lines above
python3 scripts/gpu_cost_range.py "$PRED" 2>&1 | grep -E "^  RANGE attn|^RANGE" | tee -a "$OUT/bench_ours.log" | sed 's/^ */  /' | tee -a "$S"

# ---- 5. the shape: the 7B-shaped configurations whose plan fits this GPU, largest first.
# `olmo info RECIPE --backend cuda` plans what cuda_model_create allocates (a recipe: the
# preset form takes no overrides). Margin: 2% of the free memory + 2.5 GiB for what the plan
# does not count (the CUDA context, cuBLASLt's own allocations, allocation granularity).
# H100 80 GB: 16 layers with recompute (74.84 GiB); H200: all 32 with recompute (132.14 GiB).
CANDS=()
FREE_MIB=$(echo "$GPU" | awk -F', *' '{print $3 + 0}')
if [ -n "$FREE_MIB" ] && [ "$FREE_MIB" -gt 0 ]; then
  avail=$(awk -v m="$FREE_MIB" 'BEGIN {printf "%.2f", m / 1024 * 0.98 - 2.5}')
  R_YML=$(mktemp --suffix=.yml)
  printf 'model: {preset: olmo3-7b}\ntrain: {seq_len: 8192, micro_batch: 1, global_batch: 1, max_steps: 1}\ndata: {paths: [/unused.npy]}\n' >"$R_YML"
  for L in 32 24 16 12 8; do
    plan=$("$BIN/olmo" info "$R_YML" --backend cuda model.n_layers=$L 2>&1)
    for R in 0 1; do
      want=$([ $R = 1 ] && echo "total, recompute" || echo "total, no recompute")
      g=$(echo "$plan" | awk -v w="$want" 'index($0, w) {for (i = 1; i <= NF; i++) if ($(i + 1) == "GiB") {print $i; exit}}')
      [ -n "$g" ] || { echo "$plan" | tail -2 >>"$OUT/env.log"; continue; }
      echo "shape candidate: layers $L recompute $R plan $g GiB" >>"$OUT/env.log"
      awk -v g="$g" -v a="$avail" 'BEGIN {exit !(g <= a)}' && { CANDS+=("$L $R $g"); break; }
    done
  done
  rm -f "$R_YML"
  note "shape: ${CANDS[0]:-none} (layers, recompute, plan GiB) of ${avail} GiB (free $FREE_MIB MiB - 2% - 2.5 GiB); next: ${CANDS[1]:-none}"
else
  note "shape: GPU memory unknown (nvidia-smi): taking 8 layers without recompute"
fi
[ ${#CANDS[@]} -gt 0 ] || CANDS=("8 0 ?")
set -- ${CANDS[0]}; LAYERS=$1; REC=$2

# ---- 6. end to end at that shape (once more at the next shape if it ran out of memory)
SMI_LOG=$(mktemp)
nvidia-smi --query-gpu=memory.used,memory.total,clocks.sm,clocks.mem,power.draw --format=csv,noheader,nounits -lms 500 >"$SMI_LOG" 2>/dev/null &
SMI_PID=$!
e2e() { APPEND=1 LOG=bench_ours run bench_e2e "$1" "$TB" preset=olmo3-7b layers="$LAYERS" recompute="$REC" T=8192 B=1 steps=3 warmup=1 precision=bf16; }
if ! e2e 65 && grep -qiE "out of memory|cudaErrorMemoryAllocation" "$OUT/bench_ours.log" && [ ${#CANDS[@]} -gt 1 ]; then
  set -- ${CANDS[1]}; LAYERS=$1; REC=$2
  note "bench_e2e: out of memory; again at layers $LAYERS, recompute $REC"
  e2e 45
fi
kill "$SMI_PID" 2>/dev/null; wait "$SMI_PID" 2>/dev/null
{ echo; echo "==== nvidia-smi during bench_e2e (memory.used MiB, memory.total, clocks.sm MHz, clocks.mem, power W)"; cat "$SMI_LOG"; } >>"$OUT/bench_ours.log"
noskip bench_e2e bench_ours
excerpt bench_ours "^RESULT|device:|error|note" 8
awk -F', *' 'NF >= 5 {n++; if ($1 > m) m = $1; t = $2; if (!lo || $3 < lo) lo = $3; if ($3 > hi) hi = $3; if ($5 > p) p = $5}
  END {if (n) printf "  nvidia-smi (%d samples): peak memory in use %d of %d MiB; SM clock %d-%d MHz; peak power %.0f W\n", n, m, t, lo, hi, p}' "$SMI_LOG" | tee -a "$S"
rm -f "$SMI_LOG"
if [ "$LAYERS" = 32 ] && [ "$REC" = 1 ] && [ -f "$PRED" ]; then
  meas=$(awk '/^RESULT olmo.c cuda/ {for (i = 2; i <= NF; i++) if ($i == "s/step") print $(i - 1)}' "$OUT/bench_ours.log" | head -1)
  note "predict: 7B step (recompute, T 8192, B 1), s: measured ${meas:-?} | predicted $(awk '$1 == "PREDICT" && $2 == "bench_step_s" {print $3}' "$PRED")"
else
  note "predict: the cost model's step is the 32-layer recompute shape; this one ($LAYERS layers, recompute $REC): per-op PREDICT above"
fi

# ---- 7. one-step training parity against the float64 PyTorch reference
par() {   # par PRECISION [check_parity flags]
  local d=$WORK/parity_$1
  "$TPD" "$d" backend=cuda precision="$1" steps=3 || return 1
  [ -f "$d/config.json" ] || { echo "SKIP: no dump written"; return 1; }
  python3 tests/ref/check_parity.py "$d" --threads 4 $([ "$1" = bf16 ] && echo --bf16)
}
WORK=$(mktemp -d)
export -f par; export WORK TPD
run parity 30 bash -c 'par fp32; a=$?; echo; par bf16; b=$?; exit $(( a | b ))'
noskip parity
excerpt parity "^wrote|worst of|FAIL|PARITY|SKIP|Error|error" 30

# ---- 8. PyTorch at the same shape, SDPA
eager=0
run bench_torch 55 env PYTHONUNBUFFERED=1 python3 scripts/gpu_bench_torch.py --layers "$LAYERS" $([ "$REC" = 1 ] && echo --recompute) --T 8192 --steps 2 --no-compile || eager=$?
APPEND=1 LOG=bench_torch run sdpa 20 env PYTHONUNBUFFERED=1 python3 scripts/gpu_attn_sdpa.py --T 8192 --reps 3 --backends flash,cudnn
excerpt bench_torch "^RESULT|^SDPA|^torch |out of memory|released|Error" 12
# attention per full layer (window 8192), ms: ours | the cost model | torch SDPA flash | cuDNN
m() { awk -v t="$2" -v n="$3" '$1 == t && $2 == n {print $4; exit}' "$OUT/$1.log"; }
for d in fwd bwd; do
  note "attention $d, full layer, ms: ours $(m bench_ours MEASURE attn_${d}_w8192 || true) | predicted $(awk -v n="attn_${d}_w8192" '$1 == "MEASURE" && $2 == n {for (i = 1; i <= NF; i++) if ($i == "PREDICT") print $(i + 2)}' "$OUT/bench_ours.log") | flash $(m bench_torch SDPA attn_${d}_w8192) | cudnn $(m bench_torch SDPA-cudnn attn_${d}_w8192)"
done

# ---- 9. HF transformers: logits, YaRN
run hf_compare 35 python3 scripts/gpu_hf_compare.py --olmo "$BIN/olmo" --test-cuda "$TC" --work "$WORK/hf"
excerpt hf_compare "rel-to-max|HF_COMPARE|HF_YARN|rope layout|Error|error" 14

# ---- 10. the CLI on the device: checkpoints across backends, dist.shard at W 1
run test_cuda_sh 35 bash tests/test_cuda.sh
noskip test_cuda_sh
excerpt test_cuda_sh "continue|determinism|FAIL|passed|SKIP|mismatch|step |error" 10
APPEND=1 LOG=test_cuda_sh run shard_w1 15 bash tests/test_cuda_shard.sh
excerpt test_cuda_sh "one GPU: dist.shard|W=1 .*(failed|!=)|test_cuda_shard.sh: all" 4
rm -rf "$WORK"

# ---- 11. profilers: "unavailable" (not FAILED) where they cannot attach
# optional NAME LIMIT CMD...: as run, but a failure whose log shows the tool could not
# attach or is not supported here is reported as unavailable
optional() {
  local name=$1; shift
  local rc=0
  OPTIONAL=1 APPEND=1 run "$@" || rc=$?
  [ $rc = 0 ] || [ $rc = 125 ] && return $rc
  local why; why=$(sed -n '/^==== '"$name"': /,$p' "$OUT/$LOG.log" | grep -m1 -E "ERR_NVGPUCTRPERM|not supported|No kernels were profiled|Failed to (connect|attach|initialize|find)|Could not|permission|Unable to|Device not supported|==ERROR==")
  if [ $rc != 124 ] && [ -n "$why" ] && ! sed -n '/^==== '"$name"': /,$p' "$OUT/$LOG.log" | grep -qE "RACECHECK SUMMARY: [1-9]|ERROR SUMMARY: [1-9]"; then
    note "[$name] unavailable on this machine (rc=$rc): $(echo "$why" | cut -c1-160)"
  else
    note "$RUN_STATUS"; FAILED+=("$name")
  fi
  return $rc
}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  LOG=bench_ours optional ncu ncu 35 "$NCU" --clock-control none --kernel-name regex:attn_ --launch-count 5 --section SpeedOfLight \
    --section LaunchStats --section Occupancy --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed_pipe_tensor.sum,gpu__time_duration.sum \
    "$TOB" T=4096 reps=1 only=attn
  excerpt bench_ours "attn_[a-z_]*wmma|attn_di|Duration|wavefronts_mem_shared|bank_conflicts|pipe_tensor|Registers Per|Achieved Occupancy|==PROF==" 40
else
  note "[ncu] unavailable: Nsight Compute not found on this machine"
fi
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$SAN" ]; then
  LOG=test_cuda optional sanitizer sanitizer 25 bash -c "'$SAN' --tool racecheck --error-exitcode 3 '$TA' && '$SAN' --tool memcheck --error-exitcode 3 '$TA'"
  excerpt test_cuda "ERROR SUMMARY|RACECHECK SUMMARY|Race reported|Invalid" 8
else
  note "[sanitizer] unavailable: compute-sanitizer not found on this machine"
fi

# ---- 12. torch.compile with what is left
l=$(left)
if [ "$eager" != 0 ]; then
  note "[torch_compile] skipped: the eager run failed"
elif [ "$l" -ge 30 ]; then
  [ "$l" -le 60 ] || l=60
  APPEND=1 LOG=bench_torch run torch_compile "$l" env PYTHONUNBUFFERED=1 python3 scripts/gpu_bench_torch.py --layers "$LAYERS" $([ "$REC" = 1 ] && echo --recompute) --T 8192 --steps 2 --compile-only
  excerpt bench_torch "RESULT torch torch.compile|out of memory" 4
else
  note "[torch_compile] skipped: ${l}s left of the ${BUDGET_S}s budget"
fi

# ---- every failing part's log tail in the summary (the summary is what the tool prints)
for f in $(for f in "${FAILED[@]:-}"; do   # the part's log
             case $f in attention|backend_ops|launch_codes|test_cuda_rerun|sanitizer) f=test_cuda;; ops_bench|bench_e2e|ncu) f=bench_ours;;
               sdpa|torch_compile) f=bench_torch;; shard_w1) f=test_cuda_sh;; build) f=env;; esac
             echo "$f"; done | sort -u); do
  [ -f "$OUT/$f.log" ] || continue
  note "---- $f.log (last 30 lines)"
  tail -30 "$OUT/$f.log" | sed 's/^/  | /' | tee -a "$S"
done
note "total $(( $(date +%s) - T_START ))s; failed: ${FAILED[*]:-none}"
echo "=== summary ($S) ==="
cat "$S"
