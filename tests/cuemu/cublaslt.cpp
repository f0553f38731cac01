// cublaslt.cpp: the emulated cuBLASLt matmul (include/cublasLt.h). What the library checks
// is checked here too, so a wrong descriptor fails as it would on a device:
//   attributes        the buffer size of each attribute (CUBLAS_STATUS_INVALID_VALUE)
//   types             the (compute, scale, A/B, C/D) combinations cuBLASLt supports for
//                     CUBLAS_COMPUTE_32F: fp32 throughout, or bf16 A/B with bf16 or fp32 C/D
//   shapes            op(A) m x k, op(B) k x n, C and D m x n, ld >= rows
//   alignment         every pointer at least as aligned as the preference promised the
//                     heuristic, and aligned to its element size
//   memory            A, B, C, D and the workspace lie wholly in device memory
// The product: operands of the declared type widened to fp32, acc = alpha op(A) op(B) by
// OpenBLAS sgemm (fp32 accumulation), then D = acc + beta C per element, rounded to D's type.
#include <cblas.h>
#include <stdarg.h>

#include <vector>

#include "cublasLt.h"
#include "cuda_bf16.h"
#include "cuemu_internal.h"

struct cublasLtContext { int magic; };
struct cublasLtMatmulDescOpaque {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
};
struct cublasLtMatrixLayoutOpaque {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
};
struct cublasLtMatmulPreferenceOpaque {
    uint64_t max_ws = 0;
    uint32_t align[4] = {256, 256, 256, 256};
};

static size_t esize(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }
static bool known_type(cudaDataType_t t) { return t == CUDA_R_32F || t == CUDA_R_16BF || t == CUDA_R_16F; }

static cublasStatus_t bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cublasStatus_t bad(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cuemu::diag("cuBLASLt: %s", cuemu::vformat(fmt, ap).c_str());
    va_end(ap);
    return CUBLAS_STATUS_INVALID_VALUE;
}

// out (m x n, column-major, ld ldo) = al op(A) op(B). A multi-threaded OpenBLAS sgemm tiles
// its output by thread count (src/kernels/cpu/matmul.c), and in this emulation the calling
// thread's thread count is OMP_NUM_THREADS: the device's bits then changed with the host's
// setting, which a real cuBLASLt (one algorithm per shape) never does. So: fixed blocks of
// 64 columns, each a single-threaded sgemm (OpenBLAS runs one thread inside a parallel region).
static void product(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, uint64_t m, uint64_t n, uint64_t k, float al,
                    const float *a, int64_t lda, const float *b, int64_t ldb, float *out, int64_t ldo) {
    const long nb = (long)((n + 63) / 64);
#pragma omp parallel for schedule(dynamic, 1)
    for (long j = 0; j < nb; j++) {
        const uint64_t j0 = (uint64_t)j * 64, w = n - j0 < 64 ? n - j0 : 64;
        const float *bj = tb == CblasNoTrans ? b + j0 * ldb : b + j0;   // op(B)'s column j0
        cblas_sgemm(CblasColMajor, ta, tb, (int)m, (int)w, (int)k, al, a, (int)lda, bj, (int)ldb, 0.0f, out + j0 * ldo,
                    (int)ldo);
    }
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { cudaGetLastError(); return CUBLAS_STATUS_NOT_INITIALIZED; }
    *h = new cublasLtContext{0x4c74};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!h || h->magic != 0x4c74) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->magic = 0;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale) {
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32 && compute != CUBLAS_COMPUTE_16F &&
        compute != CUBLAS_COMPUTE_64F)
        return bad("matmul descriptor: unknown compute type %d", (int)compute);
    *d = new cublasLtMatmulDescOpaque{compute, scale};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *buf,
                                              size_t size) {
    if (a == CUBLASLT_MATMUL_DESC_TRANSA || a == CUBLASLT_MATMUL_DESC_TRANSB) {
        if (size != sizeof(int32_t)) return bad("TRANSA/TRANSB attribute of %zu bytes (expected 4)", size);
        int32_t v;
        memcpy(&v, buf, 4);
        if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) return bad("transpose %d not supported for real types", v);
        (a == CUBLASLT_MATMUL_DESC_TRANSA ? d->ta : d->tb) = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    return bad("matmul descriptor attribute %d is not emulated", (int)a);
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (!known_type(type)) return bad("matrix layout: unknown data type %d", (int)type);
    *l = new cublasLtMatrixLayoutOpaque{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = new cublasLtMatmulPreferenceOpaque();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t size) {
    if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
        if (size != sizeof(uint64_t)) return bad("MAX_WORKSPACE_BYTES of %zu bytes (expected 8)", size);
        memcpy(&p->max_ws, buf, 8);
        return CUBLAS_STATUS_SUCCESS;
    }
    if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
        if (size != sizeof(uint32_t)) return bad("MIN_ALIGNMENT attribute of %zu bytes (expected 4)", size);
        uint32_t v;
        memcpy(&v, buf, 4);
        if (v == 0 || (v & (v - 1))) return bad("MIN_ALIGNMENT %u is not a power of two", v);
        p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (a == CUBLASLT_MATMUL_PREF_SEARCH_MODE) return CUBLAS_STATUS_SUCCESS;
    return bad("preference attribute %d is not emulated", (int)a);
}

// The shapes and types of one matmul; m, n, k out.
static cublasStatus_t check_problem(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, uint64_t *m, uint64_t *n, uint64_t *k) {
    if (!op || !a || !b || !c || !d) return bad("null descriptor");
    if (op->compute != CUBLAS_COMPUTE_32F || op->scale != CUDA_R_32F) {
        cuemu::diag("cuBLASLt: compute type %d / scale type %d not emulated", (int)op->compute, (int)op->scale);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    const bool f32 = a->type == CUDA_R_32F && b->type == CUDA_R_32F && c->type == CUDA_R_32F;
    const bool bf = a->type == CUDA_R_16BF && b->type == CUDA_R_16BF && (c->type == CUDA_R_16BF || c->type == CUDA_R_32F);
    if (!(f32 || bf) || d->type != c->type) {
        cuemu::diag("cuBLASLt: type combination A %d, B %d, C %d, D %d not supported with COMPUTE_32F", (int)a->type,
                    (int)b->type, (int)c->type, (int)d->type);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    *m = op->ta ? a->cols : a->rows;
    *k = op->ta ? a->rows : a->cols;
    const uint64_t kb = op->tb ? b->cols : b->rows;
    *n = op->tb ? b->rows : b->cols;
    if (kb != *k) return bad("op(A) is %llu x %llu but op(B) is %llu x %llu", (unsigned long long)*m, (unsigned long long)*k,
                             (unsigned long long)kb, (unsigned long long)*n);
    if (c->rows != *m || c->cols != *n || d->rows != *m || d->cols != *n)
        return bad("C/D are %llu x %llu / %llu x %llu, op(A) op(B) is %llu x %llu", (unsigned long long)c->rows,
                   (unsigned long long)c->cols, (unsigned long long)d->rows, (unsigned long long)d->cols,
                   (unsigned long long)*m, (unsigned long long)*n);
    const cublasLtMatrixLayout_t ls[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if (ls[i]->ld < (int64_t)ls[i]->rows || ls[i]->ld < 1 || ls[i]->rows == 0 || ls[i]->cols == 0)
            return bad("matrix %c: ld %lld < rows %llu (or an empty matrix)", "ABCD"[i], (long long)ls[i]->ld,
                       (unsigned long long)ls[i]->rows);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t *results, int *returned) {
    if (!h || h->magic != 0x4c74) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requested < 1 || !results || !returned || !pref) return bad("heuristic: bad request");
    uint64_t m, n, k;
    cublasStatus_t s = check_problem(op, a, b, c, d, &m, &n, &k);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    // the one "algorithm": remembers the alignments it was promised
    memset(&results[0], 0, sizeof results[0]);
    for (int i = 0; i < 4; i++) results[0].algo.data[i] = pref->align[i];
    results[0].algo.data[4] = 0x616c676f;   // "algo"
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// An operand as fp32: itself when it is fp32, else widened (exactly) into buf.
static const float *widen(const void *p, const cublasLtMatrixLayoutOpaque *l, std::vector<float> &buf) {
    if (l->type == CUDA_R_32F) return (const float *)p;
    const size_t n = (size_t)l->ld * (l->cols - 1) + l->rows;
    buf.resize(n);
    const __nv_bfloat16 *h = (const __nv_bfloat16 *)p;
    for (size_t i = 0; i < n; i++) buf[i] = __bfloat162float(h[i]);
    return buf.data();
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t adesc, const void *B, cublasLtMatrixLayout_t bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t cdesc, void *D, cublasLtMatrixLayout_t ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes, cudaStream_t st) {
    if (!h || h->magic != 0x4c74) return CUBLAS_STATUS_NOT_INITIALIZED;
    uint64_t m, n, k;
    cublasStatus_t s = check_problem(op, adesc, bdesc, cdesc, ddesc, &m, &n, &k);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (!algo || algo->data[4] != 0x616c676f) return bad("matmul without an algorithm from the heuristic");
    const void *ptrs[4] = {A, B, C, D};
    const cublasLtMatrixLayout_t ls[4] = {adesc, bdesc, cdesc, ddesc};
    for (int i = 0; i < 4; i++) {
        const size_t es = esize(ls[i]->type);
        const uintptr_t p = (uintptr_t)ptrs[i];
        if (p % es || p % algo->data[i])
            return bad("matrix %c at %p: not aligned to the %llu bytes promised to the heuristic (or to its element)",
                       "ABCD"[i], ptrs[i], (unsigned long long)algo->data[i]);
        const size_t bytes = ((size_t)ls[i]->ld * (ls[i]->cols - 1) + ls[i]->rows) * es;
        if (!cuemu::is_device_range(ptrs[i], bytes, nullptr))
            return bad("matrix %c: %p + %zu bytes (%llu x %llu, ld %lld) is not wholly device memory", "ABCD"[i], ptrs[i],
                       bytes, (unsigned long long)ls[i]->rows, (unsigned long long)ls[i]->cols, (long long)ls[i]->ld);
    }
    if (C != D && (cdesc->ld != ddesc->ld)) return bad("C and D at different places need equal layouts here");
    if (workspace_bytes && !cuemu::is_device_range(workspace, workspace_bytes, nullptr))
        return bad("workspace %p + %zu bytes is not device memory", workspace, workspace_bytes);
    if (cuemu::is_device_ptr(alpha) || cuemu::is_device_ptr(beta)) return bad("alpha/beta are device pointers in host pointer mode");
    cudaStreamSynchronize(st);   // pending transfers on the stream come first
    const float al = *(const float *)alpha, be = *(const float *)beta;
    std::vector<float> abuf, bbuf;
    const float *a32 = widen(A, adesc, abuf), *b32 = widen(B, bdesc, bbuf);
    const CBLAS_TRANSPOSE ta = op->ta ? CblasTrans : CblasNoTrans, tb = op->tb ? CblasTrans : CblasNoTrans;
    if (ddesc->type == CUDA_R_32F && be == 0.0f) {
        product(ta, tb, m, n, k, al, a32, adesc->ld, b32, bdesc->ld, (float *)D, ddesc->ld);
    } else if (ddesc->type == CUDA_R_32F) {
        // cuBLAS's epilogue: the product accumulated on its own, then D = alpha acc + beta C
        // once per element (sgemm with beta = 1 would add C into its partial sums: another
        // rounding, and in-place micro-batch accumulation would no longer be g1 + g2)
        std::vector<float> acc((size_t)m * n);
        product(ta, tb, m, n, k, al, a32, adesc->ld, b32, bdesc->ld, acc.data(), m);
        const float *c = (const float *)C;
        float *d = (float *)D;
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t i = 0; i < m; i++) d[j * ddesc->ld + i] = acc[j * m + i] + be * c[j * cdesc->ld + i];
    } else {
        std::vector<float> acc((size_t)m * n);
        product(ta, tb, m, n, k, al, a32, adesc->ld, b32, bdesc->ld, acc.data(), m);
        const __nv_bfloat16 *c = (const __nv_bfloat16 *)C;
        __nv_bfloat16 *d = (__nv_bfloat16 *)D;
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t i = 0; i < m; i++) {
                float v = acc[j * m + i];
                if (be != 0.0f) v += be * __bfloat162float(c[j * cdesc->ld + i]);
                d[j * ddesc->ld + i] = __float2bfloat16(v);
            }
    }
    cuemu::check_canaries("cublasLtMatmul");
    return CUBLAS_STATUS_SUCCESS;
}
