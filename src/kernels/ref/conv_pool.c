/* conv_pool.c - reference kernels of the conv_pool operators (see src/ops/op_conv_pool.c):
 * pooling (windowed, global, adaptive, the 2-D pooling gradients), upsampling, padding and
 * dilation, and the table that also registers the convolutions of conv_nd.c.
 *
 * Pools work in any layout that has the spatial axes unsplit (NCHW, NHWC, NCHW16c, ...): every
 * other axis is carried through. Values are handled in three classes: floats in double (one
 * rounding at the store), signed integers in int64 and unsigned ones (bool included) in uint64.
 *
 * TVM semantics kept here (topi pooling.h, image/resize.py):
 *   max pool: out-of-range taps (padding, and the extra right padding of ceil_mode) take the
 *     dtype's lowest finite value, so a window that holds only padding yields it;
 *   avg pool: padding counts as 0; the divisor is, with count_include_pad, the taps inside the
 *     explicitly padded input (ceil_mode's extra padding excluded), otherwise the taps inside the
 *     input; at least 1. Integer averages divide with truncation; sums are kept in 64 bits (TVM
 *     sums in the data dtype and may wrap first);
 *   adaptive pools: window [floor(o * in / out), ceil((o + 1) * in / out));
 *   upsampling: topi.image.resize with the sizes' ratio as the scale; nearest rounds with
 *     floor(x + 1e-5), or half to even under align_corners; linear and cubic (alpha -0.5) clamp
 *     their taps to the edge; integer results truncate. */
#include "kernels/ref/nn_ref.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SP 3

/* ---- values by class ---------------------------------------------------------------------- */

typedef enum VClass { V_F, V_I, V_U } VClass;

static VClass vclass(rly_dtype dt) {
    if (sup_dtype_is_float(dt)) return V_F;
    return sup_dtype_is_int(dt) ? V_I : V_U;
}

/* One value of any class. */
typedef struct Val {
    double f;
    int64_t i;
    uint64_t u;
} Val;

static Val load_val(const void *base, rly_dtype dt, int64_t i) {
    Val v = {0, 0, 0};
    switch (vclass(dt)) {
    case V_F: v.f = k_loadf(base, dt, i); break;
    case V_I: v.i = k_loadi(base, dt, i); break;
    case V_U: v.u = k_loadu(base, dt, i); break;
    }
    return v;
}

static void store_val(void *base, rly_dtype dt, int64_t i, Val v) {
    switch (vclass(dt)) {
    case V_F: k_storef(base, dt, i, v.f); break;
    case V_I: k_storei(base, dt, i, v.i); break;
    case V_U: k_storeu(base, dt, i, v.u); break;
    }
}

static bool val_greater(VClass c, Val a, Val b) {
    return c == V_F ? a.f > b.f : c == V_I ? a.i > b.i : a.u > b.u;
}

/* TVM's min_value: the lowest finite value of the dtype. */
static Val lowest(rly_dtype dt) {
    Val v = {0, 0, 0};
    switch (dt) {
    case RLY_DTYPE_F16: v.f = -65504.0; break;
    case RLY_DTYPE_BF16: v.f = -3.38953138925153547590470800371487866880e38; break;
    case RLY_DTYPE_F32: v.f = -FLT_MAX; break;
    case RLY_DTYPE_F64: v.f = -DBL_MAX; break;
    case RLY_DTYPE_I8: v.i = INT8_MIN; break;
    case RLY_DTYPE_I16: v.i = INT16_MIN; break;
    case RLY_DTYPE_I32: v.i = INT32_MIN; break;
    case RLY_DTYPE_I64: v.i = INT64_MIN; break;
    default: break; /* unsigned and bool: 0 */
    }
    return v;
}

/* sum / n: true division for floats, truncating for integers (n > 0). */
static Val val_div(VClass c, Val sum, int64_t n) {
    Val v = sum;
    if (c == V_F)
        v.f = sum.f / (double)n;
    else if (c == V_I)
        v.i = sum.i / n;
    else
        v.u = sum.u / (uint64_t)n;
    return v;
}

static void val_add(VClass c, Val *acc, Val x) {
    if (c == V_F)
        acc->f += x.f;
    else if (c == V_I)
        acc->i = (int64_t)((uint64_t)acc->i + (uint64_t)x.i); /* wraps */
    else
        acc->u += x.u;
}

/* ---- pool geometry ----------------------------------------------------------------------------
 */

static const char *const spatial_of[] = {"", "W", "HW", "DHW"};

/* A pooled tensor: its layout, the positions of its spatial axes and, per spatial axis (D, H, W;
 * leading ones trivial for 1-D and 2-D pools), the window. */
typedef struct Pool {
    uint32_t nsp, ndim;
    KLayout layout;
    int axis[SP]; /* tensor dimension of each spatial axis; -1 for a trivial leading one */
    int64_t in[SP], out[SP], k[SP], stride[SP], dil[SP], pad[SP], pad_after[SP];
    bool ceil_mode, count_include_pad;
} Pool;

/* A pool over the nsp spatial axes of data x before its attributes are read: the layout
 * attribute with those axes present and unsplit, their extents (in = out), windows of 1 tap. */
static int pool_init(KCall *kc, const DLTensor *x, uint32_t nsp, Pool *p) {
    memset(p, 0, sizeof *p);
    p->nsp = nsp;
    p->ndim = (uint32_t)x->ndim;
    for (int i = 0; i < SP; i++) {
        p->axis[i] = -1;
        p->in[i] = p->out[i] = p->k[i] = p->stride[i] = p->dil[i] = 1;
    }
    if (k_layout_attr(kc, "layout", p->ndim, &p->layout) != 0 ||
        k_layout_axes(kc, &p->layout, spatial_of[nsp], p->axis + SP - nsp) != 0)
        return -1;
    for (int i = SP - (int)nsp; i < SP; i++)
        p->in[i] = p->out[i] = x->shape[p->axis[i]];
    return 0;
}

/* x's shape with the spatial extents p->out. */
static void pool_shape(const Pool *p, const DLTensor *x, int64_t *shape) {
    memcpy(shape, x->shape, p->ndim * sizeof(int64_t));
    for (int i = 0; i < SP; i++)
        if (p->axis[i] >= 0) shape[p->axis[i]] = p->out[i];
}

/* The pooled result: x's dtype, and x's shape with the spatial extents p->out (into shape). */
static DLTensor *pool_out(KCall *kc, const Pool *p, const DLTensor *x, int64_t *shape) {
    pool_shape(p, x, shape);
    return k_out(kc, 0, k_dtype(x), p->ndim, shape);
}

/* The windowed pools' attributes and output extents for data x. */
static int pool_setup(KCall *kc, uint32_t nsp, const DLTensor *x, Pool *p) {
    if (pool_init(kc, x, nsp, p) != 0 ||
        kern_nn_spatial_attr(kc, "pool_size", nsp, 1, p->k + SP - nsp) != 0 ||
        kern_nn_spatial_attr(kc, "strides", nsp, 1, p->stride + SP - nsp) != 0 ||
        kern_nn_spatial_attr(kc, "dilation", nsp, 1, p->dil + SP - nsp) != 0 ||
        kern_nn_padding(kc, nsp, p->pad + SP - nsp, p->pad_after + SP - nsp) != 0)
        return -1;
    p->ceil_mode = k_bool(kc, "ceil_mode");
    p->count_include_pad = false;
    for (uint32_t i = 0; i < kc->n_attrs; i++)
        if (strcmp(kc->attrs[i].name, "count_include_pad") == 0)
            p->count_include_pad = k_bool(kc, "count_include_pad");
    for (int i = 0; i < SP; i++) {
        /* Sizes checked against the shape limit: attributes may be anything, and every index
         * below is then a sum of two such sizes. */
        int64_t window, padded;
        if (!sup_dim_mul(p->dil[i], p->k[i] - 1, &window) || !sup_dim_add(window, 1, &window) ||
            !sup_dim_add(p->in[i], p->pad[i], &padded) ||
            !sup_dim_add(padded, p->pad_after[i], &padded))
            return k_error(kc, "the pool window or the padded input is too large (over 2^62)");
        if (window > padded)
            return k_error(kc, "pool window %lld is larger than the padded input %lld",
                           (long long)window, (long long)padded);
        int64_t span = padded - window; /* ceil_mode: the division rounded up */
        p->out[i] = span / p->stride[i] + 1 + (p->ceil_mode && span % p->stride[i] != 0);
    }
    return 0;
}

/* The taps [*lo, *hi) of output position o on spatial axis i that fall inside the input (the
 * others are padding): computed, not searched, so that a window of any size costs what its
 * inside taps cost. */
static void pool_taps(const Pool *p, int i, int64_t o, int64_t *lo, int64_t *hi) {
    int64_t start = o * p->stride[i] - p->pad[i], dil = p->dil[i];
    int64_t first = start >= 0 ? 0 : (-start + dil - 1) / dil;
    int64_t end = p->in[i] - 1 - start < 0 ? 0 : (p->in[i] - 1 - start) / dil + 1;
    *lo = first < p->k[i] ? first : p->k[i];
    *hi = end < p->k[i] ? end : p->k[i];
    if (*hi < *lo) *hi = *lo;
}

/* Taps of output position o on spatial axis i that fall inside the input. */
static int64_t taps_inside(const Pool *p, int i, int64_t o) {
    int64_t lo, hi;
    pool_taps(p, i, o, &lo, &hi);
    return hi - lo;
}

/* The average's divisor at output spatial position o[SP] (see the file comment). */
static int64_t pool_divisor(const Pool *p, const int64_t *o) {
    int64_t n = 1;
    for (int i = 0; i < SP; i++) {
        if (!p->count_include_pad) {
            n = sup_dim_mul_sat(n, taps_inside(p, i, o[i]));
            continue;
        }
        int64_t start = o[i] * p->stride[i] - p->pad[i];
        int64_t end = start + (p->k[i] - 1) * p->dil[i];
        int64_t last = p->in[i] + p->pad_after[i] - 1;
        if (end > last) end = last;
        int64_t c = end >= start ? (end - start) / p->dil[i] + 1 : 0;
        n = sup_dim_mul_sat(n, c); /* saturated: sums over 2^62 taps do not exist */
    }
    return n > 0 ? n : 1;
}

/* Input offset of output element idx with the spatial indices zeroed, and the spatial output
 * position into o[SP]. */
static int64_t pool_base(const Pool *p, const int64_t *idx, const int64_t *in_st, int64_t *o) {
    bool spatial[K_MAX_DIMS] = {false};
    for (int i = 0; i < SP; i++) {
        o[i] = p->axis[i] >= 0 ? idx[p->axis[i]] : 0;
        if (p->axis[i] >= 0) spatial[p->axis[i]] = true;
    }
    /* Only the other axes: an output position times an input stride need not fit in int64. */
    int64_t base = 0;
    for (uint32_t d = 0; d < p->ndim; d++)
        if (!spatial[d]) base += idx[d] * in_st[d];
    return base;
}

/* Spatial stride of axis i in the input (0 for a trivial leading axis). */
static int64_t sp_stride(const Pool *p, const int64_t *in_st, int i) {
    return p->axis[i] >= 0 ? in_st[p->axis[i]] : 0;
}

static int pool_fwd(KCall *kc, uint32_t nsp, bool is_max) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t ndim = (uint32_t)x->ndim;
    Pool p;
    if (pool_setup(kc, nsp, x, &p) != 0) return -1;
    int64_t shape[K_MAX_DIMS], in_st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0};
    DLTensor *o = pool_out(kc, &p, x, shape);
    if (o == NULL) return -1;
    rly_dtype dt = k_dtype(x);
    int64_t total = k_shape_numel(ndim, shape);
    if (total == 0) return 0;
    k_strides(ndim, x->shape, in_st);
    const void *src = k_ptr(x);
    void *dst = k_ptr(o);
    VClass c = vclass(dt);
    int64_t s0 = sp_stride(&p, in_st, 0), s1 = sp_stride(&p, in_st, 1),
            s2 = sp_stride(&p, in_st, 2);
    for (int64_t flat = 0; flat < total; flat++, k_next(idx, ndim, shape)) {
        int64_t op[SP];
        int64_t base = pool_base(&p, idx, in_st, op);
        Val acc = is_max ? lowest(dt) : (Val){0, 0, 0};
        int64_t lo[SP], hi[SP]; /* the inside taps; padding adds the lowest value, or 0 */
        for (int i = 0; i < SP; i++)
            pool_taps(&p, i, op[i], &lo[i], &hi[i]);
        for (int64_t a = lo[0]; a < hi[0]; a++) {
            int64_t xd = op[0] * p.stride[0] - p.pad[0] + a * p.dil[0];
            for (int64_t b = lo[1]; b < hi[1]; b++) {
                int64_t xh = op[1] * p.stride[1] - p.pad[1] + b * p.dil[1];
                for (int64_t e = lo[2]; e < hi[2]; e++) {
                    int64_t xw = op[2] * p.stride[2] - p.pad[2] + e * p.dil[2];
                    Val v = load_val(src, dt, base + xd * s0 + xh * s1 + xw * s2);
                    if (is_max) {
                        if (val_greater(c, v, acc)) acc = v;
                    } else {
                        val_add(c, &acc, v);
                    }
                }
            }
        }
        store_val(dst, dt, flat, is_max ? acc : val_div(c, acc, pool_divisor(&p, op)));
    }
    return 0;
}

/* nn.max_pool2d_grad / avg_pool2d_grad(out_grad, data): the gradient of the pool with respect
 * to data. Max: each output's gradient goes to the first maximal tap of its window (row-major),
 * nowhere when that tap is padding. Avg: out_grad / divisor to every tap inside the input. */
static int pool_grad(KCall *kc, bool is_max) {
    const DLTensor *og = k_arg(kc, 0), *x = k_arg(kc, 1);
    uint32_t ndim = (uint32_t)x->ndim;
    Pool p;
    if (pool_setup(kc, 2, x, &p) != 0) return -1;
    int64_t shape[K_MAX_DIMS], in_st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0};
    pool_shape(&p, x, shape);
    bool same = (uint32_t)og->ndim == ndim && k_dtype(og) == k_dtype(x);
    for (uint32_t d = 0; same && d < ndim; d++)
        same = og->shape[d] == shape[d];
    if (!same) return k_error(kc, "out_grad does not have the pooled shape and data's dtype");
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, ndim, x->shape);
    if (o == NULL) return -1;
    int64_t n_in = k_numel(x), total = k_shape_numel(ndim, shape);
    VClass c = vclass(dt);
    Val *acc = kern_nn_scratch(kc, n_in, sizeof(Val));
    if (acc == NULL) return -1;
    k_strides(ndim, x->shape, in_st);
    const void *src = k_ptr(x), *gsrc = k_ptr(og);
    int64_t s1 = sp_stride(&p, in_st, 1), s2 = sp_stride(&p, in_st, 2);
    for (int64_t flat = 0; flat < total; flat++, k_next(idx, ndim, shape)) {
        int64_t op[SP];
        int64_t base = pool_base(&p, idx, in_st, op);
        Val g = load_val(gsrc, dt, flat);
        if (!is_max) g = val_div(c, g, pool_divisor(&p, op));
        /* Only the inside taps are visited. A padding tap holds the lowest value, which never
         * beats the best so far; it matters only as the first tap of the window, which it then
         * holds (best_at -1: the gradient goes nowhere unless an inside tap is greater). */
        int64_t lo1, hi1, lo2, hi2;
        pool_taps(&p, 1, op[1], &lo1, &hi1);
        pool_taps(&p, 2, op[2], &lo2, &hi2);
        Val best = lowest(dt);
        int64_t best_at = -1;
        bool first = lo1 == 0 && hi1 > 0 && lo2 == 0 && hi2 > 0;
        for (int64_t b = lo1; b < hi1; b++) {
            int64_t xh = op[1] * p.stride[1] - p.pad[1] + b * p.dil[1];
            for (int64_t e = lo2; e < hi2; e++) {
                int64_t xw = op[2] * p.stride[2] - p.pad[2] + e * p.dil[2];
                int64_t at = base + xh * s1 + xw * s2;
                if (!is_max) {
                    val_add(c, &acc[at], g);
                    continue;
                }
                Val v = load_val(src, dt, at);
                if (first || val_greater(c, v, best)) best = v, best_at = at;
                first = false;
            }
        }
        if (is_max && best_at >= 0) val_add(c, &acc[best_at], g);
    }
    void *dst = k_ptr(o);
    for (int64_t i = 0; i < n_in; i++)
        store_val(dst, dt, i, acc[i]);
    return 0;
}

/* ---- global and adaptive pools ----------------------------------------------------------------
 */

/* Adaptive pooling to out[SP] (global pools: 1 per axis). An empty window gives the lowest
 * value (max) or 0 / 0 (avg: NaN for floats, 0 for integers). */
static int adaptive(KCall *kc, uint32_t nsp, bool is_max, bool global) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t ndim = (uint32_t)x->ndim;
    Pool p;
    if (pool_init(kc, x, nsp, &p) != 0) return -1;
    if (global) {
        for (int i = 0; i < SP; i++)
            p.out[i] = 1;
    } else {
        const int64_t *os;
        uint32_t n = k_ints(kc, "output_size", &os);
        if (n > 1 && n != nsp)
            return k_error(kc, "output_size must have 0, 1 or %u values, got %u", nsp, n);
        for (uint32_t i = 0; n > 0 && i < nsp; i++) {
            int64_t v = os[n == 1 ? 0 : i];
            if (v < 1)
                return k_error(kc, "output_size values must be positive, got %lld", (long long)v);
            p.out[SP - nsp + i] = v;
        }
    }
    int64_t shape[K_MAX_DIMS], in_st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0};
    DLTensor *o = pool_out(kc, &p, x, shape);
    if (o == NULL) return -1;
    rly_dtype dt = k_dtype(x);
    int64_t total = k_shape_numel(ndim, shape);
    k_strides(ndim, x->shape, in_st);
    const void *src = k_ptr(x);
    void *dst = k_ptr(o);
    VClass c = vclass(dt);
    int64_t s[SP];
    for (int i = 0; i < SP; i++)
        s[i] = sp_stride(&p, in_st, i);
    /* An empty input (a spatial extent 0, another perhaps huge) makes every window empty. */
    bool empty = k_numel(x) == 0;
    for (int64_t flat = 0; flat < total; flat++, k_next(idx, ndim, shape)) {
        int64_t op[SP], lo[SP] = {0}, hi[SP] = {0}, count = empty ? 0 : 1;
        int64_t base = pool_base(&p, idx, in_st, op);
        for (int i = 0; i < SP && !empty; i++) {
            lo[i] = op[i] * p.in[i] / p.out[i];
            hi[i] = ((op[i] + 1) * p.in[i] + p.out[i] - 1) / p.out[i];
            count *= hi[i] - lo[i];
        }
        Val acc = is_max ? lowest(dt) : (Val){0, 0, 0};
        for (int64_t a = lo[0]; a < hi[0]; a++)
            for (int64_t b = lo[1]; b < hi[1]; b++)
                for (int64_t e = lo[2]; e < hi[2]; e++) {
                    Val v = load_val(src, dt, base + a * s[0] + b * s[1] + e * s[2]);
                    if (!is_max)
                        val_add(c, &acc, v);
                    else if (val_greater(c, v, acc))
                        acc = v;
                }
        if (!is_max) {
            if (count > 0)
                acc = val_div(c, acc, count);
            else if (c == V_F)
                acc.f = NAN;
        }
        store_val(dst, dt, flat, acc);
    }
    return 0;
}

/* ---- upsampling --------------------------------------------------------------------------------
 */

/* The interpolation taps of one output coordinate on one axis. */
typedef struct Taps {
    int n;
    int64_t at[4];
    double w[4];
} Taps;

typedef enum Resize { RS_NEAREST, RS_LINEAR, RS_CUBIC } Resize;
typedef enum Coord { CT_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC } Coord;

static int64_t clamp_index(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

static void taps_of(Resize m, Coord ct, int64_t x, int64_t in, int64_t out, Taps *t) {
    double scale = (double)in / (double)out, fx;
    if (ct == CT_HALF_PIXEL)
        fx = ((double)x + 0.5) * scale - 0.5;
    else if (ct == CT_ALIGN_CORNERS)
        fx = out > 1 ? (double)(in - 1) / (double)(out - 1) * (double)x : 0;
    else
        fx = scale * (double)x;
    if (m == RS_NEAREST) {
        double r = ct == CT_ALIGN_CORNERS ? nearbyint(fx) : floor(fx + 1e-5);
        t->n = 1;
        t->at[0] = clamp_index((int64_t)r, in);
        t->w[0] = 1;
        return;
    }
    double f0 = floor(fx), u = fx - f0;
    int64_t x0 = (int64_t)f0;
    if (m == RS_LINEAR) {
        t->n = 2;
        t->at[0] = clamp_index(x0, in), t->w[0] = 1 - u;
        t->at[1] = clamp_index(x0 + 1, in), t->w[1] = u;
        return;
    }
    const double a = -0.5;
    double u2 = u * u, u3 = u2 * u;
    t->n = 4;
    t->w[0] = a * (u3 - 2 * u2 + u);
    t->w[1] = (a + 2) * u3 - (3 + a) * u2 + 1;
    t->w[2] = -(a + 2) * u3 + (3 + 2 * a) * u2 - a * u;
    t->w[3] = -a * u3 + a * u2;
    for (int i = 0; i < 4; i++)
        t->at[i] = clamp_index(x0 + i - 1, in);
}

static int upsample(KCall *kc, uint32_t nsp) {
    static const char *const scale_names[] = {"scale_d", "scale_h", "scale_w"};
    static const char *const refs[] = {"", "", "NCHW", "NCDHW"};
    const DLTensor *x = k_arg(kc, 0);
    uint32_t ndim = (uint32_t)x->ndim;
    Pool p;
    if (pool_init(kc, x, nsp, &p) != 0) return -1;
    for (const char *r = refs[nsp]; *r; r++)
        if (k_layout_find(&p.layout, *r) < 0)
            return k_error(kc, "layout \"%s\" is not convertible to %s", p.layout.text, refs[nsp]);
    const char *method = k_str(kc, "method");
    Resize m = strcmp(method, "nearest_neighbor") == 0 ? RS_NEAREST
               : strcmp(method, "bicubic") == 0        ? RS_CUBIC
                                                       : RS_LINEAR;
    Coord ct;
    if (nsp == 2) {
        ct = k_bool(kc, "align_corners") ? CT_ALIGN_CORNERS : CT_ASYMMETRIC;
    } else {
        const char *mode = k_str(kc, "coordinate_transformation_mode");
        ct = strcmp(mode, "align_corners") == 0 ? CT_ALIGN_CORNERS
             : strcmp(mode, "asymmetric") == 0  ? CT_ASYMMETRIC
                                                : CT_HALF_PIXEL;
    }
    for (int j = SP - (int)nsp; j < SP; j++) {
        double scale = k_float(kc, scale_names[j]);
        if (!(scale > 0) || !isfinite(scale))
            return k_error(kc, "%s must be a positive number, got %g", scale_names[j], scale);
        double d = nearbyint((double)p.in[j] * scale);
        if (d > (double)SUP_DIM_MAX)
            return k_error(kc, "%s %g makes a dimension of %g", scale_names[j], scale, d);
        p.out[j] = scale == 1.0 ? p.in[j] : (int64_t)d;
    }
    int64_t shape[K_MAX_DIMS];
    DLTensor *o = pool_out(kc, &p, x, shape);
    if (o == NULL) return -1;
    rly_dtype dt = k_dtype(x);
    int64_t total = k_shape_numel(ndim, shape);
    if (total == 0) return 0;
    for (int i = 0; i < SP; i++)
        if (p.in[i] == 0) return k_error(kc, "cannot resize an empty axis to a non-empty one");
    Taps *taps[SP] = {NULL, NULL, NULL};
    int rc = -1;
    for (int i = 0; i < SP; i++) {
        if ((taps[i] = kern_nn_scratch(kc, p.out[i], sizeof(Taps))) == NULL) goto done;
        for (int64_t v = 0; v < p.out[i]; v++)
            taps_of(p.axis[i] >= 0 ? m : RS_NEAREST, ct, v, p.in[i], p.out[i], &taps[i][v]);
    }
    int64_t in_st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0}, s[SP];
    k_strides(ndim, x->shape, in_st);
    for (int i = 0; i < SP; i++)
        s[i] = sp_stride(&p, in_st, i);
    const void *src = k_ptr(x);
    void *dst = k_ptr(o);
    for (int64_t flat = 0; flat < total; flat++, k_next(idx, ndim, shape)) {
        int64_t op[SP];
        int64_t base = pool_base(&p, idx, in_st, op);
        const Taps *td = &taps[0][op[0]], *th = &taps[1][op[1]], *tw = &taps[2][op[2]];
        if (m == RS_NEAREST) {
            k_convert(dst, dt, flat, src, dt,
                      base + td->at[0] * s[0] + th->at[0] * s[1] + tw->at[0] * s[2]);
            continue;
        }
        double acc = 0;
        for (int a = 0; a < td->n; a++)
            for (int b = 0; b < th->n; b++) {
                double wab = td->w[a] * th->w[b];
                int64_t ab = base + td->at[a] * s[0] + th->at[b] * s[1];
                for (int e = 0; e < tw->n; e++)
                    acc += wab * tw->w[e] * k_loadf(src, dt, ab + tw->at[e] * s[2]);
            }
        k_storef(dst, dt, flat, acc);
    }
    rc = 0;
done: /* taps: k_scratch, released by the caller */
    return rc;
}

/* ---- padding and dilation ------------------------------------------------------------------- */

#define PAD_LIMIT (((int64_t)1 << 31) - 1) /* the largest pad width (nn.pad's relation) */

/* pad_width, one [before, after] pair per axis, which reaches kernels flattened: 2 * ndim
 * integers b0, a0, b1, a1, ... */
static int pad_widths(KCall *kc, uint32_t ndim, int64_t *before, int64_t *after) {
    const int64_t *v;
    uint32_t n = k_ints(kc, "pad_width", &v);
    if (n != 2 * ndim || (ndim > 0 && v == NULL))
        return k_error(kc,
                       "pad_width must hold one [before, after] pair per axis (%u), got %u "
                       "values",
                       ndim, n);
    for (uint32_t i = 0; i < ndim; i++) {
        before[i] = v[2 * i], after[i] = v[2 * i + 1];
        if (before[i] > PAD_LIMIT || before[i] < -PAD_LIMIT || after[i] > PAD_LIMIT ||
            after[i] < -PAD_LIMIT) /* the relation's bound; keeps d + before + after exact */
            return k_error(kc, "pad_width [%lld, %lld] on axis %u is beyond 2^31 - 1",
                           (long long)before[i], (long long)after[i], i);
    }
    return 0;
}

typedef enum PadMode { PAD_CONSTANT, PAD_EDGE, PAD_REFLECT, PAD_SYMMETRIC } PadMode;

/* Source index of output index o on an axis of extent d padded by `before`; -1 for the pad
 * value. */
static int64_t pad_source(PadMode m, int64_t o, int64_t before, int64_t d) {
    int64_t s = o - before;
    if (s >= 0 && s < d) return s;
    switch (m) {
    case PAD_CONSTANT: return -1;
    case PAD_EDGE: return s < 0 ? 0 : d - 1;
    case PAD_REFLECT: return s < 0 ? -s : 2 * (d - 1) - s;
    case PAD_SYMMETRIC: return s < 0 ? -s - 1 : 2 * d - 1 - s;
    }
    return -1;
}

static int pad_common(KCall *kc, PadMode m, const DLTensor *value) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t ndim = (uint32_t)x->ndim;
    int64_t before[K_MAX_DIMS], after[K_MAX_DIMS], shape[K_MAX_DIMS], st[K_MAX_DIMS];
    int64_t idx[K_MAX_DIMS] = {0};
    if (pad_widths(kc, ndim, before, after) != 0) return -1;
    for (uint32_t i = 0; i < ndim; i++) {
        int64_t d = x->shape[i];
        shape[i] = d + before[i] + after[i];
        if (shape[i] < 0)
            return k_error(kc,
                           "pad_width [%lld, %lld] on axis %u removes more than its %lld "
                           "elements",
                           (long long)before[i], (long long)after[i], i, (long long)d);
        bool grows = before[i] > 0 || after[i] > 0;
        if (m != PAD_CONSTANT && (before[i] < 0 || after[i] < 0))
            return k_error(kc, "this padding mode needs non-negative pad_width");
        /* reflect mirrors without the edge, symmetric with it; edge repeats it any number of
         * times (as the relation allows) */
        int64_t most = m == PAD_REFLECT ? d - 1 : m == PAD_SYMMETRIC ? d : INT64_MAX;
        if (m != PAD_CONSTANT && grows && (d == 0 || before[i] > most || after[i] > most))
            return k_error(kc, "cannot pad axis %u of extent %lld by [%lld, %lld] in this mode", i,
                           (long long)d, (long long)before[i], (long long)after[i]);
    }
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, ndim, shape);
    if (o == NULL) return -1;
    int64_t total = k_shape_numel(ndim, shape);
    uint64_t fill = 0;
    if (value != NULL) {
        if (k_numel(value) != 1) return k_error(kc, "pad_value must hold one value");
        k_convert(&fill, dt, 0, k_ptr(value), k_dtype(value), 0);
    }
    size_t es = sup_dtype_size(dt);
    k_strides(ndim, x->shape, st);
    const char *src = k_ptr(x);
    char *dst = k_ptr(o);
    for (int64_t flat = 0; flat < total; flat++, k_next(idx, ndim, shape)) {
        int64_t off = 0;
        for (uint32_t i = 0; i < ndim && off >= 0; i++) {
            int64_t s = pad_source(m, idx[i], before[i], x->shape[i]);
            off = s < 0 ? -1 : off + s * st[i];
        }
        memcpy(dst + (size_t)flat * es, off < 0 ? (const char *)&fill : src + (size_t)off * es, es);
    }
    return 0;
}

static int k_pad(KCall *kc) {
    const char *mode = k_str(kc, "pad_mode");
    PadMode m = strcmp(mode, "edge") == 0      ? PAD_EDGE
                : strcmp(mode, "reflect") == 0 ? PAD_REFLECT
                                               : PAD_CONSTANT;
    return pad_common(kc, m, kc->n_args > 1 ? k_arg(kc, 1) : NULL);
}

static int k_mirror_pad(KCall *kc) {
    bool reflect = strcmp(k_str(kc, "mode"), "REFLECT") == 0;
    return pad_common(kc, reflect ? PAD_REFLECT : PAD_SYMMETRIC, NULL);
}

/* nn.dilate: (d - 1) * stride + 1 per axis, dilation_value between the elements. */
static int k_dilate(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t ndim = (uint32_t)x->ndim;
    const int64_t *st;
    if (k_ints(kc, "strides", &st) != ndim)
        return k_error(kc, "strides must have one value per axis (%u)", ndim);
    int64_t shape[K_MAX_DIMS], ost[K_MAX_DIMS], idx[K_MAX_DIMS] = {0};
    for (uint32_t i = 0; i < ndim; i++) {
        if (st[i] < 1) return k_error(kc, "strides values must be positive");
        int64_t d = x->shape[i];
        shape[i] = d;
        if (d > 1 &&
            (!sup_dim_mul(d - 1, st[i], &shape[i]) || !sup_dim_add(shape[i], 1, &shape[i])))
            return k_error(kc, "strides %lld make axis %u too large (over 2^62)", (long long)st[i],
                           i);
    }
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, ndim, shape);
    if (o == NULL) return -1;
    int64_t total = k_shape_numel(ndim, shape), n_in = k_numel(x);
    void *dst = k_ptr(o);
    double fillv = k_float(kc, "dilation_value");
    for (int64_t i = 0; i < total; i++)
        k_storef(dst, dt, i, fillv);
    k_strides(ndim, shape, ost);
    for (int64_t flat = 0; flat < n_in; flat++, k_next(idx, ndim, x->shape)) {
        int64_t off = 0;
        for (uint32_t i = 0; i < ndim; i++)
            off += idx[i] * st[i] * ost[i];
        k_convert(dst, dt, off, k_ptr(x), dt, flat);
    }
    return 0;
}

/* ---- the table ------------------------------------------------------------------------------ */

static int k_max_pool1d(KCall *kc) { return pool_fwd(kc, 1, true); }
static int k_max_pool2d(KCall *kc) { return pool_fwd(kc, 2, true); }
static int k_max_pool3d(KCall *kc) { return pool_fwd(kc, 3, true); }
static int k_avg_pool1d(KCall *kc) { return pool_fwd(kc, 1, false); }
static int k_avg_pool2d(KCall *kc) { return pool_fwd(kc, 2, false); }
static int k_avg_pool3d(KCall *kc) { return pool_fwd(kc, 3, false); }
static int k_max_pool2d_grad(KCall *kc) { return pool_grad(kc, true); }
static int k_avg_pool2d_grad(KCall *kc) { return pool_grad(kc, false); }
static int k_global_avg_pool2d(KCall *kc) { return adaptive(kc, 2, false, true); }
static int k_global_max_pool2d(KCall *kc) { return adaptive(kc, 2, true, true); }
static int k_adaptive_avg_pool1d(KCall *kc) { return adaptive(kc, 1, false, false); }
static int k_adaptive_avg_pool2d(KCall *kc) { return adaptive(kc, 2, false, false); }
static int k_adaptive_avg_pool3d(KCall *kc) { return adaptive(kc, 3, false, false); }
static int k_adaptive_max_pool1d(KCall *kc) { return adaptive(kc, 1, true, false); }
static int k_adaptive_max_pool2d(KCall *kc) { return adaptive(kc, 2, true, false); }
static int k_adaptive_max_pool3d(KCall *kc) { return adaptive(kc, 3, true, false); }
static int k_upsampling(KCall *kc) { return upsample(kc, 2); }
static int k_upsampling3d(KCall *kc) { return upsample(kc, 3); }

const KernelDef kern_ref_conv_pool[] = {
    {OP_ID_NN_CONV1D, kern_nn_conv1d},
    {OP_ID_NN_CONV2D, kern_nn_conv2d},
    {OP_ID_NN_CONV3D, kern_nn_conv3d},
    {OP_ID_NN_CONV1D_TRANSPOSE, kern_nn_conv1d_transpose},
    {OP_ID_NN_CONV2D_TRANSPOSE, kern_nn_conv2d_transpose},
    {OP_ID_NN_CONV3D_TRANSPOSE, kern_nn_conv3d_transpose},
    {OP_ID_NN_CONV2D_BACKWARD_WEIGHT, kern_nn_conv2d_backward_weight},
    {OP_ID_NN_MAX_POOL1D, k_max_pool1d},
    {OP_ID_NN_MAX_POOL2D, k_max_pool2d},
    {OP_ID_NN_MAX_POOL3D, k_max_pool3d},
    {OP_ID_NN_AVG_POOL1D, k_avg_pool1d},
    {OP_ID_NN_AVG_POOL2D, k_avg_pool2d},
    {OP_ID_NN_AVG_POOL3D, k_avg_pool3d},
    {OP_ID_NN_MAX_POOL2D_GRAD, k_max_pool2d_grad},
    {OP_ID_NN_AVG_POOL2D_GRAD, k_avg_pool2d_grad},
    {OP_ID_NN_GLOBAL_AVG_POOL2D, k_global_avg_pool2d},
    {OP_ID_NN_GLOBAL_MAX_POOL2D, k_global_max_pool2d},
    {OP_ID_NN_ADAPTIVE_AVG_POOL1D, k_adaptive_avg_pool1d},
    {OP_ID_NN_ADAPTIVE_AVG_POOL2D, k_adaptive_avg_pool2d},
    {OP_ID_NN_ADAPTIVE_AVG_POOL3D, k_adaptive_avg_pool3d},
    {OP_ID_NN_ADAPTIVE_MAX_POOL1D, k_adaptive_max_pool1d},
    {OP_ID_NN_ADAPTIVE_MAX_POOL2D, k_adaptive_max_pool2d},
    {OP_ID_NN_ADAPTIVE_MAX_POOL3D, k_adaptive_max_pool3d},
    {OP_ID_NN_UPSAMPLING, k_upsampling},
    {OP_ID_NN_UPSAMPLING3D, k_upsampling3d},
    {OP_ID_NN_PAD, k_pad},
    {OP_ID_NN_MIRROR_PAD, k_mirror_pad},
    {OP_ID_NN_DILATE, k_dilate},
    {0, NULL},
};
