// ops_nocuda.c: ops_cuda_create's answer in a binary built without the CUDA backend (the
// Makefile builds files named *_nocuda.c only with CUDA=0, and *_cuda.c only with CUDA=1).
#include <stdio.h>

#include "kernels/ops.h"

OpsBackend *ops_cuda_create(DType act, char *err, size_t errlen) {
    (void)act;
    snprintf(err, errlen, "this binary was built without the CUDA backend");
    return NULL;
}
