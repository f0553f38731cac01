// peak.h: the FLOP/s ceiling MFU is measured against. On the CPU: a one-time fp32 GEMM
// calibration (the best of a few large OpenBLAS sgemm runs at the current thread count),
// cached per machine and thread count in $XDG_CACHE_HOME/olmo (or ~/.cache/olmo).
#ifndef OLMO_PEAK_H
#define OLMO_PEAK_H

// Returns FLOP/s. If `recipe_peak` > 0 it is used as given. *source says where it came from.
double peak_flops(double recipe_peak, const char **source);
// Run the calibration now (no cache). n: GEMM size.
double peak_flops_calibrate(int n);

#endif
