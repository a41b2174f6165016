/* conv.c - fast nn.conv2d (gemm.h): NCHW data, OIHW weights, float32, any stride, padding,
 * dilation and groups, with the semantics of the reference kernel (src/kernels/ref/conv_nd.c;
 * TVM's depthwise rule included: groups == input channels == the weight's O reads the weight
 * (C, M, kh, kw) as (C * M, 1, kh, kw)). Other layouts and dtypes, and calls the reference kernel
 * would reject (it writes the error), go to the reference kernel.
 *
 * Five schemes (docs/kernels.md has the measurements behind the choice):
 *   - one input channel per group and fewer than 4 output channels per group (depthwise): 3x3,
 *     stride 1 or 2, one output channel per group (AVX-512; AVX2 at stride 2, or stride 1 onto
 *     rows of at most 8) puts 16 (8) channels on the vector lanes, transposing strips of their
 *     planes in and out of registers; otherwise direct loops per output plane, vectorized along
 *     output columns: 3x3 stride 1 (and stride 2 onto planes up to 16 wide) at AVX-512 read the
 *     input plane in place, four output rows at a time; the rest read a zero-padded copy of the
 *     plane split into stride x stride phases, so every tap reads contiguous floats of a
 *     flattened output grid;
 *   - 3x3, stride 1, one group, enough channels and outputs, AVX-512 or AVX2: Winograd
 *     F(4x4, 3x3) (winograd.c);
 *   - AVX-512, one group of at most 4 input channels, a stride (at most 2 across), not 1x1, 16+
 *     output channels (a network's first layer): the product read straight from the input's
 *     phase planes (conv_phase.c), no im2col;
 *   - AVX-512 or AVX2, 16+ output channels and 64+ taps per group (16+ with at most 32 output
 *     channels), not 1x1 stride 1 unpadded (but on small planes at AVX-512), not 1x1 at AVX2: a
 *     direct convolution with output channels on the vector lanes (conv_direct.c), no im2col;
 *   - otherwise a GEMM per image and group, weight (cout/g x cin/g*kh*kw, packed once when it is
 *     a constant) times the im2col columns of the input, which the GEMM's B packer builds block
 *     by block straight from the input (runs of one output row are contiguous input rows); a
 *     1x1, stride-1, unpadded convolution reads the input as B directly. */
#include "kernels/fast/conv.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
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

bool kern_conv_attrs(const KCall *kc, Conv *c) {
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
    /* attribute values from a file may be anything: past 2^30 the sums below could overflow, and
     * such a call is the reference kernel's (its arithmetic is checked) */
    const int64_t big = (int64_t)1 << 30;
    return c->pt <= big && c->pl <= big && c->pb <= big && c->pr <= big && c->sh <= big &&
           c->sw <= big && c->dh <= big && c->dw <= big && k_int(kc, "groups") >= 1;
}

bool kern_conv_extents(const KCall *kc, Conv *c) {
    if (!k_is_none(kc, "channels") && k_int(kc, "channels") != c->cout) return false;
    if (!k_is_none(kc, "kernel_size")) {
        const int64_t *ks;
        if (k_ints(kc, "kernel_size", &ks) != 2 || ks[0] != c->kh || ks[1] != c->kw) return false;
    }
    const int64_t big = (int64_t)1 << 30;
    if (c->kh > big || c->kw > big) return false; /* an empty weight's dims may be huge */
    int64_t winh = c->dh * (c->kh - 1) + 1, winw = c->dw * (c->kw - 1) + 1;
    int64_t padh = c->h + c->pt + c->pb, padw = c->w + c->pl + c->pr;
    if (c->kh < 1 || c->kw < 1 || winh > padh || winw > padw) return false;
    c->oh = (padh - winh) / c->sh + 1;
    c->ow = (padw - winw) / c->sw + 1;
    return true;
}

/* A 1x1, stride-1, unpadded convolution: the GEMM reads the input as B in place
 * (NCHW data). */
static bool gemm_reads_input(const Conv *c) {
    return c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->pt == 0 && c->pl == 0 &&
           c->pb == 0 && c->pr == 0;
}

/* The call's geometry, or false when this kernel does not cover it (the reference kernel
 * decides: it computes it or writes the error). NCHW data; with `blocked`, also NCHW{b}c data
 * (a 5-d tensor whose last dim is b) into an NCHW result (out_layout), one group, 1x1, stride 1,
 * unpadded: a projection to channels that blocks of b do not divide (MobileNetV2's 24), which
 * ConvertLayout leaves reading the blocked layer before it (conv_gemm packs B from it). */
static bool conv_geometry_n(const KCall *kc, Conv *c, uint32_t n_in, bool blocked) {
    const DLTensor *x = k_arg(kc, 0), *wt = k_arg(kc, 1);
    int64_t odt = k_int(kc, "out_dtype");
    const char *ol = k_str(kc, "out_layout"), *dl = k_str(kc, "data_layout");
    int64_t xb = kern_conv_layout_block(dl, "NCHW", "c"); /* 0 for "NCHW" */
    if (kc->n_in != n_in || k_dtype(x) != RLY_DTYPE_F32 || k_dtype(wt) != RLY_DTYPE_F32 ||
        (odt >= 0 && odt != RLY_DTYPE_F32) || wt->ndim != 4 ||
        (xb ? !blocked || x->ndim != 5 || x->shape[4] != xb || strcmp(ol, "NCHW") != 0
            : strcmp(dl, "NCHW") != 0 || x->ndim != 4 || (ol[0] && strcmp(ol, "NCHW") != 0)) ||
        strcmp(k_str(kc, "kernel_layout"), "OIHW") != 0 || !kern_conv_attrs(kc, c))
        return false;
    c->xb = xb;
    if (xb && x->shape[1] > ((int64_t)1 << 30) / xb) return false;
    c->batch = x->shape[0], c->cin = x->shape[1] * (xb ? xb : 1), c->h = x->shape[2],
    c->w = x->shape[3];
    c->kh = wt->shape[2], c->kw = wt->shape[3];
    int64_t g = c->groups = k_int(kc, "groups"), w0 = wt->shape[0], w1 = wt->shape[1];
    if (g > 1 && c->cin == g && w0 == g) {
        c->cout = w0 * w1;
        c->cin_g = 1;
    } else {
        if (c->cin % g != 0 || w1 * g != c->cin || w0 % g != 0) return false;
        c->cout = w0;
        c->cin_g = w1;
    }
    c->cout_g = c->cout / g;
    if (!kern_conv_extents(kc, c)) return false;
    if (xb && (c->groups != 1 || !gemm_reads_input(c))) return false;
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
    /* the input tensor: a stride-2 row's 64 floats are read by plain loads when they lie in it
     * (the segment's lanes are kept by a mask), sparing the four load masks (SqueezeNet's 3x3/2
     * first layer: the packer was 27% of its samples) */
    const float *x_lo = c->x, *x_hi = c->x + c->batch * c->cin * c->h * c->w;
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
                __m512 v0, v1, v2, v3;
                if (b >= x_lo && b + 64 <= x_hi) { /* plain loads inside the input tensor */
                    v0 = _mm512_loadu_ps(b), v1 = _mm512_loadu_ps(b + 16);
                    v2 = _mm512_loadu_ps(b + 32), v3 = _mm512_loadu_ps(b + 48);
                } else {
                    v0 = _mm512_maskz_loadu_ps(spread8(m), b);
                    v1 = _mm512_maskz_loadu_ps(spread8(m >> 8), b + 16);
                    v2 = _mm512_maskz_loadu_ps(spread8(m >> 16), b + 32);
                    v3 = _mm512_maskz_loadu_ps(spread8(m >> 24), b + 48);
                }
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

/* A 1x1 convolution the GEMM would read in place goes to conv_direct on small planes, where
 * the GEMM's 32-wide column panels waste lanes (49 positions fill 64, 196 fill 224) and the
 * direct tile (positions x 32 channels) does not. Measured (bench_gemm, 1 thread): 960->160 at
 * 7x7 0.15 vs 0.20 ms, 320->1280 at 7x7 0.40-0.44 vs 0.51-0.54, 384->64 at 14x14 0.089 vs 0.10;
 * slower: 64->384 at 14x14 (64 taps: the tile's transpose weighs more), 512->1000 at 13x13
 * (its last panel of 8 channels) by 5-8%. Not for a product of at most 64 rows (one image, one
 * group), which the GEMM splits along K over the threads (gemm.c, plan_gemm): each core then
 * reads only its part of the input, where the direct tiles split the output channels and each
 * core reads all of it, half of it from the other core. SqueezeNet's 13 x 13 squeezes in the
 * model (Intel Xeon): 2 threads 512->64 96 -> 58 us, 384->64 65 -> 45; 1 thread 80 -> 87 and
 * 61 -> 66. */
static bool direct_1x1_pays(const Conv *c) {
    int64_t np = c->oh * c->ow;
    return np < 128 || (np <= 256 && c->cin_g >= 256 && c->cout_g % 32 == 0 &&
                        !kern_sgemm_narrow(c->cout_g, np, c->cin_g, c->batch * c->groups));
}

/* Columns [n0, n0 + nc) of pack_blocked's rows [k0, k0 + kc) at AVX-512, blocks of 16: block by
 * block, each read as one sequential stream, 16 positions' lanes at a time transposed in
 * registers into 16 channel rows of their panel; columns past nc zero. The loads wait on L2 or
 * L3 (a third of MobileNetV2's 144 -> 24 layer alone, with the whole block packed before the
 * products), whether by block or panel by panel. */
static FAST_AVX512 void blocked_b_avx512(const float *x, int64_t hw, int64_t k0, int64_t kc,
                                         int64_t n0, int64_t nc, float *dst) {
    int64_t n_whole = cdiv(nc, SGEMM_NR) * SGEMM_NR; /* the last panel's zero columns too */
    for (int64_t cb = k0 / 16; cb * 16 < k0 + kc; cb++) {
        int64_t l0 = max64(k0 - cb * 16, 0), l1 = min64(k0 + kc - cb * 16, 16);
        const float *xb = x + (cb * hw + n0) * 16;
        for (int64_t jj = 0; jj < n_whole; jj += 16) {
            __m512 r[16];
            int64_t n = min64(max64(nc - jj, 0), 16);
            if (n == 16) { /* unrolled, so r stays in registers (the loop below spills it) */
                _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) r[i] =
                    _mm512_loadu_ps(xb + (jj + i) * 16);
            } else {
                for (int i = 0; i < 16; i++)
                    r[i] = i < n ? _mm512_loadu_ps(xb + (jj + i) * 16) : _mm512_setzero_ps();
            }
            conv_transpose16(r);
            float *rows = dst + jj / SGEMM_NR * kc * SGEMM_NR + jj % SGEMM_NR - k0 * SGEMM_NR;
            for (int64_t l = l0; l < l1; l++)
                _mm512_storeu_ps(rows + (cb * 16 + l) * SGEMM_NR, r[l]);
        }
    }
}

/* SGemmPackB of a 1x1 convolution's NCHW{b}c input (Conv.xb): B(p, j) = channel p at position
 * j of image t, at x[t][p / b][j][p % b]. */
static void pack_blocked(const void *ctx, int64_t t, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                         float *dst) {
    const Conv *c = ctx;
    int64_t hw = c->h * c->w, b = c->xb;
    const float *x = c->x + t * c->cin * hw;
    if (sup_isa() == SUP_ISA_AVX512 && b == 16) {
        blocked_b_avx512(x, hw, k0, kc, n0, nc, dst);
        return;
    }
    for (int64_t q = 0; q * SGEMM_NR < nc; q++) {
        int64_t width = min64(SGEMM_NR, nc - q * SGEMM_NR), j0 = n0 + q * SGEMM_NR;
        float *panel = dst + q * kc * SGEMM_NR;
        for (int64_t p = 0; p < kc; p++) {
            const float *src = x + (k0 + p) / b * hw * b + (k0 + p) % b + j0 * b;
            float *row = panel + p * SGEMM_NR;
            for (int64_t jj = 0; jj < width; jj++)
                row[jj] = src[jj * b];
            for (int64_t jj = width; jj < SGEMM_NR; jj++)
                row[jj] = 0;
        }
    }
}

static _Atomic uint64_t n_blocked_b;
uint64_t kern_conv_blocked_b_taken(void) { return n_blocked_b; }

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
    if (c->xb) {
        g.pack_b = pack_blocked;
        g.b_ctx = c;
        /* B blocks of 4 panels: the packer streams the input from L2 or L3 (memory-bound) and
         * the products compute (FMA-bound) in turn, so the input's stream keeps coming while
         * the tiles run. MobileNetV2's 144 -> 24 at 56 x 56 alone, 1 thread: 249 -> 211 us
         * (B blocks of 2048 columns: one pass of packing, then one of products); 32 to 512
         * columns were alike. */
        g.pack_cols = 4 * SGEMM_NR;
        n_blocked_b++;
    } else if (gemm_reads_input(c)) {
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
    bool tail = kern_sgemm_bind_epi(kc, o, &g, &e, SGEMM_BIAS_ROWS, c->groups);
    if (kern_sgemm(kc, &g) != 0) return -1;
    kc->epi_done = tail;
    return 0;
}

/* ---- a convolution, its bias and relu, then a max pool: one kernel (the VM's pairs) ---------
 *
 * SqueezeNet's first layer writes 64 planes of 111 x 111 (3.15 MB) and its max pool reads them
 * back: both went to L3 and back. Here each task computes a band of the convolution's rows (the
 * pool's rows [p0, p1) read rows 2 p0 .. 2 p1 of it: the row between two bands is computed by
 * both) into a buffer of its own, with the bias and relu in the product's tiles as the separate
 * call applies them, and pools the band from there (L2): the same values, in the same order,
 * as the two calls. */

/* pool rows a band, at most: 33 rows of a 111-wide, 64-channel layer, 0.9 MB */
#define CP_BAND 16

typedef struct CpRun {
    const Conv *c;
    SGemm g;             /* the product's template: A prepared, B the im2col of the band */
    const float *bias;   /* one per output channel */
    bool bias_first;     /* b + x */
    float *out;          /* the pool's result */
    int64_t hout, wout;  /* the pool's output plane */
    int64_t band, bands; /* pool rows per band, bands per image */
    float *bufs;         /* worker w's band at bufs + w * buf_floats, then its product scratch */
    size_t buf_floats, band_floats;
} CpRun;

typedef struct CpBand {
    const Conv *c;
    int64_t col0; /* the band's first output position */
} CpBand;

/* SGemmPackB of a band: its columns are the convolution's output positions from col0 on */
static void pack_band(const void *ctx, int64_t t, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                      float *dst) {
    const CpBand *b = ctx;
    pack_im2col(b->c, t, k0, kc, b->col0 + n0, nc, dst);
}

static void cp_task(void *ctx, int64_t task, int worker) {
    const CpRun *r = ctx;
    const Conv *c = r->c;
    int64_t img = task / r->bands, p0 = task % r->bands * r->band;
    int64_t p1 = min64(r->hout, p0 + r->band), y0 = 2 * p0, rows = 2 * (p1 - p0) + 1;
    float *cb = r->bufs + (size_t)worker * r->buf_floats;
    Conv ci = *c; /* the image's input (pack_im2col's product 0) */
    ci.x = c->x + img * c->cin * c->h * c->w;
    ci.batch = 1; /* the packer reads plainly only inside [x, x + batch images) */
    CpBand band = {&ci, y0 * c->ow};
    SGemm g = r->g;
    g.n = rows * c->ow;
    g.c = cb;
    g.ldc = g.n;
    g.c_bs = c->cout * g.n;
    g.pack_b = pack_band;
    g.b_ctx = &band;
    g.batch = 1;
    g.a_mod = 0;
    SGemmKEpi e;
    KEpilogue ke;
    kern_sgemm_bias_rows(&g, &e, &ke, r->bias, r->bias_first, K_CLAMP_RELU);
    kern_sgemm_run(&g, NULL, cb + r->band_floats);
    float *o = r->out + img * c->cout * r->hout * r->wout;
    for (int64_t oc = 0; oc < c->cout; oc++)
        kern_max3s2_rows(cb + oc * g.n, rows, c->ow, o + (oc * r->hout + p0) * r->wout, r->wout, 0,
                         p1 - p0);
}

static _Atomic uint64_t n_conv_maxpool;
uint64_t kern_conv_maxpool_taken(void) { return n_conv_maxpool; }

int kern_fast_conv_maxpool(KCall *kc) {
    Conv c;
    if (sup_isa() != SUP_ISA_AVX512 || !conv_geometry_n(kc, &c, 3, false) || c.groups != 1 ||
        c.oh < 3 || c.ow < 3)
        return K_DECLINED;
    /* the phase product (conv_phase.c), or the im2col product */
    bool phase = kern_conv_phase_fits(&c);
    if (!phase && ((c.cin_g == 1 && c.cout_g < 4) || kern_conv_winograd_fits(&c) ||
                   kern_conv_direct_fits(&c) || gemm_reads_input(&c)))
        return K_DECLINED;
    /* a bias per channel: (C, 1, 1) or (1, C, 1, 1); a (C) one would broadcast along W */
    const DLTensor *b = k_arg(kc, 2);
    if (k_dtype(b) != RLY_DTYPE_F32 || k_numel(b) != c.cout || b->ndim < 3 || b->ndim > 4 ||
        b->shape[b->ndim - 3] != c.cout)
        return K_DECLINED;
    const int64_t *ps, *st, *dl, *pd;
    uint32_t n_ps = k_ints(kc, "pool.pool_size", &ps), n_st = k_ints(kc, "pool.strides", &st);
    uint32_t n_dl = k_ints(kc, "pool.dilation", &dl), n_pd = k_ints(kc, "pool.padding", &pd);
    bool ok = n_ps >= 1 && n_ps <= 2 && n_st >= 1 && n_st <= 2 && n_dl >= 1 && n_dl <= 2 &&
              n_pd >= 1 && n_pd <= 4 && strcmp(k_str(kc, "pool.layout"), "NCHW") == 0 &&
              k_str(kc, "pool.out_layout")[0] == '\0';
    for (uint32_t i = 0; ok && i < 2; i++)
        ok = ps[i % n_ps] == 3 && st[i % n_st] == 2 && dl[i % n_dl] == 1;
    /* the pool's padding (top, left, bottom, right): 1, 2 (h, w) or 4 values, each at most 2
     * (a window keeps a tap inside), and only with the phase product (its band buffer has room
     * for the padding) */
    int64_t pp[4] = {0, 0, 0, 0};
    ok = ok && n_pd != 3;
    for (uint32_t i = 0; ok && i < 4; i++) {
        pp[i] = n_pd == 4 ? pd[i] : n_pd == 2 ? pd[i % 2] : pd[0];
        ok = pp[i] == 0 || (phase && pp[i] > 0 && pp[i] <= 2);
    }
    if (!ok || kc->bad_attr != NULL) {
        kc->bad_attr = NULL; /* a missing attribute: not this kernel's call */
        return K_DECLINED;
    }
    /* stride 2: with ceil_mode a last window would start at 2 (hout - 1) and must lie inside
     * (unpadded), or the padded output must be the floor's (the reference's rule for a window
     * past the padding is not this kernel's) */
    bool ceil = k_bool(kc, "pool.ceil_mode");
    int64_t eh = c.oh + pp[0] + pp[2] - 3, ew = c.ow + pp[1] + pp[3] - 3;
    if (eh < 0 || ew < 0) return K_DECLINED;
    bool padded = pp[0] || pp[1] || pp[2] || pp[3];
    if (padded && ceil && (eh % 2 != 0 || ew % 2 != 0)) return K_DECLINED;
    int64_t hout = eh / 2 + 1 + (ceil && eh % 2 != 0), wout = ew / 2 + 1 + (ceil && ew % 2 != 0);
    if (!padded && (2 * (hout - 1) + 3 > c.oh || 2 * (wout - 1) + 3 > c.ow)) return K_DECLINED;
    int64_t shape[4] = {c.batch, c.cout, hout, wout};
    DLTensor *o = k_out_raw(kc, 0, RLY_DTYPE_F32, 4, shape); /* every element written */
    if (o == NULL) return -1;
    if (phase) {
        if (kern_conv_phase_maxpool(kc, &c, k_ptr(b), k_bool(kc, "bias_first"), pp[0], pp[1],
                                    k_ptr(o), hout, wout) != 0)
            return -1;
        n_conv_maxpool++;
        return 0;
    }
    int64_t kk = c.cin * c.kh * c.kw;
    CpRun r = {.c = &c,
               .bias = k_ptr(b),
               .bias_first = k_bool(kc, "bias_first"),
               .out = k_ptr(o),
               .hout = hout,
               .wout = wout};
    r.g = (SGemm){.m = c.cout,
                  .n = c.oh * c.ow,
                  .k = kk,
                  .batch = 1,
                  .a = k_ptr(k_arg(kc, 1)),
                  .a_rs = kk,
                  .a_cs = 1,
                  .pack_b = pack_im2col,
                  .b_ctx = &c};
    kern_sgemm_prepare(kc, &r.g, true, 1, 1); /* the weights packed once, as conv_gemm's */
    /* bands of at most CP_BAND pool rows, a multiple of the threads in number */
    int nt = k_threads(kc);
    r.bands = cdiv(hout, CP_BAND);
    r.bands = cdiv(r.bands, nt) * nt;
    if (r.bands > hout) r.bands = hout;
    r.band = cdiv(hout, r.bands);
    r.bands = cdiv(hout, r.band);
    SGemm gb = r.g;
    gb.n = (2 * r.band + 1) * c.ow;
    r.band_floats = (size_t)(c.cout * gb.n + 15) / 16 * 16;
    size_t gs = kern_sgemm_scratch_bytes(&gb, 1);
    r.buf_floats = r.band_floats + (gs / sizeof(float) + 15) / 16 * 16;
    r.bufs = k_scratch_raw(kc, sizeof(float) * r.buf_floats * (size_t)nt);
    if (r.bufs == NULL) return -1;
    k_parallel(kc, c.batch * r.bands, cp_task, &r);
    n_conv_maxpool++;
    return 0;
}

/* ---- depthwise: direct loops ----------------------------------------------------------------
 */

#define DW_MIN_MACS 32768 /* multiply-adds per task at least */
#define DW_SLACK 128      /* floats past the copy and the grid that a vector step may touch */

/* The input plane is copied into sh x sw phase planes of ph x pws floats: padded row r, padded
 * column cc (input row r - pt, column cc - pl) goes to phase (r % sh, cc % sw), row r / sh,
 * column cc / sw. Tap (ky, kx) of output (oy, ox) is then element oy * pws + ox + tap[t] of the
 * copy: over the flattened output grid q = oy * pws + ox every tap reads contiguous floats,
 * whatever the stride, dilation or plane size. The kernel computes the whole grid (oh x pws:
 * columns ox >= ow are discarded) in vectors of consecutive q, then copies the output rows out of
 * it. */
typedef struct DwRun {
    const Conv *c;
    const float *w;
    float *out;
    float *bufs; /* thread i's copy at bufs + i * buf_floats, its grid at + grid_at */
    size_t buf_floats, grid_at;
    int64_t ph, pws;      /* rows and columns of a phase plane */
    int64_t grid;         /* oh * pws positions */
    int64_t per;          /* (image, group) pairs per task */
    const int64_t *tap;   /* kh * kw offsets */
    const KEpilogue *epi; /* the call's fused tail, applied per task, or NULL */
    bool dw3;             /* dw3_plane: no copy, no grid */
    bool phase2;          /* dw3_phase2: the copy, no grid */
} DwRun;

/* Stride 2 (AVX-512): the even floats of src into ev[0 .. n_ev), the odd ones into od[0 ..
 * n_od) (n_od <= n_ev <= n_od + 1; od NULL: the even ones alone), 32 floats a step, the last
 * one masked: no load reaches past src[n_ev + n_od - 1]. */
static FAST_AVX512 void dw_split2_avx512(const float *src, int64_t n_ev, int64_t n_od, float *ev,
                                         float *od) {
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    int64_t n = n_ev + n_od; /* source floats */
    for (int64_t i = 0; 2 * i < n; i += 16) {
        int64_t left = n - 2 * i; /* source floats from src + 2 i on */
        __mmask16 l0 = (__mmask16)(left >= 16 ? 0xffff : (1u << left) - 1);
        __mmask16 l1 = (__mmask16)(left >= 32 ? 0xffff : left > 16 ? (1u << (left - 16)) - 1 : 0);
        __m512 v0 = _mm512_maskz_loadu_ps(l0, src + 2 * i);
        __m512 v1 = _mm512_maskz_loadu_ps(l1, src + 2 * i + 16);
        int64_t e = n_ev - i, o = n_od - i;
        _mm512_mask_storeu_ps(ev + i, (__mmask16)(e >= 16 ? 0xffff : (1u << e) - 1),
                              _mm512_permutex2var_ps(v0, ie, v1));
        if (od != NULL && o > 0)
            _mm512_mask_storeu_ps(od + i, (__mmask16)(o >= 16 ? 0xffff : (1u << o) - 1),
                                  _mm512_permutex2var_ps(v0, io, v1));
    }
}

/* dst[0 .. n) = src[0 .. n): masked vectors (a memcpy call per 7..56-float row cost more than the
 * copy). */
static FAST_AVX512 void copy_avx512(float *dst, const float *src, int64_t n) {
    if (n <= 0) return;
    int64_t i = 0;
    for (; i + 16 < n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
}

/* Copies one input plane into the phase planes at buf. Only input positions are written, the
 * same ones for every plane, so the padding stays zero: buf is zero-filled once (k_scratch) and
 * reused. */
static void dw_fill(const DwRun *r, const float *x, float *buf, SupIsa isa) {
    const Conv *c = r->c;
    int64_t plane = r->ph * r->pws; /* floats per phase plane */
    /* padded row pr = ih + pt is row pr / sh of the row phase pr % sh (kept incrementally) */
    int64_t rph = c->pt % c->sh, rat = c->pt / c->sh;
    for (int64_t ih = 0; ih < c->h && rat < r->ph; ih++) {
        const float *src = x + ih * c->w;
        float *row = buf + rph * c->sw * plane + rat * r->pws; /* phase (rph, 0) */
        if (++rph == c->sh) rph = 0, rat++;
        if (c->sw == 1) {
            int64_t n = min64(c->w, r->pws - c->pl);
            if (isa == SUP_ISA_AVX512)
                copy_avx512(row + c->pl, src, n);
            else
                memcpy(row + c->pl, src, (size_t)n * sizeof(float));
            continue;
        }
        if (c->sw == 2 && isa == SUP_ISA_AVX512) {
            /* input column iw goes to phase (iw + pl) % 2, index (iw + pl) / 2 */
            int64_t e0 = c->pl / 2, o0 = (c->pl + 1) / 2;
            float *ev = row + (c->pl % 2) * plane + e0, *od = row + ((c->pl + 1) % 2) * plane + o0;
            int64_t n_ev = max64(0, min64((c->w + 1) / 2, r->pws - e0));
            int64_t n_od = max64(0, min64(c->w / 2, r->pws - o0));
            if (n_ev >= n_od && n_ev <= n_od + 1) {
                dw_split2_avx512(src, n_ev, n_od, ev, od);
                continue;
            }
        }
        int64_t q = c->pl % c->sw, at = c->pl / c->sw; /* phase and index of column iw */
        for (int64_t iw = 0; iw < c->w && at < r->pws; iw++) {
            row[q * plane + at] = src[iw];
            if (++q == c->sw) q = 0, at++;
        }
    }
}

/* The grid g[0 .. grid) of weights wk (kh x kw) over the copy buf. */
static void dw_grid_scalar(const DwRun *r, const float *buf, const float *wk, float *g) {
    int64_t taps = r->c->kh * r->c->kw;
    for (int64_t q = 0; q < r->grid; q++) {
        float acc = 0;
        for (int64_t t = 0; t < taps; t++)
            acc += wk[t] * buf[r->tap[t] + q];
        g[q] = acc;
    }
}

/* Vector code: eight vectors (eight independent FMA chains: 9 taps of a 3x3 filter are 9 FMAs
 * of 4-cycle latency each) per step while more than four vectors' worth remain, then four. A
 * step writes up to 8 V - 1 < DW_SLACK positions past the grid and reads as far past the copy
 * (both have that slack). */
#define DW_ACC(i, F, L, V) a##i = F(wv, L(p + i * (V)), a##i);
#define DW_GRID(NAME, ATTR, V, VEC, ZERO, LOAD, SET1, FMA, STORE)                                  \
    static ATTR void NAME(const DwRun *r, const float *buf, const float *wk, float *g) {           \
        int64_t taps = r->c->kh * r->c->kw, q = 0;                                                 \
        for (; r->grid - q > 4 * V; q += 8 * V) {                                                  \
            VEC a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO, a4 = ZERO, a5 = ZERO, a6 = ZERO,       \
                a7 = ZERO;                                                                         \
            for (int64_t t = 0; t < taps; t++) {                                                   \
                const float *p = buf + r->tap[t] + q;                                              \
                VEC wv = SET1(wk[t]);                                                              \
                DW_ACC(0, FMA, LOAD, V)                                                            \
                DW_ACC(1, FMA, LOAD, V)                                                            \
                DW_ACC(2, FMA, LOAD, V)                                                            \
                DW_ACC(3, FMA, LOAD, V)                                                            \
                DW_ACC(4, FMA, LOAD, V)                                                            \
                DW_ACC(5, FMA, LOAD, V) DW_ACC(6, FMA, LOAD, V) DW_ACC(7, FMA, LOAD, V)            \
            }                                                                                      \
            STORE(g + q, a0), STORE(g + q + V, a1), STORE(g + q + 2 * V, a2);                      \
            STORE(g + q + 3 * V, a3), STORE(g + q + 4 * V, a4), STORE(g + q + 5 * V, a5);          \
            STORE(g + q + 6 * V, a6), STORE(g + q + 7 * V, a7);                                    \
        }                                                                                          \
        if (q < r->grid) {                                                                         \
            VEC a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;                                        \
            for (int64_t t = 0; t < taps; t++) {                                                   \
                const float *p = buf + r->tap[t] + q;                                              \
                VEC wv = SET1(wk[t]);                                                              \
                DW_ACC(0, FMA, LOAD, V)                                                            \
                DW_ACC(1, FMA, LOAD, V) DW_ACC(2, FMA, LOAD, V) DW_ACC(3, FMA, LOAD, V)            \
            }                                                                                      \
            STORE(g + q, a0), STORE(g + q + V, a1), STORE(g + q + 2 * V, a2);                      \
            STORE(g + q + 3 * V, a3);                                                              \
        }                                                                                          \
    }
DW_GRID(dw_grid_avx512, FAST_AVX512, 16, __m512, _mm512_setzero_ps(), _mm512_loadu_ps,
        _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)
DW_GRID(dw_grid_avx2, FAST_AVX2, 8, __m256, _mm256_setzero_ps(), _mm256_loadu_ps, _mm256_set1_ps,
        _mm256_fmadd_ps, _mm256_storeu_ps)

/* Output rows out of the grid: o[oy * ow + ox] = g[oy * pws + ox]. */
static FAST_AVX512 void dw_rows_avx512(const Conv *c, int64_t pws, const float *g, float *o) {
    for (int64_t oy = 0; oy < c->oh; oy++, g += pws, o += c->ow)
        copy_avx512(o, g, c->ow);
}

/* Output rows oy0 .. oy0 + 3 (those inside the plane), columns ox0 .. ox0 + 15 masked at the
 * right edge, from the four accumulators of a 3x3 depthwise tile. */
static inline FAST_AVX512 void dw3_store4(const Conv *c, float *o, int64_t oy0, int64_t ox0,
                                          __m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    int64_t left = c->ow - ox0;
    __mmask16 m = (__mmask16)(left >= 16 ? 0xffff : (1u << left) - 1);
    float *dst = o + oy0 * c->ow + ox0;
    _mm512_mask_storeu_ps(dst, m, a0);
    if (oy0 + 1 < c->oh) _mm512_mask_storeu_ps(dst + c->ow, m, a1);
    if (oy0 + 2 < c->oh) _mm512_mask_storeu_ps(dst + 2 * c->ow, m, a2);
    if (oy0 + 3 < c->oh) _mm512_mask_storeu_ps(dst + 3 * c->ow, m, a3);
}

/* 3x3 depthwise, stride S (1 or 2), dilation 1, AVX-512, straight from the input plane x (no
 * copy, no grid): four output rows by 16 columns at a time; each input row is loaded once per
 * column chunk (three column-shifted vectors, lanes outside the plane masked to zero: that is the
 * padding) and feeds the up to three output rows whose window covers it, so a 3x3 tap costs an
 * FMA and half a load (the grid code's loads were misaligned ones, one per tap, plus the copies
 * in and out). Stride 2 deinterleaves 32 loaded floats per vector. Output rows past oh are
 * computed (rows past the plane read as zero) and not stored. */
#define DW3_ROW(i)                                                                                 \
    if ((i) <= 3 * S + 2) {                                                                        \
        int64_t iy = iy0 + (i);                                                                    \
        if ((uint64_t)iy < (uint64_t)c->h) {                                                       \
            __m512 v0, v1, v2;                                                                     \
            dw3_load(S, x + iy * c->w, c->w, ix0, &v0, &v1, &v2);                                  \
            DW3_ACC(0, (i)-0 * S)                                                                  \
            DW3_ACC(1, (i)-1 * S)                                                                  \
            DW3_ACC(2, (i)-2 * S)                                                                  \
            DW3_ACC(3, (i)-3 * S)                                                                  \
        }                                                                                          \
    }
#define DW3_ACC(r, ky)                                                                             \
    if ((ky) >= 0 && (ky) < 3) {                                                                   \
        a##r = _mm512_fmadd_ps(wv[3 * (ky) + 0], v0, a##r);                                        \
        a##r = _mm512_fmadd_ps(wv[3 * (ky) + 1], v1, a##r);                                        \
        a##r = _mm512_fmadd_ps(wv[3 * (ky) + 2], v2, a##r);                                        \
    }

/* Input columns ix0 + S l + kx (kx = 0, 1, 2) of one row (w floats) into v0, v1, v2, zero where
 * outside [0, w). */
FAST_AVX512 static inline __attribute__((always_inline)) void dw3_load(const int S,
                                                                       const float *row, int64_t w,
                                                                       int64_t ix0, __m512 *v0,
                                                                       __m512 *v1, __m512 *v2) {
    if (S == 1) { /* lanes [lo, hi) of the kx = 0 load are inside the row; shifted for kx */
        int64_t lo = ix0 < 0 ? -ix0 : 0, hi = w - ix0 < 18 ? w - ix0 : 18;
        uint32_t m = hi > lo ? (uint32_t)((((uint64_t)1 << (hi - lo)) - 1) << lo) : 0;
        *v0 = _mm512_maskz_loadu_ps((__mmask16)m, row + ix0);
        *v1 = _mm512_maskz_loadu_ps((__mmask16)(m >> 1), row + ix0 + 1);
        *v2 = _mm512_maskz_loadu_ps((__mmask16)(m >> 2), row + ix0 + 2);
        return;
    }
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512 p[2][2]; /* 32 floats from ix0 and from ix0 + 2 */
    for (int h = 0; h < 2; h++) {
        int64_t b = ix0 + 2 * h, lo = b < 0 ? -b : 0, hi = w - b < 32 ? w - b : 32;
        uint32_t m = hi > lo ? (uint32_t)((((uint64_t)1 << (hi - lo)) - 1) << lo) : 0;
        p[h][0] = _mm512_maskz_loadu_ps((__mmask16)m, row + b);
        p[h][1] = _mm512_maskz_loadu_ps((__mmask16)(m >> 16), row + b + 16);
    }
    *v0 = _mm512_permutex2var_ps(p[0][0], ev, p[0][1]);
    *v1 = _mm512_permutex2var_ps(p[0][0], od, p[0][1]);
    *v2 = _mm512_permutex2var_ps(p[1][0], ev, p[1][1]);
}

FAST_AVX512 static inline __attribute__((always_inline)) void
dw3_plane(const int S, const Conv *c, const float *x, const float *wk, float *o) {
    __m512 wv[9];
    for (int t = 0; t < 9; t++)
        wv[t] = _mm512_set1_ps(wk[t]);
    for (int64_t oy0 = 0; oy0 < c->oh; oy0 += 4) {
        int64_t iy0 = oy0 * S - c->pt;
        for (int64_t ox0 = 0; ox0 < c->ow; ox0 += 16) {
            int64_t ix0 = ox0 * S - c->pl;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            DW3_ROW(0);
            DW3_ROW(1);
            DW3_ROW(2);
            DW3_ROW(3);
            DW3_ROW(4);
            DW3_ROW(5);
            DW3_ROW(6);
            DW3_ROW(7);
            DW3_ROW(8);
            dw3_store4(c, o, oy0, ox0, a0, a1, a2, a3);
        }
    }
}

static FAST_AVX512 void dw3_plane_s1(const Conv *c, const float *x, const float *wk, float *o) {
    dw3_plane(1, c, x, wk, o);
}
static FAST_AVX512 void dw3_plane_s2(const Conv *c, const float *x, const float *wk, float *o) {
    dw3_plane(2, c, x, wk, o);
}

/* 3x3 stride 2, dilation 1, AVX-512, over the phase copy buf (dw_fill): tap (ky, kx) of output
 * (oy, ox) is column ox + kx / 2 of row oy + ky / 2 of phase (ky % 2, kx % 2), so four output
 * rows read 9 phase rows (five of row phase 0, four of 1) in three contiguous vectors each, with
 * no deinterleaving (the copy did it once per input row) and no grid: stores go straight to the
 * output, masked at the right edge. */
#define DWP_ROW(i)                                                                                 \
    {                                                                                              \
        const float *pr = (i) % 2 ? p10 + (i) / 2 * r->pws : p00 + (i) / 2 * r->pws;               \
        const float *pc = (i) % 2 ? p11 + (i) / 2 * r->pws : p01 + (i) / 2 * r->pws;               \
        __m512 v0 = _mm512_loadu_ps(pr), v1 = _mm512_loadu_ps(pc), v2 = _mm512_loadu_ps(pr + 1);   \
        DWP_ACC(0, (i)-0) DWP_ACC(1, (i)-2) DWP_ACC(2, (i)-4) DWP_ACC(3, (i)-6)                    \
    }
/* phase row i (row phase i % 2, index i / 2 from oy0) is tap row ky = i - 2 r of output row r */
#define DWP_ACC(r, ky)                                                                             \
    if ((ky) >= 0 && (ky) < 3) {                                                                   \
        a##r = _mm512_fmadd_ps(wv[3 * (ky) + 0], v0, a##r);                                        \
        a##r = _mm512_fmadd_ps(wv[3 * (ky) + 1], v1, a##r);                                        \
        a##r = _mm512_fmadd_ps(wv[3 * (ky) + 2], v2, a##r);                                        \
    }
static FAST_AVX512 void dw3_phase2(const DwRun *r, const float *buf, const float *wk, float *o) {
    const Conv *c = r->c;
    int64_t plane = r->ph * r->pws;
    __m512 wv[9];
    for (int t = 0; t < 9; t++)
        wv[t] = _mm512_set1_ps(wk[t]);
    for (int64_t oy0 = 0; oy0 < c->oh; oy0 += 4) {
        for (int64_t ox0 = 0; ox0 < c->ow; ox0 += 16) {
            /* phases (row, column): (0, 0), (0, 1), (1, 0), (1, 1), at row oy0, column ox0 */
            const float *p00 = buf + oy0 * r->pws + ox0, *p01 = p00 + plane;
            const float *p10 = p00 + 2 * plane, *p11 = p00 + 3 * plane;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            DWP_ROW(0);
            DWP_ROW(1);
            DWP_ROW(2);
            DWP_ROW(3);
            DWP_ROW(4);
            DWP_ROW(5);
            DWP_ROW(6);
            DWP_ROW(7);
            DWP_ROW(8);
            dw3_store4(c, o, oy0, ox0, a0, a1, a2, a3);
        }
    }
}

/* Whether dw3_plane takes c: 3x3, stride 1, or 2 on outputs at most 16 wide, dilation 1,
 * AVX-512. Measured (bench_gemm, MobileNetV2's layers, against the copy-and-grid code): stride 1
 * 0.56-0.9x the time (384 ch 14x14: 38 vs 68 us); stride 2 to 14x14 and 7x7 0.5-0.6x, to 28x28
 * and 56x56 1.05-1.25x (its deinterleaving costs more than the grid's copy there). */
static bool dw3_fits(const Conv *c) {
    return sup_isa() == SUP_ISA_AVX512 && c->kh == 3 && c->kw == 3 && c->sh == c->sw &&
           (c->sh == 1 || (c->sh == 2 && c->ow <= 16)) && c->dh == 1 && c->dw == 1 &&
           c->w < ((int64_t)1 << 30);
}

static void dw_task(void *ctx, int64_t task, int worker) {
    const DwRun *r = ctx;
    const Conv *c = r->c;
    float *buf = r->dw3 ? NULL : r->bufs + (size_t)worker * r->buf_floats;
    float *g = r->dw3 ? NULL : buf + r->grid_at;
    SupIsa isa = sup_isa();
    int64_t pairs = c->batch * c->groups, hw = c->h * c->w, khw = c->kh * c->kw;
    int64_t ohw = c->oh * c->ow;
    int64_t t1 = min64(pairs, (task + 1) * r->per);
    for (int64_t t = task * r->per; t < t1; t++) {
        int64_t n = t / c->groups, gr = t % c->groups;
        const float *x = c->x + (n * c->cin + gr) * hw;
        if (r->dw3) {
            for (int64_t m = 0; m < c->cout_g; m++) {
                int64_t oc = gr * c->cout_g + m;
                (c->sh == 1 ? dw3_plane_s1 : dw3_plane_s2)(c, x, r->w + oc * khw,
                                                           r->out + (n * c->cout + oc) * ohw);
            }
            continue;
        }
        dw_fill(r, x, buf, isa);
        for (int64_t m = 0; m < c->cout_g; m++) {
            int64_t oc = gr * c->cout_g + m;
            const float *wk = r->w + oc * khw;
            float *o = r->out + (n * c->cout + oc) * ohw;
            if (r->phase2) {
                dw3_phase2(r, buf, wk, o);
                continue;
            }
            if (isa == SUP_ISA_AVX512)
                dw_grid_avx512(r, buf, wk, g);
            else if (isa == SUP_ISA_AVX2)
                dw_grid_avx2(r, buf, wk, g);
            else
                dw_grid_scalar(r, buf, wk, g);
            if (isa == SUP_ISA_AVX512)
                dw_rows_avx512(c, r->pws, g, o);
            else
                for (int64_t oy = 0; oy < c->oh; oy++)
                    memcpy(o + oy * c->ow, g + oy * r->pws, (size_t)c->ow * sizeof(float));
        }
    }
    /* the task's planes are consecutive output channels (cout == groups * cout_g): one range for
     * the fused tail (a call per 7x7 plane cost more than the plane) */
    int64_t t0 = task * r->per;
    if (r->epi != NULL && t1 > t0)
        r->epi->apply(r->epi->ctx, t0 * c->cout_g * ohw, (t1 - t0) * c->cout_g * ohw);
}

/* ---- depthwise 3x3 with the channels on the lanes --------------------------------------------
 */

/* A task takes V consecutive channels (V = 16 at AVX-512, 8 at AVX2; groups == channels, one
 * output channel each) of one image, in strips of output rows: the input rows a strip's windows
 * reach are transposed (V x V in registers) into a buffer of padded positions of V floats, lane l
 * holding channel c0 + l, so every tap of every output is one full vector load at padded position
 * (oy S + ky, ox S + kx) and one FMA with the tap's weights of the V channels. A register tile is
 * R consecutive outputs of an output row: each input vector of its window rows is loaded once and
 * feeds every tap that reads it (3 kx taps at stride 1). The strip's outputs (positions of V
 * floats) are transposed back into the V output planes; the block's fused tail then runs on its
 * planes while they are in cache. No lane idles on 7-wide planes (the per-plane code fills 7 of
 * 16), nothing is deinterleaved per tap row at stride 2, the per-plane setup is paid once per V
 * planes, and a strip's buffers stay in L2 whatever the plane size. */
typedef struct DwLanes {
    const Conv *c;
    const float *w; /* OIHW (C, 1, 3, 3) */
    float *out;
    float *bufs; /* per worker buf_floats (stale contents): the strip's input rows, then its
                  * outputs at out_at */
    size_t buf_floats, out_at;
    int64_t rows;   /* output rows per strip */
    int64_t hs, wp; /* the strip's input buffer: padded rows and columns the windows reach */
    int64_t blocks; /* V-channel blocks per image */
    int64_t parts;  /* tasks per block: ranges of output rows */
    int v;          /* lanes: 16 or 8 */
    const KEpilogue *epi;
} DwLanes;

#define DWL_INLINE static inline __attribute__((always_inline))
#define DWL_BYTES (192 << 10) /* a strip's input buffer at most (when one row fits) */

/* R outputs (R <= 8) of one output row at stride S: window rows from b (wpv floats apart),
 * weights wv[9], outputs to ob (V floats each). Each output is the sum over taps in the order
 * ky, kx with one FMA per tap. */
#define DWL_TILE(NAME, ATTR, V, VEC, ZERO, LOAD, FMA, STORE)                                       \
    ATTR DWL_INLINE void NAME(const int R, const int S, const float *b, int64_t wpv,               \
                              const VEC *wv, float *ob) {                                          \
        VEC a[8], v[17];                                                                           \
        _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) a[i] = ZERO;                           \
        _Pragma("GCC unroll 3") for (int ky = 0; ky < 3; ky++) {                                   \
            const float *rp = b + ky * wpv;                                                        \
            _Pragma("GCC unroll 17") for (int j = 0; j < (R - 1) * S + 3; j++) v[j] =              \
                LOAD(rp + j * V);                                                                  \
            _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)                                 \
                _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) a[i] =                         \
                    FMA(wv[3 * ky + kx], v[i * S + kx], a[i]);                                     \
        }                                                                                          \
        _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) STORE(ob + i * V, a[i]);               \
    }
DWL_TILE(dwl_tile_avx512, FAST_AVX512, 16, __m512, _mm512_setzero_ps(), _mm512_load_ps,
         _mm512_fmadd_ps, _mm512_store_ps)
DWL_TILE(dwl_tile_avx2, FAST_AVX2, 8, __m256, _mm256_setzero_ps(), _mm256_load_ps, _mm256_fmadd_ps,
         _mm256_store_ps)

/* Output rows [0, n) of a strip (input buffer buf, outputs ob): tiles of RMAX outputs, then one
 * of the rest (ow - ox < RMAX: the cases past RMAX - 1 are never taken). */
#define DWL_ROWS(NAME, TILE, ATTR, V, VEC, RMAX)                                                   \
    ATTR DWL_INLINE void NAME(const int S, const DwLanes *r, int64_t n, const float *buf,          \
                              const VEC *wv, float *ob) {                                          \
        int64_t ow = r->c->ow, wpv = r->wp * V;                                                    \
        for (int64_t oy = 0; oy < n; oy++) {                                                       \
            const float *b = buf + oy * S * wpv;                                                   \
            float *orow = ob + oy * ow * V;                                                        \
            int64_t ox = 0;                                                                        \
            for (; ox + RMAX <= ow; ox += RMAX)                                                    \
                TILE(RMAX, S, b + ox * S * V, wpv, wv, orow + ox * V);                             \
            const float *bt = b + ox * S * V;                                                      \
            float *ot = orow + ox * V;                                                             \
            switch (ow - ox) {                                                                     \
            case 7: TILE(7, S, bt, wpv, wv, ot); break;                                            \
            case 6: TILE(6, S, bt, wpv, wv, ot); break;                                            \
            case 5: TILE(5, S, bt, wpv, wv, ot); break;                                            \
            case 4: TILE(4, S, bt, wpv, wv, ot); break;                                            \
            case 3: TILE(3, S, bt, wpv, wv, ot); break;                                            \
            case 2: TILE(2, S, bt, wpv, wv, ot); break;                                            \
            case 1: TILE(1, S, bt, wpv, wv, ot); break;                                            \
            default: break;                                                                        \
            }                                                                                      \
        }                                                                                          \
    }
DWL_ROWS(dwl_rows_avx512, dwl_tile_avx512, FAST_AVX512, 16, __m512, 8)
DWL_ROWS(dwl_rows_avx2, dwl_tile_avx2, FAST_AVX2, 8, __m256, 4)

/* Input rows [y0, y1) of the block's nc channel planes x (h x w each, compact) into the strip
 * buffer buf whose row 0 is input row ybase: input (y, x) to buffer (y - ybase, x + pl) where the
 * windows reach it. Flattened input positions are taken V at a time (a 7-wide plane fills the
 * vectors too) and transposed. The padding (columns outside [pl, pl + w), rows outside the input)
 * is the caller's to zero: the scratch is not zero-filled. */
static FAST_AVX512 void dwl_fill_avx512(const DwLanes *r, const float *x, int nc, int64_t y0,
                                        int64_t y1, int64_t ybase, float *buf) {
    const Conv *c = r->c;
    int64_t hw = c->h * c->w, end = y1 * c->w, y = y0 - ybase, xx = c->pl;
    for (int64_t p = y0 * c->w; p < end; p += 16) {
        int64_t n = min64(16, end - p);
        __mmask16 m = (__mmask16)((1u << n) - 1);
        __m512 v[16];
        _Pragma("GCC unroll 16") for (int l = 0; l < 16; l++) v[l] =
            l < nc ? _mm512_maskz_loadu_ps(m, x + l * hw + p) : _mm512_setzero_ps();
        conv_transpose16(v);
        _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) {
            if (j == n) break;
            if (xx < r->wp) _mm512_store_ps(buf + (y * r->wp + xx) * 16, v[j]);
            if (++xx == c->pl + c->w) xx = c->pl, y++;
        }
    }
}

/* Outputs ob (n positions of 16 floats) into the block's nc output planes at o (np floats
 * apart), 16 flattened positions at a time. */
static FAST_AVX512 void dwl_out_avx512(int64_t n_pos, const float *ob, int nc, int64_t np,
                                       float *o) {
    for (int64_t q = 0; q < n_pos; q += 16) {
        int64_t n = min64(16, n_pos - q);
        __mmask16 m = (__mmask16)((1u << n) - 1);
        __m512 v[16];
        _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) v[j] =
            j < n ? _mm512_load_ps(ob + (q + j) * 16) : _mm512_setzero_ps();
        conv_transpose16(v);
        _Pragma("GCC unroll 16") for (int l = 0; l < 16; l++) if (l < nc)
            _mm512_mask_storeu_ps(o + l * np + q, m, v[l]);
    }
}

/* lanes [0, n) of an AVX2 mask */
FAST_AVX2 static inline __m256i dwl_mask8(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static FAST_AVX2 void dwl_fill_avx2(const DwLanes *r, const float *x, int nc, int64_t y0,
                                    int64_t y1, int64_t ybase, float *buf) {
    const Conv *c = r->c;
    int64_t hw = c->h * c->w, end = y1 * c->w, y = y0 - ybase, xx = c->pl;
    for (int64_t p = y0 * c->w; p < end; p += 8) {
        int64_t n = min64(8, end - p);
        __m256i m = dwl_mask8(n);
        __m256 v[8];
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) v[l] =
            l < nc ? _mm256_maskload_ps(x + l * hw + p, m) : _mm256_setzero_ps();
        conv_transpose8(v);
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
            if (j == n) break;
            if (xx < r->wp) _mm256_store_ps(buf + (y * r->wp + xx) * 8, v[j]);
            if (++xx == c->pl + c->w) xx = c->pl, y++;
        }
    }
}

static FAST_AVX2 void dwl_out_avx2(int64_t n_pos, const float *ob, int nc, int64_t np, float *o) {
    for (int64_t q = 0; q < n_pos; q += 8) {
        int64_t n = min64(8, n_pos - q);
        __m256i m = dwl_mask8(n);
        __m256 v[8];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) v[j] =
            j < n ? _mm256_load_ps(ob + (q + j) * 8) : _mm256_setzero_ps();
        conv_transpose8(v);
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) if (l < nc)
            _mm256_maskstore_ps(o + l * np + q, m, v[l]);
    }
}

/* Output rows [oy_lo, oy_hi) of one block, strip by strip: channels c0 .. c0 + nc - 1 of input x
 * (their first plane), weights wk (their first 9), outputs o (their first plane). The buffer is
 * scratch with stale contents: its padding columns are zeroed here, its padding rows per strip. */
/* wv[t] lane l = tap t of channel l's 3x3 weights wk + 9 l, for l < nc (zero past). */
FAST_AVX512 static inline void dwl_weights_avx512(const float *wk, int nc, __m512 *wv) {
    __m512i idx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(9));
    __mmask16 m = (__mmask16)((1u << nc) - 1);
    for (int t = 0; t < 9; t++)
        wv[t] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, wk + t, 4);
}
FAST_AVX2 static inline void dwl_weights_avx2(const float *wk, int nc, __m256 *wv) {
    __m256i idx = _mm256_setr_epi32(0, 9, 18, 27, 36, 45, 54, 63);
    __m256 m = _mm256_castsi256_ps(dwl_mask8(nc));
    for (int t = 0; t < 9; t++)
        wv[t] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), wk + t, idx, m, 4);
}

#define DWL_BLOCK(NAME, ATTR, V, VEC, WEIGHTS, FILL, ROWS, OUT)                                    \
    static ATTR void NAME(const DwLanes *r, const float *x, const float *wk, int nc,               \
                          int64_t oy_lo, int64_t oy_hi, float *buf, float *o) {                    \
        const Conv *c = r->c;                                                                      \
        VEC wv[9];                                                                                 \
        WEIGHTS(wk, nc, wv);                                                                       \
        float *ob = buf + r->out_at;                                                               \
        int64_t np = c->oh * c->ow, right = min64(r->wp, c->pl + c->w);                            \
        for (int64_t i = 0; i < r->hs; i++) {                                                      \
            float *row = buf + i * r->wp * V;                                                      \
            memset(row, 0, (size_t)(min64(c->pl, r->wp) * V) * sizeof(float));                     \
            memset(row + right * V, 0, (size_t)((r->wp - right) * V) * sizeof(float));             \
        }                                                                                          \
        for (int64_t oy0 = oy_lo; oy0 < oy_hi; oy0 += r->rows) {                                   \
            int64_t n = min64(r->rows, oy_hi - oy0);                                               \
            /* buffer row i is input row ybase + i; rows outside the input are padding */          \
            int64_t ybase = oy0 * c->sh - c->pt, reach = (n - 1) * c->sh + 3;                      \
            int64_t y0 = max64(0, ybase), y1 = min64(c->h, ybase + reach);                         \
            for (int64_t i = 0; i < reach; i++)                                                    \
                if (ybase + i < 0 || ybase + i >= c->h)                                            \
                    memset(buf + i * r->wp * V, 0, (size_t)(r->wp * V) * sizeof(float));           \
            if (y1 > y0) FILL(r, x, nc, y0, y1, ybase, buf);                                       \
            if (c->sh == 1)                                                                        \
                ROWS(1, r, n, buf, wv, ob);                                                        \
            else                                                                                   \
                ROWS(2, r, n, buf, wv, ob);                                                        \
            OUT(n * c->ow, ob, nc, np, o + oy0 * c->ow);                                           \
        }                                                                                          \
    }
DWL_BLOCK(dwl_block_avx512, FAST_AVX512, 16, __m512, dwl_weights_avx512, dwl_fill_avx512,
          dwl_rows_avx512, dwl_out_avx512)
DWL_BLOCK(dwl_block_avx2, FAST_AVX2, 8, __m256, dwl_weights_avx2, dwl_fill_avx2, dwl_rows_avx2,
          dwl_out_avx2)

/* Task t: image, block, part (a range of output rows) */
static void dwl_task(void *ctx, int64_t task, int worker) {
    const DwLanes *r = ctx;
    const Conv *c = r->c;
    int64_t part = task % r->parts, nb = task / r->parts;
    int64_t n = nb / r->blocks, c0 = nb % r->blocks * r->v;
    int64_t per = (c->oh + r->parts - 1) / r->parts;
    int64_t oy_lo = part * per, oy_hi = min64(c->oh, oy_lo + per);
    if (oy_lo >= oy_hi) return;
    int nc = (int)min64(r->v, c->cin - c0);
    int64_t hw = c->h * c->w, np = c->oh * c->ow;
    const float *x = c->x + (n * c->cin + c0) * hw;
    float *buf = r->bufs + (size_t)worker * r->buf_floats;
    float *o = r->out + (n * c->cout + c0) * np;
    if (r->v == 16)
        dwl_block_avx512(r, x, r->w + c0 * 9, nc, oy_lo, oy_hi, buf, o);
    else
        dwl_block_avx2(r, x, r->w + c0 * 9, nc, oy_lo, oy_hi, buf, o);
    if (r->epi == NULL) return;
    int64_t flat = (n * c->cout + c0) * np;
    if (r->parts == 1) { /* whole planes: one range */
        r->epi->apply(r->epi->ctx, flat, nc * np);
        return;
    }
    for (int l = 0; l < nc; l++)
        r->epi->apply(r->epi->ctx, flat + l * np + oy_lo * c->ow, (oy_hi - oy_lo) * c->ow);
}

/* Whether conv_dw_lanes takes c: 3x3, stride 1 or 2 both ways, dilation 1, one output channel
 * per group, AVX-512 or AVX2, rows short enough for a strip of a few rows. At AVX2, stride 1
 * only onto rows of at most 8 (1.2-1.6x the grid code's time on MobileNetV2's 14- to 112-wide
 * layers, 0.8x at 7; stride 2 0.47x). */
static bool dwl_fits(const Conv *c) {
    SupIsa isa = sup_isa();
    return isa >= SUP_ISA_AVX2 && c->cout_g == 1 && c->kh == 3 && c->kw == 3 && c->sh == c->sw &&
           (c->sh == 2 || (c->sh == 1 && (isa == SUP_ISA_AVX512 || c->ow <= 8))) && c->dh == 1 &&
           c->dw == 1 && c->ow <= 4096;
}

static int conv_dw_lanes(KCall *kc, const Conv *c, const DLTensor *o) {
    DwLanes r = {.c = c, .w = k_ptr(k_arg(kc, 1)), .out = k_ptr(o)};
    r.v = sup_isa() == SUP_ISA_AVX512 ? 16 : 8;
    r.wp = (c->ow - 1) * c->sw + 3;
    /* strip rows: the input buffer within DWL_BYTES, at least one output row */
    int64_t row_bytes = r.wp * r.v * (int64_t)sizeof(float);
    r.rows = max64(1, min64(c->oh, (DWL_BYTES / row_bytes - 3) / c->sh + 1));
    r.hs = (r.rows - 1) * c->sh + 3;
    r.blocks = (c->cin + r.v - 1) / r.v;
    /* blocks the threads cannot share evenly (MobileNetV2's 144 channels: 9 blocks) are split
     * into parts of output rows, when a part keeps 4+ rows (each costs a tail call per channel
     * and re-reads the rows its windows share with the next part) */
    int64_t threads = k_threads(kc), units = c->batch * r.blocks;
    r.parts = 1;
    if (threads > 1 && units % threads != 0 && units < 8 * threads)
        r.parts = min64((8 * threads + units - 1) / units, max64(1, c->oh / 4));
    r.out_at = (size_t)(r.hs * r.wp * r.v);
    r.buf_floats = r.out_at + (size_t)(r.rows * c->ow * r.v);
    r.bufs = k_scratch_raw(kc, r.buf_floats * sizeof(float) * (size_t)threads);
    if (r.bufs == NULL) return -1;
    if (kc->epi != NULL && kc->epi->begin(kc->epi->ctx, o) == 0) r.epi = kc->epi;
    k_parallel(kc, units * r.parts, dwl_task, &r);
    kc->epi_done = r.epi != NULL;
    return 0;
}

static int conv_depthwise(KCall *kc, const Conv *c, const DLTensor *o) {
    if (dwl_fits(c)) return conv_dw_lanes(kc, c, o);
    DwRun r = {.c = c, .w = k_ptr(k_arg(kc, 1)), .out = k_ptr(o), .dw3 = dw3_fits(c)};
    r.phase2 = !r.dw3 && sup_isa() == SUP_ISA_AVX512 && c->kh == 3 && c->kw == 3 && c->sh == 2 &&
               c->sw == 2 && c->dh == 1 && c->dw == 1;
    /* the padded extents the windows reach, in phase rows and columns */
    int64_t hp = (c->oh - 1) * c->sh + (c->kh - 1) * c->dh + 1;
    int64_t wpad = (c->ow - 1) * c->sw + (c->kw - 1) * c->dw + 1;
    r.ph = (hp + c->sh - 1) / c->sh;
    r.pws = (wpad + c->sw - 1) / c->sw;
    r.grid = c->oh * r.pws;
    /* dw3_phase2 reads up to 3 rows past the last phase plane's */
    size_t copy = (size_t)(c->sh * c->sw * r.ph * r.pws + DW_SLACK + 3 * r.pws);
    r.grid_at = (copy + 15) / 16 * 16;
    r.buf_floats = r.grid_at + (size_t)(r.grid + DW_SLACK + 15) / 16 * 16;
    int64_t pairs = c->batch * c->groups, taps = c->kh * c->kw;
    double macs = (double)c->cout_g * (double)r.grid * (double)taps;
    r.per = macs >= DW_MIN_MACS ? 1 : (int64_t)(DW_MIN_MACS / (macs > 0 ? macs : 1)) + 1;
    int64_t n_tasks = (pairs + r.per - 1) / r.per;
    int64_t *tap = k_scratch_n(kc, taps, sizeof(int64_t));
    if (tap == NULL) return -1;
    if (!r.dw3) { /* the copies and grids */
        r.bufs = k_scratch_n(kc, (int64_t)r.buf_floats * k_threads(kc), sizeof(float));
        if (r.bufs == NULL) return -1;
    }
    for (int64_t ky = 0; ky < c->kh; ky++)
        for (int64_t kx = 0; kx < c->kw; kx++) {
            int64_t rr = ky * c->dh, cc = kx * c->dw;
            int64_t phase = (rr % c->sh) * c->sw + cc % c->sw;
            tap[ky * c->kw + kx] = (phase * r.ph + rr / c->sh) * r.pws + cc / c->sw;
        }
    r.tap = tap;
    if (kc->epi != NULL && kc->epi->begin(kc->epi->ctx, o) == 0) r.epi = kc->epi;
    k_parallel(kc, n_tasks, dw_task, &r);
    kc->epi_done = r.epi != NULL;
    return 0;
}

/* ---- 1x1 strided convolutions: the sampled input first -------------------------------------
 *
 * A 1x1, unpadded convolution of stride s reads one input element in s x s: its output is the
 * stride-1 convolution of the input sampled on that grid. The samples are copied first
 * (cin x oh x ow floats, a quarter of the input at stride 2), plane by plane, each row read
 * sequentially, and the stride-1 convolution then reads them in place as the product's B (or the
 * direct tiles on small planes). The direct tiles had read the input where it lay: each tile's
 * broadcasts reach every input channel's plane, one stream per channel, too many for the hardware
 * prefetcher, so where the input came from L3 (a layer after the previous one's output) each
 * read waited. ResNet-18's downsamples, per-layer profile medians in the model (Intel Xeon, 5 and
 * 3 interleaved rounds of 60 runs): 64 -> 128 at 56 -> 28 186 -> 133 us on 1 thread and
 * 170 -> 84 on 2; 128 -> 256 at 28 -> 14 the same on 1 thread, 115 -> 95 on 2; 256 -> 512 at
 * 14 -> 7 the same. Alone with cold caches (bench_gemm -c, 1 thread) 0.23-0.28 -> 0.16-0.18 ms,
 * 0.19-0.21 -> 0.15-0.16, 0.14-0.17 -> 0.14-0.15; the im2col product, whose packer samples the
 * rows itself, 0.18-0.22, 0.17-0.19, 0.19-0.21. At AVX-512 and stride 2 a row's samples are
 * dw_split2_avx512's even half. */

typedef struct SubRun {
    const Conv *c; /* its input sampled, */
    float *dst;    /* into planes of oh x ow */
} SubRun;

static void sub_task(void *ctx, int64_t task, int worker) {
    (void)worker;
    const SubRun *r = ctx;
    const Conv *c = r->c;
    const float *x = c->x + task * c->h * c->w;
    float *d = r->dst + task * c->oh * c->ow;
    bool v2 = c->sw == 2 && sup_isa() == SUP_ISA_AVX512;
    for (int64_t oy = 0; oy < c->oh; oy++) {
        const float *src = x + oy * c->sh * c->w;
        float *dr = d + oy * c->ow;
        if (v2) { /* the row's samples: 2 ow - 1 floats from src, the even ones kept */
            dw_split2_avx512(src, c->ow, c->ow - 1, dr, NULL);
        } else {
            for (int64_t ox = 0; ox < c->ow; ox++)
                dr[ox] = src[ox * c->sw];
        }
    }
}

static bool sampled_pays(const Conv *c) {
    return c->kh == 1 && c->kw == 1 && (c->sh > 1 || c->sw > 1) && c->pt == 0 && c->pl == 0 &&
           c->pb == 0 && c->pr == 0;
}

/* c becomes the stride-1 convolution of its input's samples (copied into scratch). */
static int sample_input(KCall *kc, Conv *c) {
    SubRun r = {.c = c};
    /* fewer floats than the input has; every one written */
    r.dst = k_scratch_raw(kc, (size_t)(c->batch * c->cin * c->oh * c->ow) * sizeof(float));
    if (r.dst == NULL) return -1;
    k_parallel(kc, c->batch * c->cin, sub_task, &r);
    c->x = r.dst, c->h = c->oh, c->w = c->ow, c->sh = c->sw = 1;
    return 0;
}

int kern_fast_conv2d(KCall *kc) {
    Conv c;
    if (!conv_geometry_n(kc, &c, 2, true)) {
        int r = kern_conv_nchwc(kc);
        return r <= 0 ? r : kern_ref_lookup(OP_ID_NN_CONV2D)(kc);
    }
    int64_t shape[4] = {c.batch, c.cout, c.oh, c.ow};
    DLTensor *o = k_out_raw(kc, 0, RLY_DTYPE_F32, 4, shape);     /* every path writes it all */
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0; /* dims may be huge */
    if (c.xb) return conv_gemm(kc, &c, o);
    if (sampled_pays(&c) && sample_input(kc, &c) != 0) return -1;
    if (c.cin_g == 1 && c.cout_g < 4) return conv_depthwise(kc, &c, o);
    if (kern_conv_winograd_fits(&c)) return kern_conv_winograd(kc, &c, o);
    if (kern_conv_phase_fits(&c)) return kern_conv_phase(kc, &c, o);
    if (kern_conv_direct_fits(&c) && (!gemm_reads_input(&c) || direct_1x1_pays(&c)))
        return kern_conv_direct(kc, &c, o);
    return conv_gemm(kc, &c, o);
}
