/* nn.c - reference kernels of the nn operators (see src/ops/op_nn.c): dense, matmul and
 * batch_matmul, bias_add, the normalizations, the softmax family, activations, dropout,
 * batch_flatten, depth/space rearrangements, losses and fifo_buffer.
 *
 * The products take the float32 GEMM (nn_common.c) when operands and result are float32, and
 * otherwise cast both operands to the result dtype and accumulate in double or uint64 (see
 * nn_ref.h). Normalizations, softmax and losses compute in double and round once. Semantics
 * follow TVM's topi computes and SimplifyInference:
 *   batch_norm returns (normalized, moving_mean, moving_var), the statistics passed through;
 *   batch_norm_training normalizes with the batch's mean and biased variance over every axis but
 *     `axis` and returns the moving statistics updated as momentum * old + (1 - momentum) * batch;
 *   layer_norm reduces over `axis`; instance_norm over every axis but 0 and `axis`;
 *   group_norm over the channels of a group and every axis after `axis` (axes before it are
 *     kept apart, as TVM's reshape to (..., G, C/G, ...) does); variances are population ones;
 *   l2_normalize with axis None reduces over every axis (an empty list over none);
 *   lrn sums squares over channels [c - size/2, c - size/2 + size) and divides alpha by size;
 *   fast_softmax is softmax (its result within fast_exp's error);
 *   leaky_relu multiplies by alpha converted to the dtype (truncated for integers);
 *   dropout at inference is the identity, with an all-ones mask;
 *   nll_loss's mean divides by the summed weights of the targets not ignored. */
#include "kernels/ref/nn_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- element helpers --------------------------------------------------------------------------
 */

static bool is_float(rly_dtype dt) { return sup_dtype_is_float(dt); }

/* a + b in dtype dt (integers wrap). */
static void store_add(void *dst, rly_dtype dt, int64_t i, const void *a, int64_t ia, const void *b,
                      int64_t ib) {
    if (is_float(dt))
        k_storef(dst, dt, i, k_loadf(a, dt, ia) + k_loadf(b, dt, ib));
    else
        k_storeu(dst, dt, i, (uint64_t)k_loadi(a, dt, ia) + (uint64_t)k_loadi(b, dt, ib));
}

/* x > 0 for any dtype (unsigned: x != 0). */
static bool positive(const void *base, rly_dtype dt, int64_t i) {
    if (is_float(dt)) return k_loadf(base, dt, i) > 0;
    if (sup_dtype_is_int(dt)) return k_loadi(base, dt, i) > 0;
    return k_loadu(base, dt, i) != 0;
}

/* Every element of t cast to `as`, as doubles (KNUM_F64) or uint64 patterns (KNUM_U64), in a
 * new array; NULL on failure. */
static void *cast_all(KCall *kc, const DLTensor *t, KNum num, rly_dtype as) {
    int64_t n = k_numel(t);
    void *p = kern_nn_scratch(kc, n, 8);
    if (p == NULL) return NULL;
    const void *src = k_ptr(t);
    rly_dtype dt = k_dtype(t);
    for (int64_t i = 0; i < n; i++) {
        if (num == KNUM_F64)
            ((double *)p)[i] = kern_nn_castf(src, dt, i, as);
        else
            ((uint64_t *)p)[i] = kern_nn_castu(src, dt, i, as);
    }
    return p;
}

static rly_dtype out_dtype_or(KCall *kc, rly_dtype dflt) {
    int64_t dt = k_int(kc, "out_dtype");
    return dt < 0 || dt >= RLY_DTYPE_COUNT ? dflt : (rly_dtype)dt;
}

/* ---- dense / matmul / batch_matmul ------------------------------------------------------------
 */

/* One product C(i, j) = sum_p A(i, p) * B(p, j) for i < m, j < n, p < k, with the operands
 * strided: A(i, p) at a_off + i * a_rm + p * a_rk, B(p, j) at b_off + p * b_rk + j * b_rn, C row
 * major at c_off. */
typedef struct Prod {
    int64_t m, n, k;
    int64_t a_off, a_rm, a_rk, b_off, b_rk, b_rn, c_off;
} Prod;

static int prod_f32(KCall *kc, const Prod *p, const float *a, const float *b, float *c) {
    KStrided bs = {.p = b + p->b_off, .rk = p->b_rk, .rn = p->b_rn};
    KGemm g = {.m = p->m,
               .n = p->n,
               .k = p->k,
               .a = a + p->a_off,
               .a_rm = p->a_rm,
               .a_rk = p->a_rk,
               .pack_b = kern_nn_pack_strided,
               .b_ctx = &bs,
               .c = c + p->c_off,
               .ldc = p->n};
    return kern_nn_gemm_f32(kc, &g);
}

static void prod_f64(const Prod *p, const double *a, const double *b, DLTensor *o) {
    void *dst = k_ptr(o);
    rly_dtype dt = k_dtype(o);
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            double acc = 0;
            const double *ar = a + p->a_off + i * p->a_rm, *bc = b + p->b_off + j * p->b_rn;
            for (int64_t q = 0; q < p->k; q++)
                acc += ar[q * p->a_rk] * bc[q * p->b_rk];
            k_storef(dst, dt, p->c_off + i * p->n + j, acc);
        }
}

static void prod_u64(const Prod *p, const uint64_t *a, const uint64_t *b, DLTensor *o) {
    void *dst = k_ptr(o);
    rly_dtype dt = k_dtype(o);
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            uint64_t acc = 0;
            const uint64_t *ar = a + p->a_off + i * p->a_rm, *bc = b + p->b_off + j * p->b_rn;
            for (int64_t q = 0; q < p->k; q++)
                acc += ar[q * p->a_rk] * bc[q * p->b_rk];
            k_storeu(dst, dt, p->c_off + i * p->n + j, acc);
        }
}

/* Runs the products ps[0..n_ps) of operands a and b into o in the class of the dtypes. */
static int run_prods(KCall *kc, const Prod *ps, int64_t n_ps, const DLTensor *a, const DLTensor *b,
                     DLTensor *o) {
    rly_dtype odt = k_dtype(o);
    KNum num = kern_nn_num(odt, k_dtype(a), k_dtype(b));
    if (num == KNUM_F32) {
        for (int64_t i = 0; i < n_ps; i++)
            if (prod_f32(kc, &ps[i], k_ptr(a), k_ptr(b), k_ptr(o)) != 0) return -1;
        return 0;
    }
    void *ac = cast_all(kc, a, num, odt), *bc = ac ? cast_all(kc, b, num, odt) : NULL;
    if (bc != NULL)
        for (int64_t i = 0; i < n_ps; i++) {
            if (num == KNUM_F64)
                prod_f64(&ps[i], ac, bc, o);
            else
                prod_u64(&ps[i], ac, bc, o);
        }
    return bc == NULL ? -1 : 0;
}

/* A (..., k) (or (..., k, m) with ta) times B (k, units) (or (units, k) with tb). */
static int matmul_common(KCall *kc, bool ta, bool tb) {
    const DLTensor *a = k_arg(kc, 0), *b = k_arg(kc, 1);
    uint32_t n = (uint32_t)a->ndim;
    if (n < (ta ? 2u : 1u) || b->ndim != 2) return k_error(kc, "operand ranks do not fit");
    int64_t ka = ta ? a->shape[n - 2] : a->shape[n - 1];
    int64_t kb = tb ? b->shape[1] : b->shape[0], units = tb ? b->shape[0] : b->shape[1];
    if (ka != kb)
        return k_error(kc, "the operands have %lld and %lld input features", (long long)ka,
                       (long long)kb);
    if (!k_is_none(kc, "units") && k_int(kc, "units") != units)
        return k_error(kc, "units=%lld but the weight has %lld output features",
                       (long long)k_int(kc, "units"), (long long)units);
    int64_t shape[K_MAX_DIMS];
    memcpy(shape, a->shape, n * sizeof(int64_t));
    shape[n - 1] = units;
    if (ta) shape[n - 2] = a->shape[n - 1];
    DLTensor *o = k_out(kc, 0, out_dtype_or(kc, k_dtype(a)), n, shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* dims may be huge */
    Prod p = {.n = units, .k = ka, .b_rk = tb ? 1 : units, .b_rn = tb ? ka : 1};
    if (!ta) {
        p.m = ka > 0 ? k_numel(a) / ka : k_shape_numel(n - 1, a->shape);
        p.a_rm = ka;
        p.a_rk = 1;
        return run_prods(kc, &p, 1, a, b, o);
    }
    int64_t batch = k_shape_numel(n - 2, a->shape), m = a->shape[n - 1];
    Prod *ps = kern_nn_scratch(kc, batch, sizeof(Prod));
    if (ps == NULL) return -1;
    for (int64_t i = 0; i < batch; i++) {
        ps[i] = p;
        ps[i].m = m;
        ps[i].a_off = i * ka * m;
        ps[i].a_rm = 1;
        ps[i].a_rk = m;
        ps[i].c_off = i * m * units;
    }
    int rc = run_prods(kc, ps, batch, a, b, o);
    return rc;
}

static int k_dense(KCall *kc) { return matmul_common(kc, false, true); }
static int k_matmul(KCall *kc) {
    return matmul_common(kc, k_bool(kc, "transpose_a"), k_bool(kc, "transpose_b"));
}

static int k_batch_matmul(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *y = k_arg(kc, 1);
    if (x->ndim != 3 || y->ndim != 3) return k_error(kc, "operands must be 3-D");
    bool ta = k_bool(kc, "transpose_a"), tb = k_bool(kc, "transpose_b");
    int64_t bx = x->shape[0], by = y->shape[0];
    int64_t xi = x->shape[ta ? 2 : 1], xk = x->shape[ta ? 1 : 2];
    int64_t yk = y->shape[tb ? 2 : 1], yj = y->shape[tb ? 1 : 2];
    if (bx != by && bx != 1 && by != 1)
        return k_error(kc, "batch dimensions %lld and %lld differ and neither is 1", (long long)bx,
                       (long long)by);
    if (xk != yk)
        return k_error(kc, "tensor_a has %lld columns to reduce but tensor_b has %lld",
                       (long long)xk, (long long)yk);
    int64_t batch = bx == 1 ? by : bx, shape[3] = {batch, xi, yj};
    DLTensor *o = k_out(kc, 0, out_dtype_or(kc, k_dtype(x)), 3, shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* dims may be huge */
    Prod *ps = kern_nn_scratch(kc, batch, sizeof(Prod));
    if (ps == NULL) return -1;
    for (int64_t i = 0; i < batch; i++) {
        Prod p = {.m = xi,
                  .n = yj,
                  .k = xk,
                  .a_off = (bx == 1 ? 0 : i) * xi * xk,
                  .a_rm = ta ? 1 : xk,
                  .a_rk = ta ? xi : 1,
                  .b_off = (by == 1 ? 0 : i) * yk * yj,
                  .b_rk = tb ? 1 : yj,
                  .b_rn = tb ? yk : 1,
                  .c_off = i * xi * yj};
        ps[i] = p;
    }
    int rc = run_prods(kc, ps, batch, x, y, o);
    return rc;
}

/* ---- per-channel ops: bias_add, prelu ------------------------------------------------------- */

/* The data's axis attribute and the (outer, channels, inner) split of its shape around it. */
static int channel_split(KCall *kc, const DLTensor *x, int64_t *outer, int64_t *c, int64_t *inner) {
    int64_t axis;
    if (!k_axis(k_int(kc, "axis"), (uint32_t)x->ndim, &axis))
        return k_error(kc, "axis %lld is out of range for rank %d", (long long)k_int(kc, "axis"),
                       x->ndim);
    *outer = k_shape_numel((uint32_t)axis, x->shape);
    *c = x->shape[axis];
    *inner = k_shape_numel((uint32_t)(x->ndim - axis - 1), x->shape + axis + 1);
    return 0;
}

static int k_bias_add(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *bias = k_arg(kc, 1);
    int64_t outer, c, inner;
    if (channel_split(kc, x, &outer, &c, &inner) != 0) return -1;
    if (bias->ndim != 1 || bias->shape[0] != c || k_dtype(bias) != k_dtype(x))
        return k_error(kc, "bias must have %lld elements of data's dtype", (long long)c);
    DLTensor *o = k_out(kc, 0, k_dtype(x), (uint32_t)x->ndim, x->shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* dims may be huge */
    rly_dtype dt = k_dtype(x);
    for (int64_t i = 0, f = 0; i < outer; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t j = 0; j < inner; j++, f++)
                store_add(k_ptr(o), dt, f, k_ptr(x), f, k_ptr(bias), ch);
    return 0;
}

/* The slope of prelu and leaky_relu: element i of (base, dt), a double for a float dtype and
 * a uint64 pattern for an integer one. */
typedef struct Slope {
    double f;
    uint64_t u;
} Slope;

static Slope slope_at(const void *base, rly_dtype dt, int64_t i) {
    Slope a = {0, 0};
    if (is_float(dt))
        a.f = k_loadf(base, dt, i);
    else
        a.u = (uint64_t)k_loadi(base, dt, i);
    return a;
}

/* y[i] = x[i] where it is positive, else x[i] * a (integers wrap). */
static void store_leaky(void *y, const void *x, rly_dtype dt, int64_t i, Slope a) {
    if (positive(x, dt, i))
        k_convert(y, dt, i, x, dt, i);
    else if (is_float(dt))
        k_storef(y, dt, i, k_loadf(x, dt, i) * a.f);
    else
        k_storeu(y, dt, i, (uint64_t)k_loadi(x, dt, i) * a.u);
}

static int k_prelu(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *alpha = k_arg(kc, 1);
    int64_t outer, c, inner;
    if (channel_split(kc, x, &outer, &c, &inner) != 0) return -1;
    if (alpha->ndim != 1 || alpha->shape[0] != c || k_dtype(alpha) != k_dtype(x))
        return k_error(kc, "alpha must have %lld elements of data's dtype", (long long)c);
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* dims may be huge */
    for (int64_t i = 0, f = 0; i < outer; i++)
        for (int64_t ch = 0; ch < c; ch++) {
            Slope a = slope_at(k_ptr(alpha), dt, ch);
            for (int64_t j = 0; j < inner; j++, f++)
                store_leaky(k_ptr(o), k_ptr(x), dt, f, a);
        }
    return 0;
}

/* ---- activations, dropout, reshaping -----------------------------------------------------------
 */

static int k_relu(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
    if (o == NULL) return -1;
    int64_t n = k_numel(x);
    for (int64_t i = 0; i < n; i++) {
        if (positive(k_ptr(x), dt, i))
            k_convert(k_ptr(o), dt, i, k_ptr(x), dt, i);
        else
            k_storeu(k_ptr(o), dt, i, 0);
    }
    return 0;
}

static int k_leaky_relu(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
    if (o == NULL) return -1;
    /* TVM's make_const(dtype, alpha): rounded to a float dtype, truncated to an integer one */
    uint64_t tmp = 0;
    k_storef(&tmp, dt, 0, k_float(kc, "alpha"));
    Slope a = slope_at(&tmp, dt, 0);
    int64_t n = k_numel(x);
    for (int64_t i = 0; i < n; i++)
        store_leaky(k_ptr(o), k_ptr(x), dt, i, a);
    return 0;
}

static int k_dropout(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
    DLTensor *mask = o ? k_out(kc, 1, dt, (uint32_t)x->ndim, x->shape) : NULL;
    if (mask == NULL) return -1;
    int64_t n = k_numel(x);
    if (n > 0) memcpy(k_ptr(o), k_ptr(x), (size_t)n * sup_dtype_size(dt));
    for (int64_t i = 0; i < n; i++)
        k_storef(k_ptr(mask), dt, i, 1.0);
    return 0;
}

static int k_batch_flatten(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    if (x->ndim < 1) return k_error(kc, "data must have rank 1 or more");
    int64_t shape[2] = {x->shape[0], k_shape_numel((uint32_t)x->ndim - 1, x->shape + 1)};
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, 2, shape);
    if (o == NULL) return -1;
    int64_t n = k_numel(x);
    if (n > 0) memcpy(k_ptr(o), k_ptr(x), (size_t)n * sup_dtype_size(dt));
    return 0;
}

/* depth_to_space (DCR: channel (i * b + j) * C' + c; CRD: c * b * b + i * b + j) and
 * space_to_depth (channel (i * b + j) * C + c; TVM ignores mode there). */
static int subpixel(KCall *kc, bool to_space) {
    const DLTensor *x = k_arg(kc, 0);
    if (x->ndim != 4) return k_error(kc, "data must be 4-D");
    int64_t b = k_int(kc, "block_size");
    if (b < 1) return k_error(kc, "block_size must be positive");
    bool crd = strcmp(k_str(kc, "mode"), "CRD") == 0;
    KLayout l;
    int chw[3];
    if (k_layout_attr(kc, "layout", 4, &l) != 0 || k_layout_axes(kc, &l, "CHW", chw) != 0)
        return -1;
    int ci = chw[0], hi = chw[1], wi = chw[2];
    int64_t c = x->shape[ci], h = x->shape[hi], w = x->shape[wi], shape[4];
    memcpy(shape, x->shape, sizeof shape);
    int64_t bb = sup_dim_mul_sat(b, b); /* past the limit: k_out refuses the shape */
    if (to_space) {
        if (c % bb != 0) return k_error(kc, "channels are not divisible by block_size^2");
        shape[ci] = c / bb, shape[hi] = sup_dim_mul_sat(h, b), shape[wi] = sup_dim_mul_sat(w, b);
    } else {
        if (h % b != 0 || w % b != 0)
            return k_error(kc, "height and width must be divisible by block_size");
        shape[ci] = sup_dim_mul_sat(c, bb), shape[hi] = h / b, shape[wi] = w / b;
    }
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, 4, shape);
    if (o == NULL) return -1;
    int64_t ist[4], idx[4] = {0, 0, 0, 0}, n = k_shape_numel(4, shape);
    k_strides(4, x->shape, ist);
    for (int64_t f = 0; f < n; f++, k_next(idx, 4, shape)) {
        int64_t src[4] = {idx[0], idx[1], idx[2], idx[3]};
        int64_t oc = idx[ci], oy = idx[hi], ox = idx[wi];
        if (to_space) {
            int64_t cc = shape[ci], i = oy % b, j = ox % b;
            src[ci] = crd ? oc * b * b + i * b + j : (i * b + j) * cc + oc;
            src[hi] = oy / b, src[wi] = ox / b;
        } else {
            int64_t blk = oc / c;
            src[ci] = oc % c;
            src[hi] = oy * b + blk / b, src[wi] = ox * b + blk % b;
        }
        int64_t off = src[0] * ist[0] + src[1] * ist[1] + src[2] * ist[2] + src[3] * ist[3];
        k_convert(k_ptr(o), dt, f, k_ptr(x), dt, off);
    }
    return 0;
}

static int k_depth_to_space(KCall *kc) { return subpixel(kc, true); }
static int k_space_to_depth(KCall *kc) { return subpixel(kc, false); }

/* ---- normalizations ------------------------------------------------------------------------- */

/* A normalization's statistics groups: element f belongs to group key[f]. */
typedef struct NormGroups {
    int64_t n_keys, per_key; /* groups, and elements in each */
    int64_t *key;            /* numel entries */
} NormGroups;

/* Groups of x: the axes with reduced[d] are summed over; `axis` is split into `groups` channel
 * groups (1: kept whole, when not reduced). */
static int norm_groups(KCall *kc, const DLTensor *x, const bool *reduced, int64_t axis,
                       int64_t groups, NormGroups *ng) {
    uint32_t ndim = (uint32_t)x->ndim;
    int64_t n = k_numel(x), idx[K_MAX_DIMS] = {0};
    ng->key = kern_nn_scratch(kc, n, sizeof(int64_t));
    if (ng->key == NULL) return -1;
    ng->n_keys = 1;
    for (uint32_t d = 0; d < ndim; d++)
        if (!reduced[d])
            ng->n_keys = sup_dim_mul_sat(ng->n_keys,
                                         (int64_t)d == axis && groups > 1 ? groups : x->shape[d]);
    ng->per_key = ng->n_keys > 0 ? n / ng->n_keys : 0;
    int64_t per_group = (axis >= 0 && groups > 1) ? x->shape[axis] / groups : 1;
    for (int64_t f = 0; f < n; f++, k_next(idx, ndim, x->shape)) {
        int64_t key = 0;
        for (uint32_t d = 0; d < ndim; d++) {
            if (reduced[d]) continue;
            bool grouped = (int64_t)d == axis && groups > 1;
            key = key * (grouped ? groups : x->shape[d]) + (grouped ? idx[d] / per_group : idx[d]);
        }
        ng->key[f] = key;
    }
    return 0;
}

/* Per-group mean and population variance (two passes), into new arrays. */
static int norm_stats(KCall *kc, const DLTensor *x, const NormGroups *ng, double **mean,
                      double **var) {
    int64_t n = k_numel(x);
    *mean = kern_nn_scratch(kc, ng->n_keys, sizeof(double));
    *var = *mean ? kern_nn_scratch(kc, ng->n_keys, sizeof(double)) : NULL;
    if (*var == NULL) return -1;
    const void *src = k_ptr(x);
    rly_dtype dt = k_dtype(x);
    for (int64_t f = 0; f < n; f++)
        (*mean)[ng->key[f]] += k_loadf(src, dt, f);
    for (int64_t k = 0; k < ng->n_keys; k++)
        (*mean)[k] /= (double)ng->per_key;
    for (int64_t f = 0; f < n; f++) {
        double d = k_loadf(src, dt, f) - (*mean)[ng->key[f]];
        (*var)[ng->key[f]] += d * d;
    }
    for (int64_t k = 0; k < ng->n_keys; k++)
        (*var)[k] /= (double)ng->per_key;
    return 0;
}

/* out = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c] with the statistics of x's groups
 * (layer, group, instance norm). */
static int affine_norm(KCall *kc, const bool *reduced, int64_t axis, int64_t groups) {
    const DLTensor *x = k_arg(kc, 0), *gamma = k_arg(kc, 1), *beta = k_arg(kc, 2);
    rly_dtype dt = k_dtype(x);
    int64_t c = x->shape[axis];
    if (gamma->ndim != 1 || gamma->shape[0] != c || beta->ndim != 1 || beta->shape[0] != c ||
        k_dtype(gamma) != dt || k_dtype(beta) != dt)
        return k_error(kc, "gamma and beta must have %lld elements of data's dtype", (long long)c);
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* no statistics to keep */
    NormGroups ng = {0};
    double *mean = NULL, *var = NULL;
    int rc = -1;
    if (norm_groups(kc, x, reduced, axis, groups, &ng) != 0 ||
        norm_stats(kc, x, &ng, &mean, &var) != 0)
        goto done;
    double eps = k_float(kc, "epsilon");
    bool center = k_bool(kc, "center"), scale = k_bool(kc, "scale");
    int64_t inner = k_shape_numel((uint32_t)(x->ndim - axis - 1), x->shape + axis + 1);
    int64_t n = k_numel(x);
    for (int64_t f = 0; f < n; f++) {
        int64_t ch = (f / inner) % c, key = ng.key[f];
        double y = (k_loadf(k_ptr(x), dt, f) - mean[key]) / sqrt(var[key] + eps);
        if (scale) y *= k_loadf(k_ptr(gamma), dt, ch);
        if (center) y += k_loadf(k_ptr(beta), dt, ch);
        k_storef(k_ptr(o), dt, f, y);
    }
    rc = 0;
done: /* the scratch is released by the caller */
    return rc;
}

static int norm_axis(KCall *kc, const DLTensor *x, int64_t *axis) {
    if (!k_axis(k_int(kc, "axis"), (uint32_t)x->ndim, axis))
        return k_error(kc, "axis %lld is out of range for rank %d", (long long)k_int(kc, "axis"),
                       x->ndim);
    return 0;
}

static int k_layer_norm(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t axis;
    if (norm_axis(kc, x, &axis) != 0) return -1;
    bool reduced[K_MAX_DIMS] = {false};
    reduced[axis] = true;
    return affine_norm(kc, reduced, axis, 1);
}

static int k_instance_norm(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t axis;
    if (norm_axis(kc, x, &axis) != 0) return -1;
    bool reduced[K_MAX_DIMS] = {false};
    for (int32_t d = 1; d < x->ndim; d++)
        reduced[d] = d != axis;
    return affine_norm(kc, reduced, axis, 1);
}

static int k_group_norm(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t axis, g = k_int(kc, "num_groups");
    if (norm_axis(kc, x, &axis) != 0) return -1;
    if (g < 1 || x->shape[axis] % g != 0)
        return k_error(kc, "%lld channels cannot be split into num_groups=%lld groups",
                       (long long)x->shape[axis], (long long)g);
    bool reduced[K_MAX_DIMS] = {false};
    for (int32_t d = (int32_t)axis + 1; d < x->ndim; d++)
        reduced[d] = true;
    if (g == 1) reduced[axis] = true;
    return affine_norm(kc, reduced, axis, g);
}

static int k_batch_norm(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t axis;
    if (norm_axis(kc, x, &axis) != 0) return -1;
    int64_t c = x->shape[axis];
    for (uint32_t a = 1; a < 5; a++)
        if (k_arg(kc, a)->ndim != 1 || k_arg(kc, a)->shape[0] != c ||
            k_dtype(k_arg(kc, a)) != k_dtype(x))
            return k_error(kc,
                           "gamma, beta, moving_mean and moving_var must have %lld elements of "
                           "data's dtype",
                           (long long)c);
    rly_dtype dt = k_dtype(x);
    int64_t one = c;
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
    DLTensor *om = o ? k_out(kc, 1, dt, 1, &one) : NULL;
    DLTensor *ov = om ? k_out(kc, 2, dt, 1, &one) : NULL;
    if (ov == NULL) return -1;
    const void *gamma = k_ptr(k_arg(kc, 1)), *beta = k_ptr(k_arg(kc, 2));
    const void *mean = k_ptr(k_arg(kc, 3)), *var = k_ptr(k_arg(kc, 4));
    double eps = k_float(kc, "epsilon");
    bool center = k_bool(kc, "center"), scale = k_bool(kc, "scale");
    int64_t inner = k_shape_numel((uint32_t)(x->ndim - axis - 1), x->shape + axis + 1);
    int64_t n = k_numel(x);
    for (int64_t f = 0; f < n; f++) {
        int64_t ch = (f / inner) % c;
        double y =
            (k_loadf(k_ptr(x), dt, f) - k_loadf(mean, dt, ch)) / sqrt(k_loadf(var, dt, ch) + eps);
        if (scale) y *= k_loadf(gamma, dt, ch);
        if (center) y += k_loadf(beta, dt, ch);
        k_storef(k_ptr(o), dt, f, y);
    }
    if (c > 0) {
        memcpy(k_ptr(om), mean, (size_t)c * sup_dtype_size(dt));
        memcpy(k_ptr(ov), var, (size_t)c * sup_dtype_size(dt));
    }
    return 0;
}

/* nn.batch_norm_training: normalize with the batch's mean and biased variance per channel of
 * `axis`; the moving statistics become momentum * old + (1 - momentum) * batch (ONNX). */
static int k_batch_norm_training(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t axis;
    if (norm_axis(kc, x, &axis) != 0) return -1;
    int64_t c = x->shape[axis];
    for (uint32_t a = 1; a < 5; a++)
        if (k_arg(kc, a)->ndim != 1 || k_arg(kc, a)->shape[0] != c ||
            k_dtype(k_arg(kc, a)) != k_dtype(x))
            return k_error(kc,
                           "gamma, beta, moving_mean and moving_var must have %lld elements of "
                           "data's dtype",
                           (long long)c);
    rly_dtype dt = k_dtype(x);
    int64_t one = c;
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
    DLTensor *om = o ? k_out(kc, 1, dt, 1, &one) : NULL;
    DLTensor *ov = om ? k_out(kc, 2, dt, 1, &one) : NULL;
    if (ov == NULL) return -1;
    bool reduced[K_MAX_DIMS];
    for (int32_t d = 0; d < x->ndim; d++)
        reduced[d] = d != axis;
    NormGroups ng = {0};
    double *mean = NULL, *var = NULL;
    int rc = -1;
    if (norm_groups(kc, x, reduced, axis, 1, &ng) != 0 || norm_stats(kc, x, &ng, &mean, &var) != 0)
        goto done;
    const void *gamma = k_ptr(k_arg(kc, 1)), *beta = k_ptr(k_arg(kc, 2));
    const void *mm = k_ptr(k_arg(kc, 3)), *mv = k_ptr(k_arg(kc, 4));
    double eps = k_float(kc, "epsilon"), mom = k_float(kc, "momentum");
    bool center = k_bool(kc, "center"), scale = k_bool(kc, "scale");
    int64_t inner = k_shape_numel((uint32_t)(x->ndim - axis - 1), x->shape + axis + 1);
    int64_t n = k_numel(x);
    for (int64_t f = 0; f < n; f++) {
        int64_t ch = (f / inner) % c; /* the group key of f is its channel */
        double y = (k_loadf(k_ptr(x), dt, f) - mean[ch]) / sqrt(var[ch] + eps);
        if (scale) y *= k_loadf(gamma, dt, ch);
        if (center) y += k_loadf(beta, dt, ch);
        k_storef(k_ptr(o), dt, f, y);
    }
    for (int64_t ch = 0; ch < c; ch++) {
        k_storef(k_ptr(om), dt, ch, mom * k_loadf(mm, dt, ch) + (1 - mom) * mean[ch]);
        k_storef(k_ptr(ov), dt, ch, mom * k_loadf(mv, dt, ch) + (1 - mom) * var[ch]);
    }
    rc = 0;
done: /* the scratch is released by the caller */
    return rc;
}

static int k_l2_normalize(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t ndim = (uint32_t)x->ndim;
    bool reduced[K_MAX_DIMS] = {false};
    if (k_is_none(kc, "axis")) {
        for (uint32_t d = 0; d < ndim; d++)
            reduced[d] = true;
    } else {
        const int64_t *axes;
        uint32_t n = k_ints(kc, "axis", &axes);
        for (uint32_t i = 0; i < n; i++) {
            int64_t a;
            if (!k_axis(axes[i], ndim, &a))
                return k_error(kc, "axis %lld is out of range for rank %u", (long long)axes[i],
                               ndim);
            reduced[a] = true;
        }
    }
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, ndim, x->shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* no sums to keep */
    NormGroups ng = {0};
    if (norm_groups(kc, x, reduced, -1, 1, &ng) != 0) return -1;
    double *ss = kern_nn_scratch(kc, ng.n_keys, sizeof(double));
    if (ss == NULL) return -1;
    int64_t n = k_numel(x);
    double eps = k_float(kc, "eps");
    for (int64_t f = 0; f < n; f++) {
        double v = k_loadf(k_ptr(x), dt, f);
        ss[ng.key[f]] += v * v;
    }
    for (int64_t f = 0; f < n; f++) {
        double s = ss[ng.key[f]];
        k_storef(k_ptr(o), dt, f, k_loadf(k_ptr(x), dt, f) / sqrt(s > eps ? s : eps));
    }
    return 0;
}

static int k_lrn(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t outer, c, inner, size = k_int(kc, "size");
    if (channel_split(kc, x, &outer, &c, &inner) != 0) return -1;
    if (size < 1) return k_error(kc, "size must be positive");
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* outer may be huge */
    double bias = k_float(kc, "bias"), alpha = k_float(kc, "alpha"), beta = k_float(kc, "beta");
    const void *src = k_ptr(x);
    for (int64_t i = 0; i < outer; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t j = 0; j < inner; j++) {
                double ss = 0;
                /* the window [ch - size/2, ch - size/2 + size) clipped to the channels: the work
                 * does not grow with size */
                int64_t lo = ch - size / 2, hi = ch + (size - size / 2);
                for (int64_t t = lo < 0 ? 0 : lo; t < hi && t < c; t++) {
                    double v = k_loadf(src, dt, (i * c + t) * inner + j);
                    ss += v * v;
                }
                int64_t f = (i * c + ch) * inner + j;
                k_storef(k_ptr(o), dt, f,
                         k_loadf(src, dt, f) / pow(bias + alpha * ss / (double)size, beta));
            }
    return 0;
}

/* ---- softmax family ------------------------------------------------------------------------- */

static int softmax_common(KCall *kc, bool log_form) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t outer, c, inner;
    if (channel_split(kc, x, &outer, &c, &inner) != 0) return -1;
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* outer may be huge */
    const void *src = k_ptr(x);
    void *dst = k_ptr(o);
    for (int64_t i = 0; i < outer; i++)
        for (int64_t j = 0; j < inner; j++) {
            int64_t base = i * c * inner + j;
            double mx = -INFINITY, sum = 0;
            for (int64_t t = 0; t < c; t++) {
                double v = k_loadf(src, dt, base + t * inner);
                if (v > mx) mx = v;
            }
            for (int64_t t = 0; t < c; t++)
                sum += exp(k_loadf(src, dt, base + t * inner) - mx);
            for (int64_t t = 0; t < c; t++) {
                double v = k_loadf(src, dt, base + t * inner) - mx;
                k_storef(dst, dt, base + t * inner, log_form ? v - log(sum) : exp(v) / sum);
            }
        }
    return 0;
}

static int k_softmax(KCall *kc) { return softmax_common(kc, false); }
static int k_log_softmax(KCall *kc) { return softmax_common(kc, true); }

/* ---- losses ------------------------------------------------------------------------------------
 */

/* mean over the batch of -sum(targets * log(predictions)) (or of the predictions themselves). */
static int cross_entropy_common(KCall *kc, bool logits) {
    const DLTensor *x = k_arg(kc, 0), *y = k_arg(kc, 1);
    if (x->ndim != 2 || !k_same_shape(x, y) || k_dtype(x) != k_dtype(y))
        return k_error(kc, "predictions and targets must be 2-D of the same shape and dtype");
    rly_dtype dt = k_dtype(x);
    DLTensor *o = k_out(kc, 0, dt, 0, NULL);
    if (o == NULL) return -1;
    double sum = 0;
    int64_t n = k_numel(x);
    for (int64_t i = 0; i < n; i++) {
        double p = k_loadf(k_ptr(x), dt, i);
        sum += k_loadf(k_ptr(y), dt, i) * (logits ? p : log(p));
    }
    k_storef(k_ptr(o), dt, 0, -sum / (double)x->shape[0]);
    return 0;
}

static int k_cross_entropy(KCall *kc) { return cross_entropy_common(kc, false); }
static int k_cross_entropy_with_logits(KCall *kc) { return cross_entropy_common(kc, true); }

static int k_nll_loss(KCall *kc) {
    const DLTensor *pred = k_arg(kc, 0), *tgt = k_arg(kc, 1), *wt = k_arg(kc, 2);
    uint32_t nd = (uint32_t)pred->ndim;
    if (nd < 2 || (uint32_t)tgt->ndim + 1 != nd || wt->ndim != 1 ||
        wt->shape[0] != pred->shape[1] || k_dtype(wt) != k_dtype(pred))
        return k_error(kc, "predictions, targets and weights do not fit");
    for (uint32_t i = 0; i < (uint32_t)tgt->ndim; i++)
        if (tgt->shape[i] != pred->shape[i == 0 ? 0 : i + 1])
            return k_error(kc, "predictions and targets disagree outside the class axis");
    rly_dtype dt = k_dtype(pred), tt = k_dtype(tgt);
    const char *red = k_str(kc, "reduction");
    bool none = strcmp(red, "none") == 0, mean = strcmp(red, "mean") == 0;
    DLTensor *o = k_out(kc, 0, dt, none ? (uint32_t)tgt->ndim : 0, tgt->shape);
    if (o == NULL) return -1;
    int64_t c = pred->shape[1], batch = pred->shape[0], n = k_numel(tgt);
    int64_t inner = batch > 0 ? n / batch : 0, ignore = k_int(kc, "ignore_index");
    double loss_sum = 0, weight_sum = 0;
    for (int64_t f = 0; f < n; f++) {
        int64_t t = k_loadi(k_ptr(tgt), tt, f), b = inner > 0 ? f / inner : 0, r = f - b * inner;
        double loss = 0;
        if (t != ignore) {
            if (t < 0 || t >= c)
                return k_error(kc, "target %lld is not a class index in [0, %lld)", (long long)t,
                               (long long)c);
            double w = k_loadf(k_ptr(wt), dt, t);
            loss = -k_loadf(k_ptr(pred), dt, (b * c + t) * inner + r) * w;
            weight_sum += w;
        }
        if (none) k_storef(k_ptr(o), dt, f, loss);
        loss_sum += loss;
    }
    if (!none) k_storef(k_ptr(o), dt, 0, mean ? loss_sum / weight_sum : loss_sum);
    return 0;
}

/* ---- fifo_buffer --------------------------------------------------------------------------------
 */

/* concatenate(buffer, data) along axis, without its first data.shape[axis] entries. */
static int k_fifo_buffer(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *buf = k_arg(kc, 1);
    int64_t axis;
    if (x->ndim != buf->ndim || k_dtype(x) != k_dtype(buf))
        return k_error(kc, "data and buffer must have the same rank and dtype");
    if (!k_axis(k_int(kc, "axis"), (uint32_t)buf->ndim, &axis))
        return k_error(kc, "axis is out of range");
    for (int32_t d = 0; d < buf->ndim; d++)
        if (d != axis && x->shape[d] != buf->shape[d])
            return k_error(kc, "data and buffer differ on dimension %d", d);
    int64_t dn = x->shape[axis], bn = buf->shape[axis];
    if (dn >= bn) return k_error(kc, "the buffer must hold more entries than data on the axis");
    rly_dtype dt = k_dtype(buf);
    DLTensor *o = k_out(kc, 0, dt, (uint32_t)buf->ndim, buf->shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* outer may be huge */
    int64_t outer = k_shape_numel((uint32_t)axis, buf->shape);
    int64_t inner = k_shape_numel((uint32_t)(buf->ndim - axis - 1), buf->shape + axis + 1);
    size_t es = sup_dtype_size(dt);
    const char *bs = k_ptr(buf), *xs = k_ptr(x);
    char *os = k_ptr(o);
    for (int64_t i = 0; i < outer; i++) {
        size_t keep = (size_t)((bn - dn) * inner) * es, add = (size_t)(dn * inner) * es;
        char *row = os + (size_t)(i * bn * inner) * es;
        if (keep) memcpy(row, bs + (size_t)((i * bn + dn) * inner) * es, keep);
        if (add) memcpy(row + keep, xs + (size_t)(i * dn * inner) * es, add);
    }
    return 0;
}

const KernelDef kern_ref_nn[] = {
    {OP_ID_NN_DENSE, k_dense},
    {OP_ID_NN_MATMUL, k_matmul},
    {OP_ID_NN_BATCH_MATMUL, k_batch_matmul},
    {OP_ID_NN_BIAS_ADD, k_bias_add},
    {OP_ID_NN_BATCH_NORM, k_batch_norm},
    {OP_ID_NN_BATCH_NORM_TRAINING, k_batch_norm_training},
    {OP_ID_NN_LAYER_NORM, k_layer_norm},
    {OP_ID_NN_GROUP_NORM, k_group_norm},
    {OP_ID_NN_INSTANCE_NORM, k_instance_norm},
    {OP_ID_NN_L2_NORMALIZE, k_l2_normalize},
    {OP_ID_NN_LRN, k_lrn},
    {OP_ID_NN_SOFTMAX, k_softmax},
    {OP_ID_NN_FAST_SOFTMAX, k_softmax},
    {OP_ID_NN_LOG_SOFTMAX, k_log_softmax},
    {OP_ID_NN_RELU, k_relu},
    {OP_ID_NN_LEAKY_RELU, k_leaky_relu},
    {OP_ID_NN_PRELU, k_prelu},
    {OP_ID_NN_DROPOUT, k_dropout},
    {OP_ID_NN_BATCH_FLATTEN, k_batch_flatten},
    {OP_ID_NN_DEPTH_TO_SPACE, k_depth_to_space},
    {OP_ID_NN_SPACE_TO_DEPTH, k_space_to_depth},
    {OP_ID_NN_CROSS_ENTROPY, k_cross_entropy},
    {OP_ID_NN_CROSS_ENTROPY_WITH_LOGITS, k_cross_entropy_with_logits},
    {OP_ID_NN_NLL_LOSS, k_nll_loss},
    {OP_ID_NN_FIFO_BUFFER, k_fifo_buffer},
    {0, NULL},
};
