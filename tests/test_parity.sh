#!/usr/bin/env bash
# test_parity.sh: the C model and trainer step against the independent PyTorch reference
# (tests/ref, float64): logits, loss parts, every gradient, and parameters after 5 AdamW
# steps with warmup, clipping and weight decay, on the tiny config (GQA, window 8 < T 32,
# 3:1 sliding/full, z-loss on, masked labels, gradient accumulation). Tolerances:
# tests/ref/README.md (1e-5 relative-to-max per tensor). The long-context case adds YaRN
# on the full layers (factor 4, original context 16 < T 32, a partial ramp) and the
# document mask (EOS 7, documents of ~8 tokens).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${OLMO_BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() {
  local name=$1; shift
  "$BUILD/tests/tool_parity_dump" "$tmp/$name" "$@" >/dev/null
  echo "== $name: $*"
  /usr/bin/python3 tests/ref/check_parity.py "$tmp/$name" | tail -2
}
run default
run zloss_micro1_linear z_loss=1e-2 micro_batch=1 schedule=linear
run constant_micro4 schedule=constant micro_batch=4 seed=7
run yarn_docmask rope_scaling=yarn rope_factor=4 rope_beta_slow=0.1 rope_original_context=16 document_mask=1 eos_id=7
# The long-context features must matter to the checker: the same dump described without
# the document mask, with another YaRN factor, or without YaRN fails.
for edit in "c['document_mask'] = False" "c['rope_scaling']['factor'] = 4.5" "del c['rope_scaling']"; do
  rm -rf "$tmp/lc_bad"; cp -r "$tmp/yarn_docmask" "$tmp/lc_bad"
  /usr/bin/python3 -c "import json, sys; p = sys.argv[1]; c = json.load(open(p)); $edit; json.dump(c, open(p, 'w'))" "$tmp/lc_bad/config.json"
  if /usr/bin/python3 tests/ref/check_parity.py "$tmp/lc_bad" >/dev/null; then echo "dump passed after: $edit"; exit 1; fi
  echo "long-context dump fails after: $edit"
done
# A perturbed result must fail: the checker is not vacuous.
"$BUILD/tests/tool_parity_dump" "$tmp/bad" >/dev/null
/usr/bin/python3 - "$tmp/bad" <<'PY'
import sys; sys.path.insert(0, "tests/ref")
from safetensors_io import read, write
d = sys.argv[1] + "/final.safetensors"
t = read(d)
k = "model.layers.0.mlp.up_proj.weight"
t[k] = t[k].copy(); t[k].flat[0] += 1e-3 * abs(t[k]).max()
write(d, t)
PY
if /usr/bin/python3 tests/ref/check_parity.py "$tmp/bad" >/dev/null; then echo "perturbed dump passed: checker is broken"; exit 1; fi
echo "perturbed dump fails as it must"
