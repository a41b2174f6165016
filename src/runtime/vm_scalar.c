/* vm_scalar.c - VM_SCALAR: the simple arithmetic operators on unboxed scalar registers, with
 * the reference kernels' semantics exactly (src/kernels/ref/binary.c, unary.c; cast as
 * k_convert). The run loop (vm.c) inlines the hottest int and float cases and calls
 * vm_scalar_exec for the rest; tests/unit/test_vm.c checks every op and kind against the
 * kernels on edge values.
 *
 * Integers are computed on 64-bit patterns (sign-extended for int32/int64, 0/1 for bool) in
 * uint64_t, so nothing overflows in C, and wrap when stored back into the register's kind.
 * Floats are computed in double and rounded once to the kind (float32 after each op). */
#include <math.h>

#include "runtime/vm_impl.h"

/* ---- integer patterns ------------------------------------------------------------------------ */

typedef struct IntKind {
    unsigned bits; /* 1 for bool */
    bool sgn;
} IntKind;

static IntKind int_kind(uint8_t rk) {
    switch (rk) {
    case VM_RK_BOOL: return (IntKind){1, false};
    case VM_RK_I32: return (IntKind){32, true};
    default: return (IntKind){64, true};
    }
}

/* The signed value of a pattern without an implementation-defined conversion. */
static int64_t as_signed(uint64_t u) {
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* A pattern stored into a register of kind rk: wraps to the kind's width (k_storeu). */
static int64_t wrap(uint8_t rk, uint64_t r) {
    switch (rk) {
    case VM_RK_BOOL: return r != 0;
    case VM_RK_I32: {
        uint64_t lo = r & 0xffffffffu;
        return lo >= 0x80000000u ? (int64_t)lo - ((int64_t)1 << 32) : (int64_t)lo;
    }
    default: return as_signed(r);
    }
}

static bool i_gt(uint64_t a, uint64_t b, IntKind t) {
    return t.sgn ? as_signed(a) > as_signed(b) : a > b;
}

/* Truncating division and remainder; INT_MIN / -1 wraps to itself, x % -1 is 0. */
static int i_div(uint64_t a, uint64_t b, IntKind t, uint64_t *r) {
    if (b == 0) return VM_SC_ERR_DIV0;
    if (!t.sgn)
        *r = a / b;
    else if (as_signed(b) == -1)
        *r = 0 - a;
    else
        *r = (uint64_t)(as_signed(a) / as_signed(b));
    return VM_SC_OK;
}

static int i_mod(uint64_t a, uint64_t b, IntKind t, uint64_t *r) {
    if (b == 0) return VM_SC_ERR_DIV0;
    if (!t.sgn)
        *r = a % b;
    else if (as_signed(b) == -1)
        *r = 0;
    else
        *r = (uint64_t)(as_signed(a) % as_signed(b));
    return VM_SC_OK;
}

static int i_pow(uint64_t a, uint64_t b, IntKind t, uint64_t *r) {
    if (t.sgn && as_signed(b) < 0) {
        int64_t x = as_signed(a);
        if (x == 0) return VM_SC_ERR_POW0;
        *r = x == 1 ? 1 : x == -1 ? ((b & 1) ? UINT64_MAX : 1) : 0;
        return VM_SC_OK;
    }
    uint64_t base = a, acc = 1;
    for (uint64_t e = b; e != 0; e >>= 1) {
        if (e & 1) acc *= base;
        base *= base;
    }
    *r = acc;
    return VM_SC_OK;
}

/* An integer op on patterns; *r the result's pattern (bools 0/1 for comparisons). */
static int int_op(uint8_t sub, uint8_t rk, uint64_t a, uint64_t b, uint64_t *r) {
    IntKind t = int_kind(rk);
    switch (sub) {
    case VM_SC_ADD: *r = a + b; return VM_SC_OK;
    case VM_SC_SUB: *r = a - b; return VM_SC_OK;
    case VM_SC_MUL: *r = a * b; return VM_SC_OK;
    case VM_SC_DIV: return i_div(a, b, t, r);
    case VM_SC_MOD: return i_mod(a, b, t, r);
    case VM_SC_FLOOR_DIV: { /* the truncating quotient, less one when inexact and signs differ */
        uint64_t m;
        if (i_mod(a, b, t, &m) != VM_SC_OK) return VM_SC_ERR_DIV0;
        i_div(a, b, t, r);
        if (t.sgn && m != 0 && (as_signed(a) < 0) != (as_signed(b) < 0)) *r -= 1;
        return VM_SC_OK;
    }
    case VM_SC_FLOOR_MOD: /* the truncating remainder, plus b when its sign differs from b's */
        if (i_mod(a, b, t, r) != VM_SC_OK) return VM_SC_ERR_DIV0;
        if (t.sgn && *r != 0 && (as_signed(*r) < 0) != (as_signed(b) < 0)) *r += b;
        return VM_SC_OK;
    case VM_SC_MAX: *r = i_gt(a, b, t) ? a : b; return VM_SC_OK;
    case VM_SC_MIN: *r = i_gt(a, b, t) ? b : a; return VM_SC_OK;
    case VM_SC_POW: return i_pow(a, b, t, r);
    case VM_SC_EQ: *r = a == b; return VM_SC_OK;
    case VM_SC_NE: *r = a != b; return VM_SC_OK;
    case VM_SC_LT: *r = i_gt(b, a, t); return VM_SC_OK;
    case VM_SC_LE: *r = !i_gt(a, b, t); return VM_SC_OK;
    case VM_SC_GT: *r = i_gt(a, b, t); return VM_SC_OK;
    case VM_SC_GE: *r = !i_gt(b, a, t); return VM_SC_OK;
    /* Bitwise on the patterns; on bools (0/1) that is the logical op. */
    case VM_SC_AND: *r = a & b; return VM_SC_OK;
    case VM_SC_OR: *r = a | b; return VM_SC_OK;
    case VM_SC_XOR: *r = a ^ b; return VM_SC_OK;
    case VM_SC_NOT: *r = rk == VM_RK_BOOL ? a == 0 : ~a; return VM_SC_OK;
    case VM_SC_NEG: *r = 0 - a; return VM_SC_OK;
    case VM_SC_ABS: *r = t.sgn && as_signed(a) < 0 ? 0 - a : a; return VM_SC_OK;
    default: RLY_UNREACHABLE();
    }
}

/* ---- floats ---------------------------------------------------------------------------------- */

/* A float op in double; comparisons give 0/1. */
static double float_op(uint8_t sub, double a, double b) {
    switch (sub) {
    case VM_SC_ADD: return a + b;
    case VM_SC_SUB: return a - b;
    case VM_SC_MUL: return a * b;
    case VM_SC_DIV: return a / b;
    case VM_SC_MOD: return fmod(a, b);
    case VM_SC_FLOOR_DIV: return floor(a / b);
    case VM_SC_FLOOR_MOD: return a - floor(a / b) * b;
    case VM_SC_MAX: return isnan(a) || isnan(b) ? a + b : a > b ? a : b;
    case VM_SC_MIN: return isnan(a) || isnan(b) ? a + b : a < b ? a : b;
    case VM_SC_POW: return pow(a, b);
    case VM_SC_EQ: return a == b;
    case VM_SC_NE: return a != b;
    case VM_SC_LT: return a < b;
    case VM_SC_LE: return a <= b;
    case VM_SC_GT: return a > b;
    case VM_SC_GE: return a >= b;
    case VM_SC_NEG: return -a;
    case VM_SC_ABS: return fabs(a);
    default: RLY_UNREACHABLE();
    }
}

static bool is_cmp(uint8_t sub) { return sub >= VM_SC_EQ && sub <= VM_SC_GE; }

/* ---- cast ------------------------------------------------------------------------------------ */

/* Through one-element buffers and k_convert: exactly what the cast kernel does per element. */
static VmReg cast(uint8_t rk, uint8_t dst_rk, VmReg a) {
    union {
        uint8_t b;
        int32_t i32;
        int64_t i64;
        float f;
        double d;
    } src, dst;
    switch (rk) {
    case VM_RK_BOOL: src.b = a.i != 0; break;
    case VM_RK_I32: src.i32 = (int32_t)a.i; break;
    case VM_RK_I64: src.i64 = a.i; break;
    case VM_RK_F32: src.f = a.f; break;
    default: src.d = a.d; break;
    }
    k_convert(&dst, vm_rk_dtype(dst_rk), 0, &src, vm_rk_dtype(rk), 0);
    VmReg r;
    switch (dst_rk) {
    case VM_RK_BOOL: r.i = dst.b != 0; break;
    case VM_RK_I32: r.i = dst.i32; break;
    case VM_RK_I64: r.i = dst.i64; break;
    case VM_RK_F32: r.f = dst.f; break;
    default: r.d = dst.d; break;
    }
    return r;
}

/* ---- the entry points ------------------------------------------------------------------------ */

int vm_scalar_exec(uint8_t sub, uint8_t rk, uint8_t dst_rk, VmReg a, VmReg b, VmReg *out) {
    if (sub == VM_SC_CAST) {
        *out = cast(rk, dst_rk, a);
        return VM_SC_OK;
    }
    if (rk == VM_RK_F32 || rk == VM_RK_F64) {
        double x = rk == VM_RK_F32 ? (double)a.f : a.d, y = rk == VM_RK_F32 ? (double)b.f : b.d;
        double r = float_op(sub, x, y);
        if (is_cmp(sub))
            out->i = r != 0;
        else if (rk == VM_RK_F32)
            out->f = (float)r;
        else
            out->d = r;
        return VM_SC_OK;
    }
    uint64_t r;
    int e = int_op(sub, rk, (uint64_t)a.i, (uint64_t)b.i, &r);
    if (e != VM_SC_OK) return e;
    out->i = is_cmp(sub) ? (int64_t)(r != 0) : wrap(rk, r);
    return VM_SC_OK;
}

static bool scalar_rk(uint8_t rk) { return rk > VM_RK_VALUE && rk < VM_RK_COUNT; }

bool vm_scalar_kinds_ok(uint8_t sub, uint8_t rk, uint8_t dst_rk) {
    if (!scalar_rk(rk) || !scalar_rk(dst_rk) || sub >= VM_SC_COUNT) return false;
    bool is_int = rk == VM_RK_BOOL || rk == VM_RK_I32 || rk == VM_RK_I64;
    switch (sub) {
    case VM_SC_CAST: return true;
    case VM_SC_EQ:
    case VM_SC_NE:
    case VM_SC_LT:
    case VM_SC_LE:
    case VM_SC_GT:
    case VM_SC_GE: return dst_rk == VM_RK_BOOL;
    case VM_SC_AND:
    case VM_SC_OR:
    case VM_SC_XOR:
    case VM_SC_NOT: return is_int && dst_rk == rk;
    case VM_SC_NEG:
    case VM_SC_ABS: return rk != VM_RK_BOOL && dst_rk == rk;
    default: return dst_rk == rk;
    }
}

bool vm_scalar_unary(uint8_t sub) {
    return sub == VM_SC_NOT || sub == VM_SC_NEG || sub == VM_SC_ABS || sub == VM_SC_CAST;
}

const char *vm_scalar_op_name(uint8_t sub) {
    static const char *const names[VM_SC_COUNT] = {
        [VM_SC_ADD] = "add",
        [VM_SC_SUB] = "subtract",
        [VM_SC_MUL] = "multiply",
        [VM_SC_DIV] = "divide",
        [VM_SC_MOD] = "mod",
        [VM_SC_FLOOR_DIV] = "floor_divide",
        [VM_SC_FLOOR_MOD] = "floor_mod",
        [VM_SC_MAX] = "maximum",
        [VM_SC_MIN] = "minimum",
        [VM_SC_POW] = "power",
        [VM_SC_EQ] = "equal",
        [VM_SC_NE] = "not_equal",
        [VM_SC_LT] = "less",
        [VM_SC_LE] = "less_equal",
        [VM_SC_GT] = "greater",
        [VM_SC_GE] = "greater_equal",
        [VM_SC_AND] = "logical_and",
        [VM_SC_OR] = "logical_or",
        [VM_SC_XOR] = "logical_xor",
        [VM_SC_NOT] = "logical_not",
        [VM_SC_NEG] = "negative",
        [VM_SC_ABS] = "abs",
        [VM_SC_CAST] = "cast",
    };
    _Static_assert(VM_SC_COUNT == 23, "update the scalar op names");
    return sub < VM_SC_COUNT ? names[sub] : "?";
}

const char *vm_scalar_error(int code) {
    switch (code) {
    case VM_SC_ERR_DIV0: return "integer division by zero";
    case VM_SC_ERR_POW0: return "integer 0 raised to a negative power";
    default: return "scalar operation failed";
    }
}
