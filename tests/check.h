// check.h: the CHECK macro of the C tests: a failed condition prints file:line and a
// message, and is counted in `failures` (the test exits non-zero when it is not 0).
#ifndef OLMO_TEST_CHECK_H
#define OLMO_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

// Where a test puts its files: $TMPDIR as mktemp uses it, else /tmp.
static inline const char *test_tmpdir(void) {
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

static int failures = 0;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            failures++;                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
        }                                                        \
    } while (0)

#endif
