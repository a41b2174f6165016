/* winograd.c - 3x3 stride-1 convolutions by Winograd F(4x4, 3x3) (conv.h), AVX-512 and AVX2.
 *
 * Each 4x4 output tile is A^T [ (G g G^T) . (B^T d B) ] A over the tile's 6x6 input patch d,
 * the matrices of Lavin & Gray (interpolation points 0, +-1, +-2, infinity), so the sum over
 * input channels becomes 36 independent products, one per position alpha of the 6x6 transformed
 * tile: M_alpha (cout x tiles) = U_alpha (cout x cin) V_alpha (cin x tiles). 36 * cin * cout
 * multiply-adds per tile instead of 16 * 9 * cin * cout: 4x fewer. Three passes:
 *   1. input transform: 16 tiles at a time (lanes = tiles: patch rows deinterleaved by 4; the
 *      tiles of one tile row, or on planes of under 12 tiles a row 16 consecutive tiles across
 *      rows), written straight into the packed-B panels of the 36 products (no copy in the GEMM);
 *   2. the 36 products (kern_sgemm_run, U packed once per executable with k_prepared);
 *   3. output transform: 16 tiles at a time, rows interleaved back into contiguous output rows
 *      (masked at the edges), then the fused tail.
 * Two forms run them. The blocked form (the default): each thread takes a range of whole tile
 * rows of the batch and runs the three passes per block of up to 128 tiles on its own V and M
 * blocks, sized for its L2; no pass waits for another thread, and M never leaves L2. The
 * three-pass form (where blocks would leave panels of the products mostly empty on some thread,
 * as a 13x13 image of 16 tiles on 2 threads, or where 32 tiles' V and M pass 1.5 MiB): each
 * pass over the whole batch, threaded on its own (per (image, input channel); over the 36
 * products; per (image, output channel)). AVX2 runs both forms on 8 tiles a vector (blk_in_y,
 * in_plane_y, out_vec_y), every input transform through the d arrays.
 * The weights are transformed in double and rounded once. Error: bounded in tests by
 * 1e-5 * sum |w||x| per output, as every GEMM-based kernel; measured ~1e-6 (docs/kernels.md),
 * 10x the im2col path's, from the transforms' coefficients (up to 8 in A^T, 5 in B^T). */
#include <immintrin.h>
#include <string.h>

#include "kernels/fast/conv.h"

#define WT 6                     /* transformed tile side */
#define WN 36                    /* positions alpha */
#define LANES 16                 /* tiles per vector */
#define FLAT_TILES 4096          /* in_plane's flat form: tiles per image, at most */
#define CHUNK_TILES 64           /* in_plane_y: tiles per chunk of tile rows, at most */
#define BMAX 128                 /* the blocked form: tiles per block, at most */
#define BLOCK_BYTES (768 * 1024) /* its V and M blocks: one core's L2 (1 MiB) less U's stream */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool kern_conv_winograd_fits(const Conv *c) {
    /* measured (bench_gemm): 2.2x faster than im2col at 56x56 and 28x28 with 64-128 channels,
     * 1.7x at 14x14 x 256; at 7x7 the 4 tiles of an image fill a quarter of the lanes */
    return (sup_isa() == SUP_ISA_AVX512 || sup_isa() == SUP_ISA_AVX2) && c->kh == 3 && c->kw == 3 &&
           c->sh == 1 && c->sw == 1 && c->dh == 1 && c->dw == 1 && c->groups == 1 && c->cin >= 16 &&
           c->cout >= 16 && c->oh >= 12 && c->ow >= 12 && c->h < (1 << 24) && c->w < (1 << 24);
}

/* ---- weights: U_alpha(oc, ic) = (G g G^T)[alpha], packed as A --------------------------------
 */

static const double G[WT][3] = {{1.0 / 4, 0, 0},
                                {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                {0, 0, 1}};

typedef struct WShape {
    int64_t cout, cin;
} WShape;

/* KPrepFill: the 36 transformed weight matrices, item alpha in kern_sgemm_pack_a's layout. */
static void fill_u(void *dst, const DLTensor *src, const void *arg) {
    const WShape *s = arg;
    const float *w = k_ptr(src);
    size_t item = kern_sgemm_packed_a_floats(s->cout, s->cin);
    float *u = dst;
    for (int64_t oc = 0; oc < s->cout; oc++)
        for (int64_t ic = 0; ic < s->cin; ic++) {
            const float *g = w + (oc * s->cin + ic) * 9;
            double t[WT][3]; /* G g */
            for (int i = 0; i < WT; i++)
                for (int j = 0; j < 3; j++)
                    t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
            size_t at =
                (size_t)((oc / SGEMM_MR) * s->cin * SGEMM_MR + ic * SGEMM_MR + oc % SGEMM_MR);
            for (int i = 0; i < WT; i++)
                for (int j = 0; j < WT; j++)
                    u[(size_t)(i * WT + j) * item + at] =
                        (float)(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
        }
}

/* ---- the run ----------------------------------------------------------------------------------
 */

typedef struct WRun {
    const Conv *c;
    int64_t th, tw, tiles; /* tile rows and columns per image; tiles of the batch */
    int64_t ph, pw;        /* the padded plane */
    float *planes;         /* thread i's padded plane at planes + i * thread_floats */
    size_t plane_floats, thread_floats;
    bool flat;       /* in_plane's narrow-plane form: 36 arrays of d_stride floats per thread */
    size_t d_stride; /* after the plane */
    float *v;        /* 36 packed-B items of cin x tiles */
    size_t v_item;
    float *m; /* 36 products, cout x tiles each */
    float *out;
    const KEpilogue *epi;
    ConvRegTail rt; /* epi applied by out_vec as it stores (then no conv_tail) */
    SGemm g;        /* the 36 products (U as A); the blocked form's per block */
    /* the blocked form: blocks of at most bmax tiles (a multiple of SGEMM_NR); worker w's V block,
     * M block, d arrays and product scratch at wbuf + w * w_floats
     */
    int64_t bmax;
    int n_ranges, n_parts; /* tasks: n_ranges ranges of tile rows x n_parts of output channels */
    size_t u_item;
    float *wbuf;
    size_t w_floats, vb_floats, mb_floats, db_stride, db_floats, gs_bytes;
    bool avx2; /* the AVX2 level: 8 tiles a vector (blk_in_y, blk_out_y; in_plane_y, out_plane_y) */
    int64_t chunk_rows; /* in_plane_y: tile rows a chunk (its d arrays) */
} WRun;

/* v[j] = (B^T d)[j] for the six rows (or columns) d, vectors of type V with intrinsics P##_*
 * (_mm512 or _mm256). */
#define BT6_(V, P, d, v)                                                                           \
    do {                                                                                           \
        V f4 = P##_set1_ps(4), f5 = P##_set1_ps(5), f2 = P##_set1_ps(2);                           \
        v[0] = P##_add_ps(P##_fmsub_ps(f4, d[0], P##_mul_ps(f5, d[2])), d[4]);                     \
        V s13 = P##_fnmadd_ps(f4, P##_add_ps(d[1], d[2]), P##_add_ps(d[3], d[4]));                 \
        V s24 = P##_fmadd_ps(f4, P##_sub_ps(d[1], d[2]), P##_sub_ps(d[4], d[3]));                  \
        v[1] = s13;                                                                                \
        v[2] = s24;                                                                                \
        V p = P##_sub_ps(d[4], d[2]), q = P##_mul_ps(f2, P##_sub_ps(d[3], d[1]));                  \
        v[3] = P##_add_ps(p, q);                                                                   \
        v[4] = P##_sub_ps(p, q);                                                                   \
        v[5] = P##_add_ps(P##_fmsub_ps(f4, d[1], P##_mul_ps(f5, d[3])), d[5]);                     \
    } while (0)
#define BT6(d, v) BT6_(__m512, _mm512, d, v)

/* d[k][l] = z[4 l + k] (k < 6, l < 16) for the 80 floats z of five vectors: deinterleaved by
 * four. */
static FAST_AVX512 inline void deinterleave_z(const __m512 z[5], __m512 d[WT]) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i next0 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    const __m512i next1 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
    __m512 ev0 = _mm512_permutex2var_ps(z[0], even, z[1]);
    __m512 od0 = _mm512_permutex2var_ps(z[0], odd, z[1]);
    __m512 ev1 = _mm512_permutex2var_ps(z[2], even, z[3]);
    __m512 od1 = _mm512_permutex2var_ps(z[2], odd, z[3]);
    d[0] = _mm512_permutex2var_ps(ev0, even, ev1);
    d[1] = _mm512_permutex2var_ps(od0, even, od1);
    d[2] = _mm512_permutex2var_ps(ev0, odd, ev1);
    d[3] = _mm512_permutex2var_ps(od0, odd, od1);
    d[4] = _mm512_permutex2var_ps(d[0], next0, z[4]);
    d[5] = _mm512_permutex2var_ps(d[1], next1, z[4]);
}

/* d[k][l] = row[4 l + k] (k < 6, l < 16): 80 floats deinterleaved by four. */
static FAST_AVX512 inline void deinterleave4(const float *row, __m512 d[WT]) {
    __m512 z[5];
    for (int q = 0; q < 5; q++)
        z[q] = _mm512_loadu_ps(row + 16 * q);
    deinterleave_z(z, d);
}

/* The column pass of B^T d B over e (the rows transformed) for the nl tiles j0 .. j0 + nl - 1 of
 * a product's columns, stored straight into the packed-B panels of the 36 products (items v_item
 * floats apart, depth cin) at input channel ic. */
static FAST_AVX512 inline void store_tiles(float *v, size_t v_item, int64_t cin, int64_t ic,
                                           int64_t j0, int nl, __m512 e[WT][WT]) {
    __mmask16 live = (__mmask16)((1u << nl) - 1);
    int64_t first = SGEMM_NR - j0 % SGEMM_NR; /* lanes in j0's panel */
    __mmask16 m0 = first >= nl ? live : (__mmask16)((1u << first) - 1);
    __mmask16 m1 = (__mmask16)(live & ~m0);
    float *p0 = v + (j0 / SGEMM_NR) * cin * SGEMM_NR + ic * SGEMM_NR + j0 % SGEMM_NR;
    float *p1 = p0 + cin * SGEMM_NR - SGEMM_NR; /* lane l of the next panel: p1[l] */
#pragma GCC unroll 6
    for (int j = 0; j < WT; j++) {
        __m512 col[WT], vv[WT];
#pragma GCC unroll 6
        for (int i = 0; i < WT; i++)
            col[i] = e[i][j];
        BT6(col, vv);
#pragma GCC unroll 6
        for (int i = 0; i < WT; i++) {
            size_t a = (size_t)(i * WT + j) * v_item;
            if (m0 == 0xffff)
                _mm512_storeu_ps(p0 + a, vv[i]);
            else
                _mm512_mask_storeu_ps(p0 + a, m0, vv[i]);
            if (m1) _mm512_mask_storeu_ps(p1 + a, m1, vv[i]);
        }
    }
}

/* The three-pass form's padded plane of (image n, input channel ic): only input positions are
 * written, the same for every plane, so the rest stays zero. */
static void fill_plane(const WRun *r, int64_t n, int64_t ic, float *plane) {
    const Conv *c = r->c;
    const float *x = c->x + (n * c->cin + ic) * c->h * c->w;
    for (int64_t ih = 0; ih < c->h && ih + c->pt < r->ph; ih++)
        memcpy(plane + (ih + c->pt) * r->pw + c->pl, x + ih * c->w,
               (size_t)min64(c->w, r->pw - c->pl) * sizeof(float));
}

/* One (image, input channel): the padded plane, then every tile's 36 transformed values, 16 tiles
 * a vector. Wide planes (flat false): 16 tiles of one tile row, each patch row 80 contiguous
 * floats deinterleaved. Narrow ones (flat: fewer than 12 tiles a row, which would leave lanes
 * idle): every patch row of every tile row deinterleaved once into 36 arrays d[i][k][tile] over
 * the image's row-major tile order, then 16 consecutive tiles a vector, spanning tile rows (a
 * 13x13 output: one vector for its 16 tiles where each of 4 tile rows took one). */
static FAST_AVX512 void in_plane(const WRun *r, int64_t n, int64_t ic, float *plane) {
    const Conv *c = r->c;
    fill_plane(r, n, ic, plane);
    __m512 e[WT][WT]; /* e[row][j]: the rows transformed */
    if (!r->flat) {
        for (int64_t ty = 0; ty < r->th; ty++)
            for (int64_t tx0 = 0; tx0 < r->tw; tx0 += LANES) {
#pragma GCC unroll 6
                for (int i = 0; i < WT; i++) {
                    __m512 d[WT]; /* the lanes past the row's tiles read the plane's slack */
                    deinterleave4(plane + (4 * ty + i) * r->pw + 4 * tx0, d);
                    BT6(d, e[i]);
                }
                store_tiles(r->v, r->v_item, c->cin, ic, n * r->th * r->tw + ty * r->tw + tx0,
                            (int)min64(LANES, r->tw - tx0), e);
            }
        return;
    }
    float *dk = plane + r->plane_floats; /* d[i][k] at dk + (i * 6 + k) * d_stride */
    for (int64_t ty = 0; ty < r->th; ty++)
#pragma GCC unroll 6
        for (int i = 0; i < WT; i++) {
            /* one vector (tw < 12): its lanes past the row's tiles land where the next tile row
             * (stored later) or the slack goes */
            __m512 d[WT];
            deinterleave4(plane + (4 * ty + i) * r->pw, d);
#pragma GCC unroll 6
            for (int k = 0; k < WT; k++)
                _mm512_storeu_ps(dk + (size_t)(i * WT + k) * r->d_stride + ty * r->tw, d[k]);
        }
    int64_t per_image = r->th * r->tw;
    for (int64_t t = 0; t < per_image; t += LANES) {
#pragma GCC unroll 6
        for (int i = 0; i < WT; i++) {
            __m512 d[WT];
#pragma GCC unroll 6
            for (int k = 0; k < WT; k++)
                d[k] = _mm512_loadu_ps(dk + (size_t)(i * WT + k) * r->d_stride + t);
            BT6(d, e[i]);
        }
        store_tiles(r->v, r->v_item, c->cin, ic, n * per_image + t,
                    (int)min64(LANES, per_image - t), e);
    }
}

/* Columns [cols, the end of their 16-float vector) of input channel ic's rows in the last B
 * panel of the 36 items (items v_item floats apart, depth cin): zero (V is not zero-filled). The
 * AVX-512 tile reads a panel's second vector only for columns past 16 (z_tile's W), so a panel of
 * at most 16 columns leaves its second vector unread: unwritten (1 thread, 64 -> 256 channels
 * at 13 x 13: zeroing it cost 4% of the call); the unstored lanes of the products still never
 * see garbage. */
static FAST_AVX512 void zero_cols(float *v, size_t v_item, int64_t cin, int64_t ic, int64_t cols) {
    int pad = (int)(cols % 16);
    if (pad == 0) return;
    float *row = v + (cols / SGEMM_NR) * cin * SGEMM_NR + ic * SGEMM_NR + cols % SGEMM_NR - pad;
    __mmask16 m = (__mmask16)(0xffffu << pad);
    for (int a = 0; a < WN; a++)
        _mm512_mask_storeu_ps(row + (size_t)a * v_item, m, _mm512_setzero_ps());
}

static FAST_AVX2 void in_plane_y(const WRun *r, int64_t n, int64_t ic, float *plane);
static FAST_AVX2 void zero_cols_y(float *v, size_t v_item, int64_t cin, int64_t ic, int64_t cols);

static void in_task(void *ctx, int64_t task, int worker) {
    const WRun *r = ctx;
    int64_t n = task / r->c->cin, ic = task % r->c->cin;
    float *plane = r->planes + (size_t)worker * r->thread_floats;
    if (r->avx2) {
        in_plane_y(r, n, ic, plane);
        if (n == r->c->batch - 1) zero_cols_y(r->v, r->v_item, r->c->cin, ic, r->tiles);
        return;
    }
    in_plane(r, n, ic, plane);
    if (n == r->c->batch - 1) zero_cols(r->v, r->v_item, r->c->cin, ic, r->tiles);
}

/* o[j] = (A^T m)[j] for the six rows (or columns) m (V and P as BT6_'s). */
#define AT6_(V, P, m, o)                                                                           \
    do {                                                                                           \
        V a12 = P##_add_ps(m[1], m[2]), s12 = P##_sub_ps(m[1], m[2]);                              \
        V a34 = P##_add_ps(m[3], m[4]), s34 = P##_sub_ps(m[3], m[4]);                              \
        o[0] = P##_add_ps(P##_add_ps(m[0], a12), a34);                                             \
        o[1] = P##_fmadd_ps(P##_set1_ps(2), s34, s12);                                             \
        o[2] = P##_fmadd_ps(P##_set1_ps(4), a34, a12);                                             \
        o[3] = P##_add_ps(P##_fmadd_ps(P##_set1_ps(8), s34, s12), m[5]);                           \
    } while (0)
#define AT6(m, o) AT6_(__m512, _mm512, m, o)

/* The runs of lanes of a vector of nl tiles t0 .. t0 + nl - 1 of the batch (row-major tile
 * order) in one tile row each: lanes [at[k], at[k + 1]) are tiles (ty[k], tx[k] ..) of output
 * channel oc's plane at o[k]. */
typedef struct VecRuns {
    int n, at[LANES + 1];
    int64_t ty[LANES], tx[LANES];
    float *o[LANES];
} VecRuns;
static inline void vec_runs(const WRun *r, int64_t oc, int64_t t0, int nl, VecRuns *v) {
    const Conv *c = r->c;
    int64_t row = t0 / r->tw, tx0 = t0 % r->tw; /* row: the tile row in the batch */
    v->n = 0;
    for (int l = 0; l < nl; v->n++) {
        v->at[v->n] = l, v->ty[v->n] = row % r->th, v->tx[v->n] = tx0;
        v->o[v->n] = r->out + (row / r->th * c->cout + oc) * c->oh * c->ow;
        int len = (int)min64(nl - l, r->tw - tx0);
        l += len, tx0 += len;
        if (tx0 == r->tw) tx0 = 0, row++;
    }
    v->at[v->n] = nl;
}

/* Where row a (of 4) of run k's tiles goes: floats [*f0, *f1) of the vector's interleaved row
 * (4 per tile) at the returned pointer + f (cropped at the plane's edge), or NULL below the
 * plane. */
static inline float *run_row(const WRun *r, const VecRuns *v, int k, int a, int64_t *f0,
                             int64_t *f1) {
    const Conv *c = r->c;
    int64_t y = 4 * v->ty[k] + a;
    if (y >= c->oh) return NULL;
    *f0 = 4 * v->at[k];
    *f1 = *f0 + min64(4 * (int64_t)(v->at[k + 1] - v->at[k]), c->ow - 4 * v->tx[k]);
    return v->o[k] + y * c->ow + 4 * v->tx[k] - *f0;
}

/* Output channel oc of the nl tiles t0 .. t0 + nl - 1 of the batch (row-major tile order, so a
 * vector may span tile rows and images: a 13x13 output has 4 tiles a row, and one vector serves 4
 * rows where it served one), from their 36 products at src + alpha * mstride. Each 4x4 result row
 * is interleaved into 64 output-ordered floats (four vectors) and stored by masked stores, one
 * per vector and run of lanes in one tile row. */
static FAST_AVX512 inline void out_vec(const WRun *r, int64_t oc, const float *src, size_t mstride,
                                       int64_t t0, int nl) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    VecRuns runs;
    vec_runs(r, oc, t0, nl, &runs);
    __mmask16 live = (__mmask16)((1u << nl) - 1);
    __m512 f[WT][4]; /* f[i][j]: rows of the 6x6 block transformed */
#pragma GCC unroll 6
    for (int i = 0; i < WT; i++) {
        __m512 mv[WT];
#pragma GCC unroll 6
        for (int j = 0; j < WT; j++) {
            const float *at_ = src + (size_t)(i * WT + j) * mstride;
            _mm_prefetch((const char *)(at_ + 32), _MM_HINT_T0);
            mv[j] = _mm512_maskz_loadu_ps(live, at_);
        }
        AT6(mv, f[i]);
    }
    /* then over columns: Y[a][b] = sum_i A^T[a][i] f[i][b] */
    __m512 Y[4][4];
#pragma GCC unroll 6
    for (int b = 0; b < 4; b++) {
        __m512 colb[WT], yb[4];
#pragma GCC unroll 6
        for (int i = 0; i < WT; i++)
            colb[i] = f[i][b];
        AT6(colb, yb);
#pragma GCC unroll 6
        for (int a = 0; a < 4; a++)
            Y[a][b] = yb[a];
    }
#pragma GCC unroll 6
    for (int a = 0; a < 4; a++) {
        /* rr[q][i]: float 16 q + i = 4 l + b of the row is Y[a][b][l] (interleave (Y0, Y2)
         * and (Y1, Y3), then the pairs) */
        __m512 p_lo = _mm512_permutex2var_ps(Y[a][0], lo, Y[a][2]);
        __m512 p_hi = _mm512_permutex2var_ps(Y[a][0], hi, Y[a][2]);
        __m512 q_lo = _mm512_permutex2var_ps(Y[a][1], lo, Y[a][3]);
        __m512 q_hi = _mm512_permutex2var_ps(Y[a][1], hi, Y[a][3]);
        __m512 rr[4] = {
            _mm512_permutex2var_ps(p_lo, lo, q_lo), _mm512_permutex2var_ps(p_lo, hi, q_lo),
            _mm512_permutex2var_ps(p_hi, lo, q_hi), _mm512_permutex2var_ps(p_hi, hi, q_hi)};
        /* the tail in registers: the bias of channel oc, then (with no residual, which is added
         * per store) the clamp */
        if (r->rt.on)
            for (int q = 0; q < 4; q++) {
                if (r->rt.bias != NULL) {
                    __m512 b = _mm512_set1_ps(r->rt.bias[oc]);
                    rr[q] = r->rt.first ? _mm512_add_ps(b, rr[q]) : _mm512_add_ps(rr[q], b);
                }
                if (r->rt.res == NULL) rr[q] = conv_clamp16(r->rt.clamp, r->rt.lo, r->rt.hi, rr[q]);
            }
        for (int k = 0; k < runs.n; k++) {
            int64_t f0, f1; /* floats [f0, f1) of the row go to dst + f */
            float *dst = run_row(r, &runs, k, a, &f0, &f1);
            if (dst == NULL) continue;
            for (int64_t q = f0 / 16; q * 16 < f1; q++) {
                int64_t b0 = f0 - 16 * q, b1 = f1 - 16 * q; /* lanes [b0, b1) of rr[q] */
                uint32_t m =
                    (b1 >= 16 ? 0xffffu : (1u << b1) - 1) & (b0 <= 0 ? 0xffffu : ~((1u << b0) - 1));
                __m512 v = rr[q];
                if (r->rt.on && r->rt.res != NULL) { /* the residual's lanes stored here */
                    __m512 t =
                        _mm512_maskz_loadu_ps((__mmask16)m, r->rt.res + (dst + 16 * q - r->out));
                    v = conv_clamp16(r->rt.clamp, r->rt.lo, r->rt.hi,
                                     r->rt.res_first ? _mm512_add_ps(t, v) : _mm512_add_ps(v, t));
                }
                _mm512_mask_storeu_ps(dst + 16 * q, (__mmask16)m, v);
            }
        }
    }
}

/* The fused tail (conv_bind_tail's, when not applied in registers) of output channel oc over the
 * batch's tile rows [row0, row1), one call per image. */
static void tail_rows(const WRun *r, int64_t oc, int64_t row0, int64_t row1) {
    const Conv *c = r->c;
    if (r->epi == NULL || r->rt.on) return;
    for (int64_t row = row0; row < row1;) {
        int64_t n = row / r->th, ty0 = row % r->th, ty1 = min64(r->th, ty0 + row1 - row);
        int64_t y0 = 4 * ty0, y1 = min64(c->oh, 4 * ty1);
        conv_tail(r->epi, r->out, ((n * c->cout + oc) * c->oh + y0) * c->ow, (y1 - y0) * c->ow);
        row += ty1 - ty0;
    }
}

/* One (image, output channel) of the three-pass form: 16 tiles at a time, then the fused tail. */
static FAST_AVX512 void out_plane(const WRun *r, int64_t n, int64_t oc) {
    int64_t per_image = r->th * r->tw;
    const float *src = r->m + oc * WN * r->tiles + n * per_image; /* M[oc][alpha][tile] */
    for (int64_t t0 = 0; t0 < per_image; t0 += LANES)
        out_vec(r, oc, src + t0, (size_t)r->tiles, n * per_image + t0,
                (int)min64(LANES, per_image - t0));
    tail_rows(r, oc, n * r->th, (n + 1) * r->th);
}

static FAST_AVX2 void out_plane_y(const WRun *r, int64_t n, int64_t oc);

static void out_task(void *ctx, int64_t task, int worker) {
    (void)worker;
    const WRun *r = ctx;
    (r->avx2 ? out_plane_y : out_plane)(r, task / r->c->cout, task % r->c->cout);
}

/* ---- the blocked form -------------------------------------------------------------------------
 * The batch's tile rows are split into one range per thread; each task runs the three passes per
 * block of at most bmax consecutive tiles (row-major over the batch, so a block spans tile rows
 * and images) on its worker's own V and M blocks, sized to stay in its L2 (one core's 1 MiB):
 * the output transform then reads M from L2 (at 16->64 channels on 55x55 the whole M is 1.8 MiB,
 * and its transform cost as much as the products), and no pass waits for the other thread. U
 * is shared. The input transform reads the input itself (masked loads; no padded plane), and the
 * fused tail runs on the tile rows a block completes (a task's rows are whole tile rows). */

/* 16 tiles (or fewer) of one tile row, consecutive in a block: where their patches start and
 * which of their 80 floats per patch row lie inside the input's row. */
typedef struct InGroup {
    const float *x;    /* channel 0 of the image */
    int64_t iy0, ix0;  /* the input position of the first tile's patch (may be outside) */
    int64_t local;     /* the first tile's column in the block's products */
    int nl;            /* tiles */
    __mmask16 mask[5]; /* floats 16 q + l of a patch row: input columns ix0 + 16 q + l */
} InGroup;

/* A float pointer off floats past p, computed without pointer arithmetic: a masked load through
 * it reads only its live lanes, which lie inside the input (the dead ones may lie outside it). */
static inline const float *off_ptr(const float *p, int64_t off) {
    return (const float *)((uintptr_t)p + (uintptr_t)(off * (int64_t)sizeof(float)));
}

/* The block's input transform: for each input channel, every patch row of every group read and
 * deinterleaved once into 36 arrays d[i][k][tile] over the block's tiles (dk, db_stride floats
 * apart), then 16 consecutive tiles a vector, spanning tile rows, into the packed-B panels of
 * the 36 products at v. */
/* GCC at -O3 takes e[][] of the wide path for maybe-uninitialized: every row i is set by BT6 when
 * `wide` before store_tiles reads it (a false positive; -O2 does not warn) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
static FAST_AVX512 void blk_in(const WRun *r, int64_t t0, int nb, float *v, float *dk) {
    const Conv *c = r->c;
    int64_t per_image = r->th * r->tw, plane = c->h * c->w;
    size_t v_item = kern_sgemm_packed_b_floats(c->cin, nb);
    InGroup gr[BMAX];
    int n_gr = 0;
    /* wide planes (12+ tiles a row) take a group's rows straight to the transform; narrower ones
     * go through the d arrays, so that a vector takes 16 tiles across tile rows */
    bool wide = r->tw >= 12;
    for (int64_t t = t0; t < t0 + nb;) {
        int64_t n = t / per_image, ty = t % per_image / r->tw, tx = t % r->tw;
        InGroup *g = &gr[n_gr++];
        g->x = c->x + n * c->cin * plane;
        g->iy0 = 4 * ty - c->pt, g->ix0 = 4 * tx - c->pl, g->local = t - t0;
        for (int q = 0; q < 5; q++) { /* lanes [l0, l1) of vector q are inside the row */
            int64_t l0 = -g->ix0 - 16 * q, l1 = c->w - g->ix0 - 16 * q;
            l0 = l0 < 0 ? 0 : l0, l1 = l1 > 16 ? 16 : l1;
            g->mask[q] = l0 >= l1 ? 0 : (__mmask16)(((1u << (l1 - l0)) - 1) << l0);
        }
        g->nl = (int)min64(min64(LANES, r->tw - tx), t0 + nb - t);
        t += g->nl;
    }
    for (int64_t ic = 0; ic < c->cin; ic++) {
        for (int k = 0; k < n_gr; k++) {
            const InGroup *g = &gr[k];
            const float *xc = g->x + ic * plane;
            __m512 e[WT][WT]; /* wide planes: e[row][j], the rows transformed */
#pragma GCC unroll 6
            for (int i = 0; i < WT; i++) {
                __m512 d[WT];
                int64_t iy = g->iy0 + i;
                if (iy < 0 || iy >= c->h) {
#pragma GCC unroll 6
                    for (int q = 0; q < WT; q++)
                        d[q] = _mm512_setzero_ps();
                } else {
                    __m512 z[5];
#pragma GCC unroll 6
                    for (int q = 0; q < 5; q++) {
                        if (g->mask[q] == 0xffff)
                            z[q] = _mm512_loadu_ps(xc + iy * c->w + g->ix0 + 16 * q);
                        else if (g->mask[q] == 0)
                            z[q] = _mm512_setzero_ps();
                        else
                            z[q] = _mm512_maskz_loadu_ps(g->mask[q],
                                                         off_ptr(xc, iy * c->w + g->ix0 + 16 * q));
                    }
                    deinterleave_z(z, d);
                }
                if (wide) {
                    BT6(d, e[i]);
                    continue;
                }
                /* lanes past the group's tiles land where the next group (stored later) or the
                 * slack goes */
#pragma GCC unroll 6
                for (int q = 0; q < WT; q++)
                    _mm512_storeu_ps(dk + (size_t)(i * WT + q) * r->db_stride + g->local, d[q]);
            }
            if (wide) store_tiles(v, v_item, c->cin, ic, g->local, g->nl, e);
        }
        for (int64_t j = 0; j < nb && !wide; j += LANES) {
            __m512 e[WT][WT];
#pragma GCC unroll 6
            for (int i = 0; i < WT; i++) {
                __m512 d[WT];
#pragma GCC unroll 6
                for (int k = 0; k < WT; k++)
                    d[k] = _mm512_loadu_ps(dk + (size_t)(i * WT + k) * r->db_stride + j);
                BT6(d, e[i]);
            }
            store_tiles(v, v_item, c->cin, ic, j, (int)min64(LANES, nb - j), e);
        }
        zero_cols(v, v_item, c->cin, ic, nb);
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* The block's output transform for output channels [oc0, oc1) from their products at m
 * (M[oc - oc0][alpha][column], nb columns), and the fused tail of the batch's tile rows
 * [row0, row1) (complete once this block is). */
static FAST_AVX512 void blk_out(const WRun *r, int64_t t0, int nb, const float *m, int64_t oc0,
                                int64_t oc1, int64_t row0, int64_t row1) {
    for (int64_t oc = oc0; oc < oc1; oc++) {
        const float *src = m + (oc - oc0) * WN * nb;
        for (int j = 0; j < nb; j += LANES)
            out_vec(r, oc, src + j, (size_t)nb, t0 + j, (int)min64(LANES, nb - j));
        tail_rows(r, oc, row0, row1);
    }
}

/* ---- AVX2: both forms, 8 tiles a vector -------------------------------------------------------
 * The same passes as at AVX-512, on 8-float vectors: every input transform goes through the d
 * arrays (so a vector's 8 tiles may span tile rows; in the blocked form vectors start at
 * multiples of 8 of the block's columns and never straddle a B panel, in the three passes they
 * may), 128-bit-lane shuffles instead of two-source permutes, and masks as integer vectors. */
#define YL 8 /* tiles per vector */

static FAST_AVX2 inline __m256i lanes_y(int64_t l0, int64_t l1) { /* lanes [l0, l1) of 8 */
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    l0 = l0 < 0 ? 0 : l0 > 8 ? 8 : l0, l1 = l1 < 0 ? 0 : l1 > 8 ? 8 : l1;
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)l0), lane),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32((int)l1), lane));
}

/* d[k][l] = z[4 l + k] (k < 6, l < 8) for the 40 floats z of five vectors: tile l's four floats
 * are lanes 4 (l % 2) .. of z[l / 2]; the halves of z[q] and z[q + 2] gathered per tile pair,
 * then a 4 x 4 transpose within each 128-bit lane. */
static FAST_AVX2 inline void deinterleave_y(const __m256 z[5], __m256 d[WT]) {
    __m256 u0 = _mm256_permute2f128_ps(z[0], z[2], 0x20),
           u1 = _mm256_permute2f128_ps(z[0], z[2], 0x31);
    __m256 u2 = _mm256_permute2f128_ps(z[1], z[3], 0x20),
           u3 = _mm256_permute2f128_ps(z[1], z[3], 0x31);
    __m256 t0 = _mm256_unpacklo_ps(u0, u1), t1 = _mm256_unpackhi_ps(u0, u1);
    __m256 t2 = _mm256_unpacklo_ps(u2, u3), t3 = _mm256_unpackhi_ps(u2, u3);
    d[0] = _mm256_shuffle_ps(t0, t2, 0x44);
    d[1] = _mm256_shuffle_ps(t0, t2, 0xee);
    d[2] = _mm256_shuffle_ps(t1, t3, 0x44);
    d[3] = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256i next = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0);
    d[4] = _mm256_blend_ps(_mm256_permutevar8x32_ps(d[0], next),
                           _mm256_permutevar8x32_ps(z[4], _mm256_setzero_si256()), 0x80);
    d[5] = _mm256_blend_ps(_mm256_permutevar8x32_ps(d[1], next),
                           _mm256_permutevar8x32_ps(z[4], _mm256_set1_epi32(1)), 0x80);
}

/* Zero the lanes [cols, the end of their 8-float vector) of input channel ic's rows in the last
 * B panel of the 36 items: the AVX2 tiles read a panel's columns up to a multiple of 8. */
static FAST_AVX2 void zero_cols_y(float *v, size_t v_item, int64_t cin, int64_t ic, int64_t cols) {
    int pad = (int)(cols % YL);
    if (pad == 0) return;
    float *row = v + (cols / SGEMM_NR) * cin * SGEMM_NR + ic * SGEMM_NR + cols % SGEMM_NR - pad;
    __m256i m = lanes_y(pad, YL);
    for (int a = 0; a < WN; a++)
        _mm256_maskstore_ps(row + (size_t)a * v_item, m, _mm256_setzero_ps());
}

/* The transform of `tiles` tiles from the d arrays at dk (ds floats apart), 8 a vector, into
 * input channel ic's rows of the 36 items of V at v (v_item floats apart, depth cin) at columns
 * col0 ..: a vector's lanes [0, first) lie in its first column's panel, the rest in the next one
 * (lane l at p1 + l). */
static FAST_AVX2 inline void d_to_v_y(const float *dk, size_t ds, int64_t tiles, float *v,
                                      size_t v_item, int64_t cin, int64_t ic, int64_t col0) {
    for (int64_t t = 0; t < tiles; t += YL) {
        __m256 e[WT][WT];
#pragma GCC unroll 6
        for (int i = 0; i < WT; i++) {
            __m256 d[WT];
#pragma GCC unroll 6
            for (int k = 0; k < WT; k++)
                d[k] = _mm256_loadu_ps(dk + (size_t)(i * WT + k) * ds + t);
            BT6_(__m256, _mm256, d, e[i]);
        }
        int64_t j = col0 + t, nl = min64(YL, tiles - t);
        int64_t first = min64(nl, SGEMM_NR - j % SGEMM_NR);
        __m256i m0 = lanes_y(0, first), m1 = lanes_y(first, nl);
        float *p0 = v + (j / SGEMM_NR) * cin * SGEMM_NR + ic * SGEMM_NR + j % SGEMM_NR;
        float *p1 = p0 + cin * SGEMM_NR - SGEMM_NR;
#pragma GCC unroll 6
        for (int k = 0; k < WT; k++) {
            __m256 col[WT], vv[WT];
#pragma GCC unroll 6
            for (int i = 0; i < WT; i++)
                col[i] = e[i][k];
            BT6_(__m256, _mm256, col, vv);
#pragma GCC unroll 6
            for (int i = 0; i < WT; i++) {
                size_t a = (size_t)(i * WT + k) * v_item;
                if (first == YL) {
                    _mm256_storeu_ps(p0 + a, vv[i]);
                    continue;
                }
                _mm256_maskstore_ps(p0 + a, m0, vv[i]);
                if (first < nl) _mm256_maskstore_ps(p1 + a, m1, vv[i]);
            }
        }
    }
}

/* The block's input transform at AVX2 (blk_in's): each group of up to 8 tiles of one tile row
 * (patch rows of 40 floats, masked at the input's edges) deinterleaved into the d arrays, then
 * 8 consecutive tiles a vector into the 36 products' packed-B panels. */
static FAST_AVX2 void blk_in_y(const WRun *r, int64_t t0, int nb, float *v, float *dk) {
    const Conv *c = r->c;
    int64_t per_image = r->th * r->tw, plane = c->h * c->w;
    size_t v_item = kern_sgemm_packed_b_floats(c->cin, nb);
    for (int64_t ic = 0; ic < c->cin; ic++) {
        for (int64_t t = t0; t < t0 + nb;) {
            int64_t n = t / per_image, ty = t % per_image / r->tw, tx = t % r->tw;
            int64_t iy0 = 4 * ty - c->pt, ix0 = 4 * tx - c->pl, local = t - t0;
            int nl = (int)min64(min64(YL, r->tw - tx), t0 + nb - t);
            const float *xc = c->x + (n * c->cin + ic) * plane;
            bool inside = ix0 >= 0 && ix0 + 5 * YL <= c->w;
#pragma GCC unroll 6
            for (int i = 0; i < WT; i++) {
                __m256 d[WT];
                int64_t iy = iy0 + i;
                if (iy < 0 || iy >= c->h) {
#pragma GCC unroll 6
                    for (int q = 0; q < WT; q++)
                        d[q] = _mm256_setzero_ps();
                } else {
                    __m256 z[5];
#pragma GCC unroll 6
                    for (int q = 0; q < 5; q++) {
                        int64_t at = iy * c->w + ix0 + YL * q; /* input column ix0 + 8 q */
                        z[q] =
                            inside
                                ? _mm256_loadu_ps(xc + at)
                                : _mm256_maskload_ps(off_ptr(xc, at),
                                                     lanes_y(-ix0 - YL * q, c->w - ix0 - YL * q));
                    }
                    deinterleave_y(z, d);
                }
                /* lanes past the group's tiles land in the next group's slots (stored later) or
                 * the slack */
#pragma GCC unroll 6
                for (int q = 0; q < WT; q++)
                    _mm256_storeu_ps(dk + (size_t)(i * WT + q) * r->db_stride + local, d[q]);
            }
            t += nl;
        }
        /* from column 0 of the block: vectors at multiples of 8, so none straddles panels */
        d_to_v_y(dk, r->db_stride, nb, v, v_item, c->cin, ic, 0);
        zero_cols_y(v, v_item, c->cin, ic, nb);
    }
}

static FAST_AVX2 inline __m256 clamp_y(uint8_t clamp, float lo, float hi, __m256 v) {
    if (clamp == K_CLAMP_RELU) return _mm256_max_ps(v, _mm256_setzero_ps());
    if (clamp == K_CLAMP_CLIP)
        return _mm256_min_ps(_mm256_set1_ps(hi), _mm256_max_ps(_mm256_set1_ps(lo), v));
    return v;
}

/* out_vec at AVX2: output channel oc of the nl (<= 8) tiles t0 .. of the batch from their 36
 * products at src + alpha * mstride; each 4x4 result row interleaved into 32 output-ordered
 * floats (a 4 x 4 transpose within 128-bit lanes, then the lanes' halves paired) and stored per
 * run of lanes in one tile row. */
static FAST_AVX2 void out_vec_y(const WRun *r, int64_t oc, const float *src, size_t mstride,
                                int64_t t0, int nl) {
    VecRuns runs;
    vec_runs(r, oc, t0, nl, &runs);
    __m256i live = lanes_y(0, nl);
    __m256 f[WT][4];
#pragma GCC unroll 6
    for (int i = 0; i < WT; i++) {
        __m256 mv[WT];
#pragma GCC unroll 6
        for (int j = 0; j < WT; j++)
            mv[j] = _mm256_maskload_ps(src + (size_t)(i * WT + j) * mstride, live);
        AT6_(__m256, _mm256, mv, f[i]);
    }
    __m256 Y[4][4];
#pragma GCC unroll 6
    for (int b = 0; b < 4; b++) {
        __m256 colb[WT], yb[4];
#pragma GCC unroll 6
        for (int i = 0; i < WT; i++)
            colb[i] = f[i][b];
        AT6_(__m256, _mm256, colb, yb);
#pragma GCC unroll 6
        for (int a = 0; a < 4; a++)
            Y[a][b] = yb[a];
    }
#pragma GCC unroll 6
    for (int a = 0; a < 4; a++) {
        /* u_p: tiles p and p + 4, their four values each; rr[q]: tiles 2q and 2q + 1 */
        __m256 t0_ = _mm256_unpacklo_ps(Y[a][0], Y[a][1]),
               t1_ = _mm256_unpackhi_ps(Y[a][0], Y[a][1]);
        __m256 t2_ = _mm256_unpacklo_ps(Y[a][2], Y[a][3]),
               t3_ = _mm256_unpackhi_ps(Y[a][2], Y[a][3]);
        __m256 u0 = _mm256_shuffle_ps(t0_, t2_, 0x44), u1 = _mm256_shuffle_ps(t0_, t2_, 0xee);
        __m256 u2 = _mm256_shuffle_ps(t1_, t3_, 0x44), u3 = _mm256_shuffle_ps(t1_, t3_, 0xee);
        __m256 rr[4] = {_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u2, u3, 0x20),
                        _mm256_permute2f128_ps(u0, u1, 0x31), _mm256_permute2f128_ps(u2, u3, 0x31)};
        if (r->rt.on) {
#pragma GCC unroll 6
            for (int q = 0; q < 4; q++) {
                if (r->rt.bias != NULL) {
                    __m256 b = _mm256_set1_ps(r->rt.bias[oc]);
                    rr[q] = r->rt.first ? _mm256_add_ps(b, rr[q]) : _mm256_add_ps(rr[q], b);
                }
                if (r->rt.res == NULL) rr[q] = clamp_y(r->rt.clamp, r->rt.lo, r->rt.hi, rr[q]);
            }
        }
        for (int k = 0; k < runs.n; k++) {
            int64_t f0, f1;
            float *dst = run_row(r, &runs, k, a, &f0, &f1);
            if (dst == NULL) continue;
            for (int64_t q = f0 / YL; q * YL < f1; q++) {
                __m256i m = lanes_y(f0 - YL * q, f1 - YL * q);
                __m256 v_ = rr[q];
                if (r->rt.on && r->rt.res != NULL) {
                    __m256 t = _mm256_maskload_ps(r->rt.res + (dst + YL * q - r->out), m);
                    v_ = clamp_y(r->rt.clamp, r->rt.lo, r->rt.hi,
                                 r->rt.res_first ? _mm256_add_ps(t, v_) : _mm256_add_ps(v_, t));
                }
                _mm256_maskstore_ps(dst + YL * q, m, v_);
            }
        }
    }
}

static FAST_AVX2 void blk_out_y(const WRun *r, int64_t t0, int nb, const float *m, int64_t oc0,
                                int64_t oc1, int64_t row0, int64_t row1) {
    for (int64_t oc = oc0; oc < oc1; oc++) {
        const float *src = m + (oc - oc0) * WN * nb;
        for (int j = 0; j < nb; j += YL)
            out_vec_y(r, oc, src + j, (size_t)nb, t0 + j, (int)min64(YL, nb - j));
        tail_rows(r, oc, row0, row1);
    }
}

/* The three-pass form at AVX2, tile rows [ty0, ty1) of one (image, input channel) from its
 * padded plane: in_plane's narrow form for every plane (each patch row deinterleaved once into
 * the d arrays over the chunk's tiles, then 8 consecutive tiles a vector, across tile rows) into
 * V's panels at the chunk's columns; a vector's lanes may straddle two panels. */
static FAST_AVX2 void in_chunk_y(const WRun *r, int64_t n, int64_t ic, const float *plane,
                                 float *dk, int64_t ty0, int64_t ty1) {
    const Conv *c = r->c;
    for (int64_t ty = ty0; ty < ty1; ty++)
        for (int64_t tx0 = 0; tx0 < r->tw; tx0 += YL) {
            int64_t local = (ty - ty0) * r->tw + tx0;
#pragma GCC unroll 6
            for (int i = 0; i < WT; i++) {
                /* 40 floats from the patch row (the plane's slack past the last row); lanes past
                 * the row's tiles land where later groups or the slack go */
                const float *row = plane + (4 * ty + i) * r->pw + 4 * tx0;
                __m256 z[5], d[WT];
#pragma GCC unroll 6
                for (int q = 0; q < 5; q++)
                    z[q] = _mm256_loadu_ps(row + YL * q);
                deinterleave_y(z, d);
#pragma GCC unroll 6
                for (int k = 0; k < WT; k++)
                    _mm256_storeu_ps(dk + (size_t)(i * WT + k) * r->d_stride + local, d[k]);
            }
        }
    d_to_v_y(dk, r->d_stride, (ty1 - ty0) * r->tw, r->v, r->v_item, c->cin, ic,
             n * r->th * r->tw + ty0 * r->tw);
}

/* One (image, input channel) of the three-pass form at AVX2: the padded plane, then chunks of
 * chunk_rows tile rows (their d arrays stay within d_stride). */
static FAST_AVX2 void in_plane_y(const WRun *r, int64_t n, int64_t ic, float *plane) {
    fill_plane(r, n, ic, plane);
    for (int64_t ty0 = 0; ty0 < r->th; ty0 += r->chunk_rows)
        in_chunk_y(r, n, ic, plane, plane + r->plane_floats, ty0,
                   min64(r->th, ty0 + r->chunk_rows));
}

/* One (image, output channel) of the three-pass form at AVX2: 8 tiles at a time, then the
 * fused tail. */
static FAST_AVX2 void out_plane_y(const WRun *r, int64_t n, int64_t oc) {
    int64_t per_image = r->th * r->tw;
    const float *src = r->m + oc * WN * r->tiles + n * per_image; /* M[oc][alpha][tile] */
    for (int64_t t0 = 0; t0 < per_image; t0 += YL)
        out_vec_y(r, oc, src + t0, (size_t)r->tiles, n * per_image + t0,
                  (int)min64(YL, per_image - t0));
    tail_rows(r, oc, n * r->th, (n + 1) * r->th);
}

/* Tiles per block for a task of len tiles: blocks of equal width in whole panels, at most bmax. */
static int64_t blk_width(const WRun *r, int64_t len) {
    int64_t blocks = cdiv(len, r->bmax);
    return min64(r->bmax, cdiv(cdiv(len, blocks), SGEMM_NR) * SGEMM_NR);
}

/* Range k's tile rows [row0, row1) of the batch (of n_ranges). */
static void task_rows(const WRun *r, int64_t k, int64_t *row0, int64_t *row1) {
    int64_t rows = r->c->batch * r->th;
    *row0 = rows * k / r->n_ranges;
    *row1 = rows * (k + 1) / r->n_ranges;
}

/* Part k's output channels [oc0, oc1) (of n_parts): whole A panels but for the last. */
static void task_channels(const WRun *r, int64_t k, int64_t *oc0, int64_t *oc1) {
    int64_t panels = cdiv(r->c->cout, SGEMM_MR);
    *oc0 = panels * k / r->n_parts * SGEMM_MR;
    *oc1 = min64(r->c->cout, panels * (k + 1) / r->n_parts * SGEMM_MR);
}

/* Task (range, part): the tile rows of the range, the output channels of the part. */
static void blk_task(void *ctx, int64_t task, int worker) {
    const WRun *r = ctx;
    const Conv *c = r->c;
    int64_t row0, row1, oc0, oc1;
    task_rows(r, task / r->n_parts, &row0, &row1);
    task_channels(r, task % r->n_parts, &oc0, &oc1);
    float *v = r->wbuf + (size_t)worker * r->w_floats, *m = v + r->vb_floats;
    float *dk = m + r->mb_floats;
    void *gs = r->gs_bytes ? dk + r->db_floats : NULL;
    int64_t t1 = row1 * r->tw, width = blk_width(r, t1 - row0 * r->tw);
    SGemm g = r->g;
    g.b_packed = v;
    g.c = m;
    for (int64_t t0 = row0 * r->tw; t0 < t1; t0 += width) {
        int nb = (int)min64(width, t1 - t0);
        if (r->avx2)
            blk_in_y(r, t0, nb, v, dk);
        else
            blk_in(r, t0, nb, v, dk);
        g.n = nb, g.ldc = WN * nb, g.c_bs = nb; /* M[oc - oc0][alpha][column] */
        if (r->n_parts == 1) {
            kern_sgemm_run(&g, NULL, gs);
        } else { /* rows [oc0, oc1) of each U item: one product per alpha (items u_item apart) */
            SGemm ga = g;
            ga.m = oc1 - oc0, ga.batch = 1;
            ga.a_stream = true; /* each call a part of one U item: U as a whole from memory */
            size_t v_item = kern_sgemm_packed_b_floats(c->cin, nb);
            for (int a = 0; a < WN; a++) {
                ga.a_packed = g.a_packed + a * r->u_item + oc0 * c->cin;
                ga.b_packed = v + a * v_item;
                ga.c = m + a * nb;
                kern_sgemm_run(&ga, NULL, gs);
            }
        }
        int64_t done = (t0 + nb) / r->tw; /* tile rows before it are complete */
        if (r->avx2)
            blk_out_y(r, t0, nb, m, oc0, oc1, row0, done);
        else
            blk_out(r, t0, nb, m, oc0, oc1, row0, done);
        row0 = done;
    }
}

/* count floats of scratch, not zero-filled: NULL with the call's error when too large. */
static float *raw_floats(KCall *kc, int64_t count) {
    if (count > SUP_DIM_MAX / 8) {
        k_error(kc, "out of memory (scratch of %lld floats)", (long long)count);
        return NULL;
    }
    return k_scratch_raw(kc, (size_t)count * sizeof(float));
}

/* Whether the blocked form takes r (r->bmax set), and its tasks: never where V and M of 32 tiles
 * pass twice the L2 budget. Each of nt threads takes a range of tile rows when the blocks' partial
 * panels cost at most a quarter more products than the three passes' (which split all 36
 * products' panels evenly over the threads: a 13x13 image of 16 tiles split over 2 threads would
 * make each compute the whole panel); else, on 2+ threads, all the tiles and a part of the output
 * channels (2+ A panels each), repeating the input transform, where there are no more input
 * channels than output ones. */
static bool blk_takes(WRun *r, int nt) {
    const Conv *c = r->c;
    if (WN * (c->cin + c->cout) * (int64_t)sizeof(float) * SGEMM_NR > 2 * BLOCK_BYTES) return false;
    r->n_ranges = (int)min64(nt, c->batch * r->th), r->n_parts = 1;
    int64_t worst = 0;
    for (int64_t k = 0; k < r->n_ranges; k++) {
        int64_t row0, row1;
        task_rows(r, k, &row0, &row1);
        int64_t len = (row1 - row0) * r->tw, width = blk_width(r, len);
        int64_t panels = len / width * (width / SGEMM_NR) + cdiv(len % width, SGEMM_NR);
        worst = worst > panels ? worst : panels;
    }
    if (4 * worst * nt <= 5 * cdiv(r->tiles, SGEMM_NR)) return true;
    if (nt < 2 || cdiv(c->cout, SGEMM_MR) < 2 * nt || c->cin > c->cout) return false;
    r->n_ranges = 1, r->n_parts = nt;
    return true;
}

static _Atomic uint64_t n_avx2;
uint64_t kern_conv_winograd_avx2_taken(void) { return n_avx2; }

int kern_conv_winograd(KCall *kc, const Conv *c, const DLTensor *o) {
    WRun r = {.c = c, .th = cdiv(c->oh, 4), .tw = cdiv(c->ow, 4), .out = k_ptr(o)};
    r.tiles = c->batch * r.th * r.tw;
    WShape ws = {c->cout, c->cin};
    size_t u_item = kern_sgemm_packed_a_floats(c->cout, c->cin);
    /* key: "WINO" and the shape; the weight's address is the cache's other key */
    uint64_t key = 0x57494e4f00000000ull ^ ((uint64_t)c->cout << 20) ^ (uint64_t)c->cin;
    const float *u =
        k_prepared(kc, kc->arg_start[1], key, WN * u_item * sizeof(float), fill_u, &ws);
    r.g = (SGemm){.m = c->cout,
                  .n = r.tiles,
                  .k = c->cin,
                  .batch = WN,
                  .a = k_ptr(k_arg(kc, 1)),
                  .a_packed = u,
                  /* M_alpha(oc, tile) at m[(oc * 36 + alpha) * tiles + tile]: an output channel's
                   * 36 rows are one stream for the output transform (36 streams 4.5 MiB apart at
                   * 64 channels of 56x56 made it a third slower) */
                  .ldc = WN * r.tiles,
                  .c_bs = r.tiles};
    if (u == NULL) {
        float *scratch_u = k_scratch_n(kc, (int64_t)(WN * u_item), sizeof(float));
        if (scratch_u == NULL) return -1;
        fill_u(scratch_u, k_arg(kc, 1), &ws);
        r.g.a_packed = scratch_u;
    }
    int nt = k_threads(kc);
    int64_t tile_bytes = WN * (c->cin + c->cout) * (int64_t)sizeof(float);
    r.bmax = min64(BMAX, BLOCK_BYTES / tile_bytes / SGEMM_NR * SGEMM_NR);
    if (r.bmax < SGEMM_NR) r.bmax = SGEMM_NR;
    r.u_item = u_item;
    r.avx2 = sup_isa() == SUP_ISA_AVX2;
    if (r.avx2) n_avx2++;
    if (blk_takes(&r, nt)) {
        /* worker w's buffers: V block, M block, d arrays, the product's scratch (none: both
         * operands are packed, but sized as gemm.h asks) */
        r.vb_floats = WN * kern_sgemm_packed_b_floats(c->cin, r.bmax);
        r.mb_floats = (size_t)(WN * c->cout * r.bmax);
        r.db_stride = (size_t)(r.bmax + LANES);
        r.db_floats = WN * r.db_stride;
        SGemm g = r.g;
        g.n = r.bmax, g.b_packed = g.a_packed;
        r.gs_bytes = kern_sgemm_scratch_bytes(&g, 1);
        r.w_floats =
            (r.vb_floats + r.mb_floats + r.db_floats + r.gs_bytes / sizeof(float) + 15) / 16 * 16;
        r.wbuf = raw_floats(kc, sup_dim_mul_sat((int64_t)r.w_floats, nt));
        if (r.wbuf == NULL) return -1;
        r.epi = conv_bind_tail(kc, o, &r.out);
        r.rt = conv_reg_tail(r.epi, o);
        k_parallel(kc, (int64_t)r.n_ranges * r.n_parts, blk_task, &r);
        kc->epi_done = r.epi != NULL;
        return 0;
    }
    r.ph = 4 * r.th + 2;
    r.pw = 4 * r.tw + 2;
    /* slack: a tile group's rows are read 80 floats at a time */
    r.plane_floats = (size_t)((r.ph * r.pw + 80 + 15) / 16 * 16);
    /* the flat form deinterleaves one vector (16 tiles) per patch row of a tile row: tw <= 16 */
    r.flat = r.tw < 12 && r.th * r.tw <= FLAT_TILES;
    r.d_stride = r.flat ? (size_t)((r.th * r.tw + 2 * LANES - 1) / LANES * LANES) : 0;
    if (r.avx2) { /* in_plane_y: d arrays over chunks of whole tile rows, at most CHUNK_TILES */
        r.chunk_rows = r.tw >= CHUNK_TILES ? 1 : min64(r.th, CHUNK_TILES / r.tw);
        r.d_stride = (size_t)((r.chunk_rows * r.tw + 2 * LANES - 1) / LANES * LANES);
    }
    r.thread_floats = r.plane_floats + WN * r.d_stride;
    r.v_item = kern_sgemm_packed_b_floats(c->cin, r.tiles);
    /* V and M: every float written before it is read (in_task zeroes V's padding columns, the
     * products write all of M), so no zero fill (it cost 3% of SqueezeNet); the planes' padding
     * must be zero, and in_plane writes only their input positions */
    r.v = raw_floats(kc, sup_dim_mul_sat(WN, (int64_t)r.v_item));
    r.m = r.v ? raw_floats(kc, sup_dim_mul_sat(WN, sup_dim_mul_sat(c->cout, r.tiles))) : NULL;
    r.planes = r.m ? k_scratch_n(kc, (int64_t)r.thread_floats * nt, sizeof(float)) : NULL;
    if (r.planes == NULL) return -1;
    SGemm g = r.g;
    g.b_packed = r.v;
    g.c = r.m;
    size_t bytes = kern_sgemm_scratch_bytes(&g, nt);
    void *gs = bytes ? k_scratch_raw(kc, bytes) : NULL; /* kern_sgemm_run ignores its contents */
    if (bytes && gs == NULL) return -1;
    r.epi = conv_bind_tail(kc, o, &r.out);
    r.rt = conv_reg_tail(r.epi, o);
    k_parallel(kc, c->batch * c->cin, in_task, &r);
    kern_sgemm_run(&g, kc->pool, gs);
    k_parallel(kc, c->batch * c->cout, out_task, &r);
    kc->epi_done = r.epi != NULL;
    return 0;
}
