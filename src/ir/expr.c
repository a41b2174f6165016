/* expr.c - constructors of expression and pattern nodes and attribute values, and the context.
 * Every node is allocated in the context's arena with the next dense id; arrays are copied. */
#include <math.h>

#include "ir/ir.h"

const char *const ir_expr_kind_names[EXPR_KIND_COUNT] = {
#define X(E, S, N) N,
#include "ir/expr_kinds.def"
#undef X
};
_Static_assert(EXPR_KIND_COUNT == 15, "update the tables indexed by ExprKind");

/* ---- context ------------------------------------------------------------------------------ */

Ctx *ir_ctx_new(void) {
    Ctx *ctx = sup_calloc(1, sizeof(Ctx));
    arena_init(&ctx->arena);
    diags_init(&ctx->diags);
    ctx->next_id = 1;
    return ctx;
}

void ir_ctx_keep(Ctx *ctx, void *obj, void (*release)(void *obj)) {
    struct CtxKeep k = {obj, release};
    vec_push(&ctx->keep, k);
}

void ir_ctx_free(Ctx *ctx) {
    if (ctx == NULL) return;
    for (size_t i = ctx->keep.len; i-- > 0;)
        ctx->keep.data[i].release(ctx->keep.data[i].obj);
    vec_free(&ctx->keep);
    for (size_t i = 0; i < ctx->modules.len; i++)
        ir_module_free(ctx->modules.data[i]);
    vec_free(&ctx->modules);
    free(ctx->types.slots);
    strmap_free(&ctx->ops);
    strmap_free(&ctx->dims);
    vec_free(&ctx->dim_names);
    diags_free(&ctx->diags);
    intern_free(&ctx->strs);
    arena_free(&ctx->arena);
    free(ctx);
}

/* ---- expressions ---------------------------------------------------------------------------- */

static void *new_expr(Ctx *ctx, ExprKind kind, size_t size, Span span) {
    Expr *e = arena_alloc(&ctx->arena, size);
    e->kind = (uint8_t)kind;
    e->id = ctx->next_id++;
    e->span = span;
    return e;
}

static void *dup(Ctx *ctx, const void *p, size_t n, size_t elem) {
    return n ? arena_memdup(&ctx->arena, p, sup_mul(n, elem)) : NULL;
}

Var *ir_var_new(Ctx *ctx, const char *name, Type *ann, Span span) {
    Var *v = new_expr(ctx, EXPR_VAR, sizeof(Var), span);
    v->name = ir_intern(ctx, name, strlen(name));
    v->ann = ann;
    return v;
}

Expr *ir_constant_new(Ctx *ctx, rly_dtype dtype, uint32_t ndim, const int64_t *shape,
                      const void *data, Span span) {
    Constant *c = new_expr(ctx, EXPR_CONSTANT, sizeof(Constant), span);
    size_t count = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        RLY_CHECK(shape[i] >= 0, "constant with a negative dim");
        count = sup_mul(count, (size_t)shape[i]);
    }
    c->dtype = dtype;
    c->ndim = ndim;
    c->shape = dup(ctx, shape, ndim, sizeof(int64_t));
    c->nbytes = sup_mul(count, sup_dtype_size(dtype));
    c->data = arena_alloc(&ctx->arena, c->nbytes);
    if (c->nbytes && data) memcpy(c->data, data, c->nbytes);
    return &c->base;
}

Expr *ir_constant_borrow(Ctx *ctx, rly_dtype dtype, uint32_t ndim, const int64_t *shape,
                         const void *data, Span span) {
    Constant *c = new_expr(ctx, EXPR_CONSTANT, sizeof(Constant), span);
    size_t count = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        RLY_CHECK(shape[i] >= 0, "constant with a negative dim");
        count = sup_mul(count, (size_t)shape[i]);
    }
    c->dtype = dtype;
    c->ndim = ndim;
    c->shape = dup(ctx, shape, ndim, sizeof(int64_t));
    c->nbytes = sup_mul(count, sup_dtype_size(dtype));
    RLY_CHECK(c->nbytes == 0 || ((uintptr_t)data % sup_dtype_size(dtype)) == 0,
              "borrowed constant data is misaligned");
    c->data = (void *)(uintptr_t)data;
    return &c->base;
}

Expr *ir_scalar_i64(Ctx *ctx, rly_dtype dtype, int64_t v, Span span) {
    union {
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
    } u = {0};
    switch (dtype) {
    case RLY_DTYPE_BOOL: u.u8 = v != 0; break;
    case RLY_DTYPE_I8: u.i8 = (int8_t)v; break;
    case RLY_DTYPE_I16: u.i16 = (int16_t)v; break;
    case RLY_DTYPE_I32: u.i32 = (int32_t)v; break;
    case RLY_DTYPE_I64: u.i64 = v; break;
    case RLY_DTYPE_U8: u.u8 = (uint8_t)v; break;
    case RLY_DTYPE_U16: u.u16 = (uint16_t)v; break;
    case RLY_DTYPE_U32: u.u32 = (uint32_t)v; break;
    case RLY_DTYPE_U64: u.u64 = (uint64_t)v; break;
    default: return ir_scalar_f64(ctx, dtype, (double)v, span);
    }
    return ir_constant_new(ctx, dtype, 0, NULL, &u, span);
}

Expr *ir_scalar_f64(Ctx *ctx, rly_dtype dtype, double v, Span span) {
    union {
        uint16_t h;
        float f;
        double d;
    } u = {0};
    switch (dtype) {
    case RLY_DTYPE_F16: u.h = sup_f32_to_f16((float)v); break;
    case RLY_DTYPE_BF16: u.h = sup_f32_to_bf16((float)v); break;
    case RLY_DTYPE_F32: u.f = (float)v; break;
    case RLY_DTYPE_F64: u.d = v; break;
    default: return ir_scalar_i64(ctx, dtype, (int64_t)v, span);
    }
    return ir_constant_new(ctx, dtype, 0, NULL, &u, span);
}

int64_t ir_constant_as_i64(const Constant *c) {
    const void *p = c->data;
    switch (c->dtype) {
    case RLY_DTYPE_BOOL: return *(const uint8_t *)p != 0;
    case RLY_DTYPE_I8: return *(const int8_t *)p;
    case RLY_DTYPE_I16: return *(const int16_t *)p;
    case RLY_DTYPE_I32: return *(const int32_t *)p;
    case RLY_DTYPE_I64: return *(const int64_t *)p;
    case RLY_DTYPE_U8: return *(const uint8_t *)p;
    case RLY_DTYPE_U16: return *(const uint16_t *)p;
    case RLY_DTYPE_U32: return *(const uint32_t *)p;
    case RLY_DTYPE_U64: return (int64_t) * (const uint64_t *)p;
    default: return (int64_t)ir_constant_as_f64(c);
    }
}

double ir_constant_as_f64(const Constant *c) {
    const void *p = c->data;
    switch (c->dtype) {
    case RLY_DTYPE_F16: return sup_f16_to_f32(*(const uint16_t *)p);
    case RLY_DTYPE_BF16: return sup_bf16_to_f32(*(const uint16_t *)p);
    case RLY_DTYPE_F32: return *(const float *)p;
    case RLY_DTYPE_F64: return *(const double *)p;
    case RLY_DTYPE_U64: return (double)*(const uint64_t *)p;
    default: return (double)ir_constant_as_i64(c);
    }
}

Expr *ir_tuple_new(Ctx *ctx, uint32_t n, Expr *const *fields, Span span) {
    Tuple *t = new_expr(ctx, EXPR_TUPLE, sizeof(Tuple), span);
    t->n = n;
    t->fields = dup(ctx, fields, n, sizeof(Expr *));
    return &t->base;
}

Expr *ir_tuple_get_item_new(Ctx *ctx, Expr *tuple, uint32_t index, Span span) {
    TupleGetItem *t = new_expr(ctx, EXPR_TUPLE_GET_ITEM, sizeof(TupleGetItem), span);
    t->tuple = tuple;
    t->index = index;
    return &t->base;
}

Expr *ir_let_new(Ctx *ctx, Var *var, Expr *value, Expr *body, Span span) {
    Let *l = new_expr(ctx, EXPR_LET, sizeof(Let), span);
    l->var = var;
    l->value = value;
    l->body = body;
    return &l->base;
}

Expr *ir_function_new(Ctx *ctx, uint32_t n_params, Var *const *params, Expr *body, Type *ret_type,
                      uint32_t n_tparams, TypeVar *const *tparams, const Attrs *attrs, Span span) {
    Function *f = new_expr(ctx, EXPR_FUNCTION, sizeof(Function), span);
    f->n_params = n_params;
    f->params = dup(ctx, params, n_params, sizeof(Var *));
    f->body = body;
    f->ret_type = ret_type;
    f->n_tparams = n_tparams;
    f->tparams = dup(ctx, tparams, n_tparams, sizeof(TypeVar *));
    f->attrs = attrs;
    return &f->base;
}

Expr *ir_call_new(Ctx *ctx, Expr *op, uint32_t n_args, Expr *const *args, const Attrs *attrs,
                  uint32_t n_type_args, Type *const *type_args, Span span) {
    Call *c = new_expr(ctx, EXPR_CALL, sizeof(Call), span);
    c->op = op;
    c->n_args = n_args;
    c->args = dup(ctx, args, n_args, sizeof(Expr *));
    c->attrs = attrs;
    c->n_type_args = n_type_args;
    c->type_args = dup(ctx, type_args, n_type_args, sizeof(Type *));
    return &c->base;
}

Expr *ir_if_new(Ctx *ctx, Expr *cond, Expr *then_branch, Expr *else_branch, Span span) {
    If *i = new_expr(ctx, EXPR_IF, sizeof(If), span);
    i->cond = cond;
    i->then_branch = then_branch;
    i->else_branch = else_branch;
    return &i->base;
}

Expr *ir_match_new(Ctx *ctx, Expr *data, uint32_t n_clauses, const Clause *clauses, bool complete,
                   Span span) {
    Match *m = new_expr(ctx, EXPR_MATCH, sizeof(Match), span);
    m->data = data;
    m->n_clauses = n_clauses;
    m->clauses = dup(ctx, clauses, n_clauses, sizeof(Clause));
    m->complete = complete;
    return &m->base;
}

Expr *ir_ref_create_new(Ctx *ctx, Expr *value, Span span) {
    RefCreate *r = new_expr(ctx, EXPR_REF_CREATE, sizeof(RefCreate), span);
    r->value = value;
    return &r->base;
}

Expr *ir_ref_read_new(Ctx *ctx, Expr *ref, Span span) {
    RefRead *r = new_expr(ctx, EXPR_REF_READ, sizeof(RefRead), span);
    r->ref = ref;
    return &r->base;
}

Expr *ir_ref_write_new(Ctx *ctx, Expr *ref, Expr *value, Span span) {
    RefWrite *r = new_expr(ctx, EXPR_REF_WRITE, sizeof(RefWrite), span);
    r->ref = ref;
    r->value = value;
    return &r->base;
}

Expr *ir_op_get(Ctx *ctx, const char *name, size_t len) {
    Op *op = strmap_get(&ctx->ops, name, len);
    if (op == NULL) {
        op = new_expr(ctx, EXPR_OP, sizeof(Op), SPAN_NONE);
        op->name = ir_intern(ctx, name, len);
        strmap_put(&ctx->ops, name, len, op);
    }
    return &op->base;
}

/* ---- patterns -------------------------------------------------------------------------------- */

static Pattern *new_pattern(Ctx *ctx, PatternKind kind, Span span) {
    Pattern *p = arena_alloc(&ctx->arena, sizeof(Pattern));
    p->kind = (uint8_t)kind;
    p->id = ctx->next_id++;
    p->span = span;
    return p;
}

Pattern *ir_pattern_wildcard(Ctx *ctx, Span span) { return new_pattern(ctx, PAT_WILDCARD, span); }

Pattern *ir_pattern_var(Ctx *ctx, Var *var, Span span) {
    Pattern *p = new_pattern(ctx, PAT_VAR, span);
    p->var = var;
    return p;
}

Pattern *ir_pattern_ctor(Ctx *ctx, Constructor *ctor, uint32_t n, Pattern *const *pats, Span span) {
    Pattern *p = new_pattern(ctx, PAT_CTOR, span);
    p->ctor = ctor;
    p->n = n;
    p->pats = dup(ctx, pats, n, sizeof(Pattern *));
    return p;
}

Pattern *ir_pattern_tuple(Ctx *ctx, uint32_t n, Pattern *const *pats, Span span) {
    Pattern *p = new_pattern(ctx, PAT_TUPLE, span);
    p->n = n;
    p->pats = dup(ctx, pats, n, sizeof(Pattern *));
    return p;
}

/* Patterns are shallow (bounded by the parser's nesting limit), so an explicit stack is cheap
 * insurance rather than a necessity. */
void ir_pattern_vars(Pattern *p, PtrVec *out) {
    PtrVec stack = {0};
    vec_push(&stack, p);
    while (stack.len) {
        Pattern *q = vec_pop(&stack);
        if (q->kind == PAT_VAR) vec_push(out, q->var);
        for (uint32_t i = q->n; i-- > 0;)
            vec_push(&stack, q->pats[i]);
    }
    vec_free(&stack);
}

/* ---- attributes --------------------------------------------------------------------------------
 */

static AttrValue *new_attr(Ctx *ctx, AttrKind kind, Span span) {
    AttrValue *a = arena_alloc(&ctx->arena, sizeof(AttrValue));
    a->kind = (uint8_t)kind;
    a->span = span;
    return a;
}

AttrValue *ir_attr_int(Ctx *ctx, int64_t v, rly_dtype dt, Span span) {
    AttrValue *a = new_attr(ctx, ATTR_INT, span);
    a->i = v;
    a->dtype = dt;
    return a;
}

AttrValue *ir_attr_float(Ctx *ctx, double v, rly_dtype dt, Span span) {
    AttrValue *a = new_attr(ctx, ATTR_FLOAT, span);
    switch (dt) { /* hold the value as its type rounds it, so printing is exact */
    case RLY_DTYPE_F16: v = sup_f16_to_f32(sup_f32_to_f16((float)v)); break;
    case RLY_DTYPE_BF16: v = sup_bf16_to_f32(sup_f32_to_bf16((float)v)); break;
    case RLY_DTYPE_F32: v = (float)v; break;
    default: break;
    }
    a->f = v;
    a->dtype = dt;
    return a;
}

AttrValue *ir_attr_bool(Ctx *ctx, bool v, Span span) {
    AttrValue *a = new_attr(ctx, ATTR_BOOL, span);
    a->b = v;
    a->dtype = RLY_DTYPE_BOOL;
    return a;
}

AttrValue *ir_attr_str(Ctx *ctx, const char *s, size_t n, Span span) {
    AttrValue *a = new_attr(ctx, ATTR_STR, span);
    a->s = ir_intern(ctx, s, n);
    return a;
}

AttrValue *ir_attr_list(Ctx *ctx, uint32_t n, AttrValue *const *items, Span span) {
    AttrValue *a = new_attr(ctx, ATTR_LIST, span);
    a->list.n = n;
    a->list.items = dup(ctx, items, n, sizeof(AttrValue *));
    return a;
}

AttrValue *ir_attr_none(Ctx *ctx, Span span) { return new_attr(ctx, ATTR_NONE, span); }

AttrValue *ir_attr_expr(Ctx *ctx, Expr *e, Span span) {
    AttrValue *a = new_attr(ctx, ATTR_EXPR, span);
    a->expr = e;
    return a;
}

AttrValue *ir_attr_type(Ctx *ctx, Type *t, Span span) {
    AttrValue *a = new_attr(ctx, ATTR_TYPE, span);
    a->type = t;
    return a;
}

const Attrs *ir_attrs_new(Ctx *ctx, uint32_t n, const char *const *keys, AttrValue *const *values) {
    if (n == 0) return NULL;
    Attrs *a = arena_alloc(&ctx->arena, sizeof(Attrs));
    a->n = n;
    a->entries = arena_array(&ctx->arena, n, sizeof(AttrEntry));
    for (uint32_t i = 0; i < n; i++) {
        a->entries[i].key = keys[i];
        a->entries[i].value = values[i];
    }
    return a;
}

const AttrValue *ir_attrs_get(const Attrs *a, const char *key) {
    if (a == NULL) return NULL;
    for (uint32_t i = 0; i < a->n; i++)
        if (strcmp(a->entries[i].key, key) == 0) return a->entries[i].value;
    return NULL;
}
