// mixture.c: recipe -> LoaderConfig (mixture.h): the data.* and loader.* keys become
// sources (globs expanded and sorted) with token shares and repeat caps. A file of its own
// beside recipe.c, which has its own (YAML) `Loader` type. The mixture arithmetic itself is
// in src/data/loader.c (build_mixture); docs/loader.md explains both.
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe/mixture.h"
#include "util/common.h"

// Expand one glob (or plain path) into sorted paths; no match is an error naming the key.
static char **expand_glob(const char *key, const char *item, const char *pattern, int *n_out) {
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || rc == GLOB_ABORTED || (rc == 0 && g.gl_pathc == 0))
        die_input("%s: '%s': no file matches '%s'", key, item, pattern);
    if (rc) die_input("%s: '%s': cannot expand '%s'", key, item, pattern);
    char **out = xmalloc(g.gl_pathc * sizeof(char *));
    for (size_t i = 0; i < g.gl_pathc; i++) out[i] = xstrdup(g.gl_pathv[i]);   // glob sorts
    *n_out = (int)g.gl_pathc;
    globfree(&g);
    return out;
}

static LoaderSource *add_source(LoaderConfig *c, const char *key, const char *name) {
    if (c->n_sources >= LOADER_MAX_SOURCES) die_input("%s: more than %d sources", key, LOADER_MAX_SOURCES);
    if (!name[0]) die_input("%s: a source needs a name", key);
    if (strlen(name) >= sizeof c->sources[0].name) die_input("%s: source name '%s' is too long", key, name);
    for (int s = 0; s < c->n_sources; s++)
        if (!strcmp(c->sources[s].name, name)) die_input("%s: two sources are named '%s'", key, name);
    LoaderSource *src = &c->sources[c->n_sources++];
    memset(src, 0, sizeof *src);
    snprintf(src->name, sizeof src->name, "%s", name);
    return src;
}

void recipe_loader_config(const Recipe *r, LoaderConfig *c, int world_size, int rank) {
    memset(c, 0, sizeof *c);
    c->seq_len = r->seq_len;
    c->global_batch = r->global_batch;
    c->micro_batch = r->micro_batch;
    c->vocab_size = r->vocab_size;
    c->seed = r->data_seed;
    c->shuffle = !strcmp(r->data_order, "shuffle");
    c->world_size = world_size;
    c->rank = rank;
    c->debug_double_shard = r->debug_double_shard;
    c->prefetch = r->loader_prefetch;
    c->verbose = rank == 0;
    if (r->n_paths > 0 && r->n_sources > 0)
        die_input("data.paths and data.sources are both given; use one (data.sources for mixtures)");
    if (r->n_paths > 0) {   // one source "data": every file, in order
        LoaderSource *src = add_source(c, "data.paths", "data");
        for (int i = 0; i < r->n_paths; i++) {
            int n;
            char **fl = expand_glob("data.paths", r->paths[i], r->paths[i], &n);
            src->files = xrealloc(src->files, (size_t)(src->n_files + n) * sizeof(char *));
            memcpy(src->files + src->n_files, fl, (size_t)n * sizeof(char *));
            src->n_files += n;
            free(fl);
        }
    }
    for (int i = 0; i < r->n_sources; i++) {
        const char *item = r->sources[i], *eq = strchr(item, '=');
        if (eq) {   // name=glob: one source of all matching files
            char name[RECIPE_MAX_STR];
            snprintf(name, sizeof name, "%.*s", (int)(eq - item), item);
            LoaderSource *src = add_source(c, "data.sources", name);
            src->files = expand_glob("data.sources", item, eq + 1, &src->n_files);
        } else {    // a path or glob: each file its own source, named by its stem
            int n;
            char **fl = expand_glob("data.sources", item, item, &n);
            for (int k = 0; k < n; k++) {
                const char *b = strrchr(fl[k], '/');
                char stem[RECIPE_MAX_STR];
                snprintf(stem, sizeof stem, "%s", b ? b + 1 : fl[k]);
                char *dot = strrchr(stem, '.');
                if (dot && dot != stem) *dot = '\0';
                LoaderSource *src = add_source(c, "data.sources", stem);
                src->files = xmalloc(sizeof(char *));
                src->files[0] = fl[k];
                src->n_files = 1;
            }
            free(fl);
        }
    }
    for (int i = 0; i < r->n_mix; i++) {   // source:share[:max_repeat]
        const char *item = r->mix[i];
        char name[RECIPE_MAX_STR], *end;
        const char *c1 = strchr(item, ':');
        if (!c1) die_input("data.mix: '%s': expected source:share[:max_repeat]", item);
        snprintf(name, sizeof name, "%.*s", (int)(c1 - item), item);
        LoaderSource *src = NULL;
        for (int s = 0; s < c->n_sources; s++)
            if (!strcmp(c->sources[s].name, name)) src = &c->sources[s];
        if (!src) {
            char known[1024] = "";
            for (int s = 0; s < c->n_sources; s++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", s ? ", " : "", c->sources[s].name);
            die_input("data.mix: '%s': unknown source '%s' (sources: %s)", item, name, known);
        }
        if (src->share > 0) die_input("data.mix: source '%s' appears twice", name);
        errno = 0;
        double share = strtod(c1 + 1, &end);
        if (end == c1 + 1 || errno || !(share > 0) || !isfinite(share) || (*end && *end != ':'))
            die_input("data.mix: '%s': share must be a number > 0", item);
        double rep = 1;
        if (*end == ':') {
            const char *q = end + 1;
            rep = strtod(q, &end);
            if (end == q || *end || !(rep >= 1) || !isfinite(rep))
                die_input("data.mix: '%s': max_repeat must be a number >= 1", item);
        }
        src->share = share;
        src->max_repeat = rep;
    }
}

void recipe_loader_config_free(LoaderConfig *c) {
    for (int s = 0; s < c->n_sources; s++) {
        for (int k = 0; k < c->sources[s].n_files; k++) free(c->sources[s].files[k]);
        free(c->sources[s].files);
    }
    c->n_sources = 0;
}
