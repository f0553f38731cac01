#!/usr/bin/env bash
# test_fuzz.sh: scripts/fuzz.sh in CI size: builds the libFuzzer harnesses (fuzz/*.c, clang
# ASan+UBSan), replays every regression input (fuzz/regress/<harness>/: inputs that once
# crashed a parser) and fuzzes each harness for FUZZ_SECONDS (default 20 s; 10 harnesses,
# two at a time on 2 cores: ~100 s of fuzzing after the build). Any crash, sanitizer report, leak of fds or memory past
# 2 GiB, or a regression input that crashes again fails the test. Longer runs:
# `scripts/fuzz.sh 600` (docs/robustness.md).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang >/dev/null || { echo "note: clang missing: fuzzing skipped"; exit 0; }
export FUZZ_BUILD=${FUZZ_BUILD:-build-fz}
bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
cat "$FUZZ_BUILD/stats.txt"
