/* check.h - the small harness of the plain-C test drivers: CHECK counts and reports, and
 * check_summary() prints the closing `N passed, N failed` line CI reads. */
#ifndef RLY_TESTS_CHECK_H
#define RLY_TESTS_CHECK_H

#include <stdio.h>

static int n_pass, n_fail;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            n_pass++;                                                                              \
        } else {                                                                                   \
            n_fail++;                                                                              \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* The module header, for texts built in tests. */
#define HDR "#[version = \"0.0.5\"]\n"

/* Print the closing line; the exit status for main. */
static inline int check_summary(void) {
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}

#endif
