#!/usr/bin/env bash
# test.sh: THE test command. Installs missing dependencies, builds, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
make -j"$(nproc)" all
bash tests/run.sh "$@"
