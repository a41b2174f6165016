/* transpose.c - the fast transpose (fast.h) for 4-byte elements.
 *
 * The permutation is first reduced: output dims of size 1 go, and neighbours that stay
 * neighbours in the input merge (BERT's head split (1, 128, 2, 64) -> [0, 2, 1, 3] becomes
 * (128, 2, 64) -> [1, 0, 2]). Then:
 *   - when the output's last dim is the input's last dim, rows are copied whole (memcpy);
 *   - otherwise each output row is read with a stride: 16 (AVX-512) or 8 (AVX2) elements per
 *     gather, the rows of a tile of 16 output rows taken in turn so that the cache lines a
 *     gather touches serve the next 15 gathers from L1 (BERT's key transpose (128, 2, 64) ->
 *     [1, 2, 0]: one gather per 16 elements instead of one 4-byte copy per element).
 * Output rows are split across the pool's threads when there is enough work. Other element
 * sizes, and rows whose strided offsets do not fit 32-bit gather indices, run in portable C. The
 * result is the same bytes as the reference kernel's (it only moves elements). */
#include <immintrin.h>
#include <string.h>

#include "kernels/fast/conv.h"

typedef struct TRun {
    const uint32_t *src;
    uint32_t *dst;
    uint32_t nd;               /* reduced rank, >= 1 */
    int64_t shape[K_MAX_DIMS]; /* output shape (reduced) */
    int64_t ist[K_MAX_DIMS];   /* input element stride of each output dim */
    int64_t rows;              /* product of shape[0 .. nd - 1) */
    int64_t row_len;           /* shape[nd - 1] */
    int64_t rows_per_task;
    int isa;
} TRun;

/* Input offset of the first element of output row r. */
static int64_t row_offset(const TRun *t, int64_t r) {
    int64_t off = 0;
    for (int32_t d = (int32_t)t->nd - 2; d >= 0; d--) {
        int64_t i = r % t->shape[d];
        r /= t->shape[d];
        off += i * t->ist[d];
    }
    return off;
}

static void rows_scalar(const TRun *t, int64_t r0, int64_t r1) {
    int64_t n = t->row_len, s = t->ist[t->nd - 1];
    for (int64_t r = r0; r < r1; r++) {
        const uint32_t *src = t->src + row_offset(t, r);
        uint32_t *dst = t->dst + r * n;
        if (s == 1) {
            memcpy(dst, src, (size_t)n * sizeof *dst);
            continue;
        }
        for (int64_t j = 0; j < n; j++)
            dst[j] = src[j * s];
    }
}

/* One tile: rows [rt, re) (at most 16; row r starts at input offset offs[r - rt]) by gathers,
 * for each block of 16 (AVX-512) or 8 (AVX2) columns the tile's rows in turn, so the cache lines
 * a gather brings serve the next rows' gathers from L1. s * 15 must fit an int32 index (checked
 * by the caller). */
typedef void (*TileFn)(const TRun *t, int64_t rt, int64_t re, const int64_t *offs);

FAST_AVX512 static void tile_avx512(const TRun *t, int64_t rt, int64_t re, const int64_t *offs) {
    int64_t n = t->row_len, s = t->ist[t->nd - 1];
    __m512i idx =
        _mm512_mullo_epi32(_mm512_set1_epi32((int32_t)s),
                           _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int64_t r = rt; r < re; r++) {
            const float *src = (const float *)(t->src + offs[r - rt] + j * s);
            _mm512_storeu_ps((float *)(t->dst + r * n + j), _mm512_i32gather_ps(idx, src, 4));
        }
    if (j < n) {
        __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
        for (int64_t r = rt; r < re; r++) {
            const float *src = (const float *)(t->src + offs[r - rt] + j * s);
            __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, src, 4);
            _mm512_mask_storeu_ps((float *)(t->dst + r * n + j), m, v);
        }
    }
}

FAST_AVX2 static void tile_avx2(const TRun *t, int64_t rt, int64_t re, const int64_t *offs) {
    int64_t n = t->row_len, s = t->ist[t->nd - 1];
    __m256i idx = _mm256_mullo_epi32(_mm256_set1_epi32((int32_t)s),
                                     _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int64_t r = rt; r < re; r++) {
            const float *src = (const float *)(t->src + offs[r - rt] + j * s);
            _mm256_storeu_ps((float *)(t->dst + r * n + j), _mm256_i32gather_ps(src, idx, 4));
        }
    for (; j < n; j++)
        for (int64_t r = rt; r < re; r++)
            t->dst[r * n + j] = t->src[offs[r - rt] + j * s];
}

/* Rows [r0, r1) in tiles of up to 16 rows, each by fn. */
static void rows_tiled(const TRun *t, int64_t r0, int64_t r1, TileFn fn) {
    for (int64_t rt = r0; rt < r1; rt += 16) {
        int64_t re = rt + 16 < r1 ? rt + 16 : r1, offs[16];
        for (int64_t r = rt; r < re; r++)
            offs[r - rt] = row_offset(t, r);
        fn(t, rt, re, offs);
    }
}

static void rows_run(const TRun *t, int64_t r0, int64_t r1) {
    if (t->isa >= SUP_ISA_AVX512)
        rows_tiled(t, r0, r1, tile_avx512);
    else if (t->isa >= SUP_ISA_AVX2)
        rows_tiled(t, r0, r1, tile_avx2);
    else
        rows_scalar(t, r0, r1);
}

static void rows_task(void *ctx, int64_t task, int worker) {
    (void)worker;
    const TRun *t = ctx;
    int64_t r0 = task * t->rows_per_task;
    int64_t r1 = r0 + t->rows_per_task < t->rows ? r0 + t->rows_per_task : t->rows;
    rows_run(t, r0, r1);
}

/* ---- 16 x L blocks (layout_transform NCHW <-> NCHW16c) ------------------------------------ */

/* A batch of `outer` transposes between 16 x len (16 rows of len) and len x 16, AVX-512: 16 x 16
 * tiles through registers (conv_transpose16), the last one masked; task = a range of tiles. */
typedef struct T16 {
    const float *src;
    float *dst;
    int64_t outer, len, tiles; /* tiles per transpose: ceil(len / 16) */
    int64_t per;               /* tile positions per task (of every transpose) */
    bool to_blocked;           /* 16 x len -> len x 16 */
} T16;

FAST_AVX512 static void t16_task(void *ctx, int64_t task, int worker) {
    (void)worker;
    const T16 *t = ctx;
    /* a range of tile positions of every transpose: thread i of the pool (task range i) takes
     * the same positions of every channel block, as the blocked convolutions split them; one
     * transpose at a time, so the plain side is 16 streams (not 16 per transpose) */
    int64_t q0 = task * t->per, q1 = q0 + t->per < t->tiles ? q0 + t->per : t->tiles;
    for (int64_t o = 0; o < t->outer; o++) {
        const float *src = t->src + o * 16 * t->len;
        float *dst = t->dst + o * 16 * t->len;
        for (int64_t q = q0; q < q1; q++) {
            int64_t p = q * 16, n = t->len - p < 16 ? t->len - p : 16;
            __mmask16 m = (__mmask16)((1u << n) - 1u);
            __m512 r[16];
            /* unrolled, with masks for a partial tile (its missing rows zero, its missing
             * columns not stored, their addresses kept inside the tile): the rows stay in
             * registers (a loop that zero-filled them kept them on the stack) */
            if (t->to_blocked) {
                _Pragma("GCC unroll 16") for (int c = 0; c < 16; c++) r[c] =
                    _mm512_maskz_loadu_ps(m, src + c * t->len + p);
                conv_transpose16(r);
                _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) _mm512_mask_storeu_ps(
                    dst + (p + (j < n ? j : 0)) * 16, j < n ? 0xffff : 0, r[j]);
            } else {
                _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) r[j] =
                    _mm512_maskz_loadu_ps(j < n ? 0xffff : 0, src + (p + (j < n ? j : 0)) * 16);
                conv_transpose16(r);
                _Pragma("GCC unroll 16") for (int c = 0; c < 16; c++)
                    _mm512_mask_storeu_ps(dst + c * t->len + p, m, r[c]);
            }
        }
    }
}

/* Whether the reduced transpose t is a batch of 16 x L <-> L x 16 transposes; runs it if so. */
static bool t16_run(KCall *kc, const TRun *t, int64_t total) {
    uint32_t nd = t->nd;
    if (t->isa < SUP_ISA_AVX512 || nd < 2 || t->ist[nd - 2] != 1) return false;
    int64_t a = t->shape[nd - 2], l = t->shape[nd - 1];
    T16 b = {.src = (const float *)t->src, .dst = (float *)t->dst};
    if (l == 16 && t->ist[nd - 1] == a && (nd == 2 || t->ist[nd - 3] == 16 * a))
        b.len = a, b.to_blocked = true;
    else if (a == 16 && t->ist[nd - 1] == 16 && (nd == 2 || t->ist[nd - 3] == 16 * l))
        b.len = l;
    else
        return false;
    b.outer = total / (16 * b.len);
    b.tiles = (b.len + 15) / 16;
    int64_t tasks = k_threads(kc) > 1 && total >= 32768 ? 4 * k_threads(kc) : 1;
    b.per = (b.tiles + tasks - 1) / tasks;
    k_parallel(kc, (b.tiles + b.per - 1) / b.per, t16_task, &b);
    return true;
}

/* dst = src (n dims of in_shape, 4-byte elements) transposed by perm (output dim i is input dim
 * perm[i]); total elements, > 0. */
static void transpose_run(KCall *kc, const void *src, uint32_t n, const int64_t *in_shape,
                          const int64_t *perm, void *dst, int64_t total) {
    int64_t st[K_MAX_DIMS];
    k_strides(n, in_shape, st);
    /* reduce: drop size-1 dims, merge output neighbours adjacent in the input */
    TRun t = {.src = src, .dst = dst, .isa = sup_isa()};
    for (uint32_t i = 0; i < n; i++) {
        int64_t len = in_shape[perm[i]], s = st[perm[i]];
        if (len == 1) continue;
        if (t.nd > 0 && t.ist[t.nd - 1] == s * len) {
            t.shape[t.nd - 1] *= len;
            t.ist[t.nd - 1] = s;
            continue;
        }
        t.shape[t.nd] = len;
        t.ist[t.nd] = s;
        t.nd++;
    }
    if (t.nd == 0) t.shape[0] = 1, t.ist[0] = 1, t.nd = 1;
    t.row_len = t.shape[t.nd - 1];
    t.rows = total / t.row_len;
    int64_t s = t.ist[t.nd - 1];
    if (t16_run(kc, &t, total)) return;
    if (s == 1 || s > INT32_MAX / 16) t.isa = SUP_ISA_SCALAR; /* memcpy rows / wide strides */
    /* tasks of >= 16K elements, whole 16-row tiles; from 4K elements one task per thread: the
     * pool gives task range i to thread i, so a head split after a product split by columns
     * reads what each core wrote (BERT-tiny at 2 threads: 908-914 -> 870-883 us median) */
    int threads = k_threads(kc);
    int64_t tasks = threads <= 1 || total < 4096 ? 1 : total >= 32768 ? 4 * threads : threads;
    int64_t per = (t.rows + tasks - 1) / tasks;
    per = (per + 15) / 16 * 16;
    t.rows_per_task = per;
    tasks = (t.rows + per - 1) / per;
    if (tasks <= 1)
        rows_run(&t, 0, t.rows);
    else
        k_parallel(kc, tasks, rows_task, &t);
}

static int kern_fast_transpose(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    uint32_t n = (uint32_t)x->ndim;
    if (sup_dtype_size(k_dtype(x)) != 4 || n == 0 || n > K_MAX_DIMS)
        return kern_ref_lookup(OP_ID_TRANSPOSE)(kc);
    const int64_t *axes;
    uint32_t na = k_ints(kc, "axes", &axes);
    int64_t perm[K_MAX_DIMS], shape[K_MAX_DIMS];
    bool seen[K_MAX_DIMS] = {0};
    if (na == 0) {
        for (uint32_t i = 0; i < n; i++)
            perm[i] = n - 1 - i;
    } else {
        if (na != n) return kern_ref_lookup(OP_ID_TRANSPOSE)(kc); /* its error */
        for (uint32_t i = 0; i < n; i++) {
            if (!k_axis(axes[i], n, &perm[i]) || seen[perm[i]])
                return kern_ref_lookup(OP_ID_TRANSPOSE)(kc);
            seen[perm[i]] = true;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        shape[i] = x->shape[perm[i]];
    DLTensor *o = k_out_raw(kc, 0, k_dtype(x), n, shape);
    if (o == NULL) return -1;
    int64_t total = k_numel(o);
    if (total > 0) transpose_run(kc, k_ptr(x), n, x->shape, perm, k_ptr(o), total);
    return 0;
}

/* ---- layout_transform -------------------------------------------------------------------- */

/* A dim of a layout_transform's common refinement: primal axis `axis`, its outer part (blocked
 * somewhere), inner part, or whole. */
typedef struct LDim {
    char axis;
    uint8_t part; /* 0 whole, 1 outer, 2 inner */
    int64_t size;
} LDim;

/* layout_transform of 4-byte elements between layouts that are permutations of one refinement:
 * each primal axis split by one block size in src, in dst or in both, dividing it (no padding);
 * NCHW <-> NCHW16c is a transpose of (N, C/16, 16, H*W) in blocks. Other transforms (a block that
 * pads, two different blocks of one axis) go to the reference kernel. */
static int kern_fast_layout_transform(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    KLayout src, dst;
    uint32_t n = (uint32_t)x->ndim;
    KernelFn ref = kern_ref_lookup(OP_ID_LAYOUT_TRANSFORM);
    if (sup_dtype_size(k_dtype(x)) != 4 || !k_layout_parse(k_str(kc, "src_layout"), &src) ||
        !k_layout_parse(k_str(kc, "dst_layout"), &dst) || src.n != n || n == 0)
        return ref(kc);
    LDim ex[K_MAX_DIMS];
    int64_t in_shape[K_MAX_DIMS], perm[K_MAX_DIMS], shape[K_MAX_DIMS];
    uint32_t ne = 0, no = 0;
    for (uint32_t i = 0; i < n; i++) { /* the source in the refinement */
        char a = src.axis[i];
        if (src.factor[i]) {
            if (x->shape[i] != src.factor[i]) return ref(kc);
            ex[ne++] = (LDim){(char)(a - 'a' + 'A'), 2, x->shape[i]};
            continue;
        }
        int64_t bs = k_layout_block(&src, a), bd = k_layout_block(&dst, a);
        if (k_layout_find(&dst, a) < 0 || (bs && bd && bs != bd)) return ref(kc);
        if (bs) {
            ex[ne++] = (LDim){a, 1, x->shape[i]};
        } else if (bd) {
            if (x->shape[i] % bd != 0) return ref(kc); /* padding */
            ex[ne++] = (LDim){a, 1, x->shape[i] / bd};
            ex[ne++] = (LDim){a, 2, bd};
        } else {
            ex[ne++] = (LDim){a, 0, x->shape[i]};
        }
        if (ne > K_MAX_DIMS - 1) return ref(kc);
    }
    for (uint32_t i = 0; i < dst.n; i++) { /* the destination's dims, as refinement dims */
        char a = dst.axis[i];
        uint8_t parts[2], np = 0;
        if (dst.factor[i]) { /* a sub-axis */
            a = (char)(a - 'a' + 'A');
            parts[np++] = 2;
        } else if (k_layout_block(&dst, a)) {
            parts[np++] = 1;
        } else if (k_layout_block(&src, a)) { /* joined: outer then inner */
            parts[np++] = 1;
            parts[np++] = 2;
        } else {
            parts[np++] = 0;
        }
        shape[i] = 1; /* a joined axis: its outer times inner extents */
        for (uint8_t k = 0; k < np; k++) {
            uint32_t j = 0;
            while (j < ne && !(ex[j].axis == a && ex[j].part == parts[k]))
                j++;
            if (j == ne || no == K_MAX_DIMS) return ref(kc);
            perm[no++] = j;
            shape[i] *= ex[j].size;
        }
    }
    if (no != ne) return ref(kc);
    for (uint32_t j = 0; j < ne; j++)
        in_shape[j] = ex[j].size;
    DLTensor *o = k_out_raw(kc, 0, k_dtype(x), dst.n, shape);
    if (o == NULL) return -1;
    int64_t total = k_numel(o);
    if (total > 0) transpose_run(kc, k_ptr(x), ne, in_shape, perm, k_ptr(o), total);
    return 0;
}

const KernelDef kern_fast_transform[] = {
    {OP_ID_TRANSPOSE, kern_fast_transpose},
    {OP_ID_LAYOUT_TRANSFORM, kern_fast_layout_transform},
    {0, NULL},
};
