// blas_core.h: make OpenBLAS use the SIMD kernels this CPU has.
// Debian's OpenBLAS (DYNAMIC_ARCH) picks its kernel set from the CPUID model at load
// time; on CPUs newer than its tables (or VMs that mask the model) it falls back to
// "Prescott" (SSE3), about 3x slower here. The kernel set can only be chosen before the
// library initializes, through OPENBLAS_CORETYPE, so when the chosen core is weaker than
// what the CPU supports we set it and re-exec ourselves once.
#ifndef OLMO_BLAS_CORE_H
#define OLMO_BLAS_CORE_H

// Call first thing in main(). Returns normally when nothing needs changing (or when
// OPENBLAS_CORETYPE is already set by the user); otherwise does not return.
void blas_core_reexec(char **argv);

#endif
