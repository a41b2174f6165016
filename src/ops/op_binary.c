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

OpDef ops_binary_table[] = {
    OP_ROW(ADD, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "lhs + rhs, elementwise with broadcasting"),
    OP_ROW(SUBTRACT, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "lhs - rhs, elementwise with broadcasting"),
    OP_ROW(MULTIPLY, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "lhs * rhs, elementwise with broadcasting"),
    OP_ROW(DIVIDE, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "lhs / rhs (integers: truncating), elementwise with broadcasting"),
    OP_ROW(POWER, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "lhs ** rhs, elementwise with broadcasting"),
    OP_ROW(MAXIMUM, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "max(lhs, rhs), elementwise with broadcasting"),
    OP_ROW(MINIMUM, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "min(lhs, rhs), elementwise with broadcasting"),
    OP_ROW(MOD, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "remainder with the sign of lhs (C fmod / %)"),
    OP_ROW(FLOOR_DIVIDE, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs", "floor(lhs / rhs)"),
    OP_ROW(FLOOR_MOD, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "lhs - floor(lhs / rhs) * rhs (sign of rhs)"),
    OP_ROW(TRUNC_DIVIDE, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs", "trunc(lhs / rhs)"),
    OP_ROW(TRUNC_MOD, 2, OP_BROADCAST, arith_rel, NULL, "lhs, rhs",
           "lhs - trunc(lhs / rhs) * rhs (sign of lhs)"),
    OP_ROW(LEFT_SHIFT, 2, OP_BROADCAST, int_rel, NULL, "lhs, rhs", "lhs << rhs on integers"),
    OP_ROW(RIGHT_SHIFT, 2, OP_BROADCAST, int_rel, NULL, "lhs, rhs",
           "lhs >> rhs on integers (arithmetic for signed)"),
    OP_ROW(LOGICAL_AND, 2, OP_BROADCAST, logic_rel, NULL, "lhs, rhs", "lhs && rhs"),
    OP_ROW(LOGICAL_OR, 2, OP_BROADCAST, logic_rel, NULL, "lhs, rhs", "lhs || rhs"),
    OP_ROW(LOGICAL_XOR, 2, OP_BROADCAST, logic_rel, NULL, "lhs, rhs", "lhs != rhs as booleans"),
    OP_ROW(BITWISE_AND, 2, OP_BROADCAST, logic_rel, NULL, "lhs, rhs",
           "lhs & rhs on integers or bools"),
    OP_ROW(BITWISE_OR, 2, OP_BROADCAST, logic_rel, NULL, "lhs, rhs",
           "lhs | rhs on integers or bools"),
    OP_ROW(BITWISE_XOR, 2, OP_BROADCAST, logic_rel, NULL, "lhs, rhs",
           "lhs ^ rhs on integers or bools"),
    OP_ROW(EQUAL, 2, OP_BROADCAST, cmp_rel, NULL, "lhs, rhs", "lhs == rhs, a bool tensor"),
    OP_ROW(NOT_EQUAL, 2, OP_BROADCAST, cmp_rel, NULL, "lhs, rhs", "lhs != rhs, a bool tensor"),
    OP_ROW(LESS, 2, OP_BROADCAST, cmp_rel, NULL, "lhs, rhs", "lhs < rhs, a bool tensor"),
    OP_ROW(LESS_EQUAL, 2, OP_BROADCAST, cmp_rel, NULL, "lhs, rhs", "lhs <= rhs, a bool tensor"),
    OP_ROW(GREATER, 2, OP_BROADCAST, cmp_rel, NULL, "lhs, rhs", "lhs > rhs, a bool tensor"),
    OP_ROW(GREATER_EQUAL, 2, OP_BROADCAST, cmp_rel, NULL, "lhs, rhs", "lhs >= rhs, a bool tensor"),
    {0},
};
