// test_cuemu.cu: the device semantics the CUDA tests rely on, checked where they run.
// On any device (a GPU, or the emulation of tests/cuemu):
//   - launch configurations a device refuses, with the runtime's error code: 1025 threads
//     per block and a grid y of 65536 (cudaErrorInvalidConfiguration), 64 KiB of dynamic
//     shared memory without cudaFuncSetAttribute (cudaErrorInvalidValue), a block over the
//     kernel's __launch_bounds__ (cudaErrorLaunchOutOfResources); the same launches
//     accepted once legal, and nothing written by a refused one;
//   - shuffles, block barriers and dynamic shared memory give the right values.
// Under the emulation only (a GPU would hang, race or fault instead of reporting), each
// in a child process that must die with the emulation's exit status (86) and a message
// naming the kernel and the source line:
//   - two barriers at different lines reached by different threads of a block,
//   - a thread that exits while the others wait at __syncthreads,
//   - an access past the end of a cudaMalloc (guard page),
//   - a write into the bytes before an allocation (canaries),
//   - a host pointer passed to a kernel;
// and the bug a missing __syncwarp hides on a GPU is visible: a lane reads shared memory
// another lane of its warp has not written yet (NaN poison), and __syncwarp fixes it.
// Without a device: SKIP, exit 0.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

extern "C" {
#include "util/blas_core.h"
}
#include "check.h"
#include "kernels/cuda/common.cuh"


__global__ void k_fill(float *x, float v) { x[blockIdx.y * gridDim.x * blockDim.x + blockIdx.x * blockDim.x + threadIdx.x] = v; }
__global__ void __launch_bounds__(128) k_bounded(float *x) { x[threadIdx.x] = 2.0f; }
__global__ void k_dyn(float *x) {
    extern __shared__ float sm[];
    sm[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    x[threadIdx.x] = sm[(threadIdx.x + 1) % blockDim.x];
}
__global__ void k_shfl(float *x) {
    float v = (float)threadIdx.x;
    v += __shfl_xor_sync(0xffffffffu, v, 1);   // lanes 2i, 2i+1: 4i + 1
    x[threadIdx.x] = v;
}
// each lane writes its slot, then reads its neighbour's
__global__ void k_warp_exchange(float *x, int sync) {
    __shared__ float s[32];
    s[threadIdx.x] = (float)threadIdx.x;
    if (sync) __syncwarp();
    x[threadIdx.x] = s[(threadIdx.x + 1) % 32];
}
__global__ void k_two_barriers(float *x) {
    if (threadIdx.x < 32) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    x[threadIdx.x] = 0.0f;
}
__global__ void k_early_exit(float *x) {
    if (threadIdx.x == 5) return;
    __syncthreads();
    x[threadIdx.x] = 1.0f;
}
__global__ void k_oob(float *x, int n) { x[n + 100] = 1.0f; }   // 304 bytes past the 256-rounded end: the guard page
__global__ void k_underflow(float *x) { x[-3] = 1.0f; }

static float *dev(size_t n) {
    float *p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
    CUDA_CHECK(cudaMemset(p, 0, n * sizeof(float)));
    return p;
}
static std::vector<float> host(const float *d, size_t n);

// A launch a device must refuse: the error code, and nothing written.
static void refused(const char *what, cudaError_t want, float *x, size_t n) {
    cudaError_t e = cudaGetLastError();
    float h[64];
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, x, sizeof h < n * 4 ? sizeof h : n * 4, cudaMemcpyDeviceToHost));
    int clean = 1;
    for (size_t i = 0; i < 64 && i < n; i++) clean &= h[i] == 0.0f;
    printf("%-58s -> %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
    CHECK(e == want, "%s: %s, want %s", what, cudaGetErrorName(e), cudaGetErrorName(want));
    CHECK(clean, "%s: a refused launch wrote", what);
}

#ifdef CUEMU
// Run fn in a child: it must exit with status 86 and print every needle.
static void dies(const char *what, void (*fn)(), const char *n1, const char *n2) {
    int pipefd[2];
    if (pipe(pipefd)) { perror("pipe"); exit(1); }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        fn();
        cudaDeviceSynchronize();
        _exit(0);
    }
    close(pipefd[1]);
    char buf[8192];
    size_t len = 0;
    ssize_t r;
    while ((r = read(pipefd[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)r;
    buf[len] = 0;
    close(pipefd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    char first[300] = "";
    sscanf(buf, "%299[^\n]", first);
    printf("%-58s -> exit %d: %s\n", what, code, first);
    CHECK(code == 86, "%s: exit %d, want 86", what, code);
    CHECK(strstr(buf, n1) && (!n2 || strstr(buf, n2)), "%s: message lacks '%s'%s%s: %s", what, n1, n2 ? " / " : "", n2 ? n2 : "", buf);
}
static void run_two_barriers() { float *x = dev(64); k_two_barriers<<<1, 64>>>(x); }
static void run_early_exit() { float *x = dev(64); k_early_exit<<<1, 64>>>(x); }
static void run_oob() { float *x = dev(1000); k_oob<<<1, 1>>>(x, 1000); }
static void run_underflow() { float *x = dev(900); k_underflow<<<1, 1>>>(x); cudaFree(x); }   // 3600 bytes: 256 of pad before
static void run_host_ptr() {
    static float h[64];
    k_fill<<<1, 32>>>(h, 1.0f);
    CUDA_CHECK(cudaGetLastError());
}
#endif

static std::vector<float> host(const float *d, size_t n) {
    std::vector<float> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return h;
}

int main(int argc, char **argv) {
    (void)argc;
    blas_core_init(argv);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
    float *x = dev(1 << 16);
    // ---- launches a device refuses, then the legal ones
    k_fill<<<1, 1025>>>(x, 1.0f);
    refused("1025 threads per block", cudaErrorInvalidConfiguration, x, 1 << 16);
    k_fill<<<dim3(1, 65536), 1>>>(x, 1.0f);
    refused("grid y = 65536", cudaErrorInvalidConfiguration, x, 1 << 16);
    k_dyn<<<1, 64, 64 << 10>>>(x);
    refused("64 KiB dynamic shared memory, no cudaFuncSetAttribute", cudaErrorInvalidValue, x, 1 << 16);
    k_bounded<<<1, 256>>>(x);
    refused("256 threads into __launch_bounds__(128)", cudaErrorLaunchOutOfResources, x, 1 << 16);
    CUDA_CHECK(cudaFuncSetAttribute(k_dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10));
    k_dyn<<<1, 64, 64 << 10>>>(x);
    CUDA_CHECK(cudaGetLastError());
    std::vector<float> h = host(x, 64);
    int ok = 1;
    for (int i = 0; i < 64; i++) ok &= h[i] == (float)((i + 1) % 64);
    CHECK(ok, "dynamic shared memory + __syncthreads: wrong values");
    k_bounded<<<1, 128>>>(x);
    CUDA_CHECK(cudaGetLastError());
    k_shfl<<<1, 64>>>(x);
    CUDA_CHECK(cudaGetLastError());
    h = host(x, 64);
    ok = 1;
    for (int i = 0; i < 64; i++) ok &= h[i] == (float)(2 * (i & ~1) + 1);
    CHECK(ok, "__shfl_xor_sync: wrong values");
    k_warp_exchange<<<1, 32>>>(x, 1);
    h = host(x, 32);
    ok = 1;
    for (int i = 0; i < 32; i++) ok &= h[i] == (float)((i + 1) % 32);
    CHECK(ok, "a warp exchange through shared memory with __syncwarp: wrong values");
    printf("legal launches: values right (dynamic shared memory, barriers, shuffles, warp exchange)\n");
#ifdef CUEMU
    // ---- what the emulation reports where a GPU would hang, race or fault
    k_warp_exchange<<<1, 32>>>(x, 0);
    h = host(x, 32);
    int stale = 0;
    for (int i = 0; i < 32; i++) stale += h[i] != (float)((i + 1) % 32);
    printf("%-58s -> %d of 32 lanes read a slot not yet written\n", "warp exchange without __syncwarp", stale);
    CHECK(stale > 0, "a missing __syncwarp went unseen");
    dies("two different __syncthreads", run_two_barriers, "k_two_barriers", "different __syncthreads");
    dies("a thread exits while the others wait", run_early_exit, "k_early_exit", "exited while the others wait");
    dies("a store past the end of an allocation", run_oob, "k_oob", "past the end of allocation");
    dies("a store before the start of an allocation", run_underflow, "out-of-bounds write", "k_underflow");
    dies("a host pointer passed to a kernel", run_host_ptr, "k_fill", "not device memory");
#endif
    cudaFree(x);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_cuemu: all checks passed\n");
    return 0;
}
