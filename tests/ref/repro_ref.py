#!/usr/bin/python3
"""The PyTorch side of the reproduction check (scripts/repro_check.sh, docs/repro.md).

Subcommands:
  data DIR [--train-tokens N] [--heldout-docs D] [--seed S]
      A learnable synthetic corpus: a seeded sparse Markov chain (bigram) over tokens
      0..998 (each token has a few likely successors plus a little uniform noise),
      documents of random length each closed by EOS 999. Writes DIR/train.npy and
      DIR/heldout.npy (raw little-endian uint32, OLMo-core layout) and DIR/corpus.json
      (the chain's entropy rate: the best CE any model can reach, in nats/token).
  init FILE [--seed S]
      Initial weights of the olmo3-tiny shape, drawn by olmo_ref.init_params (trunc normal
      std 0.02 cut at +-0.06, norms 1), HF names, padded vocab rows, F32.
  train --olmo-run DIR --out DIR --init FILE [--olmo BIN] [--verify-batches K]
      Re-runs OLMo 3 training in plain PyTorch (tests/ref/olmo_ref.py, float32) with the
      configuration of the olmo.c run DIR (its resolved recipe.yml), from the same initial
      weights, on the same global batches in the same order (`olmo data order`), with the
      same LR schedule, AdamW, clipping and z-loss, evaluating the same held-out sets at the
      same steps with olmo.c's semantics (docs/eval.md). Writes OUT/metrics.jsonl (olmo.c's
      record format), OUT/recipe.yml (a copy of DIR's) and OUT/model.safetensors.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import olmo_ref as ref  # noqa: E402
import safetensors_io as st  # noqa: E402

EOS = 999
VOCAB = 1000


# ----------------------------------------------------------------------------- data

def markov_chain(seed, n_succ=4, noise=0.05):
    """Transition matrix over the content tokens 0..V-2 (EOS excluded): each token has
    n_succ likely successors (Dirichlet weights) taking 1-noise of the mass; the rest is
    uniform over all content tokens."""
    rng = np.random.default_rng(seed)
    n = VOCAB - 1
    P = np.full((n, n), noise / n)
    for a in range(n):
        succ = rng.choice(n, size=n_succ, replace=False)
        P[a, succ] += (1.0 - noise) * rng.dirichlet(np.ones(n_succ))
    return P


def gen_docs(rng, P, n_docs=None, n_tokens=None, min_len=16, max_len=200):
    """Documents: a uniform first token, then the chain; length uniform in [min_len,
    max_len] content tokens, then EOS. Stops after n_docs documents or once n_tokens
    tokens are written (the last document is cut: the file ends mid-document, as a
    concatenated corpus shard may)."""
    n = P.shape[0]
    cdf = np.cumsum(P, axis=1)
    out = []
    total = 0
    d = 0
    while (n_docs is not None and d < n_docs) or (n_tokens is not None and total < n_tokens):
        L = int(rng.integers(min_len, max_len + 1))
        u = rng.random(L)
        doc = np.empty(L + 1, dtype=np.uint32)
        t = int(rng.integers(n))
        doc[0] = t
        for i in range(1, L):
            t = min(int(np.searchsorted(cdf[t], u[i] * cdf[t, -1])), n - 1)
            doc[i] = t
        doc[L] = EOS
        out.append(doc)
        total += L + 1
        d += 1
    toks = np.concatenate(out)
    if n_tokens is not None:
        toks = toks[:n_tokens]
    return toks


def entropy_rate(P):
    """Stationary entropy rate of the chain (nats/token), ignoring document boundaries."""
    pi = np.ones(P.shape[0]) / P.shape[0]
    for _ in range(200):
        pi = pi @ P
    H = -(P * np.log(P)).sum(axis=1)
    return float(pi @ H)


def cmd_data(a):
    os.makedirs(a.dir, exist_ok=True)
    P = markov_chain(a.seed)
    rng = np.random.default_rng(a.seed + 1)
    train = gen_docs(rng, P, n_tokens=a.train_tokens)
    held = gen_docs(np.random.default_rng(a.seed + 2), P, n_docs=a.heldout_docs)
    train.astype("<u4").tofile(os.path.join(a.dir, "train.npy"))
    held.astype("<u4").tofile(os.path.join(a.dir, "heldout.npy"))
    info = {"seed": a.seed, "vocab": VOCAB, "eos": EOS, "train_tokens": int(train.size),
            "heldout_tokens": int(held.size), "heldout_docs": a.heldout_docs,
            "entropy_rate_nats": entropy_rate(P)}
    with open(os.path.join(a.dir, "corpus.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"data: {train.size} train tokens, {a.heldout_docs} held-out documents "
          f"({held.size} tokens); chain entropy rate {info['entropy_rate_nats']:.3f} nats/token")
    return 0


# ----------------------------------------------------------------------------- init

def tiny_cfg():
    return ref.Config(ref.TINY)


def cmd_init(a):
    cfg = tiny_cfg().check()
    P = ref.init_params(cfg, a.seed, torch.float32)
    os.makedirs(os.path.dirname(os.path.abspath(a.file)), exist_ok=True)
    st.write(a.file, {n: t.numpy() for n, t in P.items()}, metadata={"format": "pt"})
    n_par = sum(t.numel() for t in P.values())
    print(f"init: {a.file} ({n_par:,} parameters, seed {a.seed})")
    return 0


# ----------------------------------------------------------------------------- train

def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat(v, key + "."))
        else:
            out[key] = v
    return out


def as_list(v):
    if v is None:
        return []
    if isinstance(v, str):
        return [s for s in v.split(",") if s]
    return list(v)


def config_from_recipe(path):
    import yaml
    with open(path) as f:
        r = flat(yaml.safe_load(f))
    V = int(r["model.vocab_size"])
    L = int(r["model.n_layers"])
    every = int(r["model.full_attn_every"])
    D = int(r["model.d_model"])
    H = int(r["model.n_heads"])
    KV = int(r.get("model.n_kv_heads") or H)
    cfg = ref.Config(
        vocab_size=V, padded_vocab=((V + 127) // 128) * 128, d_model=D, n_layers=L,
        n_heads=H, n_kv_heads=KV, head_dim=int(r.get("model.head_dim") or D // H),
        mlp_hidden=int(r["model.mlp_hidden"]), rope_theta=float(r["model.rope_theta"]),
        rms_eps=float(r["model.rms_eps"]),
        layer_types=["full_attention" if i % every == every - 1 else "sliding_attention"
                     for i in range(L)],
        sliding_window=int(r["model.sliding_window"]), seq_len=int(r["train.seq_len"]),
        global_batch=int(r["train.global_batch"]), micro_batch=int(r["train.micro_batch"]),
        steps=int(r["train.max_steps"]), z_loss=float(r["train.z_loss"]),
        lr=float(r["optim.lr"]), beta1=float(r["optim.beta1"]), beta2=float(r["optim.beta2"]),
        eps=float(r["optim.eps"]), weight_decay=float(r["optim.weight_decay"]),
        decay_embedding=bool(r["optim.decay_embedding"]),
        max_grad_norm=float(r["optim.max_grad_norm"]), schedule=str(r["schedule.name"]),
        warmup_steps=int(r["schedule.warmup_steps"]), max_steps=int(r["train.max_steps"]),
        alpha_f=float(r["schedule.alpha_f"]),
    ).check()
    if cfg.steps <= 0:
        raise SystemExit("repro_ref: the recipe must set train.max_steps")
    if cfg.schedule not in ("cosine", "linear", "constant"):
        raise SystemExit(f"repro_ref: schedule {cfg.schedule} is not in the reference")
    if cfg.max_grad_norm <= 0:
        raise SystemExit("repro_ref: the reference always clips (optim.max_grad_norm > 0)")
    if r.get("optim.skip_step") not in (False, "false", 0):
        raise SystemExit("repro_ref: set optim.skip_step=false (the reference never skips)")
    paths = as_list(r.get("data.paths"))
    if len(paths) != 1 or as_list(r.get("data.sources")) or as_list(r.get("data.mix")):
        raise SystemExit("repro_ref: the check supports exactly one data.paths file, no mixture")
    sets = []
    for s in as_list(r.get("eval.sets")):
        name, p = s.split("=", 1) if "=" in s else (os.path.basename(s).split(".")[0], s)
        sets.append((name, p))
    ev = dict(interval=int(r.get("eval.interval") or 0), eos=int(r["eval.eos_id"]), sets=sets,
              max_docs=int(r.get("eval.max_docs") or 0))
    if as_list(r.get("eval.tasks")):
        raise SystemExit("repro_ref: eval.tasks are not reproduced; use perplexity sets only")
    return cfg, paths[0], ev


def global_order(olmo, recipe, count, epoch):
    out = subprocess.run([olmo, "data", "order", recipe, "--epoch", str(epoch), "--count",
                          str(count)], check=True, capture_output=True, text=True).stdout
    return np.array([int(x) for x in out.split()], dtype=np.int64)


def batches_from_loader(olmo, recipe, k):
    out = subprocess.run([olmo, "data", "order", recipe, "--batches", "--count", str(k)],
                         check=True, capture_output=True, text=True).stdout
    return [[int(x) for x in line.split()] for line in out.strip().splitlines()]


def eval_docs(path, eos, T, max_docs):
    """olmo.c's perplexity-set instances: one per EOS-terminated document d (EOS included),
    inputs d[0..m), targets d[1..m+1), m = min(len-1, T); a trailing run without EOS is
    not evaluated; documents predicting nothing are skipped."""
    toks = np.fromfile(path, dtype="<u4").astype(np.int64)
    ends = np.nonzero(toks == eos)[0]
    docs = []
    start = 0
    for e in ends:
        d = toks[start:e + 1]
        start = e + 1
        m = min(len(d) - 1, T)
        if m <= 0:
            continue
        docs.append((d[:m], d[1:m + 1]))
        if max_docs and len(docs) >= max_docs:
            break
    return docs


@torch.no_grad()
def evaluate(P, cfg, docs, mb):
    """Token-weighted CE (z-loss 0) over all documents, micro_batch rows at a time, padded
    to the longest row of the batch with masked targets."""
    tot = 0.0
    n = 0
    for b0 in range(0, len(docs), mb):
        chunk = docs[b0:b0 + mb]
        Tm = max(len(x) for x, _ in chunk)
        ids = torch.zeros((len(chunk), Tm), dtype=torch.int64)
        lab = torch.full((len(chunk), Tm), ref.IGNORE, dtype=torch.int64)
        for i, (x, y) in enumerate(chunk):
            ids[i, :len(x)] = torch.from_numpy(x)
            lab[i, :len(y)] = torch.from_numpy(y)
        logits = ref.forward(P, cfg, ids).double()
        lse = torch.logsumexp(logits, -1)
        valid = lab != ref.IGNORE
        tgt = logits.gather(-1, torch.where(valid, lab, 0).unsqueeze(-1)).squeeze(-1)
        # per-document sums added in document order, as olmo.c does
        for i in range(len(chunk)):
            tot += float(((lse[i] - tgt[i]) * valid[i]).sum())
        n += int(valid.sum())
    return tot / n, n


def cmd_train(a):
    torch.set_num_threads(a.threads or torch.get_num_threads())
    recipe = os.path.join(a.olmo_run, "recipe.yml")
    cfg, train_path, ev = config_from_recipe(recipe)
    if a.lr_scale != 1.0:
        cfg["lr"] = cfg.lr * a.lr_scale
        print(f"ref: FAULT INJECTED: peak lr x {a.lr_scale}")
    S, G, T, MB = cfg.steps, cfg.global_batch, cfg.seq_len, cfg.micro_batch
    toks = np.fromfile(train_path, dtype="<u4").astype(np.int64)
    n_inst = toks.size // T
    nb = n_inst // G  # whole batches per epoch
    # the global instance order, epoch by epoch (seed + epoch), truncated to whole batches
    order = []
    epoch = 1
    while len(order) < S * G:
        o = global_order(a.olmo, recipe, nb * G, epoch)
        if o.size != nb * G:
            raise SystemExit(f"repro_ref: olmo data order gave {o.size} ids, want {nb * G}")
        order.extend(o.tolist())
        epoch += 1
    order = np.array(order[:S * G], dtype=np.int64).reshape(S, G)
    # cross-check: the loader's own batch listing
    k = min(a.verify_batches, S, nb)
    lb = batches_from_loader(a.olmo, recipe, k)
    if [list(map(int, row)) for row in order[:k]] != lb:
        raise SystemExit("repro_ref: reconstructed batches differ from `olmo data order --batches`")
    print(f"ref: {S} steps of {G} x {T} tokens (micro-batch {MB}), {n_inst} instances, "
          f"{epoch - 1} epoch(s) of order; first {k} batches equal `olmo data order --batches`")

    def batch(s):
        ids = np.stack([toks[i * T:(i + 1) * T] for i in order[s]])
        lab = np.full_like(ids, ref.IGNORE)
        lab[:, :-1] = ids[:, 1:]
        return ids, lab

    sets = [(name, eval_docs(p, ev["eos"], T, ev["max_docs"])) for name, p in ev["sets"]]
    init = st.read(a.init)
    tr = ref.Trainer(cfg, init, dtype=getattr(torch, a.dtype))
    os.makedirs(a.out, exist_ok=True)
    shutil.copyfile(recipe, os.path.join(a.out, "recipe.yml"))
    mf = open(os.path.join(a.out, "metrics.jsonl"), "w")

    def do_eval(step):
        t0 = time.time()
        rec = {"kind": "eval", "step": step}
        ces = []
        P = {n: p.detach() for n, p in tr.P.items()}
        for name, docs in sets:
            ce, n = evaluate(P, cfg, docs, MB)
            rec[f"eval/{name}/ce"] = ce
            rec[f"eval/{name}/ppl"] = math.exp(ce)
            rec[f"eval/{name}/tokens"] = n
            rec[f"eval/{name}/docs"] = len(docs)
            ces.append(ce)
        if ces:
            rec["eval/macro/ce"] = sum(ces) / len(ces)
            rec["eval/macro/ppl"] = math.exp(rec["eval/macro/ce"])
        rec["eval/seconds"] = time.time() - t0
        mf.write(json.dumps(rec) + "\n")
        mf.flush()
        return rec

    def due(step):
        return step == 0 or step == S or (ev["interval"] > 0 and step % ev["interval"] == 0)

    t_start = time.time()
    r0 = do_eval(0)
    print(f"ref: step 0 eval macro ce {r0.get('eval/macro/ce', float('nan')):.4f}")
    for s in range(S):
        ids, lab = batch(s)
        loss, ce, z, _ = tr.accumulate(ids, lab)
        norm, lr = tr.update()
        step = s + 1
        mf.write(json.dumps({"kind": "train", "step": step, "loss": loss, "ce": ce,
                             "z_loss": z, "grad_norm": norm, "lr": lr,
                             "tokens": step * G * T}) + "\n")
        if due(step):
            r = do_eval(step)
            print(f"ref: step {step} loss {loss:.4f} lr {lr:.3e} grad_norm {norm:.3f} "
                  f"eval macro ce {r.get('eval/macro/ce', float('nan')):.4f} "
                  f"({time.time() - t_start:.1f}s)")
    mf.close()
    st.write(os.path.join(a.out, "model.safetensors"),
             {n: p.detach().to(torch.float32).numpy() for n, p in tr.P.items()},
             metadata={"format": "pt"})
    print(f"ref: wrote {a.out}/metrics.jsonl, recipe.yml, model.safetensors "
          f"({time.time() - t_start:.1f}s)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("dir")
    d.add_argument("--train-tokens", type=int, default=200000)
    d.add_argument("--heldout-docs", type=int, default=40)
    d.add_argument("--seed", type=int, default=7)
    i = sub.add_parser("init")
    i.add_argument("file")
    i.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("train")
    t.add_argument("--olmo-run", required=True, help="the olmo.c run directory (recipe.yml)")
    t.add_argument("--out", required=True)
    t.add_argument("--init", required=True)
    t.add_argument("--olmo", default=os.environ.get("OLMO_BIN", "build/olmo"))
    t.add_argument("--verify-batches", type=int, default=4)
    t.add_argument("--threads", type=int, default=0)
    t.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                   help="training precision of the reference (float32 = olmo.c's CPU precision)")
    t.add_argument("--lr-scale", type=float, default=1.0,
                   help="fault injection for tests: multiply the peak LR (the check must fail)")
    a = ap.parse_args()
    return {"data": cmd_data, "init": cmd_init, "train": cmd_train}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
