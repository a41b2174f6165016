/* conv_nd.c - reference kernels of the convolutions: nn.conv1d/2d/3d, their transposes, and
 * nn.conv2d_backward_weight (registered in conv_pool.c's table).
 *
 * Every convolution is computed in its reference layout (NCW/NCHW/NCDHW data, OI.../IO...
 * weights): operands in another layout (NHWC, HWIO, NCHW16c, ...) are gathered into reference
 * order first and the result is scattered into out_layout at the end. Internally all three
 * ranks are 3-D: a 1-D or 2-D convolution has leading spatial extents of 1, which changes
 * neither the memory order nor the result.
 *
 * The forward convolution with float32 data, weight and result is a GEMM per image and group,
 * weight (cout/g x cin/g*k) times the im2col columns of the input, packed block by block
 * straight from the input (nn_common.c). Other dtypes take the direct loops below in double or
 * uint64 (see nn_ref.h for the arithmetic classes); so do the transposed convolution and the
 * weight gradient, whose float32 form is computed in double and rounded once. */
#include "kernels/ref/nn_ref.h"

#include <stdlib.h>
#include <string.h>

#define SP 3 /* spatial axes of the internal form */

static const char *const data_refs[] = {"", "NCW", "NCHW", "NCDHW"};
static const char *const oi_refs[] = {"", "OIW", "OIHW", "OIDHW"};
static const char *const io_refs[] = {"", "IOW", "IOHW", "IODHW"};

/* A convolution's geometry; spatial arrays are (D, H, W), leading ones 1 (stride and dilation
 * 1, padding 0) for 1-D and 2-D convolutions. */
typedef struct Conv {
    uint32_t nsp; /* spatial axes of the operator (1, 2, 3) */
    int64_t batch, cin, cout, groups, cin_g, cout_g;
    int64_t in[SP], out[SP], k[SP];
    int64_t stride[SP], dil[SP], pad[SP], pad_after[SP];
} Conv;

static int64_t prod3(const int64_t *v) { return v[0] * v[1] * v[2]; }

/* strides, dilation, padding (1, nsp or 2 * nsp values: befores then afters) and groups. */
static int conv_attrs(KCall *kc, uint32_t nsp, Conv *c) {
    memset(c, 0, sizeof *c);
    c->nsp = nsp;
    for (int i = 0; i < SP; i++)
        c->in[i] = c->out[i] = c->k[i] = c->stride[i] = c->dil[i] = 1;
    if (kern_nn_spatial_attr(kc, "strides", nsp, 1, c->stride + SP - nsp) != 0 ||
        kern_nn_spatial_attr(kc, "dilation", nsp, 1, c->dil + SP - nsp) != 0 ||
        kern_nn_padding(kc, nsp, c->pad + SP - nsp, c->pad_after + SP - nsp) != 0)
        return -1;
    c->groups = k_int(kc, "groups");
    if (c->groups < 1 || c->groups > KNN_ATTR_LIMIT)
        return k_error(kc, "groups must be in [1, 2^31 - 1], got %lld", (long long)c->groups);
    return 0;
}

/* The weight's kernel extents (reference dims 2..) into c->k, checked against kernel_size. */
static int conv_kernel(KCall *kc, Conv *c, const KView *wv) {
    for (uint32_t i = 0; i < c->nsp; i++)
        c->k[SP - c->nsp + i] = wv->dim[2 + i];
    if (k_is_none(kc, "kernel_size")) return 0;
    const int64_t *ks;
    uint32_t n = k_ints(kc, "kernel_size", &ks);
    bool same = n == c->nsp;
    for (uint32_t i = 0; same && i < n; i++)
        same = ks[i] == c->k[SP - c->nsp + i];
    if (!same) return k_error(kc, "kernel_size does not match the weight's kernel extents");
    return 0;
}

/* The dilated window dil * (k - 1) + 1 and the padded extent in + pads of axis i, as sizes:
 * -1 with an error when the kernel is empty or either passes the shape limit (attributes come
 * from the caller and may be anything; checked sizes keep every later index computation, each
 * at most a sum of two of them, free of overflow). */
static int conv_window(KCall *kc, const Conv *c, int i, int64_t *window, int64_t *padded) {
    if (c->k[i] < 1) return k_error(kc, "the kernel is empty (extent %lld)", (long long)c->k[i]);
    if (!sup_dim_mul(c->dil[i], c->k[i] - 1, window) || !sup_dim_add(*window, 1, window) ||
        !sup_dim_add(c->in[i], c->pad[i], padded) || !sup_dim_add(*padded, c->pad_after[i], padded))
        return k_error(kc, "the dilated kernel or the padded input is too large (over 2^62)");
    return 0;
}

/* floor((in + pads - window) / stride) + 1 per axis into c->out. */
static int conv_slide(KCall *kc, Conv *c) {
    for (int i = 0; i < SP; i++) {
        int64_t window, padded;
        if (conv_window(kc, c, i, &window, &padded) != 0) return -1;
        if (window > padded)
            return k_error(kc, "kernel (%lld, dilated %lld) is larger than the padded input %lld",
                           (long long)c->k[i], (long long)window, (long long)padded);
        c->out[i] = (padded - window) / c->stride[i] + 1;
    }
    return 0;
}

static rly_dtype out_dtype_or(KCall *kc, rly_dtype dflt) {
    int64_t dt = k_int(kc, "out_dtype");
    return dt < 0 || dt >= RLY_DTYPE_COUNT ? dflt : (rly_dtype)dt;
}

/* ---- forward, float32: GEMM over im2col columns -------------------------------------------- */

typedef struct Im2col {
    const Conv *c;
    const float *x; /* this image's first input channel of the group */
} Im2col;

/* B(p, j) = input tap p = (channel, kd, kh, kw) of output position j = (od, oh, ow). */
static void pack_im2col(const void *ctx, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                        float *dst) {
    const Im2col *ic = ctx;
    const Conv *c = ic->c;
    int64_t ihw = c->in[1] * c->in[2], ip = c->in[0] * ihw;
    for (int64_t j0 = 0; j0 < nc; j0 += KNN_NR) {
        int64_t bd[KNN_NR], bh[KNN_NR], bw[KNN_NR];
        bool live[KNN_NR];
        for (int jj = 0; jj < KNN_NR; jj++) {
            int64_t j = n0 + j0 + jj;
            live[jj] = j0 + jj < nc;
            int64_t ow = j % c->out[2], t = j / c->out[2], oh = t % c->out[1], od = t / c->out[1];
            bd[jj] = od * c->stride[0] - c->pad[0];
            bh[jj] = oh * c->stride[1] - c->pad[1];
            bw[jj] = ow * c->stride[2] - c->pad[2];
        }
        float *panel = dst + (j0 / KNN_NR) * kc * KNN_NR;
        int64_t kw = k0 % c->k[2], t = k0 / c->k[2], kh = t % c->k[1];
        t /= c->k[1];
        int64_t kd = t % c->k[0], ch = t / c->k[0];
        for (int64_t p = 0; p < kc; p++) {
            const float *plane = ic->x + ch * ip;
            int64_t od = kd * c->dil[0], oh = kh * c->dil[1], ow = kw * c->dil[2];
            for (int jj = 0; jj < KNN_NR; jj++) {
                int64_t id = bd[jj] + od, ih = bh[jj] + oh, iw = bw[jj] + ow;
                bool in = live[jj] && (uint64_t)id < (uint64_t)c->in[0] &&
                          (uint64_t)ih < (uint64_t)c->in[1] && (uint64_t)iw < (uint64_t)c->in[2];
                panel[p * KNN_NR + jj] = in ? plane[id * ihw + ih * c->in[2] + iw] : 0.0f;
            }
            if (++kw == c->k[2]) {
                kw = 0;
                if (++kh == c->k[1]) {
                    kh = 0;
                    if (++kd == c->k[0]) kd = 0, ch++;
                }
            }
        }
    }
}

static int conv_fwd_f32(KCall *kc, const Conv *c, const float *x, const float *w, float *out) {
    int64_t ip = prod3(c->in), op = prod3(c->out), kk = c->cin_g * prod3(c->k);
    for (int64_t n = 0; n < c->batch; n++)
        for (int64_t g = 0; g < c->groups; g++) {
            Im2col ic = {.c = c, .x = x + (n * c->cin + g * c->cin_g) * ip};
            KGemm gm = {.m = c->cout_g,
                        .n = op,
                        .k = kk,
                        .a = w + g * c->cout_g * kk,
                        .a_rm = kk,
                        .a_rk = 1,
                        .pack_b = pack_im2col,
                        .b_ctx = &ic,
                        .c = out + (n * c->cout + g * c->cout_g) * op,
                        .ldc = op};
            if (kern_nn_gemm_f32(kc, &gm) != 0) return -1;
        }
    return 0;
}

/* ---- direct loops (double and uint64) ------------------------------------------------------ */

/* The output positions o in [0, n_out) whose tap o * s + off falls in [0, n_in): [*lo, *hi). */
static void tap_range(int64_t n_out, int64_t n_in, int64_t s, int64_t off, int64_t *lo,
                      int64_t *hi) {
    int64_t first = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t end = n_in - 1 - off < 0 ? 0 : (n_in - 1 - off) / s + 1;
    *lo = first;
    *hi = end < n_out ? end : n_out;
    if (*hi < *lo) *hi = *lo;
}

/* out[n][oc] += w[oc][icg] * x[n][g * cin_g + icg] over the window, out zeroed by the caller.
 * The float32 instance serves convolutions with fewer than 4 output channels per group
 * (depthwise), where the GEMM's 4-row tiles would mostly compute padding. */
#define DEFINE_CONV_FWD(NAME, T)                                                                   \
    static void NAME(const Conv *c, const T *x, const T *w, T *out) {                              \
        int64_t ip = prod3(c->in), op = prod3(c->out), kp = prod3(c->k);                           \
        for (int64_t n = 0; n < c->batch; n++)                                                     \
            for (int64_t oc = 0; oc < c->cout; oc++) {                                             \
                int64_t g = oc / c->cout_g;                                                        \
                T *o = out + (n * c->cout + oc) * op;                                              \
                for (int64_t icg = 0; icg < c->cin_g; icg++) {                                     \
                    const T *xi = x + (n * c->cin + g * c->cin_g + icg) * ip;                      \
                    const T *wk = w + (oc * c->cin_g + icg) * kp;                                  \
                    for (int64_t kd = 0; kd < c->k[0]; kd++)                                       \
                        for (int64_t kh = 0; kh < c->k[1]; kh++)                                   \
                            for (int64_t kw = 0; kw < c->k[2]; kw++) {                             \
                                T wv = wk[(kd * c->k[1] + kh) * c->k[2] + kw];                     \
                                int64_t off = kw * c->dil[2] - c->pad[2], lo, hi;                  \
                                tap_range(c->out[2], c->in[2], c->stride[2], off, &lo, &hi);       \
                                for (int64_t od = 0; od < c->out[0]; od++) {                       \
                                    int64_t id = od * c->stride[0] + kd * c->dil[0] - c->pad[0];   \
                                    if ((uint64_t)id >= (uint64_t)c->in[0]) continue;              \
                                    for (int64_t oh = 0; oh < c->out[1]; oh++) {                   \
                                        int64_t ih =                                               \
                                            oh * c->stride[1] + kh * c->dil[1] - c->pad[1];        \
                                        if ((uint64_t)ih >= (uint64_t)c->in[1]) continue;          \
                                        T *orow = o + (od * c->out[1] + oh) * c->out[2];           \
                                        const T *xrow = xi + (id * c->in[1] + ih) * c->in[2];      \
                                        for (int64_t ow = lo; ow < hi; ow++)                       \
                                            orow[ow] += wv * xrow[ow * c->stride[2] + off];        \
                                    }                                                              \
                                }                                                                  \
                            }                                                                      \
                }                                                                                  \
            }                                                                                      \
    }

DEFINE_CONV_FWD(conv_fwd_direct_f32, float)
DEFINE_CONV_FWD(conv_fwd_f64, double)
DEFINE_CONV_FWD(conv_fwd_u64, uint64_t)

/* Transposed: input position i and tap k reach output position i * stride + k * dil - pad.
 * Weight (cin, cout_g, k...); output channel g * cout_g + o. */
#define DEFINE_CONV_T(NAME, T)                                                                     \
    static void NAME(const Conv *c, const T *x, const T *w, T *out) {                              \
        int64_t ip = prod3(c->in), op = prod3(c->out), kp = prod3(c->k);                           \
        for (int64_t n = 0; n < c->batch; n++)                                                     \
            for (int64_t ic = 0; ic < c->cin; ic++) {                                              \
                int64_t g = ic / c->cin_g;                                                         \
                const T *xi = x + (n * c->cin + ic) * ip;                                          \
                for (int64_t ocg = 0; ocg < c->cout_g; ocg++) {                                    \
                    T *o = out + (n * c->cout + g * c->cout_g + ocg) * op;                         \
                    const T *wk = w + (ic * c->cout_g + ocg) * kp;                                 \
                    for (int64_t kd = 0; kd < c->k[0]; kd++)                                       \
                        for (int64_t kh = 0; kh < c->k[1]; kh++)                                   \
                            for (int64_t kw = 0; kw < c->k[2]; kw++) {                             \
                                T wv = wk[(kd * c->k[1] + kh) * c->k[2] + kw];                     \
                                for (int64_t id = 0; id < c->in[0]; id++) {                        \
                                    int64_t od = id * c->stride[0] + kd * c->dil[0] - c->pad[0];   \
                                    if ((uint64_t)od >= (uint64_t)c->out[0]) continue;             \
                                    for (int64_t ih = 0; ih < c->in[1]; ih++) {                    \
                                        int64_t oh =                                               \
                                            ih * c->stride[1] + kh * c->dil[1] - c->pad[1];        \
                                        if ((uint64_t)oh >= (uint64_t)c->out[1]) continue;         \
                                        T *orow = o + (od * c->out[1] + oh) * c->out[2];           \
                                        const T *xrow = xi + (id * c->in[1] + ih) * c->in[2];      \
                                        for (int64_t iw = 0; iw < c->in[2]; iw++) {                \
                                            int64_t ow =                                           \
                                                iw * c->stride[2] + kw * c->dil[2] - c->pad[2];    \
                                            if ((uint64_t)ow < (uint64_t)c->out[2])                \
                                                orow[ow] += wv * xrow[iw];                         \
                                        }                                                          \
                                    }                                                              \
                                }                                                                  \
                            }                                                                      \
                }                                                                                  \
            }                                                                                      \
    }

DEFINE_CONV_T(conv_t_f64, double)
DEFINE_CONV_T(conv_t_u64, uint64_t)

/* Weight gradient: dw[oc][icg][k] = sum over n and output positions of grad[n][oc][o] *
 * x[n][g * cin_g + icg][o * stride + k * dil - pad]. */
#define DEFINE_CONV_BW(NAME, T)                                                                    \
    static void NAME(const Conv *c, const T *grad, const T *x, T *dw) {                            \
        int64_t ip = prod3(c->in), op = prod3(c->out), kp = prod3(c->k);                           \
        for (int64_t n = 0; n < c->batch; n++)                                                     \
            for (int64_t oc = 0; oc < c->cout; oc++) {                                             \
                int64_t g = oc / c->cout_g;                                                        \
                const T *gr = grad + (n * c->cout + oc) * op;                                      \
                for (int64_t icg = 0; icg < c->cin_g; icg++) {                                     \
                    const T *xi = x + (n * c->cin + g * c->cin_g + icg) * ip;                      \
                    T *wo = dw + (oc * c->cin_g + icg) * kp;                                       \
                    for (int64_t kd = 0; kd < c->k[0]; kd++)                                       \
                        for (int64_t kh = 0; kh < c->k[1]; kh++)                                   \
                            for (int64_t kw = 0; kw < c->k[2]; kw++) {                             \
                                T acc = 0;                                                         \
                                for (int64_t od = 0; od < c->out[0]; od++) {                       \
                                    int64_t id = od * c->stride[0] + kd * c->dil[0] - c->pad[0];   \
                                    if ((uint64_t)id >= (uint64_t)c->in[0]) continue;              \
                                    for (int64_t oh = 0; oh < c->out[1]; oh++) {                   \
                                        int64_t ih =                                               \
                                            oh * c->stride[1] + kh * c->dil[1] - c->pad[1];        \
                                        if ((uint64_t)ih >= (uint64_t)c->in[1]) continue;          \
                                        const T *grow = gr + (od * c->out[1] + oh) * c->out[2];    \
                                        const T *xrow = xi + (id * c->in[1] + ih) * c->in[2];      \
                                        for (int64_t ow = 0; ow < c->out[2]; ow++) {               \
                                            int64_t iw =                                           \
                                                ow * c->stride[2] + kw * c->dil[2] - c->pad[2];    \
                                            if ((uint64_t)iw < (uint64_t)c->in[2])                 \
                                                acc += grow[ow] * xrow[iw];                        \
                                        }                                                          \
                                    }                                                              \
                                }                                                                  \
                                wo[(kd * c->k[1] + kh) * c->k[2] + kw] += acc;                     \
                            }                                                                      \
                }                                                                                  \
            }                                                                                      \
    }

DEFINE_CONV_BW(conv_bw_f64, double)
DEFINE_CONV_BW(conv_bw_u64, uint64_t)

/* ---- the kernels ------------------------------------------------------------------------------
 */

typedef enum ConvKind { CONV_FWD, CONV_T, CONV_BW } ConvKind;

/* Operands a, b (reference views av, bv) and result o (view ov) of a convolution: gathers, runs
 * the loops of `kind` and scatters. The float32 forward path reads compact operands in place
 * and writes a compact result in place. */
static int conv_run(KCall *kc, ConvKind kind, const Conv *c, const DLTensor *a, const KView *av,
                    const DLTensor *b, const KView *bv, DLTensor *o, const KView *ov) {
    rly_dtype odt = k_dtype(o);
    KNum num = kern_nn_num(odt, k_dtype(a), k_dtype(b));
    if (kind != CONV_FWD && num == KNUM_F32) num = KNUM_F64;
    size_t es = num == KNUM_F32 ? sizeof(float) : 8;
    int64_t na = k_numel(a), nb = k_numel(b), no = k_numel(o);
    void *as = NULL, *bs = NULL, *os = NULL;
    const void *ar = NULL, *br = NULL;
    void *orr = NULL;
    int rc = -1;
    if (num == KNUM_F32 && av->compact)
        ar = k_ptr(a);
    else if ((ar = as = kern_nn_scratch(kc, na, es)) == NULL)
        goto done;
    if (num == KNUM_F32 && bv->compact)
        br = k_ptr(b);
    else if ((br = bs = kern_nn_scratch(kc, nb, es)) == NULL)
        goto done;
    if (num == KNUM_F32 && ov->compact)
        orr = k_ptr(o);
    else if ((orr = os = kern_nn_scratch(kc, no, es)) == NULL)
        goto done;
    if (as) kern_nn_gather(a, av, num, odt, as);
    if (bs) kern_nn_gather(b, bv, num, odt, bs);
    if (num == KNUM_F32 && c->cout_g < 4) {
        memset(orr, 0, (size_t)no * sizeof(float));
        conv_fwd_direct_f32(c, ar, br, orr);
    } else if (num == KNUM_F32) {
        if (conv_fwd_f32(kc, c, ar, br, orr) != 0) goto done;
    } else if (kind == CONV_FWD) {
        if (num == KNUM_F64)
            conv_fwd_f64(c, ar, br, orr);
        else
            conv_fwd_u64(c, ar, br, orr);
    } else if (kind == CONV_T) {
        if (num == KNUM_F64)
            conv_t_f64(c, ar, br, orr);
        else
            conv_t_u64(c, ar, br, orr);
    } else {
        if (num == KNUM_F64)
            conv_bw_f64(c, ar, br, orr);
        else
            conv_bw_u64(c, ar, br, orr);
    }
    if (os) kern_nn_scatter(o, ov, num, os);
    rc = 0;
done: /* as, bs, os: k_scratch, released by the caller */
    return rc;
}

/* The attributes, data (argument 0, in data_layout) and weight (argument 1, in kernel_layout,
 * seen in reference order wref) of a forward or transposed convolution: their views, and c's
 * batch, input channels, input extents and kernel extents. */
static int conv_operands(KCall *kc, uint32_t nsp, const char *wref, Conv *c, KView *xv, KView *wv) {
    const DLTensor *x = k_arg(kc, 0), *w = k_arg(kc, 1);
    if (conv_attrs(kc, nsp, c) != 0 ||
        kern_nn_view(kc, (uint32_t)x->ndim, x->shape, k_str(kc, "data_layout"), data_refs[nsp],
                     "data", xv) != 0 ||
        kern_nn_view(kc, (uint32_t)w->ndim, w->shape, k_str(kc, "kernel_layout"), wref, "weight",
                     wv) != 0 ||
        conv_kernel(kc, c, wv) != 0)
        return -1;
    c->batch = xv->dim[0];
    c->cin = xv->dim[1];
    for (uint32_t i = 0; i < nsp; i++)
        c->in[SP - nsp + i] = xv->dim[2 + i];
    return 0;
}

/* The attribute channels, when given, must be the weight's output channels. */
static int conv_channels(KCall *kc, const Conv *c) {
    if (!k_is_none(kc, "channels") && k_int(kc, "channels") != c->cout)
        return k_error(kc, "channels is %lld but the weight gives %lld output channels",
                       (long long)k_int(kc, "channels"), (long long)c->cout);
    return 0;
}

/* The result of convolution `kind` of operands a and b, allocated and computed: (batch, cout,
 * out...) in out_layout, "" meaning data_layout; for the weight gradient (cout, cin_g, k...) in
 * out_layout, "" meaning OIHW. Its dtype is out_dtype, unset meaning a's. */
static int conv_result(KCall *kc, ConvKind kind, const Conv *c, const DLTensor *a, const KView *av,
                       const DLTensor *b, const KView *bv) {
    const char *ref = data_refs[c->nsp], *ol = k_str(kc, "out_layout");
    int64_t dims[2 + SP] = {c->batch, c->cout}, shape[K_MAX_DIMS];
    for (uint32_t i = 0; i < c->nsp; i++)
        dims[2 + i] = c->out[SP - c->nsp + i];
    if (kind == CONV_BW) {
        ref = "OIHW";
        dims[0] = c->cout, dims[1] = c->cin_g, dims[2] = c->k[1], dims[3] = c->k[2];
    }
    if (ol[0] == '\0') ol = kind == CONV_BW ? "OIHW" : k_str(kc, "data_layout");
    uint32_t ndim;
    KView ov = {0};
    DLTensor *o;
    int rc = -1;
    if (kern_nn_layout_shape(kc, ol, ref, dims, &ndim, shape) == 0 &&
        (o = k_out(kc, 0, out_dtype_or(kc, k_dtype(a)), ndim, shape)) != NULL &&
        kern_nn_view(kc, ndim, shape, ol, ref, "result", &ov) == 0)
        rc = k_numel(o) == 0 ? 0 /* nothing to compute; the dims may be huge */
                             : conv_run(kc, kind, c, a, av, b, bv, o, &ov);
    kern_nn_view_free(&ov);
    return rc;
}

/* nn.conv1d/2d/3d. Depthwise (TVM's rule: groups == input channels == the weight's O) reads the
 * weight (C, M, k...) as (C * M, 1, k...), the same memory, with output channel c * M + m. */
static int conv_forward(KCall *kc, uint32_t nsp) {
    KView xv = {0}, wv = {0};
    Conv c;
    int rc = -1;
    if (conv_operands(kc, nsp, oi_refs[nsp], &c, &xv, &wv) != 0) goto done;
    int64_t g = c.groups, w0 = wv.dim[0], w1 = wv.dim[1], w1g;
    if (g > 1 && c.cin == g && w0 == g) {
        c.cout = w0 * w1;
        c.cin_g = 1;
    } else {
        if (c.cin % g != 0 || !sup_dim_mul(w1, g, &w1g) || w1g != c.cin || w0 % g != 0) {
            k_error(
                kc,
                "data has %lld channels but weight (%lld, %lld, ...) expects %lld (groups=%lld)",
                (long long)c.cin, (long long)w0, (long long)w1, (long long)sup_dim_mul_sat(w1, g),
                (long long)g);
            goto done;
        }
        c.cout = w0;
        c.cin_g = w1;
    }
    c.cout_g = c.cout / g;
    if (conv_channels(kc, &c) != 0 || conv_slide(kc, &c) != 0) goto done;
    rc = conv_result(kc, CONV_FWD, &c, k_arg(kc, 0), &xv, k_arg(kc, 1), &wv);
done:
    kern_nn_view_free(&xv);
    kern_nn_view_free(&wv);
    return rc;
}

/* nn.conv1d/2d/3d_transpose: output extent stride * (in - 1) + window - pads + output_padding
 * (as the relation computes it, an empty input included). */
static int conv_transposed(KCall *kc, uint32_t nsp) {
    KView xv = {0}, wv = {0};
    Conv c;
    int64_t opad[SP] = {0, 0, 0};
    int rc = -1;
    if (conv_operands(kc, nsp, io_refs[nsp], &c, &xv, &wv) != 0 ||
        kern_nn_spatial_attr(kc, "output_padding", nsp, 0, opad + SP - nsp) != 0)
        goto done;
    int64_t g = c.groups;
    if (c.cin % g != 0 || wv.dim[0] != c.cin) {
        k_error(kc, "data has %lld channels but the weight expects %lld (groups=%lld)",
                (long long)c.cin, (long long)wv.dim[0], (long long)g);
        goto done;
    }
    c.cin_g = c.cin / g;
    c.cout_g = wv.dim[1];
    if (!sup_dim_mul(c.cout_g, g, &c.cout)) {
        k_error(kc, "groups %lld makes too many output channels", (long long)g);
        goto done;
    }
    if (conv_channels(kc, &c) != 0) goto done;
    for (int i = 0; i < SP; i++) {
        int64_t window, padded, v;
        if (conv_window(kc, &c, i, &window, &padded) != 0) goto done;
        int64_t pads = padded - c.in[i];
        if (opad[i] >= c.stride[i] && opad[i] >= c.dil[i]) {
            k_error(kc, "output_padding %lld must be smaller than the stride or the dilation",
                    (long long)opad[i]);
            goto done;
        }
        /* opad < stride or dil, both sizes: the sum below stays a sum of sizes */
        if (!sup_dim_mul(c.in[i] > 0 ? c.in[i] - 1 : 0, c.stride[i], &v) ||
            !sup_dim_add(v, window, &v) || !sup_dim_add(v, opad[i], &v)) {
            k_error(kc, "the transposed output is too large (over 2^62)");
            goto done;
        }
        v -= pads;
        if (c.in[i] == 0) v -= c.stride[i];
        if (v < 0) {
            k_error(kc, "padding %lld is larger than the transposed output", (long long)pads);
            goto done;
        }
        c.out[i] = v;
    }
    rc = conv_result(kc, CONV_T, &c, k_arg(kc, 0), &xv, k_arg(kc, 1), &wv);
done:
    kern_nn_view_free(&xv);
    kern_nn_view_free(&wv);
    return rc;
}

/* nn.conv2d_backward_weight(grad, data): TVM's Conv2DAttrs with the layouts repurposed (grad in
 * data_layout, data in kernel_layout, where the default "OIHW" means data_layout; the result in
 * out_layout, "" meaning OIHW). */
int kern_nn_conv2d_backward_weight(KCall *kc) {
    const DLTensor *gr = k_arg(kc, 0), *x = k_arg(kc, 1);
    const char *gl = k_str(kc, "data_layout"), *xl = k_str(kc, "kernel_layout");
    if (strcmp(xl, "OIHW") == 0) xl = gl;
    KView gv = {0}, xv = {0};
    Conv c;
    int rc = -1;
    if (conv_attrs(kc, 2, &c) != 0 ||
        kern_nn_view(kc, (uint32_t)gr->ndim, gr->shape, gl, "NCHW", "grad", &gv) != 0 ||
        kern_nn_view(kc, (uint32_t)x->ndim, x->shape, xl, "NCHW", "data", &xv) != 0)
        goto done;
    if (k_is_none(kc, "kernel_size")) {
        k_error(kc, "kernel_size is required");
        goto done;
    }
    const int64_t *ks;
    if (k_ints(kc, "kernel_size", &ks) != 2) {
        k_error(kc, "kernel_size must have 2 values");
        goto done;
    }
    c.k[1] = ks[0];
    c.k[2] = ks[1];
    c.batch = xv.dim[0];
    c.cin = xv.dim[1];
    c.in[1] = xv.dim[2];
    c.in[2] = xv.dim[3];
    c.cout = gv.dim[1];
    int64_t g = c.groups;
    if (conv_slide(kc, &c) != 0) goto done;
    if (gv.dim[0] != c.batch || gv.dim[2] != c.out[1] || gv.dim[3] != c.out[2]) {
        k_error(kc, "grad (%lld, %lld, %lld, %lld) does not match the convolution of data",
                (long long)gv.dim[0], (long long)gv.dim[1], (long long)gv.dim[2],
                (long long)gv.dim[3]);
        goto done;
    }
    if (c.cin % g != 0 || c.cout % g != 0) {
        k_error(kc, "channels (%lld in, %lld out) are not divisible by groups %lld",
                (long long)c.cin, (long long)c.cout, (long long)g);
        goto done;
    }
    c.cin_g = c.cin / g;
    c.cout_g = c.cout / g;
    if (g > 1 && c.cin == g && c.cout == g) {
        if (k_is_none(kc, "channels") || k_int(kc, "channels") / g != c.cin_g) {
            k_error(kc, "a depthwise weight gradient needs channels == groups");
            goto done;
        }
    }
    rc = conv_result(kc, CONV_BW, &c, gr, &gv, x, &xv);
done:
    kern_nn_view_free(&gv);
    kern_nn_view_free(&xv);
    return rc;
}

int kern_nn_conv1d(KCall *kc) { return conv_forward(kc, 1); }
int kern_nn_conv2d(KCall *kc) { return conv_forward(kc, 2); }
int kern_nn_conv3d(KCall *kc) { return conv_forward(kc, 3); }
int kern_nn_conv1d_transpose(KCall *kc) { return conv_transposed(kc, 1); }
int kern_nn_conv2d_transpose(KCall *kc) { return conv_transposed(kc, 2); }
int kern_nn_conv3d_transpose(KCall *kc) { return conv_transposed(kc, 3); }
