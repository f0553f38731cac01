#!/usr/bin/env bash
# bench_memory.sh: peak RSS of training the olmo3-60m preset on one sequence of
# T = 1024, 2048, 4096, 8192, 65536 tokens (micro-batch 1, 2 steps, synthetic tokens):
# activation memory must grow linearly in T (tiled attention, chunked LM head + loss).
# --stage3: with OLMo 3's long-context settings (YaRN on the full layers, original
# context 8192, document mask). The synthetic tokens are uniform over the vocab, so EOS is
# rare and documents span the whole sequence: the full layers' attention is not shortened
# by the mask (its worst case). T = 65536 takes minutes per step on 2 cores.
# Usage: scripts/bench_memory.sh [--stage3] [T ...]
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
extra=""
if [ "${1:-}" = --stage3 ]; then
  extra="model.rope_scaling=yarn model.rope_scaling_factor=8 model.rope_original_context=8192 data.document_mask=true"
  shift
fi
Ts=("$@"); [ ${#Ts[@]} -gt 0 ] || Ts=(1024 2048 4096 8192 65536)
maxT=$(printf '%s\n' "${Ts[@]}" | sort -n | tail -1)
/usr/bin/python3 - "$TMP/tok.npy" "$maxT" <<'PY'
import numpy as np, sys
np.random.default_rng(0).integers(0, 100278, size=3 * int(sys.argv[2]) + 16, dtype=np.uint32).tofile(sys.argv[1])
PY
printf '%-6s %14s %12s\n' T "peak RSS MiB" "s/step"
for T in "${Ts[@]}"; do
  /usr/bin/python3 - "$OLMO" "$TMP" "$T" "$extra" <<'PY'
import resource, subprocess, sys, time, re
olmo, tmp, T = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = [olmo, "train", "/dev/null", "model.preset=olmo3-60m", f"train.seq_len={T}", "train.global_batch=1",
        "train.micro_batch=1", "train.max_steps=2", f"train.run_dir={tmp}/run{T}", "train.resume=never",
        f"data.paths={tmp}/tok.npy", "ckpt.interval=0", "perf.peak_flops=1e11", "eval.off=true"] + sys.argv[4].split()
t0 = time.time()
out = subprocess.run(args, capture_output=True, text=True)
if out.returncode != 0:
    sys.exit(out.stdout + out.stderr)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
steps = [float(x) for x in re.findall(r'"step_time":([0-9.e+-]+)', open(f"{tmp}/run{T}/metrics.jsonl").read())]
print(f"{T:<6d} {rss:14.0f} {steps[-1]:12.2f}")
PY
done
