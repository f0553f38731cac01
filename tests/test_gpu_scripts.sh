#!/usr/bin/env bash
# test_gpu_scripts.sh: the GPU session's scripts, what of them runs without a GPU or
# transformers (Debian's /usr/bin/python3, torch 1.13): hf_rope_compat's reading and writing
# of RoPE in transformers 4.x and both 5.x config layouts (synthetic configs), the PyTorch
# bench's OOM retry freeing the failed attempt (a stand-in OOM), the cost model's range
# from docs/gpu_cost_model.txt, and that gpu-check.sh and the other scripts parse. (The
# chroot run of gpu-check.sh, scripts/gpu_check_isolated.sh, needs root and a rootfs;
# gpu_hf_compare.py --selftest needs build/tests/test_cuda: docs/cuda.md "The GPU session".)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
$PY scripts/hf_rope_compat.py --selftest | tail -1
$PY scripts/gpu_bench_torch.py --selftest
out=$($PY scripts/gpu_cost_range.py docs/gpu_cost_model.txt)
[ "$(grep -c '^  RANGE attn_' <<<"$out")" = 6 ] && grep -q '^RANGE step_7b GEMMs at 70%' <<<"$out" ||
  { echo "$out"; echo "FAIL: gpu_cost_range.py gave no attention rows or step line"; exit 1; }
grep '^RANGE step_7b GEMMs at 70%' <<<"$out"
for s in scripts/gpu-check.sh scripts/gpu_check_isolated.sh; do bash -n "$s"; done
$PY -m py_compile scripts/gpu_hf_compare.py scripts/gpu_attn_sdpa.py scripts/gpu_bench_torch.py scripts/hf_rope_compat.py scripts/gpu_cost_range.py
echo "test_gpu_scripts.sh: all passed"
