#!/usr/bin/env bash
# test_load_memory.sh: the commands that load a model (eval, generate, import-hf, export-hf)
# check their memory before allocating, files are recognised by their bytes, and `olmo
# info CKPT` describes a checkpoint (issue 50; docs/hf.md "Memory", docs/eval.md), on a tiny
# trained run exported to an HF directory:
#  (a) `olmo info HFDIR|RUN|CKPT`: parameters and the memory of eval, generate,
#      import/export and training against this machine; the import/export row is the
#      largest tensor in fp32 (they stream tensor by tensor);
#  (b) with OLMO_MEM_LIMIT below what a command needs: exit 2, a message naming the figure,
#      the machine's memory and the alternatives, nothing written (eval --details, generate
#      --dump-logits, import-hf/export-hf OUT); at exactly the need eval, import-hf and
#      export-hf run (the figure is what they allocate, not a guess far above it);
#  (c) eval on an HF directory with max_position_embeddings 65,536 uses train.seq_len
#      EVAL_DEFAULT_SEQ_LEN (8192), says so, sizes its activations for the longest document
#      and scores the same as with the exported length;
#  (d) a GGUF file, one safetensors shard of an HF directory, a NumPy .npy: each named for
#      what it is and what to do instead, exit 2;
#  (e) import-hf and export-hf stream tensor by tensor: on a 150 MB (fp32) model their peak
#      resident memory is under olmo info's + 3 x the largest tensor, and export(import(x))
#      is x's BF16 values exactly.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
R=$TMP/run HF=$TMP/hf
train $R train.max_steps=4 || fail "train: $(tail -5 $R.log)"
"$OLMO" export-hf $R $HF 2>$TMP/exp.log || fail "export-hf: $(cat $TMP/exp.log)"
# bad LABEL PATTERN CMD...: CMD exits 2 with PATTERN (fixed string) in its stderr
bad() {
  local label=$1 pat=$2; shift 2
  "$@" >$TMP/out 2>$TMP/err; local rc=$?
  [ $rc = 2 ] || fail "$label: exit $rc, want 2: $(cat $TMP/err)"
  grep -qF -- "$pat" $TMP/err || fail "$label: no '$pat' in: $(cat $TMP/err)"
}
set +e

# (a) info on an HF directory, a run and a checkpoint
for src in $HF $R $R/checkpoints/step-00000004; do
  "$OLMO" info $src >$TMP/info 2>&1 || fail "info $src: $(cat $TMP/info)"
  grep -q "^parameters: 279488 total" $TMP/info || fail "info $src: parameters: $(cat $TMP/info)"
  for row in "eval, fp32 weights" "generate, fp32 weights" "eval, bf16 weights" "generate, bf16 weights" "import-hf / export-hf" \
             "train fp32" "train bf16"; do
    grep -q "^  $row.* bytes  fits$" $TMP/info || fail "info $src: no '$row ... fits' row: $(cat $TMP/info)"
  done
done
grep -q "eval, fp32 weights .*fits" $TMP/info && grep -q "import-hf / export-hf (largest tensor, fp32) .* $((1024 * 64 * 4)) bytes" $TMP/info \
  || fail "info: import/export is not the largest tensor (the embedding): $(cat $TMP/info)"
OLMO_MEM_LIMIT=1000 "$OLMO" info $HF >$TMP/info 2>&1 || fail "info with a limit: $(cat $TMP/info)"
[ "$(grep -c "does not fit (refused with exit 2)" $TMP/info)" = 7 ] || fail "info: OLMO_MEM_LIMIT rows: $(cat $TMP/info)"
echo "info: HF directory, run and checkpoint described; OLMO_MEM_LIMIT marks every row"

# (b) refusals below the need, nothing written
$PY - $TMP/set.npy <<'PY'
import struct, sys
ids = [1, 2, 3, 4, 5, 999] * 3 + [7, 8, 999] + list(range(10, 30)) + [999]
open(sys.argv[1], 'wb').write(struct.pack('<%dI' % len(ids), *ids))
PY
EV=(eval $HF --set s=$TMP/set.npy eval.eos_id=999)
"$OLMO" "${EV[@]}" >$TMP/ev0 2>$TMP/ev0.err || fail "eval: $(cat $TMP/ev0.err)"
need=$(sed -n 's/^eval: memory [^,]*, \([0-9]*\) bytes.*/\1/p' $TMP/ev0.err)
[ -n "$need" ] || fail "eval: no memory line: $(cat $TMP/ev0.err)"
OLMO_MEM_LIMIT=$((need - 1)) bad "eval below its need" "eval needs about" "$OLMO" "${EV[@]}" --details $TMP/det.jsonl
for p in "($need bytes:" "fp32 weights" "available ($((need - 1)) bytes, OLMO_MEM_LIMIT)" "refusing before allocating" \
         "A shorter train.seq_len=N" "olmo export-gguf"; do
  grep -qF -- "$p" $TMP/err || fail "eval refusal: no '$p' in: $(cat $TMP/err)"
done
[ ! -e $TMP/det.jsonl ] || fail "eval refused but wrote --details"
OLMO_MEM_LIMIT=$need "$OLMO" "${EV[@]}" >$TMP/ev1 2>$TMP/ev1.err || fail "eval at exactly its need: $(cat $TMP/ev1.err)"
cmp -s $TMP/ev0 $TMP/ev1 || fail "eval at its need differs"
OLMO_MEM_LIMIT=1000 bad "generate" "generate needs about" "$OLMO" generate $HF --tokens 1,2,3 --max-new 4 --dump-logits $TMP/l.st
grep -qF "KV cache" $TMP/err && grep -qF "The fp32 weights alone exceed this machine's memory: run the model with llama.cpp" $TMP/err \
  || fail "generate refusal: no KV cache or no llama.cpp advice in: $(cat $TMP/err)"
[ ! -e $TMP/l.st ] || fail "generate refused but wrote --dump-logits"
# import/export stream: one fp32 buffer of the largest tensor (the 1024 x 64 embedding: 262144 bytes)
OLMO_MEM_LIMIT=262143 bad "import-hf" "import-hf needs about 256.0 KiB (262144 bytes: one fp32 buffer of the largest tensor" "$OLMO" import-hf $HF $TMP/imp
[ ! -e $TMP/imp ] || fail "import-hf refused but created its output"
OLMO_MEM_LIMIT=262143 bad "export-hf" "export-hf needs about 256.0 KiB" "$OLMO" export-hf $R $TMP/exp
[ ! -e $TMP/exp ] || fail "export-hf refused but created its output"
OLMO_MEM_LIMIT=262144 "$OLMO" import-hf $HF $TMP/imp 2>$TMP/err || fail "import-hf at its need: $(cat $TMP/err)"
OLMO_MEM_LIMIT=262144 "$OLMO" export-hf $R $TMP/exp 2>$TMP/err || fail "export-hf at its need: $(cat $TMP/err)"
cmp -s $TMP/exp/model.safetensors $HF/model.safetensors || fail "export-hf at its need: another model.safetensors"
rm -rf $TMP/imp $TMP/exp
echo "refusals: eval, import-hf, export-hf (at need - 1 refused, at need run), generate: exit 2, nothing written"

# (c) max_position_embeddings 65,536: train.seq_len 8192, activations for the longest document
mkdir -p $TMP/long && cp $HF/* $TMP/long/
$PY - $TMP/long/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c['max_position_embeddings'] = 65536; json.dump(c, open(sys.argv[1], 'w'))
PY
"$OLMO" eval $TMP/long --set s=$TMP/set.npy eval.eos_id=999 >$TMP/ev2 2>$TMP/ev2.err || fail "eval long: $(cat $TMP/ev2.err)"
grep -qF "train.seq_len 8192 (the default for a checkpoint without a recipe" $TMP/ev2.err || fail "eval long: cap not said: $(cat $TMP/ev2.err)"
grep -qF "activations for 1 x 20 tokens, the longest row" $TMP/ev2.err || fail "eval long: activations not sized to the documents: $(cat $TMP/ev2.err)"
cmp -s $TMP/ev0 $TMP/ev2 || fail "eval long scores differ: $(cat $TMP/ev0 $TMP/ev2)"
echo "eval on max_position_embeddings 65536: train.seq_len 8192 (said), activations for 20 tokens, same scores"

# (d) files recognised by their bytes
printf 'GGUF\003\000\000\000' >$TMP/m.gguf; head -c 200 /dev/zero >>$TMP/m.gguf
for cmd in "eval $TMP/m.gguf --set s=$TMP/set.npy" "generate $TMP/m.gguf --tokens 1" "info $TMP/m.gguf" "import-hf $TMP/m.gguf $TMP/o" "export-hf $TMP/m.gguf $TMP/o"; do
  bad "${cmd%% *} on GGUF" "is a GGUF file (llama.cpp's format, version 3)" "$OLMO" $cmd
  grep -qF "llama.cpp" $TMP/err || fail "GGUF: no llama.cpp advice"
done
$PY tests/ref/hf_shards.py $HF $TMP/shard || fail "make shards"
S1=$TMP/shard/model-00001-of-00002.safetensors
for cmd in "generate $S1 --tokens 1" "eval $S1 --set s=$TMP/set.npy" "export-hf $S1 $TMP/o" "info $S1"; do
  bad "${cmd%% *} on a shard" "is a safetensors file of the Hugging Face directory $TMP/shard (config.json and model.safetensors.index.json beside it, one of the 2 shards its index lists)" "$OLMO" $cmd
  grep -qF "pass the directory: $TMP/shard" $TMP/err || fail "shard: no 'pass the directory'"
done
bad "import-hf on a shard" "pass the directory holding it ($TMP/shard)" "$OLMO" import-hf $S1 $TMP/o
"$OLMO" generate $TMP/shard --tokens 1,2 --max-new 2 >/dev/null 2>$TMP/err || fail "generate on the shard directory: $(cat $TMP/err)"
printf '\223NUMPY\001\000' >$TMP/a.npy; head -c 120 /dev/zero >>$TMP/a.npy
bad "eval on .npy" "is a NumPy .npy array" "$OLMO" eval $TMP/a.npy --set s=$TMP/set.npy
bad "generate on a token file" "it looks like a token file" "$OLMO" generate $TMP/set.npy --tokens 1
[ ! -e $TMP/o ] || fail "a refused command created its output"
echo "files: GGUF, a shard of an HF directory, .npy, a token file: named, exit 2"
# (e) import-hf / export-hf stream: peak resident memory about two tensors, not the model.
# An HF directory of 8 layers (d 512, mlp 2048, vocab 8192): 37.5M parameters, 75 MB of
# BF16 shards, 150 MB in fp32; its largest tensor (the embedding) 16 MiB in fp32.
$PY - $TMP/mid <<'PY' || fail "make the 150 MB model"
import json, os, sys; sys.path.insert(0, 'tests/ref')
import numpy as np, hf_random, safetensors_io as st
out = sys.argv[1]; os.makedirs(out)
L, C, H, KV, D, M, V = 8, 512, 8, 4, 64, 2048, 8192
json.dump(dict(architectures=['Olmo3ForCausalLM'], model_type='olmo3', vocab_size=V, hidden_size=C, intermediate_size=M,
               num_hidden_layers=L, num_attention_heads=H, num_key_value_heads=KV, head_dim=D, rope_theta=500000,
               rms_norm_eps=1e-6, sliding_window=4096, max_position_embeddings=4096, tie_word_embeddings=False,
               layer_types=(['sliding_attention'] * 3 + ['full_attention']) * (L // 4)), open(f'{out}/config.json', 'w'))
rng = np.random.default_rng(0)
r = lambda *s: rng.standard_normal(s, dtype=np.float32) * 0.02
parts = hf_random.olmo3_parts(L, C, H, KV, D, M, V, r, lambda k: np.ones(k, np.float32))
wm = {}
for i, d in enumerate(parts):
    f = f'model-0000{i + 1}-of-00002.safetensors'
    st.write(f'{out}/{f}', d, dtypes={n: 'BF16' for n in d}); wm.update({n: f for n in d})
json.dump({'metadata': {}, 'weight_map': wm}, open(f'{out}/model.safetensors.index.json', 'w'))
PY
rss() { /usr/bin/time -f %M -o $TMP/rss "$@" 2>$TMP/err >/dev/null || fail "$*: $(cat $TMP/err)"; cat $TMP/rss; }
base=$(rss "$OLMO" info $TMP/mid)
imp=$(rss "$OLMO" import-hf $TMP/mid $TMP/mid-imp)
exp=$(rss "$OLMO" export-hf $TMP/mid-imp $TMP/mid-exp)
tensor=$((8192 * 512 * 4 / 1024))   # KiB
for x in "import-hf:$imp" "export-hf:$exp"; do
  [ "${x#*:}" -lt $((base + 3 * tensor)) ] || fail "${x%%:*}: peak RSS ${x#*:} KiB, over $base KiB (olmo info) + 3 x the largest tensor ($tensor KiB)"
done
$PY - $TMP/mid $TMP/mid-exp <<'PY' || fail "export(import(mid)) differs from mid"
import sys; sys.path.insert(0, 'tests/ref')
import numpy as np, safetensors_io as st, json
a, b = sys.argv[1:3]
x = {}
for f in set(json.load(open(f'{a}/model.safetensors.index.json'))['weight_map'].values()): x.update(st.read(f'{a}/{f}'))
y = st.read(f'{b}/model.safetensors')
assert set(x) == set(y) and all(np.array_equal(x[n], y[n]) for n in x)
PY
echo "streaming: import-hf ${imp} KiB, export-hf ${exp} KiB peak RSS (olmo info ${base} KiB; largest tensor ${tensor} KiB; model 150 MB in fp32); export(import) = the BF16 source"
echo "test_load_memory: all checks passed"
