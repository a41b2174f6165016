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

/* The sums of d and d^2 for d = x[i] - mh - ml over x[0..n) (layer_norm's variance about mh + ml,
 * and the correction of that mean: a mean summed in float can be off by ulps of a large offset,
 * which a tiny variance would magnify). */
static VATTR double V(span_sqdev)(const float *x, int64_t n, float mh, float ml, double *sum_d) {
    VF vh = V(vset)(mh), vl = V(vset)(ml);
    double total = 0, td = 0;
    for (int64_t lo = 0; lo < n; lo += SPAN_BLOCK) {
        int64_t m = n - lo < SPAN_BLOCK ? n - lo : SPAN_BLOCK;
        const float *p = x + lo;
        VF s0 = V(vzero)(), s1 = V(vzero)(), d0 = V(vzero)(), d1 = V(vzero)();
        int64_t i = 0;
        for (; i + VL <= m; i += VL) {
            VF d = V(vsub)(V(vsub)(V(vload)(p + i), vh), vl);
            s0 = V(vfma)(d, d, s0);
            d0 = V(vadd)(d0, d);
        }
        if (i < m) {
            VF d = V(vsub)(V(vsub)(V(vloadn)(p + i, m - i), vh), vl);
            float b[VL] = {0}, e[VL] = {0};
            V(vstoren)(b, V(vmul)(d, d), m - i); /* the padding lanes stay 0 */
            V(vstoren)(e, d, m - i);
            s1 = V(vload)(b);
            d1 = V(vload)(e);
        }
        total += (double)V(vhsum)(V(vadd)(s0, s1));
        td += (double)V(vhsum)(V(vadd)(d0, d1));
    }
    *sum_d = td;
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
        double mean = V(span_sum)(x, c) / (double)c, sd;
        float mh = (float)mean, ml = (float)(mean - (double)mh); /* x - mh - ml: ~exact */
        double sq = V(span_sqdev)(x, c, mh, ml, &sd) / (double)c, dm = sd / (double)c;
        double var = sq - dm * dm; /* about the corrected mean (the corrected two-pass method) */
        if (var < 0) var = 0;      /* NaN stays */
        mean += dm;
        mh = (float)mean, ml = (float)(mean - (double)mh);
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

/* Lanes p[0], p[s], ..., p[(VL - 1) s], reading no float past p[(VL - 1) s] (an interior vector's
 * last tap may be the plane's last float): stride 1 one load, stride 2 two loads deinterleaved
 * (the second masked: its last float lies past the last tap), larger strides a gather. */
static inline VATTR VF V(vload_step)(const float *p, int64_t s) {
#if FAST_LEVEL == 2
    if (s == 1) return _mm512_loadu_ps(p);
    const __m512i ramp = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    if (s == 2)
        return _mm512_permutex2var_ps(_mm512_loadu_ps(p), _mm512_add_epi32(ramp, ramp),
                                      _mm512_maskz_loadu_ps(0x7fff, p + 16));
    return _mm512_i32gather_ps(_mm512_mullo_epi32(ramp, _mm512_set1_epi32((int32_t)s)), p, 4);
#elif FAST_LEVEL == 1
    if (s == 1) return _mm256_loadu_ps(p);
    if (s == 2) { /* (p0 p2 p8 p10 | p4 p6 p12 p14), then the middle 64-bit pairs swapped */
        __m256 hi = _mm256_maskload_ps(p + 8, _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0));
        __m256 e = _mm256_shuffle_ps(_mm256_loadu_ps(p), hi, 0x88);
        return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xd8));
    }
    const __m256i ramp = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_i32gather_ps(p, _mm256_mullo_epi32(ramp, _mm256_set1_epi32((int32_t)s)), 4);
#else
    (void)s;
    return *p;
#endif
}

/* vload_step's lanes l < nl (0 < nl < VL), the others 0: floats p[l s] for l >= nl are not
 * read (a narrow plane's interior: fewer than VL columns). */
static inline VATTR VF V(vload_stepn)(const float *p, int64_t s, int64_t nl) {
#if FAST_LEVEL == 2
    __mmask16 m = (__mmask16)((1u << nl) - 1);
    if (s == 1) return _mm512_maskz_loadu_ps(m, p);
    const __m512i ramp = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    if (s == 2) { /* floats [0, 2 nl - 1) */
        int64_t c = 2 * nl - 1;
        __mmask16 m0 = (__mmask16)(c >= 16 ? 0xffffu : (1u << c) - 1);
        __mmask16 m1 = (__mmask16)(c > 16 ? (1u << (c - 16)) - 1 : 0u);
        return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0, p), _mm512_add_epi32(ramp, ramp),
                                      _mm512_maskz_loadu_ps(m1, p + 16));
    }
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m,
                                    _mm512_mullo_epi32(ramp, _mm512_set1_epi32((int32_t)s)), p, 4);
#elif FAST_LEVEL == 1
    const __m256i ramp = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)nl), ramp);
    if (s == 1) return _mm256_maskload_ps(p, m);
    __m256i idx = _mm256_mullo_epi32(ramp, _mm256_set1_epi32((int32_t)s));
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), p, idx, _mm256_castsi256_ps(m), 4);
#else
    (void)s, (void)nl;
    return *p;
#endif
}

/* The taps p[2 l], p[2 l + 1], p[2 l + 2] of lanes l < nl (0 < nl < VL) of a stride-2 window of
 * width 3, reading floats [0, 2 nl] only: taps3_s2 for a plane narrower than a vector. At
 * AVX-512 two masked loads and three permutes (the other lanes are junk); SqueezeNet's 27 -> 13
 * pool's 13-wide rows took nine masked loads-and-permutes each through vload_stepn, 95 -> 48 us
 * a call. Elsewhere vload_stepn per tap. */
static inline VATTR void V(taps3_s2n)(const float *p, int64_t nl, VF *t0, VF *t1, VF *t2) {
#if FAST_LEVEL == 2
    const __m512i ramp = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i one = _mm512_set1_epi32(1), even = _mm512_add_epi32(ramp, ramp);
    int64_t c = 2 * nl + 1; /* <= 31 */
    __mmask16 m0 = (__mmask16)(c >= 16 ? 0xffffu : (1u << c) - 1);
    __mmask16 m1 = (__mmask16)(c > 16 ? (1u << (c - 16)) - 1 : 0u);
    __m512 z0 = _mm512_maskz_loadu_ps(m0, p), z1 = _mm512_maskz_loadu_ps(m1, p + 16);
    *t0 = _mm512_permutex2var_ps(z0, even, z1);
    *t1 = _mm512_permutex2var_ps(z0, _mm512_add_epi32(even, one), z1);
    /* lane 15 would need p[32]: index 32 wraps to 0, a junk lane (nl < 16) */
    *t2 = _mm512_permutex2var_ps(z0, _mm512_add_epi32(even, _mm512_add_epi32(one, one)), z1);
#else
    *t0 = V(vload_stepn)(p, 2, nl);
    *t1 = V(vload_stepn)(p + 1, 2, nl);
    *t2 = V(vload_stepn)(p + 2, 2, nl);
#endif
}

/* One vector of outputs, its first nl lanes (0 < nl < VL) stored: columns [col, col + nl), all
 * interior; the rest as pool_vecs. */
static VATTR void V(pool_part)(const PoolGeom *g, const float *x0, int64_t rs, int64_t na,
                               int64_t col, int64_t nl, float dv, float *yr) {
    VF acc = V(vset)(g->is_max ? -FLT_MAX : 0.0f);
    const float *p = x0 + (col * g->sw - g->pl);
    bool k3s2 = g->sw == 2 && g->kw == 3 && g->dw == 1;
    for (int64_t a = 0; a < na; a++) {
        if (k3s2) { /* the same taps in the same order */
            VF t0, t1, t2;
            V(taps3_s2n)(p + a * rs, nl, &t0, &t1, &t2);
            acc = g->is_max ? V(vmax)(t2, V(vmax)(t1, V(vmax)(t0, acc)))
                            : V(vadd)(V(vadd)(V(vadd)(acc, t0), t1), t2);
            continue;
        }
        for (int64_t b = 0; b < g->kw; b++) {
            VF v = V(vload_stepn)(p + a * rs + b * g->dw, g->sw, nl);
            acc = g->is_max ? V(vmax)(v, acc) : V(vadd)(acc, v);
        }
    }
    if (!g->is_max) {
        VF d = V(vmul)(V(vset)(dv), V(vloadn)(g->div_w + col, nl));
        acc = V(vdiv)(acc, V(vmax)(d, V(vset)(1.0f)));
    }
    V(vstoren)(yr + col, acc, nl);
}

/* The three taps p[2 l], p[2 l + 1], p[2 l + 2] (l < VL) of a stride-2 window of width 3, reading
 * no float past p[2 VL]: at AVX-512 two loads deinterleaved and the third tap shifted in from
 * p[2 VL], three permutes where three vload_step would cost six loads and three permutes. */
static inline VATTR void V(taps3_s2)(const float *p, VF *t0, VF *t1, VF *t2) {
#if FAST_LEVEL == 2
    const __m512i ramp = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i one = _mm512_set1_epi32(1), even = _mm512_add_epi32(ramp, ramp);
    __m512 z0 = _mm512_loadu_ps(p), z1 = _mm512_loadu_ps(p + 16);
    *t0 = _mm512_permutex2var_ps(z0, even, z1);
    *t1 = _mm512_permutex2var_ps(z0, _mm512_add_epi32(even, one), z1);
    /* lanes 1..15 of t0, then p[32] */
    *t2 = _mm512_permutex2var_ps(*t0, _mm512_add_epi32(ramp, one), _mm512_set1_ps(p[32]));
#else
    *t0 = V(vload_step)(p, 2);
    *t1 = V(vload_step)(p + 1, 2);
    *t2 = V(vload_step)(p + 2, 2);
#endif
}

/* n (1-4) vectors of outputs of one row: column starts col[0..n) (interior columns), taps from
 * row x0 (the first inside row of the window), na rows rs apart, stride s; one chain of taps per
 * vector, in the reference's order. k3s2: the window is 3 wide, stride 2, dilation 1 (taps3_s2).
 * Inlined with n, s and k3s2 constant. */
static inline __attribute__((always_inline)) VATTR void
V(pool_vecs)(const PoolGeom *g, const float *x0, int64_t rs, int64_t na, const int64_t *col, int n,
             int64_t s, bool k3s2, float dv, float *yr) {
    VF acc[4];
    const float *p[4];
#pragma GCC unroll 4
    for (int k = 0; k < n; k++) {
        acc[k] = V(vset)(g->is_max ? -FLT_MAX : 0.0f);
        p[k] = x0 + (col[k] * s - g->pl);
    }
    for (int64_t a = 0; a < na && k3s2; a++)
#pragma GCC unroll 4
        for (int k = 0; k < n; k++) {
            VF t0, t1, t2;
            V(taps3_s2)(p[k] + a * rs, &t0, &t1, &t2);
            if (g->is_max)
                acc[k] = V(vmax)(t2, V(vmax)(t1, V(vmax)(t0, acc[k])));
            else
                acc[k] = V(vadd)(V(vadd)(V(vadd)(acc[k], t0), t1), t2);
        }
    for (int64_t a = 0; a < na && !k3s2; a++)
        for (int64_t b = 0; b < g->kw; b++) {
            int64_t off = a * rs + b * g->dw;
            if (g->is_max)
#pragma GCC unroll 4
                for (int k = 0; k < n; k++)
                    acc[k] = V(vmax)(V(vload_step)(p[k] + off, s), acc[k]);
            else
#pragma GCC unroll 4
                for (int k = 0; k < n; k++)
                    acc[k] = V(vadd)(acc[k], V(vload_step)(p[k] + off, s));
        }
#pragma GCC unroll 4
    for (int k = 0; k < n; k++) {
        if (!g->is_max) {
            VF d = V(vmul)(V(vset)(dv), V(vload)(g->div_w + col[k]));
            acc[k] = V(vdiv)(acc[k], V(vmax)(d, V(vset)(1.0f)));
        }
        V(vstore)(yr + col[k], acc[k]);
    }
}

/* pool_vecs for a group of n vectors, n and the stride made constants. */
static VATTR void V(pool_group)(const PoolGeom *g, const float *x0, int64_t rs, int64_t na,
                                const int64_t *col, int n, float dv, float *yr) {
#define POOL_N(S, K3)                                                                              \
    switch (n) {                                                                                   \
    case 1: V(pool_vecs)(g, x0, rs, na, col, 1, S, K3, dv, yr); break;                             \
    case 2: V(pool_vecs)(g, x0, rs, na, col, 2, S, K3, dv, yr); break;                             \
    case 3: V(pool_vecs)(g, x0, rs, na, col, 3, S, K3, dv, yr); break;                             \
    default: V(pool_vecs)(g, x0, rs, na, col, 4, S, K3, dv, yr); break;                            \
    }
    if (g->sw == 1)
        POOL_N(1, false)
    else if (g->sw == 2 && g->kw == 3 && g->dw == 1)
        POOL_N(2, true)
    else if (g->sw == 2)
        POOL_N(2, false)
    else
        POOL_N(g->sw, false)
#undef POOL_N
}

/* Output rows [oh0, oh1) of one plane, read straight from the input plane x (no padded copy):
 * the columns [ow_lo, ow_hi) whose taps all lie inside the input's columns VL outputs at a time,
 * up to four vectors side by side (four independent chains; the last vector moved back to end at
 * ow_hi: it recomputes a few outputs, to the same bits), the other columns one at a time over
 * their inside taps. Outside taps are skipped: padding is the start value (-FLT_MAX, or 0 for
 * the sums), which changes nothing. Taps run in the reference's order (rows, then columns): a
 * max keeps the reference's element (a NaN never replaces the running value), a sum adds in its
 * order. */
static VATTR void V(pool_rows)(const PoolGeom *g, const float *x, float *y, int64_t oh0,
                               int64_t oh1) {
    const float init = g->is_max ? -FLT_MAX : 0.0f;
    bool vec = g->ow_hi - g->ow_lo >= VL, part = VL > 1 && g->ow_hi > g->ow_lo && !vec;
    for (int64_t oh = oh0; oh < oh1; oh++) {
        float *yr = y + oh * g->wout;
        int64_t a0, a1; /* the rows' inside taps */
        pool_taps(oh, g->kh, g->sh, g->dh, g->pt, g->h, &a0, &a1);
        int64_t rs = g->dh * g->w, na = a1 - a0;
        const float *x0 = na > 0 ? x + (oh * g->sh - g->pt + a0 * g->dh) * g->w : x; /* row a0 */
        float dv = g->is_max ? 1.0f : g->div_h[oh];
        for (int64_t ow = g->ow_lo; vec && ow < g->ow_hi;) {
            int64_t col[4];
            int n = 0;
            for (; n < 4 && ow < g->ow_hi; n++, ow += VL)
                col[n] = ow + VL <= g->ow_hi ? ow : g->ow_hi - VL;
            V(pool_group)(g, x0, rs, na, col, n, dv, yr);
        }
        if (part) V(pool_part)(g, x0, rs, na, g->ow_lo, g->ow_hi - g->ow_lo, dv, yr);
        for (int64_t ow = 0; ow < g->wout; ow++) {
            if ((vec || part) && ow == g->ow_lo) ow = g->ow_hi; /* done above */
            if (ow >= g->wout) break;
            int64_t b0, b1;
            pool_taps(ow, g->kw, g->sw, g->dw, g->pl, g->w, &b0, &b1);
            float acc = init;
            if (b0 < b1) {
                const float *xc = x0 + (ow * g->sw - g->pl + b0 * g->dw);
                for (int64_t a = 0; a < na; a++)
                    for (int64_t b = 0; b < b1 - b0; b++) {
                        float v = xc[a * rs + b * g->dw];
                        acc = g->is_max ? (v > acc ? v : acc) : acc + v;
                    }
            }
            if (!g->is_max) {
                float d = dv * g->div_w[ow];
                acc /= d > 1.0f ? d : 1.0f;
            }
            yr[ow] = acc;
        }
    }
}
