/* image_vision.c - reference kernels of the image operators (image.resize1d/2d/3d,
 * crop_and_resize, affine_grid, grid_sample, dilation2d) and the table of the image_vision
 * category (see src/ops/op_image_vision.c); the vision operators live in vision_boxes.c and
 * vision_nms.c.
 *
 * Semantics are TVM's topi (python/tvm/topi/image/). Source coordinates and interpolation weights
 * are computed in double (TVM computes them in float32), results are converted to the output
 * dtype once: floats round to nearest, integers truncate toward zero and saturate as a cast
 * does (k_storef). Nearest-neighbour sampling copies the element exactly (k_convert).
 *
 * resize3d applies the per-axis rules of resize1d/2d to D, H and W with roi = [start_d, start_h,
 * start_w, end_d, end_h, end_w]; TVM's _resize_3d reads the roi entries in another order, reuses
 * the W weights for D when excluding outside taps and drops the D extrapolation test, which we
 * take as bugs rather than semantics. */
#include <string.h>

#include "kernels/ref/vision_ref.h"

/* ==== image.resize1d / resize2d / resize3d =================================================== */

enum { CT_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_PYTORCH, CT_TF_NN, CT_TF_CROP };
enum { RM_ROUND, RM_FLOOR, RM_CEIL, RM_PREFER_FLOOR, RM_PREFER_CEIL };
enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };

/* The input taps of one output coordinate along one resized axis. */
typedef struct Taps {
    int64_t idx[4]; /* input indices, clamped into [0, in) */
    double w[4];    /* their weights */
    int n;          /* 1 (nearest), 2 (linear) or 4 (cubic) */
    bool outside;   /* tf_crop_and_resize: the source coordinate is outside [0, in - 1] */
} Taps;

typedef struct ResizeSpec {
    int method, mode, rounding;
    double alpha;      /* cubic_alpha */
    bool exclude;      /* cubic_exclude */
    double extrap;     /* extrapolation_value */
    const double *roi; /* [start of each axis..., end of each axis...] */
    uint32_t n_sp;     /* resized axes */
} ResizeSpec;

/* Source coordinate of output index x along an axis of `in` -> `out` (TVM's get_inx). The modes
 * that divide by out - 1 give 0 (align_corners) or the box centre (tf_crop_and_resize) for a
 * single output, where TVM divides by zero. */
static double resize_coord(int mode, int64_t x, int64_t in, int64_t out, double start, double end) {
    double xf = (double)x, scale = (double)in / (double)out;
    switch (mode) {
    case CT_HALF_PIXEL: return (xf + 0.5) * scale - 0.5;
    case CT_ALIGN_CORNERS: return out > 1 ? (double)(in - 1) / (double)(out - 1) * xf : 0.0;
    case CT_ASYMMETRIC: return scale * xf;
    case CT_PYTORCH: return out > 1 ? (xf + 0.5) * scale - 0.5 : 0.0;
    case CT_TF_NN: return (xf + 0.5) * scale;
    default:
        return out > 1 ? start * (double)(in - 1) +
                             xf * (end - start) * (double)(in - 1) / (double)(out - 1)
                       : 0.5 * (start + end) * (double)(in - 1);
    }
}

/* An index held in a double (possibly huge or NaN) clamped into [0, in). */
static int64_t clamp_index(double v, int64_t in) {
    if (!(v > 0.0)) return 0; /* also NaN */
    if (v >= (double)(in - 1)) return in - 1;
    return (int64_t)v;
}

/* TVM's get_closest_index: "round" rounds half away from zero (llvm.round); floor and ceil
 * allow an epsilon of 1e-5. */
static double nearest_of(double x, int rounding) {
    switch (rounding) {
    case RM_FLOOR: return floor(x + 1e-5);
    case RM_CEIL: return ceil(x - 1e-5);
    case RM_PREFER_FLOOR: return ceil(x - 0.5);
    case RM_PREFER_CEIL: return floor(x + 0.5);
    default: return round(x);
    }
}

/* TVM's _cubic_spline_weights for the taps floor(x) - 1 .. floor(x) + 2. */
static void cubic_weights(double t, double a, double w[4]) {
    double t2 = t * t, t3 = t2 * t;
    w[0] = a * (t3 - 2 * t2 + t);
    w[1] = (a + 2) * t3 - (3 + a) * t2 + 1;
    w[2] = -(a + 2) * t3 + (3 + 2 * a) * t2 - a * t;
    w[3] = -a * t3 + a * t2;
}

/* The taps of output index x along resized axis d (in -> out). int_div: TVM's resize2d maps
 * nearest-neighbour asymmetric resizes by an integer factor with an integer division, ignoring
 * rounding_method (can_convert_multiply_to_intdiv). */
static void resize_taps(const ResizeSpec *rs, uint32_t d, int64_t x, int64_t in, int64_t out,
                        bool int_div, Taps *t) {
    double c = resize_coord(rs->mode, x, in, out, rs->roi[d], rs->roi[rs->n_sp + d]);
    t->outside = rs->mode == CT_TF_CROP && (c < 0.0 || c > (double)(in - 1));
    if (rs->method == RS_NEAREST) {
        t->n = 1;
        t->w[0] = 1.0;
        t->idx[0] = int_div ? clamp_index((double)(x / (out / in)), in)
                            : clamp_index(nearest_of(c, rs->rounding), in);
        return;
    }
    double f = floor(c), frac = c - f;
    if (!(frac == frac)) f = 0.0, frac = 0.0; /* a NaN or infinite coordinate */
    if (rs->method == RS_LINEAR) {
        t->n = 2;
        t->idx[0] = clamp_index(f, in), t->idx[1] = clamp_index(f + 1.0, in);
        t->w[0] = 1.0 - frac, t->w[1] = frac;
        return;
    }
    t->n = 4;
    cubic_weights(frac, rs->alpha, t->w);
    double sum = 0.0;
    for (int i = 0; i < 4; i++) {
        double at = f - 1.0 + i;
        t->idx[i] = clamp_index(at, in);
        if (rs->exclude && (at < 0.0 || at >= (double)in)) t->w[i] = 0.0;
        sum += t->w[i];
    }
    if (rs->exclude && sum != 0.0)
        for (int i = 0; i < 4; i++)
            t->w[i] /= sum;
}

static int str_index(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

/* The resize of `spatial` ("W", "HW", "DHW") in a layout made of the axes of N, C and spatial. */
static int resize_nd(KCall *kc, const char *spatial) {
    static const char *const methods[] = {"nearest_neighbor", "linear", "cubic"};
    static const char *const modes[] = {"half_pixel",           "align_corners",
                                        "asymmetric",           "pytorch_half_pixel",
                                        "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const roundings[] = {"round", "floor", "ceil", "round_prefer_floor",
                                            "round_prefer_ceil"};
    const DLTensor *x = k_arg(kc, 0);
    ResizeSpec rs = {0};
    rs.n_sp = (uint32_t)strlen(spatial);
    rs.method = str_index(k_str(kc, "method"), methods, 3);
    rs.mode = str_index(k_str(kc, "coordinate_transformation_mode"), modes, 6);
    const char *rounding = k_str(kc, "rounding_method");
    if (rounding[0] == '\0') rounding = rs.mode == CT_ALIGN_CORNERS ? "round" : "floor";
    rs.rounding = str_index(rounding, roundings, 5);
    if (rs.method < 0 || rs.mode < 0 || rs.rounding < 0)
        return k_error(kc, "unknown method, coordinate mode or rounding method");
    rs.alpha = k_float(kc, "cubic_alpha");
    rs.exclude = k_int(kc, "cubic_exclude") != 0;
    rs.extrap = k_float(kc, "extrapolation_value");
    const int64_t *size;
    if (k_ints(kc, "size", &size) != rs.n_sp || k_floats(kc, "roi", &rs.roi) != 2 * rs.n_sp)
        return k_error(kc, "size and roi must have %u and %u values", rs.n_sp, 2 * rs.n_sp);
    KLayout l;
    int sp_axis[3];
    uint32_t ndim = (uint32_t)x->ndim;
    if (k_layout_attr(kc, "layout", ndim, &l) != 0 || k_layout_axes(kc, &l, spatial, sp_axis) != 0)
        return -1;
    int64_t in_sz[3], out_sz[3];
    int64_t shape[K_MAX_DIMS], in_stride[K_MAX_DIMS];
    memcpy(shape, x->shape, ndim * sizeof(int64_t));
    for (uint32_t d = 0; d < rs.n_sp; d++) {
        in_sz[d] = x->shape[sp_axis[d]];
        out_sz[d] = size[d];
        shape[sp_axis[d]] = size[d];
    }
    rly_dtype in_dt = k_dtype(x), out_dt;
    if (!k_dtype_attr(kc, "out_dtype", in_dt, &out_dt)) return -1;
    DLTensor *y = k_out(kc, 0, out_dt, ndim, shape);
    if (y == NULL) return -1;
    int64_t n_out = k_numel(y);
    if (n_out == 0) return 0;
    for (uint32_t d = 0; d < rs.n_sp; d++)
        if (in_sz[d] == 0) return k_error(kc, "cannot resize an empty %c axis", spatial[d]);
    k_strides(ndim, x->shape, in_stride);

    /* Taps of every output coordinate of every resized axis, computed once. */
    Taps *taps[3] = {NULL, NULL, NULL};
    int rc = 0;
    for (uint32_t d = 0; d < rs.n_sp && rc == 0; d++) {
        taps[d] = vr_alloc(kc, out_sz[d], sizeof(Taps));
        if (taps[d] == NULL) {
            rc = k_error(kc, "out of memory");
            break;
        }
        /* TVM's resize2d only: integer division for integer-factor nearest asymmetric resizes. */
        bool int_div = rs.n_sp == 2 && rs.method == RS_NEAREST && rs.mode == CT_ASYMMETRIC &&
                       out_sz[d] % in_sz[d] == 0 &&
                       (double)(out_sz[d] / in_sz[d]) <= 1.0 / (1e-5 * (double)in_sz[d] + 1e-5);
        for (int64_t o = 0; o < out_sz[d]; o++)
            resize_taps(&rs, d, o, in_sz[d], out_sz[d], int_div, &taps[d][o]);
    }
    if (rc == 0) {
        static const Taps one = {.idx = {0}, .w = {1.0}, .n = 1, .outside = false};
        const void *xp = k_ptr(x);
        void *yp = k_ptr(y);
        int64_t idx[K_MAX_DIMS] = {0};
        for (int64_t i = 0; i < n_out; i++, k_next(idx, ndim, shape)) {
            int64_t base = 0;
            for (uint32_t d = 0; d < ndim; d++)
                base += idx[d] * in_stride[d];
            const Taps *t[3] = {&one, &one, &one};
            int64_t st[3] = {0, 0, 0};
            bool outside = false;
            for (uint32_t d = 0; d < rs.n_sp; d++) {
                base -= idx[sp_axis[d]] * in_stride[sp_axis[d]];
                t[d] = &taps[d][idx[sp_axis[d]]];
                st[d] = in_stride[sp_axis[d]];
                outside = outside || t[d]->outside;
            }
            if (outside) {
                k_storef(yp, out_dt, i, rs.extrap);
            } else if (rs.method == RS_NEAREST) {
                int64_t at =
                    base + t[0]->idx[0] * st[0] + t[1]->idx[0] * st[1] + t[2]->idx[0] * st[2];
                k_convert(yp, out_dt, i, xp, in_dt, at);
            } else {
                double acc = 0.0;
                for (int a = 0; a < t[2]->n; a++)
                    for (int b = 0; b < t[1]->n; b++)
                        for (int c = 0; c < t[0]->n; c++) {
                            double w = t[2]->w[a] * t[1]->w[b] * t[0]->w[c];
                            int64_t at = base + t[2]->idx[a] * st[2] + t[1]->idx[b] * st[1] +
                                         t[0]->idx[c] * st[0];
                            acc += w * k_loadf(xp, in_dt, at);
                        }
                k_storef(yp, out_dt, i, acc);
            }
        }
    }
    return rc;
}

static int resize1d(KCall *kc) { return resize_nd(kc, "W"); }
static int resize2d(KCall *kc) { return resize_nd(kc, "HW"); }
static int resize3d(KCall *kc) { return resize_nd(kc, "DHW"); }

/* ==== image.crop_and_resize ================================================================== */

/* Box b's source coordinate of output index o along an axis of `in` -> `out`, given the box's
 * normalized start and end (TF's CropAndResize; TVM divides by zero for a single output). */
static double crop_coord(double start, double end, int64_t o, int64_t in, int64_t out) {
    if (out > 1)
        return start * (double)(in - 1) +
               (double)o * (end - start) * (double)(in - 1) / (double)(out - 1);
    return 0.5 * (start + end) * (double)(in - 1);
}

static int crop_and_resize(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *boxes = k_arg(kc, 1), *box_ind = k_arg(kc, 2);
    uint32_t ndim = (uint32_t)x->ndim;
    KLayout l;
    int nhw[3];
    if (k_layout_attr(kc, "layout", ndim, &l) != 0 || k_layout_axes(kc, &l, "NHW", nhw) != 0)
        return -1;
    const int64_t *crop;
    if (k_ints(kc, "crop_size", &crop) != 2) return k_error(kc, "crop_size needs 2 values");
    bool nearest = strcmp(k_str(kc, "method"), "nearest_neighbor") == 0;
    double extrap = k_float(kc, "extrapolation_value");
    int an = nhw[0], ah = nhw[1], aw = nhw[2];
    if (boxes->ndim != 2 || boxes->shape[1] != 4 || box_ind->ndim != 1)
        return k_error(kc, "boxes must be (n, 4) and box_indices 1-D");
    int64_t n_box = boxes->shape[0], batch = x->shape[an], ih = x->shape[ah], iw = x->shape[aw];
    if (box_ind->shape[0] != n_box)
        return k_error(kc, "%lld boxes but %lld box indices", (long long)n_box,
                       (long long)box_ind->shape[0]);
    int64_t shape[K_MAX_DIMS], in_stride[K_MAX_DIMS];
    memcpy(shape, x->shape, ndim * sizeof(int64_t));
    shape[an] = n_box, shape[ah] = crop[0], shape[aw] = crop[1];
    rly_dtype in_dt = k_dtype(x), out_dt;
    if (!k_dtype_attr(kc, "out_dtype", in_dt, &out_dt)) return -1;
    rly_dtype b_dt = k_dtype(boxes), i_dt = k_dtype(box_ind);
    DLTensor *y = k_out(kc, 0, out_dt, ndim, shape);
    if (y == NULL) return -1;
    for (int64_t b = 0; b < n_box; b++) {
        int64_t bi = k_loadi(k_ptr(box_ind), i_dt, b);
        if (bi < 0 || bi >= batch)
            return k_error(kc, "box_indices[%lld] = %lld is out of range for a batch of %lld",
                           (long long)b, (long long)bi, (long long)batch);
    }
    int64_t n_out = k_numel(y);
    if (n_out == 0) return 0;
    if (ih == 0 || iw == 0) return k_error(kc, "cannot crop from an empty image");
    k_strides(ndim, x->shape, in_stride);
    const void *xp = k_ptr(x), *bp = k_ptr(boxes);
    void *yp = k_ptr(y);
    int64_t idx[K_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n_out; i++, k_next(idx, ndim, shape)) {
        int64_t b = idx[an];
        int64_t img = k_loadi(k_ptr(box_ind), i_dt, b);
        double y1 = k_loadf(bp, b_dt, 4 * b), x1 = k_loadf(bp, b_dt, 4 * b + 1);
        double y2 = k_loadf(bp, b_dt, 4 * b + 2), x2 = k_loadf(bp, b_dt, 4 * b + 3);
        double cy = crop_coord(y1, y2, idx[ah], ih, crop[0]);
        double cx = crop_coord(x1, x2, idx[aw], iw, crop[1]);
        if (!(cy >= 0.0 && cy <= (double)(ih - 1) && cx >= 0.0 && cx <= (double)(iw - 1))) {
            k_storef(yp, out_dt, i, extrap);
            continue;
        }
        int64_t base = img * in_stride[an];
        for (uint32_t d = 0; d < ndim; d++)
            if ((int)d != an && (int)d != ah && (int)d != aw) base += idx[d] * in_stride[d];
        if (nearest) { /* TVM rounds box coordinates half away from zero */
            int64_t at = base + clamp_index(round(cy), ih) * in_stride[ah] +
                         clamp_index(round(cx), iw) * in_stride[aw];
            k_convert(yp, out_dt, i, xp, in_dt, at);
            continue;
        }
        double fy = floor(cy), fx = floor(cx), ty = cy - fy, tx = cx - fx;
        int64_t y0 = clamp_index(fy, ih), y1i = clamp_index(fy + 1, ih);
        int64_t x0 = clamp_index(fx, iw), x1i = clamp_index(fx + 1, iw);
        double p00 = k_loadf(xp, in_dt, base + y0 * in_stride[ah] + x0 * in_stride[aw]);
        double p01 = k_loadf(xp, in_dt, base + y0 * in_stride[ah] + x1i * in_stride[aw]);
        double p10 = k_loadf(xp, in_dt, base + y1i * in_stride[ah] + x0 * in_stride[aw]);
        double p11 = k_loadf(xp, in_dt, base + y1i * in_stride[ah] + x1i * in_stride[aw]);
        double top = p00 * (1 - tx) + p01 * tx, bottom = p10 * (1 - tx) + p11 * tx;
        k_storef(yp, out_dt, i, top * (1 - ty) + bottom * ty);
    }
    return 0;
}

/* ==== image.affine_grid ====================================================================== */

/* TVM's affine_grid (align_corners): the target grid runs from -1 in steps of
 * (2 - 1e-7) / (size - 1); a single row or column sits at -1. Output (batch, 2, H, W): channel 0
 * is x, channel 1 is y. */
static int affine_grid(KCall *kc) {
    const DLTensor *theta = k_arg(kc, 0);
    const int64_t *ts;
    if (k_ints(kc, "target_shape", &ts) != 2) return k_error(kc, "target_shape needs 2 values");
    if (theta->ndim != 3 || theta->shape[1] != 2 || theta->shape[2] != 3)
        return k_error(kc, "data must have shape (batch, 2, 3)");
    int64_t b = theta->shape[0], h = ts[0], w = ts[1];
    int64_t shape[4] = {b, 2, h, w};
    rly_dtype dt = k_dtype(theta);
    DLTensor *y = k_out(kc, 0, dt, 4, shape);
    if (y == NULL || k_numel(y) == 0) return y == NULL ? -1 : 0; /* h or w may be huge */
    double ys = h > 1 ? (2.0 - 1e-7) / (double)(h - 1) : 0.0;
    double xs = w > 1 ? (2.0 - 1e-7) / (double)(w - 1) : 0.0;
    const void *tp = k_ptr(theta);
    void *yp = k_ptr(y);
    for (int64_t n = 0; n < b; n++)
        for (int64_t c = 0; c < 2; c++) {
            double m0 = k_loadf(tp, dt, n * 6 + c * 3), m1 = k_loadf(tp, dt, n * 6 + c * 3 + 1);
            double m2 = k_loadf(tp, dt, n * 6 + c * 3 + 2);
            for (int64_t i = 0; i < h; i++)
                for (int64_t j = 0; j < w; j++) {
                    double gy = -1.0 + (double)i * ys, gx = -1.0 + (double)j * xs;
                    k_storef(yp, dt, ((n * 2 + c) * h + i) * w + j, m0 * gx + m1 * gy + m2);
                }
        }
    return 0;
}

/* ==== image.grid_sample ====================================================================== */

enum { GS_NEAREST, GS_BILINEAR, GS_BICUBIC };
enum { GP_ZEROS, GP_BORDER, GP_REFLECTION };

/* TVM's _reflect_coordinates: reflect x into [corner, span + corner] (corner 0 and span size - 1
 * with align_corners, else -0.5 and size). A zero span (one pixel, align_corners) gives 0. */
static double gs_reflect(double x, int64_t size, bool align) {
    double corner = align ? 0.0 : -0.5;
    int64_t span = align ? size - 1 : size;
    if (x >= corner && x <= (double)span + corner) return x;
    if (span <= 0) return 0.0;
    double d = fabs(corner - x);
    if (!(d < 9.0e18)) return corner; /* inf or NaN */
    int64_t times = (int64_t)d / span;
    double extra = d - (double)(times * span);
    return times % 2 == 0 ? extra + corner : (double)span - extra + corner;
}

static double gs_clip(double x, int64_t size) {
    if (!(x > 0.0)) return 0.0; /* also NaN */
    return x < (double)(size - 1) ? x : (double)(size - 1);
}

typedef struct GridSpec {
    const DLTensor *x;
    rly_dtype dt;
    int64_t size[3]; /* input spatial extents, outermost first (D, H, W or H, W) */
    int64_t stride[3];
    uint32_t n_sp;
} GridSpec;

/* data at base + the spatial position p (in double, integral), 0 outside the input. */
static double gs_pixel(const GridSpec *g, int64_t base, const double *p) {
    int64_t at = base;
    for (uint32_t d = 0; d < g->n_sp; d++) {
        if (!(p[d] >= 0.0 && p[d] < (double)g->size[d])) return 0.0;
        at += (int64_t)p[d] * g->stride[d];
    }
    return k_loadf(k_ptr(g->x), g->dt, at);
}

/* PyTorch's cubic convolution weights with A = -0.75 for the taps floor - 1 .. floor + 2. */
static void gs_cubic(double t, double w[4]) {
    const double a = -0.75;
    double u = t + 1, v = 1 - t, z = 2 - t;
    w[0] = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a;
    w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
    w[2] = ((a + 2) * v - (a + 3)) * v * v + 1;
    w[3] = ((a * z - 5 * a) * z + 8 * a) * z - 4 * a;
}

static int grid_sample(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *grid = k_arg(kc, 1);
    static const char *const methods[] = {"nearest", "bilinear", "bicubic"};
    static const char *const pads[] = {"zeros", "border", "reflection"};
    int method = str_index(k_str(kc, "method"), methods, 3);
    int pad = str_index(k_str(kc, "padding_mode"), pads, 3);
    bool align = k_bool(kc, "align_corners");
    if (method < 0 || pad < 0) return k_error(kc, "unknown method or padding_mode");
    if ((x->ndim != 4 && x->ndim != 5) || grid->ndim != x->ndim)
        return k_error(kc, "data and grid must both be 4-D or 5-D");
    GridSpec g = {.x = x, .dt = k_dtype(x), .n_sp = (uint32_t)x->ndim - 2};
    const char *spatial = g.n_sp == 3 ? "DHW" : "HW";
    if (method == GS_BICUBIC && g.n_sp != 2)
        return k_error(kc, "method \"bicubic\" supports only 4-D data");
    uint32_t ndim = (uint32_t)x->ndim;
    KLayout l;
    int an, sp_axis[3];
    if (k_layout_attr(kc, "layout", ndim, &l) != 0 || k_layout_axes(kc, &l, "N", &an) != 0 ||
        k_layout_axes(kc, &l, spatial, sp_axis) != 0)
        return -1;
    int64_t shape[K_MAX_DIMS], in_stride[K_MAX_DIMS], g_stride[K_MAX_DIMS];
    memcpy(shape, x->shape, ndim * sizeof(int64_t));
    k_strides(ndim, x->shape, in_stride);
    k_strides((uint32_t)grid->ndim, grid->shape, g_stride);
    if (grid->shape[0] != x->shape[an] || grid->shape[1] != (int64_t)g.n_sp)
        return k_error(kc, "grid batch or coordinate count does not match the data");
    for (uint32_t d = 0; d < g.n_sp; d++) {
        g.size[d] = x->shape[sp_axis[d]];
        g.stride[d] = in_stride[sp_axis[d]];
        shape[sp_axis[d]] = grid->shape[2 + d];
    }
    DLTensor *y = k_out(kc, 0, g.dt, ndim, shape);
    if (y == NULL) return -1;
    int64_t n_out = k_numel(y);
    /* An empty input (its dims perhaps huge) makes every sample fall outside: all zeros. */
    if (n_out == 0 || k_numel(x) == 0) return 0;
    rly_dtype g_dt = k_dtype(grid);
    const void *gp = k_ptr(grid);
    void *yp = k_ptr(y);
    int64_t idx[K_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n_out; i++, k_next(idx, ndim, shape)) {
        /* the input offset of the other axes only: an output position on a spatial axis (a
         * grid extent) times an input stride need not fit in int64 */
        int64_t base = 0, gat = idx[an] * g_stride[0];
        for (uint32_t d = 0; d < ndim; d++) {
            bool on_sp = false;
            for (uint32_t e = 0; e < g.n_sp; e++)
                on_sp = on_sp || (int)d == sp_axis[e];
            if (!on_sp) base += idx[d] * in_stride[d];
        }
        double c[3]; /* source coordinates, outermost axis first */
        for (uint32_t d = 0; d < g.n_sp; d++)
            gat += idx[sp_axis[d]] * g_stride[2 + d];
        for (uint32_t d = 0; d < g.n_sp; d++) {
            /* grid channel 0 is x (the innermost axis), 1 is y, 2 is z */
            double v = k_loadf(gp, g_dt, gat + (int64_t)(g.n_sp - 1 - d) * g_stride[1]);
            double s = (double)g.size[d];
            c[d] = align ? (v + 1) * (s - 1) / 2 : -0.5 + (v + 1) * s / 2;
            if (method != GS_BICUBIC) {
                if (pad == GP_REFLECTION)
                    c[d] = gs_clip(gs_reflect(c[d], g.size[d], align), g.size[d]);
                else if (pad == GP_BORDER)
                    c[d] = gs_clip(c[d], g.size[d]);
            }
        }
        double acc = 0.0;
        if (method == GS_NEAREST) {
            double p[3];
            for (uint32_t d = 0; d < g.n_sp; d++)
                p[d] = nearbyint(c[d]);
            acc = gs_pixel(&g, base, p);
        } else if (method == GS_BILINEAR) {
            double f[3], t[3], p[3];
            for (uint32_t d = 0; d < g.n_sp; d++)
                f[d] = floor(c[d]), t[d] = c[d] - f[d];
            for (uint32_t corner = 0; corner < (1u << g.n_sp); corner++) {
                double w = 1.0;
                for (uint32_t d = 0; d < g.n_sp; d++) {
                    bool hi = (corner >> (g.n_sp - 1 - d)) & 1u;
                    p[d] = f[d] + (hi ? 1.0 : 0.0);
                    w *= hi ? t[d] : 1.0 - t[d];
                }
                double v = gs_pixel(&g, base, p);
                if (v != 0.0) acc += v * w; /* a 0 tap adds nothing, even with an inf weight */
            }
        } else { /* bicubic: the taps (not the coordinate) are clipped or reflected */
            double fy = floor(c[0]), fx = floor(c[1]), wy[4], wx[4];
            gs_cubic(c[0] - fy, wy);
            gs_cubic(c[1] - fx, wx);
            for (int a = 0; a < 4; a++) {
                double row = 0.0, p[2];
                for (int b = 0; b < 4; b++) {
                    p[0] = fy - 1 + a, p[1] = fx - 1 + b;
                    for (int d = 0; d < 2; d++) {
                        if (pad == GP_REFLECTION) p[d] = gs_reflect(p[d], g.size[d], align);
                        if (pad != GP_ZEROS) p[d] = trunc(gs_clip(p[d], g.size[d]));
                    }
                    row += gs_pixel(&g, base, p) * wx[b];
                }
                acc += row * wy[a];
            }
        }
        k_storef(yp, g.dt, i, acc);
    }
    return 0;
}

/* ==== image.dilation2d ======================================================================= */

/* Element i of (base, dt) converted to dt_out as a cast does, then held as a double (floats) or
 * as a wrapped integer bit pattern (integers): the operands of TVM's `a.astype(out) +
 * b.astype(out)`. */
static void conv_elem(rly_dtype dt_out, const void *base, rly_dtype dt, int64_t i, double *f,
                      uint64_t *u) {
    uint64_t buf = 0;
    k_convert(&buf, dt_out, 0, base, dt, i);
    if (sup_dtype_is_float(dt_out))
        *f = k_loadf(&buf, dt_out, 0);
    else
        *u = (uint64_t)k_loadi(&buf, dt_out, 0);
}

/* a > b for values of dt_out held as conv_elem does. */
static bool elem_gt(rly_dtype dt, double fa, uint64_t ua, double fb, uint64_t ub) {
    if (sup_dtype_is_float(dt)) return fa > fb || (fa == fa && !(fb == fb));
    if (sup_dtype_is_int(dt)) return (ua ^ (1ull << 63)) > (ub ^ (1ull << 63)); /* signed order */
    return ua > ub;
}

static int dilation2d(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *w = k_arg(kc, 1);
    if (x->ndim != 4 || w->ndim != 3) return k_error(kc, "data must be 4-D and weight 3-D");
    KLayout dl, kl;
    int xa[4], wa[3]; /* the N, C, H, W axes of the data; I, H, W of the weight */
    if (k_layout_attr(kc, "data_layout", 4, &dl) != 0 || k_layout_axes(kc, &dl, "NCHW", xa) != 0 ||
        k_layout_attr(kc, "kernel_layout", 3, &kl) != 0 || k_layout_axes(kc, &kl, "IHW", wa) != 0)
        return -1;
    const int64_t *st, *di, *pv;
    if (k_ints(kc, "strides", &st) != 2 || k_ints(kc, "dilations", &di) != 2 || st[0] < 1 ||
        st[1] < 1 || di[0] < 1 || di[1] < 1)
        return k_error(kc, "strides and dilations need 2 positive values");
    uint32_t n_pad = k_ints(kc, "padding", &pv);
    int64_t pt, pl;
    if (n_pad == 1)
        pt = pl = pv[0];
    else if (n_pad == 2 || n_pad == 4)
        pt = pv[0], pl = pv[1];
    else
        return k_error(kc, "padding needs 1, 2 or 4 values");
    for (uint32_t i = 0; i < n_pad; i++)
        if (pv[i] < 0 || pv[i] > SUP_DIM_MAX / 4) /* the relation's bound */
            return k_error(kc, "padding values must be in [0, 2^60], got %lld", (long long)pv[i]);
    int dn = xa[0], dc = xa[1], dh = xa[2], dw = xa[3], ki = wa[0], kh = wa[1], kw = wa[2];
    int64_t n = x->shape[dn], c = x->shape[dc], ih = x->shape[dh], iw = x->shape[dw];
    int64_t fh = w->shape[kh], fw = w->shape[kw];
    if (w->shape[ki] != c)
        return k_error(kc, "data has %lld channels but weight has %lld", (long long)c,
                       (long long)w->shape[ki]);
    int64_t pad_h = n_pad == 4 ? pv[0] + pv[2] : 2 * pt,
            pad_w = n_pad == 4 ? pv[1] + pv[3] : 2 * pl;
    /* sizes checked against the shape limit: every index below is a sum of two of them */
    int64_t span_h, span_w, in_h, in_w;
    if (fh < 1 || fw < 1 || !sup_dim_mul(fh - 1, di[0], &span_h) ||
        !sup_dim_mul(fw - 1, di[1], &span_w) || !sup_dim_add(ih, pad_h, &in_h) ||
        !sup_dim_add(iw, pad_w, &in_w) || span_h >= in_h || span_w >= in_w)
        return k_error(kc, "the dilated kernel is empty or exceeds the padded input");
    int64_t oh = (in_h - span_h - 1) / st[0] + 1;
    int64_t ow = (in_w - span_w - 1) / st[1] + 1;
    int64_t shape[4];
    shape[dn] = n, shape[dc] = c, shape[dh] = oh, shape[dw] = ow;
    rly_dtype x_dt = k_dtype(x), w_dt = k_dtype(w), out_dt;
    if (!k_dtype_attr(kc, "out_dtype", x_dt, &out_dt)) return -1;
    DLTensor *y = k_out(kc, 0, out_dt, 4, shape);
    if (y == NULL || k_numel(y) == 0) return y == NULL ? -1 : 0; /* n or c may be huge */
    int64_t xs[4], ws[3], ys[4];
    k_strides(4, x->shape, xs);
    k_strides(3, w->shape, ws);
    k_strides(4, shape, ys);
    bool is_float = sup_dtype_is_float(out_dt);
    uint64_t zero_bits = 0;
    double zero_f = 0.0;
    const void *xp = k_ptr(x), *wp = k_ptr(w);
    void *yp = k_ptr(y);
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    double best_f = 0.0;
                    uint64_t best_u = 0;
                    bool first = true;
                    for (int64_t ry = 0; ry < fh; ry++)
                        for (int64_t rx = 0; rx < fw; rx++) {
                            int64_t yy = oy * st[0] + ry * di[0] - pt;
                            int64_t xx = ox * st[1] + rx * di[1] - pl;
                            double af = zero_f, wf = 0.0;
                            uint64_t au = zero_bits, wu = 0;
                            if (yy >= 0 && yy < ih && xx >= 0 && xx < iw)
                                conv_elem(out_dt, xp, x_dt,
                                          b * xs[dn] + ch * xs[dc] + yy * xs[dh] + xx * xs[dw], &af,
                                          &au);
                            conv_elem(out_dt, wp, w_dt, ch * ws[ki] + ry * ws[kh] + rx * ws[kw],
                                      &wf, &wu);
                            double sf = af + wf;
                            uint64_t su = au + wu, buf = 0;
                            if (!is_float) { /* wrap the sum to the output dtype */
                                k_storeu(&buf, out_dt, 0, su);
                                su = (uint64_t)k_loadi(&buf, out_dt, 0);
                            }
                            if (first || elem_gt(out_dt, sf, su, best_f, best_u))
                                best_f = sf, best_u = su;
                            first = false;
                        }
                    int64_t at = b * ys[dn] + ch * ys[dc] + oy * ys[dh] + ox * ys[dw];
                    if (is_float)
                        k_storef(yp, out_dt, at, best_f);
                    else
                        k_storeu(yp, out_dt, at, best_u);
                }
    return 0;
}

/* ==== the table ============================================================================== */

const KernelDef kern_ref_image_vision[] = {
    {OP_ID_IMAGE_RESIZE1D, resize1d},
    {OP_ID_IMAGE_RESIZE2D, resize2d},
    {OP_ID_IMAGE_RESIZE3D, resize3d},
    {OP_ID_IMAGE_CROP_AND_RESIZE, crop_and_resize},
    {OP_ID_IMAGE_AFFINE_GRID, affine_grid},
    {OP_ID_IMAGE_GRID_SAMPLE, grid_sample},
    {OP_ID_IMAGE_DILATION2D, dilation2d},
    {OP_ID_VISION_ROI_ALIGN, kern_vision_roi_align},
    {OP_ID_VISION_ROI_POOL, kern_vision_roi_pool},
    {OP_ID_VISION_GET_VALID_COUNTS, kern_vision_get_valid_counts},
    {OP_ID_VISION_NON_MAX_SUPPRESSION, kern_vision_nms},
    {OP_ID_VISION_ALL_CLASS_NON_MAX_SUPPRESSION, kern_vision_all_class_nms},
    {OP_ID_VISION_REGULAR_NON_MAX_SUPPRESSION, kern_vision_regular_nms},
    {OP_ID_VISION_MULTIBOX_PRIOR, kern_vision_multibox_prior},
    {OP_ID_VISION_MULTIBOX_TRANSFORM_LOC, kern_vision_multibox_transform_loc},
    {OP_ID_VISION_PROPOSAL, kern_vision_proposal},
    {OP_ID_VISION_YOLO_REORG, kern_vision_yolo_reorg},
    {0, NULL},
};
