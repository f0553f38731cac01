// safetensors.h: read and write safetensors files (8-byte LE header length, JSON header
// {name: {dtype, shape, data_offsets}}, optional "__metadata__", raw LE data).
// The reader validates everything against the file size before any data is touched, so
// a truncated or hostile file is refused with a message, never read out of bounds.
#ifndef OLMO_SAFETENSORS_H
#define OLMO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

typedef struct {
    char *name;
    char dtype[8];          // F32, F16, BF16, F64, I32, I64, U32, U8, ...
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t begin, end;      // byte range relative to the data section
} StTensor;

typedef struct {
    char *path;
    int n;
    StTensor *t;
    char *metadata_json;    // the "__metadata__" object as JSON text, or NULL
    const uint8_t *data;    // mmap'd data section
    void *map;
    size_t map_len;
} StFile;

// Open and validate. Returns 0, or -1 with a message in err.
int st_open(StFile *f, const char *path, char *err, size_t errlen);
void st_close(StFile *f);
const StTensor *st_find(const StFile *f, const char *name);
size_t st_numel(const StTensor *t);
// Copy a tensor into dst as fp32 (F32 copied; BF16, F16 and F64 converted). Returns 0, or
// -1 if the dtype cannot convert to float.
int st_read_f32(const StFile *f, const StTensor *t, float *dst);

// Drop tensor t's pages of the mapping from this process's resident memory (madvise
// MADV_DONTNEED: clean file pages, read again from the file if touched): a reader that
// streams a model tensor by tensor keeps its resident memory at about one tensor.
void st_release(const StFile *f, const StTensor *t);

typedef struct {
    const char *name;
    const char *dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
} StWrite;

// Write tensors (in the given order) to path atomically: temp file, fsync, rename.
// metadata may be NULL or a JSON object text of string values. Returns 0 or -1 (errno).
int st_write(const char *path, const StWrite *ts, int n, const char *metadata);
// st_write where tensors with data == NULL are produced when their turn comes:
// fill(ctx, i, buf) writes tensor i's nbytes into buf (one buffer, reused). Streams
// tensors that are not in host memory (a CUDA checkpoint) without a second full copy.
typedef void (*StFill)(void *ctx, int i, void *buf);
int st_write_fill(const char *path, const StWrite *ts, int n, const char *metadata, StFill fill, void *ctx);
// Content checksums of a written file (CRC-32C, src/util/crc32c.h), computed on the bytes
// as they go to disk: region 0 is the header (8-byte length + JSON + padding), then each
// tensor's bytes in pieces of at most `chunk` bytes. Together the regions cover the file.
typedef struct {
    int tensor;             // index into the StWrite array; -1 for the header
    size_t begin, end;      // byte range in the file
    uint32_t crc;
} StRegion;
typedef struct {
    size_t file_size;
    int n, cap;
    StRegion *r;            // malloc'd; free(sums->r)
} StSums;
// st_write_fill that also records sums (chunk > 0); free(sums->r) afterwards, whatever it returns.
int st_write_sums(const char *path, const StWrite *ts, int n, const char *metadata, StFill fill, void *ctx, size_t chunk,
                  StSums *sums);
// The pieces of st_write_sums, for writers that fill one file from several processes (the
// sharded checkpoint, src/train/ckpt_shard.h): the header of a file of tensors ts (8-byte
// length, JSON, space padding to 8 bytes; malloc'd, *len its bytes), and the file's regions
// as st_write_sums records them (the header, then each tensor's bytes in pieces of at most
// chunk bytes; crc 0; file_size set; free(sums->r)). Tensor i starts at hlen + the bytes of
// the tensors before it.
char *st_header(const StWrite *ts, int n, const char *metadata, size_t *len);
void st_regions(const StWrite *ts, int n, size_t hlen, size_t chunk, StSums *sums);
size_t st_dtype_size(const char *dtype);   // 0 if unknown

#endif
