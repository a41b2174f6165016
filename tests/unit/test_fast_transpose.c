/* test_fast_transpose.c - the fast transpose (src/kernels/fast/transpose.c) against the
 * reference kernel, byte for byte: random ranks 1-6, random shapes (dims of 1 that the reduction
 * drops, rows that are not a multiple of 16, some large enough to be split across threads),
 * random permutations and the default (reversed) one, 4-byte dtypes (f32 with NaN payloads, i32)
 * and others (handed to the reference kernel), at every instruction-set level this machine has
 * and on 1 and 2 threads; then the model shapes (BERT's head split and key transpose) and the
 * calls the reference kernel rejects (the same message); and layout_transform (its fast form for
 * 4-byte elements: NCHW <-> NCHW16c by 16 x 16 register tiles, other refinements by the
 * transpose; padding and re-blocking handed to the reference). RLY_SEED=N replays; prints `N
 * passed, N failed`. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fast/fast.h"
#include "kernels/kernel.h"

static uint64_t rng;
static uint32_t next(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 11) % n);
}

static int n_pass, n_fail;

typedef struct Out {
    DLTensor t;
    int64_t shape[K_MAX_DIMS];
    void *data;
} Out;

static Out *alloc_into;
static int alloc_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    (void)i;
    Out *o = alloc_into;
    memcpy(o->shape, shape, sizeof(int64_t) * ndim);
    int64_t n = k_shape_numel(ndim, shape);
    o->data = calloc((size_t)(n > 0 ? n : 1), sup_dtype_size(dt));
    o->t = (DLTensor){.data = o->data,
                      .device = {kDLCPU, 0},
                      .ndim = (int)ndim,
                      .dtype = k_dl_dtype(dt),
                      .shape = o->shape};
    kc->out[0] = &o->t;
    return 0;
}

/* Run fn: transpose x (axes: n of them, n 0 for none) into o, or with lt[0] not NULL
 * layout_transform it from layout lt[0] to lt[1]; the return code, err filled. */
static int call(KernelFn fn, const DLTensor *x, uint32_t n, const int64_t *axes,
                const char *const lt[2], SupPool *pool, Out *o, char *err, size_t cap) {
    int64_t ints[K_MAX_DIMS];
    double fl[K_MAX_DIMS];
    for (uint32_t i = 0; i < n; i++)
        ints[i] = axes[i], fl[i] = (double)axes[i];
    KAttr at[2] = {{.name = "axes", .kind = KA_INTS, .n = n, .ints = ints, .floats = fl}};
    if (lt[0] != NULL) {
        at[0] = (KAttr){.name = "src_layout", .kind = KA_STR, .s = lt[0]};
        at[1] = (KAttr){.name = "dst_layout", .kind = KA_STR, .s = lt[1]};
    }
    const DLTensor *in[1] = {x};
    uint32_t start[1] = {0}, len[1] = {1};
    uint8_t tup[1] = {0};
    DLTensor *outs[1] = {NULL};
    memset(o, 0, sizeof *o);
    alloc_into = o;
    err[0] = '\0';
    KCall kc = {.op = lt[0] ? "layout_transform" : "transpose",
                .attrs = at,
                .n_attrs = lt[0] ? 2 : 1,
                .n_args = 1,
                .arg_start = start,
                .arg_len = len,
                .arg_tuple = tup,
                .in = in,
                .n_in = 1,
                .out = outs,
                .n_out = 1,
                .alloc = alloc_out,
                .err = err,
                .err_cap = cap,
                .pool = pool};
    int rc = k_call_result(&kc, fn(&kc));
    k_call_release(&kc);
    return rc;
}

static void check_call(rly_dtype dt, uint32_t nd, const int64_t *shape, uint32_t na,
                       const int64_t *axes, const char *const lt[2], SupPool *pool,
                       const char *how) {
    int64_t n = k_shape_numel(nd, shape);
    size_t es = sup_dtype_size(dt);
    int64_t sh[K_MAX_DIMS];
    memcpy(sh, shape, sizeof(int64_t) * nd);
    uint8_t *data = malloc((size_t)(n > 0 ? n : 1) * es);
    for (int64_t i = 0; i < n * (int64_t)es; i++)
        data[i] = (uint8_t)next(256);
    DLTensor x = {
        .data = data, .device = {kDLCPU, 0}, .ndim = (int)nd, .dtype = k_dl_dtype(dt), .shape = sh};
    Out want, got;
    char e1[256], e2[256];
    uint32_t op = lt[0] ? OP_ID_LAYOUT_TRANSFORM : OP_ID_TRANSPOSE;
    int r1 = call(kern_ref_lookup(op), &x, na, axes, lt, NULL, &want, e1, sizeof e1);
    int r2 = call(kern_fast_lookup(op), &x, na, axes, lt, pool, &got, e2, sizeof e2);
    int64_t n_out = r1 == 0 ? k_shape_numel((uint32_t)want.t.ndim, want.shape) : 0;
    bool ok = r1 == r2 && (r1 != 0 ? strcmp(e1, e2) == 0
                                   : want.t.ndim == got.t.ndim &&
                                         memcmp(want.shape, got.shape,
                                                sizeof(int64_t) * (size_t)want.t.ndim) == 0 &&
                                         memcmp(want.data, got.data, (size_t)n_out * es) == 0);
    if (ok) {
        n_pass++;
    } else {
        n_fail++;
        printf("FAIL %s %s %s rank %u, %" PRId64 " elements, dtype %s (seed %" PRIu64
               "): rc %d/%d '%s' / '%s'\n",
               lt[0] ? lt[0] : "transpose", lt[0] ? lt[1] : "", how, nd, n, sup_dtype_name(dt), rng,
               r1, r2, e1, e2);
    }
    free(want.data);
    free(got.data);
    free(data);
}

static void check_one(rly_dtype dt, uint32_t nd, const int64_t *shape, uint32_t na,
                      const int64_t *axes, SupPool *pool, const char *how) {
    const char *const none[2] = {NULL, NULL};
    check_call(dt, nd, shape, na, axes, none, pool, how);
}

/* layout_transform x (shape, in layout src) to dst */
static void check_layout(const char *src, const char *dst, uint32_t nd, const int64_t *shape,
                         SupPool *pool, const char *how) {
    const char *const lt[2] = {src, dst};
    check_call(RLY_DTYPE_F32, nd, shape, 0, NULL, lt, pool, how);
}

static void layout_cases(SupPool *pool, const char *how) {
    int64_t a[4] = {1, 32, 7, 9}, b[4] = {2, 48, 17, 16}, c[4] = {1, 144, 56, 56};
    int64_t a5[5] = {1, 2, 7, 9, 16}, b5[5] = {2, 3, 17, 16, 16}, c5[5] = {1, 9, 56, 56, 16};
    /* split across threads with a masked last tile and two images */
    int64_t d[4] = {2, 32, 45, 47}, d5[5] = {2, 2, 45, 47, 16};
    check_layout("NCHW", "NCHW16c", 4, a, pool, how); /* 63 positions: a masked tile */
    check_layout("NCHW", "NCHW16c", 4, b, pool, how);
    check_layout("NCHW", "NCHW16c", 4, c, pool, how); /* split across threads */
    check_layout("NCHW16c", "NCHW", 5, a5, pool, how);
    check_layout("NCHW16c", "NCHW", 5, b5, pool, how);
    check_layout("NCHW16c", "NCHW", 5, c5, pool, how);
    check_layout("NCHW", "NCHW16c", 4, d, pool, how);
    check_layout("NCHW16c", "NCHW", 5, d5, pool, how);
    check_layout("NCHW", "NCHW8c", 4, b, pool, how); /* the general transpose */
    check_layout("NHWC", "NCHW16c", 4, (int64_t[4]){1, 5, 6, 32}, pool, how);
    check_layout("NCHW16c", "NHWC", 5, a5, pool, how);
    check_layout("NCHW", "NHWC", 4, b, pool, how);
    check_layout("NCHW16c", "NCHW16c", 5, a5, pool, how);
    /* the reference's: padding (24 channels in 16-blocks), two blocks of one axis, errors */
    check_layout("NCHW", "NCHW16c", 4, (int64_t[4]){1, 24, 3, 3}, pool, how);
    check_layout("NCHW8c", "NCHW16c", 5, (int64_t[5]){1, 4, 3, 3, 8}, pool, how);
    check_layout("NCHW16c", "NCHW", 5, (int64_t[5]){1, 2, 3, 3, 8}, pool, how);
    check_layout("NCHW", "NCHW", 3, (int64_t[3]){1, 2, 3}, pool, how);
    check_layout("NCHW", "NCDW", 4, a, pool, how);
}

static void random_cases(int trials, SupPool *pool, const char *how) {
    static const rly_dtype dts[] = {RLY_DTYPE_F32, RLY_DTYPE_F32, RLY_DTYPE_I32, RLY_DTYPE_I8,
                                    RLY_DTYPE_F64};
    for (int t = 0; t < trials; t++) {
        uint32_t nd = 1 + next(6);
        int64_t shape[K_MAX_DIMS], axes[K_MAX_DIMS];
        int64_t budget = next(4) == 0 ? 200000 : 3000;
        int64_t n = 1;
        for (uint32_t i = 0; i < nd; i++) {
            int64_t d = next(3) == 0 ? 1 : 1 + next(40);
            if (n * d > budget) d = 1;
            shape[i] = d;
            n *= d;
        }
        for (uint32_t i = 0; i < nd; i++)
            axes[i] = i;
        for (uint32_t i = nd; i > 1; i--) { /* Fisher-Yates */
            uint32_t j = next(i);
            int64_t tmp = axes[i - 1];
            axes[i - 1] = axes[j], axes[j] = tmp;
        }
        if (next(5) == 0) axes[next(nd)] -= nd; /* negative axes */
        uint32_t na = next(6) == 0 ? 0 : nd;
        check_one(dts[next(RLY_ARRAY_LEN(dts))], nd, shape, na, axes, pool, how);
    }
}

static void fixed_cases(SupPool *pool, const char *how) {
    /* BERT-tiny: head split [0, 2, 1, 3] and key transpose [0, 2, 3, 1] */
    int64_t bert[4] = {1, 128, 2, 64}, split[4] = {0, 2, 1, 3}, key[4] = {0, 2, 3, 1};
    check_one(RLY_DTYPE_F32, 4, bert, 4, split, pool, how);
    check_one(RLY_DTYPE_F32, 4, bert, 4, key, pool, how);
    int64_t big[2] = {700, 333}, swap[2] = {1, 0};
    check_one(RLY_DTYPE_F32, 2, big, 2, swap, pool, how);
    int64_t wide[2] = {3, 1000000}; /* rows of 3, a stride the gathers take */
    check_one(RLY_DTYPE_F32, 2, wide, 2, swap, pool, how);
    int64_t empty[3] = {4, 0, 5}, p3[3] = {2, 0, 1};
    check_one(RLY_DTYPE_F32, 3, empty, 3, p3, pool, how);
    int64_t one[1] = {17}, a0[1] = {0};
    check_one(RLY_DTYPE_F32, 1, one, 1, a0, pool, how);
    /* rejected: not a permutation, wrong count */
    int64_t twice[3] = {0, 0, 1}, two[2] = {1, 0}, sh3[3] = {2, 3, 4};
    check_one(RLY_DTYPE_F32, 3, sh3, 3, twice, pool, how);
    check_one(RLY_DTYPE_F32, 3, sh3, 2, two, pool, how);
}

int main(int argc, char **argv) {
    unsetenv("RLY_KERNELS"); /* the fast kernels must be on (before the first lookup) */
    int trials = argc > 1 ? atoi(argv[1]) : 400;
    const char *seed = getenv("RLY_SEED");
    rng = seed ? strtoull(seed, NULL, 10) : 0x9e3779b97f4a7c15ull;
    if (rng == 0) rng = 1;
    printf("seed %" PRIu64 " (RLY_SEED=N replays)\n", rng);
    SupPool *pool2 = sup_pool_new(2);
    SupIsa top = sup_isa_detected();
    for (int l = SUP_ISA_SCALAR; l <= (int)top; l++) {
        sup_isa_force((SupIsa)l);
        for (int threads = 1; threads <= 2; threads++) {
            char how[64];
            snprintf(how, sizeof how, "%s, %d thread(s)", sup_isa_name((SupIsa)l), threads);
            SupPool *pool = threads == 2 ? pool2 : NULL;
            fixed_cases(pool, how);
            layout_cases(pool, how);
            random_cases(trials, pool, how);
        }
    }
    sup_isa_force(top);
    sup_pool_free(pool2);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}
