#!/usr/bin/env bash
# test_gguf.sh: `olmo export-gguf` (docs/gguf.md) checked against llama.cpp itself, the
# prebuilt CPU library of npm node-llama-cpp 3.21.1 (pinned in package-lock.json; its
# postinstall skipped, no optional GPU packages: docs/gguf.md), driven by
# tests/gguf_llama.mjs, on three small models:
#   A  olmo3-tiny (vocab 1000 padded to 1024, GQA, window 8 < T = 32), 12 steps;
#   B  the same with YaRN on the full layers (factor 2, original context 16 < T = 32): a
#      stage-3-like model, window < T;
#   C  olmo3-tiny with the real dolma2 vocabulary (100278 -> 100352 rows), trained on text.
# Checks:
#   1. per-document held-out CE from llama.cpp's logits (float64 log-softmax: gguf_llama.mjs)
#      equals `olmo eval`'s within 1e-6 nats at F32 (A, B, C; documents longer and shorter
#      than T);
#   2. f16 / bf16 / q8_0 (A): |CE - olmo eval's| <= 6 sigma + 1e-6, sigma the first-order
#      estimate of tests/gguf_bound.py (weights and matmul inputs rounded as llama.cpp does,
#      random rounding), also under its worst-case first-order bound;
#   3. greedy continuation by llama.cpp equals `olmo generate --greedy`: 64 tokens (A, B), 16 (C);
#   4. llama.cpp's tokenization of tests/data/tokenizer_stress.txt equals `olmo tokenize`
#      (and of special tokens with --allow-special);
#   5. export-gguf of the run, of its export-hf directory and of that re-imported: one file;
#   6. bad input: exit 2, a message naming the problem, nothing written.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
[ -d node_modules/node-llama-cpp ] && [ -d node_modules/@node-llama-cpp/linux-x64 ] \
  || fail "node-llama-cpp is not installed: run scripts/deps.sh (npm ci)"
A=$TMP/a B=$TMP/b C=$TMP/c
STRESS=tests/data/tokenizer_stress.txt

# held-out documents (EOS last): ids < 1000 with EOS 5 for A and B (lengths around T = 32:
# truncated at T and not), dolma2 text for C
$PY - $TMP <<'PY'
import random, struct, sys
random.seed(31)
for i, n in enumerate((20, 33, 47, 26)):
    d = [random.randrange(6, 1000) for _ in range(n - 1)] + [5]
    open(f'{sys.argv[1]}/doc{i}.npy', 'wb').write(struct.pack('<%dI' % n, *d))
PY
DOCS="$TMP/doc0.npy $TMP/doc1.npy $TMP/doc2.npy $TMP/doc3.npy"
train $A || fail "train A: $(tail -5 $A.log)"
train $B model.rope_scaling=yarn model.rope_scaling_factor=2 model.rope_original_context=16 || fail "train B: $(tail -5 $B.log)"
# C: trained on the stress text (dolma2 ids); held out: three passages of another text
"$OLMO" tokenize <$STRESS >$TMP/stress.ids || fail "tokenize stress text"
$PY - $TMP <<'PY'
import struct, sys
ids = [int(t) for t in open(f'{sys.argv[1]}/stress.ids').read().split()]
open(f'{sys.argv[1]}/stress.npy', 'wb').write(struct.pack('<%dI' % len(ids), *ids))
PY
train $C model.vocab_size=100278 data.paths=$TMP/stress.npy train.max_steps=3 || fail "train C: $(tail -5 $C.log)"
i=0
for text in "The Fulton County Grand Jury said Friday an investigation of recent primary election produced no evidence." \
            "It was a bright cold day in April, and the clocks were striking thirteen; the hallway smelt of boiled cabbage." \
            "Numbers like 3.14159 and 2,718 sit beside words: naïve café, 東京, and a tab	here."; do
  printf '%s<|endoftext|>' "$text" | "$OLMO" tokenize --allow-special >$TMP/c$i.ids || fail "tokenize held-out text"
  $PY -c "import struct,sys; ids=[int(t) for t in open('$TMP/c$i.ids').read().split()]; open('$TMP/cdoc$i.npy','wb').write(struct.pack('<%dI'%len(ids),*ids))"
  i=$((i+1))
done
CDOCS="$TMP/cdoc0.npy $TMP/cdoc1.npy $TMP/cdoc2.npy"

# exports
for t in f32 f16 bf16 q8_0; do
  "$OLMO" export-gguf $A $TMP/a-$t.gguf --type $t 2>$TMP/exp.log || fail "export-gguf A $t: $(cat $TMP/exp.log)"
done
"$OLMO" export-gguf $B $TMP/b.gguf 2>$TMP/exp.log || fail "export-gguf B: $(cat $TMP/exp.log)"
"$OLMO" export-gguf $C $TMP/c.gguf 2>$TMP/exp.log || fail "export-gguf C: $(cat $TMP/exp.log)"
grep -q "100352 tokens (100278 real, 74 padding rows), 100000 merges" $TMP/exp.log || fail "C vocabulary: $(cat $TMP/exp.log)"
ls $TMP/*.tmp.* 2>/dev/null && fail "temp files left behind"
"$OLMO" export-hf $A $TMP/a-hf 2>/dev/null || fail "export-hf A (for the bound)"
# the same file from the HF export of the run and from its re-import (padded rows kept both ways)
"$OLMO" export-gguf $TMP/a-hf $TMP/a-fromhf.gguf 2>/dev/null && cmp -s $TMP/a-f32.gguf $TMP/a-fromhf.gguf \
  || fail "export-gguf of the export-hf directory differs from the run's"
"$OLMO" import-hf $TMP/a-hf $TMP/a-imp 2>/dev/null && "$OLMO" export-gguf $TMP/a-imp $TMP/a-fromimp.gguf 2>/dev/null \
  && cmp -s $TMP/a-f32.gguf $TMP/a-fromimp.gguf || fail "export-gguf of import-hf(export-hf(run)) differs from the run's"

# olmo's side: per-document CE (one --set per document), greedy continuations, tokenization
evaljson() {  # evaljson RUN OUT EOS DOC...
  local run=$1 out=$2 eos=$3 sets="" k=0; shift 3
  for d in "$@"; do sets="$sets --set d$k=$d"; k=$((k+1)); done
  "$OLMO" eval $run $sets eval.eos_id=$eos --json >$out 2>$TMP/eval.log || fail "olmo eval $run: $(tail -3 $TMP/eval.log)"
}
evaljson $A $TMP/eval-a.json 5 $DOCS
evaljson $B $TMP/eval-b.json 5 $DOCS
evaljson $C $TMP/eval-c.json 100257 $CDOCS
PROMPT=11,22,33,44
"$OLMO" generate $A --tokens $PROMPT --greedy --max-new 64 --eos -1 >$TMP/gen-a.txt 2>/dev/null || fail "generate A"
"$OLMO" generate $B --tokens $PROMPT --greedy --max-new 64 --eos -1 >$TMP/gen-b.txt 2>/dev/null || fail "generate B"
printf 'The jury said' | "$OLMO" tokenize >$TMP/cprompt.ids
CPROMPT=$(tr -s ' \n' ',' <$TMP/cprompt.ids | sed 's/,$//')
"$OLMO" generate $C --tokens $CPROMPT --greedy --max-new 16 --eos -1 >$TMP/gen-c.txt 2>/dev/null || fail "generate C"
SPECIAL='Hello<|endoftext|>world<|im_start|>user<|im_end|><|fim_prefix|>x|||PHONE_NUMBER|||<|extra_id_3|><|pad|>'
printf '%s' "$SPECIAL" >$TMP/special.txt
"$OLMO" tokenize --allow-special <$TMP/special.txt >$TMP/special.ids || fail "tokenize specials"

# llama.cpp's side: one node process for every job
$PY - $TMP $STRESS <<'PY'
import json, sys
tmp, stress = sys.argv[1:3]
docs = [f'{tmp}/doc{i}.npy' for i in range(4)]
ids = lambda p: [int(t) for t in open(p).read().replace(',', ' ').split()]
jobs = [{'model': f'{tmp}/a-{t}.gguf', 'ce': 32, 'docs': docs} for t in ('f32', 'f16', 'bf16', 'q8_0')]
jobs += [{'model': f'{tmp}/b.gguf', 'ce': 32, 'docs': docs},
         {'model': f'{tmp}/c.gguf', 'ce': 32, 'docs': [f'{tmp}/cdoc{i}.npy' for i in range(3)]},
         {'model': f'{tmp}/a-f32.gguf', 'greedy': 64, 'prompt': [11, 22, 33, 44]},
         {'model': f'{tmp}/b.gguf', 'greedy': 64, 'prompt': [11, 22, 33, 44]},
         {'model': f'{tmp}/c.gguf', 'greedy': 16, 'prompt': ids(f'{tmp}/cprompt.ids')},
         {'model': f'{tmp}/c.gguf', 'tokenize': stress, 'special': False},
         {'model': f'{tmp}/c.gguf', 'tokenize': f'{tmp}/special.txt', 'special': True}]
json.dump(jobs, open(f'{tmp}/jobs.json', 'w'))
PY
node tests/gguf_llama.mjs $TMP/jobs.json >$TMP/llama.json 2>$TMP/llama.log || fail "node-llama-cpp: $(tail -20 $TMP/llama.log)"
$PY tests/gguf_bound.py $TMP/a-hf 32 $DOCS >$TMP/bound.json || fail "gguf_bound.py"

$PY - $TMP <<'PY' || fail "llama.cpp vs olmo"
import json, sys
tmp = sys.argv[1]
L = json.load(open(f'{tmp}/llama.json'))
bound = json.load(open(f'{tmp}/bound.json'))
ev = {k: json.load(open(f'{tmp}/eval-{k}.json')) for k in 'abc'}
ids = lambda p: [int(t) for t in open(p).read().replace(',', ' ').split()]
bad = 0
def ce_check(name, got, e, tol_of):
    global bad
    for i, g in enumerate(got):
        want, n = e[f'eval/d{i}/ce'], e[f'eval/d{i}/tokens']
        assert g['tokens'] == n, f'{name} doc {i}: {g["tokens"]} targets, olmo eval {n}'
        tol = tol_of(i)
        d = abs(g['ce'] - want)
        print(f'{name} doc {i} ({n} targets): llama.cpp {g["ce"]:.9f} olmo eval {want:.9f} |diff| {d:.2e} (tol {tol:.2e})')
        if d > tol: bad += 1; print('  FAIL')
ce_check('A f32', L[0], ev['a'], lambda i: 1e-6)
for j, t in enumerate(('f16', 'bf16', 'q8_0')):
    ce_check(f'A {t}', L[1 + j], ev['a'], lambda i, t=t: 6 * bound[i][t + '_sigma'] + 1e-6)
    for i, g in enumerate(L[1 + j]):
        d = abs(g['ce'] - ev['a'][f'eval/d{i}/ce'])
        assert d <= bound[i][t] + 1e-6, f'A {t} doc {i}: {d} over the worst-case first-order bound {bound[i][t]}'
for i, b in enumerate(bound):   # the float64 reference agrees with olmo eval too
    assert abs(b['ce'] - ev['a'][f'eval/d{i}/ce']) <= 1e-6, (i, b['ce'], ev['a'][f'eval/d{i}/ce'])
ce_check('B f32 (YaRN)', L[4], ev['b'], lambda i: 1e-6)
ce_check('C f32 (dolma2)', L[5], ev['c'], lambda i: 1e-6)
for k, (name, res) in enumerate((('A', L[6]), ('B', L[7]), ('C', L[8]))):
    ours = ids(f'{tmp}/gen-{"abc"[k]}.txt')
    same = ours == res
    print(f'{name} greedy {len(res)}: {"equal" if same else "DIFFERENT"} ({len(set(res))} distinct ids) {res[:12]}...')
    if not same: bad += 1; print('  olmo:     ', ours)
for name, got, want in (('stress text', L[9], ids(f'{tmp}/stress.ids')), ('special tokens', L[10], ids(f'{tmp}/special.ids'))):
    first = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), None if len(got) == len(want) else min(len(got), len(want)))
    print(f'tokenize {name}: {len(want)} ids, ' + ('equal' if first is None else f'first difference at {first}: llama.cpp {got[first:first+5]} olmo {want[first:first+5]}'))
    if first is not None: bad += 1
sys.exit(1 if bad else 0)
PY

# 6. bad input: exit 2, message, nothing written
bad() {  # bad WHAT GREP OUT cmd...
  local what=$1 pat=$2 out=$3; shift 3
  set +e; "$@" >$TMP/bad.out 2>$TMP/bad.err; local rc=$?; set -e
  [ $rc = 2 ] || fail "$what: exit $rc, want 2: $(cat $TMP/bad.err)"
  grep -q -- "$pat" $TMP/bad.err || fail "$what: message lacks '$pat': $(cat $TMP/bad.err)"
  [ -e "$out" ] && fail "$what: $out written"
  ls $(dirname "$out")/*.tmp.* >/dev/null 2>&1 && fail "$what: temp file left"
  return 0
}
O=$TMP/out.gguf
bad "type" "--type must be f32, f16, bf16 or q8_0" $O "$OLMO" export-gguf $A $O --type q4_0
bad "missing ckpt" "no such file" $O "$OLMO" export-gguf $TMP/nope $O
bad "usage" "usage" $O "$OLMO" export-gguf $A
bad "out dir" "cannot write $TMP/nodir/x.gguf" $TMP/nodir/x.gguf "$OLMO" export-gguf $A $TMP/nodir/x.gguf
bad "yarn max-pos" "factor x original context = 32" $O "$OLMO" export-gguf $B $O --max-pos 64
train $TMP/hd model.head_dim=8 train.max_steps=1 || fail "train head_dim 8: $(tail -3 $TMP/hd.log)"
bad "head_dim" "model.head_dim 8 x model.n_heads 4 != model.d_model 64" $O "$OLMO" export-gguf $TMP/hd $O
train $TMP/beta train.max_steps=1 model.rope_scaling=yarn model.rope_scaling_factor=2 model.rope_original_context=16 \
  model.rope_beta_fast=16 || fail "train beta: $(tail -3 $TMP/beta.log)"
bad "yarn beta" "model.rope_beta_fast 16 / rope_beta_slow 1" $O "$OLMO" export-gguf $TMP/beta $O
train $TMP/d48 model.d_model=48 model.head_dim=12 train.max_steps=1 || fail "train d48: $(tail -3 $TMP/d48.log)"
bad "q8_0 rows" "q8_0 needs rows that are whole blocks of 32" $O "$OLMO" export-gguf $TMP/d48 $O --type q8_0
$PY - tokenizers/dolma2-tokenizer.json $TMP/badtok.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); t['pre_tokenizer']['pretokenizers'][0]['pattern']['Regex'] = r'\s+|\S+'
json.dump(t, open(sys.argv[2], 'w'))
PY
bad "pre-tokenizer" "must be cl100k's" $O "$OLMO" export-gguf $A $O --tokenizer $TMP/badtok.json
bad "tokenizer file" "cannot read tokenizer $TMP/none.json" $O "$OLMO" export-gguf $A $O --tokenizer $TMP/none.json
"$OLMO" export-gguf --help | grep -q "usage: olmo export-gguf" || fail "--help"
echo "test_gguf: all checks passed"
