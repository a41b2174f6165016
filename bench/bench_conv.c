/* bench_conv.c - throughput of the reference nn.conv2d kernel, single-threaded (not a test).
 *
 *   bench_conv [-r REPS]          default REPS = 5
 *
 * Calls the kernel that kern_ref_lookup(OP_ID_NN_CONV2D) returns with a hand-built KCall (no IR,
 * no interpreter) on ResNet-like float32 layers and reports the best of REPS runs as seconds
 * and GFLOP/s (2 * N * K * C/groups * R * S * OH * OW flops). Each layer is also checked once
 * against a direct double-precision convolution (max relative error over the output). The
 * first layer, N=1 C=64 56x56 K=64 3x3 pad 1, is the headline: the run fails (exit 1) when it
 * is below 5 GFLOP/s in a release build, or when any check fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernel.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct Layer {
    const char *name;
    int64_t n, c, h, w, k, r, s, pad, stride, groups;
    bool nhwc; /* NHWC data and HWIO weight instead of NCHW / OIHW */
} Layer;

static const Layer layers[] = {
    {"resnet 3x3 64->64 56x56", 1, 64, 56, 56, 64, 3, 3, 1, 1, 1, false},
    {"resnet 1x1 64->256 56x56", 1, 64, 56, 56, 256, 1, 1, 0, 1, 1, false},
    {"resnet 3x3 128->128 28x28", 1, 128, 28, 28, 128, 3, 3, 1, 1, 1, false},
    {"resnet stem 7x7/2 3->64", 1, 3, 224, 224, 64, 7, 7, 3, 2, 1, false},
    {"3x3 64->64 56x56 NHWC/HWIO", 1, 64, 56, 56, 64, 3, 3, 1, 1, 1, true},
    {"depthwise 3x3 128 28x28", 1, 128, 28, 28, 128, 3, 3, 1, 1, 128, false},
};

/* The caller's allocator: a zeroed float tensor (the kernel frees nothing; main does). */
static int alloc_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    DLTensor *t = calloc(1, sizeof *t);
    int64_t *sh = calloc(ndim ? ndim : 1, sizeof *sh);
    memcpy(sh, shape, ndim * sizeof *sh);
    t->ndim = (int32_t)ndim;
    t->shape = sh;
    t->dtype = k_dl_dtype(dt);
    t->data = calloc((size_t)k_shape_numel(ndim, shape) + 1, sup_dtype_size(dt));
    kc->out[i] = t;
    return 0;
}

static void free_tensor(DLTensor *t) {
    if (t == NULL) return;
    free(t->data);
    free(t->shape);
    free(t);
}

static KAttr attr_ints(const char *name, uint32_t n, const int64_t *v, const double *f) {
    return (KAttr){.name = name, .kind = KA_INTS, .n = n, .ints = v, .floats = f};
}

/* One conv2d call on x and w; the result in *out (caller frees). Returns the kernel's status. */
static int run_conv(const Layer *l, const DLTensor *x, const DLTensor *w, DLTensor **out, char *err,
                    size_t err_cap) {
    int64_t strides[2] = {l->stride, l->stride}, pads[2] = {l->pad, l->pad}, ones[2] = {1, 1};
    double stridesf[2] = {(double)l->stride, (double)l->stride};
    double padsf[2] = {(double)l->pad, (double)l->pad}, onesf[2] = {1, 1};
    KAttr attrs[] = {
        attr_ints("strides", 2, strides, stridesf),
        attr_ints("padding", 2, pads, padsf),
        attr_ints("dilation", 2, ones, onesf),
        {.name = "groups", .kind = KA_INT, .i = l->groups, .f = (double)l->groups},
        {.name = "channels", .kind = KA_NONE},
        {.name = "kernel_size", .kind = KA_NONE},
        {.name = "data_layout", .kind = KA_STR, .s = l->nhwc ? "NHWC" : "NCHW"},
        {.name = "kernel_layout", .kind = KA_STR, .s = l->nhwc ? "HWIO" : "OIHW"},
        {.name = "out_layout", .kind = KA_STR, .s = ""},
        {.name = "out_dtype", .kind = KA_INT, .i = -1, .f = -1},
    };
    uint32_t arg_start[2] = {0, 1}, arg_len[2] = {1, 1};
    uint8_t arg_tuple[2] = {0, 0};
    const DLTensor *in[2] = {x, w};
    *out = NULL;
    KCall kc = {.op = "nn.conv2d",
                .attrs = attrs,
                .n_attrs = sizeof attrs / sizeof *attrs,
                .n_args = 2,
                .arg_start = arg_start,
                .arg_len = arg_len,
                .arg_tuple = arg_tuple,
                .in = in,
                .n_in = 2,
                .out = out,
                .n_out = 1,
                .alloc = alloc_out,
                .err = err,
                .err_cap = err_cap};
    return kern_ref_lookup(OP_ID_NN_CONV2D)(&kc);
}

static DLTensor make_tensor(int64_t *shape, float *data) {
    return (DLTensor){.data = data, .ndim = 4, .dtype = k_dl_dtype(RLY_DTYPE_F32), .shape = shape};
}

/* Max relative error of the kernel's NCHW/NHWC result against a direct double convolution. */
static double check(const Layer *l, const float *x, const float *w, const DLTensor *o) {
    int64_t oh = (l->h + 2 * l->pad - l->r) / l->stride + 1;
    int64_t ow = (l->w + 2 * l->pad - l->s) / l->stride + 1;
    int64_t cg = l->c / l->groups, kg = l->k / l->groups;
    const float *got = o->data;
    double worst = 0;
    for (int64_t n = 0; n < l->n; n++)
        for (int64_t k = 0; k < l->k; k++)
            for (int64_t y = 0; y < oh; y++)
                for (int64_t xo = 0; xo < ow; xo++) {
                    double acc = 0, mag = 0;
                    int64_t g = k / kg;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < l->r; r++)
                            for (int64_t s = 0; s < l->s; s++) {
                                int64_t iy = y * l->stride + r - l->pad;
                                int64_t ix = xo * l->stride + s - l->pad;
                                if (iy < 0 || iy >= l->h || ix < 0 || ix >= l->w) continue;
                                int64_t ci = g * cg + c;
                                double xv = l->nhwc ? x[((n * l->h + iy) * l->w + ix) * l->c + ci]
                                                    : x[((n * l->c + ci) * l->h + iy) * l->w + ix];
                                double wv = l->nhwc ? w[((r * l->s + s) * cg + c) * l->k + k]
                                                    : w[((k * cg + c) * l->r + r) * l->s + s];
                                acc += xv * wv;
                                mag += fabs(xv * wv);
                            }
                    double v = l->nhwc ? got[((n * oh + y) * ow + xo) * l->k + k]
                                       : got[((n * l->k + k) * oh + y) * ow + xo];
                    double e = fabs(v - acc) / (mag > 1e-30 ? mag : 1e-30);
                    if (e > worst) worst = e;
                }
    return worst;
}

int main(int argc, char **argv) {
    int reps = 5;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    if (reps < 1) reps = 1;
#ifndef NDEBUG
    printf("warning: not a release build; figures mean little\n");
#endif
    bool ok = true;
    double headline = 0;
    printf("%-30s %10s %10s %10s\n", "layer (float32, 1 thread)", "time (ms)", "GFLOP/s",
           "max rel err");
    for (size_t li = 0; li < sizeof layers / sizeof *layers; li++) {
        const Layer *l = &layers[li];
        int64_t cg = l->c / l->groups;
        int64_t xs[4] = {l->n, l->c, l->h, l->w}, ws[4] = {l->k, cg, l->r, l->s};
        if (l->nhwc) {
            int64_t xn[4] = {l->n, l->h, l->w, l->c}, wn[4] = {l->r, l->s, cg, l->k};
            memcpy(xs, xn, sizeof xs);
            memcpy(ws, wn, sizeof ws);
        }
        int64_t nx = l->n * l->c * l->h * l->w, nw = l->k * cg * l->r * l->s;
        float *xd = malloc((size_t)nx * sizeof(float)), *wd = malloc((size_t)nw * sizeof(float));
        unsigned seed = 12345u + (unsigned)li;
        for (int64_t i = 0; i < nx; i++) {
            seed = seed * 1103515245u + 12345u;
            xd[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
        }
        for (int64_t i = 0; i < nw; i++) {
            seed = seed * 1103515245u + 12345u;
            wd[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
        }
        DLTensor x = make_tensor(xs, xd), w = make_tensor(ws, wd);
        int64_t oh = (l->h + 2 * l->pad - l->r) / l->stride + 1;
        int64_t ow = (l->w + 2 * l->pad - l->s) / l->stride + 1;
        double flops = 2.0 * (double)(l->n * l->k * cg * l->r * l->s * oh * ow);
        double best = 1e30, err = -1;
        char msg[256] = "";
        for (int r = 0; r < reps; r++) {
            DLTensor *o = NULL;
            double t0 = now();
            int rc = run_conv(l, &x, &w, &o, msg, sizeof msg);
            double t = now() - t0;
            if (rc != 0) {
                printf("%-30s failed: %s\n", l->name, msg);
                ok = false;
                free_tensor(o);
                break;
            }
            if (t < best) best = t;
            if (r == 0) err = check(l, xd, wd, o);
            free_tensor(o);
        }
        if (err >= 0) {
            printf("%-30s %10.2f %10.2f %10.1e\n", l->name, best * 1e3, flops / best * 1e-9, err);
            if (err > 1e-5) ok = false;
            if (li == 0) headline = flops / best * 1e-9;
        }
        free(xd);
        free(wd);
    }
    printf("headline (first layer): %.2f GFLOP/s (required: >= 5)\n", headline);
#ifdef NDEBUG
    if (headline < 5) ok = false;
#endif
    if (!ok) printf("FAILED\n");
    return ok ? 0 : 1;
}
