/* import_reduce.c - ONNX converters: reductions (Reduce*), arg-reductions, TopK, CumSum, the
 * softmax family (Softmax, LogSoftmax, Hardmax) and the two losses built on nn.nll_loss.
 *
 * Relay's reductions take the axes as an attribute, so an `axes` input (ReduceSum-13,
 * every Reduce*-18) must be a constant. ONNX reduces every axis when axes is empty; with
 * noop_with_empty_axes it reduces none, which still applies the op's elementwise part
 * (ReduceL1 over no axes is abs, as the reference computes it). */
#include <string.h>

#include "frontend/onnx/import.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* The helpers pass NULL through: a NULL argument (an error already reported) gives NULL. */

static Expr *un(Imp *imp, const char *op, Expr *x) {
    return x ? imp_call1(imp, op, x, NULL) : NULL;
}

static Expr *bin(Imp *imp, const char *op, Expr *a, Expr *b) {
    return a && b ? imp_call2(imp, op, a, b, NULL) : NULL;
}

/* Required input i, which must be a tensor. */

/* axis normalized against rank r (ONNX allows [-r, r - 1]); false after reporting. */
static bool norm_axis(Imp *imp, int64_t axis, uint32_t r, const char *what, int64_t *out) {
    int64_t a = axis < 0 ? axis + (int64_t)r : axis;
    if (a < 0 || a >= (int64_t)r)
        return imp_error(imp, "%s %lld is out of range for rank %u", what, (long long)axis, r);
    *out = a;
    return true;
}

static Expr *reshape(Imp *imp, Expr *x, uint32_t n, const int64_t *shape) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "newshape", n, shape);
    return imp_call1(imp, "reshape", x, &a);
}

/* ---- Reduce* --------------------------------------------------------------------------------- */

typedef enum RedKind {
    RED_SUM,
    RED_MEAN,
    RED_MAX,
    RED_MIN,
    RED_PROD,
    RED_L1,
    RED_L2,
    RED_LOG_SUM,
    RED_LOG_SUM_EXP,
    RED_SUM_SQUARE,
} RedKind;

static const struct {
    const char *onnx;
    RedKind kind;
} reduce_kinds[] = {
    {"ReduceSum", RED_SUM},
    {"ReduceMean", RED_MEAN},
    {"ReduceMax", RED_MAX},
    {"ReduceMin", RED_MIN},
    {"ReduceProd", RED_PROD},
    {"ReduceL1", RED_L1},
    {"ReduceL2", RED_L2},
    {"ReduceLogSum", RED_LOG_SUM},
    {"ReduceLogSumExp", RED_LOG_SUM_EXP},
    {"ReduceSumSquare", RED_SUM_SQUARE},
};

/* sqrt or log of an integer tensor: computed in float64 and truncated back, as the reference's
 * astype(data.dtype) does. */
static Expr *float_op(Imp *imp, const char *op, Expr *x) {
    if (x == NULL) return NULL;
    rly_dtype dt = imp_dtype(x);
    if (sup_dtype_is_float(dt)) return un(imp, op, x);
    return imp_cast(imp, un(imp, op, imp_cast(imp, x, RLY_DTYPE_F64)), dt);
}

/* The elementwise part before the reduction. */
static Expr *reduce_pre(Imp *imp, RedKind kind, Expr *x) {
    if (kind == RED_L1) return un(imp, "abs", x);
    if (kind == RED_L2 || kind == RED_SUM_SQUARE) return bin(imp, "multiply", x, x);
    return x;
}

/* The elementwise part after the reduction. */
static Expr *reduce_post(Imp *imp, RedKind kind, Expr *r) {
    if (kind == RED_L2) return float_op(imp, "sqrt", r);
    if (kind == RED_LOG_SUM) return float_op(imp, "log", r);
    return r;
}

/* The Relay reduction of `kind` over axes (n == 0: every axis). */
static Expr *reduce_op(Imp *imp, RedKind kind, Expr *x, uint32_t n, const int64_t *axes,
                       bool keepdims) {
    if (x == NULL) return NULL;
    const char *op = NULL;
    switch (kind) {
    case RED_MEAN: op = "mean"; break;
    case RED_MAX: op = "max"; break;
    case RED_MIN: op = "min"; break;
    case RED_PROD: op = "prod"; break;
    case RED_LOG_SUM_EXP: op = "logsumexp"; break;
    default: op = "sum"; break;
    }
    ImpAttrs a = {0};
    if (n > 0)
        ia_ints(imp, &a, "axis", n, axes);
    else
        ia_none(imp, &a, "axis");
    ia_bool(imp, &a, "keepdims", keepdims);
    return imp_call1(imp, op, x, &a);
}

/* Apply the reduction `kind` over axes (n == 0: every axis; none == true: no axis, which leaves
 * the elementwise parts: log(sum(exp(x))) over no axes is x itself). */
static Expr *reduce_apply(Imp *imp, RedKind kind, Expr *x, uint32_t n, const int64_t *axes,
                          bool keepdims, bool none) {
    Expr *pre = reduce_pre(imp, kind, x);
    return reduce_post(imp, kind, none ? pre : reduce_op(imp, kind, pre, n, axes, keepdims));
}

/* The reduction over axes known only at run time (a 1-D tensor `ax` of k entries). Along each
 * axis i in turn, `if (listed[i]) { reduce(s, axis=[i], keepdims=True) } else { s }` (types
 * joined: the dim becomes `?`), so an axis is reduced only when listed and an empty axis
 * reduces to 1 (ONNX's test_reduce_sum_empty_set: (2, 0, 4) over axis 1 is (2, 1, 4)). With
 * keepdims that is the result; without, the listed dims are then dropped by dyn.reshape,
 * which needs k static (the result's rank is r - k). (A composite at x's shape, with `where`
 * choosing between s and its reduction, broadcast a reduced empty axis back to 0.) */
static Expr *reduce_dynamic(Imp *imp, RedKind kind, Expr *x, Expr *ax, bool keepdims, bool noop) {
    uint32_t r = imp_rank(x);
    TensorType *ta = imp_tt(ax);
    if (ta->ndim != 1 || !(sup_dtype_is_int(ta->dtype) || sup_dtype_is_uint(ta->dtype))) {
        imp_error(imp, "the 'axes' input must be a 1-D integer tensor");
        return NULL;
    }
    int64_t k = ta->shape[0];
    if (k == 0) /* statically empty */
        return reduce_apply(imp, kind, x, 0, NULL, keepdims, noop);
    if (!keepdims && k < 0) {
        imp_error(imp, "with keepdims=0 the 'axes' input must be a constant or have a static "
                       "length (the result's rank depends on it)");
        return NULL;
    }
    /* listed[i]: whether axis i (or i - r) is in ax; an empty ax lists every axis unless noop */
    Expr *a64 = imp_cast(imp, ax, RLY_DTYPE_I64);
    Expr *neg = bin(imp, "less", a64, imp_scalar_i(imp, RLY_DTYPE_I64, 0));
    Expr *an =
        neg ? imp_call(
                  imp, "where", 3,
                  (Expr *[]){neg, bin(imp, "add", a64, imp_scalar_i(imp, RLY_DTYPE_I64, r)), a64},
                  NULL)
            : NULL;
    int64_t *iota = imp_alloc(imp, (r + 1) * sizeof(int64_t));
    for (uint32_t i = 0; i < r; i++)
        iota[i] = i;
    ImpAttrs ex = {0}, any0 = {0};
    ia_int(imp, &ex, "axis", 1);
    int64_t zero = 0;
    ia_ints(imp, &any0, "axis", 1, &zero);
    Expr *col = an ? imp_call1(imp, "expand_dims", an, &ex) : NULL;
    Expr *hits = bin(imp, "equal", col, imp_const_i64s(imp, r, iota));
    Expr *listed = hits ? imp_call1(imp, "any", hits, &any0) : NULL;
    if (!noop && k < 0) {
        ImpAttrs sz = {0};
        ia_str(imp, &sz, "dtype", "int64");
        Expr *empty = bin(imp, "equal", imp_call1(imp, "ndarray_size", ax, &sz),
                          imp_scalar_i(imp, RLY_DTYPE_I64, 0));
        listed = bin(imp, "logical_or", listed, empty);
    }
    Expr *s = reduce_pre(imp, kind, x);
    ImpAttrs tk = {0};
    ia_int(imp, &tk, "axis", 0);
    for (uint32_t i = 0; i < r && s && listed; i++) {
        int64_t one_axis = i;
        Expr *li = imp_call2(imp, "take", listed, imp_scalar_i(imp, RLY_DTYPE_I64, i), &tk);
        Expr *red = reduce_op(imp, kind, s, 1, &one_axis, true);
        s = imp_if(imp, li, red, s);
    }
    if (s == NULL || listed == NULL) return NULL;
    Expr *y = s;
    if (!keepdims) {
        /* the unlisted axes in order: a stable ascending sort puts them (false) first */
        if (k > r) {
            imp_error(imp, "'axes' lists %lld axes of a rank-%u tensor", (long long)k, r);
            return NULL;
        }
        ImpAttrs as = {0}, sl = {0}, sh = {0};
        ia_str(imp, &as, "dtype", "int64");
        ia_str(imp, &sh, "dtype", "int64");
        Expr *order = imp_call1(imp, "argsort", imp_cast(imp, listed, RLY_DTYPE_I32), &as);
        int64_t b0 = 0, e0 = r - k;
        ia_ints(imp, &sl, "begin", 1, &b0);
        ia_ints(imp, &sl, "end", 1, &e0);
        Expr *kept = order ? imp_call1(imp, "strided_slice", order, &sl) : NULL;
        Expr *shape = imp_call1(imp, "shape_of", y, &sh);
        Expr *newshape = kept && shape ? imp_call2(imp, "take", shape, kept, &tk) : NULL;
        y = newshape ? imp_call2(imp, "dyn.reshape", y, newshape, NULL) : NULL;
    }
    return reduce_post(imp, kind, y);
}

static bool reduce_common(Imp *imp, bool axes_input) {
    const char *op_type = imp_node(imp)->op_type;
    RedKind kind = RED_SUM;
    bool found = false;
    for (size_t i = 0; i < sizeof reduce_kinds / sizeof reduce_kinds[0]; i++)
        if (strcmp(reduce_kinds[i].onnx, op_type) == 0) {
            kind = reduce_kinds[i].kind;
            found = true;
        }
    RLY_CHECK(found, "no reduction for %s", op_type);
    Expr *x = imp_tin(imp, 0, "data");
    if (x == NULL) return false;
    uint32_t r = imp_rank(x), n = 0;
    const int64_t *given = NULL;
    bool noop = false, keepdims = imp_attr_int(imp, "keepdims", 1) != 0;
    if (axes_input) {
        noop = imp_attr_int(imp, "noop_with_empty_axes", 0) != 0;
        Expr *ax = imp_in(imp, 1);
        if (ax && !imp_const_ints(imp, ax, &given, &n)) {
            if (imp_tt(ax) == NULL) return imp_error(imp, "the 'axes' input must be a tensor");
            return imp_set_out(imp, 0, reduce_dynamic(imp, kind, x, ax, keepdims, noop));
        }
    } else {
        n = imp_attr_ints(imp, "axes", &given);
    }
    int64_t *axes = imp_alloc(imp, (n + 1) * sizeof(int64_t));
    for (uint32_t i = 0; i < n; i++)
        if (!norm_axis(imp, given[i], r, "axis", &axes[i])) return false;
    return imp_set_out(imp, 0, reduce_apply(imp, kind, x, n, axes, keepdims, n == 0 && noop));
}

static bool conv_reduce_attr(Imp *imp) { return reduce_common(imp, false); }
static bool conv_reduce_input(Imp *imp) { return reduce_common(imp, true); }

/* ---- ArgMax, ArgMin -------------------------------------------------------------------------- */

static bool conv_arg(Imp *imp) {
    bool is_max = strcmp(imp_node(imp)->op_type, "ArgMax") == 0;
    Expr *x = imp_tin(imp, 0, "data");
    if (x == NULL) return false;
    int64_t axis = 0;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "axis", 1, &axis);
    ia_bool(imp, &a, "keepdims", imp_attr_int(imp, "keepdims", 1) != 0);
    ia_bool(imp, &a, "select_last_index", imp_attr_int(imp, "select_last_index", 0) != 0);
    Expr *y = imp_call1(imp, is_max ? "argmax" : "argmin", x, &a);
    return imp_set_out(imp, 0, imp_cast(imp, y, RLY_DTYPE_I64));
}

/* ---- CumSum ---------------------------------------------------------------------------------- */

static Expr *reverse_at(Imp *imp, Expr *x, int64_t axis) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    return imp_call1(imp, "reverse", x, &a);
}

/* The scan of x along axis (reversed: from the end, the forward scan of the reversed tensor,
 * reversed back). */
static Expr *cumsum_at(Imp *imp, Expr *x, int64_t axis, bool reverse, bool exclusive) {
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    ia_bool(imp, &a, "exclusive", exclusive);
    Expr *y = reverse ? reverse_at(imp, x, axis) : x;
    y = y ? imp_call1(imp, "cumsum", y, &a) : NULL;
    return reverse ? reverse_at(imp, y, axis) : y;
}

/* CumSum: the axis is a scalar input. A constant picks the axis; a run-time axis (the result's
 * shape is x's either way) selects among the scans along every axis with `where`. */
static bool conv_cumsum(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "x"), *ax = imp_tin(imp, 1, "axis");
    if (x == NULL || ax == NULL) return false;
    bool reverse = imp_attr_int(imp, "reverse", 0) != 0;
    bool exclusive = imp_attr_int(imp, "exclusive", 0) != 0;
    uint32_t r = imp_rank(x);
    if (r == 0) return imp_error(imp, "x must have rank 1 or more");
    const int64_t *v;
    uint32_t n;
    if (imp_const_ints(imp, ax, &v, &n)) {
        int64_t axis = 0;
        if (n != 1) return imp_error(imp, "the 'axis' input must hold one value, got %u", n);
        if (!norm_axis(imp, v[0], r, "axis", &axis)) return false;
        return imp_set_out(imp, 0, cumsum_at(imp, x, axis, reverse, exclusive));
    }
    rly_dtype adt = imp_dtype(ax);
    if (!sup_dtype_is_int(adt) || imp_tt(ax)->ndim > 1)
        return imp_error(imp, "the 'axis' input must be an integer scalar");
    Expr *y = cumsum_at(imp, x, r - 1, reverse, exclusive);
    for (uint32_t i = r - 1; i-- > 0 && y;) {
        Expr *is_i = bin(imp, "logical_or", bin(imp, "equal", ax, imp_scalar_i(imp, adt, i)),
                         bin(imp, "equal", ax, imp_scalar_i(imp, adt, (int64_t)i - r)));
        Expr *c = cumsum_at(imp, x, i, reverse, exclusive);
        y = is_i && c ? imp_call(imp, "where", 3, (Expr *[]){is_i, c, y}, NULL) : NULL;
    }
    return imp_set_out(imp, 0, y);
}

/* ---- TopK ------------------------------------------------------------------------------------ */

/* TopK-1 takes k as an attribute, TopK-10 as an input (a constant becomes topk's k; otherwise
 * dyn.topk when the table has it). Values, then int64 indices; `sorted` = 0 allows any order,
 * so the sorted result serves both. */
static bool topk_common(Imp *imp, bool k_input) {
    Expr *x = imp_tin(imp, 0, "X");
    if (x == NULL) return false;
    int64_t axis = 0;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", -1), imp_rank(x), "axis", &axis)) return false;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    ia_str(imp, &a, "ret_type", "both");
    ia_bool(imp, &a, "is_ascend", imp_attr_int(imp, "largest", 1) == 0);
    ia_str(imp, &a, "dtype", "int64");
    Expr *kt = NULL;
    int64_t k;
    if (!k_input) {
        const OxAttr *ka = imp_attr(imp, "k");
        if (ka == NULL) return imp_error(imp, "attribute k is required");
        k = ka->i;
    } else {
        if ((kt = imp_tin(imp, 1, "K")) == NULL) return false;
        const int64_t *v;
        uint32_t n;
        if (imp_const_ints(imp, kt, &v, &n)) {
            if (n != 1) return imp_error(imp, "K must hold one value, got %u", n);
            k = v[0];
            kt = NULL;
        }
    }
    Expr *y;
    if (kt == NULL) {
        /* Relay reads k < 1 as the whole axis; ONNX's k = 0 gives empty values and indices */
        if (k < 0) return imp_error(imp, "k must not be negative, got %lld", (long long)k);
        if (k == 0) {
            int64_t zero = 0, one = 1;
            ImpAttrs s = {0};
            ia_ints(imp, &s, "begin", 1, &zero);
            ia_ints(imp, &s, "end", 1, &zero);
            ia_ints(imp, &s, "strides", 1, &one);
            ia_ints(imp, &s, "axes", 1, &axis);
            Expr *none = imp_call1(imp, "strided_slice", x, &s);
            if (none == NULL) return false;
            imp_out(imp, 0, none);
            return imp_set_out(imp, 1, imp_cast(imp, none, RLY_DTYPE_I64));
        }
        ia_int(imp, &a, "k", k);
        y = imp_call1(imp, "topk", x, &a);
    } else {
        Expr *k0 = imp_rank(kt) == 0 ? kt : reshape(imp, kt, 0, NULL);
        y = k0 ? imp_call2(imp, "dyn.topk", x, k0, &a) : NULL;
    }
    if (y == NULL) return false;
    imp_out(imp, 0, imp_get(imp, y, 0));
    imp_out(imp, 1, imp_get(imp, y, 1));
    return true;
}

static bool conv_topk_1(Imp *imp) { return topk_common(imp, false); }
static bool conv_topk_10(Imp *imp) { return topk_common(imp, true); }

/* ---- Softmax, LogSoftmax, Hardmax ------------------------------------------------------------ */

typedef enum SmKind { SM_SOFTMAX, SM_LOG_SOFTMAX, SM_HARDMAX } SmKind;

static SmKind sm_kind(Imp *imp) {
    const char *t = imp_node(imp)->op_type;
    return strcmp(t, "Softmax") == 0      ? SM_SOFTMAX
           : strcmp(t, "LogSoftmax") == 0 ? SM_LOG_SOFTMAX
                                          : SM_HARDMAX;
}

/* The op along one axis of x. Hardmax is one_hot(argmax) (the first maximum wins). */
static Expr *sm_along(Imp *imp, SmKind kind, Expr *x, int64_t axis) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    if (kind != SM_HARDMAX) {
        ia_int(imp, &a, "axis", axis);
        return imp_call1(imp, kind == SM_SOFTMAX ? "nn.softmax" : "nn.log_softmax", x, &a);
    }
    int64_t depth = imp_tt(x)->shape[axis];
    rly_dtype dt = imp_dtype(x);
    ia_ints(imp, &a, "axis", 1, &axis);
    if (depth < 0) {
        /* the size is known at run time only: compare arange(size) along axis with argmax */
        ia_bool(imp, &a, "keepdims", true);
        Expr *idx = imp_call1(imp, "argmax", x, &a);
        ImpAttrs s = {0}, t = {0}, r = {0};
        ia_str(imp, &s, "dtype", "int32");
        ia_int(imp, &t, "axis", 0);
        ia_str(imp, &r, "dtype", "int32");
        Expr *shape = imp_call1(imp, "shape_of", x, &s);
        Expr *n = shape ? imp_call2(imp, "take", shape, imp_scalar_i(imp, RLY_DTYPE_I32, axis), &t)
                        : NULL;
        Expr *args[3] = {imp_scalar_i(imp, RLY_DTYPE_I32, 0), n,
                         imp_scalar_i(imp, RLY_DTYPE_I32, 1)};
        Expr *pos = n ? imp_call(imp, "arange", 3, args, &r) : NULL;
        uint32_t rank = imp_rank(x);
        int64_t *ns = imp_alloc(imp, rank * sizeof(int64_t));
        for (uint32_t i = 0; i < rank; i++)
            ns[i] = i == axis ? -1 : 1;
        return imp_cast(imp, bin(imp, "equal", reshape(imp, pos, rank, ns), idx), dt);
    }
    Expr *idx = imp_call1(imp, "argmax", x, &a);
    if (idx == NULL) return NULL;
    ImpAttrs o = {0};
    ia_int(imp, &o, "depth", depth);
    ia_int(imp, &o, "axis", axis);
    ia_str(imp, &o, "dtype", sup_dtype_name(dt));
    Expr *args[3] = {idx, imp_scalar(imp, dt, 1), imp_scalar(imp, dt, 0)};
    return imp_call(imp, "one_hot", 3, args, &o);
}

/* Before opset 13 the input is coerced to 2-D, (d0 * ... * d{axis-1}, d{axis} * ... ), the op
 * runs along axis 1 of that, and the result takes the input's shape back. Flattening only the
 * axes from `axis` on (newshape [0, ..., 0, -1]) and running along the last axis is the same
 * computation and needs no static dims. */
static bool conv_sm_1(Imp *imp) {
    SmKind kind = sm_kind(imp);
    Expr *x = imp_tin(imp, 0, "input");
    if (x == NULL) return false;
    uint32_t r = imp_rank(x);
    if (r == 0) return imp_error(imp, "input must have rank 1 or more");
    int64_t axis = 0;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 1), r, "axis", &axis)) return false;
    if (axis == (int64_t)r - 1) return imp_set_out(imp, 0, sm_along(imp, kind, x, axis));
    int64_t *shape = imp_alloc(imp, (size_t)(axis + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < axis; i++)
        shape[i] = 0; /* copy the dim */
    shape[axis] = -1;
    Expr *y = sm_along(imp, kind, reshape(imp, x, (uint32_t)axis + 1, shape), axis);
    return imp_set_out(imp, 0, y ? imp_call2(imp, "reshape_like", y, x, NULL) : NULL);
}

static bool conv_sm_13(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "input");
    if (x == NULL) return false;
    int64_t axis = 0;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", -1), imp_rank(x), "axis", &axis)) return false;
    return imp_set_out(imp, 0, sm_along(imp, sm_kind(imp), x, axis));
}

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss -------------------------------------- */

/* nn.nll_loss(input, target, weight) with ONNX's attributes. Without weights every class weighs
 * 1: a constant when the class count is static, else ones shaped like the max over every axis
 * but 1. Without ignore_index no target is ignored: the sentinel INT64_MIN is no class index,
 * so the kernel still rejects out-of-range targets. */
static Expr *nll(Imp *imp, Expr *input, Expr *target, Expr *weight) {
    if (input == NULL || target == NULL) return NULL;
    const char *red = imp_attr_str(imp, "reduction", "mean");
    if (strcmp(red, "mean") != 0 && strcmp(red, "sum") != 0 && strcmp(red, "none") != 0) {
        imp_error(imp, "attribute reduction must be none, sum or mean, got '%s'", red);
        return NULL;
    }
    if (imp_rank(input) < 2) {
        imp_error(imp, "input must have rank 2 or more (N, C, ...), got rank %u", imp_rank(input));
        return NULL;
    }
    rly_dtype dt = imp_dtype(input);
    if (weight == NULL) {
        int64_t c = imp_tt(input)->shape[1];
        ImpAttrs a = {0};
        if (c >= 0) {
            ia_ints(imp, &a, "shape", 1, &c);
            ia_str(imp, &a, "dtype", sup_dtype_name(dt));
            weight = imp_call(imp, "ones", 0, NULL, &a);
        } else {
            int64_t one = 1;
            ia_ints(imp, &a, "axis", 1, &one);
            ia_bool(imp, &a, "exclude", true);
            weight = un(imp, "ones_like", imp_call1(imp, "max", input, &a));
        }
        if (weight == NULL) return NULL;
    }
    const OxAttr *ii = imp_attr(imp, "ignore_index");
    ImpAttrs a = {0};
    ia_str(imp, &a, "reduction", red);
    ia_int(imp, &a, "ignore_index", ii ? ii->i : INT64_MIN);
    Expr *args[3] = {input, target, weight};
    return imp_call(imp, "nn.nll_loss", 3, args, &a);
}

static bool conv_nll_loss(Imp *imp) {
    Expr *input = imp_tin(imp, 0, "input"), *target = imp_tin(imp, 1, "target");
    return imp_set_out(imp, 0, nll(imp, input, target, imp_in(imp, 2)));
}

/* SoftmaxCrossEntropyLoss: log_softmax over the class axis (1), then the NLL loss; the second
 * output is the log-probabilities. */
static bool conv_sce_loss(Imp *imp) {
    Expr *scores = imp_tin(imp, 0, "scores"), *labels = imp_tin(imp, 1, "labels");
    if (scores == NULL || labels == NULL) return false;
    if (imp_rank(scores) < 2)
        return imp_error(imp, "scores must have rank 2 or more (N, C, ...), got rank %u",
                         imp_rank(scores));
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", 1);
    Expr *lp = imp_call1(imp, "nn.log_softmax", scores, &a);
    if (!imp_set_out(imp, 0, nll(imp, lp, labels, imp_in(imp, 2)))) return false;
    if (imp_wants_out(imp, 1)) imp_out(imp, 1, lp);
    return true;
}

/* ---- the table ------------------------------------------------------------------------------- */

const ImpConv imp_conv_reduce[] = {
    {"ReduceSum", "", 1, conv_reduce_attr},
    {"ReduceSum", "", 13, conv_reduce_input},
    {"ReduceMean", "", 1, conv_reduce_attr},
    {"ReduceMean", "", 18, conv_reduce_input},
    {"ReduceMax", "", 1, conv_reduce_attr},
    {"ReduceMax", "", 18, conv_reduce_input},
    {"ReduceMin", "", 1, conv_reduce_attr},
    {"ReduceMin", "", 18, conv_reduce_input},
    {"ReduceProd", "", 1, conv_reduce_attr},
    {"ReduceProd", "", 18, conv_reduce_input},
    {"ReduceL1", "", 1, conv_reduce_attr},
    {"ReduceL1", "", 18, conv_reduce_input},
    {"ReduceL2", "", 1, conv_reduce_attr},
    {"ReduceL2", "", 18, conv_reduce_input},
    {"ReduceLogSum", "", 1, conv_reduce_attr},
    {"ReduceLogSum", "", 18, conv_reduce_input},
    {"ReduceLogSumExp", "", 1, conv_reduce_attr},
    {"ReduceLogSumExp", "", 18, conv_reduce_input},
    {"ReduceSumSquare", "", 1, conv_reduce_attr},
    {"ReduceSumSquare", "", 18, conv_reduce_input},
    {"ArgMax", "", 1, conv_arg},
    {"ArgMin", "", 1, conv_arg},
    {"CumSum", "", 11, conv_cumsum},
    {"TopK", "", 1, conv_topk_1},
    {"TopK", "", 10, conv_topk_10},
    {"Softmax", "", 1, conv_sm_1},
    {"Softmax", "", 13, conv_sm_13},
    {"LogSoftmax", "", 1, conv_sm_1},
    {"LogSoftmax", "", 13, conv_sm_13},
    {"Hardmax", "", 1, conv_sm_1},
    {"Hardmax", "", 13, conv_sm_13},
    {"NegativeLogLikelihoodLoss", "", 12, conv_nll_loss},
    {"SoftmaxCrossEntropyLoss", "", 12, conv_sce_loss},
    {NULL, NULL, 0, NULL},
};
