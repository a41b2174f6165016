/* op_dyn.c - TVM's dynamic-shape operators (relay/op/dyn): each takes as a tensor argument what
 * its static twin takes as an attribute (reshape's newshape, tile's reps, strided_slice's begin,
 * end and strides, pad's pad_width, ...), so that a shape computed at run time (the ONNX
 * importer's Reshape, Expand, Slice, Tile, Pad, Resize inputs) can drive it.
 *
 * The relations cannot see tensor values, so every dimension that depends on them is `?`. The
 * result rank must still be known: where it comes from the length of a shape-like argument
 * (reshape, broadcast_to, tile, full, zeros, ones, squeeze), that argument's type must give its
 * length as a constant. Dimensions that do not depend on the values keep their size (the axes
 * strided_slice leaves alone, the data dims broadcast_to must keep, ...). The reference kernels
 * (src/kernels/ref/dyn.c) read the values, check them, and call the static twin's kernel. */
#include "ops/ops.h"

#define MAX_RANK 1024 /* the largest rank a relation here creates (as op_transform.c) */

/* ---- argument checks ---------------------------------------------------------------------- */

/* Argument i (called `what`) is a 1-D integer tensor; its length (a constant, `?` or symbolic)
 * is written to *len. */
static bool int_vector(RelCall *rc, uint32_t i, const TensorType *t, const char *what,
                       int64_t *len) {
    if (t->ndim != 1 || !rel_is_integer(t->dtype)) {
        rel_error_arg(rc, (int)i, "%s must be a 1-D integer tensor, got %s", what,
                      rel_type_str(rc, (Type *)&t->base));
        return false;
    }
    *len = t->shape[0];
    return true;
}

/* As int_vector, and the length must be a constant: it fixes the result rank. */
static bool rank_vector(RelCall *rc, uint32_t i, const TensorType *t, const char *what,
                        int64_t *len) {
    if (!int_vector(rc, i, t, what, len)) return false;
    if (!dim_known(*len)) {
        rel_error_arg(rc, (int)i,
                      "the result rank is unknown: %s has type %s; its length must be a "
                      "constant",
                      what, rel_type_str(rc, (Type *)&t->base));
        return false;
    }
    if (*len > MAX_RANK) {
        rel_error_arg(rc, (int)i, "%s has %lld entries (the limit is %d)", what, (long long)*len,
                      MAX_RANK);
        return false;
    }
    return true;
}

/* Argument i (called `what`) holds one value: rank 0, or every dim 1 where known. */
static bool one_value(RelCall *rc, uint32_t i, const TensorType *t, const char *what) {
    for (uint32_t d = 0; d < t->ndim; d++)
        if (dim_known(t->shape[d]) && t->shape[d] != 1) {
            rel_error_arg(rc, (int)i, "%s must be a scalar, got shape %s", what,
                          rel_shape_str(rc, t->ndim, t->shape));
            return false;
        }
    return true;
}

/* Argument i (called `what`) is a 0-d tensor. */
static bool scalar(RelCall *rc, uint32_t i, const TensorType *t, const char *what) {
    if (t->ndim == 0) return true;
    rel_error_arg(rc, (int)i, "%s must be a scalar (0-d tensor), got shape %s", what,
                  rel_shape_str(rc, t->ndim, t->shape));
    return false;
}

/* Argument i (called `what`) is an integer scalar. */
static bool int_scalar(RelCall *rc, uint32_t i, const TensorType *t, const char *what) {
    if (!scalar(rc, i, t, what)) return false;
    if (rel_is_integer(t->dtype)) return true;
    rel_error_arg(rc, (int)i, "%s must be an integer scalar, got %s", what,
                  sup_dtype_name(t->dtype));
    return false;
}

/* n dims of `?`. */
static int64_t *any_dims(RelCall *rc, uint32_t n) {
    int64_t *s = rel_dims(rc, n);
    for (uint32_t i = 0; i < n; i++)
        s[i] = DIM_ANY;
    return s;
}

/* The layout attribute "layout" for a 2-D image operator: exactly the axes N, C, H, W (N and C
 * may be split), H and W unsplit, and data of its rank. Writes the positions of H and W. */
static bool image_layout(RelCall *rc, const TensorType *data, int *h, int *w) {
    Layout l;
    const char *s = attr_str(rc, "layout");
    if (!rel_layout_parse(rc, "layout", s, &l)) return false;
    bool ok = true;
    for (uint32_t i = 0; i < l.n; i++)
        if (l.axis[i] < 'a' && strchr("NCHW", l.axis[i]) == NULL) ok = false;
    for (const char *r = "NCHW"; *r; r++)
        if (layout_find(&l, *r) < 0) ok = false;
    if (!ok) {
        rel_error(rc,
                  "layout \"%s\" is not convertible to NCHW (it must have exactly the axes N, "
                  "C, H, W)",
                  s);
        return false;
    }
    if (layout_find(&l, 'h') >= 0 || layout_find(&l, 'w') >= 0) {
        rel_error(rc, "layout \"%s\" splits axis H or W, which this operator resizes", s);
        return false;
    }
    if (!rel_layout_fits(rc, 0, data, &l, "data")) return false;
    *h = layout_find(&l, 'H');
    *w = layout_find(&l, 'W');
    return true;
}

/* ---- dyn.reshape, dyn.broadcast_to, dyn.tile ---------------------------------------------- */

/* The element count of data when every dim is a constant (op_relate has checked the shape
 * limit, so it is exact); else -1. */
static int64_t static_volume(const TensorType *t) { return sup_shape_numel(t->ndim, t->shape); }

static RelResult dyn_reshape_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(ns, rc, 1);
    int64_t len;
    if (!rank_vector(rc, 1, ns, "newshape", &len)) return REL_ERROR;
    int64_t *out = any_dims(rc, (uint32_t)len), vol = static_volume(data);
    if (len == 0 && vol >= 0 && vol != 1)
        return rel_error(rc, "cannot reshape %s (%lld elements) into a scalar",
                         rel_shape_str(rc, data->ndim, data->shape), (long long)vol);
    /* one result dim holds every element */
    if (len == 1) out[0] = vol >= 0 ? vol : data->ndim == 1 ? data->shape[0] : DIM_ANY;
    return rel_out_tensor(rc, data->dtype, (uint32_t)len, out);
}

static RelResult dyn_broadcast_to_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(shape, rc, 1);
    int64_t len;
    if (!rank_vector(rc, 1, shape, "shape", &len)) return REL_ERROR;
    uint32_t n = (uint32_t)len;
    if (n < data->ndim)
        return rel_error(rc,
                         "cannot broadcast %s to a shape of %u entries: the target has lower rank",
                         rel_shape_str(rc, data->ndim, data->shape), n);
    /* a data dim of known size other than 1 can only broadcast to itself */
    int64_t *out = any_dims(rc, n);
    for (uint32_t i = 0; i < data->ndim; i++) {
        int64_t d = data->shape[i];
        if (dim_known(d) && d != 1) out[n - data->ndim + i] = d;
    }
    return rel_out_tensor(rc, data->dtype, n, out);
}

static RelResult dyn_tile_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(reps, rc, 1);
    int64_t len;
    if (!rank_vector(rc, 1, reps, "reps", &len)) return REL_ERROR;
    uint32_t r = (uint32_t)len, n = data->ndim, t = n > r ? n : r;
    if (t > MAX_RANK) return rel_error(rc, "the result would have rank %u", t);
    /* reps is padded with leading 1s to the rank of data: those dims are unchanged */
    int64_t *out = any_dims(rc, t);
    for (uint32_t i = 0; i + r < t; i++)
        out[i] = data->shape[i];
    return rel_out_tensor(rc, data->dtype, t, out);
}

/* ---- dyn.strided_slice ---------------------------------------------------------------------- */

static RelResult dyn_strided_slice_rel(RelCall *rc) {
    static const char *const names[] = {"begin", "end", "strides"};
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(tb, rc, 1);
    REL_TENSOR(te, rc, 2);
    REL_TENSOR(ts, rc, 3);
    const TensorType *t[3] = {tb, te, ts};
    int64_t len[3];
    uint32_t n = data->ndim;
    for (uint32_t i = 0; i < 3; i++)
        if (!int_vector(rc, i + 1, t[i], names[i], &len[i])) return REL_ERROR;
    int64_t *out = rel_dims(rc, n);
    memcpy(out, data->shape, n * sizeof(int64_t));
    if (!attr_is_none(rc, "axes")) {
        const int64_t *given;
        uint32_t nax = attr_ints(rc, "axes", &given);
        for (uint32_t i = 0; i < 3; i++)
            if (dim_known(len[i]) && (i < 2 ? len[i] != nax : len[i] > nax))
                return rel_error_arg(rc, (int)i + 1,
                                     "axes has %u entries, so begin and end need %u each (and "
                                     "strides at most %u); %s has %lld",
                                     nax, nax, nax, names[i], (long long)len[i]);
        int64_t *seen = rel_dims(rc, n);
        memset(seen, 0, (n ? n : 1) * sizeof(int64_t));
        for (uint32_t i = 0; i < nax; i++) {
            int64_t a;
            if (!rel_axis(rc, given[i], n, "axis", &a)) return REL_ERROR;
            if (seen[a]) return rel_error(rc, "axes names axis %lld twice", (long long)a);
            seen[a] = 1;
            out[a] = DIM_ANY;
        }
        return rel_out_tensor(rc, data->dtype, n, out);
    }
    /* begin, end and strides apply to the leading axes; the axes past all three keep their size */
    int64_t most = 0;
    for (uint32_t i = 0; i < 3; i++) {
        if (dim_known(len[i]) && len[i] > n)
            return rel_error_arg(rc, (int)i + 1, "%s has %lld entries but data has rank %u",
                                 names[i], (long long)len[i], n);
        most = !dim_known(len[i]) ? n : len[i] > most ? len[i] : most;
    }
    for (uint32_t i = 0; i < most; i++)
        out[i] = DIM_ANY;
    return rel_out_tensor(rc, data->dtype, n, out);
}

/* ---- dyn.full, dyn.zeros, dyn.ones, dyn.one_hot ------------------------------------------- */

static RelResult dyn_full_rel(RelCall *rc) {
    REL_TENSOR(fill, rc, 0);
    REL_TENSOR(shape, rc, 1);
    int64_t len;
    if (!scalar(rc, 0, fill, "fill_value") || !rank_vector(rc, 1, shape, "shape", &len))
        return REL_ERROR;
    int dt = attr_dtype(rc, "dtype");
    return rel_out_tensor(rc, dt < 0 ? fill->dtype : (rly_dtype)dt, (uint32_t)len,
                          any_dims(rc, (uint32_t)len));
}

static RelResult dyn_init_rel(RelCall *rc) {
    REL_TENSOR(shape, rc, 0);
    int64_t len;
    if (!rank_vector(rc, 0, shape, "shape", &len)) return REL_ERROR;
    int dt = attr_dtype(rc, "dtype");
    if (dt < 0) return rel_error(rc, "attribute dtype must name the element type");
    return rel_out_tensor(rc, (rly_dtype)dt, (uint32_t)len, any_dims(rc, (uint32_t)len));
}

static RelResult dyn_one_hot_rel(RelCall *rc) {
    REL_TENSOR(ind, rc, 0);
    REL_TENSOR(on, rc, 1);
    REL_TENSOR(off, rc, 2);
    REL_TENSOR(depth, rc, 3);
    if (!scalar(rc, 1, on, "on_value") || !scalar(rc, 2, off, "off_value") ||
        !int_scalar(rc, 3, depth, "depth"))
        return REL_ERROR;
    if (on->dtype != off->dtype)
        return rel_error_arg(rc, 2, "on_value has dtype %s but off_value has %s",
                             sup_dtype_name(on->dtype), sup_dtype_name(off->dtype));
    if (ind->ndim >= MAX_RANK) return rel_error(rc, "indices has rank %u", ind->ndim);
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), ind->ndim + 1, "axis", &axis)) return REL_ERROR;
    int64_t *out = rel_dims(rc, ind->ndim + 1);
    for (uint32_t i = 0, j = 0; i <= ind->ndim; i++)
        out[i] = i == axis ? DIM_ANY : ind->shape[j++];
    int dt = attr_dtype(rc, "dtype");
    return rel_out_tensor(rc, dt < 0 ? on->dtype : (rly_dtype)dt, ind->ndim + 1, out);
}

/* ---- dyn.topk ------------------------------------------------------------------------------- */

static RelResult dyn_topk_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(k, rc, 1);
    if (!int_scalar(rc, 1, k, "k")) return REL_ERROR;
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    int dt = attr_dtype(rc, "dtype");
    if (dt < 0) dt = RLY_DTYPE_I32;
    if (dt == RLY_DTYPE_BOOL)
        return rel_error(rc, "dtype of the indices must be a number type, got bool");
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    shape[axis] = DIM_ANY;
    Type *values = ir_type_tensor(rc->ctx, data->dtype, data->ndim, shape);
    Type *indices = ir_type_tensor(rc->ctx, (rly_dtype)dt, data->ndim, shape);
    const char *ret = attr_str(rc, "ret_type");
    if (strcmp(ret, "values") == 0) return rel_out(rc, values);
    if (strcmp(ret, "indices") == 0) return rel_out(rc, indices);
    Type *both[2] = {values, indices};
    return rel_out(rc, ir_type_tuple(rc->ctx, 2, both));
}

/* ---- dyn.nn.pad ----------------------------------------------------------------------------- */

static RelResult dyn_pad_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(pw, rc, 1);
    REL_TENSOR(value, rc, 2);
    uint32_t n = data->ndim;
    if (pw->ndim != 2 || !rel_is_integer(pw->dtype))
        return rel_error_arg(rc, 1, "pad_width must be a 2-D integer tensor (rank, 2), got %s",
                             rel_type_str(rc, &pw->base));
    if (!dim_compat(pw->shape[0], n) || !dim_compat(pw->shape[1], 2))
        return rel_error_arg(rc, 1,
                             "pad_width has shape %s but data has rank %u: it needs one [before, "
                             "after] row per axis, shape (%u, 2)",
                             rel_shape_str(rc, pw->ndim, pw->shape), n, n);
    if (!one_value(rc, 2, value, "pad_value")) return REL_ERROR;
    return rel_out_tensor(rc, data->dtype, n, any_dims(rc, n));
}

/* ---- dyn.squeeze, dyn.expand_dims ------------------------------------------------------------ */

static RelResult dyn_squeeze_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(axis, rc, 1);
    int64_t len;
    if (!rank_vector(rc, 1, axis, "axis", &len)) return REL_ERROR;
    uint32_t n = data->ndim, k = (uint32_t)len;
    if (k > n) return rel_error_arg(rc, 1, "axis has %u entries but data has rank %u", k, n);
    int64_t *out = any_dims(rc, n - k);
    /* with every dim known, the squeezed axes are exactly the size-1 ones when there are k */
    uint32_t ones = 0, known = 0;
    for (uint32_t i = 0; i < n; i++) {
        known += dim_known(data->shape[i]);
        ones += data->shape[i] == 1;
    }
    if (known == n && ones < k)
        return rel_error(rc, "cannot squeeze %u axes of %s: only %u have size 1", k,
                         rel_shape_str(rc, n, data->shape), ones);
    if (known == n && ones == k)
        for (uint32_t i = 0, o = 0; i < n; i++)
            if (data->shape[i] != 1) out[o++] = data->shape[i];
    return rel_out_tensor(rc, data->dtype, n - k, out);
}

static RelResult dyn_expand_dims_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(axis, rc, 1);
    if (!int_scalar(rc, 1, axis, "axis")) return REL_ERROR;
    int64_t n = data->ndim, k = attr_int(rc, "num_newaxis");
    if (k < 0) return rel_error(rc, "num_newaxis must be >= 0, got %lld", (long long)k);
    if (k > MAX_RANK - n)
        return rel_error(rc, "num_newaxis %lld on a tensor of rank %lld exceeds the rank limit %d",
                         (long long)k, (long long)n, MAX_RANK);
    if (k == 0) return rel_out(rc, &data->base);
    return rel_out_tensor(rc, data->dtype, (uint32_t)(n + k), any_dims(rc, (uint32_t)(n + k)));
}

/* ---- dyn.image.resize2d, dyn.nn.upsampling --------------------------------------------------- */

static RelResult dyn_resize2d_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(size, rc, 1);
    int64_t len;
    if (!int_vector(rc, 1, size, "size", &len)) return REL_ERROR;
    if (!dim_compat(len, 2))
        return rel_error_arg(rc, 1, "size must have 2 values (height, width), got %s",
                             rel_dim_str(rc, len));
    const double *roi;
    uint32_t n_roi = attr_floats(rc, "roi", &roi);
    if (n_roi != 4)
        return rel_error(rc, "roi must have 4 values (start and end of each resized axis), got %u",
                         n_roi);
    int h, w;
    if (!image_layout(rc, data, &h, &w)) return REL_ERROR;
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    shape[h] = shape[w] = DIM_ANY;
    return rel_out_tensor(rc, attr_dtype_or(rc, "out_dtype", data->dtype), data->ndim, shape);
}

static RelResult dyn_upsampling_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(sh, rc, 1);
    REL_TENSOR(sw, rc, 2);
    const TensorType *s[2] = {sh, sw};
    static const char *const names[] = {"scale_h", "scale_w"};
    for (uint32_t i = 0; i < 2; i++) {
        if (!one_value(rc, i + 1, s[i], names[i])) return REL_ERROR;
        if (!rel_is_float(s[i]->dtype) && !rel_is_integer(s[i]->dtype))
            return rel_error_arg(rc, (int)i + 1, "%s must be a number, got %s", names[i],
                                 sup_dtype_name(s[i]->dtype));
    }
    int h, w;
    if (!image_layout(rc, data, &h, &w)) return REL_ERROR;
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    shape[h] = shape[w] = DIM_ANY;
    return rel_out_tensor(rc, data->dtype, data->ndim, shape);
}

/* ---- the table ------------------------------------------------------------------------------- */

static const AttrSpec reshape_attrs[] = {{"allowzero", AT_BOOL, "False", NULL}, {0}};
static const AttrSpec dtype_attrs[] = {{"dtype", AT_DTYPE, "\"\"", NULL}, {0}};
static const AttrSpec strided_slice_attrs[] = {
    {"slice_mode", AT_STR, "\"end\"", "end|size"}, {"axes", AT_OPT_INTS, "None", NULL}, {0}};
static const AttrSpec one_hot_attrs[] = {
    {"axis", AT_INT, "-1", NULL}, {"dtype", AT_DTYPE, "\"\"", NULL}, {0}};
static const AttrSpec topk_attrs[] = {
    {"axis", AT_INT, "-1", NULL},
    {"ret_type", AT_STR, "\"both\"", "both|values|indices"},
    {"is_ascend", AT_BOOL, "False", NULL},
    {"dtype", AT_DTYPE, "\"int32\"", NULL},
    {0},
};
static const AttrSpec pad_attrs[] = {{"pad_mode", AT_STR, "\"constant\"", "constant|edge|reflect"},
                                     {0}};
static const AttrSpec expand_dims_attrs[] = {{"num_newaxis", AT_INT, "1", NULL}, {0}};
/* image.resize2d's attributes less size (an argument here); roi stays an attribute */
static const AttrSpec resize2d_attrs[] = {
    {"roi", AT_FLOATS, "[0.0, 0.0, 0.0, 0.0]", NULL},
    {"layout", AT_STR, "\"NCHW\"", NULL},
    {"method", AT_STR, "\"linear\"", "nearest_neighbor|linear|cubic"},
    {"coordinate_transformation_mode", AT_STR, "\"half_pixel\"",
     "half_pixel|align_corners|asymmetric|pytorch_half_pixel|tf_half_pixel_for_nn|"
     "tf_crop_and_resize"},
    {"rounding_method", AT_STR, "\"round\"",
     "|round|floor|ceil|round_prefer_floor|round_prefer_ceil"},
    {"cubic_alpha", AT_FLOAT, "-0.5", NULL},
    {"cubic_exclude", AT_INT, "0", NULL},
    {"extrapolation_value", AT_FLOAT, "0.0", NULL},
    {"out_dtype", AT_DTYPE, "\"\"", NULL},
    {0},
};
static const AttrSpec upsampling_attrs[] = {
    {"layout", AT_STR, "\"NCHW\"", NULL},
    {"method", AT_STR, "\"nearest_neighbor\"", "nearest_neighbor|bilinear|bicubic"},
    {"align_corners", AT_BOOL, "False", NULL},
    {0},
};

OpDef ops_dyn_table[] = {
    OP_ROW(
        DYN_RESHAPE, 2, OP_INJECTIVE, dyn_reshape_rel, reshape_attrs, "data, newshape",
        "reshape to the 1-D tensor newshape; 0 copies the input dim (unless allowzero), -1 infers"),
    OP_ROW(DYN_BROADCAST_TO, 2, OP_BROADCAST, dyn_broadcast_to_rel, dtype_attrs, "data, shape",
           "broadcast data to the shape held by the 1-D tensor shape"),
    OP_ROW(DYN_STRIDED_SLICE, 4, OP_INJECTIVE, dyn_strided_slice_rel, strided_slice_attrs,
           "data, begin, end, strides",
           "strided_slice with begin, end and strides given as 1-D tensors"),
    OP_ROW(DYN_TILE, 2, OP_INJECTIVE, dyn_tile_rel, NULL, "data, reps",
           "repeat the whole tensor the times held by the 1-D tensor reps"),
    OP_ROW(DYN_FULL, 2, OP_ELEMWISE, dyn_full_rel, dtype_attrs, "fill_value, shape",
           "a tensor of the shape held by the 1-D tensor shape, filled with the scalar fill_value"),
    OP_ROW(DYN_ZEROS, 1, OP_ELEMWISE, dyn_init_rel, dtype_attrs, "shape",
           "a tensor of zeros of the shape held by the 1-D tensor shape"),
    OP_ROW(DYN_ONES, 1, OP_ELEMWISE, dyn_init_rel, dtype_attrs, "shape",
           "a tensor of ones of the shape held by the 1-D tensor shape"),
    OP_ROW(DYN_ONE_HOT, 4, OP_OUT_EWISE_FUSABLE, dyn_one_hot_rel, one_hot_attrs,
           "indices, on_value, off_value, depth",
           "one-hot encoding with a new axis of the size held by the scalar depth"),
    OP_ROW(DYN_TOPK, 2, OP_OPAQUE, dyn_topk_rel, topk_attrs, "data, k",
           "topk with k given as a scalar tensor"),
    OP_ROW(DYN_NN_PAD, 3, OP_INJECTIVE, dyn_pad_rel, pad_attrs, "data, pad_width, pad_value",
           "nn.pad with pad_width given as a (rank, 2) integer tensor"),
    OP_ROW(DYN_SQUEEZE, 2, OP_INJECTIVE, dyn_squeeze_rel, NULL, "data, axis",
           "drop the size-1 axes held by the 1-D tensor axis"),
    OP_ROW(DYN_EXPAND_DIMS, 2, OP_INJECTIVE, dyn_expand_dims_rel, expand_dims_attrs, "data, axis",
           "insert num_newaxis size-1 axes at the axis held by the scalar axis"),
    OP_ROW(DYN_IMAGE_RESIZE2D, 2, OP_INJECTIVE, dyn_resize2d_rel, resize2d_attrs, "data, size",
           "image.resize2d with the output (height, width) given as a 1-D tensor"),
    OP_ROW(DYN_NN_UPSAMPLING, 3, OP_INJECTIVE, dyn_upsampling_rel, upsampling_attrs,
           "data, scale_h, scale_w", "nn.upsampling with the scales given as scalar tensors"),
    {0},
};
