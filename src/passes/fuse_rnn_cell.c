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
 * Within dataflow only: a step written through let-bound variables is left as it is. */
#include <string.h>

#include "ops/ops.h"
#include "passes/passes.h"

typedef struct Cell {
    Ctx *ctx;
    Expr *op_dense, *op_add, *op_mul, *op_split, *op_sigmoid, *op_tanh, *op_sub;
    PtrMap cell_of_split; /* rewritten split -> 1 + index in cells */
    Vec(Expr *) cells;    /* the cell calls made */
    Vec(uint32_t) gate_o; /* the output gate's field of each */
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

/* The cell function over fresh parameters, called on (h, r, xp, c). */
static Expr *make_cell(Cell *s, Call *split, Call *add_c2, Expr *h, Expr *r, Expr *xp, Expr *c,
                       uint32_t gf, uint32_t gi, uint32_t gg, uint32_t go, Span span) {
    Ctx *ctx = s->ctx;
    Expr *args[4] = {h, r, xp, c};
    static const char *const names[4] = {"h", "R", "xp", "c"};
    Var *ps[4];
    Type *pts[4];
    for (int k = 0; k < 4; k++) {
        pts[k] = args[k]->checked_type;
        ps[k] = ir_var_new(ctx, names[k], pts[k], span);
        ps[k]->base.checked_type = pts[k];
    }
    Call *g = AS_CALL(split->args[0]);
    int dense_side = call_of(g->args[0], s->op_dense) ? 0 : 1;
    Call *d = AS_CALL(g->args[dense_side]);
    Expr *dargs[2] = {&ps[0]->base, &ps[1]->base};
    Expr *dense = op_call(s, "nn.dense", 2, dargs, d->attrs, span);
    Expr *gargs[2];
    gargs[dense_side] = dense;
    gargs[1 - dense_side] = &ps[2]->base;
    Expr *gsum = op_call(s, "add", 2, gargs, NULL, span);
    Expr *sp = op_call(s, "split", 1, &gsum, split->attrs, span);
    Expr *sf = op_call(s, "sigmoid", 1, (Expr *[]){field(s, sp, gf, span)}, NULL, span);
    Expr *si = op_call(s, "sigmoid", 1, (Expr *[]){field(s, sp, gi, span)}, NULL, span);
    Expr *tg = op_call(s, "tanh", 1, (Expr *[]){field(s, sp, gg, span)}, NULL, span);
    Expr *so = op_call(s, "sigmoid", 1, (Expr *[]){field(s, sp, go, span)}, NULL, span);
    Expr *keep = op_call(s, "multiply", 2, (Expr *[]){sf, &ps[3]->base}, NULL, span);
    Expr *in = op_call(s, "multiply", 2, (Expr *[]){si, tg}, NULL, span);
    Expr *c2 = op_call(s, "add", 2, (Expr *[]){keep, in}, NULL, span);
    Expr *tc = op_call(s, "tanh", 1, &c2, NULL, span);
    Expr *h2 = op_call(s, "multiply", 2, (Expr *[]){so, tc}, NULL, span);
    Expr *res = ir_tuple_new(ctx, 2, (Expr *[]){h2, c2}, span);
    RLY_CHECK(pass_retype(ctx, res, NULL), "FuseRNNCell: the result");
    (void)add_c2;
    const char *key = ir_intern(ctx, "Primitive", 9);
    AttrValue *one = ir_attr_int(ctx, 1, RLY_DTYPE_I32, SPAN_NONE);
    Expr *fn = ir_function_new(ctx, 4, ps, res, res->checked_type, 0, NULL,
                               ir_attrs_new(ctx, 1, &key, &one), span);
    fn->checked_type = ir_type_func(ctx, 4, pts, res->checked_type, 0, NULL, 0, NULL);
    Expr *call = ir_call_new(ctx, fn, 4, args, NULL, 0, NULL, span);
    call->checked_type = res->checked_type;
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

/* The GRU cell function (canonical order: vm_cell.c reads it so) called on (h, R, x[, bn]). */
static Expr *make_gru(Cell *s, const Gru *g, Span span) {
    Ctx *ctx = s->ctx;
    uint32_t n = g->bn ? 4 : 3;
    Expr *args[4] = {g->h, g->r, g->x, g->bn};
    static const char *const names[4] = {"h", "R", "x", "bn"};
    Var *ps[4];
    Type *pts[4];
    for (uint32_t k = 0; k < n; k++) {
        pts[k] = args[k]->checked_type;
        ps[k] = ir_var_new(ctx, names[k], pts[k], span);
        ps[k]->base.checked_type = pts[k];
    }
    Expr *h = &ps[0]->base;
    Expr *dense = op_call(s, "nn.dense", 2, (Expr *[]){h, &ps[1]->base},
                          AS_CALL(g->gs->args[0])->attrs, span);
    Expr *gs = op_call(s, "split", 1, &dense, g->gs->attrs, span);
    Expr *xs = op_call(s, "split", 1, (Expr *[]){&ps[2]->base}, g->xs->attrs, span);
    Expr *z =
        op_call(s, "sigmoid", 1,
                (Expr *[]){op_call(s, "add", 2,
                                   (Expr *[]){field(s, xs, g->kz, span), field(s, gs, g->kz, span)},
                                   NULL, span)},
                NULL, span);
    Expr *r =
        op_call(s, "sigmoid", 1,
                (Expr *[]){op_call(s, "add", 2,
                                   (Expr *[]){field(s, xs, g->kr, span), field(s, gs, g->kr, span)},
                                   NULL, span)},
                NULL, span);
    Expr *hn = field(s, gs, g->kn, span);
    if (g->bn) hn = op_call(s, "add", 2, (Expr *[]){hn, &ps[3]->base}, NULL, span);
    Expr *nn = op_call(
        s, "tanh", 1,
        (Expr *[]){op_call(s, "add", 2,
                           (Expr *[]){field(s, xs, g->kn, span),
                                      op_call(s, "multiply", 2, (Expr *[]){r, hn}, NULL, span)},
                           NULL, span)},
        NULL, span);
    Expr *zc = op_call(s, "subtract", 2, (Expr *[]){g->one, z}, NULL, span);
    Expr *h2 = op_call(s, "add", 2,
                       (Expr *[]){op_call(s, "multiply", 2, (Expr *[]){zc, nn}, NULL, span),
                                  op_call(s, "multiply", 2, (Expr *[]){z, h}, NULL, span)},
                       NULL, span);
    const char *key = ir_intern(ctx, "Primitive", 9);
    AttrValue *one = ir_attr_int(ctx, 1, RLY_DTYPE_I32, SPAN_NONE);
    Expr *fn = ir_function_new(ctx, n, ps, h2, h2->checked_type, 0, NULL,
                               ir_attrs_new(ctx, 1, &key, &one), span);
    fn->checked_type = ir_type_func(ctx, n, pts, h2->checked_type, 0, NULL, 0, NULL);
    Expr *call = ir_call_new(ctx, fn, n, args, NULL, 0, NULL, span);
    call->checked_type = h2->checked_type;
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
        Expr *cell = make_cell(s, AS_CALL(split), c, h, r, xp, cst, gf, gi, gg, go, e->span);
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
    ptrmap_free(&s.cell_of_split);
    vec_free(&s.cells);
    vec_free(&s.gate_o);
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
