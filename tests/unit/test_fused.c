/* test_fused.c - fused elementwise programs (src/kernels/fast/fused.c) against the reference
 * kernels. Random programs (1-6 operands, 1-10 steps of every FxOp) over random float32 operands
 * broadcast to a random result shape (rank 0-4, per-channel, per-row, scalar and full operands,
 * empty results), with NaN, infinities and negative values among the inputs; the expected result
 * runs each step as its operator's reference kernel on full-size tensors. Every program runs at
 * every instruction-set level the machine has, on 1 and 2 threads, and in place over a
 * full-size operand. Exact operators must match bit for bit (NaNs as NaNs); the transcendental
 * ones within 4e-6 relative (+1e-6 absolute, compounding per step). Deterministic (seed fixed;
 * test_fused [N [SEED]]). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fast/fused.h"
#include "kernels/kernel.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t next(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}
static float rnd_value(void) {
    switch (next(40)) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return 0.0f;
    case 4: return -0.0f;
    default: return ((float)next(20001) - 10000.0f) / 2500.0f;
    }
}

typedef struct Tensor {
    DLTensor t;
    int64_t shape[K_MAX_DIMS];
    float *data;
} Tensor;

static void tensor_init(Tensor *x, uint32_t nd, const int64_t *shape) {
    memset(x, 0, sizeof *x);
    memcpy(x->shape, shape, sizeof(int64_t) * nd);
    int64_t n = k_shape_numel(nd, shape);
    x->data = aligned_alloc(64, ((size_t)(n ? n : 1) * 4 + 63) / 64 * 64);
    x->t = (DLTensor){.data = x->data,
                      .device = {kDLCPU, 0},
                      .ndim = (int)nd,
                      .dtype = {kDLFloat, 32, 1},
                      .shape = x->shape};
}

/* ---- the reference: one kernel call per step ------------------------------------------------ */

static const uint32_t op_of[FX_N_OPS] = {
    [FX_ADD] = OP_ID_ADD,     [FX_SUB] = OP_ID_SUBTRACT,    [FX_MUL] = OP_ID_MULTIPLY,
    [FX_DIV] = OP_ID_DIVIDE,  [FX_MAX] = OP_ID_MAXIMUM,     [FX_MIN] = OP_ID_MINIMUM,
    [FX_POW] = OP_ID_POWER,   [FX_RELU] = OP_ID_NN_RELU,    [FX_LEAKY] = OP_ID_NN_LEAKY_RELU,
    [FX_CLIP] = OP_ID_CLIP,   [FX_SIGMOID] = OP_ID_SIGMOID, [FX_TANH] = OP_ID_TANH,
    [FX_EXP] = OP_ID_EXP,     [FX_ERF] = OP_ID_ERF,         [FX_SQRT] = OP_ID_SQRT,
    [FX_RSQRT] = OP_ID_RSQRT, [FX_NEG] = OP_ID_NEGATIVE,    [FX_ABS] = OP_ID_ABS,
    [FX_COPY] = OP_ID_COPY,
};
static bool exact_op(int op) {
    return op != FX_POW && op != FX_SIGMOID && op != FX_TANH && op != FX_EXP && op != FX_ERF &&
           op != FX_RSQRT;
}

static Tensor *ref_out;
static int ref_alloc(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    (void)dt;
    tensor_init(ref_out, ndim, shape);
    memset(ref_out->data, 0, (size_t)k_shape_numel(ndim, shape) * 4);
    kc->out[i] = &ref_out->t;
    return 0;
}

static bool ref_step(const FxStep *st, const DLTensor *a, const DLTensor *b, Tensor *out) {
    KAttr attrs[2];
    uint32_t n_attrs = 0;
    if (st->op == FX_CLIP) {
        attrs[0] = (KAttr){.name = "a_min", .kind = KA_FLOAT, .f = st->p0};
        attrs[1] = (KAttr){.name = "a_max", .kind = KA_FLOAT, .f = st->p1};
        n_attrs = 2;
    } else if (st->op == FX_LEAKY) {
        attrs[0] = (KAttr){.name = "alpha", .kind = KA_FLOAT, .f = st->p0};
        n_attrs = 1;
    }
    bool bin = st->op < FX_RELU;
    const DLTensor *in[2] = {a, b};
    uint32_t start[2] = {0, 1}, len[2] = {1, 1};
    uint8_t tup[2] = {0, 0};
    DLTensor *outs[1] = {NULL};
    char err[256] = "";
    ref_out = out;
    KCall kc = {.op = "step",
                .attrs = attrs,
                .n_attrs = n_attrs,
                .n_args = bin ? 2 : 1,
                .arg_start = start,
                .arg_len = len,
                .arg_tuple = tup,
                .in = in,
                .n_in = bin ? 2 : 1,
                .out = outs,
                .n_out = 1,
                .alloc = ref_alloc,
                .err = err,
                .err_cap = sizeof err};
    int rc = kern_ref_lookup(op_of[st->op])(&kc);
    k_call_release(&kc);
    if (rc != 0) printf("reference kernel failed: %s\n", err);
    return rc == 0;
}

/* ---- one random program --------------------------------------------------------------------- */

static int n_pass, n_fail;

static bool close_enough(float got, float want, double tol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    if (tol == 0) return memcmp(&got, &want, 4) == 0 || (got == 0 && want == 0);
    return fabs((double)got - want) <= tol * fabs((double)want) + 1e-6;
}

/* Evaluate bound program b over tiles, as a product's tail does (KEpilogue.apply2): the result
 * seen as rows of ld elements (ld: its last dim, or its last two merged, so rows may be wider
 * than a block), cut into tiles of up to h rows by w columns, each one fx_range2 call. */
static void tiles(const FxBound *b, uint32_t nd, const int64_t *shape) {
    int64_t total = k_shape_numel(nd, shape);
    if (total == 0) return;
    int64_t ld = nd == 0 ? 1 : shape[nd - 1];
    if (nd >= 2 && next(2)) ld *= shape[nd - 2];
    int64_t rows = total / ld, h = 1 + next(13), w = 1 + next((uint32_t)ld);
    for (int64_t i = 0; i < rows; i += h)
        for (int64_t j = 0; j < ld; j += w)
            fx_range2(b, i * ld + j, rows - i < h ? rows - i : h, ld - j < w ? ld - j : w, ld);
}

static void one(int trial, SupPool *pool2) {
    /* the result shape and the operands' broadcast shapes */
    uint32_t nd = next(5);
    int64_t shape[4];
    for (uint32_t d = 0; d < nd; d++)
        shape[d] = next(12) == 0 ? 0 : 1 + next(d + 1 == nd ? 70 : 9);
    FxProgram p = {.n_operands = 1 + next(6)};
    Tensor ops[FX_MAX_OPERANDS];
    const DLTensor *opp[FX_MAX_OPERANDS];
    for (uint32_t i = 0; i < p.n_operands; i++) {
        int64_t sh[4];
        uint32_t ond = i == 0 ? nd : next(nd + 1); /* operand 0 full: the result's shape */
        for (uint32_t d = 0; d < ond; d++) {
            int64_t full = shape[nd - ond + d];
            sh[d] = i == 0 || next(2) ? full : 1;
        }
        tensor_init(&ops[i], ond, sh);
        int64_t n = k_shape_numel(ond, sh);
        for (int64_t j = 0; j < n; j++)
            ops[i].data[j] = rnd_value();
        opp[i] = &ops[i].t;
    }
    p.n_steps = 1 + next(10);
    bool exact = true;
    for (uint32_t s = 0; s < p.n_steps; s++) {
        FxStep *st = &p.step[s];
        st->op = (uint8_t)next(FX_N_OPS);
        uint32_t nv = p.n_operands + s;
        /* one argument of the result's shape (operand 0 or a step), the other anything, in
         * either order */
        uint16_t full = (uint16_t)(s == 0 || next(3) == 0 ? 0 : p.n_operands + next(s));
        uint16_t other = (uint16_t)next(nv);
        bool swap = st->op < FX_RELU && next(2);
        st->a = swap ? other : full;
        st->b = swap ? full : other;
        st->p0 = (float)next(9) - 4.0f;
        st->p1 = st->p0 + (float)next(6);
        exact = exact && exact_op(st->op);
    }
    uint32_t rnd;
    int64_t rshape[K_MAX_DIMS];
    if (!fx_shape(&p, opp, &rnd, rshape)) {
        printf("FAIL trial %d: fx_shape refused a program of the result's shape\n", trial);
        n_fail++;
        goto done;
    }
    /* the reference, step by step */
    Tensor vals[FX_MAX_STEPS];
    const DLTensor *vp[FX_MAX_OPERANDS + FX_MAX_STEPS];
    for (uint32_t i = 0; i < p.n_operands; i++)
        vp[i] = opp[i];
    for (uint32_t s = 0; s < p.n_steps; s++) {
        const FxStep *st = &p.step[s];
        if (!ref_step(st, vp[st->a], vp[st->b], &vals[s])) {
            n_fail++;
            for (uint32_t j = 0; j < s; j++)
                free(vals[j].data);
            goto done;
        }
        vp[p.n_operands + s] = &vals[s].t;
    }
    const Tensor *want = &vals[p.n_steps - 1];
    int64_t total = k_shape_numel(rnd, rshape);
    double tol = exact ? 0 : 4e-6 * p.n_steps;
    for (int level = SUP_ISA_SCALAR; level <= (int)sup_isa_detected(); level++) {
        sup_isa_force((SupIsa)level);
        /* 1 thread, 2 threads, in place over operand 0, 2-D tiles (fx_range2) */
        for (int mode = 0; mode < 4; mode++) {
            Tensor out;
            tensor_init(&out, rnd, rshape);
            float *dst = out.data;
            Tensor saved;
            if (mode == 2) { /* operand 0 is overwritten: keep its values for the next runs */
                tensor_init(&saved, rnd, rshape);
                memcpy(saved.data, ops[0].data, (size_t)total * 4);
                dst = ops[0].data;
            }
            if (mode == 3) {
                static FxBound bound;
                fx_bind(&bound, &p, opp, dst, rnd, rshape);
                tiles(&bound, rnd, rshape);
            } else {
                fx_run(&p, opp, dst, rnd, rshape, mode == 1 ? pool2 : NULL);
            }
            int64_t bad = -1;
            for (int64_t j = 0; j < total && bad < 0; j++)
                if (!close_enough(dst[j], want->data[j], tol)) bad = j;
            if (bad >= 0) {
                printf("FAIL trial %d (%s, mode %d, %u steps, %lld elements): element %lld is "
                       "%.9g, want %.9g\n",
                       trial, sup_isa_name((SupIsa)level), mode, p.n_steps, (long long)total,
                       (long long)bad, dst[bad], want->data[bad]);
                n_fail++;
            } else {
                n_pass++;
            }
            if (mode == 2) {
                memcpy(ops[0].data, saved.data, (size_t)total * 4);
                free(saved.data);
            }
            free(out.data);
        }
    }
    sup_isa_force(sup_isa_detected());
    for (uint32_t s = 0; s < p.n_steps; s++)
        free(vals[s].data);
done:
    for (uint32_t i = 0; i < p.n_operands; i++)
        free(ops[i].data);
}

/* Bias tails (fused.c bias_detect: x + bias or bias + x, then none, relu or clip, run by run of
 * the bias): a per-channel bias of NCHW (1, C, 1, 1), a per-column bias of a product (N), a
 * per-row one (M, 1), against the reference steps bit for bit, at every level, 1 and 2 threads
 * and in place; the bound program must take the bias path (kinds 0-1) or not (kind 2: a per-row
 * bias of 3 merged dims is gathered). */
static void bias_tails(SupPool *pool2) {
    static const int64_t shapes[3][4] = {{1, 37, 5, 9}, {3, 7, 11, 70}, {2, 5, 13, 17}};
    for (int kind = 0; kind < 3; kind++)
        for (int order = 0; order < 2; order++)
            for (int clamp = 0; clamp < 3; clamp++) {
                const int64_t *shape = shapes[kind];
                int64_t bs[4] = {1, shape[1], 1, 1};
                uint32_t bnd = 4;
                if (kind == 1) bnd = 1, bs[0] = shape[3];
                if (kind == 2) bnd = 3, bs[0] = shape[1], bs[1] = shape[2], bs[2] = 1;
                Tensor x, b;
                tensor_init(&x, 4, shape);
                tensor_init(&b, bnd, bs);
                for (int64_t j = 0; j < k_numel(&x.t); j++)
                    x.data[j] = rnd_value();
                for (int64_t j = 0; j < k_numel(&b.t); j++)
                    b.data[j] = rnd_value();
                FxProgram p = {.n_operands = 2, .n_steps = clamp ? 2 : 1};
                p.step[0] = (FxStep){.op = FX_ADD, .a = (uint16_t)order, .b = (uint16_t)!order};
                if (clamp)
                    p.step[1] = (FxStep){.op = (uint8_t)(clamp == 1 ? FX_RELU : FX_CLIP),
                                         .a = 2,
                                         .p0 = -1.5f,
                                         .p1 = 2.0f};
                const DLTensor *opp[2] = {&x.t, &b.t};
                Tensor v0, v1;
                const DLTensor *ab[2] = {&x.t, &b.t};
                bool ok = ref_step(&p.step[0], ab[order], ab[!order], &v0) &&
                          (!clamp || ref_step(&p.step[1], &v0.t, &v0.t, &v1));
                const Tensor *want = clamp ? &v1 : &v0;
                static FxBound bound;
                fx_bind(&bound, &p, opp, want->data, 4, shape);
                if (!ok || bound.bias != (kind < 2)) {
                    printf("FAIL bias tail %d/%d/%d: reference %d, bias path %d\n", kind, order,
                           clamp, ok, bound.bias);
                    n_fail++;
                }
                int64_t total = k_numel(&x.t);
                for (int level = SUP_ISA_SCALAR; ok && level <= (int)sup_isa_detected(); level++) {
                    sup_isa_force((SupIsa)level);
                    for (int mode = 0; mode < 4; mode++) { /* as in one() */
                        Tensor out, saved;
                        tensor_init(&out, 4, shape);
                        float *dst = out.data;
                        if (mode == 2) {
                            tensor_init(&saved, 4, shape);
                            memcpy(saved.data, x.data, (size_t)total * 4);
                            dst = x.data;
                        }
                        if (mode == 3) {
                            static FxBound tb;
                            fx_bind(&tb, &p, opp, dst, 4, shape);
                            tiles(&tb, 4, shape);
                        } else {
                            fx_run(&p, opp, dst, 4, shape, mode == 1 ? pool2 : NULL);
                        }
                        int64_t bad = -1;
                        for (int64_t j = 0; j < total && bad < 0; j++)
                            if (!close_enough(dst[j], want->data[j], 0)) bad = j;
                        if (bad >= 0) {
                            printf("FAIL bias tail %d/%d/%d (%s, mode %d): element %lld is %.9g, "
                                   "want %.9g\n",
                                   kind, order, clamp, sup_isa_name((SupIsa)level), mode,
                                   (long long)bad, dst[bad], want->data[bad]);
                            n_fail++;
                        } else {
                            n_pass++;
                        }
                        if (mode == 2) {
                            memcpy(x.data, saved.data, (size_t)total * 4);
                            free(saved.data);
                        }
                        free(out.data);
                    }
                }
                sup_isa_force(sup_isa_detected());
                if (ok) free(v0.data);
                if (ok && clamp) free(v1.data);
                free(x.data), free(b.data);
            }
}

/* The odd transcendentals keep the sign of a zero: 1 / f(x) at x = -0, +0 is -inf, +inf for
 * f = tanh, erf, at every level (tanh's polynomial gave +0 at -0). */
static void signed_zeros(void) {
    for (int f = 0; f < 2; f++) {
        int64_t sh[1] = {20}, one_sh[1] = {1};
        Tensor x, one, out;
        tensor_init(&x, 1, sh);
        tensor_init(&one, 1, one_sh);
        tensor_init(&out, 1, sh);
        for (int i = 0; i < 20; i++)
            x.data[i] = i % 2 ? 0.0f : -0.0f;
        one.data[0] = 1.0f;
        FxProgram p = {.n_operands = 2, .n_steps = 2};
        p.step[0] = (FxStep){.op = (uint8_t)(f ? FX_ERF : FX_TANH), .a = 0};
        p.step[1] = (FxStep){.op = FX_DIV, .a = 1, .b = 2};
        const DLTensor *opp[2] = {&x.t, &one.t};
        for (int level = SUP_ISA_SCALAR; level <= (int)sup_isa_detected(); level++) {
            sup_isa_force((SupIsa)level);
            fx_run(&p, opp, out.data, 1, sh, NULL);
            int bad = -1;
            for (int i = 0; i < 20 && bad < 0; i++)
                if (out.data[i] != (i % 2 ? INFINITY : -INFINITY)) bad = i;
            if (bad >= 0) {
                printf("FAIL signed zero: 1 / %s(%g) is %g (%s)\n", f ? "erf" : "tanh", x.data[bad],
                       out.data[bad], sup_isa_name((SupIsa)level));
                n_fail++;
            } else {
                n_pass++;
            }
        }
        sup_isa_force(sup_isa_detected());
        free(x.data), free(one.data), free(out.data);
    }
}

/* A program fx_shape must refuse: a step narrower than the result, another dtype. */
static void refusals(void) {
    Tensor a, b;
    int64_t sa[2] = {3, 4}, sb[1] = {4};
    tensor_init(&a, 2, sa);
    tensor_init(&b, 1, sb);
    const DLTensor *ops[2] = {&a.t, &b.t};
    FxProgram p = {.n_operands = 2, .n_steps = 2};
    p.step[0] = (FxStep){.op = FX_SIGMOID, .a = 1}; /* shape (4): narrower */
    p.step[1] = (FxStep){.op = FX_ADD, .a = 0, .b = 2};
    uint32_t nd;
    int64_t sh[K_MAX_DIMS];
    bool ok = !fx_shape(&p, ops, &nd, sh);
    b.t.dtype.bits = 64;
    p.step[0] = (FxStep){.op = FX_ADD, .a = 0, .b = 1};
    p.n_steps = 1;
    ok = ok && !fx_shape(&p, ops, &nd, sh);
    b.t.dtype.bits = 32;
    ok = ok && fx_shape(&p, ops, &nd, sh) && nd == 2 && sh[0] == 3 && sh[1] == 4;
    if (ok)
        n_pass++;
    else {
        n_fail++;
        printf("FAIL fx_shape: a narrow step or a float64 operand accepted\n");
    }
    free(a.data);
    free(b.data);
}

int main(int argc, char **argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 400;
    if (argc > 2) rng = strtoull(argv[2], NULL, 10) | 1;
    SupPool *pool2 = sup_pool_new(2);
    refusals();
    signed_zeros();
    bias_tails(pool2);
    for (int t = 0; t < trials; t++)
        one(t, pool2);
    sup_pool_free(pool2);
    printf("levels up to %s; %d passed, %d failed\n", sup_isa_name(sup_isa_detected()), n_pass,
           n_fail);
    return n_fail ? 1 : 0;
}
