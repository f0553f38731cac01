#!/usr/bin/env bash
# test_shard.sh: dist.shard (optim | grads | full) and dist.shard_group (HSDP) on the CPU
# over OpenMPI (mpirun --oversubscribe, 1 thread per rank), 8 micro-batches per step
# (global 8, micro 1), so W = 1, 2, 4 have 8, 4, 2 per rank: the same summation tree.
#  1. full (ZeRO-3: master, Adam, gradient sharded, weights gathered part by part) at W = 1,
#     2 and 4, grads (ZeRO-2) at W = 2 and 4, and HSDP (W = 4, groups of 2) with full and
#     optim: final weights and the step-6 Adam state bitwise equal to W = 1 ZeRO-1, every
#     loss and norm identical.
#  2. In-loop evaluation under full shard (the weights gathered to rank 0): the eval records
#     equal W = 1's.
#  3. Elastic across modes and world sizes: full at W = 2 stopped at step 2, resumed as
#     optim at W = 4 and stopped at step 4, then W = 1 to step 6: bitwise the uninterrupted run.
#  4. Bad settings exit 2 with nothing written, naming the key: a shard group that does not
#     divide W, an unknown mode, full with an uneven micro-batch split, full with context
#     parallelism (the cuda backend's refusals, grads/full without NCCL among them, are
#     tests/test_cuda_shard.sh's).
#  6. (run before 5) a rank killed during a full-shard checkpoint write: see below.
#  5. `olmo info --backend cuda --shard full`: the per-GPU plan, its lines consistent with the
#     shard and part sizes; the 32B on 64 x 80 GB and the 7B on 8 x 80 GB fit with recompute.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
command -v mpirun >/dev/null || fail "mpirun not installed (scripts/deps.sh installs openmpi-bin)"

P=(train.global_batch=8 train.micro_batch=1 train.max_steps=6 ckpt.interval=3)
same_state() {   # same_state A B WHAT: final weights and step-6 Adam bitwise, losses equal
  cmp "$1/model.safetensors" "$2/model.safetensors" || fail "$3: parameters differ from W=1"
  cmp "$1/checkpoints/step-00000006/optim.safetensors" "$2/checkpoints/step-00000006/optim.safetensors" \
    || fail "$3: Adam state differs from W=1"
  same_metrics "$1" "$2" 0 >/dev/null || fail "$3: losses differ from W=1"
  echo "ok $3 bitwise = W=1 ZeRO-1"
}

# 1. every mode and world size against W = 1
train $TMP/o1 "${P[@]}" || fail "W=1: $(tail -5 $TMP/o1.log)"
train $TMP/f1 "${P[@]}" dist.shard=full || fail "full W=1: $(tail -5 $TMP/f1.log)"
same_state $TMP/o1 $TMP/f1 "full W=1"
for run in "full 2" "full 4" "grads 2" "grads 4"; do
  set -- $run
  mtrain $2 $TMP/$1$2 "${P[@]}" dist.shard=$1 || fail "$1 W=$2: $(tail -20 $TMP/$1$2.log)"
  same_state $TMP/o1 $TMP/$1$2 "$1 W=$2"
done
for m in full optim; do
  mtrain 4 $TMP/h$m "${P[@]}" dist.shard=$m dist.shard_group=2 || fail "HSDP $m: $(tail -20 $TMP/h$m.log)"
  same_state $TMP/o1 $TMP/h$m "HSDP $m W=4 G=2"
done
# grads / full reduce-scatter in rounds (4 MiB per piece; here 1000 floats: the tiny model's
# shards of 65536 and 82880 floats at W=4 take 66 and 83 rounds, at G=2 131072 and 148416
# floats 132 and 149, the last ones partial; local ranks inherit mpirun's environment)
export OLMO_TEST_SHARD_ROUND=1000
mtrain 4 $TMP/r4 "${P[@]}" dist.shard=full || fail "rounds: $(tail -20 $TMP/r4.log)"
same_state $TMP/o1 $TMP/r4 "full W=4 in reduce-scatter rounds"
mtrain 4 $TMP/r4h "${P[@]}" dist.shard=grads dist.shard_group=2 || fail "rounds HSDP: $(tail -20 $TMP/r4h.log)"
same_state $TMP/o1 $TMP/r4h "HSDP grads W=4 G=2 in reduce-scatter rounds"
unset OLMO_TEST_SHARD_ROUND

# 2. evaluation on rank 0 with the weights sharded
$PY - "$TMP/held.npy" <<'PY'
import random, struct, sys
random.seed(3)
ids = []
for _ in range(6): ids += [random.randrange(999) for _ in range(20)] + [999]
open(sys.argv[1], 'wb').write(struct.pack('<%dI' % len(ids), *ids))
PY
EV=(eval.off=false eval.sets=h=$TMP/held.npy eval.eos_id=999 eval.interval=3)
train $TMP/ev1 "${P[@]}" "${EV[@]}" || fail "eval W=1: $(tail -5 $TMP/ev1.log)"
mtrain 2 $TMP/evf "${P[@]}" "${EV[@]}" dist.shard=full || fail "eval full W=2: $(tail -20 $TMP/evf.log)"
cmp $TMP/ev1/model.safetensors $TMP/evf/model.safetensors || fail "eval run: full W=2 parameters differ"
$PY - $TMP/ev1/metrics.jsonl $TMP/evf/metrics.jsonl <<'PY' || fail "eval records differ"
import json, sys
ev = lambda p: [{k: v for k, v in r.items() if not k.endswith(('_s', 'seconds'))} for r in map(json.loads, open(p)) if r.get('kind') == 'eval']
a, b = ev(sys.argv[1]), ev(sys.argv[2])
assert len(a) >= 2 and a == b, (a, b)
PY
echo "ok evaluation under full shard = W=1"

# 3. elastic: full W=2 -> optim W=4 -> W=1, bitwise the uninterrupted W=1 run
d=$TMP/el
mtrain 2 $d "${P[@]}" dist.shard=full train.stop_at=2 || fail "elastic full W=2: $(tail -20 $d.log)"
mtrain 4 $d "${P[@]}" dist.shard=optim train.stop_at=4 || fail "elastic optim W=4: $(tail -20 $d.log)"
grep -q "saved by 2 ranks, now 4" $d.log || fail "W=4 did not resume from the W=2 checkpoint: $(head -20 $d.log)"
train $d "${P[@]}" || fail "elastic W=1: $(tail -5 $d.log)"
grep -q "saved by 4 ranks, now 1" $d.log || fail "W=1 did not resume from the W=4 checkpoint"
cmp $TMP/o1/model.safetensors $d/model.safetensors || fail "elastic full W=2 -> optim W=4 -> W=1 differs"
cmp $TMP/o1/checkpoints/step-00000006/optim.safetensors $d/checkpoints/step-00000006/optim.safetensors \
  || fail "elastic: Adam state differs"
echo "ok elastic full W=2 -> optim W=4 -> W=1 bitwise"

# 4. refusals: exit 2, the key named, no run directory
refused() {   # refused W WHAT PATTERN key=value...
  local w=$1 what=$2 pat=$3 rc=0; shift 3
  mpirun --oversubscribe --allow-run-as-root -np $w -x OMP_NUM_THREADS=1 "$OLMO" train "$TMP/r.yml" \
    train.run_dir=$TMP/bad "$@" >$TMP/bad.log 2>&1 || rc=$?
  [ $rc = 2 ] || fail "$what: exit $rc (want 2): $(tail -5 $TMP/bad.log)"
  grep -q "$pat" $TMP/bad.log || fail "$what: message: $(grep error $TMP/bad.log)"
  [ ! -e $TMP/bad ] || fail "$what: wrote $TMP/bad"
  echo "ok refused ($what): $(grep -m1 'olmo: error' $TMP/bad.log)"
}
refused 4 "group 3 of 4" "dist.shard_group 3 does not divide the world size 4" dist.shard_group=3
refused 1 "unknown mode" "dist.shard must be optim, grads or full, got 'zero3'" dist.shard=zero3
refused 3 "full, uneven blocks" "dist.shard: full needs the same micro-batches on every rank" dist.shard=full
refused 4 "full with context parallelism" "dist.shard: full with dist.context_parallel 2: not built yet" dist.shard=full \
  dist.context_parallel=2

# 6. a rank killed while a full-shard checkpoint is written (the sharded writer's ranks
#    paused between their parts of the two files: OLMO_TEST_CKPT_PAUSE): the job stops, the complete checkpoints stay, the
#    incomplete directory (copied out before the next run cleans it) is refused naming the
#    last complete one, and a W=4 full resume from it ends bitwise on the uninterrupted run.
M=$TMP/kill
OLMO_TEST_CKPT_PAUSE=2 timeout 120 mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 \
  -x OLMO_TEST_CKPT_PAUSE "$OLMO" train "$TMP/r.yml" train.run_dir=$M "${P[@]}" ckpt.interval=2 ckpt.async=false \
  dist.shard=full >$M.log 2>&1 &
mp=$!
wait_for 110 '[ -f $M/checkpoints/.tmp-step-00000004/model.safetensors ]' || fail "never reached checkpoint 4: $(tail -5 $M.log)"
cp -r $M/checkpoints/.tmp-step-00000004 $TMP/incomplete
victim=$(pgrep -f "^$OLMO train $TMP/r.yml train.run_dir=$M" | head -1)
[ -n "$victim" ] || fail "no rank process found"
kill -KILL $victim
rc=0; wait $mp || rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "job after the kill: exit $rc (0: finished; 124: hung)"
[ -d $M/checkpoints/step-00000002 ] && [ ! -d $M/checkpoints/step-00000004 ] \
  || fail "checkpoints after the kill: $(ls -a $M/checkpoints)"
rc=0; mtrain 2 $M "${P[@]}" dist.shard=full train.resume=$TMP/incomplete || rc=$?
[ $rc = 2 ] || fail "incomplete checkpoint: exit $rc (want 2): $(tail -3 $M.log)"
grep -q "cannot resume from $TMP/incomplete: .*the last complete checkpoint is $M/checkpoints/step-00000002" $M.log \
  || fail "refusal does not name the last complete checkpoint: $(grep error $M.log)"
echo "ok refused: $(grep -m1 -o 'cannot resume from.*' $M.log | cut -c1-300)"
mtrain 4 $M "${P[@]}" dist.shard=full || fail "resume after the kill: $(tail -5 $M.log)"
grep -q "resume: $M/checkpoints/step-00000002" $M.log || fail "did not resume from step 2: $(grep resume $M.log)"
cmp $TMP/o1/model.safetensors $M/model.safetensors || fail "kill + W=4 full resume differs from W=1"
echo "ok rank killed mid-checkpoint: step 2 kept, incomplete step 4 refused, W=4 full resume bitwise"

# 5. olmo info --backend cuda --shard full: the per-GPU plan of the sharded state; the OLMo 3
#    32B on 64 GPUs and 7B on 8 fit 80 GB with recompute (ZeRO-1 does not for the 32B)
for c in "olmo3-32b-stage1 64" "olmo3-7b-stage1 8"; do
  set -- $c
  "$OLMO" info configs/$1.yml --backend cuda --world $2 --shard full >$TMP/info.txt || fail "info $1 --shard full"
  $PY - $TMP/info.txt $2 <<'PY' || fail "info $1 --world $2 --shard full: $(tail -14 $TMP/info.txt)"
import re, sys
t, W = open(sys.argv[1]).read(), int(sys.argv[2])
g = lambda what: float(re.search(re.escape(what) + r' +[0-9.]+ GiB +([0-9]+) bytes', t).group(1))
shard, total = map(int, re.search(r'state shard: (\d+) of (\d+) parameters', t).groups())
part = int(re.search(r'largest model part \(embedding, block or head\): (\d+)', t).group(1))
assert shard <= -(-total // W) + 65536 and shard * W >= total, (shard, total)
assert g('fp32 master weights (shard, 4 B/param)') == 4 * shard and g('Adam m, v (shard, 8 B/param)') == 8 * shard
assert g("bf16 weights (2 gathered parts + the shard's copy)") == 2 * (2 * part + shard)
assert g('fp32 gradient (shard + 1 part buffer)') == 4 * (shard + part)
assert g('total, recompute (train.recompute=on)') < 80e9, 'does not fit 80 GB'
PY
  grep "total, recompute" $TMP/info.txt | sed "s/^/  $1 W=$2 full: /"
done
"$OLMO" info configs/olmo3-32b-stage1.yml --backend cuda --world 64 | grep -q "total, recompute (train.recompute=on) *[0-9]\{3\}\." \
  || fail "ZeRO-1 32B on 64 GPUs expected over 100 GiB per GPU"
rc=0; "$OLMO" info olmo3-tiny --world 4 --shard-group 3 >$TMP/info.txt 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "shard-group 3 does not divide --world 4" $TMP/info.txt || fail "info bad group: rc $rc"
echo "ok info --shard full plans"
echo "test_shard: ok"
