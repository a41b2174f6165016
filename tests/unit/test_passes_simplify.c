/* test_passes_simplify.c - SimplifyInference, SimplifyExpr and CanonicalizeOps beyond their
 * goldens (tests/golden/passes/<Pass>/):
 *   - differential: every golden case whose @main takes only tensors runs in the interpreter on
 *     random inputs before and after its pipeline, and normalization programs with positive
 *     variances run before and after SimplifyInference (alone and followed by SimplifyExpr and
 *     CanonicalizeOps). Outputs agree: integers and bools exactly, floats within 1e-5 of the
 *     tensor's largest magnitude (|a - b| <= 1e-5 * max|b|; the expansions round at every
 *     operator, in the data's dtype, where the kernels compute in double and round once), NaN where
 * the other has NaN;
 *   - scaling: chains of about 10^5 nodes (graph bindings and let chains) through each pass,
 *     with the result's shape checked and the times printed for n/8 and n links (a quadratic
 *     pass would take 64 times as long, a linear one 8).
 *   test_passes_simplify GOLDEN_PASSES_DIR
 * Closes with `N passed, N failed`. RLY_SEED=N replays the random inputs of a failing run. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "ir/ir.h"
#include "rly/rly.h"
#include "runtime/npy.h"

static unsigned seed = 1;
static double worst; /* the largest |a - b| / max|b| seen, printed at the end */

/* ---- differential -------------------------------------------------------------------------- */

static rly_module *load_text(rly_ctx *ctx, const char *text, bool prelude) {
    rly_module *m = NULL;
    rly_status st;
    if (prelude) {
        st = rly_module_prelude(ctx, &m);
        if (st == RLY_STATUS_OK) st = rly_module_parse_into(m, text, strlen(text), "case.rly");
    } else {
        st = rly_module_parse(ctx, text, strlen(text), "case.rly", &m);
    }
    return st == RLY_STATUS_OK ? m : NULL;
}

/* Run @main on random inputs (seeded) into path; false when it cannot run (a parameter that
 * --fill cannot make: a function, a reference, an ADT). */
static bool run_to(rly_module *m, const char *path) {
    rly_run_options o = {.fill = RLY_FILL_RANDOM, .seed = seed, .output_npz = path};
    return rly_module_run(m, &o, NULL) == RLY_STATUS_OK;
}

static double elem(const NpyArray *a, size_t i) {
    const char *p = (const char *)a->data;
    switch (a->dtype) {
    case RLY_DTYPE_F32: return ((const float *)p)[i];
    case RLY_DTYPE_F64: return ((const double *)p)[i];
    default: return 0;
    }
}

/* The outputs of two runs agree (see the file comment). */
static void compare(const char *a_path, const char *b_path, const char *what) {
    Npz a = {0}, b = {0};
    char err[256];
    bool ok = rt_npz_load(a_path, &a, err, sizeof err) && rt_npz_load(b_path, &b, err, sizeof err);
    CHECK(ok && a.n == b.n, "%s: outputs differ in number or do not load (%s)", what, err);
    for (size_t k = 0; ok && k < a.n && k < b.n; k++) {
        NpyArray *x = &a.items[k].arr, *y = &b.items[k].arr;
        bool same = x->dtype == y->dtype && x->ndim == y->ndim && x->nbytes == y->nbytes &&
                    memcmp(x->shape, y->shape, x->ndim * sizeof *x->shape) == 0;
        CHECK(same, "%s: %s differs in dtype or shape", what, a.items[k].name);
        if (!same) continue;
        if (x->dtype != RLY_DTYPE_F32 && x->dtype != RLY_DTYPE_F64) {
            CHECK(x->nbytes == 0 || memcmp(x->data, y->data, x->nbytes) == 0, "%s: %s differs",
                  what, a.items[k].name);
            continue;
        }
        size_t n = x->nbytes / sup_dtype_size(x->dtype), bad = n;
        double scale = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(elem(y, i))) scale = fmax(scale, fabs(elem(y, i)));
        for (size_t i = 0; i < n && bad == n; i++) {
            double u = elem(x, i), v = elem(y, i);
            if (scale > 0 && isfinite(u - v)) worst = fmax(worst, fabs(u - v) / scale);
            bool agree = (isnan(u) && isnan(v)) || u == v || fabs(u - v) <= 1e-5 * scale;
            if (!agree) bad = i;
        }
        CHECK(bad == n, "%s: %s[%zu] is %.9g before and %.9g after (scale %g)", what,
              a.items[k].name, bad, bad < n ? elem(x, bad) : 0, bad < n ? elem(y, bad) : 0, scale);
    }
    rt_npz_free(&a);
    rt_npz_free(&b);
}

static char path_a[64], path_b[64];

/* A golden case from its file (tensor constants from the .npz beside it). */
static rly_module *load_path(rly_ctx *ctx, const char *path, bool prelude) {
    rly_module *m = NULL;
    rly_status st = prelude ? rly_module_prelude(ctx, &m) : rly_module_parse_file(ctx, path, &m);
    if (prelude && st == RLY_STATUS_OK) st = rly_module_parse_file_into(m, path);
    return st == RLY_STATUS_OK ? m : NULL;
}

/* Run the @main of text (or of the file at path when text is NULL) before and after `passes`;
 * false when it cannot run on generated inputs. */
static bool differ(const char *text, const char *path, bool prelude, const char *passes,
                   const char *what) {
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *before = text ? load_text(ctx, text, prelude) : load_path(ctx, path, prelude);
    rly_module *after = text ? load_text(ctx, text, prelude) : load_path(ctx, path, prelude);
    bool ran = false;
    if (before && after && run_to(before, path_a)) {
        ran = true;
        rly_opt_options o = {.opt_level = 3, .passes = passes, .verify_types = 1};
        bool opt = rly_module_optimize(after, &o, NULL) == RLY_STATUS_OK;
        CHECK(opt, "%s: %s fails: %s", what, passes, rly_last_error());
        bool run = opt && run_to(after, path_b);
        CHECK(!opt || run, "%s: does not run after %s: %s", what, passes, rly_last_error());
        if (run) compare(path_a, path_b, what);
    }
    rly_ctx_free(ctx);
    return ran;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

/* The value of `// key: value` in the leading comments, into buf ("" when absent). */
static bool directive(const char *text, const char *key, char *buf, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "// %s", key);
    const char *p = strstr(text, pat);
    if (p == NULL) return false;
    p += strlen(pat);
    if (*p == ':') p++;
    while (*p == ' ')
        p++;
    size_t n = strcspn(p, "\n");
    snprintf(buf, cap, "%.*s", (int)n, p);
    return true;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void golden_differential(const char *root, const char *pass) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", root, pass);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "no golden folder %s", dir);
    if (d == NULL) return;
    char *names[256];
    size_t n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL && n < 256) {
        size_t len = strlen(ent->d_name);
        if (len > 4 && strcmp(ent->d_name + len - 4, ".rly") == 0 &&
            !strstr(ent->d_name, ".expected."))
            names[n++] = strdup(ent->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    size_t ran = 0;
    for (size_t i = 0; i < n; i++) {
        char path[1200], passes[256], what[1300], flag[8];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(what, sizeof what, "%s/%s", pass, names[i]);
        char *text = read_all(path);
        if (!directive(text, "passes", passes, sizeof passes))
            snprintf(passes, sizeof passes, "%s", pass);
        ran += differ(NULL, path, directive(text, "prelude", flag, sizeof flag), passes, what);
        free(text);
        free(names[i]);
    }
    printf("%s: %zu of %zu golden cases run before and after\n", pass, ran, n);
    CHECK(ran >= 5, "%s: only %zu golden cases could run", pass, ran);
}

/* Normalizations over variances kept positive (x * x + 0.5), every attribute combination the
 * expansions distinguish. */
static const char *const norm_cases[] = {
    HDR "def @main(%x: Tensor[(2, 4, 3, 3), float32], %g: Tensor[(4), float32], %b: Tensor[(4), "
        "float32], %m: Tensor[(4), float32], %v: Tensor[(4), float32]) {\n"
        "  %0 = add(multiply(%v, %v), 0.5f);\n"
        "  %1 = nn.batch_norm(%x, %g, %b, %m, %0, epsilon=0.001f);\n"
        "  %2 = nn.batch_norm(%x, %g, %b, %m, %0, center=False);\n"
        "  %3 = nn.batch_norm(%x, %g, %b, %m, %0, scale=False);\n"
        "  (%1.0, %2.0, %3.0, %1.1)\n}\n",
    HDR "def @main(%x: Tensor[(3, 5, 4), float64], %g: Tensor[(4), float64], %b: Tensor[(4), "
        "float64], %m: Tensor[(4), float64], %v: Tensor[(4), float64]) {\n"
        "  %0 = add(multiply(%v, %v), 0.25f64);\n"
        "  %1 = nn.batch_norm(%x, %g, %b, %m, %0, axis=-1, center=False, scale=False);\n"
        "  (%1.0, nn.dropout(%x).0)\n}\n",
    HDR "def @main(%x: Tensor[(2, 3, 8), float32], %g: Tensor[(8), float32], %b: Tensor[(8), "
        "float32], %g3: Tensor[(3), float32], %b3: Tensor[(3), float32]) {\n"
        "  (nn.layer_norm(%x, %g, %b), nn.layer_norm(%x, %g3, %b3, axis=1, epsilon=0.01f),\n"
        "   nn.layer_norm(%x, %g, %b, scale=False), nn.layer_norm(%x, %g, %b, center=False))\n}\n",
    HDR "def @main(%x: Tensor[(2, 6, 4, 5), float32], %g: Tensor[(6), float32], %b: Tensor[(6), "
        "float32], %g5: Tensor[(5), float32], %b5: Tensor[(5), float32]) {\n"
        "  (nn.instance_norm(%x, %g, %b), nn.instance_norm(%x, %g5, %b5, axis=3),\n"
        "   nn.group_norm(%x, %g, %b, num_groups=3), nn.group_norm(%x, %g, %b, num_groups=1),\n"
        "   nn.group_norm(%x, %g, %b, num_groups=6, epsilon=0.1f, center=False),\n"
        "   nn.group_norm(%x, %g5, %b5, num_groups=5, axis=3))\n}\n",
    HDR "def @main(%x: Tensor[(3, 4, 5), float32]) {\n"
        "  (nn.l2_normalize(%x, eps=1e-10f, axis=[1]), nn.l2_normalize(%x, eps=0.5f),\n"
        "   nn.l2_normalize(%x, eps=1e-05f, axis=[0, 2]), nn.l2_normalize(%x, eps=0.001f, "
        "axis=[]))\n}\n",
    HDR "def @main(%x: Tensor[(1, 4, 2, 2), float32], %w: Tensor[(4, 4, 1, 1), float32], %c: "
        "Tensor[(4), float32], %g: Tensor[(4), float32], %m: Tensor[(4), float32], %v: "
        "Tensor[(4), float32]) {\n"
        "  %0 = nn.bias_add(nn.conv2d(%x, %w), %c);\n"
        "  %1 = nn.batch_norm(%0, %g, %c, %m, add(multiply(%v, %v), 1f));\n"
        "  nn.relu(%1.0)\n}\n",
};

static void norm_differential(void) {
    for (size_t i = 0; i < RLY_ARRAY_LEN(norm_cases); i++) {
        char what[64];
        snprintf(what, sizeof what, "norm case %zu", i);
        CHECK(differ(norm_cases[i], NULL, false, "SimplifyInference", what), "%s does not run",
              what);
        snprintf(what, sizeof what, "norm case %zu, three passes", i);
        differ(norm_cases[i], NULL, false, "SimplifyInference,SimplifyExpr,CanonicalizeOps", what);
    }
}

/* ---- scaling --------------------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A chain program of n links: head, then one binding per link (its `$` replaced by the previous
 * value), graph form (%k = ...) or let form (let %vk = ...), then the last value. */
typedef struct Chain {
    const char *name, *passes, *head;
    const char *link;
    bool lets;
    size_t n;           /* links: about 10^5 nodes before or after the pass */
    ExprKind body_kind; /* what the optimized body is */
} Chain;

static char *chain_text(const Chain *c, size_t n) {
    StrBuf sb = {0};
    sb_puts(&sb, c->head);
    char prev[32] = "%x", cur[32];
    for (size_t k = 0; k < n; k++) {
        snprintf(cur, sizeof cur, c->lets ? "%%v%zu" : "%%%zu", k);
        sb_printf(&sb, c->lets ? "  let %s = " : "  %s = ", cur);
        for (const char *p = c->link; *p; p++)
            if (*p == '$')
                sb_puts(&sb, prev);
            else
                sb_putc(&sb, *p);
        sb_puts(&sb, ";\n");
        memcpy(prev, cur, sizeof prev);
    }
    sb_printf(&sb, "  %s\n}\n", prev);
    return sb.data;
}

/* Optimize the chain of n links; its time (the pipeline: inference once, then the pass), or a
 * negative number on failure. */
static double chain_time(const Chain *c, size_t n, bool verify) {
    char *text = chain_text(c, n);
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *m = load_text(ctx, text, false);
    free(text);
    double t = -1;
    CHECK(m != NULL, "%s: chain of %zu does not parse: %s", c->name, n, rly_last_error());
    if (m) {
        rly_opt_options o = {.opt_level = 3, .passes = c->passes, .verify_types = verify};
        double t0 = now_s();
        bool ok = rly_module_optimize(m, &o, NULL) == RLY_STATUS_OK;
        t = now_s() - t0;
        CHECK(ok, "%s: chain of %zu fails: %s", c->name, n, rly_last_error());
        Expr *body = m->funcs.data[0].func->body;
        CHECK(!ok || body->kind == c->body_kind, "%s: the optimized body is a %s, not a %s",
              c->name, ir_expr_kind_names[body->kind], ir_expr_kind_names[c->body_kind]);
        if (!ok) t = -1;
    }
    rly_ctx_free(ctx);
    return t;
}

static const Chain chains[] = {
    /* 10^5 reshapes between two shapes: one reshape of %x is left */
    {"SimplifyExpr reshapes", "SimplifyExpr", HDR "def @main(%x: Tensor[(2, 3), float32]) {\n",
     "reshape($, newshape=[3, 2])", false, 100000, EXPR_CALL},
    /* x * 1, then + 0, as a let chain: every operation goes, the lets stay */
    {"SimplifyExpr let identities", "SimplifyExpr", HDR "def @main(%x: Tensor[(4), float32]) {\n",
     "add(multiply($, 1f), 0f)", true, 50000, EXPR_LET},
    /* dropout(...).0 10^5 times (2 nodes a link): %x is left */
    {"SimplifyInference dropouts", "SimplifyInference",
     HDR "def @main(%x: Tensor[(4), float32]) {\n", "nn.dropout($).0", false, 50000, EXPR_VAR},
    /* layer norms over a let chain: each expands in its binding (into 9 calls) */
    {"SimplifyInference let layer_norms", "SimplifyInference",
     HDR "def @main(%x: Tensor[(2, 4), float32], %g: Tensor[(4), float32]) {\n",
     "nn.layer_norm($, %g, %g)", true, 10000, EXPR_LET},
    /* bias_add 10^5 times along axis 1 of a 3-D tensor: add(x, expand_dims(b)) each */
    {"CanonicalizeOps bias_adds", "CanonicalizeOps",
     HDR "def @main(%x: Tensor[(2, 3, 2), float32], %b: Tensor[(3), float32]) {\n",
     "nn.bias_add($, %b)", false, 100000, EXPR_CALL},
};

static void scaling(void) {
    for (size_t i = 0; i < RLY_ARRAY_LEN(chains); i++) {
        const Chain *c = &chains[i];
        size_t n = c->n;
        /* the best of three for the short chain: its time is the one noise distorts most */
        double small = chain_time(c, n / 8, false);
        for (int k = 0; k < 2; k++)
            small = fmin(small, chain_time(c, n / 8, false));
        double big = chain_time(c, n, false);
        printf("%-36s %7zu links %8.3f s, %7zu links %8.3f s (x%.1f)\n", c->name, n / 8, small, n,
               big, small > 0 ? big / small : 0);
        /* a linear pass takes about 8x as long for 8x the links, a quadratic one 64x. The
         * bound is half that: the short chain runs on a warm allocator (about 12x is usual
         * under ASan) and the machine may be loaded. Times too short to measure say nothing. */
        CHECK(small < 0.02 || big < 32 * small, "%s: %.3f s for %zu links but %.3f s for %zu",
              c->name, small, n / 8, big, n);
    }
    /* the verified run re-infers after the pass and compares every node's type */
    CHECK(chain_time(&chains[4], chains[4].n, true) >= 0, "verified bias_add chain");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_passes_simplify GOLDEN_PASSES_DIR\n");
        return 2;
    }
    const char *env = getenv("RLY_SEED");
    seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("seed %u (RLY_SEED=%u replays it)\n", seed, seed);
    snprintf(path_a, sizeof path_a, "/tmp/rly_simplify_%d_a.npz", (int)getpid());
    snprintf(path_b, sizeof path_b, "/tmp/rly_simplify_%d_b.npz", (int)getpid());
    golden_differential(argv[1], "SimplifyInference");
    golden_differential(argv[1], "SimplifyExpr");
    golden_differential(argv[1], "CanonicalizeOps");
    norm_differential();
    printf("largest float difference: %.3g of the tensor's largest magnitude\n", worst);
    scaling();
    remove(path_a);
    remove(path_b);
    return check_summary();
}
