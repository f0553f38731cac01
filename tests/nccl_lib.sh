# nccl_lib.sh: helpers for the multi-rank CUDA tests (test_cuda.sh, test_cuda_shard.sh),
# sourced after resume_lib.sh: a lost peer ends an NCCL job within a bounded time, and the
# error names it.
[[ "${BASH_SOURCE[0]}" == "$0" ]] && { echo "helper sourced by test_cuda.sh, test_cuda_shard.sh"; exit 0; }
# rank_pid R DIR: the pid of rank R of the mpirun job training into DIR.
rank_pid() {
  local p
  for p in $(pgrep -f "train.run_dir=$2( |$)"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
  done
}
# lost_peer SIGNAL WANT-REGEX [train args]: a 2-rank cuda job; signal rank 1 once step 2 is
# logged; the job must fail within 45 s with a message matching WANT-REGEX.
lost_peer() {
  local sig=$1 want=$2 d="$TMP/lost-$1" rc=0 t0 pid=""
  shift 2
  OLMO_NCCL_TIMEOUT=5 mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 -x OLMO_NCCL_TIMEOUT "$OLMO" \
    train "$TMP/r.yml" train.run_dir="$d" train.max_steps=200 ckpt.interval=0 train.backend=cuda train.log_every=1 "$@" >"$d.log" 2>&1 &
  local job=$!
  for _ in $(seq 600); do grep -q "step *2" "$d.log" 2>/dev/null && break; sleep 0.2; done
  for _ in $(seq 50); do pid=$(rank_pid 1 "$d"); [ -n "$pid" ] && break; sleep 0.1; done
  [ -n "$pid" ] || { cat "$d.log"; fail "lost peer ($sig): rank 1 not found"; }
  t0=$(date +%s)
  kill -"$sig" "$pid"
  # a stopped rank never dies by itself: free it once rank 0 has given up
  ( sleep 60; kill -KILL "$pid" 2>/dev/null ) &
  local guard=$!
  wait $job || rc=$?
  kill "$guard" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
  local took=$(( $(date +%s) - t0 ))
  [ $rc != 0 ] || { cat "$d.log"; fail "lost peer ($sig): the job exited 0"; }
  [ $took -le 45 ] || { cat "$d.log"; fail "lost peer ($sig): the job took $took s to end"; }
  grep -Eq "$want" "$d.log" || { cat "$d.log"; fail "lost peer ($sig): no message matching '$want'"; }
  echo "lost peer ($sig to rank 1${*:+, $*}): the job ended in $took s (exit $rc): $(grep -Eo "$want" "$d.log" | head -1)"
}
