/* import_reduce.c - ONNX converters: reductions (Reduce*), arg-reductions, TopK, CumSum, the
 * softmax family (Softmax, LogSoftmax, Hardmax) and the two losses built on nn.nll_loss.
 *
 * Relay's reductions take the axes as an attribute, so an `axes` input (ReduceSum-13,
 * every Reduce*-18) must be a constant. ONNX reduces every axis when axes is empty; with
 * noop_with_empty_axes it reduces none, which still applies the op's elementwise part
 * (ReduceL1 over no axes is abs, as the reference computes it). */
#include <string.h>

#include "frontend/onnx/import.h"

/* ---- helpers -------------------------------------------------------------------------------- */

/* The helpers pass NULL through: a NULL argument (an error already reported) gives NULL. */

static Expr *un(Imp *imp, const char *op, Expr *x) {
    return x ? imp_call1(imp, op, x, NULL) : NULL;
}

static Expr *bin(Imp *imp, const char *op, Expr *a, Expr *b) {
    return a && b ? imp_call2(imp, op, a, b, NULL) : NULL;
}

static Expr *cast(Imp *imp, Expr *x, rly_dtype dt) { return x ? imp_cast(imp, x, dt) : NULL; }

static bool set_out(Imp *imp, uint32_t i, Expr *e) {
    if (e == NULL) return false;
    imp_out(imp, i, e);
    return true;
}

static bool wants_out(Imp *imp, uint32_t i) {
    return i < imp_n_outputs(imp) && imp_node(imp)->outputs[i][0] != '\0';
}

/* Required input i, which must be a tensor. */
static Expr *tin(Imp *imp, uint32_t i, const char *what) {
    Expr *e = imp_in_req(imp, i, what);
    if (e == NULL) return NULL;
    if (imp_tt(e) == NULL) {
        imp_error(imp, "input %u (%s) must be a tensor", i, what);
        return NULL;
    }
    return e;
}

/* axis normalized against rank r (ONNX allows [-r, r - 1]); false after reporting. */
static bool norm_axis(Imp *imp, int64_t axis, uint32_t r, const char *what, int64_t *out) {
    int64_t a = axis < 0 ? axis + (int64_t)r : axis;
    if (a < 0 || a >= (int64_t)r)
        return imp_error(imp, "%s %lld is out of range for rank %u", what, (long long)axis, r);
    *out = a;
    return true;
}

/* The dims of x from `from` (inclusive) to `to` (exclusive) multiplied; -1 when one is unknown. */
static int64_t dims_product(Expr *x, uint32_t from, uint32_t to) {
    TensorType *t = imp_tt(x);
    int64_t p = 1;
    for (uint32_t i = from; i < to; i++) {
        if (t->shape[i] < 0) return -1;
        p *= t->shape[i];
    }
    return p;
}

static Expr *reshape(Imp *imp, Expr *x, uint32_t n, const int64_t *shape) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "newshape", n, shape);
    return imp_call1(imp, "reshape", x, &a);
}

/* ---- Reduce*
 * ------------------------------------------------------------------------------------- */

typedef enum RedKind {
    RED_SUM,
    RED_MEAN,
    RED_MAX,
    RED_MIN,
    RED_PROD,
    RED_L1,
    RED_L2,
    RED_LOG_SUM,
    RED_LOG_SUM_EXP,
    RED_SUM_SQUARE,
} RedKind;

static const struct {
    const char *onnx;
    RedKind kind;
} reduce_kinds[] = {
    {"ReduceSum", RED_SUM},
    {"ReduceMean", RED_MEAN},
    {"ReduceMax", RED_MAX},
    {"ReduceMin", RED_MIN},
    {"ReduceProd", RED_PROD},
    {"ReduceL1", RED_L1},
    {"ReduceL2", RED_L2},
    {"ReduceLogSum", RED_LOG_SUM},
    {"ReduceLogSumExp", RED_LOG_SUM_EXP},
    {"ReduceSumSquare", RED_SUM_SQUARE},
};

/* sqrt or log of an integer tensor: computed in float64 and truncated back, as the reference's
 * astype(data.dtype) does. */
static Expr *float_op(Imp *imp, const char *op, Expr *x) {
    if (x == NULL) return NULL;
    rly_dtype dt = imp_dtype(x);
    if (sup_dtype_is_float(dt)) return un(imp, op, x);
    return cast(imp, un(imp, op, cast(imp, x, RLY_DTYPE_F64)), dt);
}

/* Apply the reduction `kind` over axes (n == 0: every axis; none == true: no axis). */
static Expr *reduce_apply(Imp *imp, RedKind kind, Expr *x, uint32_t n, const int64_t *axes,
                          bool keepdims, bool none) {
    /* the elementwise part before the reduction */
    Expr *pre = x;
    if (kind == RED_L1) pre = un(imp, "abs", x);
    if (kind == RED_L2 || kind == RED_SUM_SQUARE) pre = bin(imp, "multiply", x, x);
    if (pre == NULL) return NULL;
    Expr *r;
    if (none) {
        /* log(sum(exp(x))) over no axes is x itself */
        r = pre;
    } else {
        const char *op = NULL;
        switch (kind) {
        case RED_MEAN: op = "mean"; break;
        case RED_MAX: op = "max"; break;
        case RED_MIN: op = "min"; break;
        case RED_PROD: op = "prod"; break;
        case RED_LOG_SUM_EXP: op = "logsumexp"; break;
        default: op = "sum"; break;
        }
        ImpAttrs a = {0};
        if (n > 0)
            ia_ints(imp, &a, "axis", n, axes);
        else
            ia_none(imp, &a, "axis");
        ia_bool(imp, &a, "keepdims", keepdims);
        r = imp_call1(imp, op, pre, &a);
    }
    if (kind == RED_L2) r = float_op(imp, "sqrt", r);
    if (kind == RED_LOG_SUM) r = float_op(imp, "log", r);
    return r;
}

static bool reduce_common(Imp *imp, bool axes_input) {
    const char *op_type = imp_node(imp)->op_type;
    RedKind kind = RED_SUM;
    bool found = false;
    for (size_t i = 0; i < sizeof reduce_kinds / sizeof reduce_kinds[0]; i++)
        if (strcmp(reduce_kinds[i].onnx, op_type) == 0) {
            kind = reduce_kinds[i].kind;
            found = true;
        }
    RLY_CHECK(found, "no reduction for %s", op_type);
    Expr *x = tin(imp, 0, "data");
    if (x == NULL) return false;
    uint32_t r = imp_rank(x), n = 0;
    const int64_t *given = NULL;
    bool noop = false;
    if (axes_input) {
        noop = imp_attr_int(imp, "noop_with_empty_axes", 0) != 0;
        Expr *ax = imp_in(imp, 1);
        if (ax && !imp_const_ints(imp, ax, &given, &n)) {
            /* on a 1-D tensor every valid axes value ([], [0], [-1]) reduces axis 0 */
            if (r != 1 || noop)
                return imp_error(imp, "the 'axes' input must be a constant integer tensor");
            n = 0;
        }
    } else {
        n = imp_attr_ints(imp, "axes", &given);
    }
    int64_t *axes = imp_alloc(imp, (n + 1) * sizeof(int64_t));
    for (uint32_t i = 0; i < n; i++)
        if (!norm_axis(imp, given[i], r, "axis", &axes[i])) return false;
    bool keepdims = imp_attr_int(imp, "keepdims", 1) != 0;
    return set_out(imp, 0, reduce_apply(imp, kind, x, n, axes, keepdims, n == 0 && noop));
}

static bool conv_reduce_attr(Imp *imp) { return reduce_common(imp, false); }
static bool conv_reduce_input(Imp *imp) { return reduce_common(imp, true); }

/* ---- ArgMax, ArgMin ---------------------------------------------------------------------------
 */

static bool conv_arg(Imp *imp) {
    bool is_max = strcmp(imp_node(imp)->op_type, "ArgMax") == 0;
    Expr *x = tin(imp, 0, "data");
    if (x == NULL) return false;
    int64_t axis;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 0), imp_rank(x), "axis", &axis)) return false;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "axis", 1, &axis);
    ia_bool(imp, &a, "keepdims", imp_attr_int(imp, "keepdims", 1) != 0);
    ia_bool(imp, &a, "select_last_index", imp_attr_int(imp, "select_last_index", 0) != 0);
    Expr *y = imp_call1(imp, is_max ? "argmax" : "argmin", x, &a);
    return set_out(imp, 0, cast(imp, y, RLY_DTYPE_I64));
}

/* ---- CumSum
 * -------------------------------------------------------------------------------------- */

static Expr *reverse_at(Imp *imp, Expr *x, int64_t axis) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    return imp_call1(imp, "reverse", x, &a);
}

/* CumSum: the axis is a scalar input (a constant here); reverse=1 scans from the end, which is
 * the forward scan of the reversed tensor, reversed back. */
static bool conv_cumsum(Imp *imp) {
    Expr *x = tin(imp, 0, "x"), *ax = tin(imp, 1, "axis");
    if (x == NULL || ax == NULL) return false;
    const int64_t *v;
    uint32_t n;
    int64_t axis = 0;
    if (imp_const_ints(imp, ax, &v, &n) && n == 1) {
        if (!norm_axis(imp, v[0], imp_rank(x), "axis", &axis)) return false;
    } else if (imp_rank(x) != 1) { /* a 1-D tensor has only axis 0, whatever the input says */
        return imp_error(imp, "the 'axis' input must be a constant integer scalar");
    }
    bool reverse = imp_attr_int(imp, "reverse", 0) != 0;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    ia_bool(imp, &a, "exclusive", imp_attr_int(imp, "exclusive", 0) != 0);
    Expr *y = reverse ? reverse_at(imp, x, axis) : x;
    y = y ? imp_call1(imp, "cumsum", y, &a) : NULL;
    return set_out(imp, 0, reverse ? reverse_at(imp, y, axis) : y);
}

/* ---- TopK
 * ---------------------------------------------------------------------------------------- */

/* TopK-1 takes k as an attribute, TopK-10 as an input (a constant becomes topk's k; otherwise
 * dyn.topk when the table has it). Values, then int64 indices; `sorted` = 0 allows any order,
 * so the sorted result serves both. */
static bool topk_common(Imp *imp, bool k_input) {
    Expr *x = tin(imp, 0, "X");
    if (x == NULL) return false;
    int64_t axis;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", -1), imp_rank(x), "axis", &axis)) return false;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    ia_str(imp, &a, "ret_type", "both");
    ia_bool(imp, &a, "is_ascend", imp_attr_int(imp, "largest", 1) == 0);
    ia_str(imp, &a, "dtype", "int64");
    Expr *kt = NULL;
    int64_t k;
    if (!k_input) {
        const OxAttr *ka = imp_attr(imp, "k");
        if (ka == NULL) return imp_error(imp, "attribute k is required");
        k = ka->i;
    } else {
        if ((kt = tin(imp, 1, "K")) == NULL) return false;
        const int64_t *v;
        uint32_t n;
        if (imp_const_ints(imp, kt, &v, &n)) {
            if (n != 1) return imp_error(imp, "K must hold one value, got %u", n);
            k = v[0];
            kt = NULL;
        } else if (op_lookup("dyn.topk", 8) == NULL) {
            return imp_error(imp, "the 'K' input must be a constant");
        }
    }
    Expr *y;
    if (kt == NULL) {
        /* Relay reads k < 1 as the whole axis */
        if (k < 1) return imp_error(imp, "k must be at least 1, got %lld", (long long)k);
        ia_int(imp, &a, "k", k);
        y = imp_call1(imp, "topk", x, &a);
    } else {
        Expr *k0 = imp_rank(kt) == 0 ? kt : reshape(imp, kt, 0, NULL);
        y = k0 ? imp_call2(imp, "dyn.topk", x, k0, &a) : NULL;
    }
    if (y == NULL) return false;
    imp_out(imp, 0, imp_get(imp, y, 0));
    imp_out(imp, 1, imp_get(imp, y, 1));
    return true;
}

static bool conv_topk_1(Imp *imp) { return topk_common(imp, false); }
static bool conv_topk_10(Imp *imp) { return topk_common(imp, true); }

/* ---- Softmax, LogSoftmax, Hardmax ----------------------------------------------------------- */

typedef enum SmKind { SM_SOFTMAX, SM_LOG_SOFTMAX, SM_HARDMAX } SmKind;

static SmKind sm_kind(Imp *imp) {
    const char *t = imp_node(imp)->op_type;
    return strcmp(t, "Softmax") == 0      ? SM_SOFTMAX
           : strcmp(t, "LogSoftmax") == 0 ? SM_LOG_SOFTMAX
                                          : SM_HARDMAX;
}

/* The op along one axis of x. Hardmax is one_hot(argmax) (the first maximum wins). */
static Expr *sm_along(Imp *imp, SmKind kind, Expr *x, int64_t axis) {
    if (x == NULL) return NULL;
    ImpAttrs a = {0};
    if (kind != SM_HARDMAX) {
        ia_int(imp, &a, "axis", axis);
        return imp_call1(imp, kind == SM_SOFTMAX ? "nn.softmax" : "nn.log_softmax", x, &a);
    }
    int64_t depth = imp_tt(x)->shape[axis];
    if (depth < 0) {
        imp_error(imp, "Hardmax needs a static size on axis %lld", (long long)axis);
        return NULL;
    }
    ia_ints(imp, &a, "axis", 1, &axis);
    Expr *idx = imp_call1(imp, "argmax", x, &a);
    if (idx == NULL) return NULL;
    rly_dtype dt = imp_dtype(x);
    ImpAttrs o = {0};
    ia_int(imp, &o, "depth", depth);
    ia_int(imp, &o, "axis", axis);
    ia_str(imp, &o, "dtype", sup_dtype_name(dt));
    Expr *args[3] = {idx, imp_scalar(imp, dt, 1), imp_scalar(imp, dt, 0)};
    return imp_call(imp, "one_hot", 3, args, &o);
}

/* Softmax or LogSoftmax over the axes [axis, rank) together, without reshaping:
 * exp(x - m) / sum(exp(x - m)) or (x - m) - log(sum(exp(x - m))), m the max over those axes. */
static Expr *sm_composite(Imp *imp, SmKind kind, Expr *x, uint32_t axis) {
    uint32_t r = imp_rank(x);
    int64_t *axes = imp_alloc(imp, r * sizeof(int64_t));
    for (uint32_t i = axis; i < r; i++)
        axes[i - axis] = i;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "axis", r - axis, axes);
    ia_bool(imp, &a, "keepdims", true);
    Expr *m = imp_call1(imp, "max", x, &a);
    Expr *d = bin(imp, "subtract", x, m);
    Expr *e = un(imp, "exp", d);
    Expr *s = e ? imp_call1(imp, "sum", e, &a) : NULL;
    if (kind == SM_SOFTMAX) return bin(imp, "divide", e, s);
    return bin(imp, "subtract", d, un(imp, "log", s));
}

/* Before opset 13 the input is coerced to 2-D, (d0 * ... * d{axis-1}, d{axis} * ... ), the op
 * runs along axis 1 of that, and the result takes the input's shape back. */
static bool conv_sm_1(Imp *imp) {
    SmKind kind = sm_kind(imp);
    Expr *x = tin(imp, 0, "input");
    if (x == NULL) return false;
    uint32_t r = imp_rank(x);
    if (r == 0) return imp_error(imp, "input must have rank 1 or more");
    int64_t axis;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", 1), r, "axis", &axis)) return false;
    if (axis == (int64_t)r - 1) return set_out(imp, 0, sm_along(imp, kind, x, axis));
    int64_t lead = dims_product(x, 0, (uint32_t)axis), rest = dims_product(x, (uint32_t)axis, r);
    int64_t shape[2] = {lead >= 0 ? lead : -1, lead >= 0 ? -1 : rest};
    if (lead < 0 && rest < 0) {
        if (kind == SM_HARDMAX)
            return imp_error(imp, "Hardmax-%lld needs static sizes before or after axis %lld",
                             (long long)imp_opset(imp), (long long)axis);
        return set_out(imp, 0, sm_composite(imp, kind, x, (uint32_t)axis));
    }
    Expr *y = sm_along(imp, kind, reshape(imp, x, 2, shape), 1);
    return set_out(imp, 0, y ? imp_call2(imp, "reshape_like", y, x, NULL) : NULL);
}

static bool conv_sm_13(Imp *imp) {
    Expr *x = tin(imp, 0, "input");
    if (x == NULL) return false;
    int64_t axis;
    if (!norm_axis(imp, imp_attr_int(imp, "axis", -1), imp_rank(x), "axis", &axis)) return false;
    return set_out(imp, 0, sm_along(imp, sm_kind(imp), x, axis));
}

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ------------------------------------ */

/* nn.nll_loss(input, target, weight) with ONNX's attributes. Without weights every class weighs
 * 1: a constant when the class count is static, else ones shaped like the max over every axis
 * but 1. Without ignore_index no target is ignored: the sentinel INT64_MIN is no class index,
 * so the kernel still rejects out-of-range targets. */
static Expr *nll(Imp *imp, Expr *input, Expr *target, Expr *weight) {
    if (input == NULL || target == NULL) return NULL;
    const char *red = imp_attr_str(imp, "reduction", "mean");
    if (strcmp(red, "mean") != 0 && strcmp(red, "sum") != 0 && strcmp(red, "none") != 0) {
        imp_error(imp, "attribute reduction must be none, sum or mean, got '%s'", red);
        return NULL;
    }
    if (imp_rank(input) < 2) {
        imp_error(imp, "input must have rank 2 or more (N, C, ...), got rank %u", imp_rank(input));
        return NULL;
    }
    rly_dtype dt = imp_dtype(input);
    if (weight == NULL) {
        int64_t c = imp_tt(input)->shape[1];
        ImpAttrs a = {0};
        if (c >= 0) {
            ia_ints(imp, &a, "shape", 1, &c);
            ia_str(imp, &a, "dtype", sup_dtype_name(dt));
            weight = imp_call(imp, "ones", 0, NULL, &a);
        } else {
            int64_t one = 1;
            ia_ints(imp, &a, "axis", 1, &one);
            ia_bool(imp, &a, "exclude", true);
            weight = un(imp, "ones_like", imp_call1(imp, "max", input, &a));
        }
        if (weight == NULL) return NULL;
    }
    const OxAttr *ii = imp_attr(imp, "ignore_index");
    ImpAttrs a = {0};
    ia_str(imp, &a, "reduction", red);
    ia_int(imp, &a, "ignore_index", ii ? ii->i : INT64_MIN);
    Expr *args[3] = {input, target, weight};
    return imp_call(imp, "nn.nll_loss", 3, args, &a);
}

static bool conv_nll_loss(Imp *imp) {
    Expr *input = tin(imp, 0, "input"), *target = tin(imp, 1, "target");
    return set_out(imp, 0, nll(imp, input, target, imp_in(imp, 2)));
}

/* SoftmaxCrossEntropyLoss: log_softmax over the class axis (1), then the NLL loss; the second
 * output is the log-probabilities. */
static bool conv_sce_loss(Imp *imp) {
    Expr *scores = tin(imp, 0, "scores"), *labels = tin(imp, 1, "labels");
    if (scores == NULL || labels == NULL) return false;
    if (imp_rank(scores) < 2)
        return imp_error(imp, "scores must have rank 2 or more (N, C, ...), got rank %u",
                         imp_rank(scores));
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", 1);
    Expr *lp = imp_call1(imp, "nn.log_softmax", scores, &a);
    if (!set_out(imp, 0, nll(imp, lp, labels, imp_in(imp, 2)))) return false;
    if (wants_out(imp, 1)) imp_out(imp, 1, lp);
    return true;
}

/* ---- the table
 * ----------------------------------------------------------------------------------- */

const ImpConv imp_conv_reduce[] = {
    {"ReduceSum", "", 1, conv_reduce_attr},
    {"ReduceSum", "", 13, conv_reduce_input},
    {"ReduceMean", "", 1, conv_reduce_attr},
    {"ReduceMean", "", 18, conv_reduce_input},
    {"ReduceMax", "", 1, conv_reduce_attr},
    {"ReduceMax", "", 18, conv_reduce_input},
    {"ReduceMin", "", 1, conv_reduce_attr},
    {"ReduceMin", "", 18, conv_reduce_input},
    {"ReduceProd", "", 1, conv_reduce_attr},
    {"ReduceProd", "", 18, conv_reduce_input},
    {"ReduceL1", "", 1, conv_reduce_attr},
    {"ReduceL1", "", 18, conv_reduce_input},
    {"ReduceL2", "", 1, conv_reduce_attr},
    {"ReduceL2", "", 18, conv_reduce_input},
    {"ReduceLogSum", "", 1, conv_reduce_attr},
    {"ReduceLogSum", "", 18, conv_reduce_input},
    {"ReduceLogSumExp", "", 1, conv_reduce_attr},
    {"ReduceLogSumExp", "", 18, conv_reduce_input},
    {"ReduceSumSquare", "", 1, conv_reduce_attr},
    {"ReduceSumSquare", "", 18, conv_reduce_input},
    {"ArgMax", "", 1, conv_arg},
    {"ArgMin", "", 1, conv_arg},
    {"CumSum", "", 11, conv_cumsum},
    {"TopK", "", 1, conv_topk_1},
    {"TopK", "", 10, conv_topk_10},
    {"Softmax", "", 1, conv_sm_1},
    {"Softmax", "", 13, conv_sm_13},
    {"LogSoftmax", "", 1, conv_sm_1},
    {"LogSoftmax", "", 13, conv_sm_13},
    {"Hardmax", "", 1, conv_sm_1},
    {"Hardmax", "", 13, conv_sm_13},
    {"NegativeLogLikelihoodLoss", "", 12, conv_nll_loss},
    {"SoftmaxCrossEntropyLoss", "", 12, conv_sce_loss},
    {NULL, NULL, 0, NULL},
};
