// gguf.h: a streaming writer of GGUF v3 files (the format llama.cpp, ollama and LM Studio
// read; gguf.c). The metadata (key/value pairs) and the tensor table are collected first,
// then the header is written and each tensor's data follows in table order, converted
// from fp32 to its storage type piece by piece, so no second copy of the model is ever
// held. The file is written to "<path>.tmp.<pid>" and renamed over <path> by gguf_finish
// (after fsync): a failed or killed export leaves <path> untouched.
//
// Layout (little-endian): "GGUF", u32 version 3, u64 tensor count, u64 kv count, the kv
// pairs (string key, u32 type, value), the tensor infos (string name, u32 n_dims, u64
// dims with the fastest-varying first, u32 ggml type, u64 offset in the data section),
// zero padding to general.alignment (32), the data section (each tensor aligned to 32).
#ifndef OLMO_GGUF_H
#define OLMO_GGUF_H

#include <stddef.h>
#include <stdint.h>

// ggml tensor types written here (ggml.h's numbering).
typedef enum { GGML_F32 = 0, GGML_F16 = 1, GGML_Q8_0 = 8, GGML_BF16 = 30 } GgmlType;
#define GGUF_ALIGN 32
#define GGUF_Q8_0_BLOCK 32   // values per Q8_0 block: one f16 scale + 32 int8

typedef struct GgufWriter GgufWriter;

GgufWriter *gguf_new(void);
void gguf_kv_str(GgufWriter *g, const char *key, const char *v);
void gguf_kv_u32(GgufWriter *g, const char *key, uint32_t v);
void gguf_kv_f32(GgufWriter *g, const char *key, float v);
void gguf_kv_bool(GgufWriter *g, const char *key, int v);
void gguf_kv_str_array(GgufWriter *g, const char *key, const char *const *v, size_t n);
void gguf_kv_i32_array(GgufWriter *g, const char *key, const int32_t *v, size_t n);
// A tensor of shape (rows, cols) as its HF (out, in) shape says; 1-D tensors: rows = 1.
// GGUF stores dims fastest-first, so it is written as (cols, rows). Returns its index.
int gguf_add_tensor(GgufWriter *g, const char *name, GgmlType type, int64_t rows, int64_t cols);
// Bytes of a row of n values in type t (n a multiple of the block size for Q8_0).
size_t gguf_row_bytes(GgmlType t, int64_t n);
// Total bytes of the file once finished (header, padding and data).
uint64_t gguf_file_size(const GgufWriter *g);

// Open path's temp file and write the header. Returns 0, or -1 with errno set.
int gguf_begin(GgufWriter *g, const char *path);
// Append rows of the current tensor (tensors in gguf_add_tensor order): n_rows rows of
// cols fp32 values each, converted to the tensor's type. Returns 0, or -1 with errno.
int gguf_write_rows(GgufWriter *g, const float *src, int64_t n_rows);
// Check every tensor was written in full, fsync, rename over path, fsync the directory.
// Returns 0, or -1 with errno set (the temp file is removed).
int gguf_finish(GgufWriter *g);
// Remove the temp file (after a failure) and free; safe after gguf_finish too.
void gguf_free(GgufWriter *g);

// Conversions as ggml does them (round to nearest even; Q8_0: scale = max|x| / 127 as
// f16, q = round(x / scale)); exposed for the tests of the bounds.
uint16_t gguf_f32_to_f16(float f);
uint16_t gguf_f32_to_bf16(float f);
void gguf_quantize_q8_0(const float *x, int64_t n, uint8_t *out);

#endif
