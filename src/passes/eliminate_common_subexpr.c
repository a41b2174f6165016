/* eliminate_common_subexpr.c - EliminateCommonSubexpr (TVM's EliminateCommonSubexpr, opt level
 * 3, function pass): an operator call equal to an earlier one (same operator, same attributes
 * once defaults are filled in, same type arguments, and the same argument nodes after their own
 * merging, or scalar constants of equal value) becomes that earlier one; likewise a projection
 * of the same tuple node at the same index.
 *
 * Operators are pure, and equal argument nodes are one evaluation, so merging never drops or
 * moves an effect. What scoping adds to TVM's graph-only version: an earlier expression stands
 * for a later one only where it has run whenever the later one runs, so only from the same
 * scope or an enclosing one (never from a sibling if/match arm, never out of a function body).
 * An earlier call bound by a let stands for later ones through its variable (in the let's body);
 * one that is not is shared as a node, and never into another function's body (its value there
 * would belong to a different activation).
 *
 * Scopes: a let body, an if/match arm and a function body each open one; the nodes are numbered
 * by a first walk (an interval per scope, so "encloses" is two comparisons), and the candidates
 * are kept in a hash table keyed by (operator, attributes, argument nodes). docs/passes.md,
 * "EliminateCommonSubexpr". */
#include <string.h>

#include "ops/ops.h"
#include "passes/passes.h"

/* ---- scopes ------------------------------------------------------------------------------ */

typedef struct Scope {
    uint32_t tin, tout; /* the walk's clock on entering and leaving: nesting is containment */
    uint32_t fn;        /* the scope of the function body this scope is in */
} Scope;

enum { OPENS_SCOPE = 1, OPENS_FUNCTION = 2 };

typedef struct Cse {
    Ctx *ctx;
    Vec(Scope) scopes;
    Vec(uint32_t) open; /* the walk's stack of scopes */
    uint32_t clock;
    PtrMap opens;     /* node -> OPENS_*: it is a let body, an arm, a function body */
    PtrMap pushed;    /* node -> non-NULL when the walk opened a scope at it */
    PtrMap scope_of;  /* original node -> its scope + 1 */
    PtrMap let_of;    /* original let value -> its Let */
    PtrMap table;     /* hash key -> first Cand of the bucket */
    Arena arena;      /* the candidates */
    const char *skip; /* fskip: operator names never merged, "[a, b]" (or NULL) */
} Cse;

static void opens(Cse *s, Expr *e, uintptr_t how) {
    if (!ptrmap_has(&s->opens, e)) ptrmap_put(&s->opens, e, (void *)how);
}

static VisitResult scope_pre(Visitor *v, Expr *e) {
    Cse *s = v->state;
    uintptr_t how = (uintptr_t)ptrmap_get(&s->opens, e);
    if (how || s->open.len == 0) { /* e (or the root) opens a scope */
        uint32_t id = (uint32_t)s->scopes.len;
        bool fn = how == OPENS_FUNCTION || s->open.len == 0;
        Scope sc = {s->clock++, UINT32_MAX, fn ? id : s->scopes.data[vec_last(&s->open)].fn};
        vec_push(&s->scopes, sc);
        vec_push(&s->open, id);
        ptrmap_put(&s->pushed, e, e);
    }
    ptrmap_put(&s->scope_of, e, (void *)(uintptr_t)(vec_last(&s->open) + 1));
    switch ((ExprKind)e->kind) {
    case EXPR_LET:
        opens(s, AS_LET(e)->body, OPENS_SCOPE);
        ptrmap_put(&s->let_of, AS_LET(e)->value, e);
        break;
    case EXPR_IF:
        opens(s, AS_IF(e)->then_branch, OPENS_SCOPE);
        opens(s, AS_IF(e)->else_branch, OPENS_SCOPE);
        break;
    case EXPR_MATCH:
        for (uint32_t i = 0; i < AS_MATCH(e)->n_clauses; i++)
            opens(s, AS_MATCH(e)->clauses[i].rhs, OPENS_SCOPE);
        break;
    case EXPR_FUNCTION: opens(s, AS_FUNCTION(e)->body, OPENS_FUNCTION); break;
    default: break;
    }
    return VISIT_CONTINUE;
}

static void scope_post(Visitor *v, Expr *e) {
    Cse *s = v->state;
    if (!ptrmap_has(&s->pushed, e)) return;
    s->scopes.data[vec_last(&s->open)].tout = s->clock++;
    s->open.len--;
}

/* Does scope a enclose (or equal) scope b? */
static bool encloses(const Cse *s, uint32_t a, uint32_t b) {
    const Scope *x = &s->scopes.data[a], *y = &s->scopes.data[b];
    return x->tin <= y->tin && y->tout <= x->tout;
}

static uint32_t scope_of(const Cse *s, Expr *orig) {
    uintptr_t k = (uintptr_t)ptrmap_get(&s->scope_of, orig);
    RLY_CHECK(k != 0, "EliminateCommonSubexpr: a node outside the walk");
    return (uint32_t)(k - 1);
}

/* ---- candidates ----------------------------------------------------------------------------- */

typedef struct Cand {
    Expr *node;              /* the rewritten call or projection */
    Expr *repl;              /* what stands for a later equal one: node, or the let variable */
    uint32_t scope;          /* where repl may be used: this scope and those inside it */
    const AttrValue **attrs; /* a call's attributes with defaults filled in */
    struct Cand *next;       /* the rest of the bucket */
} Cand;

static bool scalar_const(const Expr *e) {
    return e->kind == EXPR_CONSTANT && ((const Constant *)e)->ndim == 0;
}

/* Two atoms are equal as nodes, or as scalar constants of one value (TVM's IsEqualScalar). */
static bool same_atom(Expr *a, Expr *b) {
    if (a == b) return true;
    if (!scalar_const(a) || !scalar_const(b)) return false;
    const Constant *x = (const Constant *)a, *y = (const Constant *)b;
    return x->dtype == y->dtype && x->nbytes == y->nbytes &&
           memcmp(x->data, y->data, x->nbytes) == 0;
}

static uint64_t atom_hash(Expr *a) {
    if (!scalar_const(a)) return (uint64_t)(uintptr_t)a;
    const Constant *c = (const Constant *)a;
    return sup_hash_bytes(c->data, c->nbytes, c->dtype);
}

/* Arguments are equal atoms, or tuples of pairwise equal atoms (TVM's IsEquivalent: the tuple
 * of concatenate's operands is a new node at each call). */
static bool same_arg(Expr *a, Expr *b) {
    if (a->kind != EXPR_TUPLE || b->kind != EXPR_TUPLE) return same_atom(a, b);
    Tuple *x = AS_TUPLE(a), *y = AS_TUPLE(b);
    if (x->n != y->n) return false;
    for (uint32_t i = 0; i < x->n; i++)
        if (!same_atom(x->fields[i], y->fields[i])) return false;
    return true;
}

static uint64_t arg_hash(Expr *a) {
    if (a->kind != EXPR_TUPLE) return atom_hash(a);
    uint64_t h = sup_hash_mix(0x7u, AS_TUPLE(a)->n);
    for (uint32_t i = 0; i < AS_TUPLE(a)->n; i++)
        h = sup_hash_mix(h, atom_hash(AS_TUPLE(a)->fields[i]));
    return h;
}

static bool attr_equal(const AttrValue *a, const AttrValue *b) {
    if (a == b) return true;
    if (a == NULL || b == NULL || a->kind != b->kind) return false;
    switch ((AttrKind)a->kind) {
    case ATTR_INT: return a->i == b->i;
    case ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case ATTR_BOOL: return a->b == b->b;
    case ATTR_STR: return strcmp(a->s, b->s) == 0;
    case ATTR_NONE: return true;
    case ATTR_TYPE: return a->type == b->type;
    case ATTR_EXPR: return a->expr == b->expr;
    case ATTR_LIST:
        if (a->list.n != b->list.n) return false;
        for (uint32_t i = 0; i < a->list.n; i++) /* attribute nesting is a few levels */
            if (!attr_equal(a->list.items[i], b->list.items[i])) return false;
        return true;
    }
    return false;
}

static uint64_t attr_hash(const AttrValue *a) {
    if (a == NULL) return 0;
    uint64_t h = sup_hash_mix(0x5eed, a->kind);
    switch ((AttrKind)a->kind) {
    case ATTR_INT: return sup_hash_mix(h, (uint64_t)a->i);
    case ATTR_FLOAT: return sup_hash_bytes(&a->f, sizeof a->f, h);
    case ATTR_BOOL: return sup_hash_mix(h, a->b);
    case ATTR_STR: return sup_hash_bytes(a->s, strlen(a->s), h);
    case ATTR_NONE: return h;
    case ATTR_TYPE: return sup_hash_mix(h, (uint64_t)(uintptr_t)a->type);
    case ATTR_EXPR: return sup_hash_mix(h, (uint64_t)(uintptr_t)a->expr);
    case ATTR_LIST:
        for (uint32_t i = 0; i < a->list.n; i++)
            h = sup_hash_mix(h, attr_hash(a->list.items[i]));
        return h;
    }
    return h;
}

/* Is `name` in the fskip list "[a, b, ...]"? */
static bool skipped(const char *list, const char *name) {
    if (list == NULL) return false;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n) {
        char before = p == list ? '[' : p[-1], after = p[n];
        if (strchr("[, \t\"'", before) && strchr("], \t\"'", after)) return true;
    }
    return false;
}

/* Operators whose calls are never merged: those with an effect (debug prints, trap fails: two
 * of them are two events) and a user's (its kernel may do anything), and the fskip list. */
static const OpDef *mergeable_op(const Cse *s, Expr *op) {
    if (op->kind != EXPR_OP) return NULL; /* a function or closure call may have effects */
    const OpDef *def = op_def_of(op);
    if (def == NULL || def->id >= OP_ID_COUNT || def->id == OP_ID_DEBUG || def->id == OP_ID_TRAP ||
        skipped(s->skip, def->name))
        return NULL;
    return def;
}

/* The candidate key of e (a rewritten call or projection), with a call's bound attributes;
 * false when e is not a candidate. */
static bool key_of(Cse *s, Expr *e, uint64_t *key, const AttrValue ***attrs) {
    *attrs = NULL;
    if (e->kind == EXPR_TUPLE_GET_ITEM) {
        if (skipped(s->skip, "TupleGetItem")) return false; /* fskip may name projections */
        TupleGetItem *g = AS_TUPLE_GET_ITEM(e);
        *key = sup_hash_mix(sup_hash_mix(0x7e, (uint64_t)(uintptr_t)g->tuple), g->index);
        return true;
    }
    if (e->kind != EXPR_CALL) return false;
    Call *c = AS_CALL(e);
    const OpDef *def = mergeable_op(s, c->op);
    if (def == NULL || c->n_args == 0) return false; /* TVM leaves calls without arguments */
    const AttrValue **vals = arena_array(&s->arena, def->n_attrs ? def->n_attrs : 1, sizeof *vals);
    StrBuf msg = {0};
    Span where;
    bool ok = op_bind_attrs(def, c->attrs, vals, &msg, &where);
    sb_free(&msg);
    if (!ok) return false;
    uint64_t h = sup_hash_mix(0xca11, (uint64_t)(uintptr_t)c->op);
    for (uint32_t i = 0; i < def->n_attrs; i++)
        h = sup_hash_mix(h, attr_hash(vals[i]));
    for (uint32_t i = 0; i < c->n_args; i++)
        h = sup_hash_mix(h, arg_hash(c->args[i]));
    for (uint32_t i = 0; i < c->n_type_args; i++)
        h = sup_hash_mix(h, (uint64_t)(uintptr_t)c->type_args[i]);
    *key = h;
    *attrs = vals;
    return true;
}

static bool same(const Cand *k, Expr *e, const AttrValue **attrs) {
    Expr *n = k->node;
    if (n->kind != e->kind) return false;
    if (e->kind == EXPR_TUPLE_GET_ITEM)
        return AS_TUPLE_GET_ITEM(n)->tuple == AS_TUPLE_GET_ITEM(e)->tuple &&
               AS_TUPLE_GET_ITEM(n)->index == AS_TUPLE_GET_ITEM(e)->index;
    Call *a = AS_CALL(n), *b = AS_CALL(e);
    if (a->op != b->op || a->n_args != b->n_args || a->n_type_args != b->n_type_args) return false;
    for (uint32_t i = 0; i < a->n_args; i++)
        if (!same_arg(a->args[i], b->args[i])) return false;
    for (uint32_t i = 0; i < a->n_type_args; i++)
        if (a->type_args[i] != b->type_args[i]) return false;
    const OpDef *def = op_def_of(a->op);
    for (uint32_t i = 0; i < def->n_attrs; i++)
        if (!attr_equal(k->attrs[i], attrs[i])) return false;
    return true;
}

static Expr *cse_post(Rewriter *rw, Expr *orig, Expr *e) {
    Cse *s = rw->state;
    e = pass_rebuild(rw, orig, e);
    uint64_t key;
    const AttrValue **attrs;
    if (!key_of(s, e, &key, &attrs)) return e;
    uint32_t here = scope_of(s, orig);
    void *slot = (void *)(uintptr_t)(key | 1); /* a non-NULL pointer key */
    Cand *first = ptrmap_get(&s->table, slot);
    for (Cand *k = first; k; k = k->next) {
        bool var = k->repl->kind == EXPR_VAR;
        if (encloses(s, k->scope, here) && k->repl->checked_type == e->checked_type &&
            (var || s->scopes.data[k->scope].fn == s->scopes.data[here].fn) && same(k, e, attrs))
            return k->repl;
    }
    Cand *k = arena_alloc(&s->arena, sizeof *k);
    *k = (Cand){e, e, here, attrs, first};
    /* A let's value also stands for later ones through the let's variable, in the let's body
     * (met first in the bucket, so preferred there). */
    Let *l = ptrmap_get(&s->let_of, orig);
    if (l && l->value == orig && ptrmap_has(&s->pushed, l->body)) {
        Cand *kv = arena_alloc(&s->arena, sizeof *kv);
        *kv = (Cand){e, &l->var->base, scope_of(s, l->body), attrs, k};
        k = kv;
    }
    ptrmap_put(&s->table, slot, k);
    return e;
}

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    const char *skip = pass_arg_str(pc, "fskip");
    Cse s = {.ctx = pc->ctx, .skip = strcmp(skip, "None") == 0 ? NULL : skip};
    Visitor v = {scope_pre, scope_post, &s};
    ir_visit(&v, e);
    Rewriter rw = {.ctx = pc->ctx, .post = cse_post, .state = &s};
    Expr *r = ir_rewrite(&rw, e);
    ir_rewriter_free(&rw);
    vec_free(&s.scopes);
    vec_free(&s.open);
    ptrmap_free(&s.opens);
    ptrmap_free(&s.pushed);
    ptrmap_free(&s.scope_of);
    ptrmap_free(&s.let_of);
    ptrmap_free(&s.table);
    arena_free(&s.arena);
    return r;
}

const PassDef pass_eliminate_common_subexpr = {
    .name = "EliminateCommonSubexpr",
    .opt_level = 3,
    .kind = PASS_FUNCTION,
    .params = "fskip:str=None",
    .run_expr = run,
    .doc = "merge equal operator calls and tuple projections where the earlier one is in scope",
};
