// peak.h: the FLOP/s ceiling MFU is measured against (docs/performance.md, "MFU").
//
//   MFU = the job's model FLOP/s (window-aware count x global tokens/s; the OLMo-core v2.3
//         count is logged beside it as mfu_olmo_core_v2_3)
//         / the peak of the hardware the job runs on.
//
// On the CPU that peak is the GEMM rate of one physical core (of the run's precision and
// matmul engine) times the physical cores the job's ranks and threads can use, each core
// counted once however many ranks or threads share it (job_cores). On GPUs it is the sum of
// the devices' peaks. So runs of one recipe at any world size on one machine are measured
// against the same ceiling and their MFUs differ only as their tokens/s do.
//
// The per-core peak is calibrated: the best of a few large square products, one thread per
// physical core on every core this process may run on, divided by that core count; cached
// per host, BLAS kernel set and engine (not core count: one figure per machine, whatever the
// ranks and binding of the run that measured it) in $XDG_CACHE_HOME/olmo (or ~/.cache/olmo),
// as "FLOP/s-per-core cores-measured-on":
//   fp32: OpenBLAS sgemm, file peak-HOST-CORE.txt;
//   bf16: matmul_forward under PRECISION_BF16 on the engine in force (kernels.h: amx or
//         emulated; operands rounded and packed to bf16, fp32 accumulation, packing included
//         as in training), file peak-bf16-ENGINE-HOST-CORE.txt.
// A calibration during which anything else kept this process's CPUs busy (/proc/stat) is
// measured again, up to 3 attempts; if all were busy the best figure serves this run only,
// is labelled so, and is not cached (a low cached peak would inflate every later MFU).
#ifndef OLMO_PEAK_H
#define OLMO_PEAK_H

#include <stddef.h>

// ---- CPU load -----------------------------------------------------------------------------
// Snapshot for other_load(): time, busy CPU seconds of this process's CPUs (/proc/stat:
// all but idle and iowait, steal included), this process's and its waited-for children's
// CPU seconds.
typedef struct { double t, busy, own; } LoadMark;
LoadMark load_mark(void);
// CPUs that something else kept busy since `a` (0 on a quiet machine, up to the CPU count).
double other_load(LoadMark a);
#define BUSY_CPUS 0.25   // above this a measurement counts as taken on a busy machine

// ---- the cores a job uses -------------------------------------------------------------------
// CPUs this process may run on (sched_getaffinity); *cores: the physical cores among them.
int affinity_cpus(int *cores);

typedef struct {
    int ranks, hosts;
    int cores;            // physical cores used: per host, min(cores in the union of the ranks'
                          // CPU sets, sum over its ranks of min(rank's cores, rank's threads))
    int cpus;             // logical CPUs in the union of the ranks' CPU sets
    int threads;          // OpenMP threads, summed over ranks
    int oversubscribed;   // a host (or a rank) runs more threads than it has CPUs for
    int gpus;             // devices used: per host, min(its ranks, its visible devices)
} JobCores;
// Collective: every rank calls it and gets the same answer. devices: GPUs this rank sees
// (0 on the CPU backend); ranks of one host beyond its device count share devices.
void job_cores(JobCores *j, int devices);

// ---- per-core GEMM peak ----------------------------------------------------------------------
typedef struct {
    double per_core;    // FLOP/s of one physical core
    int cores;          // physical cores the calibration ran on (0: from the recipe)
    int busy;           // every attempt was busy: used for this run only, not cached
    char engine[32];    // "sgemm", "amx", "emulated" (the bf16 engine in force)
    char source[160];   // where the figure came from, for the MFU line
} CorePeak;
// bf16 = 0: fp32 sgemm; 1: the bf16 matmul engine in force. recipe_per_core > 0 is used as
// given (perf.peak_flops: FLOP/s per physical core). Otherwise cached, or calibrated now.
void core_peak(int bf16, double recipe_per_core, CorePeak *out);
// The cached per-core peak of `engine` ("sgemm", or a bf16 engine name), or 0 when there is
// none. *cores: the physical cores it was measured on.
double core_peak_cached(const char *engine, int *cores);
// A calibration now (no cache): FLOP/s of `threads` threads on an n x n x n product.
// *other_cpus: CPUs something else kept busy meanwhile (other_load).
double peak_calibrate(int bf16, int n, int threads, double *other_cpus);
// "2 cores x 101.4 GFLOP/s = 202.8 GFLOP/s (fp32 sgemm per core, ...)" for `cores` cores.
void core_peak_describe(const CorePeak *p, int cores, char *out, size_t len);

#endif
