// runtime.cpp: the emulated CUDA device (tests/cuemu, docs/cuda.md "Emulation"). Runs the
// project's kernels on the CPU with the semantics that catch real bugs:
//   threads    every CUDA thread of a block is a fiber (a cheap hand-written context switch,
//              not swapcontext and its signal-mask system call); a block runs on one OS
//              thread, blocks are spread over CUEMU_THREADS OS threads (default: the cores).
//              Between two meeting points a fiber runs alone; at a meeting point
//              (cuemu.h) it waits until the others of its warp or block get there. The
//              order in which a block's fibers run is CUEMU_ORDER = forward (default),
//              reverse or random[:SEED] (rounds in which every ready thread runs to its
//              next meeting point, in that order; random: a new permutation every round),
//              or warps (warp-serial: each warp runs alone up to the next block barrier).
//   memory     cudaMalloc maps each allocation between guard pages, its 256-byte-rounded
//              end flush with the upper one (an access past the end faults and is
//              reported with the kernel, block and thread); the pad between the lower
//              page and the start holds canaries checked after every kernel, copy and
//              free; new device memory and shared
//              memory are filled with 0xff bytes (NaN as fp32, bf16 and fp64). Kernel pointer
//              arguments and every copy must lie in device memory (or be host memory
//              where the direction says so).
//   limits     an H100/H200's: 1024 threads per block (64 in z), grid y, z <= 65535,
//              48 KiB of shared memory per block unless cudaFuncSetAttribute raised the
//              kernel's dynamic limit, at most 227 KiB in all; __launch_bounds__. A refused
//              launch returns the real error code from cudaGetLastError and prints why.
//   streams    run synchronously in issue order; NCCL operations (nccl.cpp) stay pending
//              on their stream until cudaStreamQuery/Synchronize (or the next operation on
//              the stream) completes them.
// What this cannot show (docs/cuda.md): races that need two threads truly running at once
// between two barriers, stream asynchrony, FMA contraction and tensor-core summation
// order, registers, occupancy and speed.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda_runtime.h"
#include "cuemu_cost.h"
#include "cuemu_internal.h"

// ---------------------------------------------------------------------------------------
// fibers: x86-64 System V context switch (callee-saved registers, MXCSR and x87 control word)
// ---------------------------------------------------------------------------------------
extern "C" void cuemu_switch(void **save_sp, void *load_sp);
extern "C" void cuemu_fiber_start(void);
asm(R"(
.text
.globl cuemu_switch
.type cuemu_switch,@function
cuemu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size cuemu_switch,.-cuemu_switch
.globl cuemu_fiber_start
.type cuemu_fiber_start,@function
cuemu_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
.size cuemu_fiber_start,.-cuemu_fiber_start
.section .note.GNU-stack,"",@progbits
.text
)");

namespace cuemu {

thread_local Pos *t_pos;

// ---------------------------------------------------------------------------------------
// errors and diagnostics
// ---------------------------------------------------------------------------------------
static cudaError_t g_last = cudaSuccess;   // the host thread's last error (CUDA: per thread)
cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess) g_last = e;
    return e;
}
std::string vformat(const char *fmt, va_list ap) {
    char buf[4096];
    vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}
// std::string var = the caller's printf-style arguments formatted
#define VFORMAT(var, fmt) \
    std::string var;      \
    {                     \
        va_list ap_;      \
        va_start(ap_, fmt); \
        var = vformat(fmt, ap_); \
        va_end(ap_);      \
    }
void diag(const char *fmt, ...) {
    VFORMAT(msg, fmt);
    fprintf(stderr, "cuemu: %s\n", msg.c_str());
    fflush(stderr);
}

// ---------------------------------------------------------------------------------------
// device memory
// ---------------------------------------------------------------------------------------
static const size_t kPage = 4096;
static const unsigned char kPoison = 0xff, kCanary = 0xa5;
struct Alloc {
    char *base;      // what cudaMalloc returned (256-byte aligned)
    size_t size;     // bytes asked for
    size_t usable;   // size rounded up to 256: what the device would let a kernel touch
    char *map;       // the mapping: [guard page][pad canaries][usable][guard page]
    size_t map_len;
    int id;
    int device;
};
static std::mutex g_mem_mu;
static std::map<uintptr_t, Alloc> g_allocs;   // by base
static int g_next_id = 1;
static size_t g_allocated[64];
static int g_device = 0;

static int env_int(const char *name, int dflt) {
    const char *e = getenv(name);
    return e && *e ? atoi(e) : dflt;
}
static int device_count() {
    int n = env_int("CUEMU_DEVICES", 1);
    return n < 0 ? 0 : n > 64 ? 64 : n;
}
static size_t device_total() { return (size_t)env_int("CUEMU_MEM_MIB", 81559) << 20; }   // an H100's 79.6 GiB

const Alloc *find_alloc(const void *p) {   // the allocation holding p (one past the end counts)
    uintptr_t a = (uintptr_t)p;
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin()) return nullptr;
    --it;
    const Alloc &al = it->second;
    if (a >= (uintptr_t)al.base && a <= (uintptr_t)al.base + al.usable) return &al;
    return nullptr;
}
// The allocation a guard page belongs to (fault reports).
static const Alloc *alloc_of_guard(uintptr_t a) {
    for (auto &kv : g_allocs) {
        const Alloc &al = kv.second;
        if (a >= (uintptr_t)al.map && a < (uintptr_t)al.map + al.map_len) return &al;
    }
    return nullptr;
}
bool is_device_range(const void *p, size_t bytes, const Alloc **out) {
    std::lock_guard<std::mutex> g(g_mem_mu);
    const Alloc *al = find_alloc(p);
    if (out) *out = al;
    return al && (const char *)p + bytes <= al->base + al->usable;
}
bool is_device_ptr(const void *p) {
    std::lock_guard<std::mutex> g(g_mem_mu);
    return find_alloc(p) != nullptr;
}

// Canaries in the pad before every allocation's start: a write just before it that the
// lower guard page does not catch.
static bool canaries_ok(const Alloc &al, size_t *bad_off) {
    // the usable end meets the upper guard page: only the pad before the start has canaries
    for (const char *c = al.map + kPage; c < al.base; c++)
        if ((unsigned char)*c != kCanary) { *bad_off = (size_t)(c - al.base); return false; }
    return true;
}
void check_canaries(const char *after) {
    std::lock_guard<std::mutex> g(g_mem_mu);
    for (auto &kv : g_allocs) {
        size_t off = 0;
        if (!canaries_ok(kv.second, &off)) {
            diag("out-of-bounds write after %s: allocation #%d (%zu bytes) was written at byte offset %ld", after,
                 kv.second.id, kv.second.size, (long)off);
            _exit(86);
        }
    }
}

}   // namespace cuemu
using namespace cuemu;

cudaError_t cudaMalloc(void **p, size_t bytes) {
    if (!p) return set_error(cudaErrorInvalidValue);
    *p = nullptr;
    if (device_count() == 0) return set_error(cudaErrorNoDevice);
    if (bytes == 0) return cudaSuccess;
    std::lock_guard<std::mutex> g(g_mem_mu);
    if (g_allocated[g_device] + bytes > device_total()) return set_error(cudaErrorMemoryAllocation);
    size_t usable = (bytes + 255) & ~(size_t)255;
    size_t body = (usable + kPage - 1) & ~(kPage - 1);
    size_t len = body + 2 * kPage;
    char *m = (char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return set_error(cudaErrorMemoryAllocation);
    mprotect(m, kPage, PROT_NONE);
    mprotect(m + len - kPage, kPage, PROT_NONE);
    char *base = m + kPage + (body - usable);   // the usable end meets the tail guard page
    memset(m + kPage, kCanary, body - usable);
    memset(base, kPoison, bytes);
    // bytes .. usable: still device memory a kernel may touch (cudaMalloc rounds to 256),
    // poisoned rather than canaries so that a read there is NaN and a write is allowed
    memset(base + bytes, kPoison, usable - bytes);
    Alloc al{base, bytes, usable, m, len, g_next_id++, g_device};
    g_allocs[(uintptr_t)base] = al;
    g_allocated[g_device] += bytes;
    *p = base;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    check_canaries("cudaFree");
    std::lock_guard<std::mutex> g(g_mem_mu);
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end()) {
        diag("cudaFree(%p): not a pointer cudaMalloc returned", p);
        return set_error(cudaErrorInvalidValue);
    }
    g_allocated[it->second.device] -= it->second.size;
    munmap(it->second.map, it->second.map_len);
    g_allocs.erase(it);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n) {
    *n = device_count();
    return *n ? cudaSuccess : set_error(cudaErrorNoDevice);
}
cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= device_count()) return set_error(cudaErrorInvalidDevice);
    g_device = d;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
    *d = g_device;
    return cudaSuccess;
}
namespace cuemu {
int current_device() { return g_device; }
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    if (d < 0 || d >= device_count()) return set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuemu emulated H100 #%d", d);
    p->totalGlobalMem = device_total();
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->maxThreadsPerBlock = 1024;
    p->warpSize = 32;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    if (device_count() == 0) return set_error(cudaErrorNoDevice);
    std::lock_guard<std::mutex> g(g_mem_mu);
    *total_b = device_total();
    *free_b = device_total() - g_allocated[g_device];
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return g_last; }
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    }
    return "cudaErrorUnknown";
}
const char *cudaGetErrorString(cudaError_t e) {   // the runtime's own strings
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    }
    return "unknown error";
}

// ---------------------------------------------------------------------------------------
// streams: synchronous, with pending NCCL work (nccl.cpp) completed in order
// ---------------------------------------------------------------------------------------
struct CUstream_st {
    int id;
    std::vector<PendingOp *> pending;
};
namespace cuemu {
static std::vector<CUstream_st *> g_streams;
static CUstream_st g_default_stream{0, {}};
CUstream_st *stream_of(cudaStream_t st, bool *ok) {
    *ok = true;
    if (!st) return &g_default_stream;
    if (std::find(g_streams.begin(), g_streams.end(), st) == g_streams.end()) {
        *ok = false;
        return nullptr;
    }
    return st;
}
void stream_add_pending(cudaStream_t st, PendingOp *op) {
    bool ok;
    CUstream_st *s = stream_of(st, &ok);
    if (!ok) { diag("NCCL operation on an unknown stream %p", (void *)st); _exit(86); }
    s->pending.push_back(op);
}
// Complete the stream's pending operations in order: wait (blocking) or test (0 = some
// still pending).
static bool stream_drain(CUstream_st *s, bool wait) {
    while (!s->pending.empty()) {
        PendingOp *op = s->pending.front();
        if (!op->progress(wait)) return false;
        s->pending.erase(s->pending.begin());
        delete op;
    }
    return true;
}
}   // namespace cuemu

cudaError_t cudaStreamCreate(cudaStream_t *st) {
    CUstream_st *s = new CUstream_st{(int)g_streams.size() + 1, {}};
    g_streams.push_back(s);
    *st = s;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t st) {
    auto it = std::find(g_streams.begin(), g_streams.end(), st);
    if (it == g_streams.end()) return set_error(cudaErrorInvalidResourceHandle);
    stream_drain(st, true);
    g_streams.erase(it);
    delete st;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t st) {
    bool ok;
    CUstream_st *s = stream_of(st, &ok);
    if (!ok) return set_error(cudaErrorInvalidResourceHandle);
    stream_drain(s, true);
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t st) {
    bool ok;
    CUstream_st *s = stream_of(st, &ok);
    if (!ok) return set_error(cudaErrorInvalidResourceHandle);
    return stream_drain(s, false) ? cudaSuccess : cudaErrorNotReady;   // NotReady is not an error
}
cudaError_t cudaDeviceSynchronize(void) {
    stream_drain(&g_default_stream, true);
    for (CUstream_st *s : g_streams) stream_drain(s, true);
    return cudaSuccess;
}

// Events: streams run synchronously, so an event records the host's clock when the work
// issued before it is done (NCCL's pending work drained first); elapsed times are the
// emulation's, not a device's.
struct CUevent_st {
    double t;
    bool recorded;
};
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    if (!e) return set_error(cudaErrorInvalidValue);
    *e = new CUevent_st{0.0, false};
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st) {
    bool ok;
    CUstream_st *s = stream_of(st, &ok);
    if (!ok || !e) return set_error(cudaErrorInvalidResourceHandle);
    stream_drain(s, true);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t = ts.tv_sec + ts.tv_nsec * 1e-9;
    e->recorded = true;
    return cudaSuccess;
}
// The stream's later work waits for the event: streams run synchronously and a record drains
// its stream first, so a recorded event is already complete and there is nothing to wait for.
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned int flags) {
    bool ok;
    stream_of(st, &ok);
    if (!ok || !e || flags) return set_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle); }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!ms || !a || !b) return set_error(cudaErrorInvalidResourceHandle);
    if (!a->recorded || !b->recorded) return set_error(cudaErrorInvalidResourceHandle);
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// copies and sets: every byte range checked against the direction
// ---------------------------------------------------------------------------------------
static cudaError_t check_range(const void *p, size_t bytes, bool device, const char *what, const char *call) {
    const Alloc *al = nullptr;
    bool dev = is_device_range(p, bytes, &al);
    if (device && !dev) {
        if (al)
            diag("%s: %s range %p + %zu bytes runs past the end of allocation #%d (%zu bytes, starts %p)", call, what, p,
                 bytes, al->id, al->size, (void *)al->base);
        else diag("%s: %s %p is not device memory", call, what, p);
        return cudaErrorInvalidValue;
    }
    if (!device && is_device_ptr(p)) {
        diag("%s: %s %p is device memory where the copy direction says host", call, what, p);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}
static cudaError_t copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st, const char *call) {
    bool ok;
    CUstream_st *s = stream_of(st, &ok);
    if (!ok) return set_error(cudaErrorInvalidResourceHandle);
    if (bytes == 0) return cudaSuccess;
    if (kind == cudaMemcpyDefault) {
        kind = (cudaMemcpyKind)((is_device_ptr(src) ? 2 : 0) | (is_device_ptr(dst) ? 1 : 0));
        kind = kind == 0 ? cudaMemcpyHostToHost : kind == 1 ? cudaMemcpyHostToDevice : kind == 2 ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
    }
    if ((int)kind < 0 || (int)kind > 3) return set_error(cudaErrorInvalidMemcpyDirection);
    const bool dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    cudaError_t e = check_range(dst, bytes, dd, "destination", call);
    if (e == cudaSuccess) e = check_range(src, bytes, sd, "source", call);
    if (e != cudaSuccess) return set_error(e);
    stream_drain(s, true);
    memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, 0, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st) {
    return copy(dst, src, bytes, kind, st, "cudaMemcpyAsync");
}
static cudaError_t set(void *p, int value, size_t bytes, cudaStream_t st, const char *call) {
    bool ok;
    CUstream_st *s = stream_of(st, &ok);
    if (!ok) return set_error(cudaErrorInvalidResourceHandle);
    if (bytes == 0) return cudaSuccess;
    cudaError_t e = check_range(p, bytes, true, "destination", call);
    if (e != cudaSuccess) return set_error(e);
    stream_drain(s, true);
    memset(p, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int value, size_t bytes) { return set(p, value, bytes, 0, "cudaMemset"); }
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t st) {
    return set(p, value, bytes, st, "cudaMemsetAsync");
}

// ---------------------------------------------------------------------------------------
// kernels: launch, blocks on worker threads, fibers and their meeting points
// ---------------------------------------------------------------------------------------
namespace cuemu {

static const int kMaxThreads = 1024;
static const size_t kStaticSmem = 48 << 10, kMaxSmem = 227 << 10, kStack = 48 << 10;

enum FiberState { READY, AT_BARRIER, AT_WARP, DONE };
struct Fiber {
    void *sp;
    Pos pos;
    int state;
    unsigned linear, lane, warp;
    const char *file;   // where it waits
    int line;
    WarpOp *op;
    unsigned mask;
};

struct Launch {
    const char *name, *file;
    int line;
    void (*run)(void *);
    void *pack;
    dim3 grid, block;
    size_t smem;
    std::atomic<bool> refused{false};
    cudaError_t refuse_code = cudaSuccess;
    std::string refuse_msg;
    std::mutex mu;
};

struct Worker {
    void *sched_sp = nullptr;
    Fiber fibers[kMaxThreads];
    char *stacks = nullptr;
    char *static_smem = nullptr, *dyn_smem = nullptr;
    size_t static_used = 0;
    std::vector<std::pair<int, size_t>> sites;   // shared declaration site -> offset
    Launch *launch = nullptr;
    unsigned nthreads = 0;
    std::vector<unsigned> order;   // this round's thread order
    unsigned pos = 0;              // index in order of the running fiber
    unsigned long long block_linear = 0;
    char *altstack = nullptr;
};
static thread_local Worker *t_worker;
static thread_local Fiber *t_fiber;

static void install_fault_handler();
static void worker_init(Worker *w) {
    size_t len = (size_t)kMaxThreads * kStack;
    w->stacks = (char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w->stacks == MAP_FAILED) { diag("cannot map fiber stacks"); _exit(86); }
    for (int i = 0; i < kMaxThreads; i++) mprotect(w->stacks + (size_t)i * kStack, kPage, PROT_NONE);   // overflow guard
    w->static_smem = (char *)aligned_alloc(1024, kMaxSmem);
    w->dyn_smem = (char *)aligned_alloc(1024, kMaxSmem);
    // fault reports run on their own stack (a fiber's may be the one that overflowed)
    w->altstack = (char *)malloc(1 << 16);
    stack_t ss;
    ss.ss_sp = w->altstack;
    ss.ss_size = 1 << 16;
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
    install_fault_handler();
}

// The running fiber stops (it waits, or it is done): switch straight to the next ready
// fiber of this round, or back to the scheduler when the round is over. One switch per
// stop instead of two through the scheduler.
static void hand_over(Fiber *f) {
    Worker *w = t_worker;
    const unsigned n = (unsigned)w->order.size();
    for (unsigned k = w->pos + 1; k < n; k++) {
        Fiber *g = &w->fibers[w->order[k]];
        if (g->state != READY) continue;
        w->pos = k;
        t_fiber = g;
        t_pos = &g->pos;
        cuemu_switch(&f->sp, g->sp);
        return;
    }
    cuemu_switch(&f->sp, w->sched_sp);
}

[[noreturn]] static void fiber_main(Fiber *f) {
    Worker *w = t_worker;
    w->launch->run(w->launch->pack);
    f->state = DONE;
    hand_over(f);
    __builtin_unreachable();
}

static void fiber_prepare(Worker *w, Fiber *f, unsigned i) {
    // The tops of the stacks are staggered: at a power-of-two stride every fiber's frame
    // would fall in the same cache sets and they would evict each other on every switch.
    char *top = w->stacks + (size_t)(i + 1) * kStack - (size_t)(i % 61) * 272;   // 16-byte aligned
    uint64_t *fr = (uint64_t *)(top - 64);
    uint32_t mx = 0x1f80;
    uint16_t cw = 0x037f;
    memcpy((char *)fr, &mx, 4);
    memcpy((char *)fr + 4, &cw, 2);
    fr[1] = 0;                                 // r15
    fr[2] = 0;                                 // r14
    fr[3] = (uint64_t)(uintptr_t)&fiber_main;  // r13: the entry
    fr[4] = (uint64_t)(uintptr_t)f;            // r12: its argument
    fr[5] = 0;                                 // rbx
    fr[6] = 0;                                 // rbp
    fr[7] = (uint64_t)(uintptr_t)&cuemu_fiber_start;
    f->sp = fr;
}



[[noreturn]] static void abort_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void abort_run(const char *fmt, ...) {
    VFORMAT(msg, fmt);
    const char *buf = msg.c_str();
    Worker *w = t_worker;
    if (w && w->launch)
        fprintf(stderr, "cuemu: kernel %s (launched at %s:%d), block (%u,%u,%u): %s\n", w->launch->name, w->launch->file,
                w->launch->line, w->fibers[0].pos.bid.x, w->fibers[0].pos.bid.y, w->fibers[0].pos.bid.z, buf);
    else fprintf(stderr, "cuemu: %s\n", buf);
    fflush(stderr);
    _exit(86);
}

void fail(const char *file, int line, const char *fmt, ...) {
    VFORMAT(msg, fmt);
    Fiber *f = t_fiber;
    abort_run("thread (%u,%u,%u) at %s:%d: %s", f ? f->pos.tid.x : 0, f ? f->pos.tid.y : 0, f ? f->pos.tid.z : 0, file,
              line, msg.c_str());
}

unsigned lane_id() { return t_fiber->lane; }
int current_thread() { return t_fiber ? (int)t_fiber->linear : -1; }

void syncthreads(const char *file, int line) {
    Fiber *f = t_fiber;
    f->state = AT_BARRIER;
    f->file = file;
    f->line = line;
    hand_over(f);
}

static void noop_complete(WarpOp **, unsigned) {}
void syncwarp(const char *file, int line, unsigned mask) {
    WarpOp op{noop_complete, "__syncwarp"};
    warp_collective(&op, file, line, mask);
}

void warp_collective(WarpOp *op, const char *file, int line, unsigned mask) {
    Fiber *f = t_fiber;
    if (!(mask >> f->lane & 1u)) fail(file, line, "%s with a mask (0x%08x) that leaves out the calling lane %u", op->what, mask, f->lane);
    f->state = AT_WARP;
    f->file = file;
    f->line = line;
    f->op = op;
    f->mask = mask;
    hand_over(f);
}

void shfl_complete(WarpOp **ops, unsigned mask) {
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1u)) continue;
        ShflOp *o = (ShflOp *)ops[l];
        if (o->src < 0 || o->src > 31 || !(mask >> o->src & 1u)) {
            o->out = o->val;   // outside the mask / warp: undefined on the device; keep own
            continue;
        }
        o->out = ((ShflOp *)ops[o->src])->val;
    }
}

void *smem_dynamic() {
    Worker *w = t_worker;
    return w->dyn_smem;
}

// Refuse the whole launch from inside its first block (the statement that found out is the
// kernel's first, or a shared declaration before any global write).
[[noreturn]] static void refuse(cudaError_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(cudaError_t code, const char *fmt, ...) {
    VFORMAT(buf, fmt);
    Launch *L = t_worker->launch;
    {
        std::lock_guard<std::mutex> g(L->mu);
        if (!L->refused) {
            L->refuse_code = code;
            L->refuse_msg = buf;
            L->refused = true;
        }
    }
    Fiber *f = t_fiber;
    f->state = DONE;
    cuemu_switch(&f->sp, t_worker->sched_sp);
    __builtin_unreachable();
}

void *smem_static(int site, size_t bytes, size_t align) {
    Worker *w = t_worker;
    for (auto &s : w->sites)
        if (s.first == site) return w->static_smem + s.second;
    size_t off = (w->static_used + align - 1) / align * align;
    if (off + bytes > kStaticSmem)
        refuse(cudaErrorInvalidValue, "%zu bytes of static shared memory (> 48 KiB: ptxas refuses such a kernel)", off + bytes);
    if (off + bytes + w->launch->smem > kMaxSmem)
        refuse(cudaErrorInvalidValue, "%zu bytes of static + %zu of dynamic shared memory > 227 KiB", off + bytes, w->launch->smem);
    memset(w->static_smem + off, kPoison, bytes);
    w->static_used = off + bytes;
    w->sites.push_back({site, off});
    return w->static_smem + off;
}

void launch_bounds_check(int max_threads) {
    if ((int)t_worker->nthreads > max_threads)
        refuse(cudaErrorLaunchOutOfResources, "block of %u threads > __launch_bounds__(%d)", t_worker->nthreads, max_threads);
}

// ---- scheduling one block ----
static unsigned g_order = 0;   // 0 forward, 1 reverse, 2 random, 3 warp-serial
static unsigned long long g_seed = 1;
static void order_init() {
    const char *e = getenv("CUEMU_ORDER");
    if (!e || !*e || !strcmp(e, "forward")) g_order = 0;
    else if (!strcmp(e, "reverse")) g_order = 1;
    else if (!strncmp(e, "random", 6)) {
        g_order = 2;
        if (e[6] == ':') g_seed = strtoull(e + 7, nullptr, 10);
    } else if (!strcmp(e, "warps")) g_order = 3;
    else {
        diag("CUEMU_ORDER=%s: expected forward, reverse, random[:SEED] or warps", e);
        _exit(2);
    }
}

static std::string site(const Fiber &f) {
    char b[512];
    const char *fn = f.file ? strrchr(f.file, '/') : nullptr;
    snprintf(b, sizeof b, "%s:%d", fn ? fn + 1 : (f.file ? f.file : "?"), f.line);
    return b;
}
static const char *state_name(const Fiber &f) {
    return f.state == AT_BARRIER ? "__syncthreads" : f.state == AT_WARP ? f.op->what : f.state == DONE ? "exit" : "running";
}

[[noreturn]] static void report_stuck(Worker *w, const char *why) {
    // group consecutive threads in the same state at the same site
    std::string s;
    unsigned i = 0, n = w->nthreads;
    while (i < n) {
        unsigned j = i;
        const Fiber &a = w->fibers[i];
        while (j + 1 < n && w->fibers[j + 1].state == a.state &&
               (a.state == DONE || (w->fibers[j + 1].file == a.file && w->fibers[j + 1].line == a.line)))
            j++;
        char b[600];
        snprintf(b, sizeof b, "\n    threads %u-%u: %s%s%s", i, j, state_name(a), a.state == DONE ? "" : " at ",
                 a.state == DONE ? "" : site(a).c_str());
        s += b;
        i = j + 1;
    }
    abort_run("%s%s", why, s.c_str());
}

// Warp collectives whose lanes have all arrived: complete them. 1 if any did.
static bool resolve_warps(Worker *w) {
    bool any = false;
    const unsigned n = w->nthreads;
    for (unsigned w0 = 0; w0 < n; w0 += 32) {
        Fiber *lanes = &w->fibers[w0];
        const unsigned nl = n - w0 < 32 ? n - w0 : 32;
        int first = -1;
        for (unsigned l = 0; l < nl; l++)
            if (lanes[l].state == AT_WARP) { first = (int)l; break; }
        if (first < 0) continue;
        const Fiber &a = lanes[first];
        const unsigned mask = a.mask;
        bool ready = true;
        for (unsigned l = 0; l < 32; l++) {
            if (!(mask >> l & 1u)) continue;
            if (l >= nl)
                report_stuck(w, ("warp collective " + std::string(a.op->what) + " at " + site(a) +
                                 " names lanes beyond the block's last thread").c_str());
            const Fiber &b = lanes[l];
            if (b.state == DONE) {
                char m[512];
                snprintf(m, sizeof m, "lane %u of warp %u exited while lanes wait at %s (%s)", l, w0 / 32, site(a).c_str(), a.op->what);
                report_stuck(w, m);
            }
            if (b.state == AT_WARP && (b.file != a.file || b.line != a.line || b.op->complete != a.op->complete || b.mask != mask)) {
                char m[700];
                snprintf(m, sizeof m, "warp %u: lane %d waits at %s (%s, mask 0x%08x) but lane %u at %s (%s, mask 0x%08x)",
                         w0 / 32, first, site(a).c_str(), a.op->what, mask, l, site(b).c_str(), b.op->what, b.mask);
                report_stuck(w, m);
            }
            if (b.state != AT_WARP) ready = false;
        }
        if (!ready) continue;
        WarpOp *ops[32] = {};
        for (unsigned l = 0; l < 32; l++)
            if (mask >> l & 1u) ops[l] = lanes[l].op;
        a.op->complete(ops, mask);
        for (unsigned l = 0; l < 32; l++)
            if (mask >> l & 1u) lanes[l].state = READY;
        any = true;
    }
    return any;
}

static bool resolve_barrier(Worker *w) {
    const unsigned n = w->nthreads;
    int first = -1;
    unsigned done = 0;
    for (unsigned i = 0; i < n; i++) {
        const Fiber &f = w->fibers[i];
        if (f.state == DONE) { done++; continue; }
        if (f.state != AT_BARRIER) return false;
        if (first < 0) first = (int)i;
        else if (f.file != w->fibers[first].file || f.line != w->fibers[first].line) {
            char m[600];
            snprintf(m, sizeof m, "threads wait at different __syncthreads: thread %d at %s, thread %u at %s", first,
                     site(w->fibers[first]).c_str(), i, site(f).c_str());
            report_stuck(w, m);
        }
    }
    if (first < 0) return false;
    if (done) {
        char m[600];
        snprintf(m, sizeof m, "%u thread(s) exited while the others wait at __syncthreads (%s)", done, site(w->fibers[first]).c_str());
        report_stuck(w, m);
    }
    for (unsigned i = 0; i < n; i++) w->fibers[i].state = READY;
    cost::flush();   // the accesses before the barrier are warp instructions now
    return true;
}

static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return x;
}

static void run_block(Worker *w, Launch *L, unsigned long long blin) {
    const dim3 g = L->grid, b = L->block;
    const unsigned n = b.x * b.y * b.z;
    uint3 bid;
    bid.x = (unsigned)(blin % g.x);
    bid.y = (unsigned)(blin / g.x % g.y);
    bid.z = (unsigned)(blin / ((unsigned long long)g.x * g.y));
    w->launch = L;
    w->nthreads = n;
    w->block_linear = blin;
    w->static_used = 0;
    w->sites.clear();
    if (L->smem) memset(w->dyn_smem, kPoison, L->smem);
    cost::block_begin(n, w->static_smem, w->dyn_smem, kMaxSmem);
    for (unsigned i = 0; i < n; i++) {
        Fiber *f = &w->fibers[i];
        f->pos.tid.x = i % b.x;
        f->pos.tid.y = i / b.x % b.y;
        f->pos.tid.z = i / (b.x * b.y);
        f->pos.bid = bid;
        f->pos.bdim = b;
        f->pos.gdim = g;
        f->state = READY;
        f->linear = i;
        f->lane = i % 32;
        f->warp = i / 32;
        f->file = nullptr;
        f->line = 0;
        fiber_prepare(w, f, i);
    }
    std::vector<unsigned> &order = w->order;
    unsigned long long round = 0;
    // Run one round over `order`: the first ready fiber, which hands over to the next ready
    // one (hand_over) until the round is through. 0 if no fiber was ready.
    auto run_round = [&]() {
        for (unsigned k = 0; k < order.size(); k++) {
            Fiber *f = &w->fibers[order[k]];
            if (f->state != READY) continue;
            w->pos = k;
            t_fiber = f;
            t_pos = &f->pos;
            cuemu_switch(&w->sched_sp, f->sp);
            t_fiber = nullptr;
            t_pos = nullptr;
            return true;
        }
        return false;
    };
    for (;;) {
        if (g_order == 3) {
            // warp-serial: each warp runs alone, its collectives completed as soon as its
            // lanes meet, until every lane waits at a block barrier (or is done); then the
            // next warp. One warp gets as far ahead of the others as a barrier allows, which
            // shows a shared buffer overwritten while another warp still reads it (a missing
            // barrier at the top of a tile loop) that lockstep rounds hide.
            for (unsigned w0 = 0; w0 < n; w0 += 32) {
                order.clear();
                for (unsigned l = w0; l < n && l < w0 + 32; l++) order.push_back(l);
                for (;;) {
                    bool ran = run_round();
                    if (L->refused) return;
                    if (!resolve_warps(w) && !ran) break;
                }
            }
        } else {
            order.resize(n);
            for (unsigned i = 0; i < n; i++) order[i] = g_order == 1 ? n - 1 - i : i;
            if (g_order == 2) {   // a new permutation each round
                uint64_t s = mix(g_seed ^ mix(blin * 0x9e3779b97f4a7c15ULL + round));
                for (unsigned i = n - 1; i > 0; i--) {
                    s = mix(s + i);
                    std::swap(order[i], order[s % (i + 1)]);
                }
            }
            round++;
            run_round();
            if (L->refused) return;
        }
        unsigned done = 0;
        for (unsigned i = 0; i < n; i++) done += w->fibers[i].state == DONE;
        if (done == n) { cost::block_end(); return; }
        if (resolve_warps(w)) continue;
        if (resolve_barrier(w)) continue;
        report_stuck(w, "no thread can go on (deadlock)");
    }
}

// ---- the worker pool ----
struct Pool {
    std::vector<std::thread> threads;
    std::mutex mu;
    std::condition_variable cv, done_cv;
    Launch *job = nullptr;
    unsigned long long nblocks = 0;
    std::atomic<unsigned long long> next{0};
    unsigned active = 0;
    unsigned long long generation = 0;
};
static Pool *g_pool;
static Worker *g_host_worker;
static int g_nthreads = 1;

static void pool_thread(int) {
    Worker *w = new Worker();
    t_worker = w;
    worker_init(w);
    unsigned long long seen = 0;
    for (;;) {
        Launch *L;
        {
            std::unique_lock<std::mutex> lk(g_pool->mu);
            g_pool->cv.wait(lk, [&] { return g_pool->generation != seen; });
            seen = g_pool->generation;
            L = g_pool->job;
        }
        for (;;) {
            unsigned long long i = g_pool->next.fetch_add(1);
            if (i >= g_pool->nblocks) break;
            run_block(w, L, i);
        }
        std::lock_guard<std::mutex> lk(g_pool->mu);
        if (--g_pool->active == 0) g_pool->done_cv.notify_all();
    }
}

static void runtime_init() {
    if (g_host_worker) return;
    order_init();
    cost::init();
    g_host_worker = new Worker();
    t_worker = g_host_worker;
    worker_init(g_host_worker);
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    g_nthreads = env_int("CUEMU_THREADS", nc > 0 ? (int)nc : 1);
    if (g_nthreads < 1) g_nthreads = 1;
    if (g_nthreads > 1) {
        g_pool = new Pool();
        for (int i = 1; i < g_nthreads; i++) {
            g_pool->threads.emplace_back(pool_thread, i);
            g_pool->threads.back().detach();
        }
    }
}

static std::map<const void *, int> g_dyn_limit;   // cudaFuncSetAttribute(MaxDynamicSharedMemorySize)

cudaError_t func_set_attribute(const void *key, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > kMaxSmem) {
            diag("cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): above the device's %zu", value, kMaxSmem);
            return set_error(cudaErrorInvalidValue);
        }
        g_dyn_limit[key] = value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return set_error(cudaErrorInvalidValue);
}

bool kernel_arg_ok(const void *p, const char *name, int index, const char *file, int line) {
    if (!p || is_device_ptr(p)) return true;
    // on a device the kernel faults when it dereferences it (a sticky illegal-address error)
    diag("launch of %s at %s:%d: argument %d (%p) is not device memory (a host pointer passed to a kernel)", name, file,
         line, index, p);
    _exit(86);
}

static cudaError_t refuse_launch(const LaunchCfg &c, const char *name, const char *file, int line, cudaError_t e,
                                 const char *why) {
    diag("launch of %s at %s:%d, grid (%u,%u,%u), block (%u,%u,%u), %zu bytes of dynamic shared memory: %s: %s", name,
         file, line, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.smem, why, cudaGetErrorString(e));
    return set_error(e);
}

void launch_impl(const LaunchCfg &c, const char *name, const char *file, int line, const void *key, void (*run)(void *),
                 void *pack) {
    runtime_init();
    const dim3 g = c.grid, b = c.block;
    const unsigned long long nthreads = (unsigned long long)b.x * b.y * b.z;
    if (device_count() == 0) { set_error(cudaErrorNoDevice); return; }
    if (!b.x || !b.y || !b.z || b.x > 1024 || b.y > 1024 || b.z > 64 || nthreads > 1024) {
        refuse_launch(c, name, file, line, cudaErrorInvalidConfiguration, "block dimensions");
        return;
    }
    if (!g.x || !g.y || !g.z || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        refuse_launch(c, name, file, line, cudaErrorInvalidConfiguration, "grid dimensions");
        return;
    }
    auto lim = g_dyn_limit.find(key);
    const size_t dyn_max = lim == g_dyn_limit.end() ? kStaticSmem : (size_t)lim->second;
    if (c.smem > dyn_max) {
        refuse_launch(c, name, file, line, cudaErrorInvalidValue,
                      lim == g_dyn_limit.end() ? "dynamic shared memory above 48 KiB without cudaFuncSetAttribute"
                                               : "dynamic shared memory above the kernel's cudaFuncSetAttribute limit");
        return;
    }
    bool ok;
    CUstream_st *s = stream_of(c.stream, &ok);
    if (!ok) { refuse_launch(c, name, file, line, cudaErrorInvalidResourceHandle, "unknown stream"); return; }
    stream_drain(s, true);
    Launch L;
    L.name = name;
    L.file = file;
    L.line = line;
    L.run = run;
    L.pack = pack;
    L.grid = g;
    L.block = b;
    L.smem = c.smem;
    const unsigned long long nblocks = (unsigned long long)g.x * g.y * g.z;
    Worker *hw = g_host_worker;
    if (cost::g_on) {
        std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
        {
            std::lock_guard<std::mutex> gm(g_mem_mu);
            for (auto &kv : g_allocs) ranges.push_back({(uintptr_t)kv.second.base, (uintptr_t)kv.second.base + kv.second.usable});
        }
        cost::launch_begin(ranges);
    }
    // Block 0 alone first: a refusal found inside it (launch bounds, shared memory) comes
    // before any block has written anything.
    run_block(hw, &L, 0);
    if (L.refused) {
        refuse_launch(c, name, file, line, L.refuse_code, L.refuse_msg.c_str());
        return;
    }
    if (nblocks > 1) {
        if (g_pool && nblocks > 2) {
            {
                std::lock_guard<std::mutex> lk(g_pool->mu);
                g_pool->job = &L;
                g_pool->nblocks = nblocks;
                g_pool->next = 1;
                g_pool->active = (unsigned)g_nthreads - 1;
                g_pool->generation++;
            }
            g_pool->cv.notify_all();
            for (;;) {
                unsigned long long i = g_pool->next.fetch_add(1);
                if (i >= nblocks) break;
                run_block(hw, &L, i);
            }
            std::unique_lock<std::mutex> lk(g_pool->mu);
            g_pool->done_cv.wait(lk, [] { return g_pool->active == 0; });
        } else {
            for (unsigned long long i = 1; i < nblocks; i++) run_block(hw, &L, i);
        }
    }
    hw->launch = nullptr;
    cost::launch_end(name, (unsigned)nthreads, c.smem);
    check_canaries(name);
}

// ---- faults: an access to a guard page, with the kernel, block and thread ----
static void on_fault(int sig, siginfo_t *si, void *) {
    uintptr_t a = (uintptr_t)si->si_addr;
    char buf[1024];
    int n = 0;
    Worker *w = t_worker;
    Fiber *f = t_fiber;
    if (w && w->launch && f)
        n = snprintf(buf, sizeof buf, "cuemu: illegal memory access (%s) in kernel %s (launched at %s:%d), block (%u,%u,%u), thread (%u,%u,%u): address %p",
                     sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", w->launch->name, w->launch->file, w->launch->line,
                     f->pos.bid.x, f->pos.bid.y, f->pos.bid.z, f->pos.tid.x, f->pos.tid.y, f->pos.tid.z, (void *)a);
    else n = snprintf(buf, sizeof buf, "cuemu: illegal memory access (signal %d) outside a kernel: address %p", sig, (void *)a);
    const Alloc *al = alloc_of_guard(a);   // no lock: the process is going down
    if (al && n > 0 && n < (int)sizeof buf) {
        long off = (long)(a - (uintptr_t)al->base);
        n += snprintf(buf + n, sizeof buf - n, ", %ld bytes %s allocation #%d of %zu bytes", off < 0 ? -off : off - (long)al->size,
                      off < 0 ? "before the start of" : "past the end of", al->id, al->size);
    } else if (w && a >= (uintptr_t)w->stacks && a < (uintptr_t)w->stacks + (size_t)kMaxThreads * kStack && n > 0 &&
               n < (int)sizeof buf) {
        n += snprintf(buf + n, sizeof buf - n, " (a fiber stack overflowed its %zu KiB)", kStack >> 10);
    }
    if (n > 0 && n < (int)sizeof buf - 1) buf[n++] = '\n';
    if (write(2, buf, n > 0 ? (size_t)n : 0) < 0) {}
    _exit(86);
}
static void install_fault_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigaction(SIGSEGV, &sa, nullptr);
        sigaction(SIGBUS, &sa, nullptr);
    });
}

}   // namespace cuemu
