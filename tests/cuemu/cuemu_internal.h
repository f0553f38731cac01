// cuemu_internal.h: what the parts of the emulated device share (runtime.cpp, wmma.cpp,
// cublaslt.cpp, nccl.cpp); not seen by the project's code.
#pragma once
#include <stdarg.h>

#include <string>

#include "cuda_runtime.h"

namespace cuemu {
struct Alloc;
// Work queued on a stream that completes later (NCCL's non-blocking transfers): progress()
// advances it; with wait it blocks until done. true once complete.
struct PendingOp {
    virtual ~PendingOp() {}
    virtual bool progress(bool wait) = 0;
};
void stream_add_pending(cudaStream_t st, PendingOp *op);
bool is_device_ptr(const void *p);
bool is_device_range(const void *p, size_t bytes, const Alloc **al);
cudaError_t set_error(cudaError_t e);
std::string vformat(const char *fmt, va_list ap);   // vsnprintf into a string
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void check_canaries(const char *after);
int current_device();
}   // namespace cuemu
