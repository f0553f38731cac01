// cuemu_cost.h (emulation only): the counted cost model of tests/cuemu/cost.cpp, on with
// CUEMU_COST=1. What include/mma.h reports for WMMA fragments, what runtime.cpp tells it
// of launches, blocks and barriers, and what a test reads back (tests/test_cuemu.cu).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <utility>
#include <vector>

namespace cuemu {
int current_thread();   // the running fiber's linear thread index in its block, -1 outside kernels
namespace cost {
extern bool g_on;
extern thread_local int t_suppress;   // > 0: the calling thread's accesses are not counted
struct Stats {
    unsigned long long launches = 0, blocks = 0, mma = 0;
    unsigned long long smem_instr = 0, smem_wavefronts = 0, smem_ideal = 0, smem_bytes = 0;
    unsigned long long gld_instr = 0, gld_sectors = 0, gld_bytes = 0;
    unsigned long long gst_instr = 0, gst_sectors = 0, gst_bytes = 0;
    void add(const Stats &o);   // all but launches
};
struct Estimate {
    double t_mma, t_smem, t_global, t;   // seconds on an H100 SXM (cost.cpp's model)
    const char *bound;
};
void init();
void enable(bool on);
// the access one lane makes in a modelled hardware instruction (site: unique per instruction)
void model_access(uintptr_t site, const void *p, unsigned size, bool write);
void mma(unsigned n);
void launch_begin(const std::vector<std::pair<uintptr_t, uintptr_t>> &device_ranges);
void launch_end(const char *name, unsigned threads_per_block, size_t dyn_smem);
void block_begin(unsigned nthreads, const void *static_smem, const void *dyn_smem, size_t arena);
void flush();   // at a block barrier: the records so far become warp instructions
void block_end();
// the sum over the table's kernels whose name starts with name_prefix; false if none
bool lookup(const char *name_prefix, Stats *out);
Estimate estimate(const Stats &s);
void reset();
void report(FILE *f);
}   // namespace cost
}   // namespace cuemu
