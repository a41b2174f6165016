/* bench_opt.c - the optimizer's speed (not a test; issue 14): `rly opt -O3` on an imported model,
 * pass by pass, and every registered pass alone on generated programs of N and 10 N nodes.
 *
 *   bench_opt [-r REPS] [-m MODEL.onnx] [-p PASS[,PASS...]] [N...]
 *                                        default: N = 100000 1000000, REPS = 3, every pass
 *
 * Times are CPU time of this process (CLOCK_PROCESS_CPUTIME_ID; the machines these figures come
 * from are shared, so wall-clock time says more about the neighbours) and wall-clock time, best
 * of REPS, each on a fresh import or parse.
 *
 * -m MODEL.onnx: import (timed), then the default -O3 pipeline one pass at a time, in order, on
 * the imported module (each a pass_run of that one pass: its types are kept, so the inference
 * pass_run starts with finds every node typed), then printing the result as `rly opt` does;
 * and the whole pipeline in one pass_run for comparison. (tests/models/test_fusion.py exports
 * a ResNet-50: `/usr/bin/python3 tests/models/test_fusion.py DIR resnet50`.)
 *
 * Scaling: for each N, two programs of about N expression nodes are generated (not timed):
 *   graph: one function, a chain of blocks in graph form, each giving every standard pass its
 *          kind of work: add, multiply by 1 (SimplifyExpr), nn.bias_add (CanonicalizeOps),
 *          nn.batch_norm (SimplifyInference), a reshape pair (SimplifyExpr), nn.dense followed
 *          by a per-channel multiply (FoldScaleAxis), two equal exps (EliminateCommonSubexpr),
 *          dyn.reshape by a constant shape (DynamicToStatic), an add of two scalar constants
 *          (FoldConstant), nn.relu; all of it fusable (FuseOps);
 *   anf:   the same blocks with every value let-bound, plus an unused let per block
 *          (DeadCodeElimination, ToGraphNormalForm, ...);
 * and each registered pass runs alone on a fresh parse of each. With two or more N it prints
 * each pass's scaling ratio time(N_last)/time(N_first) and fails (exit 1) when one exceeds
 * 3 x N_last/N_first. (bench_infer and bench_dag allow 2 x; here the pointer maps of a pass,
 * its rewriter's memo and the pass manager's walks outgrow the caches between 10^5 and 10^6
 * nodes, which costs most passes 1.5-2.5 x per node at the default sizes while the cost per
 * node is flat on either side: see bench/README.md. A quadratic pass gives x100.) */
#include <stdio.h>
#include <time.h>

#include "bench.h"

#include "frontend/text/text.h"
#include "passes/passes.h"
#include "rly/rly.h"
#include "types/types.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct Times {
    double cpu, wall;
} Times;

static void keep_best(Times *best, double cpu, double wall) {
    if (best->cpu == 0 || cpu < best->cpu) best->cpu = cpu;
    if (best->wall == 0 || wall < best->wall) best->wall = wall;
}

static bool run_passes(Module *m, const char *passes) {
    PassOptions o = {.opt_level = 3, .passes = passes};
    if (pass_run(m, &o)) return true;
    StrBuf d = {0};
    diags_render(&m->ctx->diags, 0, &d);
    fprintf(stderr, "%s: %.2000s\n", passes, sb_cstr(&d));
    sb_free(&d);
    return false;
}

/* ---- -O3 on a model ------------------------------------------------------------------------ */

enum { MAX_STEPS = 64 };

static bool bench_model(const char *path, int reps) {
    /* the default pipeline's names */
    char names[MAX_STEPS][64];
    int n_steps = 0;
    for (const char *p = pass_default_pipeline(); *p && n_steps < MAX_STEPS;) {
        size_t k = strcspn(p, ",");
        snprintf(names[n_steps++], sizeof names[0], "%.*s", (int)k, p);
        p += k + (p[k] == ',');
    }
    Times imp = {0}, steps[MAX_STEPS] = {{0}}, print = {0}, whole = {0};
    bool ok = true;
    size_t n_out = 0;
    for (int r = 0; r < reps && ok; r++) {
        for (int pass = 0; pass < 2 && ok; pass++) { /* 0: step by step; 1: one pass_run */
            rly_ctx *ctx;
            rly_ctx_new(&ctx);
            rly_module *m = NULL;
            double c0 = cpu_now(), w0 = bench_now();
            ok = rly_module_import_onnx(ctx, path, NULL, &m) == RLY_STATUS_OK;
            if (!ok) fprintf(stderr, "%s: %s\n", path, rly_last_error());
            if (ok && pass == 0) keep_best(&imp, cpu_now() - c0, bench_now() - w0);
            if (ok && pass == 0) {
                for (int s = 0; s < n_steps && ok; s++) {
                    c0 = cpu_now(), w0 = bench_now();
                    ok = run_passes(m, names[s]);
                    keep_best(&steps[s], cpu_now() - c0, bench_now() - w0);
                }
                StrBuf sb = {0};
                c0 = cpu_now(), w0 = bench_now();
                ir_print_module(m, NULL, &sb);
                keep_best(&print, cpu_now() - c0, bench_now() - w0);
                n_out = sb.len;
                sb_free(&sb);
            } else if (ok) {
                c0 = cpu_now(), w0 = bench_now();
                ok = run_passes(m, pass_default_pipeline());
                keep_best(&whole, cpu_now() - c0, bench_now() - w0);
            }
            rly_ctx_free(ctx);
        }
    }
    if (!ok) return false;
    printf("%s, best of %d\n%-28s %10s %10s\n", path, reps, "step", "cpu (ms)", "wall (ms)");
    printf("%-28s %10.2f %10.2f\n", "import", imp.cpu * 1e3, imp.wall * 1e3);
    Times sum = {0};
    for (int s = 0; s < n_steps; s++) {
        printf("%-28s %10.3f %10.3f\n", names[s], steps[s].cpu * 1e3, steps[s].wall * 1e3);
        sum.cpu += steps[s].cpu, sum.wall += steps[s].wall;
    }
    printf("%-28s %10.2f %10.2f  (%zu bytes)\n", "print", print.cpu * 1e3, print.wall * 1e3, n_out);
    printf("%-28s %10.2f %10.2f\n", "-O3, the passes above", sum.cpu * 1e3, sum.wall * 1e3);
    printf("%-28s %10.2f %10.2f\n", "-O3, one pass_run", whole.cpu * 1e3, whole.wall * 1e3);
    printf("%-28s %10.2f %10.2f\n\n", "import + -O3 + print", (imp.cpu + sum.cpu + print.cpu) * 1e3,
           (imp.wall + sum.wall + print.wall) * 1e3);
    return true;
}

/* ---- scaling -------------------------------------------------------------------------------- */

enum { GRAPH, ANF, N_SHAPES };
static const char *const shape_names[N_SHAPES] = {"graph", "anf"};
enum { NODES_PER_BLOCK = 20 }; /* about, in the graph shape: calls, projections, scalars */

/* The meta constants the blocks share: bias, gamma, beta, mean, var (4), dense weight (4, 4),
 * per-channel scale (4), a shape (int64 [1, 4]). */
static Constant *metas[8];

static void make_metas(Ctx *ctx) {
    float v4[4] = {0.5f, 1.5f, -0.25f, 2.0f}, var[4] = {1.0f, 0.5f, 2.0f, 1.25f}, w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (float)((i * 7) % 5 - 2) / 4.0f;
    int64_t s4[1] = {4}, s44[2] = {4, 4}, s2[1] = {2}, shape[2] = {1, 4};
    for (int i = 0; i < 5; i++)
        metas[i] =
            (Constant *)ir_constant_new(ctx, RLY_DTYPE_F32, 1, s4, i == 4 ? var : v4, SPAN_NONE);
    metas[5] = (Constant *)ir_constant_new(ctx, RLY_DTYPE_F32, 2, s44, w, SPAN_NONE);
    metas[6] = (Constant *)ir_constant_new(ctx, RLY_DTYPE_F32, 1, s4, var, SPAN_NONE);
    metas[7] = (Constant *)ir_constant_new(ctx, RLY_DTYPE_I64, 1, s2, shape, SPAN_NONE);
}

static void gen(StrBuf *sb, int shape, long n) {
    const char *bind = shape == ANF ? "let %v" : "%";
    const char *ref = shape == ANF ? "%v" : "%";
    long blocks = n / NODES_PER_BLOCK, t = 0;
    StrBuf line = {0};
    sb_puts(sb, "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(1, 4), float32]) {\n");
    sb_printf(sb, "  %s0 = nn.relu(%%x);\n", bind);
/* one binding %t+1 = <call>, the call's text formatted while t still names the previous node */
#define B(...)                                                                                     \
    do {                                                                                           \
        line.len = 0;                                                                              \
        sb_printf(&line, __VA_ARGS__);                                                             \
        sb_printf(sb, "  %s%ld = %s;\n", bind, ++t, sb_cstr(&line));                               \
    } while (0)
    for (long i = 0; i < blocks; i++) {
        long in = t;
        B("add(%s%ld, 1f)", ref, in);
        B("multiply(%s%ld, 1f)", ref, t);
        B("nn.bias_add(%s%ld, meta[relay.Constant][0])", ref, t);
        B("nn.batch_norm(%s%ld, meta[relay.Constant][1], meta[relay.Constant][2], "
          "meta[relay.Constant][3], meta[relay.Constant][4])",
          ref, t);
        B("%s%ld.0", ref, t);
        B("reshape(%s%ld, newshape=[4])", ref, t);
        B("reshape(%s%ld, newshape=[1, 4])", ref, t);
        B("nn.dense(%s%ld, meta[relay.Constant][5])", ref, t);
        B("multiply(%s%ld, meta[relay.Constant][6])", ref, t);
        long d = t;
        B("exp(%s%ld)", ref, d);
        B("exp(%s%ld)", ref, d);
        B("add(%s%ld, %s%ld)", ref, t - 1, ref, t);
        B("dyn.reshape(%s%ld, meta[relay.Constant][7])", ref, t);
        B("add(%s%ld, add(2f, 3f))", ref, t);
        B("nn.relu(%s%ld)", ref, t);
        if (shape == ANF) sb_printf(sb, "  let %%u%ld = negative(%%v%ld);\n", i, t);
    }
#undef B
    sb_printf(sb, "  %s%ld\n}\n", ref, t);
    sb_free(&line);
}

static void count_post(Visitor *v, Expr *e) {
    (void)e;
    (*(size_t *)v->state)++;
}

static size_t count_nodes(Module *m) {
    size_t n = 0;
    Visitor v = {NULL, count_post, &n};
    ir_visit(&v, &ir_module_lookup(m, "main", 4)->func->base);
    return n;
}

/* Arguments for passes that need some to do anything. */
static const char *with_args(const char *name, char *buf, size_t cap) {
    if (strcmp(name, "ConvertLayout") == 0)
        snprintf(buf, cap, "%s(desired_layouts=NHWC)", name);
    else
        snprintf(buf, cap, "%s", name);
    return buf;
}

/* One pass on a fresh parse of text; its CPU time, or -1 on failure. */
static double time_pass(const char *name, const char *text, size_t *nodes) {
    Ctx *ctx = ir_ctx_new();
    make_metas(ctx);
    Module *m = text_parse(ctx, "gen", text, strlen(text), metas, 8);
    double t = -1;
    if (m && ty_infer_module(m)) {
        *nodes = count_nodes(m);
        double c0 = cpu_now();
        char buf[128];
        if (run_passes(m, with_args(name, buf, sizeof buf))) t = cpu_now() - c0;
    } else {
        StrBuf d = {0};
        diags_render(&ctx->diags, 0, &d);
        fprintf(stderr, "gen: %.2000s\n", sb_cstr(&d));
        sb_free(&d);
    }
    ir_ctx_free(ctx);
    return t;
}

static bool listed(const char *list, const char *name) {
    if (list == NULL) return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && strncmp(p, name, n) == 0) return true;
        p += k + (p[k] == ',');
    }
    return false;
}

static bool bench_scaling(int reps, const long *sizes, int n_sizes, const char *only) {
    bool ok = true;
    StrBuf texts[N_SHAPES][16] = {{{0}}};
    for (int k = 0; k < N_SHAPES; k++)
        for (int s = 0; s < n_sizes; s++)
            gen(&texts[k][s], k, sizes[s]);
    printf("%-24s %-6s", "pass", "shape");
    for (int s = 0; s < n_sizes; s++)
        printf(" %9s %9s", "nodes", "cpu (s)");
    printf(" %8s\n", n_sizes >= 2 ? "scaling" : "");
    double x = n_sizes >= 2 ? (double)sizes[n_sizes - 1] / (double)sizes[0] : 1, limit = 3 * x;
    for (size_t i = 0; i < pass_count(); i++) {
        const PassDef *def = pass_at(i);
        if (!listed(only, def->name)) continue;
        for (int k = 0; k < N_SHAPES; k++) {
            printf("%-24s %-6s", def->name, shape_names[k]);
            double first = 0, last = 0;
            for (int s = 0; s < n_sizes; s++) {
                double best = 1e30;
                size_t nodes = 0;
                for (int r = 0; r < reps; r++) {
                    double t = time_pass(def->name, sb_cstr(&texts[k][s]), &nodes);
                    if (t < 0) break;
                    if (t < best) best = t;
                }
                if (best > 1e29) {
                    printf(" %9zu %9s", nodes, "failed");
                    ok = false;
                    best = 0;
                } else {
                    printf(" %9zu %9.4f", nodes, best);
                }
                fflush(stdout);
                if (s == 0) first = best;
                last = best;
            }
            if (n_sizes >= 2) {
                double ratio = last / (first > 1e-6 ? first : 1e-6);
                bool over = ratio > limit && last > 0.01; /* below 10 ms: noise */
                printf("    x%.1f%s", ratio, over ? "  EXCEEDED" : "");
                if (over) ok = false;
            }
            printf("\n");
        }
    }
    if (n_sizes >= 2) printf("limit: x%.1f for x%.0f nodes\n", limit, x);
    for (int k = 0; k < N_SHAPES; k++)
        for (int s = 0; s < n_sizes; s++)
            sb_free(&texts[k][s]);
    return ok;
}

int main(int argc, char **argv) {
    const char *model = NULL, *only = NULL;
    char *rest[64];
    int n_rest = 0;
    for (int i = 0; i < argc && n_rest < 64; i++) {
        if (i > 0 && strcmp(argv[i], "-m") == 0 && i + 1 < argc)
            model = argv[++i];
        else if (i > 0 && strcmp(argv[i], "-p") == 0 && i + 1 < argc)
            only = argv[++i];
        else
            rest[n_rest++] = argv[i];
    }
    int reps;
    long sizes[16];
    int n_sizes = bench_sizes(n_rest, rest, &reps, sizes);
    bool ok = true;
    if (model) ok = bench_model(model, reps);
    return bench_scaling(reps, sizes, n_sizes, only) && ok ? 0 : 1;
}
