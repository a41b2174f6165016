/* grad_ops_nn.c - gradients of the nn.* operators: products (dense, matmul, batch_matmul),
 * convolutions (conv1d/conv2d, their transposes and weight gradient, which are each other's
 * adjoints), pooling, activations, softmax, normalizations (batch, batch training, layer,
 * instance, group, l2), padding and dilation, rearrangements, dropout and the losses.
 *
 * Convolutions and pools are handled in NCHW/OIHW (NCW/OIW for 1-D, computed as 2-D with a
 * height of 1); other layouts are refused, naming the layout attribute. Products with an
 * out_dtype cast the adjoint back to the operand's dtype first. Adjoints that use an operator
 * without a gradient: max pooling (nn.max_pool2d_grad), which therefore cannot be
 * differentiated twice. */
#include <math.h>
#include <string.h>

#include "passes/grad.h"

#define X (b->g->args[0])
#define W (b->g->args[1])
#define G (b->g->dout)
#define MAXR 32

static rly_dtype dt0(GradBuilder *b) { return grad_arg_tensor(b, 0)->dtype; }
static Expr *sc(GradBuilder *b, double v) { return grad_scalar(b, dt0(b), v); }

/* The adjoint of the result in argument i's dtype (products with out_dtype). */
static Expr *g_as(GradBuilder *b, uint32_t i) {
    TensorType *y = grad_out_tensor(b), *a = grad_arg_tensor(b, i);
    if (y->dtype == a->dtype) return G;
    return grad_op2(b, "cast_like", G, b->g->args[i]);
}

/* Argument i in the dtype of argument like (operands of mixed dtypes with out_dtype). */
static Expr *arg_as(GradBuilder *b, uint32_t i, uint32_t like) {
    if (grad_arg_tensor(b, i)->dtype == grad_arg_tensor(b, like)->dtype) return b->g->args[i];
    return grad_op2(b, "cast_like", b->g->args[i], b->g->args[like]);
}

static int64_t norm_axis(int64_t axis, uint32_t ndim) { return axis < 0 ? axis + ndim : axis; }

/* sum over every axis but `axis` */
static Expr *sum_but(GradBuilder *b, Expr *x, int64_t axis) {
    return grad_sum(b, x, 1, &axis, false, true);
}

/* op(x, axis=[axis], exclude, keepdims=True) for the reductions mean and sum */
static Expr *reduce_keep(GradBuilder *b, const char *op, Expr *x, uint32_t n, const int64_t *axes,
                         bool exclude) {
    return grad_op1a(b, op, x,
                     grad_attrs(b, 3, "axis", grad_ais(b, n, axes), "keepdims", grad_ab(b, true),
                                "exclude", grad_ab(b, exclude)));
}

/* ======================================================================================
 * Products
 * ====================================================================================== */

static Expr *matmul(GradBuilder *b, Expr *x, Expr *y, bool ta, bool tb) {
    return grad_op2a(
        b, "nn.matmul", x, y,
        grad_attrs(b, 2, "transpose_a", grad_ab(b, ta), "transpose_b", grad_ab(b, tb)));
}

static Expr *batch_matmul(GradBuilder *b, Expr *x, Expr *y, bool ta, bool tb) {
    return grad_op2a(
        b, "nn.batch_matmul", x, y,
        grad_attrs(b, 2, "transpose_a", grad_ab(b, ta), "transpose_b", grad_ab(b, tb)));
}

/* Y = op(A) op(B), A of rank >= 1 ((..., k), or (..., k, m) transposed), B 2-D. */
static bool matmul_adjoints(GradBuilder *b, Expr **d, bool ta, bool tb) {
    TensorType *a = grad_arg_tensor(b, 0), *y = grad_out_tensor(b);
    uint32_t r = a->ndim;
    /* dA = G op(B)^T, transposed back when A is */
    Expr *da = matmul(b, g_as(b, 0), arg_as(b, 1, 0), false, !tb);
    if (ta) {
        int64_t perm[MAXR];
        for (uint32_t i = 0; i < r; i++)
            perm[i] = i;
        perm[r - 2] = r - 1, perm[r - 1] = r - 2;
        da = grad_op1a(b, "transpose", da, grad_attrs(b, 1, "axes", grad_ais(b, r, perm)));
    }
    d[0] = da;
    /* dop(B) = sum over the leading axes of op(A)^T G; A is (..., k) or, transposed,
     * (..., k, m) with k the reduced axis */
    int64_t n = y->shape[y->ndim - 1], k = a->shape[ta ? r - 2 : r - 1], m = a->shape[r - 1];
    if (!dim_known(n) || !dim_known(k) || !dim_known(m))
        return grad_fail(b, "the gradient needs static inner dimensions of the operands");
    Expr *gb = g_as(b, 1);
    if (!ta) {
        int64_t sa[2] = {-1, k}, sg[2] = {-1, n};
        Expr *a2 = grad_reshape(b, arg_as(b, 0, 1), 2, sa), *g2 = grad_reshape(b, gb, 2, sg);
        d[1] = tb ? matmul(b, g2, a2, true, false) : matmul(b, a2, g2, true, false);
    } else {
        int64_t sa[3] = {-1, k, m}, sg[3] = {-1, m, n}, zero = 0;
        Expr *a3 = grad_reshape(b, arg_as(b, 0, 1), 3, sa), *g3 = grad_reshape(b, gb, 3, sg);
        Expr *p = tb ? batch_matmul(b, g3, a3, true, true) : batch_matmul(b, a3, g3, false, false);
        d[1] = grad_sum(b, p, 1, &zero, false, false);
    }
    return true;
}

static bool g_dense(GradBuilder *b, Expr **d) { return matmul_adjoints(b, d, false, true); }
static bool g_matmul(GradBuilder *b, Expr **d) {
    return matmul_adjoints(b, d, attr_bool(&b->rc, "transpose_a"),
                           attr_bool(&b->rc, "transpose_b"));
}

/* collapse a batch_matmul adjoint over a broadcast batch of 1 */
static Expr *batch_collapse(GradBuilder *b, Expr *x, uint32_t i) {
    TensorType *a = grad_arg_tensor(b, i), *y = grad_out_tensor(b);
    if (dim_known(a->shape[0]) && a->shape[0] == y->shape[0]) return x;
    return grad_op2(b, "collapse_sum_like", x, b->g->args[i]);
}

static bool g_batch_matmul(GradBuilder *b, Expr **d) {
    bool ta = attr_bool(&b->rc, "transpose_a"), tb = attr_bool(&b->rc, "transpose_b");
    Expr *gx = g_as(b, 0), *gy = g_as(b, 1), *y = arg_as(b, 1, 0), *x = arg_as(b, 0, 1);
    Expr *dx = ta ? batch_matmul(b, y, gx, tb, true) : batch_matmul(b, gx, y, false, !tb);
    Expr *dy = tb ? batch_matmul(b, gy, x, true, ta) : batch_matmul(b, x, gy, !ta, false);
    d[0] = batch_collapse(b, dx, 0);
    d[1] = batch_collapse(b, dy, 1);
    return true;
}

/* ======================================================================================
 * Convolutions: conv2d, conv2d_transpose and conv2d_backward_weight are bilinear and each
 * other's adjoints; conv1d is computed as conv2d with a height of 1.
 * ====================================================================================== */

typedef struct ConvP {
    int64_t stride[2], dil[2], pb[2], pa[2], k[2], groups;
} ConvP;

/* strides, dilation, padding (1, nsp or 2 nsp values) and groups of a 1-D or 2-D call, as 2-D
 * (a 1-D call gets height 1: stride, dilation 1, padding 0). */
static void conv_params(GradBuilder *b, uint32_t nsp, bool has_groups, ConvP *p) {
    const int64_t *s, *dl, *pd;
    uint32_t ns = attr_ints(&b->rc, "strides", &s), nd = attr_ints(&b->rc, "dilation", &dl),
             np = attr_ints(&b->rc, "padding", &pd);
    uint32_t off = 2 - nsp;
    for (uint32_t i = 0; i < 2; i++)
        p->stride[i] = p->dil[i] = 1, p->pb[i] = p->pa[i] = 0;
    for (uint32_t i = 0; i < nsp; i++) {
        p->stride[off + i] = s[ns == 1 ? 0 : i];
        p->dil[off + i] = dl[nd == 1 ? 0 : i];
        p->pb[off + i] = pd[np == 1 ? 0 : i];
        p->pa[off + i] = pd[np == 1 ? 0 : np == nsp ? i : i + nsp];
    }
    p->groups = has_groups ? attr_int(&b->rc, "groups") : 1;
}

/* The attributes of a 2-D convolution-like call with parameters p. */
static const Attrs *conv_attrs(GradBuilder *b, const ConvP *p, int64_t channels, bool transpose,
                               const int64_t *opad) {
    int64_t pads[4] = {p->pb[0], p->pb[1], p->pa[0], p->pa[1]};
    AttrValue *common[6] = {grad_ais(b, 2, p->stride), grad_ais(b, 4, pads), grad_ais(b, 2, p->dil),
                            grad_ai(b, p->groups),     grad_ai(b, channels), grad_ais(b, 2, p->k)};
    if (transpose)
        return grad_attrs(b, 7, "strides", common[0], "padding", common[1], "dilation", common[2],
                          "groups", common[3], "channels", common[4], "kernel_size", common[5],
                          "output_padding", grad_ais(b, 2, opad));
    return grad_attrs(b, 6, "strides", common[0], "padding", common[1], "dilation", common[2],
                      "groups", common[3], "channels", common[4], "kernel_size", common[5]);
}

/* output_padding making a transposed convolution of `out` give `in` (each axis). With out =
 * floor((in + pads - window) / stride) + 1 it is (in + pads - window) mod stride, so always
 * below the stride, as conv2d_transpose requires. */
static void out_padding(const ConvP *p, const int64_t *in, const int64_t *out, int64_t *opad) {
    for (int i = 0; i < 2; i++) {
        int64_t window = p->dil[i] * (p->k[i] - 1) + 1;
        opad[i] = in[i] + p->pb[i] + p->pa[i] - window - (out[i] - 1) * p->stride[i];
        RLY_CHECK(opad[i] >= 0 && opad[i] < p->stride[i], "convolution output size mismatch");
    }
}

static bool need_layout(GradBuilder *b, const char *attr, const char *want, const char *alt) {
    const char *s = attr_str(&b->rc, attr);
    if (strcmp(s, want) == 0 || (alt && strcmp(s, alt) == 0)) return true;
    return grad_fail(b, "%s \"%s\" has no gradient (only \"%s\")", attr, s, want);
}

/* Adjoints of y = conv2d(x, w) (NCHW, OIHW) given the 4-D operands as expressions with their
 * static shapes (xs, ws, ys); dx, dw set (dw in w's layout read as (cout, cin/g, kh, kw)). */
static void conv2d_core(GradBuilder *b, const ConvP *p0, Expr *x, const int64_t *xs, Expr *w,
                        const int64_t *ws, Expr *gx, Expr *gw, const int64_t *ys, Expr **dx,
                        Expr **dw) {
    ConvP p = *p0;
    p.k[0] = ws[2], p.k[1] = ws[3];
    int64_t opad[2], cin = xs[1], cout = ys[1];
    out_padding(&p, xs + 2, ys + 2, opad);
    /* depthwise with a channel multiplier: weight (C, M, k) is read as (C * M, 1, k) */
    bool multi = p.groups > 1 && cin == p.groups && ws[0] == p.groups && ws[1] > 1;
    Expr *wv = w;
    if (multi) {
        int64_t s[4] = {ws[0] * ws[1], 1, ws[2], ws[3]};
        wv = grad_reshape(b, w, 4, s);
    }
    Expr *a[2] = {gx, wv};
    *dx = grad_call(b, "nn.conv2d_transpose", 2, a, conv_attrs(b, &p, cin, true, opad));
    Expr *c[2] = {gw, x};
    *dw = grad_call(b, "nn.conv2d_backward_weight", 2, c, conv_attrs(b, &p, cout, false, NULL));
    if (multi) *dw = grad_reshape(b, *dw, 4, ws);
}

static bool static_args(GradBuilder *b) {
    return grad_need_static(b, grad_arg_tensor(b, 0), "the first operand") &&
           grad_need_static(b, grad_arg_tensor(b, 1), "the second operand") &&
           grad_need_static(b, grad_out_tensor(b), "the result");
}

static bool g_conv2d(GradBuilder *b, Expr **d) {
    if (!need_layout(b, "data_layout", "NCHW", NULL) ||
        !need_layout(b, "kernel_layout", "OIHW", NULL) ||
        !need_layout(b, "out_layout", "NCHW", "") || !static_args(b))
        return false;
    ConvP p;
    conv_params(b, 2, true, &p);
    conv2d_core(b, &p, X, grad_arg_tensor(b, 0)->shape, W, grad_arg_tensor(b, 1)->shape, g_as(b, 0),
                g_as(b, 1), grad_out_tensor(b)->shape, &d[0], &d[1]);
    return true;
}

static bool g_conv1d(GradBuilder *b, Expr **d) {
    if (!need_layout(b, "data_layout", "NCW", NULL) ||
        !need_layout(b, "kernel_layout", "OIW", NULL) || !need_layout(b, "out_layout", "NCW", "") ||
        !static_args(b))
        return false;
    ConvP p;
    conv_params(b, 1, true, &p);
    TensorType *x = grad_arg_tensor(b, 0), *w = grad_arg_tensor(b, 1), *y = grad_out_tensor(b);
    int64_t xs[4] = {x->shape[0], x->shape[1], 1, x->shape[2]};
    int64_t ws[4] = {w->shape[0], w->shape[1], 1, w->shape[2]};
    int64_t ys[4] = {y->shape[0], y->shape[1], 1, y->shape[2]};
    const Attrs *ax = grad_attrs(b, 1, "axis", grad_ai(b, 2));
    Expr *dx, *dw;
    conv2d_core(b, &p, grad_op1a(b, "expand_dims", X, ax), xs, grad_op1a(b, "expand_dims", W, ax),
                ws, grad_op1a(b, "expand_dims", g_as(b, 0), ax),
                grad_op1a(b, "expand_dims", g_as(b, 1), ax), ys, &dx, &dw);
    d[0] = grad_op2(b, "reshape_like", dx, X);
    d[1] = grad_op2(b, "reshape_like", dw, W);
    return true;
}

/* y = conv2d_transpose(x, w): dx = conv2d(g, w) (the convolution it is the adjoint of), and
 * dw = conv2d_backward_weight(x, g) (x plays the output gradient, g the data). */
static bool g_conv2d_transpose(GradBuilder *b, Expr **d) {
    if (!need_layout(b, "data_layout", "NCHW", NULL) ||
        !need_layout(b, "kernel_layout", "IOHW", NULL) ||
        !need_layout(b, "out_layout", "NCHW", "") || !static_args(b))
        return false;
    ConvP p;
    conv_params(b, 2, true, &p);
    TensorType *x = grad_arg_tensor(b, 0), *w = grad_arg_tensor(b, 1);
    p.k[0] = w->shape[2], p.k[1] = w->shape[3];
    const int64_t *op;
    uint32_t no = attr_ints(&b->rc, "output_padding", &op);
    for (uint32_t i = 0; i < 2; i++)
        if (op[no == 1 ? 0 : i] >= p.stride[i])
            return grad_fail(b, "output_padding >= strides has no gradient");
    Expr *a[2] = {g_as(b, 0), W};
    d[0] = grad_call(b, "nn.conv2d", 2, a, conv_attrs(b, &p, x->shape[1], false, NULL));
    Expr *c[2] = {X, g_as(b, 1)};
    d[1] = grad_call(b, "nn.conv2d_backward_weight", 2, c,
                     conv_attrs(b, &p, x->shape[1], false, NULL));
    return true;
}

/* y = conv2d_backward_weight(a, x) (a: output gradient, x: data) = dW of conv2d(x, W) at a */
static bool g_conv2d_backward_weight(GradBuilder *b, Expr **d) {
    if (!need_layout(b, "data_layout", "NCHW", NULL) ||
        !need_layout(b, "kernel_layout", "OIHW", "NCHW") ||
        !need_layout(b, "out_layout", "OIHW", "") || !static_args(b))
        return false;
    ConvP p;
    conv_params(b, 2, true, &p);
    TensorType *a = grad_arg_tensor(b, 0), *x = grad_arg_tensor(b, 1), *y = grad_out_tensor(b);
    p.k[0] = y->shape[2], p.k[1] = y->shape[3];
    int64_t opad[2];
    out_padding(&p, x->shape + 2, a->shape + 2, opad);
    Expr *ca[2] = {W, G};
    d[0] = grad_call(b, "nn.conv2d", 2, ca, conv_attrs(b, &p, a->shape[1], false, NULL));
    Expr *cx[2] = {X, G};
    d[1] = grad_call(b, "nn.conv2d_transpose", 2, cx, conv_attrs(b, &p, x->shape[1], true, opad));
    return true;
}

/* ======================================================================================
 * Pooling
 * ====================================================================================== */

/* max_pool2d: nn.max_pool2d_grad, which has no gradient itself */
static bool g_max_pool2d(GradBuilder *b, Expr **d) {
    d[0] = grad_op2a(b, "nn.max_pool2d_grad", G, X, b->g->call->attrs);
    return true;
}

static bool g_avg_pool2d(GradBuilder *b, Expr **d) {
    d[0] = grad_op2a(b, "nn.avg_pool2d_grad", G, X, b->g->call->attrs);
    return true;
}

/* avg_pool2d_grad(a, x) is linear in a with adjoint avg_pool2d; x only gives the shape */
static bool g_avg_pool2d_grad(GradBuilder *b, Expr **d) {
    d[0] = grad_op1a(b, "nn.avg_pool2d", G, b->g->call->attrs);
    return true;
}

/* 1-D pools as 2-D pools of height 1 */
static bool pool1d(GradBuilder *b, Expr **d, const char *grad_op, bool avg) {
    if (!need_layout(b, "layout", "NCW", NULL) || !need_layout(b, "out_layout", "NCW", ""))
        return false;
    const int64_t *ps;
    attr_ints(&b->rc, "pool_size", &ps);
    ConvP p;
    conv_params(b, 1, false, &p);
    int64_t pool[2] = {1, ps[0]}, pads[4] = {0, p.pb[1], 0, p.pa[1]};
    const char *keys[8] = {"pool_size", "strides",   "dilation",         "padding",
                           "layout",    "ceil_mode", "count_include_pad"};
    AttrValue *vals[8] = {grad_ais(b, 2, pool),
                          grad_ais(b, 2, p.stride),
                          grad_ais(b, 2, p.dil),
                          grad_ais(b, 4, pads),
                          grad_as(b, "NCHW"),
                          grad_attr_same(b, "ceil_mode"),
                          avg ? grad_attr_same(b, "count_include_pad") : NULL};
    uint32_t n = avg ? 7 : 6;
    for (uint32_t i = 0; i < n; i++)
        keys[i] = ir_intern(b->ctx, keys[i], strlen(keys[i]));
    const Attrs *at = ir_attrs_new(b->ctx, n, keys, vals);
    const Attrs *ax = grad_attrs(b, 1, "axis", grad_ai(b, 2));
    Expr *r = grad_op2a(b, grad_op, grad_op1a(b, "expand_dims", G, ax),
                        grad_op1a(b, "expand_dims", X, ax), at);
    d[0] = grad_op2(b, "reshape_like", r, X);
    return true;
}

static bool g_max_pool1d(GradBuilder *b, Expr **d) {
    return pool1d(b, d, "nn.max_pool2d_grad", false);
}
static bool g_avg_pool1d(GradBuilder *b, Expr **d) {
    return pool1d(b, d, "nn.avg_pool2d_grad", true);
}

/* global pools: the spatial axes H and W of the layout */
static bool hw_axes(GradBuilder *b, int64_t *hw) {
    Layout l;
    if (!rel_layout_parse(&b->rc, "layout", attr_str(&b->rc, "layout"), &l)) return false;
    hw[0] = layout_find(&l, 'H');
    hw[1] = layout_find(&l, 'W');
    return true;
}

static bool g_global_avg_pool2d(GradBuilder *b, Expr **d) {
    int64_t hw[2];
    if (!hw_axes(b, hw)) return false;
    TensorType *x = grad_arg_tensor(b, 0);
    int64_t h = x->shape[hw[0]], w = x->shape[hw[1]];
    Expr *count;
    if (dim_known(h) && dim_known(w)) {
        count = sc(b, (double)h * (double)w);
    } else {
        count = grad_size_ratio(b, X, b->g->out, x->dtype);
    }
    d[0] = grad_div(b, grad_op2(b, "broadcast_to_like", G, X), count);
    return true;
}

static bool g_global_max_pool2d(GradBuilder *b, Expr **d) {
    int64_t hw[2];
    if (!hw_axes(b, hw)) return false;
    grad_begin(b);
    Expr *ind = grad_let(b, grad_op2(b, "cast_like", grad_op2(b, "equal", X, b->g->out), X));
    Expr *count = reduce_keep(b, "sum", ind, 2, hw, false);
    d[0] = grad_end(b, grad_mul(b, ind, grad_div(b, G, count)));
    return true;
}

/* ======================================================================================
 * Activations and softmax
 * ====================================================================================== */

static Expr *positive(GradBuilder *b) { return grad_op2(b, "greater", X, sc(b, 0)); }

static bool g_relu(GradBuilder *b, Expr **d) {
    grad_begin(b);
    d[0] = grad_end(b, grad_mask(b, positive(b), G));
    return true;
}

static bool g_leaky_relu(GradBuilder *b, Expr **d) {
    grad_begin(b);
    Expr *g = grad_let(b, G);
    Expr *a[3] = {positive(b), g, grad_mul(b, g, sc(b, attr_float(&b->rc, "alpha")))};
    d[0] = grad_end(b, grad_call(b, "where", 3, a, NULL));
    return true;
}

static bool g_prelu(GradBuilder *b, Expr **d) {
    uint32_t n = grad_arg_tensor(b, 0)->ndim;
    int64_t axis = norm_axis(attr_int(&b->rc, "axis"), n);
    grad_begin(b);
    Expr *g = grad_let(b, G);
    Expr *a0[3] = {positive(b), g, grad_mul(b, g, grad_along(b, W, n, axis))};
    d[0] = grad_end(b, grad_call(b, "where", 3, a0, NULL));
    grad_begin(b);
    Expr *gx = grad_let(b, grad_mul(b, G, X));
    Expr *a1[3] = {positive(b), grad_op1(b, "zeros_like", gx), gx};
    d[1] = grad_end(b, sum_but(b, grad_call(b, "where", 3, a1, NULL), axis));
    return true;
}

static int64_t softmax_axis(GradBuilder *b) {
    return norm_axis(attr_int(&b->rc, "axis"), grad_arg_tensor(b, 0)->ndim);
}

/* softmax (and fast_softmax as its exact form): y (g - sum(g y)) */
static bool g_softmax(GradBuilder *b, Expr **d) {
    int64_t axis = softmax_axis(b);
    Expr *s = reduce_keep(b, "sum", grad_mul(b, G, b->g->out), 1, &axis, false);
    d[0] = grad_mul(b, b->g->out, grad_sub(b, G, s));
    return true;
}

static bool g_log_softmax(GradBuilder *b, Expr **d) {
    int64_t axis = softmax_axis(b);
    Expr *s = reduce_keep(b, "sum", G, 1, &axis, false);
    d[0] = grad_sub(b, G, grad_mul(b, grad_op1(b, "exp", b->g->out), s));
    return true;
}

/* ======================================================================================
 * Normalizations
 * ====================================================================================== */

static Expr *field(GradBuilder *b, Expr *t, uint32_t i) {
    return ir_tuple_get_item_new(b->ctx, t, i, b->span);
}

/* nn.batch_norm (inference): (x - mean) / sqrt(var + eps) * gamma + beta, with the moving
 * statistics passed through as results 1 and 2. */
static bool g_batch_norm(GradBuilder *b, Expr **d) {
    uint32_t n = grad_arg_tensor(b, 0)->ndim;
    int64_t axis = norm_axis(attr_int(&b->rc, "axis"), n);
    bool center = attr_bool(&b->rc, "center"), scale = attr_bool(&b->rc, "scale");
    double eps = attr_float(&b->rc, "epsilon");
    Expr *gamma = b->g->args[1], *mean = b->g->args[3], *var = b->g->args[4];
    for (uint32_t i = 0; i < 5; i++) {
        if ((i == 1 && !scale) || (i == 2 && !center)) continue;
        grad_begin(b);
        Expr *g0 = grad_let(b, field(b, G, 0));
        if (i == 2) {
            d[2] = grad_end(b, sum_but(b, g0, axis));
            continue;
        }
        Expr *rs =
            grad_let(b, grad_along(b, grad_op1(b, "rsqrt", grad_add(b, var, sc(b, eps))), n, axis));
        Expr *gs = scale && i != 1 ? grad_mul(b, g0, grad_along(b, gamma, n, axis)) : g0;
        Expr *xc = grad_sub(b, X, grad_along(b, mean, n, axis));
        Expr *r;
        if (i == 0)
            r = grad_mul(b, gs, rs);
        else if (i == 1)
            r = sum_but(b, grad_mul(b, grad_mul(b, g0, xc), rs), axis);
        else if (i == 3)
            r = grad_sub(b, field(b, G, 1), sum_but(b, grad_mul(b, gs, rs), axis));
        else /* d/dvar of (var + eps)^-1/2 = -0.5 rs^3 */
            r = grad_add(
                b, field(b, G, 2),
                sum_but(b,
                        grad_mul(b, grad_mul(b, gs, xc),
                                 grad_mul(b, sc(b, -0.5), grad_mul(b, rs, grad_mul(b, rs, rs)))),
                        axis));
        d[i] = grad_end(b, r);
    }
    return true;
}

/* Normalization of x over the axes `red` (n_red listed, exclude as the reductions read it),
 * given dxhat = g * gamma: rs (dxhat - mean(dxhat) - xhat mean(dxhat xhat)). xhat and rs are
 * bound in the current adjoint. */
typedef struct NormStats {
    Expr *xc, *rs, *xhat;
} NormStats;

static NormStats norm_stats(GradBuilder *b, Expr *x, uint32_t n_red, const int64_t *red,
                            bool exclude, double eps) {
    NormStats s;
    Expr *mu = reduce_keep(b, "mean", x, n_red, red, exclude);
    s.xc = grad_let(b, grad_sub(b, x, mu));
    Expr *var = reduce_keep(b, "mean", grad_mul(b, s.xc, s.xc), n_red, red, exclude);
    s.rs = grad_let(b, grad_op1(b, "rsqrt", grad_add(b, var, sc(b, eps))));
    s.xhat = grad_let(b, grad_mul(b, s.xc, s.rs));
    return s;
}

static Expr *norm_dx(GradBuilder *b, const NormStats *s, Expr *dxhat, uint32_t n_red,
                     const int64_t *red, bool exclude) {
    dxhat = grad_let(b, dxhat);
    Expr *m1 = reduce_keep(b, "mean", dxhat, n_red, red, exclude);
    Expr *m2 = reduce_keep(b, "mean", grad_mul(b, dxhat, s->xhat), n_red, red, exclude);
    return grad_mul(b, s->rs, grad_sub(b, grad_sub(b, dxhat, m1), grad_mul(b, s->xhat, m2)));
}

/* layer_norm (over `axis`) and instance_norm (over every axis but 0 and `axis`), with gamma
 * and beta along `axis`. */
static bool affine_norm(GradBuilder *b, Expr **d, uint32_t n_red, const int64_t *red,
                        bool exclude) {
    uint32_t n = grad_arg_tensor(b, 0)->ndim;
    int64_t axis = norm_axis(attr_int(&b->rc, "axis"), n);
    bool center = attr_bool(&b->rc, "center"), scale = attr_bool(&b->rc, "scale");
    double eps = attr_float(&b->rc, "epsilon");
    grad_begin(b);
    NormStats s = norm_stats(b, X, n_red, red, exclude, eps);
    Expr *dxhat = scale ? grad_mul(b, G, grad_along(b, W, n, axis)) : G;
    d[0] = grad_end(b, norm_dx(b, &s, dxhat, n_red, red, exclude));
    if (scale) {
        grad_begin(b);
        s = norm_stats(b, X, n_red, red, exclude, eps);
        d[1] = grad_end(b, sum_but(b, grad_mul(b, G, s.xhat), axis));
    }
    if (center) d[2] = sum_but(b, G, axis);
    return true;
}

static bool g_layer_norm(GradBuilder *b, Expr **d) {
    int64_t axis = norm_axis(attr_int(&b->rc, "axis"), grad_arg_tensor(b, 0)->ndim);
    return affine_norm(b, d, 1, &axis, false);
}

static bool g_instance_norm(GradBuilder *b, Expr **d) {
    int64_t axis = norm_axis(attr_int(&b->rc, "axis"), grad_arg_tensor(b, 0)->ndim);
    int64_t keep[2] = {0, axis};
    return affine_norm(b, d, axis == 0 ? 1 : 2, keep, true);
}

/* group_norm: x reshaped to (..., G, C / G, rest...) and normalized over the axes after G */
static bool g_group_norm(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0);
    if (!grad_need_static(b, x, "data")) return false;
    uint32_t n = x->ndim;
    int64_t axis = norm_axis(attr_int(&b->rc, "axis"), n), groups = attr_int(&b->rc, "num_groups");
    bool center = attr_bool(&b->rc, "center"), scale = attr_bool(&b->rc, "scale");
    double eps = attr_float(&b->rc, "epsilon");
    int64_t shape[MAXR + 1], red[MAXR + 1];
    uint32_t n_red = 0;
    for (uint32_t i = 0, o = 0; i < n; i++) {
        if ((int64_t)i == axis) {
            shape[o++] = groups;
            shape[o++] = x->shape[i] / groups;
        } else {
            shape[o++] = x->shape[i];
        }
    }
    for (uint32_t i = (uint32_t)axis + 1; i <= n; i++)
        red[n_red++] = i;
    grad_begin(b);
    NormStats s = norm_stats(b, grad_reshape(b, X, n + 1, shape), n_red, red, false, eps);
    Expr *dxhat = scale ? grad_mul(b, G, grad_along(b, W, n, axis)) : G;
    Expr *dx = norm_dx(b, &s, grad_reshape(b, dxhat, n + 1, shape), n_red, red, false);
    d[0] = grad_end(b, grad_op2(b, "reshape_like", dx, X));
    if (scale) {
        grad_begin(b);
        s = norm_stats(b, grad_reshape(b, X, n + 1, shape), n_red, red, false, eps);
        Expr *xhat = grad_op2(b, "reshape_like", s.xhat, X);
        d[1] = grad_end(b, sum_but(b, grad_mul(b, G, xhat), axis));
    }
    if (center) d[2] = sum_but(b, G, axis);
    return true;
}

/* nn.batch_norm_training: the batch's statistics over every axis but `axis` (biased variance);
 * results (out, momentum * moving_mean + (1 - momentum) * mean, momentum * moving_var +
 * (1 - momentum) * var), so the adjoints of the last two reach data through the statistics. */
static bool g_batch_norm_training(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0);
    uint32_t n = x->ndim;
    int64_t axis = norm_axis(attr_int(&b->rc, "axis"), n);
    bool center = attr_bool(&b->rc, "center"), scale = attr_bool(&b->rc, "scale");
    double eps = attr_float(&b->rc, "epsilon"), m = attr_float(&b->rc, "momentum");
    /* count: elements per channel */
    bool known = true;
    for (uint32_t i = 0; i < n; i++)
        known = known && dim_known(x->shape[i]);
    Expr *count;
    if (known) {
        count = sc(b, (double)grad_numel(x) / (double)x->shape[axis]);
    } else {
        count = grad_size_ratio(b, X, W, x->dtype);
    }
    grad_begin(b);
    NormStats s = norm_stats(b, X, 1, &axis, true, eps);
    Expr *g0 = grad_let(b, field(b, G, 0));
    Expr *dxhat = scale ? grad_mul(b, g0, grad_along(b, W, n, axis)) : g0;
    Expr *dx = norm_dx(b, &s, dxhat, 1, &axis, true);
    Expr *stats =
        grad_add(b, grad_along(b, field(b, G, 1), n, axis),
                 grad_mul(b, grad_mul(b, sc(b, 2), grad_along(b, field(b, G, 2), n, axis)), s.xc));
    d[0] = grad_end(b, grad_add(b, dx, grad_mul(b, grad_div(b, sc(b, 1 - m), count), stats)));
    if (scale) {
        grad_begin(b);
        s = norm_stats(b, X, 1, &axis, true, eps);
        d[1] = grad_end(b, sum_but(b, grad_mul(b, field(b, G, 0), s.xhat), axis));
    }
    if (center) d[2] = sum_but(b, field(b, G, 0), axis);
    d[3] = grad_mul(b, field(b, G, 1), sc(b, m));
    d[4] = grad_mul(b, field(b, G, 2), sc(b, m));
    return true;
}

/* l2_normalize: y = x / sqrt(max(s, eps)), s = sum(x^2) over the axes; where s > eps,
 * dx = (g - y sum(g y)) / sqrt(s), else g / sqrt(eps) */
static bool g_l2_normalize(GradBuilder *b, Expr **d) {
    uint32_t n = grad_arg_tensor(b, 0)->ndim;
    const int64_t *axes;
    uint32_t na = attr_ints(&b->rc, "axis", &axes);
    bool none = attr_is_none(&b->rc, "axis");
    double eps = attr_float(&b->rc, "eps");
    Expr *y = b->g->out;
    grad_begin(b);
    Expr *sq = grad_mul(b, X, X), *gy = grad_mul(b, G, y), *s, *sgy;
    if (none) {
        int64_t all[MAXR];
        for (uint32_t i = 0; i < n; i++)
            all[i] = i;
        s = reduce_keep(b, "sum", sq, n, all, false);
        sgy = reduce_keep(b, "sum", gy, n, all, false);
    } else if (na == 0) { /* no axis: each element alone */
        s = sq;
        sgy = gy;
    } else {
        s = reduce_keep(b, "sum", sq, na, axes, false);
        sgy = reduce_keep(b, "sum", gy, na, axes, false);
    }
    s = grad_let(b, s);
    Expr *big = grad_op2(b, "cast_like", grad_op2(b, "greater", s, sc(b, eps)), X);
    Expr *norm = grad_op1(b, "sqrt", grad_op2(b, "maximum", s, sc(b, eps)));
    Expr *num = grad_sub(b, G, grad_mul(b, grad_mul(b, y, sgy), big));
    d[0] = grad_end(b, grad_div(b, num, norm));
    return true;
}

/* ======================================================================================
 * Padding, dilation, rearrangements, dropout
 * ====================================================================================== */

/* pad_width as before/after arrays */
static void pad_widths(GradBuilder *b, uint32_t n, int64_t *before, int64_t *after) {
    const AttrValue *v = attr_value(&b->rc, "pad_width");
    for (uint32_t i = 0; i < n; i++) {
        const AttrValue *p = v->list.items[i];
        before[i] = p->list.items[0]->kind == ATTR_BOOL ? p->list.items[0]->b : p->list.items[0]->i;
        after[i] = p->list.items[1]->kind == ATTR_BOOL ? p->list.items[1]->b : p->list.items[1]->i;
    }
}

static Expr *pad(GradBuilder *b, Expr *x, uint32_t n, const int64_t *before, const int64_t *after,
                 rly_dtype dt) {
    AttrValue *pairs[MAXR];
    for (uint32_t i = 0; i < n; i++) {
        int64_t pr[2] = {before[i], after[i]};
        pairs[i] = grad_ais(b, 2, pr);
    }
    return grad_op2a(b, "nn.pad", x, grad_scalar(b, dt, 0),
                     grad_attrs(b, 1, "pad_width", ir_attr_list(b->ctx, n, pairs, b->span)));
}

/* pad h (extent d + bf + af on `axis` of a rank-n tensor) by [lo, hi] there, 0 elsewhere */
static Expr *pad_axis(GradBuilder *b, Expr *h, uint32_t n, uint32_t axis, int64_t lo, int64_t hi,
                      rly_dtype dt) {
    int64_t before[MAXR] = {0}, after[MAXR] = {0};
    before[axis] = lo, after[axis] = hi;
    return pad(b, h, n, before, after, dt);
}

static Expr *slice_axis(GradBuilder *b, Expr *x, int64_t axis, int64_t lo, int64_t hi) {
    return grad_op1a(b, "strided_slice", x,
                     grad_attrs(b, 3, "begin", grad_ais(b, 1, &lo), "end", grad_ais(b, 1, &hi),
                                "axes", grad_ais(b, 1, &axis)));
}

typedef enum PadKind { PK_EDGE, PK_REFLECT, PK_SYMMETRIC } PadKind;

/* The adjoint of padding one axis (extent d, widths bf, af) in an edge/mirror mode: the middle,
 * plus each border region added back onto the elements it copied. */
static Expr *unpad_axis(GradBuilder *b, Expr *h, uint32_t n, uint32_t axis, int64_t d, int64_t bf,
                        int64_t af, PadKind k, rly_dtype dt) {
    h = grad_let(b, h);
    Expr *r = slice_axis(b, h, axis, bf, bf + d);
    const Attrs *rev = grad_attrs(b, 1, "axis", grad_ai(b, axis));
    int64_t ax = axis;
    if (bf > 0) {
        Expr *part = slice_axis(b, h, axis, 0, bf), *add;
        if (k == PK_EDGE)
            add = pad_axis(b, grad_sum(b, part, 1, &ax, true, false), n, axis, 0, d - 1, dt);
        else if (k == PK_REFLECT) /* sources bf .. 1 */
            add = pad_axis(b, grad_op1a(b, "reverse", part, rev), n, axis, 1, d - 1 - bf, dt);
        else /* sources bf - 1 .. 0 */
            add = pad_axis(b, grad_op1a(b, "reverse", part, rev), n, axis, 0, d - bf, dt);
        r = grad_add(b, r, add);
    }
    if (af > 0) {
        Expr *part = slice_axis(b, h, axis, bf + d, bf + d + af), *add;
        if (k == PK_EDGE)
            add = pad_axis(b, grad_sum(b, part, 1, &ax, true, false), n, axis, d - 1, 0, dt);
        else if (k == PK_REFLECT) /* sources d - 2 .. d - 1 - af */
            add = pad_axis(b, grad_op1a(b, "reverse", part, rev), n, axis, d - 1 - af, 1, dt);
        else /* sources d - 1 .. d - af */
            add = pad_axis(b, grad_op1a(b, "reverse", part, rev), n, axis, d - af, 0, dt);
        r = grad_add(b, r, add);
    }
    return r;
}

/* edge and mirror modes: one axis at a time (the padding is separable) */
static bool unpad_modes(GradBuilder *b, Expr **d, PadKind k) {
    TensorType *x = grad_arg_tensor(b, 0);
    if (!grad_need_static(b, x, "data")) return false;
    uint32_t n = x->ndim;
    int64_t before[MAXR], after[MAXR];
    pad_widths(b, n, before, after);
    grad_begin(b);
    Expr *h = G;
    for (uint32_t i = 0; i < n; i++)
        if (before[i] || after[i])
            h = unpad_axis(b, h, n, i, x->shape[i], before[i], after[i], k, x->dtype);
    d[0] = grad_end(b, h);
    return true;
}

/* nn.pad: constant mode crops the adjoint back (a pad by the negated widths, which also zeroes
 * what a negative width cropped); pad_value gets the sum over the padding */
static bool g_pad(GradBuilder *b, Expr **d) {
    const char *mode = attr_str(&b->rc, "pad_mode");
    if (strcmp(mode, "edge") == 0) return unpad_modes(b, d, PK_EDGE);
    if (strcmp(mode, "reflect") == 0) return unpad_modes(b, d, PK_REFLECT);
    uint32_t n = grad_arg_tensor(b, 0)->ndim;
    int64_t before[MAXR], after[MAXR];
    pad_widths(b, n, before, after);
    for (uint32_t i = 0; i < n; i++)
        before[i] = -before[i], after[i] = -after[i];
    rly_dtype dt = dt0(b);
    d[0] = pad(b, G, n, before, after, dt);
    Expr *v = b->g->args[1];
    Expr *inner = grad_sum(b, pad(b, G, n, before, after, dt), 0, NULL, false, false);
    Expr *total = grad_sub(b, grad_sum(b, G, 0, NULL, false, false), inner);
    d[1] = grad_op2(b, "reshape_like", grad_op2(b, "cast_like", total, v), v);
    return true;
}

static bool g_mirror_pad(GradBuilder *b, Expr **d) {
    bool reflect = strcmp(attr_str(&b->rc, "mode"), "REFLECT") == 0;
    return unpad_modes(b, d, reflect ? PK_REFLECT : PK_SYMMETRIC);
}

/* nn.dilate: the adjoint at the original elements, every stride-th */
static bool g_dilate(GradBuilder *b, Expr **d) {
    uint32_t n = grad_arg_tensor(b, 0)->ndim;
    int64_t zero[MAXR] = {0}, end[MAXR];
    for (uint32_t i = 0; i < n; i++)
        end[i] = INT32_MAX;
    d[0] = grad_op1a(b, "strided_slice", G,
                     grad_attrs(b, 3, "begin", grad_ais(b, n, zero), "end", grad_ais(b, n, end),
                                "strides", grad_attr_same(b, "strides")));
    return true;
}

static bool g_dropout(GradBuilder *b, Expr **d) { /* inference: the identity */
    d[0] = field(b, G, 0);
    return true;
}

/* depth_to_space in DCR order is undone by space_to_depth; CRD by a reshape and transpose */
static bool g_depth_to_space(GradBuilder *b, Expr **d) {
    const char *layout = attr_str(&b->rc, "layout");
    if (strcmp(attr_str(&b->rc, "mode"), "DCR") == 0) {
        d[0] = grad_op1a(b, "nn.space_to_depth", G,
                         grad_attrs(b, 2, "block_size", grad_attr_same(b, "block_size"), "layout",
                                    grad_as(b, layout)));
        return true;
    }
    TensorType *y = grad_out_tensor(b);
    if (!grad_need_static(b, y, "the result")) return false;
    int64_t k = attr_int(&b->rc, "block_size"), *s = y->shape, shape[6], perm[6];
    bool nhwc = strcmp(layout, "NHWC") == 0;
    if (nhwc) { /* (N, H b, W b, C) -> (N, H, b, W, b, C) -> (N, H, W, C, b, b) */
        int64_t sh[6] = {s[0], s[1] / k, k, s[2] / k, k, s[3]}, pm[6] = {0, 1, 3, 5, 2, 4};
        memcpy(shape, sh, sizeof sh), memcpy(perm, pm, sizeof pm);
    } else { /* (N, C, H b, W b) -> (N, C, H, b, W, b) -> (N, C, b, b, H, W) */
        int64_t sh[6] = {s[0], s[1], s[2] / k, k, s[3] / k, k}, pm[6] = {0, 1, 3, 5, 2, 4};
        memcpy(shape, sh, sizeof sh), memcpy(perm, pm, sizeof pm);
    }
    Expr *t = grad_op1a(b, "transpose", grad_reshape(b, G, 6, shape),
                        grad_attrs(b, 1, "axes", grad_ais(b, 6, perm)));
    d[0] = grad_op2(b, "reshape_like", t, X);
    return true;
}

static bool g_space_to_depth(GradBuilder *b, Expr **d) {
    d[0] = grad_op1a(b, "nn.depth_to_space", G,
                     grad_attrs(b, 3, "block_size", grad_attr_same(b, "block_size"), "layout",
                                grad_attr_same(b, "layout"), "mode", grad_as(b, "DCR")));
    return true;
}

/* ======================================================================================
 * Losses
 * ====================================================================================== */

/* the batch size (axis 0 of argument 0) as a scalar of its dtype */
static Expr *batch_size(GradBuilder *b) {
    int64_t nb = grad_arg_tensor(b, 0)->shape[0];
    if (dim_known(nb)) return sc(b, (double)nb);
    Expr *s = grad_op2(b, "cast_like", grad_op1(b, "shape_of", X), X);
    return grad_op2a(b, "take", s, ir_scalar_i64(b->ctx, RLY_DTYPE_I32, 0, b->span),
                     grad_attrs(b, 1, "axis", grad_ai(b, 0)));
}

/* cross_entropy: -sum(t log p) / N */
static bool g_cross_entropy(GradBuilder *b, Expr **d) {
    Expr *t = b->g->args[1];
    Expr *gn = grad_div(b, grad_neg(b, G), batch_size(b));
    d[0] = grad_mul(b, gn, grad_div(b, t, X));
    gn = grad_div(b, grad_neg(b, G), batch_size(b));
    d[1] = grad_mul(b, gn, grad_op1(b, "log", X));
    return true;
}

/* cross_entropy_with_logits: -sum(t p) / N */
static bool g_cross_entropy_with_logits(GradBuilder *b, Expr **d) {
    Expr *t = b->g->args[1];
    d[0] = grad_mul(b, grad_div(b, grad_neg(b, G), batch_size(b)), t);
    d[1] = grad_mul(b, grad_div(b, grad_neg(b, G), batch_size(b)), X);
    return true;
}

/* nll_loss: loss_f = -pred[b, t_f, ...] w[t_f] for targets not ignored; the selection is a
 * one-hot mask of the targets along the class axis (1) */
static bool g_nll_loss(GradBuilder *b, Expr **d) {
    TensorType *p = grad_arg_tensor(b, 0);
    uint32_t n = p->ndim;
    int64_t c = p->shape[1], one = 1;
    if (!dim_known(c)) return grad_fail(b, "the gradient needs a static number of classes");
    const char *red = attr_str(&b->rc, "reduction");
    bool none = strcmp(red, "none") == 0, mean = strcmp(red, "mean") == 0;
    Expr *t = b->g->args[1], *w = b->g->args[2];
    rly_dtype dt = p->dtype;
    for (uint32_t i = 0; i < 3; i += 2) {
        grad_begin(b);
        Expr *oh_args[3] = {t, grad_scalar(b, dt, 1), grad_scalar(b, dt, 0)};
        Expr *oh = grad_call(b, "one_hot", 3, oh_args,
                             grad_attrs(b, 2, "depth", grad_ai(b, c), "axis", grad_ai(b, 1)));
        Expr *ign = ir_scalar_i64(b->ctx, grad_arg_tensor(b, 1)->dtype,
                                  attr_int(&b->rc, "ignore_index"), b->span);
        Expr *valid = grad_op2(b, "cast_like", grad_op2(b, "not_equal", t, ign), X);
        valid = grad_op1a(b, "expand_dims", valid, grad_attrs(b, 1, "axis", grad_ai(b, 1)));
        Expr *m = grad_let(b, grad_mul(b, oh, valid)); /* (N, C, ...) */
        Expr *wb = grad_along(b, w, n, 1);
        Expr *ge =
            none ? grad_op1a(b, "expand_dims", G, grad_attrs(b, 1, "axis", grad_ai(b, 1))) : G;
        Expr *wsum = NULL;
        if (mean) {
            wsum = grad_let(b, grad_sum(b, grad_mul(b, m, wb), 0, NULL, false, false));
            ge = grad_div(b, ge, wsum);
        }
        if (i == 0) {
            d[0] = grad_end(b, grad_neg(b, grad_mul(b, grad_mul(b, ge, wb), m)));
            continue;
        }
        Expr *dl =
            grad_sum(b, grad_neg(b, grad_mul(b, grad_mul(b, ge, X), m)), 1, &one, false, true);
        if (mean) /* d(L / W) = dL / W - y / W dW, with dW/dw_c the count of class c */
            dl = grad_sub(b, dl,
                          grad_mul(b, grad_div(b, grad_mul(b, G, b->g->out), wsum),
                                   grad_sum(b, m, 1, &one, false, true)));
        d[2] = grad_end(b, dl);
    }
    return true;
}

/* bias_add: the bias collects the adjoint over every axis but its own */
static bool g_bias_add(GradBuilder *b, Expr **d) {
    d[0] = G;
    d[1] = sum_but(b, G, norm_axis(attr_int(&b->rc, "axis"), grad_arg_tensor(b, 0)->ndim));
    return true;
}

static bool g_batch_flatten(GradBuilder *b, Expr **d) {
    d[0] = grad_op2(b, "reshape_like", G, X);
    return true;
}

/* y = conv1d_transpose(x, w) (NCW, IOW): as conv2d_transpose with a height of 1, whose adjoints
 * are conv2d and conv2d_backward_weight */
static bool g_conv1d_transpose(GradBuilder *b, Expr **d) {
    if (!need_layout(b, "data_layout", "NCW", NULL) ||
        !need_layout(b, "kernel_layout", "IOW", NULL) || !need_layout(b, "out_layout", "NCW", "") ||
        !static_args(b))
        return false;
    ConvP p;
    conv_params(b, 1, true, &p);
    TensorType *x = grad_arg_tensor(b, 0), *w = grad_arg_tensor(b, 1);
    p.k[0] = 1, p.k[1] = w->shape[2];
    const int64_t *op;
    attr_ints(&b->rc, "output_padding", &op);
    if (op[0] >= p.stride[1]) return grad_fail(b, "output_padding >= strides has no gradient");
    const Attrs *ax = grad_attrs(b, 1, "axis", grad_ai(b, 2));
    Expr *x2 = grad_op1a(b, "expand_dims", X, ax), *w2 = grad_op1a(b, "expand_dims", W, ax);
    Expr *a[2] = {grad_op1a(b, "expand_dims", g_as(b, 0), ax), w2};
    Expr *dx = grad_call(b, "nn.conv2d", 2, a, conv_attrs(b, &p, x->shape[1], false, NULL));
    Expr *c[2] = {x2, grad_op1a(b, "expand_dims", g_as(b, 1), ax)};
    Expr *dw = grad_call(b, "nn.conv2d_backward_weight", 2, c,
                         conv_attrs(b, &p, x->shape[1], false, NULL));
    d[0] = grad_op2(b, "reshape_like", dx, X);
    d[1] = grad_op2(b, "reshape_like", dw, W);
    return true;
}

/* ---- separable spatial maps: y = A_h x A_w^T on the H and W axes ------------------------------
 */

/* A constant (out, in) matrix of x's dtype. */
static Expr *matrix_const(GradBuilder *b, int64_t out, int64_t in, const double *m) {
    int64_t shape[2] = {out, in};
    Expr *c = ir_constant_new(b->ctx, RLY_DTYPE_F64, 2, shape, m, b->span);
    return grad_op2(b, "cast_like", c, X);
}

/* dx = A_h^T g A_w (einsum over the layout's H and W axes; layout NCHW or NHWC) */
static Expr *separable_adjoint(GradBuilder *b, bool nhwc, Expr *ah, Expr *aw) {
    Expr *ops[3] = {G, ah, aw};
    const char *eq = nhwc ? "nijc,ih,jw->nhwc" : "ncij,ih,jw->nchw";
    return grad_op1a(b, "einsum", ir_tuple_new(b->ctx, 3, ops, b->span),
                     grad_attrs(b, 1, "equation", grad_as(b, eq)));
}

static bool spatial_layout(GradBuilder *b, bool *nhwc) {
    const char *l = attr_str(&b->rc, "layout");
    *nhwc = strcmp(l, "NHWC") == 0;
    if (*nhwc || strcmp(l, "NCHW") == 0) return true;
    return grad_fail(b, "layout \"%s\" has no gradient (only \"NCHW\" or \"NHWC\")", l);
}

/* nn.upsampling (nearest_neighbor): output row o reads input row r(o), as the kernel's taps
 * (asymmetric: floor(o * in / out + 1e-5); align_corners: round half to even of
 * o * (in - 1) / (out - 1)), clamped; the adjoint sums the rows that read each input row */
static void nearest_matrix(int64_t in, int64_t out, bool align, double *m) {
    for (int64_t o = 0; o < out; o++) {
        double fx = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) * (double)o : 0)
                          : (double)in / (double)out * (double)o;
        int64_t r = (int64_t)(align ? nearbyint(fx) : floor(fx + 1e-5));
        r = r < 0 ? 0 : r >= in ? in - 1 : r;
        for (int64_t i = 0; i < in; i++)
            m[o * in + i] = i == r;
    }
}

static bool g_upsampling(GradBuilder *b, Expr **d) {
    const char *method = attr_str(&b->rc, "method");
    if (strcmp(method, "nearest_neighbor") != 0)
        return grad_fail(b, "method \"%s\" has no gradient (only \"nearest_neighbor\")", method);
    bool nhwc;
    TensorType *x = grad_arg_tensor(b, 0), *y = grad_out_tensor(b);
    if (!spatial_layout(b, &nhwc) || !grad_need_static(b, x, "data") ||
        !grad_need_static(b, y, "the result"))
        return false;
    uint32_t h = nhwc ? 1 : 2;
    bool align = attr_bool(&b->rc, "align_corners");
    double *mh = arena_array(&b->ctx->arena, (size_t)(y->shape[h] * x->shape[h]), sizeof *mh);
    double *mw =
        arena_array(&b->ctx->arena, (size_t)(y->shape[h + 1] * x->shape[h + 1]), sizeof *mw);
    nearest_matrix(x->shape[h], y->shape[h], align, mh);
    nearest_matrix(x->shape[h + 1], y->shape[h + 1], align, mw);
    d[0] = separable_adjoint(b, nhwc, matrix_const(b, y->shape[h], x->shape[h], mh),
                             matrix_const(b, y->shape[h + 1], x->shape[h + 1], mw));
    return true;
}

/* nn.adaptive_avg_pool2d: output o averages [floor(o * in / out), ceil((o + 1) * in / out)) */
static void adaptive_matrix(int64_t in, int64_t out, double *m) {
    for (int64_t o = 0; o < out; o++) {
        int64_t lo = o * in / out, hi = ((o + 1) * in + out - 1) / out;
        for (int64_t i = 0; i < in; i++)
            m[o * in + i] = i >= lo && i < hi ? 1.0 / (double)(hi - lo) : 0;
    }
}

static bool g_adaptive_avg_pool2d(GradBuilder *b, Expr **d) {
    bool nhwc;
    TensorType *x = grad_arg_tensor(b, 0), *y = grad_out_tensor(b);
    if (!spatial_layout(b, &nhwc) ||
        !need_layout(b, "out_layout", attr_str(&b->rc, "layout"), "") ||
        !grad_need_static(b, x, "data") || !grad_need_static(b, y, "the result"))
        return false;
    uint32_t h = nhwc ? 1 : 2;
    double *mh = arena_array(&b->ctx->arena, (size_t)(y->shape[h] * x->shape[h]), sizeof *mh);
    double *mw =
        arena_array(&b->ctx->arena, (size_t)(y->shape[h + 1] * x->shape[h + 1]), sizeof *mw);
    adaptive_matrix(x->shape[h], y->shape[h], mh);
    adaptive_matrix(x->shape[h + 1], y->shape[h + 1], mw);
    d[0] = separable_adjoint(b, nhwc, matrix_const(b, y->shape[h], x->shape[h], mh),
                             matrix_const(b, y->shape[h + 1], x->shape[h + 1], mw));
    return true;
}

/* ---- lrn ---------------------------------------------------------------------------------------
 */

/* v shifted by k along axis (extent c): result[i] = v[i + k], 0 outside */
static Expr *shift_axis(GradBuilder *b, Expr *v, uint32_t n, uint32_t axis, int64_t c, int64_t k,
                        rly_dtype dt) {
    if (k == 0) return v;
    int64_t lo = k < 0 ? -k : 0, hi = k > 0 ? k : 0, at = lo + k, end = at + c, ax = axis;
    Expr *p = pad_axis(b, v, n, axis, lo, hi, dt);
    return grad_op1a(b, "strided_slice", p,
                     grad_attrs(b, 3, "begin", grad_ais(b, 1, &at), "end", grad_ais(b, 1, &end),
                                "axes", grad_ais(b, 1, &ax)));
}

/* sum of the shifts of v by lo..hi */
static Expr *window_sum(GradBuilder *b, Expr *v, uint32_t n, uint32_t axis, int64_t c, int64_t lo,
                        int64_t hi, rly_dtype dt) {
    Expr *s = NULL;
    for (int64_t k = lo; k <= hi; k++) {
        if (k <= -c || k >= c) continue; /* entirely outside */
        Expr *t = shift_axis(b, v, n, axis, c, k, dt);
        s = s ? grad_add(b, s, t) : t;
    }
    return s;
}

/* y = x s^-beta, s = bias + alpha / size * W(x^2), W summing channels [c - size/2, c - size/2 +
 * size): dx = g s^-beta - 2 alpha beta / size * x W^T(g x s^(-beta - 1)), W^T shifting the
 * other way */
static bool g_lrn(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0);
    int64_t axis = norm_axis(attr_int(&b->rc, "axis"), x->ndim), size = attr_int(&b->rc, "size");
    int64_t c = x->shape[axis];
    if (!dim_known(c)) return grad_fail(b, "the gradient needs a static extent along axis");
    if (size < 1) return grad_fail(b, "size must be positive");
    double bias = attr_float(&b->rc, "bias"), alpha = attr_float(&b->rc, "alpha"),
           beta = attr_float(&b->rc, "beta");
    int64_t lo = -(size / 2), hi = size - 1 - size / 2;
    rly_dtype dt = x->dtype;
    grad_begin(b);
    Expr *sq = grad_let(b, grad_mul(b, X, X));
    Expr *s =
        grad_let(b, grad_add(b, sc(b, bias),
                             grad_mul(b, sc(b, alpha / (double)size),
                                      window_sum(b, sq, x->ndim, (uint32_t)axis, c, lo, hi, dt))));
    Expr *p = grad_let(b, grad_op2(b, "power", s, sc(b, -beta)));
    Expr *t = grad_let(b, grad_div(b, grad_mul(b, grad_mul(b, G, X), p), s));
    Expr *wt = window_sum(b, t, x->ndim, (uint32_t)axis, c, -hi, -lo, dt);
    Expr *corr = grad_mul(b, sc(b, 2 * alpha * beta / (double)size), grad_mul(b, X, wt));
    d[0] = grad_end(b, grad_sub(b, grad_mul(b, G, p), corr));
    return true;
}

const GradDef grad_nn_table[] = {
    {OP_ID_NN_DENSE, g_dense},
    {OP_ID_NN_MATMUL, g_matmul},
    {OP_ID_NN_BATCH_MATMUL, g_batch_matmul},
    {OP_ID_NN_BIAS_ADD, g_bias_add},
    {OP_ID_NN_CONV1D, g_conv1d},
    {OP_ID_NN_CONV1D_TRANSPOSE, g_conv1d_transpose},
    {OP_ID_NN_UPSAMPLING, g_upsampling},
    {OP_ID_NN_ADAPTIVE_AVG_POOL2D, g_adaptive_avg_pool2d},
    {OP_ID_NN_LRN, g_lrn},
    {OP_ID_NN_CONV2D, g_conv2d},
    {OP_ID_NN_CONV2D_TRANSPOSE, g_conv2d_transpose},
    {OP_ID_NN_CONV2D_BACKWARD_WEIGHT, g_conv2d_backward_weight},
    {OP_ID_NN_MAX_POOL1D, g_max_pool1d},
    {OP_ID_NN_MAX_POOL2D, g_max_pool2d},
    {OP_ID_NN_AVG_POOL1D, g_avg_pool1d},
    {OP_ID_NN_AVG_POOL2D, g_avg_pool2d},
    {OP_ID_NN_AVG_POOL2D_GRAD, g_avg_pool2d_grad},
    {OP_ID_NN_GLOBAL_AVG_POOL2D, g_global_avg_pool2d},
    {OP_ID_NN_GLOBAL_MAX_POOL2D, g_global_max_pool2d},
    {OP_ID_NN_RELU, g_relu},
    {OP_ID_NN_LEAKY_RELU, g_leaky_relu},
    {OP_ID_NN_PRELU, g_prelu},
    {OP_ID_NN_SOFTMAX, g_softmax},
    {OP_ID_NN_FAST_SOFTMAX, g_softmax},
    {OP_ID_NN_LOG_SOFTMAX, g_log_softmax},
    {OP_ID_NN_BATCH_NORM, g_batch_norm},
    {OP_ID_NN_BATCH_NORM_TRAINING, g_batch_norm_training},
    {OP_ID_NN_LAYER_NORM, g_layer_norm},
    {OP_ID_NN_INSTANCE_NORM, g_instance_norm},
    {OP_ID_NN_GROUP_NORM, g_group_norm},
    {OP_ID_NN_L2_NORMALIZE, g_l2_normalize},
    {OP_ID_NN_PAD, g_pad},
    {OP_ID_NN_MIRROR_PAD, g_mirror_pad},
    {OP_ID_NN_DILATE, g_dilate},
    {OP_ID_NN_DROPOUT, g_dropout},
    {OP_ID_NN_BATCH_FLATTEN, g_batch_flatten},
    {OP_ID_NN_DEPTH_TO_SPACE, g_depth_to_space},
    {OP_ID_NN_SPACE_TO_DEPTH, g_space_to_depth},
    {OP_ID_NN_CROSS_ENTROPY, g_cross_entropy},
    {OP_ID_NN_CROSS_ENTROPY_WITH_LOGITS, g_cross_entropy_with_logits},
    {OP_ID_NN_NLL_LOSS, g_nll_loss},
    GRAD_END,
};
