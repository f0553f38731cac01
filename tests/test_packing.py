#!/usr/bin/python3
# test_packing.py: data.packing: packed (src/data/packing.c, src/data/pyrandom.c) against the
# oracle tests/ref/packing_oracle.py, OLMo-core's packing transcribed (numpy + Python's
# random), on synthetic token files. Exact (integers, sha256 of the ids):
#  1. pyrandom: random.Random(seed).shuffle and getrandbits(k) against CPython itself.
#  2. Files with ties between document lengths, long documents, tokens after a file's last
#     EOS and an empty file, truncate and fragment, groups of 4 permuted by seed 123:
#     `olmo data order --describe N --json` (every instance of the served order: index,
#     group, sha256 of the padded ids, padding, doc lengths) and `olmo data info --json`
#     (file permutation, documents whole / cut, tokens dropped, padding) equal the oracle
#     under olmo.c's tie rule (a stable sort); the oracle under numpy's default sort, as
#     OLMo-core calls it, gives the same bins' length profiles, padding, doc lengths,
#     groups and served order (ties only swap documents of equal length).
#  3. Files without ties: the literal transcription (numpy's default sort) and olmo.c agree
#     on everything, sha256 included.
#  4. Bad values: a clear error naming the key, exit 2.
#  5. Training on packed instances is bitwise the same at 1 and 2 threads and across a resume.
import json, os, random, subprocess, sys
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ref"))
import lib  # noqa: E402
import packing_oracle as po  # noqa: E402
from lib import ROOT, check, finish  # noqa: E402

TMP = lib.tmpdir("packing_")
EOS, PAD = 998, 999
TOOL = os.path.join(os.environ.get("OLMO_BUILD", os.path.join(ROOT, "build")), "tests", "tool_pyrandom")

# 1. Python's random, bit for bit
for seed in [0, 1, 123, 34521, 2**32 - 1, 2**32, 2**40 + 7]:
    for n in [0, 1, 2, 3, 8, 100, 1017]:
        want = list(range(n))
        random.Random(seed).shuffle(want)
        got = subprocess.run([TOOL, "shuffle", str(seed), str(n)], capture_output=True, text=True, check=True).stdout
        check([int(x) for x in got.split()] == want, f"shuffle seed={seed} n={n}")
for k in [1, 5, 31, 32, 33, 63, 64]:
    r = random.Random(123)
    want = [r.getrandbits(k) for _ in range(20)]
    got = subprocess.run([TOOL, "bits", "123", str(k), "20"], capture_output=True, text=True, check=True).stdout
    check([int(x) for x in got.split()] == want, f"getrandbits({k})")


def write_files(name, docs_per_file, tails, rng):
    """Token files of the given document lengths (each ends with EOS), plus tail tokens."""
    paths = []
    for i, (docs, tail) in enumerate(zip(docs_per_file, tails)):
        parts = []
        for L in docs:
            parts.append(rng.integers(0, EOS, L - 1))
            parts.append([EOS])
        parts.append(rng.integers(0, EOS, tail))
        p = os.path.join(TMP, f"{name}-{i:02d}.npy")
        np.concatenate([np.asarray(x, dtype=np.int64) for x in parts] or [np.zeros(0)]).astype("<u4").tofile(p)
        paths.append(p)
    return paths


def recipe(name, paths, T, extra=""):
    p = os.path.join(TMP, name + ".yml")
    with open(p, "w") as f:
        f.write("model: {preset: olmo3-tiny}\n"
                f"train: {{seq_len: {T}, global_batch: 2, micro_batch: 1, max_steps: 2, run_dir: {TMP}/run}}\n"
                f"data:\n  paths: [{', '.join(paths)}]\n  packing: packed\n  eos_id: {EOS}\n  pad_id: {PAD}\n"
                f"  seed: 34521\n{extra}")
    return p


def c_describe(rec, n, *args):
    p = lib.olmo("data", "order", rec, "--describe", n, "--json", *args)
    check(p.returncode == 0, f"describe {rec} {args}: exit {p.returncode}: {p.stderr}")
    return json.loads(p.stdout) if p.returncode == 0 else []


def c_info(rec):
    p = lib.olmo("data", "info", rec, "--json")
    check(p.returncode == 0, f"info {rec}: exit {p.returncode}: {p.stderr}")
    return json.loads(p.stdout)["packing"] if p.returncode == 0 else {}


def doc_stats(paths, T, strategy):
    whole = long = dropped = 0
    for p in paths:
        a = np.fromfile(p, dtype="<u4")
        ends = list((a == EOS).nonzero()[0] + 1)
        start = 0
        for e in ends:
            L = e - start
            whole += L <= T
            long += L > T
            dropped += (L - T) if (L > T and strategy == "truncate") else 0
            start = e
        dropped += len(a) - start
    return whole, long, dropped


# 2. ties, long documents, tails, an empty file
rng = np.random.default_rng(7)
T = 64
lengths = [1, 2, 3, 5, 8, 13, 21, 21, 40, 63, 64, 65, 100, 200]
docs = [[int(x) for x in rng.choice(lengths, size=int(rng.integers(3, 25)))] for _ in range(11)]
docs[4] = []                                    # an empty file
tails = [int(rng.integers(0, 30)) if i % 3 else 0 for i in range(11)]
tails[4] = 0                                    # (empty: no document, no tail)
paths = write_files("ties", docs, tails, rng)
paths_ties = list(paths)
for strategy in ["truncate", "fragment"]:
    rec = recipe(f"ties-{strategy}", paths, T, f"  long_doc_strategy: {strategy}\n  source_group_size: 4\n"
                                                 "  source_permutation_seed: 123\n")
    stable = po.build(paths, T, EOS, PAD, strategy, 4, 123, "stable")
    default = po.build(paths, T, EOS, PAD, strategy, 4, 123, None)
    N = len(stable["instances"])
    for epoch in [1, 2]:
        want = po.describe(stable, 34521, epoch)
        got = c_describe(rec, N + 5, "--epoch", epoch)
        check(got == want, f"{strategy} epoch {epoch}: describe differs from the oracle "
                           f"(first difference at {next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))})")
    prof = lambda ds: [(x["group"], x["bin_lengths"], x["n_pad"], x["doc_lengths"]) for x in ds["instances"]]
    check(prof(stable) == prof(default), f"{strategy}: numpy's default sort changes more than the tie order")
    dd, ds_ = po.describe(default, 34521, 1), po.describe(stable, 34521, 1)
    check([(a["index"], a["group"], a["n_pad"], a["doc_lengths"]) for a in dd] ==
          [(a["index"], a["group"], a["n_pad"], a["doc_lengths"]) for a in ds_], f"{strategy}: served order")
    info = c_info(rec)
    whole, long, dropped = doc_stats(paths, T, strategy)
    check(info.get("file_order") == stable["order"], f"{strategy}: file order {info.get('file_order')} vs {stable['order']}")
    check(info.get("groups") == len(stable["groups"]), f"{strategy}: groups")
    check(info.get("docs_whole") == whole, f"{strategy}: docs_whole {info.get('docs_whole')} vs {whole}")
    check(info.get("docs_fragmented" if strategy == "fragment" else "docs_truncated") == long, f"{strategy}: long docs")
    check(info.get("tokens_dropped") == dropped, f"{strategy}: tokens_dropped {info.get('tokens_dropped')} vs {dropped}")
    check(info.get("tokens_padding") == N * T - stable["tokens"], f"{strategy}: padding")
    print(f"{strategy}: {N} instances in {len(stable['groups'])} groups, {whole} documents whole, {long} long, "
          f"{dropped} tokens dropped, {N * T - stable['tokens']} padding; equal to the oracle")
# sequential order, no permutation, group size 1 (OLMo-core's defaults)
rec = recipe("ties-plain", paths, T, "  order: sequential\n")
plain = po.build(paths, T, EOS, PAD, "truncate", 1, None, "stable")
check(c_describe(rec, 10**6) == po.describe(plain, 34521, 1, shuffle=False), "defaults: sequential describe")

# 3. no ties: the literal transcription (numpy's default argsort) equals olmo.c
T = 256
lens = [L for L in range(1, 256) if L != 44] + [300]   # 300 -> 256 + 44 under fragment: still no tie
random.Random(5).shuffle(lens)
cuts = [0, 30, 31, 90, 150, 151, 200, len(lens)]
paths = write_files("noties", [lens[a:b] for a, b in zip(cuts, cuts[1:])], [3, 0, 0, 7, 0, 0, 1], rng)
for strategy in ["truncate", "fragment"]:
    rec = recipe(f"noties-{strategy}", paths, T, f"  long_doc_strategy: {strategy}\n  source_group_size: 3\n"
                                                   "  source_permutation_seed: 123\n")
    literal = po.build(paths, T, EOS, PAD, strategy, 3, 123, None)
    want = po.describe(literal, 34521, 1)
    check(c_describe(rec, 10**6) == want, f"no ties, {strategy}: olmo.c vs the literal transcription")
    check(po.describe(po.build(paths, T, EOS, PAD, strategy, 3, 123, "stable"), 34521, 1) == want,
          f"no ties, {strategy}: stable vs default sort")
    print(f"no ties, {strategy}: {len(want)} instances equal to the literal transcription")

# 4. bad values
base = recipe("bad", paths[:2], 256)
for ov, key in [("data.packing=pack", "data.packing"), ("data.long_doc_strategy=split", "data.long_doc_strategy"),
                ("data.source_group_size=0", "data.source_group_size"),
                ("data.source_permutation_seed=-2", "data.source_permutation_seed"),
                ("train.seq_len=96", "train.seq_len"), ("data.pad_id=1000", "data.pad_id"),
                ("data.pad_id=998", "data.eos_id"), ("train.loss_norm=mean", "train.loss_norm")]:
    p = lib.olmo("data", "info", base, ov)
    check(p.returncode == 2 and key in p.stderr, f"{ov}: exit {p.returncode}, want 2 naming {key}: {p.stderr.strip()}")
for ov, key in [("data.long_doc_strategy=fragment", "data.long_doc_strategy"),
                ("data.source_group_size=8", "data.source_group_size")]:
    p = lib.olmo("data", "info", base, "data.packing=fsl", ov)
    check(p.returncode == 2 and key in p.stderr and "packed" in p.stderr, f"fsl + {ov}: {p.returncode} {p.stderr.strip()}")

# 5. Training on packed instances: the same weights at 1 and 2 threads, and after a resume
def run(name, steps, threads, *ov):
    rec = os.path.join(TMP, name + ".yml")
    with open(rec, "w") as f:
        f.write("model: {preset: olmo3-tiny}\n"
                f"train: {{seq_len: 64, global_batch: 4, micro_batch: 2, max_steps: {steps}, run_dir: {TMP}/{name}}}\n"
                f"data:\n  paths: [{', '.join(paths_ties)}]\n  packing: packed\n  eos_id: {EOS}\n  pad_id: {PAD}\n"
                "  document_mask: true\n  long_doc_strategy: fragment\n  source_group_size: 4\n"
                "  source_permutation_seed: 123\neval: {off: true}\nckpt: {interval: 2}\n")
    p = lib.olmo("train", rec, *ov, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    check(p.returncode == 0, f"train {name}: exit {p.returncode}: {p.stderr[-1500:]}")
    return os.path.join(TMP, name, "model.safetensors")


a4, b4 = run("t2", 4, 2), run("t1", 4, 1)
run("res", 2, 2)
c4 = run("res", 4, 2, "train.allow_recipe_change=train.max_steps")
w = [open(x, "rb").read() if os.path.exists(x) else b"" for x in (a4, b4, c4)]
check(w[0] and w[0] == w[1], "packed training: 1 and 2 threads differ")
check(w[0] and w[0] == w[2], "packed training: 2 steps + resume to 4 differs from 4 steps")
finish("test_packing", TMP)
