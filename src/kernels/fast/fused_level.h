/* fused_level.h - the step loop of fused programs (fused.c) for ONE instruction-set level, over
 * the vector layer of vmath_level.h (included just before, once per level; no include guard,
 * every function named V(name)). Semantics as fused.h says: maximum/minimum propagate NaN,
 * relu(NaN) = 0, clip keeps NaN; x86's max(a, b) is a > b ? a : b, so operand order matters. */

static inline VATTR VF V(fx_vstep)(const FxStep *st, VF a, VF b) {
    switch ((FxOp)st->op) {
    case FX_ADD: return V(vadd)(a, b);
    case FX_SUB: return V(vsub)(a, b);
    case FX_MUL: return V(vmul)(a, b);
    case FX_DIV: return V(vdiv)(a, b);
    case FX_MAX: return V(vsel)(V(vmor)(V(vnan)(a), V(vnan)(b)), V(vadd)(a, b), V(vmax)(a, b));
    case FX_MIN: return V(vsel)(V(vmor)(V(vnan)(a), V(vnan)(b)), V(vadd)(a, b), V(vmin)(a, b));
    case FX_RELU: return V(vmax)(a, V(vset)(0.0f)); /* NaN > 0 is false: 0 */
    case FX_LEAKY: return V(vsel)(V(vlt)(V(vset)(0.0f), a), a, V(vmul)(a, V(vset)(st->p0)));
    case FX_CLIP: /* lo > NaN is false: NaN stays */
        return V(vmin)(V(vset)(st->p1), V(vmax)(V(vset)(st->p0), a));
    case FX_SIGMOID: return V(vsigmoid)(a);
    case FX_TANH: return V(vtanh)(a);
    case FX_EXP: return V(vexp)(a);
    case FX_ERF: return V(verf)(a);
    case FX_SQRT: return V(vsqrt)(a);
    case FX_RSQRT: return V(vdiv)(V(vset)(1.0f), V(vsqrt)(a));
    case FX_NEG: return V(vneg)(a);
    case FX_ABS: return V(vabs)(a);
    case FX_COPY: return a;
    default: return a;
    }
}

/* y[i] = step(a[i], b[i]) for i < n (b unused by unary steps). */
static VATTR void V(fx_step)(const FxStep *st, const float *a, const float *b, float *y,
                             int64_t n) {
    if (st->op == FX_POW) { /* the reference's pow, in double; x^2 is x * x, bit for bit */
        for (int64_t i = 0; i < n; i++)
            y[i] = b[i] == 2.0f ? a[i] * a[i] : (float)pow(a[i], b[i]);
        return;
    }
    int64_t i = 0;
    switch ((FxOp)st->op) { /* one loop per step kind, the switch outside it */
#define FX_CASE(OP)                                                                                \
    case OP:                                                                                       \
        for (; i + VL <= n; i += VL)                                                               \
            V(vstore)(y + i, V(fx_vstep)(st, V(vload)(a + i), V(vload)(b + i)));                   \
        break;
        FX_CASE(FX_ADD)
        FX_CASE(FX_SUB)
        FX_CASE(FX_MUL)
        FX_CASE(FX_DIV)
        FX_CASE(FX_MAX)
        FX_CASE(FX_MIN)
        FX_CASE(FX_RELU)
        FX_CASE(FX_LEAKY)
        FX_CASE(FX_CLIP)
        FX_CASE(FX_SIGMOID)
        FX_CASE(FX_TANH)
        FX_CASE(FX_EXP)
        FX_CASE(FX_ERF)
        FX_CASE(FX_SQRT)
        FX_CASE(FX_RSQRT)
        FX_CASE(FX_NEG)
        FX_CASE(FX_ABS)
        FX_CASE(FX_COPY)
#undef FX_CASE
    default: break;
    }
    if (i < n)
        V(vstoren)(y + i, V(fx_vstep)(st, V(vloadn)(a + i, n - i), V(vloadn)(b + i, n - i)), n - i);
}
