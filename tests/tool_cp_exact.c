// tool_cp_exact.c: context parallelism against the whole instance (tests/test_cp.sh). Run
// as `mpirun -np C build/tests/tool_cp_exact T B HEAD_STRIDE YARN TOL`: every rank builds the
// same small model (olmo3-tiny, window 100 < T, full attention every 2nd layer, document
// mask on, YaRN on the full layers with YARN=1) and the same B instances of T tokens with
// documents of random lengths (some longer than the window, many crossing the chunk
// boundaries) and masked targets. Each rank runs the whole instance (C = 1, model.c) and
// its context-parallel part (graph_forward_backward_cp); the members' gradients are summed
// as training sums them (dist_reduce_scatter, dist_allgather_shards), their loss sums as
// train_step_on does. Printed: the largest relative difference of the logits (each
// member's rows against the same rows of the whole run), of the loss sums, and of every
// parameter tensor's gradient, as ||cp - ref||_2 / ||ref||_2 per tensor, and as
// max |cp - ref| / max |ref| per tensor. Exit 1 when the loss sums differ by more than TOL
// (relative) or the logits or any gradient by more than 1e-5 of the tensor's max |ref| in
// any element, 2 on bad arguments. The 1e-5: CP computes C = 1's sums in another order (a
// weight gradient's token sums split over the members, attention's key sums at the chunk
// boundaries, the BLAS's calls a C-th of the rows); two orders of an n-term fp32 sum differ
// by about 2 sqrt(n) u sum|a_i b_i| in the standard estimate (u = 2^-24), and the longest
// sums here are the B x T = 2048-4096 tokens of a weight gradient, 2 sqrt(4096) u = 7.6e-6:
// 1e-5 of max|ref|, test_parity.sh's and tests/step_check.py's number. Also printed, for
// information: whether the result is bitwise, and the same measures for a pure reordering
// of C = 1's own sums (its B instances' gradients computed apart and added).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp_case.h"
#include "dist/dist.h"
#include "dist/dist_cp.h"
#include "kernels/kernels.h"
#include "model/graph.h"
#include "model/model.h"
#include "util/common.h"
#include "util/blas_core.h"

// ||a - ref||_2 / ||ref||_2 over n floats (printed); *maxrel gets the larger of itself and
// max |a - ref| / max |ref| (the tolerance's measure); *bitwise cleared on any difference.
static double rel(const float *a, const float *ref, size_t n, int *bitwise, double *maxrel) {
    double d = 0, m = 0, d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]);
        if (a[i] != ref[i]) *bitwise = 0;
        d = e > d ? e : d;
        m = fabs(ref[i]) > m ? fabs(ref[i]) : m;
        d2 += e * e;
        r2 += (double)ref[i] * ref[i];
    }
    double mr = m > 0 ? d / m : d;
    if (mr > *maxrel) *maxrel = mr;
    return r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
}

int main(int argc, char **argv) {
    blas_core_init(argv);   // every program of the suite runs the one OpenBLAS core (test_blas_core)
    if (argc != 6) {
        fprintf(stderr, "usage: mpirun -np C tool_cp_exact T B HEAD_STRIDE YARN TOL\n");
        return 2;
    }
    const int T = atoi(argv[1]), B = atoi(argv[2]), hs = atoi(argv[3]), yarn = atoi(argv[4]);
    const double tol = atof(argv[5]);
    dist_init();
    const int C = dist_world(), rank = dist_rank();
    if (C < 2 || T % (2 * C) || dist_cp_init(C)) {
        fprintf(stderr, "tool_cp_exact: needs mpirun -np C >= 2 with T %% 2C == 0 (T=%d, C=%d)\n", T, C);
        dist_exit(2);
    }
    ModelConfig cfg = cp_case_config();
    if (yarn) cfg.rope_scaling = (RopeScaling){ROPE_SCALING_YARN, 8.0, 32.0, 1.0, T / 4};
    Model m;
    model_create(&m, &cfg, B, T);
    param_init(&m.table, m.params, 1234);
    const size_t N = (size_t)B * T, n = m.table.total, Vp = m.cfg.padded_vocab;
    int32_t *in = xmalloc(sizeof(int32_t) * N), *tg = xmalloc(sizeof(int32_t) * N);
    const long count = cp_case_instances(B, T, in, tg);
    const float z = 1e-4f, inv = 1.0f / (float)count;
    // the whole instance on this rank
    float *g1 = xcalloc(n, sizeof(float)), *lg1 = xmalloc(sizeof(float) * N * Vp);
    LossSums s1 = model_forward_backward(&m, in, tg, B, T, z, inv, g1, lg1, NULL);
    const double tol_elem = 1e-5;   // logits and gradients: max|d| / max|ref| (the header's derivation)
    // The scale of a mere reordering of the same sums: the whole run's gradient as the sum of
    // its instances' separate gradients (B calls of one instance each) against one call.
    double d_reorder = 0, m_reorder = 0;
    if (B > 1) {
        float *gs = xcalloc(n, sizeof(float)), *gb = xmalloc(sizeof(float) * n);
        for (int b = 0; b < B; b++) {
            model_forward_backward(&m, in + (size_t)b * T, tg + (size_t)b * T, 1, T, z, inv, gb, NULL, NULL);
            for (size_t i = 0; i < n; i++) gs[i] += gb[i];
        }
        int bw = 1;
        for (int i = 0; i < m.table.n; i++) {
            double d = rel(gs + m.table.p[i].offset, g1 + m.table.p[i].offset, m.table.p[i].numel, &bw, &m_reorder);
            d_reorder = d > d_reorder ? d : d_reorder;
        }
        free(gs), free(gb);
    }
    // this member's part
    Graph g;
    const GraphCP cp = {C, dist_cp_member(), T, hs, NULL};
    if (graph_init_cp(&g, model_backend(&m), &m.cfg, &m.table, B, 0, &cp)) die("tool_cp_exact: out of memory");
    float *gc = xcalloc(n, sizeof(float)), *lgc = xmalloc(sizeof(float) * N / C * Vp);
    GraphParams p = {m.params, &m.w, gc, 0, NULL, NULL, NULL, NULL};
    LossSums sc = graph_forward_backward_cp(&g, &p, in, tg, B, z, inv, lgc, NULL);
    // the gradient summed over the members, as training sums it
    size_t *bounds = xmalloc(sizeof(size_t) * (C + 1));
    dist_shard_bounds(n, C, bounds);
    float *shard = xmalloc_aligned(sizeof(float) * (bounds[rank + 1] - bounds[rank] + 1));
    float *recv = xmalloc_aligned(sizeof(float) * (bounds[rank + 1] - bounds[rank] + 1) * C);
    dist_reduce_scatter(gc, shard, recv, n, bounds);   // one round (n >= every shard)
    memcpy(gc + bounds[rank], shard, sizeof(float) * (bounds[rank + 1] - bounds[rank]));
    dist_allgather_shards(gc, bounds);
    double mine[2] = {sc.ce_sum, sc.z_sum}, *all = xmalloc(sizeof(double) * 2 * C), ce = 0, zs = 0;
    dist_allgather_doubles(mine, 2, all);
    for (int r = 0; r < C; r++) ce += all[2 * r], zs += all[2 * r + 1];
    // logits: this member's rows against the same rows of the whole run
    int bitwise = 1, bw_logits = 1, st[2];
    const int ch = T / (2 * C);
    dist_cp_chunk_starts(T, C, dist_cp_member(), st);
    double d_logits = 0, m_logits = 0, m_grad = 0;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 2; c++) {
            double d = rel(lgc + ((size_t)b * 2 * ch + (size_t)c * ch) * Vp, lg1 + ((size_t)b * T + st[c]) * Vp,
                           (size_t)ch * Vp, &bw_logits, &m_logits);
            d_logits = d > d_logits ? d : d_logits;
        }
    double d_loss = fabs(ce - s1.ce_sum) / fabs(s1.ce_sum), d_z = fabs(zs - s1.z_sum) / fabs(s1.z_sum), d_grad = 0;
    const char *worst = "";
    for (int i = 0; i < m.table.n; i++) {
        const ParamInfo *pi = &m.table.p[i];
        double d = rel(gc + pi->offset, g1 + pi->offset, pi->numel, &bitwise, &m_grad);
        if (d >= d_grad) d_grad = d, worst = pi->name;
    }
    double mx[6] = {d_logits, d_loss, d_z, d_grad, m_logits, m_grad}, *allmx = xmalloc(sizeof(double) * 6 * C);
    dist_allgather_doubles(mx, 6, allmx);
    for (int r = 1; r < C; r++)
        for (int k = 0; k < 6; k++) mx[k] = allmx[6 * r + k] > mx[k] ? allmx[6 * r + k] : mx[k];
    int fail = 0;
    if (rank == 0) {
        printf("C=%d T=%d B=%d head_stride=%d yarn=%d: L2-relative logits %.3g%s, ce %.3g, z %.3g, gradients %.3g "
               "(worst tensor %s on rank 0)%s | max|d|/max|ref|: logits %.3g, gradients %.3g | C = 1 "
               "itself with its instances' gradients summed separately: L2 %.3g, max %.3g | tolerances: ce, z %.0e, "
               "max|d|/max|ref| of the logits and of each gradient %.0e\n", C, T, B, hs, yarn, mx[0],
               bw_logits ? " (bitwise on rank 0)" : "", mx[1], mx[2], mx[3], worst, bitwise ? ", gradients bitwise" : "",
               mx[4], mx[5], d_reorder, m_reorder, tol, tol_elem);
        fail = !(mx[1] <= tol) || !(mx[2] <= tol) || !(mx[4] <= tol_elem) || !(mx[5] <= tol_elem);
        if (fail) printf("FAIL: beyond the tolerances\n");
    }
    dist_bcast(&fail, sizeof fail, 0);
    graph_free(&g);
    model_destroy(&m);
    free(in), free(tg), free(g1), free(lg1), free(gc), free(lgc), free(bounds), free(shard), free(recv), free(all),
        free(allmx);
    dist_finalize();
    return fail;
}
