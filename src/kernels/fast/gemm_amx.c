/* gemm_amx.c - the float32 product (gemm.h) on Intel's AMX tiles, for large products at the amx
 * level (support.h, sup_amx).
 *
 * TDPBF16PS multiplies bf16 tiles into float32 accumulators at 16 times the float32 FMA rate of
 * AVX-512 on this kind of core. A float32 product runs on it by splitting every operand value
 * into three bf16 parts, x = x0 + x1 + x2, each the rounding (to nearest even) of what the parts
 * before it left: a float32 has 24 significant bits and each part takes at least 8, so the sum is
 * exact. Of the nine products a_i b_j the six with i + j <= 2 are kept; the three dropped are each
 * under 2^-24 |a b|. Each tile product sums its 32 terms a pair at a time into float32 (a bf16
 * times a bf16 is exact in float32), so C(i, j) is a float32 sum of 6 k exact terms, in a fixed
 * order: per 32-deep chunk of K in increasing order, a0 b0, a0 b1, a0 b2, a1 b1, a1 b0, a2 b0.
 * Measured error over sum |a b| is the AVX-512 product's (docs/kernels.md, "Float32 on AMX").
 *
 * TDPBF16PS treats bf16 denormals as zero and flushes denormal sums, and a value near FLT_MAX has
 * a part that rounds to infinity: a product runs here only when every nonzero operand value x has
 * 2^-50 <= |x| < 2^126 (then anything flushed is under 2^-26 of the term it belongs to), which
 * the split checks as it goes; otherwise (infinities, NaN, huge or tiny values) kern_sgemm_amx_run
 * returns false before C is touched and the AVX-512 product runs instead.
 *
 * Layout: the parts of A in tiles of 16 rows by 32 depths (row i, depth p at [i][p]), those of B
 * in tiles of 16 depth pairs by 16 columns (depths 2r and 2r + 1 of column j at [r][2j], [r][2j+1],
 * the pairs TDPBF16PS takes), the three parts of a tile one after another. A product is split whole
 * first (one fork: A by row groups, B by depth chunks; a constant B's parts are split once,
 * SGemm.b_amx, by kern_sgemm_prepare), then its C is computed in blocks of 32
 * rows by 32 columns (four accumulator tiles, the other four for A and B), over K blocks of 512
 * and column blocks of at most 256 (B's block, 768 KiB of parts, stays in L2 while the row blocks
 * pass over it). Each thread takes a range of 32-column units (and of rows when there are fewer
 * units than threads); each C element's sum is the same whatever the split. */
#include "kernels/fast/gemm.h"

#include <immintrin.h>
#include <string.h>

#define FAST_AMX                                                                                   \
    __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma,avx2,amx-tile,amx-bf16")))

#define PARTS 3
#define TILE_U16 512 /* bf16 in a tile: 16 rows of 64 bytes */
#define PART_U16 (PARTS * TILE_U16)
#define KB_BLOCK 16 /* 32-deep chunks in a K block (512) */
#define NC_BLOCK 256
/* smallest products taken (docs/kernels.md, "Float32 on AMX"): the split costs (m + n) k against
 * the product's m n k, and a product split over 2 threads forks twice; below these the AVX-512
 * tiles were as fast or faster on 1 or 2 threads */
#define AMX_MIN_M 128
#define AMX_MIN_N 256
#define AMX_MIN_MN 65536
#define AMX_MIN_K 64
#define AMX_MIN_MACS (1 << 26)
/* a constant B of a product from this size on is split once (SGemm.b_amx, kern_sgemm_prepare);
 * then only A is split per call, and every product with that B runs here */
#define AMX_SPLIT_B_MIN_M 32
#define AMX_SPLIT_B_MIN_MACS (1 << 24)
#define A_GROUPS_TASK 4      /* 16-row groups of A a split task takes */
#define B_CHUNKS_TASK 2      /* 32-deep chunks of B a split task takes */
#define GATHER_MAX (1 << 24) /* element strides the split gathers (31 of them fit in int32) */

static _Atomic uint64_t n_amx; /* products run here (kern_sgemm_amx_taken) */

uint64_t kern_sgemm_amx_taken(void) { return n_amx; }

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static FAST_AMX void split_b_chunk(const SGemm *g, const float *base, int64_t c, uint16_t *dst,
                                   bool dry, __mmask16 *bad);

typedef struct Dims {
    int64_t mb, kb, nb; /* 16-row groups (even), 32-deep chunks, 16-column groups (even) */
} Dims;

static Dims dims(const SGemm *g) {
    return (Dims){2 * cdiv(g->m, 32), cdiv(g->k, 32), 2 * cdiv(g->n, 32)};
}

/* the parts a call splits: A's, and B's unless split before */
static size_t parts_u16(const SGemm *g) {
    Dims d = dims(g);
    return (size_t)(d.mb * d.kb + (g->b_amx != NULL ? 0 : d.kb * d.nb)) * PART_U16;
}

bool kern_sgemm_amx_fits(const SGemm *g) {
    double mn = (double)g->m * (double)g->n;
    if (g->pack_b != NULL || g->k < AMX_MIN_K || !sup_amx()) return false;
    if (g->b_amx != NULL) return true; /* B split before (kern_sgemm_amx_presplit) */
    return g->m >= AMX_MIN_M && g->n >= AMX_MIN_N && mn >= AMX_MIN_MN &&
           mn * (double)g->k >= AMX_MIN_MACS;
}

size_t kern_sgemm_amx_scratch_bytes(const SGemm *g) {
    return kern_sgemm_amx_fits(g) ? parts_u16(g) * sizeof(uint16_t) : 0;
}

size_t kern_sgemm_amx_b_u16(int64_t k, int64_t n) {
    return (size_t)(cdiv(k, 32) * 2 * cdiv(n, 32)) * PART_U16;
}

bool kern_sgemm_amx_presplit(const SGemm *g) {
    double macs = (double)g->m * (double)g->n * (double)g->k;
    return g->pack_b == NULL && g->m >= AMX_SPLIT_B_MIN_M && g->n >= AMX_MIN_N &&
           g->k >= AMX_MIN_K && macs >= AMX_SPLIT_B_MIN_MACS && sup_amx();
}

bool kern_sgemm_amx_split_b(const float *b, int64_t rs, int64_t cs, int64_t k, int64_t n,
                            uint16_t *dst) {
    SGemm g = {.m = 1, .n = n, .k = k, .b_rs = rs, .b_cs = cs};
    __mmask16 bad = 0;
    for (int64_t c = 0; c < cdiv(k, 32); c++)
        split_b_chunk(&g, b, c, dst, false, &bad);
    return bad == 0;
}

/* ---- the split ---------------------------------------------------------------------------------
 */

#define LOW_BITS 0x26800000u  /* 2^-50 */
#define HIGH_BITS 0x7e800000u /* 2^126 */

/* Lane i: i * step (a gather's indices; |step| <= GATHER_MAX). */
static FAST_AMX inline __m512i lane_steps(int64_t step) {
    return _mm512_mullo_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32((int)step));
}

/* Collects into bad the lanes of x outside the range the product allows. */
static FAST_AMX inline void check16(__m512 x, __mmask16 *bad) {
    __m512i a = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    *bad |= _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)HIGH_BITS)) |
            _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(a, a), a,
                                         _mm512_set1_epi32((int)LOW_BITS));
}

/* The three parts of 16 floats, each a bf16 in the high half of its lane (low half zero). */
static FAST_AMX inline void split3(__m512 x, __m512i p[PARTS], __mmask16 *bad) {
    const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    const __m512i top = _mm512_set1_epi32((int)0xffff0000u);
    check16(x, bad);
    __m512i u = _mm512_castps_si512(x);
    for (int s = 0; s < PARTS; s++) {
        __m512i r = _mm512_add_epi32(u, half);
        r = _mm512_add_epi32(r, _mm512_and_si512(_mm512_srli_epi32(u, 16), one));
        p[s] = _mm512_and_si512(r, top);
        x = _mm512_sub_ps(x, _mm512_castsi512_ps(p[s])); /* exact: the bits below the part */
        u = _mm512_castps_si512(x);
    }
}

/* One 16 x 32 group of A (rows i0.., depths p0..) as three tiles at dst, from t (16 rows of 32
 * floats, zero past the operand). */
static FAST_AMX void split_a_tile(const float *t, uint16_t *dst, __mmask16 *bad) {
    for (int i = 0; i < 16; i++) {
        __m512i lo[PARTS], hi[PARTS];
        split3(_mm512_loadu_ps(t + i * 32), lo, bad);
        split3(_mm512_loadu_ps(t + i * 32 + 16), hi, bad);
        for (int s = 0; s < PARTS; s++) {
            uint16_t *d = dst + s * TILE_U16 + i * 32;
            _mm256_storeu_si256((__m256i *)d, _mm512_cvtepi32_epi16(_mm512_srli_epi32(lo[s], 16)));
            _mm256_storeu_si256((__m256i *)(d + 16),
                                _mm512_cvtepi32_epi16(_mm512_srli_epi32(hi[s], 16)));
        }
    }
}

/* A's 16-row group q (all depths) of product item base. */
static FAST_AMX void split_a_group(const SGemm *g, const float *base, int64_t q, uint16_t *dst,
                                   bool dry, __mmask16 *bad) {
    Dims d = dims(g);
    float t[16 * 32];
    int64_t i0 = q * 16, rows = min64(16, g->m - i0);
    for (int64_t c = 0; c < d.kb; c++) {
        int64_t p0 = c * 32, w = min64(32, g->k - p0);
        __mmask16 m0 = (__mmask16)(w >= 16 ? 0xffff : (1u << w) - 1);
        __mmask16 m1 = (__mmask16)(w > 16 ? (w >= 32 ? 0xffff : (1u << (w - 16)) - 1) : 0);
        if (rows <= 0) {
            memset(t, 0, sizeof t);
        } else if (g->a_packed == NULL && g->a_cs == 1) {
            for (int64_t i = 0; i < 16; i++) {
                const float *src = base + (i0 + i) * g->a_rs + p0;
                __m512 v0 = _mm512_setzero_ps(), v1 = _mm512_setzero_ps();
                if (i < rows) {
                    v0 = _mm512_maskz_loadu_ps(m0, src);
                    v1 = _mm512_maskz_loadu_ps(m1, src + 16);
                }
                _mm512_storeu_ps(t + i * 32, v0);
                _mm512_storeu_ps(t + i * 32 + 16, v1);
            }
        } else if (g->a_packed != NULL || (g->a_cs >= -GATHER_MAX && g->a_cs <= GATHER_MAX)) {
            /* each row's 32 depths are 12 floats apart in a packed panel, a_cs in place */
            int64_t step = g->a_packed != NULL ? SGEMM_MR : g->a_cs;
            __m512i idx = lane_steps(step);
            for (int64_t i = 0; i < 16; i++) {
                __m512 v0 = _mm512_setzero_ps(), v1 = _mm512_setzero_ps();
                if (i < rows) {
                    int64_t ii = i0 + i;
                    const float *src = g->a_packed != NULL
                                           ? base + (ii / SGEMM_MR) * g->k * SGEMM_MR +
                                                 p0 * SGEMM_MR + ii % SGEMM_MR
                                           : base + ii * g->a_rs + p0 * g->a_cs;
                    v0 = _mm512_mask_i32gather_ps(v0, m0, idx, src, 4);
                    v1 = _mm512_mask_i32gather_ps(v1, m1, idx, src + 16 * step, 4);
                }
                _mm512_storeu_ps(t + i * 32, v0);
                _mm512_storeu_ps(t + i * 32 + 16, v1);
            }
        } else {
            for (int64_t i = 0; i < 16; i++)
                for (int64_t p = 0; p < 32; p++) {
                    int64_t ii = i0 + i, pp = p0 + p;
                    t[i * 32 + p] = i < rows && p < w ? base[ii * g->a_rs + pp * g->a_cs] : 0.0f;
                }
        }
        if (dry)
            for (int v = 0; v < 32; v++)
                check16(_mm512_loadu_ps(t + 16 * v), bad);
        else
            split_a_tile(t, dst + (q * d.kb + c) * PART_U16, bad);
    }
}

/* B's 32-deep chunk c (all columns) of product item base. */
static FAST_AMX void split_b_chunk(const SGemm *g, const float *base, int64_t c, uint16_t *dst,
                                   bool dry, __mmask16 *bad) {
    Dims d = dims(g);
    const __m512i top = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i cols_idx =
        lane_steps(g->b_cs >= -GATHER_MAX && g->b_cs <= GATHER_MAX ? g->b_cs : 0);
    int64_t p0 = c * 32;
    for (int64_t j0 = 0; j0 < d.nb * 16; j0 += 16) {
        int64_t cols = min64(16, g->n - j0);
        __mmask16 mk = (__mmask16)(cols >= 16 ? 0xffff : cols > 0 ? (1u << cols) - 1 : 0);
        uint16_t *tile = dry ? NULL : dst + (c * d.nb + j0 / 16) * PART_U16;
        for (int r = 0; r < 16; r++) {
            __m512 v[2];
            for (int h = 0; h < 2; h++) {
                int64_t p = p0 + 2 * r + h;
                v[h] = _mm512_setzero_ps();
                if (p >= g->k || cols <= 0) continue;
                if (g->b_packed != NULL) {
                    const float *src = base + (j0 / SGEMM_NR) * g->k * SGEMM_NR + p * SGEMM_NR +
                                       j0 % SGEMM_NR; /* zero past n */
                    v[h] = _mm512_loadu_ps(src);
                } else if (g->b_cs == 1) {
                    v[h] = _mm512_maskz_loadu_ps(mk, base + p * g->b_rs + j0);
                } else if (g->b_cs >= -GATHER_MAX && g->b_cs <= GATHER_MAX) {
                    v[h] = _mm512_mask_i32gather_ps(v[h], mk, cols_idx,
                                                    base + p * g->b_rs + j0 * g->b_cs, 4);
                } else {
                    float t[16] = {0};
                    for (int64_t j = 0; j < cols; j++)
                        t[j] = base[p * g->b_rs + (j0 + j) * g->b_cs];
                    v[h] = _mm512_loadu_ps(t);
                }
            }
            if (dry) {
                check16(v[0], bad);
                check16(v[1], bad);
                continue;
            }
            __m512i x[PARTS], y[PARTS];
            split3(v[0], x, bad);
            split3(v[1], y, bad);
            for (int s = 0; s < PARTS; s++) /* depth 2r in each lane's low half, 2r + 1 high */
                _mm512_storeu_si512(
                    tile + s * TILE_U16 + r * 32,
                    _mm512_or_si512(_mm512_srli_epi32(x[s], 16), _mm512_and_si512(y[s], top)));
        }
    }
}

/* ---- the run
 * -------------------------------------------------------------------------------------
 */

typedef struct AmxRun {
    const SGemm *g;
    Dims d;
    int64_t t; /* the product */
    const float *a, *b;
    float *c;
    uint16_t *ap, *bp;
    int64_t a_tasks;
    bool dry; /* check the operands only (split_task) */
    _Atomic int bad;
    int64_t parts_n, parts_m; /* the compute tasks: C's 32-wide columns and rows split so */
} AmxRun;

static void split_task(void *ctx, int64_t task, int worker) {
    AmxRun *r = ctx;
    (void)worker;
    __mmask16 bad = 0;
    if (task < r->a_tasks) {
        int64_t q1 = min64(r->d.mb, (task + 1) * A_GROUPS_TASK);
        for (int64_t q = task * A_GROUPS_TASK; q < q1; q++)
            split_a_group(r->g, r->a, q, r->ap, r->dry, &bad);
    } else {
        task -= r->a_tasks;
        int64_t c1 = min64(r->d.kb, (task + 1) * B_CHUNKS_TASK);
        for (int64_t c = task * B_CHUNKS_TASK; c < c1; c++)
            split_b_chunk(r->g, r->b, c, r->bp, r->dry, &bad);
    }
    if (bad) r->bad = 1;
}

typedef struct TileCfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileCfg;

/* C's 32 x 32 block at rows i0, columns j0 over chunks [c0, c1): first: C starts at zero (the
 * product's first K block, not accumulated). */
static FAST_AMX void amx_block(const AmxRun *r, int64_t i0, int64_t j0, int64_t c0, int64_t c1,
                               bool first) {
    const SGemm *g = r->g;
    float *c = r->c + i0 * g->ldc + j0, buf[32 * 32];
    int64_t rows = min64(32, g->m - i0), cols = min64(32, g->n - j0);
    bool whole = rows == 32 && cols == 32;
    float *cp = whole ? c : buf;
    int64_t ld = whole ? g->ldc : 32;
    size_t stride = (size_t)ld * sizeof(float);
    if (first) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else {
        if (!whole) {
            memset(buf, 0, sizeof buf);
            for (int64_t i = 0; i < rows; i++)
                memcpy(buf + i * 32, c + i * g->ldc, (size_t)cols * sizeof(float));
        }
        _tile_loadd(0, cp, stride);
        _tile_loadd(1, cp + 16, stride);
        _tile_loadd(2, cp + 16 * ld, stride);
        _tile_loadd(3, cp + 16 * ld + 16, stride);
    }
    const uint16_t *a0 = r->ap + (i0 / 16 * r->d.kb + c0) * PART_U16;
    const uint16_t *a1 = a0 + r->d.kb * PART_U16; /* the next 16 rows */
    const uint16_t *b0 = r->bp + (c0 * r->d.nb + j0 / 16) * PART_U16;
    int64_t bstep = r->d.nb * PART_U16;
    for (int64_t q = c0; q < c1; q++, a0 += PART_U16, a1 += PART_U16, b0 += bstep) {
        const uint16_t *b1 = b0 + PART_U16; /* the next 16 columns */
#define AMX_A(s)                                                                                   \
    do {                                                                                           \
        _tile_loadd(4, a0 + (s)*TILE_U16, 64);                                                     \
        _tile_loadd(5, a1 + (s)*TILE_U16, 64);                                                     \
    } while (0)
#define AMX_B(s)                                                                                   \
    do {                                                                                           \
        _tile_loadd(6, b0 + (s)*TILE_U16, 64);                                                     \
        _tile_loadd(7, b1 + (s)*TILE_U16, 64);                                                     \
    } while (0)
#define AMX_DP()                                                                                   \
    do {                                                                                           \
        _tile_dpbf16ps(0, 4, 6);                                                                   \
        _tile_dpbf16ps(1, 4, 7);                                                                   \
        _tile_dpbf16ps(2, 5, 6);                                                                   \
        _tile_dpbf16ps(3, 5, 7);                                                                   \
    } while (0)
        AMX_A(0);
        AMX_B(0);
        AMX_DP(); /* a0 b0 */
        AMX_B(1);
        AMX_DP(); /* a0 b1 */
        AMX_B(2);
        AMX_DP(); /* a0 b2 */
        AMX_A(1);
        AMX_B(1);
        AMX_DP(); /* a1 b1 */
        AMX_B(0);
        AMX_DP(); /* a1 b0 */
        AMX_A(2);
        AMX_DP(); /* a2 b0, B's part 0 still loaded */
#undef AMX_A
#undef AMX_B
#undef AMX_DP
    }
    _tile_stored(0, cp, stride);
    _tile_stored(1, cp + 16, stride);
    _tile_stored(2, cp + 16 * ld, stride);
    _tile_stored(3, cp + 16 * ld + 16, stride);
    if (!whole)
        for (int64_t i = 0; i < rows; i++)
            memcpy(c + i * g->ldc, buf + i * 32, (size_t)cols * sizeof(float));
}

/* Task `task`'s columns (or rows): part p of units 32 wide split into `parts` nearly equal runs. */
static void part_range(int64_t units, int64_t parts, int64_t p, int64_t *u0, int64_t *u1) {
    *u0 = units * p / parts;
    *u1 = units * (p + 1) / parts;
}

static FAST_AMX void amx_task(void *ctx, int64_t task, int worker) {
    const AmxRun *r = ctx;
    const SGemm *g = r->g;
    (void)worker;
    TileCfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++)
        cfg.colsb[i] = 64, cfg.rows[i] = 16;
    _tile_loadconfig(&cfg);
    int64_t cu0, cu1, ru0, ru1;
    part_range(cdiv(g->n, 32), r->parts_n, task % r->parts_n, &cu0, &cu1);
    part_range(cdiv(g->m, 32), r->parts_m, task / r->parts_n, &ru0, &ru1);
    /* the task's columns in blocks of at most NC_BLOCK, nearly equal */
    int64_t blocks = cdiv((cu1 - cu0) * 32, NC_BLOCK);
    for (int64_t c0 = 0; c0 < r->d.kb; c0 += KB_BLOCK) {
        int64_t c1 = min64(r->d.kb, c0 + KB_BLOCK);
        bool first = c0 == 0 && !g->accumulate, last = c1 == r->d.kb;
        for (int64_t q = 0; q < blocks; q++) {
            int64_t bu0, bu1;
            part_range(cu1 - cu0, blocks, q, &bu0, &bu1);
            int64_t j0 = (cu0 + bu0) * 32, j1 = min64(g->n, (cu0 + bu1) * 32);
            for (int64_t rb = ru0; rb < ru1; rb++) {
                for (int64_t j = j0; j < j1; j += 32)
                    amx_block(r, rb * 32, j, c0, c1, first);
                if (last && g->epi != NULL) {
                    int64_t i0 = rb * 32;
                    g->epi(g->epi_ctx, r->t, r->c + i0 * g->ldc + j0, g->ldc, i0, j0,
                           min64(32, g->m - i0), j1 - j0);
                }
            }
        }
    }
    _tile_release();
}

/* Sets the operands and C of product t. */
static void item_ptrs(AmxRun *r, int64_t t) {
    const SGemm *g = r->g;
    int64_t ia = g->a_mod ? t % g->a_mod : t, ib = g->b_mod ? t % g->b_mod : t;
    r->t = t;
    r->a = g->a_packed != NULL ? g->a_packed + (size_t)ia * kern_sgemm_packed_a_floats(g->m, g->k)
                               : g->a + ia * g->a_bs;
    r->b = g->b_packed != NULL ? g->b_packed + (size_t)ib * kern_sgemm_packed_b_floats(g->k, g->n)
                               : g->b + ib * g->b_bs;
    if (g->b_amx != NULL)
        r->bp = (uint16_t *)g->b_amx + (size_t)ib * kern_sgemm_amx_b_u16(g->k, g->n);
    r->c = g->c + t * g->c_bs;
}

bool kern_sgemm_amx_run(const SGemm *g, SupPool *pool, void *scratch) {
    AmxRun r = {.g = g, .d = dims(g)};
    r.ap = scratch;
    r.bp = r.ap + (size_t)(r.d.mb * r.d.kb) * PART_U16;
    int n_threads = sup_pool_threads(pool);
    r.a_tasks = cdiv(r.d.mb, A_GROUPS_TASK);
    int64_t split_tasks = r.a_tasks + (g->b_amx != NULL ? 0 : cdiv(r.d.kb, B_CHUNKS_TASK));
    /* tasks: the threads split the columns, then the rows when there are fewer 32-column units */
    r.parts_n = min64(cdiv(g->n, 32), n_threads);
    r.parts_m = min64(cdiv(g->m, 32), cdiv(n_threads, r.parts_n));
    /* a batch is checked whole first (a single product's split checks it), so that a product
     * that cannot run here is found before any of C is written */
    r.dry = true;
    for (int64_t t = 0; g->batch > 1 && t < g->batch; t++) {
        item_ptrs(&r, t);
        sup_pool_run(pool, split_tasks, split_task, &r);
        if (r.bad) return false;
    }
    r.dry = false;
    for (int64_t t = 0; t < g->batch; t++) {
        item_ptrs(&r, t);
        sup_pool_run(pool, split_tasks, split_task, &r);
        if (r.bad) return false; /* a single product: nothing written yet */
        sup_pool_run(pool, r.parts_n * r.parts_m, amx_task, &r);
    }
    n_amx++;
    return true;
}
