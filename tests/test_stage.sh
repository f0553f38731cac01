#!/usr/bin/env bash
# test_stage.sh: the OLMo 3 stage transition (train.load_path, load_optim,
# load_trainer_state): stage 2 starts from stage 1's weights and Adam moments while its
# step counter, schedule and loader restart; weights-only loading (also an export-hf
# directory); bad load paths (also a sharded HF directory: import-hf it first).
source "$(dirname "$0")/resume_lib.sh"
PYC() { $PY - "$@"; }
train "$TMP/s1" train.max_steps=4
# lr 0, no decay: stage 2's first update leaves the weights untouched, so its saved model
# must equal stage 1's bit for bit, proving the weights were loaded.
train "$TMP/s2" train.load_path="$TMP/s1" train.load_optim=true train.max_steps=2 optim.lr=0 \
  optim.weight_decay=0 schedule.name=constant schedule.warmup_steps=0 train.resume=never
cmp "$TMP/s1/model.safetensors" "$TMP/s2/model.safetensors" || fail "stage 2 did not start from stage 1's weights"
grep -q "load_path: .*step 4): weights + Adam moments; step, schedule and loader restart" "$TMP/s2.log" || fail "no load_path line"
PYC "$TMP/s1" "$TMP/s2" <<'PY' || fail "stage 2 state"
import json, sys, glob
def state(run):
    d = sorted(glob.glob(run + '/checkpoints/step-*'))[-1]
    return json.load(open(d + '/train_state.json'))
s1, s2 = state(sys.argv[1]), state(sys.argv[2])
# Adam's step count continues (moments loaded); the trainer's step restarts at 1.
assert s1['adam_step'] == 4 and s2['adam_step'] == 6, (s1['adam_step'], s2['adam_step'])
assert s2['step'] == 2, s2['step']
steps = [json.loads(l)['step'] for l in open(sys.argv[2] + '/metrics.jsonl') if json.loads(l).get('kind') == 'train']
assert steps == [1, 2], steps
print('stage 2: weights + moments loaded, counters restarted')
PY
# Without load_optim the moments start at zero: Adam's step count restarts.
train "$TMP/s3" train.load_path="$TMP/s1" train.max_steps=2
PYC "$TMP/s3" <<'PY' || fail "weights-only state"
import json, sys, glob
d = sorted(glob.glob(sys.argv[1] + '/checkpoints/step-*'))[-1]
assert json.load(open(d + '/train_state.json'))['adam_step'] == 2
PY
# load_trainer_state: continues the step counter and the loader stream (like a resume).
train "$TMP/s4" train.load_path="$TMP/s1" train.load_optim=true train.load_trainer_state=true train.max_steps=6
grep -q "^step  *5/6" "$TMP/s4.log" || fail "load_trainer_state did not continue at step 5"
# A bare model.safetensors: weights only; asking for moments from it is an error.
train "$TMP/s5" train.load_path="$TMP/s1/model.safetensors" train.max_steps=1
if train "$TMP/s6" train.load_path="$TMP/s1/model.safetensors" train.load_optim=true; then fail "load_optim from a bare file"; fi
grep -q "need a checkpoint" "$TMP/s6.log" || fail "unclear load_optim error"
[ ! -e "$TMP/s6" ] || fail "a failed start wrote $TMP/s6"
# Another model's checkpoint: refused, nothing written.
if train "$TMP/s7" train.load_path="$TMP/s1" model.n_layers=2; then fail "loaded another model's checkpoint"; fi
[ ! -e "$TMP/s7" ] || fail "a failed start wrote $TMP/s7"
if train "$TMP/s8" train.load_path="$TMP/nowhere"; then fail "missing load_path accepted"; fi
grep -q "does not exist" "$TMP/s8.log" || fail "unclear missing load_path error"
# An export-hf directory holds model.safetensors in the OLMo layout: it loads as weights.
# The same directory with its weights in shards is an HF directory the trainer does not
# read: refused by name (import-hf converts it), nothing written (ckpt_source_resolve).
"$OLMO" export-hf "$TMP/s1" "$TMP/hf" >/dev/null 2>&1 || fail "export-hf s1"
train "$TMP/s11" train.load_path="$TMP/hf" train.max_steps=1 || fail "load_path of an export-hf dir: $(tail -3 $TMP/s11.log)"
grep -q "load_path: weights from $TMP/hf/model.safetensors" "$TMP/s11.log" || fail "export-hf dir not read as weights"
mv "$TMP/hf/model.safetensors" "$TMP/hf/model-00001-of-00001.safetensors"
PYC "$TMP/hf" <<'PY'
import json, struct, sys
d = sys.argv[1]
f = open(d + '/model-00001-of-00001.safetensors', 'rb')
names = [k for k in json.loads(f.read(struct.unpack('<Q', f.read(8))[0])) if k != '__metadata__']
json.dump({'metadata': {}, 'weight_map': {n: 'model-00001-of-00001.safetensors' for n in names}},
          open(d + '/model.safetensors.index.json', 'w'))
PY
if train "$TMP/s12" train.load_path="$TMP/hf"; then fail "load_path of a sharded HF dir accepted"; fi
grep -q "is a Hugging Face directory without a model.safetensors (its weights in shards): convert it with \`olmo import-hf $TMP/hf OUT\`" \
  "$TMP/s12.log" || fail "unclear HF load_path error: $(cat $TMP/s12.log)"
[ ! -e "$TMP/s12" ] || fail "a failed start wrote $TMP/s12"
# Stage 3 (long context): from stage 1's checkpoint with YaRN on the full layers, a longer
# sequence and the document mask. The rope scaling is recorded in train_state.json; a
# resume with another rope scaling is refused (that is a stage transition), the same one
# continues.
S3="model.rope_scaling=yarn model.rope_scaling_factor=2 model.rope_original_context=32 train.seq_len=64 data.document_mask=true data.eos_id=7"
train "$TMP/s9" train.load_path="$TMP/s1" train.load_optim=true train.max_steps=2 $S3
grep -q "load_path: rope scaling none -> yarn(factor 2, beta_fast 32, beta_slow 1, original_context 32) (stage transition)" "$TMP/s9.log" \
  || fail "no stage-3 rope scaling line"
PYC "$TMP/s9" <<'PY' || fail "stage 3 state"
import json, sys, glob
d = sorted(glob.glob(sys.argv[1] + '/checkpoints/step-*'))[-1]
rs = json.load(open(d + '/train_state.json'))['model']['rope_scaling']
assert rs == {'type': 'yarn', 'factor': 2, 'beta_fast': 32, 'beta_slow': 1, 'original_context': 32}, rs
PY
if train "$TMP/s9" train.max_steps=3 train.seq_len=64 data.document_mask=true data.eos_id=7; then fail "resumed a YaRN run without YaRN"; fi
grep -q "model.rope_scaling: 'yarn' -> 'none'   (changes the model: refused)" "$TMP/s9.log" \
  || fail "unclear rope-scaling resume error: $(cat $TMP/s9.log)"
train "$TMP/s9" train.max_steps=3 train.allow_recipe_change=train.max_steps $S3
grep -q "^resume: " "$TMP/s9.log" || fail "stage 3 did not resume"
if train "$TMP/s10" model.rope_scaling=yarm; then fail "bad model.rope_scaling accepted"; fi
grep -q "model.rope_scaling must be none or yarn, got 'yarm'" "$TMP/s10.log" || fail "unclear model.rope_scaling error"
if train "$TMP/s10" model.rope_scaling=yarn model.rope_beta_fast=0.5; then fail "beta_fast < beta_slow accepted"; fi
grep -q "model.rope_beta_fast must be > model.rope_beta_slow" "$TMP/s10.log" || fail "unclear beta error"
if train "$TMP/s10" data.document_mask=true data.eos_id=5000; then fail "eos_id outside the vocab accepted"; fi
grep -q "data.eos_id must be a token id in \[0, model.vocab_size = 1000)" "$TMP/s10.log" || fail "unclear eos_id error"
[ ! -e "$TMP/s10" ] || fail "a failed start wrote $TMP/s10"
echo "stage transition: ok"
