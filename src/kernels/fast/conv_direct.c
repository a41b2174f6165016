/* conv_direct.c - nn.conv2d as a direct convolution with the output channels on the vector lanes
 * (conv.h), AVX-512 and AVX2: no im2col.
 *
 * The product is the transposed one of conv.c's GEMM: C^T (positions x output channels) =
 * im2col^T (positions x taps) W^T (taps x output channels). A register tile is R output
 * positions (8..14, chosen per call to waste the fewest; consecutive in the flattened output
 * plane, so a tile may span output rows) by 32 output channels: 2R zmm accumulators. Each tap
 * p = (input channel, ky, kx) loads one 32-float row of the weights (packed once,
 * kern_sgemm_pack_b's layout of W^T) and broadcasts R input values straight from the input:
 * position i's value of tap p is at x[base_i + off[p]], base_i the position's top-left corner in
 * the (zero-padded) input, off[p] the tap's offset, the same for every position. So a strided or
 * dilated convolution, or one of few input channels, costs what a stride-1 one does (the im2col
 * packer gathered those), and small output planes (7x7, 9x9) fill the lanes with output channels
 * rather than with 49 or 81 positions. Padding: the input is copied once per call into
 * zero-padded planes (every float written: scratch is not zero-filled), so every read is inside
 * them.
 *
 * A tile whose corners are evenly spaced (its positions in one output row, stride 1 or 2) reads
 * them through one pointer (the row tiles). The finished R x 32 tile is transposed in registers
 * (two 16 x 16 transposes) and stored as 32 runs of R output floats. At AVX2 the tile is R = 4..6
 * positions by 16 channels (half of a packed panel; 2R ymm accumulators), stored through 8 x 8
 * transposes. Each output is the sum over taps in increasing order with one FMA per tap, whatever
 * the tile or thread split (results do not depend on the thread count). Threads take (image, group,
 * 32 output channels (16 at AVX2), range of tiles) tasks; the fused tail runs per task.
 * docs/kernels.md has the measurements behind this path and its rules. */
#include "kernels/fast/conv.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define DT_POS_MIN 8 /* output positions per tile: 8 .. 14 (2 x 14 accumulators) */
#define DT_POS_MAX 14
#define DT_CH SGEMM_NR     /* output channels per tile */
#define DT_MIN_MACS 262144 /* multiply-adds per task at least when splitting for threads */
/* A panel of weights this deep (256 KiB: 2048 taps of 32 channels) or more comes from L2 or
 * memory at each step: the tiles prefetch into L1 the weights DT_NEAR_AHEAD bytes ahead (dtile) */
#define DT_NEAR_TAPS 2048
#define DT_NEAR_AHEAD 8192

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool kern_conv_direct_fits(const Conv *c) {
    /* 16+ output channels per group fill at least half of the lanes; with fewer than 64 taps the
     * tile's transposes weigh too much (SqueezeNet's 27-tap first layer, 64 channels: 0.53 vs
     * 0.52 ms on the im2col product), unless there are at most 32 output channels, which fill
     * the product's 12-row panels worse (MobileNetV2's 27-tap 3->32 first layer: 0.28 vs 0.32
     * ms); the 2^24 limits keep the offsets' arithmetic of huge shapes in range */
    int64_t taps = c->cin_g * c->kh * c->kw;
    SupIsa isa = sup_isa();
    /* AVX2: not 1x1 (1.05-1.3x the product's time on MobileNetV2's and ResNet's 1x1 layers) */
    if (isa == SUP_ISA_AVX2 && c->kh * c->kw == 1) return false;
    return isa >= SUP_ISA_AVX2 && c->cout_g >= 16 &&
           (taps >= 64 || (taps >= 16 && c->cout_g <= 32)) && c->h + c->pt + c->pb < (1 << 24) &&
           c->w + c->pl + c->pr < (1 << 24) && taps < (1 << 24);
}

typedef struct DRun {
    const Conv *c;
    const float *x;     /* input planes, hp x wp each: the padded copy, or the input itself */
    int64_t hp, wp;     /* their extents */
    const float *w;     /* packed weights: per group an item of w_item floats */
    size_t w_item;      /* kern_sgemm_packed_b_floats(k, cout_g) */
    const int64_t *off; /* k tap offsets */
    int64_t k, np;      /* taps; output positions per plane (oh * ow) */
    int64_t pw;         /* output channels per task: 32, or 16 to make more tasks */
    int64_t panels;     /* pw-channel panels per group */
    int rows;           /* positions per tile (tile_positions) */
    bool avx2;          /* the AVX2 tiles (16 channels a panel), else the AVX-512 ones */
    int64_t tiles;      /* tiles per plane */
    int64_t chunks;     /* tasks per (image, group, panel) */
    float *out;
    const KEpilogue *epi; /* the call's fused tail, or NULL */
} DRun;

/* ---- the tile ----------------------------------------------------------------------------- */

#define INLINE static inline __attribute__((always_inline))
#define POS14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

#define D_DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
#define D_PTR(i)                                                                                   \
    const float *x##i = x + base[i < R && !S ? i : 0];                                             \
    if (i < R && (!S || i == 0)) __asm__("" : "+r"(x##i));
#define D_STEP(i)                                                                                  \
    if (i < R) {                                                                                   \
        __m512 a = _mm512_set1_ps(S ? x0[o + i * S] : x##i[o]);                                    \
        c##i##0 = _mm512_fmadd_ps(a, w0, c##i##0);                                                 \
        if (W == 2) c##i##1 = _mm512_fmadd_ps(a, w1, c##i##1);                                     \
    }
#define D_ROW0(i) r[i] = c##i##0;
#define D_ROW1(i) r[i] = c##i##1;

/* One tile: R positions with corners base[0..R) (all valid), W 16-channel vectors of the packed
 * weights w (k rows of 32 floats), into dst[j * ldo + i] for channels j < cols, positions
 * i < rows. S > 0: a row tile, position i's corner at base[0] + i * S (compile-time), so one
 * input pointer serves all R broadcasts, each at its own constant displacement. With R
 * pointers (S = 0), 14 pointers, the weights, the offsets and the counters outnumber the
 * general registers and GCC reloads some from the stack every tap. ResNet-18's 3x3/2 layers
 * (Intel Xeon, per-layer profile medians in the model, 3 interleaved rounds of 60 runs): 64 ->
 * 128 833 -> 779 us and 128 -> 256 799 -> 725 us on 1 thread, 64 -> 128 492 -> 449 on 2. The
 * 7 x 7 layers' tiles span rows: unchanged. Prefetching each tap's input lines 9 or 27 taps
 * ahead as well: no faster, and the 512-channel 7 x 7 layers 5% slower. */
FAST_AVX512 INLINE void dtile(const int R, const int W, const int S, const float *x,
                              const int64_t *base, const int64_t *off, int64_t k, const float *w,
                              float *dst, int64_t ldo, int rows, int cols, const char *pf,
                              int64_t pstep) {
    POS14(D_PTR)
    POS14(D_DECL)
    const bool near = k >= DT_NEAR_TAPS;
    for (int64_t p = 0; p < k; p++, w += DT_CH, pf += pstep) {
        int64_t o = off[p];
        _mm_prefetch(pf, _MM_HINT_T1);
        if (near) { /* addresses that may lie past the weights' end */
            _mm_prefetch((const char *)((uintptr_t)w + DT_NEAR_AHEAD), _MM_HINT_T0);
            if (W == 2)
                _mm_prefetch((const char *)((uintptr_t)w + DT_NEAR_AHEAD + 64), _MM_HINT_T0);
        }
        __m512 w0 = _mm512_loadu_ps(w), w1 = W == 2 ? _mm512_loadu_ps(w + 16) : w0;
        POS14(D_STEP)
    }
    __mmask16 m = (__mmask16)((1u << rows) - 1);
    __m512 r[16];
    for (int h = 0; h < W; h++) {
        if (h == 0) {
            POS14(D_ROW0)
        } else {
            POS14(D_ROW1)
        }
        for (int i = R; i < 16; i++)
            r[i] = _mm512_setzero_ps();
        conv_transpose16(r);
        for (int j = 0; j < 16 && 16 * h + j < cols; j++)
            _mm512_mask_storeu_ps(dst + (16 * h + j) * ldo, m, r[j]);
    }
}

typedef void (*DTile)(const float *x, const int64_t *base, const int64_t *off, int64_t k,
                      const float *w, float *dst, int64_t ldo, int rows, int cols, const char *pf,
                      int64_t pstep);
/* dtile at (R, W, S) as a DTile named NAME */
#define D_DEF(NAME, R, W, S)                                                                       \
    static FAST_AVX512 void NAME(const float *x, const int64_t *base, const int64_t *off,          \
                                 int64_t k, const float *w, float *dst, int64_t ldo, int rows,     \
                                 int cols, const char *pf, int64_t pstep) {                        \
        dtile(R, W, S, x, base, off, k, w, dst, ldo, rows, cols, pf, pstep);                       \
    }
#define D_FN(R, W)                                                                                 \
    D_DEF(dtile_##R##_##W, R, W, 0)                                                                \
    D_DEF(dtile_##R##_##W##_s1, R, W, 1)                                                           \
    D_DEF(dtile_##R##_##W##_s2, R, W, 2)
#define D_FNS(R) D_FN(R, 1) D_FN(R, 2)
D_FNS(8)
D_FNS(9)
D_FNS(10)
D_FNS(11)
D_FNS(12)
D_FNS(13)
D_FNS(14)
static const DTile dtiles[DT_POS_MAX - DT_POS_MIN + 1][2] = {
    {dtile_8_1, dtile_8_2},   {dtile_9_1, dtile_9_2},   {dtile_10_1, dtile_10_2},
    {dtile_11_1, dtile_11_2}, {dtile_12_1, dtile_12_2}, {dtile_13_1, dtile_13_2},
    {dtile_14_1, dtile_14_2}};
#define D_ROWS(R)                                                                                  \
    {                                                                                              \
        {dtile_##R##_1_s1, dtile_##R##_1_s2}, { dtile_##R##_2_s1, dtile_##R##_2_s2 }               \
    }
static const DTile dtiles_row[DT_POS_MAX - DT_POS_MIN + 1][2][2] = {
    D_ROWS(8), D_ROWS(9), D_ROWS(10), D_ROWS(11), D_ROWS(12), D_ROWS(13), D_ROWS(14)};

/* The AVX2 tile: R positions (4..6) by 16 channels (W = 2 8-float vectors; W = 1 for the last
 * panel of 8 or fewer), 2R ymm accumulators of the 16 (8 or more: two FMAs a cycle of 4 cycles'
 * latency); stored through 8 x 8 transposes. */
#define DT2_POS_MIN 4
#define DT2_POS_MAX 6
#define POS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define E_DECL(i) __m256 e##i##0 = _mm256_setzero_ps(), e##i##1 = _mm256_setzero_ps();
#define E_STEP(i)                                                                                  \
    if (i < R) {                                                                                   \
        __m256 a = _mm256_broadcast_ss(x##i + o);                                                  \
        e##i##0 = _mm256_fmadd_ps(a, w0, e##i##0);                                                 \
        if (W == 2) e##i##1 = _mm256_fmadd_ps(a, w1, e##i##1);                                     \
    }
#define E_ROW0(i) r[i] = e##i##0;
#define E_ROW1(i) r[i] = e##i##1;

FAST_AVX2 INLINE void dtile2(const int R, const int W, const float *x, const int64_t *base,
                             const int64_t *off, int64_t k, const float *w, float *dst, int64_t ldo,
                             int rows, int cols, const char *pf, int64_t pstep) {
    const int S = 0;
    POS6(D_PTR)
    POS6(E_DECL)
    const bool near = k >= DT_NEAR_TAPS;
    for (int64_t p = 0; p < k; p++, w += DT_CH, pf += pstep) {
        int64_t o = off[p];
        _mm_prefetch(pf, _MM_HINT_T1);
        if (near) /* the half panel's line (dtile) */
            _mm_prefetch((const char *)((uintptr_t)w + DT_NEAR_AHEAD), _MM_HINT_T0);
        __m256 w0 = _mm256_loadu_ps(w), w1 = W == 2 ? _mm256_loadu_ps(w + 8) : w0;
        POS6(E_STEP)
    }
    __m256i m =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 r[8];
    for (int h = 0; h < W; h++) {
        if (h == 0) {
            POS6(E_ROW0)
        } else {
            POS6(E_ROW1)
        }
        for (int i = R; i < 8; i++)
            r[i] = _mm256_setzero_ps();
        conv_transpose8(r);
        for (int j = 0; j < 8 && 8 * h + j < cols; j++)
            _mm256_maskstore_ps(dst + (8 * h + j) * ldo, m, r[j]);
    }
}

#define D2_FN(R, W)                                                                                \
    static FAST_AVX2 void dtile2_##R##_##W(                                                        \
        const float *x, const int64_t *base, const int64_t *off, int64_t k, const float *w,        \
        float *dst, int64_t ldo, int rows, int cols, const char *pf, int64_t pstep) {              \
        dtile2(R, W, x, base, off, k, w, dst, ldo, rows, cols, pf, pstep);                         \
    }
#define D2_FNS(R) D2_FN(R, 1) D2_FN(R, 2)
D2_FNS(4)
D2_FNS(5)
D2_FNS(6)
static const DTile dtiles2[DT2_POS_MAX - DT2_POS_MIN + 1][2] = {
    {dtile2_4_1, dtile2_4_2}, {dtile2_5_1, dtile2_5_2}, {dtile2_6_1, dtile2_6_2}};

/* Positions per tile, from lo..hi: the fewest positions computed in all (the last tile repeats
 * its last position), the larger tile on a tie. 49 positions: 7 tiles of 7 would waste nothing
 * but leave 14 of 31 registers idle; 5 of 10 compute 50. */
static int tile_positions(int64_t np, int lo, int hi) {
    int best = hi;
    for (int rr = hi - 1; rr >= lo; rr--)
        if (cdiv(np, rr) * rr < cdiv(np, best) * best) best = rr;
    return best;
}

/* ---- the run ------------------------------------------------------------------------------ */

/* Input plane t into its zero-padded copy (scratch with stale contents: every float of the
 * copy is written, the padding as zeros). */
static void pad_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const DRun *r = ctx;
    const Conv *c = r->c;
    const float *src = c->x + t * c->h * c->w;
    float *plane = (float *)r->x + t * r->hp * r->wp;
    /* the rows and columns a window reaches (the bottom and right padding may be more) */
    int64_t top = min64(c->pt, r->hp), left = min64(c->pl, r->wp);
    int64_t rows = min64(c->h, r->hp - top), cols = min64(c->w, r->wp - left);
    rows = rows > 0 ? rows : 0, cols = cols > 0 ? cols : 0;
    memset(plane, 0, (size_t)(top * r->wp) * sizeof(float));
    for (int64_t y = 0; y < rows; y++) {
        float *row = plane + (top + y) * r->wp;
        memset(row, 0, (size_t)left * sizeof(float));
        memcpy(row + left, src + y * c->w, (size_t)cols * sizeof(float));
        memset(row + left + cols, 0, (size_t)(r->wp - left - cols) * sizeof(float));
    }
    memset(plane + (top + rows) * r->wp, 0, (size_t)((r->hp - top - rows) * r->wp) * sizeof(float));
}

static void direct_task(void *ctx, int64_t task, int worker) {
    (void)worker;
    const DRun *r = ctx;
    const Conv *c = r->c;
    int64_t chunk = task % r->chunks, rest = task / r->chunks;
    int64_t panel = rest % r->panels, ng = rest / r->panels;
    int64_t n = ng / c->groups, g = ng % c->groups;
    int64_t per = cdiv(r->tiles, r->chunks);
    int64_t t0 = chunk * per, t1 = min64(r->tiles, t0 + per);
    if (t0 >= t1) return;
    const float *x = r->x + (n * c->cin + g * c->cin_g) * r->hp * r->wp;
    /* a panel is pw channels: a packed 32-column panel, or half of one (its 16-float half) */
    int64_t ch0 = panel * r->pw; /* the first channel in the group */
    const float *w = r->w + (size_t)g * r->w_item + ch0 / DT_CH * r->k * DT_CH + ch0 % DT_CH;
    int64_t oc0 = g * c->cout_g + ch0;
    int cols = (int)min64(r->pw, c->cout_g - ch0);
    float *o = r->out + (n * c->cout + oc0) * r->np;
    DTile fn = r->avx2 ? dtiles2[r->rows - DT2_POS_MIN][cols > 8]
                       : dtiles[r->rows - DT_POS_MIN][cols > 16];
    /* tiles whose positions lie in one output row, at strides 1 and 2 (AVX-512) */
    const DTile *row_fns =
        !r->avx2 && (c->sw == 1 || c->sw == 2) ? dtiles_row[r->rows - DT_POS_MIN][cols > 16] : NULL;
    /* The next 32-channel panel's weights (the next task of this thread, in the pool's order:
     * the next panel of the group, or the next group's first) are prefetched into L2 while this
     * panel's tiles run, an equal part by each tile: they read this panel's weights from L2
     * (prefetched the same way), and leave the memory idle. A 512 -> 512 layer at 7x7 reads
     * 590 KB a panel, 9.4 MB a layer, which came in at the core's memory rate while the first
     * tile of each panel waited on it. The first tile takes a part too: with the parts on the
     * tiles after it alone, ResNet-18's 7x7 layers ran 3-10% slower at 1 thread (per-layer
     * profiles, Intel Xeon). */
    const char *pf = (const char *)w;
    int64_t pf_bytes = 0, parts = t1 - t0;
    if (ch0 + r->pw < c->cout_g && (ch0 + r->pw) % DT_CH == 0) {
        pf = (const char *)(r->w + (size_t)g * r->w_item + (ch0 + r->pw) * r->k);
        pf_bytes = r->k * DT_CH * (int64_t)sizeof(float);
    } else if (ch0 + r->pw >= c->cout_g && g + 1 < c->groups) {
        pf = (const char *)(r->w + (size_t)(g + 1) * r->w_item);
        pf_bytes = r->k * DT_CH * (int64_t)sizeof(float);
    }
    int64_t share = cdiv(pf_bytes, parts), pstep = min64(64, cdiv(share, r->k));
    int64_t base[DT_POS_MAX], oy = t0 * r->rows / c->ow, ox = t0 * r->rows % c->ow;
    for (int64_t t = t0; t < t1; t++) {
        int64_t q0 = t * r->rows;
        int rows = (int)min64(r->rows, r->np - q0);
        for (int i = 0; i < rows; i++) { /* (oy, ox) walks the positions in order */
            base[i] = oy * c->sh * r->wp + ox * c->sw;
            if (++ox == c->ow) ox = 0, oy++;
        }
        for (int i = rows; i < r->rows; i++) /* past the plane: the last position again */
            base[i] = base[rows - 1];
        /* tile j of the task prefetches part j of the next panel */
        int64_t part = t - t0;
        bool on = pf_bytes > 0 && part * share < pf_bytes;
        /* each row break moves a corner by the same amount, so the last corner tells whether
         * every corner is base[0] + i * sw (a whole tile: a partial one repeats its last) */
        DTile f = fn;
        if (row_fns != NULL && rows == r->rows && base[rows - 1] == base[0] + (rows - 1) * c->sw)
            f = row_fns[c->sw - 1];
        f(x, base, r->off, r->k, w, o + q0, r->np, rows, cols, on ? pf + part * share : pf,
          on ? pstep : 0);
    }
    if (r->epi != NULL) { /* whole planes are one range (a call of the tail costs ~100 ns) */
        int64_t q0 = t0 * r->rows, q1 = min64(r->np, t1 * r->rows);
        int64_t flat = (n * c->cout + oc0) * r->np + q0;
        if (q1 - q0 == r->np)
            conv_tail(r->epi, r->out, flat, cols * r->np);
        else
            for (int j = 0; j < cols; j++)
                conv_tail(r->epi, r->out, flat + j * r->np, q1 - q0);
    }
}

int kern_conv_direct(KCall *kc, const Conv *c, const DLTensor *o) {
    DRun r = {.c = c, .out = k_ptr(o)};
    r.k = c->cin_g * c->kh * c->kw;
    r.np = c->oh * c->ow;
    /* tasks: (image, group, panel) units of 32 channels (16 at AVX2), each a whole plane (one
     * range for the fused tail); when the threads cannot share them evenly, the units' tiles
     * are split into ranges */
    int64_t threads = k_threads(kc), ng = c->batch * c->groups;
    r.avx2 = sup_isa() == SUP_ISA_AVX2;
    r.pw = DT_CH;
    /* AVX-512: 32-channel tiles even where 16-channel units would make more tasks (those take
     * ranges of tiles below). A 14 x 16 tile loads 15 vectors for 14 FMAs: on a core with two
     * FMA units it is load-bound at half the 10 x 32 tile's rate (DQN's convolutions at 2
     * threads, Intel Xeon: 32.8, 29.0, 21.3 -> 27.4, 24.8, 18.0 us; the model 176-180 ->
     * 172-174 us). One FMA unit (Zen 4) ran both at the same rate. */
    if (r.avx2) r.pw = 16;
    r.panels = cdiv(c->cout_g, r.pw);
    r.rows = r.avx2 ? tile_positions(r.np, DT2_POS_MIN, DT2_POS_MAX)
                    : tile_positions(r.np, DT_POS_MIN, DT_POS_MAX);
    r.tiles = cdiv(r.np, r.rows);
    bool padded = c->pt || c->pl || c->pb || c->pr;
    /* the padded extents a window reaches (the bottom and right padding may be more) */
    r.hp = padded ? (c->oh - 1) * c->sh + (c->kh - 1) * c->dh + 1 : c->h;
    r.wp = padded ? (c->ow - 1) * c->sw + (c->kw - 1) * c->dw + 1 : c->w;

    /* weights: W^T per group (k x cout_g), packed once when constant */
    SGemm wg = {.m = 1,
                .n = c->cout_g,
                .k = r.k,
                .batch = c->groups,
                .b = k_ptr(k_arg(kc, 1)),
                .b_rs = 1,
                .b_cs = r.k,
                .b_bs = c->cout_g * r.k};
    r.w_item = kern_sgemm_packed_b_floats(r.k, c->cout_g);
    kern_sgemm_prepare(kc, &wg, false, 1, c->groups);
    r.w = wg.b_packed;
    if (r.w == NULL) {
        float *w = k_scratch_n(kc, (int64_t)r.w_item * c->groups, sizeof(float));
        if (w == NULL) return -1;
        for (int64_t g = 0; g < c->groups; g++)
            kern_sgemm_pack_b(wg.b + g * wg.b_bs, 1, r.k, r.k, c->cout_g, w + g * r.w_item);
        r.w = w;
    }
    int64_t *off = k_scratch_n(kc, r.k, sizeof(int64_t));
    if (off == NULL) return -1;
    for (int64_t ch = 0, p = 0; ch < c->cin_g; ch++)
        for (int64_t ky = 0; ky < c->kh; ky++)
            for (int64_t kx = 0; kx < c->kw; kx++)
                off[p++] = ch * r.hp * r.wp + ky * c->dh * r.wp + kx * c->dw;
    r.off = off;
    r.x = c->x;
    if (padded) {
        int64_t n_pad; /* floats of the copies, each written whole by pad_task */
        if (__builtin_mul_overflow(c->batch * c->cin, r.hp * r.wp, &n_pad) ||
            n_pad > INT64_MAX / (int64_t)sizeof(float))
            return k_error(kc, "out of memory (padded copy of the input)");
        float *xp = k_scratch_raw(kc, (size_t)n_pad * sizeof(float));
        if (xp == NULL) return -1;
        r.x = xp;
        k_parallel(kc, c->batch * c->cin, pad_task, &r);
    }

    /* units the threads share evenly run whole; otherwise split (a range of tiles per
     * channel costs a tail call per channel) */
    int64_t units = ng * r.panels;
    r.chunks = 1;
    if (threads > 1 && units % threads != 0 && units < 4 * threads) {
        double macs = (double)r.np * (double)r.k * (double)r.pw;
        int64_t want = cdiv(4 * threads, units), most = (int64_t)(macs / DT_MIN_MACS);
        r.chunks = min64(min64(want, most > 1 ? most : 1), r.tiles);
    }
    r.epi = conv_bind_tail(kc, o, &r.out);
    k_parallel(kc, units * r.chunks, direct_task, &r);
    kc->epi_done = r.epi != NULL;
    return 0;
}
