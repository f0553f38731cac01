#!/usr/bin/env python3
"""gpu_bench_torch.py: the PyTorch side of the benchmark: HF transformers Olmo3ForCausalLM
with OLMo 3 7B widths (d 4096, 32 heads, MLP 11008, vocab rows 100352, window 4096 on
3 of 4 layers), random init, fp32 master weights + torch.autocast(bf16) + fused AdamW,
one sequence of T tokens per step, the same training step our test_cuda_bench times
(forward, backward, clip, AdamW). Eager first, then torch.compile.

  python3 scripts/gpu_bench_torch.py [--layers 16] [--T 8192] [--steps 3] [--no-compile | --compile-only]
(gpu-check.sh runs eager and torch.compile as two invocations, so that the compile, whose
time is unbounded, gets a time limit of its own and cannot cost the eager figures.)

On out-of-memory it retries with half the layers and says so. Prints RESULT lines with
tokens/s and MFU under both FLOP counts of docs/olmo3.md s.8 (peak 989.5 TFLOP/s).
"""
import argparse
import sys
import time


def flops_per_token(L, d, H, hd, mlp, V, T, window):
    n_nonemb = L * (d * H * hd * 4 + 3 * d * mlp + 2 * H * hd + 2 * d) + d + V * d   # + LM head, norms
    full = 6 * n_nonemb + 12 * L * H * hd * T
    win = 6 * n_nonemb + sum(12 * H * hd * (T if i % 4 == 3 else min(window, T)) for i in range(L))
    return full, win


def bench(layers, T, steps, compile_model):
    import torch
    from transformers import Olmo3Config, Olmo3ForCausalLM

    d, H, hd, mlp, V, window = 4096, 32, 128, 11008, 100352, 4096
    cfg = Olmo3Config(vocab_size=V, hidden_size=d, intermediate_size=mlp, num_hidden_layers=layers,
                      num_attention_heads=H, num_key_value_heads=H, max_position_embeddings=T, rope_theta=500000.0,
                      rms_norm_eps=1e-6, sliding_window=window, tie_word_embeddings=False, attention_bias=False,
                      layer_types=["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(layers)])
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Olmo3ForCausalLM(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    fwd = torch.compile(model) if compile_model else model
    ids = torch.randint(0, 100278, (1, T), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times = []
    for i in range(2 + steps):
        torch.cuda.synchronize()
        t0 = time.time()
        loss = step()
        torch.cuda.synchronize()
        dt = time.time() - t0
        print("  %s step %d%s: %.3fs loss %.4f" % ("compiled" if compile_model else "eager", i + 1,
                                                  " (warmup)" if i < 2 else "", dt, loss.item()), flush=True)
        if i >= 2:
            times.append(dt)
    mean = sum(times) / len(times)
    f1, f2 = flops_per_token(layers, d, H, hd, mlp, V, T, window)
    tps = T / mean
    print("RESULT torch %s layers=%d T=%d B=1: %.3f s/step, %.0f tokens/s, MFU %.1f%% (OLMo-core count %.2f GFLOP/token), "
          "%.1f%% (window-aware %.2f GFLOP/token), peak 989.5 TFLOP/s, peak mem %.1f GiB"
          % ("torch.compile" if compile_model else "eager", layers, T, mean, tps, 100 * tps * f1 / 989.5e12, f1 / 1e9,
             100 * tps * f2 / 989.5e12, f2 / 1e9, torch.cuda.max_memory_allocated() / 2**30), flush=True)
    del model, opt, fwd
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--T", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--compile-only", action="store_true")
    a = ap.parse_args()
    import torch
    import transformers
    print("torch %s, transformers %s, %s" % (torch.__version__, transformers.__version__, torch.cuda.get_device_name()))
    modes = [False] if a.no_compile else [True] if a.compile_only else [False, True]
    for compile_model in modes:
        layers = a.layers
        while layers >= 1:
            try:
                bench(layers, a.T, a.steps, compile_model)
                break
            except torch.OutOfMemoryError:
                import gc
                gc.collect()
                torch.cuda.empty_cache()
                print("  out of memory at %d layers; retrying with %d" % (layers, layers // 2), flush=True)
                layers //= 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
