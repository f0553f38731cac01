#!/usr/bin/env bash
# bench_memory.sh: peak RSS of training the olmo3-60m preset on one sequence of
# T = 1024, 2048, 4096, 8192, 65536 tokens (micro-batch 1, 2 steps, synthetic tokens):
# activation memory must grow linearly in T (tiled attention, chunked LM head + loss).
# --stage3: with OLMo 3's long-context settings (YaRN on the full layers, original
# context 8192, document mask). The synthetic tokens are uniform over the vocab, so EOS is
# rare and documents span the whole sequence: the full layers' attention is not shortened
# by the mask (its worst case). T = 65536 takes minutes per step on 2 cores.
# --cp C: context parallelism (dist.context_parallel, docs/distributed.md): each T runs at
# C = 1 (one process) and at C (mpirun -np C, one group, 1 thread per rank), and the table
# gives the largest rank's peak RSS (the run's memory record) and tokens/s of the job
# (median step); PRESET=name picks the model (default olmo3-60m), VOCAB=n its vocabulary
# (default 100278; a small one makes the activations, not the LM head, the bulk).
# Usage: scripts/bench_memory.sh [--stage3] [--cp C] [T ...]
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
extra=""
if [ "${1:-}" = --stage3 ]; then
  extra="model.rope_scaling=yarn model.rope_scaling_factor=8 model.rope_original_context=8192 data.document_mask=true"
  shift
fi
cp=1
if [ "${1:-}" = --cp ]; then cp=$2; shift 2; fi
PRESET=${PRESET:-olmo3-60m}
VOCAB=${VOCAB:-100278}
Ts=("$@"); [ ${#Ts[@]} -gt 0 ] || Ts=(1024 2048 4096 8192 65536)
maxT=$(printf '%s\n' "${Ts[@]}" | sort -n | tail -1)
/usr/bin/python3 - "$TMP/tok.npy" "$maxT" "$VOCAB" <<'PY'
import numpy as np, sys
np.random.default_rng(0).integers(0, int(sys.argv[3]), size=3 * int(sys.argv[2]) + 16, dtype=np.uint32).tofile(sys.argv[1])
PY
if [ "$cp" -gt 1 ]; then
  printf '%-6s %3s %22s %10s %10s\n' T C "peak RSS MiB (max rank)" "s/step" "tokens/s"
  for T in "${Ts[@]}"; do
    for C in 1 "$cp"; do
      d=$TMP/cp$C-$T
      launch=(); [ "$C" -gt 1 ] && launch=(mpirun --oversubscribe --allow-run-as-root -np "$C" -x OMP_NUM_THREADS=1)
      OMP_NUM_THREADS=1 "${launch[@]}" "$OLMO" train /dev/null model.preset="$PRESET" train.seq_len="$T" train.global_batch=1 \
        train.micro_batch=1 train.max_steps=2 train.run_dir="$d" train.resume=never data.paths="$TMP/tok.npy" model.vocab_size="$VOCAB" \
        ckpt.interval=0 perf.peak_flops=1e11 eval.off=true dist.context_parallel="$C" $extra >"$d.log" 2>&1 \
        || { tail -20 "$d.log"; exit 1; }
      /usr/bin/python3 - "$d/metrics.jsonl" "$T" "$C" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
mem = [r for r in recs if r.get("kind") == "memory"][-1]
tr = [r for r in recs if r.get("kind") == "train"]
st = sorted(r["step_time"] for r in tr)[len(tr) // 2]
print(f"{sys.argv[2]:<6} {sys.argv[3]:>3} {mem['peak_rss_gib_max'] * 1024:22.0f} {st:10.2f} {int(sys.argv[2]) / st:10.0f}")
PY
    done
  done
  exit 0
fi
printf '%-6s %14s %12s\n' T "peak RSS MiB" "s/step"
for T in "${Ts[@]}"; do
  /usr/bin/python3 - "$OLMO" "$TMP" "$T" "$extra" "$PRESET" "$VOCAB" <<'PY'
import resource, subprocess, sys, time, re
olmo, tmp, T = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = [olmo, "train", "/dev/null", "model.preset=" + sys.argv[5], f"train.seq_len={T}", "train.global_batch=1",
        "train.micro_batch=1", "train.max_steps=2", f"train.run_dir={tmp}/run{T}", "train.resume=never",
        f"data.paths={tmp}/tok.npy", "model.vocab_size=" + sys.argv[6], "ckpt.interval=0", "perf.peak_flops=1e11", "eval.off=true"] + sys.argv[4].split()
t0 = time.time()
out = subprocess.run(args, capture_output=True, text=True)
if out.returncode != 0:
    sys.exit(out.stdout + out.stderr)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
steps = [float(x) for x in re.findall(r'"step_time":([0-9.e+-]+)', open(f"{tmp}/run{T}/metrics.jsonl").read())]
print(f"{T:<6d} {rss:14.0f} {steps[-1]:12.2f}")
PY
done
