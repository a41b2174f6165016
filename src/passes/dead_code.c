/* dead_code.c - DeadCodeElimination (TVM's DeadCodeElimination, opt level 1, module pass):
 * drops every let whose variable no live code uses and whose value is pure, and with
 * inline_once puts a pure value used exactly once in place of its use. Global functions stay
 * (RemoveUnusedFunctions is another pass), and so does everything that is not a let: a program in
 * graph form has no dead nodes to drop.
 *
 * Two steps. A mark phase walks what runs: a let's body always, its value only once live code
 * uses its variable (or at once when the value has an effect), so a let used only by dead lets is
 * dead too, however long the chain, and the uses are counted in live code only. Then a rewrite
 * rebuilds each let chain (pass_rewrite_lets), leaving dead values out unrewritten.
 * docs/passes.md, "DeadCodeElimination". */
#include "passes/passes.h"

typedef struct Root {
    Expr *e;
    Expr *fn; /* the function e is in (the root expression itself outside any) */
} Root;

/* What the mark phase learns of a let-bound variable. */
typedef struct Binding {
    Let *let;
    Expr *fn;      /* the function the let is in */
    Expr *use_fn;  /* the function of the variable's last use */
    uint32_t uses; /* in live code */
    bool live;     /* the value runs */
} Binding;

typedef struct Dce {
    bool inline_once, ignore_impurity;
    PtrMap pure;     /* pass_is_pure's memo */
    PtrMap seen;     /* nodes the mark phase has walked */
    PtrMap bindings; /* let-bound Var -> Binding */
    Arena arena;     /* the bindings */
    Vec(Root) work;
    Vec(Binding *) lets; /* in the order met */
    PtrVec fns;          /* the functions around the node being walked, innermost last */
} Dce;

/* ---- the mark phase ---------------------------------------------------------------------- */

static bool droppable(Dce *d, Expr *value) {
    return d->ignore_impurity || pass_is_pure(&d->pure, value);
}

static void make_live(Dce *d, Binding *b) {
    b->live = true;
    Root r = {b->let->value, b->fn};
    vec_push(&d->work, r);
}

/* A use of v (of its let's variable; parameters and pattern variables are not counted). */
static void use(Dce *d, Var *v, uint32_t n) {
    Binding *b = ptrmap_get(&d->bindings, v);
    if (b == NULL) return;
    b->uses += n;
    b->use_fn = vec_last(&d->fns);
    if (!b->live) make_live(d, b); /* the value is needed after all */
}

static VisitResult mark_pre(Visitor *v, Expr *e) {
    Dce *d = v->state;
    if (ptrmap_has(&d->seen, e)) return VISIT_SKIP;
    ptrmap_put(&d->seen, e, e);
    if (e->kind == EXPR_LET) { /* its parts are walked as roots: the value maybe never */
        Let *l = AS_LET(e);
        Binding *b = arena_alloc(&d->arena, sizeof *b);
        *b = (Binding){l, vec_last(&d->fns), NULL, 0, false};
        ptrmap_put(&d->bindings, l->var, b);
        Root body = {l->body, b->fn};
        vec_push(&d->work, body);
        vec_push(&d->lets, b); /* is the value pure? asked only if it is still unused at the end */
        return VISIT_SKIP;
    }
    if (e->kind == EXPR_FUNCTION) vec_push(&d->fns, e);
    return VISIT_CONTINUE;
}

/* A variable in an attribute (rare: attributes hold atoms) cannot be rewritten into: counted as
 * two uses, so it is never inlined. */
static void attr_uses(Dce *d, const AttrValue *a) {
    if (a->kind == ATTR_EXPR && a->expr->kind == EXPR_VAR) use(d, AS_VAR(a->expr), 2);
    if (a->kind == ATTR_LIST)
        for (uint32_t i = 0; i < a->list.n; i++)
            attr_uses(d, a->list.items[i]); /* attribute nesting is a few levels */
}

static void mark_post(Visitor *v, Expr *e) {
    Dce *d = v->state;
    uint32_t n = ir_expr_n_children(e), first = 0;
    if (e->kind == EXPR_FUNCTION) first = AS_FUNCTION(e)->n_params; /* binders are not uses */
    for (uint32_t i = first; i < n; i++) {
        Expr *c = ir_expr_child(e, i);
        if (c->kind == EXPR_VAR) use(d, AS_VAR(c), 1);
    }
    if (e->kind == EXPR_CALL && AS_CALL(e)->attrs)
        for (uint32_t i = 0; i < AS_CALL(e)->attrs->n; i++)
            attr_uses(d, AS_CALL(e)->attrs->entries[i].value);
    if (e->kind == EXPR_FUNCTION) d->fns.len--;
}

/* Walk what runs from root. Most lets are used, so the purity of a value is asked only once
 * the walk has found no use of it: an impure one then runs after all (and what it uses is
 * walked in turn); each let is asked once. */
static void mark(Dce *d, Expr *root) {
    Root r0 = {root, root};
    vec_push(&d->work, r0);
    Visitor v = {mark_pre, mark_post, d};
    size_t asked = d->lets.len;
    while (d->work.len) {
        while (d->work.len) {
            Root r = vec_pop(&d->work);
            d->fns.len = 0;
            vec_push(&d->fns, r.fn);
            if (r.e->kind == EXPR_VAR) use(d, AS_VAR(r.e), 1); /* a let's value or body */
            ir_visit(&v, r.e);
        }
        for (; asked < d->lets.len; asked++) {
            Binding *b = d->lets.data[asked];
            if (!b->live && !droppable(d, b->let->value)) make_live(d, b);
        }
    }
}

/* ---- the rewrite ------------------------------------------------------------------------- */

static bool keep_value(Rewriter *rw, Let *orig) {
    Binding *b = ptrmap_get(&((Dce *)rw->state)->bindings, orig->var);
    return b == NULL || b->live; /* a let the mark phase never met stays as it is */
}

/* Atoms and function literals cost nothing to evaluate where they are used, whatever the
 * place; anything else is inlined only into the function it was bound in (never into a function
 * body, which may run many times or never). */
static bool movable_anywhere(const Expr *e) {
    switch ((ExprKind)e->kind) {
    case EXPR_VAR:
    case EXPR_GLOBAL_VAR:
    case EXPR_CONSTANT:
    case EXPR_OP:
    case EXPR_CONSTRUCTOR:
    case EXPR_FUNCTION: return true;
    default: return false;
    }
}

static Expr *bind(Rewriter *rw, Let *orig, Expr *value, bool *drop) {
    Dce *d = rw->state;
    Var *x = orig->var;
    Binding *b = ptrmap_get(&d->bindings, x);
    if (d->inline_once && b && b->uses == 1 && value->checked_type == x->base.checked_type &&
        droppable(d, value) && (movable_anywhere(value) || b->use_fn == b->fn)) {
        *drop = true;
        return value;
    }
    return ir_rewrite(rw, &x->base);
}

static const LetHooks dce_lets = {keep_value, bind};

static Expr *dce_pre(Rewriter *rw, Expr *e) {
    return e->kind == EXPR_LET ? pass_rewrite_lets(rw, e, &dce_lets) : NULL;
}

static bool run(PassCtx *pc, Module *m) {
    Dce d = {.inline_once = pass_arg_bool(pc, "inline_once"),
             .ignore_impurity = pass_arg_bool(pc, "ignore_impurity")};
    for (size_t i = 0; i < m->funcs.len; i++)
        if (m->funcs.data[i].func) mark(&d, &m->funcs.data[i].func->base);
    if (m->expr) mark(&d, m->expr);
    Rewriter rw = {.ctx = m->ctx, .pre = dce_pre, .post = pass_rebuild, .state = &d};
    pass_rewrite_module(&rw, m);
    ir_rewriter_free(&rw);
    ptrmap_free(&d.pure);
    ptrmap_free(&d.seen);
    ptrmap_free(&d.bindings);
    arena_free(&d.arena);
    vec_free(&d.work);
    vec_free(&d.lets);
    vec_free(&d.fns);
    return true;
}

const PassDef pass_dead_code_elimination = {
    .name = "DeadCodeElimination",
    .opt_level = 1,
    .kind = PASS_MODULE,
    .params = "inline_once:bool=False,ignore_impurity:bool=False",
    .run_module = run,
    .doc = "drop lets whose variable is unused and whose value is pure; inline_once inlines "
           "single-use pure values",
};
