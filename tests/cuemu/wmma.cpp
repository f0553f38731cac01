// wmma.cpp: the warp-wide half of the emulated WMMA (include/mma.h): gathering the 16x16
// tiles from the lanes' fragments, the product with fp32 accumulation, and the checks the
// hardware makes on pointers.
#include <mma.h>

namespace nvcuda {
namespace wmma {
namespace detail {

void check_ptr(const char *file, int line, const void *p, unsigned ldm, size_t es, const char *what) {
    if ((uintptr_t)p % 32)
        cuemu::fail(file, line, "wmma::%s: pointer %p is not 256-bit aligned (misaligned address on a device)", what, p);
    if ((ldm * es) % 16)
        cuemu::fail(file, line, "wmma::%s: ldm %u is not a multiple of 16 bytes (%zu-byte elements)", what, ldm, es);
}

// Element e of a tile lives in lane e % 32, slot e / 32 (mma.h).
static float elem(const void *x, int bf, int e) {
    return bf ? __bfloat162float(((const __nv_bfloat16 *)x)[e / 32]) : ((const float *)x)[e / 32];
}

void mma_complete(cuemu::WarpOp **ops, unsigned mask) {
    if (mask != 0xffffffffu) cuemu::fail(__FILE__, __LINE__, "wmma::mma_sync needs the whole warp");
    MmaOp *o0 = (MmaOp *)ops[0];
    for (int l = 1; l < 32; l++) {
        MmaOp *o = (MmaOp *)ops[l];
        // all lanes must have loaded their pieces from the same tiles (or all filled them)
        if (o->asrc != o0->asrc || o->bsrc != o0->bsrc)
            cuemu::fail(__FILE__, __LINE__, "wmma::mma_sync: lane %d's fragments come from other tiles than lane 0's", l);
    }
    float A[16][16], B[16][16], C[16][16];
    for (int e = 0; e < 256; e++) {
        const MmaOp *o = (const MmaOp *)ops[e % 32];
        A[e / 16][e % 16] = elem(o->a, o->a_bf16, e);
        B[e / 16][e % 16] = elem(o->b, o->b_bf16, e);
        C[e / 16][e % 16] = o->c[e / 32];
    }
    for (int e = 0; e < 256; e++) {
        const int i = e / 16, j = e % 16;
        float acc = C[i][j];
        for (int k = 0; k < 16; k++) acc += A[i][k] * B[k][j];   // bf16 products are exact in fp32
        ((MmaOp *)ops[e % 32])->d[e / 32] = acc;
    }
}

}   // namespace detail
}   // namespace wmma
}   // namespace nvcuda
