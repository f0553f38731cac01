// util.c: shared by the libFuzzer harnesses (#included, not a harness itself).
// die_input()/die() longjmp back here through common_set_die_hook: "input rejected".
// Inputs go to files under /dev/shm (the parsers take paths). Leaks after a longjmp are
// expected (the parsers own partial state): run with ASAN_OPTIONS=detect_leaks=0.
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/common.h"

static jmp_buf fz_jmp;
static int fz_armed;

static void fz_hook(void) {
    if (fz_armed) { fz_armed = 0; longjmp(fz_jmp, 1); }
    abort();
}

// Enter with FZ_TRY { ... } FZ_END; a die_input/die inside lands after FZ_TRY's body.
#define FZ_TRY if (common_set_die_hook(fz_hook), fz_armed = 1, setjmp(fz_jmp) == 0)
#define FZ_DONE (fz_armed = 0)

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
