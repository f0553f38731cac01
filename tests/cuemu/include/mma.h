// mma.h (emulation): nvcuda::wmma for 16x16x16 tiles (bf16 or half operands, fp32
// accumulator). Each lane owns 8 of a fragment's 256 elements (element e = i*32 + lane,
// row-major over the logical tile), loaded and stored by that lane alone at the moment it
// runs; mma_sync is a warp collective (all lanes of the warp, same call site) that
// multiplies the tiles gathered from every lane with fp32 accumulation. Lanes own elements
// in the device's mma.sync fragment layout (detail::elem_rc). The alignment
// rules of the real API are checked (pointer 256-bit aligned, ldm a multiple of 16 bytes).
#pragma once
#include "cuda_bf16.h"
#include "cuemu.h"
#include "cuemu_cost.h"

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "cuemu: only 16x16x16 WMMA fragments are emulated");
    enum { num_elements = 8 };
    T x[8];
    const void *src = nullptr;   // where the lane loaded it from (checked by mma_sync)
};

namespace detail {
template <typename T> inline float tofl(T v) { return (float)v; }
inline float tofl(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> inline T fromfl(float v) { return (T)v; }
template <> inline __nv_bfloat16 fromfl<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
void check_ptr(const char *file, int line, const void *p, unsigned ldm, size_t es, const char *what);
// Which element of the 16x16 tile slot i of a lane holds: the layout of sm_80's mma.sync
// m16n8k16 fragments (two n8 halves), so that a lane's elements come from other lanes'
// rows and columns as on the device: A and the accumulator hold (row lane/4 (+8), columns
// 2(lane%4), +1 (+8)); B holds (rows k = 2(lane%4), +1 (+8), column lane/4 (+8)).
inline void elem_rc(bool is_b, unsigned lane, int i, int *r, int *c) {
    const int g = (int)lane / 4, t = (int)lane % 4;
    if (!is_b) {
        *r = g + 8 * ((i >> 1) & 1);
        *c = 2 * t + (i & 1) + 8 * (i >> 2);
    } else {
        *r = 2 * t + (i & 1) + 8 * ((i >> 1) & 1);
        *c = g + 8 * (i >> 2);
    }
}
// The cost model (tests/cuemu/cost.cpp) counts what the device's instructions access, not
// the element loads below: a 16-bit A/B tile is one ldmatrix.x4 (lane l: 16 bytes of memory
// row l % 16, half l / 16); an fp32 tile in row-major memory four 8-byte accesses per lane
// (the accumulator layout's pairs), otherwise one 4-byte access per element.
inline uintptr_t cost_site(const char *file, int line, int j) { return ((uintptr_t)file * 131u + (uintptr_t)line) * 16u + (uintptr_t)j; }
template <typename T> inline void cost_tile(const char *file, int line, const T *p, unsigned ldm, bool row_major, bool is_b, bool write) {
    if (!cuemu::cost::g_on) return;
    const unsigned lane = cuemu::lane_id();
    if (sizeof(T) == 2) {
        const unsigned mr = lane % 16, half = lane / 16;
        cuemu::cost::model_access(cost_site(file, line, 0), p + (size_t)mr * ldm + half * 8, 16, write);
    } else if (!is_b && row_major) {
        const unsigned g = lane / 4, t = lane % 4;
        for (int j = 0; j < 4; j++)
            cuemu::cost::model_access(cost_site(file, line, j), p + (size_t)(g + 8 * (j & 1)) * ldm + 2 * t + 8 * (j >> 1), 8, write);
    } else {
        for (int i = 0; i < 8; i++) {
            int r, c;
            elem_rc(is_b, lane, i, &r, &c);
            cuemu::cost::model_access(cost_site(file, line, i), row_major ? p + (size_t)r * ldm + c : p + (size_t)c * ldm + r, 4, write);
        }
    }
}
template <bool RowMajor, typename T> void load(T *x, const T *p, unsigned ldm, bool is_b) {
    const unsigned lane = cuemu::lane_id();
    cuemu::cost::t_suppress++;
    for (int i = 0; i < 8; i++) {
        int r, c;
        elem_rc(is_b, lane, i, &r, &c);
        x[i] = RowMajor ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
    }
    cuemu::cost::t_suppress--;
}
struct MmaOp : cuemu::WarpOp {
    float *d;
    const float *c;
    const void *a, *b;
    int a_bf16, b_bf16;   // element types (bf16 or float)
    const void *asrc, *bsrc;
};
void mma_complete(cuemu::WarpOp **ops, unsigned mask);
}   // namespace detail

template <typename Use, typename T, typename L>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, T v) {
    for (int i = 0; i < 8; i++) f.x[i] = v;
    f.src = nullptr;
}
template <typename Use, typename L>
inline void fill_fragment(fragment<Use, 16, 16, 16, __nv_bfloat16, L> &f, float v) {
    for (int i = 0; i < 8; i++) f.x[i] = __float2bfloat16(v);
    f.src = nullptr;
}
template <typename Use, typename T, typename L>
inline void load_matrix_sync_at(const char *file, int line, fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ldm) {
    static_assert(!std::is_same<Use, accumulator>::value, "accumulator loads take a layout");
    detail::check_ptr(file, line, p, ldm, sizeof(T), "load_matrix_sync");
    detail::cost_tile(file, line, p, ldm, std::is_same<L, row_major>::value, std::is_same<Use, matrix_b>::value, false);
    detail::load<std::is_same<L, row_major>::value>(f.x, p, ldm, std::is_same<Use, matrix_b>::value);
    f.src = p;
}
inline void load_matrix_sync_at(const char *file, int line, fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                                unsigned ldm, layout_t lay) {
    detail::check_ptr(file, line, p, ldm, 4, "load_matrix_sync");
    detail::cost_tile(file, line, p, ldm, lay == mem_row_major, false, false);
    if (lay == mem_row_major) detail::load<true>(f.x, p, ldm, false);
    else detail::load<false>(f.x, p, ldm, false);
    f.src = p;
}
inline void store_matrix_sync_at(const char *file, int line, float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                                 unsigned ldm, layout_t lay) {
    detail::check_ptr(file, line, p, ldm, 4, "store_matrix_sync");
    detail::cost_tile(file, line, p, ldm, lay == mem_row_major, false, true);
    const unsigned lane = cuemu::lane_id();
    cuemu::cost::t_suppress++;
    for (int i = 0; i < 8; i++) {
        int r, c;
        detail::elem_rc(false, lane, i, &r, &c);
        if (lay == mem_row_major) p[(size_t)r * ldm + c] = f.x[i];
        else p[(size_t)c * ldm + r] = f.x[i];
    }
    cuemu::cost::t_suppress--;
}
template <typename TA, typename LA, typename TB, typename LB>
inline void mma_sync_at(const char *file, int line, fragment<accumulator, 16, 16, 16, float> &d,
                        const fragment<matrix_a, 16, 16, 16, TA, LA> &a, const fragment<matrix_b, 16, 16, 16, TB, LB> &b,
                        const fragment<accumulator, 16, 16, 16, float> &c) {
    static_assert(std::is_same<TA, TB>::value, "wmma: A and B of different types");
    detail::MmaOp op;
    op.complete = detail::mma_complete;
    op.what = "wmma::mma_sync";
    op.d = d.x;
    op.c = c.x;
    op.a = a.x;
    op.b = b.x;
    op.a_bf16 = op.b_bf16 = std::is_same<TA, __nv_bfloat16>::value;
    op.asrc = a.src;
    op.bsrc = b.src;
    cuemu::warp_collective(&op, file, line, 0xffffffffu);
    d.src = nullptr;
}
}   // namespace wmma
}   // namespace nvcuda

#define load_matrix_sync(...) load_matrix_sync_at(__FILE__, __LINE__, __VA_ARGS__)
#define store_matrix_sync(...) store_matrix_sync_at(__FILE__, __LINE__, __VA_ARGS__)
#define mma_sync(...) mma_sync_at(__FILE__, __LINE__, __VA_ARGS__)
