/* test_grad_ops.c - every operator gradient (src/passes/grad_ops*.c) against central finite
 * differences. Adding a test is adding a line.
 *
 *   test_grad_ops DIR   runs every .txt file of DIR (in name order). A case is one line
 *
 *     fn (%x: Tensor[(2, 3), float64], ...) { op(%x, ..., key=value) }
 *
 *   whose body is one operator call on the parameters (a parameter may appear inside a tuple
 *   argument, `concatenate((%a, %b))`) and constants. Lines starting with '@' before a case
 *   are directives for that case only:
 *     @range NAME LO HI   float parameter NAME takes values in [LO, HI] (default [-2, 2]
 *                         without (-0.1, 0.1), away from the kinks of abs, relu, ...)
 *     @ints NAME LO HI    integer parameter NAME takes integers in [LO, HI] (required for
 *                         integer parameters; bool parameters are random)
 *     @tol T              relative tolerance (default 1e-6, 1e-4 when the case has float32)
 *     @refuse TEXT        the gradient must refuse the call with a message containing TEXT
 *     @shape NAME D...    the run-time shape of parameter NAME when its type has `?` dims
 *   and a line `@gen NAME COUNT` runs COUNT cases made by the seeded generator NAME (random
 *   shapes and attributes: conv1d, conv2d, conv2d_transpose, conv2d_backward_weight, pool2d,
 *   binary, reduce, strided_slice, transpose, take, pad, matmul).
 *   '#' starts a comment line.
 *
 * For each case: parse and type-check; give the float parameters distinct values (one
 * permutation of a grid over all parameters of one range, so that max/min/sort ties and kinks
 * are at least ~1e-3 away), integers and bools random, and a random adjoint dy of the result;
 * build the GradCall on fresh atoms, type-check `fn(params, %dy) { let %y = call; (adjoints) }`
 * (well-formed; every adjoint must have exactly its argument's type and use only operators
 * that have a gradient themselves, but for those in no_grad_ok; a zero gradient must give none)
 * and run it with the interpreter. Then for every element i of every float parameter,
 * <dy, J e_i> is compared with the central difference (<dy, f(x + h e_i)> - <dy, f(x - h e_i)>)
 * / 2h, h = 1e-6, computed in float64 (a float32 case is evaluated on its float64 twin at the
 * same, float32-rounded, point): |adjoint - difference| <= tol * (1 + |difference|). An
 * argument whose adjoint is NULL must have a zero difference.
 * Finally every operator with a gradient must have had a case. RLY_SEED=n changes the seed
 * (printed first); RLY_GRAD_VERBOSE=1 prints every case and its gradient program. Prints
 * `N ops (...), M cases, K checks passed` and closes with `N passed, N failed`. */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "eval/eval.h"
#include "frontend/text/text.h"
#include "passes/grad.h"
#include "types/types.h"

#define MAX_PARAMS 16
#define MAX_DIRS 16
#define FD_STEP 1e-6

typedef struct Range {
    char name[64];
    double lo, hi;
    bool ints;
} Range;

typedef struct Shape {
    char name[64];
    uint32_t ndim;
    int64_t dims[8];
} Shape;

typedef struct Directives {
    Range ranges[MAX_DIRS];
    int n_ranges;
    Shape shapes[MAX_DIRS]; /* run-time shapes of parameters with `?` dims */
    int n_shapes;
    double tol;
    char refuse[256];
} Directives;

static struct {
    uint64_t seed;
    bool verbose;
    StrMap covered; /* op name -> (void *)1 */
    long n_cases;
} T;

/* ---- random numbers ---------------------------------------------------------------------------
 */

typedef struct Rng {
    uint64_t s;
} Rng;

static uint64_t rng_next(Rng *r) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}
static double rng_unit(Rng *r) { return (double)(rng_next(r) >> 11) / 9007199254740992.0; }
static int64_t rng_int(Rng *r, int64_t lo, int64_t hi) { /* [lo, hi] */
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}
static Rng rng_for(const char *where, long k) {
    uint64_t h = T.seed * 0x9E3779B97F4A7C15ull;
    for (const char *p = where; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    h ^= (uint64_t)k * 0xBF58476D1CE4E5B9ull;
    Rng r = {h ? h : 1};
    for (int i = 0; i < 4; i++)
        rng_next(&r);
    return r;
}

/* ---- values -----------------------------------------------------------------------------------
 */

static bool static_tensor(Type *t) {
    if (t == NULL || t->kind != TYPE_TENSOR) return false;
    for (uint32_t i = 0; i < AS_TENSOR_TYPE(t)->ndim; i++)
        if (AS_TENSOR_TYPE(t)->shape[i] < 0) return false;
    return true;
}

static RtTensor *tensor_of(Type *t, rly_dtype dt, const Shape *given) {
    TensorType *tt = AS_TENSOR_TYPE(t);
    char err[256];
    RtTensor *v = given ? rt_tensor_new(dt, given->ndim, given->dims, err, sizeof err)
                        : rt_tensor_new(dt, tt->ndim, tt->shape, err, sizeof err);
    RLY_CHECK(v != NULL, "%s", err);
    return v;
}

static int64_t numel(const RtTensor *t) { return k_numel(&t->t); }
static double getf(const RtTensor *t, int64_t i) {
    return k_loadf(rt_tensor_data(t), rt_tensor_dtype(t), i);
}
static void setf(RtTensor *t, int64_t i, double v) {
    k_storef(rt_tensor_data(t), rt_tensor_dtype(t), i, v);
}

/* A random value shaped like v (tensors and tuples): floats uniform in [-1, 1], others 0. */
static Value *random_like(const Value *v, Rng *r) {
    if (v->kind == VAL_TUPLE) {
        RtTuple *tu = rt_tuple_new(RT_TUPLE(v)->n);
        for (uint32_t i = 0; i < tu->n; i++)
            tu->f[i] = random_like(RT_TUPLE(v)->f[i], r);
        return &tu->hdr;
    }
    const RtTensor *s = RT_TENSOR(v);
    char err[256];
    RtTensor *t = rt_tensor_new(rt_tensor_dtype(s), (uint32_t)s->t.ndim, s->shape, err, sizeof err);
    RLY_CHECK(t != NULL, "%s", err);
    if (sup_dtype_is_float(rt_tensor_dtype(t)))
        for (int64_t i = 0; i < numel(t); i++)
            setf(t, i, 2 * rng_unit(r) - 1);
    return &t->hdr;
}

/* A copy of v with float32 tensors widened to float64. */
static Value *widen(const Value *v) {
    if (v->kind == VAL_TUPLE) {
        const RtTuple *s = RT_TUPLE(v);
        RtTuple *tu = rt_tuple_new(s->n);
        for (uint32_t i = 0; i < s->n; i++)
            tu->f[i] = widen(s->f[i]);
        return &tu->hdr;
    }
    const RtTensor *s = RT_TENSOR(v);
    rly_dtype dt = rt_tensor_dtype(s);
    rly_dtype wt = dt == RLY_DTYPE_F32 ? RLY_DTYPE_F64 : dt;
    char err[256];
    RtTensor *c = rt_tensor_new(wt, (uint32_t)s->t.ndim, s->shape, err, sizeof err);
    RLY_CHECK(c != NULL, "%s", err);
    for (int64_t i = 0; i < numel(s); i++)
        k_convert(rt_tensor_data(c), wt, i, rt_tensor_data(s), dt, i);
    return &c->hdr;
}

/* <a, b> over the float tensors of two values of one structure. */
static double dot(const Value *a, const Value *b) {
    if (a->kind == VAL_TUPLE) {
        double s = 0;
        for (uint32_t i = 0; i < RT_TUPLE(a)->n; i++)
            s += dot(RT_TUPLE(a)->f[i], RT_TUPLE(b)->f[i]);
        return s;
    }
    const RtTensor *x = RT_TENSOR(a), *y = RT_TENSOR(b);
    if (!sup_dtype_is_float(rt_tensor_dtype(x))) return 0;
    double s = 0;
    for (int64_t i = 0; i < numel(x); i++)
        s += getf(x, i) * getf(y, i);
    return s;
}

static bool holds_float(Type *t) {
    if (t->kind == TYPE_TENSOR) return sup_dtype_is_float(AS_TENSOR_TYPE(t)->dtype);
    if (t->kind == TYPE_TUPLE)
        for (uint32_t i = 0; i < AS_TUPLE_TYPE(t)->n; i++)
            if (holds_float(AS_TUPLE_TYPE(t)->fields[i])) return true;
    return false;
}

/* ---- a case -----------------------------------------------------------------------------------
 */

typedef struct Case {
    const char *where; /* "file:line" or "gen:name#k" */
    const char *text;  /* `fn (...) { ... }` */
    const Directives *dir;
    Ctx *ctx;
    Function *f; /* the primal, typed */
    Call *call;
    const char *op;
    uint32_t n_params;
    Value *args[MAX_PARAMS]; /* the parameters' values */
    /* where each parameter's adjoint is: occurrences (argument, tuple field or -1) */
    struct Use {
        uint32_t arg;
        int field;
    } uses[MAX_PARAMS][8];
    int n_uses[MAX_PARAMS];
    int out_of[MAX_PARAMS]; /* argument i's adjoint: index in the result tuple, -1 when NULL */
    bool failed;
} Case;

static void case_fail(Case *c, const char *fmt, ...) RLY_PRINTF(2, 3);
static void case_fail(Case *c, const char *fmt, ...) {
    if (!c->failed) fprintf(stderr, "FAIL %s: %s\n  %s\n", c->where, c->op ? c->op : "", c->text);
    c->failed = true;
    va_list ap;
    va_start(ap, fmt);
    fputs("  ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static const char *type_text(Ctx *ctx, Type *t, StrBuf *sb) {
    sb->len = 0;
    ir_print_type(ctx, t, sb);
    return sb_cstr(sb);
}

static void fail_diags(Case *c, const char *what) {
    StrBuf sb = {0};
    diags_render(&c->ctx->diags, 0, &sb);
    case_fail(c, "%s:\n%s", what, sb_cstr(&sb));
    sb_free(&sb);
}

static const Range *range_of(const Directives *d, const char *name) {
    for (int i = 0; i < d->n_ranges; i++)
        if (strcmp(d->ranges[i].name, name) == 0) return &d->ranges[i];
    return NULL;
}

/* Values for the parameters: floats of one range from one shuffled grid (distinct, spread),
 * integers in their @ints range, bools random. */
static bool make_args(Case *c, Rng *r) {
    static const Range dflt = {"", -2, 2, false};
    for (uint32_t p = 0; p < c->n_params; p++) {
        Var *v = c->f->params[p];
        Type *t = v->base.checked_type;
        const Shape *given = NULL;
        for (int i = 0; i < c->dir->n_shapes; i++)
            if (strcmp(c->dir->shapes[i].name, v->name) == 0) given = &c->dir->shapes[i];
        if (t->kind != TYPE_TENSOR || (!static_tensor(t) && given == NULL)) {
            case_fail(c, "parameter %s must be a tensor of static shape (or given by @shape)",
                      v->name);
            return false;
        }
        c->args[p] = &tensor_of(t, AS_TENSOR_TYPE(t)->dtype, given)->hdr;
    }
    bool done[MAX_PARAMS] = {false};
    for (uint32_t p = 0; p < c->n_params; p++) {
        if (done[p]) continue;
        RtTensor *tp = RT_TENSOR(c->args[p]);
        rly_dtype dt = rt_tensor_dtype(tp);
        const Range *rg = range_of(c->dir, c->f->params[p]->name);
        if (!sup_dtype_is_float(dt)) {
            done[p] = true;
            if (dt == RLY_DTYPE_BOOL) {
                for (int64_t i = 0; i < numel(tp); i++)
                    k_storei(rt_tensor_data(tp), dt, i, (int64_t)(rng_next(r) >> 63));
                continue;
            }
            if (rg == NULL || !rg->ints) {
                case_fail(c, "integer parameter %s needs an @ints directive",
                          c->f->params[p]->name);
                return false;
            }
            for (int64_t i = 0; i < numel(tp); i++)
                k_storei(rt_tensor_data(tp), dt, i, rng_int(r, (int64_t)rg->lo, (int64_t)rg->hi));
            continue;
        }
        if (rg == NULL) rg = &dflt;
        /* the group: every float parameter with the same range */
        uint32_t group[MAX_PARAMS], ng = 0;
        int64_t total = 0;
        for (uint32_t q = p; q < c->n_params; q++) {
            const Range *rq = range_of(c->dir, c->f->params[q]->name);
            if (rq == NULL) rq = &dflt;
            if (done[q] || !sup_dtype_is_float(rt_tensor_dtype(RT_TENSOR(c->args[q]))) ||
                rq->lo != rg->lo || rq->hi != rg->hi)
                continue;
            done[q] = true;
            group[ng++] = q;
            total += numel(RT_TENSOR(c->args[q]));
        }
        int64_t *perm = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
        for (int64_t i = 0; i < total; i++)
            perm[i] = i;
        for (int64_t i = total - 1; i > 0; i--) {
            int64_t j = (int64_t)(rng_next(r) % (uint64_t)(i + 1)), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        /* the default range leaves out (-0.1, 0.1) */
        bool gap = rg == &dflt;
        double len = rg->hi - rg->lo - (gap ? 0.2 : 0);
        int64_t k = 0;
        for (uint32_t gi = 0; gi < ng; gi++) {
            RtTensor *tq = RT_TENSOR(c->args[group[gi]]);
            for (int64_t i = 0; i < numel(tq); i++, k++) {
                double v =
                    rg->lo + len * ((double)perm[k] + 0.2 + 0.6 * rng_unit(r)) / (double)total;
                if (gap && v > -0.1) v += 0.2;
                setf(tq, i, v);
            }
        }
        free(perm);
    }
    return true;
}

static Value *call_main(Case *c, Interp *it, const char *name, Value **args, uint32_t n) {
    Value *v = ev_call_global(it, name, n, args);
    if (v == NULL) fail_diags(c, "evaluation failed");
    return v;
}

/* Translate argument e of the primal call onto the fresh parameters np (tuples become let-bound
 * atoms, recorded in lets). Records parameter uses. */
static Expr *atom_of(Case *c, Expr *e, uint32_t arg, Var **np, Var **let_var, Expr **let_val) {
    if (e->kind == EXPR_CONSTANT) return e;
    if (e->kind == EXPR_VAR) {
        for (uint32_t p = 0; p < c->n_params; p++)
            if (&c->f->params[p]->base == e) {
                if (c->n_uses[p] < 8) c->uses[p][c->n_uses[p]++] = (struct Use){arg, -1};
                return &np[p]->base;
            }
    }
    if (e->kind == EXPR_TUPLE) {
        Tuple *t = AS_TUPLE(e);
        Expr **fields = arena_array(&c->ctx->arena, t->n ? t->n : 1, sizeof *fields);
        for (uint32_t i = 0; i < t->n; i++) {
            Expr *fe = t->fields[i];
            fields[i] = fe;
            if (fe->kind == EXPR_VAR) {
                for (uint32_t p = 0; p < c->n_params; p++)
                    if (&c->f->params[p]->base == fe) {
                        if (c->n_uses[p] < 8)
                            c->uses[p][c->n_uses[p]++] = (struct Use){arg, (int)i};
                        fields[i] = &np[p]->base;
                    }
            } else if (fe->kind != EXPR_CONSTANT) {
                case_fail(c, "tuple argument fields must be parameters or constants");
                return NULL;
            }
        }
        *let_var = ir_var_new(c->ctx, ir_intern(c->ctx, "tup", 3), NULL, SPAN_NONE);
        *let_val = ir_tuple_new(c->ctx, t->n, fields, SPAN_NONE);
        return &(*let_var)->base;
    }
    case_fail(c, "call arguments must be parameters, constants or tuples of them");
    return NULL;
}

/* Operators an adjoint may use although they have no gradient (so the adjoint cannot be
 * differentiated again): keep this list short, and in the report. */
static const char *const no_grad_ok[] = {"nn.max_pool2d_grad"};

static VisitResult find_ungraded(Visitor *v, Expr *e) {
    if (e->kind != EXPR_CALL || AS_CALL(e)->op->kind != EXPR_OP) return VISIT_CONTINUE;
    const char *name = AS_OP(AS_CALL(e)->op)->name;
    if (grad_lookup(name) != NULL) return VISIT_CONTINUE;
    for (size_t i = 0; i < sizeof no_grad_ok / sizeof no_grad_ok[0]; i++)
        if (strcmp(name, no_grad_ok[i]) == 0) return VISIT_CONTINUE;
    case_fail(v->state, "an adjoint uses %s, which has no gradient", name);
    return VISIT_CONTINUE;
}

/* The gradient module @grad(params..., %dy) = let %y = call; (adjoints...), type-checked. */
static Module *grad_module(Case *c, uint32_t *n_out) {
    Ctx *ctx = c->ctx;
    Call *call = c->call;
    Var *np[MAX_PARAMS + 1];
    for (uint32_t p = 0; p < c->n_params; p++)
        np[p] =
            ir_var_new(ctx, c->f->params[p]->name, c->f->params[p]->base.checked_type, SPAN_NONE);
    uint32_t n = call->n_args;
    Expr **atoms = arena_array(&ctx->arena, n ? n : 1, sizeof *atoms);
    Type **types = arena_array(&ctx->arena, n ? n : 1, sizeof *types);
    Var **let_vars = arena_array(&ctx->arena, n ? n : 1, sizeof *let_vars);
    Expr **let_vals = arena_array(&ctx->arena, n ? n : 1, sizeof *let_vals);
    for (uint32_t i = 0; i < n; i++) {
        atoms[i] = atom_of(c, call->args[i], i, np, &let_vars[i], &let_vals[i]);
        if (atoms[i] == NULL) return NULL;
        types[i] = call->args[i]->checked_type;
    }
    Type *out_type = call->base.checked_type;
    Var *y = ir_var_new(ctx, ir_intern(ctx, "y", 1), NULL, SPAN_NONE);
    Var *dy = ir_var_new(ctx, ir_intern(ctx, "dy", 2), out_type, SPAN_NONE);
    const OpDef *op = op_lookup(c->op, strlen(c->op));
    GradCall g = {ctx,      call,     op,        call->attrs,    n, atoms, types,
                  &y->base, out_type, &dy->base, call->base.span};
    Expr **d = arena_array(&ctx->arena, n ? n : 1, sizeof *d);
    StrBuf msg = {0};
    bool ok = grad_lookup(c->op)(&g, d, &msg);
    if (c->dir->refuse[0]) {
        CHECK(!ok && strstr(sb_cstr(&msg), c->dir->refuse) != NULL,
              "%s: %s: expected the gradient to refuse with \"%s\", got %s%s", c->where, c->op,
              c->dir->refuse, ok ? "success" : "", sb_cstr(&msg));
        sb_free(&msg);
        return NULL;
    }
    if (!ok) {
        case_fail(c, "the gradient refused: %s", sb_cstr(&msg));
        sb_free(&msg);
        return NULL;
    }
    sb_free(&msg);
    Visitor vis = {.pre = find_ungraded, .state = c};
    for (uint32_t i = 0; i < n; i++)
        if (d[i]) ir_visit(&vis, d[i]);
    Expr **fields = arena_array(&ctx->arena, n ? n : 1, sizeof *fields);
    *n_out = 0;
    for (uint32_t i = 0; i < n; i++) {
        c->out_of[i] = d[i] ? (int)*n_out : -1;
        if (d[i]) fields[(*n_out)++] = d[i];
    }
    if (grad_is_zero(c->op) && *n_out != 0) case_fail(c, "a zero gradient gave an adjoint");
    Expr *newcall = ir_call_new(ctx, call->op, n, atoms, call->attrs, 0, NULL, call->base.span);
    Expr *body =
        ir_let_new(ctx, y, newcall, ir_tuple_new(ctx, *n_out, fields, SPAN_NONE), SPAN_NONE);
    for (uint32_t i = n; i-- > 0;)
        if (atoms[i] != call->args[i] && call->args[i]->kind == EXPR_TUPLE)
            body = ir_let_new(ctx, let_vars[i], let_vals[i], body, SPAN_NONE);
    np[c->n_params] = dy;
    Expr *fn = ir_function_new(ctx, c->n_params + 1, np, body, NULL, 0, NULL, NULL, SPAN_NONE);
    Module *gm = ir_module_new(ctx);
    ir_module_define(gm, ir_module_global(gm, "grad", 4, SPAN_NONE), AS_FUNCTION(fn), SPAN_NONE);
    if (!ir_well_formed(gm) || !ty_infer_module(gm)) {
        StrBuf sb = {0};
        ir_print_module(gm, &(PrintOptions){.show_types = false}, &sb);
        fail_diags(c, "the gradient program does not type-check");
        fprintf(stderr, "%s\n", sb_cstr(&sb));
        sb_free(&sb);
        return NULL;
    }
    StrBuf ta = {0}, tb = {0};
    for (uint32_t i = 0; i < n; i++) {
        if (d[i] == NULL) continue;
        if (d[i]->checked_type == types[i])
            n_pass++;
        else
            case_fail(c, "the adjoint of argument %u has type %s, expected %s", i,
                      type_text(ctx, d[i]->checked_type, &ta), type_text(ctx, types[i], &tb));
    }
    sb_free(&ta);
    sb_free(&tb);
    if (T.verbose) {
        StrBuf sb = {0};
        ir_print_module(gm, &(PrintOptions){.show_types = false}, &sb);
        fprintf(stderr, "%s\n", sb_cstr(&sb));
        sb_free(&sb);
    }
    return c->failed ? NULL : gm;
}

/* The adjoint value of parameter p's element i from the gradient result (0 when NULL). */
static double adjoint_at(Case *c, const Value *res, uint32_t p, int64_t i) {
    double s = 0;
    for (int u = 0; u < c->n_uses[p]; u++) {
        int k = c->out_of[c->uses[p][u].arg];
        if (k < 0) continue;
        const Value *v = RT_TUPLE(res)->f[k];
        if (c->uses[p][u].field >= 0) v = RT_TUPLE(v)->f[c->uses[p][u].field];
        s += getf(RT_TENSOR(v), i);
    }
    return s;
}

/* Replace float32 by float64 in a case's text (its float64 twin). */
static char *twin_text(const char *text) {
    StrBuf sb = {0};
    for (const char *p = text; *p;) {
        if (strncmp(p, "float32", 7) == 0) {
            sb_puts(&sb, "float64");
            p += 7;
        } else {
            sb_putc(&sb, *p++);
        }
    }
    return sb_take(&sb);
}

static Module *parse_main(Case *c, const char *fn_text) {
    StrBuf text = {0};
    sb_printf(&text, "%sdef @main%s\n", HDR, fn_text + 2);
    Module *m = text_parse(c->ctx, c->where, sb_cstr(&text), text.len, NULL, 0);
    sb_free(&text);
    if (m == NULL || !ty_infer_module(m)) {
        fail_diags(c, "the case does not parse or type-check");
        return NULL;
    }
    return m;
}

static void run_case(const char *where, const char *text, const Directives *dir, long k) {
    Case c = {.where = where, .text = text, .dir = dir};
    c.ctx = ir_ctx_new();
    T.n_cases++;
    Interp *it = NULL, *ref = NULL;
    Value *dy = NULL, *res = NULL, *dy64 = NULL, *args64[MAX_PARAMS] = {0};
    Module *m = parse_main(&c, text);
    if (m == NULL) goto out;
    c.f = ir_module_lookup(m, "main", 4)->func;
    if (c.f->body->kind != EXPR_CALL || AS_CALL(c.f->body)->op->kind != EXPR_OP) {
        case_fail(&c, "the body must be one operator call");
        goto out;
    }
    c.call = AS_CALL(c.f->body);
    c.op = AS_OP(c.call->op)->name;
    c.n_params = c.f->n_params;
    if (c.n_params > MAX_PARAMS) {
        case_fail(&c, "too many parameters");
        goto out;
    }
    strmap_put(&T.covered, c.op, strlen(c.op), (void *)1);
    if (grad_lookup(c.op) == NULL) {
        case_fail(&c, "%s has no gradient", c.op);
        goto out;
    }
    uint32_t n_out = 0;
    Module *gm = grad_module(&c, &n_out);
    if (gm == NULL) goto out;
    Rng r = rng_for(where, k);
    if (!make_args(&c, &r)) goto out;
    Type *out_type = c.call->base.checked_type;
    Interp *prim = ev_new(m);
    Value *y0 = call_main(&c, prim, "main", c.args, c.n_params);
    ev_free(prim);
    if (y0 == NULL) goto out;
    dy = random_like(y0, &r); /* the result's run-time shape */
    rt_release(y0);
    Value *gargs[MAX_PARAMS + 1];
    for (uint32_t p = 0; p < c.n_params; p++)
        gargs[p] = c.args[p];
    gargs[c.n_params] = dy;
    it = ev_new(gm);
    res = call_main(&c, it, "grad", gargs, c.n_params + 1);
    if (res == NULL || !holds_float(out_type)) goto out;
    /* finite differences on the float64 twin */
    bool f32 = strstr(text, "float32") != NULL;
    Module *mref = m;
    if (f32) {
        char *tw = twin_text(text);
        mref = parse_main(&c, tw);
        free(tw);
        if (mref == NULL) goto out;
    }
    ref = ev_new(mref);
    for (uint32_t p = 0; p < c.n_params; p++)
        args64[p] = widen(c.args[p]);
    dy64 = widen(dy);
    double tol = dir->tol > 0 ? dir->tol : f32 ? 1e-4 : 1e-6;
    int n_bad = 0;
    for (uint32_t p = 0; p < c.n_params; p++) {
        RtTensor *x = RT_TENSOR(args64[p]);
        if (!sup_dtype_is_float(rt_tensor_dtype(x))) continue;
        for (int64_t i = 0; i < numel(x); i++) {
            double x0 = getf(x, i), v[2];
            for (int s = 0; s < 2; s++) {
                setf(x, i, x0 + (s ? -FD_STEP : FD_STEP));
                Value *y = call_main(&c, ref, "main", args64, c.n_params);
                if (y == NULL) goto out;
                v[s] = dot(dy64, y);
                rt_release(y);
            }
            setf(x, i, x0);
            double fd = (v[0] - v[1]) / (2 * FD_STEP), ad = adjoint_at(&c, res, p, i);
            if (fabs(ad - fd) <= tol * (1 + fabs(fd))) {
                n_pass++;
                continue;
            }
            if (n_bad++ < 3)
                case_fail(&c, "d/d%s[%lld]: adjoint %.12g, finite difference %.12g",
                          c.f->params[p]->name, (long long)i, ad, fd);
        }
    }
    if (n_bad > 3) fprintf(stderr, "  (%d mismatches, the first 3 shown)\n", n_bad);
out:
    if (c.failed) n_fail++;
    if (T.verbose) fprintf(stderr, "%s %s: %s\n", c.failed ? "FAIL" : "ok", where, text);
    rt_release(res);
    rt_release(dy);
    rt_release(dy64);
    for (uint32_t p = 0; p < MAX_PARAMS; p++) {
        rt_release(c.args[p]);
        rt_release(args64[p]);
    }
    ev_free(it);
    ev_free(ref);
    ir_ctx_free(c.ctx);
}

/* ======================================================================================
 * Generators: seeded random shapes and attributes
 * ====================================================================================== */

typedef void (*GenFn)(Rng *r, StrBuf *text, Directives *dir);

static const char *gen_dtype(Rng *r) { return rng_int(r, 0, 7) == 0 ? "float32" : "float64"; }

/* a padding list for nsp axes: 1, nsp or 2 nsp values in [0, max], written into before/after */
static void gen_padding(Rng *r, uint32_t nsp, int64_t max, int64_t *before, int64_t *after,
                        StrBuf *sb) {
    int form = (int)rng_int(r, 0, 2);
    uint32_t n = form == 0 ? 1 : form == 1 ? nsp : 2 * nsp;
    int64_t v[6];
    for (uint32_t i = 0; i < n; i++)
        v[i] = rng_int(r, 0, max);
    sb_puts(sb, "[");
    for (uint32_t i = 0; i < n; i++)
        sb_printf(sb, "%s%lld", i ? ", " : "", (long long)v[i]);
    sb_puts(sb, "]");
    for (uint32_t i = 0; i < nsp; i++) {
        before[i] = v[n == 1 ? 0 : i];
        after[i] = v[n == 1 ? 0 : n == nsp ? i : i + nsp];
    }
}

static void ints_text(StrBuf *sb, uint32_t n, const int64_t *v) {
    sb_puts(sb, "[");
    for (uint32_t i = 0; i < n; i++)
        sb_printf(sb, "%s%lld", i ? ", " : "", (long long)v[i]);
    sb_puts(sb, "]");
}

static void gen_conv(Rng *r, StrBuf *sb, uint32_t nsp) {
    const char *dt = gen_dtype(r);
    int64_t groups = rng_int(r, 0, 2) == 0 ? rng_int(r, 2, 3) : 1;
    int64_t cin_g = rng_int(r, 1, 2), cin = groups * cin_g;
    bool multi = groups > 1 && rng_int(r, 0, 1);
    int64_t cout = multi ? 0 : groups * rng_int(r, 1, 2), mult = rng_int(r, 1, 2);
    if (multi) cin_g = 1, cin = groups, cout = groups * mult;
    int64_t k[2], st[2], dl[2], in[2], pb[2], pa[2];
    StrBuf pad = {0};
    gen_padding(r, nsp, 2, pb, pa, &pad);
    for (uint32_t i = 0; i < nsp; i++) {
        k[i] = rng_int(r, 1, 3);
        st[i] = rng_int(r, 1, 3);
        dl[i] = rng_int(r, 1, 2);
        int64_t window = dl[i] * (k[i] - 1) + 1, lo = window - pb[i] - pa[i];
        in[i] = rng_int(r, lo > 2 ? lo : 2, (lo > 2 ? lo : 2) + 4);
    }
    int64_t nb = rng_int(r, 1, 2);
    const char *op = nsp == 1 ? "nn.conv1d" : "nn.conv2d";
    sb_printf(sb, "fn (%%x: Tensor[(%lld, %lld", (long long)nb, (long long)cin);
    for (uint32_t i = 0; i < nsp; i++)
        sb_printf(sb, ", %lld", (long long)in[i]);
    sb_printf(sb, "), %s], %%w: Tensor[(%lld, %lld", dt, (long long)(multi ? groups : cout),
              (long long)(multi ? mult : cin_g));
    for (uint32_t i = 0; i < nsp; i++)
        sb_printf(sb, ", %lld", (long long)k[i]);
    sb_printf(sb, "), %s]) { %s(%%x, %%w, strides=", dt, op);
    ints_text(sb, nsp, st);
    sb_printf(sb, ", padding=%s, dilation=", sb_cstr(&pad));
    ints_text(sb, nsp, dl);
    sb_printf(sb, ", groups=%lld) }", (long long)groups);
    sb_free(&pad);
}

static void gen_conv1d(Rng *r, StrBuf *sb, Directives *d) {
    (void)d;
    gen_conv(r, sb, 1);
}
static void gen_conv2d(Rng *r, StrBuf *sb, Directives *d) {
    (void)d;
    gen_conv(r, sb, 2);
}

/* max/avg pool2d; every window keeps at least one element of the input */
static void gen_pool2d(Rng *r, StrBuf *sb, Directives *d) {
    (void)d;
    for (;;) {
        int64_t k[2], st[2], dl[2], in[2], pb[2], pa[2];
        StrBuf pad = {0};
        gen_padding(r, 2, 1, pb, pa, &pad);
        bool ceil_mode = rng_int(r, 0, 1), ok = true;
        for (int i = 0; i < 2; i++) {
            k[i] = rng_int(r, 1, 3);
            st[i] = rng_int(r, 1, 2);
            dl[i] = rng_int(r, 1, 2);
            in[i] = rng_int(r, 3, 6);
            int64_t window = dl[i] * (k[i] - 1) + 1, padded = in[i] + pb[i] + pa[i];
            if (pb[i] >= window || pa[i] >= window || window > padded) ok = false;
            if (!ok) break;
            int64_t out = (padded - window + (ceil_mode ? st[i] - 1 : 0)) / st[i] + 1;
            for (int64_t o = 0; o < out; o++) { /* some tap inside the input */
                bool any = false;
                for (int64_t t = 0; t < k[i]; t++) {
                    int64_t at = o * st[i] - pb[i] + t * dl[i];
                    any = any || (at >= 0 && at < in[i]);
                }
                ok = ok && any;
            }
        }
        if (!ok) {
            sb_free(&pad);
            continue;
        }
        bool avg = rng_int(r, 0, 1);
        sb_printf(
            sb,
            "fn (%%x: Tensor[(%lld, 2, %lld, %lld), %s]) { nn.%s_pool2d(%%x, pool_size=[%lld, "
            "%lld], strides=[%lld, %lld], dilation=[%lld, %lld], padding=%s, ceil_mode=%s",
            (long long)rng_int(r, 1, 2), (long long)in[0], (long long)in[1], gen_dtype(r),
            avg ? "avg" : "max", (long long)k[0], (long long)k[1], (long long)st[0],
            (long long)st[1], (long long)dl[0], (long long)dl[1], sb_cstr(&pad),
            ceil_mode ? "True" : "False");
        if (avg) sb_printf(sb, ", count_include_pad=%s", rng_int(r, 0, 1) ? "True" : "False");
        sb_puts(sb, ") }");
        sb_free(&pad);
        return;
    }
}

static void gen_shape(Rng *r, uint32_t nd, int64_t *s, StrBuf *sb, const char *dt) {
    sb_puts(sb, "Tensor[(");
    for (uint32_t i = 0; i < nd; i++) {
        s[i] = rng_int(r, 1, 4);
        sb_printf(sb, "%s%lld", i ? ", " : "", (long long)s[i]);
    }
    sb_printf(sb, "%s), %s]", nd == 1 ? "," : "", dt);
}

static void gen_reduce(Rng *r, StrBuf *sb, Directives *d) {
    static const char *const ops[] = {"sum",  "mean",      "max",      "min",
                                      "prod", "logsumexp", "variance", "std"};
    const char *op = ops[rng_int(r, 0, 7)];
    uint32_t nd = (uint32_t)rng_int(r, 1, 4);
    int64_t s[4], axes[4];
    const char *dt = gen_dtype(r);
    sb_puts(sb, "fn (%x: ");
    gen_shape(r, nd, s, sb, dt);
    bool moment = strcmp(op, "variance") == 0 || strcmp(op, "std") == 0;
    if (moment) {
        sb_puts(sb, ", %m: Tensor[(");
        for (uint32_t i = 0; i < nd; i++)
            sb_printf(sb, "%s%lld", i ? ", " : "", (long long)(rng_int(r, 0, 1) ? s[i] : 1));
        sb_printf(sb, "%s), %s]", nd == 1 ? "," : "", dt);
    }
    uint32_t na = 0;
    bool in_list[4] = {false};
    for (uint32_t i = 0; i < nd; i++)
        if (rng_int(r, 0, 1)) {
            axes[na++] = rng_int(r, 0, 1) ? (int64_t)i : (int64_t)i - nd;
            in_list[i] = true;
        }
    bool exclude = na > 0 && rng_int(r, 0, 1);
    int64_t count = 1; /* elements per reduced group: unbiased needs 2 */
    for (uint32_t i = 0; i < nd; i++)
        if (na == 0 || in_list[i] != exclude) count *= s[i];
    sb_printf(sb, ") { %s(%%x%s", op, moment ? ", %m" : "");
    if (na || rng_int(r, 0, 1)) {
        sb_puts(sb, ", axis=");
        ints_text(sb, na, axes);
    }
    sb_printf(sb, ", keepdims=%s", rng_int(r, 0, 1) ? "True" : "False");
    if (strcmp(op, "logsumexp") != 0 && na > 0)
        sb_printf(sb, ", exclude=%s", exclude ? "True" : "False");
    if (moment) sb_printf(sb, ", unbiased=%s", count > 1 && rng_int(r, 0, 1) ? "True" : "False");
    sb_puts(sb, ") }");
    if (strcmp(op, "prod") == 0) { /* away from 0, where y / x is undefined */
        Range rg = {"x", 0.5, 2, false};
        d->ranges[d->n_ranges++] = rg;
    }
}

static void gen_strided_slice(Rng *r, StrBuf *sb, Directives *d) {
    (void)d;
    uint32_t nd = (uint32_t)rng_int(r, 1, 3);
    int64_t s[3], bg[3], en[3], st[3], axes[3];
    sb_puts(sb, "fn (%x: Tensor[(");
    for (uint32_t i = 0; i < nd; i++) {
        s[i] = rng_int(r, 1, 6);
        sb_printf(sb, "%s%lld", i ? ", " : "", (long long)s[i]);
    }
    sb_printf(sb, "%s), %s]) { strided_slice(%%x", nd == 1 ? "," : "", gen_dtype(r));
    bool use_axes = rng_int(r, 0, 1), size_mode = rng_int(r, 0, 4) == 0;
    uint32_t na = use_axes ? (uint32_t)rng_int(r, 1, nd) : nd;
    for (uint32_t i = 0; i < na; i++) {
        axes[i] = use_axes ? (int64_t)((i + nd - na) % nd) : (int64_t)i;
        int64_t dd = s[axes[i]];
        st[i] = rng_int(r, 0, 2) == 0 ? -rng_int(r, 1, 2) : rng_int(r, 1, 3);
        bg[i] = rng_int(r, -dd - 1, dd);
        en[i] = rng_int(r, 0, 5) == 0 ? 1000 : rng_int(r, -dd - 1, dd + 1);
        if (size_mode) bg[i] = rng_int(r, 0, dd - 1), en[i] = rng_int(r, -1, dd - bg[i]);
    }
    sb_puts(sb, ", begin=");
    ints_text(sb, na, bg);
    sb_puts(sb, ", end=");
    ints_text(sb, na, en);
    if (!size_mode) {
        sb_puts(sb, ", strides=");
        ints_text(sb, na, st);
    } else {
        sb_puts(sb, ", slice_mode=\"size\"");
    }
    if (use_axes) {
        sb_puts(sb, ", axes=");
        ints_text(sb, na, axes);
    }
    sb_puts(sb, ") }");
}

static void gen_transpose(Rng *r, StrBuf *sb, Directives *d) {
    (void)d;
    uint32_t nd = (uint32_t)rng_int(r, 1, 4);
    int64_t s[4], perm[4];
    sb_puts(sb, "fn (%x: ");
    gen_shape(r, nd, s, sb, gen_dtype(r));
    for (uint32_t i = 0; i < nd; i++)
        perm[i] = i;
    for (uint32_t i = nd; i-- > 1;) {
        uint32_t j = (uint32_t)rng_int(r, 0, i);
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (uint32_t i = 0; i < nd; i++)
        if (rng_int(r, 0, 1)) perm[i] -= nd;
    sb_puts(sb, ") { transpose(%x, axes=");
    ints_text(sb, nd, perm);
    sb_puts(sb, ") }");
}

static void gen_take(Rng *r, StrBuf *sb, Directives *d) {
    uint32_t nd = (uint32_t)rng_int(r, 1, 3), ni = (uint32_t)rng_int(r, 1, 2);
    int64_t s[3], si[3];
    sb_puts(sb, "fn (%x: ");
    gen_shape(r, nd, s, sb, gen_dtype(r));
    bool flat = rng_int(r, 0, 3) == 0;
    int64_t axis = rng_int(r, 0, nd - 1), bd = flat ? 0 : rng_int(r, 0, axis < ni ? axis : ni);
    for (uint32_t i = 0; i < ni; i++)
        si[i] = i < bd ? s[i] : rng_int(r, 1, 3);
    sb_puts(sb, ", %i: Tensor[(");
    for (uint32_t i = 0; i < ni; i++)
        sb_printf(sb, "%s%lld", i ? ", " : "", (long long)si[i]);
    const char *mode = rng_int(r, 0, 2) == 0 ? "wrap" : rng_int(r, 0, 1) ? "clip" : "fast";
    sb_printf(sb, "%s), int32]) { take(%%x, %%i", ni == 1 ? "," : "");
    if (!flat) sb_printf(sb, ", axis=%lld, batch_dims=%lld", (long long)axis, (long long)bd);
    sb_printf(sb, ", mode=\"%s\") }", mode);
    int64_t n = 1;
    for (uint32_t i = 0; i < nd; i++)
        n *= s[i];
    int64_t ext = flat ? n : s[axis];
    Range rg = {"i", 0, (double)ext - 1, true};
    if (strcmp(mode, "fast") != 0) rg.lo = -2 * (double)ext, rg.hi = 2 * (double)ext;
    d->ranges[d->n_ranges++] = rg;
}

/* conv2d_transpose: output_padding below the stride (what the gradient handles) */
static void gen_conv2d_transpose(Rng *r, StrBuf *sb, Directives *d) {
    (void)d;
    int64_t groups = rng_int(r, 1, 2), cin = groups * rng_int(r, 1, 2), cout_g = rng_int(r, 1, 2);
    int64_t k[2], st[2], dl[2], in[2], op[2], pb[2], pa[2];
    StrBuf pad = {0};
    gen_padding(r, 2, 2, pb, pa, &pad);
    for (int i = 0; i < 2; i++) {
        k[i] = rng_int(r, 1, 3);
        st[i] = rng_int(r, 1, 3);
        dl[i] = rng_int(r, 1, 2);
        op[i] = rng_int(r, 0, st[i] - 1);
        in[i] = rng_int(r, 2, 4);
        int64_t out = (in[i] - 1) * st[i] + dl[i] * (k[i] - 1) + 1 + op[i] - pb[i] - pa[i];
        if (out < 1) in[i] += (1 - out + st[i] - 1) / st[i]; /* grow until the output is >= 1 */
    }
    const char *dt = gen_dtype(r);
    sb_printf(sb,
              "fn (%%x: Tensor[(%lld, %lld, %lld, %lld), %s], %%w: Tensor[(%lld, %lld, %lld, "
              "%lld), %s]) { nn.conv2d_transpose(%%x, %%w, strides=",
              (long long)rng_int(r, 1, 2), (long long)cin, (long long)in[0], (long long)in[1], dt,
              (long long)cin, (long long)cout_g, (long long)k[0], (long long)k[1], dt);
    ints_text(sb, 2, st);
    sb_printf(sb, ", padding=%s, dilation=", sb_cstr(&pad));
    ints_text(sb, 2, dl);
    sb_puts(sb, ", output_padding=");
    ints_text(sb, 2, op);
    sb_printf(sb, ", groups=%lld) }", (long long)groups);
    sb_free(&pad);
}

/* conv2d_backward_weight(grad, data) with grad of the convolution's output shape */
static void gen_conv2d_backward_weight(Rng *r, StrBuf *sb, Directives *d) {
    (void)d;
    int64_t groups = rng_int(r, 1, 2), cin = groups * rng_int(r, 1, 2);
    int64_t cout = groups * rng_int(r, 1, 2), nb = rng_int(r, 1, 2);
    int64_t k[2], st[2], dl[2], in[2], out[2], pb[2], pa[2];
    StrBuf pad = {0};
    gen_padding(r, 2, 1, pb, pa, &pad);
    for (int i = 0; i < 2; i++) {
        k[i] = rng_int(r, 1, 3);
        st[i] = rng_int(r, 1, 2);
        dl[i] = rng_int(r, 1, 2);
        int64_t window = dl[i] * (k[i] - 1) + 1, lo = window - pb[i] - pa[i];
        in[i] = rng_int(r, lo > 2 ? lo : 2, (lo > 2 ? lo : 2) + 3);
        out[i] = (in[i] + pb[i] + pa[i] - window) / st[i] + 1;
    }
    const char *dt = gen_dtype(r);
    sb_printf(sb,
              "fn (%%a: Tensor[(%lld, %lld, %lld, %lld), %s], %%x: Tensor[(%lld, %lld, %lld, "
              "%lld), %s]) { nn.conv2d_backward_weight(%%a, %%x, kernel_size=",
              (long long)nb, (long long)cout, (long long)out[0], (long long)out[1], dt,
              (long long)nb, (long long)cin, (long long)in[0], (long long)in[1], dt);
    ints_text(sb, 2, k);
    sb_puts(sb, ", strides=");
    ints_text(sb, 2, st);
    sb_printf(sb, ", padding=%s, dilation=", sb_cstr(&pad));
    ints_text(sb, 2, dl);
    sb_printf(sb, ", groups=%lld, channels=%lld) }", (long long)groups, (long long)cout);
    sb_free(&pad);
}

/* broadcasting binary operators on random broadcastable shapes */
static void gen_binary(Rng *r, StrBuf *sb, Directives *d) {
    static const char *const ops[] = {"add",     "subtract", "multiply", "divide",
                                      "maximum", "minimum",  "power"};
    const char *op = ops[rng_int(r, 0, 6)];
    uint32_t nd = (uint32_t)rng_int(r, 0, 3);
    int64_t out[3];
    for (uint32_t i = 0; i < nd; i++)
        out[i] = rng_int(r, 1, 3);
    const char *dt = gen_dtype(r);
    sb_puts(sb, "fn (");
    for (int a = 0; a < 2; a++) {
        uint32_t na = (uint32_t)rng_int(r, 0, nd);
        sb_printf(sb, "%s%%%c: Tensor[(", a ? ", " : "", a ? 'b' : 'a');
        for (uint32_t i = 0; i < na; i++) {
            int64_t v = out[nd - na + i];
            sb_printf(sb, "%s%lld", i ? ", " : "", (long long)(rng_int(r, 0, 2) == 0 ? 1 : v));
        }
        sb_printf(sb, "%s), %s]", na == 1 ? "," : "", dt);
    }
    sb_printf(sb, ") { %s(%%a, %%b) }", op);
    if (strcmp(op, "power") == 0) d->ranges[d->n_ranges++] = (Range){"a", 0.3, 2, false};
}

/* nn.pad in every mode (constant with cropping widths) and nn.mirror_pad */
static void gen_pad(Rng *r, StrBuf *sb, Directives *d) {
    (void)d;
    uint32_t nd = (uint32_t)rng_int(r, 1, 3);
    int64_t s[3];
    int mode = (int)rng_int(r, 0, 4); /* constant, edge, reflect, SYMMETRIC, REFLECT */
    sb_puts(sb, "fn (%x: Tensor[(");
    for (uint32_t i = 0; i < nd; i++) {
        s[i] = rng_int(r, 2, 4);
        sb_printf(sb, "%s%lld", i ? ", " : "", (long long)s[i]);
    }
    sb_printf(sb, "%s), %s]%s) { %s(%%x%s, pad_width=[", nd == 1 ? "," : "", gen_dtype(r),
              mode < 3 ? ", %v: float64" : "", mode < 3 ? "nn.pad" : "nn.mirror_pad",
              mode < 3 ? ", %v" : "");
    for (uint32_t i = 0; i < nd; i++) {
        int64_t most = mode == 1 ? 3 : mode == 3 ? s[i] : s[i] - 1;
        int64_t lo = mode == 0 ? -1 : 0, hi = mode == 0 ? 2 : most;
        sb_printf(sb, "%s[%lld, %lld]", i ? ", " : "", (long long)rng_int(r, lo, hi),
                  (long long)rng_int(r, lo, hi));
    }
    static const char *const modes[] = {"", ", pad_mode=\"edge\"", ", pad_mode=\"reflect\"", "",
                                        ", mode=\"REFLECT\""};
    sb_printf(sb, "]%s) }", modes[mode]);
}

/* nn.matmul (transposes, leading axes) and nn.batch_matmul (batch broadcasting) */
static void gen_matmul(Rng *r, StrBuf *sb, Directives *d) {
    (void)d;
    bool ta = rng_int(r, 0, 1), tb = rng_int(r, 0, 1), batch = rng_int(r, 0, 1);
    int64_t m = rng_int(r, 1, 3), k = rng_int(r, 1, 4), n = rng_int(r, 1, 3);
    const char *dt = gen_dtype(r);
    sb_puts(sb, "fn (%a: Tensor[(");
    if (batch) {
        int64_t bs = rng_int(r, 2, 3), ba = rng_int(r, 0, 2) ? bs : 1,
                bb = rng_int(r, 0, 2) ? bs : 1;
        sb_printf(sb,
                  "%lld, %lld, %lld), %s], %%b: Tensor[(%lld, %lld, %lld), %s]) { "
                  "nn.batch_matmul(%%a, %%b",
                  (long long)ba, (long long)(ta ? k : m), (long long)(ta ? m : k), dt,
                  (long long)bb, (long long)(tb ? n : k), (long long)(tb ? k : n), dt);
    } else {
        uint32_t lead = (uint32_t)rng_int(r, ta ? 1 : 0, 2);
        for (uint32_t i = 0; i + 1 < lead; i++)
            sb_printf(sb, "%lld, ", (long long)rng_int(r, 1, 2));
        if (ta)
            sb_printf(sb, "%lld, %lld", (long long)k, (long long)m);
        else if (lead > 0)
            sb_printf(sb, "%lld, %lld", (long long)m, (long long)k);
        else
            sb_printf(sb, "%lld,", (long long)k);
        sb_printf(sb, "), %s], %%b: Tensor[(%lld, %lld), %s]) { nn.matmul(%%a, %%b", dt,
                  (long long)(tb ? n : k), (long long)(tb ? k : n), dt);
    }
    sb_printf(sb, ", transpose_a=%s, transpose_b=%s) }", ta ? "True" : "False",
              tb ? "True" : "False");
}

static const struct {
    const char *name;
    GenFn fn;
} generators[] = {
    {"conv2d_transpose", gen_conv2d_transpose},
    {"conv2d_backward_weight", gen_conv2d_backward_weight},
    {"binary", gen_binary},
    {"pad", gen_pad},
    {"matmul", gen_matmul},
    {"conv1d", gen_conv1d},
    {"conv2d", gen_conv2d},
    {"pool2d", gen_pool2d},
    {"reduce", gen_reduce},
    {"strided_slice", gen_strided_slice},
    {"transpose", gen_transpose},
    {"take", gen_take},
};

static void run_generator(const char *file, int line, const char *name, long count) {
    size_t n = sizeof generators / sizeof generators[0], g = 0;
    while (g < n && strcmp(generators[g].name, name) != 0)
        g++;
    if (g == n) {
        CHECK(false, "%s:%d: unknown generator %s", file, line, name);
        return;
    }
    char where[256];
    snprintf(where, sizeof where, "gen:%s", name);
    Rng r = rng_for(where, 0);
    for (long k = 0; k < count; k++) {
        StrBuf text = {0};
        Directives dir = {0};
        generators[g].fn(&r, &text, &dir);
        snprintf(where, sizeof where, "%.150s:%d: gen %.40s #%ld", file, line, name, k);
        run_case(where, sb_cstr(&text), &dir, k);
        sb_free(&text);
    }
}

/* ======================================================================================
 * Spec files
 * ====================================================================================== */

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

static void run_file(const char *path, const char *name) {
    char *data;
    size_t len;
    char err[256];
    if (!sup_read_file(path, &data, &len, err, sizeof err)) {
        CHECK(false, "%s", err);
        return;
    }
    Directives dir = {0};
    int lineno = 0;
    for (char *line = data, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        char *s = trim(line);
        if (*s == '\0' || *s == '#') continue;
        char where[256];
        snprintf(where, sizeof where, "%.200s:%d", name, lineno);
        if (*s == '@') {
            char kw[32], a[200];
            double lo, hi;
            long count;
            bool ok = false;
            if (sscanf(s, "@range %63s %lf %lf", a, &lo, &hi) == 3 ||
                sscanf(s, "@ints %63s %lf %lf", a, &lo, &hi) == 3) {
                ok = dir.n_ranges < MAX_DIRS;
                if (ok) {
                    Range *rg = &dir.ranges[dir.n_ranges++];
                    snprintf(rg->name, sizeof rg->name, "%.63s", a);
                    rg->lo = lo, rg->hi = hi, rg->ints = strncmp(s, "@ints", 5) == 0;
                }
            } else if (strncmp(s, "@shape ", 7) == 0 && dir.n_shapes < MAX_DIRS) {
                Shape *sh = &dir.shapes[dir.n_shapes];
                int used = 0;
                ok = sscanf(s, "@shape %63s%n", sh->name, &used) == 1;
                for (const char *p = s + used; ok && *p;) {
                    char *end;
                    long long v = strtoll(p, &end, 10);
                    if (end == p || sh->ndim == 8) {
                        ok = false;
                        break;
                    }
                    sh->dims[sh->ndim++] = v;
                    p = end;
                    while (*p == ' ')
                        p++;
                }
                dir.n_shapes += ok;
            } else if (sscanf(s, "@tol %lf", &lo) == 1) {
                dir.tol = lo;
                ok = true;
            } else if (strncmp(s, "@refuse ", 8) == 0) {
                snprintf(dir.refuse, sizeof dir.refuse, "%s", trim(s + 8));
                ok = true;
            } else if (sscanf(s, "@gen %31s %ld", kw, &count) == 2) {
                run_generator(name, lineno, kw, count);
                ok = true;
            }
            CHECK(ok, "%s: bad directive: %s", where, s);
            continue;
        }
        if (strncmp(s, "fn", 2) != 0) {
            CHECK(false, "%s: expected a case `fn (...) { ... }` or a directive", where);
            continue;
        }
        run_case(where, s, &dir, lineno);
        dir = (Directives){0};
    }
    free(data);
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_grad_ops DIR\n");
        return 2;
    }
    const char *seed = getenv("RLY_SEED");
    T.seed = seed ? strtoull(seed, NULL, 10) : 20240917;
    T.verbose = getenv("RLY_GRAD_VERBOSE") != NULL;
    printf("test_grad_ops: seed %llu\n", (unsigned long long)T.seed);
    struct dirent **list;
    int n = scandir(argv[1], &list, NULL, by_name);
    CHECK(n > 0, "cannot read %s", argv[1]);
    for (int i = 0; i < n; i++) {
        const char *nm = list[i]->d_name;
        size_t l = strlen(nm);
        if (l > 4 && strcmp(nm + l - 4, ".txt") == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[1], nm);
            run_file(path, nm);
        }
        free(list[i]);
    }
    if (n > 0) free(list);
    /* every gradient is tested, and names an operator */
    size_t n_ops = grad_count(), n_zero = 0;
    for (size_t i = 0; i < n_ops; i++) {
        const char *nm = grad_name_at(i);
        n_zero += grad_is_zero(nm);
        CHECK(op_lookup(nm, strlen(nm)) != NULL, "gradient for unknown operator %s", nm);
        CHECK(strmap_get(&T.covered, nm, strlen(nm)) != NULL, "no case tests the gradient of %s",
              nm);
    }
    printf("%zu ops (%zu with a nonzero gradient, %zu zero), %ld cases, %d checks passed\n", n_ops,
           n_ops - n_zero, n_zero, T.n_cases, n_pass);
    strmap_free(&T.covered);
    return check_summary();
}
