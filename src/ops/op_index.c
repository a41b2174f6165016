/* op_index.c - indexing, scatter/gather, creation, scan, sort/search and set operators:
 * take, gather(_nd), scatter_elements, scatter_nd, adv_index, full/zeros/ones(_like), arange,
 * one_hot, cumsum/cumprod, sort/argsort/topk, searchsorted, unravel_index, sequence_mask,
 * argwhere, unique, sparse_to_dense.
 *
 * Names, attribute names and defaults follow TVM Relay (include/tvm/relay/attrs/transform.h and
 * algorithm.h). Results whose size depends on tensor values (argwhere, arange) get `?` dims, as
 * TVM gives them. */
#include "ops/ops.h"

/* ---- shared checks ------------------------------------------------------------------------- */

static const char *dt_name(rly_dtype dt) { return sup_dtype_name(dt); }

/* Argument i (named `what`) must hold integers. */
static bool need_int(RelCall *rc, uint32_t i, const TensorType *t, const char *what) {
    if (rel_is_integer(t->dtype)) return true;
    rel_error_arg(rc, (int)i, "%s must be an integer tensor, got %s", what, dt_name(t->dtype));
    return false;
}

/* Argument i (named `what`) must be a scalar (rank 0). */
static bool need_scalar(RelCall *rc, uint32_t i, const TensorType *t, const char *what) {
    if (t->ndim == 0) return true;
    rel_error_arg(rc, (int)i, "%s must be a scalar, got shape %s", what,
                  rel_shape_str(rc, t->ndim, t->shape));
    return false;
}

/* Dims a (of `wa`) and b (of `wb`) must be equal where both are known. */
static bool need_same_dim(RelCall *rc, int64_t a, int64_t b, const char *wa, const char *wb,
                          uint32_t at) {
    if (dim_compat(a, b)) return true;
    rel_error(rc, "dimension %u differs: %s has %s but %s has %s", at, wa, rel_dim_str(rc, a), wb,
              rel_dim_str(rc, b));
    return false;
}

/* A shape attribute: every entry a non-negative size. */
static bool shape_attr(RelCall *rc, const char *name, uint32_t *n, const int64_t **dims) {
    *n = attr_ints(rc, name, dims);
    for (uint32_t i = 0; i < *n; i++)
        if ((*dims)[i] < 0) {
            rel_error(rc, "%s has a negative dimension %lld at position %u", name,
                      (long long)(*dims)[i], i);
            return false;
        }
    return true;
}

/* Number of elements of a shape: `?` when a dim is not constant; false past the shape limit
 * (support.h, "shapes"). */
static bool shape_size(RelCall *rc, uint32_t n, const int64_t *shape, int64_t *out) {
    int64_t size = 1;
    bool unknown = false;
    for (uint32_t i = 0; i < n; i++) {
        int64_t d = shape[i];
        if (d == 0) {
            *out = 0;
            return true;
        }
        if (!dim_known(d)) {
            unknown = true;
            continue;
        }
        if (!sup_dim_mul(size, d, &size)) {
            rel_error(rc, "the number of elements of %s is over 2^62", rel_shape_str(rc, n, shape));
            return false;
        }
    }
    if (unknown) {
        /* a single non-constant dim times 1 keeps its (symbolic) name */
        uint32_t n_unknown = 0;
        int64_t only = DIM_ANY;
        for (uint32_t i = 0; i < n; i++)
            if (!dim_known(shape[i])) {
                n_unknown++;
                only = shape[i];
            }
        *out = n_unknown == 1 && size == 1 ? only : DIM_ANY;
    } else {
        *out = size;
    }
    return true;
}

/* ---- take, gather, gather_nd ----------------------------------------------------------------- */

static const AttrSpec take_attrs[] = {
    {"batch_dims", AT_INT, "0", NULL},
    {"axis", AT_OPT_INT, "None", NULL},
    {"mode", AT_STR, "\"clip\"", "clip|wrap|fast"},
    {0},
};

static RelResult take_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(ind, rc, 1);
    if (!need_int(rc, 1, ind, "indices")) return REL_ERROR;
    if (attr_is_none(rc, "axis")) /* indices into the flattened data */
        return rel_out_tensor(rc, data->dtype, ind->ndim, ind->shape);
    uint32_t nd = data->ndim, ni = ind->ndim;
    int64_t axis, bd = attr_int(rc, "batch_dims");
    if (!rel_axis(rc, attr_int(rc, "axis"), nd, "axis", &axis)) return REL_ERROR;
    if (bd < 0) bd += ni;
    if (bd < 0 || bd > (int64_t)ni)
        return rel_error(rc, "batch_dims %lld is out of range for indices of rank %u",
                         (long long)attr_int(rc, "batch_dims"), ni);
    if (bd > axis)
        return rel_error(rc, "batch_dims %lld must not exceed axis %lld", (long long)bd,
                         (long long)axis);
    uint32_t n = 0;
    int64_t *out = rel_dims(rc, nd - 1 + ni - (uint32_t)bd);
    for (int64_t i = 0; i < bd; i++) {
        if (!need_same_dim(rc, data->shape[i], ind->shape[i], "data", "indices", (uint32_t)i))
            return REL_ERROR;
        out[n++] = dim_merge(data->shape[i], ind->shape[i]);
    }
    for (int64_t i = bd; i < axis; i++)
        out[n++] = data->shape[i];
    for (uint32_t i = (uint32_t)bd; i < ni; i++)
        out[n++] = ind->shape[i];
    for (uint32_t i = (uint32_t)axis + 1; i < nd; i++)
        out[n++] = data->shape[i];
    return rel_out_tensor(rc, data->dtype, n, out);
}

static const AttrSpec gather_attrs[] = {
    {"axis", AT_OPT_INT, "None", NULL},
    {0},
};

static RelResult gather_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(ind, rc, 1);
    if (!need_int(rc, 1, ind, "indices")) return REL_ERROR;
    if (attr_is_none(rc, "axis")) return rel_error(rc, "attribute axis is required");
    if (data->ndim != ind->ndim)
        return rel_error(rc, "data has rank %u but indices has rank %u (they must be equal)",
                         data->ndim, ind->ndim);
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    for (uint32_t i = 0; i < data->ndim; i++) {
        int64_t a = data->shape[i], b = ind->shape[i];
        if (i != axis && dim_known(a) && dim_known(b) && b > a)
            return rel_error(rc,
                             "indices dimension %u is %lld but data has only %lld there (only "
                             "axis %lld may be larger)",
                             i, (long long)b, (long long)a, (long long)axis);
    }
    return rel_out_tensor(rc, data->dtype, ind->ndim, ind->shape);
}

static const AttrSpec gather_nd_attrs[] = {
    {"batch_dims", AT_INT, "0", NULL},
    {"index_rank", AT_OPT_INT, "None", NULL},
    {0},
};

/* The M of indices (M, Y...) for gather_nd/scatter_nd: index_rank when given, else the first
 * dimension of indices. DIM_ANY when neither is known. */
static bool index_depth(RelCall *rc, const TensorType *ind, bool has_rank_attr, int64_t *m) {
    if (ind->ndim == 0) {
        rel_error_arg(rc, 1, "indices must have rank at least 1 (shape (M, ...)), got a scalar");
        return false;
    }
    int64_t first = ind->shape[0];
    *m = first;
    if (has_rank_attr && !attr_is_none(rc, "index_rank")) {
        int64_t r = attr_int(rc, "index_rank");
        if (r < 0) {
            rel_error(rc, "index_rank must be non-negative, got %lld", (long long)r);
            return false;
        }
        if (dim_known(first) && first != r) {
            rel_error(rc, "index_rank is %lld but the first dimension of indices is %lld",
                      (long long)r, (long long)first);
            return false;
        }
        *m = r;
    }
    if (!dim_known(*m)) *m = DIM_ANY;
    return true;
}

static RelResult gather_nd_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(ind, rc, 1);
    if (!need_int(rc, 1, ind, "indices")) return REL_ERROR;
    int64_t m, bd = attr_int(rc, "batch_dims");
    if (!index_depth(rc, ind, true, &m)) return REL_ERROR;
    if (m == DIM_ANY)
        return rel_error(rc,
                         "the first dimension of indices is %s: it must be a constant, or "
                         "index_rank must be given",
                         rel_dim_str(rc, ind->shape[0]));
    if (bd < 0 || bd > (int64_t)ind->ndim - 1)
        return rel_error(rc, "batch_dims %lld is out of range for indices of rank %u",
                         (long long)bd, ind->ndim);
    if (m > (int64_t)data->ndim - bd)
        return rel_error(rc,
                         "indices address %lld dimensions after %lld batch dimensions but data "
                         "has rank %u",
                         (long long)m, (long long)bd, data->ndim);
    uint32_t n = 0;
    int64_t *out = rel_dims(rc, ind->ndim - 1 + data->ndim - (uint32_t)(bd + m));
    for (uint32_t i = 1; i < ind->ndim; i++) {
        int64_t d = ind->shape[i];
        if (i - 1 < bd) {
            if (!need_same_dim(rc, data->shape[i - 1], d, "data", "indices (after M)", i - 1))
                return REL_ERROR;
            d = dim_merge(data->shape[i - 1], d);
        }
        out[n++] = d;
    }
    for (uint32_t i = (uint32_t)(bd + m); i < data->ndim; i++)
        out[n++] = data->shape[i];
    return rel_out_tensor(rc, data->dtype, n, out);
}

/* ---- scatter_elements, scatter_nd --------------------------------------------------------------
 */

static const AttrSpec scatter_elements_attrs[] = {
    {"axis", AT_INT, "0", NULL},
    {"reduction", AT_STR, "\"update\"", "update|add|mul|mean|min|max"},
    {0},
};

static bool updates_dtype(RelCall *rc, const TensorType *data, const TensorType *upd) {
    if (data->dtype == upd->dtype) return true;
    rel_error_arg(rc, 2, "updates have dtype %s but data has %s", dt_name(upd->dtype),
                  dt_name(data->dtype));
    return false;
}

static RelResult scatter_elements_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(ind, rc, 1);
    REL_TENSOR(upd, rc, 2);
    if (!need_int(rc, 1, ind, "indices") || !updates_dtype(rc, data, upd)) return REL_ERROR;
    if (ind->ndim != data->ndim)
        return rel_error(rc, "data has rank %u but indices has rank %u (they must be equal)",
                         data->ndim, ind->ndim);
    if (upd->ndim != ind->ndim)
        return rel_error(rc, "updates have shape %s but indices have shape %s (they must match)",
                         rel_shape_str(rc, upd->ndim, upd->shape),
                         rel_shape_str(rc, ind->ndim, ind->shape));
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    for (uint32_t i = 0; i < ind->ndim; i++)
        if (!need_same_dim(rc, ind->shape[i], upd->shape[i], "indices", "updates", i))
            return REL_ERROR;
    return rel_out(rc, rc->args[0]);
}

static const AttrSpec scatter_nd_attrs[] = {
    {"mode", AT_STR, "\"update\"", "update|add|mul|min|max"},
    {0},
};

static RelResult scatter_nd_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(ind, rc, 1);
    REL_TENSOR(upd, rc, 2);
    if (!need_int(rc, 1, ind, "indices") || !updates_dtype(rc, data, upd)) return REL_ERROR;
    int64_t m;
    if (!index_depth(rc, ind, false, &m)) return REL_ERROR;
    if (m == DIM_ANY) return rel_out(rc, rc->args[0]); /* the updates' rank cannot be checked */
    if (m > (int64_t)data->ndim)
        return rel_error(rc, "indices address %lld dimensions but data has rank %u", (long long)m,
                         data->ndim);
    /* indices (M, Y...), data (X_0..X_{M-1}, Z...): updates must be (Y..., Z...) */
    uint32_t k = ind->ndim - 1, tail = data->ndim - (uint32_t)m;
    if (upd->ndim != k + tail)
        return rel_error(rc,
                         "updates have rank %u but indices %s and data %s need rank %u (the "
                         "index dimensions, then data's last %u)",
                         upd->ndim, rel_shape_str(rc, ind->ndim, ind->shape),
                         rel_shape_str(rc, data->ndim, data->shape), k + tail, tail);
    for (uint32_t i = 0; i < k; i++)
        if (!dim_compat(ind->shape[i + 1], upd->shape[i]))
            return rel_error(rc, "updates dimension %u is %s but indices dimension %u is %s", i,
                             rel_dim_str(rc, upd->shape[i]), i + 1,
                             rel_dim_str(rc, ind->shape[i + 1]));
    for (uint32_t i = 0; i < tail; i++)
        if (!dim_compat(data->shape[m + i], upd->shape[k + i]))
            return rel_error(rc, "updates dimension %u is %s but data dimension %lld is %s", k + i,
                             rel_dim_str(rc, upd->shape[k + i]), (long long)(m + i),
                             rel_dim_str(rc, data->shape[m + i]));
    return rel_out(rc, rc->args[0]);
}

/* ---- adv_index ----------------------------------------------------------------------------------
 */

static RelResult adv_index_rel(RelCall *rc) {
    uint32_t n;
    TensorType **f = rel_tensor_tuple(rc, 0, &n);
    if (f == NULL) return rc->status;
    if (n == 0) return rel_error(rc, "the tuple must hold the data tensor, then index tensors");
    const TensorType *data = f[0];
    if (n - 1 > data->ndim)
        return rel_error(rc, "%u index tensors given but data has rank %u", n - 1, data->ndim);
    uint32_t nb = 0;
    int64_t *b = rel_dims(rc, 0);
    for (uint32_t i = 1; i < n; i++) {
        if (!rel_is_integer(f[i]->dtype))
            return rel_error(rc, "index %u must be an integer tensor, got %s", i - 1,
                             dt_name(f[i]->dtype));
        if (!rel_broadcast(rc, nb, b, f[i]->ndim, f[i]->shape, &nb, &b)) return REL_ERROR;
    }
    int64_t *out = rel_dims(rc, nb + data->ndim - (n - 1));
    memcpy(out, b, nb * sizeof(int64_t));
    for (uint32_t i = n - 1; i < data->ndim; i++)
        out[nb + i - (n - 1)] = data->shape[i];
    return rel_out_tensor(rc, data->dtype, nb + data->ndim - (n - 1), out);
}

/* ---- creation: full, full_like, zeros, ones, arange, one_hot
 * ------------------------------------- */

static const AttrSpec init_attrs[] = {
    {"shape", AT_INTS, NULL, NULL},
    {"dtype", AT_DTYPE, "\"\"", NULL},
    {0},
};

static RelResult full_rel(RelCall *rc) {
    REL_TENSOR(fill, rc, 0);
    if (!need_scalar(rc, 0, fill, "fill_value")) return REL_ERROR;
    uint32_t n;
    const int64_t *shape;
    if (!shape_attr(rc, "shape", &n, &shape)) return REL_ERROR;
    int dt = attr_dtype(rc, "dtype");
    return rel_out_tensor(rc, dt < 0 ? fill->dtype : (rly_dtype)dt, n, shape);
}

static RelResult init_rel(RelCall *rc) {
    uint32_t n;
    const int64_t *shape;
    if (!shape_attr(rc, "shape", &n, &shape)) return REL_ERROR;
    int dt = attr_dtype(rc, "dtype");
    if (dt < 0) return rel_error(rc, "attribute dtype must name the element type");
    return rel_out_tensor(rc, (rly_dtype)dt, n, shape);
}

static RelResult full_like_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(fill, rc, 1);
    (void)data;
    if (!need_scalar(rc, 1, fill, "fill_value")) return REL_ERROR;
    return rel_out(rc, rc->args[0]);
}

static const AttrSpec arange_attrs[] = {
    {"start", AT_ANY, "None", NULL},
    {"stop", AT_ANY, "None", NULL},
    {"step", AT_ANY, "None", NULL},
    {"dtype", AT_DTYPE, "\"\"", NULL},
    {0},
};

static RelResult arange_rel(RelCall *rc) {
    static const char *const names[] = {"start", "stop", "step"};
    REL_TENSOR(start, rc, 0);
    REL_TENSOR(stop, rc, 1);
    REL_TENSOR(step, rc, 2);
    const TensorType *t[3] = {start, stop, step};
    int dt = attr_dtype(rc, "dtype");
    rly_dtype out = dt < 0 ? start->dtype : (rly_dtype)dt;
    if (out == RLY_DTYPE_BOOL) return rel_error(rc, "dtype must be a number type, got bool");
    for (uint32_t i = 0; i < 3; i++) {
        if (!need_scalar(rc, i, t[i], names[i])) return REL_ERROR;
        if (t[i]->dtype != out)
            return rel_error_arg(rc, (int)i, "%s has dtype %s but the result dtype is %s", names[i],
                                 dt_name(t[i]->dtype), dt_name(out));
    }
    int64_t len = DIM_ANY; /* depends on the values */
    return rel_out_tensor(rc, out, 1, &len);
}

static const AttrSpec one_hot_attrs[] = {
    {"depth", AT_INT, "1", NULL},
    {"axis", AT_INT, "-1", NULL},
    {"dtype", AT_DTYPE, "\"\"", NULL},
    {0},
};

static RelResult one_hot_rel(RelCall *rc) {
    REL_TENSOR(ind, rc, 0);
    REL_TENSOR(on, rc, 1);
    REL_TENSOR(off, rc, 2);
    if (!need_scalar(rc, 1, on, "on_value") || !need_scalar(rc, 2, off, "off_value"))
        return REL_ERROR;
    if (on->dtype != off->dtype)
        return rel_error_arg(rc, 2, "on_value has dtype %s but off_value has %s",
                             dt_name(on->dtype), dt_name(off->dtype));
    int64_t depth = attr_int(rc, "depth");
    if (depth < 1) return rel_error(rc, "depth must be positive, got %lld", (long long)depth);
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), ind->ndim + 1, "axis", &axis)) return REL_ERROR;
    int64_t *out = rel_dims(rc, ind->ndim + 1);
    for (uint32_t i = 0, j = 0; i <= ind->ndim; i++)
        out[i] = i == axis ? depth : ind->shape[j++];
    int dt = attr_dtype(rc, "dtype");
    return rel_out_tensor(rc, dt < 0 ? on->dtype : (rly_dtype)dt, ind->ndim + 1, out);
}

/* ---- scans: cumsum, cumprod
 * ---------------------------------------------------------------------- */

static const AttrSpec scan_attrs[] = {
    {"axis", AT_OPT_INT, "None", NULL},
    {"dtype", AT_DTYPE, "\"\"", NULL},
    {"exclusive", AT_BOOL, "False", NULL},
    {0},
};

static RelResult scan_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int dt = attr_dtype(rc, "dtype");
    rly_dtype out = dt < 0 ? data->dtype : (rly_dtype)dt;
    if (attr_is_none(rc, "axis")) { /* over the flattened data */
        int64_t size;
        if (!shape_size(rc, data->ndim, data->shape, &size)) return REL_ERROR;
        return rel_out_tensor(rc, out, 1, &size);
    }
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    return rel_out_tensor(rc, out, data->ndim, data->shape);
}

/* ---- sort, argsort, topk, searchsorted
 * ------------------------------------------------------------ */

static const AttrSpec sort_attrs[] = {
    {"axis", AT_INT, "-1", NULL},
    {"is_ascend", AT_BOOL, "True", NULL},
    {"dtype", AT_DTYPE, "\"\"", NULL}, /* TVM's sort shares ArgsortAttrs; unused */
    {0},
};

static const AttrSpec argsort_attrs[] = {
    {"axis", AT_INT, "-1", NULL},
    {"is_ascend", AT_BOOL, "True", NULL},
    {"dtype", AT_DTYPE, "\"int32\"", NULL},
    {0},
};

/* The dtype of an index result (argsort, topk, searchsorted). */
static bool index_dtype(RelCall *rc, rly_dtype *out) {
    int dt = attr_dtype(rc, "dtype");
    if (dt < 0) dt = RLY_DTYPE_I32;
    if (dt == RLY_DTYPE_BOOL) {
        rel_error(rc, "dtype of the indices must be a number type, got bool");
        return false;
    }
    *out = (rly_dtype)dt;
    return true;
}

static RelResult sort_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    return rel_out(rc, rc->args[0]);
}

static RelResult argsort_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int64_t axis;
    rly_dtype dt;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis) || !index_dtype(rc, &dt))
        return REL_ERROR;
    return rel_out_tensor(rc, dt, data->ndim, data->shape);
}

static const AttrSpec topk_attrs[] = {
    {"k", AT_OPT_INT, "1", NULL},
    {"axis", AT_INT, "-1", NULL},
    {"ret_type", AT_STR, "\"both\"", "both|values|indices"},
    {"is_ascend", AT_BOOL, "False", NULL},
    {"dtype", AT_DTYPE, "\"int32\"", NULL},
    {0},
};

static RelResult topk_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int64_t axis;
    rly_dtype dt;
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis) || !index_dtype(rc, &dt))
        return REL_ERROR;
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    int64_t dim = data->shape[axis];
    if (attr_is_none(rc, "k")) {
        shape[axis] = DIM_ANY;
    } else {
        int64_t k = attr_int(rc, "k");
        if (k >= 1) { /* k < 1 selects the whole axis */
            if (dim_known(dim) && k > dim)
                return rel_error(rc, "k=%lld is larger than dimension %lld of size %lld",
                                 (long long)k, (long long)axis, (long long)dim);
            shape[axis] = k;
        }
    }
    Type *values = ir_type_tensor(rc->ctx, data->dtype, data->ndim, shape);
    Type *indices = ir_type_tensor(rc->ctx, dt, data->ndim, shape);
    const char *ret = attr_str(rc, "ret_type");
    if (strcmp(ret, "values") == 0) return rel_out(rc, values);
    if (strcmp(ret, "indices") == 0) return rel_out(rc, indices);
    Type *both[2] = {values, indices};
    return rel_out(rc, ir_type_tuple(rc->ctx, 2, both));
}

static const AttrSpec searchsorted_attrs[] = {
    {"right", AT_BOOL, "False", NULL},
    {"dtype", AT_DTYPE, "\"int32\"", NULL},
    {0},
};

static RelResult searchsorted_rel(RelCall *rc) {
    REL_TENSOR(seq, rc, 0);
    REL_TENSOR(val, rc, 1);
    rly_dtype dt;
    if (!index_dtype(rc, &dt)) return REL_ERROR;
    if (seq->ndim == 0) return rel_error_arg(rc, 0, "sorted_sequence must not be a scalar");
    if (val->ndim == 0) return rel_error_arg(rc, 1, "values must not be a scalar");
    if (seq->dtype != val->dtype)
        return rel_error(rc, "sorted_sequence has dtype %s but values have %s", dt_name(seq->dtype),
                         dt_name(val->dtype));
    if (seq->ndim > 1) {
        if (seq->ndim != val->ndim)
            return rel_error(rc,
                             "sorted_sequence has rank %u but values have rank %u (a "
                             "multi-dimensional sorted_sequence needs equal ranks)",
                             seq->ndim, val->ndim);
        for (uint32_t i = 0; i + 1 < seq->ndim; i++)
            if (!need_same_dim(rc, seq->shape[i], val->shape[i], "sorted_sequence", "values", i))
                return REL_ERROR;
    }
    return rel_out_tensor(rc, dt, val->ndim, val->shape);
}

/* ---- unravel_index, sequence_mask, argwhere, unique, sparse_to_dense
 * ------------------------------ */

static RelResult unravel_index_rel(RelCall *rc) {
    REL_TENSOR(ind, rc, 0);
    REL_TENSOR(shape, rc, 1);
    if (!need_int(rc, 0, ind, "indices") || !need_int(rc, 1, shape, "shape")) return REL_ERROR;
    if (ind->ndim > 1)
        return rel_error_arg(rc, 0, "indices must be a scalar or 1-D, got shape %s",
                             rel_shape_str(rc, ind->ndim, ind->shape));
    if (shape->ndim != 1)
        return rel_error_arg(rc, 1, "shape must be 1-D, got shape %s",
                             rel_shape_str(rc, shape->ndim, shape->shape));
    int64_t out[2] = {shape->shape[0], ind->ndim ? ind->shape[0] : 0};
    return rel_out_tensor(rc, ind->dtype, 1 + ind->ndim, out);
}

static const AttrSpec sequence_mask_attrs[] = {
    {"mask_value", AT_FLOAT, "0.0", NULL},
    {"axis", AT_INT, "0", NULL},
    {0},
};

static RelResult sequence_mask_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(len, rc, 1);
    int64_t axis = attr_int(rc, "axis");
    if (axis != 0 && axis != 1)
        return rel_error(rc, "axis must be 0 or 1 (the time axis), got %lld", (long long)axis);
    if (data->ndim < 2)
        return rel_error_arg(rc, 0, "data must have rank at least 2, got shape %s",
                             rel_shape_str(rc, data->ndim, data->shape));
    if (!need_int(rc, 1, len, "valid_length")) return REL_ERROR;
    if (len->ndim != 1)
        return rel_error_arg(rc, 1, "valid_length must be 1-D (batch,), got shape %s",
                             rel_shape_str(rc, len->ndim, len->shape));
    int64_t batch = data->shape[1 - axis];
    if (!dim_compat(batch, len->shape[0]))
        return rel_error(rc, "valid_length has %s entries but the batch dimension of data is %s",
                         rel_dim_str(rc, len->shape[0]), rel_dim_str(rc, batch));
    return rel_out(rc, rc->args[0]);
}

static RelResult argwhere_rel(RelCall *rc) {
    REL_TENSOR(cond, rc, 0);
    int64_t out[2] = {DIM_ANY, cond->ndim};
    return rel_out_tensor(rc, RLY_DTYPE_I32, 2, out);
}

static const AttrSpec unique_attrs[] = {
    {"sorted", AT_BOOL, "True", NULL},
    {"return_counts", AT_BOOL, "False", NULL},
    {0},
};

static RelResult unique_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (data->ndim != 1)
        return rel_error_arg(rc, 0, "data must be 1-D, got shape %s",
                             rel_shape_str(rc, data->ndim, data->shape));
    /* like TVM: outputs padded to the input length, plus the count of unique elements */
    Type *idx = ir_type_tensor(rc->ctx, RLY_DTYPE_I32, 1, data->shape);
    int64_t one = 1;
    Type *f[5] = {rc->args[0], idx, idx, ir_type_tensor(rc->ctx, RLY_DTYPE_I32, 1, &one), idx};
    return rel_out(rc, ir_type_tuple(rc->ctx, attr_bool(rc, "return_counts") ? 5 : 4, f));
}

static const AttrSpec sparse_to_dense_attrs[] = {
    {"output_shape", AT_INTS, NULL, NULL},
    {0},
};

static RelResult sparse_to_dense_rel(RelCall *rc) {
    REL_TENSOR(ind, rc, 0);
    REL_TENSOR(val, rc, 1);
    REL_TENSOR(dflt, rc, 2);
    uint32_t n;
    const int64_t *shape;
    if (!shape_attr(rc, "output_shape", &n, &shape)) return REL_ERROR;
    if (!need_int(rc, 0, ind, "sparse_indices")) return REL_ERROR;
    if (ind->ndim > 2)
        return rel_error_arg(rc, 0, "sparse_indices must be 0-D, 1-D or 2-D, got shape %s",
                             rel_shape_str(rc, ind->ndim, ind->shape));
    if (val->ndim > 1)
        return rel_error_arg(rc, 1, "sparse_values must be 0-D or 1-D, got shape %s",
                             rel_shape_str(rc, val->ndim, val->shape));
    if (!need_scalar(rc, 2, dflt, "default_value")) return REL_ERROR;
    if (dflt->dtype != val->dtype)
        return rel_error_arg(rc, 2, "default_value has dtype %s but sparse_values have %s",
                             dt_name(dflt->dtype), dt_name(val->dtype));
    /* indices: scalar or (N,) into a 1-D output, or (N, rank) */
    int64_t rank = ind->ndim == 2 ? ind->shape[1] : 1;
    if (dim_known(rank) && rank != (int64_t)n)
        return rel_error(rc, "sparse_indices address %lld dimensions but output_shape has %u",
                         (long long)rank, n);
    if (val->ndim == 1 && ind->ndim >= 1 && !dim_compat(val->shape[0], ind->shape[0]))
        return rel_error(rc, "sparse_values have %s entries but sparse_indices have %s",
                         rel_dim_str(rc, val->shape[0]), rel_dim_str(rc, ind->shape[0]));
    return rel_out_tensor(rc, val->dtype, n, shape);
}

/* ---- the table --------------------------------------------------------------------------------
 */

OpDef ops_index_table[] = {
    OP_ROW(TAKE, 2, OP_INJECTIVE, take_rel, take_attrs, "data, indices",
           "elements of data at indices along axis (None: of the flattened data)"),
    OP_ROW(GATHER, 2, OP_INJECTIVE, gather_rel, gather_attrs, "data, indices",
           "out[i][j] = data[i][indices[i][j]] along axis (indices of the same rank as data)"),
    OP_ROW(GATHER_ND, 2, OP_INJECTIVE, gather_nd_rel, gather_nd_attrs, "data, indices",
           "slices of data at the M-tuples of indices (M, Y...)"),
    OP_ROW(SCATTER_ELEMENTS, 3, OP_OPAQUE, scatter_elements_rel, scatter_elements_attrs,
           "data, indices, updates",
           "data with updates written (or reduced) at indices along axis"),
    OP_ROW(SCATTER_ND, 3, OP_OPAQUE, scatter_nd_rel, scatter_nd_attrs, "data, indices, updates",
           "data with updates slices written (or accumulated) at the M-tuples of indices"),
    OP_ROW(ADV_INDEX, 1, OP_INJECTIVE, adv_index_rel, NULL, "inputs",
           "numpy advanced indexing: data (field 0) indexed by broadcast index tensors"),
    OP_ROW(FULL, 1, OP_ELEMWISE, full_rel, init_attrs, "fill_value",
           "a tensor of the given shape filled with the scalar fill_value"),
    OP_ROW(FULL_LIKE, 2, OP_ELEMWISE, full_like_rel, NULL, "data, fill_value",
           "a tensor shaped like data filled with the scalar fill_value"),
    OP_ROW(ZEROS, 0, OP_ELEMWISE, init_rel, init_attrs, "", "a tensor of zeros"),
    OP_ROW(ONES, 0, OP_ELEMWISE, init_rel, init_attrs, "", "a tensor of ones"),
    OP_ROW(ARANGE, 3, OP_OPAQUE, arange_rel, arange_attrs, "start, stop, step",
           "evenly spaced values in [start, stop) (length known at run time)"),
    OP_ROW(ONE_HOT, 3, OP_OUT_EWISE_FUSABLE, one_hot_rel, one_hot_attrs,
           "indices, on_value, off_value", "one-hot encoding with a new axis of size depth"),
    OP_ROW(CUMSUM, 1, OP_OPAQUE, scan_rel, scan_attrs, "data",
           "cumulative sum along axis (None: of the flattened data)"),
    OP_ROW(CUMPROD, 1, OP_OPAQUE, scan_rel, scan_attrs, "data",
           "cumulative product along axis (None: of the flattened data)"),
    OP_ROW(SORT, 1, OP_OPAQUE, sort_rel, sort_attrs, "data", "data sorted along axis"),
    OP_ROW(ARGSORT, 1, OP_OPAQUE, argsort_rel, argsort_attrs, "data",
           "the indices that sort data along axis"),
    OP_ROW(TOPK, 1, OP_OPAQUE, topk_rel, topk_attrs, "data",
           "the k largest (or smallest) values and/or their indices along axis"),
    OP_ROW(SEARCHSORTED, 2, OP_OPAQUE, searchsorted_rel, searchsorted_attrs,
           "sorted_sequence, values",
           "insertion indices of values into the innermost axis of sorted_sequence"),
    OP_ROW(UNRAVEL_INDEX, 2, OP_INJECTIVE, unravel_index_rel, NULL, "indices, shape",
           "flat indices converted to coordinate tuples in shape"),
    OP_ROW(SEQUENCE_MASK, 2, OP_INJECTIVE, sequence_mask_rel, sequence_mask_attrs,
           "data, valid_length",
           "data with steps past each sequence's valid_length set to mask_value"),
    OP_ROW(ARGWHERE, 1, OP_OPAQUE, argwhere_rel, NULL, "condition",
           "coordinates (?, ndim) of the non-zero elements of condition"),
    OP_ROW(UNIQUE, 1, OP_OPAQUE, unique_rel, unique_attrs, "data",
           "(unique, indices, inverse_indices, num_unique[, counts]) of a 1-D tensor, padded"),
    OP_ROW(SPARSE_TO_DENSE, 3, OP_OPAQUE, sparse_to_dense_rel, sparse_to_dense_attrs,
           "sparse_indices, sparse_values, default_value",
           "a dense tensor of output_shape from sparse entries, elsewhere default_value"),
    {0},
};
