/* vision_nms.c - reference kernels of box counting and non-maximum suppression:
 * vision.get_valid_counts, non_max_suppression, all_class_non_max_suppression and
 * regular_non_max_suppression (their rows are in the image_vision table, image_vision.c).
 *
 * Each follows TVM's topi (python/tvm/topi/vision/nms.py, nms_util.py) step by step, including
 * its quirks, which are noted at each kernel. Sorting by score is stable (ties keep index
 * order, as std::stable_sort in TVM's argsort). Scores and coordinates are compared in double. */
#include <string.h>

#include "kernels/ref/vision_ref.h"

/* Copy row `from` of a (rows, k) block of src into row `to` of dst (same dtype), exactly. */
static void copy_row(void *dst, int64_t to, const void *src, int64_t from, rly_dtype dt,
                     int64_t k) {
    for (int64_t q = 0; q < k; q++)
        k_convert(dst, dt, to * k + q, src, dt, from * k + q);
}

static void fill_row(void *dst, int64_t row, rly_dtype dt, int64_t k, double v) {
    for (int64_t q = 0; q < k; q++)
        k_storef(dst, dt, row * k + q, v);
}

static int need_scalar(KCall *kc, const DLTensor *t, const char *what) {
    if (k_numel(t) != 1) return k_error(kc, "%s must hold one value", what);
    return 0;
}

/* ==== vision.get_valid_counts ================================================================ */

/* Boxes whose score is > score_threshold (the argument; the attribute is TVM's leftover) and
 * whose class id is >= 0 (when id_index >= 0) move to the top in order; the other rows become -1.
 * Outputs: valid count per batch, the rearranged boxes, each row's original index (-1 after). */
int kern_vision_get_valid_counts(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *thr_t = k_arg(kc, 1);
    if (need_scalar(kc, thr_t, "score_threshold") != 0) return -1;
    double thr = vr_scalar_f(thr_t);
    int64_t id_index = k_int(kc, "id_index"), score_index = k_int(kc, "score_index");
    if (x->ndim != 3) return k_error(kc, "data must be 3-D");
    int64_t b_n = x->shape[0], n = x->shape[1], k = x->shape[2];
    if (score_index < 0 || score_index >= k || id_index >= k)
        return k_error(kc, "score_index or id_index is out of range for boxes of %lld values",
                       (long long)k);
    rly_dtype dt = k_dtype(x);
    int64_t bn[2] = {b_n, n};
    DLTensor *count = k_out(kc, 0, RLY_DTYPE_I32, 1, &b_n);
    if (count == NULL) return -1;
    DLTensor *out = k_out(kc, 1, dt, 3, x->shape);
    if (out == NULL) return -1;
    DLTensor *idx = k_out(kc, 2, RLY_DTYPE_I32, 2, bn);
    if (idx == NULL) return -1;
    const void *xp = k_ptr(x);
    void *op = k_ptr(out), *ip = k_ptr(idx);
    for (int64_t i = 0; i < b_n; i++) {
        int64_t valid = 0;
        for (int64_t j = 0; j < n; j++) {
            int64_t row = i * n + j;
            bool ok = k_loadf(xp, dt, row * k + score_index) > thr &&
                      (id_index < 0 || k_loadf(xp, dt, row * k + id_index) >= 0.0);
            if (!ok) continue;
            copy_row(op, i * n + valid, xp, row, dt, k);
            k_storei(ip, RLY_DTYPE_I32, i * n + valid, j);
            valid++;
        }
        for (int64_t j = valid; j < n; j++) {
            fill_row(op, i * n + j, dt, k, -1.0);
            k_storei(ip, RLY_DTYPE_I32, i * n + j, -1);
        }
        k_storei(k_ptr(count), RLY_DTYPE_I32, i, valid);
    }
    return 0;
}

/* ==== vision.non_max_suppression ============================================================= */

/* The 4 coordinates of row r (coord_start ..) as doubles. */
static void row_box(const void *p, rly_dtype dt, int64_t r, int64_t k, int64_t cs, double b[4]) {
    for (int q = 0; q < 4; q++)
        b[q] = k_loadf(p, dt, r * k + cs + q);
}

/* TVM's hybrid_nms and its rearrangement. Per batch, with iou_threshold > 0: the first
 * valid_count boxes are stably sorted by score, only top_k kept (when 0 < top_k < count), and
 * walked in order: once max_output_size boxes are kept the rest become -1; a box with score > 0
 * is dropped (-1) when its IoU with an earlier kept box of score > 0 (and class id >= 0, of the
 * same class unless force_suppress or id_index < 0) is >= iou_threshold. A box with score <= 0
 * is neither a suppressor nor suppressed and stays. With iou_threshold <= 0 the boxes are copied
 * unsorted. Rows past valid_count are -1.
 * return_indices: (the kept boxes' indices through `indices`, packed at the top, -1 after; the
 * count (B, 1)). Else the boxes, packed at the top by element 0 >= 0 when invalid_to_bottom. */
int kern_vision_nms(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *vc_t = k_arg(kc, 1), *ind = k_arg(kc, 2);
    const DLTensor *max_t = k_arg(kc, 3), *iou_t = k_arg(kc, 4);
    if (need_scalar(kc, max_t, "max_output_size") != 0 ||
        need_scalar(kc, iou_t, "iou_threshold") != 0)
        return -1;
    int64_t max_out = vr_scalar_i(max_t);
    double iou_thr = vr_scalar_f(iou_t);
    bool force = k_bool(kc, "force_suppress"), ret_idx = k_bool(kc, "return_indices");
    bool to_bottom = k_bool(kc, "invalid_to_bottom");
    int64_t top_k = k_int(kc, "top_k"), cs = k_int(kc, "coord_start");
    int64_t si = k_int(kc, "score_index"), id_index = k_int(kc, "id_index");
    if (x->ndim != 3 || vc_t->ndim != 1 || ind->ndim != 2)
        return k_error(kc, "data must be 3-D, valid_count 1-D and indices 2-D");
    int64_t b_n = x->shape[0], n = x->shape[1], k = x->shape[2];
    if (si < 0 || si >= k || cs < 0 || cs > k - 4 || id_index >= k)
        return k_error(kc,
                       "coord_start, score_index or id_index is out of range for boxes of "
                       "%lld values",
                       (long long)k);
    if (vc_t->shape[0] != b_n || ind->shape[0] != b_n || ind->shape[1] != n)
        return k_error(kc, "valid_count or indices does not match the data");
    rly_dtype dt = k_dtype(x), vc_dt = k_dtype(vc_t), ind_dt = k_dtype(ind);
    DLTensor *out = NULL, *idx_out = NULL, *cnt_out = NULL;
    int64_t bn[2] = {b_n, n}, b1[2] = {b_n, 1};
    if (ret_idx) {
        if ((idx_out = k_out(kc, 0, RLY_DTYPE_I32, 2, bn)) == NULL ||
            (cnt_out = k_out(kc, 1, RLY_DTYPE_I32, 2, b1)) == NULL)
            return -1;
    } else if ((out = k_out(kc, 0, dt, 3, x->shape)) == NULL) {
        return -1;
    }
    if (b_n == 0) return 0; /* nothing to write; n may be huge */
    /* The working copy of one batch's boxes (rows of k values, dtype dt) and their indices. */
    size_t esz = sup_dtype_size(dt);
    unsigned char *work = vr_alloc(kc, n * k, esz), *work2 = vr_alloc(kc, n * k, esz);
    int64_t *box_idx = vr_alloc(kc, n, sizeof(int64_t)), *order = vr_alloc(kc, n, sizeof(int64_t));
    int64_t *tmp = vr_alloc(kc, n, sizeof(int64_t));
    double *score = vr_alloc(kc, n, sizeof(double));
    int rc = 0;
    if (work == NULL || work2 == NULL || box_idx == NULL || order == NULL || tmp == NULL ||
        score == NULL)
        rc = k_error(kc, "out of memory");
    const void *xp = k_ptr(x);
    for (int64_t i = 0; i < b_n && rc == 0; i++) {
        int64_t vc = k_loadi(k_ptr(vc_t), vc_dt, i);
        if (vc < 0 || vc > n) {
            rc = k_error(kc, "valid_count[%lld] = %lld is outside [0, %lld]", (long long)i,
                         (long long)vc, (long long)n);
            break;
        }
        const void *src = (const char *)xp + (size_t)(i * n * k) * esz;
        if (iou_thr > 0.0) {
            if (vc > 0) {
                for (int64_t j = 0; j < vc; j++)
                    order[j] = j, score[j] = k_loadf(src, dt, j * k + si);
                vr_sort_desc(order, tmp, vc, score);
                int64_t keep = top_k > 0 && top_k < vc ? top_k : vc;
                for (int64_t j = 0; j < keep; j++) {
                    copy_row(work, j, src, order[j], dt, k);
                    box_idx[j] = order[j];
                }
                for (int64_t j = keep; j < vc; j++)
                    fill_row(work, j, dt, k, -1.0), box_idx[j] = -1;
            }
            int64_t kept = 0;
            for (int64_t j = 0; j < vc; j++) {
                if (kept == max_out) {
                    fill_row(work, j, dt, k, -1.0), box_idx[j] = -1;
                    continue;
                }
                if (!(k_loadf(work, dt, j * k + si) > 0.0)) continue;
                double a[4], b[4];
                row_box(work, dt, j, k, cs, a);
                bool valid = true;
                for (int64_t q = 0; q < j && valid; q++) {
                    if (!(k_loadf(work, dt, q * k + si) > 0.0)) continue;
                    if (id_index >= 0 && !(k_loadf(work, dt, q * k + id_index) >= 0.0)) continue;
                    if (!force && id_index >= 0 &&
                        k_loadf(work, dt, j * k + id_index) != k_loadf(work, dt, q * k + id_index))
                        continue;
                    row_box(work, dt, q, k, cs, b);
                    if (vr_iou_corners(a, b) >= iou_thr) valid = false;
                }
                if (valid)
                    kept++;
                else
                    fill_row(work, j, dt, k, -1.0), box_idx[j] = -1;
            }
        } else {
            for (int64_t j = 0; j < vc; j++)
                copy_row(work, j, src, j, dt, k), box_idx[j] = j;
        }
        for (int64_t j = vc; j < n; j++)
            fill_row(work, j, dt, k, -1.0), box_idx[j] = -1;
        if (ret_idx) {
            int64_t m = 0;
            for (int64_t j = 0; j < vc; j++) {
                if (box_idx[j] < 0) continue;
                int64_t orig = k_loadi(k_ptr(ind), ind_dt, i * n + box_idx[j]);
                k_storei(k_ptr(idx_out), RLY_DTYPE_I32, i * n + m++, orig);
            }
            k_storei(k_ptr(cnt_out), RLY_DTYPE_I32, i, m);
            for (int64_t j = m; j < n; j++)
                k_storei(k_ptr(idx_out), RLY_DTYPE_I32, i * n + j, -1);
            continue;
        }
        void *dst = (char *)k_ptr(out) + (size_t)(i * n * k) * esz;
        if (!to_bottom) {
            memcpy(dst, work, (size_t)(n * k) * esz);
            continue;
        }
        int64_t m = 0;
        for (int64_t j = 0; j < n; j++)
            if (k_loadf(work, dt, j * k) >= 0.0) copy_row(work2, m++, work, j, dt, k);
        for (int64_t j = m; j < n; j++)
            fill_row(work2, j, dt, k, -1.0);
        memcpy(dst, work2, (size_t)(n * k) * esz);
    }
    return rc;
}

/* ==== vision.all_class_non_max_suppression =================================================== */

/* TVM's all_class_non_max_suppression. Per (batch, class): boxes stably sorted by score; the
 * candidates are those with score > score_threshold; walking them in order (while fewer than
 * max_output_boxes_per_class are selected; <= 0 means no limit), a candidate not yet suppressed
 * is selected and suppresses the later candidates with score > 0 whose IoU with it is
 * >= iou_threshold. With iou_threshold <= 0 nothing is selected (TVM's loop condition).
 * onnx: rows (batch, class, box) of all selections, batch-major then class, then score order,
 * and their total count (1,); rows past the count are 0. tensorflow: per batch, rows
 * (class, box) and their float32 scores, classes in order, then the count per batch; the rest
 * are 0. */
int kern_vision_all_class_nms(KCall *kc) {
    const DLTensor *boxes = k_arg(kc, 0), *scores = k_arg(kc, 1);
    const DLTensor *max_t = k_arg(kc, 2), *iou_t = k_arg(kc, 3), *thr_t = k_arg(kc, 4);
    if (need_scalar(kc, max_t, "max_output_boxes_per_class") != 0 ||
        need_scalar(kc, iou_t, "iou_threshold") != 0 ||
        need_scalar(kc, thr_t, "score_threshold") != 0)
        return -1;
    int64_t max_out = vr_scalar_i(max_t);
    double iou_thr = vr_scalar_f(iou_t), score_thr = vr_scalar_f(thr_t);
    bool onnx = strcmp(k_str(kc, "output_format"), "onnx") == 0;
    if (boxes->ndim != 3 || boxes->shape[2] != 4 || scores->ndim != 3)
        return k_error(kc, "boxes must have shape (batch, n, 4) and scores be 3-D");
    int64_t b_n = boxes->shape[0], n = boxes->shape[1], c_n = scores->shape[1];
    if (scores->shape[0] != b_n || scores->shape[2] != n)
        return k_error(kc, "boxes and scores disagree on the batch or box count");
    rly_dtype b_dt = k_dtype(boxes), s_dt = k_dtype(scores);
    DLTensor *o_idx, *o_score = NULL, *o_cnt;
    if (onnx) {
        int64_t sel[2] = {b_n * c_n * n, 3}, one = 1;
        if ((o_idx = k_out(kc, 0, RLY_DTYPE_I64, 2, sel)) == NULL ||
            (o_cnt = k_out(kc, 1, RLY_DTYPE_I64, 1, &one)) == NULL)
            return -1;
    } else {
        int64_t sel[3] = {b_n, c_n * n, 2}, sc[2] = {b_n, c_n * n};
        if ((o_idx = k_out(kc, 0, RLY_DTYPE_I64, 3, sel)) == NULL ||
            (o_score = k_out(kc, 1, RLY_DTYPE_F32, 2, sc)) == NULL ||
            (o_cnt = k_out(kc, 2, RLY_DTYPE_I64, 1, &b_n)) == NULL)
            return -1;
    }
    if (k_numel(scores) == 0) { /* nothing selected; the batch or box count may be huge */
        for (int64_t i = 0; i < k_numel(o_cnt); i++)
            k_storei(k_ptr(o_cnt), RLY_DTYPE_I64, i, 0);
        return 0;
    }
    int64_t *order = vr_alloc(kc, n, sizeof(int64_t)), *tmp = vr_alloc(kc, n, sizeof(int64_t));
    double *score = vr_alloc(kc, n, sizeof(double)), *live = vr_alloc(kc, n, sizeof(double));
    if (order == NULL || tmp == NULL || score == NULL || live == NULL) {
        return k_error(kc, "out of memory");
    }
    void *ip = k_ptr(o_idx), *cp = k_ptr(o_cnt), *sp = o_score ? k_ptr(o_score) : NULL;
    int64_t total = 0; /* onnx: rows written so far */
    for (int64_t b = 0; b < b_n; b++) {
        int64_t row = 0; /* tensorflow: rows of this batch */
        for (int64_t c = 0; c < c_n; c++) {
            for (int64_t j = 0; j < n; j++)
                order[j] = j, score[j] = k_loadf(k_ptr(scores), s_dt, (b * c_n + c) * n + j);
            vr_sort_desc(order, tmp, n, score);
            int64_t cand = 0;
            for (int64_t j = 0; j < n; j++) {
                live[j] = score[order[j]];
                cand += live[j] > score_thr;
            }
            int64_t limit = max_out > 0 ? max_out : cand, sel = 0;
            for (int64_t j = 0; iou_thr > 0.0 && j < cand && sel < limit; j++) {
                if (!(live[j] > -1.0)) continue;
                double a[4], o[4];
                for (int q = 0; q < 4; q++)
                    a[q] = k_loadf(k_ptr(boxes), b_dt, (b * n + order[j]) * 4 + q);
                if (onnx) {
                    int64_t v[3] = {b, c, order[j]};
                    for (int q = 0; q < 3; q++)
                        k_storei(ip, RLY_DTYPE_I64, total * 3 + q, v[q]);
                    total++;
                } else {
                    k_storei(ip, RLY_DTYPE_I64, (b * c_n * n + row) * 2, c);
                    k_storei(ip, RLY_DTYPE_I64, (b * c_n * n + row) * 2 + 1, order[j]);
                    k_storef(sp, RLY_DTYPE_F32, b * c_n * n + row, live[j]);
                    row++;
                }
                sel++;
                for (int64_t q = j + 1; q < cand; q++) {
                    if (!(live[q] > 0.0)) continue;
                    for (int e = 0; e < 4; e++)
                        o[e] = k_loadf(k_ptr(boxes), b_dt, (b * n + order[q]) * 4 + e);
                    if (vr_iou_corners(a, o) >= iou_thr) live[q] = -1.0;
                }
            }
        }
        if (!onnx) k_storei(cp, RLY_DTYPE_I64, b, row);
    }
    if (onnx) k_storei(cp, RLY_DTYPE_I64, 0, total);
    return 0;
}

/* ==== vision.regular_non_max_suppression ===================================================== */

/* IoU of two (ymin, xmin, ymax, xmax) boxes as TFLite's regular NMS computes it: 0 unless both
 * areas are positive. */
static double tfl_iou(const double *a, const double *b) {
    double area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    if (!(area_a > 0.0 && area_b > 0.0)) return 0.0;
    double ih = fmax(fmin(a[2], b[2]) - fmax(a[0], b[0]), 0.0);
    double iw = fmax(fmin(a[3], b[3]) - fmax(a[1], b[1]), 0.0);
    double inter = ih * iw;
    return inter / (area_a + area_b - inter);
}

/* TFLite's regular NMS (TVM's hybrid_regular_nms). Scores are (batch, boxes, classes with
 * background); the classes are the last num_classes. Per class: boxes with score >=
 * score_threshold, stably sorted, greedily selected (up to max_detections_per_class), each
 * suppressing later candidates with IoU > iou_threshold. The selections of all classes are
 * merged by a stable sort on score (earlier classes first on ties), keeping max_detections.
 * Outputs: boxes, class (as float), score, and the count; unused rows are 0. */
int kern_vision_regular_nms(KCall *kc) {
    const DLTensor *boxes = k_arg(kc, 0), *scores = k_arg(kc, 1);
    int64_t per_class = k_int(kc, "max_detections_per_class"),
            max_det = k_int(kc, "max_detections");
    int64_t n_cls = k_int(kc, "num_classes");
    double iou_thr = k_float(kc, "iou_threshold"), score_thr = k_float(kc, "score_threshold");
    if (boxes->ndim != 3 || boxes->shape[2] != 4 || scores->ndim != 3)
        return k_error(kc, "boxes must have shape (batch, n, 4) and scores be 3-D");
    int64_t b_n = boxes->shape[0], n = boxes->shape[1], c_all = scores->shape[2];
    if (scores->shape[0] != b_n || scores->shape[1] != n || n_cls > c_all || n_cls < 0)
        return k_error(kc, "boxes, scores and num_classes disagree");
    int64_t s3[3] = {b_n, max_det, 4}, s2[2] = {b_n, max_det};
    DLTensor *o_box, *o_cls, *o_score, *o_num;
    if ((o_box = k_out(kc, 0, RLY_DTYPE_F32, 3, s3)) == NULL ||
        (o_cls = k_out(kc, 1, RLY_DTYPE_F32, 2, s2)) == NULL ||
        (o_score = k_out(kc, 2, RLY_DTYPE_F32, 2, s2)) == NULL ||
        (o_num = k_out(kc, 3, RLY_DTYPE_I32, 1, &b_n)) == NULL)
        return -1;
    if (b_n == 0) return 0; /* no batch; the box count may be huge */
    rly_dtype b_dt = k_dtype(boxes), s_dt = k_dtype(scores);
    int64_t offset = c_all - n_cls, cap = max_det + n;
    if (n == 0) n_cls = 0; /* no box: nothing to select (the classes may be many) */
    int64_t *keep = vr_alloc(kc, n, sizeof(int64_t)), *order = vr_alloc(kc, cap, sizeof(int64_t));
    int64_t *tmp = vr_alloc(kc, cap, sizeof(int64_t)), *sel = vr_alloc(kc, n, sizeof(int64_t));
    int64_t *m_box = vr_alloc(kc, cap, sizeof(int64_t)),
            *m_cls = vr_alloc(kc, cap, sizeof(int64_t));
    int64_t *t_box = vr_alloc(kc, cap, sizeof(int64_t)),
            *t_cls = vr_alloc(kc, cap, sizeof(int64_t));
    double *ks = vr_alloc(kc, cap, sizeof(double)), *m_score = vr_alloc(kc, cap, sizeof(double));
    double *t_score = vr_alloc(kc, cap, sizeof(double));
    bool *active = vr_alloc(kc, n, sizeof(bool));
    int rc = 0;
    if (!keep || !order || !tmp || !sel || !m_box || !m_cls || !t_box || !t_cls || !ks ||
        !m_score || !t_score || !active)
        rc = k_error(kc, "out of memory");
    for (int64_t b = 0; b < b_n && rc == 0; b++) {
        int64_t merged = 0;
        for (int64_t c = 0; c < n_cls; c++) {
            int64_t kept = 0;
            for (int64_t j = 0; j < n; j++) {
                double s = k_loadf(k_ptr(scores), s_dt, (b * n + j) * c_all + c + offset);
                if (s >= score_thr) ks[kept] = s, keep[kept++] = j;
            }
            for (int64_t j = 0; j < kept; j++)
                order[j] = j, active[j] = true;
            vr_sort_desc(order, tmp, kept, ks);
            int64_t n_sel = 0, limit = per_class < kept ? per_class : kept;
            for (int64_t j = 0; j < kept; j++) {
                if (n_sel >= limit || !active[j]) continue;
                int64_t bj = keep[order[j]];
                sel[n_sel++] = bj;
                active[j] = false;
                double a[4], o[4];
                for (int q = 0; q < 4; q++)
                    a[q] = k_loadf(k_ptr(boxes), b_dt, (b * n + bj) * 4 + q);
                for (int64_t q = j + 1; q < kept; q++) {
                    if (!active[q]) continue;
                    for (int e = 0; e < 4; e++)
                        o[e] = k_loadf(k_ptr(boxes), b_dt, (b * n + keep[order[q]]) * 4 + e);
                    if (tfl_iou(a, o) > iou_thr) active[q] = false;
                }
            }
            /* merge: the previous top list, then this class's selections; stable by score */
            for (int64_t j = 0; j < n_sel; j++) {
                m_box[merged + j] = sel[j], m_cls[merged + j] = c;
                m_score[merged + j] =
                    k_loadf(k_ptr(scores), s_dt, (b * n + sel[j]) * c_all + c + offset);
            }
            int64_t total = merged + n_sel;
            for (int64_t j = 0; j < total; j++)
                order[j] = j;
            vr_sort_desc(order, tmp, total, m_score);
            merged = total < max_det ? total : max_det;
            for (int64_t j = 0; j < merged; j++)
                t_box[j] = m_box[order[j]], t_cls[j] = m_cls[order[j]],
                t_score[j] = m_score[order[j]];
            for (int64_t j = 0; j < merged; j++)
                m_box[j] = t_box[j], m_cls[j] = t_cls[j], m_score[j] = t_score[j];
        }
        for (int64_t j = 0; j < merged; j++) {
            for (int q = 0; q < 4; q++)
                k_storef(k_ptr(o_box), RLY_DTYPE_F32, (b * max_det + j) * 4 + q,
                         k_loadf(k_ptr(boxes), b_dt, (b * n + m_box[j]) * 4 + q));
            k_storef(k_ptr(o_cls), RLY_DTYPE_F32, b * max_det + j, (double)m_cls[j]);
            k_storef(k_ptr(o_score), RLY_DTYPE_F32, b * max_det + j, m_score[j]);
        }
        k_storei(k_ptr(o_num), RLY_DTYPE_I32, b, merged);
    }
    return rc;
}
