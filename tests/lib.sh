# lib.sh: what the shell tests share (sourced, from the repository root): the binary, a
# temporary directory removed on exit, fail(), and headless-Chromium screenshots. Kept to
# what is generic: resume_lib.sh, the checkpoint tests' helper, also writes a token file and
# a recipe when sourced. Run directly it does nothing.
[[ "${BASH_SOURCE[0]}" == "$0" ]] && { echo "helper sourced by the tests (source tests/lib.sh)"; exit 0; }
set -euo pipefail
OLMO=${OLMO_BIN:-$PWD/build/olmo}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# chromium_or_skip NAME: sets CHROME to a headless Chromium, installing the Debian package
# when root and apt-get are there (scripts/deps.sh does so on a fresh machine); without one,
# prints a SKIP line for NAME and exits 0.
chromium_or_skip() {
  CHROME=$(command -v chromium || command -v chromium-browser || true)
  if [ -z "$CHROME" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing chromium (scripts/deps.sh does this on a fresh machine)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 || true
    CHROME=$(command -v chromium || true)
  fi
  [ -n "$CHROME" ] || { echo "SKIP: $1: chromium is not installed and cannot be installed here"; exit 0; }
}

# shot HTML WIDTH HEIGHT OUT.png: a screenshot of HTML (a file) in a WIDTH x HEIGHT window;
# fails naming Chromium's last lines when it writes none.
shot() {
  local html=$1 w=$2 h=$3 out=$4 prof
  prof=$(mktemp -d)
  timeout 120 "${CHROME:-chromium}" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-dev-shm-usage \
    --user-data-dir="$prof" --hide-scrollbars --screenshot="$out" --window-size="$w,$h" "file://$html" \
    >"$T/chromium.log" 2>&1 || true
  rm -rf "$prof"
  [ -s "$out" ] || fail "chromium wrote no screenshot of $html at $w px: $(tail -5 "$T/chromium.log")"
}
