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

/* An integer op that cannot fail: *r is expr of the patterns a, b (and the dtype t). An expr
 * `a * b` or `a & b` is parenthesized, which keeps clang-format from reading a declaration. */
#define INT_OP(name, expr)                                                                         \
    static int name(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {                                \
        (void)t;                                                                                   \
        *r = (expr);                                                                               \
        return ERR_NONE;                                                                           \
    }

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

INT_OP(i_add, a + b)
INT_OP(i_sub, a - b)
INT_OP(i_mul, (a * b))

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

/* Flooring division: the truncating quotient, less one when the division is inexact and the
 * operands' signs differ. */
static int i_floor_div(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    uint64_t m;
    if (i_mod(a, b, t, &m) != ERR_NONE) return ERR_DIV0;
    i_div(a, b, t, r);
    if (t.sgn && m != 0 && (re_signed(a) < 0) != (re_signed(b) < 0)) *r -= 1;
    return ERR_NONE;
}

/* Flooring remainder (sign of b): the truncating one, plus b when it is nonzero and its sign
 * differs from b's. */
static int i_floor_mod(uint64_t a, uint64_t b, IntTy t, uint64_t *r) {
    if (i_mod(a, b, t, r) != ERR_NONE) return ERR_DIV0;
    if (t.sgn && *r != 0 && (re_signed(*r) < 0) != (re_signed(b) < 0)) *r += b;
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

INT_OP(i_max, i_gt(a, b, t) ? a : b)
INT_OP(i_min, i_gt(a, b, t) ? b : a)

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

INT_OP(i_land, a != 0 && b != 0)
INT_OP(i_lor, a != 0 || b != 0)
INT_OP(i_lxor, (a != 0) != (b != 0))
INT_OP(i_and, (a & b))
INT_OP(i_or, a | b)
INT_OP(i_xor, a ^ b)

/* ---- comparisons ----------------------------------------------------------------------------- */

static double f_eq(double a, double b) { return a == b; }
static double f_ne(double a, double b) { return a != b; }
static double f_lt(double a, double b) { return a < b; }
static double f_le(double a, double b) { return a <= b; }
static double f_gt(double a, double b) { return a > b; }
static double f_ge(double a, double b) { return a >= b; }

INT_OP(i_eq, a == b)
INT_OP(i_ne, a != b)
INT_OP(i_lt, i_gt(b, a, t))
INT_OP(i_le, !i_gt(a, b, t))
INT_OP(i_gtr, i_gt(a, b, t))
INT_OP(i_ge, !i_gt(b, a, t))

/* ---- the operators ------------------------------------------------------------------------- */

/* One row per operator: its id (support/ops.def), its name, the float op (NULL: floats are
 * refused), the integer op, whether the result is bool, whether bools are refused, and what it
 * needs (for that message). */
/* clang-format off */
#define BOOL_OR_INT "bool or integer tensors"
#define BINARY_OPS(X)                                                                              \
    X(ADD,           add,           f_add,       i_add,       false, false, NULL)                  \
    X(SUBTRACT,      subtract,      f_sub,       i_sub,       false, false, NULL)                  \
    X(MULTIPLY,      multiply,      f_mul,       i_mul,       false, false, NULL)                  \
    X(DIVIDE,        divide,        f_div,       i_div,       false, false, NULL)                  \
    X(POWER,         power,         f_pow,       i_pow,       false, false, NULL)                  \
    X(MAXIMUM,       maximum,       f_max,       i_max,       false, false, NULL)                  \
    X(MINIMUM,       minimum,       f_min,       i_min,       false, false, NULL)                  \
    X(MOD,           mod,           f_fmod,      i_mod,       false, false, NULL)                  \
    X(FLOOR_DIVIDE,  floor_divide,  f_floor_div, i_floor_div, false, false, NULL)                  \
    X(FLOOR_MOD,     floor_mod,     f_floor_mod, i_floor_mod, false, false, NULL)                  \
    X(TRUNC_DIVIDE,  trunc_divide,  f_trunc_div, i_div,       false, false, NULL)                  \
    X(TRUNC_MOD,     trunc_mod,     f_trunc_mod, i_mod,       false, false, NULL)                  \
    X(LEFT_SHIFT,    left_shift,    NULL,        i_shl,       false, true,  "integer tensors")     \
    X(RIGHT_SHIFT,   right_shift,   NULL,        i_shr,       false, true,  "integer tensors")     \
    X(LOGICAL_AND,   logical_and,   NULL,        i_land,      false, false, BOOL_OR_INT)           \
    X(LOGICAL_OR,    logical_or,    NULL,        i_lor,       false, false, BOOL_OR_INT)           \
    X(LOGICAL_XOR,   logical_xor,   NULL,        i_lxor,      false, false, BOOL_OR_INT)           \
    X(BITWISE_AND,   bitwise_and,   NULL,        i_and,       false, false, BOOL_OR_INT)           \
    X(BITWISE_OR,    bitwise_or,    NULL,        i_or,        false, false, BOOL_OR_INT)           \
    X(BITWISE_XOR,   bitwise_xor,   NULL,        i_xor,       false, false, BOOL_OR_INT)           \
    X(EQUAL,         equal,         f_eq,        i_eq,        true,  false, NULL)                  \
    X(NOT_EQUAL,     not_equal,     f_ne,        i_ne,        true,  false, NULL)                  \
    X(LESS,          less,          f_lt,        i_lt,        true,  false, NULL)                  \
    X(LESS_EQUAL,    less_equal,    f_le,        i_le,        true,  false, NULL)                  \
    X(GREATER,       greater,       f_gt,        i_gtr,       true,  false, NULL)                  \
    X(GREATER_EQUAL, greater_equal, f_ge,        i_ge,        true,  false, NULL)

#define KERNEL(ID, name, f, i, cmp, no_bool, needs)                                                \
    static int k_##name(KCall *kc) {                                                               \
        static const BinOp op = {f, i, cmp, no_bool, needs};                                       \
        return binary(kc, &op);                                                                    \
    }
BINARY_OPS(KERNEL)
#undef KERNEL

#define ROW(ID, name, ...) {OP_ID_##ID, k_##name},
const KernelDef kern_ref_binary[] = {
    BINARY_OPS(ROW)
    {0, NULL},
};
#undef ROW
/* clang-format on */
