#!/usr/bin/env python3
"""ngram_baseline.py: the yardsticks a language model's held-out CE is read against.

Counts the training token files and prints, for each held-out set, the cross-entropy
(nats/token) of an add-0.1 unigram model and of a bigram model interpolated half and half
with it, over the tokens `olmo train`'s in-loop evaluation scores: each EOS-ended document's
first seq_len + 1 tokens, every token after the first a target. A model at the unigram
figure has learnt token frequencies only; below the bigram one it uses more than the
previous token.

  /usr/bin/python3 scripts/ngram_baseline.py --train data/brown/tokens/{adventure,...}.npy \
      --set brown_heldout=data/brown/tokens/heldout_indomain.npy [--seq-len 256]
With no --train, every *.npy of --dir (default data/brown/tokens) that is not a held-out
file nor science_fiction (the main job's out-of-domain category) is the training data.
"""
import argparse
import glob
import math
import os
import sys
from collections import Counter

import numpy as np

EOS = 100257
VOCAB = 100352  # dolma2's 100,278 padded to a multiple of 128, as the model's rows


def scored_pairs(tokens, seq_len):
    """(previous, target) pairs the evaluator scores: the first seq_len + 1 tokens of each document.

    As src/eval/eval.c: a document ends with its EOS; a trailing run without one is an
    incomplete document and is not scored."""
    ends = np.flatnonzero(tokens == EOS).tolist()
    start = 0
    for end in ends:
        doc = tokens[start:end + 1][:seq_len + 1].tolist()
        yield from zip(doc[:-1], doc[1:])
        start = end + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", nargs="*", help="training token files (uint32)")
    ap.add_argument("--dir", default="data/brown/tokens")
    ap.add_argument("--set", action="append", required=True, help="name=path of a held-out token file")
    ap.add_argument("--seq-len", type=int, default=256)
    a = ap.parse_args()
    train = a.train or [f for f in sorted(glob.glob(os.path.join(a.dir, "*.npy")))
                        if ".heldout" not in f and "heldout_" not in f and "science_fiction" not in f]
    if not train:
        sys.exit(f"ngram_baseline: no training token files in {a.dir}")
    tr = np.concatenate([np.fromfile(f, dtype=np.uint32) for f in train])
    uni = np.bincount(tr, minlength=VOCAB).astype(np.float64)
    p_uni = (uni + 0.1) / (uni.sum() + 0.1 * VOCAB)
    big = Counter(zip(tr[:-1].tolist(), tr[1:].tolist()))
    print(f"training: {len(train)} files, {len(tr)} tokens; scored: first {a.seq_len + 1} tokens of each document")
    for spec in a.set:
        name, _, path = spec.partition("=")
        pairs = list(scored_pairs(np.fromfile(path, dtype=np.uint32), a.seq_len))
        ce_uni = ce_bi = 0.0
        for prev, nxt in pairs:
            ce_uni -= math.log(p_uni[nxt])
            p_bi = big.get((prev, nxt), 0) / uni[prev] if uni[prev] > 0 else 0.0
            ce_bi -= math.log(0.5 * p_bi + 0.5 * p_uni[nxt]) if uni[prev] > 0 else math.log(p_uni[nxt])
        n = max(len(pairs), 1)
        print(f"  {name:<20} {len(pairs):7d} targets   unigram {ce_uni / n:.3f}   bigram {ce_bi / n:.3f}")


if __name__ == "__main__":
    main()
