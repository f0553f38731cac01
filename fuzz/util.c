// util.c: shared by the libFuzzer harnesses (#included, not a harness itself).
// die_input()/die() longjmp back here through common_set_die_hook: "input rejected".
// Inputs go to files under /dev/shm (the parsers take paths). Leaks after a longjmp are
// expected (the parsers own partial state, the process would exit there): every heap block
// allocated while an input runs is tracked (ld --wrap of malloc & co. over our objects and
// the statically linked libyaml, cJSON's hooks) and the ones still live after a rejection
// are freed, its FILE*s closed, so long runs do not grow without bound.
// Run with ASAN_OPTIONS=detect_leaks=0 (scripts/fuzz.sh does).
#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/common.h"

// ---- allocation tracking (single-threaded use: the harnesses run parsers on one thread)
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t k);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
int __real_posix_memalign(void **p, size_t a, size_t n);
#define FZ_SLOTS (1u << 20)
static struct { void *p; unsigned gen; } *fz_tab;   // open addressing, valid when gen == fz_gen
static unsigned fz_gen = 1;
static int fz_tracking;
static int fz_fd_base;                               // lowest free fd when the input started
static uint32_t *fz_used;                            // slots inserted this generation
static size_t fz_nused;

static size_t fz_h(void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 44) & (FZ_SLOTS - 1); }
static void fz_add(void *p) {
    if (!p || !fz_tracking || fz_nused >= FZ_SLOTS / 2) return;
    for (size_t i = fz_h(p);; i = (i + 1) & (FZ_SLOTS - 1))
        if (fz_tab[i].gen != fz_gen) { fz_tab[i].p = p; fz_tab[i].gen = fz_gen; fz_used[fz_nused++] = (uint32_t)i; return; }
}
static void fz_del(void *p) {
    if (!p || !fz_tab) return;
    for (size_t i = fz_h(p);; i = (i + 1) & (FZ_SLOTS - 1)) {
        if (fz_tab[i].gen != fz_gen) return;          // not tracked
        if (fz_tab[i].p == p) { fz_tab[i].p = NULL; return; }   // tombstone (gen kept)
    }
}
void *__wrap_malloc(size_t n) { void *p = __real_malloc(n); fz_add(p); return p; }
void *__wrap_calloc(size_t n, size_t k) { void *p = __real_calloc(n, k); fz_add(p); return p; }
void *__wrap_realloc(void *p, size_t n) {
    void *q = __real_realloc(p, n);
    if (q) { fz_del(p); fz_add(q); }
    return q;
}
void __wrap_free(void *p) { fz_del(p); __real_free(p); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
    int rc = __real_posix_memalign(p, a, n);
    if (!rc) fz_add(*p);
    return rc;
}
// FILE*s opened during an input (a rejected recipe's YAML file): closed on rejection.
FILE *__real_fopen(const char *path, const char *mode);
int __real_fclose(FILE *f);
static FILE *fz_files[16];
static int fz_nfiles;
FILE *__wrap_fopen(const char *path, const char *mode) {
    FILE *f = __real_fopen(path, mode);
    if (f && fz_tracking && fz_nfiles < 16) fz_files[fz_nfiles++] = f;
    return f;
}
int __wrap_fclose(FILE *f) {
    for (int i = 0; i < fz_nfiles; i++)
        if (fz_files[i] == f) { fz_files[i] = fz_files[--fz_nfiles]; break; }
    return __real_fclose(f);
}

static void fz_track_begin(void) {
    if (!fz_tab) {
        fz_tab = __real_calloc(FZ_SLOTS, sizeof *fz_tab);
        fz_used = __real_malloc(sizeof(uint32_t) * FZ_SLOTS / 2);
        cJSON_Hooks h = {__wrap_malloc, __wrap_free};
        cJSON_InitHooks(&h);
    }
    fz_gen++;
    fz_nused = 0;
    fz_nfiles = 0;
    fz_fd_base = dup(0);
    close(fz_fd_base);
    fz_tracking = 1;
}
// After a rejected input: free every block allocated during it and still live, close the
// files it left open (a FILE* of a rejected YAML file, a token file's fd).
static void fz_track_release(void) {
    fz_tracking = 0;
    while (fz_nfiles > 0) __real_fclose(fz_files[--fz_nfiles]);
    for (int fd = fz_fd_base; fd < fz_fd_base + 64; fd++) close(fd);
    for (size_t k = 0; k < fz_nused; k++) {
        size_t i = fz_used[k];
        if (fz_tab[i].gen == fz_gen && fz_tab[i].p) { void *p = fz_tab[i].p; fz_tab[i].p = NULL; __real_free(p); }
    }
    fz_nused = 0;
    fz_gen++;
}

// ---- die_input/die -> longjmp
static jmp_buf fz_jmp;
static int fz_armed;

static void fz_hook(void) {
    if (fz_armed) { fz_armed = 0; longjmp(fz_jmp, 1); }
    abort();
}

// FZ_TRY { ... FZ_DONE; } : a die_input/die inside lands after the block, its allocations
// freed. FZ_DONE marks success (allocations stay with their owner).
#define FZ_TRY                                                               \
    common_set_die_hook(fz_hook);                                            \
    fz_track_begin();                                                        \
    fz_armed = 1;                                                            \
    if (setjmp(fz_jmp) != 0) fz_track_release();                             \
    else
#define FZ_DONE (fz_armed = 0, fz_tracking = 0)

static const char *fz_path(const char *name) {
    static char buf[8][256];
    static int k;
    char *p = buf[k++ & 7];
    const char *dir = getenv("FUZZ_TMPDIR");
    snprintf(p, 256, "%s/olmo-fz-%d-%s", dir ? dir : "/dev/shm", (int)getpid(), name);
    return p;
}

static const char *fz_write(const char *name, const void *d, size_t n) {
    const char *p = fz_path(name);
    FILE *f = fopen(p, "wb");
    if (!f) { perror(p); abort(); }
    if (n && fwrite(d, 1, n, f) != n) { perror(p); abort(); }
    fclose(f);
    return p;
}

// NUL-terminated copy of the input.
static char *fz_str(const uint8_t *d, size_t n) {
    char *s = malloc(n + 1);
    memcpy(s, d, n);
    s[n] = 0;
    return s;
}
