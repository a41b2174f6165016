/* bench_eval.c - the reference interpreter's overhead per step (not a test).
 *
 *   bench_eval [-r REPS] [N]     default: N = 1000000, REPS = 3
 *
 * Times (best of REPS, parse and type inference included, both negligible here) three programs
 * through rly_module_run:
 *   loop:  a tail-recursive scalar loop of N iterations, three operator calls each
 *          (less, add, add) - the issue's target is 10^6 iterations in under 2 s;
 *   deep:  non-tail recursion N deep (equal, subtract, add per level), frames on the heap;
 *   list:  build a List of N cells with constructors, then @length over it (prelude).
 * Prints one line per program: N, seconds, and nanoseconds per iteration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rly/rly.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double run_once(const char *text, int prelude) {
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *m = NULL;
    double t0 = now();
    rly_status st = prelude ? rly_module_prelude(ctx, &m) : RLY_STATUS_OK;
    if (st == RLY_STATUS_OK)
        st = prelude ? rly_module_parse_into(m, text, strlen(text), "bench")
                     : rly_module_parse(ctx, text, strlen(text), "bench", &m);
    char *out = NULL;
    rly_run_options o = {0};
    if (st == RLY_STATUS_OK) st = rly_module_run(m, &o, &out);
    double t = now() - t0;
    if (st != RLY_STATUS_OK) {
        fprintf(stderr, "bench_eval: %s\n", rly_last_error());
        exit(1);
    }
    free(out);
    rly_ctx_free(ctx);
    return t;
}

/* tmpl with each "@N@" replaced by n (templates are ours: they fit). */
static void subst(char *out, size_t cap, const char *tmpl, long n) {
    size_t k = 0;
    while (*tmpl && k + 32 < cap) {
        if (strncmp(tmpl, "@N@", 3) == 0) {
            k += (size_t)snprintf(out + k, cap - k, "%ld", n);
            tmpl += 3;
        } else {
            out[k++] = *tmpl++;
        }
    }
    out[k] = '\0';
}

int main(int argc, char **argv) {
    int reps = 3;
    long n = 1000000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else
            n = atol(argv[i]);
    }
    char text[1024];
    struct {
        const char *name, *fmt;
        int prelude;
    } progs[] = {
        {"loop",
         "#[version = \"0.0.5\"]\n"
         "def @loop(%i: int32, %acc: int32) -> int32 {\n"
         "  if (less(%i, @N@)) { @loop(add(%i, 1), add(%acc, 2)) } else { %acc }\n"
         "}\n"
         "def @main() { @loop(0, 0) }\n",
         0},
        {"deep",
         "#[version = \"0.0.5\"]\n"
         "def @count(%n: int32) -> int32 {\n"
         "  if (equal(%n, 0)) { 0 } else { add(1, @count(subtract(%n, 1))) }\n"
         "}\n"
         "def @main() { @count(@N@) }\n",
         0},
        {"list",
         "#[version = \"0.0.5\"]\n"
         "def @build(%n: int32, %acc: List[int32]) -> List[int32] {\n"
         "  if (equal(%n, 0)) { %acc } else { @build(subtract(%n, 1), Cons(%n, %acc)) }\n"
         "}\n"
         "def @main() { @length(@build(@N@, Nil)) }\n",
         1},
    };
    for (size_t p = 0; p < sizeof progs / sizeof *progs; p++) {
        subst(text, sizeof text, progs[p].fmt, n);
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t = run_once(text, progs[p].prelude);
            if (t < best) best = t;
        }
        printf("%-5s N=%ld  %.3f s  %.0f ns/iteration\n", progs[p].name, n, best, best * 1e9 / n);
    }
    return 0;
}
