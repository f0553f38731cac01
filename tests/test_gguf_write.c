// test_gguf_write.c: unit tests of the GGUF writer (src/io/gguf.h): f32 -> f16 rounding
// against the compiler's _Float16 conversion (round to nearest even, subnormals, overflow to
// inf, NaN) on 2^24 spread bit patterns and the edge cases; bf16 against round to nearest
// even by integer arithmetic; Q8_0 blocks (scale, zero block, the largest value at +-127);
// the file layout (magic, version, counts, a kv pair, tensor info, 32-byte aligned data);
// refusals (rows beyond a tensor, finish before every tensor is written) and that a failed
// or freed writer leaves no file behind.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/gguf.h"
#include "util/blas_core.h"
#include "util/common.h"

#include "check.h"

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static uint16_t ref_f16(float f) {   // the compiler's conversion (x86-64: round to nearest even)
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

static void test_f16(void) {
    long bad = 0;
    for (uint64_t k = 0; k < (1u << 24); k++) {
        uint32_t u = (uint32_t)(k * 255u + (k >> 3));   // spread over all exponents and signs
        float f = from_bits(u);
        uint16_t a = gguf_f32_to_f16(f), b = ref_f16(f);
        if (isnan(f)) { if ((a & 0x7c00) != 0x7c00 || !(a & 0x3ff)) bad++; continue; }
        if (a != b && bad++ < 5) fprintf(stderr, "f16 of %a (0x%08x): 0x%04x, want 0x%04x\n", (double)f, u, a, b);
    }
    float edge[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 5.96e-8f, 6.1e-5f, 6.097e-5f, INFINITY, -INFINITY,
                    1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        if (gguf_f32_to_f16(edge[i]) != ref_f16(edge[i]) && bad++ < 10)
            fprintf(stderr, "f16 of %a: 0x%04x, want 0x%04x\n", (double)edge[i], gguf_f32_to_f16(edge[i]), ref_f16(edge[i]));
    CHECK(bad == 0, "f16: %ld conversions differ from _Float16", bad);
}

static void test_bf16(void) {
    long bad = 0;
    for (uint64_t k = 0; k < (1u << 24); k++) {
        uint32_t u = (uint32_t)(k * 255u + (k >> 3));
        float f = from_bits(u);
        uint16_t a = gguf_f32_to_bf16(f);
        if (isnan(f)) { if ((a & 0x7f80) != 0x7f80 || !(a & 0x7f)) bad++; continue; }
        uint32_t lo = u & 0xffff, want = u >> 16;   // nearest even on the dropped 16 bits
        if (lo > 0x8000 || (lo == 0x8000 && (want & 1))) want++;
        if (a != (uint16_t)want) bad++;
    }
    CHECK(bad == 0, "bf16: %ld conversions differ from round to nearest even", bad);
}

static void test_q8_0(void) {
    float x[64];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) / 8.0f;   // max |x| = 2 at i = 0
    for (int i = 32; i < 64; i++) x[i] = 0;
    uint8_t q[2 * 34];
    gguf_quantize_q8_0(x, 64, q);
    uint16_t d;
    memcpy(&d, q, 2);
    CHECK(d == gguf_f32_to_f16(2.0f / 127.0f), "q8_0 scale 0x%04x", d);
    CHECK((int8_t)q[2] == -127, "q8_0: the largest |x| maps to -127, got %d", (int8_t)q[2]);
    CHECK((int8_t)q[2 + 16] == 0, "q8_0: zero maps to 0");
    CHECK((int8_t)q[2 + 24] == (int8_t)roundf(1.0f * 127.0f / 2.0f), "q8_0: x = 1 -> %d", (int8_t)q[2 + 24]);
    int zero = 1;
    for (int i = 34; i < 68; i++) zero &= q[i] == 0;
    CHECK(zero, "q8_0: an all-zero block is all zero bytes (scale 0)");
    CHECK(gguf_row_bytes(GGML_Q8_0, 64) == 68 && gguf_row_bytes(GGML_F16, 3) == 6 && gguf_row_bytes(GGML_F32, 3) == 12,
          "row bytes");
}

static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static void test_file(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    GgufWriter *g = gguf_new();
    gguf_kv_u32(g, "a.b", 7);
    gguf_add_tensor(g, "w", GGML_F32, 2, 3);     // 24 bytes, padded to 32
    gguf_add_tensor(g, "n", GGML_F16, 1, 5);     // 1-D, 10 bytes at offset 32
    CHECK(gguf_begin(g, path) == 0, "begin: %s", strerror(errno));
    float w[6] = {1, 2, 3, 4, 5, 6}, n[5] = {1, -1, 0.5f, 2, 65504};
    CHECK(gguf_write_rows(g, w, 1) == 0, "write w row 0");
    CHECK(gguf_write_rows(g, w + 3, 2) != 0, "rows beyond the tensor are refused");
    CHECK(gguf_write_rows(g, w + 3, 1) == 0, "write w row 1");
    CHECK(gguf_finish(g) != 0, "finish before every tensor is written is refused");
    CHECK(access(path, F_OK) != 0, "nothing at the path before finish");
    CHECK(gguf_write_rows(g, n, 1) == 0, "write n");
    CHECK(gguf_write_rows(g, n, 1) != 0, "a row after the last tensor is refused");
    uint64_t size = gguf_file_size(g);
    CHECK(gguf_finish(g) == 0, "finish: %s", strerror(errno));
    gguf_free(g);
    size_t len;
    uint8_t *f = (uint8_t *)read_file_all(path, &len);
    CHECK(f && len == size, "file size %zu, want %llu", len, (unsigned long long)size);
    if (!f) return;
    CHECK(!memcmp(f, "GGUF", 4) && rd32(f + 4) == 3 && rd64(f + 8) == 2 && rd64(f + 16) == 1, "header");
    size_t o = 24;
    CHECK(rd64(f + o) == 3 && !memcmp(f + o + 8, "a.b", 3) && rd32(f + o + 11) == 4 && rd32(f + o + 15) == 7, "kv a.b = u32 7");
    o += 19;
    CHECK(rd64(f + o) == 1 && f[o + 8] == 'w' && rd32(f + o + 9) == 2 && rd64(f + o + 13) == 3 && rd64(f + o + 21) == 2 &&
          rd32(f + o + 29) == GGML_F32 && rd64(f + o + 33) == 0, "tensor info w: dims (3, 2), F32, offset 0");
    o += 41;
    CHECK(rd64(f + o) == 1 && f[o + 8] == 'n' && rd32(f + o + 9) == 1 && rd64(f + o + 13) == 5 && rd32(f + o + 21) == GGML_F16 &&
          rd64(f + o + 25) == 32, "tensor info n: dims (5), F16, offset 32");
    o += 33;
    size_t data = (o + 31) / 32 * 32;
    CHECK(data + 32 + 10 <= len && !memcmp(f + data, w, 24), "w data at the aligned data start");
    uint16_t h;
    memcpy(&h, f + data + 32 + 8, 2);
    CHECK(h == 0x7bff, "n[4] = 65504 as f16 0x7bff, got 0x%04x", h);
    free(f);
    // a writer freed before finishing removes its temp file and never creates the path
    snprintf(path, sizeof path, "%s/u.gguf", dir);
    g = gguf_new();
    gguf_add_tensor(g, "w", GGML_F32, 1, 4);
    CHECK(gguf_begin(g, path) == 0, "begin u");
    gguf_free(g);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    CHECK(access(path, F_OK) != 0 && access(tmp, F_OK) != 0, "freed writer left a file");
}

int main(int argc, char **argv) {
    (void)argc;
    blas_core_init(argv);
    char dir[200];
    snprintf(dir, sizeof dir, "%s/test_gguf_write.XXXXXX", test_tmpdir());
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_f16();
    test_bf16();
    test_q8_0();
    test_file(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: cannot remove %s\n", dir);
    if (failures) { fprintf(stderr, "test_gguf_write: %d failure(s)\n", failures); return 1; }
    printf("test_gguf_write: all checks passed\n");
    return 0;
}
