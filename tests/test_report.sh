#!/usr/bin/env bash
# test_report.sh: `olmo report` (src/cli/cmd_report.c, docs/report.md) on two tiny trained runs
# (olmo3-tiny, vocab 1000, eval sets + a task every 2 steps; run B has an alarm record
# appended): the HTML holds the expected data-series for both runs, tables and alarms, no
# external reference (no http:, https:, src=, <script>), the default output path works,
# bad input exits 2; then headless Chromium renders it and the screenshot must show the
# runs' colors (not a blank page). The rendering part is skipped, with a message, only
# when Chromium is not installed and cannot be (scripts/deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

$PY - "$T" <<'PY'
import json, random, struct, sys
d = sys.argv[1]
rng = random.Random(11)
open(f"{d}/tok.npy", "wb").write(struct.pack("<20000I", *[rng.randrange(999) for _ in range(20000)]))
for name in ("c4", "wiki"):
    toks = []
    for _ in range(6):
        toks += [rng.randrange(999) for _ in range(rng.randint(5, 40))] + [999]
    open(f"{d}/{name}.npy", "wb").write(struct.pack("<%dI" % len(toks), *toks))
with open(f"{d}/pick.jsonl", "w") as f:
    for i in range(4):
        # Text whose dolma2 tokens are all < 1000 (the tiny vocab).
        f.write(json.dumps({"context": "it is in the" + " the" * i, "choices": [" on", " to", " of"], "gold": i % 3}) + "\n")
PY
cat >"$T/r.yml" <<YML
model: {preset: olmo3-tiny}
train: {seq_len: 32, global_batch: 4, micro_batch: 2, max_steps: 6}
optim: {lr: 0.003}
schedule: {warmup_steps: 1}
data: {paths: [$T/tok.npy]}
perf: {peak_flops: 1e11}
eval: {sets: ["c4=$T/c4.npy", "wiki=$T/wiki.npy"], tasks: ["pick=$T/pick.jsonl"], eos_id: 999, interval: 2}
YML
"$OLMO" train "$T/r.yml" train.run_dir="$T/run-a" >"$T/a.log" 2>&1 || { cat "$T/a.log"; fail "train A"; }
"$OLMO" train "$T/r.yml" train.run_dir="$T/run-b" train.seed=2 >"$T/b.log" 2>&1 || { cat "$T/b.log"; fail "train B"; }
echo '{"kind":"alarm","alarm":"memorization","step":6,"why":"training loss fell 0.2 nats but held-out CE rose <0.01>","train_drop":0.2}' >>"$T/run-b/metrics.jsonl"

"$OLMO" report "$T/run-a" "$T/run-b" -o "$T/report.html" --title "A vs B <test>" >"$T/rep.log" 2>&1 || { cat "$T/rep.log"; fail "report"; }
cat "$T/rep.log"
$PY - "$T/report.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
series = set(re.findall(r'data-series="([^"]*)"', html))
want = []
for run in ("run-a", "run-b"):
    want += [f"{run}:{k}" for k in ("loss", "lr", "grad_norm", "tokens_per_s", "mfu", "eval/macro/ce", "eval/macro/ppl",
                                     "eval/macro/bpb")]
    for s in ("c4", "wiki"):
        want += [f"{run}:eval/{s}/{m}" for m in ("ce", "ppl", "bpb")]
missing = [w for w in want if w not in series]
assert not missing, f"missing series: {missing}; have {sorted(series)}"
for bad in ("http:", "https:", "<script", "src=", "url(", "@import"):
    assert bad not in html.lower(), f"external reference or script: {bad}"
assert "<title>A vs B &lt;test&gt;</title>" in html, "title not escaped"
assert html.count("<svg") >= 15, html.count("<svg")
# downstream tasks: one table, acc next to chance (3 choices: 0.333), not one chart per metric
m = re.search(r'<table class="tasks">(.*?)</table>', html, re.S)
assert m and m.group(1).count("<th>pick</th>") == 2 and "<td>0.333</td>" in m.group(1), "tasks table"
assert "data-series=\"run-a:task/" not in html, "task charts"
# the sets legend, perplexity on a log scale, responsive grid
assert re.search(r'<table class="sets">.*<th>c4</th>.*</table>', html, re.S), "sets table"
assert "perplexity, macro (log scale)" in html and "grid-template-columns" in html
assert "memorization" in html and "held-out CE rose &lt;0.01&gt;" in html, "alarm row"
assert re.search(r"<th>alarms</th><td>0</td><td class=\"alarm\">1</td>", html), "alarm counts"
assert "olmo3-tiny" in html and "6 / 6" in html, "summary facts"
# Every path has a drawable d attribute with finite numbers.
for d in re.findall(r'<path data-series="[^"]*" [^>]*d="([^"]*)"', html):
    assert re.fullmatch(r"M[-0-9. LM]+", d), d[:80]
print(f"report ok: {len(series)} series, {html.count('<svg')} charts, {len(html)} bytes")
PY

# One run: default output RUN/report.html. Bad input: exit 2.
"$OLMO" report "$T/run-a" >/dev/null || fail "single-run report"
[ -s "$T/run-a/report.html" ] || fail "default output path"
set +e
"$OLMO" report "$T/nope" -o "$T/x.html" 2>"$T/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q 'run directory .*nope does not exist' "$T/err" || fail "missing run: exit $rc"
mkdir -p "$T/empty"
set +e; "$OLMO" report "$T/empty" -o "$T/x.html" 2>"$T/err"; rc=$?; set -e
[ "$rc" = 2 ] && grep -q 'metrics.jsonl: cannot read' "$T/err" || fail "missing metrics: exit $rc"
set +e; "$OLMO" report 2>/dev/null; rc=$?; set -e
[ "$rc" = 2 ] || fail "no args: exit $rc"

# ---- render in headless Chromium ------------------------------------------------------
CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing chromium (scripts/deps.sh does this on a fresh machine)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 || true
  CHROME=$(command -v chromium || true)
fi
if [ -z "$CHROME" ]; then
  echo "SKIP rendering: chromium is not installed and cannot be installed here"
  echo "test_report: ok (without rendering)"
  exit 0
fi
PROFILE=$(mktemp -d)
timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --disable-dev-shm-usage --user-data-dir="$PROFILE" --hide-scrollbars \
  --screenshot="$T/shot.png" --window-size=1200,2000 "file://$T/report.html" >"$T/chrome.log" 2>&1 || true
rm -rf "$PROFILE"
[ -s "$T/shot.png" ] || { cat "$T/chrome.log"; fail "chromium wrote no screenshot"; }
# Decode the PNG with zlib + numpy (no imaging library needed) and look for the colors of
# the two runs' series (#1f77b4, #d62728) and for enough distinct colors overall.
$PY - "$T/shot.png" <<'PY'
import struct, sys, zlib
import numpy as np
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", None
while pos < len(data):
    n, typ = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if typ == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
        bpp = 3 if ctype == 2 else 4
    elif typ == b"IDAT":
        idat += body
    pos += 12 + n
raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * bpp)
img = np.zeros((h, w * bpp), dtype=np.uint8)
prev = np.zeros(w * bpp, dtype=np.int32)
for y in range(h):
    f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
    if f == 0:
        cur = line
    elif f == 1:   # Sub: running sum along each channel
        cur = (np.cumsum(line.reshape(w, bpp), axis=0) % 256).reshape(-1)
    elif f == 2:   # Up
        cur = (line + prev) % 256
    else:          # Average / Paeth: sequential in x
        cur = np.zeros_like(line)
        L = line.tolist(); P = prev.tolist(); C = [0] * len(L)
        for i in range(len(L)):
            a = C[i - bpp] if i >= bpp else 0
            b = P[i]
            if f == 3:
                C[i] = (L[i] + (a + b) // 2) & 255
            else:
                c = P[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                C[i] = (L[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        cur = np.array(C, dtype=np.int32)
    img[y] = cur
    prev = cur
px = img.reshape(h, w, bpp)[:, :, :3].reshape(-1, 3)
colors = {tuple(c) for c in np.unique(px, axis=0)}
def count(rgb):
    return int(np.all(np.abs(px.astype(int) - np.array(rgb)) <= 8, axis=1).sum())
blue, red = count((0x1f, 0x77, 0xb4)), count((0xd6, 0x27, 0x28))
print(f"screenshot {w}x{h}: {len(colors)} distinct colors, run-a blue pixels {blue}, run-b red pixels {red}")
assert len(colors) > 20, "blank page"
assert blue > 200 and red > 200, "series colors not rendered"
PY
echo "test_report: all ok"
