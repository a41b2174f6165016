/* op_nn.c - neural-network operators of the nn.* namespace that are not convolutions or pools:
 * dense/matmul/batch_matmul, bias_add, the normalizations (batch, layer, group, instance, l2,
 * lrn), softmax family, activations, dropout, batch_flatten, depth/space rearrangements, losses
 * and fifo_buffer. Attribute names and defaults are TVM's (include/tvm/relay/attrs/nn.h); where
 * TVM has no default for a field it always prints, the Python wrapper's default is used. */
#include "ops/ops.h"

/* ---- shared checks ----------------------------------------------------------------------- */

/* Largest value accepted for a size-like attribute (block sizes, group counts): keeps every
 * product of two of them inside int64. */
#define ATTR_SIZE_MAX ((int64_t)1 << 31)

static bool need_float(RelCall *rc, const TensorType *t, const char *what) {
    if (rel_is_float(t->dtype)) return true;
    rel_error(rc, "%s must be a floating-point tensor, got %s", what, sup_dtype_name(t->dtype));
    return false;
}

/* Argument i is a 1-D tensor of dtype dt whose length may equal `len` (the data's size along
 * `axis`); writes the merged length. Returns false with rc->status set (defer or error). */
static bool channel_vec(RelCall *rc, uint32_t i, const char *what, int64_t len, int64_t axis,
                        rly_dtype dt, int64_t *merged) {
    TensorType *v = rel_tensor(rc, i);
    if (v == NULL) return false;
    if (v->ndim != 1) {
        rel_error_arg(rc, (int)i, "%s must be a 1-D tensor of length %s, got %s", what,
                      rel_dim_str(rc, len), rel_type_str(rc, &v->base));
        return false;
    }
    if (v->dtype != dt) {
        rel_error_arg(rc, (int)i, "%s has dtype %s but data has %s", what, sup_dtype_name(v->dtype),
                      sup_dtype_name(dt));
        return false;
    }
    if (!dim_compat(v->shape[0], len)) {
        rel_error_arg(rc, (int)i, "%s has length %s but data has %s channels on axis %lld", what,
                      rel_dim_str(rc, v->shape[0]), rel_dim_str(rc, len), (long long)axis);
        return false;
    }
    *merged = dim_merge(len, v->shape[0]);
    return true;
}

/* A copy of t's shape with dim `axis` replaced by d. */
static int64_t *shape_with(RelCall *rc, const TensorType *t, int64_t axis, int64_t d) {
    int64_t *s = rel_dims(rc, t->ndim);
    for (uint32_t k = 0; k < t->ndim; k++)
        s[k] = t->shape[k];
    if (axis >= 0 && (uint32_t)axis < t->ndim) s[axis] = d;
    return s;
}

/* ---- dense / matmul / batch_matmul ----------------------------------------------------------- */

/* Y = A x B with A (..., k) (or (..., k, m) when transposed) and B 2-D. */
static RelResult matmul_common(RelCall *rc, bool ta, bool tb, const char *a_name,
                               const char *b_name) {
    REL_TENSOR(a, rc, 0);
    REL_TENSOR(b, rc, 1);
    uint32_t n = a->ndim;
    if (n < (ta ? 2u : 1u))
        return rel_error_arg(rc, 0, "%s must have rank %s, got %s", a_name,
                             ta ? "2 or more when transpose_a is set" : "1 or more",
                             rel_type_str(rc, &a->base));
    if (b->ndim != 2)
        return rel_error_arg(rc, 1, "%s must be a 2-D tensor, got %s", b_name,
                             rel_type_str(rc, &b->base));
    int64_t k_a = ta ? a->shape[n - 2] : a->shape[n - 1];
    int64_t k_b = tb ? b->shape[1] : b->shape[0];
    int64_t units_b = tb ? b->shape[0] : b->shape[1];
    if (!dim_compat(k_a, k_b))
        return rel_error(rc, "%s %s has %s input features but %s %s expects %s", a_name,
                         rel_type_str(rc, &a->base), rel_dim_str(rc, k_a), b_name,
                         rel_type_str(rc, &b->base), rel_dim_str(rc, k_b));
    int64_t units = units_b;
    if (!attr_is_none(rc, "units")) {
        int64_t u = attr_int(rc, "units");
        if (u < 0) return rel_error(rc, "units must be non-negative, got %lld", (long long)u);
        if (!dim_compat(u, units_b))
            return rel_error_arg(rc, 1, "units=%lld but %s has %s output features", (long long)u,
                                 b_name, rel_dim_str(rc, units_b));
        units = u;
    }
    int dt = attr_dtype(rc, "out_dtype");
    if (dt < 0 && a->dtype != b->dtype)
        return rel_error_arg(rc, 1,
                             "dtypes differ: %s is %s, %s is %s (set out_dtype for mixed "
                             "precision)",
                             a_name, sup_dtype_name(a->dtype), b_name, sup_dtype_name(b->dtype));
    int64_t *s = shape_with(rc, a, n - 1, units);
    if (ta) s[n - 2] = a->shape[n - 1];
    return rel_out_tensor(rc, dt < 0 ? a->dtype : (rly_dtype)dt, n, s);
}

static RelResult dense_rel(RelCall *rc) { return matmul_common(rc, false, true, "data", "weight"); }

static RelResult matmul_rel(RelCall *rc) {
    return matmul_common(rc, attr_bool(rc, "transpose_a"), attr_bool(rc, "transpose_b"), "tensor_a",
                         "tensor_b");
}

static RelResult batch_matmul_rel(RelCall *rc) {
    REL_TENSOR(x, rc, 0);
    REL_TENSOR(y, rc, 1);
    if (x->ndim != 3)
        return rel_error_arg(rc, 0, "tensor_a must be a 3-D tensor (batch, rows, cols), got %s",
                             rel_type_str(rc, &x->base));
    if (y->ndim != 3)
        return rel_error_arg(rc, 1, "tensor_b must be a 3-D tensor (batch, rows, cols), got %s",
                             rel_type_str(rc, &y->base));
    bool ta = attr_bool(rc, "transpose_a"), tb = attr_bool(rc, "transpose_b");
    int64_t xi = x->shape[ta ? 2 : 1], xk = x->shape[ta ? 1 : 2];
    int64_t yk = y->shape[tb ? 2 : 1], yj = y->shape[tb ? 1 : 2];
    int64_t batch;
    if (!dim_broadcast(x->shape[0], y->shape[0], &batch))
        return rel_error(rc, "batch dimensions %lld and %lld differ and neither is 1",
                         (long long)x->shape[0], (long long)y->shape[0]);
    if (!dim_compat(xk, yk))
        return rel_error(rc,
                         "tensor_a %s has %s columns to reduce but tensor_b %s has %s "
                         "(transpose_a=%s, transpose_b=%s)",
                         rel_type_str(rc, &x->base), rel_dim_str(rc, xk),
                         rel_type_str(rc, &y->base), rel_dim_str(rc, yk), ta ? "True" : "False",
                         tb ? "True" : "False");
    int dt = attr_dtype(rc, "out_dtype");
    if (dt < 0 && x->dtype != y->dtype)
        return rel_error_arg(rc, 1,
                             "dtypes differ: tensor_a is %s, tensor_b is %s (set "
                             "out_dtype for mixed precision)",
                             sup_dtype_name(x->dtype), sup_dtype_name(y->dtype));
    int64_t s[3] = {batch, xi, yj};
    return rel_out_tensor(rc, dt < 0 ? x->dtype : (rly_dtype)dt, 3, s);
}

/* ---- bias_add, prelu ---------------------------------------------------------------------------
 */

static RelResult per_channel_rel(RelCall *rc, const char *what) {
    REL_TENSOR(data, rc, 0);
    int64_t axis, c;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    if (!channel_vec(rc, 1, what, data->shape[axis], axis, data->dtype, &c)) return rc->status;
    return rel_out_tensor(rc, data->dtype, data->ndim, shape_with(rc, data, axis, c));
}

static RelResult bias_add_rel(RelCall *rc) { return per_channel_rel(rc, "bias"); }
static RelResult prelu_rel(RelCall *rc) { return per_channel_rel(rc, "alpha"); }

/* ---- normalizations ----------------------------------------------------------------------------
 */

/* data, then n_vec per-channel vectors along `axis`; writes the normalized axis and the merged
 * channel count. */
static bool norm_args(RelCall *rc, uint32_t n_vec, const char *const *names, TensorType **data_out,
                      int64_t *axis_out, int64_t *c_out) {
    TensorType *data = rel_tensor(rc, 0);
    if (data == NULL) return false;
    if (!need_float(rc, data, "data")) return false;
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return false;
    int64_t c = data->shape[axis];
    for (uint32_t i = 0; i < n_vec; i++)
        if (!channel_vec(rc, 1 + i, names[i], c, axis, data->dtype, &c)) return false;
    *data_out = data;
    *axis_out = axis;
    *c_out = c;
    return true;
}

static const char *const gamma_beta[] = {"gamma", "beta", "moving_mean", "moving_var"};

static RelResult batch_norm_rel(RelCall *rc) {
    TensorType *data;
    int64_t axis, c;
    if (!norm_args(rc, 4, gamma_beta, &data, &axis, &c)) return rc->status;
    Type *vec = ir_type_tensor(rc->ctx, data->dtype, 1, &c);
    Type *fields[3] = {
        ir_type_tensor(rc->ctx, data->dtype, data->ndim, shape_with(rc, data, axis, c)), vec, vec};
    return rel_out(rc, ir_type_tuple(rc->ctx, 3, fields));
}

/* nn.batch_norm_training: batch_norm's arguments and results, the statistics being the batch's
 * (results 1 and 2 are the updated moving averages). */
static RelResult batch_norm_training_rel(RelCall *rc) {
    double m = attr_float(rc, "momentum");
    if (!(m >= 0 && m <= 1)) return rel_error(rc, "momentum must be between 0 and 1, got %g", m);
    return batch_norm_rel(rc);
}

static RelResult affine_norm_rel(RelCall *rc, uint32_t min_rank) {
    TensorType *data;
    int64_t axis, c;
    REL_TENSOR(d0, rc, 0);
    if (d0->ndim < min_rank)
        return rel_error_arg(rc, 0, "data must have rank %u or more, got %s", min_rank,
                             rel_type_str(rc, &d0->base));
    if (!norm_args(rc, 2, gamma_beta, &data, &axis, &c)) return rc->status;
    return rel_out_tensor(rc, data->dtype, data->ndim, shape_with(rc, data, axis, c));
}

static RelResult layer_norm_rel(RelCall *rc) { return affine_norm_rel(rc, 1); }
static RelResult instance_norm_rel(RelCall *rc) { return affine_norm_rel(rc, 3); }

static RelResult group_norm_rel(RelCall *rc) {
    int64_t g = attr_int(rc, "num_groups");
    if (g < 1) return rel_error(rc, "num_groups must be positive, got %lld", (long long)g);
    TensorType *data;
    int64_t axis, c;
    if (!norm_args(rc, 2, gamma_beta, &data, &axis, &c)) return rc->status;
    if (dim_known(c) && c % g != 0)
        return rel_error(rc, "%lld channels cannot be split into num_groups=%lld groups",
                         (long long)c, (long long)g);
    return rel_out_tensor(rc, data->dtype, data->ndim, shape_with(rc, data, axis, c));
}

static RelResult l2_normalize_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (!need_float(rc, data, "data")) return REL_ERROR;
    if (attr_float(rc, "eps") < 0)
        return rel_error(rc, "eps must be non-negative, got %g", attr_float(rc, "eps"));
    const int64_t *axes;
    uint32_t n = attr_ints(rc, "axis", &axes);
    int64_t *seen = rel_dims(rc, n);
    for (uint32_t i = 0; i < n; i++) {
        if (!rel_axis(rc, axes[i], data->ndim, "axis", &seen[i])) return REL_ERROR;
        for (uint32_t j = 0; j < i; j++)
            if (seen[j] == seen[i])
                return rel_error(rc, "axis %lld is listed twice", (long long)seen[i]);
    }
    return rel_out(rc, &data->base);
}

static RelResult lrn_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (!need_float(rc, data, "data")) return REL_ERROR;
    int64_t size = attr_int(rc, "size"), axis;
    if (size < 1) return rel_error(rc, "size must be positive, got %lld", (long long)size);
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    return rel_out(rc, &data->base);
}

/* ---- softmax family, activations, dropout --------------------------------------------------- */

static RelResult softmax_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (!need_float(rc, data, "data")) return REL_ERROR;
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    return rel_out(rc, &data->base);
}

static RelResult activation_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (data->dtype == RLY_DTYPE_BOOL)
        return rel_error(rc, "data must be a numeric tensor, got bool");
    return rel_out(rc, &data->base);
}

static RelResult leaky_relu_rel(RelCall *rc) {
    double alpha = attr_float(rc, "alpha");
    if (!(alpha >= 0)) return rel_error(rc, "alpha must be non-negative, got %g", alpha);
    return activation_rel(rc);
}

static RelResult dropout_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    double rate = attr_float(rc, "rate");
    if (!(rate >= 0 && rate <= 1))
        return rel_error(rc, "rate must be between 0 and 1, got %g", rate);
    Type *fields[2] = {&data->base, &data->base};
    return rel_out(rc, ir_type_tuple(rc->ctx, 2, fields));
}

/* ---- reshaping ------------------------------------------------------------------------------- */

static RelResult batch_flatten_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (data->ndim == 0) return rel_error_arg(rc, 0, "data must have rank 1 or more, got a scalar");
    int64_t rest = 1;
    for (uint32_t i = 1; i < data->ndim; i++)
        if (!rel_dim_mul(rc, rest, data->shape[i], &rest)) return REL_ERROR;
    int64_t s[2] = {data->shape[0], rest};
    return rel_out_tensor(rc, data->dtype, 2, s);
}

/* Positions of C, H, W in a 4-D data layout. */
static void chw_of(const char *layout, int *c, int *h, int *w) {
    bool nhwc = strcmp(layout, "NHWC") == 0;
    *c = nhwc ? 3 : 1;
    *h = nhwc ? 1 : 2;
    *w = nhwc ? 2 : 3;
}

static RelResult subpixel_rel(RelCall *rc, bool to_space) {
    REL_TENSOR(data, rc, 0);
    if (data->ndim != 4)
        return rel_error_arg(rc, 0, "data must be a 4-D tensor in layout %s, got %s",
                             attr_str(rc, "layout"), rel_type_str(rc, &data->base));
    int64_t b = attr_int(rc, "block_size");
    if (b < 1 || b > ATTR_SIZE_MAX)
        return rel_error(rc, "block_size must be between 1 and %lld, got %lld",
                         (long long)ATTR_SIZE_MAX, (long long)b);
    int ci, hi, wi;
    chw_of(attr_str(rc, "layout"), &ci, &hi, &wi);
    int64_t c = data->shape[ci], h = data->shape[hi], w = data->shape[wi], bb = b * b;
    int64_t *s = shape_with(rc, data, -1, 0);
    if (to_space) {
        if (dim_known(c) && c % bb != 0)
            return rel_error(rc, "%lld channels are not divisible by block_size^2 = %lld",
                             (long long)c, (long long)bb);
        s[ci] = dim_floordiv(c, bb);
        if (!rel_dim_mul(rc, h, b, &s[hi]) || !rel_dim_mul(rc, w, b, &s[wi])) return REL_ERROR;
    } else {
        if ((dim_known(h) && h % b != 0) || (dim_known(w) && w % b != 0))
            return rel_error(rc, "height %s and width %s must be divisible by block_size %lld",
                             rel_dim_str(rc, h), rel_dim_str(rc, w), (long long)b);
        if (!rel_dim_mul(rc, c, bb, &s[ci])) return REL_ERROR;
        s[hi] = dim_floordiv(h, b);
        s[wi] = dim_floordiv(w, b);
    }
    return rel_out_tensor(rc, data->dtype, 4, s);
}

static RelResult depth_to_space_rel(RelCall *rc) { return subpixel_rel(rc, true); }
static RelResult space_to_depth_rel(RelCall *rc) { return subpixel_rel(rc, false); }

/* ---- losses ---------------------------------------------------------------------------------- */

static RelResult cross_entropy_rel(RelCall *rc) {
    REL_TENSOR(x, rc, 0);
    REL_TENSOR(y, rc, 1);
    if (x->ndim != 2 || y->ndim != 2)
        return rel_error(rc, "predictions and targets must be 2-D (batch, classes), got %s and %s",
                         rel_type_str(rc, &x->base), rel_type_str(rc, &y->base));
    if (!need_float(rc, x, "predictions")) return REL_ERROR;
    if (x->dtype != y->dtype)
        return rel_error_arg(rc, 1, "dtypes differ: predictions are %s, targets are %s",
                             sup_dtype_name(x->dtype), sup_dtype_name(y->dtype));
    for (uint32_t i = 0; i < 2; i++)
        if (!dim_compat(x->shape[i], y->shape[i]))
            return rel_error(rc, "predictions %s and targets %s have different shapes",
                             rel_type_str(rc, &x->base), rel_type_str(rc, &y->base));
    return rel_out_tensor(rc, x->dtype, 0, NULL);
}

static RelResult nll_loss_rel(RelCall *rc) {
    REL_TENSOR(pred, rc, 0);
    REL_TENSOR(tgt, rc, 1);
    REL_TENSOR(wt, rc, 2);
    if (pred->ndim < 2)
        return rel_error_arg(rc, 0,
                             "predictions must have rank 2 or more (batch, classes, ...), "
                             "got %s",
                             rel_type_str(rc, &pred->base));
    if (tgt->ndim + 1 != pred->ndim)
        return rel_error_arg(rc, 1,
                             "targets must have one dimension fewer than predictions %s "
                             "(no class axis), got %s",
                             rel_type_str(rc, &pred->base), rel_type_str(rc, &tgt->base));
    if (wt->ndim != 1)
        return rel_error_arg(rc, 2,
                             "weights must be a 1-D tensor with one weight per class, got "
                             "%s",
                             rel_type_str(rc, &wt->base));
    if (!need_float(rc, pred, "predictions")) return REL_ERROR;
    if (wt->dtype != pred->dtype)
        return rel_error_arg(rc, 2, "weights have dtype %s but predictions have %s",
                             sup_dtype_name(wt->dtype), sup_dtype_name(pred->dtype));
    if (!rel_is_integer(tgt->dtype))
        return rel_error_arg(rc, 1, "targets must be class indices of an integer dtype, got %s",
                             sup_dtype_name(tgt->dtype));
    if (!dim_compat(pred->shape[1], wt->shape[0]))
        return rel_error(rc, "predictions have %s classes (axis 1) but weights have %s",
                         rel_dim_str(rc, pred->shape[1]), rel_dim_str(rc, wt->shape[0]));
    int64_t *s = rel_dims(rc, tgt->ndim);
    for (uint32_t i = 0; i < tgt->ndim; i++) {
        int64_t p = pred->shape[i == 0 ? 0 : i + 1];
        if (!dim_compat(p, tgt->shape[i]))
            return rel_error(rc, "predictions %s and targets %s disagree outside the class axis",
                             rel_type_str(rc, &pred->base), rel_type_str(rc, &tgt->base));
        s[i] = dim_merge(tgt->shape[i], p);
    }
    if (strcmp(attr_str(rc, "reduction"), "none") == 0)
        return rel_out_tensor(rc, pred->dtype, tgt->ndim, s);
    return rel_out_tensor(rc, pred->dtype, 0, NULL);
}

/* ---- fifo_buffer -------------------------------------------------------------------------------
 */

static RelResult fifo_buffer_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(buf, rc, 1);
    if (data->ndim != buf->ndim)
        return rel_error(rc, "data %s and buffer %s must have the same rank",
                         rel_type_str(rc, &data->base), rel_type_str(rc, &buf->base));
    if (data->dtype != buf->dtype)
        return rel_error_arg(rc, 1, "dtypes differ: data is %s, buffer is %s",
                             sup_dtype_name(data->dtype), sup_dtype_name(buf->dtype));
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), buf->ndim, "axis", &axis)) return REL_ERROR;
    int64_t *s = shape_with(rc, buf, -1, 0);
    for (uint32_t i = 0; i < buf->ndim; i++) {
        if ((int64_t)i == axis) continue;
        if (!dim_compat(data->shape[i], buf->shape[i]))
            return rel_error(rc,
                             "data %s and buffer %s differ on dimension %u (only axis %lld "
                             "may differ)",
                             rel_type_str(rc, &data->base), rel_type_str(rc, &buf->base), i,
                             (long long)axis);
        s[i] = dim_merge(buf->shape[i], data->shape[i]);
    }
    int64_t dn = data->shape[axis], bn = buf->shape[axis];
    if (dim_known(dn) && dim_known(bn) && dn >= bn)
        return rel_error(rc,
                         "data has %lld entries on axis %lld; the buffer must hold more, "
                         "it holds %lld",
                         (long long)dn, (long long)axis, (long long)bn);
    return rel_out_tensor(rc, buf->dtype, buf->ndim, s);
}

/* ---- schemas ----------------------------------------------------------------------------------
 */

static const AttrSpec dense_attrs[] = {
    {"units", AT_OPT_INT, "None", NULL},
    {"out_dtype", AT_DTYPE, "\"\"", NULL},
    {0},
};
static const AttrSpec matmul_attrs[] = {
    {"units", AT_OPT_INT, "None", NULL},
    {"out_dtype", AT_DTYPE, "\"\"", NULL},
    {"transpose_a", AT_BOOL, "False", NULL},
    {"transpose_b", AT_BOOL, "False", NULL},
    {0},
};
static const AttrSpec batch_matmul_attrs[] = {
    {"out_dtype", AT_DTYPE, "\"\"", NULL},
    {"transpose_a", AT_BOOL, "False", NULL},
    {"transpose_b", AT_BOOL, "False", NULL}, /* C++ default; Python's wrapper passes True */
    {0},
};
static const AttrSpec axis1_attrs[] = {{"axis", AT_INT, "1", NULL}, {0}};
static const AttrSpec axis_last_attrs[] = {{"axis", AT_INT, "-1", NULL}, {0}};
static const AttrSpec fifo_attrs[] = {{"axis", AT_INT, "0", NULL}, {0}};
static const AttrSpec norm_attrs[] = {
    {"axis", AT_INT, "1", NULL},
    {"epsilon", AT_FLOAT, "1e-05", NULL},
    {"center", AT_BOOL, "True", NULL},
    {"scale", AT_BOOL, "True", NULL},
    {0},
};
static const AttrSpec norm_training_attrs[] = {
    {"axis", AT_INT, "1", NULL},         {"epsilon", AT_FLOAT, "1e-05", NULL},
    {"momentum", AT_FLOAT, "0.9", NULL}, {"center", AT_BOOL, "True", NULL},
    {"scale", AT_BOOL, "True", NULL},    {0},
};
static const AttrSpec layer_norm_attrs[] = {
    {"axis", AT_INT, "-1", NULL},
    {"epsilon", AT_FLOAT, "1e-05", NULL},
    {"center", AT_BOOL, "True", NULL},
    {"scale", AT_BOOL, "True", NULL},
    {0},
};
static const AttrSpec group_norm_attrs[] = {
    {"num_groups", AT_INT, "0", NULL},    {"axis", AT_INT, "1", NULL},
    {"epsilon", AT_FLOAT, "1e-05", NULL}, {"center", AT_BOOL, "True", NULL},
    {"scale", AT_BOOL, "True", NULL},     {0},
};
static const AttrSpec l2_attrs[] = {
    {"eps", AT_FLOAT, NULL, NULL},
    {"axis", AT_OPT_INTS, "None", NULL},
    {0},
};
static const AttrSpec lrn_attrs[] = {
    {"size", AT_INT, "5", NULL},      {"axis", AT_INT, "1", NULL},
    {"bias", AT_FLOAT, "2", NULL},    {"alpha", AT_FLOAT, "0.0001", NULL},
    {"beta", AT_FLOAT, "0.75", NULL}, {0},
};
static const AttrSpec leaky_attrs[] = {{"alpha", AT_FLOAT, "0.25", NULL}, {0}};
static const AttrSpec dropout_attrs[] = {{"rate", AT_FLOAT, "0.5", NULL}, {0}};
static const AttrSpec subpixel_attrs[] = {
    {"block_size", AT_INT, "1", NULL},
    {"layout", AT_STR, "\"NCHW\"", "NCHW|NHWC"},
    {"mode", AT_STR, "\"DCR\"", "DCR|CRD"},
    {0},
};
static const AttrSpec nll_attrs[] = {
    {"reduction", AT_STR, "\"mean\"", "mean|sum|none"},
    {"ignore_index", AT_INT, "-100", NULL},
    {0},
};

OpDef ops_nn_table[] = {
    OP_ROW(NN_DENSE, 2, OP_OUT_EWISE_FUSABLE, dense_rel, dense_attrs, "data, weight",
           "data (..., k) times weight (units, k) transposed: (..., units)"),
    OP_ROW(NN_MATMUL, 2, OP_OUT_EWISE_FUSABLE, matmul_rel, matmul_attrs, "tensor_a, tensor_b",
           "tensor_a times tensor_b (2-D), each optionally transposed"),
    OP_ROW(NN_BATCH_MATMUL, 2, OP_OUT_EWISE_FUSABLE, batch_matmul_rel, batch_matmul_attrs,
           "tensor_a, tensor_b", "per-batch matrix product of 3-D tensors; batch 1 broadcasts"),
    OP_ROW(NN_BIAS_ADD, 2, OP_BROADCAST, bias_add_rel, axis1_attrs, "data, bias",
           "add a 1-D bias along axis"),
    OP_ROW(NN_BATCH_NORM, 5, OP_OUT_EWISE_FUSABLE, batch_norm_rel, norm_attrs,
           "data, gamma, beta, moving_mean, moving_var",
           "batch normalization along axis; (out, mean, var)"),
    OP_ROW(NN_BATCH_NORM_TRAINING, 5, OP_OPAQUE, batch_norm_training_rel, norm_training_attrs,
           "data, gamma, beta, moving_mean, moving_var",
           "batch normalization with the batch's statistics over every axis but axis; (out, "
           "momentum * moving_mean + (1 - momentum) * mean, the same for the biased variance)"),
    OP_ROW(NN_LAYER_NORM, 3, OP_OPAQUE, layer_norm_rel, layer_norm_attrs, "data, gamma, beta",
           "layer normalization over axis, with per-channel gamma and beta"),
    OP_ROW(NN_GROUP_NORM, 3, OP_OPAQUE, group_norm_rel, group_norm_attrs, "data, gamma, beta",
           "group normalization: channels on axis split into num_groups groups"),
    OP_ROW(NN_INSTANCE_NORM, 3, OP_OPAQUE, instance_norm_rel, norm_attrs, "data, gamma, beta",
           "instance normalization per sample and channel"),
    OP_ROW(NN_L2_NORMALIZE, 1, OP_OUT_EWISE_FUSABLE, l2_normalize_rel, l2_attrs, "data",
           "x / sqrt(max(sum(x^2 over axis), eps))"),
    OP_ROW(NN_LRN, 1, OP_OPAQUE, lrn_rel, lrn_attrs, "data",
           "local response normalization across size channels of axis"),
    OP_ROW(NN_SOFTMAX, 1, OP_OUT_EWISE_FUSABLE, softmax_rel, axis_last_attrs, "data",
           "exp(x) / sum(exp(x)) along axis"),
    OP_ROW(NN_FAST_SOFTMAX, 1, OP_OUT_EWISE_FUSABLE, softmax_rel, axis_last_attrs, "data",
           "softmax with an approximate exp"),
    OP_ROW(NN_LOG_SOFTMAX, 1, OP_OUT_EWISE_FUSABLE, softmax_rel, axis_last_attrs, "data",
           "log(softmax(x)) along axis"),
    OP_ROW(NN_RELU, 1, OP_ELEMWISE, activation_rel, NULL, "data", "max(x, 0)"),
    OP_ROW(NN_LEAKY_RELU, 1, OP_ELEMWISE, leaky_relu_rel, leaky_attrs, "data",
           "x > 0 ? x : alpha * x"),
    OP_ROW(NN_PRELU, 2, OP_BROADCAST, prelu_rel, axis1_attrs, "data, alpha",
           "x > 0 ? x : alpha[c] * x with a per-channel slope along axis"),
    OP_ROW(NN_DROPOUT, 1, OP_OPAQUE, dropout_rel, dropout_attrs, "data",
           "drop elements with probability rate; (out, mask)"),
    OP_ROW(NN_BATCH_FLATTEN, 1, OP_INJECTIVE, batch_flatten_rel, NULL, "data",
           "(d0, d1, ..., dn) -> (d0, d1 * ... * dn)"),
    OP_ROW(NN_DEPTH_TO_SPACE, 1, OP_INJECTIVE, depth_to_space_rel, subpixel_attrs, "data",
           "move block_size^2 channel groups into spatial blocks"),
    OP_ROW(NN_SPACE_TO_DEPTH, 1, OP_INJECTIVE, space_to_depth_rel, subpixel_attrs, "data",
           "move spatial blocks of block_size into channels"),
    OP_ROW(NN_CROSS_ENTROPY, 2, OP_OPAQUE, cross_entropy_rel, NULL, "predictions, targets",
           "mean over the batch of -sum(targets * log(predictions)); a scalar"),
    OP_ROW(NN_CROSS_ENTROPY_WITH_LOGITS, 2, OP_OPAQUE, cross_entropy_rel, NULL,
           "predictions, targets", "mean over the batch of -sum(targets * predictions); a scalar"),
    OP_ROW(NN_NLL_LOSS, 3, OP_OUT_EWISE_FUSABLE, nll_loss_rel, nll_attrs,
           "predictions, targets, weights",
           "negative log likelihood of class indices, reduced by mean, sum or none"),
    OP_ROW(NN_FIFO_BUFFER, 2, OP_OPAQUE, fifo_buffer_rel, fifo_attrs, "data, buffer",
           "append data to buffer along axis, dropping the oldest entries"),
    {0},
};
