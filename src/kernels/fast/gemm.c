/* gemm.c - the packed float32 matrix product (gemm.h) and the table of the GEMM-based fast
 * kernels (kern_fast_gemm: matmul.c, conv.c).
 *
 * The GotoBLAS/BLIS arrangement with C vectorized along its rows (columns j are the vector
 * lanes): A is read in place when row-major (unless rows 4 KiB apart would share L1 sets), else
 * packed into panels of SGEMM_MR rows (once per executable for a constant through k_prepared;
 * per call whole before the products, or sliver by sliver by the tasks), B block by block into
 * panels of SGEMM_NR columns (kc x nc, sized to stay in L2) unless it too was packed once, or is
 * read in place (a row-major B whose slivers few row panels reuse: its rows' 32-float pieces
 * are the slivers, the micro-kernels step through B by a row stride). The micro-kernel keeps an
 * MR x NR tile of C in registers (AVX-512: 12 x 32 = 24 zmm accumulators, each step one 32-float
 * row of B and 12 broadcasts of A) over kc steps; the A sliver (12 x kc) stays in L1 while the
 * kernel walks the B block's panels. Threads split C into column ranges (then row ranges) of
 * whole panels, so each B block is packed by one thread only; rows first when the tasks pack A;
 * whole K blocks for narrow, deep products (C of at most 64 x 256: their partial sums are added
 * after, in block order, as one thread adds the blocks into C, so the sums are the same);
 * one column range per thread for products of 1 to 3 rows with pre-packed B (GEMVs: each core
 * keeps its part of the weights in its L2). One row times B^T as it lies (a dense weight that is
 * an input, or too large to keep twice) is a row of dot products instead (rowdot, below).
 * docs/kernels.md has the measured choices.
 *
 * Every C element is the sum over p in increasing order within each K block (blocks added to C
 * in order; a one-row product with pre-packed B has one block), except in 1-row tiles (AVX-512
 * and AVX2), which sum interleaved partial sums (p mod 4; AVX2 p mod 2) to hide the FMA latency,
 * and in rowdot's dot products (partial sums per vector lane, then a fixed tree).
 * Which tile an element falls in depends on m alone, never on the thread split, so results do not
 * depend on the thread count. */
#include "kernels/fast/gemm.h"
#include "kernels/fast/conv.h" /* conv_transpose16 */

#include <immintrin.h>
#include <string.h>

#define KC_MAX 512 /* depth of a block: the A sliver 12 x 512 floats = 24 KiB in L1 */
#define NC_MAX 384 /* columns of a B block: 512 x 384 floats = 768 KiB in L2 */
#define B_BLOCK_FLOATS (KC_MAX * NC_MAX) /* a shallower block has more columns, */
#define NC_WIDE 2048                     /* up to 2048: a 12-row strip of C (96 KiB) stays in L2 */
/* Packed A of more bytes than this in a call (constant weights, packed once: Winograd's U, a
 * convolution's or a dense layer's) is taken to be in neither L1 nor L2 when the call starts: the
 * first tile of each sliver (in each column block and K block) streams it in, each step
 * prefetching into L1 the line STREAM_A_AHEAD bytes ahead (ukr_avx512_stream). The hardware
 * prefetcher alone kept such a stream at ~8 GB/s, as did a burst of prefetches for the whole
 * next sliver before each sliver (the rule before: 8.2 GB/s in a test program, 13.9 with 2 KiB
 * ahead, 12.4 with 4 KiB). In the models (Intel Xeon, per-layer profiles, 1 thread), the burst
 * against the stream: ResNet-18's 256-channel Winograd layers at 14 x 14 (U: 9.4 MB) 1.57-1.60
 * -> 1.23-1.31 ms, its 128-channel ones (2.4 MB) 1.00-1.06 -> 0.78-0.85 ms (at 2 threads -23%
 * both), SqueezeNet's 13 x 13 ones 17-23% faster; 1 KiB and 2 KiB ahead were 5-9% slower than 4,
 * 6 and 8 KiB 1-4% slower. The limit on one thread (every product at 1 thread; at any count, the
 * blocked Winograd form's products, which run inside a thread's task) is 256 KiB: from 1 MiB
 * down to it, ResNet-18's 64-channel Winograd layers at 56 x 56 (U: 590 KB) ran 9-13% faster and
 * SqueezeNet's at 27 x 27 (590 KB) 8-12%; 32 KiB changed nothing more. On the pool a call keeps
 * 4 MiB (1 MiB changed nothing there; with the burst, 1 MiB made SqueezeNet's classifier, A of 2
 * MB whose slivers both threads read, 7% slower). */
#define STREAM_A_BYTES (4 << 20)
#define STREAM_A_BYTES_1T (256 << 10)
/* bytes ahead of the line a streamed sliver's first tile reads that each of its steps prefetches */
#define STREAM_A_AHEAD 4096
/* depth of a block of B read in place from rows in separate pages (plan_gemm) */
#define KC_STREAMS 32
/* panels ahead that the first row panel's tiles prefetch of B read in place (gemm_task) */
#define PF_PANELS 2
/* A narrow, deep product's K blocks come in multiples of this (plan_gemm) */
#define KSPLIT_BLOCKS 4
#define PANEL_FIRST_SLIVERS 4 /* row slivers a B panel serves in turn (gemm_task) */
#define MIN_TASK_MACS 131072  /* smallest multiply-adds worth a task of their own */
#define PACK_A_CHUNK 8        /* A panels packed per task */
#define ROWS_EACH 512         /* rows a thread that a tall product's split by rows needs */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static size_t align16(size_t floats) { return (floats + 15) / 16 * 16; } /* 64 bytes */

/* ---- packing ---------------------------------------------------------------------------------
 */

size_t kern_sgemm_packed_a_floats(int64_t m, int64_t k) {
    return (size_t)(cdiv(m, SGEMM_MR) * SGEMM_MR * k);
}

size_t kern_sgemm_packed_b_floats(int64_t k, int64_t n) {
    return (size_t)(cdiv(n, SGEMM_NR) * SGEMM_NR * k);
}

/* A full panel of row-major A (12 rows rs apart) at AVX-512: 16 columns at a time, the 12 row
 * pieces transposed in registers (4 zero rows make the 16 x 16 square) and each column's 12
 * values stored as one masked vector. The scalar loop below stores one float per instruction:
 * packing A was 4% of SGEMM 1024^3's samples, and the 1024^3 product with A packed before
 * ran 5-10% faster than with A packed per call (Intel Xeon, 1 thread). Returns the columns
 * done (a multiple of 16). */
static FAST_AVX512 int64_t pack_a_rows_avx512(const float *a, int64_t rs, int64_t k, float *dst) {
    int64_t p0 = 0;
    for (; p0 + 16 <= k; p0 += 16) {
        __m512 r[16];
        for (int i = 0; i < SGEMM_MR; i++)
            r[i] = _mm512_loadu_ps(a + i * rs + p0);
        for (int i = SGEMM_MR; i < 16; i++)
            r[i] = _mm512_setzero_ps();
        conv_transpose16(r);
        for (int p = 0; p < 16; p++)
            _mm512_mask_storeu_ps(dst + (p0 + p) * SGEMM_MR, (__mmask16)0x0fff, r[p]);
    }
    return p0;
}

/* One A panel: rows (<= MR) rows starting at a, k columns, into dst[p * MR + i]. */
static void pack_a_panel(const float *a, int64_t rs, int64_t cs, int64_t rows, int64_t k,
                         float *dst) {
    if (rows == SGEMM_MR && cs == 1 && rs != 1 && sup_isa() == SUP_ISA_AVX512) {
        int64_t done = pack_a_rows_avx512(a, rs, k, dst);
        a += done, k -= done, dst += done * SGEMM_MR;
    }
    if (rows < SGEMM_MR)
        for (int64_t p = 0; p < k; p++)
            memset(dst + p * SGEMM_MR + rows, 0, (size_t)(SGEMM_MR - rows) * sizeof(float));
    if (rs == 1) {
        for (int64_t p = 0; p < k; p++)
            for (int64_t i = 0; i < rows; i++)
                dst[p * SGEMM_MR + i] = a[p * cs + i];
        return;
    }
    /* rows of A: 64 columns at a time, so the destination block (3 KiB) stays in L1 while each
     * row's piece is read sequentially */
    for (int64_t p0 = 0; p0 < k; p0 += 64) {
        int64_t pe = min64(k, p0 + 64);
        for (int64_t i = 0; i < rows; i++) {
            const float *row = a + i * rs;
            for (int64_t p = p0; p < pe; p++)
                dst[p * SGEMM_MR + i] = row[p * cs];
        }
    }
}

void kern_sgemm_pack_a(const float *a, int64_t rs, int64_t cs, int64_t m, int64_t k, float *dst) {
    for (int64_t i = 0; i < m; i += SGEMM_MR)
        pack_a_panel(a + i * rs, rs, cs, min64(SGEMM_MR, m - i), k, dst + i * k);
}

/* pack_b_block's row-major case at AVX-512: a partial panel's row is two masked loads and two
 * stores. Through memcpy and memset (two library calls a row, of sizes known only at run time)
 * the 9-column tail that B read in place leaves at 13 x 13 (169 columns) cost a fifth of the
 * 1x1 convolution 512 -> 64 (bench: 64 x 169 x 512 with B in place 135-139 GFLOP/s, with no
 * tail 168-179; Intel Xeon, 1 thread). */
static FAST_AVX512 void pack_b_rows_avx512(const float *b, int64_t rs, int64_t k0, int64_t kc,
                                           int64_t n0, int64_t full, int64_t tail, float *dst) {
    float *last = dst + full * kc * SGEMM_NR;
    __mmask16 m0 = (__mmask16)(tail >= 16 ? 0xffff : (1u << tail) - 1);
    __mmask16 m1 = (__mmask16)(tail > 16 ? (1u << (tail - 16)) - 1 : 0);
    for (int64_t p = 0; p < kc; p++) {
        const float *src = b + (k0 + p) * rs + n0;
        for (int64_t q = 0; q < full; q++) {
            float *d = dst + (q * kc + p) * SGEMM_NR;
            _mm512_storeu_ps(d, _mm512_loadu_ps(src + q * SGEMM_NR));
            _mm512_storeu_ps(d + 16, _mm512_loadu_ps(src + q * SGEMM_NR + 16));
        }
        if (tail) {
            const float *t = src + full * SGEMM_NR;
            _mm512_storeu_ps(last + p * SGEMM_NR, _mm512_maskz_loadu_ps(m0, t));
            _mm512_storeu_ps(last + p * SGEMM_NR + 16, _mm512_maskz_loadu_ps(m1, t + 16));
        }
    }
}

/* Rows [k0, k0 + kc) and columns [n0, n0 + nc) of a strided B in panel order (SGemmPackB). */
static void pack_b_block(const float *b, int64_t rs, int64_t cs, int64_t k0, int64_t kc, int64_t n0,
                         int64_t nc, float *dst) {
    int64_t full = nc / SGEMM_NR, tail = nc % SGEMM_NR;
    float *last = dst + full * kc * SGEMM_NR; /* the partial panel, if any */
    if (cs == 1 && sup_isa() == SUP_ISA_AVX512) {
        pack_b_rows_avx512(b, rs, k0, kc, n0, full, tail, dst);
        return;
    }
    if (cs == 1) { /* row by row: each source row is read once, sequentially */
        for (int64_t p = 0; p < kc; p++) {
            const float *src = b + (k0 + p) * rs + n0;
            for (int64_t q = 0; q < full; q++)
                memcpy(dst + (q * kc + p) * SGEMM_NR, src + q * SGEMM_NR, SGEMM_NR * sizeof(float));
            if (tail) {
                memcpy(last + p * SGEMM_NR, src + full * SGEMM_NR, (size_t)tail * sizeof(float));
                memset(last + p * SGEMM_NR + tail, 0, (size_t)(SGEMM_NR - tail) * sizeof(float));
            }
        }
        return;
    }
    for (int64_t q = 0; q * SGEMM_NR < nc; q++) { /* column by column */
        int64_t w = min64(SGEMM_NR, nc - q * SGEMM_NR);
        float *panel = dst + q * kc * SGEMM_NR;
        const float *col = b + (n0 + q * SGEMM_NR) * cs + k0 * rs;
        for (int64_t p = 0; p < kc; p++) {
            float *d = panel + p * SGEMM_NR;
            for (int64_t jj = 0; jj < w; jj++)
                d[jj] = col[jj * cs + p * rs];
            for (int64_t jj = w; jj < SGEMM_NR; jj++)
                d[jj] = 0;
        }
    }
}

void kern_sgemm_pack_b(const float *b, int64_t rs, int64_t cs, int64_t k, int64_t n, float *dst) {
    pack_b_block(b, rs, cs, 0, k, 0, n, dst);
}

/* ---- micro-kernels ---------------------------------------------------------------------------
 * C[0..rows)[0..cols) (+)= sum over p < kc of A(i, p) * b[p * NR + j], b the B sliver of a panel,
 * A either the sliver of a packed panel (lda == 0: A(i, p) = a[p * MR + i]) or read in place
 * from rows lda floats apart (A(i, p) = a[i * lda + p]: a row-major A needs no packing; its
 * 12 x kc sliver stays in L1 as a packed one would). load: C's old values are added. cl: the
 * tail of the final values, a bias then a clamp (AVX-512 tiles only, else NULL). pf: rows ldb
 * apart to prefetch into L2, a line pair per step (AVX-512 tiles only; NULL: none). */
typedef struct TileTail {
    uint8_t clamp;     /* K_CLAMP_* */
    float lo, hi;      /* K_CLAMP_CLIP's bounds */
    const float *brow; /* the bias of the tile's row 0 (one per row), or NULL */
    const float *bcol; /* the bias of its column 0 (one per column), or NULL */
    bool bfirst;       /* bias + x (else x + bias) */
    const float *res;  /* the residual of its element (0, 0) (rows ldc apart, as C's), or NULL */
    bool rfirst;       /* residual + (x + bias) (else (x + bias) + residual) */
} TileTail;
typedef void (*UKernel)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                        float *c, int64_t ldc, int rows, int cols, bool load, const TileTail *cl,
                        const float *pf);

static void epi_clamp(void *ctx, int64_t t, float *c, int64_t ldc, int64_t row0, int64_t col0,
                      int64_t rows, int64_t cols);
static void epi_bias(void *ctx, int64_t t, float *c, int64_t ldc, int64_t row0, int64_t col0,
                     int64_t rows, int64_t cols);
static int64_t item(int64_t t, int64_t mod);

static void ukr_scalar(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float *c, int64_t ldc, int rows, int cols, bool load, const TileTail *cl,
                       const float *pf) {
    (void)cl, (void)pf; /* only the AVX-512 tiles clamp and prefetch (gemm_task) */
    float acc[SGEMM_MR][SGEMM_NR];
    memset(acc, 0, sizeof acc);
    int64_t ars = lda ? lda : 1, aps = lda ? 1 : SGEMM_MR;
    for (int64_t p = 0; p < kc; p++, b += ldb)
        for (int i = 0; i < rows; i++) {
            float ai = a[i * ars + p * aps];
            for (int j = 0; j < SGEMM_NR; j++)
                acc[i][j] += ai * b[j];
        }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            c[i * ldc + j] = load ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

#define ROWS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define INLINE static inline __attribute__((always_inline))

/* Element p of row i (a compile-time constant) of the A sliver: packed, or in place through four
 * row pointers (rows 3q .. 3q + 2 at aq, aq + lda, aq + 2 lda: x86 addressing reaches them with
 * one index register), which advance by one float per step. */
#define A_PTR(i)                                                                                   \
    (D ? ((i) < 3 ? a0 : (i) < 6 ? a3 : (i) < 9 ? a6 : a9) + ((i) % 3) * lda : a0 + (i))
#define A_AT(i) (*A_PTR(i))
#define A_NEXT()                                                                                   \
    do {                                                                                           \
        if (D)                                                                                     \
            a0++, a3++, a6++, a9++;                                                                \
        else                                                                                       \
            a0 += SGEMM_MR;                                                                        \
    } while (0)
#define A_PTRS()                                                                                   \
    const float *a0 = a, *a3 = D && R > 3 ? a + 3 * lda : a, *a6 = D && R > 6 ? a + 6 * lda : a,   \
                *a9 = D && R > 9 ? a + 9 * lda : a;                                                \
    (void)a3, (void)a6, (void)a9

/* AVX-512: R rows (compile-time) of W 16-float vectors, A in place (D) or packed. */
#define Z_DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
#define Z_STEP(i)                                                                                  \
    if (i < R) {                                                                                   \
        __m512 ai = _mm512_set1_ps(A_AT(i));                                                       \
        c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);                                                \
        if (W == 2) c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);                                    \
    }
#define Z_PREFETCH(i)                                                                              \
    if (i < R && load) {                                                                           \
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);                                    \
        if (W == 2) _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);                   \
    }
/* In place, the 12 rows are 12 streams the hardware prefetcher may not follow: fetch a line of
 * each 64 floats ahead, once per line. */
#define Z_PREFETCH_A(i)                                                                            \
    if (i < R) _mm_prefetch((const char *)(A_PTR(i) + 64), _MM_HINT_T0);
/* The tail cl (NULL: none) on a tile's final values: its bias (per row or per column, in the
 * program's order), then its clamp as kern_clamp_rows' relu / clip step at this level: max(x, 0)
 * gives 0 for NaN and -0; min(hi, max(lo, x)) keeps NaN. m0, m1: the columns' masks. */
#define Z_CLAMP_SETUP                                                                              \
    const int ck = cl ? cl->clamp : K_CLAMP_NONE;                                                  \
    const __m512 vlo = _mm512_set1_ps(cl ? cl->lo : 0.0f),                                         \
                 vhi = _mm512_set1_ps(cl ? cl->hi : 0.0f);                                         \
    const float *brow = cl ? cl->brow : NULL, *bcol = cl ? cl->bcol : NULL;                        \
    const bool bfirst = cl && cl->bfirst, rfirst = cl && cl->rfirst;                               \
    const float *rres = cl ? cl->res : NULL;                                                       \
    const __m512 bc0 = bcol ? _mm512_maskz_loadu_ps(m0, bcol) : _mm512_setzero_ps();               \
    const __m512 bc1 = bcol && W == 2 ? _mm512_maskz_loadu_ps(m1, bcol + 16) : _mm512_setzero_ps();
#define Z_BIAS(v, bv) v = bfirst ? _mm512_add_ps(bv, v) : _mm512_add_ps(v, bv);
#define Z_TAIL(v, i, bc, h, m)                                                                     \
    if (brow) {                                                                                    \
        __m512 br = _mm512_set1_ps(brow[i]);                                                       \
        Z_BIAS(v, br)                                                                              \
    } else if (bcol) {                                                                             \
        Z_BIAS(v, bc)                                                                              \
    }                                                                                              \
    if (rres) {                                                                                    \
        __m512 rv = _mm512_maskz_loadu_ps(m, rres + (i)*ldc + 16 * (h));                           \
        v = rfirst ? _mm512_add_ps(rv, v) : _mm512_add_ps(v, rv);                                  \
    }                                                                                              \
    Z_CLAMP(v)
#define Z_CLAMP(v)                                                                                 \
    if (ck == K_CLAMP_RELU)                                                                        \
        v = _mm512_max_ps(v, _mm512_setzero_ps());                                                 \
    else if (ck == K_CLAMP_CLIP)                                                                   \
        v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
#define Z_STORE(i)                                                                                 \
    if (i < R) {                                                                                   \
        float *ci = c + i * ldc;                                                                   \
        if (load) c##i##0 = _mm512_add_ps(c##i##0, _mm512_maskz_loadu_ps(m0, ci));                 \
        Z_TAIL(c##i##0, i, bc0, 0, m0)                                                             \
        _mm512_mask_storeu_ps(ci, m0, c##i##0);                                                    \
        if (W == 2) {                                                                              \
            if (load) c##i##1 = _mm512_add_ps(c##i##1, _mm512_maskz_loadu_ps(m1, ci + 16));        \
            Z_TAIL(c##i##1, i, bc1, 1, m1)                                                         \
            _mm512_mask_storeu_ps(ci + 16, m1, c##i##1);                                           \
        }                                                                                          \
    }

/* P: packed A streamed from memory (ukr_avx512_stream). */
FAST_AVX512 INLINE void z_tile(const int R, const int W, const bool D, int64_t kc, const float *a,
                               int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                               int cols, bool load, const TileTail *cl, const float *pf,
                               const bool P) {
    A_PTRS();
    ROWS12(Z_PREFETCH) /* C is read only at the end: start bringing it in now */
    ROWS12(Z_DECL)
    for (int64_t p = 0; p < kc; p++) {
        if (D && (p & 15) == 0) {
            ROWS12(Z_PREFETCH_A)
        }
        if (P) /* as an address: it may lie past A's end */
            _mm_prefetch((const char *)((uintptr_t)a0 + STREAM_A_AHEAD), _MM_HINT_T0);
        if (pf != NULL) {
            _mm_prefetch((const char *)pf, _MM_HINT_T1);
            _mm_prefetch((const char *)(pf + 16), _MM_HINT_T1);
            pf += ldb;
        }
        __m512 b0 = _mm512_loadu_ps(b), b1 = W == 2 ? _mm512_loadu_ps(b + 16) : b0;
        ROWS12(Z_STEP)
        A_NEXT();
        b += ldb;
    }
    __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1);
    __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xffff : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
    Z_CLAMP_SETUP
    ROWS12(Z_STORE)
}

/* One row: four partial sums over p mod 4 (one chain would wait on the FMA latency). B's rows
 * ZR_PF steps ahead are prefetched into L1: a GEMV streams its B once, from L2 at best (an RNN
 * step's 1 MiB recurrent weight), and the hardware alone kept ~37 of the 64 bytes a cycle L2 can
 * give (measured alone: 7.7 -> 6.9 us per MiB, 2 KiB ahead; LSTM and GRU 1-2% a run). */
#define ZR_PF 16
#define ZR_STEP(q)                                                                                 \
    {                                                                                              \
        __m512 aq = _mm512_set1_ps(a[q * aps]);                                                    \
        s##q##0 = _mm512_fmadd_ps(aq, _mm512_loadu_ps(b + q * ldb), s##q##0);                      \
        if (W == 2) s##q##1 = _mm512_fmadd_ps(aq, _mm512_loadu_ps(b + q * ldb + 16), s##q##1);     \
    }
FAST_AVX512 INLINE void z_row(const int W, const bool D, int64_t kc, const float *a, const float *b,
                              int64_t ldb, float *c, int cols, bool load, const TileTail *cl) {
    const int64_t aps = D ? 1 : SGEMM_MR, ldc = 0; /* one row: Z_TAIL's row 0 */
    __m512 s00 = _mm512_setzero_ps(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00,
           s30 = s00, s31 = s00;
    int64_t p = 0;
    for (; p + 4 <= kc; p += 4, a += 4 * aps, b += 4 * ldb) {
        for (int q = 0; q < 4; q++) {
            _mm_prefetch((const char *)(b + (ZR_PF + q) * ldb), _MM_HINT_T0);
            if (W == 2) _mm_prefetch((const char *)(b + (ZR_PF + q) * ldb + 16), _MM_HINT_T0);
        }
        ZR_STEP(0)
        ZR_STEP(1)
        ZR_STEP(2)
        ZR_STEP(3)
    }
    for (; p < kc; p++, a += aps, b += ldb)
        ZR_STEP(0)
    __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1);
    __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xffff : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
    Z_CLAMP_SETUP
    __m512 r0 = _mm512_add_ps(_mm512_add_ps(s00, s10), _mm512_add_ps(s20, s30));
    if (load) r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, c));
    Z_TAIL(r0, 0, bc0, 0, m0)
    _mm512_mask_storeu_ps(c, m0, r0);
    if (W == 2) {
        __m512 r1 = _mm512_add_ps(_mm512_add_ps(s01, s11), _mm512_add_ps(s21, s31));
        if (load) r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, c + 16));
        Z_TAIL(r1, 0, bc1, 1, m1)
        _mm512_mask_storeu_ps(c + 16, m1, r1);
    }
}

typedef void (*Tile)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                     int64_t ldc, int cols, bool load, const TileTail *cl, const float *pf);
#define TILE_ARGS                                                                                  \
    int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,   \
        int cols, bool load, const TileTail *cl, const float *pf
/* z_R_W_D: R rows, W vectors, D in place (1) or packed (0). */
#define Z_FN(R, W, D)                                                                              \
    static FAST_AVX512 void z_##R##_##W##_##D(TILE_ARGS) {                                         \
        z_tile(R, W, D, kc, a, lda, b, ldb, c, ldc, cols, load, cl, pf, false);                    \
    }
#define Z_FNS(R) Z_FN(R, 1, 0) Z_FN(R, 2, 0) Z_FN(R, 1, 1) Z_FN(R, 2, 1)
Z_FNS(2)
Z_FNS(3)
Z_FNS(4)
Z_FNS(5)
Z_FNS(6)
Z_FNS(7)
Z_FNS(8)
Z_FNS(9)
Z_FNS(10)
Z_FNS(11)
Z_FNS(12)
#define Z_ROW_FN(W, D)                                                                             \
    static FAST_AVX512 void z_1_##W##_##D(TILE_ARGS) {                                             \
        (void)lda, (void)ldc, (void)pf;                                                            \
        z_row(W, D, kc, a, b, ldb, c, cols, load, cl);                                             \
    }
Z_ROW_FN(1, 0)
Z_ROW_FN(2, 0)
Z_ROW_FN(1, 1)
Z_ROW_FN(2, 1)

#define Z_ROW_ENTRY(i) {{z_##i##_1_0, z_##i##_2_0}, {z_##i##_1_1, z_##i##_2_1}},
#define Z_ENTRIES(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12)
static const Tile z_tiles[SGEMM_MR][2][2] = {Z_ENTRIES(Z_ROW_ENTRY)}; /* [rows - 1][D][W - 1] */

static void ukr_avx512(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float *c, int64_t ldc, int rows, int cols, bool load, const TileTail *cl,
                       const float *pf) {
    z_tiles[rows - 1][lda != 0][cols > 16](kc, a, lda, b, ldb, c, ldc, cols, load, cl, pf);
}

/* The tiles of a packed A that comes from memory (Run.stream_a): each step prefetches the line
 * STREAM_A_AHEAD bytes ahead of it. Functions of their own, after the others: a test of a flag
 * (once a call or once a step) in the same functions made SqueezeNet's K = 16 Winograd products
 * (16 steps a tile, nothing streamed) 4-7% slower, the stream tiles among the others 2-5%. */
#define Z_SFN(R, W)                                                                                \
    static FAST_AVX512 void z_##R##_##W##_s(TILE_ARGS) {                                           \
        z_tile(R, W, false, kc, a, lda, b, ldb, c, ldc, cols, load, cl, pf, true);                 \
    }
#define Z_SFNS(R) Z_SFN(R, 1) Z_SFN(R, 2)
Z_SFNS(2)
Z_SFNS(3)
Z_SFNS(4)
Z_SFNS(5)
Z_SFNS(6)
Z_SFNS(7)
Z_SFNS(8)
Z_SFNS(9)
Z_SFNS(10)
Z_SFNS(11)
Z_SFNS(12)
#define Z_STREAM_ENTRY(i) {z_##i##_1_s, z_##i##_2_s},
#define Z_ENTRIES2(X) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12)
static const Tile z_stream[SGEMM_MR - 1][2] = {Z_ENTRIES2(Z_STREAM_ENTRY)}; /* [rows - 2][W - 1] */

static void ukr_avx512_stream(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                              float *c, int64_t ldc, int rows, int cols, bool load,
                              const TileTail *cl, const float *pf) {
    if (rows == 1) /* one row (a GEMV's A): no stream; A is packed (Run.stream_a) */
        ukr_avx512(kc, a, lda, b, ldb, c, ldc, rows, cols, load, cl, pf);
    else
        z_stream[rows - 2][cols > 16](kc, a, lda, b, ldb, c, ldc, cols, load, cl, pf);
}

/* AVX2: R rows (<= 6) of W 8-float vectors (<= 2), a quarter of the 12 x 32 tile. */
#define Y_DECL(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps();
#define Y_STEP(i)                                                                                  \
    if (i < R) {                                                                                   \
        __m256 ai = _mm256_set1_ps(A_AT(i));                                                       \
        c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                                                \
        if (W == 2) c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);                                    \
    }
#define Y_STORE(i)                                                                                 \
    if (i < R) {                                                                                   \
        float *ci = c + i * ldc;                                                                   \
        if (load) c##i##0 = _mm256_add_ps(c##i##0, _mm256_maskload_ps(ci, m0));                    \
        _mm256_maskstore_ps(ci, m0, c##i##0);                                                      \
        if (W == 2) {                                                                              \
            if (load) c##i##1 = _mm256_add_ps(c##i##1, _mm256_maskload_ps(ci + 8, m1));            \
            _mm256_maskstore_ps(ci + 8, m1, c##i##1);                                              \
        }                                                                                          \
    }

FAST_AVX2 INLINE void y_tile(const int R, const int W, const bool D, int64_t kc, const float *a,
                             int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                             int cols, bool load, const bool P) {
    A_PTRS();
    ROWS6(Y_DECL)
    for (int64_t p = 0; p < kc; p++) {
        if (P) /* packed A from memory (ukr_avx2_stream); an address that may lie past A's end */
            _mm_prefetch((const char *)((uintptr_t)a0 + STREAM_A_AHEAD), _MM_HINT_T0);
        __m256 b0 = _mm256_loadu_ps(b), b1 = W == 2 ? _mm256_loadu_ps(b + 8) : b0;
        ROWS6(Y_STEP)
        A_NEXT();
        b += ldb;
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
    __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), lane);
    ROWS6(Y_STORE)
}

/* One row of a whole 32-column panel (the 6 x 16 quarters would stream each B row in two
 * passes of half a row): two partial sums over p mod 2 of four vectors, 8 chains (with one
 * chain per vector the 1 x 16 tile ran at the FMA latency: a GEMV at 47 GB/s) */
#define YR_ACC(q, v) s##q##v = _mm256_fmadd_ps(aq, _mm256_loadu_ps(b + q * ldb + 8 * v), s##q##v);
#define YR_STEP(q)                                                                                 \
    {                                                                                              \
        __m256 aq = _mm256_set1_ps(a[q * aps]);                                                    \
        YR_ACC(q, 0) YR_ACC(q, 1) YR_ACC(q, 2) YR_ACC(q, 3)                                        \
    }
#define YR_STORE(v)                                                                                \
    {                                                                                              \
        __m256i mv = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8 * v), lane);                    \
        __m256 rv = _mm256_add_ps(s0##v, s1##v);                                                   \
        if (load) rv = _mm256_add_ps(rv, _mm256_maskload_ps(c + 8 * v, mv));                       \
        _mm256_maskstore_ps(c + 8 * v, mv, rv);                                                    \
    }
FAST_AVX2 INLINE void y_row(const bool D, int64_t kc, const float *a, const float *b, int64_t ldb,
                            float *c, int cols, bool load) {
    const int64_t aps = D ? 1 : SGEMM_MR;
    __m256 s00 = _mm256_setzero_ps(), s01 = s00, s02 = s00, s03 = s00, s10 = s00, s11 = s00,
           s12 = s00, s13 = s00;
    int64_t p = 0;
    for (; p + 2 <= kc; p += 2, a += 2 * aps, b += 2 * ldb) {
        YR_STEP(0)
        YR_STEP(1)
    }
    if (p < kc) YR_STEP(0)
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    YR_STORE(0) YR_STORE(1) YR_STORE(2) YR_STORE(3)
}
static FAST_AVX2 void y_row_0(TILE_ARGS) {
    (void)lda, (void)ldc, (void)cl, (void)pf;
    y_row(false, kc, a, b, ldb, c, cols, load);
}
static FAST_AVX2 void y_row_1(TILE_ARGS) {
    (void)lda, (void)ldc, (void)cl, (void)pf;
    y_row(true, kc, a, b, ldb, c, cols, load);
}

#define Y_FN(R, W, D)                                                                              \
    static FAST_AVX2 void y_##R##_##W##_##D(TILE_ARGS) {                                           \
        (void)cl, (void)pf;                                                                        \
        y_tile(R, W, D, kc, a, lda, b, ldb, c, ldc, cols, load, false);                            \
    }
#define Y_FNS(R) Y_FN(R, 1, 0) Y_FN(R, 2, 0) Y_FN(R, 1, 1) Y_FN(R, 2, 1)
Y_FNS(1)
Y_FNS(2)
Y_FNS(3)
Y_FNS(4)
Y_FNS(5)
Y_FNS(6)
#define Y_ENTRIES(X) X(1) X(2) X(3) X(4) X(5) X(6)
#define Y_ROW_ENTRY(i) {{y_##i##_1_0, y_##i##_2_0}, {y_##i##_1_1, y_##i##_2_1}},
static const Tile y_tiles[6][2][2] = {Y_ENTRIES(Y_ROW_ENTRY)}; /* [rows - 1][D][W - 1] */
/* the first quarter of a streamed sliver's first tile (ukr_avx2_stream), as z_R_W_s */
#define Y_SFN(R, W)                                                                                \
    static FAST_AVX2 void y_##R##_##W##_s(TILE_ARGS) {                                             \
        (void)cl, (void)pf;                                                                        \
        y_tile(R, W, false, kc, a, lda, b, ldb, c, ldc, cols, load, true);                         \
    }
#define Y_SFNS(R) Y_SFN(R, 1) Y_SFN(R, 2)
Y_SFNS(1)
Y_SFNS(2)
Y_SFNS(3)
Y_SFNS(4)
Y_SFNS(5)
Y_SFNS(6)
#define Y_STREAM_ENTRY(i) {y_##i##_1_s, y_##i##_2_s},
static const Tile y_stream[6][2] = {Y_ENTRIES(Y_STREAM_ENTRY)}; /* [rows - 1][W - 1] */

/* stream: A is packed (lda 0) and streamed (Run.stream_a): the first quarter's steps prefetch it */
static inline void ukr_avx2_tiles(int64_t kc, const float *a, int64_t lda, const float *b,
                                  int64_t ldb, float *c, int64_t ldc, int rows, int cols, bool load,
                                  bool stream) {
    if (rows == 1) {
        (lda ? y_row_1 : y_row_0)(kc, a, lda, b, ldb, c, ldc, cols, load, NULL, NULL);
        return;
    }
    for (int i0 = 0; i0 < rows; i0 += 6) {
        int r = rows - i0 < 6 ? rows - i0 : 6;
        const float *ai = a + (lda ? i0 * lda : i0);
        for (int j0 = 0; j0 < cols; j0 += 16) {
            int w = cols - j0 < 16 ? cols - j0 : 16;
            Tile f = stream && i0 == 0 && j0 == 0 ? y_stream[r - 1][w > 8]
                                                  : y_tiles[r - 1][lda != 0][w > 8];
            f(kc, ai, lda, b + j0, ldb, c + i0 * ldc + j0, ldc, w, load, NULL, NULL);
        }
    }
}
static void ukr_avx2(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                     int64_t ldc, int rows, int cols, bool load, const TileTail *cl,
                     const float *pf) {
    (void)cl, (void)pf; /* only the AVX-512 tiles clamp and prefetch (gemm_task) */
    ukr_avx2_tiles(kc, a, lda, b, ldb, c, ldc, rows, cols, load, false);
}
static void ukr_avx2_stream(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                            float *c, int64_t ldc, int rows, int cols, bool load,
                            const TileTail *cl, const float *pf) {
    (void)cl, (void)pf;
    ukr_avx2_tiles(kc, a, lda, b, ldb, c, ldc, rows, cols, load, true);
}

static UKernel pick_kernel(void) {
    switch (sup_isa()) {
    case SUP_ISA_AVX512: return ukr_avx512;
    case SUP_ISA_AVX2: return ukr_avx2;
    default: return ukr_scalar;
    }
}

/* ---- one row times B^T read in place (a dense layer's weight) --------------------------------
 *
 * c[j] (+)= sum_p a[p] * b[j * ldb + p] for rows j of B^T (the (units, k) weight of nn.dense):
 * each output is the dot product of A's row with a row of the weight, read where it lies. A GEMV
 * streams its weight once per call at memory speed whatever its layout, so packing buys nothing
 * there, and not packing keeps one copy of the weight (VGG-16's fully connected weights are
 * 472 MB). Eight weight rows at a time share each vector of A; each row keeps partial sums per
 * lane (p mod the vector width), reduced at the end by one tree for all eight rows, whose result
 * for a row depends on that row's lanes alone, so a row's sum is the same in a group of 8 as in
 * a last, partial group: the order of a dot product's terms depends on k and the level alone. */
typedef void (*RowDot)(const float *a, const float *b, int64_t ldb, int64_t k, float *c,
                       int64_t rows, bool load);

static void rowdot_scalar(const float *a, const float *b, int64_t ldb, int64_t k, float *c,
                          int64_t rows, bool load) {
    for (int64_t j = 0; j < rows; j++) {
        const float *bj = b + j * ldb;
        float s[4] = {0, 0, 0, 0};
        int64_t p = 0;
        for (; p + 4 <= k; p += 4)
            for (int q = 0; q < 4; q++)
                s[q] += a[p + q] * bj[p + q];
        for (; p < k; p++)
            s[0] += a[p] * bj[p];
        float v = (s[0] + s[1]) + (s[2] + s[3]);
        c[j] = load ? c[j] + v : v;
    }
}

/* Lane r (< 8) of the result: the sum of v[r]'s 16 lanes. */
FAST_AVX512 INLINE __m256 hsum8_avx512(const __m512 *v) {
    __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(v[0], v[1]), _mm512_unpackhi_ps(v[0], v[1]));
    __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(v[2], v[3]), _mm512_unpackhi_ps(v[2], v[3]));
    __m512 s45 = _mm512_add_ps(_mm512_unpacklo_ps(v[4], v[5]), _mm512_unpackhi_ps(v[4], v[5]));
    __m512 s67 = _mm512_add_ps(_mm512_unpacklo_ps(v[6], v[7]), _mm512_unpackhi_ps(v[6], v[7]));
    __m512d d01 = _mm512_castps_pd(s01), d23 = _mm512_castps_pd(s23);
    __m512d d45 = _mm512_castps_pd(s45), d67 = _mm512_castps_pd(s67);
    /* each 128-bit block: the block's sums of rows 0..3 (4..7) */
    __m512 t03 = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(d01, d23)),
                               _mm512_castpd_ps(_mm512_unpackhi_pd(d01, d23)));
    __m512 t47 = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(d45, d67)),
                               _mm512_castpd_ps(_mm512_unpackhi_pd(d45, d67)));
    /* blocks [t03.0 + t03.2, t03.1 + t03.3, t47.0 + t47.2, t47.1 + t47.3], then pairs summed */
    __m512 u =
        _mm512_add_ps(_mm512_shuffle_f32x4(t03, t47, 0x44), _mm512_shuffle_f32x4(t03, t47, 0xee));
    __m512 w = _mm512_add_ps(u, _mm512_shuffle_f32x4(u, u, 0xb1));
    return _mm512_castps512_ps256(_mm512_shuffle_f32x4(w, w, 0x08));
}

/* nr (<= 8) rows; inlined with nr 8 for whole groups */
FAST_AVX512 INLINE void rowdot8_avx512(const float *a, const float *b, int64_t ldb, int64_t k,
                                       float *c, int nr, bool load) {
    __m512 s[8];
    for (int r = 0; r < 8; r++)
        s[r] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
        __m512 x = _mm512_loadu_ps(a + p);
        for (int r = 0; r < 8; r++)
            if (r < nr) s[r] = _mm512_fmadd_ps(x, _mm512_loadu_ps(b + r * ldb + p), s[r]);
    }
    if (p < k) {
        __mmask16 m = (__mmask16)((1u << (k - p)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, a + p);
        for (int r = 0; r < 8; r++)
            if (r < nr) s[r] = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, b + r * ldb + p), s[r]);
    }
    __m256 v = hsum8_avx512(s);
    __mmask8 mc = (__mmask8)((1u << nr) - 1);
    if (load) v = _mm256_add_ps(v, _mm256_maskz_loadu_ps(mc, c));
    _mm256_mask_storeu_ps(c, mc, v);
}

static FAST_AVX512 void rowdot_avx512(const float *a, const float *b, int64_t ldb, int64_t k,
                                      float *c, int64_t rows, bool load) {
    int64_t j = 0;
    for (; j + 8 <= rows; j += 8)
        rowdot8_avx512(a, b + j * ldb, ldb, k, c + j, 8, load);
    if (j < rows) rowdot8_avx512(a, b + j * ldb, ldb, k, c + j, (int)(rows - j), load);
}

/* Lane r (< 8) of the result: the sum of v[r]'s 8 lanes. */
FAST_AVX2 INLINE __m256 hsum8_avx2(const __m256 *v) {
    __m256 t03 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    __m256 t47 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(t03, t47, 0x20),
                         _mm256_permute2f128_ps(t03, t47, 0x31));
}

FAST_AVX2 INLINE void rowdot8_avx2(const float *a, const float *b, int64_t ldb, int64_t k, float *c,
                                   int nr, bool load) {
    __m256 s[8];
    for (int r = 0; r < 8; r++)
        s[r] = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
        __m256 x = _mm256_loadu_ps(a + p);
        for (int r = 0; r < 8; r++)
            if (r < nr) s[r] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + r * ldb + p), s[r]);
    }
    if (p < k) {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k - p)), lane);
        __m256 x = _mm256_maskload_ps(a + p, m);
        for (int r = 0; r < 8; r++)
            if (r < nr) s[r] = _mm256_fmadd_ps(x, _mm256_maskload_ps(b + r * ldb + p, m), s[r]);
    }
    __m256 v = hsum8_avx2(s);
    float out[8];
    _mm256_storeu_ps(out, v);
    for (int r = 0; r < nr; r++)
        c[r] = load ? c[r] + out[r] : out[r];
}

static FAST_AVX2 void rowdot_avx2(const float *a, const float *b, int64_t ldb, int64_t k, float *c,
                                  int64_t rows, bool load) {
    int64_t j = 0;
    for (; j + 8 <= rows; j += 8)
        rowdot8_avx2(a, b + j * ldb, ldb, k, c + j, 8, load);
    if (j < rows) rowdot8_avx2(a, b + j * ldb, ldb, k, c + j, (int)(rows - j), load);
}

static RowDot pick_rowdot(void) {
    switch (sup_isa()) {
    case SUP_ISA_AVX512: return rowdot_avx512;
    case SUP_ISA_AVX2: return rowdot_avx2;
    default: return rowdot_scalar;
    }
}

/* One row of A (contiguous) times B whose columns are contiguous rows of B^T (a dense or
 * transposed matmul weight, or such an input). */
static bool rows_shape(const SGemm *g) {
    return g->m == 1 && g->pack_b == NULL && g->b_rs == 1 && g->b_cs >= g->k && g->a_cs == 1 &&
           g->k > 0;
}
/* A product computed by rowdot: rows_shape with B not packed (an input, whose packing per call
 * would cost a pass over it, or a weight too large to be worth a second copy). */
static bool rows_gemv(const SGemm *g) { return rows_shape(g) && g->b_packed == NULL; }

/* Weights of a one-row product from this size on stay where they lie, read by rowdot: half the
 * L3 and over, the product streams them from memory, where rowdot ran faster than the packed
 * GEMV (bench_gemm, AMD EPYC, 1 / 2 threads: VGG-16's fc6 1 x 4096 x 25088 11.6 / 17.1 against
 * 7.2-8.1 / 12.7-13.5 GFLOP/s, fc7 11.8-12.9 / 20.5-20.9 against 7.6-9.9 / 15.8-18.6); below
 * it, the weight stays in cache from call to call, where the packed panels ran faster (an LSTM
 * step's 1 x 1024 x 256: 50.9 against 34.6 GFLOP/s). */
#define ROWS_IN_PLACE_BYTES (16.0 * 1024 * 1024)

#define ROWS_BLOCK 64 /* weight rows per rowdot call (a task walks its blocks either way) */

typedef struct RowRun {
    const SGemm *g;
    RowDot dot;
    int64_t part; /* rows per task, a multiple of 8 */
    bool backward;
} RowRun;

static void rows_task(void *ctx, int64_t task, int worker) {
    (void)worker;
    const RowRun *r = ctx;
    const SGemm *g = r->g;
    int64_t parts = cdiv(g->n, r->part), t = task / parts;
    int64_t j0 = task % parts * r->part, j1 = min64(g->n, j0 + r->part);
    const float *a = g->a + item(t, g->a_mod) * g->a_bs;
    const float *b = g->b + item(t, g->b_mod) * g->b_bs;
    float *c = g->c + t * g->c_bs;
    int64_t blocks = cdiv(j1 - j0, ROWS_BLOCK);
    for (int64_t i = 0; i < blocks; i++) {
        int64_t j = j0 + (r->backward ? blocks - 1 - i : i) * ROWS_BLOCK;
        r->dot(a, b + j * g->b_cs, g->b_cs, g->k, c + j, min64(ROWS_BLOCK, j1 - j), g->accumulate);
    }
    if (g->epi) g->epi(g->epi_ctx, t, c + j0, g->ldc, 0, j0, 1, j1 - j0);
}

/* The split: one range of rows per thread (as the packed GEMV: each core then streams the same
 * part of the weight every call, from its own L2), none under MIN_TASK_MACS. */
static void rows_run(const SGemm *g, SupPool *pool, bool backward) {
    int n_threads = sup_pool_threads(pool);
    double macs = 4.0 * (double)g->n * (double)g->k; /* as task_weight counts a GEMV */
    int64_t parts = 1;
    if (n_threads > 1 && g->batch < 2 * n_threads) {
        parts = cdiv(n_threads, g->batch);
        double most = macs / MIN_TASK_MACS;
        if ((double)parts > most) parts = most < 1 ? 1 : (int64_t)most;
    }
    RowRun r = {
        .g = g, .dot = pick_rowdot(), .part = cdiv(cdiv(g->n, 8), parts) * 8, .backward = backward};
    int64_t n_tasks = g->batch * cdiv(g->n, r.part);
    sup_pool_run((double)g->batch * macs >= 2.0 * MIN_TASK_MACS ? pool : NULL, n_tasks, rows_task,
                 &r);
}

void kern_sgemv_rows(const float *a, const float *b, int64_t ldb, int64_t k, float *c,
                     int64_t rows) {
    if (rows > 0 && k > 0) pick_rowdot()(a, b, ldb, k, c, rows, false);
}

/* ---- the driver ------------------------------------------------------------------------------
 */

/* How a call is cut into tasks: product t, rows [pm * rows_part, ...), columns [pn * cols_part,
 * ...) for task (t * parts_m + pm) * parts_n + pn. rows_part is a multiple of MR and cols_part
 * of NR, so tasks cover whole panels. */
typedef struct Plan {
    int64_t kcs;              /* depth of a K block */
    int64_t ncs;              /* columns of a B block: NC_MAX, more when kcs is small */
    int64_t parts_m, parts_n; /* parts per product */
    int64_t rows_part, cols_part;
    int64_t n_a; /* A items packed per call (0: none, A was packed before, is read in place or
                  * packed by the tasks) */
    int64_t lda; /* A read in place: its row stride (0: packed) */
    size_t a_item, b_item; /* floats per packed A / B item */
    size_t bbuf;           /* floats of each thread's B block buffer (0: B packed before) */
    size_t abuf;           /* floats of each thread's A sliver buffer (a_task) */
    bool b_inplace;        /* B read in place (row-major), only a column tail packed into bbuf */
    bool a_task;           /* each task packs its own A slivers (MR x kc) just before their use */
    int64_t parts_k; /* K split: tasks of one K block each, C's partial sums added after (>= 2);
                      * 1: none */
    int64_t ldp;     /* K split: the row stride of a block's partial C (n rounded up to 16) */
} Plan;

static int64_t item(int64_t t, int64_t mod) { return mod ? t % mod : t; }

/* Rows of a product as the task-size rules count them: a one-row product (a GEMV) streams its
 * B at memory speed, 4x slower a multiply-add than a compute-bound one, so it splits sooner
 * (GRU's 1 x 768 x 256 step: 197K multiply-adds, under the 262K that kept it on one thread). */
static double task_weight(const SGemm *g) { return g->m == 1 ? 4.0 : (double)g->m; }

/* A (row-major) read in place, unless its rows are a multiple of 4 KiB apart and each sliver
 * serves many B panels: such rows share L1 sets (measured: 1024^3 at 84% of peak in place, 91%
 * packed). Elsewhere in place was as fast or faster, packing costing a pass over A (1 thread:
 * 128 x 128 x 128 with B pre-packed 41.7 -> 36.7 us, 128 x 128 x 512 165 -> 144 us, 384 x 768
 * x 768 108 -> 115 GFLOP/s). Its row stride, or 0 (packed). */
static int64_t a_in_place(const SGemm *g) {
    if (g->a_packed == NULL && g->a_cs == 1 && (g->a_rs > 0 || g->m == 1) &&
        (g->m <= SGEMM_MR || g->n <= 2 * SGEMM_NR || g->a_rs % 1024 != 0))
        return g->a_rs > 0 ? g->a_rs : 1;
    return 0;
}

/* The share of the ideal that a split of one product reaches on n_threads threads: tasks of
 * pm x pn panels (the last ones smaller; a partial panel costs a whole one) handed out largest
 * first to the least loaded thread. An estimate of the pool's order (its counter hands tasks out
 * as threads come free); 1 when there are too many tasks to care. */
static double split_eff(int64_t tm, int64_t tn, int64_t pm, int64_t pn, int n_threads) {
    int64_t nm = cdiv(tm, pm), nn = cdiv(tn, pn), sizes[64];
    if (n_threads < 2 || n_threads > 16 || nm * nn > 64) return 1.0;
    int n = 0;
    for (int64_t i = 0; i < nm; i++)
        for (int64_t j = 0; j < nn; j++)
            sizes[n++] = min64(pm, tm - i * pm) * min64(pn, tn - j * pn);
    for (int i = 1; i < n; i++) /* largest first */
        for (int j = i; j > 0 && sizes[j] > sizes[j - 1]; j--) {
            int64_t t = sizes[j];
            sizes[j] = sizes[j - 1];
            sizes[j - 1] = t;
        }
    int64_t load[16] = {0}, most = 0;
    for (int i = 0; i < n; i++) {
        int w = 0;
        for (int t = 1; t < n_threads; t++)
            if (load[t] < load[w]) w = t;
        load[w] += sizes[i];
        if (load[w] > most) most = load[w];
    }
    return most > 0 ? (double)(tm * tn) / ((double)n_threads * (double)most) : 1.0;
}

bool kern_sgemm_narrow(int64_t m, int64_t n, int64_t k, int64_t batch) {
    return batch == 1 && m <= 64 && n <= 8 * SGEMM_NR && k >= 256;
}

static void plan_gemm(const SGemm *g, int n_threads, Plan *pl) {
    memset(pl, 0, sizeof *pl);
    bool gemv = g->m == 1 && g->b_packed != NULL;
    /* one row times pre-packed B: no K blocks (A's row stays in L1 anyway), so each B panel is
     * one sequential stream */
    int64_t nkb = g->k <= 0 || gemv ? 1 : cdiv(g->k, KC_MAX);
    pl->kcs = g->k > 0 ? cdiv(g->k, nkb) : 0;
    /* the B block keeps its L2 size: a 24-deep block (a 1x1 convolution of 24 channels) has
     * 8000 columns, so a row strip's fused tail is one call where it was 21 (one per 384) */
    pl->ncs = pl->kcs > 0 ? B_BLOCK_FLOATS / pl->kcs / SGEMM_NR * SGEMM_NR : NC_MAX;
    if (pl->ncs < NC_MAX) pl->ncs = NC_MAX;
    if (pl->ncs > NC_WIDE) pl->ncs = NC_WIDE;
    if (g->pack_b != NULL && g->pack_cols > 0 && g->pack_cols < pl->ncs)
        pl->ncs = g->pack_cols < SGEMM_NR ? SGEMM_NR : g->pack_cols / SGEMM_NR * SGEMM_NR;
    pl->a_item = kern_sgemm_packed_a_floats(g->m, g->k);
    pl->b_item = kern_sgemm_packed_b_floats(g->k, g->n);
    pl->lda = a_in_place(g);
    /* B read in place unless its slivers are both deep and reused by many row panels: packing
     * costs a pass over B (1x1 convolutions of 16-192 channels: 10-30% of the product), in place
     * each sliver is kc rows b_rs apart; measured (bench_gemm) equal or faster on every 1x1
     * layer of MobileNetV2 and SqueezeNet, slower (92 vs 100 GFLOP/s) at 256 x 4096 x 256 with
     * rows 16 KiB apart, which map to the same L1 sets */
    pl->b_inplace = g->b_packed == NULL && g->pack_b == NULL && g->b_cs == 1 && g->b_rs > 0 &&
                    (g->m <= 128 || pl->kcs <= 128);
    /* In place, each of a sliver's kc rows is a stream of its own, in a page of its own when
     * rows are 4 KiB or more apart: past ~32 streams the hardware prefetcher follows none, and
     * B (a 1x1 convolution's input, often pushed out to L3 by the layers before) comes in at
     * the latency of each miss. Blocks of at most KC_STREAMS rows keep it streaming; each
     * block adds a pass over C, so only for few rows (C of 64 x 2048 floats: 512 KiB). Measured
     * (Intel Xeon, 2 MiB L2, 1 thread): SqueezeNet's 128 -> 16 at 55 x 55 in the model 160 ->
     * 110 us, in a chain of fire modules 166-190 -> 116-119 us (KC 16: 120-133, 64: 153-193). */
    if (pl->b_inplace && g->m <= 64 && g->b_rs >= 1024 && pl->kcs > KC_STREAMS) {
        nkb = cdiv(g->k, KC_STREAMS);
        pl->kcs = cdiv(g->k, nkb);
        pl->ncs = B_BLOCK_FLOATS / pl->kcs / SGEMM_NR * SGEMM_NR;
        if (pl->ncs > NC_WIDE) pl->ncs = NC_WIDE;
    }
    /* A that is not read in place (transposed, or rows 4 KiB apart) is packed by the tasks,
     * sliver by sliver just before its use, when B costs no packing (packed before or in place)
     * and the columns make one block (so each sliver is packed once): the tasks then take rows
     * rather than columns, each packs only its own rows, and no pack phase precedes the fork
     * (which ran on the caller alone for an A under 64K floats) */
    pl->a_task = !gemv && g->a_packed == NULL && pl->lda == 0 &&
                 (g->b_packed != NULL || pl->b_inplace) && g->n <= pl->ncs;
    if (g->a_packed == NULL && pl->lda == 0 && !pl->a_task)
        pl->n_a = g->a_mod ? min64(g->a_mod, g->batch) : g->batch;
    /* A narrow, deep product (C of at most 64 x 256 from 256+ deep: a 1x1 convolution's squeeze
     * on a 13 x 13 plane) has too few column panels to split well (6 panels into tasks of 2, 2,
     * 2: 1 against 2 on 2 threads) and too few rows to split (each thread would read all of B,
     * half of it written by the other core). Its K blocks come in a multiple of KSPLIT_BLOCKS
     * (a pass over C each, which stays in L1 or L2), whatever the thread count, so that on
     * several threads each task can take whole blocks (ksum_task); a thread then reads only its
     * blocks' rows of B, one contiguous range of a 1x1 convolution's input. */
    bool narrow = kern_sgemm_narrow(g->m, g->n, g->k, g->batch) && !g->accumulate && !gemv &&
                  (g->b_packed != NULL || pl->b_inplace);
    if (narrow) {
        nkb = cdiv(cdiv(g->k, pl->kcs), KSPLIT_BLOCKS) * KSPLIT_BLOCKS;
        pl->kcs = cdiv(g->k, nkb);
    }
    if (pl->a_task) pl->abuf = (size_t)(pl->kcs * SGEMM_MR);
    if (pl->b_inplace)
        pl->bbuf = (size_t)(pl->kcs * SGEMM_NR);
    else if (g->b_packed == NULL)
        pl->bbuf = (size_t)(pl->kcs * min64(pl->ncs, cdiv(g->n, SGEMM_NR) * SGEMM_NR));

    /* The split: about 2 tasks per thread, none under MIN_TASK_MACS. A product of at most 3
     * rows with pre-packed B (a GEMV, an RNN step) takes one column range per thread: with 2
     * threads each core then streams the same part of the weights every call, from its own L2
     * (the pool's counter hands the caller task 0 in 98% of runs, measured); with 4 ranges the
     * ranges wandered between the cores */
    int64_t tiles_m = cdiv(g->m, SGEMM_MR), tiles_n = cdiv(g->n, SGEMM_NR);
    pl->parts_k = 1;
    if (narrow && n_threads > 1 &&
        (double)g->m * (double)g->n * (double)pl->kcs >= (double)MIN_TASK_MACS) {
        pl->parts_k = cdiv(g->k, pl->kcs);
        pl->ldp = (g->n + 15) / 16 * 16;
        pl->parts_m = pl->parts_n = 1;
        pl->rows_part = tiles_m * SGEMM_MR;
        pl->cols_part = tiles_n * SGEMM_NR;
        return;
    }
    /* A tall product whose B is packed per call by the plain packer, ROWS_EACH rows or more a
     * thread, on one image: one range of rows per thread, each thread packing all of B into its
     * own blocks, as one thread does alone, and reading only its rows of A. Split by columns
     * (two tasks a thread), each B block was 256 columns wide, so each A sliver served 8 panels
     * instead of 12; measured (bench_gemm 1024^3, Intel Xeon, 2 threads, interleaved) 1.84-1.92x
     * the 1-thread rate by columns, 1.94-1.99x by rows. With fewer rows per thread the extra
     * packing of B costs more than that (256 x 1024 x 1024: 8% slower by rows). */
    bool rows_each = g->batch == 1 && g->b_packed == NULL && g->pack_b == NULL && !pl->b_inplace &&
                     !pl->a_task && g->m >= ROWS_EACH * n_threads;
    int64_t parts = 1;
    if (n_threads > 1 && g->batch < 2 * n_threads) {
        double macs = task_weight(g) * (double)g->n * (double)(g->k > 0 ? g->k : 1);
        bool rows_few = g->m <= 3 && g->b_packed != NULL;
        parts = cdiv((rows_few || rows_each ? 1 : 2) * n_threads, g->batch);
        double most = macs / MIN_TASK_MACS;
        if ((double)parts > most) parts = most < 1 ? 1 : (int64_t)most;
    }
    /* columns first (each B block is then packed by one thread only), or rows first when the
     * tasks pack A or each thread takes a range of rows */
    if (pl->a_task || rows_each) {
        pl->parts_m = min64(parts, tiles_m);
        pl->rows_part = cdiv(tiles_m, pl->parts_m) * SGEMM_MR;
        pl->parts_m = cdiv(g->m, pl->rows_part);
        pl->parts_n = min64(cdiv(parts, pl->parts_m), tiles_n);
        pl->cols_part = cdiv(tiles_n, pl->parts_n) * SGEMM_NR;
        pl->parts_n = cdiv(g->n, pl->cols_part);
    } else {
        pl->parts_n = min64(parts, tiles_n);
        pl->cols_part = cdiv(tiles_n, pl->parts_n) * SGEMM_NR;
        pl->parts_n = cdiv(g->n, pl->cols_part);
        pl->parts_m = min64(cdiv(parts, pl->parts_n), tiles_m);
        pl->rows_part = cdiv(tiles_m, pl->parts_m) * SGEMM_MR;
        pl->parts_m = cdiv(g->m, pl->rows_part);
        /* rows first when that balances the threads better and B costs no packing per call (a
         * thread then walks all of B): a 1x1 convolution on a 14 x 14 plane has 7 column
         * panels, which 4 column tasks cut 2, 2, 2, 1 (3 against 4 panels per thread on 2),
         * and 576 rows, which cut evenly (bench_gemm, 2 threads: 96->576 at 14 x 14 0.125 ->
         * 0.104-0.110 ms, 64->384 0.057 -> 0.048-0.054) */
        if (g->batch == 1 && parts > 1 && tiles_m > 1 && (g->b_packed != NULL || pl->b_inplace)) {
            int64_t pm = min64(parts, tiles_m), rp = cdiv(tiles_m, pm);
            int64_t pn = min64(cdiv(parts, cdiv(tiles_m, rp)), tiles_n), cp = cdiv(tiles_n, pn);
            double now = split_eff(tiles_m, tiles_n, pl->rows_part / SGEMM_MR,
                                   pl->cols_part / SGEMM_NR, n_threads);
            if (split_eff(tiles_m, tiles_n, rp, cp, n_threads) > 1.05 * now) {
                pl->rows_part = rp * SGEMM_MR;
                pl->parts_m = cdiv(g->m, pl->rows_part);
                pl->cols_part = cp * SGEMM_NR;
                pl->parts_n = cdiv(g->n, pl->cols_part);
            }
        }
    }
}

/* The K split's partial sums: C of each block but the first (which goes to C itself). */
static size_t ksum_floats(const SGemm *g, const Plan *pl) {
    return (size_t)(pl->parts_k - 1) * (size_t)(g->m * pl->ldp);
}

size_t kern_sgemm_scratch_bytes(const SGemm *g, int n_threads) {
    if (g->m <= 0 || g->n <= 0 || g->batch <= 0 || rows_gemv(g)) return 0;
    Plan pl;
    plan_gemm(g, n_threads, &pl);
    size_t bytes =
        (align16((size_t)pl.n_a * pl.a_item) +
         (size_t)n_threads * (align16(pl.bbuf) + align16(pl.abuf)) + ksum_floats(g, &pl)) *
        sizeof(float);
    size_t amx = kern_sgemm_amx_scratch_bytes(g); /* 0 unless it may run on AMX */
    return amx > bytes ? amx : bytes;
}

typedef struct Run {
    const SGemm *g;
    Plan pl;
    UKernel uk;
    UKernel uk_stream; /* uk for a sliver's first tile when stream_a */
    bool tail_tiles;   /* g->epi is epi_clamp or epi_bias and uk the AVX-512 tiles: they apply it
                        * (gemm_task) */
    TileTail tail;     /* its clamp and bias order (the bias pointers: tile_tail) */
    const SGemmKEpi *bias; /* epi_bias's binding, or NULL */
    bool stream_a;         /* A packed before, over STREAM_A_BYTES(_1T): each sliver's first tile is
                            * uk_stream (gemm_task) */
    bool backward;         /* a GEMV walks its B panels last to first (gemv_task) */
    const float *a_packed;
    float *bbufs; /* thread w's buffers at bbufs + w * (align16(pl.bbuf) + align16(pl.abuf)):
                   * B block, then A sliver */
    float *a_dst; /* pack phase: where A items go */
    float *psum;  /* K split: block b's partial C at psum + (b - 1) * m * pl.ldp (b >= 1) */
} Run;

static void pack_a_task(void *ctx, int64_t task, int worker) {
    (void)worker;
    const Run *r = ctx;
    const SGemm *g = r->g;
    int64_t panels = cdiv(g->m, SGEMM_MR), chunks = cdiv(panels, PACK_A_CHUNK);
    int64_t it = task / chunks, p0 = task % chunks * PACK_A_CHUNK;
    const float *a = g->a + it * g->a_bs;
    float *dst = r->a_dst + (size_t)it * r->pl.a_item;
    for (int64_t q = p0; q < min64(panels, p0 + PACK_A_CHUNK); q++) {
        int64_t i = q * SGEMM_MR;
        pack_a_panel(a + i * g->a_rs, g->a_rs, g->a_cs, min64(SGEMM_MR, g->m - i), g->k,
                     dst + i * g->k);
    }
}

/* Rows [i0, i1) x columns [j0, j1) of product t with k == 0: C = 0 (or unchanged). */
static void empty_depth(const SGemm *g, int64_t t, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    float *c = g->c + t * g->c_bs;
    for (int64_t i = i0; i < i1; i++)
        if (!g->accumulate) memset(c + i * g->ldc + j0, 0, (size_t)(j1 - j0) * sizeof(float));
    if (g->epi)
        for (int64_t i = i0; i < i1; i += SGEMM_MR)
            g->epi(g->epi_ctx, t, c + i * g->ldc + j0, g->ldc, i, j0, min64(SGEMM_MR, i1 - i),
                   j1 - j0);
}

/* One row times pre-packed B, columns [j0, j1) of product t: panel by panel, each over the whole
 * depth (one K block), the fused tail once at the end. Every other call walks the panels last
 * to first: a GEMV streams its B once per call, and B often is just too large for L2 (an LSTM
 * step's 1 MiB of recurrent weights in a 1 MiB L2), where streaming it the same way each time
 * makes LRU evict each line just before its next use; walked back and forth, the lines used
 * last are used first again. The order of the panels changes no sum. */
static void gemv_task(const Run *r, int64_t t, int64_t j0, int64_t j1) {
    const SGemm *g = r->g;
    const Plan *pl = &r->pl;
    float *c = g->c + t * g->c_bs;
    const float *ap = pl->lda ? g->a + item(t, g->a_mod) * g->a_bs
                              : r->a_packed + (size_t)item(t, g->a_mod) * pl->a_item;
    const float *bp = g->b_packed + (size_t)item(t, g->b_mod) * pl->b_item;
    int64_t q0 = j0 / SGEMM_NR, q1 = cdiv(j1, SGEMM_NR);
    for (int64_t i = 0; i < q1 - q0; i++) {
        int64_t q = r->backward ? q1 - 1 - i : q0 + i;
        r->uk(g->k, ap, pl->lda, bp + q * g->k * SGEMM_NR, SGEMM_NR, c + q * SGEMM_NR, g->ldc, 1,
              (int)min64(SGEMM_NR, j1 - q * SGEMM_NR), g->accumulate, NULL, NULL);
    }
    if (g->epi) g->epi(g->epi_ctx, t, c + j0, g->ldc, 0, j0, 1, j1 - j0);
}

void kern_sgemv_packed(const float *a, const float *b_packed, int64_t k, int64_t n, int64_t j0,
                       int64_t j1, float *c, bool backward) {
    UKernel uk = pick_kernel();
    int64_t q0 = j0 / SGEMM_NR, q1 = cdiv(j1, SGEMM_NR);
    for (int64_t i = 0; i < q1 - q0; i++) {
        int64_t q = backward ? q1 - 1 - i : q0 + i;
        uk(k, a, k, b_packed + q * k * SGEMM_NR, SGEMM_NR, c + q * SGEMM_NR, 0, 1,
           (int)min64(SGEMM_NR, n - q * SGEMM_NR), false, NULL, NULL);
    }
}

/* The tail of the tile at (row, col), C element (0, 0) at cp, for the AVX-512 tiles (on): tt
 * (r's clamp and bias order) with the bias of its first row or column, from bt (the product's
 * bias, NULL: none), and its residual's element. NULL when off. (Out of line and copying r's
 * tail per tile, it was 0.9% of SqueezeNet's samples.) */
static inline const TileTail *tile_tail(const Run *r, bool on, TileTail *tt, const float *bt,
                                        int64_t row, int64_t col, const float *cp) {
    if (!on) return NULL;
    if (bt != NULL) {
        if (r->bias->bias_cols)
            tt->bcol = bt + col;
        else
            tt->brow = bt + row;
        if (r->bias->epi->bias.res != NULL) tt->res = r->bias->epi->bias.res + (cp - r->g->c);
    }
    return tt;
}

static void gemm_task(void *ctx, int64_t task, int worker) {
    const Run *r = ctx;
    const SGemm *g = r->g;
    const Plan *pl = &r->pl;
    int64_t kb = 0; /* K split: the task's block */
    if (pl->parts_k > 1) kb = task, task = 0;
    int64_t per = pl->parts_m * pl->parts_n, t = task / per, q = task % per;
    int64_t i0 = q / pl->parts_n * pl->rows_part, i1 = min64(g->m, i0 + pl->rows_part);
    int64_t j0 = q % pl->parts_n * pl->cols_part, j1 = min64(g->n, j0 + pl->cols_part);
    if (g->k == 0) {
        empty_depth(g, t, i0, i1, j0, j1);
        return;
    }
    if (g->m == 1 && g->b_packed != NULL) {
        gemv_task(r, t, j0, j1);
        return;
    }
    int64_t k = g->k, ldc = g->ldc, k_lo = 0, k_hi = k;
    float *c = g->c + t * g->c_bs;
    if (pl->parts_k > 1) { /* block kb alone; its partial sums in C (kb 0) or psum */
        k_lo = kb * pl->kcs, k_hi = min64(k, k_lo + pl->kcs);
        if (kb > 0) c = r->psum + (size_t)(kb - 1) * (size_t)(g->m * pl->ldp), ldc = pl->ldp;
    }
    const float *ap = pl->lda || pl->a_task ? g->a + item(t, g->a_mod) * g->a_bs
                                            : r->a_packed + (size_t)item(t, g->a_mod) * pl->a_item;
    const float *bp = g->b_packed ? g->b_packed + (size_t)item(t, g->b_mod) * pl->b_item : NULL;
    float *buf = r->bbufs + (size_t)worker * (align16(pl->bbuf) + align16(pl->abuf));
    const float *bt =
        r->bias ? r->bias->bias + item(t, r->bias->bias_mod) * r->bias->bias_bs : NULL;
    float *abuf = buf + align16(pl->bbuf);
    for (int64_t jc = j0; jc < j1; jc += pl->ncs) {
        int64_t nc = min64(pl->ncs, j1 - jc);
        for (int64_t pc = k_lo; pc < k_hi; pc += pl->kcs) {
            int64_t kc = min64(pl->kcs, k_hi - pc), bstride, ldb = SGEMM_NR;
            int64_t full = nc; /* columns read where bb points (the rest from buf) */
            const float *bb;
            if (bp != NULL) {
                bb = bp + (jc / SGEMM_NR) * k * SGEMM_NR + pc * SGEMM_NR;
                bstride = k * SGEMM_NR;
            } else if (pl->b_inplace) {
                /* slivers are the rows' own 32-float pieces; a last partial one is packed (zero
                 * past nc), so no load reaches past a row */
                bb = g->b + item(t, g->b_mod) * g->b_bs + pc * g->b_rs + jc;
                bstride = SGEMM_NR;
                ldb = g->b_rs;
                full = nc / SGEMM_NR * SGEMM_NR;
                if (full < nc)
                    pack_b_block(g->b + item(t, g->b_mod) * g->b_bs, g->b_rs, 1, pc, kc, jc + full,
                                 nc - full, buf);
            } else {
                if (g->pack_b)
                    g->pack_b(g->b_ctx, t, pc, kc, jc, nc, buf);
                else
                    pack_b_block(g->b + item(t, g->b_mod) * g->b_bs, g->b_rs, g->b_cs, pc, kc, jc,
                                 nc, buf);
                bb = buf;
                bstride = kc * SGEMM_NR;
            }
            bool load = g->accumulate || pc > k_lo, last = pc + kc == k && pl->parts_k == 1;
            /* a clamp tail at AVX-512 is applied by the tiles to the final values (in
             * registers), not by a pass over each finished strip (12 rows of up to 2048+
             * columns: from L2) */
            TileTail tt = r->tail;
            bool tiles_tail = last && r->tail_tiles;
            /* Few row slivers times pre-packed B (an RNN's input projection: 32 x 1024 x 256):
             * panel by panel, each panel's slivers in turn, so each B panel comes in from L2 or
             * memory once and is reused from L1, where sliver by sliver it streamed once per
             * sliver. On the LSTM (1 thread) its steps then found more of their recurrent weight
             * still in L2: 284 -> 260 us a run. With more slivers (64-128 rows), or B read in
             * place, no better or slower (SqueezeNet +4%). */
            if (g->b_packed != NULL && !pl->a_task && i1 - i0 > SGEMM_MR &&
                i1 - i0 <= PANEL_FIRST_SLIVERS * SGEMM_MR) {
                for (int64_t jr = 0; jr < nc; jr += SGEMM_NR)
                    for (int64_t ir = i0; ir < i1; ir += SGEMM_MR)
                        r->uk(
                            kc, pl->lda ? ap + ir * pl->lda + pc : ap + ir * k + pc * SGEMM_MR,
                            pl->lda, bb + (jr / SGEMM_NR) * bstride, ldb, c + ir * ldc + jc + jr,
                            ldc, (int)min64(SGEMM_MR, i1 - ir), (int)min64(SGEMM_NR, nc - jr), load,
                            tile_tail(r, tiles_tail, &tt, bt, ir, jc + jr, c + ir * ldc + jc + jr),
                            NULL);
                if (last && g->epi && !tiles_tail)
                    for (int64_t ir = i0; ir < i1; ir += SGEMM_MR)
                        g->epi(g->epi_ctx, t, c + ir * ldc + jc, ldc, ir, jc,
                               (int)min64(SGEMM_MR, i1 - ir), nc);
                continue;
            }
            for (int64_t ir = i0; ir < i1; ir += SGEMM_MR) {
                int rows = (int)min64(SGEMM_MR, i1 - ir);
                const float *as = ap + ir * k + pc * SGEMM_MR;
                if (pl->lda) {
                    as = ap + ir * pl->lda + pc;
                } else if (pl->a_task) {
                    pack_a_panel(ap + ir * g->a_rs + pc * g->a_cs, g->a_rs, g->a_cs, rows, kc,
                                 abuf);
                    as = abuf;
                }
                float *cs = c + ir * ldc + jc;
                /* B in place, its kc rows apart in a plane: kc streams, too many for the hardware
                 * prefetcher, so where B comes from L3 or the other core (a 1x1 convolution's
                 * input, pushed out of L2 by a Winograd layer's blocks) the first row panel's
                 * pass waits on every miss. Its tiles prefetch into L2 the panel PF_PANELS ahead
                 * (one line pair per step), the first PF_PANELS panels before them. */
                bool pf_b = pl->b_inplace && ir == i0;
                if (pf_b)
                    for (int64_t jp = 0; jp < min64(full, PF_PANELS * SGEMM_NR); jp += 16)
                        for (int64_t p = 0; p < kc; p++)
                            _mm_prefetch((const char *)(bb + jp + p * ldb), _MM_HINT_T1);
                for (int64_t jr = 0; jr < nc; jr += SGEMM_NR) {
                    int cols = (int)min64(SGEMM_NR, nc - jr);
                    /* packed A from memory: the sliver's first tile streams it in */
                    UKernel uk = r->stream_a && jr == 0 ? r->uk_stream : r->uk;
                    const float *pf = pf_b && jr + PF_PANELS * SGEMM_NR < full
                                          ? bb + jr + PF_PANELS * SGEMM_NR
                                          : NULL;
                    if (jr < full)
                        uk(kc, as, pl->lda, bb + (jr / SGEMM_NR) * bstride, ldb, cs + jr, ldc, rows,
                           cols, load, tile_tail(r, tiles_tail, &tt, bt, ir, jc + jr, cs + jr), pf);
                    else
                        uk(kc, as, pl->lda, buf, SGEMM_NR, cs + jr, ldc, rows, cols, load,
                           tile_tail(r, tiles_tail, &tt, bt, ir, jc + jr, cs + jr), NULL);
                }
                if (last && g->epi && !tiles_tail) g->epi(g->epi_ctx, t, cs, ldc, ir, jc, rows, nc);
            }
        }
    }
}

/* c[j] += p[j] for j < n (c and p apart) */
static void add_row(float *restrict c, const float *restrict p, int64_t n) {
    for (int64_t j = 0; j < n; j++)
        c[j] += p[j];
}
static FAST_AVX512 void add_row_avx512(float *c, const float *p, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(c + j, _mm512_add_ps(_mm512_loadu_ps(c + j), _mm512_loadu_ps(p + j)));
    if (j < n) {
        __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c + j), _mm512_maskz_loadu_ps(m, p + j));
        _mm512_mask_storeu_ps(c + j, m, v);
    }
}

/* K split, rows [12 task, ...): C += each block's partial sums in block order (as one task
 * adds each block to C: the same sums), then the epilogue. */
static void ksum_task(void *ctx, int64_t task, int worker) {
    (void)worker;
    const Run *r = ctx;
    const SGemm *g = r->g;
    const Plan *pl = &r->pl;
    int64_t i0 = task * SGEMM_MR, i1 = min64(g->m, i0 + SGEMM_MR);
    void (*add)(float *, const float *, int64_t) = r->uk == ukr_avx512 ? add_row_avx512 : add_row;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t b = 1; b < pl->parts_k; b++)
            add(g->c + i * g->ldc,
                r->psum + (size_t)(b - 1) * (size_t)(g->m * pl->ldp) + i * pl->ldp, g->n);
    if (g->epi) g->epi(g->epi_ctx, 0, g->c + i0 * g->ldc, g->ldc, i0, 0, i1 - i0, g->n);
}

void kern_sgemm_run(const SGemm *g, SupPool *pool, void *scratch) {
    if (g->m <= 0 || g->n <= 0 || g->batch <= 0) return;
    static _Atomic unsigned gemv_calls; /* alternates the GEMVs' direction (gemv_task) */
    if (rows_gemv(g)) {
        rows_run(g, pool, (gemv_calls++ & 1) != 0);
        return;
    }
    if (kern_sgemm_amx_fits(g) && kern_sgemm_amx_run(g, pool, scratch)) return;
    Run r = {.g = g, .uk = pick_kernel(), .a_packed = g->a_packed};
    r.uk_stream = r.uk == ukr_avx512 ? ukr_avx512_stream
                  : r.uk == ukr_avx2 ? ukr_avx2_stream
                                     : r.uk;
    r.tail_tiles = (g->epi == epi_clamp || g->epi == epi_bias) && r.uk == ukr_avx512;
    if (g->epi == epi_clamp) {
        const KEpilogue *e = g->epi_ctx;
        r.tail = (TileTail){e->clamp, e->lo, e->hi, NULL, NULL, false, NULL, false};
    } else if (g->epi == epi_bias) {
        r.bias = g->epi_ctx;
        const KBias *kb = &r.bias->epi->bias;
        r.tail = (TileTail){kb->clamp, kb->lo, kb->hi, NULL, NULL, kb->first, NULL, kb->res_first};
    }
    if (g->m == 1 && g->b_packed != NULL) r.backward = (gemv_calls++ & 1) != 0;
    int n_threads = sup_pool_threads(pool);
    plan_gemm(g, n_threads, &r.pl);
    r.stream_a = g->a_packed != NULL && !r.pl.lda && !r.pl.a_task &&
                 (g->a_stream || (double)r.pl.a_item *
                                         (double)(g->a_mod ? min64(g->a_mod, g->batch) : g->batch) *
                                         sizeof(float) >
                                     (n_threads == 1 ? STREAM_A_BYTES_1T : STREAM_A_BYTES));
    float *s = scratch;
    if (r.pl.n_a > 0 && g->k > 0) {
        r.a_dst = s;
        int64_t chunks = cdiv(cdiv(g->m, SGEMM_MR), PACK_A_CHUNK);
        sup_pool_run((double)r.pl.n_a * (double)r.pl.a_item > 65536 ? pool : NULL,
                     r.pl.n_a * chunks, pack_a_task, &r);
        r.a_packed = s;
    }
    r.bbufs = s + align16((size_t)r.pl.n_a * r.pl.a_item);
    if (r.pl.parts_k > 1) {
        r.psum = r.bbufs + (size_t)n_threads * (align16(r.pl.bbuf) + align16(r.pl.abuf));
        sup_pool_run(pool, r.pl.parts_k, gemm_task, &r);
        sup_pool_run(pool, cdiv(g->m, SGEMM_MR), ksum_task, &r);
        return;
    }
    int64_t n_tasks = g->batch * r.pl.parts_m * r.pl.parts_n;
    double macs = (double)g->batch * task_weight(g) * (double)g->n * (double)g->k;
    sup_pool_run(macs >= 2.0 * MIN_TASK_MACS ? pool : NULL, n_tasks, gemm_task, &r);
}

int kern_sgemm(KCall *kc, const SGemm *g) {
    SupPool *pool = kc->pool;
    size_t bytes = kern_sgemm_scratch_bytes(g, sup_pool_threads(pool));
    void *scratch = NULL;
    if (bytes > 0 && (scratch = k_scratch_raw(kc, bytes)) == NULL) return -1; /* contents ignored */
    kern_sgemm_run(g, pool, scratch);
    return 0;
}

/* ---- operands packed once ---------------------------------------------------------------------
 */

/* What a packed operand is made from: items of a strided matrix. */
typedef struct PackSrc {
    bool is_a;          /* kern_sgemm_pack_a (else pack_b) */
    int64_t rows, cols; /* m x k for A, k x n for B */
    int64_t rs, cs, bs; /* element strides; item stride */
    int64_t items;
} PackSrc;

static size_t pack_item_floats(const PackSrc *s) {
    return s->is_a ? kern_sgemm_packed_a_floats(s->rows, s->cols)
                   : kern_sgemm_packed_b_floats(s->rows, s->cols);
}

static void fill_packed(void *dst, const DLTensor *src, const void *arg) {
    const PackSrc *s = arg;
    const float *base = k_ptr(src);
    size_t each = pack_item_floats(s);
    for (int64_t i = 0; i < s->items; i++) {
        float *d = (float *)dst + (size_t)i * each;
        if (s->is_a)
            kern_sgemm_pack_a(base + i * s->bs, s->rs, s->cs, s->rows, s->cols, d);
        else
            kern_sgemm_pack_b(base + i * s->bs, s->rs, s->cs, s->rows, s->cols, d);
    }
}

/* B's bf16 parts for the AMX product (SGemm.b_amx) after a 64-byte header whose first byte is
 * 1 when every item could be split. */
static void fill_amx_parts(void *dst, const DLTensor *src, const void *arg) {
    const PackSrc *s = arg;
    const float *base = k_ptr(src);
    uint8_t *ok = dst;
    uint16_t *d = (uint16_t *)(ok + 64);
    size_t each = kern_sgemm_amx_b_u16(s->rows, s->cols);
    *ok = 1;
    for (int64_t i = 0; i < s->items; i++)
        if (!kern_sgemm_amx_split_b(base + i * s->bs, s->rs, s->cs, s->rows, s->cols,
                                    d + (size_t)i * each))
            *ok = 0;
}

/* The k_prepared key of a packing: FNV-1a over its parameters. */
static uint64_t pack_key(const PackSrc *s) {
    int64_t v[] = {0x53474d4d /* "SGMM" */,
                   s->is_a,
                   s->rows,
                   s->cols,
                   s->rs,
                   s->cs,
                   s->bs,
                   s->items,
                   SGEMM_MR,
                   SGEMM_NR};
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (int b = 0; b < 8; b++)
            h = (h ^ (uint8_t)((uint64_t)v[i] >> (8 * b))) * 1099511628211ull;
    return h;
}

void kern_sgemm_prepare(KCall *kc, SGemm *g, bool a_side, uint32_t arg, int64_t items) {
    if (g->k <= 0 || g->m <= 0 || g->n <= 0 || items <= 0 || arg >= kc->n_args) return;
    /* an input of the run (in_const 2: packed per run, which costs what packing per call does)
     * that the product would read in place stays unpacked (the LSTM's and BERT-tiny's inputs) */
    if (a_side && kc->in_const != NULL && kc->arg_start[arg] < kc->n_in &&
        kc->in_const[kc->arg_start[arg]] == 2 && a_in_place(g) != 0)
        return;
    /* one row times a weight of ROWS_IN_PLACE_BYTES or more: rowdot reads it where it lies
     * (no second copy) */
    if (!a_side && rows_shape(g) &&
        (double)g->n * (double)g->b_cs * sizeof(float) >= ROWS_IN_PLACE_BYTES)
        return;
    PackSrc s = {.is_a = a_side, .items = items};
    if (a_side) {
        s.rows = g->m, s.cols = g->k, s.rs = g->a_rs, s.cs = g->a_cs, s.bs = g->a_bs;
    } else {
        s.rows = g->k, s.cols = g->n, s.rs = g->b_rs, s.cs = g->b_cs, s.bs = g->b_bs;
    }
    /* on AMX, a weight of a product large enough is kept as its bf16 parts instead of packed
     * floats (64 bytes first; their first byte 1: every value could be split; if not, the
     * parts stay unused in the cache and the floats are packed too) */
    if (!a_side && kern_sgemm_amx_presplit(g)) {
        const uint8_t *q = k_prepared(
            kc, kc->arg_start[arg], pack_key(&s) ^ 0x414d5842 /* "AMXB" */,
            64 + (size_t)items * kern_sgemm_amx_b_u16(s.rows, s.cols) * 2, fill_amx_parts, &s);
        if (q != NULL && q[0] == 1) {
            g->b_amx = (const uint16_t *)(q + 64);
            return;
        }
    }
    const void *p =
        k_prepared(kc, kc->arg_start[arg], pack_key(&s),
                   (size_t)items * pack_item_floats(&s) * sizeof(float), fill_packed, &s);
    if (a_side)
        g->a_packed = p;
    else
        g->b_packed = p;
}

/* ---- the call's fused tail -------------------------------------------------------------------
 */

/* SGemmEpi over KCall.epi: block rows become ranges of output 0's flat indices (t * c_bs +
 * i * ldc + j), whole rows merged into one range. */
static void epi_kcall(void *ctx, int64_t t, float *c, int64_t ldc, int64_t row0, int64_t col0,
                      int64_t rows, int64_t cols) {
    const SGemmKEpi *e = ctx;
    (void)c;
    int64_t flat = t * e->c_bs + row0 * ldc + col0;
    if (cols == ldc) {
        e->epi->apply(e->epi->ctx, flat, rows * cols);
        return;
    }
    if (e->epi->apply2 != NULL) {
        e->epi->apply2(e->epi->ctx, flat, rows, cols, ldc);
        return;
    }
    for (int64_t i = 0; i < rows; i++)
        e->epi->apply(e->epi->ctx, flat + i * ldc, cols);
}

/* SGemmEpi of a tail that is one clamp: the finished block clamped in place (C is the tail's
 * result, KEpilogue.clamp_out). */
static void epi_clamp(void *ctx, int64_t t, float *c, int64_t ldc, int64_t row0, int64_t col0,
                      int64_t rows, int64_t cols) {
    const KEpilogue *e = ctx;
    (void)t, (void)row0, (void)col0;
    kern_clamp_rows(c, ldc, rows, cols, e->clamp, e->lo, e->hi);
}

/* SGemmEpi of a bias tail (SGemmKEpi.bias): the finished block biased and clamped in place (C is
 * the tail's result). */
static void epi_bias(void *ctx, int64_t t, float *c, int64_t ldc, int64_t row0, int64_t col0,
                     int64_t rows, int64_t cols) {
    const SGemmKEpi *e = ctx;
    const KBias *kb = &e->epi->bias;
    const float *b = e->bias + item(t, e->bias_mod) * e->bias_bs;
    kern_bias_rows(c, ldc, rows, cols, e->bias_cols ? NULL : b + row0,
                   e->bias_cols ? b + col0 : NULL, kb->first, kb->clamp, kb->lo, kb->hi,
                   kb->res ? kb->res + t * e->c_bs + row0 * ldc + col0 : NULL, kb->res_first);
}

/* g's epilogue: tail ke's bias b, per column or per row of each of `groups` products */
static void bind_bias(SGemm *g, SGemmKEpi *e, const KEpilogue *ke, const float *b, bool cols,
                      int64_t groups) {
    *e = (SGemmKEpi){ke, g->c_bs, b, cols, cols ? 0 : g->m, cols ? 1 : groups};
    g->epi = epi_bias;
    g->epi_ctx = e;
}

void kern_sgemm_bias_rows(SGemm *g, SGemmKEpi *e, KEpilogue *ke, const float *b, bool first,
                          uint8_t clamp) {
    *ke = (KEpilogue){.bias = {.b = b, .mask = 1u << 1, .first = first, .clamp = clamp}};
    bind_bias(g, e, ke, b, false, 1);
}

bool kern_sgemm_bind_epi(KCall *kc, const DLTensor *out0, SGemm *g, SGemmKEpi *e, int bias_how,
                         int64_t groups) {
    if (kc->epi == NULL || g->c != k_ptr(out0) || kc->epi->begin(kc->epi->ctx, out0) != 0)
        return false;
    if (kc->epi->clamp != K_CLAMP_NONE && kc->epi->clamp_out != NULL) {
        /* C written straight into the tail's result (same flat layout), clamped block by block
         * as it is final: no pass of the program */
        g->c = kc->epi->clamp_out;
        g->epi = epi_clamp;
        g->epi_ctx = (void *)kc->epi;
        return true;
    }
    const KBias *kb = &kc->epi->bias;
    uint32_t last = (uint32_t)out0->ndim - 1;
    bool rows = bias_how == SGEMM_BIAS_ROWS && out0->ndim == 4 && kb->mask == 1u << 1 &&
                out0->shape[1] == g->m * groups;
    bool cols = bias_how == SGEMM_BIAS_COLS && out0->ndim >= 1 && kb->mask == 1u << last &&
                out0->shape[last] == g->n && g->ldc == g->n;
    if (kb->b != NULL && !kb->res_inplace && kc->epi->clamp_out != NULL && (rows || cols)) {
        /* a per-channel bias (then maybe a clamp) the same way: in the AVX-512 tiles' registers,
         * else by a pass over each finished block */
        g->c = kc->epi->clamp_out;
        bind_bias(g, e, kc->epi, kb->b, cols, groups);
        return true;
    }
    *e = (SGemmKEpi){kc->epi, g->c_bs, NULL, false, 0, 0};
    g->epi = epi_kcall;
    g->epi_ctx = e;
    return true;
}

/* ---- the table -------------------------------------------------------------------------------
 */

const KernelDef kern_fast_gemm[] = {
    {OP_ID_NN_DENSE, kern_fast_dense},
    {OP_ID_NN_MATMUL, kern_fast_matmul},
    {OP_ID_NN_BATCH_MATMUL, kern_fast_batch_matmul},
    {OP_ID_NN_CONV2D, kern_fast_conv2d},
    {0, NULL},
};
