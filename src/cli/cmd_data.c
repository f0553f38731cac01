// cmd_data.c: `olmo data`: look at a recipe's dataset the way the loader sees it.
//   olmo data info  RECIPE [key=value ...] [--json]
//       sources, files, instances available/used, repeat factors, batches per epoch,
//       fingerprint.
//   olmo data order RECIPE [key=value ...] [--epoch E] [--start S] [--count K] [--batches]
//                   [--rank R --world W [--context-parallel C]] [--where] [--sizes FILE]
//       the instance order, one id per line (ids index the mixed instance list; without
//       a mixture instance i is the i-th seq_len chunk of the files in recipe order).
//       Without --rank: epoch E's full global order, numpy's
//       Generator(PCG64(seed + E)).shuffle(arange(N, dtype=uint32)), from position S,
//       so it can be diffed against OLMo-core. --batches: one global batch per line
//       (whole batches only, as the loader serves them). With --rank/--world: what that
//       rank is served, batch by batch, in the loader's micro-batch composition
//       (including the loader.debug_double_shard bug when it is on); with --context-parallel
//       C, what its group of C ranks is served (every member the same whole instances, as
//       the trainer's loader reads them: W / C readers), and on stderr which positions of
//       each instance the rank holds (dist_cp.h). --where: each id with
//       the file it is read from and its first token's offset there. --sizes FILE: the
//       files' sizes from FILE instead of the files (which need not exist), implies --where.
//       --describe K: the first K served instances of the global order (from S): index,
//       group, sha256 of the ids (padding included) as little-endian uint32, padding count,
//       document lengths as OLMo-core's doc_lens (--json: one array of those objects).
//   olmo data verify RECIPE [key=value ...] | MANIFEST
//       the token files against their manifest's sha256 (src/cli/cmd_data_verify.c).
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/sha.h>

#include "cli/cli.h"
#include "data/loader.h"
#include "data/pcg64.h"
#include "recipe/mixture.h"
#include "recipe/recipe.h"
#include "util/common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo data info  RECIPE [key=value ...] [--json]\n"
            "       olmo data order RECIPE [key=value ...] [--epoch E] [--start S] [--count K]\n"
            "                       [--batches] [--rank R --world W [--context-parallel C]]\n"
            "                       [--where] [--sizes FILE]\n"
            "                       [--describe K [--json]]\n"
            "       olmo data verify RECIPE [key=value ...] | MANIFEST\n"
            "  info   sources, instances available/used, mixture repeat factors, fingerprint\n"
            "  order  the global instance order of epoch E (default 1; seed + E), one id per\n"
            "         line from position S; --batches: one global batch per line; --rank/--world:\n"
            "         what that rank is served per batch; --context-parallel C: its group's (C ranks\n"
            "         share each instance; stderr: the positions this rank holds). --count: lines\n"
            "         to print (default all).\n"
            "         --where: 'id file token_offset' per line (where the instance is read from).\n"
            "         --sizes FILE: take the files' sizes from FILE, one line per file of the recipe\n"
            "         in order, 'BYTES' or 'PATH BYTES' (as stat -c '%%n %%s' prints), instead of\n"
            "         the files (they need not exist); implies --where, not with --rank.\n"
            "         --describe K: the first K instances of that order: index, group (packed; FSL:\n"
            "         file), sha256 of its ids as little-endian uint32, padding, document lengths\n"
            "         (--json: an array of {index, group, sha256, n_pad, doc_lengths}).\n"
            "  verify the token files (a recipe's, each checked against the manifest.json next to\n"
            "         it; or all of a MANIFEST's: manifest.json or its directory) against the sha256\n"
            "         `olmo prepare` recorded; one line per file (ok with GB/s, BAD, or UNLISTED\n"
            "         when no manifest lists it), a progress bar on stderr from 256 MB; exit 2 if BAD.\n");
}

// --describe: the instances at order positions start .. start+count-1 of perm.
static void describe(const Loader *L, const Recipe *r, const uint32_t *perm, uint64_t N, uint64_t start,
                     uint64_t count, int json) {
    const int T = r->seq_len;
    const uint32_t eos = (uint32_t)r->eos_id;
    uint32_t *ids = xmalloc((size_t)T * sizeof(uint32_t)), *lens = xmalloc((size_t)T * sizeof(uint32_t));
    unsigned char *bytes = xmalloc((size_t)T * 4);
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    for (uint64_t i = start, k = 0; i < N && k < count; i++, k++) {
        uint32_t group;
        int n_pad = loader_instance_ids(L, perm[i], ids, &group);
        for (int t = 0; t < T; t++)
            for (int b = 0; b < 4; b++) bytes[4 * t + b] = (unsigned char)(ids[t] >> (8 * b));
        unsigned char h[SHA256_DIGEST_LENGTH];
        SHA256(bytes, (size_t)T * 4, h);
        char hex[2 * SHA256_DIGEST_LENGTH + 1];
        for (int b = 0; b < SHA256_DIGEST_LENGTH; b++) snprintf(hex + 2 * b, 3, "%02x", h[b]);
        int m = packing_doc_lengths(ids, T, eos, lens);
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "index", perm[i]);
            cJSON_AddNumberToObject(o, "group", group);
            cJSON_AddStringToObject(o, "sha256", hex);
            cJSON_AddNumberToObject(o, "n_pad", n_pad);
            cJSON *dl = cJSON_AddArrayToObject(o, "doc_lengths");
            for (int d = 0; d < m; d++) cJSON_AddItemToArray(dl, cJSON_CreateNumber(lens[d]));
            cJSON_AddItemToArray(arr, o);
        } else {
            printf("%" PRIu32 " %" PRIu32 " %s %d ", perm[i], group, hex, n_pad);
            for (int d = 0; d < m; d++) printf("%s%" PRIu32, d ? "," : "", lens[d]);
            printf("\n");
        }
    }
    if (json) {
        char *txt = cJSON_PrintUnformatted(arr);
        printf("%s\n", txt);
        free(txt);
        cJSON_Delete(arr);
    }
    free(ids);
    free(lens);
    free(bytes);
}

static uint64_t parse_u64(const char *opt, const char *s) {
    char *end;
    if (!s || !*s || *s == '-') die_input("olmo data: %s needs a non-negative integer", opt);
    uint64_t v = strtoull(s, &end, 10);
    if (*end) die_input("olmo data: %s: '%s' is not a non-negative integer", opt, s);
    return v;
}

// --sizes FILE: each of the configuration's files' size in tokens, in order (bad line: exit 2).
static uint64_t *read_sizes(const char *file, const LoaderConfig *c) {
    int n = 0;
    for (int s = 0; s < c->n_sources; s++) n += c->sources[s].n_files;
    uint64_t *out = xmalloc((size_t)(n ? n : 1) * sizeof(uint64_t));
    FILE *f = fopen(file, "r");
    if (!f) die_input("olmo data order: --sizes: cannot read '%s'", file);
    char *line = NULL;
    size_t cap = 0;
    int k = 0, ln = 0;
    for (ssize_t got; (got = getline(&line, &cap, f)) >= 0;) {
        ln++;
        char a[4096], b[64], extra[2];
        int m = sscanf(line, "%4095s %63s %1s", a, b, extra);
        if (m <= 0 || a[0] == '#') continue;
        const char *num = m == 1 ? a : b;
        if (k >= n) die_input("%s:%d: --sizes: more lines than the recipe's %d files", file, ln, n);
        int s = 0, i = k;
        while (i >= c->sources[s].n_files) i -= c->sources[s++].n_files;
        const char *want = c->sources[s].files[i];
        if (m == 3 || (m == 2 && strcmp(a, want)))
            die_input("%s:%d: --sizes: expected 'BYTES' or '%s BYTES' (file %d of the recipe), got '%.200s'", file, ln,
                      want, k + 1, a);
        char *end;
        unsigned long long v = strtoull(num, &end, 10);
        if (*end || num[0] == '-' || v % 4)
            die_input("%s:%d: --sizes: '%s' is not a size in bytes (a multiple of 4: uint32 tokens)", file, ln, num);
        out[k++] = v / 4;
    }
    free(line);
    fclose(f);
    if (k != n) die_input("%s: --sizes: %d sizes for the recipe's %d files", file, k, n);
    return out;
}

int cmd_data(int argc, char **argv) {
    if (argc < 2 || cli_wants_help(argc, argv)) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "verify")) return cmd_data_verify(argc - 1, argv + 1);
    if (strcmp(sub, "info") && strcmp(sub, "order")) {
        fprintf(stderr, "olmo: error: olmo data: unknown subcommand '%s'\n", sub);
        usage(stderr);
        return 2;
    }
    if (argc < 3) die_input("olmo data %s: give a recipe file", sub);
    const char *path = argv[2];
    char **ov = xmalloc((size_t)argc * sizeof(char *));
    int n_ov = 0, batches = 0, json = 0, has_rank = 0, has_world = 0, where = 0, has_describe = 0;
    const char *sizes = NULL;
    uint64_t epoch = 1, start = 0, count = UINT64_MAX, rank = 0, world = 1, n_describe = 0, cp = 1;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--epoch")) { epoch = parse_u64(a, v); i++; }
        else if (!strcmp(a, "--start")) { start = parse_u64(a, v); i++; }
        else if (!strcmp(a, "--count")) { count = parse_u64(a, v); i++; }
        else if (!strcmp(a, "--rank")) { rank = parse_u64(a, v); has_rank = 1; i++; }
        else if (!strcmp(a, "--world")) { world = parse_u64(a, v); has_world = 1; i++; }
        else if (!strcmp(a, "--context-parallel")) { cp = parse_u64(a, v); i++; }
        else if (!strcmp(a, "--batches")) batches = 1;
        else if (!strcmp(a, "--describe")) { n_describe = parse_u64(a, v); has_describe = 1; i++; }
        else if (!strcmp(a, "--where")) where = 1;
        else if (!strcmp(a, "--sizes") && v) { sizes = v; where = 1; i++; }
        else if (!strcmp(a, "--json")) json = 1;
        else if (a[0] != '-' && strchr(a, '=')) ov[n_ov++] = argv[i];
        else die_input("olmo data %s: unknown argument '%s' (overrides are key=value)", sub, a);
    }
    if (has_rank != has_world) die_input("olmo data order: give --rank and --world together");
    if (has_describe && (strcmp(sub, "order") || has_rank || batches || where))
        die_input("olmo data order: --describe K goes without --rank, --batches, --where and --sizes");
    if (where && (has_rank || batches)) die_input("olmo data order: --where / --sizes go without --rank and --batches");
    if (world < 1 || world > 4096 || rank >= world)
        die_input("olmo data order: --rank %" PRIu64 " --world %" PRIu64 " is invalid", rank, world);

    if (cp != 1 && (!has_rank || cp < 1 || world % cp))
        die_input("olmo data order: --context-parallel %" PRIu64 " needs --rank/--world with C >= 1 dividing --world %" PRIu64,
                  cp, world);

    static Recipe r;
    recipe_load(&r, path, n_ov, ov);
    if (cp > 1 && r.seq_len % (2 * (int)cp))
        die_input("olmo data order: --context-parallel %" PRIu64 " needs train.seq_len divisible by %" PRIu64 ", got %d", cp,
                  2 * cp, r.seq_len);
    LoaderConfig cfg;
    recipe_loader_config(&r, &cfg, (int)(world / cp), (int)(rank / cp));   // a group reads as one rank (trainer.c)
    if (cp > 1) {
        const int ch = r.seq_len / (2 * (int)cp), j = (int)(rank % cp);
        fprintf(stderr, "rank %" PRIu64 ": member %d of context-parallel group %" PRIu64 " of %" PRIu64 " (C = %" PRIu64
                "): positions [%d, %d) and [%d, %d) of each of the group's instances\n", rank, j, rank / cp, world / cp,
                cp, j * ch, (j + 1) * ch, (int)(2 * cp - 1 - j) * ch, (int)(2 * cp - j) * ch);
    }
    cfg.prefetch = 0;
    cfg.verbose = 0;
    uint64_t *fake = sizes ? read_sizes(sizes, &cfg) : NULL;
    cfg.fake_tokens = fake;
    Loader *L = loader_create(&cfg);
    free(fake);

    if (!strcmp(sub, "info")) {
        if (json) {
            cJSON *o = loader_describe(L);
            char *s = cJSON_Print(o);
            printf("%s\n", s);
            free(s);
            cJSON_Delete(o);
        } else {
            loader_print_summary(L, stdout);
        }
    } else if (!has_rank) {
        uint64_t N = loader_num_instances(L), gb = (uint64_t)r.global_batch;
        uint32_t *perm = xmalloc(N * sizeof(uint32_t));
        if (!strcmp(r.data_order, "shuffle")) olmo_global_order(r.data_seed + epoch, perm, N);
        else for (uint64_t i = 0; i < N; i++) perm[i] = (uint32_t)i;
        if (has_describe) {
            describe(L, &r, perm, N, start, n_describe, json);
        } else if (batches) {
            uint64_t nb = N / gb;
            for (uint64_t b = start, k = 0; b < nb && k < count; b++, k++)
                for (uint64_t i = 0; i < gb; i++) printf("%" PRIu32 "%c", perm[b * gb + i], i + 1 < gb ? ' ' : '\n');
        } else {
            for (uint64_t i = start, k = 0; i < N && k < count; i++, k++) {
                if (!where) {
                    printf("%" PRIu32 "\n", perm[i]);
                    continue;
                }
                const char *file;
                uint64_t off;
                loader_instance_where(L, perm[i], &file, &off);
                printf("%" PRIu32 " %s %" PRIu64 "\n", perm[i], file, off);
            }
        }
        free(perm);
    } else {
        // Walk the loader itself (so the bug switch shows), from (epoch, batch start).
        uint64_t nb = loader_batches_per_epoch(L), gb = (uint64_t)r.global_batch, per = loader_rank_instances(L);
        if (start >= nb) die_input("olmo data order: --start %" PRIu64 " is past the %" PRIu64 " batches of an epoch", start, nb);
        LoaderState st;
        loader_get_state(L, &st);
        st.epoch = epoch;
        st.epoch_instances = start * gb;
        st.tokens_processed = 0;
        loader_set_state(L, &st, 0);
        uint32_t *ids = xmalloc(per * sizeof(uint32_t));
        int32_t *in = xmalloc(per * (size_t)r.seq_len * sizeof(int32_t));
        int32_t *tg = xmalloc(per * (size_t)r.seq_len * sizeof(int32_t));
        uint64_t printed = 0;
        for (uint64_t b = start; b < nb && printed < count; b++) {
            loader_peek_ids(L, ids);
            for (uint64_t i = 0; i < per && printed < count; i++) {
                if (batches) printf("%" PRIu32 "%c", ids[i], i + 1 < per ? ' ' : '\n');
                else { printf("%" PRIu32 "\n", ids[i]); printed++; }
            }
            if (batches) printed++;
            loader_next_batch(L, in, tg);
        }
        free(ids);
        free(in);
        free(tg);
    }
    loader_free(L);
    recipe_loader_config_free(&cfg);
    free(ov);
    return 0;
}
