/* vision_boxes.c - reference kernels of the region and anchor operators: vision.roi_align,
 * roi_pool, multibox_prior, multibox_transform_loc, proposal and yolo_reorg (their rows are in
 * the image_vision table, image_vision.c).
 *
 * Semantics are TVM's topi (python/tvm/topi/vision/); where TVM leaves a result undefined (an
 * uninitialized row, a division by zero) the choice made here is stated at the kernel. All box
 * arithmetic is in double. */
#include <string.h>

#include "kernels/ref/vision_ref.h"

/* ==== vision.roi_align / roi_pool ============================================================ */

/* The data of a ROI pool, its attributes, and the result (roi, C, PH, PW) in the data's layout. */
typedef struct RoiData {
    const void *p;
    rly_dtype dt;
    int64_t batch, c, h, w;
    int64_t sn, sc, sh, sw; /* element strides of the data's N, C, H, W axes */
    const DLTensor *rois;   /* (n_roi, 5): batch index, x1, y1, x2, y2 */
    int64_t n_roi, ph_n, pw_n;
    int64_t on, oc, oh, ow; /* element strides of the result's roi, C, PH, PW axes */
    double scale;           /* spatial_scale */
} RoiData;

/* Reads the data (argument 0) in its layout, the rois (argument 1), pooled_size and
 * spatial_scale, and allocates the result; NULL on error. */
static DLTensor *roi_setup(KCall *kc, RoiData *d) {
    const DLTensor *x = k_arg(kc, 0);
    KLayout l;
    int a[4]; /* the N, C, H, W axes */
    if (x->ndim != 4) {
        k_error(kc, "data must be 4-D");
        return NULL;
    }
    if (k_layout_attr(kc, "layout", 4, &l) != 0 || k_layout_axes(kc, &l, "NCHW", a) != 0)
        return NULL;
    const int64_t *ps;
    if (k_ints(kc, "pooled_size", &ps) != 2 || ps[0] < 1 || ps[1] < 1) {
        k_error(kc, "pooled_size needs 2 positive values");
        return NULL;
    }
    int64_t s[4], shape[4];
    k_strides(4, x->shape, s);
    d->p = k_ptr(x);
    d->dt = k_dtype(x);
    d->batch = x->shape[a[0]], d->c = x->shape[a[1]], d->h = x->shape[a[2]], d->w = x->shape[a[3]];
    d->sn = s[a[0]], d->sc = s[a[1]], d->sh = s[a[2]], d->sw = s[a[3]];
    d->rois = k_arg(kc, 1);
    if (d->rois->ndim != 2 || d->rois->shape[1] != 5) {
        k_error(kc, "rois must have shape (n, 5)");
        return NULL;
    }
    d->n_roi = d->rois->shape[0], d->ph_n = ps[0], d->pw_n = ps[1];
    d->scale = k_float(kc, "spatial_scale");
    shape[a[0]] = d->n_roi, shape[a[1]] = d->c, shape[a[2]] = d->ph_n, shape[a[3]] = d->pw_n;
    k_strides(4, shape, s);
    d->on = s[a[0]], d->oc = s[a[1]], d->oh = s[a[2]], d->ow = s[a[3]];
    return k_out(kc, 0, d->dt, 4, shape);
}

/* Roi r: its batch index (its first value, truncated toward zero as TVM's cast to int32) and
 * its corners x1, y1, x2, y2 times spatial_scale. */
static int roi_read(KCall *kc, const RoiData *d, int64_t r, int64_t *batch, double box[4]) {
    const void *p = k_ptr(d->rois);
    rly_dtype dt = k_dtype(d->rois);
    double v = k_loadf(p, dt, r * 5);
    int64_t b = vr_trunc_i64(v);
    if (b < 0 || b >= d->batch)
        return k_error(kc, "roi %lld has batch index %g, outside the batch of %lld", (long long)r,
                       v, (long long)d->batch);
    *batch = b;
    for (int i = 0; i < 4; i++)
        box[i] = k_loadf(p, dt, r * 5 + 1 + i) * d->scale;
    return 0;
}

/* The result's element (roi r, channel c, bin ph, pw). */
static int64_t roi_out_at(const RoiData *d, int64_t r, int64_t c, int64_t ph, int64_t pw) {
    return r * d->on + c * d->oc + ph * d->oh + pw * d->ow;
}

/* TVM's roi_align bilinear sample: 0 beyond one pixel outside the map, else the coordinate is
 * clamped into [0, size - 1] and interpolated. */
static double roi_bilinear(const RoiData *d, int64_t b, int64_t c, double y, double x) {
    if (y < -1.0 || x < -1.0 || y > (double)d->h || x > (double)d->w) return 0.0;
    y = fmin(fmax(y, 0.0), (double)(d->h - 1));
    x = fmin(fmax(x, 0.0), (double)(d->w - 1));
    int64_t y0 = (int64_t)y, x0 = (int64_t)x;
    int64_t y1 = y0 + 1 < d->h ? y0 + 1 : d->h - 1, x1 = x0 + 1 < d->w ? x0 + 1 : d->w - 1;
    double ly = y - (double)y0, lx = x - (double)x0;
    int64_t base = b * d->sn + c * d->sc;
    double v00 = k_loadf(d->p, d->dt, base + y0 * d->sh + x0 * d->sw);
    double v01 = k_loadf(d->p, d->dt, base + y0 * d->sh + x1 * d->sw);
    double v10 = k_loadf(d->p, d->dt, base + y1 * d->sh + x0 * d->sw);
    double v11 = k_loadf(d->p, d->dt, base + y1 * d->sh + x1 * d->sw);
    return v00 * (1 - lx) * (1 - ly) + v01 * lx * (1 - ly) + v10 * (1 - lx) * ly + v11 * lx * ly;
}

/* roi_align (TVM, aligned = false): each ROI (batch, x1, y1, x2, y2) scaled by spatial_scale
 * and at least 1x1 is cut into pooled bins; each bin samples a grid of sample_ratio^2 points
 * (or ceil(roi / pooled) per axis when sample_ratio <= 0) and averages them (mode avg, as the
 * sum of sample / count) or takes their maximum (mode max). */
int kern_vision_roi_align(KCall *kc) {
    bool max_mode = strcmp(k_str(kc, "mode"), "max") == 0;
    int64_t sample_ratio = k_int(kc, "sample_ratio");
    RoiData d;
    DLTensor *y = roi_setup(kc, &d);
    if (y == NULL) return -1;
    int64_t ph_n = d.ph_n, pw_n = d.pw_n;
    if (k_numel(y) == 0) return 0;
    if (d.h == 0 || d.w == 0) return k_error(kc, "cannot pool from an empty feature map");
    void *yp = k_ptr(y);
    for (int64_t r = 0; r < d.n_roi; r++) {
        int64_t b;
        double box[4];
        if (roi_read(kc, &d, r, &b, box) != 0) return -1;
        double sw = box[0], sh = box[1], ew = box[2], eh = box[3];
        double roi_h = fmax(eh - sh, 1.0), roi_w = fmax(ew - sw, 1.0);
        double bin_h = roi_h / (double)ph_n, bin_w = roi_w / (double)pw_n;
        int64_t gh = sample_ratio > 0 ? sample_ratio : vr_trunc_i64(ceil(roi_h / (double)ph_n));
        int64_t gw = sample_ratio > 0 ? sample_ratio : vr_trunc_i64(ceil(roi_w / (double)pw_n));
        /* A bin samples at most max(extent + 2, 1024) points per axis (a ROI inside the map
         * needs no more than its extent): the work stays bounded by the sizes of the data and
         * the result, whatever sample_ratio, spatial_scale or the rois say. */
        int64_t cap_h = d.h + 2 > 1024 ? d.h + 2 : 1024, cap_w = d.w + 2 > 1024 ? d.w + 2 : 1024;
        if (gh < 1 || gw < 1 || gh > cap_h || gw > cap_w)
            return k_error(kc, "roi %lld needs a sampling grid of %lldx%lld (at most %lldx%lld)",
                           (long long)r, (long long)gh, (long long)gw, (long long)cap_h,
                           (long long)cap_w);
        double count = (double)(gh * gw);
        for (int64_t c = 0; c < d.c; c++)
            for (int64_t ph = 0; ph < ph_n; ph++)
                for (int64_t pw = 0; pw < pw_n; pw++) {
                    double y0 = sh + (double)ph * bin_h, x0 = sw + (double)pw * bin_w;
                    double acc = max_mode ? -INFINITY : 0.0;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double v =
                                roi_bilinear(&d, b, c, y0 + ((double)iy + 0.5) * bin_h / (double)gh,
                                             x0 + ((double)ix + 0.5) * bin_w / (double)gw);
                            if (max_mode)
                                acc = v > acc ? v : acc;
                            else
                                acc += v / count;
                        }
                    k_storef(yp, d.dt, roi_out_at(&d, r, c, ph, pw), acc);
                }
    }
    return 0;
}

/* A scaled ROI corner rounded half away from zero, clamped into [-2^61, 2^61]. */
static int64_t roi_corner(double v) {
    const double lim = (double)((int64_t)1 << 61);
    v = round(v);
    return vr_trunc_i64(v < -lim ? -lim : v > lim ? lim : v);
}

/* roi_pool (TVM): ROI corners are scaled and rounded half away from zero, the ROI is at least
 * 1x1 pixels (end inclusive), and each bin [floor(p * bin + 1e-5), ceil((p + 1) * bin - 1e-5))
 * offset by the ROI start and clamped to the map takes the maximum of its pixels, or 0 when
 * empty. */
int kern_vision_roi_pool(KCall *kc) {
    RoiData d;
    DLTensor *y = roi_setup(kc, &d);
    if (y == NULL) return -1;
    int64_t ph_n = d.ph_n, pw_n = d.pw_n;
    if (k_numel(y) == 0) return 0; /* the bins (attributes) may be many */
    void *yp = k_ptr(y);
    for (int64_t r = 0; r < d.n_roi; r++) {
        int64_t b;
        double box[4];
        if (roi_read(kc, &d, r, &b, box) != 0) return -1;
        /* corners far outside the map are clamped to +-2^61, which changes no bin's pixels and
         * keeps the arithmetic below exact */
        int64_t sw = roi_corner(box[0]), sh = roi_corner(box[1]);
        int64_t ew = roi_corner(box[2]), eh = roi_corner(box[3]);
        double roi_h = (double)(eh - sh + 1 > 1 ? eh - sh + 1 : 1);
        double roi_w = (double)(ew - sw + 1 > 1 ? ew - sw + 1 : 1);
        double bin_h = roi_h / (double)ph_n, bin_w = roi_w / (double)pw_n;
        for (int64_t ph = 0; ph < ph_n; ph++)
            for (int64_t pw = 0; pw < pw_n; pw++) {
                int64_t hs = vr_trunc_i64(floor((double)ph * bin_h + 1e-5)) + sh;
                int64_t ws = vr_trunc_i64(floor((double)pw * bin_w + 1e-5)) + sw;
                int64_t he = vr_trunc_i64(ceil((double)(ph + 1) * bin_h - 1e-5)) + sh;
                int64_t we = vr_trunc_i64(ceil((double)(pw + 1) * bin_w - 1e-5)) + sw;
                hs = hs < 0 ? 0 : hs > d.h ? d.h : hs, he = he < 0 ? 0 : he > d.h ? d.h : he;
                ws = ws < 0 ? 0 : ws > d.w ? d.w : ws, we = we < 0 ? 0 : we > d.w ? d.w : we;
                for (int64_t c = 0; c < d.c; c++) {
                    int64_t at = roi_out_at(&d, r, c, ph, pw);
                    if (hs >= he || ws >= we) {
                        k_storef(yp, d.dt, at, 0.0);
                        continue;
                    }
                    int64_t base = b * d.sn + c * d.sc, best = -1;
                    double best_v = 0.0;
                    for (int64_t yy = hs; yy < he; yy++)
                        for (int64_t xx = ws; xx < we; xx++) {
                            int64_t i = base + yy * d.sh + xx * d.sw;
                            double v = k_loadf(d.p, d.dt, i);
                            if (best < 0 || v > best_v) best = i, best_v = v;
                        }
                    k_convert(yp, d.dt, at, d.p, d.dt, best);
                }
            }
    }
    return 0;
}

/* ==== vision.multibox_prior ================================================================== */

/* SSD prior boxes (TVM's hybrid_multibox_prior): at each feature-map cell, one box per size at
 * ratio 1 and one per further ratio at sizes[0], as (xmin, ymin, xmax, ymax); steps <= 0 mean
 * 1 / size; clip clamps into [0, 1]. */
int kern_vision_multibox_prior(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    const double *sizes, *ratios, *steps, *offsets;
    uint32_t n_s = k_floats(kc, "sizes", &sizes), n_r = k_floats(kc, "ratios", &ratios);
    if (n_s == 0 || n_r == 0 || k_floats(kc, "steps", &steps) != 2 ||
        k_floats(kc, "offsets", &offsets) != 2)
        return k_error(kc, "sizes, ratios, steps or offsets have the wrong length");
    bool clip = k_bool(kc, "clip");
    if (x->ndim != 4) return k_error(kc, "data must be 4-D");
    int64_t h = x->shape[2], w = x->shape[3], per = (int64_t)n_s + n_r - 1;
    int64_t shape[3] = {1, sup_dim_mul_sat(sup_dim_mul_sat(h, w), per), 4}; /* k_out checks */
    rly_dtype dt = k_dtype(x);
    DLTensor *y = k_out(kc, 0, dt, 3, shape);
    if (y == NULL || k_numel(y) == 0) return y == NULL ? -1 : 0; /* h or w may be huge */
    void *yp = k_ptr(y);
    double step_h = steps[0] > 0 ? steps[0] : 1.0 / (double)h;
    double step_w = steps[1] > 0 ? steps[1] : 1.0 / (double)w;
    for (int64_t i = 0; i < h; i++) {
        double cy = ((double)i + offsets[0]) * step_h;
        for (int64_t j = 0; j < w; j++) {
            double cx = ((double)j + offsets[1]) * step_w;
            for (int64_t k = 0; k < per; k++) {
                double bw, bh;
                if (k < (int64_t)n_s) {
                    bw = sizes[k] * (double)h / (double)w / 2.0;
                    bh = sizes[k] / 2.0;
                } else {
                    double r = sqrt(ratios[k - n_s + 1]);
                    bw = sizes[0] * (double)h / (double)w * r / 2.0;
                    bh = sizes[0] / r / 2.0;
                }
                double v[4] = {cx - bw, cy - bh, cx + bw, cy + bh};
                int64_t at = ((i * w + j) * per + k) * 4;
                for (int q = 0; q < 4; q++)
                    k_storef(yp, dt, at + q, clip ? fmin(fmax(v[q], 0.0), 1.0) : v[q]);
            }
        }
    }
    return 0;
}

/* ==== vision.multibox_transform_loc ========================================================== */

/* SSD box decoding (TVM's hybrid_multibox_transform_loc). For each anchor the best class is
 * taken over classes 1.. (0.. with keep_background); a best score below threshold makes it
 * background (0). Without keep_background only non-background anchors are written, as
 * (class - 1, score, xmin, ymin, xmax, ymax), packed at the top; with it every anchor is written
 * with its class id unshifted (TVM PR 15117). Rows past the valid count are -1 (TVM leaves them
 * uninitialized). */
int kern_vision_multibox_transform_loc(KCall *kc) {
    const DLTensor *cls = k_arg(kc, 0), *loc = k_arg(kc, 1), *anchor = k_arg(kc, 2);
    const double *var;
    if (k_floats(kc, "variances", &var) != 4) return k_error(kc, "variances needs 4 values");
    bool clip = k_bool(kc, "clip"), keep_bg = k_bool(kc, "keep_background");
    double threshold = k_float(kc, "threshold");
    if (cls->ndim != 3 || loc->ndim != 2 || anchor->ndim != 3)
        return k_error(kc, "cls_prob and anchor must be 3-D and loc_pred 2-D");
    int64_t b_n = cls->shape[0], c_n = cls->shape[1], n = cls->shape[2], n4;
    if (!sup_dim_mul(n, 4, &n4) || loc->shape[0] != b_n || loc->shape[1] != n4 ||
        anchor->shape[0] < 1 || anchor->shape[1] != n || anchor->shape[2] != 4)
        return k_error(kc, "cls_prob, loc_pred and anchor disagree on the batch or anchor count");
    int64_t shape[3] = {b_n, n, 6};
    rly_dtype dt = k_dtype(cls), l_dt = k_dtype(loc), a_dt = k_dtype(anchor);
    DLTensor *out = k_out(kc, 0, dt, 3, shape);
    if (out == NULL) return -1;
    DLTensor *count = k_out(kc, 1, RLY_DTYPE_I32, 1, &b_n);
    if (count == NULL) return -1;
    const void *cp = k_ptr(cls), *lp = k_ptr(loc), *ap = k_ptr(anchor);
    void *op = k_ptr(out);
    for (int64_t i = 0; i < b_n; i++) {
        int64_t valid = 0;
        for (int64_t j = 0; j < n; j++) {
            double score = -1.0;
            int64_t id = 0;
            for (int64_t k = keep_bg ? 0 : 1; k < c_n; k++) {
                double t = k_loadf(cp, dt, (i * c_n + k) * n + j);
                if (t > score) id = k;
                score = fmax(t, score);
            }
            if (id > 0 && score < threshold) id = 0;
            if (!keep_bg && id == 0) continue;
            double al = k_loadf(ap, a_dt, j * 4), at = k_loadf(ap, a_dt, j * 4 + 1);
            double ar = k_loadf(ap, a_dt, j * 4 + 2), ab = k_loadf(ap, a_dt, j * 4 + 3);
            double px = k_loadf(lp, l_dt, i * 4 * n + j * 4),
                   py = k_loadf(lp, l_dt, i * 4 * n + j * 4 + 1);
            double pw = k_loadf(lp, l_dt, i * 4 * n + j * 4 + 2),
                   ph = k_loadf(lp, l_dt, i * 4 * n + j * 4 + 3);
            double aw = ar - al, ah = ab - at, ax = (al + ar) / 2.0, ay = (at + ab) / 2.0;
            double ox = px * var[0] * aw + ax, oy = py * var[1] * ah + ay;
            double ow = exp(pw * var[2]) * aw / 2.0, oh = exp(ph * var[3]) * ah / 2.0;
            double row[6] = {
                (double)(keep_bg ? id : id - 1), score, ox - ow, oy - oh, ox + ow, oy + oh};
            for (int q = 2; clip && q < 6; q++)
                row[q] = fmax(0.0, fmin(1.0, row[q]));
            for (int q = 0; q < 6; q++)
                k_storef(op, dt, (i * n + valid) * 6 + q, row[q]);
            valid++;
        }
        for (int64_t j = valid; j < n; j++)
            for (int q = 0; q < 6; q++)
                k_storef(op, dt, (i * n + j) * 6 + q, -1.0);
        k_storei(k_ptr(count), RLY_DTYPE_I32, i, valid);
    }
    return 0;
}

/* ==== vision.proposal ======================================================================== */

typedef struct Box5 {
    double v[5]; /* x1, y1, x2, y2, score */
} Box5;

/* The RPN anchor of (ratio, scale) over a base_size window (TVM's generate_anchor). */
static void rpn_anchor(double ratio, double scale, double base, double out[4]) {
    double ctr = 0.5 * (base - 1.0), size = base * base;
    double size_ratios = floor(size / ratio);
    double new_w = floor(sqrt(size_ratios) + 0.5) * scale;
    double new_h = floor(new_w / scale * ratio + 0.5) * scale;
    out[0] = ctr - 0.5 * (new_w - 1.0), out[1] = ctr - 0.5 * (new_h - 1.0);
    out[2] = ctr + 0.5 * (new_w - 1.0), out[3] = ctr + 0.5 * (new_h - 1.0);
}

/* IoU with the +1 pixel convention of the proposal NMS (0 for a non-positive union). */
static double rpn_iou(const double *a, const double *b) {
    double w = fmax(0.0, fmin(a[2], b[2]) - fmax(a[0], b[0]) + 1.0);
    double h = fmax(0.0, fmin(a[3], b[3]) - fmax(a[1], b[1]) + 1.0);
    double i = w * h;
    double u =
        (a[2] - a[0] + 1.0) * (a[3] - a[1] + 1.0) + (b[2] - b[0] + 1.0) * (b[3] - b[1] + 1.0) - i;
    return u <= 0.0 ? 0.0 : i / u;
}

/* RPN proposals (TVM's topi proposal). For each batch: anchors (ratio-major, then scale) at every
 * cell, shifted by feature_stride, regressed by bbox_pred (deltas, or corner offsets with
 * iou_loss), clipped to the image; cells beyond im_size / stride and boxes smaller than
 * rpn_min_size * im_scale get score -1 (small ones also grow by min_size / 2 per side). The boxes
 * are stably sorted by score, the first rpn_pre_nms_top_n kept, NMS (IoU > threshold, +1
 * convention) applied in order, and the survivors written cyclically into the
 * rpn_post_nms_top_n rows (batch, x1, y1, x2, y2) of the batch. With no survivor the rows stay 0
 * (TVM leaves them uninitialized). */
int kern_vision_proposal(KCall *kc) {
    const DLTensor *cls = k_arg(kc, 0), *bbox = k_arg(kc, 1), *info = k_arg(kc, 2);
    const double *scales, *ratios;
    uint32_t n_sc = k_floats(kc, "scales", &scales), n_ra = k_floats(kc, "ratios", &ratios);
    int64_t stride = k_int(kc, "feature_stride"), pre_n = k_int(kc, "rpn_pre_nms_top_n");
    int64_t post_n = k_int(kc, "rpn_post_nms_top_n"), min_size = k_int(kc, "rpn_min_size");
    double thr = k_float(kc, "threshold");
    bool iou_loss = k_bool(kc, "iou_loss");
    if (stride < 1 || post_n < 1)
        return k_error(kc, "feature_stride and rpn_post_nms_top_n must be positive");
    if (cls->ndim != 4 || bbox->ndim != 4 || info->ndim != 2 || info->shape[1] < 3)
        return k_error(kc, "cls_prob and bbox_pred must be 4-D and im_info (batch, 3)");
    int64_t b_n = cls->shape[0], a_n = (int64_t)n_sc * n_ra, h = cls->shape[2], w = cls->shape[3];
    if (a_n == 0 || cls->shape[1] != 2 * a_n || bbox->shape[1] != 4 * a_n ||
        bbox->shape[0] != b_n || bbox->shape[2] != h || bbox->shape[3] != w ||
        info->shape[0] != b_n)
        return k_error(kc, "cls_prob, bbox_pred and im_info disagree on their shapes");
    int64_t shape[2] = {sup_dim_mul_sat(b_n, post_n), 5}; /* k_out refuses one past the limit */
    rly_dtype dt = k_dtype(cls), b_dt = k_dtype(bbox), i_dt = k_dtype(info);
    DLTensor *out = k_out(kc, 0, dt, 2, shape);
    if (out == NULL || k_numel(out) == 0) return out == NULL ? -1 : 0; /* h, w may be huge */
    int64_t n_box = h * w * a_n;
    if (pre_n <= 0 || pre_n > n_box) pre_n = n_box;
    Box5 *boxes = vr_alloc(kc, n_box, sizeof(Box5));
    double *score = vr_alloc(kc, n_box, sizeof(double));
    int64_t *order = vr_alloc(kc, n_box, sizeof(int64_t)),
            *tmp = vr_alloc(kc, n_box, sizeof(int64_t));
    bool *removed = vr_alloc(kc, n_box, sizeof(bool));
    int rc = 0;
    if (boxes == NULL || score == NULL || order == NULL || tmp == NULL || removed == NULL)
        rc = k_error(kc, "out of memory");
    const void *cp = k_ptr(cls), *bp = k_ptr(bbox), *ip = k_ptr(info);
    void *op = k_ptr(out);
    for (int64_t b = 0; b < b_n && rc == 0; b++) {
        int64_t ir = info->shape[1]; /* a row of im_info: height, width, scale */
        double im_h = k_loadf(ip, i_dt, b * ir), im_w = k_loadf(ip, i_dt, b * ir + 1);
        double min_sz = k_loadf(ip, i_dt, b * ir + 2) * (double)min_size;
        int64_t real_h = vr_trunc_i64(im_h / (double)stride),
                real_w = vr_trunc_i64(im_w / (double)stride);
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++)
                for (int64_t k = 0; k < a_n; k++) {
                    double an[4], p[4];
                    rpn_anchor(ratios[k / n_sc], scales[k % n_sc], (double)stride, an);
                    double sx = (double)x * (double)stride, sy = (double)y * (double)stride;
                    double x1 = an[0] + sx, y1 = an[1] + sy, x2 = an[2] + sx, y2 = an[3] + sy;
                    double dl[4];
                    for (int q = 0; q < 4; q++)
                        dl[q] = k_loadf(bp, b_dt, (((b * a_n + k) * 4 + q) * h + y) * w + x);
                    if (iou_loss) {
                        p[0] = x1 + dl[0], p[1] = y1 + dl[1], p[2] = x2 + dl[2], p[3] = y2 + dl[3];
                    } else {
                        double bw = x2 - x1 + 1.0, bh = y2 - y1 + 1.0;
                        double cx = x1 + 0.5 * (bw - 1.0), cy = y1 + 0.5 * (bh - 1.0);
                        double pcx = dl[0] * bw + cx, pcy = dl[1] * bh + cy;
                        double pw = exp(dl[2]) * bw, ph = exp(dl[3]) * bh;
                        p[0] = pcx - 0.5 * (pw - 1.0), p[1] = pcy - 0.5 * (ph - 1.0);
                        p[2] = pcx + 0.5 * (pw - 1.0), p[3] = pcy + 0.5 * (ph - 1.0);
                    }
                    p[0] = fmax(fmin(p[0], im_w - 1.0), 0.0),
                    p[1] = fmax(fmin(p[1], im_h - 1.0), 0.0);
                    p[2] = fmax(fmin(p[2], im_w - 1.0), 0.0),
                    p[3] = fmax(fmin(p[3], im_h - 1.0), 0.0);
                    double s = k_loadf(cp, dt, ((b * a_n * 2 + a_n + k) * h + y) * w + x);
                    if (y >= real_h || x >= real_w) s = -1.0;
                    Box5 *bx = &boxes[(y * w + x) * a_n + k];
                    for (int q = 0; q < 4; q++)
                        bx->v[q] = p[q];
                    bx->v[4] = s;
                    if (p[2] - p[0] + 1.0 < min_sz || p[3] - p[1] + 1.0 < min_sz) {
                        bx->v[0] -= min_sz / 2.0, bx->v[1] -= min_sz / 2.0;
                        bx->v[2] += min_sz / 2.0, bx->v[3] += min_sz / 2.0;
                        bx->v[4] = -1.0;
                    }
                }
        for (int64_t i = 0; i < n_box; i++)
            order[i] = i, score[i] = boxes[i].v[4];
        vr_sort_desc(order, tmp, n_box, score);
        for (int64_t i = 0; i < pre_n; i++)
            removed[i] = false;
        for (int64_t l = 0; l + 1 < pre_n; l++) {
            if (removed[l]) continue;
            for (int64_t i = l + 1; i < pre_n; i++)
                if (!removed[i] && rpn_iou(boxes[order[l]].v, boxes[order[i]].v) > thr)
                    removed[i] = true;
        }
        int64_t keep = 0;
        for (int64_t i = 0; i < pre_n; i++)
            keep += !removed[i];
        for (int64_t row = 0; keep > 0 && row < post_n;)
            for (int64_t i = 0; i < pre_n && row < post_n; i++) {
                if (removed[i]) continue;
                int64_t at = (b * post_n + row) * 5;
                k_storef(op, dt, at, (double)b);
                for (int q = 0; q < 4; q++)
                    k_storef(op, dt, at + 1 + q, boxes[order[i]].v[q]);
                row++;
            }
    }
    return rc;
}

/* ==== vision.yolo_reorg ====================================================================== */

/* Darknet's reorg (the reference TVM's tests check against): output element (b, k, j, i), read
 * in the index space of the input shape, is the input element at flat offset
 * w2 + W*s*(h2 + H*s*(k % C' + C'*b)) with C' = C / s^2, off = k / C', w2 = i*s + off % s,
 * h2 = j*s + off / s; the result is reshaped to (N, C*s*s, H/s, W/s). C must be a multiple of
 * s^2. */
int kern_vision_yolo_reorg(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t s = k_int(kc, "stride");
    if (x->ndim != 4) return k_error(kc, "data must be 4-D");
    int64_t n = x->shape[0], c = x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t s2, cs2;
    if (s <= 0 || h % s != 0 || w % s != 0)
        return k_error(kc, "stride %lld does not divide the %lldx%lld map", (long long)s,
                       (long long)h, (long long)w);
    if (!sup_dim_mul(s, s, &s2) || c % s2 != 0)
        return k_error(kc, "yolo_reorg needs channels (%lld) divisible by stride^2 (%lld^2)",
                       (long long)c, (long long)s);
    if (!sup_dim_mul(c, s2, &cs2))
        return k_error(kc, "%lld channels times stride^2 is too large", (long long)c);
    int64_t shape[4] = {n, cs2, h / s, w / s};
    rly_dtype dt = k_dtype(x);
    DLTensor *y = k_out(kc, 0, dt, 4, shape);
    if (y == NULL || k_numel(y) == 0) return y == NULL ? -1 : 0; /* n or c may be huge */
    int64_t oc = c / s2, cnt = 0;
    const void *xp = k_ptr(x);
    void *yp = k_ptr(y);
    for (int64_t b = 0; b < n; b++)
        for (int64_t k = 0; k < c; k++)
            for (int64_t j = 0; j < h; j++)
                for (int64_t i = 0; i < w; i++, cnt++) {
                    int64_t c2 = k % oc, off = k / oc;
                    int64_t w2 = i * s + off % s, h2 = j * s + off / s;
                    int64_t at = w2 + w * s * (h2 + h * s * (c2 + oc * b));
                    k_convert(yp, dt, cnt, xp, dt, at);
                }
    return 0;
}
