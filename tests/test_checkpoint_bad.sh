#!/usr/bin/env bash
# test_checkpoint_bad.sh: resuming from a bad checkpoint is a clear error (exit 2, the
# message names the file and the problem) and the run never starts: metrics.jsonl and
# the checkpoints are untouched. Cases: a checkpoint of a different model, a truncated
# safetensors file, a tensor with the wrong shape, a tensor with the wrong dtype,
# `latest` naming a missing directory, a train_state.json that does not parse, a
# train.resume PATH that does not exist, a world size that does not divide the batch.
# A changed file is first caught by its checksum (checksums.txt, src/io/ckpt_verify.h;
# the bit-flip cases are in test_faults.sh): the structural cases drop checksums.txt, as in
# a checkpoint written before checksums, which loads with a warning, then is validated.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
BASE=$TMP/base
train $BASE train.max_steps=4 ckpt.interval=2 || fail "base run: $(tail -5 $BASE.log)"
# expect_bad NAME PATTERN [key=value...]: resume a fresh copy of BASE (its step-4
# checkpoint broken by the caller in $TMP/NAME), expect exit 2 and PATTERN in stderr.
expect_bad() {
  local name=$1 pat=$2; shift 2
  local d=$TMP/$name
  local before; before=$(cd $d && find . -type f | sort | xargs md5sum | md5sum)
  set +e
  "$OLMO" train "$TMP/r.yml" train.run_dir=$d train.max_steps=8 train.allow_recipe_change=train.max_steps "$@" >$d.log 2>&1
  local rc=$?
  set -e
  [ $rc = 2 ] || fail "$name: exit $rc, want 2: $(tail -5 $d.log)"
  grep -q "$pat" $d.log || fail "$name: message lacks '$pat': $(cat $d.log)"
  grep -q "^step " $d.log && fail "$name: training started"
  local after; after=$(cd $d && find . -type f | sort | xargs md5sum | md5sum)
  [ "$before" = "$after" ] || fail "$name: run directory modified"
  echo "ok $name: $(grep 'error' $d.log | head -1 | cut -c1-220)"
}
fresh() { rm -rf $TMP/$1; cp -r $BASE $TMP/$1; }
CK=checkpoints/step-00000004
# nosums NAME: the step-4 checkpoint of NAME without its checksums (as written before them).
nosums() { rm $TMP/$1/$CK/checksums.txt; }

fresh model
# (the resume guard names it first, from the checkpoint's recipe: src/train/resume.c)
expect_bad model "model.d_model: 64 -> 32   (changes the model: refused)" model.d_model=32 model.n_heads=2 model.n_kv_heads=1

fresh trunc
truncate -s 5000 $TMP/trunc/$CK/model.safetensors
expect_bad trunc "model.safetensors"

fresh trunc_optim
truncate -s 100 $TMP/trunc_optim/$CK/optim.safetensors
expect_bad trunc_optim "optim.safetensors"

# wrong shape: model.safetensors of a model with another MLP width, same train_state.json
fresh shape
train $TMP/other train.max_steps=2 ckpt.interval=2 model.mlp_hidden=96 || fail "other model run"
cp $TMP/other/checkpoints/step-00000002/model.safetensors $TMP/shape/$CK/model.safetensors
expect_bad shape "model.safetensors: .* bytes, but checksums.txt records"
grep -q "newest earlier checkpoint that verifies is .*step-00000002: resume from it with train.resume=" $TMP/shape.log ||
  fail "shape: no earlier checkpoint named: $(cat $TMP/shape.log)"
nosums shape
expect_bad shape "mlp.gate_proj.weight: expected F32 (128, 64), got F32 (96, 64)"
grep -q "no checksums.txt (written before checkpoints carried checksums): loading it unverified" $TMP/shape.log ||
  fail "shape: no warning about the missing checksums: $(cat $TMP/shape.log)"

# wrong dtype: the header of one tensor says I32 (same size, so the file stays valid)
fresh dtype
$PY - $TMP/dtype/$CK/model.safetensors <<'PY'
import json, struct, sys
p = sys.argv[1]; b = open(p, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
h['model.norm.weight']['dtype'] = 'I32'
hb = json.dumps(h).encode(); hb += b' ' * ((8 - len(hb) % 8) % 8)
open(p, 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])
PY
nosums dtype
expect_bad dtype "model.norm.weight: expected F32 (64), got I32"

fresh latest
echo step-00000099 > $TMP/latest/checkpoints/latest
expect_bad latest "latest names 'step-00000099'"

fresh json
head -c 200 $TMP/json/$CK/train_state.json > $TMP/json/x && mv $TMP/json/x $TMP/json/$CK/train_state.json
expect_bad json "train_state.json: 200 bytes, but checksums.txt records"
nosums json
expect_bad json "train_state.json: not valid JSON"

fresh json_field
$PY - $TMP/json_field/$CK/train_state.json <<'PY'
import json, sys
p = sys.argv[1]; o = json.load(open(p)); del o['loader']; o['step'] = 'four'
json.dump(o, open(p, 'w'))
PY
nosums json_field
expect_bad json_field "missing or bad fields: step; loader"

fresh path
expect_bad path "no such checkpoint directory" train.resume=$TMP/nowhere

# more ranks than micro-batches: 8 / 2 = 4 micro-batches over 5 ranks (fewer ranks than
# micro-batches split unevenly: tests/test_dist_uneven.sh)
fresh world
set +e
mtrain 5 $TMP/world; rc=$?
set -e
[ $rc = 2 ] || fail "world 5: exit $rc: $(tail -5 $TMP/world.log)"
grep -q "4 micro-batches for 5 ranks: every rank needs at least one" $TMP/world.log || fail "world 5 message: $(cat $TMP/world.log)"
echo "ok world"
echo "test_checkpoint_bad: ok"
