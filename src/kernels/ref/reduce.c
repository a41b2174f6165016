/* reduce.c - reference kernels of the reductions (see src/ops/op_reduce.c): sum, mean, max,
 * min, prod, all, any, argmax, argmin, variance, std, logsumexp.
 *
 * The reduced axes follow the relation (TVM's ReduceAttrs): axis None or [] reduces every axis,
 * negative axes count from the end, exclude=True reduces the axes NOT listed, keepdims leaves
 * each reduced axis as a 1. Every kernel walks its input once in row-major order, keeping per
 * element the flat index of its output and its flat index within the reduced sub-space (the
 * index argmax/argmin return), and accumulates into one slot per output element: floats in
 * double, rounded once on store; integers in 64-bit wrapping arithmetic, wrapped to the dtype on
 * store. Semantics chosen where numpy and TVM differ or leave a case open:
 *   - an empty reduction gives 0 for sum, 1 for prod, true for all, false for any, -inf for
 *     logsumexp, NaN for a float mean, the dtype's lowest value for max (-inf for floats, false
 *     for bool) and its highest for min (+inf, true), as TVM's reducers start and ONNX's
 *     ReduceMax/ReduceMin-20 specify; argmax and argmin over an empty axis are the error
 *     "reduction over an empty axis" (ONNX: no index to give); an integer mean or variance over
 *     an empty axis (or variance with unbiased over a single element) is "integer division by
 *     zero";
 *   - mean of integers: the exact sum (in 64 bits) divided by the count truncating toward zero
 *     (TVM sums in the dtype first, which differs only when the sum overflows the dtype);
 *   - max and min propagate NaN; argmax and argmin treat NaN as the extreme value, so the first
 *     NaN wins (numpy), or the last with select_last_index, which otherwise picks the last of
 *     equal extremes;
 *   - variance and std divide by max(n - unbiased, 0) (numpy's ddof rule: 0/0 is NaN for floats);
 *     integer variance squares the differences in wrapping 64-bit arithmetic and divides
 *     truncating;
 *   - logsumexp is max + log(sum(exp(x - max))); when the max is infinite or NaN the result is
 *     the max (all -inf gives -inf, as numpy's stable formula). */
#include <math.h>
#include <stdlib.h>

#include "kernels/ref/ref_elem.h"

/* ---- the reduction plan -----------------------------------------------------------------------
 */

typedef struct RedPlan {
    uint32_t ndim;
    bool red[K_MAX_DIMS];
    uint32_t out_ndim;
    int64_t out_shape[K_MAX_DIMS];
    int64_t n_in, n_out, n_red;
    /* The walk of the input: off[0] the output's flat index, off[1] the flat index within the
     * reduced axes, off[2] an optional third operand's offset (variance's mean). */
    ReBcast it;
} RedPlan;

/* Decode axis / exclude / keepdims for input x into p; -1 (error set) on bad attributes. */
static int red_plan(KCall *kc, const DLTensor *x, bool has_exclude, RedPlan *p) {
    uint32_t nd = (uint32_t)x->ndim;
    if (nd > K_MAX_DIMS) return k_error(kc, "rank %u exceeds the limit of %d", nd, K_MAX_DIMS);
    bool exclude = has_exclude && k_bool(kc, "exclude");
    bool keep = k_bool(kc, "keepdims");
    const int64_t *axes;
    uint32_t na = k_ints(kc, "axis", &axes);
    if (k_is_none(kc, "axis") && exclude)
        return k_error(kc, "exclude=True needs an axis list (axis is None)");
    bool given[K_MAX_DIMS];
    for (uint32_t d = 0; d < nd; d++)
        given[d] = false;
    for (uint32_t k = 0; k < na; k++) {
        int64_t a;
        if (!k_axis(axes[k], nd, &a))
            return k_error(kc, "axis %lld is out of range for a tensor of rank %u",
                           (long long)axes[k], nd);
        if (given[a]) return k_error(kc, "axis %lld is listed twice", (long long)a);
        given[a] = true;
    }
    p->ndim = nd;
    p->out_ndim = 0;
    p->n_in = k_numel(x);
    p->n_out = 1;
    p->n_red = 1;
    for (uint32_t d = 0; d < nd; d++) {
        p->red[d] = na == 0 ? true : given[d] != exclude;
        if (!p->red[d])
            p->out_shape[p->out_ndim++] = x->shape[d];
        else if (keep)
            p->out_shape[p->out_ndim++] = 1;
        if (p->red[d]) /* a sub-product of x's shape: within the limit */
            p->n_red = sup_dim_mul_sat(p->n_red, x->shape[d]);
        else
            p->n_out = sup_dim_mul_sat(p->n_out, x->shape[d]);
    }
    ReBcast *it = &p->it;
    it->ndim = nd;
    it->n_ops = 2;
    int64_t so = 1, sr = 1;
    for (uint32_t d = nd; d-- > 0;) {
        it->shape[d] = x->shape[d];
        it->idx[d] = 0;
        it->stride[0][d] = p->red[d] ? 0 : so;
        it->stride[1][d] = p->red[d] ? sr : 0;
        if (p->red[d])
            sr = sup_dim_mul_sat(sr, x->shape[d]);
        else
            so = sup_dim_mul_sat(so, x->shape[d]);
    }
    it->off[0] = it->off[1] = it->off[2] = 0;
    return 0;
}

/* The output of dtype dt with the plan's shape. */
static DLTensor *red_out(KCall *kc, const RedPlan *p, rly_dtype dt) {
    return k_out(kc, 0, dt, p->out_ndim, p->out_shape);
}

/* n zeroed slots of `size` bytes (at least one, so that an empty output still allocates):
 * k_scratch, released by the kernel's caller. */
static void *red_scratch(KCall *kc, int64_t n, size_t size) {
    return k_scratch_n(kc, n > 0 ? n : 1, size);
}

static int empty_error(KCall *kc, const RedPlan *p) {
    if (p->n_red == 0 && p->n_out > 0) return k_error(kc, "reduction over an empty axis");
    return 0;
}

/* a > b as values of dtype dt (bit patterns from re_loadbits). */
static bool bits_gt(uint64_t a, uint64_t b, bool sgn) {
    return sgn ? re_signed(a) > re_signed(b) : a > b;
}

/* ---- sum, prod, mean ------------------------------------------------------------------------ */

typedef enum Acc { ACC_SUM, ACC_PROD, ACC_MEAN } Acc;

static int accumulate(KCall *kc, Acc how) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    RedPlan p;
    if (red_plan(kc, x, true, &p) != 0) return -1;
    bool is_float = re_is_float(dt);
    if (!is_float && how == ACC_MEAN && p.n_red == 0 && p.n_out > 0)
        return k_error(kc, "integer division by zero (mean over an empty axis)");
    DLTensor *y = red_out(kc, &p, dt);
    if (y == NULL) return -1;
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    if (is_float) {
        double *acc = red_scratch(kc, p.n_out, sizeof *acc);
        if (acc == NULL) return -1;
        for (int64_t o = 0; o < p.n_out; o++)
            acc[o] = how == ACC_PROD ? 1.0 : 0.0;
        for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
            double v = re_loadf(src, dt, i);
            if (how == ACC_PROD)
                acc[p.it.off[0]] *= v;
            else
                acc[p.it.off[0]] += v;
        }
        for (int64_t o = 0; o < p.n_out; o++)
            re_storef(dst, dt, o, how == ACC_MEAN ? acc[o] / (double)p.n_red : acc[o]);
        return 0;
    }
    uint64_t *acc = red_scratch(kc, p.n_out, sizeof *acc);
    if (acc == NULL) return -1;
    for (int64_t o = 0; o < p.n_out; o++)
        acc[o] = how == ACC_PROD ? 1 : 0;
    for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
        uint64_t v = re_loadbits(src, dt, i);
        if (how == ACC_PROD)
            acc[p.it.off[0]] *= v;
        else
            acc[p.it.off[0]] += v;
    }
    bool sgn = re_is_signed(dt);
    for (int64_t o = 0; o < p.n_out; o++) {
        uint64_t v = acc[o];
        if (how == ACC_MEAN) v = sgn ? (uint64_t)(re_signed(v) / p.n_red) : v / (uint64_t)p.n_red;
        k_storeu(dst, dt, o, v);
    }
    return 0;
}

static int k_sum(KCall *kc) { return accumulate(kc, ACC_SUM); }
static int k_prod(KCall *kc) { return accumulate(kc, ACC_PROD); }
static int k_mean(KCall *kc) { return accumulate(kc, ACC_MEAN); }

/* ---- max, min -------------------------------------------------------------------------------- */

/* The identity of max (is_max) or min over dtype dt as re_loadbits gives values (signed ones
 * sign-extended): the dtype's lowest or highest value (bool false or true). */
static uint64_t int_identity(rly_dtype dt, bool is_max) {
    if (dt == RLY_DTYPE_BOOL) return is_max ? 0 : 1;
    unsigned bits = (unsigned)sup_dtype_size(dt) * 8;
    uint64_t ones = bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
    if (!re_is_signed(dt)) return is_max ? 0 : ones;
    uint64_t sign = (uint64_t)1 << (bits - 1);
    return is_max ? (uint64_t)0 - sign : sign - 1;
}

static int extreme(KCall *kc, bool is_max) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    RedPlan p;
    if (red_plan(kc, x, true, &p) != 0) return -1;
    DLTensor *y = red_out(kc, &p, dt);
    if (y == NULL) return -1;
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    if (re_is_float(dt)) {
        double *best = red_scratch(kc, p.n_out, sizeof *best);
        if (best == NULL) return -1;
        for (int64_t o = 0; o < p.n_out; o++) /* what an empty reduction leaves */
            best[o] = is_max ? -INFINITY : INFINITY;
        for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
            double v = re_loadf(src, dt, i), *b = &best[p.it.off[0]];
            if (p.it.off[1] == 0 || isnan(v))
                *b = v; /* the first element, or NaN */
            else if (!isnan(*b) && (is_max ? v > *b : v < *b))
                *b = v;
        }
        for (int64_t o = 0; o < p.n_out; o++)
            re_storef(dst, dt, o, best[o]);
        return 0;
    }
    uint64_t *best = red_scratch(kc, p.n_out, sizeof *best);
    if (best == NULL) return -1;
    bool sgn = re_is_signed(dt);
    for (int64_t o = 0; o < p.n_out; o++)
        best[o] = int_identity(dt, is_max);
    for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
        uint64_t v = re_loadbits(src, dt, i), *b = &best[p.it.off[0]];
        if (p.it.off[1] == 0 || (is_max ? bits_gt(v, *b, sgn) : bits_gt(*b, v, sgn))) *b = v;
    }
    for (int64_t o = 0; o < p.n_out; o++)
        k_storeu(dst, dt, o, best[o]);
    return 0;
}

static int k_max(KCall *kc) { return extreme(kc, true); }
static int k_min(KCall *kc) { return extreme(kc, false); }

/* ---- all, any ------------------------------------------------------------------------------- */

static int boolean(KCall *kc, bool is_all) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    RedPlan p;
    if (red_plan(kc, x, true, &p) != 0) return -1;
    DLTensor *y = red_out(kc, &p, dt);
    if (y == NULL) return -1;
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    for (int64_t o = 0; o < p.n_out; o++)
        k_storeu(dst, dt, o, is_all);
    for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
        bool v = re_is_float(dt) ? re_loadf(src, dt, i) != 0 : re_loadbits(src, dt, i) != 0;
        if (v != is_all) k_storeu(dst, dt, p.it.off[0], v);
    }
    return 0;
}

static int k_all(KCall *kc) { return boolean(kc, true); }
static int k_any(KCall *kc) { return boolean(kc, false); }

/* ---- argmax, argmin ------------------------------------------------------------------------- */

/* Whether v replaces the current best (NaN is the extreme of both directions). */
static bool f_better(double v, double best, bool is_max, bool last) {
    if (isnan(best)) return last && isnan(v);
    if (isnan(v)) return true;
    if (v == best) return last;
    return is_max ? v > best : v < best;
}

static bool i_better(uint64_t v, uint64_t best, bool sgn, bool is_max, bool last) {
    if (v == best) return last;
    return is_max ? bits_gt(v, best, sgn) : bits_gt(best, v, sgn);
}

static int arg_extreme(KCall *kc, bool is_max) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    bool last = k_bool(kc, "select_last_index");
    RedPlan p;
    if (red_plan(kc, x, true, &p) != 0 || empty_error(kc, &p) != 0) return -1;
    DLTensor *y = red_out(kc, &p, RLY_DTYPE_I32);
    if (y == NULL) return -1;
    const void *src = k_ptr(x);
    int32_t *dst = k_ptr(y);
    bool is_float = re_is_float(dt), sgn = re_is_signed(dt);
    double *fbest = NULL;
    uint64_t *ibest = NULL;
    if (is_float)
        fbest = red_scratch(kc, p.n_out, sizeof *fbest);
    else
        ibest = red_scratch(kc, p.n_out, sizeof *ibest);
    if (fbest == NULL && ibest == NULL) return -1;
    for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
        int64_t o = p.it.off[0], r = p.it.off[1];
        bool take;
        if (is_float) {
            double v = re_loadf(src, dt, i);
            take = r == 0 || f_better(v, fbest[o], is_max, last);
            if (take) fbest[o] = v;
        } else {
            uint64_t v = re_loadbits(src, dt, i);
            take = r == 0 || i_better(v, ibest[o], sgn, is_max, last);
            if (take) ibest[o] = v;
        }
        if (take) dst[o] = (int32_t)r;
    }
    return 0;
}

static int k_argmax(KCall *kc) { return arg_extreme(kc, true); }
static int k_argmin(KCall *kc) { return arg_extreme(kc, false); }

/* ---- variance, std ----------------------------------------------------------------------------
 */

static int moment(KCall *kc, bool is_std) {
    const DLTensor *x = k_arg(kc, 0), *m = k_arg(kc, 1);
    rly_dtype dt = k_dtype(x);
    if (k_dtype(m) != dt)
        return k_error(kc, "mean has dtype %s but data has %s", sup_dtype_name(k_dtype(m)),
                       sup_dtype_name(dt));
    if (m->ndim != x->ndim)
        return k_error(kc, "mean has rank %d but data has rank %d", m->ndim, x->ndim);
    for (int32_t d = 0; d < x->ndim; d++)
        if (m->shape[d] != 1 && m->shape[d] != x->shape[d]) {
            char sm[256], sx[256];
            return k_error(kc, "mean shape %s does not broadcast to data shape %s",
                           k_shape_str(m, sm, sizeof sm), k_shape_str(x, sx, sizeof sx));
        }
    bool is_float = re_is_float(dt);
    if (is_std && !is_float)
        return k_error(kc, "needs a floating-point tensor, got %s", sup_dtype_name(dt));
    RedPlan p;
    if (red_plan(kc, x, true, &p) != 0) return -1;
    int64_t denom = p.n_red - (k_bool(kc, "unbiased") ? 1 : 0);
    if (denom < 0) denom = 0;
    if (!is_float && denom == 0 && p.n_out > 0)
        return k_error(kc, "integer division by zero (variance of %lld element%s%s)",
                       (long long)p.n_red, p.n_red == 1 ? "" : "s",
                       k_bool(kc, "unbiased") ? ", unbiased" : "");
    DLTensor *y = red_out(kc, &p, dt);
    if (y == NULL) return -1;
    p.it.n_ops = 3;
    k_bcast_strides(m, p.ndim, x->shape, p.it.stride[2]);
    const void *src = k_ptr(x), *msrc = k_ptr(m);
    void *dst = k_ptr(y);
    if (is_float) {
        double *acc = red_scratch(kc, p.n_out, sizeof *acc);
        if (acc == NULL) return -1;
        for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
            double d = re_loadf(src, dt, i) - re_loadf(msrc, dt, p.it.off[2]);
            acc[p.it.off[0]] += d * d;
        }
        for (int64_t o = 0; o < p.n_out; o++) {
            double v = acc[o] / (double)denom;
            re_storef(dst, dt, o, is_std ? sqrt(v) : v);
        }
        return 0;
    }
    uint64_t *acc = red_scratch(kc, p.n_out, sizeof *acc);
    if (acc == NULL) return -1;
    for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
        uint64_t d = re_loadbits(src, dt, i) - re_loadbits(msrc, dt, p.it.off[2]);
        acc[p.it.off[0]] += d * d;
    }
    for (int64_t o = 0; o < p.n_out; o++)
        k_storeu(dst, dt, o, acc[o] / (uint64_t)denom);
    return 0;
}

static int k_variance(KCall *kc) { return moment(kc, false); }
static int k_std(KCall *kc) { return moment(kc, true); }

/* ---- logsumexp ------------------------------------------------------------------------------- */

static int k_logsumexp(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    if (!re_is_float(dt))
        return k_error(kc, "needs a floating-point tensor, got %s", sup_dtype_name(dt));
    RedPlan p;
    if (red_plan(kc, x, false, &p) != 0) return -1;
    DLTensor *y = red_out(kc, &p, dt);
    if (y == NULL) return -1;
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    double *mx = red_scratch(kc, p.n_out, sizeof *mx);
    double *sum = red_scratch(kc, p.n_out, sizeof *sum);
    if (mx == NULL || sum == NULL) return -1;
    for (int64_t o = 0; o < p.n_out; o++)
        mx[o] = -INFINITY;
    ReBcast start = p.it;
    for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
        double v = re_loadf(src, dt, i), *b = &mx[p.it.off[0]];
        if (isnan(v) || (!isnan(*b) && v > *b)) *b = v;
    }
    p.it = start;
    for (int64_t i = 0; i < p.n_in; i++, re_bcast_next(&p.it)) {
        int64_t o = p.it.off[0];
        if (isfinite(mx[o])) sum[o] += exp(re_loadf(src, dt, i) - mx[o]);
    }
    for (int64_t o = 0; o < p.n_out; o++)
        re_storef(dst, dt, o, isfinite(mx[o]) ? mx[o] + log(sum[o]) : mx[o]);
    return 0;
}

const KernelDef kern_ref_reduce[] = {
    {OP_ID_SUM, k_sum},
    {OP_ID_MEAN, k_mean},
    {OP_ID_MAX, k_max},
    {OP_ID_MIN, k_min},
    {OP_ID_PROD, k_prod},
    {OP_ID_ALL, k_all},
    {OP_ID_ANY, k_any},
    {OP_ID_ARGMAX, k_argmax},
    {OP_ID_ARGMIN, k_argmin},
    {OP_ID_VARIANCE, k_variance},
    {OP_ID_STD, k_std},
    {OP_ID_LOGSUMEXP, k_logsumexp},
    {0, NULL},
};
