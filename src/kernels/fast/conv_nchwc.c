/* conv_nchwc.c - fast nn.conv2d in a blocked layout (conv.h): data NCHW{b}c, that is
 * (batch, C/b, H, W, b), and the result in the same layout; weights OIHW{b}i{b}o, that is
 * (O/b, I/groups/b, KH, KW, b, b), a b x b block per tap from input lanes to output lanes, or for
 * a depthwise convolution (one input channel per output channel) OIHW1i{b}o, that is
 * (C/b, 1, KH, KW, 1, b). Also plain NCHW data into an NCHW{b}c result (out_layout), weights
 * OIHW1i{b}o, one group: a first layer of 3 channels, which blocks of 16 do not divide. These are
 * the layouts ConvertLayout gives a conv2d asked for NCHW{b}c (docs/passes.md). Any stride,
 * padding, dilation and groups whose channels per group are whole blocks, and depthwise ones;
 * float32. Other calls go to the reference kernel.
 *
 * The weights need no packing: their layout is the loop order. A register tile is R output
 * positions of one output row (consecutive output columns; the whole plane is one row for a 1x1,
 * stride-1, unpadded convolution) by NOB output blocks: R x NOB accumulators of b lanes. Each tap
 * (input block, ky, kx) and input lane i loads NOB weight vectors (row i of the tap's b x b
 * blocks) and broadcasts the R positions' input value of lane i: at AVX-512 with b = 16,
 * NOB = 4 and R = 6 make 24 FMAs per 4 loads and 6 broadcasts. Plain input is the same with one
 * lane per "block" (a channel). A depthwise tile is R positions of one block: each tap is one
 * weight vector and R input vectors, lane by lane, with no transposes. Output positions whose
 * window leaves the input on the left or right run as tiles of one position over the taps inside
 * (rows above or below leave out whole kernel rows for the row's tiles), so the input is read in
 * place, never copied or padded.
 *
 * Every output is the sum over (input block, ky, kx, lane) in that order (plain input at
 * AVX-512: (ky, kx, channel)), one FMA per term at AVX-512 (a multiply and an add per term in the
 * portable code of the other levels and blocks), whatever the tile: results do not depend on the
 * thread count. Threads take (image, tile of output blocks, range of output positions) tasks; the
 * fused tail is applied to each piece of at most NC_PIECE positions of a row as soon as it is
 * computed. docs/kernels.md, "Blocked layout", has the measurements. */
#include "kernels/fast/conv.h"

#include <immintrin.h>
#include <stdio.h>
#include <string.h>

#define NC_MIN_MACS 65536 /* multiply-adds per task at least when splitting for threads */
#define NC_MAX_BLOCK 64   /* lanes of the portable code's accumulator */
#define NC_R_MAX 14       /* positions per tile */
#define NC_PIECE 84       /* positions of a row computed before the fused tail runs on them */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

typedef struct NcRun {
    Conv c;               /* geometry in channels; a flat call's plane is one row (h = oh = 1) */
    int64_t b;            /* lanes per block */
    int64_t xb;           /* lanes of the input's last dim: b, or 1 for NCHW data (plain) */
    bool dw;              /* depthwise: output block j reads input block j */
    int64_t cb;           /* input blocks */
    int64_t ob;           /* output blocks */
    int64_t icb_g, ob_g;  /* input and output blocks per group (general) */
    int64_t nob;          /* output blocks per tile: 1 for depthwise */
    int64_t tiles_g;      /* tiles per group (general), or blocks (depthwise) */
    int64_t tiles;        /* tiles per image */
    int64_t np;           /* output positions per plane */
    int64_t chunks;       /* position ranges per (image, tile) */
    bool chunk_rows;      /* ranges are whole output rows */
    bool pos_major;       /* tasks ordered by position range first (one image) */
    int64_t ox_lo, ox_hi; /* output columns whose window is inside the input horizontally */
    /* strides in floats */
    int64_t xs_cb, xs_ky, xs_kx, pstep;  /* input block, kernel row, kernel column, position */
    int64_t ws_icb, ws_ky, ws_kx, ws_ob; /* weights of an input block, a kernel row, a column,
                                          * an output block */
    int64_t os_ob;                       /* output block */
    const float *x, *w;
    float *out;
    bool avx512;  /* the AVX-512 tiles (b == 16) */
    bool dw_runs; /* depthwise 3 wide, stride 1 or 2, dilation 1, padding <= 1 a side: dw_run16 */
    bool avx2;    /* the portable code compiled for AVX2 */
    const KEpilogue *epi;
    uint8_t clamp;     /* K_CLAMP_*: the tail applied as tiles are stored (out: its result) */
    const float *bias; /* the tail's per-channel bias, added before the clamp, or NULL */
    bool bias_first;   /* bias + x (else x + bias) */
    int64_t bias_step; /* the bias of output block j at bias + j * bias_step (b, or 0) */
    const float *res;  /* the tail's residual (out's layout: element at o read at res + (o - out))
                        * added after the bias, or NULL */
    bool res_first;    /* res + (x + bias) (else (x + bias) + res) */
    float lo, hi;      /* K_CLAMP_CLIP's bounds */
    float fill;        /* an output whose window is all padding: 0 clamped */
} NcRun;

/* ---- AVX-512 tiles, b == 16 ----------------------------------------------------------------- */

#define INLINE static inline __attribute__((always_inline))

/* One input lane of a tap: NOB weight vectors at wq (wob apart) times the R positions' values
 * at xq (ps apart), into acc; and the next line of the prefetch (pf, pstep). */
#define NC_LANE(xq, ps, wq, wob)                                                                   \
    do {                                                                                           \
        _mm_prefetch(pf, _MM_HINT_T1);                                                             \
        pf += pstep;                                                                               \
        __m512 wv[4];                                                                              \
        _Pragma("GCC unroll 4") for (int j = 0; j < NOB; j++) wv[j] =                              \
            _mm512_loadu_ps((wq) + j * (wob));                                                     \
        _Pragma("GCC unroll 14") for (int p = 0; p < R; p++) {                                     \
            __m512 xv = _mm512_set1_ps((xq)[p * (ps)]);                                            \
            _Pragma("GCC unroll 4") for (int j = 0; j < NOB; j++) acc[p][j] =                      \
                _mm512_fmadd_ps(xv, wv[j], acc[p][j]);                                             \
        }                                                                                          \
    } while (0)

/* The tail's clamp of v (r->clamp), as the fused program's relu and clip compute it: x86's
 * max(a, b) is a > b ? a : b, so relu sends NaN to 0 and clip keeps it. */
FAST_AVX512 INLINE __m512 nc_clamp16(const NcRun *r, __m512 v) {
    return conv_clamp16(r->clamp, r->lo, r->hi, v);
}

/* The tail's bias b added to v in the program's order. */
FAST_AVX512 INLINE __m512 nc_bias16(const NcRun *r, __m512 b, __m512 v) {
    return r->bias_first ? _mm512_add_ps(b, v) : _mm512_add_ps(v, b);
}
/* The tail's residual (16 floats at q) added to v in the program's order. */
FAST_AVX512 INLINE __m512 nc_res16(const NcRun *r, const float *q, __m512 v) {
    __m512 t = _mm512_loadu_ps(q);
    return r->res_first ? _mm512_add_ps(t, v) : _mm512_add_ps(v, t);
}

/* R positions x NOB output blocks: x at position 0's first tap of the tile's first input block,
 * w at that tap of the first output block's weights, o at position 0 of the first output block,
 * bv at the first output block's bias (NULL: none);
 * nky x nkx taps. IB: input lanes per block (16), or 1 for plain input, whose channels run in a
 * tight loop inside each tap. Each lane step prefetches the line at pf into L2, pf advancing by
 * pstep bytes (nc_row: the next tile's weights). */
FAST_AVX512 INLINE void nc_tile16(const NcRun *r, const float *x, const float *w, float *o,
                                  const float *bv, int64_t nky, int64_t nkx, const char *pf,
                                  int64_t pstep, const int R, const int NOB, const int IB) {
    __m512 acc[NC_R_MAX][4];
    _Pragma("GCC unroll 14") for (int p = 0; p < R; p++)
        _Pragma("GCC unroll 4") for (int j = 0; j < NOB; j++) acc[p][j] = _mm512_setzero_ps();
    const int64_t ps = r->pstep, wob = r->ws_ob;
    if (IB == 1) {
        for (int64_t ky = 0; ky < nky; ky++)
            for (int64_t kx = 0; kx < nkx; kx++) {
                const float *xq = x + ky * r->xs_ky + kx * r->xs_kx;
                const float *wq = w + ky * r->ws_ky + kx * r->ws_kx;
                for (int64_t ci = 0; ci < r->icb_g; ci++, xq += r->xs_cb, wq += r->ws_icb)
                    NC_LANE(xq, ps, wq, wob);
            }
    } else {
        for (int64_t icb = 0; icb < r->icb_g; icb++)
            for (int64_t ky = 0; ky < nky; ky++)
                for (int64_t kx = 0; kx < nkx; kx++) {
                    const float *xq = x + icb * r->xs_cb + ky * r->xs_ky + kx * r->xs_kx;
                    const float *wq = w + icb * r->ws_icb + ky * r->ws_ky + kx * r->ws_kx;
                    _Pragma("GCC unroll 4") for (int i = 0; i < IB; i++)
                        NC_LANE(xq + i, ps, wq + i * 16, wob);
                }
    }
    if (bv != NULL) _Pragma("GCC unroll 4") for (int j = 0; j < NOB; j++) {
            __m512 bj = _mm512_loadu_ps(bv + j * r->bias_step);
            _Pragma("GCC unroll 14") for (int p = 0; p < R; p++) acc[p][j] =
                nc_bias16(r, bj, acc[p][j]);
        }
    if (r->res != NULL) {
        const float *rq = r->res + (o - r->out);
        _Pragma("GCC unroll 14") for (int p = 0; p < R; p++)
            _Pragma("GCC unroll 4") for (int j = 0; j < NOB; j++) acc[p][j] =
                nc_res16(r, rq + j * r->os_ob + p * 16, acc[p][j]);
    }
    _Pragma("GCC unroll 14") for (int p = 0; p < R; p++)
        _Pragma("GCC unroll 4") for (int j = 0; j < NOB; j++) acc[p][j] = nc_clamp16(r, acc[p][j]);
    _Pragma("GCC unroll 14") for (int p = 0; p < R; p++)
        _Pragma("GCC unroll 4") for (int j = 0; j < NOB; j++)
            _mm512_storeu_ps(o + j * r->os_ob + p * 16, acc[p][j]);
}

/* A depthwise tile's R results stored at o: bias bv (NULL: none), then the clamp. */
FAST_AVX512 INLINE void nc_store_dw(const NcRun *r, float *o, const float *bv, __m512 *acc,
                                    const int R) {
    if (bv != NULL) {
        __m512 b = _mm512_loadu_ps(bv);
        _Pragma("GCC unroll 14") for (int p = 0; p < R; p++) acc[p] = nc_bias16(r, b, acc[p]);
    }
    if (r->res != NULL)
        _Pragma("GCC unroll 14") for (int p = 0; p < R; p++) acc[p] =
            nc_res16(r, r->res + (o - r->out) + p * 16, acc[p]);
    _Pragma("GCC unroll 14") for (int p = 0; p < R; p++)
        _mm512_storeu_ps(o + p * 16, nc_clamp16(r, acc[p]));
}

/* R positions of one depthwise block: x at position 0's first tap, w at that tap's vector. */
FAST_AVX512 INLINE void dw_tile16(const NcRun *r, const float *x, const float *w, float *o,
                                  const float *bv, int64_t nky, int64_t nkx, const int R) {
    __m512 acc[NC_R_MAX];
    _Pragma("GCC unroll 14") for (int p = 0; p < R; p++) acc[p] = _mm512_setzero_ps();
    const int64_t ps = r->pstep;
    for (int64_t ky = 0; ky < nky; ky++)
        for (int64_t kx = 0; kx < nkx; kx++) {
            const float *xq = x + ky * r->xs_ky + kx * r->xs_kx;
            __m512 wv = _mm512_loadu_ps(w + ky * r->ws_ky + kx * r->ws_kx);
            _Pragma("GCC unroll 14") for (int p = 0; p < R; p++) acc[p] =
                _mm512_fmadd_ps(_mm512_loadu_ps(xq + p * ps), wv, acc[p]);
        }
    nc_store_dw(r, o, bv, acc, R);
}

/* R consecutive outputs of one depthwise block, stride S (1 or 2), dilation 1, 3 kernel columns:
 * a run of S (R - 1) + 3 input vectors per kernel row from x (the input at the first output's
 * left tap, which may lie in the padding), each loaded once and multiplied into the outputs it
 * is a tap of. Inputs j < lo and j >= hi of the run are padding (not read). Output p sums its
 * taps in the order (ky, kx), kx rising with j, one FMA each: the bits of dw_tile16 and of its
 * one-position edge tiles (which skip the taps in the padding). Per kernel row that is about
 * S R loads for 3R FMAs where dw_tile16 loads once per FMA, and one call per row piece, edges
 * included: a 7x7 plane's row was three calls (an edge, five positions, an edge). */
FAST_AVX512 INLINE void dw_run16(const NcRun *r, const float *x, const float *w, float *o,
                                 const float *bv, int64_t nky, int lo, int hi, const int R,
                                 const int S) {
    __m512 acc[NC_R_MAX];
    _Pragma("GCC unroll 14") for (int p = 0; p < R; p++) acc[p] = _mm512_setzero_ps();
    for (int64_t ky = 0; ky < nky; ky++) {
        const float *xr = x + ky * r->xs_ky, *wr = w + ky * r->ws_ky;
        __m512 wv[3] = {_mm512_loadu_ps(wr), _mm512_loadu_ps(wr + 16), _mm512_loadu_ps(wr + 32)};
        _Pragma("GCC unroll 32") for (int j = 0; j < S * (R - 1) + 3; j++) {
            if (j < lo || j >= hi) continue;
            __m512 v = _mm512_loadu_ps(xr + j * 16);
            _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++) {
                int p = (j - kx) / S;
                if (j - kx >= 0 && (j - kx) % S == 0 && p < R)
                    acc[p] = _mm512_fmadd_ps(v, wv[kx], acc[p]);
            }
        }
    }
    nc_store_dw(r, o, bv, acc, R);
}

typedef void (*DwRunFn)(const NcRun *r, const float *x, const float *w, float *o, const float *bv,
                        int64_t nky, int lo, int hi);
#define DWR_FN(R, S)                                                                               \
    static FAST_AVX512 void dwr16_##R##_##S(const NcRun *r, const float *x, const float *w,        \
                                            float *o, const float *bv, int64_t nky, int lo,        \
                                            int hi) {                                              \
        dw_run16(r, x, w, o, bv, nky, lo, hi, R, S);                                               \
    }

typedef void (*NcTileFn)(const NcRun *r, const float *x, const float *w, float *o, const float *bv,
                         int64_t nky, int64_t nkx, const char *pf, int64_t pstep);

#define NC_FN(R, NOB)                                                                              \
    static FAST_AVX512 void nc16_##R##_##NOB(const NcRun *r, const float *x, const float *w,       \
                                             float *o, const float *bv, int64_t nky, int64_t nkx,  \
                                             const char *pf, int64_t pstep) {                      \
        nc_tile16(r, x, w, o, bv, nky, nkx, pf, pstep, R, NOB, 16);                                \
    }                                                                                              \
    static FAST_AVX512 void nc1_##R##_##NOB(const NcRun *r, const float *x, const float *w,        \
                                            float *o, const float *bv, int64_t nky, int64_t nkx,   \
                                            const char *pf, int64_t pstep) {                       \
        nc_tile16(r, x, w, o, bv, nky, nkx, pf, pstep, R, NOB, 1);                                 \
    }
#define DW_FN(R, NOB)                                                                              \
    static FAST_AVX512 void dw16_##R(const NcRun *r, const float *x, const float *w, float *o,     \
                                     const float *bv, int64_t nky, int64_t nkx, const char *pf,    \
                                     int64_t pstep) {                                              \
        (void)pf, (void)pstep; /* a depthwise layer's weights are few */                           \
        dw_tile16(r, x, w, o, bv, nky, nkx, R);                                                    \
    }
#define R6(X, N) X(1, N) X(2, N) X(3, N) X(4, N) X(5, N) X(6, N)
#define R8(X, N) R6(X, N) X(7, N) X(8, N)
#define R12(X, N) R8(X, N) X(9, N) X(10, N) X(11, N) X(12, N)
#define R14(X, N) R12(X, N) X(13, N) X(14, N)
R14(NC_FN, 1)
R12(NC_FN, 2)
R8(NC_FN, 3)
R6(NC_FN, 4)
R14(DW_FN, 0)
R14(DWR_FN, 1)
R14(DWR_FN, 2)
#define NC_PTR(R, NOB) nc16_##R##_##NOB,
#define NC1_PTR(R, NOB) nc1_##R##_##NOB,
#define DW_PTR(R, NOB) dw16_##R,

/* The most positions per tile for NOB output blocks (R x NOB accumulators, NOB weight vectors
 * and a broadcast within 32 registers). */
static const int nc_rmax[5] = {NC_R_MAX, 14, 12, 8, 6};
static const NcTileFn nc16_fns[4][NC_R_MAX] = {
    {R14(NC_PTR, 1)}, {R12(NC_PTR, 2)}, {R8(NC_PTR, 3)}, {R6(NC_PTR, 4)}};
static const NcTileFn nc1_fns[4][NC_R_MAX] = {
    {R14(NC1_PTR, 1)}, {R12(NC1_PTR, 2)}, {R8(NC1_PTR, 3)}, {R6(NC1_PTR, 4)}};
static const NcTileFn dw16_fns[NC_R_MAX] = {R14(DW_PTR, 0)};
#define DWR_PTR(R, S) dwr16_##R##_##S,
static const DwRunFn dwr16_fns[2][NC_R_MAX] = {{R14(DWR_PTR, 1)}, {R14(DWR_PTR, 2)}};

/* ---- portable tiles (other levels, other blocks) -------------------------------------------- */

/* nc_clamp16 for one value. */
INLINE float nc_clamp1(const NcRun *r, float v) { return kern_clamp1(r->clamp, r->lo, r->hi, v); }

/* The tail's bias b added to v in the program's order. */
INLINE float nc_bias1(const NcRun *r, float b, float v) { return r->bias_first ? b + v : v + b; }
/* The tail's bias (*bv; bv NULL: none), then its residual (the element of out at o), added to v;
 * then the clamp. */
INLINE float nc_tail1(const NcRun *r, const float *bv, const float *o, float v) {
    if (bv != NULL) v = nc_bias1(r, *bv, v);
    if (r->res != NULL) {
        float t = r->res[o - r->out];
        v = r->res_first ? t + v : v + t;
    }
    return nc_clamp1(r, v);
}

INLINE void nc_pos_body(const NcRun *r, const float *x, const float *w, float *o, const float *bv,
                        int64_t nky, int64_t nkx, int64_t nob) {
    const int64_t b = r->b;
    for (int64_t j = 0; j < nob; j++) {
        float acc[NC_MAX_BLOCK];
        for (int64_t l = 0; l < b; l++)
            acc[l] = 0;
        const float *wj = w + j * r->ws_ob;
        /* input blocks (channels for plain input), then taps, then lanes: nc_tile16 takes plain
         * input's channels inside the taps, so the two levels round differently, each the same
         * way for every position and thread count */
        for (int64_t icb = 0; icb < (r->dw ? 1 : r->icb_g); icb++)
            for (int64_t ky = 0; ky < nky; ky++)
                for (int64_t kx = 0; kx < nkx; kx++) {
                    const float *xq = x + icb * r->xs_cb + ky * r->xs_ky + kx * r->xs_kx;
                    const float *wq = wj + icb * r->ws_icb + ky * r->ws_ky + kx * r->ws_kx;
                    if (r->dw) {
                        for (int64_t l = 0; l < b; l++)
                            acc[l] += xq[l] * wq[l];
                        continue;
                    }
                    for (int64_t i = 0; i < r->xb; i++) {
                        float xv = xq[i];
                        for (int64_t l = 0; l < b; l++)
                            acc[l] += xv * wq[i * b + l];
                    }
                }
        for (int64_t l = 0; l < b; l++)
            acc[l] =
                nc_tail1(r, bv ? bv + j * r->bias_step + l : NULL, o + j * r->os_ob + l, acc[l]);
        memcpy(o + j * r->os_ob, acc, (size_t)b * sizeof(float));
    }
}

static FAST_AVX2 void nc_pos_avx2(const NcRun *r, const float *x, const float *w, float *o,
                                  const float *bv, int64_t nky, int64_t nkx, int64_t nob) {
    nc_pos_body(r, x, w, o, bv, nky, nkx, nob);
}

static void nc_pos_scalar(const NcRun *r, const float *x, const float *w, float *o, const float *bv,
                          int64_t nky, int64_t nkx, int64_t nob) {
    nc_pos_body(r, x, w, o, bv, nky, nkx, nob);
}

/* The next tile's weights, prefetched into L2 while a task's tiles run (nc_task): bytes at base
 * (0: none), spread over the task's n positions from p0 (a plane's flat index). */
typedef struct NcPf {
    const char *base;
    int64_t bytes, p0, n;
} NcPf;

/* n positions (n <= NC_R_MAX) of nob output blocks at flat position q, the taps given as for
 * nc_tile16: the tile prefetches its share of pf's bytes (AVX-512). */
static void nc_tile(const NcRun *r, const float *x, const float *w, float *o, const float *bv,
                    int64_t nky, int64_t nkx, int64_t nob, int64_t n, const NcPf *pf, int64_t q) {
    if (r->avx512) {
        const char *at = pf->base;
        int64_t pstep = 0;
        if (pf->bytes > 0 && !r->dw) {
            int64_t lo = pf->bytes * (q - pf->p0) / pf->n,
                    hi = pf->bytes * (q + n - pf->p0) / pf->n;
            int64_t steps = nky * nkx * r->icb_g * (r->xb == 1 ? 1 : 16);
            at += lo;
            pstep = min64(64, cdiv(hi - lo, steps));
            if (lo + pstep * steps > pf->bytes) /* stay inside the next tile's weights */
                pstep = (pf->bytes - lo) / steps;
        }
        if (r->dw)
            dw16_fns[n - 1](r, x, w, o, bv, nky, nkx, at, pstep);
        else if (r->xb == 1)
            nc1_fns[nob - 1][n - 1](r, x, w, o, bv, nky, nkx, at, pstep);
        else
            nc16_fns[nob - 1][n - 1](r, x, w, o, bv, nky, nkx, at, pstep);
        return;
    }
    for (int64_t p = 0; p < n; p++) {
        const float *xp = x + p * r->pstep;
        float *op = o + p * r->b;
        if (r->avx2)
            nc_pos_avx2(r, xp, w, op, bv, nky, nkx, nob);
        else
            nc_pos_scalar(r, xp, w, op, bv, nky, nkx, nob);
    }
}

/* ---- rows and tasks -------------------------------------------------------------------------- */

/* n positions of one output block whose window is all padding (bv: the block's bias, or NULL):
 * the tail of a sum of no terms. */
static void nc_fill(const NcRun *r, float *o, const float *bv, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t l = 0; l < r->b; l++)
            o[i * r->b + l] = bv == NULL && r->res == NULL
                                  ? r->fill
                                  : nc_tail1(r, bv ? bv + l : NULL, o + i * r->b + l, 0.0f);
}

/* Output row oy, columns [c0, c1), of the tile whose input starts at x (its first input block),
 * weights at w (first output block, tap (0, 0)), output at o (first output block's plane). */
static void nc_row(const NcRun *r, const float *x, const float *w, float *o, const float *bv,
                   int64_t nob, int64_t oy, int64_t c0, int64_t c1, const NcPf *pf) {
    const Conv *c = &r->c;
    int64_t b = r->b, iy0 = oy * c->sh - c->pt;
    int64_t ky0 = iy0 >= 0 ? 0 : cdiv(-iy0, c->dh);
    int64_t ky1 = iy0 > c->h - 1 ? 0 : min64(c->kh, (c->h - 1 - iy0) / c->dh + 1);
    float *orow = o + oy * c->ow * b;
    if (ky1 <= ky0) { /* every kernel row falls in the padding */
        for (int64_t j = 0; j < nob; j++)
            nc_fill(r, orow + j * r->os_ob + c0 * b, bv ? bv + j * r->bias_step : NULL, c1 - c0);
        return;
    }
    int64_t nky = ky1 - ky0, rmax = nc_rmax[r->dw ? 0 : nob];
    const float *xrow = x + (iy0 + ky0 * c->dh) * c->w * r->xb; /* kernel row ky0's input row */
    const float *wk = w + ky0 * r->ws_ky;
    if (r->dw_runs) { /* pieces of up to NC_R_MAX outputs, edges included (dw_run16) */
        for (int64_t ox = c0; ox < c1;) {
            int64_t n = min64(NC_R_MAX, c1 - ox), ix0 = ox * c->sw - c->pl;
            int lo = ix0 < 0 ? (int)-ix0 : 0;
            int hi = (int)min64(c->sw * (n - 1) + 3, c->w - ix0);
            dwr16_fns[c->sw - 1][n - 1](r, xrow + ix0 * 16, wk, orow + ox * b, bv, nky, lo, hi);
            ox += n;
        }
        return;
    }
    for (int64_t ox = c0; ox < c1;) {
        int64_t ix0 = ox * c->sw - c->pl;
        if (ox >= r->ox_lo && ox < r->ox_hi) {
            /* as few tiles as rmax allows, of near-equal sizes: a 7 x 7 plane's 49 positions
             * as 6 x 4 + 5 x 5, not 6 x 8 + 1 (a tile of one position loads its 4 weight
             * vectors per 4 FMAs: a pass over the tile's weights for 1/49 of the work).
             * MobileNetV2's 7 x 7 1x1 layers at 1 thread: 109 -> 102, 217 -> 200, 305 -> 280 us.
             * The sizes once per run (two divisions per tile were 3% of MobileNetV2) */
            int64_t left = min64(c1, r->ox_hi) - ox, nt = cdiv(left, rmax);
            int64_t q = left / nt, big = left % nt;
            for (int64_t i = 0; i < nt; i++) {
                int64_t n = q + (i < big);
                nc_tile(r, xrow + (ox * c->sw - c->pl) * r->xb, wk, orow + ox * b, bv, nky, c->kw,
                        nob, n, pf, oy * c->ow + ox);
                ox += n;
            }
            continue;
        }
        int64_t kx0 = ix0 >= 0 ? 0 : cdiv(-ix0, c->dw);
        int64_t kx1 = ix0 > c->w - 1 ? 0 : min64(c->kw, (c->w - 1 - ix0) / c->dw + 1);
        if (kx1 <= kx0) {
            for (int64_t j = 0; j < nob; j++)
                nc_fill(r, orow + j * r->os_ob + ox * b, bv ? bv + j * r->bias_step : NULL, 1);
        } else {
            nc_tile(r, xrow + (ix0 + kx0 * c->dw) * r->xb, wk + kx0 * r->ws_kx, orow + ox * b, bv,
                    nky, kx1 - kx0, nob, 1, pf, oy * c->ow + ox);
        }
        ox++;
    }
}

static void nc_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const NcRun *r = ctx;
    const Conv *c = &r->c;
    int64_t chunk = t % r->chunks, tile = t / r->chunks % r->tiles, n = t / r->chunks / r->tiles;
    if (r->pos_major) /* one image: tasks in order of position range, then tile */
        chunk = t / r->tiles, tile = t % r->tiles, n = 0;
    int64_t ob0, nob, icb0;
    if (r->dw) {
        ob0 = icb0 = tile;
        nob = 1;
    } else {
        int64_t g = tile / r->tiles_g, k = tile % r->tiles_g;
        ob0 = g * r->ob_g + k * r->nob;
        nob = min64(r->nob, r->ob_g - k * r->nob);
        icb0 = g * r->icb_g;
    }
    int64_t p0, p1;
    if (r->chunk_rows) {
        p0 = c->oh * chunk / r->chunks * c->ow;
        p1 = c->oh * (chunk + 1) / r->chunks * c->ow;
    } else {
        p0 = r->np * chunk / r->chunks;
        p1 = r->np * (chunk + 1) / r->chunks;
    }
    const float *x = r->x + (n * r->cb + icb0) * r->xs_cb;
    const float *w = r->w + ob0 * r->ws_ob;
    float *o = r->out + (n * r->ob + ob0) * r->os_ob;
    /* The weights of the next tile of output blocks, which this thread's next task reads (in
     * the pool's order the tasks take the tiles in turn; not so when a tile's positions are cut
     * into ranges for an image of several tiles, which then prefetches nothing), are brought
     * into L2 while this task's position tiles run, spread over them. A 1x1 layer at 7 x 7 has
     * 9 position tiles a tile of blocks: the first streamed the blocks' weights (80 KB of
     * MobileNetV2's 320 -> 1280) from memory while the others read them from L2. */
    NcPf pf = {(const char *)w, 0, p0, p1 - p0};
    int64_t k_next = r->dw || (r->chunks > 1 && !r->pos_major)
                         ? 0
                         : min64(r->nob, r->ob_g - (tile % r->tiles_g + 1) * r->nob);
    if (k_next > 0) {
        pf.base = (const char *)(w + nob * r->ws_ob);
        pf.bytes = k_next * r->ws_ob * (int64_t)sizeof(float);
    }
    /* the fused tail runs on the positions [done, at) computed since it last ran once they are
     * NC_PIECE or more (still in L1; one call per short row cost more than the tail itself) */
    int64_t done = p0;
    for (int64_t oy = p0 / c->ow; oy * c->ow < p1; oy++) {
        int64_t c0 = max64(p0 - oy * c->ow, 0), c1 = min64(p1 - oy * c->ow, c->ow);
        for (int64_t s0 = c0; s0 < c1; s0 += NC_PIECE) {
            int64_t s1 = min64(c1, s0 + NC_PIECE), at = oy * c->ow + s1;
            nc_row(r, x, w, o, r->bias ? r->bias + ob0 * r->bias_step : NULL, nob, oy, s0, s1, &pf);
            if (r->epi == NULL || (at - done < NC_PIECE && at < p1)) continue;
            for (int64_t j = 0; j < nob; j++)
                r->epi->apply(r->epi->ctx, ((n * r->ob + ob0 + j) * r->np + done) * r->b,
                              (at - done) * r->b);
            done = at;
        }
    }
}

/* ---- the call ------------------------------------------------------------------------------ */

int64_t kern_conv_layout_block(const char *s, const char *prefix, const char *suffix) {
    size_t n = strlen(prefix);
    if (strncmp(s, prefix, n) != 0) return 0;
    int64_t v = 0;
    const char *p = s + n;
    if (*p < '1' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > NC_MAX_BLOCK) return 0;
    }
    return strcmp(p, suffix) == 0 ? v : 0;
}

/* The call's geometry into r, or false when this kernel does not cover it. Blocked data
 * (NCHW{b}c, the result in the same layout; weights OIHW{b}i{b}o, or OIHW1i{b}o depthwise), or
 * plain data (NCHW, one group, the result in out_layout NCHW{b}c, weights OIHW1i{b}o: a first
 * layer of 3 channels, which 16-blocks do not divide). */
static bool nc_geometry(const KCall *kc, NcRun *r) {
    const DLTensor *x = k_arg(kc, 0), *wt = k_arg(kc, 1);
    int64_t odt = k_int(kc, "out_dtype");
    const char *dl = k_str(kc, "data_layout"), *ol = k_str(kc, "out_layout");
    memset(r, 0, sizeof *r);
    bool plain = strcmp(dl, "NCHW") == 0;
    int64_t b = r->b =
        plain ? kern_conv_layout_block(ol, "NCHW", "c") : kern_conv_layout_block(dl, "NCHW", "c");
    r->xb = plain ? 1 : b;
    if (kc->n_in != 2 || b == 0 || k_dtype(x) != RLY_DTYPE_F32 || k_dtype(wt) != RLY_DTYPE_F32 ||
        (odt >= 0 && odt != RLY_DTYPE_F32) || x->ndim != (plain ? 4 : 5) || wt->ndim != 6 ||
        (!plain && x->shape[4] != b) || (!plain && ol[0] && strcmp(ol, dl) != 0) ||
        !kern_conv_attrs(kc, &r->c))
        return false;
    Conv *c = &r->c;
    const char *kl = k_str(kc, "kernel_layout");
    int64_t g = k_int(kc, "groups");
    char want[48];
    snprintf(want, sizeof want, "OIHW%di%do", (int)b, (int)b);
    bool general = strcmp(kl, want) == 0;
    snprintf(want, sizeof want, "OIHW1i%do", (int)b);
    bool by_one = strcmp(kl, want) == 0; /* depthwise, or plain data */
    r->cb = x->shape[1];                 /* input blocks, or channels (plain) */
    c->batch = x->shape[0], c->cin = r->cb * r->xb, c->h = x->shape[2], c->w = x->shape[3];
    c->kh = wt->shape[2], c->kw = wt->shape[3];
    c->groups = g;
    r->ob = wt->shape[0];
    c->cout = r->ob * b;
    if (r->cb > ((int64_t)1 << 30) / b || r->ob > ((int64_t)1 << 30) / b) return false;
    if (plain) {
        if (!by_one || g != 1 || wt->shape[1] != c->cin || wt->shape[4] != 1 || wt->shape[5] != b)
            return false;
        c->cin_g = c->cin, c->cout_g = c->cout;
        r->icb_g = c->cin, r->ob_g = r->ob;
    } else if (by_one) { /* depthwise */
        if (g != c->cin || c->cout != c->cin || wt->shape[1] != 1 || wt->shape[4] != 1 ||
            wt->shape[5] != b)
            return false;
        r->dw = true;
        c->cin_g = c->cout_g = 1;
    } else {
        if (!general || c->cin % g != 0 || c->cout % g != 0 || wt->shape[4] != b ||
            wt->shape[5] != b)
            return false;
        c->cin_g = c->cin / g, c->cout_g = c->cout / g;
        if (c->cin_g % b != 0 || c->cout_g % b != 0 || wt->shape[1] * b != c->cin_g) return false;
        r->icb_g = c->cin_g / b, r->ob_g = c->cout_g / b;
    }
    if (!kern_conv_extents(kc, c)) return false;
    r->x = k_ptr(x);
    r->w = k_ptr(wt);
    return true;
}

int kern_conv_nchwc(KCall *kc) {
    NcRun r;
    if (!nc_geometry(kc, &r)) return 1;
    Conv *c = &r.c;
    int64_t b = r.b;
    int64_t shape[5] = {c->batch, r.ob, c->oh, c->ow, b};
    DLTensor *o = k_out_raw(kc, 0, RLY_DTYPE_F32, 5, shape); /* every path writes it all */
    if (o == NULL || k_numel(o) == 0) return o == NULL ? -1 : 0;
    r.out = k_ptr(o);
    r.np = c->oh * c->ow;
    r.os_ob = r.np * b;
    r.xs_cb = c->h * c->w * r.xb;
    if (c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->pt == 0 && c->pl == 0 &&
        c->pb == 0 && c->pr == 0) { /* flat: the plane is one row */
        c->w = c->ow = r.np;
        c->h = c->oh = 1;
    }
    r.xs_ky = c->dh * c->w * r.xb;
    r.xs_kx = c->dw * r.xb;
    r.pstep = c->sw * r.xb;
    int64_t taps = c->kh * c->kw;
    if (r.dw) {
        r.ws_kx = b, r.ws_ky = c->kw * b, r.ws_icb = taps * b, r.ws_ob = taps * b;
        r.nob = 1;
        r.tiles = r.tiles_g = r.ob;
    } else {
        r.ws_kx = r.xb * b, r.ws_ky = c->kw * r.xb * b, r.ws_icb = taps * r.xb * b;
        r.ws_ob = r.icb_g * r.ws_icb;
        r.tiles_g = cdiv(r.ob_g, 4);
        r.nob = cdiv(r.ob_g, r.tiles_g); /* 6 blocks: 3 + 3, not 4 + 2 */
        r.tiles = c->groups * r.tiles_g;
    }
    /* interior columns: ox * sw - pl >= 0 and ox * sw - pl + (kw - 1) dw <= w - 1 */
    r.ox_lo = min64(cdiv(c->pl, c->sw), c->ow);
    int64_t last = c->w - 1 - (c->kw - 1) * c->dw + c->pl;
    r.ox_hi = last < 0 ? r.ox_lo : max64(r.ox_lo, min64(c->ow, last / c->sw + 1));
    SupIsa isa = sup_isa();
    r.avx512 = isa == SUP_ISA_AVX512 && b == 16;
    r.avx2 = isa >= SUP_ISA_AVX2;
    r.dw_runs = r.avx512 && r.dw && c->kw == 3 && (c->sw == 1 || c->sw == 2) && c->dw == 1 &&
                c->pl <= 1 && c->pr <= 1 && c->w >= 1;
    /* Threads split the output positions when the weights weigh less than 4 times the input
     * (a line the other core wrote costs several of a shared weight line), and the output blocks
     * otherwise (each thread then reads all of the input, half of it written by the other core;
     * 64->384 at 14x14 on 2 threads: 56 us by blocks, 54.5 by positions). Splitting positions keeps
     * a layer's data on the core that wrote it: the pool gives task range i to thread i (pool.c),
     * so thread i computes the rows (or positions) of range i of every output block, from the same
     * rows of the input, which the layer before split alike. Measured on 2 threads, MobileNetV2's
     * 576-channel depthwise layer between two 1x1 convolutions: 50 us split by blocks, 39 us split
     * by rows (27 us alone). Otherwise: enough tasks for the threads, each worth NC_MIN_MACS. */
    r.chunks = 1;
    int threads = k_threads(kc);
    int64_t units = c->batch * r.tiles;
    double w_bytes = (double)r.ob * (double)(r.dw ? 1 : r.icb_g * r.xb) * (double)(taps * b);
    double x_bytes = (double)r.cb * (double)(c->h * c->w * r.xb);
    if (threads > 1 && c->batch == 1 && (r.dw || w_bytes < 4 * x_bytes) && r.np >= threads) {
        r.pos_major = true;
        r.chunks = threads;
    } else if (threads > 1 && units % threads != 0 && units < 8 * threads) {
        double macs =
            (double)r.np * (double)(r.nob * b) * (double)taps * (double)(r.dw ? 1 : r.icb_g * r.xb);
        int64_t by_macs = (int64_t)(macs / NC_MIN_MACS);
        r.chunks = max64(1, min64(min64(cdiv(8 * threads, units), by_macs), r.np));
    }
    r.chunk_rows =
        c->oh >= r.chunks; /* whole rows (the 7x7 depthwise: 27 us, 33 us cut in a row) */
    r.epi = NULL;
    r.clamp = K_CLAMP_NONE;
    r.bias = NULL;
    r.res = NULL;
    if (kc->epi != NULL && kc->epi->begin(kc->epi->ctx, o) == 0) {
        const KBias *kb = &kc->epi->bias;
        if (kc->epi->clamp != K_CLAMP_NONE && kc->epi->clamp_out != NULL) {
            /* a relu or clip: applied in registers, the tiles stored into its result */
            r.clamp = kc->epi->clamp, r.lo = kc->epi->lo, r.hi = kc->epi->hi;
            r.out = kc->epi->clamp_out;
        } else if (kb->b != NULL && (kb->mask == (1u << 1 | 1u << 4) || kb->mask == 1u << 4) &&
                   kc->epi->clamp_out != NULL) {
            /* a per-channel bias (varying along the blocks and their lanes: its values in channel
             * order), then maybe a relu or clip: in registers too. As the program's pass over each
             * piece of NC_PIECE positions, MobileNetV2 with nonzero biases took 7.7 ms where it
             * takes 5.0 with none (its bias spans two merged dims: the program's general path) */
            r.bias = kb->b, r.bias_first = kb->first;
            /* one output block: the bias varies along the lanes only (mask dim 4 alone; a
             * 16-channel projection of MobileNetV2 went through the program) */
            r.bias_step = kb->mask & 1u << 1 ? b : 0;
            r.res = kb->res, r.res_first = kb->res_first; /* same layout as the result */
            r.clamp = kb->clamp, r.lo = kb->lo, r.hi = kb->hi;
            r.out = kc->epi->clamp_out;
        } else {
            r.epi = kc->epi;
        }
        kc->epi_done = true;
    }
    r.fill = nc_clamp1(&r, 0.0f);
    k_parallel(kc, units * r.chunks, nc_task, &r);
    return 0;
}
