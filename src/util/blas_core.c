// blas_core.c: see blas_core.h.
#include "util/blas_core.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *openblas_get_corename(void);

static int is_one_of(const char *s, const char *const *list) {
    for (; *list; list++)
        if (!strcasecmp(s, *list)) return 1;
    return 0;
}

void blas_core_reexec(char **argv) {
    if (getenv("OPENBLAS_CORETYPE")) return;   // the user's (or our earlier) choice stands
    const char *core = openblas_get_corename();
    if (!core) return;
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    static const char *const avx2[] = {"SkylakeX", "Cooperlake", "SapphireRapids", "Haswell", "Zen", NULL};
    __builtin_cpu_init();
    const char *want = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
        if (!is_one_of(core, avx512)) want = "SkylakeX";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        if (!is_one_of(core, avx2)) want = "Haswell";
    }
    if (!want) return;
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
    // exec failed: carry on with the slower kernels rather than fail
}
