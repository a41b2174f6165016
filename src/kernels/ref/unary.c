/* unary.c - reference kernels of the unary operators (see src/ops/op_unary.c): elementwise math,
 * rounding, predicates, not, the *_like creators, clip, fixed_point_multiply, and the shape
 * queries shape_of and ndarray_size.
 *
 * Floats are computed in double and rounded once on store (float16 and bfloat16 too). Integers
 * are computed on their 64-bit patterns and wrap when stored. Semantics chosen where C, numpy and
 * TVM differ or leave a case open:
 *   - round: to nearest, ties to even (TVM's nearbyint, numpy's round), independent of the
 *     floating-point environment's rounding mode;
 *   - sign: -1, 0 or 1 as TVM computes it (two selects on x < 0 and x > 0), so sign(NaN) is 0
 *     (numpy gives NaN); unsigned integers give 0 or 1;
 *   - abs and negative wrap on the most negative integer (abs(-128) is -128 in int8), as numpy;
 *   - bitwise_not of a bool is logical not (TVM's bool is one bit wide);
 *   - clip: the bounds are first cast to the dtype (integers: truncated toward zero and saturated
 *     at the dtype's range; floats: rounded to the dtype), then min(max(x, a_min), a_max), so
 *     a_min > a_max gives a_max everywhere; a NaN element stays NaN (numpy);
 *   - fixed_point_multiply: round(x * multiplier * 2**(shift - 31)) with ties rounded toward
 *     +inf, as TVM's q_multiply_shift (add 2**(k-1), shift right by k), but computed exactly in
 *     128-bit arithmetic rather than TVM's int64, then wrapped to the dtype;
 *   - shape_of of a scalar is a scalar (the relation's choice) holding 0; shape_of and
 *     ndarray_size wrap their values into the dtype attribute when they do not fit. */
#include <math.h>
#include <string.h>

#include "kernels/ref/ref_elem.h"

/* ---- helpers ------------------------------------------------------------------------------- */

/* The output of a shape-preserving op: dtype dt and the argument's shape. */
static DLTensor *same_shape_out(KCall *kc, rly_dtype dt) {
    const DLTensor *x = k_arg(kc, 0);
    return k_out(kc, 0, dt, (uint32_t)x->ndim, x->shape);
}

typedef double (*MathFn)(double);

/* y = f(x) on a floating-point tensor. */
static int unary_float(KCall *kc, MathFn f) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    if (!re_is_float(dt))
        return k_error(kc, "needs a floating-point tensor, got %s", sup_dtype_name(dt));
    DLTensor *y = same_shape_out(kc, dt);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    if (dt == RLY_DTYPE_F32) {
        const float *s = src;
        float *d = dst;
        for (int64_t i = 0; i < n; i++)
            d[i] = (float)f((double)s[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            re_storef(dst, dt, i, f(re_loadf(src, dt, i)));
    }
    return 0;
}

/* The integer half of a numeric op: the result's bit pattern from x's value (sign-extended for
 * signed dtypes, zero-extended for unsigned ones). */
typedef uint64_t (*IntFn)(uint64_t bits, bool is_signed);

/* y = f(x) on floats, y = g(x) on integers (bool is not numeric: the relation rejects it). */
static int unary_numeric(KCall *kc, MathFn f, IntFn g) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    if (re_is_float(dt)) return unary_float(kc, f);
    if (dt == RLY_DTYPE_BOOL) return k_error(kc, "needs a numeric tensor, got bool");
    DLTensor *y = same_shape_out(kc, dt);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    bool sgn = re_is_signed(dt);
    for (int64_t i = 0; i < n; i++)
        k_storeu(dst, dt, i, g(re_loadbits(src, dt, i), sgn));
    return 0;
}

/* ---- floating-point math ------------------------------------------------------------------- */

static double f_rsqrt(double x) { return 1.0 / sqrt(x); }

/* 1 / (1 + e^-x) without overflow in e^-x for large negative x. */
static double f_sigmoid(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* Ties to even, whatever the current rounding mode. */
static double f_round(double x) {
    double r = floor(x), d = x - r; /* d in [0, 1); NaN for infinities and NaN */
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0)) r += 1.0;
    return r == 0 ? copysign(0.0, x) : r;
}

static double f_sign(double x) { return x < 0 ? -1.0 : x > 0 ? 1.0 : 0.0; }
static double f_negative(double x) { return -x; }

static int k_log(KCall *kc) { return unary_float(kc, log); }
static int k_log2(KCall *kc) { return unary_float(kc, log2); }
static int k_log10(KCall *kc) { return unary_float(kc, log10); }
static int k_exp(KCall *kc) { return unary_float(kc, exp); }
static int k_erf(KCall *kc) { return unary_float(kc, erf); }
static int k_sqrt(KCall *kc) { return unary_float(kc, sqrt); }
static int k_rsqrt(KCall *kc) { return unary_float(kc, f_rsqrt); }
static int k_sigmoid(KCall *kc) { return unary_float(kc, f_sigmoid); }
static int k_tanh(KCall *kc) { return unary_float(kc, tanh); }
static int k_sin(KCall *kc) { return unary_float(kc, sin); }
static int k_cos(KCall *kc) { return unary_float(kc, cos); }
static int k_tan(KCall *kc) { return unary_float(kc, tan); }
static int k_sinh(KCall *kc) { return unary_float(kc, sinh); }
static int k_cosh(KCall *kc) { return unary_float(kc, cosh); }
static int k_asin(KCall *kc) { return unary_float(kc, asin); }
static int k_acos(KCall *kc) { return unary_float(kc, acos); }
static int k_atan(KCall *kc) { return unary_float(kc, atan); }
static int k_asinh(KCall *kc) { return unary_float(kc, asinh); }
static int k_acosh(KCall *kc) { return unary_float(kc, acosh); }
static int k_atanh(KCall *kc) { return unary_float(kc, atanh); }

/* ---- rounding, sign, abs, negative ----------------------------------------------------------- */

static uint64_t i_identity(uint64_t v, bool sgn) {
    (void)sgn;
    return v;
}
static uint64_t i_sign(uint64_t v, bool sgn) {
    if (sgn && re_signed(v) < 0) return UINT64_MAX; /* -1 */
    return v != 0;
}
static uint64_t i_abs(uint64_t v, bool sgn) { return sgn && re_signed(v) < 0 ? 0 - v : v; }
static uint64_t i_negative(uint64_t v, bool sgn) {
    (void)sgn;
    return 0 - v;
}

static int k_floor(KCall *kc) { return unary_numeric(kc, floor, i_identity); }
static int k_ceil(KCall *kc) { return unary_numeric(kc, ceil, i_identity); }
static int k_trunc(KCall *kc) { return unary_numeric(kc, trunc, i_identity); }
static int k_round(KCall *kc) { return unary_numeric(kc, f_round, i_identity); }
static int k_sign(KCall *kc) { return unary_numeric(kc, f_sign, i_sign); }
static int k_abs(KCall *kc) { return unary_numeric(kc, fabs, i_abs); }
static int k_negative(KCall *kc) { return unary_numeric(kc, f_negative, i_negative); }

/* ---- logical and bitwise not ------------------------------------------------------------------
 */

static int k_logical_not(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    DLTensor *y = same_shape_out(kc, dt);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    if (re_is_float(dt))
        for (int64_t i = 0; i < n; i++)
            re_storef(dst, dt, i, re_loadf(src, dt, i) == 0);
    else
        for (int64_t i = 0; i < n; i++)
            k_storeu(dst, dt, i, re_loadbits(src, dt, i) == 0);
    return 0;
}

static int k_bitwise_not(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    if (re_is_float(dt))
        return k_error(kc, "needs an integer or bool tensor, got %s", sup_dtype_name(dt));
    if (dt == RLY_DTYPE_BOOL) return k_logical_not(kc);
    DLTensor *y = same_shape_out(kc, dt);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    for (int64_t i = 0; i < n; i++)
        k_storeu(dst, dt, i, ~re_loadbits(src, dt, i));
    return 0;
}

/* ---- predicates ----------------------------------------------------------------------------- */

typedef enum Pred { PRED_NAN, PRED_FINITE, PRED_INF } Pred;

static int predicate(KCall *kc, Pred p) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    DLTensor *y = same_shape_out(kc, RLY_DTYPE_BOOL);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    const void *src = k_ptr(x);
    uint8_t *dst = k_ptr(y);
    if (!re_is_float(dt)) { /* integers are finite numbers */
        for (int64_t i = 0; i < n; i++)
            dst[i] = p == PRED_FINITE;
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = re_loadf(src, dt, i);
        bool r = p == PRED_NAN ? isnan(v) != 0 : p == PRED_INF ? isinf(v) != 0 : isfinite(v) != 0;
        dst[i] = r;
    }
    return 0;
}

static int k_isnan(KCall *kc) { return predicate(kc, PRED_NAN); }
static int k_isfinite(KCall *kc) { return predicate(kc, PRED_FINITE); }
static int k_isinf(KCall *kc) { return predicate(kc, PRED_INF); }

/* ---- creators and copy ----------------------------------------------------------------------- */

static int fill_like(KCall *kc, int64_t v) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    DLTensor *y = same_shape_out(kc, dt);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    void *dst = k_ptr(y);
    for (int64_t i = 0; i < n; i++)
        k_storei(dst, dt, i, v);
    return 0;
}

static int k_zeros_like(KCall *kc) { return fill_like(kc, 0); }
static int k_ones_like(KCall *kc) { return fill_like(kc, 1); }

static int k_copy(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    DLTensor *y = same_shape_out(kc, dt);
    if (y == NULL) return -1;
    size_t bytes = (size_t)k_numel(x) * sup_dtype_size(dt);
    if (bytes > 0) memcpy(k_ptr(y), k_ptr(x), bytes);
    return 0;
}

/* ---- clip ----------------------------------------------------------------------------------- */

static int k_clip(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    double lo = k_float(kc, "a_min"), hi = k_float(kc, "a_max");
    if (isnan(lo) || isnan(hi)) return k_error(kc, "a_min and a_max must not be NaN");
    DLTensor *y = same_shape_out(kc, dt);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    /* The bounds cast to the dtype: stored into one-element scratch arrays and read back. */
    uint64_t blo = 0, bhi = 0;
    k_storef(&blo, dt, 0, lo);
    k_storef(&bhi, dt, 0, hi);
    if (re_is_float(dt)) {
        double flo = re_loadf(&blo, dt, 0), fhi = re_loadf(&bhi, dt, 0);
        for (int64_t i = 0; i < n; i++) {
            double v = re_loadf(src, dt, i);
            if (!isnan(v)) v = fmin(fmax(v, flo), fhi);
            re_storef(dst, dt, i, v);
        }
    } else if (re_is_signed(dt) || dt == RLY_DTYPE_BOOL) {
        int64_t ilo = k_loadi(&blo, dt, 0), ihi = k_loadi(&bhi, dt, 0);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = k_loadi(src, dt, i);
            v = v < ilo ? ilo : v;
            v = v > ihi ? ihi : v;
            k_storei(dst, dt, i, v);
        }
    } else {
        uint64_t ulo = k_loadu(&blo, dt, 0), uhi = k_loadu(&bhi, dt, 0);
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = k_loadu(src, dt, i);
            v = v < ulo ? ulo : v;
            v = v > uhi ? uhi : v;
            k_storeu(dst, dt, i, v);
        }
    }
    return 0;
}

/* ---- fixed_point_multiply -------------------------------------------------------------------- */

/* A signed 128-bit integer in two's complement, as two 64-bit halves. */
typedef struct I128 {
    uint64_t hi, lo;
} I128;

static I128 i128_neg(I128 a) {
    I128 r = {~a.hi, ~a.lo};
    r.lo += 1;
    if (r.lo == 0) r.hi += 1;
    return r;
}

/* The exact product of a 64-bit magnitude and a 32-bit magnitude, with a sign. */
static I128 i128_mul(uint64_t a, uint64_t b, bool negative) {
    uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
    uint64_t p_lo = a_lo * b, p_hi = a_hi * b; /* each < 2^64: b < 2^32 */
    I128 r;
    r.lo = p_lo + (p_hi << 32);
    r.hi = (p_hi >> 32) + (r.lo < p_lo);
    return negative ? i128_neg(r) : r;
}

static I128 i128_add(I128 a, I128 b) {
    I128 r = {a.hi + b.hi, a.lo + b.lo};
    if (r.lo < a.lo) r.hi += 1;
    return r;
}

/* a << s for s in [0, 127]. */
static I128 i128_shl(I128 a, unsigned s) {
    I128 r;
    if (s == 0) return a;
    if (s >= 64) {
        r.hi = a.lo << (s - 64);
        r.lo = 0;
    } else {
        r.hi = (a.hi << s) | (a.lo >> (64 - s));
        r.lo = a.lo << s;
    }
    return r;
}

/* Arithmetic a >> s for s in [0, 127] (floor division by 2^s). */
static I128 i128_sar(I128 a, unsigned s) {
    bool neg = (a.hi >> 63) != 0;
    if (neg) a = (I128){~a.hi, ~a.lo}; /* ~a >> s == ~(a >> s) for arithmetic shifts */
    I128 r;
    if (s == 0)
        r = a;
    else if (s >= 64)
        r = (I128){0, a.hi >> (s - 64)};
    else
        r = (I128){a.hi >> s, (a.lo >> s) | (a.hi << (64 - s))};
    return neg ? (I128){~r.hi, ~r.lo} : r;
}

static int k_fixed_point_multiply(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    rly_dtype dt = k_dtype(x);
    if (re_is_float(dt) || dt == RLY_DTYPE_BOOL)
        return k_error(kc, "needs an integer tensor, got %s", sup_dtype_name(dt));
    int64_t mult = k_int(kc, "multiplier"), shift = k_int(kc, "shift");
    if (mult < INT32_MIN || mult > INT32_MAX)
        return k_error(kc, "multiplier %lld does not fit in int32", (long long)mult);
    if (shift < -63 || shift > 63)
        return k_error(kc, "shift %lld is out of range (-63 to 63)", (long long)shift);
    DLTensor *y = same_shape_out(kc, dt);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    const void *src = k_ptr(x);
    void *dst = k_ptr(y);
    bool sgn = re_is_signed(dt), m_neg = mult < 0;
    uint64_t m_mag = m_neg ? (uint64_t)(-mult) : (uint64_t)mult;
    /* value * 2^shift / 2^31: a left shift by shift - 31 when shift > 31, otherwise a rounding
     * right shift by t = 31 - shift (in [0, 94]) that adds 2^(t-1) first. */
    unsigned left = shift > 31 ? (unsigned)(shift - 31) : 0;
    unsigned right = shift > 31 ? 0 : (unsigned)(31 - shift);
    I128 half = right > 0 ? i128_shl((I128){0, 1}, right - 1) : (I128){0, 0};
    for (int64_t i = 0; i < n; i++) {
        uint64_t bits = re_loadbits(src, dt, i);
        bool x_neg = sgn && re_signed(bits) < 0;
        uint64_t x_mag = x_neg ? 0 - bits : bits;
        I128 p = i128_mul(x_mag, m_mag, x_neg != m_neg);
        if (left > 0)
            p = i128_shl(p, left);
        else if (right > 0)
            p = i128_sar(i128_add(p, half), right);
        k_storeu(dst, dt, i, p.lo);
    }
    return 0;
}

/* ---- shape queries -------------------------------------------------------------------------- */

static rly_dtype index_dtype(KCall *kc, int *ok) {
    int64_t dt = k_int(kc, "dtype");
    *ok = dt >= 0 && dt < RLY_DTYPE_COUNT &&
          (sup_dtype_is_int((rly_dtype)dt) || sup_dtype_is_uint((rly_dtype)dt));
    return *ok ? (rly_dtype)dt : RLY_DTYPE_I32;
}

static int k_shape_of(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int ok;
    rly_dtype dt = index_dtype(kc, &ok);
    if (!ok) return k_error(kc, "dtype must be an integer type");
    int64_t len = x->ndim;
    DLTensor *y = k_out(kc, 0, dt, x->ndim ? 1 : 0, &len);
    if (y == NULL) return -1;
    void *dst = k_ptr(y);
    if (x->ndim == 0) k_storei(dst, dt, 0, 0);
    for (int32_t d = 0; d < x->ndim; d++)
        k_storei(dst, dt, d, x->shape[d]);
    return 0;
}

static int k_ndarray_size(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int ok;
    rly_dtype dt = index_dtype(kc, &ok);
    if (!ok) return k_error(kc, "dtype must be an integer type");
    DLTensor *y = k_out(kc, 0, dt, 0, NULL);
    if (y == NULL) return -1;
    k_storei(k_ptr(y), dt, 0, k_numel(x));
    return 0;
}

const KernelDef kern_ref_unary[] = {
    {OP_ID_LOG, k_log},
    {OP_ID_LOG2, k_log2},
    {OP_ID_LOG10, k_log10},
    {OP_ID_EXP, k_exp},
    {OP_ID_FAST_EXP, k_exp},
    {OP_ID_ERF, k_erf},
    {OP_ID_FAST_ERF, k_erf},
    {OP_ID_SQRT, k_sqrt},
    {OP_ID_RSQRT, k_rsqrt},
    {OP_ID_SIGMOID, k_sigmoid},
    {OP_ID_TANH, k_tanh},
    {OP_ID_FAST_TANH, k_tanh},
    {OP_ID_SIN, k_sin},
    {OP_ID_COS, k_cos},
    {OP_ID_TAN, k_tan},
    {OP_ID_SINH, k_sinh},
    {OP_ID_COSH, k_cosh},
    {OP_ID_ASIN, k_asin},
    {OP_ID_ACOS, k_acos},
    {OP_ID_ATAN, k_atan},
    {OP_ID_ASINH, k_asinh},
    {OP_ID_ACOSH, k_acosh},
    {OP_ID_ATANH, k_atanh},
    {OP_ID_FLOOR, k_floor},
    {OP_ID_CEIL, k_ceil},
    {OP_ID_TRUNC, k_trunc},
    {OP_ID_ROUND, k_round},
    {OP_ID_SIGN, k_sign},
    {OP_ID_ABS, k_abs},
    {OP_ID_NEGATIVE, k_negative},
    {OP_ID_LOGICAL_NOT, k_logical_not},
    {OP_ID_BITWISE_NOT, k_bitwise_not},
    {OP_ID_ISNAN, k_isnan},
    {OP_ID_ISFINITE, k_isfinite},
    {OP_ID_ISINF, k_isinf},
    {OP_ID_ZEROS_LIKE, k_zeros_like},
    {OP_ID_ONES_LIKE, k_ones_like},
    {OP_ID_COPY, k_copy},
    {OP_ID_CLIP, k_clip},
    {OP_ID_FIXED_POINT_MULTIPLY, k_fixed_point_multiply},
    {OP_ID_SHAPE_OF, k_shape_of},
    {OP_ID_NDARRAY_SIZE, k_ndarray_size},
    {0, NULL},
};
