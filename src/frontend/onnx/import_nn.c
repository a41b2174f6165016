/* import_nn.c - ONNX converters: convolution, pooling, normalization, Gemm/MatMul.
 *
 * Windowed operators (Conv, ConvTranspose, the pools, MaxUnpool) share one reading of
 * kernel_shape/strides/dilations/pads/auto_pad into a Window; ONNX pads are [begin..., end...],
 * which is also the order of Relay's 2*nsp-value padding attribute, so they pass through.
 * auto_pad SAME_* is resolved here from static spatial dims. Where Relay has no operator
 * (LpPool, MeanVarianceNormalization, multi-axis LayerNormalization, even-size LRN, MaxPool's
 * Indices, MaxUnpool) the converter composes exact equivalents from smaller operators.
 *
 * The small builders below take and return NULL: a failed imp_call has already reported its
 * error, so a converter chains builders and checks only the final expression. */
#include <math.h>
#include <string.h>

#include "frontend/onnx/import.h"

#define NSP_MAX 3 /* spatial axes of Relay's convolutions and pools */

/* ---- builders (NULL in, NULL out) ------------------------------------------------------------ */

static Expr *add(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "add", x, y, NULL); }
static Expr *sub(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "subtract", x, y, NULL); }
static Expr *mul(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "multiply", x, y, NULL); }
static Expr *div_(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "divide", x, y, NULL); }

/* A scalar constant of x's dtype. */
static Expr *scalar_of(Imp *imp, Expr *x, double v) {
    return x ? imp_scalar(imp, imp_dtype(x), v) : NULL;
}

static Expr *reduce(Imp *imp, const char *op, Expr *x, uint32_t n, const int64_t *axes,
                    bool keepdims) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "axis", n, axes);
    ia_bool(imp, &a, "keepdims", keepdims);
    return imp_call1(imp, op, x, &a);
}

static Expr *expand_dims(Imp *imp, Expr *x, int64_t axis) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    return imp_call1(imp, "expand_dims", x, &a);
}

static Expr *squeeze(Imp *imp, Expr *x, int64_t axis) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "axis", 1, &axis);
    return imp_call1(imp, "squeeze", x, &a);
}

static Expr *reshape(Imp *imp, Expr *x, uint32_t n, const int64_t *shape) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "newshape", n, shape);
    return imp_call1(imp, "reshape", x, &a);
}

/* |x|^p (p > 0), with the common powers as cheaper exact forms. */
static Expr *abs_pow(Imp *imp, Expr *x, double p) {
    if (p == 2) return mul(imp, x, x);
    Expr *ax = imp_call1(imp, "abs", x, NULL);
    if (p == 1) return ax;
    return imp_call2(imp, "power", ax, scalar_of(imp, x, p), NULL);
}

/* y^(1/p) of a non-negative y. */
static Expr *root(Imp *imp, Expr *y, double p) {
    if (p == 1) return y;
    if (p == 2) return imp_call1(imp, "sqrt", y, NULL);
    return imp_call2(imp, "power", y, scalar_of(imp, y, 1.0 / p), NULL);
}

/* Whether the node names output i (an omitted optional output is ""). */

/* An int or float attribute as a double (LpPool-1's p is a float, later an int). */
static double attr_num(Imp *imp, const char *name, double dflt) {
    const OxAttr *a = imp_attr(imp, name);
    if (a == NULL) return dflt;
    return a->type == OXA_INT ? (double)a->i : (double)a->f;
}

/* The axes 2 .. rank-1 (spatial axes of an N, C, ... tensor); returns their count. */
static uint32_t spatial_axes(uint32_t rank, int64_t *axes) {
    uint32_t n = 0;
    for (uint32_t i = 2; i < rank; i++)
        axes[n++] = i;
    return n;
}

/* ---- windows: kernel_shape, strides, dilations, pads ----------------------------------------- */

typedef struct Window {
    uint32_t nsp;              /* spatial axes (rank - 2), 1..NSP_MAX */
    int64_t in[NSP_MAX];       /* spatial input dims, -1 when not static */
    int64_t k[NSP_MAX];        /* kernel dims, -1 when unknown (Conv weight of unknown shape) */
    int64_t s[NSP_MAX];        /* strides */
    int64_t d[NSP_MAX];        /* dilations */
    int64_t pads[2 * NSP_MAX]; /* begins then ends (ONNX and Relay order) */
} Window;

/* ints attribute `name` with n values, or dflt for each when absent (or empty). */
static bool attr_n_ints(Imp *imp, const char *name, uint32_t n, int64_t dflt, int64_t *out) {
    const int64_t *v;
    uint32_t got = imp_attr_ints(imp, name, &v);
    if (got == 0) {
        for (uint32_t i = 0; i < n; i++)
            out[i] = dflt;
        return true;
    }
    if (got != n) return imp_error(imp, "attribute '%s' must have %u values, got %u", name, n, got);
    memcpy(out, v, n * sizeof(int64_t));
    return true;
}

static int64_t extent(const Window *w, uint32_t i) { return (w->k[i] - 1) * w->d[i] + 1; }

/* The auto_pad attribute, "NOTSET" when absent or empty. */
static const char *auto_pad(Imp *imp) {
    const char *ap = imp_attr_str(imp, "auto_pad", "NOTSET");
    return ap[0] ? ap : "NOTSET";
}

/* The largest kernel size, stride, dilation and pad accepted: with every window number at most
 * 2^31 and every dim at most 2^62 (SUP_DIM_MAX), the window arithmetic below ((k - 1) * d + 1,
 * in + pads - extent, (out - 1) * s) stays inside int64; what multiplies a dim by a stride
 * (ConvTranspose, MaxUnpool) is checked. */
#define WINDOW_MAX ((int64_t)1 << 31)

/* Window of node attributes over x (rank nsp + 2). kdflt: the kernel dims when kernel_shape is
 * absent (NULL: kernel_shape is required). With `pads`, also resolves auto_pad into w->pads the
 * way Conv and the pools do (ConvTranspose resolves its own). */
static bool window_read(Imp *imp, Expr *x, const int64_t *kdflt, bool pads, Window *w) {
    TensorType *t = imp_tt(x);
    uint32_t nsp = t->ndim - 2;
    w->nsp = nsp;
    for (uint32_t i = 0; i < nsp; i++)
        w->in[i] = t->shape[2 + i] >= 0 ? t->shape[2 + i] : -1;
    const int64_t *k;
    uint32_t nk = imp_attr_ints(imp, "kernel_shape", &k);
    if (nk != 0) {
        if (nk != nsp)
            return imp_error(imp, "kernel_shape has %u values but the input has %u spatial axes",
                             nk, nsp);
        memcpy(w->k, k, nsp * sizeof(int64_t));
    } else if (kdflt) {
        memcpy(w->k, kdflt, nsp * sizeof(int64_t));
    } else {
        return imp_error(imp, "attribute 'kernel_shape' is required");
    }
    if (!attr_n_ints(imp, "strides", nsp, 1, w->s) || !attr_n_ints(imp, "dilations", nsp, 1, w->d))
        return false;
    for (uint32_t i = 0; i < nsp; i++) {
        if (w->k[i] == 0 || w->k[i] < -1)
            return imp_error(imp, "kernel_shape values must be positive, got %lld",
                             (long long)w->k[i]);
        if (w->s[i] < 1 || w->d[i] < 1)
            return imp_error(imp, "strides and dilations must be positive");
        if (w->k[i] > WINDOW_MAX || w->s[i] > WINDOW_MAX || w->d[i] > WINDOW_MAX)
            return imp_error(imp, "kernel_shape, strides and dilations must be at most 2^31");
    }
    if (!pads) return true;
    const char *ap = auto_pad(imp);
    if (strcmp(ap, "NOTSET") == 0) {
        if (!attr_n_ints(imp, "pads", 2 * nsp, 0, w->pads)) return false;
        for (uint32_t i = 0; i < 2 * nsp; i++) {
            if (w->pads[i] < 0)
                return imp_error(imp, "negative pads are not supported, got %lld",
                                 (long long)w->pads[i]);
            if (w->pads[i] > WINDOW_MAX) return imp_error(imp, "pads must be at most 2^31");
        }
        return true;
    }
    if (strcmp(ap, "VALID") == 0) {
        memset(w->pads, 0, sizeof w->pads);
        return true;
    }
    bool upper = strcmp(ap, "SAME_UPPER") == 0;
    if (!upper && strcmp(ap, "SAME_LOWER") != 0) return imp_error(imp, "unknown auto_pad '%s'", ap);
    for (uint32_t i = 0; i < nsp; i++) {
        /* with stride 1 the total padding is extent - 1 whatever the input size */
        if ((w->in[i] < 0 && w->s[i] != 1) || w->k[i] < 0)
            return imp_error(imp,
                             "auto_pad %s needs static spatial input dims and kernel shape "
                             "(spatial axis %u is unknown)",
                             ap, i);
        int64_t total = extent(w, i) - 1;
        if (w->s[i] != 1) {
            int64_t out = (w->in[i] + w->s[i] - 1) / w->s[i];
            total = (out - 1) * w->s[i] + extent(w, i) - w->in[i];
        }
        if (total < 0) total = 0;
        int64_t small = total / 2, big = total - small;
        w->pads[i] = upper ? small : big;
        w->pads[nsp + i] = upper ? big : small;
    }
    return true;
}

/* Relay attributes strides/padding/dilation of a window. */
static void window_attrs(Imp *imp, ImpAttrs *a, const Window *w) {
    ia_ints(imp, a, "strides", w->nsp, w->s);
    ia_ints(imp, a, "padding", 2 * w->nsp, w->pads);
    ia_ints(imp, a, "dilation", w->nsp, w->d);
}

/* x must have rank 3..5 (1-D to 3-D spatial). */
static bool spatial_rank(Imp *imp, Expr *x) {
    uint32_t r = imp_rank(x);
    if (r >= 3 && r <= 2 + NSP_MAX) return true;
    return imp_error(imp,
                     "inputs of rank 3 to 5 (N, C and 1 to 3 spatial axes) are supported, "
                     "got rank %u",
                     r);
}

/* ---- Conv, ConvTranspose ------------------------------------------------------------------ */

static const char *const conv_ops[] = {NULL, "nn.conv1d", "nn.conv2d", "nn.conv3d"};
static const char *const convt_ops[] = {NULL, "nn.conv1d_transpose", "nn.conv2d_transpose",
                                        "nn.conv3d_transpose"};

/* The weight's spatial dims as the default kernel (-1 where unknown). */
static bool weight_kernel(Imp *imp, Expr *x, Expr *w, int64_t *k) {
    uint32_t r = imp_rank(x);
    if (imp_rank(w) != r)
        return imp_error(imp, "W must have the rank of X (%u), got rank %u", r, imp_rank(w));
    TensorType *t = imp_tt(w);
    for (uint32_t i = 2; i < r; i++)
        k[i - 2] = t->shape[i] >= 0 ? t->shape[i] : -1;
    return true;
}

static Expr *bias_add(Imp *imp, Expr *y, Expr *b) {
    if (b == NULL || y == NULL) return y;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", 1);
    return imp_call2(imp, "nn.bias_add", y, b, &a);
}

static bool conv_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *w = imp_in_req(imp, 1, "W");
    if (!x || !w || !spatial_rank(imp, x)) return false;
    Window win;
    int64_t kw[NSP_MAX];
    if (!weight_kernel(imp, x, w, kw) || !window_read(imp, x, kw, true, &win)) return false;
    ImpAttrs a = {0};
    window_attrs(imp, &a, &win);
    ia_int(imp, &a, "groups", imp_attr_int(imp, "group", 1));
    bool known = true;
    for (uint32_t i = 0; i < win.nsp; i++)
        if (win.k[i] < 0) known = false;
    if (known) ia_ints(imp, &a, "kernel_size", win.nsp, win.k);
    Expr *y = bias_add(imp, imp_call2(imp, conv_ops[win.nsp], x, w, &a), imp_in(imp, 2));
    imp_out(imp, 0, y);
    return y != NULL;
}

/* nn.pad of y with zeros: begin[i]/end[i] on spatial axis i. */
static Expr *pad_spatial(Imp *imp, Expr *y, uint32_t nsp, const int64_t *begin,
                         const int64_t *end) {
    if (!y) return NULL;
    int64_t pw[2 * (2 + NSP_MAX)] = {0};
    for (uint32_t i = 0; i < nsp; i++) {
        pw[2 * (2 + i)] = begin[i];
        pw[2 * (2 + i) + 1] = end[i];
    }
    ImpAttrs a = {0};
    ia_pairs(imp, &a, "pad_width", 2 + nsp, pw);
    return imp_call2(imp, "nn.pad", y, scalar_of(imp, y, 0), &a);
}

/* ONNX: out = s * (in - 1) + output_padding + extent - pad_begin - pad_end. With output_shape
 * (or auto_pad SAME_*, which asks for in * s) the pads follow from the wanted size; a negative
 * pad means zeros beyond the full transposed output (taken as output_padding where Relay allows
 * it, else padded on afterwards, before the bias). */
static bool conv_transpose_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *w = imp_in_req(imp, 1, "W");
    if (!x || !w || !spatial_rank(imp, x)) return false;
    Window win;
    int64_t kw[NSP_MAX];
    if (!weight_kernel(imp, x, w, kw) || !window_read(imp, x, kw, false, &win)) return false;
    uint32_t nsp = win.nsp;
    int64_t opad[NSP_MAX], extra_begin[NSP_MAX] = {0}, extra_end[NSP_MAX] = {0};
    if (!attr_n_ints(imp, "output_padding", nsp, 0, opad)) return false;
    for (uint32_t i = 0; i < nsp; i++)
        if (opad[i] < 0 || opad[i] > WINDOW_MAX)
            return imp_error(imp, "output_padding must be in 0..2^31, got %lld",
                             (long long)opad[i]);
    const int64_t *os;
    uint32_t n_os = imp_attr_ints(imp, "output_shape", &os);
    const char *ap = auto_pad(imp);
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    if (!same && strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)
        return imp_error(imp, "unknown auto_pad '%s'", ap);
    if (n_os != 0 || same) {
        if (n_os != 0 && n_os != nsp && n_os != nsp + 2)
            return imp_error(imp, "output_shape has %u values but the input has %u spatial axes",
                             n_os, nsp);
        if (n_os == nsp + 2) os += 2;
        for (uint32_t i = 0; i < nsp; i++) {
            if (win.in[i] < 0 || win.k[i] < 0)
                return imp_error(imp,
                                 "%s needs static spatial input dims and kernel shape (spatial "
                                 "axis %u is unknown)",
                                 n_os ? "output_shape" : "auto_pad", i);
            int64_t want = n_os ? os[i] : 0, full = 0;
            if ((!n_os && !sup_dim_mul(win.in[i], win.s[i], &want)) || want < 0 ||
                want > SUP_DIM_MAX ||
                !sup_dim_mul(win.s[i], win.in[i] ? win.in[i] - 1 : 0, &full) ||
                !sup_dim_add(full, opad[i], &full) || !sup_dim_add(full, extent(&win, i), &full))
                return imp_error(
                    imp, "spatial axis %u: the output size is out of range (at most 2^62)", i);
            int64_t total = full - (win.in[i] ? 0 : win.s[i]) - want;
            /* the split the specification gives, with floor division (the reference's: a
             * negative total under NOTSET adds zeros at the end) */
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
            int64_t begin = strcmp(ap, "SAME_UPPER") == 0 ? half : total - half;
            int64_t end = total - begin;
            win.pads[i] = begin > 0 ? begin : 0;
            win.pads[nsp + i] = end > 0 ? end : 0;
            extra_begin[i] = begin < 0 ? -begin : 0;
            extra_end[i] = end < 0 ? -end : 0;
        }
    } else if (strcmp(ap, "VALID") == 0) {
        memset(win.pads, 0, sizeof win.pads);
    } else {
        if (!attr_n_ints(imp, "pads", 2 * nsp, 0, win.pads)) return false;
        for (uint32_t i = 0; i < 2 * nsp; i++)
            if (win.pads[i] < 0)
                return imp_error(imp, "negative pads are not supported, got %lld",
                                 (long long)win.pads[i]);
    }
    /* trailing zeros become output_padding when Relay accepts it */
    bool need_pad = false;
    for (uint32_t i = 0; i < nsp; i++) {
        if (extra_end[i] &&
            (opad[i] + extra_end[i] < win.s[i] || opad[i] + extra_end[i] < win.d[i])) {
            opad[i] += extra_end[i];
            extra_end[i] = 0;
        }
        if (extra_begin[i] || extra_end[i]) need_pad = true;
    }
    ImpAttrs a = {0};
    window_attrs(imp, &a, &win);
    ia_ints(imp, &a, "output_padding", nsp, opad);
    ia_int(imp, &a, "groups", imp_attr_int(imp, "group", 1));
    Expr *y = imp_call2(imp, convt_ops[nsp], x, w, &a);
    if (need_pad) y = pad_spatial(imp, y, nsp, extra_begin, extra_end);
    y = bias_add(imp, y, imp_in(imp, 2));
    imp_out(imp, 0, y);
    return y != NULL;
}

/* Col2Im-18: input (N, C * prod(block), L) holds, per column l, one block of the image
 * (N, C, image...) it sums into: the inverse of im2col. That is a grouped transposed
 * convolution (C groups) of the columns laid out as (N, C * prod(block), out...) with a
 * one-hot kernel (in-channel c * K + j writes kernel position j of group c), with the strides,
 * dilations and pads of the node; output_padding (or zeros, where Relay takes none) gives the
 * last rows a window does not reach. image_shape and block_shape must be known at import. */
static bool col2im_convert(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "input"), *img = imp_tin(imp, 1, "image_shape"),
         *blk = imp_tin(imp, 2, "block_shape");
    if (!x || !img || !blk) return false;
    const int64_t *iv, *bv;
    uint32_t ni, nb;
    if (!imp_const_ints(imp, img, &iv, &ni) || !imp_const_ints(imp, blk, &bv, &nb))
        return imp_error(imp, "image_shape and block_shape must be known at import");
    if (ni != nb || ni < 1 || ni > NSP_MAX)
        return imp_error(imp,
                         "image_shape and block_shape must have 1 to %d values each, got "
                         "%u and %u",
                         NSP_MAX, ni, nb);
    TensorType *tx = imp_tt(x);
    if (tx->ndim != 3) return imp_error(imp, "input must be 3-D (N, C * prod(block), L)");
    Window win = {.nsp = ni};
    if (!attr_n_ints(imp, "strides", ni, 1, win.s) ||
        !attr_n_ints(imp, "dilations", ni, 1, win.d) ||
        !attr_n_ints(imp, "pads", 2 * ni, 0, win.pads))
        return false;
    int64_t kprod = 1, lprod = 1, out[NSP_MAX], opad[NSP_MAX], extra0[NSP_MAX] = {0},
            extra[NSP_MAX] = {0};
    bool need_pad = false;
    for (uint32_t i = 0; i < ni; i++) {
        if (bv[i] < 1 || bv[i] > WINDOW_MAX || iv[i] < 1 || iv[i] > WINDOW_MAX || win.s[i] < 1 ||
            win.s[i] > WINDOW_MAX || win.d[i] < 1 || win.d[i] > WINDOW_MAX || win.pads[i] < 0 ||
            win.pads[ni + i] < 0 || win.pads[i] > WINDOW_MAX || win.pads[ni + i] > WINDOW_MAX)
            return imp_error(imp,
                             "axis %u: image, block, strides, dilations must be in 1..2^31 "
                             "and pads in 0..2^31",
                             i);
        win.k[i] = bv[i], win.in[i] = iv[i];
        int64_t ext = win.d[i] * (bv[i] - 1) + 1,
                span = iv[i] + win.pads[i] + win.pads[ni + i] - ext;
        if (span < 0)
            return imp_error(imp, "axis %u: the block (extent %lld) does not fit the padded image",
                             i, (long long)ext);
        out[i] = span / win.s[i] + 1;
        if (!sup_dim_mul(kprod, bv[i], &kprod) || !sup_dim_mul(lprod, out[i], &lprod))
            return imp_error(imp, "the block or column count is out of range (at most 2^62)");
        /* what the transposed convolution gives without output_padding, and what is missing */
        int64_t got = (out[i] - 1) * win.s[i] + ext - win.pads[i] - win.pads[ni + i];
        opad[i] = iv[i] - got;
        if (opad[i] >= win.s[i] && opad[i] >= win.d[i])
            extra[i] = opad[i], opad[i] = 0, need_pad = true;
    }
    if (tx->shape[1] >= 0 && tx->shape[1] % kprod != 0)
        return imp_error(imp, "input has %lld channels, not a multiple of prod(block_shape) = %lld",
                         (long long)tx->shape[1], (long long)kprod);
    if (tx->shape[1] < 0) return imp_error(imp, "input's dim 1 must be static");
    if (tx->shape[2] >= 0 && tx->shape[2] != lprod)
        return imp_error(imp, "input has %lld columns but the image and block give %lld",
                         (long long)tx->shape[2], (long long)lprod);
    int64_t c = tx->shape[1] / kprod, ck = tx->shape[1];
    int64_t shape[2 + NSP_MAX] = {tx->shape[0], ck};
    for (uint32_t i = 0; i < ni; i++)
        shape[2 + i] = out[i];
    ImpAttrs ra = {0};
    ia_ints(imp, &ra, "newshape", 2 + ni, shape);
    Expr *cols = imp_call1(imp, "reshape", x, &ra);
    /* the one-hot kernel (C * K, 1, block...) */
    int64_t wshape[2 + NSP_MAX] = {ck, 1};
    for (uint32_t i = 0; i < ni; i++)
        wshape[2 + i] = bv[i];
    if (ck > ((int64_t)1 << 12) || kprod > ((int64_t)1 << 12))
        return imp_error(imp, "the kernel is too large for this form (C * prod(block) = %lld)",
                         (long long)ck);
    double *w = imp_alloc(imp, (size_t)(ck * kprod) * sizeof(double));
    memset(w, 0, (size_t)(ck * kprod) * sizeof(double));
    for (int64_t row = 0; row < ck; row++)
        w[row * kprod + row % kprod] = 1.0;
    Expr *wt = imp_cast(imp, imp_const_tensor(imp, RLY_DTYPE_F64, 2 + ni, wshape, w), tx->dtype);
    ImpAttrs a = {0};
    window_attrs(imp, &a, &win);
    ia_ints(imp, &a, "output_padding", ni, opad);
    ia_int(imp, &a, "groups", c);
    ia_int(imp, &a, "channels", c);
    ia_ints(imp, &a, "kernel_size", ni, bv);
    Expr *y = cols && wt ? imp_call2(imp, convt_ops[ni], cols, wt, &a) : NULL;
    if (need_pad) y = pad_spatial(imp, y, ni, extra0, extra);
    return imp_set_out(imp, 0, y);
}

/* DeformConv-19/22 (2-D): a convolution whose kernel taps move by per-position offsets (and
 * are scaled by an optional mask). Composed: the sampling positions (the static tap grid plus
 * the offsets, per offset group) are read bilinearly from X, as the reference does with
 * GridSample (pixel coordinates, zeros outside): four corners each, indices into X's H * W
 * taken with gather and weights zeroed where a corner falls outside; the samples times the mask
 * form the columns (N, C * K, oH * oW) of an im2col, and a grouped nn.batch_matmul with W and
 * the bias give Y. Static shapes. */
static bool deform_conv_convert(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X"), *w = imp_tin(imp, 1, "W"), *off = imp_tin(imp, 2, "offset");
    Expr *b = imp_in(imp, 3), *mask = imp_in(imp, 4);
    if (!x || !w || !off) return false;
    TensorType *tx = imp_tt(x), *tw = imp_tt(w), *to = imp_tt(off);
    if (tx->ndim != 4 || tw->ndim != 4 || to->ndim != 4)
        return imp_error(imp,
                         "only 2-D deformable convolution is supported (X, W and offset "
                         "4-D), got ranks %u, %u and %u",
                         tx->ndim, tw->ndim, to->ndim);
    for (uint32_t i = 0; i < 4; i++)
        if (tx->shape[i] < 0 || tw->shape[i] < 0 || to->shape[i] < 0)
            return imp_error(imp, "X, W and offset must have static shapes");
    if (!sup_dtype_is_float(tx->dtype)) return imp_error(imp, "X must be a float tensor");
    int64_t n = tx->shape[0], c = tx->shape[1], ih = tx->shape[2], iw = tx->shape[3];
    int64_t oc = tw->shape[0], kh = tw->shape[2], kw = tw->shape[3];
    int64_t oh = to->shape[2], ow = to->shape[3];
    int64_t grp = imp_attr_int(imp, "group", 1), og = imp_attr_int(imp, "offset_group", 1);
    int64_t st[2], dl[2], pd[4], ks[2];
    if (!attr_n_ints(imp, "strides", 2, 1, st) || !attr_n_ints(imp, "dilations", 2, 1, dl) ||
        !attr_n_ints(imp, "pads", 4, 0, pd) || !attr_n_ints(imp, "kernel_shape", 2, 0, ks))
        return false;
    if ((ks[0] && ks[0] != kh) || (ks[1] && ks[1] != kw))
        return imp_error(imp, "kernel_shape differs from W's spatial dims");
    int64_t k = kh * kw, cols = k * oh * ow;
    if (grp < 1 || og < 1 || c % grp || oc % grp || c % og || tw->shape[1] * grp != c)
        return imp_error(imp,
                         "group %lld and offset_group %lld do not divide the channels "
                         "(X has %lld, W %lld x %lld)",
                         (long long)grp, (long long)og, (long long)c, (long long)oc,
                         (long long)tw->shape[1]);
    if (to->shape[0] != n || to->shape[1] != og * 2 * k)
        return imp_error(imp, "offset must be (N, offset_group * 2 * kH * kW, oH, oW)");
    if (k * oh * ow > ((int64_t)1 << 24) || ih * iw > ((int64_t)1 << 30) ||
        n * c > ((int64_t)1 << 20))
        return imp_error(imp, "the sampling grid is too large for this form");
    for (int q = 0; q < 2; q++)
        if (st[q] < 1 || dl[q] < 1 || pd[q] < 0 || pd[q + 2] < 0 || st[q] > WINDOW_MAX ||
            dl[q] > WINDOW_MAX || pd[q] > WINDOW_MAX || pd[q + 2] > WINDOW_MAX)
            return imp_error(imp, "strides and dilations must be in 1..2^31, pads in 0..2^31");
    for (int q = 0; q < 2; q++) {
        int64_t in = q ? iw : ih, kk = q ? kw : kh, o = q ? ow : oh;
        int64_t span = in + pd[q] + pd[q + 2] - ((kk - 1) * dl[q] + 1);
        if (span < 0 || span / st[q] + 1 != o)
            return imp_error(imp,
                             "offset's spatial dims (%lld, %lld) are not the convolution's "
                             "output size",
                             (long long)oh, (long long)ow);
    }
    if (mask) {
        TensorType *tm = imp_tt(mask);
        if (!tm || tm->ndim != 4 || tm->shape[0] != n || tm->shape[1] != og * k ||
            tm->shape[2] != oh || tm->shape[3] != ow)
            return imp_error(imp, "mask must be (N, offset_group * kH * kW, oH, oW)");
    }
    rly_dtype dt = tx->dtype;
    /* the tap grid (2, K, oH, oW): row and column of each tap before the offsets */
    double *base = imp_alloc(imp, sizeof(double) * 2 * (size_t)cols);
    for (int64_t i = 0; i < kh; i++)
        for (int64_t j = 0; j < kw; j++)
            for (int64_t y = 0; y < oh; y++)
                for (int64_t z = 0; z < ow; z++) {
                    size_t at = (size_t)(((i * kw + j) * oh + y) * ow + z);
                    base[at] = (double)(y * st[0] - pd[0] + i * dl[0]);
                    base[cols + at] = (double)(z * st[1] - pd[1] + j * dl[1]);
                }
    int64_t bshape[6] = {1, 1, 2, k, oh, ow}, oshape[6] = {n, og, k, 2, oh, ow};
    int64_t perm[6] = {0, 1, 3, 2, 4, 5};
    ImpAttrs ra = {0}, tr = {0};
    ia_ints(imp, &ra, "newshape", 6, oshape);
    ia_ints(imp, &tr, "axes", 6, perm);
    Expr *o64 = imp_cast(imp, off, RLY_DTYPE_F64);
    Expr *o6 = o64 ? imp_call1(imp, "reshape", o64, &ra) : NULL;
    Expr *pos = o6 ? imp_call1(imp, "transpose", o6, &tr) : NULL; /* (N, G, 2, K, oH, oW) */
    pos = pos ? imp_call2(imp, "add", pos, imp_const_tensor(imp, RLY_DTYPE_F64, 6, bshape, base),
                          NULL)
              : NULL;
    Expr *ph = NULL, *pw = NULL;
    for (int q = 0; q < 2 && pos; q++) { /* (N, G, K, oH, oW) each */
        ImpAttrs sq = {0};
        ia_int(imp, &sq, "axis", 2);
        Expr *e = imp_call2(imp, "take", pos, imp_scalar_i(imp, RLY_DTYPE_I64, q), &sq);
        if (q == 0)
            ph = e;
        else
            pw = e;
    }
    if (!ph || !pw) return false;
    Expr *h0 = imp_call1(imp, "floor", ph, NULL), *w0 = imp_call1(imp, "floor", pw, NULL);
    Expr *lh = imp_call2(imp, "subtract", ph, h0, NULL),
         *lw = imp_call2(imp, "subtract", pw, w0, NULL);
    Expr *one = imp_scalar(imp, RLY_DTYPE_F64, 1.0), *zero = imp_scalar(imp, RLY_DTYPE_F64, 0.0);
    int64_t gshape[4] = {n, og, c / og, ih * iw}, ishape[4] = {n, og, 1, cols},
            fshape[4] = {n, og, c / og, cols};
    ImpAttrs xr = {0}, ir = {0}, bt = {0}, ga = {0};
    ia_ints(imp, &xr, "newshape", 4, gshape);
    ia_ints(imp, &ir, "newshape", 4, ishape);
    ia_ints(imp, &bt, "shape", 4, fshape);
    ia_int(imp, &ga, "axis", 3);
    Expr *xg = imp_call1(imp, "reshape", imp_cast(imp, x, RLY_DTYPE_F64), &xr);
    Expr *acc = NULL;
    for (int corner = 0; corner < 4; corner++) {
        int dy = corner >> 1, dx = corner & 1;
        Expr *hc = dy ? imp_call2(imp, "add", h0, one, NULL) : h0;
        Expr *wc = dx ? imp_call2(imp, "add", w0, one, NULL) : w0;
        Expr *wy = dy ? lh : imp_call2(imp, "subtract", one, lh, NULL);
        Expr *wx = dx ? lw : imp_call2(imp, "subtract", one, lw, NULL);
        Expr *hmax = imp_scalar(imp, RLY_DTYPE_F64, (double)(ih - 1));
        Expr *wmax = imp_scalar(imp, RLY_DTYPE_F64, (double)(iw - 1));
        Expr *ok =
            imp_call2(imp, "logical_and",
                      imp_call2(imp, "logical_and", imp_call2(imp, "greater_equal", hc, zero, NULL),
                                imp_call2(imp, "less_equal", hc, hmax, NULL), NULL),
                      imp_call2(imp, "logical_and", imp_call2(imp, "greater_equal", wc, zero, NULL),
                                imp_call2(imp, "less_equal", wc, wmax, NULL), NULL),
                      NULL);
        Expr *wt = imp_call2(imp, "multiply", imp_call2(imp, "multiply", wy, wx, NULL),
                             imp_cast(imp, ok, RLY_DTYPE_F64), NULL);
        Expr *hcl =
            imp_call2(imp, "maximum", imp_call2(imp, "minimum", hc, hmax, NULL), zero, NULL);
        Expr *wcl =
            imp_call2(imp, "maximum", imp_call2(imp, "minimum", wc, wmax, NULL), zero, NULL);
        Expr *flat = imp_call2(
            imp, "add",
            imp_call2(imp, "multiply", hcl, imp_scalar(imp, RLY_DTYPE_F64, (double)iw), NULL), wcl,
            NULL);
        Expr *idx = imp_cast(imp, flat, RLY_DTYPE_I64);
        idx = idx ? imp_call1(imp, "reshape", idx, &ir) : NULL;
        idx = idx ? imp_call1(imp, "broadcast_to", idx, &bt) : NULL;
        Expr *v = xg && idx ? imp_call2(imp, "gather", xg, idx, &ga) : NULL; /* (N, G, C/G, cols) */
        Expr *wr = wt ? imp_call1(imp, "reshape", wt, &ir) : NULL;
        Expr *term = v && wr ? imp_call2(imp, "multiply", v, wr, NULL) : NULL;
        if (term == NULL) return false;
        acc = acc ? imp_call2(imp, "add", acc, term, NULL) : term;
    }
    if (mask) {
        Expr *m = imp_call1(imp, "reshape", imp_cast(imp, mask, RLY_DTYPE_F64), &ir);
        acc = m ? imp_call2(imp, "multiply", acc, m, NULL) : NULL;
    }
    /* columns (group, C/group * K, N * oH * oW), rows of W (group, oC/group, C/group * K) */
    int64_t cshape[4] = {n, grp, c / grp * k, oh * ow};
    ImpAttrs c1 = {0}, c2 = {0}, c3 = {0}, w1 = {0};
    ia_ints(imp, &c1, "newshape", 4, cshape);
    int64_t p4[4] = {1, 2, 0, 3};
    ia_ints(imp, &c2, "axes", 4, p4);
    int64_t c3shape[3] = {grp, c / grp * k, n * oh * ow};
    ia_ints(imp, &c3, "newshape", 3, c3shape);
    int64_t wshape[3] = {grp, oc / grp, c / grp * k};
    ia_ints(imp, &w1, "newshape", 3, wshape);
    Expr *cl = acc ? imp_call1(imp, "reshape", acc, &c1) : NULL;
    cl = cl ? imp_call1(imp, "transpose", cl, &c2) : NULL;
    cl = cl ? imp_call1(imp, "reshape", cl, &c3) : NULL;
    Expr *wm = imp_call1(imp, "reshape", imp_cast(imp, w, RLY_DTYPE_F64), &w1);
    Expr *y =
        cl && wm ? imp_call2(imp, "nn.batch_matmul", wm, cl, NULL) : NULL; /* (grp, oC/g, N*L) */
    int64_t y4[4] = {oc, n, oh, ow}, yp[4] = {1, 0, 2, 3};
    ImpAttrs y1 = {0}, y2 = {0};
    ia_ints(imp, &y1, "newshape", 4, y4);
    ia_ints(imp, &y2, "axes", 4, yp);
    y = y ? imp_call1(imp, "reshape", y, &y1) : NULL;
    y = y ? imp_call1(imp, "transpose", y, &y2) : NULL;
    if (b && y) {
        int64_t bs[3] = {-1, 1, 1};
        ImpAttrs br = {0};
        ia_ints(imp, &br, "newshape", 3, bs);
        y = imp_call2(imp, "add", y,
                      imp_call1(imp, "reshape", imp_cast(imp, b, RLY_DTYPE_F64), &br), NULL);
    }
    return imp_set_out(imp, 0, imp_cast(imp, y, dt));
}

/* ---- pools ----------------------------------------------------------------------------------- */

/* Output size along spatial axis i (floor or ceil); -1 when the input dim is not static. */
static int64_t pool_out(const Window *w, uint32_t i, bool ceil_mode) {
    if (w->in[i] < 0) return -1;
    int64_t span = w->in[i] + w->pads[i] + w->pads[w->nsp + i] - extent(w, i);
    if (span < 0) return -1;
    return (ceil_mode ? (span + w->s[i] - 1) / w->s[i] : span / w->s[i]) + 1;
}

/* ONNX (as PyTorch) drops a ceil_mode window that would start in the end padding; Relay's
 * ceil_mode keeps it. Where the dims are static, use whichever Relay mode gives ONNX's size. */
static bool pool_ceil_mode(const Window *w, bool ceil_mode) {
    if (!ceil_mode) return false;
    bool same_as_floor = true;
    for (uint32_t i = 0; i < w->nsp; i++) {
        int64_t oc = pool_out(w, i, true), of = pool_out(w, i, false);
        if (oc < 0) return true;
        if ((oc - 1) * w->s[i] >= w->in[i] + w->pads[i]) oc--;
        if (oc != of) same_as_floor = false;
    }
    return !same_as_floor;
}

/* The lowest value of a dtype (max pool padding). */
static double lowest(rly_dtype dt) {
    switch (dt) {
    case RLY_DTYPE_I8: return -128;
    case RLY_DTYPE_I16: return -32768;
    case RLY_DTYPE_I32: return -2147483648.0;
    case RLY_DTYPE_I64: return -9223372036854775808.0;
    case RLY_DTYPE_U8:
    case RLY_DTYPE_U16:
    case RLY_DTYPE_U32:
    case RLY_DTYPE_U64:
    case RLY_DTYPE_BOOL: return 0;
    default: return -INFINITY;
    }
}

/* A constant int64 tensor of `shape` with values f(index) = arange(shape[axis]) placed along
 * axis 0 of a tensor of rank `rank` (shape [n, 1, ..., 1]). */
static Expr *arange_col(Imp *imp, int64_t n, uint32_t rank) {
    int64_t *v = imp_alloc(imp, (size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++)
        v[i] = i;
    int64_t shape[2 + NSP_MAX];
    shape[0] = n;
    for (uint32_t i = 1; i < rank; i++)
        shape[i] = 1;
    return imp_const_tensor(imp, RLY_DTYPE_I64, rank, shape, v);
}

/* MaxPool's Indices output: the flat index (over N, C and the spatial axes, in row-major or with
 * storage_order 1 column-major spatial order) of each window's first maximum. Composed as pad
 * with the lowest value, sliding_window, argmax over the window, and index arithmetic. */
static Expr *maxpool_indices(Imp *imp, Expr *x, const Window *w, bool ceil_mode,
                             int64_t storage_order) {
    TensorType *t = imp_tt(x);
    uint32_t nsp = w->nsp;
    int64_t n = t->shape[0], c = t->shape[1], out[NSP_MAX];
    if (n < 0 || c < 0) {
        imp_error(imp, "the Indices output needs a static input shape");
        return NULL;
    }
    for (uint32_t i = 0; i < nsp; i++) {
        out[i] = pool_out(w, i, ceil_mode);
        if (out[i] < 0 || w->in[i] < 0) {
            imp_error(imp, "the Indices output needs a static input shape");
            return NULL;
        }
        if (ceil_mode && (out[i] - 1) * w->s[i] >= w->in[i] + w->pads[i]) out[i]--;
    }
    /* the padded input holds exactly the windows: crop or pad its end */
    int64_t crop_end[NSP_MAX], begin[NSP_MAX], end[NSP_MAX], ext[NSP_MAX];
    bool crop = false;
    for (uint32_t i = 0; i < nsp; i++) {
        ext[i] = extent(w, i);
        int64_t need = (out[i] - 1) * w->s[i] + ext[i];
        begin[i] = w->pads[i];
        end[i] = need - w->in[i] - w->pads[i];
        crop_end[i] = w->in[i];
        if (end[i] < 0) {
            crop_end[i] = w->in[i] + end[i];
            end[i] = 0;
            crop = true;
        }
    }
    Expr *xp = x;
    if (crop) {
        int64_t b0[NSP_MAX] = {0}, axes[NSP_MAX];
        for (uint32_t i = 0; i < nsp; i++)
            axes[i] = 2 + i;
        ImpAttrs a = {0};
        ia_ints(imp, &a, "begin", nsp, b0);
        ia_ints(imp, &a, "end", nsp, crop_end);
        ia_ints(imp, &a, "axes", nsp, axes);
        xp = imp_call1(imp, "strided_slice", xp, &a);
    }
    {
        int64_t pw[2 * (2 + NSP_MAX)] = {0};
        for (uint32_t i = 0; i < nsp; i++) {
            pw[2 * (2 + i)] = begin[i];
            pw[2 * (2 + i) + 1] = end[i];
        }
        ImpAttrs a = {0};
        ia_pairs(imp, &a, "pad_width", 2 + nsp, pw);
        xp = imp_call2(imp, "nn.pad", xp, scalar_of(imp, x, lowest(imp_dtype(x))), &a);
    }
    ImpAttrs sa = {0};
    ia_int(imp, &sa, "axis", 2);
    ia_ints(imp, &sa, "window_shape", nsp, ext);
    ia_ints(imp, &sa, "strides", nsp, w->s);
    Expr *win = imp_call1(imp, "sliding_window", xp, &sa); /* (N, C, out..., ext...) */
    bool dilated = false;
    for (uint32_t i = 0; i < nsp; i++)
        if (w->d[i] != 1) dilated = true;
    if (dilated) {
        int64_t b0[NSP_MAX] = {0}, axes[NSP_MAX];
        for (uint32_t i = 0; i < nsp; i++)
            axes[i] = 2 + nsp + i;
        ImpAttrs a = {0};
        ia_ints(imp, &a, "begin", nsp, b0);
        ia_ints(imp, &a, "end", nsp, ext);
        ia_ints(imp, &a, "strides", nsp, w->d);
        ia_ints(imp, &a, "axes", nsp, axes);
        win = imp_call1(imp, "strided_slice", win, &a);
    }
    int64_t flat[3 + NSP_MAX], kk = 1;
    flat[0] = n;
    flat[1] = c;
    for (uint32_t i = 0; i < nsp; i++) {
        flat[2 + i] = out[i];
        kk *= w->k[i];
    }
    flat[2 + nsp] = kk;
    win = reshape(imp, win, 3 + nsp, flat);
    int64_t last = -1;
    Expr *pos = imp_cast(imp, reduce(imp, "argmax", win, 1, &last, false), RLY_DTYPE_I64);
    if (!pos) return NULL;
    /* coordinate of the maximum along each spatial axis, in the unpadded input */
    Expr *coord[NSP_MAX];
    int64_t kstride = 1;
    for (uint32_t i = nsp; i-- > 0;) {
        Expr *p = pos;
        if (kstride != 1) p = div_(imp, p, imp_scalar_i(imp, RLY_DTYPE_I64, kstride));
        if (i != 0) p = imp_call2(imp, "mod", p, imp_scalar_i(imp, RLY_DTYPE_I64, w->k[i]), NULL);
        kstride *= w->k[i];
        Expr *o = arange_col(imp, out[i], nsp - i);
        o = mul(imp, o, imp_scalar_i(imp, RLY_DTYPE_I64, w->s[i]));
        if (w->pads[i]) o = sub(imp, o, imp_scalar_i(imp, RLY_DTYPE_I64, w->pads[i]));
        if (w->d[i] != 1) p = mul(imp, p, imp_scalar_i(imp, RLY_DTYPE_I64, w->d[i]));
        coord[i] = add(imp, o, p);
    }
    Expr *idx = NULL;
    int64_t plane = 1;
    for (uint32_t j = 0; j < nsp; j++) {
        uint32_t i = storage_order ? nsp - 1 - j : j; /* Horner from the slowest axis */
        idx = idx ? add(imp, mul(imp, idx, imp_scalar_i(imp, RLY_DTYPE_I64, w->in[i])), coord[i])
                  : coord[i];
        plane *= w->in[i];
    }
    /* + (n * C + c) * plane */
    int64_t nc = n * c, bshape[2 + NSP_MAX];
    int64_t *base = imp_alloc(imp, (size_t)(nc > 0 ? nc : 1) * sizeof(int64_t));
    for (int64_t i = 0; i < nc; i++)
        base[i] = i * plane;
    bshape[0] = n;
    bshape[1] = c;
    for (uint32_t i = 0; i < nsp; i++)
        bshape[2 + i] = 1;
    return add(imp, idx, imp_const_tensor(imp, RLY_DTYPE_I64, 2 + nsp, bshape, base));
}

static bool pool_convert(Imp *imp, bool is_max) {
    Expr *x = imp_in_req(imp, 0, "X");
    if (!x || !spatial_rank(imp, x)) return false;
    Window win;
    if (!window_read(imp, x, NULL, true, &win)) return false;
    bool ceil_mode = imp_attr_int(imp, "ceil_mode", 0) != 0;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "pool_size", win.nsp, win.k);
    window_attrs(imp, &a, &win);
    ia_bool(imp, &a, "ceil_mode", pool_ceil_mode(&win, ceil_mode));
    if (!is_max)
        ia_bool(imp, &a, "count_include_pad", imp_attr_int(imp, "count_include_pad", 0) != 0);
    static const char *const max_ops[] = {NULL, "nn.max_pool1d", "nn.max_pool2d", "nn.max_pool3d"};
    static const char *const avg_ops[] = {NULL, "nn.avg_pool1d", "nn.avg_pool2d", "nn.avg_pool3d"};
    Expr *y = imp_call1(imp, (is_max ? max_ops : avg_ops)[win.nsp], x, &a);
    if (!y) return false;
    imp_out(imp, 0, y);
    if (is_max && imp_wants_out(imp, 1)) {
        Expr *ind = maxpool_indices(imp, x, &win, ceil_mode, imp_attr_int(imp, "storage_order", 0));
        if (!ind) return false;
        imp_out(imp, 1, ind);
    }
    return true;
}

static bool max_pool_convert(Imp *imp) { return pool_convert(imp, true); }
static bool avg_pool_convert(Imp *imp) { return pool_convert(imp, false); }

/* LpPool: (sum over the window of |x|^p)^(1/p) = (avg_pool(|x|^p, padding counted) * K)^(1/p),
 * K the number of taps (padding contributes |0|^p = 0 to the sum). */
static bool lp_pool_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X");
    if (!x || !spatial_rank(imp, x)) return false;
    Window win;
    if (!window_read(imp, x, NULL, true, &win)) return false;
    double p = attr_num(imp, "p", 2);
    if (!(p > 0)) return imp_error(imp, "p must be positive, got %g", p);
    bool ceil_mode = imp_attr_int(imp, "ceil_mode", 0) != 0;
    if (ceil_mode && pool_ceil_mode(&win, true))
        return imp_error(imp, "ceil_mode with a partial last window is not supported");
    ImpAttrs a = {0};
    ia_ints(imp, &a, "pool_size", win.nsp, win.k);
    window_attrs(imp, &a, &win);
    ia_bool(imp, &a, "count_include_pad", true);
    static const char *const avg_ops[] = {NULL, "nn.avg_pool1d", "nn.avg_pool2d", "nn.avg_pool3d"};
    double taps = 1;
    for (uint32_t i = 0; i < win.nsp; i++)
        taps *= (double)win.k[i];
    Expr *s = imp_call1(imp, avg_ops[win.nsp], abs_pow(imp, x, p), &a);
    Expr *y = root(imp, mul(imp, s, scalar_of(imp, x, taps)), p);
    imp_out(imp, 0, y);
    return y != NULL;
}

/* Global pools: a reduction over the spatial axes, kept as size 1. */
static bool global_pool(Imp *imp, int kind) {
    Expr *x = imp_in_req(imp, 0, "X");
    if (!x) return false;
    uint32_t r = imp_rank(x);
    if (r < 3) return imp_error(imp, "X must have rank 3 or more (N, C, spatial...), got %u", r);
    int64_t axes[64];
    if (r - 2 > 64) return imp_error(imp, "rank %u is too large", r);
    uint32_t n = spatial_axes(r, axes);
    Expr *y;
    if (kind == 0) {
        y = reduce(imp, "mean", x, n, axes, true);
    } else if (kind == 1) {
        y = reduce(imp, "max", x, n, axes, true);
    } else {
        double p = attr_num(imp, "p", 2);
        if (!(p > 0)) return imp_error(imp, "p must be positive, got %g", p);
        y = root(imp, reduce(imp, "sum", abs_pow(imp, x, p), n, axes, true), p);
    }
    imp_out(imp, 0, y);
    return y != NULL;
}

static bool global_avg_pool_convert(Imp *imp) { return global_pool(imp, 0); }
static bool global_max_pool_convert(Imp *imp) { return global_pool(imp, 1); }
static bool global_lp_pool_convert(Imp *imp) { return global_pool(imp, 2); }

/* MaxUnpool, as the reference computes it: X scattered to the flat indices I (which count over
 * N and C too, as MaxPool's Indices do) in zeros of the inferred shape ((in - 1) * stride +
 * kernel - pads), then zeros appended at the end of each axis up to output_shape when given. */
static bool max_unpool_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *ind = imp_in_req(imp, 1, "I"), *os = imp_in(imp, 2);
    if (!x || !ind || !spatial_rank(imp, x)) return false;
    uint32_t r = imp_rank(x);
    Window win;
    if (!window_read(imp, x, NULL, true, &win)) return false;
    TensorType *t = imp_tt(x);
    int64_t shape[2 + NSP_MAX], total = 1;
    shape[0] = t->shape[0];
    shape[1] = t->shape[1];
    for (uint32_t i = 0; i < win.nsp; i++) {
        int64_t grown = 0; /* (in - 1) * stride + kernel, checked: the stride is the model's */
        if (win.in[i] < 0 || win.k[i] < 0) {
            shape[2 + i] = -1;
            continue;
        }
        if (win.in[i] == 0)
            grown = win.k[i] - win.s[i];
        else if (!sup_dim_mul(win.in[i] - 1, win.s[i], &grown) ||
                 !sup_dim_add(grown, win.k[i], &grown))
            return imp_error(imp, "spatial axis %u: the output size is over 2^62", i);
        shape[2 + i] = grown - win.pads[i] - win.pads[win.nsp + i];
        if (shape[2 + i] < 0)
            return imp_error(imp, "spatial axis %u: the pads exceed the output size", i);
    }
    for (uint32_t i = 0; i < r; i++) {
        if (shape[i] < 0)
            return imp_error(imp, "MaxUnpool needs static input dims (axis %u is unknown)", i);
        if (!sup_dim_mul(total, shape[i], &total))
            return imp_error(imp, "the output has more than 2^62 elements");
    }
    ImpAttrs za = {0};
    ia_ints(imp, &za, "shape", 1, &total);
    ia_str(imp, &za, "dtype", sup_dtype_name(imp_dtype(x)));
    int64_t m1 = -1;
    Expr *args[3] = {imp_call(imp, "zeros", 0, NULL, &za),
                     reshape(imp, imp_cast(imp, ind, RLY_DTYPE_I64), 1, &m1),
                     reshape(imp, x, 1, &m1)};
    if (!args[0] || !args[1] || !args[2]) return false;
    ImpAttrs sa = {0};
    ia_int(imp, &sa, "axis", 0);
    Expr *y = reshape(imp, imp_call(imp, "scatter_elements", 3, args, &sa), r, shape);
    if (y && os) {
        const int64_t *v;
        uint32_t n;
        if (imp_const_ints(imp, os, &v, &n)) {
            if (n != r) return imp_error(imp, "output_shape has %u values but X has rank %u", n, r);
            int64_t pw[2 * (2 + NSP_MAX)] = {0};
            bool any = false;
            for (uint32_t i = 0; i < r; i++) {
                if (v[i] < shape[i])
                    return imp_error(imp,
                                     "output_shape %lld is smaller than the unpooled size %lld "
                                     "on axis %u",
                                     (long long)v[i], (long long)shape[i], i);
                pw[2 * i + 1] = v[i] - shape[i];
                if (v[i] != shape[i]) any = true;
            }
            if (any) {
                ImpAttrs pa = {0};
                ia_pairs(imp, &pa, "pad_width", r, pw);
                y = imp_call2(imp, "nn.pad", y, scalar_of(imp, y, 0), &pa);
            }
        } else {
            /* pad_width (rank, 2) = [0, output_shape - inferred] per axis, known at run time */
            int64_t zeros[2 + NSP_MAX] = {0};
            Expr *ends = sub(imp, imp_cast(imp, os, RLY_DTYPE_I64), imp_const_i64s(imp, r, shape));
            Expr *cols[2] = {imp_const_i64s(imp, r, zeros), ends};
            if (!ends || !cols[0]) return false;
            ImpAttrs st = {0};
            ia_int(imp, &st, "axis", 1);
            Expr *pw = imp_call1(imp, "stack", imp_tuple(imp, 2, cols), &st);
            if (!pw) return false;
            Expr *pargs[3] = {y, pw, scalar_of(imp, y, 0)};
            y = imp_call(imp, "dyn.nn.pad", 3, pargs, NULL);
        }
    }
    imp_out(imp, 0, y);
    return y != NULL;
}

/* ---- normalizations ------------------------------------------------------------------------- */

/* BatchNormalization-14/15 training_mode=1: normalize with the batch statistics (mean and
 * biased variance over every axis but the channel axis 1) and give the updated running
 * statistics, input * momentum + current * (1 - momentum), in the dtype of input_mean/var. */
static bool batch_norm_train(Imp *imp, Expr *x, Expr *scale, Expr *b, Expr *mean, Expr *var) {
    uint32_t r = imp_rank(x);
    if (r < 2) return imp_error(imp, "X must have rank 2 or more, got %u", r);
    for (uint32_t i = 3; i < 5; i++)
        if (imp_wants_out(imp, i))
            return imp_error(imp,
                             "output %u: BatchNormalization from opset 14 on has 3 outputs "
                             "(Y, running_mean, running_var)",
                             i);
    int64_t axes[32];
    if (r > 32) return imp_error(imp, "rank %u is too large", r);
    uint32_t n = 0;
    for (uint32_t i = 0; i < r; i++)
        if (i != 1) axes[n++] = i;
    rly_dtype dt = imp_dtype(x);
    double eps = imp_attr_float(imp, "epsilon", 1e-5), mom = imp_attr_float(imp, "momentum", 0.9);
    Expr *cur_mean = reduce(imp, "mean", x, n, axes, false);
    Expr *vargs[2] = {x, reduce(imp, "mean", x, n, axes, true)};
    ImpAttrs va = {0};
    ia_ints(imp, &va, "axis", n, axes);
    Expr *cur_var = vargs[1] ? imp_call(imp, "variance", 2, vargs, &va) : NULL;
    Expr *args[5] = {x, imp_cast(imp, scale, dt), imp_cast(imp, b, dt), cur_mean, cur_var};
    for (uint32_t i = 0; i < 5; i++)
        if (args[i] == NULL) return false;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", 1);
    ia_float(imp, &a, "epsilon", eps);
    Expr *t = imp_call(imp, "nn.batch_norm", 5, args, &a);
    if (!imp_set_out(imp, 0, t ? imp_get(imp, t, 0) : NULL)) return false;
    Expr *run[2] = {mean, var}, *cur[2] = {cur_mean, cur_var};
    for (uint32_t i = 0; i < 2; i++) {
        if (!imp_wants_out(imp, 1 + i)) continue;
        Expr *c = imp_cast(imp, cur[i], imp_dtype(run[i]));
        Expr *e = add(imp, mul(imp, run[i], scalar_of(imp, run[i], mom)),
                      mul(imp, c, scalar_of(imp, c, 1 - mom)));
        if (!imp_set_out(imp, 1 + i, e)) return false;
    }
    return true;
}

static bool batch_norm_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *scale = imp_in_req(imp, 1, "scale"),
         *b = imp_in_req(imp, 2, "B"), *mean = imp_in_req(imp, 3, "input_mean"),
         *var = imp_in_req(imp, 4, "input_var");
    if (!x || !scale || !b || !mean || !var) return false;
    if (imp_attr_int(imp, "training_mode", 0) != 0)
        return batch_norm_train(imp, x, scale, b, mean, var);
    for (uint32_t i = 1; i < 5; i++)
        if (imp_wants_out(imp, i))
            return imp_error(imp, "the training outputs (running or saved mean and variance) "
                                  "are not supported (inference only)");
    if (imp_rank(x) < 2) return imp_error(imp, "X must have rank 2 or more, got %u", imp_rank(x));
    rly_dtype dt = imp_dtype(x);
    scale = imp_cast(imp, scale, dt);
    b = imp_cast(imp, b, dt);
    mean = imp_cast(imp, mean, dt);
    var = imp_cast(imp, var, dt);
    double eps = imp_attr_float(imp, "epsilon", 1e-5);
    Expr *y;
    if (imp_attr_int(imp, "spatial", 1) == 0) {
        /* BatchNormalization-7 spatial=0: statistics per (C, D1, ...) element, broadcast from
         * the right over N */
        Expr *den = imp_call1(imp, "sqrt", add(imp, var, scalar_of(imp, var, eps)), NULL);
        y = add(imp, mul(imp, div_(imp, sub(imp, x, mean), den), scale), b);
    } else {
        Expr *args[5] = {x, scale, b, mean, var};
        if (!scale || !b || !mean || !var) return false;
        ImpAttrs a = {0};
        ia_int(imp, &a, "axis", 1);
        ia_float(imp, &a, "epsilon", eps);
        Expr *t = imp_call(imp, "nn.batch_norm", 5, args, &a);
        y = t ? imp_get(imp, t, 0) : NULL;
    }
    imp_out(imp, 0, y);
    return y != NULL;
}

/* BatchNormalization-1/6: is_test=0 asks for batch statistics (training). */
static bool batch_norm6_convert(Imp *imp) {
    if (imp_attr_int(imp, "is_test", 0) == 0)
        return imp_error(imp, "is_test=0 (training mode) is not supported (inference only)");
    return batch_norm_convert(imp);
}

/* ---- Dropout-12 (ratio and training_mode are inputs) ------------------------------------------
 */

/* Y = X with an all-true mask whenever the result is determined: training_mode false (or left
 * out) or ratio 0 (the scale 1 / (1 - ratio) is then 1 and no element is dropped). A
 * training-mode Dropout with a nonzero ratio drops elements at random, which an importer cannot
 * reproduce: an error at import time when both inputs are constants; when either is known only
 * at run time, Y is `if (!training_mode || ratio == 0) { X } else { trap }`, so a run fails
 * exactly when it would drop elements. (Dropout-1/10, without these inputs: import_elem.c.) */
static Expr *to_scalar(Imp *imp, Expr *e) {
    if (e == NULL || imp_rank(e) == 0) return e;
    return reshape(imp, e, 0, NULL); /* a one-element tensor; the relation rejects others */
}

static bool dropout12_convert(Imp *imp) {
    static const char random_msg[] = "training-mode Dropout with a nonzero ratio drops elements "
                                     "at random, which is not supported (only training_mode "
                                     "false or ratio 0 are)";
    Expr *x = imp_tin(imp, 0, "data");
    if (x == NULL) return false;
    Expr *r = imp_in(imp, 1), *train = imp_in(imp, 2);
    double ratio = 0.5, on = 0;
    bool ratio_known = r == NULL || imp_const_f64(r, &ratio);
    bool train_known = train == NULL || imp_const_f64(train, &on);
    Expr *y = x;
    if ((train_known && on == 0) || (ratio_known && ratio == 0)) {
        y = x;
    } else if (train_known && ratio_known) {
        return imp_error(imp, "%s; ratio is %g", random_msg, ratio);
    } else {
        Expr *ok = NULL;
        if (!train_known)
            ok = imp_call1(imp, "logical_not", imp_cast(imp, to_scalar(imp, train), RLY_DTYPE_BOOL),
                           NULL);
        if (!ratio_known) {
            Expr *rs = to_scalar(imp, r);
            Expr *zero = imp_call2(imp, "equal", rs, scalar_of(imp, rs, 0), NULL);
            ok = train_known ? zero : imp_call2(imp, "logical_or", ok, zero, NULL);
        }
        TensorType *tt = imp_tt(x);
        int64_t *dims = imp_alloc(imp, sizeof *dims * (tt->ndim ? tt->ndim : 1));
        for (uint32_t i = 0; i < tt->ndim; i++)
            dims[i] = tt->shape[i] < 0 ? -1 : tt->shape[i];
        Expr *bad = imp_trap(imp, tt->ndim, dims, tt->dtype, random_msg);
        if (ok == NULL || bad == NULL) return false;
        y = ir_if_new(imp_ctx(imp), ok, x, bad, imp_span(imp));
        y->checked_type = imp_type(bad); /* x's type, with `?` for any dim x does not know */
    }
    imp_out(imp, 0, y);
    if (!imp_wants_out(imp, 1)) return true;
    /* the mask depends on Y, so it is not produced when Y fails */
    return imp_set_out(imp, 1, imp_call1(imp, "ones_like", imp_cast(imp, y, RLY_DTYPE_BOOL), NULL));
}

static bool instance_norm_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input"), *scale = imp_in_req(imp, 1, "scale"),
         *b = imp_in_req(imp, 2, "B");
    if (!x || !scale || !b) return false;
    Expr *args[3] = {x, scale, b};
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", 1);
    ia_float(imp, &a, "epsilon", imp_attr_float(imp, "epsilon", 1e-5));
    Expr *y = imp_call(imp, "nn.instance_norm", 3, args, &a);
    imp_out(imp, 0, y);
    return y != NULL;
}

/* GroupNormalization-18/21: normalize X (N, C, ...) over each of num_groups groups of C /
 * num_groups channels and the spatial axes, then scale and shift per channel (opset 21; in
 * opset 18 scale and bias hold one value per group, repeated over its channels here). The
 * statistics are computed in float32 when stash_type is 1 (the default) as the reference does.
 * nn.group_norm. */
static bool group_norm_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *scale = imp_in_req(imp, 1, "scale"),
         *b = imp_in_req(imp, 2, "bias");
    if (!x || !scale || !b) return false;
    int64_t g = imp_attr_int(imp, "num_groups", 0);
    TensorType *xt = imp_tt(x);
    if (g < 1) return imp_error(imp, "num_groups must be positive, got %lld", (long long)g);
    if (xt->ndim < 2) return imp_error(imp, "X must have rank >= 2, got %u", xt->ndim);
    int64_t c = xt->shape[1];
    if (imp_rank(scale) != 1 || imp_rank(b) != 1)
        return imp_error(imp, "scale and bias must be 1-D");
    if (imp_opset(imp) < 21) { /* one value per group: repeat each C / G times */
        if (c < 0) return imp_error(imp, "GroupNormalization-18 needs X's channel count");
        if (c % g != 0)
            return imp_error(imp, "%lld channels cannot be split into %lld groups", (long long)c,
                             (long long)g);
        ImpAttrs rp = {0};
        ia_int(imp, &rp, "repeats", c / g);
        ia_int(imp, &rp, "axis", 0);
        scale = imp_call1(imp, "repeat", scale, &rp);
        b = imp_call1(imp, "repeat", b, &rp);
    }
    /* An empty X is its own result. (nn.group_norm on a zero-sized dim trips SimplifyInference:
     * "built an ill-typed reshape"; reported, src/passes is not this converter's.) */
    for (uint32_t i = 0; i < xt->ndim; i++)
        if (xt->shape[i] == 0) return imp_set_out(imp, 0, x);
    rly_dtype dt = imp_dtype(x);
    bool stash =
        imp_attr_int(imp, "stash_type", 1) == 1 && dt != RLY_DTYPE_F32 && dt != RLY_DTYPE_F64;
    rly_dtype work = stash ? RLY_DTYPE_F32 : dt;
    Expr *args[3] = {imp_cast(imp, x, work), imp_cast(imp, scale, work), imp_cast(imp, b, work)};
    if (!args[0] || !args[1] || !args[2]) return false;
    ImpAttrs a = {0};
    ia_int(imp, &a, "num_groups", g);
    ia_int(imp, &a, "axis", 1);
    ia_float(imp, &a, "epsilon", imp_attr_float(imp, "epsilon", 1e-5));
    Expr *y = imp_call(imp, "nn.group_norm", 3, args, &a);
    return imp_set_out(imp, 0, imp_cast(imp, y, dt));
}

/* LayerNormalization-17: normalize over axes [axis, rank) in the stash type (float32 when
 * stash_type is 1), then scale and shift in X's type. nn.layer_norm covers the common form (the
 * last axis, 1-D Scale and B, no Mean/InvStdDev outputs); anything else is composed. */
static bool layer_norm_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *scale = imp_in_req(imp, 1, "Scale"), *b = imp_in(imp, 2);
    if (!x || !scale) return false;
    uint32_t r = imp_rank(x);
    int64_t axis = imp_attr_int(imp, "axis", -1);
    if (axis < -(int64_t)r || axis >= (int64_t)r)
        return imp_error(imp, "axis %lld is out of range for rank %u", (long long)axis, r);
    if (axis < 0) axis += r;
    double eps = imp_attr_float(imp, "epsilon", 1e-5);
    int64_t stash = imp_attr_int(imp, "stash_type", 1);
    rly_dtype dt = imp_dtype(x);
    TensorType *xt = imp_tt(x), *st = imp_tt(scale), *bt = b ? imp_tt(b) : NULL;
    bool simple = axis == (int64_t)r - 1 && st->ndim == 1 && (!bt || bt->ndim == 1) &&
                  !imp_wants_out(imp, 1) && !imp_wants_out(imp, 2) && imp_dtype(scale) == dt &&
                  (!b || imp_dtype(b) == dt) && (stash != 1 || dt == RLY_DTYPE_F32) &&
                  st->shape[0] == xt->shape[r - 1] && xt->shape[r - 1] >= 0 &&
                  (!bt || bt->shape[0] == st->shape[0]);
    if (simple) {
        Expr *args[3] = {x, scale, b ? b : scale};
        ImpAttrs a = {0};
        ia_int(imp, &a, "axis", -1);
        ia_float(imp, &a, "epsilon", eps);
        ia_bool(imp, &a, "center", b != NULL);
        Expr *y = imp_call(imp, "nn.layer_norm", 3, args, &a);
        imp_out(imp, 0, y);
        return y != NULL;
    }
    int64_t axes[64];
    if (r - axis > 64) return imp_error(imp, "rank %u is too large", r);
    uint32_t n = 0;
    for (int64_t i = axis; i < (int64_t)r; i++)
        axes[n++] = i;
    Expr *xs = stash == 1 ? imp_cast(imp, x, RLY_DTYPE_F32) : x;
    Expr *mean = reduce(imp, "mean", xs, n, axes, true);
    Expr *d = sub(imp, xs, mean);
    Expr *var = reduce(imp, "mean", mul(imp, d, d), n, axes, true);
    Expr *inv = imp_call1(imp, "rsqrt", add(imp, var, scalar_of(imp, var, eps)), NULL);
    Expr *y = mul(imp, imp_cast(imp, mul(imp, d, inv), dt), imp_cast(imp, scale, dt));
    if (b) y = add(imp, y, imp_cast(imp, b, dt));
    if (!y) return false;
    imp_out(imp, 0, y);
    imp_out(imp, 1, mean);
    imp_out(imp, 2, inv);
    return true;
}

/* LRN: y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2])^beta.
 * nn.lrn's window starts at c - size/2, which is ONNX's for odd sizes; an even size is composed:
 * the channel sums are an average pool over (channels, 1) of x^2 laid out as (N, 1, C, rest). */
static bool lrn_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X");
    if (!x) return false;
    int64_t size = imp_attr_int(imp, "size", 0);
    if (size < 1)
        return imp_error(imp, "attribute 'size' must be positive, got %lld", (long long)size);
    double alpha = imp_attr_float(imp, "alpha", 1e-4), beta = imp_attr_float(imp, "beta", 0.75),
           bias = imp_attr_float(imp, "bias", 1.0);
    if (imp_rank(x) < 2) return imp_error(imp, "X must have rank 2 or more");
    Expr *y;
    if (size % 2 == 1) {
        ImpAttrs a = {0};
        ia_int(imp, &a, "size", size);
        ia_int(imp, &a, "axis", 1);
        ia_float(imp, &a, "bias", bias);
        ia_float(imp, &a, "alpha", alpha);
        ia_float(imp, &a, "beta", beta);
        y = imp_call1(imp, "nn.lrn", x, &a);
    } else {
        int64_t c = imp_tt(x)->shape[1];
        if (c < 0) return imp_error(imp, "an even size needs a static channel count");
        int64_t shape4[4] = {0, 1, c, -1};
        Expr *sq = reshape(imp, mul(imp, x, x), 4, shape4);
        int64_t ps[2] = {size, 1}, pads[4] = {(size - 1) / 2, 0, size / 2, 0};
        ImpAttrs a = {0};
        ia_ints(imp, &a, "pool_size", 2, ps);
        ia_ints(imp, &a, "padding", 4, pads);
        ia_bool(imp, &a, "count_include_pad", true);
        Expr *avg = imp_call1(imp, "nn.avg_pool2d", sq, &a);
        avg = imp_call2(imp, "reshape_like", avg, x, NULL);
        Expr *den = add(imp, scalar_of(imp, x, bias), mul(imp, avg, scalar_of(imp, x, alpha)));
        y = div_(imp, x, imp_call2(imp, "power", den, scalar_of(imp, x, beta), NULL));
    }
    imp_out(imp, 0, y);
    return y != NULL;
}

/* MeanVarianceNormalization-9/13, its function body: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9)
 * over axes (default 0, 2, 3). */
static bool mvn_common(Imp *imp, uint32_t n, const int64_t *axes, bool normalize_variance) {
    Expr *x = imp_in_req(imp, 0, "X");
    if (!x) return false;
    uint32_t r = imp_rank(x);
    int64_t ax[64];
    if (n > 64) return imp_error(imp, "too many axes");
    for (uint32_t i = 0; i < n; i++) {
        ax[i] = axes[i] < 0 ? axes[i] + r : axes[i];
        if (ax[i] < 0 || ax[i] >= (int64_t)r)
            return imp_error(imp, "axis %lld is out of range for rank %u", (long long)axes[i], r);
    }
    Expr *mean = reduce(imp, "mean", x, n, ax, true);
    Expr *y = sub(imp, x, mean);
    if (normalize_variance) {
        Expr *ex2 = reduce(imp, "mean", mul(imp, x, x), n, ax, true);
        Expr *std = imp_call1(imp, "sqrt", sub(imp, ex2, mul(imp, mean, mean)), NULL);
        y = div_(imp, y, add(imp, std, scalar_of(imp, x, 1e-9)));
    }
    imp_out(imp, 0, y);
    return y != NULL;
}

static bool mvn_convert(Imp *imp) {
    static const int64_t dflt[3] = {0, 2, 3};
    const int64_t *axes;
    uint32_t n = imp_attr_ints(imp, "axes", &axes);
    if (imp_attr(imp, "axes") == NULL) {
        axes = dflt;
        n = 3;
    }
    return mvn_common(imp, n, axes, true);
}

/* MeanVarianceNormalization-1: across_channels (N, C, H, W together), normalize_variance. */
static bool mvn1_convert(Imp *imp) {
    static const int64_t per_channel[3] = {0, 2, 3}, across[4] = {0, 1, 2, 3};
    bool ac = imp_attr_int(imp, "across_channels", 0) != 0;
    return mvn_common(imp, ac ? 4 : 3, ac ? across : per_channel,
                      imp_attr_int(imp, "normalize_variance", 1) != 0);
}

/* LpNormalization: x / (sum |x|^p along axis)^(1/p), p 1 or 2. */
static bool lp_norm_convert(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input");
    if (!x) return false;
    int64_t p = imp_attr_int(imp, "p", 2);
    if (p != 1 && p != 2) return imp_error(imp, "p must be 1 or 2, got %lld", (long long)p);
    uint32_t r = imp_rank(x);
    int64_t axis = imp_attr_int(imp, "axis", -1);
    if (axis < -(int64_t)r || axis >= (int64_t)r)
        return imp_error(imp, "axis %lld is out of range for rank %u", (long long)axis, r);
    if (axis < 0) axis += r;
    Expr *norm =
        root(imp, reduce(imp, "sum", abs_pow(imp, x, (double)p), 1, &axis, true), (double)p);
    Expr *y = div_(imp, x, norm);
    imp_out(imp, 0, y);
    return y != NULL;
}

/* ---- Gemm, MatMul --------------------------------------------------------------------------- */

/* Y = alpha * A' B' + beta * C (C broadcast to Y). */
static bool gemm_convert(Imp *imp) {
    Expr *a = imp_in_req(imp, 0, "A"), *b = imp_in_req(imp, 1, "B"), *c = imp_in(imp, 2);
    if (!a || !b) return false;
    if (imp_rank(a) != 2 || imp_rank(b) != 2)
        return imp_error(imp, "A and B must be 2-D, got ranks %u and %u", imp_rank(a), imp_rank(b));
    bool ta = imp_attr_int(imp, "transA", 0) != 0, tb = imp_attr_int(imp, "transB", 0) != 0;
    double alpha = imp_attr_float(imp, "alpha", 1.0), beta = imp_attr_float(imp, "beta", 1.0);
    Expr *y;
    if (!ta && tb) {
        y = imp_call2(imp, "nn.dense", a, b, NULL);
    } else {
        ImpAttrs at = {0};
        ia_bool(imp, &at, "transpose_a", ta);
        ia_bool(imp, &at, "transpose_b", tb);
        y = imp_call2(imp, "nn.matmul", a, b, &at);
    }
    if (alpha != 1.0) y = mul(imp, y, scalar_of(imp, y, alpha));
    if (c && beta != 0.0) {
        c = imp_cast(imp, c, imp_dtype(a));
        if (beta != 1.0) c = mul(imp, c, scalar_of(imp, c, beta));
        y = add(imp, y, c);
    }
    imp_out(imp, 0, y);
    return y != NULL;
}

/* x of rank >= 2 as 3-D (batch, rows, cols): a leading 1 for a matrix, leading axes merged. */
static Expr *to_3d(Imp *imp, Expr *x) {
    if (!x) return NULL;
    uint32_t r = imp_rank(x);
    if (r == 2) return expand_dims(imp, x, 0);
    while (x && r > 3) {
        int64_t ns[64];
        ns[0] = -3; /* merge the first two axes */
        for (uint32_t i = 1; i < r - 1; i++)
            ns[i] = 0;
        x = reshape(imp, x, r - 1, ns);
        r--;
    }
    return x;
}

/* numpy matmul with B of rank >= 3: batch axes broadcast, flattened for nn.batch_matmul (which
 * broadcasts a batch of 1), and restored from the operand that carries the full batch shape. */
static Expr *batched_matmul(Imp *imp, Expr *a, Expr *b) {
    bool a_vec = imp_rank(a) == 1;
    if (a_vec) a = expand_dims(imp, a, 0);
    if (!a) return NULL;
    TensorType *ta = imp_tt(a), *tb = imp_tt(b);
    uint32_t na = ta->ndim - 2, nb = tb->ndim - 2, n = na > nb ? na : nb;
    if (n > 60) {
        imp_error(imp, "rank %u is too large", n + 2);
        return NULL;
    }
    int64_t bs[64];
    bool a_full = na == n, b_full = nb == n, a_ones = true, b_ones = true, known = true;
    for (uint32_t i = 0; i < n; i++) {
        int64_t da = i >= n - na ? ta->shape[i - (n - na)] : 1;
        int64_t db = i >= n - nb ? tb->shape[i - (n - nb)] : 1;
        if (da != 1) a_ones = false;
        if (db != 1) b_ones = false;
        if (da == db)
            bs[i] = da;
        else if (da == 1)
            bs[i] = db;
        else if (db == 1)
            bs[i] = da;
        else if (da < 0 && db >= 0)
            bs[i] = db; /* assumed equal; a 1 at run time makes the batch sizes disagree */
        else if (db < 0 && da >= 0)
            bs[i] = da;
        else if (da < 0 && db < 0)
            bs[i] = -1;
        else {
            imp_error(imp, "batch dims %lld and %lld are not broadcastable", (long long)da,
                      (long long)db);
            return NULL;
        }
        if (bs[i] < 0) known = false;
        if (i >= n - na && !(da == bs[i] || da < 0)) a_full = false;
        if (i >= n - nb && !(db == bs[i] || db < 0)) b_full = false;
    }
    Expr *ops[2] = {a, b};
    bool full[2] = {a_full, b_full}, ones[2] = {a_ones, b_ones};
    for (int j = 0; j < 2; j++) {
        if (full[j] || ones[j]) continue;
        TensorType *t = imp_tt(ops[j]);
        int64_t shape[64];
        memcpy(shape, bs, n * sizeof(int64_t));
        shape[n] = t->shape[t->ndim - 2];
        shape[n + 1] = t->shape[t->ndim - 1];
        if (!known || shape[n] < 0 || shape[n + 1] < 0) {
            imp_error(imp, "broadcasting the batch axes of %s needs static shapes", j ? "B" : "A");
            return NULL;
        }
        ImpAttrs at = {0};
        ia_ints(imp, &at, "shape", n + 2, shape);
        ops[j] = imp_call1(imp, "broadcast_to", ops[j], &at);
        full[j] = true;
    }
    Expr *y = imp_call2(imp, "nn.batch_matmul", to_3d(imp, ops[0]), to_3d(imp, ops[1]), NULL);
    if (y && n > 1) {
        Expr *ref = full[0] ? ops[0] : ops[1];
        ImpAttrs at = {0};
        ia_int(imp, &at, "lhs_begin", 0);
        ia_int(imp, &at, "lhs_end", 1);
        ia_int(imp, &at, "rhs_begin", 0);
        ia_int(imp, &at, "rhs_end", n);
        y = imp_call2(imp, "reshape_like", y, ref, &at);
    }
    return a_vec ? squeeze(imp, y, -2) : y;
}

static bool matmul_convert(Imp *imp) {
    Expr *a = imp_in_req(imp, 0, "A"), *b = imp_in_req(imp, 1, "B");
    if (!a || !b) return false;
    uint32_t ra = imp_rank(a), rb = imp_rank(b);
    if (ra == 0 || rb == 0)
        return imp_error(imp, "A and B must have rank 1 or more, got ranks %u and %u", ra, rb);
    Expr *y;
    if (rb <= 2) {
        /* nn.matmul takes A of any rank against a matrix; a vector B is a one-column matrix */
        y = imp_call2(imp, "nn.matmul", a, rb == 1 ? expand_dims(imp, b, 1) : b, NULL);
        if (rb == 1) y = squeeze(imp, y, -1);
    } else {
        y = batched_matmul(imp, a, b);
    }
    imp_out(imp, 0, y);
    return y != NULL;
}

/* ---- the table ------------------------------------------------------------------------------- */

const ImpConv imp_conv_nn[] = {
    {"Conv", "", 1, conv_convert},
    {"Conv", "", 11, conv_convert},
    {"ConvTranspose", "", 1, conv_transpose_convert},
    {"ConvTranspose", "", 11, conv_transpose_convert},
    {"AveragePool", "", 1, avg_pool_convert},
    {"AveragePool", "", 7, avg_pool_convert},  /* count_include_pad */
    {"AveragePool", "", 10, avg_pool_convert}, /* ceil_mode */
    {"AveragePool", "", 11, avg_pool_convert},
    {"MaxPool", "", 1, max_pool_convert},
    {"MaxPool", "", 8, max_pool_convert},  /* Indices, storage_order */
    {"MaxPool", "", 10, max_pool_convert}, /* ceil_mode, dilations */
    {"MaxPool", "", 11, max_pool_convert},
    {"MaxPool", "", 12, max_pool_convert}, /* int8, uint8 */
    {"LpPool", "", 1, lp_pool_convert},    /* p a float */
    {"LpPool", "", 2, lp_pool_convert},    /* p an int */
    {"LpPool", "", 11, lp_pool_convert},
    {"LpPool", "", 18, lp_pool_convert}, /* ceil_mode, dilations */
    {"GlobalAveragePool", "", 1, global_avg_pool_convert},
    {"GlobalMaxPool", "", 1, global_max_pool_convert},
    {"GlobalLpPool", "", 1, global_lp_pool_convert},
    {"GlobalLpPool", "", 2, global_lp_pool_convert},
    {"MaxUnpool", "", 9, max_unpool_convert},
    {"MaxUnpool", "", 11, max_unpool_convert},
    {"BatchNormalization", "", 1, batch_norm6_convert}, /* is_test */
    {"BatchNormalization", "", 6, batch_norm6_convert},
    {"BatchNormalization", "", 7, batch_norm_convert},  /* spatial */
    {"BatchNormalization", "", 9, batch_norm_convert},  /* spatial removed */
    {"BatchNormalization", "", 14, batch_norm_convert}, /* training_mode */
    {"BatchNormalization", "", 15, batch_norm_convert}, /* mixed dtypes */
    {"Dropout", "", 12, dropout12_convert}, /* ratio, training_mode inputs; 1/10: import_elem.c */
    {"InstanceNormalization", "", 1, instance_norm_convert},
    {"InstanceNormalization", "", 6, instance_norm_convert},
    {"LayerNormalization", "", 17, layer_norm_convert},
    {"Col2Im", "", 18, col2im_convert},
    {"DeformConv", "", 19, deform_conv_convert},
    {"GroupNormalization", "", 18, group_norm_convert}, /* scale, bias per group */
    {"GroupNormalization", "", 21, group_norm_convert}, /* per channel; stash_type */
    {"LRN", "", 1, lrn_convert},
    {"LRN", "", 13, lrn_convert},
    {"MeanVarianceNormalization", "", 1, mvn1_convert},
    {"MeanVarianceNormalization", "", 9, mvn_convert},
    {"MeanVarianceNormalization", "", 13, mvn_convert},
    {"LpNormalization", "", 1, lp_norm_convert},
    {"Gemm", "", 1, gemm_convert},
    {"Gemm", "", 6, gemm_convert},
    {"Gemm", "", 7, gemm_convert}, /* unidirectional broadcast of C */
    {"Gemm", "", 9, gemm_convert},
    {"Gemm", "", 11, gemm_convert}, /* C optional */
    {"Gemm", "", 13, gemm_convert},
    {"MatMul", "", 1, matmul_convert},
    {"MatMul", "", 9, matmul_convert},
    {"MatMul", "", 13, matmul_convert},
    {NULL, NULL, 0, NULL},
};
