/* nn_common.c - helpers shared by the nn and conv/pool reference kernels (see nn_ref.h):
 * scratch memory, layout views, spatial attributes, operand gathering with casts, and the float32
 * matrix product.
 *
 * The matrix product is a plain-C blocked GEMM in the GotoBLAS arrangement: B is packed in
 * panels of KNN_NR columns per (KC x NC) block (by a caller-supplied packer, so convolution packs
 * its im2col columns straight from the input and never builds a column matrix), A in panels of
 * MR rows per (MC x KC) block, and a micro-kernel keeps an MR x NR tile of C in four arrays of
 * NR floats whose inner loops have constant trip counts, which GCC vectorizes at -O2 (its
 * "very cheap" cost model only vectorizes loops with no scalar epilogue). Floating-point sums
 * are never reassociated: each C element is a sum over p in increasing order within a KC block.
 */
#include "kernels/ref/nn_ref.h"

#include <stdlib.h>
#include <string.h>

void *kern_nn_scratch(KCall *kc, int64_t count, size_t size) {
    return k_scratch_n(kc, count, size);
}

/* ---- layouts ----------------------------------------------------------------------------------
 */

static int parse_for(KCall *kc, const char *layout, const char *ref, const char *what, KLayout *l) {
    if (!k_layout_parse(layout, l) || !sup_layout_convertible(l, ref) || strlen(ref) > 8)
        return k_error(kc, "%s layout \"%s\" is not convertible to %s", what, layout, ref);
    return 0;
}

int kern_nn_view(KCall *kc, uint32_t ndim, const int64_t *shape, const char *layout,
                 const char *ref, const char *what, KView *v) {
    KLayout l;
    memset(v, 0, sizeof *v);
    if (parse_for(kc, layout, ref, what, &l) != 0) return -1;
    if (ndim != l.n)
        return k_error(kc, "%s has rank %u but layout \"%s\" has %u axes", what, ndim, layout, l.n);
    for (uint32_t i = 0; i < l.n; i++)
        if (l.factor[i] > 0 && shape[i] != l.factor[i])
            return k_error(kc, "%s dimension %u is %lld, not the block size %lld of \"%s\"", what,
                           i, (long long)shape[i], (long long)l.factor[i], layout);
    int64_t st[K_MAX_DIMS];
    k_strides(l.n, shape, st);
    v->n = (uint32_t)strlen(ref);
    v->compact = strcmp(layout, ref) == 0;
    bool empty = k_shape_numel(ndim, shape) == 0;
    for (uint32_t p = 0; p < v->n; p++) {
        int i = k_layout_find(&l, ref[p]);
        int j = k_layout_find(&l, (char)(ref[p] - 'A' + 'a'));
        int64_t f = j >= 0 ? l.factor[j] : 1;
        v->dim[p] = sup_dim_mul_sat(shape[i], f);
        if (empty) continue; /* no element to address; the dims may be huge */
        v->off[p] = kern_nn_scratch(kc, v->dim[p], sizeof(int64_t));
        if (v->off[p] == NULL) return -1;
        for (int64_t x = 0; x < v->dim[p]; x++)
            v->off[p][x] = j >= 0 ? (x / f) * st[i] + (x % f) * st[j] : x * st[i];
    }
    return 0;
}

int kern_nn_layout_shape(KCall *kc, const char *layout, const char *ref, const int64_t *dims,
                         uint32_t *ndim, int64_t *shape) {
    KLayout l;
    if (parse_for(kc, layout, ref, "result", &l) != 0) return -1;
    for (uint32_t i = 0; i < l.n; i++) {
        if (l.axis[i] >= 'a') {
            shape[i] = l.factor[i];
            continue;
        }
        int64_t d = dims[strchr(ref, l.axis[i]) - ref], b = k_layout_block(&l, l.axis[i]);
        if (b > 0 && d % b != 0)
            return k_error(kc,
                           "the result's %c extent %lld does not divide into blocks of %lld "
                           "(layout \"%s\")",
                           l.axis[i], (long long)d, (long long)b, layout);
        shape[i] = b > 0 ? d / b : d;
    }
    *ndim = l.n;
    return 0;
}

void kern_nn_view_free(KView *v) {
    for (uint32_t p = 0; p < 8; p++)
        v->off[p] = NULL; /* k_scratch: the caller releases it after the call */
}

/* ---- per-spatial-axis attributes ------------------------------------------------------------ */

int kern_nn_spatial_attr(KCall *kc, const char *name, uint32_t nsp, int64_t lo, int64_t *out) {
    const int64_t *v;
    uint32_t n = k_ints(kc, name, &v);
    if (n != 1 && n != nsp) return k_error(kc, "%s must have 1 or %u values, got %u", name, nsp, n);
    for (uint32_t i = 0; i < nsp; i++) {
        out[i] = v[n == 1 ? 0 : i];
        if (out[i] < lo || out[i] > KNN_ATTR_LIMIT)
            return k_error(kc, "%s values must be in [%lld, 2^31 - 1], got %lld", name,
                           (long long)lo, (long long)out[i]);
    }
    return 0;
}

int kern_nn_padding(KCall *kc, uint32_t nsp, int64_t *before, int64_t *after) {
    const int64_t *v;
    uint32_t n = k_ints(kc, "padding", &v);
    if (n != 1 && n != nsp && n != 2 * nsp)
        return k_error(kc, "padding must have 1, %u or %u values, got %u", nsp, 2 * nsp, n);
    for (uint32_t i = 0; i < nsp; i++) {
        before[i] = n == 2 * nsp ? v[i] : v[n == 1 ? 0 : i];
        after[i] = n == 2 * nsp ? v[i + nsp] : before[i];
        if (before[i] < 0 || after[i] < 0 || before[i] > KNN_ATTR_LIMIT ||
            after[i] > KNN_ATTR_LIMIT)
            return k_error(kc, "padding values must be in [0, 2^31 - 1]");
    }
    return 0;
}

/* ---- operands and results ------------------------------------------------------------------- */

KNum kern_nn_num(rly_dtype out, rly_dtype a, rly_dtype b) {
    if (out == RLY_DTYPE_F32 && a == RLY_DTYPE_F32 && b == RLY_DTYPE_F32) return KNUM_F32;
    return sup_dtype_is_float(out) ? KNUM_F64 : KNUM_U64;
}

double kern_nn_castf(const void *base, rly_dtype dt, int64_t i, rly_dtype as) {
    if (dt == as || as == RLY_DTYPE_F64) return k_loadf(base, dt, i);
    uint64_t tmp = 0;
    k_convert(&tmp, as, 0, base, dt, i);
    return k_loadf(&tmp, as, 0);
}

uint64_t kern_nn_castu(const void *base, rly_dtype dt, int64_t i, rly_dtype as) {
    if (dt == as) return (uint64_t)k_loadi(base, dt, i);
    uint64_t tmp = 0;
    k_convert(&tmp, as, 0, base, dt, i);
    return (uint64_t)k_loadi(&tmp, as, 0);
}

/* Runs BODY for every element of the view in reference order, with `at` its flat reference index
 * and `off` its offset in the tensor. */
#define VIEW_WALK(v, BODY)                                                                         \
    do {                                                                                           \
        int64_t idx_[8] = {0}, total_ = 1, flat_ = 0;                                              \
        for (uint32_t p_ = 0; p_ < (v)->n; p_++)                                                   \
            total_ = sup_dim_mul_sat(total_, (v)->dim[p_]);                                        \
        uint32_t last_ = (v)->n - 1;                                                               \
        int64_t inner_ = (v)->dim[last_];                                                          \
        while (total_ > 0 && inner_ > 0) {                                                         \
            int64_t base_ = 0;                                                                     \
            for (uint32_t p_ = 0; p_ < last_; p_++)                                                \
                base_ += (v)->off[p_][idx_[p_]];                                                   \
            const int64_t *lo_ = (v)->off[last_];                                                  \
            for (int64_t x_ = 0; x_ < inner_; x_++, flat_++) {                                     \
                int64_t at = flat_, off = base_ + lo_[x_];                                         \
                BODY;                                                                              \
            }                                                                                      \
            uint32_t d_ = last_;                                                                   \
            while (d_-- > 0) {                                                                     \
                if (++idx_[d_] < (v)->dim[d_]) break;                                              \
                idx_[d_] = 0;                                                                      \
            }                                                                                      \
            if (d_ == UINT32_MAX) break;                                                           \
        }                                                                                          \
    } while (0)

void kern_nn_gather(const DLTensor *t, const KView *v, KNum num, rly_dtype as, void *dst) {
    const void *src = k_ptr(t);
    rly_dtype dt = k_dtype(t);
    if (num == KNUM_F32) {
        const float *s = src;
        float *d = dst;
        VIEW_WALK(v, d[at] = s[off]);
    } else if (num == KNUM_F64) {
        double *d = dst;
        VIEW_WALK(v, d[at] = kern_nn_castf(src, dt, off, as));
    } else {
        uint64_t *d = dst;
        VIEW_WALK(v, d[at] = kern_nn_castu(src, dt, off, as));
    }
}

void kern_nn_scatter(DLTensor *t, const KView *v, KNum num, const void *src) {
    void *dst = k_ptr(t);
    rly_dtype dt = k_dtype(t);
    if (num == KNUM_F32) {
        const float *s = src;
        float *d = dst;
        VIEW_WALK(v, d[off] = s[at]);
    } else if (num == KNUM_F64) {
        const double *s = src;
        VIEW_WALK(v, k_storef(dst, dt, off, s[at]));
    } else {
        const uint64_t *s = src;
        VIEW_WALK(v, k_storeu(dst, dt, off, s[at]));
    }
}

/* ---- float32 matrix product ------------------------------------------------------------------ */

#define MR 4 /* rows of an A panel and of the micro-kernel's tile */
#define NR KNN_NR
#define KC 256 /* the reduction block: an A panel is MR * KC floats, a B panel NR * KC */
#define NC 256 /* columns of a packed B block (NC * KC floats, kept in L2) */
#define MC 64  /* rows of a packed A block */

/* tile[MR][NR] = sum over p < kc of a[p][0..MR) (outer) b[p][0..NR). */
static void micro_kernel(int64_t kc, const float *restrict a, const float *restrict b,
                         float *restrict tile) {
    float c0[NR] = {0}, c1[NR] = {0}, c2[NR] = {0}, c3[NR] = {0};
    for (int64_t p = 0; p < kc; p++) {
        const float *bp = b + p * NR;
        float a0 = a[p * MR], a1 = a[p * MR + 1], a2 = a[p * MR + 2], a3 = a[p * MR + 3];
        for (int j = 0; j < NR; j++) {
            c0[j] += a0 * bp[j];
            c1[j] += a1 * bp[j];
            c2[j] += a2 * bp[j];
            c3[j] += a3 * bp[j];
        }
    }
    for (int j = 0; j < NR; j++) {
        tile[j] = c0[j];
        tile[NR + j] = c1[j];
        tile[2 * NR + j] = c2[j];
        tile[3 * NR + j] = c3[j];
    }
}

/* A rows [m0, m0 + mc), columns [k0, k0 + kc) into panels of MR rows (zero past mc). */
static void pack_a(const KGemm *g, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float *dst) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR) {
        float *panel = dst + (i0 / MR) * kc * MR;
        for (int64_t r = 0; r < MR; r++) {
            if (i0 + r >= mc) {
                for (int64_t p = 0; p < kc; p++)
                    panel[p * MR + r] = 0;
                continue;
            }
            const float *row = g->a + (m0 + i0 + r) * g->a_rm + k0 * g->a_rk;
            for (int64_t p = 0; p < kc; p++)
                panel[p * MR + r] = row[p * g->a_rk];
        }
    }
}

void kern_nn_pack_strided(const void *ctx, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                          float *dst) {
    const KStrided *s = ctx;
    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
        float *panel = dst + (j0 / NR) * kc * NR;
        for (int64_t p = 0; p < kc; p++) {
            const float *row = s->p + (k0 + p) * s->rk;
            for (int64_t j = 0; j < NR; j++)
                panel[p * NR + j] = j0 + j < nc ? row[(n0 + j0 + j) * s->rn] : 0.0f;
        }
    }
}

int kern_nn_gemm_f32(KCall *kc, const KGemm *g) {
    if (g->m == 0 || g->n == 0) return 0;
    if (g->k == 0) {
        for (int64_t i = 0; i < g->m; i++)
            for (int64_t j = 0; j < g->n; j++)
                g->c[i * g->ldc + j] = 0;
        return 0;
    }
    /* blocks sized to the problem: small products (batch_matmul's) stay cheap to set up */
    int64_t kb = g->k < KC ? g->k : KC;
    int64_t nb = g->n < NC ? (g->n + NR - 1) / NR * NR : NC;
    int64_t mb = g->m < MC ? (g->m + MR - 1) / MR * MR : MC;
    KScratchMark mark = k_scratch_mark(kc); /* called once per group and batch: give it back */
    float *bp = kern_nn_scratch(kc, nb * kb, sizeof(float));
    float *ap = bp ? kern_nn_scratch(kc, mb * kb, sizeof(float)) : NULL;
    if (ap == NULL) {
        k_scratch_reset(kc, mark);
        return -1;
    }
    float tile[MR * NR];
    for (int64_t k0 = 0; k0 < g->k; k0 += KC) {
        int64_t kcur = g->k - k0 < KC ? g->k - k0 : KC;
        for (int64_t n0 = 0; n0 < g->n; n0 += NC) {
            int64_t ncur = g->n - n0 < NC ? g->n - n0 : NC;
            g->pack_b(g->b_ctx, k0, kcur, n0, ncur, bp);
            for (int64_t m0 = 0; m0 < g->m; m0 += MC) {
                int64_t mcur = g->m - m0 < MC ? g->m - m0 : MC;
                pack_a(g, m0, mcur, k0, kcur, ap);
                for (int64_t j0 = 0; j0 < ncur; j0 += NR) {
                    int64_t nr = ncur - j0 < NR ? ncur - j0 : NR;
                    for (int64_t i0 = 0; i0 < mcur; i0 += MR) {
                        int64_t mr = mcur - i0 < MR ? mcur - i0 : MR;
                        micro_kernel(kcur, ap + (i0 / MR) * kcur * MR, bp + (j0 / NR) * kcur * NR,
                                     tile);
                        float *c = g->c + (m0 + i0) * g->ldc + n0 + j0;
                        for (int64_t i = 0; i < mr; i++)
                            for (int64_t j = 0; j < nr; j++)
                                c[i * g->ldc + j] = k0 == 0 ? tile[i * NR + j]
                                                            : c[i * g->ldc + j] + tile[i * NR + j];
                    }
                }
            }
        }
    }
    k_scratch_reset(kc, mark);
    return 0;
}
