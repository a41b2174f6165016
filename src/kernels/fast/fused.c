/* fused.c - fused elementwise programs (fused.h).
 *
 * The result is cut into chunks (tasks of the pool) and each chunk into blocks of FX_BLOCK
 * elements; a block is computed step by step into small buffers that stay in L1, then stored. An
 * operand of the result's shape is read in place; any other is gathered per block through its
 * broadcast strides, with dims merged so that a per-channel or per-row operand costs one fill or
 * copy per run of equal or contiguous elements. The step loops (fused_level.h) are written on
 * the vector layer of vmath_level.h, once per instruction-set level (AVX-512, AVX2, portable). */
#include <math.h>
#include <string.h>

#include "fast.h"
#include "fused.h"
#include "gemm.h"

enum { FX_CHUNK = 16384, FX_MIN_CHUNK = 4096 };

bool fx_step_of(uint32_t op_id, const KAttr *attrs, uint32_t n_attrs, FxStep *st, uint32_t *arity) {
    memset(st, 0, sizeof *st);
    *arity = 1;
    switch (op_id) {
    case OP_ID_ADD: st->op = FX_ADD, *arity = 2; return true;
    case OP_ID_SUBTRACT: st->op = FX_SUB, *arity = 2; return true;
    case OP_ID_MULTIPLY: st->op = FX_MUL, *arity = 2; return true;
    case OP_ID_DIVIDE: st->op = FX_DIV, *arity = 2; return true;
    case OP_ID_MAXIMUM: st->op = FX_MAX, *arity = 2; return true;
    case OP_ID_MINIMUM: st->op = FX_MIN, *arity = 2; return true;
    case OP_ID_POWER: st->op = FX_POW, *arity = 2; return true;
    case OP_ID_NN_RELU: st->op = FX_RELU; return true;
    case OP_ID_SIGMOID: st->op = FX_SIGMOID; return true;
    case OP_ID_TANH: st->op = FX_TANH; return true;
    case OP_ID_EXP: st->op = FX_EXP; return true;
    case OP_ID_ERF: st->op = FX_ERF; return true;
    case OP_ID_SQRT: st->op = FX_SQRT; return true;
    case OP_ID_RSQRT: st->op = FX_RSQRT; return true;
    case OP_ID_NEGATIVE: st->op = FX_NEG; return true;
    case OP_ID_ABS: st->op = FX_ABS; return true;
    case OP_ID_COPY: st->op = FX_COPY; return true;
    case OP_ID_NN_LEAKY_RELU:
    case OP_ID_CLIP: {
        /* the attributes by name, as the reference kernel reads them */
        double v[2] = {0, 0};
        const char *names[2] = {op_id == OP_ID_CLIP ? "a_min" : "alpha", "a_max"};
        uint32_t want = op_id == OP_ID_CLIP ? 2 : 1, got = 0;
        for (uint32_t k = 0; k < want; k++)
            for (uint32_t i = 0; i < n_attrs; i++)
                if (attrs[i].name != NULL && strcmp(attrs[i].name, names[k]) == 0 &&
                    (attrs[i].kind == KA_FLOAT || attrs[i].kind == KA_INT)) {
                    v[k] = attrs[i].kind == KA_INT ? (double)attrs[i].i : attrs[i].f;
                    got++;
                    break;
                }
        if (got != want || isnan(v[0]) || isnan(v[1])) return false;
        st->op = op_id == OP_ID_CLIP ? FX_CLIP : FX_LEAKY;
        st->p0 = (float)v[0]; /* the reference casts the bounds and alpha to the dtype */
        st->p1 = (float)v[1];
        return true;
    }
    default: return false;
    }
}

/* ---- shapes ---------------------------------------------------------------------------------- */

static bool bcast_into(uint32_t *nd, int64_t *sh, uint32_t nd2, const int64_t *sh2) {
    if (nd2 > K_MAX_DIMS) return false;
    int64_t out[K_MAX_DIMS];
    uint32_t n = *nd > nd2 ? *nd : nd2;
    for (uint32_t i = 0; i < n; i++) {
        int64_t a = i < *nd ? sh[*nd - 1 - i] : 1, b = i < nd2 ? sh2[nd2 - 1 - i] : 1;
        if (a != b && a != 1 && b != 1) return false;
        out[n - 1 - i] = a == 1 ? b : a;
    }
    memcpy(sh, out, sizeof(int64_t) * n);
    *nd = n;
    return true;
}

bool fx_shape(const FxProgram *p, const DLTensor *const *ops, uint32_t *ndim, int64_t *shape) {
    if (p->n_steps == 0 || p->n_operands > FX_MAX_OPERANDS) return false;
    for (uint32_t i = 0; i < p->n_operands; i++) {
        const DLTensor *t = ops[i];
        if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1 ||
            t->ndim < 0 || t->ndim > K_MAX_DIMS || t->strides != NULL)
            return false;
    }
    /* each value's shape: operands as given, steps the broadcast of their arguments */
    static _Thread_local int64_t vsh[FX_MAX_OPERANDS + FX_MAX_STEPS][K_MAX_DIMS];
    uint32_t vnd[FX_MAX_OPERANDS + FX_MAX_STEPS];
    for (uint32_t i = 0; i < p->n_operands; i++) {
        vnd[i] = (uint32_t)ops[i]->ndim;
        memcpy(vsh[i], ops[i]->shape, sizeof(int64_t) * vnd[i]);
    }
    for (uint32_t s = 0; s < p->n_steps; s++) {
        const FxStep *st = &p->step[s];
        uint32_t v = p->n_operands + s;
        if (st->a >= v || (st->op < FX_RELU && st->b >= v)) return false;
        vnd[v] = vnd[st->a];
        memcpy(vsh[v], vsh[st->a], sizeof(int64_t) * vnd[v]);
        if (st->op < FX_RELU && !bcast_into(&vnd[v], vsh[v], vnd[st->b], vsh[st->b])) return false;
    }
    uint32_t r = p->n_operands + p->n_steps - 1;
    *ndim = vnd[r];
    memcpy(shape, vsh[r], sizeof(int64_t) * vnd[r]);
    /* every step of the result's shape; every operand broadcastable to it */
    for (uint32_t v = 0; v <= r; v++) {
        if (v >= p->n_operands &&
            (vnd[v] != *ndim || memcmp(vsh[v], shape, sizeof(int64_t) * *ndim) != 0))
            return false;
        uint32_t nd = *ndim;
        int64_t tmp[K_MAX_DIMS];
        memcpy(tmp, shape, sizeof(int64_t) * nd);
        if (!bcast_into(&nd, tmp, vnd[v], vsh[v]) || nd != *ndim ||
            memcmp(tmp, shape, sizeof(int64_t) * nd) != 0)
            return false;
    }
    return true;
}

/* ---- operands ------------------------------------------------------------------------------- */

typedef FxSrc Src;

static void src_init(Src *s, const DLTensor *t, uint32_t ndim, const int64_t *shape) {
    s->data = (const float *)k_ptr(t);
    int64_t n = k_numel(t), total = k_shape_numel(ndim, shape);
    if (n == total) { /* the result's shape (broadcast of size-1 dims aside: same elements) */
        s->kind = 0;
        return;
    }
    if (n == 1) {
        s->kind = 1;
        return;
    }
    s->kind = 2;
    int64_t st[K_MAX_DIMS];
    k_bcast_strides(t, ndim, shape, st);
    s->nd = 0;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        if (s->nd > 0 && ((st[d] == 0 && s->stride[s->nd - 1] == 0) ||
                          (st[d] != 0 && s->stride[s->nd - 1] == st[d] * shape[d]))) {
            s->size[s->nd - 1] *= shape[d];
            s->stride[s->nd - 1] = st[d];
            continue;
        }
        s->size[s->nd] = shape[d];
        s->stride[s->nd] = st[d];
        s->nd++;
    }
    if (s->nd == 0) { /* every dim 1: one element */
        s->kind = 1;
    }
}

/* Elements [i0, i0 + n) of the broadcast operand into buf. */
static void src_gather(const Src *s, int64_t i0, int64_t n, float *buf) {
    int64_t idx[K_MAX_DIMS], off = 0, rem = i0;
    for (uint32_t d = s->nd; d-- > 0;) {
        idx[d] = rem % s->size[d];
        rem /= s->size[d];
        off += idx[d] * s->stride[d];
    }
    uint32_t last = s->nd - 1;
    int64_t done = 0;
    while (done < n) {
        int64_t run = s->size[last] - idx[last];
        if (run > n - done) run = n - done;
        if (s->stride[last] == 0) {
            float v = s->data[off];
            for (int64_t j = 0; j < run; j++)
                buf[done + j] = v;
        } else {
            memcpy(buf + done, s->data + off, sizeof(float) * (size_t)run);
            off += run;
        }
        done += run;
        idx[last] += run;
        if (idx[last] < s->size[last]) continue;
        /* carry into the outer dims */
        off -= s->stride[last] * s->size[last];
        idx[last] = 0;
        for (uint32_t d = last; d-- > 0;) {
            off += s->stride[d];
            if (++idx[d] < s->size[d]) break;
            off -= s->stride[d] * s->size[d];
            idx[d] = 0;
        }
    }
}

/* ---- the step loops, per instruction-set level ---------------------------------------------- */

/* the step loops, per level (vmath_level.h; its transcendentals are within a few ulp,
 * docs/kernels_elem.md) */
#define FAST_LEVEL 2
#include "vmath_level.h"
#include "fused_level.h"
#undef FAST_LEVEL
#define FAST_LEVEL 1
#include "vmath_level.h"
#include "fused_level.h"
#undef FAST_LEVEL
#define FAST_LEVEL 0
#include "vmath_level.h"
#include "fused_level.h"
#undef FAST_LEVEL

typedef void (*StepFn)(const FxStep *st, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float *y, int64_t ldy, int64_t rows, int64_t n);
typedef void (*BiasFn)(const float *x, const float *bp, float bs, bool bias_first, uint8_t clamp,
                       float lo, float hi, float *y, int64_t n);

static StepFn step_fn(void) {
#if defined(__x86_64__)
    switch (sup_isa()) {
    case SUP_ISA_AVX512: return fx_step_avx512;
    case SUP_ISA_AVX2: return fx_step_avx2;
    default: break;
    }
#endif
    return fx_step_scalar;
}

static BiasFn bias_fn(void) {
#if defined(__x86_64__)
    switch (sup_isa()) {
    case SUP_ISA_AVX512: return fx_bias_run_avx512;
    case SUP_ISA_AVX2: return fx_bias_run_avx2;
    default: break;
    }
#endif
    return fx_bias_run_scalar;
}

/* Whether bound program b is a bias tail (FxBound.bias): x + bias or bias + x, then maybe one
 * relu or clip of it, x read in place and the bias gathered over at most 2 merged dims whose
 * innermost stride is 0 (a per-channel bias of NCHW) or 1 (a per-column bias of a product). */
static void bias_detect(FxBound *b) {
    const FxProgram *p = b->p;
    b->bias = false;
    if (p->n_steps < 1 || p->n_steps > 2 || p->step[0].op != FX_ADD) return;
    const FxStep *s0 = &p->step[0];
    if (s0->a >= p->n_operands || s0->b >= p->n_operands) return;
    int xk = b->src[s0->a].kind, bk = b->src[s0->b].kind;
    bool first = xk == 2 && bk == 0;
    if (!first && !(xk == 0 && bk == 2)) return;
    uint16_t x = first ? s0->b : s0->a, bi = first ? s0->a : s0->b;
    const FxSrc *bs = &b->src[bi];
    if (bs->nd < 1 || bs->nd > 2 || (bs->stride[bs->nd - 1] != 0 && bs->stride[bs->nd - 1] != 1))
        return;
    uint8_t clamp = 0;
    if (p->n_steps == 2) {
        const FxStep *s1 = &p->step[1];
        if ((s1->op != FX_RELU && s1->op != FX_CLIP) || s1->a != p->n_operands) return;
        clamp = s1->op;
        b->bias_lo = s1->p0, b->bias_hi = s1->p1;
    }
    b->bias = true;
    b->bias_first = first;
    b->bias_clamp = clamp;
    b->bias_x = x, b->bias_b = bi;
    b->bias_fn = (void (*)(void))bias_fn();
}

/* Elements [lo, hi) of a bias tail: run by run of the bias. */
static void bias_range(const FxBound *r, int64_t lo, int64_t hi) {
    const FxSrc *s = &r->src[r->bias_b];
    const float *x = r->src[r->bias_x].data;
    BiasFn fn = (BiasFn)r->bias_fn;
    uint32_t last = s->nd - 1;
    int64_t inner = s->size[last];
    for (int64_t i = lo; i < hi;) {
        int64_t j = i % inner, n = inner - j < hi - i ? inner - j : hi - i;
        int64_t off = s->nd == 2 ? i / inner % s->size[0] * s->stride[0] : 0;
        if (s->stride[last] == 0)
            fn(x + i, NULL, s->data[off], r->bias_first, r->bias_clamp, r->bias_lo, r->bias_hi,
               r->out + i, n);
        else
            fn(x + i, s->data + off + j, 0.0f, r->bias_first, r->bias_clamp, r->bias_lo, r->bias_hi,
               r->out + i, n);
        i += n;
    }
}

void kern_clamp_rows(float *c, int64_t ld, int64_t rows, int64_t cols, uint8_t clamp, float lo,
                     float hi) {
    /* the program's own relu or clip step, in place over the rows (each vector read before it
     * is stored) */
    FxStep st = {.op = clamp == K_CLAMP_RELU ? FX_RELU : FX_CLIP, .p0 = lo, .p1 = hi};
    if (cols == ld) cols *= rows, rows = 1;
    step_fn()(&st, c, ld, c, ld, c, ld, rows, cols);
}

void kern_bias_rows(float *c, int64_t ld, int64_t rows, int64_t cols, const float *brow,
                    const float *bcol, bool first, uint8_t clamp, float lo, float hi,
                    const float *res, bool res_first) {
    /* the bias tail's own run loop (bias_range), row by row in place; with a residual, the bias
     * alone there, then the residual and the clamp as the program's add, relu and clip compute
     * them (relu: NaN and -0 to 0; clip: NaN kept) */
    uint8_t fc = clamp == K_CLAMP_RELU ? FX_RELU : clamp == K_CLAMP_CLIP ? FX_CLIP : 0;
    BiasFn fn = bias_fn();
    for (int64_t i = 0; i < rows; i++) {
        float *y = c + i * ld;
        fn(y, bcol, brow ? brow[i] : 0.0f, first, res ? 0 : fc, lo, hi, y, cols);
        if (res == NULL) continue;
        const float *r = res + i * ld;
        for (int64_t j = 0; j < cols; j++) {
            y[j] = kern_clamp1(clamp, lo, hi, res_first ? r[j] + y[j] : y[j] + r[j]);
        }
    }
}

/* ---- running --------------------------------------------------------------------------------- */

static void eval_range(const FxBound *r, int64_t lo, int64_t hi) {
    if (r->bias) {
        bias_range(r, lo, hi);
        return;
    }
    const FxProgram *p = r->p;
    _Alignas(64) float buf[FX_MAX_STEPS + FX_MAX_OPERANDS][FX_BLOCK];
    StepFn fn = (StepFn)r->fn;
    const float *val[FX_MAX_OPERANDS + FX_MAX_STEPS];
    for (int64_t i0 = lo; i0 < hi; i0 += FX_BLOCK) {
        int64_t n = hi - i0 < FX_BLOCK ? hi - i0 : FX_BLOCK;
        for (uint32_t i = 0; i < p->n_operands; i++) {
            const Src *s = &r->src[i];
            if (s->kind == 0) {
                val[i] = s->data + i0;
            } else if (s->kind == 1) {
                val[i] = r->splat[i];
            } else {
                src_gather(s, i0, n, buf[FX_MAX_STEPS + i]);
                val[i] = buf[FX_MAX_STEPS + i];
            }
        }
        /* The last step writes the result in place. out may be an operand of the result's
         * shape (in place): the earlier steps have read this block of it, and the step loops
         * (no restrict) read each vector of their arguments before storing the same elements. */
        for (uint32_t k = 0; k < p->n_steps; k++) {
            const FxStep *st = &p->step[k];
            float *y = k + 1 == p->n_steps ? r->out + i0 : buf[k];
            fn(st, val[st->a], 0, st->op < FX_RELU ? val[st->b] : val[st->a], 0, y, 0, 1, n);
            val[p->n_operands + k] = y;
        }
    }
}

void fx_bind(FxBound *b, const FxProgram *p, const DLTensor *const *ops, float *out, uint32_t ndim,
             const int64_t *shape) {
    b->p = p;
    b->out = out;
    b->total = k_shape_numel(ndim, shape);
    b->fn = (void (*)(void))step_fn();
    for (uint32_t i = 0; i < p->n_operands; i++) {
        src_init(&b->src[i], ops[i], ndim, shape);
        if (b->src[i].kind == 1)
            for (int j = 0; j < FX_BLOCK; j++)
                b->splat[i][j] = b->src[i].data[0];
    }
    bias_detect(b);
}

void fx_range(const FxBound *b, int64_t lo, int64_t n) { eval_range(b, lo, lo + n); }

/* Where operand s's values for the block of rows x cols elements at flat index f0 (rows ld
 * apart) lie in place: true with *p and *ld (0: every row reads the same values) when each row is
 * a contiguous run of s and the rows are evenly spaced. Operands of the result's shape, and a row
 * vector broadcast over the rows (a product's per-column bias: one run of stride 1, every outer
 * dim of stride 0, ld a multiple of the run), qualify. */
static bool src_rows(const Src *s, const float *splat, int64_t f0, int64_t cols, int64_t ld,
                     const float **p, int64_t *pld) {
    if (s->kind == 0) {
        *p = s->data + f0, *pld = ld;
        return true;
    }
    if (s->kind == 1) {
        *p = splat, *pld = 0;
        return cols <= FX_BLOCK;
    }
    uint32_t last = s->nd - 1;
    int64_t inner = s->size[last];
    if (s->stride[last] != 1 || ld % inner != 0 || f0 % inner + cols > inner) return false;
    for (uint32_t d = 0; d < last; d++)
        if (s->stride[d] != 0) return false;
    *p = s->data + f0 % inner, *pld = 0;
    return true;
}

/* A block of rows x cols result elements at flat index f0, rows ld apart (ld > cols): blocks of
 * whole rows of at most FX_BLOCK elements, each step one call over the block's rows. Operands
 * are read in place where src_rows says so, else gathered row by row. */
static void eval_rows(const FxBound *r, int64_t f0, int64_t rows, int64_t cols, int64_t ld) {
    const FxProgram *p = r->p;
    _Alignas(64) float buf[FX_MAX_STEPS + FX_MAX_OPERANDS][FX_BLOCK];
    StepFn fn = (StepFn)r->fn;
    const float *val[FX_MAX_OPERANDS + FX_MAX_STEPS];
    int64_t vld[FX_MAX_OPERANDS + FX_MAX_STEPS];
    int64_t rb = FX_BLOCK / cols;
    for (int64_t r0 = 0; r0 < rows; r0 += rb) {
        int64_t nr = rows - r0 < rb ? rows - r0 : rb, fb = f0 + r0 * ld;
        for (uint32_t i = 0; i < p->n_operands; i++) {
            if (src_rows(&r->src[i], r->splat[i], fb, cols, ld, &val[i], &vld[i])) continue;
            float *g = buf[FX_MAX_STEPS + i];
            for (int64_t j = 0; j < nr; j++)
                src_gather(&r->src[i], fb + j * ld, cols, g + j * cols);
            val[i] = g, vld[i] = cols;
        }
        for (uint32_t k = 0; k < p->n_steps; k++) {
            const FxStep *st = &p->step[k];
            bool end = k + 1 == p->n_steps;
            float *y = end ? r->out + fb : buf[k];
            uint16_t b = st->op < FX_RELU ? st->b : st->a;
            fn(st, val[st->a], vld[st->a], val[b], vld[b], y, end ? ld : cols, nr, cols);
            val[p->n_operands + k] = y, vld[p->n_operands + k] = cols;
        }
    }
}

void fx_range2(const FxBound *b, int64_t f0, int64_t rows, int64_t cols, int64_t ld) {
    if (rows <= 0 || cols <= 0) return;
    const float *bp;
    int64_t bld;
    if (rows == 1 || cols == ld) {
        eval_range(b, f0, f0 + rows * cols);
    } else if (b->bias && src_rows(&b->src[b->bias_b], NULL, f0, cols, ld, &bp, &bld)) {
        /* a per-column bias: the same run of it for every row */
        BiasFn fn = (BiasFn)b->bias_fn;
        const float *x = b->src[b->bias_x].data;
        for (int64_t i = 0, f = f0; i < rows; i++, f += ld)
            fn(x + f, bp, 0.0f, b->bias_first, b->bias_clamp, b->bias_lo, b->bias_hi, b->out + f,
               cols);
    } else if (b->bias || cols > FX_BLOCK) {
        for (int64_t i = 0; i < rows; i++)
            eval_range(b, f0 + i * ld, f0 + i * ld + cols);
    } else {
        eval_rows(b, f0, rows, cols, ld);
    }
}

typedef struct Chunks {
    const FxBound *b;
    int64_t size; /* elements per task */
} Chunks;

static void run_chunk(void *ctx, int64_t task, int worker) {
    (void)worker;
    const Chunks *c = ctx;
    int64_t lo = task * c->size, hi = lo + c->size < c->b->total ? lo + c->size : c->b->total;
    eval_range(c->b, lo, hi);
}

void fx_run(const FxProgram *p, const DLTensor *const *ops, float *out, uint32_t ndim,
            const int64_t *shape, SupPool *pool) {
    FxBound r;
    fx_bind(&r, p, ops, out, ndim, shape);
    /* tasks of FX_CHUNK elements, smaller (down to FX_MIN_CHUNK) when that gives each thread
     * about two: a fork costs about a microsecond, a chunk of 4K elements a few */
    int threads = sup_pool_threads(pool);
    Chunks c = {&r, FX_CHUNK};
    if (threads > 1 && r.total < (int64_t)FX_CHUNK * threads * 2) {
        c.size = (r.total + threads * 2 - 1) / (threads * 2);
        c.size = (c.size + FX_BLOCK - 1) / FX_BLOCK * FX_BLOCK;
        if (c.size < FX_MIN_CHUNK) c.size = FX_MIN_CHUNK;
    }
    int64_t chunks = (r.total + c.size - 1) / c.size;
    if (chunks <= 1 || pool == NULL) {
        eval_range(&r, 0, r.total);
        return;
    }
    sup_pool_run(pool, chunks, run_chunk, &c);
}
