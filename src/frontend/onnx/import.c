/* import.c - the ONNX importer's core: graph walk, value scopes, typing and folding of the calls
 * converters build, diagnostics at nodes, and the control-flow converters (If, Loop, Scan).
 * See import.h for the design. */
#include "frontend/onnx/import.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/text/text.h"
#include "passes/passes.h"
#include "types/types.h"

/* One level of names: a graph (the main graph or a subgraph). A subgraph that becomes a function
 * (Loop and Scan bodies) is a boundary: an outer value used inside is passed in as an extra
 * parameter (captured), so function bodies never share nodes with their callers. */
typedef struct Scope {
    struct Scope *up;
    StrMap names; /* ONNX value name -> Expr */
    bool boundary;
    PtrVec cap_outer; /* boundary: captured outer expressions ... */
    PtrVec cap_inner; /* ... and the parameters standing for them inside */
} Scope;

struct Imp {
    Ctx *ctx;
    const OxModel *model;
    const ImpOptions *opts;
    Arena arena;
    Scope *scope;
    /* the node being converted */
    const OxNode *node;
    int64_t opset;
    Span span;
    Expr **outs;
    /* diagnostics: each node's line in a pseudo source named after the model */
    uint32_t file;
    PtrMap node_off; /* OxNode* -> byte offset + 1 */
    const char *src;
    /* folding */
    PassFolder *folder;
    uint32_t n_folded;
    /* sequences and optionals */
    Module *mod;               /* the module being built (the prelude is parsed into it) */
    Vec(struct ElemVar) elems; /* element types not known yet (see ElemVar) */
    /* emulated values: Expr -> its ONNX data type (a float8 type carried as float32, INT4 as
     * int8, UINT4 as uint8), for the converters that read an input's type (CastLike's
     * target_type, QuantizeLinear's y_zero_point); never iterated */
    PtrMap emul;
};

/* An element type not known yet: the tensors of a sequence or optional whose rank no type
 * gives (SequenceEmpty, a graph input without element shape; a graph input's declared element
 * shape is only a hint, since the tensors put in decide, as in test_loop13_seq). Types built
 * meanwhile hold the IncompleteType u. The first tensor put in (imp_elem_unify, imp_join) fixes
 * it; a converter that needs it takes the hint or reports (imp_force); imp_import ends by
 * fixing the rest from the graph outputs' types and the hints and writes the known types into
 * every annotation. Invariant: bound, once set, is an all-`?` tensor type or another ElemVar's
 * u (never a chain back to itself). */
typedef struct ElemVar {
    Type *u;            /* an IncompleteType */
    Type *bound;        /* what it stands for; NULL while unknown */
    int dtype;          /* rly dtype of the tensors; -1 when not known either */
    int32_t hint;       /* rank to take when nothing else decides; -1 when none */
    const OxNode *node; /* the node that made it (NULL: a graph input) */
    const char *what;   /* for messages: "graph input 'x'", "the output of SequenceEmpty ..." */
    const char *input;  /* the graph input it is the element type of (to suggest a rank), or NULL */
} ElemVar;

/* ---- tables ------------------------------------------------------------------------------------
 */

static const ImpConv *const conv_tables[] = {imp_conv_elem,  imp_conv_shape, imp_conv_reduce,
                                             imp_conv_nn,    imp_conv_rnn,   imp_conv_misc,
                                             imp_conv_extra, imp_conv_seq,   imp_conv_control};

static bool same_domain(const char *a, const char *b) {
    if (strcmp(a, "ai.onnx") == 0) a = "";
    if (strcmp(b, "ai.onnx") == 0) b = "";
    return strcmp(a, b) == 0;
}

const ImpConv *imp_find_conv(const char *op_type, const char *domain, int64_t opset) {
    const ImpConv *best = NULL;
    for (size_t t = 0; t < sizeof conv_tables / sizeof conv_tables[0]; t++)
        for (const ImpConv *c = conv_tables[t]; c->op_type; c++)
            if (strcmp(c->op_type, op_type) == 0 && same_domain(c->domain, domain) &&
                c->since <= opset && (best == NULL || c->since > best->since))
                best = c;
    return best;
}

int64_t imp_opset_unsupported(const OxModel *m) {
    int64_t v = ox_opset(m, "");
    return v > IMP_OPSET_MAX ? v : 0;
}

/* ---- accessors ----------------------------------------------------------------------------------
 */

const OxNode *imp_node(Imp *imp) { return imp->node; }
int64_t imp_opset(Imp *imp) { return imp->opset; }
Span imp_span(Imp *imp) { return imp->span; }
Ctx *imp_ctx(Imp *imp) { return imp->ctx; }
uint32_t imp_n_inputs(Imp *imp) { return imp->node->n_inputs; }
uint32_t imp_n_outputs(Imp *imp) { return imp->node->n_outputs; }
void *imp_alloc(Imp *imp, size_t n) { return arena_alloc(&imp->arena, n); }

static void verror(Imp *imp, Span span, const char *fmt, va_list ap) {
    StrBuf sb = {0};
    if (imp->node)
        sb_printf(&sb, "%s%s%s%s: ", imp->node->op_type, imp->node->name[0] ? " '" : "",
                  imp->node->name, imp->node->name[0] ? "'" : "");
    sb_vprintf(&sb, fmt, ap);
    diag_error(&imp->ctx->diags, span, "%s", sb_cstr(&sb));
    sb_free(&sb);
}

bool imp_error(Imp *imp, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verror(imp, imp->span, fmt, ap);
    va_end(ap);
    return false;
}

/* An error not tied to a node (graph inputs/outputs): at the model's first line. */
static bool graph_error(Imp *imp, const char *fmt, ...) RLY_PRINTF(2, 3);
static bool graph_error(Imp *imp, const char *fmt, ...) {
    const OxNode *saved = imp->node;
    imp->node = NULL;
    va_list ap;
    va_start(ap, fmt);
    verror(imp, (Span){imp->file, 0, 0}, fmt, ap);
    va_end(ap);
    imp->node = saved;
    return false;
}

static Expr *lookup(Imp *imp, const char *name) {
    size_t n = strlen(name);
    Scope *crossed = NULL; /* the innermost boundary crossed so far */
    PtrVec chain = {0};    /* boundaries crossed, innermost first */
    Expr *e = NULL;
    for (Scope *s = imp->scope; s; s = s->up) {
        e = strmap_get(&s->names, name, n);
        if (e) break;
        if (s->boundary) vec_push(&chain, s);
    }
    (void)crossed;
    if (e && chain.len > 0 && e->kind != EXPR_CONSTANT) {
        /* Thread the value through each crossed boundary, outermost first. */
        for (size_t k = chain.len; k-- > 0;) {
            Scope *b = chain.data[k];
            Expr *inner = NULL;
            for (size_t j = 0; j < b->cap_outer.len; j++)
                if (b->cap_outer.data[j] == e) inner = b->cap_inner.data[j];
            if (inner == NULL) {
                Var *v = ir_var_new(imp->ctx, ir_intern(imp->ctx, name, n), imp_type(e), SPAN_NONE);
                v->base.checked_type = imp_type(e);
                vec_push(&b->cap_outer, e);
                vec_push(&b->cap_inner, &v->base);
                inner = &v->base;
            }
            e = inner;
        }
    }
    vec_free(&chain);
    return e;
}

static void define(Imp *imp, const char *name, Expr *e) {
    strmap_put(&imp->scope->names, name, strlen(name), e);
}

Expr *imp_in(Imp *imp, uint32_t i) {
    if (i >= imp->node->n_inputs || imp->node->inputs[i][0] == '\0') return NULL;
    return lookup(imp, imp->node->inputs[i]);
}

Expr *imp_in_req(Imp *imp, uint32_t i, const char *what) {
    Expr *e = imp_in(imp, i);
    if (e == NULL) imp_error(imp, "input %u (%s) is required", i, what);
    return e;
}

void imp_out(Imp *imp, uint32_t i, Expr *e) {
    if (i < imp->node->n_outputs) imp->outs[i] = e;
}

bool imp_set_out(Imp *imp, uint32_t i, Expr *e) {
    if (e == NULL) return false;
    imp_out(imp, i, e);
    return true;
}

bool imp_wants_out(Imp *imp, uint32_t i) {
    return i < imp->node->n_outputs && imp->node->outputs[i][0] != '\0';
}

Expr *imp_tin(Imp *imp, uint32_t i, const char *what) {
    Expr *e = imp_in_req(imp, i, what);
    if (e != NULL && imp_tt(e) == NULL) {
        imp_error(imp, "input %u (%s) must be a tensor", i, what);
        return NULL;
    }
    return e;
}

/* ---- attributes ------------------------------------------------------------------------------ */

const OxAttr *imp_attr(Imp *imp, const char *name) {
    for (uint32_t i = 0; i < imp->node->n_attrs; i++)
        if (strcmp(imp->node->attrs[i].name, name) == 0) return &imp->node->attrs[i];
    return NULL;
}

int64_t imp_attr_int(Imp *imp, const char *name, int64_t dflt) {
    const OxAttr *a = imp_attr(imp, name);
    return a ? a->i : dflt;
}

double imp_attr_float(Imp *imp, const char *name, double dflt) {
    const OxAttr *a = imp_attr(imp, name);
    return a ? (double)a->f : dflt;
}

const char *imp_attr_str(Imp *imp, const char *name, const char *dflt) {
    const OxAttr *a = imp_attr(imp, name);
    return a && a->s.s ? a->s.s : dflt;
}

uint32_t imp_attr_ints(Imp *imp, const char *name, const int64_t **out) {
    const OxAttr *a = imp_attr(imp, name);
    *out = a ? a->ints : NULL;
    return a ? a->n_ints : 0;
}

uint32_t imp_attr_floats(Imp *imp, const char *name, const float **out) {
    const OxAttr *a = imp_attr(imp, name);
    *out = a ? a->floats : NULL;
    return a ? a->n_floats : 0;
}

/* ---- types and constants --------------------------------------------------------------------- */

Type *imp_type(Expr *e) { return e->checked_type; }

TensorType *imp_tt(Expr *e) {
    Type *t = e->checked_type;
    return t && t->kind == TYPE_TENSOR ? AS_TENSOR_TYPE(t) : NULL;
}

uint32_t imp_rank(Expr *e) {
    TensorType *t = imp_tt(e);
    return t ? t->ndim : 0;
}

rly_dtype imp_dtype(Expr *e) {
    TensorType *t = imp_tt(e);
    return t ? t->dtype : RLY_DTYPE_F32;
}

Constant *imp_const(Expr *e) { return e && e->kind == EXPR_CONSTANT ? AS_CONSTANT(e) : NULL; }

bool imp_const_ints(Imp *imp, Expr *e, const int64_t **vals, uint32_t *n) {
    Constant *c = imp_const(e);
    if (c == NULL || c->ndim > 1 || !(sup_dtype_is_int(c->dtype) || sup_dtype_is_uint(c->dtype)))
        return false;
    size_t count = c->ndim ? (size_t)c->shape[0] : 1;
    int64_t *v = arena_array(&imp->arena, count ? count : 1, sizeof *v);
    size_t es = sup_dtype_size(c->dtype);
    for (size_t i = 0; i < count; i++) {
        const uint8_t *p = (const uint8_t *)c->data + i * es;
        switch (c->dtype) {
        case RLY_DTYPE_I8: v[i] = *(const int8_t *)p; break;
        case RLY_DTYPE_I16: v[i] = *(const int16_t *)p; break;
        case RLY_DTYPE_I32: v[i] = *(const int32_t *)p; break;
        case RLY_DTYPE_I64: v[i] = *(const int64_t *)p; break;
        case RLY_DTYPE_U8: v[i] = *(const uint8_t *)p; break;
        case RLY_DTYPE_U16: v[i] = *(const uint16_t *)p; break;
        case RLY_DTYPE_U32: v[i] = *(const uint32_t *)p; break;
        default: v[i] = (int64_t) * (const uint64_t *)p; break;
        }
    }
    *vals = v;
    *n = (uint32_t)count;
    return true;
}

bool imp_const_f64(Expr *e, double *v) {
    Constant *c = imp_const(e);
    if (c == NULL) return false;
    size_t count = 1;
    for (uint32_t i = 0; i < c->ndim; i++)
        count *= (size_t)c->shape[i];
    if (count != 1) return false;
    Constant tmp = *c;
    tmp.ndim = 0;
    *v = ir_constant_as_f64(&tmp);
    return true;
}

int ox_to_rly_dtype(int32_t t) {
    switch (t) {
    case OX_FLOAT: return RLY_DTYPE_F32;
    case OX_UINT8: return RLY_DTYPE_U8;
    case OX_INT8: return RLY_DTYPE_I8;
    case OX_UINT16: return RLY_DTYPE_U16;
    case OX_INT16: return RLY_DTYPE_I16;
    case OX_INT32: return RLY_DTYPE_I32;
    case OX_INT64: return RLY_DTYPE_I64;
    case OX_BOOL: return RLY_DTYPE_BOOL;
    case OX_FLOAT16: return RLY_DTYPE_F16;
    case OX_DOUBLE: return RLY_DTYPE_F64;
    case OX_UINT32: return RLY_DTYPE_U32;
    case OX_UINT64: return RLY_DTYPE_U64;
    case OX_BFLOAT16: return RLY_DTYPE_BF16;
    /* emulated (docs/onnx.md, "float8 and int4 emulation"): the values, exactly, in a wider
     * dtype; Cast and QuantizeLinear to these types round and saturate to the format */
    case OX_FLOAT8E4M3FN:
    case OX_FLOAT8E4M3FNUZ:
    case OX_FLOAT8E5M2:
    case OX_FLOAT8E5M2FNUZ: return RLY_DTYPE_F32;
    case OX_UINT4: return RLY_DTYPE_U8;
    case OX_INT4: return RLY_DTYPE_I8;
    default: return -1;
    }
}

void imp_emul_mark(Imp *imp, Expr *e, int32_t onnx_type) {
    if (e != NULL && (OX_IS_FLOAT8(onnx_type) || OX_IS_INT4(onnx_type)))
        ptrmap_put(&imp->emul, e, (void *)(uintptr_t)onnx_type);
}

int32_t imp_emul_type(Imp *imp, Expr *e) {
    return e ? (int32_t)(uintptr_t)ptrmap_get(&imp->emul, e) : 0;
}

int imp_onnx_dtype(Imp *imp, int32_t onnx_type) {
    int dt = ox_to_rly_dtype(onnx_type);
    if (dt < 0) imp_error(imp, "data type %s has no Relay counterpart", ox_type_name(onnx_type));
    return dt;
}

/* ---- attribute builders --------------------------------------------------------------------- */

static void ia_put(Imp *imp, ImpAttrs *a, const char *key, AttrValue *v) {
    RLY_CHECK(a->n < sizeof a->keys / sizeof a->keys[0], "too many attributes");
    a->keys[a->n] = ir_intern(imp->ctx, key, strlen(key));
    a->vals[a->n++] = v;
}

void ia_int(Imp *imp, ImpAttrs *a, const char *key, int64_t v) {
    ia_put(imp, a, key, ir_attr_int(imp->ctx, v, RLY_DTYPE_I64, imp->span));
}
void ia_float(Imp *imp, ImpAttrs *a, const char *key, double v) {
    ia_put(imp, a, key, ir_attr_float(imp->ctx, v, RLY_DTYPE_F32, imp->span));
}
void ia_bool(Imp *imp, ImpAttrs *a, const char *key, bool v) {
    ia_put(imp, a, key, ir_attr_bool(imp->ctx, v, imp->span));
}
void ia_str(Imp *imp, ImpAttrs *a, const char *key, const char *v) {
    ia_put(imp, a, key, ir_attr_str(imp->ctx, v, strlen(v), imp->span));
}
void ia_none(Imp *imp, ImpAttrs *a, const char *key) {
    ia_put(imp, a, key, ir_attr_none(imp->ctx, imp->span));
}

static AttrValue *int_list(Imp *imp, uint32_t n, const int64_t *v) {
    AttrValue **items = arena_array(&imp->arena, n ? n : 1, sizeof *items);
    for (uint32_t i = 0; i < n; i++)
        items[i] = ir_attr_int(imp->ctx, v[i], RLY_DTYPE_I64, imp->span);
    return ir_attr_list(imp->ctx, n, items, imp->span);
}

void ia_ints(Imp *imp, ImpAttrs *a, const char *key, uint32_t n, const int64_t *v) {
    ia_put(imp, a, key, int_list(imp, n, v));
}

void ia_floats(Imp *imp, ImpAttrs *a, const char *key, uint32_t n, const double *v) {
    AttrValue **items = arena_array(&imp->arena, n ? n : 1, sizeof *items);
    for (uint32_t i = 0; i < n; i++)
        items[i] = ir_attr_float(imp->ctx, v[i], RLY_DTYPE_F32, imp->span);
    ia_put(imp, a, key, ir_attr_list(imp->ctx, n, items, imp->span));
}

void ia_pairs(Imp *imp, ImpAttrs *a, const char *key, uint32_t n_pairs, const int64_t *v) {
    AttrValue **rows = arena_array(&imp->arena, n_pairs ? n_pairs : 1, sizeof *rows);
    for (uint32_t i = 0; i < n_pairs; i++)
        rows[i] = int_list(imp, 2, v + 2 * i);
    ia_put(imp, a, key, ir_attr_list(imp->ctx, n_pairs, rows, imp->span));
}

/* ---- building ------------------------------------------------------------------------------- */

/* Evaluate a call on constants (FoldConstant's folder, src/passes/fold_constant.c, one for the
 * whole import); the call itself when it is not folded. */
static Expr *fold(Imp *imp, Expr *call, const OpDef *def) {
    (void)def;
    if (imp->opts && imp->opts->no_fold) return call;
    /* static_only: a result whose type leaves a dim unknown stays a call, as the converters
     * expect (they look at types, not values, for what they build next); quantized weights
     * (QuantizeLinear of an initializer) fold too */
    if (imp->folder == NULL) imp->folder = pass_folder_new(imp->ctx, true, true);
    bool debug = getenv("RLY_IMPORT_DEBUG") != NULL;
    StrBuf why = {0};
    Expr *c = pass_fold_call(imp->folder, call, debug ? &why : NULL);
    /* A run-time error while folding (e.g. an index out of range) keeps the call, so the error
     * is reported when (and if) the program runs. */
    if (why.len) fprintf(stderr, "[import] not folded: %s", sb_cstr(&why));
    sb_free(&why);
    if (c == NULL) return call;
    imp->n_folded++;
    return c;
}

Expr *imp_trap(Imp *imp, uint32_t ndim, const int64_t *shape, rly_dtype dt, const char *what) {
    const OxNode *nd = imp_node(imp);
    StrBuf msg = {0};
    sb_printf(&msg, "%s%s%.300s%s: %s", nd->op_type, nd->name[0] ? " '" : "", nd->name,
              nd->name[0] ? "'" : "", what);
    ImpAttrs a = {0};
    ia_ints(imp, &a, "shape", ndim, shape);
    ia_str(imp, &a, "dtype", sup_dtype_name(dt));
    ia_str(imp, &a, "message", sb_cstr(&msg));
    Expr *t = imp_call(imp, "trap", 0, NULL, &a);
    sb_free(&msg);
    return t;
}

Expr *imp_call(Imp *imp, const char *op, uint32_t n_args, Expr *const *args, const ImpAttrs *a) {
    Ctx *ctx = imp->ctx;
    Expr *opx = ir_op_get(ctx, op, strlen(op));
    const OpDef *def = op_def_of(opx); /* resolved once per name and context */
    if (def == NULL) {
        imp_error(imp, "internal error: the converter calls unknown operator %s", op);
        return NULL;
    }
    for (uint32_t i = 0; i < n_args; i++) {
        if (args[i] == NULL) return NULL; /* an earlier call failed and reported */
        if (args[i]->checked_type == NULL) {
            imp_error(imp, "internal error: argument %u of %s is untyped", i, op);
            return NULL;
        }
    }
    const Attrs *attrs = NULL;
    if (a && a->n) attrs = ir_attrs_new(ctx, a->n, a->keys, a->vals);
    Expr *call = ir_call_new(ctx, opx, n_args, args, attrs, 0, NULL, imp->span);
    const AttrValue **vals =
        arena_array(&imp->arena, def->n_attrs ? def->n_attrs : 1, sizeof *vals);
    StrBuf msg = {0};
    Span where;
    if (!op_bind_attrs(def, attrs, vals, &msg, &where)) {
        imp_error(imp, "%s: %s", op, sb_cstr(&msg));
        sb_free(&msg);
        return NULL;
    }
    Type **types = arena_array(&imp->arena, n_args ? n_args : 1, sizeof *types);
    bool all_const = true;
    for (uint32_t i = 0; i < n_args; i++) {
        types[i] = args[i]->checked_type;
        bool c = args[i]->kind == EXPR_CONSTANT;
        if (args[i]->kind == EXPR_TUPLE) {
            Tuple *tu = AS_TUPLE(args[i]);
            c = true;
            for (uint32_t j = 0; j < tu->n; j++)
                c &= tu->fields[j]->kind == EXPR_CONSTANT;
        }
        all_const &= c;
    }
    Type *out = NULL;
    int err_arg = -1;
    RelResult r = op_relate(ctx, def, vals, n_args, types, &out, &msg, &err_arg);
    if (r != REL_OK) {
        imp_error(imp, "%s: %s", op, r == REL_DEFER ? "argument types unknown" : sb_cstr(&msg));
        sb_free(&msg);
        return NULL;
    }
    sb_free(&msg);
    /* The importer computes many shapes from the model's numbers (Resize, pads, repeats): one
     * past the limit is an error here, at the node, before anything allocates by it. */
    char why[160];
    const char *bad = NULL;
    if (out->kind == TYPE_TENSOR)
        bad = sup_shape_check(AS_TENSOR_TYPE(out)->ndim, AS_TENSOR_TYPE(out)->shape, true, why,
                              sizeof why);
    for (uint32_t i = 0; out->kind == TYPE_TUPLE && i < AS_TUPLE_TYPE(out)->n && !bad; i++) {
        Type *f = AS_TUPLE_TYPE(out)->fields[i];
        if (f->kind == TYPE_TENSOR)
            bad = sup_shape_check(AS_TENSOR_TYPE(f)->ndim, AS_TENSOR_TYPE(f)->shape, true, why,
                                  sizeof why);
    }
    if (bad) {
        imp_error(imp, "%s: the result: %s", op, bad);
        return NULL;
    }
    call->checked_type = out;
    if (all_const && def->user_kernel == NULL) return fold(imp, call, def);
    return call;
}

Expr *imp_call1(Imp *imp, const char *op, Expr *x, const ImpAttrs *a) {
    if (x == NULL) return NULL;
    return imp_call(imp, op, 1, &x, a);
}

Expr *imp_call2(Imp *imp, const char *op, Expr *x, Expr *y, const ImpAttrs *a) {
    if (x == NULL || y == NULL) return NULL;
    Expr *args[2] = {x, y};
    return imp_call(imp, op, 2, args, a);
}

Expr *imp_tuple(Imp *imp, uint32_t n, Expr *const *fields) {
    Type **ft = arena_array(&imp->arena, n ? n : 1, sizeof *ft);
    for (uint32_t i = 0; i < n; i++)
        ft[i] = fields[i]->checked_type;
    Expr *t = ir_tuple_new(imp->ctx, n, fields, imp->span);
    t->checked_type = ir_type_tuple(imp->ctx, n, ft);
    return t;
}

Expr *imp_get(Imp *imp, Expr *tuple, uint32_t i) {
    if (tuple->kind == EXPR_TUPLE) return AS_TUPLE(tuple)->fields[i];
    Type *t = tuple->checked_type;
    RLY_CHECK(t && t->kind == TYPE_TUPLE && i < AS_TUPLE_TYPE(t)->n, "imp_get: not a tuple");
    Expr *g = ir_tuple_get_item_new(imp->ctx, tuple, i, imp->span);
    g->checked_type = AS_TUPLE_TYPE(t)->fields[i];
    return g;
}

Expr *imp_const_tensor(Imp *imp, rly_dtype dt, uint32_t ndim, const int64_t *shape,
                       const void *data) {
    Expr *c = ir_constant_new(imp->ctx, dt, ndim, shape, data, imp->span);
    c->checked_type = ir_type_tensor(imp->ctx, dt, ndim, shape);
    return c;
}

Expr *imp_scalar(Imp *imp, rly_dtype dt, double v) {
    Expr *c = sup_dtype_is_float(dt) ? ir_scalar_f64(imp->ctx, dt, v, imp->span)
                                     : ir_scalar_i64(imp->ctx, dt, (int64_t)v, imp->span);
    c->checked_type = ir_type_scalar(imp->ctx, dt);
    return c;
}

Expr *imp_scalar_i(Imp *imp, rly_dtype dt, int64_t v) {
    if (sup_dtype_is_float(dt)) return imp_scalar(imp, dt, (double)v);
    Expr *c = ir_scalar_i64(imp->ctx, dt, v, imp->span);
    c->checked_type = ir_type_scalar(imp->ctx, dt);
    return c;
}

Expr *imp_const_i64s(Imp *imp, uint32_t n, const int64_t *v) {
    int64_t shape[1] = {n};
    return imp_const_tensor(imp, RLY_DTYPE_I64, 1, shape, v);
}

Expr *imp_cast(Imp *imp, Expr *e, rly_dtype dt) {
    if (e == NULL) return NULL;
    if (imp_tt(e) && imp_dtype(e) == dt) return e;
    ImpAttrs a = {0};
    ia_str(imp, &a, "dtype", sup_dtype_name(dt));
    return imp_call1(imp, "cast", e, &a);
}

/* ---- tensors and value types ------------------------------------------------------------------
 */

Expr *imp_tensor_const(Imp *imp, const OxTensor *t, bool borrow) {
    int dt = ox_to_rly_dtype(t->data_type);
    if (dt < 0) {
        imp_error(imp, "tensor '%s': data type %s has no Relay counterpart", t->name,
                  ox_type_name(t->data_type));
        return NULL;
    }
    if (t->ndim > 32) {
        imp_error(imp, "tensor '%s' has rank %u (at most 32)", t->name, t->ndim);
        return NULL;
    }
    char why[160];
    if (sup_shape_check(t->ndim, t->dims, false, why, sizeof why) != NULL) {
        imp_error(imp, "tensor '%s': %s", t->name, why);
        return NULL;
    }
    Expr *c;
    if (OX_IS_FLOAT8(t->data_type) && t->data != NULL && t->count > 0) {
        /* emulated: each byte's value as a float32 */
        float *f = arena_array(&imp->arena, (size_t)t->count, sizeof *f);
        const uint8_t *b = t->data;
        for (int64_t i = 0; i < t->count; i++)
            f[i] = ox_float8_value(t->data_type, b[i]);
        c = ir_constant_new(imp->ctx, (rly_dtype)dt, t->ndim, t->dims, f, imp->span);
    } else if (borrow && t->data != NULL && t->count > 0) {
        c = ir_constant_borrow(imp->ctx, (rly_dtype)dt, t->ndim, t->dims, t->data, imp->span);
    } else {
        c = ir_constant_new(imp->ctx, (rly_dtype)dt, t->ndim, t->dims, t->data, imp->span);
    }
    c->checked_type = ir_type_tensor(imp->ctx, (rly_dtype)dt, t->ndim, t->dims);
    imp_emul_mark(imp, c, t->data_type);
    return c;
}

/* ---- sequences and optionals: types ---------------------------------------------------------
 */

Module *imp_module(Imp *imp) {
    if (ir_module_lookup_type(imp->mod, "List", 4) == NULL) {
        const char *t = ty_prelude_text();
        Module *m = text_parse_into(imp->ctx, imp->mod, "prelude.rly", t, strlen(t), NULL, 0);
        RLY_CHECK(m != NULL, "the prelude does not parse");
    }
    return imp->mod;
}

static Type *adt_type(Imp *imp, const char *name, Type *arg) {
    TypeData *td = ir_module_lookup_type(imp_module(imp), name, strlen(name));
    RLY_CHECK(td != NULL, "the prelude has no type %s", name);
    return ir_type_call(imp->ctx, &td->header->base, 1, &arg);
}

Type *imp_list_type(Imp *imp, Type *elem) { return adt_type(imp, "List", elem); }
Type *imp_option_type(Imp *imp, Type *t) { return adt_type(imp, "Option", t); }

/* The argument of t = NAME[arg], resolved; NULL when t is something else. */
static Type *adt_arg(Imp *imp, Type *t, const char *name) {
    if (t == NULL || t->kind != TYPE_CALL) return NULL;
    TypeCall *c = AS_TYPE_CALL(t);
    if (c->func->kind != TYPE_GLOBAL_VAR || c->n_args != 1 ||
        strcmp(AS_GLOBAL_TYPE_VAR(c->func)->name, name) != 0)
        return NULL;
    return imp_resolve(imp, c->args[0]);
}

Type *imp_list_elem(Imp *imp, Type *t) { return adt_arg(imp, t, "List"); }
Type *imp_option_elem(Imp *imp, Type *t) { return adt_arg(imp, t, "Option"); }

static ElemVar *elem_var(Imp *imp, Type *t) {
    if (t == NULL || t->kind != TYPE_INCOMPLETE) return NULL;
    for (size_t i = 0; i < imp->elems.len; i++)
        if (imp->elems.data[i].u == t) return &imp->elems.data[i];
    return NULL;
}

/* The ElemVar t stands for at the end of its chain of bindings, or NULL when t is known (or not
 * an ElemVar). */
static ElemVar *elem_root(Imp *imp, Type *t) {
    ElemVar *v = elem_var(imp, t);
    while (v && v->bound) {
        ElemVar *w = elem_var(imp, v->bound);
        if (w == NULL) return NULL;
        v = w;
    }
    return v;
}

Type *imp_elem_new(Imp *imp, int dtype, int32_t rank_hint, const char *what) {
    ElemVar v = {.u = ir_type_incomplete_new(imp->ctx, KIND_TYPE),
                 .dtype = dtype,
                 .hint = rank_hint,
                 .node = imp->node,
                 .what = what};
    vec_push(&imp->elems, v);
    return v.u;
}

/* The tensor type of rank n with every dim `?`. */
static Type *tensor_any(Imp *imp, rly_dtype dt, uint32_t n) {
    int64_t *d = arena_array(&imp->arena, n + 1, sizeof *d);
    for (uint32_t i = 0; i < n; i++)
        d[i] = DIM_ANY;
    return ir_type_tensor(imp->ctx, dt, n, d);
}

Type *imp_any_dims(Imp *imp, Type *t) {
    if (t == NULL) return NULL;
    switch ((TypeKind)t->kind) {
    case TYPE_TENSOR: return tensor_any(imp, AS_TENSOR_TYPE(t)->dtype, AS_TENSOR_TYPE(t)->ndim);
    case TYPE_TUPLE: {
        TupleType *tu = AS_TUPLE_TYPE(t);
        Type **f = arena_array(&imp->arena, tu->n + 1, sizeof *f);
        for (uint32_t i = 0; i < tu->n; i++)
            f[i] = imp_any_dims(imp, tu->fields[i]);
        return ir_type_tuple(imp->ctx, tu->n, f);
    }
    case TYPE_CALL: {
        TypeCall *c = AS_TYPE_CALL(t);
        Type **a = arena_array(&imp->arena, c->n_args + 1, sizeof *a);
        for (uint32_t i = 0; i < c->n_args; i++)
            a[i] = imp_any_dims(imp, c->args[i]);
        return ir_type_call(imp->ctx, c->func, c->n_args, a);
    }
    default: return t;
    }
}

/* t with every ElemVar that is known replaced by what it stands for; force: the unknown ones
 * take their hint, and one without a hint is reported (at the current node) and gives NULL. */
static Type *subst(Imp *imp, Type *t, bool force) {
    if (t == NULL) return NULL;
    switch ((TypeKind)t->kind) {
    case TYPE_INCOMPLETE: {
        ElemVar *v = elem_var(imp, t);
        if (v == NULL) return t;
        ElemVar *r = elem_root(imp, t);
        if (r == NULL) { /* known: the end of the chain */
            while (elem_var(imp, v->bound))
                v = elem_var(imp, v->bound);
            return v->bound;
        }
        if (!force) return r->u;
        if (r->hint < 0 || r->dtype < 0) {
            StrBuf help = {0};
            if (r->input)
                sb_printf(&help, "; give it with --input-shapes '%s:[?,?]' (one ? per axis)",
                          r->input);
            if (imp->node)
                imp_error(imp,
                          "the rank of the tensors in %s is not known here: no type gives it "
                          "and no tensor was put in before%s",
                          r->what, sb_cstr(&help));
            else
                imp_error(imp,
                          "the rank of the tensors in %s is never known: no type gives it and "
                          "no tensor is put in%s",
                          r->what, sb_cstr(&help));
            sb_free(&help);
            return NULL;
        }
        r->bound = tensor_any(imp, (rly_dtype)r->dtype, (uint32_t)r->hint);
        return r->bound;
    }
    case TYPE_TUPLE: {
        TupleType *tu = AS_TUPLE_TYPE(t);
        Type **f = arena_array(&imp->arena, tu->n + 1, sizeof *f);
        bool same = true;
        for (uint32_t i = 0; i < tu->n; i++) {
            if ((f[i] = subst(imp, tu->fields[i], force)) == NULL) return NULL;
            same &= f[i] == tu->fields[i];
        }
        return same ? t : ir_type_tuple(imp->ctx, tu->n, f);
    }
    case TYPE_CALL: {
        TypeCall *c = AS_TYPE_CALL(t);
        Type **a = arena_array(&imp->arena, c->n_args + 1, sizeof *a);
        bool same = true;
        for (uint32_t i = 0; i < c->n_args; i++) {
            if ((a[i] = subst(imp, c->args[i], force)) == NULL) return NULL;
            same &= a[i] == c->args[i];
        }
        return same ? t : ir_type_call(imp->ctx, c->func, c->n_args, a);
    }
    case TYPE_FUNC: {
        FuncType *f = AS_FUNC_TYPE(t);
        Type **p = arena_array(&imp->arena, f->n_params + 1, sizeof *p);
        bool same = true;
        for (uint32_t i = 0; i < f->n_params; i++) {
            if ((p[i] = subst(imp, f->params[i], force)) == NULL) return NULL;
            same &= p[i] == f->params[i];
        }
        Type *r = subst(imp, f->ret, force);
        if (r == NULL) return NULL;
        if (same && r == f->ret) return t;
        return ir_type_func(imp->ctx, f->n_params, p, r, f->n_tparams, f->tparams, f->n_constraints,
                            f->constraints);
    }
    default: return t;
    }
}

Type *imp_resolve(Imp *imp, Type *t) { return subst(imp, t, false); }
Type *imp_force(Imp *imp, Type *t) { return subst(imp, t, true); }

bool imp_elem_unify(Imp *imp, Type *a, Type *b) {
    a = imp_resolve(imp, a), b = imp_resolve(imp, b);
    if (a == b) return true;
    ElemVar *va = elem_var(imp, a), *vb = elem_var(imp, b);
    if (va && vb) {
        if (va->dtype >= 0 && vb->dtype >= 0 && va->dtype != vb->dtype) return false;
        if (vb->dtype < 0) vb->dtype = va->dtype;
        if (vb->hint < 0) vb->hint = va->hint;
        va->bound = vb->u;
        return true;
    }
    if (va || vb) {
        ElemVar *v = va ? va : vb;
        Type *t = va ? b : a;
        if (t->kind != TYPE_TENSOR) return false;
        TensorType *tt = AS_TENSOR_TYPE(t);
        if (v->dtype >= 0 && v->dtype != (int)tt->dtype) return false;
        v->bound = tensor_any(imp, tt->dtype, tt->ndim);
        return true;
    }
    return imp_join(imp, a, b) != NULL;
}

/* Two types of one value from two paths (If branches, loop iterations): equal, or the same
 * dtype and rank with differing dims made `?`, containers joined element-wise (fixing unknown
 * element types); NULL when they cannot join. */
Type *imp_join(Imp *imp, Type *a, Type *b) {
    a = imp_resolve(imp, a), b = imp_resolve(imp, b);
    if (a == b) return a;
    if (elem_var(imp, a) || elem_var(imp, b))
        return imp_elem_unify(imp, a, b) ? imp_resolve(imp, a) : NULL;
    if (a->kind == TYPE_TENSOR && b->kind == TYPE_TENSOR) {
        TensorType *x = AS_TENSOR_TYPE(a), *y = AS_TENSOR_TYPE(b);
        if (x->dtype != y->dtype || x->ndim != y->ndim) return NULL;
        int64_t *d = arena_array(&imp->arena, x->ndim + 1, sizeof *d);
        for (uint32_t i = 0; i < x->ndim; i++)
            d[i] = x->shape[i] == y->shape[i] ? x->shape[i] : DIM_ANY;
        return ir_type_tensor(imp->ctx, x->dtype, x->ndim, d);
    }
    if (a->kind == TYPE_TUPLE && b->kind == TYPE_TUPLE &&
        AS_TUPLE_TYPE(a)->n == AS_TUPLE_TYPE(b)->n) {
        uint32_t n = AS_TUPLE_TYPE(a)->n;
        Type **f = arena_array(&imp->arena, n ? n : 1, sizeof *f);
        for (uint32_t i = 0; i < n; i++)
            if ((f[i] = imp_join(imp, AS_TUPLE_TYPE(a)->fields[i], AS_TUPLE_TYPE(b)->fields[i])) ==
                NULL)
                return NULL;
        return ir_type_tuple(imp->ctx, n, f);
    }
    if (a->kind == TYPE_CALL && b->kind == TYPE_CALL) {
        TypeCall *x = AS_TYPE_CALL(a), *y = AS_TYPE_CALL(b);
        if (x->func != y->func || x->n_args != y->n_args) return NULL;
        Type **f = arena_array(&imp->arena, x->n_args + 1, sizeof *f);
        for (uint32_t i = 0; i < x->n_args; i++)
            if ((f[i] = imp_join(imp, x->args[i], y->args[i])) == NULL) return NULL;
        return ir_type_call(imp->ctx, x->func, x->n_args, f);
    }
    return NULL;
}

/* The Relay type of an ONNX type. Tensors keep their dims (`?` where unknown; rank unknown is an
 * error); the tensors in sequences and optionals get every dim `?`, their rank from the type,
 * or (soft, graph inputs) an ElemVar whose hint is that rank (rank_override >= 0 replaces it).
 * NULL after an error about `what`. */
static Type *onnx_type(Imp *imp, const OxType *t, const char *what, bool soft,
                       int32_t rank_override) {
    static const char *const kinds[] = {"unknown", "tensor",   "sequence",
                                        "map",     "optional", "sparse tensor"};
    const char *kind = t->kind < RLY_ARRAY_LEN(kinds) ? kinds[t->kind] : "unknown";
    if (t->kind == OXT_TENSOR) {
        int dt = ox_to_rly_dtype(t->elem_type);
        if (dt < 0) {
            imp_error(imp, "%s: data type %s has no Relay counterpart", what,
                      ox_type_name(t->elem_type));
            return NULL;
        }
        if (t->ndim < 0) {
            imp_error(imp, "%s has no shape (its rank is needed)", what);
            return NULL;
        }
        int64_t *dims = arena_array(&imp->arena, (size_t)t->ndim + 1, sizeof *dims);
        for (int32_t i = 0; i < t->ndim; i++)
            dims[i] = t->dims[i].value >= 0 ? t->dims[i].value : DIM_ANY;
        return ir_type_tensor(imp->ctx, (rly_dtype)dt, (uint32_t)t->ndim, dims);
    }
    if (t->kind == OXT_NONE) {
        imp_error(imp, "%s has no type", what);
        return NULL;
    }
    if (t->kind != OXT_SEQUENCE && t->kind != OXT_OPTIONAL) {
        imp_error(imp, "%s: %s types are not supported (tensors, sequences and optionals only)",
                  what, kind);
        return NULL;
    }
    const OxType *e = t->elem;
    Type *inner = NULL;
    if (e != NULL && e->kind == OXT_TENSOR) {
        int dt = ox_to_rly_dtype(e->elem_type);
        if (dt < 0) {
            imp_error(imp, "%s: data type %s has no Relay counterpart", what,
                      ox_type_name(e->elem_type));
            return NULL;
        }
        int32_t rank = rank_override >= 0 ? rank_override : e->ndim;
        if (soft || rank < 0)
            inner = imp_elem_new(imp, dt, rank, what);
        else
            inner = tensor_any(imp, (rly_dtype)dt, (uint32_t)rank);
    } else if (e != NULL && e->kind == OXT_SEQUENCE && t->kind == OXT_OPTIONAL) {
        inner = onnx_type(imp, e, what, soft, rank_override);
        if (inner == NULL) return NULL;
    } else {
        imp_error(imp,
                  "%s: %ss of %s are not supported (sequences of tensors, optional tensors "
                  "and optional sequences only)",
                  what, kind, e == NULL ? "unknown type" : kinds[e->kind < 6 ? e->kind : 0]);
        return NULL;
    }
    return t->kind == OXT_SEQUENCE ? imp_list_type(imp, inner) : imp_option_type(imp, inner);
}

Type *imp_onnx_type(Imp *imp, const OxType *t, const char *what) {
    return onnx_type(imp, t, what, false, -1);
}

/* The Relay type of a graph input's ONNX type; NULL after an error. */
static Type *value_type(Imp *imp, const OxValueInfo *vi, const ImpShape *override) {
    const OxNode *saved = imp->node;
    Span sspan = imp->span;
    imp->node = NULL; /* errors at the graph, not at a node */
    imp->span = (Span){imp->file, 0, 0};
    Type *t = NULL;
    char why[160];
    const char *bad = NULL;
    if (vi->type.kind == OXT_TENSOR && override)
        bad = sup_shape_check(override->ndim, override->dims, true, why, sizeof why);
    if (vi->type.kind == OXT_TENSOR && !override && vi->type.ndim > 0) {
        int64_t *dims = arena_array(&imp->arena, (size_t)vi->type.ndim, sizeof *dims);
        for (int32_t i = 0; i < vi->type.ndim; i++)
            dims[i] = vi->type.dims[i].value;
        bad = sup_shape_check((uint32_t)vi->type.ndim, dims, true, why, sizeof why);
    }
    if (bad) {
        graph_error(imp, "value '%s': %s", vi->name, bad);
    } else if (vi->type.kind == OXT_TENSOR && override) {
        int dt = ox_to_rly_dtype(vi->type.elem_type);
        if (dt < 0)
            graph_error(imp, "value '%s': data type %s has no Relay counterpart", vi->name,
                        ox_type_name(vi->type.elem_type));
        else
            t = ir_type_tensor(imp->ctx, (rly_dtype)dt, override->ndim, override->dims);
    } else if (vi->type.kind == OXT_TENSOR && vi->type.ndim < 0) {
        graph_error(imp,
                    "value '%s' has no shape (its rank is needed); give it with --input-shapes",
                    vi->name);
    } else {
        StrBuf w = {0};
        sb_printf(&w, "%s '%s'", vi->type.kind == OXT_TENSOR ? "value" : "graph input", vi->name);
        const char *what = arena_strndup(&imp->arena, sb_cstr(&w), w.len);
        sb_free(&w);
        size_t first = imp->elems.len;
        t = onnx_type(imp, &vi->type, what, true, override ? (int32_t) override->ndim : -1);
        for (size_t i = first; i < imp->elems.len; i++)
            imp->elems.data[i].input = vi->name;
    }
    imp->node = saved, imp->span = sspan;
    return t;
}

Var *imp_var(Imp *imp, const char *name, Type *t) {
    Var *v = ir_var_new(imp->ctx, ir_intern(imp->ctx, name, strlen(name)), t, SPAN_NONE);
    v->base.checked_type = t;
    return v;
}

Expr *imp_upcast(Imp *imp, Expr *x, Type *t) {
    if (x == NULL || x->checked_type == t) return x;
    Var *v = imp_var(imp, "v", t);
    Expr *e = ir_let_new(imp->ctx, v, x, &v->base, imp->span);
    e->checked_type = t;
    return e;
}

Expr *imp_if(Imp *imp, Expr *cond, Expr *then_e, Expr *else_e) {
    if (cond == NULL || then_e == NULL || else_e == NULL) return NULL;
    Type *t = imp_join(imp, then_e->checked_type, else_e->checked_type);
    if (t == NULL) {
        imp_error(imp,
                  "internal: the two branches of a conditional have different dtypes or ranks");
        return NULL;
    }
    Expr *e = ir_if_new(imp->ctx, cond, imp_upcast(imp, then_e, t), imp_upcast(imp, else_e, t),
                        imp->span);
    e->checked_type = t;
    return e;
}

/* ---- the graph walk -----------------------------------------------------------------------------
 */

/* ---- the graph walk -----------------------------------------------------------------------------
 */

/* Names a subgraph reads from enclosing scopes (used, not defined inside), transitively, appended
 * to out (deduplicated through seen). Nesting depth is bounded by the reader (OX_MAX_DEPTH). */
static void free_names(const OxGraph *g, PtrVec *out, StrMap *seen) {
    StrMap defined = {0};
    for (uint32_t i = 0; i < g->n_inputs; i++)
        strmap_put(&defined, g->inputs[i].name, strlen(g->inputs[i].name), (void *)1);
    for (uint32_t i = 0; i < g->n_inits; i++)
        strmap_put(&defined, g->inits[i].name, strlen(g->inits[i].name), (void *)1);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        for (uint32_t k = 0; k < g->nodes[i].n_outputs; k++)
            strmap_put(&defined, g->nodes[i].outputs[k], strlen(g->nodes[i].outputs[k]), (void *)1);
    PtrVec used = {0};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const OxNode *nd = &g->nodes[i];
        for (uint32_t k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k][0]) vec_push(&used, (void *)nd->inputs[k]);
        for (uint32_t a = 0; a < nd->n_attrs; a++) {
            StrMap inner_seen = {0};
            if (nd->attrs[a].g) free_names(nd->attrs[a].g, &used, &inner_seen);
            for (uint32_t j = 0; j < nd->attrs[a].n_graphs; j++)
                free_names(nd->attrs[a].graphs[j], &used, &inner_seen);
            strmap_free(&inner_seen);
        }
    }
    for (size_t i = 0; i < used.len; i++) {
        const char *s = used.data[i];
        size_t n = strlen(s);
        if (strmap_get(&defined, s, n) || strmap_get(seen, s, n)) continue;
        strmap_put(seen, s, n, (void *)1);
        vec_push(out, (void *)s);
    }
    vec_free(&used);
    strmap_free(&defined);
}

static Span node_span(Imp *imp, const OxNode *nd) {
    uintptr_t off = (uintptr_t)ptrmap_get(&imp->node_off, nd);
    if (off == 0) return (Span){imp->file, 0, 0};
    const char *line = imp->src + off - 1;
    const char *end = strchr(line, '\n');
    return (Span){imp->file, (uint32_t)(off - 1), (uint32_t)(off - 1 + (size_t)(end - line))};
}

static bool conv_if(Imp *imp);
static bool conv_loop(Imp *imp);
static bool conv_scan(Imp *imp);
static bool conv_scan8(Imp *imp);
static bool conv_identity(Imp *imp);

/* Does the converter take sequences and optionals? The others read every input as a tensor. */
static bool takes_containers(const ImpConv *cv) {
    for (const ImpConv *c = imp_conv_seq; c->op_type; c++)
        if (c == cv) return true;
    return cv->fn == conv_if || cv->fn == conv_loop || cv->fn == conv_scan ||
           cv->fn == conv_scan8 || cv->fn == conv_identity;
}

static bool convert_node(Imp *imp, const OxNode *nd) {
    imp->node = nd;
    imp->span = node_span(imp, nd);
    imp->opset = ox_opset(imp->model, nd->domain);
    if (imp->opset == 0 && nd->domain[0] && strcmp(nd->domain, "ai.onnx") != 0) imp->opset = 1;
    const ImpConv *cv = imp_find_conv(nd->op_type, nd->domain, imp->opset);
    if (cv == NULL) return imp_error(imp, "unsupported operator");
    for (uint32_t i = 0; i < nd->n_inputs; i++)
        if (nd->inputs[i][0] && lookup(imp, nd->inputs[i]) == NULL)
            return imp_error(imp,
                             "input %u '%s' is not produced by any node, nor a graph input or "
                             "initializer",
                             i, nd->inputs[i]);
    for (uint32_t i = 0; i < nd->n_inputs && !takes_containers(cv); i++) {
        Expr *e = nd->inputs[i][0] ? lookup(imp, nd->inputs[i]) : NULL;
        if (e == NULL || imp_tt(e) != NULL) continue;
        StrBuf t = {0};
        ir_print_type(imp->ctx, imp_resolve(imp, imp_type(e)), &t);
        imp_error(imp, "input %u '%s' has type %s, but %s takes tensors only", i, nd->inputs[i],
                  sb_cstr(&t), nd->op_type);
        sb_free(&t);
        return false;
    }
    imp->outs = arena_array(&imp->arena, nd->n_outputs ? nd->n_outputs : 1, sizeof *imp->outs);
    size_t errs = imp->ctx->diags.n_errors;
    if (!cv->fn(imp)) {
        if (imp->ctx->diags.n_errors == errs) imp_error(imp, "conversion failed");
        return false;
    }
    for (uint32_t k = 0; k < nd->n_outputs; k++) {
        if (nd->outputs[k][0] == '\0') continue;
        if (imp->outs[k] == NULL)
            return imp_error(imp, "output %u '%s' is not supported by this converter", k,
                             nd->outputs[k]);
        define(imp, nd->outputs[k], imp->outs[k]);
    }
    imp->node = NULL;
    return true;
}

/* Convert g's nodes in dependency order into the current scope (whose graph inputs and
 * initializers are defined already). */
static bool convert_nodes(Imp *imp, const OxGraph *g) {
    uint32_t n = g->n_nodes;
    bool ok = true;
    StrMap producer = {0};
    for (uint32_t i = 0; i < n && ok; i++)
        for (uint32_t k = 0; k < g->nodes[i].n_outputs; k++) {
            const char *o = g->nodes[i].outputs[k];
            if (!o[0]) continue;
            uintptr_t prev = (uintptr_t)strmap_get(&producer, o, strlen(o));
            if (prev) {
                imp->node = &g->nodes[i];
                imp->span = node_span(imp, imp->node);
                ok =
                    imp_error(imp, "value '%s' is also produced by node %u", o, (unsigned)prev - 1);
                imp->node = NULL;
                break;
            }
            strmap_put(&producer, o, strlen(o), (void *)(uintptr_t)(i + 1));
        }
    /* Edges producer -> consumer (an input, or a name a subgraph of the node reads). */
    uint32_t *indeg = sup_calloc(n ? n : 1, sizeof *indeg);
    Vec(uint32_t) from = {0}, to = {0};
    for (uint32_t i = 0; i < n && ok; i++) {
        const OxNode *nd = &g->nodes[i];
        PtrVec names = {0};
        StrMap seen = {0};
        for (uint32_t k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k][0]) vec_push(&names, (void *)nd->inputs[k]);
        for (uint32_t a = 0; a < nd->n_attrs; a++) {
            if (nd->attrs[a].g) free_names(nd->attrs[a].g, &names, &seen);
            for (uint32_t j = 0; j < nd->attrs[a].n_graphs; j++)
                free_names(nd->attrs[a].graphs[j], &names, &seen);
        }
        for (size_t k = 0; k < names.len; k++) {
            const char *s = names.data[k];
            uintptr_t p = (uintptr_t)strmap_get(&producer, s, strlen(s));
            if (p == 0) continue;
            vec_push(&from, (uint32_t)(p - 1));
            vec_push(&to, i);
            indeg[i]++;
        }
        vec_free(&names);
        strmap_free(&seen);
    }
    /* Kahn's algorithm, preferring file order (a ready queue scanned in index order). */
    uint32_t *start = sup_calloc((size_t)n + 1, sizeof *start);
    uint32_t *adj = sup_calloc(from.len ? from.len : 1, sizeof *adj);
    for (size_t e = 0; e < from.len; e++)
        start[from.data[e] + 1]++;
    for (uint32_t i = 0; i < n; i++)
        start[i + 1] += start[i];
    uint32_t *fill = sup_calloc(n ? n : 1, sizeof *fill);
    for (size_t e = 0; e < from.len; e++)
        adj[start[from.data[e]] + fill[from.data[e]]++] = to.data[e];
    Vec(uint32_t) ready = {0};
    for (uint32_t i = n; i-- > 0;)
        if (indeg[i] == 0) vec_push(&ready, i);
    uint32_t done = 0;
    while (ok && ready.len > 0) {
        uint32_t i = vec_pop(&ready);
        if (!convert_node(imp, &g->nodes[i])) {
            ok = false;
            break;
        }
        done++;
        for (uint32_t e = start[i]; e < start[i + 1]; e++)
            if (--indeg[adj[e]] == 0) vec_push(&ready, adj[e]);
    }
    if (ok && done < n) {
        for (uint32_t i = 0; i < n; i++)
            if (indeg[i] > 0) {
                imp->node = &g->nodes[i];
                imp->span = node_span(imp, imp->node);
                imp_error(imp, "the graph has a cycle through this node");
                imp->node = NULL;
                break;
            }
        ok = false;
    }
    vec_free(&ready);
    free(fill);
    free(adj);
    free(start);
    vec_free(&from);
    vec_free(&to);
    free(indeg);
    strmap_free(&producer);
    return ok;
}

static void scope_push(Imp *imp, Scope *s, bool boundary) {
    memset(s, 0, sizeof *s);
    s->up = imp->scope;
    s->boundary = boundary;
    imp->scope = s;
}

static void scope_pop(Imp *imp) {
    Scope *s = imp->scope;
    imp->scope = s->up;
    strmap_free(&s->names);
    vec_free(&s->cap_outer);
    vec_free(&s->cap_inner);
}

/* Define g's initializers as constants in the current scope. */
static bool define_inits(Imp *imp, const OxGraph *g) {
    for (uint32_t i = 0; i < g->n_inits; i++) {
        Expr *c = imp_tensor_const(imp, &g->inits[i], true);
        if (c == NULL) return false;
        define(imp, g->inits[i].name, c);
    }
    return true;
}

/* The expressions of g's outputs (after its nodes were converted in the current scope). */
static Expr **graph_outputs(Imp *imp, const OxGraph *g) {
    Expr **outs = arena_array(&imp->arena, g->n_outputs ? g->n_outputs : 1, sizeof *outs);
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        outs[i] = lookup(imp, g->outputs[i].name);
        if (outs[i] == NULL) {
            graph_error(imp, "graph '%s': output '%s' is not produced by any node", g->name,
                        g->outputs[i].name);
            return NULL;
        }
    }
    return outs;
}

static Expr *pack(Imp *imp, uint32_t n, Expr **es) {
    return n == 1 ? es[0] : imp_tuple(imp, n, es);
}

/* A one-element tensor as a scalar of its dtype. */
static Expr *to_scalar(Imp *imp, Expr *e) {
    if (imp_rank(e) == 0) return e;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "newshape", 0, NULL);
    return imp_call1(imp, "reshape", e, &a);
}

/* ---- control flow ------------------------------------------------------------------------------
 */

static const OxGraph *graph_attr(Imp *imp, const char *name) {
    const OxAttr *a = imp_attr(imp, name);
    if (a == NULL || a->g == NULL) {
        imp_error(imp, "attribute '%s' (a graph) is required", name);
        return NULL;
    }
    return a->g;
}

/* Convert subgraph g inline in a child scope, its first n inputs bound to vals (If branches bind
 * none); returns its outputs, NULL after an error. The node being converted is restored
 * afterwards. */
static Expr **inline_graph(Imp *imp, const OxGraph *g, uint32_t n, Expr *const *vals) {
    const OxNode *saved = imp->node;
    Span sspan = imp->span;
    int64_t sopset = imp->opset;
    Expr **souts = imp->outs;
    Scope s;
    scope_push(imp, &s, false);
    Expr **outs = NULL;
    if (define_inits(imp, g)) {
        for (uint32_t k = 0; k < n; k++)
            define(imp, g->inputs[k].name, vals[k]);
        if (convert_nodes(imp, g)) outs = graph_outputs(imp, g);
    }
    scope_pop(imp);
    imp->node = saved, imp->span = sspan, imp->opset = sopset, imp->outs = souts;
    return outs;
}

Expr **imp_convert_body(Imp *imp, const OxGraph *g, uint32_t n, Expr *const *vals,
                        PtrVec *cap_outer, PtrVec *cap_inner) {
    const OxNode *saved = imp->node;
    Span sspan = imp->span;
    int64_t sopset = imp->opset;
    Expr **souts = imp->outs;
    Scope s;
    scope_push(imp, &s, true);
    Expr **outs = NULL;
    if (define_inits(imp, g)) {
        for (uint32_t k = 0; k < n && k < g->n_inputs; k++)
            define(imp, g->inputs[k].name, vals[k]);
        if (convert_nodes(imp, g)) outs = graph_outputs(imp, g);
    }
    for (size_t k = 0; k < s.cap_outer.len; k++) {
        vec_push(cap_outer, s.cap_outer.data[k]);
        vec_push(cap_inner, s.cap_inner.data[k]);
    }
    scope_pop(imp);
    imp->node = saved, imp->span = sspan, imp->opset = sopset, imp->outs = souts;
    return outs;
}

/* Remove the diagnostics from index mark on and return their messages joined by "; " (malloc'ed).
 */
static char *take_errors(Imp *imp, size_t mark, size_t errs) {
    Diags *ds = &imp->ctx->diags;
    StrBuf sb = {0};
    for (size_t i = mark; i < ds->items.len; i++) {
        if (ds->items.data[i].level == DIAG_ERROR)
            sb_printf(&sb, "%s%s", sb.len ? "; " : "", ds->items.data[i].msg);
        free(ds->items.data[i].msg);
    }
    ds->items.len = mark;
    ds->n_errors = errs;
    return sb_take(&sb);
}

static bool conv_if(Imp *imp) {
    Expr *cond = imp_tin(imp, 0, "cond");
    const OxGraph *gt = graph_attr(imp, "then_branch"), *ge = graph_attr(imp, "else_branch");
    if (!cond || !gt || !ge) return false;
    if (gt->n_outputs != imp_n_outputs(imp) || ge->n_outputs != imp_n_outputs(imp))
        return imp_error(imp, "the branches give %u and %u outputs, the node names %u",
                         gt->n_outputs, ge->n_outputs, imp_n_outputs(imp));
    cond = to_scalar(imp, cond);
    if (cond == NULL) return false;
    if (imp_dtype(cond) != RLY_DTYPE_BOOL) cond = imp_cast(imp, cond, RLY_DTYPE_BOOL);
    if (cond == NULL) return false;
    double cv;
    if (imp_const_f64(cond, &cv)) { /* decided at import time */
        Expr **o = inline_graph(imp, cv != 0 ? gt : ge, 0, NULL);
        if (o == NULL) return false;
        for (uint32_t i = 0; i < imp_n_outputs(imp); i++)
            imp_out(imp, i, o[i]);
        return true;
    }
    /* A branch that cannot be converted for these (static) shapes while the other can becomes a
     * runtime error with the reason: ONNX only checks the branch taken (Silero VAD's 8 kHz path
     * with a 16 kHz chunk size). */
    Diags *ds = &imp->ctx->diags;
    size_t mark = ds->items.len, errs = ds->n_errors;
    Expr **ot = inline_graph(imp, gt, 0, NULL);
    char *t_err = ot ? NULL : take_errors(imp, mark, errs);
    Expr **oe = inline_graph(imp, ge, 0, NULL);
    char *e_err = oe ? NULL : take_errors(imp, mark, errs);
    uint32_t n = imp_n_outputs(imp);
    if ((ot == NULL) != (oe == NULL)) {
        Expr **good = ot ? ot : oe, **bad = arena_array(&imp->arena, n + 1, sizeof *bad);
        StrBuf msg = {0};
        sb_printf(&msg, "the %s branch cannot run with these input shapes: %s",
                  ot ? "else" : "then", ot ? e_err : t_err);
        for (uint32_t i = 0; i < n && bad; i++) {
            TensorType *tt = imp_tt(good[i]);
            if (tt == NULL) {
                bad = NULL;
                break;
            }
            bad[i] = imp_trap(imp, tt->ndim, tt->shape, tt->dtype, sb_cstr(&msg));
            if (bad[i] == NULL) bad = NULL;
        }
        sb_free(&msg);
        if (bad) {
            if (ot == NULL)
                ot = bad;
            else
                oe = bad;
        }
    }
    if (ot == NULL || oe == NULL) {
        /* report the reasons again */
        if (t_err) imp_error(imp, "then branch: %s", t_err);
        if (e_err) imp_error(imp, "else branch: %s", e_err);
        free(t_err);
        free(e_err);
        return false;
    }
    free(t_err);
    free(e_err);
    Expr *t = pack(imp, n, ot), *e = pack(imp, n, oe);
    Type *ty = imp_join(imp, t->checked_type, e->checked_type);
    if (ty == NULL) {
        StrBuf a = {0}, b = {0};
        ir_print_type(imp->ctx, imp_resolve(imp, t->checked_type), &a);
        ir_print_type(imp->ctx, imp_resolve(imp, e->checked_type), &b);
        imp_error(imp, "the branches give outputs of different dtypes or ranks: %s and %s",
                  sb_cstr(&a), sb_cstr(&b));
        sb_free(&a);
        sb_free(&b);
        return false;
    }
    Expr *r = ir_if_new(imp->ctx, cond, t, e, imp->span);
    r->checked_type = ty;
    if (n == 1)
        imp_out(imp, 0, r);
    else
        for (uint32_t i = 0; i < n; i++)
            imp_out(imp, i, imp_get(imp, r, i));
    return true;
}

static Var *typed_var(Imp *imp, const char *name, Type *t) { return imp_var(imp, name, t); }

/* Loop: a let-bound recursive function
 *   %loop(%i, %cond, %v..., %rows..., %captured...) =
 *     if (%i < %M && %cond) { body; %loop(%i + 1, cond_out, v_out..., Cons(s, %rows)...) }
 *     else (%v..., %rows...)
 * Loop-carried values are typed with `?` dims (they may change shape between iterations); the
 * rows of each scan output are collected in a list and joined after the loop (imp_rows_*: each
 * row is copied O(log n) times, not once per later iteration). */
static bool conv_loop(Imp *imp) {
    Ctx *ctx = imp->ctx;
    const OxGraph *body = graph_attr(imp, "body");
    if (body == NULL) return false;
    Expr *max_trip = imp_in(imp, 0), *cond0 = imp_in(imp, 1);
    if ((max_trip && imp_tt(max_trip) == NULL) || (cond0 && imp_tt(cond0) == NULL))
        return imp_error(imp, "inputs 0 (M) and 1 (cond) must be tensors");
    uint32_t n_carried = imp_n_inputs(imp) > 2 ? imp_n_inputs(imp) - 2 : 0;
    if (body->n_inputs != n_carried + 2)
        return imp_error(imp, "the body takes %u inputs, expected %u (iteration, cond, %u carried)",
                         body->n_inputs, n_carried + 2, n_carried);
    if (body->n_outputs < n_carried + 1)
        return imp_error(imp, "the body gives %u outputs, expected at least %u", body->n_outputs,
                         n_carried + 1);
    uint32_t n_scan = body->n_outputs - 1 - n_carried;
    if (imp_n_outputs(imp) > n_carried + n_scan)
        return imp_error(imp, "the node names %u outputs, the body gives %u", imp_n_outputs(imp),
                         n_carried + n_scan);
    Expr **init = arena_array(&imp->arena, n_carried + 1, sizeof *init);
    for (uint32_t k = 0; k < n_carried; k++)
        if ((init[k] = imp_in_req(imp, 2 + k, "loop-carried value")) == NULL) return false;
    const OxNode *self = imp->node;
    Span span = imp->span;
    int64_t opset = imp->opset;
    Expr **outs = imp->outs;

    /* Parameters of the loop function (first part). */
    Type *i64 = ir_type_scalar(ctx, RLY_DTYPE_I64), *tbool = ir_type_scalar(ctx, RLY_DTYPE_BOOL);
    Var *p_i = typed_var(imp, "i", i64), *p_cond = typed_var(imp, "cond", tbool);
    Var **p_v = arena_array(&imp->arena, n_carried + 1, sizeof *p_v);
    for (uint32_t k = 0; k < n_carried; k++)
        p_v[k] = typed_var(imp, "v", imp_any_dims(imp, init[k]->checked_type));
    /* The body, in a boundary scope. */
    Scope s;
    scope_push(imp, &s, true);
    bool ok = define_inits(imp, body);
    Expr *it_in = &p_i->base, *cond_in = &p_cond->base;
    const OxType *ti = &body->inputs[0].type, *tc = &body->inputs[1].type;
    if (ok && ti->kind == OXT_TENSOR && ti->ndim == 1) {
        ImpAttrs a = {0};
        int64_t one[1] = {1};
        ia_ints(imp, &a, "newshape", 1, one);
        it_in = imp_call1(imp, "reshape", it_in, &a);
    }
    if (ok && tc->kind == OXT_TENSOR && tc->ndim == 1) {
        ImpAttrs a = {0};
        int64_t one[1] = {1};
        ia_ints(imp, &a, "newshape", 1, one);
        cond_in = imp_call1(imp, "reshape", cond_in, &a);
    }
    ok = ok && it_in && cond_in;
    if (ok) {
        define(imp, body->inputs[0].name, it_in);
        define(imp, body->inputs[1].name, cond_in);
        for (uint32_t k = 0; k < n_carried; k++)
            define(imp, body->inputs[2 + k].name, &p_v[k]->base);
        ok = convert_nodes(imp, body);
    }
    Expr **bo = ok ? graph_outputs(imp, body) : NULL;
    imp->node = self, imp->span = span, imp->opset = opset, imp->outs = outs;
    if (bo == NULL) {
        scope_pop(imp);
        return false;
    }
    /* Scan accumulators: the rows so far (imp_rows_*), joined once after the loop. */
    Var **p_s = arena_array(&imp->arena, n_scan + 1, sizeof *p_s);
    Expr **s_init = arena_array(&imp->arena, n_scan + 1, sizeof *s_init);
    Type **s_elem = arena_array(&imp->arena, n_scan + 1, sizeof *s_elem);
    for (uint32_t k = 0; k < n_scan; k++) {
        TensorType *et = imp_tt(bo[1 + n_carried + k]);
        if (et == NULL) {
            scope_pop(imp);
            return imp_error(imp, "scan output %u is not a tensor", k);
        }
        s_elem[k] = imp_rows_elem(imp, et);
        p_s[k] = typed_var(imp, "scan", imp_rows_type(imp, s_elem[k]));
        s_init[k] = imp_rows_empty(imp, s_elem[k]);
    }
    /* Captured outer values become trailing parameters passed unchanged. */
    uint32_t n_cap = (uint32_t)s.cap_inner.len;
    uint32_t n_params = 2 + n_carried + n_scan + n_cap;
    Var **params = arena_array(&imp->arena, n_params, sizeof *params);
    params[0] = p_i, params[1] = p_cond;
    for (uint32_t k = 0; k < n_carried; k++)
        params[2 + k] = p_v[k];
    for (uint32_t k = 0; k < n_scan; k++)
        params[2 + n_carried + k] = p_s[k];
    for (uint32_t k = 0; k < n_cap; k++)
        params[2 + n_carried + n_scan + k] = AS_VAR(s.cap_inner.data[k]);
    /* The result type and the recursive var. */
    uint32_t n_res = n_carried + n_scan;
    Type **rt = arena_array(&imp->arena, n_res + 1, sizeof *rt);
    Expr **res = arena_array(&imp->arena, n_res + 1, sizeof *res);
    for (uint32_t k = 0; k < n_carried; k++)
        rt[k] = p_v[k]->base.checked_type, res[k] = &p_v[k]->base;
    for (uint32_t k = 0; k < n_scan; k++)
        rt[n_carried + k] = p_s[k]->base.checked_type, res[n_carried + k] = &p_s[k]->base;
    Type *ret = ir_type_tuple(ctx, n_res, rt);
    Type **pt = arena_array(&imp->arena, n_params, sizeof *pt);
    for (uint32_t k = 0; k < n_params; k++)
        pt[k] = params[k]->base.checked_type;
    Var *loop = typed_var(imp, "loop", ir_type_func(ctx, n_params, pt, ret, 0, NULL, 0, NULL));
    /* The recursive call's arguments. */
    Expr **next = arena_array(&imp->arena, n_params, sizeof *next);
    ok = true;
    Expr *one = imp_scalar_i(imp, RLY_DTYPE_I64, 1);
    next[0] = imp_call2(imp, "add", &p_i->base, one, NULL);
    next[1] = to_scalar(imp, imp_cast(imp, bo[0], RLY_DTYPE_BOOL));
    for (uint32_t k = 0; k < n_carried; k++) {
        next[2 + k] = bo[1 + k];
        if (next[2 + k] && imp_join(imp, imp_any_dims(imp, bo[1 + k]->checked_type),
                                    p_v[k]->base.checked_type) == NULL) {
            scope_pop(imp);
            StrBuf a = {0}, b = {0};
            ir_print_type(ctx, imp_resolve(imp, p_v[k]->base.checked_type), &a);
            ir_print_type(ctx, imp_resolve(imp, bo[1 + k]->checked_type), &b);
            imp_error(imp, "loop-carried value %u changes its type from %s to %s", k, sb_cstr(&a),
                      sb_cstr(&b));
            sb_free(&a);
            sb_free(&b);
            return false;
        }
    }
    for (uint32_t k = 0; k < n_scan; k++)
        next[2 + n_carried + k] =
            imp_rows_push(imp, &p_s[k]->base, bo[1 + n_carried + k], s_elem[k]);
    for (uint32_t k = 0; k < n_cap; k++)
        next[2 + n_carried + n_scan + k] = s.cap_inner.data[k];
    for (uint32_t k = 0; k < n_params; k++)
        ok &= next[k] != NULL;
    if (!ok) {
        scope_pop(imp);
        return false;
    }
    /* Condition: i < M && cond (either part may be absent); M is one more parameter. */
    Expr *go = &p_cond->base;
    Expr *m_in = NULL;
    if (max_trip) {
        m_in = &typed_var(imp, "M", i64)->base;
        Expr *lt = imp_call2(imp, "less", &p_i->base, m_in, NULL);
        go = lt ? imp_call2(imp, "logical_and", lt, go, NULL) : NULL;
        if (go == NULL) {
            scope_pop(imp);
            return false;
        }
        Var **p2 = arena_array(&imp->arena, n_params + 1, sizeof *p2);
        memcpy(p2, params, n_params * sizeof *p2);
        p2[n_params] = AS_VAR(m_in);
        params = p2;
        Expr **n2 = arena_array(&imp->arena, n_params + 1, sizeof *n2);
        memcpy(n2, next, n_params * sizeof *n2);
        n2[n_params] = m_in;
        next = n2;
        Type **pt2 = arena_array(&imp->arena, n_params + 1, sizeof *pt2);
        memcpy(pt2, pt, n_params * sizeof *pt2);
        pt2[n_params] = i64;
        n_params++;
        loop->ann = ir_type_func(ctx, n_params, pt2, ret, 0, NULL, 0, NULL);
        loop->base.checked_type = loop->ann;
    }
    Expr *again = ir_call_new(ctx, &loop->base, n_params, next, NULL, 0, NULL, span);
    again->checked_type = ret;
    Expr *done = imp_tuple(imp, n_res, res);
    Expr *body_if = ir_if_new(ctx, go, again, done, span);
    body_if->checked_type = ret;
    Expr *fn = ir_function_new(ctx, n_params, params, body_if, ret, 0, NULL, NULL, span);
    fn->checked_type = loop->base.checked_type;
    Expr **cap_outer = arena_array(&imp->arena, n_cap + 1, sizeof *cap_outer);
    for (uint32_t k = 0; k < n_cap; k++)
        cap_outer[k] = s.cap_outer.data[k];
    scope_pop(imp);
    /* The first call, outside. */
    Expr **first = arena_array(&imp->arena, n_params, sizeof *first);
    first[0] = imp_scalar_i(imp, RLY_DTYPE_I64, 0);
    first[1] = cond0 ? to_scalar(imp, imp_cast(imp, cond0, RLY_DTYPE_BOOL))
                     : imp_scalar_i(imp, RLY_DTYPE_BOOL, 1);
    if (first[1] == NULL) return false;
    for (uint32_t k = 0; k < n_carried; k++)
        first[2 + k] = init[k];
    for (uint32_t k = 0; k < n_scan; k++)
        first[2 + n_carried + k] = s_init[k];
    for (uint32_t k = 0; k < n_cap; k++)
        first[2 + n_carried + n_scan + k] = cap_outer[k];
    if (m_in) {
        first[n_params - 1] = to_scalar(imp, imp_cast(imp, max_trip, RLY_DTYPE_I64));
        if (first[n_params - 1] == NULL) return false;
    }
    Expr *call = ir_call_new(ctx, &loop->base, n_params, first, NULL, 0, NULL, span);
    call->checked_type = ret;
    Expr *let = ir_let_new(ctx, loop, fn, call, span);
    let->checked_type = ret;
    for (uint32_t k = 0; k < n_carried; k++)
        imp_out(imp, k, imp_get(imp, let, k));
    for (uint32_t k = 0; k < n_scan; k++) {
        Expr *joined = imp_rows_join(imp, imp_get(imp, let, n_carried + k), s_elem[k]);
        if (joined == NULL) return false;
        imp_out(imp, n_carried + k, joined);
    }
    return true;
}

/* ---- Scan ----------------------------------------------------------------------------------
 * Scan (opset 9+, and Scan-8 once per batch element) becomes a let-bound recursive function,
 * as Loop does:
 *   %scan(%t, %s..., %rows..., %x..., %captured..., %len) =
 *     if (%t < %len) { body(%s..., take(%x_k, t or len - 1 - t, axis_k)...);
 *                      %scan(%t + 1, s_out..., Cons(y, %rows)..., %x..., %captured..., %len) }
 *     else (%s..., %rows...)
 * The body is converted once, whatever the scan length: unrolling it per step multiplied
 * through nested Scans (578 bytes of nested Scans reached 6 GB). States are typed with `?`
 * dims like Loop-carried values; the scan inputs are parameters (a function body never shares
 * nodes with its caller) and keep their static types, so each step's slices do too. */

typedef struct ScanFn {
    uint32_t n_state, m, n_out, n_cap;
    Var *var;         /* the let-bound function */
    Expr *fn;         /* its definition */
    Expr **cap_outer; /* outer values it captures, passed at each call */
    Type **row_elem;  /* per scan output: the type of its rows (imp_rows_elem) */
    Type *ret;        /* (states..., rows...) */
} ScanFn;

/* The function of a Scan body with n_state states of types st_t and m scan inputs of types x_t
 * sliced along ax[k] (from the end when rev[k]). False after an error (at the node). */
static bool scan_fn(Imp *imp, const OxGraph *body, uint32_t n_state, Type *const *st_t, uint32_t m,
                    Type *const *x_t, const int64_t *ax, const bool *rev, ScanFn *sf) {
    Ctx *ctx = imp->ctx;
    if (body->n_inputs != n_state + m)
        return imp_error(imp, "the body takes %u inputs, expected %u (%u states, %u scan inputs)",
                         body->n_inputs, n_state + m, n_state, m);
    if (body->n_outputs < n_state)
        return imp_error(imp, "the body gives %u outputs, fewer than the %u states",
                         body->n_outputs, n_state);
    uint32_t n_out = body->n_outputs - n_state;
    const OxNode *self = imp->node;
    Span span = imp->span;
    int64_t opset = imp->opset;
    Expr **outs = imp->outs;
    Type *i64 = ir_type_scalar(ctx, RLY_DTYPE_I64);
    Var *p_t = typed_var(imp, "t", i64), *p_len = typed_var(imp, "len", i64);
    Var **p_s = arena_array(&imp->arena, n_state + 1, sizeof *p_s);
    Var **p_x = arena_array(&imp->arena, m + 1, sizeof *p_x);
    for (uint32_t k = 0; k < n_state; k++)
        p_s[k] = typed_var(imp, "s", imp_any_dims(imp, st_t[k]));
    for (uint32_t k = 0; k < m; k++)
        p_x[k] = typed_var(imp, "x", x_t[k]);
    Scope s;
    scope_push(imp, &s, true);
    bool ok = define_inits(imp, body);
    Expr *last =
        imp_call2(imp, "subtract", &p_len->base, imp_scalar_i(imp, RLY_DTYPE_I64, 1), NULL);
    Expr *back = imp_call2(imp, "subtract", last, &p_t->base, NULL);
    for (uint32_t k = 0; k < n_state && ok; k++)
        define(imp, body->inputs[k].name, &p_s[k]->base);
    for (uint32_t k = 0; k < m && ok; k++) {
        ImpAttrs a = {0};
        ia_int(imp, &a, "axis", ax[k]);
        ia_str(imp, &a, "mode", "fast");
        Expr *slice = imp_call2(imp, "take", &p_x[k]->base, rev[k] ? back : &p_t->base, &a);
        if (slice == NULL)
            ok = false;
        else
            define(imp, body->inputs[n_state + k].name, slice);
    }
    ok = ok && convert_nodes(imp, body);
    Expr **bo = ok ? graph_outputs(imp, body) : NULL;
    imp->node = self, imp->span = span, imp->opset = opset, imp->outs = outs;
    if (bo == NULL) {
        scope_pop(imp);
        return false;
    }
    Type **row_elem = arena_array(&imp->arena, n_out + 1, sizeof *row_elem);
    Var **p_r = arena_array(&imp->arena, n_out + 1, sizeof *p_r);
    for (uint32_t j = 0; j < n_out && ok; j++) {
        TensorType *et = imp_tt(bo[n_state + j]);
        if (et == NULL) {
            ok = imp_error(imp, "scan output %u is not a tensor", j);
            break;
        }
        row_elem[j] = imp_rows_elem(imp, et);
        p_r[j] = typed_var(imp, "rows", imp_rows_type(imp, row_elem[j]));
    }
    for (uint32_t k = 0; k < n_state && ok; k++)
        if (imp_join(imp, imp_any_dims(imp, imp_type(bo[k])), p_s[k]->base.checked_type) == NULL) {
            StrBuf a = {0}, b = {0};
            ir_print_type(ctx, imp_resolve(imp, p_s[k]->base.checked_type), &a);
            ir_print_type(ctx, imp_resolve(imp, imp_type(bo[k])), &b);
            ok = imp_error(imp, "state %u changes its type from %s to %s", k, sb_cstr(&a),
                           sb_cstr(&b));
            sb_free(&a);
            sb_free(&b);
        }
    if (!ok) {
        scope_pop(imp);
        return false;
    }
    /* parameters: t, states, rows, scan inputs, captured values, len */
    uint32_t n_cap = (uint32_t)s.cap_inner.len;
    uint32_t n_params = 2 + n_state + n_out + m + n_cap;
    Var **params = arena_array(&imp->arena, n_params, sizeof *params);
    Expr **next = arena_array(&imp->arena, n_params, sizeof *next);
    Type **pt = arena_array(&imp->arena, n_params, sizeof *pt);
    uint32_t np = 0;
    params[np] = p_t;
    next[np++] = imp_call2(imp, "add", &p_t->base, imp_scalar_i(imp, RLY_DTYPE_I64, 1), NULL);
    for (uint32_t k = 0; k < n_state; k++)
        params[np] = p_s[k], next[np++] = bo[k];
    for (uint32_t j = 0; j < n_out; j++)
        params[np] = p_r[j],
        next[np++] = imp_rows_push(imp, &p_r[j]->base, bo[n_state + j], row_elem[j]);
    for (uint32_t k = 0; k < m; k++)
        params[np] = p_x[k], next[np++] = &p_x[k]->base;
    for (uint32_t k = 0; k < n_cap; k++)
        params[np] = AS_VAR(s.cap_inner.data[k]), next[np++] = s.cap_inner.data[k];
    params[np] = p_len, next[np++] = &p_len->base;
    for (uint32_t k = 0; k < n_params; k++) {
        ok &= next[k] != NULL;
        pt[k] = params[k]->base.checked_type;
    }
    Expr *go = imp_call2(imp, "less", &p_t->base, &p_len->base, NULL);
    if (!ok || go == NULL) {
        scope_pop(imp);
        return false;
    }
    uint32_t n_res = n_state + n_out;
    Type **rt = arena_array(&imp->arena, n_res + 1, sizeof *rt);
    Expr **res = arena_array(&imp->arena, n_res + 1, sizeof *res);
    for (uint32_t k = 0; k < n_state; k++)
        rt[k] = p_s[k]->base.checked_type, res[k] = &p_s[k]->base;
    for (uint32_t j = 0; j < n_out; j++)
        rt[n_state + j] = p_r[j]->base.checked_type, res[n_state + j] = &p_r[j]->base;
    Type *ret = ir_type_tuple(ctx, n_res, rt);
    Var *fv = typed_var(imp, "scan", ir_type_func(ctx, n_params, pt, ret, 0, NULL, 0, NULL));
    Expr *again = ir_call_new(ctx, &fv->base, n_params, next, NULL, 0, NULL, span);
    again->checked_type = ret;
    Expr *body_if = ir_if_new(ctx, go, again, imp_tuple(imp, n_res, res), span);
    body_if->checked_type = ret;
    Expr *fn = ir_function_new(ctx, n_params, params, body_if, ret, 0, NULL, NULL, span);
    fn->checked_type = fv->base.checked_type;
    Expr **cap_outer = arena_array(&imp->arena, n_cap + 1, sizeof *cap_outer);
    for (uint32_t k = 0; k < n_cap; k++)
        cap_outer[k] = s.cap_outer.data[k];
    scope_pop(imp);
    *sf = (ScanFn){.n_state = n_state,
                   .m = m,
                   .n_out = n_out,
                   .n_cap = n_cap,
                   .var = fv,
                   .fn = fn,
                   .cap_outer = cap_outer,
                   .row_elem = row_elem,
                   .ret = ret};
    return true;
}

/* A call of the scan function (inside its let): states st0, scan inputs xs, length len. */
static Expr *scan_call(Imp *imp, const ScanFn *sf, Expr *const *st0, Expr *const *xs, Expr *len) {
    uint32_t n_params = 2 + sf->n_state + sf->n_out + sf->m + sf->n_cap, np = 0;
    Expr **args = arena_array(&imp->arena, n_params, sizeof *args);
    args[np++] = imp_scalar_i(imp, RLY_DTYPE_I64, 0);
    for (uint32_t k = 0; k < sf->n_state; k++)
        args[np++] = st0[k];
    for (uint32_t j = 0; j < sf->n_out; j++)
        args[np++] = imp_rows_empty(imp, sf->row_elem[j]);
    for (uint32_t k = 0; k < sf->m; k++)
        args[np++] = xs[k];
    for (uint32_t k = 0; k < sf->n_cap; k++)
        args[np++] = sf->cap_outer[k];
    args[np++] = len;
    for (uint32_t k = 0; k < n_params; k++)
        if (args[k] == NULL) return NULL;
    Expr *call = ir_call_new(imp->ctx, &sf->var->base, n_params, args, NULL, 0, NULL, imp->span);
    call->checked_type = sf->ret;
    return call;
}

static Expr *let_scan(Imp *imp, const ScanFn *sf, Expr *body) {
    if (body == NULL) return NULL;
    Expr *let = ir_let_new(imp->ctx, sf->var, sf->fn, body, imp->span);
    let->checked_type = body->checked_type;
    return let;
}

/* The length of axis `axis` of x as an int64 scalar (shape_of at run time when unknown). */
static Expr *axis_len(Imp *imp, Expr *x, uint32_t axis) {
    int64_t d = imp_tt(x)->shape[axis];
    if (dim_known(d)) return imp_scalar_i(imp, RLY_DTYPE_I64, d);
    ImpAttrs sa = {0}, ta = {0};
    ia_str(imp, &sa, "dtype", "int64");
    ia_int(imp, &ta, "axis", 0);
    return imp_call2(imp, "take", imp_call1(imp, "shape_of", x, &sa),
                     imp_scalar_i(imp, RLY_DTYPE_I64, axis), &ta);
}

/* Scan (opset 9+): one call of the scan function; each scan output's rows are joined, reversed
 * for scan_output_directions 1, and their axis moved to scan_output_axes. */
static bool conv_scan(Imp *imp) {
    const OxGraph *body = graph_attr(imp, "body");
    if (body == NULL) return false;
    int64_t m = imp_attr_int(imp, "num_scan_inputs", -1);
    uint32_t n_in = imp_n_inputs(imp);
    if (m < 1 || (uint64_t)m > n_in)
        return imp_error(imp, "num_scan_inputs must be in 1..%u", n_in);
    uint32_t n_state = n_in - (uint32_t)m;
    const int64_t *in_axes, *in_dirs, *out_axes, *out_dirs;
    uint32_t n_ia = imp_attr_ints(imp, "scan_input_axes", &in_axes);
    uint32_t n_id = imp_attr_ints(imp, "scan_input_directions", &in_dirs);
    uint32_t n_oa = imp_attr_ints(imp, "scan_output_axes", &out_axes);
    uint32_t n_od = imp_attr_ints(imp, "scan_output_directions", &out_dirs);
    Expr **state = arena_array(&imp->arena, n_state + 1, sizeof *state);
    Type **st_t = arena_array(&imp->arena, n_state + 1, sizeof *st_t);
    Expr **xs = arena_array(&imp->arena, (size_t)m + 1, sizeof *xs);
    Type **x_t = arena_array(&imp->arena, (size_t)m + 1, sizeof *x_t);
    int64_t *ax = arena_array(&imp->arena, (size_t)m + 1, sizeof *ax);
    bool *rev = arena_array(&imp->arena, (size_t)m + 1, sizeof *rev);
    int64_t len = DIM_ANY;
    for (uint32_t k = 0; k < n_state; k++) {
        if ((state[k] = imp_in_req(imp, k, "initial state")) == NULL) return false;
        st_t[k] = imp_type(state[k]);
    }
    for (uint32_t k = 0; k < (uint32_t)m; k++) {
        if ((xs[k] = imp_in_req(imp, n_state + k, "scan input")) == NULL) return false;
        TensorType *t = imp_tt(xs[k]);
        int64_t a = k < n_ia ? in_axes[k] : 0;
        if (t == NULL || a < -(int64_t)t->ndim || a >= (int64_t)t->ndim)
            return imp_error(imp, "scan input %u: axis %lld is out of range", k, (long long)a);
        ax[k] = a < 0 ? a + t->ndim : a;
        rev[k] = k < n_id && in_dirs[k] != 0;
        x_t[k] = imp_type(xs[k]);
        int64_t d = t->shape[ax[k]];
        if (dim_known(d) && dim_known(len) && d != len)
            return imp_error(imp, "scan inputs have lengths %lld and %lld", (long long)len,
                             (long long)d);
        if (dim_known(d)) len = d;
    }
    ScanFn sf;
    if (!scan_fn(imp, body, n_state, st_t, (uint32_t)m, x_t, ax, rev, &sf)) return false;
    /* the length: the first scan input's. Static lengths were compared above; at run time a
     * shorter input fails at its first missing slice (take's "fast" mode checks) and the extra
     * slices of a longer one are not read. */
    Expr *len_e = dim_known(len) ? imp_scalar_i(imp, RLY_DTYPE_I64, len)
                                 : axis_len(imp, xs[0], (uint32_t)ax[0]);
    Expr *r = let_scan(imp, &sf, scan_call(imp, &sf, state, xs, len_e));
    if (r == NULL) return false;
    for (uint32_t k = 0; k < n_state; k++)
        imp_out(imp, k, imp_get(imp, r, k));
    for (uint32_t j = 0; j < sf.n_out; j++) {
        Expr *y = imp_rows_join(imp, imp_get(imp, r, n_state + j), sf.row_elem[j]);
        if (y == NULL) return false;
        if (dim_known(len)) { /* the length is known: say so in the type */
            TensorType *yt = imp_tt(y);
            int64_t *shape = arena_array(&imp->arena, yt->ndim, sizeof *shape);
            bool all = true;
            for (uint32_t i = 0; i < yt->ndim; i++)
                shape[i] = i == 0 ? len : yt->shape[i], all &= dim_known(shape[i]);
            if (all) {
                ImpAttrs ra = {0};
                ia_ints(imp, &ra, "newshape", yt->ndim, shape);
                y = imp_call1(imp, "reshape", y, &ra);
            }
        }
        uint32_t rank = imp_rank(y);
        if (y && j < n_od && out_dirs[j]) { /* reverse: the last step first */
            ImpAttrs ra = {0};
            ia_int(imp, &ra, "axis", 0);
            y = imp_call1(imp, "reverse", y, &ra);
        }
        int64_t a = j < n_oa ? out_axes[j] : 0;
        if (a < -(int64_t)rank || a >= (int64_t)rank)
            return imp_error(imp, "scan output %u: axis %lld is out of range", j, (long long)a);
        if (a < 0) a += rank;
        if (y && a != 0) { /* move axis 0 to a */
            int64_t *perm = arena_array(&imp->arena, rank, sizeof *perm);
            for (uint32_t i = 0; i < rank; i++)
                perm[i] = (int64_t)i < a ? (int64_t)i + 1 : (int64_t)i == a ? 0 : (int64_t)i;
            ImpAttrs ta = {0};
            ia_ints(imp, &ta, "axes", rank, perm);
            y = imp_call1(imp, "transpose", y, &ta);
        }
        if (y == NULL) return false;
        imp_out(imp, n_state + j, y);
    }
    return true;
}

/* Scan-8: inputs (sequence_lens, states..., scans...) all with a leading batch axis; the scan axis
 * of the scan inputs is 1. One scan function, called once per batch element (the batch must be
 * static) with that element's states and inputs; the results are stacked along the batch axis.
 * sequence_lens must be absent (every sequence full length). */
static bool conv_scan8(Imp *imp) {
    const OxGraph *body = graph_attr(imp, "body");
    if (body == NULL) return false;
    if (imp_in(imp, 0) != NULL)
        return imp_error(imp,
                         "the sequence_lens input is not supported (only full-length sequences)");
    int64_t m = imp_attr_int(imp, "num_scan_inputs", -1);
    uint32_t n_in = imp_n_inputs(imp);
    if (m < 1 || (uint64_t)m + 1 > n_in)
        return imp_error(imp, "num_scan_inputs must be in 1..%u", n_in - 1);
    uint32_t n_state = n_in - 1 - (uint32_t)m;
    const int64_t *dirs;
    uint32_t n_dirs = imp_attr_ints(imp, "directions", &dirs);
    Expr **st0 = arena_array(&imp->arena, n_state + 1, sizeof *st0);
    Expr **xs = arena_array(&imp->arena, (size_t)m + 1, sizeof *xs);
    int64_t batch = -1, len = DIM_ANY;
    for (uint32_t k = 0; k < n_state; k++) {
        if ((st0[k] = imp_in_req(imp, 1 + k, "initial state")) == NULL) return false;
        TensorType *t = imp_tt(st0[k]);
        if (t == NULL || t->ndim < 1 || !dim_known(t->shape[0]))
            return imp_error(imp, "initial state %u needs a static batch axis", k);
    }
    for (uint32_t k = 0; k < (uint32_t)m; k++) {
        if ((xs[k] = imp_in_req(imp, 1 + n_state + k, "scan input")) == NULL) return false;
        TensorType *t = imp_tt(xs[k]);
        if (t == NULL || t->ndim < 2 || !dim_known(t->shape[0]))
            return imp_error(imp, "scan input %u needs a static batch axis and a sequence axis", k);
        if ((batch >= 0 && t->shape[0] != batch) ||
            (dim_known(len) && dim_known(t->shape[1]) && t->shape[1] != len))
            return imp_error(imp, "scan inputs differ in batch or sequence length");
        batch = t->shape[0];
        if (dim_known(t->shape[1])) len = t->shape[1];
    }
    for (uint32_t k = 0; k < n_state; k++)
        if (imp_tt(st0[k])->shape[0] != batch)
            return imp_error(imp, "initial state %u has batch %lld, the scan inputs %lld", k,
                             (long long)imp_tt(st0[k])->shape[0], (long long)batch);
    if (batch == 0) return imp_error(imp, "a batch of 0 sequences has no outputs to stack");
    if (batch > 100000) return imp_error(imp, "batch %lld is too large", (long long)batch);
    /* one batch element's types: the batch axis dropped */
    ImpAttrs a0 = {0};
    ia_int(imp, &a0, "axis", 0);
    Expr *zero = imp_scalar_i(imp, RLY_DTYPE_I64, 0);
    Type **st_t = arena_array(&imp->arena, n_state + 1, sizeof *st_t);
    Type **x_t = arena_array(&imp->arena, (size_t)m + 1, sizeof *x_t);
    int64_t *ax = arena_array(&imp->arena, (size_t)m + 1, sizeof *ax);
    bool *rev = arena_array(&imp->arena, (size_t)m + 1, sizeof *rev);
    for (uint32_t k = 0; k < n_state; k++) {
        Expr *e = imp_call2(imp, "take", st0[k], zero, &a0);
        if (e == NULL) return false;
        st_t[k] = imp_type(e);
    }
    for (uint32_t k = 0; k < (uint32_t)m; k++) {
        Expr *e = imp_call2(imp, "take", xs[k], zero, &a0);
        if (e == NULL) return false;
        x_t[k] = imp_type(e);
        ax[k] = 0;
        rev[k] = k < n_dirs && dirs[k] != 0;
    }
    ScanFn sf;
    if (!scan_fn(imp, body, n_state, st_t, (uint32_t)m, x_t, ax, rev, &sf)) return false;
    Expr **calls = arena_array(&imp->arena, (size_t)batch, sizeof *calls);
    Expr **st_b = arena_array(&imp->arena, n_state + 1, sizeof *st_b);
    Expr **x_b = arena_array(&imp->arena, (size_t)m + 1, sizeof *x_b);
    for (int64_t b = 0; b < batch; b++) {
        Expr *bi = imp_scalar_i(imp, RLY_DTYPE_I64, b);
        for (uint32_t k = 0; k < n_state; k++)
            st_b[k] = imp_call2(imp, "take", st0[k], bi, &a0);
        for (uint32_t k = 0; k < (uint32_t)m; k++)
            x_b[k] = imp_call2(imp, "take", xs[k], bi, &a0);
        Expr *len_e = dim_known(len) ? imp_scalar_i(imp, RLY_DTYPE_I64, len)
                                     : (x_b[0] ? axis_len(imp, x_b[0], 0) : NULL);
        if ((calls[b] = scan_call(imp, &sf, st_b, x_b, len_e)) == NULL) return false;
    }
    Expr *r = let_scan(imp, &sf, imp_tuple(imp, (uint32_t)batch, calls));
    if (r == NULL) return false;
    uint32_t n_res = n_state + sf.n_out;
    Expr **per_b = arena_array(&imp->arena, (size_t)batch, sizeof *per_b);
    for (uint32_t k = 0; k < n_res; k++) {
        for (int64_t b = 0; b < batch; b++) {
            Expr *v = imp_get(imp, imp_get(imp, r, (uint32_t)b), k);
            per_b[b] = k < n_state ? v : imp_rows_join(imp, v, sf.row_elem[k - n_state]);
            if (per_b[b] == NULL) return false;
        }
        Expr *st = imp_call1(imp, "stack", imp_tuple(imp, (uint32_t)batch, per_b), &a0);
        if (st == NULL) return false;
        imp_out(imp, k, st);
    }
    return true;
}

static bool conv_constant(Imp *imp) {
    const OxAttr *a = imp_attr(imp, "value");
    if (a && a->t) {
        Expr *c = imp_tensor_const(imp, a->t, true);
        if (c == NULL) return false;
        imp_out(imp, 0, c);
        return true;
    }
    if ((a = imp_attr(imp, "value_float")) != NULL) {
        imp_out(imp, 0, imp_scalar(imp, RLY_DTYPE_F32, a->f));
        return true;
    }
    if ((a = imp_attr(imp, "value_int")) != NULL) {
        imp_out(imp, 0, imp_scalar_i(imp, RLY_DTYPE_I64, a->i));
        return true;
    }
    if ((a = imp_attr(imp, "value_floats")) != NULL) {
        int64_t shape[1] = {a->n_floats};
        imp_out(imp, 0, imp_const_tensor(imp, RLY_DTYPE_F32, 1, shape, a->floats));
        return true;
    }
    if ((a = imp_attr(imp, "value_ints")) != NULL) {
        imp_out(imp, 0, imp_const_i64s(imp, a->n_ints, a->ints));
        return true;
    }
    return imp_error(imp, "needs one of the attributes value, value_float(s), value_int(s) "
                          "(strings and sparse tensors are not supported)");
}

static bool conv_identity(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input");
    if (x == NULL) return false;
    imp_out(imp, 0, x);
    return true;
}

const ImpConv imp_conv_control[] = {
    {"If", "", 1, conv_if},
    {"Loop", "", 1, conv_loop},
    {"Scan", "", 8, conv_scan8},
    {"Scan", "", 9, conv_scan},
    {"Constant", "", 1, conv_constant},
    {"Identity", "", 1, conv_identity},
    {NULL, NULL, 0, NULL},
};

/* ---- the model ----------------------------------------------------------------------------------
 */

/* The pseudo source: one line per node of every graph, "OpType 'name' (node N of graph 'g')". */
static void build_source(Imp *imp, const char *model_name) {
    StrBuf sb = {0};
    PtrVec stack = {0};
    vec_push(&stack, (void *)imp->model->graph);
    PtrVec offs = {0}; /* pairs node, offset */
    while (stack.len > 0) {
        const OxGraph *g = vec_pop(&stack);
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            const OxNode *nd = &g->nodes[i];
            vec_push(&offs, (void *)nd);
            vec_push(&offs, (void *)(uintptr_t)(sb.len + 1));
            sb_printf(&sb, "%s%s%s%s '%s' (node %u of graph '%s')\n", nd->domain,
                      nd->domain[0] ? "." : "", nd->op_type, "", nd->name, i, g->name);
            for (uint32_t a = 0; a < nd->n_attrs; a++) {
                if (nd->attrs[a].g) vec_push(&stack, nd->attrs[a].g);
                for (uint32_t j = 0; j < nd->attrs[a].n_graphs; j++)
                    vec_push(&stack, nd->attrs[a].graphs[j]);
            }
        }
    }
    imp->file = diags_add_file(&imp->ctx->diags, model_name, sb_cstr(&sb), sb.len);
    imp->src = diags_file(&imp->ctx->diags, imp->file)->text;
    for (size_t i = 0; i < offs.len; i += 2)
        ptrmap_put(&imp->node_off, offs.data[i], offs.data[i + 1]);
    vec_free(&offs);
    vec_free(&stack);
    sb_free(&sb);
}

/* Report every operator no converter handles, once per (domain, op, opset), at its first node. */
static bool check_supported(Imp *imp) {
    PtrVec stack = {0};
    StrMap seen = {0};
    vec_push(&stack, (void *)imp->model->graph);
    uint32_t n_bad = 0;
    StrBuf list = {0};
    while (stack.len > 0) {
        const OxGraph *g = vec_pop(&stack);
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            const OxNode *nd = &g->nodes[i];
            for (uint32_t a = 0; a < nd->n_attrs; a++) {
                if (nd->attrs[a].g) vec_push(&stack, nd->attrs[a].g);
                for (uint32_t j = 0; j < nd->attrs[a].n_graphs; j++)
                    vec_push(&stack, nd->attrs[a].graphs[j]);
            }
            int64_t opset = ox_opset(imp->model, nd->domain);
            bool custom = nd->domain[0] && strcmp(nd->domain, "ai.onnx") != 0;
            if (opset == 0 && custom) opset = 1;
            if (imp_find_conv(nd->op_type, nd->domain, opset)) continue;
            char key[512];
            snprintf(key, sizeof key, "%s:%s:%lld", nd->domain, nd->op_type, (long long)opset);
            if (strmap_get(&seen, key, strlen(key))) continue;
            strmap_put(&seen, key, strlen(key), (void *)1);
            imp->node = nd;
            imp->span = node_span(imp, nd);
            imp_error(imp, "unsupported operator %s (domain '%s', opset %lld)", nd->op_type,
                      custom ? nd->domain : "ai.onnx", (long long)opset);
            imp->node = NULL;
            sb_printf(&list, "%s%s%s", n_bad ? ", " : "", custom ? nd->domain : "",
                      custom ? "." : "");
            sb_printf(&list, "%s-%lld", nd->op_type, (long long)opset);
            n_bad++;
        }
    }
    if (n_bad)
        graph_error(imp, "%u unsupported operator%s: %s", n_bad, n_bad == 1 ? "" : "s",
                    sb_cstr(&list));
    sb_free(&list);
    strmap_free(&seen);
    vec_free(&stack);
    return n_bad == 0;
}

/* Fix the element types still unknown at the end: from the graph outputs' declared types
 * (walked beside the Relay types), then from the hints; an unknown left is an error. *ret is
 * main's return type when an output holds a sequence or optional (so that an output that is only
 * Nil or None gets its type), NULL otherwise. */
static void hint_from_decl(Imp *imp, Type *t, const OxType *decl) {
    t = imp_resolve(imp, t);
    if (t == NULL || decl == NULL) return;
    Type *e = imp_list_elem(imp, t);
    if (e == NULL) e = imp_option_elem(imp, t);
    if (e == NULL) return;
    const OxType *de = decl->elem;
    if (de == NULL) return;
    ElemVar *v = elem_root(imp, e);
    if (v && de->kind == OXT_TENSOR && de->ndim >= 0 && v->dtype >= 0)
        v->bound = tensor_any(imp, (rly_dtype)v->dtype, (uint32_t)de->ndim);
    else if (v == NULL)
        hint_from_decl(imp, e, de);
}

static bool finish_types(Imp *imp, const OxGraph *g, Expr **outs, Type **ret) {
    *ret = NULL;
    bool containers = false;
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        hint_from_decl(imp, outs[i]->checked_type, &g->outputs[i].type);
        containers |= outs[i]->checked_type->kind != TYPE_TENSOR;
    }
    imp->node = NULL;
    imp->span = (Span){imp->file, 0, 0};
    bool ok = true;
    for (size_t i = 0; i < imp->elems.len; i++) {
        ElemVar *v = &imp->elems.data[i];
        if (v->bound) continue;
        if (v->node) imp->span = node_span(imp, v->node);
        ok &= imp_force(imp, v->u) != NULL;
        imp->span = (Span){imp->file, 0, 0};
    }
    if (!ok || !containers) return ok;
    Type **ft = arena_array(&imp->arena, g->n_outputs + 1, sizeof *ft);
    for (uint32_t i = 0; i < g->n_outputs; i++)
        ft[i] = imp_resolve(imp, outs[i]->checked_type);
    *ret = g->n_outputs == 1 ? ft[0] : ir_type_tuple(imp->ctx, g->n_outputs, ft);
    return true;
}

/* Write the now known element types into the annotations under e (variables, function return
 * types): the unknowns were IncompleteTypes, which must not stay in the module. */
static VisitResult fix_pre(Visitor *v, Expr *e) {
    Imp *imp = v->state;
    if (e->kind == EXPR_VAR && AS_VAR(e)->ann) {
        AS_VAR(e)->ann = imp_resolve(imp, AS_VAR(e)->ann);
        e->checked_type = AS_VAR(e)->ann;
    } else if (e->kind == EXPR_FUNCTION && AS_FUNCTION(e)->ret_type) {
        AS_FUNCTION(e)->ret_type = imp_resolve(imp, AS_FUNCTION(e)->ret_type);
    }
    return VISIT_CONTINUE;
}

static void fix_annotations(Imp *imp, Expr *e) {
    if (imp->elems.len == 0) return;
    Visitor v = {.pre = fix_pre, .state = imp};
    ir_visit(&v, e);
}

/* Drop the prelude's functions @main does not use (directly or through other globals). */
static VisitResult note_global(Visitor *v, Expr *e) {
    if (e->kind == EXPR_GLOBAL_VAR) {
        PtrVec *seen = v->state;
        for (size_t i = 0; i < seen->len; i++)
            if (seen->data[i] == e) return VISIT_CONTINUE;
        vec_push(seen, e);
    }
    return VISIT_CONTINUE;
}

static void prune_globals(Module *mod) {
    if (mod->funcs.len <= 1) return;
    PtrVec used = {0};
    FuncDef *main_def = ir_module_lookup(mod, "main", 4);
    vec_push(&used, main_def->gvar);
    Visitor v = {.pre = note_global, .state = &used};
    for (size_t k = 0; k < used.len; k++) { /* grows while walking */
        FuncDef *d = ir_module_def_of(mod, used.data[k]);
        if (d && d->func) ir_visit(&v, &d->func->base);
    }
    size_t n = 0;
    for (size_t i = 0; i < mod->funcs.len; i++) {
        bool keep = false;
        for (size_t k = 0; k < used.len && !keep; k++)
            keep = used.data[k] == mod->funcs.data[i].gvar;
        if (keep) mod->funcs.data[n++] = mod->funcs.data[i];
    }
    mod->funcs.len = n;
    strmap_free(&mod->global_by_name);
    memset(&mod->global_by_name, 0, sizeof mod->global_by_name);
    for (size_t i = 0; i < n; i++) {
        const char *nm = mod->funcs.data[i].gvar->name;
        strmap_put(&mod->global_by_name, nm, strlen(nm), (void *)(uintptr_t)(i + 1));
    }
    vec_free(&used);
}

/* ---- names ------------------------------------------------------------------------------------
 * ONNX value names are any strings; Relay parameter names are identifiers. A graph input whose
 * name is a plain identifier ([A-Za-z_][A-Za-z0-9_]*) keeps it; another gets each character
 * outside [A-Za-z0-9_] replaced by '_' (and a 'v' prefix when it does not start with a letter or
 * '_'), then the first suffix _1, _2, ... that no other parameter has. The plain names are
 * reserved first, so the mapping is injective and a Relay name that equals some input's ONNX
 * name is that input's own. When any name changed, @main records the ONNX names (attribute
 * onnx_input_names, one per parameter), by which `rly run` binds inputs. */

static bool ident_start(char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

static bool plain_name(const char *s) {
    if (!ident_start(s[0])) return false;
    for (const char *c = s; *c; c++)
        if (!ident_char(*c)) return false;
    return true;
}

/* The Relay names of the parameters whose ONNX names are onnx[0..n) (distinct) into out[];
 * true when some name differs from its ONNX name. */
static bool param_names(Imp *imp, uint32_t n, const char *const *onnx, const char **out) {
    StrMap taken = {0}; /* Relay names given or reserved; value: the next suffix to try + 1 */
    bool changed = false;
    for (uint32_t i = 0; i < n; i++)
        if (plain_name(onnx[i])) strmap_put(&taken, onnx[i], strlen(onnx[i]), (void *)1);
    StrBuf b = {0};
    for (uint32_t i = 0; i < n; i++) {
        const char *s = onnx[i];
        if (plain_name(s)) {
            out[i] = ir_intern(imp->ctx, s, strlen(s));
            continue;
        }
        changed = true;
        b.len = 0;
        if (!ident_start(s[0])) sb_putc(&b, 'v');
        for (const char *c = s; *c; c++)
            sb_putc(&b, ident_char(*c) ? *c : '_');
        size_t base_len = b.len;
        char *base = arena_strndup(&imp->arena, sb_cstr(&b), base_len);
        uintptr_t k = (uintptr_t)strmap_get(&taken, base, base_len);
        while (strmap_get(&taken, sb_cstr(&b), b.len) != NULL) { /* taken: try base_k */
            b.len = base_len;
            sb_printf(&b, "_%lu", (unsigned long)(k ? k : 1));
            k = k ? k + 1 : 2;
        }
        if (b.len != base_len) strmap_put(&taken, base, base_len, (void *)k); /* next try */
        out[i] = ir_intern(imp->ctx, sb_cstr(&b), b.len);
        strmap_put(&taken, out[i], b.len, (void *)1);
    }
    sb_free(&b);
    strmap_free(&taken);
    return changed;
}

/* Names that must be unique within a graph: its inputs, its initializers, and the outputs of its
 * nodes, which may not reuse an input's or initializer's name either (an initializer named like
 * an input is that input's default, which ONNX allows). Every graph of the model is checked,
 * subgraphs too; false after reporting the first clash of each graph. */
static bool check_names(Imp *imp) {
    PtrVec stack = {0};
    vec_push(&stack, (void *)imp->model->graph);
    bool ok = true;
    while (stack.len > 0) {
        const OxGraph *g = vec_pop(&stack);
        StrMap inputs = {0}, inits = {0};
        bool g_ok = true;
        for (uint32_t i = 0; i < g->n_inputs && g_ok; i++) {
            const char *nm = g->inputs[i].name;
            uintptr_t prev = (uintptr_t)strmap_get(&inputs, nm, strlen(nm));
            if (nm[0] == '\0')
                g_ok = graph_error(imp, "graph '%s': input %u has no name", g->name, i);
            else if (prev)
                g_ok =
                    graph_error(imp, "graph '%s': input '%s' is declared twice (inputs %u and %u)",
                                g->name, nm, (unsigned)prev - 1, i);
            strmap_put(&inputs, nm, strlen(nm), (void *)(uintptr_t)(i + 1));
        }
        for (uint32_t i = 0; i < g->n_inits && g_ok; i++) {
            const char *nm = g->inits[i].name;
            uintptr_t prev = (uintptr_t)strmap_get(&inits, nm, strlen(nm));
            if (nm[0] == '\0')
                g_ok = graph_error(imp, "graph '%s': initializer %u has no name", g->name, i);
            else if (prev)
                g_ok = graph_error(imp,
                                   "graph '%s': initializer '%s' is given twice (initializers %u "
                                   "and %u)",
                                   g->name, nm, (unsigned)prev - 1, i);
            strmap_put(&inits, nm, strlen(nm), (void *)(uintptr_t)(i + 1));
        }
        for (uint32_t i = 0; i < g->n_nodes; i++) {
            const OxNode *nd = &g->nodes[i];
            for (uint32_t a = 0; a < nd->n_attrs; a++) {
                if (nd->attrs[a].g) vec_push(&stack, nd->attrs[a].g);
                for (uint32_t j = 0; j < nd->attrs[a].n_graphs; j++)
                    vec_push(&stack, nd->attrs[a].graphs[j]);
            }
            for (uint32_t k = 0; k < nd->n_outputs && g_ok; k++) {
                const char *o = nd->outputs[k];
                bool is_in = strmap_get(&inputs, o, strlen(o)) != NULL;
                if (!is_in && strmap_get(&inits, o, strlen(o)) == NULL) continue;
                imp->node = nd;
                imp->span = node_span(imp, nd);
                g_ok = imp_error(imp, "output %u '%s' has the name of %s of graph '%s'", k, o,
                                 is_in ? "an input" : "an initializer", g->name);
                imp->node = NULL;
            }
        }
        ok &= g_ok;
        strmap_free(&inputs);
        strmap_free(&inits);
    }
    vec_free(&stack);
    return ok;
}

/* The names g's nodes read as settings rather than data (params_as_inputs keeps those
 * initializers constants, as converters need them at import time): Resize's roi and scales,
 * Upsample's scales, Range's bounds, Dropout's ratio, Clip's bounds. */
static void settings_read(const OxGraph *g, StrMap *out) {
    static const struct {
        const char *op;
        uint32_t first, last;
    } rows[] = {
        {"Resize", 1, 2}, {"Upsample", 1, 1}, {"Range", 0, 2}, {"Dropout", 1, 1}, {"Clip", 1, 2}};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const OxNode *nd = &g->nodes[i];
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            if (strcmp(nd->op_type, rows[r].op) != 0) continue;
            for (uint32_t k = rows[r].first; k <= rows[r].last && k < nd->n_inputs; k++)
                if (nd->inputs[k][0] != '\0')
                    strmap_put(out, nd->inputs[k], strlen(nd->inputs[k]), (void *)1);
        }
    }
}

Module *imp_import(Ctx *ctx, const OxModel *m, const ImpOptions *opts) {
    Imp imp_ = {.ctx = ctx, .model = m, .opts = opts}, *imp = &imp_;
    arena_init(&imp->arena);
    build_source(imp, m->path ? m->path : "model.onnx");
    imp->mod = ir_module_new(ctx);
    Module *mod = NULL;
    Scope root;
    scope_push(imp, &root, false);
    const OxGraph *g = m->graph;
    int64_t opset = ox_opset(m, "");
    if (g == NULL) {
        graph_error(imp, "the model has no graph");
        goto out;
    }
    if (opset > IMP_OPSET_MAX) { /* first: no converter may run on a newer opset */
        graph_error(imp, "opset %lld is newer than this importer supports (7 to %d)",
                    (long long)opset, IMP_OPSET_MAX);
        goto out;
    }
    if (!check_supported(imp) || !check_names(imp)) goto out;
    bool uses_default = false; /* a model of ai.onnx.preview.training nodes only needs no opset */
    for (uint32_t i = 0; i < g->n_nodes && !uses_default; i++) {
        const char *dom = g->nodes[i].domain;
        uses_default = dom[0] == '\0' || strcmp(dom, "ai.onnx") == 0;
    }
    if (opset == 0 && uses_default) {
        graph_error(imp, "the model imports no ai.onnx opset");
        goto out;
    }
    if (!define_inits(imp, g)) goto out;
    /* Parameters: graph inputs that are not initializers, then (params_as_inputs) the
     * floating-point initializers, which the definitions below shadow. inits maps a name to
     * its initializer's index + 1, with bit 62 set when it becomes a parameter. */
    StrMap inits = {0}, settings = {0};
    const uintptr_t as_param = (uintptr_t)1 << 62;
    if (opts && opts->params_as_inputs) settings_read(g, &settings);
    for (uint32_t i = 0; i < g->n_inits; i++) {
        const OxTensor *t = &g->inits[i];
        int dt = ox_to_rly_dtype(t->data_type);
        bool p = opts && opts->params_as_inputs && dt >= 0 && sup_dtype_is_float((rly_dtype)dt) &&
                 t->ndim > 0 && strmap_get(&settings, t->name, strlen(t->name)) == NULL;
        strmap_put(&inits, t->name, strlen(t->name),
                   (void *)((uintptr_t)(i + 1) | (p ? as_param : 0)));
    }
    strmap_free(&settings);
    PtrVec params = {0};
    bool ok = true;
    uint32_t used_shapes = 0;
    uint32_t n_cap = g->n_inputs + g->n_inits + 1;
    const char **onnx_names = arena_array(&imp->arena, n_cap, sizeof *onnx_names);
    const char **relay_names = arena_array(&imp->arena, n_cap, sizeof *relay_names);
    const OxTensor **param_init = arena_array(&imp->arena, n_cap, sizeof *param_init);
    const OxValueInfo **param_vi = arena_array(&imp->arena, n_cap, sizeof *param_vi);
    uint32_t n_params = 0;
    for (uint32_t i = 0; i < g->n_inputs; i++) {
        const char *nm = g->inputs[i].name;
        uintptr_t ix = (uintptr_t)strmap_get(&inits, nm, strlen(nm));
        if (ix && !(ix & as_param)) continue; /* an input with a constant default */
        const OxTensor *bound = NULL;         /* ImpOptions.bind_*: a constant, not a parameter */
        for (uint32_t k = 0; opts && k < opts->n_binds && !bound; k++)
            if (strcmp(opts->bind_names[k], nm) == 0) bound = opts->bind_vals[k];
        if (bound) {
            Expr *c = imp_tensor_const(imp, bound, false);
            if (c == NULL)
                ok = false;
            else
                define(imp, nm, c);
            continue;
        }
        param_vi[n_params] = &g->inputs[i];
        param_init[n_params] = NULL;
        onnx_names[n_params++] = nm;
    }
    for (uint32_t i = 0; i < g->n_inits; i++) {
        const char *nm = g->inits[i].name;
        uintptr_t ix = (uintptr_t)strmap_get(&inits, nm, strlen(nm));
        if (!(ix & as_param)) continue;
        bool is_input = false;
        for (uint32_t k = 0; k < g->n_inputs && !is_input; k++)
            is_input = strcmp(g->inputs[k].name, nm) == 0;
        if (is_input) continue; /* a parameter at its input's place already */
        param_vi[n_params] = NULL;
        param_init[n_params] = &g->inits[i];
        onnx_names[n_params++] = nm;
    }
    bool renamed = param_names(imp, n_params, onnx_names, relay_names);
    for (uint32_t i = 0; i < n_params && ok; i++) {
        const OxValueInfo *vi = param_vi[i];
        Type *t = NULL;
        if (vi == NULL) { /* an initializer: its own dtype and dims */
            const OxTensor *ti = param_init[i];
            t = ir_type_tensor(imp->ctx, (rly_dtype)ox_to_rly_dtype(ti->data_type), ti->ndim,
                               ti->dims);
        } else {
            const ImpShape *ov = NULL;
            for (uint32_t k = 0; opts && k < opts->n_shapes; k++)
                if (strcmp(opts->shapes[k].name, vi->name) == 0)
                    ov = &opts->shapes[k], used_shapes++;
            t = value_type(imp, vi, ov);
        }
        if (t == NULL) {
            ok = false;
            break;
        }
        Var *v = typed_var(imp, relay_names[params.len], t);
        vec_push(&params, v);
        define(imp, onnx_names[i], &v->base);
        if (vi == NULL || vi->type.kind == OXT_TENSOR)
            imp_emul_mark(imp, &v->base,
                          vi ? vi->type.elem_type : param_init[i]->data_type); /* emulated */
    }
    strmap_free(&inits);
    if (ok && opts && used_shapes < opts->n_shapes) {
        for (uint32_t k = 0; k < opts->n_shapes; k++) {
            bool found = false;
            for (uint32_t i = 0; i < g->n_inputs; i++)
                found |= strcmp(opts->shapes[k].name, g->inputs[i].name) == 0;
            if (!found) {
                StrBuf names = {0};
                for (size_t i = 0; i < params.len; i++)
                    sb_printf(&names, "%s'%s'", i ? ", " : "", onnx_names[i]);
                graph_error(imp,
                            "--input-shapes names '%s', which is not a graph input (inputs: %s)",
                            opts->shapes[k].name, sb_cstr(&names));
                sb_free(&names);
                ok = false;
            }
        }
    }
    Expr **outs = NULL;
    if (ok && convert_nodes(imp, g)) outs = graph_outputs(imp, g);
    if (outs == NULL) {
        vec_free(&params);
        goto out;
    }
    if (g->n_outputs == 0) {
        graph_error(imp, "the graph has no outputs");
        vec_free(&params);
        goto out;
    }
    Expr *body = pack(imp, g->n_outputs, outs);
    Type *ret = NULL;
    if (!finish_types(imp, g, outs, &ret)) {
        vec_free(&params);
        goto out;
    }
    /* @main's attributes: the ONNX input names when some parameter was renamed, and always the
     * graph's output names (onnx_output_names, one per output), by which `rly run --output`
     * names its arrays. */
    const char *keys[2];
    AttrValue *vals[2];
    uint32_t n_attrs = 0;
    if (renamed) {
        AttrValue **items = arena_array(&imp->arena, n_params + 1, sizeof *items);
        for (uint32_t i = 0; i < n_params; i++)
            items[i] = ir_attr_str(ctx, onnx_names[i], strlen(onnx_names[i]), SPAN_NONE);
        vals[n_attrs] = ir_attr_list(ctx, n_params, items, SPAN_NONE);
        keys[n_attrs++] = ir_intern(ctx, "onnx_input_names", 16);
    }
    AttrValue **out_items = arena_array(&imp->arena, g->n_outputs, sizeof *out_items);
    for (uint32_t i = 0; i < g->n_outputs; i++)
        out_items[i] = ir_attr_str(ctx, g->outputs[i].name, strlen(g->outputs[i].name), SPAN_NONE);
    vals[n_attrs] = ir_attr_list(ctx, g->n_outputs, out_items, SPAN_NONE);
    keys[n_attrs++] = ir_intern(ctx, "onnx_output_names", 17);
    const Attrs *fn_attrs = ir_attrs_new(ctx, n_attrs, keys, vals);
    Expr *fn = ir_function_new(ctx, (uint32_t)params.len, (Var *const *)params.data, body, ret, 0,
                               NULL, fn_attrs, SPAN_NONE);
    GlobalVar *gv = ir_module_global(imp->mod, "main", 4, SPAN_NONE);
    ir_module_define(imp->mod, gv, AS_FUNCTION(fn), SPAN_NONE);
    fix_annotations(imp, fn); /* the parameters too: they are children of the function */
    prune_globals(imp->mod);
    mod = imp->mod;
    vec_free(&params);
out:
    scope_pop(imp);
    pass_folder_free(imp->folder);
    ptrmap_free(&imp->node_off);
    ptrmap_free(&imp->emul);
    vec_free(&imp->elems);
    arena_free(&imp->arena);
    return mod;
}
