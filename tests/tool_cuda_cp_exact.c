// tool_cuda_cp_exact.c: context parallelism on the CUDA backend against the whole instance
// (tests/test_cuda_cp.sh). Run as `mpirun -np C tool_cuda_cp_exact T B HEAD_STRIDE PREC TOL`
// with one device per rank (CUEMU_DEVICES=C emulated): every rank builds
// tool_cp_exact's model (olmo3-tiny, window 100 < T, full attention every 2nd layer,
// document mask on) and instances (documents of 1..300 tokens, masked targets). Rank 0
// runs the whole instance on its device (C = 1, cuda_model_create); every rank runs its
// member's part on its device (cuda_model_create_cp: SIMT attention_*_at, K/V over NCCL
// send/recv) twice, and in fp32 also on the CPU (graph_forward_backward_cp over MPI). The
// members' gradients are summed over MPI; the loss sums too. Printed: the difference
// (fp32: max |a - ref| / max |ref|, bf16: L2-relative; per tensor for the gradients, the
// worst) of the logits (each member's rows
// against the same rows of the whole run) and gradients, and the relative difference of ce
// and z, of CUDA C against CUDA C = 1, and (fp32) of CUDA C against the CPU's C; whether the
// two CUDA C runs are bitwise equal; and, for information, CUDA's C = 1 against the CPU's
// C = 1 (the same sums in other orders; in bf16 also bf16's rounding against fp32). Exit 1
// beyond the tolerances or if the two runs differ; 2 on bad arguments. The tolerances:
// fp32, derived: the loss sums TOL; the logits and gradients 1e-5 of max |ref| in every
// element (two orders of an n-term fp32 sum differ by about 2 sqrt(n) u sum|a_i b_i|,
// u = 2^-24; the longest sums here, the LM head's 1024 padded vocabulary rows,
// 2 sqrt(1024) u = 3.8e-6; test_parity.sh's 1e-5). bf16: each run is within its bf16
// rounding error E of the exact (fp32) numbers, so two bf16 runs of the same step are within
// 2E of each other (the triangle inequality); E is measured on the same step as CUDA's
// C = 1 against the CPU's fp32 C = 1 (L2-relative, as each of the logits, the gradients and
// the loss sums), and the tolerance is max(TOL, 2E). (No bound from a count of roundings
// holds there: the device keeps activations in bf16, so a reordered fp32 value can round to
// another bf16 neighbour at nearly every op.)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp_case.h"
#include "dist/dist.h"
#include "dist/dist_cp.h"
#include "model/graph.h"
#include "model/model.h"
#include "util/blas_core.h"
#include "util/common.h"
#ifdef OLMO_CUDA
#include "train/cuda/cuda_model.h"

// The measure of a tolerance: in fp32 max |a - ref| / max |ref| (every element within the
// bound), in bf16 ||a - ref||_2 / ||ref||_2 (that of the measured bf16 error).
static int g_rms;
static double rel(const float *a, const float *ref, size_t n) {
    double d = 0, m = 0, d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)a[i] - ref[i]);
        d = e > d ? e : d;
        m = fabs(ref[i]) > m ? fabs(ref[i]) : m;
        d2 += e * e;
        r2 += (double)ref[i] * ref[i];
    }
    if (g_rms) return r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    return m > 0 ? d / m : d;
}

// The members' gradients summed (every rank receives the sum; MPI's order, for measuring).
static void sum_over_members(float *g, size_t n, int C) {
    float *all = xmalloc(sizeof(float) * n);
    memcpy(all, g, sizeof(float) * n);
    const int rank = dist_rank();
    for (int r = 0; r < C; r++) {   // member r's gradient to everyone, added in member order
        float *b = xmalloc(sizeof(float) * n);
        if (r == rank) memcpy(b, all, sizeof(float) * n);
        dist_bcast(b, sizeof(float) * n, r);
        if (r == 0) memcpy(g, b, sizeof(float) * n);
        else
            for (size_t i = 0; i < n; i++) g[i] += b[i];
        free(b);
    }
    free(all);
}

// One forward + backward of model cm into grad (downloaded) and logits (host).
static LossSums cuda_run(CudaModel *cm, const float *params, const int32_t *in, const int32_t *tg, int B, int T,
                         float z, float inv, float *grad, float *logits) {
    cuda_upload_params(cm, params);
    cuda_grad_reset(cm);
    LossSums s = cuda_forward_backward(cm, in, tg, B, T, z, inv, 1, logits, NULL);
    cuda_grad_push(cm);
    cuda_grad_finish(cm);
    cuda_grad_download(cm, grad);
    return s;
}
#endif

int main(int argc, char **argv) {
    blas_core_init(argv);
#ifndef OLMO_CUDA
    (void)argc;
    fprintf(stderr, "tool_cuda_cp_exact: built without CUDA\n");
    return 2;
#else
    if (argc != 6) {
        fprintf(stderr, "usage: mpirun -np C tool_cuda_cp_exact T B HEAD_STRIDE fp32|bf16 TOL\n");
        return 2;
    }
    const int T = atoi(argv[1]), B = atoi(argv[2]), hs = atoi(argv[3]), bf16 = !strcmp(argv[4], "bf16");
    g_rms = bf16;
    const double tol = atof(argv[5]);
    dist_init();
    const int C = dist_world(), rank = dist_rank();
    if (C < 2 || T % (2 * C) || dist_cp_init(C)) {
        fprintf(stderr, "tool_cuda_cp_exact: needs mpirun -np C >= 2 with T %% 2C == 0 (T=%d, C=%d)\n", T, C);
        dist_exit(2);
    }
    cuda_select_device(rank);
    ModelConfig cfg = cp_case_config();
    Model m;
    model_create(&m, &cfg, B, T);
    param_init(&m.table, m.params, 1234);
    const size_t N = (size_t)B * T, n = m.table.total, Vp = m.cfg.padded_vocab;
    int32_t *in = xmalloc(sizeof(int32_t) * N), *tg = xmalloc(sizeof(int32_t) * N);
    const long count = cp_case_instances(B, T, in, tg);
    const float z = 1e-4f, inv = 1.0f / (float)count;
    char err[512];
    // the whole instance on rank 0's device, sent to every member
    float *g1 = xcalloc(n, sizeof(float)), *lg1 = xmalloc(sizeof(float) * N * Vp);
    double s1[2] = {0, 0}, c1_cpu[3] = {0, 0, 0};
    if (rank == 0) {
        CudaModel *ref = cuda_model_create(&m.cfg, &m.table, B, T, bf16, 0, 0, n, err, sizeof err);
        if (!ref) die("tool_cuda_cp_exact: %s", err);
        LossSums r = cuda_run(ref, m.params, in, tg, B, T, z, inv, g1, lg1);
        s1[0] = r.ce_sum, s1[1] = r.z_sum;
        cuda_model_destroy(ref);
        // CUDA's C = 1 against the CPU's C = 1: two orders of the same sums (its GEMMs and
        // flash tiles against OpenBLAS's blocks), and in bf16 bf16's error E (the header).
        float *gh = xcalloc(n, sizeof(float)), *lgh = xmalloc(sizeof(float) * N * Vp);
        LossSums h = model_forward_backward(&m, in, tg, B, T, z, inv, gh, lgh, NULL);
        c1_cpu[0] = rel(lg1, lgh, N * Vp);
        c1_cpu[2] = fabs(s1[0] - h.ce_sum) / fabs(h.ce_sum);
        for (int i = 0; i < m.table.n; i++) {
            const double d = rel(g1 + m.table.p[i].offset, gh + m.table.p[i].offset, m.table.p[i].numel);
            c1_cpu[1] = d > c1_cpu[1] ? d : c1_cpu[1];
        }
        free(gh), free(lgh);
    }
    dist_bcast(c1_cpu, sizeof c1_cpu, 0);
    // the tolerances of the header
    const double tol_l = bf16 ? fmax(tol, 2 * c1_cpu[0]) : 1e-5, tol_g = bf16 ? fmax(tol, 2 * c1_cpu[1]) : 1e-5;
    const double tol_s = bf16 ? fmax(tol, 2 * c1_cpu[2]) : tol;
    dist_bcast(g1, sizeof(float) * n, 0);
    dist_bcast(lg1, sizeof(float) * N * Vp, 0);
    dist_bcast(s1, sizeof s1, 0);
    // this member's part on its device, twice (bitwise run to run)
    unsigned char id[128] = {0};
    if (rank == 0 && cuda_nccl_unique_id(id, sizeof id) < 0) die("tool_cuda_cp_exact: ncclGetUniqueId failed");
    dist_bcast(id, sizeof id, 0);
    const CudaCP cp = {C, dist_cp_member(), hs, id};
    CudaModel *cm = cuda_model_create_cp(&m.cfg, &m.table, B, T, bf16, 0, 0, n, &cp, err, sizeof err);
    if (!cm) die("tool_cuda_cp_exact: %s", err);
    float *gc = xcalloc(n, sizeof(float)), *lgc = xmalloc(sizeof(float) * N / C * Vp);
    float *gc2 = xcalloc(n, sizeof(float)), *lgc2 = xmalloc(sizeof(float) * N / C * Vp);
    LossSums sc = cuda_run(cm, m.params, in, tg, B, T, z, inv, gc, lgc);
    cuda_run(cm, m.params, in, tg, B, T, z, inv, gc2, lgc2);
    int same = !memcmp(gc, gc2, sizeof(float) * n) && !memcmp(lgc, lgc2, sizeof(float) * N / C * Vp);
    cuda_model_destroy(cm);
    // the CPU's context parallelism (fp32): the same member's part over MPI
    float *gp = xcalloc(n, sizeof(float)), *lgp = xmalloc(sizeof(float) * N / C * Vp);
    if (!bf16) {
        Graph g;
        const GraphCP gcp = {C, dist_cp_member(), T, hs, NULL};
        if (graph_init_cp(&g, model_backend(&m), &m.cfg, &m.table, B, 0, &gcp)) die("tool_cuda_cp_exact: out of memory");
        GraphParams p = {m.params, &m.w, gp, 0, NULL, NULL, NULL, NULL};
        graph_forward_backward_cp(&g, &p, in, tg, B, z, inv, lgp, NULL);
        graph_free(&g);
    }
    // logits: this member's rows against the same rows of the whole run (and of the CPU's part)
    int st[2];
    const int ch = T / (2 * C);
    dist_cp_chunk_starts(T, C, dist_cp_member(), st);
    double d_logits = 0, p_logits = 0;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 2; c++) {
            const size_t lo = ((size_t)b * 2 * ch + (size_t)c * ch) * Vp;
            double d = rel(lgc + lo, lg1 + ((size_t)b * T + st[c]) * Vp, (size_t)ch * Vp);
            d_logits = d > d_logits ? d : d_logits;
            d = bf16 ? 0 : rel(lgc + lo, lgp + lo, (size_t)ch * Vp);
            p_logits = d > p_logits ? d : p_logits;
        }
    sum_over_members(gc, n, C);
    if (!bf16) sum_over_members(gp, n, C);
    double mine[2] = {sc.ce_sum, sc.z_sum}, *all = xmalloc(sizeof(double) * 2 * C), ce = 0, zs = 0;
    dist_allgather_doubles(mine, 2, all);
    for (int r = 0; r < C; r++) ce += all[2 * r], zs += all[2 * r + 1];
    double d_grad = 0, p_grad = 0;
    const char *worst = "";
    for (int i = 0; i < m.table.n; i++) {
        const ParamInfo *pi = &m.table.p[i];
        double d = rel(gc + pi->offset, g1 + pi->offset, pi->numel);
        if (d >= d_grad) d_grad = d, worst = pi->name;
        d = bf16 ? 0 : rel(gc + pi->offset, gp + pi->offset, pi->numel);
        p_grad = d > p_grad ? d : p_grad;
    }
    double mx[6] = {d_logits, fabs(ce - s1[0]) / fabs(s1[0]), fabs(zs - s1[1]) / fabs(s1[1]), d_grad, p_logits, p_grad};
    double *allmx = xmalloc(sizeof(double) * 6 * C);
    dist_allgather_doubles(mx, 6, allmx);
    for (int r = 1; r < C; r++)
        for (int k = 0; k < 6; k++) mx[k] = allmx[6 * r + k] > mx[k] ? allmx[6 * r + k] : mx[k];
    int sames = 0;
    double fs = same, *alls = xmalloc(sizeof(double) * C);
    dist_allgather_doubles(&fs, 1, alls);
    for (int r = 0; r < C; r++) sames += alls[r] != 0;
    int fail = 0;
    if (rank == 0) {
        printf("cuda C=%d T=%d B=%d head_stride=%d %s: vs cuda C=1: logits %.3g, ce %.3g, z %.3g, gradients %.3g "
               "(worst %s); cuda C=1 vs cpu fp32 C=1: logits %.3g, gradients %.3g, ce %.3g; tolerances: "
               "logits %.3g, gradients %.3g, loss sums %.3g", C, T, B, hs, bf16 ? "bf16" : "fp32", mx[0], mx[1], mx[2],
               mx[3], worst, c1_cpu[0], c1_cpu[1], c1_cpu[2], tol_l, tol_g, tol_s);
        if (!bf16) printf(" | vs cpu C=%d: logits %.3g, gradients %.3g (the same tolerances)", C, mx[4], mx[5]);
        printf(" | two runs %s\n", sames == C ? "bitwise equal" : "DIFFER");
        const double lim[4] = {tol_l, tol_s, tol_s, tol_g};
        for (int k = 0; k < 4; k++) fail |= !(mx[k] <= lim[k]);
        if (!bf16) fail |= !(mx[4] <= tol_l) || !(mx[5] <= tol_g);
        fail |= sames != C;
        if (fail) printf("FAIL: beyond the tolerances\n");
    }
    dist_bcast(&fail, sizeof fail, 0);
    model_destroy(&m);
    free(in), free(tg), free(g1), free(lg1), free(gc), free(lgc), free(gc2), free(lgc2), free(gp), free(lgp),
        free(all), free(allmx), free(alls);
    dist_finalize();
    return fail;
#endif
}
