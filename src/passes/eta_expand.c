/* eta_expand.c - EtaExpand (TVM's eta_expand.cc; module pass, opt level 1): a constructor or a
 * global function used as a value, not called, becomes a function literal that calls it:
 *
 *   Cons            ==>  fn [A](%x: A, %x1: List[A]) -> List[A] { Cons(%x, %x1) }
 *   @g              ==>  fn (%a: T) -> R { @g(%a) }
 *
 * A polymorphic constructor or global gets a polymorphic literal with fresh type parameters.
 * Called constructors and globals stay as they are. One rewrite per global function (the
 * expansion of one constructor or global is built once per function and shared by its uses
 * there); every node built is typed as it is built, and the module is inferred again after an
 * expansion (see run). */
#include "passes/passes.h"
#include "types/types.h"

typedef struct Eta {
    Module *m;
    bool ctors, globals;
    bool expanded; /* something was */
} Eta;

/* Substitution of the type parameters of one polymorphic scheme by fresh ones. */
typedef struct Fresh {
    uint32_t n;
    TypeVar *const *from;
    TypeVar **to;
} Fresh;

static Type *fresh_pre(TypeRewriter *rw, Type *t, bool *stop) {
    Fresh *f = rw->state;
    if (t->kind != TYPE_VAR) return t;
    *stop = true;
    for (uint32_t i = 0; i < f->n; i++)
        if (&f->from[i]->base == t) return &f->to[i]->base;
    return t;
}

/* The types ts[0..n) with the type variables f->from replaced by f->to (in place). */
static void subst_types(Ctx *ctx, Fresh *f, uint32_t n, Type **ts) {
    TypeRewriter rw = {ctx, fresh_pre, {0}, f};
    for (uint32_t i = 0; i < n; i++)
        ts[i] = ir_type_rewrite(&rw, ts[i]);
    ptrmap_free(&rw.memo);
}

static Fresh fresh_vars(Ctx *ctx, uint32_t n, TypeVar *const *from) {
    Fresh f = {n, from, arena_array(&ctx->arena, n ? n : 1, sizeof(TypeVar *))};
    for (uint32_t i = 0; i < n; i++)
        f.to[i] = ir_type_var_new(ctx, from[i]->name, (TypeVarKind)from[i]->tkind);
    return f;
}

/* fn [tparams](%p0: pt[0], ...) -> ret { callee(%p0, ...) }, typed. names[i] may be NULL. */
static Expr *expansion(Ctx *ctx, Expr *callee, uint32_t n, Type *const *pt,
                       const char *const *names, Type *ret, Fresh *f, Span span) {
    Var **ps = arena_array(&ctx->arena, n ? n : 1, sizeof(Var *));
    for (uint32_t i = 0; i < n; i++) {
        ps[i] = ir_var_new(ctx, names && names[i] ? names[i] : "x", pt[i], span);
        ps[i]->base.checked_type = pt[i];
    }
    Type **targs = arena_array(&ctx->arena, f->n ? f->n : 1, sizeof(Type *));
    for (uint32_t i = 0; i < f->n; i++)
        targs[i] = &f->to[i]->base;
    Expr *call = ir_call_new(ctx, callee, n, (Expr *const *)ps, NULL, f->n, targs, span);
    call->checked_type = ret;
    Expr *fn = ir_function_new(ctx, n, ps, call, ret, f->n, f->to, NULL, span);
    fn->checked_type = ir_type_func(ctx, n, pt, ret, f->n, f->to, 0, NULL);
    return fn;
}

static Expr *expand_ctor(Ctx *ctx, Constructor *c) {
    TypeData *td = c->belong_to->def;
    RLY_CHECK(td != NULL, "constructor %s has no type definition", c->name);
    Fresh f = fresh_vars(ctx, td->n_tvars, td->tvars);
    Type **pt = arena_array(&ctx->arena, c->n_inputs ? c->n_inputs : 1, sizeof(Type *));
    for (uint32_t i = 0; i < c->n_inputs; i++)
        pt[i] = c->inputs[i];
    subst_types(ctx, &f, c->n_inputs, pt);
    Type **args = arena_array(&ctx->arena, f.n ? f.n : 1, sizeof(Type *));
    for (uint32_t i = 0; i < f.n; i++)
        args[i] = &f.to[i]->base;
    Type *ret =
        td->n_tvars ? ir_type_call(ctx, &c->belong_to->base, f.n, args) : &c->belong_to->base;
    return expansion(ctx, &c->base, c->n_inputs, pt, NULL, ret, &f, c->base.span);
}

/* NULL when gv names no defined function (nothing to call). */
static Expr *expand_global(Ctx *ctx, Module *m, GlobalVar *gv) {
    FuncDef *d = ir_module_def_of(m, gv);
    if (d == NULL || d->func == NULL) return NULL;
    Type *t = gv->base.checked_type ? gv->base.checked_type : d->func->base.checked_type;
    RLY_CHECK(t != NULL && t->kind == TYPE_FUNC, "EtaExpand: @%s is untyped", gv->name);
    FuncType *ft = (FuncType *)t;
    Fresh f = fresh_vars(ctx, ft->n_tparams, ft->tparams);
    uint32_t n = ft->n_params;
    Type **pt = arena_array(&ctx->arena, n + 1, sizeof(Type *));
    const char **names = arena_array(&ctx->arena, n ? n : 1, sizeof(char *));
    for (uint32_t i = 0; i < n; i++) {
        pt[i] = ft->params[i];
        names[i] = i < d->func->n_params ? d->func->params[i]->name : NULL;
    }
    pt[n] = ft->ret;
    subst_types(ctx, &f, n + 1, pt);
    return expansion(ctx, &gv->base, n, pt, names, pt[n], &f, gv->base.span);
}

static Expr *eta_post(Rewriter *rw, Expr *orig, Expr *e) {
    Eta *st = rw->state;
    switch ((ExprKind)orig->kind) {
    case EXPR_CONSTRUCTOR:
        if (!st->ctors) return e;
        st->expanded = true;
        return expand_ctor(rw->ctx, AS_CONSTRUCTOR(orig));
    case EXPR_GLOBAL_VAR: {
        Expr *x = st->globals ? expand_global(rw->ctx, st->m, AS_GLOBAL_VAR(orig)) : NULL;
        st->expanded |= x != NULL;
        return x ? x : e;
    }
    case EXPR_CALL: {
        /* A called constructor or global is not expanded: the rewrite of the callee (shared with
         * its uses as a value) is put back. */
        Call *oc = AS_CALL(orig);
        if (e != orig && (oc->op->kind == EXPR_CONSTRUCTOR || oc->op->kind == EXPR_GLOBAL_VAR) &&
            AS_CALL(e)->op != oc->op) {
            Call *c = AS_CALL(e);
            bool same = true;
            for (uint32_t i = 0; i < c->n_args && same; i++)
                same = c->args[i] == oc->args[i];
            if (same) return orig;
            e = ir_call_new(rw->ctx, oc->op, c->n_args, c->args, c->attrs, c->n_type_args,
                            c->type_args, e->span);
        }
        return pass_rebuild(rw, orig, e);
    }
    default: return pass_rebuild(rw, orig, e);
    }
}

static bool run(PassCtx *pc, Module *m) {
    Eta st = {m, pass_arg_bool(pc, "expand_constructor"), pass_arg_bool(pc, "expand_global_var"),
              false};
    /* TVM refuses to run with both off; here that is a pass that changes nothing. */
    if (!st.ctors && !st.globals) return true;
    for (size_t i = 0; i < m->funcs.len; i++) {
        FuncDef *d = &m->funcs.data[i];
        if (d->func == NULL) continue;
        Rewriter rw = {.ctx = m->ctx, .post = eta_post, .state = &st};
        Expr *r = ir_rewrite(&rw, &d->func->base);
        ir_rewriter_free(&rw);
        d->func = AS_FUNCTION(r);
    }
    if (m->expr) {
        Rewriter rw = {.ctx = m->ctx, .post = eta_post, .state = &st};
        m->expr = ir_rewrite(&rw, m->expr);
        ir_rewriter_free(&rw);
    }
    /* A wrapper is a polymorphic function where the reference it replaces had the type of one
     * use: `let %c = Cons` gave %c the type of %c's call, the wrapper gives it a scheme, and
     * each call of %c then records its own type arguments. Only inference knows those, so the
     * module is inferred again (once, linear) when anything was expanded. */
    return !st.expanded || ty_infer_module(m);
}

const PassDef pass_eta_expand = {
    .name = "EtaExpand",
    .opt_level = 1,
    .kind = PASS_MODULE,
    .params = "expand_constructor:bool=False,expand_global_var:bool=False",
    .run_module = run,
    .doc = "wrap constructors and global functions used as values in function literals",
};
