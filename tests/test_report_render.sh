#!/usr/bin/env bash
# test_report_render.sh: `olmo report` as a browser draws it (issue 37, item 2), checked on
# headless Chromium screenshots, not only in the HTML: two stages of a tiny model (stage 2
# from stage 1's weights, evaluated at another sequence length), one report, screenshots at
# 1400 and 700 pixels wide. At 1400 the charts fill three columns (rows of pixels crossing
# three white chart boxes), at 700 one (not two side by side), and curves are drawn in
# the series colors. In the HTML: stage 2 continues stage 1's token axis with the boundary
# marked, held-out charts per evaluation length, perplexity on a log scale.
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
command -v chromium >/dev/null || { echo "SKIP: no chromium (scripts/deps.sh installs it)"; exit 0; }
export OMP_NUM_THREADS=1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
/usr/bin/python3 - "$T" <<'PY'
import random, struct, sys
d = sys.argv[1]
random.seed(11)
def w(name, ids): open(f"{d}/{name}", "wb").write(struct.pack(f"<{len(ids)}I", *ids))
w("tok.npy", [random.randrange(999) for _ in range(8000)])
held = []
for n in (40, 70, 25, 90): held += [random.randrange(999) for _ in range(n)] + [999]
w("held.npy", held)
w("ood.heldout.npy", held[::-1][1:] + [999])   # a held-out split of a source not trained on
PY
cat >"$T/s1.yml" <<YML
model: {preset: olmo3-tiny}
train: {seq_len: 32, global_batch: 4, micro_batch: 2, max_steps: 8, run_dir: $T/stage1}
optim: {lr: 0.003}
schedule: {warmup_steps: 1}
data: {paths: [$T/tok.npy]}
eval: {sets: ["held=$T/held.npy", "$T/ood.heldout.npy"], eos_id: 999, interval: 2}
perf: {peak_flops: 1e11}
ckpt: {interval: 0}
YML
"$OLMO" train "$T/s1.yml" >"$T/s1.log" 2>&1 || fail "stage 1: $(tail -3 "$T/s1.log")"
"$OLMO" train "$T/s1.yml" train.run_dir="$T/stage2" train.load_path="$T/stage1" train.seq_len=64 train.max_steps=4 \
  >"$T/s2.log" 2>&1 || fail "stage 2: $(tail -3 "$T/s2.log")"
"$OLMO" report "$T/stage1" "$T/stage2" -o "$T/report.html" >/dev/null || fail "report"
/usr/bin/python3 - "$T/report.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
assert '<g class="vline">' in html and ">stage2</text>" in html, "no stage boundary"
assert "held: CE (nats), evaluated at 32 tokens" in html and "held: CE (nats), evaluated at 64 tokens" in html, "no split by length"
assert "(log scale)" in html and "tokens (all stages on one axis)" in html
assert "in-domain (the set the memorization alarm watches)" in html, "set roles"
assert "out of domain: held-out documents of source ood, which the run does not train on" in html, "set roles"
# stage 2's first training point sits right of stage 1's last one on the token axis
def xs(series):
    m = re.search(r'data-series="%s" [^>]*d="([^"]*)"' % re.escape(series), html)
    return [float(p.split()[0]) for p in re.split(r"[ML]", m.group(1)) if p.strip()]
a, b = xs("stage1:loss"), xs("stage2:loss")
assert min(b) > max(a), (max(a), min(b))
print("html ok: one token axis (stage 1 ends at x=%.1f, stage 2 starts at %.1f), boundary, lengths apart" % (max(a), min(b)))
PY
shot() {
  local w=$1 out=$2 prof; prof=$(mktemp -d)
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$prof" --hide-scrollbars \
    --screenshot="$out" --window-size="$w,4000" "file://$T/report.html" >"$T/chromium.log" 2>&1 || true
  rm -rf "$prof"
  [ -s "$out" ] || fail "chromium wrote no screenshot at $w px: $(tail -5 "$T/chromium.log")"
}
shot 1400 "$T/wide.png"
shot 700 "$T/narrow.png"
/usr/bin/python3 tests/png_layout.py "$T/wide.png" 300 >"$T/wide.json"
/usr/bin/python3 tests/png_layout.py "$T/narrow.png" 300 >"$T/narrow.json"
/usr/bin/python3 - "$T/wide.json" "$T/narrow.json" <<'PY'
import json, sys
wide, narrow = (json.load(open(p)) for p in sys.argv[1:3])
wc = {int(k): v for k, v in wide["rows_by_columns"].items()}
nc = {int(k): v for k, v in narrow["rows_by_columns"].items()}
assert wide["width"] == 1400 and narrow["width"] == 700, (wide["width"], narrow["width"])
assert wc.get(3, 0) >= 200, f"1400 px: charts do not fill three columns: {wc}"
# (a few rows of a table's wide white cells may cross two runs; two chart columns would be hundreds)
assert sum(v for k, v in nc.items() if k >= 2) < 50, f"700 px: charts side by side: {nc}"
assert nc.get(1, 0) >= 300, f"700 px: no chart column: {nc}"
assert wide["colored"] > 500 and narrow["colored"] > 500, "no curves drawn"
print(f"screenshots ok: 1400 px {wc.get(3)} pixel rows across 3 chart columns; 700 px one column "
      f"({nc.get(1)} rows); {wide['colored']} curve pixels")
PY
echo "test_report_render: ok"
