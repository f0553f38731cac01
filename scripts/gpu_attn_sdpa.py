#!/usr/bin/env python3
"""gpu_attn_sdpa.py: torch's flash SDPA at OLMo 3 7B's attention shapes, the reference the
project's attention kernels are measured against (scripts/gpu-check.sh prints both).

  python3 scripts/gpu_attn_sdpa.py [--T 8192] [--heads 32] [--head-dim 128] [--reps 3]

  python3 scripts/gpu_attn_sdpa.py ... --backends flash,cudnn

B = 1, bf16, causal, one SDPA backend at a time (torch.nn.attention.sdpa_kernel, or before
torch 2.3 torch.backends.cuda.sdp_kernel, which has no cuDNN switch): flash (the default) and
cuDNN. One warm-up, then --reps timed runs between CUDA events: forward, and forward +
backward (the backward alone is their difference). Prints SDPA attn_fwd_w<T> ms X and SDPA
attn_bwd_w<T> ms Y per backend (the first backend's lines unmarked, as cuda_ops_bench prints
MEASURE lines; later ones with the backend's name, e.g. SDPA-cudnn), or "SDPA <backend>
unavailable: why" where torch cannot run it. The sliding window (4096) is not in SDPA's flash path (a mask disables it), so only
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
    ap.add_argument('--backends', default='flash', help='comma-separated: flash, cudnn')
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print('SKIP: no CUDA device for torch')
        return 0
    def only(name):
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError:   # torch < 2.3: flash only
            if name != 'flash':
                raise RuntimeError('this torch has no sdpa_kernel (needs 2.3+) for %s' % name)
            return torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)
        b = {'flash': 'FLASH_ATTENTION', 'cudnn': 'CUDNN_ATTENTION'}[name]
        if not hasattr(SDPBackend, b):
            raise RuntimeError('this torch has no SDPBackend.%s' % b)
        return sdpa_kernel([getattr(SDPBackend, b)])
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

    pairs = a.heads * a.T * (a.T + 1) / 2
    for i, name in enumerate(a.backends.split(',')):
        tag = 'SDPA' if i == 0 else 'SDPA-' + name
        try:
            with only(name):
                tf = timed(fwd)
                tfb = timed(fwdbwd)
        except Exception as e:   # a backend this torch or GPU lacks: said, the others still run
            print('SDPA %s unavailable: %s: %s' % (name, type(e).__name__, (str(e).splitlines() or [''])[0][:200]))
            continue
        print('%s attn_fwd_w%d ms %.3f  %.1f TFLOP/s (%s)' % (tag, a.T, tf, pairs * 4 * a.head_dim / (tf * 1e-3) / 1e12, name))
        print('%s attn_bwd_w%d ms %.3f  %.1f TFLOP/s (%s; 5 matmuls: 10 D a pair)'
              % (tag, a.T, tfb - tf, pairs * 10 * a.head_dim / ((tfb - tf) * 1e-3) / 1e12, name))
    print('torch %s, %s' % (torch.__version__, torch.cuda.get_device_name()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
