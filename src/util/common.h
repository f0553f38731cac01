// common.h: error reporting, checked allocation, atomic file writes and small
// helpers shared by every module. Bad user input exits with status 2 (EXIT_BADINPUT)
// after a message that names the file/key and what was expected; internal failures
// (out of memory, I/O errors on our own outputs) exit with status 1.
#ifndef OLMO_COMMON_H
#define OLMO_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_BADINPUT 2

// Print "olmo: error: <msg>" to stderr and exit(EXIT_BADINPUT).
void die_input(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
// Print "olmo: error: <msg>" to stderr and exit(1).
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
// Fuzzing/test hook: when set, die_input() and die() print their message and then call
// hook() instead of exit(); the hook must not return (e.g. it longjmps back into a fuzz
// harness). NULL (the default) restores exit().
void common_set_die_hook(void (*hook)(void));
void warnf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
// 64-byte aligned allocation (for SIMD-friendly buffers); free with free().
void *xmalloc_aligned(size_t n);

// Read a whole file into memory (NUL-terminated). Returns NULL and sets errno on failure.
char *read_file_all(const char *path, size_t *len_out);

// Atomic write: data goes to "<path>.tmp.<pid>", is fsync'd, then renamed over <path>,
// and the directory is fsync'd. Returns 0 on success, -1 (errno set) on failure; on
// failure the temp file is removed and <path> is untouched.
int write_file_atomic(const char *path, const void *data, size_t len);
// fsync a directory so a rename inside it is durable.
int fsync_dir(const char *dir);
// mkdir -p; returns 0 on success.
int mkdir_p(const char *path);

// Levenshtein distance of two strings (1000 when either is over 127 characters): the
// "did you mean" of recipe keys and commands.
int edit_distance(const char *a, const char *b);

double now_seconds(void);        // monotonic clock
size_t peak_rss_bytes(void);     // VmHWM of this process

#endif
