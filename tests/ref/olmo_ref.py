#!/usr/bin/python3
"""OLMo 3 reference implementation in plain PyTorch (Debian's torch 1.13, /usr/bin/python3).

Written from the equations in docs/olmo3.md section 1 (not from the C code). It is a
reference, not a fast implementation: the T x T attention scores are materialized.

Modes:
  --selftest                     gradcheck + attention-mask checks on tiny configs
  --write-dump DIR --preset tiny  write a parity dump (same files as the C tool) from the
                                  reference itself (fp32 by default), for testing check_parity.py
  --bench ...                     tokens/s of a training step on CPU (--autocast bf16: the
                                  forward under torch.autocast(cpu, bfloat16), fp32 master
                                  weights and loss, same AdamW)
"""
import argparse
import contextlib
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402

EMB = "model.embed_tokens.weight"
IGNORE = -100

CONFIG_KEYS = [
    "vocab_size", "padded_vocab", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim",
    "mlp_hidden", "rope_theta", "rms_eps", "layer_types", "sliding_window", "seq_len",
    "global_batch", "micro_batch", "steps", "z_loss", "lr", "beta1", "beta2", "eps",
    "weight_decay", "decay_embedding", "max_grad_norm", "schedule", "warmup_steps", "max_steps",
    "alpha_f",
]

TINY = dict(
    vocab_size=1000, padded_vocab=1024, d_model=64, n_layers=4, n_heads=4, n_kv_heads=2,
    head_dim=16, mlp_hidden=128, rope_theta=500000.0, rms_eps=1e-6,
    layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    sliding_window=8, seq_len=32, global_batch=4, micro_batch=2, steps=5, z_loss=1e-5,
    lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, decay_embedding=False,
    max_grad_norm=4.0, schedule="cosine", warmup_steps=2, max_steps=5, alpha_f=0.1,
)


class Config(dict):
    """A dict with attribute access, keys as in the dump's config.json."""

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k)

    def check(self):
        missing = [k for k in CONFIG_KEYS if k not in self]
        if missing:
            raise ValueError(f"config: missing keys {missing}")
        assert self.n_heads % self.n_kv_heads == 0, "n_kv_heads must divide n_heads"
        assert self.head_dim % 2 == 0
        assert len(self.layer_types) == self.n_layers
        assert all(t in ("sliding_attention", "full_attention") for t in self.layer_types)
        assert self.padded_vocab >= self.vocab_size
        return self


def param_shapes(cfg):
    """Ordered {HF name: HF shape}."""
    D, H, KV, hd, M, V = (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                          cfg.mlp_hidden, cfg.padded_vocab)
    s = {EMB: (V, D)}
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        s[p + "self_attn.q_proj.weight"] = (H * hd, D)
        s[p + "self_attn.k_proj.weight"] = (KV * hd, D)
        s[p + "self_attn.v_proj.weight"] = (KV * hd, D)
        s[p + "self_attn.o_proj.weight"] = (D, H * hd)
        s[p + "self_attn.q_norm.weight"] = (H * hd,)
        s[p + "self_attn.k_norm.weight"] = (KV * hd,)
        s[p + "post_attention_layernorm.weight"] = (D,)
        s[p + "post_feedforward_layernorm.weight"] = (D,)
        s[p + "mlp.gate_proj.weight"] = (M, D)
        s[p + "mlp.up_proj.weight"] = (M, D)
        s[p + "mlp.down_proj.weight"] = (D, M)
    s["model.norm.weight"] = (D,)
    s["lm_head.weight"] = (V, D)
    return s


def is_norm(name):
    return name.endswith("norm.weight")


def init_params(cfg, seed=0, dtype=torch.float32):
    """OLMo-core InitMethod.normal: trunc normal std 0.02 cut at +-0.06 for every linear
    weight and the embedding, norms = 1 (docs/olmo3.md section 2). Drawn in fp32."""
    g = torch.manual_seed(seed)
    del g
    P = {}
    for n, shp in param_shapes(cfg).items():
        t = torch.empty(shp, dtype=torch.float32)
        if is_norm(n):
            t.fill_(1.0)
        else:
            torch.nn.init.trunc_normal_(t, mean=0.0, std=0.02, a=-0.06, b=0.06)
        P[n] = t.to(dtype)
    return P


# ----------------------------------------------------------------------------- model

def rmsnorm(x, w, eps):
    return w * (x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps))


def yarn_inv_freq(head_dim, theta, rs, flavor="olmo_core"):
    """YaRN frequencies (arXiv 2309.00071 s.3.2-3.4) in float64, written from the equations.
    rs: the HF-style dict {factor, beta_fast, beta_slow, original_max_position_embeddings}.
    d(n) = head_dim * ln(L / (2 pi n)) / (2 ln theta) is the dimension index whose frequency
    turns n times over the original context L; lo = max(floor(d(beta_fast)), 0),
    hi = ceil(d(beta_slow)) clipped; ramp_j = clamp((j - lo) / (hi - lo), 0, 1);
    inv_freq_j = base_j / factor * ramp_j + base_j * (1 - ramp_j).
    flavor "olmo_core" (the recipe: OLMo-core YaRNRoPEScalingConfig.compute_scaled_inv_freq):
    hi clipped to head_dim/2 - 1, span floored at 1e-3. flavor "hf" (transformers
    _compute_yarn_parameters, truncate=True): hi clipped to head_dim - 1, hi += 0.001 when
    lo == hi. They differ only when ceil(d(beta_slow)) > head_dim/2 - 1 (or lo > hi)."""
    half = head_dim // 2
    j = torch.arange(half, dtype=torch.float64)
    base = theta ** (-2.0 * j / head_dim)
    L = rs["original_max_position_embeddings"]

    def dim_of(n_rot):
        return head_dim * math.log(L / (n_rot * 2 * math.pi)) / (2 * math.log(theta))

    lo = max(math.floor(dim_of(rs["beta_fast"])), 0)
    if flavor == "olmo_core":
        hi = min(math.ceil(dim_of(rs["beta_slow"])), half - 1)
        ramp = ((j - lo) / max(hi - lo, 1e-3)).clamp(0, 1)
    elif flavor == "hf":
        hi = min(math.ceil(dim_of(rs["beta_slow"])), head_dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = ((j - lo) / (hi - lo)).clamp(0, 1)
    else:
        raise ValueError(flavor)
    return base / rs["factor"] * ramp + base * (1 - ramp)


def yarn_attention_factor(rs):
    """cos and sin are both multiplied by this (YaRN s.3.4; OLMo-core and HF get_mscale)."""
    return 0.1 * math.log(rs["factor"]) + 1.0


def rope_tables(T, head_dim, theta, dtype, rope_scaling=None):
    # computed in float64 then cast (positions 0..T-1 within each instance, not reset at
    # document boundaries: docs/olmo3.md s.1). rope_scaling: None (plain) or a yarn dict.
    if rope_scaling is None:
        j = torch.arange(0, head_dim // 2, dtype=torch.float64)
        inv_freq = theta ** (-2.0 * j / head_dim)
        mscale = 1.0
    else:
        assert rope_scaling.get("rope_type", "yarn") == "yarn", rope_scaling
        inv_freq = yarn_inv_freq(head_dim, theta, rope_scaling)
        mscale = yarn_attention_factor(rope_scaling)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T, hd/2)
    ang = torch.cat([ang, ang], dim=-1)  # (T, hd)
    return (mscale * torch.cos(ang)).to(dtype), (mscale * torch.sin(ang)).to(dtype)


def doc_ids(ids, eos_id):
    """(B, T) document index of each position: the number of EOS tokens strictly before it,
    so an EOS belongs to the document it ends (OLMo-core get_document_lengths)."""
    is_eos = (ids == eos_id).to(torch.int64)
    return torch.cumsum(is_eos, dim=1) - is_eos


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, cos, sin):  # x: (B, heads, T, hd)
    return x * cos + rotate_half(x) * sin


def attn_mask(T, window):
    """Bool (T, T): True where query i may attend key j. window None = full causal."""
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    m = j <= i
    if window is not None:
        m = m & (j >= i - window + 1)
    return m


def attention(q, k, v, window, doc=None):
    """q: (B, H, T, hd); k, v: (B, KV, T, hd). GQA: query head h uses kv head h // (H/KV).
    doc: (B, T) document ids (document mask: query i sees key j only if doc[i] == doc[j])."""
    B, H, T, hd = q.shape
    rep = H // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    m = attn_mask(T, window)
    if doc is not None:
        m = m[None] & (doc[:, :, None] == doc[:, None, :])  # (B, T, T)
        m = m[:, None]
    s = s.masked_fill(~m, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def attention_naive(q, k, v, window, doc=None):
    """Per-query loop over explicitly enumerated keys (for the selftest)."""
    B, H, T, hd = q.shape
    rep = H // k.shape[1]
    out = torch.zeros_like(q)
    for b in range(B):
        for h in range(H):
            kh = h // rep
            for i in range(T):
                lo = 0 if window is None else max(0, i - window + 1)
                if doc is not None:  # first position of query i's document
                    lo = max(lo, int((doc[b] == doc[b, i]).nonzero()[0]))
                keys = k[b, kh, lo:i + 1]  # (n, hd)
                vals = v[b, kh, lo:i + 1]
                sc = (keys @ q[b, h, i]) / math.sqrt(hd)
                p = torch.exp(sc - sc.max())
                p = p / p.sum()
                out[b, h, i] = p @ vals
    return out


def linear(x, w):
    return x @ w.t()


def forward(P, cfg, ids, attn_fn=attention, mm=linear):
    """ids: (B, T) int64 -> logits (B, T, padded_vocab). mm(x, W) computes x W^T for every
    weight matrix (a hook for tests/gguf_bound.py, which needs each matmul's input)."""
    B, T = ids.shape
    H, KV, hd, eps = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.rms_eps
    x = P[EMB][ids]
    cos, sin = rope_tables(T, hd, cfg.rope_theta, x.dtype)
    rs = cfg.get("rope_scaling")  # YaRN on the full-attention layers only
    ycos, ysin = rope_tables(T, hd, cfg.rope_theta, x.dtype, rs) if rs else (cos, sin)
    doc = doc_ids(ids, cfg.eos_id) if cfg.get("document_mask") else None
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        q = mm(x, P[p + "self_attn.q_proj.weight"])
        k = mm(x, P[p + "self_attn.k_proj.weight"])
        v = mm(x, P[p + "self_attn.v_proj.weight"])
        q = rmsnorm(q, P[p + "self_attn.q_norm.weight"], eps)  # over all heads, before split
        k = rmsnorm(k, P[p + "self_attn.k_norm.weight"], eps)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, KV, hd).transpose(1, 2)
        v = v.view(B, T, KV, hd).transpose(1, 2)
        full = cfg.layer_types[i] == "full_attention"
        c, s = (ycos, ysin) if full else (cos, sin)
        q = apply_rope(q, c, s)
        k = apply_rope(k, c, s)
        window = None if full else cfg.sliding_window
        a = attn_fn(q, k, v, window, doc)
        a = mm(a.transpose(1, 2).reshape(B, T, H * hd), P[p + "self_attn.o_proj.weight"])
        h = x + rmsnorm(a, P[p + "post_attention_layernorm.weight"], eps)
        m = F.silu(mm(h, P[p + "mlp.gate_proj.weight"])) * mm(h, P[p + "mlp.up_proj.weight"])
        m = mm(m, P[p + "mlp.down_proj.weight"])
        x = h + rmsnorm(m, P[p + "post_feedforward_layernorm.weight"], eps)
    x = rmsnorm(x, P["model.norm.weight"], eps)
    return mm(x, P["lm_head.weight"])


def loss_sums(logits, labels, z_coef, denom):
    """Returns (loss, ce, z) with loss = ce + z, each = sum over non-masked tokens / denom.
    ce token = logsumexp - logit[label]; z token = z_coef * logsumexp^2. The softmax covers
    all padded_vocab rows."""
    lse = torch.logsumexp(logits, dim=-1)
    valid = labels != IGNORE
    lab = torch.where(valid, labels, torch.zeros_like(labels))
    tgt = logits.gather(-1, lab.unsqueeze(-1)).squeeze(-1)
    vf = valid.to(logits.dtype)
    ce = ((lse - tgt) * vf).sum() / denom
    z = z_coef * ((lse * lse) * vf).sum() / denom
    return ce + z, ce, z


def lr_at(step, cfg):
    """Steps numbered from 1."""
    peak, w, S_total = cfg.lr, cfg.warmup_steps, cfg.max_steps
    if step < w:
        return peak * step / w
    eta_min = cfg.alpha_f * peak
    if cfg.schedule == "constant":
        return peak
    S = S_total - w
    s = step - w
    if cfg.schedule == "cosine":
        return eta_min + (peak - eta_min) * (1.0 + math.cos(math.pi * s / S)) / 2.0
    if cfg.schedule == "linear":
        return peak - (peak - eta_min) * s / S
    raise ValueError(f"unknown schedule {cfg.schedule}")


# ----------------------------------------------------------------------------- training

class Trainer:
    """Holds leaf parameters (HF names) and a torch AdamW; one call to step() = one global
    batch (gradient accumulation over micro-batches, global-token-count denominator,
    clip_grad_norm_, LR set on the param groups, AdamW step)."""

    def __init__(self, cfg, params, dtype=torch.float64, band_rho=None):
        self.cfg = cfg
        self.band_rho = band_rho  # see _track_band()
        self.band_rho_clip = 0.0  # added to band_rho on clipped steps (the clip factor's error)
        self.delta = {}           # the last step's perturbation bound per element
        self.band = {}
        self._dsum = {}
        self.dtype = dtype
        self.names = list(param_shapes(cfg).keys())
        self.P = {}
        for n in self.names:
            t = torch.as_tensor(np.asarray(params[n])) if not torch.is_tensor(params[n]) else params[n]
            assert tuple(t.shape) == param_shapes(cfg)[n], (n, tuple(t.shape))
            self.P[n] = t.detach().to(dtype).clone().requires_grad_(True)
        decay, nodecay = [], []
        for n in self.names:
            (nodecay if (n == EMB and not cfg.decay_embedding) else decay).append(self.P[n])
        groups = [{"params": decay, "weight_decay": cfg.weight_decay}]
        if nodecay:
            groups.append({"params": nodecay, "weight_decay": 0.0})
        self.opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                                     eps=cfg.eps)
        self.n_steps = 0
        # Bench only (--autocast bf16): run forward() under torch.autocast(cpu, this dtype);
        # the logits go back to self.dtype before the loss (autocast on the CPU would run
        # logsumexp in bf16). None: plain self.dtype everywhere (the reference).
        self.autocast = None

    def _amp(self):
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type="cpu", dtype=self.autocast)

    def accumulate(self, ids, labels, keep_logits=False):
        """Forward+backward of one global batch into .grad. Returns (loss, ce, z, logits|None)."""
        cfg = self.cfg
        ids = torch.as_tensor(np.asarray(ids), dtype=torch.int64)
        labels = torch.as_tensor(np.asarray(labels), dtype=torch.int64)
        G = ids.shape[0]
        denom = max(int((labels != IGNORE).sum()), 1)
        for p in self.P.values():
            p.grad = None
        tot = [0.0, 0.0, 0.0]
        logits_all = []
        mb = cfg.micro_batch
        for b0 in range(0, G, mb):
            with self._amp():
                logits = forward(self.P, cfg, ids[b0:b0 + mb]).to(self.dtype)  # no-op without autocast
            loss, ce, z = loss_sums(logits, labels[b0:b0 + mb], cfg.z_loss, denom)
            loss.backward()
            tot[0] += loss.item()
            tot[1] += ce.item()
            tot[2] += z.item()
            if keep_logits:
                logits_all.append(logits.detach())
        for n in self.names:  # a parameter never reached still has a (zero) gradient
            if self.P[n].grad is None:
                self.P[n].grad = torch.zeros_like(self.P[n])
        return tot[0], tot[1], tot[2], (torch.cat(logits_all) if keep_logits else None)

    def grads(self):
        return {n: self.P[n].grad.detach().clone() for n in self.names}

    def update(self):
        """Clip, set LR, AdamW step. Returns (grad_norm before clipping, lr)."""
        cfg = self.cfg
        plist = [self.P[n] for n in self.names]
        norm = float(torch.nn.utils.clip_grad_norm_(plist, cfg.max_grad_norm))
        self.clipped = cfg.max_grad_norm > 0 and cfg.max_grad_norm / (norm + 1e-6) < 1
        self.n_steps += 1
        lr = lr_at(self.n_steps, cfg)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.opt.step()
        if self.band_rho is not None:
            self._track_band(lr)
        return norm, lr

    def set_state(self, t, m, v):
        """Continue from another run's state after t updates: AdamW's m and v per name
        (the parameters are the ones given to the constructor)."""
        self.n_steps = t
        for n in self.names:
            p = self.P[n]
            self.opt.state[p] = {"step": torch.tensor(float(t)),
                                 "exp_avg": torch.as_tensor(np.asarray(m[n])).to(self.dtype).clone(),
                                 "exp_avg_sq": torch.as_tensor(np.asarray(v[n])).to(self.dtype).clone()}

    def moments(self):
        return {n: (self.opt.state[self.P[n]]["exp_avg"].detach().clone(),
                    self.opt.state[self.P[n]]["exp_avg_sq"].detach().clone()) for n in self.names}

    def _track_band(self, lr):
        """First-order bound on how far AdamW can move each parameter element when every
        clipped gradient of every step so far is perturbed by up to band_rho * max|g_t| (per
        tensor; 0 where the reference gradient is exactly 0): d(update_t) <= (1 + c_t) * sum_s delta_s / (sqrt(vhat_t) + eps), capped at
        2 c_t, where c_t bounds |mhat/sqrt(vhat)| (Cauchy-Schwarz over the moment sums).
        Accumulated over steps times lr_t into self.band[name] (elementwise)."""
        cfg = self.cfg
        b1, b2, eps = cfg.beta1, cfg.beta2, cfg.eps
        t = self.n_steps
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        c_t = (1 - b1) / bc1 * math.sqrt(bc2 / (1 - b2)) * math.sqrt(
            sum((b1 * b1 / b2) ** k for k in range(t)))
        with torch.no_grad():
            for n in self.names:
                p = self.P[n]
                # elements whose reference gradient is exactly 0 (e.g. embedding rows of
                # tokens absent from the batch) are structural zeros: no perturbation there
                rho = self.band_rho + (self.band_rho_clip if self.clipped else 0.0)
                delta = rho * float(p.grad.abs().max()) * (p.grad != 0).to(p.dtype)
                self.delta[n] = delta
                self._dsum[n] = self._dsum.get(n, 0.0) + delta
                vhat = self.opt.state[p]["exp_avg_sq"] / bc2
                du = torch.clamp((1 + c_t) * self._dsum[n] / (vhat.sqrt() + eps), max=2 * c_t)
                self.band[n] = self.band.get(n, 0.0) + lr * du

    def params(self):
        return {n: self.P[n].detach().clone() for n in self.names}


def train(cfg, params, input_ids, labels, steps=None, dtype=torch.float64, record_step0=True,
          band_rho=None, record_steps=False):
    """Train `steps` optimizer steps on batches input_ids/labels (steps, G, T).
    Returns dict: metrics (list), final (params), if record_step0: logits0, grads0, if
    band_rho: adam_band {name: elementwise bound} (see Trainer._track_band), and if
    record_steps: steps {"step<k>.{grad,param,m,v}.<name>": tensor} after every step k
    (the gradient before clipping), the contents of a dump's steps.safetensors."""
    steps = cfg.steps if steps is None else steps
    tr = Trainer(cfg, params, dtype, band_rho)
    out = {"metrics": []}
    for s in range(steps):
        keep = record_step0 and s == 0
        loss, ce, z, logits = tr.accumulate(input_ids[s], labels[s], keep_logits=keep)
        if keep:
            out["logits0"] = logits
            out["grads0"] = tr.grads()
        grads = tr.grads() if record_steps else None
        norm, lr = tr.update()
        out["metrics"].append({"step": s + 1, "loss": loss, "ce": ce, "z_loss": z,
                               "grad_norm": norm, "lr": lr})
        if record_steps:
            rec = out.setdefault("steps", {})
            params_now, moments = tr.params(), tr.moments()
            for n in tr.names:
                rec[f"step{s + 1}.grad.{n}"] = grads[n]
                rec[f"step{s + 1}.param.{n}"] = params_now[n]
                rec[f"step{s + 1}.m.{n}"], rec[f"step{s + 1}.v.{n}"] = moments[n]
    out["final"] = tr.params()
    if band_rho is not None:
        out["adam_band"] = {n: b.detach().clone() for n, b in tr.band.items()}
    return out


# ----------------------------------------------------------------------------- dumps

def make_batches(cfg, seed=1):
    """Random (steps, G, T) inputs; labels = next token, last position masked, plus a few
    random masked positions."""
    rng = np.random.default_rng(seed)
    S, G, T = cfg.steps, cfg.global_batch, cfg.seq_len
    toks = rng.integers(0, cfg.vocab_size, size=(S, G, T + 1))
    ids = toks[:, :, :T].astype(np.int32)
    labels = toks[:, :, 1:].astype(np.int32)
    labels[:, :, T - 1] = IGNORE
    extra = rng.random((S, G, T)) < 0.08
    labels[extra] = IGNORE
    labels[:, 0, : T // 4] = IGNORE  # one instance with a masked prefix (like padding)
    return ids, labels


def load_dump_inputs(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = Config(json.load(f)).check()
    init = st.read(os.path.join(d, "init.safetensors"))
    batch = st.read(os.path.join(d, "batch.safetensors"))
    return cfg, init, batch


def write_dump(d, cfg, seed=0, dtype=torch.float32, perturb=None):
    """Write the parity dump from this reference. perturb: list of 'file:tensor=rel', e.g.
    'step0:grad.lm_head.weight=1e-3': multiply the element of largest |x| by (1+rel);
    for metrics use 'metrics:loss=1e-3' (step 1's value)."""
    os.makedirs(d, exist_ok=True)
    cfg = Config(cfg).check()
    init = init_params(cfg, seed, torch.float32)
    ids, labels = make_batches(cfg, seed + 1)
    res = train(cfg, init, ids, labels, dtype=dtype, record_steps=True)
    f32 = lambda t: t.detach().to(torch.float32).numpy()  # noqa: E731
    files = {
        "init": {n: f32(t) for n, t in init.items()},
        "batch": {"input_ids": ids, "labels": labels},
        "step0": dict([("logits", f32(res["logits0"]))] +
                      [("grad." + n, f32(g)) for n, g in res["grads0"].items()]),
        "final": {n: f32(t) for n, t in res["final"].items()},
        "steps": {n: f32(t) for n, t in res["steps"].items()},
    }
    metrics = res["metrics"]
    for spec in perturb or []:
        key, rel = spec.split("=")
        fname, tname = key.split(":", 1)
        rel = float(rel)
        if fname == "metrics":
            metrics[0][tname] *= (1.0 + rel)
        else:
            a = files[fname][tname]
            i = np.unravel_index(np.argmax(np.abs(a)), a.shape)
            a[i] = a[i] * (1.0 + rel)
        print(f"perturbed {key} by relative {rel}")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(cfg), f, indent=1)
    for name, t in files.items():
        st.write(os.path.join(d, name + ".safetensors"), t)
    with open(os.path.join(d, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    return res


# ----------------------------------------------------------------------------- selftest

def selftest():
    torch.manual_seed(0)
    ok = True

    def report(name, good, info=""):
        nonlocal ok
        ok &= bool(good)
        print(f"{'ok  ' if good else 'FAIL'} {name} {info}")

    # 1. parameter count of OLMo 3 7B from shapes (docs/olmo3.md section 1)
    c7 = Config(TINY)
    c7.update(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32, head_dim=128,
              mlp_hidden=11008, padded_vocab=100352, vocab_size=100278,
              layer_types=["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(32)])
    shp = param_shapes(c7)
    tot = sum(int(np.prod(s)) for s in shp.values())
    blk = sum(int(np.prod(s)) for n, s in shp.items() if n.startswith("model.layers.0."))
    report("7B param count", tot == 7298617344 and blk == 202391552, f"{tot} {blk}")

    # 2. masked attention == naive per-query loop (GQA, window < T, and full)
    q = torch.randn(2, 4, 11, 8, dtype=torch.float64)
    k = torch.randn(2, 2, 11, 8, dtype=torch.float64)
    v = torch.randn(2, 2, 11, 8, dtype=torch.float64)
    for w in (None, 1, 4, 11, 50):
        d = (attention(q, k, v, w) - attention_naive(q, k, v, w)).abs().max().item()
        report(f"attention == naive loop, window={w}", d < 1e-12, f"maxdiff {d:.2e}")

    # tiny model config for the model-level checks
    cfg = Config(TINY)
    cfg.update(vocab_size=13, padded_vocab=16, d_model=8, n_layers=2, n_heads=2, n_kv_heads=1,
               head_dim=4, mlp_hidden=12, sliding_window=3, seq_len=7, global_batch=2,
               micro_batch=1, z_loss=0.1, layer_types=["sliding_attention", "full_attention"])
    cfg.check()
    P = init_params(cfg, 3, torch.float64)
    for n in P:  # perturb norms away from 1 so their gradients are generic
        if is_norm(n):
            P[n] = P[n] + 0.1 * torch.randn_like(P[n])
        else:
            P[n] = P[n] * 10  # bigger weights: a less linear function for gradcheck
    ids = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
    labels = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
    labels[0, 2] = IGNORE
    labels[1, 6] = IGNORE
    denom = int((labels != IGNORE).sum())

    # 3. whole-model forward with the naive attention loop
    d = (forward(P, cfg, ids) - forward(P, cfg, ids, attention_naive)).abs().max().item()
    report("model forward, masked vs naive attention", d < 1e-12, f"maxdiff {d:.2e}")

    # 4. gradcheck of the loss w.r.t. every parameter (float64)
    names = list(P.keys())

    def f(*ts):
        return loss_sums(forward(dict(zip(names, ts)), cfg, ids), labels, cfg.z_loss, denom)[0]

    inputs = tuple(P[n].clone().requires_grad_(True) for n in names)
    t0 = time.time()
    good = torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7, rtol=1e-5, raise_exception=False)
    report("gradcheck (GQA, window<T, z-loss 0.1, masked labels)", good, f"{time.time() - t0:.1f}s")

    # 5. loss decomposition against a direct formula
    logits = forward(P, cfg, ids)
    loss, ce, z = loss_sums(logits, labels, cfg.z_loss, denom)
    lp = torch.log_softmax(logits, -1)
    valid = labels != IGNORE
    ce2 = -lp[valid].gather(-1, labels[valid][:, None]).sum() / denom
    z2 = cfg.z_loss * (torch.logsumexp(logits, -1)[valid] ** 2).sum() / denom
    report("ce/z-loss vs log_softmax formula",
           abs(ce - ce2).item() < 1e-12 and abs(z - z2).item() < 1e-12 and abs(loss - ce - z).item() < 1e-12)

    # 6. gradient accumulation: micro_batch 1 == micro_batch 2
    ids3 = ids[None].numpy()
    lab3 = labels[None].numpy()
    t1 = Trainer(cfg, P)
    l1 = t1.accumulate(ids3[0], lab3[0])[0]
    g1 = t1.grads()
    cfg2 = Config(cfg)
    cfg2["micro_batch"] = 2
    t2 = Trainer(cfg2, P)
    l2 = t2.accumulate(ids3[0], lab3[0])[0]
    g2 = t2.grads()
    d = max((g1[n] - g2[n]).abs().max().item() for n in names)
    report("grad accumulation micro 1 == micro 2", d < 1e-13 and abs(l1 - l2) < 1e-13, f"{d:.1e}")

    # 7. RoPE: rotated q.k depends only on the offset i-j
    cos, sin = rope_tables(20, 8, 500000.0, torch.float64)
    qv = torch.randn(8, dtype=torch.float64)
    kv = torch.randn(8, dtype=torch.float64)
    Q = apply_rope(qv.expand(1, 1, 20, 8), cos, sin)[0, 0]
    K = apply_rope(kv.expand(1, 1, 20, 8), cos, sin)[0, 0]
    d = abs((Q[7] @ K[4]) - (Q[13] @ K[10])).item()
    report("RoPE relative-position invariance", d < 1e-12, f"{d:.1e}")

    # 8. sliding window >= T equals full attention; window 1 = attend to self only
    cfgw = Config(cfg)
    cfgw["sliding_window"] = cfg.seq_len
    cfgf = Config(cfg)
    cfgf["layer_types"] = ["full_attention"] * 2
    d = (forward(P, cfgw, ids) - forward(P, cfgf, ids)).abs().max().item()
    report("window >= T equals full attention", d == 0.0)
    d = (forward(P, cfg, ids) - forward(P, cfgf, ids)).abs().max().item()
    report("window < T changes the output", d > 1e-6, f"{d:.1e}")

    # 9. a causal check: changing the last token changes no earlier logits
    ids2 = ids.clone()
    ids2[:, -1] = (ids2[:, -1] + 1) % cfg.vocab_size
    d = (forward(P, cfg, ids)[:, :-1] - forward(P, cfg, ids2)[:, :-1]).abs().max().item()
    report("causality", d == 0.0)

    # 10. LR schedule values
    c = Config(TINY)
    lrs = [lr_at(s, c) for s in range(1, 6)]
    want = [5e-4, 1e-3, 1e-4 + 9e-4 * (1 + math.cos(math.pi / 3)) / 2,
            1e-4 + 9e-4 * (1 + math.cos(2 * math.pi / 3)) / 2, 1e-4]
    report("cosine LR schedule", max(abs(a - b) for a, b in zip(lrs, want)) < 1e-15, str(lrs))
    c["schedule"] = "linear"
    report("linear LR schedule", abs(lr_at(3, c) - (1e-3 - 9e-4 / 3)) < 1e-15 and abs(lr_at(5, c) - 1e-4) < 1e-15)
    c["schedule"] = "constant"
    report("constant LR schedule", lr_at(1, c) == 5e-4 and lr_at(4, c) == 1e-3)

    # 11. AdamW decoupled decay: embedding not decayed when decay_embedding false
    cz = Config(cfg)
    cz.update(lr=1e-2, weight_decay=0.5)
    tz = Trainer(cz, P)
    tz.accumulate(ids3[0], lab3[0])
    for n in names:
        tz.P[n].grad.zero_()
    tz.update()  # zero grads: only weight decay moves parameters (lr at step 1 = lr/2)
    lr1 = lr_at(1, cz)
    e = tz.P[EMB].detach()
    w = tz.P["lm_head.weight"].detach()
    report("AdamW: no decay on embedding, decay on lm_head",
           torch.equal(e, P[EMB]) and torch.allclose(w, P["lm_head.weight"] * (1 - lr1 * 0.5), atol=1e-15))

    # 12. YaRN (long-context stage): OLMo 3's numbers. head_dim 128, theta 5e5, L 8192:
    # d(32) = 18.08 -> lo 18, d(1) = 34.98 -> hi 35; frequencies j < 18 kept, j >= 35
    # divided by 8; attention factor 1 + 0.1 ln 8 = 1.2079. OLMo-core and HF agree here.
    y3 = dict(rope_type="yarn", factor=8.0, beta_fast=32, beta_slow=1, original_max_position_embeddings=8192)
    fo = yarn_inv_freq(128, 500000.0, y3, "olmo_core")
    fh = yarn_inv_freq(128, 500000.0, y3, "hf")
    base = 500000.0 ** (-torch.arange(64, dtype=torch.float64) * 2 / 128)
    good = (torch.equal(fo, fh) and torch.equal(fo[:19], base[:19]) and torch.allclose(fo[35:], base[35:] / 8, rtol=1e-15)
            and abs(fo[26].item() - base[26].item() * (1 - 8 / 17 + 8 / 17 / 8)) < 1e-15 * base[26].item())
    report("YaRN OLMo 3 frequencies (ramp j 18..35; OLMo-core == HF)", good)
    report("YaRN attention factor 0.1 ln 8 + 1", abs(yarn_attention_factor(y3) - 1.2079441541679836) < 1e-15)
    # Where they differ: the ramp end beyond head_dim/2 - 1 (OLMo-core clips it there, HF at
    # head_dim - 1, so HF never reaches full interpolation at the last frequency).
    yc = dict(rope_type="yarn", factor=4.0, beta_fast=32, beta_slow=1, original_max_position_embeddings=10 ** 5)
    fo, fh = yarn_inv_freq(16, 10000.0, yc, "olmo_core"), yarn_inv_freq(16, 10000.0, yc, "hf")
    report("YaRN OLMo-core vs HF differ when ceil(d(beta_slow)) > head_dim/2 - 1", (fo - fh).abs().max().item() > 0)

    # 13. YaRN on full layers only: sliding layers unchanged, full layers changed
    cy = Config(cfg)
    cy["rope_scaling"] = dict(y3, original_max_position_embeddings=4, factor=4.0)
    ids_ = ids
    d_full = (forward(P, cy, ids_) - forward(P, cfg, ids_)).abs().max().item()
    cys = Config(cy)
    cys["layer_types"] = ["sliding_attention", "sliding_attention"]
    cs_ = Config(cfg)
    cs_["layer_types"] = ["sliding_attention", "sliding_attention"]
    d_slide = (forward(P, cys, ids_) - forward(P, cs_, ids_)).abs().max().item()
    report("YaRN changes full layers only", d_full > 1e-6 and d_slide == 0.0, f"{d_full:.1e} {d_slide:.1e}")

    # 14. document mask: == naive loop; a document's logits do not depend on earlier
    # documents' tokens (positions stay absolute); the EOS belongs to the document it ends
    idsd = torch.tensor([[5, 1, 12, 2, 12, 7, 3], [12, 4, 4, 6, 9, 12, 12]])
    doc = doc_ids(idsd, 12)
    report("doc ids: EOS ends its document", doc.tolist() == [[0, 0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 1, 1, 2]],
           str(doc.tolist()))
    for w in (None, 2, 4):
        dq = torch.tensor([[0, 0, 1, 1, 1, 2, 3, 3, 3, 3, 3], [0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2]])
        d = (attention(q, k, v, w, dq) - attention_naive(q, k, v, w, dq)).abs().max().item()
        report(f"document-masked attention == naive loop, window={w}", d < 1e-12, f"maxdiff {d:.2e}")
    cd = Config(cfg)
    cd.update(document_mask=True, eos_id=12)
    idsb = idsd.clone()
    idsb[0, 0:2] = torch.tensor([9, 10])  # first document of row 0 (ends at its EOS, position 2)
    lo_a, lo_b = forward(P, cd, idsd), forward(P, cd, idsb)
    report("document mask isolates documents", (lo_a[0, 3:] - lo_b[0, 3:]).abs().max().item() == 0.0
           and (lo_a[0, :3] - lo_b[0, :3]).abs().max().item() > 1e-6
           and (forward(P, cfg, idsd)[0, 3:] - forward(P, cfg, idsb)[0, 3:]).abs().max().item() > 1e-6)

    # 15. gradcheck with YaRN and the document mask on
    cyd = Config(cy)
    cyd.update(document_mask=True, eos_id=12)

    def fyd(*ts):
        return loss_sums(forward(dict(zip(names, ts)), cyd, idsd), labels, cfg.z_loss, denom)[0]

    good = torch.autograd.gradcheck(fyd, inputs, eps=1e-6, atol=1e-7, rtol=1e-5, raise_exception=False)
    report("gradcheck with YaRN + document mask", good)

    print("selftest", "passed" if ok else "FAILED")
    return 0 if ok else 1


# ----------------------------------------------------------------------------- bench

def autocast_probe():
    """A TorchDispatchMode recording (op, output dtype) of every aten op below autocast: what
    torch.autocast actually ran in bf16. summary() -> one line."""
    import collections
    from torch.utils._python_dispatch import TorchDispatchMode

    class Probe(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            o = out[0] if isinstance(out, (tuple, list)) else out
            if isinstance(o, torch.Tensor) and o.is_floating_point():
                self.seen[(func.overloadpacket.__name__, str(o.dtype).replace("torch.", ""))] += 1
            return out

        def summary(self):
            def n(op, dt):
                return self.seen.get((op, dt), 0)
            mats = [f"{op} {n(op, 'bfloat16')}/{n(op, 'bfloat16') + n(op, 'float32')} bf16"
                    for op in ("mm", "bmm") if n(op, "bfloat16") + n(op, "float32")]
            views = {"_reshape_alias", "_unsafe_view", "view", "t", "transpose", "expand", "detach",
                     "clone", "_to_copy", "slice", "new_zeros", "mm", "bmm"}
            other = sorted({op for (op, dt) in self.seen if dt == "bfloat16" and op not in views})
            return (f"autocast (warmup step): {', '.join(mats)}; also in bf16: {', '.join(other)}; "
                    f"loss logsumexp {'float32' if n('logsumexp', 'float32') else 'bfloat16'}")
    return Probe()


def lcg_batch(B, T, vocab, seed=12345):
    """The tokens of `olmo bench --worker` (bench.c): a 64-bit LCG (Knuth MMIX constants,
    wrapping mod 2^64), token = (s >> 33) % vocab, over the flat (B*T) stream; labels =
    the next token in the same sequence, -100 at each sequence's last position."""
    mask = (1 << 64) - 1
    s = seed
    n = B * T
    flat = np.empty(n, dtype=np.int64)
    for i in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) & mask
        flat[i] = (s >> 33) % vocab
    lab = np.full(n, IGNORE, dtype=np.int64)
    nxt = (np.arange(n) + 1) % T != 0
    lab[:-1][nxt[:-1]] = flat[1:][nxt[:-1]]
    return flat.reshape(B, T).astype(np.int32), lab.reshape(B, T).astype(np.int32)


def bench(a):
    torch.set_num_threads(a.threads)
    V = ((a.vocab + 127) // 128) * 128
    cfg = Config(TINY)
    cfg.update(vocab_size=a.vocab, padded_vocab=V, d_model=a.d_model, n_layers=a.layers,
               n_heads=a.heads, n_kv_heads=a.kv_heads, head_dim=a.d_model // a.heads,
               mlp_hidden=a.mlp, seq_len=a.seq, global_batch=a.batch,
               micro_batch=a.micro_batch or a.batch, sliding_window=a.window or max(1, a.seq // 2),
               steps=a.steps + 1,
               layer_types=["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(a.layers)],
               # optimizer and schedule of `olmo bench --worker` (bench.c) unless overridden
               lr=a.lr, warmup_steps=a.warmup, max_steps=a.max_steps or max(a.steps + 1, a.warmup + 1), alpha_f=a.alpha_f,
               schedule="cosine", weight_decay=a.weight_decay, decay_embedding=bool(a.decay_embedding),
               z_loss=a.z_loss, max_grad_norm=a.clip, beta1=a.beta1, beta2=a.beta2, eps=a.eps)
    cfg.check()
    dtype = getattr(torch, a.dtype)
    if a.init_safetensors:  # olmo.c's param_init, written by the bench launcher
        P = st.read(a.init_safetensors)
        want = param_shapes(cfg)
        if set(P) != set(want) or any(tuple(P[n].shape) != want[n] for n in want):
            raise SystemExit(f"{a.init_safetensors}: tensors do not match the bench config")
        P = {n: torch.from_numpy(np.ascontiguousarray(P[n], dtype=np.float32)) for n in want}
        init = "olmo.c param_init (" + os.path.basename(a.init_safetensors) + ")"
    else:
        P = init_params(cfg, 0, torch.float32)
        init = "torch trunc_normal_ seed 0"
    ids, labels = lcg_batch(a.batch, a.seq, a.vocab, a.data_seed)  # the same batch every step, as bench.c
    tr = Trainer(cfg, P, dtype)
    del P  # the Trainer holds its own copy
    if a.autocast:
        tr.autocast = torch.bfloat16
    n_par = sum(int(np.prod(s)) for s in param_shapes(cfg).values())
    print(f"bench: params {n_par:,} padded_vocab {V} seq {a.seq} batch {a.batch} "
          f"micro {cfg.micro_batch} threads {a.threads} dtype {a.dtype} autocast {a.autocast or 'off'}")
    print(f"bench: init {init}; data LCG seed {a.data_seed}; lr {cfg.lr:g} cosine warmup {cfg.warmup_steps} "
          f"max_steps {cfg.max_steps} alpha_f {cfg.alpha_f:g} AdamW {cfg.beta1:g}/{cfg.beta2:g}/{cfg.eps:g} "
          f"wd {cfg.weight_decay:g} decay_embedding {int(cfg.decay_embedding)} clip {cfg.max_grad_norm:g} "
          f"z_loss {cfg.z_loss:g}")
    times = []
    for s in range(a.steps + 1):
        probe = autocast_probe() if a.autocast and s == 0 else contextlib.nullcontext()
        t0 = time.time()
        with probe:
            loss = tr.accumulate(ids, labels)[0]
        norm, lr = tr.update()
        dt = time.time() - t0
        tag = "warmup" if s == 0 else ""
        print(f"step {s + 1}: loss {loss:.6f} grad_norm {norm:.4f} lr {lr:.3e} {dt:.3f}s {tag}")
        if s == 0 and a.autocast:
            print(probe.summary())
        if s > 0:
            times.append(dt)
    tok = a.batch * a.seq
    tps = tok * len(times) / sum(times)
    print(f"loss: {loss:.8f}")
    print(f"peak RSS GiB: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.4f}")  # ru_maxrss: KiB
    print(f"tokens/s: {tps:.1f} (mean over {len(times)} steps after 1 warmup step)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--write-dump", metavar="DIR")
    ap.add_argument("--preset", default="tiny", choices=["tiny"])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="override a config value of the preset, e.g. --set z_loss=1e-2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--perturb", action="append", default=[], metavar="FILE:TENSOR=REL",
                    help="(with --write-dump) scale the largest-|x| element of one dumped tensor "
                         "by 1+REL, e.g. step0:grad.lm_head.weight=1e-3, final:model.norm.weight=1e-3, "
                         "metrics:loss=1e-3")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--mlp", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=100278)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=0)
    ap.add_argument("--window", type=int, default=0, help="sliding window (default seq/2)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--dtype", default=None, choices=["float32", "float64"])
    ap.add_argument("--autocast", default=None, choices=["bf16"],
                    help="(with --bench) forward under torch.autocast(cpu, bfloat16); needs --dtype float32")
    # --bench: olmo.c's worker run (bench.c): its init, data and optimizer settings
    ap.add_argument("--init-safetensors", metavar="PATH", default=None,
                    help="(with --bench) initial parameters (HF names, F32), e.g. olmo.c's param_init; "
                         "default: init_params seed 0")
    ap.add_argument("--data-seed", type=int, default=12345, help="(with --bench) LCG seed of the tokens")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="schedule length (default max(steps+1, warmup+1), as bench.c)")
    ap.add_argument("--alpha-f", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--decay-embedding", type=int, default=0, choices=[0, 1])
    ap.add_argument("--z-loss", type=float, default=1e-5)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.selftest:
        return selftest()
    if a.write_dump:
        cfg = Config(TINY)
        for kv in a.set:
            k, v = kv.split("=", 1)
            if k not in cfg:
                ap.error(f"unknown config key {k}")
            try:
                cfg[k] = json.loads(v)
            except ValueError:
                cfg[k] = v  # bare string, e.g. --set schedule=linear
        res = write_dump(a.write_dump, cfg, a.seed, getattr(torch, a.dtype or "float32"), a.perturb)
        for m in res["metrics"]:
            print(json.dumps(m))
        print(f"wrote {a.write_dump}")
        return 0
    if a.bench:
        a.dtype = a.dtype or "float32"
        if a.autocast and a.dtype != "float32":
            ap.error("--autocast bf16 needs --dtype float32 (fp32 master weights)")
        a.threads = a.threads or torch.get_num_threads()
        bench(a)
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
