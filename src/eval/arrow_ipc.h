// arrow_ipc.h: a minimal reader of Apache Arrow IPC files (the stream format, as HF
// `datasets.save_to_disk` writes its data-*.arrow files, and the file format), for the
// column types a table of text questions uses: utf8 / large_utf8 strings, signed and
// unsigned integers up to 64 bits, and list / large_list of strings. Other types are
// read past (their columns are kind ARROW_OTHER); compressed bodies and dictionary
// batches are refused. Every offset and length is checked against the file; bad input
// exits 2 naming the file and what was wrong. Used by olmes_mmlu.c.
#ifndef OLMO_ARROW_IPC_H
#define OLMO_ARROW_IPC_H

#include <stdint.h>

typedef enum { ARROW_OTHER, ARROW_STRING, ARROW_INT, ARROW_STRING_LIST } ArrowKind;

typedef struct {
    char *name;
    ArrowKind kind;
    // ARROW_STRING: str[r] (NUL-terminated; NULL for a null value), r < nrows.
    // ARROW_STRING_LIST: row r's strings are str[off[r] .. off[r+1]) (a null row: none,
    // and null[r] set); ARROW_INT: i64[r].
    char **str;
    int64_t *off;
    int64_t *i64;
    unsigned char *null;   // per row: 1 where the value is null (all kinds but OTHER)
} ArrowColumn;

typedef struct {
    char *path;
    int ncols;
    ArrowColumn *cols;
    int64_t nrows;
} ArrowTable;

// Read every record batch of `path` (stream or file format) into t, rows concatenated.
void arrow_read(const char *path, ArrowTable *t);
// Append the rows of `path` to t (its schema must have the same names and kinds).
void arrow_read_append(const char *path, ArrowTable *t);
// The column called `name`, or NULL.
const ArrowColumn *arrow_column(const ArrowTable *t, const char *name);
void arrow_free(ArrowTable *t);

#endif
