// cuemu.h: the device side of the CUDA emulation (tests/cuemu, docs/cuda.md "Emulation").
// The project's .cu files are compiled as C++ against these headers (the nvcc stand-in
// tests/cuemu/nvcc), each CUDA thread runs as a fiber, and the calls below are where a
// thread meets the others of its warp or block:
//   __syncthreads()           block barrier: every live thread must reach the same one
//   __syncwarp(), shuffles    warp collectives over the lanes of the mask, same call site
//   wmma::mma_sync            a warp collective; wmma loads and stores are per lane (each
//                             lane owns 8 of a fragment's 256 elements), so a missing
//                             __syncwarp before a load reads what the other lanes have not
//                             written yet
// A thread that reaches a different barrier, or exits while others wait, aborts the run
// naming the kernel, the block, the threads and the source lines.
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#define CUEMU 1

struct uint3 { unsigned int x, y, z; };
// CUDA's vector types with their alignment. Assigning a whole value is one access of its
// size, as the device's LDS/STS/LDG/STG.64 and .128 (the host compiler would otherwise
// move a value built from, or used as, its members as one 4-byte access a member); an
// initialisation (`float2 v = *p;`) may still be split, so kernels assign.
#define CUEMU_VEC_ASSIGN(T, n)                 \
    T &operator=(const T &o) {                 \
        __builtin_memcpy(this, &o, n);         \
        return *this;                          \
    }
struct __attribute__((aligned(8))) float2 { float x, y; CUEMU_VEC_ASSIGN(float2, 8) };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; CUEMU_VEC_ASSIGN(float4, 16) };
struct __attribute__((aligned(8))) int2 { int x, y; CUEMU_VEC_ASSIGN(int2, 8) };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; CUEMU_VEC_ASSIGN(int4, 16) };
struct __attribute__((aligned(8))) uint2 { unsigned int x, y; CUEMU_VEC_ASSIGN(uint2, 8) };
struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; CUEMU_VEC_ASSIGN(uint4, 16) };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
};
typedef cudaError_t cudaError;
struct CUstream_st;
typedef struct CUstream_st *cudaStream_t;

namespace cuemu {

// Where the running fiber is in the grid (threadIdx and friends read it).
struct Pos {
    uint3 tid, bid;
    dim3 bdim, gdim;
};
extern thread_local Pos *t_pos;

// ---- block and warp meeting points ----
void syncthreads(const char *file, int line);
void syncwarp(const char *file, int line, unsigned mask = 0xffffffffu);
struct SyncwarpAt {   // __syncwarp() and __syncwarp(mask) through one macro
    const char *file;
    int line;
    void operator()(unsigned mask = 0xffffffffu) const { syncwarp(file, line, mask); }
};
// A warp collective: every lane of the mask calls it with its own op; when all have
// arrived (same site, same complete function), complete(ops, lanes) runs once for the warp.
struct WarpOp;
typedef void (*WarpComplete)(WarpOp **ops, unsigned mask);
struct WarpOp {
    WarpComplete complete;
    const char *what;
};
void warp_collective(WarpOp *op, const char *file, int line, unsigned mask);
unsigned lane_id();
[[noreturn]] void fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// ---- shuffles ----
struct ShflOp : WarpOp {
    uint64_t val, out;
    int src;   // the lane this lane reads
};
void shfl_complete(WarpOp **ops, unsigned mask);
template <typename T> T shfl_any(const char *file, int line, unsigned mask, T v, int src, const char *what) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
    ShflOp op;
    op.complete = shfl_complete;
    op.what = what;
    op.val = 0;
    memcpy(&op.val, &v, sizeof(T));
    op.src = src;
    warp_collective(&op, file, line, mask);
    T r;
    memcpy(&r, &op.out, sizeof(T));
    return r;
}

// ---- shared memory ----
void *smem_static(int site, size_t bytes, size_t align);
void *smem_dynamic();
void launch_bounds_check(int max_threads);

// ---- kernel launches ----
struct LaunchCfg {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    LaunchCfg(dim3 g, dim3 b, size_t s = 0, cudaStream_t st = 0) : grid(g), block(b), smem(s), stream(st) {}
};
void launch_impl(const LaunchCfg &c, const char *name, const char *file, int line, const void *key,
                 void (*run)(void *), void *pack);
bool kernel_arg_ok(const void *p, const char *name, int index, const char *file, int line);
template <typename X> bool arg_ok(const X &x, const char *name, int index, const char *file, int line) {
    if constexpr (std::is_pointer<X>::value) return kernel_arg_ok((const void *)x, name, index, file, line);
    return true;
}
template <typename... P, typename... A>
void launch(const LaunchCfg &c, const char *name, const char *file, int line, void (*k)(P...), A &&...a) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    struct Pack {
        void (*k)(P...);
        std::tuple<typename std::decay<P>::type...> args;
    };
    Pack pk{k, std::tuple<typename std::decay<P>::type...>(static_cast<typename std::decay<P>::type>(a)...)};
    int idx = 0;
    bool ok = true;
    std::apply([&](auto &...x) { ((ok = arg_ok(x, name, idx++, file, line) && ok), ...); }, pk.args);
    if (!ok) return;
    launch_impl(c, name, file, line, reinterpret_cast<const void *>(k),
                [](void *p) { Pack *q = (Pack *)p; std::apply(q->k, q->args); }, &pk);
}

}   // namespace cuemu
static constexpr int warpSize = 32;

#define threadIdx (cuemu::t_pos->tid)
#define blockIdx (cuemu::t_pos->bid)
#define blockDim (cuemu::t_pos->bdim)
#define gridDim (cuemu::t_pos->gdim)

#define __syncthreads() cuemu::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) cuemu::SyncwarpAt{__FILE__, __LINE__}(__VA_ARGS__)
#define __threadfence() ((void)0)
#define __threadfence_block() ((void)0)

// Shuffles over the whole warp (width 32: a width argument is not emulated, and the
// project passes none).
#define __shfl_xor_sync(mask, v, lm, ...) \
    cuemu::shfl_any(__FILE__, __LINE__, (mask), (v), (int)(cuemu::lane_id() ^ (unsigned)(lm)), "__shfl_xor_sync")
#define __shfl_sync(mask, v, src, ...) cuemu::shfl_any(__FILE__, __LINE__, (mask), (v), (int)(src) & 31, "__shfl_sync")
#define __shfl_down_sync(mask, v, d, ...) \
    cuemu::shfl_any(__FILE__, __LINE__, (mask), (v), (int)(cuemu::lane_id() + (unsigned)(d) < 32 ? cuemu::lane_id() + (d) : cuemu::lane_id()), "__shfl_down_sync")
#define __shfl_up_sync(mask, v, d, ...) \
    cuemu::shfl_any(__FILE__, __LINE__, (mask), (v), (int)(cuemu::lane_id() >= (unsigned)(d) ? cuemu::lane_id() - (d) : cuemu::lane_id()), "__shfl_up_sync")

// Device math: CUDA's integer min/max overloads and the correctly rounded intrinsics
// (compiled with -ffp-contract=off, so plain operators are single IEEE operations).
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
