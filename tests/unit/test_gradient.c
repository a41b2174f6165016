/* test_gradient.c - the gradient transform (src/passes/gradient.c) against finite differences.
 *
 * test_gradient DIR: every DIR/ *.rly is a program whose @main takes float64 tensors (or tuples
 * of them). Header comments steer it:
 *   // modes: higher first     the modes to check (default: higher)
 *   // range: LO HI            inputs uniform in [LO, HI] (default -1 1)
 *   // reject-first: TEXT      the first-order mode must refuse it with TEXT in the message
 * For each mode the program (parsed into the prelude) is differentiated into @grad, then for
 * random inputs: @grad's value equals @main's, and every gradient element equals the central
 * difference (eps 1e-6) of S(x) = the sum of @main's float result elements, within
 * 1e-6 + 1e-5 |fd|.
 * Then fixed checks: the MLP training example (examples/mlp_loss.rly + mlp_train.rly) in both
 * modes, second derivatives (the transform applied to its own output, both modes,
 * against analytic values), the rejection of operators without a gradient (every use listed),
 * bad entry points. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "eval/eval.h"
#include "passes/passes.h"
#include "rly/rly.h"
#include "runtime/value.h"
#include "support/support.h"
#include "types/types.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / (double)(1ull << 53);
}

/* A module: the prelude plus text; NULL (after a failed CHECK) when it does not check. */
static Module *load(rly_ctx **ctx, const char *text, const char *name) {
    rly_ctx_new(ctx);
    rly_module *m = NULL;
    rly_module_prelude(*ctx, &m);
    rly_status st = rly_module_parse_into(m, text, strlen(text), name);
    if (st == RLY_STATUS_OK) st = rly_module_infer(m);
    CHECK(st == RLY_STATUS_OK, "%s: does not check: %s", name, rly_last_error());
    return st == RLY_STATUS_OK ? m : NULL;
}

static char *diags_text(Ctx *ctx) {
    StrBuf sb = {0};
    diags_render(&ctx->diags, 0, &sb);
    return sb_take(&sb);
}

static Value *random_value(Type *t, double lo, double hi) {
    if (t->kind == TYPE_TUPLE) {
        TupleType *tt = AS_TUPLE_TYPE(t);
        RtTuple *r = rt_tuple_new(tt->n);
        for (uint32_t i = 0; i < tt->n; i++)
            r->f[i] = random_value(tt->fields[i], lo, hi);
        return &r->hdr;
    }
    TensorType *tt = AS_TENSOR_TYPE(t);
    char err[128];
    RtTensor *x = rt_tensor_new(tt->dtype, tt->ndim, tt->shape, err, sizeof err);
    size_t n = 1;
    for (uint32_t i = 0; i < tt->ndim; i++)
        n *= (size_t)tt->shape[i];
    double *d = rt_tensor_data(x);
    for (size_t i = 0; i < n; i++)
        d[i] = lo + (hi - lo) * urand();
    return &x->hdr;
}

static size_t n_elems(const RtTensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->t.ndim; i++)
        n *= (size_t)t->t.shape[i];
    return n;
}

/* The float64 tensors of v, depth-first. */
static void leaves(Value *v, PtrVec *out) {
    if (v->kind == VAL_TUPLE) {
        RtTuple *t = (RtTuple *)v;
        for (uint32_t i = 0; i < t->n; i++)
            leaves(t->f[i], out);
    } else if (v->kind == VAL_TENSOR && rt_tensor_dtype((RtTensor *)v) == RLY_DTYPE_F64) {
        vec_push(out, v);
    }
}

static double sum_floats(Value *v) {
    PtrVec ls = {0};
    leaves(v, &ls);
    double s = 0;
    for (size_t i = 0; i < ls.len; i++) {
        RtTensor *t = ls.data[i];
        const double *d = rt_tensor_data(t);
        for (size_t k = 0; k < n_elems(t); k++)
            s += d[k];
    }
    vec_free(&ls);
    return s;
}

static double eval_sum(Interp *it, uint32_t n, Value **args, bool *ok) {
    Value *r = ev_call_global(it, "main", n, args);
    if (r == NULL) {
        *ok = false;
        return 0;
    }
    double s = sum_floats(r);
    rt_release(r);
    return s;
}

typedef struct Opts {
    bool higher, first;
    double lo, hi;
    char reject_first[256];
} Opts;

static void parse_opts(const char *text, Opts *o) {
    memset(o, 0, sizeof *o);
    o->lo = -1, o->hi = 1;
    o->higher = true;
    const char *p;
    if ((p = strstr(text, "// modes:")) != NULL) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)n, p);
        o->higher = strstr(line, "higher") != NULL;
        o->first = strstr(line, "first") != NULL;
    }
    if ((p = strstr(text, "// range:")) != NULL) sscanf(p + 9, "%lf %lf", &o->lo, &o->hi);
    if ((p = strstr(text, "// reject-first:")) != NULL) {
        p += 16;
        while (*p == ' ')
            p++;
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        snprintf(o->reject_first, sizeof o->reject_first, "%.*s", (int)n, p);
    }
}

static int n_grad_checks;

/* Differentiate @main of text in one mode and check it against finite differences. */
static void check_program(const char *name, const char *text, GradMode mode, const Opts *o) {
    rly_ctx *ctx;
    Module *m = load(&ctx, text, name);
    if (m == NULL) goto done;
    const char *mname = mode == GRAD_FIRST ? "first" : "higher";
    bool ok = pass_gradient(m, "main", mode, "grad");
    if (mode == GRAD_FIRST && o->reject_first[0]) {
        char *msg = diags_text(m->ctx);
        CHECK(!ok && strstr(msg, o->reject_first),
              "%s (%s): expected a rejection with '%s', got: %s", name, mname, o->reject_first,
              ok ? "(accepted)" : msg);
        free(msg);
        goto done;
    }
    if (!ok) {
        char *msg = diags_text(m->ctx);
        CHECK(false, "%s (%s): gradient failed:\n%s", name, mname, msg);
        free(msg);
        goto done;
    }
    FuncDef *d = ir_module_lookup(m, "main", 4);
    Function *f = d->func;
    uint32_t n = f->n_params;
    Value **args = calloc(n + 1, sizeof *args);
    for (uint32_t i = 0; i < n; i++)
        args[i] = random_value(f->params[i]->base.checked_type, o->lo, o->hi);
    Interp *it = ev_new(m);
    Value *g = ev_call_global(it, "grad", n, args);
    bool run_ok = g != NULL;
    double s0 = run_ok ? eval_sum(it, n, args, &run_ok) : 0;
    if (!run_ok) {
        char *msg = diags_text(m->ctx);
        CHECK(false, "%s (%s): run failed:\n%s", name, mname, msg);
        free(msg);
    } else {
        RtTuple *gt = (RtTuple *)g;
        CHECK(fabs(sum_floats(gt->f[0]) - s0) <= 1e-9 * (1 + fabs(s0)),
              "%s (%s): value %.17g, @main gives %.17g", name, mname, sum_floats(gt->f[0]), s0);
        PtrVec xs = {0}, gs = {0};
        for (uint32_t i = 0; i < n; i++)
            leaves(args[i], &xs);
        leaves(gt->f[1], &gs);
        CHECK(xs.len == gs.len, "%s (%s): %zu gradient tensors for %zu inputs", name, mname, gs.len,
              xs.len);
        int bad = 0;
        for (size_t k = 0; k < xs.len && k < gs.len && bad < 3; k++) {
            double *x = rt_tensor_data(xs.data[k]);
            const double *gd = rt_tensor_data(gs.data[k]);
            for (size_t j = 0; j < n_elems(xs.data[k]) && bad < 3; j++) {
                const double eps = 1e-6, x0 = x[j];
                bool ok1 = true;
                x[j] = x0 + eps;
                double sp = eval_sum(it, n, args, &ok1);
                x[j] = x0 - eps;
                double sm = eval_sum(it, n, args, &ok1);
                x[j] = x0;
                double fd = (sp - sm) / (2 * eps);
                bool good = ok1 && fabs(gd[j] - fd) <= 1e-6 + 1e-5 * fabs(fd);
                if (!good) bad++;
                n_grad_checks++;
                CHECK(good,
                      "%s (%s): input tensor %zu element %zu: gradient %.10g, finite "
                      "difference %.10g",
                      name, mname, k, j, gd[j], fd);
            }
        }
        vec_free(&xs);
        vec_free(&gs);
    }
    if (g) rt_release(g);
    for (uint32_t i = 0; i < n; i++)
        rt_release(args[i]);
    free(args);
    ev_free(it);
done:
    rly_ctx_free(ctx);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_dir(const char *dir) {
    DIR *dp = opendir(dir);
    CHECK(dp != NULL, "cannot open %s", dir);
    if (dp == NULL) return;
    PtrVec names = {0};
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l > 4 && strcmp(de->d_name + l - 4, ".rly") == 0) vec_push(&names, strdup(de->d_name));
    }
    closedir(dp);
    qsort(names.data, names.len, sizeof(char *), cmp_names);
    for (size_t i = 0; i < names.len; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, (char *)names.data[i]);
        char *text = NULL, err[256];
        size_t len = 0;
        if (!sup_read_file(path, &text, &len, err, sizeof err)) {
            CHECK(false, "%s", err);
            continue;
        }
        Opts o;
        parse_opts(text, &o);
        if (o.higher) check_program(path, text, GRAD_HIGHER, &o);
        if (o.first || o.reject_first[0]) check_program(path, text, GRAD_FIRST, &o);
        free(text);
        free(names.data[i]);
    }
    vec_free(&names);
}

/* f(x) = x^3 + x sin x. The transform applied to its own output: with m2 higher, to
 * @h(x) = @g1(x).1.0 = f'(x), giving f''(x); with m2 first, to @g1 itself (a dataflow
 * function returning (f, (f',))), giving the gradient of f + f', f'(x) + f''(x). */
static void check_second_order(GradMode m1, GradMode m2) {
    const char *text = HDR "def @main(%x: Tensor[(4), float64]) -> Tensor[(4), float64] {\n"
                           "  add(multiply(multiply(%x, %x), %x), multiply(sin(%x), %x))\n"
                           "}\n";
    rly_ctx *ctx;
    Module *m = load(&ctx, text, "second_order.rly");
    if (m == NULL) goto done;
    bool ok = pass_gradient(m, "main", m1, "g1");
    const char *take = HDR "def @h(%x: Tensor[(4), float64]) -> Tensor[(4), float64] {\n"
                           "  %0 = @g1(%x);\n  %0.1.0\n}\n";
    if (m2 == GRAD_HIGHER)
        ok = ok && rly_module_parse_into(m, take, strlen(take), "take.rly") == RLY_STATUS_OK &&
             ty_infer_module(m) && pass_gradient(m, "h", m2, "g2");
    else
        ok = ok && pass_gradient(m, "g1", m2, "g2");
    if (!ok) {
        char *msg = diags_text(m->ctx);
        CHECK(false, "second order (%d, %d): %s %s", m1, m2, msg, rly_last_error());
        free(msg);
        goto done;
    }
    Type *t = ir_type_tensor(m->ctx, RLY_DTYPE_F64, 1, (int64_t[]){4});
    Value *x = random_value(t, -2, 2);
    Interp *it = ev_new(m);
    Value *r = ev_call_global(it, "g2", 1, &x);
    CHECK(r != NULL, "second order: run failed");
    if (r) {
        const double *xv = rt_tensor_data((RtTensor *)x);
        RtTuple *rt = (RtTuple *)r;
        const double *h2 = rt_tensor_data((RtTensor *)((RtTuple *)rt->f[1])->f[0]);
        /* m2 higher: value f'(x); m2 first: value (f(x), (f'(x),)) */
        const double *hv = rt_tensor_data(
            (RtTensor *)(m2 == GRAD_HIGHER ? rt->f[0]
                                           : ((RtTuple *)((RtTuple *)rt->f[0])->f[1])->f[0]));
        for (int i = 0; i < 4; i++) {
            double a = xv[i];
            double d1 = 3 * a * a + cos(a) * a + sin(a), d2 = 6 * a - sin(a) * a + 2 * cos(a);
            double want = m2 == GRAD_HIGHER ? d2 : d1 + d2;
            CHECK(fabs(hv[i] - d1) < 1e-12 * (1 + fabs(d1)), "f'(%g) = %.17g, want %.17g", a, hv[i],
                  d1);
            CHECK(fabs(h2[i] - want) < 1e-12 * (1 + fabs(want)),
                  "second derivative at %g: %.17g, want %.17g (modes %d, %d)", a, h2[i], want, m1,
                  m2);
        }
        rt_release(r);
    }
    rt_release(x);
    ev_free(it);
done:
    rly_ctx_free(ctx);
}

/* Every use of an operator without a gradient is reported, then a summary names each op. */
static void check_missing(void) {
    const char *text =
        HDR "def @main(%x: Tensor[(1, 1, 4, 4), float64]) -> Tensor[(1, 1, 4, 4), float64] {\n"
            "  %0 = nn.adaptive_max_pool2d(%x, output_size=[4, 4]);\n"
            "  %1 = nn.adaptive_max_pool2d(%0, output_size=[4, 4]);\n"
            "  %2 = image.resize2d(%1, size=[4, 4]);\n"
            "  tanh(%2)\n"
            "}\n";
    for (int mode = 0; mode < 2; mode++) {
        rly_ctx *ctx;
        Module *m = load(&ctx, text, "missing.rly");
        if (m == NULL) {
            rly_ctx_free(ctx);
            continue;
        }
        bool ok = pass_gradient(m, "main", mode ? GRAD_FIRST : GRAD_HIGHER, "grad");
        char *msg = diags_text(m->ctx);
        CHECK(!ok && strstr(msg, "missing.rly:3:") && strstr(msg, "missing.rly:4:") &&
                  strstr(msg, "missing.rly:5:") && strstr(msg, "no gradient for 2 operators: ") &&
                  strstr(msg, "nn.adaptive_max_pool2d") && strstr(msg, "image.resize2d"),
              "missing gradients (mode %d): %s", mode, msg);
        free(msg);
        rly_ctx_free(ctx);
    }
}

/* examples/mlp_loss.rly differentiated, examples/mlp_train.rly's SGD loop run: the loss falls
 * below 0.01 (from 0.37). */
static void check_training(const char *examples, GradMode mode) {
    char path[1024], err[256];
    char *loss = NULL, *train = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/mlp_loss.rly", examples);
    bool ok = sup_read_file(path, &loss, &len, err, sizeof err);
    snprintf(path, sizeof path, "%s/mlp_train.rly", examples);
    ok = ok && sup_read_file(path, &train, &len, err, sizeof err);
    CHECK(ok, "training example: %s", err);
    if (!ok) {
        free(loss);
        free(train);
        return;
    }
    rly_ctx *ctx;
    Module *m = load(&ctx, loss, "mlp_loss.rly");
    ok = m && pass_gradient(m, "loss", mode, "loss_grad") &&
         rly_module_parse_into(m, train, strlen(train), "mlp_train.rly") == RLY_STATUS_OK &&
         rly_module_infer(m) == RLY_STATUS_OK;
    if (m && !ok) {
        char *msg = diags_text(m->ctx);
        CHECK(false, "training example (mode %d): %s %s", mode, msg, rly_last_error());
        free(msg);
    }
    if (ok) {
        Interp *it = ev_new(m);
        Value *r = ev_call_global(it, "main", 0, NULL);
        CHECK(r != NULL, "training example: run failed");
        if (r) {
            RtTuple *t = (RtTuple *)r;
            float l0 = *(float *)rt_tensor_data((RtTensor *)t->f[0]);
            float l1 = *(float *)rt_tensor_data((RtTensor *)t->f[1]);
            printf("MLP training (mode %s): loss %.5f -> %.5f after 300 SGD steps\n",
                   mode == GRAD_FIRST ? "first" : "higher", l0, l1);
            CHECK(l1 < 0.01f && l1 < l0, "training example: loss %g -> %g (want < 0.01)", l0, l1);
            rt_release(r);
        }
        ev_free(it);
    }
    rly_ctx_free(ctx);
    free(loss);
    free(train);
}

/* A graph 10^5 nodes deep (GNF: each node the argument of the next): both modes, no C-stack
 * recursion over its depth; d/dx of x + x + ... is the count. */
static void check_deep(GradMode mode) {
    enum { N = 100000 };
    StrBuf sb = {0};
    sb_puts(&sb, HDR "def @main(%x: Tensor[(2), float64]) -> Tensor[(2), float64] {\n"
                     "  %0 = add(%x, %x);\n");
    for (int i = 1; i < N; i++)
        sb_printf(&sb, "  %%%d = add(%%%d, %%x);\n", i, i - 1);
    sb_printf(&sb, "  %%%d\n}\n", N - 1);
    rly_ctx *ctx;
    Module *m = load(&ctx, sb_cstr(&sb), "deep.rly");
    bool ok = m && pass_gradient(m, "main", mode, "grad");
    CHECK(ok, "deep graph (mode %d): gradient failed", mode);
    if (ok) {
        Type *t = ir_type_tensor(m->ctx, RLY_DTYPE_F64, 1, (int64_t[]){2});
        Value *x = random_value(t, -1, 1);
        Interp *it = ev_new(m);
        Value *r = ev_call_global(it, "grad", 1, &x);
        CHECK(r != NULL, "deep graph: run failed");
        if (r) {
            const double *g = rt_tensor_data((RtTensor *)((RtTuple *)((RtTuple *)r)->f[1])->f[0]);
            CHECK(g[0] == N + 1 && g[1] == N + 1, "deep graph: gradient %g, want %d", g[0], N + 1);
            rt_release(r);
        }
        rt_release(x);
        ev_free(it);
    }
    rly_ctx_free(ctx);
    sb_free(&sb);
}

static void check_bad_entry(void) {
    const char *text = HDR "def @poly[A](%x: A) -> A { %x }\n"
                           "def @lst(%x: List[Tensor[(2), float64]]) -> Tensor[(2), float64] {\n"
                           "  @hd(%x)\n}\n";
    rly_ctx *ctx;
    Module *m = load(&ctx, text, "bad.rly");
    if (m) {
        const char *want[3][2] = {{"nosuch", "no function @nosuch"},
                                  {"poly", "has type parameters"},
                                  {"lst", "must be a tensor or a tuple of tensors"}};
        for (int i = 0; i < 3; i++) {
            bool ok = pass_gradient(m, want[i][0], GRAD_HIGHER, "grad");
            char *msg = diags_text(m->ctx);
            CHECK(!ok && strstr(msg, want[i][1]), "entry %s: want '%s', got %s", want[i][0],
                  want[i][1], msg);
            free(msg);
        }
    }
    rly_ctx_free(ctx);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_gradient DIR EXAMPLES_DIR\n");
        return 2;
    }
    run_dir(argv[1]);
    check_second_order(GRAD_HIGHER, GRAD_HIGHER);
    check_second_order(GRAD_FIRST, GRAD_FIRST);
    check_second_order(GRAD_FIRST, GRAD_HIGHER);
    check_missing();
    check_bad_entry();
    check_deep(GRAD_FIRST);
    check_deep(GRAD_HIGHER);
    check_training(argv[2], GRAD_FIRST);
    check_training(argv[2], GRAD_HIGHER);
    printf("%d gradient elements checked against finite differences\n", n_grad_checks);
    return check_summary();
}
