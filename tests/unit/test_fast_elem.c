/* test_fast_elem.c - the elementwise and nn fast kernels (src/kernels/fast/elem.c, nn.c) against
 * their reference kernels. Random calls of every covered operator: shapes of rank 0-4 with odd
 * extents (vector tails), empty tensors, some large enough to be split over threads, broadcasts
 * (same shape, scalar, per-channel (C,1,1) / (1,C,1,1), per-row (N), random), random axes and
 * attributes (pools: windows, strides, padding, dilation, ceil_mode, count_include_pad), NaN,
 * infinities and signed zeros among the inputs, and calls the fast kernels hand to the reference
 * (other dtypes, layouts, axes, bad attributes). Each call runs at every instruction-set level the
 * machine has (sup_isa_force) on 1 and 2 threads, and in place where the VM may plan it.
 *
 * Tolerances (the fast result against the reference's, which computes in double):
 *   exact (NaN as NaN, -0 == +0): relu, clip, negative, abs, sqrt, the six binary ops, max,
 *     max_pool2d, global_max_pool2d, bias_add, and every fallback;
 *   ULP_RSQRT / ULP_EXP / ULP_SIGMOID / ULP_TANH / ULP_ERF ulp: the unary math;
 *   softmax: 4e-6 relative (+1e-37); log_softmax: 2e-6 relative (+1e-6);
 *   sum, mean, avg pools: 1e-5 of the same reduction of |x| (+1e-30);
 *   layer_norm, batch_norm: 2e-5 (1 + |y|).
 * Also sweeps the unary math over 2^22 floats spread over the whole range (ulp bounds above).
 *   test_fast_elem [TRIALS]   (default 300 per operator); RLY_SEED=N replays a seed.
 *   test_fast_elem --ulp-all  measures the unary math's max ulp error over all 2^32 floats
 *   (--ulp-stride N: over every N-th bit pattern); test_fast_elem --bench prints timings. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/fast/fast.h"
#include "kernels/kernel.h"

#define ULP_RSQRT 1
#define ULP_EXP 1
#define ULP_SIGMOID 3
#define ULP_TANH 1
#define ULP_ERF 3

static uint64_t rng;
static uint32_t next(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 11) % n);
}
static float uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)next(1u << 24) / 16777216.0f;
}

static int n_pass, n_fail;

/* ---- tensors ----------------------------------------------------------------------------------
 */

typedef struct Tensor {
    DLTensor t;
    int64_t shape[K_MAX_DIMS];
    void *data;
} Tensor;

static Tensor *tensor_new(rly_dtype dt, uint32_t nd, const int64_t *shape) {
    Tensor *x = calloc(1, sizeof *x);
    if (nd > 0) memcpy(x->shape, shape, sizeof(int64_t) * nd);
    int64_t n = k_shape_numel(nd, shape);
    size_t bytes = (size_t)(n > 0 ? n : 1) * sup_dtype_size(dt);
    x->data = calloc(1, bytes);
    x->t = (DLTensor){.data = x->data,
                      .device = {kDLCPU, 0},
                      .ndim = (int)nd,
                      .dtype = k_dl_dtype(dt),
                      .shape = x->shape};
    return x;
}
static void tensor_free(Tensor *x) {
    if (x == NULL) return;
    free(x->data);
    free(x);
}
static float *fdata(Tensor *x) { return x->data; }
static int64_t numel(const Tensor *x) { return k_numel(&x->t); }

/* A value: mostly uniform in [-4, 4], sometimes special (when `specials`). */
static float value(bool specials) {
    if (specials) switch (next(60)) {
        case 0: return NAN;
        case 1: return INFINITY;
        case 2: return -INFINITY;
        case 3: return 0.0f;
        case 4: return -0.0f;
        case 5: return 100.0f;
        case 6: return -100.0f;
        case 7: return 1e-30f;
        default: break;
        }
    return uniform(-4.0f, 4.0f);
}

static Tensor *random_f32(uint32_t nd, const int64_t *shape, bool specials) {
    Tensor *x = tensor_new(RLY_DTYPE_F32, nd, shape);
    float *p = fdata(x);
    for (int64_t i = 0; i < numel(x); i++)
        p[i] = value(specials);
    return x;
}

static Tensor *clone(const Tensor *x) {
    Tensor *c = tensor_new(k_dtype(&x->t), (uint32_t)x->t.ndim, x->shape);
    memcpy(c->data, x->data, (size_t)numel(x) * sup_dtype_size(k_dtype(&x->t)));
    return c;
}

/* ---- attributes -------------------------------------------------------------------------------
 */

typedef struct Attrs {
    KAttr a[12];
    int64_t ints[12][4];
    double floats[12][4];
    uint32_t n;
} Attrs;

static void at_int(Attrs *s, const char *name, int64_t v) {
    s->a[s->n++] = (KAttr){.name = name, .kind = KA_INT, .i = v, .f = (double)v};
}
static void at_float(Attrs *s, const char *name, double v) {
    s->a[s->n++] = (KAttr){.name = name, .kind = KA_FLOAT, .f = v};
}
static void at_str(Attrs *s, const char *name, const char *v) {
    s->a[s->n++] = (KAttr){.name = name, .kind = KA_STR, .s = v};
}
static void at_none(Attrs *s, const char *name) {
    s->a[s->n++] = (KAttr){.name = name, .kind = KA_NONE};
}
static void at_ints(Attrs *s, const char *name, uint32_t n, const int64_t *v) {
    for (uint32_t i = 0; i < n; i++) {
        s->ints[s->n][i] = v[i];
        s->floats[s->n][i] = (double)v[i];
    }
    s->a[s->n] = (KAttr){
        .name = name, .kind = KA_INTS, .n = n, .ints = s->ints[s->n], .floats = s->floats[s->n]};
    s->n++;
}

/* ---- calling a kernel ----------------------------------------------------------------------- */

typedef struct Call {
    const char *op;
    uint32_t op_id;
    Attrs at;
    Tensor *in[5];
    uint32_t n_in;
    uint32_t n_out;
} Call;

typedef struct Result {
    int rc;
    char err[256];
    Tensor *out[3];
} Result;

static Result *alloc_into;
static int alloc_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    alloc_into->out[i] = tensor_new(dt, ndim, shape);
    kc->out[i] = &alloc_into->out[i]->t;
    return 0;
}

static void result_free(Result *r) {
    for (int i = 0; i < 3; i++)
        tensor_free(r->out[i]);
    memset(r, 0, sizeof *r);
}

/* Run fn on the call; `inplace`: output 0 preallocated as input `inplace - 1` (a copy of it,
 * which then becomes the result); pre: outputs preallocated as pre's (then r holds none). */
static void run_into(KernelFn fn, const Call *c, SupPool *pool, int inplace, Result *r,
                     const Result *pre) {
    memset(r, 0, sizeof *r);
    const DLTensor *in[5];
    uint32_t start[5], len[5];
    uint8_t tup[5] = {0};
    Tensor *copy = inplace ? clone(c->in[inplace - 1]) : NULL;
    for (uint32_t i = 0; i < c->n_in; i++) {
        in[i] = (inplace && (int)i == inplace - 1) ? &copy->t : &c->in[i]->t;
        start[i] = i;
        len[i] = 1;
    }
    DLTensor *outs[3] = {NULL, NULL, NULL};
    if (copy) {
        outs[0] = &copy->t;
        r->out[0] = copy;
    }
    for (uint32_t i = 0; pre != NULL && i < c->n_out; i++) /* preallocated outputs (timings) */
        outs[i] = &pre->out[i]->t;
    alloc_into = r;
    KCall kc = {.op = c->op,
                .attrs = c->at.a,
                .n_attrs = c->at.n,
                .n_args = c->n_in,
                .arg_start = start,
                .arg_len = len,
                .arg_tuple = tup,
                .in = in,
                .n_in = c->n_in,
                .out = outs,
                .n_out = c->n_out,
                .out_tuple = c->n_out > 1,
                .alloc = alloc_out,
                .err = r->err,
                .err_cap = sizeof r->err,
                .pool = pool};
    r->rc = fn(&kc);
    k_call_release(&kc);
}
static void run(KernelFn fn, const Call *c, SupPool *pool, int inplace, Result *r) {
    run_into(fn, c, pool, inplace, r, NULL);
}

/* ---- comparing --------------------------------------------------------------------------------
 */

typedef enum TolKind { T_EXACT, T_ULP, T_REL, T_SCALED, T_AFFINE } TolKind;
typedef struct Tol {
    TolKind kind;
    double a, b; /* T_ULP: a ulps; T_REL: a * |want| + b; T_SCALED: a * scale[i] + b; T_AFFINE:
                    a * (1 + |want|) */
} Tol;

static int64_t ordered(float f) {
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}
static int64_t ulp_diff(float a, float b) {
    int64_t d = ordered(a) - ordered(b);
    return d < 0 ? -d : d;
}

static bool close(float got, float want, Tol t, double scale) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (t.kind == T_EXACT) return got == want;
    if (isinf(want) || isinf(got)) {
        if (got == want) return true;
        if (t.kind != T_ULP) return false;
    }
    switch (t.kind) {
    case T_ULP: return ulp_diff(got, want) <= (int64_t)t.a;
    case T_REL: return fabs((double)got - want) <= t.a * fabs((double)want) + t.b;
    case T_SCALED: return fabs((double)got - want) <= t.a * scale + t.b;
    case T_AFFINE: return fabs((double)got - want) <= t.a * (1 + fabs((double)want));
    default: return false;
    }
}

static const char *level_name(SupIsa l) { return sup_isa_name(l); }

/* Compare r against the reference result; scale: per-element scales of T_SCALED. */
static bool same(const Call *c, const Result *want, const Result *got, Tol tol, const Tensor *scale,
                 const char *how) {
    char what[160];
    snprintf(what, sizeof what, "%s (%s, seed %" PRIu64 ")", c->op, how, rng);
    if (want->rc != got->rc) {
        printf("FAIL %s: rc %d vs reference %d (%s | %s)\n", what, got->rc, want->rc, got->err,
               want->err);
        return false;
    }
    if (want->rc != 0) return true; /* both failed (the fast kernel handed the call over) */
    for (uint32_t o = 0; o < c->n_out; o++) {
        const Tensor *w = want->out[o], *g = got->out[o];
        if (w == NULL || g == NULL || w->t.ndim != g->t.ndim || k_dtype(&w->t) != k_dtype(&g->t) ||
            !k_same_shape(&w->t, &g->t)) {
            printf("FAIL %s: output %u shape or dtype differs\n", what, o);
            return false;
        }
        int64_t n = numel(w);
        if (k_dtype(&w->t) != RLY_DTYPE_F32) {
            if (memcmp(w->data, g->data, (size_t)n * sup_dtype_size(k_dtype(&w->t))) != 0) {
                printf("FAIL %s: output %u bytes differ\n", what, o);
                return false;
            }
            continue;
        }
        const float *pw = w->data, *pg = g->data;
        for (int64_t i = 0; i < n; i++) {
            double s = scale ? ((const float *)scale->data)[i] : 0;
            if (!close(pg[i], pw[i], o == 0 ? tol : (Tol){T_EXACT, 0, 0}, s)) {
                printf("FAIL %s: output %u element %" PRId64 " of %" PRId64 ": %.9g, reference "
                       "%.9g (%" PRId64 " ulp)\n",
                       what, o, i, n, pg[i], pw[i], ulp_diff(pg[i], pw[i]));
                return false;
            }
        }
    }
    return true;
}

static SupPool *pool2;
static SupIsa max_level;

/* Run c through the reference and through the fast kernel at every level, 1 and 2 threads, and
 * (inplace > 0) in place over input inplace - 1; count a pass or a failure. scale_op: for
 * T_SCALED, the reduction that gives each element's scale when run on |x| (by the reference). */
static void check(Call *c, Tol tol, int inplace, bool scaled) {
    KernelFn ref = kern_ref_lookup(c->op_id), fast = kern_fast_lookup(c->op_id);
    if (fast == NULL) {
        printf("FAIL %s: no fast kernel\n", c->op);
        n_fail++;
        return;
    }
    Result want, got, sc = {0};
    run(ref, c, NULL, 0, &want);
    if (scaled && want.rc == 0) { /* the same op on |x| (every input: conv2d's sum |w||x|) */
        Tensor *orig[5];
        for (uint32_t k = 0; k < c->n_in; k++) {
            orig[k] = c->in[k];
            c->in[k] = clone(orig[k]);
            float *p = fdata(c->in[k]);
            for (int64_t i = 0; i < numel(c->in[k]); i++)
                p[i] = fabsf(p[i]);
        }
        run(ref, c, NULL, 0, &sc);
        for (uint32_t k = 0; k < c->n_in; k++) {
            tensor_free(c->in[k]);
            c->in[k] = orig[k];
        }
    }
    bool ok = true;
    for (int lv = 0; lv <= (int)max_level && ok; lv++) {
        sup_isa_force((SupIsa)lv);
        for (int th = 1; th <= 2 && ok; th++)
            for (int ip = 0; ip <= (inplace ? 1 : 0) && ok; ip++) {
                run(fast, c, th == 2 ? pool2 : NULL, ip ? inplace : 0, &got);
                char how[64];
                snprintf(how, sizeof how, "%s, %d thread%s%s", level_name((SupIsa)lv), th,
                         th > 1 ? "s" : "", ip ? ", in place" : "");
                ok = same(c, &want, &got, tol, scaled ? sc.out[0] : NULL, how);
                result_free(&got);
            }
    }
    sup_isa_force(max_level);
    result_free(&want);
    result_free(&sc);
    if (ok)
        n_pass++;
    else
        n_fail++;
}

static void call_free(Call *c) {
    for (uint32_t i = 0; i < c->n_in; i++)
        tensor_free(c->in[i]);
}

/* ---- shapes ------------------------------------------------------------------------------------
 */

/* A random shape of rank 0-4; sometimes empty, sometimes large (over the threading threshold). */
static uint32_t random_shape(int64_t *shape) {
    uint32_t nd = next(5);
    bool large = next(16) == 0;
    for (uint32_t d = 0; d < nd; d++)
        shape[d] = 1 + next(d + 1 == nd ? 70 : large ? 2 : 7);
    if (large && nd > 0) shape[nd - 1] = 20000 + next(20000);
    if (nd > 0 && next(15) == 0) shape[next(nd)] = 0;
    return nd;
}

/* ---- the operator families --------------------------------------------------------------------
 */

typedef struct UnaryOp {
    const char *name;
    uint32_t id;
    Tol tol;
} UnaryOp;

static const UnaryOp unary_ops[] = {
    {"nn.relu", OP_ID_NN_RELU, {T_EXACT, 0, 0}},
    {"negative", OP_ID_NEGATIVE, {T_EXACT, 0, 0}},
    {"abs", OP_ID_ABS, {T_EXACT, 0, 0}},
    {"sqrt", OP_ID_SQRT, {T_EXACT, 0, 0}},
    {"rsqrt", OP_ID_RSQRT, {T_ULP, ULP_RSQRT, 0}},
    {"exp", OP_ID_EXP, {T_ULP, ULP_EXP, 0}},
    {"fast_exp", OP_ID_FAST_EXP, {T_ULP, ULP_EXP, 0}},
    {"sigmoid", OP_ID_SIGMOID, {T_ULP, ULP_SIGMOID, 0}},
    {"tanh", OP_ID_TANH, {T_ULP, ULP_TANH, 0}},
    {"fast_tanh", OP_ID_FAST_TANH, {T_ULP, ULP_TANH, 0}},
    {"erf", OP_ID_ERF, {T_ULP, ULP_ERF, 0}},
    {"fast_erf", OP_ID_FAST_ERF, {T_ULP, ULP_ERF, 0}},
};

static void test_unary(int trials) {
    for (size_t k = 0; k < RLY_ARRAY_LEN(unary_ops); k++)
        for (int t = 0; t < trials; t++) {
            const UnaryOp *u = &unary_ops[k];
            int64_t shape[4];
            uint32_t nd = random_shape(shape);
            Call c = {.op = u->name, .op_id = u->id, .n_in = 1, .n_out = 1};
            bool widen = u->id == OP_ID_EXP || u->id == OP_ID_TANH || u->id == OP_ID_SIGMOID;
            c.in[0] = random_f32(nd, shape, true);
            if (widen) { /* reach overflow, underflow and the subnormals */
                float *p = fdata(c.in[0]);
                for (int64_t i = 0; i < numel(c.in[0]); i++)
                    if (next(4) == 0) p[i] *= 30.0f;
            }
            if (t % 17 == 5) { /* another dtype: handed to the reference */
                tensor_free(c.in[0]);
                c.in[0] = tensor_new(RLY_DTYPE_F64, nd, shape);
                for (int64_t i = 0; i < numel(c.in[0]); i++)
                    ((double *)c.in[0]->data)[i] = value(true);
            }
            check(&c, u->tol, 1, false);
            call_free(&c);
        }
}

static void test_clip(int trials) {
    for (int t = 0; t < trials; t++) {
        int64_t shape[4];
        uint32_t nd = random_shape(shape);
        Call c = {.op = "clip", .op_id = OP_ID_CLIP, .n_in = 1, .n_out = 1};
        c.in[0] = random_f32(nd, shape, true);
        double lo = uniform(-3, 1), hi = uniform(-1, 3);
        if (t % 13 == 0) hi = INFINITY;
        if (t % 29 == 1) lo = NAN;   /* the reference's error */
        if (t % 31 == 2) lo = 1e300; /* rounds to inf in float32 */
        at_float(&c.at, "a_min", lo);
        at_float(&c.at, "a_max", hi);
        check(&c, (Tol){T_EXACT, 0, 0}, 1, false);
        call_free(&c);
    }
}

typedef struct BinaryOp {
    const char *name;
    uint32_t id;
} BinaryOp;

static const BinaryOp binary_ops[] = {
    {"add", OP_ID_ADD},       {"subtract", OP_ID_SUBTRACT}, {"multiply", OP_ID_MULTIPLY},
    {"divide", OP_ID_DIVIDE}, {"maximum", OP_ID_MAXIMUM},   {"minimum", OP_ID_MINIMUM},
};

/* Shapes of a and b: one of the patterns the kernels vectorize, or a random broadcast. */
static void binary_shapes(uint32_t *na, int64_t *sa, uint32_t *nb, int64_t *sb) {
    int64_t shape[4];
    uint32_t nd = random_shape(shape);
    *na = nd;
    memcpy(sa, shape, sizeof shape);
    switch (next(7)) {
    case 0: /* same shape */
        *nb = nd;
        memcpy(sb, shape, sizeof shape);
        break;
    case 1: /* scalar, or a one-element tensor */
        *nb = next(2);
        sb[0] = 1;
        break;
    case 2: /* per channel: (C, 1, 1) of an (N, C, H, W) */
        *na = 4;
        sa[0] = 1 + next(2), sa[1] = 1 + next(40), sa[2] = 1 + next(9), sa[3] = 1 + next(30);
        if (next(10) == 0) sa[3] = 5000; /* threads */
        *nb = 3;
        sb[0] = sa[1], sb[1] = 1, sb[2] = 1;
        break;
    case 3: /* (1, C, 1, 1) */
        *na = 4;
        sa[0] = 1, sa[1] = 1 + next(40), sa[2] = 1 + next(9), sa[3] = 1 + next(30);
        *nb = 4;
        sb[0] = 1, sb[1] = sa[1], sb[2] = 1, sb[3] = 1;
        break;
    case 4: /* per row: (M, N) op (N) */
        *na = 2;
        sa[0] = 1 + next(50), sa[1] = 1 + next(100);
        *nb = 1;
        sb[0] = sa[1];
        break;
    default: /* random: each of b's dims (aligned right) either a's or 1 */
        *nb = next(nd + 1);
        for (uint32_t d = 0; d < *nb; d++)
            sb[d] = next(2) ? sa[nd - *nb + d] : 1;
        break;
    }
}

static void test_binary(int trials) {
    for (size_t k = 0; k < RLY_ARRAY_LEN(binary_ops); k++)
        for (int t = 0; t < trials; t++) {
            uint32_t na, nb;
            int64_t sa[4], sb[4];
            binary_shapes(&na, sa, &nb, sb);
            Call c = {.op = binary_ops[k].name, .op_id = binary_ops[k].id, .n_in = 2, .n_out = 1};
            bool swap = next(2);
            c.in[swap] = random_f32(na, sa, true);
            c.in[!swap] = random_f32(nb, sb, true);
            if (t % 23 == 7) { /* not broadcastable: the reference's error */
                tensor_free(c.in[1]);
                int64_t bad[1] = {na > 0 && sa[na - 1] > 1 ? sa[na - 1] + 1 : 3};
                c.in[1] = random_f32(1, bad, false);
            }
            if (t % 19 == 3) { /* int32: handed over */
                for (int i = 0; i < 2; i++) {
                    Tensor *f = c.in[i];
                    c.in[i] = tensor_new(RLY_DTYPE_I32, (uint32_t)f->t.ndim, f->shape);
                    for (int64_t e = 0; e < numel(f); e++)
                        ((int32_t *)c.in[i]->data)[e] = (int32_t)next(100) - 50 + (e == 0);
                    tensor_free(f);
                }
            }
            /* in place over an operand of the result's shape (the VM plans no other) */
            int ip = 0;
            uint32_t ndo;
            int64_t so[K_MAX_DIMS];
            if (k_bcast_shape(&c.in[0]->t, &c.in[1]->t, &ndo, so))
                for (int i = 1; i >= 0; i--)
                    if ((uint32_t)c.in[i]->t.ndim == ndo &&
                        memcmp(c.in[i]->shape, so, sizeof(int64_t) * ndo) == 0)
                        ip = i + 1;
            check(&c, (Tol){T_EXACT, 0, 0}, ip, false);
            call_free(&c);
        }
}

static void test_softmax(int trials) {
    for (int log_form = 0; log_form <= 1; log_form++)
        for (int t = 0; t < trials; t++) {
            int64_t shape[4];
            uint32_t nd = random_shape(shape);
            if (nd == 0) nd = 1, shape[0] = 1 + next(30);
            Call c = {.op = log_form ? "nn.log_softmax" : "nn.softmax",
                      .op_id = log_form ? OP_ID_NN_LOG_SOFTMAX : OP_ID_NN_SOFTMAX,
                      .n_in = 1,
                      .n_out = 1};
            c.in[0] = random_f32(nd, shape, next(3) == 0);
            int64_t axis = next(2) ? -1 : (int64_t)next(nd);
            if (t % 29 == 3) axis = nd + 2; /* out of range: the reference's error */
            at_int(&c.at, "axis", axis);
            Tol tol = log_form ? (Tol){T_REL, 2e-6, 1e-6} : (Tol){T_REL, 4e-6, 1e-37};
            check(&c, tol, 0, false);
            call_free(&c);
        }
}

static void test_layer_norm(int trials) {
    for (int t = 0; t < trials; t++) {
        int64_t shape[4];
        uint32_t nd = random_shape(shape);
        if (nd == 0) nd = 1, shape[0] = 1 + next(30);
        int64_t axis = next(5) == 0 ? (int64_t)next(nd) : -1; /* another axis: the reference */
        int64_t ax = axis < 0 ? nd - 1 : axis, ch[1] = {shape[ax]};
        Call c = {.op = "nn.layer_norm", .op_id = OP_ID_NN_LAYER_NORM, .n_in = 3, .n_out = 1};
        c.in[0] = random_f32(nd, shape, next(4) == 0);
        float *p = fdata(c.in[0]);
        float shift = next(3) == 0 ? uniform(-50, 50) : 0; /* a mean far from 0 */
        for (int64_t i = 0; i < numel(c.in[0]); i++)
            p[i] += shift;
        c.in[1] = random_f32(1, ch, false);
        c.in[2] = random_f32(1, ch, false);
        at_int(&c.at, "axis", axis);
        at_float(&c.at, "epsilon", next(2) ? 1e-5 : 1e-3);
        at_int(&c.at, "center", next(4) != 0);
        at_int(&c.at, "scale", next(4) != 0);
        check(&c, (Tol){T_AFFINE, 2e-5, 0}, 0, false);
        call_free(&c);
    }
}

static void test_reduce(int trials) {
    static const struct {
        const char *name;
        uint32_t id;
    } ops[] = {{"sum", OP_ID_SUM}, {"mean", OP_ID_MEAN}, {"max", OP_ID_MAX}};
    for (size_t k = 0; k < RLY_ARRAY_LEN(ops); k++)
        for (int t = 0; t < trials; t++) {
            int64_t shape[4];
            uint32_t nd = random_shape(shape);
            if (next(10) == 0 && nd > 0) shape[0] = 1, shape[nd - 1] = 70000 + next(1000);
            Call c = {.op = ops[k].name, .op_id = ops[k].id, .n_in = 1, .n_out = 1};
            c.in[0] = random_f32(nd, shape, next(4) == 0);
            int64_t axes[4];
            uint32_t na = 0;
            switch (next(6)) {
            case 0: at_none(&c.at, "axis"); break;
            case 5: /* a middle run (a blocked layout's pool: mean over H, W of NCHW16c) */
                for (uint32_t d = nd > 1 ? 1 + next(nd - 1) : 0; d + 1 < nd && next(3); d++)
                    axes[na++] = d;
                at_ints(&c.at, "axis", na, axes);
                break;
            case 1: at_ints(&c.at, "axis", 0, axes); break; /* [] : every axis */
            case 2:
                if (nd > 0) axes[na++] = -1;
                at_ints(&c.at, "axis", na, axes);
                break;
            case 3: /* a trailing run */
                for (uint32_t d = next(nd + 1); d < nd; d++)
                    axes[na++] = d;
                at_ints(&c.at, "axis", na, axes);
                break;
            default: /* random axes (often not trailing: the reference), sometimes repeated */
                for (uint32_t d = 0; d < nd; d++)
                    if (next(2)) axes[na++] = next(4) == 0 ? (int64_t)d - nd : d;
                if (t % 37 == 0 && na > 0 && na < 4) axes[na++] = axes[0]; /* at most 4 */
                at_ints(&c.at, "axis", na, axes);
                break;
            }
            at_int(&c.at, "keepdims", next(2));
            at_int(&c.at, "exclude", next(6) == 0);
            bool is_max = ops[k].id == OP_ID_MAX;
            check(&c, is_max ? (Tol){T_EXACT, 0, 0} : (Tol){T_SCALED, 1e-5, 1e-30}, 0, !is_max);
            call_free(&c);
        }
    /* a blocked layout's global pool: the mean over H, W of (N, C/16, H, W, 16) as 4-D (the
     * 16-lane path at AVX-512), with NaN and infinities among the values */
    for (int t = 0; t < 8; t++) {
        int64_t shape[4] = {1 + next(5), 1 + next(9), 1 + next(60), 16}, axes[2] = {1, 2};
        Call c = {.op = t % 2 ? "sum" : "mean", .op_id = t % 2 ? OP_ID_SUM : OP_ID_MEAN};
        c.n_in = 1, c.n_out = 1;
        c.in[0] = random_f32(4, shape, t >= 6);
        at_ints(&c.at, "axis", 2, axes);
        at_int(&c.at, "keepdims", t % 3 == 0);
        at_int(&c.at, "exclude", 0);
        check(&c, (Tol){T_SCALED, 1e-5, 1e-30}, 0, true);
        call_free(&c);
    }
}

/* A random NCHW input (sometimes another rank or layout: the reference). big: planes up to 120
 * a side; wide: 24 to 150 columns (the pools' vectors, several per row). */
static Tensor *pool_input(int64_t *shape, bool big) {
    bool wide = !big && next(3) == 0;
    shape[0] = 1 + next(2);
    shape[1] = 1 + next(6);
    shape[2] = 1 + next(big ? 120 : wide ? 20 : 14);
    shape[3] = wide ? 24 + next(127) : 1 + next(big ? 120 : 14);
    if (next(25) == 0) shape[next(4)] = 0;
    Tensor *x = random_f32(4, shape, next(3) == 0);
    if (next(8) == 0) /* dense NaN and -inf: the max pools' skipping of both */
        for (int64_t i = 0; i < numel(x); i++) {
            uint32_t u = next(4);
            if (u < 2) fdata(x)[i] = u == 0 ? NAN : -INFINITY;
        }
    return x;
}

static void test_global_pool(int trials) {
    for (int is_max = 0; is_max <= 1; is_max++)
        for (int t = 0; t < trials; t++) {
            int64_t shape[4];
            Call c = {.op = is_max ? "nn.global_max_pool2d" : "nn.global_avg_pool2d",
                      .op_id = is_max ? OP_ID_NN_GLOBAL_MAX_POOL2D : OP_ID_NN_GLOBAL_AVG_POOL2D,
                      .n_in = 1,
                      .n_out = 1};
            c.in[0] = pool_input(shape, next(5) == 0);
            at_str(&c.at, "layout", t % 11 == 4 ? "NHWC" : "NCHW");
            at_str(&c.at, "out_layout", "");
            check(&c, is_max ? (Tol){T_EXACT, 0, 0} : (Tol){T_SCALED, 1e-5, 1e-30}, 0, !is_max);
            call_free(&c);
        }
}

static void test_pool(int trials) {
    for (int is_max = 0; is_max <= 1; is_max++)
        for (int t = 0; t < trials; t++) {
            int64_t shape[4];
            Call c = {.op = is_max ? "nn.max_pool2d" : "nn.avg_pool2d",
                      .op_id = is_max ? OP_ID_NN_MAX_POOL2D : OP_ID_NN_AVG_POOL2D,
                      .n_in = 1,
                      .n_out = 1};
            c.in[0] = pool_input(shape, next(6) == 0);
            int64_t k[2] = {1 + next(5), 1 + next(5)}, s[2] = {1 + next(3), 1 + next(3)};
            int64_t d[2] = {next(4) == 0 ? 2 + next(2) : 1, next(4) == 0 ? 2 + next(2) : 1};
            int64_t p[4] = {next(3), next(3), next(3), next(3)};
            if (next(8) == 0) p[next(4)] = 3 + next(3); /* more than half a window */
            if (next(3) == 0) k[1] = k[0], s[1] = s[0]; /* square, given as one value */
            at_ints(&c.at, "pool_size", k[0] == k[1] && next(2) ? 1 : 2, k);
            at_ints(&c.at, "strides", s[0] == s[1] && next(2) ? 1 : 2, s);
            at_ints(&c.at, "dilation", 2, d);
            uint32_t np = next(3) == 0 ? 2 : 4;
            if (t % 41 == 9) p[0] = -1;                /* the reference's error */
            if (t % 43 == 11) s[1] = (int64_t)1 << 40; /* huge attributes: the reference */
            if (t % 47 == 12) d[0] = (int64_t)1 << 40; /* (a window over the input: error) */
            at_ints(&c.at, "padding", np, p);
            at_str(&c.at, "layout", t % 13 == 6 ? "NHWC" : "NCHW");
            at_str(&c.at, "out_layout", "");
            at_int(&c.at, "ceil_mode", next(2));
            if (!is_max) at_int(&c.at, "count_include_pad", next(2));
            check(&c, is_max ? (Tol){T_EXACT, 0, 0} : (Tol){T_SCALED, 1e-5, 1e-30}, 0, !is_max);
            call_free(&c);
        }
}

/* The pools of the peer models on 1 and 2 threads at every level: 3x3 stride 2 with ceil_mode
 * (SqueezeNet: 111, 55, 27 onto 55, 27, 13), 3x3/2 padded (ResNet), 2x2/2 (VGG), and odd ones. */
static void test_pool_models(void) {
    static const int64_t cases[][8] = {
        /* c, h, w, k, s, pad, ceil, is_max */
        {64, 111, 111, 3, 2, 0, 1, 1}, {16, 55, 55, 3, 2, 0, 1, 1},  {32, 27, 27, 3, 2, 0, 1, 1},
        {8, 13, 13, 3, 2, 0, 1, 1},    {8, 112, 112, 3, 2, 1, 0, 1}, {4, 224, 224, 2, 2, 0, 0, 1},
        {3, 57, 61, 3, 3, 1, 1, 1},    {3, 40, 77, 5, 1, 2, 0, 1},   {5, 55, 55, 3, 2, 1, 1, 0},
        {3, 33, 71, 2, 2, 0, 1, 0},    {2, 19, 200, 4, 3, 1, 1, 0},  {2, 9, 17, 3, 1, 1, 0, 0},
    };
    for (size_t i = 0; i < RLY_ARRAY_LEN(cases); i++) {
        const int64_t *q = cases[i];
        bool is_max = q[7] != 0;
        Call c = {.op = is_max ? "nn.max_pool2d" : "nn.avg_pool2d",
                  .op_id = is_max ? OP_ID_NN_MAX_POOL2D : OP_ID_NN_AVG_POOL2D,
                  .n_in = 1,
                  .n_out = 1};
        int64_t shape[4] = {1, q[0], q[1], q[2]}, k[2] = {q[3], q[3]}, s[2] = {q[4], q[4]};
        int64_t d[2] = {1, 1}, p[4] = {q[5], q[5], q[5], q[5]};
        c.in[0] = random_f32(4, shape, i % 2 == 0);
        at_ints(&c.at, "pool_size", 2, k);
        at_ints(&c.at, "strides", 2, s);
        at_ints(&c.at, "dilation", 2, d);
        at_ints(&c.at, "padding", 4, p);
        at_str(&c.at, "layout", "NCHW");
        at_str(&c.at, "out_layout", "");
        at_int(&c.at, "ceil_mode", q[6]);
        if (!is_max) at_int(&c.at, "count_include_pad", (int64_t)(i % 2));
        check(&c, is_max ? (Tol){T_EXACT, 0, 0} : (Tol){T_SCALED, 1e-5, 1e-30}, 0, !is_max);
        call_free(&c);
    }
}

/* nn.conv2d 3x3 stride 1 on the shapes Winograd F(4x4, 3x3) takes at AVX-512 and AVX2 (16+
 * channels, 12+ outputs a side): odd planes of 12 to 60 (narrow ones, under 12 tiles a row, and
 * wide ones), padding 0 to 2 per side, batch 1 or 2; against the reference within 1e-5
 * sum |w||x| (docs/kernels.md), on 1 and 2 threads at every level (scalar: the im2col GEMM). */
/* One Winograd-eligible convolution (3x3, stride 1) of x (xs) by weights (ws) with padding pad
 * (top, left, bottom, right), at every level, 1 and 2 threads. */
static void winograd_case(const int64_t xs[4], const int64_t ws[4], const int64_t pad[4]) {
    Call c = {.op = "nn.conv2d", .op_id = OP_ID_NN_CONV2D, .n_in = 2, .n_out = 1};
    int64_t one[2] = {1, 1};
    c.in[0] = random_f32(4, xs, false);
    c.in[1] = random_f32(4, ws, false);
    at_ints(&c.at, "strides", 2, one);
    at_ints(&c.at, "padding", 4, pad);
    at_ints(&c.at, "dilation", 2, one);
    at_int(&c.at, "groups", 1);
    at_none(&c.at, "channels");
    at_none(&c.at, "kernel_size");
    at_str(&c.at, "data_layout", "NCHW");
    at_str(&c.at, "kernel_layout", "OIHW");
    at_str(&c.at, "out_layout", "");
    at_int(&c.at, "out_dtype", -1);
    check(&c, (Tol){T_SCALED, 1e-5, 1e-30}, 0, true);
    call_free(&c);
}

static void test_winograd(int trials) {
    for (int t = 0; t < trials; t++) {
        int64_t pad[4] = {next(3), next(3), next(3), next(3)};
        int64_t side = t % 3 == 0 ? 40 + next(21) : 10 + next(30);
        int64_t xs[4] = {1 + next(2), 16 + next(20), side, t % 5 == 0 ? 10 + next(51) : side};
        int64_t ws[4] = {16 + next(24), xs[1], 3, 3};
        winograd_case(xs, ws, pad);
    }
    /* winograd.c's two forms. Blocked (each thread's whole tile rows, blocks of up to 128 tiles
     * across tile rows and images): 16->64 at 55x55 takes blocks of 64 tiles (196 a plane: the
     * blocks of batch 2 on 1 thread span the two images, the last is partial; on 2 threads 7
     * tile rows each, 64 + 34), 32->128 at 27x27 blocks of 32 over 49-tile planes of 7 tiles a
     * row (narrow: through the d arrays), 58x23 and 30x61 mix both edges. Blocked by output
     * channels on 2 threads (too few tiles to split): 48->192 and 20->50 (parts of 24 and 26
     * channels). Three passes: 40->20 at 12x12 on 2 threads (more input channels than output
     * ones), and 200 channels each side (V and M of 32 tiles past 1.5 MiB); the same forms at
     * AVX2. */
    static const int64_t shapes[][6] = {/* batch, cin, h, w, cout, pad */
                                        {2, 16, 55, 55, 64, 1},  {2, 32, 27, 27, 128, 1},
                                        {1, 48, 13, 13, 192, 1}, {2, 24, 58, 23, 40, 0},
                                        {1, 17, 30, 61, 20, 2},  {1, 20, 14, 15, 50, 1},
                                        {1, 40, 12, 12, 20, 1},  {1, 200, 14, 14, 200, 1}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t *s = shapes[k];
        int64_t xs[4] = {s[0], s[1], s[2], s[3]}, ws[4] = {s[4], s[1], 3, 3};
        int64_t pad[4] = {s[5], s[5], s[5], s[5]};
        winograd_case(xs, ws, pad);
    }
}

static void test_batch_norm(int trials) {
    for (int t = 0; t < trials; t++) {
        int64_t shape[4];
        uint32_t nd = random_shape(shape);
        if (nd == 0) nd = 1, shape[0] = 1 + next(30);
        int64_t axis = next(3) == 0 ? -1 : (int64_t)next(nd), ax = axis < 0 ? nd - 1 : axis;
        int64_t ch[1] = {shape[ax]};
        Call c = {.op = "nn.batch_norm", .op_id = OP_ID_NN_BATCH_NORM, .n_in = 5, .n_out = 3};
        c.in[0] = random_f32(nd, shape, next(4) == 0);
        for (int i = 1; i < 5; i++) {
            c.in[i] = tensor_new(RLY_DTYPE_F32, 1, ch);
            for (int64_t e = 0; e < ch[0]; e++)
                fdata(c.in[i])[e] = i == 1   ? uniform(0.5f, 2)
                                    : i == 4 ? uniform(0.1f, 2)
                                             : uniform(-1, 1);
        }
        at_int(&c.at, "axis", axis);
        at_float(&c.at, "epsilon", 1e-5);
        at_int(&c.at, "center", next(4) != 0);
        at_int(&c.at, "scale", next(4) != 0);
        check(&c, (Tol){T_AFFINE, 2e-5, 0}, 0, false);
        call_free(&c);
    }
}

static void test_bias_add(int trials) {
    for (int t = 0; t < trials; t++) {
        int64_t shape[4];
        uint32_t nd = random_shape(shape);
        if (nd == 0) nd = 1, shape[0] = 1 + next(30);
        int64_t axis = next(2) ? 1 % (int64_t)nd : -1, ax = axis < 0 ? nd - 1 : axis;
        int64_t ch[1] = {shape[ax] + (t % 23 == 4)}; /* sometimes wrong: the reference's error */
        Call c = {.op = "nn.bias_add", .op_id = OP_ID_NN_BIAS_ADD, .n_in = 2, .n_out = 1};
        c.in[0] = random_f32(nd, shape, true);
        c.in[1] = random_f32(1, ch, true);
        at_int(&c.at, "axis", axis);
        check(&c, (Tol){T_EXACT, 0, 0}, 1, false);
        call_free(&c);
    }
}

/* ---- the unary math over the float range ------------------------------------------------------
 */

/* Max ulp error of each transcendental at each level over the floats with bit patterns
 * i * stride (i < 2^32 / stride); fails when over the bound. */
static void sweep(uint64_t stride, bool assert_bounds) {
    static const UnaryOp *ops[] = {&unary_ops[4], &unary_ops[5], &unary_ops[7], &unary_ops[8],
                                   &unary_ops[10]};
    enum { CHUNK = 1 << 20 };
    int64_t shape[1] = {CHUNK};
    for (size_t k = 0; k < RLY_ARRAY_LEN(ops); k++) {
        Call c = {.op = ops[k]->name, .op_id = ops[k]->id, .n_in = 1, .n_out = 1};
        c.in[0] = tensor_new(RLY_DTYPE_F32, 1, shape);
        int64_t worst[3] = {0, 0, 0};
        float worst_at[3] = {0, 0, 0};
        for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += CHUNK * stride) {
            uint32_t *bits = c.in[0]->data;
            for (uint32_t i = 0; i < CHUNK; i++)
                bits[i] = (uint32_t)(base + i * stride);
            Result want, got;
            run(kern_ref_lookup(c.op_id), &c, NULL, 0, &want);
            for (int lv = 0; lv <= (int)max_level; lv++) {
                sup_isa_force((SupIsa)lv);
                run(kern_fast_lookup(c.op_id), &c, pool2, 0, &got);
                const float *pw = want.out[0]->data, *pg = got.out[0]->data;
                for (uint32_t i = 0; i < CHUNK; i++) {
                    if (isnan(pw[i]) != isnan(pg[i])) {
                        worst[lv] = INT32_MAX;
                        worst_at[lv] = ((float *)c.in[0]->data)[i];
                    } else if (!isnan(pw[i]) && ulp_diff(pg[i], pw[i]) > worst[lv]) {
                        worst[lv] = ulp_diff(pg[i], pw[i]);
                        worst_at[lv] = ((float *)c.in[0]->data)[i];
                    }
                }
                result_free(&got);
            }
            result_free(&want);
        }
        sup_isa_force(max_level);
        for (int lv = 0; lv <= (int)max_level; lv++) {
            bool ok = worst[lv] <= (int64_t)ops[k]->tol.a;
            printf("%s %s: max error %" PRId64 " ulp (at %.9g) over 2^32/%" PRIu64 " floats%s\n",
                   ops[k]->name, level_name((SupIsa)lv), worst[lv], worst_at[lv], stride,
                   assert_bounds && !ok ? " FAIL" : "");
            if (!assert_bounds) continue;
            if (ok)
                n_pass++;
            else
                n_fail++;
        }
        call_free(&c);
    }
}

/* ---- timings (--bench, printed) ----------------------------------------------------------------
 */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The best of `reps` runs of fn on c (outputs allocated by the first and reused after). */
static double time_call(KernelFn fn, const Call *c, SupPool *pool, int reps) {
    Result r;
    run(fn, c, pool, 0, &r); /* warm up, and the outputs */
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        Result again;
        double t0 = now_s();
        run_into(fn, c, pool, 0, &again, &r);
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    result_free(&r);
    return best;
}

static void bench_one(Call *c, const char *what) {
    SupIsa lv = sup_isa_detected();
    double ref = time_call(kern_ref_lookup(c->op_id), c, NULL, 3);
    sup_isa_force(lv);
    double t1 = time_call(kern_fast_lookup(c->op_id), c, NULL, 200);
    double t2 = time_call(kern_fast_lookup(c->op_id), c, pool2, 200);
    printf("%-34s ref %9.1f us  fast (%s) 1 thread %8.1f us (x%.1f)  2 threads %8.1f us "
           "(x%.2f of 1)\n",
           what, ref * 1e6, sup_isa_name(lv), t1 * 1e6, ref / t1, t2 * 1e6, t1 / t2);
}

static void bench(void) {
    int64_t n1[1] = {1 << 20}, nchw[4] = {1, 64, 112, 112}, rows[2] = {1000, 1000};
    int64_t ln[2] = {512, 768}, ln_c[1] = {768}, g[4] = {1, 1280, 7, 7}, c3[3] = {64, 1, 1};
    static const UnaryOp *un[] = {&unary_ops[0], &unary_ops[5], &unary_ops[7], &unary_ops[8],
                                  &unary_ops[10]};
    for (size_t k = 0; k < RLY_ARRAY_LEN(un); k++) {
        Call c = {.op = un[k]->name, .op_id = un[k]->id, .n_in = 1, .n_out = 1};
        c.in[0] = random_f32(1, n1, false);
        char what[64];
        snprintf(what, sizeof what, "%s (2^20)", un[k]->name);
        bench_one(&c, what);
        call_free(&c);
    }
    Call add = {.op = "add", .op_id = OP_ID_ADD, .n_in = 2, .n_out = 1};
    add.in[0] = random_f32(1, n1, false);
    add.in[1] = random_f32(1, n1, false);
    bench_one(&add, "add (2^20, same shape)");
    call_free(&add);
    Call mul = {.op = "multiply", .op_id = OP_ID_MULTIPLY, .n_in = 2, .n_out = 1};
    mul.in[0] = random_f32(4, nchw, false);
    mul.in[1] = random_f32(3, c3, false);
    bench_one(&mul, "multiply (1,64,112,112)*(64,1,1)");
    call_free(&mul);
    Call sm = {.op = "nn.softmax", .op_id = OP_ID_NN_SOFTMAX, .n_in = 1, .n_out = 1};
    sm.in[0] = random_f32(2, rows, false);
    at_int(&sm.at, "axis", -1);
    bench_one(&sm, "nn.softmax (1000, 1000), axis -1");
    call_free(&sm);
    Call lnc = {.op = "nn.layer_norm", .op_id = OP_ID_NN_LAYER_NORM, .n_in = 3, .n_out = 1};
    lnc.in[0] = random_f32(2, ln, false);
    lnc.in[1] = random_f32(1, ln_c, false);
    lnc.in[2] = random_f32(1, ln_c, false);
    at_int(&lnc.at, "axis", -1);
    at_float(&lnc.at, "epsilon", 1e-5);
    at_int(&lnc.at, "center", 1);
    at_int(&lnc.at, "scale", 1);
    bench_one(&lnc, "nn.layer_norm (512, 768)");
    call_free(&lnc);
    Call mp = {.op = "nn.max_pool2d", .op_id = OP_ID_NN_MAX_POOL2D, .n_in = 1, .n_out = 1};
    mp.in[0] = random_f32(4, nchw, false);
    int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, one[2] = {1, 1}, p1[4] = {1, 1, 1, 1};
    at_ints(&mp.at, "pool_size", 2, k3);
    at_ints(&mp.at, "strides", 2, s2);
    at_ints(&mp.at, "dilation", 2, one);
    at_ints(&mp.at, "padding", 4, p1);
    at_str(&mp.at, "layout", "NCHW");
    at_str(&mp.at, "out_layout", "");
    at_int(&mp.at, "ceil_mode", 0);
    bench_one(&mp, "nn.max_pool2d 3x3/2 (1,64,112,112)");
    call_free(&mp);
    Call gp = {
        .op = "nn.global_avg_pool2d", .op_id = OP_ID_NN_GLOBAL_AVG_POOL2D, .n_in = 1, .n_out = 1};
    gp.in[0] = random_f32(4, g, false);
    at_str(&gp.at, "layout", "NCHW");
    at_str(&gp.at, "out_layout", "");
    bench_one(&gp, "nn.global_avg_pool2d (1,1280,7,7)");
    call_free(&gp);
    Call sum = {.op = "sum", .op_id = OP_ID_SUM, .n_in = 1, .n_out = 1};
    sum.in[0] = random_f32(1, n1, false);
    at_none(&sum.at, "axis");
    at_int(&sum.at, "keepdims", 0);
    at_int(&sum.at, "exclude", 0);
    bench_one(&sum, "sum (2^20), all axes");
    call_free(&sum);
}

int main(int argc, char **argv) {
    int trials = 300;
    uint64_t ulp_stride = 0;
    bool timings = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--bench") == 0)
            timings = true;
        else if (strcmp(argv[i], "--ulp-all") == 0)
            ulp_stride = 1;
        else if (strcmp(argv[i], "--ulp-stride") == 0 && i + 1 < argc)
            ulp_stride = strtoull(argv[++i], NULL, 10);
        else
            trials = atoi(argv[i]);
    }
    unsetenv("RLY_KERNELS"); /* the fast kernels must be on (before the first lookup) */
    const char *seed = getenv("RLY_SEED");
    rng = seed ? strtoull(seed, NULL, 10) : 0x853c49e6748fea9bull;
    if (rng == 0) rng = 1;
    printf("seed %" PRIu64 " (RLY_SEED=N replays)\n", rng);
    max_level = sup_isa_detected();
    pool2 = sup_pool_new(2);
    if (timings) {
        bench();
        sup_pool_free(pool2);
        return 0;
    }
    if (ulp_stride > 0) {
        sweep(ulp_stride, false);
        sup_pool_free(pool2);
        return 0;
    }
    test_unary(trials);
    test_clip(trials);
    test_binary(trials);
    test_softmax(trials);
    test_layer_norm(trials);
    test_reduce(trials);
    test_global_pool(trials);
    test_pool(trials);
    test_pool_models();
    test_winograd(trials / 10 + 1);
    test_batch_norm(trials);
    test_bias_add(trials);
    sweep(1024, true);
    sup_pool_free(pool2);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}
