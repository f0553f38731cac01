#!/usr/bin/env bash
# test_mfu.sh: MFU is the job's model FLOP/s over the peak of the hardware the job uses
# (peak.h, docs/performance.md), whatever the world size (issue 23: 2 ranks used to print
# 128%, 4 ranks 8.9%, for the same work on the same two cores).
#  1. perf.peak_flops = 1e11 per core, 1 thread per rank: W = 1, 2, 4 state "N cores x
#     100.0 GFLOP/s" with N = min(CPUs, ranks) (each core once, not once per rank), the
#     metrics' peak_flops is N x 1e11, and every step's mfu = tokens_per_s x
#     flops_per_token / peak_flops (1e-12 relative) and <= 1; flops_per_token matches
#     `olmo info`'s sliding-window-aware count (4 digits), the headline; beside it
#     mfu_olmo_core_v2_3 = tokens_per_s x flops_per_token_olmo_core_v2_3 / peak_flops with
#     that field `olmo info`'s OLMo-core v2.3 count, and the startup line names both.
#     More ranks than CPUs is said (OVERSUBSCRIBED) on the startup line.
#  2. No perf.peak_flops, 2 ranks, empty cache: the sgemm peak is calibrated per core and
#     multiplied by the cores used; the stated figure is the metrics' peak_flops (0.1 GFLOP/s),
#     the formula holds and MFU <= 100%. A quiet calibration is cached (the next runs, W = 2,
#     1 and 4, say "cached" and state the same per-core figure); a busy one says BUSY and
#     writes no cache file.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
command -v mpirun >/dev/null || fail "mpirun not installed (scripts/deps.sh installs openmpi-bin)"
CPUS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)   # nproc itself honours OMP_NUM_THREADS
export XDG_CACHE_HOME=$TMP/cache

# check DIR CORES PEAK_PER_CORE(0: calibrated) OVERSUBSCRIBED(0/1)
check() {
  $PY - "$1" "$2" "$3" "$4" "$("$OLMO" info "$TMP/r.yml" | grep 'sliding-window-aware count')" \
    "$("$OLMO" info "$TMP/r.yml" | grep 'OLMo-core v2.3 count')" <<'PY'
import json, re, sys
d, cores, per, over, info, info23 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == '1', sys.argv[5], sys.argv[6]
log = open(d + '.log').read()
start = next(l for l in log.splitlines() if l.startswith('olmo train:'))
assert ('OVERSUBSCRIBED' in start) == over, f'oversubscription not stated right ({over}): {start}'
m = re.search(r'^MFU: .* vs (\d+) cores? x ([0-9.]+) GFLOP/s = ([0-9.]+) GFLOP/s \((.*)\)$', log, re.M)
assert m, 'no MFU line stating cores and peak:\n' + log
n, pc, tot, src = int(m[1]), float(m[2]), float(m[3]), m[4]
assert n == cores, f'{n} cores stated, expected {cores}'
if per > 0: assert pc == per / 1e9 and 'recipe perf.peak_flops per core' in src, m[0]
assert abs(tot - n * pc) <= 0.1 + 1e-9, m[0]
tr = [json.loads(l) for l in open(d + '/metrics.jsonl')]
tr = [r for r in tr if r.get('kind') == 'train']
assert tr, 'no train records'
fpt = float(re.search(r'([0-9.e+-]+) GFLOP', info)[1]) * 1e9
fpt23 = float(re.search(r'([0-9.e+-]+) GFLOP', info23)[1]) * 1e9
assert re.search(r'^MFU: window-aware count [0-9.]+ GFLOP/token \(OLMo-core v2.3 count [0-9.]+: mfu_olmo_core_v2_3\)', log, re.M), \
    'the MFU line does not name both counts'
assert fpt23 >= fpt, (fpt23, fpt)
for r in tr:
    peak = r['peak_flops']
    if per > 0: assert peak == cores * per, (peak, cores * per)
    assert abs(peak / 1e9 - tot) <= 0.05 + 1e-9, (peak, tot)
    assert abs(r['flops_per_token'] - fpt) <= 5e-4 * fpt, (r['flops_per_token'], fpt)
    want = r['tokens_per_s'] * r['flops_per_token'] / peak
    assert abs(r['mfu'] - want) <= 1e-12 * want, (r['step'], r['mfu'], want)
    assert abs(r['flops_per_token_olmo_core_v2_3'] - fpt23) <= 5e-4 * fpt23, (r['flops_per_token_olmo_core_v2_3'], fpt23)
    want23 = r['tokens_per_s'] * r['flops_per_token_olmo_core_v2_3'] / peak
    assert abs(r['mfu_olmo_core_v2_3'] - want23) <= 1e-12 * want23, (r['step'], r['mfu_olmo_core_v2_3'], want23)
    assert 0 < r['mfu'] <= 1.0, f"step {r['step']}: MFU {r['mfu']:.3f} above 100%"
print(f'{d}: {n} core(s) x {pc} GFLOP/s, MFU {min(r["mfu"] for r in tr):.3%}..{max(r["mfu"] for r in tr):.3%} ({src})')
PY
}

S=(train.max_steps=3 ckpt.interval=0 eval.interval=0)
# 1. fixed per-core peak
train $TMP/w1 "${S[@]}" || fail "W=1: $(tail -5 $TMP/w1.log)"
check $TMP/w1 1 1e11 0 || fail "W=1 MFU"
for w in 2 4; do
  mtrain $w $TMP/w$w "${S[@]}" || fail "W=$w: $(tail -20 $TMP/w$w.log)"
  c=$(( w < CPUS ? w : CPUS ))
  check $TMP/w$w $c 1e11 $(( w > CPUS ? 1 : 0 )) || fail "W=$w MFU"
done

# 2. calibrated per-core peak, 2 ranks
mtrain 2 $TMP/c2 "${S[@]}" perf.peak_flops=0 || fail "calibrated W=2: $(tail -20 $TMP/c2.log)"
check $TMP/c2 $(( 2 < CPUS ? 2 : CPUS )) 0 0 || fail "calibrated W=2 MFU"
if grep -q 'BUSY machine' $TMP/c2.log; then
  ls "$XDG_CACHE_HOME"/olmo/peak-* 2>/dev/null && fail "a busy calibration was cached"
  echo "calibration was busy: not cached (as it must)"
else
  ls "$XDG_CACHE_HOME"/olmo/peak-*.txt >/dev/null || fail "a quiet calibration was not cached"
  mtrain 2 $TMP/c2b "${S[@]}" perf.peak_flops=0 || fail "calibrated W=2 again"
  grep -q '^MFU: .*, cached)$' $TMP/c2b.log || fail "second run did not use the cached calibration: $(grep ^MFU $TMP/c2b.log)"
  # one per-core figure for every world size: W = 1 and 4 state the same GFLOP/s per core
  train $TMP/c1 "${S[@]}" perf.peak_flops=0 || fail "calibrated W=1"
  mtrain 4 $TMP/c4 "${S[@]}" perf.peak_flops=0 || fail "calibrated W=4"
  per=$(for d in c2 c2b c1 c4; do sed -n 's/^MFU: .* cores\? x \([0-9.]*\) GFLOP\/s = .*/\1/p' $TMP/$d.log; done | sort -u)
  [ "$(echo "$per" | wc -l)" = 1 ] || fail "per-core peaks differ between W = 2, 1, 4: $per"
  check $TMP/c4 $(( 4 < CPUS ? 4 : CPUS )) 0 $(( 4 > CPUS ? 1 : 0 )) || fail "calibrated W=4 MFU"
  echo "W = 2, 2, 1, 4: the same cached $per GFLOP/s per core"
fi
echo "test_mfu: ok"
