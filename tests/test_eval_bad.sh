#!/usr/bin/env bash
# test_eval_bad.sh: every bad input to `olmo eval` exits 2 with a message naming the file
# (and line, for task files): malformed task lines, gold out of range, no choices, empty
# choice, bad few-shot, invalid UTF-8, set files with no complete document or nothing to
# predict, ids outside the vocabulary, a truncated token file, missing files, a bad
# checkpoint, nothing to evaluate, bad eval.* values (eval.device included).
set -u
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-build/olmo}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0

# A recipe whose tasks tokenize with dolma2 (vocab 100278) and one with vocab 1000 for sets.
printf 'model: {preset: olmo3-tiny, vocab_size: 100278}\ntrain: {seq_len: 16, global_batch: 1, micro_batch: 1, max_steps: 1}\n' >"$T/big.yml"
printf 'model: {preset: olmo3-tiny}\ntrain: {seq_len: 16, global_batch: 1, micro_batch: 1, max_steps: 1}\neval: {eos_id: 999}\n' >"$T/tiny.yml"
echo "not a checkpoint" >"$T/ckpt.safetensors"
python3 - "$T" <<'PY'
import struct, sys
d = sys.argv[1]
def w(name, ids):
    open(f"{d}/{name}", "wb").write(struct.pack(f"<{len(ids)}I", *ids))
w("noeos.npy", [1, 2, 3, 4])
w("onlyeos.npy", [999, 999, 999])
w("bigid.npy", [1, 2, 5000, 999])
w("good.npy", [1, 2, 3, 999, 4, 5, 999])
open(f"{d}/trunc.npy", "wb").write(b"\x01\x00\x00\x00\x02\x00")
open(f"{d}/empty.npy", "wb").write(b"")
ok = '{"context": "a", "choices": [" b", " c"], "gold": 0}\n'
cases = {
    "malformed": ok + '{"context": "a", "choices": [" b"], "gold": 0\n',
    "gold_range": ok + ok + '{"context": "a", "choices": [" b", " c"], "gold": 2}\n',
    "gold_neg": '{"context": "a", "choices": [" b"], "gold": -1}\n',
    "gold_float": '{"context": "a", "choices": [" b"], "gold": 0.5}\n',
    "no_choices": ok + '{"context": "a", "choices": [], "gold": 0}\n',
    "choices_type": '{"context": "a", "choices": " b", "gold": 0}\n',
    "empty_choice": '{"context": "a", "choices": ["", " c"], "gold": 1}\n',
    "no_context": '{"choices": [" b"], "gold": 0}\n',
    "fewshot_gold": '{"context": "a", "choices": [" b"], "gold": 0, "fewshot": [{"context": "x", "choices": [" y"], "gold": 3}]}\n',
    "not_object": '[1, 2]\n',
    "no_examples": "\n\n",
}
for k, v in cases.items():
    open(f"{d}/{k}.jsonl", "w").write(v)
open(f"{d}/bad_utf8.jsonl", "wb").write(b'{"context": "a\xff", "choices": [" b"], "gold": 0}\n')
open(f"{d}/ok.jsonl", "w").write(ok)
open(f"{d}/highid.jsonl", "w").write(ok + '{"context": "a", "choices": [" zebrafish"], "gold": 0}\n')
PY

# expect NAME PATTERN -- ARGS...: exit status 2 and stderr matching PATTERN (grep -E)
expect() {
  local name=$1 pat=$2; shift 3
  "$OLMO" eval "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ $rc -ne 2 ] || ! grep -Eq -- "$pat" "$T/err"; then
    echo "FAIL $name: exit $rc (want 2), stderr:"; sed 's/^/  | /' "$T/err"; fail=1
  elif [ -s "$T/out" ]; then
    echo "FAIL $name: wrote to stdout"; fail=1
  else
    echo "ok   $name: $(head -1 "$T/err")"
  fi
}
C="$T/ckpt.safetensors"
B=(--recipe "$T/big.yml")
S=(--recipe "$T/tiny.yml")
expect malformed     "$T/malformed.jsonl:2: malformed JSON" -- "$C" "${B[@]}" --task "$T/malformed.jsonl"
expect gold_range    "$T/gold_range.jsonl:3: .*gold.* 2 is out of range \(2 choices\)" -- "$C" "${B[@]}" --task "$T/gold_range.jsonl"
expect gold_neg      "$T/gold_neg.jsonl:1: .*out of range" -- "$C" "${B[@]}" --task "$T/gold_neg.jsonl"
expect gold_float    "$T/gold_float.jsonl:1: .*integer" -- "$C" "${B[@]}" --task "$T/gold_float.jsonl"
expect no_choices    "$T/no_choices.jsonl:2: .*choices.* is empty" -- "$C" "${B[@]}" --task "$T/no_choices.jsonl"
expect choices_type  "$T/choices_type.jsonl:1: .*list of strings" -- "$C" "${B[@]}" --task "$T/choices_type.jsonl"
expect empty_choice  "$T/empty_choice.jsonl:1: .*choice 0 is empty" -- "$C" "${B[@]}" --task "$T/empty_choice.jsonl"
expect no_context    "$T/no_context.jsonl:1: .*context" -- "$C" "${B[@]}" --task "$T/no_context.jsonl"
expect fewshot_gold  "$T/fewshot_gold.jsonl:1: fewshot 0: .*out of range" -- "$C" "${B[@]}" --task "$T/fewshot_gold.jsonl"
expect not_object    "$T/not_object.jsonl:1: .*object" -- "$C" "${B[@]}" --task "$T/not_object.jsonl"
expect no_examples   "$T/no_examples.jsonl: no examples" -- "$C" "${B[@]}" --task "$T/no_examples.jsonl"
expect bad_utf8      "$T/bad_utf8.jsonl:1: context: invalid UTF-8" -- "$C" "${B[@]}" --task "$T/bad_utf8.jsonl"
expect task_vocab    "$T/highid.jsonl:2: choice 0: token id [0-9]+ >= model.vocab_size 1000" -- "$C" "${S[@]}" --task "$T/highid.jsonl"
expect task_missing  "$T/nope.jsonl" -- "$C" "${B[@]}" --task "$T/nope.jsonl"
expect set_noeos     "$T/noeos.npy: no complete document" -- "$C" "${S[@]}" --set "$T/noeos.npy"
expect set_empty     "$T/empty.npy: no complete document" -- "$C" "${S[@]}" --set "$T/empty.npy"
expect set_onlyeos   "$T/onlyeos.npy: .*nothing to predict" -- "$C" "${S[@]}" --set "$T/onlyeos.npy"
expect set_bigid     "$T/bigid.npy: token 5000 at index 2" -- "$C" "${S[@]}" --set "$T/bigid.npy"
expect set_trunc     "$T/trunc.npy: 6 bytes" -- "$C" "${S[@]}" --set "$T/trunc.npy"
expect set_missing   "$T/nope.npy" -- "$C" "${S[@]}" --set "x=$T/nope.npy"
expect set_dup       "name 'good' is used twice" -- "$C" "${S[@]}" --set "$T/good.npy" --set "good=$T/good.npy"
expect ckpt_missing  "$T/nockpt" -- "$T/nockpt" "${S[@]}" --set "$T/good.npy"
expect ckpt_dir      "has no model.safetensors" -- "$T" "${S[@]}" --set "$T/good.npy"
expect ckpt_bad      "$C" -- "$C" "${S[@]}" --set "$T/good.npy"
expect nothing       "nothing to evaluate" -- "$C" "${S[@]}"
expect no_recipe     "is not a checkpoint: it has no safetensors header" -- "$C" --set "$T/good.npy"   # (a real model file without a shape: "give --recipe")
expect bad_interval  "eval.interval must be >= 0" -- "$C" "${S[@]}" --set "$T/good.npy" eval.interval=-1
expect bad_device    "eval.device must be auto or cpu, got 'gpu'" -- "$C" "${S[@]}" --set "$T/good.npy" eval.device=gpu
expect bad_key       "eval.max_doc.*eval.max_docs" -- "$C" "${S[@]}" --set "$T/good.npy" eval.max_doc=3
exit $fail
