/* conv.h - what conv.c (nn.conv2d) shares with winograd.c: a convolution's geometry and the
 * Winograd entry point. Private to the fast convolution kernels. */
#ifndef RLY_KERNELS_FAST_CONV_H
#define RLY_KERNELS_FAST_CONV_H

#include "kernels/fast/gemm.h"

#include <immintrin.h>

/* An NCHW / OIHW float32 convolution, checked: every extent positive where the output has
 * elements, cin == groups * cin_g, cout == groups * cout_g. */
typedef struct Conv {
    int64_t batch, cin, h, w; /* data */
    int64_t cout, groups, cin_g, cout_g;
    int64_t kh, kw, oh, ow; /* kernel and output extents */
    int64_t sh, sw, dh, dw; /* strides, dilations */
    int64_t pt, pl, pb, pr; /* padding: top, left, bottom, right */
    const float *x;
    int64_t xb; /* data in NCHW{xb}c (cin = C/xb x xb), the result in NCHW; 0: data in NCHW */
} Conv;

/* kern_clamp1 on 16 floats (x86's max and min: the same operand order). */
static inline FAST_AVX512 __m512 conv_clamp16(uint8_t clamp, float lo, float hi, __m512 v) {
    if (clamp == K_CLAMP_RELU) return _mm512_max_ps(v, _mm512_setzero_ps());
    if (clamp == K_CLAMP_CLIP)
        return _mm512_min_ps(_mm512_set1_ps(hi), _mm512_max_ps(_mm512_set1_ps(lo), v));
    return v;
}

/* Whether e is a tail conv_tail applies itself in place: one clamp (KEpilogue.clamp), or a bias
 * along one dim (KEpilogue.bias with run set: a per-channel bias of NCHW), then maybe a clamp. */
static inline bool conv_tail_own(const KEpilogue *e) {
    return e->clamp_out != NULL &&
           (e->clamp != K_CLAMP_NONE || (e->bias.b && e->bias.run > 0 && !e->bias.res_inplace));
}
/* The call's fused tail as a convolution kernel takes it: when kc->epi accepts (begin on out0),
 * returns it and sets *out to where the kernel writes its result: out0's data, or the tail's
 * result when conv_tail applies it in place (conv_tail_own); NULL: no tail (the caller of the
 * kernel applies it). */
static inline const KEpilogue *conv_bind_tail(KCall *kc, const DLTensor *out0, float **out) {
    const KEpilogue *e = kc->epi;
    *out = k_ptr(out0);
    if (e == NULL || e->begin(e->ctx, out0) != 0) return NULL;
    if (conv_tail_own(e)) *out = e->clamp_out;
    return e;
}
/* A tail conv_tail would apply in place (conv_tail_own), for a kernel that applies it in its
 * registers as it stores output channel oc: v = clamp(v + bias[oc]) (bias + v when first; no
 * bias: the clamp alone). on: e is such a tail on NCHW output out0 (a per-channel bias). */
typedef struct ConvRegTail {
    bool on;
    const float *bias; /* per output channel, or NULL */
    bool first;
    uint8_t clamp; /* K_CLAMP_* */
    float lo, hi;
    const float *res; /* a residual of out0's layout (KBias.res), added after the bias, or NULL */
    bool res_first;
} ConvRegTail;
static inline ConvRegTail conv_reg_tail(const KEpilogue *e, const DLTensor *out0) {
    ConvRegTail t = {0};
    if (e == NULL || !conv_tail_own(e)) return t;
    if (e->clamp != K_CLAMP_NONE) {
        t = (ConvRegTail){true, NULL, false, e->clamp, e->lo, e->hi, NULL, false};
    } else if (out0->ndim == 4 && e->bias.mask == 1u << 1) {
        const KBias *kb = &e->bias;
        t = (ConvRegTail){true,   kb->b,  kb->first, kb->clamp,
                          kb->lo, kb->hi, kb->res,   kb->res_first};
    }
    return t;
}

/* The bound tail e over output elements [flat, flat + n), final in out (conv_bind_tail's): in
 * place when conv_tail_own (a bias run by run of its value: the program's bias loop without its
 * call per range, ~100 ns, which a Winograd layer's output channels of 13 x 13 paid 256 times),
 * else by the program. */
static inline void conv_tail(const KEpilogue *e, float *out, int64_t flat, int64_t n) {
    const KBias *kb = &e->bias;
    if (!conv_tail_own(e)) {
        e->apply(e->ctx, flat, n);
    } else if (e->clamp != K_CLAMP_NONE) {
        kern_clamp_rows(out + flat, n, 1, n, e->clamp, e->lo, e->hi);
    } else {
        for (int64_t f = flat, len; f < flat + n; f += len) {
            len = kb->run - f % kb->run;
            if (len > flat + n - f) len = flat + n - f;
            kern_bias_rows(out + f, len, 1, len, kb->b + f / kb->run % kb->n, NULL, kb->first,
                           kb->clamp, kb->lo, kb->hi, kb->res ? kb->res + f : NULL, kb->res_first);
        }
    }
}

/* The attributes of conv2d call kc into c (zeroed first): strides, dilation, padding, each in
 * range; false when the fast kernels do not cover them (groups < 1 included). */
bool kern_conv_attrs(const KCall *kc, Conv *c);
/* With c's batch, cin, h, w, cout, kh, kw and attributes set: checks the call's channels and
 * kernel_size attributes against them and computes oh, ow; false when not covered (the window
 * larger than the padded input, huge extents). */
bool kern_conv_extents(const KCall *kc, Conv *c);

/* nn.conv2d with data in a blocked layout NCHW{b}c (conv_nchwc.c): 0 done, -1 error set, 1 when
 * it does not cover the call (the caller hands it to the reference kernel). */
int kern_conv_nchwc(KCall *kc);

/* The block of a layout "<prefix><digits><suffix>" (exactly; digits at most 64), or 0. */
int64_t kern_conv_layout_block(const char *s, const char *prefix, const char *suffix);

/* Whether conv_winograd takes c (3x3, stride 1, dilation 1, one group, enough channels and
 * tiles to pay, AVX-512 or AVX2). */
bool kern_conv_winograd_fits(const Conv *c);
/* c by Winograd F(4x4, 3x3) into output o (argument 1 of kc the OIHW weight, transformed once
 * through k_prepared when constant), with the call's fused tail applied per output plane. 0, or
 * -1 with the call's error set (out of memory). */
int kern_conv_winograd(KCall *kc, const Conv *c, const DLTensor *o);

/* Whether conv_direct takes c (AVX-512 or AVX2, 16 or more output channels per group, enough
 * taps; not 1x1 at AVX2). */
bool kern_conv_direct_fits(const Conv *c);
/* c as a direct convolution with output channels on the lanes (conv_direct.c) into output o
 * (argument 1 of kc the OIHW weight, packed once through k_prepared when constant), with the
 * call's fused tail. 0, or -1 with the call's error set (out of memory). */
int kern_conv_direct(KCall *kc, const Conv *c, const DLTensor *o);

/* Whether conv_phase takes c (AVX-512, one group, at most 4 input channels, a stride, not 1x1,
 * 16+ output channels, grids 16+ wide, enough work per input float). */
bool kern_conv_phase_fits(const Conv *c);
/* c as a product read from the input's phase planes (conv_phase.c) into output o (argument 1
 * of kc the OIHW weight, packed once through k_prepared when constant), with the call's fused
 * tail. 0, or -1 with the call's error set (out of memory). */
int kern_conv_phase(KCall *kc, const Conv *c, const DLTensor *o);

/* c (conv_phase_fits), its per-channel bias (bias_first: b + x) and relu, then a 3x3 max pool of
 * stride 2 padded by pt rows above and pl columns left (hout x wout planes into out: every
 * window with a tap inside), band by band of the convolution's rows in cache (conv.c's pair).
 * 0, or -1 with the call's error set. */
int kern_conv_phase_maxpool(KCall *kc, const Conv *c, const float *bias, bool bias_first,
                            int64_t pt, int64_t pl, float *out, int64_t hout, int64_t wout);

/* Rows [oh0, oh1) of a 3x3 max pool of stride 2 with every window inside, of one h x w plane x
 * into y (wout outputs a row), at AVX-512 (nn.c; its bits are the reference's). */
void kern_max3s2_rows(const float *x, int64_t h, int64_t w, float *y, int64_t wout, int64_t oh0,
                      int64_t oh1);

/* ---- register transposes (conv.c's channel-lane depthwise, conv_direct.c's tile) ----------- */

/* r[0..15] rows of 16 floats -> r[j] = column j. */
FAST_AVX512 static inline __attribute__((always_inline)) void conv_transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    _Pragma("GCC unroll 8") for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* u[4q + s] lane L holds rows 4q .. 4q + 3 of column 4L + s */
    _Pragma("GCC unroll 4") for (int q = 0; q < 16; q += 4) {
        __m512d a = _mm512_castps_pd(t[q]), b = _mm512_castps_pd(t[q + 1]);
        __m512d c = _mm512_castps_pd(t[q + 2]), d = _mm512_castps_pd(t[q + 3]);
        u[q] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        u[q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    _Pragma("GCC unroll 4") for (int s = 0; s < 4; s++) {
        /* v0: lanes (0, 2) of rows 0-3 and 4-7; v1: lanes (1, 3); v2, v3 the same of 8-15 */
        __m512 v0 = _mm512_shuffle_f32x4(u[s], u[4 + s], 0x88);
        __m512 v1 = _mm512_shuffle_f32x4(u[s], u[4 + s], 0xdd);
        __m512 v2 = _mm512_shuffle_f32x4(u[8 + s], u[12 + s], 0x88);
        __m512 v3 = _mm512_shuffle_f32x4(u[8 + s], u[12 + s], 0xdd);
        r[s] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[8 + s] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
        r[4 + s] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[12 + s] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
    }
}

/* r[0..7] rows of 8 floats -> r[j] = column j. */
FAST_AVX2 static inline __attribute__((always_inline)) void conv_transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    _Pragma("GCC unroll 4") for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    /* u[4q + s], per 128-bit half: rows 4q .. 4q + 3 of column s (low half: columns 0-3) */
    _Pragma("GCC unroll 2") for (int q = 0; q < 8; q += 4) {
        u[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
        u[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xee);
        u[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
        u[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xee);
    }
    _Pragma("GCC unroll 4") for (int s = 0; s < 4; s++) {
        r[s] = _mm256_permute2f128_ps(u[s], u[4 + s], 0x20);
        r[4 + s] = _mm256_permute2f128_ps(u[s], u[4 + s], 0x31);
    }
}

#endif /* RLY_KERNELS_FAST_CONV_H */
