/* binary.c - reference kernels of the broadcasting binary operators (see src/ops/op_binary.c):
 * arithmetic, comparison, logical and bitwise.
 *
 * Shapes broadcast as in numpy; a `?` dim that turns out incompatible at run time is an error.
 * Floats are computed in double and rounded once on store. Integers are computed on their 64-bit
 * patterns (sign-extended for signed dtypes) and wrap modulo 2^bits when stored; bools are
 * integers 0/1 whose result is stored as `!= 0` (so add is or, multiply is and, subtract is
 * xor). Semantics chosen where C, numpy and TVM differ or leave a case open:
 *   - divide, trunc_divide, mod, trunc_mod on integers truncate (C, TVM); floor_divide and
 *     floor_mod floor (the remainder takes the sign of rhs). An integer divisor of 0 is the error
 *     "integer division by zero"; the most negative value divided by -1 wraps to itself and its
 *     remainder is 0;
 *   - on floats, as TVM's topi writes them: divide is a / b, mod C fmod (TIR truncmod),
 *     trunc_divide trunc(a / b), trunc_mod a - trunc(a / b) * b, floor_divide floor(a / b) and
 *     floor_mod a - floor(a / b) * b, each evaluated in double (IEEE results for a zero
 *     divisor: inf or NaN, no error);
 *   - power on integers is exact repeated multiplication, wrapping; a negative exponent gives
 *     the truncated 1 / x^-b: 1 for x = 1, +-1 for x = -1, 0 for |x| > 1, and an error for x = 0;
 *   - maximum and minimum propagate NaN (numpy), whichever side it is on;
 *   - left_shift and right_shift by a negative amount or by >= the dtype's bit width give 0, or
 *     -1 for right_shift of a negative value (the sign fill), as numpy defines them; right_shift
 *     is arithmetic for signed dtypes and logical for unsigned ones;
 *   - logical_and/or/xor on integers treat nonzero as true and give 0 or 1 of the dtype. */
#include <math.h>

#include "kernels/ref/ref_elem.h"

/* What an integer op needs of its dtype. */
typedef struct IntTy {
    unsigned bits; /* 1 for bool */
    bool sgn;      /* signed: operands are sign-extended patterns */
} IntTy;

enum { ERR_NONE, ERR_DIV0, ERR_POW0 };

typedef double (*FloatOp)(double a, double b);
/* On 64-bit patterns a, b; writes the result's pattern; returns ERR_*. */
typedef int (*IntOp)(uint64_t a, uint64_t b, IntTy t, uint64_t *r);

typedef struct BinOp {
    FloatOp f;         /* NULL: the op takes no floats */
    IntOp i;           /* integers (and bools unless no_bool) */
    bool cmp;          /* the result is bool */
    bool no_bool;      /* integers only (the shifts) */
    const char *needs; /* the message when the dtype is not taken */
} BinOp;

/* ---- the driver --------------------------------------------------------------------------------
 */

static int binary(KCall *kc, const BinOp *op) {
    const DLTensor *a = k_arg(kc, 0), *b = k_arg(kc, 1);
    rly_dtype dt = k_dtype(a);
    if (k_dtype(b) != dt)
        return k_error(kc, "dtypes differ: %s and %s", sup_dtype_name(dt),
                       sup_dtype_name(k_dtype(b)));
    bool is_float = re_is_float(dt);
    if ((is_float && op->f == NULL) || (dt == RLY_DTYPE_BOOL && op->no_bool))
        return k_error(kc, "needs %s, got %s", op->needs, sup_dtype_name(dt));
    uint32_t ndim;
    int64_t shape[K_MAX_DIMS];
    if (a->ndim > K_MAX_DIMS || b->ndim > K_MAX_DIMS || !k_bcast_shape(a, b, &ndim, shape)) {
        char sa[256], sb[256];
        return k_error(kc, "shapes %s and %s are not broadcastable", k_shape_str(a, sa, sizeof sa),
                       k_shape_str(b, sb, sizeof sb));
    }
    rly_dtype dt_out = op->cmp ? RLY_DTYPE_BOOL : dt;
    DLTensor *y = k_out(kc, 0, dt_out, ndim, shape);
    if (y == NULL) return -1;
    int64_t n = k_shape_numel(ndim, shape);
    const void *pa = k_ptr(a), *pb = k_ptr(b);
    void *py = k_ptr(y);
    bool flat = k_same_shape(a, b);
    ReBcast it;
    const DLTensor *ops[2] = {a, b};
    re_bcast_init(&it, ndim, shape, 2, ops);
    if (is_float) {
        FloatOp f = op->f;
        for (int64_t i = 0; i < n; i++) {
            int64_t ia = flat ? i : it.off[0], ib = flat ? i : it.off[1];
            re_storef(py, dt_out, i, f(re_loadf(pa, dt, ia), re_loadf(pb, dt, ib)));
            if (!flat) re_bcast_next(&it);
        }
        return 0;
    }
    IntTy t = {dt == RLY_DTYPE_BOOL ? 1u : (unsigned)sup_dtype_bits(dt), re_is_signed(dt)};
    IntOp g = op->i;
    for (int64_t i = 0; i < n; i++) {
        int64_t ia = flat ? i : it.off[0], ib = flat ? i : it.off[1];
        uint64_t r;
        int err = g(re_loadbits(pa, dt, ia), re_loadbits(pb, dt, ib), t, &r);
        if (err == ERR_DIV0) return k_error(kc, "integer division by zero");
        if (err == ERR_POW0) return k_error(kc, "integer 0 raised to a negative power");
        k_storeu(py, dt_out, i, r);
        if (!flat) re_bcast_next(&it);
    }
    return 0;
}

/* ---- arithmetic ------------------------------------------------------------------------------ */

static double f_add(double a, double b) { return a + b; }
static double f_sub(double a, double b) { return a - b; }
static double f_mul(double a, double b) { return a * b; }
static double f_div(double a, double b) { return a / b; }
static double f_pow(double a, double b) { return pow(a, b); }
static double f_max(double a, double b) { return isnan(a) || isnan(b) ? a + b : a > b ? a : b; }
static double f_min(double a, double b) { return isnan(a) || isnan(b) ? a + b : a < b ? a : b; }
static double f_fmod(double a, double b) { return fmod(a, b); }
static double f_floor_div(double a, double b) { return floor(a / b); }
static double f_floor_mod(double a, double b) { return a - floor(a / b) * b; }
static double f_trunc_div(double a, double b) { return trunc(a / b); }
static double f_trunc_mod(double a, double b) { return a - trunc(a / b) * b; }

static int i_add(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a + b;
    return ERR_NONE;
}
static int i_sub(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a - b;
    return ERR_NONE;
}
static int i_mul(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a * b;
    return ERR_NONE;
}

/* Truncating division; INT_MIN / -1 wraps (0 - a is the negation modulo 2^64). */
static int i_div(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    if (b == 0) return ERR_DIV0;
    if (!t.sgn)
        *r = a / b;
    else if (re_signed(b) == -1)
        *r = 0 - a;
    else
        *r = (uint64_t)(re_signed(a) / re_signed(b));
    return ERR_NONE;
}

/* Truncating remainder (sign of a); x % -1 is 0. */
static int i_mod(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    if (b == 0) return ERR_DIV0;
    if (!t.sgn)
        *r = a % b;
    else if (re_signed(b) == -1)
        *r = 0;
    else
        *r = (uint64_t)(re_signed(a) % re_signed(b));
    return ERR_NONE;
}

static int i_floor_div(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    if (b == 0) return ERR_DIV0;
    if (!t.sgn) {
        *r = a / b;
        return ERR_NONE;
    }
    int64_t x = re_signed(a), y = re_signed(b);
    if (y == -1) {
        *r = 0 - a;
        return ERR_NONE;
    }
    int64_t q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) q--;
    *r = (uint64_t)q;
    return ERR_NONE;
}

static int i_floor_mod(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    if (b == 0) return ERR_DIV0;
    if (!t.sgn) {
        *r = a % b;
        return ERR_NONE;
    }
    int64_t x = re_signed(a), y = re_signed(b);
    if (y == -1) {
        *r = 0;
        return ERR_NONE;
    }
    int64_t m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    *r = (uint64_t)m;
    return ERR_NONE;
}

static int i_pow(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    if (t.sgn && re_signed(b) < 0) {
        int64_t x = re_signed(a);
        if (x == 0) return ERR_POW0;
        *r = x == 1 ? 1 : x == -1 ? ((b & 1) ? UINT64_MAX : 1) : 0;
        return ERR_NONE;
    }
    uint64_t base = a, acc = 1;
    for (uint64_t e = b; e != 0; e >>= 1) {
        if (e & 1) acc *= base;
        base *= base;
    }
    *r = acc;
    return ERR_NONE;
}

/* a > b as values of the dtype. */
static bool i_gt(uint64_t a, uint64_t b, IntTy t) {
    return t.sgn ? re_signed(a) > re_signed(b) : a > b;
}

static int i_max(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    *r = i_gt(a, b, t) ? a : b;
    return ERR_NONE;
}
static int i_min(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    *r = i_gt(a, b, t) ? b : a;
    return ERR_NONE;
}

/* ---- shifts -----------------------------------------------------------------------------------
 */

/* The shift amount, or bits when it is negative or too large (the "everything shifted out"
 * case). */
static unsigned shift_amount(uint64_t b, IntTy t) {
    if (t.sgn && re_signed(b) < 0) return t.bits;
    return b >= t.bits ? t.bits : (unsigned)b;
}

static int i_shl(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    unsigned s = shift_amount(b, t);
    *r = s >= t.bits ? 0 : a << s;
    return ERR_NONE;
}

static int i_shr(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    unsigned s = shift_amount(b, t);
    if (t.sgn) {
        int64_t x = re_signed(a);
        *r = (uint64_t)(s >= t.bits ? (x < 0 ? -1 : 0) : re_sar(x, s));
    } else {
        *r = s >= t.bits ? 0 : a >> s;
    }
    return ERR_NONE;
}

/* ---- logical and bitwise ------------------------------------------------------------------- */

static int i_land(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a != 0 && b != 0;
    return ERR_NONE;
}
static int i_lor(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a != 0 || b != 0;
    return ERR_NONE;
}
static int i_lxor(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = (a != 0) != (b != 0);
    return ERR_NONE;
}
static int i_and(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a & b;
    return ERR_NONE;
}
static int i_or(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a | b;
    return ERR_NONE;
}
static int i_xor(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a ^ b;
    return ERR_NONE;
}

/* ---- comparisons ----------------------------------------------------------------------------- */

static double f_eq(double a, double b) { return a == b; }
static double f_ne(double a, double b) { return a != b; }
static double f_lt(double a, double b) { return a < b; }
static double f_le(double a, double b) { return a <= b; }
static double f_gt(double a, double b) { return a > b; }
static double f_ge(double a, double b) { return a >= b; }

static int i_eq(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a == b;
    return ERR_NONE;
}
static int i_ne(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    (void)t;
    *r = a != b;
    return ERR_NONE;
}
static int i_lt(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    *r = i_gt(b, a, t);
    return ERR_NONE;
}
static int i_le(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    *r = !i_gt(a, b, t);
    return ERR_NONE;
}
static int i_gtr(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    *r = i_gt(a, b, t);
    return ERR_NONE;
}
static int i_ge(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    *r = !i_gt(b, a, t);
    return ERR_NONE;
}

/* ---- the operators ------------------------------------------------------------------------- */

#define ARITH(fn, f, i)                                                                            \
    static int fn(KCall *kc) {                                                                     \
        static const BinOp op = {f, i, false, false, NULL};                                        \
        return binary(kc, &op);                                                                    \
    }
#define INTONLY(fn, i, no_bool, needs)                                                             \
    static int fn(KCall *kc) {                                                                     \
        static const BinOp op = {NULL, i, false, no_bool, needs};                                  \
        return binary(kc, &op);                                                                    \
    }
#define CMP(fn, f, i)                                                                              \
    static int fn(KCall *kc) {                                                                     \
        static const BinOp op = {f, i, true, false, NULL};                                         \
        return binary(kc, &op);                                                                    \
    }

ARITH(k_add, f_add, i_add)
ARITH(k_subtract, f_sub, i_sub)
ARITH(k_multiply, f_mul, i_mul)
ARITH(k_divide, f_div, i_div)
ARITH(k_power, f_pow, i_pow)
ARITH(k_maximum, f_max, i_max)
ARITH(k_minimum, f_min, i_min)
ARITH(k_mod, f_fmod, i_mod)
ARITH(k_floor_divide, f_floor_div, i_floor_div)
ARITH(k_floor_mod, f_floor_mod, i_floor_mod)
ARITH(k_trunc_divide, f_trunc_div, i_div)
ARITH(k_trunc_mod, f_trunc_mod, i_mod)
INTONLY(k_left_shift, i_shl, true, "integer tensors")
INTONLY(k_right_shift, i_shr, true, "integer tensors")
INTONLY(k_logical_and, i_land, false, "bool or integer tensors")
INTONLY(k_logical_or, i_lor, false, "bool or integer tensors")
INTONLY(k_logical_xor, i_lxor, false, "bool or integer tensors")
INTONLY(k_bitwise_and, i_and, false, "bool or integer tensors")
INTONLY(k_bitwise_or, i_or, false, "bool or integer tensors")
INTONLY(k_bitwise_xor, i_xor, false, "bool or integer tensors")
CMP(k_equal, f_eq, i_eq)
CMP(k_not_equal, f_ne, i_ne)
CMP(k_less, f_lt, i_lt)
CMP(k_less_equal, f_le, i_le)
CMP(k_greater, f_gt, i_gtr)
CMP(k_greater_equal, f_ge, i_ge)

const KernelDef kern_ref_binary[] = {
    {"add", k_add},
    {"subtract", k_subtract},
    {"multiply", k_multiply},
    {"divide", k_divide},
    {"power", k_power},
    {"maximum", k_maximum},
    {"minimum", k_minimum},
    {"mod", k_mod},
    {"floor_divide", k_floor_divide},
    {"floor_mod", k_floor_mod},
    {"trunc_divide", k_trunc_divide},
    {"trunc_mod", k_trunc_mod},
    {"left_shift", k_left_shift},
    {"right_shift", k_right_shift},
    {"logical_and", k_logical_and},
    {"logical_or", k_logical_or},
    {"logical_xor", k_logical_xor},
    {"bitwise_and", k_bitwise_and},
    {"bitwise_or", k_bitwise_or},
    {"bitwise_xor", k_bitwise_xor},
    {"equal", k_equal},
    {"not_equal", k_not_equal},
    {"less", k_less},
    {"less_equal", k_less_equal},
    {"greater", k_greater},
    {"greater_equal", k_greater_equal},
    {NULL, NULL},
};
