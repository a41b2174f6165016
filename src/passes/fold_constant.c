/* fold_constant.c - FoldConstant (TVM's FoldConstant, opt level 2, function pass), and the
 * folder it is built on, which the ONNX importer also folds with (passes.h, "constant
 * folding"). At compile time, with the reference interpreter (src/eval):
 *   - an operator call whose arguments are constants (or tuples of them) becomes its value;
 *   - shape_of / ndarray_size of a pure tensor whose type gives its shape become constants;
 *   - `if` on a constant condition becomes the branch taken;
 *   - a projection of a tuple expression becomes the field (when the others are pure);
 *   - a let bound to a constant (or a tuple of them) is dropped and the constant put in its uses.
 * Only operators are evaluated, never a function or closure call, so nothing with an effect is
 * dropped, duplicated or moved; folding inside an if arm evaluates nothing that can be observed
 * (a run-time error leaves the call for the run to report). Fused (Primitive) functions are left
 * alone, as in TVM. docs/passes.md, "FoldConstant". */
#include <string.h>

#include "eval/eval.h"
#include "ops/ops.h"
#include "passes/passes.h"

/* ---- the folder ----------------------------------------------------------------------------- */

/* The most a fold of unknown result shape may hold live while it runs (its result is then
 * checked against PASS_FOLD_MAX_ELEMS). */
#define FOLD_MAX_MEMORY ((uint64_t)256 << 20)

struct PassFolder {
    Ctx *ctx;
    bool static_only, fold_qnn;
    Module *scratch; /* the interpreter's module: folds evaluate closed operator calls only */
    Interp *interp;  /* made at the first fold */
};

PassFolder *pass_folder_new(Ctx *ctx, bool static_only, bool fold_qnn) {
    PassFolder *f = sup_calloc(1, sizeof *f);
    f->ctx = ctx;
    f->static_only = static_only;
    f->fold_qnn = fold_qnn;
    return f;
}

void pass_folder_free(PassFolder *f) {
    if (f == NULL) return;
    if (f->interp) ev_free(f->interp);
    free(f);
}

/* Operators whose calls are never folded: those with an effect or meaning beyond their value
 * (TVM's non-computational and stateful operators), a user's (its kernel may do anything), and
 * the quantized ones unless asked (TVM folds them only after lowering, with fold_qnn). */
static bool foldable(const PassFolder *f, const OpDef *def) {
    if (def == NULL || def->id >= OP_ID_COUNT) return false;
    switch (def->id) {
    case OP_ID_DEBUG:
    case OP_ID_TRAP:
    case OP_ID_ANNOTATION_STOP_FUSION:
    case OP_ID_ANNOTATION_CHECKPOINT: return false;
    default: return f->fold_qnn || strncmp(def->name, "qnn.", 4) != 0;
    }
}

/* The element count of a value of type t (saturating at SUP_DIM_OVER); -1 when t leaves a dim
 * unknown. */
static int64_t type_elems(Type *t) {
    if (t == NULL) return -1;
    if (t->kind == TYPE_TENSOR)
        return sup_shape_numel(AS_TENSOR_TYPE(t)->ndim, AS_TENSOR_TYPE(t)->shape);
    if (t->kind != TYPE_TUPLE) return -1;
    int64_t n = 0;
    for (uint32_t i = 0; i < AS_TUPLE_TYPE(t)->n; i++) {
        /* an operator's result: a tuple of tensors at most, so this recursion is one level */
        int64_t k = type_elems(AS_TUPLE_TYPE(t)->fields[i]);
        if (k < 0) return -1;
        n = n > SUP_DIM_MAX - k ? SUP_DIM_OVER : n + k;
    }
    return n;
}

static Expr *const_of_tensor(Ctx *ctx, RtTensor *t, Span span) {
    Expr *c = ir_constant_new(ctx, rt_tensor_dtype(t), (uint32_t)t->t.ndim, t->shape,
                              rt_tensor_data(t), span);
    c->checked_type = ir_type_tensor(ctx, rt_tensor_dtype(t), (uint32_t)t->t.ndim, t->shape);
    return c;
}

/* The constant (or tuple of constants) for an operator's result; NULL for any other value or
 * one over the size limit. */
static Expr *const_of_value(Ctx *ctx, Value *v, Span span) {
    if (v->kind == VAL_TENSOR) {
        int64_t n = sup_shape_numel((uint32_t)RT_TENSOR(v)->t.ndim, RT_TENSOR(v)->shape);
        return n >= 0 && n <= (int64_t)PASS_FOLD_MAX_ELEMS
                   ? const_of_tensor(ctx, RT_TENSOR(v), span)
                   : NULL;
    }
    if (v->kind != VAL_TUPLE) return NULL;
    RtTuple *tu = RT_TUPLE(v);
    Expr **f = arena_array(&ctx->arena, tu->n ? tu->n : 1, sizeof *f);
    int64_t total = 0;
    for (uint32_t i = 0; i < tu->n; i++) {
        if (tu->f[i]->kind != VAL_TENSOR) return NULL;
        RtTensor *t = RT_TENSOR(tu->f[i]);
        int64_t n = sup_shape_numel((uint32_t)t->t.ndim, t->shape);
        if (n < 0 || (total += n) > (int64_t)PASS_FOLD_MAX_ELEMS) return NULL;
        f[i] = const_of_tensor(ctx, t, span);
    }
    Expr *r = ir_tuple_new(ctx, tu->n, f, span);
    pass_retype(ctx, r, NULL);
    return r;
}

/* A constant, or a tuple of constants (what an operator argument can be). */
static bool const_arg(const Expr *e) {
    if (e->kind == EXPR_CONSTANT) return true;
    if (e->kind != EXPR_TUPLE) return false;
    const Tuple *t = (const Tuple *)e;
    for (uint32_t i = 0; i < t->n; i++)
        if (t->fields[i]->kind != EXPR_CONSTANT) return false;
    return true;
}

Expr *pass_fold_call(PassFolder *f, Expr *call, StrBuf *why) {
    Call *c = AS_CALL(call);
    if (c->op->kind != EXPR_OP || !foldable(f, op_def_of(c->op))) return NULL;
    for (uint32_t i = 0; i < c->n_args; i++)
        if (!const_arg(c->args[i])) return NULL;
    int64_t n = type_elems(call->checked_type); /* -1: known only once evaluated */
    if (n < 0 ? f->static_only : n > (int64_t)PASS_FOLD_MAX_ELEMS) return NULL;
    if (f->interp == NULL) {
        f->scratch = ir_module_new(f->ctx);
        f->interp = ev_new(f->scratch);
        if (!f->static_only) { /* a result of unknown shape may be anything: bound it */
            RtLimits lim = rt_limits_default();
            lim.max_memory = FOLD_MAX_MEMORY;
            ev_set_limits(f->interp, &lim);
        }
    }
    DiagMark mark = pass_diag_mark(f->ctx);
    Value *v = ev_eval_closed(f->interp, call);
    if (v == NULL) { /* a run-time error: keep the call, so the run reports it (if it runs) */
        pass_diag_rollback(f->ctx, mark, why);
        return NULL;
    }
    Expr *r = const_of_value(f->ctx, v, call->span);
    rt_release(v);
    return r;
}

/* ---- the pass ------------------------------------------------------------------------------- */

typedef struct Fold {
    Ctx *ctx;
    bool fold_qnn;
    PassFolder *folder; /* made at the first call on constants */
    PtrMap consts;      /* rewritten tuple -> non-NULL when every field is a constant (or such) */
    PtrMap pure;        /* pass_is_pure's memo */
    PassCallHook hook;
    void *hook_state;
    bool keep_types; /* the second try: no replacement may change a type */
    bool refined;    /* some node got a more precise type than the one it replaced */
    bool broken;     /* a rebuilt call's relation refused a refined argument (see fold_post) */
} Fold;

/* A constant, or a tuple whose fields all are (TVM's IsComplexConstant), by the memo. */
static bool complex_const(Fold *f, Expr *e) {
    return e->kind == EXPR_CONSTANT || (e->kind == EXPR_TUPLE && ptrmap_has(&f->consts, e));
}

static bool primitive(const Function *fn) {
    const AttrValue *a = ir_attrs_get(fn->attrs, "Primitive");
    return a && a->kind == ATTR_INT && a->i != 0;
}

static Expr *bind_let(Rewriter *rw, Let *orig, Expr *value, bool *drop) {
    Fold *f = rw->state;
    if (complex_const(f, value) && /* propagate it into the uses; the let goes */
        (!f->keep_types || value->checked_type == orig->var->base.checked_type)) {
        *drop = true;
        return value;
    }
    return ir_rewrite(rw, &orig->var->base);
}

static const LetHooks fold_lets = {NULL, bind_let};

static Expr *fold_pre(Rewriter *rw, Expr *e) {
    if (e->kind == EXPR_FUNCTION && primitive(AS_FUNCTION(e))) return e;
    if (e->kind == EXPR_LET) return pass_rewrite_lets(rw, e, &fold_lets);
    return NULL;
}

/* shape_of(x) / ndarray_size(x) of a pure x whose type gives every dim. */
static Expr *fold_shape(Fold *f, Call *c) {
    const OpDef *def = op_def_of(c->op);
    bool shape_of = def && def->id == OP_ID_SHAPE_OF;
    if ((!shape_of && !(def && def->id == OP_ID_NDARRAY_SIZE)) || c->n_args != 1) return NULL;
    Type *xt = c->args[0]->checked_type, *rt = c->base.checked_type;
    if (xt == NULL || xt->kind != TYPE_TENSOR || rt == NULL || rt->kind != TYPE_TENSOR) return NULL;
    TensorType *x = AS_TENSOR_TYPE(xt), *r = AS_TENSOR_TYPE(rt);
    if (sup_shape_numel(x->ndim, x->shape) < 0 || !pass_is_pure(&f->pure, c->args[0])) return NULL;
    if (!sup_dtype_is_int(r->dtype) && !sup_dtype_is_uint(r->dtype)) return NULL;
    uint32_t n = shape_of ? x->ndim : 1;
    int64_t *vals = arena_array(&f->ctx->arena, n ? n : 1, sizeof *vals);
    if (shape_of)
        memcpy(vals, x->shape, n * sizeof *vals);
    else
        vals[0] = sup_shape_numel(x->ndim, x->shape);
    size_t w = sup_dtype_size(r->dtype);
    uint8_t *data = arena_array(&f->ctx->arena, n ? n : 1, w);
    for (uint32_t i = 0; i < n; i++) { /* little-endian truncation to the result's width */
        uint64_t v = (uint64_t)vals[i];
        for (size_t b = 0; b < w; b++)
            data[i * w + b] = (uint8_t)(v >> (8 * b));
    }
    Expr *k = ir_constant_new(f->ctx, r->dtype, r->ndim, r->shape, data, c->base.span);
    k->checked_type = rt;
    return k;
}

static Expr *fold_call(Fold *f, Expr *e) {
    if (AS_CALL(e)->op->kind != EXPR_OP) return e; /* a function call is never evaluated */
    if (f->hook) e = f->hook(f->ctx, e, f->hook_state);
    if (e->kind != EXPR_CALL || AS_CALL(e)->op->kind != EXPR_OP) return e;
    Call *c = AS_CALL(e);
    Expr *k = fold_shape(f, c);
    if (k) return k;
    for (uint32_t i = 0; i < c->n_args; i++)
        if (!complex_const(f, c->args[i])) return e;
    if (f->folder == NULL) f->folder = pass_folder_new(f->ctx, false, f->fold_qnn);
    k = pass_fold_call(f->folder, e, NULL);
    if (k && k->kind == EXPR_TUPLE) ptrmap_put(&f->consts, k, k);
    return k ? k : e;
}

static Expr *fold_post(Rewriter *rw, Expr *orig, Expr *e) {
    Fold *f = rw->state;
    /* A refined argument can make a call's relation refuse what `?` dims let through (a fold
     * showed the shapes disagree: the run would fail there). The message is dropped, and the
     * function is folded again keeping every type (see pass_fold_constant_expr). */
    DiagMark mark = pass_diag_mark(f->ctx);
    e = pass_rebuild(rw, orig, e);
    if (f->ctx->diags.n_errors > mark.errors) {
        pass_diag_rollback(f->ctx, mark, NULL);
        f->broken = true;
    }
    Expr *rebuilt = e;
    switch ((ExprKind)e->kind) {
    case EXPR_CALL: e = fold_call(f, e); break;
    case EXPR_IF: {
        If *x = AS_IF(e);
        if (x->cond->kind == EXPR_CONSTANT)
            e = ir_constant_as_i64(AS_CONSTANT(x->cond)) ? x->then_branch : x->else_branch;
        break;
    }
    case EXPR_TUPLE_GET_ITEM: {
        TupleGetItem *g = AS_TUPLE_GET_ITEM(e);
        if (g->tuple->kind != EXPR_TUPLE) break;
        Tuple *t = AS_TUPLE(g->tuple);
        bool others_pure = true; /* the other fields are dropped: only if that drops no effect */
        for (uint32_t i = 0; i < t->n && others_pure; i++)
            others_pure = i == g->index || pass_is_pure(&f->pure, t->fields[i]);
        if (others_pure) e = t->fields[g->index];
        break;
    }
    case EXPR_TUPLE: {
        Tuple *t = AS_TUPLE(e);
        bool all = true;
        for (uint32_t i = 0; i < t->n && all; i++)
            all = complex_const(f, t->fields[i]);
        if (all) ptrmap_put(&f->consts, e, e);
        break;
    }
    default: break;
    }
    if (e->checked_type != orig->checked_type) {
        if (f->keep_types) return rebuilt;
        f->refined = true;
    }
    return e;
}

static Expr *fold(Module *m, Expr *e, Fold *f) {
    Rewriter rw = {.ctx = m->ctx, .pre = fold_pre, .post = fold_post, .state = f};
    Expr *r = ir_rewrite(&rw, e);
    ir_rewriter_free(&rw);
    ptrmap_free(&f->consts);
    ptrmap_free(&f->pure);
    pass_folder_free(f->folder);
    f->folder = NULL;
    return r;
}

Expr *pass_fold_constant_expr(Module *m, Expr *e, bool fold_qnn, PassCallHook hook, void *state) {
    Fold f = {.ctx = m->ctx, .fold_qnn = fold_qnn, .hook = hook, .hook_state = state};
    Expr *r = fold(m, e, &f);
    if (!f.refined) return r;
    if (!f.broken && pass_refine_types(m, e, r) == r) return r;
    /* The refined types do not fit together (two branches that were `?` now disagree, a call
     * whose `?` argument hid a shape mismatch): fold again, making only type-keeping changes. */
    Fold again = {
        .ctx = m->ctx, .fold_qnn = fold_qnn, .hook = hook, .hook_state = state, .keep_types = true};
    return fold(m, e, &again);
}

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    return pass_fold_constant_expr(m, e, pass_arg_bool(pc, "fold_qnn"), NULL, NULL);
}

const PassDef pass_fold_constant = {
    .name = "FoldConstant",
    .opt_level = 2,
    .kind = PASS_FUNCTION,
    .params = "fold_qnn:bool=False",
    .run_expr = run,
    .doc = "evaluate operator calls on constants, constant if conditions and constant lets",
};
