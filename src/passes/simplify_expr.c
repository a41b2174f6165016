/* simplify_expr.c - SimplifyExpr (TVM's simplify_expr.cc, function pass, opt level 0): local
 * algebraic rewrites of operator calls, each a row of `rules` below (docs/passes.md,
 * "SimplifyExpr", lists them with what they need).
 *
 * The rewrite walks each function bottom-up once; when a rule replaces a call, the rules are tried
 * again on the replacement (TVM repeats its rewrites to a fixed point), so chains collapse in one
 * walk: reshape(reshape(reshape(x))), x + zeros_like(y) (zeros_like is concretized to zeros, then
 * the identity goes). A rule sees a call whose arguments are already simplified, and its result
 * must have the call's type: a replacement of another type is not made. A rule that would drop an
 * argument (zeros_like(y) drops y) fires only when that argument is pure (pass_is_pure): an effect
 * is never dropped. Patterns are matched within dataflow, not through let-bound variables, as
 * TVM's dataflow patterns are. */
#include <math.h>
#include <string.h>

#include "ops/ops.h"
#include "passes/passes.h"

/* The operators the rules look at; their Op nodes are resolved once per run. */
#define SIMPLIFY_OPS(X)                                                                            \
    X(RESHAPE, "reshape")                                                                          \
    X(SQUEEZE, "squeeze")                                                                          \
    X(EXPAND_DIMS, "expand_dims")                                                                  \
    X(BATCH_FLATTEN, "nn.batch_flatten")                                                           \
    X(BROADCAST_TO, "broadcast_to")                                                                \
    X(TRANSPOSE, "transpose")                                                                      \
    X(LAYOUT_TRANSFORM, "layout_transform")                                                        \
    X(CAST, "cast")                                                                                \
    X(CAST_LIKE, "cast_like")                                                                      \
    X(ADD, "add")                                                                                  \
    X(SUBTRACT, "subtract")                                                                        \
    X(MULTIPLY, "multiply")                                                                        \
    X(DIVIDE, "divide")                                                                            \
    X(SQRT, "sqrt")                                                                                \
    X(RSQRT, "rsqrt")                                                                              \
    X(ZEROS, "zeros")                                                                              \
    X(ONES, "ones")                                                                                \
    X(ZEROS_LIKE, "zeros_like")                                                                    \
    X(ONES_LIKE, "ones_like")                                                                      \
    X(FULL, "full")                                                                                \
    X(FULL_LIKE, "full_like")                                                                      \
    X(RESHAPE_LIKE, "reshape_like")                                                                \
    X(COLLAPSE_SUM_LIKE, "collapse_sum_like")                                                      \
    X(COLLAPSE_SUM_TO, "collapse_sum_to")                                                          \
    X(BROADCAST_TO_LIKE, "broadcast_to_like")                                                      \
    X(CLIP, "clip")                                                                                \
    X(CONCATENATE, "concatenate")                                                                  \
    X(STRIDED_SLICE, "strided_slice")                                                              \
    X(MEAN, "mean")                                                                                \
    X(POWER, "power")                                                                              \
    X(LAYER_NORM, "nn.layer_norm")

typedef enum OpId {
#define X(id, name) OP_##id,
    SIMPLIFY_OPS(X)
#undef X
        N_OPS
} OpId;
static const char *const op_names[N_OPS] = {
#define X(id, name) name,
    SIMPLIFY_OPS(X)
#undef X
};
_Static_assert(N_OPS <= 64, "rule masks are 64-bit");
#define M(id) ((uint64_t)1 << OP_##id)

typedef struct Simp {
    Ctx *ctx;
    Span span;           /* of the call being rewritten: every node built gets it */
    Expr *ops[N_OPS];    /* the Op node of each OpId */
    PtrMap pure;         /* pass_is_pure's memo */
    PtrMap const_values; /* Constant -> 1 + VALUE_* bits: what every element equals */
} Simp;

enum { VALUE_ZERO = 1, VALUE_ONE = 2 };

/* ---- helpers ------------------------------------------------------------------------------- */

static OpId op_id(Simp *s, Expr *op) {
    for (int i = 0; i < N_OPS; i++)
        if (s->ops[i] == op) return (OpId)i;
    return N_OPS;
}

/* e is a call of operator `id`. */
static Call *call_of(Simp *s, Expr *e, OpId id) {
    return e->kind == EXPR_CALL && AS_CALL(e)->op == s->ops[id] ? AS_CALL(e) : NULL;
}

static Type *type_of(Expr *e) {
    if (e->checked_type) return e->checked_type;
    return e->kind == EXPR_VAR ? AS_VAR(e)->ann : NULL;
}

static TensorType *tensor_of(Expr *e) {
    Type *t = type_of(e);
    return t && t->kind == TYPE_TENSOR ? AS_TENSOR_TYPE(t) : NULL;
}

/* A tensor type whose every dim is a constant. */
static TensorType *static_tensor(Expr *e) {
    TensorType *t = tensor_of(e);
    if (t == NULL) return NULL;
    for (uint32_t i = 0; i < t->ndim; i++)
        if (!dim_known(t->shape[i])) return NULL;
    return t;
}

static bool pure(Simp *s, Expr *e) { return pass_is_pure(&s->pure, e); }

static const OpDef *def_of(Expr *op) {
    Op *o = AS_OP(op);
    if (o->info == NULL) o->info = op_lookup(o->name, strlen(o->name));
    return o->info;
}

/* The call's attributes with defaults, read through the operator table's accessors. */
static RelCall bind(Simp *s, Call *c) {
    const OpDef *def = def_of(c->op);
    const AttrValue **vals =
        arena_array(&s->ctx->arena, def->n_attrs ? def->n_attrs : 1, sizeof *vals);
    StrBuf msg = {0};
    Span where;
    bool ok = op_bind_attrs(def, c->attrs, vals, &msg, &where);
    sb_free(&msg);
    RLY_CHECK(ok, "a type-checked %s has invalid attributes", def->name);
    return (RelCall){.ctx = s->ctx, .op = def, .attrs = vals};
}

/* A call of `id` typed by its relation; NULL (nothing reported) when the relation refuses, so
 * that a rule simply does not fire. */
static Expr *try_call(Simp *s, Expr *op, uint32_t n, Expr *const *args, const Attrs *attrs) {
    const OpDef *def = def_of(op);
    RLY_CHECK(def != NULL, "SimplifyExpr: unknown operator %s", AS_OP(op)->name);
    const AttrValue **vals =
        arena_array(&s->ctx->arena, def->n_attrs ? def->n_attrs : 1, sizeof *vals);
    Type **types = arena_array(&s->ctx->arena, n ? n : 1, sizeof *types);
    for (uint32_t i = 0; i < n; i++)
        if ((types[i] = type_of(args[i])) == NULL) return NULL;
    StrBuf msg = {0};
    Span where;
    int err_arg;
    Type *t = NULL;
    bool ok = op_bind_attrs(def, attrs, vals, &msg, &where) &&
              op_relate(s->ctx, def, vals, n, types, &t, &msg, &err_arg) == REL_OK;
    sb_free(&msg);
    if (!ok) return NULL;
    Expr *c = ir_call_new(s->ctx, op, n, args, attrs, 0, NULL, s->span);
    c->checked_type = t;
    return c;
}

static Expr *call1(Simp *s, OpId id, Expr *x, const Attrs *attrs) {
    return try_call(s, s->ops[id], 1, &x, attrs);
}
static Expr *call2(Simp *s, OpId id, Expr *x, Expr *y) {
    Expr *a[2] = {x, y};
    return try_call(s, s->ops[id], 2, a, NULL);
}

static Expr *scalar(Simp *s, rly_dtype dt, double v) {
    Expr *c = sup_dtype_is_float(dt) ? ir_scalar_f64(s->ctx, dt, v, s->span)
                                     : ir_scalar_i64(s->ctx, dt, (int64_t)v, s->span);
    pass_retype(s->ctx, c, NULL);
    return c;
}

static AttrValue *new_ints(Simp *s, uint32_t n, const int64_t *v) {
    AttrValue **items = arena_array(&s->ctx->arena, n ? n : 1, sizeof *items);
    for (uint32_t i = 0; i < n; i++)
        items[i] = ir_attr_int(s->ctx, v[i], RLY_DTYPE_I32, s->span);
    return ir_attr_list(s->ctx, n, items, s->span);
}
static AttrValue *new_str(Simp *s, const char *v) {
    return ir_attr_str(s->ctx, v, strlen(v), s->span);
}
static const Attrs *attrs(Simp *s, uint32_t n, const char *const *keys, AttrValue *const *vals) {
    const char *ik[4];
    RLY_CHECK(n <= 4, "too many attributes");
    for (uint32_t i = 0; i < n; i++)
        ik[i] = ir_intern(s->ctx, keys[i], strlen(keys[i]));
    return ir_attrs_new(s->ctx, n, ik, vals);
}
static const Attrs *attrs1(Simp *s, const char *key, AttrValue *val) {
    return attrs(s, 1, &key, &val);
}

/* reshape(x, newshape=t's shape): a static shape, so 0 means 0 (allowzero) where one occurs. */
static Expr *reshape_to(Simp *s, Expr *x, const TensorType *t) {
    bool zero = false;
    for (uint32_t i = 0; i < t->ndim; i++)
        zero |= t->shape[i] == 0;
    static const char *const keys[2] = {"newshape", "allowzero"};
    AttrValue *vals[2] = {new_ints(s, t->ndim, t->shape), ir_attr_bool(s->ctx, true, s->span)};
    return call1(s, OP_RESHAPE, x, attrs(s, zero ? 2 : 1, keys, vals));
}

/* VALUE_* bits that hold for every element of constant c (memoized: a constant can be large and
 * used many times). -0.0 counts as zero. */
static unsigned constant_values(Simp *s, Constant *c) {
    uintptr_t memo = (uintptr_t)ptrmap_get(&s->const_values, c);
    if (memo) return (unsigned)(memo - 1);
    size_t esize = sup_dtype_size(c->dtype), n = esize ? c->nbytes / esize : 0;
    Constant *zero = AS_CONSTANT(scalar(s, c->dtype, 0.0)),
             *one = AS_CONSTANT(scalar(s, c->dtype, 1.0));
    Constant *neg_zero =
        sup_dtype_is_float(c->dtype) ? AS_CONSTANT(scalar(s, c->dtype, -0.0)) : zero;
    unsigned bits = VALUE_ZERO | VALUE_ONE;
    for (size_t i = 0; i < n && bits; i++) {
        const char *p = (const char *)c->data + i * esize;
        if (memcmp(p, zero->data, esize) != 0 && memcmp(p, neg_zero->data, esize) != 0)
            bits &= ~(unsigned)VALUE_ZERO;
        if (memcmp(p, one->data, esize) != 0) bits &= ~(unsigned)VALUE_ONE;
    }
    if (n == 0) bits = 0; /* an empty tensor: not worth a rule */
    ptrmap_put(&s->const_values, c, (void *)(uintptr_t)(bits + 1));
    return bits;
}

/* VALUE_* bits of every element of e when e is a constant, zeros(), ones(), or zeros_like(y) /
 * ones_like(y) of a pure y (which the rule drops); 0 otherwise. */
static unsigned filled_with(Simp *s, Expr *e) {
    if (e->kind == EXPR_CONSTANT) return constant_values(s, AS_CONSTANT(e));
    if (e->kind != EXPR_CALL) return 0;
    Call *c = AS_CALL(e);
    OpId id = op_id(s, c->op);
    if (id == OP_ZEROS) return VALUE_ZERO;
    if (id == OP_ONES) return VALUE_ONE;
    if ((id == OP_ZEROS_LIKE || id == OP_ONES_LIKE) && pure(s, c->args[0]))
        return id == OP_ZEROS_LIKE ? VALUE_ZERO : VALUE_ONE;
    return 0;
}

/* ---- rules: *_like operators with a static result become their explicit-shape forms ---------- */

/* zeros_like(y), ones_like(y) -> zeros(shape, dtype), ones(shape, dtype) */
static Expr *concretize_zeros_ones(Simp *s, Call *c) {
    TensorType *t = static_tensor(&c->base);
    if (t == NULL || !pure(s, c->args[0])) return NULL;
    static const char *const keys[2] = {"shape", "dtype"};
    AttrValue *vals[2] = {new_ints(s, t->ndim, t->shape), new_str(s, sup_dtype_name(t->dtype))};
    return try_call(s, s->ops[c->op == s->ops[OP_ZEROS_LIKE] ? OP_ZEROS : OP_ONES], 0, NULL,
                    attrs(s, 2, keys, vals));
}

/* full_like(y, v) -> full(v, shape, dtype) */
static Expr *concretize_full_like(Simp *s, Call *c) {
    TensorType *t = static_tensor(&c->base);
    if (t == NULL || !pure(s, c->args[0])) return NULL;
    static const char *const keys[2] = {"shape", "dtype"};
    AttrValue *vals[2] = {new_ints(s, t->ndim, t->shape), new_str(s, sup_dtype_name(t->dtype))};
    return call1(s, OP_FULL, c->args[1], attrs(s, 2, keys, vals));
}

/* reshape_like(x, y) -> reshape(x, newshape) */
static Expr *concretize_reshape_like(Simp *s, Call *c) {
    TensorType *t = static_tensor(&c->base);
    return t && pure(s, c->args[1]) ? reshape_to(s, c->args[0], t) : NULL;
}

/* collapse_sum_like(x, y) -> collapse_sum_to(x, shape) (the shape as attribute and argument) */
static Expr *concretize_collapse_sum_like(Simp *s, Call *c) {
    TensorType *t = static_tensor(&c->base);
    if (t == NULL || !pure(s, c->args[1])) return NULL;
    int32_t *dims = arena_array(&s->ctx->arena, t->ndim ? t->ndim : 1, sizeof *dims);
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (t->shape[i] > INT32_MAX) return NULL;
        dims[i] = (int32_t)t->shape[i];
    }
    int64_t len = t->ndim;
    Expr *shape = ir_constant_new(s->ctx, RLY_DTYPE_I32, 1, &len, dims, s->span);
    pass_retype(s->ctx, shape, NULL);
    Expr *a[2] = {c->args[0], shape};
    return try_call(s, s->ops[OP_COLLAPSE_SUM_TO], 2, a,
                    attrs1(s, "shape", new_ints(s, t->ndim, t->shape)));
}

/* broadcast_to_like(x, y) -> broadcast_to(x, shape) */
static Expr *concretize_broadcast_to_like(Simp *s, Call *c) {
    TensorType *t = static_tensor(&c->base);
    if (t == NULL || !pure(s, c->args[1])) return NULL;
    return call1(s, OP_BROADCAST_TO, c->args[0],
                 attrs1(s, "shape", new_ints(s, t->ndim, t->shape)));
}

/* cast_like(x, y) -> cast(x, dtype) (any shape) */
static Expr *concretize_cast_like(Simp *s, Call *c) {
    TensorType *t = tensor_of(&c->base);
    if (t == NULL || !pure(s, c->args[1])) return NULL;
    return call1(s, OP_CAST, c->args[0], attrs1(s, "dtype", new_str(s, sup_dtype_name(t->dtype))));
}

/* ---- rules: arithmetic ------------------------------------------------------------------------
 */

/* x + x -> x * 2 (exact: doubling rounds as the sum does, and integers wrap alike) */
static Expr *simplify_add(Simp *s, Call *c) {
    TensorType *t = tensor_of(c->args[0]);
    if (c->args[0] != c->args[1] || t == NULL || t->dtype == RLY_DTYPE_BOOL) return NULL;
    return call2(s, OP_MULTIPLY, c->args[0], scalar(s, t->dtype, 2));
}

/* n / sqrt(x) -> n * rsqrt(x) */
static Expr *simplify_rsqrt(Simp *s, Call *c) {
    Call *root = call_of(s, c->args[1], OP_SQRT);
    if (root == NULL) return NULL;
    Expr *r = call1(s, OP_RSQRT, root->args[0], NULL);
    return r ? call2(s, OP_MULTIPLY, c->args[0], r) : NULL;
}

/* x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1 -> x, when x has the result's type (the identity
 * does not broadcast x). The 0 or 1 is a constant (every element), zeros(), ones(), or
 * zeros_like(y) / ones_like(y) of a pure y. */
static Expr *eliminate_identity(Simp *s, Call *c) {
    OpId id = op_id(s, c->op);
    unsigned want = id == OP_ADD || id == OP_SUBTRACT ? VALUE_ZERO : VALUE_ONE;
    Type *t = c->base.checked_type;
    if (type_of(c->args[0]) == t && (filled_with(s, c->args[1]) & want)) return c->args[0];
    bool commutes = id == OP_ADD || id == OP_MULTIPLY;
    if (commutes && type_of(c->args[1]) == t && (filled_with(s, c->args[0]) & want))
        return c->args[1];
    return NULL;
}

/* The scalar constant that e, a full/ones/zeros(_like) call, fills its tensor with (what it
 * drops must be pure); NULL otherwise. A full whose fill value has another dtype than its result
 * is left alone (the value would need converting). */
static Expr *fill_scalar(Simp *s, Expr *e) {
    TensorType *t = tensor_of(e);
    if (e->kind != EXPR_CALL || t == NULL) return NULL;
    Call *c = AS_CALL(e);
    Expr *v;
    switch (op_id(s, c->op)) {
    case OP_FULL: v = c->args[0]; break;
    case OP_FULL_LIKE:
        if (!pure(s, c->args[0])) return NULL;
        v = c->args[1];
        break;
    case OP_ZEROS: return scalar(s, t->dtype, 0);
    case OP_ONES: return scalar(s, t->dtype, 1);
    case OP_ZEROS_LIKE:
    case OP_ONES_LIKE:
        if (!pure(s, c->args[0])) return NULL;
        return scalar(s, t->dtype, c->op == s->ops[OP_ONES_LIKE]);
    default: return NULL;
    }
    bool ok =
        v->kind == EXPR_CONSTANT && AS_CONSTANT(v)->ndim == 0 && AS_CONSTANT(v)->dtype == t->dtype;
    return ok ? v : NULL;
}

/* op(x, full(v)) -> op(x, v) for a broadcasting binary operator, when x has the result's type
 * (the full tensor adds no broadcast), either side. */
static Expr *full_elementwise(Simp *s, Call *c) {
    const OpDef *def = def_of(c->op);
    if (def == NULL || def->pattern != OP_BROADCAST || c->n_args != 2) return NULL;
    for (int side = 0; side < 2; side++) {
        Expr *x = c->args[1 - side], *v;
        if (type_of(x) != c->base.checked_type || (v = fill_scalar(s, c->args[side])) == NULL)
            continue;
        Expr *a[2];
        a[side] = v;
        a[1 - side] = x;
        Expr *r = try_call(s, c->op, 2, a, c->attrs);
        if (r) return r;
    }
    return NULL;
}

/* ---- rules: layer normalization ----------------------------------------------------------------
 * Exporters that predate ONNX's LayerNormalization (opset 17) write it out: mean, subtract,
 * power, mean, add eps, sqrt, divide, then the scale and the shift. One nn.layer_norm reads x
 * twice instead of eight operators reading and writing it (onnxruntime fuses the same pattern).
 * Three rules, bottom-up: the normalization becomes layer_norm(x, ones, zeros), then a scale
 * and a shift along its (last) axis move into its gamma and beta. */

/* A 0-d float constant's value. */
static bool scalar_value(Expr *e, double *v) {
    if (e->kind != EXPR_CONSTANT) return false;
    Constant *c = AS_CONSTANT(e);
    if (c->ndim != 0 || c->data == NULL) return false;
    if (c->dtype == RLY_DTYPE_F32) {
        float f;
        memcpy(&f, c->data, sizeof f);
        *v = f;
        return true;
    }
    if (c->dtype == RLY_DTYPE_F64) {
        memcpy(v, c->data, sizeof *v);
        return true;
    }
    return false;
}

/* mean(x, axis=[a], keepdims=True): x and a (made non-negative). */
static bool mean_over_axis(Simp *s, Expr *e, Expr **x, int64_t *axis) {
    Call *c = call_of(s, e, OP_MEAN);
    TensorType *t = c ? tensor_of(c->args[0]) : NULL;
    if (t == NULL || !sup_dtype_is_float(t->dtype)) return false;
    RelCall rc = bind(s, c);
    const int64_t *ax;
    if (attr_ints(&rc, "axis", &ax) != 1 || !attr_bool(&rc, "keepdims") ||
        attr_bool(&rc, "exclude"))
        return false;
    int64_t a = ax[0] < 0 ? ax[0] + (int64_t)t->ndim : ax[0];
    if (a < 0 || a >= (int64_t)t->ndim) return false;
    *x = c->args[0], *axis = a;
    return true;
}

/* e = x - mean(x, a): x and a. */
static bool centered(Simp *s, Expr *e, Expr **x, int64_t *axis) {
    Call *d = call_of(s, e, OP_SUBTRACT);
    Expr *mx;
    if (d == NULL || !mean_over_axis(s, d->args[1], &mx, axis) || mx != d->args[0]) return false;
    *x = mx;
    return true;
}

/* e = mean(d^2, a) + eps (either order; d^2 as power(d, 2) or d * d) for d = x - mean(x, a). */
static bool variance_eps(Simp *s, Expr *e, Expr *d, int64_t axis, double *eps) {
    Call *add = call_of(s, e, OP_ADD);
    if (add == NULL) return false;
    for (int side = 0; side < 2; side++) {
        Expr *sq;
        int64_t a;
        if (!scalar_value(add->args[1 - side], eps) || !(*eps >= 0) ||
            !mean_over_axis(s, add->args[side], &sq, &a) || a != axis)
            continue;
        Call *p = call_of(s, sq, OP_POWER), *m = call_of(s, sq, OP_MULTIPLY);
        double two;
        if (p && p->args[0] == d && scalar_value(p->args[1], &two) && two == 2.0) return true;
        if (m && m->args[0] == d && m->args[1] == d) return true;
    }
    return false;
}

/* (x - mean(x, a)) * rsqrt(var + eps), either order, or (x - mean(x, a)) / sqrt(var + eps)
 * -> nn.layer_norm(x, ones(C), zeros(C), axis=a, epsilon=eps) */
static Expr *fuse_layer_norm(Simp *s, Call *c) {
    Expr *d = NULL, *den = NULL;
    OpId id = op_id(s, c->op);
    Call *r;
    for (int side = 0; side < 2 && id == OP_MULTIPLY && den == NULL; side++)
        if ((r = call_of(s, c->args[1 - side], OP_RSQRT)) != NULL)
            d = c->args[side], den = r->args[0];
    if (id == OP_DIVIDE && (r = call_of(s, c->args[1], OP_SQRT)) != NULL)
        d = c->args[0], den = r->args[0];
    Expr *x;
    int64_t axis;
    double eps;
    TensorType *t;
    if (den == NULL || !centered(s, d, &x, &axis) || !variance_eps(s, den, d, axis, &eps) ||
        (t = static_tensor(x)) == NULL || type_of(x) != c->base.checked_type)
        return NULL;
    static const char *const fill_keys[2] = {"shape", "dtype"};
    AttrValue *fill_vals[2] = {new_ints(s, 1, &t->shape[axis]),
                               new_str(s, sup_dtype_name(t->dtype))};
    const Attrs *fill = attrs(s, 2, fill_keys, fill_vals);
    Expr *args[3] = {x, try_call(s, s->ops[OP_ONES], 0, NULL, fill),
                     try_call(s, s->ops[OP_ZEROS], 0, NULL, fill)};
    if (args[1] == NULL || args[2] == NULL) return NULL;
    static const char *const keys[2] = {"axis", "epsilon"};
    AttrValue *vals[2] = {ir_attr_int(s->ctx, axis, RLY_DTYPE_I32, s->span),
                          ir_attr_float(s->ctx, eps, RLY_DTYPE_F32, s->span)};
    return try_call(s, s->ops[OP_LAYER_NORM], 3, args, attrs(s, 2, keys, vals));
}

/* layer_norm(x, g, b) * gamma (either order) with g all ones and b all zeros, or
 * layer_norm(x, g, b) + beta (either order) with b all zeros, gamma and beta of shape (C,) along
 * the last axis (which the layer_norm normalizes) -> layer_norm(x, gamma, b) or (x, g, beta). */
static Expr *fold_layer_norm_affine(Simp *s, Call *c) {
    bool scale = op_id(s, c->op) == OP_MULTIPLY;
    for (int side = 0; side < 2; side++) {
        Call *ln = call_of(s, c->args[side], OP_LAYER_NORM);
        Expr *v = c->args[1 - side];
        TensorType *t = ln ? static_tensor(ln->args[0]) : NULL, *vt = static_tensor(v);
        if (t == NULL || vt == NULL || t->ndim == 0 || vt->ndim != 1 ||
            vt->shape[0] != t->shape[t->ndim - 1] || vt->dtype != t->dtype ||
            !(filled_with(s, ln->args[2]) & VALUE_ZERO) ||
            (scale && !(filled_with(s, ln->args[1]) & VALUE_ONE)))
            continue;
        RelCall rc = bind(s, ln);
        int64_t axis = attr_int(&rc, "axis");
        if (axis != -1 && axis != (int64_t)t->ndim - 1) continue;
        if (!attr_bool(&rc, "center") || !attr_bool(&rc, "scale")) continue;
        Expr *args[3] = {ln->args[0], ln->args[1], ln->args[2]};
        args[scale ? 1 : 2] = v;
        Expr *r = try_call(s, ln->op, 3, args, ln->attrs);
        if (r) return r;
    }
    return NULL;
}

/* ---- rules: reshapes ----------------------------------------------------------------------------
 */

static bool is_reshape(OpId id) {
    return id == OP_RESHAPE || id == OP_SQUEEZE || id == OP_EXPAND_DIMS || id == OP_BATCH_FLATTEN;
}

/* a reshape of a reshape (reshape, squeeze, expand_dims, batch_flatten) with a static result ->
 * one reshape */
static Expr *merge_reshapes(Simp *s, Call *c) {
    Expr *in = c->args[0];
    TensorType *t = static_tensor(&c->base);
    if (t == NULL || in->kind != EXPR_CALL || !is_reshape(op_id(s, AS_CALL(in)->op))) return NULL;
    return reshape_to(s, AS_CALL(in)->args[0], t);
}

/* a reshape (or broadcast_to) that leaves a static shape as it is -> its argument */
static Expr *noop_reshape(Simp *s, Call *c) {
    (void)s;
    Expr *x = c->args[0];
    return static_tensor(x) && type_of(x) == c->base.checked_type ? x : NULL;
}

/* op(reshape(x), c) and op(c, reshape(x)) -> reshape(op(x, c)) (op(c, x)) for op add, subtract,
 * multiply or divide and c a 0-d constant, when the result is static: the arithmetic then sits
 * next to what made x, and FuseOps can hand it to that anchor as its epilogue (BERT's attention
 * scores, batch_matmul -> reshape -> divide by 8). Elementwise with a scalar, so the values are
 * the same. */
static Expr *scalar_before_reshape(Simp *s, Call *c) {
    TensorType *t = static_tensor(&c->base);
    if (t == NULL || c->n_args != 2) return NULL;
    for (int side = 0; side < 2; side++) {
        Expr *r = c->args[side], *k = c->args[1 - side];
        if (r->kind != EXPR_CALL || !is_reshape(op_id(s, AS_CALL(r)->op))) continue;
        TensorType *kt = tensor_of(k);
        if (k->kind != EXPR_CONSTANT || kt == NULL || kt->ndim != 0) continue;
        Expr *x = AS_CALL(r)->args[0];
        if (static_tensor(x) == NULL) continue;
        Expr *a[2];
        a[side] = x;
        a[1 - side] = k;
        Expr *op = try_call(s, c->op, 2, a, c->attrs);
        return op ? reshape_to(s, op, t) : NULL;
    }
    return NULL;
}

/* ---- rules: transposes --------------------------------------------------------------------------
 */

/* The permutation that transpose or layout_transform c applies to a rank-ndim tensor (output
 * axis i is input axis p[i]); false when it is not one (a layout_transform that splits or joins
 * axes). */
static bool permutation(Simp *s, Call *c, uint32_t ndim, int64_t *p) {
    RelCall rc = bind(s, c);
    if (c->op == s->ops[OP_TRANSPOSE]) {
        const int64_t *axes;
        uint32_t n = attr_ints(&rc, "axes", &axes);
        if (n == 0) { /* None: reversed */
            for (uint32_t i = 0; i < ndim; i++)
                p[i] = ndim - 1 - i;
            return true;
        }
        if (n != ndim) return false;
        for (uint32_t i = 0; i < ndim; i++)
            p[i] = axes[i] < 0 ? axes[i] + ndim : axes[i];
        return true;
    }
    const char *src = attr_str(&rc, "src_layout"), *dst = attr_str(&rc, "dst_layout");
    if (strlen(src) != ndim || strlen(dst) != ndim) return false;
    for (uint32_t i = 0; i < ndim; i++) {
        const char *at = strchr(src, dst[i]);
        if (dst[i] < 'A' || dst[i] > 'Z' || at == NULL || strchr(at + 1, dst[i])) return false;
        p[i] = at - src;
    }
    return true;
}

static bool is_identity(uint32_t n, const int64_t *p) {
    for (uint32_t i = 0; i < n; i++)
        if (p[i] != (int64_t)i) return false;
    return true;
}

/* transpose(transpose(x, p), q) (either may be a permuting layout_transform) -> x when the
 * composition is the identity, else transpose(x, composed) */
static Expr *merge_transposes(Simp *s, Call *c) {
    TensorType *t = tensor_of(&c->base);
    Expr *in = c->args[0];
    if (t == NULL || in->kind != EXPR_CALL) return NULL;
    OpId inner = op_id(s, AS_CALL(in)->op);
    if (inner != OP_TRANSPOSE && inner != OP_LAYOUT_TRANSFORM) return NULL;
    uint32_t n = t->ndim;
    int64_t *p = arena_array(&s->ctx->arena, 2 * (n ? n : 1), sizeof *p), *q = p + (n ? n : 1);
    if (!permutation(s, c, n, p) || !permutation(s, AS_CALL(in), n, q)) return NULL;
    for (uint32_t i = 0; i < n; i++)
        p[i] = q[p[i]];
    Expr *x = AS_CALL(in)->args[0];
    if (is_identity(n, p)) return x;
    return call1(s, OP_TRANSPOSE, x, attrs1(s, "axes", new_ints(s, n, p)));
}

/* a transpose by the identity permutation, a layout_transform between equal layouts -> x */
static Expr *noop_transpose(Simp *s, Call *c) {
    TensorType *t = tensor_of(&c->base);
    if (t == NULL) return NULL;
    if (c->op == s->ops[OP_LAYOUT_TRANSFORM]) {
        RelCall rc = bind(s, c);
        return strcmp(attr_str(&rc, "src_layout"), attr_str(&rc, "dst_layout")) == 0 ? c->args[0]
                                                                                     : NULL;
    }
    int64_t *p = arena_array(&s->ctx->arena, t->ndim ? t->ndim : 1, sizeof *p);
    return permutation(s, c, t->ndim, p) && is_identity(t->ndim, p) ? c->args[0] : NULL;
}

/* ---- rules: casts and clips
 * ---------------------------------------------------------------------- */

/* The integer range of dtype dt (bool: [0, 1]); false for floats. Bounds of the 64-bit types are
 * rounded to doubles, which only matters for ranges near 2^63, compared with like bounds. */
static bool int_range(rly_dtype dt, double *lo, double *hi) {
    if (dt == RLY_DTYPE_BOOL) {
        *lo = 0, *hi = 1;
        return true;
    }
    if (sup_dtype_is_float(dt)) return false;
    int bits = sup_dtype_bits(dt);
    if (sup_dtype_is_uint(dt)) {
        *lo = 0, *hi = ldexp(1, bits) - 1;
    } else {
        *lo = -ldexp(1, bits - 1), *hi = ldexp(1, bits - 1) - 1;
    }
    return true;
}

/* The bound a clip of an integer dtype really uses: truncated toward zero and saturated at the
 * dtype's range (the clip kernel's rule). */
static double int_bound(double b, double lo, double hi) {
    b = trunc(b);
    return b < lo ? lo : b > hi ? hi : b;
}

/* The range of values of integer-typed e: its dtype's, narrowed when e is a clip. False for
 * floats. */
static bool value_range(Simp *s, Expr *e, double *lo, double *hi) {
    TensorType *t = tensor_of(e);
    if (t == NULL || !int_range(t->dtype, lo, hi)) return false;
    Call *clip = call_of(s, e, OP_CLIP);
    if (clip) {
        RelCall rc = bind(s, clip);
        double a = int_bound(attr_float(&rc, "a_min"), *lo, *hi);
        double b = int_bound(attr_float(&rc, "a_max"), *lo, *hi);
        *lo = a < b ? a : b; /* a > b: every element becomes b */
        *hi = b;
    }
    return true;
}

/* Bits of a float dtype's significand (with the implicit one): its integers up to 2^bits are
 * exact. */
static int significand_bits(rly_dtype dt) {
    switch (dt) {
    case RLY_DTYPE_F16: return 11;
    case RLY_DTYPE_BF16: return 8;
    case RLY_DTYPE_F32: return 24;
    default: return 53;
    }
}

/* Does casting every value e may hold to dtype `to` keep it exactly? */
static bool cast_keeps(Simp *s, Expr *e, rly_dtype to) {
    TensorType *t = tensor_of(e);
    if (t == NULL) return false;
    rly_dtype from = t->dtype;
    if (from == to) return true;
    double lo, hi, tlo, thi;
    if (!value_range(s, e, &lo, &hi)) { /* a float: only into a wider float */
        if (to == RLY_DTYPE_F64) return true;
        return to == RLY_DTYPE_F32 && (from == RLY_DTYPE_F16 || from == RLY_DTYPE_BF16);
    }
    if (int_range(to, &tlo, &thi)) return lo >= tlo && hi <= thi;
    double big = ldexp(1, significand_bits(to));
    return lo >= -big && hi <= big;
}

/* cast(x, t) with x of dtype t -> x */
static Expr *same_cast(Simp *s, Call *c) {
    (void)s;
    return type_of(c->args[0]) == c->base.checked_type ? c->args[0] : NULL;
}

/* cast(cast(x, t1), t2) -> cast(x, t2) when t1 holds every value x may have (a widening, or the
 * range of an integer clip: cast(cast(clip(x, 0, 255), uint8), int32) -> cast(clip, int32)) */
static Expr *consecutive_cast(Simp *s, Call *c) {
    Call *in = call_of(s, c->args[0], OP_CAST);
    TensorType *mid = in ? tensor_of(&in->base) : NULL;
    if (mid == NULL || !cast_keeps(s, in->args[0], mid->dtype)) return NULL;
    return call1(s, OP_CAST, in->args[0], c->attrs);
}

/* clip(x, a_min, a_max) whose bounds hold the whole dtype -> x (floats: the bounds must be
 * infinite, so that no finite value or infinity is clipped) */
static Expr *noop_clip(Simp *s, Call *c) {
    TensorType *t = tensor_of(c->args[0]);
    if (t == NULL) return NULL;
    RelCall rc = bind(s, c);
    double a = attr_float(&rc, "a_min"), b = attr_float(&rc, "a_max"), lo, hi;
    if (int_range(t->dtype, &lo, &hi))
        return int_bound(a, lo, hi) == lo && int_bound(b, lo, hi) == hi ? c->args[0] : NULL;
    return isinf(a) && a < 0 && isinf(b) && b > 0 ? c->args[0] : NULL;
}

/* ---- rules: other no-ops ----------------------------------------------------------------------
 */

/* concatenate((x,)) -> x */
static Expr *single_concatenate(Simp *s, Call *c) {
    (void)s;
    Expr *t = c->args[0];
    return t->kind == EXPR_TUPLE && AS_TUPLE(t)->n == 1 ? AS_TUPLE(t)->fields[0] : NULL;
}

/* strided_slice(x) with unit strides whose result keeps x's static shape -> x */
static Expr *full_strided_slice(Simp *s, Call *c) {
    Expr *x = c->args[0];
    if (!static_tensor(x) || type_of(x) != c->base.checked_type) return NULL;
    RelCall rc = bind(s, c);
    const int64_t *strides;
    uint32_t n = attr_ints(&rc, "strides", &strides);
    for (uint32_t i = 0; i < n; i++)
        if (strides[i] != 1) return NULL;
    return x;
}

/* ---- the rule table and the rewrite ---------------------------------------------------------- */

typedef Expr *(*RuleFn)(Simp *s, Call *c);
typedef struct Rule {
    const char *name; /* TVM's name for the rewrite where it has one */
    uint64_t ops;     /* the operators it applies to (M(...) bits); 0: any (the rule checks) */
    RuleFn fn;        /* the replacement, or NULL when the rule does not apply */
} Rule;

/* In order: the first rule that fires wins, and the rules run again on its result. */
static const Rule rules[] = {
    {"ConcretizeZerosLike", M(ZEROS_LIKE) | M(ONES_LIKE), concretize_zeros_ones},
    {"ConcretizeFullLike", M(FULL_LIKE), concretize_full_like},
    {"ConcretizeReshapeLike", M(RESHAPE_LIKE), concretize_reshape_like},
    {"ConcretizeCollapseSumLike", M(COLLAPSE_SUM_LIKE), concretize_collapse_sum_like},
    {"ConcretizeBroadcastToLike", M(BROADCAST_TO_LIKE), concretize_broadcast_to_like},
    {"ConcretizeCastLike", M(CAST_LIKE), concretize_cast_like},
    {"SimplifyAdd", M(ADD), simplify_add},
    {"FuseLayerNorm", M(MULTIPLY) | M(DIVIDE), fuse_layer_norm},
    {"FoldLayerNormAffine", M(MULTIPLY) | M(ADD), fold_layer_norm_affine},
    {"SimplifyRSqrt", M(DIVIDE), simplify_rsqrt},
    {"EliminateIdentity", M(ADD) | M(SUBTRACT) | M(MULTIPLY) | M(DIVIDE), eliminate_identity},
    {"SimplifyReshape", M(RESHAPE) | M(SQUEEZE) | M(EXPAND_DIMS) | M(BATCH_FLATTEN),
     merge_reshapes},
    {"SimplifyNoOpReshape",
     M(RESHAPE) | M(SQUEEZE) | M(EXPAND_DIMS) | M(BATCH_FLATTEN) | M(BROADCAST_TO), noop_reshape},
    {"ScalarBeforeReshape", M(ADD) | M(SUBTRACT) | M(MULTIPLY) | M(DIVIDE), scalar_before_reshape},
    {"SimplifyTranspose", M(TRANSPOSE) | M(LAYOUT_TRANSFORM), merge_transposes},
    {"SimplifyNoOpTranspose", M(TRANSPOSE) | M(LAYOUT_TRANSFORM), noop_transpose},
    {"SimplifySameCast", M(CAST), same_cast},
    {"SimplifyConsecutiveCast", M(CAST), consecutive_cast},
    {"FullElementwise", 0, full_elementwise},
    {"SimplifyClip", M(CLIP), noop_clip},
    {"SimplifyConcatenate", M(CONCATENATE), single_concatenate},
    {"SimplifyStridedSlice", M(STRIDED_SLICE), full_strided_slice},
};

/* A bound on the rewrites of one node: each rule shrinks the call or moves it toward a normal
 * form, so a chain stops long before; the bound only guards against a rule pair that loops. */
#define MAX_REWRITES 32

static Expr *post(Rewriter *rw, Expr *orig, Expr *e) {
    Simp *s = rw->state;
    e = pass_rebuild(rw, orig, e);
    for (int round = 0; round < MAX_REWRITES; round++) {
        if (e->kind != EXPR_CALL || AS_CALL(e)->op->kind != EXPR_OP) break;
        Call *c = AS_CALL(e);
        OpId id = op_id(s, c->op);
        uint64_t bit = id < N_OPS ? (uint64_t)1 << id : 0;
        Expr *r = NULL;
        s->span = e->span;
        for (size_t i = 0; i < RLY_ARRAY_LEN(rules) && r == NULL; i++) {
            if (rules[i].ops != 0 && (rules[i].ops & bit) == 0) continue;
            r = rules[i].fn(s, c);
            if (r && type_of(r) != e->checked_type) r = NULL; /* types above must not change */
        }
        if (r == NULL) break;
        e = r;
    }
    return e;
}

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    Simp s = {.ctx = pc->ctx};
    for (int i = 0; i < N_OPS; i++)
        s.ops[i] = ir_op_get(pc->ctx, op_names[i], strlen(op_names[i]));
    Rewriter rw = {.ctx = pc->ctx, .post = post, .state = &s};
    Expr *r = ir_rewrite(&rw, e);
    ir_rewriter_free(&rw);
    ptrmap_free(&s.pure);
    ptrmap_free(&s.const_values);
    return r;
}

const PassDef pass_simplify_expr = {
    .name = "SimplifyExpr",
    .opt_level = 0,
    .kind = PASS_FUNCTION,
    .params = "",
    .run_expr = run,
    .doc = "local rewrites: reshape/transpose/cast chains, identities (x*1, x+0, ...), *_like",
};
