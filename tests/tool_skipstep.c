// tool_skipstep.c: a line-command driver of the skip-step guard (src/train/skipstep.c), used
// by tests/test_skip_step.py to check each decision and each effect on the optimizer state
// against a reimplementation of OLMo-core's rule. Commands on stdin, one per line, numbers
// as C strtod reads them (python repr, nan, inf); every reply is one line on stdout:
//   init W SIGMA RULE TESTG     a fresh guard: window, sigma, olmo_c | olmo_core, test the norm
//   step CE LOSS GNORM EN       skipstep_decide(EN = optim.skip_step): prints 0 / 1
//   resume                      a checkpoint's history restored into a fresh guard (skipstep_restore)
//   clip RULE NORM MAX          skipstep_clip_coef as %a
//   zero RULE GNORM N g*N m*N v*N p*N
//                               skipstep_zero_factor on a CPU DevState of N elements: prints
//                               the return value then m, v, p as %a
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "train/skipstep.h"
#include "util/blas_core.h"

static SkipStep g_s;

static double num(char **save) {
    char *t = strtok_r(NULL, " \t\n", save);
    if (!t) { fprintf(stderr, "tool_skipstep: missing number\n"); exit(2); }
    return strtod(t, NULL);
}

static SkipRule rule(char **save) {
    char *t = strtok_r(NULL, " \t\n", save);
    int r = t ? skipstep_rule_of(t) : -1;
    if (r < 0) { fprintf(stderr, "tool_skipstep: bad rule %s\n", t ? t : "(none)"); exit(2); }
    return (SkipRule)r;
}

static void zero(char **save, OpsBackend *be) {
    SkipStep s;
    skipstep_init(&s, 8, 6);
    s.rule = rule(save);
    double gn = num(save);
    size_t n = (size_t)num(save);
    float *b = calloc(4 * n + 1, sizeof(float));
    for (size_t i = 0; i < 4 * n; i++) b[i] = (float)num(save);
    DevState d = {be, NULL, 0, n, b + 3 * n, b + n, b + 2 * n, b, NULL, DT_F32};
    printf("%d", skipstep_zero_factor(&s, &d, gn));
    for (size_t i = n; i < 4 * n; i++) printf(" %a", b[i]);
    printf("\n");
    free(b);
}

int main(int argc, char **argv) {
    (void)argc;
    blas_core_init(argv);
    OpsBackend *be = ops_cpu_create(PRECISION_FP32);
    skipstep_init(&g_s, 8, 6);
    char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        char *save, *cmd = strtok_r(line, " \t\n", &save);
        if (!cmd) continue;
        if (!strcmp(cmd, "init")) {
            int w = (int)num(&save);
            double sigma = num(&save);
            skipstep_init(&g_s, w, sigma);
            g_s.rule = rule(&save);
            g_s.test_gnorm = (int)num(&save);
            printf("ok\n");
        } else if (!strcmp(cmd, "step")) {
            double ce = num(&save), loss = num(&save), gn = num(&save);
            int en = (int)num(&save);
            printf("%d\n", skipstep_decide(&g_s, en, ce, loss, gn));
        } else if (!strcmp(cmd, "resume")) {
            SkipStep saved = g_s;
            skipstep_init(&g_s, saved.window, saved.sigma);
            g_s.rule = saved.rule;
            g_s.test_gnorm = saved.test_gnorm;
            skipstep_restore(&g_s, &saved);
            printf("ok %d\n", g_s.n);
        } else if (!strcmp(cmd, "clip")) {
            SkipStep s;
            skipstep_init(&s, 8, 6);
            s.rule = rule(&save);
            double norm = num(&save), max = num(&save);
            printf("%a\n", skipstep_clip_coef(&s, norm, max));
        } else if (!strcmp(cmd, "zero")) {
            zero(&save, be);
        } else {
            fprintf(stderr, "tool_skipstep: unknown command %s\n", cmd);
            return 2;
        }
        fflush(stdout);
    }
    ops_destroy(be);
    return 0;
}
