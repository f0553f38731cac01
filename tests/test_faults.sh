#!/usr/bin/env bash
# test_faults.sh: fault injection on `olmo train` (tiny model of resume_lib.sh, 12 steps).
# Each case ends with a resumed run that finishes with no data lost: the same model bits
# (and every step's metrics exactly once) as an uninterrupted run. test_resume.sh already
# covers SIGTERM and one SIGKILL during a checkpoint; this adds:
#  1. SIGKILL at every phase of a checkpoint write, deterministically: strace injects SIGKILL
#     at the n-th rename / fsync / mkdir (temp files, their renames, the directory rename,
#     `latest`, retention), sync and async writers (strace counts per thread: the async
#     writer's own syscalls). After each kill: every step-* dir is
#     complete and `latest` names one of them.
#  2. Disk full during a checkpoint (a 5 MB tmpfs): exit 1 naming ENOSPC, the earlier
#     checkpoints intact; resumed on a bigger disk.
#  3. The token file deleted mid-run (the mapping keeps it readable: the run finishes) and
#     truncated mid-run (SIGBUS: the loader's handler names the file, exit 1; restored and
#     resumed).
#  4. NaN in a gradient (OLMO_FAULT_NAN_STEP, src/train/step.c): at step 1, before the skip
#     history fills, and with optim.skip_step=false: the step is skipped, no non-finite value
#     ever reaches the weights or the Adam moments; a NaN step across a checkpoint resumes
#     bitwise.
#  5. An MPI rank SIGKILLed (2 ranks): the job stops, the checkpoints are intact, 1 rank
#     resumes it. (A rank killed inside its part of a sharded checkpoint write, and one whose
#     part fails: tests/test_ckpt_shard.sh; under dist.shard: full, tests/test_shard.sh.)
#  6. One bit flipped at a random offset of the newest checkpoint (safetensors headers,
#     weights, Adam moments, train_state.json, checksums.txt), 64 trials: every resume is
#     refused (exit 2) naming the file and pointing at the previous checkpoint, with nothing
#     written; `olmo ckpt verify` and `olmo eval`/`export-hf` refuse too; resumed from the
#     previous checkpoint, the run ends bitwise equal to an uninterrupted one.
source "$(dirname "$0")/resume_lib.sh"
set +e   # the cases check exit codes themselves
STRACE=$(command -v strace || true)

# check_ckpts DIR: every step-* complete (both safetensors consistent with their size,
# train_state.json parses), `latest` (if any) names one of them. Prints the count.
check_ckpts() {
  $PY - "$1/checkpoints" <<'PY' || fail "checkpoint invariant broken in $1"
import json, os, struct, sys
ck = sys.argv[1]
if not os.path.isdir(ck):
    print(0); sys.exit(0)
steps = sorted(d for d in os.listdir(ck) if d.startswith('step-'))
for d in steps:
    json.load(open(os.path.join(ck, d, 'train_state.json')))
    for f in ('model.safetensors', 'optim.safetensors'):
        b = open(os.path.join(ck, d, f), 'rb').read()
        n = struct.unpack('<Q', b[:8])[0]
        h = json.loads(b[8:8 + n])
        end = max(v['data_offsets'][1] for k, v in h.items() if k != '__metadata__')
        assert 8 + n + end == len(b), (d, f, 'size')
lp = os.path.join(ck, 'latest')
if os.path.exists(lp):
    l = open(lp).read().strip()
    assert l in steps, ('latest names', l, steps)
print(len(steps))
PY
}
# finite FILE...: every F32 value of the safetensors files is finite.
finite() {
  $PY - "$@" <<'PY' || fail "non-finite values in $*"
import array, json, math, struct, sys
for p in sys.argv[1:]:
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    a = array.array('f'); a.frombytes(b[8 + n:])
    bad = sum(1 for x in a if not math.isfinite(x))
    assert bad == 0, f'{p}: {bad} non-finite values'
PY
}
# same_as_A DIR: the resumed run ended with A's model bits and metrics.
same_as_A() {
  cmp -s $A/model.safetensors $1/model.safetensors || fail "$2: final model differs from the uninterrupted run"
  same_metrics $A $1 0 >/dev/null || fail "$2: metrics differ from the uninterrupted run"
}

A=$TMP/A
train $A ckpt.interval=1 || fail "reference run: $(tail -3 $A.log)"

# 1. SIGKILL at each phase of checkpoint writes
if [ -n "$STRACE" ]; then
  nk=0
  for spec in "rename 1 11 false" "fsync 1 11 false" "mkdir 1 4 false" "rename 2 5 true" "fsync 2 5 true"; do
    set -- $spec
    for n in $(seq $2 $3); do
      K=$TMP/K-$1-$n-$4
      ( $STRACE -f -qq -o /dev/null -e trace=$1 -e inject=$1:signal=SIGKILL:when=$n \
        "$OLMO" train "$TMP/r.yml" train.run_dir=$K ckpt.interval=1 ckpt.async=$4 >$K.kill.log 2>&1; true ) 2>/dev/null
      [ -f $K/model.safetensors ] && fail "$1 #$n: the run finished, the kill did not land"
      check_ckpts $K >/dev/null
      train $K ckpt.interval=1 || fail "resume after SIGKILL at $1 #$n (async=$4): $(tail -3 $K.log)"
      same_as_A $K "SIGKILL at $1 #$n (async=$4)"
      rm -rf $K; nk=$((nk+1))
    done
  done
  echo "ok: $nk SIGKILLs at checkpoint phases, each resumed to the same bits"
else
  echo "note: strace missing, SIGKILL-per-phase cases skipped (test_resume.sh has one)"
fi

# 2. disk full during a checkpoint
F=$TMP/full
mkdir -p $F
if mount -t tmpfs -o size=5m tmpfs $F 2>/dev/null; then
  trap 'umount '"$F"' 2>/dev/null; rm -rf "$TMP"' EXIT
  for async in false true; do
    train $F/run ckpt.interval=2 ckpt.async=$async; rc=$?
    [ $rc = 1 ] || fail "disk full (async=$async): exit $rc, expected 1"
    grep -q "No space left on device" $F/run.log || fail "disk full: no ENOSPC message: $(tail -2 $F/run.log)"
    n=$(check_ckpts $F/run)
    [ "$n" -ge 1 ] || fail "disk full: no complete checkpoint kept"
    D=$TMP/D-$async
    cp -a $F/run $D
    rm -rf $F/run $F/run.log
    train $D ckpt.interval=2 || fail "resume after disk full: $(tail -3 $D.log)"
    same_as_A $D "disk full (async=$async)"
  done
  umount $F
  echo "ok: disk full during a checkpoint: exit 1 with ENOSPC, resumed elsewhere to the same bits"
else
  echo "note: cannot mount a tmpfs (not root?): disk-full case skipped"
fi

# 3. the token file deleted / truncated mid-run (during the paused checkpoint of step 4)
cp $TMP/tok.npy $TMP/tok2.npy
sed "s|$TMP/tok.npy|$TMP/tok2.npy|" $TMP/r.yml > $TMP/r2.yml
# midrun DIR CMD: start training on tok2.npy, run CMD while checkpoint 4 is being written.
midrun() {
  local d=$1; shift
  OLMO_TEST_CKPT_PAUSE=1 "$OLMO" train $TMP/r2.yml train.run_dir=$d ckpt.interval=4 ckpt.async=false >$d.log 2>&1 &
  local pid=$!
  wait_for 300 '[ -d $d/checkpoints/.tmp-step-00000004 ]' || fail "midrun: checkpoint 4 never started"
  "$@"
  wait $pid
}
midrun $TMP/G rm -f $TMP/tok2.npy; rc=$?
[ $rc = 0 ] || fail "token file deleted mid-run: exit $rc: $(tail -3 $TMP/G.log)"
same_as_A $TMP/G "token file deleted mid-run"
cp $TMP/tok.npy $TMP/tok2.npy
midrun $TMP/H truncate -s 0 $TMP/tok2.npy; rc=$?
[ $rc = 1 ] || fail "token file truncated mid-run: exit $rc, expected 1: $(tail -3 $TMP/H.log)"
grep -q "tok2.npy' can no longer be read" $TMP/H.log || fail "truncated: no clear message: $(tail -2 $TMP/H.log)"
check_ckpts $TMP/H >/dev/null
cp $TMP/tok.npy $TMP/tok2.npy
"$OLMO" train $TMP/r2.yml train.run_dir=$TMP/H ckpt.interval=4 >$TMP/H.log 2>&1 || fail "resume after truncation"
same_as_A $TMP/H "token file truncated mid-run"
echo "ok: token file deleted mid-run (finishes) / truncated (exit 1, named; resumed to the same bits)"

# 4. NaN in a gradient
skipped_at() { $PY -c "
import json,sys
r=[json.loads(l) for l in open('$1/metrics.jsonl')]
t={x['step']:x for x in r if x.get('kind')=='train'}
assert sorted(t)==list(range(1,13)), sorted(t)
s=[k for k in t if t[k]['skipped']]
assert s==[$2], ('skipped steps', s)
assert all(x==x for k in t for x in (t[k]['loss'],)), 'nan loss recorded'
"; }
for c in "1 true" "7 false"; do
  set -- $c
  N=$TMP/N$1
  OLMO_FAULT_NAN_STEP=$1 train $N optim.skip_step=$2 || fail "NaN at step $1: $(tail -3 $N.log)"
  skipped_at $N $1 || fail "NaN at step $1 (skip_step=$2) not skipped"
  finite $N/model.safetensors $N/checkpoints/step-*/model.safetensors $N/checkpoints/step-*/optim.safetensors
done
# a NaN step before a checkpoint, resumed: same bits as straight through
N=$TMP/N3
OLMO_FAULT_NAN_STEP=3 train $N ckpt.interval=4 || fail "NaN at step 3"
R=$TMP/N3r
OLMO_FAULT_NAN_STEP=3 train $R ckpt.interval=4 train.stop_at=6 || fail "NaN at 3, stop at 6"
train $R ckpt.interval=4 || fail "NaN at 3: resume"
cmp -s $N/model.safetensors $R/model.safetensors || fail "NaN step + resume differs from straight"
$PY - $N/metrics.jsonl $R/metrics.jsonl <<'PY' || fail "NaN step + resume: metrics differ"
import json, sys
def tr(p):
    t = [json.loads(l) for l in open(p)]
    return [(r['step'], r['loss'], r['grad_norm'], r['lr'], r['skipped']) for r in t if r.get('kind') == 'train']
a, b = tr(sys.argv[1]), tr(sys.argv[2])   # a NaN norm is recorded as null: compare exactly
assert a == b and [r[0] for r in a] == list(range(1, 13)), (a, b)
PY
finite $R/model.safetensors
echo "ok: NaN gradients skipped (step 1, skip_step off, across a resume); weights and moments finite"

# 5. an MPI rank dies
if command -v mpirun >/dev/null && ldd "$OLMO" | grep libmpi >/dev/null; then
  M=$TMP/M
  OLMO_TEST_CKPT_PAUSE=0.5 timeout 120 mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 \
    -x OLMO_TEST_CKPT_PAUSE "$OLMO" train "$TMP/r.yml" train.run_dir=$M ckpt.interval=2 ckpt.async=false >$M.log 2>&1 &
  mp=$!
  wait_for 110 '[ -d $M/checkpoints/step-00000004 ]' || true
  [ -d $M/checkpoints/step-00000004 ] || fail "2-rank run never reached checkpoint 4: $(tail -5 $M.log)"
  victim=$(pgrep -f "^$OLMO train $TMP/r.yml train.run_dir=$M" | tail -1)
  [ -n "$victim" ] || fail "no rank process found"
  kill -KILL $victim
  wait $mp; rc=$?
  [ $rc != 0 ] || fail "mpirun exit 0 after a rank was killed"
  [ $rc != 124 ] || fail "the job hung after a rank died"
  pgrep -f "train.run_dir=$M" >/dev/null && fail "ranks left running after the job stopped"
  n=$(check_ckpts $M)
  [ "$n" -ge 1 ] || fail "no complete checkpoint after the rank died"
  [ -f $M/model.safetensors ] && fail "the 2-rank run finished before the kill"
  train $M ckpt.interval=2 || fail "1-rank resume after a rank died: $(tail -3 $M.log)"
  same_metrics $A $M 0 >/dev/null || fail "rank death + 1-rank resume: metrics differ from the uninterrupted run"
  echo "ok: MPI rank SIGKILLed: job stopped (exit $rc), checkpoints intact, 1 rank resumed (bitwise: 2 micro-batches per rank are W = 1's summation tree)"
else
  echo "note: mpirun missing: rank-death case skipped"
fi
# 6. a flipped bit in a checkpoint
B=$TMP/B
train $B train.stop_at=8 ckpt.interval=2 || fail "bit-flip base run: $(tail -3 $B.log)"
C8=$B/checkpoints/step-00000008
# flip FILE REGION SEED: XOR one random bit of a random byte of REGION (header: the
# safetensors header with its 8-byte length; data: the tensor bytes; all: any byte).
# Flipping again with the same arguments restores the file. Prints the offset.
flip() {
  $PY - "$@" <<'PY'
import random, struct, sys
p, region, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = bytearray(open(p, 'rb').read())
h = 8 + struct.unpack('<Q', b[:8])[0] if region != 'all' else 0
lo, hi = {'header': (0, h), 'data': (h, len(b)), 'all': (0, len(b))}[region]
r = random.Random(seed)
off = r.randrange(lo, hi)
b[off] ^= 1 << r.randrange(8)
open(p, 'wb').write(b)
print(off)
PY
}
snap() { (cd $B && find . -type f | sort | xargs md5sum | md5sum); }
before=$(snap)
nt=0
for spec in "model.safetensors header 10" "model.safetensors data 14" "optim.safetensors header 8" \
            "optim.safetensors data 14" "train_state.json all 10" "checksums.txt all 8"; do
  set -- $spec
  for i in $(seq $3); do
    seed=$((1000 * nt + 17))
    off=$(flip $C8/$1 $2 $seed)
    "$OLMO" train "$TMP/r.yml" train.run_dir=$B ckpt.interval=2 >$B.flip.log 2>&1; rc=$?
    [ $rc = 2 ] || fail "bit flip in $1 ($2, byte $off): exit $rc, want 2: $(tail -3 $B.flip.log)"
    grep -q "step-00000008/$1" $B.flip.log || fail "bit flip in $1 ($2, byte $off): file not named: $(tail -2 $B.flip.log)"
    grep -q "newest earlier checkpoint that verifies is $B/checkpoints/step-00000006: resume from it with train.resume=$B/checkpoints/step-00000006" $B.flip.log ||
      fail "bit flip in $1 (byte $off): previous checkpoint not named: $(tail -2 $B.flip.log)"
    grep -q "^step " $B.flip.log && fail "bit flip in $1 (byte $off): training started"
    if [ $((nt % 4)) = 0 ]; then   # the other readers refuse it too (every 4th trial: time)
      "$OLMO" ckpt verify $B >$B.verify.log 2>&1 && fail "ckpt verify passed a flip in $1 (byte $off)"
      grep -q "^BAD .*step-00000008/$1" $B.verify.log || fail "ckpt verify: $1 not named BAD: $(cat $B.verify.log)"
      nok=8; [ $1 = checksums.txt ] && nok=6   # the other files (of step 8 too, unless its checksums broke)
      [ "$(grep -c '^ok ' $B.verify.log)" = $nok ] || fail "ckpt verify: the other files: $(cat $B.verify.log)"
      if [ $1 = model.safetensors ]; then
        "$OLMO" export-hf $C8 $TMP/hf-flip >$B.x.log 2>&1 && fail "export-hf read a flipped $1"
        grep -q "step-00000008/$1: checksum mismatch" $B.x.log || fail "export-hf message: $(cat $B.x.log)"
        [ -e $TMP/hf-flip ] && fail "export-hf wrote output from a flipped checkpoint"
      fi
    fi
    flip $C8/$1 $2 $seed >/dev/null
    nt=$((nt+1))
  done
done
[ "$(snap)" = "$before" ] || fail "bit-flip trials changed the run directory"
"$OLMO" ckpt verify $B >$B.verify.log 2>&1 || fail "ckpt verify after restoring: $(cat $B.verify.log)"
# resume from the previous checkpoint while step 8 is corrupt: the same bits as straight through
flip $C8/optim.safetensors data 99 >/dev/null
train $B train.resume=$B/checkpoints/step-00000006 ckpt.interval=2 || fail "resume from step 6: $(tail -3 $B.log)"
same_as_A $B "bit flip at step 8, resumed from step 6"
echo "ok: $nt single-bit flips (headers, weights, moments, train_state.json, checksums.txt) refused with the file named; resumed from the previous checkpoint to the same bits"
echo "test_faults: ok"
