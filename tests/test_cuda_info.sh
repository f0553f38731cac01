#!/usr/bin/env bash
# test_cuda_info.sh: `olmo info olmo3-7b --backend cuda --world W` (no GPU needed) prints
# the per-GPU memory of train.backend=cuda; every figure is checked here against hand
# arithmetic from the OLMo 3 7B shapes (d 4096, 32 layers, 32 heads of 128, MLP 11008,
# padded vocab 100352, T 8192, micro-batch 1), at W = 1 and W = 8 (NCCL ZeRO-1: fp32
# master and Adam sharded, bf16 weights and the fp32 gradient whole). The same arithmetic
# is what cuda_model_create compares its allocations with on a device.
set -euo pipefail
OLMO=${OLMO_BIN:-$PWD/build/olmo}
fail() { echo "FAIL: $*" >&2; exit 1; }

out1=$("$OLMO" info olmo3-7b --backend cuda --world 1)
out8=$("$OLMO" info olmo3-7b --backend cuda --world 8)
grep -q "d_model 4096, layers 32, heads 32 / kv heads 32, head_dim 128, mlp 11008, vocab 100278 (padded 100352)" <<<"$out1" \
  || fail "olmo3-7b shapes changed; update the hand arithmetic"
bytes() {   # bytes OUTPUT LABEL-PREFIX -> the byte count of that line
  local v
  v=$(grep -F -- "  $2" <<<"$1" | head -1 | awk '{print $(NF-1)}')
  [ -n "$v" ] || fail "no line '$2'"
  echo "$v"
}
check() {   # check OUTPUT LABEL EXPECTED
  local got
  got=$(bytes "$1" "$2")
  [ "$got" = "$3" ] || fail "'$2': printed $got, hand arithmetic $3"
  echo "ok $2 = $3"
}

# Hand arithmetic (awk doubles are exact below 2^53).
read -r P WEIGHTS GRAD MASTER1 ADAM1 S MASTER8 ADAM8 NORMS ACT ACTR SCRATCH < <(awk 'BEGIN {
  C = 4096; L = 32; NH = 32; D = 128; H = 11008; V = 100352; T = 8192; N = T;
  Q = NH * D; KV = NH * D; QKV = Q + 2 * KV;
  # parameters: embedding + LM head (V x C each), per layer Wqkv, Wo, Wgu (2H x C), Wdown,
  # q/k norms (Q, KV), two block norms (C); the final norm (C)
  layer = QKV * C + C * Q + 2 * H * C + C * H + Q + KV + 2 * C;
  P = 2 * V * C + L * layer + C;
  # W = 8 shards: 65536-float chunks spread evenly (dist_shard_bounds); the largest
  nc = int((P + 65535) / 65536); S = 0;
  for (r = 0; r < 8; r++) {
    lo = int(nc * r / 8) * 65536; hi = (r == 7) ? P : int(nc * (r + 1) / 8) * 65536;
    if (hi > P) hi = P;
    if (hi - lo > S) S = hi - lo;
  }
  norms = 4 * (L * (Q + KV + 2 * C) + C);
  # activations: the buffers of the graph (model/graph.c; graph_plan_bytes). Saved: residual
  # stream fp32 (L+1) x N x C; per layer (one slot with recompute) the bf16 block input,
  # h, qkv, q, k, v, attention out, o_proj out, gate|up, act, down_proj out; fp32
  # q/k/attn/mlp rstd and lse (NH per token); final-norm out (bf16) + rstd. Then the
  # backward scratch: dres + fp32 h; dxf, da, datt, dq, dk, dv, dqkv, dgu, dact, dm
  # (bf16); RoPE cos/sin; token ids and targets.
  per = 2 * N * (C + C + QKV + Q + KV + KV + Q + C + 2 * H + H + C) + 4 * N * (4 + NH);
  rest = 2 * N * C + 4 * N + 8 * N * C + 2 * N * (C + C + Q + Q + 2 * KV + QKV + 2 * H + H + C) + 4 * T * D + 8 * N;
  act = 4 * (L + 1) * N * C + L * per + rest;
  # recompute keeps the attention out (bf16) and lse of every layer beside the one slot
  actr = 4 * (L + 1) * N * C + per + rest + (L - 1) * (2 * N * Q + 4 * N * NH);
  # scratch: the op scratch of ops_cuda.cu (Di; LM-head chunk of 1024 rows, fp32 logits +
  # bf16 dlogits; row CE, z (double), token CE; positions grouped by token (3N+1 ints);
  # sum-of-squares chunks (double); gathered row indices; 264 x 4096 norm partials
  # (double); the dS tiles of the attention backward: 8 KiB a (query tile, key tile) pair of
  # 64-row tiles, causal, for as many heads (MHA: groups of 1) as 512 MiB holds) and the
  # 32 MiB cuBLASLt workspace
  nt = int((T + 63) / 64); dsu = (nt + nt * (nt - 1) / 2) * 8192; dsg = int(536870912 / dsu);
  if (dsg < 1) dsg = 1; if (dsg > NH) dsg = NH;
  scratch = 4 * N * NH + 1024 * V * 6 + 20 * N + 4 * (3 * N + 1) + 8 * nc + 4 * N + 8 * 264 * C + dsg * dsu + 32 * 1048576;
  printf "%.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f\n", P, 2 * P, 4 * P, 4 * P, 8 * P, S, 4 * S, 8 * S, norms, act, actr, scratch
}')
grep -q "parameters: $P total" <<<"$out1" || fail "parameter count: hand $P, printed $(grep parameters: <<<"$out1")"
echo "ok parameters = $P"
check "$out1" "bf16 weights (whole table" "$WEIGHTS"
check "$out1" "fp32 gradient (one buffer" "$GRAD"
check "$out1" "fp32 master weights (4 B" "$MASTER1"
check "$out1" "Adam m, v (8 B" "$ADAM1"
check "$out1" "fp32 norm weights" 0
check "$out1" "activations saved, no recompute" "$ACT"
check "$out1" "activations saved, recompute" "$ACTR"
check "$out1" "scratch" "$SCRATCH"
check "$out1" "total, no recompute" "$(awk -v a="$WEIGHTS" -v b="$GRAD" -v c="$MASTER1" -v d="$ADAM1" -v e="$ACT" -v f="$SCRATCH" 'BEGIN { printf "%.0f", a + b + c + d + e + f }')"
check "$out1" "total, recompute" "$(awk -v a="$WEIGHTS" -v b="$GRAD" -v c="$MASTER1" -v d="$ADAM1" -v e="$ACTR" -v f="$SCRATCH" 'BEGIN { printf "%.0f", a + b + c + d + e + f }')"
grep -q "optimizer shard: $S of $P parameters" <<<"$out8" || fail "W=8 shard: hand $S"
check "$out8" "bf16 weights (whole table" "$WEIGHTS"
check "$out8" "fp32 gradient (one buffer" "$GRAD"
check "$out8" "fp32 master weights (shard" "$MASTER8"
check "$out8" "Adam m, v (shard" "$ADAM8"
check "$out8" "fp32 norm weights" "$NORMS"
check "$out8" "total, recompute" "$(awk -v a="$WEIGHTS" -v b="$GRAD" -v c="$MASTER8" -v d="$ADAM8" -v n="$NORMS" -v e="$ACTR" -v f="$SCRATCH" 'BEGIN { printf "%.0f", a + b + c + d + n + e + f }')"
# Memory per GPU falls with W: only master and Adam shrink (the gradient stays whole: ZeRO-1).
t1=$(bytes "$out1" "total, recompute"); t8=$(bytes "$out8" "total, recompute")
awk -v a="$t1" -v b="$t8" 'BEGIN { exit !(b < a) }' || fail "W=8 total $t8 not below W=1 $t1"
"$OLMO" info olmo3-7b --backend tpu >/dev/null 2>&1 && fail "--backend tpu accepted"
echo "test_cuda_info.sh: all checks passed"
