#!/usr/bin/env python3
"""gpu_hf_compare.py: our model vs Hugging Face transformers' Olmo3ForCausalLM, same
weights, same tokens, same GPU.

  python3 scripts/gpu_hf_compare.py --olmo build/olmo --test-cuda build/tests/test_cuda \
      --work /tmp/hfcmp [--preset olmo3-60m] [--T 512] [--yarn-T 256] [--no-yarn]
  /usr/bin/python3 scripts/gpu_hf_compare.py --olmo ... --test-cuda ... --work ... --selftest
      (no GPU, no transformers: the YaRN case with tests/ref/olmo_ref.py standing in for HF)

Plain case:
1. `test_cuda dump WORK PRESET T` writes random-init weights (model.safetensors +
   recipe.yml), tokens (2 rows), and our logits: CPU (fp32), GPU fp32 mode, GPU bf16 mode.
2. `olmo export-hf WORK/model.safetensors WORK/hf` writes the HF directory.
3. transformers loads it (fp32, and a bf16 copy for scale) on the GPU; logits compared
   over every row, the padded ones included (export-hf keeps them; config vocab_size
   is the padded count).
Measure: max |ours - hf| / max |hf| (tests/ref/check_parity.py's rel-to-max).
Pass: CPU and GPU fp32 within 1e-4 of HF fp32; GPU bf16 within 5x HF-bf16's own
distance from HF fp32 (bf16 noise) or 5e-2, whichever is larger. Prints HF_COMPARE.

YaRN case (issue 17, docs/long-context.md), after the plain one and unable to hide it:
`test_cuda dump WORK/yarn PRESET YT yarn=4` (CPU only) writes the same kind of model with
YaRN factor 4, beta_fast 32, beta_slow 1, original context YT/4 (so the scaled frequencies
matter within YT), no document mask (HF's plain forward has none), and two CPU logits:
YaRN on the full-attention layers only (OLMo-core, ours) and the same weights with YaRN
on every layer (YT <= the sliding window, so a sliding layer sees every key and only its
RoPE differs). export-hf writes rope_scaling {rope_type yarn, factor, beta_fast,
beta_slow, original_max_position_embeddings, attention_factor} and max_position_embeddings
= factor x original; transformers loads it (fp32, GPU). One line, HF_YARN:
  match (full layers only)   HF within 1e-4 of ours: pass
  HF applies YaRN to all layers (known transformers regression)   HF within 1e-4 of the
      all-layers variant, not of ours: reported, not a failure (not our bug)
  MISMATCH / ERROR           neither, or an exception in this case: failure
Exit 0 when the plain case passes and HF_YARN is a match or the known regression.
"""
import argparse
import json
import os
import subprocess
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_rope_compat  # noqa: E402

TOL_FP32 = 1e-4


def rel_to_max(x, ref):
    return float(np.abs(x.astype(np.float64) - ref).max() / np.abs(ref).max())


def load_logits(path, rows, V):
    return np.fromfile(path, dtype=np.float32).reshape(rows, -1)[:, :V]


def classify_yarn(hf, ours_full, ours_all, tol=TOL_FP32):
    """hf, ours_full: (N, V) logits; ours_all: the all-layers variant or None.
    Returns (status, line): status "match" | "all_layers" | "mismatch"."""
    e_full = rel_to_max(ours_full, hf)
    e_all = rel_to_max(ours_all, hf) if ours_all is not None else float("nan")
    sep = rel_to_max(ours_all, ours_full) if ours_all is not None else float("nan")
    tail = "(tol %.3g; vs our all-layers variant %.3g; the two variants differ by %.3g)" % (tol, e_all, sep)
    if e_full <= tol:
        return "match", "HF_YARN: match (full layers only) rel-to-max %.3g %s" % (e_full, tail)
    if ours_all is not None and e_all <= tol:
        return "all_layers", ("HF_YARN: HF applies YaRN to all layers (known transformers regression): rel-to-max "
                              "%.3g vs our all-layers variant, %.3g vs ours (full layers only, OLMo-core); not a "
                              "failure of ours (tol %.3g)" % (e_all, e_full, tol))
    return "mismatch", "HF_YARN: MISMATCH rel-to-max %.3g vs ours (full layers only) %s" % (e_full, tail)


def dump_yarn(a, work, factor=4):
    """Our side of the YaRN case: weights, tokens, CPU logits, the HF directory."""
    os.makedirs(work, exist_ok=True)
    subprocess.run([a.test_cuda, "dump", work, a.preset, str(a.yarn_T), "yarn=%d" % factor], check=True)
    hf_dir = os.path.join(work, "hf")
    subprocess.run([a.olmo, "export-hf", os.path.join(work, "model.safetensors"), hf_dir], check=True)
    tok = np.fromfile(os.path.join(work, "tokens.i32"), dtype=np.int32).reshape(2, a.yarn_T)
    return hf_dir, tok


def our_yarn_logits(work, T, V):
    full = load_logits(os.path.join(work, "logits_cpu.f32"), 2 * T, V)
    p = os.path.join(work, "logits_cpu_yarn_all.f32")
    return full, (load_logits(p, 2 * T, V) if os.path.exists(p) else None)


def hf_rotary_summary(model):
    """Which rotary embeddings the loaded HF model holds (name: rope_type), for the log."""
    seen = []
    for name, mod in model.named_modules():
        if "rotary" in type(mod).__name__.lower():
            seen.append("%s:%s" % (name or "<root>", getattr(mod, "rope_type", "?")))
    return ", ".join(seen[:8]) + (" ..." if len(seen) > 8 else "") if seen else "none found"


def load_hf(hf_dir, dt):
    from transformers import AutoModelForCausalLM
    try:
        model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=dt, attn_implementation="eager")
    except TypeError:   # transformers < 4.56 spells it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=dt, attn_implementation="eager")
    return model.cuda().eval()


def hf_logits(model, tok, V):
    import torch
    ids = torch.from_numpy(tok.astype(np.int64)).cuda()
    with torch.no_grad():
        return model(input_ids=ids).logits.float().cpu().numpy().reshape(tok.size, -1)[:, :V]


def plain_case(a):
    import torch
    from transformers import AutoConfig
    os.makedirs(a.work, exist_ok=True)
    subprocess.run([a.test_cuda, "dump", a.work, a.preset, str(a.T)], check=True)
    hf_dir = os.path.join(a.work, "hf")
    subprocess.run([a.olmo, "export-hf", os.path.join(a.work, "model.safetensors"), hf_dir], check=True)
    hc = AutoConfig.from_pretrained(hf_dir)
    V = hc.vocab_size
    # transformers 5.x reads export-hf's rope_theta into rope_parameters: the theta it will
    # use must be the one written (a silently defaulted theta would read as a kernel error)
    print("hf config: %s" % hf_rope_compat.summary(hc))
    hf_rope_compat.check_theta(hc, hf_rope_compat.rope_of(json.load(open(os.path.join(hf_dir, "config.json"))))["rope_theta"])
    tok = np.fromfile(os.path.join(a.work, "tokens.i32"), dtype=np.int32).reshape(2, a.T)
    out = {}
    for name, dt in (("hf_fp32", torch.float32), ("hf_bf16", torch.bfloat16)):
        model = load_hf(hf_dir, dt)
        out[name] = hf_logits(model, tok, V)
        del model
        torch.cuda.empty_cache()
    ref = out["hf_fp32"]
    scale = np.abs(ref).max()
    bf16_noise = rel_to_max(out["hf_bf16"], ref)
    rows = [("hf_bf16 (HF's own bf16 noise)", bf16_noise, None)]
    ok = True
    for name, tol in (("cpu", TOL_FP32), ("gpu_fp32", TOL_FP32), ("gpu_bf16", max(5 * bf16_noise, 5e-2))):
        path = os.path.join(a.work, "logits_%s.f32" % name)
        if not os.path.exists(path):
            rows.append((name, float("nan"), tol))
            ok = False
            continue
        e = rel_to_max(load_logits(path, 2 * a.T, V), ref)
        rows.append((name, e, tol))
        ok = ok and e <= tol
    print("logits vs HF transformers Olmo3 fp32 (%s, T=%d, vocab %d, max|logit| %.3g):" % (a.preset, a.T, V, scale))
    for name, e, tol in rows:
        print("  %-32s rel-to-max %.3g%s" % (name, e, "" if tol is None else "  (tol %.3g) %s" % (tol, "ok" if e <= tol else "FAIL")))
    print("HF_COMPARE %s" % ("PASS" if ok else "FAIL"), flush=True)
    return ok


def yarn_case(a):
    import torch
    import transformers
    work = os.path.join(a.work, "yarn")
    hf_dir, tok = dump_yarn(a, work)
    model = load_hf(hf_dir, torch.float32)
    cfg = model.config
    print("yarn: transformers %s, %s, layer_types %s" %
          (transformers.__version__, hf_rope_compat.summary(cfg), getattr(cfg, "layer_types", None)))
    print("yarn: hf rotary embeddings: %s" % hf_rotary_summary(model))
    V = cfg.vocab_size
    hf = hf_logits(model, tok, V)
    del model
    torch.cuda.empty_cache()
    full, all_layers = our_yarn_logits(work, a.yarn_T, V)
    status, line = classify_yarn(hf, full, all_layers)
    print(line)
    return status


def selftest(a):
    """No GPU, no transformers: the YaRN case end to end (our dump, export-hf, the
    classification) with tests/ref/olmo_ref.py's float64 forward on the exported HF
    directory standing in for transformers: YaRN on the full layers (HF's formula flavor)
    must read "match", on all layers "known regression", and a perturbed model "MISMATCH".
    The exported config.json is read through hf_rope_compat (export-hf writes the 4.x
    layout; scripts/hf_rope_compat.py --selftest covers the 5.x ones)."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
    import olmo_ref as ref
    import safetensors_io as st
    work = os.path.join(a.work, "yarn")
    hf_dir, tok = dump_yarn(a, work)
    hc = json.load(open(os.path.join(hf_dir, "config.json")))
    P = {k: torch.from_numpy(np.ascontiguousarray(v)).double() for k, v in st.read(os.path.join(hf_dir, "model.safetensors")).items()}
    V = hc["vocab_size"]
    rs = hf_rope_compat.rope_of(hc, "full_attention")   # any transformers layout
    theta = rs.pop("rope_theta")
    ids = torch.from_numpy(tok.astype(np.int64))

    def standin(layer_types, flavor="hf"):
        old = ref.yarn_inv_freq
        ref.yarn_inv_freq = lambda D, th, r, f="olmo_core": old(D, th, r, flavor)
        try:
            cfg = ref.Config(n_heads=hc["num_attention_heads"], n_kv_heads=hc["num_key_value_heads"],
                             head_dim=hc["head_dim"], rms_eps=hc["rms_norm_eps"], rope_theta=theta,
                             n_layers=hc["num_hidden_layers"], layer_types=layer_types,
                             sliding_window=hc["sliding_window"], rope_scaling=rs)
            with torch.no_grad():
                return ref.forward(P, cfg, ids).numpy().reshape(tok.size, -1)[:, :V]
        finally:
            ref.yarn_inv_freq = old

    full, all_layers = our_yarn_logits(work, a.yarn_T, V)
    ok = True
    lt = hc["layer_types"]
    for what, hf, want in (("full layers only", standin(lt), "match"),
                           ("all layers", standin(["full_attention"] * len(lt)), "all_layers"),
                           ("perturbed (lm_head x 1.01)", None, "mismatch")):
        if hf is None:
            P["lm_head.weight"] *= 1.01
            hf = standin(lt)
        status, line = classify_yarn(hf, full, all_layers)
        print("selftest stand-in %-28s -> %s" % (what, line))
        ok = ok and status == want
    print("SELFTEST %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--olmo", required=True)
    ap.add_argument("--test-cuda", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--preset", default="olmo3-60m")
    ap.add_argument("--T", type=int, default=512)
    ap.add_argument("--yarn-T", type=int, default=256, help="YaRN case length (<= the preset's sliding window)")
    ap.add_argument("--no-yarn", action="store_true")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.selftest:
        return selftest(a)

    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        ok = plain_case(a)
    except Exception:
        traceback.print_exc()
        print("HF_COMPARE ERROR (the exception above)", flush=True)
        ok = False
    if a.no_yarn:
        return 0 if ok else 1
    try:
        status = yarn_case(a)
    except Exception as e:
        traceback.print_exc()
        print("HF_YARN: ERROR %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
        status = "error"
    print("HF_COMPARE %s (plain), HF_YARN %s" % ("PASS" if ok else "FAIL", status))
    return 0 if ok and status in ("match", "all_layers") else 1


if __name__ == "__main__":
    sys.exit(main())
