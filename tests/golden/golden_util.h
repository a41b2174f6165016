/* golden_util.h - what the golden drivers (golden.c, passes.c) and the unit tests that run
 * golden cases (tests/unit/pass_check.c, test_passes_fuse.c) share: a folder's sorted case files,
 * a file's text, the directives in a case's leading comments, RLY_UPDATE_GOLDEN, and the loop
 * over a folder that closes with `N passed, N failed`. */
#ifndef RLY_TESTS_GOLDEN_UTIL_H
#define RLY_TESTS_GOLDEN_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* RLY_UPDATE_GOLDEN=1: write the expectations instead of comparing. */
bool golden_update_requested(void);

/* The NAME.rly files of dir, sorted by name, into *out (each name and the array freed with
 * free()); their number, 0 when dir cannot be opened. cases_only leaves out NAME.expected.rly
 * (the expectations of tests/golden/passes). */
size_t golden_list(const char *dir, bool cases_only, char ***out);

/* The text of the file at path, NUL-terminated, its length in *len (when len is not NULL); free
 * with free(). NULL, after a `FAIL` line on stderr that says why, when it cannot be read. */
char *golden_read(const char *path, size_t *len);

/* The value of directive `key` in the leading lines of text (comments and `#[...]` headers):
 * `// key: value` or `// key` (an empty value), copied into buf; false when absent. */
bool golden_directive(const char *text, const char *key, char *buf, size_t cap);

/* run(dir, NAME) for every file golden_list gives; prints `N passed, N failed` (a folder without
 * cases is a failure) and returns the exit status. */
int golden_run_dir(const char *dir, bool cases_only,
                   bool (*run)(const char *dir, const char *name));

#endif
