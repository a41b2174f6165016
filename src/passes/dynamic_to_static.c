/* dynamic_to_static.c - DynamicToStatic (TVM's DynamicToStatic, opt level 2, function pass):
 * a dyn.* call (src/ops/op_dyn.c) whose shape-like arguments are constants becomes its static
 * twin with those values as attributes: dyn.reshape(x, [2, 3]) -> reshape(x, newshape=[2, 3]).
 * As in TVM, constants are folded first and throughout (the pass is FoldConstant with a hook,
 * pass_fold_constant_expr), so a shape computed from constants (shape_of of a static tensor,
 * arithmetic on constants) counts as constant, and a dyn call on constant data folds entirely.
 *
 * A conversion is made only when the static operator means the same: values that the dyn
 * kernel rejects (reshape entries below -1, a zero stride) and values the static relation
 * refuses (its message is dropped) leave the dyn call for the run to report. The result type
 * then gives dims that were `?`, which pass_refine_types carries through the module.
 * docs/passes.md, "DynamicToStatic". */
#include <string.h>

#include "ops/ops.h"
#include "passes/passes.h"

#define MAX_VALS 64 /* the most values a shape-like argument holds (twice the largest rank) */

/* The values of integer constant e, flattened (at most cap); -1 when e is not an integer
 * constant or holds more. */
static int ints_of(Expr *e, int64_t *out, uint32_t cap) {
    if (e->kind != EXPR_CONSTANT) return -1;
    Constant *c = AS_CONSTANT(e);
    if (!sup_dtype_is_int(c->dtype) && !sup_dtype_is_uint(c->dtype)) return -1;
    size_t w = sup_dtype_size(c->dtype), n = c->nbytes / w;
    if (n > cap) return -1;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = (const uint8_t *)c->data + i * w;
        switch (c->dtype) {
        case RLY_DTYPE_I8: out[i] = *(const int8_t *)p; break;
        case RLY_DTYPE_I16: out[i] = *(const int16_t *)p; break;
        case RLY_DTYPE_I32: out[i] = *(const int32_t *)p; break;
        case RLY_DTYPE_I64: out[i] = *(const int64_t *)p; break;
        case RLY_DTYPE_U8: out[i] = *p; break;
        case RLY_DTYPE_U16: out[i] = *(const uint16_t *)p; break;
        case RLY_DTYPE_U32: out[i] = *(const uint32_t *)p; break;
        case RLY_DTYPE_U64:
            if (*(const uint64_t *)p > (uint64_t)INT64_MAX) return -1;
            out[i] = (int64_t) * (const uint64_t *)p;
            break;
        default: return -1;
        }
    }
    return (int)n;
}

/* The one value of integer constant e. */
static bool int_of(Expr *e, int64_t *v) { return ints_of(e, v, 1) == 1; }

/* The one value of numeric constant e (a scale), whatever its shape ((), (1,), (1, 1)). */
static bool number_of(Expr *e, double *v, rly_dtype *dt) {
    if (e->kind != EXPR_CONSTANT) return false;
    Constant s = *AS_CONSTANT(e);
    if (s.nbytes != sup_dtype_size(s.dtype) || s.dtype == RLY_DTYPE_BOOL) return false;
    s.ndim = 0;
    *v = ir_constant_as_f64(&s);
    *dt = s.dtype;
    return true;
}

/* ---- building the static call ---------------------------------------------------------- */

typedef struct Static {
    Ctx *ctx;
    Call *dyn;
    const char *keys[4]; /* the attributes taken from tensor values */
    AttrValue *vals[4];
    uint32_t n;
} Static;

static AttrValue *int_attr(Ctx *ctx, int64_t v) {
    return ir_attr_int(ctx, v, v >= INT32_MIN && v <= INT32_MAX ? RLY_DTYPE_I32 : RLY_DTYPE_I64,
                       SPAN_NONE);
}

static AttrValue *ints_attr(Ctx *ctx, const int64_t *v, uint32_t n) {
    AttrValue **items = arena_array(&ctx->arena, n ? n : 1, sizeof *items);
    for (uint32_t i = 0; i < n; i++)
        items[i] = int_attr(ctx, v[i]);
    return ir_attr_list(ctx, n, items, SPAN_NONE);
}

static void put(Static *s, const char *key, AttrValue *v) {
    s->keys[s->n] = key;
    s->vals[s->n++] = v;
}

/* Does `now` (the static call's type) keep every dim `before` (the dyn call's) knew? */
static bool refines(Type *before, Type *now) {
    if (before == now) return true;
    if (before->kind == TYPE_TUPLE && now->kind == TYPE_TUPLE) {
        TupleType *a = AS_TUPLE_TYPE(before), *b = AS_TUPLE_TYPE(now);
        if (a->n != b->n) return false;
        for (uint32_t i = 0; i < a->n; i++) /* op results: a tuple of tensors at most */
            if (!refines(a->fields[i], b->fields[i])) return false;
        return true;
    }
    if (before->kind != TYPE_TENSOR || now->kind != TYPE_TENSOR) return false;
    TensorType *a = AS_TENSOR_TYPE(before), *b = AS_TENSOR_TYPE(now);
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (uint32_t i = 0; i < a->ndim; i++)
        if (a->shape[i] >= 0 && a->shape[i] != b->shape[i]) return false;
    return true;
}

/* The call of static operator `op` on the dyn call's args (by index), with the attributes of
 * s and those the dyn call gives, in the static operator's schema order; NULL (nothing
 * reported) when its relation refuses them or its type contradicts the dyn call's. */
static Expr *build(Static *s, const char *op, const uint32_t *args, uint32_t n_args) {
    const OpDef *def = op_lookup(op, strlen(op));
    RLY_CHECK(def != NULL, "DynamicToStatic: no operator %s", op);
    const char *keys[32];
    AttrValue *vals[32];
    uint32_t n = 0;
    for (const AttrSpec *row = def->attrs; row && row->name && n < 32; row++) {
        AttrValue *v = NULL;
        for (uint32_t i = 0; i < s->n && v == NULL; i++)
            if (strcmp(s->keys[i], row->name) == 0) v = s->vals[i];
        if (v == NULL) v = (AttrValue *)ir_attrs_get(s->dyn->attrs, row->name);
        if (v == NULL) continue; /* its default, the same for both */
        keys[n] = ir_intern(s->ctx, row->name, strlen(row->name));
        vals[n++] = v;
    }
    Expr *a[4];
    for (uint32_t i = 0; i < n_args; i++)
        a[i] = s->dyn->args[args[i]];
    DiagMark mark = pass_diag_mark(s->ctx);
    Expr *r = pass_op_call(s->ctx, op, n_args, a, n ? ir_attrs_new(s->ctx, n, keys, vals) : NULL,
                           s->dyn->base.span);
    if (r == NULL || !refines(s->dyn->base.checked_type, r->checked_type)) {
        pass_diag_rollback(s->ctx, mark, NULL);
        return NULL;
    }
    return r;
}

static const uint32_t ARG0[] = {0}, ARG02[] = {0, 2}, ARG012[] = {0, 1, 2};

/* A shape-like list argument (args[arg]) becomes attribute `key` of the static operator. */
static Expr *list_arg(Static *s, uint32_t arg, const char *key, const char *op) {
    int64_t v[MAX_VALS];
    int n = ints_of(s->dyn->args[arg], v, MAX_VALS);
    if (n < 0) return NULL;
    if (strcmp(key, "newshape") == 0) /* the dyn kernel takes sizes, 0 and -1: reshape's -2..-4 */
        for (int i = 0; i < n; i++)
            if (v[i] < -1) return NULL;
    put(s, key, ints_attr(s->ctx, v, (uint32_t)n));
    return build(s, op, ARG0, arg == 0 ? 0 : 1);
}

/* A scalar argument (args[arg]) becomes integer attribute `key`. */
static Expr *int_arg(Static *s, uint32_t arg, const char *key, const char *op, const uint32_t *args,
                     uint32_t n_args) {
    int64_t k;
    if (!int_of(s->dyn->args[arg], &k)) return NULL;
    put(s, key, int_attr(s->ctx, k));
    return build(s, op, args, n_args);
}

/* The static twin of dyn call c, or NULL. */
static Expr *to_static(Ctx *ctx, Call *c, uint32_t id) {
    Static s = {.ctx = ctx, .dyn = c};
    int64_t v[MAX_VALS];
    int n;
    switch (id) {
    case OP_ID_DYN_RESHAPE: return list_arg(&s, 1, "newshape", "reshape");
    case OP_ID_DYN_BROADCAST_TO: return list_arg(&s, 1, "shape", "broadcast_to");
    case OP_ID_DYN_TILE: return list_arg(&s, 1, "reps", "tile");
    case OP_ID_DYN_SQUEEZE: return list_arg(&s, 1, "axis", "squeeze");
    case OP_ID_DYN_ZEROS: return list_arg(&s, 0, "shape", "zeros");
    case OP_ID_DYN_ONES: return list_arg(&s, 0, "shape", "ones");
    case OP_ID_DYN_FULL: return list_arg(&s, 1, "shape", "full");
    case OP_ID_DYN_ONE_HOT: return int_arg(&s, 3, "depth", "one_hot", ARG012, 3);
    case OP_ID_DYN_TOPK: return int_arg(&s, 1, "k", "topk", ARG0, 1);
    case OP_ID_DYN_EXPAND_DIMS: return int_arg(&s, 1, "axis", "expand_dims", ARG0, 1);
    case OP_ID_DYN_STRIDED_SLICE: {
        static const char *const keys[] = {"begin", "end", "strides"};
        for (uint32_t i = 0; i < 3; i++) {
            if ((n = ints_of(c->args[i + 1], v, MAX_VALS)) < 0) return NULL;
            for (int j = 0; i == 2 && j < n; j++)
                if (v[j] == 0) return NULL; /* the dyn kernel's error */
            put(&s, keys[i], ints_attr(ctx, v, (uint32_t)n));
        }
        return build(&s, "strided_slice", ARG0, 1);
    }
    case OP_ID_DYN_NN_PAD: { /* pad_width: (rank, 2) -> [[before, after], ...] */
        if ((n = ints_of(c->args[1], v, MAX_VALS)) < 0 || n % 2) return NULL;
        AttrValue **rows = arena_array(&ctx->arena, n ? (size_t)n / 2 : 1, sizeof *rows);
        for (int i = 0; i < n / 2; i++)
            rows[i] = ints_attr(ctx, v + 2 * i, 2);
        put(&s, "pad_width", ir_attr_list(ctx, (uint32_t)n / 2, rows, SPAN_NONE));
        return build(&s, "nn.pad", ARG02, 2);
    }
    case OP_ID_DYN_IMAGE_RESIZE2D:
        if (ints_of(c->args[1], v, MAX_VALS) != 2) return NULL;
        put(&s, "size", ints_attr(ctx, v, 2));
        return build(&s, "image.resize2d", ARG0, 1);
    case OP_ID_DYN_NN_UPSAMPLING: {
        double h, w;
        rly_dtype th, tw;
        if (!number_of(c->args[1], &h, &th) || !number_of(c->args[2], &w, &tw)) return NULL;
        put(&s, "scale_h",
            ir_attr_float(ctx, h, th == RLY_DTYPE_F64 ? th : RLY_DTYPE_F32, SPAN_NONE));
        put(&s, "scale_w",
            ir_attr_float(ctx, w, tw == RLY_DTYPE_F64 ? tw : RLY_DTYPE_F32, SPAN_NONE));
        return build(&s, "nn.upsampling", ARG0, 1);
    }
    default: return NULL;
    }
}

static Expr *hook(Ctx *ctx, Expr *call, void *state) {
    (void)state;
    const OpDef *def = op_def_of(AS_CALL(call)->op);
    Expr *r = def ? to_static(ctx, AS_CALL(call), def->id) : NULL;
    return r ? r : call;
}

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    (void)pc;
    return pass_fold_constant_expr(m, e, false, hook, NULL);
}

const PassDef pass_dynamic_to_static = {
    .name = "DynamicToStatic",
    .opt_level = 2,
    .kind = PASS_FUNCTION,
    .params = "",
    .run_expr = run,
    .doc = "turn dyn.* calls whose shape arguments are constants into their static operators",
};
