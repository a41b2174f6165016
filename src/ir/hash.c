/* hash.c - structural hashing consistent with equal.c: alpha-equivalent terms hash alike.
 * Variables (local and type) all hash alike, since equality matches them by binding position
 * and may match one shared binder with several copies; names of globals, constructors, ADTs and
 * operators are hashed. The walk is iterative and memoized over the DAG. */
#include "ir/ir.h"

typedef struct Hs {
    PtrMap memo;  /* Expr -> hash + 1 */
    PtrMap types; /* Type -> hash + 1 (types are DAGs: each node is hashed once) */
} Hs;

static uint64_t hstr(const char *s) { return sup_hash_bytes(s, strlen(s), 7); }

/* The children hashed: ir_type_child's, then a function's constraints. */
static uint32_t h_n_children(Type *t) {
    uint32_t n = ir_type_n_children(t);
    return t->kind == TYPE_FUNC ? n + ((FuncType *)t)->n_constraints : n;
}
static Type *h_child(Type *t, uint32_t i) {
    uint32_t n = ir_type_n_children(t);
    return i < n ? ir_type_child(t, i) : ((FuncType *)t)->constraints[i - n];
}

static uint64_t known(Hs *h, Type *t) { return (uint64_t)(uintptr_t)ptrmap_get(&h->types, t) - 1; }

static uint64_t types_hash_known(Hs *h, uint64_t acc, uint32_t n, Type **ts) {
    acc = sup_hash_mix(acc, n);
    for (uint32_t i = 0; i < n; i++)
        acc = sup_hash_mix(acc, known(h, ts[i]));
    return acc;
}

/* The hash of t, whose children are hashed already. */
static uint64_t type_node_hash(Hs *h, Type *t) {
    uint64_t acc = sup_hash_mix(0x7e, t->kind);
    switch ((TypeKind)t->kind) {
    case TYPE_TENSOR: {
        TensorType *x = (TensorType *)t;
        acc = sup_hash_mix(acc, x->dtype);
        return sup_hash_mix(acc, sup_hash_bytes(x->shape, x->ndim * sizeof(int64_t), x->ndim));
    }
    case TYPE_TUPLE: return types_hash_known(h, acc, ((TupleType *)t)->n, ((TupleType *)t)->fields);
    case TYPE_FUNC: {
        FuncType *f = (FuncType *)t;
        acc = sup_hash_mix(acc, f->n_tparams);
        acc = types_hash_known(h, acc, f->n_params, f->params);
        acc = sup_hash_mix(acc, known(h, f->ret));
        return types_hash_known(h, acc, f->n_constraints, f->constraints);
    }
    case TYPE_VAR: return acc;
    case TYPE_GLOBAL_VAR: return sup_hash_mix(acc, hstr(((GlobalTypeVar *)t)->name));
    case TYPE_CALL: {
        TypeCall *c = (TypeCall *)t;
        return types_hash_known(h, sup_hash_mix(acc, known(h, c->func)), c->n_args, c->args);
    }
    case TYPE_REF: return sup_hash_mix(acc, known(h, ((RefType *)t)->value));
    case TYPE_INCOMPLETE: return sup_hash_mix(acc, ((IncompleteType *)t)->tkind);
    case TYPE_RELATION: {
        TypeRelation *r = (TypeRelation *)t;
        return types_hash_known(h, sup_hash_mix(acc, hstr(r->name)), r->n_args, r->args);
    }
    case TYPE_KIND_COUNT: break;
    }
    return acc;
}

typedef struct TyFrame {
    Type *t;
    uint32_t next, n;
} TyFrame;

/* Iterative and memoized: a DAG-shaped type costs its number of nodes. */
static uint64_t type_hash(Hs *h, Type *root) {
    if (root == NULL) return 0x51;
    if (ptrmap_has(&h->types, root)) return known(h, root);
    Vec(TyFrame) st = {0};
    TyFrame f0 = {root, 0, h_n_children(root)};
    vec_push(&st, f0);
    while (st.len) {
        TyFrame *f = &vec_last(&st);
        if (f->next < f->n) {
            Type *c = h_child(f->t, f->next++);
            if (!ptrmap_has(&h->types, c)) {
                TyFrame cf = {c, 0, h_n_children(c)};
                vec_push(&st, cf);
            }
            continue;
        }
        ptrmap_put(&h->types, f->t, (void *)(uintptr_t)(type_node_hash(h, f->t) + 1));
        st.len--;
    }
    vec_free(&st);
    return known(h, root);
}

static uint64_t types_hash(Hs *h, uint64_t acc, uint32_t n, Type **ts) {
    acc = sup_hash_mix(acc, n);
    for (uint32_t i = 0; i < n; i++)
        acc = sup_hash_mix(acc, type_hash(h, ts[i]));
    return acc;
}

static uint64_t attr_hash(Hs *h, const AttrValue *a) {
    uint64_t acc = sup_hash_mix(0xa7, a->kind);
    switch ((AttrKind)a->kind) {
    case ATTR_INT: return sup_hash_mix(sup_hash_mix(acc, (uint64_t)a->i), a->dtype);
    case ATTR_FLOAT: return sup_hash_mix(sup_hash_bytes(&a->f, sizeof a->f, acc), a->dtype);
    case ATTR_BOOL: return sup_hash_mix(acc, a->b);
    case ATTR_STR: return sup_hash_mix(acc, hstr(a->s));
    case ATTR_NONE: return acc;
    case ATTR_TYPE: return sup_hash_mix(acc, type_hash(h, a->type));
    case ATTR_EXPR: return sup_hash_mix(acc, a->expr->kind); /* shallow: attrs hold atoms */
    case ATTR_LIST:
        for (uint32_t i = 0; i < a->list.n; i++)
            acc = sup_hash_mix(acc, attr_hash(h, a->list.items[i]));
        return acc;
    }
    return acc;
}

static uint64_t attrs_hash(Hs *h, const Attrs *a) {
    if (a == NULL) return 0;
    uint64_t acc = a->n;
    for (uint32_t i = 0; i < a->n; i++) {
        acc = sup_hash_mix(acc, hstr(a->entries[i].key));
        acc = sup_hash_mix(acc, attr_hash(h, a->entries[i].value));
    }
    return acc;
}

static uint64_t pattern_hash(Hs *h, Pattern *p) {
    uint64_t acc = sup_hash_mix(0x9a, p->kind);
    if (p->kind == PAT_VAR) return sup_hash_mix(acc, type_hash(h, p->var->ann));
    if (p->kind == PAT_CTOR) acc = sup_hash_mix(acc, hstr(p->ctor->name));
    for (uint32_t i = 0; i < p->n; i++)
        acc = sup_hash_mix(acc, pattern_hash(h, p->pats[i]));
    return acc;
}

/* Node-local part of the hash (children are mixed in by expr_hash). */
static uint64_t local_hash(Hs *h, Expr *e) {
    uint64_t acc = sup_hash_mix(0xe0, e->kind);
    switch ((ExprKind)e->kind) {
    case EXPR_VAR: /* all variables hash alike: equality may map one binder to several */
        return acc;
    case EXPR_GLOBAL_VAR: return sup_hash_mix(acc, hstr(((GlobalVar *)e)->name));
    case EXPR_CONSTANT: {
        Constant *c = (Constant *)e;
        acc = sup_hash_mix(acc, c->dtype);
        acc = sup_hash_mix(acc, sup_hash_bytes(c->shape, c->ndim * sizeof(int64_t), c->ndim));
        return sup_hash_bytes(c->data, c->nbytes, acc);
    }
    case EXPR_TUPLE_GET_ITEM: return sup_hash_mix(acc, ((TupleGetItem *)e)->index);
    case EXPR_LET: {
        Let *l = (Let *)e;
        return sup_hash_mix(acc, type_hash(h, l->var->ann));
    }
    case EXPR_FUNCTION: {
        Function *f = (Function *)e;
        for (uint32_t i = 0; i < f->n_params; i++)
            acc = sup_hash_mix(acc, type_hash(h, f->params[i]->ann));
        acc = sup_hash_mix(acc, f->n_tparams);
        acc = sup_hash_mix(acc, type_hash(h, f->ret_type));
        return sup_hash_mix(acc, attrs_hash(h, f->attrs));
    }
    case EXPR_CALL: {
        Call *c = (Call *)e;
        acc = sup_hash_mix(acc, attrs_hash(h, c->attrs));
        return types_hash(h, acc, c->n_type_args, c->type_args);
    }
    case EXPR_MATCH: {
        Match *m = (Match *)e;
        acc = sup_hash_mix(acc, m->complete);
        for (uint32_t i = 0; i < m->n_clauses; i++)
            acc = sup_hash_mix(acc, pattern_hash(h, m->clauses[i].lhs));
        return acc;
    }
    case EXPR_CONSTRUCTOR: return sup_hash_mix(acc, hstr(((Constructor *)e)->name));
    case EXPR_OP: return sup_hash_mix(acc, hstr(((Op *)e)->name));
    default: return acc;
    }
}

typedef struct HFrame {
    Expr *e;
    uint32_t next;
    uint64_t acc;
} HFrame;

static uint64_t expr_hash(Hs *h, Expr *root) {
    Vec(HFrame) st = {0};
    HFrame f0 = {root, 0, 0};
    vec_push(&st, f0);
    uint64_t result = 0;
    while (st.len) {
        HFrame *f = &vec_last(&st);
        if (f->next == 0 && f->acc == 0) {
            uintptr_t memo = (uintptr_t)ptrmap_get(&h->memo, f->e);
            if (memo && f->e->kind != EXPR_VAR) {
                result = memo - 1;
                st.len--;
                goto deliver;
            }
            f->acc = local_hash(h, f->e) | 1;
        }
        if (f->next < ir_expr_n_children(f->e)) {
            HFrame c = {ir_expr_child(f->e, f->next++), 0, 0};
            vec_push(&st, c);
            continue;
        }
        result = f->acc;
        if (f->e->kind != EXPR_VAR) ptrmap_put(&h->memo, f->e, (void *)(uintptr_t)(result + 1));
        st.len--;
    deliver:
        if (st.len) vec_last(&st).acc = sup_hash_mix(vec_last(&st).acc, result) | 1;
    }
    vec_free(&st);
    return result;
}

static void hs_free(Hs *h) {
    ptrmap_free(&h->memo);
    ptrmap_free(&h->types);
}

uint64_t ir_expr_hash(Expr *e) {
    Hs h = {0};
    uint64_t r = expr_hash(&h, e);
    hs_free(&h);
    return r;
}

uint64_t ir_type_hash(Type *t) {
    Hs h = {0};
    uint64_t r = type_hash(&h, t);
    hs_free(&h);
    return r;
}

uint64_t ir_module_hash(const Module *m) {
    Hs h = {0};
    uint64_t acc = sup_hash_mix(m->is_expr, m->types.len);
    for (size_t i = 0; i < m->types.len; i++) {
        TypeData *td = m->types.data[i];
        acc = sup_hash_mix(acc, hstr(td->header->name));
        for (uint32_t j = 0; j < td->n_ctors; j++) {
            acc = sup_hash_mix(acc, hstr(td->ctors[j]->name));
            acc = types_hash(&h, acc, td->ctors[j]->n_inputs, td->ctors[j]->inputs);
        }
    }
    for (size_t i = 0; i < m->funcs.len; i++) {
        acc = sup_hash_mix(acc, hstr(m->funcs.data[i].gvar->name));
        if (m->funcs.data[i].func)
            acc = sup_hash_mix(acc, expr_hash(&h, &m->funcs.data[i].func->base));
    }
    if (m->expr) acc = sup_hash_mix(acc, expr_hash(&h, m->expr));
    hs_free(&h);
    return acc;
}
