/* rewrite_util.c - helpers shared by passes that rewrite (passes.h): let chains rewritten in a
 * loop (ANF programs are chains of 10^5 lets), the re-inference that follows a rewrite which made
 * some type more precise, and diagnostics rolled back when what a pass tried does not stick. */
#include "passes/passes.h"
#include "types/types.h"

/* ---- let chains --------------------------------------------------------------------------- */

typedef struct Link {
    Let *orig;
    Expr *var;   /* the binder kept (NULL when dropped) */
    Expr *value; /* the rewritten value (NULL when dropped unrewritten) */
} Link;

Expr *pass_rewrite_lets(Rewriter *rw, Expr *let, const LetHooks *hooks) {
    Vec(Link) chain = {0};
    Expr *cur = let;
    /* Walk down while the body is a let not met before (a shared one is already rewritten). */
    while (cur->kind == EXPR_LET && (cur == let || !ptrmap_has(&rw->memo, cur))) {
        Let *l = AS_LET(cur);
        Link k = {l, NULL, NULL};
        if (hooks->keep_value == NULL || hooks->keep_value(rw, l)) {
            /* let-rec: the variable is in scope in its function value */
            if (l->value->kind == EXPR_FUNCTION) (void)ir_rewrite(rw, &l->var->base);
            k.value = ir_rewrite(rw, l->value);
            bool drop = false;
            Expr *v =
                hooks->bind ? hooks->bind(rw, l, k.value, &drop) : ir_rewrite(rw, &l->var->base);
            if (!drop) {
                RLY_CHECK(v != NULL && v->kind == EXPR_VAR, "a let binder became a %s",
                          v ? ir_expr_kind_names[v->kind] : "NULL");
                k.var = v;
            }
            if (v) ptrmap_put(&rw->memo, l->var, v);
        }
        vec_push(&chain, k);
        cur = l->body;
    }
    Expr *body = ir_rewrite(rw, cur);
    for (size_t i = chain.len; i-- > 0;) { /* rebuild inside out */
        Link *k = &chain.data[i];
        Let *l = k->orig;
        if (k->var) {
            if (k->var != &l->var->base || k->value != l->value || body != l->body) {
                body = ir_let_new(rw->ctx, AS_VAR(k->var), k->value, body, l->base.span);
                pass_retype(rw->ctx, body, l->base.checked_type);
            } else {
                body = &l->base;
            }
        }
        ptrmap_put(&rw->memo, l, body);
    }
    vec_free(&chain);
    return body;
}

/* ---- refined types ------------------------------------------------------------------------ */

/* Put `e` where `old` is in m (a global's function or the bare expression); false when old is
 * neither. */
static bool replace(Module *m, Expr *old, Expr *e) {
    for (size_t i = 0; i < m->funcs.len; i++) {
        FuncDef *d = &m->funcs.data[i];
        if (d->func && &d->func->base == old) {
            RLY_CHECK(e->kind == EXPR_FUNCTION, "@%s was rewritten into a %s", d->gvar->name,
                      ir_expr_kind_names[e->kind]);
            d->func = AS_FUNCTION(e);
            return true;
        }
    }
    if (m->expr == old) {
        m->expr = e;
        return true;
    }
    return false;
}

Expr *pass_refine_types(Module *m, Expr *old, Expr *e) {
    if (e == old) return e;
    /* A function pass is handed the module's own definitions; anything else has no place to be
     * inferred in. */
    RLY_CHECK(replace(m, old, e), "pass_refine_types: the expression is not part of the module");
    DiagMark mark = pass_diag_mark(m->ctx);
    if (ty_infer_module(m)) return e;
    pass_diag_rollback(m->ctx, mark, NULL);
    replace(m, e, old);
    RLY_CHECK(ty_infer_module(m), "the module no longer type-checks after restoring it");
    return old;
}

/* ---- diagnostics ---------------------------------------------------------------------------- */

DiagMark pass_diag_mark(const Ctx *ctx) {
    DiagMark m = {ctx->diags.items.len, ctx->diags.n_errors};
    return m;
}

void pass_diag_rollback(Ctx *ctx, DiagMark mark, StrBuf *why) {
    Diags *ds = &ctx->diags;
    if (why && ds->items.len > mark.items) diags_render(ds, mark.items, why);
    for (size_t i = mark.items; i < ds->items.len; i++)
        free(ds->items.data[i].msg);
    ds->items.len = mark.items;
    ds->n_errors = mark.errors;
}
