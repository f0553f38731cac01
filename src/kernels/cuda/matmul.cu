// matmul.cu: GEMMs of the CUDA backend on cuBLASLt, fp32 accumulation (CUBLAS_COMPUTE_32F,
// no TF32): nn.Linear forward and backward in row-major terms, and the general column-major
// call the LM head uses. bf16 mode: bf16 operands, activations out in bf16, weight
// gradients out in fp32 straight into the gradient buffer (beta = 1 accumulates).
#include "kernels/cuda/ops.cuh"

static cudaDataType_t cuda_type(DType t) { return t == DT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

static uint32_t align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a % al)) al >>= 1;
    return al;
}

void gemm_cuda(const CudaGemm *g, bool ta, bool tb, int mm, int nn, int kk, const void *A, int lda, const void *B,
               int ldb, void *Cp, int ldc, float beta, DType in_t, DType out_t) {
    cublasLtMatmulDesc_t op;
    LT_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa));
    LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob));
    cublasLtMatrixLayout_t la, lb, lc;
    const cudaDataType_t it = cuda_type(in_t);
    LT_CHECK(cublasLtMatrixLayoutCreate(&la, it, ta ? kk : mm, ta ? mm : kk, lda));
    LT_CHECK(cublasLtMatrixLayoutCreate(&lb, it, tb ? nn : kk, tb ? kk : nn, ldb));
    LT_CHECK(cublasLtMatrixLayoutCreate(&lc, cuda_type(out_t), mm, nn, ldc));
    cublasLtMatmulPreference_t pref;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = CUDA_WORKSPACE_BYTES;
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    // The heuristic assumes 256-byte aligned operands unless told otherwise; tensors of
    // the flat table can sit at any 4-byte (bf16: 2-byte) offset after the small norm
    // vectors, so tell it the real alignment of each pointer.
    uint32_t al[3] = {align_of(A), align_of(B), align_of(Cp)};
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], 4));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], 4));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], 4));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], 4));
    cublasLtMatmulHeuristicResult_t h;
    int nres = 0;
    LT_CHECK(cublasLtMatmulAlgoGetHeuristic(g->lt, op, la, lb, lc, lc, pref, 1, &h, &nres));
    if (nres == 0) { die("cuBLASLt: no algorithm for %dx%dx%d", mm, nn, kk); }
    float alpha = 1.0f;
    LT_CHECK(cublasLtMatmul(g->lt, op, &alpha, A, la, B, lb, &beta, Cp, lc, Cp, lc, &h.algo, g->workspace, ws, g->st));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
}

void matmul_forward_cuda(const CudaGemm *g, void *out, const void *inp, const void *W, DType t, int N, int C, int OC) {
    gemm_cuda(g, true, false, OC, N, C, W, C, inp, C, out, OC, 0.0f, t, t);
}

void matmul_backward_cuda(const CudaGemm *g, void *dinp, DType dinp_t, float *dW, const void *dout, const void *inp,
                          const void *W, DType t, int N, int C, int OC, int acc_dinp, int acc_dW) {
    if (dinp) gemm_cuda(g, false, false, C, N, OC, W, C, dout, OC, dinp, C, acc_dinp ? 1.0f : 0.0f, t, dinp_t);
    if (dW) gemm_cuda(g, false, true, C, OC, N, inp, C, dout, OC, dW, C, acc_dW ? 1.0f : 0.0f, t, DT_F32);
}
