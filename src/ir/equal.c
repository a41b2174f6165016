/* equal.c - structural equality up to alpha-equivalence. Local variables and type variables
 * are matched at their binding sites (let, fn params, patterns, type params); globals,
 * constructors, ADTs and operators are matched by name, so two modules parsed from the same
 * text are equal. Expressions are compared with an explicit stack of node pairs and a memo
 * (a DAG is compared once per node); types likewise (explicit stack, a memo of pairs: a type
 * can be a DAG whose tree is exponentially larger); patterns are small and compared
 * recursively. */
#include "ir/ir.h"

#include <stdio.h>

typedef struct Pair {
    Expr *a, *b;
    Expr *pa, *pb; /* the pair whose children these are (NULL at the top): where to say a
                      difference is when these have no place in the source (operators) */
} Pair;

typedef struct Eq {
    PtrMap vars, vars_rev;   /* bound and mapped free Vars: a -> b, b -> a */
    PtrMap tvars, tvars_rev; /* TypeVars */
    PtrMap memo;             /* a -> b once the pair has been pushed */
    Vec(Pair) work;
    bool map_free_vars;
    PtrMap type_memo;      /* pair of type ids -> 1 + the tvar_gen under which they were equal */
    uint64_t tvar_gen;     /* bumped whenever a TypeVar mapping changes */
    Expr *fail_a, *fail_b; /* the pair that differed */
    Expr *fail_pa, *fail_pb;
    Expr *cur_a, *cur_b; /* the pair being compared (the parent of what it pushes) */
} Eq;

static bool same_name(const char *a, const char *b) { return a == b || strcmp(a, b) == 0; }

static bool dims_equal(int64_t a, int64_t b) { return a == b; } /* same ctx: symbolic ids */

static bool type_eq(Eq *q, Type *a, Type *b);

static bool types_eq(Eq *q, uint32_t n, Type **a, uint32_t m, Type **b) {
    if (n != m) return false;
    for (uint32_t i = 0; i < n; i++)
        if (!type_eq(q, a[i], b[i])) return false;
    return true;
}

static bool bind_tvars(Eq *q, uint32_t n, TypeVar **a, uint32_t m, TypeVar **b) {
    if (n != m) return false;
    for (uint32_t i = 0; i < n; i++) {
        void *rb = ptrmap_get(&q->tvars_rev, b[i]);
        if (a[i]->tkind != b[i]->tkind || (rb != NULL && rb != a[i])) return false;
        if (rb == NULL || ptrmap_get(&q->tvars, a[i]) != b[i]) q->tvar_gen++;
        ptrmap_put(&q->tvars, a[i], b[i]); /* (re)bound here, as bind_var does */
        ptrmap_put(&q->tvars_rev, b[i], a[i]);
    }
    return true;
}

/* The children compared pairwise: ir_type_child's, then a function's constraints. */
static uint32_t eq_n_children(Type *t) {
    uint32_t n = ir_type_n_children(t);
    return t->kind == TYPE_FUNC ? n + ((FuncType *)t)->n_constraints : n;
}
static Type *eq_child(Type *t, uint32_t i) {
    uint32_t n = ir_type_n_children(t);
    return i < n ? ir_type_child(t, i) : ((FuncType *)t)->constraints[i - n];
}

/* The node-local part of a type comparison (children are compared by type_eq's loop). */
static bool type_node_eq(Eq *q, Type *a, Type *b) {
    if (a->kind != b->kind) return false;
    switch ((TypeKind)a->kind) {
    case TYPE_TENSOR: {
        TensorType *x = (TensorType *)a, *y = (TensorType *)b;
        if (x->dtype != y->dtype || x->ndim != y->ndim) return false;
        for (uint32_t i = 0; i < x->ndim; i++)
            if (!dims_equal(x->shape[i], y->shape[i])) return false;
        return true;
    }
    case TYPE_TUPLE: return ((TupleType *)a)->n == ((TupleType *)b)->n;
    case TYPE_FUNC: {
        FuncType *x = (FuncType *)a, *y = (FuncType *)b;
        return x->n_params == y->n_params && x->n_constraints == y->n_constraints &&
               bind_tvars(q, x->n_tparams, x->tparams, y->n_tparams, y->tparams);
    }
    case TYPE_VAR: {
        void *m = ptrmap_get(&q->tvars, a);
        if (m) return m == b;
        return a == b && !ptrmap_has(&q->tvars_rev, b);
    }
    case TYPE_GLOBAL_VAR: return same_name(((GlobalTypeVar *)a)->name, ((GlobalTypeVar *)b)->name);
    case TYPE_CALL: return ((TypeCall *)a)->n_args == ((TypeCall *)b)->n_args;
    case TYPE_REF: return true;
    case TYPE_INCOMPLETE: return ((IncompleteType *)a)->tkind == ((IncompleteType *)b)->tkind;
    case TYPE_RELATION: {
        TypeRelation *x = (TypeRelation *)a, *y = (TypeRelation *)b;
        return same_name(x->name, y->name) && x->n_inputs == y->n_inputs && x->n_args == y->n_args;
    }
    case TYPE_KIND_COUNT: break;
    }
    return false;
}

typedef struct TFrame {
    Type *a, *b;
    uint32_t next, n;
    uint64_t gen; /* tvar_gen when the pair was entered */
} TFrame;

#if UINTPTR_MAX > 0xffffffffu
#define TYPE_PAIR_MEMO 1
/* a's are all of one context and b's of one, so a pair of ids names a pair of nodes */
static void *type_pair_key(Type *a, Type *b) {
    return (void *)(uintptr_t)(((uint64_t)a->id << 32) | b->id); /* ids start at 1 */
}
#else
#define TYPE_PAIR_MEMO 0 /* no room for two ids in a pointer key: no memo */
#endif

/* Iterative; a pair found equal is not compared again while no TypeVar mapping changes, so a
 * DAG-shaped type costs its distinct pairs of nodes. */
static bool type_eq(Eq *q, Type *a0, Type *b0) {
    if (a0 == NULL || b0 == NULL) return a0 == b0;
    Vec(TFrame) st = {0};
    bool ok = true;
    TFrame f0 = {a0, b0, 0, UINT32_MAX, 0};
    vec_push(&st, f0);
    while (st.len && ok) {
        TFrame *f = &vec_last(&st);
        if (f->n == UINT32_MAX) {
#if TYPE_PAIR_MEMO
            uintptr_t g = (uintptr_t)ptrmap_get(&q->type_memo, type_pair_key(f->a, f->b));
            if (g == q->tvar_gen + 1) {
                st.len--;
                continue;
            }
#endif
            f->gen = q->tvar_gen;
            if (!type_node_eq(q, f->a, f->b) || eq_n_children(f->a) != eq_n_children(f->b)) {
                ok = false;
                break;
            }
            f->n = eq_n_children(f->a);
        }
        if (f->next < f->n) {
            TFrame c = {eq_child(f->a, f->next), eq_child(f->b, f->next), 0, UINT32_MAX, 0};
            f->next++;
            vec_push(&st, c);
            continue;
        }
#if TYPE_PAIR_MEMO
        if (f->gen == q->tvar_gen) /* no mapping changed inside: the result stands */
            ptrmap_put(&q->type_memo, type_pair_key(f->a, f->b), (void *)(uintptr_t)(f->gen + 1));
#endif
        st.len--;
    }
    vec_free(&st);
    return ok;
}

static void push_pair(Eq *q, Expr *a, Expr *b) {
    Pair p = {a, b, q->cur_a, q->cur_b};
    vec_push(&q->work, p);
}

static bool attr_eq(Eq *q, const AttrValue *a, const AttrValue *b) {
    if (a->kind != b->kind) return false;
    switch ((AttrKind)a->kind) {
    case ATTR_INT: return a->i == b->i && a->dtype == b->dtype;
    case ATTR_FLOAT: return a->dtype == b->dtype && memcmp(&a->f, &b->f, sizeof(double)) == 0;
    case ATTR_BOOL: return a->b == b->b;
    case ATTR_STR: return same_name(a->s, b->s);
    case ATTR_NONE: return true;
    case ATTR_TYPE: return type_eq(q, a->type, b->type);
    case ATTR_EXPR: push_pair(q, a->expr, b->expr); return true;
    case ATTR_LIST:
        if (a->list.n != b->list.n) return false;
        for (uint32_t i = 0; i < a->list.n; i++)
            if (!attr_eq(q, a->list.items[i], b->list.items[i])) return false;
        return true;
    }
    return false;
}

static bool attrs_eq(Eq *q, const Attrs *a, const Attrs *b) {
    uint32_t n = a ? a->n : 0, m = b ? b->n : 0;
    if (n != m) return false;
    for (uint32_t i = 0; i < n; i++)
        if (!same_name(a->entries[i].key, b->entries[i].key) ||
            !attr_eq(q, a->entries[i].value, b->entries[i].value))
            return false;
    return true;
}

/* At a binding site the mapping is (re)established: a subexpression shared in one term may be
 * printed, and so re-parsed, as two copies in the other, whose binders are distinct. */
static bool bind_var(Eq *q, Var *a, Var *b) {
    void *rb = ptrmap_get(&q->vars_rev, b);
    if (rb != NULL && rb != a) return false;
    ptrmap_put(&q->vars, a, b);
    ptrmap_put(&q->vars_rev, b, a);
    return type_eq(q, a->ann, b->ann);
}

static bool ctor_eq(const Constructor *a, const Constructor *b) {
    return same_name(a->name, b->name) && a->n_inputs == b->n_inputs &&
           same_name(a->belong_to->name, b->belong_to->name);
}

static bool pattern_eq(Eq *q, Pattern *a, Pattern *b) {
    if (a->kind != b->kind || a->n != b->n) return false;
    if (a->kind == PAT_VAR) return bind_var(q, a->var, b->var);
    if (a->kind == PAT_CTOR && !ctor_eq(a->ctor, b->ctor)) return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (!pattern_eq(q, a->pats[i], b->pats[i])) return false;
    return true;
}

/* Compare the node-local parts of a and b, bind their binders, and push child pairs. */
static bool node_eq(Eq *q, Expr *a, Expr *b) {
    if (a->kind != b->kind) return false;
    switch ((ExprKind)a->kind) {
    case EXPR_VAR: {
        Var *x = (Var *)a, *y = (Var *)b;
        void *m = ptrmap_get(&q->vars, x);
        if (m) return m == y;
        if (ptrmap_has(&q->vars_rev, y)) return false;
        if (q->map_free_vars) return bind_var(q, x, y);
        return x == y;
    }
    case EXPR_GLOBAL_VAR: return same_name(((GlobalVar *)a)->name, ((GlobalVar *)b)->name);
    case EXPR_CONSTANT: {
        Constant *x = (Constant *)a, *y = (Constant *)b;
        return x->dtype == y->dtype && x->ndim == y->ndim &&
               (x->ndim == 0 || memcmp(x->shape, y->shape, x->ndim * sizeof(int64_t)) == 0) &&
               x->nbytes == y->nbytes &&
               (x->nbytes == 0 || memcmp(x->data, y->data, x->nbytes) == 0);
    }
    case EXPR_TUPLE:
        if (((Tuple *)a)->n != ((Tuple *)b)->n) return false;
        break;
    case EXPR_TUPLE_GET_ITEM:
        if (((TupleGetItem *)a)->index != ((TupleGetItem *)b)->index) return false;
        break;
    case EXPR_LET:
        if (!bind_var(q, ((Let *)a)->var, ((Let *)b)->var)) return false;
        break;
    case EXPR_FUNCTION: {
        Function *x = (Function *)a, *y = (Function *)b;
        if (x->n_params != y->n_params ||
            !bind_tvars(q, x->n_tparams, x->tparams, y->n_tparams, y->tparams) ||
            !type_eq(q, x->ret_type, y->ret_type) || !attrs_eq(q, x->attrs, y->attrs))
            return false;
        for (uint32_t i = 0; i < x->n_params; i++)
            if (!bind_var(q, x->params[i], y->params[i])) return false;
        break;
    }
    case EXPR_CALL: {
        Call *x = (Call *)a, *y = (Call *)b;
        if (x->n_args != y->n_args || !attrs_eq(q, x->attrs, y->attrs) ||
            !types_eq(q, x->n_type_args, x->type_args, y->n_type_args, y->type_args))
            return false;
        break;
    }
    case EXPR_MATCH: {
        Match *x = (Match *)a, *y = (Match *)b;
        if (x->complete != y->complete || x->n_clauses != y->n_clauses) return false;
        for (uint32_t i = 0; i < x->n_clauses; i++)
            if (!pattern_eq(q, x->clauses[i].lhs, y->clauses[i].lhs)) return false;
        break;
    }
    case EXPR_CONSTRUCTOR: return ctor_eq((Constructor *)a, (Constructor *)b);
    case EXPR_OP: return same_name(((Op *)a)->name, ((Op *)b)->name);
    case EXPR_IF:
    case EXPR_REF_CREATE:
    case EXPR_REF_READ:
    case EXPR_REF_WRITE: break;
    case EXPR_KIND_COUNT: return false;
    }
    uint32_t n = ir_expr_n_children(a);
    if (n != ir_expr_n_children(b)) return false;
    for (uint32_t i = n; i-- > 0;)
        push_pair(q, ir_expr_child(a, i), ir_expr_child(b, i));
    return true;
}

static bool run(Eq *q) {
    while (q->work.len) {
        Pair p = vec_pop(&q->work);
        if (p.a == p.b && p.a->kind != EXPR_VAR && q->vars.len == 0) continue;
        void *m = ptrmap_get(&q->memo, p.a);
        if (m == p.b) continue;
        ptrmap_put(&q->memo, p.a, p.b);
        q->cur_a = p.a, q->cur_b = p.b;
        if (!node_eq(q, p.a, p.b)) {
            q->fail_a = p.a, q->fail_b = p.b, q->fail_pa = p.pa, q->fail_pb = p.pb;
            return false;
        }
    }
    return true;
}

static void eq_free(Eq *q) {
    ptrmap_free(&q->vars);
    ptrmap_free(&q->vars_rev);
    ptrmap_free(&q->tvars);
    ptrmap_free(&q->tvars_rev);
    ptrmap_free(&q->memo);
    ptrmap_free(&q->type_memo);
    vec_free(&q->work);
}

bool ir_expr_equal(Expr *a, Expr *b, bool map_free_vars) {
    Eq q = {.map_free_vars = map_free_vars};
    push_pair(&q, a, b);
    bool ok = run(&q);
    eq_free(&q);
    return ok;
}

bool ir_type_equal(Type *a, Type *b) {
    Eq q = {0};
    bool ok = type_eq(&q, a, b);
    eq_free(&q);
    return ok;
}

/* Describe the pair of nodes that differ; a node without a place in the source (an operator, a
 * global reference) is described through its parent (the call). */
static void describe_diff(const Expr *a, const Expr *b, const Expr *pa, const Expr *pb, IrDiff *d) {
    if (a->span.file == 0 && pa && pb && a->kind == b->kind) a = pa, b = pb;
    d->a = a->span, d->b = b->span;
    const char *ka = ir_expr_kind_names[a->kind], *kb = ir_expr_kind_names[b->kind];
    if (a->kind != b->kind) {
        snprintf(d->what, sizeof d->what, "a %s in the first, a %s in the second", ka, kb);
    } else if (a->kind == EXPR_CALL && ((Call *)a)->op->kind == EXPR_OP &&
               ((Call *)b)->op->kind == EXPR_OP &&
               !same_name(((Op *)((Call *)a)->op)->name, ((Op *)((Call *)b)->op)->name)) {
        snprintf(d->what, sizeof d->what, "a call of %s in the first, of %s in the second",
                 ((Op *)((Call *)a)->op)->name, ((Op *)((Call *)b)->op)->name);
    } else if (a->kind == EXPR_OP || a->kind == EXPR_GLOBAL_VAR || a->kind == EXPR_VAR) {
        const char *na = a->kind == EXPR_OP           ? ((Op *)a)->name
                         : a->kind == EXPR_GLOBAL_VAR ? ((GlobalVar *)a)->name
                                                      : ((Var *)a)->name;
        const char *nb = b->kind == EXPR_OP           ? ((Op *)b)->name
                         : b->kind == EXPR_GLOBAL_VAR ? ((GlobalVar *)b)->name
                                                      : ((Var *)b)->name;
        snprintf(d->what, sizeof d->what, "%s %s in the first, %s in the second", ka, na, nb);
    } else {
        snprintf(d->what, sizeof d->what,
                 "the two %ss differ (arity, attributes, types, values or bindings)", ka);
    }
}

bool ir_module_equal(const Module *a, const Module *b) { return ir_module_equal_diff(a, b, NULL); }

bool ir_module_equal_diff(const Module *a, const Module *b, IrDiff *d) {
    if (d) memset(d, 0, sizeof *d);
    if (a->is_expr != b->is_expr) {
        if (d) snprintf(d->what, sizeof d->what, "one is an expression, the other a module");
        return false;
    }
    if (a->types.len != b->types.len || a->funcs.len != b->funcs.len) {
        if (d)
            snprintf(d->what, sizeof d->what,
                     "%zu type definitions and %zu functions in the first, %zu and %zu in the "
                     "second",
                     a->types.len, a->funcs.len, b->types.len, b->funcs.len);
        return false;
    }
    Eq q = {.map_free_vars = true};
    bool ok = true;
    for (size_t i = 0; ok && i < a->types.len; i++) {
        TypeData *x = a->types.data[i], *y = b->types.data[i];
        ok = same_name(x->header->name, y->header->name) && x->is_extern == y->is_extern &&
             x->n_ctors == y->n_ctors && bind_tvars(&q, x->n_tvars, x->tvars, y->n_tvars, y->tvars);
        for (uint32_t j = 0; ok && j < x->n_ctors; j++)
            ok = ctor_eq(x->ctors[j], y->ctors[j]) &&
                 types_eq(&q, x->ctors[j]->n_inputs, x->ctors[j]->inputs, y->ctors[j]->n_inputs,
                          y->ctors[j]->inputs);
        if (!ok && d) {
            d->a = x->span, d->b = y->span;
            snprintf(d->what, sizeof d->what, "type definitions %s and %s differ", x->header->name,
                     y->header->name);
        }
    }
    for (size_t i = 0; ok && i < a->funcs.len; i++) {
        FuncDef *x = &a->funcs.data[i], *y = &b->funcs.data[i];
        ok = same_name(x->gvar->name, y->gvar->name) && (x->func == NULL) == (y->func == NULL);
        if (!ok && d) {
            d->a = x->span, d->b = y->span;
            snprintf(d->what, sizeof d->what,
                     "definition %zu is @%s in the first, @%s in the second", i + 1, x->gvar->name,
                     y->gvar->name);
        }
        if (ok && x->func) {
            push_pair(&q, &x->func->base, &y->func->base);
            ok = run(&q);
        }
    }
    if (ok && (a->expr == NULL) != (b->expr == NULL)) ok = false;
    if (ok && a->expr) {
        push_pair(&q, a->expr, b->expr);
        ok = run(&q);
    }
    if (!ok && d && q.fail_a) describe_diff(q.fail_a, q.fail_b, q.fail_pa, q.fail_pb, d);
    eq_free(&q);
    return ok;
}
