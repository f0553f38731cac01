// sizes.h: the fixed sizes of the CUDA kernels' scratch, shared by the kernels (ops.cuh),
// the backend's allocator (train/cuda/model.cu) and its memory plan (cuda_mem_plan, plain
// C): the op scratch of ops_cuda.cu is computed here (kernels/ops.c) without CUDA.
#ifndef OLMO_CUDA_SIZES_H
#define OLMO_CUDA_SIZES_H

#define CUDA_NORM_PARTS 264                 // row chunks of a norm weight gradient: 2 blocks on each of an H100's 132 SMs
#define CUDA_LM_CHUNK_MAX 1024              // tokens per LM-head chunk
#define CUDA_WORKSPACE_BYTES (32u << 20)    // cuBLASLt workspace

#include <stddef.h>

// The bf16 attention backward (attention.cu) hands its dS tiles from the dK/dV kernel to the
// dQ kernel through global memory: one 64 x 64 bf16 tile (8 KiB) per (query tile, key tile)
// pair a key tile visits, for as many kv-head groups at a time as CUDA_ATTN_DS_BUDGET holds
// (at least one). Key tile kt visits query tile qt iff qt - c <= kt <= qt with
// c = cuda_attn_reach(window) (causal and the window, tiles of CUDA_ATTN_TILE rows).
#define CUDA_ATTN_TILE 64
#define CUDA_ATTN_DS_TILE_BYTES ((size_t)CUDA_ATTN_TILE * CUDA_ATTN_TILE * 2)
#define CUDA_ATTN_DS_BUDGET ((size_t)512 << 20)
#if defined(__CUDACC__) && !defined(OLMO_CUEMU)
#define CUDA_HD __host__ __device__
#else
#define CUDA_HD
#endif
// Key tiles before a query tile that can still reach it: floor((window + 62) / 64) =
// ceil((window - 1) / 64) (a key tile reaches past its last key by window - 1).
static inline CUDA_HD int cuda_attn_reach(int window) { return (int)(((long long)window + CUDA_ATTN_TILE - 2) / CUDA_ATTN_TILE); }
// The pairs of the query tiles before qt: sum over q < qt of (min(q, c) + 1).
static inline CUDA_HD long long cuda_attn_pair_base(int qt, int c) {
    const long long n = qt;
    return n + (qt <= c + 1 ? n * (n - 1) / 2 : (long long)c * (c + 1) / 2 + (n - 1 - c) * c);
}
static inline CUDA_HD long long cuda_attn_pair(int qt, int kt, int c) {
    return cuda_attn_pair_base(qt, c) + kt - (qt > c ? qt - c : 0);
}
// The dS scratch for a bf16 attention backward of these sizes at any window.
static inline size_t cuda_attn_ds_bytes(int B, int T, int NH, int NKV) {
    const int nt = (T + CUDA_ATTN_TILE - 1) / CUDA_ATTN_TILE;
    const size_t unit = (size_t)B * (NH / NKV) * (size_t)cuda_attn_pair_base(nt, nt) * CUDA_ATTN_DS_TILE_BYTES;
    size_t groups = CUDA_ATTN_DS_BUDGET / unit;
    groups = groups < 1 ? 1 : groups > (size_t)NKV ? (size_t)NKV : groups;
    return groups * unit;
}

#ifdef __cplusplus
extern "C" {
#endif

// The op scratch of the CUDA ops backend (ops_cuda.cu), reserved once for calls up to these
// sizes: a slot per need (norm weight-gradient partials, attention Di, LM-head logits and
// dlogits, loss rows, embedding groups, sum-of-squares partials, gathered row indices, the
// bf16 attention backward's dS tiles).
typedef struct OpsLimits {
    int rows;      // N = B * T
    int width;     // widest normed row (max(d_model, Q))
    int heads;     // n_heads
    int vocab;     // padded vocabulary
    size_t flat;   // longest flat range of a sum of squares (the table)
    int seq;       // T (rows = B * T)
    int kv_heads;  // n_kv_heads
} OpsLimits;
enum { OPS_CUDA_S_NORM, OPS_CUDA_S_DI, OPS_CUDA_S_LOGITS, OPS_CUDA_S_DLOGITS, OPS_CUDA_S_ROWS, OPS_CUDA_S_GROUPS,
       OPS_CUDA_S_PART, OPS_CUDA_S_IDX, OPS_CUDA_S_DS, OPS_CUDA_SLOTS };
size_t ops_cuda_scratch_slot(int slot, const OpsLimits *l, int act_bytes);
size_t ops_cuda_scratch_bytes(const OpsLimits *l, int act_bytes);

#ifdef __cplusplus
}
#endif
#endif
