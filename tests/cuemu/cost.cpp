// cost.cpp: the emulation's counted cost model (CUEMU_COST=1; docs/cuda.md "Cost model").
// The kernels' .cu files are compiled with GCC's ThreadSanitizer instrumentation
// (tests/cuemu/nvcc: -fsanitize=thread without its runtime), so every load and store a
// CUDA thread makes calls __tsan_readN / __tsan_writeN below with the address, the size
// and (the return address) the instruction. WMMA fragment loads and stores are not
// counted element by element: include/mma.h reports the accesses the hardware's
// instructions make (cost_model_access) and hides its own.
//
// Warp instructions. Between two block barriers each thread records (site, address, size);
// at the barrier (and at the block's end) the records of a warp's lanes are grouped by
// (site, k): the k-th execution of one instruction by each lane is one warp instruction,
// so divergent lanes and loops group as on the device.
//
// Shared memory (the rule of sm_80 / sm_90, as measured by ncu and documented for 32-bit
// accesses): 32 banks of 4 bytes; a warp request is served in phases of 128 bytes: the
// whole warp for accesses of <= 4 bytes, two half-warps (lanes 0-15, 16-31) for 8 bytes,
// four quarter-warps for 16 bytes. Within a phase, lanes reading the same 4-byte word are
// served together (broadcast / multicast); the wavefronts of a phase are the largest
// number of distinct 4-byte words that fall in one bank. ideal = the phases with an
// active lane; conflict degree = wavefronts / ideal. WMMA fragments: a 16x16 bf16 A or B
// tile is one ldmatrix.x4 (each lane one 16-byte row piece: memory row l % 16, half l / 16,
// so the quarter-warps are the four 8x8 matrices); a 16x16 fp32 accumulator in row-major
// memory four 8-byte accesses per lane (rows l/4 (+8), columns 2(l%4) (+8)), in
// column-major memory eight 4-byte ones: the mma.sync m16n8k16 register layout.
// The dynamic and static arenas are each 1024-byte aligned here; on the device dynamic
// memory follows the static, which can shift banks by a multiple of its alignment.
//
// Global memory: the distinct 32-byte sectors each warp instruction touches (what L1
// asks of L2), loads and stores apart; no cache is modelled, so re-reads of a tile by
// other blocks count again (an upper bound on L2 traffic, not DRAM traffic).
//
// mma: one count per wmma::mma_sync (16x16x16, 8192 FLOP).
//
// Estimated H100 SXM time of a kernel (a stated roofline with perfect overlap):
//   max(mma FLOP / 989e12, wavefronts / (132 SMs * 1.755e9 cycles/s, one wavefront per SM
//   per cycle), global bytes / 3.35e12)
// Only tensor-core FLOPs are counted; SIMT arithmetic (the fp32 kernels, exp) is not.
// An access is what the host compiler made of the lane's code (no vectorisation): a copy
// of a whole 8- or 16-byte vector value is one access, as nvcc's LDS.64/128, and so is an
// assignment of one (include/cuemu.h: a value built from its members, or read into a
// variable whose members are then used one by one, would otherwise become scalar accesses,
// which an initialisation still may).
// The report: printed at exit to stderr, or to the file named by CUEMU_COST_OUT; one line
// per (kernel, block size, dynamic shared memory).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuemu_internal.h"
#include "cuemu_cost.h"   // include/

namespace cuemu {
namespace cost {

bool g_on = false;
static bool g_env = false;   // CUEMU_COST set: the report at exit
thread_local int t_suppress = 0;

enum Space : uint8_t { SHARED, GLOBAL };
struct Rec {
    uintptr_t pc;
    uintptr_t addr;
    uint32_t size;
    uint8_t write, space;
};

// One worker's (OS thread's) block in flight and what its finished blocks counted.
struct Worker {
    std::vector<Rec> recs[1024];
    unsigned nthreads = 0;
    uintptr_t smem_lo[2] = {0, 0}, smem_hi[2] = {0, 0};
    Stats acc;   // the current launch's, merged at its end
};
static thread_local Worker *t_w;
// Never destroyed: init() runs from the instrumentation's constructor, before these would
// be constructed, and the report reads them at exit.
static std::mutex &g_mu = *new std::mutex;
static std::vector<Worker *> &g_workers = *new std::vector<Worker *>;
static std::vector<std::pair<uintptr_t, uintptr_t>> &g_dev = *new std::vector<std::pair<uintptr_t, uintptr_t>>;   // device allocations of this launch, sorted
static std::map<std::string, Stats> &g_table = *new std::map<std::string, Stats>;
static std::vector<std::string> &g_order = *new std::vector<std::string>;   // first-launch order of the table's rows

static void at_exit();
static Worker *worker() {
    if (!t_w) {
        t_w = new Worker();
        std::lock_guard<std::mutex> g(g_mu);
        g_workers.push_back(t_w);
    }
    return t_w;
}

static bool in_device(uintptr_t a) {
    auto it = std::upper_bound(g_dev.begin(), g_dev.end(), std::make_pair(a, ~(uintptr_t)0));
    if (it == g_dev.begin()) return false;
    --it;
    return a >= it->first && a < it->second;
}

static inline void record(uintptr_t pc, const void *p, uint32_t size, uint8_t write) {
    if (!g_on || t_suppress) return;
    const int t = current_thread();
    if (t < 0) return;
    Worker *w = t_w;
    if (!w) return;
    const uintptr_t a = (uintptr_t)p;
    uint8_t space;
    if ((a >= w->smem_lo[0] && a < w->smem_hi[0]) || (a >= w->smem_lo[1] && a < w->smem_hi[1])) space = SHARED;
    else if (in_device(a)) space = GLOBAL;
    else return;   // the fiber's stack (locals), the kernel's arguments
    w->recs[t].push_back(Rec{pc, a, size, write, space});
}

void model_access(uintptr_t site, const void *p, unsigned size, bool write) {
    record(site | ((uintptr_t)1 << 63), p, size, write);
}

// ---- one warp instruction ----
static void shared_instr(Stats &s, const std::vector<std::pair<unsigned, const Rec *>> &lanes) {
    uint32_t size = 0;
    for (auto &l : lanes) size = std::max(size, l.second->size);
    const unsigned per_phase = size <= 4 ? 32 : size <= 8 ? 16 : 8;
    uint64_t wf = 0, ideal = 0;
    for (unsigned ph = 0; ph < 32 / per_phase; ph++) {
        // distinct words per bank among this phase's lanes
        std::vector<uintptr_t> words;
        for (auto &l : lanes) {
            if (l.first / per_phase != ph) continue;
            const Rec *r = l.second;
            for (uintptr_t w = r->addr / 4; w <= (r->addr + r->size - 1) / 4; w++) words.push_back(w);
        }
        if (words.empty()) continue;
        std::sort(words.begin(), words.end());
        words.erase(std::unique(words.begin(), words.end()), words.end());
        unsigned per_bank[32] = {0};
        unsigned mx = 0;
        for (uintptr_t w : words) mx = std::max(mx, ++per_bank[w % 32]);
        wf += mx;
        ideal++;
    }
    s.smem_instr++;
    s.smem_wavefronts += wf;
    s.smem_ideal += ideal;
    for (auto &l : lanes) s.smem_bytes += l.second->size;
}

static void global_instr(Stats &s, const std::vector<std::pair<unsigned, const Rec *>> &lanes, bool write) {
    std::vector<uintptr_t> sec;
    uint64_t bytes = 0;
    for (auto &l : lanes) {
        const Rec *r = l.second;
        for (uintptr_t x = r->addr / 32; x <= (r->addr + r->size - 1) / 32; x++) sec.push_back(x);
        bytes += r->size;
    }
    std::sort(sec.begin(), sec.end());
    const uint64_t n = std::unique(sec.begin(), sec.end()) - sec.begin();
    (write ? s.gst_instr : s.gld_instr)++;
    (write ? s.gst_sectors : s.gld_sectors) += n;
    (write ? s.gst_bytes : s.gld_bytes) += bytes;
}

struct Key {
    uintptr_t pc;
    uint32_t k;
    uint8_t space, write;
    unsigned lane;
    const Rec *r;
};

void flush() {
    Worker *w = t_w;
    if (!g_on || !w) return;
    std::vector<Key> keys;
    std::unordered_map<uintptr_t, uint32_t> seen;
    std::vector<std::pair<unsigned, const Rec *>> lanes;
    for (unsigned w0 = 0; w0 < w->nthreads; w0 += 32) {
        keys.clear();
        for (unsigned l = 0; l < 32 && w0 + l < w->nthreads; l++) {
            seen.clear();
            for (const Rec &r : w->recs[w0 + l]) keys.push_back(Key{r.pc, seen[r.pc]++, r.space, r.write, l, &r});
        }
        std::sort(keys.begin(), keys.end(), [](const Key &a, const Key &b) {
            if (a.pc != b.pc) return a.pc < b.pc;
            if (a.k != b.k) return a.k < b.k;
            if (a.space != b.space) return a.space < b.space;
            if (a.write != b.write) return a.write < b.write;
            return a.lane < b.lane;
        });
        for (size_t i = 0; i < keys.size();) {
            size_t j = i;
            lanes.clear();
            while (j < keys.size() && keys[j].pc == keys[i].pc && keys[j].k == keys[i].k && keys[j].space == keys[i].space &&
                   keys[j].write == keys[i].write) {
                lanes.push_back({keys[j].lane, keys[j].r});
                j++;
            }
            if (keys[i].space == SHARED) shared_instr(w->acc, lanes);
            else global_instr(w->acc, lanes, keys[i].write);
            i = j;
        }
        for (unsigned l = 0; l < 32 && w0 + l < w->nthreads; l++) w->recs[w0 + l].clear();
    }
}

void block_begin(unsigned nthreads, const void *static_smem, const void *dyn_smem, size_t arena) {
    if (!g_on) return;
    Worker *w = worker();
    for (unsigned i = 0; i < 1024; i++) w->recs[i].clear();   // a refused block's leftovers
    w->nthreads = nthreads;
    w->smem_lo[0] = (uintptr_t)static_smem;
    w->smem_hi[0] = w->smem_lo[0] + arena;
    w->smem_lo[1] = (uintptr_t)dyn_smem;
    w->smem_hi[1] = w->smem_lo[1] + arena;
    w->acc.blocks++;
}

void block_end() {
    if (!g_on || !t_w) return;
    flush();
    t_w->nthreads = 0;
}

void mma(unsigned n) {
    if (g_on && t_w) t_w->acc.mma += n;
}

void launch_begin(const std::vector<std::pair<uintptr_t, uintptr_t>> &device_ranges) {
    if (!g_on) return;
    static bool registered = false;   // at the first launch: after every static object exists
    if (!registered && g_env) {
        registered = true;
        atexit(at_exit);
    }
    g_dev = device_ranges;
    std::sort(g_dev.begin(), g_dev.end());
}

void launch_end(const char *name, unsigned threads_per_block, size_t dyn_smem) {
    if (!g_on) return;
    char key[512];
    snprintf(key, sizeof key, "%s [%u thr, %zu B dyn smem]", name, threads_per_block, dyn_smem);
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_table.find(key);
    if (it == g_table.end()) {
        it = g_table.emplace(key, Stats()).first;
        g_order.push_back(key);
    }
    Stats &s = it->second;
    s.launches++;
    for (Worker *w : g_workers) {
        s.add(w->acc);
        w->acc = Stats();
    }
}

void Stats::add(const Stats &o) {
    blocks += o.blocks;
    mma += o.mma;
    smem_instr += o.smem_instr;
    smem_wavefronts += o.smem_wavefronts;
    smem_ideal += o.smem_ideal;
    smem_bytes += o.smem_bytes;
    gld_instr += o.gld_instr;
    gld_sectors += o.gld_sectors;
    gld_bytes += o.gld_bytes;
    gst_instr += o.gst_instr;
    gst_sectors += o.gst_sectors;
    gst_bytes += o.gst_bytes;
}

// The stated H100 SXM model (header comment).
static const double kTensorFlops = 989e12, kSmemWfPerS = 132 * 1.755e9, kHbm = 3.35e12;
Estimate estimate(const Stats &s) {
    Estimate e;
    e.t_mma = (double)s.mma * 8192.0 / kTensorFlops;
    e.t_smem = (double)s.smem_wavefronts / kSmemWfPerS;
    e.t_global = (double)(s.gld_sectors + s.gst_sectors) * 32.0 / kHbm;
    e.t = std::max(e.t_mma, std::max(e.t_smem, e.t_global));
    e.bound = e.t == e.t_mma ? "mma" : e.t == e.t_smem ? "smem" : "global";
    return e;
}

bool lookup(const char *name_prefix, Stats *out) {
    std::lock_guard<std::mutex> g(g_mu);
    Stats s;
    bool any = false;
    for (auto &kv : g_table)
        if (!strncmp(kv.first.c_str(), name_prefix, strlen(name_prefix))) {
            s.add(kv.second);
            s.launches += kv.second.launches;
            any = true;
        }
    if (out) *out = s;
    return any;
}

void reset() {
    std::lock_guard<std::mutex> g(g_mu);
    g_table.clear();
    g_order.clear();
}

void report(FILE *f) {
    std::lock_guard<std::mutex> g(g_mu);
    fprintf(f, "cuemu cost model (tests/cuemu/cost.cpp): per kernel, all its launches in this process\n");
    fprintf(f, "%-72s %6s %8s %10s %8s %12s %6s %7s %10s %10s %10s %6s\n", "kernel", "launch", "blocks", "mma",
            "GFLOP", "smem_wf", "confl", "wf/mma", "gld_MB", "gst_MB", "est_us", "bound");
    for (const std::string &k : g_order) {
        const Stats &s = g_table[k];
        const Estimate e = estimate(s);
        fprintf(f, "%-72s %6llu %8llu %10llu %8.3f %12llu %6.2f %7.2f %10.3f %10.3f %10.2f %6s\n", k.c_str(),
                (unsigned long long)s.launches, (unsigned long long)s.blocks, (unsigned long long)s.mma,
                s.mma * 8192.0 / 1e9, (unsigned long long)s.smem_wavefronts,
                s.smem_ideal ? (double)s.smem_wavefronts / s.smem_ideal : 0.0,
                s.mma ? (double)s.smem_wavefronts / s.mma : 0.0, s.gld_sectors * 32.0 / 1e6, s.gst_sectors * 32.0 / 1e6,
                e.t * 1e6, e.bound);
    }
    fflush(f);
}

static void at_exit() {
    const char *out = getenv("CUEMU_COST_OUT");
    if (out && *out) {
        std::string tmp = std::string(out) + ".tmp";
        FILE *f = fopen(tmp.c_str(), "w");
        if (!f) { diag("CUEMU_COST_OUT=%s: cannot write %s", out, tmp.c_str()); return; }
        report(f);
        if (fclose(f) != 0 || rename(tmp.c_str(), out) != 0) diag("CUEMU_COST_OUT=%s: write failed", out);
        return;
    }
    report(stderr);
}

void init() {
    static bool done = false;
    if (done) return;
    done = true;
    const char *e = getenv("CUEMU_COST");
    g_on = g_env = e && *e && strcmp(e, "0");
}

void enable(bool on) { g_on = on; }

}   // namespace cost
}   // namespace cuemu

// ---- the ThreadSanitizer entry points the instrumented .cu code calls ----
using cuemu::cost::record;
#define CUEMU_TSAN(n)                                                                                             \
    extern "C" void __tsan_read##n(void *p) { record((uintptr_t)__builtin_return_address(0), p, n, 0); }          \
    extern "C" void __tsan_write##n(void *p) { record((uintptr_t)__builtin_return_address(0), p, n, 1); }         \
    extern "C" void __tsan_unaligned_read##n(void *p) { record((uintptr_t)__builtin_return_address(0), p, n, 0); } \
    extern "C" void __tsan_unaligned_write##n(void *p) { record((uintptr_t)__builtin_return_address(0), p, n, 1); }
CUEMU_TSAN(1)
CUEMU_TSAN(2)
CUEMU_TSAN(4)
CUEMU_TSAN(8)
CUEMU_TSAN(16)
// struct copies (a 16-byte vector type): one access of that size
extern "C" void __tsan_read_range(void *p, unsigned long n) {
    record((uintptr_t)__builtin_return_address(0), p, (uint32_t)n, 0);
}
extern "C" void __tsan_write_range(void *p, unsigned long n) {
    record((uintptr_t)__builtin_return_address(0), p, (uint32_t)n, 1);
}
extern "C" void __tsan_init(void) { cuemu::cost::init(); }
extern "C" void __tsan_func_entry(void *) {}
extern "C" void __tsan_func_exit(void) {}
extern "C" void __tsan_vptr_update(void **, void *) {}
extern "C" void __tsan_vptr_read(void **) {}
