#!/usr/bin/env bash
# test_multihost.sh: a two-host Open MPI job on one machine, and the launch checks.
# Open MPI treats every name its launcher reaches as a node of its own when the daemon
# there reports that name: a fake remote shell (plm_rsh_agent) starts each "host"'s daemon in
# its own UTS namespace (its own hostname) and mount namespace, so nodea and nodeb are two
# nodes to MPI (MPI_COMM_TYPE_SHARED splits them: local ranks restart at 0 on each), talking
# over TCP on loopback as real hosts do over a network. What a real second machine adds
# (another kernel, another filesystem unless it is shared, a real network) is not here.
#  1. 2 and 4 ranks on 2 hosts: the placement line names each host, its ranks and local
#     ranks (by slot and --map-by node); weights bitwise equal to the same W on one host
#     and to W = 1 (8 micro-batches: a power of two per rank).
#  2. run_dir not shared (nodeb sees its own empty directory there): exit 2 naming rank 1
#     and host nodeb; data not the same (nodeb sees another file under the same name):
#     exit 2 naming rank 1, nodeb and the fingerprints.
#  3. srun without an MPI plugin (a fake SLURM step: SLURM_STEP_NUM_TASKS=4): exit 2 naming
#     --mpi=pmix, nothing written; an sbatch script's own shell (SLURM_NTASKS set, no step)
#     trains as one process.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
command -v mpirun >/dev/null || fail "mpirun not installed (scripts/deps.sh installs openmpi-bin)"
unshare --uts --mount true 2>/dev/null \
  || fail "unshare --uts --mount needs root (CAP_SYS_ADMIN): this test fakes two hosts with namespaces"

# The fake remote shell: `agent HOST COMMAND...` runs COMMAND as host HOST. On nodeb it first
# evaluates $FAKE_NODEB (inside nodeb's private mount namespace: what nodeb's disk differs in).
cat > "$TMP/agent.sh" <<'SH'
#!/bin/sh
h="$1"; shift
exec unshare --uts --mount sh -c "hostname $h; if [ $h = nodeb ] && [ -n \"\$FAKE_NODEB\" ]; then eval \"\$FAKE_NODEB\" || exit 97; fi; exec $*"
SH
chmod +x "$TMP/agent.sh"
printf 'nodea slots=2\nnodeb slots=2\n' > "$TMP/hosts"
# htrain W DIR [mpirun options --] [key=value...]: W ranks on nodea + nodeb
htrain() {
  local w=$1 d=$2; shift 2
  local opts=()
  if [ "${1:-}" = "--map-by" ]; then opts=(--map-by "$2"); shift 2; fi
  timeout 300 mpirun --oversubscribe --allow-run-as-root --hostfile "$TMP/hosts" "${opts[@]}" -np "$w" \
    --mca plm_rsh_agent "$TMP/agent.sh" -x OMP_NUM_THREADS=1 \
    "$OLMO" train "$TMP/r.yml" train.run_dir="$d" "$@" >"$d.log" 2>&1
}

# 1. two hosts: placement and bitwise equality with one host
P=(train.global_batch=8 train.micro_batch=1 train.max_steps=4 ckpt.interval=0)
train $TMP/one "${P[@]}" || fail "W=1: $(tail -5 $TMP/one.log)"
htrain 2 $TMP/h2 --map-by node "${P[@]}" || fail "2 ranks on 2 hosts: $(tail -20 $TMP/h2.log)"
grep -qx "placement: 2 ranks on 2 hosts | nodea: rank 0 (local 0) | nodeb: rank 1 (local 0)" $TMP/h2.log \
  || fail "placement of 2 ranks: $(grep placement $TMP/h2.log)"
htrain 4 $TMP/h4 "${P[@]}" || fail "4 ranks by slot: $(tail -20 $TMP/h4.log)"
grep -qx "placement: 4 ranks on 2 hosts | nodea: ranks 0-1 (local 0-1) | nodeb: ranks 2-3 (local 0-1)" $TMP/h4.log \
  || fail "placement of 4 ranks by slot: $(grep placement $TMP/h4.log)"
htrain 4 $TMP/h4n --map-by node "${P[@]}" || fail "4 ranks by node: $(tail -20 $TMP/h4n.log)"
grep -qx "placement: 4 ranks on 2 hosts | nodea: ranks 0 (local 0), 2 (local 1) | nodeb: ranks 1 (local 0), 3 (local 1)" \
  $TMP/h4n.log || fail "placement of 4 ranks by node: $(grep placement $TMP/h4n.log)"
mtrain 2 $TMP/s2 "${P[@]}" || fail "2 ranks on one host: $(tail -20 $TMP/s2.log)"
grep -qx "placement: 2 ranks on 1 host | $(hostname): ranks 0-1 (local 0-1)" $TMP/s2.log \
  || fail "placement on one host: $(grep placement $TMP/s2.log)"
for d in h2 h4 h4n s2; do
  cmp $TMP/one/model.safetensors $TMP/$d/model.safetensors || fail "$d: weights differ from W=1"
  same_metrics $TMP/one $TMP/$d 0 >/dev/null || fail "$d: losses differ from W=1"
done
echo "ok 2 hosts: placement by slot and by node, weights bitwise equal to one host and to W=1"

# 2. what a host must share. nodeb mounts an empty tmpfs over the runs' parent directory: it
# sees a run_dir of its own (after rank 0 created the real one).
mkdir -p $TMP/runs $TMP/data
cp $TMP/tok.npy $TMP/data/tok.npy
D=(data.paths=$TMP/data/tok.npy)
export FAKE_NODEB="mount -t tmpfs none $TMP/runs"
htrain 2 $TMP/runs/x --map-by node "${P[@]}" "${D[@]}" && fail "run_dir not shared: the run went on"
grep -q "error: rank 1 on host nodeb does not see the run_dir rank 0 sees: $TMP/runs/x " $TMP/runs/x.log \
  || fail "run_dir not shared: $(tail -5 $TMP/runs/x.log)"
[ -e $TMP/runs/x/model.safetensors ] && fail "run_dir not shared: a model was written"
# nodeb reads another file under the same path (an older copy: half of it). The fingerprint
# covers names and sizes, not contents: a same-size file with other tokens is not caught.
head -c 120000 $TMP/tok.npy > $TMP/half.npy
export FAKE_NODEB="mount -t tmpfs none $TMP/data && cp $TMP/half.npy $TMP/data/tok.npy"
htrain 2 $TMP/dd --map-by node "${P[@]}" "${D[@]}" && fail "data not shared: the run went on"
grep -q "error: rank 1 on host nodeb reads other data than rank 0: dataset fingerprint [0-9a-f]*\.\.\., rank 0's [0-9a-f]*\.\.\." \
  $TMP/dd.log || fail "data not the same: $(tail -5 $TMP/dd.log)"
[ -e $TMP/dd ] && fail "data not the same: run_dir $TMP/dd was created"
unset FAKE_NODEB
echo "ok 2 hosts: a run_dir or data a host does not share stops the run (exit 2, the rank and host named)"

# 3. srun without an MPI plugin, and an sbatch script's own shell
set +e
SLURM_JOB_ID=7 SLURM_NTASKS=4 SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=2 SLURM_LOCALID=2 \
  "$OLMO" train "$TMP/r.yml" train.run_dir=$TMP/srun >$TMP/srun.log 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "srun without --mpi: exit $rc, expected 2: $(cat $TMP/srun.log)"
grep -q "srun started 4 tasks (SLURM_STEP_NUM_TASKS; this is task 2) but no MPI process manager" $TMP/srun.log \
  && grep -q "srun --mpi=pmix" $TMP/srun.log || fail "srun without --mpi: $(cat $TMP/srun.log)"
[ -e $TMP/srun ] && fail "srun without --mpi: run_dir written"
SLURM_JOB_ID=7 SLURM_NTASKS=4 SLURM_PROCID=0 train $TMP/sbatch "${P[@]}" || fail "sbatch shell: $(tail -5 $TMP/sbatch.log)"
cmp $TMP/one/model.safetensors $TMP/sbatch/model.safetensors || fail "sbatch shell: weights differ"
echo "ok srun without an MPI plugin refused (exit 2, nothing written); an sbatch shell trains as one process"
