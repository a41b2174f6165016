/* fuse_rnn_cell.c - FuseRNNCell (rly's own, opt level 3, before FuseOps): one LSTM or GRU step
 * as one Primitive=1 function, so that the VM runs it as one kernel (docs/passes.md,
 * "FuseRNNCell"). The GRU (linear_before_reset) is described at gru_match below.
 *
 * The ONNX importer (and anyone who writes an LSTM out) computes a step as
 *   g = add(nn.dense(h, R), xp)              (either order of add's operands)
 *   s = split(g, indices_or_sections=4, axis=-1)
 *   c2 = sigmoid(s.F) * c + sigmoid(s.I) * tanh(s.G)       (either order of each * and +)
 *   h2 = sigmoid(s.O) * tanh(c2)                           (either order of *)
 * with I, O, F, G the four fields in some order (ONNX's is i, o, f, c). FuseOps cannot keep it
 * together: c2 is read by h2 and by the next step, so the step falls into five groups (the
 * projection with the add, the split, c2, h2 and a view of xp), and the four gates of a hidden
 * unit lie in four column ranges of g, which the product's fused tail cannot reach. This pass
 * puts the step into
 *   %cell = fn (%h, %R, %xp, %c, Primitive=1) { ...the same operators...; (%h2, %c2) }
 * and replaces c2 by %cell(h, R, xp, c).1 and h2 by .0. The function computes what the step
 * did, operator for operator, so the interpreter's results are unchanged; the VM recognizes the
 * function's structure (vm_cell.c) and runs the fast LSTM cell kernel (kernels/fast/rnn.c) on
 * it: each thread computes the four gate ranges of its hidden units and then their new state,
 * with one fork per step. Matched: a float32 g of static shape (1, 4H), h of shape (1, H); the
 * rest is checked when it runs (the VM runs the function's operators one by one otherwise).
 * Within dataflow only: a step written through let-bound variables is left as it is. Then
 * consecutive steps of one recurrence become one function of all of them (join_steps, "runs of
 * steps" below), which the VM runs as one call of the sequence kernels. */
#include <string.h>

#include "ops/ops.h"
#include "passes/passes.h"

/* How a cell function computes its step (enough to write the step again: join_steps). */
typedef struct CellInfo {
    bool gru;
    uint32_t gates[4];   /* LSTM: F, I, G, O; GRU: Z, R, N */
    int dense_side;      /* LSTM: add's operand that is the product */
    const Attrs *dense;  /* the product's attributes */
    const Attrs *split;  /* LSTM: the 4-way split's; GRU: the product's 3-way split's */
    const Attrs *xsplit; /* GRU: x's split's */
    Expr *one;           /* GRU: the constant 1 of 1 - z */
    bool bn;             /* GRU: a bias bn */
} CellInfo;

typedef struct Cell {
    Ctx *ctx;
    Expr *op_dense, *op_add, *op_mul, *op_split, *op_sigmoid, *op_tanh, *op_sub;
    PtrMap cell_of_split; /* rewritten split -> 1 + index in cells */
    Vec(Expr *) cells;    /* the cell calls made */
    Vec(uint32_t) gate_o; /* the output gate's field of each */
    PtrMap info_of;       /* a cell function -> its CellInfo */
    PtrVec infos;         /* the CellInfos (owned) */
} Cell;

static Call *call_of(Expr *e, Expr *op) {
    return e->kind == EXPR_CALL && AS_CALL(e)->op == op ? AS_CALL(e) : NULL;
}

/* e is field k of tuple `of`; *k set. */
static bool field_of(Expr *e, Expr *of, uint32_t *k) {
    if (e->kind != EXPR_TUPLE_GET_ITEM || AS_TUPLE_GET_ITEM(e)->tuple != of) return false;
    *k = AS_TUPLE_GET_ITEM(e)->index;
    return true;
}

/* e is unary(split.k) */
static bool gate(Expr *e, Expr *unary, Expr *split, uint32_t *k) {
    Call *c = call_of(e, unary);
    return c != NULL && c->n_args == 1 && field_of(c->args[0], split, k);
}

/* A float32 tensor type of static shape (1, n): n, else -1. */
static int64_t row_of(Expr *e) {
    Type *t = e->checked_type;
    if (t == NULL || t->kind != TYPE_TENSOR) return -1;
    TensorType *tt = AS_TENSOR_TYPE(t);
    if (tt->dtype != RLY_DTYPE_F32 || tt->ndim != 2 || !dim_known(tt->shape[0]) ||
        !dim_known(tt->shape[1]) || tt->shape[0] != 1)
        return -1;
    return tt->shape[1];
}

static const OpDef *def_of(Expr *op) {
    Op *o = AS_OP(op);
    if (o->info == NULL) o->info = op_lookup(o->name, strlen(o->name));
    return o->info;
}

/* e = split(x, indices_or_sections=n, axis=1 or -1): x, else NULL. */
static Expr *split_of(Cell *s, Expr *e, int64_t n) {
    Call *sp = call_of(e, s->op_split);
    if (sp == NULL || sp->n_args != 1) return NULL;
    const OpDef *def = def_of(sp->op);
    const AttrValue *vals[8] = {0};
    StrBuf msg = {0};
    Span where;
    bool ok = def->n_attrs <= 8 && op_bind_attrs(def, sp->attrs, vals, &msg, &where);
    sb_free(&msg);
    if (!ok) return NULL;
    RelCall rc = {.ctx = s->ctx, .op = def, .attrs = vals};
    const AttrValue *sec = NULL;
    for (uint32_t i = 0; i < def->n_attrs; i++)
        if (strcmp(def->attrs[i].name, "indices_or_sections") == 0) sec = vals[i];
    int64_t axis = attr_int(&rc, "axis");
    if (sec == NULL || sec->kind != ATTR_INT || sec->i != n || (axis != 1 && axis != -1))
        return NULL;
    return sp->args[0];
}

/* split(g, 4, last axis) of g = add(dense(h, R), xp) with g (1, 4H) and h (1, H): the
 * operands in *h, *r, *xp. */
static bool step_split(Cell *s, Expr *split, Expr **h, Expr **r, Expr **xp) {
    Expr *g = split_of(s, split, 4);
    int64_t n4 = g ? row_of(g) : -1;
    if (n4 <= 0 || n4 % 4 != 0) return false;
    Call *add = call_of(g, s->op_add);
    if (add == NULL || add->n_args != 2) return false;
    for (int side = 0; side < 2; side++) {
        Call *d = call_of(add->args[side], s->op_dense);
        if (d == NULL || d->n_args != 2 || row_of(d->args[0]) != n4 / 4) continue;
        if (row_of(add->args[1 - side]) != n4 &&
            add->args[1 - side]->checked_type != g->checked_type)
            continue;
        *h = d->args[0], *r = d->args[1], *xp = add->args[1 - side];
        return true;
    }
    return false;
}

/* c2 = add(multiply(sigmoid(s.F), c), multiply(sigmoid(s.I), tanh(s.G))) in any order:
 * the split s, c and the fields F, I, G. */
static bool cell_state(Cell *s, Call *add, Expr **split, Expr **c, uint32_t *f, uint32_t *i,
                       uint32_t *g) {
    if (add->n_args != 2) return false;
    for (int side = 0; side < 2; side++) {
        Call *keep = call_of(add->args[side], s->op_mul),
             *in = call_of(add->args[1 - side], s->op_mul);
        if (keep == NULL || in == NULL || keep->n_args != 2 || in->n_args != 2) continue;
        /* in: sigmoid(s.I) * tanh(s.G) */
        for (int a = 0; a < 2; a++) {
            Call *sg = call_of(in->args[a], s->op_sigmoid),
                 *th = call_of(in->args[1 - a], s->op_tanh);
            if (sg == NULL || th == NULL || sg->n_args != 1 || th->n_args != 1 ||
                sg->args[0]->kind != EXPR_TUPLE_GET_ITEM)
                continue;
            Expr *sp = AS_TUPLE_GET_ITEM(sg->args[0])->tuple;
            if (!field_of(sg->args[0], sp, i) || !field_of(th->args[0], sp, g)) continue;
            /* keep: sigmoid(s.F) * c */
            for (int b = 0; b < 2; b++)
                if (gate(keep->args[b], s->op_sigmoid, sp, f)) {
                    *split = sp;
                    *c = keep->args[1 - b];
                    return *f != *i && *f != *g && *i != *g && *f < 4 && *i < 4 && *g < 4;
                }
        }
    }
    return false;
}

static Expr *op_call(Cell *s, const char *op, uint32_t n, Expr *const *args, const Attrs *attrs,
                     Span span) {
    Expr *e = pass_op_call(s->ctx, op, n, args, attrs, span);
    RLY_CHECK(e != NULL, "FuseRNNCell: %s refused operands its step had", op);
    return e;
}

static Expr *field(Cell *s, Expr *t, uint32_t k, Span span) {
    Expr *e = ir_tuple_get_item_new(s->ctx, t, k, span);
    RLY_CHECK(pass_retype(s->ctx, e, NULL), "FuseRNNCell: a field");
    return e;
}

/* One LSTM step as `info` describes it, on h, r, xp, c: its h2 in *h2, its c2 in *c2. */
static void lstm_step(Cell *s, const CellInfo *info, Expr *h, Expr *r, Expr *xp, Expr *c, Expr **h2,
                      Expr **c2, Span span) {
    Expr *dense = op_call(s, "nn.dense", 2, (Expr *[]){h, r}, info->dense, span);
    Expr *gargs[2];
    gargs[info->dense_side] = dense;
    gargs[1 - info->dense_side] = xp;
    Expr *gsum = op_call(s, "add", 2, gargs, NULL, span);
    Expr *sp = op_call(s, "split", 1, &gsum, info->split, span);
    const uint32_t *q = info->gates;
    Expr *sf = op_call(s, "sigmoid", 1, (Expr *[]){field(s, sp, q[0], span)}, NULL, span);
    Expr *si = op_call(s, "sigmoid", 1, (Expr *[]){field(s, sp, q[1], span)}, NULL, span);
    Expr *tg = op_call(s, "tanh", 1, (Expr *[]){field(s, sp, q[2], span)}, NULL, span);
    Expr *so = op_call(s, "sigmoid", 1, (Expr *[]){field(s, sp, q[3], span)}, NULL, span);
    Expr *keep = op_call(s, "multiply", 2, (Expr *[]){sf, c}, NULL, span);
    Expr *in = op_call(s, "multiply", 2, (Expr *[]){si, tg}, NULL, span);
    *c2 = op_call(s, "add", 2, (Expr *[]){keep, in}, NULL, span);
    Expr *tc = op_call(s, "tanh", 1, c2, NULL, span);
    *h2 = op_call(s, "multiply", 2, (Expr *[]){so, tc}, NULL, span);
}

/* Fresh parameters named names[k] of the types of args[0..n). */
static void params_of(Cell *s, uint32_t n, Expr *const *args, const char *const *names, Var **ps,
                      Type **pts, Span span) {
    for (uint32_t k = 0; k < n; k++) {
        pts[k] = args[k]->checked_type;
        ps[k] = ir_var_new(s->ctx, names[k], pts[k], span);
        ps[k]->base.checked_type = pts[k];
    }
}

/* fn (ps..., Primitive=1) { body } called on args. */
static Expr *primitive_call(Cell *s, uint32_t n, Var **ps, Type **pts, Expr *body,
                            Expr *const *args, Span span) {
    Ctx *ctx = s->ctx;
    const char *key = ir_intern(ctx, "Primitive", 9);
    AttrValue *one = ir_attr_int(ctx, 1, RLY_DTYPE_I32, SPAN_NONE);
    Expr *fn = ir_function_new(ctx, n, ps, body, body->checked_type, 0, NULL,
                               ir_attrs_new(ctx, 1, &key, &one), span);
    fn->checked_type = ir_type_func(ctx, n, pts, body->checked_type, 0, NULL, 0, NULL);
    Expr *call = ir_call_new(ctx, fn, n, args, NULL, 0, NULL, span);
    call->checked_type = body->checked_type;
    return call;
}

static void remember(Cell *s, Expr *call, const CellInfo *info) {
    CellInfo *keep = sup_malloc(sizeof *keep);
    *keep = *info;
    ptrmap_put(&s->info_of, AS_CALL(call)->op, keep);
    vec_push(&s->infos, (void *)keep);
}

/* The cell function over fresh parameters, called on (h, r, xp, c). */
static Expr *make_cell(Cell *s, Call *split, Expr *h, Expr *r, Expr *xp, Expr *c, uint32_t gf,
                       uint32_t gi, uint32_t gg, uint32_t go, Span span) {
    Expr *args[4] = {h, r, xp, c};
    static const char *const names[4] = {"h", "R", "xp", "c"};
    Var *ps[4];
    Type *pts[4];
    params_of(s, 4, args, names, ps, pts, span);
    Call *g = AS_CALL(split->args[0]);
    int dense_side = call_of(g->args[0], s->op_dense) ? 0 : 1;
    CellInfo info = {.gates = {gf, gi, gg, go},
                     .dense_side = dense_side,
                     .dense = AS_CALL(g->args[dense_side])->attrs,
                     .split = split->attrs};
    Expr *h2, *c2;
    lstm_step(s, &info, &ps[0]->base, &ps[1]->base, &ps[2]->base, &ps[3]->base, &h2, &c2, span);
    Expr *res = ir_tuple_new(s->ctx, 2, (Expr *[]){h2, c2}, span);
    RLY_CHECK(pass_retype(s->ctx, res, NULL), "FuseRNNCell: the result");
    Expr *call = primitive_call(s, 4, ps, pts, res, args, span);
    remember(s, call, &info);
    return call;
}

/* ---- GRU ------------------------------------------------------------------------------------ */

/* split(x, 3, last axis) with x float32 (1, 3H): true. */
static bool split3(Cell *s, Expr *e, int64_t h3) {
    Expr *x = split_of(s, e, 3);
    return x != NULL && row_of(x) == h3;
}

/* A pre-activation add(xs.k, gs.k) in either order: the field k (the same for both splits). */
static bool gru_pre(Cell *s, Expr *e, Expr *xs, Expr *gs, uint32_t *k) {
    Call *a = call_of(e, s->op_add);
    if (a == NULL || a->n_args != 2) return false;
    uint32_t k1, k2;
    for (int side = 0; side < 2; side++)
        if (field_of(a->args[side], xs, &k1) && field_of(a->args[1 - side], gs, &k2) && k1 == k2 &&
            k1 < 3) {
            *k = k1;
            return true;
        }
    return false;
}

static bool scalar_one(Expr *e) {
    if (e->kind != EXPR_CONSTANT) return false;
    Constant *c = AS_CONSTANT(e);
    return c->ndim == 0 && c->dtype == RLY_DTYPE_F32 && *(const float *)c->data == 1.0f;
}

/* A GRU step with linear_before_reset (PyTorch's, ONNX's linear_before_reset=1):
 *   gs = split(dense(h, R), 3), xs = split(x, 3) (x (1, 3H), the input's projection)
 *   z = sigmoid(xs.Z + gs.Z), r = sigmoid(xs.R + gs.R), n = tanh(xs.N + r * (gs.N + bn))
 *   h2 = (1 - z) * n + z * h          (bn optional; either order of every + and *)
 * at h2: its parts. */
typedef struct Gru {
    Expr *h, *r, *x, *bn, *one;
    Call *gs, *xs;
    uint32_t kz, kr, kn;
} Gru;

/* h2 = add(multiply(subtract(1, z), n), multiply(z, h)), either order of each: z, h, n and
 * the constant 1. */
static bool gru_output(Cell *s, Call *h2, Expr **z, Expr **h, Call **n, Expr **one) {
    if (h2->n_args != 2) return false;
    for (int side = 0; side < 2; side++) {
        Call *keep = call_of(h2->args[side], s->op_mul),
             *upd = call_of(h2->args[1 - side], s->op_mul);
        if (keep == NULL || upd == NULL || keep->n_args != 2 || upd->n_args != 2) continue;
        for (int a = 0; a < 2; a++) {
            Call *zc = call_of(upd->args[a], s->op_sub), *t = call_of(upd->args[1 - a], s->op_tanh);
            if (zc == NULL || t == NULL || zc->n_args != 2 || t->n_args != 1 ||
                !scalar_one(zc->args[0]))
                continue;
            for (int b = 0; b < 2; b++)
                if (keep->args[b] == zc->args[1]) {
                    *z = zc->args[1], *h = keep->args[1 - b], *n = t, *one = zc->args[0];
                    return true;
                }
        }
    }
    return false;
}

/* z = sigmoid(add(xs.Z, gs.Z)) with gs = split(dense(h, R), 3) and xs = split(x, 3), x and the
 * product (1, 3H): the splits and Z in g. */
static bool gru_splits(Cell *s, Expr *z, Expr *h, Gru *g) {
    Call *zs = call_of(z, s->op_sigmoid);
    Call *za = zs && zs->n_args == 1 ? call_of(zs->args[0], s->op_add) : NULL;
    int64_t H = row_of(h);
    if (za == NULL || za->n_args != 2 || H <= 0) return false;
    for (int c = 0; c < 2; c++) {
        Expr *fx = za->args[c], *fg = za->args[1 - c];
        if (fx->kind != EXPR_TUPLE_GET_ITEM || fg->kind != EXPR_TUPLE_GET_ITEM) continue;
        Expr *xs = AS_TUPLE_GET_ITEM(fx)->tuple, *gs = AS_TUPLE_GET_ITEM(fg)->tuple;
        if (!split3(s, xs, 3 * H) || !split3(s, gs, 3 * H)) continue;
        Call *d = call_of(AS_CALL(gs)->args[0], s->op_dense);
        if (d == NULL || d->n_args != 2 || d->args[0] != h) continue;
        g->h = h, g->r = d->args[1], g->x = AS_CALL(xs)->args[0];
        g->gs = AS_CALL(gs), g->xs = AS_CALL(xs);
        return gru_pre(s, zs->args[0], xs, gs, &g->kz);
    }
    return false;
}

/* bn: float32 of shape (H) or (1, H). */
static bool gru_bias(Expr *bn, int64_t H) {
    Type *t = bn->checked_type;
    if (t == NULL || t->kind != TYPE_TENSOR || AS_TENSOR_TYPE(t)->dtype != RLY_DTYPE_F32)
        return false;
    TensorType *bt = AS_TENSOR_TYPE(t);
    return row_of(bn) == H || (bt->ndim == 1 && dim_known(bt->shape[0]) && bt->shape[0] == H);
}

/* n = tanh(add(xs.N, multiply(sigmoid(add(xs.R, gs.R)), hn))) with hn = gs.N or add(gs.N, bn),
 * either order of each: N, R and bn (NULL: none) in g. */
static bool gru_new(Cell *s, Call *n, Gru *g) {
    Expr *xs = &g->xs->base, *gs = &g->gs->base;
    Call *na = call_of(n->args[0], s->op_add);
    if (na == NULL || na->n_args != 2) return false;
    for (int e = 0; e < 2; e++) {
        Call *rm = call_of(na->args[1 - e], s->op_mul);
        if (!field_of(na->args[e], xs, &g->kn) || rm == NULL || rm->n_args != 2) continue;
        for (int f = 0; f < 2; f++) {
            Call *rs = call_of(rm->args[f], s->op_sigmoid);
            Expr *hn = rm->args[1 - f];
            if (rs == NULL || rs->n_args != 1 || !gru_pre(s, rs->args[0], xs, gs, &g->kr)) continue;
            uint32_t k;
            g->bn = NULL;
            if (!field_of(hn, gs, &k)) { /* add(gs.N, bn), either order */
                Call *ba = call_of(hn, s->op_add);
                if (ba == NULL || ba->n_args != 2) continue;
                int at = field_of(ba->args[0], gs, &k) ? 0 : 1;
                if (!field_of(ba->args[at], gs, &k) || !gru_bias(ba->args[1 - at], row_of(g->h)))
                    continue;
                g->bn = ba->args[1 - at];
            }
            return k == g->kn;
        }
    }
    return false;
}

static bool gru_match(Cell *s, Call *h2, Gru *g) {
    Expr *z, *h;
    Call *n;
    *g = (Gru){0};
    return gru_output(s, h2, &z, &h, &n, &g->one) && gru_splits(s, z, h, g) && gru_new(s, n, g) &&
           g->kz != g->kr && g->kz != g->kn && g->kr != g->kn;
}

/* One GRU step as `info` describes it (canonical order: vm_cell.c reads it so) on h, r, x and
 * bn (NULL when info has none): its h2. */
static Expr *gru_step(Cell *s, const CellInfo *info, Expr *h, Expr *r, Expr *x, Expr *bn,
                      Span span) {
    const uint32_t kz = info->gates[0], kr = info->gates[1], kn = info->gates[2];
    Expr *dense = op_call(s, "nn.dense", 2, (Expr *[]){h, r}, info->dense, span);
    Expr *gs = op_call(s, "split", 1, &dense, info->split, span);
    Expr *xs = op_call(s, "split", 1, (Expr *[]){x}, info->xsplit, span);
    Expr *z = op_call(
        s, "sigmoid", 1,
        (Expr *[]){op_call(s, "add", 2, (Expr *[]){field(s, xs, kz, span), field(s, gs, kz, span)},
                           NULL, span)},
        NULL, span);
    Expr *rg = op_call(
        s, "sigmoid", 1,
        (Expr *[]){op_call(s, "add", 2, (Expr *[]){field(s, xs, kr, span), field(s, gs, kr, span)},
                           NULL, span)},
        NULL, span);
    Expr *hn = field(s, gs, kn, span);
    if (bn) hn = op_call(s, "add", 2, (Expr *[]){hn, bn}, NULL, span);
    Expr *nn = op_call(
        s, "tanh", 1,
        (Expr *[]){op_call(s, "add", 2,
                           (Expr *[]){field(s, xs, kn, span),
                                      op_call(s, "multiply", 2, (Expr *[]){rg, hn}, NULL, span)},
                           NULL, span)},
        NULL, span);
    Expr *zc = op_call(s, "subtract", 2, (Expr *[]){info->one, z}, NULL, span);
    return op_call(s, "add", 2,
                   (Expr *[]){op_call(s, "multiply", 2, (Expr *[]){zc, nn}, NULL, span),
                              op_call(s, "multiply", 2, (Expr *[]){z, h}, NULL, span)},
                   NULL, span);
}

/* The GRU cell function called on (h, R, x[, bn]). */
static Expr *make_gru(Cell *s, const Gru *g, Span span) {
    uint32_t n = g->bn ? 4 : 3;
    Expr *args[4] = {g->h, g->r, g->x, g->bn};
    static const char *const names[4] = {"h", "R", "x", "bn"};
    Var *ps[4];
    Type *pts[4];
    params_of(s, n, args, names, ps, pts, span);
    CellInfo info = {.gru = true,
                     .gates = {g->kz, g->kr, g->kn},
                     .dense = AS_CALL(g->gs->args[0])->attrs,
                     .split = g->gs->attrs,
                     .xsplit = g->xs->attrs,
                     .one = g->one,
                     .bn = g->bn != NULL};
    Expr *h2 = gru_step(s, &info, &ps[0]->base, &ps[1]->base, &ps[2]->base,
                        g->bn ? &ps[3]->base : NULL, span);
    Expr *call = primitive_call(s, n, ps, pts, h2, args, span);
    remember(s, call, &info);
    return call;
}

static bool is_primitive(const Expr *e) {
    if (e->kind != EXPR_FUNCTION) return false;
    const AttrValue *v = ir_attrs_get(((const Function *)e)->attrs, "Primitive");
    return v != NULL && v->kind == ATTR_INT && v->i == 1;
}

static Expr *pre(Rewriter *rw, Expr *e) {
    (void)rw;
    return is_primitive(e) ? e : NULL; /* fused already: left as it is */
}

static Expr *post(Rewriter *rw, Expr *orig, Expr *e) {
    Cell *s = rw->state;
    e = pass_rebuild(rw, orig, e);
    if (e->kind != EXPR_CALL) return e;
    Call *c = AS_CALL(e);
    if (c->op == s->op_add) { /* a GRU step's h2: the cell */
        Gru g;
        if (gru_match(s, c, &g)) return make_gru(s, &g, e->span);
    }
    if (c->op == s->op_add) { /* c2: make the cell, stand for its field 1 */
        Expr *split, *cst, *h, *r, *xp;
        uint32_t gf, gi, gg;
        if (!cell_state(s, c, &split, &cst, &gf, &gi, &gg)) return e;
        if (ptrmap_get(&s->cell_of_split, split) != NULL) return e; /* one cell per step */
        if (!step_split(s, split, &h, &r, &xp)) return e;
        if (row_of(cst) != row_of(h) || row_of(e) != row_of(h)) return e;
        uint32_t go = 6 - gf - gi - gg; /* the field left */
        Expr *cell = make_cell(s, AS_CALL(split), h, r, xp, cst, gf, gi, gg, go, e->span);
        vec_push(&s->cells, cell);
        vec_push(&s->gate_o, go);
        ptrmap_put(&s->cell_of_split, split, (void *)(uintptr_t)s->cells.len);
        return field(s, cell, 1, e->span);
    }
    if (c->op == s->op_mul && c->n_args == 2) { /* h2 = sigmoid(s.O) * tanh(c2) */
        for (int a = 0; a < 2; a++) {
            Call *th = call_of(c->args[1 - a], s->op_tanh);
            Call *sg = call_of(c->args[a], s->op_sigmoid);
            if (th == NULL || sg == NULL || th->n_args != 1 || sg->n_args != 1 ||
                sg->args[0]->kind != EXPR_TUPLE_GET_ITEM)
                continue;
            Expr *split = AS_TUPLE_GET_ITEM(sg->args[0])->tuple;
            uintptr_t at = (uintptr_t)ptrmap_get(&s->cell_of_split, split);
            uint32_t k;
            if (at == 0 || !field_of(sg->args[0], split, &k) || k != s->gate_o.data[at - 1])
                continue;
            Expr *cell = s->cells.data[at - 1];
            if (!field_of(th->args[0], cell, &k) || k != 1) continue;
            return field(s, cell, 0, e->span);
        }
    }
    return e;
}

/* ---- runs of steps ---------------------------------------------------------------------------
 *
 * Consecutive steps of one recurrence (a cell whose h and c are the fields of the cell before,
 * with the same R and the same structure) become one Primitive function of the steps in order,
 *   fn (%h, %R, %c, %xp1, ..., %xpn, Primitive=1) { ...; (h1, c1, h2, c2, ..., hn, cn) }
 * (GRU: fn (%h, %R[, %bn], %x1, ..., %xn) { ...; (h1, ..., hn) }), each cell's fields replaced
 * by the function's: the VM runs it as one call of the sequence kernels (vm_cell.c), which saves
 * the calls between steps. Only in a function that is all dataflow (no let, if, match,
 * references or closures: every variable a parameter), and only where no step's input
 * projection is computed from an earlier step of the run (a run is cut there); at most MAX_STEPS
 * steps per function. */

#define MAX_STEPS 128

static bool is_primitive(const Expr *e);

typedef struct Flow {
    Expr *top;
    bool ok;
} Flow;

static VisitResult flow_pre(Visitor *v, Expr *e) {
    Flow *f = v->state;
    switch (e->kind) {
    case EXPR_LET:
    case EXPR_IF:
    case EXPR_MATCH:
    case EXPR_REF_CREATE:
    case EXPR_REF_READ:
    case EXPR_REF_WRITE: f->ok = false; return VISIT_STOP;
    case EXPR_FUNCTION:
        if (e == f->top) return VISIT_CONTINUE;
        if (is_primitive(e)) return VISIT_SKIP;
        f->ok = false;
        return VISIT_STOP;
    default: return VISIT_CONTINUE;
    }
}

typedef struct Calls {
    Cell *s;
    PtrVec calls; /* the cell calls, in post-order (a step before the steps that read it) */
} Calls;

static VisitResult calls_pre(Visitor *v, Expr *e) {
    (void)v;
    return is_primitive(e) ? VISIT_SKIP : VISIT_CONTINUE;
}

static void calls_post(Visitor *v, Expr *e) {
    Calls *c = v->state;
    if (e->kind == EXPR_CALL && ptrmap_has(&c->s->info_of, AS_CALL(e)->op))
        vec_push(&c->calls, (void *)e);
}

static const CellInfo *info(Cell *s, Expr *call) {
    return ptrmap_get(&s->info_of, AS_CALL(call)->op);
}

/* The cell call whose step d continues (its h, and for an LSTM its c, are that call's), or
 * NULL. */
static Expr *before(Cell *s, Expr *d, const PtrMap *is_cell) {
    Call *dc = AS_CALL(d);
    const CellInfo *di = info(s, d);
    Expr *c;
    if (di->gru) {
        c = dc->args[0];
        if (!ptrmap_has(is_cell, c)) return NULL;
    } else {
        Expr *h = dc->args[0], *cs = dc->args[3];
        if (h->kind != EXPR_TUPLE_GET_ITEM || cs->kind != EXPR_TUPLE_GET_ITEM) return NULL;
        c = AS_TUPLE_GET_ITEM(h)->tuple;
        if (AS_TUPLE_GET_ITEM(cs)->tuple != c || AS_TUPLE_GET_ITEM(h)->index != 0 ||
            AS_TUPLE_GET_ITEM(cs)->index != 1 || !ptrmap_has(is_cell, c))
            return NULL;
    }
    Call *cc = AS_CALL(c);
    const CellInfo *ci = info(s, c);
    if (ci->gru != di->gru || cc->n_args != dc->n_args || cc->args[1] != dc->args[1] ||
        memcmp(ci->gates, di->gates, sizeof ci->gates) != 0 || ci->dense_side != di->dense_side ||
        ci->bn != di->bn || (di->bn && cc->args[3] != dc->args[3]))
        return NULL;
    return c;
}

typedef struct Reach {
    const PtrMap *in; /* the cells of the run */
    PtrMap yes;       /* nodes from which one of them is reached */
} Reach;

static VisitResult reach_pre(Visitor *v, Expr *e) {
    Reach *r = v->state;
    if (ptrmap_has(r->in, e)) {
        ptrmap_put(&r->yes, e, e);
        return VISIT_SKIP;
    }
    return is_primitive(e) ? VISIT_SKIP : VISIT_CONTINUE;
}

static void reach_post(Visitor *v, Expr *e) {
    Reach *r = v->state;
    for (uint32_t i = 0; i < ir_expr_n_children(e); i++) {
        Expr *k = ir_expr_child(e, i);
        if (k != NULL && ptrmap_has(&r->yes, k)) {
            ptrmap_put(&r->yes, e, e);
            return;
        }
    }
}

/* The function of steps run[0..n) called on their inputs. */
static Expr *make_run(Cell *s, Expr *const *run, uint32_t n) {
    Ctx *ctx = s->ctx;
    Call *first = AS_CALL(run[0]);
    const CellInfo *ci = info(s, run[0]);
    Span span = run[0]->span;
    uint32_t fixed = ci->gru ? (ci->bn ? 3 : 2) : 3, np = fixed + n;
    Expr **args = sup_malloc(sizeof(Expr *) * np);
    const char **names = sup_malloc(sizeof(char *) * np);
    Var **ps = sup_malloc(sizeof(Var *) * np);
    Type **pts = sup_malloc(sizeof(Type *) * np);
    args[0] = first->args[0], names[0] = "h";
    args[1] = first->args[1], names[1] = "R";
    if (fixed == 3) args[2] = first->args[3], names[2] = ci->gru ? "bn" : "c";
    for (uint32_t k = 0; k < n; k++)
        args[fixed + k] = AS_CALL(run[k])->args[2], names[fixed + k] = ci->gru ? "x" : "xp";
    params_of(s, np, args, names, ps, pts, span);
    uint32_t per = ci->gru ? 1 : 2;
    Expr **res = sup_malloc(sizeof(Expr *) * per * n);
    Expr *h = &ps[0]->base, *c = ci->gru ? NULL : &ps[2]->base;
    Expr *bn = ci->gru && ci->bn ? &ps[2]->base : NULL;
    for (uint32_t k = 0; k < n; k++) {
        if (ci->gru) {
            h = gru_step(s, ci, h, &ps[1]->base, &ps[fixed + k]->base, bn, span);
            res[k] = h;
        } else {
            lstm_step(s, ci, h, &ps[1]->base, &ps[fixed + k]->base, c, &h, &c, span);
            res[2 * k] = h, res[2 * k + 1] = c;
        }
    }
    Expr *tuple = ir_tuple_new(ctx, per * n, res, span);
    RLY_CHECK(pass_retype(ctx, tuple, NULL), "FuseRNNCell: a run's result");
    Expr *call = primitive_call(s, np, ps, pts, tuple, args, span);
    free(args), free(names), free(ps), free(pts), free(res);
    return call;
}

typedef struct Join {
    Cell *s;
    PtrMap step_of; /* a cell of the run -> 1 + its step */
    Expr *run;      /* the function's call */
} Join;

static Expr *join_pre(Rewriter *rw, Expr *e) {
    Join *j = rw->state;
    if (is_primitive(e)) return e;
    uintptr_t k;
    if (e->kind == EXPR_TUPLE_GET_ITEM &&
        (k = (uintptr_t)ptrmap_get(&j->step_of, AS_TUPLE_GET_ITEM(e)->tuple)) != 0 &&
        !info(j->s, AS_TUPLE_GET_ITEM(e)->tuple)->gru)
        return field(j->s, j->run, 2 * (uint32_t)(k - 1) + AS_TUPLE_GET_ITEM(e)->index, e->span);
    if (e->kind == EXPR_CALL && (k = (uintptr_t)ptrmap_get(&j->step_of, e)) != 0 &&
        info(j->s, e)->gru)
        return field(j->s, j->run, (uint32_t)(k - 1), e->span);
    return NULL;
}

static Expr *join_post(Rewriter *rw, Expr *orig, Expr *e) { return pass_rebuild(rw, orig, e); }

/* One run of two or more steps of e joined into one function: the new e, or NULL when e has
 * none left. */
static Expr *join_one(Cell *s, Expr *e) {
    Calls cs = {.s = s};
    Visitor v = {.pre = calls_pre, .post = calls_post, .state = &cs};
    ir_visit(&v, e);
    size_t n = cs.calls.len;
    PtrMap is_cell = {0}, prev = {0}, succs = {0};
    for (size_t i = 0; i < n; i++)
        ptrmap_put(&is_cell, cs.calls.data[i], cs.calls.data[i]);
    /* links: d continues c; a step read by two later steps ends its run */
    for (size_t i = 0; i < n; i++) {
        Expr *d = cs.calls.data[i], *c = before(s, d, &is_cell);
        if (c == NULL) continue;
        ptrmap_put(&prev, d, c);
        ptrmap_put(&succs, c, (void *)((uintptr_t)ptrmap_get(&succs, c) + 1));
    }
    PtrMap next = {0};
    for (size_t i = 0; i < n; i++) {
        Expr *d = cs.calls.data[i], *c = ptrmap_get(&prev, d);
        if (c != NULL && (uintptr_t)ptrmap_get(&succs, c) == 1) ptrmap_put(&next, c, d);
    }
    Expr *out = NULL;
    PtrVec chain = {0};
    for (size_t i = 0; i < n && out == NULL; i++) {
        Expr *head = cs.calls.data[i], *p = ptrmap_get(&prev, head);
        if ((p != NULL && ptrmap_get(&next, p) == head) || ptrmap_get(&next, head) == NULL)
            continue; /* not the first step of a run */
        chain.len = 0;
        PtrMap in = {0};
        for (Expr *c = head; c != NULL; c = ptrmap_get(&next, c)) {
            vec_push(&chain, (void *)c);
            ptrmap_put(&in, c, c);
        }
        /* the steps whose input projection reaches a step of the run start a new piece */
        Reach r = {.in = &in};
        Expr **xs = sup_malloc(sizeof(Expr *) * chain.len);
        for (size_t k = 0; k < chain.len; k++)
            xs[k] = AS_CALL((Expr *)chain.data[k])->args[2];
        Expr *all = ir_tuple_new(s->ctx, (uint32_t)chain.len, xs, SPAN_NONE);
        Visitor rv = {.pre = reach_pre, .post = reach_post, .state = &r};
        ir_visit(&rv, all);
        size_t a = 0;
        for (size_t k = 1; k <= chain.len && out == NULL; k++) {
            bool cut = k == chain.len || k - a == MAX_STEPS || ptrmap_has(&r.yes, xs[k]);
            if (!cut) continue;
            if (k - a >= 2) {
                Join j = {.s = s};
                for (size_t q = a; q < k; q++)
                    ptrmap_put(&j.step_of, chain.data[q], (void *)(uintptr_t)(q - a + 1));
                j.run = make_run(s, (Expr *const *)(chain.data + a), (uint32_t)(k - a));
                Rewriter rw = {.ctx = s->ctx, .pre = join_pre, .post = join_post, .state = &j};
                out = ir_rewrite(&rw, e);
                ir_rewriter_free(&rw);
                ptrmap_free(&j.step_of);
            }
            a = k;
        }
        free(xs);
        ptrmap_free(&r.yes);
        ptrmap_free(&in);
    }
    vec_free(&chain);
    ptrmap_free(&next);
    ptrmap_free(&succs);
    ptrmap_free(&prev);
    ptrmap_free(&is_cell);
    vec_free(&cs.calls);
    return out;
}

static Expr *join_steps(Cell *s, Expr *e) {
    if (s->infos.len < 2) return e;
    Flow f = {.top = e, .ok = true};
    Visitor v = {.pre = flow_pre, .state = &f};
    ir_visit(&v, e);
    if (!f.ok) return e;
    for (Expr *j; (j = join_one(s, e)) != NULL;)
        e = j;
    return e;
}

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    Ctx *ctx = pc->ctx;
    Cell s = {.ctx = ctx};
    s.op_dense = ir_op_get(ctx, "nn.dense", 8);
    s.op_add = ir_op_get(ctx, "add", 3);
    s.op_mul = ir_op_get(ctx, "multiply", 8);
    s.op_split = ir_op_get(ctx, "split", 5);
    s.op_sigmoid = ir_op_get(ctx, "sigmoid", 7);
    s.op_tanh = ir_op_get(ctx, "tanh", 4);
    s.op_sub = ir_op_get(ctx, "subtract", 8);
    Rewriter rw = {.ctx = ctx, .pre = pre, .post = post, .state = &s};
    Expr *r = ir_rewrite(&rw, e);
    ir_rewriter_free(&rw);
    r = join_steps(&s, r);
    ptrmap_free(&s.cell_of_split);
    vec_free(&s.cells);
    vec_free(&s.gate_o);
    for (size_t i = 0; i < s.infos.len; i++)
        free(s.infos.data[i]);
    vec_free(&s.infos);
    ptrmap_free(&s.info_of);
    return r;
}

const PassDef pass_fuse_rnn_cell = {
    .name = "FuseRNNCell",
    .opt_level = 3,
    .kind = PASS_FUNCTION,
    .params = "",
    .run_expr = run,
    .doc = "one LSTM step (returning (h, c)) or one GRU step (linear_before_reset) as one "
           "Primitive=1 function, which the VM runs as one cell kernel",
};
