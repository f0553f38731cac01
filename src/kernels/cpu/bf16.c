// bf16.c: bf16 rounding, AMX detection, and the bf16 workspaces (see bf16.h). Compiled
// with the project's normal flags: nothing here needs AMX or AVX-512 to run.
#include "kernels/cpu/bf16.h"

#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/common.h"

uint16_t bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);           // zero/denormal -> signed 0
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                               // nearest, ties to even
    return (uint16_t)(u >> 16);
}

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_probe(void) {
    if (getenv("OLMO_NO_AMX") && getenv("OLMO_NO_AMX")[0] == '1') return 0;  // force emulation (tests)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1, amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    int avx512bf16 = (a >> 5) & 1;
    if (!(avx512f && avx512bw && amx_bf16 && amx_tile && avx512bf16)) return 0;
    // Linux hands out the 8 KiB tile state only on request (per process, kernel >= 5.16).
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

int bf16_amx_available(void) {
    static int state = -1;  // first call happens before any parallel region (matmul entry)
    if (state < 0) state = amx_probe();
    return state;
}

void *bf16_workspace(int slot, size_t bytes) {
    static void *buf[BF16_WORKSPACE_SLOTS];
    static size_t cap[BF16_WORKSPACE_SLOTS];
    if (bytes > cap[slot]) {
        free(buf[slot]);
        buf[slot] = xmalloc_aligned(bytes);
        cap[slot] = bytes;
    }
    return buf[slot];
}
