/* test_passes_fold.c - FoldConstant, DeadCodeElimination, EliminateCommonSubexpr and
 * DynamicToStatic on programs 10^5 nodes long (their goldens are tests/golden/passes/<Pass>/):
 * no C recursion over the chain, time linear in it. Each case builds a program of n links, runs
 * the pass and compares the result with the program it must give, at n/10 with every type
 * verified and at n without; it prints both times (the pipeline's: inference once, then the
 * pass, with verification at n/10) and their ratio (about 10 when linear, more where the tables
 * outgrow the caches; the whole suite runs under ASan, so the times are ASan's).
 *
 *   fold_lets      let %x1 = add(%x0, 1f); ... (from a constant): one constant
 *   fold_graph     the same chain in graph form (nested calls): one constant
 *   fold_params    the same chain from a parameter: nothing folds, the chain is rebuilt as is
 *   dce_dead       a chain of lets that only feed each other: all dropped
 *   dce_inline     a chain of single-use lets with inline_once: one nested expression
 *   cse_chain      two equal calls per link: one node
 *   dyn_chain      dyn.reshape(%x, shape_of(%x0)) per link: static reshapes, types refined
 *
 * `test_passes_fold CASE` runs one case (CTest runs each as its own test); RLY_DEEP_N overrides
 * 10^5. Closes with `N passed, N failed`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rly/rly.h"
#include "support/support.h"

#include "pass_check.h"

/* A program of n links, and the program the pass must make of it. */
typedef void (*Gen)(long n, StrBuf *in, StrBuf *want);

static void gen_fold_lets(long n, StrBuf *in, StrBuf *want) {
    sb_puts(in, HDR "def @main() {\n  let %x0 = 1f;\n");
    for (long i = 1; i <= n; i++)
        sb_printf(in, "  let %%x%ld = add(%%x%ld, 1f);\n", i, i - 1);
    sb_printf(in, "  %%x%ld\n}\n", n);
    sb_printf(want, HDR "def @main() { %ldf }\n", n + 1);
}

static void gen_fold_graph(long n, StrBuf *in, StrBuf *want) {
    sb_puts(in, HDR "def @main() {\n  %0 = add(1f, 1f);\n");
    for (long i = 1; i < n; i++)
        sb_printf(in, "  %%%ld = add(%%%ld, 1f);\n", i, i - 1);
    sb_printf(in, "  %%%ld\n}\n", n - 1);
    sb_printf(want, HDR "def @main() { %ldf }\n", n + 1);
}

static void gen_fold_params(long n, StrBuf *in, StrBuf *want) {
    sb_puts(in, HDR "def @main(%x0: float32) {\n");
    for (long i = 1; i <= n; i++)
        sb_printf(in, "  let %%x%ld = add(%%x%ld, 1f);\n", i, i - 1);
    sb_printf(in, "  %%x%ld\n}\n", n);
    sb_puts(want, sb_cstr(in));
}

static void gen_dce_dead(long n, StrBuf *in, StrBuf *want) {
    sb_puts(in, HDR "def @main(%x0: float32) {\n");
    for (long i = 1; i <= n; i++)
        sb_printf(in, "  let %%x%ld = add(%%x%ld, 1f);\n", i, i - 1);
    sb_puts(in, "  %x0\n}\n");
    sb_puts(want, HDR "def @main(%x0: float32) { %x0 }\n");
}

static void gen_dce_inline(long n, StrBuf *in, StrBuf *want) {
    gen_fold_params(n, in, want);
    want->len = 0;
    sb_puts(want, HDR "def @main(%x0: float32) {\n  %0 = add(%x0, 1f);\n");
    for (long i = 1; i < n; i++)
        sb_printf(want, "  %%%ld = add(%%%ld, 1f);\n", i, i - 1);
    sb_printf(want, "  %%%ld\n}\n", n - 1);
}

static void gen_cse_chain(long n, StrBuf *in, StrBuf *want) {
    sb_puts(in, HDR "def @main(%a0: float32) {\n");
    sb_puts(want, HDR "def @main(%a0: float32) {\n");
    for (long i = 1; i <= n; i++) {
        sb_printf(in, "  let %%a%ld = multiply(add(%%a%ld, 1f), add(%%a%ld, 1f));\n", i, i - 1,
                  i - 1);
        sb_printf(want, "  %%%ld = add(%%a%ld, 1f);\n  let %%a%ld = multiply(%%%ld, %%%ld);\n", i,
                  i - 1, i, i, i);
    }
    sb_printf(in, "  %%a%ld\n}\n", n);
    sb_printf(want, "  %%a%ld\n}\n", n);
}

static void gen_dyn_chain(long n, StrBuf *in, StrBuf *want) {
    const char *head = HDR "def @main(%x0: Tensor[(2, 3), float32]) {\n";
    sb_puts(in, head);
    sb_puts(want, head);
    for (long i = 1; i <= n; i++) {
        sb_printf(in, "  let %%x%ld = dyn.reshape(%%x%ld, shape_of(%%x0));\n", i, i - 1);
        sb_printf(want, "  let %%x%ld = reshape(%%x%ld, newshape=[2, 3]);\n", i, i - 1);
    }
    sb_printf(in, "  %%x%ld\n}\n", n);
    sb_printf(want, "  %%x%ld\n}\n", n);
}

/* Run `passes` over the program of n links; the seconds it took, or -1 after a failure. */
static double run_once(const char *what, Gen gen, long n, const char *passes, int verify) {
    StrBuf in = {0}, want = {0};
    gen(n, &in, &want);
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *m = NULL, *w = NULL;
    double dt = -1;
    if (rly_module_parse(ctx, in.data, in.len, what, &m) != RLY_STATUS_OK ||
        rly_module_parse(ctx, want.data, want.len, "want", &w) != RLY_STATUS_OK ||
        rly_module_infer(w) != RLY_STATUS_OK) {
        CHECK(false, "%s: does not load: %s", what, rly_last_error());
        goto done;
    }
    /* every type checked at n/10; at n the time is the pipeline's (inference once, the pass) */
    rly_opt_options o = {.opt_level = 3, .passes = passes, .verify_types = verify};
    double t0 = pc_now();
    rly_status st = rly_module_optimize(m, &o, NULL);
    dt = pc_now() - t0;
    CHECK(st == RLY_STATUS_OK, "%s: %s failed: %s", what, passes, rly_last_error());
    int equal = 0;
    if (st == RLY_STATUS_OK) rly_module_compare(m, w, &equal);
    CHECK(equal, "%s (n = %ld): %s gives a different program: %s", what, n, passes,
          rly_last_error());
done:
    rly_ctx_free(ctx);
    sb_free(&in);
    sb_free(&want);
    return dt;
}

static void run_case(const char *what, Gen gen, long n, const char *passes) {
    double small = run_once(what, gen, n / 10, passes, 1), big = run_once(what, gen, n, passes, 0);
    if (small >= 0 && big >= 0)
        printf("%-12s %-40s n=%-7ld %7.3f s   n=%-7ld %7.3f s   x%.1f\n", what, passes, n / 10,
               small, n, big, small > 0 ? big / small : 0);
}

typedef struct Case {
    const char *name;
    Gen gen;
    const char *passes;
} Case;

static const Case cases[] = {
    {"fold_lets", gen_fold_lets, "FoldConstant"},
    {"fold_graph", gen_fold_graph, "FoldConstant"},
    {"fold_params", gen_fold_params, "FoldConstant"},
    {"dce_dead", gen_dce_dead, "DeadCodeElimination"},
    {"dce_inline", gen_dce_inline, "DeadCodeElimination(inline_once=True)"},
    {"cse_chain", gen_cse_chain, "EliminateCommonSubexpr"},
    {"dyn_chain", gen_dyn_chain, "DynamicToStatic"},
};

/* test_passes_fold [CASE]: one case (CTest runs each as its own test), or all of them. */
int main(int argc, char **argv) {
    long n = getenv("RLY_DEEP_N") ? atol(getenv("RLY_DEEP_N")) : 100000;
    if (n < 10) n = 10;
    bool found = false;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) continue;
        run_case(cases[i].name, cases[i].gen, n, cases[i].passes);
        found = true;
    }
    CHECK(found, "no case %s", argc > 1 ? argv[1] : "");
    return pc_summary();
}
