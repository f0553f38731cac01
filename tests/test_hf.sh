#!/usr/bin/env bash
# test_hf.sh: `olmo export-hf` / `olmo import-hf` (docs/hf.md) on a tiny trained run
# (olmo3-tiny: vocab 1000 padded to 1024, GQA, window 8 < the 24-token test sequence):
#  (a) the PyTorch reference (tests/ref/olmo_ref.py, float64) run on the EXPORT by HF
#      names gives our logits (olmo generate --dump-logits, KV-cache path) on every position
#      within 1e-5 relative (max |diff| / max |logit| per position); also for generate run
#      on the HF directory itself and on the imported checkpoint;
#  (b) import(export(x)) == x bit for bit on every tensor, the padding rows included (export
#      keeps them; config.json vocab_size is the padded count); a checkpoint trimmed to the
#      real vocab (rows = vocab_size) imports with zero padding rows; the real vocab of a
#      padded checkpoint comes from the olmo_config metadata, else from tokenizer.json;
#      BF16 shards + index.json and tied embeddings import correctly;
#  (c) every bad input exits 2 with a message naming the problem.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
R=$TMP/run HF=$TMP/hf IMP=$TMP/imp
train $R || fail "train: $(tail -5 $R.log)"
"$OLMO" export-hf $R $HF 2>$TMP/exp.log || fail "export-hf: $(cat $TMP/exp.log)"
for f in config.json model.safetensors generation_config.json; do [ -s $HF/$f ] || fail "export: no $f"; done
"$OLMO" import-hf $HF $IMP 2>$TMP/imp.log || fail "import-hf: $(cat $TMP/imp.log)"
[ -s $IMP/model.safetensors ] && [ -s $IMP/recipe.yml ] || fail "import: missing outputs"

TOKS=$($PY -c 'import random; random.seed(3); print(",".join(str(random.randrange(1000)) for _ in range(24)))')
# dump_logits PREFIX name:SRC...: olmo generate's logits of TOKS (KV-cache path) for each
# source into $TMP/PREFIX-name.st
dump_logits() {
  local pre=$1; shift
  for src in "$@"; do
    "$OLMO" generate ${src#*:} --tokens $TOKS --max-new 0 --dump-logits $TMP/$pre-${src%%:*}.st 2>$TMP/gen.log >/dev/null \
      || fail "generate on ${src%%:*}: $(cat $TMP/gen.log)"
  done
}
dump_logits logits run:$R hf:$HF imp:$IMP ckpt:$R/checkpoints/step-00000010 file:$R/model.safetensors

# (a) reference parity + config.json content
$PY - $HF $TMP $TOKS <<'PY' || fail "reference parity"
import json, sys, os
import numpy as np, torch
sys.path.insert(0, 'tests/ref')
import olmo_ref, safetensors_io as st
hf, tmp, toks = sys.argv[1], sys.argv[2], [int(t) for t in sys.argv[3].split(',')]
c = json.load(open(f'{hf}/config.json'))
want = dict(model_type='olmo3', architectures=['Olmo3ForCausalLM'], vocab_size=1024, hidden_size=64,
            intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, rope_theta=500000, rms_norm_eps=1e-6, sliding_window=8, tie_word_embeddings=False,
            attention_bias=False, rope_scaling=None, max_position_embeddings=32, torch_dtype='float32',
            layer_types=['sliding_attention'] * 3 + ['full_attention'])
for k, v in want.items():
    assert c.get(k) == v, f'config.json {k}: {c.get(k)!r}, want {v!r}'
json.load(open(f'{hf}/generation_config.json'))
P = {k: torch.from_numpy(v).double() for k, v in st.read(f'{hf}/model.safetensors').items()}
assert P['model.embed_tokens.weight'].shape == (1024, 64) and P['lm_head.weight'].shape == (1024, 64)
cfg = olmo_ref.Config(n_heads=c['num_attention_heads'], n_kv_heads=c['num_key_value_heads'],
                      head_dim=c['head_dim'], rms_eps=c['rms_norm_eps'], rope_theta=c['rope_theta'],
                      n_layers=c['num_hidden_layers'], layer_types=c['layer_types'],
                      sliding_window=c['sliding_window'])
ref = olmo_ref.forward(P, cfg, torch.tensor([toks]))[0].numpy()[:, :1000]   # real vocab: generate's rows
for name in ('run', 'hf', 'imp', 'ckpt', 'file'):
    ours = st.read(f'{tmp}/logits-{name}.st')['logits'].astype(np.float64)
    assert ours.shape == ref.shape, (name, ours.shape)
    if name == 'ckpt':   # step 10, not the final model: must differ from the reference
        assert np.abs(ours - ref).max() > 1e-4, 'checkpoint step 10 gave the final logits'
        continue
    rel = (np.abs(ours - ref).max(axis=1) / np.abs(ref).max(axis=1)).max()
    print(f'{name}: max rel err vs float64 reference {rel:.3g} (tolerance 1e-5)')
    assert rel <= 1e-5, f'{name}: {rel}'
PY

# (b) round trip
$PY - $R/model.safetensors $IMP/model.safetensors <<'PY' || fail "round trip"
import sys, numpy as np
sys.path.insert(0, 'tests/ref')
import safetensors_io as st
x, y = st.read(sys.argv[1]), st.read(sys.argv[2])
assert sorted(x) == sorted(y), 'tensor sets differ'
for k in x:
    a, b = x[k], y[k]
    assert a.shape == b.shape, (k, a.shape, b.shape)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), k
assert x['lm_head.weight'][1000:].any(), 'the trained padding rows are not zero'
print('import(export(x)): bit-equal on every tensor, the trained padding rows included')
PY
# A checkpoint trimmed to the real vocab (as exports before this one, and HF models with
# vocab_size = tokens) imports with zero padding rows; a padded one without olmo_config
# metadata takes its real vocab from tokenizer.json (1000 tokens here, rows 1024).
$PY - $HF $TMP/trim $TMP/padtok <<'PY' || fail "make trimmed / tokenizer-vocab checkpoints"
import sys, os, json, shutil; sys.path.insert(0, 'tests/ref')
import safetensors_io as st
src, tr, pt = sys.argv[1:4]
x = st.read(f'{src}/model.safetensors')
for d in (tr, pt): os.makedirs(d)
c = json.load(open(f'{src}/config.json')); c['vocab_size'] = 1000
json.dump(c, open(f'{tr}/config.json', 'w'))
st.write(f'{tr}/model.safetensors', {k: (v[:1000] if k in ('model.embed_tokens.weight', 'lm_head.weight') else v) for k, v in x.items()})
shutil.copy(f'{src}/config.json', pt); st.write(f'{pt}/model.safetensors', x)   # no olmo_config metadata
tok = {'model': {'type': 'BPE', 'vocab': {f't{i}': i for i in range(995)}, 'merges': []},
       'added_tokens': [{'id': 995 + i, 'content': f'<|s{i}|>', 'special': True} for i in range(5)]}
json.dump(tok, open(f'{pt}/tokenizer.json', 'w'))
PY
"$OLMO" import-hf $TMP/trim $TMP/imptrim 2>/dev/null && "$OLMO" import-hf $TMP/padtok $TMP/imppadtok 2>/dev/null || fail "import trimmed / tokenizer-vocab"
grep -q "vocab_size: 1000" $TMP/imptrim/recipe.yml && grep -q "vocab_size: 1000" $TMP/imppadtok/recipe.yml || fail "real vocab not 1000 on import"
$PY - $R/model.safetensors $TMP/imptrim/model.safetensors $TMP/imppadtok/model.safetensors <<'PY' || fail "trimmed / tokenizer-vocab content"
import sys, numpy as np; sys.path.insert(0, 'tests/ref')
import safetensors_io as st
x, t, p = (st.read(a) for a in sys.argv[1:4])
for k in x:
    assert np.array_equal(x[k].view(np.uint32), p[k].view(np.uint32)), k
    n = 1000 if k in ('model.embed_tokens.weight', 'lm_head.weight') else len(x[k])
    assert np.array_equal(x[k][:n].view(np.uint32), t[k][:n].view(np.uint32)), k
    assert not t[k][n:].any(), f'{k}: trimmed import padding rows not zero'
print('trimmed checkpoint: zero padding rows; padded one: real vocab 1000 from tokenizer.json')
PY
# x with zero padding rows: the round trip is exact on the whole tensors.
Z=$TMP/zero IMPZ=$TMP/impz
mkdir -p $Z && cp $R/recipe.yml $Z/
$PY - $R/model.safetensors $Z/model.safetensors <<'PY' || fail "zero-pad model"
import sys; sys.path.insert(0, 'tests/ref')
import safetensors_io as st
x = st.read(sys.argv[1])
for k in ('model.embed_tokens.weight', 'lm_head.weight'): x[k][1000:] = 0
st.write(sys.argv[2], x)
PY
"$OLMO" export-hf $Z/model.safetensors $TMP/hfz 2>/dev/null && "$OLMO" import-hf $TMP/hfz $IMPZ 2>/dev/null || fail "zero round trip"
$PY - $Z/model.safetensors $IMPZ/model.safetensors <<'PY' || fail "zero-padded round trip not exact"
import sys, numpy as np; sys.path.insert(0, 'tests/ref')
import safetensors_io as st
x, y = st.read(sys.argv[1]), st.read(sys.argv[2])
assert sorted(x) == sorted(y)
for k in x: assert np.array_equal(x[k].view(np.uint32), y[k].view(np.uint32)), k
print('zero-padded x: import(export(x)) == x exactly')
PY
# export(import(export(x))) gives the same config.json and model tensors.
"$OLMO" export-hf $IMP $TMP/hf2 2>/dev/null || fail "re-export"
cmp $HF/config.json $TMP/hf2/config.json || fail "config.json changed on re-export"

# YaRN (long-context stage): a run with YaRN on its full layers exports transformers'
# rope_scaling (max_position_embeddings = factor x original, attention_factor given), its
# logits through the KV-cache path match the reference's YaRN on the full layers only, and
# import reads it back (recipe.yml, and the same config.json on re-export).
R3=$TMP/run3 HF3=$TMP/hf3 IMP3=$TMP/imp3
train $R3 train.max_steps=2 model.rope_scaling=yarn model.rope_scaling_factor=2 model.rope_original_context=16 \
  || fail "train yarn: $(tail -5 $R3.log)"
"$OLMO" export-hf $R3 $HF3 2>/dev/null && "$OLMO" import-hf $HF3 $IMP3 2>/dev/null || fail "yarn export/import"
"$OLMO" export-hf $IMP3 $TMP/hf3b 2>/dev/null && cmp $HF3/config.json $TMP/hf3b/config.json || fail "yarn config.json changed on re-export"
grep -q 'rope_scaling: "yarn"' $IMP3/recipe.yml && grep -q "rope_original_context: 16" $IMP3/recipe.yml || fail "yarn not in the imported recipe"
dump_logits ylogits run:$R3 hf:$HF3 imp:$IMP3
$PY - $HF3 $TMP $TOKS <<'PY' || fail "yarn reference parity"
import json, math, sys
import numpy as np, torch
sys.path.insert(0, 'tests/ref')
import olmo_ref, safetensors_io as st
hf, tmp, toks = sys.argv[1], sys.argv[2], [int(t) for t in sys.argv[3].split(',')]
c = json.load(open(f'{hf}/config.json'))
rs = c['rope_scaling']
want = dict(rope_type='yarn', factor=2, beta_fast=32, beta_slow=1, original_max_position_embeddings=16)
assert {k: rs[k] for k in want} == want, rs
assert abs(rs['attention_factor'] - (0.1 * math.log(2) + 1)) < 1e-12 and c['max_position_embeddings'] == 32, c
P = {k: torch.from_numpy(v).double() for k, v in st.read(f'{hf}/model.safetensors').items()}
cfg = olmo_ref.Config(n_heads=c['num_attention_heads'], n_kv_heads=c['num_key_value_heads'],
                      head_dim=c['head_dim'], rms_eps=c['rms_norm_eps'], rope_theta=c['rope_theta'],
                      n_layers=c['num_hidden_layers'], layer_types=c['layer_types'],
                      sliding_window=c['sliding_window'], rope_scaling=rs)
ref = olmo_ref.forward(P, cfg, torch.tensor([toks]))[0].numpy()[:, :1000]
plain = olmo_ref.forward(P, olmo_ref.Config(cfg, rope_scaling=None), torch.tensor([toks]))[0].numpy()[:, :1000]
assert np.abs(ref - plain).max() > 1e-4, 'YaRN made no difference'
for name in ('run', 'hf', 'imp'):
    ours = st.read(f'{tmp}/ylogits-{name}.st')['logits'].astype(np.float64)
    rel = (np.abs(ours - ref).max(axis=1) / np.abs(ref).max(axis=1)).max()
    print(f'yarn {name}: max rel err vs float64 reference {rel:.3g} (tolerance 1e-5)')
    assert rel <= 1e-5, f'{name}: {rel}'
PY

# BF16 shards + index.json, and tied embeddings (lm_head absent)
$PY tests/ref/hf_shards.py $HF $TMP/shard || fail "make shards"
$PY - $HF $TMP/tied <<'PY' || fail "make tied"
import sys, os, json, shutil; sys.path.insert(0, 'tests/ref')
import safetensors_io as st
src, ti = sys.argv[1:3]
x = st.read(f'{src}/model.safetensors')
os.makedirs(ti); shutil.copy(f'{src}/config.json', ti)
c = json.load(open(f'{ti}/config.json')); c['tie_word_embeddings'] = True
json.dump(c, open(f'{ti}/config.json', 'w'))
st.write(f'{ti}/model.safetensors', {n: v for n, v in x.items() if n != 'lm_head.weight'})
PY
"$OLMO" import-hf $TMP/shard $TMP/impshard 2>/dev/null || fail "import shards"
"$OLMO" import-hf $TMP/tied $TMP/imptied 2>/dev/null || fail "import tied"
$PY - $HF $TMP/impshard $TMP/imptied <<'PY' || fail "shards / tied content"
import sys, numpy as np; sys.path.insert(0, 'tests/ref')
import safetensors_io as st
x = st.read(f'{sys.argv[1]}/model.safetensors')
s = st.read(f'{sys.argv[2]}/model.safetensors'); t = st.read(f'{sys.argv[3]}/model.safetensors')
for k, v in x.items():
    b = st.bf16_bits_to_f32(st.f32_to_bf16_bits(v)).reshape(v.shape)
    assert np.array_equal(s[k][:v.shape[0]], b), k
assert np.array_equal(t['lm_head.weight'], t['model.embed_tokens.weight']), 'tied lm_head'
assert np.array_equal(t['lm_head.weight'], x['model.embed_tokens.weight'])
print('BF16 shards and tied embeddings imported')
PY

# the import is usable by olmo eval with its own recipe.yml
"$OLMO" eval $IMP --recipe $IMP/recipe.yml --set t=$TMP/tok.npy eval.max_docs=5 eval.eos_id=5 train.seq_len=32 \
  >$TMP/eval.log 2>&1 || fail "olmo eval on the import: $(tail -3 $TMP/eval.log)"

# (c) bad inputs: exit 2 and a message naming the problem
bad() {  # bad WHAT GREP cmd...
  local what=$1 pat=$2; shift 2
  set +e; "$@" >$TMP/bad.out 2>$TMP/bad.err; local rc=$?; set -e
  [ $rc = 2 ] || fail "$what: exit $rc, want 2: $(cat $TMP/bad.err)"
  grep -q -- "$pat" $TMP/bad.err || fail "$what: message lacks '$pat': $(cat $TMP/bad.err)"
}
mkhf() {  # mkhf DIR PYTHON-STATEMENTS (c = config dict, x = tensors)
  rm -rf $1; mkdir -p $1
  $PY - $HF $1 "$2" <<'PY'
import sys, json; sys.path.insert(0, 'tests/ref')
import safetensors_io as st
src, d, code = sys.argv[1:4]
c = json.load(open(f'{src}/config.json')); x = st.read(f'{src}/model.safetensors')
exec(code)
json.dump(c, open(f'{d}/config.json', 'w')); st.write(f'{d}/model.safetensors', x)
PY
}
B=$TMP/bad
mkhf $B "c['model_type'] = 'llama'";                    bad "model_type" "model_type is \"llama\"" "$OLMO" import-hf $B $TMP/o
mkhf $B "del x['model.layers.2.mlp.up_proj.weight']";    bad "missing tensor" "missing tensor model.layers.2.mlp.up_proj.weight" "$OLMO" import-hf $B $TMP/o
mkhf $B "x['model.norm.weight'] = x['model.norm.weight'][:63]"; bad "bad shape" "model.norm.weight: expected shape (64)" "$OLMO" import-hf $B $TMP/o
mkhf $B "x['lm_head.weight'] = x['lm_head.weight'][:999]"; bad "bad vocab rows" "lm_head.weight: expected shape (1024, 64)" "$OLMO" import-hf $B $TMP/o
mkhf $B "del c['hidden_size']";                          bad "missing key" "missing number \"hidden_size\"" "$OLMO" import-hf $B $TMP/o
mkhf $B "c['hidden_size'] = 64.5";                       bad "fractional dim" "\"hidden_size\" must be a positive integer" "$OLMO" import-hf $B $TMP/o
mkhf $B "c['num_hidden_layers'] = -4";                   bad "negative dim" "\"num_hidden_layers\" must be a positive integer" "$OLMO" import-hf $B $TMP/o
mkhf $B "del c['model_type']";                           bad "no model_type" "model_type" "$OLMO" import-hf $B $TMP/o
mkhf $B "c['rope_scaling'] = {'rope_type': 'yarn', 'factor': 8.0, 'original_max_position_embeddings': 16}"
bad "yarn factor vs max_position_embeddings" "max_position_embeddings (32) must equal rope_scaling.factor x original_max_position_embeddings" "$OLMO" import-hf $B $TMP/o
mkhf $B "c['rope_scaling'] = {'rope_type': 'yarn', 'original_max_position_embeddings': 16}"
bad "yarn without factor" "rope_scaling (yarn) needs a number \"factor\"" "$OLMO" import-hf $B $TMP/o
mkhf $B "c['rope_scaling'] = {'rope_type': 'yarn', 'factor': 2.0, 'original_max_position_embeddings': 16, 'attention_factor': 1.0}"
bad "yarn attention_factor" "attention_factor must be 0.1 ln(factor) + 1" "$OLMO" import-hf $B $TMP/o
mkhf $B "c['rope_scaling'] = {'rope_type': 'linear', 'factor': 2.0}"; bad "linear rope" "only null, rope_type \"default\" or \"yarn\"" "$OLMO" import-hf $B $TMP/o
bad "export yarn max-pos" "factor x original context = 32" "$OLMO" export-hf $R3 $TMP/o --max-pos 64
mkhf $B "c['layer_types'][0] = 'full_attention'";        bad "layer pattern" "layer_types" "$OLMO" import-hf $B $TMP/o
mkhf $B "c['num_attention_heads'] = 3";                  bad "bad dims" "config.json" "$OLMO" import-hf $B $TMP/o
mkhf $B "c['num_key_value_heads'] = 4";                  bad "kv shape" "k_proj.weight: expected shape (64, 64)" "$OLMO" import-hf $B $TMP/o
mkhf $B "pass"; rm $B/model.safetensors;                 bad "no weights" "model.safetensors.index.json" "$OLMO" import-hf $B $TMP/o
echo '{oops' > $B/config.json;                           bad "bad json" "not valid JSON" "$OLMO" import-hf $B $TMP/o
bad "no config" "has no config.json" "$OLMO" import-hf $TMP/zero $TMP/o
bad "not a dir" "not a directory" "$OLMO" import-hf $TMP/nope $TMP/o
bad "import usage" "usage" "$OLMO" import-hf $HF
bad "export missing" "no such file" "$OLMO" export-hf $TMP/nope $TMP/o
mkdir -p $TMP/lone && cp $R/model.safetensors $TMP/lone/
bad "export no shape" "cannot tell the model shape" "$OLMO" export-hf $TMP/lone/model.safetensors $TMP/o
mkdir -p $TMP/empty; bad "export empty dir" "no model.safetensors" "$OLMO" export-hf $TMP/empty $TMP/o
bad "export bad opt" "unknown option" "$OLMO" export-hf $R $TMP/o --frobnicate
bad "export max-pos" "max-pos" "$OLMO" export-hf $R $TMP/o --max-pos -3
# a wrong-shape checkpoint next to a recipe: named tensors
$PY - $R/model.safetensors $TMP/lone/model.safetensors <<'PY'
import sys; sys.path.insert(0, 'tests/ref')
import safetensors_io as st
x = st.read(sys.argv[1]); del x['model.norm.weight']; st.write(sys.argv[2], x)
PY
cp $R/recipe.yml $TMP/lone/
bad "export missing tensor" "missing tensor model.norm.weight" "$OLMO" export-hf $TMP/lone $TMP/o
echo "test_hf: all checks passed"
