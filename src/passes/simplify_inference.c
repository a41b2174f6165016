/* simplify_inference.c - SimplifyInference (TVM's simplify_inference.cc, function pass, opt level
 * 0): the training-time operators take their inference form, written with elementwise and
 * reduce operators.
 *
 *   nn.batch_norm(x, g, b, m, v).0  ->  x * scale + shift, where scale = 1 / sqrt(v + eps) * g
 *                                       and shift = -m * scale + b, each expanded over `axis`
 *   nn.dropout(x).0                 ->  x
 *   nn.layer_norm, nn.instance_norm ->  (x - mean) / sqrt(variance + eps) * g + b over their axes
 *   nn.group_norm                   ->  the same on x reshaped to (..., G, C/G, ...) and back
 *   nn.l2_normalize                 ->  x / sqrt(maximum(sum(x * x), eps))
 *
 * The projections also match through a let-bound variable (`let %bn = nn.batch_norm(...); %bn.0`),
 * so programs in A-normal form simplify too. A norm whose arguments are not pure (a call of a
 * function, a reference) stays as it is: its expansion evaluates them in another order. Every
 * rewrite keeps the node's type, or is not made. docs/passes.md, "SimplifyInference". */
#include <string.h>

#include "ops/ops.h"
#include "passes/passes.h"

typedef struct Simp {
    Ctx *ctx;
    Span span; /* of the call being expanded: every node built gets it */
    Expr *op_bn, *op_dropout, *op_layer, *op_instance, *op_group, *op_l2;
    PtrMap lets; /* let-bound Var -> its value (as written) */
    PtrMap bn;   /* rewritten nn.batch_norm call -> its expansion (one per call) */
    PtrMap pure; /* pass_is_pure's memo */
} Simp;

/* ---- typed construction -------------------------------------------------------------------- */

static Expr *call(Simp *s, const char *op, uint32_t n, Expr *const *args, const Attrs *attrs) {
    Expr *r = pass_op_call(s->ctx, op, n, args, attrs, s->span);
    RLY_CHECK(r != NULL, "SimplifyInference built an ill-typed %s", op);
    return r;
}
static Expr *op1(Simp *s, const char *op, Expr *x) { return call(s, op, 1, &x, NULL); }
static Expr *op2(Simp *s, const char *op, Expr *x, Expr *y) {
    Expr *a[2] = {x, y};
    return call(s, op, 2, a, NULL);
}

static Expr *scalar(Simp *s, rly_dtype dt, double v) {
    Expr *c = ir_scalar_f64(s->ctx, dt, v, s->span);
    pass_retype(s->ctx, c, NULL);
    return c;
}

static AttrValue *new_int(Simp *s, int64_t v) {
    return ir_attr_int(s->ctx, v, RLY_DTYPE_I32, s->span);
}
static AttrValue *new_ints(Simp *s, uint32_t n, const int64_t *v) {
    AttrValue **items = arena_array(&s->ctx->arena, n ? n : 1, sizeof *items);
    for (uint32_t i = 0; i < n; i++)
        items[i] = new_int(s, v[i]);
    return ir_attr_list(s->ctx, n, items, s->span);
}
static const Attrs *attrs(Simp *s, uint32_t n, const char *const *keys, AttrValue *const *vals) {
    const char *ik[4];
    RLY_CHECK(n <= 4, "too many attributes");
    for (uint32_t i = 0; i < n; i++)
        ik[i] = ir_intern(s->ctx, keys[i], strlen(keys[i]));
    return ir_attrs_new(s->ctx, n, ik, vals);
}

/* A reduction with keepdims=True over `axes` (NULL: every axis). */
static Expr *reduce(Simp *s, const char *op, Expr *x, Expr *mean, uint32_t n_axes,
                    const int64_t *axes) {
    static const char *const keys[2] = {"axis", "keepdims"};
    AttrValue *vals[2] = {axes ? new_ints(s, n_axes, axes) : ir_attr_none(s->ctx, s->span),
                          ir_attr_bool(s->ctx, true, s->span)};
    Expr *a[2] = {x, mean};
    return call(s, op, mean ? 2 : 1, a, attrs(s, 2, keys, vals));
}

/* TVM's ExpandBiasToMatchAxis for one axis: v, of shape (C), as (C, 1, ..., 1) so that it
 * broadcasts along `axis` of a rank-ndim tensor. */
static Expr *along_axis(Simp *s, Expr *v, uint32_t ndim, int64_t axis) {
    int64_t pad = (int64_t)ndim - axis - 1;
    if (pad <= 0) return v;
    static const char *const keys[2] = {"axis", "num_newaxis"};
    AttrValue *vals[2] = {new_int(s, 1), new_int(s, pad)};
    return call(s, "expand_dims", 1, &v, attrs(s, 2, keys, vals));
}

/* The call's attributes with defaults, read through the operator table's accessors. */
static void bind(Simp *s, Call *c, RelCall *rc) {
    const OpDef *def = AS_OP(c->op)->info;
    if (def == NULL) def = op_lookup(AS_OP(c->op)->name, strlen(AS_OP(c->op)->name));
    const AttrValue **vals =
        arena_array(&s->ctx->arena, def->n_attrs ? def->n_attrs : 1, sizeof *vals);
    StrBuf msg = {0};
    Span where;
    bool ok = op_bind_attrs(def, c->attrs, vals, &msg, &where);
    sb_free(&msg);
    RLY_CHECK(ok, "a type-checked %s has invalid attributes", def->name);
    *rc = (RelCall){.ctx = s->ctx, .op = def, .attrs = vals};
}

static TensorType *tensor_of(Expr *e) {
    Type *t = e->checked_type;
    return t && t->kind == TYPE_TENSOR ? AS_TENSOR_TYPE(t) : NULL;
}

static int64_t norm_axis(int64_t axis, uint32_t ndim) { return axis < 0 ? axis + ndim : axis; }

/* ---- the expansions ------------------------------------------------------------------------ */

static Expr *batch_norm(Simp *s, Call *c) {
    RelCall rc;
    bind(s, c, &rc);
    TensorType *t = tensor_of(c->args[0]);
    Expr *data = c->args[0], *gamma = c->args[1], *beta = c->args[2];
    Expr *mean = c->args[3], *var = c->args[4];
    Expr *eps = scalar(s, t->dtype, attr_float(&rc, "epsilon"));
    Expr *scale = op2(s, "divide", scalar(s, t->dtype, 1), op1(s, "sqrt", op2(s, "add", var, eps)));
    if (attr_bool(&rc, "scale")) scale = op2(s, "multiply", scale, gamma);
    Expr *shift = op2(s, "multiply", op1(s, "negative", mean), scale);
    if (attr_bool(&rc, "center")) shift = op2(s, "add", shift, beta);
    int64_t axis = norm_axis(attr_int(&rc, "axis"), t->ndim);
    scale = along_axis(s, scale, t->ndim, axis);
    shift = along_axis(s, shift, t->ndim, axis);
    return op2(s, "add", op2(s, "multiply", data, scale), shift);
}

/* (x - mean) / sqrt(var + eps) over `axes`, then gamma and beta along `axis` as the flags ask.
 * `x` is the data as normalized (group_norm's reshaped view); `back`, when not NULL, is the
 * reshape that restores the data's shape before gamma and beta. */
static Expr *affine_norm(Simp *s, RelCall *rc, Expr *x, uint32_t n_axes, const int64_t *axes,
                         const Attrs *back, Expr *gamma, Expr *beta, const TensorType *t,
                         int64_t axis) {
    Expr *eps = scalar(s, t->dtype, attr_float(rc, "epsilon"));
    Expr *mean = reduce(s, "mean", x, NULL, n_axes, axes);
    Expr *var = reduce(s, "variance", x, mean, n_axes, axes);
    Expr *out =
        op2(s, "divide", op2(s, "subtract", x, mean), op1(s, "sqrt", op2(s, "add", var, eps)));
    if (back) out = call(s, "reshape", 1, &out, back);
    if (attr_bool(rc, "scale")) out = op2(s, "multiply", out, along_axis(s, gamma, t->ndim, axis));
    if (attr_bool(rc, "center")) out = op2(s, "add", out, along_axis(s, beta, t->ndim, axis));
    return out;
}

static Expr *layer_norm(Simp *s, Call *c) {
    RelCall rc;
    bind(s, c, &rc);
    TensorType *t = tensor_of(c->args[0]);
    int64_t axis = norm_axis(attr_int(&rc, "axis"), t->ndim);
    return affine_norm(s, &rc, c->args[0], 1, &axis, NULL, c->args[1], c->args[2], t, axis);
}

/* Statistics per sample and channel: over every axis but 0 and `axis`. */
static Expr *instance_norm(Simp *s, Call *c) {
    RelCall rc;
    bind(s, c, &rc);
    TensorType *t = tensor_of(c->args[0]);
    int64_t axis = norm_axis(attr_int(&rc, "axis"), t->ndim);
    int64_t *axes = arena_array(&s->ctx->arena, t->ndim, sizeof *axes);
    uint32_t n = 0;
    for (uint32_t i = 1; i < t->ndim; i++)
        if ((int64_t)i != axis) axes[n++] = i;
    return affine_norm(s, &rc, c->args[0], n, axes, NULL, c->args[1], c->args[2], t, axis);
}

/* The channels of `axis` split into (G, C/G), statistics over C/G and every axis after it. Needs
 * a static shape (the reshapes are written with it); NULL otherwise. */
static Expr *group_norm(Simp *s, Call *c) {
    RelCall rc;
    bind(s, c, &rc);
    TensorType *t = tensor_of(c->args[0]);
    /* a 0 in reshape's newshape means "keep that dim": an empty tensor keeps the operator */
    for (uint32_t i = 0; i < t->ndim; i++)
        if (!dim_known(t->shape[i]) || t->shape[i] == 0) return NULL;
    int64_t axis = norm_axis(attr_int(&rc, "axis"), t->ndim), g = attr_int(&rc, "num_groups");
    int64_t *split = arena_array(&s->ctx->arena, t->ndim + 1, sizeof *split);
    int64_t *axes = arena_array(&s->ctx->arena, t->ndim, sizeof *axes);
    uint32_t n = 0;
    for (uint32_t i = 0, k = 0; i < t->ndim; i++) {
        if ((int64_t)i == axis) {
            split[k++] = g;
            split[k++] = t->shape[i] / g;
        } else {
            split[k++] = t->shape[i];
        }
        if ((int64_t)i >= axis) axes[n++] = i + 1;
    }
    static const char *const key[1] = {"newshape"};
    AttrValue *to = new_ints(s, t->ndim + 1, split), *back = new_ints(s, t->ndim, t->shape);
    Expr *x = call(s, "reshape", 1, &c->args[0], attrs(s, 1, key, &to));
    return affine_norm(s, &rc, x, n, axes, attrs(s, 1, key, &back), c->args[1], c->args[2], t,
                       axis);
}

/* x / sqrt(maximum(sum(x * x, axis), eps)): axis None sums over every axis, an empty list over
 * none (as the kernel does; `sum` reads an empty list as every axis, so none is no sum). */
static Expr *l2_normalize(Simp *s, Call *c) {
    RelCall rc;
    bind(s, c, &rc);
    TensorType *t = tensor_of(c->args[0]);
    Expr *x = c->args[0], *sq = op2(s, "multiply", x, x);
    const int64_t *axes;
    uint32_t n = attr_ints(&rc, "axis", &axes);
    if (attr_is_none(&rc, "axis"))
        sq = reduce(s, "sum", sq, NULL, 0, NULL);
    else if (n > 0)
        sq = reduce(s, "sum", sq, NULL, n, axes);
    Expr *eps = scalar(s, t->dtype, attr_float(&rc, "eps"));
    return op2(s, "divide", x, op1(s, "sqrt", op2(s, "maximum", sq, eps)));
}

/* ---- the rewrite ----------------------------------------------------------------------------- */

static bool args_pure(Simp *s, Call *c) {
    for (uint32_t i = 0; i < c->n_args; i++)
        if (!pass_is_pure(&s->pure, c->args[i])) return false;
    return true;
}

/* The call a tuple projection reads: the tuple itself, or the value of the let that binds it. */
static Call *projected_call(Rewriter *rw, Expr *tuple) {
    Simp *s = rw->state;
    if (tuple->kind == EXPR_VAR) {
        Expr *value = ptrmap_get(&s->lets, tuple);
        tuple = value ? ptrmap_get(&rw->memo, value) : NULL;
    }
    return tuple && tuple->kind == EXPR_CALL ? AS_CALL(tuple) : NULL;
}

static Expr *pre(Rewriter *rw, Expr *e) {
    Simp *s = rw->state;
    if (e->kind == EXPR_LET) ptrmap_put(&s->lets, AS_LET(e)->var, AS_LET(e)->value);
    return NULL;
}

static Expr *post(Rewriter *rw, Expr *orig, Expr *e) {
    Simp *s = rw->state;
    e = pass_rebuild(rw, orig, e);
    Expr *r = NULL;
    if (e->kind == EXPR_TUPLE_GET_ITEM && AS_TUPLE_GET_ITEM(e)->index == 0) {
        Call *c = projected_call(rw, AS_TUPLE_GET_ITEM(e)->tuple);
        if (c && c->op == s->op_dropout) {
            r = c->args[0];
        } else if (c && c->op == s->op_bn && tensor_of(c->args[0]) && args_pure(s, c)) {
            r = ptrmap_get(&s->bn, c);
            s->span = c->base.span;
            if (r == NULL) ptrmap_put(&s->bn, c, r = batch_norm(s, c));
        }
    } else if (e->kind == EXPR_CALL && AS_CALL(e)->op->kind == EXPR_OP) {
        Call *c = AS_CALL(e);
        Expr *op = c->op;
        bool norm =
            op == s->op_layer || op == s->op_instance || op == s->op_group || op == s->op_l2;
        if (norm && tensor_of(c->args[0]) && args_pure(s, c)) {
            s->span = e->span;
            r = op == s->op_layer      ? layer_norm(s, c)
                : op == s->op_instance ? instance_norm(s, c)
                : op == s->op_group    ? group_norm(s, c)
                                       : l2_normalize(s, c);
        }
    }
    /* an expansion with a less precise type (a `?` dim the norm's relation had merged) would
     * change the types of the nodes above: keep the operator then */
    return r && r->checked_type == e->checked_type ? r : e;
}

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    Ctx *ctx = pc->ctx;
    Simp s = {.ctx = ctx};
    s.op_bn = ir_op_get(ctx, "nn.batch_norm", strlen("nn.batch_norm"));
    s.op_dropout = ir_op_get(ctx, "nn.dropout", strlen("nn.dropout"));
    s.op_layer = ir_op_get(ctx, "nn.layer_norm", strlen("nn.layer_norm"));
    s.op_instance = ir_op_get(ctx, "nn.instance_norm", strlen("nn.instance_norm"));
    s.op_group = ir_op_get(ctx, "nn.group_norm", strlen("nn.group_norm"));
    s.op_l2 = ir_op_get(ctx, "nn.l2_normalize", strlen("nn.l2_normalize"));
    Rewriter rw = {.ctx = ctx, .pre = pre, .post = post, .state = &s};
    Expr *r = ir_rewrite(&rw, e);
    ir_rewriter_free(&rw);
    ptrmap_free(&s.lets);
    ptrmap_free(&s.bn);
    ptrmap_free(&s.pure);
    return r;
}

const PassDef pass_simplify_inference = {
    .name = "SimplifyInference",
    .opt_level = 0,
    .kind = PASS_FUNCTION,
    .params = "",
    .run_expr = run,
    .doc = "inference forms of batch_norm, dropout, layer/instance/group norm, l2_normalize",
};
