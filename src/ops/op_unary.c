/* op_unary.c - elementwise unary operators (math, rounding, predicates, logical/bitwise not,
 * the *_like creators, clip, fixed_point_multiply) and the two shape queries shape_of and
 * ndarray_size. The result has the argument's shape; its dtype is the argument's except for the
 * predicates (bool) and the shape queries (their dtype attribute). */
#include "ops/ops.h"

/* Which dtypes a relation takes. */
typedef enum UnaryIn {
    IN_ANY,     /* every dtype */
    IN_FLOAT,   /* floating point only (transcendental math) */
    IN_NUMERIC, /* integers and floats, not bool */
    IN_INTEGER, /* signed or unsigned integers */
    IN_BOOL,    /* bool only */
    IN_INT_BOOL /* integers or bool */
} UnaryIn;

static bool dtype_fits(rly_dtype dt, UnaryIn in) {
    switch (in) {
    case IN_ANY: return true;
    case IN_FLOAT: return rel_is_float(dt);
    case IN_NUMERIC: return rel_is_float(dt) || rel_is_integer(dt);
    case IN_INTEGER: return rel_is_integer(dt);
    case IN_BOOL: return dt == RLY_DTYPE_BOOL;
    case IN_INT_BOOL: return dt == RLY_DTYPE_BOOL || rel_is_integer(dt);
    }
    return false;
}

static const char *dtype_words(UnaryIn in) {
    switch (in) {
    case IN_ANY: return "a tensor";
    case IN_FLOAT: return "a floating-point tensor (float16, float32, float64 or bfloat16)";
    case IN_NUMERIC: return "a numeric (integer or floating-point) tensor";
    case IN_INTEGER: return "an integer tensor";
    case IN_BOOL: return "a bool tensor";
    case IN_INT_BOOL: return "an integer or bool tensor";
    }
    return "?";
}

/* The argument as a tensor whose dtype is in `in`; NULL (rc->status set) otherwise. */
static TensorType *unary_arg(RelCall *rc, UnaryIn in) {
    TensorType *t = rel_tensor(rc, 0);
    if (t == NULL) return NULL;
    if (!dtype_fits(t->dtype, in)) {
        rel_error_arg(rc, 0, "needs %s, got %s%s", dtype_words(in), sup_dtype_name(t->dtype),
                      in == IN_FLOAT && rel_is_integer(t->dtype) ? " (cast it to a float first)"
                                                                 : "");
        return NULL;
    }
    return t;
}

static RelResult same_type(RelCall *rc, UnaryIn in) {
    TensorType *t = unary_arg(rc, in);
    if (t == NULL) return rc->status;
    return rel_out(rc, &t->base);
}

static RelResult float_rel(RelCall *rc) { return same_type(rc, IN_FLOAT); }
static RelResult numeric_rel(RelCall *rc) { return same_type(rc, IN_NUMERIC); }
static RelResult any_rel(RelCall *rc) { return same_type(rc, IN_ANY); }
static RelResult bool_rel(RelCall *rc) { return same_type(rc, IN_BOOL); }
static RelResult int_bool_rel(RelCall *rc) { return same_type(rc, IN_INT_BOOL); }

/* isnan / isfinite / isinf: numeric in, bool out of the same shape. */
static RelResult predicate_rel(RelCall *rc) {
    TensorType *t = unary_arg(rc, IN_NUMERIC);
    if (t == NULL) return rc->status;
    return rel_out_tensor(rc, RLY_DTYPE_BOOL, t->ndim, t->shape);
}

static RelResult clip_rel(RelCall *rc) {
    TensorType *t = unary_arg(rc, IN_NUMERIC);
    if (t == NULL) return rc->status;
    double lo = attr_float(rc, "a_min"), hi = attr_float(rc, "a_max");
    if (lo != lo || hi != hi) return rel_error(rc, "a_min and a_max must not be NaN");
    /* a_min > a_max is accepted as in TVM and numpy: every element becomes a_max */
    return rel_out(rc, &t->base);
}

static RelResult fixed_point_multiply_rel(RelCall *rc) {
    TensorType *t = unary_arg(rc, IN_INTEGER);
    if (t == NULL) return rc->status;
    int64_t mult = attr_int(rc, "multiplier"), shift = attr_int(rc, "shift");
    if (mult < INT32_MIN || mult > INT32_MAX)
        return rel_error(rc, "multiplier %lld does not fit in int32", (long long)mult);
    if (shift < -63 || shift > 63)
        return rel_error(rc, "shift %lld is out of range (-63 to 63)", (long long)shift);
    return rel_out(rc, &t->base);
}

/* The dtype attribute of the shape queries: an integer dtype. */
static bool index_dtype(RelCall *rc, rly_dtype *out) {
    int dt = attr_dtype(rc, "dtype");
    if (dt < 0 || !rel_is_integer((rly_dtype)dt)) {
        rel_error(rc, "dtype must be an integer type, got \"%s\"", attr_str(rc, "dtype"));
        return false;
    }
    *out = (rly_dtype)dt;
    return true;
}

/* shape_of: a 1-D tensor holding the argument's shape, of length its rank. As in TVM's relation
 * (RankShape), a scalar argument gives a scalar result rather than a (0,) tensor. */
static RelResult shape_of_rel(RelCall *rc) {
    REL_TENSOR(t, rc, 0);
    rly_dtype dt;
    if (!index_dtype(rc, &dt)) return REL_ERROR;
    int64_t len = t->ndim;
    return rel_out_tensor(rc, dt, t->ndim ? 1 : 0, &len);
}

/* ndarray_size: the number of elements, as a scalar. */
static RelResult ndarray_size_rel(RelCall *rc) {
    REL_TENSOR(t, rc, 0);
    (void)t;
    rly_dtype dt;
    if (!index_dtype(rc, &dt)) return REL_ERROR;
    return rel_out_tensor(rc, dt, 0, NULL);
}

static const AttrSpec clip_attrs[] = {
    {"a_min", AT_FLOAT, NULL, NULL},
    {"a_max", AT_FLOAT, NULL, NULL},
    {0},
};

static const AttrSpec fixed_point_multiply_attrs[] = {
    {"multiplier", AT_INT, NULL, NULL},
    {"shift", AT_INT, NULL, NULL},
    {0},
};

static const AttrSpec dtype_attrs[] = {
    {"dtype", AT_DTYPE, "\"int32\"", NULL},
    {0},
};

OpDef ops_unary_table[] = {
    OP_ROW(LOG, 1, OP_ELEMWISE, float_rel, NULL, "data", "natural logarithm, elementwise"),
    OP_ROW(LOG2, 1, OP_ELEMWISE, float_rel, NULL, "data", "base-2 logarithm, elementwise"),
    OP_ROW(LOG10, 1, OP_ELEMWISE, float_rel, NULL, "data", "base-10 logarithm, elementwise"),
    OP_ROW(EXP, 1, OP_ELEMWISE, float_rel, NULL, "data", "e ** x, elementwise"),
    OP_ROW(FAST_EXP, 1, OP_ELEMWISE, float_rel, NULL, "data",
           "e ** x by a fast approximation, elementwise"),
    OP_ROW(ERF, 1, OP_ELEMWISE, float_rel, NULL, "data", "the Gauss error function, elementwise"),
    OP_ROW(FAST_ERF, 1, OP_ELEMWISE, float_rel, NULL, "data",
           "the error function by a fast approximation, elementwise"),
    OP_ROW(SQRT, 1, OP_ELEMWISE, float_rel, NULL, "data", "square root, elementwise"),
    OP_ROW(RSQRT, 1, OP_ELEMWISE, float_rel, NULL, "data", "1 / sqrt(x), elementwise"),
    OP_ROW(SIGMOID, 1, OP_ELEMWISE, float_rel, NULL, "data", "1 / (1 + exp(-x)), elementwise"),
    OP_ROW(TANH, 1, OP_ELEMWISE, float_rel, NULL, "data", "hyperbolic tangent, elementwise"),
    OP_ROW(FAST_TANH, 1, OP_ELEMWISE, float_rel, NULL, "data",
           "hyperbolic tangent by a fast approximation, elementwise"),
    OP_ROW(SIN, 1, OP_ELEMWISE, float_rel, NULL, "data", "sine, elementwise"),
    OP_ROW(COS, 1, OP_ELEMWISE, float_rel, NULL, "data", "cosine, elementwise"),
    OP_ROW(TAN, 1, OP_ELEMWISE, float_rel, NULL, "data", "tangent, elementwise"),
    OP_ROW(SINH, 1, OP_ELEMWISE, float_rel, NULL, "data", "hyperbolic sine, elementwise"),
    OP_ROW(COSH, 1, OP_ELEMWISE, float_rel, NULL, "data", "hyperbolic cosine, elementwise"),
    OP_ROW(ASIN, 1, OP_ELEMWISE, float_rel, NULL, "data", "inverse sine, elementwise"),
    OP_ROW(ACOS, 1, OP_ELEMWISE, float_rel, NULL, "data", "inverse cosine, elementwise"),
    OP_ROW(ATAN, 1, OP_ELEMWISE, float_rel, NULL, "data", "inverse tangent, elementwise"),
    OP_ROW(ASINH, 1, OP_ELEMWISE, float_rel, NULL, "data", "inverse hyperbolic sine, elementwise"),
    OP_ROW(ACOSH, 1, OP_ELEMWISE, float_rel, NULL, "data",
           "inverse hyperbolic cosine, elementwise"),
    OP_ROW(ATANH, 1, OP_ELEMWISE, float_rel, NULL, "data",
           "inverse hyperbolic tangent, elementwise"),
    OP_ROW(FLOOR, 1, OP_ELEMWISE, numeric_rel, NULL, "data",
           "round toward -inf, elementwise (integers unchanged)"),
    OP_ROW(CEIL, 1, OP_ELEMWISE, numeric_rel, NULL, "data",
           "round toward +inf, elementwise (integers unchanged)"),
    OP_ROW(TRUNC, 1, OP_ELEMWISE, numeric_rel, NULL, "data",
           "round toward zero, elementwise (integers unchanged)"),
    OP_ROW(ROUND, 1, OP_ELEMWISE, numeric_rel, NULL, "data",
           "round to nearest, ties to even, elementwise (integers unchanged)"),
    OP_ROW(SIGN, 1, OP_ELEMWISE, numeric_rel, NULL, "data",
           "-1, 0 or 1 by the sign of x, elementwise"),
    OP_ROW(ABS, 1, OP_ELEMWISE, numeric_rel, NULL, "data", "absolute value, elementwise"),
    OP_ROW(NEGATIVE, 1, OP_ELEMWISE, numeric_rel, NULL, "data", "-x, elementwise"),
    OP_ROW(LOGICAL_NOT, 1, OP_ELEMWISE, bool_rel, NULL, "data", "!x on a bool tensor, elementwise"),
    OP_ROW(BITWISE_NOT, 1, OP_ELEMWISE, int_bool_rel, NULL, "data",
           "~x on integers or bools, elementwise"),
    OP_ROW(ISNAN, 1, OP_ELEMWISE, predicate_rel, NULL, "data", "whether x is NaN, a bool tensor"),
    OP_ROW(ISFINITE, 1, OP_ELEMWISE, predicate_rel, NULL, "data",
           "whether x is finite, a bool tensor"),
    OP_ROW(ISINF, 1, OP_ELEMWISE, predicate_rel, NULL, "data",
           "whether x is +inf or -inf, a bool tensor"),
    OP_ROW(ZEROS_LIKE, 1, OP_ELEMWISE, any_rel, NULL, "data",
           "zeros of the argument's shape and dtype"),
    OP_ROW(ONES_LIKE, 1, OP_ELEMWISE, any_rel, NULL, "data",
           "ones of the argument's shape and dtype"),
    OP_ROW(COPY, 1, OP_ELEMWISE, any_rel, NULL, "data", "a copy of the argument"),
    OP_ROW(CLIP, 1, OP_ELEMWISE, clip_rel, clip_attrs, "data",
           "min(max(x, a_min), a_max), the bounds cast to the dtype"),
    OP_ROW(FIXED_POINT_MULTIPLY, 1, OP_ELEMWISE, fixed_point_multiply_rel,
           fixed_point_multiply_attrs, "data",
           "x * multiplier * 2**(shift - 31), rounded, on integers (quantized requantize)"),
    OP_ROW(SHAPE_OF, 1, OP_OPAQUE, shape_of_rel, dtype_attrs, "data",
           "the argument's shape as a 1-D tensor of its rank's length"),
    OP_ROW(NDARRAY_SIZE, 1, OP_INJECTIVE, ndarray_size_rel, dtype_attrs, "data",
           "the argument's number of elements, as a scalar"),
    {0},
};
