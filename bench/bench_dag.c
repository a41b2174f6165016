/* bench_dag.c - type inference and the gradient on programs whose types grow along a chain, and
 * on long chains of forward references (not a test; tests/types/test_dag.c is).
 *
 *   bench_dag [-r REPS] [N...]     default: N = 100000 1000000, REPS = 3
 *
 * For each N, each shape is generated as Relay text and parsed (not timed), then the measured
 * step is timed (best of REPS, each on a fresh parse). The gradient shapes use N/10 lets:
 *   grow       infer: N lets, each nesting the tuple type one level deeper,
 *              `let %a1 = (%a0, %x);` (the last type is N deep)
 *   closures   infer: the same through N closures whose parameter types are inferred,
 *              `let %f1 = fn (%p) { (%p, %x) }; let %a1 = %f1(%a0);`
 *   globals    infer: N globals, each calling the next one, defined after it,
 *              `def @f0() { add(@f1(), 1f) }` (the result types are known only at the end)
 *   grad-ho    the gradient (higher-order mode) of N/10 lets of the grow chain with an
 *   grad-fo    operator each, `let %a1 = (%a0, multiply(%x, %x));`, then its first-order
 *              mode: the transform and the type inference of its output
 * With two or more N it prints each shape's scaling ratio time(N_last)/time(N_first) and fails
 * (exit 1) when one exceeds 2 x N_last/N_first (the work is linear; the slack is for memory
 * effects, as in bench_infer). */
#include <stdio.h>
#include <time.h>

#include "bench.h"

#include "frontend/text/text.h"
#include "passes/passes.h"
#include "types/types.h"

enum { GROW, CLOSURES, GLOBALS, GRAD_HO, GRAD_FO, N_SHAPES };
static const char *const names[N_SHAPES] = {"grow", "closures", "globals", "grad-ho", "grad-fo"};

static void gen(StrBuf *sb, int shape, long n) {
    sb_puts(sb, "#[version = \"0.0.5\"]\n");
    switch (shape) {
    case GROW:
        sb_puts(sb, "def @main(%x: Tensor[(2), float32]) {\n  let %a0 = (%x,);\n");
        for (long i = 1; i <= n; i++)
            sb_printf(sb, "  let %%a%ld = (%%a%ld, %%x);\n", i, i - 1);
        sb_printf(sb, "  %%a%ld\n}\n", n);
        return;
    case CLOSURES:
        sb_puts(sb, "def @main(%x: float32) {\n  let %a0 = (%x,);\n");
        for (long i = 1; i <= n; i++)
            sb_printf(sb,
                      "  let %%f%ld = fn (%%p) { (%%p, %%x) };\n  let %%a%ld = %%f%ld(%%a%ld);\n",
                      i, i, i, i - 1);
        sb_printf(sb, "  %%a%ld\n}\n", n);
        return;
    case GLOBALS:
        for (long i = 0; i + 1 < n; i++)
            sb_printf(sb, "def @f%ld() { add(@f%ld(), 1f) }\n", i, i + 1);
        sb_printf(sb, "def @f%ld() { 1f }\n", n - 1);
        return;
    default:
        sb_puts(sb, "def @main(%x: Tensor[(2), float32]) {\n  let %a0 = (sin(%x),);\n");
        for (long i = 1; i <= n; i++)
            sb_printf(sb, "  let %%a%ld = (%%a%ld, multiply(%%x, %%x));\n", i, i - 1);
        sb_printf(sb, "  (%%a%ld, %%a%ld.0.0.1)\n}\n", n, n);
        return;
    }
}

static double run(int shape, const char *text, bool *ok) {
    Ctx *ctx = ir_ctx_new();
    Module *m = text_parse(ctx, "gen", text, strlen(text), NULL, 0);
    double t = 0;
    bool good = m != NULL;
    if (good && (shape == GRAD_HO || shape == GRAD_FO)) {
        good = ty_infer_module(m);
        double t0 = bench_now();
        good =
            good && pass_gradient(m, "main", shape == GRAD_HO ? GRAD_HIGHER : GRAD_FIRST, "grad");
        t = bench_now() - t0;
    } else if (good) {
        double t0 = bench_now();
        good = ty_infer_module(m);
        t = bench_now() - t0;
    }
    if (!good) {
        StrBuf d = {0};
        diags_render(&ctx->diags, 0, &d);
        fprintf(stderr, "%s: %.2000s\n", names[shape], sb_cstr(&d));
        sb_free(&d);
        *ok = false;
    }
    ir_ctx_free(ctx);
    return t;
}

int main(int argc, char **argv) {
    int reps;
    long sizes[16];
    int n_sizes = bench_sizes(argc, argv, &reps, sizes);
    bool ok = true;
    double first[N_SHAPES] = {0}, last[N_SHAPES] = {0};
    printf("%-9s %9s %10s %12s\n", "shape", "N", "time (s)", "N/s");
    for (int k = 0; k < N_SHAPES; k++) {
        for (int s = 0; s < n_sizes; s++) {
            StrBuf sb = {0};
            long n = k >= GRAD_HO ? sizes[s] / 10 : sizes[s];
            gen(&sb, k, n);
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                double t = run(k, sb_cstr(&sb), &ok);
                if (t < best) best = t;
            }
            printf("%-9s %9ld %10.4f %12.0f\n", names[k], n, best,
                   (double)n / (best > 0 ? best : 1e-9));
            fflush(stdout);
            if (s == 0) first[k] = best;
            last[k] = best;
            sb_free(&sb);
        }
    }
    if (n_sizes >= 2) {
        double x = (double)sizes[n_sizes - 1] / (double)sizes[0], limit = 2.0 * x;
        for (int k = 0; k < N_SHAPES; k++) {
            double ratio = last[k] / (first[k] > 0 ? first[k] : 1e-9);
            printf("%s: scaling x%.1f for x%.0f N (limit x%.1f)%s\n", names[k], ratio, x, limit,
                   ratio > limit ? "  EXCEEDED" : "");
            if (ratio > limit) ok = false;
        }
    }
    return ok ? 0 : 1;
}
