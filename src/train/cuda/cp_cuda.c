// cp_cuda.c: see cp_cuda.h. The ids travel over MPI from each group's member 0; the group's
// communicator itself is NCCL's (kernels/cuda/cp_nccl.cu, through cuda_model_create_cp).
#include "train/cuda/cp_cuda.h"

#include <stdio.h>
#include <string.h>

#include "dist/dist.h"
#include "dist/dist_cp.h"
#include "util/common.h"

CudaModel *cp_cuda_model_create(const TrainCore *tc, int max_B, int max_T, int bf16, int recompute, size_t opt_lo,
                                size_t opt_hi, char *err, size_t errlen) {
    const int C = tc->cp, groups = tc->world / C, member = dist_cp_member();
    if (!cuda_nccl_built()) {
        snprintf(err, errlen, "dist.context_parallel %d with train.backend=cuda needs NCCL (this binary was built "
                              "without it)", C);
        return NULL;
    }
    unsigned char id[128], mine[128];
    memset(mine, 0, sizeof mine);
    if (member == 0 && cuda_nccl_unique_id(mine, sizeof mine) < 0) die("NCCL: ncclGetUniqueId failed");
    for (int gi = 0; gi < groups; gi++) {   // every rank takes part in every group's broadcast
        memcpy(id, mine, sizeof id);
        dist_bcast(id, sizeof id, gi * C);
        if (gi == tc->rank / C) memcpy(mine, id, sizeof id);
    }
    const CudaCP cp = {C, member, tc->cp_head_stride > 0 ? tc->cp_head_stride : 1, mine};
    return cuda_model_create_cp(&tc->model->cfg, &tc->model->table, max_B, max_T, bf16, recompute, opt_lo, opt_hi, &cp,
                                err, errlen);
}
