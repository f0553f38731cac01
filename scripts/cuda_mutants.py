#!/usr/bin/env python3
"""cuda_mutants.py: how many seeded bugs in the CUDA kernels the emulated tests catch
(docs/cuda.md "Emulation"). A benchmark, not a test: about a minute per mutant.

Mutants, one at a time: every __syncthreads() and __syncwarp() removed (attention.cu and
the block reductions of common.cuh the other kernels use), and every mask and tile bound of
the attention kernels and the row/element bounds of the other op files moved by one. Each mutant is
built with `make CUDA_EMU=1` in a scratch copy of the tree, and build-emu/tests/test_cuda
and build-emu/tests/test_cuda_attention (op level, seconds) run against it: the attention
test in every thread order first, then test_cuda's case 1 in every order and case 3; a mutant is killed by the first failing
run (a wrong result, a barrier or warp mismatch, a fault, or a run over the time limit). A mutant that survives forward thread
order is run again in warp-serial, reverse and random order (CUEMU_ORDER; the attention test
and case 1).

Usage: scripts/cuda_mutants.py [--only SUBSTRING] [--list] [--timeout S]
Writes a table to stdout; the report of the last run is in docs/cuda.md.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K = 'src/kernels/cuda/'

# (file, text, replacement, what): one mutant per occurrence of text in file
BOUNDS = [
    (K + 'attention.cu', 'j <= i && j > i - window', 'j <= i && j >= i - window', 'window bound off by one (visible)'),
    (K + 'attention.cu', 'j <= i && j > i - window', 'j < i && j > i - window', 'causal bound excludes the diagonal (visible)'),
    (K + 'attention.cu', 'i < Tn && j < Tn && ', 'i < Tn && ', 'key range check dropped (visible)'),
    (K + 'attention.cu', 'j >= docs[(size_t)b * Tn + i]', 'j > docs[(size_t)b * Tn + i]', 'document start off by one'),
    (K + 'attention.cu', 'q0 - window + 1), docs', 'q0 - window + 2), docs', 'first visible key tile off by one'),
    (K + 'attention.cu', 'k0 <= q1', 'k0 < q1', 'last key tile skipped'),
    (K + 'attention.cu', 'min(q0 + BQ, Tn) - 1', 'min(q0 + BQ, Tn) - 2', 'query tile end off by one'),
    (K + 'attention.cu', 'min(q0 + WQ, Tn) - 1', 'min(q0 + WQ, Tn) - 2', 'query tile end off by one (wmma)'),
    (K + 'attention.cu', 'k1 + window - 1)', 'k1 + window - 2)', 'last query tile of a key tile off by one'),
    (K + 'attention.cu', 'q0 <= qhi', 'q0 < qhi', 'last query tile skipped (dK, dV)'),
    (K + 'attention.cu', 'min(k0 + BK, Tn) - 1', 'min(k0 + BK, Tn) - 2', 'key tile end off by one'),
    (K + 'attention.cu', 'min(k0 + WK, Tn) - 1', 'min(k0 + WK, Tn) - 2', 'key tile end off by one (wmma)'),
    (K + 'attention.cu', 'key < Tn ?', 'key <= Tn ?', 'key load bound off by one'),
    (K + 'attention.cu', 'i < Tn ?', 'i <= Tn ?', 'query load bound off by one'),
    (K + 'attention.cu', 't < Tn ?', 't <= Tn ?', 'tile load bound off by one (wmma)'),
    (K + 'attention.cu', 'if (t < Tn) *(uint4 *)(dst', 'if (t <= Tn) *(uint4 *)(dst', 'fragment write bound off by one (wmma: O, dQ, dK, dV)'),
    (K + 'attention.cu', 'if (i < Tn) {', 'if (i <= Tn) {', 'row write bound off by one'),
    (K + 'attention.cu', 'if (j < Tn) {', 'if (j <= Tn) {', 'key row write bound off by one'),
    (K + 'attention.cu', 'k0 + WK - 1 > w_lo - window', 'k0 + WK - 1 > w_lo - window + 1', 'warp tile skip: window bound off by one (wmma)'),
    (K + 'attention.cu', 'k0 <= w_hi', 'k0 < w_hi', 'warp tile skip: causal bound off by one (wmma)'),
    (K + 'attention.cu', 'q0 > w_hi + window - 1', 'q0 > w_hi + window - 2', 'warp tile skip: window bound off by one (wmma dK dV)'),
    (K + 'attention.cu', 'q0 + (int)threadIdx.x < Tn', 'q0 + (int)threadIdx.x <= Tn', 'lse write bound off by one (wmma)'),
    (K + 'attention.cu', 'threadIdx.x < WQ', 'threadIdx.x < WQ - 1', 'row statistics of the last row not loaded (wmma)'),
    (K + 'attention.cu', 'threadIdx.x < BQ', 'threadIdx.x < BQ - 1', 'row statistics of the last row not loaded'),
    (K + 'attention.cu', 'st < WK / 2', 'st < WK / 2 - 1', 'last column of a lane half skipped (wmma)'),
    (K + 'attention.cu', 'st < WQ / 2; st++', 'st < WQ / 2 - 1; st++', 'last column of a lane half not written (wmma dK dV)'),
    (K + 'attention.cu', 'idx >= (size_t)B * Tn * NH', 'idx > (size_t)B * Tn * NH', 'Di row bound off by one'),
    (K + 'convert.cu', 'if (i < n) dst[i]', 'if (i <= n) dst[i]', 'cast bound off by one'),
    (K + 'embedding.cu', 'if (idx >= (size_t)N * C) return;', 'if (idx > (size_t)N * C) return;', 'embedding bound off by one'),
    (K + 'embedding.cu', 'for (int i = off[u]; i < off[u + 1]; i++) acc', 'for (int i = off[u] + 1; i < off[u + 1]; i++) acc', 'first position of a token skipped (embedding gradient)'),
    (K + 'norm.cu', 'n1 = (int)((long)N * (p + 1) / NORM_PARTS)', 'n1 = (int)((long)N * (p + 1) / NORM_PARTS) - 1', 'norm chunk end off by one'),
    (K + 'norm.cu', 'for (int p = 0; p < NORM_PARTS; p++)', 'for (int p = 1; p < NORM_PARTS; p++)', 'first norm chunk dropped'),
    (K + 'rope.cu', 'if (idx >= (size_t)BT * H * half) return;', 'if (idx > (size_t)BT * H * half) return;', 'rope bound off by one'),
    (K + 'rope.cu', 'v[j + half]', 'v[j + half - 1]', 'rope pairs the wrong element'),
    (K + 'swiglu.cu', 'if (idx >= (size_t)N * H) return;', 'if (idx > (size_t)N * H) return;', 'swiglu bound off by one'),
    (K + 'lmhead.cu', 'for (int v = threadIdx.x; v < V; v += blockDim.x) mx', 'for (int v = threadIdx.x + 1; v < V; v += blockDim.x) mx', 'row max misses a column'),
    (K + 'lmhead.cu', 'if (v == t) d -= inv_count;', 'if (v == t + 1) d -= inv_count;', 'one-hot at the wrong class'),
    (K + 'optim.cu', 'hi = lo + SUMSQ_CHUNK < n ? lo + SUMSQ_CHUNK : n', 'hi = lo + SUMSQ_CHUNK - 1 < n ? lo + SUMSQ_CHUNK - 1 : n', 'sum-of-squares chunk end off by one'),
    (K + 'optim.cu', 'if (i >= n) return;\n    float gi', 'if (i > n) return;\n    float gi', 'AdamW bound off by one'),
    (K + 'optim.cu', '__fmul_rn(gi, __fsub_rn(1.0f, beta1))', '__fmul_rn(gi, __fsub_rn(1.0f, beta2))', 'AdamW first moment with beta2'),
    (K + 'optim.cu', '__fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps)', '__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt)', 'AdamW without eps'),
    (K + 'ops_cuda.cu', 'n0 += chunk', 'n0 += chunk + 1', 'LM-head chunk stride off by one'),
]


def mutants():
    out = []
    for rel in (K + 'attention.cu', K + 'common.cuh'):
        lines = open(os.path.join(ROOT, rel)).read().split('\n')
        for i, l in enumerate(lines):
            for call in ('__syncthreads();', '__syncwarp();'):
                if call in l:
                    out.append((rel, 'line', i, l, l.replace(call, ';', 1), '%s removed' % call[:-3]))
    for rel, old, new, what in BOUNDS:
        text = open(os.path.join(ROOT, rel)).read()
        starts = [m.start() for m in re.finditer(re.escape(old), text)]
        if not starts:
            sys.exit('cuda_mutants: %s: %r not found (update BOUNDS)' % (rel, old))
        for k, s in enumerate(starts):
            line = text.count('\n', 0, s)
            out.append((rel, 'text', s, old, new, '%s (%d of %d)' % (what, k + 1, len(starts)) if len(starts) > 1 else what))
    return out


def apply(tree, m):
    rel, kind, where, old, new, _ = m
    p = os.path.join(tree, rel)
    text = open(os.path.join(ROOT, rel)).read()
    if kind == 'line':
        lines = text.split('\n')
        lines[where] = new
        text = '\n'.join(lines)
    else:
        text = text[:where] + new + text[where + len(old):]
    open(p, 'w').write(text)
    return text.count('\n', 0, where) + 1 if kind == 'text' else where + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--only', default='')
    ap.add_argument('--list', action='store_true')
    ap.add_argument('--start', type=int, default=1, help='first mutant to run (1-based; resume a partial run)')
    ap.add_argument('--end', type=int, default=0, help='last mutant to run (0: the last one)')
    ap.add_argument('--timeout', type=int, default=600)
    a = ap.parse_args()
    ms = [m for m in mutants() if a.only in m[5] or a.only in m[0]]
    start = a.start
    end = a.end or len(ms)
    if a.list:
        for m in ms:
            print('%s: %s' % (m[0], m[5]))
        return
    tree = tempfile.mkdtemp(prefix='cuda-mutants-')
    try:
        for d in ('src', 'tests', 'Makefile'):
            s = os.path.join(ROOT, d)
            (shutil.copytree if os.path.isdir(s) else shutil.copy)(s, os.path.join(tree, d))
        env = dict(os.environ, OMP_NUM_THREADS='1')
        # -O1: the mutants' rebuilds dominate, and -O1 compiles attention.cu several times faster
        make = ['make', '-s', 'CUDA_EMU=1', 'BUILD=build-emu', 'NVCCFLAGS=-O1 -std=c++17 -Isrc -DOLMO_NCCL', '-j%d' % os.cpu_count(), 'build-emu/tests/test_cuda',
                'build-emu/tests/test_cuda_attention']
        r = subprocess.run(make, cwd=tree, capture_output=True, text=True)
        if r.returncode:
            sys.exit('cuda_mutants: the unmutated tree does not build:\n' + r.stderr[-3000:])
        killed = 0
        print('%-4s %-58s %-6s %s' % ('#', 'mutant', 'line', 'result'))
        for n, m in enumerate(ms, 1):
            if n < start or n > end:
                continue
            line = apply(tree, m)
            t0 = time.time()
            r = subprocess.run(make, cwd=tree, capture_output=True, text=True)
            verdict = None
            if r.returncode:
                verdict = 'killed (does not compile)'
            # cheapest first: the op-level attention test (seconds) in every thread order, then
            # test_cuda's case 1 in every order, then case 3 in forward order
            orders = ('forward', 'warps', 'reverse', 'random:7')
            # (case 3 is case 2's shapes with YaRN and the document mask on top: case 2 adds nothing)
            runs = ([('test_cuda_attention', None, o) for o in orders] + [('test_cuda', '1', o) for o in orders] +
                    [('test_cuda', '3', 'forward')])
            for prog, case, order in runs:
                if verdict:
                    break
                e = dict(env, CUEMU_ORDER=order)
                if case:
                    e['OLMO_TEST_CUDA_CASE'] = case
                tag = '%s%s, %s order' % (prog, ' case ' + case if case else '', order)
                try:
                    t = subprocess.run(['build-emu/tests/' + prog], cwd=tree, env=e, capture_output=True, text=True,
                                       timeout=a.timeout)
                except subprocess.TimeoutExpired:
                    verdict = 'killed (%s: over %d s)' % (tag, a.timeout)
                    break
                if t.returncode:
                    out = t.stdout + t.stderr
                    first = next((l for l in out.split('\n') if 'FAIL' in l or 'cuemu:' in l), 'exit %d' % t.returncode)
                    verdict = 'killed (%s): %s' % (tag, first.strip()[:120])
            if verdict:
                killed += 1
            else:
                verdict = 'SURVIVED'
            print('%-4d %-58s %s:%-4d %s  [%.0f s]' % (n, m[5][:58], os.path.basename(m[0]), line, verdict, time.time() - t0),
                  flush=True)
            shutil.copy(os.path.join(ROOT, m[0]), os.path.join(tree, m[0]))
        print('%d of %d mutants killed' % (killed, end - start + 1))
    finally:
        shutil.rmtree(tree, ignore_errors=True)


if __name__ == '__main__':
    main()
