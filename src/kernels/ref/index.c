/* index.c - reference kernels of the index operators (see src/ops/op_index.c): take, gather,
 * gather_nd, scatter_elements, scatter_nd, adv_index, the creation operators (full, zeros, ones,
 * arange, one_hot), scans (cumsum, cumprod), sorting and searching (sort, argsort, topk,
 * searchsorted), unravel_index, sequence_mask, argwhere, unique and sparse_to_dense.
 *
 * Indices follow TVM where TVM defines them (take's clip and wrap modes, scatter_elements'
 * negative indices, one_hot and sparse_to_dense ignoring indices that match nothing); where
 * TVM's kernel would read or write out of bounds, these kernels fail with "index I out of range
 * for axis A of size N". Sorting is stable, and NaN sorts above every number (last when
 * ascending, first when descending), as numpy's sort places it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"

/* ---- helpers ----------------------------------------------------------------------------------
 */

static uint32_t rank(const DLTensor *t) { return (uint32_t)t->ndim; }
static size_t esize(const DLTensor *t) { return sup_dtype_size(k_dtype(t)); }
static int64_t dim(const DLTensor *t, uint32_t d) { return t->shape[d]; }

static void shape_copy(const DLTensor *t, int64_t *out) {
    for (uint32_t d = 0; d < rank(t); d++)
        out[d] = t->shape[d];
}

/* Element i of an integer tensor as an index; uint64 values past INT64_MAX saturate. */
static int64_t load_index(const DLTensor *t, int64_t i) {
    rly_dtype dt = k_dtype(t);
    if (dt == RLY_DTYPE_U64) {
        uint64_t u = k_loadu(k_ptr(t), dt, i);
        return u > INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    return k_loadi(k_ptr(t), dt, i);
}

static int range_error(KCall *kc, int64_t v, int64_t axis, int64_t size) {
    return k_error(kc, "index %lld out of range for axis %d of size %lld", (long long)v, (int)axis,
                   (long long)size);
}

static void copy_elems(void *dst, int64_t j, const void *src, int64_t i, size_t es, int64_t n) {
    if (n > 0)
        memcpy((char *)dst + j * (int64_t)es, (const char *)src + i * (int64_t)es, (size_t)n * es);
}

static void copy_all(void *dst, const DLTensor *src) {
    copy_elems(dst, 0, k_ptr(src), 0, esize(src), k_numel(src));
}

/* Output 0 as a copy of x (its dtype, shape and elements), which the scatter-like kernels then
 * update in place. */
static DLTensor *out_copy(KCall *kc, const DLTensor *x) {
    DLTensor *o = k_out(kc, 0, k_dtype(x), rank(x), x->shape);
    if (o != NULL) copy_all(k_ptr(o), x);
    return o;
}

/* Fill n elements of dst with the element at src. */
static void fill_elems(void *dst, const void *src, size_t es, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)dst + i * (int64_t)es, src, es);
}

/* Compare element i of a with element j of b (both of dtype dt): -1, 0, 1. NaN is above every
 * number and equal to NaN. */
static int cmp_elems(const void *a, int64_t i, const void *b, int64_t j, rly_dtype dt) {
    if (sup_dtype_is_float(dt)) {
        double x = k_loadf(a, dt, i), y = k_loadf(b, dt, j);
        bool nx = isnan(x), ny = isnan(y);
        if (nx || ny) return nx && ny ? 0 : nx ? 1 : -1;
        return x < y ? -1 : x > y;
    }
    if (sup_dtype_is_int(dt)) {
        int64_t x = k_loadi(a, dt, i), y = k_loadi(b, dt, j);
        return x < y ? -1 : x > y;
    }
    uint64_t x = k_loadu(a, dt, i), y = k_loadu(b, dt, j);
    return x < y ? -1 : x > y;
}

/* Whether element i of a tensor of dtype dt is nonzero (NaN is nonzero). */
static bool nonzero(const void *p, rly_dtype dt, int64_t i) {
    if (sup_dtype_is_float(dt)) return k_loadf(p, dt, i) != 0.0;
    return k_loadi(p, dt, i) != 0;
}

/* ---- take, gather, gather_nd ------------------------------------------------------------------
 */

/* An index into an axis of size n under take's mode: clip clamps, wrap takes it modulo n (the
 * sign of n), fast requires 0 <= v < n. False (error set) when it cannot be resolved. */
static bool take_index(KCall *kc, const char *mode, int64_t v, int64_t axis, int64_t n,
                       int64_t *out) {
    if (n == 0) return range_error(kc, v, axis, n), false;
    if (strcmp(mode, "clip") == 0) {
        *out = v < 0 ? 0 : v >= n ? n - 1 : v;
    } else if (strcmp(mode, "wrap") == 0) {
        int64_t r = v % n;
        *out = r < 0 ? r + n : r;
    } else {
        if (v < 0 || v >= n) return range_error(kc, v, axis, n), false;
        *out = v;
    }
    return true;
}

static int take_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *ind = k_arg(kc, 1);
    const char *mode = k_str(kc, "mode");
    size_t es = esize(x);
    rly_dtype dt = k_dtype(x);
    if (k_is_none(kc, "axis")) { /* into the flattened data */
        int64_t shape[K_MAX_DIMS], n = k_numel(x), total = k_numel(ind);
        shape_copy(ind, shape);
        DLTensor *o = k_out(kc, 0, dt, rank(ind), shape);
        if (o == NULL) return -1;
        for (int64_t i = 0; i < total; i++) {
            int64_t k;
            if (!take_index(kc, mode, load_index(ind, i), 0, n, &k)) return -1;
            copy_elems(k_ptr(o), i, k_ptr(x), k, es, 1);
        }
        return 0;
    }
    uint32_t nd = rank(x), ni = rank(ind);
    int64_t axis, bd = k_int(kc, "batch_dims");
    if (!k_axis(k_int(kc, "axis"), nd, &axis))
        return k_error(kc, "axis %lld is out of range for rank %u", (long long)k_int(kc, "axis"),
                       nd);
    if (bd < 0) bd += ni;
    if (bd < 0 || bd > (int64_t)ni || bd > axis)
        return k_error(kc, "batch_dims %lld is out of range", (long long)k_int(kc, "batch_dims"));
    for (int64_t i = 0; i < bd; i++)
        if (dim(x, (uint32_t)i) != dim(ind, (uint32_t)i))
            return k_error(kc, "data and indices differ in batch dimension %lld", (long long)i);
    int64_t shape[K_MAX_DIMS];
    uint32_t n = 0;
    if (nd - 1 + ni - (uint32_t)bd > K_MAX_DIMS)
        return k_error(kc, "the result rank exceeds %d", K_MAX_DIMS);
    for (int64_t i = 0; i < axis; i++)
        shape[n++] = dim(x, (uint32_t)i);
    for (uint32_t i = (uint32_t)bd; i < ni; i++)
        shape[n++] = dim(ind, i);
    for (uint32_t i = (uint32_t)axis + 1; i < nd; i++)
        shape[n++] = dim(x, i);
    DLTensor *o = k_out(kc, 0, dt, n, shape);
    if (o == NULL) return -1;
    /* data (B, P, A, Q) and indices (B, J): out (B, P, J, Q) */
    int64_t nb = k_shape_numel((uint32_t)bd, x->shape);
    int64_t np = k_shape_numel((uint32_t)(axis - bd), x->shape + bd);
    int64_t na = dim(x, (uint32_t)axis);
    int64_t nq = k_shape_numel(nd - (uint32_t)axis - 1, x->shape + axis + 1);
    int64_t nj = k_shape_numel(ni - (uint32_t)bd, ind->shape + bd);
    /* An empty result: the indices are still checked (as the loop below would, once per p)
     * without walking the other dims, which may be huge. */
    if (k_numel(o) == 0) {
        for (int64_t i = 0; i < k_numel(ind) && np > 0; i++) {
            int64_t k;
            if (!take_index(kc, mode, load_index(ind, i), axis, na, &k)) return -1;
        }
        return 0;
    }
    for (int64_t b = 0; b < nb; b++)
        for (int64_t p = 0; p < np; p++)
            for (int64_t j = 0; j < nj; j++) {
                int64_t k;
                if (!take_index(kc, mode, load_index(ind, b * nj + j), axis, na, &k)) return -1;
                copy_elems(k_ptr(o), ((b * np + p) * nj + j) * nq, k_ptr(x),
                           ((b * np + p) * na + k) * nq, es, nq);
            }
    return 0;
}

static int gather_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *ind = k_arg(kc, 1);
    uint32_t n = rank(x);
    int64_t axis;
    if (k_is_none(kc, "axis") || !k_axis(k_int(kc, "axis"), n, &axis))
        return k_error(kc, "axis is missing or out of range for rank %u", n);
    if (rank(ind) != n) return k_error(kc, "data and indices must have one rank");
    for (uint32_t d = 0; d < n; d++)
        if (d != axis && dim(ind, d) > dim(x, d))
            return k_error(kc, "indices dimension %u (%lld) exceeds data's (%lld)", d,
                           (long long)dim(ind, d), (long long)dim(x, d));
    int64_t shape[K_MAX_DIMS], st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0};
    shape_copy(ind, shape);
    k_strides(n, x->shape, st);
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    int64_t total = k_numel(ind), na = dim(x, (uint32_t)axis);
    for (int64_t i = 0; i < total; i++) {
        int64_t v = load_index(ind, i), off = 0;
        if (v < 0 || v >= na) return range_error(kc, v, axis, na);
        for (uint32_t d = 0; d < n; d++)
            off += (d == axis ? v : idx[d]) * st[d];
        copy_elems(k_ptr(o), i, k_ptr(x), off, esize(x), 1);
        k_next(idx, n, shape);
    }
    return 0;
}

static int gather_nd_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *ind = k_arg(kc, 1);
    uint32_t nd = rank(x), ni = rank(ind);
    if (ni == 0) return k_error(kc, "indices must have rank at least 1");
    int64_t m = dim(ind, 0), bd = k_int(kc, "batch_dims");
    if (!k_is_none(kc, "index_rank") && k_int(kc, "index_rank") != m)
        return k_error(kc, "index_rank is %lld but indices has %lld rows",
                       (long long)k_int(kc, "index_rank"), (long long)m);
    if (bd < 0 || bd > (int64_t)ni - 1 || m + bd > (int64_t)nd)
        return k_error(kc, "batch_dims %lld and %lld index rows do not fit data of rank %u",
                       (long long)bd, (long long)m, nd);
    for (int64_t i = 0; i < bd; i++)
        if (dim(x, (uint32_t)i) != dim(ind, (uint32_t)i + 1))
            return k_error(kc, "data and indices differ in batch dimension %lld", (long long)i);
    int64_t shape[K_MAX_DIMS];
    uint32_t n = 0;
    if (ni - 1 + nd - (uint32_t)(bd + m) > K_MAX_DIMS)
        return k_error(kc, "the result rank exceeds %d", K_MAX_DIMS);
    for (uint32_t i = 1; i < ni; i++)
        shape[n++] = dim(ind, i);
    for (uint32_t i = (uint32_t)(bd + m); i < nd; i++)
        shape[n++] = dim(x, i);
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    /* indices (M, B, Y), data (B, X_0..X_{M-1}, Z): out (B, Y, Z) */
    int64_t ny = k_shape_numel(ni - 1 - (uint32_t)bd, ind->shape + 1 + bd);
    int64_t nby = k_shape_numel(ni - 1, ind->shape + 1);
    int64_t nz = k_shape_numel(nd - (uint32_t)(bd + m), x->shape + bd + m);
    int64_t nx = k_shape_numel((uint32_t)m, x->shape + bd);
    if (k_numel(o) == 0) { /* the indices are still checked; the other dims may be huge */
        for (int64_t i = 0; i < k_numel(ind); i++) {
            int64_t r = i / nby, v = load_index(ind, i), size = dim(x, (uint32_t)(bd + r));
            if (v < 0 || v >= size) return range_error(kc, v, bd + r, size);
        }
        return 0;
    }
    for (int64_t by = 0; by < nby; by++) {
        int64_t b = ny ? by / ny : 0, off = 0;
        for (int64_t r = 0; r < m; r++) {
            int64_t v = load_index(ind, r * nby + by), size = dim(x, (uint32_t)(bd + r));
            if (v < 0 || v >= size) return range_error(kc, v, bd + r, size);
            off = off * size + v;
        }
        copy_elems(k_ptr(o), by * nz, k_ptr(x), (b * nx + off) * nz, esize(x), nz);
    }
    return 0;
}

/* ---- scatter_elements, scatter_nd --------------------------------------------------------------
 */

typedef enum Reduce { RED_UPDATE, RED_ADD, RED_MUL, RED_MEAN, RED_MIN, RED_MAX } Reduce;

static bool parse_reduce(const char *s, Reduce *r) {
    static const char *const names[] = {"update", "add", "mul", "mean", "min", "max"};
    for (int i = 0; i < 6; i++)
        if (strcmp(s, names[i]) == 0) {
            *r = (Reduce)i;
            return true;
        }
    return false;
}

/* (a + b) / 2 truncated toward zero, without overflow. */
static int64_t mean_trunc(int64_t a, int64_t b) {
    int64_t q = a / 2 + b / 2, r = a % 2 + b % 2;
    if (r == 2 || (r == 1 && q < 0)) return q + 1;
    if (r == -2 || (r == -1 && q > 0)) return q - 1;
    return q;
}

/* out[o] = f(out[o], upd[u]) in dtype dt. Integers wrap; min and max propagate NaN; mean is
 * TVM's running (out + upd) / 2, truncated toward zero for integers. */
static void reduce_into(void *out, int64_t o, const void *upd, int64_t u, rly_dtype dt, Reduce r) {
    if (r == RED_UPDATE) {
        size_t es = sup_dtype_size(dt);
        memcpy((char *)out + o * (int64_t)es, (const char *)upd + u * (int64_t)es, es);
        return;
    }
    if (sup_dtype_is_float(dt)) {
        double a = k_loadf(out, dt, o), b = k_loadf(upd, dt, u), v;
        switch (r) {
        case RED_ADD: v = a + b; break;
        case RED_MUL: v = a * b; break;
        case RED_MEAN: v = (a + b) / 2; break;
        case RED_MIN: v = isnan(a) || isnan(b) ? NAN : a < b ? a : b; break;
        default: v = isnan(a) || isnan(b) ? NAN : a > b ? a : b; break;
        }
        k_storef(out, dt, o, v);
        return;
    }
    int c = cmp_elems(out, o, upd, u, dt);
    uint64_t a = k_loadu(out, dt, o), b = k_loadu(upd, dt, u);
    switch (r) {
    case RED_ADD: k_storeu(out, dt, o, a + b); break;
    case RED_MUL: k_storeu(out, dt, o, a * b); break;
    case RED_MIN: k_storeu(out, dt, o, c <= 0 ? a : b); break;
    case RED_MAX: k_storeu(out, dt, o, c >= 0 ? a : b); break;
    default:
        if (sup_dtype_is_int(dt) || dt == RLY_DTYPE_BOOL)
            k_storei(out, dt, o, mean_trunc(k_loadi(out, dt, o), k_loadi(upd, dt, u)));
        else
            k_storeu(out, dt, o, a / 2 + b / 2 + (a % 2 + b % 2) / 2);
        break;
    }
}

static int scatter_elements_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *ind = k_arg(kc, 1), *upd = k_arg(kc, 2);
    uint32_t n = rank(x);
    int64_t axis;
    Reduce red;
    if (!k_axis(k_int(kc, "axis"), n, &axis))
        return k_error(kc, "axis %lld is out of range for rank %u", (long long)k_int(kc, "axis"),
                       n);
    if (!parse_reduce(k_str(kc, "reduction"), &red))
        return k_error(kc, "unknown reduction \"%s\"", k_str(kc, "reduction"));
    if (rank(ind) != n || !k_same_shape(ind, upd) || k_dtype(upd) != k_dtype(x))
        return k_error(kc, "indices and updates must have data's rank and one shape");
    for (uint32_t d = 0; d < n; d++)
        if (d != axis && dim(ind, d) > dim(x, d))
            return k_error(kc, "indices dimension %u (%lld) exceeds data's (%lld)", d,
                           (long long)dim(ind, d), (long long)dim(x, d));
    int64_t shape[K_MAX_DIMS], st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0}, ishape[K_MAX_DIMS];
    shape_copy(x, shape);
    shape_copy(ind, ishape);
    k_strides(n, shape, st);
    rly_dtype dt = k_dtype(x);
    DLTensor *o = out_copy(kc, x);
    if (o == NULL) return -1;
    int64_t total = k_numel(ind), na = shape[axis];
    for (int64_t i = 0; i < total; i++) {
        int64_t v = load_index(ind, i), off = 0;
        int64_t w = v < 0 ? v + na : v; /* TVM shifts negative indices by the axis size */
        if (w < 0 || w >= na) return range_error(kc, v, axis, na);
        for (uint32_t d = 0; d < n; d++)
            off += (d == axis ? w : idx[d]) * st[d];
        reduce_into(k_ptr(o), off, k_ptr(upd), i, dt, red);
        k_next(idx, n, ishape);
    }
    return 0;
}

static int scatter_nd_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *ind = k_arg(kc, 1), *upd = k_arg(kc, 2);
    uint32_t nd = rank(x), ni = rank(ind);
    Reduce red;
    if (!parse_reduce(k_str(kc, "mode"), &red) || red == RED_MEAN)
        return k_error(kc, "unknown mode \"%s\"", k_str(kc, "mode"));
    if (ni == 0) return k_error(kc, "indices must have rank at least 1");
    int64_t m = dim(ind, 0);
    if (m > (int64_t)nd)
        return k_error(kc, "indices address %lld dimensions of a rank %u tensor", (long long)m, nd);
    /* indices (M, Y...), data (X_0..X_{M-1}, Z...), updates (Y..., Z...) */
    uint32_t ny_dims = ni - 1, nz_dims = nd - (uint32_t)m;
    bool ok = rank(upd) == ny_dims + nz_dims && k_dtype(upd) == k_dtype(x);
    for (uint32_t i = 0; ok && i < ny_dims; i++)
        ok = dim(upd, i) == dim(ind, i + 1);
    for (uint32_t i = 0; ok && i < nz_dims; i++)
        ok = dim(upd, ny_dims + i) == dim(x, (uint32_t)m + i);
    if (!ok) return k_error(kc, "updates must have shape indices.shape[1:] + data.shape[M:]");
    int64_t shape[K_MAX_DIMS];
    shape_copy(x, shape);
    rly_dtype dt = k_dtype(x);
    DLTensor *o = out_copy(kc, x);
    if (o == NULL) return -1;
    if (k_numel(upd) == 0) return 0; /* no update; the index rows may be huge in number */
    int64_t ny = k_shape_numel(ny_dims, ind->shape + 1), nz = k_shape_numel(nz_dims, shape + m);
    for (int64_t y = 0; y < ny; y++) {
        int64_t off = 0;
        for (int64_t r = 0; r < m; r++) {
            int64_t v = load_index(ind, r * ny + y);
            if (v < 0 || v >= shape[r]) return range_error(kc, v, r, shape[r]);
            off = off * shape[r] + v;
        }
        for (int64_t z = 0; z < nz; z++)
            reduce_into(k_ptr(o), off * nz + z, k_ptr(upd), y * nz + z, dt, red);
    }
    return 0;
}

/* ---- adv_index ------------------------------------------------------------------------------ */

/* data[idx_0, ..., idx_{k-1}] as numpy: the index tensors broadcast together, negative indices
 * count from the end. */
static int adv_index_ref(KCall *kc) {
    uint32_t nf = kc->arg_len[0];
    if (nf == 0) return k_error(kc, "the tuple must hold the data tensor, then index tensors");
    const DLTensor *x = k_field(kc, 0, 0);
    uint32_t k = nf - 1, nd = rank(x), nb = 0;
    if (k > nd) return k_error(kc, "%u index tensors for a rank %u tensor", k, nd);
    int64_t bshape[K_MAX_DIMS];
    for (uint32_t i = 1; i < nf; i++) {
        const DLTensor *t = k_field(kc, 0, i);
        DLTensor b = {.ndim = (int32_t)nb, .shape = bshape};
        int64_t tmp[K_MAX_DIMS];
        uint32_t nt;
        if (!k_bcast_shape(&b, t, &nt, tmp))
            return k_error(kc, "index %u does not broadcast with the others", i - 1);
        memcpy(bshape, tmp, nt * sizeof(int64_t));
        nb = nt;
    }
    if (nb + nd - k > K_MAX_DIMS) return k_error(kc, "the result rank exceeds %d", K_MAX_DIMS);
    int64_t shape[K_MAX_DIMS], st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0};
    memcpy(shape, bshape, nb * sizeof(int64_t));
    for (uint32_t i = k; i < nd; i++)
        shape[nb + i - k] = dim(x, i);
    k_strides(nd, x->shape, st);
    DLTensor *o = k_out(kc, 0, k_dtype(x), nb + nd - k, shape);
    if (o == NULL) return -1;
    /* An empty result: the indices are still checked when their broadcast is not empty (it
     * reads each of them), without walking the broadcast, which may be huge. */
    if (k_numel(o) == 0) {
        for (uint32_t i = 0; i < k && k_shape_numel(nb, bshape) > 0; i++) {
            const DLTensor *t = k_field(kc, 0, i + 1);
            for (int64_t j = 0, size = dim(x, i); j < k_numel(t); j++) {
                int64_t v = load_index(t, j), w = v < 0 ? v + size : v;
                if (w < 0 || w >= size) return range_error(kc, v, i, size);
            }
        }
        return 0;
    }
    int64_t(*ist)[K_MAX_DIMS] = k_scratch_n(kc, k, sizeof *ist);
    if (ist == NULL) return -1;
    for (uint32_t i = 0; i < k; i++)
        k_bcast_strides(k_field(kc, 0, i + 1), nb, bshape, ist[i]);
    int64_t total = k_shape_numel(nb, bshape), rest = k_shape_numel(nd - k, x->shape + k);
    for (int64_t p = 0; p < total; p++) {
        int64_t off = 0;
        for (uint32_t i = 0; i < k; i++) {
            int64_t at = 0, size = dim(x, i);
            for (uint32_t d = 0; d < nb; d++)
                at += idx[d] * ist[i][d];
            int64_t v = load_index(k_field(kc, 0, i + 1), at), w = v < 0 ? v + size : v;
            if (w < 0 || w >= size) return range_error(kc, v, i, size);
            off += w * st[i];
        }
        copy_elems(k_ptr(o), p * rest, k_ptr(x), off, esize(x), rest);
        k_next(idx, nb, bshape);
    }
    return 0;
}

/* ---- creation: full, full_like, zeros, ones, arange, one_hot -------------------------------- */

/* Output 0 of dtype dt and the given shape, every element the value of element 0 of v. */
static int fill_with(KCall *kc, rly_dtype dt, uint32_t n, const int64_t *shape, const DLTensor *v) {
    DLTensor *o = k_out(kc, 0, dt, n, shape);
    if (o == NULL) return -1;
    int64_t total = k_shape_numel(n, shape);
    if (total == 0) return 0;
    if (k_numel(v) != 1) return k_error(kc, "fill_value must be a scalar");
    uint64_t cell = 0; /* the value converted to dt */
    k_convert(&cell, dt, 0, k_ptr(v), k_dtype(v), 0);
    fill_elems(k_ptr(o), &cell, sup_dtype_size(dt), total);
    return 0;
}

/* The result dtype: attribute "dtype", or `dflt` when it is "". */
static rly_dtype dtype_attr(KCall *kc, rly_dtype dflt) {
    int64_t dt = k_int(kc, "dtype");
    return dt < 0 || dt >= RLY_DTYPE_COUNT ? dflt : (rly_dtype)dt;
}

static int full_ref(KCall *kc) {
    const DLTensor *v = k_arg(kc, 0);
    const int64_t *shape;
    uint32_t n = k_ints(kc, "shape", &shape);
    for (uint32_t i = 0; i < n; i++)
        if (shape[i] < 0) return k_error(kc, "shape has a negative size");
    return fill_with(kc, dtype_attr(kc, k_dtype(v)), n, shape, v);
}

static int full_like_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t shape[K_MAX_DIMS];
    shape_copy(x, shape);
    return fill_with(kc, k_dtype(x), rank(x), shape, k_arg(kc, 1));
}

static int init_with(KCall *kc, double value) {
    const int64_t *shape;
    uint32_t n = k_ints(kc, "shape", &shape);
    int64_t dt = k_int(kc, "dtype");
    if (dt < 0 || dt >= RLY_DTYPE_COUNT) return k_error(kc, "attribute dtype names no dtype");
    for (uint32_t i = 0; i < n; i++)
        if (shape[i] < 0) return k_error(kc, "shape has a negative size");
    DLTensor *o = k_out(kc, 0, (rly_dtype)dt, n, shape);
    if (o == NULL) return -1;
    int64_t total = k_shape_numel(n, shape);
    if (total == 0) return 0;
    uint64_t cell = 0;
    k_storef(&cell, (rly_dtype)dt, 0, value);
    fill_elems(k_ptr(o), &cell, sup_dtype_size((rly_dtype)dt), total);
    return 0;
}

static int zeros_ref(KCall *kc) { return init_with(kc, 0.0); }
static int ones_ref(KCall *kc) { return init_with(kc, 1.0); }

#define ARANGE_MAX ((int64_t)1 << 40) /* more elements than any memory holds */

/* [start, stop) by step: ceil((stop - start) / step) elements start + i * step, computed in
 * double for floats and exactly (modulo 2^64, then wrapped to the dtype) for integers. */
static int arange_ref(KCall *kc) {
    const DLTensor *t0 = k_arg(kc, 0), *t1 = k_arg(kc, 1), *t2 = k_arg(kc, 2);
    if (k_numel(t0) != 1 || k_numel(t1) != 1 || k_numel(t2) != 1)
        return k_error(kc, "start, stop and step must be scalars");
    rly_dtype dt = dtype_attr(kc, k_dtype(t0));
    int64_t len = 0;
    double fs = 0, fstep = 0;
    int64_t is = 0, istep = 0;
    bool fl = sup_dtype_is_float(dt) || sup_dtype_is_float(k_dtype(t0));
    if (fl) {
        fs = k_loadf(k_ptr(t0), k_dtype(t0), 0), fstep = k_loadf(k_ptr(t2), k_dtype(t2), 0);
        double stop = k_loadf(k_ptr(t1), k_dtype(t1), 0);
        if (fstep == 0) return k_error(kc, "step must not be zero");
        double n = ceil((stop - fs) / fstep);
        if (isnan(n)) return k_error(kc, "start, stop or step is not a number");
        if (n > (double)ARANGE_MAX) return k_error(kc, "arange would have %g elements", n);
        len = n > 0 ? (int64_t)n : 0;
    } else {
        is = load_index(t0, 0), istep = load_index(t2, 0);
        int64_t stop = load_index(t1, 0);
        if (istep == 0) return k_error(kc, "step must not be zero");
        uint64_t span = 0, mag = 0;
        if (istep > 0 && stop > is) span = (uint64_t)stop - (uint64_t)is, mag = (uint64_t)istep;
        if (istep < 0 && stop < is)
            span = (uint64_t)is - (uint64_t)stop, mag = (uint64_t)0 - (uint64_t)istep;
        uint64_t n = span ? (span - 1) / mag + 1 : 0;
        if (n > (uint64_t)ARANGE_MAX)
            return k_error(kc, "arange would have %llu elements", (unsigned long long)n);
        len = (int64_t)n;
    }
    DLTensor *o = k_out(kc, 0, dt, 1, &len);
    if (o == NULL) return -1;
    for (int64_t i = 0; i < len; i++) {
        if (fl)
            k_storef(k_ptr(o), dt, i, fs + (double)i * fstep);
        else
            k_storeu(k_ptr(o), dt, i, (uint64_t)is + (uint64_t)i * (uint64_t)istep);
    }
    return 0;
}

/* One-hot: out[..., d, ...] = indices[...] == d ? on : off; an index outside [0, depth) matches
 * nothing, as in TVM. */
static int one_hot_ref(KCall *kc) {
    const DLTensor *ind = k_arg(kc, 0), *on = k_arg(kc, 1), *off = k_arg(kc, 2);
    uint32_t n = rank(ind);
    int64_t depth = k_int(kc, "depth"), axis;
    if (depth < 1) return k_error(kc, "depth must be positive, got %lld", (long long)depth);
    if (n + 1 > K_MAX_DIMS || !k_axis(k_int(kc, "axis"), n + 1, &axis))
        return k_error(kc, "axis %lld is out of range for rank %u", (long long)k_int(kc, "axis"),
                       n + 1);
    if (k_numel(on) != 1 || k_numel(off) != 1)
        return k_error(kc, "on_value and off_value must be scalars");
    rly_dtype dt = dtype_attr(kc, k_dtype(on)), id = k_dtype(ind);
    int64_t shape[K_MAX_DIMS];
    for (uint32_t i = 0, j = 0; i <= n; i++)
        shape[i] = i == axis ? depth : dim(ind, j++);
    DLTensor *o = k_out(kc, 0, dt, n + 1, shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* dims may be huge */
    uint64_t von = 0, voff = 0; /* the two values converted to dt */
    k_convert(&von, dt, 0, k_ptr(on), k_dtype(on), 0);
    k_convert(&voff, dt, 0, k_ptr(off), k_dtype(off), 0);
    int64_t outer = k_shape_numel((uint32_t)axis, shape);
    int64_t inner = k_shape_numel(n - (uint32_t)axis, ind->shape + axis);
    size_t es = sup_dtype_size(dt);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t d = 0; d < depth; d++)
            for (int64_t b = 0; b < inner; b++) {
                int64_t i = a * inner + b;
                bool hit = sup_dtype_is_float(id) ? k_loadf(k_ptr(ind), id, i) == (double)d
                                                  : load_index(ind, i) == d;
                memcpy((char *)k_ptr(o) + ((a * depth + d) * inner + b) * (int64_t)es,
                       hit ? (const void *)&von : (const void *)&voff, es);
            }
    return 0;
}

/* ---- scans: cumsum, cumprod -------------------------------------------------------------------
 */

/* Each element is first converted to the result dtype, then accumulated in it: floats round to
 * the dtype after every step, integers wrap. */
static int scan(KCall *kc, bool prod) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype sd = k_dtype(x), dt = dtype_attr(kc, sd);
    bool exclusive = k_bool(kc, "exclusive");
    int64_t shape[K_MAX_DIMS], outer, len, inner;
    uint32_t n = rank(x);
    if (k_is_none(kc, "axis")) {
        shape[0] = k_numel(x);
        n = 1;
        outer = inner = 1, len = shape[0];
    } else {
        int64_t axis;
        if (!k_axis(k_int(kc, "axis"), n, &axis))
            return k_error(kc, "axis %lld is out of range for rank %u",
                           (long long)k_int(kc, "axis"), n);
        shape_copy(x, shape);
        outer = k_shape_numel((uint32_t)axis, shape), len = shape[axis];
        inner = k_shape_numel(n - (uint32_t)axis - 1, shape + axis + 1);
    }
    DLTensor *o = k_out(kc, 0, dt, n, shape);
    if (o == NULL) return -1;
    if (k_numel(o) == 0) return 0; /* outer or inner may still be huge */
    bool fl = sup_dtype_is_float(dt);
    void *y = k_ptr(o);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t b = 0; b < inner; b++) {
            double accf = prod ? 1 : 0;
            uint64_t acci = prod ? 1 : 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t i = (a * len + j) * inner + b;
                uint64_t cell = 0; /* element i converted to dt */
                k_convert(&cell, dt, 0, k_ptr(x), sd, i);
                if (exclusive) {
                    if (fl)
                        k_storef(y, dt, i, accf);
                    else
                        k_storeu(y, dt, i, acci);
                }
                if (fl) {
                    double v = k_loadf(&cell, dt, 0);
                    accf = prod ? accf * v : accf + v;
                    uint64_t r = 0; /* round to the dtype */
                    k_storef(&r, dt, 0, accf);
                    accf = k_loadf(&r, dt, 0);
                } else {
                    uint64_t v = k_loadu(&cell, dt, 0);
                    acci = prod ? acci * v : acci + v;
                    if (dt == RLY_DTYPE_BOOL) acci = acci != 0;
                }
                if (!exclusive) {
                    if (fl)
                        k_storef(y, dt, i, accf);
                    else
                        k_storeu(y, dt, i, acci);
                }
            }
        }
    return 0;
}

static int cumsum_ref(KCall *kc) { return scan(kc, false); }
static int cumprod_ref(KCall *kc) { return scan(kc, true); }

/* ---- sort, argsort, topk, searchsorted --------------------------------------------------------
 */

/* Sort the positions p[0..n) of elements of base (dtype dt) stably: ascending, or descending with
 * ties still in position order. */
typedef struct SortKey {
    const void *base;
    rly_dtype dt;
    bool desc;
} SortKey;

static bool before(const SortKey *k, int64_t a, int64_t b) {
    int c = cmp_elems(k->base, a, k->base, b, k->dt);
    return k->desc ? c > 0 : c < 0;
}

static void merge_sort(const SortKey *k, int64_t *p, int64_t *tmp, int64_t n) {
    if (n < 2) return;
    int64_t h = n / 2;
    merge_sort(k, p, tmp, h);
    merge_sort(k, p + h, tmp, n - h);
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n)
        tmp[o++] = before(k, p[j], p[i]) ? p[j++] : p[i++];
    while (i < h)
        tmp[o++] = p[i++];
    while (j < n)
        tmp[o++] = p[j++];
    memcpy(p, tmp, (size_t)n * sizeof *p);
}

/* Sort every row of x along axis; for each row call out(row start, stride, sorted positions). */
typedef struct SortRows {
    int64_t outer, len, inner;
    int64_t *pos, *tmp; /* len each; pos holds element offsets into x */
} SortRows;

static bool sort_rows_init(KCall *kc, const DLTensor *x, int64_t axis, SortRows *s) {
    s->outer = k_shape_numel((uint32_t)axis, x->shape);
    s->len = dim(x, (uint32_t)axis);
    s->inner = k_shape_numel(rank(x) - (uint32_t)axis - 1, x->shape + axis + 1);
    s->pos = k_scratch_n(kc, 2 * s->len, sizeof(int64_t)); /* released by the caller */
    if (s->pos == NULL) return false;
    s->tmp = s->pos + s->len;
    return true;
}

/* Sort row r (0 <= r < outer * inner): s->pos gets the element offsets in sorted order. */
static void sort_row(const SortRows *s, const SortKey *k, int64_t r) {
    int64_t a = r / s->inner, b = r % s->inner;
    for (int64_t j = 0; j < s->len; j++)
        s->pos[j] = (a * s->len + j) * s->inner + b;
    merge_sort(k, s->pos, s->tmp, s->len);
}

static int sort_axis(KCall *kc, const DLTensor *x, int64_t *axis) {
    if (!k_axis(k_int(kc, "axis"), rank(x), axis))
        return k_error(kc, "axis %lld is out of range for rank %u", (long long)k_int(kc, "axis"),
                       rank(x));
    return 0;
}

/* The position along the axis of element offset p. */
static int64_t axis_pos(const SortRows *s, int64_t p) { return (p / s->inner) % s->len; }

/* Sorts every row of x along axis (ascending unless is_ascend is false) and writes the first k
 * of each row: the values into ov and their positions along the axis into oi (either may be
 * NULL), both of x's shape with k on the axis. */
static int sort_write(KCall *kc, const DLTensor *x, int64_t axis, int64_t k, DLTensor *ov,
                      DLTensor *oi) {
    SortRows s;
    if (k_numel(x) == 0) return 0; /* no rows to sort (their count or length may be huge) */
    if (!sort_rows_init(kc, x, axis, &s)) return -1;
    SortKey key = {k_ptr(x), k_dtype(x), !k_bool(kc, "is_ascend")};
    for (int64_t r = 0, rows = sup_dim_mul_sat(s.outer, s.inner); r < rows; r++) {
        sort_row(&s, &key, r);
        int64_t a = r / s.inner, b = r % s.inner;
        for (int64_t j = 0; j < k; j++) {
            int64_t at = (a * k + j) * s.inner + b;
            if (ov) copy_elems(k_ptr(ov), at, k_ptr(x), s.pos[j], esize(x), 1);
            if (oi) k_storei(k_ptr(oi), k_dtype(oi), at, axis_pos(&s, s.pos[j]));
        }
    }
    return 0;
}

static int sort_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t axis;
    if (sort_axis(kc, x, &axis) != 0) return -1;
    DLTensor *o = k_out(kc, 0, k_dtype(x), rank(x), x->shape);
    return o == NULL ? -1 : sort_write(kc, x, axis, dim(x, (uint32_t)axis), o, NULL);
}

static int argsort_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t axis;
    if (sort_axis(kc, x, &axis) != 0) return -1;
    DLTensor *o = k_out(kc, 0, dtype_attr(kc, RLY_DTYPE_I32), rank(x), x->shape);
    return o == NULL ? -1 : sort_write(kc, x, axis, dim(x, (uint32_t)axis), NULL, o);
}

static int topk_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t axis, shape[K_MAX_DIMS];
    if (sort_axis(kc, x, &axis) != 0) return -1;
    const char *ret = k_str(kc, "ret_type");
    bool want_v = strcmp(ret, "indices") != 0, want_i = strcmp(ret, "values") != 0;
    uint32_t n_out = (uint32_t)want_v + (uint32_t)want_i;
    if (kc->n_out != n_out)
        return k_error(kc, "ret_type \"%s\" makes %u results but the caller expects %u", ret, n_out,
                       kc->n_out);
    shape_copy(x, shape);
    int64_t len = shape[axis], k = k_is_none(kc, "k") ? 0 : k_int(kc, "k");
    if (k < 1) k = len;
    if (k > len)
        return k_error(kc, "k=%lld is larger than axis %lld of size %lld", (long long)k,
                       (long long)axis, (long long)len);
    shape[axis] = k;
    DLTensor *ov = want_v ? k_out(kc, 0, k_dtype(x), rank(x), shape) : NULL;
    DLTensor *oi =
        want_i ? k_out(kc, want_v ? 1 : 0, dtype_attr(kc, RLY_DTYPE_I32), rank(x), shape) : NULL;
    if ((want_v && ov == NULL) || (want_i && oi == NULL)) return -1;
    return sort_write(kc, x, axis, k, ov, oi);
}

/* For each value, the insertion point into its row of sorted_sequence: the first i with
 * seq[i] >= v (left) or seq[i] > v (right), as numpy.searchsorted. */
static int searchsorted_ref(KCall *kc) {
    const DLTensor *seq = k_arg(kc, 0), *val = k_arg(kc, 1);
    uint32_t ns = rank(seq), nv = rank(val);
    bool right = k_bool(kc, "right");
    rly_dtype dt = dtype_attr(kc, RLY_DTYPE_I32), sd = k_dtype(seq);
    if (ns == 0 || nv == 0 || k_dtype(val) != sd)
        return k_error(kc, "sorted_sequence and values must be tensors of one dtype");
    if (ns > 1) {
        bool ok = ns == nv;
        for (uint32_t i = 0; ok && i + 1 < ns; i++)
            ok = dim(seq, i) == dim(val, i);
        if (!ok) return k_error(kc, "sorted_sequence and values differ in their leading dims");
    }
    int64_t shape[K_MAX_DIMS];
    shape_copy(val, shape);
    DLTensor *o = k_out(kc, 0, dt, nv, shape);
    if (o == NULL) return -1;
    int64_t n = dim(seq, ns - 1), m = dim(val, nv - 1), total = k_numel(val);
    for (int64_t i = 0; i < total; i++) {
        int64_t row = ns > 1 ? (i / m) * n : 0, lo = 0, hi = n;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            int c = cmp_elems(k_ptr(seq), row + mid, k_ptr(val), i, sd);
            if (right ? c <= 0 : c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        k_storei(k_ptr(o), dt, i, lo);
    }
    return 0;
}

/* ---- unravel_index, sequence_mask, argwhere, unique, sparse_to_dense ------------------------- */

static int unravel_index_ref(KCall *kc) {
    const DLTensor *ind = k_arg(kc, 0), *sh = k_arg(kc, 1);
    if (rank(ind) > 1 || rank(sh) != 1)
        return k_error(kc, "indices must be a scalar or 1-D and shape 1-D");
    int64_t s = dim(sh, 0), n = rank(ind) ? dim(ind, 0) : 1, prod = 1;
    for (int64_t j = 0; j < s; j++) {
        int64_t d = load_index(sh, j);
        if (d <= 0) return k_error(kc, "shape has a non-positive size %lld", (long long)d);
        prod = prod > INT64_MAX / d ? INT64_MAX : prod * d;
    }
    int64_t shape[2] = {s, n};
    rly_dtype dt = k_dtype(ind);
    DLTensor *o = k_out(kc, 0, dt, 1 + rank(ind), shape);
    if (o == NULL) return -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = load_index(ind, i);
        if (v < 0 || v >= prod) return range_error(kc, v, 0, prod);
        for (int64_t j = s; j-- > 0;) {
            int64_t d = load_index(sh, j);
            k_storei(k_ptr(o), dt, j * n + i, v % d);
            v /= d;
        }
    }
    return 0;
}

static int sequence_mask_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *len = k_arg(kc, 1);
    int64_t axis = k_int(kc, "axis");
    uint32_t n = rank(x);
    if ((axis != 0 && axis != 1) || n < 2)
        return k_error(kc, "axis must be 0 or 1 and data of rank 2 or more");
    int64_t nb = dim(x, (uint32_t)(1 - axis));
    if (rank(len) != 1 || dim(len, 0) != nb)
        return k_error(kc, "valid_length must have one entry per batch element (%lld)",
                       (long long)nb);
    int64_t shape[K_MAX_DIMS];
    shape_copy(x, shape);
    rly_dtype dt = k_dtype(x);
    DLTensor *o = out_copy(kc, x);
    if (o == NULL) return -1;
    if (k_numel(o) == 0) return 0; /* the batch and time dims may be huge */
    int64_t inner = k_shape_numel(n - 2, shape + 2);
    double mask = k_float(kc, "mask_value");
    for (int64_t a = 0; a < shape[0]; a++)
        for (int64_t b = 0; b < shape[1]; b++) {
            int64_t t = axis == 0 ? a : b, bi = axis == 0 ? b : a;
            if (t < load_index(len, bi)) continue;
            for (int64_t i = 0; i < inner; i++)
                k_storef(k_ptr(o), dt, (a * shape[1] + b) * inner + i, mask);
        }
    return 0;
}

static int argwhere_ref(KCall *kc) {
    const DLTensor *c = k_arg(kc, 0);
    uint32_t n = rank(c);
    rly_dtype cd = k_dtype(c);
    int64_t total = k_numel(c), count = 0;
    for (int64_t i = 0; i < total; i++)
        count += nonzero(k_ptr(c), cd, i);
    int64_t shape[2] = {count, n}, idx[K_MAX_DIMS] = {0}, cshape[K_MAX_DIMS];
    shape_copy(c, cshape);
    DLTensor *o = k_out(kc, 0, RLY_DTYPE_I32, 2, shape);
    if (o == NULL) return -1;
    int64_t r = 0;
    for (int64_t i = 0; i < total; i++) {
        if (nonzero(k_ptr(c), cd, i)) {
            for (uint32_t d = 0; d < n; d++)
                k_storei(k_ptr(o), RLY_DTYPE_I32, r * n + d, idx[d]);
            r++;
        }
        k_next(idx, n, cshape);
    }
    return 0;
}

/* TVM's unique: (values, first indices, inverse indices, [count], counts), the per-value outputs
 * padded to the input length; the padding is zero here. Unsorted output keeps the order of
 * first occurrence. NaNs are one value. */
static int unique_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    if (rank(x) != 1) return k_error(kc, "data must be 1-D");
    bool sorted = k_bool(kc, "sorted"), counts = k_bool(kc, "return_counts");
    uint32_t nf = counts ? 5 : 4;
    if (kc->n_out != nf)
        return k_error(kc, "unique makes %u results but the caller expects %u", nf, kc->n_out);
    int64_t n = dim(x, 0), one = 1;
    DLTensor *o[5];
    for (uint32_t i = 0; i < nf; i++) {
        o[i] = k_out(kc, i, i == 0 ? k_dtype(x) : RLY_DTYPE_I32, 1, i == 3 ? &one : &n);
        if (o[i] == NULL) return -1;
        memset(k_ptr(o[i]), 0, (size_t)(i == 3 ? 1 : n) * sup_dtype_size(k_dtype(o[i])));
    }
    int64_t *perm = k_scratch_n(kc, 4 * n, sizeof(int64_t));
    if (perm == NULL) return -1;
    int64_t *tmp = perm + n, *group = perm + 2 * n, *rank_of = perm + 3 * n;
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    SortKey key = {k_ptr(x), k_dtype(x), false};
    merge_sort(&key, perm, tmp, n);
    /* group[g] = the first position of group g (in sorted order: equal runs) */
    int64_t ng = 0;
    for (int64_t j = 0; j < n; j++) {
        if (j == 0 || cmp_elems(k_ptr(x), perm[j - 1], k_ptr(x), perm[j], k_dtype(x)) != 0)
            group[ng++] = perm[j]; /* stable: the first occurrence */
        tmp[perm[j]] = ng - 1;     /* tmp: element -> sorted group */
    }
    /* rank_of[g]: where sorted group g goes in the output */
    if (sorted) {
        for (int64_t g = 0; g < ng; g++)
            rank_of[g] = g;
    } else {
        int64_t r = 0;
        for (int64_t g = 0; g < ng; g++)
            rank_of[g] = -1;
        for (int64_t i = 0; i < n; i++)
            if (rank_of[tmp[i]] < 0) rank_of[tmp[i]] = r++;
    }
    size_t es = esize(x);
    for (int64_t g = 0; g < ng; g++) {
        copy_elems(k_ptr(o[0]), rank_of[g], k_ptr(x), group[g], es, 1);
        k_storei(k_ptr(o[1]), RLY_DTYPE_I32, rank_of[g], group[g]);
    }
    for (int64_t i = 0; i < n; i++) {
        k_storei(k_ptr(o[2]), RLY_DTYPE_I32, i, rank_of[tmp[i]]);
        if (counts) {
            int32_t *c = k_ptr(o[4]);
            c[rank_of[tmp[i]]]++;
        }
    }
    k_storei(k_ptr(o[3]), RLY_DTYPE_I32, 0, ng);
    return 0;
}

/* A dense tensor of output_shape holding default_value, then sparse_values[j] at
 * sparse_indices[j] in order (a later duplicate wins). As in TVM, an index outside the output
 * matches no position and is ignored. */
static int sparse_to_dense_ref(KCall *kc) {
    const DLTensor *ind = k_arg(kc, 0), *val = k_arg(kc, 1), *dflt = k_arg(kc, 2);
    const int64_t *shape;
    uint32_t n = k_ints(kc, "output_shape", &shape);
    for (uint32_t i = 0; i < n; i++)
        if (shape[i] < 0) return k_error(kc, "output_shape has a negative size");
    uint32_t ni = rank(ind);
    int64_t count = ni == 0 ? 1 : dim(ind, 0), width = ni == 2 ? dim(ind, 1) : 1;
    if (ni > 2 || width != n)
        return k_error(kc, "sparse_indices of shape rank %u do not address a rank %u output", ni,
                       n);
    if (rank(val) > 1 || (rank(val) == 1 && dim(val, 0) != count))
        return k_error(kc, "sparse_values must be a scalar or have one value per index");
    if (k_numel(dflt) != 1 || k_dtype(dflt) != k_dtype(val))
        return k_error(kc, "default_value must be a scalar of the values' dtype");
    rly_dtype dt = k_dtype(val);
    DLTensor *o = k_out(kc, 0, dt, n, shape);
    if (o == NULL) return -1;
    size_t es = sup_dtype_size(dt);
    int64_t total = k_shape_numel(n, shape);
    fill_elems(k_ptr(o), k_ptr(dflt), es, total);
    /* Without columns (a 0-d output) every index row addresses the one element and the last
     * wins: only that one is applied, however many rows an empty sparse_indices claims. */
    for (int64_t j = n == 0 && count > 0 ? count - 1 : 0; j < count; j++) {
        int64_t off = 0;
        bool in = true;
        for (uint32_t d = 0; d < n && in; d++) {
            int64_t v = load_index(ind, j * width + d);
            in = v >= 0 && v < shape[d];
            off = off * shape[d] + v; /* a flat index of the output while in */
        }
        if (in) copy_elems(k_ptr(o), off, k_ptr(val), rank(val) ? j : 0, es, 1);
    }
    return 0;
}

/* ---- the table --------------------------------------------------------------------------------
 */

const KernelDef kern_ref_index[] = {
    {OP_ID_TAKE, take_ref},
    {OP_ID_GATHER, gather_ref},
    {OP_ID_GATHER_ND, gather_nd_ref},
    {OP_ID_SCATTER_ELEMENTS, scatter_elements_ref},
    {OP_ID_SCATTER_ND, scatter_nd_ref},
    {OP_ID_ADV_INDEX, adv_index_ref},
    {OP_ID_FULL, full_ref},
    {OP_ID_FULL_LIKE, full_like_ref},
    {OP_ID_ZEROS, zeros_ref},
    {OP_ID_ONES, ones_ref},
    {OP_ID_ARANGE, arange_ref},
    {OP_ID_ONE_HOT, one_hot_ref},
    {OP_ID_CUMSUM, cumsum_ref},
    {OP_ID_CUMPROD, cumprod_ref},
    {OP_ID_SORT, sort_ref},
    {OP_ID_ARGSORT, argsort_ref},
    {OP_ID_TOPK, topk_ref},
    {OP_ID_SEARCHSORTED, searchsorted_ref},
    {OP_ID_UNRAVEL_INDEX, unravel_index_ref},
    {OP_ID_SEQUENCE_MASK, sequence_mask_ref},
    {OP_ID_ARGWHERE, argwhere_ref},
    {OP_ID_UNIQUE, unique_ref},
    {OP_ID_SPARSE_TO_DENSE, sparse_to_dense_ref},
    {0, NULL},
};
