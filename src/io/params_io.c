// params_io.c: the parameter table to and from safetensors (HF names; params_io.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/ckpt_verify.h"
#include "io/params_io.h"
#include "io/safetensors.h"
#include "model/params.h"
#include "util/common.h"

int params_check_file(const ParamTable *t, const StFile *f, char *err, size_t errlen) {
    char msg[2048] = "";
    size_t used = 0;
    int bad = 0;
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        const StTensor *s = st_find(f, p->name);
        if (!s) {
            used += (size_t)snprintf(msg + used, used < sizeof msg ? sizeof msg - used : 0, "%s missing tensor %s", bad++ ? ";" : "", p->name);
            continue;
        }
        int shape_ok = s->ndim == p->ndim && s->shape[0] == p->shape[0] && (p->ndim == 1 || s->shape[1] == p->shape[1]);
        int dtype_ok = strcmp(s->dtype, "F32") == 0 || strcmp(s->dtype, "BF16") == 0 || strcmp(s->dtype, "F16") == 0 ||
                       strcmp(s->dtype, "F64") == 0;
        if (!shape_ok || !dtype_ok) {
            char got[128] = "";
            for (int d = 0, o = 0; d < s->ndim && o < 100; d++) o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "", (long long)s->shape[d]);
            used += (size_t)snprintf(msg + used, used < sizeof msg ? sizeof msg - used : 0,
                                     "%s %s: expected F32 (%d%s%.0d) got %s (%s)", bad++ ? ";" : "", p->name, p->shape[0],
                                     p->ndim == 2 ? ", " : "", p->ndim == 2 ? p->shape[1] : 0, s->dtype, got);
        }
    }
    for (int j = 0; j < f->n; j++)
        if (!param_table_find(t, f->t[j].name))
            used += (size_t)snprintf(msg + used, used < sizeof msg ? sizeof msg - used : 0, "%s unexpected tensor %s", bad++ ? ";" : "",
                                     f->t[j].name);
    if (bad) {
        snprintf(err, errlen, "%s does not match the model (%d problem%s):%s", f->path, bad, bad > 1 ? "s" : "", msg);
        return -1;
    }
    return 0;
}

int params_load_safetensors(const ParamTable *t, float *params, const char *path, char *err, size_t errlen) {
    // A checkpoint's weights (eval, generate, export-hf, train.load_path) are checked
    // against the checksums.txt next to them first; other files have none.
    if (ckpt_verify_path(path, 0, err, errlen) < 0) return -1;
    StFile f;
    if (st_open(&f, path, err, errlen) != 0) return -1;
    if (params_check_file(t, &f, err, errlen) != 0) {
        st_close(&f);
        return -1;
    }
    float *stage = xmalloc_aligned(sizeof(float) * t->total);
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        st_read_f32(&f, st_find(&f, p->name), stage + p->offset);
    }
    memcpy(params, stage, sizeof(float) * t->total);
    free(stage);
    st_close(&f);
    return 0;
}

void params_save_safetensors(const ParamTable *t, const float *params, const char *path, const char *metadata) {
    StWrite *w = xcalloc((size_t)t->n, sizeof(StWrite));
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        w[i] = (StWrite){p->name, "F32", p->ndim, {p->shape[0], p->shape[1]}, params + p->offset, p->numel * sizeof(float)};
    }
    if (st_write(path, w, t->n, metadata) != 0) die("cannot write %s", path);
    free(w);
}
