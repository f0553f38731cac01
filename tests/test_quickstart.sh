#!/usr/bin/env bash
# test_quickstart.sh: the README's "Train on your own data" commands, run as written (the
# lines between its quickstart markers) on a small synthetic corpus in an empty directory,
# with one change: the train line gets train.max_steps=4 eval.interval=2 ckpt.interval=2
# (the README's 640 steps take about three minutes). Checks what each command promises: the
# token files, held-out evaluation in the run, the attached record, a completion, the report.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMP_NUM_THREADS=2
cmds=$(sed -n '/^<!-- quickstart/,/^<!-- \/quickstart/p' README.md | grep '^build/olmo ' | sed 's/  *#.*$//')
[ "$(echo "$cmds" | wc -l)" = 5 ] || fail "README quickstart: want 5 commands, got: $cmds"
ln -s "$ROOT/build" "$ROOT/configs" "$ROOT/tokenizers" "$T/"
/usr/bin/python3 - "$T/my_docs.jsonl" <<'PY'
import json, random, sys
random.seed(4)
words = "the jury said that city county court election people report state case time year law".split()
with open(sys.argv[1], "w") as f:
    for d in range(400):
        f.write(json.dumps({"text": " ".join(random.choice(words) for _ in range(120)) + "."}) + "\n")
PY
cd "$T"
while read -r line; do
  [[ $line == "build/olmo train "* ]] && line="$line train.max_steps=4 eval.interval=2 ckpt.interval=2"
  echo "+ $line"
  eval "$line" >"$T/out" 2>"$T/err" || fail "$line: $(tail -5 "$T/err"; tail -5 "$T/out")"
  [[ $line == "build/olmo generate "* ]] && { [ -s "$T/out" ] || fail "generate wrote nothing"; echo "  completion: $(head -c 80 "$T/out")"; }
done <<<"$cmds"
[ -s data/mine/my_docs.npy ] && [ -s data/mine/my_docs.heldout.npy ] || fail "prepare outputs: $(ls data/mine)"
grep -q '"eval/mine/ce"' runs/mine/metrics.jsonl || fail "no in-loop held-out evaluation"
grep -q '"source":"olmo eval --attach"' runs/mine/evals.jsonl || fail "eval --attach: $(cat runs/mine/evals.jsonl)"
[ -s runs/mine/report.html ] && grep -q 'class="attached"' runs/mine/report.html || fail "report"
echo "test_quickstart: ok"
