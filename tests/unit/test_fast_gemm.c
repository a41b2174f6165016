/* test_fast_gemm.c - the packed SGEMM (src/kernels/fast/gemm.h) and the GEMM-based fast kernels
 * (nn.dense, nn.matmul, nn.batch_matmul, nn.conv2d) against references, on random shapes.
 *
 *   - kern_sgemm_run against a double-precision product: strides of every transposition, batches
 *     with broadcast (mod) operands, operands packed beforehand, accumulate, a bias+relu
 *     epilogue, every tail 1..33 of m and n, k = 0 and 1, depths across the K blocks, products
 *     of 1 to 3 rows (the GEMV path) with odd n and k, A packed by the tasks, narrow and deep
 *     products (K blocks split over the threads); and the same bits on 1 and 2 threads (3 too
 *     for the K split; results do not depend on the thread count);
 *   - each fast kernel against its reference kernel (kern_ref_lookup) on the same inputs: odd
 *     sizes, empty dims, transposes, broadcast batches, conv strides, padding (1, 2, 4 values),
 *     dilation, groups, depthwise with multipliers, 1x1; the fast kernel's output preallocated and
 *     filled with NaN (as the VM's planned buffers are not zeroed); calls the fast kernels do not
 *     cover (float64, NHWC) must give the reference's bits;
 * all at every ISA level the CPU has (sup_isa_force), on no pool and a 2-thread pool, with and
 * without constant weights and a KPrepCache (packed once: the cache does not grow on a second
 * call). Tolerance: |fast - ref| <= 1e-5 * sum |a||b| per output element (the reference kernel
 * run on |inputs| gives that magnitude; for nn.conv2d, the largest such magnitude within 3 outputs
 * in the plane, as Winograd's 4 x 4 output tiles share their error). Seed: RLY_SEED (printed);
 * `N passed, N failed`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "kernels/fast/gemm.h"

#define TOL 1e-5

static uint64_t rng;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}
static float frand(void) { return (float)rnd(2000001) / 1000000.0f - 1.0f; }

/* The configuration under test, for messages. */
static const char *cfg_isa;
static int cfg_threads, cfg_const;
static double cfg_tol = TOL; /* gemm_case's tolerance */

/* ---- tensors ----------------------------------------------------------------------------------
 */

typedef struct Tensor {
    DLTensor t;
    int64_t shape[8];
} Tensor;

static DLTensor *tensor_new(rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    Tensor *x = calloc(1, sizeof *x);
    memcpy(x->shape, shape, ndim * sizeof(int64_t));
    x->t.ndim = (int32_t)ndim;
    x->t.shape = x->shape;
    x->t.dtype = k_dl_dtype(dt);
    x->t.data = calloc((size_t)k_shape_numel(ndim, shape) + 1, sup_dtype_size(dt));
    return &x->t;
}

static void tensor_free(DLTensor *t) {
    if (t == NULL) return;
    free(t->data);
    free(t);
}

static DLTensor *tensor_rand(rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    DLTensor *t = tensor_new(dt, ndim, shape);
    for (int64_t i = 0; i < k_numel(t); i++)
        k_storef(t->data, dt, i, frand());
    return t;
}

static DLTensor *tensor_abs(const DLTensor *src) {
    DLTensor *t = tensor_new(k_dtype(src), (uint32_t)src->ndim, src->shape);
    for (int64_t i = 0; i < k_numel(t); i++)
        k_storef(t->data, k_dtype(t), i, fabs(k_loadf(src->data, k_dtype(src), i)));
    return t;
}

/* Constants live as long as the prep cache that keys on their address (as in an executable):
 * with a cache, operands are freed only after it. */
static DLTensor *kept[4096];
static int n_kept;
static void operand_free(DLTensor *t, const KPrepCache *prep) {
    if (prep != NULL && n_kept < 4096)
        kept[n_kept++] = t;
    else
        tensor_free(t);
}
static void prep_free(KPrepCache *prep) {
    k_prep_cache_free(prep);
    while (n_kept > 0)
        tensor_free(kept[--n_kept]);
}

static int alloc_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    kc->out[i] = tensor_new(dt, ndim, shape);
    return 0;
}

/* ---- calls ------------------------------------------------------------------------------------
 */

typedef struct Call {
    const char *op;
    uint32_t op_id;
    KAttr attrs[12];
    uint32_t n_attrs;
    int64_t ints[6][4]; /* storage for list attributes */
    double floats[6][4];
    uint32_t n_lists;
} Call;

static void attr_int(Call *c, const char *name, int64_t v) {
    c->attrs[c->n_attrs++] = (KAttr){.name = name, .kind = KA_INT, .i = v, .f = (double)v};
}
static void attr_none(Call *c, const char *name) {
    c->attrs[c->n_attrs++] = (KAttr){.name = name, .kind = KA_NONE};
}
static void attr_str(Call *c, const char *name, const char *s) {
    c->attrs[c->n_attrs++] = (KAttr){.name = name, .kind = KA_STR, .s = s};
}
static void attr_ints(Call *c, const char *name, uint32_t n, const int64_t *v) {
    uint32_t l = c->n_lists++;
    for (uint32_t i = 0; i < n; i++)
        c->ints[l][i] = v[i], c->floats[l][i] = (double)v[i];
    c->attrs[c->n_attrs++] =
        (KAttr){.name = name, .kind = KA_INTS, .n = n, .ints = c->ints[l], .floats = c->floats[l]};
}

#define CLIP_LO (-0.5f)
#define CLIP_HI 0.25f

/* The fused tail under test (KCall.epi): res = relu(out0 + 1), each element counted; or, offered
 * as a clamp (KEpilogue.clamp), res = relu(out0) or clip(out0, -0.5, 0.25), which a kernel may
 * apply itself into res; or offered as a bias (KEpilogue.bias, as the VM offers one), res =
 * clip(out0 + b) or b + out0, b per channel (a convolution's dim 1, a product's last dim). */
typedef struct Tail {
    bool decline;  /* begin refuses */
    uint8_t clamp; /* K_CLAMP_* */
    int bias;      /* 0 none; 1 clip(x + b); 2 b + x; 3 clip(r + (x + b)), r a residual */
    bool conv;     /* the call is a convolution (NCHW: channels along dim 1) */
    KEpilogue *epi;
    int begun;
    const float *out0;
    float *res;
    uint8_t *seen;
    float *b;            /* the bias, one per channel */
    float *r;            /* bias 3's residual, of the output's shape */
    int64_t run, n_chan; /* element i's channel: (i / run) % n_chan */
} Tail;

static int tail_begin(void *ctx, const DLTensor *out0) {
    Tail *t = ctx;
    t->begun++;
    if (t->decline || k_dtype(out0) != RLY_DTYPE_F32) return -1;
    t->out0 = out0->data;
    t->res = calloc((size_t)k_numel(out0) + 1, sizeof(float));
    t->seen = calloc((size_t)k_numel(out0) + 1, 1);
    if (t->clamp) t->epi->clamp_out = t->res;
    if (t->bias && out0->ndim >= (t->conv ? 2 : 1)) {
        uint32_t d = t->conv ? 1 : (uint32_t)out0->ndim - 1;
        t->n_chan = out0->shape[d];
        t->run = 1;
        for (uint32_t i = d + 1; i < (uint32_t)out0->ndim; i++)
            t->run *= out0->shape[i];
        t->b = calloc((size_t)t->n_chan + 1, sizeof(float));
        for (int64_t i = 0; i < t->n_chan; i++)
            t->b[i] = (float)((i * 7) % 11) * 0.1f - 0.5f;
        if (t->bias == 3) {
            t->r = calloc((size_t)k_numel(out0) + 1, sizeof(float));
            for (int64_t i = 0; i < k_numel(out0); i++)
                t->r[i] = (float)((i * 13) % 17) * 0.05f - 0.4f;
        }
        t->epi->bias =
            (KBias){t->b,    1u << d,      t->bias == 2, t->bias == 2 ? K_CLAMP_NONE : K_CLAMP_CLIP,
                    CLIP_LO, CLIP_HI,      t->run,       t->n_chan,
                    t->r,    t->bias == 3, false};
        t->epi->clamp_out = t->res;
    }
    return 0;
}

/* The tail's value of output element v: relu gives 0 for NaN and -0, clip keeps NaN. */
static float tail_value(uint8_t clamp, float v) {
    if (clamp == K_CLAMP_CLIP)
        return isnan(v) ? v : v < CLIP_LO ? CLIP_LO : v > CLIP_HI ? CLIP_HI : v;
    if (clamp == K_CLAMP_NONE) v += 1;
    return v > 0 ? v : 0;
}

/* The tail of element i whose product value is v. */
static float tail_of(const Tail *t, int64_t i, float v) {
    if (t->bias == 0 || t->b == NULL) return tail_value(t->clamp, v);
    float b = t->b[i / t->run % t->n_chan];
    if (t->bias == 3) return tail_value(K_CLAMP_CLIP, t->r[i] + (v + b));
    return t->bias == 2 ? b + v : tail_value(K_CLAMP_CLIP, v + b);
}

static void tail_apply(void *ctx, int64_t flat0, int64_t n) {
    Tail *t = ctx;
    for (int64_t i = flat0; i < flat0 + n; i++) {
        t->res[i] = tail_of(t, i, t->out0[i]);
        t->seen[i]++;
    }
}

static void tail_apply2(void *ctx, int64_t flat0, int64_t rows, int64_t cols, int64_t ld) {
    for (int64_t i = 0; i < rows; i++)
        tail_apply(ctx, flat0 + i * ld, cols);
}

static const KEpilogue *run_epi; /* the next run's KCall.epi */
static bool run_epi_done;        /* its KCall.epi_done */

/* Run fn on (x, w). out: preallocated (NaN-filled) or NULL. Returns the result (owned; the
 * preallocated one when given) or NULL with err set. */
static DLTensor *run(KernelFn fn, const Call *c, const DLTensor *x, const DLTensor *w,
                     DLTensor *out, SupPool *pool, bool w_const, KPrepCache *prep, char *err,
                     size_t cap) {
    uint32_t arg_start[2] = {0, 1}, arg_len[2] = {1, 1};
    uint8_t arg_tuple[2] = {0, 0}, in_const[2] = {0, w_const};
    const DLTensor *in[2] = {x, w};
    DLTensor *o = out;
    KCall kc = {.op = c->op,
                .attrs = c->attrs,
                .n_attrs = c->n_attrs,
                .n_args = 2,
                .arg_start = arg_start,
                .arg_len = arg_len,
                .arg_tuple = arg_tuple,
                .in = in,
                .n_in = 2,
                .out = &o,
                .n_out = 1,
                .alloc = alloc_out,
                .err = err,
                .err_cap = cap,
                .pool = pool,
                .in_const = w_const ? in_const : NULL,
                .prep = prep,
                .epi = run_epi};
    err[0] = '\0';
    int rc = fn(&kc);
    run_epi_done = kc.epi_done;
    k_call_release(&kc);
    if (rc != 0) {
        if (o != out) tensor_free(o);
        return NULL;
    }
    return o;
}

/* The fast kernel with a fused tail: it takes it (epi_done) on every call it covers that has
 * elements, applies it to each element once after its value is final (res = relu(out0 + 1) of
 * the result `got` of the same call), and never when begin declines. */
static void check_tail(const Call *c, const DLTensor *x, const DLTensor *w, const DLTensor *got,
                       SupPool *pool, bool w_const, KPrepCache *prep, const char *what) {
    bool covered = k_dtype(x) == RLY_DTYPE_F32 && k_dtype(w) == RLY_DTYPE_F32 &&
                   strncmp(what, "conv NHWC", 9) != 0 && k_numel(got) > 0;
    /* the data with NaNs, and its tail-less result: the clamps' NaN rules */
    DLTensor *xn = NULL, *got_n = NULL;
    if (k_dtype(x) == RLY_DTYPE_F32 && k_numel(x) > 0) {
        xn = tensor_new(RLY_DTYPE_F32, (uint32_t)x->ndim, x->shape);
        memcpy(xn->data, x->data, (size_t)k_numel(x) * sizeof(float));
        for (int q = 0; q < 3; q++)
            ((float *)xn->data)[(int64_t)rnd(1u << 30) % k_numel(x)] = NAN;
        char e[256];
        got_n = run(kern_fast_lookup(c->op_id), c, xn, w, NULL, pool, w_const, prep, e, sizeof e);
    }
    /* decline 2: taken, by 2-D blocks (apply2); 3, 4: a relu, a clip offered as a clamp; 5, 6:
     * the same on data with NaNs; 7, 8: a bias then a clip, a bias first, offered as a bias;
     * 9: a bias, a residual and a clip, offered as a bias with KBias.res */
    for (int decline = 0; decline < 10; decline++) {
        bool nan_in = decline == 5 || decline == 6;
        if (nan_in && got_n == NULL) break;
        const DLTensor *xd = nan_in ? xn : x, *gd = nan_in ? got_n : got;
        Tail t = {.decline = decline == 1,
                  .clamp = decline == 3 || decline == 5   ? K_CLAMP_RELU
                           : decline == 4 || decline == 6 ? K_CLAMP_CLIP
                                                          : K_CLAMP_NONE,
                  .bias = decline == 7   ? 1
                          : decline == 8 ? 2
                          : decline == 9 ? 3
                                         : 0,
                  .conv = strcmp(c->op, "nn.conv2d") == 0};
        KEpilogue epi = {tail_begin, tail_apply,   decline == 2 ? tail_apply2 : NULL,
                         &t,         K_CLAMP_NONE, 0,
                         0,          NULL,         {0}};
        t.epi = &epi;
        epi.clamp = t.clamp;
        epi.lo = CLIP_LO, epi.hi = CLIP_HI;
        char err[256];
        run_epi = &epi;
        DLTensor *o =
            run(kern_fast_lookup(c->op_id), c, xd, w, NULL, pool, w_const, prep, err, sizeof err);
        run_epi = NULL;
        bool ok = o != NULL && run_epi_done == (covered && decline != 1);
        int64_t bad = -1;
        /* a clamp the kernel took itself: res holds relu of the product (the same bits as `got`,
         * the tail-less run of this configuration), nothing went through apply, output 0 is
         * unwritten */
        bool self = (t.clamp || t.bias) && run_epi_done && t.seen != NULL;
        for (int64_t i = 0; self && i < k_numel(o); i++)
            self = t.seen[i] == 0;
        for (int64_t i = 0; ok && t.res && i < k_numel(o) && bad < 0; i++) {
            float v = tail_of(&t, i, self ? ((const float *)gd->data)[i] : ((float *)o->data)[i]);
            bool same = t.res[i] == v || (isnan(t.res[i]) && isnan(v));
            if (run_epi_done ? t.seen[i] != !self || !same : t.seen[i] != 0) bad = i;
        }
        CHECK(ok && bad < 0 && (!run_epi_done || t.begun == 1),
              "%s %s [%s, %d thr, const %d]: fused tail (decline %d): done %d, begun %d, "
              "element %lld",
              c->op, what, cfg_isa, cfg_threads, cfg_const, decline, run_epi_done, t.begun,
              (long long)bad);
        free(t.res), free(t.seen), free(t.b), free(t.r);
        tensor_free(o);
    }
    tensor_free(xn), tensor_free(got_n);
}

#define WINO_NEAR 3

/* The largest value of the NCHW float32 tensor t within WINO_NEAR rows and columns of element i
 * in its plane. */
static double near_max(const DLTensor *t, int64_t i) {
    int64_t h = t->shape[2], w = t->shape[3], y = i / w % h, x = i % w, base = i - y * w - x;
    double m = 0;
    for (int64_t yy = y - WINO_NEAR; yy <= y + WINO_NEAR; yy++)
        for (int64_t xx = x - WINO_NEAR; xx <= x + WINO_NEAR; xx++)
            if (yy >= 0 && yy < h && xx >= 0 && xx < w)
                m = fmax(m, k_loadf(t->data, k_dtype(t), base + yy * w + xx));
    return m;
}

/* The fast kernel against the reference on (x, w): same success, and within tolerance. */
static void compare(const Call *c, const DLTensor *x, const DLTensor *w, SupPool *pool,
                    bool w_const, KPrepCache *prep, const char *what) {
    char e1[256], e2[256];
    KernelFn ref = kern_ref_lookup(c->op_id), fast = kern_fast_lookup(c->op_id);
    CHECK(fast != NULL, "%s: no fast kernel", c->op);
    if (fast == NULL) return;
    DLTensor *want = run(ref, c, x, w, NULL, NULL, false, NULL, e1, sizeof e1);
    DLTensor *pre = NULL;
    if (want != NULL) { /* a preallocated result full of NaN */
        pre = tensor_new(k_dtype(want), (uint32_t)want->ndim, want->shape);
        for (int64_t i = 0; i < k_numel(pre); i++)
            k_storef(pre->data, k_dtype(pre), i, NAN);
    }
    DLTensor *got = run(fast, c, x, w, pre, pool, w_const, prep, e2, sizeof e2);
    CHECK((want == NULL) == (got == NULL), "%s %s [%s, %d thr, const %d]: ref %s, fast %s", c->op,
          what, cfg_isa, cfg_threads, cfg_const, want ? "ok" : e1, got ? "ok" : e2);
    if (want != NULL && got != NULL) {
        DLTensor *xa = tensor_abs(x), *wa = tensor_abs(w);
        DLTensor *mag = run(ref, c, xa, wa, NULL, NULL, false, NULL, e1, sizeof e1);
        rly_dtype dt = k_dtype(want);
        bool exact = dt != RLY_DTYPE_F32 || k_dtype(x) != RLY_DTYPE_F32 ||
                     k_dtype(w) != RLY_DTYPE_F32; /* not covered: the reference itself */
        int64_t bad = -1;
        double worst = 0;
        /* nn.conv2d's (NCHW) bound takes the largest magnitude within WINO_NEAR outputs in the
         * plane: Winograd computes 4 x 4 outputs from one 6 x 6 input tile whose transforms mix
         * them, so an output's error follows its tile's magnitude, not only its own (an output
         * at a padded corner, a third of its neighbours' magnitude, erred by 1.1-1.4e-5 of its
         * own at RLY_SEED=4, 11, 12) */
        bool plane = c->op_id == OP_ID_NN_CONV2D && want->ndim == 4 && mag != NULL;
        for (int64_t i = 0; i < k_numel(want); i++) {
            double a = k_loadf(want->data, dt, i), b = k_loadf(got->data, dt, i);
            double m = mag ? k_loadf(mag->data, dt, i) : 0;
            if (plane) m = near_max(mag, i);
            double d = fabs(a - b);
            if (exact ? !(a == b || (isnan(a) && isnan(b))) : !(d <= TOL * m + 1e-30)) {
                if (bad < 0) bad = i;
                if (d > worst) worst = d;
            }
        }
        CHECK(bad < 0 && k_same_shape(want, got),
              "%s %s [%s, %d thr, const %d]: element %lld differs (ref %g, fast %g, worst %g)",
              c->op, what, cfg_isa, cfg_threads, cfg_const, (long long)bad,
              bad >= 0 ? k_loadf(want->data, dt, bad) : 0,
              bad >= 0 ? k_loadf(got->data, dt, bad) : 0, worst);
        tensor_free(xa), tensor_free(wa), tensor_free(mag);
    }
    if (got != NULL) check_tail(c, x, w, got, pool, w_const, prep, what);
    tensor_free(want);
    tensor_free(got);
}

/* ---- operator cases ---------------------------------------------------------------------------
 */

static int64_t pick_dim(void) {
    static const int64_t dims[] = {1, 2, 3, 5, 7, 11, 12, 13, 16, 17, 31, 32, 33, 47, 64, 100};
    return rnd(12) == 0 ? 0 : dims[rnd(sizeof dims / sizeof dims[0])];
}

static void case_dense(SupPool *pool, bool cst, KPrepCache *prep) {
    Call c = {.op = "nn.dense", .op_id = OP_ID_NN_DENSE};
    int64_t k = rnd(8) == 0 ? 600 : pick_dim(), units = pick_dim();
    if (rnd(6) == 0) units = 400;
    uint32_t rank = 1 + rnd(3);
    int64_t xs[3] = {pick_dim(), rnd(2) ? 1 : pick_dim(), k}, ws[2] = {units, k};
    xs[rank - 1] = k;
    if (rnd(3) == 0)
        attr_int(&c, "units", units);
    else
        attr_none(&c, "units");
    attr_int(&c, "out_dtype", rnd(4) == 0 ? RLY_DTYPE_F32 : -1);
    DLTensor *x = tensor_rand(RLY_DTYPE_F32, rank, xs), *w = tensor_rand(RLY_DTYPE_F32, 2, ws);
    compare(&c, x, w, pool, cst, prep, "dense");
    operand_free(x, prep), operand_free(w, prep);
}

/* nn.dense of 1 to 3 rows (batch-1 dense, an RNN step): the GEMV path with constant weights. */
static void case_dense_rows(SupPool *pool, bool cst, KPrepCache *prep, int64_t m) {
    static const int64_t units[] = {1, 33, 257, 768, 1024}, ks[] = {3, 37, 256, 259};
    Call c = {.op = "nn.dense", .op_id = OP_ID_NN_DENSE};
    attr_none(&c, "units");
    attr_int(&c, "out_dtype", -1);
    int64_t k = ks[rnd(4)], xs[2] = {m, k}, ws[2] = {units[rnd(5)], k};
    DLTensor *x = tensor_rand(RLY_DTYPE_F32, 2, xs), *w = tensor_rand(RLY_DTYPE_F32, 2, ws);
    compare(&c, x, w, pool, cst, prep, "dense rows");
    operand_free(x, prep), operand_free(w, prep);
}

static void case_matmul(SupPool *pool, bool cst, KPrepCache *prep) {
    Call c = {.op = "nn.matmul", .op_id = OP_ID_NN_MATMUL};
    bool ta = rnd(2), tb = rnd(2);
    int64_t k = rnd(8) == 0 ? 530 : pick_dim(), units = pick_dim(), m = pick_dim();
    uint32_t rank = ta ? 2 + rnd(2) : 1 + rnd(3);
    int64_t xs[3], ws[2] = {tb ? units : k, tb ? k : units};
    for (uint32_t i = 0; i < rank; i++)
        xs[i] = 1 + rnd(3);
    if (ta)
        xs[rank - 2] = k, xs[rank - 1] = m;
    else
        xs[rank - 1] = k;
    attr_none(&c, "units");
    attr_int(&c, "out_dtype", -1);
    attr_int(&c, "transpose_a", ta);
    attr_int(&c, "transpose_b", tb);
    DLTensor *x = tensor_rand(RLY_DTYPE_F32, rank, xs), *w = tensor_rand(RLY_DTYPE_F32, 2, ws);
    compare(&c, x, w, pool, cst, prep, ta ? (tb ? "matmul TT" : "matmul TN") : tb ? "NT" : "NN");
    operand_free(x, prep), operand_free(w, prep);
}

static void case_batch_matmul(SupPool *pool, bool cst, KPrepCache *prep) {
    Call c = {.op = "nn.batch_matmul", .op_id = OP_ID_NN_BATCH_MATMUL};
    bool ta = rnd(2), tb = rnd(2);
    int64_t b = 1 + rnd(4), m = pick_dim(), n = pick_dim(), k = pick_dim();
    int64_t bx = rnd(4) == 0 ? 1 : b, by = rnd(4) == 0 ? 1 : b;
    int64_t xs[3] = {bx, ta ? k : m, ta ? m : k}, ys[3] = {by, tb ? n : k, tb ? k : n};
    attr_int(&c, "out_dtype", -1);
    attr_int(&c, "transpose_a", ta);
    attr_int(&c, "transpose_b", tb);
    DLTensor *x = tensor_rand(RLY_DTYPE_F32, 3, xs), *y = tensor_rand(RLY_DTYPE_F32, 3, ys);
    compare(&c, x, y, pool, cst, prep, "batch_matmul");
    operand_free(x, prep), operand_free(y, prep);
}

static void conv_attrs(Call *c, int64_t sh, int64_t sw, int np, const int64_t *pad, int64_t dh,
                       int64_t dw, int64_t groups, const char *dl, const char *kl) {
    int64_t s[2] = {sh, sw}, d[2] = {dh, dw};
    attr_ints(c, "strides", sh == sw && rnd(2) ? 1 : 2, s);
    attr_ints(c, "padding", (uint32_t)np, pad);
    attr_ints(c, "dilation", dh == dw && rnd(2) ? 1 : 2, d);
    attr_int(c, "groups", groups);
    attr_none(c, "channels");
    attr_none(c, "kernel_size");
    attr_str(c, "data_layout", dl);
    attr_str(c, "kernel_layout", kl);
    attr_str(c, "out_layout", "");
    attr_int(c, "out_dtype", -1);
}

static void case_conv2d(SupPool *pool, bool cst, KPrepCache *prep) {
    Call c = {.op = "nn.conv2d", .op_id = OP_ID_NN_CONV2D};
    /* 0 general, 1 grouped, 2 depthwise, 3 1x1, 4 Winograd's shapes, 5 the direct path's */
    int kind = (int)rnd(6);
    int64_t groups = kind == 1 ? 1 + rnd(4) : 1, n = 1 + rnd(2);
    int64_t cin_g = 1 + rnd(kind == 0 ? 9 : 4), cout_g = 1 + rnd(kind == 0 ? 40 : 9);
    if (kind == 0 && rnd(4) == 0) cout_g = 70;
    int64_t cin = groups * cin_g, h = 1 + rnd(20), w = 1 + rnd(20);
    int64_t kh = 1 + rnd(4), kw = 1 + rnd(4), sh = 1 + rnd(3), sw = 1 + rnd(3), dh = 1 + rnd(2),
            dw = 1 + rnd(2);
    int64_t pad[4] = {rnd(3), rnd(3), rnd(3), rnd(3)};
    int np = rnd(3) == 0 ? 1 : rnd(2) ? 2 : 4;
    int64_t w0 = groups * cout_g, w1 = cin_g;
    if (kind == 2) { /* groups == channels, weight (C, M, kh, kw) */
        cin = groups = 1 + rnd(12);
        w0 = cin, w1 = 1 + rnd(3);
        if (rnd(2)) { /* 3x3, stride 1 or 2: the AVX-512 code that reads the input in place */
            kh = kw = 3, dh = dw = 1, sh = sw = 1 + rnd(2);
            h = 1 + rnd(40), w = 1 + rnd(40);
        }
    }
    if (kind == 3) {
        kh = kw = sh = sw = 1, pad[0] = pad[1] = pad[2] = pad[3] = 0;
        h = 1 + rnd(40), w = 1 + rnd(40);
    }
    if (kind == 4) { /* 3x3, stride 1, one group, 16+ channels, 12+ outputs a side */
        kh = kw = 3, sh = sw = dh = dw = 1;
        cin = w1 = 16 + rnd(9), w0 = 16 + rnd(17);
        h = 10 + rnd(12), w = 10 + rnd(12);
    }
    if (kind == 5) { /* 16+ outputs and 64+ taps per group: every tile size, stride, dilation */
        groups = 1 + rnd(2);
        cin_g = 4 + rnd(13), cout_g = 16 + rnd(70);
        kh = 2 + rnd(3), kw = 3 + rnd(3);
        cin = groups * cin_g, w0 = groups * cout_g, w1 = cin_g;
        h = 4 + rnd(30), w = 4 + rnd(30);
        if (rnd(3) == 0) { /* 1x1, stride 1, unpadded, on a small plane: direct, not the GEMM */
            cin_g = 64 + rnd(200), cin = groups * cin_g, w1 = cin_g;
            kh = kw = sh = sw = 1, pad[0] = pad[1] = pad[2] = pad[3] = 0;
            h = 1 + rnd(11), w = 1 + rnd(11);
        }
    }
    if (rnd(10) == 0) h = 0; /* an empty result (or an error: kernel larger than input) */
    conv_attrs(&c, sh, sw, np, pad, dh, dw, groups, "NCHW", "OIHW");
    int64_t xs[4] = {n, cin, h, w}, ws[4] = {w0, w1, kh, kw};
    DLTensor *x = tensor_rand(RLY_DTYPE_F32, 4, xs), *wt = tensor_rand(RLY_DTYPE_F32, 4, ws);
    static const char *const names[] = {"conv general", "conv grouped",  "conv depthwise",
                                        "conv 1x1",     "conv winograd", "conv direct"};
    compare(&c, x, wt, pool, cst, prep, names[kind]);
    operand_free(x, prep), operand_free(wt, prep);
}

/* Calls the fast kernels hand to the reference kernel: float64, NHWC, a bad shape. */
static void case_uncovered(SupPool *pool, bool cst, KPrepCache *prep) {
    Call c = {.op = "nn.dense", .op_id = OP_ID_NN_DENSE};
    attr_none(&c, "units");
    attr_int(&c, "out_dtype", -1);
    int64_t xs[2] = {3, 5}, ws[2] = {4, 5}, bad[2] = {4, 6};
    DLTensor *x = tensor_rand(RLY_DTYPE_F64, 2, xs), *w = tensor_rand(RLY_DTYPE_F64, 2, ws);
    compare(&c, x, w, pool, cst, prep, "dense f64");
    operand_free(x, prep), operand_free(w, prep);
    x = tensor_rand(RLY_DTYPE_F32, 2, xs), w = tensor_rand(RLY_DTYPE_F32, 2, bad);
    compare(&c, x, w, pool, cst, prep, "dense bad k"); /* both fail */
    operand_free(x, prep), operand_free(w, prep);

    Call cv = {.op = "nn.conv2d", .op_id = OP_ID_NN_CONV2D};
    int64_t pad[1] = {1};
    conv_attrs(&cv, 1, 1, 1, pad, 1, 1, 1, "NHWC", "HWIO");
    int64_t cxs[4] = {1, 6, 5, 3}, cws[4] = {3, 3, 3, 4};
    x = tensor_rand(RLY_DTYPE_F32, 4, cxs), w = tensor_rand(RLY_DTYPE_F32, 4, cws);
    compare(&cv, x, w, pool, cst, prep, "conv NHWC");
    operand_free(x, prep), operand_free(w, prep);
}

/* A constant weight is packed once: the first call fills the cache with at least `bytes`, a
 * second call leaves it as it was and gives the same bits. */
static void packed_once(const Call *c, const DLTensor *x, const DLTensor *w, SupPool *pool,
                        size_t bytes) {
    KPrepCache *prep = k_prep_cache_new();
    char err[256];
    DLTensor *o1 = run(kern_fast_lookup(c->op_id), c, x, w, NULL, pool, true, prep, err, 256);
    size_t after1 = k_prep_cache_bytes(prep);
    DLTensor *o2 = run(kern_fast_lookup(c->op_id), c, x, w, NULL, pool, true, prep, err, 256);
    CHECK(o1 && o2 && after1 >= bytes && k_prep_cache_bytes(prep) == after1 &&
              memcmp(o1->data, o2->data, (size_t)k_numel(o1) * sizeof(float)) == 0,
          "%s packed once: %zu (want >= %zu) then %zu bytes", c->op, after1, bytes,
          k_prep_cache_bytes(prep));
    tensor_free(o1), tensor_free(o2);
    k_prep_cache_free(prep);
}

/* A one-row product whose constant weight is 16 MiB or more reads it in place (rowdot): the
 * cache stays empty, and the result is the reference's (with and without a fused tail). */
static void check_rows_in_place(SupPool *pool) {
    Call c = {.op = "nn.dense", .op_id = OP_ID_NN_DENSE};
    attr_none(&c, "units");
    attr_int(&c, "out_dtype", -1);
    int64_t xs[2] = {1, 1031}, ws[2] = {4099, 1031}; /* 16.1 MiB */
    DLTensor *x = tensor_rand(RLY_DTYPE_F32, 2, xs), *w = tensor_rand(RLY_DTYPE_F32, 2, ws);
    KPrepCache *prep = k_prep_cache_new();
    compare(&c, x, w, pool, true, prep, "dense rows in place");
    CHECK(k_prep_cache_bytes(prep) == 0, "a 16 MiB GEMV weight was packed: %zu bytes [%s]",
          k_prep_cache_bytes(prep), cfg_isa);
    k_prep_cache_free(prep);
    tensor_free(x), tensor_free(w);
}

static void check_packed_once(SupPool *pool) {
    Call c = {.op = "nn.dense", .op_id = OP_ID_NN_DENSE};
    attr_none(&c, "units");
    attr_int(&c, "out_dtype", -1);
    int64_t xs[2] = {2, 70}, ws[2] = {45, 70};
    DLTensor *x = tensor_rand(RLY_DTYPE_F32, 2, xs), *w = tensor_rand(RLY_DTYPE_F32, 2, ws);
    packed_once(&c, x, w, pool, kern_sgemm_packed_b_floats(70, 45) * sizeof(float));
    tensor_free(x), tensor_free(w);

    Call cv = {.op = "nn.conv2d", .op_id = OP_ID_NN_CONV2D};
    int64_t pad[1] = {1};
    conv_attrs(&cv, 1, 1, 1, pad, 1, 1, 2, "NCHW", "OIHW");
    int64_t cxs[4] = {1, 6, 9, 9}, cws[4] = {40, 3, 3, 3};
    x = tensor_rand(RLY_DTYPE_F32, 4, cxs), w = tensor_rand(RLY_DTYPE_F32, 4, cws);
    packed_once(&cv, x, w, pool, 2 * kern_sgemm_packed_a_floats(20, 27) * sizeof(float));
    tensor_free(x), tensor_free(w);
}

/* The error of the fast conv2d against the exact result (the reference kernel in float64), as a
 * fraction of sum |w||x| per output: at AVX-512 and AVX2 these 3x3 stride-1 layers take Winograd
 * F(4x4, 3x3) (16 and 8 tiles a vector). Both must stay within TOL (docs/kernels.md gives the
 * figures printed here). */
static double conv_error(int64_t ch, int64_t hw, SupPool *pool) {
    Call c = {.op = "nn.conv2d", .op_id = OP_ID_NN_CONV2D};
    int64_t pad[1] = {1};
    conv_attrs(&c, 1, 1, 1, pad, 1, 1, 1, "NCHW", "OIHW");
    int64_t xs[4] = {1, ch, hw, hw}, ws[4] = {ch, ch, 3, 3};
    DLTensor *x = tensor_rand(RLY_DTYPE_F32, 4, xs), *w = tensor_rand(RLY_DTYPE_F32, 4, ws);
    DLTensor *x64 = tensor_new(RLY_DTYPE_F64, 4, xs), *w64 = tensor_new(RLY_DTYPE_F64, 4, ws);
    for (int64_t i = 0; i < k_numel(x); i++)
        ((double *)x64->data)[i] = ((float *)x->data)[i];
    for (int64_t i = 0; i < k_numel(w); i++)
        ((double *)w64->data)[i] = ((float *)w->data)[i];
    DLTensor *xa = tensor_abs(x64), *wa = tensor_abs(w64);
    char err[256];
    KernelFn ref = kern_ref_lookup(c.op_id);
    DLTensor *exact = run(ref, &c, x64, w64, NULL, NULL, false, NULL, err, sizeof err);
    DLTensor *mag = run(ref, &c, xa, wa, NULL, NULL, false, NULL, err, sizeof err);
    DLTensor *got =
        run(kern_fast_lookup(c.op_id), &c, x, w, NULL, pool, false, NULL, err, sizeof err);
    double worst = 1;
    if (exact && mag && got) {
        worst = 0;
        for (int64_t i = 0; i < k_numel(got); i++) {
            double e = fabs(((float *)got->data)[i] - ((double *)exact->data)[i]);
            worst = fmax(worst, e / ((double *)mag->data)[i]);
        }
    }
    tensor_free(x), tensor_free(w), tensor_free(x64), tensor_free(w64), tensor_free(xa);
    tensor_free(wa), tensor_free(exact), tensor_free(mag), tensor_free(got);
    return worst;
}

static void conv_error_bounds(SupPool *pool) {
    static const int64_t layers[][2] = {{64, 16}, {128, 12}, {32, 28}};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        for (int level = SUP_ISA_AVX2; level <= (int)sup_isa_detected(); level++) {
            const char *name = sup_isa_name(sup_isa_force((SupIsa)level));
            double e = conv_error(layers[i][0], layers[i][1], pool);
            printf("conv2d 3x3 %lld ch %lldx%lld [%s]: worst error %.2e x sum |w||x|\n",
                   (long long)layers[i][0], (long long)layers[i][1], (long long)layers[i][1], name,
                   e);
            CHECK(e <= TOL, "conv2d 3x3 %lld ch [%s]: error %.2e x sum |w||x| over %g",
                  (long long)layers[i][0], name, e, TOL);
        }
    sup_isa_force(sup_isa_detected());
}

/* ---- SGEMM ------------------------------------------------------------------------------------
 */

/* The epilogue under test: a bias per row (the same for every product), then relu. */
typedef struct BiasRelu {
    const float *bias; /* m floats */
    int64_t m;
} BiasRelu;

static void epi_bias_relu(void *ctx, int64_t t, float *c, int64_t ldc, int64_t row0, int64_t col0,
                          int64_t rows, int64_t cols) {
    const BiasRelu *br = ctx;
    (void)t, (void)col0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            float v = c[i * ldc + j] + br->bias[row0 + i];
            c[i * ldc + j] = v > 0 ? v : 0;
        }
}

#define GUARD (12 * 1024 + 1) /* floats after C: past any tile's last row at n <= 1024 */

typedef struct GemmCase {
    int64_t m, n, k, batch, a_mod, b_mod;
    bool ta, tb, pre_a, pre_b, acc, epi;
    bool stream; /* SGemm.a_stream: a small packed A streamed as a part of a larger one */
    bool amx_b;  /* SGemm.b_amx: B's bf16 parts split before (kern_sgemm_amx_split_b) */
} GemmCase;

/* Runs one SGEMM case on the pool; returns C (owned). Checks it against doubles. */
static float *gemm_case(const GemmCase *gc, SupPool *pool, bool check) {
    int64_t m = gc->m, n = gc->n, k = gc->k, B = gc->batch;
    int64_t na = gc->a_mod ? gc->a_mod : B, nb = gc->b_mod ? gc->b_mod : B;
    float *a = malloc((size_t)(na * m * k + 1) * sizeof(float));
    float *b = malloc((size_t)(nb * k * n + 1) * sizeof(float));
    /* C is followed by GUARD floats that no store may reach (a tile of too many rows) */
    float *c = malloc((size_t)(B * m * n + GUARD) * sizeof(float));
    float *c0 = malloc((size_t)(B * m * n + 1) * sizeof(float));
    float *bias = malloc((size_t)(m + 1) * sizeof(float));
    uint64_t keep = rng;
    for (int64_t i = 0; i < na * m * k; i++)
        a[i] = frand();
    for (int64_t i = 0; i < nb * k * n; i++)
        b[i] = frand();
    for (int64_t i = 0; i < B * m * n; i++)
        c0[i] = c[i] = gc->acc ? frand() : NAN;
    for (int64_t i = 0; i < GUARD; i++)
        c[B * m * n + i] = -1234.5f;
    for (int64_t i = 0; i < m; i++)
        bias[i] = frand();
    rng = keep;
    BiasRelu br = {bias, m};
    SGemm g = {.m = m,
               .n = n,
               .k = k,
               .batch = B,
               .a = a,
               .a_rs = gc->ta ? 1 : k,
               .a_cs = gc->ta ? m : 1,
               .a_bs = m * k,
               .a_mod = gc->a_mod,
               .b = b,
               .b_rs = gc->tb ? 1 : n,
               .b_cs = gc->tb ? k : 1,
               .b_bs = k * n,
               .b_mod = gc->b_mod,
               .c = c,
               .ldc = n,
               .c_bs = m * n,
               .accumulate = gc->acc,
               .epi = gc->epi ? epi_bias_relu : NULL,
               .epi_ctx = &br};
    float *ap = NULL, *bp = NULL;
    if (gc->pre_a) {
        size_t each = kern_sgemm_packed_a_floats(m, k);
        ap = aligned_alloc(64, (na * each * sizeof(float) + 64) / 64 * 64);
        for (int64_t i = 0; i < na; i++)
            kern_sgemm_pack_a(a + i * g.a_bs, g.a_rs, g.a_cs, m, k, ap + i * each);
        g.a_packed = ap;
        g.a_stream = gc->stream;
    }
    if (gc->pre_b) {
        size_t each = kern_sgemm_packed_b_floats(k, n);
        bp = aligned_alloc(64, (nb * each * sizeof(float) + 64) / 64 * 64);
        for (int64_t i = 0; i < nb; i++)
            kern_sgemm_pack_b(b + i * g.b_bs, g.b_rs, g.b_cs, k, n, bp + i * each);
        g.b_packed = bp;
    }
    uint16_t *parts = NULL;
    if (gc->amx_b) {
        size_t each = kern_sgemm_amx_b_u16(k, n);
        parts = aligned_alloc(64, (nb * each * sizeof(uint16_t) + 64) / 64 * 64);
        for (int64_t i = 0; i < nb; i++)
            CHECK(kern_sgemm_amx_split_b(b + i * g.b_bs, g.b_rs, g.b_cs, k, n, parts + i * each),
                  "amx split of B item %lld", (long long)i);
        g.b_amx = parts;
    }
    size_t bytes = kern_sgemm_scratch_bytes(&g, sup_pool_threads(pool));
    void *scratch = bytes ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    kern_sgemm_run(&g, pool, scratch);
    free(parts);
    if (check) {
        int64_t bad = -1;
        for (int64_t t = 0; t < B && bad < 0; t++)
            for (int64_t i = 0; i < m && bad < 0; i++)
                for (int64_t j = 0; j < n && bad < 0; j++) {
                    const float *at = a + (gc->a_mod ? t % gc->a_mod : t) * m * k;
                    const float *bt = b + (gc->b_mod ? t % gc->b_mod : t) * k * n;
                    double acc = 0, mag = 0;
                    for (int64_t p = 0; p < k; p++) {
                        double x = at[i * g.a_rs + p * g.a_cs], y = bt[p * g.b_rs + j * g.b_cs];
                        acc += x * y;
                        mag += fabs(x * y);
                    }
                    int64_t ci = t * m * n + i * n + j;
                    if (gc->acc) acc += c0[ci], mag += fabs(c0[ci]);
                    if (gc->epi) {
                        acc += bias[i];
                        mag += fabs(bias[i]);
                        acc = acc > 0 ? acc : 0;
                    }
                    if (!(fabs(c[ci] - acc) <= cfg_tol * mag + 1e-30)) bad = ci;
                }
        int64_t past = 0;
        for (int64_t i = 0; i < GUARD; i++)
            past += c[B * m * n + i] != -1234.5f;
        CHECK(past == 0, "sgemm m%lld n%lld k%lld: %lld floats past C written [%s, %d thr]",
              (long long)m, (long long)n, (long long)k, (long long)past, cfg_isa, cfg_threads);
        CHECK(bad < 0,
              "sgemm m%lld n%lld k%lld batch%lld amod%lld bmod%lld ta%d tb%d pa%d pb%d acc%d epi%d "
              "[%s, %d thr]: element %lld",
              (long long)m, (long long)n, (long long)k, (long long)B, (long long)gc->a_mod,
              (long long)gc->b_mod, gc->ta, gc->tb, gc->pre_a, gc->pre_b, gc->acc, gc->epi, cfg_isa,
              cfg_threads, (long long)bad);
    }
    free(a), free(b), free(c0), free(bias), free(ap), free(bp), free(scratch);
    return c;
}

static GemmCase random_gemm(void) {
    GemmCase gc = {.m = pick_dim(), .n = pick_dim(), .k = pick_dim(), .batch = 1 + rnd(3)};
    if (rnd(5) == 0) gc.k = 513 + rnd(300); /* several K blocks */
    if (rnd(5) == 0) gc.n = 385 + rnd(200); /* several column blocks */
    if (rnd(4) == 0) gc.a_mod = 1;
    if (rnd(4) == 0) gc.b_mod = 1;
    if (rnd(4) == 0 && gc.batch > 1) gc.a_mod = gc.batch - 1;
    gc.ta = rnd(2), gc.tb = rnd(2), gc.pre_a = rnd(3) == 0, gc.pre_b = rnd(3) == 0;
    gc.acc = rnd(3) == 0, gc.epi = rnd(3) == 0;
    return gc;
}

static void sgemm_tests(SupPool *pool) {
    for (int64_t t = 1; t <= 33; t++) { /* every tail of m and n */
        GemmCase a = {.m = t, .n = 37, .k = 19, .batch = 1, .epi = true};
        GemmCase b = {.m = 13, .n = t, .k = 1 + t % 5, .batch = 1, .ta = t % 2, .tb = t % 3 == 0};
        free(gemm_case(&a, pool, true));
        free(gemm_case(&b, pool, true));
    }
    GemmCase zero_k = {.m = 5, .n = 9, .k = 0, .batch = 2, .epi = true};
    free(gemm_case(&zero_k, pool, true));
    zero_k.acc = true;
    free(gemm_case(&zero_k, pool, true));
    GemmCase one_k = {.m = 30, .n = 70, .k = 1, .batch = 1, .pre_b = true};
    free(gemm_case(&one_k, pool, true));
    /* A packed before and over 256 KiB (4 MiB on the pool): its slivers' first tiles stream it
     * (gemm.c, STREAM_A): every row tail (157 = 13 x 12 + 1), two K blocks, partial panels,
     * Winograd's 36 products of 16 columns */
    GemmCase stream = {.m = 157, .n = 70, .k = 700, .batch = 1, .pre_a = true, .epi = true};
    free(gemm_case(&stream, pool, true));
    for (int64_t m = 2; m <= 13; m++) {
        GemmCase s = {.m = m, .n = 20, .k = 33000 + m, .batch = 1, .pre_a = true, .acc = m % 2};
        free(gemm_case(&s, pool, true));
    }
    GemmCase wino = {.m = 100, .n = 16, .k = 300, .batch = 36, .pre_a = true, .tb = true};
    free(gemm_case(&wino, pool, true));
    GemmCase part = {.m = 29, .n = 16, .k = 48, .batch = 1, .pre_a = true, .stream = true};
    free(gemm_case(&part, pool, true)); /* Winograd's output-channel parts (winograd.c) */
    for (int i = 0; i < 60; i++) {
        GemmCase gc = random_gemm();
        free(gemm_case(&gc, pool, true));
    }
}

/* Products of 1 to 3 rows (dense at batch 1, the LSTM/GRU step h R^T, a GEMM's last rows): B
 * pre-packed (the GEMV path: one K block, one column range per thread) or not, A in place or
 * transposed (packed by the tasks), odd n and k, with and without the epilogue and accumulate;
 * and A packed by the tasks (transposed A, or rows 4 KiB apart) in products of more rows. */
static void small_m_tests(SupPool *pool) {
    static const int64_t ns[] = {1, 17, 33, 95, 300, 1000};
    static const int64_t ks[] = {1, 3, 37, 256, 517};
    for (int64_t m = 1; m <= 3; m++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
                int v = (int)(m + i + j);
                GemmCase gc = {.m = m,
                               .n = ns[i],
                               .k = ks[j],
                               .batch = 1 + (v % 4 == 0),
                               .ta = v % 3 == 0,
                               .tb = v % 2 == 0,
                               .pre_b = v % 5 != 0,
                               .acc = v % 4 == 1,
                               .epi = v % 2 == 1};
                if (gc.batch > 1 && v % 3 == 1) gc.b_mod = 1;
                free(gemm_case(&gc, pool, true));
            }
    GemmCase lstm = {.m = 1, .n = 1024, .k = 256, .batch = 1, .pre_b = true, .epi = true};
    free(gemm_case(&lstm, pool, true));
    GemmCase gru = {.m = 1, .n = 768, .k = 256, .batch = 1, .pre_b = true, .acc = true};
    free(gemm_case(&gru, pool, true));
    GemmCase tasks_a = {
        .m = 100, .n = 130, .k = 70, .batch = 2, .ta = true, .pre_b = true, .epi = true};
    free(gemm_case(&tasks_a, pool, true));
    tasks_a.pre_b = false, tasks_a.acc = true, tasks_a.b_mod = 1; /* B in place */
    free(gemm_case(&tasks_a, pool, true));
    GemmCase stride_4k = {.m = 40, .n = 100, .k = 1024, .batch = 1, .pre_b = true, .epi = true};
    free(gemm_case(&stride_4k, pool, true));
    for (int v = 0; v < 8; v++) { /* a last tile of one row, A packed (before or by the tasks) */
        GemmCase gc = {.m = v % 2 ? 25 : 13,
                       .n = 47 + 32 * v,
                       .k = 5 + 67 * v,
                       .batch = 1,
                       .ta = v % 4 < 2,
                       .tb = v % 3 == 0,
                       .pre_a = v % 4 >= 2,
                       .pre_b = v % 2 == 0,
                       .acc = v % 3 == 1,
                       .epi = v % 2 == 1};
        free(gemm_case(&gc, pool, true));
    }
    /* tall, B packed per call: at 2 threads each thread takes a range of rows (gemm.c,
     * ROWS_EACH) and packs all of B */
    GemmCase tall = {.m = 1030, .n = 400, .k = 520, .batch = 1, .tb = true, .epi = true};
    free(gemm_case(&tall, pool, true));
    for (int v = 0; v < 6; v++) { /* narrow and deep: K blocks split over the threads */
        GemmCase gc = {.m = v % 3 == 0   ? 64
                            : v % 3 == 1 ? 13
                                         : 48,
                       .n = v < 2   ? 169
                            : v < 4 ? 256
                                    : 37,
                       .k = v % 2 ? 384 : 259 + 128 * v,
                       .batch = 1,
                       .ta = v == 3,
                       .pre_b = v == 4,
                       .epi = v % 2 == 0};
        free(gemm_case(&gc, pool, true));
    }
}

/* The same bits on 1 and 2 threads. */
static void thread_independence(SupPool *pool, SupPool *pool3) {
    for (int i = 0; i < 14; i++) {
        GemmCase gc = random_gemm();
        if (i < 2) gc.m = 100, gc.n = 300, gc.k = 600; /* split in both directions */
        if (i == 2) /* a GEMV with pre-packed B: one K block, columns split for the threads */
            gc.m = 1, gc.n = 300, gc.k = 700, gc.pre_b = true, gc.batch = 1, gc.b_mod = 0;
        if (i == 3) /* the LSTM step */
            gc.m = 1, gc.n = 1024, gc.k = 256, gc.pre_b = true, gc.batch = 1, gc.b_mod = 0;
        if (i == 4 || i == 5) /* 2 and 3 rows */
            gc.m = i - 2, gc.n = 777, gc.k = 259, gc.pre_b = i == 4, gc.batch = 1;
        if (i == 6) /* A packed by the tasks, rows split */
            gc.m = 130, gc.n = 200, gc.k = 150, gc.ta = true, gc.pre_b = true, gc.batch = 1;
        if (i == 7 || i == 8) /* one row times B^T in place (rowdot), a partial group of rows */
            gc.m = 1, gc.n = i == 7 ? 1001 : 4099, gc.k = i == 7 ? 259 : 70, gc.tb = true,
            gc.ta = false, gc.pre_b = false, gc.batch = 1, gc.epi = i == 8;
        if (i == 9) /* tall, B packed per call: one range of rows a thread at 2 threads (each
                     * packs all of B), columns at 3; two column blocks, two K blocks */
            gc.m = 1030, gc.n = 400, gc.k = 520, gc.batch = 1, gc.b_mod = gc.a_mod = 0,
            gc.pre_a = gc.pre_b = false, gc.acc = false, gc.epi = true;
        if (i >= 10) /* narrow and deep (K blocks over the threads: 4 blocks on 3 threads too) */
            gc.m = i == 10   ? 48
                   : i == 11 ? 64
                             : 7,
            gc.n = i == 12 ? 256 : 169, gc.k = i == 13 ? 1000 : 384, gc.batch = 1,
            gc.b_mod = gc.a_mod = 0, gc.acc = false, gc.tb = false, gc.pre_b = i == 12,
            gc.epi = i != 11;
        uint64_t keep = rng;
        float *c1 = gemm_case(&gc, NULL, false);
        rng = keep;
        float *c2 = gemm_case(&gc, pool, false);
        rng = keep;
        float *c3 = gemm_case(&gc, pool3, false);
        size_t bytes = (size_t)(gc.batch * gc.m * gc.n) * sizeof(float);
        CHECK(memcmp(c1, c2, bytes) == 0 && memcmp(c1, c3, bytes) == 0,
              "sgemm m%lld n%lld k%lld: 1, 2 and 3 threads differ [%s]", (long long)gc.m,
              (long long)gc.n, (long long)gc.k, cfg_isa);
        free(c1), free(c2), free(c3);
    }
}

/* ---- the product on AMX (gemm_amx.c) ----------------------------------------------------------
 */

/* Products over the AMX gate (m >= 128, n >= 256, m n >= 65536, k >= 64, m n k >= 2^26): tails of
 * rows, columns and depth (170 = 5 x 32 + 10, 300 = 9 x 32 + 12, 1111 = 34 x 32 + 23, three K
 * blocks of 512), A and B read in place, transposed (gathered) and packed before, batches with a
 * broadcast operand, accumulate, the epilogue; then three random ones. Tolerance 2e-7 of sum |a b|
 * (the AVX-512 tiles measure about 4e-8; a split that kept three of the six part products
 * measured 4.7e-7, one that kept one 2.4e-4). Each must have run on AMX (kern_sgemm_amx_taken). */
static const GemmCase amx_cases[] = {
    {.m = 128, .n = 512, .k = 1024, .batch = 1}, /* at the gate */
    {.m = 170, .n = 400, .k = 1111, .batch = 1, .epi = true},
    {.m = 130, .n = 517, .k = 1000, .batch = 1, .ta = true, .acc = true},
    {.m = 256, .n = 259, .k = 1300, .batch = 1, .tb = true, .pre_a = true},
    {.m = 129, .n = 600, .k = 900, .batch = 3, .a_mod = 1, .pre_b = true, .epi = true},
    {.m = 256, .n = 300, .k = 1030, .batch = 2, .b_mod = 1, .ta = true, .pre_a = true, .acc = true},
    /* B split before (constant weights: SGemm.b_amx), where the gate is m >= 32, n >= 256,
     * m n k >= 2^24: transposed B, a batch of two B items, tails */
    {.m = 33, .n = 770, .k = 700, .batch = 1, .tb = true, .epi = true, .amx_b = true},
    {.m = 50, .n = 300, .k = 1200, .batch = 2, .pre_a = true, .acc = true, .amx_b = true},
    {.m = 128, .n = 1030, .k = 130, .batch = 3, .b_mod = 1, .ta = true, .amx_b = true},
    /* with B split before, any number of rows runs on AMX (its k and n are the weight's) */
    {.m = 2, .n = 260, .k = 70, .batch = 1, .tb = true, .amx_b = true},
    {.m = 5, .n = 300, .k = 70, .batch = 2, .acc = true, .epi = true, .amx_b = true},
};

static void amx_tests(SupPool *pool) {
    cfg_tol = 2e-7;
    for (size_t i = 0; i < sizeof amx_cases / sizeof amx_cases[0] + 3; i++) {
        GemmCase gc;
        if (i < sizeof amx_cases / sizeof amx_cases[0]) {
            gc = amx_cases[i];
        } else { /* random, over the gate */
            gc = random_gemm();
            gc.m = 128 + rnd(200), gc.n = 256 + rnd(300), gc.batch = 1 + rnd(2);
            if (gc.m * gc.n < 65536) gc.n = (65536 + gc.m - 1) / gc.m + rnd(50);
            gc.k = (int64_t)(67108864.0 / ((double)gc.m * (double)gc.n)) + 1 + rnd(300);
            if (gc.a_mod > 1) gc.a_mod = 0;
        }
        uint64_t n0 = kern_sgemm_amx_taken();
        free(gemm_case(&gc, pool, true));
        CHECK(kern_sgemm_amx_taken() > n0,
              "amx case %zu (m%lld n%lld k%lld): not run on AMX [%d thr]", i, (long long)gc.m,
              (long long)gc.n, (long long)gc.k, cfg_threads);
    }
    cfg_tol = TOL;
}

/* Values the split cannot take make kern_sgemm_amx_run return false before C is written (then
 * kern_sgemm_run gives the AVX-512 product's bits): infinities, NaN, nonzero |x| < 2^-50 (a
 * denormal too) or >= 2^126, in A or B, in a batch's first or second product; values at the edges
 * of the range and -0 run. */
static void amx_declines(SupPool *pool) {
    const int64_t m = 128, n = 512, k = 1024, B = 2;
    const struct {
        float v;
        bool runs;
    } vals[] = {{INFINITY, false},
                {-INFINITY, false},
                {NAN, false},
                {1e-20f, false},
                {1e-40f, false},
                {nextafterf(ldexpf(1, -50), 0), false},
                {-ldexpf(1, 126), false},
                {3e38f, false},
                {ldexpf(1, -50), true},
                {-nextafterf(ldexpf(1, 126), 0), true},
                {-0.0f, true}};
    float *a = malloc((size_t)(B * m * k) * sizeof(float));
    float *b = malloc((size_t)(B * k * n) * sizeof(float));
    float *c = malloc((size_t)(B * m * n) * sizeof(float));
    float *c2 = malloc((size_t)(B * m * n) * sizeof(float));
    SGemm g = {.m = m,
               .n = n,
               .k = k,
               .batch = B,
               .a = a,
               .a_rs = k,
               .a_cs = 1,
               .a_bs = m * k,
               .b = b,
               .b_rs = n,
               .b_cs = 1,
               .b_bs = k * n,
               .c = c,
               .ldc = n,
               .c_bs = m * n};
    size_t bytes = kern_sgemm_scratch_bytes(&g, sup_pool_threads(pool));
    void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
    for (size_t v = 0; v < sizeof vals / sizeof vals[0]; v++)
        for (int where = 0; where < 4; where++) { /* A or B, product 0 or 1 */
            for (int64_t i = 0; i < B * m * k; i++)
                a[i] = frand();
            for (int64_t i = 0; i < B * k * n; i++)
                b[i] = frand();
            int64_t t = where / 2;
            if (where % 2 == 0)
                a[t * m * k + rnd((uint32_t)(m * k))] = vals[v].v;
            else
                b[t * k * n + rnd((uint32_t)(k * n))] = vals[v].v;
            for (int64_t i = 0; i < B * m * n; i++)
                c[i] = 7.0f;
            g.batch = t + 1; /* the value in the last product */
            bool ran = kern_sgemm_amx_run(&g, pool, scratch);
            int64_t changed = 0;
            for (int64_t i = 0; i < B * m * n; i++)
                changed += c[i] != 7.0f;
            CHECK(ran == vals[v].runs && (ran || changed == 0),
                  "amx with %g in %s of product %lld: ran %d, %lld of C written [%d thr]",
                  (double)vals[v].v, where % 2 ? "B" : "A", (long long)t, ran, (long long)changed,
                  cfg_threads);
            if (vals[v].runs) continue;
            kern_sgemm_run(&g, pool, scratch); /* declined: the AVX-512 product */
            memcpy(c2, c, (size_t)(B * m * n) * sizeof(float));
            sup_amx_force(false);
            kern_sgemm_run(&g, pool, scratch);
            sup_amx_force(true);
            CHECK(memcmp(c, c2, (size_t)(B * m * n) * sizeof(float)) == 0,
                  "amx with %g: declined, not the AVX-512 product's bits [%d thr]",
                  (double)vals[v].v, cfg_threads);
        }
    free(a), free(b), free(c), free(c2), free(scratch);
}

/* With B split before (SGemm.b_amx) and a value in A the split cannot take: declined, then the
 * AVX-512 product (which reads B as it lies) gives the bits it gives with AMX off. */
static void amx_declines_split_b(SupPool *pool) {
    const int64_t m = 40, n = 300, k = 500;
    float *a = malloc((size_t)(m * k) * sizeof(float)),
          *b = malloc((size_t)(k * n) * sizeof(float));
    float *c = malloc((size_t)(m * n) * sizeof(float)),
          *c2 = malloc((size_t)(m * n) * sizeof(float));
    uint16_t *parts = malloc(kern_sgemm_amx_b_u16(k, n) * sizeof(uint16_t));
    for (int64_t i = 0; i < m * k; i++)
        a[i] = frand();
    for (int64_t i = 0; i < k * n; i++)
        b[i] = frand();
    a[rnd((uint32_t)(m * k))] = NAN;
    CHECK(kern_sgemm_amx_split_b(b, 1, k, k, n, parts), "amx split of B^T");
    SGemm g = {.m = m,
               .n = n,
               .k = k,
               .batch = 1,
               .a = a,
               .a_rs = k,
               .a_cs = 1,
               .b = b,
               .b_rs = 1,
               .b_cs = k,
               .b_amx = parts,
               .c = c,
               .ldc = n};
    size_t bytes = kern_sgemm_scratch_bytes(&g, sup_pool_threads(pool));
    void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    uint64_t n0 = kern_sgemm_amx_taken();
    kern_sgemm_run(&g, pool, scratch);
    memcpy(c2, c, (size_t)(m * n) * sizeof(float));
    sup_amx_force(false);
    kern_sgemm_run(&g, pool, scratch);
    sup_amx_force(true);
    CHECK(kern_sgemm_amx_taken() == n0 && memcmp(c, c2, (size_t)(m * n) * sizeof(float)) == 0,
          "amx with B split before and NaN in A: not the AVX-512 product's bits [%d thr]",
          cfg_threads);
    free(a), free(b), free(c), free(c2), free(parts), free(scratch);
}

/* The fast kernels over AMX products, with their fused tails (check_tail): nn.dense (weight read
 * transposed in place, or packed once when constant), nn.matmul with either operand transposed,
 * nn.batch_matmul with a broadcast batch, nn.conv2d 1x1 (B the input in place). */
static void amx_kernels(SupPool *pool, bool cst, KPrepCache *prep) {
    uint64_t n0 = kern_sgemm_amx_taken();
    Call d = {.op = "nn.dense", .op_id = OP_ID_NN_DENSE};
    attr_none(&d, "units");
    attr_int(&d, "out_dtype", -1);
    int64_t xs[2] = {161, 1000}, ws[2] = {517, 1000};
    DLTensor *x = tensor_rand(RLY_DTYPE_F32, 2, xs), *w = tensor_rand(RLY_DTYPE_F32, 2, ws);
    compare(&d, x, w, pool, cst, prep, "amx dense");
    operand_free(x, prep), operand_free(w, prep);
    for (int t = 0; t < 4; t++) {
        Call c = {.op = "nn.matmul", .op_id = OP_ID_NN_MATMUL};
        attr_none(&c, "units");
        attr_int(&c, "out_dtype", -1);
        attr_int(&c, "transpose_a", t & 1);
        attr_int(&c, "transpose_b", t >> 1);
        int64_t m = 140, k = 700, n = 700;
        int64_t as[2] = {t & 1 ? k : m, t & 1 ? m : k}, bs[2] = {t >> 1 ? n : k, t >> 1 ? k : n};
        x = tensor_rand(RLY_DTYPE_F32, 2, as), w = tensor_rand(RLY_DTYPE_F32, 2, bs);
        compare(&c, x, w, pool, cst, prep, "amx matmul");
        operand_free(x, prep), operand_free(w, prep);
    }
    Call b = {.op = "nn.batch_matmul", .op_id = OP_ID_NN_BATCH_MATMUL};
    attr_int(&b, "out_dtype", -1);
    attr_int(&b, "transpose_a", 0);
    attr_int(&b, "transpose_b", 1);
    int64_t bx[3] = {2, 130, 600}, by[3] = {1, 520, 600};
    x = tensor_rand(RLY_DTYPE_F32, 3, bx), w = tensor_rand(RLY_DTYPE_F32, 3, by);
    compare(&b, x, w, pool, cst, prep, "amx batch_matmul");
    operand_free(x, prep), operand_free(w, prep);
    Call v = {.op = "nn.conv2d", .op_id = OP_ID_NN_CONV2D};
    conv_attrs(&v, 1, 1, 1, (const int64_t[]){0}, 1, 1, 1, "NCHW", "OIHW");
    int64_t vs[4] = {1, 1040, 20, 21}, vw[4] = {160, 1040, 1, 1};
    x = tensor_rand(RLY_DTYPE_F32, 4, vs), w = tensor_rand(RLY_DTYPE_F32, 4, vw);
    compare(&v, x, w, pool, cst, prep, "amx conv2d 1x1");
    operand_free(x, prep), operand_free(w, prep);
    CHECK(kern_sgemm_amx_taken() >= n0 + 7,
          "amx kernels: %llu of 7 calls on AMX [%d thr, const %d]",
          (unsigned long long)(kern_sgemm_amx_taken() - n0), cfg_threads, cst);
    /* 40 rows: on AMX only with the weight split once (constant, with a prep cache) */
    n0 = kern_sgemm_amx_taken();
    int64_t xs40[2] = {40, 900}, ws40[2] = {600, 900};
    x = tensor_rand(RLY_DTYPE_F32, 2, xs40), w = tensor_rand(RLY_DTYPE_F32, 2, ws40);
    compare(&d, x, w, pool, cst, prep, "amx dense 40 rows");
    operand_free(x, prep), operand_free(w, prep);
    bool want = cst && prep != NULL;
    CHECK((kern_sgemm_amx_taken() > n0) == want, "amx dense 40 rows: on AMX %d, want %d [%d thr]",
          kern_sgemm_amx_taken() > n0, want, cfg_threads);
}

/* kern_sgemm_amx_split_b refuses what the product cannot take (then kern_sgemm_prepare leaves
 * SGemm.b_amx unset). */
static void amx_split_refuses(void) {
    const int64_t k = 70, n = 300;
    float *b = malloc((size_t)(k * n) * sizeof(float));
    size_t u16 = kern_sgemm_amx_b_u16(k, n), t16 = kern_sgemm_amx_b_u16(n, k);
    uint16_t *d = malloc((u16 > t16 ? u16 : t16) * sizeof(uint16_t));
    const float bad[] = {INFINITY, NAN, 1e-30f, 1e38f};
    for (int i = 0; i < 5; i++) {
        for (int64_t j = 0; j < k * n; j++)
            b[j] = frand();
        if (i < 4) b[rnd((uint32_t)(k * n))] = bad[i];
        CHECK(kern_sgemm_amx_split_b(b, n, 1, k, n, d) == (i == 4) &&
                  kern_sgemm_amx_split_b(b, 1, n, n, k, d) == (i == 4), /* as B^T */
              "amx split of B with %g", i < 4 ? (double)bad[i] : 0.0);
    }
    free(b), free(d);
}

/* The same bits on 1, 2 and 3 threads on AMX. */
static void amx_thread_independence(SupPool *pool, SupPool *pool3) {
    for (size_t i = 1; i < sizeof amx_cases / sizeof amx_cases[0]; i++) {
        const GemmCase *gc = &amx_cases[i];
        uint64_t keep = rng;
        float *c1 = gemm_case(gc, NULL, false);
        rng = keep;
        float *c2 = gemm_case(gc, pool, false);
        rng = keep;
        float *c3 = gemm_case(gc, pool3, false);
        size_t bytes = (size_t)(gc->batch * gc->m * gc->n) * sizeof(float);
        CHECK(memcmp(c1, c2, bytes) == 0 && memcmp(c1, c3, bytes) == 0,
              "amx case %zu: 1, 2 and 3 threads differ", i);
        free(c1), free(c2), free(c3);
    }
}

/* The same bits on 1 and 2 threads for each convolution scheme: the direct path (every tile
 * split into ranges per thread), depthwise, Winograd, the im2col GEMM and 1x1 with B in place. */
static void conv_thread_independence(SupPool *pool) {
    static const int64_t shapes[][9] = {
        /* cin, h, w, cout, kh, kw, stride, pad, groups */
        {4, 84, 84, 32, 8, 8, 4, 0, 1},   {32, 20, 20, 64, 4, 4, 2, 0, 1},
        {64, 9, 9, 64, 3, 3, 1, 0, 1},    {24, 13, 17, 40, 3, 3, 1, 1, 1},
        {48, 20, 20, 48, 3, 3, 2, 1, 48}, {144, 9, 9, 144, 3, 3, 1, 1, 144},
        {3, 37, 29, 20, 3, 3, 2, 0, 1},   {40, 23, 23, 24, 1, 1, 1, 0, 1},
        {384, 13, 13, 64, 1, 1, 1, 0, 1}, {512, 11, 15, 40, 1, 1, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t *v = shapes[i];
        Call c = {.op = "nn.conv2d", .op_id = OP_ID_NN_CONV2D};
        int64_t pad[1] = {v[7]};
        conv_attrs(&c, v[6], v[6], 1, pad, 1, 1, v[8], "NCHW", "OIHW");
        int64_t xs[4] = {1, v[0], v[1], v[2]}, ws[4] = {v[3], v[0] / v[8], v[4], v[5]};
        DLTensor *x = tensor_rand(RLY_DTYPE_F32, 4, xs), *w = tensor_rand(RLY_DTYPE_F32, 4, ws);
        char err[256];
        KernelFn fast = kern_fast_lookup(c.op_id);
        DLTensor *o1 = run(fast, &c, x, w, NULL, NULL, false, NULL, err, sizeof err);
        DLTensor *o2 = run(fast, &c, x, w, NULL, pool, false, NULL, err, sizeof err);
        CHECK(o1 && o2 && memcmp(o1->data, o2->data, (size_t)k_numel(o1) * sizeof(float)) == 0,
              "conv2d shape %zu: 1 and 2 threads differ [%s]", i, cfg_isa);
        tensor_free(o1), tensor_free(o2), tensor_free(x), tensor_free(w);
    }
}

int main(void) {
    const char *s = getenv("RLY_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : 20240611;
    printf("seed %llu (RLY_SEED replays)\n", (unsigned long long)seed);
    rng = seed * 2654435761u + 0x9e3779b97f4a7c15ull;
    SupPool *pool2 = sup_pool_new(2), *pool3 = sup_pool_new(3);
    sup_amx_force(false); /* the AVX-512 tiles at the avx512 level; AMX after */
    for (int level = SUP_ISA_SCALAR; level <= (int)sup_isa_detected(); level++) {
        cfg_isa = sup_isa_name(sup_isa_force((SupIsa)level));
        for (int th = 0; th < 2; th++) {
            SupPool *pool = th ? pool2 : NULL;
            cfg_threads = th ? 2 : 1;
            sgemm_tests(pool);
            small_m_tests(pool);
            for (int cst = 0; cst < 2; cst++) {
                cfg_const = cst;
                KPrepCache *prep = cst ? k_prep_cache_new() : NULL;
                for (int i = 0; i < 40; i++) {
                    case_dense(pool, cst, prep);
                    case_matmul(pool, cst, prep);
                    case_batch_matmul(pool, cst, prep);
                    case_conv2d(pool, cst, prep);
                    case_conv2d(pool, cst, prep);
                }
                for (int64_t m = 1; m <= 3; m++)
                    for (int i = 0; i < 3; i++)
                        case_dense_rows(pool, cst, prep, m);
                case_uncovered(pool, cst, prep);
                prep_free(prep);
            }
            check_packed_once(pool);
            check_rows_in_place(pool);
        }
        thread_independence(pool2, pool3);
        conv_thread_independence(pool2);
        printf("level %s done (%d passed, %d failed so far)\n", cfg_isa, n_pass, n_fail);
    }
    sup_isa_force(sup_isa_detected());
    if (sup_amx_force(true)) {
        cfg_isa = "amx";
        for (int th = 0; th < 2; th++) {
            cfg_threads = th ? 2 : 1;
            amx_tests(th ? pool2 : NULL);
            amx_declines(th ? pool2 : NULL);
            amx_declines_split_b(th ? pool2 : NULL);
            for (int cst = 0; cst < 2; cst++) {
                cfg_const = cst;
                KPrepCache *prep = cst ? k_prep_cache_new() : NULL;
                amx_kernels(th ? pool2 : NULL, cst, prep);
                prep_free(prep);
            }
        }
        amx_thread_independence(pool2, pool3);
        amx_split_refuses();
        printf("level amx done (%d passed, %d failed so far)\n", n_pass, n_fail);
    } else {
        printf("level amx: not on this machine (CPU or OS), not tested\n");
    }
    conv_error_bounds(pool2);
    sup_pool_free(pool2);
    sup_pool_free(pool3);
    return check_summary();
}
