/* bench_infer.c - time of type inference over generated modules (not a test).
 *
 *   bench_infer [-r REPS] [N...]     default: N = 100000 1000000, REPS = 3
 *
 * For each N (a node count), two modules of about N expression nodes are generated as Relay text
 * and parsed (not timed), then ty_infer_module is timed (best of REPS, each on a fresh parse):
 *   deep: one function, a ResNet-like chain of residual blocks (nn.conv2d, nn.bias_add, nn.relu,
 *         add of the block's input), every block depending on the one before;
 *   wide: one function of many independent branches (nn.dense, add, nn.relu, sum) over shared
 *         inputs, gathered by a tuple, plus many small global functions that call each other.
 * With two or more N it reports the scaling ratio time(N_last)/time(N_first) and fails (exit 1)
 * when it exceeds 2 x N_last/N_first (the work is linear; past ~10^5 nodes the first touch of
 * arena memory, about 10 us per 4 KiB page on these machines, and cache misses add to it); it
 * also fails when a run does not check. */
#include <stdio.h>
#include <time.h>

#include "bench.h"

#include "frontend/text/text.h"
#include "types/types.h"

/* 4 nodes per block: 4 calls (the variables and operators are shared nodes) */
static void gen_deep(StrBuf *sb, long n) {
    sb_puts(sb, "#[version = \"0.0.5\"]\n"
                "def @main(%x: Tensor[(1, 16, 32, 32), float32], %w: Tensor[(16, 16, 3, 3), "
                "float32], %b: Tensor[(16), float32]) {\n");
    long blocks = n / 4;
    long t = 0;
    sb_puts(sb, "  %0 = nn.relu(%x);\n");
    for (long i = 0; i < blocks; i++) {
        long in = t;
        sb_printf(sb,
                  "  %%%ld = nn.conv2d(%%%ld, %%w, padding=[1, 1, 1, 1], channels=16, "
                  "kernel_size=[3, 3]);\n",
                  t + 1, in);
        sb_printf(sb, "  %%%ld = nn.bias_add(%%%ld, %%b);\n", t + 2, t + 1);
        sb_printf(sb, "  %%%ld = nn.relu(%%%ld);\n", t + 3, t + 2);
        sb_printf(sb, "  %%%ld = add(%%%ld, %%%ld);\n", t + 4, t + 3, in);
        t += 4;
    }
    sb_printf(sb, "  %%%ld\n}\n", t);
}

static void gen_wide(StrBuf *sb, long n) {
    sb_puts(sb, "#[version = \"0.0.5\"]\n");
    long n_globals = n / 20;
    for (long g = 0; g < n_globals; g++) {
        sb_printf(sb, "def @g%ld(%%a: Tensor[(4, 8), float32]) -> Tensor[(4, 8), float32] {\n", g);
        if (g == 0)
            sb_puts(sb, "  nn.relu(%a)\n}\n");
        else
            sb_printf(sb, "  %%0 = @g%ld(%%a);\n  add(%%0, %%a)\n}\n", g - 1);
    }
    sb_puts(sb, "def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(8, 8), float32]) {\n");
    long branches = (n - n_globals * 6) / 3;
    for (long i = 0; i < branches; i++) {
        sb_printf(sb, "  %%%ld = nn.dense(%%x, %%w);\n", 3 * i);
        sb_printf(sb, "  %%%ld = add(%%%ld, %%x);\n", 3 * i + 1, 3 * i);
        sb_printf(sb, "  %%%ld = sum(%%%ld, axis=[1]);\n", 3 * i + 2, 3 * i + 1);
    }
    sb_puts(sb, "  (");
    for (long i = 0; i < branches; i++)
        sb_printf(sb, "%s%%%ld", i ? ", " : "", 3 * i + 2);
    sb_printf(sb, "%s@g%ld(%%x))\n}\n", branches ? ", " : "", n_globals - 1);
}

/* Count the expression nodes reachable in m. */
static size_t n_nodes;
static void count(Visitor *v, Expr *e) {
    (void)v;
    (void)e;
    n_nodes++;
}

static double run(const char *text, size_t *nodes, bool *ok) {
    Ctx *ctx = ir_ctx_new();
    Module *m = text_parse(ctx, "gen", text, strlen(text), NULL, 0);
    if (m == NULL) {
        StrBuf d = {0};
        diags_render(&ctx->diags, 0, &d);
        fprintf(stderr, "%s", sb_cstr(&d));
        sb_free(&d);
        *ok = false;
        ir_ctx_free(ctx);
        return 0;
    }
    n_nodes = 0;
    Visitor v = {NULL, count, NULL};
    for (size_t i = 0; i < m->funcs.len; i++)
        ir_visit(&v, &m->funcs.data[i].func->base);
    *nodes = n_nodes;
    double t0 = bench_now();
    bool good = ty_infer_module(m);
    double t = bench_now() - t0;
    if (!good) {
        StrBuf d = {0};
        diags_render(&ctx->diags, 0, &d);
        fprintf(stderr, "%.2000s", sb_cstr(&d));
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
    const char *names[2] = {"deep", "wide"};
    double first[2] = {0, 0}, last[2] = {0, 0};
    printf("%-5s %9s %9s %10s %12s\n", "shape", "N", "nodes", "infer (s)", "nodes/s");
    for (int k = 0; k < 2; k++) {
        for (int s = 0; s < n_sizes; s++) {
            StrBuf sb = {0};
            if (k == 0)
                gen_deep(&sb, sizes[s]);
            else
                gen_wide(&sb, sizes[s]);
            double best = 1e30;
            size_t nodes = 0;
            for (int r = 0; r < reps; r++) {
                double t = run(sb_cstr(&sb), &nodes, &ok);
                if (t < best) best = t;
            }
            printf("%-5s %9ld %9zu %10.4f %12.0f\n", names[k], sizes[s], nodes, best,
                   nodes / (best > 0 ? best : 1e-9));
            if (s == 0) first[k] = best;
            last[k] = best;
            sb_free(&sb);
        }
    }
    if (n_sizes >= 2) {
        double limit = 2.0 * (double)sizes[n_sizes - 1] / (double)sizes[0];
        for (int k = 0; k < 2; k++) {
            double ratio = last[k] / (first[k] > 0 ? first[k] : 1e-9);
            printf("%s: scaling x%.1f for x%.0f nodes (limit x%.1f)%s\n", names[k], ratio,
                   (double)sizes[n_sizes - 1] / (double)sizes[0], limit,
                   ratio > limit ? "  EXCEEDED" : "");
            if (ratio > limit) ok = false;
        }
    }
    return ok ? 0 : 1;
}
