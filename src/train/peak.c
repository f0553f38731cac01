// peak.c: see peak.h.
#include "train/peak.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "dist/dist.h"
#include "kernels/kernels.h"
#include "util/common.h"

char *openblas_get_corename(void);

// ---- CPU load -----------------------------------------------------------------------------

// Busy CPU seconds (all but idle and iowait; steal included) of the CPUs in `set`, from the
// per-CPU lines of /proc/stat; NAN if unreadable.
static double busy_seconds(const cpu_set_t *set) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return NAN;
    char line[512];
    unsigned long long sum = 0;
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        int cpu;
        unsigned long long v[8] = {0};
        if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7]) != 9)
            continue;
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, set)) continue;
        sum += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        seen = 1;
    }
    fclose(f);
    return seen ? (double)sum / (double)sysconf(_SC_CLK_TCK) : NAN;
}

LoadMark load_mark(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        CPU_ZERO(&set);
        for (int i = 0; i < CPU_SETSIZE; i++) CPU_SET(i, &set);
    }
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);   // waited-for children (and theirs): bench's measured runs
    double own = self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec + kids.ru_stime.tv_sec +
                 1e-6 * (self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec + kids.ru_stime.tv_usec);
    return (LoadMark){now_seconds(), busy_seconds(&set), own};
}

double other_load(LoadMark a) {
    LoadMark b = load_mark();
    return (b.busy - a.busy - (b.own - a.own)) / (b.t - a.t);
}

// ---- the cores a job uses -------------------------------------------------------------------

// The physical core of logical CPU `cpu`: the first CPU of its thread siblings (sysfs), so
// hyperthreads of one core map to one id; the CPU itself where sysfs does not say.
static int core_of(int cpu) {
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
    FILE *f = fopen(path, "r");
    int first = cpu;
    if (f) {
        if (fscanf(f, "%d", &first) != 1 || first < 0 || first >= CPU_SETSIZE) first = cpu;
        fclose(f);
    }
    return first;
}

// This process's CPU set and the set of its physical cores (by core_of id).
static void my_sets(cpu_set_t *cpus, cpu_set_t *cores) {
    if (sched_getaffinity(0, sizeof *cpus, cpus) != 0) {
        CPU_ZERO(cpus);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long i = 0; i < n && i < CPU_SETSIZE; i++) CPU_SET((int)i, cpus);
    }
    CPU_ZERO(cores);
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, cpus)) CPU_SET(core_of(i), cores);
}

int affinity_cpus(int *cores) {
    cpu_set_t cpus, cs;
    my_sets(&cpus, &cs);
    if (cores) *cores = CPU_COUNT(&cs);
    return CPU_COUNT(&cpus);
}

#define SET_WORDS (CPU_SETSIZE / 32)   // a CPU set as 32-bit words, each exact in a double
enum { J_HOST, J_THREADS, J_DEVICES, J_CPUS, J_CORES, J_CPUSET, J_CORESET = J_CPUSET + SET_WORDS, J_N = J_CORESET + SET_WORDS };

static void set_to_words(const cpu_set_t *s, double *w) {
    for (int k = 0; k < SET_WORDS; k++) {
        uint32_t x = 0;
        for (int b = 0; b < 32; b++)
            if (CPU_ISSET(k * 32 + b, s)) x |= 1u << b;
        w[k] = x;
    }
}

static int words_count(const uint32_t *w) {
    int n = 0;
    for (int k = 0; k < SET_WORDS; k++) n += __builtin_popcount(w[k]);
    return n;
}

void job_cores(JobCores *j, int devices) {
    cpu_set_t cpus, cores;
    my_sets(&cpus, &cores);
    char host[256] = "host";
    gethostname(host, sizeof host - 1);
    uint32_t h = 2166136261u;   // FNV-1a: ranks on one host share its cores
    for (const char *p = host; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
    double mine[J_N];
    mine[J_HOST] = h;
    mine[J_THREADS] = omp_get_max_threads();
    mine[J_DEVICES] = devices;
    mine[J_CPUS] = CPU_COUNT(&cpus);
    mine[J_CORES] = CPU_COUNT(&cores);
    set_to_words(&cpus, mine + J_CPUSET);
    set_to_words(&cores, mine + J_CORESET);
    const int W = dist_world();
    double *all = xmalloc(sizeof(double) * J_N * (size_t)W);
    dist_allgather_doubles(mine, J_N, all);
    memset(j, 0, sizeof *j);
    j->ranks = W;
    char *done = xcalloc((size_t)W, 1);
    for (int r = 0; r < W; r++) {   // one pass per host, from its first rank
        if (done[r]) continue;
        j->hosts++;
        uint32_t ucpu[SET_WORDS] = {0}, ucore[SET_WORDS] = {0};
        int threads = 0, usable = 0, over = 0, ranks = 0, devs = 0;
        for (int q = r; q < W; q++) {
            const double *x = all + (size_t)q * J_N;
            if (x[J_HOST] != all[(size_t)r * J_N + J_HOST]) continue;
            done[q] = 1;
            ranks++;
            if ((int)x[J_DEVICES] > devs) devs = (int)x[J_DEVICES];
            for (int k = 0; k < SET_WORDS; k++) {
                ucpu[k] |= (uint32_t)x[J_CPUSET + k];
                ucore[k] |= (uint32_t)x[J_CORESET + k];
            }
            int t = (int)x[J_THREADS], c = (int)x[J_CORES];
            threads += t;
            usable += t < c ? t : c;    // a rank uses at most one core per thread
            over |= t > (int)x[J_CPUS];   // more threads than its own CPUs
        }
        int hc = words_count(ucore), hcpu = words_count(ucpu);
        j->cores += usable < hc ? usable : hc;   // cores shared by ranks count once
        j->cpus += hcpu;
        j->threads += threads;
        j->oversubscribed |= over || threads > hcpu;
        j->gpus += ranks < devs ? ranks : devs;
    }
    free(done);
    free(all);
}

// ---- per-core GEMM peak ----------------------------------------------------------------------

double peak_calibrate(int bf16, int n, int threads, double *other_cpus) {
    float *a = xmalloc_aligned(sizeof(float) * (size_t)n * n), *b = xmalloc_aligned(sizeof(float) * (size_t)n * n),
          *c = xmalloc_aligned(sizeof(float) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
        b[i] = (float)((i * 40503u) % 1000) * 1e-3f;
    }
    // The first bf16 product also grows the packing workspaces and probes AMX: not timed.
    const int reps = bf16 ? 5 : 4;
    int was_threads = omp_get_max_threads();
    omp_set_num_threads(threads);
    Bf16Work *ws = NULL;
    if (bf16) {
        matmul_bf16_init();
        ws = bf16_work_create();
        matmul_forward(c, a, b, n, n, n, PRECISION_BF16, ws);
    }
    LoadMark mark = load_mark();
    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_seconds();
        if (bf16) matmul_forward(c, a, b, n, n, n, PRECISION_BF16, ws);
        else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double f = 2.0 * n * (double)n * n / (now_seconds() - t0);
        if (f > best) best = f;
    }
    if (other_cpus) *other_cpus = other_load(mark);
    omp_set_num_threads(was_threads);
    bf16_work_free(ws);
    free(a);
    free(b);
    free(c);
    return best;
}

// The cache file of `engine` ("sgemm": fp32, else a bf16 engine): keyed by host, BLAS kernel
// set and engine. Not by core count: one per-core figure per machine, so runs at any world
// size, thread count or binding are measured against the same peak.
static void cache_path(char *out, size_t len, const char *engine) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char host[128] = "host", kind[64] = "";
    gethostname(host, sizeof host - 1);
    if (strcmp(engine, "sgemm")) snprintf(kind, sizeof kind, "bf16-%s-", engine);
    const char *core = openblas_get_corename();
    if (xdg && *xdg) snprintf(out, len, "%s/olmo/peak-%s%s-%s.txt", xdg, kind, host, core);
    else snprintf(out, len, "%s/.cache/olmo/peak-%s%s-%s.txt", home ? home : "/tmp", kind, host, core);
}

#define ATTEMPTS 3

double core_peak_cached(const char *engine, int *cores) {
    char path[4096];
    cache_path(path, sizeof path, engine);
    FILE *f = fopen(path, "r");
    double v = 0;
    *cores = 0;
    if (f) {
        if (fscanf(f, "%lf %d", &v, cores) != 2 || !(v > 0) || *cores < 1) v = 0;
        fclose(f);
    }
    return v;
}

void core_peak(int bf16, double recipe_per_core, CorePeak *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->engine, sizeof out->engine, "%s", bf16 ? matmul_bf16_engine() : "sgemm");
    if (recipe_per_core > 0) {
        out->per_core = recipe_per_core;
        snprintf(out->source, sizeof out->source, "recipe perf.peak_flops per core");
        return;
    }
    int cores;
    double v = core_peak_cached(out->engine, &cores);
    if (v > 0) {
        out->per_core = v;
        out->cores = cores;
        snprintf(out->source, sizeof out->source, "%s calibration on %d core%s, cached", out->engine, cores,
                 cores > 1 ? "s" : "");
        return;
    }
    affinity_cpus(&cores);
    out->cores = cores;
    char path[4096];
    cache_path(path, sizeof path, out->engine);
    // AMX: 4096 cubed (2048 is over in a few ms); the others 2048 cubed (about a second).
    const int n = bf16 && !strcmp(out->engine, "amx") ? 4096 : 2048;
    double best_quiet = 0, best_any = 0, least_load = INFINITY;
    for (int k = 0; k < ATTEMPTS && best_quiet == 0; k++) {
        if (k) usleep(500000);
        double other = 0, flops = peak_calibrate(bf16, n, cores, &other);
        if (flops > best_any) best_any = flops;
        if (!(other > BUSY_CPUS)) best_quiet = flops;   // NAN (no /proc/stat): taken as quiet
        else if (other < least_load) least_load = other;
    }
    if (best_quiet > 0) {
        out->per_core = best_quiet / cores;
        char dir[4096], buf[64];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = 0;
            mkdir_p(dir);
        }
        int len = snprintf(buf, sizeof buf, "%.6e %d\n", out->per_core, cores);
        write_file_atomic(path, buf, (size_t)len);   // best effort: a read-only home only costs a re-measure
        snprintf(out->source, sizeof out->source, "%s calibration on %d core%s, measured now", out->engine, cores,
                 cores > 1 ? "s" : "");
    } else {
        out->per_core = best_any / cores;
        out->busy = 1;
        snprintf(out->source, sizeof out->source,
                 "%s calibration on %d core%s, measured now on a BUSY machine (%.2f other CPUs busy), not cached: "
                 "MFU may read high",
                 out->engine, cores, cores > 1 ? "s" : "", least_load);
    }
}

void core_peak_describe(const CorePeak *p, int cores, char *out, size_t len) {
    snprintf(out, len, "%d core%s x %.1f GFLOP/s = %.1f GFLOP/s (%s)", cores, cores > 1 ? "s" : "", p->per_core / 1e9,
             cores * p->per_core / 1e9, p->source);
}
