/* elem.c - fast f32 elementwise kernels (fast.h): the unary activations and math (relu, clip,
 * sigmoid, tanh, exp, erf, negative, abs, sqrt, rsqrt and their fast_* twins) and the
 * broadcasting arithmetic (add, subtract, multiply, divide, maximum, minimum).
 *
 * Each kernel takes float32 tensors only and hands every other call to the reference kernel
 * unchanged (which also reports the errors: bad broadcasts, NaN clip bounds). The level is chosen
 * per call by sup_isa(); the loops are instantiated per level from vmath_level.h and
 * elem_level.h. Work over ELEM_BLOCK elements or more is split into equal ranges (a multiple of
 * the thread count) run on the call's pool; smaller tensors run on the caller.
 *
 * Binary broadcasting: the output's index space is collapsed (size-1 dims dropped, neighbours
 * merged where both operands continue contiguously), which leaves rows along the innermost dim in
 * which each operand is either contiguous or one broadcast element: same-shape, scalar,
 * (N,C,H,W) op (C,1,1) and (M,N) op (N) all become such rows, of the whole tensor, H*W and N
 * elements. Any broadcast is covered this way; rows of a few elements are just slower.
 *
 * Results: relu, clip, negative, abs, sqrt and the six binary ops are exact (the reference's
 * double computation rounds to the same float); rsqrt is within 1 ulp; exp, sigmoid, tanh, erf
 * are within the bounds of docs/kernels_elem.md (a few ulp). */
#include <math.h>
#include <string.h>

#include "fast.h"

/* unary kinds, binary ops, and row patterns (both contiguous, b broadcast, a broadcast) */
enum {
    EU_RELU,
    EU_CLIP,
    EU_SIGMOID,
    EU_TANH,
    EU_EXP,
    EU_ERF,
    EU_NEGATIVE,
    EU_ABS,
    EU_SQRT,
    EU_RSQRT
};
enum { EB_ADD, EB_SUBTRACT, EB_MULTIPLY, EB_DIVIDE, EB_MAXIMUM, EB_MINIMUM };
enum { EP_VV, EP_VS, EP_SV };

#define ELEM_BLOCK 16384 /* elements per task, at least (about 64 KB of f32 per operand) */

#define FAST_LEVEL 2
#include "vmath_level.h"
#include "elem_level.h"
#undef FAST_LEVEL
#define FAST_LEVEL 1
#include "vmath_level.h"
#include "elem_level.h"
#undef FAST_LEVEL
#define FAST_LEVEL 0
#include "vmath_level.h"
#include "elem_level.h"
#undef FAST_LEVEL

typedef void (*UnaryRun)(int kind, const float *x, float *y, int64_t n, float lo, float hi);
typedef void (*BinaryRow)(int op, int pat, const float *a, const float *b, float *y, int64_t n);

static UnaryRun unary_level(void) {
    switch (sup_isa()) {
    case SUP_ISA_AVX512: return unary_run_avx512;
    case SUP_ISA_AVX2: return unary_run_avx2;
    default: return unary_run_scalar;
    }
}

static BinaryRow binary_level(void) {
    switch (sup_isa()) {
    case SUP_ISA_AVX512: return binary_row_avx512;
    case SUP_ISA_AVX2: return binary_row_avx2;
    default: return binary_row_scalar;
    }
}

/* The split of n elements into *n_tasks ranges of *block elements (a multiple of 16, the last
 * range shorter): one range below 2 * ELEM_BLOCK or without threads, else a multiple of the
 * thread count. */
static void split(const KCall *kc, int64_t n, int64_t *n_tasks, int64_t *block) {
    int th = k_threads(kc);
    if (th <= 1 || n < 2 * ELEM_BLOCK) {
        *n_tasks = 1;
        *block = n;
        return;
    }
    int64_t t = (n + ELEM_BLOCK - 1) / ELEM_BLOCK;
    t = (t + th - 1) / th * th;
    int64_t b = ((n + t - 1) / t + 15) / 16 * 16;
    *block = b;
    *n_tasks = (n + b - 1) / b;
}

/* ---- unary ----------------------------------------------------------------------------------- */

typedef struct UnaryJob {
    UnaryRun run;
    int kind;
    const float *x;
    float *y;
    int64_t n, block;
    float lo, hi;
} UnaryJob;

static void unary_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const UnaryJob *j = ctx;
    int64_t lo = t * j->block, hi = lo + j->block < j->n ? lo + j->block : j->n;
    j->run(j->kind, j->x + lo, j->y + lo, hi - lo, j->lo, j->hi);
}

static int unary(KCall *kc, uint32_t op, int kind) {
    const DLTensor *x = k_arg(kc, 0);
    if (k_dtype(x) != RLY_DTYPE_F32) return kern_ref_lookup(op)(kc);
    UnaryJob j = {.run = unary_level(), .kind = kind, .x = k_ptr(x)};
    if (kind == EU_CLIP) {
        double lo = k_float(kc, "a_min"), hi = k_float(kc, "a_max");
        if (isnan(lo) || isnan(hi)) return kern_ref_lookup(op)(kc); /* its error */
        k_storef(&j.lo, RLY_DTYPE_F32, 0, lo); /* the bounds cast to the dtype, as the reference */
        k_storef(&j.hi, RLY_DTYPE_F32, 0, hi);
    }
    DLTensor *y = k_out_raw(kc, 0, RLY_DTYPE_F32, (uint32_t)x->ndim, x->shape);
    if (y == NULL) return -1;
    j.y = k_ptr(y);
    j.n = k_numel(x);
    if (j.n == 0) return 0;
    int64_t n_tasks;
    split(kc, j.n, &n_tasks, &j.block);
    if (n_tasks == 1)
        j.run(kind, j.x, j.y, j.n, j.lo, j.hi);
    else
        k_parallel(kc, n_tasks, unary_task, &j);
    return 0;
}

#define UNARY_KERNEL(name, OP, KIND)                                                               \
    static int k_##name(KCall *kc) { return unary(kc, OP_ID_##OP, KIND); }
UNARY_KERNEL(relu, NN_RELU, EU_RELU)
UNARY_KERNEL(clip, CLIP, EU_CLIP)
UNARY_KERNEL(sigmoid, SIGMOID, EU_SIGMOID)
UNARY_KERNEL(tanh, TANH, EU_TANH)
UNARY_KERNEL(fast_tanh, FAST_TANH, EU_TANH)
UNARY_KERNEL(exp, EXP, EU_EXP)
UNARY_KERNEL(fast_exp, FAST_EXP, EU_EXP)
UNARY_KERNEL(erf, ERF, EU_ERF)
UNARY_KERNEL(fast_erf, FAST_ERF, EU_ERF)
UNARY_KERNEL(negative, NEGATIVE, EU_NEGATIVE)
UNARY_KERNEL(abs, ABS, EU_ABS)
UNARY_KERNEL(sqrt, SQRT, EU_SQRT)
UNARY_KERNEL(rsqrt, RSQRT, EU_RSQRT)
#undef UNARY_KERNEL

/* ---- binary with broadcasting ---------------------------------------------------------------- */

/* The collapsed index space: rows of `len` elements along the innermost dim, the outer dims
 * (outer[0..n_outer), row-major) with each operand's element strides. */
typedef struct BinaryJob {
    BinaryRow row;
    int op, pat;
    const float *a, *b;
    float *y;
    int64_t n, block, len;
    uint32_t n_outer;
    int64_t outer[K_MAX_DIMS], sa[K_MAX_DIMS], sb[K_MAX_DIMS];
} BinaryJob;

/* Elements [lo, hi) of the output: row by row, the first and last perhaps partial. */
static void binary_range(const BinaryJob *j, int64_t lo, int64_t hi) {
    int64_t r = lo / j->len, off = lo % j->len;
    int64_t idx[K_MAX_DIMS], oa = 0, ob = 0;
    for (uint32_t d = j->n_outer; d-- > 0;) { /* the row's multi-index and operand offsets */
        idx[d] = r % j->outer[d];
        r /= j->outer[d];
        oa += idx[d] * j->sa[d];
        ob += idx[d] * j->sb[d];
    }
    int64_t step_a = j->pat == EP_SV ? 0 : 1, step_b = j->pat == EP_VS ? 0 : 1;
    for (int64_t at = lo; at < hi;) {
        int64_t m = j->len - off < hi - at ? j->len - off : hi - at;
        j->row(j->op, j->pat, j->a + oa + off * step_a, j->b + ob + off * step_b, j->y + at, m);
        at += m;
        off = 0;
        for (uint32_t d = j->n_outer; d-- > 0;) { /* next row */
            oa += j->sa[d];
            ob += j->sb[d];
            if (++idx[d] < j->outer[d]) break;
            oa -= j->sa[d] * j->outer[d];
            ob -= j->sb[d] * j->outer[d];
            idx[d] = 0;
        }
    }
}

static void binary_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const BinaryJob *j = ctx;
    int64_t lo = t * j->block, hi = lo + j->block < j->n ? lo + j->block : j->n;
    binary_range(j, lo, hi);
}

static int binary(KCall *kc, uint32_t op_id, int op) {
    const DLTensor *a = k_arg(kc, 0), *b = k_arg(kc, 1);
    uint32_t ndim;
    int64_t shape[K_MAX_DIMS], sa[K_MAX_DIMS], sb[K_MAX_DIMS];
    if (k_dtype(a) != RLY_DTYPE_F32 || k_dtype(b) != RLY_DTYPE_F32 || a->ndim > K_MAX_DIMS ||
        b->ndim > K_MAX_DIMS || !k_bcast_shape(a, b, &ndim, shape))
        return kern_ref_lookup(op_id)(kc);
    DLTensor *y = k_out_raw(kc, 0, RLY_DTYPE_F32, ndim, shape);
    if (y == NULL) return -1;
    BinaryJob j = {.row = binary_level(), .op = op, .a = k_ptr(a), .b = k_ptr(b), .y = k_ptr(y)};
    j.n = k_shape_numel(ndim, shape);
    if (j.n == 0) return 0;
    k_bcast_strides(a, ndim, shape, sa);
    k_bcast_strides(b, ndim, shape, sb);
    /* Collapse: drop size-1 dims; merge dim d into the kept one before it when both operands
     * continue contiguously (stride before == stride * extent; both 0 when broadcast). */
    uint32_t m = 0;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        if (m > 0 && sa[m - 1] == sa[d] * shape[d] && sb[m - 1] == sb[d] * shape[d]) {
            j.outer[m - 1] *= shape[d];
            sa[m - 1] = sa[d];
            sb[m - 1] = sb[d];
            continue;
        }
        j.outer[m] = shape[d];
        sa[m] = sa[d];
        sb[m] = sb[d];
        m++;
    }
    if (m == 0) { /* every dim is 1: one element, a row of 1 read at offset 0 */
        j.outer[0] = 1;
        sa[0] = sb[0] = 1;
        m = 1;
    }
    /* The innermost dim is the rows; each operand's stride there is 1 (it has the dim) or 0 (it
     * is broadcast along it), not both 0 (the dim's extent comes from one of them). */
    j.len = j.outer[m - 1];
    RLY_ASSERT(sa[m - 1] <= 1 && sb[m - 1] <= 1 && (sa[m - 1] | sb[m - 1]) != 0);
    j.pat = sa[m - 1] == 0 ? EP_SV : sb[m - 1] == 0 ? EP_VS : EP_VV;
    j.n_outer = m - 1;
    for (uint32_t d = 0; d + 1 < m; d++) {
        j.sa[d] = sa[d];
        j.sb[d] = sb[d];
    }
    int64_t n_tasks;
    split(kc, j.n, &n_tasks, &j.block);
    if (n_tasks == 1)
        binary_range(&j, 0, j.n);
    else
        k_parallel(kc, n_tasks, binary_task, &j);
    return 0;
}

#define BINARY_KERNEL(name, OP, KIND)                                                              \
    static int k_##name(KCall *kc) { return binary(kc, OP_ID_##OP, KIND); }
BINARY_KERNEL(add, ADD, EB_ADD)
BINARY_KERNEL(subtract, SUBTRACT, EB_SUBTRACT)
BINARY_KERNEL(multiply, MULTIPLY, EB_MULTIPLY)
BINARY_KERNEL(divide, DIVIDE, EB_DIVIDE)
BINARY_KERNEL(maximum, MAXIMUM, EB_MAXIMUM)
BINARY_KERNEL(minimum, MINIMUM, EB_MINIMUM)
#undef BINARY_KERNEL

const KernelDef kern_fast_elem[] = {
    {OP_ID_NN_RELU, k_relu},
    {OP_ID_CLIP, k_clip},
    {OP_ID_SIGMOID, k_sigmoid},
    {OP_ID_TANH, k_tanh},
    {OP_ID_FAST_TANH, k_fast_tanh},
    {OP_ID_EXP, k_exp},
    {OP_ID_FAST_EXP, k_fast_exp},
    {OP_ID_ERF, k_erf},
    {OP_ID_FAST_ERF, k_fast_erf},
    {OP_ID_NEGATIVE, k_negative},
    {OP_ID_ABS, k_abs},
    {OP_ID_SQRT, k_sqrt},
    {OP_ID_RSQRT, k_rsqrt},
    {OP_ID_ADD, k_add},
    {OP_ID_SUBTRACT, k_subtract},
    {OP_ID_MULTIPLY, k_multiply},
    {OP_ID_DIVIDE, k_divide},
    {OP_ID_MAXIMUM, k_maximum},
    {OP_ID_MINIMUM, k_minimum},
    {0, NULL},
};
