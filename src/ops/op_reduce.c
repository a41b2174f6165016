/* op_reduce.c - reductions over a set of axes: sum, mean, max, min, prod, all, any, argmax,
 * argmin, variance, std, logsumexp.
 *
 * The reduced axes follow TVM's ReduceAttrs: `axis` None (or an empty list) means every axis;
 * otherwise the listed axes (negative counts from the end; a repeated axis is an error), or with
 * exclude=True every axis NOT listed. keepdims=True leaves each reduced axis as a 1; otherwise it
 * is dropped, so reducing every axis gives a scalar. Dims pass through unchanged, so `?` and
 * symbolic dims need no special care. */
#include "ops/ops.h"

/* Mark the reduced axes of a rank-`ndim` tensor in `red` (ndim entries, 1 = reduced). */
static bool reduce_axes(RelCall *rc, uint32_t ndim, bool exclude, int64_t *red) {
    bool none = attr_is_none(rc, "axis");
    const int64_t *axes;
    uint32_t n = attr_ints(rc, "axis", &axes);
    if (none && exclude) {
        rel_error(rc, "exclude=True needs an axis list (axis is None)");
        return false;
    }
    for (uint32_t i = 0; i < ndim; i++)
        red[i] = n == 0;
    if (n == 0) return true;             /* None or []: every axis, exclude or not (as TVM) */
    int64_t *given = rel_dims(rc, ndim); /* given[a] = the position in the list + 1, or 0 */
    for (uint32_t i = 0; i < ndim; i++)
        given[i] = 0;
    for (uint32_t k = 0; k < n; k++) {
        int64_t a;
        if (!rel_axis(rc, axes[k], ndim, "axis", &a)) return false;
        if (given[a]) {
            rel_error(rc, "axis %lld is listed twice (as %lld and %lld)", (long long)a,
                      (long long)axes[given[a] - 1], (long long)axes[k]);
            return false;
        }
        given[a] = (int64_t)k + 1;
    }
    for (uint32_t i = 0; i < ndim; i++)
        red[i] = (given[i] != 0) != exclude;
    return true;
}

/* The result shape for the reduced axes of t; REL_ERROR on bad attributes. The ops without an
 * exclude attribute (logsumexp) pass has_exclude false. */
static RelResult reduce_out(RelCall *rc, const TensorType *t, rly_dtype dt, bool has_exclude) {
    int64_t *red = rel_dims(rc, t->ndim);
    bool exclude = has_exclude && attr_bool(rc, "exclude");
    if (!reduce_axes(rc, t->ndim, exclude, red)) return REL_ERROR;
    bool keep = attr_bool(rc, "keepdims");
    int64_t *shape = rel_dims(rc, t->ndim);
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (!red[i])
            shape[n++] = t->shape[i];
        else if (keep)
            shape[n++] = 1;
    }
    return rel_out_tensor(rc, dt, n, shape);
}

typedef enum ReduceIn { RIN_ANY, RIN_NUMERIC, RIN_FLOAT, RIN_BOOL } ReduceIn;

static bool check_dtype(RelCall *rc, int arg, rly_dtype dt, ReduceIn in) {
    const char *want = NULL;
    switch (in) {
    case RIN_ANY: break;
    case RIN_NUMERIC:
        if (!rel_is_float(dt) && !rel_is_integer(dt))
            want = "a numeric (integer or floating-point) tensor";
        break;
    case RIN_FLOAT:
        if (!rel_is_float(dt))
            want = "a floating-point tensor (float16, float32, float64 or bfloat16)";
        break;
    case RIN_BOOL:
        if (dt != RLY_DTYPE_BOOL) want = "a bool tensor";
        break;
    }
    if (want == NULL) return true;
    rel_error_arg(rc, arg, "needs %s, got %s", want, sup_dtype_name(dt));
    return false;
}

static RelResult reduce_rel(RelCall *rc, ReduceIn in) {
    REL_TENSOR(t, rc, 0);
    if (!check_dtype(rc, 0, t->dtype, in)) return REL_ERROR;
    return reduce_out(rc, t, t->dtype, true);
}

static RelResult any_reduce_rel(RelCall *rc) { return reduce_rel(rc, RIN_ANY); }
static RelResult numeric_reduce_rel(RelCall *rc) { return reduce_rel(rc, RIN_NUMERIC); }
static RelResult bool_reduce_rel(RelCall *rc) { return reduce_rel(rc, RIN_BOOL); }

/* argmax / argmin: int32 indices; TVM requires rank >= 1. */
static RelResult arg_reduce_rel(RelCall *rc) {
    REL_TENSOR(t, rc, 0);
    if (t->ndim == 0)
        return rel_error_arg(rc, 0, "needs a tensor of rank at least 1, got a scalar (%s)",
                             sup_dtype_name(t->dtype));
    return reduce_out(rc, t, RLY_DTYPE_I32, true);
}

/* variance / std (data, mean): mean has data's rank and dtype and broadcasts to data's shape
 * (typically mean(data, axis, keepdims=True)). */
static RelResult moment_rel(RelCall *rc, ReduceIn in) {
    REL_TENSOR(t, rc, 0);
    REL_TENSOR(m, rc, 1);
    if (t->ndim == 0)
        return rel_error_arg(rc, 0, "needs a tensor of rank at least 1, got a scalar (%s)",
                             sup_dtype_name(t->dtype));
    if (!check_dtype(rc, 0, t->dtype, in)) return REL_ERROR;
    if (m->dtype != t->dtype)
        return rel_error_arg(rc, 1, "mean has dtype %s but data has %s", sup_dtype_name(m->dtype),
                             sup_dtype_name(t->dtype));
    if (m->ndim != t->ndim)
        return rel_error_arg(rc, 1,
                             "mean has rank %u but data has rank %u (keep the reduced "
                             "axes with keepdims=True)",
                             m->ndim, t->ndim);
    for (uint32_t i = 0; i < t->ndim; i++)
        if (m->shape[i] != 1 && !dim_compat(m->shape[i], t->shape[i]))
            return rel_error_arg(rc, 1,
                                 "mean shape %s does not broadcast to data shape %s "
                                 "(dimension %u: %s vs %s)",
                                 rel_shape_str(rc, m->ndim, m->shape),
                                 rel_shape_str(rc, t->ndim, t->shape), i,
                                 rel_dim_str(rc, m->shape[i]), rel_dim_str(rc, t->shape[i]));
    return reduce_out(rc, t, t->dtype, true);
}

static RelResult variance_rel(RelCall *rc) { return moment_rel(rc, RIN_NUMERIC); }
static RelResult std_rel(RelCall *rc) { return moment_rel(rc, RIN_FLOAT); }

/* logsumexp: TVM's Python composite (max, exp, sum, log); it has no exclude attribute. */
static RelResult logsumexp_rel(RelCall *rc) {
    REL_TENSOR(t, rc, 0);
    if (!check_dtype(rc, 0, t->dtype, RIN_FLOAT)) return REL_ERROR;
    return reduce_out(rc, t, t->dtype, false);
}

static const AttrSpec reduce_attrs[] = {
    {"axis", AT_OPT_INTS, "None", NULL},
    {"keepdims", AT_BOOL, "False", NULL},
    {"exclude", AT_BOOL, "False", NULL},
    {0},
};

static const AttrSpec arg_reduce_attrs[] = {
    {"axis", AT_OPT_INTS, "None", NULL},
    {"keepdims", AT_BOOL, "False", NULL},
    {"select_last_index", AT_BOOL, "False", NULL},
    {"exclude", AT_BOOL, "False", NULL},
    {0},
};

static const AttrSpec variance_attrs[] = {
    {"axis", AT_OPT_INTS, "None", NULL},
    {"keepdims", AT_BOOL, "False", NULL},
    {"exclude", AT_BOOL, "False", NULL},
    {"unbiased", AT_BOOL, "False", NULL},
    {0},
};

static const AttrSpec logsumexp_attrs[] = {
    {"axis", AT_OPT_INTS, "None", NULL},
    {"keepdims", AT_BOOL, "False", NULL},
    {0},
};

OpDef ops_reduce_table[] = {
    OP_ROW(SUM, 1, OP_COMM_REDUCE, numeric_reduce_rel, reduce_attrs, "data",
           "the sum over the reduced axes"),
    OP_ROW(MEAN, 1, OP_COMM_REDUCE, numeric_reduce_rel, reduce_attrs, "data",
           "the mean over the reduced axes (same dtype; integers divide truncating)"),
    OP_ROW(MAX, 1, OP_COMM_REDUCE, any_reduce_rel, reduce_attrs, "data",
           "the maximum over the reduced axes"),
    OP_ROW(MIN, 1, OP_COMM_REDUCE, any_reduce_rel, reduce_attrs, "data",
           "the minimum over the reduced axes"),
    OP_ROW(PROD, 1, OP_COMM_REDUCE, numeric_reduce_rel, reduce_attrs, "data",
           "the product over the reduced axes"),
    OP_ROW(ALL, 1, OP_COMM_REDUCE, bool_reduce_rel, reduce_attrs, "data",
           "logical AND of a bool tensor over the reduced axes"),
    OP_ROW(ANY, 1, OP_COMM_REDUCE, bool_reduce_rel, reduce_attrs, "data",
           "logical OR of a bool tensor over the reduced axes"),
    OP_ROW(ARGMAX, 1, OP_COMM_REDUCE, arg_reduce_rel, arg_reduce_attrs, "data",
           "int32 index of the maximum over the reduced axes (first, or last with "
           "select_last_index)"),
    OP_ROW(ARGMIN, 1, OP_COMM_REDUCE, arg_reduce_rel, arg_reduce_attrs, "data",
           "int32 index of the minimum over the reduced axes (first, or last with "
           "select_last_index)"),
    OP_ROW(VARIANCE, 2, OP_COMM_REDUCE, variance_rel, variance_attrs, "data, mean",
           "mean of (data - mean)**2 over the reduced axes (divided by n - 1 when unbiased)"),
    OP_ROW(STD, 2, OP_COMM_REDUCE, std_rel, variance_attrs, "data, mean",
           "sqrt(variance(data, mean)) over the reduced axes"),
    OP_ROW(LOGSUMEXP, 1, OP_OPAQUE, logsumexp_rel, logsumexp_attrs, "data",
           "log(sum(exp(data))) over the reduced axes, computed stably"),
    {0},
};
