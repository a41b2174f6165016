/* op_binary.c - broadcasting binary operators: arithmetic, comparison, logical and bitwise.
 * Both arguments have the same dtype; shapes broadcast as in numpy (`?` dims included). */
#include "ops/ops.h"

typedef enum BinKind { BIN_ARITH, BIN_CMP, BIN_INT, BIN_LOGIC } BinKind;

static RelResult broadcast_rel(RelCall *rc, BinKind kind) {
    REL_TENSOR(a, rc, 0);
    REL_TENSOR(b, rc, 1);
    if (a->dtype != b->dtype)
        return rel_error_arg(rc, 1, "dtypes differ: %s and %s (cast one of them)",
                             sup_dtype_name(a->dtype), sup_dtype_name(b->dtype));
    if (kind == BIN_INT && !rel_is_integer(a->dtype))
        return rel_error(rc, "needs integer tensors, got %s", sup_dtype_name(a->dtype));
    if (kind == BIN_LOGIC && a->dtype != RLY_DTYPE_BOOL && !rel_is_integer(a->dtype))
        return rel_error(rc, "needs bool or integer tensors, got %s", sup_dtype_name(a->dtype));
    uint32_t n;
    int64_t *shape;
    if (!rel_broadcast(rc, a->ndim, a->shape, b->ndim, b->shape, &n, &shape)) return REL_ERROR;
    return rel_out_tensor(rc, kind == BIN_CMP ? RLY_DTYPE_BOOL : a->dtype, n, shape);
}

static RelResult arith_rel(RelCall *rc) { return broadcast_rel(rc, BIN_ARITH); }
static RelResult cmp_rel(RelCall *rc) { return broadcast_rel(rc, BIN_CMP); }
static RelResult int_rel(RelCall *rc) { return broadcast_rel(rc, BIN_INT); }
static RelResult logic_rel(RelCall *rc) { return broadcast_rel(rc, BIN_LOGIC); }

#define BIN(name, rel, doc)                                                                        \
    { name, 2, OP_BROADCAST, rel, NULL, "lhs, rhs", doc, 0, 0, 0, 0, 0 }

OpDef ops_binary_table[] = {
    BIN("add", arith_rel, "lhs + rhs, elementwise with broadcasting"),
    BIN("subtract", arith_rel, "lhs - rhs, elementwise with broadcasting"),
    BIN("multiply", arith_rel, "lhs * rhs, elementwise with broadcasting"),
    BIN("divide", arith_rel, "lhs / rhs (integers: truncating), elementwise with broadcasting"),
    BIN("power", arith_rel, "lhs ** rhs, elementwise with broadcasting"),
    BIN("maximum", arith_rel, "max(lhs, rhs), elementwise with broadcasting"),
    BIN("minimum", arith_rel, "min(lhs, rhs), elementwise with broadcasting"),
    BIN("mod", arith_rel, "remainder with the sign of lhs (C fmod / %)"),
    BIN("floor_divide", arith_rel, "floor(lhs / rhs)"),
    BIN("floor_mod", arith_rel, "lhs - floor(lhs / rhs) * rhs (sign of rhs)"),
    BIN("trunc_divide", arith_rel, "trunc(lhs / rhs)"),
    BIN("trunc_mod", arith_rel, "lhs - trunc(lhs / rhs) * rhs (sign of lhs)"),
    BIN("left_shift", int_rel, "lhs << rhs on integers"),
    BIN("right_shift", int_rel, "lhs >> rhs on integers (arithmetic for signed)"),
    BIN("logical_and", logic_rel, "lhs && rhs"),
    BIN("logical_or", logic_rel, "lhs || rhs"),
    BIN("logical_xor", logic_rel, "lhs != rhs as booleans"),
    BIN("bitwise_and", logic_rel, "lhs & rhs on integers or bools"),
    BIN("bitwise_or", logic_rel, "lhs | rhs on integers or bools"),
    BIN("bitwise_xor", logic_rel, "lhs ^ rhs on integers or bools"),
    BIN("equal", cmp_rel, "lhs == rhs, a bool tensor"),
    BIN("not_equal", cmp_rel, "lhs != rhs, a bool tensor"),
    BIN("less", cmp_rel, "lhs < rhs, a bool tensor"),
    BIN("less_equal", cmp_rel, "lhs <= rhs, a bool tensor"),
    BIN("greater", cmp_rel, "lhs > rhs, a bool tensor"),
    BIN("greater_equal", cmp_rel, "lhs >= rhs, a bool tensor"),
    {0},
};
