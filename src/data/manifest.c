// manifest.c: see manifest.h. The writer side lives in prepare.c.
#include "data/manifest.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>

#include "util/common.h"

static const cJSON *need(const cJSON *obj, const char *key, int want_string, const char *file, int idx) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || (want_string ? !cJSON_IsString(v) : !cJSON_IsNumber(v))) {
        if (idx >= 0)
            die_input("%s: outputs[%d].%s missing or not a %s", file, idx, key, want_string ? "string" : "number");
        die_input("%s: '%s' missing or not a %s", file, key, want_string ? "string" : "number");
    }
    return v;
}

// A number field that must be an integer in [lo, hi] (casting an out-of-range double to an
// integer type is undefined behaviour: found by fuzz/manifest.c).
static double need_int(const cJSON *obj, const char *key, const char *file, int idx, double lo, double hi) {
    double x = need(obj, key, 0, file, idx)->valuedouble;
    if (!(x >= lo && x <= hi) || x != (double)(int64_t)x) {
        if (idx >= 0) die_input("%s: outputs[%d].%s must be an integer in [%.0f, %.0f]", file, idx, key, lo, hi);
        die_input("%s: '%s' must be an integer in [%.0f, %.0f]", file, key, lo, hi);
    }
    return x;
}

Manifest *manifest_load(const char *path) {
    // Accept either the manifest file or the directory holding it.
    char file[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(file, sizeof file, "%s/manifest.json", path);
    else snprintf(file, sizeof file, "%s", path);
    size_t len = 0;
    char *text = read_file_all(file, &len);
    if (!text) die_input("cannot read manifest %s (run `olmo prepare` first?)", file);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root || !cJSON_IsObject(root)) die_input("%s: not a valid JSON object", file);

    Manifest *m = xcalloc(1, sizeof *m);
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", file);
    char *slash = strrchr(dirbuf, '/');
    if (slash) *slash = 0; else snprintf(dirbuf, sizeof dirbuf, ".");
    m->dir = xstrdup(dirbuf);

    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    if (!cJSON_IsObject(tok)) die_input("%s: 'tokenizer' missing or not an object", file);
    m->tokenizer_path = xstrdup(need(tok, "path", 1, file, -1)->valuestring);
    snprintf(m->tokenizer_fingerprint, sizeof m->tokenizer_fingerprint, "%s",
             need(tok, "fingerprint", 1, file, -1)->valuestring);
    m->eos_id = (uint32_t)need_int(tok, "eos_id", file, -1, 0, 4294967295.0);

    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(root, "outputs");
    if (!cJSON_IsArray(outs)) die_input("%s: 'outputs' missing or not an array", file);
    m->n_outputs = cJSON_GetArraySize(outs);
    m->outputs = xcalloc(m->n_outputs ? m->n_outputs : 1, sizeof *m->outputs);
    int i = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, outs) {
        ManifestOutput *mo = &m->outputs[i];
        mo->source = xstrdup(need(o, "source", 1, file, i)->valuestring);
        mo->split = xstrdup(need(o, "split", 1, file, i)->valuestring);
        mo->path = xstrdup(need(o, "path", 1, file, i)->valuestring);
        size_t n = strlen(m->dir) + strlen(mo->path) + 2;
        mo->full_path = xmalloc(n);
        if (mo->path[0] == '/') snprintf(mo->full_path, n, "%s", mo->path);
        else snprintf(mo->full_path, n, "%s/%s", m->dir, mo->path);
        mo->documents = (int64_t)need_int(o, "documents", file, i, 0, 9.0e15);
        mo->tokens = (int64_t)need_int(o, "tokens", file, i, 0, 9.0e15);
        mo->utf8_bytes = (int64_t)need_int(o, "utf8_bytes", file, i, 0, 9.0e15);
        mo->heldout_frac = need(o, "heldout_frac", 0, file, i)->valuedouble;
        snprintf(mo->sha256, sizeof mo->sha256, "%s", need(o, "sha256", 1, file, i)->valuestring);
        i++;
    }
    cJSON_Delete(root);
    return m;
}

const ManifestOutput *manifest_find(const Manifest *m, const char *source, const char *split) {
    for (int i = 0; i < m->n_outputs; i++)
        if (!strcmp(m->outputs[i].source, source) && !strcmp(m->outputs[i].split, split)) return &m->outputs[i];
    return NULL;
}

void manifest_free(Manifest *m) {
    if (!m) return;
    for (int i = 0; i < m->n_outputs; i++) {
        free(m->outputs[i].source); free(m->outputs[i].split);
        free(m->outputs[i].path); free(m->outputs[i].full_path);
    }
    free(m->outputs); free(m->dir); free(m->tokenizer_path); free(m);
}
