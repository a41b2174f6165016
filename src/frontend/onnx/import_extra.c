/* import_extra.c - ONNX converters: Det, TfIdfVectorizer, and the ai.onnx.preview.training
 * optimizers (Adagrad, Adam, Momentum).
 *
 * Det and TfIdfVectorizer map onto rly's own operators `det` and `tfidf_vectorizer`
 * (src/ops/op_misc.c), which check shapes and attribute lists. The optimizers are composites of
 * elementwise operators following the formulas of the ONNX specification; each node updates n
 * tensors, its inputs being R, T, then n tensors per group (X..., G..., and the optimizer's
 * state: H... for Adagrad, V... for Momentum, V..., H... for Adam) and its outputs the new X...
 * followed by the new state tensors, group by group. The builders below take and return NULL: a
 * failed imp_call has already reported its error. */
#include <string.h>

#include "frontend/onnx/import.h"

/* ---- builders (NULL in, NULL out) ------------------------------------------------------------ */

static Expr *add(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "add", x, y, NULL); }
static Expr *sub(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "subtract", x, y, NULL); }
static Expr *mul(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "multiply", x, y, NULL); }
static Expr *div_(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "divide", x, y, NULL); }
static Expr *sqrt_(Imp *imp, Expr *x) { return imp_call1(imp, "sqrt", x, NULL); }

/* A scalar constant of x's dtype. */
static Expr *scalar_of(Imp *imp, Expr *x, double v) {
    return x ? imp_scalar(imp, imp_dtype(x), v) : NULL;
}

/* where(cond, a, b). */
static Expr *select(Imp *imp, Expr *cond, Expr *a, Expr *b) {
    Expr *args[3] = {cond, a, b};
    if (!cond || !a || !b) return NULL;
    return imp_call(imp, "where", 3, args, NULL);
}

/* ---- Det --------------------------------------------------------------------------------------
 */

static bool det_convert(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    if (x == NULL) return false;
    return imp_set_out(imp, 0, imp_call1(imp, "det", x, NULL));
}

/* ---- TfIdfVectorizer ---------------------------------------------------------------------------
 */

/* The attributes pass through to tfidf_vectorizer, whose relation checks the lists (ngram_counts
 * against the pool, ngram_indexes, weights). String n-grams need string tensors, which rly does
 * not have. */
static bool tfidf_convert(Imp *imp) {
    if (imp_attr(imp, "pool_strings") != NULL)
        return imp_error(imp, "string n-grams (pool_strings) are not supported: rly has no string "
                              "tensors; only pool_int64s with an int32 or int64 input is");
    static const char *const required[] = {"mode",           "min_gram_length", "max_gram_length",
                                           "max_skip_count", "ngram_counts",    "ngram_indexes",
                                           "pool_int64s"};
    for (size_t i = 0; i < RLY_ARRAY_LEN(required); i++)
        if (imp_attr(imp, required[i]) == NULL)
            return imp_error(imp, "attribute %s is required", required[i]);
    Expr *x = imp_tin(imp, 0, "X");
    if (x == NULL) return false;
    const int64_t *counts, *idx, *pool;
    const float *wf;
    uint32_t n_counts = imp_attr_ints(imp, "ngram_counts", &counts);
    uint32_t n_idx = imp_attr_ints(imp, "ngram_indexes", &idx);
    uint32_t n_pool = imp_attr_ints(imp, "pool_int64s", &pool);
    uint32_t n_w = imp_attr_floats(imp, "weights", &wf);
    double *w = imp_alloc(imp, sizeof *w * (n_w ? n_w : 1));
    for (uint32_t i = 0; i < n_w; i++)
        w[i] = wf[i];
    ImpAttrs a = {0};
    ia_str(imp, &a, "mode", imp_attr_str(imp, "mode", "TF"));
    ia_int(imp, &a, "min_gram_length", imp_attr_int(imp, "min_gram_length", 1));
    ia_int(imp, &a, "max_gram_length", imp_attr_int(imp, "max_gram_length", 1));
    ia_int(imp, &a, "max_skip_count", imp_attr_int(imp, "max_skip_count", 0));
    ia_ints(imp, &a, "ngram_counts", n_counts, counts);
    ia_ints(imp, &a, "ngram_indexes", n_idx, idx);
    ia_ints(imp, &a, "pool", n_pool, pool);
    ia_floats(imp, &a, "weights", n_w, w);
    return imp_set_out(imp, 0, imp_call1(imp, "tfidf_vectorizer", x, &a));
}

/* ---- the ai.onnx.preview.training optimizers --------------------------------------------------
 */

#define TRAINING "ai.onnx.preview.training"

typedef struct Optim {
    uint32_t n;  /* tensors updated */
    Expr *r, *t; /* the learning rate R (float) and the update count T (int64), scalars */
} Optim;

/* Read R and T; the inputs after them must be `groups` lists of n tensors each, and the node
 * may name at most `outs` * n outputs. `names` spells the groups for messages ("X, G, H"). */
static bool optim_read(Imp *imp, uint32_t groups, uint32_t outs, const char *names, Optim *o) {
    o->r = imp_tin(imp, 0, "R");
    o->t = imp_tin(imp, 1, "T");
    if (o->r == NULL || o->t == NULL) return false;
    if (!sup_dtype_is_float(imp_dtype(o->r)))
        return imp_error(imp, "R must be a floating-point scalar, got %s",
                         sup_dtype_name(imp_dtype(o->r)));
    if (!sup_dtype_is_int(imp_dtype(o->t)) && !sup_dtype_is_uint(imp_dtype(o->t)))
        return imp_error(imp, "T must be an integer scalar, got %s",
                         sup_dtype_name(imp_dtype(o->t)));
    uint32_t rest = imp_n_inputs(imp) - 2;
    if (rest == 0 || rest % groups != 0)
        return imp_error(imp,
                         "expects R, T and then %u lists of equal length (%s), got %u tensors "
                         "after R and T",
                         groups, names, rest);
    o->n = rest / groups;
    if (imp_n_outputs(imp) > outs * o->n)
        return imp_error(imp, "names %u outputs, more than the %u it has (%u tensors updated)",
                         imp_n_outputs(imp), outs * o->n, o->n);
    return true;
}

/* Input group g, tensor i (a floating-point tensor), in dtype `like`'s (X's) when like is set. */
static Expr *optim_in(Imp *imp, const Optim *o, uint32_t g, uint32_t i, Expr *like) {
    uint32_t k = 2 + g * o->n + i;
    Expr *e = imp_tin(imp, k, "an optimizer operand");
    if (e == NULL) return NULL;
    if (!sup_dtype_is_float(imp_dtype(e))) {
        imp_error(imp, "input %u must be a floating-point tensor, got %s", k,
                  sup_dtype_name(imp_dtype(e)));
        return NULL;
    }
    return like ? imp_cast(imp, e, imp_dtype(like)) : e;
}

/* T > 0, a bool scalar. */
static Expr *t_positive(Imp *imp, const Optim *o) {
    return imp_call2(imp, "greater", o->t, imp_scalar_i(imp, imp_dtype(o->t), 0), NULL);
}

/* G_regularized = norm_coefficient * X + G */
static Expr *regularized(Imp *imp, Expr *x, Expr *g, double norm) {
    return add(imp, mul(imp, scalar_of(imp, x, norm), x), g);
}

/* Adagrad: r = R / (1 + T * decay_factor); H_new = H + G_reg * G_reg;
 * X_new = X - r * G_reg / (Sqrt(H_new) + epsilon). Outputs X_new..., H_new.... */
static bool adagrad_convert(Imp *imp) {
    Optim o;
    if (!optim_read(imp, 3, 2, "X..., G..., H...", &o)) return false;
    double eps = imp_attr_float(imp, "epsilon", 1e-6f);
    double decay = imp_attr_float(imp, "decay_factor", 0);
    double norm = imp_attr_float(imp, "norm_coefficient", 0);
    for (uint32_t i = 0; i < o.n; i++) {
        Expr *x = optim_in(imp, &o, 0, i, NULL);
        Expr *g = optim_in(imp, &o, 1, i, x), *h = optim_in(imp, &o, 2, i, x);
        if (!x || !g || !h) return false;
        Expr *rr = imp_cast(imp, o.r, imp_dtype(x)), *tt = imp_cast(imp, o.t, imp_dtype(x));
        Expr *r =
            div_(imp, rr, add(imp, scalar_of(imp, x, 1), mul(imp, tt, scalar_of(imp, x, decay))));
        Expr *gr = regularized(imp, x, g, norm);
        Expr *hn = add(imp, h, mul(imp, gr, gr));
        Expr *xn = sub(
            imp, x, div_(imp, mul(imp, r, gr), add(imp, sqrt_(imp, hn), scalar_of(imp, x, eps))));
        if (!imp_set_out(imp, i, xn) || !imp_set_out(imp, o.n + i, hn)) return false;
    }
    return true;
}

/* Momentum: beta_adjusted = T > 0 ? beta : 1; V_new = alpha * V + beta_adjusted * G_reg;
 * standard: X_new = X - R * V_new; nesterov: X_new = X - R * (G_reg + alpha * V_new).
 * Outputs X_new..., V_new.... The four attributes have no defaults in the specification. */
static bool momentum_convert(Imp *imp) {
    Optim o;
    if (!optim_read(imp, 3, 2, "X..., G..., V...", &o)) return false;
    static const char *const required[] = {"alpha", "beta", "norm_coefficient", "mode"};
    for (size_t i = 0; i < RLY_ARRAY_LEN(required); i++)
        if (imp_attr(imp, required[i]) == NULL)
            return imp_error(imp, "attribute %s is required", required[i]);
    double alpha = imp_attr_float(imp, "alpha", 0), beta = imp_attr_float(imp, "beta", 0);
    double norm = imp_attr_float(imp, "norm_coefficient", 0);
    const char *mode = imp_attr_str(imp, "mode", "");
    bool nesterov = strcmp(mode, "nesterov") == 0;
    if (!nesterov && strcmp(mode, "standard") != 0)
        return imp_error(imp, "mode must be \"standard\" or \"nesterov\", got \"%s\"", mode);
    Expr *pos = t_positive(imp, &o);
    for (uint32_t i = 0; i < o.n; i++) {
        Expr *x = optim_in(imp, &o, 0, i, NULL);
        Expr *g = optim_in(imp, &o, 1, i, x), *v = optim_in(imp, &o, 2, i, x);
        if (!x || !g || !v) return false;
        Expr *r = imp_cast(imp, o.r, imp_dtype(x));
        Expr *beta_adj = select(imp, pos, scalar_of(imp, x, beta), scalar_of(imp, x, 1));
        Expr *gr = regularized(imp, x, g, norm);
        Expr *vn = add(imp, mul(imp, scalar_of(imp, x, alpha), v), mul(imp, beta_adj, gr));
        Expr *step = nesterov ? add(imp, gr, mul(imp, scalar_of(imp, x, alpha), vn)) : vn;
        Expr *xn = sub(imp, x, mul(imp, r, step));
        if (!imp_set_out(imp, i, xn) || !imp_set_out(imp, o.n + i, vn)) return false;
    }
    return true;
}

/* Adam: V_new = alpha * V + (1 - alpha) * G_reg; H_new = beta * H + (1 - beta) * G_reg * G_reg;
 * R_adjusted = T > 0 ? R * Sqrt(1 - beta**T) / (1 - alpha**T) : R;
 * X_new = (1 - norm_coefficient_post) * (X - R_adjusted * V_new / (Sqrt(H_new) + epsilon)).
 * Outputs X_new..., V_new..., H_new.... */
static bool adam_convert(Imp *imp) {
    Optim o;
    if (!optim_read(imp, 4, 3, "X..., G..., V..., H...", &o)) return false;
    double alpha = imp_attr_float(imp, "alpha", 0.9f), beta = imp_attr_float(imp, "beta", 0.999f);
    double eps = imp_attr_float(imp, "epsilon", 1e-6f);
    double norm = imp_attr_float(imp, "norm_coefficient", 0);
    double post = imp_attr_float(imp, "norm_coefficient_post", 0);
    Expr *pos = t_positive(imp, &o);
    for (uint32_t i = 0; i < o.n; i++) {
        Expr *x = optim_in(imp, &o, 0, i, NULL);
        Expr *g = optim_in(imp, &o, 1, i, x), *v = optim_in(imp, &o, 2, i, x),
             *h = optim_in(imp, &o, 3, i, x);
        if (!x || !g || !v || !h) return false;
        Expr *r = imp_cast(imp, o.r, imp_dtype(x)), *tt = imp_cast(imp, o.t, imp_dtype(x));
        Expr *one = scalar_of(imp, x, 1);
        Expr *gr = regularized(imp, x, g, norm);
        Expr *vn = add(imp, mul(imp, scalar_of(imp, x, alpha), v),
                       mul(imp, scalar_of(imp, x, 1 - alpha), gr));
        Expr *hn = add(imp, mul(imp, scalar_of(imp, x, beta), h),
                       mul(imp, mul(imp, scalar_of(imp, x, 1 - beta), gr), gr));
        Expr *hs = add(imp, sqrt_(imp, hn), scalar_of(imp, x, eps));
        Expr *bt = imp_call2(imp, "power", scalar_of(imp, x, beta), tt, NULL);
        Expr *at = imp_call2(imp, "power", scalar_of(imp, x, alpha), tt, NULL);
        Expr *r_adj = select(
            imp, pos, div_(imp, mul(imp, r, sqrt_(imp, sub(imp, one, bt))), sub(imp, one, at)), r);
        Expr *xn = sub(imp, x, div_(imp, mul(imp, r_adj, vn), hs));
        Expr *xf = mul(imp, scalar_of(imp, x, 1 - post), xn);
        if (!imp_set_out(imp, i, xf) || !imp_set_out(imp, o.n + i, vn) ||
            !imp_set_out(imp, 2 * o.n + i, hn))
            return false;
    }
    return true;
}

const ImpConv imp_conv_extra[] = {
    {"Det", "", 11, det_convert},
    {"TfIdfVectorizer", "", 9, tfidf_convert},
    {"Adagrad", TRAINING, 1, adagrad_convert},
    {"Momentum", TRAINING, 1, momentum_convert},
    {"Adam", TRAINING, 1, adam_convert},
    {NULL, NULL, 0, NULL},
};
