#!/usr/bin/env python3
"""gpu_attn_sdpa.py: torch's flash SDPA at OLMo 3 7B's attention shapes, the reference the
project's attention kernels are measured against (scripts/gpu-check.sh prints both).

  python3 scripts/gpu_attn_sdpa.py [--T 8192] [--heads 32] [--head-dim 128] [--reps 3]

B = 1, bf16, causal, flash backend only (torch.nn.attention.sdpa_kernel, or before torch 2.3
torch.backends.cuda.sdp_kernel; fails, naming why, if flash is unavailable). One warm-up, then --reps timed runs between CUDA events:
forward, and forward + backward (the backward alone is their difference). Prints
SDPA attn_fwd_w<T> ms X and SDPA attn_bwd_w<T> ms Y, as cuda_ops_bench prints MEASURE
lines. The sliding window (4096) is not in SDPA's flash path (a mask disables it), so only
the full causal layer is compared.
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--T', type=int, default=8192)
    ap.add_argument('--heads', type=int, default=32)
    ap.add_argument('--head-dim', type=int, default=128)
    ap.add_argument('--reps', type=int, default=3)
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print('SKIP: no CUDA device for torch')
        return 0
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        flash_only = lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    except ImportError:   # torch < 2.3
        flash_only = lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)
    torch.manual_seed(0)
    shape = (1, a.heads, a.T, a.head_dim)
    q, k, v = (torch.randn(shape, device='cuda', dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn(shape, device='cuda', dtype=torch.bfloat16)
    F = torch.nn.functional.scaled_dot_product_attention

    def timed(fn):
        fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(a.reps):
            fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / a.reps

    def fwd():
        with torch.no_grad():
            F(q, k, v, is_causal=True)

    def fwdbwd():
        o = F(q, k, v, is_causal=True)
        o.backward(do)

    with flash_only():
        tf = timed(fwd)
        tfb = timed(fwdbwd)
    pairs = a.heads * a.T * (a.T + 1) / 2
    print('SDPA attn_fwd_w%d ms %.3f  %.1f TFLOP/s' % (a.T, tf, pairs * 4 * a.head_dim / (tf * 1e-3) / 1e12))
    print('SDPA attn_bwd_w%d ms %.3f  %.1f TFLOP/s (5 matmuls: 10 D a pair)' % (a.T, tfb - tf, pairs * 10 * a.head_dim / ((tfb - tf) * 1e-3) / 1e12))
    print('torch %s, %s' % (torch.__version__, torch.cuda.get_device_name()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
