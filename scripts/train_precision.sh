#!/usr/bin/env bash
# train_precision.sh OLMO_BINARY: prints the training precision the main job uses on this
# CPU and why, as "PRECISION REASON": bf16 where the CPU has a native bf16 engine (amx;
# avx512bf16, the default only where it beats fp32: AMD Zen 4 and later), fp32 elsewhere
# (the emulated engine is slower than fp32: docs/performance.md, "bf16"). OLMO_PRECISION=
# fp32|bf16 overrides; another value is exit 2. OLMO_BF16_ENGINE / OLMO_NO_AMX are the
# binary's own engine switches, honoured through `olmo info`.
set -euo pipefail
olmo=$1
case "${OLMO_PRECISION:-}" in
  fp32|bf16) echo "$OLMO_PRECISION OLMO_PRECISION=$OLMO_PRECISION"; exit 0 ;;
  "") ;;
  *) echo "train_precision.sh: OLMO_PRECISION must be fp32 or bf16, not '$OLMO_PRECISION'" >&2; exit 2 ;;
esac
info=$("$olmo" info olmo3-tiny)
engine=$(sed -n 's/^  bf16 \([a-z0-9]*\) (default here).*/\1/p' <<<"$info")
case "$engine" in
  amx|avx512bf16) echo "bf16 native bf16 engine: $engine" ;;
  emulated) echo "fp32 no native bf16 engine on this CPU (bf16 would be emulated, slower than fp32)" ;;
  *) echo "train_precision.sh: no '  bf16 ENGINE (default here)' line in '$olmo info olmo3-tiny'" >&2; exit 1 ;;
esac
