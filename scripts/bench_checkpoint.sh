#!/usr/bin/env bash
# bench_checkpoint.sh: checkpoint and data-parallel figures for docs/checkpoints.md and
# docs/distributed.md.
#  1. checkpoint write / read GB/s at olmo3-60m size (tests/tool_ckpt_bench: model + Adam
#     m, v, fsync'd and renamed; read = full validation + load, page cache warm) and the
#     host snapshot time, which is all an async checkpoint costs the loop;
#  2. the step-time cost of checkpointing in a real olmo3-60m run: what each checkpoint
#     blocked the loop for (metrics.jsonl kind "checkpoint"), async vs sync;
#  3. tokens/s per rank at W=2 vs W=1 (olmo3-20m, mpirun, 1 thread per rank).
# Usage: scripts/bench_checkpoint.sh [BUILD_DIR [BASE_BUILD_DIR]]   (default build; needs `make`)
# With BASE_BUILD_DIR (another version's build, e.g. before checkpoint checksums), part 1
# alternates the two tool_ckpt_bench binaries 4 times each in this one run, so that both
# see the same load on a shared machine, and prints the median of each.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
BASE=${2:-}
OLMO=$PWD/$B/olmo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

echo "== 1. checkpoint write / read, olmo3-60m"
if [ -z "$BASE" ]; then
  "$B/tests/tool_ckpt_bench" olmo3-60m "$TMP/ckb" 3
  rm -rf "$TMP/ckb"
else
  for i in 1 2 3 4; do
    for b in "$BASE" "$B"; do
      "$b/tests/tool_ckpt_bench" olmo3-60m "$TMP/ckb" 3 | tail -1 | sed "s|^|$b |" >> "$TMP/ab.txt"
      rm -rf "$TMP/ckb"
    done
  done
  /usr/bin/python3 - "$TMP/ab.txt" "$BASE" "$B" <<'PY'
import json, statistics, sys
rows = [l.split(' ', 1) for l in open(sys.argv[1])]
for b in sys.argv[2:]:
    r = [json.loads(j) for d, j in rows if d == b]
    w = [x['write_GBps'] for x in r]; rd = [x['read_GBps'] for x in r]
    print(f"{b}: write median {statistics.median(w):.2f} GB/s ({min(w):.2f}-{max(w):.2f}), "
          f"read + validate median {statistics.median(rd):.2f} GB/s ({min(rd):.2f}-{max(rd):.2f}), {len(r)} runs")
PY
fi

/usr/bin/python3 - "$TMP/tok.npy" <<'PY'
import random, struct, sys
random.seed(3)
n = 400000
open(sys.argv[1], 'wb').write(struct.pack('<%dI' % n, *[random.randrange(100000) for _ in range(n)]))
PY
cat > "$TMP/r.yml" <<YML
model: {preset: olmo3-60m}
train: {seq_len: 64, global_batch: 4, micro_batch: 2, max_steps: 6}
schedule: {warmup_steps: 2}
data: {paths: [$TMP/tok.npy]}
perf: {peak_flops: 1e11}
eval: {off: true}
YML
echo "== 2. step-time cost of checkpointing (olmo3-60m, seq 64, batch 4, 6 steps, checkpoints at 2, 4, 6, $(nproc) threads)"
# The loop records what each checkpoint blocked it for (metrics.jsonl kind "checkpoint"):
# async = wait for the previous write + host snapshot; sync = the whole write.
for mode in true false; do
  "$OLMO" train "$TMP/r.yml" train.run_dir="$TMP/c$mode" ckpt.interval=2 ckpt.async=$mode > "$TMP/c$mode.log"
  /usr/bin/python3 - "$TMP/c$mode/metrics.jsonl" $mode <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
st = [x['step_time'] for x in r if x.get('kind') == 'train'][1:]
ck = [x['blocking_s'] for x in r if x.get('kind') == 'checkpoint']
print(f"async={sys.argv[2]}: step time {sum(st)/len(st):.3f} s; loop blocked per checkpoint " + ", ".join(f"{b:.3f}" for b in ck) + " s")
PY
  rm -rf "$TMP/c$mode"
done

echo "== 3. tokens/s per rank, olmo3-20m, seq 128, global batch 8, micro 2, 6 steps"
cat > "$TMP/d.yml" <<YML
model: {preset: olmo3-20m, vocab_size: 100278}
train: {seq_len: 128, global_batch: 8, micro_batch: 2, max_steps: 6}
schedule: {warmup_steps: 2}
data: {paths: [$TMP/tok.npy]}
perf: {peak_flops: 1e11}
ckpt: {interval: 0}
eval: {off: true}
YML
tps() { /usr/bin/python3 -c "import json;r=[json.loads(l) for l in open('$1/metrics.jsonl')];t=[x for x in r if x.get('kind')=='train'][1:];print(f'{sum(x[\"tokens_per_s\"] for x in t)/len(t):.0f} {sum(x[\"tokens_per_s_per_rank\"] for x in t)/len(t):.0f}')"; }
OMP_NUM_THREADS=1 "$OLMO" train "$TMP/d.yml" train.run_dir="$TMP/w1" > /dev/null
mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$OLMO" train "$TMP/d.yml" train.run_dir="$TMP/w2" > /dev/null
OMP_NUM_THREADS=2 "$OLMO" train "$TMP/d.yml" train.run_dir="$TMP/w1t2" > /dev/null
read t1 r1 <<<"$(tps "$TMP/w1")"; read t2 r2 <<<"$(tps "$TMP/w2")"; read t3 r3 <<<"$(tps "$TMP/w1t2")"
echo "W=1 x 1 thread: $t1 tok/s ($r1 per rank)"
echo "W=2 x 1 thread: $t2 tok/s ($r2 per rank)"
echo "W=1 x 2 threads: $t3 tok/s"
cmp -s "$TMP/w1/model.safetensors" "$TMP/w2/model.safetensors" && echo "W=1 and W=2 parameters bitwise identical"
