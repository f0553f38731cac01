#!/usr/bin/env bash
# test_limits.sh: resource limits on untrusted input. Each hostile input is refused with a
# clear message and exit 2 *before* anything large is allocated: every command runs under an
# address-space limit (prlimit --as, 3 GiB) far below what the input claims, so an attempt
# to allocate would fail (exit 1, "out of memory") or be OOM-killed instead of exit 2.
#  1. safetensors: a header claiming a 10^12-element tensor in a 16-byte data section; a
#     header length of 2^60.
#  2. recipes: 10^13 parameters; an absurd micro-batch x seq_len; the 7B preset is still
#     described by `olmo info` (the size limit is 2^38 parameters, not this machine's RAM).
#  3. tokenizer.json: an id of 10^9; a sparse id 99999999 in a 300-entry vocab (would need
#     ~1.4 GB of tables); a merge whose result is not in the vocab; a merge with garbage.
#  4. model_check_memory (src/model/limits.c) against this machine's memory / OLMO_MEM_LIMIT.
set -euo pipefail
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-$PWD/build/olmo}
PY=${PYTHON:-/usr/bin/python3}
BUILD=$(dirname "$OLMO")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
LIM="prlimit --as=3221225472 --"
# refuse NAME PATTERN CMD...: CMD exits 2 with PATTERN in stderr, under the memory limit.
refuse() {
  local name=$1 pat=$2; shift 2
  set +e; $LIM "$@" >"$T/$name.out" 2>"$T/$name.err"; local rc=$?; set -e
  [ $rc = 2 ] || fail "$name: exit $rc, expected 2: $(tail -3 "$T/$name.err")"
  grep -q -- "$pat" "$T/$name.err" || fail "$name: message lacks '$pat': $(cat "$T/$name.err")"
  echo "ok: $name: $(head -c 200 "$T/$name.err" | head -1)"
}

# 1. safetensors
$PY - "$T" <<'PY'
import json, struct, sys
d = sys.argv[1]
h = json.dumps({"__metadata__": {"format": "pt"},
                "model.embed_tokens.weight": {"dtype": "F32", "shape": [1000000, 1000000],
                                              "data_offsets": [0, 4000000000000]}}).encode()
h += b' ' * ((8 - len(h) % 8) % 8)
open(f'{d}/huge.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + b'\0' * 16)
open(f'{d}/hlen.safetensors', 'wb').write(struct.pack('<Q', 1 << 60) + b'{}')
h = json.dumps({"w": {"dtype": "F32", "shape": [2**40, 2**40, 2**40], "data_offsets": [0, 16]}}).encode()
open(f'{d}/numel.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + b'\0' * 16)
PY
refuse st-huge-tensor "data ends at byte 4000000000000 but the file has 16 data bytes" "$OLMO" generate "$T/huge.safetensors" --tokens 1,2
refuse st-header-len "its first 8 bytes give 1152921504606846976, the file has 10 bytes" "$OLMO" generate "$T/hlen.safetensors" --tokens 1,2
refuse st-numel-overflow "bad shape or data_offsets" "$OLMO" generate "$T/numel.safetensors" --tokens 1,2

# 2. recipes
printf '\0\0\0\0' > "$T/tok.npy"
cat > "$T/big.yml" <<YML
model: {d_model: 65536, n_layers: 200, n_heads: 512, n_kv_heads: 512, mlp_hidden: 262144, vocab_size: 100278}
train: {seq_len: 4096, global_batch: 8, micro_batch: 1, max_steps: 1, run_dir: $T/run}
data: {paths: [$T/tok.npy]}
eval: {off: true}
YML
refuse recipe-1e13-params "parameters; at most" "$OLMO" train "$T/big.yml"
[ ! -e "$T/run" ] || fail "recipe-1e13-params: the run dir was created"
refuse recipe-activations "activations of one micro-batch" "$OLMO" train "$T/big.yml" model.preset=olmo3-tiny \
  model.d_model=64 model.n_layers=2 model.n_heads=4 model.n_kv_heads=2 model.mlp_hidden=128 model.vocab_size=1000 \
  train.micro_batch=65536 train.global_batch=65536 train.seq_len=1048576
$LIM "$OLMO" info olmo3-7b > "$T/info.out" 2>&1 || fail "olmo info olmo3-7b refused: $(tail -2 "$T/info.out")"
echo "ok: olmo info olmo3-7b still works"
# key=value on a preset reshapes the plan (they were once ignored): 8 of the 7B's 32 layers keep
# its embedding and LM head (2 x 100352 x 4096) and the final norm (4096), and 8 blocks of
# 4 x 4096^2 (attention) + 3 x 4096 x 11008 (SwiGLU) + 4 x 4096 (q, k and the two block norms).
"$OLMO" info olmo3-7b model.n_layers=8 train.seq_len=4096 > "$T/info8.out" 2>&1 || fail "olmo info olmo3-7b key=value: $(tail -2 "$T/info8.out")"
want=$(( 2 * 100352 * 4096 + 4096 + 8 * (4 * 4096 * 4096 + 3 * 4096 * 11008 + 4 * 4096) ))
grep -q "^parameters: $want total" "$T/info8.out" || fail "info olmo3-7b model.n_layers=8: want $want parameters: $(grep ^parameters "$T/info8.out")"
grep -q "T = 4096 tokens" "$T/info8.out" || fail "info olmo3-7b train.seq_len=4096: the memory table is not at T = 4096"
grep -q "^parameters: 7298617344 total" "$T/info.out" || fail "olmo info olmo3-7b: $(grep ^parameters "$T/info.out")"
refuse info-preset-bad-key "unknown key 'bogus.key'" "$OLMO" info olmo3-7b bogus.key=1
echo "ok: olmo info olmo3-7b key=value: the overrides reshape the plan"

# 3. tokenizer.json
$PY - "$T" <<'PY'
import json, sys
d = sys.argv[1]
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs = bs[:]; n = 0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + n); n += 1
m = dict(zip(bs, map(chr, cs)))
vocab = {m[b]: b for b in range(256)}
vocab['th'] = 256
base = {'added_tokens': [{'id': 257, 'content': '<|endoftext|>'}],
        'pre_tokenizer': {'type': 'Split', 'pattern': {'Regex': '\\s+|\\S+'}, 'behavior': 'Isolated', 'invert': False},
        'model': {'type': 'BPE', 'vocab': vocab, 'merges': ['t h']}}
def w(name, f):
    t = json.loads(json.dumps(base)); f(t); json.dump(t, open(f'{d}/{name}.json', 'w'))
w('ok', lambda t: None)
w('id1e9', lambda t: t['model']['vocab'].update({'zz': 1000000000}))
w('sparse', lambda t: t['added_tokens'].append({'id': 99999999, 'content': '<|pad|>'}))
w('merge_oov', lambda t: t['model']['merges'].append('h t'))
w('merge_bad', lambda t: t['model']['merges'].append(['t']))
PY
echo "the" | $LIM "$OLMO" tokenize --tokenizer "$T/ok.json" >/dev/null || fail "the small valid tokenizer is refused"
refuse tok-id-1e9 "id must be a non-negative integer" "$OLMO" tokenize --tokenizer "$T/id1e9.json"
refuse tok-sparse-ids "ids must be (nearly) dense" "$OLMO" tokenize --tokenizer "$T/sparse.json"
refuse tok-merge-oov "is not in model.vocab" "$OLMO" tokenize --tokenizer "$T/merge_oov.json"
refuse tok-merge-bad "is not \"left right\" or \[left, right\]" "$OLMO" tokenize --tokenizer "$T/merge_bad.json"

# 4. model_check_memory: a small program against the library
if [ -f "$BUILD/libolmo.a" ]; then
  cat > "$T/mem.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "model/limits.h"
int main(void) {
    char err[512];
    const ModelPreset *p7 = model_preset_find("olmo3-7b"), *pt = model_preset_find("olmo3-tiny");
    ModelConfig c7 = p7->cfg, ct = pt->cfg;
    model_config_derive(&c7); model_config_derive(&ct);
    if (model_check_size(&c7, 1, 8192, err, sizeof err)) { printf("7B size refused: %s\n", err); return 1; }
    setenv("OLMO_MEM_LIMIT", "1e9", 1);
    if (!model_check_memory(&c7, 1, 8192, PRECISION_FP32, err, sizeof err)) { printf("7B fits in 1 GB?\n"); return 1; }
    printf("%s\n", err);
    if (model_check_memory(&ct, 2, 32, PRECISION_FP32, err, sizeof err)) { printf("tiny refused: %s\n", err); return 1; }
    unsetenv("OLMO_MEM_LIMIT");
    if (model_check_memory(&ct, 2, 32, PRECISION_FP32, err, sizeof err)) { printf("tiny refused (RAM): %s\n", err); return 1; }
    double b = model_train_bytes(&c7, 1, 8192, PRECISION_FP32);
    if (b < 16 * 7.0e9) { printf("7B estimate %.3g too low\n", b); return 1; }
    return 0;
}
C
  LIBS="-lopenblas -lpcre2-8 -lcjson -lyaml -lzstd -lz -lcrypto -lm -lpthread"
  MPIL=$(pkg-config --libs ompi-c 2>/dev/null || echo "-L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi")
  cc -std=c11 -D_GNU_SOURCE -fopenmp -Isrc -o "$T/mem" "$T/mem.c" "$BUILD/libolmo.a" $LIBS $MPIL 2>"$T/cc.err" ||
    cc -std=c11 -D_GNU_SOURCE -fopenmp -Isrc -o "$T/mem" "$T/mem.c" "$BUILD/libolmo.a" $LIBS || fail "build mem.c"
  "$T/mem" > "$T/mem.out" || fail "model_check_memory: $(cat "$T/mem.out")"
  grep -q "refusing before allocating" "$T/mem.out" || fail "model_check_memory message: $(cat "$T/mem.out")"
  echo "ok: model_check_memory: $(head -1 "$T/mem.out" | cut -c1-160)"
fi
echo "test_limits: ok"
