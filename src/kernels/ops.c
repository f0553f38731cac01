// ops.c: what kernels/ops.h defines for every build: type names, ops_destroy, and the
// answer of ops_cuda_create in a binary built without the CUDA backend.
#include "kernels/ops.h"

#include <stdio.h>

const char *dtype_name(DType t) { return t == DT_BF16 ? "bf16" : "fp32"; }

void ops_destroy(OpsBackend *be) {
    if (be) be->ops->destroy(be);
}

#ifndef OLMO_CUDA
OpsBackend *ops_cuda_create(DType act, char *err, size_t errlen) {
    (void)act;
    snprintf(err, errlen, "this binary was built without the CUDA backend");
    return NULL;
}
#endif
