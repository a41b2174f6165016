/* import_misc.c - ONNX converters: Resize and Upsample, GridSample, RoiAlign, NonMaxSuppression,
 * the quantization operators (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
 * QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger) and the spectral ones (DFT, STFT,
 * MelWeightMatrix).
 *
 * Where a Relay operator computes exactly what the ONNX operator specifies it is used directly
 * (image.resize*d, image.grid_sample, vision.roi_align, vision.all_class_non_max_suppression,
 * qnn.dequantize). Where it does not (ONNX rounds half to even where qnn rounds half away from
 * zero; ONNX Resize derives coordinates from the scale where Relay derives them from the output
 * size), the ONNX formula is composed from elementwise operators, so constants fold at import and
 * the result is the ONNX result. Each section says which Relay semantics it relies on. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/onnx/import.h"

/* ==== helpers ================================================================================ */

/* The call builders below return NULL when an operand is NULL (an error already reported), so a
 * chain of them is checked once at its end. */
static Expr *op1(Imp *imp, const char *op, Expr *x, const ImpAttrs *a) {
    return x ? imp_call1(imp, op, x, a) : NULL;
}
static Expr *op2(Imp *imp, const char *op, Expr *x, Expr *y) {
    return x && y ? imp_call2(imp, op, x, y, NULL) : NULL;
}
static Expr *add(Imp *imp, Expr *x, Expr *y) { return op2(imp, "add", x, y); }
static Expr *sub(Imp *imp, Expr *x, Expr *y) { return op2(imp, "subtract", x, y); }
static Expr *mul(Imp *imp, Expr *x, Expr *y) { return op2(imp, "multiply", x, y); }
static Expr *dvd(Imp *imp, Expr *x, Expr *y) { return op2(imp, "divide", x, y); }
static Expr *f64(Imp *imp, double v) { return imp_scalar(imp, RLY_DTYPE_F64, v); }

static Expr *where(Imp *imp, Expr *c, Expr *x, Expr *y) {
    if (!c || !x || !y) return NULL;
    Expr *args[3] = {c, x, y};
    return imp_call(imp, "where", 3, args, NULL);
}

static Expr *reshape(Imp *imp, Expr *x, uint32_t n, const int64_t *shape) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "newshape", n, shape);
    return imp_call1(imp, "reshape", x, &a);
}

static Expr *transpose(Imp *imp, Expr *x, uint32_t n, const int64_t *perm) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "axes", n, perm);
    return imp_call1(imp, "transpose", x, &a);
}

/* take(x, idx, axis); idx a scalar drops the axis. */
static Expr *take(Imp *imp, Expr *x, Expr *idx, int64_t axis) {
    if (!x || !idx) return NULL;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    return imp_call2(imp, "take", x, idx, &a);
}

static Expr *clip(Imp *imp, Expr *x, double lo, double hi) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_float(imp, &a, "a_min", lo);
    ia_float(imp, &a, "a_max", hi);
    return imp_call1(imp, "clip", x, &a);
}

static Expr *concat(Imp *imp, uint32_t n, Expr *const *xs, int64_t axis) {
    for (uint32_t i = 0; i < n; i++)
        if (!xs[i]) return NULL;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    return imp_call1(imp, "concatenate", imp_tuple(imp, n, xs), &a);
}

/* Reduction of x over all axes to a scalar. */
static Expr *reduce_all(Imp *imp, const char *op, Expr *x) { return op1(imp, op, x, NULL); }

static bool out1(Imp *imp, Expr *e) {
    if (!e) return false;
    imp_out(imp, 0, e);
    return true;
}

/* Number of elements of a tensor expression, -1 when a dim is unknown. */
static int64_t numel_of(Expr *e) {
    TensorType *t = imp_tt(e);
    if (!t) return -1;
    int64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0) return -1;
        n *= t->shape[i];
    }
    return n;
}

/* Whether an optional input is given: present and not known to be empty (ONNX models pass an
 * empty tensor for "absent" where an input is not optional in an older opset). */
static Expr *given(Expr *e) { return e && numel_of(e) != 0 ? e : NULL; }

/* Element i of a raw buffer of dtype dt as a double. */
static double elem_f64(const void *p, rly_dtype dt, size_t i) {
    switch (dt) {
    case RLY_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    case RLY_DTYPE_I8: return ((const int8_t *)p)[i];
    case RLY_DTYPE_I16: return ((const int16_t *)p)[i];
    case RLY_DTYPE_I32: return ((const int32_t *)p)[i];
    case RLY_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case RLY_DTYPE_U8: return ((const uint8_t *)p)[i];
    case RLY_DTYPE_U16: return ((const uint16_t *)p)[i];
    case RLY_DTYPE_U32: return ((const uint32_t *)p)[i];
    case RLY_DTYPE_U64: return (double)((const uint64_t *)p)[i];
    case RLY_DTYPE_F16: return sup_f16_to_f32(((const uint16_t *)p)[i]);
    case RLY_DTYPE_BF16: return sup_bf16_to_f32(((const uint16_t *)p)[i]);
    case RLY_DTYPE_F32: return ((const float *)p)[i];
    case RLY_DTYPE_F64: return ((const double *)p)[i];
    default: return 0.0;
    }
}

/* A constant tensor (any numeric dtype and rank, flattened) as doubles in the import arena.
 * False when e is not a constant. */
static bool const_f64s(Imp *imp, Expr *e, const double **vals, uint32_t *n) {
    Constant *c = e ? imp_const(e) : NULL;
    if (!c) return false;
    size_t count = 1;
    for (uint32_t i = 0; i < c->ndim; i++)
        count *= (size_t)c->shape[i];
    double *v = imp_alloc(imp, (count ? count : 1) * sizeof *v);
    for (size_t i = 0; i < count; i++)
        v[i] = elem_f64(c->data, c->dtype, i);
    *vals = v;
    *n = (uint32_t)count;
    return true;
}

/* axis in [-rank, rank) made non-negative; false after reporting otherwise. */
static bool norm_axis(Imp *imp, int64_t axis, uint32_t rank, const char *what, int64_t *out) {
    *out = 0;
    if (axis < -(int64_t)rank || axis >= (int64_t)rank)
        return imp_error(imp, "%s %lld is out of range for rank %u", what, (long long)axis, rank);
    *out = axis < 0 ? axis + rank : axis;
    return true;
}

/* The clip range of a quantized dtype; false after reporting for other dtypes. */
static bool quant_range(Imp *imp, rly_dtype dt, double *lo, double *hi) {
    switch (dt) {
    case RLY_DTYPE_U8: *lo = 0, *hi = 255; return true;
    case RLY_DTYPE_I8: *lo = -128, *hi = 127; return true;
    case RLY_DTYPE_U16: *lo = 0, *hi = 65535; return true;
    case RLY_DTYPE_I16: *lo = -32768, *hi = 32767; return true;
    default:
        return imp_error(imp, "quantized type %s is not supported (uint8, int8, uint16, int16)",
                         sup_dtype_name(dt));
    }
}

/* The int32 range clip of an integer dtype (for results of float arithmetic cast back). */
static void int_range(rly_dtype dt, double *lo, double *hi) {
    switch (dt) {
    case RLY_DTYPE_BOOL: *lo = 0, *hi = 1; return;
    case RLY_DTYPE_I8: *lo = -128, *hi = 127; return;
    case RLY_DTYPE_U8: *lo = 0, *hi = 255; return;
    case RLY_DTYPE_I16: *lo = -32768, *hi = 32767; return;
    case RLY_DTYPE_U16: *lo = 0, *hi = 65535; return;
    case RLY_DTYPE_I32: *lo = -2147483648.0, *hi = 2147483647.0; return;
    case RLY_DTYPE_U32: *lo = 0, *hi = 4294967295.0; return;
    case RLY_DTYPE_U64: *lo = 0, *hi = 18446744073709549568.0; return;
    default: *lo = -9223372036854775808.0, *hi = 9223372036854774784.0; return;
    }
}

/* A quantization parameter (scale or zero point) for a tensor of rank `rank`: a scalar or a
 * one-element tensor becomes a scalar; a 1-D tensor of C values is per-channel along `axis` and
 * becomes (C, 1, ..., 1) so that it broadcasts. NULL after reporting. */
static Expr *param_along(Imp *imp, Expr *p, uint32_t rank, int64_t axis, const char *what) {
    if (!p) return NULL;
    uint32_t pr = imp_rank(p);
    if (pr == 0) return p;
    if (numel_of(p) == 1) return reshape(imp, p, 0, NULL);
    if (pr != 1) {
        imp_error(imp, "%s must be a scalar or a 1-D tensor, got rank %u", what, pr);
        return NULL;
    }
    int64_t ax;
    if (!norm_axis(imp, axis, rank, "axis", &ax)) return NULL;
    uint32_t n = rank - (uint32_t)ax;
    int64_t *shape = imp_alloc(imp, n * sizeof *shape);
    shape[0] = -1;
    for (uint32_t i = 1; i < n; i++)
        shape[i] = 1;
    return reshape(imp, p, n, shape);
}

/* A parameter that is a scalar in the relation's sense: one-element tensors reshaped to (). */
static Expr *scalar_of(Imp *imp, Expr *p) {
    if (!p || imp_rank(p) == 0) return p;
    return reshape(imp, p, 0, NULL);
}

/* arange(0, n) of int64 for an int64 scalar expression n: a constant when n is one (the core
 * folds only calls of static type, and arange's length is `?`). */
static Expr *iota(Imp *imp, Expr *n) {
    if (!n) return NULL;
    const int64_t *v;
    uint32_t nv;
    if (imp_const_ints(imp, n, &v, &nv) && nv == 1 && v[0] >= 0 && v[0] <= (1 << 24)) {
        int64_t len = v[0], *data = imp_alloc(imp, (size_t)(len ? len : 1) * sizeof *data);
        for (int64_t i = 0; i < len; i++)
            data[i] = i;
        return imp_const_tensor(imp, RLY_DTYPE_I64, 1, &len, data);
    }
    ImpAttrs a = {0};
    ia_str(imp, &a, "dtype", "int64");
    Expr *args[3] = {imp_scalar_i(imp, RLY_DTYPE_I64, 0), n, imp_scalar_i(imp, RLY_DTYPE_I64, 1)};
    return imp_call(imp, "arange", 3, args, &a);
}

/* ==== Resize, Upsample ======================================================================== */

/* Relay's image.resize1d/2d/3d implement the ONNX coordinate modes, but derive every coordinate
 * from the input and output sizes (in / out), while ONNX Resize derives them from the scale
 * (1 / scale, and length_resized = scale * in for align_corners and tf_crop_and_resize). With
 * sizes given the two agree; with scales they agree only when in * scale is an integer. The
 * converter therefore builds the Relay operator when its coordinates (and, for nearest, the
 * chosen pixels) equal the ONNX ones on every output index, which it checks at import by
 * evaluating both formulas; otherwise it composes ONNX's separable interpolation from take,
 * elementwise arithmetic and where, one axis at a time, exactly as the ONNX reference does. The
 * composition also serves scales and sizes known only at run time. */

enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC };
/* Relay's and ONNX's names, in Relay's order. */
enum {
    CT_HALF_PIXEL,
    CT_ALIGN_CORNERS,
    CT_ASYMMETRIC,
    CT_PYTORCH,
    CT_TF_NN,
    CT_TF_CROP,
    CT_HALF_PIXEL_SYM /* Resize-19; Relay has none: resize_matrix only */
};
enum { NM_PREFER_FLOOR, NM_PREFER_CEIL, NM_FLOOR, NM_CEIL };

static const char *const rz_methods[] = {"nearest", "linear", "cubic"};
static const char *const rz_relay_methods[] = {"nearest_neighbor", "linear", "cubic"};
static const char *const rz_modes[] = {
    "half_pixel",           "align_corners",      "asymmetric",          "pytorch_half_pixel",
    "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric"};
static const char *const rz_nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                         "ceil"};

typedef struct ResizeSpec {
    int method, mode, nearest;
    double cubic_a, extrap;
    bool exclude;
    Expr *scales;      /* 1-D float, one per axis, or NULL */
    Expr *sizes;       /* 1-D integer, one per axis, or NULL (one of the two is set) */
    Expr *roi;         /* 1-D float: starts then ends (tf_crop_and_resize), or NULL */
    bool antialias;    /* Resize-18: widen the linear/cubic filter by 1 / scale when downsampling */
    int keep;          /* Resize-18 keep_aspect_ratio_policy: RZ_STRETCH, RZ_NOT_LARGER, ... */
    Expr *fixed_scale; /* with sizes: 1-D float64 scales to use instead of sizes / in, or NULL */
} ResizeSpec;

enum { RZ_STRETCH, RZ_NOT_LARGER, RZ_NOT_SMALLER };
static const char *const rz_keep[] = {"stretch", "not_larger", "not_smaller"};

static int str_choice(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

/* ---- the ONNX and the Relay coordinate of one output index ---- */

/* ONNX's source coordinate of output index x along an axis (in -> out) with scale s;
 * outf = s * in is ONNX's length_resized (out itself when sizes were given); r0, r1 the roi. */
static double onnx_coord(int mode, double x, double in, double out, double s, double outf,
                         double r0, double r1) {
    switch (mode) {
    case CT_HALF_PIXEL: return (x + 0.5) / s - 0.5;
    case CT_ALIGN_CORNERS: return outf == 1.0 ? 0.0 : x * (in - 1) / (outf - 1);
    case CT_ASYMMETRIC: return x / s;
    case CT_PYTORCH: return out > 1.0 ? (x + 0.5) / s - 0.5 : 0.0;
    case CT_TF_NN: return (x + 0.5) / s;
    default: {
        double span = (double)((float)r1 - (float)r0);
        double start = (double)((float)r0 * (float)(in - 1));
        return (outf == 1.0 ? span * (in - 1) / 2 : x * span * (in - 1) / (outf - 1)) + start;
    }
    }
}

/* ONNX's pixel for nearest mode (before clamping). */
static double onnx_nearest(int nearest, double c) {
    switch (nearest) {
    case NM_PREFER_FLOOR: return ceil(c - 0.5);
    case NM_PREFER_CEIL: return floor(c + 0.5);
    case NM_FLOOR: return floor(c);
    default: return ceil(c);
    }
}

/* Relay's (TVM topi's) coordinate, as src/kernels/ref/image_vision.c computes it. */
static double relay_coord(int mode, int64_t x, int64_t in, int64_t out, double start, double end) {
    double xf = (double)x, scale = (double)in / (double)out;
    switch (mode) {
    case CT_HALF_PIXEL: return (xf + 0.5) * scale - 0.5;
    case CT_ALIGN_CORNERS: return out > 1 ? (double)(in - 1) / (double)(out - 1) * xf : 0.0;
    case CT_ASYMMETRIC: return scale * xf;
    case CT_PYTORCH: return out > 1 ? (xf + 0.5) * scale - 0.5 : 0.0;
    case CT_TF_NN: return (xf + 0.5) * scale;
    default:
        return out > 1 ? start * (double)(in - 1) +
                             xf * (end - start) * (double)(in - 1) / (double)(out - 1)
                       : 0.5 * (start + end) * (double)(in - 1);
    }
}

/* Relay's nearest pixel for the rounding method we pass (TVM's floor and ceil allow 1e-5). */
static double relay_nearest(int nearest, double c) {
    switch (nearest) {
    case NM_PREFER_FLOOR: return ceil(c - 0.5);
    case NM_PREFER_CEIL: return floor(c + 0.5);
    case NM_FLOOR: return floor(c + 1e-5);
    default: return ceil(c - 1e-5);
    }
}

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Output extents up to which axis_matches compares every index (a loop over the output axis at
 * import time; past it the composition is used, whose cost is paid only when the model runs). */
#define AXIS_CHECK_MAX ((int64_t)1 << 20)

/* Whether Relay's resize along one axis (in -> out) picks the same pixels with the same weights
 * as ONNX on every output index. int_div: TVM resize2d's integer-division shortcut for
 * nearest-neighbour asymmetric resizes by an integer factor, which ignores the rounding method. */
static bool axis_matches(const ResizeSpec *rs, int64_t in, int64_t out, double s, double outf,
                         double r0, double r1, bool int_div) {
    if (out > AXIS_CHECK_MAX) return false; /* not checked: the composition is exact anyway */
    int64_t factor = in > 0 && out % in == 0 ? out / in : 0;
    bool use_div = int_div && rs->method == RZ_NEAREST && rs->mode == CT_ASYMMETRIC && factor > 0 &&
                   (double)factor <= 1.0 / (1e-5 * (double)in + 1e-5);
    for (int64_t x = 0; x < out; x++) {
        double co = onnx_coord(rs->mode, (double)x, (double)in, (double)out, s, outf, r0, r1);
        double cr = relay_coord(rs->mode, x, in, out, r0, r1);
        if (rs->mode == CT_TF_CROP) {
            bool oo = co < 0 || co > (double)(in - 1), orl = cr < 0 || cr > (double)(in - 1);
            if (oo != orl) return false;
            if (oo) continue;
        }
        if (rs->method == RZ_NEAREST) {
            double po = clampd(onnx_nearest(rs->nearest, co), 0, (double)(in - 1));
            double pr = use_div ? (double)(x / factor)
                                : clampd(relay_nearest(rs->nearest, cr), 0, (double)(in - 1));
            if (po != pr) return false;
        } else if (!(fabs(co - cr) <= 1e-6 * fmax(1.0, fabs(co)))) {
            return false;
        }
    }
    return true;
}

/* image.resize{k}d for the resize of the last k axes of x (rank r, all dims known), when it is
 * exact; NULL (nothing reported) when it is not. */
static Expr *resize_native(Imp *imp, const ResizeSpec *rs, Expr *x, const int64_t *out,
                           const double *scale, const double *outf, const double *roi,
                           const bool *moved) {
    TensorType *t = imp_tt(x);
    uint32_t r = t->ndim;
    const int64_t *in = t->shape;
    if (rs->method != RZ_NEAREST && !sup_dtype_is_float(t->dtype)) return NULL; /* ints round */
    uint32_t lo = r;
    for (uint32_t d = 0; d < r; d++)
        if (moved[d] && lo == r) lo = d;
    uint32_t k = r - lo;
    if (k == 0 || k > 3) return NULL;
    if (r >= 3 && r - 2 >= k && r - 2 <= 3) k = r - 2; /* N, C, spatial: no reshape */
    for (uint32_t d = r - k; d < r; d++)
        if (in[d] < 0) return NULL;
    bool unit_d = false; /* resize2d through resize3d with a unit D axis (no int_div) */
    for (int attempt = 0; attempt < 2; attempt++) {
        bool ok = true;
        for (uint32_t d = r - k; d < r && ok; d++)
            ok = axis_matches(rs, in[d], out[d], scale[d], outf[d], roi ? roi[d] : 0,
                              roi ? roi[r + d] : 1, k == 2 && !unit_d);
        if (ok) break;
        if (attempt == 1 || k != 2 || rs->method != RZ_NEAREST) return NULL;
        unit_d = true;
    }
    /* x as (L0, L1, [1,] spatial...): N and C as they are, or a reshape of known extents */
    uint32_t n_lead = r - k, n_sp = k + (unit_d ? 1 : 0);
    for (uint32_t d = 0; d < n_lead; d++)
        if (in[d] < 0 && n_lead != 2) return NULL;
    int64_t shape[8];
    uint32_t n = 0;
    if (n_lead <= 2) {
        for (uint32_t i = n_lead; i < 2; i++)
            shape[n++] = 1;
        for (uint32_t i = 0; i < n_lead; i++)
            shape[n++] = in[i];
    } else {
        int64_t p = 1;
        for (uint32_t i = 0; i + 1 < n_lead; i++)
            p *= in[i];
        shape[n++] = p;
        shape[n++] = in[n_lead - 1];
    }
    if (unit_d) shape[n++] = 1;
    for (uint32_t d = r - k; d < r; d++)
        shape[n++] = in[d];
    Expr *xr = x;
    ImpAttrs ua = {0};
    ia_int(imp, &ua, "axis", 2);
    if (n_lead != 2)
        xr = reshape(imp, x, n, shape);
    else if (unit_d)
        xr = op1(imp, "expand_dims", x, &ua);
    int64_t size[3];
    double roi_k[6];
    uint32_t j = 0;
    if (unit_d) size[j] = 1, roi_k[j] = 0, roi_k[n_sp + j] = 1, j++;
    for (uint32_t d = r - k; d < r; d++, j++) {
        size[j] = out[d];
        roi_k[j] = roi ? roi[d] : 0;
        roi_k[n_sp + j] = roi ? roi[r + d] : 1;
    }
    static const char *const ops[] = {NULL, "image.resize1d", "image.resize2d", "image.resize3d"};
    ImpAttrs a = {0};
    ia_ints(imp, &a, "size", n_sp, size);
    ia_floats(imp, &a, "roi", 2 * n_sp, roi_k);
    ia_str(imp, &a, "method", rz_relay_methods[rs->method]);
    ia_str(imp, &a, "coordinate_transformation_mode", rz_modes[rs->mode]);
    ia_str(imp, &a, "rounding_method", rz_nearest[rs->nearest]);
    ia_float(imp, &a, "cubic_alpha", rs->cubic_a);
    ia_int(imp, &a, "cubic_exclude", rs->exclude);
    ia_float(imp, &a, "extrapolation_value", rs->extrap);
    Expr *y = op1(imp, ops[n_sp], xr, &a);
    if (n_lead != 2) return reshape(imp, y, r, out);
    if (unit_d) return op1(imp, "squeeze", y, &ua);
    return y;
}

/* ---- the composition ---- */

/* dims of a shape (-1, 1, ..., 1) with n - 1 ones: a vector along axis d of a rank-r tensor. */
static Expr *along(Imp *imp, Expr *v, uint32_t r, uint32_t d) {
    int64_t shape[16];
    uint32_t n = r - d;
    shape[0] = -1;
    for (uint32_t i = 1; i < n; i++)
        shape[i] = 1;
    return reshape(imp, v, n, shape);
}

static Expr *clamp_e(Imp *imp, Expr *v, Expr *hi) {
    return op2(imp, "maximum", op2(imp, "minimum", v, hi), f64(imp, 0.0));
}

/* Resize-18's antialias along axis d at run time, from the source coordinates c (f64, one per
 * output index): the kernel (linear: 1 - |t|, cubic: Keys' with cubic_coeff_a) at
 * t = (i - c) min(s, 1) over input indices i in [-P, in + P) with P = ceil(2 / min(s, 1)) + 2
 * (every tap the reference's window holds), each row normalised (again over the in-range taps
 * with exclude_outside); the taps outside the input fold onto the edge pixels (the reference
 * pads with edge values) by a product with the one-hot clamp matrix, giving the (out, in)
 * weights, applied by nn.dense with axis d last. */
static Expr *resize_axis_aa(Imp *imp, const ResizeSpec *rs, Expr *y, uint32_t r, uint32_t d,
                            Expr *in, Expr *s, Expr *c) {
    bool cubic = rs->method == RZ_CUBIC;
    Expr *one = f64(imp, 1.0), *zero = f64(imp, 0.0), *inf = imp_cast(imp, in, RLY_DTYPE_F64);
    Expr *sp = op2(imp, "minimum", s, one);
    Expr *reach = add(imp, op1(imp, "ceil", dvd(imp, f64(imp, 2.0), sp), NULL), f64(imp, 2.0));
    Expr *ar[3] = {op1(imp, "negative", reach, NULL), add(imp, inf, reach), one};
    for (int k = 0; k < 3; k++)
        if (!ar[k]) return NULL;
    Expr *i = imp_call(imp, "arange", 3, ar, NULL); /* (L,) */
    static const int64_t row[2] = {1, -1}, col[2] = {-1, 1};
    Expr *t = mul(imp, sub(imp, reshape(imp, i, 2, row), reshape(imp, c, 2, col)), sp);
    Expr *at = op1(imp, "abs", t, NULL), *k;
    if (!cubic) {
        k = op2(imp, "maximum", sub(imp, one, at), zero);
    } else {
        double a = rs->cubic_a;
        Expr *a2 = mul(imp, at, at), *a3 = mul(imp, a2, at);
        Expr *near =
            add(imp, sub(imp, mul(imp, f64(imp, a + 2), a3), mul(imp, f64(imp, a + 3), a2)), one);
        Expr *far = sub(imp,
                        add(imp, sub(imp, mul(imp, f64(imp, a), a3), mul(imp, f64(imp, 5 * a), a2)),
                            mul(imp, f64(imp, 8 * a), at)),
                        f64(imp, 4 * a));
        k = where(imp, op2(imp, "less_equal", at, one), near,
                  where(imp, op2(imp, "less", at, f64(imp, 2.0)), far, zero));
    }
    ImpAttrs rs1 = {0};
    int64_t ax1 = 1;
    ia_ints(imp, &rs1, "axis", 1, &ax1);
    ia_bool(imp, &rs1, "keepdims", true);
    Expr *w = dvd(imp, k, op1(imp, "sum", k, &rs1));
    if (rs->exclude) {
        Expr *inr =
            op2(imp, "logical_and", op2(imp, "greater_equal", i, zero), op2(imp, "less", i, inf));
        w = mul(imp, w, reshape(imp, imp_cast(imp, inr, RLY_DTYPE_F64), 2, row));
        Expr *sum = op1(imp, "sum", w, &rs1);
        w = dvd(imp, w, where(imp, op2(imp, "equal", sum, zero), one, sum));
    }
    /* clamp matrix (in, L): row j has a 1 where clip(i, 0, in - 1) == j */
    Expr *ci = op2(imp, "maximum", op2(imp, "minimum", i, sub(imp, inf, one)), zero);
    Expr *cm = op2(imp, "equal", reshape(imp, imp_cast(imp, iota(imp, in), RLY_DTYPE_F64), 2, col),
                   reshape(imp, ci, 2, row));
    Expr *wm = op2(imp, "nn.dense", w, imp_cast(imp, cm, RLY_DTYPE_F64)); /* (out, in) */
    int64_t perm[16], inv[16];
    for (uint32_t q = 0, n = 0; q < r; q++)
        if (q != d) perm[n++] = q;
    perm[r - 1] = d;
    for (uint32_t q = 0; q < r; q++)
        inv[perm[q]] = q;
    Expr *z = op2(imp, "nn.dense", transpose(imp, y, r, perm), wm);
    return transpose(imp, z, r, inv);
}

/* Resize y (rank r) along axis d as ONNX does. in: the input extent (int64 scalar), s: the
 * scale (f64 scalar), out: the output extent (int64 scalar), outf: length_resized (f64 scalar),
 * r0 and r1: the roi (float32 scalars, tf_crop_and_resize only). y is float64 unless nearest. */
static Expr *resize_axis(Imp *imp, const ResizeSpec *rs, Expr *y, uint32_t r, uint32_t d, Expr *in,
                         Expr *s, Expr *out, Expr *outf, Expr *r0, Expr *r1) {
    Expr *xs = imp_cast(imp, iota(imp, out), RLY_DTYPE_F64);
    Expr *inf = imp_cast(imp, in, RLY_DTYPE_F64), *hi = sub(imp, inf, f64(imp, 1.0));
    Expr *half = f64(imp, 0.5), *one = f64(imp, 1.0), *c = NULL, *mask = NULL;
    switch (rs->mode) {
    case CT_HALF_PIXEL: c = sub(imp, dvd(imp, add(imp, xs, half), s), half); break;
    case CT_ALIGN_CORNERS:
        c = where(imp, op2(imp, "equal", outf, one), f64(imp, 0.0),
                  dvd(imp, mul(imp, xs, hi), sub(imp, outf, one)));
        break;
    case CT_ASYMMETRIC: c = dvd(imp, xs, s); break;
    case CT_PYTORCH:
        c = where(imp, op2(imp, "greater", out, imp_scalar_i(imp, RLY_DTYPE_I64, 1)),
                  sub(imp, dvd(imp, add(imp, xs, half), s), half), f64(imp, 0.0));
        break;
    case CT_TF_NN: c = dvd(imp, add(imp, xs, half), s); break;
    case CT_HALF_PIXEL_SYM: {
        /* offset = in / 2 (1 - out / (s in)), then half_pixel */
        Expr *adj = dvd(imp, imp_cast(imp, out, RLY_DTYPE_F64), outf);
        Expr *off = mul(imp, dvd(imp, inf, f64(imp, 2.0)), sub(imp, one, adj));
        c = add(imp, off, sub(imp, dvd(imp, add(imp, xs, half), s), half));
        break;
    }
    default: {
        /* float32 roi arithmetic as the reference's */
        Expr *span = imp_cast(imp, sub(imp, r1, r0), RLY_DTYPE_F64);
        Expr *start = imp_cast(imp, mul(imp, r0, imp_cast(imp, hi, RLY_DTYPE_F32)), RLY_DTYPE_F64);
        Expr *c1 = dvd(imp, mul(imp, mul(imp, xs, span), hi), sub(imp, outf, one));
        Expr *c0 = dvd(imp, mul(imp, span, hi), f64(imp, 2.0));
        c = add(imp, where(imp, op2(imp, "equal", outf, one), c0, c1), start);
        mask =
            op2(imp, "logical_or", op2(imp, "less", c, f64(imp, 0.0)), op2(imp, "greater", c, hi));
        break;
    }
    }
    Expr *res;
    if (rs->antialias && rs->method != RZ_NEAREST) {
        res = resize_axis_aa(imp, rs, y, r, d, in, s, c);
    } else if (rs->method == RZ_NEAREST) {
        static const char *const rnd[] = {"ceil", "floor", "floor", "ceil"};
        Expr *p = c;
        if (rs->nearest == NM_PREFER_FLOOR) p = sub(imp, c, half);
        if (rs->nearest == NM_PREFER_CEIL) p = add(imp, c, half);
        p = op1(imp, rnd[rs->nearest], p, NULL);
        res = take(imp, y, imp_cast(imp, clamp_e(imp, p, hi), RLY_DTYPE_I64), d);
    } else {
        Expr *f = op1(imp, "floor", c, NULL), *t = sub(imp, c, f);
        Expr *w[4];
        int n_taps, first;
        if (rs->method == RZ_LINEAR) {
            n_taps = 2, first = 0;
            w[0] = sub(imp, one, t), w[1] = t;
        } else {
            /* the reference's cubic coefficients for taps floor - 1 .. floor + 2 */
            Expr *a = f64(imp, rs->cubic_a), *a5 = f64(imp, 5 * rs->cubic_a);
            Expr *a8 = f64(imp, 8 * rs->cubic_a), *a4 = f64(imp, 4 * rs->cubic_a);
            Expr *a2 = f64(imp, rs->cubic_a + 2), *a3 = f64(imp, rs->cubic_a + 3);
            Expr *u = add(imp, t, one), *v = sub(imp, one, t), *z = add(imp, v, one);
            n_taps = 4, first = -1;
            w[0] =
                sub(imp, mul(imp, add(imp, mul(imp, sub(imp, mul(imp, a, u), a5), u), a8), u), a4);
            w[1] = add(imp, mul(imp, mul(imp, sub(imp, mul(imp, a2, t), a3), t), t), one);
            w[2] = add(imp, mul(imp, mul(imp, sub(imp, mul(imp, a2, v), a3), v), v), one);
            w[3] =
                sub(imp, mul(imp, add(imp, mul(imp, sub(imp, mul(imp, a, z), a5), z), a8), z), a4);
        }
        Expr *pos[4];
        for (int i = 0; i < n_taps; i++)
            pos[i] = first + i == 0 ? f : add(imp, f, f64(imp, (double)(first + i)));
        if (rs->exclude) {
            Expr *sum = NULL;
            for (int i = 0; i < n_taps; i++) {
                Expr *in_range =
                    op2(imp, "logical_and", op2(imp, "greater_equal", pos[i], f64(imp, 0.0)),
                        op2(imp, "less", pos[i], inf));
                w[i] = mul(imp, w[i], imp_cast(imp, in_range, RLY_DTYPE_F64));
                sum = sum ? add(imp, sum, w[i]) : w[i];
            }
            sum = where(imp, op2(imp, "equal", sum, f64(imp, 0.0)), one, sum);
            for (int i = 0; i < n_taps; i++)
                w[i] = dvd(imp, w[i], sum);
        }
        res = NULL;
        for (int i = 0; i < n_taps; i++) {
            Expr *idx = imp_cast(imp, clamp_e(imp, pos[i], hi), RLY_DTYPE_I64);
            Expr *term = mul(imp, take(imp, y, idx, d), along(imp, w[i], r, d));
            res = res ? add(imp, res, term) : term;
        }
    }
    if (mask) {
        Expr *ev = imp_scalar(imp, res ? imp_dtype(res) : RLY_DTYPE_F64, rs->extrap);
        res = where(imp, along(imp, mask, r, d), ev, res);
    }
    return res;
}

/* Element i of a 1-D tensor as a scalar of dtype dt. */
static Expr *elem(Imp *imp, Expr *v, int64_t i, rly_dtype dt) {
    return imp_cast(imp, take(imp, v, imp_scalar_i(imp, RLY_DTYPE_I64, i), 0), dt);
}

static bool resize_run(Imp *imp, const ResizeSpec *rs, Expr *x) {
    TensorType *t = imp_tt(x);
    if (!t) return imp_error(imp, "X must be a tensor");
    uint32_t r = t->ndim;
    Expr *vec = rs->sizes ? rs->sizes : rs->scales;
    int64_t nv = numel_of(vec);
    if (imp_rank(vec) != 1 || (nv >= 0 && nv != (int64_t)r))
        return imp_error(imp, "%s must be a 1-D tensor of %u values (one per axis of X)",
                         rs->sizes ? "sizes" : "scales", r);
    if (rs->mode == CT_TF_CROP) {
        if (!rs->roi)
            return imp_error(imp, "coordinate_transformation_mode tf_crop_and_resize needs roi");
        int64_t nr = numel_of(rs->roi);
        if (imp_rank(rs->roi) != 1 || (nr >= 0 && nr != 2 * (int64_t)r))
            return imp_error(imp, "roi must be a 1-D tensor of %u values (starts, then ends)",
                             2 * r);
    }
    if (r > 16) return imp_error(imp, "X has rank %u; at most 16 is supported", r);

    /* What is known at import: the parameters' values and the input extents. */
    const double *sv = NULL, *roi = NULL;
    const int64_t *zv = NULL;
    uint32_t n;
    bool known =
        rs->sizes ? imp_const_ints(imp, rs->sizes, &zv, &n) : const_f64s(imp, rs->scales, &sv, &n);
    if (rs->mode == CT_TF_CROP && !const_f64s(imp, rs->roi, &roi, &n)) known = false;
    int64_t out[16];
    double scale[16], outf[16];
    bool moved[16], all_static = known;
    for (uint32_t d = 0; d < r; d++) {
        int64_t in = t->shape[d];
        bool roi_id = !roi || (roi[d] == 0.0 && roi[r + d] == 1.0);
        if (!known) {
            moved[d] = true;
            continue;
        }
        if (zv) {
            if (zv[d] < 0) return imp_error(imp, "sizes[%u] is negative", d);
            if (zv[d] > SUP_DIM_MAX)
                return imp_error(imp, "sizes[%u] is %lld; dims are at most 2^62", d,
                                 (long long)zv[d]);
            out[d] = zv[d];
            moved[d] = !(in >= 0 && zv[d] == in && roi_id);
            if (in > 0) scale[d] = (double)zv[d] / (double)in, outf[d] = (double)zv[d];
        } else {
            if (!(sv[d] > 0.0))
                return imp_error(imp, "scales[%u] is %g; it must be positive", d, sv[d]);
            moved[d] = !(sv[d] == 1.0 && roi_id);
            scale[d] = sv[d];
            if (in >= 0) {
                outf[d] = sv[d] * (double)in;
                /* checked before the conversion, which would be undefined past int64 */
                if (!(outf[d] <= (double)SUP_DIM_MAX))
                    return imp_error(imp,
                                     "scales[%u] is %g: axis %u of size %lld would become %g "
                                     "long; dims are at most 2^62",
                                     d, sv[d], d, (long long)in, outf[d]);
                out[d] = (int64_t)floor(outf[d]);
            }
        }
        if (in < 0 && moved[d]) all_static = false;
        if (in == 0 && moved[d]) return imp_error(imp, "cannot resize the empty axis %u", d);
    }
    if (known) {
        bool any = false;
        for (uint32_t d = 0; d < r; d++)
            any = any || moved[d];
        if (!any) return out1(imp, x);
        if (all_static) {
            char why[160];
            if (sup_shape_check(r, out, false, why, sizeof why) != NULL)
                return imp_error(imp, "the output: %s", why);
            Expr *y = resize_native(imp, rs, x, out, scale, outf, roi, moved);
            if (y) return out1(imp, y);
        }
    }

    /* The composition, one moved axis at a time (the reference's order). */
    rly_dtype dt = t->dtype;
    bool nearest = rs->method == RZ_NEAREST;
    Expr *y = nearest ? x : imp_cast(imp, x, RLY_DTYPE_F64);
    Expr *shape = NULL;
    for (uint32_t d = 0; d < r && y; d++) {
        if (known && !moved[d]) continue;
        Expr *in;
        if (t->shape[d] >= 0) {
            in = imp_scalar_i(imp, RLY_DTYPE_I64, t->shape[d]);
        } else {
            if (!shape) {
                ImpAttrs a = {0};
                ia_str(imp, &a, "dtype", "int64");
                shape = op1(imp, "shape_of", x, &a);
            }
            in = take(imp, shape, imp_scalar_i(imp, RLY_DTYPE_I64, d), 0);
        }
        Expr *inf = imp_cast(imp, in, RLY_DTYPE_F64), *s, *out_e, *outf_e;
        if (rs->sizes && rs->fixed_scale) { /* keep_aspect_ratio_policy's sizes and scale */
            out_e = elem(imp, rs->sizes, d, RLY_DTYPE_I64);
            s = elem(imp, rs->fixed_scale, d, RLY_DTYPE_F64);
            outf_e = mul(imp, s, inf);
        } else if (rs->sizes) {
            out_e = elem(imp, rs->sizes, d, RLY_DTYPE_I64);
            outf_e = imp_cast(imp, out_e, RLY_DTYPE_F64);
            s = dvd(imp, outf_e, inf);
        } else {
            s = imp_cast(imp, elem(imp, rs->scales, d, RLY_DTYPE_F32), RLY_DTYPE_F64);
            outf_e = mul(imp, s, inf);
            out_e = imp_cast(imp, op1(imp, "floor", outf_e, NULL), RLY_DTYPE_I64);
        }
        Expr *r0 = NULL, *r1 = NULL;
        if (rs->mode == CT_TF_CROP) {
            r0 = elem(imp, rs->roi, d, RLY_DTYPE_F32);
            r1 = elem(imp, rs->roi, r + d, RLY_DTYPE_F32);
        }
        y = resize_axis(imp, rs, y, r, d, in, s, out_e, outf_e, r0, r1);
    }
    if (!nearest && dt != RLY_DTYPE_F64) {
        if (!sup_dtype_is_float(dt)) {
            double lo, hi;
            int_range(dt, &lo, &hi);
            y = clip(imp, op1(imp, "round", y, NULL), lo, hi);
        }
        y = imp_cast(imp, y, dt);
    }
    return out1(imp, y);
}

/* The attributes shared by Resize-11/13: false after reporting a bad value. */
static bool resize_attrs(Imp *imp, ResizeSpec *rs) {
    const char *m = imp_attr_str(imp, "mode", "nearest");
    const char *c = imp_attr_str(imp, "coordinate_transformation_mode", "half_pixel");
    const char *nm = imp_attr_str(imp, "nearest_mode", "round_prefer_floor");
    rs->method = str_choice(m, rz_methods, 3);
    rs->mode = str_choice(c, rz_modes, imp_opset(imp) >= 19 ? 7 : 6);
    rs->nearest = str_choice(nm, rz_nearest, 4);
    if (rs->method < 0)
        return imp_error(imp, "mode '%s' is not supported (nearest, linear, cubic)", m);
    if (rs->mode < 0)
        return imp_error(imp, "coordinate_transformation_mode '%s' is not supported", c);
    if (rs->nearest < 0) return imp_error(imp, "nearest_mode '%s' is not supported", nm);
    rs->cubic_a = imp_attr_float(imp, "cubic_coeff_a", -0.75);
    rs->exclude = imp_attr_int(imp, "exclude_outside", 0) != 0;
    rs->extrap = imp_attr_float(imp, "extrapolation_value", 0.0);
    return true;
}

/* Resize's roi, scales and sizes inputs (an empty tensor stands for an absent one): sizes wins
 * over scales, one of them is needed, roi is read only by tf_crop_and_resize. */
static bool resize_inputs(Imp *imp, ResizeSpec *rs) {
    rs->roi = given(imp_in(imp, 1));
    rs->scales = given(imp_in(imp, 2));
    rs->sizes = given(imp_in(imp, 3));
    if (rs->sizes) rs->scales = NULL;
    if (!rs->scales && !rs->sizes) return imp_error(imp, "one of scales and sizes must be given");
    if (rs->mode != CT_TF_CROP) rs->roi = NULL;
    return true;
}

/* Resize-11 and -13: X, roi, scales, sizes. */
static bool conv_resize(Imp *imp) {
    ResizeSpec rs = {0};
    if (!resize_attrs(imp, &rs)) return false;
    Expr *x = imp_in_req(imp, 0, "X");
    if (!x) return false;
    if (!resize_inputs(imp, &rs)) return false;
    return resize_run(imp, &rs, x);
}

/* ---- Resize-18/19: antialias, keep_aspect_ratio_policy, axes, half_pixel_symmetric ---- */

/* ONNX's source coordinate (the reference's _compute_x_ori); *outside: tf_crop_and_resize
 * coordinates outside the input, which take extrapolation_value. */
static double rz_coord18(int mode, double x, double in, double scale, double out_int, double r0,
                         double r1, bool *outside) {
    double outw = scale * in;
    *outside = false;
    switch (mode) {
    case CT_ALIGN_CORNERS: return outw == 1.0 ? 0.0 : x * (in - 1) / (outw - 1);
    case CT_ASYMMETRIC: return x / scale;
    case CT_PYTORCH: return outw == 1.0 ? -0.5 : (x + 0.5) / scale - 0.5;
    case CT_TF_NN: return (x + 0.5) / scale;
    case CT_HALF_PIXEL_SYM: {
        double adj = out_int / outw, center = in / 2;
        return center * (1 - adj) + (x + 0.5) / scale - 0.5;
    }
    case CT_TF_CROP: {
        double c = outw == 1.0 ? (r1 - r0) * (in - 1) / 2 : x * (r1 - r0) * (in - 1) / (outw - 1);
        c += r0 * (in - 1);
        *outside = c < 0 || c > in - 1;
        return c;
    }
    default: return (x + 0.5) / scale - 0.5;
    }
}

/* The reference's cubic kernel at distance x. */
static double rz_cubic(double x, double a) {
    x = fabs(x);
    if (x <= 1) return (a + 2) * x * x * x - (a + 3) * x * x + 1;
    if (x < 2) return a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
    return 0.0;
}

/* The taps of one output index: n coefficients for input indices b + first + k (b the pixel
 * left of the coordinate, ratio in (0, 1] its distance from it); the reference's get_coeffs.
 * n <= cap (checked by the caller: 4 + 4 / scale). */
static int rz_taps(const ResizeSpec *rs, double ratio, double scale, double *c, int *first) {
    if (rs->method == RZ_NEAREST) {
        bool hi = ratio == 1.0;
        if (!hi) {
            switch (rs->nearest) {
            case NM_PREFER_FLOOR: hi = ratio > 0.5; break;
            case NM_PREFER_CEIL: hi = ratio >= 0.5; break;
            case NM_FLOOR: hi = false; break;
            default: hi = true; break;
            }
        }
        c[0] = hi ? 0 : 1, c[1] = hi ? 1 : 0, *first = 0;
        return 2;
    }
    double a = rs->cubic_a;
    if (!rs->antialias) {
        if (rs->method == RZ_LINEAR) {
            c[0] = 1 - ratio, c[1] = ratio, *first = 0;
            return 2;
        }
        double u = ratio + 1, v = 1 - ratio, z = v + 1;
        c[0] = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a;
        c[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
        c[2] = ((a + 2) * v - (a + 3)) * v * v + 1;
        c[3] = ((a * z - 5 * a) * z + 8 * a) * z - 4 * a;
        *first = -1;
        return 4;
    }
    double s = scale < 1.0 ? scale : 1.0, sum = 0;
    int start = (int)floor((rs->method == RZ_LINEAR ? -1.0 : -2.0) / s) + 1, n = 2 - 2 * start;
    for (int k = 0; k < n; k++) {
        double t = (start + k - ratio) * s;
        if (rs->method == RZ_LINEAR) {
            t = 1 - fabs(t);
            c[k] = t < 0 ? 0 : t > 1 ? 1 : t;
        } else {
            c[k] = rz_cubic(t, a);
        }
        sum += c[k];
    }
    for (int k = 0; k < n; k++)
        c[k] /= sum;
    *first = start;
    return n;
}

/* Interpolation matrices at most this many elements (out x in per axis). */
#define RZ_MATRIX_MAX ((int64_t)1 << 24)

/* Resize x (static shape) to out[] with scales scale[] (roi: 2r values or NULL) as the ONNX
 * reference does, one moved axis at a time: the weights of each axis are computed here into an
 * (out, in) matrix (the reference's taps, edge-clamped, exclude_outside renormalised) and
 * applied by nn.dense in float64 with x's axis last. Serves the Resize-18/19 features Relay's
 * image.resize lacks (antialias, half_pixel_symmetric, keep_aspect_ratio_policy's rounded
 * sizes) and needs the parameters at import. */
static bool resize_matrix(Imp *imp, const ResizeSpec *rs, Expr *x, const int64_t *out,
                          const double *scale, const double *roi) {
    TensorType *t = imp_tt(x);
    uint32_t r = t->ndim;
    rly_dtype dt = t->dtype;
    Expr *y = imp_cast(imp, x, RLY_DTYPE_F64);
    for (uint32_t d = 0; d < r && y; d++) {
        int64_t in = t->shape[d], no = out[d];
        double r0 = roi ? roi[d] : 0.0, r1 = roi ? roi[r + d] : 1.0;
        bool roi_id = !roi || (r0 == 0.0 && r1 == 1.0);
        if (fabs(scale[d] - 1.0) <= 1e-9 && no == in && roi_id) continue;
        if (in == 0) return imp_error(imp, "cannot resize the empty axis %u", d);
        if (!(scale[d] > 0.0))
            return imp_error(imp, "the scale of axis %u is %g; it must be positive", d, scale[d]);
        double cap_taps = 4.0 + 4.0 / (scale[d] < 1.0 ? scale[d] : 1.0);
        if (no > RZ_MATRIX_MAX / in || cap_taps > (double)RZ_MATRIX_MAX)
            return imp_error(imp,
                             "axis %u: resizing %lld to %lld elements is too large for "
                             "this form (at most 2^24 weights per axis)",
                             d, (long long)in, (long long)no);
        int cap = (int)cap_taps;
        double *w = imp_alloc(imp, (size_t)(no * in + 1) * sizeof(double));
        double *c = imp_alloc(imp, (size_t)cap * sizeof(double));
        bool *outside = imp_alloc(imp, (size_t)no + 1);
        bool any_out = false;
        memset(w, 0, (size_t)(no * in) * sizeof(double));
        for (int64_t o = 0; o < no; o++) {
            double co = rz_coord18(rs->mode, (double)o, (double)in, scale[d], (double)no,
                                   (double)(float)r0, (double)(float)r1, &outside[o]);
            any_out = any_out || outside[o];
            double fl = floor(co), ratio = co == fl ? 1.0 : co - fl;
            int64_t b = co == fl ? (int64_t)fl - 1 : (int64_t)fl;
            int first, n = rz_taps(rs, ratio, scale[d], c, &first);
            RLY_CHECK(n <= cap, "resize taps %d over %d", n, cap);
            if (rs->exclude) {
                double sum = 0;
                for (int k = 0; k < n; k++) {
                    int64_t i = b + first + k;
                    if (i < 0 || i >= in) c[k] = 0;
                    sum += c[k];
                }
                for (int k = 0; k < n && sum != 0; k++)
                    c[k] /= sum;
            }
            for (int k = 0; k < n; k++) {
                int64_t i = b + first + k;
                i = i < 0 ? 0 : i >= in ? in - 1 : i;
                w[o * in + i] += c[k];
            }
        }
        /* y with axis d last, times w transposed, and back */
        int64_t *perm = imp_alloc(imp, r * sizeof(int64_t)),
                *inv = imp_alloc(imp, r * sizeof(int64_t));
        for (uint32_t i = 0, k = 0; i < r; i++)
            if (i != d) perm[k++] = i;
        perm[r - 1] = d;
        for (uint32_t i = 0; i < r; i++)
            inv[perm[i]] = i;
        int64_t wshape[2] = {no, in};
        Expr *wm = imp_const_tensor(imp, RLY_DTYPE_F64, 2, wshape, w);
        Expr *z = op2(imp, "nn.dense", transpose(imp, y, r, perm), wm);
        z = transpose(imp, z, r, inv);
        if (any_out && z) {
            uint8_t *m = imp_alloc(imp, (size_t)no + 1);
            for (int64_t o = 0; o < no; o++)
                m[o] = outside[o];
            Expr *mask = imp_const_tensor(imp, RLY_DTYPE_BOOL, 1, &no, m);
            z = where(imp, along(imp, mask, r, d), f64(imp, rs->extrap), z);
        }
        y = z;
    }
    if (y && dt != RLY_DTYPE_F64) {
        if (!sup_dtype_is_float(dt)) {
            double lo, hi;
            int_range(dt, &lo, &hi);
            y = clip(imp, op1(imp, "round", y, NULL), lo, hi);
        }
        y = imp_cast(imp, y, dt);
    }
    return y ? out1(imp, y) : false;
}

/* A 1-D tensor of n entries for every axis of a rank-r tensor from v, which holds one entry per
 * listed axis (Resize-18 `axes`; twice that for roi: starts, then ends): entry axes[j] is v[j]
 * (v[na + j] for the ends), every other entry fill(axis). Folds when v is a constant. */
static Expr *rz_expand(Imp *imp, Expr *v, uint32_t r, uint32_t na, const int64_t *axes, int halves,
                       Expr *(*fill)(Imp *, Expr *, uint32_t, int), Expr *x) {
    Expr **parts = imp_alloc(imp, (size_t)(halves * r + 1) * sizeof(Expr *));
    for (int h = 0; h < halves; h++)
        for (uint32_t d = 0; d < r; d++) {
            int64_t j = -1;
            for (uint32_t k = 0; k < na; k++)
                if (axes[k] == (int64_t)d) j = k;
            Expr *e;
            if (j >= 0) {
                int64_t idx = (int64_t)h * na + j;
                e = take(imp, v, imp_const_i64s(imp, 1, &idx), 0);
            } else {
                e = fill(imp, x, d, h);
            }
            if (e == NULL) return NULL;
            parts[h * r + d] = e;
        }
    return concat(imp, halves * r, parts, 0);
}

static Expr *fill_scale(Imp *imp, Expr *x, uint32_t d, int h) {
    (void)x, (void)d, (void)h;
    float one = 1.0f;
    int64_t n = 1;
    return imp_const_tensor(imp, RLY_DTYPE_F32, 1, &n, &one);
}

static Expr *fill_roi(Imp *imp, Expr *x, uint32_t d, int h) {
    (void)x, (void)d;
    float v = h ? 1.0f : 0.0f;
    int64_t n = 1;
    return imp_const_tensor(imp, RLY_DTYPE_F32, 1, &n, &v);
}

static Expr *fill_size(Imp *imp, Expr *x, uint32_t d, int h) {
    (void)h;
    int64_t dim = imp_tt(x)->shape[d];
    if (dim >= 0) return imp_const_i64s(imp, 1, &dim);
    ImpAttrs a = {0};
    ia_str(imp, &a, "dtype", "int64");
    int64_t idx = d;
    return take(imp, op1(imp, "shape_of", x, &a), imp_const_i64s(imp, 1, &idx), 0);
}

/* Resize-18 and -19: Resize-13 plus antialias, axes and keep_aspect_ratio_policy (18) and
 * half_pixel_symmetric (19). The features Relay lacks go through resize_matrix. */
static bool conv_resize18(Imp *imp) {
    ResizeSpec rs = {0};
    if (!resize_attrs(imp, &rs)) return false;
    Expr *x = imp_in_req(imp, 0, "X");
    if (!x) return false;
    TensorType *t = imp_tt(x);
    if (!t) return imp_error(imp, "X must be a tensor");
    uint32_t r = t->ndim;
    if (!resize_inputs(imp, &rs)) return false;
    rs.antialias = imp_attr_int(imp, "antialias", 0) != 0;
    const char *keep = imp_attr_str(imp, "keep_aspect_ratio_policy", "stretch");
    rs.keep = str_choice(keep, rz_keep, 3);
    if (rs.keep < 0) return imp_error(imp, "keep_aspect_ratio_policy '%s' is not supported", keep);
    if (rs.antialias && rs.method == RZ_NEAREST)
        return imp_error(imp, "antialias applies to linear and cubic modes only");
    const int64_t *ax_attr;
    uint32_t na = imp_attr_ints(imp, "axes", &ax_attr);
    int64_t *axes = imp_alloc(imp, (r + 1) * sizeof(int64_t));
    for (uint32_t j = 0; j < na; j++) {
        if (!norm_axis(imp, ax_attr[j], r, "axes", &axes[j])) return false;
        for (uint32_t k = 0; k < j; k++)
            if (axes[k] == axes[j])
                return imp_error(imp, "axes lists axis %lld twice", (long long)axes[j]);
    }
    if (imp_attr(imp, "axes") == NULL) {
        na = r;
        for (uint32_t d = 0; d < r; d++)
            axes[d] = d;
    }
    Expr *vec = rs.sizes ? rs.sizes : rs.scales;
    int64_t nv = numel_of(vec);
    if (imp_rank(vec) != 1 || (nv >= 0 && nv != (int64_t)na))
        return imp_error(imp, "%s must be a 1-D tensor of %u values (one per axis in axes)",
                         rs.sizes ? "sizes" : "scales", na);
    if (rs.roi) {
        int64_t nr = numel_of(rs.roi);
        if (imp_rank(rs.roi) != 1 || (nr >= 0 && nr != 2 * (int64_t)na))
            return imp_error(imp, "roi must be a 1-D tensor of %u values (starts, then ends)",
                             2 * na);
    }
    /* sizes with a policy other than stretch: one scale for the listed axes (the least or the
     * greatest of sizes / in), each listed size round(scale * in); needs sizes at import */
    const int64_t *zv = NULL;
    uint32_t n;
    int64_t *out = imp_alloc(imp, (r + 1) * sizeof(int64_t));
    double *scale = imp_alloc(imp, (r + 1) * sizeof(double));
    bool keep_sizes = rs.sizes && rs.keep != RZ_STRETCH;
    bool need_matrix = rs.antialias || rs.mode == CT_HALF_PIXEL_SYM || keep_sizes;
    /* the matrix form needs X's shape and the parameters at import */
    bool can_matrix = true;
    for (uint32_t d = 0; d < r; d++)
        can_matrix = can_matrix && t->shape[d] >= 0;
    can_matrix = can_matrix && imp_const(rs.sizes ? rs.sizes : rs.scales) != NULL &&
                 (!rs.roi || imp_const(rs.roi) != NULL);
    if (keep_sizes && !can_matrix) {
        /* at run time: the scale is the least (not_larger) or greatest (not_smaller) of
         * sizes[j] / in over the listed axes; a listed axis becomes floor(scale in + 0.5) */
        Expr *sz = imp_cast(imp, rs.sizes, RLY_DTYPE_F64);
        Expr **q = imp_alloc(imp, sizeof(Expr *) * (na + 1));
        Expr **outs = imp_alloc(imp, sizeof(Expr *) * (r + 1));
        Expr **scs = imp_alloc(imp, sizeof(Expr *) * (r + 1));
        ImpAttrs a = {0};
        ia_str(imp, &a, "dtype", "int64");
        Expr *shape = op1(imp, "shape_of", x, &a);
        for (uint32_t j = 0; j < na; j++) {
            Expr *in = imp_cast(imp, take(imp, shape, imp_scalar_i(imp, RLY_DTYPE_I64, axes[j]), 0),
                                RLY_DTYPE_F64);
            q[j] = dvd(imp, take(imp, sz, imp_scalar_i(imp, RLY_DTYPE_I64, j), 0), in);
            int64_t one = 1;
            q[j] = reshape(imp, q[j], 1, &one);
            if (q[j] == NULL) return false;
        }
        Expr *sc = op1(imp, rs.keep == RZ_NOT_LARGER ? "min" : "max", concat(imp, na, q, 0), NULL);
        int64_t one = 1;
        for (uint32_t d = 0; d < r; d++) {
            Expr *in = take(imp, shape, imp_scalar_i(imp, RLY_DTYPE_I64, d), 0);
            bool listed = false;
            for (uint32_t j = 0; j < na; j++)
                listed = listed || axes[j] == (int64_t)d;
            Expr *o = listed ? imp_cast(imp,
                                        op1(imp, "floor",
                                            add(imp, mul(imp, sc, imp_cast(imp, in, RLY_DTYPE_F64)),
                                                f64(imp, 0.5)),
                                            NULL),
                                        RLY_DTYPE_I64)
                             : in;
            outs[d] = reshape(imp, o, 1, &one);
            scs[d] = reshape(imp, listed ? sc : f64(imp, 1.0), 1, &one);
            if (!outs[d] || !scs[d]) return false;
        }
        rs.sizes = concat(imp, r, outs, 0);
        rs.fixed_scale = concat(imp, r, scs, 0);
        if (rs.roi)
            rs.roi =
                rz_expand(imp, imp_cast(imp, rs.roi, RLY_DTYPE_F32), r, na, axes, 2, fill_roi, x);
        if (!rs.sizes || !rs.fixed_scale || (rs.mode == CT_TF_CROP && !rs.roi)) return false;
        return resize_run(imp, &rs, x);
    }
    if (keep_sizes) {
        if (!imp_const_ints(imp, rs.sizes, &zv, &n))
            return imp_error(imp, "keep_aspect_ratio_policy '%s' needs sizes known at import",
                             keep);
        double sc = 0;
        for (uint32_t j = 0; j < na; j++) {
            int64_t in = t->shape[axes[j]];
            if (in <= 0)
                return imp_error(imp,
                                 "keep_aspect_ratio_policy '%s' needs axis %lld static and "
                                 "nonzero",
                                 keep, (long long)axes[j]);
            double q = (double)zv[j] / (double)in;
            if (j == 0 || (rs.keep == RZ_NOT_LARGER ? q < sc : q > sc)) sc = q;
        }
        for (uint32_t d = 0; d < r; d++)
            scale[d] = 1.0, out[d] = t->shape[d];
        for (uint32_t j = 0; j < na; j++) {
            scale[axes[j]] = sc;
            out[axes[j]] = (int64_t)(sc * (double)t->shape[axes[j]] + 0.5);
        }
    }
    /* every axis: unlisted ones keep their size (scale 1, roi 0..1) */
    if (na != r || imp_attr(imp, "axes") != NULL) {
        if (rs.scales) rs.scales = rz_expand(imp, rs.scales, r, na, axes, 1, fill_scale, x);
        if (rs.sizes)
            rs.sizes = rz_expand(imp, imp_cast(imp, rs.sizes, RLY_DTYPE_I64), r, na, axes, 1,
                                 fill_size, x);
        if (rs.roi)
            rs.roi =
                rz_expand(imp, imp_cast(imp, rs.roi, RLY_DTYPE_F32), r, na, axes, 2, fill_roi, x);
        if ((rs.scales == NULL && rs.sizes == NULL) || (rs.mode == CT_TF_CROP && !rs.roi))
            return false;
    }
    if (!need_matrix || !can_matrix) return resize_run(imp, &rs, x); /* composition */
    /* resize_matrix: everything known at import */
    const double *sv = NULL, *roi = NULL;
    for (uint32_t d = 0; d < r; d++)
        if (t->shape[d] < 0)
            return imp_error(imp, "%s needs X's shape at import (axis %u is dynamic)",
                             rs.antialias ? "antialias"
                             : keep_sizes ? "keep_aspect_ratio_policy"
                                          : "half_pixel_symmetric",
                             d);
    if (rs.mode == CT_TF_CROP && (!rs.roi || !const_f64s(imp, rs.roi, &roi, &n)))
        return imp_error(imp, "roi must be known at import here");
    if (!keep_sizes) {
        if (rs.sizes) {
            if (!imp_const_ints(imp, rs.sizes, &zv, &n))
                return imp_error(imp, "sizes must be known at import here");
            for (uint32_t d = 0; d < r; d++) {
                if (zv[d] < 0 || zv[d] > SUP_DIM_MAX)
                    return imp_error(imp, "sizes[%u] is %lld", d, (long long)zv[d]);
                out[d] = zv[d];
                scale[d] = t->shape[d] ? (double)zv[d] / (double)t->shape[d] : 1.0;
            }
        } else {
            if (!const_f64s(imp, rs.scales, &sv, &n))
                return imp_error(imp, "scales must be known at import here");
            for (uint32_t d = 0; d < r; d++) {
                if (!(sv[d] > 0.0))
                    return imp_error(imp, "scales[%u] is %g; it must be positive", d, sv[d]);
                double o = sv[d] * (double)t->shape[d];
                if (!(o <= (double)SUP_DIM_MAX))
                    return imp_error(imp, "scales[%u] is %g: the output is too large", d, sv[d]);
                scale[d] = sv[d], out[d] = (int64_t)floor(o);
            }
        }
    }
    char why[160];
    if (sup_shape_check(r, out, false, why, sizeof why) != NULL)
        return imp_error(imp, "the output: %s", why);
    return resize_matrix(imp, &rs, x, out, scale, roi);
}

/* Upsample-7/9 and Resize-10: asymmetric coordinates, nearest rounding down (TVM's and ONNX
 * Runtime's reading of these opsets). */
static bool resize_legacy(Imp *imp, Expr *x, Expr *scales) {
    const char *m = imp_attr_str(imp, "mode", "nearest");
    ResizeSpec rs = {0};
    rs.mode = CT_ASYMMETRIC;
    rs.nearest = NM_FLOOR;
    rs.cubic_a = -0.75;
    if (strcmp(m, "nearest") == 0)
        rs.method = RZ_NEAREST;
    else if (strcmp(m, "linear") == 0 || strcmp(m, "bilinear") == 0)
        rs.method = RZ_LINEAR;
    else
        return imp_error(imp, "mode '%s' is not supported (nearest, linear)", m);
    rs.scales = scales;
    return resize_run(imp, &rs, x);
}

static bool conv_resize10(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *s = imp_in_req(imp, 1, "scales");
    return x && s && resize_legacy(imp, x, s);
}

static bool conv_upsample7(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X");
    const float *f;
    uint32_t n = imp_attr_floats(imp, "scales", &f);
    if (!x) return false;
    if (n == 0) return imp_error(imp, "attribute scales is required");
    float *v = imp_alloc(imp, n * sizeof *v);
    memcpy(v, f, n * sizeof *v);
    int64_t len = n;
    Expr *s = imp_const_tensor(imp, RLY_DTYPE_F32, 1, &len, v);
    return resize_legacy(imp, x, s);
}

static bool conv_upsample9(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *s = imp_in_req(imp, 1, "scales");
    return x && s && resize_legacy(imp, x, s);
}

/* ==== GridSample ============================================================================== */

/* GridSample-16: X (N, C, H, W), grid (N, Ho, Wo, 2) with (x, y) last. Relay's
 * image.grid_sample takes the grid as (N, 2, Ho, Wo) and implements PyTorch's grid_sampler,
 * whose modes, padding modes and align_corners ONNX adopts, except that ONNX (its reference and
 * ONNX Runtime) moves an out-of-range coordinate onto the border before bicubic sampling with
 * padding_mode border; that step is applied to the grid here. (For reflection the two orders
 * give the same taps with mirrored weights, hence the same value.) */
/* GridSample-20 over k spatial axes (used for 3-D: image.grid_sample is 2-D), as the reference
 * computes it: grid (N, O..., k), component j indexing spatial axis k - 1 - j, unnormalized
 * ((g + 1) (S - 1) / 2 with align_corners, else ((g + 1) S - 1) / 2); a coordinate outside
 * [-0.5, S - 0.5] ([0, S - 1] with align_corners) is clamped (border) or reflected
 * (reflection); nearest rounds half to even, linear weighs the 2^k corners. Corners outside the
 * input read 0 (zeros) or the edge. The corners' flat indices gather from X as (N, C, S...)
 * flattened. X's spatial dims must be static. */
static bool grid_sample_nd(Imp *imp, Expr *x, Expr *g, int method, int pad, bool align) {
    TensorType *tx = imp_tt(x), *tg = imp_tt(g);
    uint32_t k = tx->ndim - 2;
    if (tg->ndim != k + 2 || tg->shape[k + 1] != (int64_t)k)
        return imp_error(imp, "grid must be (N, O..., %u) for a %u-D X", k, k + 2);
    if (method == 2) return imp_error(imp, "cubic sampling is 2-D only");
    int64_t spatial = 1;
    for (uint32_t a = 0; a < k; a++) {
        if (tx->shape[2 + a] < 1) return imp_error(imp, "X's spatial dims must be static");
        spatial *= tx->shape[2 + a];
    }
    if (tx->shape[0] < 0 || tx->shape[1] < 0) return imp_error(imp, "X's N and C must be static");
    for (uint32_t a = 0; a + 1 < tg->ndim; a++)
        if (tg->shape[a] < 0) return imp_error(imp, "grid's shape must be static");
    rly_dtype dt = tx->dtype;
    Expr *c[3]; /* coordinate along spatial axis a, (N, O...) f64 */
    for (uint32_t j = 0; j < k; j++) {
        uint32_t a = k - 1 - j;
        double sz = (double)tx->shape[2 + a];
        Expr *gj =
            imp_cast(imp, take(imp, g, imp_scalar_i(imp, RLY_DTYPE_I64, j), k + 1), RLY_DTYPE_F64);
        Expr *v =
            align
                ? mul(imp, dvd(imp, add(imp, gj, f64(imp, 1)), f64(imp, 2)), f64(imp, sz - 1))
                : dvd(imp, sub(imp, mul(imp, add(imp, gj, f64(imp, 1)), f64(imp, sz)), f64(imp, 1)),
                      f64(imp, 2));
        double lo = align ? 0 : -0.5, hi = align ? sz - 1 : sz - 0.5;
        Expr *out = op2(imp, "logical_or", op2(imp, "less", v, f64(imp, lo)),
                        op2(imp, "greater", v, f64(imp, hi)));
        if (pad == 1) { /* border */
            v = where(imp, out, clip(imp, v, 0, sz - 1), v);
        } else if (pad == 2) { /* reflection by the near border until inside */
            double rng = hi - lo;
            Expr *below = op2(imp, "less", v, f64(imp, lo));
            Expr *dx = where(imp, below, sub(imp, f64(imp, lo), v), sub(imp, v, f64(imp, hi)));
            Expr *nr = op1(imp, "floor", dvd(imp, dx, f64(imp, rng)), NULL);
            Expr *r = sub(imp, dx, mul(imp, nr, f64(imp, rng)));
            Expr *even = op2(imp, "equal", op2(imp, "floor_mod", nr, f64(imp, 2)), f64(imp, 0));
            Expr *from_lo = add(imp, f64(imp, lo), r), *from_hi = sub(imp, f64(imp, hi), r);
            Expr *rv = where(imp, below, where(imp, even, from_lo, from_hi),
                             where(imp, even, from_hi, from_lo));
            v = rng > 0 ? where(imp, out, rv, v) : v;
        }
        c[a] = v;
    }
    int64_t n = tx->shape[0], ch = tx->shape[1], pts = 1;
    for (uint32_t a = 0; a + 1 < tg->ndim - 1; a++)
        pts *= tg->shape[1 + a];
    int64_t xs[3] = {n, ch, spatial}, is[3] = {n, 1, pts}, bs[3] = {n, ch, pts};
    Expr *xf = reshape(imp, imp_cast(imp, x, RLY_DTYPE_F64), 3, xs);
    uint32_t n_corner = method == 1 ? 1u : 1u << k;
    Expr *acc = NULL;
    for (uint32_t q = 0; q < n_corner; q++) {
        Expr *flat = NULL, *wt = NULL, *ok = NULL;
        int64_t stride = 1;
        for (int32_t a = (int32_t)k - 1; a >= 0; a--) {
            double sz = (double)tx->shape[2 + a];
            Expr *idx, *w = NULL;
            if (method == 1) {
                idx = op1(imp, "round", c[a], NULL);
            } else {
                Expr *f = op1(imp, "floor", c[a], NULL), *fr = sub(imp, c[a], f);
                bool up = (q >> a) & 1;
                idx = up ? add(imp, f, f64(imp, 1)) : f;
                w = up ? fr : sub(imp, f64(imp, 1), fr);
            }
            Expr *in = op2(imp, "logical_and", op2(imp, "greater_equal", idx, f64(imp, 0)),
                           op2(imp, "less_equal", idx, f64(imp, sz - 1)));
            ok = ok ? op2(imp, "logical_and", ok, in) : in;
            Expr *ci = mul(imp, clip(imp, idx, 0, sz - 1), f64(imp, (double)stride));
            flat = flat ? add(imp, flat, ci) : ci;
            if (w) wt = wt ? mul(imp, wt, w) : w;
            stride *= tx->shape[2 + a];
        }
        if (pad == 0) { /* zeros: corners outside read 0 */
            Expr *okf = imp_cast(imp, ok, RLY_DTYPE_F64);
            wt = wt ? mul(imp, wt, okf) : okf;
        }
        Expr *ii = reshape(imp, imp_cast(imp, flat, RLY_DTYPE_I64), 3, is);
        ImpAttrs bt = {0}, ga = {0};
        ia_ints(imp, &bt, "shape", 3, bs);
        ia_int(imp, &ga, "axis", 2);
        ii = op1(imp, "broadcast_to", ii, &bt);
        Expr *v = xf && ii ? imp_call2(imp, "gather", xf, ii, &ga) : NULL;
        if (wt) v = mul(imp, v, reshape(imp, wt, 3, is));
        if (v == NULL) return false;
        acc = acc ? add(imp, acc, v) : v;
    }
    int64_t os[8] = {n, ch};
    for (uint32_t a = 0; a < k; a++)
        os[2 + a] = tg->shape[1 + a];
    return out1(imp, imp_cast(imp, reshape(imp, acc, k + 2, os), dt));
}

static bool conv_grid_sample(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *g = imp_in_req(imp, 1, "grid");
    if (!x || !g) return false;
    const char *mode = imp_attr_str(imp, "mode", imp_opset(imp) >= 20 ? "linear" : "bilinear");
    const char *pad = imp_attr_str(imp, "padding_mode", "zeros");
    static const char *const modes[] = {"bilinear", "nearest", "bicubic"};
    if (imp_opset(imp) >= 20) { /* GridSample-20 names the modes linear and cubic (N-D) */
        if (strcmp(mode, "linear") == 0)
            mode = "bilinear";
        else if (strcmp(mode, "cubic") == 0)
            mode = "bicubic";
        else if (strcmp(mode, "nearest") != 0)
            return imp_error(imp, "mode '%s' is not supported (linear, nearest, cubic)", mode);
    }
    static const char *const pads[] = {"zeros", "border", "reflection"};
    if (str_choice(mode, modes, 3) < 0)
        return imp_error(imp, "mode '%s' is not supported (bilinear, nearest, bicubic)", mode);
    if (str_choice(pad, pads, 3) < 0)
        return imp_error(imp, "padding_mode '%s' is not supported (zeros, border, reflection)",
                         pad);
    if (imp_opset(imp) >= 20 && imp_rank(x) == 5)
        return grid_sample_nd(imp, x, g, str_choice(mode, modes, 3), str_choice(pad, pads, 3),
                              imp_attr_int(imp, "align_corners", 0) != 0);
    if (imp_rank(x) != 4 || imp_rank(g) != 4)
        return imp_error(imp, "X and grid must be 4-D%s, got ranks %u and %u",
                         imp_opset(imp) >= 20 ? " or 5-D" : "", imp_rank(x), imp_rank(g));
    bool align = imp_attr_int(imp, "align_corners", 0) != 0;
    static const int64_t perm[4] = {0, 3, 1, 2};
    Expr *gt;
    if (strcmp(mode, "bicubic") == 0 && strcmp(pad, "border") == 0) {
        /* ONNX moves a coordinate beyond the border (outside [-1, 1] normalized) onto the edge
         * pixel before the bicubic taps are taken (and clamped); Relay clamps only the taps. So
         * the grid is clamped here: to +-1 with align_corners, else to the normalized centres
         * of the first and last pixel. */
        TensorType *tx = imp_tt(x);
        Expr *ch[2];
        for (int q = 0; q < 2; q++) {
            int64_t extent = tx->shape[3 - q]; /* channel 0 is x (W), 1 is y (H) */
            if (extent < 1 && !align)
                return imp_error(imp, "bicubic border sampling needs known spatial extents");
            rly_dtype gd = imp_dtype(g);
            Expr *c = take(imp, g, imp_scalar_i(imp, RLY_DTYPE_I64, q), 3);
            double lo = align ? -1.0 : 1.0 / (double)extent - 1.0, hi = align ? 1.0 : -lo;
            Expr *m1 = imp_scalar(imp, gd, -1.0), *p1 = imp_scalar(imp, gd, 1.0);
            c = where(imp, op2(imp, "less", c, m1), imp_scalar(imp, gd, lo), c);
            ch[q] = where(imp, op2(imp, "greater", c, p1), imp_scalar(imp, gd, hi), c);
        }
        ImpAttrs sa = {0};
        ia_int(imp, &sa, "axis", 1);
        gt = ch[0] && ch[1] ? imp_call1(imp, "stack", imp_tuple(imp, 2, ch), &sa) : NULL;
    } else {
        gt = transpose(imp, g, 4, perm);
    }
    ImpAttrs a = {0};
    ia_str(imp, &a, "method", mode);
    ia_str(imp, &a, "layout", "NCHW");
    ia_str(imp, &a, "padding_mode", pad);
    ia_bool(imp, &a, "align_corners", align);
    return out1(imp, gt ? imp_call2(imp, "image.grid_sample", x, gt, &a) : NULL);
}

/* ==== RoiAlign ================================================================================ */

/* RoiAlign-10/16 -> vision.roi_align, whose ROIs carry their batch index in column 0. Relay's
 * roi_align is ONNX's output_half_pixel mode; half_pixel (the default from opset 16) shifts the
 * scaled ROI by half a pixel, which is done here on the ROIs (spatial_scale then 1). Relay
 * enlarges ROIs smaller than a pixel to one pixel in both modes, as ONNX does only in
 * output_half_pixel mode. Mode max differs: ONNX takes the maximum of the four weighted taps of
 * every sample, Relay the maximum of the interpolated samples, so it is refused. */
static bool conv_roi_align(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X"), *rois = imp_in_req(imp, 1, "rois");
    Expr *bi = imp_in_req(imp, 2, "batch_indices");
    if (!x || !rois || !bi) return false;
    const char *mode = imp_attr_str(imp, "mode", "avg");
    if (strcmp(mode, "max") == 0)
        return imp_error(imp, "mode 'max' is not supported: ONNX takes the maximum of the "
                              "weighted bilinear taps, Relay's roi_align the maximum of the "
                              "interpolated samples");
    if (strcmp(mode, "avg") != 0) return imp_error(imp, "mode '%s' is not supported", mode);
    const char *ct = imp_opset(imp) >= 16
                         ? imp_attr_str(imp, "coordinate_transformation_mode", "half_pixel")
                         : "output_half_pixel";
    bool half = strcmp(ct, "half_pixel") == 0;
    if (!half && strcmp(ct, "output_half_pixel") != 0)
        return imp_error(imp, "coordinate_transformation_mode '%s' is not supported", ct);
    if (imp_rank(x) != 4 || imp_rank(rois) != 2 || imp_rank(bi) != 1)
        return imp_error(imp, "X must be 4-D, rois 2-D and batch_indices 1-D");
    double scale = imp_attr_float(imp, "spatial_scale", 1.0);
    rly_dtype dt = imp_dtype(x);
    Expr *r = imp_cast(imp, rois, dt);
    if (half) {
        r = sub(imp, mul(imp, r, imp_scalar(imp, dt, scale)), imp_scalar(imp, dt, 0.5));
        scale = 1.0;
    }
    static const int64_t col[2] = {-1, 1};
    Expr *cols[2] = {reshape(imp, imp_cast(imp, bi, dt), 2, col), r};
    Expr *r5 = concat(imp, 2, cols, 1);
    int64_t pooled[2] = {imp_attr_int(imp, "output_height", 1),
                         imp_attr_int(imp, "output_width", 1)};
    ImpAttrs a = {0};
    ia_ints(imp, &a, "pooled_size", 2, pooled);
    ia_float(imp, &a, "spatial_scale", scale);
    ia_int(imp, &a, "sample_ratio", imp_attr_int(imp, "sampling_ratio", 0));
    ia_str(imp, &a, "layout", "NCHW");
    ia_str(imp, &a, "mode", "avg");
    return out1(imp, r5 ? imp_call2(imp, "vision.roi_align", x, r5, &a) : NULL);
}

/* ==== NonMaxSuppression ======================================================================= */

/* vision.all_class_non_max_suppression (output_format onnx) computes ONNX's selection order
 * (batch, class, descending score, ties by index) with three differences handled here:
 * - it suppresses when IoU >= iou_threshold and selects nothing when the threshold is <= 0; ONNX
 *   suppresses when IoU > max(iou_threshold, 0): the threshold passed is the next double above;
 * - it never suppresses boxes with score <= 0 nor selects scores <= -1: the scores passed are
 *   score - score_threshold in float64 (exact in sign and order), thresholded at 0; without a
 *   score_threshold (ONNX then keeps every box) score - (min(score) - 1);
 * - it treats max_output_boxes_per_class <= 0 as no limit; ONNX selects nothing.
 * Its (selected, count) rows are cut to count with take(arange(count)). Center-format boxes
 * are turned into corners (Relay's IoU takes the corners in any order). */
static bool conv_nms(Imp *imp) {
    Expr *boxes = imp_in_req(imp, 0, "boxes"), *scores = imp_in_req(imp, 1, "scores");
    if (!boxes || !scores) return false;
    Expr *max_out = given(imp_in(imp, 2)), *iou = given(imp_in(imp, 3));
    Expr *thr = given(imp_in(imp, 4));
    int64_t center = imp_attr_int(imp, "center_point_box", 0);
    if (center != 0 && center != 1)
        return imp_error(imp, "center_point_box must be 0 or 1, got %lld", (long long)center);
    static const int64_t empty_shape[2] = {0, 3};
    double mo_val = 0;
    if (!max_out || (imp_const_f64(max_out, &mo_val) && mo_val <= 0))
        return out1(imp, imp_const_tensor(imp, RLY_DTYPE_I64, 2, empty_shape, NULL));
    if (center) {
        ImpAttrs lo = {0}, hi = {0};
        static const int64_t b0[1] = {0}, e0[1] = {2}, b1[1] = {2}, e1[1] = {4}, ax[1] = {2};
        ia_ints(imp, &lo, "begin", 1, b0), ia_ints(imp, &lo, "end", 1, e0);
        ia_ints(imp, &lo, "axes", 1, ax);
        ia_ints(imp, &hi, "begin", 1, b1), ia_ints(imp, &hi, "end", 1, e1);
        ia_ints(imp, &hi, "axes", 1, ax);
        Expr *c = op1(imp, "strided_slice", boxes, &lo);
        Expr *half =
            mul(imp, op1(imp, "strided_slice", boxes, &hi), imp_scalar(imp, imp_dtype(boxes), 0.5));
        Expr *corners[2] = {sub(imp, c, half), add(imp, c, half)};
        boxes = concat(imp, 2, corners, 2);
    }
    Expr *s64 = imp_cast(imp, scores, RLY_DTYPE_F64);
    Expr *base = thr ? imp_cast(imp, scalar_of(imp, thr), RLY_DTYPE_F64)
                     : sub(imp, reduce_all(imp, "min", s64), f64(imp, 1.0));
    Expr *s_rel = sub(imp, s64, base);
    double iou_v = 0;
    Expr *iou_e;
    if (!iou || imp_const_f64(iou, &iou_v)) {
        iou_e = f64(imp, nextafter(fmax((double)(float)iou_v, 0.0), INFINITY));
    } else {
        /* at run time: the next double above, to within a relative 2^-50 */
        Expr *t =
            op2(imp, "maximum", imp_cast(imp, scalar_of(imp, iou), RLY_DTYPE_F64), f64(imp, 0.0));
        iou_e = add(imp, mul(imp, t, f64(imp, 1.0 + ldexp(1.0, -50))), f64(imp, 1e-300));
    }
    Expr *mo = imp_cast(imp, scalar_of(imp, max_out), RLY_DTYPE_I64);
    Expr *args[5] = {boxes, s_rel, mo, iou_e, f64(imp, 0.0)};
    for (int i = 0; i < 5; i++)
        if (!args[i]) return false;
    ImpAttrs a = {0};
    ia_str(imp, &a, "output_format", "onnx");
    Expr *nms = imp_call(imp, "vision.all_class_non_max_suppression", 5, args, &a);
    if (!nms) return false;
    Expr *sel = imp_get(imp, nms, 0), *cnt = scalar_of(imp, imp_get(imp, nms, 1));
    Expr *zero = imp_scalar_i(imp, RLY_DTYPE_I64, 0);
    if (!imp_const(mo)) cnt = where(imp, op2(imp, "greater", mo, zero), cnt, zero);
    return out1(imp, take(imp, sel, iota(imp, cnt), 0));
}

/* ==== quantization ============================================================================ */

/* QuantizeLinear-10/13: saturate(round_half_even(x / y_scale) + y_zero_point). qnn.quantize
 * rounds half away from zero, so this is composed: the division in float32 (float64 for int32
 * x, as numpy promotes), round (ties to even), + zero point, clip, cast. */
/* Blocked quantization (opset 21 block_size > 0): a parameter of x's rank holds one value per
 * block of block_size elements along axis; repeated block_size times and cut to x's extent it
 * has x's shape. NULL p gives NULL. */
static Expr *blocked_param(Imp *imp, Expr *p, Expr *x, int64_t axis, int64_t block,
                           const char *what) {
    if (!p) return NULL;
    uint32_t r = imp_rank(x);
    int64_t ax;
    if (!norm_axis(imp, axis, r, "axis", &ax)) return NULL;
    TensorType *tp = imp_tt(p), *tx = imp_tt(x);
    if (tp->ndim != r) {
        imp_error(imp, "with block_size %s must have x's rank %u, got %u", what, r, tp->ndim);
        return NULL;
    }
    int64_t d = tx->shape[ax];
    if (d < 0) {
        imp_error(imp, "blocked quantization needs x's axis %lld static", (long long)ax);
        return NULL;
    }
    if (block > SUP_DIM_MAX) {
        imp_error(imp, "block_size %lld is out of range (at most 2^62)", (long long)block);
        return NULL;
    }
    if (tp->shape[ax] >= 0 && tp->shape[ax] != (d + block - 1) / block) {
        imp_error(imp,
                  "%s has %lld blocks along axis %lld; x's %lld elements in blocks of %lld "
                  "need %lld",
                  what, (long long)tp->shape[ax], (long long)ax, (long long)d, (long long)block,
                  (long long)((d + block - 1) / block));
        return NULL;
    }
    ImpAttrs ra = {0}, sl = {0};
    ia_int(imp, &ra, "repeats", block);
    ia_int(imp, &ra, "axis", ax);
    int64_t b0 = 0;
    ia_ints(imp, &sl, "begin", 1, &b0);
    ia_ints(imp, &sl, "end", 1, &d);
    ia_ints(imp, &sl, "axes", 1, &ax);
    return op1(imp, "strided_slice", op1(imp, "repeat", p, &ra), &sl);
}

/* A scale or zero point of x's quantization: per block along axis (block_size > 0) or as
 * param_along reads it (a scalar, or one value per element along axis). */
static Expr *qparam(Imp *imp, Expr *p, Expr *x, int64_t axis, int64_t block, const char *what) {
    return block > 0 ? blocked_param(imp, p, x, axis, block, what)
                     : param_along(imp, p, imp_rank(x), axis, what);
}

static bool conv_quantize(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "x"), *s = imp_in_req(imp, 1, "y_scale");
    Expr *zp = given(imp_in(imp, 2));
    if (!x || !s) return false;
    int64_t block = imp_opset(imp) >= 21 ? imp_attr_int(imp, "block_size", 0) : 0;
    if (block < 0) return imp_error(imp, "block_size must be >= 0, got %lld", (long long)block);
    /* opset 21: output_dtype names the result type when there is no zero point */
    int64_t odt = imp_opset(imp) >= 21 ? imp_attr_int(imp, "output_dtype", 0) : 0;
    int out_dt = zp ? (int)imp_dtype(zp) : odt ? imp_onnx_dtype(imp, (int32_t)odt) : RLY_DTYPE_U8;
    if (out_dt < 0) return false;
    /* emulated output types (opsets 19 and 21): float8 (y = x / y_scale + y_zero_point rounded
     * to the format, saturating unless saturate = 0) and int4/uint4 (the 4-bit range) */
    int32_t emul = zp ? imp_emul_type(imp, zp) : (int32_t)odt;
    if (OX_IS_FLOAT8(emul)) {
        int64_t axis = imp_attr_int(imp, "axis", 1);
        Expr *sp = qparam(imp, s, x, axis, block, "y_scale");
        Expr *zq = zp ? qparam(imp, zp, x, axis, block, "y_zero_point") : NULL;
        if (!sp || (zp && !zq)) return false;
        Expr *q = dvd(imp, imp_cast(imp, x, RLY_DTYPE_F32), imp_cast(imp, sp, RLY_DTYPE_F32));
        if (zq) q = add(imp, q, zq);
        return out1(imp, imp_cast_onnx(imp, q, emul, imp_attr_int(imp, "saturate", 1) != 0));
    }
    bool four = OX_IS_INT4(emul);
    if (block > 0) {
        rly_dtype out = (rly_dtype)out_dt, xd = imp_dtype(x);
        double lo = 0, hi = 0;
        if (!quant_range(imp, out, &lo, &hi)) return false;
        if (four) lo = emul == OX_INT4 ? -8 : 0, hi = emul == OX_INT4 ? 7 : 15;
        int64_t axis = imp_attr_int(imp, "axis", 1);
        rly_dtype cd = xd == RLY_DTYPE_F64 ? RLY_DTYPE_F64 : RLY_DTYPE_F32;
        Expr *sb = blocked_param(imp, s, x, axis, block, "y_scale");
        Expr *zb = zp ? blocked_param(imp, zp, x, axis, block, "y_zero_point") : NULL;
        if (!sb || (zp && !zb)) return false;
        Expr *q = op1(imp, "round", dvd(imp, imp_cast(imp, x, cd), imp_cast(imp, sb, cd)), NULL);
        if (zb) q = add(imp, q, imp_cast(imp, zb, cd));
        Expr *y = imp_cast(imp, clip(imp, q, lo, hi), out);
        if (four) imp_emul_mark(imp, y, emul);
        return out1(imp, y);
    }
    rly_dtype out = (rly_dtype)out_dt, xd = imp_dtype(x);
    double lo = 0, hi = 0;
    if (!quant_range(imp, out, &lo, &hi)) return false;
    if (four) lo = emul == OX_INT4 ? -8 : 0, hi = emul == OX_INT4 ? 7 : 15;
    uint32_t r = imp_rank(x);
    int64_t axis = imp_opset(imp) >= 13 ? imp_attr_int(imp, "axis", 1) : 1;
    rly_dtype cd = xd == RLY_DTYPE_F64 || !sup_dtype_is_float(xd) ? RLY_DTYPE_F64 : RLY_DTYPE_F32;
    Expr *q =
        dvd(imp, imp_cast(imp, x, cd), imp_cast(imp, param_along(imp, s, r, axis, "y_scale"), cd));
    q = op1(imp, "round", q, NULL);
    if (zp) q = add(imp, q, imp_cast(imp, param_along(imp, zp, r, axis, "y_zero_point"), cd));
    Expr *y = imp_cast(imp, clip(imp, q, lo, hi), out);
    if (four) imp_emul_mark(imp, y, emul);
    return out1(imp, y);
}

/* DequantizeLinear-10/13 -> qnn.dequantize: (float32)(int32(x) - zero_point) * scale, which is
 * ONNX's formula for 8-bit x and for int32 x (whose zero point is 0). */
static bool conv_dequantize(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "x"), *s = imp_in_req(imp, 1, "x_scale");
    Expr *zp = given(imp_in(imp, 2));
    if (!x || !s) return false;
    int64_t block = imp_opset(imp) >= 21 ? imp_attr_int(imp, "block_size", 0) : 0;
    if (block < 0) return imp_error(imp, "block_size must be >= 0, got %lld", (long long)block);
    if (sup_dtype_is_float(imp_dtype(x))) { /* float8 x (emulated as float32): as below */
        int64_t axis = imp_attr_int(imp, "axis", 1);
        Expr *sp = qparam(imp, s, x, axis, block, "x_scale");
        Expr *zq = zp ? qparam(imp, zp, x, axis, block, "x_zero_point") : NULL;
        if (!sp || (zp && !zq)) return false;
        Expr *v = imp_cast(imp, x, RLY_DTYPE_F32);
        if (zq) v = sub(imp, v, imp_cast(imp, zq, RLY_DTYPE_F32));
        v = mul(imp, v, imp_cast(imp, sp, RLY_DTYPE_F32));
        return out1(imp, imp_cast(imp, v, imp_dtype(s)));
    }
    if (block > 0) { /* (x - zero_point) * scale in float32, then the scale's dtype */
        int64_t axis = imp_attr_int(imp, "axis", 1);
        Expr *sb = blocked_param(imp, s, x, axis, block, "x_scale");
        Expr *zb = zp ? blocked_param(imp, zp, x, axis, block, "x_zero_point") : NULL;
        if (!sb || (zp && !zb)) return false;
        Expr *v = imp_cast(imp, x, RLY_DTYPE_I32);
        if (zb) v = sub(imp, v, imp_cast(imp, zb, RLY_DTYPE_I32));
        v = mul(imp, imp_cast(imp, v, RLY_DTYPE_F32), imp_cast(imp, sb, RLY_DTYPE_F32));
        return out1(imp, imp_cast(imp, v, imp_dtype(s)));
    }
    if (imp_rank(s) > 1 || (zp && imp_rank(zp) > 1))
        return imp_error(imp, "x_scale and x_zero_point must be scalars or 1-D tensors");
    if (imp_dtype(s) != RLY_DTYPE_F32)
        return imp_error(imp, "x_scale must be float32, got %s", sup_dtype_name(imp_dtype(s)));
    Expr *z = zp ? imp_cast(imp, zp, RLY_DTYPE_I32) : imp_scalar_i(imp, RLY_DTYPE_I32, 0);
    if (numel_of(s) == 1) s = scalar_of(imp, s);
    if (z && numel_of(z) == 1) z = scalar_of(imp, z);
    int64_t axis = imp_opset(imp) >= 13 ? imp_attr_int(imp, "axis", 1) : 1;
    if ((imp_rank(s) == 1 || (z && imp_rank(z) == 1)) &&
        !norm_axis(imp, axis, imp_rank(x), "axis", &axis))
        return false;
    if (!s || !z) return false;
    Expr *args[3] = {x, s, z};
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    ia_str(imp, &a, "out_dtype", "float32");
    return out1(imp, imp_call(imp, "qnn.dequantize", 3, args, &a));
}

/* DynamicQuantizeLinear-11 (uint8), as the reference computes it in float32:
 * scale = (max(x, 0) - min(x, 0)) / 255 (1 / 255 when the two are equal),
 * zero_point = round(clip(-min(x, 0) / scale, 0, 255)), y = clip(round(x / scale) + zp). */
static bool conv_dynamic_quantize(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "x");
    if (!x) return false;
    if (imp_dtype(x) != RLY_DTYPE_F32)
        return imp_error(imp, "x must be float32, got %s", sup_dtype_name(imp_dtype(x)));
    Expr *zero = imp_scalar(imp, RLY_DTYPE_F32, 0.0);
    Expr *mx = op2(imp, "maximum", reduce_all(imp, "max", x), zero);
    Expr *mn = op2(imp, "minimum", reduce_all(imp, "min", x), zero);
    Expr *range = where(imp, op2(imp, "equal", mx, mn), imp_scalar(imp, RLY_DTYPE_F32, 1.0),
                        sub(imp, mx, mn));
    Expr *scale = dvd(imp, range, imp_scalar(imp, RLY_DTYPE_F32, 255.0));
    Expr *zp = op1(imp, "round", clip(imp, sub(imp, zero, dvd(imp, mn, scale)), 0, 255), NULL);
    Expr *y = clip(imp, add(imp, op1(imp, "round", dvd(imp, x, scale), NULL), zp), 0, 255);
    y = imp_cast(imp, y, RLY_DTYPE_U8);
    Expr *zq = imp_cast(imp, zp, RLY_DTYPE_U8);
    if (!y || !scale || !zq) return false;
    imp_out(imp, 0, y);
    imp_out(imp, 1, scale);
    imp_out(imp, 2, zq);
    return true;
}

/* x - zero_point in int32 (zero point a scalar or per-channel along axis); zp may be NULL. */
static Expr *shifted(Imp *imp, Expr *x, Expr *zp, int64_t axis, const char *what) {
    Expr *xi = imp_cast(imp, x, RLY_DTYPE_I32);
    if (!zp) return xi;
    return sub(imp, xi,
               imp_cast(imp, param_along(imp, zp, imp_rank(x), axis, what), RLY_DTYPE_I32));
}

/* numpy's matmul of int32 tensors accumulating in int32 (exact until int32 overflows, as ONNX's
 * int32 accumulator): nn.dense when b is 1-D or 2-D (any leading dims of a), else batch_matmul
 * over the broadcast batch dims (known extents needed). */
static Expr *int_matmul(Imp *imp, Expr *a, Expr *b) {
    if (!a || !b) return NULL;
    uint32_t ra = imp_rank(a), rb = imp_rank(b);
    ImpAttrs od = {0};
    ia_str(imp, &od, "out_dtype", "int32");
    if (ra == 0 || rb == 0) {
        imp_error(imp, "matmul operands must not be scalars");
        return NULL;
    }
    if (rb <= 2) {
        static const int64_t t2[2] = {1, 0}, row[2] = {1, -1};
        Expr *w = rb == 2 ? transpose(imp, b, 2, t2) : reshape(imp, b, 2, row);
        Expr *y = w ? imp_call2(imp, "nn.dense", a, w, &od) : NULL;
        if (rb == 2 || !y) return y;
        ImpAttrs sq = {0};
        static const int64_t last[1] = {-1};
        ia_ints(imp, &sq, "axis", 1, last);
        return op1(imp, "squeeze", y, &sq);
    }
    TensorType *ta = imp_tt(a), *tb = imp_tt(b);
    int64_t as[16], bs[16];
    uint32_t na = ra, nb = rb;
    if (ra > 16 || rb > 16) {
        imp_error(imp, "matmul operands of rank above 16 are not supported");
        return NULL;
    }
    memcpy(as, ta->shape, ra * sizeof *as);
    memcpy(bs, tb->shape, rb * sizeof *bs);
    if (na == 1) as[1] = as[0], as[0] = 1, na = 2;
    uint32_t nbatch = (na > nb ? na : nb) - 2;
    int64_t batch[16], prod = 1;
    for (uint32_t i = 0; i < nbatch; i++) {
        int64_t da = i + na >= nbatch + 2 ? as[i + na - nbatch - 2] : 1;
        int64_t db = i + nb >= nbatch + 2 ? bs[i + nb - nbatch - 2] : 1;
        if (da < 0 || db < 0) {
            imp_error(imp, "matmul batch dimensions must be known for a 3-D or higher B");
            return NULL;
        }
        if (da != db && da != 1 && db != 1) {
            imp_error(imp, "matmul batch dimensions %lld and %lld do not broadcast", (long long)da,
                      (long long)db);
            return NULL;
        }
        batch[i] = da > db ? da : db;
        prod = sup_dim_mul_sat(prod, batch[i]); /* a broadcast of two shapes may pass 2^62 */
    }
    int64_t m = as[na - 2], k = as[na - 1], n = bs[nb - 1];
    int64_t full[18];
    memcpy(full, batch, nbatch * sizeof *full);
    full[nbatch] = m, full[nbatch + 1] = k;
    Expr *a2 = reshape(imp, a, na, as);
    ImpAttrs ba = {0}, bb = {0};
    ia_ints(imp, &ba, "shape", nbatch + 2, full);
    int64_t s3a[3] = {prod, m, k}, s3b[3] = {prod, k, n};
    a2 = reshape(imp, op1(imp, "broadcast_to", a2, &ba), 3, s3a);
    full[nbatch] = k, full[nbatch + 1] = n;
    ia_ints(imp, &bb, "shape", nbatch + 2, full);
    Expr *b2 = reshape(imp, op1(imp, "broadcast_to", b, &bb), 3, s3b);
    Expr *y = a2 && b2 ? imp_call2(imp, "nn.batch_matmul", a2, b2, &od) : NULL;
    full[nbatch] = m, full[nbatch + 1] = n;
    if (ra == 1) full[nbatch] = n; /* drop the prepended row */
    return reshape(imp, y, ra == 1 ? nbatch + 1 : nbatch + 2, full);
}

/* A parameter of A in a matmul: per row when it is 1-D with several values. */
static Expr *row_param(Imp *imp, Expr *p) {
    if (!p || imp_rank(p) == 0) return p;
    if (numel_of(p) == 1) return scalar_of(imp, p);
    if (imp_rank(p) != 1) return p;
    static const int64_t col[2] = {-1, 1};
    return reshape(imp, p, 2, col);
}

/* A parameter of B: per column when 1-D (broadcasts along the last axis as it is). */
static Expr *col_param(Imp *imp, Expr *p) {
    if (!p || imp_rank(p) == 0) return p;
    if (numel_of(p) == 1) return scalar_of(imp, p);
    return p;
}

/* MatMulInteger-10: (A - a_zero_point) @ (B - b_zero_point) in int32. */
static bool conv_matmul_integer(Imp *imp) {
    Expr *a = imp_in_req(imp, 0, "A"), *b = imp_in_req(imp, 1, "B");
    if (!a || !b) return false;
    Expr *az = given(imp_in(imp, 2)), *bz = given(imp_in(imp, 3));
    Expr *ai = imp_cast(imp, a, RLY_DTYPE_I32), *bi = imp_cast(imp, b, RLY_DTYPE_I32);
    if (az) ai = sub(imp, ai, imp_cast(imp, row_param(imp, az), RLY_DTYPE_I32));
    if (bz) bi = sub(imp, bi, imp_cast(imp, col_param(imp, bz), RLY_DTYPE_I32));
    return out1(imp, int_matmul(imp, ai, bi));
}

/* round_half_even(acc * factor + zero_point) saturated to the zero point's dtype, in float64
 * (the reference multiplies the int32 accumulator by the float32 factor in float64). */
static Expr *requantize(Imp *imp, Expr *acc, Expr *factor, Expr *zp) {
    if (!zp) return NULL;
    rly_dtype out = imp_dtype(zp);
    double lo = 0, hi = 0;
    if (!quant_range(imp, out, &lo, &hi)) return NULL;
    Expr *v = mul(imp, imp_cast(imp, acc, RLY_DTYPE_F64), imp_cast(imp, factor, RLY_DTYPE_F64));
    v = add(imp, v, imp_cast(imp, scalar_of(imp, zp), RLY_DTYPE_F64));
    return imp_cast(imp, clip(imp, op1(imp, "round", v, NULL), lo, hi), out);
}

/* QLinearMatMul-10: requantize((a - a_zp) @ (b - b_zp), a_scale * b_scale / y_scale, y_zp). */
static bool conv_qlinear_matmul(Imp *imp) {
    static const char *const names[8] = {"a",       "a_scale",      "a_zero_point", "b",
                                         "b_scale", "b_zero_point", "y_scale",      "y_zero_point"};
    Expr *in[8];
    for (uint32_t i = 0; i < 8; i++)
        if (!(in[i] = imp_in_req(imp, i, names[i]))) return false;
    Expr *ai = sub(imp, imp_cast(imp, in[0], RLY_DTYPE_I32),
                   imp_cast(imp, row_param(imp, in[2]), RLY_DTYPE_I32));
    Expr *bi = sub(imp, imp_cast(imp, in[3], RLY_DTYPE_I32),
                   imp_cast(imp, col_param(imp, in[5]), RLY_DTYPE_I32));
    Expr *acc = int_matmul(imp, ai, bi);
    Expr *factor =
        dvd(imp, mul(imp, row_param(imp, in[1]), col_param(imp, in[4])), scalar_of(imp, in[6]));
    return out1(imp, requantize(imp, acc, factor, in[7]));
}

/* The ONNX Conv attributes of the node as nn.conv{1,2,3}d attributes for x (N, C, spatial...)
 * and weight w (M, C / group, kernel...); false after reporting. */
static bool conv_attrs(Imp *imp, Expr *x, Expr *w, ImpAttrs *a, const char **op) {
    uint32_t r = imp_rank(x);
    if (r < 3 || r > 5 || imp_rank(w) != r)
        return imp_error(imp, "X must be 3-D to 5-D and W of the same rank, got %u and %u", r,
                         imp_rank(w));
    uint32_t nsp = r - 2;
    static const char *const ops[] = {NULL, "nn.conv1d", "nn.conv2d", "nn.conv3d"};
    *op = ops[nsp];
    const int64_t *v;
    int64_t strides[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pads[6] = {0}, kernel[3];
    TensorType *tx = imp_tt(x), *tw = imp_tt(w);
    uint32_t n = imp_attr_ints(imp, "strides", &v);
    if (n && n != nsp) return imp_error(imp, "strides must have %u values", nsp);
    for (uint32_t i = 0; i < n; i++)
        strides[i] = v[i];
    n = imp_attr_ints(imp, "dilations", &v);
    if (n && n != nsp) return imp_error(imp, "dilations must have %u values", nsp);
    for (uint32_t i = 0; i < n; i++)
        dil[i] = v[i];
    n = imp_attr_ints(imp, "kernel_shape", &v);
    if (n && n != nsp) return imp_error(imp, "kernel_shape must have %u values", nsp);
    for (uint32_t i = 0; i < nsp; i++)
        kernel[i] = n ? v[i] : tw->shape[2 + i];
    const char *ap = imp_attr_str(imp, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0) {
        n = imp_attr_ints(imp, "pads", &v);
        if (n && n != 2 * nsp) return imp_error(imp, "pads must have %u values", 2 * nsp);
        for (uint32_t i = 0; i < n; i++)
            pads[i] = v[i];
    } else if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        for (uint32_t i = 0; i < nsp; i++) {
            int64_t in = tx->shape[2 + i];
            if (in < 0 || kernel[i] < 0)
                return imp_error(imp, "auto_pad %s needs known spatial extents", ap);
            int64_t out = (in + strides[i] - 1) / strides[i];
            int64_t total = (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in;
            if (total < 0) total = 0;
            int64_t small = total / 2, big = total - small;
            bool upper = ap[5] == 'U';
            pads[i] = upper ? small : big;
            pads[nsp + i] = upper ? big : small;
        }
    } else if (strcmp(ap, "VALID") != 0) {
        return imp_error(imp, "auto_pad '%s' is not supported", ap);
    }
    ia_ints(imp, a, "strides", nsp, strides);
    ia_ints(imp, a, "padding", 2 * nsp, pads);
    ia_ints(imp, a, "dilation", nsp, dil);
    ia_int(imp, a, "groups", imp_attr_int(imp, "group", 1));
    ia_str(imp, a, "out_dtype", "int32");
    return true;
}

/* ConvInteger-10: conv(x - x_zero_point, w - w_zero_point) in int32 (padding contributes 0 in
 * the shifted domain, as in ONNX). */
static bool conv_conv_integer(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "x"), *w = imp_in_req(imp, 1, "w");
    if (!x || !w) return false;
    ImpAttrs a = {0};
    const char *op;
    if (!conv_attrs(imp, x, w, &a, &op)) return false;
    Expr *xs = shifted(imp, x, given(imp_in(imp, 2)), 1, "x_zero_point");
    Expr *ws = shifted(imp, w, given(imp_in(imp, 3)), 0, "w_zero_point");
    return out1(imp, xs && ws ? imp_call2(imp, op, xs, ws, &a) : NULL);
}

/* QLinearConv-10: requantize(conv(x - x_zp, w - w_zp) + B, x_scale * w_scale / y_scale, y_zp),
 * w's scale and zero point per output channel when 1-D. */
static bool conv_qlinear_conv(Imp *imp) {
    static const char *const names[8] = {"x",       "x_scale",      "x_zero_point", "w",
                                         "w_scale", "w_zero_point", "y_scale",      "y_zero_point"};
    Expr *in[8];
    for (uint32_t i = 0; i < 8; i++)
        if (!(in[i] = imp_in_req(imp, i, names[i]))) return false;
    ImpAttrs a = {0};
    const char *op;
    if (!conv_attrs(imp, in[0], in[3], &a, &op)) return false;
    uint32_t r = imp_rank(in[0]);
    Expr *xs = shifted(imp, in[0], in[2], 1, "x_zero_point");
    Expr *ws = shifted(imp, in[3], in[5], 0, "w_zero_point");
    Expr *acc = xs && ws ? imp_call2(imp, op, xs, ws, &a) : NULL;
    Expr *bias = given(imp_in(imp, 8));
    if (bias) acc = add(imp, acc, param_along(imp, imp_cast(imp, bias, RLY_DTYPE_I32), r, 1, "B"));
    Expr *factor =
        dvd(imp, mul(imp, scalar_of(imp, in[1]), param_along(imp, in[4], r, 1, "w_scale")),
            scalar_of(imp, in[6]));
    return out1(imp, requantize(imp, acc, factor, in[7]));
}

/* ==== DFT, STFT, MelWeightMatrix ============================================================= */

/* Extent d of x as an int64 scalar (a constant when known). */
static Expr *dim_of(Imp *imp, Expr *x, uint32_t d) {
    TensorType *t = imp_tt(x);
    if (t->shape[d] >= 0) return imp_scalar_i(imp, RLY_DTYPE_I64, t->shape[d]);
    ImpAttrs a = {0};
    ia_str(imp, &a, "dtype", "int64");
    return take(imp, op1(imp, "shape_of", x, &a), imp_scalar_i(imp, RLY_DTYPE_I64, d), 0);
}

/* The discrete Fourier transform as a product with cosine and sine matrices (nn.dense), which
 * is the definition: Y[k] = sum_j x[j] e^(-+2 pi i jk / N) (divided by N when inverse). The
 * matrices are built from arange, floor_mod (exact angle reduction), cos and sin in float64, so
 * they fold into constants when N is known. x (..., 1 or 2) is real or (re, im) in its last
 * axis; the transform runs along `axis` (not the last) over n_fft points (the signal truncated
 * or zero-padded: columns j >= N are 0); onesided keeps bins 0 .. N / 2. Result
 * (..., K, ..., 2) in x's dtype (float16 and bfloat16 computed in float32). */
static Expr *dft(Imp *imp, Expr *x, int64_t axis, Expr *n_fft, bool inverse, bool onesided) {
    if (!x || !n_fft) return NULL;
    TensorType *t = imp_tt(x);
    uint32_t r = t->ndim;
    int64_t last = r ? t->shape[r - 1] : -1;
    if (r < 2 || r > 16 || axis >= (int64_t)r - 1 || (last != 1 && last != 2)) {
        imp_error(imp, "the input must be (..., n, ..., 1 or 2) with the DFT axis before the last");
        return NULL;
    }
    rly_dtype dt = t->dtype, cd = dt == RLY_DTYPE_F64 ? RLY_DTYPE_F64 : RLY_DTYPE_F32;
    bool complex = last == 2;
    Expr *n_in = dim_of(imp, x, (uint32_t)axis);
    Expr *one = imp_scalar_i(imp, RLY_DTYPE_I64, 1), *two = imp_scalar_i(imp, RLY_DTYPE_I64, 2);
    Expr *k_n = onesided ? add(imp, op2(imp, "floor_divide", n_fft, two), one) : n_fft;
    static const int64_t col[2] = {-1, 1}, row[2] = {1, -1};
    Expr *k = reshape(imp, iota(imp, k_n), 2, col), *j = reshape(imp, iota(imp, n_in), 2, row);
    Expr *m = op2(imp, "floor_mod", mul(imp, k, j), n_fft);
    Expr *nf = imp_cast(imp, n_fft, RLY_DTYPE_F64);
    Expr *th = dvd(
        imp, mul(imp, imp_cast(imp, m, RLY_DTYPE_F64), f64(imp, 2 * 3.14159265358979323846)), nf);
    Expr *c = op1(imp, "cos", th, NULL), *s = op1(imp, "sin", th, NULL);
    if (inverse) {
        c = dvd(imp, c, nf);
        s = dvd(imp, s, nf);
    } else {
        s = op1(imp, "negative", s, NULL);
    }
    /* e^(+-i theta) = c + i s; zero beyond N (truncation) */
    Expr *inside = op2(imp, "less", j, n_fft), *zero = f64(imp, 0.0);
    c = imp_cast(imp, where(imp, inside, c, zero), cd);
    s = imp_cast(imp, where(imp, inside, s, zero), cd);
    /* (re + i im)(c + i s) = (re c - im s) + i (re s + im c): weights over [re | im] */
    Expr *w_re = c, *w_im = s;
    if (complex) {
        Expr *re_parts[2] = {c, op1(imp, "negative", s, NULL)}, *im_parts[2] = {s, c};
        w_re = concat(imp, 2, re_parts, 1);
        w_im = concat(imp, 2, im_parts, 1);
    }
    /* [re | im] with the transformed axis last */
    Expr *xc = imp_cast(imp, x, cd);
    int64_t perm[16];
    uint32_t np = 0;
    for (uint32_t i = 0; i + 1 < r; i++)
        if ((int64_t)i != axis) perm[np++] = i;
    perm[np++] = axis;
    Expr *parts[2];
    for (int64_t q = 0; q < last; q++) {
        Expr *p = take(imp, xc, imp_scalar_i(imp, RLY_DTYPE_I64, q), r - 1);
        parts[q] = axis == (int64_t)r - 2 ? p : transpose(imp, p, r - 1, perm);
    }
    Expr *xin = complex ? concat(imp, 2, parts, (int64_t)r - 2) : parts[0];
    Expr *ys[2] = {xin && w_re ? imp_call2(imp, "nn.dense", xin, w_re, NULL) : NULL,
                   xin && w_im ? imp_call2(imp, "nn.dense", xin, w_im, NULL) : NULL};
    if (!ys[0] || !ys[1]) return NULL;
    ImpAttrs sa = {0};
    ia_int(imp, &sa, "axis", (int64_t)r - 1);
    Expr *y = imp_call1(imp, "stack", imp_tuple(imp, 2, ys), &sa);
    if (axis != (int64_t)r - 2) { /* move K from r - 2 back to axis */
        int64_t back[16];
        for (int64_t i = 0; i < (int64_t)r; i++)
            back[i] = i < axis ? i : i == axis ? r - 2 : i < (int64_t)r - 1 ? i - 1 : i;
        y = transpose(imp, y, r, back);
    }
    return imp_cast(imp, y, dt);
}

/* An integer scalar input (a scalar or a one-element tensor) as int64. */
static Expr *int_scalar(Imp *imp, Expr *e, const char *what) {
    if (!e) return NULL;
    if (!sup_dtype_is_int(imp_dtype(e)) && !sup_dtype_is_uint(imp_dtype(e))) {
        imp_error(imp, "%s must be an integer, got %s", what, sup_dtype_name(imp_dtype(e)));
        return NULL;
    }
    int64_t n = numel_of(e);
    if (n >= 0 && n != 1) {
        imp_error(imp, "%s must hold one value, got %lld", what, (long long)n);
        return NULL;
    }
    return imp_cast(imp, scalar_of(imp, e), RLY_DTYPE_I64);
}

/* DFT-17: input (batch, ..., 1 or 2), dft_length optional; axis, inverse, onesided attributes.
 * An inverse one-sided transform (a real-valued irfft) is refused. */
static bool conv_dft(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input");
    if (!x) return false;
    uint32_t r = imp_rank(x);
    int64_t axis;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 1), r, "axis", &axis)) return false;
    bool inverse = imp_attr_int(imp, "inverse", 0) != 0;
    bool onesided = imp_attr_int(imp, "onesided", 0) != 0;
    if (inverse && onesided) return imp_error(imp, "an inverse one-sided DFT is not supported");
    Expr *len = given(imp_in(imp, 1));
    Expr *n = len ? int_scalar(imp, len, "dft_length") : dim_of(imp, x, (uint32_t)axis);
    return out1(imp, dft(imp, x, axis, n, inverse, onesided));
}

/* AffineGrid with the size known only at run time: the same product, the coordinates built
 * from arange over the extents (broadcast to the grid), the result reshaped by dyn.reshape. */
static bool affine_grid_dyn(Imp *imp, Expr *theta, Expr *size) {
    TensorType *ts = imp_tt(size), *tt = imp_tt(theta);
    if (ts->ndim != 1 || (ts->shape[0] != 4 && ts->shape[0] != 5) || !sup_dtype_is_int(ts->dtype))
        return imp_error(imp, "size must be a 1-D integer tensor of 4 or 5 values");
    if (!sup_dtype_is_float(tt->dtype) || tt->ndim != 3)
        return imp_error(imp, "theta must be a 3-D float tensor");
    uint32_t k = (uint32_t)ts->shape[0] - 2;
    bool align = imp_attr_int(imp, "align_corners", 0) != 0;
    Expr *sz = imp_cast(imp, size, RLY_DTYPE_I64), *v[3], *one = f64(imp, 1.0);
    Expr *zero_grid = NULL;
    int64_t shp[4];
    for (uint32_t j = 0; j < k; j++) { /* spatial axis j: D/H/.., W last */
        Expr *m = take(imp, sz, imp_scalar_i(imp, RLY_DTYPE_I64, 2 + j), 0);
        Expr *mf = imp_cast(imp, m, RLY_DTYPE_F64);
        Expr *ar[3] = {f64(imp, 0.0), mf, one};
        Expr *i = mf ? imp_call(imp, "arange", 3, ar, NULL) : NULL;
        Expr *c = align ? add(imp, f64(imp, -1.0),
                              dvd(imp, mul(imp, f64(imp, 2.0), i),
                                  op2(imp, "maximum", sub(imp, mf, one), one)))
                        : add(imp, f64(imp, -1.0),
                              dvd(imp, add(imp, mul(imp, f64(imp, 2.0), i), one), mf));
        for (uint32_t q = 0; q <= k; q++)
            shp[q] = q == j ? -1 : 1;
        v[j] = reshape(imp, c, k + 1, shp);
        Expr *z = op1(imp, "zeros_like", v[j], NULL);
        zero_grid = zero_grid ? add(imp, zero_grid, z) : z;
    }
    Expr *parts[4];
    for (uint32_t j = 0; j < k; j++) /* x (the last spatial axis) first */
        parts[j] = add(imp, v[k - 1 - j], zero_grid);
    parts[k] = op1(imp, "ones_like", zero_grid, NULL);
    for (uint32_t q = 0; q <= k; q++)
        if (parts[q] == NULL) return false;
    int64_t bshape[3] = {1, -1, k + 1};
    Expr *base = reshape(imp, concat(imp, k + 1, parts, (int64_t)k), 3, bshape);
    ImpAttrs bt = {0};
    ia_bool(imp, &bt, "transpose_b", true);
    Expr *th = imp_cast(imp, theta, RLY_DTYPE_F64);
    Expr *g = base && th ? imp_call2(imp, "nn.batch_matmul", base, th, &bt) : NULL;
    /* (N, spatial..., k): N from theta, the extents from size */
    Expr *pieces[6];
    ImpAttrs a = {0};
    ia_str(imp, &a, "dtype", "int64");
    static const int64_t first[1] = {0};
    pieces[0] = take(imp, op1(imp, "shape_of", theta, &a), imp_const_i64s(imp, 1, first), 0);
    int64_t lo = 2, hi = 2 + k, kk = k;
    ImpAttrs sl = {0};
    ia_ints(imp, &sl, "begin", 1, &lo);
    ia_ints(imp, &sl, "end", 1, &hi);
    pieces[1] = op1(imp, "strided_slice", sz, &sl);
    pieces[2] = imp_const_i64s(imp, 1, &kk);
    Expr *oshape = pieces[0] && pieces[1] ? concat(imp, 3, pieces, 0) : NULL;
    g = g && oshape ? imp_call2(imp, "dyn.reshape", g, oshape, NULL) : NULL;
    return out1(imp, imp_cast(imp, g, tt->dtype));
}

/* AffineGrid-20: theta (N, 2, 3) or (N, 3, 4) and size (N, C, H, W) or (N, C, D, H, W) give
 * the sampling grid (N, H, W, 2) or (N, D, H, W, 3): theta times the homogeneous coordinates
 * (x, y[, z], 1) of the output pixels, normalized to [-1, 1] (pixel centres, or the corners with
 * align_corners). The coordinates are a constant built here (size must be known at import),
 * the product nn.batch_matmul in float64, as the reference computes. */
static bool conv_affine_grid(Imp *imp) {
    Expr *theta = imp_tin(imp, 0, "theta"), *size = imp_tin(imp, 1, "size");
    if (!theta || !size) return false;
    const int64_t *sz;
    uint32_t n;
    if (!imp_const_ints(imp, size, &sz, &n)) return affine_grid_dyn(imp, theta, size);
    if (n != 4 && n != 5) return imp_error(imp, "size must have 4 or 5 values, got %u", n);
    uint32_t k = n - 2; /* spatial axes */
    TensorType *tt = imp_tt(theta);
    if (!sup_dtype_is_float(tt->dtype)) return imp_error(imp, "theta must be a float tensor");
    if (tt->ndim != 3 || (tt->shape[1] >= 0 && tt->shape[1] != k) ||
        (tt->shape[2] >= 0 && tt->shape[2] != k + 1))
        return imp_error(imp, "theta must be (N, %u, %u) for a %u-D size", k, k + 1, n);
    int64_t count = 1;
    for (uint32_t i = 2; i < n; i++) {
        if (sz[i] < 1 || sz[i] > ((int64_t)1 << 24))
            return imp_error(imp, "size[%u] is %lld", i, (long long)sz[i]);
        count *= sz[i];
        if (count > ((int64_t)1 << 24)) return imp_error(imp, "the grid has more than 2^24 points");
    }
    bool align = imp_attr_int(imp, "align_corners", 0) != 0;
    double *base = imp_alloc(imp, (size_t)(count * (k + 1)) * sizeof(double));
    for (int64_t p = 0; p < count; p++) {
        int64_t rest = p;
        double *row = base + p * (k + 1);
        /* spatial index j (0 = D or H, ..., last = W) gives component k - 1 - j: x first */
        for (int32_t j = (int32_t)k - 1; j >= 0; j--) {
            int64_t m = sz[2 + j], i = rest % m;
            rest /= m;
            double c = align ? (m == 1 ? -1.0 : -1.0 + 2.0 * (double)i / (double)(m - 1))
                             : -1.0 + (2.0 * (double)i + 1.0) / (double)m;
            row[k - 1 - j] = c;
        }
        row[k] = 1.0;
    }
    int64_t bshape[3] = {1, count, k + 1};
    Expr *b = imp_const_tensor(imp, RLY_DTYPE_F64, 3, bshape, base);
    ImpAttrs bt = {0};
    ia_bool(imp, &bt, "transpose_b", true);
    Expr *th = imp_cast(imp, theta, RLY_DTYPE_F64);
    Expr *g = b && th ? imp_call2(imp, "nn.batch_matmul", b, th, &bt) : NULL;
    int64_t oshape[5] = {sz[0], 0, 0, 0, 0};
    for (uint32_t j = 0; j < k; j++)
        oshape[1 + j] = sz[2 + j];
    oshape[1 + k] = k;
    if (tt->shape[0] < 0) oshape[0] = -1;
    g = reshape(imp, g, k + 2, oshape);
    return out1(imp, imp_cast(imp, g, tt->dtype));
}

/* DFT-20: the axis is input 2 (a constant scalar, default -2, counted on the input's rank
 * including the trailing real/imaginary axis). */
static bool conv_dft20(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input");
    if (!x) return false;
    uint32_t r = imp_rank(x);
    int64_t axis = -2;
    Expr *ax = given(imp_in(imp, 2));
    bool inverse = imp_attr_int(imp, "inverse", 0) != 0;
    bool onesided = imp_attr_int(imp, "onesided", 0) != 0;
    if (inverse && onesided) return imp_error(imp, "an inverse one-sided DFT is not supported");
    Expr *len = given(imp_in(imp, 1));
    const int64_t *v;
    uint32_t n_v;
    if (ax && !imp_const_ints(imp, ax, &v, &n_v)) {
        /* an axis known at run time: the transform along each possible axis, chosen by an
         * if-chain (the types joined); any other value is a run-time error at the node */
        if (r < 2 || r > 16) return imp_error(imp, "input must have rank 2 to 16, got %u", r);
        Expr *a = int_scalar(imp, ax, "axis");
        a = where(imp, op2(imp, "less", a, imp_scalar_i(imp, RLY_DTYPE_I64, 0)),
                  add(imp, a, imp_scalar_i(imp, RLY_DTYPE_I64, r)), a);
        if (a == NULL) return false;
        Expr **br = imp_alloc(imp, sizeof(Expr *) * r);
        for (uint32_t k = 0; k + 1 < r; k++) {
            Expr *n = len ? int_scalar(imp, len, "dft_length") : dim_of(imp, x, k);
            if ((br[k] = dft(imp, x, k, n, inverse, onesided)) == NULL) return false;
        }
        TensorType *tt = AS_TENSOR_TYPE(imp_any_dims(imp, imp_type(br[0])));
        int64_t *dims = imp_alloc(imp, sizeof *dims * (tt->ndim + 1));
        for (uint32_t i = 0; i < tt->ndim; i++)
            dims[i] = -1;
        char what[96];
        snprintf(what, sizeof what, "axis out of range [%d, %d] for an input of rank %u", -(int)r,
                 (int)r - 2, r);
        Expr *y = imp_trap(imp, tt->ndim, dims, tt->dtype, what);
        for (int64_t k = (int64_t)r - 2; k >= 0 && y; k--)
            y = imp_if(imp, op2(imp, "equal", a, imp_scalar_i(imp, RLY_DTYPE_I64, k)), br[k], y);
        return out1(imp, y);
    }
    if (ax) {
        if (n_v != 1) return imp_error(imp, "the 'axis' input must be a scalar");
        axis = v[0];
    }
    if (axis == (int64_t)r - 1 || axis == -1)
        return imp_error(imp, "axis %lld is the real/imaginary axis", (long long)axis);
    if (!norm_axis(imp, axis, r, "axis", &axis)) return false;
    Expr *n = len ? int_scalar(imp, len, "dft_length") : dim_of(imp, x, (uint32_t)axis);
    return out1(imp, dft(imp, x, axis, n, inverse, onesided));
}

/* STFT-17: signal (batch, length, 1 or 2), frame_step, window and/or frame_length: frames
 * gathered with take (indices f * step + j), weighted by the window, transformed along the
 * frame axis. Output (batch, frames, bins, 2). */
static bool conv_stft(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "signal"), *step_e = imp_in_req(imp, 1, "frame_step");
    if (!x || !step_e) return false;
    Expr *win = given(imp_in(imp, 2)), *len_e = given(imp_in(imp, 3));
    if (!win && !len_e) return imp_error(imp, "one of window and frame_length must be given");
    if (imp_rank(x) != 3) return imp_error(imp, "the signal must be (batch, length, 1 or 2)");
    if (win && imp_rank(win) != 1) return imp_error(imp, "the window must be 1-D");
    Expr *step = int_scalar(imp, step_e, "frame_step");
    Expr *flen = len_e ? int_scalar(imp, len_e, "frame_length") : dim_of(imp, win, 0);
    Expr *frames = add(imp, op2(imp, "floor_divide", sub(imp, dim_of(imp, x, 1), flen), step),
                       imp_scalar_i(imp, RLY_DTYPE_I64, 1));
    static const int64_t col[2] = {-1, 1}, row[2] = {1, -1};
    Expr *idx = add(imp, mul(imp, reshape(imp, iota(imp, frames), 2, col), step),
                    reshape(imp, iota(imp, flen), 2, row));
    Expr *fr = take(imp, x, idx, 1);
    if (win) fr = mul(imp, fr, reshape(imp, imp_cast(imp, win, imp_dtype(x)), 2, col));
    bool onesided = imp_attr_int(imp, "onesided", 1) != 0;
    return out1(imp, dft(imp, fr, 2, flen, false, onesided));
}

/* MelWeightMatrix-17 as the reference computes it: mel(f) = 2595 log10(1 + f / 700) of the edges
 * in float32, num_mel_bins + 2 points spaced by (high - low) / (num_mel_bins + 2) in float64,
 * back to hertz and to spectrogram bins floor((dft_length + 1) hz / sample_rate); column i is
 * the triangle rising from point i to point i + 1 (peak 1) and falling to point i + 2. Built
 * from elementwise operators over arange grids, so constant inputs fold into a constant. */
static bool conv_mel(Imp *imp) {
    static const char *const names[5] = {"num_mel_bins", "dft_length", "sample_rate",
                                         "lower_edge_hertz", "upper_edge_hertz"};
    Expr *v[5];
    for (uint32_t i = 0; i < 5; i++)
        if (!(v[i] = imp_in_req(imp, i, names[i]))) return false;
    int od = imp_onnx_dtype(imp, (int32_t)imp_attr_int(imp, "output_datatype", 1));
    if (od < 0) return false;
    Expr *bins = int_scalar(imp, v[0], "num_mel_bins"),
         *dft_len = int_scalar(imp, v[1], "dft_length");
    Expr *rate = imp_cast(imp, int_scalar(imp, v[2], "sample_rate"), RLY_DTYPE_F64);
    Expr *ln10 = f64(imp, log(10.0)), *one = f64(imp, 1.0);
    Expr *edge[2];
    for (int e = 0; e < 2; e++) { /* 2595 * log1p(hz / 700) in float32, then / ln 10 */
        Expr *hz = imp_cast(imp, scalar_of(imp, v[3 + e]), RLY_DTYPE_F32);
        Expr *q = imp_cast(imp, dvd(imp, hz, imp_scalar(imp, RLY_DTYPE_F32, 700.0)), RLY_DTYPE_F64);
        Expr *l1p = imp_cast(imp, op1(imp, "log", add(imp, q, one), NULL), RLY_DTYPE_F32);
        Expr *mel = mul(imp, imp_scalar(imp, RLY_DTYPE_F32, 2595.0), l1p);
        edge[e] = dvd(imp, imp_cast(imp, mel, RLY_DTYPE_F64), ln10);
    }
    Expr *i64_2 = imp_scalar_i(imp, RLY_DTYPE_I64, 2), *i64_1 = imp_scalar_i(imp, RLY_DTYPE_I64, 1);
    Expr *n_pts = add(imp, bins, i64_2);
    Expr *step = dvd(imp, sub(imp, edge[1], edge[0]), imp_cast(imp, n_pts, RLY_DTYPE_F64));
    Expr *mel = add(imp, mul(imp, imp_cast(imp, iota(imp, n_pts), RLY_DTYPE_F64), step), edge[0]);
    Expr *hz =
        mul(imp, f64(imp, 700.0),
            sub(imp, op1(imp, "exp", mul(imp, dvd(imp, mel, f64(imp, 2595.0)), ln10), NULL), one));
    Expr *pts = op1(
        imp, "floor",
        dvd(imp, mul(imp, imp_cast(imp, add(imp, dft_len, i64_1), RLY_DTYPE_F64), hz), rate), NULL);
    static const int64_t col[2] = {-1, 1}, row[2] = {1, -1};
    Expr *i = iota(imp, bins);
    Expr *lo = reshape(imp, take(imp, pts, i, 0), 2, row);
    Expr *mid = reshape(imp, take(imp, pts, add(imp, i, i64_1), 0), 2, row);
    Expr *hi = reshape(imp, take(imp, pts, add(imp, i, i64_2), 0), 2, row);
    Expr *n_spec = add(imp, op2(imp, "floor_divide", dft_len, i64_2), i64_1);
    Expr *j = imp_cast(imp, reshape(imp, iota(imp, n_spec), 2, col), RLY_DTYPE_F64);
    Expr *rise =
        op2(imp, "logical_and", op2(imp, "greater_equal", j, lo), op2(imp, "less_equal", j, mid));
    Expr *fall = op2(imp, "logical_and", op2(imp, "greater", j, mid), op2(imp, "less", j, hi));
    Expr *up =
        where(imp, op2(imp, "equal", mid, lo), one, dvd(imp, sub(imp, j, lo), sub(imp, mid, lo)));
    Expr *down = dvd(imp, sub(imp, hi, j), sub(imp, hi, mid));
    Expr *m = where(imp, rise, up, where(imp, fall, down, f64(imp, 0.0)));
    return out1(imp, imp_cast(imp, m, (rly_dtype)od));
}

/* ==== the table =============================================================================== */

const ImpConv imp_conv_misc[] = {
    {"Resize", "", 10, conv_resize10},
    {"Resize", "", 11, conv_resize},
    {"Resize", "", 13, conv_resize},
    {"Resize", "", 18, conv_resize18}, /* antialias, axes, keep_aspect_ratio_policy */
    {"Resize", "", 19, conv_resize18}, /* half_pixel_symmetric */
    {"Upsample", "", 7, conv_upsample7},
    {"Upsample", "", 9, conv_upsample9},
    {"GridSample", "", 16, conv_grid_sample},
    {"GridSample", "", 20, conv_grid_sample}, /* modes linear/cubic; 4-D only here */
    {"RoiAlign", "", 10, conv_roi_align},
    {"RoiAlign", "", 16, conv_roi_align},
    {"NonMaxSuppression", "", 10, conv_nms},
    {"NonMaxSuppression", "", 11, conv_nms},
    {"QuantizeLinear", "", 10, conv_quantize},
    {"QuantizeLinear", "", 13, conv_quantize},
    {"DequantizeLinear", "", 10, conv_dequantize},
    {"DequantizeLinear", "", 13, conv_dequantize},
    {"QuantizeLinear", "", 19, conv_quantize}, /* saturate (float8 only) */
    {"QuantizeLinear", "", 21, conv_quantize}, /* block_size, output_dtype */
    {"DequantizeLinear", "", 19, conv_dequantize},
    {"DequantizeLinear", "", 21, conv_dequantize}, /* block_size */
    {"DynamicQuantizeLinear", "", 11, conv_dynamic_quantize},
    {"QLinearConv", "", 10, conv_qlinear_conv},
    {"QLinearMatMul", "", 10, conv_qlinear_matmul},
    {"ConvInteger", "", 10, conv_conv_integer},
    {"MatMulInteger", "", 10, conv_matmul_integer},
    {"DFT", "", 17, conv_dft},
    {"DFT", "", 20, conv_dft20}, /* axis an input */
    {"AffineGrid", "", 20, conv_affine_grid},
    {"STFT", "", 17, conv_stft},
    {"MelWeightMatrix", "", 17, conv_mel},
    {NULL, NULL, 0, NULL},
};
