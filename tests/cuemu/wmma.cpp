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

static float elem(const void *x, int bf, int i) {
    return bf ? __bfloat162float(((const __nv_bfloat16 *)x)[i]) : ((const float *)x)[i];
}

void mma_complete(cuemu::WarpOp **ops, unsigned mask) {
    if (mask != 0xffffffffu) cuemu::fail(__FILE__, __LINE__, "wmma::mma_sync needs the whole warp");
    cuemu::cost::mma(1);
    MmaOp *o0 = (MmaOp *)ops[0];
    for (int l = 1; l < 32; l++) {
        MmaOp *o = (MmaOp *)ops[l];
        // all lanes must have loaded their pieces from the same tiles (or all filled them)
        if (o->asrc != o0->asrc || o->bsrc != o0->bsrc)
            cuemu::fail(__FILE__, __LINE__, "wmma::mma_sync: lane %d's fragments come from other tiles than lane 0's", l);
    }
    float A[16][16], B[16][16], C[16][16];
    for (unsigned l = 0; l < 32; l++) {   // gather the tiles from the lanes (mma.h's layout)
        const MmaOp *o = (const MmaOp *)ops[l];
        for (int i = 0; i < 8; i++) {
            int r, c;
            elem_rc(false, l, i, &r, &c);
            A[r][c] = elem(o->a, o->a_bf16, i);
            C[r][c] = o->c[i];
            elem_rc(true, l, i, &r, &c);
            B[r][c] = elem(o->b, o->b_bf16, i);
        }
    }
    for (unsigned l = 0; l < 32; l++)
        for (int i = 0; i < 8; i++) {
            int r, c;
            elem_rc(false, l, i, &r, &c);
            float acc = C[r][c];
            for (int k = 0; k < 16; k++) acc += A[r][k] * B[k][c];   // bf16 products are exact in fp32
            ((MmaOp *)ops[l])->d[i] = acc;
        }
}

}   // namespace detail
}   // namespace wmma
}   // namespace nvcuda
