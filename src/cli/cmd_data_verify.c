// cmd_data_verify.c: `olmo data verify RECIPE|MANIFEST`: the token files against the sha256
// that `olmo prepare` recorded in their manifest.json (docs/data.md). Token files live for
// months on shared filesystems and are copied between clusters; the loader checks sizes
// and ids < vocab, not content, so this is the check to run after a copy. A RECIPE's
// training files are looked up in the manifest.json of their own directory.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "recipe/mixture.h"
#include "recipe/recipe.h"
#include "util/common.h"
#include "util/progress.h"

#define VERIFY_BLOCK ((size_t)8 << 20)
#define VERIFY_BAR_BYTES ((uint64_t)256 << 20)   // a progress bar from this much data on

typedef struct {
    const char *path;       // the file to hash
    const char *sha256;     // recorded, or NULL (not in a manifest)
} VerifyItem;

// sha256 of a file as hex; 0, or -1 with errno.
static int sha256_file(const char *path, char out[65], Progress *pr) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    unsigned char *buf = xmalloc(VERIFY_BLOCK);
    ssize_t n;
    while ((n = read(fd, buf, VERIFY_BLOCK)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        EVP_DigestUpdate(md, buf, (size_t)n);
        pr->done += (uint64_t)n;
        progress_draw(pr, 0);
    }
    int e = errno;
    close(fd);
    free(buf);
    unsigned char h[EVP_MAX_MD_SIZE];
    unsigned hl = 0;
    EVP_DigestFinal_ex(md, h, &hl);
    EVP_MD_CTX_free(md);
    if (n < 0) {
        errno = e;
        return -1;
    }
    for (unsigned i = 0; i < hl; i++) sprintf(out + 2 * i, "%02x", h[i]);
    return 0;
}

// Hash every item; one line each on stdout. Returns the number that did not verify.
static int verify_items(const VerifyItem *it, int n) {
    Progress pr = {0};
    struct stat sb;
    for (int i = 0; i < n; i++)
        if (stat(it[i].path, &sb) == 0) pr.total += (uint64_t)sb.st_size;
    pr.bar = pr.total >= VERIFY_BAR_BYTES;
    pr.t0 = now_seconds();
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char got[65];
        double t0 = now_seconds();
        uint64_t d0 = pr.done;
        int rc = sha256_file(it[i].path, got, &pr);
        double dt = now_seconds() - t0;
        if (pr.bar) fputs("\r\033[K", stderr);
        if (rc != 0) {
            printf("BAD %s: cannot read (%s)\n", it[i].path, strerror(errno));
            bad++;
        } else if (!it[i].sha256) {
            printf("UNLISTED %s: in no manifest.json next to it, nothing to verify against (sha256 %s)\n", it[i].path, got);
        } else if (strcmp(got, it[i].sha256) != 0) {
            printf("BAD %s: sha256 %s, its manifest records %s (the file changed after `olmo prepare` wrote it)\n",
                   it[i].path, got, it[i].sha256);
            bad++;
        } else {
            double b = (double)(pr.done - d0);
            if (b < 1e8) printf("ok  %s  %.0f bytes\n", it[i].path, b);
            else printf("ok  %s  %.2f GB  %.2f GB/s\n", it[i].path, b / 1e9, dt > 0 ? b / dt / 1e9 : 0.0);
        }
        fflush(stdout);
        progress_draw(&pr, 0);
    }
    if (pr.bar) progress_draw(&pr, 1);
    return bad;
}

static int is_manifest_path(const char *p) {
    struct stat sb;
    if (stat(p, &sb) != 0) return 0;
    if (S_ISDIR(sb.st_mode)) return 1;   // a prepare output directory
    size_t l = strlen(p);
    return l >= 13 && !strcmp(p + l - 13, "manifest.json");
}

// The recorded sha256 of token file `path` from the manifest.json in its directory, or NULL.
static const char *recorded_sha(const char *path) {
    char dir[PATH_MAX], mp[PATH_MAX + 16], real[PATH_MAX], mreal[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *sl = strrchr(dir, '/');
    if (sl) *sl = 0;
    else snprintf(dir, sizeof dir, ".");
    snprintf(mp, sizeof mp, "%s/manifest.json", dir);
    if (access(mp, F_OK) != 0 || !realpath(path, real)) return NULL;
    Manifest *m = manifest_load(mp);   // malformed: a message naming it, exit 2
    const char *sha = NULL;
    for (int i = 0; i < m->n_outputs && !sha; i++)
        if (realpath(m->outputs[i].full_path, mreal) && !strcmp(mreal, real)) sha = xstrdup(m->outputs[i].sha256);
    manifest_free(m);
    return sha;
}

int cmd_data_verify(int argc, char **argv) {
    // argv: "verify" PATH [key=value ...]
    if (argc < 2) die_input("olmo data verify: give a recipe file or a manifest.json (or its directory)");
    const char *path = argv[1];
    VerifyItem *items;
    int n = 0, bad;
    if (is_manifest_path(path)) {
        if (argc > 2) die_input("olmo data verify: key=value overrides go with a recipe, not a manifest");
        Manifest *m = manifest_load(path);
        items = xcalloc((size_t)m->n_outputs + 1, sizeof *items);
        for (int i = 0; i < m->n_outputs; i++) items[n++] = (VerifyItem){m->outputs[i].full_path, m->outputs[i].sha256};
        bad = verify_items(items, n);
        manifest_free(m);
    } else {
        for (int i = 2; i < argc; i++)
            if (!strchr(argv[i], '=')) die_input("olmo data verify: unknown argument '%s' (overrides are key=value)", argv[i]);
        static Recipe r;
        recipe_load(&r, path, argc - 2, argv + 2);
        LoaderConfig cfg;
        recipe_loader_config(&r, &cfg, 1, 0);
        int cap = 0;
        for (int s = 0; s < cfg.n_sources; s++) cap += cfg.sources[s].n_files;
        items = xcalloc((size_t)cap + 1, sizeof *items);
        for (int s = 0; s < cfg.n_sources; s++)
            for (int f = 0; f < cfg.sources[s].n_files; f++) {
                const char *p = cfg.sources[s].files[f];
                items[n++] = (VerifyItem){xstrdup(p), recorded_sha(p)};
            }
        recipe_loader_config_free(&cfg);
        bad = verify_items(items, n);
        for (int i = 0; i < n; i++) {
            free((char *)items[i].path);
            free((char *)items[i].sha256);
        }
    }
    free(items);
    if (bad) {
        fprintf(stderr, "olmo: error: data verify: %d of %d file%s did not verify\n", bad, n, n > 1 ? "s" : "");
        return 2;
    }
    return 0;
}
