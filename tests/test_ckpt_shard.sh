#!/usr/bin/env bash
# test_ckpt_shard.sh: sharded checkpoint writing (src/train/ckpt_shard.h) on the CPU over
# OpenMPI, 8 micro-batches of 1 per step (W = 1, 2, 4: the same summation tree), a
# checkpoint every 2 steps:
#  1. the files are the gathering writer's byte for byte: W = 2 optim (async), W = 2 full
#     (sync) and HSDP W = 4, G = 2 full against W = 1, model.safetensors, optim.safetensors and
#     their lines of checksums.txt, at every checkpoint (train_state.json differs only by its
#     world_size);
#  2. a rank killed during a sharded write (OLMO_TEST_CKPT_SHARD_PAUSE holds rank 1 inside its
#     part of step 4, in the background, while training goes on): no step-4 directory, its
#     .tmp-step-4 marked incomplete (`olmo ckpt verify` says so, exit 2), train.resume naming
#     it refused (exit 2) naming step 2 with nothing in the run directory written or
#     removed (but the dead job's run lock taken over), and the rerun resumes from step 2 bitwise the uninterrupted run;
#  3. a rank whose part fails (OLMO_TEST_CKPT_SHARD_FAIL): every rank exits 1 naming it,
#     nothing published; the rerun resumes from step 2, bitwise;
# Elastic resume through sharded checkpoints (full W = 2 -> optim W = 4 -> W = 1, bitwise the
# uninterrupted run) is tests/test_shard.sh's part 3: its W = 2 and W = 4 checkpoints are
# written by this writer.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
command -v mpirun >/dev/null || fail "mpirun not installed (scripts/deps.sh installs openmpi-bin)"

P=(train.global_batch=8 train.micro_batch=1 train.max_steps=6 ckpt.interval=2)
ck() { echo "$1/checkpoints/step-0000000$2"; }
same_files() {   # same_files RUN WHAT: every checkpoint's safetensors and their sums = W=1's
  for s in 2 4 6; do
    for f in model.safetensors optim.safetensors; do
      cmp "$(ck $TMP/o1 $s)/$f" "$(ck $1 $s)/$f" || fail "$2: step $s $f differs from the gathering writer's"
    done
    cmp <(sed '/^file train_state.json/,$d' "$(ck $TMP/o1 $s)/checksums.txt") \
        <(sed '/^file train_state.json/,$d' "$(ck $1 $s)/checksums.txt") || fail "$2: step $s checksums differ"
    "$OLMO" ckpt verify "$(ck $1 $s)" >/dev/null || fail "$2: step $s does not verify"
  done
  echo "ok $2: the gathering writer's files byte for byte"
}
same_end() {   # same_end RUN WHAT: final weights and step-6 Adam bitwise the uninterrupted run
  cmp $TMP/o1/model.safetensors "$1/model.safetensors" || fail "$2: final weights differ"
  cmp "$(ck $TMP/o1 6)/optim.safetensors" "$(ck $1 6)/optim.safetensors" || fail "$2: step-6 Adam state differs"
}

# 1. byte for byte
train $TMP/o1 "${P[@]}" || fail "W=1: $(tail -5 $TMP/o1.log)"
mtrain 2 $TMP/o2 "${P[@]}" || fail "W=2 optim: $(tail -20 $TMP/o2.log)"
grep -q "each rank its part, writing in the background" $TMP/o2.log || fail "W=2 did not write sharded in the background"
same_files $TMP/o2 "W=2 optim, async"
mtrain 2 $TMP/f2 "${P[@]}" dist.shard=full ckpt.async=false || fail "W=2 full: $(tail -20 $TMP/f2.log)"
same_files $TMP/f2 "W=2 full, sync"
mtrain 4 $TMP/h4 "${P[@]}" dist.shard=full dist.shard_group=2 || fail "HSDP: $(tail -20 $TMP/h4.log)"
same_files $TMP/h4 "HSDP W=4 G=2 full (group 0 writes)"

# 2. rank 1 killed inside its part of checkpoint 4
M=$TMP/kill
OLMO_TEST_CKPT_SHARD_PAUSE=1:60:4 timeout 120 mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 \
  -x OLMO_TEST_CKPT_SHARD_PAUSE "$OLMO" train "$TMP/r.yml" train.run_dir=$M "${P[@]}" dist.shard=full >$M.log 2>&1 &
mp=$!
wait_for 100 'grep -q "test hook: rank 1 (pid" $M.log' || fail "rank 1 never paused: $(tail -5 $M.log)"
victim=$(grep -o "test hook: rank 1 (pid [0-9]*" $M.log | grep -o "[0-9]*$")
kill -KILL "$victim"
rc=0; wait $mp || rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "job after the kill: exit $rc (0: finished; 124: hung)"
[ -d "$(ck $M 2)" ] && [ ! -d "$(ck $M 4)" ] || fail "checkpoints after the kill: $(ls -a $M/checkpoints)"
[ -f $M/checkpoints/.tmp-step-00000004/incomplete ] || fail "the interrupted write is not marked incomplete"
rc=0; "$OLMO" ckpt verify $M/checkpoints/.tmp-step-00000004 >$TMP/verify.log 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "^BAD .*: an incomplete sharded checkpoint" $TMP/verify.log \
  || fail "ckpt verify of the incomplete checkpoint: exit $rc: $(cat $TMP/verify.log)"
# what the refused run may touch: the killed job's run lock, which it takes over and drops
# (tests/test_run_lock.sh), and so the directory's own mtime; nothing else
snap() { find "$1" -mindepth 1 ! -name .lock -printf '%P %s %T@\n' | sort; }
snap $M >$TMP/before.txt
rc=0; mtrain 2 $M "${P[@]}" dist.shard=full train.resume=$M/checkpoints/.tmp-step-00000004 || rc=$?
[ $rc = 2 ] || fail "train.resume of the incomplete checkpoint: exit $rc (want 2): $(tail -3 $M.log)"
snap $M | cmp -s - $TMP/before.txt || fail "the refused resume changed $M: $(snap $M | diff $TMP/before.txt - | head -5)"
grep -q "cannot resume from $M/checkpoints/.tmp-step-00000004: an incomplete sharded checkpoint.*the last complete checkpoint is $(ck $M 2)" $M.log \
  || fail "refusal does not name the last complete checkpoint: $(grep error $M.log)"
echo "ok refused: $(grep -m1 -o 'cannot resume from.*' $M.log | cut -c1-240)..."
mtrain 2 $M "${P[@]}" dist.shard=full || fail "resume after the kill: $(tail -5 $M.log)"
grep -q "resume: $(ck $M 2)" $M.log || fail "did not resume from step 2: $(grep resume $M.log)"
same_end $M "kill + resume"
echo "ok rank killed mid-write: step 2 kept, step 4 incomplete and refused, the resume bitwise"

# 3. rank 1's part of checkpoint 4 fails
F=$TMP/fail
rc=0; OLMO_TEST_CKPT_SHARD_FAIL=1:4 mtrain 2 $F "${P[@]}" || rc=$?
[ $rc = 1 ] || fail "a failed part: exit $rc (want 1): $(tail -5 $F.log)"
grep -q "rank 1: checkpoint step 4: cannot write its part of .*optim.safetensors" $F.log \
  && grep -q "checkpoint step 4 was not published (rank 1)" $F.log || fail "failure message: $(grep error $F.log)"
[ -d "$(ck $F 2)" ] && [ ! -d "$(ck $F 4)" ] || fail "checkpoints after the failure: $(ls -a $F/checkpoints)"
mtrain 2 $F "${P[@]}" || fail "resume after the failure: $(tail -5 $F.log)"
grep -q "resume: $(ck $F 2)" $F.log || fail "did not resume from step 2"
same_end $F "failure + resume"
echo "ok a failed part: every rank exits 1 naming rank 1, nothing published, the resume bitwise"

echo "test_ckpt_shard: ok"
