/* op_misc.c - annotations and debugging hooks: operators that return their argument unchanged
 * (of any type, tuples included) and only carry a meaning for passes or the runtime; and the
 * operators that fit no other category, which the ONNX importer needs: `det` (determinants of
 * square matrices) and `tfidf_vectorizer` (ONNX TfIdfVectorizer's n-gram counts). */
#include "ops/ops.h"

/* The result type is the argument's type, whatever it is. */
static RelResult identity_any_rel(RelCall *rc) {
    Type *t = rc->args[0];
    if (t->kind == TYPE_INCOMPLETE) return REL_DEFER;
    return rel_out(rc, t);
}

/* trap: Tensor[shape, dtype] (-1 in shape is `?`) that never produces a value. */
static RelResult trap_rel(RelCall *rc) {
    const int64_t *shape;
    uint32_t n = attr_ints(rc, "shape", &shape);
    int64_t *dims = rel_dims(rc, n);
    for (uint32_t i = 0; i < n; i++) {
        if (shape[i] < -1)
            return rel_error(rc, "shape[%u] is %lld (-1 means ?)", i, (long long)shape[i]);
        dims[i] = shape[i] < 0 ? DIM_ANY : shape[i];
    }
    int dt = attr_dtype(rc, "dtype");
    if (dt < 0) return rel_error(rc, "dtype must name a dtype");
    return rel_out_tensor(rc, (rly_dtype)dt, n, dims);
}

/* det: data (..., n, n) of a float dtype -> (...), the determinant of each matrix. */
static RelResult det_rel(RelCall *rc) {
    REL_TENSOR(t, rc, 0);
    if (!rel_is_float(t->dtype))
        return rel_error_arg(rc, 0, "data must be a floating-point tensor, got %s",
                             sup_dtype_name(t->dtype));
    if (t->ndim < 2)
        return rel_error_arg(rc, 0, "data must have rank 2 or more (..., n, n), got rank %u",
                             t->ndim);
    int64_t rows = t->shape[t->ndim - 2], cols = t->shape[t->ndim - 1];
    if (!dim_compat(rows, cols))
        return rel_error_arg(rc, 0, "the matrices must be square, got %s x %s",
                             rel_dim_str(rc, rows), rel_dim_str(rc, cols));
    return rel_out_tensor(rc, t->dtype, t->ndim - 2, t->shape);
}

/* tfidf_vectorizer: data [C] or [N, C] of int32/int64 -> float32 [K] or [N, K], K =
 * max(ngram_indexes) + 1. The pool lists the n-grams by size: ngram_counts[s] is where the
 * (s+1)-grams start (0 for the 1-grams; the last size runs to the end of the pool), so the pool
 * holds sum((end_s - start_s) / (s + 1)) n-grams, one ngram_indexes value (and one weight, when
 * weights is not empty) per n-gram. */
static RelResult tfidf_rel(RelCall *rc) {
    REL_TENSOR(t, rc, 0);
    if (t->dtype != RLY_DTYPE_I32 && t->dtype != RLY_DTYPE_I64)
        return rel_error_arg(rc, 0, "data must be an int32 or int64 tensor, got %s",
                             sup_dtype_name(t->dtype));
    if (t->ndim != 1 && t->ndim != 2)
        return rel_error_arg(rc, 0, "data must have rank 1 [C] or 2 [N, C], got rank %u", t->ndim);
    int64_t lo = attr_int(rc, "min_gram_length"), hi = attr_int(rc, "max_gram_length");
    int64_t skip = attr_int(rc, "max_skip_count");
    if (lo < 1) return rel_error(rc, "min_gram_length must be positive, got %lld", (long long)lo);
    if (hi < lo)
        return rel_error(rc, "max_gram_length %lld is smaller than min_gram_length %lld",
                         (long long)hi, (long long)lo);
    if (skip < 0)
        return rel_error(rc, "max_skip_count must be non-negative, got %lld", (long long)skip);
    const int64_t *counts, *idx, *pool;
    const double *w;
    uint32_t n_counts = attr_ints(rc, "ngram_counts", &counts);
    uint32_t n_idx = attr_ints(rc, "ngram_indexes", &idx);
    uint32_t n_pool = attr_ints(rc, "pool", &pool);
    uint32_t n_w = attr_floats(rc, "weights", &w);
    if (n_counts == 0 || counts[0] != 0)
        return rel_error(rc, "ngram_counts must start with 0 (where the 1-grams start in pool)");
    int64_t n_grams = 0;
    for (uint32_t s = 0; s < n_counts; s++)
        if (counts[s] > (int64_t)n_pool || (s > 0 && counts[s] < counts[s - 1]))
            return rel_error(rc,
                             "ngram_counts must be non-decreasing and at most the pool size %u; "
                             "ngram_counts[%u] is %lld",
                             n_pool, s, (long long)counts[s]);
    for (uint32_t s = 0; s < n_counts; s++) {
        int64_t start = counts[s], end = s + 1 < n_counts ? counts[s + 1] : (int64_t)n_pool;
        if ((end - start) % (int64_t)(s + 1) != 0)
            return rel_error(rc, "the %u-grams take %lld pool values, not a multiple of %u", s + 1,
                             (long long)(end - start), s + 1);
        n_grams += (end - start) / (int64_t)(s + 1);
    }
    if (n_grams == 0) return rel_error(rc, "the pool holds no n-gram");
    if (n_grams != (int64_t)n_idx)
        return rel_error(rc, "the pool holds %lld n-grams but ngram_indexes has %u values",
                         (long long)n_grams, n_idx);
    if (n_w != 0 && n_w != n_idx)
        return rel_error(rc, "weights has %u values, the pool %u n-grams", n_w, n_idx);
    int64_t top = 0;
    for (uint32_t i = 0; i < n_idx; i++) {
        if (idx[i] < 0)
            return rel_error(rc, "ngram_indexes[%u] is %lld; an output index is non-negative", i,
                             (long long)idx[i]);
        if (idx[i] > top) top = idx[i];
    }
    int64_t shape[2];
    if (!rel_dim_add(rc, top, 1, &shape[t->ndim - 1])) return REL_ERROR;
    if (t->ndim == 2) shape[0] = t->shape[0];
    return rel_out_tensor(rc, RLY_DTYPE_F32, t->ndim, shape);
}

static const AttrSpec trap_attrs[] = {{"shape", AT_INTS, "[]", NULL},
                                      {"dtype", AT_DTYPE, "\"float32\"", NULL},
                                      {"message", AT_STR, "\"unreachable\"", NULL},
                                      {0}};

static const AttrSpec debug_attrs[] = {{"debug_func", AT_ANY, "None", NULL}, {0}};

static const AttrSpec tfidf_attrs[] = {{"mode", AT_STR, "\"TF\"", "TF|IDF|TFIDF"},
                                       {"min_gram_length", AT_INT, "1", NULL},
                                       {"max_gram_length", AT_INT, "1", NULL},
                                       {"max_skip_count", AT_INT, "0", NULL},
                                       {"ngram_counts", AT_INTS, NULL, NULL},
                                       {"ngram_indexes", AT_INTS, NULL, NULL},
                                       {"pool", AT_INTS, NULL, NULL},
                                       {"weights", AT_FLOATS, "[]", NULL},
                                       {0}};

OpDef ops_misc_table[] = {
    OP_ROW(ANNOTATION_STOP_FUSION, 1, OP_OPAQUE, identity_any_rel, NULL, "data",
           "identity that keeps FuseOps from fusing across it"),
    OP_ROW(ANNOTATION_CHECKPOINT, 1, OP_OPAQUE, identity_any_rel, NULL, "data",
           "identity marking a value to recompute rather than keep during gradient"),
    OP_ROW(DEBUG, 1, OP_OPAQUE, identity_any_rel, debug_attrs, "data",
           "identity that calls debug_func with the value at run time"),
    OP_ROW(
        TRAP, 0, OP_OPAQUE, trap_rel, trap_attrs, "",
        "a runtime error with `message` where a Tensor[shape, dtype] is expected (rly's own; the "
        "ONNX importer puts it in If branches that cannot run for the model's static shapes)"),
    OP_ROW(DET, 1, OP_OPAQUE, det_rel, NULL, "data",
           "determinant of each square matrix in the last two axes (LU with partial pivoting; "
           "ONNX Det)"),
    OP_ROW(TFIDF_VECTORIZER, 1, OP_OPAQUE, tfidf_rel, tfidf_attrs, "data",
           "per row of data, how often each n-gram of pool occurs (skips up to max_skip_count), "
           "weighted by mode, at the n-gram's ngram_indexes column (ONNX TfIdfVectorizer)"),
    {0},
};
