// mixture.c: recipe -> LoaderConfig (mixture.h): the data.* and loader.* keys become
// sources (globs expanded and sorted) with token shares and repeat caps. A file of its own
// beside recipe.c, which has its own (YAML) `Loader` type. The mixture arithmetic itself is
// in src/data/loader.c (build_mixture); docs/loader.md explains both.
#include <ctype.h>
#include <dirent.h>
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

// data.mix NAME: the mix file it names. A NAME with a '/' or ending in .txt is the file itself;
// else $OLMO_MIX_DIR/NAME.txt, by default configs/mixes/NAME.txt (relative to the repository
// root, as tokenizers/ is). An unknown name is an error listing the mixes there.
static void mix_file_path(const char *name, char *out, size_t n) {
    size_t len = strlen(name);
    if (strchr(name, '/') || (len > 4 && !strcmp(name + len - 4, ".txt"))) {
        snprintf(out, n, "%s", name);
        return;
    }
    const char *dir = getenv("OLMO_MIX_DIR");
    if (!dir || !dir[0]) dir = "configs/mixes";
    snprintf(out, n, "%s/%s.txt", dir, name);
    FILE *f = fopen(out, "r");
    if (f) {
        fclose(f);
        return;
    }
    char known[2048] = "";
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".txt") && strlen(known) + l + 3 < sizeof known)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%.*s", known[0] ? ", " : "", (int)(l - 4),
                     e->d_name);
    }
    if (d) closedir(d);
    die_input("data.mix: unknown mix '%s': no file %s (mixes in %s: %s; or give a path to a mix file)", name, out, dir,
              known[0] ? known : "none");
}

// One source of every file of an OLMo-core mix file (olmo_core/data/mixes/__init__.py,
// DataMix.build): lines "label,path", '#' lines and blank lines skipped, each path holding
// {TOKENIZER} (replaced by data.mix_tokenizer, else the file's "# tokenizer: VALUE" line),
// taken relative to data.mix_base_dir, in the file's order. Labels are not used.
static void add_named_mix(LoaderConfig *c, const Recipe *r, const char *name) {
    char path[RECIPE_MAX_STR + 64];
    mix_file_path(name, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) die_input("data.mix: cannot read mix file '%s': %s", path, strerror(errno));
    char tok[256];
    snprintf(tok, sizeof tok, "%s", r->mix_tokenizer);
    const char *base = r->mix_base_dir;
    const char *slash = base[0] && base[strlen(base) - 1] == '/' ? "" : "/";
    LoaderSource *src = add_source(c, "data.mix", "data");
    char *line = NULL;
    size_t cap = 0;
    int ln = 0, cap_files = 0;
    for (ssize_t got; (got = getline(&line, &cap, f)) >= 0;) {
        ln++;
        char *a = line, *e = line + got;
        while (a < e && isspace((unsigned char)*a)) a++;
        while (e > a && isspace((unsigned char)e[-1])) *--e = '\0';
        if (!*a) continue;
        if (*a == '#') {
            const char *key = "# tokenizer:";
            if (!strncmp(a, key, strlen(key)) && !r->mix_tokenizer[0]) {
                const char *v = a + strlen(key);
                while (isspace((unsigned char)*v)) v++;
                snprintf(tok, sizeof tok, "%s", v);
            }
            continue;
        }
        char *comma = strchr(a, ',');
        if (!comma || strchr(comma + 1, ','))
            die_input("%s:%d: data.mix '%s': expected one 'label,path' per line, got '%.200s'", path, ln, name, a);
        const char *p = comma + 1, *ph = strstr(p, "{TOKENIZER}");
        if (!ph)
            die_input("%s:%d: data.mix '%s': the path '%.200s' has no {TOKENIZER} placeholder (OLMo-core refuses such "
                      "a line)", path, ln, name, p);
        if (!tok[0])
            die_input("%s:%d: data.mix '%s': the paths hold {TOKENIZER} but nothing gives its value: set "
                      "data.mix_tokenizer (e.g. allenai/dolma3-tokenizer), or add a '# tokenizer: VALUE' line to the "
                      "mix file", path, ln, name);
        char full[3 * RECIPE_MAX_STR];
        int o = snprintf(full, sizeof full, "%s%s", base, slash);
        for (const char *q = p; *q && o < (int)sizeof full;) {   // every {TOKENIZER}, as str.replace
            if (!strncmp(q, "{TOKENIZER}", 11)) {
                o += snprintf(full + o, sizeof full - (size_t)o, "%s", tok);
                q += 11;
            } else full[o++] = *q++;
        }
        if (o >= (int)sizeof full) die_input("%s:%d: data.mix '%s': the path is too long", path, ln, name);
        full[o] = '\0';
        if (src->n_files == cap_files) {
            cap_files = cap_files ? 2 * cap_files : 256;
            src->files = xrealloc(src->files, (size_t)cap_files * sizeof(char *));
        }
        src->files[src->n_files++] = xstrdup(full);
    }
    free(line);
    fclose(f);
    if (!src->n_files) die_input("%s: data.mix '%s': the mix file lists no files", path, name);
}

void recipe_loader_config(const Recipe *r, LoaderConfig *c, int world_size, int rank) {
    memset(c, 0, sizeof *c);
    c->seq_len = r->seq_len;
    c->instance_filter = r->instance_filter;
    c->filter = (RepetitionFilter){r->rep_min_period, r->rep_max_period, r->rep_max_count};
    c->global_batch = r->global_batch;
    c->micro_batch = r->micro_batch;
    c->vocab_size = r->vocab_size;
    c->seed = r->data_seed;
    c->shuffle = !strcmp(r->data_order, "shuffle");
    c->world_size = world_size;
    c->rank = rank;
    c->debug_double_shard = r->debug_double_shard;
    c->prefetch = r->loader_prefetch;
    c->packing = !strcmp(r->packing, "packed");
    c->pack = (PackConfig){.seq_len = r->seq_len, .eos_id = (uint32_t)r->eos_id, .pad_id = (uint32_t)r->pad_id,
                           .fragment = !strcmp(r->long_doc_strategy, "fragment"), .group_size = r->source_group_size,
                           .permute = r->source_perm_seed >= 0,
                           .perm_seed = r->source_perm_seed >= 0 ? (uint64_t)r->source_perm_seed : 0};
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
    const char *mix_name = recipe_mix_name(r);
    if (mix_name) {
        add_named_mix(c, r, mix_name);
        return;
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
