/* nn.c - fast f32 kernels of the nn family (fast.h): softmax and log_softmax (any axis; the last
 * one by rows, another by VL columns at a time), layer_norm over the last axis, sum/mean/max over
 * a trailing run of axes (the last axis, or all), the NCHW pools (max_pool2d and avg_pool2d with
 * any window, stride, padding, dilation, ceil_mode and count_include_pad; global_avg_pool2d and
 * global_max_pool2d), and the per-channel affine ops batch_norm (inference) and bias_add.
 *
 * As in elem.c: float32 only, every other call (dtype, layout, attributes, an error case) handed
 * to the reference kernel unchanged; the level chosen per call by sup_isa(), loops instantiated
 * per level from vmath_level.h and nn_level.h; outputs, scratch and tables prepared before the
 * work is split over the call's pool (NN_BLOCK elements per task at least).
 *
 * Differences from the reference kernels (which compute in double and round once): sums run in
 * float lanes within blocks of 1024 whose sums add in double; softmax's exp is vexp (a few ulp);
 * layer_norm and batch_norm apply 1/sqrt(var + eps) (times gamma for batch_norm) rounded to float;
 * avg pools sum in float in the reference's tap order. max, max pools, global_max_pool2d and
 * bias_add give the reference's bits. docs/kernels_elem.md states the tolerances tested. */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "fast.h"
#include "kernels/fast/conv.h" /* kern_max3s2_rows */

#define NN_BLOCK 16384 /* elements per task, at least, past one task per thread */
/* Fewer elements run in one task. From here up, at least one task per thread: at 2 threads a
 * small operator after a parallel one reads lines the other core wrote, and two threads fetch
 * them faster than one (BERT-tiny's layer norms of 16K floats; the model 884-917 -> 862-885 us
 * median, interleaved). */
#define NN_SPLIT_MIN 8192
#define POOL_ATTR_MAX 65536 /* pool windows, strides, dilations, paddings past it: reference */

/* A windowed pool's geometry (one NCHW plane), for pool_rows. */
typedef struct PoolGeom {
    int64_t h, w, hout, wout;
    int64_t kh, kw, sh, sw, dh, dw, pt, pl; /* window, strides, dilations, padding before */
    int64_t ow_lo, ow_hi; /* [ow_lo, ow_hi): the output columns whose kw taps all lie inside the
                             input's columns; ow_lo <= ow_hi <= wout (pool2d) */
    bool is_max;
    const float *div_h, *div_w; /* avg: taps per output row / column */
} PoolGeom;

/* The taps [*lo, *hi) of output position o on one axis (window k, stride s, dilation d, padding
 * pad before, input extent in) that fall inside the input, as the reference computes them. */
static void pool_taps(int64_t o, int64_t k, int64_t s, int64_t d, int64_t pad, int64_t in,
                      int64_t *lo, int64_t *hi) {
    int64_t start = o * s - pad;
    int64_t first = start >= 0 ? 0 : (-start + d - 1) / d;
    int64_t end = in - 1 - start < 0 ? 0 : (in - 1 - start) / d + 1;
    *lo = first < k ? first : k;
    *hi = end < k ? end : k;
    if (*hi < *lo) *hi = *lo;
}

#define FAST_LEVEL 2
#include "vmath_level.h"
#include "nn_level.h"
#undef FAST_LEVEL
#define FAST_LEVEL 1
#include "vmath_level.h"
#include "nn_level.h"
#undef FAST_LEVEL
#define FAST_LEVEL 0
#include "vmath_level.h"
#include "nn_level.h"
#undef FAST_LEVEL

/* The level's functions. */
typedef struct NnLevel {
    double (*span_sum)(const float *x, int64_t n);
    float (*span_max)(const float *x, int64_t n, bool propagate, float lowest);
    void (*softmax_rows)(const float *x, float *y, int64_t rows, int64_t c, bool log_form);
    void (*softmax_cols)(const float *x, float *y, int64_t c, int64_t inner, int64_t j0, int64_t j1,
                         bool log_form);
    void (*layer_norm_rows)(const float *x, float *y, int64_t rows, int64_t c, const float *g,
                            const float *b, double eps);
    void (*affine_span)(const float *x, float *y, int64_t n, const float *m, const float *s,
                        const float *b, bool vec);
    void (*pool_rows)(const PoolGeom *g, const float *x, float *y, int64_t oh0, int64_t oh1);
} NnLevel;

#define LEVEL_ROW(S)                                                                               \
    {                                                                                              \
        span_sum_##S, span_max_##S, softmax_rows_##S, softmax_cols_##S, layer_norm_rows_##S,       \
            affine_span_##S, pool_rows_##S                                                         \
    }
static const NnLevel levels[] = {LEVEL_ROW(scalar), LEVEL_ROW(avx2), LEVEL_ROW(avx512)};
#undef LEVEL_ROW
_Static_assert(SUP_ISA_SCALAR == 0 && SUP_ISA_AVX2 == 1 && SUP_ISA_AVX512 == 2, "levels[]");

static const NnLevel *level(void) { return &levels[sup_isa()]; }

/* Tasks for `units` units of about `per` elements each: the count, and *per_task units in each
 * (the last task fewer). One task below NN_SPLIT_MIN elements or without threads; otherwise a
 * multiple of the thread count where the units allow. */
static int64_t plan(const KCall *kc, int64_t units, int64_t per, int64_t *per_task) {
    int th = k_threads(kc);
    int64_t total = sup_dim_mul_sat(units, per > 0 ? per : 1);
    if (th <= 1 || units < 2 || total < NN_SPLIT_MIN) {
        *per_task = units;
        return 1;
    }
    int64_t t = total / NN_BLOCK;
    if (t < th) t = th; /* NN_SPLIT_MIN .. 2 NN_BLOCK: one task per thread */
    if (t > units) t = units;
    t = (t + th - 1) / th * th;
    if (t > units) t = units;
    *per_task = (units + t - 1) / t;
    return (units + *per_task - 1) / *per_task;
}

/* Units [*lo, *hi) of task t. */
static void task_range(int64_t t, int64_t per_task, int64_t units, int64_t *lo, int64_t *hi) {
    *lo = t * per_task;
    *hi = *lo + per_task < units ? *lo + per_task : units;
}

static bool is_f32(const DLTensor *t) { return k_dtype(t) == RLY_DTYPE_F32; }

/* ---- softmax, log_softmax ----------------------------------------------------------------------
 */

#define SOFTMAX_COLS 64 /* columns per unit of a softmax over an inner axis */

typedef struct SoftmaxJob {
    const NnLevel *lv;
    const float *x;
    float *y;
    int64_t c, inner, n_col_blocks, units, per_task;
    bool log_form;
} SoftmaxJob;

static void softmax_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const SoftmaxJob *j = ctx;
    int64_t lo, hi;
    task_range(t, j->per_task, j->units, &lo, &hi);
    if (j->inner == 1) {
        j->lv->softmax_rows(j->x + lo * j->c, j->y + lo * j->c, hi - lo, j->c, j->log_form);
        return;
    }
    for (int64_t u = lo; u < hi; u++) {
        int64_t i = u / j->n_col_blocks, c0 = u % j->n_col_blocks * SOFTMAX_COLS;
        int64_t c1 = c0 + SOFTMAX_COLS < j->inner ? c0 + SOFTMAX_COLS : j->inner;
        int64_t off = i * j->c * j->inner;
        j->lv->softmax_cols(j->x + off, j->y + off, j->c, j->inner, c0, c1, j->log_form);
    }
}

static int softmax(KCall *kc, uint32_t op, bool log_form) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t axis;
    if (!is_f32(x) || !k_axis(k_int(kc, "axis"), (uint32_t)x->ndim, &axis))
        return kern_ref_lookup(op)(kc);
    DLTensor *y = k_out_raw(kc, 0, RLY_DTYPE_F32, (uint32_t)x->ndim, x->shape);
    if (y == NULL) return -1;
    if (k_numel(y) == 0) return 0;
    SoftmaxJob j = {.lv = level(), .x = k_ptr(x), .y = k_ptr(y), .log_form = log_form};
    j.c = x->shape[axis];
    j.inner = k_shape_numel((uint32_t)(x->ndim - axis - 1), x->shape + axis + 1);
    int64_t outer = k_shape_numel((uint32_t)axis, x->shape);
    int64_t per;
    if (j.inner == 1) {
        j.units = outer;
        per = j.c;
    } else {
        j.n_col_blocks = (j.inner + SOFTMAX_COLS - 1) / SOFTMAX_COLS;
        j.units = outer * j.n_col_blocks;
        per = j.c * SOFTMAX_COLS;
    }
    int64_t n_tasks = plan(kc, j.units, per, &j.per_task);
    k_parallel(kc, n_tasks, softmax_task, &j);
    return 0;
}

static int k_softmax(KCall *kc) { return softmax(kc, OP_ID_NN_SOFTMAX, false); }
static int k_fast_softmax(KCall *kc) { return softmax(kc, OP_ID_NN_FAST_SOFTMAX, false); }
static int k_log_softmax(KCall *kc) { return softmax(kc, OP_ID_NN_LOG_SOFTMAX, true); }

/* ---- layer_norm -------------------------------------------------------------------------------
 */

typedef struct NormJob {
    const NnLevel *lv;
    const float *x, *g, *b;
    float *y;
    int64_t c, units, per_task;
    double eps;
} NormJob;

static void layer_norm_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const NormJob *j = ctx;
    int64_t lo, hi;
    task_range(t, j->per_task, j->units, &lo, &hi);
    j->lv->layer_norm_rows(j->x + lo * j->c, j->y + lo * j->c, hi - lo, j->c, j->g, j->b, j->eps);
}

static int k_layer_norm(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *gamma = k_arg(kc, 1), *beta = k_arg(kc, 2);
    int64_t axis;
    KernelFn ref = kern_ref_lookup(OP_ID_NN_LAYER_NORM);
    if (!is_f32(x) || !k_axis(k_int(kc, "axis"), (uint32_t)x->ndim, &axis) || axis != x->ndim - 1)
        return ref(kc);
    int64_t c = x->shape[axis];
    if (!is_f32(gamma) || !is_f32(beta) || gamma->ndim != 1 || gamma->shape[0] != c ||
        beta->ndim != 1 || beta->shape[0] != c)
        return ref(kc);
    DLTensor *y = k_out_raw(kc, 0, RLY_DTYPE_F32, (uint32_t)x->ndim, x->shape);
    if (y == NULL) return -1;
    if (k_numel(y) == 0) return 0;
    NormJob j = {
        .lv = level(), .x = k_ptr(x), .y = k_ptr(y), .c = c, .eps = k_float(kc, "epsilon")};
    j.g = k_ptr(gamma);
    j.b = k_ptr(beta);
    if (!k_bool(kc, "scale") || !k_bool(kc, "center")) {
        float *gb = k_scratch_n(kc, 2 * c, sizeof(float)); /* zero-filled */
        if (gb == NULL) return -1;
        if (!k_bool(kc, "scale")) {
            for (int64_t i = 0; i < c; i++)
                gb[i] = 1.0f;
            j.g = gb;
        }
        if (!k_bool(kc, "center")) j.b = gb + c;
    }
    j.units = k_numel(x) / c;
    int64_t n_tasks = plan(kc, j.units, c, &j.per_task);
    k_parallel(kc, n_tasks, layer_norm_task, &j);
    return 0;
}

/* ---- reductions: sum, mean, max; the global pools ------------------------------------------- */

typedef enum RedKind {
    RK_SUM,
    RK_MEAN,
    RK_MAX,  /* NaN anywhere gives NaN */
    RK_PMAX, /* the pools' max: NaN skipped, from -FLT_MAX */
} RedKind;

typedef struct RedJob {
    const NnLevel *lv;
    RedKind kind;
    const float *x;
    float *y;
    int64_t rows, len;
    int64_t units, per_task;
    int64_t n_chunks, chunk; /* chunked mode: each row in n_chunks spans of chunk floats */
    double *part;            /* chunked mode: rows * n_chunks partial results */
} RedJob;

static double red_span(const RedJob *j, const float *x, int64_t n) {
    switch (j->kind) {
    case RK_SUM:
    case RK_MEAN: return j->lv->span_sum(x, n);
    case RK_MAX: return j->lv->span_max(x, n, true, -INFINITY);
    case RK_PMAX: return j->lv->span_max(x, n, false, -FLT_MAX);
    }
    return 0;
}

static float red_final(const RedJob *j, double v) {
    return (float)(j->kind == RK_MEAN ? v / (double)j->len : v);
}

static void red_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const RedJob *j = ctx;
    int64_t lo, hi;
    task_range(t, j->per_task, j->units, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        if (j->part == NULL) {
            j->y[u] = red_final(j, red_span(j, j->x + u * j->len, j->len));
            continue;
        }
        int64_t r = u / j->n_chunks, k = u % j->n_chunks, at = k * j->chunk;
        int64_t n = j->len - at < j->chunk ? j->len - at : j->chunk;
        j->part[u] = red_span(j, j->x + r * j->len + at, n);
    }
}

/* y[r] = reduction of x[r*len .. r*len + len) for r < rows (rows, len >= 1). Rows split over
 * the pool when there are enough of them; otherwise each row is cut into chunks whose partial
 * results the caller combines (sums in order; max: NaN wins when propagating). */
static int reduce_rows(KCall *kc, RedKind kind, const float *x, float *y, int64_t rows,
                       int64_t len) {
    RedJob j = {.lv = level(), .kind = kind, .x = x, .y = y, .rows = rows, .len = len};
    int th = k_threads(kc);
    if (th <= 1 || rows >= 2 * th || len < 2 * NN_BLOCK) {
        j.units = rows;
        k_parallel(kc, plan(kc, rows, len, &j.per_task), red_task, &j);
        return 0;
    }
    int64_t chunk = (len + 4 * th - 1) / (4 * th);
    chunk = chunk < NN_BLOCK ? NN_BLOCK : (chunk + 63) / 64 * 64;
    j.n_chunks = (len + chunk - 1) / chunk;
    j.chunk = chunk;
    j.units = rows * j.n_chunks;
    j.part = k_scratch_n(kc, j.units, sizeof(double));
    if (j.part == NULL) return -1;
    k_parallel(kc, plan(kc, j.units, chunk, &j.per_task), red_task, &j);
    for (int64_t r = 0; r < rows; r++) {
        const double *p = j.part + r * j.n_chunks;
        double v = p[0];
        for (int64_t k = 1; k < j.n_chunks; k++) {
            if (kind == RK_SUM || kind == RK_MEAN)
                v += p[k];
            else if (isnan(p[k]) || isnan(v))
                v = kind == RK_MAX ? NAN : (isnan(v) ? p[k] : v);
            else if (p[k] > v)
                v = p[k];
        }
        y[r] = red_final(&j, v);
    }
    return 0;
}

/* A sum or mean over the middle of (outer, len, inner) with inner <= RED_INNER_MAX: the blocked
 * layouts' global pools (mean over H and W of NCHW16c data). Each output lane sums its len values
 * in order in double, as the row reduction does; tasks take ranges of outer. */
#define RED_INNER_MAX 64

typedef struct MidJob {
    RedKind kind;
    const float *x;
    float *y;
    int64_t outer, len, inner, per_task;
} MidJob;

/* acc[0 .. 16) = the sums over m of x[m * 16 + l] in double, in order of m (AVX-512: the
 * blocked layouts' 16 lanes, as the loop in mid_task sums them) */
static FAST_AVX512 void mid16_avx512(const float *x, int64_t len, double *acc) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (int64_t m = 0; m < len; m++) {
        __m512 v = _mm512_loadu_ps(x + m * 16);
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        a1 = _mm512_add_pd(
            a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    }
    _mm512_storeu_pd(acc, a0);
    _mm512_storeu_pd(acc + 8, a1);
}

static void mid_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const MidJob *j = ctx;
    int64_t lo, hi;
    task_range(t, j->per_task, j->outer, &lo, &hi);
    bool v16 = j->inner == 16 && sup_isa() == SUP_ISA_AVX512;
    for (int64_t o = lo; o < hi; o++) {
        double acc[RED_INNER_MAX] = {0};
        const float *x = j->x + o * j->len * j->inner;
        if (v16)
            mid16_avx512(x, j->len, acc);
        else
            for (int64_t m = 0; m < j->len; m++)
                for (int64_t l = 0; l < j->inner; l++)
                    acc[l] += (double)x[m * j->inner + l];
        for (int64_t l = 0; l < j->inner; l++)
            j->y[o * j->inner + l] = (float)(j->kind == RK_MEAN ? acc[l] / (double)j->len : acc[l]);
    }
}

/* sum / mean / max over the axes the attributes name (as the reference decodes them), when those
 * axes come after every kept axis of extent > 1 (a trailing run: the last axis, or all); sum and
 * mean also when a short run of kept axes follows them (mid_task). */
static int reduce(KCall *kc, uint32_t op, RedKind kind) {
    const DLTensor *x = k_arg(kc, 0);
    KernelFn ref = kern_ref_lookup(op);
    uint32_t nd = (uint32_t)x->ndim;
    if (!is_f32(x) || nd > K_MAX_DIMS) return ref(kc);
    bool exclude = k_bool(kc, "exclude"), keep = k_bool(kc, "keepdims");
    const int64_t *axes;
    uint32_t na = k_ints(kc, "axis", &axes);
    if (k_is_none(kc, "axis") && exclude) return ref(kc);
    bool given[K_MAX_DIMS] = {false};
    for (uint32_t k = 0; k < na; k++) {
        int64_t a;
        if (!k_axis(axes[k], nd, &a) || given[a]) return ref(kc); /* its error */
        given[a] = true;
    }
    int64_t shape[K_MAX_DIMS], rows = 1, len = 1, inner = 1;
    uint32_t out_nd = 0;
    int phase = 0; /* 0: kept axes before the reduced ones, 1: reduced, 2: kept after */
    for (uint32_t d = 0; d < nd; d++) {
        bool red = na == 0 ? true : given[d] != exclude;
        int64_t e = x->shape[d];
        if (!red) {
            shape[out_nd++] = e;
            if (e == 1) continue;
            if (phase == 0)
                rows = sup_dim_mul_sat(rows, e);
            else
                phase = 2, inner = sup_dim_mul_sat(inner, e);
        } else {
            if (keep) shape[out_nd++] = 1;
            if (e == 1) continue;
            if (phase == 2) return ref(kc); /* reduced axes on both sides of a kept one */
            phase = 1;
            len = sup_dim_mul_sat(len, e);
        }
    }
    if (rows == 0 || len == 0 || inner == 0) return ref(kc); /* empty results and reductions */
    if (inner > 1 && (kind == RK_MAX || inner > RED_INNER_MAX)) return ref(kc);
    DLTensor *y = k_out_raw(kc, 0, RLY_DTYPE_F32, out_nd, shape);
    if (y == NULL) return -1;
    if (inner == 1) return reduce_rows(kc, kind, k_ptr(x), k_ptr(y), rows, len);
    MidJob j = {
        .kind = kind, .x = k_ptr(x), .y = k_ptr(y), .outer = rows, .len = len, .inner = inner};
    k_parallel(kc, plan(kc, rows, len * inner, &j.per_task), mid_task, &j);
    return 0;
}

static int k_sum(KCall *kc) { return reduce(kc, OP_ID_SUM, RK_SUM); }
static int k_mean(KCall *kc) { return reduce(kc, OP_ID_MEAN, RK_MEAN); }
static int k_max(KCall *kc) { return reduce(kc, OP_ID_MAX, RK_MAX); }

static bool layout_is(const KCall *kc, const char *want) {
    const char *s = k_str(kc, "layout");
    return s != NULL && strcmp(s, want) == 0;
}

static int global_pool(KCall *kc, uint32_t op, RedKind kind) {
    const DLTensor *x = k_arg(kc, 0);
    if (!is_f32(x) || x->ndim != 4 || !layout_is(kc, "NCHW")) return kern_ref_lookup(op)(kc);
    int64_t rows = sup_dim_mul_sat(x->shape[0], x->shape[1]);
    int64_t len = sup_dim_mul_sat(x->shape[2], x->shape[3]);
    if (rows == 0 || len == 0) return kern_ref_lookup(op)(kc);
    int64_t shape[4] = {x->shape[0], x->shape[1], 1, 1};
    DLTensor *y = k_out_raw(kc, 0, RLY_DTYPE_F32, 4, shape);
    if (y == NULL) return -1;
    return reduce_rows(kc, kind, k_ptr(x), k_ptr(y), rows, len);
}

static int k_global_avg_pool2d(KCall *kc) {
    return global_pool(kc, OP_ID_NN_GLOBAL_AVG_POOL2D, RK_MEAN);
}
static int k_global_max_pool2d(KCall *kc) {
    return global_pool(kc, OP_ID_NN_GLOBAL_MAX_POOL2D, RK_PMAX);
}

/* ---- batch_norm, bias_add: (x - m[c]) * s[c] + b[c] ---------------------------------------------
 */

typedef struct AffineJob {
    const NnLevel *lv;
    const float *x, *m, *s, *b;
    float *y;
    int64_t c, inner, units, per_task;
} AffineJob;

static void affine_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const AffineJob *j = ctx;
    int64_t lo, hi;
    task_range(t, j->per_task, j->units, &lo, &hi);
    if (j->inner == 1) { /* units are rows of c channels */
        for (int64_t r = lo; r < hi; r++)
            j->lv->affine_span(j->x + r * j->c, j->y + r * j->c, j->c, j->m, j->s, j->b, true);
        return;
    }
    for (int64_t r = lo; r < hi; r++) { /* units are (outer, channel) rows of inner elements */
        int64_t ch = r % j->c;
        j->lv->affine_span(j->x + r * j->inner, j->y + r * j->inner, j->inner, j->m + ch, j->s + ch,
                           j->b + ch, false);
    }
}

/* Run the affine job over x (outer, c, inner) into y. */
static void affine_run(KCall *kc, AffineJob *j, int64_t n) {
    j->lv = level();
    j->units = j->inner == 1 ? n / j->c : n / j->inner;
    int64_t n_tasks = plan(kc, j->units, j->inner == 1 ? j->c : j->inner, &j->per_task);
    k_parallel(kc, n_tasks, affine_task, j);
}

/* The (axis) split of x: false when the axis is out of range. */
static bool channel_axis(const KCall *kc, const DLTensor *x, int64_t *c, int64_t *inner) {
    int64_t axis;
    if (!k_axis(k_int(kc, "axis"), (uint32_t)x->ndim, &axis)) return false;
    *c = x->shape[axis];
    *inner = k_shape_numel((uint32_t)(x->ndim - axis - 1), x->shape + axis + 1);
    return true;
}

static int k_batch_norm(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    KernelFn ref = kern_ref_lookup(OP_ID_NN_BATCH_NORM);
    int64_t c, inner;
    if (!is_f32(x) || !channel_axis(kc, x, &c, &inner)) return ref(kc);
    for (uint32_t a = 1; a < 5; a++)
        if (!is_f32(k_arg(kc, a)) || k_arg(kc, a)->ndim != 1 || k_arg(kc, a)->shape[0] != c)
            return ref(kc);
    DLTensor *y = k_out_raw(kc, 0, RLY_DTYPE_F32, (uint32_t)x->ndim, x->shape);
    DLTensor *om = y ? k_out_raw(kc, 1, RLY_DTYPE_F32, 1, &c) : NULL;
    DLTensor *ov = om ? k_out_raw(kc, 2, RLY_DTYPE_F32, 1, &c) : NULL;
    if (ov == NULL) return -1;
    const float *gamma = k_ptr(k_arg(kc, 1)), *beta = k_ptr(k_arg(kc, 2));
    const float *mean = k_ptr(k_arg(kc, 3)), *var = k_ptr(k_arg(kc, 4));
    if (c > 0) {
        memcpy(k_ptr(om), mean, (size_t)c * sizeof(float));
        memcpy(k_ptr(ov), var, (size_t)c * sizeof(float));
    }
    int64_t n = k_numel(x);
    if (n == 0) return 0;
    float *tab = k_scratch_n(kc, 2 * c, sizeof(float));
    if (tab == NULL) return -1;
    double eps = k_float(kc, "epsilon");
    bool scale = k_bool(kc, "scale"), center = k_bool(kc, "center");
    for (int64_t ch = 0; ch < c; ch++) {
        double s = 1.0 / sqrt((double)var[ch] + eps);
        tab[ch] = (float)(scale ? s * gamma[ch] : s);
        tab[c + ch] = center ? beta[ch] : 0.0f;
    }
    AffineJob j = {
        .x = k_ptr(x), .y = k_ptr(y), .m = mean, .s = tab, .b = tab + c, .c = c, .inner = inner};
    affine_run(kc, &j, n);
    return 0;
}

static int k_bias_add(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *bias = k_arg(kc, 1);
    KernelFn ref = kern_ref_lookup(OP_ID_NN_BIAS_ADD);
    int64_t c, inner;
    if (!is_f32(x) || !is_f32(bias) || !channel_axis(kc, x, &c, &inner) || bias->ndim != 1 ||
        bias->shape[0] != c)
        return ref(kc);
    DLTensor *y = k_out_raw(kc, 0, RLY_DTYPE_F32, (uint32_t)x->ndim, x->shape);
    if (y == NULL) return -1;
    int64_t n = k_numel(x);
    if (n == 0) return 0;
    float *tab = k_scratch_n(kc, 2 * c, sizeof(float)); /* m = 0, s = 1: (x - 0) * 1 + b */
    if (tab == NULL) return -1;
    for (int64_t ch = 0; ch < c; ch++)
        tab[c + ch] = 1.0f;
    AffineJob j = {.x = k_ptr(x),
                   .y = k_ptr(y),
                   .m = tab,
                   .s = tab + c,
                   .b = k_ptr(bias),
                   .c = c,
                   .inner = inner};
    affine_run(kc, &j, n);
    return 0;
}

/* ---- max_pool2d, avg_pool2d (NCHW) ------------------------------------------------------------
 */

/* An attribute of 1 or 2 values as (h, w); false when malformed or out of [lo, POOL_ATTR_MAX]. */
static bool attr_hw(const KCall *kc, const char *name, int64_t lo, int64_t *h, int64_t *w) {
    const int64_t *v;
    uint32_t n = k_ints(kc, name, &v);
    if (n != 1 && n != 2) return false;
    *h = v[0];
    *w = v[n - 1];
    return *h >= lo && *w >= lo && *h <= POOL_ATTR_MAX && *w <= POOL_ATTR_MAX;
}

/* Taps of output o on one axis that the average divides by (see conv_pool.c's pool_divisor). */
static int64_t pool_count(int64_t o, int64_t k, int64_t s, int64_t d, int64_t pad,
                          int64_t pad_after, int64_t in, bool include_pad) {
    int64_t start = o * s - pad, lo, hi;
    if (include_pad) {
        int64_t end = start + (k - 1) * d, last = in + pad_after - 1;
        if (end > last) end = last;
        return end >= start ? (end - start) / d + 1 : 0;
    }
    pool_taps(o, k, s, d, pad, in, &lo, &hi);
    return hi - lo;
}

typedef struct PoolJob {
    const NnLevel *lv;
    PoolGeom g;
    const float *x;
    float *y;
    int64_t n_blocks, block; /* each plane's output rows in n_blocks blocks of `block` rows */
    int64_t units, per_task; /* units: (plane, block) pairs */
    bool max3s2;             /* pool_max3s2_avx512 takes the rows */
} PoolJob;

/* Whether pool_max3s2_avx512 takes g: a 3x3 max pool of stride 2, dilation 1, every window
 * inside the plane (SqueezeNet's three: 111, 55, 27 onto 55, 27, 13). */
static bool max3s2_fits(const PoolGeom *g) {
    return g->is_max && g->kh == 3 && g->kw == 3 && g->sh == 2 && g->sw == 2 && g->dh == 1 &&
           g->dw == 1 && g->pt == 0 && g->pl == 0 && 2 * (g->hout - 1) + 3 <= g->h &&
           2 * (g->wout - 1) + 3 <= g->w && sup_isa() == SUP_ISA_AVX512;
}

/* `n` floats at p from `avail` readable ones (masked: nothing past them is read) */
static FAST_AVX512 inline __m512 load_avail(const float *p, int64_t avail) {
    __mmask16 m = (__mmask16)(avail >= 16 ? 0xffff : avail <= 0 ? 0 : (1u << avail) - 1);
    return _mm512_maskz_loadu_ps(m, p);
}

/* Max over input columns 2j, 2j + 1, 2j + 2 of one row for 16 outputs j, from p (column 2 j0)
 * with `avail` floats readable there, in the reference's tap order: max_ps(v, acc) is v > acc ?
 * v : acc, so a NaN is never taken and of equal values the first stays. */
static FAST_AVX512 inline __m512 hmax3s2(const float *p, int64_t avail, __m512i even, __m512 init) {
    __m512 a0 = load_avail(p, avail), a1 = load_avail(p + 16, avail - 16);
    __m512 b0 = load_avail(p + 2, avail - 2), b1 = load_avail(p + 18, avail - 18);
    __m512 c0 = _mm512_permutex2var_ps(a0, even, a1);
    __m512 c1 = _mm512_permutex2var_ps(a0, _mm512_add_epi32(even, _mm512_set1_epi32(1)), a1);
    __m512 c2 = _mm512_permutex2var_ps(b0, even, b1);
    return _mm512_max_ps(c2, _mm512_max_ps(c1, _mm512_max_ps(c0, init)));
}

/* One output row's vector at j0 (n of its lanes stored): the maxima of the rows r1 - w (prev,
 * their 3-column maxima), r1 and r1 + w; returns r1 + w's, the next output row's first. */
static FAST_AVX512 inline __m512 vmax3s2(const float *r1, int64_t w, int64_t avail, __m512 prev,
                                         float *y, __mmask16 m, __m512i even, __m512 init) {
    __m512 h1 = hmax3s2(r1, avail, even, init), h2 = hmax3s2(r1 + w, avail, even, init);
    _mm512_mask_storeu_ps(y, m, _mm512_max_ps(h2, _mm512_max_ps(h1, prev)));
    return h2;
}

/* Output rows [oh0, oh1) of one plane of a max3s2_fits pool, separably: each input row's
 * 3-column maxima 16 outputs at a time, then the 3 rows' (the last row's reused as the next
 * output row's first). The reference takes the window's taps row by row with v > acc ? v : acc
 * from -FLT_MAX; per row then across rows in order gives its element (the first of the largest;
 * NaN never), so the bits are the reference's. Against pool_rows, SqueezeNet's pools alone on
 * 1 thread (Intel Xeon): 27 -> 13 (256 planes, 13 outputs a row: one masked vector) 43.7 -> 24.4
 * us, 55 -> 27 74 -> 51, 111 -> 55 133 -> 131 (its 3.15 MB input comes from L3 either way). */
static FAST_AVX512 void pool_max3s2_avx512(const PoolGeom *g, const float *x, float *y, int64_t oh0,
                                           int64_t oh1) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512 init = _mm512_set1_ps(-FLT_MAX);
    if (g->wout <= 32) { /* a vector or two a row: each down the rows on its own */
        for (int64_t j0 = 0; j0 < g->wout; j0 += 16) {
            int64_t n = g->wout - j0 < 16 ? g->wout - j0 : 16, avail = g->w - 2 * j0;
            __mmask16 m = (__mmask16)(n == 16 ? 0xffff : (1u << n) - 1);
            const float *col = x + 2 * j0;
            __m512 prev = hmax3s2(col + 2 * oh0 * g->w, avail, even, init);
            for (int64_t oh = oh0; oh < oh1; oh++)
                prev = vmax3s2(col + (2 * oh + 1) * g->w, g->w, avail, prev, y + oh * g->wout + j0,
                               m, even, init);
        }
        return;
    }
    /* wider: up to 8 vectors side by side, each input row of the group read once (column by
     * column down the rows, a 111-wide plane was read four times: 131 -> 162 us) */
    for (int64_t g0 = 0; g0 < g->wout; g0 += 8 * 16) {
        int nv = (int)((g->wout - g0 + 15) / 16 < 8 ? (g->wout - g0 + 15) / 16 : 8);
        __m512 prev[8];
        for (int v = 0; v < nv; v++) {
            int64_t j0 = g0 + 16 * v;
            prev[v] = hmax3s2(x + 2 * oh0 * g->w + 2 * j0, g->w - 2 * j0, even, init);
        }
        for (int64_t oh = oh0; oh < oh1; oh++) {
            const float *r1 = x + (2 * oh + 1) * g->w;
            float *yr = y + oh * g->wout;
            for (int v = 0; v < nv; v++) {
                int64_t j0 = g0 + 16 * v, n = g->wout - j0 < 16 ? g->wout - j0 : 16;
                prev[v] = vmax3s2(r1 + 2 * j0, g->w, g->w - 2 * j0, prev[v], yr + j0,
                                  (__mmask16)(n == 16 ? 0xffff : (1u << n) - 1), even, init);
            }
        }
    }
}

void kern_max3s2_rows(const float *x, int64_t h, int64_t w, float *y, int64_t wout, int64_t oh0,
                      int64_t oh1) {
    PoolGeom g = {.is_max = true,
                  .h = h,
                  .w = w,
                  .hout = oh1,
                  .wout = wout,
                  .kh = 3,
                  .kw = 3,
                  .sh = 2,
                  .sw = 2,
                  .dh = 1,
                  .dw = 1,
                  .ow_hi = wout};
    RLY_ASSERT(max3s2_fits(&g));
    pool_max3s2_avx512(&g, x, y, oh0, oh1);
}

static void pool_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const PoolJob *j = ctx;
    const PoolGeom *g = &j->g;
    int64_t lo, hi;
    task_range(t, j->per_task, j->units, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        int64_t plane = u / j->n_blocks, r0 = u % j->n_blocks * j->block;
        int64_t r1 = r0 + j->block < g->hout ? r0 + j->block : g->hout;
        const float *xp = j->x + plane * g->h * g->w;
        float *yp = j->y + plane * g->hout * g->wout;
        if (j->max3s2)
            pool_max3s2_avx512(g, xp, yp, r0, r1);
        else
            j->lv->pool_rows(g, xp, yp, r0, r1);
    }
}

static int pool2d(KCall *kc, uint32_t op, bool is_max) {
    const DLTensor *x = k_arg(kc, 0);
    KernelFn ref = kern_ref_lookup(op);
    if (!is_f32(x) || x->ndim != 4 || !layout_is(kc, "NCHW")) return ref(kc);
    PoolGeom g = {.is_max = is_max, .h = x->shape[2], .w = x->shape[3]};
    int64_t pb, pr;
    const int64_t *pad;
    uint32_t n_pad = k_ints(kc, "padding", &pad);
    if (!attr_hw(kc, "pool_size", 1, &g.kh, &g.kw) || !attr_hw(kc, "strides", 1, &g.sh, &g.sw) ||
        !attr_hw(kc, "dilation", 1, &g.dh, &g.dw) || (n_pad != 1 && n_pad != 2 && n_pad != 4))
        return ref(kc);
    g.pt = pad[0];
    g.pl = pad[n_pad == 1 ? 0 : 1];
    pb = n_pad == 4 ? pad[2] : g.pt;
    pr = n_pad == 4 ? pad[3] : g.pl;
    if (g.pt < 0 || g.pl < 0 || pb < 0 || pr < 0 || g.pt > POOL_ATTR_MAX || g.pl > POOL_ATTR_MAX ||
        pb > POOL_ATTR_MAX || pr > POOL_ATTR_MAX || g.h > SUP_DIM_MAX / 4 || g.w > SUP_DIM_MAX / 4)
        return ref(kc);
    bool ceil_mode = k_bool(kc, "ceil_mode"), include_pad = false;
    for (uint32_t i = 0; i < kc->n_attrs; i++)
        if (strcmp(kc->attrs[i].name, "count_include_pad") == 0)
            include_pad = k_bool(kc, "count_include_pad");
    int64_t win_h = g.dh * (g.kh - 1) + 1, win_w = g.dw * (g.kw - 1) + 1;
    int64_t span_h = g.h + g.pt + pb - win_h, span_w = g.w + g.pl + pr - win_w;
    if (span_h < 0 || span_w < 0) return ref(kc); /* its error */
    g.hout = span_h / g.sh + 1 + (ceil_mode && span_h % g.sh != 0);
    g.wout = span_w / g.sw + 1 + (ceil_mode && span_w % g.sw != 0);
    /* interior columns: ow sw - pl >= 0 and ow sw - pl + win_w - 1 <= w - 1 */
    int64_t last = g.w - win_w + g.pl;
    g.ow_lo = (g.pl + g.sw - 1) / g.sw;
    g.ow_lo = g.ow_lo < g.wout ? g.ow_lo : g.wout;
    g.ow_hi = last < 0 ? 0 : last / g.sw + 1;
    g.ow_hi = g.ow_hi < g.wout ? g.ow_hi : g.wout;
    if (g.ow_hi < g.ow_lo) g.ow_hi = g.ow_lo;
    RLY_ASSERT(g.ow_lo <= g.ow_hi && g.ow_hi <= g.wout);
    int64_t shape[4] = {x->shape[0], x->shape[1], g.hout, g.wout};
    DLTensor *y = k_out_raw(kc, 0, RLY_DTYPE_F32, 4, shape);
    if (y == NULL) return -1;
    if (k_numel(y) == 0) return 0;
    if (!is_max) {
        float *dh = k_scratch_n(kc, g.hout + g.wout, sizeof(float));
        if (dh == NULL) return -1;
        for (int64_t o = 0; o < g.hout; o++)
            dh[o] = (float)pool_count(o, g.kh, g.sh, g.dh, g.pt, pb, g.h, include_pad);
        for (int64_t o = 0; o < g.wout; o++)
            dh[g.hout + o] = (float)pool_count(o, g.kw, g.sw, g.dw, g.pl, pr, g.w, include_pad);
        g.div_h = dh;
        g.div_w = dh + g.hout;
    }
    PoolJob j = {.lv = level(),
                 .g = g,
                 .x = k_ptr(x),
                 .y = k_ptr(y),
                 .n_blocks = 1,
                 .max3s2 = max3s2_fits(&g)};
    int64_t planes = x->shape[0] * x->shape[1], th = k_threads(kc);
    if (th > 1 && planes < 4 * th) { /* few planes: split their rows too */
        int64_t want = (4 * th + planes - 1) / planes;
        j.n_blocks = want < g.hout ? want : g.hout;
    }
    j.block = (g.hout + j.n_blocks - 1) / j.n_blocks;
    j.n_blocks = (g.hout + j.block - 1) / j.block;
    j.units = planes * j.n_blocks;
    int64_t per = sup_dim_mul_sat(sup_dim_mul_sat(j.block, g.wout), g.kh * g.kw);
    int64_t n_tasks = plan(kc, j.units, per, &j.per_task);
    k_parallel(kc, n_tasks, pool_task, &j);
    return 0;
}

static int k_max_pool2d(KCall *kc) { return pool2d(kc, OP_ID_NN_MAX_POOL2D, true); }
static int k_avg_pool2d(KCall *kc) { return pool2d(kc, OP_ID_NN_AVG_POOL2D, false); }

const KernelDef kern_fast_nn[] = {
    {OP_ID_NN_SOFTMAX, k_softmax},
    {OP_ID_NN_FAST_SOFTMAX, k_fast_softmax},
    {OP_ID_NN_LOG_SOFTMAX, k_log_softmax},
    {OP_ID_NN_LAYER_NORM, k_layer_norm},
    {OP_ID_SUM, k_sum},
    {OP_ID_MEAN, k_mean},
    {OP_ID_MAX, k_max},
    {OP_ID_NN_GLOBAL_AVG_POOL2D, k_global_avg_pool2d},
    {OP_ID_NN_GLOBAL_MAX_POOL2D, k_global_max_pool2d},
    {OP_ID_NN_BATCH_NORM, k_batch_norm},
    {OP_ID_NN_BIAS_ADD, k_bias_add},
    {OP_ID_NN_MAX_POOL2D, k_max_pool2d},
    {OP_ID_NN_AVG_POOL2D, k_avg_pool2d},
    {0, NULL},
};
