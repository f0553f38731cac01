// blas_core.c: see blas_core.h.
#include "util/blas_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

char *openblas_get_corename(void);

static int is_one_of(const char *s, const char *const *list) {
    for (; *list; list++)
        if (!strcasecmp(s, *list)) return 1;
    return 0;
}

const char *blas_core_name(void) {
    const char *core = openblas_get_corename();
    return core ? core : "unknown";
}

// The core to switch to, or NULL when OpenBLAS's own pick already uses what the CPU has.
static const char *better_core(const char *core) {
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    static const char *const avx2[] = {"SkylakeX", "Cooperlake", "SapphireRapids", "Haswell", "Zen", NULL};
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return is_one_of(core, avx512) ? NULL : "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return is_one_of(core, avx2) ? NULL : "Haswell";
    return NULL;
}

void blas_core_init(char **argv) {
    if (!getenv("OPENBLAS_CORETYPE")) {   // the user's (or our earlier) choice stands
        const char *want = better_core(blas_core_name());
        if (want) {
            setenv("OPENBLAS_CORETYPE", want, 1);
            execv("/proc/self/exe", argv);
            // exec failed: carry on with the slower kernels rather than fail
        }
    }
    const char *report = getenv("OLMO_BLAS_CORE_REPORT");
    if (report && *report) {
        fprintf(stderr, "openblas core: %s\n", blas_core_name());
        if (!strcmp(report, "exit")) exit(0);
    }
}
