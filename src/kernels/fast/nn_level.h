/* nn_level.h - the loops of the nn fast kernels (nn.c) for the level that vmath_level.h was last
 * included for: nn.c includes the pair once per level. They run inside pool tasks on ranges the
 * driver chose, reading only what the driver prepared (outputs, scratch, per-channel tables). */

/* ---- spans: sums and maxima of contiguous floats -------------------------------------------- */

#define SPAN_BLOCK 1024 /* floats summed in float lanes before the block's sum joins a double */

/* x[0..n) summed: float lanes within blocks of SPAN_BLOCK, the blocks' sums in double. */
static VATTR double V(span_sum)(const float *x, int64_t n) {
    double total = 0;
    for (int64_t lo = 0; lo < n; lo += SPAN_BLOCK) {
        int64_t m = n - lo < SPAN_BLOCK ? n - lo : SPAN_BLOCK;
        const float *p = x + lo;
        VF s0 = V(vzero)(), s1 = V(vzero)(), s2 = V(vzero)(), s3 = V(vzero)();
        int64_t i = 0;
        for (; i + 4 * VL <= m; i += 4 * VL) {
            s0 = V(vadd)(s0, V(vload)(p + i));
            s1 = V(vadd)(s1, V(vload)(p + i + VL));
            s2 = V(vadd)(s2, V(vload)(p + i + 2 * VL));
            s3 = V(vadd)(s3, V(vload)(p + i + 3 * VL));
        }
        for (; i + VL <= m; i += VL)
            s0 = V(vadd)(s0, V(vload)(p + i));
        if (i < m) s1 = V(vadd)(s1, V(vloadn)(p + i, m - i));
        total += (double)V(vhsum)(V(vadd)(V(vadd)(s0, s1), V(vadd)(s2, s3)));
    }
    return total;
}

/* sum of (x[i] - mh - ml)^2 over x[0..n) (layer_norm's variance; mh + ml is the mean). */
static VATTR double V(span_sqdev)(const float *x, int64_t n, float mh, float ml) {
    VF vh = V(vset)(mh), vl = V(vset)(ml);
    double total = 0;
    for (int64_t lo = 0; lo < n; lo += SPAN_BLOCK) {
        int64_t m = n - lo < SPAN_BLOCK ? n - lo : SPAN_BLOCK;
        const float *p = x + lo;
        VF s0 = V(vzero)(), s1 = V(vzero)();
        int64_t i = 0;
        for (; i + VL <= m; i += VL) {
            VF d = V(vsub)(V(vsub)(V(vload)(p + i), vh), vl);
            s0 = V(vfma)(d, d, s0);
        }
        if (i < m) {
            VF d = V(vsub)(V(vsub)(V(vloadn)(p + i, m - i), vh), vl);
            float b[VL] = {0};
            V(vstoren)(b, V(vmul)(d, d), m - i); /* the padding lanes stay 0 */
            s1 = V(vload)(b);
        }
        total += (double)V(vhsum)(V(vadd)(s0, s1));
    }
    return total;
}

/* The largest of x[0..n) (n >= 1). propagate: a NaN anywhere gives NaN (max); otherwise NaNs are
 * skipped and the start is `lowest` (the pools: -FLT_MAX). */
static VATTR float V(span_max)(const float *x, int64_t n, bool propagate, float lowest) {
    VF acc = V(vset)(lowest), acc2 = acc;
    VM nan = V(vmnone)();
    int64_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
        VF a = V(vload)(x + i), b = V(vload)(x + i + VL);
        nan = V(vmor)(nan, V(vmor)(V(vnan)(a), V(vnan)(b)));
        acc = V(vmax)(a, acc); /* a NaN in a keeps acc */
        acc2 = V(vmax)(b, acc2);
    }
    for (; i < n; i += VL) {
        VF a = n - i >= VL ? V(vload)(x + i) : V(vloadn)(x + i, n - i);
        if (n - i < VL) { /* the padding lanes must not win: lowest there */
            float b[VL];
            V(vstore)(b, a);
            for (int64_t k = n - i; k < VL; k++)
                b[k] = lowest;
            a = V(vload)(b);
        }
        nan = V(vmor)(nan, V(vnan)(a));
        acc = V(vmax)(a, acc);
    }
    if (propagate && V(vmany)(nan)) return NAN;
    return V(vhmax)(V(vmax)(acc, acc2));
}

/* ---- softmax ----------------------------------------------------------------------------------
 */

/* rows x[r*c .. r*c + c) for r in [0, rows): softmax or log_softmax into y. As the reference:
 * the max skips NaN, the sum of exp(x - max) then carries any NaN to the whole row. */
static VATTR void V(softmax_rows)(const float *x, float *y, int64_t rows, int64_t c,
                                  bool log_form) {
    for (int64_t r = 0; r < rows; r++, x += c, y += c) {
        float mx = V(span_max)(x, c, false, -INFINITY);
        VF vmx = V(vset)(mx);
        double sum = 0;
        for (int64_t lo = 0; lo < c; lo += SPAN_BLOCK) {
            int64_t m = c - lo < SPAN_BLOCK ? c - lo : SPAN_BLOCK, i = 0;
            VF s = V(vzero)();
            for (; i + VL <= m; i += VL) {
                VF e = V(vexp)(V(vsub)(V(vload)(x + lo + i), vmx));
                if (!log_form) V(vstore)(y + lo + i, e);
                s = V(vadd)(s, e);
            }
            if (i < m) {
                float b[VL] = {0};
                VF e = V(vexp)(V(vsub)(V(vloadn)(x + lo + i, m - i), vmx));
                V(vstoren)(b, e, m - i); /* only the row's lanes join the sum */
                if (!log_form) V(vstoren)(y + lo + i, e, m - i);
                s = V(vadd)(s, V(vload)(b));
            }
            sum += (double)V(vhsum)(s);
        }
        int64_t i = 0;
        if (log_form) {
            VF lse = V(vset)((float)log(sum));
            for (; i + VL <= c; i += VL)
                V(vstore)(y + i, V(vsub)(V(vsub)(V(vload)(x + i), vmx), lse));
            if (i < c)
                V(vstoren)(y + i, V(vsub)(V(vsub)(V(vloadn)(x + i, c - i), vmx), lse), c - i);
        } else {
            VF inv = V(vset)((float)(1.0 / sum));
            for (; i + VL <= c; i += VL)
                V(vstore)(y + i, V(vmul)(V(vload)(y + i), inv));
            if (i < c) V(vstoren)(y + i, V(vmul)(V(vloadn)(y + i, c - i), inv), c - i);
        }
    }
}

/* One (c, inner) slab, columns [j0, j1): softmax over c with stride inner, VL columns at a time. */
static VATTR void V(softmax_cols)(const float *x, float *y, int64_t c, int64_t inner, int64_t j0,
                                  int64_t j1, bool log_form) {
    for (int64_t j = j0; j < j1; j += VL) {
        int64_t w = j1 - j < VL ? j1 - j : VL; /* lanes in use */
#define LD(p) (w == VL ? V(vload)(p) : V(vloadn)(p, w))
#define ST(p, v) (w == VL ? V(vstore)(p, v) : V(vstoren)(p, v, w))
        VF mx = V(vset)(-INFINITY);
        for (int64_t t = 0; t < c; t++)
            mx = V(vmax)(LD(x + t * inner + j), mx);
        VF s = V(vzero)();
        for (int64_t t = 0; t < c; t++) {
            VF e = V(vexp)(V(vsub)(LD(x + t * inner + j), mx));
            if (!log_form) ST(y + t * inner + j, e);
            s = V(vadd)(s, e);
        }
        if (log_form) {
            float b[VL];
            V(vstore)(b, s);
            for (int k = 0; k < VL; k++)
                b[k] = (float)log((double)b[k]);
            VF lse = V(vload)(b);
            for (int64_t t = 0; t < c; t++)
                ST(y + t * inner + j, V(vsub)(V(vsub)(LD(x + t * inner + j), mx), lse));
        } else {
            VF inv = V(vdiv)(V(vset)(1.0f), s);
            for (int64_t t = 0; t < c; t++)
                ST(y + t * inner + j, V(vmul)(LD(y + t * inner + j), inv));
        }
#undef LD
#undef ST
    }
}

/* ---- layer_norm -------------------------------------------------------------------------------
 */

/* rows of c: y = (x - mean) / sqrt(var + eps) * g + b (g, b: c floats, 1 and 0 when the
 * operator's scale or center is off). */
static VATTR void V(layer_norm_rows)(const float *x, float *y, int64_t rows, int64_t c,
                                     const float *g, const float *b, double eps) {
    for (int64_t r = 0; r < rows; r++, x += c, y += c) {
        double mean = V(span_sum)(x, c) / (double)c;
        float mh = (float)mean, ml = (float)(mean - (double)mh); /* x - mh - ml: ~exact */
        double var = V(span_sqdev)(x, c, mh, ml) / (double)c;
        VF vh = V(vset)(mh), vl = V(vset)(ml), rs = V(vset)((float)(1.0 / sqrt(var + eps)));
        int64_t i = 0;
        for (; i + VL <= c; i += VL) {
            VF d = V(vmul)(V(vsub)(V(vsub)(V(vload)(x + i), vh), vl), rs);
            V(vstore)(y + i, V(vfma)(d, V(vload)(g + i), V(vload)(b + i)));
        }
        if (i < c) {
            VF d = V(vmul)(V(vsub)(V(vsub)(V(vloadn)(x + i, c - i), vh), vl), rs);
            V(vstoren)(y + i, V(vfma)(d, V(vloadn)(g + i, c - i), V(vloadn)(b + i, c - i)), c - i);
        }
    }
}

/* ---- per-channel affine: batch_norm, bias_add ------------------------------------------------ */

/* y[0..n) = (x - m) * s + b with m, s, b either one value each (vec false) or n values. */
static VATTR void V(affine_span)(const float *x, float *y, int64_t n, const float *m,
                                 const float *s, const float *b, bool vec) {
    int64_t i = 0;
    if (!vec) {
        VF vm = V(vset)(m[0]), vs = V(vset)(s[0]), vb = V(vset)(b[0]);
        for (; i + VL <= n; i += VL)
            V(vstore)(y + i, V(vfma)(V(vsub)(V(vload)(x + i), vm), vs, vb));
        if (i < n) V(vstoren)(y + i, V(vfma)(V(vsub)(V(vloadn)(x + i, n - i), vm), vs, vb), n - i);
        return;
    }
    for (; i + VL <= n; i += VL) {
        VF d = V(vsub)(V(vload)(x + i), V(vload)(m + i));
        V(vstore)(y + i, V(vfma)(d, V(vload)(s + i), V(vload)(b + i)));
    }
    if (i < n) {
        int64_t r = n - i;
        VF d = V(vsub)(V(vloadn)(x + i, r), V(vloadn)(m + i, r));
        V(vstoren)(y + i, V(vfma)(d, V(vloadn)(s + i, r), V(vloadn)(b + i, r)), r);
    }
}

/* ---- windowed 2-D pools (NCHW) ----------------------------------------------------------------
 */

/* One plane: q is the plane padded (pad value outside the input) and split by column phase:
 * q[(p * hp + r) * wq + j] holds padded element (r, j * sw + p), so every tap of a row of outputs
 * is a contiguous run of q. The driver builds q (pool_fill) and passes the tables. */
static VATTR void V(pool_plane)(const PoolGeom *g, const float *q, float *y) {
    for (int64_t oh = 0; oh < g->hout; oh++, y += g->wout) {
        for (int64_t ow = 0; ow < g->wout; ow += VL) {
            VF acc = V(vset)(g->is_max ? -FLT_MAX : 0.0f);
            for (int64_t a = 0; a < g->kh; a++) {
                const float *row = q + (oh * g->sh + a * g->dh) * g->wq + ow;
                for (int64_t b = 0; b < g->kw; b++) {
                    VF v = V(vload)(row + g->tap_off[b]);
                    acc = g->is_max ? V(vmax)(v, acc) : V(vadd)(acc, v);
                }
            }
            if (!g->is_max) { /* divisor: the taps counted per axis (at least 1) */
                VF d = V(vmul)(V(vset)(g->div_h[oh]), V(vload)(g->div_w + ow));
                acc = V(vdiv)(acc, V(vmax)(d, V(vset)(1.0f)));
            }
            if (g->wout - ow >= VL)
                V(vstore)(y + ow, acc);
            else
                V(vstoren)(y + ow, acc, g->wout - ow);
        }
    }
}
