/* transform.c - reference kernels of the transform operators (see src/ops/op_transform.c): casts,
 * reshapes, joins and splits, repetition, reversal, where, broadcasting and collapsing, layout
 * changes, slicing, meshgrid, einsum and the matrix diagonal/triangle operators.
 *
 * Most of these move elements without looking at them: they copy element-size bytes, so one code
 * path serves every dtype. The data movers reduce to copy_view, which copies a strided view
 * (strides may be zero or negative) of the input into a compact output; transpose, broadcast_to,
 * strided_slice, reverse, tile, repeat, slice_like, meshgrid and sliding_window are views. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"

#define VIEW_MAX (2 * K_MAX_DIMS + 2) /* the largest rank of a view (tile doubles the rank) */

/* ---- helpers ----------------------------------------------------------------------------------
 */

static uint32_t rank(const DLTensor *t) { return (uint32_t)t->ndim; }
static size_t esize(const DLTensor *t) { return sup_dtype_size(k_dtype(t)); }

/* Dimension d of t (t->shape may be NULL for rank 0; d < rank). */
static int64_t dim(const DLTensor *t, uint32_t d) { return t->shape[d]; }

/* t's shape copied into out (which has room for K_MAX_DIMS). */
static void shape_copy(const DLTensor *t, int64_t *out) {
    for (uint32_t d = 0; d < rank(t); d++)
        out[d] = t->shape[d];
}

/* Copy the view of src (element strides st, first element at `base`) of the given shape into the
 * compact array dst. Strides may be zero (broadcast) or negative (reversal). */
static void copy_view(void *dst, const void *src, size_t es, uint32_t nd, const int64_t *shape,
                      const int64_t *st, int64_t base) {
    RLY_CHECK(nd <= VIEW_MAX, "view rank %u", nd);
    if (k_shape_numel(nd, shape) == 0) return;
    const char *s = src;
    char *d = dst;
    if (nd == 0) {
        memcpy(d, s + base * (int64_t)es, es);
        return;
    }
    int64_t idx[VIEW_MAX] = {0};
    int64_t inner = shape[nd - 1], ist = st[nd - 1], off = base;
    for (;;) {
        if (ist == 1) {
            memcpy(d, s + off * (int64_t)es, (size_t)inner * es);
            d += inner * (int64_t)es;
        } else {
            for (int64_t j = 0; j < inner; j++, d += es)
                memcpy(d, s + (off + j * ist) * (int64_t)es, es);
        }
        int32_t k = (int32_t)nd - 2;
        for (; k >= 0; k--) {
            off += st[k];
            if (++idx[k] < shape[k]) break;
            off -= st[k] * shape[k];
            idx[k] = 0;
        }
        if (k < 0) return;
    }
}

/* Copy all of src into dst (same element count). */
static void copy_all(void *dst, const DLTensor *src) {
    size_t n = (size_t)k_numel(src) * esize(src);
    if (n && dst != k_ptr(src)) memcpy(dst, k_ptr(src), n); /* one buffer: planned in place */
}

/* Output 0 with src's data under a new shape (expand_dims, squeeze, reshape, reshape_like). */
static int same_data(KCall *kc, const DLTensor *src, uint32_t nd, const int64_t *shape) {
    if (k_shape_numel(nd, shape) != k_numel(src)) {
        char a[256];
        DLTensor want = {.ndim = (int32_t)nd, .shape = (int64_t *)(uintptr_t)shape};
        char b[256];
        return k_error(kc, "cannot reshape %s (%lld elements) into %s (%lld elements)",
                       k_shape_str(src, a, sizeof a), (long long)k_numel(src),
                       k_shape_str(&want, b, sizeof b), (long long)k_shape_numel(nd, shape));
    }
    DLTensor *o = k_out(kc, 0, k_dtype(src), nd, shape);
    if (o == NULL) return -1;
    copy_all(k_ptr(o), src);
    return 0;
}

/* Whether element i of a tensor of dtype dt is nonzero (NaN is nonzero). */
static bool nonzero(const void *p, rly_dtype dt, int64_t i) {
    if (sup_dtype_is_float(dt)) return k_loadf(p, dt, i) != 0.0;
    return k_loadi(p, dt, i) != 0;
}

/* Write zero into element i (all-zero bits are zero in every dtype). */
static void zero_elem(void *p, size_t es, int64_t i) { memset((char *)p + i * (int64_t)es, 0, es); }

/* ---- casts ------------------------------------------------------------------------------------
 */

static int convert_to(KCall *kc, const DLTensor *x, rly_dtype dt) {
    int64_t shape[K_MAX_DIMS];
    shape_copy(x, shape);
    DLTensor *o = k_out(kc, 0, dt, rank(x), shape);
    if (o == NULL) return -1;
    rly_dtype sd = k_dtype(x);
    int64_t n = k_numel(x);
    for (int64_t i = 0; i < n; i++)
        k_convert(k_ptr(o), dt, i, k_ptr(x), sd, i);
    return 0;
}

static int cast_ref(KCall *kc) {
    int64_t dt = k_int(kc, "dtype");
    if (dt < 0 || dt >= RLY_DTYPE_COUNT) return k_error(kc, "attribute dtype names no dtype");
    return convert_to(kc, k_arg(kc, 0), (rly_dtype)dt);
}

static int cast_like_ref(KCall *kc) { return convert_to(kc, k_arg(kc, 0), k_dtype(k_arg(kc, 1))); }

static int reinterpret_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t dt = k_int(kc, "dtype");
    if (dt < 0 || dt >= RLY_DTYPE_COUNT) return k_error(kc, "attribute dtype names no dtype");
    if (sup_dtype_size((rly_dtype)dt) != esize(x))
        return k_error(kc, "cannot reinterpret %s as %s: the widths differ",
                       sup_dtype_name(k_dtype(x)), sup_dtype_name((rly_dtype)dt));
    int64_t shape[K_MAX_DIMS];
    shape_copy(x, shape);
    DLTensor *o = k_out(kc, 0, (rly_dtype)dt, rank(x), shape);
    if (o == NULL) return -1;
    copy_all(k_ptr(o), x);
    if (dt == RLY_DTYPE_BOOL) { /* a bool byte holds 0 or 1 */
        uint8_t *b = k_ptr(o);
        for (int64_t i = 0; i < k_numel(x); i++)
            b[i] = b[i] != 0;
    }
    return 0;
}

/* ---- expand_dims, squeeze, reshape, reshape_like ------------------------------------------- */

static int expand_dims_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t n = rank(x), axis = k_int(kc, "axis"), k = k_int(kc, "num_newaxis");
    if (axis < -n - 1 || axis > n)
        return k_error(kc, "axis %lld is out of range for rank %lld", (long long)axis,
                       (long long)n);
    if (k < 0 || k > K_MAX_DIMS - n)
        return k_error(kc, "num_newaxis %lld is out of range for rank %lld", (long long)k,
                       (long long)n);
    int64_t pivot = axis < 0 ? n + axis + 1 : axis, shape[K_MAX_DIMS];
    uint32_t o = 0;
    for (int64_t i = 0; i < pivot; i++)
        shape[o++] = dim(x, (uint32_t)i);
    for (int64_t i = 0; i < k; i++)
        shape[o++] = 1;
    for (int64_t i = pivot; i < n; i++)
        shape[o++] = dim(x, (uint32_t)i);
    return same_data(kc, x, o, shape);
}

static int squeeze_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t n = rank(x), o = 0;
    int64_t shape[K_MAX_DIMS];
    bool drop[K_MAX_DIMS] = {0};
    if (k_is_none(kc, "axis")) {
        for (uint32_t i = 0; i < n; i++)
            drop[i] = dim(x, i) == 1;
    } else {
        const int64_t *axes;
        uint32_t na = k_ints(kc, "axis", &axes);
        for (uint32_t j = 0; j < na; j++) {
            int64_t a;
            if (!k_axis(axes[j], n, &a))
                return k_error(kc, "axis %lld is out of range for rank %u", (long long)axes[j], n);
            if (dim(x, (uint32_t)a) != 1)
                return k_error(kc, "cannot squeeze axis %lld of size %lld", (long long)a,
                               (long long)dim(x, (uint32_t)a));
            drop[a] = true;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        if (!drop[i]) shape[o++] = dim(x, i);
    return same_data(kc, x, o, shape);
}

static int reshape_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    const int64_t *ns;
    uint32_t nn = k_ints(kc, "newshape", &ns), n = rank(x), src = 0, o = 0;
    bool allowzero = k_bool(kc, "allowzero");
    int64_t shape[K_MAX_DIMS + 1];
    int64_t infer = -1;
    for (uint32_t i = 0; i < nn; i++) {
        int64_t v = ns[i];
        if (o >= K_MAX_DIMS) return k_error(kc, "the result rank exceeds %d", K_MAX_DIMS);
        if (v > 0 || (v == 0 && allowzero)) {
            shape[o++] = v;
            src++;
        } else if (v == 0) {
            if (src >= n)
                return k_error(kc, "newshape[%u] = 0 copies input dimension %u of a rank %u tensor",
                               i, src, n);
            shape[o++] = dim(x, src++);
        } else if (v == -1) {
            if (infer >= 0) return k_error(kc, "newshape has more than one -1");
            infer = o;
            shape[o++] = 1;
            src++;
        } else if (v == -2) {
            while (src < n && o < K_MAX_DIMS)
                shape[o++] = dim(x, src++);
        } else if (v == -3) {
            if (src + 2 > n)
                return k_error(kc, "newshape[%u] = -3 needs two input dimensions from %u (rank %u)",
                               i, src, n);
            shape[o++] = dim(x, src) * dim(x, src + 1);
            src += 2;
        } else if (v == -4) {
            if (i + 2 >= nn || src >= n)
                return k_error(kc, "newshape[%u] = -4 needs two sizes and an input dimension", i);
            int64_t d0 = dim(x, src++), a = ns[++i], b = ns[++i];
            if ((a == -1 && b == -1) || (a <= 0 && a != -1) || (b <= 0 && b != -1))
                return k_error(kc, "bad sizes %lld, %lld after -4", (long long)a, (long long)b);
            if (a == -1) a = d0 / b;
            if (b == -1) b = d0 / a;
            int64_t ab;
            if (!sup_dim_mul(a, b, &ab) || ab != d0)
                return k_error(kc, "-4 cannot split a dimension of size %lld into %lld x %lld",
                               (long long)d0, (long long)a, (long long)b);
            if (o + 2 > K_MAX_DIMS) return k_error(kc, "the result rank exceeds %d", K_MAX_DIMS);
            shape[o++] = a;
            shape[o++] = b;
        } else {
            return k_error(kc, "newshape[%u] = %lld is not a size or a special value", i,
                           (long long)v);
        }
    }
    if (infer >= 0) {
        int64_t rest = 1;
        for (uint32_t i = 0; i < o; i++)
            if (i != infer) rest = sup_dim_mul_sat(rest, shape[i]); /* sizes: >= 0 */
        int64_t total = k_numel(x);
        if (rest == 0 || rest > SUP_DIM_MAX || total % rest != 0)
            return k_error(kc, "cannot infer the -1 of newshape: %lld elements into parts of %lld",
                           (long long)total, (long long)rest);
        shape[infer] = total / rest;
    }
    return same_data(kc, x, o, shape);
}

/* A [begin, end) range of axes (end None = rank). */
static bool axis_range(KCall *kc, const char *bname, const char *ename, uint32_t n, int64_t *b,
                       int64_t *e) {
    int64_t rb = k_int(kc, bname), re = k_is_none(kc, ename) ? n : k_int(kc, ename);
    *b = rb < 0 ? rb + n : rb;
    *e = re < 0 ? re + n : re;
    return *b >= 0 && *e <= n && *b <= *e;
}

static int reshape_like_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *like = k_arg(kc, 1);
    int64_t lb, le, rb, re;
    if (!axis_range(kc, "lhs_begin", "lhs_end", rank(x), &lb, &le) ||
        !axis_range(kc, "rhs_begin", "rhs_end", rank(like), &rb, &re))
        return k_error(kc, "the axis ranges are out of bounds");
    int64_t shape[2 * K_MAX_DIMS];
    uint32_t o = 0;
    for (int64_t i = 0; i < lb; i++)
        shape[o++] = dim(x, (uint32_t)i);
    for (int64_t i = rb; i < re; i++)
        shape[o++] = dim(like, (uint32_t)i);
    for (int64_t i = le; i < rank(x); i++)
        shape[o++] = dim(x, (uint32_t)i);
    if (o > K_MAX_DIMS) return k_error(kc, "the result rank exceeds %d", K_MAX_DIMS);
    return same_data(kc, x, o, shape);
}

/* ---- transpose ----------------------------------------------------------------------------------
 */

static int transpose_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t n = rank(x);
    const int64_t *axes;
    uint32_t na = k_ints(kc, "axes", &axes);
    int64_t perm[K_MAX_DIMS], st[K_MAX_DIMS], shape[K_MAX_DIMS], vst[K_MAX_DIMS];
    bool seen[K_MAX_DIMS] = {0};
    if (na == 0) {
        for (uint32_t i = 0; i < n; i++)
            perm[i] = n - 1 - i;
    } else {
        if (na != n) return k_error(kc, "axes has %u entries but data has rank %u", na, n);
        for (uint32_t i = 0; i < n; i++) {
            if (!k_axis(axes[i], n, &perm[i]) || seen[perm[i]])
                return k_error(kc, "axes is not a permutation of the %u axes", n);
            seen[perm[i]] = true;
        }
    }
    k_strides(n, x->shape, st);
    for (uint32_t i = 0; i < n; i++) {
        shape[i] = dim(x, (uint32_t)perm[i]);
        vst[i] = st[perm[i]];
    }
    DLTensor *o = k_out_raw(kc, 0, k_dtype(x), n, shape); /* copy_view writes every element */
    if (o == NULL) return -1;
    copy_view(k_ptr(o), k_ptr(x), esize(x), n, shape, vst, 0);
    return 0;
}

/* ---- concatenate, stack ------------------------------------------------------------------------
 */

/* The fields of tuple argument 0, checked to share dtype and rank. */
static int tuple_fields(KCall *kc, uint32_t *k) {
    *k = kc->arg_len[0];
    if (*k == 0) return k_error(kc, "needs at least one tensor, got an empty tuple");
    const DLTensor *t0 = k_field(kc, 0, 0);
    for (uint32_t i = 1; i < *k; i++) {
        const DLTensor *t = k_field(kc, 0, i);
        if (k_dtype(t) != k_dtype(t0) || rank(t) != rank(t0))
            return k_error(kc, "tensor %u differs from tensor 0 in dtype or rank", i);
    }
    return 0;
}

/* Join the k fields, each seen as (outer, chunk_i) blocks, into out row by row. Nothing to do
 * for an empty result, whose outer count may be huge. */
static void join_blocks(KCall *kc, uint32_t k, int64_t outer, const int64_t *chunk, void *out) {
    char *d = out;
    int64_t total = 0;
    for (uint32_t i = 0; i < k; i++)
        total |= chunk[i];
    if (total == 0) return;
    for (int64_t r = 0; r < outer; r++)
        for (uint32_t i = 0; i < k; i++) {
            const DLTensor *t = k_field(kc, 0, i);
            size_t nb = (size_t)chunk[i] * esize(t);
            const char *src = (const char *)k_ptr(t) + (size_t)r * nb;
            if (nb && src != d) memcpy(d, src, nb); /* equal: made in place (a plan's piece) */
            d += nb;
        }
}

static int concatenate_ref(KCall *kc) {
    uint32_t k;
    if (tuple_fields(kc, &k) != 0) return -1;
    const DLTensor *t0 = k_field(kc, 0, 0);
    uint32_t n = rank(t0);
    int64_t axis, shape[K_MAX_DIMS];
    if (!k_axis(k_int(kc, "axis"), n, &axis))
        return k_error(kc, "axis %lld is out of range for rank %u", (long long)k_int(kc, "axis"),
                       n);
    shape_copy(t0, shape);
    int64_t *chunk = k_scratch_n(kc, k, sizeof(int64_t));
    if (chunk == NULL) return -1;
    shape[axis] = 0;
    for (uint32_t i = 0; i < k; i++) {
        const DLTensor *t = k_field(kc, 0, i);
        for (uint32_t d = 0; d < n; d++)
            if (d != axis && dim(t, d) != dim(t0, d))
                return k_error(kc, "tensor %u differs from tensor 0 in dimension %u", i, d);
        if (!sup_dim_add(shape[axis], dim(t, (uint32_t)axis), &shape[axis]))
            return k_error(kc, "the joined axis %lld is too large (over 2^62)", (long long)axis);
        chunk[i] = k_shape_numel(n - (uint32_t)axis, t->shape + axis);
    }
    DLTensor *o = k_out_raw(kc, 0, k_dtype(t0), n, shape); /* join_blocks writes every byte */
    if (o != NULL) join_blocks(kc, k, k_shape_numel((uint32_t)axis, shape), chunk, k_ptr(o));
    return o == NULL ? -1 : 0;
}

static int stack_ref(KCall *kc) {
    uint32_t k;
    if (tuple_fields(kc, &k) != 0) return -1;
    const DLTensor *t0 = k_field(kc, 0, 0);
    int64_t n = rank(t0), axis = k_int(kc, "axis");
    if (axis < -n - 1 || axis > n || n + 1 > K_MAX_DIMS)
        return k_error(kc, "axis %lld is out of range for stacking rank %lld tensors",
                       (long long)axis, (long long)n);
    if (axis < 0) axis += n + 1;
    for (uint32_t i = 1; i < k; i++)
        if (!k_same_shape(k_field(kc, 0, i), t0))
            return k_error(kc, "tensor %u has a different shape from tensor 0", i);
    int64_t shape[K_MAX_DIMS];
    for (int64_t j = 0, s = 0; j <= n; j++)
        shape[j] = j == axis ? (int64_t)k : dim(t0, (uint32_t)s++);
    int64_t *chunk = k_scratch_n(kc, k, sizeof(int64_t));
    if (chunk == NULL) return -1;
    for (uint32_t i = 0; i < k; i++)
        chunk[i] = k_shape_numel((uint32_t)(n - axis), t0->shape + axis);
    DLTensor *o = k_out_raw(kc, 0, k_dtype(t0), (uint32_t)n + 1, shape); /* every byte written */
    if (o != NULL) join_blocks(kc, k, k_shape_numel((uint32_t)axis, shape), chunk, k_ptr(o));
    return o == NULL ? -1 : 0;
}

/* ---- split ----------------------------------------------------------------------------------- */

static int split_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t n = rank(x);
    int64_t axis;
    if (n == 0) return k_error(kc, "cannot split a 0-d tensor");
    if (!k_axis(k_int(kc, "axis"), n, &axis))
        return k_error(kc, "axis %lld is out of range for rank %u", (long long)k_int(kc, "axis"),
                       n);
    int64_t d = dim(x, (uint32_t)axis);
    const KAttr *a = k_attr(kc, "indices_or_sections");
    uint32_t nf;
    int64_t sections = 0;
    const int64_t *idx = NULL;
    if (a->kind == KA_INT) {
        sections = a->i;
        if (sections <= 0)
            return k_error(kc, "the number of sections must be positive, got %lld",
                           (long long)sections);
        if (sections != (int64_t)kc->n_out)
            return k_error(kc, "split makes %lld tensors but the caller expects %u",
                           (long long)sections, kc->n_out);
        if (d % sections != 0)
            return k_error(kc, "axis %lld of size %lld does not divide into %lld equal sections",
                           (long long)axis, (long long)d, (long long)sections);
        nf = (uint32_t)sections;
    } else if (a->kind == KA_INTS || a->kind == KA_FLOATS) {
        uint32_t n_idx = k_ints(kc, "indices_or_sections", &idx);
        if (n_idx >= kc->n_out)
            return k_error(kc, "split makes %llu tensors but the caller expects %u",
                           (unsigned long long)n_idx + 1, kc->n_out);
        nf = n_idx + 1;
        for (uint32_t i = 0; i < n_idx; i++)
            if (idx[i] < (i ? idx[i - 1] : 0) || idx[i] > d)
                return k_error(kc,
                               "split index %lld is out of order or outside axis %lld of "
                               "size %lld",
                               (long long)idx[i], (long long)axis, (long long)d);
    } else {
        return k_error(kc, "indices_or_sections must be an integer or a list of integers");
    }
    if (nf != kc->n_out)
        return k_error(kc, "split makes %u tensors but the caller expects %u", nf, kc->n_out);
    int64_t outer = k_shape_numel((uint32_t)axis, x->shape);
    int64_t inner = k_shape_numel(n - (uint32_t)axis - 1, x->shape + axis + 1);
    size_t es = esize(x), row = (size_t)(d * inner) * es;
    int64_t shape[K_MAX_DIMS];
    shape_copy(x, shape);
    for (uint32_t i = 0; i < nf; i++) {
        int64_t lo = idx ? (i ? idx[i - 1] : 0) : i * (d / sections);
        int64_t hi = idx ? (i < nf - 1 ? idx[i] : d) : lo + d / sections;
        shape[axis] = hi - lo;
        DLTensor *o = k_out_raw(kc, i, k_dtype(x), n, shape); /* every byte copied below */
        if (o == NULL) return -1;
        size_t nb = (size_t)((hi - lo) * inner) * es;
        if (nb == 0) continue;
        for (int64_t r = 0; r < outer; r++) {
            char *dst = (char *)k_ptr(o) + (size_t)r * nb;
            const char *src = (const char *)k_ptr(x) + (size_t)r * row + (size_t)(lo * inner) * es;
            if (dst != src) memcpy(dst, src, nb); /* equal: made in place (a plan's piece) */
        }
    }
    return 0;
}

/* ---- tile, repeat, reverse, reverse_sequence ----------------------------------------------- */

static int tile_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    const int64_t *reps;
    uint32_t r = k_ints(kc, "reps", &reps), n = rank(x), t = n > r ? n : r;
    if (t > K_MAX_DIMS) return k_error(kc, "the result rank exceeds %d", K_MAX_DIMS);
    int64_t st[K_MAX_DIMS], shape[K_MAX_DIMS], vshape[VIEW_MAX], vst[VIEW_MAX];
    k_strides(n, x->shape, st);
    /* out dim i (= reps_i x d_i) is the view dims (reps_i, d_i) with strides (0, s_i) */
    for (uint32_t i = 0; i < t; i++) {
        bool has_d = i >= t - n;
        int64_t d = has_d ? dim(x, i - (t - n)) : 1, k = i < t - r ? 1 : reps[i - (t - r)];
        if (!sup_dim_mul(d, k, &shape[i]))
            return k_error(kc, "reps %lld is negative or too large", (long long)k);
        vshape[2 * i] = k;
        vshape[2 * i + 1] = d;
        vst[2 * i] = 0;
        vst[2 * i + 1] = has_d ? st[i - (t - n)] : 0;
    }
    DLTensor *o = k_out(kc, 0, k_dtype(x), t, shape);
    if (o == NULL) return -1;
    copy_view(k_ptr(o), k_ptr(x), esize(x), 2 * t, vshape, vst, 0);
    return 0;
}

static int repeat_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t n = rank(x);
    int64_t k = k_int(kc, "repeats"), axis;
    if (k < 1) return k_error(kc, "repeats must be >= 1, got %lld", (long long)k);
    if (k_is_none(kc, "axis") || !k_axis(k_int(kc, "axis"), n, &axis))
        return k_error(kc, "axis is missing or out of range for rank %u", n);
    int64_t repeated;
    if (!sup_dim_mul(dim(x, (uint32_t)axis), k, &repeated))
        return k_error(kc, "repeats %lld is too large", (long long)k);
    int64_t st[K_MAX_DIMS], shape[K_MAX_DIMS], vshape[VIEW_MAX], vst[VIEW_MAX];
    k_strides(n, x->shape, st);
    uint32_t v = 0;
    for (uint32_t i = 0; i < n; i++) {
        shape[i] = dim(x, i) * (i == axis ? k : 1);
        vshape[v] = dim(x, i);
        vst[v++] = st[i];
        if (i == axis) {
            vshape[v] = k;
            vst[v++] = 0;
        }
    }
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    copy_view(k_ptr(o), k_ptr(x), esize(x), v, vshape, vst, 0);
    return 0;
}

static int reverse_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t n = rank(x);
    int64_t axis;
    if (k_is_none(kc, "axis") || !k_axis(k_int(kc, "axis"), n, &axis))
        return k_error(kc, "axis is missing or out of range for rank %u", n);
    int64_t st[K_MAX_DIMS], shape[K_MAX_DIMS];
    k_strides(n, x->shape, st);
    shape_copy(x, shape);
    int64_t base = (shape[axis] - 1) * st[axis];
    st[axis] = -st[axis];
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    copy_view(k_ptr(o), k_ptr(x), esize(x), n, shape, st, shape[axis] ? base : 0);
    return 0;
}

static int reverse_sequence_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *lens = k_arg(kc, 1);
    uint32_t n = rank(x);
    int64_t seq, batch;
    if (!k_axis(k_int(kc, "seq_axis"), n, &seq) || !k_axis(k_int(kc, "batch_axis"), n, &batch) ||
        seq == batch)
        return k_error(kc, "seq_axis and batch_axis must be two different axes of rank %u", n);
    if (rank(lens) != 1 || dim(lens, 0) != dim(x, (uint32_t)batch))
        return k_error(kc, "seq_lengths must have one entry per batch element (%lld)",
                       (long long)dim(x, (uint32_t)batch));
    int64_t shape[K_MAX_DIMS], st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0};
    shape_copy(x, shape);
    k_strides(n, shape, st);
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    int64_t total = k_numel(x), ds = shape[seq];
    size_t es = esize(x);
    rly_dtype ld = k_dtype(lens);
    for (int64_t i = 0; i < total; i++) {
        /* TVM: lengths <= 1 leave the row, lengths past the axis reverse all of it */
        int64_t len = k_loadi(k_ptr(lens), ld, idx[batch]), s = idx[seq], from = s;
        if (len > 1 && s < len) from = len > ds ? ds - 1 - s : len - 1 - s;
        int64_t off = i + (from - s) * st[seq];
        memcpy((char *)k_ptr(o) + i * (int64_t)es, (const char *)k_ptr(x) + off * (int64_t)es, es);
        k_next(idx, n, shape);
    }
    return 0;
}

/* ---- where, broadcast_to(_like), collapse_sum_like/to ---------------------------------------- */

static int where_ref(KCall *kc) {
    const DLTensor *c = k_arg(kc, 0), *x = k_arg(kc, 1), *y = k_arg(kc, 2);
    int64_t sxy[K_MAX_DIMS], shape[K_MAX_DIMS];
    uint32_t nxy, n;
    if (k_dtype(x) != k_dtype(y))
        return k_error(kc, "x and y differ in dtype: %s and %s", sup_dtype_name(k_dtype(x)),
                       sup_dtype_name(k_dtype(y)));
    if (!k_bcast_shape(x, y, &nxy, sxy)) return k_error(kc, "x and y shapes do not broadcast");
    DLTensor xy = {.ndim = (int32_t)nxy, .shape = sxy};
    if (!k_bcast_shape(c, &xy, &n, shape))
        return k_error(kc, "condition does not broadcast with x and y");
    int64_t sc[K_MAX_DIMS], sx[K_MAX_DIMS], sy[K_MAX_DIMS], idx[K_MAX_DIMS] = {0};
    k_bcast_strides(c, n, shape, sc);
    k_bcast_strides(x, n, shape, sx);
    k_bcast_strides(y, n, shape, sy);
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    int64_t total = k_shape_numel(n, shape), oc = 0, ox = 0, oy = 0;
    size_t es = esize(x);
    rly_dtype cd = k_dtype(c);
    for (int64_t i = 0; i < total; i++) {
        const void *src = nonzero(k_ptr(c), cd, oc) ? (const char *)k_ptr(x) + ox * (int64_t)es
                                                    : (const char *)k_ptr(y) + oy * (int64_t)es;
        memcpy((char *)k_ptr(o) + i * (int64_t)es, src, es);
        for (uint32_t d = n; d-- > 0;) { /* advance the offsets as k_next advances idx */
            oc += sc[d], ox += sx[d], oy += sy[d];
            if (++idx[d] < shape[d]) break;
            oc -= sc[d] * shape[d], ox -= sx[d] * shape[d], oy -= sy[d] * shape[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/* Whether shape `from` broadcasts to exactly `to`. */
static bool bcasts_to(uint32_t nf, const int64_t *from, uint32_t nt, const int64_t *to) {
    if (nf > nt) return false;
    for (uint32_t i = 0; i < nf; i++)
        if (from[i] != 1 && from[i] != to[nt - nf + i]) return false;
    return true;
}

static int broadcast_to_shape(KCall *kc, const DLTensor *x, uint32_t n, const int64_t *shape) {
    if (n > K_MAX_DIMS || !bcasts_to(rank(x), x->shape, n, shape)) {
        char a[256];
        return k_error(kc, "cannot broadcast %s to the target shape", k_shape_str(x, a, sizeof a));
    }
    int64_t st[K_MAX_DIMS];
    k_bcast_strides(x, n, shape, st);
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    copy_view(k_ptr(o), k_ptr(x), esize(x), n, shape, st, 0);
    return 0;
}

static int broadcast_to_ref(KCall *kc) {
    const int64_t *shape;
    uint32_t n = k_ints(kc, "shape", &shape);
    for (uint32_t i = 0; i < n; i++)
        if (shape[i] < 0) return k_error(kc, "shape has a negative size");
    return broadcast_to_shape(kc, k_arg(kc, 0), n, shape);
}

static int broadcast_to_like_ref(KCall *kc) {
    const DLTensor *like = k_arg(kc, 1);
    int64_t shape[K_MAX_DIMS];
    shape_copy(like, shape);
    return broadcast_to_shape(kc, k_arg(kc, 0), rank(like), shape);
}

/* Sum x down to shape `to` (which broadcasts to x's shape). Floats sum in double, integers in
 * 64 bits modulo 2^64 (the result wraps as the dtype does), bools as a logical or. */
static int collapse_to(KCall *kc, const DLTensor *x, uint32_t n, const int64_t *to) {
    uint32_t nx = rank(x);
    if (!bcasts_to(n, to, nx, x->shape)) {
        char a[256];
        return k_error(kc, "cannot collapse %s to the target shape", k_shape_str(x, a, sizeof a));
    }
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, n, to);
    if (o == NULL) return -1;
    int64_t no = k_shape_numel(n, to), total = k_numel(x);
    bool fl = sup_dtype_is_float(dt);
    double *accf = fl ? k_scratch_n(kc, no ? no : 1, sizeof(double)) : NULL;
    uint64_t *acci = fl ? NULL : k_scratch_n(kc, no ? no : 1, sizeof(uint64_t));
    if (accf == NULL && acci == NULL) return -1;
    DLTensor tt = {.ndim = (int32_t)n, .shape = (int64_t *)(uintptr_t)to};
    int64_t st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0}, off = 0;
    k_bcast_strides(&tt, nx, x->shape, st);
    for (int64_t i = 0; i < total; i++) {
        if (fl)
            accf[off] += k_loadf(k_ptr(x), dt, i);
        else
            acci[off] += k_loadu(k_ptr(x), dt, i);
        for (uint32_t d = nx; d-- > 0;) {
            off += st[d];
            if (++idx[d] < x->shape[d]) break;
            off -= st[d] * x->shape[d];
            idx[d] = 0;
        }
    }
    for (int64_t i = 0; i < no; i++) {
        if (fl)
            k_storef(k_ptr(o), dt, i, accf[i]);
        else
            k_storeu(k_ptr(o), dt, i, acci[i]);
    }
    return 0;
}

static int collapse_sum_like_ref(KCall *kc) {
    const DLTensor *like = k_arg(kc, 1);
    int64_t shape[K_MAX_DIMS];
    shape_copy(like, shape);
    return collapse_to(kc, k_arg(kc, 0), rank(like), shape);
}

static int collapse_sum_to_ref(KCall *kc) {
    const DLTensor *s = k_arg(kc, 1);
    int64_t shape[K_MAX_DIMS];
    uint32_t n;
    if (k_is_none(kc, "shape")) { /* the target comes from the shape tensor's values */
        if (rank(s) != 1 || dim(s, 0) > K_MAX_DIMS)
            return k_error(kc, "shape must be a 1-D tensor of at most %d sizes", K_MAX_DIMS);
        n = (uint32_t)dim(s, 0);
        for (uint32_t i = 0; i < n; i++)
            shape[i] = k_loadi(k_ptr(s), k_dtype(s), i);
    } else {
        const int64_t *to;
        n = k_ints(kc, "shape", &to);
        if (n > K_MAX_DIMS) return k_error(kc, "shape has more than %d sizes", K_MAX_DIMS);
        memcpy(shape, to, n * sizeof(int64_t));
    }
    for (uint32_t i = 0; i < n; i++)
        if (shape[i] < 0) return k_error(kc, "shape has a negative size");
    return collapse_to(kc, k_arg(kc, 0), n, shape);
}

/* ---- layout_transform ---------------------------------------------------------------------------
 */

/* out[dst index] = in[src index] through the full (primal) coordinates; destination positions
 * beyond the source extent (a block size that does not divide the axis) are zero. */
static int layout_transform_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    KLayout src, dst;
    if (!k_layout_parse(k_str(kc, "src_layout"), &src) ||
        !k_layout_parse(k_str(kc, "dst_layout"), &dst))
        return k_error(kc, "src_layout or dst_layout is not a layout");
    if (rank(x) != src.n)
        return k_error(kc, "data has rank %u but src_layout has %u axes", rank(x), src.n);
    int64_t full[26] = {0}; /* the extent of each primal axis */
    /* the blocks first: then each dim times its block is a sub-product of the shape */
    for (uint32_t i = 0; i < src.n; i++)
        if (src.factor[i] && dim(x, i) != src.factor[i])
            return k_error(kc, "axis %u of data has size %lld but src_layout says %lld", i,
                           (long long)dim(x, i), (long long)src.factor[i]);
    for (uint32_t i = 0; i < src.n; i++) {
        char a = src.axis[i];
        if (src.factor[i]) continue;
        int64_t b = k_layout_block(&src, a);
        full[a - 'A'] = dim(x, i) * (b ? b : 1);
        if (k_layout_find(&dst, a) < 0) return k_error(kc, "axis %c is missing from dst_layout", a);
    }
    int64_t shape[K_MAX_DIMS];
    for (uint32_t i = 0; i < dst.n; i++) {
        char a = dst.axis[i];
        if (dst.factor[i]) {
            shape[i] = dst.factor[i];
            continue;
        }
        if (k_layout_find(&src, a) < 0) return k_error(kc, "axis %c is missing from src_layout", a);
        int64_t b = k_layout_block(&dst, a), f = full[a - 'A'];
        shape[i] = b ? (f + b - 1) / b : f;
    }
    DLTensor *o = k_out(kc, 0, k_dtype(x), dst.n, shape);
    if (o == NULL) return -1;
    int64_t st[K_MAX_DIMS], idx[K_MAX_DIMS] = {0}, total = k_shape_numel(dst.n, shape);
    k_strides(src.n, x->shape, st);
    size_t es = esize(x);
    for (int64_t i = 0; i < total; i++) {
        int64_t coord[26] = {0};
        for (uint32_t d = 0; d < dst.n; d++) {
            char a = dst.axis[d];
            if (dst.factor[d])
                coord[a - 'a'] += idx[d];
            else
                coord[a - 'A'] += idx[d] * (k_layout_block(&dst, a) ? k_layout_block(&dst, a) : 1);
        }
        bool in = true;
        int64_t off = 0;
        for (uint32_t d = 0; d < src.n; d++) {
            char a = src.axis[d];
            int64_t c, b;
            if (src.factor[d]) {
                c = coord[a - 'a'] % src.factor[d];
            } else {
                in = in && coord[a - 'A'] < full[a - 'A'];
                b = k_layout_block(&src, a);
                c = b ? coord[a - 'A'] / b : coord[a - 'A'];
            }
            off += c * st[d];
        }
        if (in)
            memcpy((char *)k_ptr(o) + i * (int64_t)es, (const char *)k_ptr(x) + off * (int64_t)es,
                   es);
        else
            zero_elem(k_ptr(o), es, i);
        k_next(idx, dst.n, shape);
    }
    return 0;
}

/* ---- strided_slice, slice_like -----------------------------------------------------------------
 */

/* The start and length of one sliced axis of size d (numpy clamping, as the relation). */
static void slice_axis(int64_t d, bool has_b, int64_t b, bool has_e, int64_t e, int64_t st,
                       int64_t *start, int64_t *len) {
    uint64_t mag = st < 0 ? (uint64_t)0 - (uint64_t)st : (uint64_t)st;
    if (st > 0) {
        b = has_b ? b : 0;
        e = has_e ? e : d;
        if (b < 0) b += d;
        if (e < 0) e += d;
        b = b < 0 ? 0 : b > d ? d : b;
        e = e < 0 ? 0 : e > d ? d : e;
        *start = b;
        *len = e > b ? (int64_t)(((uint64_t)(e - b) - 1) / mag + 1) : 0;
        return;
    }
    b = has_b ? b : d - 1;
    if (b < 0) b += d;
    b = b < -1 ? -1 : b > d - 1 ? d - 1 : b;
    if (has_e) {
        if (e < 0) e += d;
        e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
    } else {
        e = -1;
    }
    *start = b;
    *len = b > e ? (int64_t)(((uint64_t)(b - e) - 1) / mag + 1) : 0;
}

static int strided_slice_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t n = rank(x), nax;
    const int64_t *b, *e, *s, *given;
    uint32_t nb = k_ints(kc, "begin", &b), ne = k_ints(kc, "end", &e),
             ns = k_ints(kc, "strides", &s);
    bool size_mode = strcmp(k_str(kc, "slice_mode"), "size") == 0;
    int64_t axes[K_MAX_DIMS];
    if (k_is_none(kc, "axes")) {
        if (nb > n || ne > n || ns > n)
            return k_error(kc, "begin, end and strides have more entries than rank %u", n);
        nax = n;
        for (uint32_t i = 0; i < n; i++)
            axes[i] = i;
    } else {
        nax = k_ints(kc, "axes", &given);
        if (nb != nax || ne != nax || ns > nax || nax > n)
            return k_error(kc, "axes, begin, end and strides disagree in length");
        bool seen[K_MAX_DIMS] = {0};
        for (uint32_t i = 0; i < nax; i++) {
            if (!k_axis(given[i], n, &axes[i]))
                return k_error(kc, "axis %lld is out of range for rank %u", (long long)given[i], n);
            if (seen[axes[i]]) return k_error(kc, "axes names axis %lld twice", (long long)axes[i]);
            seen[axes[i]] = true;
        }
    }
    int64_t shape[K_MAX_DIMS], st[K_MAX_DIMS], base = 0;
    shape_copy(x, shape);
    k_strides(n, x->shape, st);
    for (uint32_t i = 0; i < nax; i++) {
        int64_t a = axes[i], d = dim(x, (uint32_t)a), step = size_mode || i >= ns ? 1 : s[i];
        int64_t start, len;
        if (step == 0) return k_error(kc, "strides must be nonzero");
        bool has_b = i < nb, has_e = i < ne;
        int64_t bi = has_b ? b[i] : 0, ei = has_e ? e[i] : 0;
        if (size_mode) {
            if (bi < 0) bi += d;
            start = bi < 0 ? 0 : bi > d ? d : bi;
            len = !has_e || ei < 0 || ei > d - start ? d - start : ei;
        } else {
            slice_axis(d, has_b, bi, has_e, ei, step, &start, &len);
        }
        shape[a] = len;
        if (len > 0) base += start * st[a];
        st[a] = len > 1 ? st[a] * step : 0; /* |step| < d when len > 1: no overflow */
    }
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    copy_view(k_ptr(o), k_ptr(x), esize(x), n, shape, st, base);
    return 0;
}

static int slice_like_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *like = k_arg(kc, 1);
    uint32_t n = rank(x);
    int64_t shape[K_MAX_DIMS], st[K_MAX_DIMS];
    shape_copy(x, shape);
    k_strides(n, x->shape, st);
    const int64_t *given;
    uint32_t na = k_ints(kc, "axes", &given);
    bool all = k_is_none(kc, "axes");
    uint32_t count = all ? (n < rank(like) ? n : rank(like)) : na;
    for (uint32_t i = 0; i < count; i++) {
        int64_t a = i;
        if (!all && !k_axis(given[i], n, &a))
            return k_error(kc, "axis %lld is out of range for rank %u", (long long)given[i], n);
        if (a >= rank(like) || dim(like, (uint32_t)a) > shape[a])
            return k_error(kc, "shape_like does not fit inside data on axis %lld", (long long)a);
        shape[a] = dim(like, (uint32_t)a);
    }
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    copy_view(k_ptr(o), k_ptr(x), esize(x), n, shape, st, 0);
    return 0;
}

/* ---- meshgrid ------------------------------------------------------------------------------ */

static int meshgrid_ref(KCall *kc) {
    uint32_t k = kc->arg_len[0];
    if (k == 0 || k > K_MAX_DIMS) return k_error(kc, "needs 1 to %d tensors", K_MAX_DIMS);
    if (k != kc->n_out)
        return k_error(kc, "meshgrid makes %u tensors but the caller expects %u", k, kc->n_out);
    bool xy = strcmp(k_str(kc, "indexing"), "xy") == 0 && k >= 2;
    int64_t shape[K_MAX_DIMS];
    for (uint32_t i = 0; i < k; i++) {
        const DLTensor *t = k_field(kc, 0, xy && i < 2 ? 1 - i : i);
        if (rank(t) > 1) return k_error(kc, "meshgrid takes scalars and 1-D tensors");
        shape[i] = rank(t) ? dim(t, 0) : 1;
    }
    for (uint32_t i = 0; i < k; i++) {
        const DLTensor *t = k_field(kc, 0, i);
        int64_t st[K_MAX_DIMS] = {0};
        st[xy && i < 2 ? 1 - i : i] = rank(t) ? 1 : 0;
        DLTensor *o = k_out(kc, i, k_dtype(t), k, shape);
        if (o == NULL) return -1;
        copy_view(k_ptr(o), k_ptr(t), esize(t), k, shape, st, 0);
    }
    return 0;
}

/* ---- einsum --------------------------------------------------------------------------------- */

#define N_LABELS SUP_EINSUM_LABELS
#define N_VARS (N_LABELS + K_MAX_DIMS) /* the labels, then the "..." dims */

/* Run a parsed equation (ein->n_in == the number of tensors). */
static int einsum_run(KCall *kc, const char *eq, const SupEinsum *ein) {
    uint32_t k = ein->n_in;
    rly_dtype dt = k_dtype(k_field(kc, 0, 0));
    /* sizes of labels and of the broadcast "..." dims */
    int64_t size[N_VARS];
    uint32_t n_ell = 0;
    for (uint32_t i = 0; i < k; i++) {
        const DLTensor *t = k_field(kc, 0, i);
        const SupEinsumTerm *term = &ein->in[i];
        uint32_t labels = term->n - (term->has_ellipsis ? 1 : 0);
        if (k_dtype(t) != dt) return k_error(kc, "the tensors differ in dtype");
        if (term->has_ellipsis ? rank(t) < labels : rank(t) != labels)
            return k_error(kc, "term %u has %u labels but tensor %u has rank %u", i, labels, i,
                           rank(t));
        if (rank(t) - labels > n_ell) n_ell = rank(t) - labels;
    }
    if (n_ell > 0 && !ein->out.has_ellipsis)
        return k_error(kc, "equation \"%s\": the output has no \"...\"", eq);
    for (uint32_t v = 0; v < N_VARS; v++)
        size[v] = N_LABELS <= v ? 1 : -1;
    /* strides[i][v]: operand i's element stride for variable v */
    int64_t(*strides)[N_VARS] = k_scratch_n(kc, k, sizeof *strides);
    if (strides == NULL) return -1;
    int rc = 0;
    for (uint32_t i = 0; i < k && rc == 0; i++) {
        const DLTensor *t = k_field(kc, 0, i);
        const SupEinsumTerm *term = &ein->in[i];
        int64_t st[K_MAX_DIMS];
        k_strides(rank(t), t->shape, st);
        uint32_t ell = rank(t) - (term->n - (term->has_ellipsis ? 1 : 0)), d = 0;
        for (uint32_t j = 0; j < term->n && rc == 0; j++) {
            int l = ein->items[term->start + j];
            if (l == SUP_EINSUM_ELLIPSIS) {
                for (uint32_t e = 0; e < ell; e++, d++) {
                    uint32_t v = N_LABELS + n_ell - ell + e;
                    int64_t sz = dim(t, d);
                    if (sz == 1) continue; /* broadcasts: stride 0 */
                    if (size[v] != 1 && size[v] != sz)
                        rc = k_error(kc, "the \"...\" dims of tensor %u do not broadcast", i);
                    size[v] = sz;
                    strides[i][v] += st[d];
                }
                continue;
            }
            int64_t sz = dim(t, d);
            if (size[l] >= 0 && size[l] != sz)
                rc = k_error(kc, "label %c has sizes %lld and %lld", sup_einsum_char(l),
                             (long long)size[l], (long long)sz);
            size[l] = sz;
            strides[i][l] += st[d++];
        }
    }
    /* the output variables (the parser checked the output's labels), then the summed ones */
    uint32_t ov[N_VARS], sv[N_VARS], n_ov = 0, n_sv = 0;
    bool in_out[N_VARS] = {0};
    for (uint32_t j = 0; j < ein->out.n; j++) {
        int l = ein->items[ein->out.start + j];
        if (l == SUP_EINSUM_ELLIPSIS) {
            for (uint32_t e = 0; e < n_ell; e++)
                ov[n_ov++] = N_LABELS + e, in_out[N_LABELS + e] = true;
        } else {
            ov[n_ov++] = (uint32_t)l, in_out[l] = true;
        }
    }
    for (uint32_t l = 0; l < N_LABELS; l++)
        if (ein->count[l] > 0 && !in_out[l]) sv[n_sv++] = l;
    if (rc == 0 && n_ov > K_MAX_DIMS) rc = k_error(kc, "the result rank exceeds %d", K_MAX_DIMS);
    DLTensor *o = NULL;
    int64_t shape[N_VARS], ssize[N_VARS];
    if (rc == 0) {
        for (uint32_t j = 0; j < n_ov; j++)
            shape[j] = size[ov[j]];
        for (uint32_t j = 0; j < n_sv; j++)
            ssize[j] = size[sv[j]];
        o = k_out(kc, 0, dt, n_ov, shape);
        if (o == NULL) rc = -1;
    }
    if (rc == 0) {
        int64_t total = k_shape_numel(n_ov, shape), inner = k_shape_numel(n_sv, ssize);
        int64_t oidx[N_VARS] = {0};
        bool fl = sup_dtype_is_float(dt);
        for (int64_t i = 0; i < total; i++) {
            int64_t sidx[N_VARS] = {0};
            double accf = 0;
            uint64_t acci = 0;
            for (int64_t r = 0; r < inner; r++) {
                double pf = 1;
                uint64_t pi = 1;
                for (uint32_t t = 0; t < k; t++) {
                    int64_t off = 0;
                    for (uint32_t j = 0; j < n_ov; j++)
                        off += oidx[j] * strides[t][ov[j]];
                    for (uint32_t j = 0; j < n_sv; j++)
                        off += sidx[j] * strides[t][sv[j]];
                    const void *base = k_ptr(k_field(kc, 0, t));
                    if (fl)
                        pf *= k_loadf(base, dt, off);
                    else
                        pi *= k_loadu(base, dt, off);
                }
                if (fl)
                    accf += pf;
                else
                    acci += pi;
                k_next(sidx, n_sv, ssize);
            }
            if (fl)
                k_storef(k_ptr(o), dt, i, accf);
            else
                k_storeu(k_ptr(o), dt, i, acci);
            k_next(oidx, n_ov, shape);
        }
    }
    return rc;
}

/* Sum over the variables not in the output of the product of the operands. Each operand's
 * variables give it a stride per variable (a repeated label adds its strides: a diagonal). */
static int einsum_ref(KCall *kc) {
    uint32_t k = kc->arg_len[0];
    if (k == 0 || k > SUP_EINSUM_MAX_TERMS)
        return k_error(kc, "einsum takes 1 to %d tensors", SUP_EINSUM_MAX_TERMS);
    const char *eq = k_str(kc, "equation");
    SupEinsum *ein = k_scratch(kc, sizeof *ein);
    if (ein == NULL) return -1;
    char why[256];
    int rc = 0;
    if (sup_einsum_parse(eq, ein, why, sizeof why) != NULL)
        rc = k_error(kc, "%s", why);
    else if (ein->n_in != k)
        rc = k_error(kc, "equation \"%s\" has %u terms for %u tensors", eq, ein->n_in, k);
    if (rc == 0) rc = einsum_run(kc, eq, ein);
    return rc;
}

/* ---- trilu, matrix_set_diag, sliding_window, invert_permutation ----------------------------- */

static int trilu_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *kt = k_arg(kc, 1);
    uint32_t n = rank(x);
    if (n < 2) return k_error(kc, "data must have rank 2 or more");
    if (k_numel(kt) != 1) return k_error(kc, "k must be a scalar");
    int64_t k = k_loadi(k_ptr(kt), k_dtype(kt), 0), shape[K_MAX_DIMS];
    bool upper = k_bool(kc, "upper");
    shape_copy(x, shape);
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    copy_all(k_ptr(o), x);
    int64_t rows = shape[n - 2], cols = shape[n - 1], total = k_numel(x);
    size_t es = esize(x);
    for (int64_t i = 0; i < total; i++) {
        int64_t c = i % cols, r = (i / cols) % rows;
        bool keep = upper ? c - r >= k : c - r <= k;
        if (!keep) zero_elem(k_ptr(o), es, i);
    }
    return 0;
}

static int matrix_set_diag_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *dg = k_arg(kc, 1);
    uint32_t n = rank(x);
    int64_t k1 = k_int(kc, "k1"), k2 = k_int(kc, "k2");
    bool super_right = k_bool(kc, "super_diag_right_align");
    bool sub_right = k_bool(kc, "sub_diag_right_align");
    if (n < 2 || k1 > k2) return k_error(kc, "needs rank 2 or more and k1 <= k2");
    if (k_dtype(dg) != k_dtype(x)) return k_error(kc, "the dtypes differ");
    int64_t rows = dim(x, n - 2), cols = dim(x, n - 1), shape[K_MAX_DIMS];
    uint32_t want = k1 == k2 ? n - 1 : n;
    if (rank(dg) != want) return k_error(kc, "diagonal must have rank %u", want);
    for (uint32_t i = 0; i + 2 < n; i++)
        if (dim(dg, i) != dim(x, i))
            return k_error(kc, "diagonal differs in batch dimension %u", i);
    int64_t n_diag = k1 == k2 ? 1 : dim(dg, n - 2), max_len = dim(dg, want - 1);
    uint64_t width = (uint64_t)k2 - (uint64_t)k1; /* k1 <= k2: exact */
    if (n_diag < 1 || (uint64_t)n_diag - 1 != width)
        return k_error(kc, "diagonal has %lld diagonals, k1..k2 needs %llu", (long long)n_diag,
                       (unsigned long long)width + 1);
    shape_copy(x, shape);
    DLTensor *o = k_out(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    copy_all(k_ptr(o), x);
    int64_t total = k_numel(x), mat = rows * cols;
    size_t es = esize(x);
    for (int64_t i = 0; i < total; i++) {
        int64_t c = i % cols, r = (i / cols) % rows, b = mat ? i / mat : 0, d = c - r;
        if (d < k1 || d > k2) continue;
        int64_t row = 0, off = 0;
        if (k1 != k2) {
            row = k2 - d;
            int64_t m = d >= 0 ? (cols - d < rows ? cols - d : rows)
                               : (cols < rows + d ? cols : rows + d); /* this diagonal's length */
            if (d >= 0 ? super_right : sub_right) off = max_len - m;
        }
        int64_t pos = (d >= 0 ? r : c) + off;
        if (pos < 0 || pos >= max_len)
            return k_error(kc, "index %lld out of range for axis %d of size %lld", (long long)pos,
                           (int)want - 1, (long long)max_len);
        int64_t src = (b * n_diag + row) * max_len + pos;
        memcpy((char *)k_ptr(o) + i * (int64_t)es, (const char *)k_ptr(dg) + src * (int64_t)es, es);
    }
    return 0;
}

static int sliding_window_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t n = rank(x);
    int64_t axis;
    if (!k_axis(k_int(kc, "axis"), n, &axis))
        return k_error(kc, "axis %lld is out of range for rank %u", (long long)k_int(kc, "axis"),
                       n);
    const int64_t *win, *str;
    uint32_t nw = k_ints(kc, "window_shape", &win), ns = k_ints(kc, "strides", &str);
    uint32_t m = n - (uint32_t)axis;
    if (nw != m || ns != m || n + m > K_MAX_DIMS)
        return k_error(kc, "window_shape and strides need %u entries each", m);
    int64_t st[K_MAX_DIMS], shape[K_MAX_DIMS], vst[K_MAX_DIMS];
    k_strides(n, x->shape, st);
    for (uint32_t i = 0; i < (uint32_t)axis; i++) {
        shape[i] = dim(x, i);
        vst[i] = st[i];
    }
    for (uint32_t i = 0; i < m; i++) {
        int64_t d = dim(x, (uint32_t)axis + i);
        if (win[i] <= 0 || str[i] <= 0 || d < win[i])
            return k_error(kc, "window %lld (stride %lld) does not fit axis %lld of size %lld",
                           (long long)win[i], (long long)str[i], (long long)axis + i, (long long)d);
        shape[axis + i] = (d - win[i]) / str[i] + 1;
        vst[axis + i] = shape[axis + i] > 1 ? st[axis + i] * str[i] : 0;
        shape[n + i] = win[i];
        vst[n + i] = st[axis + i];
    }
    DLTensor *o = k_out(kc, 0, k_dtype(x), n + m, shape);
    if (o == NULL) return -1;
    copy_view(k_ptr(o), k_ptr(x), esize(x), n + m, shape, vst, 0);
    return 0;
}

static int invert_permutation_ref(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    if (rank(x) != 1) return k_error(kc, "data must be 1-D");
    int64_t n = dim(x, 0);
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, 1, &n);
    if (o == NULL) return -1;
    bool *seen = k_scratch_n(kc, n, 1);
    if (seen == NULL) return -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = k_loadi(k_ptr(x), dt, i);
        if (dt == RLY_DTYPE_U64 && k_loadu(k_ptr(x), dt, i) > INT64_MAX) v = -1;
        if (v < 0 || v >= n)
            return k_error(kc, "index %lld out of range for axis %d of size %lld", (long long)v, 0,
                           (long long)n);
        if (seen[v])
            return k_error(kc, "data is not a permutation: %lld appears twice", (long long)v);
        seen[v] = true;
        k_storei(k_ptr(o), dt, v, i);
    }
    return 0;
}

/* ---- the table --------------------------------------------------------------------------------
 */

const KernelDef kern_ref_transform[] = {
    {OP_ID_CAST, cast_ref},
    {OP_ID_CAST_LIKE, cast_like_ref},
    {OP_ID_REINTERPRET, reinterpret_ref},
    {OP_ID_EXPAND_DIMS, expand_dims_ref},
    {OP_ID_SQUEEZE, squeeze_ref},
    {OP_ID_RESHAPE, reshape_ref},
    {OP_ID_RESHAPE_LIKE, reshape_like_ref},
    {OP_ID_TRANSPOSE, transpose_ref},
    {OP_ID_CONCATENATE, concatenate_ref},
    {OP_ID_STACK, stack_ref},
    {OP_ID_SPLIT, split_ref},
    {OP_ID_TILE, tile_ref},
    {OP_ID_REPEAT, repeat_ref},
    {OP_ID_REVERSE, reverse_ref},
    {OP_ID_REVERSE_SEQUENCE, reverse_sequence_ref},
    {OP_ID_WHERE, where_ref},
    {OP_ID_BROADCAST_TO, broadcast_to_ref},
    {OP_ID_BROADCAST_TO_LIKE, broadcast_to_like_ref},
    {OP_ID_COLLAPSE_SUM_LIKE, collapse_sum_like_ref},
    {OP_ID_COLLAPSE_SUM_TO, collapse_sum_to_ref},
    {OP_ID_LAYOUT_TRANSFORM, layout_transform_ref},
    {OP_ID_STRIDED_SLICE, strided_slice_ref},
    {OP_ID_SLICE_LIKE, slice_like_ref},
    {OP_ID_MESHGRID, meshgrid_ref},
    {OP_ID_EINSUM, einsum_ref},
    {OP_ID_TRILU, trilu_ref},
    {OP_ID_MATRIX_SET_DIAG, matrix_set_diag_ref},
    {OP_ID_SLIDING_WINDOW, sliding_window_ref},
    {OP_ID_INVERT_PERMUTATION, invert_permutation_ref},
    {0, NULL},
};
