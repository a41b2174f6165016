/* nn_ref.h - private helpers of the nn and conv/pool reference kernels (nn.c, conv_pool.c,
 * conv_nd.c): scratch memory, tensors in a layout (kernel.h's KLayout) seen in a reference axis
 * order, the per-spatial-axis attributes of convolutions and pools, operands read with a cast to
 * the result dtype, and the blocked float32 matrix product that conv2d, dense, matmul and
 * batch_matmul use for their float32 paths.
 *
 * Arithmetic classes (how a kernel accumulates, chosen from the result dtype):
 *   float32 result, float32 operands: float32 through kern_nn_gemm_f32 (the fast path);
 *   other float results: double, each operand first cast to the result dtype (TVM casts the
 *     operands to out_dtype before multiplying), rounded once at the store;
 *   integer and bool results: uint64 arithmetic on the operands cast to the result dtype, which
 *     wraps modulo 2^64 and then modulo the result's width at the store (the result a wrapping
 *     out_dtype accumulator gives; exact for int8 x int8 -> int32). */
#ifndef RLY_KERNELS_REF_NN_REF_H
#define RLY_KERNELS_REF_NN_REF_H

#include "kernels/kernel.h"

/* ---- scratch ----------------------------------------------------------------------------------
 */

/* count * size zeroed bytes (at least 1), or NULL with "out of memory" set on kc: k_scratch_n,
 * which the caller of the kernel frees (never free() it). */
void *kern_nn_scratch(KCall *kc, int64_t count, size_t size);

/* ---- layouts ----------------------------------------------------------------------------------
 */

/* A tensor in some layout seen in a reference axis order ("NCHW"): element r (a reference
 * multi-index) is at flat offset sum_p off[p][r[p]]. The layout must name exactly the axes of
 * the reference order. */
typedef struct KView {
    uint32_t n;      /* reference axes (<= 8) */
    int64_t dim[8];  /* extents in reference order */
    int64_t *off[8]; /* off[p][v]: offset contributed by reference axis p at index v; all NULL
                      * for an empty tensor (no element to address, dims perhaps huge) */
    bool compact;    /* the layout is the reference order itself (off[p][v] = v * stride) */
} KView;

/* The view of a tensor of shape (ndim, shape) in `layout` through `ref`; `what` names the
 * tensor in messages. Returns 0, or -1 with an error (bad layout, rank or block mismatch). */
int kern_nn_view(KCall *kc, uint32_t ndim, const int64_t *shape, const char *layout,
                 const char *ref, const char *what, KView *v);
/* The shape in `layout` of a tensor whose reference-order extents are dims: -1 with an error
 * when a split axis does not divide into its blocks. */
int kern_nn_layout_shape(KCall *kc, const char *layout, const char *ref, const int64_t *dims,
                         uint32_t *ndim, int64_t *shape);
void kern_nn_view_free(KView *v);

/* ---- per-spatial-axis attributes (convolutions and pools) ------------------------------------ */

/* The largest stride, dilation, padding or window the relations accept (src/ops/op_conv_pool.c,
 * ATTR_LIMIT); kernels, which may be called with any attributes, hold them to it too. */
#define KNN_ATTR_LIMIT (((int64_t)1 << 31) - 1)

/* Attribute `name` as one value per spatial axis, nsp of them (a single value repeats), each in
 * [lo, KNN_ATTR_LIMIT], into out[0..nsp). -1 with an error otherwise. */
int kern_nn_spatial_attr(KCall *kc, const char *name, uint32_t nsp, int64_t lo, int64_t *out);
/* The attribute "padding": 1 value (every side), nsp (before = after) or 2 * nsp (the befores,
 * then the afters), each in [0, KNN_ATTR_LIMIT], into before[0..nsp) and after[0..nsp). */
int kern_nn_padding(KCall *kc, uint32_t nsp, int64_t *before, int64_t *after);

/* ---- operands and results ------------------------------------------------------------------- */

typedef enum KNum {
    KNUM_F32, /* float32 operands and result */
    KNUM_F64, /* accumulate in double */
    KNUM_U64, /* accumulate in uint64 (wrapping integer arithmetic) */
} KNum;

/* The class of a result dtype with operands of dtypes a and b. */
KNum kern_nn_num(rly_dtype out, rly_dtype a, rly_dtype b);

/* Element i of (base, dt) cast to dtype `as`, as double or as a uint64 bit pattern. */
double kern_nn_castf(const void *base, rly_dtype dt, int64_t i, rly_dtype as);
uint64_t kern_nn_castu(const void *base, rly_dtype dt, int64_t i, rly_dtype as);

/* Read tensor t through view v into dst in reference order, each element cast to `as` (dst is
 * float for KNUM_F32 with t float32, double for KNUM_F64, uint64_t for KNUM_U64). */
void kern_nn_gather(const DLTensor *t, const KView *v, KNum num, rly_dtype as, void *dst);
/* Write src (reference order, of class num) into tensor t through view v. */
void kern_nn_scatter(DLTensor *t, const KView *v, KNum num, const void *src);

/* ---- float32 matrix product ------------------------------------------------------------------ */

/* Fills dst with columns [n0, n0 + nc) and rows [k0, k0 + kc) of B, in panels of KNN_NR
 * columns: dst[(j / KNN_NR) * kc * KNN_NR + k * KNN_NR + j % KNN_NR], zero past column nc. */
typedef void (*KPackB)(const void *ctx, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst);

#define KNN_NR 8 /* columns of a B panel */

typedef struct KGemm {
    int64_t m, n, k;
    const float *a; /* A(i, p) = a[i * a_rm + p * a_rk] */
    int64_t a_rm, a_rk;
    KPackB pack_b; /* B's packer and its context */
    const void *b_ctx;
    float *c; /* C(i, j) = c[i * ldc + j], overwritten */
    int64_t ldc;
} KGemm;

/* C = A x B. Returns 0, or -1 with an error (out of memory). */
int kern_nn_gemm_f32(KCall *kc, const KGemm *g);

/* A strided B for KPackB: B(p, j) = p[p * rk + j * rn]. */
typedef struct KStrided {
    const float *p;
    int64_t rk, rn;
} KStrided;
void kern_nn_pack_strided(const void *ctx, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                          float *dst);

/* ---- convolution kernels (conv_nd.c), registered in conv_pool.c ------------------------------ */

int kern_nn_conv1d(KCall *kc);
int kern_nn_conv2d(KCall *kc);
int kern_nn_conv3d(KCall *kc);
int kern_nn_conv1d_transpose(KCall *kc);
int kern_nn_conv2d_transpose(KCall *kc);
int kern_nn_conv3d_transpose(KCall *kc);
int kern_nn_conv2d_backward_weight(KCall *kc);

#endif /* RLY_KERNELS_REF_NN_REF_H */
