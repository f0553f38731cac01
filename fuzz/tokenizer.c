// Fuzz tokenizer_load (tokenizer.json), then encode/decode a few strings with what loaded.
#include "util.c"
#include "data/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    const char *p = fz_write("tokenizer.json", d, n);
    Tokenizer *volatile tok = NULL;
    FZ_TRY {
        tok = tokenizer_load(p);
        static const char *texts[] = {"Hello, world! 123 <|endoftext|> it's", "\xc3\xa9t\xc3\xa9  \n\n x", "", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
        for (int i = 0; i < 4; i++) {
            uint32_t *ids = NULL;
            size_t nid = 0, cap = 0;
            for (int sp = 0; sp < 2; sp++)
                if (tokenizer_encode(tok, texts[i], strlen(texts[i]), sp, &ids, &nid, &cap) != 0) abort();
            size_t len;
            char *back = tokenizer_decode(tok, ids, nid, &len);
            if (!back) abort();
            free(back);
            free(ids);
        }
        FZ_DONE;
    }
    tokenizer_free(tok);
    unlink(p);
    return 0;
}
