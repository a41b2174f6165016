/* fused_level.h - the step loop of fused programs (fused.c) for ONE instruction-set level, over
 * the vector layer of vmath_level.h (included just before, once per level; no include guard,
 * every function named V(name)). Semantics as fused.h says: maximum/minimum propagate NaN,
 * relu(NaN) = 0, clip keeps NaN; x86's max(a, b) is a > b ? a : b, so operand order matters. */

/* Each vector step as an expression of a, b (vectors) and st (its parameters). */
#define FX_VEC_OPS(X)                                                                              \
    X(FX_ADD, V(vadd)(a, b))                                                                       \
    X(FX_SUB, V(vsub)(a, b))                                                                       \
    X(FX_MUL, V(vmul)(a, b))                                                                       \
    X(FX_DIV, V(vdiv)(a, b))                                                                       \
    X(FX_MAX, V(vsel)(V(vmor)(V(vnan)(a), V(vnan)(b)), V(vadd)(a, b), V(vmax)(a, b)))              \
    X(FX_MIN, V(vsel)(V(vmor)(V(vnan)(a), V(vnan)(b)), V(vadd)(a, b), V(vmin)(a, b)))              \
    X(FX_RELU, V(vmax)(a, V(vset)(0.0f))) /* NaN > 0 is false: 0 */                                \
    X(FX_LEAKY, V(vsel)(V(vlt)(V(vset)(0.0f), a), a, V(vmul)(a, V(vset)(st->p0))))                 \
    X(FX_CLIP, V(vmin)(V(vset)(st->p1), V(vmax)(V(vset)(st->p0), a))) /* NaN stays */              \
    X(FX_SIGMOID, V(vsigmoid)(a))                                                                  \
    X(FX_TANH, V(vtanh)(a))                                                                        \
    X(FX_EXP, V(vexp)(a))                                                                          \
    X(FX_ERF, V(verf)(a))                                                                          \
    X(FX_SQRT, V(vsqrt)(a))                                                                        \
    X(FX_RSQRT, V(vdiv)(V(vset)(1.0f), V(vsqrt)(a)))                                               \
    X(FX_NEG, V(vneg)(a))                                                                          \
    X(FX_ABS, V(vabs)(a))                                                                          \
    X(FX_COPY, a)

static inline VATTR VF V(fx_vstep)(const FxStep *st, VF a, VF b) {
    (void)b;
    switch ((FxOp)st->op) {
#define FX_RET(OP, E)                                                                              \
    case OP: return E;
        FX_VEC_OPS(FX_RET)
#undef FX_RET
    default: return a;
    }
}

/* y[r * ldy + i] = step(pa[r * lda + i], pb[r * ldb + i]) for r < rows, i < n (pb unused by
 * unary steps; a row stride of 0 reads the same row for every r). Each step kind has its own loop
 * with the step's expression inside (a call per vector with the switch inside it cost a tenth of
 * BERT-tiny's run). */
static VATTR void V(fx_step)(const FxStep *st, const float *pa, int64_t lda, const float *pb,
                             int64_t ldb, float *y, int64_t ldy, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++, pa += lda, pb += ldb, y += ldy) {
        if (st->op == FX_POW) { /* the reference's pow, in double; x^2 is x * x, bit for bit */
            for (int64_t i = 0; i < n; i++)
                y[i] = pb[i] == 2.0f ? pa[i] * pa[i] : (float)pow(pa[i], pb[i]);
            continue;
        }
        int64_t i = 0;
        switch ((FxOp)st->op) { /* one loop per step kind, the switch outside it */
#define FX_CASE(OP, E)                                                                             \
    case OP:                                                                                       \
        for (; i + VL <= n; i += VL) {                                                             \
            VF a = V(vload)(pa + i), b = V(vload)(pb + i);                                         \
            (void)b;                                                                               \
            V(vstore)(y + i, E);                                                                   \
        }                                                                                          \
        break;
            FX_VEC_OPS(FX_CASE)
#undef FX_CASE
        default: break;
        }
        if (i < n) {
            VF t = V(fx_vstep)(st, V(vloadn)(pa + i, n - i), V(vloadn)(pb + i, n - i));
            V(vstoren)(y + i, t, n - i);
        }
    }
}
#undef FX_VEC_OPS

/* y[i] = clamp(x[i] + b[i]) for i < n (bias_first: b[i] + x[i]), b[i] = bs when bp is NULL:
 * a bias tail's run (FxBound.bias), the same vector operations as the program's steps. */
static VATTR void V(fx_bias_run)(const float *x, const float *bp, float bs, bool bias_first,
                                 uint8_t clamp, float lo, float hi, float *y, int64_t n) {
    VF vb = V(vset)(bs), vlo = V(vset)(lo), vhi = V(vset)(hi), zero = V(vset)(0.0f);
    for (int64_t i = 0; i < n; i += VL) {
        int64_t r = n - i < VL ? n - i : VL;
        VF a = r == VL ? V(vload)(x + i) : V(vloadn)(x + i, r);
        VF b = bp == NULL ? vb : r == VL ? V(vload)(bp + i) : V(vloadn)(bp + i, r);
        VF t = bias_first ? V(vadd)(b, a) : V(vadd)(a, b);
        if (clamp == FX_RELU)
            t = V(vmax)(t, zero);
        else if (clamp == FX_CLIP)
            t = V(vmin)(vhi, V(vmax)(vlo, t));
        if (r == VL)
            V(vstore)(y + i, t);
        else
            V(vstoren)(y + i, t, r);
    }
}
