/* import_rnn.c - ONNX converters: LSTM, GRU and RNN.
 *
 * The recurrence is unrolled over the (static) sequence length. The input projection of every
 * step is one nn.dense over the whole sequence (T, B, I) x (G*H, I) with both biases folded in;
 * each step then adds h x R^T and splits the gates. sequence_lens masks with `where`: past a
 * sequence's length the state is kept and the output is zero, and since a reverse pass starts at
 * T - 1, its state stays initial until the sequence's last valid step, which reverses each
 * sequence within its own length as ONNX specifies.
 *
 * Gate orders: LSTM i, o, f, c; GRU z, r, h; RNN one gate. Activation alphas and betas are taken
 * in order by the activations that have such a parameter (as onnxruntime reads them). clip
 * bounds each gate's input before its activation (not the cell before h). */
#include <math.h>
#include <string.h>

#include "frontend/onnx/import.h"

#define SEQ_MAX 100000 /* steps we unroll */

/* ---- builders (NULL in, NULL out) ------------------------------------------------------------ */

static Expr *add(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "add", x, y, NULL); }
static Expr *sub(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "subtract", x, y, NULL); }
static Expr *mul(Imp *imp, Expr *x, Expr *y) { return imp_call2(imp, "multiply", x, y, NULL); }

static Expr *scalar_of(Imp *imp, Expr *x, double v) {
    return x ? imp_scalar(imp, imp_dtype(x), v) : NULL;
}

/* x[begin:end] along axis. */
static Expr *slice(Imp *imp, Expr *x, int64_t axis, int64_t begin, int64_t end) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "begin", 1, &begin);
    ia_ints(imp, &a, "end", 1, &end);
    ia_ints(imp, &a, "axes", 1, &axis);
    return imp_call1(imp, "strided_slice", x, &a);
}

/* x[i] along axis (the axis removed). */
static Expr *take(Imp *imp, Expr *x, int64_t axis, int64_t i) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    return imp_call2(imp, "take", x, imp_scalar_i(imp, RLY_DTYPE_I64, i), &a);
}

/* The n equal parts of x along axis, into parts[]; false after an error. */
static bool split(Imp *imp, Expr *x, int64_t axis, uint32_t n, Expr **parts) {
    if (!x) return false;
    ImpAttrs a = {0};
    ia_int(imp, &a, "indices_or_sections", n);
    ia_int(imp, &a, "axis", axis);
    Expr *t = imp_call1(imp, "split", x, &a);
    if (!t) return false;
    for (uint32_t i = 0; i < n; i++)
        if (!(parts[i] = imp_get(imp, t, i))) return false;
    return true;
}

static Expr *squeeze0(Imp *imp, Expr *x) {
    if (!x) return NULL;
    int64_t axis = 0;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "axis", 1, &axis);
    return imp_call1(imp, "squeeze", x, &a);
}

static Expr *transpose(Imp *imp, Expr *x, uint32_t n, const int64_t *axes) {
    if (!x) return NULL;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "axes", n, axes);
    return imp_call1(imp, "transpose", x, &a);
}

static Expr *stack(Imp *imp, uint32_t n, Expr **xs, int64_t axis) {
    for (uint32_t i = 0; i < n; i++)
        if (!xs[i]) return NULL;
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    return imp_call1(imp, "stack", imp_tuple(imp, n, xs), &a);
}

static Expr *dense(Imp *imp, Expr *x, Expr *w) { return imp_call2(imp, "nn.dense", x, w, NULL); }

/* ---- activations ----------------------------------------------------------------------------- */

typedef enum ActKind {
    ACT_SIGMOID,
    ACT_TANH,
    ACT_RELU,
    ACT_AFFINE,
    ACT_LEAKY_RELU,
    ACT_THRESHOLDED_RELU,
    ACT_SCALED_TANH,
    ACT_HARD_SIGMOID,
    ACT_ELU,
    ACT_SOFTSIGN,
    ACT_SOFTPLUS,
} ActKind;

typedef struct ActInfo {
    const char *name;
    ActKind kind;
    bool has_alpha, has_beta;
    double alpha, beta; /* defaults: those of the ONNX operators of the same name */
} ActInfo;

static const ActInfo act_table[] = {
    {"Sigmoid", ACT_SIGMOID, false, false, 0, 0},
    {"Tanh", ACT_TANH, false, false, 0, 0},
    {"Relu", ACT_RELU, false, false, 0, 0},
    {"Affine", ACT_AFFINE, true, true, 1.0, 0.0},
    {"LeakyRelu", ACT_LEAKY_RELU, true, false, 0.01, 0},
    {"ThresholdedRelu", ACT_THRESHOLDED_RELU, true, false, 1.0, 0},
    {"ScaledTanh", ACT_SCALED_TANH, true, true, 1.0, 1.0},
    {"HardSigmoid", ACT_HARD_SIGMOID, true, true, 0.2, 0.5},
    {"Elu", ACT_ELU, true, false, 1.0, 0},
    {"Softsign", ACT_SOFTSIGN, false, false, 0, 0},
    {"Softplus", ACT_SOFTPLUS, false, false, 0, 0},
};

typedef struct Act {
    ActKind kind;
    double alpha, beta;
} Act;

static bool same_name(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y) return false;
    }
    return *a == *b;
}

static Expr *activate(Imp *imp, const Act *a, Expr *x) {
    if (!x) return NULL;
    switch (a->kind) {
    case ACT_SIGMOID: return imp_call1(imp, "sigmoid", x, NULL);
    case ACT_TANH: return imp_call1(imp, "tanh", x, NULL);
    case ACT_RELU: return imp_call1(imp, "nn.relu", x, NULL);
    case ACT_AFFINE:
        return add(imp, mul(imp, x, scalar_of(imp, x, a->alpha)), scalar_of(imp, x, a->beta));
    case ACT_LEAKY_RELU:
    case ACT_THRESHOLDED_RELU:
    case ACT_ELU: {
        Expr *zero = scalar_of(imp, x, 0);
        Expr *cond, *other;
        if (a->kind == ACT_THRESHOLDED_RELU) {
            cond = imp_call2(imp, "greater", x, scalar_of(imp, x, a->alpha), NULL);
            other = zero;
        } else {
            cond = imp_call2(imp, "greater_equal", x, zero, NULL);
            Expr *neg = a->kind == ACT_ELU
                            ? sub(imp, imp_call1(imp, "exp", x, NULL), scalar_of(imp, x, 1))
                            : x;
            other = mul(imp, neg, scalar_of(imp, x, a->alpha));
        }
        if (!cond || !other) return NULL;
        Expr *args[3] = {cond, x, other};
        return imp_call(imp, "where", 3, args, NULL);
    }
    case ACT_SCALED_TANH:
        return mul(imp, imp_call1(imp, "tanh", mul(imp, x, scalar_of(imp, x, a->beta)), NULL),
                   scalar_of(imp, x, a->alpha));
    case ACT_HARD_SIGMOID: {
        ImpAttrs at = {0};
        ia_float(imp, &at, "a_min", 0.0);
        ia_float(imp, &at, "a_max", 1.0);
        return imp_call1(
            imp, "clip",
            add(imp, mul(imp, x, scalar_of(imp, x, a->alpha)), scalar_of(imp, x, a->beta)), &at);
    }
    case ACT_SOFTSIGN:
        return imp_call2(imp, "divide", x,
                         add(imp, imp_call1(imp, "abs", x, NULL), scalar_of(imp, x, 1)), NULL);
    case ACT_SOFTPLUS:
        return imp_call1(imp, "log", add(imp, imp_call1(imp, "exp", x, NULL), scalar_of(imp, x, 1)),
                         NULL);
    }
    return NULL;
}

/* ---- the unrolled recurrence ----------------------------------------------------------------- */

typedef enum CellKind { CELL_RNN, CELL_GRU, CELL_LSTM } CellKind;

typedef struct Rnn {
    CellKind kind;
    uint32_t n_gates; /* 1, 3, 4 */
    uint32_t n_acts;  /* activations per direction: 1, 2, 3 */
    uint32_t n_dirs;  /* 1 or 2 */
    bool reverse;     /* the only direction is reverse */
    int64_t hidden;   /* H */
    int64_t seq;      /* T (static) */
    int64_t layout;   /* 0: (T, B, ...); 1: (B, T, ...) */
    bool has_clip, input_forget, linear_before_reset;
    double clip;
    Act act[2][3];     /* [direction][f, g, h] */
    Expr *x;           /* (T, B, I) */
    Expr *w, *r, *b;   /* (D, G*H, I), (D, G*H, H), (D, 2*G*H) or NULL */
    Expr *seq_lens;    /* (B,) or NULL when every sequence is full */
    bool zero_lens;    /* seq_lens may hold a 0 (not a constant without one) */
    Expr *h0, *c0, *p; /* (D, B, H) in layout 0, or NULL; p (D, 3*H) */
} Rnn;

/* Reads direction, hidden_size, clip, the activations (with alphas and betas) and layout. */
static bool rnn_attrs(Imp *imp, Rnn *r) {
    const char *dir = imp_attr_str(imp, "direction", "forward");
    if (strcmp(dir, "forward") == 0 || strcmp(dir, "reverse") == 0) {
        r->n_dirs = 1;
        r->reverse = dir[0] == 'r';
    } else if (strcmp(dir, "bidirectional") == 0) {
        r->n_dirs = 2;
    } else {
        return imp_error(imp, "unknown direction '%s'", dir);
    }
    r->layout = imp_attr_int(imp, "layout", 0);
    if (r->layout != 0 && r->layout != 1)
        return imp_error(imp, "layout must be 0 or 1, got %lld", (long long)r->layout);
    r->has_clip = imp_attr(imp, "clip") != NULL;
    r->clip = imp_attr_float(imp, "clip", 0);
    if (r->has_clip && !(r->clip > 0)) return imp_error(imp, "clip must be positive");
    static const char *const dflt[3][3] = {
        {"Tanh", NULL, NULL}, {"Sigmoid", "Tanh", NULL}, {"Sigmoid", "Tanh", "Tanh"}};
    const OxAttr *acts = imp_attr(imp, "activations");
    uint32_t n_given = acts ? acts->n_strings : 0;
    if (n_given != 0 && n_given != r->n_acts && n_given != r->n_acts * r->n_dirs)
        return imp_error(imp, "activations has %u names; expected %u (%u per direction)", n_given,
                         r->n_acts * r->n_dirs, r->n_acts);
    const float *alphas, *betas;
    uint32_t n_alpha = imp_attr_floats(imp, "activation_alpha", &alphas);
    uint32_t n_beta = imp_attr_floats(imp, "activation_beta", &betas);
    uint32_t ia = 0, ib = 0;
    for (uint32_t d = 0; d < r->n_dirs; d++)
        for (uint32_t j = 0; j < r->n_acts; j++) {
            const char *name = dflt[r->kind][j];
            if (n_given) name = acts->strings[n_given == r->n_acts ? j : d * r->n_acts + j].s;
            const ActInfo *info = NULL;
            for (size_t k = 0; k < sizeof act_table / sizeof act_table[0]; k++)
                if (same_name(name, act_table[k].name)) info = &act_table[k];
            if (!info) return imp_error(imp, "unsupported activation '%s'", name);
            Act *a = &r->act[d][j];
            a->kind = info->kind;
            a->alpha = info->alpha;
            a->beta = info->beta;
            /* a list given once for both directions is read again for the second */
            if (n_given == r->n_acts && d == 1) {
                *a = r->act[0][j];
                continue;
            }
            if (info->has_alpha && ia < n_alpha) a->alpha = alphas[ia++];
            if (info->has_beta && ib < n_beta) a->beta = betas[ib++];
        }
    return true;
}

/* Reads the inputs and checks their shapes; X becomes (T, B, I), initial states (D, B, H). */
static bool rnn_inputs(Imp *imp, Rnn *r) {
    r->x = imp_in_req(imp, 0, "X");
    r->w = imp_in_req(imp, 1, "W");
    r->r = imp_in_req(imp, 2, "R");
    if (!r->x || !r->w || !r->r) return false;
    r->b = imp_in(imp, 3);
    r->seq_lens = imp_in(imp, 4);
    r->h0 = imp_in(imp, 5);
    r->c0 = r->kind == CELL_LSTM ? imp_in(imp, 6) : NULL;
    r->p = r->kind == CELL_LSTM ? imp_in(imp, 7) : NULL;
    if (imp_rank(r->x) != 3) return imp_error(imp, "X must be 3-D, got rank %u", imp_rank(r->x));
    if (imp_rank(r->w) != 3 || imp_rank(r->r) != 3)
        return imp_error(imp, "W and R must be 3-D, got ranks %u and %u", imp_rank(r->w),
                         imp_rank(r->r));
    static const int64_t swap[3] = {1, 0, 2};
    if (r->layout == 1) {
        r->x = transpose(imp, r->x, 3, swap);
        if (r->h0) r->h0 = transpose(imp, r->h0, 3, swap);
        if (r->c0) r->c0 = transpose(imp, r->c0, 3, swap);
        if (!r->x || (imp_in(imp, 5) && !r->h0)) return false;
        if (r->kind == CELL_LSTM && imp_in(imp, 6) && !r->c0) return false;
    }
    TensorType *xt = imp_tt(r->x), *rt = imp_tt(r->r), *wt = imp_tt(r->w);
    r->seq = xt->shape[0];
    if (r->seq < 0)
        return imp_error(imp, "the sequence length must be static (X has shape (?, ...) in the "
                              "time axis)");
    if (r->seq > SEQ_MAX)
        return imp_error(imp, "sequence length %lld is too long to unroll (at most %d)",
                         (long long)r->seq, SEQ_MAX);
    int64_t h = imp_attr_int(imp, "hidden_size", -1);
    if (h < 0) h = rt->shape[2];
    if (h < 0 && wt->shape[1] >= 0) h = wt->shape[1] / r->n_gates;
    if (h < 1)
        return imp_error(imp,
                         "hidden_size is unknown (set the attribute or give R a static shape)");
    r->hidden = h;
    if ((wt->shape[0] >= 0 && wt->shape[0] != r->n_dirs) ||
        (wt->shape[1] >= 0 && wt->shape[1] != r->n_gates * h) ||
        (rt->shape[0] >= 0 && rt->shape[0] != r->n_dirs) ||
        (rt->shape[1] >= 0 && rt->shape[1] != r->n_gates * h) ||
        (rt->shape[2] >= 0 && rt->shape[2] != h))
        return imp_error(
            imp, "W and R must have shapes (%u, %lld, input_size) and (%u, %lld, %lld)", r->n_dirs,
            (long long)(r->n_gates * h), r->n_dirs, (long long)(r->n_gates * h), (long long)h);
    if (r->seq_lens) {
        const int64_t *v;
        uint32_t n;
        r->zero_lens = true;
        if (imp_const_ints(imp, r->seq_lens, &v, &n)) {
            bool full = true;
            r->zero_lens = false;
            for (uint32_t i = 0; i < n; i++) {
                if (v[i] < 0 || v[i] > r->seq)
                    return imp_error(imp, "sequence_lens value %lld is outside [0, %lld]",
                                     (long long)v[i], (long long)r->seq);
                if (v[i] != r->seq) full = false;
                if (v[i] == 0) r->zero_lens = true;
            }
            if (full) r->seq_lens = NULL;
        }
    }
    return true;
}

/* Per direction data: weights, biases, states. */
typedef struct Dir {
    Expr *w, *r;      /* (G*H, I), (G*H, H) */
    Expr *r_zr, *r_h; /* GRU without linear_before_reset: R split (2H, H) and (H, H) */
    Expr *rb_h;       /* GRU with linear_before_reset: Rbh (H) */
    Expr *p[3];       /* LSTM peepholes i, o, f (H) or NULL */
    Expr *h, *c;      /* the state (B, H) */
} Dir;

/* Runs direction d over the sequence. Writes Y's (T, B, H) of it to *y when y is non-NULL. */
static bool rnn_direction(Imp *imp, const Rnn *r, uint32_t d, Expr **y_out, Expr **h_out,
                          Expr **c_out) {
    int64_t hsz = r->hidden, g = r->n_gates, T = r->seq;
    rly_dtype dt = imp_dtype(r->x);
    bool reverse = r->n_dirs == 2 ? d == 1 : r->reverse;
    const Act *act = r->act[d];
    Dir dir = {0};
    dir.w = imp_cast(imp, take(imp, r->w, 0, d), dt);
    dir.r = imp_cast(imp, take(imp, r->r, 0, d), dt);
    if (!dir.w || !dir.r) return false;
    /* biases: Wb + Rb into the input projection, except GRU's Rbh under linear_before_reset */
    Expr *bias_x = NULL;
    if (r->b) {
        Expr *bd = imp_cast(imp, take(imp, r->b, 0, d), dt);
        Expr *parts[8];
        if (!split(imp, bd, 0, 2 * (uint32_t)g, parts)) return false;
        Expr *sums[4];
        for (int64_t k = 0; k < g; k++)
            sums[k] = add(imp, parts[k], parts[g + k]);
        if (r->kind == CELL_GRU && r->linear_before_reset) {
            sums[2] = parts[2];
            dir.rb_h = parts[g + 2];
        }
        if (g == 1) {
            bias_x = sums[0];
        } else {
            for (int64_t k = 0; k < g; k++)
                if (!sums[k]) return false;
            ImpAttrs a = {0};
            ia_int(imp, &a, "axis", 0);
            bias_x = imp_call1(imp, "concatenate", imp_tuple(imp, (uint32_t)g, sums), &a);
        }
        if (!bias_x) return false;
    }
    if (r->kind == CELL_GRU && !r->linear_before_reset) {
        dir.r_zr = slice(imp, dir.r, 0, 0, 2 * hsz);
        dir.r_h = slice(imp, dir.r, 0, 2 * hsz, 3 * hsz);
        if (!dir.r_zr || !dir.r_h) return false;
    }
    if (r->p) {
        Expr *pd = imp_cast(imp, take(imp, r->p, 0, d), dt);
        if (!split(imp, pd, 0, 3, dir.p)) return false;
    }
    /* the input projection of every step at once */
    Expr *xw = dense(imp, r->x, dir.w);
    if (bias_x) xw = add(imp, xw, bias_x);
    Expr **steps = imp_alloc(imp, (size_t)(T > 0 ? T : 1) * sizeof(Expr *));
    Expr **ys = imp_alloc(imp, (size_t)(T > 0 ? T : 1) * sizeof(Expr *));
    if (T > 0) {
        if (!split(imp, xw, 0, (uint32_t)T, steps)) return false;
    }
    /* initial state */
    TensorType *xt = imp_tt(r->x);
    int64_t batch = xt->shape[1];
    Expr *zeros;
    if (batch >= 0) {
        int64_t shape[2] = {batch, hsz};
        ImpAttrs a = {0};
        ia_ints(imp, &a, "shape", 2, shape);
        ia_str(imp, &a, "dtype", sup_dtype_name(dt));
        zeros = imp_call(imp, "zeros", 0, NULL, &a);
    } else {
        zeros = imp_call1(imp, "zeros_like",
                          slice(imp, squeeze0(imp, slice(imp, xw, 0, 0, 1)), 1, 0, hsz), NULL);
    }
    if (!zeros) return false;
    dir.h = r->h0 ? imp_cast(imp, take(imp, r->h0, 0, d), dt) : zeros;
    dir.c = r->c0 ? imp_cast(imp, take(imp, r->c0, 0, d), dt) : zeros;
    if (!dir.h || !dir.c) return false;
    Expr *lens = r->seq_lens ? imp_cast(imp, r->seq_lens, RLY_DTYPE_I64) : NULL;
    ImpAttrs clip_attrs = {0};
    if (r->has_clip) {
        ia_float(imp, &clip_attrs, "a_min", -r->clip);
        ia_float(imp, &clip_attrs, "a_max", r->clip);
    }
#define GATE(e) (r->has_clip ? imp_call1(imp, "clip", (e), &clip_attrs) : (e))
    for (int64_t s = 0; s < T; s++) {
        int64_t t = reverse ? T - 1 - s : s;
        Expr *xt_ = squeeze0(imp, steps[t]); /* (B, G*H) */
        Expr *h_new = NULL, *c_new = NULL;
        if (r->kind == CELL_RNN) {
            h_new = activate(imp, &act[0], GATE(add(imp, xt_, dense(imp, dir.h, dir.r))));
        } else if (r->kind == CELL_GRU) {
            Expr *xg[3], *hg[3];
            if (!split(imp, xt_, 1, 3, xg)) return false;
            Expr *hh;
            if (r->linear_before_reset) {
                if (!split(imp, dense(imp, dir.h, dir.r), 1, 3, hg)) return false;
                if (dir.rb_h) hg[2] = add(imp, hg[2], dir.rb_h);
            } else {
                if (!split(imp, dense(imp, dir.h, dir.r_zr), 1, 2, hg)) return false;
            }
            Expr *z = activate(imp, &act[0], GATE(add(imp, xg[0], hg[0])));
            Expr *rr = activate(imp, &act[0], GATE(add(imp, xg[1], hg[1])));
            if (r->linear_before_reset)
                hh = add(imp, xg[2], mul(imp, rr, hg[2]));
            else
                hh = add(imp, xg[2], dense(imp, mul(imp, rr, dir.h), dir.r_h));
            hh = activate(imp, &act[1], GATE(hh));
            h_new = add(imp, mul(imp, sub(imp, scalar_of(imp, z, 1), z), hh), mul(imp, z, dir.h));
        } else {
            Expr *gs[4];
            if (!split(imp, add(imp, xt_, dense(imp, dir.h, dir.r)), 1, 4, gs)) return false;
            Expr *gi = gs[0], *go = gs[1], *gf = gs[2], *gc = gs[3];
            if (dir.p[0]) gi = add(imp, gi, mul(imp, dir.p[0], dir.c));
            Expr *it = activate(imp, &act[0], GATE(gi));
            Expr *ft;
            if (r->input_forget) {
                ft = sub(imp, scalar_of(imp, it, 1), it);
            } else {
                if (dir.p[2]) gf = add(imp, gf, mul(imp, dir.p[2], dir.c));
                ft = activate(imp, &act[0], GATE(gf));
            }
            Expr *ct = activate(imp, &act[1], GATE(gc));
            c_new = add(imp, mul(imp, ft, dir.c), mul(imp, it, ct));
            if (dir.p[1]) go = add(imp, go, mul(imp, dir.p[1], c_new));
            Expr *ot = activate(imp, &act[0], GATE(go));
            h_new = mul(imp, ot, activate(imp, &act[2], c_new));
        }
        if (!h_new || (r->kind == CELL_LSTM && !c_new)) return false;
        if (lens) {
            /* steps at or past a sequence's length keep the state and output zeros */
            ImpAttrs ea = {0};
            ia_int(imp, &ea, "axis", 1);
            Expr *m = imp_call1(
                imp, "expand_dims",
                imp_call2(imp, "less", imp_scalar_i(imp, RLY_DTYPE_I64, t), lens, NULL), &ea);
            if (!m) return false;
            Expr *a1[3] = {m, h_new, dir.h};
            Expr *a2[3] = {m, h_new, scalar_of(imp, h_new, 0)};
            ys[t] = imp_call(imp, "where", 3, a2, NULL);
            dir.h = imp_call(imp, "where", 3, a1, NULL);
            if (c_new) {
                Expr *a3[3] = {m, c_new, dir.c};
                dir.c = imp_call(imp, "where", 3, a3, NULL);
            }
        } else {
            ys[t] = dir.h = h_new;
            if (c_new) dir.c = c_new;
        }
        if (!ys[t] || !dir.h || !dir.c) return false;
    }
#undef GATE
    if (lens && r->zero_lens) {
        /* onnxruntime's rule: a sequence of length 0 has zero final states, not the initial */
        ImpAttrs ea = {0};
        ia_int(imp, &ea, "axis", 1);
        Expr *nz = imp_call1(
            imp, "expand_dims",
            imp_call2(imp, "greater", lens, imp_scalar_i(imp, RLY_DTYPE_I64, 0), NULL), &ea);
        if (!nz) return false;
        Expr *a1[3] = {nz, dir.h, scalar_of(imp, dir.h, 0)};
        Expr *a2[3] = {nz, dir.c, scalar_of(imp, dir.c, 0)};
        dir.h = imp_call(imp, "where", 3, a1, NULL);
        dir.c = imp_call(imp, "where", 3, a2, NULL);
        if (!dir.h || !dir.c) return false;
    }
    if (y_out) {
        if (T == 0) return imp_error(imp, "an empty sequence is not supported");
        *y_out = stack(imp, (uint32_t)T, ys, 0);
        if (!*y_out) return false;
    }
    *h_out = dir.h;
    *c_out = dir.c;
    return true;
}

static bool rnn_convert(Imp *imp, CellKind kind) {
    static const uint32_t gates[3] = {1, 3, 4}, acts[3] = {1, 2, 3};
    Rnn r = {0};
    r.kind = kind;
    r.n_gates = gates[kind];
    r.n_acts = acts[kind];
    r.input_forget = kind == CELL_LSTM && imp_attr_int(imp, "input_forget", 0) != 0;
    r.linear_before_reset = kind == CELL_GRU && imp_attr_int(imp, "linear_before_reset", 0) != 0;
    if (!rnn_attrs(imp, &r) || !rnn_inputs(imp, &r)) return false;
    bool want_y = imp_wants_out(imp, 0);
    Expr *ys[2] = {NULL, NULL}, *hs[2], *cs[2];
    for (uint32_t d = 0; d < r.n_dirs; d++)
        if (!rnn_direction(imp, &r, d, want_y ? &ys[d] : NULL, &hs[d], &cs[d])) return false;
    static const int64_t swap[3] = {1, 0, 2}, y_layout1[4] = {2, 0, 1, 3};
    if (want_y) {
        Expr *y = stack(imp, r.n_dirs, ys, 1); /* (T, D, B, H) */
        if (r.layout == 1) y = transpose(imp, y, 4, y_layout1);
        if (!y) return false;
        imp_out(imp, 0, y);
    }
    Expr *yh = stack(imp, r.n_dirs, hs, 0); /* (D, B, H) */
    Expr *yc = kind == CELL_LSTM ? stack(imp, r.n_dirs, cs, 0) : NULL;
    if (r.layout == 1) {
        yh = transpose(imp, yh, 3, swap);
        if (yc) yc = transpose(imp, yc, 3, swap);
    }
    if (!yh || (kind == CELL_LSTM && !yc)) return false;
    imp_out(imp, 1, yh);
    if (yc) imp_out(imp, 2, yc);
    return true;
}

static bool rnn_cell_convert(Imp *imp) { return rnn_convert(imp, CELL_RNN); }
static bool gru_convert(Imp *imp) { return rnn_convert(imp, CELL_GRU); }
static bool lstm_convert(Imp *imp) { return rnn_convert(imp, CELL_LSTM); }

const ImpConv imp_conv_rnn[] = {
    {"RNN", "", 1, rnn_cell_convert},
    {"RNN", "", 7, rnn_cell_convert},
    {"RNN", "", 14, rnn_cell_convert}, /* layout */
    {"GRU", "", 1, gru_convert},
    {"GRU", "", 3, gru_convert},
    {"GRU", "", 7, gru_convert},
    {"GRU", "", 14, gru_convert}, /* layout */
    {"LSTM", "", 1, lstm_convert},
    {"LSTM", "", 7, lstm_convert},
    {"LSTM", "", 14, lstm_convert}, /* layout */
    {NULL, NULL, 0, NULL},
};
