/* conv.c - fast nn.conv2d (gemm.h): NCHW data, OIHW weights, float32, any stride, padding,
 * dilation and groups, with the semantics of the reference kernel (src/kernels/ref/conv_nd.c;
 * TVM's depthwise rule included: groups == input channels == the weight's O reads the weight
 * (C, M, kh, kw) as (C * M, 1, kh, kw)). Other layouts and dtypes, and calls the reference kernel
 * would reject (it writes the error), go to the reference kernel.
 *
 * Three schemes:
 *   - one input channel per group and fewer than 4 output channels per group (depthwise): a
 *     direct loop per output plane, vectorized along output columns, over a zero-padded copy of
 *     the input plane split into `stride` column phases, so every tap reads contiguous floats;
 *   - 3x3, stride 1, one group, enough channels and outputs, AVX-512: Winograd F(4x4, 3x3)
 *     (winograd.c);
 *   - otherwise a GEMM per image and group, weight (cout/g x cin/g*kh*kw, packed once when it is
 *     a constant) times the im2col columns of the input, which the GEMM's B packer builds block
 *     by block straight from the input (runs of one output row are contiguous input rows); a
 *     1x1, stride-1, unpadded convolution reads the input as B directly. */
#include "kernels/fast/conv.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* An attribute of 1 or 2 values (h, w), each at least lo. */
static bool pair_attr(const KCall *kc, const char *name, int64_t lo, int64_t *h, int64_t *w) {
    const int64_t *v;
    uint32_t n = k_ints(kc, name, &v);
    if (n != 1 && n != 2) return false;
    *h = v[0];
    *w = v[n - 1];
    return *h >= lo && *w >= lo;
}

/* The call's geometry, or false when this kernel does not cover it (the reference kernel
 * decides: it computes it or writes the error). */
static bool conv_geometry(const KCall *kc, Conv *c) {
    const DLTensor *x = k_arg(kc, 0), *wt = k_arg(kc, 1);
    int64_t odt = k_int(kc, "out_dtype");
    const char *ol = k_str(kc, "out_layout");
    if (kc->n_in != 2 || k_dtype(x) != RLY_DTYPE_F32 || k_dtype(wt) != RLY_DTYPE_F32 ||
        (odt >= 0 && odt != RLY_DTYPE_F32) || x->ndim != 4 || wt->ndim != 4 ||
        strcmp(k_str(kc, "data_layout"), "NCHW") != 0 ||
        strcmp(k_str(kc, "kernel_layout"), "OIHW") != 0 || (ol[0] && strcmp(ol, "NCHW") != 0))
        return false;
    memset(c, 0, sizeof *c);
    if (!pair_attr(kc, "strides", 1, &c->sh, &c->sw) ||
        !pair_attr(kc, "dilation", 1, &c->dh, &c->dw))
        return false;
    const int64_t *pad;
    uint32_t np = k_ints(kc, "padding", &pad);
    if (np == 1)
        c->pt = c->pl = c->pb = c->pr = pad[0];
    else if (np == 2)
        c->pt = c->pb = pad[0], c->pl = c->pr = pad[1];
    else if (np == 4)
        c->pt = pad[0], c->pl = pad[1], c->pb = pad[2], c->pr = pad[3];
    else
        return false;
    if (c->pt < 0 || c->pl < 0 || c->pb < 0 || c->pr < 0) return false;
    c->batch = x->shape[0], c->cin = x->shape[1], c->h = x->shape[2], c->w = x->shape[3];
    c->kh = wt->shape[2], c->kw = wt->shape[3];
    int64_t g = c->groups = k_int(kc, "groups"), w0 = wt->shape[0], w1 = wt->shape[1];
    if (g < 1) return false;
    if (g > 1 && c->cin == g && w0 == g) {
        c->cout = w0 * w1;
        c->cin_g = 1;
    } else {
        if (c->cin % g != 0 || w1 * g != c->cin || w0 % g != 0) return false;
        c->cout = w0;
        c->cin_g = w1;
    }
    c->cout_g = c->cout / g;
    if (!k_is_none(kc, "channels") && k_int(kc, "channels") != c->cout) return false;
    if (!k_is_none(kc, "kernel_size")) {
        const int64_t *ks;
        if (k_ints(kc, "kernel_size", &ks) != 2 || ks[0] != c->kh || ks[1] != c->kw) return false;
    }
    int64_t winh = c->dh * (c->kh - 1) + 1, winw = c->dw * (c->kw - 1) + 1;
    int64_t padh = c->h + c->pt + c->pb, padw = c->w + c->pl + c->pr;
    if (c->kh < 1 || c->kw < 1 || winh > padh || winw > padw) return false;
    c->oh = (padh - winh) / c->sh + 1;
    c->ow = (padw - winw) / c->sw + 1;
    c->x = k_ptr(x);
    return true;
}

/* ---- GEMM over im2col columns ---------------------------------------------------------------
 */

/* A run of output positions in one output row: panel columns [jj, jj + len), output row oh,
 * input coordinates of the first position's top-left tap (ih0, iw0). */
typedef struct Seg {
    int64_t jj, len, ih0, iw0;
} Seg;

/* The low 8 bits of m spread to the even bits of a 16-bit mask (bit i to bit 2i). */
static inline __mmask16 spread8(uint64_t m) {
    uint32_t x = (uint32_t)(m & 0xff);
    x = (x | x << 4) & 0x0f0f;
    x = (x | x << 2) & 0x3333;
    x = (x | x << 1) & 0x5555;
    return (__mmask16)x;
}

/* One panel's rows [k0, k0 + kc) for the segments seg (AVX-512): each row built in two registers
 * by masked loads (stride 1; stride 2 loads 64 floats and keeps the even ones) or masked
 * gathers, lanes outside the input left zero. Columns fit
 * int32 (checked by the caller). */
static FAST_AVX512 void im2col_panel_avx512(const Conv *c, const float *x, const Seg *seg,
                                            int n_seg, int64_t k0, int64_t kc, float *panel) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i width = _mm512_set1_epi32((int)c->w), zero = _mm512_setzero_si512();
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    int64_t hw = c->h * c->w;
    int sw = (int)c->sw;
    int64_t kx = k0 % c->kw, ky = k0 / c->kw % c->kh, ch = k0 / (c->kw * c->kh);
    for (int64_t p = 0; p < kc; p++) {
        __m512 r0 = _mm512_setzero_ps(), r1 = r0;
        const float *plane = x + ch * hw;
        for (int s = 0; s < n_seg; s++) {
            const Seg *sg = &seg[s];
            int64_t ih = sg->ih0 + ky * c->dh, iw0 = sg->iw0 + kx * c->dw;
            if ((uint64_t)ih >= (uint64_t)c->h) continue;
            const float *rowp = plane + ih * c->w;
            if (sw == 1) { /* lane l reads column iw0 + l - jj */
                int64_t lo = max64(0, -iw0), hi = min64(sg->len, c->w - iw0);
                if (hi <= lo) continue;
                uint64_t m = (((uint64_t)1 << (hi - lo)) - 1) << (sg->jj + lo);
                const float *b = rowp + (iw0 - sg->jj);
                r0 = _mm512_mask_loadu_ps(r0, (__mmask16)(m & 0xffff), b);
                r1 = _mm512_mask_loadu_ps(r1, (__mmask16)(m >> 16), b + 16);
                continue;
            }
            if (sw == 2) { /* lane l reads column iw0 + 2 (l - jj): 64 floats, even ones kept */
                int64_t lo = iw0 >= 0 ? 0 : (1 - iw0) / 2;
                int64_t hi = iw0 >= c->w ? 0 : min64(sg->len, (c->w - 1 - iw0) / 2 + 1);
                if (hi <= lo) continue;
                uint64_t m = (((uint64_t)1 << (hi - lo)) - 1) << (sg->jj + lo);
                const float *b = rowp + (iw0 - 2 * sg->jj);
                __m512 v0 = _mm512_maskz_loadu_ps(spread8(m), b);
                __m512 v1 = _mm512_maskz_loadu_ps(spread8(m >> 8), b + 16);
                __m512 v2 = _mm512_maskz_loadu_ps(spread8(m >> 16), b + 32);
                __m512 v3 = _mm512_maskz_loadu_ps(spread8(m >> 24), b + 48);
                r0 = _mm512_mask_mov_ps(r0, (__mmask16)(m & 0xffff),
                                        _mm512_permutex2var_ps(v0, even, v1));
                r1 = _mm512_mask_mov_ps(r1, (__mmask16)(m >> 16),
                                        _mm512_permutex2var_ps(v2, even, v3));
                continue;
            }
            /* lane l reads column iw0 + (l - jj) * sw */
            uint64_t segm = (((uint64_t)1 << sg->len) - 1) << sg->jj;
            __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32((int)(iw0 - sg->jj * sw)),
                                          _mm512_mullo_epi32(lane, _mm512_set1_epi32(sw)));
            __m512i i1 = _mm512_add_epi32(i0, _mm512_set1_epi32(16 * sw));
            __mmask16 m0 = (__mmask16)(segm & 0xffff) & _mm512_cmpge_epi32_mask(i0, zero) &
                           _mm512_cmplt_epi32_mask(i0, width);
            __mmask16 m1 = (__mmask16)(segm >> 16) & _mm512_cmpge_epi32_mask(i1, zero) &
                           _mm512_cmplt_epi32_mask(i1, width);
            r0 = _mm512_mask_i32gather_ps(r0, m0, i0, rowp, 4);
            r1 = _mm512_mask_i32gather_ps(r1, m1, i1, rowp, 4);
        }
        _mm512_storeu_ps(panel + p * SGEMM_NR, r0);
        _mm512_storeu_ps(panel + p * SGEMM_NR + 16, r1);
        if (++kx == c->kw) {
            kx = 0;
            if (++ky == c->kh) ky = 0, ch++;
        }
    }
}

/* SGemmPackB: B(p, j) = input tap p = (channel, ky, kx) of output position j = (oy, ox) of
 * product t = image * groups + group. */
static void pack_im2col(const void *ctx, int64_t t, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                        float *dst) {
    const Conv *c = ctx;
    int64_t hw = c->h * c->w;
    const float *x = c->x + t * c->cin_g * hw;
    /* the AVX-512 path indexes columns in int32: |iw0 - jj * sw| + 32 * sw stays far below 2^31 */
    bool z = sup_isa() == SUP_ISA_AVX512 && c->w + c->pl + c->pr + 64 * c->sw < ((int64_t)1 << 30);
    for (int64_t q = 0; q * SGEMM_NR < nc; q++) {
        int64_t width = min64(SGEMM_NR, nc - q * SGEMM_NR);
        float *panel = dst + q * kc * SGEMM_NR;
        Seg seg[SGEMM_NR];
        int n_seg = 0;
        for (int64_t jj = 0; jj < width;) {
            int64_t j = n0 + q * SGEMM_NR + jj, oy = j / c->ow, ox = j % c->ow;
            int64_t len = min64(width - jj, c->ow - ox);
            seg[n_seg++] = (Seg){jj, len, oy * c->sh - c->pt, ox * c->sw - c->pl};
            jj += len;
        }
        if (z) {
            im2col_panel_avx512(c, x, seg, n_seg, k0, kc, panel);
            continue;
        }
        int64_t kx = k0 % c->kw, ky = k0 / c->kw % c->kh, ch = k0 / (c->kw * c->kh);
        for (int64_t p = 0; p < kc; p++) {
            float *row = panel + p * SGEMM_NR;
            const float *plane = x + ch * hw;
            if (width < SGEMM_NR)
                memset(row + width, 0, (size_t)(SGEMM_NR - width) * sizeof(float));
            for (int s = 0; s < n_seg; s++) {
                const Seg *sg = &seg[s];
                float *out = row + sg->jj;
                int64_t ih = sg->ih0 + ky * c->dh, iw0 = sg->iw0 + kx * c->dw;
                if ((uint64_t)ih >= (uint64_t)c->h) {
                    memset(out, 0, (size_t)sg->len * sizeof(float));
                    continue;
                }
                /* positions o in [lo, hi) read columns iw0 + o * sw inside [0, w) */
                int64_t lo = iw0 >= 0 ? 0 : (-iw0 + c->sw - 1) / c->sw;
                int64_t hi = iw0 >= c->w ? 0 : min64(sg->len, (c->w - 1 - iw0) / c->sw + 1);
                lo = min64(lo, sg->len);
                hi = max64(hi, lo);
                const float *src = plane + ih * c->w + iw0;
                memset(out, 0, (size_t)lo * sizeof(float));
                if (c->sw == 1)
                    memcpy(out + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
                else
                    for (int64_t o = lo; o < hi; o++)
                        out[o] = src[o * c->sw];
                memset(out + hi, 0, (size_t)(sg->len - hi) * sizeof(float));
            }
            if (++kx == c->kw) {
                kx = 0;
                if (++ky == c->kh) ky = 0, ch++;
            }
        }
    }
}

static int conv_gemm(KCall *kc, const Conv *c, const DLTensor *o) {
    float *out = k_ptr(o);
    int64_t kk = c->cin_g * c->kh * c->kw, np = c->oh * c->ow;
    SGemm g = {.m = c->cout_g,
               .n = np,
               .k = kk,
               .batch = c->batch * c->groups,
               .a = k_ptr(k_arg(kc, 1)),
               .a_rs = kk,
               .a_cs = 1,
               .a_bs = c->cout_g * kk,
               .a_mod = c->groups,
               .c = out,
               .ldc = np,
               .c_bs = c->cout_g * np};
    if (c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->pt == 0 && c->pl == 0 &&
        c->pb == 0 && c->pr == 0) {
        g.b = c->x;
        g.b_rs = c->h * c->w;
        g.b_cs = 1;
        g.b_bs = c->cin_g * c->h * c->w;
    } else {
        g.pack_b = pack_im2col;
        g.b_ctx = c;
    }
    kern_sgemm_prepare(kc, &g, true, 1, c->groups);
    SGemmKEpi e;
    bool tail = kern_sgemm_bind_epi(kc, o, &g, &e);
    if (kern_sgemm(kc, &g) != 0) return -1;
    kc->epi_done = tail;
    return 0;
}

/* ---- depthwise: direct loops ----------------------------------------------------------------
 */

#define DW_MIN_MACS 32768 /* multiply-adds per task at least */

/* The padded, phase-split copy of one input plane: padded column cc (input column cc - pl) of
 * padded row r (input row r - pt) is at buf[(cc % sw) * ph * pws + r * pws + cc / sw]. Tap t =
 * (ky, kx) of output (oy, ox) is then at buf[oy * sh * pws + tap[t] + ox]: contiguous in ox. */
typedef struct DwRun {
    const Conv *c;
    const float *w;
    float *out;
    float *bufs; /* thread i's copy at bufs + i * buf_floats */
    size_t buf_floats;
    int64_t ph, pws;      /* padded rows, phase row width */
    int64_t per;          /* (image, group) pairs per task */
    const int64_t *tap;   /* kh * kw offsets */
    const KEpilogue *epi; /* the call's fused tail, applied per output plane, or NULL */
} DwRun;

/* Stride 2 (AVX-512): the even floats of src into ev[0 .. n_ev), the odd ones into od[0 ..
 * n_od), 32 at a time. */
static FAST_AVX512 void dw_split2_avx512(const float *src, int64_t n_ev, int64_t n_od, float *ev,
                                         float *od) {
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    int64_t i = 0;
    for (; i + 16 <= n_ev && i + 16 <= n_od; i += 16) {
        __m512 v0 = _mm512_loadu_ps(src + 2 * i), v1 = _mm512_loadu_ps(src + 2 * i + 16);
        _mm512_storeu_ps(ev + i, _mm512_permutex2var_ps(v0, ie, v1));
        _mm512_storeu_ps(od + i, _mm512_permutex2var_ps(v0, io, v1));
    }
    for (int64_t j = i; j < n_ev; j++)
        ev[j] = src[2 * j];
    for (int64_t j = i; j < n_od; j++)
        od[j] = src[2 * j + 1];
}

/* Copies one input plane into buf. Only input positions are written, the same ones for every
 * plane, so the padding stays zero: buf is zero-filled once (k_scratch) and reused. */
static void dw_fill(const DwRun *r, const float *x, float *buf, SupIsa isa) {
    const Conv *c = r->c;
    int64_t plane = r->ph * r->pws;
    for (int64_t ih = 0; ih < c->h && ih + c->pt < r->ph; ih++) {
        const float *src = x + ih * c->w;
        float *row = buf + (ih + c->pt) * r->pws;
        if (c->sw == 1) {
            memcpy(row + c->pl, src, (size_t)min64(c->w, r->pws - c->pl) * sizeof(float));
            continue;
        }
        if (c->sw == 2 && isa == SUP_ISA_AVX512) {
            /* input column iw goes to phase (iw + pl) % 2, index (iw + pl) / 2 */
            int64_t e0 = c->pl / 2, o0 = (c->pl + 1) / 2;
            float *ev = row + (c->pl % 2) * plane + e0, *od = row + ((c->pl + 1) % 2) * plane + o0;
            dw_split2_avx512(src, max64(0, min64((c->w + 1) / 2, r->pws - e0)),
                             max64(0, min64(c->w / 2, r->pws - o0)), ev, od);
            continue;
        }
        int64_t q = c->pl % c->sw, at = c->pl / c->sw; /* phase and index of column iw */
        for (int64_t iw = 0; iw < c->w && at < r->pws; iw++) {
            row[q * plane + at] = src[iw];
            if (++q == c->sw) q = 0, at++;
        }
    }
}

/* Output plane o (oh x ow) of weights wk (kh x kw) over the copy buf. */
static void dw_plane_scalar(const DwRun *r, const float *buf, const float *wk, float *o) {
    const Conv *c = r->c;
    int64_t taps = c->kh * c->kw;
    for (int64_t oy = 0; oy < c->oh; oy++) {
        const float *base = buf + oy * c->sh * r->pws;
        for (int64_t ox = 0; ox < c->ow; ox++) {
            float acc = 0;
            for (int64_t t = 0; t < taps; t++)
                acc += wk[t] * base[r->tap[t] + ox];
            o[oy * c->ow + ox] = acc;
        }
    }
}

/* Vector code: V-float chunks of an output row, four at a time (four independent FMA chains)
 * while at least four remain, then one at a time. Loads may run past the row's last output
 * column into the copy's slack; stores are masked. */
#define DW_PLANE(NAME, ATTR, V, VEC, ZERO, LOAD, SET1, FMA, STORE_PART)                            \
    static ATTR void NAME(const DwRun *r, const float *buf, const float *wk, float *o) {           \
        const Conv *c = r->c;                                                                      \
        int64_t taps = c->kh * c->kw;                                                              \
        for (int64_t oy = 0; oy < c->oh; oy++) {                                                   \
            const float *base = buf + oy * c->sh * r->pws;                                         \
            float *orow = o + oy * c->ow;                                                          \
            int64_t ox = 0;                                                                        \
            for (; ox + 3 * V < c->ow; ox += 4 * V) {                                              \
                VEC a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;                                    \
                for (int64_t t = 0; t < taps; t++) {                                               \
                    const float *p = base + r->tap[t] + ox;                                        \
                    VEC wv = SET1(wk[t]);                                                          \
                    a0 = FMA(wv, LOAD(p), a0);                                                     \
                    a1 = FMA(wv, LOAD(p + V), a1);                                                 \
                    a2 = FMA(wv, LOAD(p + 2 * V), a2);                                             \
                    a3 = FMA(wv, LOAD(p + 3 * V), a3);                                             \
                }                                                                                  \
                STORE_PART(orow + ox, a0, c->ow - ox);                                             \
                STORE_PART(orow + ox + V, a1, c->ow - ox - V);                                     \
                STORE_PART(orow + ox + 2 * V, a2, c->ow - ox - 2 * V);                             \
                STORE_PART(orow + ox + 3 * V, a3, c->ow - ox - 3 * V);                             \
            }                                                                                      \
            for (; ox < c->ow; ox += V) {                                                          \
                VEC a0 = ZERO;                                                                     \
                for (int64_t t = 0; t < taps; t++)                                                 \
                    a0 = FMA(SET1(wk[t]), LOAD(base + r->tap[t] + ox), a0);                        \
                STORE_PART(orow + ox, a0, c->ow - ox);                                             \
            }                                                                                      \
        }                                                                                          \
    }

/* Store the first min(left, V) lanes of v at p. */
#define Z_STORE_PART(p, v, left)                                                                   \
    _mm512_mask_storeu_ps(p, (__mmask16)((left) >= 16 ? 0xffff : (1u << (left)) - 1), v)
#define Y_STORE_PART(p, v, left)                                                                   \
    _mm256_maskstore_ps(p,                                                                         \
                        _mm256_cmpgt_epi32(_mm256_set1_epi32((int)min64(8, left)),                 \
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),             \
                        v)
DW_PLANE(dw_plane_avx512, FAST_AVX512, 16, __m512, _mm512_setzero_ps(), _mm512_loadu_ps,
         _mm512_set1_ps, _mm512_fmadd_ps, Z_STORE_PART)
DW_PLANE(dw_plane_avx2, FAST_AVX2, 8, __m256, _mm256_setzero_ps(), _mm256_loadu_ps, _mm256_set1_ps,
         _mm256_fmadd_ps, Y_STORE_PART)

static void dw_task(void *ctx, int64_t task, int worker) {
    const DwRun *r = ctx;
    const Conv *c = r->c;
    float *buf = r->bufs + (size_t)worker * r->buf_floats;
    SupIsa isa = sup_isa();
    int64_t pairs = c->batch * c->groups, hw = c->h * c->w, khw = c->kh * c->kw;
    for (int64_t t = task * r->per; t < min64(pairs, (task + 1) * r->per); t++) {
        int64_t n = t / c->groups, g = t % c->groups;
        dw_fill(r, c->x + (n * c->cin + g) * hw, buf, isa);
        for (int64_t m = 0; m < c->cout_g; m++) {
            int64_t oc = g * c->cout_g + m;
            const float *wk = r->w + oc * khw;
            float *o = r->out + (n * c->cout + oc) * c->oh * c->ow;
            if (isa == SUP_ISA_AVX512)
                dw_plane_avx512(r, buf, wk, o);
            else if (isa == SUP_ISA_AVX2)
                dw_plane_avx2(r, buf, wk, o);
            else
                dw_plane_scalar(r, buf, wk, o);
            if (r->epi != NULL)
                r->epi->apply(r->epi->ctx, (n * c->cout + oc) * c->oh * c->ow, c->oh * c->ow);
        }
    }
}

static int conv_depthwise(KCall *kc, const Conv *c, const DLTensor *o) {
    DwRun r = {.c = c, .w = k_ptr(k_arg(kc, 1)), .out = k_ptr(o)};
    r.ph = (c->oh - 1) * c->sh + (c->kh - 1) * c->dh + 1;
    int64_t pw = (c->ow - 1) * c->sw + (c->kw - 1) * c->dw + 1;
    /* vector loads run up to 15 floats past the last output column */
    r.pws = max64((pw + c->sw - 1) / c->sw, (c->ow + 15) / 16 * 16 + (c->kw - 1) * c->dw / c->sw);
    r.buf_floats = (size_t)((c->sw * r.ph * r.pws + 15) / 16 * 16);
    int64_t pairs = c->batch * c->groups, taps = c->kh * c->kw;
    double macs = (double)c->cout_g * (double)(c->oh * c->ow) * (double)taps;
    r.per = macs >= DW_MIN_MACS ? 1 : (int64_t)(DW_MIN_MACS / (macs > 0 ? macs : 1)) + 1;
    int64_t n_tasks = (pairs + r.per - 1) / r.per;
    int64_t *tap = k_scratch_n(kc, taps, sizeof(int64_t));
    r.bufs = tap ? k_scratch_n(kc, (int64_t)r.buf_floats * k_threads(kc), sizeof(float)) : NULL;
    if (r.bufs == NULL) return -1;
    for (int64_t ky = 0; ky < c->kh; ky++)
        for (int64_t kx = 0; kx < c->kw; kx++) {
            int64_t cc = kx * c->dw;
            tap[ky * c->kw + kx] = ky * c->dh * r.pws + (cc % c->sw) * r.ph * r.pws + cc / c->sw;
        }
    r.tap = tap;
    if (kc->epi != NULL && kc->epi->begin(kc->epi->ctx, o) == 0) r.epi = kc->epi;
    k_parallel(kc, n_tasks, dw_task, &r);
    kc->epi_done = r.epi != NULL;
    return 0;
}

int kern_fast_conv2d(KCall *kc) {
    Conv c;
    if (!conv_geometry(kc, &c)) return kern_ref_lookup(OP_ID_NN_CONV2D)(kc);
    int64_t shape[4] = {c.batch, c.cout, c.oh, c.ow};
    DLTensor *o = k_out(kc, 0, RLY_DTYPE_F32, 4, shape);
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* dims may be huge */
    if (c.cin_g == 1 && c.cout_g < 4) return conv_depthwise(kc, &c, o);
    const char *mode = getenv("RLY_CONV"); /* XXX: measuring only */
    if (mode && strcmp(mode, "direct") == 0 && kern_conv_direct_fits(&c))
        return kern_conv_direct(kc, &c, o);
    if (mode && strcmp(mode, "gemm") == 0) return conv_gemm(kc, &c, o);
    if (kern_conv_winograd_fits(&c)) return kern_conv_winograd(kc, &c, o);
    return conv_gemm(kc, &c, o);
}
