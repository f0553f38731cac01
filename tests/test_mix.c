// test_mix.c: data.mix NAME, an OLMo-core mix file (src/recipe/mixture.c): the loader serves
// instances whose ids index the files in the mix file's order (not sorted by name), with the
// {TOKENIZER} placeholder and data.mix_base_dir applied as OLMo-core's DataMix.build does.
// A synthetic mix of three token files listed c, a, b (token i of file k is k * 1e6 + i,
// so every served token says which file and offset it came from): every instance of two
// epochs' batches, sequential and shuffled, is the chunk that instance id names in mix
// order; loader_instance_where agrees. Exact (integers).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/loader.h"
#include "recipe/mixture.h"
#include "recipe/recipe.h"
#include "util/blas_core.h"

#include "check.h"

enum { T = 16, GB = 4 };
static char dir[256];

static void make_file(const char *rel, uint32_t k, uint64_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "wb");
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v = k * 1000000u + (uint32_t)i;
        fwrite(&v, 4, 1, f);
    }
    fclose(f);
}

int main(int argc, char **argv) {
    (void)argc;
    blas_core_init(argv);
    snprintf(dir, sizeof dir, "%s/olmo_mix_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char sub[600], mix[600], yml[600];
    snprintf(sub, sizeof sub, "%s/tokX", dir);
    mkdir(sub, 0755);
    // mix order c (file 2), a (file 0), b (file 1); sizes 3, 5 and 2 instances plus tails
    const char *names[3] = {"a.npy", "b.npy", "c.npy"};
    const uint64_t sizes[3] = {5 * T + 3, 2 * T, 3 * T + 15};
    for (int k = 0; k < 3; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "tokX/%s", names[k]);
        make_file(rel, (uint32_t)k, sizes[k]);
    }
    snprintf(mix, sizeof mix, "%s/synthetic.txt", dir);
    FILE *f = fopen(mix, "w");
    fprintf(f, "# a synthetic mix\n# tokenizer: tokX\n\nsrc_c,{TOKENIZER}/c.npy\nsrc_a,{TOKENIZER}/a.npy\n  src_b,{TOKENIZER}/b.npy  \n");
    fclose(f);
    snprintf(yml, sizeof yml, "%s/r.yml", dir);
    f = fopen(yml, "w");
    fprintf(f, "model: {preset: olmo3-tiny, vocab_size: 4000000}\ntrain: {seq_len: %d, global_batch: %d, micro_batch: 1, max_steps: 4}\n"
               "data: {mix: %s, mix_base_dir: %s}\n", T, GB, mix, dir);
    fclose(f);
    const int order[3] = {2, 0, 1};   // file of the i-th mix line
    uint64_t first[4] = {0};
    for (int i = 0; i < 3; i++) first[i + 1] = first[i] + sizes[order[i]] / T;
    const uint64_t N = first[3];
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        Recipe r;
        char *ov[] = {shuffle ? "data.order=shuffle" : "data.order=sequential"};
        recipe_load(&r, yml, 1, ov);
        LoaderConfig c;
        recipe_loader_config(&r, &c, 1, 0);
        CHECK(c.n_sources == 1 && c.sources[0].n_files == 3, "one source of 3 files: %d sources", c.n_sources);
        for (int i = 0; i < 3 && c.n_sources == 1; i++) {
            char want[700];
            snprintf(want, sizeof want, "%s/tokX/%s", dir, names[order[i]]);
            CHECK(!strcmp(c.sources[0].files[i], want), "file %d: %s, want %s", i, c.sources[0].files[i], want);
        }
        c.prefetch = 0;
        c.verbose = 0;
        Loader *L = loader_create(&c);
        recipe_loader_config_free(&c);
        CHECK(loader_num_instances(L) == N, "%llu instances, want %llu", (unsigned long long)loader_num_instances(L),
              (unsigned long long)N);
        uint32_t ids[GB];
        int32_t in[GB * T], tg[GB * T];
        int served = 0;
        for (uint64_t b = 0; b < 2 * loader_batches_per_epoch(L); b++) {   // two epochs
            loader_peek_ids(L, ids);
            loader_next_batch(L, in, tg);
            for (int j = 0; j < GB; j++, served++) {
                int m = 0;
                while (ids[j] >= first[m + 1]) m++;
                uint64_t off = (ids[j] - first[m]) * T;
                const char *path;
                uint64_t woff;
                loader_instance_where(L, ids[j], &path, &woff);
                CHECK(woff == off && strstr(path, names[order[m]]), "id %u: where %s %llu, want %s %llu", ids[j], path,
                      (unsigned long long)woff, names[order[m]], (unsigned long long)off);
                for (int t = 0; t < T; t++) {
                    int32_t want = (int32_t)((uint32_t)order[m] * 1000000u + (uint32_t)(off + (uint64_t)t));
                    if (in[j * T + t] != want) {
                        CHECK(0, "%s: id %u token %d: %d, want %d (file %s offset %llu)", shuffle ? "shuffle" : "sequential",
                              ids[j], t, in[j * T + t], want, names[order[m]], (unsigned long long)off);
                        break;
                    }
                }
                if (!shuffle) CHECK(ids[j] == (uint32_t)(served % (int)(loader_batches_per_epoch(L) * GB)), "sequential id %u", ids[j]);
            }
        }
        loader_free(L);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("test_mix: served instances index the files in mix order (%llu instances, sequential and shuffled)\n",
           (unsigned long long)N);
    return 0;
}
