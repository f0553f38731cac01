// Fuzz manifest_load (manifest.json of `olmo prepare`).
#include "util.c"
#include "data/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    const char *p = fz_write("manifest.json", d, n);
    Manifest *volatile m = NULL;
    FZ_TRY {
        m = manifest_load(p);
        (void)manifest_find(m, "news", "train");
        FZ_DONE;
    }
    if (m) manifest_free(m);
    unlink(p);
    return 0;
}
