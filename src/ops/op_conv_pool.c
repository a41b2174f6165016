/* op_conv_pool.c - convolutions (1-D/2-D/3-D, transposed, the weight gradient), pooling (windowed,
 * global, adaptive, and the 2-D pooling gradients), upsampling, padding and dilation, with TVM's
 * names, attributes and defaults.
 *
 * Layouts are TVM layout strings: each primal axis (upper case) once, optionally split into an
 * outer axis and an inner block ("NCHW16c": C = C_outer * 16). A convolution accepts any data,
 * kernel and output layout convertible to its reference layout (NCHW and OIHW for conv2d, IOHW
 * for conv2d_transpose, ...), as TVM's BijectiveLayout does: relations work in the reference
 * order and convert back at the end. Pools only need the spatial axes, unsplit.
 *
 * Spatial sizes, per axis (pads = pad_before + pad_after, window = dilation * (k - 1) + 1):
 *   convolution, pool:   floor((in + pads - window) / stride) + 1   (ceil with ceil_mode)
 *   transposed conv:     stride * (in - 1) + window - pads + output_padding
 * Any of these with an unknown operand is `?`. */
#include <math.h>

#include "ops/ops.h"

/* Largest integer attribute (strides, padding, sizes): TVM holds them as 32-bit. */
#define ATTR_LIMIT (((int64_t)1 << 31) - 1)
#define SP_MAX 3 /* spatial axes */

/* ---- checked arithmetic and small helpers ------------------------------------------------ */

static bool too_large(RelCall *rc) {
    rel_error(rc, "a result dimension is too large (over 2^62)");
    return false;
}

/* "5x5", "?x3" */
static const char *dims_x(RelCall *rc, uint32_t n, const int64_t *d) {
    StrBuf sb = {0};
    for (uint32_t i = 0; i < n; i++) {
        if (i) sb_putc(&sb, 'x');
        sb_puts(&sb, rel_dim_str(rc, d[i]));
    }
    const char *s = arena_strndup(&rc->ctx->arena, sb_cstr(&sb), sb.len);
    sb_free(&sb);
    return s;
}

/* Attribute `name` as one value per spatial axis (a single value is repeated), each in
 * [lo, ATTR_LIMIT]. */
static bool spatial_ints(RelCall *rc, const char *name, uint32_t nsp, int64_t lo, int64_t *out) {
    const int64_t *v;
    uint32_t n = attr_ints(rc, name, &v);
    if (n != 1 && n != nsp) {
        if (nsp == 1)
            rel_error(rc, "%s must have 1 value, got %u", name, n);
        else
            rel_error(rc, "%s must have 1 or %u values (one per spatial axis), got %u", name, nsp,
                      n);
        return false;
    }
    for (uint32_t i = 0; i < nsp; i++) {
        int64_t x = v[n == 1 ? 0 : i];
        if (x < lo) {
            rel_error(rc, "%s values must be %s, got %lld", name,
                      lo == 1 ? "positive" : "non-negative", (long long)x);
            return false;
        }
        if (x > ATTR_LIMIT) {
            rel_error(rc, "%s value %lld is too large", name, (long long)x);
            return false;
        }
        out[i] = x;
    }
    return true;
}

/* The padding attribute: 1 value (every side), nsp values (both sides of each axis), or 2*nsp
 * values (the befores of every axis, then the afters). Writes before + after per axis. */
static bool spatial_padding(RelCall *rc, uint32_t nsp, int64_t *total) {
    const int64_t *v;
    uint32_t n = attr_ints(rc, "padding", &v);
    if (n != 1 && n != nsp && n != 2 * nsp) {
        if (nsp == 1)
            rel_error(rc, "padding must have 1 or 2 values, got %u", n);
        else
            rel_error(rc, "padding must have 1, %u or %u values, got %u", nsp, 2 * nsp, n);
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] < 0) {
            rel_error(rc, "padding values must be non-negative, got %lld", (long long)v[i]);
            return false;
        }
        if (v[i] > ATTR_LIMIT) {
            rel_error(rc, "padding value %lld is too large", (long long)v[i]);
            return false;
        }
    }
    for (uint32_t i = 0; i < nsp; i++)
        total[i] = n == 2 * nsp ? v[i] + v[i + nsp] : 2 * v[n == 1 ? 0 : i];
    return true;
}

/* ---- layouts ------------------------------------------------------------------------------- */

static char lower(char c) { return (char)(c - 'A' + 'a'); }

/* The layout names exactly the primal axes of `ref` (TVM's BijectiveLayout to ref exists). */
static bool layout_convertible(RelCall *rc, const Layout *l, const char *ref) {
    if (sup_layout_convertible(l, ref)) return true;
    rel_error(rc, "%s \"%s\" is not convertible to %s (it must have exactly the axes %s)", l->attr,
              l->text, ref, ref);
    return false;
}

/* Parse attribute `attr` and check it is convertible to `ref`; "" means `dflt` when given. */
static bool layout_get(RelCall *rc, const char *attr, const char *ref, const char *dflt,
                       Layout *l) {
    const char *s = attr_str(rc, attr);
    if (s[0] == '\0' && dflt) s = dflt;
    return rel_layout_parse(rc, attr, s, l) && layout_convertible(rc, l, ref);
}

/* The axes `spatial` are present and not split (pools, upsampling). */
static bool layout_unsplit(RelCall *rc, const Layout *l, const char *spatial) {
    for (const char *a = spatial; *a; a++) {
        if (layout_find(l, *a) < 0) {
            rel_error(rc, "%s \"%s\" has no %c axis", l->attr, l->text, *a);
            return false;
        }
        if (layout_find(l, lower(*a)) >= 0) {
            rel_error(rc, "%s \"%s\" splits axis %c, which this operator resizes", l->attr, l->text,
                      *a);
            return false;
        }
    }
    return true;
}

/* A shape in layout l -> its dims in the order of `ref` (split axes multiplied back). */
static bool layout_to_ref(RelCall *rc, const Layout *l, const int64_t *shape, const char *ref,
                          int64_t *out) {
    for (uint32_t i = 0; ref[i]; i++) {
        int64_t d = shape[layout_find(l, ref[i])];
        int s = layout_find(l, lower(ref[i]));
        if (s >= 0 && !rel_dim_mul(rc, d, l->factor[s], &d)) return false;
        out[i] = d;
    }
    return true;
}

/* Dims in the order of `ref` -> a shape in layout l. A split axis must divide by its block. */
static bool layout_from_ref(RelCall *rc, const Layout *l, const char *ref, const int64_t *dims,
                            int64_t *out) {
    for (uint32_t i = 0; i < l->n; i++) {
        char a = l->axis[i];
        if (a >= 'a') {
            out[i] = l->factor[i];
            continue;
        }
        int64_t d = dims[strchr(ref, a) - ref];
        int s = layout_find(l, lower(a));
        if (s >= 0) {
            int64_t f = l->factor[s];
            if (dim_known(d) && d % f != 0) {
                rel_error(rc,
                          "the result's %c extent %lld does not divide into blocks of %lld "
                          "(%s \"%s\")",
                          a, (long long)d, (long long)f, l->attr, l->text);
                return false;
            }
            d = dim_floordiv(d, f);
        }
        out[i] = d;
    }
    return true;
}

/* ---- sliding windows ------------------------------------------------------------------------ */

/* window = dilation * (k - 1) + 1 per axis; k must be positive when known. */
static bool dilated(RelCall *rc, uint32_t nsp, const int64_t *k, const int64_t *dil,
                    int64_t *window) {
    for (uint32_t i = 0; i < nsp; i++) {
        if (!dim_known(k[i])) {
            window[i] = dil[i] == 1 ? k[i] : DIM_ANY;
            continue;
        }
        int64_t w;
        if (!rel_dim_mul(rc, k[i] - 1, dil[i], &w) || !rel_dim_add(rc, w, 1, &window[i]))
            return false;
    }
    return true;
}

/* floor((in + pads - window) / stride) + 1 per axis (ceil with ceil_mode); the window must fit
 * in the padded input. `what` names the window in the message ("kernel", "pool window"). */
static bool slide(RelCall *rc, uint32_t nsp, const int64_t *in, const int64_t *pads,
                  const int64_t *window, const int64_t *stride, bool ceil_mode, const char *what,
                  bool is_dilated, int64_t *out) {
    int64_t padded[SP_MAX];
    bool fits = true;
    for (uint32_t i = 0; i < nsp; i++) {
        if (!rel_dim_add(rc, in[i], pads[i], &padded[i])) return false;
        if (dim_known(padded[i]) && dim_known(window[i]) && window[i] > padded[i]) fits = false;
    }
    if (!fits) {
        rel_error(rc, "%s %s%s is larger than the padded input %s", what, dims_x(rc, nsp, window),
                  is_dilated ? " (dilated)" : "", dims_x(rc, nsp, padded));
        return false;
    }
    for (uint32_t i = 0; i < nsp; i++) {
        if (window[i] == 1 && stride[i] == 1)
            out[i] = padded[i];
        else if (dim_known(padded[i]) && dim_known(window[i]))
            out[i] = (padded[i] - window[i] + (ceil_mode ? stride[i] - 1 : 0)) / stride[i] + 1;
        else
            out[i] = DIM_ANY;
    }
    return true;
}

/* ---- convolutions -----------------------------------------------------------------------------
 */

static const char *const data_refs[] = {"", "NCW", "NCHW", "NCDHW"};
static const char *const oi_refs[] = {"", "OIW", "OIHW", "OIDHW"};
static const char *const io_refs[] = {"", "IOW", "IOHW", "IODHW"};

/* Everything a convolution reads from its attributes and data, in reference order. */
typedef struct ConvSetup {
    uint32_t nsp;
    int64_t groups;
    int64_t strides[SP_MAX], dilation[SP_MAX], pads[SP_MAX];
    bool has_channels, has_ksize, is_dilated;
    int64_t channels, ksize[SP_MAX];
    Layout out_layout;
} ConvSetup;

static bool conv_attrs(RelCall *rc, uint32_t nsp, ConvSetup *s) {
    s->nsp = nsp;
    s->groups = attr_int(rc, "groups");
    if (s->groups < 1 || s->groups > ATTR_LIMIT) {
        rel_error(rc, "groups must be positive, got %lld", (long long)s->groups);
        return false;
    }
    if (!spatial_ints(rc, "strides", nsp, 1, s->strides) ||
        !spatial_ints(rc, "dilation", nsp, 1, s->dilation) || !spatial_padding(rc, nsp, s->pads))
        return false;
    s->is_dilated = false;
    for (uint32_t i = 0; i < nsp; i++)
        if (s->dilation[i] != 1) s->is_dilated = true;
    s->has_channels = !attr_is_none(rc, "channels");
    if (s->has_channels) {
        s->channels = attr_int(rc, "channels");
        if (s->channels < 1 || s->channels > ATTR_LIMIT) {
            rel_error(rc, "channels must be positive, got %lld", (long long)s->channels);
            return false;
        }
    }
    s->has_ksize = !attr_is_none(rc, "kernel_size");
    if (s->has_ksize) {
        const int64_t *k;
        uint32_t n = attr_ints(rc, "kernel_size", &k);
        if (n != nsp) {
            rel_error(rc, "kernel_size must have %u value%s, got %u", nsp, nsp == 1 ? "" : "s", n);
            return false;
        }
        for (uint32_t i = 0; i < nsp; i++) {
            if (k[i] < 1 || k[i] > ATTR_LIMIT) {
                rel_error(rc, "kernel_size values must be positive, got %lld", (long long)k[i]);
                return false;
            }
            s->ksize[i] = k[i];
        }
    }
    return true;
}

/* The kernel's spatial dims from the weight, checked against kernel_size (which wins). */
static bool conv_kernel(RelCall *rc, const ConvSetup *s, const int64_t *w_ref, int64_t *k) {
    for (uint32_t i = 0; i < s->nsp; i++) {
        k[i] = w_ref[2 + i];
        if (k[i] == 0) {
            rel_error_arg(rc, 1, "weight has an empty kernel (%s)", dims_x(rc, s->nsp, w_ref + 2));
            return false;
        }
    }
    if (!s->has_ksize) return true;
    for (uint32_t i = 0; i < s->nsp; i++)
        if (!dim_compat(k[i], s->ksize[i])) {
            rel_error_arg(rc, 1, "weight has kernel %s but kernel_size is %s",
                          dims_x(rc, s->nsp, w_ref + 2), dims_x(rc, s->nsp, s->ksize));
            return false;
        }
    memcpy(k, s->ksize, s->nsp * sizeof(int64_t));
    return true;
}

static bool channels_divisible(RelCall *rc, int arg, int64_t c, int64_t groups, const char *what) {
    if (!dim_known(c) || c % groups == 0) return true;
    rel_error_arg(rc, arg, "%s %lld is not divisible by groups %lld", what, (long long)c,
                  (long long)groups);
    return false;
}

/* Output layout, shape and dtype from the reference-order result [N, C, spatial...]. */
static RelResult conv_finish(RelCall *rc, const ConvSetup *s, const char *dref,
                             const int64_t *o_ref, rly_dtype dflt) {
    int64_t *shape = rel_dims(rc, s->out_layout.n);
    if (!layout_from_ref(rc, &s->out_layout, dref, o_ref, shape)) return REL_ERROR;
    return rel_out_tensor(rc, attr_dtype_or(rc, "out_dtype", dflt), s->out_layout.n, shape);
}

/* nn.conv1d / conv2d / conv3d and their transposes. Weight: (O, I/groups, k...) in the OI
 * reference order; transposed: (I, O/groups, k...) in the IO order. */
static RelResult conv_rel(RelCall *rc, uint32_t nsp, bool transposed) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(weight, rc, 1);
    ConvSetup s;
    if (!conv_attrs(rc, nsp, &s)) return REL_ERROR;
    const char *dref = data_refs[nsp], *kref = transposed ? io_refs[nsp] : oi_refs[nsp];
    Layout dl, kl;
    if (!layout_get(rc, "data_layout", dref, NULL, &dl) ||
        !layout_get(rc, "kernel_layout", kref, NULL, &kl) ||
        !layout_get(rc, "out_layout", dref, attr_str(rc, "data_layout"), &s.out_layout))
        return REL_ERROR;
    if (!rel_layout_fits(rc, 0, data, &dl, "data") ||
        !rel_layout_fits(rc, 1, weight, &kl, "weight"))
        return REL_ERROR;
    int64_t d[2 + SP_MAX], w[2 + SP_MAX], k[SP_MAX], window[SP_MAX], o[2 + SP_MAX];
    if (!layout_to_ref(rc, &dl, data->shape, dref, d) ||
        !layout_to_ref(rc, &kl, weight->shape, kref, w) || !conv_kernel(rc, &s, w, k) ||
        !dilated(rc, nsp, k, s.dilation, window))
        return REL_ERROR;
    int64_t cin = d[1], g = s.groups, cout;
    if (!channels_divisible(rc, 0, cin, g, "input channels")) return REL_ERROR;
    o[0] = d[0];
    if (!transposed) {
        /* depthwise (TVM's rule): groups == input channels == the weight's O; the weight's I is
         * then the channel multiplier */
        bool depthwise = g > 1 && cin == g && w[0] == g;
        if (depthwise) {
            if (!rel_dim_mul(rc, w[0], w[1], &cout)) return REL_ERROR;
        } else {
            int64_t per_group = dim_floordiv(cin, g);
            if (!dim_compat(per_group, w[1])) {
                int64_t want;
                if (!rel_dim_mul(rc, w[1], g, &want)) return REL_ERROR;
                return rel_error_arg(rc, 1,
                                     "data has %s channels but weight expects %s (groups=%lld)",
                                     rel_dim_str(rc, cin), rel_dim_str(rc, want), (long long)g);
            }
            cout = w[0];
            if (!channels_divisible(rc, 1, cout, g, "the weight's output channels"))
                return REL_ERROR;
        }
        if (s.has_channels) {
            if (!dim_compat(s.channels, cout))
                return rel_error_arg(rc, 1,
                                     "channels is %lld but the weight gives %s output channels%s",
                                     (long long)s.channels, rel_dim_str(rc, cout),
                                     depthwise ? " (depthwise: input channels x multiplier)" : "");
            cout = s.channels;
        }
        if (!slide(rc, nsp, d + 2, s.pads, window, s.strides, false, "kernel", s.is_dilated, o + 2))
            return REL_ERROR;
    } else {
        if (!dim_compat(cin, w[0]))
            return rel_error_arg(rc, 1, "data has %s channels but weight expects %s",
                                 rel_dim_str(rc, cin), rel_dim_str(rc, w[0]));
        if (!rel_dim_mul(rc, w[1], g, &cout)) return REL_ERROR;
        if (s.has_channels) {
            if (s.channels % g != 0)
                return rel_error(rc, "channels %lld is not divisible by groups %lld",
                                 (long long)s.channels, (long long)g);
            if (!dim_compat(s.channels / g, w[1]))
                return rel_error_arg(rc, 1,
                                     "channels is %lld but the weight gives %s output channels "
                                     "(%s per group x groups=%lld)",
                                     (long long)s.channels, rel_dim_str(rc, cout),
                                     rel_dim_str(rc, w[1]), (long long)g);
            cout = s.channels;
        }
        int64_t opad[SP_MAX];
        if (!spatial_ints(rc, "output_padding", nsp, 0, opad)) return REL_ERROR;
        for (uint32_t i = 0; i < nsp; i++) {
            int64_t in = d[2 + i];
            if (opad[i] >= s.strides[i] && opad[i] >= s.dilation[i])
                return rel_error(rc,
                                 "output_padding %lld must be smaller than the stride %lld or the "
                                 "dilation %lld",
                                 (long long)opad[i], (long long)s.strides[i],
                                 (long long)s.dilation[i]);
            if (window[i] == 1 && s.strides[i] == 1 && s.pads[i] == 0 && opad[i] == 0) {
                o[2 + i] = in;
                continue;
            }
            if (!dim_known(in) || !dim_known(window[i])) {
                o[2 + i] = DIM_ANY;
                continue;
            }
            int64_t v;
            if (!rel_dim_mul(rc, in > 0 ? in - 1 : 0, s.strides[i], &v) ||
                !rel_dim_add(rc, v, window[i] + opad[i], &v))
                return REL_ERROR;
            if (in == 0) v -= s.strides[i];
            v -= s.pads[i];
            if (v < 0)
                return rel_error(rc,
                                 "padding %lld is larger than the transposed output (%lld before "
                                 "padding) on spatial axis %u",
                                 (long long)s.pads[i], (long long)(v + s.pads[i]), i);
            o[2 + i] = v;
        }
    }
    o[1] = cout;
    return conv_finish(rc, &s, dref, o, data->dtype);
}

static RelResult conv1d_rel(RelCall *rc) { return conv_rel(rc, 1, false); }
static RelResult conv2d_rel(RelCall *rc) { return conv_rel(rc, 2, false); }
static RelResult conv3d_rel(RelCall *rc) { return conv_rel(rc, 3, false); }
static RelResult conv1d_t_rel(RelCall *rc) { return conv_rel(rc, 1, true); }
static RelResult conv2d_t_rel(RelCall *rc) { return conv_rel(rc, 2, true); }
static RelResult conv3d_t_rel(RelCall *rc) { return conv_rel(rc, 3, true); }

/* nn.conv2d_backward_weight(grad, data): TVM reuses Conv2DAttrs with the layouts repurposed:
 * data_layout is the layout of grad, kernel_layout that of data, out_layout that of the result
 * (the weight). As a convenience, kernel_layout left at its default "OIHW" means data_layout and
 * out_layout left at "" means OIHW. */
static RelResult conv2d_bw_weight_rel(RelCall *rc) {
    REL_TENSOR(grad, rc, 0);
    REL_TENSOR(data, rc, 1);
    ConvSetup s;
    if (!conv_attrs(rc, 2, &s)) return REL_ERROR;
    if (!s.has_ksize) return rel_error(rc, "kernel_size is required");
    const char *in_text = attr_str(rc, "kernel_layout");
    if (strcmp(in_text, "OIHW") == 0) in_text = attr_str(rc, "data_layout");
    Layout gl, dl;
    if (!layout_get(rc, "data_layout", "NCHW", NULL, &gl) ||
        !(rel_layout_parse(rc, "kernel_layout", in_text, &dl) &&
          layout_convertible(rc, &dl, "NCHW")) ||
        !layout_get(rc, "out_layout", "OIHW", "OIHW", &s.out_layout))
        return REL_ERROR;
    if (!rel_layout_fits(rc, 0, grad, &gl, "grad") || !rel_layout_fits(rc, 1, data, &dl, "data"))
        return REL_ERROR;
    int64_t gd[4], d[4], window[2], o[2], w[4];
    if (!layout_to_ref(rc, &gl, grad->shape, "NCHW", gd) ||
        !layout_to_ref(rc, &dl, data->shape, "NCHW", d) ||
        !dilated(rc, 2, s.ksize, s.dilation, window) ||
        !slide(rc, 2, d + 2, s.pads, window, s.strides, false, "kernel", s.is_dilated, o))
        return REL_ERROR;
    if (!dim_compat(gd[0], d[0]))
        return rel_error(rc, "grad has batch %s but data has batch %s", rel_dim_str(rc, gd[0]),
                         rel_dim_str(rc, d[0]));
    if (!dim_compat(gd[2], o[0]) || !dim_compat(gd[3], o[1]))
        return rel_error_arg(rc, 0, "grad has spatial size %s but the convolution of data gives %s",
                             dims_x(rc, 2, gd + 2), dims_x(rc, 2, o));
    int64_t cin = d[1], cout = gd[1], g = s.groups;
    if (!channels_divisible(rc, 1, cin, g, "input channels") ||
        !channels_divisible(rc, 0, cout, g, "output channels"))
        return REL_ERROR;
    w[0] = cout;
    if (g > 1 && cin == g && cout == g) { /* depthwise, as TVM decides it */
        if (!s.has_channels)
            return rel_error(rc, "channels is required for a depthwise weight gradient");
        w[1] = s.channels / g;
    } else {
        w[1] = dim_floordiv(cin, g);
    }
    w[2] = s.ksize[0];
    w[3] = s.ksize[1];
    return conv_finish(rc, &s, "OIHW", w, grad->dtype);
}

/* ---- pooling ------------------------------------------------------------------------------------
 */

static const char *const spatial_of[] = {"", "W", "HW", "DHW"};

/* The layout attribute of a pool: has the spatial axes, unsplit, and fits data. */
static bool pool_layout(RelCall *rc, const TensorType *data, uint32_t nsp, Layout *l) {
    if (!rel_layout_parse(rc, "layout", attr_str(rc, "layout"), l) ||
        !layout_unsplit(rc, l, spatial_of[nsp]) || !rel_layout_fits(rc, 0, data, l, "data"))
        return false;
    const char *ol = attr_str(rc, "out_layout");
    Layout o;
    if (ol[0] && !rel_layout_parse(rc, "out_layout", ol, &o)) return false;
    return true;
}

/* Pooled shape of data (max/avg pool attributes) into out (data's rank). */
static bool pool_shape(RelCall *rc, const TensorType *data, uint32_t nsp, int64_t *out) {
    Layout l;
    int64_t ps[SP_MAX], st[SP_MAX], dil[SP_MAX], pads[SP_MAX], window[SP_MAX], in[SP_MAX],
        o[SP_MAX];
    if (!spatial_ints(rc, "pool_size", nsp, 1, ps) || !spatial_ints(rc, "strides", nsp, 1, st) ||
        !spatial_ints(rc, "dilation", nsp, 1, dil) || !spatial_padding(rc, nsp, pads) ||
        !pool_layout(rc, data, nsp, &l) || !dilated(rc, nsp, ps, dil, window))
        return false;
    bool is_dilated = false;
    for (uint32_t i = 0; i < nsp; i++) {
        in[i] = data->shape[layout_find(&l, spatial_of[nsp][i])];
        if (dil[i] != 1) is_dilated = true;
    }
    if (!slide(rc, nsp, in, pads, window, st, attr_bool(rc, "ceil_mode"), "pool window", is_dilated,
               o))
        return false;
    memcpy(out, data->shape, data->ndim * sizeof(int64_t));
    for (uint32_t i = 0; i < nsp; i++)
        out[layout_find(&l, spatial_of[nsp][i])] = o[i];
    return true;
}

static RelResult pool_rel(RelCall *rc, uint32_t nsp) {
    REL_TENSOR(data, rc, 0);
    int64_t *shape = rel_dims(rc, data->ndim);
    if (!pool_shape(rc, data, nsp, shape)) return REL_ERROR;
    return rel_out_tensor(rc, data->dtype, data->ndim, shape);
}

static RelResult pool1d_rel(RelCall *rc) { return pool_rel(rc, 1); }
static RelResult pool2d_rel(RelCall *rc) { return pool_rel(rc, 2); }
static RelResult pool3d_rel(RelCall *rc) { return pool_rel(rc, 3); }

/* nn.max_pool2d_grad / avg_pool2d_grad(out_grad, data): the result has data's type; out_grad
 * must have the pooled shape. */
static RelResult pool2d_grad_rel(RelCall *rc) {
    REL_TENSOR(out_grad, rc, 0);
    REL_TENSOR(data, rc, 1);
    /* pool_shape blames argument 0 for layout misfits; here data is argument 1 */
    int64_t *pooled = rel_dims(rc, data->ndim);
    if (!pool_shape(rc, data, 2, pooled)) {
        if (rc->err_arg == 0) rc->err_arg = 1;
        return REL_ERROR;
    }
    if (out_grad->dtype != data->dtype)
        return rel_error_arg(rc, 0, "out_grad is %s but data is %s",
                             sup_dtype_name(out_grad->dtype), sup_dtype_name(data->dtype));
    bool ok = out_grad->ndim == data->ndim;
    for (uint32_t i = 0; ok && i < data->ndim; i++)
        ok = dim_compat(out_grad->shape[i], pooled[i]);
    if (!ok)
        return rel_error_arg(rc, 0, "out_grad has shape %s but pooling data gives %s",
                             rel_shape_str(rc, out_grad->ndim, out_grad->shape),
                             rel_shape_str(rc, data->ndim, pooled));
    return rel_out(rc, (Type *)data);
}

static RelResult global_pool2d_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    Layout l;
    if (!pool_layout(rc, data, 2, &l)) return REL_ERROR;
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    shape[layout_find(&l, 'H')] = 1;
    shape[layout_find(&l, 'W')] = 1;
    return rel_out_tensor(rc, data->dtype, data->ndim, shape);
}

/* output_size: [] keeps the input's spatial size, one value applies to every spatial axis, nsp
 * values give each. */
static RelResult adaptive_pool_rel(RelCall *rc, uint32_t nsp) {
    REL_TENSOR(data, rc, 0);
    Layout l;
    if (!pool_layout(rc, data, nsp, &l)) return REL_ERROR;
    const int64_t *os;
    uint32_t n = attr_ints(rc, "output_size", &os);
    if (n > 1 && n != nsp) {
        if (nsp == 1) return rel_error(rc, "output_size must have 0 or 1 values, got %u", n);
        return rel_error(rc, "output_size must have 0, 1 or %u values, got %u", nsp, n);
    }
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    for (uint32_t i = 0; i < n; i++)
        if (os[i] < 1 || os[i] > ATTR_LIMIT)
            return rel_error(rc, "output_size values must be positive, got %lld", (long long)os[i]);
    for (uint32_t i = 0; n && i < nsp; i++)
        shape[layout_find(&l, spatial_of[nsp][i])] = os[n == 1 ? 0 : i];
    return rel_out_tensor(rc, data->dtype, data->ndim, shape);
}

static RelResult adaptive_pool1d_rel(RelCall *rc) { return adaptive_pool_rel(rc, 1); }
static RelResult adaptive_pool2d_rel(RelCall *rc) { return adaptive_pool_rel(rc, 2); }
static RelResult adaptive_pool3d_rel(RelCall *rc) { return adaptive_pool_rel(rc, 3); }

/* ---- upsampling ----------------------------------------------------------------------------- */

/* dim * scale rounded half to even (TVM rounds the product with nearbyint). */
static bool scaled(RelCall *rc, int64_t d, double scale, const char *name, int64_t *out) {
    if (!(scale > 0) || !isfinite(scale)) {
        rel_error(rc, "%s must be a positive number, got %g", name, scale);
        return false;
    }
    if (scale == 1.0 || !dim_known(d)) {
        *out = scale == 1.0 ? d : DIM_ANY;
        return true;
    }
    double v = nearbyint((double)d * scale);
    if (v > (double)DIM_LIMIT) return too_large(rc);
    *out = (int64_t)v;
    return true;
}

static RelResult upsampling_rel(RelCall *rc, uint32_t nsp) {
    static const char *const scale_names[] = {"scale_d", "scale_h", "scale_w"};
    REL_TENSOR(data, rc, 0);
    const char *ref = data_refs[nsp], *spatial = spatial_of[nsp];
    Layout l;
    if (!layout_get(rc, "layout", ref, NULL, &l) || !layout_unsplit(rc, &l, spatial) ||
        !rel_layout_fits(rc, 0, data, &l, "data"))
        return REL_ERROR;
    int64_t *shape = rel_dims(rc, data->ndim);
    memcpy(shape, data->shape, data->ndim * sizeof(int64_t));
    for (uint32_t i = 0; i < nsp; i++) {
        const char *name = scale_names[3 - nsp + i];
        int p = layout_find(&l, spatial[i]);
        if (!scaled(rc, data->shape[p], attr_float(rc, name), name, &shape[p])) return REL_ERROR;
    }
    return rel_out_tensor(rc, data->dtype, data->ndim, shape);
}

static RelResult upsampling2d_rel(RelCall *rc) { return upsampling_rel(rc, 2); }
static RelResult upsampling3d_rel(RelCall *rc) { return upsampling_rel(rc, 3); }

/* ---- padding and dilation -----------------------------------------------------------------------
 */

/* pad_width: one [before, after] pair of integers per axis of data. */
static bool pad_widths(RelCall *rc, const TensorType *data, int64_t *before, int64_t *after) {
    const AttrValue *v = attr_value(rc, "pad_width");
    if (v->kind != ATTR_LIST) {
        rel_error(rc, "pad_width must be a list of [before, after] pairs, one per axis");
        return false;
    }
    if (v->list.n != data->ndim) {
        rel_error(rc, "pad_width has %u pairs but data has rank %u (shape %s)", v->list.n,
                  data->ndim, rel_shape_str(rc, data->ndim, data->shape));
        return false;
    }
    for (uint32_t i = 0; i < v->list.n; i++) {
        const AttrValue *p = v->list.items[i];
        bool ok = p->kind == ATTR_LIST && p->list.n == 2;
        for (uint32_t j = 0; ok && j < 2; j++)
            ok = p->list.items[j]->kind == ATTR_INT || p->list.items[j]->kind == ATTR_BOOL;
        if (!ok) {
            rel_error(rc, "pad_width item %u must be a pair of integers [before, after]", i);
            return false;
        }
        before[i] = p->list.items[0]->kind == ATTR_BOOL ? p->list.items[0]->b : p->list.items[0]->i;
        after[i] = p->list.items[1]->kind == ATTR_BOOL ? p->list.items[1]->b : p->list.items[1]->i;
        if (before[i] > ATTR_LIMIT || after[i] > ATTR_LIMIT || before[i] < -ATTR_LIMIT ||
            after[i] < -ATTR_LIMIT) {
            rel_error(rc, "pad_width item %u is too large", i);
            return false;
        }
    }
    return true;
}

/* Shape after padding each axis by before + after (negative widths crop); no axis may end up
 * negative. */
static bool padded_shape(RelCall *rc, const TensorType *data, const int64_t *before,
                         const int64_t *after, int64_t *out) {
    for (uint32_t i = 0; i < data->ndim; i++) {
        int64_t d = data->shape[i], w = before[i] + after[i];
        if (!dim_known(d)) {
            out[i] = w == 0 ? d : DIM_ANY;
            continue;
        }
        if (d + w < 0) {
            rel_error(rc, "pad_width [%lld, %lld] on axis %u removes more than its %lld elements",
                      (long long)before[i], (long long)after[i], i, (long long)d);
            return false;
        }
        if (!rel_dim_add(rc, d, w > 0 ? w : 0, &out[i])) return false;
        if (w < 0) out[i] += w;
    }
    return true;
}

static RelResult pad_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(value, rc, 1);
    for (uint32_t i = 0; i < value->ndim; i++)
        if (dim_known(value->shape[i]) && value->shape[i] != 1)
            return rel_error_arg(rc, 1, "pad_value must be a scalar, got shape %s",
                                 rel_shape_str(rc, value->ndim, value->shape));
    int64_t *before = rel_dims(rc, data->ndim), *after = rel_dims(rc, data->ndim);
    if (!pad_widths(rc, data, before, after)) return REL_ERROR;
    const char *mode = attr_str(rc, "pad_mode");
    if (strcmp(mode, "constant") != 0)
        for (uint32_t i = 0; i < data->ndim; i++) {
            /* edge repeats the border (any width of a non-empty axis); reflect mirrors without
             * repeating it, so at most extent - 1 per side */
            bool reflect = strcmp(mode, "reflect") == 0;
            int64_t d = data->shape[i], most = reflect ? d - 1 : DIM_LIMIT;
            if (before[i] < 0 || after[i] < 0)
                return rel_error(rc,
                                 "pad_mode \"%s\" needs non-negative pad_width, got [%lld, "
                                 "%lld] on axis %u",
                                 mode, (long long)before[i], (long long)after[i], i);
            if (dim_known(d) && (before[i] > 0 || after[i] > 0) &&
                (d == 0 || (most < before[i] || most < after[i])))
                return rel_error(rc,
                                 "pad_mode \"%s\" cannot pad axis %u of extent %lld by [%lld, "
                                 "%lld]%s",
                                 mode, i, (long long)d, (long long)before[i], (long long)after[i],
                                 reflect ? " (at most extent - 1 per side)" : "");
        }
    int64_t *shape = rel_dims(rc, data->ndim);
    if (!padded_shape(rc, data, before, after, shape)) return REL_ERROR;
    return rel_out_tensor(rc, data->dtype, data->ndim, shape);
}

/* nn.mirror_pad: REFLECT repeats no edge (at most extent - 1 per side), SYMMETRIC repeats the
 * edge (at most extent per side). */
static RelResult mirror_pad_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int64_t *before = rel_dims(rc, data->ndim), *after = rel_dims(rc, data->ndim);
    if (!pad_widths(rc, data, before, after)) return REL_ERROR;
    bool reflect = strcmp(attr_str(rc, "mode"), "REFLECT") == 0;
    for (uint32_t i = 0; i < data->ndim; i++) {
        int64_t d = data->shape[i];
        if (before[i] < 0 || after[i] < 0)
            return rel_error(rc, "pad_width must be non-negative, got [%lld, %lld] on axis %u",
                             (long long)before[i], (long long)after[i], i);
        int64_t most = reflect ? d - 1 : d;
        if (dim_known(d) && (before[i] > most || after[i] > most))
            return rel_error(rc,
                             "mode %s can pad axis %u (extent %lld) by at most %lld per side, got "
                             "[%lld, %lld]",
                             reflect ? "REFLECT" : "SYMMETRIC", i, (long long)d,
                             (long long)(most > 0 ? most : 0), (long long)before[i],
                             (long long)after[i]);
    }
    int64_t *shape = rel_dims(rc, data->ndim);
    if (!padded_shape(rc, data, before, after, shape)) return REL_ERROR;
    return rel_out_tensor(rc, data->dtype, data->ndim, shape);
}

/* nn.dilate: (d - 1) * stride + 1 per axis (an empty axis stays empty). */
static RelResult dilate_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    const int64_t *st;
    uint32_t n = attr_ints(rc, "strides", &st);
    if (n != data->ndim)
        return rel_error(rc, "strides has %u values but data has rank %u (one stride per axis)", n,
                         data->ndim);
    int64_t *shape = rel_dims(rc, data->ndim);
    for (uint32_t i = 0; i < n; i++) {
        int64_t d = data->shape[i];
        if (st[i] < 1 || st[i] > ATTR_LIMIT)
            return rel_error(rc, "strides values must be positive, got %lld", (long long)st[i]);
        if (st[i] == 1 || d == 0 || d == 1)
            shape[i] = d;
        else if (!dim_known(d))
            shape[i] = DIM_ANY;
        else if (!rel_dim_mul(rc, d - 1, st[i], &shape[i]))
            return REL_ERROR;
        else
            shape[i] += 1;
    }
    return rel_out_tensor(rc, data->dtype, data->ndim, shape);
}

/* ---- the table ------------------------------------------------------------------------------ */

/* clang-format off */
#define END {NULL, 0, NULL, NULL}

/* nn.conv1d/2d/3d (TVM's Conv1DAttrs, Conv2DAttrs, Conv3DAttrs, in their order) */
#define CONV(STRIDES, PAD, DIL, DLAYOUT, KLAYOUT)                                                  \
    {"strides", AT_INTS, STRIDES, NULL}, {"padding", AT_INTS, PAD, NULL},                          \
        {"dilation", AT_INTS, DIL, NULL}, {"groups", AT_INT, "1", NULL},                           \
        {"channels", AT_OPT_INT, "None", NULL}, {"kernel_size", AT_OPT_INTS, "None", NULL},        \
        {"data_layout", AT_STR, DLAYOUT, NULL}, {"kernel_layout", AT_STR, KLAYOUT, NULL},          \
        {"out_layout", AT_STR, "\"\"", NULL}, {"out_dtype", AT_DTYPE, "\"\"", NULL}, END

static const AttrSpec conv1d_attrs[] = {CONV("[1]", "[0, 0]", "[1]", "\"NCW\"", "\"OIW\"")};
static const AttrSpec conv2d_attrs[] = {CONV("[1, 1]", "[0, 0]", "[1, 1]", "\"NCHW\"", "\"OIHW\"")};
static const AttrSpec conv3d_attrs[] = {
    CONV("[1, 1, 1]", "[0, 0, 0]", "[1, 1, 1]", "\"NCDHW\"", "\"OIDHW\"")};

/* the transposed convolutions (Conv*DTransposeAttrs) */
#define CONV_T(ONES, ZEROS, DLAYOUT, KLAYOUT)                                                      \
    {"channels", AT_OPT_INT, "None", NULL}, {"kernel_size", AT_OPT_INTS, "None", NULL},            \
        {"strides", AT_INTS, ONES, NULL}, {"output_padding", AT_INTS, ZEROS, NULL},                \
        {"padding", AT_INTS, ZEROS, NULL}, {"dilation", AT_INTS, ONES, NULL},                      \
        {"groups", AT_INT, "1", NULL}, {"data_layout", AT_STR, DLAYOUT, NULL},                     \
        {"kernel_layout", AT_STR, KLAYOUT, NULL}, {"out_layout", AT_STR, "\"\"", NULL},            \
        {"out_dtype", AT_DTYPE, "\"\"", NULL}, END

static const AttrSpec conv1d_t_attrs[] = {CONV_T("[1]", "[0]", "\"NCW\"", "\"IOW\"")};
static const AttrSpec conv2d_t_attrs[] = {CONV_T("[1, 1]", "[0, 0]", "\"NCHW\"", "\"IOHW\"")};
static const AttrSpec conv3d_t_attrs[] = {
    CONV_T("[1, 1, 1]", "[0, 0, 0]", "\"NCDHW\"", "\"IODHW\"")};

/* Max/AvgPool{1,2,3}DAttrs */
#define POOL(ONES, ZEROS, LAYOUT)                                                                  \
    {"pool_size", AT_INTS, NULL, NULL}, {"strides", AT_INTS, ONES, NULL},                          \
        {"dilation", AT_INTS, ONES, NULL}, {"padding", AT_INTS, ZEROS, NULL},                      \
        {"layout", AT_STR, LAYOUT, NULL}, {"out_layout", AT_STR, "\"\"", NULL},                    \
        {"ceil_mode", AT_BOOL, "False", NULL}
#define COUNT_PAD {"count_include_pad", AT_BOOL, "False", NULL}
/* clang-format on */
static const AttrSpec max_pool1d_attrs[] = {POOL("[1]", "[0]", "\"NCW\""), END};
static const AttrSpec max_pool2d_attrs[] = {POOL("[1, 1]", "[0, 0]", "\"NCHW\""), END};
static const AttrSpec max_pool3d_attrs[] = {POOL("[1, 1, 1]", "[0, 0, 0]", "\"NCDHW\""), END};
static const AttrSpec avg_pool1d_attrs[] = {POOL("[1]", "[0]", "\"NCW\""), COUNT_PAD, END};
static const AttrSpec avg_pool2d_attrs[] = {POOL("[1, 1]", "[0, 0]", "\"NCHW\""), COUNT_PAD, END};
static const AttrSpec avg_pool3d_attrs[] = {POOL("[1, 1, 1]", "[0, 0, 0]", "\"NCDHW\""), COUNT_PAD,
                                            END};

static const AttrSpec global_pool_attrs[] = {
    {"layout", AT_STR, "\"NCHW\"", NULL}, {"out_layout", AT_STR, "\"\"", NULL}, END};

#define ADAPTIVE(LAYOUT)                                                                           \
    {"output_size", AT_INTS, "[]", NULL}, {"layout", AT_STR, LAYOUT, NULL},                        \
        {"out_layout", AT_STR, "\"\"", NULL}, END
static const AttrSpec adaptive1d_attrs[] = {ADAPTIVE("\"NCW\"")};
static const AttrSpec adaptive2d_attrs[] = {ADAPTIVE("\"NCHW\"")};
static const AttrSpec adaptive3d_attrs[] = {ADAPTIVE("\"NCDHW\"")};

static const AttrSpec upsampling_attrs[] = {
    {"scale_h", AT_FLOAT, NULL, NULL},
    {"scale_w", AT_FLOAT, NULL, NULL},
    {"layout", AT_STR, "\"NCHW\"", NULL},
    {"method", AT_STR, "\"nearest_neighbor\"", "nearest_neighbor|bilinear|bicubic"},
    {"align_corners", AT_BOOL, "False", NULL},
    END,
};

static const AttrSpec upsampling3d_attrs[] = {
    {"scale_d", AT_FLOAT, NULL, NULL},
    {"scale_h", AT_FLOAT, NULL, NULL},
    {"scale_w", AT_FLOAT, NULL, NULL},
    {"layout", AT_STR, "\"NCDHW\"", NULL},
    {"method", AT_STR, "\"nearest_neighbor\"", "nearest_neighbor|trilinear"},
    {"coordinate_transformation_mode", AT_STR, "\"half_pixel\"",
     "half_pixel|align_corners|asymmetric"},
    END,
};

static const AttrSpec pad_attrs[] = {
    {"pad_width", AT_ANY, NULL, NULL},
    {"pad_mode", AT_STR, "\"constant\"", "constant|edge|reflect"},
    END,
};

static const AttrSpec mirror_pad_attrs[] = {
    {"mode", AT_STR, "\"SYMMETRIC\"", "SYMMETRIC|REFLECT"},
    {"pad_width", AT_ANY, NULL, NULL},
    END,
};

static const AttrSpec dilate_attrs[] = {
    {"strides", AT_INTS, "[1, 1]", NULL},
    {"dilation_value", AT_FLOAT, "0.0", NULL},
    END,
};

#define FUSE OP_OUT_EWISE_FUSABLE

OpDef ops_conv_pool_table[] = {
    OP_ROW(NN_CONV1D, 2, FUSE, conv1d_rel, conv1d_attrs, "data, weight",
           "1-D convolution; weight (out_channels, in_channels/groups, kw) in OIW"),
    OP_ROW(NN_CONV2D, 2, FUSE, conv2d_rel, conv2d_attrs, "data, weight",
           "2-D convolution; weight (out_channels, in_channels/groups, kh, kw) in OIHW"),
    OP_ROW(NN_CONV3D, 2, FUSE, conv3d_rel, conv3d_attrs, "data, weight",
           "3-D convolution; weight (out_channels, in_channels/groups, kd, kh, kw) in OIDHW"),
    OP_ROW(NN_CONV1D_TRANSPOSE, 2, FUSE, conv1d_t_rel, conv1d_t_attrs, "data, weight",
           "transposed 1-D convolution; weight (in_channels, out_channels/groups, kw) in IOW"),
    OP_ROW(NN_CONV2D_TRANSPOSE, 2, FUSE, conv2d_t_rel, conv2d_t_attrs, "data, weight",
           "transposed 2-D convolution; weight (in_channels, out_channels/groups, kh, kw) in IOHW"),
    OP_ROW(NN_CONV3D_TRANSPOSE, 2, FUSE, conv3d_t_rel, conv3d_t_attrs, "data, weight",
           "transposed 3-D convolution; weight (in_channels, out_channels/groups, kd, kh, kw)"),
    OP_ROW(NN_CONV2D_BACKWARD_WEIGHT, 2, FUSE, conv2d_bw_weight_rel, conv2d_attrs, "grad, data",
           "gradient of conv2d with respect to its weight (layouts: data_layout of grad, "
           "kernel_layout of data, out_layout of the result)"),
    OP_ROW(NN_MAX_POOL1D, 1, FUSE, pool1d_rel, max_pool1d_attrs, "data", "1-D max pooling"),
    OP_ROW(NN_MAX_POOL2D, 1, FUSE, pool2d_rel, max_pool2d_attrs, "data", "2-D max pooling"),
    OP_ROW(NN_MAX_POOL3D, 1, FUSE, pool3d_rel, max_pool3d_attrs, "data", "3-D max pooling"),
    OP_ROW(NN_AVG_POOL1D, 1, FUSE, pool1d_rel, avg_pool1d_attrs, "data", "1-D average pooling"),
    OP_ROW(NN_AVG_POOL2D, 1, FUSE, pool2d_rel, avg_pool2d_attrs, "data", "2-D average pooling"),
    OP_ROW(NN_AVG_POOL3D, 1, FUSE, pool3d_rel, avg_pool3d_attrs, "data", "3-D average pooling"),
    OP_ROW(NN_MAX_POOL2D_GRAD, 2, FUSE, pool2d_grad_rel, max_pool2d_attrs, "out_grad, data",
           "gradient of max_pool2d with respect to data"),
    OP_ROW(NN_AVG_POOL2D_GRAD, 2, FUSE, pool2d_grad_rel, avg_pool2d_attrs, "out_grad, data",
           "gradient of avg_pool2d with respect to data"),
    OP_ROW(NN_GLOBAL_AVG_POOL2D, 1, FUSE, global_pool2d_rel, global_pool_attrs, "data",
           "mean over H and W, which become 1"),
    OP_ROW(NN_GLOBAL_MAX_POOL2D, 1, FUSE, global_pool2d_rel, global_pool_attrs, "data",
           "max over H and W, which become 1"),
    OP_ROW(NN_ADAPTIVE_AVG_POOL1D, 1, FUSE, adaptive_pool1d_rel, adaptive1d_attrs, "data",
           "average pooling to a given output width"),
    OP_ROW(NN_ADAPTIVE_AVG_POOL2D, 1, FUSE, adaptive_pool2d_rel, adaptive2d_attrs, "data",
           "average pooling to a given output height and width"),
    OP_ROW(NN_ADAPTIVE_AVG_POOL3D, 1, FUSE, adaptive_pool3d_rel, adaptive3d_attrs, "data",
           "average pooling to a given output depth, height and width"),
    OP_ROW(NN_ADAPTIVE_MAX_POOL1D, 1, FUSE, adaptive_pool1d_rel, adaptive1d_attrs, "data",
           "max pooling to a given output width"),
    OP_ROW(NN_ADAPTIVE_MAX_POOL2D, 1, FUSE, adaptive_pool2d_rel, adaptive2d_attrs, "data",
           "max pooling to a given output height and width"),
    OP_ROW(NN_ADAPTIVE_MAX_POOL3D, 1, FUSE, adaptive_pool3d_rel, adaptive3d_attrs, "data",
           "max pooling to a given output depth, height and width"),
    OP_ROW(NN_UPSAMPLING, 1, OP_INJECTIVE, upsampling2d_rel, upsampling_attrs, "data",
           "resize H and W by scale_h and scale_w (sizes rounded to nearest)"),
    OP_ROW(NN_UPSAMPLING3D, 1, OP_INJECTIVE, upsampling3d_rel, upsampling3d_attrs, "data",
           "resize D, H and W by scale_d, scale_h and scale_w"),
    OP_ROW(NN_PAD, 2, OP_INJECTIVE, pad_rel, pad_attrs, "data, pad_value",
           "pad each axis by [before, after] (constant pad_value, edge or reflect)"),
    OP_ROW(NN_MIRROR_PAD, 1, OP_INJECTIVE, mirror_pad_rel, mirror_pad_attrs, "data",
           "pad each axis by [before, after] with its mirror image (SYMMETRIC or REFLECT)"),
    OP_ROW(NN_DILATE, 1, OP_INJECTIVE, dilate_rel, dilate_attrs, "data",
           "insert stride - 1 copies of dilation_value between elements along each axis"),
    {0},
};
