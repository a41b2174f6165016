/* dims.c - the shape limit and the checked size arithmetic every layer shares (support.h,
 * "shapes"). The compiler (relations, the parser) and the runtime (.npy headers, tensor
 * allocation, kernels) call these, so there is one definition of "too large". */
#include <stdio.h>

#include "support/support.h"

bool sup_dim_add(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || a > SUP_DIM_MAX - b) return false; /* no overflow: both <= 2^63-1 */
    *out = a + b;
    return true;
}

bool sup_dim_mul(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (b != 0 && a > SUP_DIM_MAX / b)) return false;
    *out = a * b;
    return true;
}

int64_t sup_dim_mul_sat(int64_t a, int64_t b) {
    if (a == 0 || b == 0) return 0;
    int64_t r;
    return sup_dim_mul(a, b, &r) ? r : SUP_DIM_OVER;
}

int64_t sup_shape_numel(uint32_t ndim, const int64_t *shape) {
    int64_t n = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] < 0) return -1;
        n = sup_dim_mul_sat(n, shape[d]);
    }
    return n;
}

const char *sup_shape_check(uint32_t ndim, const int64_t *shape, bool unknown_ok, char *buf,
                            size_t cap) {
    int64_t n = 1; /* the product of the known nonzero dims */
    for (uint32_t d = 0; d < ndim; d++) {
        int64_t v = shape[d];
        if (v < 0) {
            if (unknown_ok) continue;
            snprintf(buf, cap, "dimension %u is negative (%lld)", d, (long long)v);
            return buf;
        }
        if (v > SUP_DIM_MAX) {
            snprintf(buf, cap, "dimension %u (%lld) is too large: dims are at most 2^62", d,
                     (long long)v);
            return buf;
        }
        if (v != 0 && !sup_dim_mul(n, v, &n)) {
            snprintf(buf, cap,
                     "the shape is too large: the product of its nonzero dims is over 2^62");
            return buf;
        }
    }
    return NULL;
}
