#!/usr/bin/python3
"""make_tasks.py: multiple-choice eval tasks for `olmo eval` / eval.tasks (docs/eval.md).

    python3 scripts/make_tasks.py --corpus data/brown --out data/brown/tasks [--seed 0]

Writes, deterministically for a given corpus and seed:
  OUT/brown_next_sentence.jsonl  from the HELD-OUT documents of the prepared corpus (never
      trained on): context = up to three consecutive sentences of a document, choices = the
      true next sentence and 3 distractor sentences of similar length from other held-out
      documents, in a seeded random order.
  OUT/copy.jsonl        synthetic skill: "w1 w2 w3 w4 w5 -> w1 w2 w3 w4" -> " w5" (2-shot)
  OUT/arithmetic.jsonl  synthetic skill: "12 + 7 =" -> " 19" among near misses (3-shot)

The held-out documents are found the way `olmo prepare` split them: the manifest
(CORPUS/tokens/manifest.json) gives each source's input JSONL, held-out fraction and seed,
and a document is held out iff its hash (FNV-1a-64 over the seed's 8 little-endian bytes
then the text's UTF-8 bytes, splitmix64 finalizer) maps below the fraction. The script
checks that it finds as many held-out documents as the manifest records.

Standard library only; prints the eval.tasks list for a recipe.
"""
import argparse
import json
import os
import random
import re
import sys

M64 = (1 << 64) - 1


def is_heldout(text, seed, frac):
    h = 0xCBF29CE484222325
    for b in seed.to_bytes(8, "little") + text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & M64
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & M64
    h ^= h >> 31
    return (h >> 11) * (1.0 / 9007199254740992.0) < frac


SENT = re.compile(r"(?<=[.!?])[\"')]*\s+(?=[\"'(]?[A-Z])")


def sentences(text):
    """Sentences of a document: paragraphs (blank-line separated) split after . ! ?"""
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        if not para:
            continue
        start = 0
        for m in SENT.finditer(para):
            out.append(para[start:m.start()].strip() + para[m.start():m.end()].strip())
            start = m.end()
        out.append(para[start:].strip())
    return [s for s in out if s]


def die(msg):
    sys.stderr.write(f"make_tasks: error: {msg}\n")
    sys.exit(2)


def heldout_documents(corpus):
    """[(source, doc id, text)] of the held-out split, sources sorted, documents in file order."""
    mpath = os.path.join(corpus, "tokens", "manifest.json")
    try:
        man = json.load(open(mpath, encoding="utf-8"))
    except (OSError, ValueError) as e:
        die(f"{mpath}: {e} (run scripts/prepare_default_corpus.sh first)")
    expected = {o["source"]: o["documents"] for o in man.get("outputs", []) if o.get("split") == "heldout"}
    docs = []
    for src in sorted(man.get("sources", []), key=lambda s: s["source"]):
        name, frac, seed = src["source"], float(src["heldout_frac"]), int(src["heldout_seed"])
        found = 0
        for inp in src["inputs"]:
            path = inp["path"] if isinstance(inp, dict) else inp
            if not os.path.exists(path):  # manifest written elsewhere: look next to it
                path = os.path.join(corpus, "jsonl", os.path.basename(path))
            if path.endswith((".gz", ".zst")):
                die(f"{path}: compressed inputs are not supported here")
            with open(path, encoding="utf-8") as f:
                for ln, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    o = json.loads(line)
                    text = o.get("text", "")
                    if text and is_heldout(text, seed, frac):
                        docs.append((name, str(o.get("id", f"{name}:{ln}")), text))
                        found += 1
        if found != expected.get(name, 0):
            die(f"source {name}: found {found} held-out documents, the manifest records {expected.get(name, 0)} "
                "(was the corpus prepared with different inputs?)")
    if not docs:
        die(f"{mpath}: no held-out documents")
    return docs


def next_sentence(docs, rng, max_examples, per_doc):
    """Context: up to 3 sentences; gold: the next one; distractors from other documents."""
    sents = [[s for s in sentences(t) if 30 <= len(s) <= 300] for _, _, t in docs]
    pool = [(di, s) for di, ss in enumerate(sents) for s in ss]
    examples = []
    for di, ((src, did, _), ss) in enumerate(zip(docs, sents)):
        # positions 3, 11, 19, ...: contexts do not overlap the previous example's gold
        for k, i in enumerate(range(3, len(ss), 8)):
            if k >= per_doc:
                break
            gold = ss[i]
            near = [s for dj, s in pool if dj != di and 0.5 * len(gold) <= len(s) <= 2 * len(gold)]
            if len(near) < 3:
                continue
            choices = [gold] + rng.sample(near, 3)
            order = list(range(4))
            rng.shuffle(order)
            examples.append({
                "id": f"{src}/{did}/{i}",
                "context": " ".join(ss[i - 3:i]),
                "choices": [" " + choices[j] for j in order],
                "gold": order.index(0),
            })
    rng.shuffle(examples)
    return examples[:max_examples]


WORDS = ("apple river stone cloud tiger piano candle forest silver window garden rocket "
         "pencil island marble basket dragon lemon planet violin").split()


def copy_task(rng, n):
    def one():
        seq = rng.sample(WORDS, 5)
        others = rng.sample([w for w in WORDS if w != seq[4]], 3)
        choices = [seq[4]] + others
        rng.shuffle(choices)
        return {"context": " ".join(seq) + " -> " + " ".join(seq[:4]),
                "choices": [" " + c for c in choices], "gold": choices.index(seq[4])}
    shots = [one() for _ in range(2)]
    return [dict(id=f"copy/{i}", **one(), fewshot=shots) for i in range(n)]


def arithmetic_task(rng, n):
    def one():
        a, b = rng.randint(10, 49), rng.randint(1, 49)
        s = a + b
        wrong = rng.sample([s - 10, s - 1, s + 1, s + 2, s + 10, s - 2], 3)
        choices = [s] + wrong
        rng.shuffle(choices)
        return {"context": f"{a} + {b} =", "choices": [f" {c}" for c in choices], "gold": choices.index(s)}
    shots = [one() for _ in range(3)]
    return [dict(id=f"arithmetic/{i}", **one(), fewshot=shots) for i in range(n)]


def write_jsonl(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="data/brown", help="prepared corpus (jsonl/ and tokens/manifest.json)")
    ap.add_argument("--out", default=None, help="output directory (default CORPUS/tasks)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--next-sentence", type=int, default=400, help="brown_next_sentence examples (at most)")
    ap.add_argument("--per-doc", type=int, default=8, help="next-sentence examples per document (at most)")
    ap.add_argument("--synthetic", type=int, default=200, help="examples of each synthetic task")
    a = ap.parse_args()
    out = a.out or os.path.join(a.corpus, "tasks")
    os.makedirs(out, exist_ok=True)
    docs = heldout_documents(a.corpus)
    tasks = {
        "brown_next_sentence": next_sentence(docs, random.Random(a.seed), a.next_sentence, a.per_doc),
        "copy": copy_task(random.Random(a.seed + 1), a.synthetic),
        "arithmetic": arithmetic_task(random.Random(a.seed + 2), a.synthetic),
    }
    specs = []
    for name, rows in tasks.items():
        if not rows:
            die(f"{name}: no examples (corpus too small?)")
        p = os.path.join(out, name + ".jsonl")
        write_jsonl(p, rows)
        specs.append(f"{name}={p}")
        sys.stderr.write(f"make_tasks: {p}: {len(rows)} examples\n")
    sys.stderr.write(f"make_tasks: {len(docs)} held-out documents\n")
    print("eval.tasks: " + json.dumps(specs))


if __name__ == "__main__":
    main()
