#!/usr/bin/env bash
# report_picture.sh: docs/report.png, the README's picture of the main job's report: a
# headless-Chromium screenshot of the top of runs/brown/report.html (1400 x 1600 pixels),
# as `bash scripts/main.sh` wrote it. Run after scripts/main.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -s runs/brown/report.html ] || { echo "report_picture: run bash scripts/main.sh first (no runs/brown/report.html)" >&2; exit 2; }
prof=$(mktemp -d)
trap 'rm -rf "$prof"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$prof" --hide-scrollbars \
  --screenshot="$PWD/docs/report.png" --window-size=1400,1600 "file://$PWD/runs/brown/report.html" >/dev/null 2>&1
ls -l docs/report.png
