/* qnn.c - reference kernels of the quantized operators (see src/ops/op_qnn.c): quantize,
 * dequantize, requantize, conv2d, dense, add, subtract, mul and concatenate.
 *
 * The arithmetic is TVM's QNN canonicalization (src/relay/qnn/op/), reproduced exactly:
 * - quantize: q = clip(round(x / scale) + zp), in float32 (float64 for f64 data), round half away
 *   from zero (TVM's round is llvm.round);
 * - dequantize: (float32)(int32(q) - zp) * scale, in float32, then the output dtype;
 * - requantize with compute_dtype int64 (the default, also used inside add, subtract, mul and
 *   concatenate): the input is cast to int32 (wrapping), the zero point subtracted in int32, and
 *   the multiplier in_scale / out_scale (in double from the float32 scales) applied as TVM's
 *   fixed-point multiply: frexp gives a 31-bit significand m (rounded half away from zero) and
 *   a shift s; v = (x << max(s, 0)) * m in int64, then v >> (31 + max(-s, 0)) after adding half of
 *   that power of two (rounding UPWARD, the default) or half minus one for negative v (TONEAREST,
 *   half away from zero); the output zero point is added in int32 and the result clipped to the
 *   output dtype. compute_dtype float32/float64 performs the same steps in that float type and
 *   rounds with floor(v + 0.5) (UPWARD) or half away from zero (TONEAREST);
 * - conv2d and dense: sum((q_x - zp_x) * (q_w - zp_w)) exactly, wrapped to out_dtype (the
 *   scales only feed a later requantize);
 * - add / subtract: each operand requantized to the output parameters (int32, UPWARD), then
 *   a + b - zp_out or a - b + zp_out in int32, clipped to the dtype; mul: (a - zp_a) * (b - zp_b)
 *   in int32 requantized from scale float32(s_a * s_b), zero point 0.
 * Int32 arithmetic wraps as TVM's generated code does. Clipping to a dtype outside TVM's list
 * (int64, uint32, uint64, bool) uses the dtype's range intersected with int32's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"

/* ---- integer helpers ------------------------------------------------------------------------- */

/* The two's-complement value of the low 32 / all 64 bits (no implementation-defined casts). */
static int32_t wrap32(int64_t v) {
    uint32_t u = (uint32_t)((uint64_t)v & 0xffffffffu);
    return (int32_t)((int64_t)(u ^ 0x80000000u) - 2147483648LL);
}
static int64_t s64(uint64_t u) {
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}
/* Arithmetic right shift by s in [0, 63]. */
static int64_t asr(int64_t v, int s) { return v < 0 ? ~(~v >> s) : v >> s; }

/* The clip range of a quantized dtype (TVM's GetQmin/GetQmax, within int32 for the others). */
static void qrange(rly_dtype dt, int64_t *lo, int64_t *hi) {
    switch (dt) {
    case RLY_DTYPE_I8: *lo = -128, *hi = 127; return;
    case RLY_DTYPE_U8: *lo = 0, *hi = 255; return;
    case RLY_DTYPE_I16: *lo = -32768, *hi = 32767; return;
    case RLY_DTYPE_U16: *lo = 0, *hi = 65535; return;
    case RLY_DTYPE_BOOL: *lo = 0, *hi = 1; return;
    case RLY_DTYPE_U32:
    case RLY_DTYPE_U64: *lo = 0, *hi = INT32_MAX; return;
    default: *lo = INT32_MIN, *hi = INT32_MAX; return;
    }
}

/* Scratch of n int64 values (at least one), released by the kernel's caller; NULL with an error
 * on failure or overflow. */
static int64_t *scratch_i64(KCall *kc, int64_t n) {
    return k_scratch_n(kc, n < 1 ? 1 : n, sizeof(int64_t));
}

static int64_t clip64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* A double (integral, possibly huge or NaN) converted to int32 saturating (NaN gives 0). */
static int32_t sat32(double v) {
    if (!(v == v)) return 0;
    if (v >= 2147483647.0) return INT32_MAX;
    if (v <= -2147483648.0) return INT32_MIN;
    return (int32_t)v;
}

/* ---- fixed-point multiplication (TVM's GetFixedPointMultiplierShift + q_multiply_shift) ----- */

typedef struct FixedPoint {
    int64_t m; /* significand in [2^30, 2^31), or 0 */
    int shift; /* power of two: multiplier = m * 2^(shift - 31) */
} FixedPoint;

static FixedPoint fixed_point(double mult) {
    FixedPoint f = {0, 0};
    if (mult == 0.0 || !isfinite(mult)) return f;
    int e;
    double sig = frexp(mult, &e);
    int64_t m = (int64_t)round(sig * 2147483648.0);
    if (m == ((int64_t)1 << 31)) m /= 2, e++;
    f.m = m, f.shift = e;
    return f;
}

/* x times the fixed-point multiplier, rounded UPWARD (half toward +inf) or TONEAREST (half away
 * from zero), as int32. A right shift of 63 or more leaves |x * multiplier| < 1/2: 0. */
static int32_t fixed_mul(int32_t x, FixedPoint f, bool upward) {
    int ls = f.shift > 0 ? f.shift : 0, rs = f.shift > 0 ? 0 : -f.shift;
    int total = rs + 31;
    if (total >= 63) return 0;
    uint64_t v = (uint64_t)(int64_t)x;
    v = ls >= 64 ? 0 : v << ls;
    v *= (uint64_t)f.m;
    int64_t round_add = (int64_t)1 << (total - 1);
    if (!upward && s64(v) < 0) round_add -= 1;
    v += (uint64_t)round_add;
    return wrap32(asr(s64(v), total));
}

/* ---- quantization parameters ------------------------------------------------------------------
 */

/* A scale or zero point argument: one value, or one per channel. */
typedef struct QParam {
    const void *p;
    rly_dtype dt;
    int64_t n;
} QParam;

static int qparam(KCall *kc, const DLTensor *t, int64_t channels, const char *what, QParam *q) {
    q->p = k_ptr(t), q->dt = k_dtype(t), q->n = k_numel(t);
    if (q->n == 1 || (t->ndim == 1 && q->n == channels)) return 0;
    return k_error(kc, "%s has %lld values but there are %lld channels", what, (long long)q->n,
                   (long long)channels);
}
static float qp_scale(const QParam *q, int64_t c) {
    return (float)k_loadf(q->p, q->dt, q->n == 1 ? 0 : c);
}
static int32_t qp_zp(const QParam *q, int64_t c) {
    return wrap32(k_loadi(q->p, q->dt, q->n == 1 ? 0 : c));
}
static bool qp_scalar(const QParam *q) { return q->n == 1; }

/* The extent of axis `axis` (TVM's normalization: negative counts from the end, rank 0 has one
 * channel) and the element stride of that axis. The axis matters only for per-channel
 * parameters (scale or zero point `a`, `b` with more than one value), as in TVM's relations:
 * otherwise there is one channel. False when a needed axis is out of range. */
static bool channel_axis(const DLTensor *t, int64_t axis, const DLTensor *a, const DLTensor *b,
                         int64_t *dim, int64_t *inner) {
    uint32_t nd = (uint32_t)t->ndim;
    if (nd == 0 || (k_numel(a) == 1 && k_numel(b) == 1)) {
        *dim = 1, *inner = 1;
        return true;
    }
    if (axis < 0) axis += nd;
    if (axis < 0 || axis >= (int64_t)nd) return false;
    *dim = t->shape[axis];
    *inner = 1;
    for (uint32_t d = (uint32_t)axis + 1; d < nd; d++)
        *inner *= t->shape[d];
    return true;
}

/* A quantized operand: the tensor, and its scale and zero point, one value or one per channel
 * of an axis. */
typedef struct QSide {
    const DLTensor *t;
    QParam sc, zp;
    int64_t dim, inner;         /* channel_axis's */
    int64_t stride[K_MAX_DIMS]; /* the binary ops': broadcast strides in the output index space */
} QSide;

/* Operand `arg` with its scale and zero point (arguments first and first + 1, called sc_name
 * and zp_name in messages) along `axis`, the value of the attribute axis_name. */
static int qside(KCall *kc, uint32_t arg, const char *axis_name, int64_t axis, uint32_t first,
                 const char *sc_name, const char *zp_name, QSide *s) {
    s->t = k_arg(kc, arg);
    if (!channel_axis(s->t, axis, k_arg(kc, first), k_arg(kc, first + 1), &s->dim, &s->inner))
        return k_error(kc, "%s %lld is out of range for rank %d", axis_name, (long long)axis,
                       s->t->ndim);
    if (qparam(kc, k_arg(kc, first), s->dim, sc_name, &s->sc) != 0 ||
        qparam(kc, k_arg(kc, first + 1), s->dim, zp_name, &s->zp) != 0)
        return -1;
    return 0;
}

/* The channel of element i of s's tensor. */
static int64_t qs_channel(const QSide *s, int64_t i) {
    return s->dim <= 1 ? 0 : (i / s->inner) % s->dim;
}

/* The output dtype attribute, or `def` for "". */
static rly_dtype out_dtype_or(const KCall *kc, rly_dtype def) {
    int64_t v = k_int(kc, "out_dtype");
    return v < 0 ? def : (rly_dtype)v;
}

/* ---- requantize (int64 fixed point, as used inside the binary ops and concatenate) ----------- */

/* q (any integer) from (s_in, zp_in) to (s_out, zp_out) as TVM's RequantizeLowerInt with out
 * dtype int32 (no clip). */
static int32_t requant_i32(int64_t q, int32_t zp_in, FixedPoint f, int32_t zp_out, bool upward) {
    int32_t t = wrap32((int64_t)wrap32(q) - zp_in);
    t = fixed_mul(t, f, upward);
    return wrap32((int64_t)t + zp_out);
}

static FixedPoint fixed_of_scales(float s_in, float s_out) {
    return fixed_point((double)s_in / (double)s_out);
}

/* ==== qnn.quantize =========================================================================== */

static int quantize(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype in_dt = k_dtype(x), out_dt = out_dtype_or(kc, RLY_DTYPE_I8);
    QSide q;
    if (qside(kc, 0, "axis", k_int(kc, "axis"), 1, "output_scale", "output_zero_point", &q) != 0)
        return -1;
    DLTensor *y = k_out(kc, 0, out_dt, (uint32_t)x->ndim, x->shape);
    if (y == NULL) return -1;
    int64_t lo, hi, n = k_numel(x);
    qrange(out_dt, &lo, &hi);
    const void *xp = k_ptr(x);
    void *yp = k_ptr(y);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = qs_channel(&q, i);
        double v;
        if (in_dt == RLY_DTYPE_F64) {
            v = round(k_loadf(xp, in_dt, i) / (double)qp_scale(&q.sc, c)) + (double)qp_zp(&q.zp, c);
        } else { /* float32 arithmetic, as TVM (f16 and bf16 widen exactly) */
            float r = roundf((float)k_loadf(xp, in_dt, i) / qp_scale(&q.sc, c));
            v = (double)(r + (float)qp_zp(&q.zp, c));
        }
        if (!(v == v)) v = 0.0;
        v = v < (double)lo ? (double)lo : v > (double)hi ? (double)hi : v;
        k_storei(yp, out_dt, i, (int64_t)v);
    }
    return 0;
}

/* ==== qnn.dequantize ========================================================================= */

static int dequantize(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype in_dt = k_dtype(x), out_dt = out_dtype_or(kc, RLY_DTYPE_F32);
    QSide q;
    if (qside(kc, 0, "axis", k_int(kc, "axis"), 1, "input_scale", "input_zero_point", &q) != 0)
        return -1;
    DLTensor *y = k_out(kc, 0, out_dt, (uint32_t)x->ndim, x->shape);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    const void *xp = k_ptr(x);
    void *yp = k_ptr(y);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = qs_channel(&q, i);
        int32_t shifted = wrap32((int64_t)wrap32(k_loadi(xp, in_dt, i)) - qp_zp(&q.zp, c));
        float v = (float)shifted * qp_scale(&q.sc, c);
        k_storef(yp, out_dt, i, (double)v);
    }
    return 0;
}

/* ==== qnn.requantize ========================================================================= */

static int requantize(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype in_dt = k_dtype(x), out_dt = out_dtype_or(kc, RLY_DTYPE_I8);
    const char *rounding = k_str(kc, "rounding"), *compute = k_str(kc, "compute_dtype");
    bool upward = strcmp(rounding, "TONEAREST") != 0; /* "None" is TVM's default, UPWARD */
    int fbits = strcmp(compute, "float32") == 0 ? 32 : strcmp(compute, "float64") == 0 ? 64 : 0;
    QSide q;
    QParam osc, ozp;
    if (qside(kc, 0, "axis", k_int(kc, "axis"), 1, "input_scale", "input_zero_point", &q) != 0 ||
        qparam(kc, k_arg(kc, 3), 1, "output_scale", &osc) != 0 ||
        qparam(kc, k_arg(kc, 4), 1, "output_zero_point", &ozp) != 0)
        return -1;
    float s_out = qp_scale(&osc, 0);
    int32_t zp_out = qp_zp(&ozp, 0);
    if (s_out == 0.0f) return k_error(kc, "output_scale must not be 0");
    DLTensor *y = k_out(kc, 0, out_dt, (uint32_t)x->ndim, x->shape);
    if (y == NULL) return -1;
    int64_t lo, hi, n = k_numel(x);
    qrange(out_dt, &lo, &hi);
    /* Per-tensor scales that are equal skip the multiplication (identical results). */
    bool skip = qp_scalar(&q.sc) && qp_scale(&q.sc, 0) == s_out;
    const void *xp = k_ptr(x);
    void *yp = k_ptr(y);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = qs_channel(&q, i);
        double mult = (double)qp_scale(&q.sc, c) / (double)s_out;
        int32_t r;
        if (fbits == 32) {
            float t = (float)k_loadi(xp, in_dt, i);
            t = t - (float)qp_zp(&q.zp, c);
            if (!skip) t = (float)mult * t;
            t = t + (float)zp_out;
            t = upward ? floorf(t + 0.5f) : roundf(t);
            r = sat32((double)t);
        } else if (fbits == 64) {
            double t = (double)k_loadi(xp, in_dt, i);
            t = t - (double)qp_zp(&q.zp, c);
            if (!skip) t = mult * t;
            t = t + (double)zp_out;
            t = upward ? floor(t + 0.5) : round(t);
            r = sat32(t);
        } else {
            int32_t t = wrap32((int64_t)wrap32(k_loadi(xp, in_dt, i)) - qp_zp(&q.zp, c));
            if (!skip) t = fixed_mul(t, fixed_point(mult), upward);
            r = wrap32((int64_t)t + zp_out);
        }
        k_storei(yp, out_dt, i, clip64(r, lo, hi));
    }
    return 0;
}

/* ==== qnn.conv2d ============================================================================= */

/* The largest stride, dilation or padding the relations accept (as src/ops/op_conv_pool.c). */
#define ATTR_LIMIT (((int64_t)1 << 31) - 1)

/* An int list attribute of 1 or 2 values as a pair, each in [1, ATTR_LIMIT]. */
static int int_pair(KCall *kc, const char *name, int64_t out[2]) {
    const int64_t *v;
    uint32_t n = k_ints(kc, name, &v);
    if (n != 1 && n != 2) return k_error(kc, "%s must have 1 or 2 values", name);
    out[0] = v[0], out[1] = v[n - 1];
    if (out[0] < 1 || out[1] < 1 || out[0] > ATTR_LIMIT || out[1] > ATTR_LIMIT)
        return k_error(kc, "%s values must be in [1, 2^31 - 1]", name);
    return 0;
}

static int qnn_conv2d(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *w = k_arg(kc, 1);
    if (x->ndim != 4 || w->ndim != 4) return k_error(kc, "data and weight must be 4-D");
    KLayout dl, kl, ol;
    int xa[4], wa[4], ya[4]; /* the N, C, H, W axes of data and result; O, I, H, W of weight */
    if (k_layout_attr(kc, "data_layout", 4, &dl) != 0 || k_layout_axes(kc, &dl, "NCHW", xa) != 0 ||
        k_layout_attr(kc, "kernel_layout", 4, &kl) != 0 || k_layout_axes(kc, &kl, "OIHW", wa) != 0)
        return -1;
    if (k_str(kc, "out_layout")[0] == '\0')
        ol = dl;
    else if (k_layout_attr(kc, "out_layout", 4, &ol) != 0)
        return -1;
    if (k_layout_axes(kc, &ol, "NCHW", ya) != 0) return -1;
    int xn = xa[0], xc = xa[1], xh = xa[2], xw = xa[3];
    int wo = wa[0], wi = wa[1], wh = wa[2], ww = wa[3];
    int yn = ya[0], yc = ya[1], yh = ya[2], yw = ya[3];
    int64_t n = x->shape[xn], c = x->shape[xc], h = x->shape[xh], wd = x->shape[xw];
    int64_t ko = w->shape[wo], ki = w->shape[wi], kh = w->shape[wh], kw = w->shape[ww];
    int64_t st[2] = {1, 1}, di[2] = {1, 1}, pad[4], groups = k_int(kc, "groups");
    if (int_pair(kc, "strides", st) != 0 || int_pair(kc, "dilation", di) != 0) return -1;
    const int64_t *pv;
    uint32_t n_pad = k_ints(kc, "padding", &pv);
    if (n_pad != 1 && n_pad != 2 && n_pad != 4)
        return k_error(kc, "padding needs 1, 2 or 4 values");
    for (int i = 0; i < 4; i++) {
        pad[i] = n_pad == 1 ? pv[0] : n_pad == 2 ? pv[i % 2] : pv[i];
        if (pad[i] < 0 || pad[i] > ATTR_LIMIT)
            return k_error(kc, "padding values must be in [0, 2^31 - 1]");
    }
    if (groups < 1) return k_error(kc, "groups must be positive");
    bool depthwise = strcmp(kl.text, "HWOI") == 0 && groups > 1 && c == groups && ko == groups;
    int64_t out_c = depthwise ? c * ki : ko;
    if (!depthwise && (c % groups != 0 || ko % groups != 0 || ki != c / groups))
        return k_error(kc,
                       "channels (%lld in, %lld out, %lld per group in the weight) do not "
                       "fit groups=%lld",
                       (long long)c, (long long)ko, (long long)ki, (long long)groups);
    /* the dilated window (kh - 1) * di + 1, a size unless the kernel is empty (kh = 0: 1 - di) */
    int64_t win_h = 1 - di[0], win_w = 1 - di[1];
    if ((kh > 0 && (!sup_dim_mul(kh - 1, di[0], &win_h) || !sup_dim_add(win_h, 1, &win_h))) ||
        (kw > 0 && (!sup_dim_mul(kw - 1, di[1], &win_w) || !sup_dim_add(win_w, 1, &win_w))))
        return k_error(kc, "the dilated kernel is too large (over 2^62)");
    int64_t oh = (h + pad[0] + pad[2] - win_h) / st[0] + 1;
    int64_t ow = (wd + pad[1] + pad[3] - win_w) / st[1] + 1;
    if (oh < 0 || ow < 0) return k_error(kc, "the kernel is larger than the padded input");
    QParam izp, kzp;
    if (qparam(kc, k_arg(kc, 2), 1, "input_zero_point", &izp) != 0 ||
        qparam(kc, k_arg(kc, 3), out_c, "kernel_zero_point", &kzp) != 0)
        return -1;
    rly_dtype out_dt = out_dtype_or(kc, RLY_DTYPE_I32), x_dt = k_dtype(x), w_dt = k_dtype(w);
    int64_t shape[4];
    shape[yn] = n, shape[yc] = out_c, shape[yh] = oh, shape[yw] = ow;
    DLTensor *y = k_out(kc, 0, out_dt, 4, shape);
    if (y == NULL || k_numel(y) == 0) return y == NULL ? -1 : 0; /* dims may be huge */
    int64_t xs[4], ws[4], ys[4];
    k_strides(4, x->shape, xs);
    k_strides(4, w->shape, ws);
    k_strides(4, shape, ys);
    int64_t zx = qp_zp(&izp, 0), cin_g = depthwise ? 1 : c / groups;
    int64_t cout_g = depthwise ? ki : out_c / groups;
    const void *xp = k_ptr(x), *wp = k_ptr(w);
    void *yp = k_ptr(y);
    /* The operands minus their zero points, in NCHW and (out_c, cin_g, kh, kw) order. */
    /* (as 64-bit patterns: the subtraction wraps like the products after it) */
    uint64_t *xb = (uint64_t *)scratch_i64(kc, n * c * h * wd);
    uint64_t *wb = (uint64_t *)scratch_i64(kc, out_c * cin_g * kh * kw);
    if (xb == NULL || wb == NULL) return -1;
    int64_t at = 0;
    for (int64_t b = 0; b < n; b++)
        for (int64_t ic = 0; ic < c; ic++)
            for (int64_t iy = 0; iy < h; iy++)
                for (int64_t ix = 0; ix < wd; ix++)
                    xb[at++] = (uint64_t)k_loadi(
                                   xp, x_dt, b * xs[xn] + ic * xs[xc] + iy * xs[xh] + ix * xs[xw]) -
                               (uint64_t)zx;
    at = 0;
    for (int64_t oc = 0; oc < out_c; oc++)
        for (int64_t icg = 0; icg < cin_g; icg++)
            for (int64_t ry = 0; ry < kh; ry++)
                for (int64_t rx = 0; rx < kw; rx++) {
                    /* depthwise HWOI: O holds the input channel, I the multiplier */
                    int64_t wat = depthwise ? (oc / ki) * ws[wo] + (oc % ki) * ws[wi]
                                            : oc * ws[wo] + icg * ws[wi];
                    wb[at++] = (uint64_t)k_loadi(wp, w_dt, wat + ry * ws[wh] + rx * ws[ww]) -
                               (uint64_t)(int64_t)qp_zp(&kzp, oc);
                }
    for (int64_t b = 0; b < n; b++)
        for (int64_t oc = 0; oc < out_c; oc++) {
            int64_t g = oc / cout_g;
            const uint64_t *wo_p = wb + oc * cin_g * kh * kw;
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    uint64_t acc = 0; /* wraps as the out_dtype accumulation does */
                    for (int64_t icg = 0; icg < cin_g; icg++) {
                        const uint64_t *xc_p = xb + (b * c + g * cin_g + icg) * h * wd;
                        const uint64_t *wc_p = wo_p + icg * kh * kw;
                        for (int64_t ry = 0; ry < kh; ry++) {
                            int64_t iy = oy * st[0] + ry * di[0] - pad[0];
                            if (iy < 0 || iy >= h) continue; /* padding holds the zero point */
                            for (int64_t rx = 0; rx < kw; rx++) {
                                int64_t ix = ox * st[1] + rx * di[1] - pad[1];
                                if (ix < 0 || ix >= wd) continue;
                                acc += xc_p[iy * wd + ix] * wc_p[ry * kw + rx];
                            }
                        }
                    }
                    k_storeu(yp, out_dt, b * ys[yn] + oc * ys[yc] + oy * ys[yh] + ox * ys[yw], acc);
                }
        }
    return 0;
}

/* ==== qnn.dense ============================================================================== */

static int qnn_dense(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *w = k_arg(kc, 1);
    if (x->ndim < 1 || w->ndim != 2)
        return k_error(kc, "dense needs data of rank >= 1 and 2-D weight");
    uint32_t nd = (uint32_t)x->ndim;
    int64_t k = x->shape[nd - 1], units = w->shape[0];
    if (w->shape[1] != k)
        return k_error(kc, "data has %lld features but weight expects %lld", (long long)k,
                       (long long)w->shape[1]);
    QParam izp, kzp;
    if (qparam(kc, k_arg(kc, 2), 1, "input_zero_point", &izp) != 0 ||
        qparam(kc, k_arg(kc, 3), units, "kernel_zero_point", &kzp) != 0)
        return -1;
    rly_dtype out_dt = out_dtype_or(kc, RLY_DTYPE_I32), x_dt = k_dtype(x), w_dt = k_dtype(w);
    int64_t shape[K_MAX_DIMS];
    memcpy(shape, x->shape, nd * sizeof(int64_t));
    shape[nd - 1] = units;
    DLTensor *y = k_out(kc, 0, out_dt, nd, shape);
    if (y == NULL || k_numel(y) == 0) return y == NULL ? -1 : 0; /* dims may be huge */
    int64_t rows = k > 0 ? k_numel(x) / k : k_shape_numel(nd - 1, x->shape), zx = qp_zp(&izp, 0);
    const void *xp = k_ptr(x), *wp = k_ptr(w);
    void *yp = k_ptr(y);
    /* The weight minus its zero points, and one data row minus the input zero point. */
    /* (as 64-bit patterns: the subtraction wraps like the products after it) */
    uint64_t *wb = (uint64_t *)scratch_i64(kc, units * k), *xr = (uint64_t *)scratch_i64(kc, k);
    if (wb == NULL || xr == NULL) return -1;
    for (int64_t u = 0; u < units; u++)
        for (int64_t j = 0; j < k; j++)
            wb[u * k + j] =
                (uint64_t)k_loadi(wp, w_dt, u * k + j) - (uint64_t)(int64_t)qp_zp(&kzp, u);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < k; j++)
            xr[j] = (uint64_t)k_loadi(xp, x_dt, r * k + j) - (uint64_t)zx;
        for (int64_t u = 0; u < units; u++) {
            uint64_t acc = 0; /* wraps as the out_dtype accumulation does */
            for (int64_t j = 0; j < k; j++)
                acc += xr[j] * wb[u * k + j];
            k_storeu(yp, out_dt, r * units + u, acc);
        }
    }
    return 0;
}

/* ==== qnn.add / subtract / mul =============================================================== */

enum { QB_ADD, QB_SUB, QB_MUL };

/* Operand arg of a binary op with its scale and zero point (arguments first, first + 1) along
 * the attribute axis_name (axis 0 for rank <= 1). */
static int qbin_side(KCall *kc, uint32_t arg, uint32_t first, const char *axis_name, QSide *s) {
    int64_t axis = k_arg(kc, arg)->ndim <= 1 ? 0 : k_int(kc, axis_name);
    return qside(kc, arg, axis_name, axis, first, "scale", "zero point", s);
}

static int qnn_binary(KCall *kc, int op) {
    QSide a, b;
    if (qbin_side(kc, 0, 2, "lhs_axis", &a) != 0 || qbin_side(kc, 1, 4, "rhs_axis", &b) != 0)
        return -1;
    QParam osc, ozp;
    if (qparam(kc, k_arg(kc, 6), 1, "output_scale", &osc) != 0 ||
        qparam(kc, k_arg(kc, 7), 1, "output_zero_point", &ozp) != 0)
        return -1;
    float s_out = qp_scale(&osc, 0);
    int32_t zp_out = qp_zp(&ozp, 0);
    if (s_out == 0.0f) return k_error(kc, "output_scale must not be 0");
    rly_dtype dt = k_dtype(a.t);
    if (k_dtype(b.t) != dt) return k_error(kc, "lhs and rhs dtypes differ");
    uint32_t nd;
    int64_t shape[K_MAX_DIMS];
    if (!k_bcast_shape(a.t, b.t, &nd, shape)) return k_error(kc, "shapes are not broadcastable");
    DLTensor *y = k_out(kc, 0, dt, nd, shape);
    if (y == NULL) return -1;
    k_bcast_strides(a.t, nd, shape, a.stride);
    k_bcast_strides(b.t, nd, shape, b.stride);
    int64_t lo, hi, n = k_numel(y), idx[K_MAX_DIMS] = {0};
    qrange(dt, &lo, &hi);
    const void *ap = k_ptr(a.t), *bp = k_ptr(b.t);
    void *yp = k_ptr(y);
    for (int64_t i = 0; i < n; i++, k_next(idx, nd, shape)) {
        int64_t ia = 0, ib = 0;
        for (uint32_t d = 0; d < nd; d++)
            ia += idx[d] * a.stride[d], ib += idx[d] * b.stride[d];
        int64_t ca = qs_channel(&a, ia), cb = qs_channel(&b, ib);
        int64_t va = k_loadi(ap, dt, ia), vb = k_loadi(bp, dt, ib);
        int32_t r;
        if (op == QB_MUL) {
            int32_t la = wrap32((int64_t)wrap32(va) - qp_zp(&a.zp, ca));
            int32_t lb = wrap32((int64_t)wrap32(vb) - qp_zp(&b.zp, cb));
            int32_t prod = wrap32((int64_t)la * (int64_t)lb);
            float s_new = qp_scale(&a.sc, ca) * qp_scale(&b.sc, cb);
            r = requant_i32(prod, 0, fixed_of_scales(s_new, s_out), zp_out, true);
        } else {
            int32_t qa = requant_i32(va, qp_zp(&a.zp, ca),
                                     fixed_of_scales(qp_scale(&a.sc, ca), s_out), zp_out, true);
            int32_t qb = requant_i32(vb, qp_zp(&b.zp, cb),
                                     fixed_of_scales(qp_scale(&b.sc, cb), s_out), zp_out, true);
            r = op == QB_ADD ? wrap32((int64_t)wrap32((int64_t)qa + qb) - zp_out)
                             : wrap32((int64_t)wrap32((int64_t)qa - qb) + zp_out);
        }
        k_storei(yp, dt, i, clip64(r, lo, hi));
    }
    return 0;
}

static int qnn_add(KCall *kc) { return qnn_binary(kc, QB_ADD); }
static int qnn_subtract(KCall *kc) { return qnn_binary(kc, QB_SUB); }
static int qnn_mul(KCall *kc) { return qnn_binary(kc, QB_MUL); }

/* ==== qnn.concatenate ======================================================================== */

/* Each input whose (scalar) scale and zero point equal the output's is copied; the others are
 * requantized (int64, UPWARD) to the output parameters and clipped to the dtype. */
static int qnn_concatenate(KCall *kc) {
    uint32_t n_in = kc->arg_len[0];
    if (n_in == 0 || kc->arg_len[1] != n_in || kc->arg_len[2] != n_in)
        return k_error(kc, "data, input_scales and input_zero_points must have as many entries");
    const DLTensor *t0 = k_field(kc, 0, 0);
    uint32_t nd = (uint32_t)t0->ndim;
    int64_t axis;
    if (!k_axis(k_int(kc, "axis"), nd, &axis)) return k_error(kc, "axis is out of range");
    QParam osc, ozp;
    if (qparam(kc, k_arg(kc, 3), 1, "output_scale", &osc) != 0 ||
        qparam(kc, k_arg(kc, 4), 1, "output_zero_point", &ozp) != 0)
        return -1;
    float s_out = qp_scale(&osc, 0);
    int32_t zp_out = qp_zp(&ozp, 0);
    if (s_out == 0.0f) return k_error(kc, "output_scale must not be 0");
    rly_dtype dt = k_dtype(t0);
    int64_t shape[K_MAX_DIMS];
    memcpy(shape, t0->shape, nd * sizeof(int64_t));
    shape[axis] = 0;
    for (uint32_t j = 0; j < n_in; j++) {
        const DLTensor *t = k_field(kc, 0, j);
        if ((uint32_t)t->ndim != nd || k_dtype(t) != dt)
            return k_error(kc, "input %u differs in rank or dtype from input 0", j);
        for (uint32_t d = 0; d < nd; d++)
            if ((int64_t)d != axis && t->shape[d] != t0->shape[d])
                return k_error(kc, "input %u differs from input 0 on dimension %u", j, d);
        if (!sup_dim_add(shape[axis], t->shape[axis], &shape[axis]))
            return k_error(kc, "the joined axis is too large (over 2^62)");
    }
    DLTensor *y = k_out(kc, 0, dt, nd, shape);
    if (y == NULL || k_numel(y) == 0) return y == NULL ? -1 : 0; /* dims may be huge */
    int64_t outer = k_shape_numel((uint32_t)axis, shape), inner = 1;
    for (uint32_t d = (uint32_t)axis + 1; d < nd; d++)
        inner *= shape[d];
    int64_t lo, hi, at = 0; /* offset along the axis */
    qrange(dt, &lo, &hi);
    void *yp = k_ptr(y);
    for (uint32_t j = 0; j < n_in; j++) {
        const DLTensor *t = k_field(kc, 0, j);
        QParam sc, zp;
        if (qparam(kc, k_field(kc, 1, j), 1, "input scale", &sc) != 0 ||
            qparam(kc, k_field(kc, 2, j), 1, "input zero point", &zp) != 0)
            return -1;
        bool same = qp_scale(&sc, 0) == s_out && qp_zp(&zp, 0) == zp_out;
        FixedPoint f = fixed_of_scales(qp_scale(&sc, 0), s_out);
        int64_t len = t->shape[axis], row = len * inner;
        const void *tp = k_ptr(t);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t e = 0; e < row; e++) {
                int64_t src = o * row + e, dst = (o * shape[axis] + at) * inner + e;
                if (same)
                    k_convert(yp, dt, dst, tp, dt, src);
                else
                    k_storei(
                        yp, dt, dst,
                        clip64(requant_i32(k_loadi(tp, dt, src), qp_zp(&zp, 0), f, zp_out, true),
                               lo, hi));
            }
        at += len;
    }
    return 0;
}

const KernelDef kern_ref_qnn[] = {
    {OP_ID_QNN_QUANTIZE, quantize},
    {OP_ID_QNN_DEQUANTIZE, dequantize},
    {OP_ID_QNN_REQUANTIZE, requantize},
    {OP_ID_QNN_CONV2D, qnn_conv2d},
    {OP_ID_QNN_DENSE, qnn_dense},
    {OP_ID_QNN_ADD, qnn_add},
    {OP_ID_QNN_SUBTRACT, qnn_subtract},
    {OP_ID_QNN_MUL, qnn_mul},
    {OP_ID_QNN_CONCATENATE, qnn_concatenate},
    {0, NULL},
};
