#!/usr/bin/env bash
# test_resume_guard.sh: a changed recipe on resume (docs/checkpoints.md, "Changing the
# recipe on resume"): every changed key printed as `key: before -> after`; a change that
# alters the training refused with exit 2 and nothing written unless
# train.allow_recipe_change lists it; harmless keys pass (and leave the run bitwise the
# same); a model change always refused; max_steps at or below the checkpoint's step
# refused; the data fingerprint names the real key; the run directory keeps every recipe
# (recipes/step-N.yml + a metrics record) and report / compare show the segments; olmo
# eval uses the run's own recipe and refuses another model key by key.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
A=$TMP/A
train $A || fail "straight run: $(tail -5 $A.log)"
[ -f $A/recipes/step-00000000.yml ] || fail "no recipes/step-00000000.yml"
cmp -s $A/recipe.yml $A/recipes/step-00000000.yml || fail "recipe.yml is not the first segment's"
grep -q '"kind":"recipe","step":0' $A/metrics.jsonl || fail "no recipe record at step 0"
# snap DIR: what a refused resume must leave untouched
snap() { (cd $1 && find . -type f | sort | xargs sha256sum) > $1.snap; }
untouched() { (cd $1 && find . -type f | sort | xargs sha256sum) | cmp -s - $1.snap || fail "$2: the run directory changed"; }
# refused DIR PATTERN KEY=VALUE...: exit 2, stderr matches PATTERN, nothing written
refused() {
  local d=$1 pat=$2; shift 2
  snap $d
  local rc=0
  "$OLMO" train "$TMP/r.yml" train.run_dir="$d" "$@" >$d.out 2>$d.err || rc=$?
  [ $rc = 2 ] || fail "$* : exit $rc, want 2: $(tail -3 $d.err)"
  grep -Eq -- "$pat" $d.err || fail "$* : no '$pat' in: $(cat $d.err)"
  untouched $d "$*"
}

# 1. a finished run given another lr (the issue's case 1): refused, named key by key
refused $A "optim.lr: 0.003 -> 0.001   \(changes the training: refused\)" optim.lr=1e-3
grep -q "train.allow_recipe_change=optim.lr" $A.err || fail "the refusal does not name the key to allow"
# 2. a schedule change (a finished run extended): refused, with the LR before and after
refused $A "train.max_steps: 12 -> 15" train.max_steps=15
grep -q "lr: step 12 ran at 0.0003; step 13 runs at" $A.err || fail "no LR before/after: $(cat $A.err)"
# 3. max_steps at or below the checkpoint's step: says so, exit 2 (allowed or not)
B=$TMP/B
train $B train.stop_at=6 || fail "stop_at 6"
refused $B "this recipe trains 6 steps .*at or below the checkpoint's step 6" train.max_steps=6 \
  train.allow_recipe_change=train.max_steps
refused $B "at or below the checkpoint's step 6" train.max_steps=4
# 4. the model: always refused, and cannot be allowed
refused $B "model.d_model: 64 -> 128   \(changes the model: refused\)" model.d_model=128
refused $B "the model cannot change on resume" train.allow_recipe_change=model.d_model
refused $B "'optim.lrr' is not a recipe key or section \(did you mean 'optim.lr'\?\)" train.allow_recipe_change=optim.lrr
# 5. precision (the effective one: cpu's default is fp32) and the data order: refused
refused $B "train.precision: fp32 \(backend default\) -> bf16   \(changes the training: refused\)" train.precision=bf16
refused $B "data.seed: 34521 -> 7" data.seed=7
# 6. data: the same file at another path passes; other content is refused; a changed
#    file at the same path is refused by the fingerprint, which names the real key
mkdir -p $TMP/moved && cp $TMP/tok.npy $TMP/moved/tok.npy
head -c 200000 $TMP/tok.npy > $TMP/short.npy
refused $B "data.paths: .*short.npy\]   \(changes the training: refused\)" data.paths=$TMP/short.npy
cp -r $B $TMP/Bf && cp $TMP/tok.npy $TMP/tok.keep && cp $TMP/short.npy $TMP/tok.npy
refused $TMP/Bf "refusing to resume \(if the new data is meant: train.allow_recipe_change=data" train.stop_at=0
cp $TMP/tok.keep $TMP/tok.npy
# 7. harmless keys pass with the diff printed, and leave the run bitwise the straight one's
train $B train.log_every=3 ckpt.keep_last=4 eval.interval=2 data.paths=$TMP/moved/tok.npy \
  || fail "harmless resume: $(tail -3 $B.log)"
for p in "train.log_every: 1 -> 3   (does not change the training)" "ckpt.keep_last: 3 -> 4" \
         "data.paths: [$TMP/tok.npy] -> [$TMP/moved/tok.npy]   (the same data files: the fingerprint is unchanged)"; do
  grep -qF -- "$p" $B.log || fail "harmless diff: no '$p' in $(head -12 $B.log)"
done
cmp $A/model.safetensors $B/model.safetensors || fail "harmless keys changed the training"
same_metrics $A $B 0 || fail "harmless keys changed the metrics"
[ -f $B/recipes/step-00000006.yml ] || fail "the harmless segment is not kept"
# 8. allowed: the run continues under the new lr; history kept, recipe.yml = newest
C=$TMP/C
train $C train.stop_at=6 || fail "stop_at C"
train $C optim.lr=1e-3 train.allow_recipe_change=optim.lr,schedule || fail "allowed change: $(tail -3 $C.log)"
grep -qF "optim.lr: 0.003 -> 0.001   (changes the training: allowed by train.allow_recipe_change)" $C.log \
  || fail "no allowed line: $(head -12 $C.log)"
grep -qF "lr: step 6 ran at 0.002067; step 7 runs at 0.00055 (0.00165 under the checkpoint's recipe); 12 steps in all (were 12)" $C.log \
  || fail "no LR before/after: $(head -12 $C.log)"
grep -q "lr: 0.003" $C/recipes/step-00000000.yml || fail "segment 0 lost its lr"
grep -q "lr: 0.001" $C/recipes/step-00000006.yml || fail "segment 6 has no new lr"
cmp -s $C/recipe.yml $C/recipes/step-00000006.yml || fail "recipe.yml is not the newest segment"
$PY - $C/metrics.jsonl <<'PY' || fail "metrics history"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
seg = [r for r in recs if r.get('kind') == 'recipe']
assert [r['step'] for r in seg] == [0, 6], seg
assert 'optim.lr: 0.003 -> 0.001' in seg[1]['changes'], seg[1]
lr7 = [r['lr'] for r in recs if r.get('kind') == 'train' and r['step'] == 7][0]
assert abs(lr7 - 5.5e-4) < 1e-12, lr7
PY
cp -r $C $C.keep
# the same recipe again: the run is complete, exit 0, history untouched
snap $C
train $C optim.lr=1e-3 || fail "complete rerun"
grep -q "resume: the run is complete: step 12 of 12" $C.log || fail "complete: $(head -5 $C.log)"
[ "$(ls $C/recipes)" = "$(printf 'step-00000000.yml\nstep-00000006.yml')" ] || fail "complete rerun changed recipes/"
# resume=never over it: the old history is moved aside with the old checkpoints
train $C train.resume=never train.max_steps=2 || fail "resume=never"
[ -f $C/recipes.replaced-1/step-00000006.yml ] && [ "$(ls $C/recipes)" = step-00000000.yml ] \
  || fail "resume=never: recipes not moved aside: $(ls $C $C/recipes)"
# 9. report and compare show the segments
"$OLMO" report $C.keep -o $TMP/c.html >/dev/null 2>&1 || fail "report"
grep -q "after step 6: recipes/step-00000006.yml: .*optim.lr: 0.003 -&gt; 0.001" $TMP/c.html || fail "report: no segments"
$PY - "$TMP/set.npy" <<'PY'
import random, struct, sys
random.seed(3)
ids = []
for d in range(12): ids += [random.randrange(998) for _ in range(20)] + [999]
open(sys.argv[1], 'wb').write(struct.pack('<%dI' % len(ids), *ids))
PY
E=(eval.off=false eval.sets=h=$TMP/set.npy eval.eos_id=999)   # resume_lib.sh: eval.off: true
train $TMP/D "${E[@]}" || fail "D"
train $TMP/F "${E[@]}" train.stop_at=6 && train $TMP/F "${E[@]}" optim.lr=1e-3 train.allow_recipe_change=optim.lr || fail "F"
rc=0; "$OLMO" compare $TMP/D $TMP/F >$TMP/cmp.out 2>&1 || rc=$?
[ $rc -le 1 ] || fail "compare: $(cat $TMP/cmp.out)"
grep -A3 "^recipes of B:" $TMP/cmp.out | grep -q "after step 6: recipes/step-00000006.yml: .*optim.lr: 0.003 -> 0.001" \
  || fail "compare: no segments: $(head -8 $TMP/cmp.out)"
# 10. olmo eval: the run's own recipe by default; another model refused key by key
"$OLMO" eval $TMP/D >$TMP/ev.out 2>$TMP/ev.err || fail "eval without --recipe: $(cat $TMP/ev.err)"
grep -q "eval: recipe $TMP/D/recipe.yml (the run's own)" $TMP/ev.err && grep -q "^h " $TMP/ev.out || fail "eval default recipe"
"$OLMO" eval $TMP/D/checkpoints/step-00000012 >/dev/null 2>&1 || fail "eval of a checkpoint dir without --recipe"
rc=0; "$OLMO" eval $TMP/D --recipe $TMP/r.yml "${E[@]}" model.rope_scaling=yarn >/dev/null 2>$TMP/ev.err || rc=$?
[ $rc = 2 ] && grep -q "^  model.rope_scaling: 'none' -> 'yarn'$" $TMP/ev.err || fail "eval yarn: exit $rc: $(cat $TMP/ev.err)"
"$OLMO" eval $TMP/D --recipe $TMP/r.yml "${E[@]}" model.rope_scaling=yarn --allow-rope-scaling >/dev/null 2>$TMP/ev.err \
  && grep -q "eval: note: model.rope_scaling: 'none' -> 'yarn'" $TMP/ev.err || fail "eval --allow-rope-scaling: $(cat $TMP/ev.err)"
rc=0; "$OLMO" eval $TMP/D --recipe $TMP/r.yml "${E[@]}" model.preset=olmo3-20m >/dev/null 2>$TMP/ev.err || rc=$?
[ $rc = 2 ] && grep -q "^  model.d_model: 64 -> " $TMP/ev.err || fail "eval preset: exit $rc: $(cat $TMP/ev.err)"
[ $(wc -l < $TMP/ev.err) -lt 12 ] || fail "eval mismatch message is long: $(cat $TMP/ev.err)"
echo "test_resume_guard: ok"
