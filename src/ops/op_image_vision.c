/* op_image_vision.c - image operators (resize1d/2d/3d, crop_and_resize, affine_grid, grid_sample,
 * dilation2d) and vision operators (ROI align/pool, box counting and non-maximum suppression,
 * multibox priors and decoding, RPN proposals, YOLO reorg), with TVM's names, attributes and
 * defaults.
 *
 * Image operators take a data layout string as TVM does ("NCHW", "NHWC", "NCHW16c", ...): a layout
 * names each primal axis (upper case) once and may split one into an outer axis and an inner
 * sub-axis ("16c" is an inner block of 16 channels). An operator accepts any layout made of the
 * primal axes of its reference layout (TVM's BijectiveLayout to NCHW, NCDHW, ...); the axes it
 * rewrites (the resized ones) may not be split. */
#include "ops/ops.h"

/* ---- checked arithmetic and small helpers ------------------------------------------------ */

/* Largest dimension a relation computes: products past this are reported, not wrapped. */

/* a * b for dims; `?` when unknown. False (with a message) when a known product overflows. */
/* The attribute `name` as a list of exactly `n` positive integers (`what` names the items). */
static bool pos_ints(RelCall *rc, const char *name, uint32_t n, const char *what,
                     const int64_t **out) {
    uint32_t got = attr_ints(rc, name, out);
    if (got != n) {
        rel_error(rc, "%s must have %u value%s (%s), got %u", name, n, n == 1 ? "" : "s", what,
                  got);
        return false;
    }
    for (uint32_t i = 0; i < n; i++)
        if ((*out)[i] <= 0 || (*out)[i] > DIM_LIMIT) {
            rel_error(rc, "%s values must be positive, got %lld", name, (long long)(*out)[i]);
            return false;
        }
    return true;
}

static bool want_rank(RelCall *rc, int arg, const TensorType *t, uint32_t rank, const char *what) {
    if (t->ndim == rank) return true;
    rel_error_arg(rc, arg, "%s must be %u-D, got shape %s", what, rank,
                  rel_shape_str(rc, t->ndim, t->shape));
    return false;
}

/* Dim `d` of tensor argument `arg` must be able to equal `want`. */
static bool want_dim(RelCall *rc, int arg, const TensorType *t, uint32_t d, int64_t want,
                     const char *what) {
    if (dim_compat(t->shape[d], want)) return true;
    rel_error_arg(rc, arg, "%s has shape %s but dimension %u must be %s", what,
                  rel_shape_str(rc, t->ndim, t->shape), d, rel_dim_str(rc, want));
    return false;
}

/* Two dims that name the same extent in different arguments. */
static bool same_dim(RelCall *rc, int64_t a, int64_t b, const char *what_a, const char *what_b) {
    if (dim_compat(a, b)) return true;
    rel_error(rc, "%s is %s but %s is %s", what_a, rel_dim_str(rc, a), what_b, rel_dim_str(rc, b));
    return false;
}

/* A tensor argument that must hold a single value (rank 0, or every dim 1). */
static bool want_scalar(RelCall *rc, uint32_t i, const char *what) {
    TensorType *t = rel_tensor(rc, i);
    if (t == NULL) return false;
    for (uint32_t d = 0; d < t->ndim; d++)
        if (dim_known(t->shape[d]) && t->shape[d] != 1) {
            rel_error_arg(rc, (int)i, "%s must be a scalar, got shape %s", what,
                          rel_shape_str(rc, t->ndim, t->shape));
            return false;
        }
    return true;
}

/* ---- layouts ------------------------------------------------------------------------------- */

/* Parse the layout attribute `attr` and check it has exactly the primal axes of `ref` ("NCHW").
 * `fixed` lists the primal axes that may not be split (the ones the operator rewrites). */
/* The layout attribute `attr`: a layout with the axes of `ref` (each once, blocks allowed) that
 * does not split any axis of `fixed` (the axes the operator rewrites). */
static bool layout_of(RelCall *rc, const char *attr, const char *ref, const char *fixed,
                      Layout *l) {
    const char *s = attr_str(rc, attr);
    if (!rel_layout_parse(rc, attr, s, l)) return false;
    bool ok = true;
    for (uint32_t i = 0; i < l->n; i++) {
        char a = l->axis[i];
        if (strchr(ref, a >= 'a' ? a - 'a' + 'A' : a) == NULL) ok = false;
    }
    for (const char *r = ref; *r; r++)
        if (layout_find(l, *r) < 0) ok = false;
    if (!ok) {
        rel_error(rc, "%s \"%s\" is not convertible to %s (it must name each of its axes once)",
                  attr, s, ref);
        return false;
    }
    for (const char *f = fixed; *f; f++)
        if (layout_find(l, (char)(*f - 'A' + 'a')) >= 0) {
            rel_error(rc, "%s \"%s\" splits axis %c, which this operator rewrites", attr, s, *f);
            return false;
        }
    return true;
}

/* The tensor's rank must match the layout, and sub-axes their block sizes. */
/* ---- image.resize1d / resize2d / resize3d ---------------------------------------------------- */

static RelResult resize_rel(RelCall *rc, const char *ref, const char *spatial, const char *what) {
    REL_TENSOR(data, rc, 0);
    uint32_t n_sp = (uint32_t)strlen(spatial);
    const int64_t *size;
    if (!pos_ints(rc, "size", n_sp, what, &size)) return REL_ERROR;
    const double *roi;
    uint32_t n_roi = attr_floats(rc, "roi", &roi);
    if (n_roi != 2 * n_sp)
        return rel_error(rc, "roi must have %u values (start and end of each resized axis), got %u",
                         2 * n_sp, n_roi);
    Layout l;
    if (!layout_of(rc, "layout", ref, spatial, &l)) return REL_ERROR;
    if (!rel_layout_fits(rc, 0, data, &l, "data")) return REL_ERROR;
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    for (uint32_t i = 0; i < n_sp; i++)
        shape[layout_find(&l, spatial[i])] = size[i];
    return rel_out_tensor(rc, attr_dtype_or(rc, "out_dtype", data->dtype), data->ndim, shape);
}

static RelResult resize1d_rel(RelCall *rc) { return resize_rel(rc, "NCW", "W", "width"); }
static RelResult resize2d_rel(RelCall *rc) { return resize_rel(rc, "NCHW", "HW", "height, width"); }
static RelResult resize3d_rel(RelCall *rc) {
    return resize_rel(rc, "NCDHW", "DHW", "depth, height, width");
}

#define RESIZE_ATTRS(layout, roi)                                                                  \
    {"size", AT_INTS, NULL, NULL}, {"roi", AT_FLOATS, roi, NULL},                                  \
        {"layout", AT_STR, layout, NULL},                                                          \
        {"method", AT_STR, "\"linear\"", "nearest_neighbor|linear|cubic"},                         \
        {"coordinate_transformation_mode", AT_STR, "\"half_pixel\"",                               \
         "half_pixel|align_corners|asymmetric|pytorch_half_pixel|tf_half_pixel_for_nn|"            \
         "tf_crop_and_resize"},                                                                    \
        {"rounding_method", AT_STR, "\"round\"",                                                   \
         "|round|floor|ceil|round_prefer_floor|round_prefer_ceil"},                                \
        {"cubic_alpha", AT_FLOAT, "-0.5", NULL}, {"cubic_exclude", AT_INT, "0", NULL},             \
        {"extrapolation_value", AT_FLOAT, "0.0", NULL}, {"out_dtype", AT_DTYPE, "\"\"", NULL}, {   \
        NULL, 0, NULL, NULL                                                                        \
    }

static const AttrSpec resize1d_attrs[] = {RESIZE_ATTRS("\"NCW\"", "[0.0, 0.0]")};
static const AttrSpec resize2d_attrs[] = {RESIZE_ATTRS("\"NCHW\"", "[0.0, 0.0, 0.0, 0.0]")};
static const AttrSpec resize3d_attrs[] = {
    RESIZE_ATTRS("\"NCDHW\"", "[0.0, 0.0, 0.0, 0.0, 0.0, 0.0]")};

/* ---- image.crop_and_resize ------------------------------------------------------------------- */

static RelResult crop_and_resize_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(boxes, rc, 1);
    REL_TENSOR(box_indices, rc, 2);
    const int64_t *crop;
    if (!pos_ints(rc, "crop_size", 2, "height, width", &crop)) return REL_ERROR;
    Layout l;
    if (!layout_of(rc, "layout", "NCHW", "NHW", &l)) return REL_ERROR;
    if (!rel_layout_fits(rc, 0, data, &l, "data")) return REL_ERROR;
    if (!want_rank(rc, 1, boxes, 2, "boxes") || !want_dim(rc, 1, boxes, 1, 4, "boxes") ||
        !want_rank(rc, 2, box_indices, 1, "box_indices"))
        return REL_ERROR;
    if (!rel_is_integer(box_indices->dtype))
        return rel_error_arg(rc, 2, "box_indices must hold integers, got %s",
                             sup_dtype_name(box_indices->dtype));
    if (!same_dim(rc, boxes->shape[0], box_indices->shape[0], "the number of boxes",
                  "the number of box indices"))
        return REL_ERROR;
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    shape[layout_find(&l, 'N')] = dim_merge(boxes->shape[0], box_indices->shape[0]);
    shape[layout_find(&l, 'H')] = crop[0];
    shape[layout_find(&l, 'W')] = crop[1];
    return rel_out_tensor(rc, attr_dtype_or(rc, "out_dtype", data->dtype), data->ndim, shape);
}

static const AttrSpec crop_and_resize_attrs[] = {
    {"crop_size", AT_INTS, NULL, NULL},
    {"layout", AT_STR, "\"NCHW\"", NULL},
    {"method", AT_STR, "\"bilinear\"", "bilinear|nearest_neighbor"},
    {"extrapolation_value", AT_FLOAT, "0.0", NULL},
    {"out_dtype", AT_DTYPE, "\"\"", NULL},
    {NULL, 0, NULL, NULL},
};

/* ---- image.affine_grid ----------------------------------------------------------------------- */

static RelResult affine_grid_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    const int64_t *target;
    if (!pos_ints(rc, "target_shape", 2, "height, width", &target)) return REL_ERROR;
    if (data->ndim != 3 || !dim_compat(data->shape[1], 2) || !dim_compat(data->shape[2], 3))
        return rel_error_arg(rc, 0,
                             "data must be a batch of 2x3 affine matrices (batch, 2, 3), "
                             "got shape %s",
                             rel_shape_str(rc, data->ndim, data->shape));
    if (!rel_is_float(data->dtype))
        return rel_error_arg(rc, 0, "data must be a float tensor, got %s",
                             sup_dtype_name(data->dtype));
    int64_t shape[4] = {data->shape[0], 2, target[0], target[1]};
    return rel_out_tensor(rc, data->dtype, 4, shape);
}

static const AttrSpec affine_grid_attrs[] = {
    {"target_shape", AT_INTS, NULL, NULL},
    {NULL, 0, NULL, NULL},
};

/* ---- image.grid_sample ----------------------------------------------------------------------- */

static RelResult grid_sample_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(grid, rc, 1);
    if (data->ndim != 4 && data->ndim != 5)
        return rel_error_arg(rc, 0, "data must be 4-D (NCHW) or 5-D (NCDHW), got shape %s",
                             rel_shape_str(rc, data->ndim, data->shape));
    bool is3d = data->ndim == 5;
    const char *spatial = is3d ? "DHW" : "HW";
    uint32_t n_sp = is3d ? 3 : 2;
    Layout l;
    if (!layout_of(rc, "layout", is3d ? "NCDHW" : "NCHW", spatial, &l)) return REL_ERROR;
    if (!rel_layout_fits(rc, 0, data, &l, "data")) return REL_ERROR;
    if (is3d && strcmp(attr_str(rc, "method"), "bicubic") == 0)
        return rel_error(rc, "method \"bicubic\" supports only 4-D data, got 5-D");
    if (grid->ndim != data->ndim || !dim_compat(grid->shape[1], n_sp))
        return rel_error_arg(rc, 1, "grid must be %u-D (batch, %u, %s) for %u-D data, got shape %s",
                             data->ndim, n_sp, is3d ? "depth, height, width" : "height, width",
                             data->ndim, rel_shape_str(rc, grid->ndim, grid->shape));
    if (!rel_is_float(grid->dtype))
        return rel_error_arg(rc, 1, "grid must be a float tensor, got %s",
                             sup_dtype_name(grid->dtype));
    int n_axis = layout_find(&l, 'N');
    if (!same_dim(rc, data->shape[n_axis], grid->shape[0], "the data batch", "the grid batch"))
        return REL_ERROR;
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    shape[n_axis] = dim_merge(data->shape[n_axis], grid->shape[0]);
    for (uint32_t i = 0; i < n_sp; i++)
        shape[layout_find(&l, spatial[i])] = grid->shape[2 + i];
    return rel_out_tensor(rc, data->dtype, data->ndim, shape);
}

static const AttrSpec grid_sample_attrs[] = {
    {"method", AT_STR, "\"bilinear\"", "nearest|bilinear|bicubic"},
    {"layout", AT_STR, "\"NCHW\"", NULL},
    {"padding_mode", AT_STR, "\"zeros\"", "zeros|border|reflection"},
    {"align_corners", AT_BOOL, "True", NULL},
    {NULL, 0, NULL, NULL},
};

/* ---- image.dilation2d --------------------------------------------------------------------------
 */

/* Output extent of a strided, dilated window: (in + pad - (1 + (k - 1) * dil)) / stride + 1. */
static bool window_out(RelCall *rc, const char *axis, int64_t in, int64_t pad, int64_t k,
                       int64_t dil, int64_t stride, int64_t *out) {
    *out = DIM_ANY;
    if (dim_known(k) && k == 0) {
        rel_error_arg(rc, 1, "the kernel %s is 0", axis);
        return false;
    }
    if (!dim_known(in) || !dim_known(k)) return true;
    if (k - 1 > (DIM_LIMIT - 1) / dil || in > DIM_LIMIT - pad) {
        rel_error(rc, "the %s window is too large", axis);
        return false;
    }
    int64_t span = 1 + (k - 1) * dil;
    if (in + pad < span) {
        rel_error(rc, "the dilated kernel %s %lld exceeds the padded input %s %lld", axis,
                  (long long)span, axis, (long long)(in + pad));
        return false;
    }
    *out = (in + pad - span) / stride + 1;
    return true;
}

static RelResult dilation2d_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(weight, rc, 1);
    Layout dl, kl;
    if (!layout_of(rc, "data_layout", "NCHW", "NCHW", &dl) ||
        !layout_of(rc, "kernel_layout", "IHW", "IHW", &kl))
        return REL_ERROR;
    if (!rel_layout_fits(rc, 0, data, &dl, "data") ||
        !rel_layout_fits(rc, 1, weight, &kl, "weight"))
        return REL_ERROR;
    const int64_t *strides, *dilations, *padding;
    if (!pos_ints(rc, "strides", 2, "height, width", &strides) ||
        !pos_ints(rc, "dilations", 2, "height, width", &dilations))
        return REL_ERROR;
    uint32_t n_pad = attr_ints(rc, "padding", &padding);
    int64_t pad_h, pad_w;
    for (uint32_t i = 0; i < n_pad; i++)
        if (padding[i] < 0 || padding[i] > DIM_LIMIT / 4)
            return rel_error(rc, "padding values must be non-negative, got %lld",
                             (long long)padding[i]);
    if (n_pad == 1)
        pad_h = pad_w = 2 * padding[0];
    else if (n_pad == 2)
        pad_h = 2 * padding[0], pad_w = 2 * padding[1];
    else if (n_pad == 4)
        pad_h = padding[0] + padding[2], pad_w = padding[1] + padding[3];
    else
        return rel_error(rc,
                         "padding must have 1, 2 or 4 values (all sides; top/bottom, "
                         "left/right; top, left, bottom, right), got %u",
                         n_pad);
    int64_t c = data->shape[layout_find(&dl, 'C')];
    int64_t wc = weight->shape[layout_find(&kl, 'I')];
    if (!dim_compat(c, wc))
        return rel_error_arg(rc, 1, "data has %s channels but weight has %s", rel_dim_str(rc, c),
                             rel_dim_str(rc, wc));
    int64_t oh, ow;
    if (!window_out(rc, "height", data->shape[layout_find(&dl, 'H')], pad_h,
                    weight->shape[layout_find(&kl, 'H')], dilations[0], strides[0], &oh) ||
        !window_out(rc, "width", data->shape[layout_find(&dl, 'W')], pad_w,
                    weight->shape[layout_find(&kl, 'W')], dilations[1], strides[1], &ow))
        return REL_ERROR;
    if (weight->dtype != data->dtype)
        return rel_error_arg(rc, 1, "data is %s but weight is %s", sup_dtype_name(data->dtype),
                             sup_dtype_name(weight->dtype));
    int64_t shape[4];
    shape[layout_find(&dl, 'N')] = data->shape[layout_find(&dl, 'N')];
    shape[layout_find(&dl, 'C')] = dim_merge(c, wc);
    shape[layout_find(&dl, 'H')] = oh;
    shape[layout_find(&dl, 'W')] = ow;
    return rel_out_tensor(rc, attr_dtype_or(rc, "out_dtype", data->dtype), 4, shape);
}

static const AttrSpec dilation2d_attrs[] = {
    {"strides", AT_INTS, "[1, 1]", NULL},
    {"padding", AT_INTS, "[0, 0]", NULL},
    {"dilations", AT_INTS, "[1, 1]", NULL},
    {"data_layout", AT_STR, "\"NCHW\"", NULL},
    {"kernel_layout", AT_STR, "\"IHW\"", NULL},
    {"out_dtype", AT_DTYPE, "\"\"", NULL},
    {NULL, 0, NULL, NULL},
};

/* ---- vision.roi_align / roi_pool ----------------------------------------------------------- */

static RelResult roi_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(rois, rc, 1);
    const int64_t *pooled;
    if (!pos_ints(rc, "pooled_size", 2, "height, width", &pooled)) return REL_ERROR;
    double scale = attr_float(rc, "spatial_scale");
    if (!(scale > 0.0)) return rel_error(rc, "spatial_scale must be positive, got %g", scale);
    bool nhwc = strcmp(attr_str(rc, "layout"), "NHWC") == 0;
    if (!want_rank(rc, 0, data, 4, nhwc ? "data (NHWC)" : "data (NCHW)") ||
        !want_rank(rc, 1, rois, 2, "rois") || !want_dim(rc, 1, rois, 1, 5, "rois"))
        return REL_ERROR;
    if (!rel_is_float(rois->dtype))
        return rel_error_arg(rc, 1, "rois must be a float tensor, got %s",
                             sup_dtype_name(rois->dtype));
    int64_t c = data->shape[nhwc ? 3 : 1];
    int64_t shape[4] = {rois->shape[0], c, pooled[0], pooled[1]};
    if (nhwc) shape[1] = pooled[0], shape[2] = pooled[1], shape[3] = c;
    return rel_out_tensor(rc, data->dtype, 4, shape);
}

static const AttrSpec roi_align_attrs[] = {
    {"pooled_size", AT_INTS, NULL, NULL},   {"spatial_scale", AT_FLOAT, NULL, NULL},
    {"sample_ratio", AT_INT, "-1", NULL},   {"layout", AT_STR, "\"NCHW\"", "NCHW|NHWC"},
    {"mode", AT_STR, "\"avg\"", "avg|max"}, {NULL, 0, NULL, NULL},
};

static const AttrSpec roi_pool_attrs[] = {
    {"pooled_size", AT_INTS, NULL, NULL},
    {"spatial_scale", AT_FLOAT, NULL, NULL},
    {"layout", AT_STR, "\"NCHW\"", "NCHW|NHWC"},
    {NULL, 0, NULL, NULL},
};

/* ---- vision.get_valid_counts / non_max_suppression ----------------------------------------- */

/* An index attribute into the last axis of a box tensor with `k` values per box (`?` passes).
 * `lo` is the smallest allowed value (-1 where -1 means "absent"). */
static bool box_index(RelCall *rc, const char *name, int64_t k, int64_t lo, int64_t width) {
    int64_t v = attr_int(rc, name);
    if (v < lo) {
        rel_error(rc, "%s must be at least %lld, got %lld", name, (long long)lo, (long long)v);
        return false;
    }
    if (dim_known(k) && v >= 0 && v > k - width) {
        rel_error(rc, "%s %lld is out of range for boxes of %lld values", name, (long long)v,
                  (long long)k);
        return false;
    }
    return true;
}

static RelResult get_valid_counts_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (!want_scalar(rc, 1, "score_threshold")) return rc->status;
    if (!want_rank(rc, 0, data, 3, "data (batch, boxes, values per box)")) return REL_ERROR;
    int64_t k = data->shape[2];
    if (!box_index(rc, "score_index", k, 0, 1) || !box_index(rc, "id_index", k, -1, 1))
        return REL_ERROR;
    int64_t b = data->shape[0], n = data->shape[1];
    int64_t bn[2] = {b, n};
    Type *fields[3] = {ir_type_tensor(rc->ctx, RLY_DTYPE_I32, 1, &b), &data->base,
                       ir_type_tensor(rc->ctx, RLY_DTYPE_I32, 2, bn)};
    return rel_out(rc, ir_type_tuple(rc->ctx, 3, fields));
}

static const AttrSpec get_valid_counts_attrs[] = {
    {"score_threshold", AT_OPT_FLOAT, "None", NULL}, /* TVM keeps the field; the argument wins */
    {"id_index", AT_INT, "0", NULL},
    {"score_index", AT_INT, "1", NULL},
    {NULL, 0, NULL, NULL},
};

static RelResult nms_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(valid_count, rc, 1);
    REL_TENSOR(indices, rc, 2);
    if (!want_scalar(rc, 3, "max_output_size") || !want_scalar(rc, 4, "iou_threshold"))
        return rc->status;
    if (!want_rank(rc, 0, data, 3, "data (batch, boxes, values per box)") ||
        !want_rank(rc, 1, valid_count, 1, "valid_count") ||
        !want_rank(rc, 2, indices, 2, "indices (batch, boxes)"))
        return REL_ERROR;
    int64_t b = data->shape[0], n = data->shape[1], k = data->shape[2];
    if (!same_dim(rc, b, valid_count->shape[0], "the data batch", "the valid_count length") ||
        !same_dim(rc, b, indices->shape[0], "the data batch", "the indices batch"))
        return REL_ERROR;
    if (!rel_is_integer(valid_count->dtype) || !rel_is_integer(indices->dtype))
        return rel_error_arg(rc, rel_is_integer(valid_count->dtype) ? 2 : 1,
                             "valid_count and indices must hold integers, got %s and %s",
                             sup_dtype_name(valid_count->dtype), sup_dtype_name(indices->dtype));
    if (!box_index(rc, "coord_start", k, 0, 4) || !box_index(rc, "score_index", k, 0, 1) ||
        !box_index(rc, "id_index", k, -1, 1))
        return REL_ERROR;
    if (attr_int(rc, "top_k") < -1)
        return rel_error(rc, "top_k must be -1 (no limit) or non-negative, got %lld",
                         (long long)attr_int(rc, "top_k"));
    if (!attr_bool(rc, "return_indices")) return rel_out(rc, &data->base);
    b = dim_merge(b, dim_merge(valid_count->shape[0], indices->shape[0]));
    int64_t bn[2] = {b, n}, b1[2] = {b, 1};
    Type *fields[2] = {ir_type_tensor(rc->ctx, RLY_DTYPE_I32, 2, bn),
                       ir_type_tensor(rc->ctx, RLY_DTYPE_I32, 2, b1)};
    return rel_out(rc, ir_type_tuple(rc->ctx, 2, fields));
}

static const AttrSpec nms_attrs[] = {
    {"force_suppress", AT_BOOL, "False", NULL},
    {"top_k", AT_INT, "-1", NULL},
    {"coord_start", AT_INT, "2", NULL},
    {"score_index", AT_INT, "1", NULL},
    {"id_index", AT_INT, "0", NULL},
    {"return_indices", AT_BOOL, "True", NULL},
    {"invalid_to_bottom", AT_BOOL, "False", NULL},
    {NULL, 0, NULL, NULL},
};

/* boxes (batch, boxes, 4) and scores (batch, classes, boxes) or, when scores_last, (batch, boxes,
 * classes). Writes batch, boxes and classes. */
static bool boxes_scores(RelCall *rc, bool scores_last, int64_t *b, int64_t *n, int64_t *c) {
    TensorType *boxes = rel_tensor(rc, 0);
    if (boxes == NULL) return false;
    TensorType *scores = rel_tensor(rc, 1);
    if (scores == NULL) return false;
    if (!want_rank(rc, 0, boxes, 3, "boxes (batch, boxes, 4)") ||
        !want_dim(rc, 0, boxes, 2, 4, "boxes") ||
        !want_rank(rc, 1, scores, 3,
                   scores_last ? "scores (batch, boxes, classes)"
                               : "scores (batch, classes, boxes)"))
        return false;
    int64_t sn = scores->shape[scores_last ? 1 : 2];
    if (!same_dim(rc, boxes->shape[0], scores->shape[0], "the boxes batch", "the scores batch") ||
        !same_dim(rc, boxes->shape[1], sn, "the number of boxes", "the number of scored boxes"))
        return false;
    *b = dim_merge(boxes->shape[0], scores->shape[0]);
    *n = dim_merge(boxes->shape[1], sn);
    *c = scores->shape[scores_last ? 2 : 1];
    return true;
}

static RelResult all_class_nms_rel(RelCall *rc) {
    int64_t b, n, c;
    if (!boxes_scores(rc, false, &b, &n, &c)) return rc->status;
    if (!want_scalar(rc, 2, "max_output_boxes_per_class") || !want_scalar(rc, 3, "iou_threshold") ||
        !want_scalar(rc, 4, "score_threshold"))
        return rc->status;
    int64_t cn;
    if (!rel_dim_mul(rc, c, n, &cn)) return REL_ERROR;
    if (strcmp(attr_str(rc, "output_format"), "onnx") == 0) {
        int64_t total;
        if (!rel_dim_mul(rc, b, cn, &total)) return REL_ERROR;
        int64_t sel[2] = {total, 3}, one = 1;
        Type *fields[2] = {ir_type_tensor(rc->ctx, RLY_DTYPE_I64, 2, sel),
                           ir_type_tensor(rc->ctx, RLY_DTYPE_I64, 1, &one)};
        return rel_out(rc, ir_type_tuple(rc->ctx, 2, fields));
    }
    int64_t idx[3] = {b, cn, 2}, sc[2] = {b, cn};
    Type *fields[3] = {ir_type_tensor(rc->ctx, RLY_DTYPE_I64, 3, idx),
                       ir_type_tensor(rc->ctx, RLY_DTYPE_F32, 2, sc),
                       ir_type_tensor(rc->ctx, RLY_DTYPE_I64, 1, &b)};
    return rel_out(rc, ir_type_tuple(rc->ctx, 3, fields));
}

static const AttrSpec all_class_nms_attrs[] = {
    {"output_format", AT_STR, "\"onnx\"", "onnx|tensorflow"},
    {NULL, 0, NULL, NULL},
};

static RelResult regular_nms_rel(RelCall *rc) {
    int64_t b, n, c;
    if (!boxes_scores(rc, true, &b, &n, &c)) return rc->status;
    int64_t m = attr_int(rc, "max_detections");
    if (m < 0 || m > DIM_LIMIT)
        return rel_error(rc, "max_detections must be non-negative, got %lld", (long long)m);
    if (attr_int(rc, "max_detections_per_class") < 0)
        return rel_error(rc, "max_detections_per_class must be non-negative, got %lld",
                         (long long)attr_int(rc, "max_detections_per_class"));
    int64_t k = attr_int(rc, "num_classes");
    if (k <= 0) return rel_error(rc, "num_classes must be positive, got %lld", (long long)k);
    if (dim_known(c) && c < k)
        return rel_error_arg(rc, 1, "scores has %lld classes but num_classes is %lld", (long long)c,
                             (long long)k);
    int64_t s3[3] = {b, m, 4}, s2[2] = {b, m};
    Type *fields[4] = {ir_type_tensor(rc->ctx, RLY_DTYPE_F32, 3, s3),
                       ir_type_tensor(rc->ctx, RLY_DTYPE_F32, 2, s2),
                       ir_type_tensor(rc->ctx, RLY_DTYPE_F32, 2, s2),
                       ir_type_tensor(rc->ctx, RLY_DTYPE_I32, 1, &b)};
    return rel_out(rc, ir_type_tuple(rc->ctx, 4, fields));
}

static const AttrSpec regular_nms_attrs[] = {
    {"max_detections_per_class", AT_INT, NULL, NULL},
    {"max_detections", AT_INT, NULL, NULL},
    {"num_classes", AT_INT, NULL, NULL},
    {"iou_threshold", AT_FLOAT, NULL, NULL},
    {"score_threshold", AT_FLOAT, NULL, NULL},
    {NULL, 0, NULL, NULL},
};

/* ---- vision.multibox_prior / multibox_transform_loc ---------------------------------------- */

static RelResult multibox_prior_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (!want_rank(rc, 0, data, 4, "data (NCHW)")) return REL_ERROR;
    const double *v;
    uint32_t n_sizes = attr_floats(rc, "sizes", &v);
    uint32_t n_ratios = attr_floats(rc, "ratios", &v);
    if (n_sizes == 0 || n_ratios == 0)
        return rel_error(rc, "sizes and ratios must not be empty (got %u and %u values)", n_sizes,
                         n_ratios);
    if (attr_floats(rc, "steps", &v) != 2 || attr_floats(rc, "offsets", &v) != 2)
        return rel_error(rc, "steps and offsets must have 2 values each (y, x), got %u and %u",
                         attr_floats(rc, "steps", &v), attr_floats(rc, "offsets", &v));
    int64_t hw, boxes;
    if (!rel_dim_mul(rc, data->shape[2], data->shape[3], &hw) ||
        !rel_dim_mul(rc, hw, (int64_t)n_sizes + n_ratios - 1, &boxes))
        return REL_ERROR;
    int64_t shape[3] = {1, boxes, 4};
    return rel_out_tensor(rc, data->dtype, 3, shape);
}

static const AttrSpec multibox_prior_attrs[] = {
    {"sizes", AT_FLOATS, "[1.0]", NULL},        {"ratios", AT_FLOATS, "[1.0]", NULL},
    {"steps", AT_FLOATS, "[-1.0, -1.0]", NULL}, {"offsets", AT_FLOATS, "[0.5, 0.5]", NULL},
    {"clip", AT_BOOL, "False", NULL},           {NULL, 0, NULL, NULL},
};

static RelResult multibox_transform_loc_rel(RelCall *rc) {
    REL_TENSOR(cls, rc, 0);
    REL_TENSOR(loc, rc, 1);
    REL_TENSOR(anchor, rc, 2);
    if (!want_rank(rc, 0, cls, 3, "cls_prob (batch, classes, anchors)") ||
        !want_rank(rc, 1, loc, 2, "loc_pred (batch, anchors * 4)") ||
        !want_rank(rc, 2, anchor, 3, "anchor (1, anchors, 4)") ||
        !want_dim(rc, 2, anchor, 2, 4, "anchor"))
        return REL_ERROR;
    const double *var;
    if (attr_floats(rc, "variances", &var) != 4)
        return rel_error(rc, "variances must have 4 values, got %u",
                         attr_floats(rc, "variances", &var));
    int64_t n = cls->shape[2];
    if (!same_dim(rc, n, anchor->shape[1], "the number of anchors in cls_prob",
                  "the number in anchor"))
        return REL_ERROR;
    n = dim_merge(n, anchor->shape[1]);
    if (n == 0) return rel_error_arg(rc, 2, "the number of anchors must be positive, got 0");
    int64_t n4;
    if (!rel_dim_mul(rc, n, 4, &n4)) return REL_ERROR;
    if (!same_dim(rc, loc->shape[1], n4, "the loc_pred width", "4 * the number of anchors") ||
        !same_dim(rc, cls->shape[0], loc->shape[0], "the cls_prob batch", "the loc_pred batch"))
        return REL_ERROR;
    int64_t b = dim_merge(cls->shape[0], loc->shape[0]);
    int64_t out0[3] = {b, n, 6};
    Type *fields[2] = {ir_type_tensor(rc->ctx, cls->dtype, 3, out0),
                       ir_type_tensor(rc->ctx, RLY_DTYPE_I32, 1, &b)};
    return rel_out(rc, ir_type_tuple(rc->ctx, 2, fields));
}

static const AttrSpec multibox_transform_loc_attrs[] = {
    {"clip", AT_BOOL, "True", NULL},
    {"threshold", AT_FLOAT, "0.01", NULL},
    {"variances", AT_FLOATS, "[0.1, 0.1, 0.2, 0.2]", NULL},
    {"keep_background", AT_BOOL, "False", NULL},
    {NULL, 0, NULL, NULL},
};

/* ---- vision.proposal / yolo_reorg ---------------------------------------------------------------
 */

static RelResult proposal_rel(RelCall *rc) {
    REL_TENSOR(cls, rc, 0);
    REL_TENSOR(bbox, rc, 1);
    REL_TENSOR(im_info, rc, 2);
    if (!want_rank(rc, 0, cls, 4, "cls_prob (batch, 2 * anchors, height, width)") ||
        !want_rank(rc, 1, bbox, 4, "bbox_pred (batch, 4 * anchors, height, width)") ||
        !want_rank(rc, 2, im_info, 2, "im_info (batch, 3)") ||
        !want_dim(rc, 2, im_info, 1, 3, "im_info"))
        return REL_ERROR;
    const double *v;
    int64_t anchors = (int64_t)attr_floats(rc, "scales", &v) * attr_floats(rc, "ratios", &v);
    if (anchors == 0) return rel_error(rc, "scales and ratios must not be empty");
    if (!same_dim(rc, cls->shape[1], 2 * anchors, "the cls_prob channels",
                  "2 * len(scales) * len(ratios)") ||
        !same_dim(rc, bbox->shape[1], 4 * anchors, "the bbox_pred channels",
                  "4 * len(scales) * len(ratios)") ||
        !same_dim(rc, cls->shape[0], bbox->shape[0], "the cls_prob batch", "the bbox_pred batch") ||
        !same_dim(rc, cls->shape[0], im_info->shape[0], "the cls_prob batch", "the im_info batch"))
        return REL_ERROR;
    if (attr_int(rc, "feature_stride") <= 0)
        return rel_error(rc, "feature_stride must be positive, got %lld",
                         (long long)attr_int(rc, "feature_stride"));
    int64_t post = attr_int(rc, "rpn_post_nms_top_n");
    if (post <= 0 || post > DIM_LIMIT)
        return rel_error(rc, "rpn_post_nms_top_n must be positive, got %lld", (long long)post);
    int64_t b = dim_merge(cls->shape[0], dim_merge(bbox->shape[0], im_info->shape[0]));
    int64_t rows;
    if (!rel_dim_mul(rc, b, post, &rows)) return REL_ERROR;
    int64_t shape[2] = {rows, 5};
    return rel_out_tensor(rc, cls->dtype, 2, shape);
}

static const AttrSpec proposal_attrs[] = {
    {"scales", AT_FLOATS, "[4.0, 8.0, 16.0, 32.0]", NULL},
    {"ratios", AT_FLOATS, "[0.5, 1.0, 2.0]", NULL},
    {"feature_stride", AT_INT, "16", NULL},
    {"threshold", AT_FLOAT, "0.7", NULL},
    {"rpn_pre_nms_top_n", AT_INT, "6000", NULL},
    {"rpn_post_nms_top_n", AT_INT, "300", NULL},
    {"rpn_min_size", AT_INT, "16", NULL},
    {"iou_loss", AT_BOOL, "False", NULL},
    {NULL, 0, NULL, NULL},
};

static RelResult yolo_reorg_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (!want_rank(rc, 0, data, 4, "data (NCHW)")) return REL_ERROR;
    int64_t s = attr_int(rc, "stride");
    if (s <= 0 || s > ((int64_t)1 << 30))
        return rel_error(rc, "stride must be positive, got %lld", (long long)s);
    static const char *names[2] = {"height", "width"};
    for (int i = 0; i < 2; i++) {
        int64_t d = data->shape[2 + i];
        if (dim_known(d) && d % s != 0)
            return rel_error(rc, "the %s %lld is not divisible by stride %lld", names[i],
                             (long long)d, (long long)s);
    }
    int64_t c;
    if (!rel_dim_mul(rc, data->shape[1], s * s, &c)) return REL_ERROR;
    int64_t shape[4] = {data->shape[0], c, dim_floordiv(data->shape[2], s),
                        dim_floordiv(data->shape[3], s)};
    return rel_out_tensor(rc, data->dtype, 4, shape);
}

static const AttrSpec yolo_reorg_attrs[] = {
    {"stride", AT_INT, "1", NULL},
    {NULL, 0, NULL, NULL},
};

/* ---- the table
 * ------------------------------------------------------------------------------------ */

OpDef ops_image_vision_table[] = {
    OP_ROW(IMAGE_RESIZE1D, 1, OP_INJECTIVE, resize1d_rel, resize1d_attrs, "data",
           "resize the W axis to size (nearest, linear or cubic; ONNX coordinate modes)"),
    OP_ROW(IMAGE_RESIZE2D, 1, OP_INJECTIVE, resize2d_rel, resize2d_attrs, "data",
           "resize the H and W axes to size (nearest, bilinear or bicubic; ONNX coordinate modes)"),
    OP_ROW(IMAGE_RESIZE3D, 1, OP_INJECTIVE, resize3d_rel, resize3d_attrs, "data",
           "resize the D, H and W axes to size (nearest, trilinear or tricubic)"),
    OP_ROW(IMAGE_CROP_AND_RESIZE, 3, OP_INJECTIVE, crop_and_resize_rel, crop_and_resize_attrs,
           "data, boxes, box_indices",
           "crop each box (y1, x1, y2, x2, normalized) from its image and resize it to crop_size"),
    OP_ROW(IMAGE_AFFINE_GRID, 1, OP_INJECTIVE, affine_grid_rel, affine_grid_attrs, "data",
           "sampling grid (batch, 2, H, W) in [-1, 1] transformed by 2x3 affine matrices"),
    OP_ROW(IMAGE_GRID_SAMPLE, 2, OP_INJECTIVE, grid_sample_rel, grid_sample_attrs, "data, grid",
           "sample data at the normalized grid coordinates (2-D or 3-D)"),
    OP_ROW(IMAGE_DILATION2D, 2, OP_OUT_EWISE_FUSABLE, dilation2d_rel, dilation2d_attrs,
           "data, weight",
           "grayscale morphological dilation: max over the window of data + weight"),
    OP_ROW(VISION_ROI_ALIGN, 2, OP_OUT_EWISE_FUSABLE, roi_rel, roi_align_attrs, "data, rois",
           "bilinearly sampled (avg or max) pooling of each region (batch_index, x1, y1, x2, y2)"),
    OP_ROW(VISION_ROI_POOL, 2, OP_OUT_EWISE_FUSABLE, roi_rel, roi_pool_attrs, "data, rois",
           "max pooling of each region (batch_index, x1, y1, x2, y2) to pooled_size"),
    OP_ROW(VISION_GET_VALID_COUNTS, 2, OP_OPAQUE, get_valid_counts_rel, get_valid_counts_attrs,
           "data, score_threshold",
           "(valid count per batch, boxes with valid ones first, their original indices)"),
    OP_ROW(VISION_NON_MAX_SUPPRESSION, 5, OP_OPAQUE, nms_rel, nms_attrs,
           "data, valid_count, indices, max_output_size, iou_threshold",
           "non-maximum suppression of boxes; (indices, count) when return_indices"),
    OP_ROW(VISION_ALL_CLASS_NON_MAX_SUPPRESSION, 5, OP_OPAQUE, all_class_nms_rel,
           all_class_nms_attrs,
           "boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold",
           "per-class non-maximum suppression (ONNX NonMaxSuppression or TF combined NMS output)"),
    OP_ROW(VISION_REGULAR_NON_MAX_SUPPRESSION, 2, OP_OPAQUE, regular_nms_rel, regular_nms_attrs,
           "boxes, scores",
           "TFLite regular NMS: (boxes, classes, scores, number of detections) per batch"),
    OP_ROW(VISION_MULTIBOX_PRIOR, 1, OP_OPAQUE, multibox_prior_rel, multibox_prior_attrs, "data",
           "SSD prior (anchor) boxes (1, H * W * (len(sizes) + len(ratios) - 1), 4)"),
    OP_ROW(VISION_MULTIBOX_TRANSFORM_LOC, 3, OP_OPAQUE, multibox_transform_loc_rel,
           multibox_transform_loc_attrs, "cls_prob, loc_pred, anchor",
           "decode SSD box predictions against anchors: (detections (B, N, 6), valid count)"),
    OP_ROW(VISION_PROPOSAL, 3, OP_OPAQUE, proposal_rel, proposal_attrs,
           "cls_prob, bbox_pred, im_info",
           "RPN region proposals (batch * rpn_post_nms_top_n, 5) after NMS"),
    OP_ROW(VISION_YOLO_REORG, 1, OP_INJECTIVE, yolo_reorg_rel, yolo_reorg_attrs, "data",
           "YOLO space-to-channel reorg: (N, C * s * s, H / s, W / s)"),
    {0},
};
