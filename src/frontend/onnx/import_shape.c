/* import_shape.c - ONNX converters: shape and data-movement operators (Reshape, Flatten,
 * Transpose, Squeeze/Unsqueeze, Concat, Split, Slice, the Gather and Scatter families, Expand,
 * Tile, Pad, Shape, Size, ConstantOfShape, OneHot, NonZero, Compress, ReverseSequence, Trilu,
 * DepthToSpace, SpaceToDepth, Unique).
 *
 * Attributes that Relay needs as constants (shapes, axes, pads, repeats) come from constant
 * inputs; the importer folds shape computations (Shape -> Gather -> Concat) into constants, so
 * a non-constant one is rare: it goes to the dyn.* operator where the table has one, and is
 * reported otherwise. ONNX allows negative indices in [-s, s-1] where Relay's kernels want
 * [0, s), so the converters add s to negative indices (at import time when they are constant).
 * Ops that ONNX defines in one step but Relay in several (Unique along an axis, NonZero,
 * Compress) are composed here. */
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx/import.h"

/* ---- helpers --------------------------------------------------------------------------------- */

#define SLICE_END INT64_MAX /* an end past every axis */

/* axis normalized against a rank (valid: [-rank, rank - 1]). */
static bool norm_axis(Imp *imp, int64_t axis, int64_t rank, const char *what, int64_t *out) {
    *out = 0;
    if (axis < -rank || axis >= rank)
        return imp_error(imp, "%s %lld is out of range for rank %lld (valid: %lld to %lld)", what,
                         (long long)axis, (long long)rank, (long long)-rank, (long long)(rank - 1));
    *out = axis < 0 ? axis + rank : axis;
    return true;
}

/* A constant integer input as int64 values; reports "the 'what' input must be a constant ..."
 * when it is not. */
static bool const_ints(Imp *imp, Expr *e, const char *what, const int64_t **v, uint32_t *n) {
    if (imp_const_ints(imp, e, v, n)) return true;
    return imp_error(imp, "the '%s' input must be a constant integer tensor of rank <= 1", what);
}

static int64_t dim_of(Expr *e, uint32_t i) { return imp_tt(e)->shape[i]; }

/* Whether every dimension of e is a known constant. */
static bool shape_known(Expr *e) {
    TensorType *t = imp_tt(e);
    for (uint32_t i = 0; i < t->ndim; i++)
        if (!dim_known(t->shape[i])) return false;
    return true;
}

static int64_t *alloc_i64(Imp *imp, size_t n) {
    return imp_alloc(imp, (n ? n : 1) * sizeof(int64_t));
}

static Expr *reshape(Imp *imp, Expr *x, uint32_t n, const int64_t *shape) {
    ImpAttrs a = {0};
    ia_ints(imp, &a, "newshape", n, shape);
    return imp_call1(imp, "reshape", x, &a);
}

static Expr *transpose(Imp *imp, Expr *x, uint32_t n, const int64_t *perm) {
    ImpAttrs a = {0};
    if (perm != NULL)
        ia_ints(imp, &a, "axes", n, perm);
    else
        ia_none(imp, &a, "axes");
    return imp_call1(imp, "transpose", x, &a);
}

/* data[begin:end:step] along one axis. */
static Expr *slice_axis(Imp *imp, Expr *x, int64_t axis, int64_t begin, int64_t end, int64_t step) {
    ImpAttrs a = {0};
    ia_ints(imp, &a, "begin", 1, &begin);
    ia_ints(imp, &a, "end", 1, &end);
    ia_ints(imp, &a, "strides", 1, &step);
    ia_ints(imp, &a, "axes", 1, &axis);
    return imp_call1(imp, "strided_slice", x, &a);
}

/* take(data, indices, axis) with the given mode (NULL: the default). */
static Expr *take(Imp *imp, Expr *x, Expr *ind, int64_t axis, const char *mode) {
    if (x == NULL || ind == NULL) return NULL;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    if (mode != NULL) ia_str(imp, &a, "mode", mode);
    return imp_call2(imp, "take", x, ind, &a);
}

static Expr *squeeze_axis(Imp *imp, Expr *x, int64_t axis) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "axis", 1, &axis);
    return imp_call1(imp, "squeeze", x, &a);
}

static Expr *concat2(Imp *imp, Expr *x, Expr *y, int64_t axis) {
    if (x == NULL || y == NULL) return NULL;
    Expr *f[2] = {x, y};
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    return imp_call1(imp, "concatenate", imp_tuple(imp, 2, f), &a);
}

static Expr *shape_of(Imp *imp, Expr *x, rly_dtype dt) {
    ImpAttrs a = {0};
    ia_str(imp, &a, "dtype", sup_dtype_name(dt));
    return imp_call1(imp, "shape_of", x, &a);
}

/* The sizes of x's axes [from, from + n) as a 1-D tensor of dtype dt (a constant when known). */
static Expr *dims_vec(Imp *imp, Expr *x, uint32_t from, uint32_t n, rly_dtype dt) {
    int64_t *v = alloc_i64(imp, n);
    bool known = true;
    for (uint32_t i = 0; i < n; i++) {
        v[i] = dim_of(x, from + i);
        known = known && dim_known(v[i]);
    }
    if (known) return imp_cast(imp, imp_const_i64s(imp, n, v), dt);
    Expr *s = shape_of(imp, x, dt);
    if (s == NULL) return NULL;
    return slice_axis(imp, s, 0, from, (int64_t)from + n, 1);
}

/* Whether e is a constant integer tensor with no negative element. */
static bool const_nonneg(Expr *e) {
    Constant *c = imp_const(e);
    if (c == NULL || !(sup_dtype_is_int(c->dtype) || sup_dtype_is_uint(c->dtype))) return false;
    if (sup_dtype_is_uint(c->dtype)) return true;
    size_t es = sup_dtype_size(c->dtype), n = es ? c->nbytes / es : 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = (const char *)c->data + i * es;
        int64_t v;
        switch (es) {
        case 1: v = *(const int8_t *)p; break;
        case 2: {
            int16_t t;
            memcpy(&t, p, 2);
            v = t;
            break;
        }
        case 4: {
            int32_t t;
            memcpy(&t, p, 4);
            v = t;
            break;
        }
        default: memcpy(&v, p, 8); break;
        }
        if (v < 0) return false;
    }
    return true;
}

/* ONNX indices in [-s, s-1] made non-negative: where(-size <= ind < 0, ind + size, ind); size
 * broadcasts against ind (a scalar, or one size per last axis of ind). Constant non-negative
 * indices and unsigned ones pass unchanged. The kernels then check 0 <= index < s, so an index
 * outside [-s, s-1] is a run-time error naming the index as given (one below -s is left as it
 * is). Narrower signed indices are widened to int64 first: the sum must not wrap (int32 -1 on
 * an axis longer than 2^31). */
static Expr *fix_negative(Imp *imp, Expr *ind, Expr *size) {
    if (ind == NULL || size == NULL) return NULL;
    rly_dtype dt = imp_dtype(ind);
    if (!sup_dtype_is_int(dt) || const_nonneg(ind)) return ind;
    ind = imp_cast(imp, ind, RLY_DTYPE_I64);
    dt = RLY_DTYPE_I64;
    size = imp_cast(imp, size, dt);
    Expr *neg = imp_call2(
        imp, "logical_and", imp_call2(imp, "less", ind, imp_scalar_i(imp, dt, 0), NULL),
        imp_call2(imp, "greater_equal", ind, imp_call1(imp, "negative", size, NULL), NULL), NULL);
    Expr *shifted = imp_call2(imp, "add", ind, size, NULL);
    if (neg == NULL || shifted == NULL) return NULL;
    Expr *args[3] = {neg, shifted, ind};
    return imp_call(imp, "where", 3, args, NULL);
}

/* The size of axis `axis` of x as a scalar of dtype dt. */
static Expr *dim_scalar(Imp *imp, Expr *x, uint32_t axis, rly_dtype dt) {
    int64_t d = dim_of(x, axis);
    if (dim_known(d)) return imp_scalar_i(imp, dt, d);
    return take(imp, shape_of(imp, x, dt), imp_scalar_i(imp, RLY_DTYPE_I64, axis), 0, NULL);
}

/* Move the last axis of x (rank n) to the front. */
static Expr *last_axis_first(Imp *imp, Expr *x) {
    uint32_t n = imp_rank(x);
    if (n <= 1) return x;
    int64_t *perm = alloc_i64(imp, n);
    perm[0] = n - 1;
    for (uint32_t i = 1; i < n; i++)
        perm[i] = i - 1;
    return transpose(imp, x, n, perm);
}

/* ---- Reshape, Flatten ------------------------------------------------------------------------ */

static bool reshape_const(Imp *imp, Expr *x, uint32_t n, const int64_t *shape, bool allowzero) {
    uint32_t n_infer = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (shape[i] < -1)
            return imp_error(imp, "shape[%u] = %lld is invalid (sizes are >= -1)", i,
                             (long long)shape[i]);
        n_infer += shape[i] == -1;
    }
    if (n_infer > 1) return imp_error(imp, "the shape has more than one -1");
    ImpAttrs a = {0};
    ia_ints(imp, &a, "newshape", n, shape);
    ia_bool(imp, &a, "allowzero", allowzero);
    Expr *y = imp_call1(imp, "reshape", x, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool conv_reshape1(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data");
    if (x == NULL) return false;
    const int64_t *shape;
    uint32_t n = imp_attr_ints(imp, "shape", &shape);
    if (imp_attr(imp, "shape") == NULL) return imp_error(imp, "attribute 'shape' is required");
    return reshape_const(imp, x, n, shape, false);
}

static bool conv_reshape(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *s = imp_in_req(imp, 1, "shape");
    if (x == NULL || s == NULL) return false;
    bool allowzero = imp_attr_int(imp, "allowzero", 0) != 0;
    const int64_t *shape;
    uint32_t n;
    if (imp_const_ints(imp, s, &shape, &n)) return reshape_const(imp, x, n, shape, allowzero);
    ImpAttrs a = {0};
    ia_bool(imp, &a, "allowzero", allowzero);
    Expr *y = imp_call2(imp, "dyn.reshape", x, imp_cast(imp, s, RLY_DTYPE_I64), &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* Flatten: (d_0 * ... * d_{axis-1}, d_axis * ... * d_{n-1}). With unknown dims, merges pairs of
 * dims with reshape's -3 (exact even when a dim is 0, unlike -1). */
static bool conv_flatten(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input");
    if (x == NULL) return false;
    int64_t r = imp_rank(x), axis = imp_attr_int(imp, "axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r)
        return imp_error(imp, "axis %lld is out of range for rank %lld",
                         (long long)imp_attr_int(imp, "axis", 1), (long long)r);
    if (shape_known(x)) {
        int64_t s[2] = {1, 1};
        for (int64_t i = 0; i < r; i++)
            s[i < axis ? 0 : 1] *= dim_of(x, (uint32_t)i);
        x = reshape(imp, x, 2, s);
    } else {
        static const int64_t merge_front[2] = {-3, -2}, merge_second[3] = {0, -3, -2};
        ImpAttrs a = {0};
        if (axis == 0) { /* a leading 1, then the suffix is everything */
            ia_int(imp, &a, "axis", 0);
            x = imp_call1(imp, "expand_dims", x, &a);
            axis = 1;
            r++;
        }
        for (int64_t i = 1; x != NULL && i < axis; i++)
            x = reshape(imp, x, 2, merge_front);
        if (x == NULL) return false;
        r -= axis - 1; /* now (prefix, d_axis, ..., d_{n-1}) */
        if (r == 1) {
            ImpAttrs b = {0};
            ia_int(imp, &b, "axis", 1);
            x = imp_call1(imp, "expand_dims", x, &b);
        }
        for (int64_t i = 2; x != NULL && i < r; i++)
            x = reshape(imp, x, 3, merge_second);
    }
    if (x == NULL) return false;
    imp_out(imp, 0, x);
    return true;
}

/* ---- Transpose, Squeeze, Unsqueeze, Concat --------------------------------------------------- */

static bool conv_transpose(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data");
    if (x == NULL) return false;
    const int64_t *perm;
    uint32_t n = imp_attr_ints(imp, "perm", &perm), r = imp_rank(x);
    if (imp_attr(imp, "perm") != NULL && n != r)
        return imp_error(imp, "perm has %u entries but the input has rank %u", n, r);
    Expr *y = transpose(imp, x, n, imp_attr(imp, "perm") != NULL && n > 0 ? perm : NULL);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* Squeeze: no axes (or an empty list, as onnxruntime reads it) drops every size-1 axis. */
static bool squeeze_common(Imp *imp, Expr *x, bool has_axes, uint32_t n, const int64_t *axes) {
    ImpAttrs a = {0};
    if (has_axes && n > 0) {
        int64_t *norm = alloc_i64(imp, n);
        for (uint32_t i = 0; i < n; i++)
            if (!norm_axis(imp, axes[i], imp_rank(x), "axis", &norm[i])) return false;
        ia_ints(imp, &a, "axis", n, norm);
    } else {
        ia_none(imp, &a, "axis");
    }
    Expr *y = imp_call1(imp, "squeeze", x, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool conv_squeeze1(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data");
    if (x == NULL) return false;
    const int64_t *axes;
    uint32_t n = imp_attr_ints(imp, "axes", &axes);
    return squeeze_common(imp, x, imp_attr(imp, "axes") != NULL, n, axes);
}

static bool conv_squeeze13(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *ax = imp_in(imp, 1);
    if (x == NULL) return false;
    const int64_t *axes = NULL;
    uint32_t n = 0;
    if (ax == NULL || imp_const_ints(imp, ax, &axes, &n))
        return squeeze_common(imp, x, ax != NULL, n, axes);
    Expr *y = imp_call2(imp, "dyn.squeeze", x, imp_cast(imp, ax, RLY_DTYPE_I64), NULL);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* Unsqueeze: axes name positions in the output (rank + n); inserted in ascending order. */
static bool unsqueeze_common(Imp *imp, Expr *x, uint32_t n, const int64_t *axes) {
    int64_t out_rank = (int64_t)imp_rank(x) + n;
    int64_t *norm = alloc_i64(imp, n);
    for (uint32_t i = 0; i < n; i++) {
        if (!norm_axis(imp, axes[i], out_rank, "axis", &norm[i])) return false;
        for (uint32_t j = 0; j < i; j++)
            if (norm[j] == norm[i])
                return imp_error(imp, "axes name axis %lld twice", (long long)norm[i]);
    }
    for (uint32_t i = 1; i < n; i++) /* insertion sort: n is tiny */
        for (uint32_t j = i; j > 0 && norm[j - 1] > norm[j]; j--) {
            int64_t t = norm[j];
            norm[j] = norm[j - 1];
            norm[j - 1] = t;
        }
    for (uint32_t i = 0; i < n && x != NULL;) {
        uint32_t k = 1; /* a run of consecutive positions is one expand_dims */
        while (i + k < n && norm[i + k] == norm[i] + k)
            k++;
        ImpAttrs a = {0};
        ia_int(imp, &a, "axis", norm[i]);
        ia_int(imp, &a, "num_newaxis", k);
        x = imp_call1(imp, "expand_dims", x, &a);
        i += k;
    }
    if (x == NULL) return false;
    imp_out(imp, 0, x);
    return true;
}

static bool conv_unsqueeze1(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data");
    if (x == NULL) return false;
    const int64_t *axes;
    uint32_t n = imp_attr_ints(imp, "axes", &axes);
    if (imp_attr(imp, "axes") == NULL) return imp_error(imp, "attribute 'axes' is required");
    return unsqueeze_common(imp, x, n, axes);
}

static bool conv_unsqueeze13(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *ax = imp_in_req(imp, 1, "axes");
    if (x == NULL || ax == NULL) return false;
    const int64_t *axes;
    uint32_t n;
    if (imp_const_ints(imp, ax, &axes, &n)) return unsqueeze_common(imp, x, n, axes);
    /* run-time axes: made non-negative against the output rank, sorted, inserted in order */
    if (imp_rank(ax) > 1) return imp_error(imp, "'axes' must be 1-D");
    int64_t k = imp_rank(ax) ? dim_of(ax, 0) : 1;
    if (!dim_known(k)) return imp_error(imp, "the length of 'axes' must be known");
    static const int64_t one[1] = {1};
    Expr *a = imp_cast(imp, imp_rank(ax) ? ax : reshape(imp, ax, 1, one), RLY_DTYPE_I64);
    a = fix_negative(imp, a, imp_scalar_i(imp, RLY_DTYPE_I64, (int64_t)imp_rank(x) + k));
    ImpAttrs sa = {0};
    ia_int(imp, &sa, "axis", 0);
    a = a ? imp_call1(imp, "sort", a, &sa) : NULL;
    for (int64_t i = 0; i < k && x != NULL; i++) {
        Expr *ai = take(imp, a, imp_scalar_i(imp, RLY_DTYPE_I64, i), 0, NULL);
        x = ai ? imp_call2(imp, "dyn.expand_dims", x, ai, NULL) : NULL;
    }
    if (x == NULL) return false;
    imp_out(imp, 0, x);
    return true;
}

static bool conv_concat(Imp *imp) {
    uint32_t n = imp_n_inputs(imp);
    if (n == 0) return imp_error(imp, "needs at least one input");
    Expr **xs = imp_alloc(imp, n * sizeof(Expr *));
    for (uint32_t i = 0; i < n; i++)
        if ((xs[i] = imp_in_req(imp, i, "inputs")) == NULL) return false;
    if (imp_attr(imp, "axis") == NULL && imp_opset(imp) >= 4)
        return imp_error(imp, "attribute 'axis' is required");
    int64_t axis;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 1), imp_rank(xs[0]), "axis", &axis)) return false;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    Expr *y = imp_call1(imp, "concatenate", imp_tuple(imp, n, xs), &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* ---- Split ----------------------------------------------------------------------------------- */

static bool split_common(Imp *imp, Expr *x, const int64_t *sizes, uint32_t n_sizes) {
    uint32_t n_out = imp_n_outputs(imp);
    int64_t axis;
    if (imp_rank(x) == 0) return imp_error(imp, "cannot split a 0-d tensor");
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
    if (n_out == 0) return true;
    int64_t d = dim_of(x, (uint32_t)axis);
    ImpAttrs a = {0};
    if (sizes == NULL) { /* equal parts */
        if (dim_known(d) && d % n_out != 0)
            return imp_error(imp, "axis %lld of size %lld does not split into %u equal parts",
                             (long long)axis, (long long)d, n_out);
        ia_int(imp, &a, "indices_or_sections", n_out);
        ia_int(imp, &a, "axis", axis);
        Expr *t = imp_call1(imp, "split", x, &a);
        if (t == NULL) return false;
        for (uint32_t i = 0; i < n_out; i++)
            imp_out(imp, i, imp_get(imp, t, i));
        return true;
    }
    if (n_sizes != n_out)
        return imp_error(imp, "'split' has %u sizes but the node has %u outputs", n_sizes, n_out);
    int64_t total = 0;
    bool any_zero = false;
    for (uint32_t i = 0; i < n_sizes; i++) {
        if (sizes[i] < 0) return imp_error(imp, "split size %lld is negative", (long long)sizes[i]);
        any_zero = any_zero || sizes[i] == 0;
        total += sizes[i];
    }
    if (dim_known(d) && total != d)
        return imp_error(imp, "the split sizes add up to %lld but axis %lld has size %lld",
                         (long long)total, (long long)axis, (long long)d);
    if (any_zero || n_sizes == 1) { /* split's indices must ascend strictly: slice each part */
        int64_t at = 0;
        for (uint32_t i = 0; i < n_sizes; i++) {
            Expr *y = slice_axis(imp, x, axis, at, at + sizes[i], 1);
            if (y == NULL) return false;
            imp_out(imp, i, y);
            at += sizes[i];
        }
        return true;
    }
    int64_t *idx = alloc_i64(imp, n_sizes - 1);
    for (uint32_t i = 0; i + 1 < n_sizes; i++)
        idx[i] = (i ? idx[i - 1] : 0) + sizes[i];
    ia_ints(imp, &a, "indices_or_sections", n_sizes - 1, idx);
    ia_int(imp, &a, "axis", axis);
    Expr *t = imp_call1(imp, "split", x, &a);
    if (t == NULL) return false;
    for (uint32_t i = 0; i < n_out; i++)
        imp_out(imp, i, imp_get(imp, t, i));
    return true;
}

/* Split-1: sizes from the optional second input or the 'split' attribute. */
static bool conv_split1(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input"), *s = imp_in(imp, 1);
    if (x == NULL) return false;
    const int64_t *sizes = NULL;
    uint32_t n = 0;
    if (s != NULL) {
        if (!const_ints(imp, s, "split", &sizes, &n)) return false;
    } else if (imp_attr(imp, "split") != NULL) {
        n = imp_attr_ints(imp, "split", &sizes);
    }
    return split_common(imp, x, sizes, n);
}

static bool conv_split2(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input");
    if (x == NULL) return false;
    const int64_t *sizes = NULL;
    uint32_t n = 0;
    if (imp_attr(imp, "split") != NULL) n = imp_attr_ints(imp, "split", &sizes);
    return split_common(imp, x, n ? sizes : NULL, n);
}

static bool conv_split13(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input"), *s = imp_in(imp, 1);
    if (x == NULL) return false;
    const int64_t *sizes = NULL;
    uint32_t n = 0;
    if (s == NULL && imp_attr(imp, "num_outputs") != NULL) {
        /* Split-18: num_outputs parts of ceil(d / num_outputs), the last one smaller */
        int64_t axis, k = imp_attr_int(imp, "num_outputs", 0);
        if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
        int64_t d = dim_of(x, (uint32_t)axis);
        if (k < 1 || k != imp_n_outputs(imp))
            return imp_error(imp, "num_outputs %lld must equal the number of outputs (%u)",
                             (long long)k, imp_n_outputs(imp));
        if (!dim_known(d)) {
            if (imp_rank(x) == 0) return imp_error(imp, "cannot split a 0-d tensor");
            return split_common(imp, x, NULL, 0); /* equal parts; uneven ones fail at run time */
        }
        int64_t chunk = (d + k - 1) / k, *parts = alloc_i64(imp, (size_t)k);
        for (int64_t i = 0; i < k; i++) {
            int64_t left = d - i * chunk;
            parts[i] = left < 0 ? 0 : left < chunk ? left : chunk;
        }
        return split_common(imp, x, parts, (uint32_t)k);
    }
    if (s == NULL || imp_const_ints(imp, s, &sizes, &n))
        return split_common(imp, x, s != NULL ? sizes : NULL, n);
    /* run-time sizes: part i is x[ends[i] - sizes[i] : ends[i]] along axis */
    int64_t axis;
    uint32_t n_out = imp_n_outputs(imp);
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
    if (imp_rank(s) != 1) return imp_error(imp, "'split' must be 1-D");
    s = imp_cast(imp, s, RLY_DTYPE_I64);
    ImpAttrs cs = {0};
    ia_int(imp, &cs, "axis", 0);
    Expr *ends = imp_call1(imp, "cumsum", s, &cs);
    Expr *begins = ends ? imp_call2(imp, "subtract", ends, s, NULL) : NULL;
    static const int64_t one[1] = {1};
    for (uint32_t i = 0; i < n_out && begins != NULL; i++) {
        ImpAttrs a = {0};
        ia_ints(imp, &a, "axes", 1, &axis);
        Expr *args[4] = {x, slice_axis(imp, begins, 0, i, i + 1, 1),
                         slice_axis(imp, ends, 0, i, i + 1, 1), imp_const_i64s(imp, 1, one)};
        Expr *y = args[1] && args[2] ? imp_call(imp, "dyn.strided_slice", 4, args, &a) : NULL;
        if (y == NULL) return false;
        imp_out(imp, i, y);
    }
    return begins != NULL;
}

/* ---- Slice ----------------------------------------------------------------------------------- */

/* ONNX Slice clamps like numpy (starts to [0, d] or [0, d-1] for negative steps, ends to [0, d]
 * or [-1, d-1], after adding d to negative values), which is what strided_slice's "end" mode
 * does, so the values pass through; INT64_MIN ends with negative steps clamp to -1, "before
 * index 0". axes == NULL: 0, 1, ...; steps == NULL: all 1. */
static bool slice_common(Imp *imp, Expr *x, uint32_t n, const int64_t *starts, const int64_t *ends,
                         const int64_t *axes, const int64_t *steps) {
    uint32_t r = imp_rank(x);
    int64_t *ax = alloc_i64(imp, n), *st = alloc_i64(imp, n);
    for (uint32_t i = 0; i < n; i++) {
        if (!norm_axis(imp, axes ? axes[i] : (int64_t)i, r, "axis", &ax[i])) return false;
        for (uint32_t j = 0; j < i; j++)
            if (ax[j] == ax[i])
                return imp_error(imp, "axes name axis %lld twice", (long long)ax[i]);
        st[i] = steps ? steps[i] : 1;
        if (st[i] == 0) return imp_error(imp, "steps must be nonzero");
    }
    if (n == 0) {
        imp_out(imp, 0, x);
        return true;
    }
    ImpAttrs a = {0};
    ia_ints(imp, &a, "begin", n, starts);
    ia_ints(imp, &a, "end", n, ends);
    ia_ints(imp, &a, "strides", n, st);
    ia_ints(imp, &a, "axes", n, ax);
    Expr *y = imp_call1(imp, "strided_slice", x, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* Slice with run-time starts, ends, axes or steps: dyn.strided_slice. Constant axes (or none:
 * the leading axes, as dyn.strided_slice takes them) become its axes attribute; run-time axes
 * scatter the values into full-rank begin/end/strides vectors. */
static bool slice_dynamic(Imp *imp, Expr *x, Expr *s, Expr *e, Expr *ax, Expr *st) {
    uint32_t r = imp_rank(x);
    static const int64_t one[1] = {1};
    if (imp_rank(s) != 1 || imp_rank(e) != 1 || (ax && imp_rank(ax) != 1) ||
        (st && imp_rank(st) != 1))
        return imp_error(imp, "starts, ends, axes and steps must be 1-D");
    s = imp_cast(imp, s, RLY_DTYPE_I64);
    e = imp_cast(imp, e, RLY_DTYPE_I64);
    st = st ? imp_cast(imp, st, RLY_DTYPE_I64) : NULL;
    const int64_t *axes;
    uint32_t na;
    ImpAttrs a = {0};
    if (ax != NULL && imp_const_ints(imp, ax, &axes, &na)) {
        int64_t *norm = alloc_i64(imp, na);
        for (uint32_t i = 0; i < na; i++) {
            if (!norm_axis(imp, axes[i], r, "axis", &norm[i])) return false;
            for (uint32_t j = 0; j < i; j++)
                if (norm[j] == norm[i])
                    return imp_error(imp, "axes name axis %lld twice", (long long)norm[i]);
        }
        ia_ints(imp, &a, "axes", na, norm);
    } else if (ax != NULL) {
        Expr *axn = fix_negative(imp, imp_cast(imp, ax, RLY_DTYPE_I64),
                                 imp_scalar_i(imp, RLY_DTYPE_I64, r));
        int64_t *zeros = alloc_i64(imp, r), *ends = alloc_i64(imp, r), *ones = alloc_i64(imp, r);
        for (uint32_t i = 0; i < r; i++)
            zeros[i] = 0, ends[i] = SLICE_END, ones[i] = 1;
        if (st == NULL) st = imp_call1(imp, "ones_like", s, NULL);
        ImpAttrs sa = {0};
        ia_int(imp, &sa, "axis", 0);
        Expr *a0[3] = {imp_const_i64s(imp, r, zeros), axn, s};
        Expr *a1[3] = {imp_const_i64s(imp, r, ends), axn, e};
        Expr *a2[3] = {imp_const_i64s(imp, r, ones), axn, st};
        if (axn == NULL || st == NULL) return false;
        s = imp_call(imp, "scatter_elements", 3, a0, &sa);
        e = imp_call(imp, "scatter_elements", 3, a1, &sa);
        st = imp_call(imp, "scatter_elements", 3, a2, &sa);
        if (s == NULL || e == NULL || st == NULL) return false;
    }
    Expr *args[4] = {x, s, e, st ? st : imp_const_i64s(imp, 1, one)};
    Expr *y = imp_call(imp, "dyn.strided_slice", 4, args, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool conv_slice1(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data");
    if (x == NULL) return false;
    const int64_t *starts, *ends, *axes = NULL;
    uint32_t ns = imp_attr_ints(imp, "starts", &starts), ne = imp_attr_ints(imp, "ends", &ends);
    if (imp_attr(imp, "starts") == NULL || imp_attr(imp, "ends") == NULL)
        return imp_error(imp, "attributes 'starts' and 'ends' are required");
    if (ns != ne) return imp_error(imp, "starts has %u values but ends has %u", ns, ne);
    if (imp_attr(imp, "axes") != NULL && imp_attr_ints(imp, "axes", &axes) != ns)
        return imp_error(imp, "axes must have as many values as starts (%u)", ns);
    return slice_common(imp, x, ns, starts, ends, axes, NULL);
}

static bool conv_slice10(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *s = imp_in_req(imp, 1, "starts"),
         *e = imp_in_req(imp, 2, "ends"), *ax = imp_in(imp, 3), *st = imp_in(imp, 4);
    if (x == NULL || s == NULL || e == NULL) return false;
    const int64_t *starts, *ends, *axes = NULL, *steps = NULL;
    uint32_t ns, ne, na = 0, nst = 0;
    if (!imp_const_ints(imp, s, &starts, &ns) || !imp_const_ints(imp, e, &ends, &ne) ||
        (ax != NULL && !imp_const_ints(imp, ax, &axes, &na)) ||
        (st != NULL && !imp_const_ints(imp, st, &steps, &nst)))
        return slice_dynamic(imp, x, s, e, ax, st);
    if (ns != ne) return imp_error(imp, "starts has %u values but ends has %u", ns, ne);
    if ((ax != NULL && na != ns) || (st != NULL && nst != ns))
        return imp_error(imp, "axes and steps must have as many values as starts (%u)", ns);
    return slice_common(imp, x, ns, starts, ends, axes, steps);
}

/* ---- Gather, GatherElements, GatherND -------------------------------------------------------- */

/* Gather: take along axis. Indices in [-s, -1] are shifted by s and take's "fast" mode checks
 * the result, so anything outside [-s, s - 1] is a run-time error at the node, as in ONNX and
 * onnxruntime ("wrap" would take an index modulo s and "clip" clamp it: a value either way). */
static bool conv_gather(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *ind = imp_in_req(imp, 1, "indices");
    if (x == NULL || ind == NULL) return false;
    int64_t axis;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
    ind = fix_negative(imp, ind, dim_scalar(imp, x, (uint32_t)axis, imp_dtype(ind)));
    Expr *y = take(imp, x, ind, axis, "fast");
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool conv_gather_elements(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *ind = imp_in_req(imp, 1, "indices");
    if (x == NULL || ind == NULL) return false;
    int64_t axis;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
    ind = fix_negative(imp, ind, dim_scalar(imp, x, (uint32_t)axis, imp_dtype(ind)));
    if (ind == NULL) return false;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    Expr *y = imp_call2(imp, "gather", x, ind, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* indices (..., M) of GatherND/ScatterND, made non-negative against data's axes [from, from + M)
 * and moved to Relay's layout (M, ...). */
static Expr *nd_indices(Imp *imp, Expr *x, Expr *ind, uint32_t from, int64_t *m) {
    uint32_t q = imp_rank(ind);
    if (q == 0) return imp_error(imp, "indices must have rank >= 1"), NULL;
    *m = dim_of(ind, q - 1);
    if (!dim_known(*m)) return imp_error(imp, "the last dimension of indices must be known"), NULL;
    if (*m < 1 || from + *m > imp_rank(x))
        return imp_error(imp, "indices address %lld axes after %u but data has rank %u",
                         (long long)*m, from, imp_rank(x)),
               NULL;
    ind = fix_negative(imp, ind, dims_vec(imp, x, from, (uint32_t)*m, imp_dtype(ind)));
    return ind ? last_axis_first(imp, ind) : NULL;
}

static bool conv_gather_nd(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *ind = imp_in_req(imp, 1, "indices");
    if (x == NULL || ind == NULL) return false;
    int64_t b = imp_attr_int(imp, "batch_dims", 0), m;
    uint32_t q = imp_rank(ind), r = imp_rank(x);
    if (b < 0 || b >= (int64_t)(q < r ? q : r))
        return imp_error(imp, "batch_dims %lld must be in [0, min(rank(data), rank(indices)))",
                         (long long)b);
    ind = nd_indices(imp, x, ind, (uint32_t)b, &m);
    if (ind == NULL) return false;
    ImpAttrs a = {0};
    ia_int(imp, &a, "batch_dims", b);
    ia_int(imp, &a, "index_rank", m);
    Expr *y = imp_call2(imp, "gather_nd", x, ind, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* ---- Scatter, ScatterElements, ScatterND ----------------------------------------------------- */

/* The Relay name of an ONNX reduction ("none" is a plain update). */
static const char *reduction_name(Imp *imp) {
    const char *r = imp_attr_str(imp, "reduction", "none");
    if (strcmp(r, "none") == 0) return "update";
    if (strcmp(r, "add") == 0 || strcmp(r, "mul") == 0 || strcmp(r, "min") == 0 ||
        strcmp(r, "max") == 0)
        return r;
    imp_error(imp, "reduction \"%s\" is not supported (none, add, mul, min, max)", r);
    return NULL;
}

static bool conv_scatter_elements(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *ind = imp_in_req(imp, 1, "indices"),
         *upd = imp_in_req(imp, 2, "updates");
    if (x == NULL || ind == NULL || upd == NULL) return false;
    int64_t axis;
    const char *red = reduction_name(imp);
    if (red == NULL) return false;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
    /* the kernel shifts negative indices by the axis size, as ONNX does */
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    ia_str(imp, &a, "reduction", red);
    Expr *args[3] = {x, ind, upd};
    Expr *y = imp_call(imp, "scatter_elements", 3, args, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool conv_scatter_nd(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *ind = imp_in_req(imp, 1, "indices"),
         *upd = imp_in_req(imp, 2, "updates");
    if (x == NULL || ind == NULL || upd == NULL) return false;
    const char *red = reduction_name(imp);
    int64_t m;
    if (red == NULL || (ind = nd_indices(imp, x, ind, 0, &m)) == NULL) return false;
    ImpAttrs a = {0};
    ia_str(imp, &a, "mode", red);
    Expr *args[3] = {x, ind, upd};
    Expr *y = imp_call(imp, "scatter_nd", 3, args, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* ---- Expand, Tile ---------------------------------------------------------------------------- */

/* Expand broadcasts both ways: the result has shape broadcast(input.shape, shape). */
static bool conv_expand(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input"), *s = imp_in_req(imp, 1, "shape");
    if (x == NULL || s == NULL) return false;
    const int64_t *shape;
    uint32_t n, r = imp_rank(x);
    Expr *y;
    if (imp_const_ints(imp, s, &shape, &n)) {
        uint32_t o = n > r ? n : r;
        int64_t *out = alloc_i64(imp, o);
        bool known = true;
        for (uint32_t i = 0; i < o; i++) {
            int64_t a = i < o - r ? 1 : dim_of(x, i - (o - r));
            int64_t b = i < o - n ? 1 : shape[i - (o - n)];
            if (b < 0) return imp_error(imp, "shape has a negative size %lld", (long long)b);
            if (!dim_known(a)) {
                known = known && b != 1;
                out[i] = b;
                continue;
            }
            if (a != b && a != 1 && b != 1)
                return imp_error(imp, "input dimension %lld does not broadcast with %lld",
                                 (long long)a, (long long)b);
            out[i] = a == 1 ? b : a;
        }
        if (known) {
            ImpAttrs a = {0};
            ia_ints(imp, &a, "shape", o, out);
            y = imp_call1(imp, "broadcast_to", x, &a);
        } else { /* an unknown input dim against 1: where(ones(shape), x, x) broadcasts both */
            ImpAttrs a = {0};
            ia_ints(imp, &a, "shape", n, shape);
            ia_str(imp, &a, "dtype", "bool");
            Expr *args[3] = {imp_call(imp, "ones", 0, NULL, &a), x, x};
            y = args[0] ? imp_call(imp, "where", 3, args, NULL) : NULL;
        }
    } else {
        ImpAttrs a = {0};
        ia_str(imp, &a, "dtype", "bool");
        Expr *args[3] = {imp_call1(imp, "dyn.ones", imp_cast(imp, s, RLY_DTYPE_I64), &a), x, x};
        y = args[0] ? imp_call(imp, "where", 3, args, NULL) : NULL;
    }
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool tile_common(Imp *imp, Expr *x, uint32_t n, const int64_t *reps) {
    if (n != imp_rank(x))
        return imp_error(imp, "repeats has %u values but the input has rank %u", n, imp_rank(x));
    for (uint32_t i = 0; i < n; i++)
        if (reps[i] < 0) return imp_error(imp, "repeats must be non-negative");
    ImpAttrs a = {0};
    ia_ints(imp, &a, "reps", n, reps);
    Expr *y = n ? imp_call1(imp, "tile", x, &a) : x;
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* Tile-1: repeat `tiles` times along `axis` (both scalar inputs). */
static bool conv_tile1(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input"), *t = imp_in_req(imp, 1, "tiles"),
         *ax = imp_in_req(imp, 2, "axis");
    if (x == NULL || t == NULL || ax == NULL) return false;
    const int64_t *tv, *av;
    uint32_t nt, na, r = imp_rank(x);
    if (!const_ints(imp, t, "tiles", &tv, &nt) || !const_ints(imp, ax, "axis", &av, &na))
        return false;
    if (nt != 1 || na != 1) return imp_error(imp, "'tiles' and 'axis' must be scalars");
    int64_t axis, *reps = alloc_i64(imp, r);
    if (!norm_axis(imp, av[0], r, "axis", &axis)) return false;
    for (uint32_t i = 0; i < r; i++)
        reps[i] = i == axis ? tv[0] : 1;
    return tile_common(imp, x, r, reps);
}

static bool conv_tile(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input"), *rep = imp_in_req(imp, 1, "repeats");
    if (x == NULL || rep == NULL) return false;
    const int64_t *reps;
    uint32_t n;
    if (imp_const_ints(imp, rep, &reps, &n)) return tile_common(imp, x, n, reps);
    Expr *y = imp_call2(imp, "dyn.tile", x, imp_cast(imp, rep, RLY_DTYPE_I64), NULL);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* ---- Pad ------------------------------------------------------------------------------------- */

/* Pad-19's "wrap" along one axis of static size d > 0: b elements from the end before, e from
 * the start after (either may exceed d: the input repeats). Tiles the axis 1 + ceil(b / d) +
 * ceil(e / d) times and slices the window out. */
static Expr *wrap_axis(Imp *imp, Expr *x, uint32_t axis, int64_t b, int64_t e) {
    uint32_t r = imp_rank(x);
    int64_t d = dim_of(x, axis);
    int64_t total;
    if (b > SUP_DIM_MAX || e > SUP_DIM_MAX || !sup_dim_add(b, e, &total) ||
        !sup_dim_add(total, d < 0 ? 0 : d, &total)) {
        imp_error(imp, "pads along axis %u are out of range (the result's dims are at most 2^62)",
                  axis);
        return NULL;
    }
    if (!dim_known(d) || d == 0) {
        imp_error(imp, "mode \"wrap\" needs a static, nonzero dim %u (got %s)", axis,
                  dim_known(d) ? "0" : "?");
        return NULL;
    }
    int64_t nb = (b + d - 1) / d, ne = (e + d - 1) / d, *reps = alloc_i64(imp, r);
    for (uint32_t i = 0; i < r; i++)
        reps[i] = i == axis ? 1 + nb + ne : 1;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "reps", r, reps);
    Expr *t = nb + ne > 0 ? imp_call1(imp, "tile", x, &a) : x;
    int64_t start = nb * d - b;
    return slice_axis(imp, t, axis, start, start + b + d + e, 1);
}

/* wrap with widths known at run time (b, e: int64 scalars; negative ones crop): the indices
 * floor_mod(arange(-b, d + e), d) taken along the axis. */
static Expr *wrap_axis_dyn(Imp *imp, Expr *x, uint32_t axis, Expr *b, Expr *e) {
    int64_t d = dim_of(x, axis);
    if (!dim_known(d) || d == 0) {
        imp_error(imp, "mode \"wrap\" needs a static, nonzero dim %u (got %s)", axis,
                  dim_known(d) ? "0" : "?");
        return NULL;
    }
    Expr *dd = imp_scalar_i(imp, RLY_DTYPE_I64, d);
    Expr *args[3] = {imp_call1(imp, "negative", b, NULL), imp_call2(imp, "add", dd, e, NULL),
                     imp_scalar_i(imp, RLY_DTYPE_I64, 1)};
    Expr *idx = args[0] && args[1] ? imp_call(imp, "arange", 3, args, NULL) : NULL;
    idx = idx ? imp_call2(imp, "floor_mod", idx, dd, NULL) : NULL;
    return take(imp, x, idx, axis, NULL);
}

/* pads: [b_0, ..., b_{n-1}, e_0, ..., e_{n-1}]; negative values crop. edge and reflect take no
 * negative widths in nn.pad, so those crop with strided_slice first; wrap (Pad-19) is tiles and
 * a slice per axis (wrap_axis). */
static bool pad_common(Imp *imp, Expr *x, uint32_t np, const int64_t *pads, Expr *value) {
    uint32_t r = imp_rank(x);
    const char *mode = imp_attr_str(imp, "mode", "constant");
    bool wrap = strcmp(mode, "wrap") == 0 && imp_opset(imp) >= 19;
    if (strcmp(mode, "constant") != 0 && strcmp(mode, "reflect") != 0 &&
        strcmp(mode, "edge") != 0 && !wrap)
        return imp_error(imp, "mode \"%s\" is not supported (constant, reflect, edge%s)", mode,
                         imp_opset(imp) >= 19 ? ", wrap" : "");
    if (np != 2 * r)
        return imp_error(imp, "pads has %u values but the input of rank %u needs %u", np, r, 2 * r);
    int64_t *w = alloc_i64(imp, 2 * (size_t)r);
    bool crop = false;
    for (uint32_t i = 0; i < r; i++) {
        w[2 * i] = pads[i];
        w[2 * i + 1] = pads[r + i];
        crop = crop || pads[i] < 0 || pads[r + i] < 0;
    }
    if (wrap) {
        for (uint32_t i = 0; i < r && x; i++) {
            int64_t b = w[2 * i], e = w[2 * i + 1];
            if (b < -SUP_DIM_MAX || e < -SUP_DIM_MAX)
                return imp_error(imp, "pads along axis %u are out of range", i);
            if (b < 0) x = slice_axis(imp, x, i, -b, SLICE_END, 1), b = 0;
            if (x && e < 0) x = slice_axis(imp, x, i, 0, e, 1), e = 0;
            if (x && (b > 0 || e > 0)) x = wrap_axis(imp, x, i, b, e);
        }
        return imp_set_out(imp, 0, x);
    }
    if (crop && strcmp(mode, "constant") != 0) {
        int64_t *b = alloc_i64(imp, r), *e = alloc_i64(imp, r), *ax = alloc_i64(imp, r);
        for (uint32_t i = 0; i < r; i++) {
            b[i] = w[2 * i] < 0 ? -w[2 * i] : 0;
            e[i] = w[2 * i + 1] < 0 ? w[2 * i + 1] : SLICE_END;
            ax[i] = i;
            w[2 * i] = w[2 * i] < 0 ? 0 : w[2 * i];
            w[2 * i + 1] = w[2 * i + 1] < 0 ? 0 : w[2 * i + 1];
        }
        ImpAttrs s = {0};
        ia_ints(imp, &s, "begin", r, b);
        ia_ints(imp, &s, "end", r, e);
        ia_ints(imp, &s, "axes", r, ax);
        if ((x = imp_call1(imp, "strided_slice", x, &s)) == NULL) return false;
    }
    if (value == NULL) value = imp_scalar(imp, imp_dtype(x), 0);
    ImpAttrs a = {0};
    ia_pairs(imp, &a, "pad_width", r, w);
    ia_str(imp, &a, "pad_mode", mode);
    Expr *y = imp_call2(imp, "nn.pad", x, value, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* Pad-1 ('paddings') and Pad-2 ('pads'): widths and the value are attributes. */
static bool conv_pad1(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data");
    if (x == NULL) return false;
    const char *key = imp_opset(imp) < 2 ? "paddings" : "pads";
    const int64_t *pads;
    uint32_t n = imp_attr_ints(imp, key, &pads);
    if (imp_attr(imp, key) == NULL) return imp_error(imp, "attribute '%s' is required", key);
    double v = imp_attr_float(imp, "value", 0.0);
    return pad_common(imp, x, n, pads, imp_scalar(imp, imp_dtype(x), v));
}

static bool conv_pad11(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data"), *p = imp_in_req(imp, 1, "pads"), *v = imp_in(imp, 2);
    if (x == NULL || p == NULL) return false;
    const int64_t *pads;
    uint32_t n, r = imp_rank(x);
    if (v != NULL && imp_rank(v) > 0) { /* a one-element 1-D value: make it a scalar */
        if ((v = reshape(imp, v, 0, NULL)) == NULL) return false;
    }
    Expr *ax = imp_in(imp, 3); /* Pad-18: the axes the pads apply to */
    const int64_t *axes;
    uint32_t na;
    if (ax != NULL && !(imp_const_ints(imp, ax, &axes, &na) && imp_const_ints(imp, p, &pads, &n))) {
        /* run-time axes or pads: full[a] = sum_j (axes[j] == a) pads[j] (the same for ends) */
        TensorType *ta = imp_tt(ax), *tp = imp_tt(p);
        if (ta == NULL || tp == NULL || ta->ndim != 1 || tp->ndim != 1 ||
            !dim_known(ta->shape[0]) || !sup_dtype_is_int(ta->dtype))
            return imp_error(imp, "'axes' must be a 1-D integer tensor of static length");
        int64_t k = ta->shape[0], *iota = alloc_i64(imp, r);
        for (uint32_t i = 0; i < r; i++)
            iota[i] = i;
        Expr *a64 = imp_cast(imp, ax, RLY_DTYPE_I64);
        Expr *neg = imp_call2(imp, "less", a64, imp_scalar_i(imp, RLY_DTYPE_I64, 0), NULL);
        Expr *an = neg ? imp_call(imp, "where", 3,
                                  (Expr *[]){neg,
                                             imp_call2(imp, "add", a64,
                                                       imp_scalar_i(imp, RLY_DTYPE_I64, r), NULL),
                                             a64},
                                  NULL)
                       : NULL;
        ImpAttrs ex = {0}, sum0 = {0};
        ia_int(imp, &ex, "axis", 1);
        int64_t zero = 0;
        ia_ints(imp, &sum0, "axis", 1, &zero);
        Expr *col = an ? imp_call1(imp, "expand_dims", an, &ex) : NULL;
        Expr *hit = imp_cast(imp, imp_call2(imp, "equal", col, imp_const_i64s(imp, r, iota), NULL),
                             RLY_DTYPE_I64); /* (k, r) */
        Expr *p64 = imp_cast(imp, p, RLY_DTYPE_I64), *half[2];
        for (int h = 0; h < 2; h++) {
            Expr *ph = slice_axis(imp, p64, 0, h * k, (h + 1) * k, 1);
            Expr *pc = ph ? imp_call1(imp, "expand_dims", ph, &ex) : NULL;
            Expr *m = hit && pc ? imp_call2(imp, "multiply", hit, pc, NULL) : NULL;
            half[h] = m ? imp_call1(imp, "sum", m, &sum0) : NULL;
        }
        if (half[0] == NULL || half[1] == NULL) return false;
        p = concat2(imp, half[0], half[1], 0);
        if (p == NULL) return false;
        ax = NULL;
    }
    if (ax != NULL) {
        if (!const_ints(imp, ax, "axes", &axes, &na) || !const_ints(imp, p, "pads", &pads, &n))
            return false;
        if (n != 2 * na)
            return imp_error(imp, "pads has %u values but %u axes need %u", n, na, 2 * na);
        int64_t *full = alloc_i64(imp, 2 * (size_t)r);
        memset(full, 0, 2 * (size_t)r * sizeof(int64_t));
        for (uint32_t i = 0; i < na; i++) {
            int64_t a;
            if (!norm_axis(imp, axes[i], r, "axis", &a)) return false;
            full[a] = pads[i];
            full[r + a] = pads[na + i];
        }
        return pad_common(imp, x, 2 * r, full, v);
    }
    if (imp_const_ints(imp, p, &pads, &n)) return pad_common(imp, x, n, pads, v);
    /* run-time pads [b_0.., e_0..] -> pad_width rows [b_i, e_i]; negative pads crop only in
     * constant mode here (nn.pad's rule) */
    const char *mode = imp_attr_str(imp, "mode", "constant");
    if (strcmp(mode, "wrap") == 0 && imp_opset(imp) >= 19) {
        TensorType *tp = imp_tt(p);
        if (tp == NULL || tp->ndim != 1 || tp->shape[0] != 2 * (int64_t)r)
            return imp_error(imp, "'pads' must be a 1-D tensor of %u values", 2 * r);
        Expr *p64 = imp_cast(imp, p, RLY_DTYPE_I64);
        for (uint32_t i = 0; i < r && x; i++) {
            Expr *b = take(imp, p64, imp_scalar_i(imp, RLY_DTYPE_I64, i), 0, NULL);
            Expr *e = take(imp, p64, imp_scalar_i(imp, RLY_DTYPE_I64, r + i), 0, NULL);
            x = b && e ? wrap_axis_dyn(imp, x, i, b, e) : NULL;
        }
        return imp_set_out(imp, 0, x);
    }
    if (strcmp(mode, "constant") != 0 && strcmp(mode, "reflect") != 0 && strcmp(mode, "edge") != 0)
        return imp_error(imp, "mode \"%s\" is not supported (constant, reflect, edge)", mode);
    int64_t two_r[2] = {2, r};
    Expr *pw = transpose(imp, reshape(imp, imp_cast(imp, p, RLY_DTYPE_I64), 2, two_r), 0, NULL);
    if (pw == NULL) return false;
    ImpAttrs a = {0};
    ia_str(imp, &a, "pad_mode", mode);
    Expr *args[3] = {x, pw, v ? v : imp_scalar(imp, imp_dtype(x), 0)};
    Expr *y = imp_call(imp, "dyn.nn.pad", 3, args, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* CenterCropPad-18: crop or pad (with zeros) each listed axis to `shape`, centred (the extra
 * element of an odd difference goes after: crop start and pad before are (|d - s|) / 2).
 * Needs the target shape at import and the listed dims static. */
/* A 1-D int64 tensor of the n int64 scalars es. */
static Expr *vec_of(Imp *imp, uint32_t n, Expr **es) {
    static const int64_t one[1] = {1};
    Expr **parts = imp_alloc(imp, sizeof(Expr *) * (n + 1));
    for (uint32_t i = 0; i < n; i++)
        if ((parts[i] = reshape(imp, es[i], 1, one)) == NULL) return NULL;
    if (n == 1) return parts[0];
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", 0);
    return imp_call1(imp, "concatenate", imp_tuple(imp, n, parts), &a);
}

/* CenterCropPad with the target shape (or a listed dim) known only at run time: per axis the
 * crop window [max(d - s, 0) / 2, + min(s, d)) (dyn.strided_slice) and the pads
 * max(s - d, 0) / 2 before, the rest after (dyn.nn.pad). */
static bool center_crop_pad_dyn(Imp *imp, Expr *x, Expr *sh, uint32_t na, const int64_t *axes) {
    uint32_t r = imp_rank(x);
    TensorType *ts = imp_tt(sh);
    if (ts->ndim != 1 || (ts->shape[0] >= 0 && ts->shape[0] != na))
        return imp_error(imp, "shape must be a 1-D tensor of %u values", na);
    Expr *s64 = imp_cast(imp, sh, RLY_DTYPE_I64);
    Expr **b = imp_alloc(imp, sizeof(Expr *) * 4 * (r + 1)), **e = b + r + 1, **pb = e + r + 1,
         **pe = pb + r + 1;
    Expr *zero = imp_scalar_i(imp, RLY_DTYPE_I64, 0), *two = imp_scalar_i(imp, RLY_DTYPE_I64, 2);
    for (uint32_t a = 0; a < r; a++) {
        Expr *d = dim_scalar(imp, x, a, RLY_DTYPE_I64);
        int64_t j = -1;
        for (uint32_t k = 0; k < na; k++)
            if (axes[k] == (int64_t)a) j = k;
        if (j < 0) {
            b[a] = zero, e[a] = d, pb[a] = zero, pe[a] = zero;
            continue;
        }
        Expr *sj = take(imp, s64, imp_scalar_i(imp, RLY_DTYPE_I64, j), 0, NULL);
        Expr *over = imp_call2(imp, "maximum", imp_call2(imp, "subtract", d, sj, NULL), zero, NULL);
        Expr *under =
            imp_call2(imp, "maximum", imp_call2(imp, "subtract", sj, d, NULL), zero, NULL);
        b[a] = imp_call2(imp, "floor_divide", over, two, NULL);
        e[a] = imp_call2(imp, "add", b[a], imp_call2(imp, "minimum", sj, d, NULL), NULL);
        pb[a] = imp_call2(imp, "floor_divide", under, two, NULL);
        pe[a] = imp_call2(imp, "subtract", under, pb[a], NULL);
        if (!b[a] || !e[a] || !pb[a] || !pe[a]) return false;
    }
    int64_t *ones = alloc_i64(imp, r);
    for (uint32_t a = 0; a < r; a++)
        ones[a] = 1;
    Expr *args[4] = {x, vec_of(imp, r, b), vec_of(imp, r, e), imp_const_i64s(imp, r, ones)};
    if (!args[1] || !args[2]) return false;
    Expr *y = imp_call(imp, "dyn.strided_slice", 4, args, NULL);
    ImpAttrs ex = {0}, cat = {0};
    ia_int(imp, &ex, "axis", 1);
    ia_int(imp, &cat, "axis", 1);
    Expr *cols[2] = {imp_call1(imp, "expand_dims", vec_of(imp, r, pb), &ex),
                     imp_call1(imp, "expand_dims", vec_of(imp, r, pe), &ex)};
    if (!y || !cols[0] || !cols[1]) return false;
    Expr *pw = imp_call1(imp, "concatenate", imp_tuple(imp, 2, cols), &cat);
    ImpAttrs pa = {0};
    ia_str(imp, &pa, "pad_mode", "constant");
    Expr *pargs[3] = {y, pw, imp_scalar(imp, imp_dtype(x), 0)};
    return imp_set_out(imp, 0, pw ? imp_call(imp, "dyn.nn.pad", 3, pargs, &pa) : NULL);
}

static bool conv_center_crop_pad(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input_data"), *sh = imp_in_req(imp, 1, "shape");
    if (x == NULL || sh == NULL) return false;
    uint32_t r = imp_rank(x), n, na;
    const int64_t *sv, *ax_attr;
    na = imp_attr_ints(imp, "axes", &ax_attr);
    bool has_axes = imp_attr(imp, "axes") != NULL;
    if (!has_axes) na = r;
    int64_t *axes = alloc_i64(imp, na + 1);
    bool all_static = true;
    for (uint32_t j = 0; j < na; j++) {
        axes[j] = j;
        if (has_axes && !norm_axis(imp, ax_attr[j], r, "axis", &axes[j])) return false;
        for (uint32_t k = 0; k < j; k++)
            if (axes[k] == axes[j])
                return imp_error(imp, "axes lists axis %lld twice", (long long)axes[j]);
        all_static = all_static && dim_known(dim_of(x, (uint32_t)axes[j]));
    }
    if (imp_tt(sh) == NULL || !sup_dtype_is_int(imp_dtype(sh)))
        return imp_error(imp, "shape must be an integer tensor");
    if (!all_static || !imp_const_ints(imp, sh, &sv, &n))
        return center_crop_pad_dyn(imp, x, sh, na, axes);
    if (n != na) return imp_error(imp, "shape has %u values for %u axes", n, na);
    int64_t *pads = alloc_i64(imp, 2 * (size_t)r);
    memset(pads, 0, 2 * (size_t)r * sizeof(int64_t));
    bool any_pad = false;
    for (uint32_t j = 0; j < na; j++) {
        int64_t a = axes[j];
        int64_t d = dim_of(x, (uint32_t)a), s = sv[j];
        if (s < 0) return imp_error(imp, "shape[%u] is negative (%lld)", j, (long long)s);
        if (s < d) {
            int64_t start = (d - s) / 2;
            if ((x = slice_axis(imp, x, a, start, start + s, 1)) == NULL) return false;
        } else if (s > d) {
            pads[a] = (s - d) / 2;
            pads[r + a] = s - d - pads[a];
            any_pad = true;
        }
    }
    if (!any_pad) return imp_set_out(imp, 0, x);
    return pad_common(imp, x, 2 * r, pads, NULL);
}

/* ---- Shape, Size, ConstantOfShape ------------------------------------------------------------ */

static bool conv_shape(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data");
    if (x == NULL) return false;
    int64_t r = imp_rank(x), start = imp_attr_int(imp, "start", 0), end = r;
    if (imp_attr(imp, "end") != NULL) end = imp_attr_int(imp, "end", r);
    start = start < 0 ? start + r : start;
    end = end < 0 ? end + r : end;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    if (end < start) end = start;
    bool known = true;
    for (int64_t i = start; i < end; i++)
        known = known && dim_known(dim_of(x, (uint32_t)i));
    Expr *y;
    if (known) { /* a constant, so shape arithmetic downstream folds */
        int64_t *v = alloc_i64(imp, (size_t)(end - start));
        for (int64_t i = start; i < end; i++)
            v[i - start] = dim_of(x, (uint32_t)i);
        y = imp_const_i64s(imp, (uint32_t)(end - start), v);
    } else {
        y = shape_of(imp, x, RLY_DTYPE_I64);
        if (y != NULL && (start > 0 || end < r)) y = slice_axis(imp, y, 0, start, end, 1);
    }
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool conv_size(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "data");
    if (x == NULL) return false;
    Expr *y;
    if (shape_known(x)) {
        int64_t n = 1;
        for (uint32_t i = 0; i < imp_rank(x); i++)
            n *= dim_of(x, i);
        y = imp_scalar_i(imp, RLY_DTYPE_I64, n);
    } else {
        ImpAttrs a = {0};
        ia_str(imp, &a, "dtype", "int64");
        y = imp_call1(imp, "ndarray_size", x, &a);
    }
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* ConstantOfShape: the 'value' attribute (a one-element tensor; float 0 by default). */
static bool conv_constant_of_shape(Imp *imp) {
    Expr *s = imp_in_req(imp, 0, "input");
    if (s == NULL) return false;
    const OxAttr *va = imp_attr(imp, "value");
    Expr *fill;
    if (va != NULL) {
        if (va->t == NULL || va->t->count != 1)
            return imp_error(imp, "attribute 'value' must be a one-element tensor");
        int dt = imp_onnx_dtype(imp, va->t->data_type);
        if (dt < 0) return false;
        fill = imp_const_tensor(imp, (rly_dtype)dt, 0, NULL, va->t->data);
    } else {
        fill = imp_scalar(imp, RLY_DTYPE_F32, 0.0);
    }
    if (fill == NULL) return false;
    const int64_t *shape;
    uint32_t n;
    Expr *y;
    if (imp_const_ints(imp, s, &shape, &n)) {
        for (uint32_t i = 0; i < n; i++)
            if (shape[i] < 0) return imp_error(imp, "the shape has a negative size");
        ImpAttrs a = {0};
        ia_ints(imp, &a, "shape", n, shape);
        y = imp_call1(imp, "full", fill, &a);
    } else {
        y = imp_call2(imp, "dyn.full", fill, imp_cast(imp, s, RLY_DTYPE_I64), NULL);
    }
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* ---- OneHot, NonZero, Compress --------------------------------------------------------------- */

static bool conv_one_hot(Imp *imp) {
    Expr *ind = imp_in_req(imp, 0, "indices"), *dep = imp_in_req(imp, 1, "depth"),
         *vals = imp_in_req(imp, 2, "values");
    if (ind == NULL || dep == NULL || vals == NULL) return false;
    double dv;
    bool const_depth = imp_const_f64(dep, &dv);
    int64_t depth = const_depth ? (int64_t)dv : 0;
    if (const_depth && depth < 1) return imp_error(imp, "depth must be positive, got %g", dv);
    if (imp_rank(vals) != 1 || (dim_known(dim_of(vals, 0)) && dim_of(vals, 0) != 2))
        return imp_error(imp, "'values' must be a tensor of two values [off, on]");
    Expr *dep_s = NULL; /* run-time depth: an int64 scalar (float depths truncate) */
    if (!const_depth) {
        if (imp_rank(dep) > 0 && (dep = reshape(imp, dep, 0, NULL)) == NULL) return false;
        dep_s = imp_cast(imp, dep, RLY_DTYPE_I64);
    }
    /* float indices are cast to integers (truncating), then [-depth, -1] shifts by depth */
    if (!sup_dtype_is_int(imp_dtype(ind)) && !sup_dtype_is_uint(imp_dtype(ind)))
        ind = imp_cast(imp, ind, RLY_DTYPE_I64);
    ind = fix_negative(imp, ind, dep_s ? dep_s : imp_scalar_i(imp, RLY_DTYPE_I64, depth));
    Expr *off = take(imp, vals, imp_scalar_i(imp, RLY_DTYPE_I64, 0), 0, NULL);
    Expr *on = take(imp, vals, imp_scalar_i(imp, RLY_DTYPE_I64, 1), 0, NULL);
    if (ind == NULL || off == NULL || on == NULL || (!const_depth && dep_s == NULL)) return false;
    ImpAttrs a = {0};
    if (const_depth) ia_int(imp, &a, "depth", depth);
    ia_int(imp, &a, "axis", imp_attr_int(imp, "axis", -1));
    Expr *args[4] = {ind, on, off, dep_s};
    Expr *y = imp_call(imp, const_depth ? "one_hot" : "dyn.one_hot", const_depth ? 3 : 4, args, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* NonZero: argwhere gives (n, rank) int32; ONNX wants (rank, n) int64. */
static bool conv_nonzero(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X");
    if (x == NULL) return false;
    Expr *y = imp_call1(imp, "argwhere", x, NULL);
    if (y != NULL) y = transpose(imp, y, 0, NULL);
    if (y == NULL) return false;
    imp_out(imp, 0, imp_cast(imp, y, RLY_DTYPE_I64));
    return true;
}

/* Compress: the positions where condition is true, taken along axis (or from the flattened
 * input). */
static bool conv_compress(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input"), *c = imp_in_req(imp, 1, "condition");
    if (x == NULL || c == NULL) return false;
    if (imp_rank(c) != 1) return imp_error(imp, "condition must be 1-D");
    Expr *pos = squeeze_axis(imp, imp_call1(imp, "argwhere", c, NULL), 1);
    if (pos == NULL) return false;
    ImpAttrs a = {0};
    if (imp_attr(imp, "axis") != NULL) {
        int64_t axis;
        if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
        ia_int(imp, &a, "axis", axis);
    } else {
        ia_none(imp, &a, "axis");
    }
    ia_str(imp, &a, "mode", "fast"); /* a condition longer than the axis is an error */
    Expr *y = imp_call2(imp, "take", x, pos, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

/* ---- ReverseSequence, Trilu, DepthToSpace, SpaceToDepth -------------------------------------- */

static bool conv_reverse_sequence(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input"), *lens = imp_in_req(imp, 1, "sequence_lens");
    if (x == NULL || lens == NULL) return false;
    ImpAttrs a = {0};
    ia_int(imp, &a, "seq_axis", imp_attr_int(imp, "time_axis", 0));
    ia_int(imp, &a, "batch_axis", imp_attr_int(imp, "batch_axis", 1));
    Expr *y = imp_call2(imp, "reverse_sequence", x, lens, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool conv_trilu(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input"), *k = imp_in(imp, 1);
    if (x == NULL) return false;
    if (k == NULL) k = imp_scalar_i(imp, RLY_DTYPE_I64, 0);
    if (imp_rank(k) > 0 && (k = reshape(imp, k, 0, NULL)) == NULL) return false;
    ImpAttrs a = {0};
    ia_bool(imp, &a, "upper", imp_attr_int(imp, "upper", 1) != 0);
    Expr *y = imp_call2(imp, "trilu", x, k, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool block_common(Imp *imp, const char *op, const char *mode) {
    Expr *x = imp_in_req(imp, 0, "input");
    if (x == NULL) return false;
    if (imp_attr(imp, "blocksize") == NULL)
        return imp_error(imp, "attribute 'blocksize' is required");
    if (imp_rank(x) != 4) return imp_error(imp, "the input must have rank 4 (N, C, H, W)");
    if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
        return imp_error(imp, "mode \"%s\" is not supported (DCR, CRD)", mode);
    ImpAttrs a = {0};
    ia_int(imp, &a, "block_size", imp_attr_int(imp, "blocksize", 1));
    ia_str(imp, &a, "layout", "NCHW");
    ia_str(imp, &a, "mode", mode);
    Expr *y = imp_call1(imp, op, x, &a);
    if (y == NULL) return false;
    imp_out(imp, 0, y);
    return true;
}

static bool conv_depth_to_space(Imp *imp) {
    return block_common(imp, "nn.depth_to_space", imp_attr_str(imp, "mode", "DCR"));
}

static bool conv_space_to_depth(Imp *imp) { return block_common(imp, "nn.space_to_depth", "DCR"); }

/* ---- Unique ---------------------------------------------------------------------------------- */

static void set_unique_outputs(Imp *imp, Expr *y, Expr *idx, Expr *inv, Expr *counts) {
    imp_out(imp, 0, y);
    imp_out(imp, 1, imp_cast(imp, idx, RLY_DTYPE_I64));
    imp_out(imp, 2, imp_cast(imp, inv, RLY_DTYPE_I64));
    imp_out(imp, 3, imp_cast(imp, counts, RLY_DTYPE_I64));
}

/* Without an axis: Relay's unique on the flattened input, whose per-value results are padded to
 * the input length; the first num_unique entries are the answer. */
static bool unique_flat(Imp *imp, Expr *x, bool sorted) {
    static const int64_t flat[1] = {-1};
    x = reshape(imp, x, 1, flat);
    if (x == NULL) return false;
    ImpAttrs a = {0};
    ia_bool(imp, &a, "sorted", sorted);
    ia_bool(imp, &a, "return_counts", true);
    Expr *u = imp_call1(imp, "unique", x, &a);
    if (u == NULL) return false;
    Expr *num = reshape(imp, imp_get(imp, u, 3), 0, NULL);
    if (num == NULL) return false;
    Expr *args[3] = {imp_scalar_i(imp, RLY_DTYPE_I32, 0), num, imp_scalar_i(imp, RLY_DTYPE_I32, 1)};
    Expr *valid = imp_call(imp, "arange", 3, args, NULL);
    Expr *y = take(imp, imp_get(imp, u, 0), valid, 0, NULL);
    Expr *idx = take(imp, imp_get(imp, u, 1), valid, 0, NULL);
    Expr *counts = take(imp, imp_get(imp, u, 4), valid, 0, NULL);
    if (y == NULL || idx == NULL || counts == NULL) return false;
    set_unique_outputs(imp, y, idx, imp_get(imp, u, 2), counts);
    return true;
}

static Expr *argsort0(Imp *imp, Expr *x) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", 0);
    ia_str(imp, &a, "dtype", "int64");
    return imp_call1(imp, "argsort", x, &a);
}

/* Along an axis: the slices are rows of x2 (n, m) (the axis moved first, the rest flattened).
 * Rows are sorted lexicographically by stable argsorts from the last column to the first; a row
 * that differs from its predecessor starts a group. The first member of a group in that order
 * is its first occurrence. Unsorted output orders the groups by first occurrence. */
static bool unique_axis(Imp *imp, Expr *x, int64_t axis, bool sorted) {
    uint32_t r = imp_rank(x);
    int64_t m = 1, *perm = alloc_i64(imp, r);
    perm[0] = axis;
    for (uint32_t i = 0, j = 1; i < r; i++)
        if (i != axis) {
            perm[j++] = i;
            m = m >= 0 && dim_known(dim_of(x, i)) ? m * dim_of(x, i) : -1;
        }
    if (m < 0) return imp_error(imp, "Unique along an axis needs the other dimensions known");
    Expr *x2 = axis ? transpose(imp, x, r, perm) : x;
    int64_t s2[2] = {0, m};
    if (x2 != NULL) x2 = reshape(imp, x2, 2, s2);
    Expr *order = NULL; /* row order after the columns sorted so far */
    for (int64_t j = m - 1; j >= 0 && x2 != NULL; j--) {
        Expr *col = take(imp, x2, imp_scalar_i(imp, RLY_DTYPE_I64, j), 1, NULL);
        if (order != NULL) col = take(imp, col, order, 0, NULL);
        Expr *s = argsort0(imp, col);
        order = order != NULL ? take(imp, order, s, 0, NULL) : s;
        if (order == NULL) return false;
    }
    if (x2 == NULL) return false;
    if (order == NULL) /* m == 0: every row is empty and equal */
        return imp_error(imp, "Unique along an axis of empty slices is not supported");
    Expr *rows = take(imp, x2, order, 0, NULL);
    if (rows == NULL) return false;
    Expr *differs = imp_call2(imp, "not_equal", slice_axis(imp, rows, 0, 1, SLICE_END, 1),
                              slice_axis(imp, rows, 0, 0, -1, 1), NULL);
    if (differs == NULL) return false;
    ImpAttrs any = {0};
    int64_t one_axis = 1, one = 1;
    ia_ints(imp, &any, "axis", 1, &one_axis);
    uint8_t yes = 1;
    Expr *is_new = concat2(imp, imp_const_tensor(imp, RLY_DTYPE_BOOL, 1, &one, &yes),
                           imp_call1(imp, "any", differs, &any), 0);
    if (is_new == NULL) return false;
    ImpAttrs cs = {0};
    ia_int(imp, &cs, "axis", 0);
    ia_str(imp, &cs, "dtype", "int64");
    Expr *group = imp_call1(imp, "cumsum", is_new, &cs); /* 1-based group of each sorted row */
    if (group == NULL) return false;
    group = imp_call2(imp, "subtract", group, imp_scalar_i(imp, RLY_DTYPE_I64, 1), NULL);
    Expr *starts = squeeze_axis(imp, imp_call1(imp, "argwhere", is_new, NULL), 1);
    if (starts == NULL) return false;
    starts = imp_cast(imp, starts, RLY_DTYPE_I64);
    Expr *ends = concat2(imp, slice_axis(imp, starts, 0, 1, SLICE_END, 1),
                         shape_of(imp, is_new, RLY_DTYPE_I64), 0);
    Expr *counts = ends ? imp_call2(imp, "subtract", ends, starts, NULL) : NULL;
    Expr *first = take(imp, order, starts, 0, NULL);
    Expr *inv_order = imp_call1(imp, "invert_permutation", order, NULL);
    Expr *inverse = take(imp, group, inv_order, 0, NULL); /* group of each input row */
    if (counts == NULL || first == NULL || inverse == NULL) return false;
    if (!sorted) {
        Expr *by_first = argsort0(imp, first);
        Expr *rank = by_first ? imp_call1(imp, "invert_permutation", by_first, NULL) : NULL;
        first = take(imp, first, by_first, 0, NULL);
        counts = take(imp, counts, by_first, 0, NULL);
        inverse = take(imp, rank, inverse, 0, NULL);
        if (first == NULL || counts == NULL || inverse == NULL) return false;
    }
    Expr *y = take(imp, x, first, axis, NULL);
    if (y == NULL) return false;
    set_unique_outputs(imp, y, first, inverse, counts);
    return true;
}

static bool conv_unique(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "X");
    if (x == NULL) return false;
    bool sorted = imp_attr_int(imp, "sorted", 1) != 0;
    if (imp_attr(imp, "axis") == NULL) return unique_flat(imp, x, sorted);
    int64_t axis;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
    return unique_axis(imp, x, axis, sorted);
}

/* ---- the table ------------------------------------------------------------------------------- */

const ImpConv imp_conv_shape[] = {
    {"Reshape", "", 1, conv_reshape1},
    {"Reshape", "", 5, conv_reshape},
    {"Reshape", "", 13, conv_reshape},
    {"Reshape", "", 14, conv_reshape}, /* allowzero */
    {"Flatten", "", 1, conv_flatten},
    {"Flatten", "", 9, conv_flatten},
    {"Flatten", "", 11, conv_flatten}, /* negative axis */
    {"Flatten", "", 13, conv_flatten},
    {"Transpose", "", 1, conv_transpose},
    {"Transpose", "", 13, conv_transpose},
    {"Squeeze", "", 1, conv_squeeze1},
    {"Squeeze", "", 11, conv_squeeze1},
    {"Squeeze", "", 13, conv_squeeze13},
    {"Unsqueeze", "", 1, conv_unsqueeze1},
    {"Unsqueeze", "", 11, conv_unsqueeze1},
    {"Unsqueeze", "", 13, conv_unsqueeze13},
    {"Concat", "", 1, conv_concat},
    {"Concat", "", 4, conv_concat},
    {"Concat", "", 11, conv_concat},
    {"Concat", "", 13, conv_concat},
    {"Split", "", 1, conv_split1},
    {"Split", "", 2, conv_split2},
    {"Split", "", 11, conv_split2},
    {"Split", "", 13, conv_split13},
    {"Split", "", 18, conv_split13}, /* num_outputs */
    {"Slice", "", 1, conv_slice1},
    {"Slice", "", 10, conv_slice10},
    {"Slice", "", 11, conv_slice10},
    {"Slice", "", 13, conv_slice10},
    {"Gather", "", 1, conv_gather},
    {"Gather", "", 11, conv_gather},
    {"Gather", "", 13, conv_gather},
    {"GatherElements", "", 11, conv_gather_elements},
    {"GatherElements", "", 13, conv_gather_elements},
    {"GatherND", "", 11, conv_gather_nd},
    {"GatherND", "", 12, conv_gather_nd},
    {"GatherND", "", 13, conv_gather_nd},
    {"Scatter", "", 9, conv_scatter_elements},
    {"Scatter", "", 11, conv_scatter_elements},
    {"ScatterElements", "", 11, conv_scatter_elements},
    {"ScatterElements", "", 13, conv_scatter_elements},
    {"ScatterElements", "", 16, conv_scatter_elements}, /* reduction */
    {"ScatterND", "", 11, conv_scatter_nd},
    {"ScatterND", "", 13, conv_scatter_nd},
    {"ScatterND", "", 16, conv_scatter_nd}, /* reduction */
    {"Expand", "", 8, conv_expand},
    {"Expand", "", 13, conv_expand},
    {"Tile", "", 1, conv_tile1},
    {"Tile", "", 6, conv_tile},
    {"Tile", "", 13, conv_tile},
    {"Pad", "", 1, conv_pad1},
    {"Pad", "", 2, conv_pad1},
    {"Pad", "", 11, conv_pad11},
    {"Pad", "", 13, conv_pad11},
    {"Pad", "", 18, conv_pad11}, /* axes */
    {"Pad", "", 19, conv_pad11}, /* mode wrap */
    {"CenterCropPad", "", 18, conv_center_crop_pad},
    {"Shape", "", 1, conv_shape},
    {"Shape", "", 13, conv_shape},
    {"Shape", "", 15, conv_shape}, /* start, end */
    {"Size", "", 1, conv_size},
    {"Size", "", 13, conv_size},
    {"ConstantOfShape", "", 9, conv_constant_of_shape},
    {"OneHot", "", 9, conv_one_hot},
    {"OneHot", "", 11, conv_one_hot},
    {"NonZero", "", 9, conv_nonzero},
    {"NonZero", "", 13, conv_nonzero},
    {"Compress", "", 9, conv_compress},
    {"Compress", "", 11, conv_compress},
    {"ReverseSequence", "", 10, conv_reverse_sequence},
    {"Trilu", "", 14, conv_trilu},
    {"DepthToSpace", "", 1, conv_depth_to_space},
    {"DepthToSpace", "", 11, conv_depth_to_space}, /* mode */
    {"DepthToSpace", "", 13, conv_depth_to_space},
    {"SpaceToDepth", "", 1, conv_space_to_depth},
    {"SpaceToDepth", "", 13, conv_space_to_depth},
    {"Unique", "", 11, conv_unique},
    {NULL, NULL, 0, NULL},
};
