/* visit.c - the traversal engine: the child structure of every node kind (the one place that
 * knows it), the read-only Visitor and the Rewriter. Both walk with an explicit stack, visit a
 * shared node once, and never recurse over expression depth. */
#include "ir/ir.h"

_Static_assert(EXPR_KIND_COUNT == 15, "update ir_expr_n_children / ir_expr_child");

uint32_t ir_expr_n_children(const Expr *e) {
    switch ((ExprKind)e->kind) {
    case EXPR_VAR:
    case EXPR_GLOBAL_VAR:
    case EXPR_CONSTANT:
    case EXPR_CONSTRUCTOR:
    case EXPR_OP: return 0;
    case EXPR_TUPLE: return ((const Tuple *)e)->n;
    case EXPR_TUPLE_GET_ITEM: return 1;
    case EXPR_LET: return 3;
    case EXPR_FUNCTION: return ((const Function *)e)->n_params + 1;
    case EXPR_CALL: return ((const Call *)e)->n_args + 1;
    case EXPR_IF: return 3;
    case EXPR_MATCH: return ((const Match *)e)->n_clauses + 1;
    case EXPR_REF_CREATE:
    case EXPR_REF_READ: return 1;
    case EXPR_REF_WRITE: return 2;
    case EXPR_KIND_COUNT: break;
    }
    RLY_UNREACHABLE();
}

Expr *ir_expr_child(const Expr *e, uint32_t i) {
    switch ((ExprKind)e->kind) {
    case EXPR_TUPLE: return ((const Tuple *)e)->fields[i];
    case EXPR_TUPLE_GET_ITEM: return ((const TupleGetItem *)e)->tuple;
    case EXPR_LET: {
        const Let *l = (const Let *)e;
        return i == 0 ? &l->var->base : i == 1 ? l->value : l->body;
    }
    case EXPR_FUNCTION: {
        const Function *f = (const Function *)e;
        return i < f->n_params ? &f->params[i]->base : f->body;
    }
    case EXPR_CALL: {
        const Call *c = (const Call *)e;
        return i == 0 ? c->op : c->args[i - 1];
    }
    case EXPR_IF: {
        const If *x = (const If *)e;
        return i == 0 ? x->cond : i == 1 ? x->then_branch : x->else_branch;
    }
    case EXPR_MATCH: {
        const Match *m = (const Match *)e;
        return i == 0 ? m->data : m->clauses[i - 1].rhs;
    }
    case EXPR_REF_CREATE: return ((const RefCreate *)e)->value;
    case EXPR_REF_READ: return ((const RefRead *)e)->ref;
    case EXPR_REF_WRITE: return i == 0 ? ((const RefWrite *)e)->ref : ((const RefWrite *)e)->value;
    default: break;
    }
    RLY_UNREACHABLE();
}

static Var *as_binder(Expr *e) {
    RLY_CHECK(e->kind == EXPR_VAR, "a binder was rewritten into a %s", ir_expr_kind_names[e->kind]);
    return (Var *)e;
}

Expr *ir_expr_with_children(Ctx *ctx, Expr *e, Expr *const *k) {
    Expr *r;
    switch ((ExprKind)e->kind) {
    case EXPR_TUPLE: r = ir_tuple_new(ctx, ((Tuple *)e)->n, k, e->span); break;
    case EXPR_TUPLE_GET_ITEM:
        r = ir_tuple_get_item_new(ctx, k[0], ((TupleGetItem *)e)->index, e->span);
        break;
    case EXPR_LET: r = ir_let_new(ctx, as_binder(k[0]), k[1], k[2], e->span); break;
    case EXPR_FUNCTION: {
        Function *f = (Function *)e;
        Var **params = f->n_params ? arena_array(&ctx->arena, f->n_params, sizeof(Var *)) : NULL;
        for (uint32_t i = 0; i < f->n_params; i++)
            params[i] = as_binder(k[i]);
        r = ir_function_new(ctx, f->n_params, params, k[f->n_params], f->ret_type, f->n_tparams,
                            f->tparams, f->attrs, e->span);
        break;
    }
    case EXPR_CALL: {
        Call *c = (Call *)e;
        r = ir_call_new(ctx, k[0], c->n_args, k + 1, c->attrs, c->n_type_args, c->type_args,
                        e->span);
        break;
    }
    case EXPR_IF: r = ir_if_new(ctx, k[0], k[1], k[2], e->span); break;
    case EXPR_MATCH: {
        Match *m = (Match *)e;
        Clause *cl = arena_array(&ctx->arena, m->n_clauses ? m->n_clauses : 1, sizeof(Clause));
        for (uint32_t i = 0; i < m->n_clauses; i++) {
            cl[i] = m->clauses[i];
            cl[i].rhs = k[i + 1];
        }
        r = ir_match_new(ctx, k[0], m->n_clauses, cl, m->complete, e->span);
        break;
    }
    case EXPR_REF_CREATE: r = ir_ref_create_new(ctx, k[0], e->span); break;
    case EXPR_REF_READ: r = ir_ref_read_new(ctx, k[0], e->span); break;
    case EXPR_REF_WRITE: r = ir_ref_write_new(ctx, k[0], k[1], e->span); break;
    default: return e; /* leaves have no children */
    }
    return r;
}

/* ---- Visitor ----------------------------------------------------------------------------------
 */

typedef struct VisitFrame {
    Expr *e;
    uint32_t next; /* next child to push */
} VisitFrame;

/* The set of visited nodes: an open-addressing hash set of node ids (ids are dense per
 * context, but a visit of a small function late in a big context must cost its own size, not the
 * context's node count, so no bitmap indexed from 0). Slot value 0 is empty; ids are stored + 1. */
typedef struct Seen {
    uint32_t *slots;
    size_t cap, len; /* cap a power of two, len <= cap / 2 */
} Seen;

static size_t seen_home(uint32_t key, size_t cap) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static bool seen_test_set(Seen *s, uint32_t id) {
    uint32_t key = id + 1;
    if (2 * (s->len + 1) > s->cap) {
        size_t ncap = s->cap ? 2 * s->cap : 64;
        uint32_t *ns = sup_calloc(ncap, sizeof *ns);
        for (size_t i = 0; i < s->cap; i++) {
            uint32_t k = s->slots[i];
            if (k == 0) continue;
            size_t h = seen_home(k, ncap);
            while (ns[h])
                h = (h + 1) & (ncap - 1);
            ns[h] = k;
        }
        free(s->slots);
        s->slots = ns;
        s->cap = ncap;
    }
    size_t h = seen_home(key, s->cap);
    while (s->slots[h]) {
        if (s->slots[h] == key) return true;
        h = (h + 1) & (s->cap - 1);
    }
    s->slots[h] = key;
    s->len++;
    return false;
}

bool ir_visit(Visitor *v, Expr *root) {
    Seen seen = {0};
    Vec(VisitFrame) stack = {0};
    bool ok = true;
    VisitFrame f0 = {root, 0};
    vec_push(&stack, f0);
    seen_test_set(&seen, root->id);
    if (v->pre) {
        VisitResult r = v->pre(v, root);
        if (r == VISIT_STOP) ok = false;
        if (r != VISIT_CONTINUE) stack.len = 0;
    }
    while (ok && stack.len) {
        VisitFrame *top = &vec_last(&stack);
        Expr *e = top->e;
        if (top->next < ir_expr_n_children(e)) {
            Expr *c = ir_expr_child(e, top->next++);
            if (seen_test_set(&seen, c->id)) continue;
            VisitResult r = v->pre ? v->pre(v, c) : VISIT_CONTINUE;
            if (r == VISIT_STOP) {
                ok = false;
                break;
            }
            if (r == VISIT_SKIP) continue;
            VisitFrame f = {c, 0};
            vec_push(&stack, f);
            continue;
        }
        stack.len--;
        if (v->post) v->post(v, e);
    }
    vec_free(&stack);
    free(seen.slots);
    return ok;
}

/* ---- Rewriter ---------------------------------------------------------------------------------
 */

typedef struct RwFrame {
    Expr *e;
    uint32_t next;
} RwFrame;

static Expr *finish(Rewriter *rw, Expr *e) {
    uint32_t n = ir_expr_n_children(e);
    Expr *small[8], **kids = n <= 8 ? small : sup_malloc(sup_mul(n, sizeof(Expr *)));
    bool changed = false;
    for (uint32_t i = 0; i < n; i++) {
        Expr *c = ir_expr_child(e, i);
        kids[i] = ptrmap_get(&rw->memo, c);
        RLY_ASSERT(kids[i] != NULL);
        changed |= kids[i] != c;
    }
    Expr *r = changed ? ir_expr_with_children(rw->ctx, e, kids) : e;
    if (kids != small) free(kids);
    return rw->post ? rw->post(rw, e, r) : r;
}

Expr *ir_rewrite(Rewriter *rw, Expr *root) {
    Expr *done = ptrmap_get(&rw->memo, root);
    if (done) return done;
    Vec(RwFrame) stack = {0};
    RwFrame f0 = {root, 0};
    vec_push(&stack, f0);
    while (stack.len) {
        RwFrame *top = &vec_last(&stack);
        Expr *e = top->e;
        if (top->next == 0 && rw->pre) {
            Expr *r = rw->pre(rw, e);
            if (r != NULL) {
                ptrmap_put(&rw->memo, e, r);
                stack.len--;
                continue;
            }
        }
        uint32_t n = ir_expr_n_children(e);
        bool pushed = false;
        while (top->next < n) {
            Expr *c = ir_expr_child(e, top->next++);
            if (!ptrmap_has(&rw->memo, c)) {
                RwFrame f = {c, 0};
                vec_push(&stack, f); /* may move the stack: top is stale now */
                pushed = true;
                break;
            }
        }
        if (pushed) continue;
        ptrmap_put(&rw->memo, e, finish(rw, e));
        stack.len--;
    }
    vec_free(&stack);
    return ptrmap_get(&rw->memo, root);
}

Module *ir_rewrite_module(Rewriter *rw, Module *m) {
    Module *out = ir_module_new(m->ctx);
    /* definitions are shared: globals, ADTs and constructors keep their identity */
    for (size_t i = 0; i < m->types.len; i++) {
        TypeData *td = m->types.data[i];
        vec_push(&out->types, td);
        strmap_put(&out->type_by_name, td->header->name, strlen(td->header->name), td);
        for (uint32_t j = 0; j < td->n_ctors; j++)
            strmap_put(&out->ctor_by_name, td->ctors[j]->name, strlen(td->ctors[j]->name),
                       td->ctors[j]);
    }
    out->next_tag = m->next_tag;
    for (size_t i = 0; i < m->funcs.len; i++) {
        FuncDef d = m->funcs.data[i];
        if (d.func) {
            Expr *r = ir_rewrite(rw, &d.func->base);
            RLY_CHECK(r->kind == EXPR_FUNCTION, "a global function was rewritten into a %s",
                      ir_expr_kind_names[r->kind]);
            d.func = (Function *)r;
        }
        vec_push(&out->funcs, d);
        strmap_put(&out->global_by_name, d.gvar->name, strlen(d.gvar->name),
                   (void *)(uintptr_t)out->funcs.len);
    }
    out->is_expr = m->is_expr;
    if (m->expr) out->expr = ir_rewrite(rw, m->expr);
    for (size_t i = 0; i < m->meta.len; i++)
        vec_push(&out->meta, m->meta.data[i]);
    return out;
}

void ir_rewriter_free(Rewriter *rw) { ptrmap_free(&rw->memo); }
