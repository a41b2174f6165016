/* type.c - type nodes. Structural types (tensor, tuple, func, call, ref) are hash-consed in the
 * context's type table, so equal types are the same pointer; variables and relations have
 * identity. Each node carries flags and a saturating tree size computed from its children.
 * Also the one traversal engine over types (ir_type_rewrite, ir_type_visit: explicit stacks,
 * each node of a DAG once) and the symbolic dimension names. */
#include <string.h>

#include "ir/ir.h"

static uint64_t hash_ptrs(uint64_t h, uint32_t n, void *const *p) {
    h = sup_hash_mix(h, n);
    for (uint32_t i = 0; i < n; i++)
        h = sup_hash_mix(h, ((Type *)p[i])->hash);
    return h;
}

/* Structural identity of two candidate nodes of the same kind whose children are interned. */
static bool same_ptrs(uint32_t n, void *const *a, uint32_t m, void *const *b) {
    return n == m && (n == 0 || memcmp(a, b, n * sizeof(void *)) == 0);
}

static bool tensor_same(const TensorType *x, const TensorType *y) {
    return x->dtype == y->dtype && x->ndim == y->ndim &&
           (x->ndim == 0 || memcmp(x->shape, y->shape, x->ndim * sizeof(int64_t)) == 0);
}

static bool type_same(const Type *a, const Type *b) {
    if (a->kind != b->kind || a->hash != b->hash) return false;
    switch ((TypeKind)a->kind) {
    case TYPE_TENSOR: return tensor_same((const TensorType *)a, (const TensorType *)b);
    case TYPE_TUPLE: {
        const TupleType *x = (const TupleType *)a, *y = (const TupleType *)b;
        return same_ptrs(x->n, (void *const *)x->fields, y->n, (void *const *)y->fields);
    }
    case TYPE_FUNC: {
        const FuncType *x = (const FuncType *)a, *y = (const FuncType *)b;
        return x->ret == y->ret &&
               same_ptrs(x->n_params, (void *const *)x->params, y->n_params,
                         (void *const *)y->params) &&
               same_ptrs(x->n_tparams, (void *const *)x->tparams, y->n_tparams,
                         (void *const *)y->tparams) &&
               same_ptrs(x->n_constraints, (void *const *)x->constraints, y->n_constraints,
                         (void *const *)y->constraints);
    }
    case TYPE_CALL: {
        const TypeCall *x = (const TypeCall *)a, *y = (const TypeCall *)b;
        return x->func == y->func &&
               same_ptrs(x->n_args, (void *const *)x->args, y->n_args, (void *const *)y->args);
    }
    case TYPE_REF: return ((const RefType *)a)->value == ((const RefType *)b)->value;
    default: return a == b;
    }
}

uint32_t ir_type_n_children(const Type *t) {
    switch ((TypeKind)t->kind) {
    case TYPE_TUPLE: return ((const TupleType *)t)->n;
    case TYPE_FUNC: return ((const FuncType *)t)->n_params + 1;
    case TYPE_CALL: return ((const TypeCall *)t)->n_args + 1;
    case TYPE_REF: return 1;
    case TYPE_RELATION: return ((const TypeRelation *)t)->n_args;
    default: return 0;
    }
}

Type *ir_type_child(const Type *t, uint32_t i) {
    RLY_ASSERT(i < ir_type_n_children(t));
    switch ((TypeKind)t->kind) {
    case TYPE_TUPLE: return ((const TupleType *)t)->fields[i];
    case TYPE_FUNC: {
        const FuncType *f = (const FuncType *)t;
        return i < f->n_params ? f->params[i] : f->ret;
    }
    case TYPE_CALL:
        return i == 0 ? ((const TypeCall *)t)->func : ((const TypeCall *)t)->args[i - 1];
    case TYPE_REF: return ((const RefType *)t)->value;
    case TYPE_RELATION: return ((const TypeRelation *)t)->args[i];
    default: RLY_UNREACHABLE();
    }
}

/* flags and size of a new node from its children (see Type.flags) */
static void init_flags(Type *t) {
    enum { INHERITED = TYPE_HAS_INCOMPLETE | TYPE_HAS_ERROR | TYPE_HAS_VAR | TYPE_HAS_ADT };
    uint32_t n = ir_type_n_children(t), size = 1;
    uint8_t flags = 0, all_data = TYPE_IS_DATA;
    for (uint32_t i = 0; i < n; i++) {
        Type *c = ir_type_child(t, i);
        if (c->kind == TYPE_INCOMPLETE) c->flags |= TYPE_PLACED; /* see TYPE_PLACED */
        flags |= c->flags & INHERITED;
        size += c->size;
        if (size > TYPE_SIZE_MAX) size = TYPE_SIZE_MAX;
        all_data &= c->flags;
        if (t->kind == TYPE_TUPLE) flags |= c->flags & TYPE_HAS_FLOAT;
    }
    switch ((TypeKind)t->kind) {
    case TYPE_TENSOR:
        flags |= TYPE_IS_DATA;
        if (sup_dtype_is_float(((TensorType *)t)->dtype)) flags |= TYPE_HAS_FLOAT;
        break;
    case TYPE_TUPLE: flags |= all_data; break;
    case TYPE_VAR: flags |= TYPE_HAS_VAR; break;
    case TYPE_GLOBAL_VAR:
    case TYPE_CALL: flags |= TYPE_HAS_ADT; break;
    case TYPE_INCOMPLETE: flags |= TYPE_HAS_INCOMPLETE; break;
    default: break;
    }
    t->flags = flags;
    t->size = (uint16_t)size;
}

/* Return the interned copy of the candidate `t` (allocated on the caller's stack). */
static Type *intern_type(Ctx *ctx, Type *t, size_t size) {
    struct TypeTable *tt = &ctx->types;
    if ((tt->len + 1) * 2 >= tt->cap) {
        size_t cap = tt->cap ? tt->cap * 2 : 256;
        Type **slots = sup_calloc(cap, sizeof(Type *));
        for (size_t i = 0; i < tt->cap; i++) {
            Type *x = tt->slots[i];
            if (x == NULL) continue;
            size_t j = (size_t)x->hash & (cap - 1);
            while (slots[j] != NULL)
                j = (j + 1) & (cap - 1);
            slots[j] = x;
        }
        free(tt->slots);
        tt->slots = slots;
        tt->cap = cap;
    }
    size_t mask = tt->cap - 1, i = (size_t)t->hash & mask;
    for (; tt->slots[i] != NULL; i = (i + 1) & mask)
        if (type_same(tt->slots[i], t)) return tt->slots[i];
    Type *copy = arena_memdup(&ctx->arena, t, size);
    copy->id = ctx->next_id++;
    init_flags(copy); /* the children arrays are still the caller's: valid here */
    tt->slots[i] = copy;
    tt->len++;
    return copy;
}

static void *dup_array(Ctx *ctx, const void *p, size_t n, size_t elem) {
    return n ? arena_memdup(&ctx->arena, p, sup_mul(n, elem)) : NULL;
}

Type *ir_type_tensor(Ctx *ctx, rly_dtype dtype, uint32_t ndim, const int64_t *shape) {
    TensorType t = {{TYPE_TENSOR, 0, 0, 0, 0}, dtype, ndim, (int64_t *)shape};
    uint64_t h = sup_hash_mix(TYPE_TENSOR, (uint64_t)dtype);
    h = sup_hash_mix(h, sup_hash_bytes(shape, ndim * sizeof(int64_t), ndim));
    t.base.hash = h;
    size_t mask = ctx->types.cap ? ctx->types.cap - 1 : 0;
    if (ctx->types.cap) { /* lookup before copying the shape */
        for (size_t i = (size_t)h & mask; ctx->types.slots[i]; i = (i + 1) & mask) {
            const Type *c = ctx->types.slots[i];
            if (c->kind == TYPE_TENSOR && c->hash == h && tensor_same((const TensorType *)c, &t))
                return ctx->types.slots[i];
        }
    }
    /* scalars point at a shared empty array, never NULL, so memcpy(dst, shape, 0) is valid */
    static int64_t no_dims[1];
    t.shape = ndim ? dup_array(ctx, shape, ndim, sizeof(int64_t)) : no_dims;
    return intern_type(ctx, &t.base, sizeof t);
}

Type *ir_type_scalar(Ctx *ctx, rly_dtype dtype) { return ir_type_tensor(ctx, dtype, 0, NULL); }

Type *ir_type_tuple(Ctx *ctx, uint32_t n, Type *const *fields) {
    TupleType t = {{TYPE_TUPLE, 0, 0, 0, 0}, n, (Type **)fields};
    t.base.hash = hash_ptrs(TYPE_TUPLE, n, (void *const *)fields);
    Type *r = intern_type(ctx, &t.base, sizeof t);
    if (((TupleType *)r)->fields == fields && n) /* new node: own the array */
        ((TupleType *)r)->fields = dup_array(ctx, fields, n, sizeof(Type *));
    return r;
}

Type *ir_type_func(Ctx *ctx, uint32_t n_params, Type *const *params, Type *ret, uint32_t n_tparams,
                   TypeVar *const *tparams, uint32_t n_constraints, Type *const *constraints) {
    FuncType t = {{TYPE_FUNC, 0, 0, 0, 0}, n_params,      (Type **)params,     ret, n_tparams,
                  (TypeVar **)tparams,     n_constraints, (Type **)constraints};
    uint64_t h = hash_ptrs(TYPE_FUNC, n_params, (void *const *)params);
    h = sup_hash_mix(h, ret->hash);
    h = hash_ptrs(h, n_tparams, (void *const *)tparams);
    h = hash_ptrs(h, n_constraints, (void *const *)constraints);
    t.base.hash = h;
    FuncType *r = (FuncType *)intern_type(ctx, &t.base, sizeof t);
    if (r->params == params && n_params)
        r->params = dup_array(ctx, params, n_params, sizeof(Type *));
    if (r->tparams == tparams && n_tparams)
        r->tparams = dup_array(ctx, tparams, n_tparams, sizeof(TypeVar *));
    if (r->constraints == constraints && n_constraints)
        r->constraints = dup_array(ctx, constraints, n_constraints, sizeof(Type *));
    return &r->base;
}

Type *ir_type_call(Ctx *ctx, Type *func, uint32_t n_args, Type *const *args) {
    TypeCall t = {{TYPE_CALL, 0, 0, 0, 0}, func, n_args, (Type **)args};
    t.base.hash = hash_ptrs(sup_hash_mix(TYPE_CALL, func->hash), n_args, (void *const *)args);
    TypeCall *r = (TypeCall *)intern_type(ctx, &t.base, sizeof t);
    if (r->args == args && n_args) r->args = dup_array(ctx, args, n_args, sizeof(Type *));
    return &r->base;
}

Type *ir_type_ref(Ctx *ctx, Type *value) {
    RefType t = {{TYPE_REF, 0, 0, 0, 0}, value};
    t.base.hash = sup_hash_mix(TYPE_REF, value->hash);
    return intern_type(ctx, &t.base, sizeof t);
}

static Type *identity_node(Ctx *ctx, TypeKind kind, size_t size) {
    Type *t = arena_alloc(&ctx->arena, size);
    t->kind = (uint8_t)kind;
    t->id = ctx->next_id++;
    t->hash = sup_hash_mix(kind, t->id);
    t->size = 1;
    init_flags(t); /* no children yet: the kind's own flag */
    return t;
}

TypeVar *ir_type_var_new(Ctx *ctx, const char *name, TypeVarKind kind) {
    TypeVar *v = (TypeVar *)identity_node(ctx, TYPE_VAR, sizeof(TypeVar));
    v->name = ir_intern(ctx, name, strlen(name));
    v->tkind = (uint8_t)kind;
    return v;
}

GlobalTypeVar *ir_global_type_var_new(Ctx *ctx, const char *name, TypeVarKind kind) {
    GlobalTypeVar *v = (GlobalTypeVar *)identity_node(ctx, TYPE_GLOBAL_VAR, sizeof(GlobalTypeVar));
    v->name = ir_intern(ctx, name, strlen(name));
    v->tkind = (uint8_t)kind;
    return v;
}

Type *ir_type_incomplete_new(Ctx *ctx, TypeVarKind kind) {
    IncompleteType *t = (IncompleteType *)identity_node(ctx, TYPE_INCOMPLETE, sizeof *t);
    t->tkind = (uint8_t)kind;
    return &t->base;
}

Type *ir_type_error_new(Ctx *ctx) {
    Type *t = ir_type_incomplete_new(ctx, KIND_TYPE);
    t->flags = TYPE_HAS_ERROR;
    return t;
}

Type *ir_type_relation_new(Ctx *ctx, const char *name, uint32_t n_args, Type *const *args,
                           uint32_t n_inputs, const Attrs *attrs) {
    TypeRelation *r = (TypeRelation *)identity_node(ctx, TYPE_RELATION, sizeof *r);
    r->name = ir_intern(ctx, name, strlen(name));
    r->n_args = n_args;
    r->args = dup_array(ctx, args, n_args, sizeof(Type *));
    r->n_inputs = n_inputs;
    r->attrs = attrs;
    init_flags(&r->base);
    return &r->base;
}

Type *ir_type_with_children(Ctx *ctx, Type *t, Type *const *kids) {
    uint32_t n = ir_type_n_children(t);
    bool same = true;
    for (uint32_t i = 0; i < n && same; i++)
        same = kids[i] == ir_type_child(t, i);
    if (same) return t;
    switch ((TypeKind)t->kind) {
    case TYPE_TUPLE: return ir_type_tuple(ctx, n, kids);
    case TYPE_FUNC: {
        FuncType *f = (FuncType *)t;
        return ir_type_func(ctx, f->n_params, kids, kids[f->n_params], f->n_tparams, f->tparams,
                            f->n_constraints, f->constraints);
    }
    case TYPE_CALL: return ir_type_call(ctx, kids[0], n - 1, kids + 1);
    case TYPE_REF: return ir_type_ref(ctx, kids[0]);
    default: RLY_UNREACHABLE();
    }
}

/* ---- the traversal engine ------------------------------------------------------------------ */

typedef struct RwFrame {
    Type *orig; /* the node asked for */
    Type *t;    /* what pre said stands for it (its children are rewritten) */
    uint32_t next, n;
    size_t base; /* its children's results start at kids.data[base] */
} RwFrame;

Type *ir_type_rewrite(TypeRewriter *rw, Type *root) {
    Type *hit = ptrmap_get(&rw->memo, root);
    if (hit) return hit;
    Vec(RwFrame) st = {0};
    PtrVec kids = {0};
    Type *result = NULL;
    RwFrame f0 = {root, NULL, 0, 0, 0};
    vec_push(&st, f0);
    while (st.len) {
        RwFrame *f = &vec_last(&st);
        if (f->t == NULL) { /* first visit */
            Type *r = ptrmap_get(&rw->memo, f->orig), *t = f->orig;
            bool stop = false;
            if (r == NULL && rw->pre) {
                t = rw->pre(rw, f->orig, &stop);
                if (t == NULL) goto out; /* aborted */
                if (stop)
                    r = t;
                else if (t != f->orig)
                    r = ptrmap_get(&rw->memo, t);
            }
            if (r == NULL && (ir_type_n_children(t) == 0 || t->kind == TYPE_RELATION))
                r = t; /* leaves, and relations (identity nodes) stay as they are */
            if (r != NULL) {
                if (r != ptrmap_get(&rw->memo, f->orig)) ptrmap_put(&rw->memo, f->orig, r);
                st.len--;
                vec_push(&kids, r);
                continue;
            }
            f->t = t;
            f->n = ir_type_n_children(t);
            f->base = kids.len;
        }
        if (f->next < f->n) {
            Type *c = ir_type_child(f->t, f->next++);
            Type *r = ptrmap_get(&rw->memo, c);
            if (r) {
                vec_push(&kids, r);
            } else {
                RwFrame cf = {c, NULL, 0, 0, 0};
                vec_push(&st, cf); /* f is invalid from here */
            }
            continue;
        }
        Type *r = ir_type_with_children(rw->ctx, f->t, (Type *const *)(kids.data + f->base));
        kids.len = f->base;
        ptrmap_put(&rw->memo, f->orig, r);
        if (f->t != f->orig) ptrmap_put(&rw->memo, f->t, r);
        st.len--;
        vec_push(&kids, r);
    }
    RLY_CHECK(kids.len == 1, "ir_type_rewrite: unbalanced walk");
    result = kids.data[0];
out:
    vec_free(&st);
    vec_free(&kids);
    return result;
}

typedef struct VisitFrame {
    Type *t;
    uint32_t next, n;
} VisitFrame;

void ir_type_visit(Type *root, PtrMap *seen, bool (*pre)(void *st, Type *t),
                   void (*post)(void *st, Type *t), void *state) {
    if (ptrmap_has(seen, root)) return;
    Vec(VisitFrame) st = {0};
    ptrmap_put(seen, root, root);
    VisitFrame f0 = {root, 0, pre && !pre(state, root) ? 0 : ir_type_n_children(root)};
    vec_push(&st, f0);
    while (st.len) {
        VisitFrame *f = &vec_last(&st);
        if (f->next < f->n) {
            Type *c = ir_type_child(f->t, f->next++);
            if (ptrmap_has(seen, c)) continue;
            ptrmap_put(seen, c, c);
            VisitFrame cf = {c, 0, pre && !pre(state, c) ? 0 : ir_type_n_children(c)};
            vec_push(&st, cf);
            continue;
        }
        Type *t = f->t;
        st.len--;
        if (post) post(state, t);
    }
    vec_free(&st);
}

int64_t ir_dim_sym(Ctx *ctx, const char *name, size_t len) {
    uintptr_t k = (uintptr_t)strmap_get(&ctx->dims, name, len);
    if (k == 0) {
        vec_push(&ctx->dim_names, ir_intern(ctx, name, len));
        k = ctx->dim_names.len;
        strmap_put(&ctx->dims, name, len, (void *)k);
    }
    return DIM_SYM_BASE - (int64_t)(k - 1);
}

const char *ir_dim_sym_name(const Ctx *ctx, int64_t dim) {
    RLY_CHECK(dim_is_sym(dim), "not a symbolic dim");
    size_t k = (size_t)(DIM_SYM_BASE - dim);
    RLY_CHECK(k < ctx->dim_names.len, "unknown symbolic dim");
    return ctx->dim_names.data[k];
}
