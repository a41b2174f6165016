/* op_qnn.c - the quantized dialect (qnn.*): quantize, dequantize, requantize, conv2d, dense,
 * the broadcasting binary ops and concatenate. Scales are float32 and zero points int32, each a
 * scalar or (where TVM allows it) a 1-D per-channel tensor along the op's channel axis.
 * Attribute names and defaults are TVM's (include/tvm/relay/qnn/attrs.h, Conv2DAttrs,
 * DenseAttrs); an out_dtype of "" (TVM's C++ default, which TVM itself rejects) is read as the
 * Python wrapper's default. */
#include <stdio.h>

#include "ops/ops.h"

/* Largest stride, dilation, padding or kernel extent accepted: keeps the output-size arithmetic
 * inside int64. */
#define ATTR_SIZE_MAX ((int64_t)1 << 31)

static bool dtype_in(rly_dtype dt, const rly_dtype *set, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (set[i] == dt) return true;
    return false;
}

/* Argument i is a quantization parameter of dtype `want`: a scalar, or when per_channel is set a
 * 1-D tensor whose length may equal `len`. Returns false with rc->status set. */
static bool qparam(RelCall *rc, uint32_t i, const char *what, rly_dtype want, bool per_channel,
                   int64_t len) {
    TensorType *t = rel_tensor(rc, i);
    if (t == NULL) return false;
    if (t->dtype != want) {
        rel_error_arg(rc, (int)i, "%s must be %s, got %s", what, sup_dtype_name(want),
                      sup_dtype_name(t->dtype));
        return false;
    }
    if (t->ndim == 0) return true;
    if (!per_channel || t->ndim != 1) {
        rel_error_arg(rc, (int)i, "%s must be a scalar%s, got %s", what,
                      per_channel ? " or a 1-D per-channel tensor" : "",
                      rel_type_str(rc, &t->base));
        return false;
    }
    if (!dim_compat(t->shape[0], len)) {
        rel_error_arg(rc, (int)i, "%s has %s values but there are %s channels", what,
                      rel_dim_str(rc, t->shape[0]), rel_dim_str(rc, len));
        return false;
    }
    return true;
}

static bool is_scalar_arg(RelCall *rc, uint32_t i, bool *out) {
    TensorType *t = rel_tensor(rc, i);
    if (t == NULL) return false;
    *out = t->ndim == 0;
    return true;
}

/* The channel count along attribute `axis_name` of data, as TVM's qnn relations compute it: a
 * scalar has one channel; the axis is only validated when a parameter is per-channel. */
static bool channel_len(RelCall *rc, const TensorType *data, const char *axis_name, bool check,
                        int64_t *len) {
    if (data->ndim == 0) {
        *len = 1;
        return true;
    }
    int64_t axis;
    if (!check) {
        *len = DIM_ANY;
        return true;
    }
    if (!rel_axis(rc, attr_int(rc, axis_name), data->ndim, axis_name, &axis)) return false;
    *len = data->shape[axis];
    return true;
}

static const char *dtype_list(const rly_dtype *set, size_t n, RelCall *rc) {
    StrBuf sb = {0};
    for (size_t i = 0; i < n; i++)
        sb_printf(&sb, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", sup_dtype_name(set[i]));
    const char *s = arena_strndup(&rc->ctx->arena, sb_cstr(&sb), sb.len);
    sb_free(&sb);
    return s;
}

#define NEED_DTYPE(rc, arg, what, dt, set)                                                         \
    if (!dtype_in((dt), (set), RLY_ARRAY_LEN(set)))                                                \
    return rel_error_arg((rc), (arg), "%s must be %s, got %s", (what),                             \
                         dtype_list((set), RLY_ARRAY_LEN(set), (rc)), sup_dtype_name(dt))

/* ---- quantize / dequantize / requantize -------------------------------------------------------
 */

/* Checks args 1 and 2 as (scale, zero point) per-channel along "axis" of data. */
static bool scale_zp_along_axis(RelCall *rc, const TensorType *data, uint32_t first,
                                const char *scale_name, const char *zp_name, bool always_check) {
    bool s_scalar, z_scalar;
    if (!is_scalar_arg(rc, first, &s_scalar) || !is_scalar_arg(rc, first + 1, &z_scalar))
        return false;
    int64_t len;
    if (!channel_len(rc, data, "axis", always_check || !(s_scalar && z_scalar), &len)) return false;
    return qparam(rc, first, scale_name, RLY_DTYPE_F32, true, len) &&
           qparam(rc, first + 1, zp_name, RLY_DTYPE_I32, true, len);
}

static RelResult quantize_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (!rel_is_float(data->dtype))
        return rel_error_arg(rc, 0, "data must be a floating-point tensor, got %s",
                             sup_dtype_name(data->dtype));
    static const rly_dtype outs[] = {RLY_DTYPE_I8, RLY_DTYPE_U8, RLY_DTYPE_I16, RLY_DTYPE_U16,
                                     RLY_DTYPE_I32};
    int dt = attr_dtype(rc, "out_dtype");
    rly_dtype out = dt < 0 ? RLY_DTYPE_I8 : (rly_dtype)dt;
    NEED_DTYPE(rc, -1, "out_dtype", out, outs);
    if (!scale_zp_along_axis(rc, data, 1, "output_scale", "output_zero_point", false))
        return rc->status;
    return rel_out_tensor(rc, out, data->ndim, data->shape);
}

static RelResult dequantize_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    static const rly_dtype ins[] = {RLY_DTYPE_I8, RLY_DTYPE_U8, RLY_DTYPE_I16, RLY_DTYPE_U16,
                                    RLY_DTYPE_I32};
    NEED_DTYPE(rc, 0, "data", data->dtype, ins);
    static const rly_dtype outs[] = {RLY_DTYPE_F16, RLY_DTYPE_F32};
    int dt = attr_dtype(rc, "out_dtype");
    rly_dtype out = dt < 0 ? RLY_DTYPE_F32 : (rly_dtype)dt;
    NEED_DTYPE(rc, -1, "out_dtype", out, outs);
    if (!scale_zp_along_axis(rc, data, 1, "input_scale", "input_zero_point", false))
        return rc->status;
    return rel_out_tensor(rc, out, data->ndim, data->shape);
}

static RelResult requantize_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    static const rly_dtype ins[] = {RLY_DTYPE_I8, RLY_DTYPE_U8, RLY_DTYPE_I16, RLY_DTYPE_I32,
                                    RLY_DTYPE_I64};
    NEED_DTYPE(rc, 0, "data", data->dtype, ins);
    static const rly_dtype outs[] = {RLY_DTYPE_I8, RLY_DTYPE_U8, RLY_DTYPE_I16, RLY_DTYPE_I32};
    int dt = attr_dtype(rc, "out_dtype");
    rly_dtype out = dt < 0 ? RLY_DTYPE_I8 : (rly_dtype)dt;
    NEED_DTYPE(rc, -1, "out_dtype", out, outs);
    if (!scale_zp_along_axis(rc, data, 1, "input_scale", "input_zero_point", true) ||
        !qparam(rc, 3, "output_scale", RLY_DTYPE_F32, false, 1) ||
        !qparam(rc, 4, "output_zero_point", RLY_DTYPE_I32, false, 1))
        return rc->status;
    return rel_out_tensor(rc, out, data->ndim, data->shape);
}

/* ---- conv2d ---------------------------------------------------------------------------------- */

/* Reads an int list attribute of 1 or `full` values (or 4 for padding) into out[0..full). */
static bool int_pair(RelCall *rc, const char *name, int64_t lo, int64_t out[2]) {
    const int64_t *v;
    uint32_t n = attr_ints(rc, name, &v);
    if (n != 1 && n != 2) {
        rel_error(rc, "%s must have 1 or 2 values, got %u", name, n);
        return false;
    }
    for (uint32_t i = 0; i < 2; i++) {
        out[i] = v[n == 1 ? 0 : i];
        if (out[i] < lo || out[i] > ATTR_SIZE_MAX) {
            rel_error(rc, "%s values must be between %lld and %lld, got %lld", name, (long long)lo,
                      (long long)ATTR_SIZE_MAX, (long long)out[i]);
            return false;
        }
    }
    return true;
}

/* padding: 1 value (all sides), 2 (top/bottom, left/right) or 4 (top, left, bottom, right). */
static bool conv_padding(RelCall *rc, int64_t pad[4]) {
    const int64_t *v;
    uint32_t n = attr_ints(rc, "padding", &v);
    if (n != 1 && n != 2 && n != 4) {
        rel_error(rc, "padding must have 1, 2 or 4 values, got %u", n);
        return false;
    }
    for (uint32_t i = 0; i < 4; i++) {
        pad[i] = n == 1 ? v[0] : n == 2 ? v[i % 2] : v[i];
        if (pad[i] < 0 || pad[i] > ATTR_SIZE_MAX) {
            rel_error(rc, "padding values must be between 0 and %lld, got %lld",
                      (long long)ATTR_SIZE_MAX, (long long)pad[i]);
            return false;
        }
    }
    return true;
}

/* One spatial output extent: (in + pads - dilated kernel) / stride + 1. */
static bool conv_extent(RelCall *rc, const char *what, int64_t in, int64_t pad_sum, int64_t k,
                        int64_t dil, int64_t stride, int64_t *out) {
    if (!dim_known(in) || !dim_known(k)) {
        *out = DIM_ANY;
        return true;
    }
    if (k > ATTR_SIZE_MAX || in > INT64_MAX / 4) {
        rel_error(rc, "%s sizes are too large (input %lld, kernel %lld)", what, (long long)in,
                  (long long)k);
        return false;
    }
    if (k < 1) {
        rel_error(rc, "the weight has an empty kernel %s", what);
        return false;
    }
    int64_t dk = (k - 1) * dil + 1, padded = in + pad_sum;
    if (padded < dk) {
        rel_error(rc,
                  "the kernel %s (%lld with dilation) is larger than the padded input %s "
                  "(%lld)",
                  what, (long long)dk, what, (long long)padded);
        return false;
    }
    *out = (padded - dk) / stride + 1;
    return true;
}

static int layout_pos(const char *layout, char c) {
    const char *p = strchr(layout, c);
    return p ? (int)(p - layout) : -1;
}

static RelResult qnn_conv2d_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(weight, rc, 1);
    const char *dl = attr_str(rc, "data_layout"), *kl = attr_str(rc, "kernel_layout");
    const char *ol = attr_str(rc, "out_layout");
    if (ol[0] == '\0') ol = dl;
    if (data->ndim != 4)
        return rel_error_arg(rc, 0, "data must be a 4-D tensor in layout %s, got %s", dl,
                             rel_type_str(rc, &data->base));
    if (weight->ndim != 4)
        return rel_error_arg(rc, 1, "weight must be a 4-D tensor in layout %s, got %s", kl,
                             rel_type_str(rc, &weight->base));
    static const rly_dtype qin[] = {RLY_DTYPE_I8, RLY_DTYPE_U8, RLY_DTYPE_I16};
    NEED_DTYPE(rc, 0, "data", data->dtype, qin);
    NEED_DTYPE(rc, 1, "weight", weight->dtype, qin);
    static const rly_dtype outs[] = {RLY_DTYPE_I16, RLY_DTYPE_I32, RLY_DTYPE_I64};
    int odt = attr_dtype(rc, "out_dtype");
    rly_dtype out = odt < 0 ? RLY_DTYPE_I32 : (rly_dtype)odt;
    NEED_DTYPE(rc, -1, "out_dtype", out, outs);

    int64_t n = data->shape[layout_pos(dl, 'N')], c = data->shape[layout_pos(dl, 'C')];
    int64_t h = data->shape[layout_pos(dl, 'H')], w = data->shape[layout_pos(dl, 'W')];
    int64_t ko = weight->shape[layout_pos(kl, 'O')], ki = weight->shape[layout_pos(kl, 'I')];
    int64_t kh = weight->shape[layout_pos(kl, 'H')], kw = weight->shape[layout_pos(kl, 'W')];
    int64_t strides[2], dil[2], pad[4];
    if (!int_pair(rc, "strides", 1, strides) || !int_pair(rc, "dilation", 1, dil) ||
        !conv_padding(rc, pad))
        return REL_ERROR;
    int64_t groups = attr_int(rc, "groups");
    if (groups < 1 || groups > ATTR_SIZE_MAX)
        return rel_error(rc, "groups must be between 1 and %lld, got %lld",
                         (long long)ATTR_SIZE_MAX, (long long)groups);
    if (!attr_is_none(rc, "kernel_size")) {
        const int64_t *ks;
        uint32_t nk = attr_ints(rc, "kernel_size", &ks);
        if (nk != 2) return rel_error(rc, "kernel_size must have 2 values, got %u", nk);
        if (!dim_compat(ks[0], kh) || !dim_compat(ks[1], kw))
            return rel_error_arg(rc, 1, "kernel_size=[%lld, %lld] but weight %s has a %sx%s kernel",
                                 (long long)ks[0], (long long)ks[1],
                                 rel_type_str(rc, &weight->base), rel_dim_str(rc, kh),
                                 rel_dim_str(rc, kw));
    }
    /* Depthwise in HWOI (TVM's NHWC depthwise layout): O holds the input channels and I the
     * channel multiplier; otherwise O is the output channel count and I the input channels per
     * group. */
    int64_t out_c;
    bool depthwise = strcmp(kl, "HWOI") == 0 && groups > 1 && c == groups && ko == groups;
    if (depthwise) {
        out_c = dim_mul(c, ki);
    } else {
        if (dim_known(c) && c % groups != 0)
            return rel_error(rc, "data has %lld channels, not divisible by groups=%lld",
                             (long long)c, (long long)groups);
        if (!dim_compat(dim_floordiv(c, groups), ki))
            return rel_error(rc,
                             "data has %s channels but weight expects %s per group "
                             "(groups=%lld)",
                             rel_dim_str(rc, c), rel_dim_str(rc, ki), (long long)groups);
        if (dim_known(ko) && ko % groups != 0)
            return rel_error_arg(rc, 1,
                                 "weight has %lld output channels, not divisible by "
                                 "groups=%lld",
                                 (long long)ko, (long long)groups);
        out_c = ko;
    }
    if (!attr_is_none(rc, "channels")) {
        int64_t ch = attr_int(rc, "channels");
        if (!dim_compat(ch, out_c))
            return rel_error_arg(rc, 1, "channels=%lld but weight gives %s output channels",
                                 (long long)ch, rel_dim_str(rc, out_c));
        out_c = ch;
    }
    int64_t oh, ow;
    if (!conv_extent(rc, "height", h, pad[0] + pad[2], kh, dil[0], strides[0], &oh) ||
        !conv_extent(rc, "width", w, pad[1] + pad[3], kw, dil[1], strides[1], &ow))
        return REL_ERROR;
    if (!qparam(rc, 2, "input_zero_point", RLY_DTYPE_I32, false, 1) ||
        !qparam(rc, 3, "kernel_zero_point", RLY_DTYPE_I32, true, out_c) ||
        !qparam(rc, 4, "input_scale", RLY_DTYPE_F32, false, 1) ||
        !qparam(rc, 5, "kernel_scale", RLY_DTYPE_F32, true, out_c))
        return rc->status;
    int64_t s[4];
    s[layout_pos(ol, 'N')] = n;
    s[layout_pos(ol, 'C')] = out_c;
    s[layout_pos(ol, 'H')] = oh;
    s[layout_pos(ol, 'W')] = ow;
    return rel_out_tensor(rc, out, 4, s);
}

/* ---- dense ----------------------------------------------------------------------------------- */

static RelResult qnn_dense_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(weight, rc, 1);
    static const rly_dtype din[] = {RLY_DTYPE_I8, RLY_DTYPE_U8, RLY_DTYPE_I16, RLY_DTYPE_U16};
    static const rly_dtype win[] = {RLY_DTYPE_I8, RLY_DTYPE_U8};
    static const rly_dtype outs[] = {RLY_DTYPE_I32, RLY_DTYPE_I64};
    NEED_DTYPE(rc, 0, "data", data->dtype, din);
    NEED_DTYPE(rc, 1, "weight", weight->dtype, win);
    int odt = attr_dtype(rc, "out_dtype");
    rly_dtype out = odt < 0 ? RLY_DTYPE_I32 : (rly_dtype)odt;
    NEED_DTYPE(rc, -1, "out_dtype", out, outs);
    if (data->ndim == 0) return rel_error_arg(rc, 0, "data must have rank 1 or more, got a scalar");
    if (weight->ndim != 2)
        return rel_error_arg(rc, 1, "weight must be a 2-D tensor (units, k), got %s",
                             rel_type_str(rc, &weight->base));
    int64_t k = data->shape[data->ndim - 1], units = weight->shape[0];
    if (!dim_compat(k, weight->shape[1]))
        return rel_error(rc, "data %s has %s input features but weight %s expects %s",
                         rel_type_str(rc, &data->base), rel_dim_str(rc, k),
                         rel_type_str(rc, &weight->base), rel_dim_str(rc, weight->shape[1]));
    if (!attr_is_none(rc, "units")) {
        int64_t u = attr_int(rc, "units");
        if (!dim_compat(u, units))
            return rel_error_arg(rc, 1, "units=%lld but weight has %s rows", (long long)u,
                                 rel_dim_str(rc, units));
        units = u;
    }
    if (!qparam(rc, 2, "input_zero_point", RLY_DTYPE_I32, false, 1) ||
        !qparam(rc, 3, "kernel_zero_point", RLY_DTYPE_I32, true, units) ||
        !qparam(rc, 4, "input_scale", RLY_DTYPE_F32, false, 1) ||
        !qparam(rc, 5, "kernel_scale", RLY_DTYPE_F32, true, units))
        return rc->status;
    int64_t *s = rel_dims(rc, data->ndim);
    for (uint32_t i = 0; i < data->ndim; i++)
        s[i] = data->shape[i];
    s[data->ndim - 1] = units;
    return rel_out_tensor(rc, out, data->ndim, s);
}

/* ---- add / subtract / mul ----------------------------------------------------------------------
 */

/* The channel count of one operand for its (scale, zero point) pair, as TVM computes it: rank
 * <= 1 uses axis 0; the axis is checked only when a parameter is per-channel. */
static bool binary_side(RelCall *rc, const TensorType *t, const char *axis_name, uint32_t first,
                        const char *side) {
    bool s_scalar, z_scalar;
    if (!is_scalar_arg(rc, first, &s_scalar) || !is_scalar_arg(rc, first + 1, &z_scalar))
        return false;
    int64_t len = DIM_ANY;
    if (t->ndim == 0)
        len = 1;
    else if (t->ndim == 1)
        len = t->shape[0];
    else if (!(s_scalar && z_scalar)) {
        int64_t axis;
        if (!rel_axis(rc, attr_int(rc, axis_name), t->ndim, axis_name, &axis)) return false;
        len = t->shape[axis];
    }
    char scale[32], zp[32];
    snprintf(scale, sizeof scale, "%s_scale", side);
    snprintf(zp, sizeof zp, "%s_zero_point", side);
    return qparam(rc, first, scale, RLY_DTYPE_F32, true, len) &&
           qparam(rc, first + 1, zp, RLY_DTYPE_I32, true, len);
}

static RelResult qnn_binary_rel(RelCall *rc) {
    REL_TENSOR(lhs, rc, 0);
    REL_TENSOR(rhs, rc, 1);
    if (lhs->dtype != rhs->dtype)
        return rel_error_arg(rc, 1, "dtypes differ: lhs is %s, rhs is %s",
                             sup_dtype_name(lhs->dtype), sup_dtype_name(rhs->dtype));
    if (!rel_is_integer(lhs->dtype))
        return rel_error(rc, "needs quantized (integer) tensors, got %s",
                         sup_dtype_name(lhs->dtype));
    if (!binary_side(rc, lhs, "lhs_axis", 2, "lhs") ||
        !binary_side(rc, rhs, "rhs_axis", 4, "rhs") ||
        !qparam(rc, 6, "output_scale", RLY_DTYPE_F32, false, 1) ||
        !qparam(rc, 7, "output_zero_point", RLY_DTYPE_I32, false, 1))
        return rc->status;
    uint32_t n;
    int64_t *shape;
    if (!rel_broadcast(rc, lhs->ndim, lhs->shape, rhs->ndim, rhs->shape, &n, &shape))
        return REL_ERROR;
    return rel_out_tensor(rc, lhs->dtype, n, shape);
}

/* ---- concatenate -------------------------------------------------------------------------------
 */

static bool scalar_tuple(RelCall *rc, uint32_t i, const char *what, uint32_t want_n, rly_dtype dt) {
    uint32_t n;
    TensorType **f = rel_tensor_tuple(rc, i, &n);
    if (f == NULL) return false;
    if (n != want_n) {
        rel_error_arg(rc, (int)i, "%s has %u entries but there are %u inputs", what, n, want_n);
        return false;
    }
    for (uint32_t k = 0; k < n; k++)
        if (f[k]->dtype != dt || f[k]->ndim != 0) {
            rel_error_arg(rc, (int)i, "%s entry %u must be a %s scalar, got %s", what, k,
                          sup_dtype_name(dt), rel_type_str(rc, &f[k]->base));
            return false;
        }
    return true;
}

static RelResult qnn_concatenate_rel(RelCall *rc) {
    uint32_t n;
    TensorType **in = rel_tensor_tuple(rc, 0, &n);
    if (in == NULL) return rc->status;
    if (n == 0) return rel_error_arg(rc, 0, "data must hold at least one tensor");
    if (!scalar_tuple(rc, 1, "input_scales", n, RLY_DTYPE_F32) ||
        !scalar_tuple(rc, 2, "input_zero_points", n, RLY_DTYPE_I32) ||
        !qparam(rc, 3, "output_scale", RLY_DTYPE_F32, false, 1) ||
        !qparam(rc, 4, "output_zero_point", RLY_DTYPE_I32, false, 1))
        return rc->status;
    const TensorType *t0 = in[0];
    if (t0->ndim == 0) return rel_error_arg(rc, 0, "cannot concatenate scalars");
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), t0->ndim, "axis", &axis)) return REL_ERROR;
    int64_t *s = rel_dims(rc, t0->ndim);
    for (uint32_t d = 0; d < t0->ndim; d++)
        s[d] = t0->shape[d];
    for (uint32_t k = 1; k < n; k++) {
        const TensorType *t = in[k];
        if (t->dtype != t0->dtype)
            return rel_error_arg(rc, 0, "input %u has dtype %s but input 0 has %s", k,
                                 sup_dtype_name(t->dtype), sup_dtype_name(t0->dtype));
        if (t->ndim != t0->ndim)
            return rel_error_arg(rc, 0, "input %u has rank %u but input 0 has rank %u", k, t->ndim,
                                 t0->ndim);
        for (uint32_t d = 0; d < t0->ndim; d++) {
            if ((int64_t)d == axis) {
                int64_t a = s[d], b = t->shape[d];
                if (dim_known(a) && dim_known(b)) {
                    if (__builtin_add_overflow(a, b, &s[d]))
                        return rel_error(rc, "the concatenated axis overflows");
                } else {
                    s[d] = dim_add(a, b);
                }
            } else if (!dim_compat(s[d], t->shape[d])) {
                return rel_error_arg(rc, 0,
                                     "input %u has %s on dimension %u but input 0 has %s "
                                     "(only axis %lld may differ)",
                                     k, rel_dim_str(rc, t->shape[d]), d, rel_dim_str(rc, s[d]),
                                     (long long)axis);
            } else {
                s[d] = dim_merge(s[d], t->shape[d]);
            }
        }
    }
    return rel_out_tensor(rc, t0->dtype, t0->ndim, s);
}

/* ---- schemas ----------------------------------------------------------------------------------
 */

static const AttrSpec quantize_attrs[] = {
    {"out_dtype", AT_DTYPE, "\"int8\"", NULL},
    {"axis", AT_INT, "-1", NULL},
    {0},
};
static const AttrSpec dequantize_attrs[] = {
    {"out_dtype", AT_DTYPE, "\"float32\"", NULL},
    {"axis", AT_INT, "-1", NULL},
    {0},
};
static const AttrSpec requantize_attrs[] = {
    {"axis", AT_INT, "-1", NULL},
    {"rounding", AT_STR, "\"None\"", "None|UPWARD|TONEAREST"},
    {"compute_dtype", AT_STR, "\"None\"", "None|int64|float32|float64"},
    {"out_dtype", AT_DTYPE, "\"\"", NULL},
    {0},
};
static const AttrSpec conv2d_attrs[] = {
    {"strides", AT_INTS, "[1, 1]", NULL},
    {"padding", AT_INTS, "[0, 0]", NULL},
    {"dilation", AT_INTS, "[1, 1]", NULL},
    {"groups", AT_INT, "1", NULL},
    {"channels", AT_OPT_INT, "None", NULL},
    {"kernel_size", AT_OPT_INTS, "None", NULL},
    {"data_layout", AT_STR, "\"NCHW\"", "NCHW|NHWC"},
    {"kernel_layout", AT_STR, "\"OIHW\"", "OIHW|HWIO|HWOI|OHWI"},
    {"out_layout", AT_STR, "\"\"", "|NCHW|NHWC"},
    {"out_dtype", AT_DTYPE, "\"\"", NULL},
    {0},
};
static const AttrSpec dense_attrs[] = {
    {"units", AT_OPT_INT, "None", NULL},
    {"out_dtype", AT_DTYPE, "\"\"", NULL},
    {0},
};
static const AttrSpec binary_attrs[] = {
    {"lhs_axis", AT_INT, "-1", NULL},
    {"rhs_axis", AT_INT, "-1", NULL},
    {0},
};
static const AttrSpec concat_attrs[] = {{"axis", AT_INT, "0", NULL}, {0}};

#define BINARY_ARGS                                                                                \
    "lhs, rhs, lhs_scale, lhs_zero_point, rhs_scale, rhs_zero_point, output_scale, "               \
    "output_zero_point"

OpDef ops_qnn_table[] = {
    OP_ROW(QNN_QUANTIZE, 3, OP_ELEMWISE, quantize_rel, quantize_attrs,
           "data, output_scale, output_zero_point",
           "clip(round(data / scale) + zero_point) cast to out_dtype"),
    OP_ROW(QNN_DEQUANTIZE, 3, OP_ELEMWISE, dequantize_rel, dequantize_attrs,
           "data, input_scale, input_zero_point", "(data - zero_point) * scale as out_dtype"),
    OP_ROW(QNN_REQUANTIZE, 5, OP_ELEMWISE, requantize_rel, requantize_attrs,
           "data, input_scale, input_zero_point, output_scale, output_zero_point",
           "re-express a quantized tensor with a new scale and zero point"),
    OP_ROW(QNN_CONV2D, 6, OP_OUT_EWISE_FUSABLE, qnn_conv2d_rel, conv2d_attrs,
           "data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale",
           "quantized 2-D convolution accumulating in out_dtype (int32 by default)"),
    OP_ROW(QNN_DENSE, 6, OP_OUT_EWISE_FUSABLE, qnn_dense_rel, dense_attrs,
           "data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale",
           "quantized dense accumulating in out_dtype (int32 by default)"),
    OP_ROW(QNN_ADD, 8, OP_BROADCAST, qnn_binary_rel, binary_attrs, BINARY_ARGS,
           "quantized lhs + rhs with broadcasting, in the output scale and zero point"),
    OP_ROW(QNN_SUBTRACT, 8, OP_OPAQUE, qnn_binary_rel, binary_attrs, BINARY_ARGS,
           "quantized lhs - rhs with broadcasting, in the output scale and zero point"),
    OP_ROW(QNN_MUL, 8, OP_OPAQUE, qnn_binary_rel, binary_attrs, BINARY_ARGS,
           "quantized lhs * rhs with broadcasting, in the output scale and zero point"),
    OP_ROW(QNN_CONCATENATE, 5, OP_INJECTIVE, qnn_concatenate_rel, concat_attrs,
           "data, input_scales, input_zero_points, output_scale, output_zero_point",
           "concatenate quantized tensors along axis, requantized to the output parameters"),
    {0},
};
