// Fuzz the JSONL corpus line parser of `olmo prepare` (parse_jsonl_line, static in
// prepare.c, hence the #include) and the UTF-8 validator the tokenizer applies next.
#include "util.c"
#include "data/prepare.c"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char *line = fz_str(d, n);
    Doc doc;
    memset(&doc, 0, sizeof doc);
    parse_jsonl_line(line, n, &doc);
    if (doc.status == DOC_OK || doc.status == DOC_EMPTY) {
        if (!doc.text || strlen(doc.text) != doc.len) abort();
        size_t off = tokenizer_utf8_error_offset(doc.text, doc.len);
        if (off > doc.len) abort();
    }
    free(doc.owned);
    free(line);
    return 0;
}
