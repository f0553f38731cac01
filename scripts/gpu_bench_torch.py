#!/usr/bin/env python3
"""gpu_bench_torch.py: the PyTorch side of the benchmark: HF transformers Olmo3ForCausalLM
with OLMo 3 7B widths (d 4096, 32 heads, MLP 11008, vocab rows 100352, window 4096 on
3 of 4 layers), random init, fp32 master weights + torch.autocast(bf16) + fused AdamW,
one sequence of T tokens per step, the same training step our test_cuda_bench times
(forward, backward, clip, AdamW). Eager first, then torch.compile.

  python3 scripts/gpu_bench_torch.py [--layers 16] [--T 8192] [--steps 3] [--recompute]
                                     [--no-compile | --compile-only]
  /usr/bin/python3 scripts/gpu_bench_torch.py --selftest   (no GPU: the retry's freeing)
(gpu-check.sh runs eager and torch.compile as two invocations, so that the compile, whose
time is unbounded, gets a time limit of its own and cannot cost the eager figures.)
--recompute: HF's gradient checkpointing of every decoder layer (ours with recompute=1
recomputes each block's forward in the backward too; ours keeps attention's output).

On out-of-memory it retries with half the layers and says so; before the retry the failed
attempt's model, optimizer and activations are released (the exception and its traceback,
which hold the frames that reference them, are dropped first; the memory still allocated
is printed). RoPE is set in whichever config layout the installed transformers uses
(scripts/hf_rope_compat.py: rope_theta in 4.x, rope_parameters in 5.x) and read back.
Prints RESULT lines with tokens/s and MFU under both FLOP counts of docs/olmo3.md s.8 (peak
989.5 TFLOP/s).
"""
import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_rope_compat  # noqa: E402


def flops_per_token(L, d, H, hd, mlp, V, T, window):
    n_nonemb = L * (d * H * hd * 4 + 3 * d * mlp + 2 * H * hd + 2 * d) + d + V * d   # + LM head, norms
    full = 6 * n_nonemb + 12 * L * H * hd * T
    win = 6 * n_nonemb + sum(12 * H * hd * (T if i % 4 == 3 else min(window, T)) for i in range(L))
    return full, win


def bench(layers, T, steps, compile_model, recompute=False):
    import torch
    from transformers import Olmo3Config, Olmo3ForCausalLM

    d, H, hd, mlp, V, window, theta = 4096, 32, 128, 11008, 100352, 4096, 500000.0
    cfg = Olmo3Config(vocab_size=V, hidden_size=d, intermediate_size=mlp, num_hidden_layers=layers,
                      num_attention_heads=H, num_key_value_heads=H, max_position_embeddings=T,
                      rms_norm_eps=1e-6, sliding_window=window, tie_word_embeddings=False, attention_bias=False,
                      layer_types=["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(layers)],
                      **hf_rope_compat.olmo3_rope_kwargs(Olmo3Config, theta))
    hf_rope_compat.check_theta(cfg, theta)
    try:
        cfg._attn_implementation = "sdpa"
    except (AttributeError, TypeError, ValueError) as e:   # a config class that refuses it: its default stands
        print("  attention implementation left at the default (%s: %s)" % (type(e).__name__, e), flush=True)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Olmo3ForCausalLM(cfg)
    model.train()
    if recompute:
        model.gradient_checkpointing_enable()
    print("  %d layers, attention %s, %s" % (layers, getattr(model.config, "_attn_implementation", "?"),
                                             hf_rope_compat.summary(model.config)), flush=True)
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
    print("RESULT torch %s%s layers=%d T=%d B=1: %.3f s/step, %.0f tokens/s, MFU %.1f%% (OLMo-core count %.2f GFLOP/token), "
          "%.1f%% (window-aware %.2f GFLOP/token), peak 989.5 TFLOP/s, peak mem %.1f GiB"
          % ("torch.compile" if compile_model else "eager", " recompute" if recompute else "", layers, T, mean, tps, 100 * tps * f1 / 989.5e12, f1 / 1e9,
             100 * tps * f2 / 989.5e12, f2 / 1e9, torch.cuda.max_memory_allocated() / 2**30), flush=True)
    del model, opt, fwd
    torch.cuda.empty_cache()


def attempt(run, oom_types):
    """run() once. On one of oom_types: returns the exception's first line, after the
    exception and its traceback are gone (in Python 3 the `except ... as e` name is deleted
    when its block ends, and sys.exc_info() is cleared): the frames that held the model and
    optimizer are then unreferenced, and gc.collect() frees them. None on success."""
    msg = None
    try:
        run()
    except oom_types as e:
        msg = (str(e).splitlines() or [type(e).__name__])[0]
    if msg is not None:
        gc.collect()
    return msg


def run_with_retry(run_at, layers, oom_types, after_free=lambda: None):
    """run_at(layers), halving layers after each out-of-memory. Returns the layers that ran, or 0."""
    while layers >= 1:
        msg = attempt(lambda: run_at(layers), oom_types)
        if msg is None:
            return layers
        after_free()
        print("  out of memory at %d layers (%s); retrying with %d" % (layers, msg[:160], layers // 2), flush=True)
        layers //= 2
    return 0


def selftest():
    """The retry path without a GPU: a stand-in 'bench' whose frame holds a big object and
    raises a stand-in OOM; after attempt() the object must be gone (a weakref to it dead)."""
    import weakref

    class FakeOOM(RuntimeError):
        pass

    class Model:
        pass

    refs = []

    def run_at(layers):
        model = Model()     # the frame's local, as bench()'s model and optimizer are
        refs.append(weakref.ref(model))
        model.self_ref = model   # a cycle: only gc.collect() frees it
        if layers > 2:
            raise FakeOOM("CUDA out of memory. Tried to allocate 1.00 GiB")

    alive = []
    ran = run_with_retry(run_at, 16, (FakeOOM,), after_free=lambda: alive.append(sum(r() is not None for r in refs)))
    ok = ran == 2 and alive == [0, 0, 0]
    print("selftest: ran at %d layers (want 2); models still alive at each retry %s (want [0, 0, 0]): %s"
          % (ran, alive, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--T", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--recompute", action="store_true")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.selftest:
        return selftest()
    import torch
    import transformers
    print("torch %s, transformers %s, %s" % (torch.__version__, transformers.__version__, torch.cuda.get_device_name()))
    modes = [False] if a.no_compile else [True] if a.compile_only else [False, True]
    oom = tuple({getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError), torch.cuda.OutOfMemoryError})

    def after_free():
        torch.cuda.empty_cache()
        print("  released the failed attempt: %.2f GiB still allocated, %.2f GiB reserved"
              % (torch.cuda.memory_allocated() / 2**30, torch.cuda.memory_reserved() / 2**30), flush=True)

    rc = 0
    for compile_model in modes:
        ran = run_with_retry(lambda L: bench(L, a.T, a.steps, compile_model, a.recompute), a.layers, oom, after_free)
        if ran == 0:
            print("RESULT torch %s: out of memory down to 1 layer" % ("torch.compile" if compile_model else "eager"))
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
