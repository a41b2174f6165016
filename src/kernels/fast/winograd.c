/* winograd.c - 3x3 stride-1 convolutions by Winograd F(4x4, 3x3) (conv.h), AVX-512.
 *
 * Each 4x4 output tile is A^T [ (G g G^T) . (B^T d B) ] A over the tile's 6x6 input patch d,
 * the matrices of Lavin & Gray (interpolation points 0, +-1, +-2, infinity), so the sum over
 * input channels becomes 36 independent products, one per position alpha of the 6x6 transformed
 * tile: M_alpha (cout x tiles) = U_alpha (cout x cin) V_alpha (cin x tiles). 36 * cin * cout
 * multiply-adds per tile instead of 16 * 9 * cin * cout: 4x fewer. Three passes, each threaded:
 *   1. input transform: per (image, input channel), the zero-padded plane, then 16 tiles of a
 *      tile row at a time (lanes = tiles: patch rows deinterleaved by 4), written straight into
 *      the packed-B panels of the 36 products (no copy in the GEMM);
 *   2. the 36 products (kern_sgemm_run, U packed once per executable with k_prepared);
 *   3. output transform: per (image, output channel), 16 tiles at a time, rows interleaved back
 *      into contiguous output rows (masked at the edges), then the fused tail per plane.
 * The weights are transformed in double and rounded once. Error: bounded in tests by
 * 1e-5 * sum |w||x| per output, as every GEMM-based kernel; measured ~1e-6 (docs/kernels.md),
 * 10x the im2col path's, from the transforms' coefficients (up to 8 in A^T, 5 in B^T). */
#include <immintrin.h>
#include <string.h>

#include "kernels/fast/conv.h"

#define WT 6     /* transformed tile side */
#define WN 36    /* positions alpha */
#define LANES 16 /* tiles per vector */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool kern_conv_winograd_fits(const Conv *c) {
    /* measured (bench_gemm): 2.2x faster than im2col at 56x56 and 28x28 with 64-128 channels,
     * 1.7x at 14x14 x 256; at 7x7 the 4 tiles of an image fill a quarter of the lanes */
    return sup_isa() == SUP_ISA_AVX512 && c->kh == 3 && c->kw == 3 && c->sh == 1 && c->sw == 1 &&
           c->dh == 1 && c->dw == 1 && c->groups == 1 && c->cin >= 16 && c->cout >= 16 &&
           c->oh >= 12 && c->ow >= 12 && c->h < (1 << 24) && c->w < (1 << 24);
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
    float *planes;         /* thread i's padded plane at planes + i * plane_floats */
    size_t plane_floats;
    float *v; /* 36 packed-B items of cin x tiles */
    size_t v_item;
    float *m; /* 36 products, cout x tiles each */
    float *out;
    const KEpilogue *epi;
} WRun;

/* v[j] = (B^T d)[j] for the six rows (or columns) d. */
#define BT6(d, v)                                                                                  \
    do {                                                                                           \
        __m512 f4 = _mm512_set1_ps(4), f5 = _mm512_set1_ps(5), f2 = _mm512_set1_ps(2);             \
        v[0] = _mm512_add_ps(_mm512_fmsub_ps(f4, d[0], _mm512_mul_ps(f5, d[2])), d[4]);            \
        __m512 s13 = _mm512_fnmadd_ps(f4, _mm512_add_ps(d[1], d[2]), _mm512_add_ps(d[3], d[4]));   \
        __m512 s24 = _mm512_fmadd_ps(f4, _mm512_sub_ps(d[1], d[2]), _mm512_sub_ps(d[4], d[3]));    \
        v[1] = s13;                                                                                \
        v[2] = s24;                                                                                \
        __m512 p = _mm512_sub_ps(d[4], d[2]), q = _mm512_mul_ps(f2, _mm512_sub_ps(d[3], d[1]));    \
        v[3] = _mm512_add_ps(p, q);                                                                \
        v[4] = _mm512_sub_ps(p, q);                                                                \
        v[5] = _mm512_add_ps(_mm512_fmsub_ps(f4, d[1], _mm512_mul_ps(f5, d[3])), d[5]);            \
    } while (0)

/* One (image, input channel): the padded plane, then every tile's 36 transformed values. */
static FAST_AVX512 void in_plane(const WRun *r, int64_t n, int64_t ic, float *plane) {
    const Conv *c = r->c;
    const float *x = c->x + (n * c->cin + ic) * c->h * c->w;
    /* only input positions are written, the same for every plane: the rest stays zero */
    for (int64_t ih = 0; ih < c->h && ih + c->pt < r->ph; ih++)
        memcpy(plane + (ih + c->pt) * r->pw + c->pl, x + ih * c->w,
               (size_t)min64(c->w, r->pw - c->pl) * sizeof(float));
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i next0 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    const __m512i next1 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
    int64_t cin = c->cin;
    for (int64_t ty = 0; ty < r->th; ty++)
        for (int64_t tx0 = 0; tx0 < r->tw; tx0 += LANES) {
            int nl = (int)min64(LANES, r->tw - tx0);
            __mmask16 live = (__mmask16)((1u << nl) - 1);
            __m512 e[WT][WT]; /* e[row][j]: the rows transformed */
            for (int i = 0; i < WT; i++) {
                /* d[k][l] = row[4 l + k]: 80 floats deinterleaved by four (the lanes past nl
                 * read the plane's slack and are never stored) */
                const float *row = plane + (4 * ty + i) * r->pw + 4 * tx0;
                __m512 z0 = _mm512_loadu_ps(row), z1 = _mm512_loadu_ps(row + 16);
                __m512 z2 = _mm512_loadu_ps(row + 32), z3 = _mm512_loadu_ps(row + 48);
                __m512 z4 = _mm512_loadu_ps(row + 64);
                __m512 ev0 = _mm512_permutex2var_ps(z0, even, z1);
                __m512 od0 = _mm512_permutex2var_ps(z0, odd, z1);
                __m512 ev1 = _mm512_permutex2var_ps(z2, even, z3);
                __m512 od1 = _mm512_permutex2var_ps(z2, odd, z3);
                __m512 d[WT];
                d[0] = _mm512_permutex2var_ps(ev0, even, ev1);
                d[1] = _mm512_permutex2var_ps(od0, even, od1);
                d[2] = _mm512_permutex2var_ps(ev0, odd, ev1);
                d[3] = _mm512_permutex2var_ps(od0, odd, od1);
                d[4] = _mm512_permutex2var_ps(d[0], next0, z4);
                d[5] = _mm512_permutex2var_ps(d[1], next1, z4);
                BT6(d, e[i]);
            }
            int64_t j0 = (n * r->th + ty) * r->tw + tx0; /* the first tile's index */
            int64_t first = SGEMM_NR - j0 % SGEMM_NR;    /* lanes in j0's panel */
            __mmask16 m0 = first >= nl ? live : (__mmask16)((1u << first) - 1);
            __mmask16 m1 = (__mmask16)(live & ~m0);
            float *p0 = r->v + (j0 / SGEMM_NR) * cin * SGEMM_NR + ic * SGEMM_NR + j0 % SGEMM_NR;
            float *p1 = p0 + cin * SGEMM_NR - SGEMM_NR; /* lane l of the next panel: p1[l] */
            for (int j = 0; j < WT; j++) {
                __m512 col[WT], v[WT];
                for (int i = 0; i < WT; i++)
                    col[i] = e[i][j];
                BT6(col, v);
                for (int i = 0; i < WT; i++) {
                    size_t a = (size_t)(i * WT + j) * r->v_item;
                    _mm512_mask_storeu_ps(p0 + a, m0, v[i]);
                    if (m1) _mm512_mask_storeu_ps(p1 + a, m1, v[i]);
                }
            }
        }
}

static void in_task(void *ctx, int64_t task, int worker) {
    const WRun *r = ctx;
    in_plane(r, task / r->c->cin, task % r->c->cin, r->planes + (size_t)worker * r->plane_floats);
}

/* o[j] = (A^T m)[j] for the six rows (or columns) m. */
#define AT6(m, o)                                                                                  \
    do {                                                                                           \
        __m512 a12 = _mm512_add_ps(m[1], m[2]), s12 = _mm512_sub_ps(m[1], m[2]);                   \
        __m512 a34 = _mm512_add_ps(m[3], m[4]), s34 = _mm512_sub_ps(m[3], m[4]);                   \
        o[0] = _mm512_add_ps(_mm512_add_ps(m[0], a12), a34);                                       \
        o[1] = _mm512_fmadd_ps(_mm512_set1_ps(2), s34, s12);                                       \
        o[2] = _mm512_fmadd_ps(_mm512_set1_ps(4), a34, a12);                                       \
        o[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8), s34, s12), m[5]);                  \
    } while (0)

/* One (image, output channel): 16 tiles at a time, consecutive in the image's row-major tile
 * order, so a vector may span tile rows (a 13x13 output has 4 tiles a row: one vector serves 4
 * rows where it served one). Each 4x4 result row is interleaved into 64 output-ordered floats
 * (four vectors) and stored by masked stores, one per vector and run of lanes in one tile row. */
static FAST_AVX512 void out_plane(const WRun *r, int64_t n, int64_t oc) {
    const Conv *c = r->c;
    float *o = r->out + (n * c->cout + oc) * c->oh * c->ow;
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    size_t mstride = (size_t)r->tiles; /* M[oc][alpha][tile] */
    int64_t per_image = r->th * r->tw;
    int64_t ty0 = 0, tx0 = 0; /* the first tile of the vector */
    for (int64_t t0 = 0; t0 < per_image; t0 += LANES) {
        int nl = (int)min64(LANES, per_image - t0);
        /* runs of lanes in one tile row: lanes [at[k], at[k + 1]) are tiles (ty[k], tx[k] ..) */
        int at[LANES + 1], n_runs = 0;
        int64_t rty[LANES], rtx[LANES];
        for (int l = 0; l < nl; n_runs++) {
            at[n_runs] = l, rty[n_runs] = ty0, rtx[n_runs] = tx0;
            int len = (int)min64(nl - l, r->tw - tx0);
            l += len, tx0 += len;
            if (tx0 == r->tw) tx0 = 0, ty0++;
        }
        at[n_runs] = nl;
        __mmask16 live = (__mmask16)((1u << nl) - 1);
        const float *src = r->m + oc * WN * r->tiles + n * per_image + t0;
        __m512 f[WT][4]; /* f[i][j]: rows of the 6x6 block transformed */
        for (int i = 0; i < WT; i++) {
            __m512 mv[WT];
            for (int j = 0; j < WT; j++)
                mv[j] = _mm512_maskz_loadu_ps(live, src + (size_t)(i * WT + j) * mstride);
            AT6(mv, f[i]);
        }
        /* then over columns: Y[a][b] = sum_i A^T[a][i] f[i][b] */
        __m512 Y[4][4];
        for (int b = 0; b < 4; b++) {
            __m512 colb[WT], yb[4];
            for (int i = 0; i < WT; i++)
                colb[i] = f[i][b];
            AT6(colb, yb);
            for (int a = 0; a < 4; a++)
                Y[a][b] = yb[a];
        }
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
            for (int k = 0; k < n_runs; k++) {
                int64_t y = 4 * rty[k] + a;
                if (y >= c->oh) continue;
                /* floats [f0, f1) of the row go to dst[f - f0], cropped at the plane's edge */
                int64_t f0 = 4 * at[k],
                        f1 = f0 + min64(4 * (int64_t)(at[k + 1] - at[k]), c->ow - 4 * rtx[k]);
                float *dst = o + y * c->ow + 4 * rtx[k] - f0; /* float f at dst + f */
                for (int64_t q = f0 / 16; q * 16 < f1; q++) {
                    int64_t b0 = f0 - 16 * q, b1 = f1 - 16 * q; /* lanes [b0, b1) of rr[q] */
                    uint32_t m = (b1 >= 16 ? 0xffffu : (1u << b1) - 1) &
                                 (b0 <= 0 ? 0xffffu : ~((1u << b0) - 1));
                    _mm512_mask_storeu_ps(dst + 16 * q, (__mmask16)m, rr[q]);
                }
            }
        }
    }
    if (r->epi != NULL)
        r->epi->apply(r->epi->ctx, (n * c->cout + oc) * c->oh * c->ow, c->oh * c->ow);
}

static void out_task(void *ctx, int64_t task, int worker) {
    (void)worker;
    const WRun *r = ctx;
    out_plane(r, task / r->c->cout, task % r->c->cout);
}

int kern_conv_winograd(KCall *kc, const Conv *c, const DLTensor *o) {
    WRun r = {.c = c, .th = cdiv(c->oh, 4), .tw = cdiv(c->ow, 4), .out = k_ptr(o)};
    r.tiles = c->batch * r.th * r.tw;
    r.ph = 4 * r.th + 2;
    r.pw = 4 * r.tw + 2;
    /* slack: a tile group's rows are read 80 floats at a time */
    r.plane_floats = (size_t)((r.ph * r.pw + 80 + 15) / 16 * 16);
    r.v_item = kern_sgemm_packed_b_floats(c->cin, r.tiles);
    WShape ws = {c->cout, c->cin};
    size_t u_item = kern_sgemm_packed_a_floats(c->cout, c->cin);
    /* key: "WINO" and the shape; the weight's address is the cache's other key */
    uint64_t key = 0x57494e4f00000000ull ^ ((uint64_t)c->cout << 20) ^ (uint64_t)c->cin;
    const float *u =
        k_prepared(kc, kc->arg_start[1], key, WN * u_item * sizeof(float), fill_u, &ws);
    SGemm g = {.m = c->cout,
               .n = r.tiles,
               .k = c->cin,
               .batch = WN,
               .a = k_ptr(k_arg(kc, 1)),
               .a_packed = u,
               /* M_alpha(oc, tile) at m[(oc * 36 + alpha) * tiles + tile]: an output channel's 36
                * rows are one stream for the output transform (36 streams 4.5 MiB apart at 64
                * channels of 56x56 made it a third slower) */
               .ldc = WN * r.tiles,
               .c_bs = r.tiles};
    float *scratch_u = NULL;
    if (u == NULL) {
        if ((scratch_u = k_scratch_n(kc, (int64_t)(WN * u_item), sizeof(float))) == NULL) return -1;
        fill_u(scratch_u, k_arg(kc, 1), &ws);
        g.a_packed = scratch_u;
    }
    r.v = k_scratch_n(kc, (int64_t)(WN * r.v_item), sizeof(float));
    r.m = r.v ? k_scratch_n(kc, WN * c->cout * r.tiles, sizeof(float)) : NULL;
    r.planes = r.m ? k_scratch_n(kc, (int64_t)r.plane_floats * k_threads(kc), sizeof(float)) : NULL;
    if (r.planes == NULL) return -1;
    g.b_packed = r.v;
    g.c = r.m;
    size_t bytes = kern_sgemm_scratch_bytes(&g, k_threads(kc));
    void *gs = bytes ? k_scratch_raw(kc, bytes) : NULL; /* kern_sgemm_run ignores its contents */
    if (bytes && gs == NULL) return -1;
    if (kc->epi != NULL && kc->epi->begin(kc->epi->ctx, o) == 0) r.epi = kc->epi;
    k_parallel(kc, c->batch * c->cin, in_task, &r);
    kern_sgemm_run(&g, kc->pool, gs);
    k_parallel(kc, c->batch * c->cout, out_task, &r);
    kc->epi_done = r.epi != NULL;
    return 0;
}
