/* grad_ops.c - the per-operator gradients: the registry (grad_of, by operator id) and its
 * dispatcher, the builder of adjoint expressions that every gradient uses (grad.h), and the
 * gradients of the elementwise math (unary and binary) and reduction operators. Shape, indexing and
 * layout operators are in grad_ops_transform.c, nn.* operators in grad_ops_nn.c.
 *
 * Conventions of every gradient: x is an argument, y = out the result, g = dout its adjoint.
 * An adjoint is built only from operators that have a gradient themselves wherever possible, so
 * that differentiating twice works; the exceptions are listed where they are built. Broadcasting
 * binary operators reduce their adjoint to each argument's shape with collapse_sum_like. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "passes/grad.h"

/* ======================================================================================
 * The registry and the dispatcher
 * ====================================================================================== */

/* A new operator changes this count: decide whether it has a gradient (a row in one of the
 * tables, GradImpl or NULL for a zero gradient), then update it. */
_Static_assert(OP_ID_COUNT == 231, "operator added or removed: see support/ops.def");

static const GradDef *const grad_tables[] = {grad_math_table, grad_transform_table, grad_nn_table};

static struct {
    pthread_once_t once;
    const GradDef *by_id[OP_ID_COUNT]; /* NULL: the operator has no gradient */
    size_t n;                          /* rows in all tables */
} reg = {PTHREAD_ONCE_INIT, {0}, 0};

static void reg_init(void) {
    for (size_t t = 0; t < RLY_ARRAY_LEN(grad_tables); t++)
        for (const GradDef *d = grad_tables[t]; d->op != OP_ID_COUNT; d++) {
            RLY_CHECK(d->op < OP_ID_COUNT && reg.by_id[d->op] == NULL,
                      "gradient table: id %u out of range or given two rows", d->op);
            reg.by_id[d->op] = d;
            reg.n++;
        }
}

static const GradDef *grad_find(uint32_t op) {
    if (op >= OP_ID_COUNT) return NULL; /* registered operators have no gradient */
    pthread_once(&reg.once, reg_init);
    return reg.by_id[op];
}

static const GradDef *grad_find_name(const char *name) {
    const OpDef *op = op_lookup(name, strlen(name));
    return op ? grad_find(op->id) : NULL;
}

/* Whether t holds a floating-point tensor (tuples: any field, at any depth). */
static bool holds_float(Type *t) { return t != NULL && (t->flags & TYPE_HAS_FLOAT); }

static bool grad_dispatch(const GradCall *g, Expr **d, StrBuf *msg) {
    for (uint32_t i = 0; i < g->n_args; i++)
        d[i] = NULL;
    const GradDef *def = grad_find(g->op->id);
    if (def == NULL) {
        sb_printf(msg, "%s has no gradient", g->op->name);
        return false;
    }
    if (def->impl == NULL || !holds_float(g->out_type)) return true;
    const AttrValue **vals =
        arena_array(&g->ctx->arena, g->op->n_attrs ? g->op->n_attrs : 1, sizeof *vals);
    Span where;
    if (!op_bind_attrs(g->op, g->attrs, vals, msg, &where)) return false;
    GradBuilder b = {.g = g, .ctx = g->ctx, .span = g->span, .msg = msg};
    b.rc = (RelCall){g->ctx, g->op, g->n_args, g->arg_types, vals, NULL, msg, -1, REL_OK};
    if (!def->impl(&b, d)) return false;
    RLY_CHECK(b.n_lets == 0, "gradient of %s left let bindings open", g->op->name);
    for (uint32_t i = 0; i < g->n_args; i++)
        if (!holds_float(g->arg_types[i])) d[i] = NULL;
    return true;
}

OpGradFn grad_of(const OpDef *op) { return grad_find(op->id) ? grad_dispatch : NULL; }

OpGradFn grad_lookup(const char *name) { return grad_find_name(name) ? grad_dispatch : NULL; }

size_t grad_count(void) {
    pthread_once(&reg.once, reg_init);
    return reg.n;
}

const char *grad_name_at(size_t i) {
    for (size_t t = 0; t < RLY_ARRAY_LEN(grad_tables); t++)
        for (const GradDef *d = grad_tables[t]; d->op != OP_ID_COUNT; d++)
            if (i-- == 0) return sup_op_name(d->op);
    return NULL;
}

bool grad_is_zero(const char *name) {
    const GradDef *d = grad_find_name(name);
    return d != NULL && d->impl == NULL;
}

/* ======================================================================================
 * The builder
 * ====================================================================================== */

bool grad_fail(GradBuilder *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b->msg, fmt, ap);
    va_end(ap);
    b->n_lets = 0;
    return false;
}

void grad_begin(GradBuilder *b) { b->n_lets = 0; }

Expr *grad_let(GradBuilder *b, Expr *value) {
    if (value->kind == EXPR_VAR || value->kind == EXPR_CONSTANT) return value; /* atoms */
    RLY_CHECK(b->n_lets < GRAD_MAX_LETS, "too many let bindings in one adjoint");
    Var *v = ir_var_new(b->ctx, ir_intern(b->ctx, "t", 1), NULL, b->span);
    b->let_vars[b->n_lets] = v;
    b->let_vals[b->n_lets++] = value;
    return &v->base;
}

Expr *grad_end(GradBuilder *b, Expr *body) {
    while (b->n_lets > 0) {
        b->n_lets--;
        body = ir_let_new(b->ctx, b->let_vars[b->n_lets], b->let_vals[b->n_lets], body, b->span);
    }
    return body;
}

Expr *grad_call(GradBuilder *b, const char *op, uint32_t n, Expr *const *args, const Attrs *attrs) {
    Expr *opx = ir_op_get(b->ctx, op, strlen(op));
    RLY_CHECK(op_def_of(opx) != NULL, "gradient uses unknown operator %s", op);
    return ir_call_new(b->ctx, opx, n, args, attrs, 0, NULL, b->span);
}

Expr *grad_op1(GradBuilder *b, const char *op, Expr *x) { return grad_call(b, op, 1, &x, NULL); }
Expr *grad_op2(GradBuilder *b, const char *op, Expr *x, Expr *y) {
    Expr *a[2] = {x, y};
    return grad_call(b, op, 2, a, NULL);
}
Expr *grad_op1a(GradBuilder *b, const char *op, Expr *x, const Attrs *attrs) {
    return grad_call(b, op, 1, &x, attrs);
}
Expr *grad_op2a(GradBuilder *b, const char *op, Expr *x, Expr *y, const Attrs *attrs) {
    Expr *a[2] = {x, y};
    return grad_call(b, op, 2, a, attrs);
}

const Attrs *grad_attrs(GradBuilder *b, uint32_t n, ...) {
    const char *keys[16];
    AttrValue *vals[16];
    RLY_CHECK(n <= 16, "too many attributes");
    va_list ap;
    va_start(ap, n);
    for (uint32_t i = 0; i < n; i++) {
        const char *k = va_arg(ap, const char *);
        keys[i] = ir_intern(b->ctx, k, strlen(k));
        vals[i] = va_arg(ap, AttrValue *);
    }
    va_end(ap);
    return ir_attrs_new(b->ctx, n, keys, vals);
}

AttrValue *grad_ai(GradBuilder *b, int64_t v) {
    return ir_attr_int(b->ctx, v, RLY_DTYPE_I64, b->span);
}
AttrValue *grad_af(GradBuilder *b, double v) {
    return ir_attr_float(b->ctx, v, RLY_DTYPE_F64, b->span);
}
AttrValue *grad_ab(GradBuilder *b, bool v) { return ir_attr_bool(b->ctx, v, b->span); }
AttrValue *grad_as(GradBuilder *b, const char *s) {
    return ir_attr_str(b->ctx, s, strlen(s), b->span);
}
AttrValue *grad_ais(GradBuilder *b, uint32_t n, const int64_t *v) {
    AttrValue **items = arena_array(&b->ctx->arena, n ? n : 1, sizeof *items);
    for (uint32_t i = 0; i < n; i++)
        items[i] = grad_ai(b, v[i]);
    return ir_attr_list(b->ctx, n, items, b->span);
}
AttrValue *grad_anone(GradBuilder *b) { return ir_attr_none(b->ctx, b->span); }
AttrValue *grad_attr_same(GradBuilder *b, const char *key) {
    return (AttrValue *)attr_value(&b->rc, key);
}

Expr *grad_add(GradBuilder *b, Expr *x, Expr *y) { return grad_op2(b, "add", x, y); }
Expr *grad_sub(GradBuilder *b, Expr *x, Expr *y) { return grad_op2(b, "subtract", x, y); }
Expr *grad_mul(GradBuilder *b, Expr *x, Expr *y) { return grad_op2(b, "multiply", x, y); }
Expr *grad_div(GradBuilder *b, Expr *x, Expr *y) { return grad_op2(b, "divide", x, y); }
Expr *grad_neg(GradBuilder *b, Expr *x) { return grad_op1(b, "negative", x); }
Expr *grad_scalar(GradBuilder *b, rly_dtype dt, double v) {
    return ir_scalar_f64(b->ctx, dt, v, b->span);
}

Expr *grad_mask(GradBuilder *b, Expr *cond, Expr *x) {
    x = grad_let(b, x);
    Expr *a[3] = {cond, x, grad_op1(b, "zeros_like", x)};
    return grad_call(b, "where", 3, a, NULL);
}

Expr *grad_sum(GradBuilder *b, Expr *x, uint32_t n_axes, const int64_t *axes, bool keepdims,
               bool exclude) {
    AttrValue *axis = n_axes ? grad_ais(b, n_axes, axes) : grad_anone(b);
    return grad_op1a(b, "sum", x,
                     grad_attrs(b, 3, "axis", axis, "keepdims", grad_ab(b, keepdims), "exclude",
                                grad_ab(b, exclude)));
}

Expr *grad_reshape(GradBuilder *b, Expr *x, uint32_t n, const int64_t *shape) {
    return grad_op1a(b, "reshape", x, grad_attrs(b, 1, "newshape", grad_ais(b, n, shape)));
}

static bool type_static(Type *t) {
    if (t->kind != TYPE_TENSOR) return false;
    TensorType *tt = AS_TENSOR_TYPE(t);
    for (uint32_t i = 0; i < tt->ndim; i++)
        if (!dim_known(tt->shape[i])) return false;
    return true;
}

Expr *grad_collapse(GradBuilder *b, Expr *x, Type *x_type, Expr *like, Type *like_type) {
    /* equal static types need nothing; `?` dims may still differ at run time */
    if (x_type == like_type && type_static(x_type)) return x;
    return grad_op2(b, "collapse_sum_like", x, like);
}

Expr *grad_size_ratio(GradBuilder *b, Expr *x, Expr *y, rly_dtype dt) {
    const Attrs *i64 = grad_attrs(b, 1, "dtype", grad_as(b, "int64"));
    const Attrs *to = grad_attrs(b, 1, "dtype", grad_as(b, sup_dtype_name(dt)));
    Expr *nx = grad_op1a(b, "cast", grad_op1a(b, "ndarray_size", x, i64), to);
    Expr *ny = grad_op1a(b, "cast", grad_op1a(b, "ndarray_size", y, i64), to);
    return grad_div(b, nx, ny);
}

TensorType *grad_arg_tensor(GradBuilder *b, uint32_t i) {
    Type *t = b->g->arg_types[i];
    return t->kind == TYPE_TENSOR ? AS_TENSOR_TYPE(t) : NULL;
}

TensorType *grad_out_tensor(GradBuilder *b) {
    Type *t = b->g->out_type;
    return t->kind == TYPE_TENSOR ? AS_TENSOR_TYPE(t) : NULL;
}

bool grad_need_static(GradBuilder *b, const TensorType *t, const char *what) {
    if (type_static((Type *)&t->base)) return true;
    StrBuf s = {0};
    ir_print_type(b->ctx, (Type *)&t->base, &s);
    grad_fail(b, "the gradient needs a static shape for %s, got %s", what, sb_cstr(&s));
    sb_free(&s);
    return false;
}

int64_t grad_numel(const TensorType *t) {
    int64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

void grad_reduce_axes(GradBuilder *b, uint32_t ndim, bool has_exclude, bool *red) {
    const int64_t *axes;
    uint32_t n = attr_ints(&b->rc, "axis", &axes);
    bool exclude = has_exclude && attr_bool(&b->rc, "exclude");
    for (uint32_t i = 0; i < ndim; i++)
        red[i] = n == 0; /* None or []: every axis */
    if (n == 0) return;
    for (uint32_t k = 0; k < n; k++)
        red[axes[k] < 0 ? axes[k] + ndim : axes[k]] = true;
    if (exclude)
        for (uint32_t i = 0; i < ndim; i++)
            red[i] = !red[i];
}

Expr *grad_keep_dims(GradBuilder *b, Expr *dy, uint32_t ndim, const bool *red, bool keepdims) {
    if (keepdims) return dy;
    uint32_t n_red = 0;
    for (uint32_t i = 0; i < ndim; i++)
        n_red += red[i];
    if (n_red == ndim && ndim > 0)
        return grad_op1a(b, "expand_dims", dy,
                         grad_attrs(b, 2, "axis", grad_ai(b, 0), "num_newaxis", grad_ai(b, ndim)));
    for (uint32_t i = 0; i < ndim; i++) /* ascending: each axis lands at its final position */
        if (red[i]) dy = grad_op1a(b, "expand_dims", dy, grad_attrs(b, 1, "axis", grad_ai(b, i)));
    return dy;
}

Expr *grad_along(GradBuilder *b, Expr *v, uint32_t ndim, int64_t axis) {
    int64_t k = (int64_t)ndim - 1 - axis;
    if (k <= 0) return v;
    return grad_op1a(b, "expand_dims", v,
                     grad_attrs(b, 2, "axis", grad_ai(b, 1), "num_newaxis", grad_ai(b, k)));
}

/* ======================================================================================
 * Unary math: d = g * f'(x), with f' written with x and y = f(x)
 * ====================================================================================== */

#define X (b->g->args[0])
#define Y (b->g->out)
#define G (b->g->dout)
#define DT (grad_arg_tensor(b, 0)->dtype)
#define S(v) grad_scalar(b, DT, (v))

/* d[0] = g * factor. */
static bool times(GradBuilder *b, Expr **d, Expr *factor) {
    d[0] = grad_mul(b, G, factor);
    return true;
}

static bool g_log(GradBuilder *b, Expr **d) {
    d[0] = grad_div(b, G, X);
    return true;
}
static bool g_log2(GradBuilder *b, Expr **d) {
    d[0] = grad_div(b, G, grad_mul(b, X, S(log(2.0))));
    return true;
}
static bool g_log10(GradBuilder *b, Expr **d) {
    d[0] = grad_div(b, G, grad_mul(b, X, S(log(10.0))));
    return true;
}
static bool g_exp(GradBuilder *b, Expr **d) { return times(b, d, Y); }
/* the fast approximations are differentiated as their exact forms */
static bool g_fast_exp(GradBuilder *b, Expr **d) { return times(b, d, grad_op1(b, "exp", X)); }
static bool g_sqrt(GradBuilder *b, Expr **d) {
    d[0] = grad_div(b, grad_mul(b, G, S(0.5)), Y);
    return true;
}
static bool g_rsqrt(GradBuilder *b, Expr **d) { /* -0.5 x^-3/2 = -0.5 y / x */
    return times(b, d, grad_mul(b, S(-0.5), grad_div(b, Y, X)));
}
static bool g_sigmoid(GradBuilder *b, Expr **d) {
    return times(b, d, grad_mul(b, Y, grad_sub(b, S(1), Y)));
}
static bool g_tanh(GradBuilder *b, Expr **d) {
    return times(b, d, grad_sub(b, S(1), grad_mul(b, Y, Y)));
}
static bool g_fast_tanh(GradBuilder *b, Expr **d) {
    grad_begin(b);
    Expr *t = grad_let(b, grad_op1(b, "tanh", X));
    d[0] = grad_end(b, grad_mul(b, G, grad_sub(b, S(1), grad_mul(b, t, t))));
    return true;
}
static bool g_sin(GradBuilder *b, Expr **d) { return times(b, d, grad_op1(b, "cos", X)); }
static bool g_cos(GradBuilder *b, Expr **d) {
    return times(b, d, grad_neg(b, grad_op1(b, "sin", X)));
}
static bool g_tan(GradBuilder *b, Expr **d) {
    return times(b, d, grad_add(b, S(1), grad_mul(b, Y, Y)));
}
static bool g_sinh(GradBuilder *b, Expr **d) { return times(b, d, grad_op1(b, "cosh", X)); }
static bool g_cosh(GradBuilder *b, Expr **d) { return times(b, d, grad_op1(b, "sinh", X)); }
static bool g_asin(GradBuilder *b, Expr **d) {
    return times(b, d, grad_op1(b, "rsqrt", grad_sub(b, S(1), grad_mul(b, X, X))));
}
static bool g_acos(GradBuilder *b, Expr **d) {
    return times(b, d, grad_neg(b, grad_op1(b, "rsqrt", grad_sub(b, S(1), grad_mul(b, X, X)))));
}
static bool g_atan(GradBuilder *b, Expr **d) {
    d[0] = grad_div(b, G, grad_add(b, S(1), grad_mul(b, X, X)));
    return true;
}
static bool g_asinh(GradBuilder *b, Expr **d) {
    return times(b, d, grad_op1(b, "rsqrt", grad_add(b, grad_mul(b, X, X), S(1))));
}
static bool g_acosh(GradBuilder *b, Expr **d) {
    return times(b, d, grad_op1(b, "rsqrt", grad_sub(b, grad_mul(b, X, X), S(1))));
}
static bool g_atanh(GradBuilder *b, Expr **d) {
    d[0] = grad_div(b, G, grad_sub(b, S(1), grad_mul(b, X, X)));
    return true;
}
static bool g_erf(GradBuilder *b, Expr **d) { /* 2 / sqrt(pi) * exp(-x^2) */
    Expr *e = grad_op1(b, "exp", grad_neg(b, grad_mul(b, X, X)));
    return times(b, d, grad_mul(b, S(1.1283791670955126) /* 2 / sqrt(pi) */, e));
}
static bool g_abs(GradBuilder *b, Expr **d) { return times(b, d, grad_op1(b, "sign", X)); }
static bool g_negative(GradBuilder *b, Expr **d) {
    d[0] = grad_neg(b, G);
    return true;
}
static bool g_copy(GradBuilder *b, Expr **d) {
    d[0] = G;
    return true;
}
/* clip: g where a_min <= x <= a_max (a_min > a_max clips everything to a_max: no gradient) */
static bool g_clip(GradBuilder *b, Expr **d) {
    Expr *lo = grad_op2(b, "greater_equal", X, S(attr_float(&b->rc, "a_min")));
    Expr *hi = grad_op2(b, "less_equal", X, S(attr_float(&b->rc, "a_max")));
    grad_begin(b);
    d[0] = grad_end(b, grad_mask(b, grad_op2(b, "logical_and", lo, hi), G));
    return true;
}

/* ======================================================================================
 * Binary broadcasting operators: each adjoint is collapsed to its argument's shape
 * ====================================================================================== */

#define A0 (b->g->args[0])
#define A1 (b->g->args[1])

/* d[i] = collapse(full, argument i), full having the result's type. */
static Expr *to_arg(GradBuilder *b, uint32_t i, Expr *full) {
    return grad_collapse(b, full, b->g->out_type, b->g->args[i], b->g->arg_types[i]);
}

static bool g_add(GradBuilder *b, Expr **d) {
    d[0] = to_arg(b, 0, G);
    d[1] = to_arg(b, 1, G);
    return true;
}
static bool g_subtract(GradBuilder *b, Expr **d) {
    d[0] = to_arg(b, 0, G);
    d[1] = to_arg(b, 1, grad_neg(b, G));
    return true;
}
static bool g_multiply(GradBuilder *b, Expr **d) {
    d[0] = to_arg(b, 0, grad_mul(b, G, A1));
    d[1] = to_arg(b, 1, grad_mul(b, G, A0));
    return true;
}
static bool g_divide(GradBuilder *b, Expr **d) { /* y = a / b: db = -g y / b */
    d[0] = to_arg(b, 0, grad_div(b, G, A1));
    d[1] = to_arg(b, 1, grad_neg(b, grad_div(b, grad_mul(b, G, Y), A1)));
    return true;
}
/* y = a ** b: da = g b a^(b - 1), db = g y log(a) (defined for a > 0) */
static bool g_power(GradBuilder *b, Expr **d) {
    Expr *pm1 = grad_op2(b, "power", A0, grad_sub(b, A1, S(1)));
    d[0] = to_arg(b, 0, grad_mul(b, G, grad_mul(b, A1, pm1)));
    d[1] = to_arg(b, 1, grad_mul(b, G, grad_mul(b, Y, grad_op1(b, "log", A0))));
    return true;
}
/* maximum / minimum: ties go to the left argument */
static bool g_maximum(GradBuilder *b, Expr **d) {
    grad_begin(b);
    d[0] = grad_end(b, to_arg(b, 0, grad_mask(b, grad_op2(b, "greater_equal", A0, A1), G)));
    grad_begin(b);
    d[1] = grad_end(b, to_arg(b, 1, grad_mask(b, grad_op2(b, "less", A0, A1), G)));
    return true;
}
static bool g_minimum(GradBuilder *b, Expr **d) {
    grad_begin(b);
    d[0] = grad_end(b, to_arg(b, 0, grad_mask(b, grad_op2(b, "less_equal", A0, A1), G)));
    grad_begin(b);
    d[1] = grad_end(b, to_arg(b, 1, grad_mask(b, grad_op2(b, "greater", A0, A1), G)));
    return true;
}
/* a - round(a / b) * b with round = trunc (mod, trunc_mod) or floor (floor_mod) */
static bool rem_grad(GradBuilder *b, Expr **d, const char *round) {
    d[0] = to_arg(b, 0, G);
    d[1] = to_arg(b, 1, grad_neg(b, grad_mul(b, G, grad_op1(b, round, grad_div(b, A0, A1)))));
    return true;
}
static bool g_mod(GradBuilder *b, Expr **d) { return rem_grad(b, d, "trunc"); }
static bool g_floor_mod(GradBuilder *b, Expr **d) { return rem_grad(b, d, "floor"); }

/* ======================================================================================
 * Reductions
 * ====================================================================================== */

/* The reduced axes of argument 0 (rank written to *ndim). */
static void reduced(GradBuilder *b, bool has_exclude, uint32_t *ndim, bool *red) {
    *ndim = grad_arg_tensor(b, 0)->ndim;
    grad_reduce_axes(b, *ndim, has_exclude, red);
}

/* The reduced axes as a list (for sum(..., keepdims=True)); returns the count. */
static uint32_t red_list(uint32_t ndim, const bool *red, int64_t *axes) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < ndim; i++)
        if (red[i]) axes[n++] = i;
    return n;
}

/* The number of elements each output element reduces, as a scalar of dtype dt: a constant for
 * static shapes, else size(x) / size(y). */
static Expr *red_count(GradBuilder *b, const TensorType *x, const bool *red, rly_dtype dt) {
    bool known = true;
    double n = 1;
    for (uint32_t i = 0; i < x->ndim; i++)
        if (red[i]) {
            known = known && dim_known(x->shape[i]);
            n *= (double)x->shape[i];
        }
    if (known) return grad_scalar(b, dt, n);
    return grad_size_ratio(b, X, Y, dt);
}

static bool keepdims(GradBuilder *b) { return attr_bool(&b->rc, "keepdims"); }

static bool g_sum(GradBuilder *b, Expr **d) {
    uint32_t n;
    bool red[64];
    reduced(b, true, &n, red);
    d[0] = grad_op2(b, "broadcast_to_like", grad_keep_dims(b, G, n, red, keepdims(b)), X);
    return true;
}

static bool g_mean(GradBuilder *b, Expr **d) {
    uint32_t n;
    bool red[64];
    reduced(b, true, &n, red);
    Expr *full = grad_op2(b, "broadcast_to_like", grad_keep_dims(b, G, n, red, keepdims(b)), X);
    d[0] = grad_div(b, full, red_count(b, grad_arg_tensor(b, 0), red, DT));
    return true;
}

/* max / min: the adjoint is shared equally by the elements equal to the extremum */
static bool g_extremum(GradBuilder *b, Expr **d) {
    uint32_t n;
    bool red[64];
    int64_t axes[64];
    reduced(b, true, &n, red);
    bool keep = keepdims(b);
    grad_begin(b);
    Expr *hit = grad_op2(b, "equal", X, grad_keep_dims(b, Y, n, red, keep));
    Expr *ind = grad_let(b, grad_op2(b, "cast_like", hit, X));
    uint32_t n_axes = red_list(n, red, axes);
    Expr *share = grad_keep_dims(b, G, n, red, keep);
    if (n_axes > 0) /* (no axis: nothing reduced, each element is its own extremum) */
        share = grad_div(b, share, grad_sum(b, ind, n_axes, axes, true, false));
    d[0] = grad_end(b, grad_mul(b, ind, share));
    return true;
}

/* prod: d = g y / x (x must be nonzero) */
static bool g_prod(GradBuilder *b, Expr **d) {
    uint32_t n;
    bool red[64];
    reduced(b, true, &n, red);
    bool keep = keepdims(b);
    Expr *gy = grad_mul(b, grad_keep_dims(b, G, n, red, keep), grad_keep_dims(b, Y, n, red, keep));
    d[0] = grad_div(b, gy, X);
    return true;
}

static bool g_logsumexp(GradBuilder *b, Expr **d) {
    uint32_t n;
    bool red[64];
    reduced(b, false, &n, red);
    bool keep = keepdims(b);
    Expr *p = grad_op1(b, "exp", grad_sub(b, X, grad_keep_dims(b, Y, n, red, keep)));
    d[0] = grad_mul(b, grad_keep_dims(b, G, n, red, keep), p);
    return true;
}

/* variance(data, mean) = sum((data - mean)^2) / (N - unbiased); std = sqrt(variance), whose
 * adjoint of the variance is g / (2 y). Each adjoint builds its own nodes (no sharing across
 * adjoints). */
static bool moment(GradBuilder *b, Expr **d, bool std) {
    uint32_t n;
    bool red[64];
    reduced(b, true, &n, red);
    bool keep = keepdims(b), unbiased = attr_bool(&b->rc, "unbiased");
    for (uint32_t i = 0; i < 2; i++) {
        grad_begin(b);
        Expr *gk = grad_keep_dims(b, G, n, red, keep);
        if (std) gk = grad_div(b, gk, grad_mul(b, S(2), grad_keep_dims(b, Y, n, red, keep)));
        Expr *count = red_count(b, grad_arg_tensor(b, 0), red, DT);
        if (unbiased) count = grad_sub(b, count, S(1));
        Expr *t = grad_mul(b, grad_div(b, grad_mul(b, gk, S(2)), count), grad_sub(b, A0, A1));
        if (i == 0)
            d[0] = grad_end(b, t);
        else
            d[1] = grad_end(
                b, grad_collapse(b, grad_neg(b, t), b->g->arg_types[0], A1, b->g->arg_types[1]));
    }
    return true;
}

static bool g_variance(GradBuilder *b, Expr **d) { return moment(b, d, false); }
static bool g_std(GradBuilder *b, Expr **d) { return moment(b, d, true); }

const GradDef grad_math_table[] = {
    /* unary */
    {OP_ID_LOG, g_log},
    {OP_ID_LOG2, g_log2},
    {OP_ID_LOG10, g_log10},
    {OP_ID_EXP, g_exp},
    {OP_ID_FAST_EXP, g_fast_exp},
    {OP_ID_ERF, g_erf},
    {OP_ID_FAST_ERF, g_erf},
    {OP_ID_SQRT, g_sqrt},
    {OP_ID_RSQRT, g_rsqrt},
    {OP_ID_SIGMOID, g_sigmoid},
    {OP_ID_TANH, g_tanh},
    {OP_ID_FAST_TANH, g_fast_tanh},
    {OP_ID_SIN, g_sin},
    {OP_ID_COS, g_cos},
    {OP_ID_TAN, g_tan},
    {OP_ID_SINH, g_sinh},
    {OP_ID_COSH, g_cosh},
    {OP_ID_ASIN, g_asin},
    {OP_ID_ACOS, g_acos},
    {OP_ID_ATAN, g_atan},
    {OP_ID_ASINH, g_asinh},
    {OP_ID_ACOSH, g_acosh},
    {OP_ID_ATANH, g_atanh},
    {OP_ID_ABS, g_abs},
    {OP_ID_NEGATIVE, g_negative},
    {OP_ID_COPY, g_copy},
    {OP_ID_CLIP, g_clip},
    /* binary */
    {OP_ID_ADD, g_add},
    {OP_ID_SUBTRACT, g_subtract},
    {OP_ID_MULTIPLY, g_multiply},
    {OP_ID_DIVIDE, g_divide},
    {OP_ID_POWER, g_power},
    {OP_ID_MAXIMUM, g_maximum},
    {OP_ID_MINIMUM, g_minimum},
    {OP_ID_MOD, g_mod},
    {OP_ID_TRUNC_MOD, g_mod},
    {OP_ID_FLOOR_MOD, g_floor_mod},
    /* reductions */
    {OP_ID_SUM, g_sum},
    {OP_ID_MEAN, g_mean},
    {OP_ID_MAX, g_extremum},
    {OP_ID_MIN, g_extremum},
    {OP_ID_PROD, g_prod},
    {OP_ID_LOGSUMEXP, g_logsumexp},
    {OP_ID_VARIANCE, g_variance},
    {OP_ID_STD, g_std},
    /* zero gradients: piecewise constant, boolean or integer-valued results */
    {OP_ID_FLOOR, NULL},
    {OP_ID_CEIL, NULL},
    {OP_ID_TRUNC, NULL},
    {OP_ID_ROUND, NULL},
    {OP_ID_SIGN, NULL},
    {OP_ID_ZEROS_LIKE, NULL},
    {OP_ID_ONES_LIKE, NULL},
    {OP_ID_ISNAN, NULL},
    {OP_ID_ISFINITE, NULL},
    {OP_ID_ISINF, NULL},
    {OP_ID_SHAPE_OF, NULL},
    {OP_ID_NDARRAY_SIZE, NULL},
    {OP_ID_FLOOR_DIVIDE, NULL},
    {OP_ID_TRUNC_DIVIDE, NULL},
    {OP_ID_EQUAL, NULL},
    {OP_ID_NOT_EQUAL, NULL},
    {OP_ID_LESS, NULL},
    {OP_ID_LESS_EQUAL, NULL},
    {OP_ID_GREATER, NULL},
    {OP_ID_GREATER_EQUAL, NULL},
    {OP_ID_ARGMAX, NULL},
    {OP_ID_ARGMIN, NULL},
    {OP_ID_ALL, NULL},
    {OP_ID_ANY, NULL},
    {OP_ID_LOGICAL_NOT, NULL},
    {OP_ID_LOGICAL_AND, NULL},
    {OP_ID_LOGICAL_OR, NULL},
    {OP_ID_LOGICAL_XOR, NULL},
    GRAD_END,
};
