#!/usr/bin/python3
"""test_eval_tasks.py: `olmo eval` against the PyTorch reference (tests/ref/olmo_ref.py).

A tiny model (olmo3-tiny shape with the dolma2 vocabulary, weights std ~0.1 so the
distributions are far from uniform) is written as safetensors; a multiple-choice task
(few-shot, empty context, left truncation, non-ASCII choices, one choice made
overwhelmingly likely under the raw sum) and a perplexity set of short documents with
known UTF-8 byte counts are scored by `olmo eval --json --details` and recomputed here in
float64 from the same token ids (tokenized with `olmo tokenize`): per-choice
log-likelihoods, acc, len_norm, bpb, set CE/PPL/bpb must agree.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
sys.path.insert(0, HERE)
import olmo_ref as ref  # noqa: E402
from lib import tiny_dolma2_checkpoint  # noqa: E402

REPO = os.path.dirname(HERE)
OLMO = os.environ.get("OLMO_BIN", os.path.join(REPO, "build", "olmo"))
EOS = 100257
SEQ = 24
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL", msg)


def tokenize_all(texts):
    """Token ids of each text (encoded on its own, no specials), via olmo tokenize."""
    out = {}
    single = [t for t in texts if "\n" in t or t == ""]
    lines = [t for t in dict.fromkeys(texts) if t not in single]
    if lines:
        r = subprocess.run([OLMO, "tokenize", "--lines"], input="\n".join(lines).encode() + b"\n",
                           capture_output=True, check=True, cwd=REPO)
        rows = r.stdout.decode().split("\n")
        for t, row in zip(lines, rows):
            out[t] = [int(x) for x in row.split()]
    for t in dict.fromkeys(single):
        if t == "":
            out[t] = []
            continue
        r = subprocess.run([OLMO, "tokenize"], input=t.encode(), capture_output=True, check=True, cwd=REPO)
        out[t] = [int(x) for x in r.stdout.decode().split()]
    return out


def main():
    d = tempfile.mkdtemp(prefix="test_eval_tasks_")
    cfg, P64, ckpt = tiny_dolma2_checkpoint(d, SEQ, seed=3)

    long_ctx = " ".join(["the quick brown fox jumps over the lazy dog"] * 4)
    fs = [{"context": "Q: 2 + 2 =", "choices": [" 3", " 4"], "gold": 1},
          {"context": "Q: 1 + 5 =", "choices": [" 6", " 7"], "gold": 0}]
    examples = [
        {"id": "a", "context": "The capital of France is", "choices": [" Paris", " Rome", " a city in Italy"], "gold": 0},
        {"id": "b", "context": "Q: 3 + 4 =", "choices": [" 7", " 8", " 12"], "gold": 0, "fewshot": fs},
        {"id": "c", "context": "", "choices": ["Hello", "Goodbye world"], "gold": 1},
        {"id": "d", "context": long_ctx, "choices": [" cat", " dog"], "gold": 1},
        {"id": "e", "context": "Café au", "choices": [" lait", " lait crème brûlée", " thé"], "gold": 2},
        # one choice overwhelmingly likely under the raw sum: a single token against long strings
        {"id": "f", "context": "Answer:", "choices": [" zebra crossing quantum entanglement of many words here",
                                                    " yes", " the mitochondria is the powerhouse of the cell"],
         "gold": 1},
        {"id": "g", "context": "x", "choices": [" " + " ".join(["w%d" % i for i in range(30)]), " y"], "gold": 0},
    ]
    task_path = os.path.join(d, "mc.jsonl")
    with open(task_path, "w") as f:
        for x in examples:
            f.write(json.dumps(x, ensure_ascii=False) + "\n")
        f.write("\n")  # blank lines are skipped

    docs = ["A short document.", "Ünïcödé text — with dashes.", "one", "Numbers 12345 and 678."]
    texts = [x["context"] for x in examples] + [c for x in examples for c in x["choices"]] + docs
    prefixes = {}
    for x in examples:
        p = "".join(e["context"] + e["choices"][e["gold"]] + "\n\n" for e in x.get("fewshot", []))
        prefixes[x["id"]] = p + x["context"]
        texts.append(p + x["context"])
    ids = tokenize_all(texts)

    set_tokens = []
    for t in docs:
        assert len(ids[t]) + 1 <= SEQ + 1, "documents must fit seq_len for exact byte counts"
        set_tokens += ids[t] + [EOS]
    set_path = os.path.join(d, "docs.heldout.npy")
    np.array(set_tokens, dtype="<u4").tofile(set_path)

    with open(os.path.join(d, "r.yml"), "w") as f:
        f.write("model: {preset: olmo3-tiny, vocab_size: 100278}\n"
                f"train: {{seq_len: {SEQ}, global_batch: 3, micro_batch: 3, max_steps: 1}}\n")
    det = os.path.join(d, "details.jsonl")
    r = subprocess.run([OLMO, "eval", ckpt, "--recipe", os.path.join(d, "r.yml"), "--task", "mc=" + task_path,
                        "--set", set_path, "--json", "--details", det], capture_output=True, cwd=REPO)
    sys.stderr.write(r.stderr.decode())
    if r.returncode != 0:
        print("olmo eval failed", r.returncode)
        return 1
    got = json.loads(r.stdout)
    details = [json.loads(line) for line in open(det)]

    def logp_of(seq, first):
        """Sum of log p(seq[t]) for t in [first, n) given seq[:t], float64 reference."""
        with torch.no_grad():
            logits = ref.forward(P64, cfg, torch.tensor([seq[:-1]], dtype=torch.long))
            lp = torch.log_softmax(logits[0], dim=-1)
        return sum(float(lp[t - 1, seq[t]]) for t in range(first, len(seq)))

    acc = norm = bpb = 0.0
    for i, x in enumerate(examples):
        ctx = ids[prefixes[x["id"]]] or [EOS]
        S = []
        for c in x["choices"]:
            full = ctx + ids[c]
            drop = max(0, len(full) - 1 - SEQ)
            S.append(logp_of(full[drop:], max(1, len(ctx) - drop)))
        cl = details[i]["logp"]
        for j, (a, b) in enumerate(zip(S, cl)):
            check(abs(a - b) <= 1e-3 + 1e-4 * abs(a), f"example {x['id']} choice {j}: logp C {b:.6f} ref {a:.6f}")
        pred = max(range(len(S)), key=lambda j: (S[j], -j))
        normed = [S[j] / len(c) for j, c in enumerate(x["choices"])]
        pred_n = max(range(len(S)), key=lambda j: (normed[j], -j))
        check(pred == details[i]["pred"], f"example {x['id']}: pred C {details[i]['pred']} ref {pred}")
        check(pred_n == details[i]["pred_norm"], f"example {x['id']}: pred_norm C {details[i]['pred_norm']} ref {pred_n}")
        acc += pred == x["gold"]
        norm += pred_n == x["gold"]
        bpb += -S[x["gold"]] / math.log(2) / len(x["choices"][x["gold"]].encode("utf-8"))
        print(f"example {x['id']}: logp {[round(s, 4) for s in S]} pred {pred} pred_norm {pred_n} gold {x['gold']}")
    n = len(examples)
    check(details[5]["pred"] == 1, "example f: the single-token choice should win the raw sum")
    check(got["task/mc/examples"] == n, "examples")
    check(abs(got["task/mc/acc"] - acc / n) < 1e-12, f"acc C {got['task/mc/acc']} ref {acc / n}")
    check(abs(got["task/mc/len_norm"] - norm / n) < 1e-12, f"len_norm C {got['task/mc/len_norm']} ref {norm / n}")
    check(abs(got["task/mc/bpb"] - bpb / n) <= 1e-4 * bpb / n, f"bpb C {got['task/mc/bpb']} ref {bpb / n}")

    # Perplexity set: documents fit seq_len, so the predicted bytes are the text's bytes.
    ce = 0.0
    ntok = 0
    for t in docs:
        seq = ids[t] + [EOS]
        ce -= logp_of(seq, 1)
        ntok += len(seq) - 1
    nbytes = sum(len(t.encode("utf-8")) for t in docs)
    # the first token of each document is not predicted: its bytes do not count
    first_bytes = 0
    for t in docs:
        r2 = subprocess.run([OLMO, "tokenize", "--decode"], input=str(ids[t][0]).encode(), capture_output=True,
                            check=True, cwd=REPO)
        first_bytes += len(r2.stdout)
    nbytes -= first_bytes
    check(got["eval/docs/tokens"] == ntok, f"set tokens C {got['eval/docs/tokens']} ref {ntok}")
    check(got["eval/docs/bytes"] == nbytes, f"set bytes C {got['eval/docs/bytes']} ref {nbytes}")
    check(abs(got["eval/docs/ce"] - ce / ntok) <= 1e-5 * ce / ntok, f"set ce C {got['eval/docs/ce']} ref {ce / ntok}")
    check(abs(got["eval/docs/bpb"] - ce / math.log(2) / nbytes) <= 1e-5 * ce / nbytes, "set bpb")
    check(abs(got["eval/docs/ppl"] - math.exp(got["eval/docs/ce"])) < 1e-9 * got["eval/docs/ppl"], "ppl = exp(ce)")
    print(json.dumps(got, indent=1))
    shutil.rmtree(d)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("test_eval_tasks: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
