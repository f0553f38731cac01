#!/usr/bin/env bash
# test_run_lock.sh: one `olmo train` per run_dir, and the preemption signals (io/run_lock.h,
# docs/robustness.md):
#  - while a run trains, a second `olmo train` on its run_dir exits 2 naming the holder's pid
#    and host, and writes nothing there (metrics.jsonl unchanged);
#  - a run killed with SIGKILL leaves its lock; the next run takes it over with a message
#    naming the dead pid and finishes; a normal end removes the lock;
#  - a lock from another host without a lease (an older olmo's) is refused, saying how to remove it;
#  - with a lease (OLMO_RUN_LEASE): another host's lock is refused while renewed, taken over once
#    not renewed for its lease (watched up to the lease when renewed lately, at once when long
#    expired); a holder whose lock another run took over stops with exit 2, writing nothing;
#  - under mpirun, a rank that does not see rank 0's run_dir (a mount namespace hides it) or
#    reads other data stops the run naming its rank and host (skipped without unshare -m);
#  - SIGHUP (a closed ssh session) and SIGUSR1 stop a run as SIGTERM does (tests/test_resume.sh):
#    the step finishes, a checkpoint is written, exit 0, and the rerun ends bitwise equal to a
#    run never stopped.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
host=$(hostname)
L=$TMP/L
"$OLMO" train "$TMP/r.yml" train.run_dir=$L train.max_steps=100000 ckpt.interval=100000 >$L.log 2>&1 &
pid=$!
wait_for 300 'grep -q "^step " $L.log 2>/dev/null' || fail "no step line in 300 s: $(tail -3 $L.log)"
grep -q "^pid $pid host $host started " $L/.lock || fail "lock content: $(cat $L/.lock)"
kill -STOP $pid   # hold the holder still while the second run looks (and before the file is read)
before=$(md5sum < $L/metrics.jsonl)
set +e; "$OLMO" train "$TMP/r.yml" train.run_dir=$L >$TMP/second.log 2>&1; rc=$?; set -e
[ $rc = 2 ] || fail "second run on a locked run_dir: exit $rc, want 2"
grep -q "run_dir $L is in use by another olmo train: pid $pid on host $host" $TMP/second.log || fail "refusal does not name the holder: $(cat $TMP/second.log)"
[ "$(md5sum < $L/metrics.jsonl)" = "$before" ] || fail "the refused run wrote into run_dir"
kill -KILL $pid; wait $pid 2>/dev/null || true
train $L train.max_steps=3 || fail "run after a SIGKILL'd holder: $(tail -3 $L.log)"
grep -q "run lock: $L/.lock was held by pid $pid on $host .*which is gone; taking it over" $L.log || fail "no takeover message: $(head -5 $L.log)"
[ ! -e $L/.lock ] || fail "lock left after a normal end"
echo "pid 4242 host elsewhere.example started 2026-01-01T00:00:00Z" > $L/.lock
set +e; "$OLMO" train "$TMP/r.yml" train.run_dir=$L >$TMP/foreign.log 2>&1; rc=$?; set -e
[ $rc = 2 ] && grep -q "pid 4242 on host elsewhere.example.*remove the file" $TMP/foreign.log || fail "foreign lock: exit $rc: $(cat $TMP/foreign.log)"
rm $L/.lock
echo "lock: a second run refused (exit 2, nothing written), a SIGKILL'd holder's lock taken over, a foreign host's refused"

# wait_or_kill PID: its exit status, or 137 when it still runs after 60 s (then killed)
wait_or_kill() { ( sleep 60; kill -KILL $1 2>/dev/null ) & local k=$!; wait $1; local rc=$?; kill $k 2>/dev/null; wait $k 2>/dev/null; return $rc; }

# The lease (run_lock.h): another host's lock is live while renewed, expired when not.
# renewed: a loop touches it every 0.3 s (a live holder renews every lease/4): refused.
echo "pid 4242 host elsewhere.example started 2026-01-01T00:00:00Z lease 2" > $L/.lock
touch $TMP/renewing
( while [ -e $TMP/renewing ]; do touch $L/.lock; sleep 0.3; done ) &
renewer=$!
set +e; "$OLMO" train "$TMP/r.yml" train.run_dir=$L >$TMP/live.log 2>&1; rc=$?; set -e
rm $TMP/renewing; wait $renewer
[ $rc = 2 ] && grep -q "in use by another olmo train: pid 4242 on host elsewhere.example.*renewed its lease of 2 s just now" \
  $TMP/live.log || fail "a renewed lease from another host: exit $rc: $(cat $TMP/live.log)"
grep -q "^pid 4242 host elsewhere.example" $L/.lock || fail "the refused run touched the live lock: $(cat $L/.lock)"
# renewed just now, then never again (its host lost): watched, then taken over within the lease.
touch $L/.lock
train $L train.max_steps=3 || fail "run after an abandoned lease: $(tail -3 $L.log)"
grep -q "watching it for up to" $L.log && grep -q "run lock: $L/.lock was held by pid 4242 on host elsewhere.example .*whose lease of 2 s expired" \
  $L.log || fail "no takeover of an abandoned lease: $(head -5 $L.log)"
# expired long ago: taken over at once.
echo "pid 4242 host elsewhere.example started 2026-01-01T00:00:00Z lease 2" > $L/.lock
touch -d '-1 hour' $L/.lock
train $L train.max_steps=3 || fail "run after an expired lease: $(tail -3 $L.log)"
grep -q "whose lease of 2 s expired" $L.log && ! grep -q "watching it" $L.log || fail "expired lease: $(head -5 $L.log)"
[ ! -e $L/.lock ] || fail "lock left after a normal end"
# a holder whose lock is taken over (it missed its lease) stops, writing nothing more.
OLMO_RUN_LEASE=1 "$OLMO" train "$TMP/r.yml" train.run_dir=$TMP/lost train.max_steps=100000 ckpt.interval=100000 >$TMP/lost.log 2>&1 &
pid=$!
wait_for 300 'grep -q "^step " $TMP/lost.log 2>/dev/null' || fail "no step line in 300 s: $(tail -3 $TMP/lost.log)"
grep -q "^pid $pid host $host started .* lease 1$" $TMP/lost/.lock || fail "lock content: $(cat $TMP/lost/.lock)"
echo "pid 4243 host elsewhere.example started 2026-01-01T00:00:00Z lease 1" > $TMP/newlock
mv $TMP/newlock $TMP/lost/.lock   # what a takeover leaves: another run's line
set +e; wait_or_kill $pid; rc=$?; set -e
[ $rc = 2 ] && grep -q "the run lock $TMP/lost/.lock is no longer this run's (it now reads \"pid 4243 host elsewhere.example" $TMP/lost.log \
  || fail "a holder whose lock was taken over: exit $rc: $(tail -3 $TMP/lost.log)"
grep -q "^pid 4243 " $TMP/lost/.lock || fail "the stopped holder removed the new holder's lock"
# a holder frozen past its lease (SIGSTOP: a suspended job) whose lock was taken over meanwhile
# stops at its first step after waking: no checkpoint after the last step it logged before.
F=$TMP/frozen
OLMO_RUN_LEASE=2 "$OLMO" train "$TMP/r.yml" train.run_dir=$F train.max_steps=100000 ckpt.interval=1 train.log_every=1 >$F.log 2>&1 &
pid=$!
wait_for 300 'grep -q "^step  *3/" $F.log 2>/dev/null' || fail "no step 3 in 300 s: $(tail -3 $F.log)"
kill -STOP $pid
sleep 1.5   # more than half the lease: the lock is checked at once on waking
last=$(sed -n 's/^step  *\([0-9]*\)\/.*/\1/p' $F.log | tail -1)
echo "pid 4244 host elsewhere.example started 2026-01-01T00:00:00Z lease 2" > $TMP/newlock
mv $TMP/newlock $F/.lock
kill -CONT $pid
set +e; wait_or_kill $pid; rc=$?; set -e
[ $rc = 2 ] && grep -q "the run lock $F/.lock is no longer this run's" $F.log || fail "a woken holder: exit $rc: $(tail -3 $F.log)"
newest=$(ls $F/checkpoints | sed -n 's/^step-0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1)
[ "$newest" -le "$last" ] || fail "a woken holder wrote checkpoint $newest after its lock was taken (last step logged before: $last)"
set +e; OLMO_RUN_LEASE=soon "$OLMO" train "$TMP/r.yml" train.run_dir=$L >$TMP/badlease.log 2>&1; rc=$?; set -e
[ $rc = 2 ] && grep -q "OLMO_RUN_LEASE=soon: the run lock's lease must be a whole number of seconds" $TMP/badlease.log \
  || fail "bad OLMO_RUN_LEASE: exit $rc: $(cat $TMP/badlease.log)"
echo "lease: another host's renewed lock refused, an abandoned one taken over within its lease, an expired one at once; a holder that lost its lock stops (exit 2); a bad OLMO_RUN_LEASE exits 2"

# Every rank must see rank 0's run_dir and data (a filesystem the hosts share). Rank 1 runs in
# its own mount namespace: an empty tmpfs over the run_dir's parent, or another file bound over
# the token file; the run stops with exit 2 naming rank 1 and its host.
if unshare -m true 2>/dev/null; then
  cat > $TMP/rank1.sh <<'SH'
#!/usr/bin/env bash
# rank1.sh MODE ARG CMD...: rank 1 runs CMD with ARG hidden (MODE hide: a tmpfs over the
# directory ARG) or replaced (MODE bind: ARG=NEW:OLD, NEW bound over OLD); rank 0 as is.
mode=$1 arg=$2; shift 2
[ "$OMPI_COMM_WORLD_RANK" = 1 ] || exec "$@"
if [ $mode = hide ]; then exec unshare -m bash -c 'mount -t tmpfs none "$0" && exec "${@}"' "$arg" "$@"; fi
exec unshare -m bash -c 'mount --bind "${0%%:*}" "${0#*:}" && exec "${@}"' "$arg" "$@"
SH
  chmod +x $TMP/rank1.sh
  mkdir -p $TMP/hidden
  set +e
  mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 $TMP/rank1.sh hide $TMP/hidden \
    "$OLMO" train "$TMP/r.yml" train.run_dir=$TMP/hidden/run train.max_steps=2 >$TMP/hide.log 2>&1; rc=$?
  /usr/bin/python3 -c "import struct; open('$TMP/other.npy','wb').write(struct.pack('<50000I', *[i % 1000 for i in range(50000)]))"
  mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 $TMP/rank1.sh bind $TMP/other.npy:$TMP/tok.npy \
    "$OLMO" train "$TMP/r.yml" train.run_dir=$TMP/D train.max_steps=2 >$TMP/data.log 2>&1; rc2=$?
  set -e
  [ $rc != 0 ] && grep -q "rank 1 on host $host does not see the run_dir rank 0 sees: $TMP/hidden/run" $TMP/hide.log \
    || fail "a rank without rank 0's run_dir: exit $rc: $(grep -v '^step\|^loader\|^  source' $TMP/hide.log | tail -5)"
  [ $rc2 != 0 ] && grep -q "rank 1 on host $host reads other data than rank 0" $TMP/data.log \
    || fail "a rank with other data: exit $rc2: $(tail -5 $TMP/data.log)"
  [ ! -e $TMP/D/metrics.jsonl ] || fail "the data mismatch wrote into run_dir"
  echo "shared: a rank that does not see rank 0's run_dir, or reads other data, stops the run naming rank and host"
else
  echo "SKIP (shared run_dir check): no mount namespaces here (unshare -m)"
fi

S2=$TMP/S2
train $S2 train.max_steps=150 ckpt.interval=1000 || fail "straight 150"
for sig in HUP USR1; do
  S=$TMP/S$sig
  "$OLMO" train "$TMP/r.yml" train.run_dir=$S train.max_steps=150 ckpt.interval=1000 >$S.log 2>&1 &
  pid=$!
  wait_for 300 'grep -q "^step " $S.log 2>/dev/null' || fail "no step line in 300 s: $(tail -3 $S.log)"
  kill -$sig $pid
  wait $pid || fail "SIG$sig exit status $?"
  if grep -q "stopped after step" $S.log; then
    ls $S/checkpoints | grep -q step- || fail "no checkpoint after SIG$sig"
  else
    echo "note: run finished before SIG$sig landed"
  fi
  train $S train.max_steps=150 ckpt.interval=1000 || fail "resume after SIG$sig"
  cmp $S/model.safetensors $S2/model.safetensors || fail "SIG$sig + resume differs from the straight run"
  echo "SIG$sig: checkpoint, exit 0, the rerun bitwise equal to the straight run"
done
echo "test_run_lock: ok"
