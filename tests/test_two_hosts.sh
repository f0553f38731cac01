#!/usr/bin/env bash
# test_two_hosts.sh: two hosts on one machine, joined by a network, and the faults of a
# cluster (issue 51; docs/cluster.md). Each host is a network namespace with its own UTS
# namespace (hostname hosta / hostb) and /etc/netns/<ns>/hosts; a veth pair joins them on a
# private /24 that exists only inside the two namespaces (no traffic leaves them), and a second
# pair the ranks' MPI traffic (a cluster's data network). Open MPI
# reaches hostb through `--mca plm_rsh_agent` (a script that runs the command inside hostb's
# namespaces, as ssh would on the other machine), `--mca btl tcp,self` and
# `btl_tcp_if_include` / `oob_tcp_if_include` on the veth subnet; the filesystem is shared
# (as NFS on a cluster). The commands are docs/cluster.md's hostfile form.
#  1. W=2 by node and W=4 by slot over both hosts: the placement line names both hosts;
#     weights bitwise equal to W=1. A run_dir or data file hostb does not share (a tmpfs or a
#     shorter file mounted there) stops the run with exit 2 naming rank 1 and hostb.
#  2. the lease (io/run_lock.h): a second olmo train on the live run_dir from the other host
#     is refused; every process SIGKILLed (a crash), the same command with rank 0 on the other
#     host and at W=4 takes the expired lock over and resumes bitwise.
#  3. SIGTERM and SIGHUP to the launcher (scripts/olmo-mpirun): a published checkpoint at the
#     step, exit 0, the rerun bitwise equal to the uninterrupted run.
#  4. the MPI network cut mid-run (the daemons' still up), and a lost host (hostb frozen and
#     cut off, while a stray process keeps writing a heartbeat under rank 1's name): the job
#     ends within 30 s (OLMO_DIST_TIMEOUT=4), the ranks naming the rank and host they lost
#     (dist/dist_watch.h); nothing of the job is left running on either host.
#  The heartbeats a crash leaves in RUN_DIR/.alive (and a larger run's extra ranks) are
#  cleared by the rerun (part 2).
# Cleanup (trap): every process in both namespaces killed, namespaces, veth and /etc/netns
# entries removed, whatever happens. Skips, with a line saying why, where namespaces cannot
# be made (not root, no CAP_SYS_ADMIN, no `ip`).
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
command -v mpirun >/dev/null || fail "mpirun not installed (scripts/deps.sh installs openmpi-bin)"
A=olmo51a$$ B=olmo51b$$ VA=v51a$$ VB=v51b$$ DA=d51a$$ DB=d51b$$
NET=10.251.$(($$ % 250)) DATA=10.252.$(($$ % 250))
cleanup() {   # every step tried, whatever fails; the test's own status kept
  local rc=$?
  set +e
  for n in $A $B; do
    for p in $(ip netns pids $n 2>/dev/null); do kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; done
    ip netns del $n 2>/dev/null
    rm -rf /etc/netns/$n
  done
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
trap 'exit 143' TERM HUP INT   # a killed test cleans up too (the EXIT trap runs on exit)
if ! command -v ip >/dev/null || ! ip netns add $A 2>/dev/null; then
  echo "SKIP: cannot make a network namespace here (ip netns add needs root with CAP_SYS_ADMIN, and iproute2): the two-host test does not run"
  exit 0
fi
ip netns add $B
ip link add $VA netns $A type veth peer name $VB netns $B
ip link add $DA netns $A type veth peer name $DB netns $B
ip -n $A addr add $NET.1/24 dev $VA
ip -n $B addr add $NET.2/24 dev $VB
ip -n $A addr add $DATA.1/24 dev $DA
ip -n $B addr add $DATA.2/24 dev $DB
for n in $A $B; do
  ip -n $n link set lo up
  mkdir -p /etc/netns/$n
  printf '127.0.0.1 localhost\n%s.1 hosta\n%s.2 hostb\n' $NET $NET > /etc/netns/$n/hosts
done
for v in $VA $DA; do ip -n $A link set $v up; done
for v in $VB $DB; do ip -n $B link set $v up; done
unshare --uts true 2>/dev/null || { echo "SKIP: no UTS namespaces here (unshare --uts)"; exit 0; }

# on HOST CMD...: CMD as host HOST (its network and hostname). The agent is the same for Open
# MPI, which passes the remote command as one shell line, as to ssh.
on() { local h=$1; shift; ip netns exec $([ $h = hosta ] && echo $A || echo $B) unshare --uts sh -c 'hostname "$0"; exec "$@"' $h "$@"; }
cat > "$TMP/agent.sh" <<SH
#!/bin/sh
h="\$1"; shift
case "\$h" in hosta) ns=$A ;; hostb) ns=$B ;; *) echo "agent: no host \$h" >&2; exit 98 ;; esac
# ONLY_ON_HOSTB: what hostb's disk differs in (run in its private mount namespace)
[ \$h = hostb ] && [ -n "\${ONLY_ON_HOSTB:-}" ] && exec ip netns exec \$ns unshare --uts sh -c "hostname \$h; \$ONLY_ON_HOSTB || exit 97; exec \$*"
exec ip netns exec \$ns unshare --uts sh -c "hostname \$h; exec \$*"
SH
chmod +x "$TMP/agent.sh"
printf 'hosta slots=2\nhostb slots=2\n' > "$TMP/ab"
printf 'hostb slots=2\nhosta slots=2\n' > "$TMP/ba"
# The job's environment and Open MPI options: docs/cluster.md's command, with this test's
# agent in place of ssh. Two networks, as on a cluster: the daemons' (oob_tcp_if_include,
# with keepalives so that mpirun notices a lost daemon in 2 + 3 x 1 s) and the ranks' MPI
# traffic (btl_tcp_if_include).
export OLMO_RUN_LEASE=2 OLMO_DIST_TIMEOUT=600   # part 4: 4 s (a loaded machine may hold a collective for seconds)
MPI=(--allow-run-as-root --bind-to none -x PATH -x OMP_NUM_THREADS=1 -x OLMO_RUN_LEASE -x OLMO_DIST_TIMEOUT
     --mca plm_rsh_agent "$TMP/agent.sh" --mca btl tcp,self
     --mca btl_tcp_if_include $DATA.0/24 --mca oob_tcp_if_include $NET.0/24
     --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3)
# job FROM HOSTFILE W DIR [--map-by X] [key=value...]: mpirun started on host FROM (its log:
# DIR.log); LAUNCH (default mpirun) may name scripts/olmo-mpirun.
job() {
  local from=$1 hf=$2 w=$3 d=$4; shift 4
  local opts=()
  if [ "${1:-}" = "--map-by" ]; then opts=(--map-by "$2"); shift 2; fi
  on $from timeout 120 ${LAUNCH:-mpirun} --hostfile "$TMP/$hf" -np $w "${opts[@]}" "${MPI[@]}" \
    "$OLMO" train "$TMP/r.yml" train.run_dir="$d" "$@" >"$d.log" 2>&1
}
left() { for n in $A $B; do ip netns pids $n; done | xargs -r ps -o pid=,comm= -p 2>/dev/null; }
# pids HOST COMM: the processes named COMM on HOST
pids() { ip netns pids $([ $1 = hosta ] && echo $A || echo $B) | xargs -r ps -o pid=,comm= -p 2>/dev/null | awk -v c="$2" '$2 == c {print $1}'; }
no_leftovers() {   # $1: what just ended; nothing of it may run on either host
  local end=$((SECONDS + 15))
  while [ -n "$(left)" ]; do [ $SECONDS -lt $end ] || fail "$1: processes left: $(left)"; sleep 0.2; done
}

# 1. two hosts, bitwise equal to one process
P=(train.global_batch=8 train.micro_batch=1 train.max_steps=4 ckpt.interval=0)
train $TMP/one "${P[@]}" || fail "W=1: $(tail -5 $TMP/one.log)"
job hosta ab 2 $TMP/w2 --map-by node "${P[@]}" || fail "W=2 on two hosts: $(tail -20 $TMP/w2.log)"
grep -qx "placement: 2 ranks on 2 hosts | hosta: rank 0 (local 0) | hostb: rank 1 (local 0)" $TMP/w2.log \
  || fail "placement of 2 ranks: $(grep placement $TMP/w2.log)"
job hosta ab 4 $TMP/w4 "${P[@]}" || fail "W=4 on two hosts: $(tail -20 $TMP/w4.log)"
grep -qx "placement: 4 ranks on 2 hosts | hosta: ranks 0-1 (local 0-1) | hostb: ranks 2-3 (local 0-1)" $TMP/w4.log \
  || fail "placement of 4 ranks: $(grep placement $TMP/w4.log)"
for d in w2 w4; do cmp $TMP/one/model.safetensors $TMP/$d/model.safetensors || fail "$d: weights differ from W=1"; done
no_leftovers "W=2 and W=4"
echo "ok two hosts: W=2 by node and W=4 by slot, placement on both hosts, weights bitwise equal to W=1"

# What the hosts must share. hostb mounts an empty tmpfs over the runs' parent: it sees a
# run_dir of its own; then hostb reads a shorter file under the data's name.
mkdir -p $TMP/runs $TMP/data
cp $TMP/tok.npy $TMP/data/tok.npy
head -c 120000 $TMP/tok.npy > $TMP/half.npy
set +e
ONLY_ON_HOSTB="mount -t tmpfs none $TMP/runs" job hosta ab 2 $TMP/runs/x --map-by node "${P[@]}" data.paths=$TMP/data/tok.npy
rc=$?
ONLY_ON_HOSTB="mount --bind $TMP/half.npy $TMP/data/tok.npy" job hosta ab 2 $TMP/dd --map-by node "${P[@]}" data.paths=$TMP/data/tok.npy
rc2=$?
set -e
[ $rc != 0 ] && grep -q "error: rank 1 on host hostb does not see the run_dir rank 0 sees: $TMP/runs/x " $TMP/runs/x.log \
  || fail "run_dir not shared: exit $rc: $(grep -v '^step' $TMP/runs/x.log | tail -5)"
[ -e $TMP/runs/x/model.safetensors ] && fail "run_dir not shared: a model was written"
[ $rc2 != 0 ] && grep -q "error: rank 1 on host hostb reads other data than rank 0: dataset fingerprint" $TMP/dd.log \
  || fail "data not shared: exit $rc2: $(tail -5 $TMP/dd.log)"
[ -e $TMP/dd ] && fail "data not the same: run_dir $TMP/dd was created"
no_leftovers "the sharing checks"
echo "ok two hosts: a run_dir or data hostb does not share stops the run naming rank 1 and hostb"

# The longer run of parts 2 and 3 (a step line each step, checkpoints every 5 steps) and its
# uninterrupted result.
Q=(train.global_batch=8 train.micro_batch=1 train.max_steps=40 ckpt.interval=5 train.log_every=1)
train $TMP/straight "${Q[@]}" || fail "straight run: $(tail -5 $TMP/straight.log)"
at_step() { wait_for 120 "grep -q '^step *$2/' $1.log 2>/dev/null" || fail "no step $2 in $1.log: $(tail -5 $1.log)"; }

# 2. the lease: refused while live from the other host; after a crash, taken over from there.
job hosta ab 2 $TMP/crash --map-by node "${Q[@]}" &
jobpid=$!
at_step $TMP/crash 12
# rank 1 held still (rank 0 waits for it, its lease renewed all the while) while hostb asks
kill -STOP $(pids hostb olmo)
set +e; on hostb "$OLMO" train "$TMP/r.yml" train.run_dir=$TMP/crash "${Q[@]}" >$TMP/second.log 2>&1; rc=$?; set -e
for p in $(ip netns pids $A) $(ip netns pids $B); do kill -KILL $p 2>/dev/null || true; done   # the crash
wait $jobpid 2>/dev/null || true
[ $rc = 2 ] && grep -q "run_dir $TMP/crash is in use by another olmo train: pid [0-9]* on host hosta.*renewed its lease of 2 s just now" \
  $TMP/second.log || fail "second run from hostb on a live run_dir: exit $rc: $(cat $TMP/second.log)"
grep -q "^pid [0-9]* host hosta started .* lease 2$" $TMP/crash/.lock || fail "lock after the crash: $(cat $TMP/crash/.lock)"
no_leftovers "the crash"
cp $TMP/crash.log $TMP/crash1.log
# The crash left its ranks' heartbeats; a run at a larger world size would have left more
# (planted: rank 7). The rerun must clear them at start: none is left when it ends.
[ "$(ls $TMP/crash/.alive | wc -l)" = 2 ] || fail "heartbeats after the crash: $(ls $TMP/crash/.alive)"
echo "host hostc seq 1 wait -" > $TMP/crash/.alive/rank-7
job hostb ba 4 $TMP/crash "${Q[@]}" || fail "rerun from hostb at W=4: $(tail -20 $TMP/crash.log)"
grep -q "run lock: $TMP/crash/.lock was held by pid [0-9]* on host hosta .*whose lease of 2 s expired" $TMP/crash.log \
  || fail "no lease takeover: $(head -20 $TMP/crash.log)"
grep -q "^placement: 4 ranks on 2 hosts | hostb: ranks 0-1" $TMP/crash.log || fail "rank 0 not on hostb: $(grep placement $TMP/crash.log)"
grep -q "^resume: .*step-.* saved by 2 ranks, now 4" $TMP/crash.log || fail "the rerun did not resume: $(head -20 $TMP/crash.log)"
[ ! -e $TMP/crash/.alive ] || fail "the rerun left heartbeats behind: $(ls $TMP/crash/.alive)"
cmp $TMP/straight/model.safetensors $TMP/crash/model.safetensors || fail "crash + rerun from hostb differs from the straight run"
no_leftovers "the rerun"
echo "ok lease: a second run from the other host refused while live; after a crash, rank 0 on the other host at W=4 takes the lock over and resumes bitwise"

# 3. SIGTERM and SIGHUP to the launcher.
for sig in TERM HUP; do
  S=$TMP/sig$sig
  LAUNCH=$PWD/scripts/olmo-mpirun job hosta ab 2 $S --map-by node "${Q[@]}" &
  jobpid=$!
  at_step $S 5
  lp=$(ip netns pids $A | xargs -r ps -o pid=,args= -p | awk '$2 ~ /bash$/ && $3 ~ /olmo-mpirun$/ {print $1}')
  [ -n "$lp" ] || fail "SIG$sig: no olmo-mpirun process found: $(left)"
  kill -$sig $lp
  set +e; wait $jobpid; rc=$?; set -e
  [ $rc = 0 ] || fail "SIG$sig to the launcher: exit $rc: $(tail -20 $S.log)"
  n=$(sed -n 's/^stopped after step \([0-9]*\) .*/\1/p' $S.log)
  [ -n "$n" ] || fail "SIG$sig: the run did not stop with a checkpoint: $(tail -5 $S.log)"
  [ "$(readlink $S/checkpoints/latest 2>/dev/null || cat $S/checkpoints/latest)" = step-$n ] || ls $S/checkpoints | grep -qx "step-0*$n" \
    || fail "SIG$sig: no published checkpoint at step $n: $(ls $S/checkpoints)"
  [ ! -e $S/.lock ] || fail "SIG$sig: lock left behind"
  no_leftovers "SIG$sig"
  LAUNCH=$PWD/scripts/olmo-mpirun job hostb ba 2 $S --map-by node "${Q[@]}" || fail "rerun after SIG$sig: $(tail -20 $S.log)"
  cmp $TMP/straight/model.safetensors $S/model.safetensors || fail "SIG$sig + rerun differs from the straight run"
  echo "ok SIG$sig to the launcher: checkpoint at step $n published, exit 0, the rerun bitwise equal"
done

# 4. the MPI network cut mid-run (the daemons' network still up), and a host lost (hostb
# frozen, both networks cut). A run that would take minutes; OLMO_DIST_TIMEOUT=4.
L=(train.global_batch=8 train.micro_batch=1 train.max_steps=100000 ckpt.interval=0 train.log_every=1)
export OLMO_DIST_TIMEOUT=4
for fault in link host; do
  F=$TMP/$fault
  job hosta ab 2 $F --map-by node "${L[@]}" &
  jobpid=$!
  at_step $F 5
  if [ $fault = host ]; then
    # A process of an earlier job that nobody killed keeps writing rank 1's heartbeat (in
    # the file naming of any version): it must not pass for this run's rank 1.
    ( while :; do for f in rank-1 rank-1.0123456789abcdef; do
        echo "host hostb seq 1 wait -" > $F/.alive/$f.g && mv $F/.alive/$f.g $F/.alive/$f; done; sleep 0.2; done ) &
    ghost=$!
    for p in $(ip netns pids $B); do kill -STOP $p; done   # hostb stops answering
    ip -n $A link set $VA down
  fi
  ip -n $A link set $DA down
  t1=$SECONDS
  set +e; wait $jobpid; rc=$?; set -e
  took=$((SECONDS - t1))
  [ $fault = link ] || kill $ghost
  [ $rc != 0 ] && [ $rc != 124 ] || fail "$fault lost: exit $rc (124: still running after 120 s): $(grep -v '^step' $F.log | tail -20)"
  [ $took -le 30 ] || fail "$fault lost: the job took $took s to end"
  if [ $fault = link ]; then
    for r in "0 hosta" "1 hostb"; do
      set -- $r; other=$([ $2 = hosta ] && echo "1 on host hostb" || echo "0 on host hosta")
      grep -q "olmo: error: rank $1 on host $2: .* got no answer for [0-9]* s (OLMO_DIST_TIMEOUT=4); every rank is alive and waiting in a collective: rank $other cannot be reached" $F.log \
        || fail "MPI network cut: rank $1 does not name rank $other: $(grep -v '^step' $F.log | tail -20)"
    done
  else
    grep -q "olmo: error: rank 0 on host hosta: .* got no answer for [0-9]* s (OLMO_DIST_TIMEOUT=4); stopped answering: rank 1 on host hostb (no heartbeat" $F.log \
      || fail "host lost: no message naming rank 1 on hostb: $(grep -v '^step' $F.log | tail -20)"
    for p in $(ip netns pids $B); do kill -KILL $p; done   # the lost host's frozen processes
    ip -n $A link set $VA up
  fi
  ip -n $A link set $DA up
  wait_for 10 "ip -n $A link show $VA | grep -q 'state UP' && ip -n $A link show $DA | grep -q 'state UP'" || fail "veth not up again"
  no_leftovers "$fault lost"
  echo "ok $fault lost: the job ended in $took s (OLMO_DIST_TIMEOUT=4), the message naming the rank and host lost; nothing left running"
done
echo "test_two_hosts: ok"
