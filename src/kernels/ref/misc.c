/* misc.c - reference kernels of the misc operators (see src/ops/op_misc.c).
 *
 * The annotations and debug return their argument unchanged. The argument may be a tensor or a
 * tuple (the caller flattens its fields into in[] and expects the same fields back in out[]), so
 * the kernel copies each input tensor into the output of the same position. debug's debug_func
 * is a hook for the caller; the kernel ignores it.
 *
 * det factors each matrix as P A = L U (Gaussian elimination with partial pivoting, in double)
 * and multiplies U's diagonal, negated once per row swap. tfidf_vectorizer counts, per row of its
 * input, the occurrences of each pool n-gram directly (every start, every skip distance): the
 * pool is small and this is the oracle, so it stays the plain definition. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"

static int identity(KCall *kc) {
    if (kc->n_out != kc->n_in)
        return k_error(kc, "the result has %u field%s but the argument %u", kc->n_out,
                       kc->n_out == 1 ? "" : "s", kc->n_in);
    for (uint32_t i = 0; i < kc->n_in; i++) {
        const DLTensor *x = kc->in[i];
        rly_dtype dt = k_dtype(x);
        DLTensor *y = k_out(kc, i, dt, (uint32_t)x->ndim, x->shape);
        if (y == NULL) return -1;
        size_t bytes = (size_t)k_numel(x) * sup_dtype_size(dt);
        if (bytes > 0 && k_ptr(y) != k_ptr(x)) memcpy(k_ptr(y), k_ptr(x), bytes);
    }
    return 0;
}

static int trap(KCall *kc) {
    const char *msg = k_str(kc, "message");
    return k_error(kc, "%s", msg[0] ? msg : "unreachable");
}

/* ---- det ------------------------------------------------------------------------------------ */

/* The determinant of the n x n row-major matrix a (destroyed). A NaN pivot candidate wins, so
 * NaN propagates instead of passing for a zero column. */
static double lu_det(double *a, int64_t n) {
    double det = 1;
    for (int64_t k = 0; k < n; k++) {
        int64_t p = k;
        double best = fabs(a[k * n + k]);
        for (int64_t i = k + 1; i < n && !isnan(best); i++) {
            double v = fabs(a[i * n + k]);
            if (isnan(v) || v > best) {
                best = v;
                p = i;
            }
        }
        if (best == 0) return 0; /* singular: a zero column below the diagonal */
        if (p != k) {
            for (int64_t j = k; j < n; j++) {
                double t = a[k * n + j];
                a[k * n + j] = a[p * n + j];
                a[p * n + j] = t;
            }
            det = -det;
        }
        double piv = a[k * n + k];
        det *= piv;
        for (int64_t i = k + 1; i < n; i++) {
            double f = a[i * n + k] / piv;
            for (int64_t j = k + 1; j < n; j++)
                a[i * n + j] -= f * a[k * n + j];
        }
    }
    return det;
}

static int k_det(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t nd = (uint32_t)x->ndim;
    if (nd < 2) return k_error(kc, "data must have rank 2 or more, got rank %u", nd);
    int64_t n = x->shape[nd - 1];
    if (x->shape[nd - 2] != n)
        return k_error(kc, "the matrices must be square, got %lld x %lld",
                       (long long)x->shape[nd - 2], (long long)n);
    rly_dtype dt = k_dtype(x);
    DLTensor *y = k_out(kc, 0, dt, nd - 2, x->shape);
    if (y == NULL) return -1;
    int64_t batch = k_shape_numel(nd - 2, x->shape);
    if (batch == 0) return 0;
    /* n * n elements exist in x (batch > 0), so the size does not overflow */
    double *a = k_scratch_n(kc, n * n, sizeof(double));
    if (a == NULL) return -1;
    const void *src = k_ptr(x);
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < n * n; i++)
            a[i] = k_loadf(src, dt, b * n * n + i);
        k_storef(k_ptr(y), dt, b, lu_det(a, n));
    }
    return 0;
}

/* ---- tfidf_vectorizer ------------------------------------------------------------------------ */

/* Occurrences of the k-gram g in row x[0..c) taking every d-th item, d = 1 .. max_skip + 1 (only
 * d = 1 for 1-grams, which skips do not change). */
static int64_t ngram_count(const void *x, rly_dtype dt, int64_t off, int64_t c, const int64_t *g,
                           int64_t k, int64_t max_skip) {
    int64_t count = 0, d_max = k == 1 ? 1 : (max_skip < c ? max_skip + 1 : c);
    for (int64_t d = 1; d <= d_max; d++) {
        if (c == 0 || (k - 1) > (c - 1) / d) break; /* no k-gram of this spread fits */
        for (int64_t s = 0; s + (k - 1) * d < c; s++) {
            int64_t j = 0;
            while (j < k && k_loadi(x, dt, off + s + j * d) == g[j])
                j++;
            count += j == k;
        }
    }
    return count;
}

static int k_tfidf(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t nd = (uint32_t)x->ndim;
    rly_dtype dt = k_dtype(x);
    if ((nd != 1 && nd != 2) || (dt != RLY_DTYPE_I32 && dt != RLY_DTYPE_I64))
        return k_error(kc, "data must be an int32 or int64 tensor of rank 1 or 2");
    const int64_t *counts, *idx, *pool;
    const double *w;
    uint32_t n_counts = k_ints(kc, "ngram_counts", &counts);
    uint32_t n_idx = k_ints(kc, "ngram_indexes", &idx);
    uint32_t n_pool = k_ints(kc, "pool", &pool);
    uint32_t n_w = k_floats(kc, "weights", &w);
    int64_t lo = k_int(kc, "min_gram_length"), hi = k_int(kc, "max_gram_length");
    int64_t max_skip = k_int(kc, "max_skip_count");
    const char *mode = k_str(kc, "mode");
    bool idf = strcmp(mode, "IDF") == 0, weighted = idf || strcmp(mode, "TFIDF") == 0;
    /* the relation checked the lists; check again what indexing depends on */
    int64_t n_grams = 0, cols = 0;
    for (uint32_t s = 0; s < n_counts; s++) {
        int64_t start = counts[s], end = s + 1 < n_counts ? counts[s + 1] : (int64_t)n_pool;
        if (start < 0 || start > end || end > (int64_t)n_pool)
            return k_error(kc, "ngram_counts does not divide the pool");
        n_grams += (end - start) / (int64_t)(s + 1);
    }
    if (n_grams != (int64_t)n_idx || (n_w != 0 && n_w != n_idx) || max_skip < 0)
        return k_error(kc, "ngram_indexes, weights and the pool disagree");
    for (uint32_t i = 0; i < n_idx; i++) {
        if (idx[i] < 0 || idx[i] >= ((int64_t)1 << 62))
            return k_error(kc, "ngram_indexes[%u] is %lld, out of range", i, (long long)idx[i]);
        if (idx[i] >= cols) cols = idx[i] + 1;
    }
    int64_t rows = nd == 2 ? x->shape[0] : 1, c = x->shape[nd - 1], shape[2];
    shape[nd - 1] = cols;
    if (nd == 2) shape[0] = rows;
    DLTensor *y = k_out(kc, 0, RLY_DTYPE_F32, nd, shape);
    if (y == NULL || k_numel(y) == 0) return y == NULL ? -1 : 0; /* rows may be huge */
    float *out = k_ptr(y);
    if (rows > 0 && cols > 0) memset(out, 0, sizeof(float) * (size_t)(rows * cols));
    for (int64_t r = 0; r < rows; r++) {
        uint32_t gram = 0; /* the n-gram's number: its ngram_indexes and weights entry */
        for (uint32_t s = 0; s < n_counts; s++) {
            int64_t k = (int64_t)s + 1, end = s + 1 < n_counts ? counts[s + 1] : (int64_t)n_pool;
            for (int64_t p = counts[s]; p + k <= end; p += k, gram++) {
                if (k < lo || k > hi) continue;
                int64_t n = ngram_count(k_ptr(x), dt, r * c, c, pool + p, k, max_skip);
                double v = (double)n;
                if (idf) v = n > 0 ? 1 : 0;
                if (weighted && n_w > 0) v *= w[gram];
                out[r * cols + idx[gram]] += (float)v;
            }
        }
    }
    return 0;
}

const KernelDef kern_ref_misc[] = {
    {OP_ID_TRAP, trap},
    {OP_ID_ANNOTATION_STOP_FUSION, identity},
    {OP_ID_ANNOTATION_CHECKPOINT, identity},
    {OP_ID_DEBUG, identity},
    {OP_ID_DET, k_det},
    {OP_ID_TFIDF_VECTORIZER, k_tfidf},
    {0, NULL},
};
