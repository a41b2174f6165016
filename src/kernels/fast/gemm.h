/* gemm.h - the packed float32 matrix product (SGEMM) of the fast kernels, and the fast kernels
 * built on it (nn.dense, nn.matmul, nn.batch_matmul in matmul.c, nn.conv2d in conv.c).
 *
 * C[t](i, j) (+)= sum_p A[t](i, p) * B[t](p, j) for a batch of products t, with A and B read
 * through element strides (any transposition) or from panels packed once (weights: pack them with
 * kern_sgemm_pack_a / kern_sgemm_pack_b into data kept by k_prepared). The design (GotoBLAS/BLIS
 * blocking, a 12 x 32 AVX-512 micro-kernel, the thread split) and its measured speed are in
 * docs/kernels.md. Results do not depend on the thread count: every C element is the same sum in
 * the same order whatever the split (only the instruction-set level changes the order). */
#ifndef RLY_KERNELS_FAST_GEMM_H
#define RLY_KERNELS_FAST_GEMM_H

#include "kernels/fast/fast.h"

#define SGEMM_MR 12 /* rows of an A panel (and of the AVX-512 register tile) */
#define SGEMM_NR 32 /* columns of a B panel (two 16-float vectors) */

/* Called once per finished output block while it is in cache: rows [row0, row0 + rows) and
 * columns [col0, col0 + cols) of product t are final at c[(row - row0) * ldc + (col - col0)]
 * (c points at element (row0, col0)). Blocks of one call are disjoint and may run concurrently
 * on different threads, so an epilogue writes only inside its block. Used to fuse bias, scale,
 * activations or a residual add into the product. */
typedef void (*SGemmEpi)(void *ctx, int64_t t, float *c, int64_t ldc, int64_t row0, int64_t col0,
                         int64_t rows, int64_t cols);

/* Fills dst with rows [k0, k0 + kc) and columns [n0, n0 + nc) of B[t] in panel order:
 * dst[(j / SGEMM_NR) * kc * SGEMM_NR + p * SGEMM_NR + j % SGEMM_NR] = B[t](k0 + p, n0 + j), zero
 * for columns past nc. n0 is a multiple of SGEMM_NR. May run on any thread (it must only read). */
typedef void (*SGemmPackB)(const void *ctx, int64_t t, int64_t k0, int64_t kc, int64_t n0,
                           int64_t nc, float *dst);

/* A batch of products. Operand X of product t is item ix(t) = (x_mod ? t % x_mod : t): x_mod 1
 * broadcasts one operand to every product, x_mod G repeats G operands (conv weights per group). */
typedef struct SGemm {
    int64_t m, n, k; /* every product is m x n with depth k; any may be 0 */
    int64_t batch;   /* products, >= 1 */

    /* A[t](i, p) = a[ia(t) * a_bs + i * a_rs + p * a_cs], or, when a_packed is set, item ia(t)
     * of kern_sgemm_pack_a's layout (items kern_sgemm_packed_a_floats(m, k) floats apart). */
    const float *a;
    int64_t a_rs, a_cs, a_bs, a_mod;
    const float *a_packed;
    bool a_stream; /* a_packed comes from memory whatever its size in this call (a part of a
                    * larger one): streamed in by each sliver's first tile (gemm.c, STREAM_A) */

    /* B[t](p, j) = b[ib(t) * b_bs + p * b_rs + j * b_cs]; or item ib(t) of kern_sgemm_pack_b's
     * layout when b_packed is set; or, when pack_b is set, whatever pack_b(b_ctx, t, ...) writes
     * (then b is unused). */
    const float *b;
    int64_t b_rs, b_cs, b_bs, b_mod;
    const float *b_packed;
    SGemmPackB pack_b;
    const void *b_ctx;
    /* B's bf16 parts for the AMX product (kern_sgemm_amx_split_b, item ib(t) at
     * kern_sgemm_amx_b_u16(k, n) apart), split once for constant weights by kern_sgemm_prepare;
     * with them the product runs on AMX and splits only A per call. NULL: none. */
    const uint16_t *b_amx;
    int64_t pack_cols; /* with pack_b: columns of a B block at most (0: as many as fill L2) */

    float *c; /* C[t](i, j) = c[t * c_bs + i * ldc + j] */
    int64_t ldc, c_bs;
    bool accumulate; /* C += A B; false: C = A B (C's old values are never read) */

    SGemmEpi epi; /* NULL for none */
    void *epi_ctx;
} SGemm;

/* Packed A: ceil(m / SGEMM_MR) panels of k * SGEMM_MR floats, A(i, p) at
 * [(i / MR) * k * MR + p * MR + i % MR], rows past m zero. */
size_t kern_sgemm_packed_a_floats(int64_t m, int64_t k);
void kern_sgemm_pack_a(const float *a, int64_t rs, int64_t cs, int64_t m, int64_t k, float *dst);
/* Packed B: ceil(n / SGEMM_NR) panels of k * SGEMM_NR floats, B(p, j) at
 * [(j / NR) * k * NR + p * NR + j % NR], columns past n zero. */
size_t kern_sgemm_packed_b_floats(int64_t k, int64_t n);
void kern_sgemm_pack_b(const float *b, int64_t rs, int64_t cs, int64_t k, int64_t n, float *dst);

/* Scratch bytes kern_sgemm_run needs for g on n_threads threads (0 when none). */
size_t kern_sgemm_scratch_bytes(const SGemm *g, int n_threads);

/* Whether a product of this shape is narrow and deep: its K blocks are split over the threads
 * (when it is not accumulated and B needs no packing per call; gemm.c, plan_gemm). */
bool kern_sgemm_narrow(int64_t m, int64_t n, int64_t k, int64_t batch);
/* Runs g on the pool's threads (NULL: the caller's) with `scratch` (64-byte aligned,
 * kern_sgemm_scratch_bytes(g, sup_pool_threads(pool)) bytes, contents ignored). The micro-kernel
 * is chosen by sup_isa(). Must not be called from a task of the same pool. */
void kern_sgemm_run(const SGemm *g, SupPool *pool, void *scratch);
/* kern_sgemm_run on the call's pool with scratch from k_scratch (taken before forking). Returns
 * 0, or -1 with the call's error set (out of memory). */
int kern_sgemm(KCall *kc, const SGemm *g);

/* Operand A (a_side) or B of g, read by g through a / b and its strides from argument `arg` of
 * the call, packed once when that argument is a constant of the program: sets g->a_packed (or
 * b_packed) to `items` packed items kept in the call's prep cache (k_prepared), or leaves it NULL
 * (no cache, not a constant, out of memory: the product then packs per call). On AMX, a B of a
 * product kern_sgemm_amx_presplit takes sets g->b_amx to its bf16 parts instead (b_packed stays
 * NULL). The argument's data must be the operand's base (g->a or g->b). */
void kern_sgemm_prepare(KCall *kc, SGemm *g, bool a_side, uint32_t arg, int64_t items);

/* The call's fused tail (KCall.epi) as g's epilogue: when kc->epi is set and its begin(out0)
 * accepts, sets g->epi to apply the tail to each finished block (g->c must be out0's data, with
 * C's elements at out0's flat indices t * c_bs + i * ldc + j) and returns true; the kernel then
 * sets kc->epi_done once the product has run. e holds the binding (the caller's storage, alive
 * while g runs). False: no tail, or it declined (the caller of the kernel applies it). */
typedef struct SGemmKEpi {
    const KEpilogue *epi;
    int64_t c_bs;
    /* a bias tail (KEpilogue.bias) taken by the product: product t's bias at bias + (bias_mod ?
     * t % bias_mod : t) * bias_bs, one value per row of C, or per column (bias_cols) */
    const float *bias;
    bool bias_cols;
    int64_t bias_bs, bias_mod;
} SGemmKEpi;
/* How the output's channels lie in C, for a bias tail: SGEMM_BIAS_ROWS, a convolution's NCHW
 * output (the bias varies along dim 1 only; product t = (image, group) is C's rows of group
 * t % groups); SGEMM_BIAS_COLS, a product's output (the bias varies along the last dim only, C's
 * columns); SGEMM_BIAS_NONE: none taken. */
enum { SGEMM_BIAS_NONE, SGEMM_BIAS_ROWS, SGEMM_BIAS_COLS };
bool kern_sgemm_bind_epi(KCall *kc, const DLTensor *out0, SGemm *g, SGemmKEpi *e, int bias_how,
                         int64_t groups);
/* g's C gets a per-row bias b (one value per row of each product; first: b + x) and then clamp
 * (K_CLAMP_NONE or K_CLAMP_RELU) on its final values, as a convolution's fused tail (in the
 * AVX-512 tiles' registers, else a pass per block). e and ke are filled and must outlive the
 * product. */
void kern_sgemm_bias_rows(SGemm *g, SGemmKEpi *e, KEpilogue *ke, const float *b, bool first,
                          uint8_t clamp);
/* A tail that is one clamp (KEpilogue.clamp: K_CLAMP_RELU, or K_CLAMP_CLIP with lo, hi), applied
 * in place to rows runs of cols floats ld apart by the fused program's own relu or clip step
 * (fused.c; relu(NaN) is 0, clip keeps NaN). A kernel that takes a tail's clamp (the product above,
 * as bind_epi binds it) writes into KEpilogue.clamp_out and clamps each block once it is final. */
void kern_clamp_rows(float *c, int64_t ld, int64_t rows, int64_t cols, uint8_t clamp, float lo,
                     float hi);
/* That clamp of one value, as the program's relu or clip step computes it. */
static inline float kern_clamp1(uint8_t clamp, float lo, float hi, float v) {
    if (clamp == K_CLAMP_RELU) return v > 0.0f ? v : 0.0f;
    if (clamp == K_CLAMP_CLIP) {
        v = lo > v ? lo : v;
        return hi < v ? hi : v;
    }
    return v;
}
/* A bias tail in place over rows runs of cols floats ld apart: c = clamp(c + b) (b + c when
 * first), b brow[i] for row i (brow set) or bcol[j] for column j, by the fused program's own bias
 * loop (fused.c); with res (rows ld apart like c's), c = clamp((c + b) + res) (res + (c + b)
 * when res_first). */
void kern_bias_rows(float *c, int64_t ld, int64_t rows, int64_t cols, const float *brow,
                    const float *bcol, bool first, uint8_t clamp, float lo, float hi,
                    const float *res, bool res_first);

/* The product on AMX tiles (gemm_amx.c), which kern_sgemm_run tries first: whether g may run there
 * (the AMX level is in force, B needs no pack_b, k >= 64, and g is large enough or its B was
 * split once, SGemm.b_amx; a larger m, n or k never turns it from true to false), the scratch bytes
 * it needs then (0 otherwise; independent of the threads; kern_sgemm_scratch_bytes counts them),
 * and the run: false, with nothing written, when an operand has a value it cannot take (non-finite,
 * or nonzero with |x| < 2^-50 or >= 2^126). */
bool kern_sgemm_amx_fits(const SGemm *g);
size_t kern_sgemm_amx_scratch_bytes(const SGemm *g);
bool kern_sgemm_amx_run(const SGemm *g, SupPool *pool, void *scratch);
uint64_t kern_sgemm_amx_taken(void); /* calls kern_sgemm_amx_run completed (tests) */
/* B's parts for SGemm.b_amx: whether a constant B of g should be split once (kern_sgemm_prepare
 * then keeps the parts instead of packed floats, and every product with them runs on AMX); the
 * size in uint16 of one k x n item; the split of a strided one into dst,
 * false when a value is one the product cannot take. */
bool kern_sgemm_amx_presplit(const SGemm *g);
size_t kern_sgemm_amx_b_u16(int64_t k, int64_t n);
bool kern_sgemm_amx_split_b(const float *b, int64_t rs, int64_t cs, int64_t k, int64_t n,
                            uint16_t *dst);

/* One row of A (k floats) times B: c[j] = sum_p a[p] B(p, j) for the whole panels that hold
 * columns [j0, j1) (never past n), with B pre-packed (kern_sgemm_pack_b of k x n); on the
 * calling thread, the panels last to first when backward (callers alternate, as the GEMV path
 * does: a weight about the size of L2 then keeps the lines used last). The sums are the GEMV
 * path's (kern_sgemm_run with m 1). */
void kern_sgemv_packed(const float *a, const float *b_packed, int64_t k, int64_t n, int64_t j0,
                       int64_t j1, float *c, bool backward);
/* c[j] = sum_p a[p] b[j * ldb + p] for j < rows (B^T read in place: rowdot's sums, as
 * kern_sgemm_run gives for a one-row product of an unpacked B^T); on the calling thread. */
void kern_sgemv_rows(const float *a, const float *b, int64_t ldb, int64_t k, float *c,
                     int64_t rows);

/* The fast kernels (KernelFn) of the gemm table (kern_fast_gemm in gemm.c). */
int kern_fast_dense(KCall *kc);
int kern_fast_matmul(KCall *kc);
int kern_fast_batch_matmul(KCall *kc);
int kern_fast_conv2d(KCall *kc);
/* One LSTM step (rnn.c): the VM's kernel for a FuseRNNCell function (runtime/vm_cell.c). */
int kern_fast_lstm_cell(KCall *kc);
/* nn.conv2d of input 0 by weight 1, plus the per-channel bias input 2 (bias_first: b + x; the
 * attribute "bias_first"), then relu, then nn.max_pool2d (its attributes named "pool.<name>")
 * of that, as one kernel: the VM's pairs of calls (vm_pair.c). The convolution runs in bands of
 * rows that stay in the core's L2 and are pooled there. K_DECLINED (nothing written) unless it
 * is a convolution the fast kernels compute by the im2col product or the phase product, at
 * AVX-512, and a 3x3 pool of stride 2 with every window inside (after the phase product, also
 * padded by up to 2) (conv.c). */
int kern_fast_conv_maxpool(KCall *kc);
/* Calls kern_fast_conv_maxpool took (did not decline), process-wide (tests). */
uint64_t kern_conv_maxpool_taken(void);
/* Convolutions the phase product (conv_phase.c) computed, alone or with their pool, process-wide
 * (tests). */
uint64_t kern_conv_phase_taken(void);
/* Convolutions conv.c computed from NCHW{b}c data into an NCHW result (its B packed from the
 * blocks), process-wide (tests). */
uint64_t kern_conv_blocked_b_taken(void);
/* Convolutions Winograd F(4x4, 3x3) (winograd.c) computed at the AVX2 level, process-wide
 * (tests). */
uint64_t kern_conv_winograd_avx2_taken(void);
/* One GRU step (rnn.c, linear_before_reset): the VM's kernel for a FuseRNNCell GRU function. */
int kern_fast_gru_cell(KCall *kc);
/* A run of LSTM steps (rnn.c): h0, R, c0, xp_1 .. xp_n -> (h_1, c_1, ..., h_n, c_n); attributes
 * "gates" (as the cell's) and "steps" (n). The VM's kernel for a FuseRNNCell run function. */
int kern_fast_lstm_seq(KCall *kc);
/* A run of GRU steps (rnn.c): h0, R[, bn], x_1 .. x_n -> (h_1, ..., h_n); "gates", "steps". */
int kern_fast_gru_seq(KCall *kc);

#endif /* RLY_KERNELS_FAST_GEMM_H */
