"""gguf_bound.py: the tolerance of tests/test_gguf.sh for the rounded GGUF types, per document.

    /usr/bin/python3 tests/gguf_bound.py HF_DIR T DOC.npy...   -> JSON [{ce, f16, bf16, q8_0}]

A GGUF of type f16, bf16 or q8_0 rounds every weight matrix (norms stay f32), and llama.cpp's
CPU matmul rounds each matmul's input activations to the same type (ggml's vec_dot_type:
F16 -> F16, BF16 -> BF16, Q8_0 -> Q8_0 blocks of 32 along the input dimension). With L the
document's CE (olmo eval's: mean over its targets of -log softmax over all padded rows), to
first order

    |dL| <= sum_W |dL/dW| r(W) + sum_matmuls |dL/dX| r(X)

where r bounds the rounding error of one element: f16 max(2^-11 |w|, 2^-25) (round to
nearest, subnormal step 2^-24), bf16 2^-8 |w|, q8_0 amax (1/254 + 2^-11) with amax the
largest |value| of its 32-block (q = round(w / d), d = amax / 127 stored as f16: |q d' - w|
<= d / 2 + 127 d 2^-11). The gradients are taken in float64 with tests/ref/olmo_ref.py on
the F32 export (HF_DIR, written by olmo export-hf: the same weights as the GGUF before
rounding), each matmul input as its own node (the residual stream is not rounded, only its
copy fed to the matmul). Second-order terms are O(r^2) and left out: the bound is a
first-order one, not a proof. It also prints the float64 CE itself.
"""
import json
import sys

import numpy as np
import torch

sys.path.insert(0, "tests/ref")
import olmo_ref  # noqa: E402
import safetensors_io as st  # noqa: E402


def r_elem(x, kind):
    a = x.abs()
    if kind == "f16":
        return torch.clamp(a * 2.0**-11, min=2.0**-25)
    if kind == "bf16":
        return a * 2.0**-8
    blocks = a.reshape(*a.shape[:-1], a.shape[-1] // 32, 32)   # q8_0: along the last (input) dim
    amax = blocks.max(dim=-1, keepdim=True).values
    return (amax * (1 / 254 + 2.0**-11)).expand_as(blocks).reshape(a.shape)


def main():
    hf, T, docs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    c = json.load(open(f"{hf}/config.json"))
    cfg = olmo_ref.Config(n_heads=c["num_attention_heads"], n_kv_heads=c["num_key_value_heads"],
                          head_dim=c["head_dim"], rms_eps=c["rms_norm_eps"], rope_theta=c["rope_theta"],
                          n_layers=c["num_hidden_layers"], layer_types=c["layer_types"],
                          sliding_window=c["sliding_window"], rope_scaling=c.get("rope_scaling"))
    raw = st.read(f"{hf}/model.safetensors")
    out = []
    for path in docs:
        d = np.fromfile(path, dtype=np.uint32).astype(np.int64)
        m = min(len(d) - 1, T)
        P = {k: torch.from_numpy(np.ascontiguousarray(v)).double().requires_grad_(v.ndim == 2) for k, v in raw.items()}
        inputs = {}

        def mm(x, w):
            # The copy the matmuls read (llama.cpp rounds this one, not the residual stream);
            # q/k/v (and gate/up) read one x, rounded identically: one node, gradients summed.
            if id(x) not in inputs:
                inputs[id(x)] = (x, x.clone())   # keep x alive so its id is not reused
                inputs[id(x)][1].retain_grad()
            return inputs[id(x)][1] @ w.t()

        logits = olmo_ref.forward(P, cfg, torch.from_numpy(d[None, :m]), mm=mm)[0]
        loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(d[1:m + 1]))
        loss.backward()
        res = {"ce": loss.item()}
        leaves = [(P[k].grad, P[k].detach()) for k in P if P[k].grad is not None]
        leaves += [(xin.grad, xin.detach()) for _, xin in inputs.values()]
        for kind in ("f16", "bf16", "q8_0"):
            terms = [g.abs() * r_elem(v, kind) for g, v in leaves]
            res[kind] = sum(t.sum().item() for t in terms)                                 # worst case
            res[kind + "_sigma"] = (sum((t * t).sum().item() for t in terms) / 3) ** 0.5   # random rounding
        out.append(res)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
