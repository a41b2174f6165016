/* to_graph_normal_form.c - ToGraphNormalForm (TVM's to_graph_normal_form.cc; function pass, opt
 * level 1): the inverse of ToANormalForm. A let whose value is pure goes, and every use of its
 * variable becomes the value itself, so a value used twice becomes a shared node of the graph:
 *
 *   let %x = add(%a, 1f); let %y = multiply(%x, %x); %y  ==>  %0 = add(%a, 1f); multiply(%0, %0)
 *
 * A let whose value has an effect (pass_is_pure) stays a let, so effects keep their order and
 * their count (TVM inlines every let). A recursive let (a function that calls itself by its
 * variable) stays a let too (TVM rewrites each use to `let %f = fn ...; %f`).
 *
 * One ir_rewrite: a let's value is rewritten before its body (child order), so when a parent of
 * a use of %x is rebuilt, %x's value is already in the memo, and the parent takes it in place of
 * %x. A use met while the value itself is being rewritten is a recursive use. */
#include "passes/passes.h"

typedef struct Gnf {
    PtrMap pure;  /* pass_is_pure memo */
    PtrMap binds; /* Var -> the Let binding it */
    PtrMap rec;   /* Var -> non-NULL: its let is recursive */
    PtrMap subst; /* Var -> what its uses become, once known */
} Gnf;

static Expr *gnf_pre(Rewriter *rw, Expr *e) {
    Gnf *g = rw->state;
    if (e->kind == EXPR_LET) ptrmap_put(&g->binds, AS_LET(e)->var, e);
    return NULL;
}

/* The let binding v if it goes (its value pure, not recursive), else NULL. */
static Let *inlined(Gnf *g, Var *v) {
    Let *l = ptrmap_get(&g->binds, v);
    if (l == NULL || ptrmap_has(&g->rec, v) || !pass_is_pure(&g->pure, l->value)) return NULL;
    return l;
}

/* What a use of v (whose let goes) becomes: the rewritten value of its let, through lets of
 * variables (`let %y = %x`), each resolved once. NULL when v's own value is being rewritten:
 * the use is inside it, so v is recursive (and so marked), as is any variable of the chain
 * found so (it then stays a variable). */
static Expr *subst_of(Rewriter *rw, Gnf *g, Var *v) {
    Expr *x = ptrmap_get(&g->subst, v);
    if (x) return x;
    PtrVec chain = {0};
    for (Var *w = v;;) {
        Let *l = inlined(g, w);
        x = l ? ptrmap_get(&rw->memo, l->value) : NULL;
        if (l && x == NULL) ptrmap_put(&g->rec, w, w);
        if (x == NULL) { /* w stays a variable */
            x = &w->base;
            break;
        }
        vec_push(&chain, w);
        Expr *known = x->kind == EXPR_VAR ? ptrmap_get(&g->subst, x) : NULL;
        if (known) x = known;
        if (known || x->kind != EXPR_VAR || x == &w->base) break;
        w = AS_VAR(x);
    }
    for (size_t i = 0; i < chain.len; i++)
        ptrmap_put(&g->subst, chain.data[i], x);
    if (chain.len == 0) x = NULL;
    vec_free(&chain);
    return x;
}

static bool binder_slot(const Expr *e, uint32_t i) {
    return (e->kind == EXPR_LET && i == 0) ||
           (e->kind == EXPR_FUNCTION && i < ((const Function *)e)->n_params);
}

static Expr *gnf_post(Rewriter *rw, Expr *orig, Expr *e) {
    Gnf *g = rw->state;
    uint32_t n = ir_expr_n_children(e);
    Expr *small[8], **kids = NULL;
    for (uint32_t i = 0; i < n; i++) {
        Expr *c = ir_expr_child(e, i);
        if (c->kind != EXPR_VAR || binder_slot(e, i)) continue;
        if (inlined(g, AS_VAR(c)) == NULL) continue;
        Expr *value = subst_of(rw, g, AS_VAR(c));
        if (value == NULL) continue; /* met while rewriting its own value */
        if (kids == NULL) {
            kids = n <= 8 ? small : sup_malloc(sup_mul(n, sizeof(Expr *)));
            for (uint32_t j = 0; j < n; j++)
                kids[j] = ir_expr_child(e, j);
        }
        kids[i] = value;
    }
    if (kids) {
        e = ir_expr_with_children(rw->ctx, e, kids);
        if (kids != small) free(kids);
    }
    if (orig->kind == EXPR_LET && inlined(g, AS_LET(orig)->var)) return AS_LET(e)->body;
    return pass_rebuild(rw, orig, e);
}

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    Gnf g = {{0}, {0}, {0}, {0}};
    Rewriter rw = {.ctx = pc->ctx, .pre = gnf_pre, .post = gnf_post, .state = &g};
    Expr *r = ir_rewrite(&rw, e);
    ir_rewriter_free(&rw);
    ptrmap_free(&g.pure);
    ptrmap_free(&g.binds);
    ptrmap_free(&g.rec);
    ptrmap_free(&g.subst);
    return r;
}

const PassDef pass_to_graph_normal_form = {
    .name = "ToGraphNormalForm",
    .opt_level = 1,
    .kind = PASS_FUNCTION,
    .params = "",
    .run_expr = run,
    .doc = "inline let-bound pure values back into a graph (effects stay let-bound)",
};
