/* canonicalize_ops.c - CanonicalizeOps (TVM's canonicalize_ops.cc, function pass, opt level 3):
 * operators with a simpler equivalent in basic operators take it, so that later passes (fusion,
 * FoldScaleAxis, layout conversion) see fewer kinds of calls. As in TVM that is one rewrite:
 *
 *   nn.bias_add(x, b, axis)  ->  add(x, expand_dims(b, axis=1, num_newaxis=rank - axis - 1))
 *
 * (no expand_dims when axis is the last one). The rewrite keeps the call's type, or is not made
 * (a `?` channel dim that bias_add's relation had merged with the bias length).
 * docs/passes.md, "CanonicalizeOps". */
#include <string.h>

#include "ops/ops.h"
#include "passes/passes.h"

typedef struct Canon {
    Expr *op_bias_add;
} Canon;

static Expr *bias_add(Ctx *ctx, Call *c) {
    Type *t = c->args[0]->checked_type;
    if (t == NULL || t->kind != TYPE_TENSOR) return NULL;
    uint32_t ndim = AS_TENSOR_TYPE(t)->ndim;
    const OpDef *def = op_lookup("nn.bias_add", strlen("nn.bias_add"));
    const AttrValue *vals[1];
    StrBuf msg = {0};
    Span where;
    bool ok = op_bind_attrs(def, c->attrs, vals, &msg, &where);
    sb_free(&msg);
    RLY_CHECK(ok && def->n_attrs == 1, "a type-checked nn.bias_add has invalid attributes");
    RelCall rc = {.ctx = ctx, .op = def, .attrs = vals};
    int64_t axis = attr_int(&rc, "axis");
    if (axis < 0) axis += ndim;
    Expr *bias = c->args[1];
    int64_t pad = (int64_t)ndim - axis - 1;
    if (pad > 0) {
        const char *keys[2] = {ir_intern(ctx, "axis", 4), ir_intern(ctx, "num_newaxis", 11)};
        AttrValue *ed[2] = {ir_attr_int(ctx, 1, RLY_DTYPE_I32, c->base.span),
                            ir_attr_int(ctx, pad, RLY_DTYPE_I32, c->base.span)};
        bias = pass_op_call(ctx, "expand_dims", 1, &bias, ir_attrs_new(ctx, 2, keys, ed),
                            c->base.span);
        RLY_CHECK(bias != NULL, "CanonicalizeOps built an ill-typed expand_dims");
    }
    Expr *args[2] = {c->args[0], bias};
    Expr *r = pass_op_call(ctx, "add", 2, args, NULL, c->base.span);
    RLY_CHECK(r != NULL, "CanonicalizeOps built an ill-typed add");
    return r;
}

static Expr *post(Rewriter *rw, Expr *orig, Expr *e) {
    Canon *s = rw->state;
    e = pass_rebuild(rw, orig, e);
    if (e->kind != EXPR_CALL || AS_CALL(e)->op != s->op_bias_add) return e;
    Expr *r = bias_add(rw->ctx, AS_CALL(e));
    return r && r->checked_type == e->checked_type ? r : e;
}

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    Canon s = {ir_op_get(pc->ctx, "nn.bias_add", strlen("nn.bias_add"))};
    Rewriter rw = {.ctx = pc->ctx, .post = post, .state = &s};
    Expr *r = ir_rewrite(&rw, e);
    ir_rewriter_free(&rw);
    return r;
}

const PassDef pass_canonicalize_ops = {
    .name = "CanonicalizeOps",
    .opt_level = 3,
    .kind = PASS_FUNCTION,
    .params = "",
    .run_expr = run,
    .doc = "nn.bias_add as add of the bias expanded along its axis",
};
