/* analysis.c - variable analyses: free and bound variables, and the well-formedness check
 * (each Var bound once, each use inside its binder's scope). All walks are iterative. */
#include "ir/ir.h"

/* ---- free and bound variables ---------------------------------------------------------------- */

typedef struct VarsState {
    PtrVec seen;  /* every Var node, in pre-order */
    PtrMap bound; /* Var -> itself */
    PtrVec bound_order;
} VarsState;

static void bind(VarsState *s, Var *v) {
    if (!ptrmap_has(&s->bound, v)) {
        ptrmap_put(&s->bound, v, v);
        vec_push(&s->bound_order, v);
    }
}

/* Variables named in attribute values (attributes hold atoms only, and are not children). */
static void attr_vars(VarsState *s, const AttrValue *a) {
    if (a->kind == ATTR_EXPR && a->expr->kind == EXPR_VAR) vec_push(&s->seen, a->expr);
    if (a->kind == ATTR_LIST)
        for (uint32_t i = 0; i < a->list.n; i++)
            attr_vars(s, a->list.items[i]);
}

static VisitResult vars_pre(Visitor *vis, Expr *e) {
    VarsState *s = vis->state;
    const Attrs *at = e->kind == EXPR_CALL       ? ((Call *)e)->attrs
                      : e->kind == EXPR_FUNCTION ? ((Function *)e)->attrs
                                                 : NULL;
    for (uint32_t i = 0; at && i < at->n; i++)
        attr_vars(s, at->entries[i].value);
    switch (e->kind) {
    case EXPR_VAR: vec_push(&s->seen, e); break;
    case EXPR_LET: bind(s, ((Let *)e)->var); break;
    case EXPR_FUNCTION:
        for (uint32_t i = 0; i < ((Function *)e)->n_params; i++)
            bind(s, ((Function *)e)->params[i]);
        break;
    case EXPR_MATCH: {
        Match *m = (Match *)e;
        PtrVec pv = {0};
        for (uint32_t i = 0; i < m->n_clauses; i++)
            ir_pattern_vars(m->clauses[i].lhs, &pv);
        for (size_t i = 0; i < pv.len; i++)
            bind(s, pv.data[i]);
        vec_free(&pv);
        break;
    }
    default: break;
    }
    return VISIT_CONTINUE;
}

static void collect_vars(Expr *e, VarsState *s) {
    Visitor v = {.pre = vars_pre, .state = s};
    ir_visit(&v, e);
}

static void vars_state_free(VarsState *s) {
    vec_free(&s->seen);
    vec_free(&s->bound_order);
    ptrmap_free(&s->bound);
}

void ir_free_vars(Expr *e, PtrVec *out) {
    VarsState s = {0};
    collect_vars(e, &s);
    PtrMap emitted = {0};
    for (size_t i = 0; i < s.seen.len; i++) {
        Var *v = s.seen.data[i];
        if (ptrmap_has(&s.bound, v) || ptrmap_has(&emitted, v)) continue;
        ptrmap_put(&emitted, v, v);
        vec_push(out, v);
    }
    ptrmap_free(&emitted);
    vars_state_free(&s);
}

void ir_bound_vars(Expr *e, PtrVec *out) {
    VarsState s = {0};
    collect_vars(e, &s);
    for (size_t i = 0; i < s.bound_order.len; i++)
        vec_push(out, s.bound_order.data[i]);
    vars_state_free(&s);
}

/* ---- well-formedness ----------------------------------------------------------------------- */

typedef struct WfFrame {
    Expr *e;
    uint32_t state;
} WfFrame;
typedef Vec(WfFrame) WfStack;

typedef struct Wf {
    Diags *ds;
    PtrMap binder;   /* Var -> the Expr that binds it (Let, Function, Match) */
    PtrMap in_scope; /* Var -> (void*)1 while in scope, NULL otherwise */
    PtrMap visited;  /* shared subexpressions are checked once */
    bool allow_free; /* a bare expression may have free variables */
    const char *where;
    bool ok;
} Wf;

static void wf_bind(Wf *w, Var *v, Expr *binder) {
    Expr *prev = ptrmap_get(&w->binder, v);
    if (prev != NULL && prev != binder) {
        diag_error(w->ds, v->base.span, "variable %%%s is bound more than once", v->name);
        diag_note(w->ds, prev->span, "first bound here");
        w->ok = false;
        return;
    }
    ptrmap_put(&w->binder, v, binder);
}

static void scope(Wf *w, Var *v, bool in) { ptrmap_put(&w->in_scope, v, in ? (void *)1 : NULL); }

static void wf_use(Wf *w, Var *v, PtrMap *all_bound) {
    if (ptrmap_get(&w->in_scope, v)) return;
    if (ptrmap_has(all_bound, v)) {
        diag_error(w->ds, v->base.span, "variable %%%s is used outside the scope that binds it",
                   v->name);
        w->ok = false;
    } else if (!w->allow_free) {
        diag_error(w->ds, v->base.span, "free variable %%%s in %s", v->name, w->where);
        w->ok = false;
    }
}

static void push(WfStack *st, Expr *e) {
    WfFrame f = {e, 0};
    vec_push(st, f);
}

static void wf_expr(Wf *w, Expr *root) {
    PtrVec bound = {0};
    ir_bound_vars(root, &bound);
    PtrMap all_bound = {0};
    for (size_t i = 0; i < bound.len; i++)
        ptrmap_put(&all_bound, bound.data[i], bound.data[i]);
    vec_free(&bound);

    WfStack st = {0};
    push(&st, root);
    while (st.len) {
        WfFrame *f = &vec_last(&st);
        Expr *e = f->e;
        uint32_t s = f->state++;
        if (s == 0 && e->kind != EXPR_VAR) {
            if (ptrmap_has(&w->visited, e)) {
                st.len--;
                continue;
            }
            ptrmap_put(&w->visited, e, e);
        }
        switch (e->kind) {
        case EXPR_VAR:
            wf_use(w, (Var *)e, &all_bound);
            st.len--;
            break;
        case EXPR_LET: {
            Let *l = (Let *)e;
            bool rec = l->value->kind == EXPR_FUNCTION;
            if (s == 0) {
                wf_bind(w, l->var, e);
                if (rec) scope(w, l->var, true);
                push(&st, l->value);
            } else if (s == 1) {
                scope(w, l->var, true);
                push(&st, l->body);
            } else {
                scope(w, l->var, false);
                st.len--;
            }
            break;
        }
        case EXPR_FUNCTION: {
            Function *fn = (Function *)e;
            if (s == 0) {
                for (uint32_t i = 0; i < fn->n_params; i++) {
                    wf_bind(w, fn->params[i], e);
                    scope(w, fn->params[i], true);
                }
                push(&st, fn->body);
            } else {
                for (uint32_t i = 0; i < fn->n_params; i++)
                    scope(w, fn->params[i], false);
                st.len--;
            }
            break;
        }
        case EXPR_MATCH: {
            Match *m = (Match *)e;
            if (s > 1) { /* leave the previous clause's scope */
                PtrVec pv = {0};
                ir_pattern_vars(m->clauses[s - 2].lhs, &pv);
                for (size_t i = 0; i < pv.len; i++)
                    scope(w, pv.data[i], false);
                vec_free(&pv);
            }
            if (s == 0) {
                push(&st, m->data);
            } else if (s <= m->n_clauses) {
                PtrVec pv = {0};
                ir_pattern_vars(m->clauses[s - 1].lhs, &pv);
                for (size_t i = 0; i < pv.len; i++) {
                    wf_bind(w, pv.data[i], e);
                    scope(w, pv.data[i], true);
                }
                vec_free(&pv);
                push(&st, m->clauses[s - 1].rhs);
            } else {
                st.len--;
            }
            break;
        }
        default: {
            uint32_t n = ir_expr_n_children(e);
            if (s < n)
                push(&st, ir_expr_child(e, s));
            else
                st.len--;
            break;
        }
        }
    }
    vec_free(&st);
    ptrmap_free(&all_bound);
}

bool ir_well_formed(Module *m) {
    Wf w = {.ds = &m->ctx->diags, .ok = true};
    StrBuf where = {0};
    for (size_t i = 0; i < m->funcs.len; i++) {
        FuncDef *d = &m->funcs.data[i];
        if (d->func == NULL) {
            diag_error(w.ds, d->gvar->base.span, "global @%s is used but never defined",
                       d->gvar->name);
            w.ok = false;
            continue;
        }
        where.len = 0;
        sb_printf(&where, "@%s", d->gvar->name);
        w.where = sb_cstr(&where);
        w.allow_free = false;
        wf_expr(&w, &d->func->base);
    }
    if (m->expr) {
        w.where = "the expression";
        w.allow_free = true;
        wf_expr(&w, m->expr);
    }
    sb_free(&where);
    ptrmap_free(&w.binder);
    ptrmap_free(&w.in_scope);
    ptrmap_free(&w.visited);
    return w.ok;
}
