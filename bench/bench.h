/* bench.h - what the benchmarks share: a monotonic clock and the `[-r REPS] [N...]` command line
 * of the scaling benchmarks (bench_infer, bench_dag). Header-only: each benchmark is one file. */
#ifndef RLY_BENCH_H
#define RLY_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Parse `[-r REPS] [N...]` into *reps (default 3) and sizes[0..return) (default 10^5 and 10^6,
 * at most 16); warn when the build is not optimized. */
static inline int bench_sizes(int argc, char **argv, int *reps, long sizes[16]) {
    int n_sizes = 0;
    *reps = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            *reps = atoi(argv[++i]);
        else if (n_sizes < 16)
            sizes[n_sizes++] = atol(argv[i]);
    }
    if (n_sizes == 0) {
        sizes[0] = 100000;
        sizes[1] = 1000000;
        n_sizes = 2;
    }
#ifndef NDEBUG
    printf("warning: not a release build; figures mean little\n");
#endif
    return n_sizes;
}

#endif /* RLY_BENCH_H */
