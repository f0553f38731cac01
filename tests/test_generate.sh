#!/usr/bin/env bash
# test_generate.sh: `olmo generate` (KV-cache inference, docs/hf.md):
#  - --check-kv: the KV-cache logits, token by token (decode path) and in chunks of 5
#    (prefill path, chunks straddling the window), equal a full forward
#    (model_forward_backward) at every position within 1e-5 relative, on tiny models whose
#    sliding window (8, and 5 with full_attn_every=2) is shorter than the 40-token sequence;
#    also with the document mask (a prompt with an EOS every 9 tokens: the cache must keep
#    each position's document start) and with YaRN on the full layers;
#  - greedy output is deterministic; top-p with one seed is deterministic, other seeds
#    differ; top-p -> 0 and temperature 0 are greedy; --eos stops;
#  - text prompts through the dolma2 tokenizer on a vocab-100278 model (deterministic);
#  - bad arguments exit 2.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
R=$TMP/run R2=$TMP/run2
train $R || fail "train: $(tail -5 $R.log)"
train $R2 model.full_attn_every=2 model.sliding_window=5 model.n_kv_heads=4 train.max_steps=3 || fail "train 2: $(tail -5 $R2.log)"
R3=$TMP/run3 R4=$TMP/run4
train $R3 data.document_mask=true data.eos_id=7 model.full_attn_every=2 model.sliding_window=5 train.max_steps=3 \
  || fail "train docmask: $(tail -5 $R3.log)"
train $R4 model.rope_scaling=yarn model.rope_scaling_factor=8 model.rope_original_context=16 train.max_steps=3 \
  || fail "train yarn: $(tail -5 $R4.log)"
TOKS=$($PY -c 'import random; random.seed(5); print(",".join(str(random.randrange(1000)) for _ in range(40)))')
TOKS_DOC=$($PY -c 'import random; random.seed(5); print(",".join(str(random.randrange(1000)) if i % 9 != 8 else "7" for i in range(40)))')
gen() { "$OLMO" generate "$@" 2>$TMP/gen.err || fail "generate $*: $(cat $TMP/gen.err)"; }

for r in $R $R2 $R3 $R4; do
  toks=$TOKS; [ $r = $R3 ] && toks=$TOKS_DOC
  out=$(gen $r --tokens $toks --check-kv --max-new 0) || exit 1
  echo "$out"
  echo "$out" | grep -q "^check-kv: 40 positions" || fail "no check-kv line"
done

# determinism
g1=$(gen $R --tokens 1,2,3 --max-new 20 --greedy); g2=$(gen $R --tokens 1,2,3 --max-new 20 --greedy)
[ "$g1" = "$g2" ] || fail "greedy differs: $g1 / $g2"
[ "$(echo "$g1" | tr ',' '\n' | wc -l)" = 20 ] || fail "greedy: not 20 tokens: $g1"
t0=$(gen $R --tokens 1,2,3 --max-new 20 --temperature 0); [ "$t0" = "$g1" ] || fail "temperature 0 is not greedy"
p0=$(gen $R --tokens 1,2,3 --max-new 20 --top-p 1e-9 --seed 9); [ "$p0" = "$g1" ] || fail "top-p -> 0 is not greedy"
s1=$(gen $R --tokens 1,2,3 --max-new 20 --seed 5); s2=$(gen $R --tokens 1,2,3 --max-new 20 --seed 5)
[ "$s1" = "$s2" ] || fail "top-p seed 5 differs: $s1 / $s2"
s3=$(gen $R --tokens 1,2,3 --max-new 20 --seed 6)
[ "$s1" != "$s3" ] || fail "seeds 5 and 6 gave the same sample: $s1"
s4=$(gen $R --tokens 1,2,3 --max-new 20 --seed 5 --top-p 0.5 --temperature 0.7)
s5=$(gen $R --tokens 1,2,3 --max-new 20 --seed 5 --top-p 0.5 --temperature 0.7)
[ "$s4" = "$s5" ] || fail "top-p 0.5 seed 5 differs"
first=${g1%%,*}
e=$(gen $R --tokens 1,2,3 --max-new 20 --greedy --eos $first)
[ "$e" = "$first" ] || fail "--eos $first: got $e"
grep -q "stopped at EOS" $TMP/gen.err || fail "no EOS note"
echo "greedy: $g1"
echo "top-p seed 5: $s1"

# text prompt with dolma2 (vocab 100278 model)
# The dolma2 tokenizer ships in the repository (tokenizers/): always there.
TOK=tokenizers/dolma2-tokenizer.json
[ -f "$TOK" ] || fail "$TOK missing from the repository"
{
  RV=$TMP/runv
  train $RV model.vocab_size=100278 train.max_steps=2 || fail "train vocab 100278: $(tail -5 $RV.log)"
  a=$(gen $RV --prompt "The capital of France is" --max-new 12 --seed 1)
  b=$(gen $RV --prompt "The capital of France is" --max-new 12 --seed 1)
  [ "$a" = "$b" ] || fail "text sampling not deterministic"
  grep -q "5 prompt tokens" $TMP/gen.err || fail "prompt tokenization: $(cat $TMP/gen.err)"
  gen $RV --prompt "Hello<|endoftext|>world" --max-new 4 --greedy >/dev/null
  grep -q "3 prompt tokens" $TMP/gen.err || fail "special tokens in prompt: $(cat $TMP/gen.err)"
  echo "text sample: $a"
  "$OLMO" export-hf $RV $TMP/hfv 2>/dev/null || fail "export vocab 100278"
  cmp $TOK $TMP/hfv/tokenizer.json || fail "tokenizer.json not copied byte for byte"
  $PY - $TMP/hfv <<'PY' || fail "dolma2 export config"
import json, sys
c = json.load(open(f'{sys.argv[1]}/config.json')); t = json.load(open(f'{sys.argv[1]}/tokenizer_config.json'))
assert c['vocab_size'] == 100352 and c['eos_token_id'] == 100257 and c['pad_token_id'] == 100277 and c['bos_token_id'] is None, c
assert t['eos_token'] == '<|endoftext|>' and t['pad_token'] == '<|pad|>', t
PY
}

# bad arguments: exit 2
bad() { local what=$1; shift; set +e; "$OLMO" generate "$@" >/dev/null 2>$TMP/bad.err; local rc=$?; set -e
        [ $rc = 2 ] || fail "$what: exit $rc, want 2: $(cat $TMP/bad.err)"; }
bad "top-p 0" $R --tokens 1 --top-p 0
bad "top-p 2" $R --tokens 1 --top-p 2
bad "negative temperature" $R --tokens 1 --temperature -1
bad "both prompts" $R --tokens 1 --prompt hi
bad "no prompt" $R
bad "token outside vocab" $R --tokens 1,1000
bad "bad token list" $R --tokens 1,x
bad "unknown option" $R --tokens 1 --frobnicate
bad "missing ckpt" $TMP/nope --tokens 1
bad "no args"
echo "test_generate: all checks passed"
