// Fuzz loader_create on a token file (raw uint32): the first 4 input bytes choose
// seq_len, batch sizes, vocab and order; the rest is the file. Serves a few batches and
// round-trips the state through JSON.
// FUZZ_LDFLAGS: -Wl,--wrap=mmap -Wl,--wrap=munmap
#include "util.c"
#include <fcntl.h>
#include <sys/mman.h>
#include <cjson/cJSON.h>
#include "data/loader.h"

// A rejected input longjmps out of loader_create with its files still mapped and maybe an
// fd open (the process would exit there). Track the loader's mappings (ld --wrap) and
// release them (util.c closes stray fds), so a long run does not run out of either.
void *__real_mmap(void *a, size_t l, int p, int f, int fd, off_t o);
int __real_munmap(void *a, size_t l);
static struct { void *a; size_t l; } maps[256];
static int nmaps;
void *__wrap_mmap(void *a, size_t l, int p, int f, int fd, off_t o) {
    void *r = __real_mmap(a, l, p, f, fd, o);
    if (r != MAP_FAILED && nmaps < 256) { maps[nmaps].a = r; maps[nmaps].l = l; nmaps++; }
    return r;
}
int __wrap_munmap(void *a, size_t l) {
    for (int i = 0; i < nmaps; i++)
        if (maps[i].a == a) { maps[i] = maps[--nmaps]; break; }
    return __real_munmap(a, l);
}
static void release_maps(void) {
    while (nmaps > 0) { nmaps--; __real_munmap(maps[nmaps].a, maps[nmaps].l); }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n < 4) return 0;
    const char *p = fz_write("tokens.u32", d + 4, n - 4);
    static LoaderConfig c;
    memset(&c, 0, sizeof c);
    c.n_sources = 1;
    snprintf(c.sources[0].name, sizeof c.sources[0].name, "data");
    char *files[1] = {(char *)p};
    c.sources[0].n_files = 1;
    c.sources[0].files = files;
    c.seq_len = 1 + (d[0] & 15);             // 1..16 (1 must be refused)
    c.micro_batch = 1 + (d[1] & 3);
    c.global_batch = c.micro_batch * (1 + ((d[1] >> 2) & 3));
    c.vocab_size = d[2] ? d[2] * 1000 : 0;   // 0 must be refused
    c.shuffle = d[3] & 1;
    c.seed = d[3] >> 1;
    c.world_size = 1 + ((d[3] >> 5) & 1);
    c.rank = (d[3] >> 6) & 1;
    Loader *volatile L = NULL;
    nmaps = 0;
    FZ_TRY {
        L = loader_create(&c);
        int per = (int)loader_rank_instances(L);   // this rank's block (uneven when W does not divide it)
        int32_t *in = malloc(sizeof(int32_t) * (size_t)per * (size_t)c.seq_len);
        int32_t *tg = malloc(sizeof(int32_t) * (size_t)per * (size_t)c.seq_len);
        for (int b = 0; b < 3; b++) loader_next_batch(L, in, tg);
        LoaderState s, s2;
        loader_get_state(L, &s);
        cJSON *j = loader_state_to_json(&s);
        if (loader_state_from_json(j, &s2) != 0) abort();
        cJSON_Delete(j);
        loader_set_state(L, &s2, 0);
        loader_next_batch(L, in, tg);
        free(in);
        free(tg);
        FZ_DONE;
    }
    if (L) loader_free(L);
    else release_maps();
    unlink(p);
    return 0;
}
