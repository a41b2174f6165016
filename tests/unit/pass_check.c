/* pass_check.c - the helpers of the optimizer's unit tests (pass_check.h). Its CHECKs count in
 * this file's counters (check.h's are static); pc_finish hands them to the test. */
#include "pass_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../golden/golden_util.h"
#include "ir/ir.h"
#include "runtime/npy.h"

static unsigned seed = 1;
static bool loads_checked;            /* pc_init's must_load */
static char path_a[128], path_b[128]; /* the outputs before and after; "" until pc_init */
static double worst;                  /* the largest |a - b| / max|b| seen */

double pc_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void pc_init(const char *test, bool must_load) {
    const char *s = getenv("RLY_SEED");
    seed = s ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL);
    printf("seed %u (RLY_SEED=%u replays it)\n", seed, seed);
    snprintf(path_a, sizeof path_a, "/tmp/rly_%s_%d_a.npz", test, (int)getpid());
    snprintf(path_b, sizeof path_b, "/tmp/rly_%s_%d_b.npz", test, (int)getpid());
    loads_checked = must_load;
}

void pc_finish(int *pass, int *fail) {
    if (path_a[0]) remove(path_a);
    if (path_b[0]) remove(path_b);
    *pass += n_pass;
    *fail += n_fail;
    n_pass = n_fail = 0;
}

/* ---- loading ------------------------------------------------------------------------------- */

rly_module *pc_load_text(rly_ctx *ctx, const char *text, bool prelude) {
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

/* A golden case's tensor constants come from the .npz beside it. */
rly_module *pc_load_path(rly_ctx *ctx, const char *path, bool prelude) {
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

size_t pc_count_op(rly_module *m, const char *op) {
    char *text = NULL;
    rly_module_print(m, &text);
    size_t n = 0, k = strlen(op);
    for (const char *p = text; p && (p = strstr(p, op)) != NULL; p += k)
        n += p[k] == '(';
    rly_free(text);
    return n;
}

/* ---- the differential check ---------------------------------------------------------------- */

/* Run @main on random inputs (seeded) into path; false when it cannot run. */
static bool run_to(rly_module *m, const char *path) {
    rly_run_options o = {.fill = RLY_FILL_RANDOM, .seed = seed, .output_npz = path};
    return rly_module_run(m, &o, NULL) == RLY_STATUS_OK;
}

static double elem(const NpyArray *a, size_t i) {
    switch (a->dtype) {
    case RLY_DTYPE_F32: return ((const float *)a->data)[i];
    case RLY_DTYPE_F64: return ((const double *)a->data)[i];
    default: return 0;
    }
}

/* The outputs before (path_a) and after (path_b) agree (see pass_check.h). Floats within 1e-5 of
 * the tensor's largest magnitude: the rewrites round in another order (a scale folded into a
 * weight, an expansion rounding at every operator in the data's dtype where the kernels compute
 * in double and round once). */
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
            if (scale > 0 && isfinite(u - v)) worst = fmax(worst, fabs(u - v) / scale);
            if (!((isnan(u) && isnan(v)) || u == v || fabs(u - v) <= 1e-5 * scale)) bad = i;
        }
        CHECK(bad == n, "%s: %s[%zu] is %.9g before and %.9g after (scale %g)", what,
              a.items[k].name, bad, bad < n ? elem(x, bad) : 0, bad < n ? elem(y, bad) : 0, scale);
    }
    rt_npz_free(&a);
    rt_npz_free(&b);
}

double pc_largest_diff(void) { return worst; }

bool pc_differ(const char *text, const char *path, bool prelude, const char *passes,
               const char *what, int max_xforms) {
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *before = text ? pc_load_text(ctx, text, prelude) : pc_load_path(ctx, path, prelude);
    rly_module *after = text ? pc_load_text(ctx, text, prelude) : pc_load_path(ctx, path, prelude);
    if (loads_checked) CHECK(before && after, "%s: does not load: %s", what, rly_last_error());
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
            size_t n = pc_count_op(after, "layout_transform");
            CHECK(n <= (size_t)max_xforms, "%s: %zu layout_transforms left, expected at most %d",
                  what, n, max_xforms);
        }
    }
    rly_ctx_free(ctx);
    return ran;
}

void pc_golden_differential(const char *root, const char *pass, size_t min_run) {
    char dir[4096], **names;
    snprintf(dir, sizeof dir, "%s/%s", root, pass);
    size_t n = golden_list(dir, true, &names), ran = 0;
    CHECK(n > 0, "%s: no golden cases in %s (or it cannot be opened)", pass, dir);
    if (n == 0) return;
    for (size_t i = 0; i < n; i++) {
        char path[8192], what[8192], pipeline[1024], flag[16];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(what, sizeof what, "%s/%s", pass, names[i]);
        free(names[i]);
        char *text = golden_read(path, NULL);
        if (text == NULL) {
            CHECK(false, "%s: cannot be read", what);
            continue;
        }
        if (!golden_directive(text, "passes", pipeline, sizeof pipeline))
            snprintf(pipeline, sizeof pipeline, "%s", pass);
        bool prelude = golden_directive(text, "prelude", flag, sizeof flag);
        free(text);
        ran += pc_differ(NULL, path, prelude, pipeline, what, -1);
    }
    free(names);
    printf("%s: %zu of %zu golden cases run before and after\n", pass, ran, n);
    CHECK(ran >= min_run, "%s: only %zu golden cases could run", pass, ran);
}

/* ---- chains --------------------------------------------------------------------------------- */

/* s with each `$` replaced by value, appended to sb. */
static void put_link(StrBuf *sb, const char *s, const char *value) {
    for (const char *p = s; *p; p++)
        if (*p == '$')
            sb_puts(sb, value);
        else
            sb_putc(sb, *p);
}

static char *chain_text(const PcChain *c, size_t n) {
    StrBuf sb = {0};
    sb_puts(&sb, c->head);
    char prev[64], cur[64];
    snprintf(prev, sizeof prev, "%s", c->start);
    for (size_t k = 0; k < n; k++) {
        snprintf(cur, sizeof cur, c->lets ? "%%v%zu" : "%%%zu", k);
        sb_printf(&sb, c->lets ? "  let %s = " : "  %s = ", cur);
        put_link(&sb, c->link, prev);
        sb_puts(&sb, ";\n");
        memcpy(prev, cur, sizeof prev);
    }
    sb_puts(&sb, "  ");
    put_link(&sb, c->tail, prev);
    sb_puts(&sb, "\n}\n");
    return sb.data;
}

double pc_chain_time(const PcChain *c, size_t n, bool verify,
                     void (*check)(const PcChain *c, rly_module *m)) {
    char *text = chain_text(c, n);
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *m = pc_load_text(ctx, text, false);
    free(text);
    double t = -1;
    CHECK(m != NULL, "%s: chain of %zu does not parse: %s", c->name, n, rly_last_error());
    if (m) {
        rly_opt_options o = {.opt_level = 3, .passes = c->passes, .verify_types = verify};
        double t0 = pc_now();
        bool ok = rly_module_optimize(m, &o, NULL) == RLY_STATUS_OK;
        t = ok ? pc_now() - t0 : -1;
        CHECK(ok, "%s: chain of %zu fails: %s", c->name, n, rly_last_error());
        if (ok && check) check(c, m);
    }
    rly_ctx_free(ctx);
    return t;
}
