// blas_core.h: the one choice of OpenBLAS kernels, made the same way by every program.
// Debian's OpenBLAS (DYNAMIC_ARCH) picks its kernel set from the CPUID model at load
// time; on CPUs newer than its tables (or VMs that mask the model) it falls back to
// "Prescott" (SSE3, no FMA), about 3x slower here and rounding differently. The kernel
// set can only be chosen before the library initializes, through OPENBLAS_CORETYPE, so
// when the chosen core is weaker than what the CPU supports we set it and re-exec once.
// `olmo` and every test and tool program call blas_core_init first thing in main(), so
// the suite checks the kernels the product runs (tests/test_blas_core.sh).
#ifndef OLMO_BLAS_CORE_H
#define OLMO_BLAS_CORE_H

// Call first thing in main(). Returns normally when nothing needs changing (or when
// OPENBLAS_CORETYPE is already set by the user); otherwise re-executes the program with
// the same arguments and does not return. With OLMO_BLAS_CORE_REPORT set in the
// environment it prints "openblas core: NAME" to stderr once the choice stands, and with
// OLMO_BLAS_CORE_REPORT=exit it then exits 0 (how tests/test_blas_core.sh asks every
// program which kernels it would run).
void blas_core_init(char **argv);

// The kernel set OpenBLAS runs in this process (e.g. "Haswell", "SkylakeX", "Zen").
const char *blas_core_name(void);

#endif
