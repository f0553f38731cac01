#!/usr/bin/env bash
# test_olmes_bad.sh: every bad input to `olmo eval --downstream` exits 2 before anything is
# evaluated or written (no stdout, no --details file), with a message naming the file (and
# line for request lines): malformed JSON, a blank line, each missing or mistyped request
# field, an empty continuation, a context too short for the continuation, a fast_mc
# continuation of several tokens, a malformed config.json; an unknown label (with the
# nearest ones), no eval.downstream_dir, a missing task folder (the path and how to get the
# files), a negative max_docs; MMLU's Arrow files (written by tests/arrow_write.mjs, then
# damaged): a missing state.json, a state.json without "_data_files" or naming a missing
# file, a truncated stream, a file-format file cut short, bytes that are not Arrow, a
# renamed column, an answer outside the choices.
set -u
cd "$(dirname "$0")/.."
OLMO=${OLMO_BIN:-build/olmo}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
printf 'model: {preset: olmo3-tiny, vocab_size: 100278}\ntrain: {seq_len: 8, global_batch: 1, micro_batch: 1, max_steps: 1}\n' >"$T/r.yml"
echo "not a checkpoint" >"$T/ckpt.safetensors"

# task DIR LABEL_FOLDER LINES...: a requests.jsonl.gz (and a good config.json) under DIR
python3 - "$T" <<'PY'
import gzip, json, os, sys
T = sys.argv[1]
def req(**kw):
    r = {"doc_id": 0, "doc": {}, "request_type": "loglikelihood",
         "request": {"context": "Question: a b c", "continuation": " yes"}, "idx": 0, "label": 0}
    r.update(kw)
    return json.dumps(r)
ok = req()
cases = {   # name: (folder under oe_eval_tasks, lines)
    "good": ("basic_skills_arithmetic/rc_5shot", [ok]),
    "malformed": ("basic_skills_arithmetic/rc_5shot", [ok, ok, ok[:-1]]),
    "blank": ("basic_skills_arithmetic/rc_5shot", [ok, ""]),
    "no_doc": ("basic_skills_arithmetic/rc_5shot", [ok, json.dumps({k: v for k, v in json.loads(ok).items() if k != "doc"})]),
    "doc_id": ("basic_skills_arithmetic/rc_5shot", [req(doc_id="3")]),
    "reqtype": ("basic_skills_arithmetic/rc_5shot", [ok, req(request_type="generate_until")]),
    "no_cont": ("basic_skills_arithmetic/rc_5shot", [req(request={"context": "a"})]),
    "idx": ("basic_skills_arithmetic/rc_5shot", [req(idx=-1)]),
    "label": ("basic_skills_arithmetic/rc_5shot", [req(label="A")]),
    "no_label": ("hellaswag/rc_5shot", [ok, json.dumps({k: v for k, v in json.loads(ok).items() if k != "label"})]),
    "empty_cont": ("basic_skills_arithmetic/rc_5shot", [req(request={"context": "a", "continuation": ""})]),
    "empty_ctx": ("basic_skills_arithmetic/rc_5shot", [req(request={"context": "", "continuation": " yes"})]),
    "label_range": ("basic_skills_arithmetic/rc_5shot", [req(label=3)]),
    "fast_multi": ("copycolors/10way", [req(request={"context": "Pick:", "continuation": " red"}),
                                        req(idx=1, request={"context": "Pick:", "continuation": " crimson lake"})]),
}
for name, (folder, lines) in cases.items():
    d = os.path.join(T, name, "oe_eval_tasks", folder)
    os.makedirs(d)
    with gzip.open(os.path.join(d, "requests.jsonl.gz"), "wt") as f:
        f.write("\n".join(lines) + "\n")
    open(os.path.join(d, "config.json"), "w").write("{}")
# MMLU: a whole humanities category (every subject's dev and test split), one row each
subjects = ["high_school_european_history", "high_school_us_history", "high_school_world_history", "prehistory",
            "formal_logic", "logical_fallacies", "moral_disputes", "moral_scenarios", "philosophy",
            "world_religions", "international_law", "jurisprudence", "professional_law"]
spec = []
for sub in subjects:
    for split in ("dev", "test"):
        d = os.path.join(T, "mmlu", "hf_datasets", "hails", "mmlu_no_train", sub, split)
        os.makedirs(d)
        json.dump({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}, open(os.path.join(d, "state.json"), "w"))
        row = {"question": "Which?", "subject": sub, "choices": ["one", "two", "three"], "answer": 7 if sub == "jurisprudence" and split == "test" else 1}
        spec.append({"path": os.path.join(d, "data-00000-of-00001.arrow"), "format": "file" if sub == "philosophy" else "stream", "batches": [[row]]})
json.dump(spec, open(os.path.join(T, "spec.json"), "w"))
d = os.path.join(T, "badcfg", "oe_eval_tasks", "basic_skills_arithmetic", "rc_5shot")
os.makedirs(d)
open(os.path.join(d, "requests.jsonl"), "w").write(ok + "\n")
open(os.path.join(d, "config.json"), "w").write("{not json")
PY

# expect NAME PATTERN -- ARGS...: exit 2, stderr matching PATTERN, nothing on stdout, no details file
expect() {
  local name=$1 pat=$2; shift 3
  rm -f "$T/det.jsonl"
  "$OLMO" eval "$T/ckpt.safetensors" --recipe "$T/r.yml" --details "$T/det.jsonl" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ $rc -ne 2 ] || ! grep -Eq -- "$pat" "$T/err"; then
    echo "FAIL $name: exit $rc (want 2), stderr:"; sed 's/^/  | /' "$T/err"; fail=1
  elif [ -s "$T/out" ] || [ -e "$T/det.jsonl" ]; then
    echo "FAIL $name: wrote output"; fail=1
  else
    echo "ok   $name: $(head -1 "$T/err")"
  fi
}
A=basic_skills_arithmetic_rc_5shot
F="oe_eval_tasks/basic_skills_arithmetic/rc_5shot/requests.jsonl.gz"
expect malformed   "$T/malformed/$F:3: malformed JSON" -- --downstream $A --downstream-dir "$T/malformed"
expect blank       "$T/blank/$F:2: malformed JSON" -- --downstream $A --downstream-dir "$T/blank"
expect no_doc      "$T/no_doc/$F:2: no \"doc\" field" -- --downstream $A --downstream-dir "$T/no_doc"
expect doc_id      "$T/doc_id/$F:1: \"doc_id\" must be an integer" -- --downstream $A --downstream-dir "$T/doc_id"
expect reqtype     "$T/reqtype/$F:2: \"request_type\" must be" -- --downstream $A --downstream-dir "$T/reqtype"
expect no_cont     "$T/no_cont/$F:1: \"request\" must be an object" -- --downstream $A --downstream-dir "$T/no_cont"
expect idx         "$T/idx/$F:1: \"idx\" must be an integer" -- --downstream $A --downstream-dir "$T/idx"
expect label       "$T/label/$F:1: \"label\" must be an integer" -- --downstream $A --downstream-dir "$T/label"
expect no_label    "$T/no_label/oe_eval_tasks/hellaswag/rc_5shot/requests.jsonl.gz:2: no \"label\" field" -- --downstream hellaswag_bpb_5shot --downstream-dir "$T/no_label"
expect empty_cont  "$T/empty_cont/$F:1: request.continuation is empty" -- --downstream $A --downstream-dir "$T/empty_cont"
expect empty_ctx   "$T/empty_ctx/$F:1: empty context" -- --downstream $A --downstream-dir "$T/empty_ctx"
expect label_range "downstream task $A: doc_id 0: label 3 but 1 continuations" -- --downstream $A --downstream-dir "$T/label_range"
expect fast_multi  "$T/fast_multi/oe_eval_tasks/copycolors/10way/requests.jsonl.gz: doc_id 0 idx 1: fast_mc needs single-token" -- --downstream copycolors_10way_fast --downstream-dir "$T/fast_multi"
expect bad_config  "$T/badcfg/oe_eval_tasks/basic_skills_arithmetic/rc_5shot/config.json: malformed JSON" -- --downstream $A --downstream-dir "$T/badcfg"
expect unknown     "unknown label 'arc_easy_mc_5shot_fast'; nearest: arc_easy_test_mc_5shot_fast" -- --downstream arc_easy_mc_5shot_fast --downstream-dir "$T/malformed"
expect no_dir      "set eval.downstream_dir \(or --downstream-dir\)" -- --downstream $A
expect missing     "no $T/malformed/oe_eval_tasks/copycolors/10way/requests.jsonl.gz nor requests.jsonl: .*OLMo-in-loop-evals" -- --downstream copycolors_10way_fast --downstream-dir "$T/malformed"
expect max_docs    "eval.downstream_max_docs must be >= 0" -- --downstream $A --downstream-dir "$T/malformed" eval.downstream_max_docs=-1
expect twice       "'$A' is listed twice" -- --downstream $A,$A --downstream-dir "$T/good"

# MMLU: each case a copy of the category with one thing damaged
node tests/arrow_write.mjs "$T/spec.json" || { echo "FAIL arrow_write.mjs (npm ci installs apache-arrow)"; exit 1; }
M=hf_datasets/hails/mmlu_no_train
mcase() { rm -rf "$T/m_$1"; cp -r "$T/mmlu" "$T/m_$1"; }
mcase answer    # the jurisprudence test row's answer 7 of 3 choices
mcase no_state; rm "$T/m_no_state/$M/prehistory/test/state.json"
mcase bad_state; echo '{"_split": "test"}' >"$T/m_bad_state/$M/prehistory/test/state.json"
mcase gone; echo '{"_data_files": [{"filename": "data-00001-of-00002.arrow"}]}' >"$T/m_gone/$M/prehistory/test/state.json"
P=prehistory/test/data-00000-of-00001.arrow
mcase trunc; head -c 300 "$T/mmlu/$M/$P" >"$T/m_trunc/$M/$P"
mcase filecut; head -c 400 "$T/mmlu/$M/philosophy/test/data-00000-of-00001.arrow" >"$T/m_filecut/$M/philosophy/test/data-00000-of-00001.arrow"
mcase garbage; printf 'question,subject,choices,answer\nWhich?,prehistory,"one two",1\n' >"$T/m_garbage/$M/$P"
mcase column; python3 -c "import sys; p=sys.argv[1]; b=open(p,'rb').read(); open(p,'wb').write(b.replace(b'answer', b'answez'))" "$T/m_column/$M/$P"
H=mmlu_humanities_test_bpb_5shot
expect mmlu_answer   "$T/m_answer/$M/jurisprudence/test/data-00000-of-00001.arrow: row 0: answer 7 but 3 choices" -- --downstream $H --downstream-dir "$T/m_answer"
expect mmlu_no_state "MMLU: no $T/m_no_state/$M/prehistory/test/state.json: .*OLMo-in-loop-evals" -- --downstream $H --downstream-dir "$T/m_no_state"
expect mmlu_state    "$T/m_bad_state/$M/prehistory/test/state.json: expected JSON with \"_data_files\"" -- --downstream $H --downstream-dir "$T/m_bad_state"
expect mmlu_gone     "state.json names $T/m_gone/$M/prehistory/test/data-00001-of-00002.arrow, which does not exist" -- --downstream $H --downstream-dir "$T/m_gone"
expect mmlu_trunc    "$T/m_trunc/$M/$P: malformed Arrow IPC data: .*overruns" -- --downstream $H --downstream-dir "$T/m_trunc"
expect mmlu_filecut  "$T/m_filecut/$M/philosophy/test/data-00000-of-00001.arrow: malformed Arrow IPC data: starts with ARROW1 but does not end with it" -- --downstream $H --downstream-dir "$T/m_filecut"
expect mmlu_garbage  "$T/m_garbage/$M/$P: malformed Arrow IPC data" -- --downstream $H --downstream-dir "$T/m_garbage"
expect mmlu_column   "$T/m_column/$M/$P: MMLU needs a column 'answer' of integers" -- --downstream mmlu_humanities_test_mc_5shot_fast --downstream-dir "$T/m_column"
[ $fail = 0 ] && echo "test_olmes_bad: ok"
exit $fail
