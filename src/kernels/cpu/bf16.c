// bf16.c: bf16 rounding, engine detection (AMX, AVX512_BF16, emulated) and the bf16
// workspaces (see bf16.h). Compiled with the project's normal flags: nothing here needs AMX
// or AVX-512 to run.
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

// The engine: OLMO_BF16_ENGINE=amx|avx512bf16|emulated if set (an engine this CPU lacks is
// an input error), else the fastest this CPU has:
//   amx        AMX-BF16 + AMX-TILE and the kernel's grant of tile data, unless OLMO_NO_AMX=1;
//   avx512bf16 AVX512F/BW + AVX512_BF16 on AMD (Zen 4 and later run VDPBF16PS at the rate of
//              an fp32 FMA, so twice its FLOPs). Not the default on Intel without AMX: there
//              (Cooper Lake; measured on Sapphire Rapids) a zmm VDPBF16PS issues at half the
//              FMA rate, so the fp32 sgemm on rounded operands is faster;
//   emulated   everything else.
// What the CPU has (cpuid): AVX512F/BW + AVX512_BF16, AMX-BF16 + AMX-TILE on top, vendor AMD.
static void cpu_bf16(int *avx512, int *amx, int *amd) {
    unsigned a, b, c, d;
    *avx512 = *amx = *amd = 0;
    if (__get_cpuid(0, &a, &b, &c, &d)) *amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;   // "AuthenticAMD"
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        int avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1, amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) *avx512 = avx512f && avx512bw && ((a >> 5) & 1);
        *amx = *avx512 && amx_bf16 && amx_tile;   // the packers use AVX512_BF16 conversions
    }
}

int bf16_engine_on_cpu(Bf16Engine e) {
    int avx512, amx, amd;
    cpu_bf16(&avx512, &amx, &amd);
    return e == BF16_AMX ? amx : e == BF16_AVX512 ? avx512 : 1;
}

static Bf16Engine probe(void) {
    int avx512, amx, amd;
    cpu_bf16(&avx512, &amx, &amd);
    const char *want = getenv("OLMO_BF16_ENGINE");
    if (want && *want) {
        if (!strcmp(want, "emulated")) return BF16_EMULATED;
        if (!strcmp(want, "avx512bf16")) {
            if (!avx512) die_input("OLMO_BF16_ENGINE=avx512bf16: this CPU has no AVX512_BF16");
            return BF16_AVX512;
        }
        if (strcmp(want, "amx")) die_input("OLMO_BF16_ENGINE: expected amx, avx512bf16 or emulated, got '%s'", want);
        // Linux hands out the 8 KiB tile state only on request (per process, kernel >= 5.16).
        if (!amx || syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
            die_input("OLMO_BF16_ENGINE=amx: this CPU has no AMX-BF16, or the kernel did not grant tile data");
        return BF16_AMX;
    }
    const char *no_amx = getenv("OLMO_NO_AMX");
    if (amx && !(no_amx && no_amx[0] == '1') && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0)
        return BF16_AMX;
    return avx512 && amd ? BF16_AVX512 : BF16_EMULATED;
}

Bf16Engine bf16_engine(void) {
    static int state = -1;  // first call happens before any parallel region (matmul entry)
    if (state < 0) state = probe();
    return (Bf16Engine)state;
}

const char *bf16_engine_name(Bf16Engine e) {
    return e == BF16_AMX ? "amx" : e == BF16_AVX512 ? "avx512bf16" : "emulated";
}

Bf16Work *bf16_work_create(void) { return xcalloc(1, sizeof(Bf16Work)); }

void bf16_work_free(Bf16Work *w) {
    if (!w) return;
    for (int i = 0; i < BF16_WORKSPACE_SLOTS; i++) free(w->buf[i]);
    free(w);
}

void *bf16_workspace(Bf16Work *w, int slot, size_t bytes) {
    if (!w) die("a bf16 matmul without its Bf16Work (kernels.h: bf16_work_create)");
    if (bytes > w->cap[slot]) {
        free(w->buf[slot]);
        w->buf[slot] = xmalloc_aligned(bytes);
        w->cap[slot] = bytes;
    }
    return w->buf[slot];
}
