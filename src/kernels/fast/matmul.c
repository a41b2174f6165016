/* matmul.c - fast nn.dense, nn.matmul and nn.batch_matmul (gemm.h) on the packed SGEMM.
 *
 * Semantics are the reference kernels' (src/kernels/ref/nn.c): dense is data (..., k) times
 * weight (units, k) transposed; matmul the same with either operand transposed (the first may
 * carry batch axes, the second is 2-D); batch_matmul 3-D operands whose batch 1 broadcasts.
 * Float32 operands with out_dtype "" or float32 run here; any other call, and any call whose
 * shapes the reference kernel would reject (it writes the error), goes to the reference kernel.
 * A constant operand (kc->in_const) is packed once into the executable's cache (k_prepared). */
#include "kernels/fast/gemm.h"

#include <string.h>

/* float32 operands and a float32 (or unset) result. */
static bool all_f32(const KCall *kc) {
    for (uint32_t i = 0; i < kc->n_in; i++)
        if (k_dtype(kc->in[i]) != RLY_DTYPE_F32) return false;
    int64_t odt = k_int(kc, "out_dtype");
    return kc->n_in == 2 && (odt < 0 || odt == RLY_DTYPE_F32);
}

/* The product g into output o, with the call's fused tail (KCall.epi) applied per block. */
static int run_product(KCall *kc, const DLTensor *o, SGemm *g) {
    SGemmKEpi e;
    bool tail = kern_sgemm_bind_epi(kc, o, g, &e, SGEMM_BIAS_COLS, 1);
    if (kern_sgemm(kc, g) != 0) return -1;
    kc->epi_done = tail;
    return 0;
}

/* A (..., k) (or (..., k, m) with ta) times B (k, units) (or (units, k) with tb). */
static int matmul_fast(KCall *kc, uint32_t op, bool ta, bool tb) {
    const DLTensor *a = k_arg(kc, 0), *b = k_arg(kc, 1);
    uint32_t n = (uint32_t)a->ndim;
    if (!all_f32(kc) || n < (ta ? 2u : 1u) || b->ndim != 2) return kern_ref_lookup(op)(kc);
    int64_t ka = ta ? a->shape[n - 2] : a->shape[n - 1];
    int64_t kb = tb ? b->shape[1] : b->shape[0], units = tb ? b->shape[0] : b->shape[1];
    if (ka != kb || (!k_is_none(kc, "units") && k_int(kc, "units") != units))
        return kern_ref_lookup(op)(kc);
    int64_t shape[K_MAX_DIMS];
    memcpy(shape, a->shape, n * sizeof(int64_t));
    shape[n - 1] = units;
    if (ta) shape[n - 2] = a->shape[n - 1];
    DLTensor *o = k_out_raw(kc, 0, RLY_DTYPE_F32, n, shape);     /* C = A B: all written */
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* dims may be huge */
    SGemm g = {.n = units,
               .k = ka,
               .batch = 1,
               .a = k_ptr(a),
               .b = k_ptr(b),
               .b_rs = tb ? 1 : units,
               .b_cs = tb ? ka : 1,
               .b_mod = 1,
               .c = k_ptr(o),
               .ldc = units};
    if (!ta) {
        g.m = k_shape_numel(n - 1, a->shape);
        g.a_rs = ka;
        g.a_cs = 1;
    } else {
        g.batch = k_shape_numel(n - 2, a->shape);
        g.m = a->shape[n - 1];
        g.a_rs = 1;
        g.a_cs = g.m;
        g.a_bs = ka * g.m;
        g.c_bs = g.m * units;
    }
    kern_sgemm_prepare(kc, &g, false, 1, 1);
    kern_sgemm_prepare(kc, &g, true, 0, g.batch);
    return run_product(kc, o, &g);
}

int kern_fast_dense(KCall *kc) { return matmul_fast(kc, OP_ID_NN_DENSE, false, true); }

int kern_fast_matmul(KCall *kc) {
    return matmul_fast(kc, OP_ID_NN_MATMUL, k_bool(kc, "transpose_a"), k_bool(kc, "transpose_b"));
}

int kern_fast_batch_matmul(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *y = k_arg(kc, 1);
    if (!all_f32(kc) || x->ndim != 3 || y->ndim != 3)
        return kern_ref_lookup(OP_ID_NN_BATCH_MATMUL)(kc);
    bool ta = k_bool(kc, "transpose_a"), tb = k_bool(kc, "transpose_b");
    int64_t bx = x->shape[0], by = y->shape[0];
    int64_t xi = x->shape[ta ? 2 : 1], xk = x->shape[ta ? 1 : 2];
    int64_t yk = y->shape[tb ? 2 : 1], yj = y->shape[tb ? 1 : 2];
    if ((bx != by && bx != 1 && by != 1) || xk != yk)
        return kern_ref_lookup(OP_ID_NN_BATCH_MATMUL)(kc);
    int64_t batch = bx == 1 ? by : bx, shape[3] = {batch, xi, yj};
    DLTensor *o = k_out_raw(kc, 0, RLY_DTYPE_F32, 3, shape);     /* C = A B: all written */
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* dims may be huge */
    SGemm g = {.m = xi,
               .n = yj,
               .k = xk,
               .batch = batch,
               .a = k_ptr(x),
               .a_rs = ta ? 1 : xk,
               .a_cs = ta ? xi : 1,
               .a_bs = xi * xk,
               .a_mod = bx == 1 ? 1 : 0,
               .b = k_ptr(y),
               .b_rs = tb ? 1 : yj,
               .b_cs = tb ? yk : 1,
               .b_bs = yk * yj,
               .b_mod = by == 1 ? 1 : 0,
               .c = k_ptr(o),
               .ldc = yj,
               .c_bs = xi * yj};
    kern_sgemm_prepare(kc, &g, true, 0, bx);
    kern_sgemm_prepare(kc, &g, false, 1, by);
    return run_product(kc, o, &g);
}
