/* ref_elem.h - private helpers shared by the elementwise and reduction reference kernels
 * (unary.c, binary.c, reduce.c): float access with typed fast paths, the dtype classes, and an
 * iterator over a broadcast index space that tracks each operand's flat offset.
 *
 * Everything here is static inline: the reference kernels are separate translation units and
 * export nothing but their tables. */
#ifndef RLY_KERNELS_REF_ELEM_H
#define RLY_KERNELS_REF_ELEM_H

#include "kernels/kernel.h"

/* Element i as a double: f32 and f64 typed, the rest through k_loadf (exact). */
static inline double re_loadf(const void *base, rly_dtype dt, int64_t i) {
    if (dt == RLY_DTYPE_F32) return ((const float *)base)[i];
    if (dt == RLY_DTYPE_F64) return ((const double *)base)[i];
    return k_loadf(base, dt, i);
}

/* Store a double into element i, rounding once to the dtype (k_storef's conversions). */
static inline void re_storef(void *base, rly_dtype dt, int64_t i, double v) {
    if (dt == RLY_DTYPE_F32)
        ((float *)base)[i] = (float)v;
    else if (dt == RLY_DTYPE_F64)
        ((double *)base)[i] = v;
    else
        k_storef(base, dt, i, v);
}

/* Integer element i as its 64-bit pattern: sign-extended for signed dtypes, zero-extended for
 * unsigned ones and bools. Arithmetic on these patterns in uint64_t wraps as the dtype does once
 * the result is stored with k_storeu. */
static inline uint64_t re_loadbits(const void *base, rly_dtype dt, int64_t i) {
    return (uint64_t)k_loadi(base, dt, i);
}

/* The signed value of a bit pattern (two's complement) without implementation-defined casts. */
static inline int64_t re_signed(uint64_t u) {
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* Arithmetic right shift of a signed value by s in [0, 63], portable for negative values. */
static inline int64_t re_sar(int64_t v, unsigned s) { return v < 0 ? ~(~v >> s) : v >> s; }

static inline bool re_is_float(rly_dtype dt) { return sup_dtype_is_float(dt); }
static inline bool re_is_signed(rly_dtype dt) { return sup_dtype_is_int(dt); }

/* ---- broadcast iteration -------------------------------------------------------------------- */

/* Walks the row-major index space `shape` and keeps, for up to three operands, the flat offset
 * of the element each reads (0 strides on broadcast dims). */
typedef struct ReBcast {
    uint32_t ndim;
    uint32_t n_ops;
    int64_t shape[K_MAX_DIMS];
    int64_t idx[K_MAX_DIMS];
    int64_t stride[3][K_MAX_DIMS];
    int64_t off[3];
} ReBcast;

/* Set up the walk of `shape` for operands t[0..n_ops) (each broadcastable to shape). */
static inline void re_bcast_init(ReBcast *it, uint32_t ndim, const int64_t *shape, uint32_t n_ops,
                                 const DLTensor *const *t) {
    it->ndim = ndim;
    it->n_ops = n_ops;
    for (uint32_t d = 0; d < ndim; d++) {
        it->shape[d] = shape[d];
        it->idx[d] = 0;
    }
    for (uint32_t k = 0; k < n_ops; k++) {
        k_bcast_strides(t[k], ndim, shape, it->stride[k]);
        it->off[k] = 0;
    }
}

/* Step to the next index (row-major). Past the last index the offsets return to 0. */
static inline void re_bcast_next(ReBcast *it) {
    for (uint32_t d = it->ndim; d-- > 0;) {
        for (uint32_t k = 0; k < it->n_ops; k++)
            it->off[k] += it->stride[k][d];
        if (++it->idx[d] < it->shape[d]) return;
        for (uint32_t k = 0; k < it->n_ops; k++)
            it->off[k] -= it->stride[k][d] * it->shape[d];
        it->idx[d] = 0;
    }
}

#endif /* RLY_KERNELS_REF_ELEM_H */
