/* test_passes_layout.c - ConvertLayout and FoldScaleAxis (with its Forward and Backward halves)
 * beyond their goldens (tests/golden/passes/<Pass>/):
 *   - differential: every golden case of the four folders, the programs below (CNNs with conv,
 *     bias, relu, pools, residual adds, concatenation, reductions; closures, references, if,
 *     match over the prelude's lists) under several layouts, and an imported ONNX CNN
 *     (tests/unit/data/layout_cnn.onnx) run in the interpreter on random inputs before and
 *     after the pass. Outputs agree within 1e-5 of the tensor's largest magnitude
 *     (|a - b| <= 1e-5 * max|b|: folding a scale into a weight rounds in another order);
 *     integers and bools exactly;
 *   - borders: on the ONNX CNN, NHWC leaves exactly two layout_transforms (the input and the
 *     flattened result), every weight and bias folded into a constant;
 *   - scaling: 10^5-link chains (graph bindings and let chains) through each pass, the result's
 *     shape checked and the times printed for n/4 and n (a quadratic pass would take 16 times
 *     as long, a linear one 4).
 *   test_passes_layout GOLDEN_PASSES_DIR DATA_DIR
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
static char path_a[64], path_b[64];

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

static rly_module *load_path(rly_ctx *ctx, const char *path, bool prelude) {
    rly_module *m = NULL;
    size_t n = strlen(path);
    rly_status st;
    if (n > 5 && strcmp(path + n - 5, ".onnx") == 0)
        st = rly_module_import_onnx(ctx, path, NULL, &m);
    else
        st = prelude ? rly_module_prelude(ctx, &m) : rly_module_parse_file(ctx, path, &m);
    if (prelude && st == RLY_STATUS_OK) st = rly_module_parse_file_into(m, path);
    return st == RLY_STATUS_OK ? m : NULL;
}

/* Run @main on random inputs (seeded) into path; false when it cannot run (a parameter that
 * --fill cannot make: a function, a reference, an ADT). */
static bool run_to(rly_module *m, const char *path) {
    rly_run_options o = {.fill = RLY_FILL_RANDOM, .seed = seed, .output_npz = path};
    return rly_module_run(m, &o, NULL) == RLY_STATUS_OK;
}

static double elem(const NpyArray *a, size_t i) {
    return a->dtype == RLY_DTYPE_F32 ? ((const float *)a->data)[i] : ((const double *)a->data)[i];
}

static void compare(const char *what) {
    Npz a = {0}, b = {0};
    char err[256] = "";
    bool ok = rt_npz_load(path_a, &a, err, sizeof err) && rt_npz_load(path_b, &b, err, sizeof err);
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
            if (!((isnan(u) && isnan(v)) || u == v || fabs(u - v) <= 1e-5 * scale)) bad = i;
        }
        CHECK(bad == n, "%s: %s[%zu] is %.9g before and %.9g after (scale %g)", what,
              a.items[k].name, bad, bad < n ? elem(x, bad) : 0, bad < n ? elem(y, bad) : 0, scale);
    }
    rt_npz_free(&a);
    rt_npz_free(&b);
}

/* Count the calls of operator `op` in m's printed text. */
static size_t count_op(rly_module *m, const char *op) {
    char *text = NULL;
    rly_module_print(m, &text);
    size_t n = 0, k = strlen(op);
    for (const char *p = text; p && (p = strstr(p, op)) != NULL; p += k)
        n += p[k] == '(';
    rly_free(text);
    return n;
}

/* Run @main of text (or of the file at path) before and after `passes`; false when it cannot
 * run on generated inputs. max_xforms >= 0: at most that many layout_transforms are left. */
static bool differ(const char *text, const char *path, bool prelude, const char *passes,
                   const char *what, int max_xforms) {
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *before = text ? load_text(ctx, text, prelude) : load_path(ctx, path, prelude);
    rly_module *after = text ? load_text(ctx, text, prelude) : load_path(ctx, path, prelude);
    CHECK(before && after, "%s: does not load: %s", what, rly_last_error());
    bool ran = false;
    if (before && after && run_to(before, path_a)) {
        ran = true;
        rly_opt_options o = {.opt_level = 3, .passes = passes, .verify_types = 1};
        bool opt = rly_module_optimize(after, &o, NULL) == RLY_STATUS_OK;
        CHECK(opt, "%s: %s fails: %s", what, passes, rly_last_error());
        bool run = opt && run_to(after, path_b);
        CHECK(!opt || run, "%s: does not run after %s: %s", what, passes, rly_last_error());
        if (run) compare(what);
        if (opt && max_xforms >= 0) {
            size_t n = count_op(after, "layout_transform");
            CHECK(n <= (size_t)max_xforms, "%s: %zu layout_transforms left, expected at most %d",
                  what, n, max_xforms);
        }
    }
    rly_ctx_free(ctx);
    return ran;
}

/* The value of directive `key` in the leading comment lines of text (as golden/passes.c). */
static bool directive(const char *text, const char *key, char *buf, size_t cap) {
    size_t kn = strlen(key);
    for (const char *p = text; strncmp(p, "//", 2) == 0;) {
        const char *q = p + 2, *eol = strchr(p, '\n');
        while (*q == ' ')
            q++;
        if (eol == NULL) eol = p + strlen(p);
        if (strncmp(q, key, kn) == 0 && (q[kn] == ':' || q[kn] == '\n' || q[kn] == '\0')) {
            q += kn + (q[kn] == ':');
            while (*q == ' ')
                q++;
            snprintf(buf, cap, "%.*s", (int)(eol - q), q);
            return true;
        }
        if (*eol == '\0') break;
        p = eol + 1;
    }
    return false;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every case of one golden folder, before and after its pipeline. */
static void golden_differential(const char *root, const char *pass) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", root, pass);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (d == NULL) return;
    PtrVec names = {0};
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        size_t n = strlen(ent->d_name);
        if (n > 4 && strcmp(ent->d_name + n - 4, ".rly") == 0 &&
            strstr(ent->d_name, ".expected.") == NULL)
            vec_push(&names, strdup(ent->d_name));
    }
    closedir(d);
    if (names.len) qsort(names.data, names.len, sizeof(char *), cmp_names);
    size_t ran = 0;
    for (size_t i = 0; i < names.len; i++) {
        char path[8192], what[8192], pipeline[1024], buf[16], *text = NULL;
        size_t len;
        snprintf(path, sizeof path, "%s/%s", dir, (char *)names.data[i]);
        snprintf(what, sizeof what, "%s/%s", pass, (char *)names.data[i]);
        if (!sup_read_file(path, &text, &len, buf, sizeof buf)) continue;
        if (!directive(text, "passes", pipeline, sizeof pipeline))
            snprintf(pipeline, sizeof pipeline, "%s", pass);
        bool prelude = directive(text, "prelude", buf, sizeof buf);
        free(text);
        ran += differ(NULL, path, prelude, pipeline, what, -1);
        free(names.data[i]);
    }
    printf("%s: %zu of %zu golden cases run before and after\n", pass, ran, names.len);
    CHECK(ran >= 4, "%s: only %zu golden cases could run", pass, ran);
    vec_free(&names);
}

/* ---- programs ------------------------------------------------------------------------------- */

static const char *const cnn =
    HDR "def @main(%x: Tensor[(2, 8, 8, 8), float32], %w1: Tensor[(16, 8, 3, 3), float32],\n"
        "          %w2: Tensor[(16, 8, 1, 1), float32], %w3: Tensor[(16, 16, 3, 3), float32],\n"
        "          %b: Tensor[(16), float32], %s: Tensor[(16, 1, 1), float32]) {\n"
        "  %0 = nn.conv2d(%x, %w1, padding=[1, 1, 1, 1]);\n"
        "  %1 = nn.bias_add(%0, %b);\n"
        "  %2 = nn.relu(%1);\n"
        "  %3 = nn.conv2d(%x, %w2);\n"
        "  %4 = add(%2, %3);\n"
        "  %5 = multiply(%4, %s);\n"
        "  %6 = nn.max_pool2d(%5, pool_size=[2, 2], strides=[2, 2]);\n"
        "  %7 = nn.conv2d(%6, %w3, padding=[1, 1]);\n"
        "  %8 = concatenate((%7, %6), axis=1);\n"
        "  %9 = nn.pad(%8, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [0, 1]]);\n"
        "  %10 = nn.avg_pool2d(%9, pool_size=[2, 2], count_include_pad=True);\n"
        "  %11 = mean(%10, axis=[2, 3]);\n"
        "  %12 = max(%10, axis=[1], keepdims=True);\n"
        "  %13 = nn.global_max_pool2d(%10);\n"
        "  %14 = nn.upsampling(%6, scale_h=2f, scale_w=2f);\n"
        "  %15 = image.resize2d(%14, size=[6, 6]);\n"
        "  (%11, %12, %13, sum(%15, axis=[1, 2]), argmax(%10, axis=[3]))\n"
        "}\n";

/* conv2d_transpose, depthwise and grouped convs, batch_norm, prelu, a constant of rank 1 added
 * over the width axis */
static const char *const cnn2 =
    HDR "def @main(%x: Tensor[(1, 16, 6, 6), float32], %wt: Tensor[(16, 8, 2, 2), float32],\n"
        "          %wd: Tensor[(8, 1, 3, 3), float32], %wg: Tensor[(16, 4, 3, 3), float32],\n"
        "          %g: Tensor[(16), float32], %v: Tensor[(16), float32],\n"
        "          %a: Tensor[(16), float32], %r: Tensor[(6), float32]) {\n"
        "  %0 = nn.conv2d_transpose(%x, %wt, strides=[2, 2]);\n"
        "  %1 = nn.conv2d(%0, %wd, padding=[1, 1], groups=8);\n"
        "  %2 = nn.relu(%1);\n"
        "  %3 = nn.conv2d(%x, %wg, padding=[1, 1], groups=4);\n"
        "  %4 = nn.batch_norm(%3, %g, %g, %g, add(abs(%v), 1f));\n"
        "  %5 = nn.prelu(%4.0, %a);\n"
        "  %6 = add(%5, %r);\n"
        "  (%2, %6, %4.1)\n"
        "}\n";

/* closures, references, if and a let chain around converted values */
static const char *const effects =
    HDR "def @f(%t: Tensor[(1, 8, 4, 4), float32], %w: Tensor[(8, 8, 3, 3), float32]) {\n"
        "  nn.relu(nn.conv2d(%t, %w, padding=[1, 1]))\n"
        "}\n"
        "def @main(%x: Tensor[(1, 8, 4, 4), float32], %w: Tensor[(8, 8, 3, 3), float32],\n"
        "          %s: Tensor[(8, 1, 1), float32], %c: bool) {\n"
        "  let %a = nn.conv2d(%x, %w, padding=[1, 1]);\n"
        "  let %b = nn.relu(%a);\n"
        "  let %g = fn (%y: Tensor[(1, 8, 4, 4), float32]) { add(%y, %b) };\n"
        "  let %r = ref(%b);\n"
        "  let %u = ref_write(%r, multiply(add(%b, %b), %s));\n"
        "  let %d = if (%c) { nn.max_pool2d(%b, pool_size=[2, 2]) }\n"
        "           else { nn.avg_pool2d(%a, pool_size=[2, 2]) };\n"
        "  (%g(%x), @f(%b, %w), %d, ref_read(%r), @f(multiply(%x, 2f), %w))\n"
        "}\n";

/* the prelude: a conv mapped over a list, a match whose arm convolves */
static const char *const lists =
    HDR "def @main(%x: Tensor[(1, 8, 4, 4), float32], %w: Tensor[(8, 8, 3, 3), float32]) {\n"
        "  let %l = Cons(%x, Cons(nn.relu(%x), Nil));\n"
        "  let %f = fn (%t: Tensor[(1, 8, 4, 4), float32]) {\n"
        "    multiply(nn.relu(nn.conv2d(multiply(%t, 3f), %w, padding=[1, 1])), 0.5f)\n"
        "  };\n"
        "  match (@map(%f, %l)) {\n"
        "    Cons(%h, _) => add(%h, nn.conv2d(%x, %w, padding=[1, 1])),\n"
        "    Nil => %x,\n"
        "  }\n"
        "}\n";

/* an NHWC network (HWIO weights), converted to NCHW and blocked layouts */
static const char *const nhwc =
    HDR "def @main(%x: Tensor[(1, 6, 6, 8), float32], %w: Tensor[(3, 3, 8, 16), float32],\n"
        "          %b: Tensor[(16), float32]) {\n"
        "  %0 = nn.conv2d(%x, %w, padding=[1, 1], data_layout=\"NHWC\", kernel_layout=\"HWIO\");\n"
        "  %1 = add(%0, %b);\n"
        "  %2 = nn.relu(%1);\n"
        "  %3 = nn.max_pool2d(%2, pool_size=[2, 2], strides=[2, 2], layout=\"NHWC\");\n"
        "  layout_transform(%3, src_layout=\"NHWC\", dst_layout=\"NCHW\")\n"
        "}\n";

/* scales before and after convs and dense layers, through relu and adds */
static const char *const scales =
    HDR "def @main(%x: Tensor[(2, 4, 6, 6), float32], %w1: Tensor[(8, 4, 3, 3), float32],\n"
        "          %w2: Tensor[(8, 8, 3, 3), float32], %w3: Tensor[(8, 8, 1, 1), float32],\n"
        "          %b: Tensor[(4, 1, 1), float32], %d: Tensor[(5, 8), float32]) {\n"
        "  %0 = multiply(%x, 2f);\n"
        "  %1 = add(%0, %b);\n"
        "  %2 = nn.relu(%1);\n"
        "  %3 = nn.conv2d(%2, %w1, padding=[1, 1]);\n"
        "  %4 = nn.leaky_relu(%3, alpha=0.1f);\n"
        "  %5 = multiply(%4, 0.25f);\n"
        "  %6 = nn.conv2d(%5, %w2, padding=[1, 1]);\n"
        "  %7 = nn.conv2d(%5, %w3);\n"
        "  %8 = multiply(add(%6, %7), 3f);\n"
        "  %9 = mean(%8, axis=[2, 3]);\n"
        "  %10 = multiply(%9, 1.5f);\n"
        "  multiply(nn.dense(%10, %d), 0.5f)\n"
        "}\n";

typedef struct Case {
    const char *name, *text, *passes;
    bool prelude;
} Case;

static const Case cases[] = {
    {"cnn NHWC", NULL, "ConvertLayout(desired_layouts=NHWC)", false},
    {"cnn NCHW8c", NULL, "ConvertLayout(desired_layouts=NCHW8c)", false},
    {"cnn NCHW16c", NULL, "ConvertLayout(desired_layouts=NCHW16c)", false},
    {"cnn conv only", NULL, "ConvertLayout(desired_layouts=\"nn.conv2d=NHWC:OHWI\")", false},
    {"cnn pools only", NULL, "ConvertLayout(desired_layouts={\"nn.max_pool2d\": [\"NHWC\"]})",
     false},
    {"cnn FoldScaleAxis", NULL, "FoldScaleAxis", false},
    {"cnn both", NULL, "FoldScaleAxis,ConvertLayout(desired_layouts=NCHW8c)", false},
    {"cnn2 NHWC", NULL, "ConvertLayout(desired_layouts=NHWC)", false},
    {"cnn2 NCHW8c", NULL, "ConvertLayout(desired_layouts=NCHW8c)", false},
    {"cnn2 NCHW4c", NULL, "ConvertLayout(desired_layouts=NCHW4c)", false},
    {"effects NHWC", NULL, "ConvertLayout(desired_layouts=NHWC)", false},
    {"effects NCHW8c", NULL, "ConvertLayout(desired_layouts=NCHW8c)", false},
    {"effects FoldScaleAxis", NULL, "FoldScaleAxis", false},
    {"lists NHWC", NULL, "ConvertLayout(desired_layouts=NHWC)", true},
    {"lists FoldScaleAxis", NULL, "FoldScaleAxis", true},
    {"nhwc NCHW", NULL, "ConvertLayout(desired_layouts=NCHW)", false},
    {"nhwc NCHW8c", NULL, "ConvertLayout(desired_layouts=NCHW8c)", false},
    {"scales Forward", NULL, "ForwardFoldScaleAxis", false},
    {"scales Backward", NULL, "BackwardFoldScaleAxis", false},
    {"scales FoldScaleAxis", NULL, "FoldScaleAxis", false},
    {"scales NHWC then fold", NULL, "ConvertLayout(desired_layouts=NHWC),FoldScaleAxis", false},
};

static const char *case_text(const char *name) {
    if (strncmp(name, "cnn2", 4) == 0) return cnn2;
    if (strncmp(name, "cnn", 3) == 0) return cnn;
    if (strncmp(name, "effects", 7) == 0) return effects;
    if (strncmp(name, "lists", 5) == 0) return lists;
    if (strncmp(name, "nhwc", 4) == 0) return nhwc;
    return scales;
}

static void programs(void) {
    for (size_t i = 0; i < RLY_ARRAY_LEN(cases); i++) {
        const Case *c = &cases[i];
        CHECK(differ(case_text(c->name), NULL, c->prelude, c->passes, c->name, -1),
              "%s does not run", c->name);
    }
}

/* The ONNX CNN: NHWC leaves only the two border transforms; every pipeline agrees. */
static void onnx_model(const char *data_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/layout_cnn.onnx", data_dir);
    static const struct {
        const char *passes;
        int max_xforms;
    } runs[] = {
        {"ConvertLayout(desired_layouts=NHWC)", 2},
        {"ConvertLayout(desired_layouts=NCHW8c)", 4}, /* batch_norm over a split C stays NCHW */
        {"SimplifyInference,FoldConstant,ConvertLayout(desired_layouts=NCHW8c)", 2},
        {"FoldScaleAxis", -1},
        {"SimplifyInference,FoldScaleAxis,ConvertLayout(desired_layouts=NCHW16c)", -1},
    };
    for (size_t i = 0; i < RLY_ARRAY_LEN(runs); i++) {
        char what[256];
        snprintf(what, sizeof what, "layout_cnn.onnx %s", runs[i].passes);
        CHECK(differ(NULL, path, false, runs[i].passes, what, runs[i].max_xforms),
              "%s does not run", what);
    }
}

/* ---- scaling --------------------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A chain program of n links: head, then one binding per link (its `$` replaced by the previous
 * value, start for the first), graph form (%k = ...) or let form (let %vk = ...), then tail (`$`
 * the last value). */
typedef struct Chain {
    const char *name, *passes, *head, *start, *link, *tail;
    bool lets;
    size_t xforms, muls; /* layout_transforms and multiplies in the result */
} Chain;

static char *chain_text(const Chain *c, size_t n) {
    StrBuf sb = {0};
    sb_puts(&sb, c->head);
    char prev[64], cur[64];
    snprintf(prev, sizeof prev, "%s", c->start);
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
    sb_puts(&sb, "  ");
    for (const char *p = c->tail; *p; p++)
        if (*p == '$')
            sb_puts(&sb, prev);
        else
            sb_putc(&sb, *p);
    sb_puts(&sb, "\n}\n");
    return sb.data;
}

static double chain_time(const Chain *c, size_t n) {
    char *text = chain_text(c, n);
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *m = load_text(ctx, text, false);
    free(text);
    double t = -1;
    CHECK(m != NULL, "%s: chain of %zu does not parse: %s", c->name, n, rly_last_error());
    if (m) {
        rly_opt_options o = {.opt_level = 3, .passes = c->passes};
        double t0 = now_s();
        bool ok = rly_module_optimize(m, &o, NULL) == RLY_STATUS_OK;
        t = now_s() - t0;
        CHECK(ok, "%s: chain of %zu fails: %s", c->name, n, rly_last_error());
        size_t k = ok ? count_op(m, "layout_transform") : 0;
        CHECK(!ok || k == c->xforms, "%s: %zu layout_transforms, expected %zu", c->name, k,
              c->xforms);
        size_t muls = ok ? count_op(m, "multiply") : 0;
        CHECK(!ok || muls == c->muls, "%s: %zu multiplies, expected %zu", c->name, muls, c->muls);
        if (!ok) t = -1;
    }
    rly_ctx_free(ctx);
    return t;
}

static const Chain chains[] = {
    /* a conv, then 10^5 relus (graph) or adds (lets): all follow; transforms at the two borders */
    {"ConvertLayout graph chain", "ConvertLayout(desired_layouts=NHWC)",
     HDR "def @main(%x: Tensor[(1, 8, 2, 2), float32], %w: Tensor[(8, 8, 1, 1), float32]) {\n",
     "nn.conv2d(%x, %w)", "nn.relu($)", "$", false, 3, 0},
    {"ConvertLayout let chain", "ConvertLayout(desired_layouts=NCHW8c)",
     HDR "def @main(%x: Tensor[(1, 8, 2, 2), float32], %w: Tensor[(8, 8, 1, 1), float32]) {\n",
     "nn.conv2d(%x, %w)", "add($, 1f)", "$", true, 3, 0},
    /* multiply by 2 then 10^5 relus into a conv (forward); a conv, 10^5 relus, then a multiply
     * (backward): the scales end in the weight (the one multiply left) */
    {"FoldScaleAxis forward chain", "ForwardFoldScaleAxis",
     HDR "def @main(%x: Tensor[(1, 8, 2, 2), float32], %w: Tensor[(8, 8, 1, 1), float32]) {\n",
     "multiply(%x, 2f)", "nn.relu($)", "nn.conv2d($, %w)", false, 0, 1},
    {"FoldScaleAxis backward chain", "BackwardFoldScaleAxis",
     HDR "def @main(%x: Tensor[(1, 8, 2, 2), float32], %w: Tensor[(8, 8, 1, 1), float32]) {\n",
     "nn.conv2d(%x, %w)", "nn.relu($)", "multiply($, 2f)", false, 0, 1},
};

static void scaling(void) {
    const size_t n = 100000;
    for (size_t i = 0; i < RLY_ARRAY_LEN(chains); i++) {
        const Chain *c = &chains[i];
        double small = chain_time(c, n / 4), big = chain_time(c, n);
        printf("%-32s %7zu links %8.3f s, %7zu links %8.3f s (x%.1f)\n", c->name, n / 4, small, n,
               big, small > 0 ? big / small : 0);
        /* a linear pass takes about 4x as long for 4x the links; quadratic would be 16x. Times
         * too short to measure say nothing. */
        CHECK(small < 0.05 || big < 10 * small, "%s: %.3f s for %zu links but %.3f s for %zu",
              c->name, small, n / 4, big, n);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_passes_layout GOLDEN_PASSES_DIR DATA_DIR\n");
        return 2;
    }
    const char *s = getenv("RLY_SEED");
    seed = s ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL);
    printf("seed %u (RLY_SEED=%u replays it)\n", seed, seed);
    snprintf(path_a, sizeof path_a, "/tmp/rly_layout_a_%d.npz", (int)getpid());
    snprintf(path_b, sizeof path_b, "/tmp/rly_layout_b_%d.npz", (int)getpid());
    static const char *const folders[] = {"ConvertLayout", "FoldScaleAxis", "ForwardFoldScaleAxis",
                                          "BackwardFoldScaleAxis"};
    for (size_t i = 0; i < RLY_ARRAY_LEN(folders); i++)
        golden_differential(argv[1], folders[i]);
    programs();
    onnx_model(argv[2]);
    scaling();
    remove(path_a);
    remove(path_b);
    return check_summary();
}
