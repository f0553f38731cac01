#!/usr/bin/env bash
# test_parity.sh: the C model and trainer step against the independent PyTorch reference
# (tests/ref, float64): logits, and for each of 5 AdamW steps with warmup, clipping and
# weight decay, from the C state before the step: loss parts, grad norm, lr, every
# gradient, and the parameters and Adam moments after it, on the tiny config (GQA, window
# 8 < T 32, 3:1 sliding/full, z-loss on, masked labels, gradient accumulation).
# Tolerances: tests/ref/README.md (1e-5 relative-to-max per tensor, plus the step's
# first-order AdamW band on parameters and moments). A failing case prints every failing
# row (name, error, tolerance, error / allowance). The long-context case adds YaRN
# on the full layers (factor 4, original context 16 < T 32, a partial ramp) and the
# document mask (EOS 7, documents of ~8 tokens).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${OLMO_BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() {   # check DUMPDIR: the last two lines on success, the whole table on failure
  local out rc=0
  out=$(/usr/bin/python3 tests/ref/check_parity.py "$1") || rc=$?
  if [ $rc = 0 ]; then tail -2 <<<"$out"; else echo "$out"; fi
  return $rc
}
run() {
  local name=$1; shift
  "$BUILD/tests/tool_parity_dump" "$tmp/$name" "$@" >/dev/null
  echo "== $name: $*"
  check "$tmp/$name"
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
# A perturbed result must fail: the checker is not vacuous. The last step's parameters are
# moved in both files that hold them (final and steps), so the numeric check, not the
# files' consistency check, has to catch it.
"$BUILD/tests/tool_parity_dump" "$tmp/bad" >/dev/null
/usr/bin/python3 - "$tmp/bad" <<'PY'
import json, sys; sys.path.insert(0, "tests/ref")
from safetensors_io import read, write
d = sys.argv[1]
S = json.load(open(d + "/config.json"))["steps"]
for f, k in (("final", "model.layers.0.mlp.up_proj.weight"), ("steps", f"step{S}.param.model.layers.0.mlp.up_proj.weight")):
    t = read(f"{d}/{f}.safetensors")
    t[k] = t[k].copy(); t[k].flat[0] += 1e-3 * abs(t[k]).max()
    write(f"{d}/{f}.safetensors", t)
PY
if /usr/bin/python3 tests/ref/check_parity.py "$tmp/bad" >/dev/null; then echo "perturbed dump passed: checker is broken"; exit 1; fi
echo "perturbed dump fails as it must"
# The reference's own fp32 run passes; runs of a wrong optimizer or schedule (a dump
# written with the setting changed, then described with the right config.json) fail.
/usr/bin/python3 tests/ref/olmo_ref.py --write-dump "$tmp/ref32" >/dev/null
echo "== reference fp32 dump"; check "$tmp/ref32"
for set in beta2=0.99 lr=0.00101 max_grad_norm=4.2; do
  rm -rf "$tmp/mut"; /usr/bin/python3 tests/ref/olmo_ref.py --write-dump "$tmp/mut" --set "$set" >/dev/null
  cp "$tmp/ref32/config.json" "$tmp/mut/config.json"
  if /usr/bin/python3 tests/ref/check_parity.py "$tmp/mut" >/dev/null; then echo "dump with $set passed: checker is blind to it"; exit 1; fi
  echo "dump with $set fails as it must"
done
