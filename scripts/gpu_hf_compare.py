#!/usr/bin/env python3
"""gpu_hf_compare.py: our model vs Hugging Face transformers' Olmo3ForCausalLM, same
weights, same tokens, same GPU.

  python3 scripts/gpu_hf_compare.py --olmo build/olmo --test-cuda build/tests/test_cuda \
      --work /tmp/hfcmp [--preset olmo3-60m] [--T 512]

1. `test_cuda dump WORK PRESET T` writes random-init weights (model.safetensors +
   recipe.yml), tokens (2 rows), and our logits: CPU (fp32), GPU fp32 mode, GPU bf16 mode.
2. `olmo export-hf WORK/model.safetensors WORK/hf` writes the HF directory.
3. transformers loads it (fp32, and a bf16 copy for scale) on the GPU; logits compared
   over the real vocab rows (export-hf drops the padded ones).
Measure: max |ours - hf| / max |hf| (tests/ref/check_parity.py's rel-to-max).
Pass: CPU and GPU fp32 within 1e-4 of HF fp32; GPU bf16 within 5x HF-bf16's own
distance from HF fp32 (bf16 noise) or 5e-2, whichever is larger. Exit 0 on pass.
"""
import argparse
import os
import subprocess
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--olmo", required=True)
    ap.add_argument("--test-cuda", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--preset", default="olmo3-60m")
    ap.add_argument("--T", type=int, default=512)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    subprocess.run([a.test_cuda, "dump", a.work, a.preset, str(a.T)], check=True)
    hf_dir = os.path.join(a.work, "hf")
    subprocess.run([a.olmo, "export-hf", os.path.join(a.work, "model.safetensors"), hf_dir], check=True)

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = AutoConfig.from_pretrained(hf_dir)
    V = cfg.vocab_size
    tok = np.fromfile(os.path.join(a.work, "tokens.i32"), dtype=np.int32).reshape(2, a.T)
    ids = torch.from_numpy(tok.astype(np.int64)).cuda()
    out = {}
    for name, dt in (("hf_fp32", torch.float32), ("hf_bf16", torch.bfloat16)):
        try:
            model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=dt, attn_implementation="eager")
        except TypeError:   # transformers < 4.56 spells it torch_dtype
            model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=dt, attn_implementation="eager")
        model = model.cuda().eval()
        with torch.no_grad():
            out[name] = model(input_ids=ids).logits.float().cpu().numpy().reshape(2 * a.T, -1)[:, :V]
        del model
        torch.cuda.empty_cache()
    ref = out["hf_fp32"]
    scale = np.abs(ref).max()

    def err(x):
        return float(np.abs(x.astype(np.float64) - ref).max() / scale)

    bf16_noise = err(out["hf_bf16"])
    rows = [("hf_bf16 (HF's own bf16 noise)", bf16_noise, None)]
    ok = True
    for name, tol in (("cpu", 1e-4), ("gpu_fp32", 1e-4), ("gpu_bf16", max(5 * bf16_noise, 5e-2))):
        path = os.path.join(a.work, "logits_%s.f32" % name)
        if not os.path.exists(path):
            rows.append((name, float("nan"), tol))
            ok = False
            continue
        x = np.fromfile(path, dtype=np.float32).reshape(2 * a.T, -1)[:, :V]
        e = err(x)
        rows.append((name, e, tol))
        ok = ok and e <= tol
    print("logits vs HF transformers Olmo3 fp32 (%s, T=%d, vocab %d, max|logit| %.3g):" % (a.preset, a.T, V, scale))
    for name, e, tol in rows:
        print("  %-32s rel-to-max %.3g%s" % (name, e, "" if tol is None else "  (tol %.3g) %s" % (tol, "ok" if e <= tol else "FAIL")))
    print("HF_COMPARE %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
