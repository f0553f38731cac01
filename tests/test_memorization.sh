#!/usr/bin/env bash
# test_memorization.sh: the data-loader bug that only held-out evaluation caught
# (docs/olmo3.md s.7), reproduced on the default corpus. The same recipe trains twice: clean,
# and with loader.debug_double_shard=true (the index stream sharded twice, so the run
# revisits half of the data). The buggy run must report LOWER training loss but NOT lower
# held-out loss, and the memorization alarm must fire for it alone; the loader's own
# accounting must flag it from the first step. About 2 x 60 s of training on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
PY=${PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
bash scripts/prepare_default_corpus.sh "$TMP/brown" >/dev/null 2>&1
tok=$TMP/brown/tokens
cat $(ls $tok/*.heldout.npy | grep -v science_fiction | sort) > $tok/heldout_indomain.npy
cat > "$TMP/r.yml" <<YML
model: {preset: olmo3-20m}
train: {seq_len: 128, global_batch: 16, micro_batch: 16, max_steps: 40, log_every: 10}
optim: {lr: 3e-3}
schedule: {name: constant, warmup_steps: 5}
data:
  sources: [$tok/editorial.npy, $tok/reviews.npy]
eval:
  sets: [heldout=$tok/heldout_indomain.npy]
  interval: 5
  max_docs: 24
ckpt: {interval: 0}
YML
"$OLMO" train "$TMP/r.yml" train.run_dir="$TMP/clean" > "$TMP/clean.log" 2>&1
"$OLMO" train "$TMP/r.yml" train.run_dir="$TMP/bug" loader.debug_double_shard=true > "$TMP/bug.log" 2>&1
$PY - "$TMP/clean" "$TMP/bug" <<'PY'
import json, sys
def load(run):
    recs = [json.loads(l) for l in open(run + '/metrics.jsonl')]
    tr = [r for r in recs if r.get('kind') == 'train']
    ev = [r for r in recs if r.get('kind') == 'eval']
    return (sum(r['loss'] for r in tr[-5:]) / 5, ev[-1]['eval/heldout/ce'],
            sum(r.get('kind') == 'alarm' and r.get('alarm') == 'memorization' for r in recs),
            tr[0].get('loader_alarms', 0))
c, b = load(sys.argv[1]), load(sys.argv[2])
print(f'clean: train loss {c[0]:.3f}  held-out CE {c[1]:.3f}  memorization alarms {c[2]}  loader alarms at step 1 {c[3]}')
print(f'bug:   train loss {b[0]:.3f}  held-out CE {b[1]:.3f}  memorization alarms {b[2]}  loader alarms at step 1 {b[3]}')
assert b[0] < c[0], 'the buggy run should look better on training loss'
assert b[1] >= c[1], 'the buggy run should not be better on held-out loss'
assert b[2] >= 1, 'the memorization alarm did not fire for the buggy run'
assert c[2] == 0, 'the memorization alarm fired for the clean run'
assert b[3] >= 1 and c[3] == 0, 'the loader accounting should flag the bug at step 1, and only the bug'
print('memorization: caught by held-out evaluation and by the loader, clean run quiet')
PY
