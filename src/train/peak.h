// peak.h: the FLOP/s ceilings MFU is measured against. On the CPU: one-time GEMM
// calibrations at the current thread count, the best of a few large square products,
// cached per machine, kernel set and thread count in $XDG_CACHE_HOME/olmo (or
// ~/.cache/olmo):
//   fp32: OpenBLAS sgemm (the rate of the fp32 matmuls), file peak-HOST-CORE-tN.txt;
//   bf16: matmul_forward under MATMUL_BF16 (kernels.h: operands rounded and packed to
//         bf16, fp32 accumulation, on AMX tiles or emulated), packing included as in
//         training, file peak-bf16-ENGINE-HOST-CORE-tN.txt.
#ifndef OLMO_PEAK_H
#define OLMO_PEAK_H

// fp32 FLOP/s. If `recipe_peak` > 0 it is used as given. *source says where it came from.
double peak_flops(double recipe_peak, const char **source);
// bf16 matmul FLOP/s (cached calibration). *source says where it came from.
double peak_flops_bf16(const char **source);
// Run a calibration now (no cache). n: GEMM size.
double peak_flops_calibrate(int n);
double peak_flops_bf16_calibrate(int n);

#endif
