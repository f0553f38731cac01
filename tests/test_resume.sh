#!/usr/bin/env bash
# test_resume.sh: bitwise resume (2N steps straight == N + resume + N: losses and every
# parameter and Adam moment identical), SIGTERM (checkpoint after the step, exit 0),
# SIGKILL in the middle of a checkpoint write (the partial .tmp dir is removed, the run
# resumes from the last complete checkpoint and still ends bitwise identical), metrics
# truncation on resume, retention (ckpt.keep_last / ckpt.keep_every), resume=never.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
A=$TMP/A B=$TMP/B
train $A train.resume=never || fail "straight run: $(tail -5 $A.log)"
# N + resume + N via train.stop_at (deterministic stop, same path as SIGTERM)
train $B train.stop_at=6 || fail "stop_at run: $(tail -5 $B.log)"
grep -q "stopped after step 6" $B.log || fail "no stop message"
[ "$(cat $B/checkpoints/latest)" = step-00000006 ] || fail "latest is $(cat $B/checkpoints/latest)"
[ ! -e $B/model.safetensors ] || fail "stopped run wrote the final model"
train $B || fail "resume: $(tail -5 $B.log)"
grep -q "resume: .*step-00000006 (step 6" $B.log || fail "did not resume from step 6: $(head -5 $B.log)"
cmp $A/model.safetensors $B/model.safetensors || fail "parameters differ after resume"
cmp $A/checkpoints/step-00000012/optim.safetensors $B/checkpoints/step-00000012/optim.safetensors || fail "Adam state differs"
same_metrics $A $B 0 || fail "losses differ after resume"

# metrics truncation: records after the checkpoint (a run killed later) are dropped
C=$TMP/C
train $C train.stop_at=6 || fail "stop_at C"
echo '{"kind":"train","step":7,"loss":123}' >> $C/metrics.jsonl
printf '{"kind":"train","step":8,"lo' >> $C/metrics.jsonl   # torn line
train $C || fail "resume C: $(tail -5 $C.log)"
same_metrics $A $C 0 || fail "metrics after truncation"

# SIGTERM: finishes the step, checkpoints, exits 0; the rerun ends identical to straight
S=$TMP/S S2=$TMP/S2
train $S2 train.max_steps=150 ckpt.interval=1000 || fail "straight 150"
"$OLMO" train "$TMP/r.yml" train.run_dir=$S train.max_steps=150 ckpt.interval=1000 >$S.log 2>&1 &
pid=$!
wait_for 300 'grep -q "^step " $S.log 2>/dev/null' || fail "no step line in 300 s: $(tail -3 $S.log)"
kill -TERM $pid
wait $pid || fail "SIGTERM exit status $?"
grep -q "stopped after step" $S.log || echo "note: run finished before SIGTERM landed"
ls $S/checkpoints | grep -q step- || fail "no checkpoint after SIGTERM"
train $S train.max_steps=150 ckpt.interval=1000 || fail "resume after SIGTERM"
cmp $S/model.safetensors $S2/model.safetensors || fail "SIGTERM + resume differs"

# SIGKILL in the middle of writing checkpoint 8 (the test hook pauses after
# model.safetensors of the temp dir is written); step 4 is complete.
K=$TMP/K
OLMO_TEST_CKPT_PAUSE=1 "$OLMO" train "$TMP/r.yml" train.run_dir=$K ckpt.interval=4 ckpt.async=false >$K.log 2>&1 &
pid=$!
wait_for 300 '[ -d $K/checkpoints/.tmp-step-00000008 ]' || fail "checkpoint 8 never started: $(tail -3 $K.log)"
sleep 0.2
kill -KILL $pid; wait $pid 2>/dev/null || true
[ -d $K/checkpoints/step-00000004 ] || fail "step 4 not complete before the kill"
[ -d $K/checkpoints/.tmp-step-00000008 ] || fail "kill did not land mid-write"
[ ! -e $K/checkpoints/step-00000008 ] || fail "half checkpoint published"
train $K ckpt.interval=4 || fail "resume after SIGKILL: $(tail -5 $K.log)"
grep -q "removing incomplete" $K.log || fail "temp dir not reported"
grep -q "resume: .*step-00000004" $K.log || fail "did not resume from step 4"
ls -a $K/checkpoints | grep -q '^\.tmp' && fail "temp dir left behind"
cmp $A/model.safetensors $K/model.safetensors || fail "SIGKILL + resume differs"
same_metrics $A $K 0 || fail "metrics after SIGKILL"

# retention: every 2 steps, keep the last 2 plus multiples of 4
R=$TMP/R
train $R ckpt.interval=2 ckpt.keep_last=2 ckpt.keep_every=4 || fail "retention run"
got=$(ls $R/checkpoints | tr '\n' ' ')
[ "$got" = "latest step-00000004 step-00000008 step-00000010 step-00000012 " ] || fail "retention kept: $got"
# resume=never over an old run: its checkpoints are moved aside, not mixed in
train $A train.resume=never train.max_steps=2 || fail "resume=never rerun"
[ -d $A/checkpoints.replaced-1/step-00000012 ] || fail "old checkpoints not moved aside"
[ "$(ls $A/checkpoints | tr '\n' ' ')" = "latest step-00000002 " ] || fail "new run mixed: $(ls $A/checkpoints)"
echo "test_resume: ok"
