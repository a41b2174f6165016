/* test_fast_conv.c - the fast nn.conv2d paths (src/kernels/fast/conv.c, conv_direct.c) against
 * the reference kernel, shape by shape: depthwise 3x3 at stride 1 and 2 (the per-plane code, the
 * phase copy and the channel-lane blocks, on planes from 1x1 to past the lane buffer's limit),
 * other depthwise sizes, strides, paddings and dilations, channel multipliers, grouped
 * convolutions, the direct convolution (every tile size, strides, dilation, padding, groups), 1x1
 * convolutions on small planes (direct) and large ones (the GEMM reading the input in place), the
 * im2col GEMM, and the blocked layouts NCHW16c / NCHW8c / NCHW4c (conv_nchwc.c: general, grouped
 * and depthwise, fixed and random shapes). Channel counts and plane sizes are odd (vector and
 * block tails).
 *
 * Each shape runs at every instruction-set level the machine has (sup_isa_force), on 1 and 2
 * threads, with the weights constant (packed once in a KPrepCache) or not, and with each fused
 * tail (KCall.epi) the VM builds for convolutions: a real fused program (fused.h) of
 * clip(out + bias, 0, 6), relu(out), out + residual, and a tail whose begin declines.
 *   - the result within 1e-5 x sum |w||x| per element of the reference's (the reference run on
 *     |x|, |w| gives that magnitude), in a preallocated output filled with NaN;
 *   - the tail taken (epi_done) and applied to every element exactly once, its result equal bit
 *     for bit to the program run over the kernel's own output afterwards; never when declined;
 *   - 1 and 2 threads give the same bits.
 * Seed: RLY_SEED (printed); `N passed, N failed`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "kernels/fast/fused.h"
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

static const char *cfg_isa; /* the configuration under test, for messages */

/* ---- tensors ---------------------------------------------------------------------------------
 */

typedef struct Tensor {
    DLTensor t;
    int64_t shape[6];
} Tensor;

static DLTensor *tensor_new(uint32_t ndim, const int64_t *shape) {
    Tensor *x = calloc(1, sizeof *x);
    memcpy(x->shape, shape, ndim * sizeof(int64_t));
    x->t.ndim = (int32_t)ndim;
    x->t.shape = x->shape;
    x->t.dtype = k_dl_dtype(RLY_DTYPE_F32);
    x->t.data = calloc((size_t)k_shape_numel(ndim, shape) + 1, sizeof(float));
    return &x->t;
}
static void tensor_free(DLTensor *t) {
    if (t == NULL) return;
    free(t->data);
    free(t);
}
static float *fdata(const DLTensor *t) { return t->data; }
static DLTensor *tensor_rand(uint32_t ndim, const int64_t *shape) {
    DLTensor *t = tensor_new(ndim, shape);
    for (int64_t i = 0; i < k_numel(t); i++)
        fdata(t)[i] = frand();
    return t;
}
static DLTensor *tensor_abs(const DLTensor *src) {
    DLTensor *t = tensor_new((uint32_t)src->ndim, src->shape);
    for (int64_t i = 0; i < k_numel(t); i++)
        fdata(t)[i] = fabsf(fdata(src)[i]);
    return t;
}
static int alloc_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    (void)dt;
    kc->out[i] = tensor_new(ndim, shape);
    return 0;
}

/* ---- the call --------------------------------------------------------------------------------
 */

/* One convolution: x (n, cin, h, w), weight (w0, w1, kh, kw); with block b > 0 in NCHW{b}c
 * (x (n, cin/b, h, w, b)), weights OIHW{b}i{b}o ((w0/b, w1/b, kh, kw, b, b)) or, when w1 is 1
 * (depthwise), OIHW1i{b}o ((w0/b, 1, kh, kw, 1, b)). */
typedef struct Shape {
    const char *what;
    int64_t n, cin, h, w, w0, w1, kh, kw, sh, sw, dh, dw, groups;
    int64_t pad[4];
    int64_t block;
    bool plain; /* with block: data NCHW, the result in out_layout NCHW{b}c, weights OIHW1i{b}o */
    bool to_plain; /* with block: data NCHW{b}c, the result in out_layout NCHW, weights OIHW */
} Shape;

typedef struct Attrs {
    KAttr a[10];
    int64_t s[2], p[4], d[2];
    double sf[2], pf[4], df[2];
    char dl[24], kl[32], ol[24];
} Attrs;

/* The data and weight shapes of s; their ranks. */
static void shapes_of(const Shape *s, int64_t xs[5], uint32_t *xn, int64_t ws[6], uint32_t *wn) {
    int64_t b = s->block;
    if (b == 0) {
        int64_t x4[4] = {s->n, s->cin, s->h, s->w}, w4[4] = {s->w0, s->w1, s->kh, s->kw};
        memcpy(xs, x4, sizeof x4), memcpy(ws, w4, sizeof w4);
        *xn = *wn = 4;
        return;
    }
    if (s->to_plain) {
        int64_t x5[5] = {s->n, s->cin / b, s->h, s->w, b}, w4[4] = {s->w0, s->w1, s->kh, s->kw};
        memcpy(xs, x5, sizeof x5), memcpy(ws, w4, sizeof w4);
        *xn = 5, *wn = 4;
        return;
    }
    int64_t ib = s->w1 == 1 || s->plain ? 1 : b;
    int64_t x5[5] = {s->n, s->cin / b, s->h, s->w, b}, x4[4] = {s->n, s->cin, s->h, s->w};
    int64_t w6[6] = {s->w0 / b, s->w1 / ib, s->kh, s->kw, ib, b};
    if (s->plain)
        memcpy(xs, x4, sizeof x4);
    else
        memcpy(xs, x5, sizeof x5);
    memcpy(ws, w6, sizeof w6);
    *xn = s->plain ? 4 : 5, *wn = 6;
}

static void attrs_of(const Shape *s, Attrs *at) {
    at->ol[0] = '\0';
    if (s->block == 0) {
        snprintf(at->dl, sizeof at->dl, "NCHW");
        snprintf(at->kl, sizeof at->kl, "OIHW");
    } else if (s->to_plain) {
        snprintf(at->dl, sizeof at->dl, "NCHW%lldc", (long long)s->block);
        snprintf(at->kl, sizeof at->kl, "OIHW");
        snprintf(at->ol, sizeof at->ol, "NCHW");
    } else if (s->plain) {
        snprintf(at->dl, sizeof at->dl, "NCHW");
        snprintf(at->kl, sizeof at->kl, "OIHW1i%lldo", (long long)s->block);
        snprintf(at->ol, sizeof at->ol, "NCHW%lldc", (long long)s->block);
    } else {
        snprintf(at->dl, sizeof at->dl, "NCHW%lldc", (long long)s->block);
        snprintf(at->kl, sizeof at->kl, "OIHW%lldi%lldo", (long long)(s->w1 == 1 ? 1 : s->block),
                 (long long)s->block);
    }
    at->s[0] = s->sh, at->s[1] = s->sw, at->d[0] = s->dh, at->d[1] = s->dw;
    for (int i = 0; i < 4; i++)
        at->p[i] = s->pad[i], at->pf[i] = (double)s->pad[i];
    for (int i = 0; i < 2; i++)
        at->sf[i] = (double)at->s[i], at->df[i] = (double)at->d[i];
    KAttr a[10] = {
        {.name = "strides", .kind = KA_INTS, .n = 2, .ints = at->s, .floats = at->sf},
        {.name = "padding", .kind = KA_INTS, .n = 4, .ints = at->p, .floats = at->pf},
        {.name = "dilation", .kind = KA_INTS, .n = 2, .ints = at->d, .floats = at->df},
        {.name = "groups", .kind = KA_INT, .i = s->groups, .f = (double)s->groups},
        {.name = "channels", .kind = KA_NONE},
        {.name = "kernel_size", .kind = KA_NONE},
        {.name = "data_layout", .kind = KA_STR, .s = at->dl},
        {.name = "kernel_layout", .kind = KA_STR, .s = at->kl},
        {.name = "out_layout", .kind = KA_STR, .s = at->ol},
        {.name = "out_dtype", .kind = KA_INT, .i = -1, .f = -1},
    };
    memcpy(at->a, a, sizeof a);
}

/* fn called on the n_in (<= 3) tensors in, one argument each (all but the first constant when
 * prep is given), with attrs; its result into *o (preallocated, or left NULL for a new tensor).
 * fn's return value; *epi_done receives KCall.epi_done. */
static int call(KernelFn fn, const char *op, const KAttr *attrs, uint32_t n_attrs,
                const DLTensor *const *in, uint32_t n_in, DLTensor **o, SupPool *pool,
                KPrepCache *prep, const KEpilogue *epi, bool *epi_done, char *err, size_t cap) {
    uint32_t arg_start[3] = {0, 1, 2}, arg_len[3] = {1, 1, 1};
    uint8_t arg_tuple[3] = {0, 0, 0}, in_const[3] = {0, 1, 1};
    KCall kc = {.op = op,
                .attrs = attrs,
                .n_attrs = n_attrs,
                .n_args = n_in,
                .arg_start = arg_start,
                .arg_len = arg_len,
                .arg_tuple = arg_tuple,
                .in = in,
                .n_in = n_in,
                .out = o,
                .n_out = 1,
                .alloc = alloc_out,
                .err = err,
                .err_cap = cap,
                .pool = pool,
                .in_const = prep ? in_const : NULL,
                .prep = prep,
                .epi = epi};
    err[0] = '\0';
    int rc = fn(&kc);
    if (epi_done) *epi_done = kc.epi_done;
    k_call_release(&kc);
    return rc;
}

/* Run fn on (x, w) into out (preallocated) or a new tensor; the result or NULL with err set.
 * *epi_done receives KCall.epi_done. */
static DLTensor *run(KernelFn fn, const Shape *s, const DLTensor *x, const DLTensor *w,
                     DLTensor *out, SupPool *pool, KPrepCache *prep, const KEpilogue *epi,
                     bool *epi_done, char *err, size_t cap) {
    Attrs at;
    attrs_of(s, &at);
    const DLTensor *in[2] = {x, w};
    DLTensor *o = out;
    int rc = call(fn, "nn.conv2d", at.a, 10, in, 2, &o, pool, prep, epi, epi_done, err, cap);
    if (rc != 0) {
        if (o != out) tensor_free(o);
        return NULL;
    }
    return o;
}

/* ---- fused tails -----------------------------------------------------------------------------
 */

/* CLAMP_RELU, CLAMP_CLIP: one relu or clip offered as KEpilogue.clamp too, which a kernel may
 * apply as it stores into clamp_out instead of calling apply (the clip's bounds 0.1 and 0.7:
 * an output whose window is all padding is 0.1, not 0). BIAS_KB, BIAS_FIRST_KB: x + bias then a
 * clip, and bias + x alone, offered as KEpilogue.bias too (as the VM offers them); LANE_KB: x +
 * bias then a clip, the bias varying along a blocked layout's lanes alone (the same for every
 * block; a scalar on NCHW data, which no kernel takes); BIAS_RES_KB: clip(residual + (x + bias)),
 * the residual offered too (KBias.res); BIAS_RES_INPLACE_KB: the same with the residual in the
 * result's own buffer (KBias.res_inplace); BIAS_RES2_KB: clip((x + bias) + residual), the
 * residual second (KBias.res_first false). */
enum {
    TAIL_NONE,
    TAIL_BIAS_CLIP,
    TAIL_RELU,
    TAIL_RESIDUAL,
    TAIL_DECLINE,
    TAIL_CLAMP_RELU,
    TAIL_CLAMP_CLIP,
    TAIL_BIAS_KB,
    TAIL_BIAS_FIRST_KB,
    TAIL_LANE_KB,
    TAIL_BIAS_RES_KB,
    TAIL_BIAS_RES_INPLACE_KB,
    TAIL_BIAS_RES2_KB,
    N_TAILS
};
static const char *const tail_names[N_TAILS] = {"no tail",
                                                "bias+clip",
                                                "relu",
                                                "residual",
                                                "declined",
                                                "relu clamp",
                                                "clip clamp",
                                                "bias+clip kb",
                                                "bias first kb",
                                                "lane bias kb",
                                                "bias+residual+clip kb",
                                                "in-place residual kb",
                                                "bias+clip, residual second kb"};
#define CLAMP_LO 0.1f
#define CLAMP_HI 0.7f

/* A fused program bound as the VM binds one (fx_bind over out0 and the operands), each
 * element's application counted. */
typedef struct Tail {
    int kind;
    FxProgram prog;
    FxBound *bound;
    const DLTensor *operand;  /* the bias (1, C, 1, 1) or the residual (the result's shape) */
    const DLTensor *operand2; /* BIAS_RES_KB's residual, or NULL */
    float *res;
    uint8_t *seen;
    int64_t total;
    int begun;
    KEpilogue *epi; /* clamp_out set by tail_begin */
} Tail;

static void tail_program(Tail *t) {
    FxProgram *p = &t->prog;
    memset(p, 0, sizeof *p);
    if (t->kind == TAIL_RELU || t->kind == TAIL_CLAMP_RELU) {
        p->n_operands = 1, p->n_steps = 1;
        p->step[0] = (FxStep){.op = FX_RELU, .a = 0};
    } else if (t->kind == TAIL_CLAMP_CLIP) {
        p->n_operands = 1, p->n_steps = 1;
        p->step[0] = (FxStep){.op = FX_CLIP, .a = 0, .p0 = CLAMP_LO, .p1 = CLAMP_HI};
    } else if (t->kind == TAIL_RESIDUAL) {
        p->n_operands = 2, p->n_steps = 1;
        p->step[0] = (FxStep){.op = FX_ADD, .a = 1, .b = 0};
    } else if (t->kind == TAIL_BIAS_FIRST_KB) {
        p->n_operands = 2, p->n_steps = 1;
        p->step[0] = (FxStep){.op = FX_ADD, .a = 1, .b = 0};
    } else if (t->kind == TAIL_BIAS_RES_KB || t->kind == TAIL_BIAS_RES_INPLACE_KB ||
               t->kind == TAIL_BIAS_RES2_KB) { /* clip(residual + (x + bias)), or + second */
        bool second = t->kind == TAIL_BIAS_RES2_KB;
        p->n_operands = 3, p->n_steps = 3;
        p->step[0] = (FxStep){.op = FX_ADD, .a = 0, .b = 1};
        p->step[1] = (FxStep){.op = FX_ADD, .a = second ? 3 : 2, .b = second ? 2 : 3};
        p->step[2] = (FxStep){.op = FX_CLIP, .a = 4, .p0 = 0.0f, .p1 = 6.0f};
    } else {
        p->n_operands = 2, p->n_steps = 2;
        p->step[0] = (FxStep){.op = FX_ADD, .a = 0, .b = 1};
        p->step[1] = (FxStep){.op = FX_CLIP, .a = 2, .p0 = 0.0f, .p1 = 6.0f};
    }
}

static int tail_begin(void *ctx, const DLTensor *out0) {
    Tail *t = ctx;
    t->begun++;
    if (t->kind == TAIL_DECLINE) return -1;
    const DLTensor *ops[3] = {out0, t->operand, t->operand2};
    t->total = k_numel(out0);
    t->res = calloc((size_t)t->total + 1, sizeof(float));
    t->seen = calloc((size_t)t->total + 1, 1);
    fx_bind(t->bound, &t->prog, ops, t->res, (uint32_t)out0->ndim, out0->shape);
    if (t->epi->clamp != K_CLAMP_NONE) t->epi->clamp_out = t->res;
    if (t->kind == TAIL_BIAS_KB || t->kind == TAIL_BIAS_FIRST_KB || t->kind == TAIL_LANE_KB ||
        t->kind == TAIL_BIAS_RES_KB || t->kind == TAIL_BIAS_RES_INPLACE_KB ||
        t->kind == TAIL_BIAS_RES2_KB) { /* as epi_bias */
        uint32_t mask = 0, lead = (uint32_t)(out0->ndim - t->operand->ndim);
        for (uint32_t d = 0; d < (uint32_t)t->operand->ndim; d++)
            if (t->operand->shape[d] != 1) mask |= 1u << (lead + d);
        bool first = t->kind == TAIL_BIAS_FIRST_KB;
        int64_t run = 0, n = 0; /* as vm.c's: the bias of element f is b[(f / run) % n] */
        for (uint32_t d = 0; d < (uint32_t)out0->ndim; d++)
            if (mask == 1u << d) {
                n = out0->shape[d], run = 1;
                for (uint32_t i = d + 1; i < (uint32_t)out0->ndim; i++)
                    run *= out0->shape[i];
            }
        bool res = t->kind == TAIL_BIAS_RES_KB || t->kind == TAIL_BIAS_RES_INPLACE_KB ||
                   t->kind == TAIL_BIAS_RES2_KB;
        bool inplace = t->kind == TAIL_BIAS_RES_INPLACE_KB; /* the residual in the result */
        if (inplace)
            memcpy(t->res, fdata(t->operand2), (size_t)k_numel(t->operand2) * sizeof(float));
        t->epi->bias = (KBias){fdata(t->operand),
                               mask,
                               first,
                               first ? K_CLAMP_NONE : K_CLAMP_CLIP,
                               0.0f,
                               6.0f,
                               run,
                               n,
                               inplace ? t->res
                               : res   ? fdata(t->operand2)
                                       : NULL,
                               res && t->kind != TAIL_BIAS_RES2_KB,
                               inplace};
        t->epi->clamp_out = t->res;
    }
    return 0;
}

static void tail_apply(void *ctx, int64_t flat0, int64_t n) {
    Tail *t = ctx;
    for (int64_t i = flat0; i < flat0 + n; i++) /* distinct elements per range: no race */
        t->seen[i]++;
    fx_range(t->bound, flat0, n);
}

/* ---- checks ----------------------------------------------------------------------------------
 */

/* The fast kernel against the reference on one shape and configuration. */
static void compare(const Shape *s, const DLTensor *x, const DLTensor *w, const DLTensor *want,
                    const DLTensor *mag, SupPool *pool, KPrepCache *prep, int tail,
                    DLTensor **got_out) {
    KernelFn fast = kern_fast_lookup(OP_ID_NN_CONV2D);
    int thr = pool ? 2 : 1;
    uint32_t nd = (uint32_t)want->ndim;
    DLTensor *pre = tensor_new(nd, want->shape);
    for (int64_t i = 0; i < k_numel(pre); i++)
        fdata(pre)[i] = NAN;
    static FxBound bound;
    Tail t = {.kind = tail, .bound = &bound};
    DLTensor *operand = NULL, *operand2 = NULL;
    if (tail == TAIL_BIAS_CLIP || tail == TAIL_BIAS_KB || tail == TAIL_BIAS_FIRST_KB ||
        tail == TAIL_LANE_KB || tail == TAIL_BIAS_RES_KB || tail == TAIL_BIAS_RES_INPLACE_KB ||
        tail == TAIL_BIAS_RES2_KB) {
        int64_t bs[5] = {1, tail == TAIL_LANE_KB ? 1 : want->shape[1], 1, 1,
                         nd == 5 ? want->shape[4] : 1};
        operand = tensor_rand(nd, bs);
        for (int64_t i = 0; i < k_numel(operand); i++) /* some outputs under 0, some over 6 */
            fdata(operand)[i] = 7.0f * frand();
    } else if (tail == TAIL_RESIDUAL) {
        operand = tensor_rand(nd, want->shape);
    }
    if (tail == TAIL_BIAS_RES_KB || tail == TAIL_BIAS_RES_INPLACE_KB || tail == TAIL_BIAS_RES2_KB)
        operand2 = tensor_rand(nd, want->shape);
    t.operand = operand, t.operand2 = operand2;
    tail_program(&t);
    KEpilogue epi = {tail_begin, tail_apply, NULL, &t, K_CLAMP_NONE, 0, 0, NULL, {0}};
    if (tail == TAIL_CLAMP_RELU) epi.clamp = K_CLAMP_RELU;
    if (tail == TAIL_CLAMP_CLIP) epi.clamp = K_CLAMP_CLIP, epi.lo = CLAMP_LO, epi.hi = CLAMP_HI;
    t.epi = &epi;
    char err[256];
    bool done = false;
    DLTensor *got = run(fast, s, x, w, pre, pool, prep, tail == TAIL_NONE ? NULL : &epi, &done, err,
                        sizeof err);
    CHECK(got != NULL, "%s [%s, %d thr, %s]: fast kernel failed: %s", s->what, cfg_isa, thr,
          tail_names[tail], err);
    if (got == NULL) {
        tensor_free(pre), tensor_free(operand), tensor_free(operand2);
        return;
    }
    int64_t bad = -1, n = k_numel(want);
    double worst = 0, bad_a = 0, bad_b = 0;
    /* a clamp or bias the kernel applied itself: no element went through apply, the result is
     * in t.res (output 0 unwritten); it is checked against the program over the reference */
    bool clamped = (epi.clamp != K_CLAMP_NONE || epi.bias.b != NULL) && done && t.seen != NULL;
    for (int64_t i = 0; i < n && clamped; i++)
        clamped = t.seen[i] == 0;
    float *ref_tail = NULL;
    if (clamped) {
        static FxBound rb;
        ref_tail = calloc((size_t)n + 1, sizeof(float));
        const DLTensor *ops[3] = {want, operand, operand2};
        fx_bind(&rb, &t.prog, ops, ref_tail, nd, want->shape);
        fx_range(&rb, 0, n);
    }
    for (int64_t i = 0; i < n; i++) {
        double a = fdata(want)[i], b = fdata(got)[i];
        if (clamped) a = ref_tail[i], b = t.res[i];
        double d = fabs(a - b);
        /* a bias of up to 7 added to both: each sum rounded once more (an ulp of 7: 5e-7) */
        if (!(d <= TOL * fdata(mag)[i] + (clamped ? 1e-6 : 1e-30))) {
            if (bad < 0) bad = i, bad_a = a, bad_b = b;
            if (d > worst || isnan(d)) worst = d;
        }
    }
    CHECK(
        bad < 0, "%s [%s, %d thr, const %d, %s]: element %lld differs (ref %g, fast %g, worst %g)",
        s->what, cfg_isa, thr, prep != NULL, tail_names[tail], (long long)bad, bad_a, bad_b, worst);
    free(ref_tail);
    if (tail != TAIL_NONE) {
        bool want_done = tail != TAIL_DECLINE && n > 0;
        int64_t wrong = -1;
        if (want_done && t.res != NULL && !clamped) { /* the program over the kernel's output */
            static FxBound check;
            float *exp = calloc((size_t)n + 1, sizeof(float));
            const DLTensor *ops[3] = {got, operand, operand2};
            fx_bind(&check, &t.prog, ops, exp, nd, got->shape);
            fx_range(&check, 0, n);
            for (int64_t i = 0; i < n && wrong < 0; i++)
                if (t.seen[i] != 1 || memcmp(&exp[i], &t.res[i], sizeof(float)) != 0) wrong = i;
            free(exp);
        }
        CHECK(done == want_done && wrong < 0 && t.begun == 1,
              "%s [%s, %d thr, %s]: tail done %d (want %d), begun %d, element %lld (seen %d)",
              s->what, cfg_isa, thr, tail_names[tail], done, want_done, t.begun, (long long)wrong,
              wrong >= 0 ? t.seen[wrong] : 0);
    }
    free(t.res), free(t.seen);
    tensor_free(operand), tensor_free(operand2);
    if (got_out != NULL)
        *got_out = got;
    else
        tensor_free(got);
}

/* Every configuration of one shape. */
static void check_shape(const Shape *s, SupPool *pool2) {
    int64_t xs[5], ws[6];
    uint32_t xn, wn;
    shapes_of(s, xs, &xn, ws, &wn);
    DLTensor *x = tensor_rand(xn, xs), *w = tensor_rand(wn, ws);
    DLTensor *xa = tensor_abs(x), *wa = tensor_abs(w);
    KernelFn ref = kern_ref_lookup(OP_ID_NN_CONV2D);
    char err[256];
    DLTensor *want = run(ref, s, x, w, NULL, NULL, NULL, NULL, NULL, err, sizeof err);
    DLTensor *mag = run(ref, s, xa, wa, NULL, NULL, NULL, NULL, NULL, err, sizeof err);
    CHECK(want != NULL && mag != NULL, "%s: reference failed: %s", s->what, err);
    for (int level = SUP_ISA_SCALAR; want && mag && level <= (int)sup_isa_detected(); level++) {
        cfg_isa = sup_isa_name(sup_isa_force((SupIsa)level));
        KPrepCache *prep = k_prep_cache_new();
        DLTensor *one = NULL, *two = NULL;
        compare(s, x, w, want, mag, NULL, NULL, TAIL_NONE, &one);
        compare(s, x, w, want, mag, pool2, prep, TAIL_NONE, &two);
        CHECK(one && two && memcmp(one->data, two->data, (size_t)k_numel(one) * 4) == 0,
              "%s [%s]: 1 and 2 threads differ", s->what, cfg_isa);
        tensor_free(one), tensor_free(two);
        for (int tail = TAIL_BIAS_CLIP; tail < N_TAILS; tail++) {
            compare(s, x, w, want, mag, NULL, tail % 2 ? prep : NULL, tail, NULL);
            compare(s, x, w, want, mag, pool2, tail % 2 ? NULL : prep, tail, NULL);
        }
        k_prep_cache_free(prep);
    }
    sup_isa_force(sup_isa_detected());
    tensor_free(want), tensor_free(mag);
    tensor_free(x), tensor_free(w), tensor_free(xa), tensor_free(wa);
}

/* ---- shapes ----------------------------------------------------------------------------------
 */

/* Depthwise: groups == channels == the weight's O, multiplier m (weight (C, m, kh, kw)). */
static Shape depthwise(const char *what, int64_t n, int64_t c, int64_t h, int64_t w, int64_t m,
                       int64_t k, int64_t s, int64_t d, int64_t p) {
    return (Shape){what, n, c, h, w, c, m, k, k, s, s, d, d, c, {p, p, p, p}, 0, false, false};
}

static Shape dense_conv(const char *what, int64_t n, int64_t cin, int64_t h, int64_t w,
                        int64_t cout, int64_t groups, int64_t kh, int64_t kw, int64_t s, int64_t d,
                        int64_t p) {
    return (Shape){.what = what,
                   .n = n,
                   .cin = cin,
                   .h = h,
                   .w = w,
                   .w0 = cout,
                   .w1 = cin / groups,
                   .kh = kh,
                   .kw = kw,
                   .sh = s,
                   .sw = s,
                   .dh = d,
                   .dw = d,
                   .groups = groups,
                   .pad = {p, p, p, p}};
}

static Shape strides(Shape s, int64_t sh, int64_t sw) {
    s.sh = sh, s.sw = sw;
    return s;
}

static Shape blocked(Shape s, int64_t b) {
    s.block = b;
    return s;
}

static Shape plain(Shape s, int64_t b) {
    s.block = b;
    s.plain = true;
    return s;
}

/* NCHW{b}c data into an NCHW result, weights OIHW */
static Shape to_plain(Shape s, int64_t b) {
    s.block = b;
    s.to_plain = true;
    return s;
}

/* A 1x1, stride-1, unpadded, one-group to_plain shape: NCHW{b}c data into an NCHW result */
static Shape projection(const char *what, int64_t n, int64_t cin, int64_t h, int64_t w,
                        int64_t cout, int64_t b) {
    return to_plain(dense_conv(what, n, cin, h, w, cout, 1, 1, 1, 1, 1, 0), b);
}

/* s (a to_plain shape), asserting the product from the blocks computed it when `taken` (a 1x1,
 * stride-1, unpadded one, checked as every shape); others go to the reference kernel, whose
 * bits the fast kernel's entry then gives. */
static void check_to_plain(const Shape *s, bool taken, SupPool *pool2) {
    uint64_t n0 = kern_conv_blocked_b_taken();
    if (taken) {
        check_shape(s, pool2);
    } else {
        int64_t xs[5], ws[6];
        uint32_t xn, wn;
        shapes_of(s, xs, &xn, ws, &wn);
        DLTensor *x = tensor_rand(xn, xs), *w = tensor_rand(wn, ws);
        char err[256];
        DLTensor *want = run(kern_ref_lookup(OP_ID_NN_CONV2D), s, x, w, NULL, NULL, NULL, NULL,
                             NULL, err, sizeof err);
        DLTensor *got = run(kern_fast_lookup(OP_ID_NN_CONV2D), s, x, w, NULL, pool2, NULL, NULL,
                            NULL, err, sizeof err);
        CHECK(want && got && memcmp(want->data, got->data, (size_t)k_numel(want) * 4) == 0,
              "%s: not the reference's result", s->what);
        tensor_free(want), tensor_free(got), tensor_free(x), tensor_free(w);
    }
    CHECK((kern_conv_blocked_b_taken() > n0) == taken, "%s: the product from the blocks %s",
          s->what, taken ? "was not taken" : "was taken");
}

/* ---- a convolution, bias, relu and a max pool as one kernel (kern_fast_conv_maxpool) --------- */

typedef struct PoolSpec {
    int64_t k, s, pad;
    bool ceil;
} PoolSpec;

/* The pool's attributes, with prefix (the pair's "pool." or none) */
typedef struct PoolAttrs {
    KAttr a[7];
    int64_t k[2], s[2], d[2], p[4];
    double kf[2], sf[2], df[2], pf[4];
    char names[7][24];
} PoolAttrs;

static void pool_attrs(const PoolSpec *ps, const char *prefix, PoolAttrs *pa) {
    static const char *const nm[7] = {"pool_size", "strides",    "dilation", "padding",
                                      "layout",    "out_layout", "ceil_mode"};
    for (int i = 0; i < 7; i++)
        snprintf(pa->names[i], sizeof pa->names[i], "%s%s", prefix, nm[i]);
    for (int i = 0; i < 2; i++) {
        pa->k[i] = ps->k, pa->s[i] = ps->s, pa->d[i] = 1;
        pa->kf[i] = (double)ps->k, pa->sf[i] = (double)ps->s, pa->df[i] = 1;
    }
    for (int i = 0; i < 4; i++)
        pa->p[i] = ps->pad, pa->pf[i] = (double)ps->pad;
    KAttr a[7] = {
        {.name = pa->names[0], .kind = KA_INTS, .n = 2, .ints = pa->k, .floats = pa->kf},
        {.name = pa->names[1], .kind = KA_INTS, .n = 2, .ints = pa->s, .floats = pa->sf},
        {.name = pa->names[2], .kind = KA_INTS, .n = 2, .ints = pa->d, .floats = pa->df},
        {.name = pa->names[3], .kind = KA_INTS, .n = 4, .ints = pa->p, .floats = pa->pf},
        {.name = pa->names[4], .kind = KA_STR, .s = "NCHW"},
        {.name = pa->names[5], .kind = KA_STR, .s = ""},
        {.name = pa->names[6], .kind = KA_INT, .i = ps->ceil, .f = ps->ceil},
    };
    memcpy(pa->a, a, sizeof a);
}

/* kern_fast_conv_maxpool on (x, w, b): the result, NULL with *declined when it declined (and
 * nothing was allocated), NULL with an error otherwise */
static DLTensor *run_pair(const Shape *s, const PoolSpec *ps, bool first, const DLTensor *x,
                          const DLTensor *w, const DLTensor *b, SupPool *pool, KPrepCache *prep,
                          bool *declined, char *err, size_t cap) {
    Attrs at;
    attrs_of(s, &at);
    PoolAttrs pa;
    pool_attrs(ps, "pool.", &pa);
    KAttr a[18];
    memcpy(a, at.a, sizeof at.a);
    a[10] = (KAttr){.name = "bias_first", .kind = KA_INT, .i = first, .f = first};
    memcpy(a + 11, pa.a, sizeof pa.a);
    const DLTensor *in[3] = {x, w, b};
    DLTensor *o = NULL;
    int rc = call(kern_fast_conv_maxpool, "nn.conv2d", a, 18, in, 3, &o, pool, prep, NULL, NULL,
                  err, cap);
    *declined = rc == K_DECLINED;
    if (rc != 0) {
        CHECK(!*declined || o == NULL, "%s: declined after allocating its result", s->what);
        tensor_free(o);
        return NULL;
    }
    return o;
}

/* One pair: at AVX-512 it must take `take` (and decline the rest, writing nothing), and give
 * the bits of the separate calls the VM would make: the fast convolution, x + b (or b + x),
 * relu (max(v, 0): 0 for NaN), then the reference max pool; on 1 and 2 threads, weights constant
 * or not. Other levels decline. */
static void check_pair(const Shape *s, const PoolSpec *ps, bool first, bool take, SupPool *pool2) {
    int64_t xs[5], ws[6], bs[3] = {s->w0, 1, 1};
    uint32_t xn, wn;
    shapes_of(s, xs, &xn, ws, &wn);
    DLTensor *x = tensor_rand(xn, xs), *w = tensor_rand(wn, ws), *b = tensor_rand(3, bs);
    if (k_numel(x) > 3) fdata(x)[k_numel(x) / 3] = NAN; /* a NaN through relu and the pool */
    char err[256];
    for (int level = SUP_ISA_SCALAR; level <= (int)sup_isa_detected(); level++) {
        cfg_isa = sup_isa_name(sup_isa_force((SupIsa)level));
        DLTensor *cv =
            run(kern_fast_conv2d, s, x, w, NULL, NULL, NULL, NULL, NULL, err, sizeof err);
        CHECK(cv != NULL, "%s [%s]: the convolution failed: %s", s->what, cfg_isa, err);
        if (cv == NULL) continue;
        int64_t plane = cv->shape[2] * cv->shape[3];
        for (int64_t i = 0; i < k_numel(cv); i++) {
            float bv = fdata(b)[i / plane % s->w0], v = fdata(cv)[i];
            v = first ? bv + v : v + bv;
            fdata(cv)[i] = v > 0 ? v : 0.0f;
        }
        PoolAttrs pa;
        pool_attrs(ps, "", &pa);
        const DLTensor *in[1] = {cv};
        DLTensor *want = NULL;
        int rc = call(kern_ref_lookup(OP_ID_NN_MAX_POOL2D), "nn.max_pool2d", pa.a, 7, in, 1, &want,
                      NULL, NULL, NULL, NULL, err, sizeof err);
        CHECK(rc == 0 && want != NULL, "%s: the reference pool failed: %s", s->what, err);
        KPrepCache *prep = k_prep_cache_new();
        for (int v = 0; want != NULL && v < 4; v++) {
            bool declined = false;
            DLTensor *got = run_pair(s, ps, first, x, w, b, v % 2 ? pool2 : NULL,
                                     v >= 2 ? prep : NULL, &declined, err, sizeof err);
            bool avx512 = level == SUP_ISA_AVX512;
            CHECK(declined == !(take && avx512), "%s [%s]: %s", s->what, cfg_isa,
                  declined ? "declined" : "taken");
            CHECK(got != NULL || declined, "%s [%s]: failed: %s", s->what, cfg_isa, err);
            if (got == NULL) continue;
            bool same = k_numel(got) == k_numel(want);
            for (int64_t i = 0; same && i < k_numel(got); i++) {
                float g = fdata(got)[i], e = fdata(want)[i];
                same = g == e || (isnan(g) && isnan(e));
            }
            CHECK(same, "%s [%s, %d thread(s)%s]: not the separate calls' bits", s->what, cfg_isa,
                  v % 2 ? 2 : 1, v >= 2 ? ", weights constant" : "");
            tensor_free(got);
        }
        k_prep_cache_free(prep);
        tensor_free(want);
        tensor_free(cv);
    }
    sup_isa_force(sup_isa_detected());
    tensor_free(x), tensor_free(w), tensor_free(b);
}

static void pair_tests(SupPool *pool2) {
    const PoolSpec sq = {3, 2, 0, true}, floor3 = {3, 2, 0, false};
    const PoolSpec padded = {3, 2, 1, false}, two = {2, 2, 0, false};
    const PoolSpec padded2 = {3, 2, 2, false}, padded_ceil = {3, 2, 1, true};
    const struct {
        Shape s;
        const PoolSpec *pool;
        bool first, take;
    } cases[] = {
        /* SqueezeNet's first layer and pool (111 -> 55) */
        {dense_conv("pair squeezenet 3->64 224", 1, 3, 224, 224, 64, 1, 3, 3, 2, 1, 0), &sq, false,
         true},
        /* odd sizes, two images, b + x, ceil_mode adding no window (29 x 29 -> 14 x 14) */
        {dense_conv("pair 3->40 59x59 n2", 2, 3, 59, 59, 40, 1, 3, 3, 2, 1, 0), &sq, true, true},
        /* a padded 5x5/2 convolution, floor mode, channels not a multiple of 12 */
        {dense_conv("pair 5x5/2 pad 2 3->13", 1, 3, 30, 33, 13, 1, 5, 5, 2, 1, 2), &floor3, false,
         true},
        /* the phase product (3 -> 32, padded; stride (2, 1), two images), the im2col product
         * (6 input channels) */
        {dense_conv("pair phase 3->32 pad 1", 1, 3, 33, 31, 32, 1, 3, 3, 2, 1, 1), &floor3, false,
         true},
        {{"pair phase s(2,1) 2->20 n2",
          2,
          2,
          37,
          19,
          20,
          2,
          3,
          2,
          2,
          1,
          1,
          1,
          1,
          {1, 0, 0, 1},
          0,
          false,
          false},
         &floor3,
         true,
         true},
        {dense_conv("pair im2col 6->48", 1, 6, 41, 39, 48, 1, 3, 3, 2, 1, 0), &floor3, false, true},
        /* padded pools with the phase product: ResNet's stem and pool (smaller), padding 2,
         * ceil_mode adding nothing (38 + 2 - 3 even) */
        {dense_conv("pair stem 7x7/2 3->64 pool pad 1", 1, 3, 45, 40, 64, 1, 7, 7, 2, 1, 3),
         &padded, false, true},
        {dense_conv("pair padded pool", 1, 3, 40, 40, 48, 1, 3, 3, 2, 1, 1), &padded, false, true},
        {dense_conv("pair pool pad 2 n2", 2, 3, 31, 36, 20, 1, 3, 3, 2, 1, 0), &padded2, true,
         true},
        {dense_conv("pair pool pad 1 ceil even", 1, 2, 77, 77, 24, 1, 3, 3, 2, 1, 1), &padded_ceil,
         false, true},
        /* declined: ceil_mode with a last window past the plane (28 rows); 2x2 pools;
         * convolutions other kernels compute (direct: 32 channels of 72 taps; a 1x1 read in
         * place) */
        {dense_conv("pair ceil past the plane", 1, 3, 57, 61, 48, 1, 3, 3, 2, 1, 0), &sq, false,
         false},
        {dense_conv("pair 2x2 pool", 1, 3, 40, 40, 48, 1, 3, 3, 2, 1, 1), &two, false, false},
        /* declined: a padded pool after the im2col product; ceil_mode past the padding */
        {dense_conv("pair im2col padded pool", 1, 6, 41, 39, 48, 1, 3, 3, 2, 1, 0), &padded, false,
         false},
        {dense_conv("pair pool pad 1 ceil odd", 1, 3, 40, 40, 48, 1, 3, 3, 2, 1, 1), &padded_ceil,
         false, false},
        {dense_conv("pair direct 8->32", 1, 8, 33, 31, 32, 1, 3, 3, 2, 1, 1), &floor3, false,
         false},
        {dense_conv("pair 1x1 24->40", 1, 24, 23, 29, 40, 1, 1, 1, 1, 1, 0), &floor3, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_pair(&cases[i].s, cases[i].pool, cases[i].first, cases[i].take, pool2);
    /* a bias of shape (C) broadcasts along W (here as wide as C): declined */
    Shape s = dense_conv("pair 1-D bias", 1, 3, 97, 97, 48, 1, 3, 3, 2, 1, 0);
    int64_t xs[4] = {1, 3, 97, 97}, ws[4] = {48, 3, 3, 3}, bs[1] = {48};
    DLTensor *x = tensor_rand(4, xs), *w = tensor_rand(4, ws), *b = tensor_rand(1, bs);
    char err[256];
    bool declined = false;
    DLTensor *got = run_pair(&s, &sq, false, x, w, b, NULL, NULL, &declined, err, sizeof err);
    CHECK(got == NULL && declined, "a 1-D bias taken as per channel");
    tensor_free(got), tensor_free(x), tensor_free(w), tensor_free(b);
}

/* ---- the phase product (conv_phase.c): few input channels, a stride ----------------------- */

/* s through check_shape; where the machine has level `at`, the path whose count taken() gives
 * (name `path`) must have computed it */
static void check_taken(const Shape *s, SupPool *pool2, uint64_t (*taken)(void), SupIsa at,
                        const char *path) {
    uint64_t n0 = taken();
    check_shape(s, pool2);
    if (sup_isa_detected() >= at) CHECK(taken() > n0, "%s: not computed by %s", s->what, path);
}

static void check_phase(const Shape *s, SupPool *pool2) {
    check_taken(s, pool2, kern_conv_phase_taken, SUP_ISA_AVX512, "the phase product");
}

/* ---- Winograd F(4x4, 3x3) (winograd.c): 3x3 stride 1, 16+ channels, 12+ outputs a side ---- */

/* Both levels: the blocked form (over images on 1 thread), by output channels, three passes
 * (40 -> 20 on 2 threads: few tiles and cin > cout; 200, 400 + 20 and 172 channels each side: V
 * and M of 32 tiles past 1.5 MiB). At AVX2 (8 tiles a vector): input rows masked at both edges
 * (13 and 14 wide) and read whole (55 wide), vectors spanning tile rows, a last vector of 1-7
 * tiles, and in the three passes the d arrays in two chunks of tile rows (63 + 18 tiles), the
 * second chunk's vectors straddling two B panels. At AVX2 the test asserts the
 * Winograd kernel ran (kern_conv_winograd_avx2_taken). */
static void winograd_tests(SupPool *pool2) {
    const Shape fixed[] = {
        dense_conv("winograd 3x3 16->64 27x27", 2, 16, 27, 27, 64, 1, 3, 3, 1, 1, 1),
        dense_conv("winograd 3x3 48->64 13x13", 1, 48, 13, 13, 64, 1, 3, 3, 1, 1, 1),
        dense_conv("winograd 3x3 40->20 12x14 pad 0", 1, 40, 14, 16, 20, 1, 3, 3, 1, 1, 0),
        dense_conv("winograd 3x3 16->24 55x55", 1, 16, 55, 55, 24, 1, 3, 3, 1, 1, 1),
        dense_conv("winograd 3x3 200->200 14x14", 1, 200, 14, 14, 200, 1, 3, 3, 1, 1, 1),
        dense_conv("winograd 3x3 400->20 14x13 pad 0", 1, 400, 16, 15, 20, 1, 3, 3, 1, 1, 0),
        dense_conv("winograd 3x3 172->172 36x34", 1, 172, 36, 34, 172, 1, 3, 3, 1, 1, 1),
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        check_taken(&fixed[i], pool2, kern_conv_winograd_avx2_taken, SUP_ISA_AVX2,
                    "Winograd at AVX2");
}

static void phase_tests(SupPool *pool2) {
    const Shape fixed[] = {
        /* SqueezeNet's first layer (smaller), ResNet's stem, MobileNetV2's first layer */
        dense_conv("phase 3x3/2 3->64 57x61", 1, 3, 57, 61, 64, 1, 3, 3, 2, 1, 0),
        dense_conv("phase 7x7/2 3->64 pad 3", 1, 3, 45, 40, 64, 1, 7, 7, 2, 1, 3),
        dense_conv("phase 3x3/2 3->32 pad 1 n2", 2, 3, 33, 35, 32, 1, 3, 3, 2, 1, 1),
        /* a grid exactly 16 wide (vectors on whole rows); 21 wide (vectors across two rows);
         * one output row */
        dense_conv("phase 3x3/2 1->16 grid 16", 1, 1, 20, 32, 16, 1, 3, 3, 2, 1, 0),
        dense_conv("phase 5x5/2 4->29 grid 21", 1, 4, 30, 42, 29, 1, 5, 5, 2, 1, 0),
        dense_conv("phase 3x3/2 2->70 one row", 1, 2, 3, 64, 70, 1, 3, 3, 2, 1, 0),
        /* dilation; strides (2, 1), (3, 2), (1, 2); asymmetric padding */
        dense_conv("phase 3x3/2 dil 2 3->24 pad 2", 1, 3, 31, 37, 24, 1, 3, 3, 2, 2, 2),
        {"phase 3x2 s(2,1) 2->20 pad 1,0,0,1",
         2,
         2,
         23,
         19,
         20,
         2,
         3,
         2,
         2,
         1,
         1,
         1,
         1,
         {1, 0, 0, 1},
         0,
         false,
         false},
        {"phase 4x4 s(3,2) 1->17 pad 0,2,1,3",
         1,
         1,
         26,
         40,
         17,
         1,
         4,
         4,
         3,
         2,
         1,
         1,
         1,
         {0, 2, 1, 3},
         0,
         false,
         false},
        {"phase 2x3 s(1,2) dil (2,1) 3->36",
         1,
         3,
         12,
         50,
         36,
         3,
         2,
         3,
         1,
         2,
         2,
         1,
         1,
         {1, 1, 1, 1},
         0,
         false,
         false},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        check_phase(&fixed[i], pool2);
    for (int i = 0; i < 10; i++) { /* random: 1-4 channels, strides, kernels, padding, dilation */
        int64_t sh = 1 + rnd(3), sw = sh == 1 ? 2 : 1 + rnd(2), kh = 2 + rnd(5), kw = 2 + rnd(5);
        int64_t dh = rnd(4) == 0 ? 2 : 1, dw = rnd(4) == 0 ? 2 : 1, cin = 1 + rnd(4);
        int64_t cout = 16 + rnd(60), h = (kh - 1) * dh + 1 + rnd(30), w = 32 * sw + rnd(40);
        int64_t p[4] = {rnd(kh), rnd(kw), rnd(kh), rnd(kw)};
        if (cout * kh * kw < 32 * sh * sw) cout = 32 * sh * sw / (kh * kw) + 16;
        Shape s = {"random phase",
                   1 + rnd(2),
                   cin,
                   h,
                   w,
                   cout,
                   cin,
                   kh,
                   kw,
                   sh,
                   sw,
                   dh,
                   dw,
                   1,
                   {p[0], p[1], p[2], p[3]},
                   0,
                   false,
                   false};
        check_phase(&s, pool2);
    }
}

int main(int argc, char **argv) {
    const char *seed_env = getenv("RLY_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : 20261126;
    int n_random = argc > 1 ? atoi(argv[1]) : 24;
    printf("seed %llu (RLY_SEED replays)\n", (unsigned long long)seed);
    rng = seed * 2654435761u + 0x9e3779b97f4a7c15ull;
    SupPool *pool2 = sup_pool_new(2);

    const Shape fixed[] = {
        /* depthwise 3x3, stride 1 and 2, pad 1: MobileNetV2's planes and odd ones */
        depthwise("dw3 s1 7x7 x40", 1, 40, 7, 7, 1, 3, 1, 1, 1),
        depthwise("dw3 s1 14x14 x33", 1, 33, 14, 14, 1, 3, 1, 1, 1),
        depthwise("dw3 s1 13x29 x17", 2, 17, 13, 29, 1, 3, 1, 1, 1),
        depthwise("dw3 s1 1x1 x5", 1, 5, 1, 1, 1, 3, 1, 1, 1),
        depthwise("dw3 s1 2x3 x16", 1, 16, 2, 3, 1, 3, 1, 1, 1),
        depthwise("dw3 s1 60x61 x9", 1, 9, 60, 61, 1, 3, 1, 1, 1),
        depthwise("dw3 s1 130x9 x3", 1, 3, 130, 9, 1, 3, 1, 1, 1),
        depthwise("dw3 s2 14x14 x24", 1, 24, 14, 14, 1, 3, 2, 1, 1),
        depthwise("dw3 s2 15x15 x31", 1, 31, 15, 15, 1, 3, 2, 1, 1),
        depthwise("dw3 s2 56x56 x16", 1, 16, 56, 56, 1, 3, 2, 1, 1),
        depthwise("dw3 s2 5x4 x7", 2, 7, 5, 4, 1, 3, 2, 1, 1),
        depthwise("dw3 s2 112x37 x8", 1, 8, 112, 37, 1, 3, 2, 1, 1),
        /* planes wide enough for several strips of rows (the channel-lane buffers) */
        depthwise("dw3 s1 40x300 x17", 1, 17, 40, 300, 1, 3, 1, 1, 1),
        depthwise("dw3 s2 45x301 x9", 1, 9, 45, 301, 1, 3, 2, 1, 1),
        depthwise("dw3 s2 pad 0 23x1500 x3", 1, 3, 23, 1500, 1, 3, 2, 1, 0),
        depthwise("dw3 s1 pad 0 9x11 x18", 1, 18, 9, 11, 1, 3, 1, 1, 0),
        depthwise("dw3 s1 pad 2 9x11 x18", 1, 18, 9, 11, 1, 3, 1, 1, 2),
        depthwise("dw3 s2 pad 0 9x11 x18", 1, 18, 9, 11, 1, 3, 2, 1, 0),
        /* asymmetric padding (top, left, bottom, right) */
        {"dw3 s1 pad 0,1,2,0",
         1,
         20,
         10,
         12,
         20,
         1,
         3,
         3,
         1,
         1,
         1,
         1,
         20,
         {0, 1, 2, 0},
         0,
         false,
         false},
        {"dw3 s2 pad 1,0,0,1",
         1,
         20,
         11,
         10,
         20,
         1,
         3,
         3,
         2,
         2,
         1,
         1,
         20,
         {1, 0, 0, 1},
         0,
         false,
         false},
        /* channel multipliers, other sizes, strides, dilation */
        depthwise("dw3 s1 mult 2", 1, 9, 13, 13, 2, 3, 1, 1, 1),
        depthwise("dw3 s2 mult 3", 1, 5, 14, 15, 3, 3, 2, 1, 1),
        depthwise("dw5 s1", 1, 19, 17, 15, 1, 5, 1, 1, 2),
        depthwise("dw5 s2", 1, 19, 17, 15, 1, 5, 2, 1, 2),
        depthwise("dw3 dilation 2", 1, 17, 16, 15, 1, 3, 1, 2, 2),
        depthwise("dw3 s3", 1, 17, 16, 15, 1, 3, 3, 1, 1),
        depthwise("dw2 s1", 1, 17, 9, 10, 1, 2, 1, 1, 0),
        depthwise("dw7 s1 pad 3", 1, 12, 11, 11, 1, 7, 1, 1, 3),
        {"dw 3x5 s(1,2)",
         1,
         18,
         12,
         17,
         18,
         1,
         3,
         5,
         1,
         2,
         1,
         1,
         18,
         {1, 2, 1, 2},
         0,
         false,
         false},
        /* grouped, not depthwise */
        dense_conv("grouped 3x3 cin_g 2", 1, 16, 12, 13, 24, 8, 3, 3, 1, 1, 1),
        /* the direct convolution: 16+ outputs, 64+ taps per group */
        dense_conv("direct 3x3 64->64 9x9", 1, 64, 9, 9, 64, 1, 3, 3, 1, 1, 0),
        dense_conv("direct 3x3/2 24->40 pad 1", 1, 24, 15, 13, 40, 1, 3, 3, 2, 1, 1),
        dense_conv("direct 4x4/2 32->48", 1, 32, 20, 19, 48, 1, 4, 4, 2, 1, 0),
        dense_conv("direct 8x8/4 4->33", 2, 4, 36, 36, 33, 1, 8, 8, 4, 1, 0),
        dense_conv("direct 3x3 dil 2 groups 2", 1, 32, 13, 14, 64, 2, 3, 3, 1, 2, 2),
        dense_conv("direct 3x3 72->17 7x7", 1, 72, 7, 7, 17, 1, 3, 3, 1, 1, 1),
        /* 2304 taps: deep panels, whose tiles prefetch the weights ahead (DT_NEAR_TAPS) */
        dense_conv("direct 3x3 256->40 5x6", 1, 256, 5, 6, 40, 1, 3, 3, 1, 1, 1),
        /* the row tiles (one pointer, corners i * stride apart): 3x3/2 at 28 outputs a row (R =
         * 14), 5x5 stride 1 at 21 a row (some tiles in one row, some across two), a last
         * panel of 8 channels; strides (1, 2) and (2, 1) */
        dense_conv("row 3x3/2 32->40 pad 1 56x56", 1, 32, 56, 56, 40, 1, 3, 3, 2, 1, 1),
        dense_conv("row 5x5 16->48 pad 2 4x21", 2, 16, 4, 21, 48, 1, 5, 5, 1, 1, 2),
        strides(dense_conv("row 3x3/(1,2) 24->32 9x40", 1, 24, 9, 40, 32, 1, 3, 3, 1, 1, 0), 1, 2),
        strides(dense_conv("row 3x3/(2,1) 24->20 pad 1 9x26", 1, 24, 9, 26, 20, 1, 3, 3, 1, 1, 1),
                2, 1),
        /* 1x1: direct on small planes, the GEMM in place on larger ones, strided */
        dense_conv("1x1 160->96 7x7", 1, 160, 7, 7, 96, 1, 1, 1, 1, 1, 0),
        dense_conv("1x1 300->64 14x14", 1, 300, 14, 14, 64, 1, 1, 1, 1, 1, 0),
        dense_conv("1x1 24->37 23x29", 2, 24, 23, 29, 37, 1, 1, 1, 1, 1, 0),
        dense_conv("1x1/2 64->40 15x15", 1, 64, 15, 15, 40, 1, 1, 1, 2, 1, 0),
        /* strided 1x1: the input sampled first (sample_input), rows of 38 outputs (16, 16, 6)
         * and 17 (16, 1), each row's last sample at w - 1 or w - 2; two images, two groups;
         * strides (3, 2) and (2, 3) */
        dense_conv("1x1/2 48->72 37x75 (product)", 2, 48, 37, 75, 72, 1, 1, 1, 2, 1, 0),
        dense_conv("1x1/2 64->32 16x34 groups 2", 1, 64, 16, 34, 32, 2, 1, 1, 2, 1, 0),
        dense_conv("1x1/2 96->48 9x33", 1, 96, 9, 33, 48, 1, 1, 1, 2, 1, 0),
        strides(dense_conv("1x1/(3,2) 40->24 14x20", 2, 40, 14, 20, 24, 1, 1, 1, 1, 1, 0), 3, 2),
        strides(dense_conv("1x1/(2,3) 32->40 13x31", 1, 32, 13, 31, 40, 1, 1, 1, 1, 1, 0), 2, 3),
        /* few taps: direct with at most 32 output channels, else the im2col GEMM */
        dense_conv("direct 3x3/2 3->32 (27 taps)", 1, 3, 33, 31, 32, 1, 3, 3, 2, 1, 1),
        dense_conv("direct 4x4 1->20 (16 taps)", 2, 1, 17, 19, 20, 1, 4, 4, 1, 1, 2),
        dense_conv("im2col 3x3/2 3->48", 1, 3, 33, 31, 48, 1, 3, 3, 2, 1, 1),
        dense_conv("im2col 3x3 5->7", 1, 5, 10, 11, 7, 1, 3, 3, 1, 1, 1),
        dense_conv("im2col 2x2 3->24 (12 taps)", 1, 3, 10, 11, 24, 1, 2, 2, 1, 1, 0),
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        check_shape(&fixed[i], pool2);
    pair_tests(pool2);
    phase_tests(pool2);
    winograd_tests(pool2);

    /* blocked layouts (conv_nchwc.c): NCHW16c at AVX-512 by the register tiles (every output
     * block count per tile, rows of more positions than a tile, window edges, windows wholly in
     * the padding), NCHW8c and NCHW4c by the portable code */
    const Shape nchwc[] = {
        blocked(dense_conv("b16 1x1 160->96 7x7", 1, 160, 7, 7, 96, 1, 1, 1, 1, 1, 0), 16),
        blocked(dense_conv("b16 1x1 64->64 14x14", 1, 64, 14, 14, 64, 1, 1, 1, 1, 1, 0), 16),
        blocked(dense_conv("b16 1x1 16->32 13x11 n2", 2, 16, 13, 11, 32, 1, 1, 1, 1, 1, 0), 16),
        blocked(dense_conv("b16 1x1 48->80 5x37", 1, 48, 5, 37, 80, 1, 1, 1, 1, 1, 0), 16),
        blocked(dense_conv("b16 1x1/2 32->48 15x15", 1, 32, 15, 15, 48, 1, 1, 1, 2, 1, 0), 16),
        blocked(dense_conv("b16 1x1 pad 1 16->16", 1, 16, 6, 7, 16, 1, 1, 1, 1, 1, 1), 16),
        blocked(dense_conv("b16 3x3 32->48 9x10", 1, 32, 9, 10, 48, 1, 3, 3, 1, 1, 1), 16),
        blocked(dense_conv("b16 3x3/2 16->64 17x16", 1, 16, 17, 16, 64, 1, 3, 3, 2, 1, 1), 16),
        blocked(dense_conv("b16 3x3 dil 2 32->32", 1, 32, 11, 12, 32, 1, 3, 3, 1, 2, 2), 16),
        blocked(dense_conv("b16 5x5 16->16 pad 2 w 40", 1, 16, 7, 40, 16, 1, 5, 5, 1, 1, 2), 16),
        blocked(dense_conv("b16 3x3 groups 2 64->64", 1, 64, 8, 9, 64, 2, 3, 3, 1, 1, 1), 16),
        blocked(dense_conv("b16 3x3 groups 4 64->128", 2, 64, 6, 5, 128, 4, 3, 3, 2, 1, 1), 16),
        blocked(dense_conv("b16 3x3 pad 3 (empty windows)", 1, 16, 4, 5, 32, 1, 3, 3, 1, 1, 3), 16),
        blocked(dense_conv("b16 3x3 dil 3 w 3 pad 3", 1, 16, 3, 3, 16, 1, 3, 3, 1, 3, 3), 16),
        blocked((Shape){"b16 3x3 pad 0,1,2,0",
                        1,
                        32,
                        10,
                        12,
                        32,
                        32,
                        3,
                        3,
                        1,
                        1,
                        1,
                        1,
                        1,
                        {0, 1, 2, 0},
                        0,
                        false,
                        false},
                16),
        blocked(depthwise("b16 dw3 s1 56x56 x32", 1, 32, 56, 56, 1, 3, 1, 1, 1), 16),
        blocked(depthwise("b16 dw3 s2 29x30 x48", 1, 48, 29, 30, 1, 3, 2, 1, 1), 16),
        blocked(depthwise("b16 dw3 s1 7x7 x64 n2", 2, 64, 7, 7, 1, 3, 1, 1, 1), 16),
        blocked(depthwise("b16 dw5 s2 pad 2", 1, 16, 15, 17, 1, 5, 2, 1, 2), 16),
        blocked(depthwise("b16 dw3 dil 2", 1, 16, 12, 33, 1, 3, 1, 2, 2), 16),
        blocked(depthwise("b16 dw3 pad 0", 1, 32, 9, 11, 1, 3, 1, 1, 0), 16),
        blocked(depthwise("b16 dw3 pad 3", 1, 16, 5, 5, 1, 3, 1, 1, 3), 16),
        /* stride 1, 3 wide, pad <= 1: rows in pieces of up to 14 (dw_run16), the last short */
        blocked(depthwise("b16 dw3 s1 9x17 x32", 1, 32, 9, 17, 1, 3, 1, 1, 1), 16),
        blocked(depthwise("b16 dw3 s1 4x2 x16", 1, 16, 4, 2, 1, 3, 1, 1, 1), 16),
        blocked(depthwise("b16 dw3 s1 1x1 x16", 1, 16, 1, 1, 1, 3, 1, 1, 1), 16),
        blocked(depthwise("b16 dw3 s1 3x31 x16 pad 0", 1, 16, 3, 31, 1, 3, 1, 1, 0), 16),
        blocked((Shape){"b16 dw3 s1 pad 1,0,0,1 8x19",
                        1,
                        16,
                        8,
                        19,
                        16,
                        1,
                        3,
                        3,
                        1,
                        1,
                        1,
                        1,
                        16,
                        {1, 0, 0, 1},
                        0,
                        false,
                        false},
                16),
        blocked((Shape){"b16 dw3 s1 pad 0,1,1,0 6x16",
                        2,
                        32,
                        6,
                        16,
                        32,
                        1,
                        3,
                        3,
                        1,
                        1,
                        1,
                        1,
                        32,
                        {0, 1, 1, 0},
                        0,
                        false,
                        false},
                16),
        blocked((Shape){"b16 dw3 s2 pad 1,0,0,1",
                        1,
                        16,
                        11,
                        10,
                        16,
                        1,
                        3,
                        3,
                        2,
                        2,
                        1,
                        1,
                        16,
                        {1, 0, 0, 1},
                        0,
                        false,
                        false},
                16),
        blocked(dense_conv("b8 3x3 16->24", 1, 16, 9, 10, 24, 1, 3, 3, 1, 1, 1), 8),
        blocked(dense_conv("b8 1x1 24->8 n2", 2, 24, 5, 6, 8, 1, 1, 1, 1, 1, 0), 8),
        blocked(depthwise("b8 dw3 s2", 1, 24, 13, 14, 1, 3, 2, 1, 1), 8),
        blocked(dense_conv("b4 3x3/2 groups 2", 1, 8, 9, 9, 16, 2, 3, 3, 2, 1, 1), 4),
        /* NCHW data into NCHW16c (a first layer, channels 16 does not divide) */
        plain(dense_conv("plain b16 3x3/2 3->32", 1, 3, 33, 31, 32, 1, 3, 3, 2, 1, 1), 16),
        plain(dense_conv("plain b16 1x1 24->144 n2", 2, 24, 9, 11, 144, 1, 1, 1, 1, 1, 0), 16),
        plain(dense_conv("plain b16 5x5 7->64 pad 2 dil 2", 1, 7, 12, 40, 64, 1, 5, 5, 1, 2, 2),
              16),
        plain(dense_conv("plain b8 3x3 5->24", 1, 5, 10, 9, 24, 1, 3, 3, 1, 1, 1), 8),
        blocked(depthwise("b4 dw3", 1, 12, 6, 7, 1, 3, 1, 1, 1), 4),
    };
    for (size_t i = 0; i < sizeof nchwc / sizeof nchwc[0]; i++)
        check_shape(&nchwc[i], pool2);
    /* NCHW{b}c data into an NCHW result (1x1 projections to channels b does not divide:
     * MobileNetV2's 144 -> 24): the GEMM packs B from the blocks; planes not a multiple of 16 or
     * 32 wide, K blocks of channels not starting on a block, several images, 8 and 4 blocks by
     * the portable packer. Other shapes go to the reference kernel. */
    const Shape to_nchw[] = {
        projection("to NCHW b16 1x1 144->24 9x11", 1, 144, 9, 11, 24, 16),
        projection("to NCHW b16 1x1 16->12 1x1", 1, 16, 1, 1, 12, 16),
        projection("to NCHW b16 1x1 32->40 7x7 n2", 2, 32, 7, 7, 40, 16),
        projection("to NCHW b16 1x1 592->24 4x12", 1, 592, 4, 12, 24, 16),
        projection("to NCHW b16 1x1 96->24 16x16", 1, 96, 16, 16, 24, 16),
        projection("to NCHW b8 1x1 24->20 5x13 n2", 2, 24, 5, 13, 20, 8),
        projection("to NCHW b4 1x1 8->6 3x3", 1, 8, 3, 3, 6, 4),
    };
    for (size_t i = 0; i < sizeof to_nchw / sizeof to_nchw[0]; i++)
        check_to_plain(&to_nchw[i], true, pool2);
    const Shape to_nchw_ref[] = {
        to_plain(dense_conv("to NCHW b16 3x3 32->24", 1, 32, 6, 7, 24, 1, 3, 3, 1, 1, 1), 16),
        to_plain(dense_conv("to NCHW b16 1x1/2 32->24", 1, 32, 9, 9, 24, 1, 1, 1, 2, 1, 0), 16),
        to_plain(dense_conv("to NCHW b16 1x1 groups 2", 1, 32, 5, 5, 24, 2, 1, 1, 1, 1, 0), 16),
    };
    for (size_t i = 0; i < sizeof to_nchw_ref / sizeof to_nchw_ref[0]; i++)
        check_to_plain(&to_nchw_ref[i], false, pool2);
    for (int i = 0; i < n_random; i++) { /* random blocked shapes */
        int64_t b = rnd(3) ? 16 : rnd(2) ? 8 : 4, k = 1 + rnd(5), st = 1 + rnd(3);
        int64_t d = k > 1 && rnd(4) == 0 ? 2 : 1, p = rnd(3), h = 1 + rnd(20), w = 1 + rnd(40);
        if ((k - 1) * d + 1 > h + 2 * p || (k - 1) * d + 1 > w + 2 * p) continue;
        Shape sh;
        if (rnd(4) == 0) {
            sh = plain(dense_conv("random plain", 1 + rnd(2), 1 + rnd(20), h, w, b * (1 + rnd(5)),
                                  1, k, k, st, d, p),
                       b);
            check_shape(&sh, pool2);
            continue;
        }
        if (rnd(2)) {
            sh = depthwise("random blocked depthwise", 1 + rnd(2), b * (1 + rnd(4)), h, w, 1, k, st,
                           d, p);
        } else {
            int64_t g = rnd(3) == 0 ? 2 : 1;
            sh = dense_conv("random blocked", 1 + rnd(2), g * b * (1 + rnd(3)), h, w,
                            g * b * (1 + rnd(5)), g, k, k, st, d, p);
        }
        sh = blocked(sh, b);
        check_shape(&sh, pool2);
    }

    /* random depthwise shapes: the 3x3 paths on odd planes and channel counts */
    for (int i = 0; i < n_random; i++) {
        int64_t s = 1 + rnd(2), c = 1 + rnd(40), h = 1 + rnd(30), w = 1 + rnd(30);
        int64_t m = rnd(4) == 0 && c > 1 ? 2 : 1, p = rnd(3), k = rnd(5) == 0 ? 1 + rnd(5) : 3;
        int64_t d = k > 1 && rnd(5) == 0 ? 2 : 1;
        if ((k - 1) * d + 1 > h + 2 * p || (k - 1) * d + 1 > w + 2 * p) continue;
        Shape sh = depthwise("random depthwise", 1 + rnd(2), c, h, w, m, k, s, d, p);
        check_shape(&sh, pool2);
    }
    printf("levels scalar .. %s\n", sup_isa_name(sup_isa_detected()));
    sup_pool_free(pool2);
    return check_summary();
}
