// Fuzz the checkpoint checksum file parser (ckpt_sums_parse, src/io/ckpt_verify.c) past
// its own CRC: the input gets the correct "end <crc32c>" line appended, so the line parser
// and the cover checks see arbitrary text. Whatever parses is then checked against the
// input bytes as each listed file's contents (sizes must match before any byte is read).
#include "util.c"
#include "io/ckpt_verify.h"
#include "util/crc32c.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char *txt = malloc(n + 16);
    memcpy(txt, d, n);
    int k = snprintf(txt + n, 16, "end %08x\n", crc32c(0, d, n));
    CkptSums s;
    char err[1024];
    if (ckpt_sums_parse("checksums.txt", txt, n + (size_t)k, &s, err, sizeof err) == 0) {
        for (int i = 0; i < s.n; i++) {
            const CkptSumFile *f = ckpt_sums_find(&s, s.f[i].name);
            if (f != &s.f[i]) abort();   // names are unique
            ckpt_sums_check(f, -1, f->name, d, n, NULL, 0, err, sizeof err);
            ckpt_sums_check(f, 1, f->name, d, n, NULL, 0, err, sizeof err);
        }
        ckpt_sums_free(&s);
    }
    free(txt);
    return 0;
}
