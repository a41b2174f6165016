/* elem_level.h - the loops of the elementwise fast kernels (elem.c) for the level that
 * vmath_level.h was last included for: elem.c includes the pair once per level. Each function
 * works on a contiguous range given by the driver, which has obtained outputs and split the work
 * (so these run inside pool tasks). Outputs may alias an input at the same index (in-place
 * plans): every loop reads element i before it writes element i. */

/* y[0..n) = op(x[0..n)); lo, hi: clip's bounds. */
static VATTR void V(unary_run)(int kind, const float *x, float *y, int64_t n, float lo, float hi) {
#define UNARY_LOOP(EXPR)                                                                           \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + VL <= n; i += VL) {                                                             \
            VF v = V(vload)(x + i);                                                                \
            V(vstore)(y + i, EXPR);                                                                \
        }                                                                                          \
        if (i < n) {                                                                               \
            VF v = V(vloadn)(x + i, n - i);                                                        \
            V(vstoren)(y + i, EXPR, n - i);                                                        \
        }                                                                                          \
    } while (0)
    VF vlo = V(vset)(lo), vhi = V(vset)(hi), zero = V(vzero)(), one = V(vset)(1.0f);
    switch (kind) {
    case EU_RELU: UNARY_LOOP(V(vmax)(v, zero)); break; /* NaN and -0 give +0, as the ref */
    case EU_CLIP: UNARY_LOOP(V(vmin)(vhi, V(vmax)(vlo, v))); break; /* NaN stays */
    case EU_SIGMOID: UNARY_LOOP(V(vsigmoid)(v)); break;
    case EU_TANH: UNARY_LOOP(V(vtanh)(v)); break;
    case EU_EXP: UNARY_LOOP(V(vexp)(v)); break;
    case EU_ERF: UNARY_LOOP(V(verf)(v)); break;
    case EU_NEGATIVE: UNARY_LOOP(V(vneg)(v)); break;
    case EU_ABS: UNARY_LOOP(V(vabs)(v)); break;
    case EU_SQRT: UNARY_LOOP(V(vsqrt)(v)); break;
    case EU_RSQRT: UNARY_LOOP(V(vdiv)(one, V(vsqrt)(v))); break;
    default: RLY_UNREACHABLE();
    }
#undef UNARY_LOOP
}

/* maximum / minimum: NaN on either side gives NaN (a + b), as the reference kernel. */
static inline VATTR VF V(bmax)(VF a, VF b) {
    return V(vsel)(V(vmor)(V(vnan)(a), V(vnan)(b)), V(vadd)(a, b), V(vmax)(a, b));
}
static inline VATTR VF V(bmin)(VF a, VF b) {
    return V(vsel)(V(vmor)(V(vnan)(a), V(vnan)(b)), V(vadd)(a, b), V(vmin)(a, b));
}

/* One row of a binary op: y[i] = a[i] op b[i] for i < n, where a (pattern EP_SV) or b
 * (EP_VS) is one element broadcast along the row. */
static VATTR void V(binary_row)(int op, int pat, const float *a, const float *b, float *y,
                                int64_t n) {
#define ROW_LOOP(LOAD_A, LOAD_B, LOADN_A, LOADN_B, OPF)                                            \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + VL <= n; i += VL)                                                               \
            V(vstore)(y + i, OPF(LOAD_A, LOAD_B));                                                 \
        if (i < n) V(vstoren)(y + i, OPF(LOADN_A, LOADN_B), n - i);                                \
    } while (0)
#define ROWS(OPF)                                                                                  \
    do {                                                                                           \
        if (pat == EP_VV)                                                                          \
            ROW_LOOP(V(vload)(a + i), V(vload)(b + i), V(vloadn)(a + i, n - i),                    \
                     V(vloadn)(b + i, n - i), OPF);                                                \
        else if (pat == EP_VS)                                                                     \
            ROW_LOOP(V(vload)(a + i), sb, V(vloadn)(a + i, n - i), sb, OPF);                       \
        else                                                                                       \
            ROW_LOOP(sa, V(vload)(b + i), sa, V(vloadn)(b + i, n - i), OPF);                       \
    } while (0)
    VF sa = V(vset)(pat == EP_SV ? a[0] : 0.0f), sb = V(vset)(pat == EP_VS ? b[0] : 0.0f);
    switch (op) {
    case EB_ADD: ROWS(V(vadd)); break;
    case EB_SUBTRACT: ROWS(V(vsub)); break;
    case EB_MULTIPLY: ROWS(V(vmul)); break;
    case EB_DIVIDE: ROWS(V(vdiv)); break;
    case EB_MAXIMUM: ROWS(V(bmax)); break;
    case EB_MINIMUM: ROWS(V(bmin)); break;
    default: RLY_UNREACHABLE();
    }
#undef ROWS
#undef ROW_LOOP
}
