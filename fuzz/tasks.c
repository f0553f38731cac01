// Fuzz eval_task_load (multiple-choice task JSONL), tokenizing with dolma2.
#include "util.c"
#include "eval/eval_internal.h"

static Evaluator E;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char *path = tokenizer_resolve_path(getenv("FUZZ_TOKENIZER"));
    if (access(path, R_OK) != 0) {   // no dolma2 here: the small seed tokenizer will do
        free(path);
        path = strdup("fuzz/corpus/tokenizer/small.json");
    }
    E.tok = tokenizer_load(path);
    free(path);
    E.eos = tokenizer_eos_id(E.tok);
    E.vocab = (int)tokenizer_vocab_size(E.tok);
    E.max_examples = 50;
    // Create this thread's tokenizer state now, outside the tracked allocations of an input.
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    tokenizer_encode(E.tok, "warm up", 7, 0, &ids, &n, &cap);
    free(ids);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    const char *p = fz_write("task.jsonl", d, n);
    char spec[300];
    snprintf(spec, sizeof spec, "t=%s", p);
    static EvalTask t;
    memset(&t, 0, sizeof t);
    volatile int ok = 0;
    FZ_TRY {
        eval_task_load(&E, &t, spec, NULL);   // NULL: the path as given
        FZ_DONE;
        ok = 1;
    }
    if (ok) eval_task_free(&t);
    unlink(p);
    return 0;
}
