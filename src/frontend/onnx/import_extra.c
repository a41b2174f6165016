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
#include <float.h>
#include <math.h>
#include <stdio.h>
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

/* ---- ai.onnx.ml: the tensor operators -------------------------------------------------------- */

#define ML "ai.onnx.ml"

/* The length of a 1-D tensor expression (-1 when not static). */
static int64_t numel_of_1d(Expr *e) { return imp_tt(e)->shape[0]; }

/* Binarizer: 1 where X > threshold, else 0, in X's dtype. */
static bool binarizer_convert(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    if (x == NULL) return false;
    rly_dtype dt = imp_dtype(x);
    if (dt == RLY_DTYPE_BOOL) return imp_error(imp, "X must be numeric, got bool");
    Expr *gt = imp_call2(imp, "greater", x,
                         imp_scalar(imp, dt, imp_attr_float(imp, "threshold", 0.0)), NULL);
    return imp_set_out(imp, 0, select(imp, gt, imp_scalar(imp, dt, 1), imp_scalar(imp, dt, 0)));
}

/* ArrayFeatureExtractor: X[..., indices] with the indices flattened; a 1-D X gives (1, k). */
static bool array_feature_extractor_convert(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X"), *ind = imp_tin(imp, 1, "Y");
    if (x == NULL || ind == NULL) return false;
    if (imp_dtype(ind) != RLY_DTYPE_I64) return imp_error(imp, "Y must be int64");
    uint32_t r = imp_rank(x);
    if (r == 0) return imp_error(imp, "X must have rank >= 1");
    ImpAttrs fl = {0}, tk = {0};
    int64_t minus1 = -1;
    ia_ints(imp, &fl, "newshape", 1, &minus1);
    Expr *flat = imp_call1(imp, "reshape", ind, &fl);
    ia_int(imp, &tk, "axis", (int64_t)r - 1);
    Expr *y = flat ? imp_call2(imp, "take", x, flat, &tk) : NULL;
    if (y != NULL && r == 1) {
        ImpAttrs rs = {0};
        int64_t shape[2] = {1, -1};
        ia_ints(imp, &rs, "newshape", 2, shape);
        y = imp_call1(imp, "reshape", y, &rs);
    }
    return imp_set_out(imp, 0, y);
}

/* One side (keys or values) of a LabelEncoder map: the <side>_tensor (opset 4),
 * <side>_int64s or <side>_floats attribute as a 1-D constant; NULL after reporting (string
 * maps: Relay has no string dtype). */
static Expr *label_side(Imp *imp, const char *side) {
    char name[32];
    snprintf(name, sizeof name, "%s_tensor", side);
    const OxAttr *a = imp_attr(imp, name);
    if (a != NULL && a->t != NULL) {
        if (imp_onnx_dtype(imp, a->t->data_type) < 0) return NULL;
        Expr *e = imp_tensor_const(imp, a->t, false);
        if (e == NULL || imp_rank(e) != 1) {
            if (e) imp_error(imp, "%s must be 1-D", name);
            return NULL;
        }
        return e;
    }
    snprintf(name, sizeof name, "%s_int64s", side);
    const int64_t *iv;
    uint32_t n = imp_attr_ints(imp, name, &iv);
    if (imp_attr(imp, name) != NULL) return imp_const_i64s(imp, n, iv);
    snprintf(name, sizeof name, "%s_floats", side);
    const float *fv;
    n = imp_attr_floats(imp, name, &fv);
    if (imp_attr(imp, name) != NULL) {
        int64_t len = n;
        return imp_const_tensor(imp, RLY_DTYPE_F32, 1, &len, fv);
    }
    snprintf(name, sizeof name, "%s_strings", side);
    if (imp_attr(imp, name) != NULL) {
        imp_error(imp, "%s: string maps are not supported (Relay has no string dtype)", name);
        return NULL;
    }
    imp_error(imp, "the map's %s are missing (%s_tensor, %s_int64s or %s_floats)", side, side, side,
              side);
    return NULL;
}

/* LabelEncoder-2/4 over numbers: y[i] = values[j] where keys[j] == x[i] (the first such j),
 * default_* where none: equal against every key, any and argmax along the new last axis. */
static bool label_encoder_convert(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    if (x == NULL) return false;
    Expr *keys = label_side(imp, "keys"), *vals = keys ? label_side(imp, "values") : NULL;
    if (!keys || !vals) return false;
    if (numel_of_1d(keys) != numel_of_1d(vals))
        return imp_error(imp, "keys (%lld) and values (%lld) differ in length",
                         (long long)numel_of_1d(keys), (long long)numel_of_1d(vals));
    rly_dtype vd = imp_dtype(vals);
    Expr *dflt;
    const OxAttr *dt = imp_attr(imp, "default_tensor");
    if (dt != NULL && dt->t != NULL) {
        if (imp_onnx_dtype(imp, dt->t->data_type) < 0) return false;
        dflt = imp_tensor_const(imp, dt->t, false);
        ImpAttrs ra = {0};
        ia_ints(imp, &ra, "newshape", 0, NULL);
        dflt = dflt ? imp_call1(imp, "reshape", dflt, &ra) : NULL;
        dflt = imp_cast(imp, dflt, vd);
    } else if (sup_dtype_is_float(vd)) {
        dflt = imp_scalar(imp, vd, imp_attr_float(imp, "default_float", -0.0));
    } else {
        dflt = imp_scalar_i(imp, vd, imp_attr_int(imp, "default_int64", -1));
    }
    ImpAttrs ex = {0}, last = {0}, am = {0};
    ia_int(imp, &ex, "axis", -1);
    int64_t minus1 = -1;
    ia_ints(imp, &last, "axis", 1, &minus1);
    ia_ints(imp, &am, "axis", 1, &minus1);
    Expr *col = imp_call1(imp, "expand_dims", x, &ex);
    Expr *eq = col ? imp_call2(imp, "equal", col, imp_cast(imp, keys, imp_dtype(x)), NULL) : NULL;
    Expr *hit = eq ? imp_call1(imp, "any", eq, &last) : NULL;
    Expr *idx = eq ? imp_call1(imp, "argmax", imp_cast(imp, eq, RLY_DTYPE_I32), &am) : NULL;
    ImpAttrs tk = {0};
    ia_int(imp, &tk, "axis", 0);
    Expr *picked = idx ? imp_call2(imp, "take", vals, idx, &tk) : NULL;
    return imp_set_out(imp, 0, select(imp, hit, picked, dflt));
}

/* ---- TreeEnsemble (ai.onnx.ml 5) ---------------------------------------------------------------
 * A composition. Every node's test runs on every sample at once (take the features, compare
 * with the splits by mode; set membership: equal against the node's members); a path from a
 * root to a leaf is taken when all its tests go its way, which is counted by a product with a
 * constant (nodes x paths) matrix of +1 (true wanted), -1 (false wanted) and 0; the leaves'
 * weights are then summed (or averaged, or min/max'ed) per target. The trees are walked here,
 * with an explicit stack: each (tree, leaf) path is one column. */

/* A floats or tensor attribute as doubles (n = 0, NULL when absent); false after reporting. */
static bool attr_f64s(Imp *imp, const char *name, double **out, uint32_t *n) {
    const OxAttr *a = imp_attr(imp, name);
    *out = NULL, *n = 0;
    if (a == NULL) return true;
    if (a->t != NULL) {
        const OxTensor *t = a->t;
        int dt = ox_to_rly_dtype(t->data_type);
        if (dt < 0 || t->count > ((int64_t)1 << 26)) {
            imp_error(imp, "attribute '%s': a %s tensor is not supported here", name,
                      ox_type_name(t->data_type));
            return false;
        }
        double *v = imp_alloc(imp, (size_t)(t->count + 1) * sizeof(double));
        const uint8_t *p = t->data;
        for (int64_t i = 0; i < t->count; i++) {
            switch ((rly_dtype)dt) {
            case RLY_DTYPE_F32: {
                float f;
                memcpy(&f, p + 4 * i, 4);
                v[i] = f;
                break;
            }
            case RLY_DTYPE_F64: memcpy(&v[i], p + 8 * i, 8); break;
            case RLY_DTYPE_U8: v[i] = p[i]; break;
            case RLY_DTYPE_I64: {
                int64_t q;
                memcpy(&q, p + 8 * i, 8);
                v[i] = (double)q;
                break;
            }
            case RLY_DTYPE_I32: {
                int32_t q;
                memcpy(&q, p + 4 * i, 4);
                v[i] = q;
                break;
            }
            default:
                imp_error(imp, "attribute '%s': a %s tensor is not supported here", name,
                          ox_type_name(t->data_type));
                return false;
            }
        }
        *out = v, *n = (uint32_t)t->count;
        return true;
    }
    const float *f;
    uint32_t k = imp_attr_floats(imp, name, &f);
    double *v = imp_alloc(imp, (size_t)(k + 1) * sizeof(double));
    for (uint32_t i = 0; i < k; i++)
        v[i] = f[i];
    *out = v, *n = k;
    return true;
}

/* A required ints attribute of n values (n == UINT32_MAX: any count, stored in *n). */
static const int64_t *attr_ints_n(Imp *imp, const char *name, uint32_t *n, bool required) {
    const int64_t *v;
    uint32_t k = imp_attr_ints(imp, name, &v);
    if (imp_attr(imp, name) == NULL) {
        if (required) imp_error(imp, "attribute '%s' is required", name);
        *n = 0;
        return NULL;
    }
    if (*n != UINT32_MAX && k != *n) {
        imp_error(imp, "attribute '%s' has %u values, expected %u", name, k, *n);
        return NULL;
    }
    *n = k;
    return v;
}

#define TREE_WORK_MAX ((int64_t)1 << 22) /* path steps over all trees */

static Expr *dense(Imp *imp, Expr *a, Expr *w) {
    return a && w ? imp_call2(imp, "nn.dense", a, w, NULL) : NULL;
}

/* The ensemble as operators (see above): X (N, F) -> (N, n_targets) in X's dtype. */
static Expr *tree_compose(Imp *imp, Expr *x, uint32_t nn, const int64_t *feat, const double *modes,
                          const double *splits, const int64_t *mtt, uint32_t n_member,
                          uint32_t max_mem, const uint32_t *mem_idx, const uint32_t *mem_start,
                          const uint32_t *mem_len, const double *members, uint32_t np,
                          const int32_t *cells, const int64_t *leaf, const double *weights,
                          const int64_t *target, int64_t agg, int64_t n_targets, uint32_t n_trees) {
    rly_dtype xd = imp_dtype(x);
    int64_t n1 = nn;
    ImpAttrs t1 = {0};
    ia_int(imp, &t1, "axis", 1);
    Expr *f = imp_call2(imp, "take", x, imp_const_i64s(imp, nn, feat), &t1); /* (N, nodes) */
    Expr *sp = imp_const_tensor(imp, RLY_DTYPE_F64, 1, &n1, splits);
    sp = imp_cast(imp, sp, xd);
    static const char *const cmp[6] = {"less_equal", "less",  "greater_equal",
                                       "greater",    "equal", "not_equal"};
    Expr *res = NULL;
    uint8_t *mask = imp_alloc(imp, nn + 1);
    for (int m = 0; m < 7; m++) {
        bool any = false;
        for (uint32_t i = 0; i < nn; i++)
            any |= (mask[i] = (int)modes[i] == m) != 0;
        if (!any) continue;
        Expr *r;
        if (m < 6) {
            r = f && sp ? imp_call2(imp, cmp[m], f, sp, NULL) : NULL;
        } else {
            /* member sets padded with NaN (never equal) to max_mem: (n_member, max_mem) */
            double *set = imp_alloc(imp, sizeof(double) * n_member * max_mem + 1);
            for (uint32_t q = 0; q < n_member; q++)
                for (uint32_t j = 0; j < max_mem; j++)
                    set[q * max_mem + j] = j < mem_len[q] ? members[mem_start[q] + j] : NAN;
            int64_t sshape[2] = {n_member, max_mem};
            int64_t *mfeat = imp_alloc(imp, sizeof(int64_t) * (n_member + 1));
            for (uint32_t i = 0; i < nn; i++)
                if (mask[i]) mfeat[mem_idx[i]] = feat[i];
            Expr *fm = imp_call2(imp, "take", x, imp_const_i64s(imp, n_member, mfeat), &t1);
            ImpAttrs ex = {0}, last = {0};
            ia_int(imp, &ex, "axis", -1);
            int64_t m1 = -1;
            ia_ints(imp, &last, "axis", 1, &m1);
            Expr *eq =
                fm ? imp_call2(
                         imp, "equal", imp_call1(imp, "expand_dims", fm, &ex),
                         imp_cast(imp, imp_const_tensor(imp, RLY_DTYPE_F64, 2, sshape, set), xd),
                         NULL)
                   : NULL;
            Expr *hit = eq ? imp_call1(imp, "any", eq, &last) : NULL; /* (N, n_member) */
            int64_t *slot = imp_alloc(imp, sizeof(int64_t) * (nn + 1));
            for (uint32_t i = 0; i < nn; i++)
                slot[i] = mask[i] ? mem_idx[i] : 0;
            r = hit ? imp_call2(imp, "take", hit, imp_const_i64s(imp, nn, slot), &t1) : NULL;
        }
        Expr *mk = imp_const_tensor(imp, RLY_DTYPE_BOOL, 1, &n1, mask);
        if (res == NULL) {
            res = r;
        } else {
            Expr *args[3] = {mk, r, res};
            res = r ? imp_call(imp, "where", 3, args, NULL) : NULL;
        }
        if (res == NULL) return NULL;
    }
    if (mtt != NULL) { /* a missing (NaN) feature takes the true branch where asked */
        for (uint32_t i = 0; i < nn; i++)
            mask[i] = mtt[i] != 0;
        Expr *nan = imp_call2(imp, "logical_and", imp_call1(imp, "isnan", f, NULL),
                              imp_const_tensor(imp, RLY_DTYPE_BOOL, 1, &n1, mask), NULL);
        res = nan ? imp_call2(imp, "logical_or", res, nan, NULL) : NULL;
    }
    /* path p is taken when T (N, nodes) times the +-1 matrix equals its count of +1 entries
     * minus nothing: sum_j T[j] s_pj + #false(p) == len(p), s = +1 true wanted, -1 false */
    double *sm = imp_alloc(imp, sizeof(double) * (size_t)np * nn + 1);
    double *need = imp_alloc(imp, sizeof(double) * (np + 1));
    memset(sm, 0, sizeof(double) * (size_t)np * nn);
    const int32_t *c = cells;
    for (uint32_t p = 0; p < np; p++, c++) {
        double len = 0, nfalse = 0;
        for (; *c != 0; c++) {
            int32_t node = (*c > 0 ? *c : -*c) - 1;
            sm[(size_t)p * nn + (uint32_t)node] += *c > 0 ? 1.0 : -1.0;
            len += 1, nfalse += *c < 0;
        }
        need[p] = len - nfalse;
    }
    int64_t wshape[2] = {np, nn}, n_p = np;
    Expr *tf = imp_cast(imp, res, RLY_DTYPE_F64);
    Expr *score = dense(imp, tf, imp_const_tensor(imp, RLY_DTYPE_F64, 2, wshape, sm));
    Expr *taken = score ? imp_call2(imp, "equal", score,
                                    imp_const_tensor(imp, RLY_DTYPE_F64, 1, &n_p, need), NULL)
                        : NULL; /* (N, paths) */
    double *w = imp_alloc(imp, sizeof(double) * (size_t)n_targets * np + 1);
    Expr *y;
    if (agg <= 1) { /* AVERAGE, SUM: the taken paths' weights into their targets */
        memset(w, 0, sizeof(double) * (size_t)n_targets * np);
        for (uint32_t p = 0; p < np; p++)
            w[target[leaf[p]] * np + p] = weights[leaf[p]] / (agg == 0 ? (double)n_trees : 1.0);
        int64_t tshape[2] = {n_targets, np};
        y = dense(imp, imp_cast(imp, taken, RLY_DTYPE_F64),
                  imp_const_tensor(imp, RLY_DTYPE_F64, 2, tshape, w));
    } else { /* MIN, MAX over the taken paths of each target; the dtype's extreme otherwise */
        double ext = xd == RLY_DTYPE_F64 ? DBL_MAX : xd == RLY_DTYPE_F32 ? FLT_MAX : 65504.0;
        if (agg == 3) ext = -ext;
        uint8_t *tm = imp_alloc(imp, (size_t)n_targets * np + 1);
        for (int64_t t = 0; t < n_targets; t++)
            for (uint32_t p = 0; p < np; p++) {
                tm[t * np + p] = target[leaf[p]] == t;
                w[t * np + p] = weights[leaf[p]];
            }
        int64_t tshape[2] = {n_targets, np};
        ImpAttrs ex = {0}, last = {0};
        ia_int(imp, &ex, "axis", 1);
        int64_t m1 = -1;
        ia_ints(imp, &last, "axis", 1, &m1);
        Expr *sel = taken ? imp_call2(imp, "logical_and", imp_call1(imp, "expand_dims", taken, &ex),
                                      imp_const_tensor(imp, RLY_DTYPE_BOOL, 2, tshape, tm), NULL)
                          : NULL; /* (N, targets, paths) */
        Expr *args[3] = {sel, imp_const_tensor(imp, RLY_DTYPE_F64, 2, tshape, w),
                         imp_scalar(imp, RLY_DTYPE_F64, ext)};
        Expr *v = sel ? imp_call(imp, "where", 3, args, NULL) : NULL;
        y = v ? imp_call1(imp, agg == 2 ? "min" : "max", v, &last) : NULL;
    }
    return imp_cast(imp, y, xd);
}

static bool tree_ensemble_convert(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "X");
    if (x == NULL) return false;
    TensorType *tx = imp_tt(x);
    rly_dtype xd = tx->dtype;
    if (tx->ndim != 2 || !sup_dtype_is_float(xd))
        return imp_error(imp, "X must be a 2-D float tensor");
    if (imp_attr_int(imp, "post_transform", 0) != 0)
        return imp_error(imp, "post_transform %lld is not supported (only NONE)",
                         (long long)imp_attr_int(imp, "post_transform", 0));
    int64_t agg = imp_attr_int(imp, "aggregate_function", 1);
    if (agg < 0 || agg > 3)
        return imp_error(imp, "aggregate_function %lld is unknown", (long long)agg);
    int64_t n_targets = imp_attr_int(imp, "n_targets", 0);
    if (n_targets < 1 || n_targets > ((int64_t)1 << 20))
        return imp_error(imp, "n_targets must be in 1..2^20, got %lld", (long long)n_targets);
    uint32_t nn = UINT32_MAX, nl = UINT32_MAX, nr = UINT32_MAX, k;
    const int64_t *feat = attr_ints_n(imp, "nodes_featureids", &nn, true);
    if (!feat) return false;
    k = nn;
    const int64_t *tid = attr_ints_n(imp, "nodes_truenodeids", &k, true);
    k = nn;
    const int64_t *fid = tid ? attr_ints_n(imp, "nodes_falsenodeids", &k, true) : NULL;
    k = nn;
    const int64_t *tleaf = fid ? attr_ints_n(imp, "nodes_trueleafs", &k, true) : NULL;
    k = nn;
    const int64_t *fleaf = tleaf ? attr_ints_n(imp, "nodes_falseleafs", &k, true) : NULL;
    k = nn;
    const int64_t *mtt =
        fleaf ? attr_ints_n(imp, "nodes_missing_value_tracks_true", &k, false) : NULL;
    if (fleaf && !mtt && imp_attr(imp, "nodes_missing_value_tracks_true") != NULL) return false;
    const int64_t *ltarget = fleaf ? attr_ints_n(imp, "leaf_targetids", &nl, true) : NULL;
    const int64_t *roots = ltarget ? attr_ints_n(imp, "tree_roots", &nr, true) : NULL;
    if (!roots) return false;
    double *splits, *modes, *weights, *members;
    uint32_t ns, nm, nw, nmem;
    if (!attr_f64s(imp, "nodes_splits", &splits, &ns) ||
        !attr_f64s(imp, "nodes_modes", &modes, &nm) ||
        !attr_f64s(imp, "leaf_weights", &weights, &nw) ||
        !attr_f64s(imp, "membership_values", &members, &nmem))
        return false;
    if (ns != nn || nm != nn || nw != nl)
        return imp_error(imp,
                         "nodes_splits (%u), nodes_modes (%u) must have one value per node "
                         "(%u) and leaf_weights (%u) one per leaf (%u)",
                         ns, nm, nn, nw, nl);
    if (nn == 0 || nl == 0 || nr == 0)
        return imp_error(imp, "the ensemble has no nodes, leaves or trees");
    int64_t n_feat = tx->shape[1];
    /* members of each MEMBER node, in node order, separated by NaN */
    uint32_t *mem_start = imp_alloc(imp, sizeof(uint32_t) * (nn + 1));
    uint32_t *mem_len = imp_alloc(imp, sizeof(uint32_t) * (nn + 1));
    uint32_t *mem_idx = imp_alloc(imp, sizeof(uint32_t) * (nn + 1)); /* node -> member slot */
    uint32_t n_member = 0, max_mem = 1, pos = 0;
    for (uint32_t i = 0; i < nn; i++) {
        int64_t m = (int64_t)modes[i];
        if (m < 0 || m > 6 || (double)m != modes[i])
            return imp_error(imp, "node %u: mode %g is unknown", i, modes[i]);
        if (feat[i] < 0 || (n_feat >= 0 && feat[i] >= n_feat))
            return imp_error(imp, "node %u: feature %lld is out of range", i, (long long)feat[i]);
        for (int b = 0; b < 2; b++) {
            int64_t id = b ? fid[i] : tid[i], lf = b ? fleaf[i] : tleaf[i];
            if (id < 0 || id >= (lf ? (int64_t)nl : (int64_t)nn))
                return imp_error(imp, "node %u: %s id %lld is out of range", i,
                                 b ? "false" : "true", (long long)id);
        }
        mem_idx[i] = 0;
        if (m == 6) {
            mem_start[n_member] = pos;
            while (pos < nmem && !isnan(members[pos]))
                pos++;
            if (pos >= nmem)
                return imp_error(imp,
                                 "membership_values has no NaN-terminated set for member "
                                 "node %u",
                                 i);
            mem_len[n_member] = pos - mem_start[n_member];
            if (mem_len[n_member] > max_mem) max_mem = mem_len[n_member];
            pos++; /* the NaN */
            mem_idx[i] = n_member++;
        }
    }
    for (uint32_t l = 0; l < nl; l++)
        if (ltarget[l] < 0 || ltarget[l] >= n_targets)
            return imp_error(imp, "leaf %u: target %lld is out of range", l, (long long)ltarget[l]);
    /* the paths: walk each tree with an explicit stack over a tree of steps (each step knows
     * its parent, so a leaf's path is read back along the parent links) */
    typedef struct {
        int32_t test;   /* +(node + 1): the node's test true; -(node + 1): false; 0: root */
        int32_t parent; /* index in steps, -1 for a root */
        uint32_t node, depth;
    } Step;
    Vec(Step) steps = {0};
    Vec(uint32_t) stack = {0};
    Vec(int32_t) cells = {0}; /* every path's tests, each path ended by 0 */
    Vec(int64_t) path_leaf = {0}, path_tree = {0};
    int64_t work = 0;
    bool ok = true;
    for (uint32_t t = 0; t < nr && ok; t++) {
        int64_t r = roots[t];
        if (r < 0 || r >= (int64_t)nn) {
            ok = imp_error(imp, "tree %u: root %lld is out of range", t, (long long)r);
            break;
        }
        if (tleaf[r] && fleaf[r] && tid[r] == fid[r]) { /* a tree that is one leaf */
            vec_push(&cells, 0);
            vec_push(&path_leaf, tid[r]);
            vec_push(&path_tree, (int64_t)t);
            continue;
        }
        stack.len = 0;
        vec_push(&steps, ((Step){0, -1, (uint32_t)r, 0}));
        vec_push(&stack, (uint32_t)(steps.len - 1));
        while (stack.len && ok) {
            uint32_t i = vec_pop(&stack);
            Step st = steps.data[i];
            if (st.depth > nn) {
                ok = imp_error(imp, "tree %u: a cycle through node %u", t, st.node);
                break;
            }
            for (int b = 1; b >= 0 && ok; b--) {
                int64_t id = b ? tid[st.node] : fid[st.node];
                bool leaf = b ? tleaf[st.node] != 0 : fleaf[st.node] != 0;
                int32_t test = b ? (int32_t)(st.node + 1) : -(int32_t)(st.node + 1);
                if ((work += leaf ? st.depth + 2 : 1) > TREE_WORK_MAX) {
                    ok = imp_error(imp, "the ensemble is too large for this form (over 2^22 path "
                                        "steps)");
                    break;
                }
                if (!leaf) {
                    vec_push(&steps, ((Step){test, (int32_t)i, (uint32_t)id, st.depth + 1}));
                    vec_push(&stack, (uint32_t)(steps.len - 1));
                    continue;
                }
                vec_push(&cells, test);
                for (int32_t j = (int32_t)i; j >= 0 && steps.data[j].test != 0;
                     j = steps.data[j].parent)
                    vec_push(&cells, steps.data[j].test);
                vec_push(&cells, 0);
                vec_push(&path_leaf, id);
                vec_push(&path_tree, (int64_t)t);
            }
        }
    }
    vec_free(&steps);
    vec_free(&stack);
    Expr *y = NULL;
    if (ok)
        y = tree_compose(imp, x, nn, feat, modes, splits, mtt, n_member, max_mem, mem_idx,
                         mem_start, mem_len, members, (uint32_t)path_leaf.len, cells.data,
                         path_leaf.data, weights, ltarget, agg, n_targets, nr);
    vec_free(&cells);
    vec_free(&path_leaf);
    vec_free(&path_tree);
    return ok && imp_set_out(imp, 0, y);
}

const ImpConv imp_conv_extra[] = {
    {"TreeEnsemble", ML, 5, tree_ensemble_convert},
    {"LabelEncoder", ML, 2, label_encoder_convert},
    {"LabelEncoder", ML, 4, label_encoder_convert}, /* *_tensor attributes */
    {"Binarizer", ML, 1, binarizer_convert},
    {"ArrayFeatureExtractor", ML, 1, array_feature_extractor_convert},
    {"Det", "", 11, det_convert},
    {"TfIdfVectorizer", "", 9, tfidf_convert},
    {"Adagrad", TRAINING, 1, adagrad_convert},
    {"Momentum", TRAINING, 1, momentum_convert},
    {"Adam", TRAINING, 1, adam_convert},
    {NULL, NULL, 0, NULL},
};
