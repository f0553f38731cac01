#!/usr/bin/python3
# test_mix_order.py: `olmo data order RECIPE --where` / `--sizes FILE` with data.mix NAME
# (OLMo-core mix files, configs/mixes/) against numpy, the oracle: OLMo-core's global order
# is np.random.Generator(PCG64(seed + epoch)).shuffle(arange(N, dtype=uint32)) and instance i
# is the i-th seq_len chunk of the files concatenated in the mix file's order, each file's
# tail dropped (NumpyFSLDataset). Exact (integers and paths).
#  1. The official OLMo 3 stage-1 mix (configs/olmo3-7b-stage1.yml) with fake sizes (the
#     1016 files need not exist): the first served instances' file and token offset.
#  2. The stage-2 and stage-3 mixes resolve (file count, first and last path); stage 1's
#     eval.sets are the v3-small-ppl-validation mix.
#  3. Bad input: a path without {TOKENIZER}, no value for it, an unknown mix name, a line
#     that is not label,path, --sizes with the wrong count: exit 2, the file, line and key.
import os, random, sys
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402 (after the path)
from lib import ROOT, check, finish  # noqa: E402

TMP = lib.tmpdir("mix_order_")


def olmo(*args):
    return lib.olmo("data", *args)


def mix_paths(mix, base, tok):
    out = []
    for line in open(os.path.join(ROOT, "configs", "mixes", mix + ".txt")):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        label, path = line.split(",")
        out.append(base + "/" + path.replace("{TOKENIZER}", tok))
    return out


# 1. official stage-1 mix, fake sizes
T, SEED = 8192, 34521
paths = mix_paths("OLMo-mix-0625-official", "/data/ai2-llm", "allenai/dolma3-tokenizer")
check(len(paths) == 1016, f"{len(paths)} files in OLMo-mix-0625-official")
random.seed(11)
sizes = [4 * (T * random.randint(0, 40) + random.randint(0, T - 1)) for _ in paths]   # bytes; some files hold no instance
sz = os.path.join(TMP, "sizes.txt")
with open(sz, "w") as f:   # both forms: 'BYTES' and 'PATH BYTES'
    for i, (p, b) in enumerate(zip(paths, sizes)):
        f.write(f"{p} {b}\n" if i % 2 else f"{b}\n")
n_inst = [b // 4 // T for b in sizes]
first = np.concatenate([[0], np.cumsum(n_inst)])
N = int(first[-1])
perm = np.arange(N, dtype=np.uint32)
np.random.Generator(np.random.PCG64(SEED + 1)).shuffle(perm)
K = 40
p = olmo("order", "configs/olmo3-7b-stage1.yml", "--sizes", sz, "--count", K)
check(p.returncode == 0, f"order --sizes: exit {p.returncode}: {p.stderr}")
got = [l.split() for l in p.stdout.splitlines()]
check(len(got) == K, f"{len(got)} lines, want {K}")
for (gid, gpath, goff), want in zip(got, perm[:K]):
    k = int(np.searchsorted(first, want, side="right") - 1)
    check(int(gid) == int(want) and gpath == paths[k] and int(goff) == (int(want) - int(first[k])) * T,
          f"instance {gid} {gpath} {goff}: want {want} {paths[k]} {(int(want) - int(first[k])) * T}")
print(f"stage 1 mix, fake sizes: {N} instances; first served: instance {got[0][0]} = {got[0][1]} at token {got[0][2]}")
p2 = olmo("order", "configs/olmo3-7b-stage1.yml", "--sizes", sz, "--start", 1000, "--count", 3, "--epoch", 2)
perm2 = np.arange(N, dtype=np.uint32)
np.random.Generator(np.random.PCG64(SEED + 2)).shuffle(perm2)
check([int(l.split()[0]) for l in p2.stdout.splitlines()] == [int(x) for x in perm2[1000:1003]], f"epoch 2 from 1000: {p2.stdout}")
# the {TOKENIZER} value can be overridden
p3 = olmo("order", "configs/olmo3-7b-stage1.yml", "--sizes", sz,
          "data.mix_tokenizer=dolma2-tokenizer", "--count", 1)
check(p3.returncode == 2 and "--sizes: expected 'BYTES' or" in p3.stderr, "PATH BYTES lines are checked against the recipe's paths")
with open(os.path.join(TMP, "plain.txt"), "w") as f:
    f.writelines(f"{b}\n" for b in sizes)
p3 = olmo("order", "configs/olmo3-7b-stage1.yml", "--sizes", os.path.join(TMP, "plain.txt"), "data.mix_tokenizer=dolma2-tokenizer",
          "data.mix_base_dir=/mnt/x/", "--count", 1)
k = int(np.searchsorted(first, perm[0], side="right") - 1)
check(p3.returncode == 0 and p3.stdout.split()[1] == paths[k].replace("allenai/dolma3-tokenizer", "dolma2-tokenizer").replace("/data/ai2-llm", "/mnt/x"),
      f"data.mix_tokenizer / base dir: {p3.stdout} {p3.stderr}")

# 2. stage 2 and 3 mixes resolve, in order
for cfg, mix, n in [("configs/olmo3-7b-stage2.yml", "OLMo-midtraining-mix-0625-100B", 11933),
                    ("configs/olmo3-7b-stage3.yml", "OLMo-longmino-mix-0625", 998)]:
    ps = mix_paths(mix, "/data/ai2-llm", "allenai/dolma3-tokenizer")
    check(len(ps) == n, f"{mix}: {len(ps)} files")
    seq = 8192 if "stage2" in cfg else 65536
    with open(os.path.join(TMP, "s.txt"), "w") as f:
        f.writelines(f"{4 * seq * 2}\n" for _ in ps)   # two instances each
    # stage 3 packs its instances (data.packing: packed), which fake sizes cannot give: the
    # mix's files and order are checked through its FSL view
    fsl = ["data.packing=fsl", "data.source_group_size=1", "data.source_permutation_seed=-1"] if "stage3" in cfg else []
    p = olmo("order", cfg, "--sizes", os.path.join(TMP, "s.txt"), "data.order=sequential", *fsl)
    lines = p.stdout.splitlines()
    check(p.returncode == 0 and len(lines) == 2 * n and lines[0].split()[1] == ps[0] and lines[-1].split()[1] == ps[-1]
          and lines[-1].split()[2] == str(seq), f"{cfg}: exit {p.returncode} {p.stderr[-300:]} {lines[:1]} {lines[-1:]}")

# 2b. stage 1's eval.sets are the v3-small-ppl-validation mix ({TOKENIZER} = dolma2-tokenizer,
#     OLMo-core mixes/__init__.py:85-89) under the same base directory, in its order
want = []
for line in open(os.path.join(ROOT, "configs", "mixes", "v3-small-ppl-validation.txt")):
    if line.strip() and not line.startswith("#"):
        label, path = line.strip().split(",")
        want.append(f"{label}=/data/ai2-llm/" + path.replace("{TOKENIZER}", "dolma2-tokenizer"))
for cfg in ("configs/olmo3-7b-stage1.yml", "configs/olmo3-7b-stage1-part2.yml"):
    lines = [l.strip() for l in open(os.path.join(ROOT, cfg))]
    base = [l.split(":", 1)[1].split("#")[0].strip() for l in lines if l.startswith("base_dir:")]
    tok = [l.split(":", 1)[1].split("#")[0].strip() for l in lines if l.startswith("tokenizer_id:")]
    got = [l[2:] for l in lines if l.startswith("- ") and "-validation=" in l]
    if base and tok:   # eval.base_dir + {TOKENIZER} (eval.tokenizer_id), as the recipe resolves them
        got = [g.split("=", 1)[0] + "=" + base[0].rstrip("/") + "/" + g.split("=", 1)[1].replace("{TOKENIZER}", tok[0])
               for g in got]
    check(got == want and len(want) == 11, f"{cfg}: eval.sets {got} != {want}")

# 3. bad input
rec = os.path.join(TMP, "r.yml")


def bad_mix(text, want, extra=()):
    mf = os.path.join(TMP, "m.txt")
    open(mf, "w").write(text)
    open(rec, "w").write(f"model: {{preset: olmo3-tiny}}\ntrain: {{seq_len: 8, global_batch: 2, max_steps: 1}}\n"
                         f"data: {{mix: {mf}, mix_base_dir: {TMP}}}\n")
    p = olmo("order", rec, *extra)
    check(p.returncode == 2 and want in p.stderr, f"{want!r}: exit {p.returncode}, stderr {p.stderr!r}")


bad_mix("# tokenizer: t\na,x/{TOKENIZER}/1.npy\nb,x/2.npy\n", "m.txt:3: data.mix '" + os.path.join(TMP, "m.txt") + "': the path 'x/2.npy' has no {TOKENIZER} placeholder")
bad_mix("a,x/{TOKENIZER}/1.npy\n", "m.txt:1: data.mix '" + os.path.join(TMP, "m.txt") + "': the paths hold {TOKENIZER} but nothing gives its value: set data.mix_tokenizer")
bad_mix("# tokenizer: t\na,b,x/{TOKENIZER}/1.npy\n", "m.txt:2: data.mix '" + os.path.join(TMP, "m.txt") + "': expected one 'label,path' per line")
bad_mix("# tokenizer: t\na,x/{TOKENIZER}/1.npy\n", "token file '" + TMP + "/x/t/1.npy'")   # resolved, then missing
bad_mix("# only comments\n", "data.mix '" + os.path.join(TMP, "m.txt") + "': the mix file lists no files")
p = olmo("order", "configs/olmo3-7b-stage1.yml", "data.mix=OLMo-mix-9999")
check(p.returncode == 2 and "data.mix: unknown mix 'OLMo-mix-9999': no file configs/mixes/OLMo-mix-9999.txt" in p.stderr
      and "OLMo-mix-0625-official" in p.stderr, f"unknown mix: {p.returncode} {p.stderr!r}")
with open(os.path.join(TMP, "short.txt"), "w") as f:
    f.write("8192\n")
p = olmo("order", "configs/olmo3-7b-stage1.yml", "--sizes", os.path.join(TMP, "short.txt"))
check(p.returncode == 2 and "short.txt: --sizes: 1 sizes for the recipe's 1016 files" in p.stderr, f"short sizes: {p.stderr!r}")
p = olmo("order", "configs/olmo3-7b-stage1.yml", "--sizes", sz, "--rank", 0, "--world", 1)
check(p.returncode == 2 and "--where / --sizes go without --rank" in p.stderr, f"--sizes --rank: {p.stderr!r}")

finish("test_mix_order", TMP)
