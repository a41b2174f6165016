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

#define UN(name, rel, doc)                                                                         \
    { name, 1, OP_ELEMWISE, rel, NULL, "data", doc, 0, 0, 0, 0, 0 }
#define UN_ATTRS(name, pattern, rel, attrs, doc)                                                   \
    { name, 1, pattern, rel, attrs, "data", doc, 0, 0, 0, 0, 0 }

OpDef ops_unary_table[] = {
    UN("log", float_rel, "natural logarithm, elementwise"),
    UN("log2", float_rel, "base-2 logarithm, elementwise"),
    UN("log10", float_rel, "base-10 logarithm, elementwise"),
    UN("exp", float_rel, "e ** x, elementwise"),
    UN("fast_exp", float_rel, "e ** x by a fast approximation, elementwise"),
    UN("erf", float_rel, "the Gauss error function, elementwise"),
    UN("fast_erf", float_rel, "the error function by a fast approximation, elementwise"),
    UN("sqrt", float_rel, "square root, elementwise"),
    UN("rsqrt", float_rel, "1 / sqrt(x), elementwise"),
    UN("sigmoid", float_rel, "1 / (1 + exp(-x)), elementwise"),
    UN("tanh", float_rel, "hyperbolic tangent, elementwise"),
    UN("fast_tanh", float_rel, "hyperbolic tangent by a fast approximation, elementwise"),
    UN("sin", float_rel, "sine, elementwise"),
    UN("cos", float_rel, "cosine, elementwise"),
    UN("tan", float_rel, "tangent, elementwise"),
    UN("sinh", float_rel, "hyperbolic sine, elementwise"),
    UN("cosh", float_rel, "hyperbolic cosine, elementwise"),
    UN("asin", float_rel, "inverse sine, elementwise"),
    UN("acos", float_rel, "inverse cosine, elementwise"),
    UN("atan", float_rel, "inverse tangent, elementwise"),
    UN("asinh", float_rel, "inverse hyperbolic sine, elementwise"),
    UN("acosh", float_rel, "inverse hyperbolic cosine, elementwise"),
    UN("atanh", float_rel, "inverse hyperbolic tangent, elementwise"),
    UN("floor", numeric_rel, "round toward -inf, elementwise (integers unchanged)"),
    UN("ceil", numeric_rel, "round toward +inf, elementwise (integers unchanged)"),
    UN("trunc", numeric_rel, "round toward zero, elementwise (integers unchanged)"),
    UN("round", numeric_rel, "round to nearest, ties to even, elementwise (integers unchanged)"),
    UN("sign", numeric_rel, "-1, 0 or 1 by the sign of x, elementwise"),
    UN("abs", numeric_rel, "absolute value, elementwise"),
    UN("negative", numeric_rel, "-x, elementwise"),
    UN("logical_not", bool_rel, "!x on a bool tensor, elementwise"),
    UN("bitwise_not", int_bool_rel, "~x on integers or bools, elementwise"),
    UN("isnan", predicate_rel, "whether x is NaN, a bool tensor"),
    UN("isfinite", predicate_rel, "whether x is finite, a bool tensor"),
    UN("isinf", predicate_rel, "whether x is +inf or -inf, a bool tensor"),
    UN("zeros_like", any_rel, "zeros of the argument's shape and dtype"),
    UN("ones_like", any_rel, "ones of the argument's shape and dtype"),
    UN("copy", any_rel, "a copy of the argument"),
    UN_ATTRS("clip", OP_ELEMWISE, clip_rel, clip_attrs,
             "min(max(x, a_min), a_max), the bounds cast to the dtype"),
    UN_ATTRS("fixed_point_multiply", OP_ELEMWISE, fixed_point_multiply_rel,
             fixed_point_multiply_attrs,
             "x * multiplier * 2**(shift - 31), rounded, on integers (quantized requantize)"),
    UN_ATTRS("shape_of", OP_OPAQUE, shape_of_rel, dtype_attrs,
             "the argument's shape as a 1-D tensor of its rank's length"),
    UN_ATTRS("ndarray_size", OP_INJECTIVE, ndarray_size_rel, dtype_attrs,
             "the argument's number of elements, as a scalar"),
    {0},
};
