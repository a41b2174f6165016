/* vision_ref.h - private to the image_vision reference kernels (image_vision.c, vision_boxes.c,
 * vision_nms.c): the vision kernels the category table in image_vision.c names, and small
 * helpers they share (stable sorting by score, box overlap); layouts are kernel.h's KLayout.
 *
 * Helpers are static inline: each kernel file is its own translation unit. */
#ifndef RLY_KERNELS_REF_VISION_REF_H
#define RLY_KERNELS_REF_VISION_REF_H

#include <math.h>
#include <stdlib.h>

#include "kernels/kernel.h"

/* ---- kernels defined in vision_boxes.c and vision_nms.c ------------------------------------ */

int kern_vision_roi_align(KCall *kc);
int kern_vision_roi_pool(KCall *kc);
int kern_vision_multibox_prior(KCall *kc);
int kern_vision_multibox_transform_loc(KCall *kc);
int kern_vision_proposal(KCall *kc);
int kern_vision_yolo_reorg(KCall *kc);
int kern_vision_get_valid_counts(KCall *kc);
int kern_vision_nms(KCall *kc);
int kern_vision_all_class_nms(KCall *kc);
int kern_vision_regular_nms(KCall *kc);

/* ---- stable ordering by score ------------------------------------------------------------------
 */

/* Sort idx[0..n) so that score[idx[.]] is descending; equal scores keep their order (a stable
 * merge sort, as std::stable_sort in TVM's argsort). tmp holds n entries. */
static inline void vr_sort_desc(int64_t *idx, int64_t *tmp, int64_t n, const double *score) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                tmp[o++] = score[idx[b]] > score[idx[a]] ? idx[b++] : idx[a++];
            while (a < mid)
                tmp[o++] = idx[a++];
            while (b < hi)
                tmp[o++] = idx[b++];
        }
        for (int64_t i = 0; i < n; i++)
            idx[i] = tmp[i];
    }
}

/* ---- boxes ----------------------------------------------------------------------------------- */

/* Intersection over union of boxes a and b given as two corners in any order (x1, y1, x2, y2),
 * as TVM's calculate_overlap: 0 when the union is not positive. */
static inline double vr_iou_corners(const double *a, const double *b) {
    double al = fmin(a[0], a[2]), at = fmin(a[1], a[3]), ar = fmax(a[0], a[2]),
           ab = fmax(a[1], a[3]);
    double bl = fmin(b[0], b[2]), bt = fmin(b[1], b[3]), br = fmax(b[0], b[2]),
           bb = fmax(b[1], b[3]);
    double w = fmax(0.0, fmin(ar, br) - fmax(al, bl));
    double h = fmax(0.0, fmin(ab, bb) - fmax(at, bt));
    double area = w * h;
    double u = (ar - al) * (ab - at) + (br - bl) * (bb - bt) - area;
    return u <= 0.0 ? 0.0 : area / u;
}

/* The index of a scalar-valued double, truncated toward zero and clamped into int64 range
 * (NaN gives 0): a float-to-int cast without undefined behaviour. */
static inline int64_t vr_trunc_i64(double v) {
    if (!(v == v)) return 0;
    if (v >= 9.2e18) return INT64_MAX;
    if (v <= -9.2e18) return INT64_MIN;
    return (int64_t)v;
}

/* A scalar argument (rank 0 or one element) as a double / as an integer (floats truncate). */
static inline double vr_scalar_f(const DLTensor *t) { return k_loadf(k_ptr(t), k_dtype(t), 0); }
static inline int64_t vr_scalar_i(const DLTensor *t) {
    rly_dtype dt = k_dtype(t);
    if (sup_dtype_is_float(dt)) return vr_trunc_i64(k_loadf(k_ptr(t), dt, 0));
    return k_loadi(k_ptr(t), dt, 0);
}

/* Scratch arrays: n zeroed elements of `size` bytes (at least one), NULL on failure. k_scratch:
 * the kernel's caller releases them (never free() them). */
static inline void *vr_alloc(KCall *kc, int64_t n, size_t size) {
    return k_scratch_n(kc, n < 1 ? 1 : n, size);
}

#endif /* RLY_KERNELS_REF_VISION_REF_H */
