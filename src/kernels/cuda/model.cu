// model.cu: the OLMo 3 model on one CUDA device (see cuda_backend.h): the same forward and
// backward as src/model/model.c, kernel for kernel, with
//   GEMMs       cuBLASLt, fp32 accumulation; bf16 mode: bf16 operands, activations out in
//               bf16, weight gradients out in fp32 straight into the gradient buffer;
//               fp32 mode: plain fp32 GEMMs (CUBLAS_COMPUTE_32F, no TF32).
//   norms       RMSNorm statistics in fp32 (row sums of squares in double); weight
//               gradients from fixed row chunks (partials in double) summed in chunk order.
//   LM head     chunked over tokens: logits chunk (fp32) by cuBLASLt, one block per row for
//               max / logsumexp / CE / z-loss and dlogits, then the two backward GEMMs.
//   embedding   backward: positions grouped by token on the host; one thread per (token,
//               column) sums its positions in order and adds once (no atomics).
//   optimizer   gradient tree, chunked sum of squares, clip and AdamW on the device.
// Nothing uses float atomics; every reduction has a fixed order, so a run is reproducible
// bit for bit on the same GPU model, driver and library versions.
#include <cublasLt.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>
#ifdef OLMO_NCCL
#include <nccl.h>
#endif

extern "C" {
#include "model/config.h"
#include "model/docmask.h"
#include "model/params.h"
}
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/ops.cuh"

#define LM_CHUNK_MAX CUDA_LM_CHUNK_MAX

// ---------------------------------------------------------------------------------------
// the model
// ---------------------------------------------------------------------------------------

struct Dims { int N, C, Q, KV, QKV, H, NH, NKV, D, L; };

struct CudaModelBase {
    virtual ~CudaModelBase() {}
    ModelConfig cfg;
    const ParamTable *table;
    int max_B, max_T, is_bf16, recompute = 0;
    size_t total, bytes = 0;
    // What this device holds of the flat table (cuda_backend.h): Adam m, v for [olo, ohi)
    // (olo == ohi: none, the host keeps Adam), fp32 master weights for [mlo, mhi) (the
    // whole table, or the optimizer range when bf16 weights are sharded with NCCL).
    size_t olo = 0, ohi = 0, mlo = 0, mhi = 0;
    cudaStream_t st;
    cublasLtHandle_t lt;
    void *workspace;
    float *master, *m, *v;   // master: mhi - mlo floats; m, v: ohi - olo floats
    // The gradient: one full-size fp32 buffer. The first micro-batch of a step writes it,
    // later ones add to it in place (GEMM beta = 1, norm/embedding kernels +=), in micro-
    // batch order: deterministic, and one buffer whatever the number of micro-batches.
    float *grad;
    int grad_acc = 0;        // 1: a micro-batch was committed, the next backward accumulates
    int pushed = 0;          // micro-batches committed since cuda_grad_reset
    // bf16 with a sharded master: fp32 norm weights of the whole model (they are read by
    // the norm kernels on every rank), packed in table order; the segments map them.
    float *normf = nullptr;
    struct NormSeg { size_t off, n, coff; };
    std::vector<NormSeg> norm_segs;
    double *sumsq_partial;
    std::vector<double> host_partial;
    int world = 1, rank = 0;
    std::vector<size_t> bounds;   // world + 1 shard boundaries (dist_shard_bounds), NCCL only
#ifdef OLMO_NCCL
    ncclComm_t comm = nullptr;
#endif

    template <typename P> P *alloc(size_t count) {
        void *p = nullptr;
        if (count == 0) count = 1;
        if (cudaMalloc(&p, count * sizeof(P)) != cudaSuccess) {
            cudaGetLastError();
            return nullptr;
        }
        bytes += count * sizeof(P);
        ptrs.push_back(p);
        return (P *)p;
    }
    std::vector<void *> ptrs;
    bool oom = false;
    template <typename P> P *must(size_t count) {
        P *p = alloc<P>(count);
        if (!p) oom = true;
        return p;
    }
    void free_all() {
        for (void *p : ptrs) cudaFree(p);
        ptrs.clear();
    }

    virtual void upload_params(const float *host) = 0;
    virtual void *compute_weights() = 0;
    virtual LossSums fwd_bwd(const int32_t *inputs, const int32_t *targets, int B, int T, float z, float inv_count,
                             int want_grads, float *logits_out, float *tok_ce) = 0;
    CudaGemm gemm_ctx() const { return CudaGemm{lt, workspace, st}; }
};

template <typename T> struct CudaModelT : CudaModelBase {
    static constexpr DType DT = sizeof(T) == 4 ? DT_F32 : DT_BF16;
    T *w;           // weights in compute type, whole table (== master in fp32 mode)
    ModelView mv;   // views into grad: the gradients themselves, and the offsets of every tensor
    ModelView nv;   // mv with the norm weights pointing at their fp32 values (master or normf)
    // activations. The residual stream is fp32 (as PyTorch autocast / HF keep it): res
    // (L+1, N, C) saved for backward, hf (N, C) the fp32 h of the block being computed
    // (bf16 mode; fp32 mode uses mid), dres (N, C) the residual gradient. The GEMMs read
    // bf16 copies: xb (each block's input, bf16 mode; fp32 mode reads res) and mid (h).
    float *res, *hf, *dres;
    T *xb, *mid, *qkv, *q, *k, *vv, *att, *ao, *gu, *act, *mo, *xf;
    float *q_rstd, *k_rstd, *a_rstd, *m_rstd, *xf_rstd, *lse;
    // scratch
    T *dxf, *da, *datt, *dq, *dk, *dv, *dqkv, *dgu, *dact, *dm;
    float *Di, *logits, *rope_cos, *rope_sin, *yarn_cos = nullptr, *yarn_sin = nullptr, *tok_ce_d;
    T *dlogits;
    double *row_ce, *row_z, *norm_part;
    int32_t *tok_d, *tgt_d;
    int32_t *doc_d = nullptr;   // (N) document starts when cfg.document_mask, else none
    std::vector<int32_t> doc_h;
    // the micro-batch's positions grouped by token (embedding_bwd_kernel): rows (U), off (U+1), pos (N)
    int32_t *emb_rows, *emb_off, *emb_pos;
    std::vector<int32_t> emb_h;   // rows | off | pos, uploaded in one copy
    int emb_u = 0;
    int lm_chunk;

    size_t off(const float *p) const { return (size_t)(p - grad); }
    size_t slot_of(int l) const { return recompute ? 0 : (size_t)l; }
    const T *W(const float *p) const { return w + off(p); }
    // The fp32 norm weight of the tensor that starts at view pointer p.
    float *norm_w(const float *p) const {
        size_t o = off(p);
        if (!normf) return master + (o - mlo);
        for (const NormSeg &s : norm_segs)
            if (o >= s.off && o < s.off + s.n) return normf + s.coff + (o - s.off);
        fprintf(stderr, "olmo: error: CUDA model: no norm segment at offset %zu\n", o);
        exit(1);
    }

    Dims dims(int B, int T_) const {
        Dims d;
        d.N = B * T_; d.C = cfg.d_model; d.NH = cfg.n_heads; d.NKV = cfg.n_kv_heads; d.D = cfg.head_dim;
        d.Q = d.NH * d.D; d.KV = d.NKV * d.D; d.QKV = d.Q + 2 * d.KV; d.H = cfg.mlp_hidden; d.L = cfg.n_layers;
        return d;
    }

    bool init() {
        Dims d = dims(max_B, max_T);
        size_t N = d.N, L = recompute ? 1 : d.L;   // per-layer activation buffers (res keeps all L+1)
        const bool bf = sizeof(T) != 4;
        master = must<float>(mhi - mlo);
        m = must<float>(ohi - olo);
        v = must<float>(ohi - olo);
        grad = must<float>(total);
        if (!bf) w = (T *)master;   // fp32: mlo == 0, mhi == total
        else w = must<T>(total);
        if (bf && (mlo > 0 || mhi < total)) {
            size_t c = 0;
            for (int i = 0; i < table->n; i++)
                if (table->p[i].kind == PARAM_NORM) {
                    norm_segs.push_back({table->p[i].offset, table->p[i].numel, c});
                    c += table->p[i].numel;
                }
            normf = must<float>(c);
        }
        res = must<float>(((size_t)d.L + 1) * N * d.C); dres = must<float>(N * d.C);
        hf = bf ? must<float>(N * d.C) : nullptr;
        xb = bf ? must<T>(L * N * d.C) : nullptr;
        mid = must<T>(L * N * d.C); qkv = must<T>(L * N * d.QKV);
        q = must<T>(L * N * d.Q); k = must<T>(L * N * d.KV); vv = must<T>(L * N * d.KV); att = must<T>(L * N * d.Q);
        ao = must<T>(L * N * d.C); gu = must<T>(L * N * 2 * d.H); act = must<T>(L * N * d.H); mo = must<T>(L * N * d.C);
        xf = must<T>(N * d.C);
        q_rstd = must<float>(L * N); k_rstd = must<float>(L * N); a_rstd = must<float>(L * N); m_rstd = must<float>(L * N);
        xf_rstd = must<float>(N); lse = must<float>(L * N * d.NH);
        dxf = must<T>(N * d.C); da = must<T>(N * d.C); datt = must<T>(N * d.Q);
        dq = must<T>(N * d.Q); dk = must<T>(N * d.KV); dv = must<T>(N * d.KV); dqkv = must<T>(N * d.QKV);
        dgu = must<T>(N * 2 * d.H); dact = must<T>(N * d.H); dm = must<T>(N * d.C);
        Di = must<float>(N * d.NH);
        lm_chunk = (int)(N < LM_CHUNK_MAX ? N : LM_CHUNK_MAX);
        logits = must<float>((size_t)lm_chunk * cfg.padded_vocab);
        dlogits = must<T>((size_t)lm_chunk * cfg.padded_vocab);
        row_ce = must<double>(N); row_z = must<double>(N); tok_ce_d = must<float>(N);
        size_t maxw = d.C > d.Q ? d.C : d.Q;
        norm_part = must<double>((size_t)NORM_PARTS * maxw);
        tok_d = must<int32_t>(N); tgt_d = must<int32_t>(N);
        emb_rows = must<int32_t>(3 * N + 1); emb_off = emb_rows + N; emb_pos = emb_off + N + 1;
        if (cfg.document_mask) { doc_d = must<int32_t>(N); doc_h.resize(N); }
        const size_t half = (size_t)max_T * d.D / 2;
        rope_cos = must<float>(half); rope_sin = must<float>(half);
        const bool yarn = cfg.rope_scaling.type == ROPE_SCALING_YARN;
        if (yarn) { yarn_cos = must<float>(half); yarn_sin = must<float>(half); }
        size_t nchunks = (total + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
        sumsq_partial = must<double>(nchunks);
        host_partial.resize(nchunks);
        if (oom) return false;
        if (ohi > olo) {
            CUDA_CHECK(cudaMemset(m, 0, (ohi - olo) * 4));
            CUDA_CHECK(cudaMemset(v, 0, (ohi - olo) * 4));
        }
        // The host computes the tables with the CPU's function (plain RoPE, and YaRN's for
        // the full-attention layers when cfg.rope_scaling is set), so both backends rotate
        // by the same floats.
        std::vector<float> c(half), s(half);
        rope_tables(c.data(), s.data(), max_T, d.D, cfg.rope_theta, NULL);
        CUDA_CHECK(cudaMemcpy(rope_cos, c.data(), half * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(rope_sin, s.data(), half * 4, cudaMemcpyHostToDevice));
        if (yarn) {
            rope_tables(c.data(), s.data(), max_T, d.D, cfg.rope_theta, &cfg.rope_scaling);
            CUDA_CHECK(cudaMemcpy(yarn_cos, c.data(), half * 4, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy(yarn_sin, s.data(), half * 4, cudaMemcpyHostToDevice));
        }
        model_view(&mv, table, &cfg, grad);
        nv = mv;
        for (int l = 0; l < d.L; l++) {
            LayerView *lv = &nv.layers[l];
            lv->q_norm = norm_w(lv->q_norm); lv->k_norm = norm_w(lv->k_norm);
            lv->attn_norm = norm_w(lv->attn_norm); lv->mlp_norm = norm_w(lv->mlp_norm);
        }
        nv.final_norm = norm_w(nv.final_norm);
        return true;
    }

    // The whole table from the host: through grad (free between steps) into the master
    // range, the compute copy and the norm copy.
    void upload_params(const float *host) override {
        CUDA_CHECK(cudaMemcpy(grad, host, total * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(master, grad + mlo, (mhi - mlo) * 4, cudaMemcpyDeviceToDevice));
        if (sizeof(T) != 4) {
            cast_cuda(st, w, DT, grad, total);
        }
        for (const NormSeg &s : norm_segs)
            CUDA_CHECK(cudaMemcpyAsync(normf + s.coff, grad + s.off, s.n * 4, cudaMemcpyDeviceToDevice, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
    void *compute_weights() override { return w; }

    // row-major nn.Linear: out (N, OC) = inp (N, C) @ W^T
    void mm_fwd(T *out, const T *inp, const T *Wt, int N, int C, int OC) {
        const CudaGemm g = gemm_ctx();
        matmul_forward_cuda(&g, out, inp, Wt, DT, N, C, OC);
    }
    // dinp (N, C) (+)= dout @ W (Td: fp32 for the residual gradient); dW (OC, C) = dout^T @
    // inp in fp32, added to the gradient when accumulating over chunks or micro-batches.
    template <typename Td>
    void mm_bwd(Td *dinp, float *dW, const T *dout, const T *inp, const T *Wt, int N, int C, int OC, int acc_dinp,
                int acc_dW) {
        const CudaGemm g = gemm_ctx();
        matmul_backward_cuda(&g, dinp, dtype_of<Td>(), dW, dout, inp, Wt, DT, N, C, OC, acc_dinp, acc_dW || grad_acc);
    }
    // RMSNorm (+ the residual, + a bf16 copy of the output in bf16 mode)
    template <typename Ti, typename To>
    void norm_fwd(To *out, T *copy, float *rstd, const Ti *inp, const float *wt, const float *resid, int N, int C,
                  int is, int os) {
        rmsnorm_forward_cuda(st, out, dtype_of<To>(), sizeof(T) == 2 ? (bf16 *)(void *)copy : nullptr, rstd, inp,
                             dtype_of<Ti>(), wt, resid, N, C, is, os, (float)cfg.rms_eps);
    }
    template <typename Td, typename Ti, typename To>
    void norm_bwd(To *dinp, float *dw, const Td *dout, const Ti *inp, const float *wt, const float *rstd, int N, int C,
                  int ds, int is, int dis) {
        rmsnorm_backward_cuda(st, dinp, dtype_of<To>(), dw, grad_acc, dout, dtype_of<Td>(), inp, dtype_of<Ti>(), wt,
                              rstd, N, C, ds, is, dis, norm_part);
    }
    // Layer l's rotation: YaRN's tables on the full-attention layers when the config has
    // them (model_layer_rope_scaled, as model.c), else plain RoPE.
    void rope(T *x, int l, int B, int T_, int H, int D, float sign) {
        const bool scaled = yarn_cos && model_layer_rope_scaled(&cfg, l);
        rope_cuda(st, x, DT, scaled ? yarn_cos : rope_cos, scaled ? yarn_sin : rope_sin, B, T_, H, D, sign);
    }
    void copy_cols(T *dst, const T *src, int N, int width, int dstride, int dcol, int sstride, int scol) {
        copy_cols_cuda(st, dst, src, DT, N, width, dstride, dcol, sstride, scol);
    }
    // The GEMM operand of block l's input: its bf16 copy (bf16 mode), or the fp32 row itself.
    T *block_input(int l, size_t N) {
        return sizeof(T) != 4 ? xb + slot_of(l) * N * cfg.d_model : (T *)(void *)(res + (size_t)l * N * cfg.d_model);
    }

    // Forward of block l (activations into the layer's buffers, or slot 0 with recompute).
    void layer_fwd(int l, int B, int T_) {
        const Dims d = dims(B, T_);
        const size_t N = d.N;
        const LayerView *lw = &mv.layers[l], *nl = &nv.layers[l];
        const int window = model_layer_window(&cfg, l, T_);
        float *x = res + l * N * d.C, *y = res + (l + 1) * N * d.C;
        const size_t sl = slot_of(l);   // per-layer buffers: layer l, or slot 0 with recompute
        T *qkv_l = qkv + sl * N * d.QKV, *q_l = q + sl * N * d.Q, *k_l = k + sl * N * d.KV, *v_l = vv + sl * N * d.KV;
        T *att_l = att + sl * N * d.Q, *ao_l = ao + sl * N * d.C, *h = mid + sl * N * d.C;
        T *gu_l = gu + sl * N * 2 * d.H, *act_l = act + sl * N * d.H, *mo_l = mo + sl * N * d.C;
        T *xg = block_input(l, N);
        if (sizeof(T) != 4) {   // x (fp32) -> its bf16 copy for the QKV GEMM
            cast_cuda(st, xg, DT, x, N * d.C);
        }
        float *h32 = sizeof(T) != 4 ? hf : (float *)(void *)h;   // h in fp32 (fp32 mode: h itself)
        T *hcopy = sizeof(T) != 4 ? h : nullptr;
        mm_fwd(qkv_l, xg, W(lw->wqkv), d.N, d.C, d.QKV);
        norm_fwd(q_l, nullptr, q_rstd + sl * N, qkv_l, nl->q_norm, nullptr, d.N, d.Q, d.QKV, d.Q);
        norm_fwd(k_l, nullptr, k_rstd + sl * N, qkv_l + d.Q, nl->k_norm, nullptr, d.N, d.KV, d.QKV, d.KV);
        copy_cols(v_l, qkv_l, d.N, d.KV, d.KV, 0, d.QKV, d.Q + d.KV);
        rope(q_l, l, B, T_, d.NH, d.D, 1.0f);
        rope(k_l, l, B, T_, d.NKV, d.D, 1.0f);
        attention_forward_cuda<T>(att_l, lse + sl * N * d.NH, q_l, k_l, v_l, B, T_, d.NH, d.NKV, d.D, window, doc_d, st);
        mm_fwd(ao_l, att_l, W(lw->wo), d.N, d.Q, d.C);
        norm_fwd(h32, hcopy, a_rstd + sl * N, ao_l, nl->attn_norm, x, d.N, d.C, d.C, d.C);   // h = x + norm(a)
        mm_fwd(gu_l, h, W(lw->wgu), d.N, d.C, 2 * d.H);
        swiglu_forward_cuda(st, act_l, gu_l, DT, d.N, d.H);
        mm_fwd(mo_l, act_l, W(lw->wdown), d.N, d.H, d.C);
        norm_fwd(y, nullptr, m_rstd + sl * N, mo_l, nl->mlp_norm, h32, d.N, d.C, d.C, d.C);   // y = h + norm(m)
    }

    LossSums fwd_bwd(const int32_t *inputs, const int32_t *targets, int B, int T_, float z, float inv_count,
                     int want_grads, float *logits_out, float *tok_ce) override {
        if (B > max_B || T_ > max_T) { fprintf(stderr, "olmo: error: CUDA model: (B=%d, T=%d) exceeds (%d, %d)\n", B, T_, max_B, max_T); exit(1); }
        const Dims d = dims(B, T_);
        const size_t N = d.N;
        const int Vp = cfg.padded_vocab;
        CUDA_CHECK(cudaMemcpyAsync(tok_d, inputs, N * 4, cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemcpyAsync(tgt_d, targets, N * 4, cudaMemcpyHostToDevice, st));
        if (doc_d) {   // document starts from the tokens by the CPU's function (model/docmask.h)
            CUDA_CHECK(cudaStreamSynchronize(st));   // doc_h may still feed the previous copy
            doc_starts_from_tokens(inputs, B, T_, cfg.eos_id, doc_h.data());
            CUDA_CHECK(cudaMemcpyAsync(doc_d, doc_h.data(), N * 4, cudaMemcpyHostToDevice, st));
        }
        if (want_grads) group_tokens(inputs, d.N);
        embedding_forward_cuda(st, res, tok_d, W(mv.embed), DT, d.N, d.C);
        for (int l = 0; l < d.L; l++) layer_fwd(l, B, T_);
        float *xL = res + (size_t)d.L * N * d.C;
        norm_fwd(xf, nullptr, xf_rstd, (const float *)xL, nv.final_norm, nullptr, d.N, d.C, d.C, d.C);

        // LM head + loss, chunked; the backward GEMMs per chunk (dW accumulated over chunks in order)
        const bool g = want_grads != 0;
        for (int n0 = 0; n0 < d.N; n0 += lm_chunk) {
            int nc = d.N - n0 < lm_chunk ? d.N - n0 : lm_chunk;
            const T *xc = xf + (size_t)n0 * d.C;
            const CudaGemm gm = gemm_ctx();
            gemm_cuda(&gm, true, false, Vp, nc, d.C, W(mv.lm_head), d.C, xc, d.C, logits, Vp, 0.0f, DT, DT_F32);
            if (logits_out)
                CUDA_CHECK(cudaMemcpyAsync(logits_out + (size_t)n0 * Vp, logits, (size_t)nc * Vp * 4, cudaMemcpyDeviceToHost, st));
            lmhead_rows_cuda(st, dlogits, DT, logits, tgt_d + n0, nc, Vp, z, inv_count, g, row_ce + n0, row_z + n0,
                             tok_ce_d + n0);
            if (g) mm_bwd(dxf + (size_t)n0 * d.C, mv.lm_head, dlogits, xc, W(mv.lm_head), nc, d.C, Vp, 0, n0 > 0);
        }
        if (g) backward(B, T_);
        std::vector<double> ce(N), zz(N);
        CUDA_CHECK(cudaMemcpyAsync(ce.data(), row_ce, N * 8, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaMemcpyAsync(zz.data(), row_z, N * 8, cudaMemcpyDeviceToHost, st));
        if (tok_ce) CUDA_CHECK(cudaMemcpyAsync(tok_ce, tok_ce_d, N * 4, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        LossSums sums = {0.0, 0.0, 0};
        for (size_t n = 0; n < N; n++) {   // token order, as the CPU's chunk loop
            if (targets[n] < 0) continue;
            sums.ce_sum += ce[n];
            sums.z_sum += zz[n];
            sums.n_valid++;
        }
        return sums;
    }

    // The micro-batch's positions grouped by token, for the embedding backward: rows in
    // ascending token order, each token's positions ascending; one upload.
    void group_tokens(const int32_t *tok, int N) {
        CUDA_CHECK(cudaStreamSynchronize(st));   // emb_h may still feed the previous copy
        const size_t M = (size_t)max_B * max_T;   // the device buffers' layout: rows (M) | off (M+1) | pos (M)
        emb_h.resize(3 * M + 1);
        emb_u = embedding_group_tokens(tok, N, (int)M, emb_h.data());
        CUDA_CHECK(cudaMemcpyAsync(emb_rows, emb_h.data(), emb_h.size() * 4, cudaMemcpyHostToDevice, st));
    }

    // Backward into grad (mv's views): written by the first micro-batch of a step, added to
    // by the later ones (grad_acc). The residual gradient dres is fp32: the norm backward
    // of the final norm writes it, each block's two input GEMMs add to it (beta = 1).
    void backward(int B, int T_) {
        const Dims d = dims(B, T_);
        const size_t N = d.N;
        ModelView &gw = mv;
        float *xL = res + (size_t)d.L * N * d.C;
        norm_bwd(dres, gw.final_norm, dxf, (const float *)xL, nv.final_norm, xf_rstd, d.N, d.C, d.C, d.C, d.C);
        for (int l = d.L - 1; l >= 0; l--) {
            const LayerView *lw = &mv.layers[l], *nl = &nv.layers[l];
            LayerView *lg = &gw.layers[l];
            const int window = model_layer_window(&cfg, l, T_);
            // Recompute: the block's activations again, bitwise the same (the slot still holds
            // the last block's from the forward).
            if (recompute && l != d.L - 1) layer_fwd(l, B, T_);
            const size_t sl = slot_of(l);
            T *xg = block_input(l, N);
            T *qkv_l = qkv + sl * N * d.QKV, *q_l = q + sl * N * d.Q, *k_l = k + sl * N * d.KV, *v_l = vv + sl * N * d.KV;
            T *att_l = att + sl * N * d.Q, *ao_l = ao + sl * N * d.C, *h = mid + sl * N * d.C;
            T *gu_l = gu + sl * N * 2 * d.H, *act_l = act + sl * N * d.H, *mo_l = mo + sl * N * d.C;
            norm_bwd(dm, lg->mlp_norm, (const float *)dres, mo_l, nl->mlp_norm, m_rstd + sl * N, d.N, d.C, d.C, d.C, d.C);
            mm_bwd(dact, lg->wdown, dm, act_l, W(lw->wdown), d.N, d.H, d.C, 0, 0);
            swiglu_backward_cuda(st, dgu, dact, gu_l, DT, d.N, d.H);
            mm_bwd(dres, lg->wgu, dgu, h, W(lw->wgu), d.N, d.C, 2 * d.H, 1, 0);
            norm_bwd(da, lg->attn_norm, (const float *)dres, ao_l, nl->attn_norm, a_rstd + sl * N, d.N, d.C, d.C, d.C, d.C);
            mm_bwd(datt, lg->wo, da, att_l, W(lw->wo), d.N, d.Q, d.C, 0, 0);
            attention_backward_cuda<T>(dq, dk, dv, Di, datt, q_l, k_l, v_l, att_l, lse + sl * N * d.NH, B, T_, d.NH,
                                       d.NKV, d.D, window, doc_d, st);
            rope(dq, l, B, T_, d.NH, d.D, -1.0f);
            rope(dk, l, B, T_, d.NKV, d.D, -1.0f);
            norm_bwd(dqkv, lg->q_norm, (const T *)dq, (const T *)qkv_l, nl->q_norm, q_rstd + sl * N, d.N, d.Q, d.Q, d.QKV, d.QKV);
            norm_bwd(dqkv + d.Q, lg->k_norm, (const T *)dk, (const T *)(qkv_l + d.Q), nl->k_norm, k_rstd + sl * N, d.N,
                     d.KV, d.KV, d.QKV, d.QKV);
            copy_cols(dqkv, dv, d.N, d.KV, d.QKV, d.Q + d.KV, d.KV, 0);
            mm_bwd(dres, lg->wqkv, dqkv, xg, W(lw->wqkv), d.N, d.C, d.QKV, 1, 0);
        }
        if (!grad_acc) CUDA_CHECK(cudaMemsetAsync(gw.embed, 0, sizeof(float) * (size_t)cfg.padded_vocab * d.C, st));
        embedding_backward_cuda(st, gw.embed, dres, emb_rows, max_B * max_T, emb_u, d.C);
    }
};

struct CudaModel { CudaModelBase *impl; };

extern "C" {

int cuda_device_count(char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        if (err) snprintf(err, errlen, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        cudaGetLastError();
        return 0;
    }
    return n;
}

void cuda_select_device(int local_rank) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return;
    CUDA_CHECK(cudaSetDevice(local_rank % n));
}

void cuda_device_describe(char *out, size_t outlen) {
    cudaDeviceProp p;
    int dev = 0;
    cudaGetDevice(&dev);
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) { snprintf(out, outlen, "unknown CUDA device"); return; }
    snprintf(out, outlen, "%s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
             p.totalGlobalMem / 1073741824.0);
}

size_t cuda_device_free_bytes(void) {
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return fr;
}

CudaModel *cuda_model_create(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int use_bf16,
                             int recompute, size_t opt_lo, size_t opt_hi, char *err, size_t errlen) {
    if (!cuda_device_count(err, errlen)) return NULL;
    if (!attention_head_dim_supported(cfg->head_dim)) {
        snprintf(err, errlen, "CUDA backend: head_dim %d not supported (16, 32, 64, 128)", cfg->head_dim);
        return NULL;
    }
    if (opt_lo > opt_hi || opt_hi > t->total) {
        snprintf(err, errlen, "CUDA backend: optimizer range [%zu, %zu) outside the table (%zu)", opt_lo, opt_hi, t->total);
        return NULL;
    }
    CudaModelBase *b = use_bf16 ? (CudaModelBase *)new CudaModelT<bf16>() : (CudaModelBase *)new CudaModelT<float>();
    b->cfg = *cfg;
    b->table = t;
    b->max_B = max_B;
    b->max_T = max_T;
    b->is_bf16 = use_bf16;
    b->recompute = recompute;
    b->total = t->total;
    b->olo = opt_lo;
    b->ohi = opt_hi;
    // bf16 computes from the bf16 copy, so the fp32 master is needed only where this
    // device runs AdamW; fp32 computes from the master itself: all of it.
    const bool shard_master = use_bf16 && opt_hi > opt_lo && (opt_lo > 0 || opt_hi < t->total);
    b->mlo = shard_master ? opt_lo : 0;
    b->mhi = shard_master ? opt_hi : t->total;
    CUDA_CHECK(cudaStreamCreate(&b->st));
    LT_CHECK(cublasLtCreate(&b->lt));
    b->workspace = b->alloc<char>(CUDA_WORKSPACE_BYTES);
    bool ok = b->workspace && (use_bf16 ? ((CudaModelT<bf16> *)b)->init() : ((CudaModelT<float> *)b)->init());
    if (!ok) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        snprintf(err, errlen, "CUDA backend: out of device memory (%.2f GiB allocated before failing, %.2f GiB total)",
                 b->bytes / 1073741824.0, tot / 1073741824.0);
        b->free_all();
        cublasLtDestroy(b->lt);
        cudaStreamDestroy(b->st);
        delete b;
        return NULL;
    }
    CudaMemPlan plan;
    cuda_mem_plan(cfg, t, max_B, max_T, use_bf16, recompute, opt_lo, opt_hi, &plan);
    if ((double)b->bytes != plan.total)
        fprintf(stderr, "olmo: note: CUDA allocated %zu bytes, the memory plan (olmo info) says %.0f\n", b->bytes,
                plan.total);
    CudaModel *cm = new CudaModel;
    cm->impl = b;
    return cm;
}

void cuda_model_destroy(CudaModel *cm) {
    if (!cm) return;
    CudaModelBase *b = cm->impl;
    cudaStreamSynchronize(b->st);
#ifdef OLMO_NCCL
    if (b->comm) ncclCommDestroy(b->comm);
#endif
    b->free_all();
    cublasLtDestroy(b->lt);
    cudaStreamDestroy(b->st);
    delete b;
    delete cm;
}

size_t cuda_model_bytes(const CudaModel *cm) { return cm->impl->bytes; }

void cuda_sync(CudaModel *cm) { CUDA_CHECK(cudaStreamSynchronize(cm->impl->st)); }

void cuda_upload_params(CudaModel *cm, const float *host) { cm->impl->upload_params(host); }

void cuda_download_range(CudaModel *cm, int which, size_t lo, size_t hi, float *host) {
    CudaModelBase *b = cm->impl;
    const float *src = which == 0 ? b->master : which == 1 ? b->m : b->v;
    size_t a = which == 0 ? b->mlo : b->olo, e = which == 0 ? b->mhi : b->ohi;
    if (lo > hi || lo < a || hi > e) {
        fprintf(stderr, "olmo: error: CUDA: download [%zu, %zu) of buffer %d outside its device range [%zu, %zu)\n", lo,
                hi, which, a, e);
        exit(1);
    }
    CUDA_CHECK(cudaStreamSynchronize(b->st));
    if (hi > lo) CUDA_CHECK(cudaMemcpy(host, src + (lo - a), (hi - lo) * 4, cudaMemcpyDeviceToHost));
}

void cuda_upload_adam(CudaModel *cm, const float *m, const float *v) {
    CudaModelBase *b = cm->impl;
    CUDA_CHECK(cudaMemcpy(b->m, m, (b->ohi - b->olo) * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b->v, v, (b->ohi - b->olo) * 4, cudaMemcpyHostToDevice));
}

void cuda_download_adam(CudaModel *cm, float *m, float *v) {
    CudaModelBase *b = cm->impl;
    cuda_download_range(cm, 1, b->olo, b->ohi, m);
    cuda_download_range(cm, 2, b->olo, b->ohi, v);
}

LossSums cuda_forward_backward(CudaModel *cm, const int32_t *inputs, const int32_t *targets, int B, int T,
                               float z_coef, float inv_count, int want_grads, float *logits_out, float *tok_ce) {
    return cm->impl->fwd_bwd(inputs, targets, B, T, z_coef, inv_count, want_grads, logits_out, tok_ce);
}

void cuda_grad_reset(CudaModel *cm) {
    cm->impl->grad_acc = 0;
    cm->impl->pushed = 0;
}

void cuda_grad_push(CudaModel *cm) {
    cm->impl->grad_acc = 1;
    cm->impl->pushed++;
}

void cuda_grad_finish(CudaModel *cm) {
    if (cm->impl->pushed == 0) { fprintf(stderr, "olmo: error: CUDA gradient: no micro-batch pushed\n"); exit(1); }
}

void cuda_grad_download(CudaModel *cm, float *host) {
    CudaModelBase *b = cm->impl;
    CUDA_CHECK(cudaStreamSynchronize(b->st));
    CUDA_CHECK(cudaMemcpy(host, b->grad, b->total * 4, cudaMemcpyDeviceToHost));
}

void cuda_grad_poison(CudaModel *cm) {
    poison_cuda(cm->impl->st, cm->impl->grad);
}

void cuda_grad_sumsq_chunks(CudaModel *cm, double *part) {
    CudaModelBase *b = cm->impl;
    if (b->olo % SUMSQ_CHUNK) { fprintf(stderr, "olmo: error: CUDA: shard start %zu not chunk-aligned\n", b->olo); exit(1); }
    size_t n = b->ohi - b->olo, nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK, c0 = b->olo / SUMSQ_CHUNK;
    if (nch == 0) return;
    sumsq_chunks_cuda(b->st, b->sumsq_partial, b->grad + b->olo, n);
    CUDA_CHECK(cudaMemcpyAsync(part + c0, b->sumsq_partial, nch * 8, cudaMemcpyDeviceToHost, b->st));
    CUDA_CHECK(cudaStreamSynchronize(b->st));
}

double cuda_grad_sumsq(CudaModel *cm) {
    CudaModelBase *b = cm->impl;
    size_t nch = (b->total + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    std::fill(b->host_partial.begin(), b->host_partial.end(), 0.0);
    cuda_grad_sumsq_chunks(cm, b->host_partial.data());
    double s = 0.0;
    for (size_t i = 0; i < nch; i++) s += b->host_partial[i];
    return s;
}

void cuda_grad_scale(CudaModel *cm, float s) {
    CudaModelBase *b = cm->impl;
    size_t n = b->ohi - b->olo;
    if (n == 0) return;
    scale_cuda(b->st, b->grad + b->olo, s, n);
}

void cuda_adamw(CudaModel *cm, float lr, float beta1, float beta2, float eps, float wd, int decay_embedding, int step) {
    CudaModelBase *b = cm->impl;
    double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    for (int i = 0; i < b->table->n; i++) {
        const ParamInfo *p = &b->table->p[i];
        // this device's part of the tensor: [a, e) of the flat table
        size_t a = p->offset > b->olo ? p->offset : b->olo;
        size_t e = p->offset + p->numel < b->ohi ? p->offset + p->numel : b->ohi;
        if (a >= e) continue;
        float wdi = (p->kind == PARAM_EMBEDDING && !decay_embedding) ? 0.0f : wd;
        float decay = 1.0f - lr * wdi;
        float *pm = b->master + (a - b->mlo), *mm = b->m + (a - b->olo), *vm = b->v + (a - b->olo);
        void *wc = b->is_bf16 ? (void *)((bf16 *)b->compute_weights() + a) : nullptr;
        adamw_cuda(b->st, pm, mm, vm, b->grad + a, wc, b->is_bf16 ? DT_BF16 : DT_F32, e - a, beta1, beta2, eps, decay,
                   step_size, bc2_sqrt);
        // bf16 with the master sharded: this device's part of each norm weight into normf
        // (the all-gather sends it to the other ranks).
        if (p->kind == PARAM_NORM && b->normf) {
            for (const CudaModelBase::NormSeg &s : b->norm_segs)
                if (s.off == p->offset)
                    CUDA_CHECK(cudaMemcpyAsync(b->normf + s.coff + (a - s.off), pm, (e - a) * 4, cudaMemcpyDeviceToDevice,
                                               b->st));
        }
    }
}

// ---- NCCL (multi-GPU ZeRO-1) --------------------------------------------------------------

int cuda_nccl_built(void) {
#ifdef OLMO_NCCL
    return 1;
#else
    return 0;
#endif
}

int cuda_nccl_unique_id(void *id, size_t cap) {
#ifdef OLMO_NCCL
    if (cap < sizeof(ncclUniqueId)) return -1;
    ncclUniqueId u;
    if (ncclGetUniqueId(&u) != ncclSuccess) return -1;
    memcpy(id, &u, sizeof u);
    return (int)sizeof u;
#else
    (void)id, (void)cap;
    return -1;
#endif
}

#ifdef OLMO_NCCL
#define NCCL_CHECK(x) OLMO_LIB_CHECK("NCCL", ncclResult_t, ncclSuccess, ncclGetErrorString, x)

// Wait for the NCCL operations just queued on the model's stream, polling the
// communicator's asynchronous error meanwhile: a peer whose process died (NCCL reports
// ncclRemoteError or ncclSystemError when its connections close) or that never joins the
// collective (stalled, hung, or killed without the transport noticing) ends this rank with
// a message after OLMO_NCCL_TIMEOUT seconds (default 600) instead of hanging forever;
// mpirun then stops the other ranks. The host blocks here, where it would block at the
// gradient norm's synchronization a few kernels later anyway.
static void nccl_wait(CudaModelBase *b, const char *what) {
    const char *e = getenv("OLMO_NCCL_TIMEOUT");
    const double limit = e && *e ? atof(e) : 600.0;
    timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long spin = 0;; spin++) {
        cudaError_t q = cudaStreamQuery(b->st);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) CUDA_CHECK(q);
        ncclResult_t ae = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(b->comm, &ae));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double waited = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
        if ((ae != ncclSuccess && ae != ncclInProgress) || waited > limit) {
            ncclCommAbort(b->comm);
            b->comm = nullptr;
            if (ae != ncclSuccess && ae != ncclInProgress)
                fprintf(stderr, "olmo: error: NCCL: %s failed on rank %d of %d: %s (a peer rank died or lost its connection)\n",
                        what, b->rank, b->world, ncclGetErrorString(ae));
            else
                fprintf(stderr, "olmo: error: NCCL: %s did not complete within %.0f s on rank %d of %d (OLMO_NCCL_TIMEOUT): a peer rank is stalled or gone\n",
                        what, limit, b->rank, b->world);
            exit(1);
        }
        if (spin > 1000) usleep(200);
    }
}
#endif

int cuda_nccl_init(CudaModel *cm, const void *id, int rank, int world, const size_t *bounds, char *err, size_t errlen) {
#ifdef OLMO_NCCL
    CudaModelBase *b = cm->impl;
    if (b->olo != bounds[rank] || b->ohi != bounds[rank + 1]) {
        snprintf(err, errlen, "NCCL: the device optimizer range [%zu, %zu) is not shard %d [%zu, %zu)", b->olo, b->ohi,
                 rank, bounds[rank], bounds[rank + 1]);
        return -1;
    }
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = ncclCommInitRank(&b->comm, world, u, rank);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "NCCL: ncclCommInitRank (rank %d of %d): %s (two ranks on one GPU are refused)", rank,
                 world, ncclGetErrorString(r));
        b->comm = nullptr;
        return -1;
    }
    b->world = world;
    b->rank = rank;
    b->bounds.assign(bounds, bounds + world + 1);
    return 0;
#else
    (void)cm, (void)id, (void)rank, (void)world, (void)bounds;
    snprintf(err, errlen, "this binary was built without NCCL");
    return -1;
#endif
}

// Shard r of the summed gradient lands on rank r, in place in grad: one ncclReduce per
// shard (root r), grouped so NCCL runs them together. Shards are the CPU's uneven
// chunk-aligned bounds, which ncclReduceScatter (equal counts) cannot express.
void cuda_grad_reduce(CudaModel *cm) {
#ifdef OLMO_NCCL
    CudaModelBase *b = cm->impl;
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < b->world; r++) {
        float *p = b->grad + b->bounds[r];
        NCCL_CHECK(ncclReduce(p, p, b->bounds[r + 1] - b->bounds[r], ncclFloat, ncclSum, r, b->comm, b->st));
    }
    NCCL_CHECK(ncclGroupEnd());
    nccl_wait(b, "the gradient reduce");
#else
    (void)cm;
    fprintf(stderr, "olmo: error: cuda_grad_reduce: built without NCCL\n");
    exit(1);
#endif
}

// After AdamW on every shard: each rank broadcasts its shard of the compute weights (bf16;
// fp32 mode: the master itself) and its pieces of the norm weights (bf16 with a sharded
// master keeps them in fp32 on every rank).
void cuda_params_allgather(CudaModel *cm) {
#ifdef OLMO_NCCL
    CudaModelBase *b = cm->impl;
    const ncclDataType_t wt = b->is_bf16 ? ncclBfloat16 : ncclFloat;
    const size_t es = b->is_bf16 ? 2 : 4;
    char *w = (char *)b->compute_weights();
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < b->world; r++) {
        char *p = w + b->bounds[r] * es;
        NCCL_CHECK(ncclBroadcast(p, p, b->bounds[r + 1] - b->bounds[r], wt, r, b->comm, b->st));
    }
    for (const CudaModelBase::NormSeg &s : b->norm_segs)
        for (int r = 0; r < b->world; r++) {
            size_t a = s.off > b->bounds[r] ? s.off : b->bounds[r];
            size_t e = s.off + s.n < b->bounds[r + 1] ? s.off + s.n : b->bounds[r + 1];
            if (a >= e) continue;
            float *p = b->normf + s.coff + (a - s.off);
            NCCL_CHECK(ncclBroadcast(p, p, e - a, ncclFloat, r, b->comm, b->st));
        }
    NCCL_CHECK(ncclGroupEnd());
    nccl_wait(b, "the weight all-gather");
#else
    (void)cm;
    fprintf(stderr, "olmo: error: cuda_params_allgather: built without NCCL\n");
    exit(1);
#endif
}

}   // extern "C"
