/* fold_scale_axis.c - FoldScaleAxis and its two halves (TVM's fold_scale_axis.cc): fold a
 * per-channel scaling into the weight of a neighbouring nn.conv2d or nn.dense.
 *
 *   BackwardFoldScaleAxis (level 3, function pass): a scale after the operator,
 *     multiply(conv2d(x, w), s) -> conv2d(x, w * s) with s along the output channels, through
 *     nn.relu / nn.leaky_relu (s >= 0) and add / subtract / nn.bias_add of a per-channel operand
 *     b (which becomes b * s) or add / subtract of two such branches (each gets s);
 *   ForwardFoldScaleAxis (level 3, function pass): a scale before it,
 *     conv2d(multiply(x, s), w) -> conv2d(x, w * s) with s along the input channels, through
 *     relu / leaky_relu (s >= 0) and add / subtract / nn.bias_add of a per-channel b (which
 *     becomes b / s; s then may not hold a zero);
 *   FoldScaleAxis (level 3, module pass): Backward, Forward, then FoldConstant, as TVM's
 *     Sequential.
 *
 * Each half is TVM's two phases: a prepare walk propagates "this value may carry a scale along
 * axis k" messages (forward: from consumers to producers, the intersection over every consumer;
 * backward: from producers to a consumer used exactly once), then a rewrite folds the scales
 * whose every step agreed. A scale s is any pure expression that varies only along the channel
 * axis; when s and the weight (or bias) are float32/float64 constants, the product is computed
 * here into a new constant, otherwise multiply/divide calls are built (FoldConstant folds what it
 * can). Only dataflow is followed: a let, tuple, if, match, function or call of a function ends
 * a chain. docs/passes.md, "FoldScaleAxis", says where this differs from TVM. */

#include "ops/ops.h"
#include "passes/passes.h"

/* A message: the value may carry a scale along `axis`; with `positive` only a scale >= 0 (a relu
 * lies on the way), with `nonzero` only one without zeros (a division lies on the way). `via`
 * (backward add/subtract): which operand carries it, 0, 1 or 2 for both. */
typedef struct Msg {
    int axis;
    bool positive, nonzero;
    uint8_t via;
} Msg;

static Msg null_msg;
#define NULL_MSG (&null_msg) /* no scale may be folded through here */

typedef struct FS {
    Ctx *ctx;
    PtrMap msg;    /* node -> Msg* */
    PtrMap pure;   /* pass_is_pure memo */
    PtrMap vars;   /* const_expr memo: node -> 1 reads no variable, 2 reads one */
    PtrMap scaled; /* forward: node -> Scaled*; backward: node -> Pending* */
    PtrMap refs;   /* backward: node -> number of parents (as uintptr_t) */
    PtrMap fired;  /* backward: multiply -> the Pending it hands down */
    Rewriter *rw;
} FS;

/* Forward: the rewritten node equals value * scale along axis (scale of shape (C,)). */
typedef struct Scaled {
    Expr *value, *scale;
    int axis;
} Scaled;

/* Backward: the rewritten node must equal the original one times the scale `orig_scale` (an
 * original expression, shape (C,) once squeezed) along axis. */
typedef struct Pending {
    Expr *orig_scale;
    TensorType *scale_type, *x_type; /* of orig_scale, and of the multiply's scaled operand */
    int axis;
    Expr *scale; /* the rewritten scale, shape (C,); built at first use */
} Pending;

static TensorType *tensor_of(Expr *e) {
    Type *t = e->checked_type;
    return t && t->kind == TYPE_TENSOR ? (TensorType *)t : NULL;
}

static const char *op_name(Expr *e) {
    if (e->kind != EXPR_CALL || ((Call *)e)->op->kind != EXPR_OP) return NULL;
    return AS_OP(((Call *)e)->op)->name;
}

static bool is_op(Expr *e, const char *name) {
    const char *n = op_name(e);
    return n && strcmp(n, name) == 0;
}

static bool is_relu(Expr *e) { return is_op(e, "nn.relu") || is_op(e, "nn.leaky_relu"); }
static bool is_addsub(Expr *e) { return is_op(e, "add") || is_op(e, "subtract"); }

static Msg *new_msg(FS *fs, int axis, bool positive, bool nonzero, uint8_t via) {
    Msg *m = arena_alloc(&fs->ctx->arena, sizeof *m);
    *m = (Msg){axis, positive, nonzero, via};
    return m;
}

/* ======================================================================================
 * Attributes and shapes
 * ====================================================================================== */

static const AttrValue *attr_of(Call *c, const char *key) {
    const OpDef *def = op_lookup(AS_OP(c->op)->name, strlen(AS_OP(c->op)->name));
    const AttrValue *v = c->attrs ? ir_attrs_get(c->attrs, key) : NULL;
    if (v || def == NULL) return v;
    for (uint32_t i = 0; def->attrs && def->attrs[i].name; i++)
        if (strcmp(def->attrs[i].name, key) == 0) return def->defaults[i];
    return NULL;
}

static const char *attr_s(Call *c, const char *key) {
    const AttrValue *v = attr_of(c, key);
    return v && v->kind == ATTR_STR ? v->s : NULL;
}

/* out_dtype unset, or the data's dtype. */
static bool plain_out_dtype(Call *c, rly_dtype dt) {
    const char *od = attr_s(c, "out_dtype");
    return od && (od[0] == '\0' || strcmp(od, sup_dtype_name(dt)) == 0);
}

/* The position of axis a in layout text l, which must be plain upper-case axes; -1 otherwise. */
static int plain_axis(const char *l, char a) {
    int pos = -1;
    for (int i = 0; l[i]; i++) {
        if (l[i] < 'A' || l[i] > 'Z') return -1;
        if (l[i] == a) pos = i;
    }
    return pos;
}

/* What FoldScaleAxis needs of a conv2d: plain layouts (TVM's "simple" ones), float data and
 * weight of one dtype, and groups == 1 or a depthwise conv with multiplier 1 (TVM's rule). */
typedef struct ConvInfo {
    int data_c, out_c, k_i, k_o; /* channel positions */
    bool depthwise;
} ConvInfo;

static bool conv_info(Call *c, ConvInfo *ci) {
    if (!is_op(&c->base, "nn.conv2d")) return false;
    TensorType *x = tensor_of(c->args[0]), *w = tensor_of(c->args[1]);
    const char *dl = attr_s(c, "data_layout"), *kl = attr_s(c, "kernel_layout"),
               *ol = attr_s(c, "out_layout");
    const AttrValue *g = attr_of(c, "groups");
    if (!x || !w || !dl || !kl || !ol || !g || g->kind != ATTR_INT || x->dtype != w->dtype ||
        !sup_dtype_is_float(x->dtype) || !plain_out_dtype(c, x->dtype) || x->ndim != strlen(dl) ||
        w->ndim != strlen(kl))
        return false;
    ci->data_c = plain_axis(dl, 'C');
    ci->out_c = plain_axis(ol[0] ? ol : dl, 'C');
    ci->k_i = plain_axis(kl, 'I');
    ci->k_o = plain_axis(kl, 'O');
    if (ci->data_c < 0 || ci->out_c < 0 || ci->k_i < 0 || ci->k_o < 0) return false;
    int64_t cin = x->shape[ci->data_c], o = w->shape[ci->k_o];
    ci->depthwise = g->i > 1 && cin == g->i && o == g->i;
    return g->i == 1 || ci->depthwise;
}

/* nn.dense(x (..., in), w (units, in)) with float operands of one dtype. */
static bool dense_ok(Call *c) {
    if (!is_op(&c->base, "nn.dense")) return false;
    TensorType *x = tensor_of(c->args[0]), *w = tensor_of(c->args[1]);
    return x && w && x->ndim >= 1 && w->ndim == 2 && x->dtype == w->dtype &&
           sup_dtype_is_float(x->dtype) && plain_out_dtype(c, x->dtype);
}

/* The channel axis of nn.bias_add c (normalized), or -1. */
static int bias_axis(Call *c) {
    const AttrValue *a = attr_of(c, "axis");
    TensorType *x = tensor_of(c->args[0]);
    if (!a || a->kind != ATTR_INT || !x || !sup_dtype_is_float(x->dtype)) return -1;
    int64_t k = a->i < 0 ? a->i + x->ndim : a->i;
    return k >= 0 && k < (int64_t)x->ndim ? (int)k : -1;
}

/* TVM's MatchBroadcastToLeftAxes: r broadcasts to l varying only along axis (where it has l's
 * extent, which must be known); a scalar r only when allow_scalar. */
static bool match_left(const TensorType *l, const TensorType *r, int axis, bool allow_scalar) {
    if (!l || !r || r->ndim > l->ndim || axis < 0 || axis >= (int)l->ndim ||
        !dim_known(l->shape[axis]) || l->dtype != r->dtype)
        return false;
    if (r->ndim == 0) return allow_scalar;
    uint32_t base = l->ndim - r->ndim;
    if ((uint32_t)axis < base) return false;
    for (uint32_t i = base; i < l->ndim; i++)
        if (r->shape[i - base] != ((int)i == axis ? l->shape[i] : 1)) return false;
    return true;
}

/* ======================================================================================
 * Constants and typed construction
 * ====================================================================================== */

static bool foldable(Expr *e) {
    return e->kind == EXPR_CONSTANT &&
           (((Constant *)e)->dtype == RLY_DTYPE_F32 || ((Constant *)e)->dtype == RLY_DTYPE_F64);
}

static double cget(const Constant *c, int64_t i) {
    return c->dtype == RLY_DTYPE_F32 ? (double)((const float *)c->data)[i]
                                     : ((const double *)c->data)[i];
}

static int64_t numel(uint32_t n, const int64_t *shape) {
    int64_t k = 1;
    for (uint32_t i = 0; i < n; i++)
        k *= shape[i];
    return k;
}

/* Every element of constant e passes: >= 0 (positive) and != 0 (nonzero) as asked. */
static bool const_all(Expr *e, bool positive, bool nonzero) {
    if (!positive && !nonzero) return true;
    if (!foldable(e)) return false;
    Constant *c = (Constant *)e;
    for (int64_t i = 0, n = numel(c->ndim, c->shape); i < n; i++) {
        double v = cget(c, i);
        if ((positive && !(v >= 0)) || (nonzero && !(v != 0))) return false;
    }
    return true;
}

static Expr *typed(FS *fs, Expr *e) {
    pass_retype(fs->ctx, e, NULL);
    return e;
}

static Expr *new_const(FS *fs, rly_dtype dt, uint32_t n, const int64_t *shape, const double *v,
                       Span span) {
    int64_t k = numel(n, shape);
    size_t es = sup_dtype_size(dt);
    void *data = sup_malloc(k ? sup_mul((size_t)k, es) : 1);
    for (int64_t i = 0; i < k; i++) {
        if (dt == RLY_DTYPE_F32)
            ((float *)data)[i] = (float)v[i];
        else
            ((double *)data)[i] = v[i];
    }
    Expr *r = ir_constant_new(fs->ctx, dt, n, shape, data, span);
    free(data);
    return typed(fs, r);
}

/* a op b for float constants of one dtype, with numpy broadcasting ('*' or '/'). Weights are
 * large (ResNet-50's are 100 MB), so this is one pass over them: adjacent axes that both
 * operands walk alike are merged (a (O, I, kh, kw) weight times an (O, 1, 1, 1) scale becomes
 * O runs of I*kh*kw elements times one scalar), and the result is written straight into the
 * context's arena and borrowed by the new constant. The arithmetic is in double, rounded once. */
static Expr *const_binary(FS *fs, Constant *a, Constant *b, char op) {
    uint32_t n = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t shape[16], sa[16], sb[16];
    if (n > 16) return NULL;
    for (uint32_t i = 0; i < n; i++) {
        int64_t da = i + a->ndim >= n ? a->shape[i + a->ndim - n] : 1;
        int64_t db = i + b->ndim >= n ? b->shape[i + b->ndim - n] : 1;
        if (da != db && da != 1 && db != 1) return NULL;
        shape[i] = da == 1 ? db : da;
    }
    /* strides of a and b over the result's axes (0 where broadcast) */
    int64_t s = 1;
    for (int i = (int)n - 1; i >= 0; i--) {
        int j = i - (int)(n - a->ndim);
        sa[i] = j >= 0 && a->shape[j] != 1 ? s : 0;
        if (j >= 0) s *= a->shape[j];
    }
    s = 1;
    for (int i = (int)n - 1; i >= 0; i--) {
        int j = i - (int)(n - b->ndim);
        sb[i] = j >= 0 && b->shape[j] != 1 ? s : 0;
        if (j >= 0) s *= b->shape[j];
    }
    int64_t total = numel(n, shape);
    /* merge axis i into i + 1 when both operands step over them as over one axis */
    int64_t cs[16], ca[16], cb[16];
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (shape[i] == 1) continue;
        if (m > 0 && ca[m - 1] == sa[i] * shape[i] && cb[m - 1] == sb[i] * shape[i]) {
            cs[m - 1] *= shape[i];
            ca[m - 1] = sa[i];
            cb[m - 1] = sb[i];
            continue;
        }
        cs[m] = shape[i], ca[m] = sa[i], cb[m] = sb[i];
        m++;
    }
    if (m == 0) cs[m] = 1, ca[m] = cb[m] = 0, m = 1;
    bool f32 = a->dtype == RLY_DTYPE_F32;
    size_t es = f32 ? sizeof(float) : sizeof(double);
    void *out = arena_alloc(&fs->ctx->arena, total ? sup_mul((size_t)total, es) : es);
    int64_t idx[16] = {0}, oa = 0, ob = 0, inner = cs[m - 1], ia = ca[m - 1], ib = cb[m - 1];
    for (int64_t k = 0; k < total; k += inner) {
        for (int64_t t = 0; t < inner; t++) {
            double x = cget(a, oa + t * ia), y = cget(b, ob + t * ib);
            double r = op == '*' ? x * y : x / y;
            if (f32)
                ((float *)out)[k + t] = (float)r;
            else
                ((double *)out)[k + t] = r;
        }
        for (int i = (int)m - 2; i >= 0; i--) { /* the odometer over the outer axes */
            oa += ca[i], ob += cb[i];
            if (++idx[i] < cs[i]) break;
            oa -= ca[i] * cs[i], ob -= cb[i] * cs[i];
            idx[i] = 0;
        }
    }
    return typed(fs, ir_constant_borrow(fs->ctx, a->dtype, n, shape, out, a->base.span));
}

static const Attrs *one_attr(FS *fs, const char *key, AttrValue *v) {
    const char *k = ir_intern(fs->ctx, key, strlen(key));
    return ir_attrs_new(fs->ctx, 1, &k, &v);
}

static Expr *call2(FS *fs, const char *op, Expr *a, Expr *b, Span span) {
    if (foldable(a) && foldable(b) && ((Constant *)a)->dtype == ((Constant *)b)->dtype) {
        Expr *r = const_binary(fs, (Constant *)a, (Constant *)b, op[0] == 'm' ? '*' : '/');
        if (r) return r;
    }
    Expr *args[2] = {a, b};
    Expr *r = pass_op_call(fs->ctx, op, 2, args, NULL, span);
    RLY_CHECK(r != NULL, "FoldScaleAxis: %s refuses its operands", op);
    return r;
}

/* scale (shape (C,)) shaped to broadcast along axis `axis` of a rank-n tensor: (C, 1, ..., 1)
 * (TVM's ExpandBiasToMatchAxis). */
static Expr *expand_scale(FS *fs, Expr *scale, uint32_t n, int axis) {
    uint32_t k = n - 1 - (uint32_t)axis;
    if (k == 0) return scale;
    if (scale->kind == EXPR_CONSTANT) {
        Constant *c = (Constant *)scale;
        int64_t shape[16] = {c->shape[0]};
        for (uint32_t i = 1; i <= k && i < 16; i++)
            shape[i] = 1;
        return typed(fs, ir_constant_new(fs->ctx, c->dtype, k + 1, shape, c->data, scale->span));
    }
    const char *keys[2] = {ir_intern(fs->ctx, "axis", 4), ir_intern(fs->ctx, "num_newaxis", 11)};
    AttrValue *vals[2] = {ir_attr_int(fs->ctx, 1, RLY_DTYPE_I32, SPAN_NONE),
                          ir_attr_int(fs->ctx, k, RLY_DTYPE_I32, SPAN_NONE)};
    Expr *r = pass_op_call(fs->ctx, "expand_dims", 1, &scale, ir_attrs_new(fs->ctx, 2, keys, vals),
                           scale->span);
    RLY_CHECK(r != NULL, "FoldScaleAxis: cannot expand a scale");
    return r;
}

/* The scale s (type ts, matching x of type tx along axis by match_left) as a tensor of shape
 * (C,): a constant is reshaped (a scalar one repeated), another tensor squeezed; NULL for a
 * scalar that is not a constant. */
static Expr *squeeze_scale(FS *fs, Expr *s, const TensorType *ts, const TensorType *tx, int axis) {
    int64_t c = tx->shape[axis];
    if (s->kind == EXPR_CONSTANT) {
        Constant *k = (Constant *)s;
        if (ts->ndim > 0)
            return typed(fs, ir_constant_new(fs->ctx, k->dtype, 1, &c, k->data, s->span));
        if (!foldable(s)) return NULL;
        double *v = sup_malloc(sup_mul((size_t)(c ? c : 1), sizeof *v));
        for (int64_t i = 0; i < c; i++)
            v[i] = cget(k, 0);
        Expr *r = new_const(fs, k->dtype, 1, &c, v, s->span);
        free(v);
        return r;
    }
    if (ts->ndim == 0) return NULL;
    if (ts->ndim == 1) return s;
    int64_t axes[16];
    uint32_t n = 0, base = tx->ndim - ts->ndim;
    for (uint32_t i = 0; i < ts->ndim && n < 16; i++)
        if ((int)(i + base) != axis) axes[n++] = i;
    AttrValue **items = arena_array(&fs->ctx->arena, n ? n : 1, sizeof *items);
    for (uint32_t i = 0; i < n; i++)
        items[i] = ir_attr_int(fs->ctx, axes[i], RLY_DTYPE_I32, SPAN_NONE);
    Expr *r =
        pass_op_call(fs->ctx, "squeeze", 1, &s,
                     one_attr(fs, "axis", ir_attr_list(fs->ctx, n, items, SPAN_NONE)), s->span);
    RLY_CHECK(r != NULL, "FoldScaleAxis: cannot squeeze a scale");
    return r;
}

static VisitResult vars_pre(Visitor *v, Expr *e) {
    return ptrmap_has(v->state, e) ? VISIT_SKIP : VISIT_CONTINUE;
}

static void vars_post(Visitor *v, Expr *e) {
    PtrMap *memo = v->state;
    uintptr_t reads = e->kind == EXPR_VAR || e->kind == EXPR_GLOBAL_VAR ? 2 : 1;
    for (uint32_t i = 0; reads == 1 && i < ir_expr_n_children(e); i++) {
        Expr *k = ir_expr_child(e, i);
        if (k != NULL && (uintptr_t)ptrmap_get(memo, k) == 2) reads = 2;
    }
    ptrmap_put(memo, e, (void *)reads);
}

/* Whether e reads no variable: a constant, or operators of constants (FoldConstant's). Memoized
 * in fs->vars, so the scales of a deep graph cost one walk in all. */
static bool const_expr(FS *fs, Expr *e) {
    if (!ptrmap_has(&fs->vars, e)) {
        Visitor v = {.pre = vars_pre, .post = vars_post, .state = &fs->vars};
        ir_visit(&v, e);
    }
    return (uintptr_t)ptrmap_get(&fs->vars, e) == 1;
}

/* Whether s may serve as the scale of x along axis under message m: it matches, it may be moved
 * (pure), it reads no variable (folded into a weight, a scale computed from the data would make
 * the weight a product computed on every run: a multiply the size of the weight, for one the
 * size of the data, and no weight packed once; an LSTM step's h = sigmoid(o) * tanh(c) read only
 * by the next step's product was folded so, 4.4x slower), it can be squeezed, and a constant
 * passes m's sign requirements (a scale that must be checked has to be a constant). */
static bool scale_ok(FS *fs, Expr *s, const TensorType *tx, int axis, const Msg *m) {
    TensorType *ts = tensor_of(s);
    if (!match_left(tx, ts, axis, true) || !pass_is_pure(&fs->pure, s) || !const_expr(fs, s))
        return false;
    if (ts->ndim == 0 && !foldable(s)) return false;
    return const_all(s, m->positive, m->nonzero);
}

/* weight * scale along axis (folded when both are constants). */
static Expr *scale_weight(FS *fs, Expr *w, Expr *scale, int axis) {
    return call2(fs, "multiply", w, expand_scale(fs, scale, tensor_of(w)->ndim, axis), w->span);
}

static Expr *rebuild_call(FS *fs, Call *orig, uint32_t n, Expr *const *args) {
    Expr *r = pass_op_call(fs->ctx, AS_OP(orig->op)->name, n, args, orig->attrs, orig->base.span);
    RLY_CHECK(r != NULL, "FoldScaleAxis: %s refuses its new arguments", AS_OP(orig->op)->name);
    return r;
}

static void collect_post(Visitor *v, Expr *e) { vec_push((PtrVec *)v->state, e); }

/* Every node of e, children before parents. */
static void post_order(Expr *e, PtrVec *out) {
    Visitor v = {NULL, collect_post, out};
    ir_visit(&v, e);
}

static void fs_free(FS *fs) {
    ptrmap_free(&fs->msg);
    ptrmap_free(&fs->pure);
    ptrmap_free(&fs->vars);
    ptrmap_free(&fs->scaled);
    ptrmap_free(&fs->refs);
    ptrmap_free(&fs->fired);
}

/* ======================================================================================
 * Forward
 * ====================================================================================== */

static Msg *msg_of(FS *fs, Expr *e) {
    Msg *m = ptrmap_get(&fs->msg, e);
    return m ? m : NULL_MSG;
}

/* Merge message m for e with what e's other consumers sent (TVM's Intersect). */
static void update(FS *fs, Expr *e, Msg *m) {
    Msg *old = ptrmap_get(&fs->msg, e);
    if (old == NULL || m == NULL_MSG) {
        ptrmap_put(&fs->msg, e, m);
    } else if (old != NULL_MSG) {
        if (old->axis != m->axis)
            ptrmap_put(&fs->msg, e, NULL_MSG);
        else
            ptrmap_put(
                &fs->msg, e,
                new_msg(fs, m->axis, old->positive || m->positive, old->nonzero || m->nonzero, 0));
    }
}

/* What call c (its own message m) asks of its arguments (TVM's FScaleAxisForwardPrep). */
static void forward_prep(FS *fs, Call *c, Msg *m) {
    Msg *in[2] = {NULL_MSG, NULL_MSG};
    ConvInfo ci;
    if (is_relu(&c->base)) {
        if (m != NULL_MSG) in[0] = new_msg(fs, m->axis, true, m->nonzero, 0);
    } else if (is_addsub(&c->base)) {
        TensorType *a = tensor_of(c->args[0]), *b = tensor_of(c->args[1]);
        /* the operand without the scale is divided by it */
        if (m != NULL_MSG && a && sup_dtype_is_float(a->dtype)) {
            Msg *mm = new_msg(fs, m->axis, m->positive, true, 0);
            if (match_left(a, b, m->axis, false))
                in[0] = mm;
            else if (match_left(b, a, m->axis, false))
                in[1] = mm;
        }
    } else if (is_op(&c->base, "nn.bias_add")) {
        /* (x * s) + b along s's axis == (x + b / s) * s */
        if (m != NULL_MSG && bias_axis(c) == m->axis)
            in[0] = new_msg(fs, m->axis, m->positive, true, 0);
    } else if (conv_info(c, &ci)) {
        in[0] = new_msg(fs, ci.data_c, false, false, 0);
    } else if (dense_ok(c)) {
        in[0] = new_msg(fs, (int)tensor_of(c->args[0])->ndim - 1, false, false, 0);
    }
    update(fs, c->op, NULL_MSG);
    for (uint32_t i = 0; i < c->n_args; i++)
        update(fs, c->args[i], i < 2 ? in[i] : NULL_MSG);
}

static Expr *forward_post(Rewriter *rw, Expr *orig, Expr *e) {
    FS *fs = rw->state;
    if (orig->kind != EXPR_CALL || ((Call *)orig)->op->kind != EXPR_OP)
        return pass_rebuild(rw, orig, e);
    Call *oc = (Call *)orig, *nc = (Call *)e;
    Msg *m = msg_of(fs, orig);
    Scaled *sa = oc->n_args > 0 ? ptrmap_get(&fs->scaled, oc->args[0]) : NULL;
    Scaled *sb = oc->n_args > 1 ? ptrmap_get(&fs->scaled, oc->args[1]) : NULL;
    ConvInfo ci;
    if (is_op(orig, "multiply") && m != NULL_MSG) {
        /* the producer: value * scale, the scale either operand */
        for (int side = 1; side >= 0; side--) {
            Expr *s = oc->args[side], *x = oc->args[1 - side];
            TensorType *tx = tensor_of(x);
            if (!tx || tx != tensor_of(orig) || !scale_ok(fs, s, tx, m->axis, m)) continue;
            Expr *scale = squeeze_scale(fs, nc->args[side], tensor_of(s), tx, m->axis);
            if (scale == NULL) continue;
            Scaled *r = arena_alloc(&fs->ctx->arena, sizeof *r);
            *r = (Scaled){nc->args[1 - side], scale, m->axis};
            ptrmap_put(&fs->scaled, orig, r);
            break;
        }
    } else if (is_relu(orig) && sa) {
        Scaled *r = arena_alloc(&fs->ctx->arena, sizeof *r);
        *r = (Scaled){rebuild_call(fs, oc, 1, &sa->value), sa->scale, sa->axis};
        ptrmap_put(&fs->scaled, orig, r);
    } else if (is_addsub(orig) && (sa || sb)) {
        /* (x * s) + b == (x + b / s) * s */
        Scaled *in = sa ? sa : sb;
        int other = sa ? 1 : 0;
        Expr *args[2];
        args[1 - other] = in->value;
        args[other] =
            call2(fs, "divide", nc->args[other],
                  expand_scale(fs, in->scale, tensor_of(orig)->ndim, in->axis), orig->span);
        Scaled *r = arena_alloc(&fs->ctx->arena, sizeof *r);
        *r = (Scaled){rebuild_call(fs, oc, 2, args), in->scale, in->axis};
        ptrmap_put(&fs->scaled, orig, r);
    } else if (is_op(orig, "nn.bias_add") && sa) {
        Expr *args[2] = {sa->value, call2(fs, "divide", nc->args[1], sa->scale, orig->span)};
        Scaled *r = arena_alloc(&fs->ctx->arena, sizeof *r);
        *r = (Scaled){rebuild_call(fs, oc, 2, args), sa->scale, sa->axis};
        ptrmap_put(&fs->scaled, orig, r);
    } else if (sa && !sb && conv_info(oc, &ci)) {
        Expr *args[2] = {sa->value,
                         scale_weight(fs, nc->args[1], sa->scale, ci.depthwise ? ci.k_o : ci.k_i)};
        return rebuild_call(fs, oc, 2, args);
    } else if (sa && !sb && dense_ok(oc)) {
        Expr *args[2] = {sa->value, scale_weight(fs, nc->args[1], sa->scale, 1)};
        return rebuild_call(fs, oc, 2, args);
    }
    /* A scaled node's own rebuilt form is what a consumer that does not take the scale would
     * use; the messages make every consumer take it, so it ends up unused. */
    return pass_rebuild(rw, orig, e);
}

static Expr *forward_run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    FS fs;
    memset(&fs, 0, sizeof fs);
    fs.ctx = pc->ctx;
    PtrVec order = {0};
    post_order(e, &order);
    update(&fs, e, NULL_MSG);
    bool any = false;
    for (size_t i = order.len; i-- > 0;) { /* consumers before producers */
        Expr *x = order.data[i];
        if (x->kind == EXPR_CALL) {
            forward_prep(&fs, (Call *)x, msg_of(&fs, x));
            any |= is_op(x, "multiply") && msg_of(&fs, x) != NULL_MSG;
        } else {
            for (uint32_t k = 0, n = ir_expr_n_children(x); k < n; k++)
                update(&fs, ir_expr_child(x, k), NULL_MSG);
        }
    }
    vec_free(&order);
    Expr *r = e;
    if (any) {
        Rewriter rw = {.ctx = fs.ctx, .post = forward_post, .state = &fs};
        r = ir_rewrite(&rw, e);
        ir_rewriter_free(&rw);
    }
    fs_free(&fs);
    return r;
}

/* ======================================================================================
 * Backward
 * ====================================================================================== */

static size_t refs_of(FS *fs, Expr *e) { return (size_t)(uintptr_t)ptrmap_get(&fs->refs, e); }

/* The message call c sends to its consumer (TVM's FScaleAxisBackwardPrep), NULL_MSG if none. */
static Msg *backward_prep(FS *fs, Call *c) {
    ConvInfo ci;
    if (conv_info(c, &ci)) return new_msg(fs, ci.out_c, false, false, 0);
    if (dense_ok(c)) return new_msg(fs, (int)tensor_of(&c->base)->ndim - 1, false, false, 0);
    if (is_relu(&c->base)) {
        Msg *in = msg_of(fs, c->args[0]);
        return in == NULL_MSG ? in : new_msg(fs, in->axis, true, false, 0);
    }
    if (is_op(&c->base, "nn.bias_add")) {
        Msg *a = msg_of(fs, c->args[0]);
        if (a != NULL_MSG && bias_axis(c) == a->axis)
            return new_msg(fs, a->axis, a->positive, false, 0);
    }
    if (is_addsub(&c->base)) {
        Msg *a = msg_of(fs, c->args[0]), *b = msg_of(fs, c->args[1]);
        TensorType *ta = tensor_of(c->args[0]), *tb = tensor_of(c->args[1]);
        if (a != NULL_MSG && match_left(ta, tb, a->axis, false))
            return new_msg(fs, a->axis, a->positive, false, 0);
        if (b != NULL_MSG && match_left(tb, ta, b->axis, false))
            return new_msg(fs, b->axis, b->positive, false, 1);
        /* two scalable branches of one shape (a residual add): both get the scale */
        if (a != NULL_MSG && b != NULL_MSG && a->axis == b->axis && ta && tb && ta == tb)
            return new_msg(fs, a->axis, a->positive || b->positive, false, 2);
    }
    return NULL_MSG;
}

static void count_refs(Visitor *v, Expr *e) {
    FS *fs = v->state;
    for (uint32_t k = 0, n = ir_expr_n_children(e); k < n; k++) {
        Expr *c = ir_expr_child(e, k);
        ptrmap_put(&fs->refs, c, (void *)(uintptr_t)(refs_of(fs, c) + 1));
    }
}

static Expr *pending_scale(FS *fs, Pending *p) {
    if (p->scale == NULL) {
        Expr *s = ir_rewrite(fs->rw, p->orig_scale); /* already rewritten: a memo lookup */
        p->scale = squeeze_scale(fs, s, p->scale_type, p->x_type, p->axis);
        RLY_CHECK(p->scale != NULL, "FoldScaleAxis: a checked scale does not squeeze");
    }
    return p->scale;
}

static Expr *backward_post(Rewriter *rw, Expr *orig, Expr *e) {
    FS *fs = rw->state;
    Pending *fired = ptrmap_get(&fs->fired, orig);
    if (fired) { /* the multiply is gone: its operand carries the scale now */
        Call *nc = (Call *)e;
        return fired->orig_scale == ((Call *)orig)->args[1] ? nc->args[0] : nc->args[1];
    }
    Pending *p = ptrmap_get(&fs->scaled, orig);
    if (p == NULL || orig->kind != EXPR_CALL) return pass_rebuild(rw, orig, e);
    Call *oc = (Call *)orig, *nc = (Call *)e;
    ConvInfo ci;
    if (conv_info(oc, &ci)) {
        Expr *args[2] = {nc->args[0], scale_weight(fs, nc->args[1], pending_scale(fs, p), ci.k_o)};
        return rebuild_call(fs, oc, 2, args);
    }
    if (dense_ok(oc)) {
        Expr *args[2] = {nc->args[0], scale_weight(fs, nc->args[1], pending_scale(fs, p), 0)};
        return rebuild_call(fs, oc, 2, args);
    }
    if (is_op(orig, "nn.bias_add")) { /* b (C,) times the scale (C,) */
        Expr *args[2] = {nc->args[0],
                         call2(fs, "multiply", nc->args[1], pending_scale(fs, p), orig->span)};
        return rebuild_call(fs, oc, 2, args);
    }
    if (is_addsub(orig)) {
        Msg *m = msg_of(fs, orig);
        if (m->via == 2) return pass_rebuild(rw, orig, e);
        int other = m->via == 0 ? 1 : 0;
        Expr *args[2] = {nc->args[0], nc->args[1]};
        args[other] = call2(fs, "multiply", nc->args[other],
                            expand_scale(fs, pending_scale(fs, p), tensor_of(orig)->ndim, p->axis),
                            orig->span);
        return rebuild_call(fs, oc, 2, args);
    }
    return pass_rebuild(rw, orig, e); /* relu: its operand is scaled already */
}

static Expr *backward_run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    FS fs;
    memset(&fs, 0, sizeof fs);
    fs.ctx = pc->ctx;
    Visitor v = {NULL, count_refs, &fs};
    ir_visit(&v, e);
    PtrVec order = {0}, fired = {0};
    post_order(e, &order);
    for (size_t i = 0; i < order.len; i++) { /* producers first */
        Expr *x = order.data[i];
        if (x->kind == EXPR_CALL && ((Call *)x)->op->kind == EXPR_OP && refs_of(&fs, x) == 1) {
            Msg *msg = backward_prep(&fs, (Call *)x);
            if (msg != NULL_MSG) ptrmap_put(&fs.msg, x, msg);
        }
    }
    for (size_t i = order.len; i-- > 0;) { /* consumers first: hand the scales down */
        Expr *x = order.data[i];
        if (is_op(x, "multiply")) {
            Call *c = (Call *)x;
            for (int side = 0; side < 2; side++) {
                Expr *xs = c->args[side], *s = c->args[1 - side];
                Msg *mx = msg_of(&fs, xs);
                if (mx == NULL_MSG || ptrmap_has(&fs.scaled, xs) || tensor_of(xs) != tensor_of(x) ||
                    !scale_ok(&fs, s, tensor_of(xs), mx->axis, mx))
                    continue;
                Pending *p = arena_alloc(&fs.ctx->arena, sizeof *p);
                *p = (Pending){s, tensor_of(s), tensor_of(xs), mx->axis, NULL};
                ptrmap_put(&fs.fired, x, p);
                ptrmap_put(&fs.scaled, xs, p);
                vec_push(&fired, x);
                break;
            }
            continue;
        }
        Pending *p = ptrmap_get(&fs.scaled, x);
        if (p == NULL) continue;
        Call *c = (Call *)x;
        if (is_relu(x)) {
            ptrmap_put(&fs.scaled, c->args[0], p);
        } else if (is_op(x, "nn.bias_add")) {
            ptrmap_put(&fs.scaled, c->args[0], p);
        } else if (is_addsub(x)) {
            Msg *mm = msg_of(&fs, x);
            if (mm->via != 1) ptrmap_put(&fs.scaled, c->args[0], p);
            if (mm->via != 0) ptrmap_put(&fs.scaled, c->args[1], p);
        }
    }
    Expr *r = e;
    if (fired.len) {
        Rewriter rw = {.ctx = fs.ctx, .post = backward_post, .state = &fs};
        fs.rw = &rw;
        /* the scales first, inner multiplies before outer ones, so that no rewrite of a scale
         * starts inside another rewrite */
        for (size_t i = fired.len; i-- > 0;)
            ir_rewrite(&rw, ((Pending *)ptrmap_get(&fs.fired, fired.data[i]))->orig_scale);
        r = ir_rewrite(&rw, e);
        ir_rewriter_free(&rw);
    }
    vec_free(&order);
    vec_free(&fired);
    fs_free(&fs);
    return r;
}

/* ======================================================================================
 * FoldScaleAxis: Backward, Forward, FoldConstant
 * ====================================================================================== */

/* The declared defaults of a pass ("k:type=v,..."): its arguments when run from here. */
static void default_args(Ctx *ctx, const PassDef *def, PassArgs *out) {
    uint32_t cap = 1;
    for (const char *p = def->params; *p; p++)
        cap += *p == ',';
    out->items = arena_array(&ctx->arena, cap, sizeof *out->items);
    out->n = 0;
    for (const char *p = def->params; *p;) {
        const char *colon = strchr(p, ':'), *eq = colon ? strchr(colon, '=') : NULL;
        if (eq == NULL) break;
        const char *v = eq + 1, *end = v;
        int depth = 0;
        while (*end && (depth > 0 || *end != ',')) {
            depth += (*end == '[' || *end == '(') - (*end == ']' || *end == ')');
            end++;
        }
        size_t vn = (size_t)(end - v);
        if (vn >= 2 && (v[0] == '"' || v[0] == '\'') && v[vn - 1] == v[0]) v++, vn -= 2;
        out->items[out->n++] = (PassArg){arena_strndup(&ctx->arena, p, (size_t)(colon - p)),
                                         arena_strndup(&ctx->arena, v, vn)};
        p = *end ? end + 1 : end;
        while (*p == ' ')
            p++;
    }
}

static bool run_function_pass(PassCtx *pc, Module *m, Expr *(*run)(PassCtx *, Module *, Expr *)) {
    for (size_t i = 0; i < m->funcs.len; i++) {
        FuncDef *d = &m->funcs.data[i];
        if (d->func == NULL) continue;
        Expr *r = run(pc, m, &d->func->base);
        if (r == NULL) return false;
        RLY_CHECK(r->kind == EXPR_FUNCTION, "%s rewrote a function into a %s", pc->name,
                  ir_expr_kind_names[r->kind]);
        d->func = (Function *)r;
    }
    if (m->expr) {
        Expr *r = run(pc, m, m->expr);
        if (r == NULL) return false;
        m->expr = r;
    }
    return true;
}

static bool fold_scale_axis_run(PassCtx *pc, Module *m) {
    if (!run_function_pass(pc, m, backward_run) || !run_function_pass(pc, m, forward_run))
        return false;
    const PassDef *fc = pass_lookup("FoldConstant");
    if (fc == NULL) return true; /* the folding above already made constants of constants */
    PassArgs args;
    default_args(pc->ctx, fc, &args);
    PassCtx sub = {pc->ctx, pc->opt_level, &args, fc->name};
    return fc->kind == PASS_MODULE ? fc->run_module(&sub, m)
                                   : run_function_pass(&sub, m, fc->run_expr);
}

const PassDef pass_fold_scale_axis = {
    .name = "FoldScaleAxis",
    .opt_level = 3,
    .kind = PASS_MODULE,
    .params = "",
    .run_module = fold_scale_axis_run,
    .doc = "BackwardFoldScaleAxis, ForwardFoldScaleAxis, then FoldConstant",
};

const PassDef pass_backward_fold_scale_axis = {
    .name = "BackwardFoldScaleAxis",
    .opt_level = 3,
    .kind = PASS_FUNCTION,
    .params = "",
    .run_expr = backward_run,
    .doc = "fold a per-channel scale that follows conv2d/dense into its weight",
};

const PassDef pass_forward_fold_scale_axis = {
    .name = "ForwardFoldScaleAxis",
    .opt_level = 3,
    .kind = PASS_FUNCTION,
    .params = "",
    .run_expr = forward_run,
    .doc = "fold a per-channel scale that precedes conv2d/dense into its weight",
};
