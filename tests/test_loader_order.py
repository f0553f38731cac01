#!/usr/bin/python3
# test_loader_order.py: `olmo data order` / `olmo data info` against numpy, the oracle
# (OLMo-core's global order is np.random.Generator(PCG64(seed + epoch)).shuffle of
# arange(N, dtype=uint32)), plus the recipe-level bad inputs of the loader (each exit 2
# with a message naming the key or file) and the share-normalization warning.
# Uses $OLMO_BIN (default build/olmo).
import json, os, sys
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402 (after the path)
from lib import check, finish  # noqa: E402

TMP = lib.tmpdir("loader_order_")
T = 8


def olmo(*args):
    return lib.olmo("data", *args)


def tokfile(name, n, base=0, vocab=1000):
    p = os.path.join(TMP, name)
    ((np.arange(n, dtype=np.uint64) + base) % vocab).astype("<u4").tofile(p)
    return p


def recipe(name, data_yaml, gb=12, mb=2):
    p = os.path.join(TMP, name)
    with open(p, "w") as f:
        f.write("model: {preset: olmo3-tiny}\n"
                f"train: {{seq_len: {T}, global_batch: {gb}, micro_batch: {mb}, max_steps: 5, run_dir: {TMP}/run}}\n"
                f"data:\n{data_yaml}")
    return p


def order(seed, n):
    a = np.arange(n, dtype=np.uint32)
    np.random.Generator(np.random.PCG64(seed)).shuffle(a)
    return a


news = tokfile("news.npy", 257 * T + 3)
fic = tokfile("fiction.npy", 90 * T, base=7)
os.makedirs(os.path.join(TMP, "cc"))
cc = [tokfile(os.path.join("cc", f"part-{i}.npy"), (40 + i) * T) for i in range(3)]

# 1. The global order of several epochs and seeds equals numpy's.
r = recipe("plain.yml", f"  paths: [{news}, {fic}]\n")
N = 257 + 90
for seed, epoch in [(34521, 1), (34521, 2), (0, 1), (2**40 + 3, 5)]:
    p = olmo("order", r, f"data.seed={seed}", "--epoch", epoch)
    got = np.array([int(x) for x in p.stdout.split()], dtype=np.uint32)
    check(p.returncode == 0 and np.array_equal(got, order(seed + epoch, N)),
          f"order seed={seed} epoch={epoch}: rc {p.returncode} {p.stderr}")
# --start/--count, --batches (whole batches only), sequential order
p = olmo("order", r, "--epoch", 3, "--start", 100, "--count", 7)
check([int(x) for x in p.stdout.split()] == list(order(34521 + 3, N)[100:107]), "--start/--count")
p = olmo("order", r, "--batches", "--epoch", 1)
rows = [list(map(int, l.split())) for l in p.stdout.splitlines()]
want = order(34521 + 1, N)[: (N // 12) * 12].reshape(-1, 12)
check(len(rows) == N // 12 and np.array_equal(np.array(rows), want), "--batches")
p = olmo("order", r, "data.order=sequential", "--count", 5)
check(p.stdout.split() == ["0", "1", "2", "3", "4"], "sequential order")

# 2. Per rank: rank r of W gets the contiguous block r*gb/W.. of each global batch, and
# the union over ranks is the global batch for W = 1, 2, 3.
for W in (1, 2, 3):
    per = 12 // W
    blocks = []
    for rk in range(W):
        p = olmo("order", r, "--batches", "--epoch", 2, "--rank", rk, "--world", W, "--count", 6)
        check(p.returncode == 0, f"rank order W={W}: {p.stderr}")
        blocks.append(np.array([list(map(int, l.split())) for l in p.stdout.splitlines()]))
    glob = np.concatenate(blocks, axis=1)
    check(np.array_equal(glob, order(34521 + 2, N)[:72].reshape(6, 12)), f"W={W}: union of ranks != global batches")

# 3. The double-sharding bug is visible through `olmo data order` and raises alarms.
p = olmo("order", r, "--batches", "--rank", 0, "--world", 2, "--count", 2, "loader.debug_double_shard=true")
check(p.returncode == 0 and "loader alarm" in p.stderr, "double shard alarm in olmo data order")

# 4. Sources and mixtures via `olmo data info --json`.
src = f'  sources: ["news={news}", "{fic}", "web={TMP}/cc/*.npy"]\n'
r2 = recipe("mix.yml", src + '  mix: ["news:0.5", "fiction:0.2:3", "web:0.3"]\n')
p = olmo("info", r2, "--json")
check(p.returncode == 0, f"info: {p.stderr}")
info = json.loads(p.stdout)
by = {s["name"]: s for s in info["sources"]}
check(set(by) == {"news", "fiction", "web"} and by["web"]["files"] == 3, f"sources {by}")
# web (123 instances, cap 1) binds: T = 123/0.3 = 410 -> news 205 (of 257), fiction 82 (of 90)
check(by["web"]["instances_used"] == 123 and by["news"]["instances_used"] == 205 and
      by["fiction"]["instances_used"] == 82 and info["instances"] == 410, f"mixture counts {by}")
for name, share in [("news", 0.5), ("fiction", 0.2), ("web", 0.3)]:
    check(abs(by[name]["share"] - share) < 0.01, f"share of {name}: {by[name]['share']}")
r3 = recipe("mix3.yml", src + '  mix: ["news:0.2", "fiction:0.6:3", "web:0.2"]\n')
info = json.loads(olmo("info", r3, "--json").stdout)
by = {s["name"]: s for s in info["sources"]}
# news 257/0.2 = 1285, fiction 270/0.6 = 450, web 123/0.2 = 615 -> T = 450: fiction 270 (x3)
check(by["fiction"]["instances_used"] == 270 and by["fiction"]["repeat"] == 3 and
      by["news"]["instances_used"] == 90 and by["web"]["instances_used"] == 90, f"upsampled mixture {by}")
p = olmo("info", r2, "data.mix=news:1,fiction:1,web:2")
check(p.returncode == 0 and "normalized" in p.stderr, f"shares not summing to 1 warn: {p.stderr}")

# 5. Bad inputs: exit 2, message naming the key/file.
def bad(args, want, what):
    p = olmo(*args)
    check(p.returncode == 2 and want in p.stderr, f"{what}: rc {p.returncode}, want '{want}' in: {p.stderr}")

bad(["info", r2, "data.mix=news:0.5,sports:0.5"], "unknown source 'sports'", "unknown source in data.mix")
bad(["info", r2, "data.mix=news:abc"], "share must be a number", "bad share")
bad(["info", r2, "data.mix=news:0.5:0.5"], "max_repeat must be", "bad max_repeat")
bad(["info", r2, "data.mix=news"], "source:share", "mix item without share")
bad(["info", r2, f"data.sources=web={TMP}/nothing/*.npy"], "no file matches", "glob without match")
odd = os.path.join(TMP, "odd.npy")
with open(odd, "wb") as f:
    f.write(b"\0" * 4 * 20 + b"\1")
bad(["info", r, f"data.paths={odd}"], "odd.npy': size 81 bytes is not a multiple of 4", "size % 4")
big = tokfile("big.npy", 20 * T, base=995, vocab=1 << 20)
bad(["info", r, f"data.paths={big}"], "big.npy': token id 1000 at token offset 5", "id >= vocab")
short = tokfile("short.npy", T - 1)
bad(["info", r, "data.paths=", f"data.sources=short={short}"], "data source 'short'", "no full instance")
bad(["info", r, "data.paths=", f"data.sources={news},{news}"], "two sources are named 'news'", "duplicate source")
bad(["order", r, "--rank", 3, "--world", 2], "--rank 3 --world 2", "bad rank")
bad(["order", r, "--epoch"], "--epoch needs", "missing value")
bad(["frobnicate", r], "unknown subcommand", "unknown subcommand")
bad(["info", r, f"data.sources={news}"], "both given", "data.paths and data.sources")

finish("test_loader_order", TMP)
