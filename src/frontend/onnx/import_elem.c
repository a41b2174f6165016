/* import_elem.c - ONNX converters: unary, binary, logical and cast operators, the elementwise
 * activations (Elu, Selu, HardSwish, ... as Relay composites where Relay has no single op),
 * variadic Sum/Mean/Max/Min, Where, Dropout at inference, and the small creators EyeLike, Range
 * and the window functions. Einsum maps to Relay einsum (Det: import_extra.c).
 *
 * Composites follow the ONNX reference formulas step by step in the input's dtype (each Relay
 * kernel rounds once per step, as numpy does), so results agree with the reference to the last
 * place wherever the reference itself works in the input's dtype. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "frontend/onnx/import.h"

#define PI 3.14159265358979323846

/* ---- helpers --------------------------------------------------------------------------------- */

/* The helpers pass NULL through: a NULL argument (an error already reported) gives NULL. */

static Expr *un(Imp *imp, const char *op, Expr *x) {
    return x ? imp_call1(imp, op, x, NULL) : NULL;
}

static Expr *bin(Imp *imp, const char *op, Expr *a, Expr *b) {
    return a && b ? imp_call2(imp, op, a, b, NULL) : NULL;
}

/* A scalar constant of x's dtype. */
static Expr *lit(Imp *imp, Expr *x, double v) {
    return x ? imp_scalar(imp, imp_dtype(x), v) : NULL;
}

/* where(c, a, b) (NULL passes through); also used by the activations below. */
static Expr *where3(Imp *imp, Expr *c, Expr *a, Expr *b) {
    Expr *args[3] = {c, a, b};
    return c && a && b ? imp_call(imp, "where", 3, args, NULL) : NULL;
}

/* Whether the node names output i (an optional output left out is ""). */

/* Required input i, which must be a tensor. */

/* A tensor input of shape () or (1) as a 0-D tensor (Range and the windows take scalars; some
 * exporters write them as one-element vectors). */
static Expr *scalar_in(Imp *imp, uint32_t i, const char *what) {
    Expr *e = imp_tin(imp, i, what);
    if (e == NULL) return NULL;
    TensorType *t = imp_tt(e);
    if (t->ndim == 0) return e;
    if (t->ndim == 1 && (t->shape[0] == 1 || t->shape[0] == DIM_ANY)) {
        ImpAttrs a = {0};
        int64_t ax = 0;
        ia_ints(imp, &a, "axis", 1, &ax);
        return imp_call1(imp, "squeeze", e, &a);
    }
    imp_error(imp, "input %u (%s) must be a scalar, got a tensor of rank %u", i, what, t->ndim);
    return NULL;
}

typedef struct NameMap {
    const char *onnx, *relay;
} NameMap;

static const char *map_name(const NameMap *m, const char *op_type) {
    for (; m->onnx; m++)
        if (strcmp(m->onnx, op_type) == 0) return m->relay;
    return NULL;
}

/* ---- one-to-one unary operators -------------------------------------------------------------- */

static const NameMap unary_ops[] = {
    {"Abs", "abs"},      {"Acos", "acos"},       {"Acosh", "acosh"},
    {"Asin", "asin"},    {"Asinh", "asinh"},     {"Atan", "atan"},
    {"Atanh", "atanh"},  {"Ceil", "ceil"},       {"Cos", "cos"},
    {"Cosh", "cosh"},    {"Erf", "erf"},         {"Exp", "exp"},
    {"Floor", "floor"},  {"IsNaN", "isnan"},     {"Log", "log"},
    {"Neg", "negative"}, {"Not", "logical_not"}, {"Relu", "nn.relu"},
    {"Round", "round"},  {"Sigmoid", "sigmoid"}, {"Sign", "sign"},
    {"Sin", "sin"},      {"Sinh", "sinh"},       {"Sqrt", "sqrt"},
    {"Tan", "tan"},      {"Tanh", "tanh"},       {"BitwiseNot", "bitwise_not"},
    {NULL, NULL},
};

static bool conv_unary(Imp *imp) {
    const char *op = map_name(unary_ops, imp_node(imp)->op_type);
    RLY_CHECK(op != NULL, "no unary mapping for %s", imp_node(imp)->op_type);
    return imp_set_out(imp, 0, un(imp, op, imp_tin(imp, 0, "X")));
}

static bool conv_reciprocal(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    return imp_set_out(imp, 0, bin(imp, "divide", lit(imp, x, 1), x));
}

/* IsInf: detect_negative and detect_positive choose which infinities count. */
static bool conv_isinf(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    if (x == NULL) return false;
    bool neg = imp_attr_int(imp, "detect_negative", 1) != 0;
    bool pos = imp_attr_int(imp, "detect_positive", 1) != 0;
    Expr *y;
    if (!sup_dtype_is_float(imp_dtype(x))) /* integers are never infinite */
        y = un(imp, "zeros_like", imp_cast(imp, x, RLY_DTYPE_BOOL));
    else if (neg && pos)
        y = un(imp, "isinf", x);
    else if (neg || pos)
        y = bin(imp, "equal", x, lit(imp, x, pos ? INFINITY : -INFINITY));
    else
        y = un(imp, "zeros_like", imp_cast(imp, x, RLY_DTYPE_BOOL));
    return imp_set_out(imp, 0, y);
}

/* ---- binary operators ------------------------------------------------------------------------ */

/* Before opset 7 the arithmetic and logical ops broadcast only with broadcast=1, B to A, aligned
 * at `axis` when given (suffix-aligned as numpy otherwise). Numpy broadcasting covers the
 * suffix form and equal shapes; an explicit axis needs B's trailing dims padded with ones. */
static Expr *legacy_rhs(Imp *imp, Expr *a, Expr *b) {
    if (a == NULL || b == NULL || imp_opset(imp) >= 7) return b;
    const OxAttr *ax = imp_attr(imp, "axis");
    if (imp_attr_int(imp, "broadcast", 0) == 0 || ax == NULL) return b;
    int64_t ra = imp_rank(a), rb = imp_rank(b), axis = ax->i < 0 ? ax->i + ra : ax->i;
    if (axis < 0 || axis + rb > ra) {
        imp_error(imp, "axis %lld does not place B (rank %lld) inside A (rank %lld)",
                  (long long)ax->i, (long long)rb, (long long)ra);
        return NULL;
    }
    int64_t trailing = ra - axis - rb;
    if (trailing == 0) return b;
    ImpAttrs at = {0};
    ia_int(imp, &at, "axis", rb);
    ia_int(imp, &at, "num_newaxis", trailing);
    return imp_call1(imp, "expand_dims", b, &at);
}

static const NameMap binary_ops[] = {
    {"Add", "add"},
    {"Sub", "subtract"},
    {"Mul", "multiply"},
    {"Div", "divide"}, /* integers truncate, as ONNX requires */
    {"And", "logical_and"},
    {"Or", "logical_or"},
    {"Xor", "logical_xor"},
    {"Equal", "equal"},
    {"Greater", "greater"},
    {"Less", "less"},
    {"GreaterOrEqual", "greater_equal"},
    {"LessOrEqual", "less_equal"},
    {"BitwiseAnd", "bitwise_and"}, /* opset 18 */
    {"BitwiseOr", "bitwise_or"},
    {"BitwiseXor", "bitwise_xor"},
    {NULL, NULL},
};

static bool conv_binary(Imp *imp) {
    const char *op = map_name(binary_ops, imp_node(imp)->op_type);
    RLY_CHECK(op != NULL, "no binary mapping for %s", imp_node(imp)->op_type);
    Expr *a = imp_tin(imp, 0, "A"), *b = imp_tin(imp, 1, "B");
    return imp_set_out(imp, 0, bin(imp, op, a, legacy_rhs(imp, a, b)));
}

/* Pow: the result has the base's dtype. The reference computes np.power(a, b).astype(a.dtype):
 * mixed integer dtypes in int64, anything with a float in float64, then converts. Both become
 * int64 (which wraps exactly as the narrower power would) or float64, and the result is cast
 * back. */
static bool conv_pow(Imp *imp) {
    Expr *a = imp_tin(imp, 0, "X"), *b = imp_tin(imp, 1, "Y");
    b = legacy_rhs(imp, a, b);
    if (a == NULL || b == NULL) return false;
    rly_dtype da = imp_dtype(a), db = imp_dtype(b);
    if (da == db) return imp_set_out(imp, 0, bin(imp, "power", a, b));
    bool ints = !sup_dtype_is_float(da) && !sup_dtype_is_float(db);
    if (da == RLY_DTYPE_BOOL || db == RLY_DTYPE_BOOL)
        return imp_error(imp, "Pow takes numbers, got %s and %s", sup_dtype_name(da),
                         sup_dtype_name(db));
    rly_dtype wide = ints ? RLY_DTYPE_I64 : RLY_DTYPE_F64;
    Expr *y = bin(imp, "power", imp_cast(imp, a, wide), imp_cast(imp, b, wide));
    return imp_set_out(imp, 0, imp_cast(imp, y, da));
}

/* Mod: fmod=0 is Python's %, the sign of the divisor (floor_mod); fmod=1 is C fmod, the sign of
 * the dividend (Relay mod, which truncates on integers). The reference takes np.mod for fmod=0
 * on floats too, so floor_mod serves every dtype. */
static bool conv_mod(Imp *imp) {
    int64_t fmod = imp_attr_int(imp, "fmod", 0);
    if (fmod != 0 && fmod != 1)
        return imp_error(imp, "attribute fmod must be 0 or 1, got %lld", (long long)fmod);
    Expr *a = imp_tin(imp, 0, "A"), *b = imp_tin(imp, 1, "B");
    return imp_set_out(imp, 0, bin(imp, fmod ? "mod" : "floor_mod", a, b));
}

static bool conv_bitshift(Imp *imp) {
    const char *dir = imp_attr_str(imp, "direction", NULL);
    if (dir == NULL) return imp_error(imp, "attribute direction is required (LEFT or RIGHT)");
    const char *op = strcmp(dir, "LEFT") == 0    ? "left_shift"
                     : strcmp(dir, "RIGHT") == 0 ? "right_shift"
                                                 : NULL;
    if (op == NULL)
        return imp_error(imp, "attribute direction must be LEFT or RIGHT, got '%s'", dir);
    return imp_set_out(imp, 0, bin(imp, op, imp_tin(imp, 0, "X"), imp_tin(imp, 1, "Y")));
}

/* Sum, Mean, Max, Min: a left fold over 1 or more inputs with broadcasting. */
static bool conv_variadic(Imp *imp) {
    const char *op_type = imp_node(imp)->op_type;
    bool mean = strcmp(op_type, "Mean") == 0;
    const char *op = strcmp(op_type, "Max") == 0   ? "maximum"
                     : strcmp(op_type, "Min") == 0 ? "minimum"
                                                   : "add";
    uint32_t n = imp_n_inputs(imp);
    if (n == 0) return imp_error(imp, "needs at least one input");
    Expr *acc = imp_tin(imp, 0, "data_0");
    for (uint32_t i = 1; i < n && acc; i++)
        acc = bin(imp, op, acc, imp_tin(imp, i, "data_i"));
    if (mean && n > 1) acc = bin(imp, "divide", acc, lit(imp, acc, (double)n));
    return imp_set_out(imp, 0, acc);
}

static bool conv_where(Imp *imp) {
    Expr *c = imp_tin(imp, 0, "condition"), *x = imp_tin(imp, 1, "X"), *y = imp_tin(imp, 2, "Y");
    if (c && imp_dtype(c) != RLY_DTYPE_BOOL)
        return imp_error(imp, "condition must be a bool tensor, got %s",
                         sup_dtype_name(imp_dtype(c)));
    return imp_set_out(imp, 0,
                       c && x && y ? imp_call(imp, "where", 3, (Expr *[]){c, x, y}, NULL) : NULL);
}

/* ---- casts ----------------------------------------------------------------------------------- */

/* The `to` attribute: an ONNX data type number (Cast-6 on) or its name (Cast-1: "FLOAT"). */
static bool cast_target(Imp *imp, int32_t *out) {
    const OxAttr *to = imp_attr(imp, "to");
    if (to == NULL) return imp_error(imp, "attribute 'to' is required");
    if (to->type != OXA_STRING) {
        *out = (int32_t)to->i;
        return true;
    }
    for (int32_t t = OX_FLOAT; t <= OX_BFLOAT16; t++)
        if (to->s.s && strcasecmp(ox_type_name(t), to->s.s) == 0) {
            *out = t;
            return true;
        }
    return imp_error(imp, "attribute 'to' names no data type: '%s'", to->s.s ? to->s.s : "");
}

/* ---- float8 and int4 emulation ------------------------------------------------------------------
 * A float8 value is carried as the float32 of the same value; rounding a float32 to a float8
 * format is composed of existing operators on its bits (no Relay dtype, no new operator):
 *   a = |x|, E = its float32 exponent (the bits >> 23, unbiased), clamped below at the format's
 *   least normal exponent emin (below it the format is subnormal: one fixed step);
 *   q = 2^(max(E, emin) - m), the format's step at a (m mantissa bits), built from its bits;
 *   r = round(a / q) * q: a / q is exact (a power of two), round ties to even, the product exact
 *   (it may reach 2^(E + 1), the next binade, which the format also holds unless it overflows);
 *   r > the largest finite value: that value when saturating, else inf (e5m2) or NaN (the others,
 *   which have no inf); NaN stays NaN; the sign is x's sign bit put back (fnuz formats: zero
 *   is +0, they have no -0). */

typedef struct F8Format {
    int32_t type; /* OX_FLOAT8* */
    int m, emin;  /* mantissa bits; least normal exponent */
    double max;   /* largest finite value */
    bool inf, uz; /* has infinities; "fnuz" (no -0, one NaN) */
} F8Format;

static const F8Format f8_formats[] = {
    {OX_FLOAT8E4M3FN, 3, -6, 448.0, false, false},
    {OX_FLOAT8E4M3FNUZ, 3, -7, 240.0, false, true},
    {OX_FLOAT8E5M2, 2, -14, 57344.0, true, false},
    {OX_FLOAT8E5M2FNUZ, 2, -15, 57344.0, false, true},
};

static Expr *reinterp(Imp *imp, Expr *x, rly_dtype dt) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    ia_str(imp, &a, "dtype", sup_dtype_name(dt));
    return imp_call1(imp, "reinterpret", x, &a);
}

static Expr *cast_float8(Imp *imp, Expr *x, const F8Format *f, bool saturate) {
    x = imp_cast(imp, x, RLY_DTYPE_F32);
    Expr *a = un(imp, "abs", x);
    Expr *bits = reinterp(imp, a, RLY_DTYPE_I32);
    Expr *e = bin(imp, "right_shift", bits, imp_scalar_i(imp, RLY_DTYPE_I32, 23));
    e = bin(imp, "maximum", e, imp_scalar_i(imp, RLY_DTYPE_I32, f->emin + 127));
    Expr *qbits =
        bin(imp, "left_shift", bin(imp, "subtract", e, imp_scalar_i(imp, RLY_DTYPE_I32, f->m)),
            imp_scalar_i(imp, RLY_DTYPE_I32, 23));
    Expr *q = reinterp(imp, qbits, RLY_DTYPE_F32);
    Expr *r = bin(imp, "multiply", un(imp, "round", bin(imp, "divide", a, q)), q);
    Expr *big = imp_scalar(imp, RLY_DTYPE_F32, f->max);
    if (saturate)
        r = bin(imp, "minimum", r, big);
    else
        r = where3(imp, bin(imp, "greater", r, big),
                   imp_scalar(imp, RLY_DTYPE_F32, f->inf ? INFINITY : NAN), r);
    /* x's sign bit onto r (|r| has none); fnuz: zero stays +0 */
    Expr *sign = bin(imp, "bitwise_and", reinterp(imp, x, RLY_DTYPE_I32),
                     imp_scalar_i(imp, RLY_DTYPE_I32, INT32_MIN));
    Expr *sr =
        reinterp(imp, bin(imp, "bitwise_or", reinterp(imp, r, RLY_DTYPE_I32), sign), RLY_DTYPE_F32);
    if (f->uz) sr = where3(imp, bin(imp, "equal", r, imp_scalar(imp, RLY_DTYPE_F32, 0)), r, sr);
    return where3(imp, un(imp, "isnan", x), x, sr);
}

Expr *imp_cast_onnx(Imp *imp, Expr *x, int32_t to, bool saturate) {
    if (x == NULL) return NULL;
    Expr *r = NULL;
    if (OX_IS_FLOAT8(to)) {
        r = cast_float8(imp, x, &f8_formats[to - OX_FLOAT8E4M3FN], saturate);
    } else if (OX_IS_INT4(to)) {
        rly_dtype dt = imp_dtype(x);
        if (sup_dtype_is_float(dt))
            x = un(imp, "round", x);
        else if (dt == RLY_DTYPE_BOOL)
            x = imp_cast(imp, x, RLY_DTYPE_I8);
        ImpAttrs a = {0};
        ia_float(imp, &a, "a_min", to == OX_INT4 ? -8 : 0);
        ia_float(imp, &a, "a_max", to == OX_INT4 ? 7 : 15);
        r = imp_cast(imp, x ? imp_call1(imp, "clip", x, &a) : NULL,
                     to == OX_INT4 ? RLY_DTYPE_I8 : RLY_DTYPE_U8);
    } else {
        int dt = imp_onnx_dtype(imp, to);
        return dt < 0 ? NULL : imp_cast(imp, x, (rly_dtype)dt);
    }
    imp_emul_mark(imp, r, to);
    return r;
}

static bool conv_cast(Imp *imp) {
    int32_t to = 0;
    if (!cast_target(imp, &to)) return false;
    Expr *x = imp_tin(imp, 0, "input");
    if (x == NULL) return false;
    bool saturate = imp_opset(imp) < 19 || imp_attr_int(imp, "saturate", 1) != 0;
    return imp_set_out(imp, 0, imp_cast_onnx(imp, x, to, saturate));
}

static bool conv_castlike(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "input"), *like = imp_tin(imp, 1, "target_type");
    if (x == NULL || like == NULL) return false;
    int32_t to = imp_emul_type(imp, like);
    bool saturate = imp_opset(imp) < 19 || imp_attr_int(imp, "saturate", 1) != 0;
    if (to != 0) return imp_set_out(imp, 0, imp_cast_onnx(imp, x, to, saturate));
    return imp_set_out(imp, 0, imp_cast(imp, x, imp_dtype(like)));
}

/* ---- clip ------------------------------------------------------------------------------------ */

/* min(max(x, lo), hi) for the bounds given (NULL: none). Relay clip takes constant bounds as
 * doubles; it is used when both are constants that a double holds exactly for x's dtype, and
 * maximum/minimum otherwise (these also give hi wherever lo > hi, as numpy's clip does). */
static Expr *clip_to(Imp *imp, Expr *x, Expr *lo, Expr *hi) {
    if (x == NULL) return NULL;
    rly_dtype dt = imp_dtype(x);
    double vlo = -INFINITY, vhi = INFINITY;
    bool clo = lo == NULL || imp_const_f64(lo, &vlo), chi = hi == NULL || imp_const_f64(hi, &vhi);
    bool exact = sup_dtype_is_float(dt) || (sup_dtype_bits(dt) <= 32 && dt != RLY_DTYPE_BOOL);
    if (clo && chi && exact && vlo == vlo && vhi == vhi) {
        if (!sup_dtype_is_float(dt) && (isinf(vlo) || isinf(vhi))) {
            /* an integer dtype's own range stands for a missing bound */
            double lim = sup_dtype_is_uint(dt) ? ldexp(1, sup_dtype_bits(dt)) - 1
                                               : ldexp(1, sup_dtype_bits(dt) - 1) - 1;
            double low = sup_dtype_is_uint(dt) ? 0 : -lim - 1;
            if (isinf(vlo)) vlo = low;
            if (isinf(vhi)) vhi = lim;
        }
        ImpAttrs a = {0};
        ia_float(imp, &a, "a_min", vlo);
        ia_float(imp, &a, "a_max", vhi);
        return imp_call1(imp, "clip", x, &a);
    }
    Expr *y = x;
    if (lo) y = bin(imp, "maximum", y, imp_cast(imp, lo, dt));
    if (hi) y = bin(imp, "minimum", y, imp_cast(imp, hi, dt));
    return y;
}

/* Clip-1 and Clip-6: the bounds are float attributes (defaults: the float range). */
static bool conv_clip_attr(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "input");
    if (x == NULL) return false;
    const OxAttr *amin = imp_attr(imp, "min"), *amax = imp_attr(imp, "max");
    Expr *lo = amin ? lit(imp, x, amin->f) : NULL, *hi = amax ? lit(imp, x, amax->f) : NULL;
    return imp_set_out(imp, 0, clip_to(imp, x, lo, hi));
}

/* Clip-11 on: the bounds are optional scalar inputs. */
static bool conv_clip(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "input");
    if (x == NULL) return false;
    Expr *lo = imp_in(imp, 1), *hi = imp_in(imp, 2);
    for (uint32_t i = 0; i < 2; i++) {
        Expr *b = i ? hi : lo;
        if (b && (imp_tt(b) == NULL || imp_tt(b)->ndim > 1 ||
                  (imp_tt(b)->ndim == 1 && imp_tt(b)->shape[0] != 1)))
            return imp_error(imp, "input %u (%s) must be a scalar", i + 1, i ? "max" : "min");
    }
    return imp_set_out(imp, 0, clip_to(imp, x, lo, hi));
}

/* ---- activations ----------------------------------------------------------------------------- */

static bool conv_leaky_relu(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    double alpha = imp_attr_float(imp, "alpha", 0.01);
    if (alpha >= 0) {
        ImpAttrs a = {0};
        ia_float(imp, &a, "alpha", alpha);
        return imp_set_out(imp, 0, x ? imp_call1(imp, "nn.leaky_relu", x, &a) : NULL);
    }
    /* nn.leaky_relu wants alpha >= 0; ONNX allows any slope */
    Expr *neg = bin(imp, "less", x, lit(imp, x, 0));
    Expr *y = x ? imp_call(imp, "where", 3,
                           (Expr *[]){neg, bin(imp, "multiply", x, lit(imp, x, alpha)), x}, NULL)
                : NULL;
    return imp_set_out(imp, 0, neg ? y : NULL);
}

/* Elu: x < 0 ? alpha * (exp(x) - 1) : x. */
static bool conv_elu(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    double alpha = imp_attr_float(imp, "alpha", 1.0);
    Expr *e = bin(imp, "multiply", bin(imp, "subtract", un(imp, "exp", x), lit(imp, x, 1)),
                  lit(imp, x, alpha));
    return imp_set_out(imp, 0, where3(imp, bin(imp, "less", x, lit(imp, x, 0)), e, x));
}

/* Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)). */
static bool conv_celu(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    double alpha = imp_attr_float(imp, "alpha", 1.0);
    if (alpha == 0) return imp_error(imp, "attribute alpha must not be 0");
    Expr *e = un(imp, "exp", bin(imp, "divide", x, lit(imp, x, alpha)));
    e = bin(imp, "multiply", lit(imp, x, alpha), bin(imp, "subtract", e, lit(imp, x, 1)));
    Expr *y = bin(imp, "add", bin(imp, "maximum", lit(imp, x, 0), x),
                  bin(imp, "minimum", lit(imp, x, 0), e));
    return imp_set_out(imp, 0, y);
}

/* Selu: (x > 0 ? x : exp(x) * alpha - alpha) * gamma. */
static bool conv_selu(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    double alpha = imp_attr_float(imp, "alpha", 1.67326319217681884765625);
    double gamma = imp_attr_float(imp, "gamma", 1.05070102214813232421875);
    Expr *e = bin(imp, "subtract", bin(imp, "multiply", un(imp, "exp", x), lit(imp, x, alpha)),
                  lit(imp, x, alpha));
    Expr *y = where3(imp, bin(imp, "greater", x, lit(imp, x, 0)), x, e);
    return imp_set_out(imp, 0, bin(imp, "multiply", y, lit(imp, x, gamma)));
}

static Expr *clip01(Imp *imp, Expr *x) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    ia_float(imp, &a, "a_min", 0);
    ia_float(imp, &a, "a_max", 1);
    return imp_call1(imp, "clip", x, &a);
}

/* HardSigmoid: clip(alpha * x + beta, 0, 1). */
static bool conv_hard_sigmoid(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    double alpha = imp_attr_float(imp, "alpha", 0.2), beta = imp_attr_float(imp, "beta", 0.5);
    Expr *y = bin(imp, "add", bin(imp, "multiply", x, lit(imp, x, alpha)), lit(imp, x, beta));
    return imp_set_out(imp, 0, clip01(imp, y));
}

/* HardSwish: x * clip(x / 6 + 0.5, 0, 1). */
static bool conv_hard_swish(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    Expr *y = bin(imp, "add", bin(imp, "multiply", x, lit(imp, x, 1.0 / 6)), lit(imp, x, 0.5));
    return imp_set_out(imp, 0, bin(imp, "multiply", x, clip01(imp, y)));
}

/* Shrink: x < -lambd ? x + bias : x > lambd ? x - bias : 0. */
static bool conv_shrink(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "input");
    double lambd = imp_attr_float(imp, "lambd", 0.5), bias = imp_attr_float(imp, "bias", 0);
    Expr *hi = where3(imp, bin(imp, "greater", x, lit(imp, x, lambd)),
                      bin(imp, "subtract", x, lit(imp, x, bias)), lit(imp, x, 0));
    Expr *y = where3(imp, bin(imp, "less", x, lit(imp, x, -lambd)),
                     bin(imp, "add", x, lit(imp, x, bias)), hi);
    return imp_set_out(imp, 0, y);
}

/* Softplus: log(exp(x) + 1), written max(x, 0) + log(1 + exp(-|x|)) so that large x does not
 * overflow to inf (the two agree wherever exp(x) is finite). */
static Expr *softplus(Imp *imp, Expr *x) {
    Expr *t = un(imp, "exp", un(imp, "negative", un(imp, "abs", x)));
    t = un(imp, "log", bin(imp, "add", lit(imp, x, 1), t));
    return bin(imp, "add", bin(imp, "maximum", x, lit(imp, x, 0)), t);
}

static bool conv_softplus(Imp *imp) {
    return imp_set_out(imp, 0, softplus(imp, imp_tin(imp, 0, "X")));
}

/* Mish (opset 18): x * tanh(softplus(x)). */
static bool conv_mish(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    return imp_set_out(imp, 0, bin(imp, "multiply", x, un(imp, "tanh", softplus(imp, x))));
}

/* Gelu (opset 20): approximate "none" is x/2 (1 + erf(x / sqrt 2)); "tanh" is
 * x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static bool conv_gelu(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    if (x == NULL) return false;
    if (!sup_dtype_is_float(imp_dtype(x)))
        return imp_error(imp, "X must be a float tensor, got %s", sup_dtype_name(imp_dtype(x)));
    const char *approx = imp_attr_str(imp, "approximate", "none");
    Expr *inner;
    if (strcmp(approx, "none") == 0) {
        inner = un(imp, "erf", bin(imp, "multiply", x, lit(imp, x, 1.0 / sqrt(2.0))));
    } else if (strcmp(approx, "tanh") == 0) {
        Expr *x3 = bin(imp, "multiply", bin(imp, "multiply", x, x), x);
        Expr *t = bin(imp, "add", x, bin(imp, "multiply", lit(imp, x, 0.044715), x3));
        inner = un(imp, "tanh", bin(imp, "multiply", lit(imp, x, sqrt(2.0 / PI)), t));
    } else {
        return imp_error(imp, "approximate \"%s\" is not supported (none, tanh)", approx);
    }
    Expr *half = bin(imp, "multiply", lit(imp, x, 0.5), x);
    return imp_set_out(imp, 0, bin(imp, "multiply", half, bin(imp, "add", lit(imp, x, 1), inner)));
}

/* Softsign: x / (1 + |x|). */
static bool conv_softsign(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "input");
    Expr *d = bin(imp, "add", lit(imp, x, 1), un(imp, "abs", x));
    return imp_set_out(imp, 0, bin(imp, "divide", x, d));
}

/* ThresholdedRelu: x > alpha ? x : 0. */
static bool conv_thresholded_relu(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    double alpha = imp_attr_float(imp, "alpha", 1.0);
    Expr *y = where3(imp, bin(imp, "greater", x, lit(imp, x, alpha)), x, lit(imp, x, 0));
    return imp_set_out(imp, 0, y);
}

/* PRelu: x < 0 ? slope * x : x, slope broadcast to x (unidirectionally). A slope that varies
 * along one axis only and matches x there is the per-channel nn.prelu; any other slope takes
 * the composite. */
static bool conv_prelu(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X"), *slope = imp_tin(imp, 1, "slope");
    if (x == NULL || slope == NULL) return false;
    TensorType *tx = imp_tt(x), *ts = imp_tt(slope);
    if (ts->ndim > tx->ndim)
        return imp_error(imp, "slope has rank %u, more than X's %u", ts->ndim, tx->ndim);
    if (imp_dtype(slope) != imp_dtype(x))
        return imp_error(imp, "slope has dtype %s but X has %s", sup_dtype_name(imp_dtype(slope)),
                         sup_dtype_name(imp_dtype(x)));
    uint32_t off = tx->ndim - ts->ndim, n_var = 0, axis = 0;
    bool known = true;
    for (uint32_t j = 0; j < ts->ndim; j++) {
        if (ts->shape[j] == 1) continue;
        n_var++;
        axis = off + j;
        known = known && ts->shape[j] >= 0 && ts->shape[j] == tx->shape[axis];
    }
    if (n_var == 1 && known) {
        ImpAttrs r = {0}, p = {0};
        int64_t flat = -1;
        ia_ints(imp, &r, "newshape", 1, &flat);
        ia_int(imp, &p, "axis", axis);
        Expr *s1 = ts->ndim == 1 ? slope : imp_call1(imp, "reshape", slope, &r);
        return imp_set_out(imp, 0, s1 ? imp_call2(imp, "nn.prelu", x, s1, &p) : NULL);
    }
    Expr *y = where3(imp, bin(imp, "less", x, lit(imp, x, 0)), bin(imp, "multiply", x, slope), x);
    if (y && imp_rank(y) != tx->ndim) return imp_error(imp, "slope does not broadcast to X");
    return imp_set_out(imp, 0, y);
}

/* PRelu before opset 7: a 1-D slope of X's channel count is per channel (axis 1), as PyTorch
 * exported it; numpy broadcasting (opset 7 on) would align it with the last axis instead. */
static bool conv_prelu_1(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X"), *slope = imp_tin(imp, 1, "slope");
    if (x == NULL || slope == NULL) return false;
    TensorType *tx = imp_tt(x), *ts = imp_tt(slope);
    if (ts->ndim == 1 && tx->ndim >= 2 && ts->shape[0] > 1 && ts->shape[0] == tx->shape[1] &&
        imp_dtype(slope) == imp_dtype(x)) {
        ImpAttrs p = {0};
        ia_int(imp, &p, "axis", 1);
        return imp_set_out(imp, 0, imp_call2(imp, "nn.prelu", x, slope, &p));
    }
    return conv_prelu(imp);
}

/* ---- Dropout (inference) --------------------------------------------------------------------- */

/* The output is the input; the mask, when asked for, is all ones (bool from Dropout-10 on, of
 * the input's dtype before). Dropout-12 takes ratio and training_mode as inputs; a training-mode
 * Dropout with a nonzero ratio is random, which an importer cannot reproduce. */
static bool dropout_common(Imp *imp, bool bool_mask) {
    Expr *x = imp_tin(imp, 0, "data");
    if (x == NULL) return false;
    Expr *train = imp_in(imp, 2), *r = imp_in(imp, 1);
    double on = 0, ratio = 0.5;
    bool ratio_known = r == NULL || imp_const_f64(r, &ratio);
    if (train && !(ratio_known && ratio == 0)) {
        if (!imp_const_f64(train, &on))
            return imp_error(imp, "the 'training_mode' input must be a constant (training-mode "
                                  "Dropout drops elements at random, which is not supported)");
        if (on != 0)
            return imp_error(imp, "training-mode Dropout drops elements at random; only inference "
                                  "(training_mode false or a constant ratio 0) is supported");
    }
    imp_out(imp, 0, x);
    if (imp_wants_out(imp, 1)) {
        Expr *ones = bool_mask ? un(imp, "ones_like", imp_cast(imp, x, RLY_DTYPE_BOOL))
                               : un(imp, "ones_like", x);
        return imp_set_out(imp, 1, ones);
    }
    return true;
}

static bool conv_dropout_1(Imp *imp) { return dropout_common(imp, false); }
static bool conv_dropout_10(Imp *imp) { return dropout_common(imp, true); }

/* ---- creators: EyeLike, Range, windows ------------------------------------------------------- */

/* EyeLike: ones on diagonal k of a 2-D tensor shaped like the input. A static shape gives a
 * constant; otherwise upper-triangle(k) xor upper-triangle(k + 1) of an all-true tensor. */
static bool conv_eyelike(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "input");
    if (x == NULL) return false;
    TensorType *t = imp_tt(x);
    if (t->ndim != 2) return imp_error(imp, "input must be 2-D, got rank %u", t->ndim);
    rly_dtype dt = t->dtype;
    const OxAttr *ad = imp_attr(imp, "dtype");
    if (ad) {
        int d = imp_onnx_dtype(imp, (int32_t)ad->i);
        if (d < 0) return false;
        dt = (rly_dtype)d;
    }
    int64_t k = imp_attr_int(imp, "k", 0), rows = t->shape[0], cols = t->shape[1];
    if (rows >= 0 && cols >= 0) {
        uint8_t *bits = imp_alloc(imp, (size_t)(rows * cols) + 1);
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                bits[i * cols + j] = j - i == k;
        Expr *eye = imp_const_tensor(imp, RLY_DTYPE_BOOL, 2, t->shape, bits);
        return imp_set_out(imp, 0, imp_cast(imp, eye, dt));
    }
    ImpAttrs up = {0};
    ia_bool(imp, &up, "upper", true);
    Expr *ones = un(imp, "ones_like", imp_cast(imp, x, RLY_DTYPE_BOOL));
    Expr *t0 =
        ones ? imp_call2(imp, "trilu", ones, imp_scalar_i(imp, RLY_DTYPE_I64, k), &up) : NULL;
    Expr *t1 =
        ones ? imp_call2(imp, "trilu", ones, imp_scalar_i(imp, RLY_DTYPE_I64, k + 1), &up) : NULL;
    return imp_set_out(imp, 0, imp_cast(imp, bin(imp, "logical_xor", t0, t1), dt));
}

/* Range: Relay arange takes the three scalars as tensors. */
static bool conv_range(Imp *imp) {
    Expr *start = scalar_in(imp, 0, "start"), *limit = scalar_in(imp, 1, "limit"),
         *delta = scalar_in(imp, 2, "delta");
    if (start == NULL || limit == NULL || delta == NULL) return false;
    double d;
    if (imp_const_f64(delta, &d) && d == 0) return imp_error(imp, "delta must not be 0");
    ImpAttrs a = {0};
    ia_str(imp, &a, "dtype", sup_dtype_name(imp_dtype(start)));
    return imp_set_out(imp, 0, imp_call(imp, "arange", 3, (Expr *[]){start, limit, delta}, &a));
}

typedef enum Window { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN } Window;

/* cos(f * pi * n / N) in float64, n and N float64 tensors. */
static Expr *cos_term(Imp *imp, Expr *n, Expr *den, double f) {
    Expr *arg = bin(imp, "divide", bin(imp, "multiply", n, lit(imp, n, f * PI)), den);
    return un(imp, "cos", arg);
}

/* The windows, computed in float64 from n = 0 .. size-1 and N = size (periodic) or size - 1
 * (symmetric), then cast to output_datatype:
 *   Hann      sin^2(pi n / N)
 *   Hamming   25/46 - 21/46 cos(2 pi n / N)
 *   Blackman  0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N) */
static bool window_common(Imp *imp, Window w) {
    Expr *size = scalar_in(imp, 0, "size");
    if (size == NULL) return false;
    if (!sup_dtype_is_int(imp_dtype(size)) && !sup_dtype_is_uint(imp_dtype(size)))
        return imp_error(imp, "size must be an integer scalar, got %s",
                         sup_dtype_name(imp_dtype(size)));
    int d = imp_onnx_dtype(imp, (int32_t)imp_attr_int(imp, "output_datatype", OX_FLOAT));
    if (d < 0) return false;
    bool periodic = imp_attr_int(imp, "periodic", 1) != 0;
    Expr *nf = imp_cast(imp, size, RLY_DTYPE_F64);
    Expr *zero = imp_scalar(imp, RLY_DTYPE_F64, 0), *one = imp_scalar(imp, RLY_DTYPE_F64, 1);
    ImpAttrs a = {0};
    ia_str(imp, &a, "dtype", "float64");
    Expr *n = nf ? imp_call(imp, "arange", 3, (Expr *[]){zero, nf, one}, &a) : NULL;
    Expr *den = periodic ? nf : bin(imp, "subtract", nf, one);
    Expr *y = NULL;
    switch (w) {
    case WIN_HANN: {
        Expr *s = un(imp, "sin", bin(imp, "divide", bin(imp, "multiply", n, lit(imp, n, PI)), den));
        y = bin(imp, "multiply", s, s);
        break;
    }
    case WIN_HAMMING:
        y = bin(imp, "subtract", lit(imp, n, 25.0 / 46.0),
                bin(imp, "multiply", cos_term(imp, n, den, 2), lit(imp, n, 21.0 / 46.0)));
        break;
    case WIN_BLACKMAN:
        y = bin(imp, "multiply", cos_term(imp, n, den, 2), lit(imp, n, -0.5));
        y = bin(imp, "add", y, bin(imp, "multiply", cos_term(imp, n, den, 4), lit(imp, n, 0.08)));
        y = bin(imp, "add", y, lit(imp, n, 0.42));
        break;
    }
    return imp_set_out(imp, 0, imp_cast(imp, y, (rly_dtype)d));
}

static bool conv_hann(Imp *imp) { return window_common(imp, WIN_HANN); }
static bool conv_hamming(Imp *imp) { return window_common(imp, WIN_HAMMING); }
static bool conv_blackman(Imp *imp) { return window_common(imp, WIN_BLACKMAN); }

/* ---- Einsum ---------------------------------------------------------------------------------- */

static bool conv_einsum(Imp *imp) {
    const char *eq = imp_attr_str(imp, "equation", NULL);
    if (eq == NULL) return imp_error(imp, "attribute equation is required");
    uint32_t n = imp_n_inputs(imp);
    if (n == 0) return imp_error(imp, "needs at least one input");
    Expr **xs = imp_alloc(imp, n * sizeof(Expr *));
    for (uint32_t i = 0; i < n; i++)
        if ((xs[i] = imp_tin(imp, i, "Inputs")) == NULL) return false;
    ImpAttrs a = {0};
    ia_str(imp, &a, "equation", eq);
    return imp_set_out(imp, 0, imp_call1(imp, "einsum", imp_tuple(imp, n, xs), &a));
}

/* ---- the table ------------------------------------------------------------------------------- */

const ImpConv imp_conv_elem[] = {
    {"Abs", "", 1, conv_unary},
    {"Acos", "", 7, conv_unary},
    {"Acosh", "", 9, conv_unary},
    {"Asin", "", 7, conv_unary},
    {"Asinh", "", 9, conv_unary},
    {"Atan", "", 7, conv_unary},
    {"Atanh", "", 9, conv_unary},
    {"Ceil", "", 1, conv_unary},
    {"Cos", "", 7, conv_unary},
    {"Cosh", "", 9, conv_unary},
    {"Erf", "", 9, conv_unary},
    {"Exp", "", 1, conv_unary},
    {"Floor", "", 1, conv_unary},
    {"IsNaN", "", 9, conv_unary},
    {"Log", "", 1, conv_unary},
    {"Neg", "", 1, conv_unary},
    {"Not", "", 1, conv_unary},
    {"Relu", "", 1, conv_unary},
    {"Round", "", 11, conv_unary},
    {"Sigmoid", "", 1, conv_unary},
    {"Sign", "", 9, conv_unary},
    {"Sin", "", 7, conv_unary},
    {"Sinh", "", 9, conv_unary},
    {"Sqrt", "", 1, conv_unary},
    {"Tan", "", 7, conv_unary},
    {"Tanh", "", 1, conv_unary},
    {"Reciprocal", "", 1, conv_reciprocal},
    {"IsInf", "", 10, conv_isinf},
    {"Add", "", 1, conv_binary},
    {"Sub", "", 1, conv_binary},
    {"Mul", "", 1, conv_binary},
    {"Div", "", 1, conv_binary},
    {"And", "", 1, conv_binary},
    {"Or", "", 1, conv_binary},
    {"Xor", "", 1, conv_binary},
    {"Equal", "", 1, conv_binary},
    {"Greater", "", 1, conv_binary},
    {"Less", "", 1, conv_binary},
    {"GreaterOrEqual", "", 12, conv_binary},
    {"LessOrEqual", "", 12, conv_binary},
    {"Pow", "", 1, conv_pow},
    {"Mod", "", 10, conv_mod},
    {"BitShift", "", 11, conv_bitshift},
    {"Sum", "", 1, conv_variadic},
    {"Mean", "", 1, conv_variadic},
    {"Max", "", 1, conv_variadic},
    {"Min", "", 1, conv_variadic},
    {"Where", "", 9, conv_where},
    {"Cast", "", 1, conv_cast},
    {"CastLike", "", 15, conv_castlike},
    {"Clip", "", 1, conv_clip_attr},
    {"Clip", "", 11, conv_clip},
    {"LeakyRelu", "", 1, conv_leaky_relu},
    {"Elu", "", 1, conv_elu},
    {"Celu", "", 12, conv_celu},
    {"Selu", "", 1, conv_selu},
    {"HardSigmoid", "", 1, conv_hard_sigmoid},
    {"HardSwish", "", 14, conv_hard_swish},
    {"Shrink", "", 9, conv_shrink},
    {"Softplus", "", 1, conv_softplus},
    {"Softsign", "", 1, conv_softsign},
    {"ThresholdedRelu", "", 10, conv_thresholded_relu},
    {"PRelu", "", 1, conv_prelu_1},
    {"PRelu", "", 7, conv_prelu},
    {"Dropout", "", 1, conv_dropout_1},
    {"Dropout", "", 10, conv_dropout_10},
    {"EyeLike", "", 9, conv_eyelike},
    {"Range", "", 11, conv_range},
    {"HannWindow", "", 17, conv_hann},
    {"HammingWindow", "", 17, conv_hamming},
    {"BlackmanWindow", "", 17, conv_blackman},
    {"Einsum", "", 12, conv_einsum},
    {"BitwiseAnd", "", 18, conv_binary},
    {"BitwiseOr", "", 18, conv_binary},
    {"BitwiseXor", "", 18, conv_binary},
    {"BitwiseNot", "", 18, conv_unary},
    {"Mish", "", 18, conv_mish},
    {"Gelu", "", 20, conv_gelu},
    {NULL, NULL, 0, NULL},
};
