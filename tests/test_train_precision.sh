#!/usr/bin/env bash
# test_train_precision.sh: scripts/train_precision.sh, the main job's choice of training
# precision: bf16 on each native bf16 engine this CPU has (amx, avx512bf16), fp32 on the
# emulated one, OLMO_PRECISION overriding both, and a bad OLMO_PRECISION exit 2 naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
fail() { echo "FAIL: $*" >&2; exit 1; }
pick() { bash scripts/train_precision.sh "$OLMO"; }

got=$(OLMO_BF16_ENGINE=emulated pick)
[ "${got%% *}" = fp32 ] || fail "emulated engine: '$got', expected fp32"
for e in amx avx512bf16; do
  if OLMO_BF16_ENGINE=$e "$OLMO" info olmo3-tiny >/dev/null 2>&1; then
    got=$(OLMO_BF16_ENGINE=$e pick)
    [ "$got" = "bf16 native bf16 engine: $e" ] || fail "$e engine: '$got', expected bf16"
    echo "ok $e: bf16"
  else
    echo "skip $e: not on this CPU"
  fi
done
got=$(OLMO_PRECISION=fp32 OLMO_BF16_ENGINE=amx pick 2>/dev/null || true)
[ "${got%% *}" = fp32 ] || fail "OLMO_PRECISION=fp32: '$got'"
got=$(OLMO_PRECISION=bf16 OLMO_BF16_ENGINE=emulated pick)
[ "${got%% *}" = bf16 ] || fail "OLMO_PRECISION=bf16: '$got'"
rc=0; err=$(OLMO_PRECISION=fp16 pick 2>&1) || rc=$?
[ $rc = 2 ] && grep -q "OLMO_PRECISION must be fp32 or bf16, not 'fp16'" <<<"$err" || fail "bad OLMO_PRECISION: exit $rc: $err"
echo "test_train_precision: ok"
