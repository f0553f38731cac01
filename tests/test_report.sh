#!/usr/bin/env bash
# test_report.sh: `olmo report` (src/cli/cmd_report.c, docs/report.md) on two tiny trained runs
# (olmo3-tiny, vocab 1000, eval sets + a task every 2 steps; run B has an alarm record
# appended): the HTML holds the expected data-series for both runs, tables and alarms, no
# external reference (no http:, https:, src=, <script>), the default output path works,
# bad input exits 2; then headless Chromium renders it and the screenshot must show the
# runs' colors (not a blank page; tests/png_layout.py reads the PNG). The rendering part is skipped, with a message, only
# when Chromium is not installed and cannot be (scripts/deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/lib.sh
export OMP_NUM_THREADS=2

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
                                     "eval/macro/bpb", "alarm/train_loss", "alarm/heldout_ce", "alarm/gap",
                                     "task/pick/acc")]
    want += [f"{run}:eval/{s}/ce" for s in ("c4", "wiki")]   # per set CE only: PPL and bpb follow it
missing = [w for w in want if w not in series]
assert not missing, f"missing series: {missing}; have {sorted(series)}"
for bad in ("http:", "https:", "<script", "src=", "url(", "@import"):
    assert bad not in html.lower(), f"external reference or script: {bad}"
assert "<title>A vs B &lt;test&gt;</title>" in html, "title not escaped"
assert html.count("<svg") == 14, html.count("<svg")
# downstream tasks: one bar chart (a bar per run, chance a tick) and one table, a row per task
# with acc next to chance (3 choices: 0.333)
m = re.search(r'<table class="tasks">(.*?)</table>', html, re.S)
assert m and m.group(1).count("<th>pick</th>") == 1 and "<td>0.333</td>" in m.group(1), "tasks table"
assert len(re.findall(r'<rect data-series="run-[ab]:task/pick/acc"', html)) == 2, "task bars"
assert html.count('<line class="ref"') == 1, "chance tick"
assert "data-series=\"run-a:task/pick/len_norm" not in html, "task charts"
# the alarms panel: both alarms per run, what they compare, quiet (B's appended record is counted)
m = re.search(r'<table class="alarmpanel">(.*?)</table>', html, re.S)
assert m and m.group(1).count('data-alarm="memorization"') == 2 and m.group(1).count('data-alarm="repeat"') == 2
assert m.group(1).count('class="quiet">quiet') == 4 and "the trainer recorded 1" in m.group(1), "alarm panel"
assert "held-out CE of <b>c4</b>" in m.group(1), "the watched set"
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
chromium_or_skip "test_report rendering"
shot "$T/report.html" 1200 2000 "$T/shot.png"
# The colors of the two runs' series (#1f77b4, #d62728) and enough distinct colors overall
# (tests/png_layout.py decodes the PNG).
$PY tests/png_layout.py "$T/shot.png" >"$T/shot.json"
$PY - "$T/shot.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
blue, red = s["palette"]["#1f77b4"], s["palette"]["#d62728"]
print(f"screenshot: {s['width']}x{s['height']}, {s['distinct']} distinct colors, run A pixels {blue}, run B pixels {red}")
assert s["distinct"] > 20, "blank page"
assert blue > 200 and red > 200, "series colors not rendered"
PY
echo "test_report: ok"
