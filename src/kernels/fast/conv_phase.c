/* conv_phase.c - nn.conv2d of few input channels with a stride (a network's first layer:
 * SqueezeNet 1.1's 3x3/2 3->64, ResNet's 7x7/2 3->64) as a product read straight from the
 * input's phase planes, AVX-512 (conv.h).
 *
 * Each input channel's zero-padded plane is split into sh x sw phase planes of ph x pws floats:
 * padded row r, column cc goes to phase (r mod sh, cc mod sw), row r / sh, column cc / sw.
 * Output position (oy, ox) is position q = oy pws + ox of a grid pws wide (pws >= ow; the
 * columns past ow are computed and dropped), and its tap p = (ch, ky, kx) is element q + off[p]
 * of the planes: off[p] picks channel ch's phase ((ky dh) mod sh, (kx dw) mod sw) and adds
 * ((ky dh) / sh) pws + (kx dw) / sw, the same for every position. So for any stride or dilation
 * a tap's values for consecutive positions are consecutive floats, and the convolution is the
 * product W (cout x taps, packed once as the GEMM's A) times B, whose row p over grid
 * positions [q0, q0 + 32) is planes[q0 + off[p] ...] read in place: the GEMM's 12 x 32 register
 * tile with its B rows found through the offset table. The im2col product (conv.c) gathered
 * those rows into packed blocks first (for SqueezeNet's first layer 27 strided rows of 12321
 * positions), and the direct tiles (conv_direct.c, output channels on the lanes) transpose each
 * tile at the end, which few taps do not repay.
 *
 * A finished tile stores each vector's valid lanes with masked stores, one per output row the
 * vector reaches (grids are at least 16 wide, so at most two), after the call's bias, clamp and
 * residual in registers. Each output is the sum over taps in increasing order, one FMA a tap,
 * whatever the thread split. docs/kernels.md has the measurements behind the rule. */
#include "kernels/fast/conv.h"

#include <float.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#define PH_NR 32                  /* grid positions per tile (two vectors) */
#define PH_RUN 12                 /* tiles run panel by panel (384 positions) */
#define PH_BAND_BYTES (256 << 10) /* a band's phase planes, about */
#define PH_CIN_MAX 4              /* input channels at most (RGB, RGBA, a DQN's 4 frames) */
#define PH_MIN_RATIO 32           /* multiply-adds per float of the planes' copy, at least */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* the phase planes' pitch: the padded width over the stride */
static int64_t ph_pitch(const Conv *c) { return cdiv(c->w + c->pl + c->pr, c->sw); }

bool kern_conv_phase_fits(const Conv *c) {
    if (sup_isa() != SUP_ISA_AVX512 || c->groups != 1 || c->cin > PH_CIN_MAX ||
        (c->sh == 1 && c->sw == 1) || c->sw > 2 || c->kh * c->kw < 2 || c->cout < 16)
        return false;
    int64_t pws = ph_pitch(c);
    /* grids at least 16 wide (a vector reaches two output rows at most); enough multiply-adds
     * per copied float (about cout kh kw / (sh sw)) to repay the copy; extents whose offsets
     * stay far from overflow */
    return pws >= 16 && c->cout * c->kh * c->kw >= PH_MIN_RATIO * c->sh * c->sw &&
           c->h + c->pt + c->pb < (1 << 24) && pws < (1 << 24) && c->kh * c->kw < (1 << 16) &&
           c->sh < 64 && c->sw < 64;
}

typedef struct PRun {
    const Conv *c;
    int64_t ldr;            /* output rows' pitch: ow, or a band buffer's */
    int64_t band;           /* output rows a band (the last may have fewer) */
    int64_t ph, pws, plane; /* a band's phase plane rows, their pitch, floats (ph * pws) */
    size_t buf_floats;      /* floats of a worker's buffer: its planes, slack, then its band */
    float *bufs;            /* worker w's at bufs + w * buf_floats */
    const float *w;         /* packed weights (kern_sgemm_pack_a's layout) */
    const int64_t *off;     /* per tap */
    int64_t k;              /* taps */
    int64_t used, slack;    /* floats of a band's planes, then of zeroed slack after them */
    float *out;
    const KEpilogue *epi;
    ConvRegTail rt;
} PRun;

/* ---- the phase planes ----------------------------------------------------------------------- */

/* The lanes t of 16 with x + t in [0, w). */
static __mmask16 lanes_inside(int64_t x, int64_t w) {
    int64_t lo = x < 0 ? -x : 0, hi = w - x < 16 ? w - x : 16;
    if (lo >= hi) return 0;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* dst[j] = row[j sw + x0] for j < n, 0 where that column is outside [0, w). */
static void phase_row(const float *row, int64_t w, int64_t sw, int64_t x0, float *dst, int64_t n) {
    if (sw == 1) { /* zeros, the row's columns, zeros */
        int64_t j0 = x0 < 0 ? min64(-x0, n) : 0, j1 = min64(n, w - x0);
        if (j1 < j0) j1 = j0;
        memset(dst, 0, (size_t)j0 * sizeof(float));
        if (j1 > j0) memcpy(dst + j0, row + x0 + j0, (size_t)(j1 - j0) * sizeof(float));
        memset(dst + j1, 0, (size_t)(n - j1) * sizeof(float));
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t x = j * sw + x0;
        dst[j] = x >= 0 && x < w ? row[x] : 0.0f;
    }
}

/* phase_row of stride 2 for both phases at once: d0[j] = row[2 j + x0], d1[j] = row[2 j + x0 +
 * 1], 16 of each from two masked loads of 32 inputs */
static FAST_AVX512 void phase_row2(const float *row, int64_t w, int64_t x0, float *d0, float *d1,
                                   int64_t n) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        int64_t x = 2 * j + x0; /* inputs [x, x + 32) */
        __m512 lo = _mm512_maskz_loadu_ps(lanes_inside(x, w), row + x);
        __m512 hi = _mm512_maskz_loadu_ps(lanes_inside(x + 16, w), row + x + 16);
        _mm512_storeu_ps(d0 + j, _mm512_permutex2var_ps(lo, even, hi));
        _mm512_storeu_ps(d1 + j, _mm512_permutex2var_ps(lo, odd, hi));
    }
    phase_row(row, w, 2, 2 * j + x0, d0 + j, n - j);
    phase_row(row, w, 2, 2 * j + x0 + 1, d1 + j, n - j);
}

/* The phase planes of image n for output rows [oy0, oy0 + rows) into pl (a worker's buffer:
 * every float of them written, then the slack zeroed): band plane row i of phase (a, b) is padded
 * row (oy0 + i) sh + a. The input is read once, in order. */
static void band_planes(const PRun *r, int64_t n, int64_t oy0, float *pl) {
    const Conv *c = r->c;
    int64_t r0 = oy0 * c->sh, r1 = r0 + r->ph * c->sh; /* padded rows [r0, r1) */
    for (int64_t ch = 0; ch < c->cin; ch++) {
        const float *src = c->x + (n * c->cin + ch) * c->h * c->w;
        float *ch0 = pl + ch * c->sh * c->sw * r->plane; /* phase (a, b) at (a sw + b) plane */
        for (int64_t rr = r0; rr < r1; rr++) {
            int64_t y = rr - c->pt, a = (rr - r0) % c->sh, i = (rr - r0) / c->sh;
            float *d = ch0 + a * c->sw * r->plane + i * r->pws;
            if (y < 0 || y >= c->h) {
                for (int64_t b = 0; b < c->sw; b++)
                    memset(d + b * r->plane, 0, (size_t)r->pws * sizeof(float));
            } else if (c->sw == 2) {
                phase_row2(src + y * c->w, c->w, -c->pl, d, d + r->plane, r->pws);
            } else {
                for (int64_t b = 0; b < c->sw; b++)
                    phase_row(src + y * c->w, c->w, c->sw, b - c->pl, d + b * r->plane, r->pws);
            }
        }
    }
    memset(pl + r->used, 0, (size_t)r->slack * sizeof(float));
}

/* ---- the tile ------------------------------------------------------------------------------- */

/* Where a tile's two vectors go: vector h's lanes in mask m[h][s] go to dst index idx[h][s] +
 * lane (s: the output rows it reaches, ns[h] of them; unused segments have mask 0, index 0). */
typedef struct PhOut {
    int ns[2];
    __mmask16 m[2][2];
    int64_t idx[2][2];
} PhOut;

/* Grid positions [q0, q0 + 32), valid below qend and in columns below ow, to output index
 * oy * ldr + ox - base (oy the row in the band). */
static void ph_out(const PRun *r, int64_t q0, int64_t qend, int64_t base, PhOut *po) {
    const Conv *c = r->c;
    for (int h = 0; h < 2; h++) {
        int64_t q = q0 + 16 * h, end = min64(q + 16, qend);
        po->ns[h] = 0;
        po->m[h][0] = po->m[h][1] = 0;
        po->idx[h][0] = po->idx[h][1] = 0;
        while (q < end) {
            int64_t oy = q / r->pws, ox = q % r->pws;
            int64_t stop = min64(end, oy * r->pws + c->ow); /* this row's valid columns end */
            if (ox < c->ow) {
                int s = po->ns[h]++;
                int lo = (int)(q - q0 - 16 * h), hi = (int)(stop - q0 - 16 * h);
                po->m[h][s] = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
                po->idx[h][s] = oy * r->ldr + ox - lo - base;
            }
            q = (oy + 1) * r->pws;
        }
    }
}

#define INLINE static inline __attribute__((always_inline))
#define ROWS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

/* output channel oc's two vectors: the tail (bias, then the clamp, the residual between them)
 * and the stores */
FAST_AVX512 INLINE void ph_store(const PRun *r, const PhOut *pp, float *dst, int64_t oc, __m512 v0,
                                 __m512 v1) {
    const ConvRegTail *rt = &r->rt;
    const PhOut po[1] = {*pp}; /* a copy: the stores may alias *pp for the compiler */
    __m512 v[2] = {v0, v1};
    for (int h = 0; h < 2; h++) {
        if (rt->on && rt->bias != NULL) {
            __m512 b = _mm512_set1_ps(rt->bias[oc]);
            v[h] = rt->first ? _mm512_add_ps(b, v[h]) : _mm512_add_ps(v[h], b);
        }
        if (rt->on && rt->res == NULL) v[h] = conv_clamp16(rt->clamp, rt->lo, rt->hi, v[h]);
        for (int s = 0; s < po->ns[h]; s++) {
            float *d = dst + po->idx[h][s];
            __m512 x = v[h];
            if (rt->on && rt->res != NULL) {
                __m512 t = _mm512_maskz_loadu_ps(po->m[h][s], rt->res + (d - r->out));
                x = conv_clamp16(rt->clamp, rt->lo, rt->hi,
                                 rt->res_first ? _mm512_add_ps(t, x) : _mm512_add_ps(x, t));
            }
            _mm512_mask_storeu_ps(d, po->m[h][s], x);
        }
    }
}

#define P_DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = c##i##0;
#define P_STEP(i)                                                                                  \
    if (i < R) {                                                                                   \
        __m512 ai = _mm512_set1_ps(a[i]);                                                          \
        c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);                                                \
        c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);                                                \
    }
/* row i's two vectors: the bias, clamp K (K_CLAMP_*), then the masked stores (a vector's first
 * segment's mask is 0 when it has none) */
#define P_STORE_K(i, K)                                                                            \
    if (i < R) {                                                                                   \
        __m512 v0 = c##i##0, v1 = c##i##1;                                                         \
        if (bias != NULL) {                                                                        \
            __m512 b = _mm512_set1_ps(bias[oc0 + i]);                                              \
            v0 = first ? _mm512_add_ps(b, v0) : _mm512_add_ps(v0, b);                              \
            v1 = first ? _mm512_add_ps(b, v1) : _mm512_add_ps(v1, b);                              \
        }                                                                                          \
        if (K == K_CLAMP_RELU) {                                                                   \
            v0 = _mm512_max_ps(v0, _mm512_setzero_ps());                                           \
            v1 = _mm512_max_ps(v1, _mm512_setzero_ps());                                           \
        } else if (K == K_CLAMP_CLIP) {                                                            \
            v0 = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v0));                                       \
            v1 = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v1));                                       \
        }                                                                                          \
        float *d = dst + (oc0 + i) * ldo;                                                          \
        _mm512_mask_storeu_ps(d + i00, m00, v0);                                                   \
        if (two0) _mm512_mask_storeu_ps(d + i01, m01, v0);                                         \
        _mm512_mask_storeu_ps(d + i10, m10, v1);                                                   \
        if (two1) _mm512_mask_storeu_ps(d + i11, m11, v1);                                         \
    }
#define P_STORE_NONE(i) P_STORE_K(i, K_CLAMP_NONE)
#define P_STORE_RELU(i) P_STORE_K(i, K_CLAMP_RELU)
#define P_STORE_CLIP(i) P_STORE_K(i, K_CLAMP_CLIP)
#define P_STORE_RES(i)                                                                             \
    if (i < R) ph_store(r, po, dst + (oc0 + i) * ldo, oc0 + i, c##i##0, c##i##1);

/* R output channels from oc0 (their packed panel a) over grid positions [q0, q0 + 32): x is the
 * planes at q0; dst[oc * ldo + index] receives output channel oc. */
FAST_AVX512 INLINE void ph_tile(const int R, const PRun *r, const float *a, const float *x,
                                const PhOut *po, float *dst, int64_t ldo, int64_t oc0) {
    const int64_t *off = r->off;
    ROWS12(P_DECL)
    for (int64_t p = 0; p < r->k; p++, a += SGEMM_MR) {
        const float *b = x + off[p];
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        ROWS12(P_STEP)
    }
    const ConvRegTail *rt = &r->rt;
    if (rt->on && rt->res != NULL) { /* a residual: per store */
        ROWS12(P_STORE_RES)
        return;
    }
    /* the tile's stores and the call's tail, read once (not per output channel) */
    const float *bias = rt->on ? rt->bias : NULL;
    const bool first = rt->first;
    const __m512 vlo = _mm512_set1_ps(rt->lo), vhi = _mm512_set1_ps(rt->hi);
    const bool two0 = po->ns[0] > 1, two1 = po->ns[1] > 1;
    const __mmask16 m00 = po->m[0][0], m01 = po->m[0][1], m10 = po->m[1][0], m11 = po->m[1][1];
    const int64_t i00 = po->idx[0][0], i01 = po->idx[0][1], i10 = po->idx[1][0];
    const int64_t i11 = po->idx[1][1];
    switch (rt->on ? rt->clamp : K_CLAMP_NONE) {
    case K_CLAMP_RELU: ROWS12(P_STORE_RELU) break;
    case K_CLAMP_CLIP: ROWS12(P_STORE_CLIP) break;
    default: ROWS12(P_STORE_NONE) break;
    }
}

typedef void (*PhTile)(const PRun *r, const float *a, const float *x, const PhOut *po, float *dst,
                       int64_t ldo, int64_t oc0);
#define PH_FN(R)                                                                                   \
    static FAST_AVX512 void ph_tile_##R(const PRun *r, const float *a, const float *x,             \
                                        const PhOut *po, float *dst, int64_t ldo, int64_t oc0) {   \
        ph_tile(R, r, a, x, po, dst, ldo, oc0);                                                    \
    }
PH_FN(1)
PH_FN(2)
PH_FN(3)
PH_FN(4)
PH_FN(5)
PH_FN(6)
PH_FN(7)
PH_FN(8)
PH_FN(9)
PH_FN(10)
PH_FN(11)
PH_FN(12)
static const PhTile ph_tiles[SGEMM_MR] = {ph_tile_1, ph_tile_2,  ph_tile_3,  ph_tile_4,
                                          ph_tile_5, ph_tile_6,  ph_tile_7,  ph_tile_8,
                                          ph_tile_9, ph_tile_10, ph_tile_11, ph_tile_12};

/* Grid positions [qa, qb) of a band (its planes pl), every output channel, in tiles from qa:
 * into dst (output channel oc at dst + oc * ldo, output index oy * ldr + ox - base, oy the row
 * in the band). PH_RUN tiles at a time, each run panel by panel: a panel's 12 output channels are
 * then 12 store streams (tiles outer made every output channel one, 64 streams of 128 bytes a
 * tile). */
static void ph_range(const PRun *r, const float *pl, int64_t qa, int64_t qb, float *dst,
                     int64_t ldo, int64_t base) {
    const Conv *c = r->c;
    PhOut po[PH_RUN];
    for (int64_t u0 = qa; u0 < qb; u0 += PH_RUN * PH_NR) {
        int nt = (int)min64(PH_RUN, cdiv(qb - u0, PH_NR));
        for (int t = 0; t < nt; t++)
            ph_out(r, u0 + t * PH_NR, qb, base, &po[t]);
        for (int64_t oc = 0; oc < c->cout; oc += SGEMM_MR) {
            int rows = (int)min64(SGEMM_MR, c->cout - oc);
            for (int t = 0; t < nt; t++)
                ph_tiles[rows - 1](r, r->w + oc * r->k, pl + u0 + t * PH_NR, &po[t], dst, ldo, oc);
        }
    }
}

/* Output rows [oy0, oy0 + rows) of image n (rows <= band) into dst (as ph_range's, base: the
 * output index of the band's first position) with the worker's buffer. */
static void ph_band(const PRun *r, int64_t n, int64_t oy0, int64_t rows, int worker, float *dst,
                    int64_t ldo, int64_t base) {
    float *pl = r->bufs + (size_t)worker * r->buf_floats;
    band_planes(r, n, oy0, pl);
    ph_range(r, pl, 0, (rows - 1) * r->pws + r->c->ow, dst, ldo, base);
}

static void ph_task(void *ctx, int64_t task, int worker) {
    const PRun *r = ctx;
    const Conv *c = r->c;
    int64_t bands = cdiv(c->oh, r->band), n = task / bands, oy0 = task % bands * r->band;
    int64_t rows = min64(r->band, c->oh - oy0), np = c->oh * c->ow;
    ph_band(r, n, oy0, rows, worker, r->out + n * c->cout * np + oy0 * c->ow, np, 0);
    if (r->epi != NULL && !r->rt.on) /* the tail over the band's rows */
        for (int64_t oc = 0; oc < c->cout; oc++)
            conv_tail(r->epi, r->out, (n * c->cout + oc) * np + oy0 * c->ow, rows * c->ow);
}

/* The run's offsets, packed weights and buffers for bands of `band` output rows, each worker's
 * buffer with `extra` floats after its planes; false with the call's error set. */
static bool ph_setup(KCall *kc, const Conv *c, PRun *r, int64_t band, int64_t extra) {
    r->band = band;
    r->pws = ph_pitch(c);
    /* a band's rows read plane rows up to (band - 1) + (kh - 1) dh / sh of each phase */
    r->ph = band + (c->kh - 1) * c->dh / c->sh;
    r->plane = r->ph * r->pws;
    r->k = c->cin * c->kh * c->kw;
    int64_t *off = k_scratch_n(kc, r->k, sizeof(int64_t));
    if (off == NULL) return false;
    int64_t most = 0;
    for (int64_t ch = 0, p = 0; ch < c->cin; ch++)
        for (int64_t ky = 0; ky < c->kh; ky++)
            for (int64_t kx = 0; kx < c->kw; kx++, p++) {
                int64_t dy = ky * c->dh, dx = kx * c->dw;
                off[p] = ((ch * c->sh + dy % c->sh) * c->sw + dx % c->sw) * r->plane +
                         dy / c->sh * r->pws + dx / c->sw;
                if (off[p] > most) most = off[p];
            }
    r->off = off;
    /* a tile reads 32 floats from q0 + off[p], q0 below the band's last position: past the
     * planes, the slack (zeroed: the lanes past the valid ones then hold no denormals or NaNs) */
    if ((double)c->cin * (double)(c->sh * c->sw) * (double)r->plane + (double)extra > 1e12) {
        k_error(kc, "out of memory (phase planes of the input)");
        return false;
    }
    r->used = c->cin * c->sh * c->sw * r->plane;
    int64_t need = most + band * r->pws + 2 * PH_NR;
    r->slack = (need > r->used ? need - r->used : 0) + 15;
    int64_t floats = (r->used + r->slack + extra + 15) / 16 * 16;
    r->buf_floats = (size_t)floats;
    int nt = k_threads(kc);
    r->bufs = k_scratch_raw(kc, sizeof(float) * r->buf_floats * (size_t)nt);
    if (r->bufs == NULL) return false;
    /* weights: cout x taps as the GEMM's A, packed once when constant */
    SGemm g = {.m = c->cout,
               .n = 1,
               .k = r->k,
               .batch = 1,
               .a = k_ptr(k_arg(kc, 1)),
               .a_rs = r->k,
               .a_cs = 1};
    kern_sgemm_prepare(kc, &g, true, 1, 1);
    r->w = g.a_packed;
    if (r->w == NULL) {
        float *w = k_scratch_raw(kc, kern_sgemm_packed_a_floats(c->cout, r->k) * sizeof(float));
        if (w == NULL) return false;
        kern_sgemm_pack_a(g.a, r->k, 1, c->cout, r->k, w);
        r->w = w;
    }
    return true;
}

static _Atomic uint64_t n_conv_phase;
uint64_t kern_conv_phase_taken(void) { return n_conv_phase; }

int kern_conv_phase(KCall *kc, const Conv *c, const DLTensor *o) {
    PRun r = {.c = c, .ldr = c->ow, .out = k_ptr(o)};
    /* bands whose planes stay in L2 (~PH_BAND_BYTES), at least two a thread when the output
     * has the rows */
    int64_t row_bytes = c->cin * c->sh * c->sw * ph_pitch(c) * 4;
    int64_t band = PH_BAND_BYTES / (row_bytes > 0 ? row_bytes : 1);
    int64_t want = cdiv(2 * (int64_t)k_threads(kc), c->batch);
    band = min64(band, cdiv(c->oh, want));
    if (band < 1) band = 1;
    if (!ph_setup(kc, c, &r, band, 0)) return -1;
    r.epi = conv_bind_tail(kc, o, &r.out);
    r.rt = conv_reg_tail(r.epi, o);
    k_parallel(kc, c->batch * cdiv(c->oh, band), ph_task, &r);
    kc->epi_done = r.epi != NULL;
    n_conv_phase++;
    return 0;
}

/* ---- with its max pool (conv.c's pair) ------------------------------------------------------ */

#define PP_BAND 16 /* pool rows a band, at most (as the im2col pair's) */

/* p[0 .. n) = -FLT_MAX */
static FAST_AVX512 void fill_lowest(float *p, int64_t n) {
    const __m512 lowest = _mm512_set1_ps(-FLT_MAX);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(p + i, lowest);
    if (i < n) _mm512_mask_storeu_ps(p + i, (__mmask16)((1u << (n - i)) - 1), lowest);
}

typedef struct PPool {
    PRun r;
    float *out;         /* the pool's result */
    int64_t hout, wout; /* its plane */
    int64_t pt, pl;     /* its padding above and left */
    int64_t pband;      /* pool rows a band (its convolution rows: 2 pband + 1) */
    int64_t pitch;      /* floats a row of the band buffer: pl, ow, then the right padding */
} PPool;

/* Image n, pool rows [p0, p1): padded convolution rows 2 p0 .. 2 p1 (those inside computed, the
 * padding -FLT_MAX: the pool's initial value, which no value is above, so the windows' results
 * are the reference's, which skips the padding) into the worker's buffer after its planes,
 * pooled from there */
static void pp_task(void *ctx, int64_t task, int worker) {
    const PPool *pp = ctx;
    const PRun *r = &pp->r;
    const Conv *c = r->c;
    int64_t bands = cdiv(pp->hout, pp->pband);
    int64_t n = task / bands, p0 = task % bands * pp->pband;
    int64_t p1 = min64(pp->hout, p0 + pp->pband), rows = 2 * (p1 - p0) + 1;
    int64_t y0 = 2 * p0 - pp->pt, ya = y0 > 0 ? y0 : 0, yb = min64(c->oh, y0 + rows);
    float *cb = r->bufs + (size_t)worker * r->buf_floats + r->used + r->slack;
    int64_t plane = rows * pp->pitch;
    if (ya < yb) ph_band(r, n, ya, yb - ya, worker, cb, plane, -((ya - y0) * pp->pitch + pp->pl));
    float *o = pp->out + n * c->cout * pp->hout * pp->wout;
    for (int64_t oc = 0; oc < c->cout; oc++) {
        float *pl = cb + oc * plane;
        for (int64_t y = 0; y < rows; y++) { /* the padding */
            float *row = pl + y * pp->pitch;
            bool inside = y0 + y >= ya && y0 + y < yb;
            int64_t a = inside ? pp->pl : pp->pitch, b = inside ? pp->pl + c->ow : pp->pitch;
            fill_lowest(row, a);
            fill_lowest(row + b, pp->pitch - b);
        }
        kern_max3s2_rows(pl, rows, pp->pitch, o + (oc * pp->hout + p0) * pp->wout, pp->wout, 0,
                         p1 - p0);
    }
}

int kern_conv_phase_maxpool(KCall *kc, const Conv *c, const float *bias, bool bias_first,
                            int64_t pt, int64_t pl, float *out, int64_t hout, int64_t wout) {
    PPool pp = {.r = {.c = c}, .out = out, .hout = hout, .wout = wout, .pt = pt, .pl = pl};
    PRun *r = &pp.r;
    /* bands of at most PP_BAND pool rows, a multiple of the threads in number */
    int nt = k_threads(kc);
    int64_t bands = cdiv(hout, PP_BAND);
    bands = cdiv(bands, nt) * nt;
    if (bands > hout) bands = hout;
    pp.pband = cdiv(hout, bands);
    int64_t rows = 2 * pp.pband + 1, reach = 2 * (wout - 1) + 3;
    pp.pitch = pl + c->ow > reach ? pl + c->ow : reach;
    r->ldr = pp.pitch;
    if (!ph_setup(kc, c, r, rows, c->cout * rows * pp.pitch)) return -1;
    r->rt = (ConvRegTail){true, bias, bias_first, K_CLAMP_RELU, 0.0f, 0.0f, NULL, false};
    k_parallel(kc, c->batch * cdiv(hout, pp.pband), pp_task, &pp);
    n_conv_phase++;
    return 0;
}
