/* dyn.c - reference kernels of the dynamic-shape operators (see src/ops/op_dyn.c). Each reads the
 * values of its shape-like tensor arguments (any integer dtype), checks what the static twin's
 * relation would have checked on them, and then runs the static twin's own kernel with those
 * values as the attributes it expects (a KAttr list built here, the call's other attributes
 * passed through), so that dyn.reshape and reshape, dyn.tile and tile, ... cannot diverge.
 *
 * The checks matter beyond the messages: a static kernel trusts what its relation rejected
 * (two -1 in a newshape, duplicate squeeze axes, a scale that overflows a dim), and a few of
 * them multiply dims before allocating, so every result volume is bounded here first. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/kernel.h"

#define DYN_MAX_VALS (2 * K_MAX_DIMS) /* the most values a shape-like argument holds here */
#define DYN_MAX_ATTRS 24
#define DYN_MAX_LISTS 4
#define VOLUME_LIMIT SUP_DIM_MAX /* the most elements a result may have (support.h, "shapes") */
#define PAD_LIMIT (((int64_t)1 << 31) - 1) /* the largest pad width (as nn.pad's relation) */

/* ---- reading tensor arguments --------------------------------------------------------------- */

/* "[2, -1, -1]" into buf. */
static const char *ints_str(const int64_t *v, uint32_t n, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (uint32_t i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, i ? ", %lld" : "%lld", (long long)v[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

/* The values of integer tensor argument a (`what` in messages), flattened into v (room for cap);
 * their count into *n. -1 with an error for a non-integer dtype, more than cap values, or a
 * uint64 value above 2^63 - 1. */
static int load_ints(KCall *kc, uint32_t a, const char *what, uint32_t cap, int64_t *v,
                     uint32_t *n) {
    const DLTensor *t = k_arg(kc, a);
    rly_dtype dt = k_dtype(t);
    if (!sup_dtype_is_int(dt) && !sup_dtype_is_uint(dt))
        return k_error(kc, "%s must hold integers, got %s", what, sup_dtype_name(dt));
    int64_t m = k_numel(t);
    if (m > (int64_t)cap)
        return k_error(kc, "%s has %lld values; at most %u are supported", what, (long long)m, cap);
    for (int64_t i = 0; i < m; i++) {
        if (dt == RLY_DTYPE_U64) {
            uint64_t u = k_loadu(k_ptr(t), dt, i);
            if (u > (uint64_t)INT64_MAX)
                return k_error(kc, "%s[%lld] = %llu is too large", what, (long long)i,
                               (unsigned long long)u);
            v[i] = (int64_t)u;
        } else {
            v[i] = k_loadi(k_ptr(t), dt, i);
        }
    }
    *n = (uint32_t)m;
    return 0;
}

/* A 1-D integer argument (rank checked; the relation requires it too). */
static int load_vector(KCall *kc, uint32_t a, const char *what, int64_t *v, uint32_t *n) {
    const DLTensor *t = k_arg(kc, a);
    if (t->ndim != 1) {
        char s[256];
        return k_error(kc, "%s must be 1-D, got shape %s", what, k_shape_str(t, s, sizeof s));
    }
    return load_ints(kc, a, what, DYN_MAX_VALS, v, n);
}

/* An integer argument holding one value. */
static int load_scalar(KCall *kc, uint32_t a, const char *what, int64_t *v) {
    uint32_t n = 0;
    if (k_numel(k_arg(kc, a)) != 1) return k_error(kc, "%s must hold one value", what);
    return load_ints(kc, a, what, 1, v, &n);
}

/* A numeric argument holding one value, as a double. */
static int load_number(KCall *kc, uint32_t a, const char *what, double *v) {
    const DLTensor *t = k_arg(kc, a);
    if (k_numel(t) != 1) return k_error(kc, "%s must hold one value", what);
    *v = k_loadf(k_ptr(t), k_dtype(t), 0);
    return 0;
}

/* Multiply *acc by the non-zero factors of v[0..n): false once the product passes VOLUME_LIMIT
 * (zero factors are left out, so a later zero cannot hide an overflow of the static kernel's
 * running product). */
static bool volume_ok(int64_t *acc, const int64_t *v, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] == 0) continue;
        if (!sup_dim_mul(*acc, v[i], acc)) return false;
    }
    return true;
}

/* The data dims of tensor t and the values v together describe at most VOLUME_LIMIT elements. */
static int check_volume(KCall *kc, const DLTensor *t, const char *what, const int64_t *v,
                        uint32_t n) {
    int64_t acc = 1;
    char s[512];
    if (!volume_ok(&acc, t ? t->shape : NULL, t ? (uint32_t)t->ndim : 0) || !volume_ok(&acc, v, n))
        return k_error(kc, "%s %s makes a result of more than 2^62 elements", what,
                       ints_str(v, n, s, sizeof s));
    return 0;
}

/* ---- calling the static kernel -------------------------------------------------------------- */

/* The static twin's attribute list: the values read from tensors first, then the dyn call's own
 * attributes (the static kernel finds the first row of a name, so a row of the call that names a
 * lowered attribute cannot override the checked value). The lists live in the struct, so it must
 * outlive the call. */
typedef struct Lowered {
    KAttr attrs[DYN_MAX_ATTRS];
    uint32_t n_attrs;
    int64_t ints[DYN_MAX_LISTS][DYN_MAX_VALS];
    double floats[DYN_MAX_LISTS][DYN_MAX_VALS];
    uint32_t n_lists;
} Lowered;

/* A valid call has the rows of the operator's schema; one from a file may have any number. */
static int lower_init(KCall *kc, Lowered *l) {
    l->n_attrs = 0;
    l->n_lists = 0;
    if (kc->n_attrs > DYN_MAX_ATTRS - DYN_MAX_LISTS)
        return k_error(kc, "the call has %u attributes; at most %d are supported", kc->n_attrs,
                       DYN_MAX_ATTRS - DYN_MAX_LISTS);
    return 0;
}

static KAttr *lower_add(Lowered *l, const char *name, KAttrKind kind) {
    RLY_CHECK(l->n_attrs < DYN_MAX_LISTS, "dyn: too many lowered attributes");
    KAttr *a = &l->attrs[l->n_attrs++];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->kind = (uint8_t)kind;
    return a;
}

static void lower_ints(Lowered *l, const char *name, const int64_t *v, uint32_t n) {
    RLY_CHECK(l->n_lists < DYN_MAX_LISTS && n <= DYN_MAX_VALS, "dyn: too many lists");
    int64_t *ints = l->ints[l->n_lists];
    double *fl = l->floats[l->n_lists++];
    for (uint32_t i = 0; i < n; i++)
        ints[i] = v[i], fl[i] = (double)v[i];
    KAttr *a = lower_add(l, name, KA_INTS);
    a->n = n, a->ints = ints, a->floats = fl;
}

static void lower_int(Lowered *l, const char *name, int64_t v) {
    KAttr *a = lower_add(l, name, KA_INT);
    a->i = v, a->f = (double)v;
}

static void lower_float(Lowered *l, const char *name, double v) {
    KAttr *a = lower_add(l, name, KA_FLOAT);
    a->f = v, a->i = (int64_t)(fabs(v) < 9e18 ? v : 0);
}

/* Run the reference kernel of `op` on arguments args[0..n_args) of kc (by index) with l's
 * attributes. The outputs, the allocator, the error buffer and the scratch are kc's. */
static int call_static(KCall *kc, uint32_t op, const uint32_t *args, uint32_t n_args,
                       const Lowered *l) {
    KernelFn fn = kern_ref_lookup(op);
    RLY_CHECK(fn != NULL && n_args <= 4, "dyn: no reference kernel %s", sup_op_name(op));
    uint32_t start[4], len[4];
    uint8_t tuple[4];
    for (uint32_t i = 0; i < n_args; i++) {
        start[i] = kc->arg_start[args[i]];
        len[i] = kc->arg_len[args[i]];
        tuple[i] = kc->arg_tuple[args[i]];
    }
    Lowered all = *l; /* the lowered rows, then the call's (lower_init bounded their count) */
    if (kc->n_attrs > 0) memcpy(all.attrs + all.n_attrs, kc->attrs, kc->n_attrs * sizeof(KAttr));
    all.n_attrs += kc->n_attrs;
    KCall sub = *kc;
    sub.attrs = all.attrs;
    sub.n_attrs = all.n_attrs;
    sub.n_args = n_args;
    sub.arg_start = start;
    sub.arg_len = len;
    sub.arg_tuple = tuple;
    int rc = fn(&sub);
    /* an attribute problem of the static kernel is the call's */
    if (sub.bad_attr != NULL) k_attr_bad(kc, sub.bad_attr, sub.bad_attr_want);
    /* the scratch sub took is kc's, for kc's caller to release */
    kc->ws_used = sub.ws_used;
    kc->scratch_cur = sub.scratch_cur;
    kc->scratch_need = sub.scratch_need;
    kc->heap = sub.heap;
    return rc;
}

static const uint32_t ARG0[] = {0}, ARG02[] = {0, 2};

/* ---- dyn.reshape, dyn.broadcast_to, dyn.tile ------------------------------------------------ */

/* Sizes, 0 (copy the input dim at the same position, unless allowzero) and one -1 (inferred):
 * the result rank is the length of newshape, so reshape's -2, -3 and -4 have no place here. */
static int dyn_reshape(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t ns[DYN_MAX_VALS];
    uint32_t nn, n = (uint32_t)x->ndim;
    char s[512];
    if (load_vector(kc, 1, "newshape", ns, &nn) != 0) return -1;
    if (nn > K_MAX_DIMS)
        return k_error(kc, "newshape %s has %u entries; results have at most %d dims",
                       ints_str(ns, nn, s, sizeof s), nn, K_MAX_DIMS);
    bool allowzero = k_bool(kc, "allowzero");
    int64_t known[K_MAX_DIMS];
    uint32_t n_known = 0, n_infer = 0;
    for (uint32_t i = 0; i < nn; i++) {
        if (ns[i] == -1) {
            if (n_infer++)
                return k_error(kc, "newshape %s has two -1", ints_str(ns, nn, s, sizeof s));
        } else if (ns[i] < -1) {
            return k_error(kc,
                           "newshape %s: entry %u is %lld; the entries must be sizes, 0 (copy) "
                           "or -1 (infer)",
                           ints_str(ns, nn, s, sizeof s), i, (long long)ns[i]);
        } else if (ns[i] == 0 && !allowzero) {
            if (i >= n)
                return k_error(kc,
                               "newshape %s: entry %u is 0 (copy input dimension %u), but data "
                               "has rank %u",
                               ints_str(ns, nn, s, sizeof s), i, i, n);
            known[n_known++] = x->shape[i];
        } else {
            known[n_known++] = ns[i];
        }
    }
    if (check_volume(kc, NULL, "newshape", known, n_known) != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_ints(&l, "newshape", ns, nn);
    return call_static(kc, OP_ID_RESHAPE, ARG0, 1, &l);
}

/* Shape values and where data does not broadcast to them, for the message. */
static int dyn_broadcast_to(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t shape[DYN_MAX_VALS];
    uint32_t n, nx = (uint32_t)x->ndim;
    char s[512], xs[256];
    if (load_vector(kc, 1, "shape", shape, &n) != 0) return -1;
    for (uint32_t i = 0; i < n; i++)
        if (shape[i] < 0)
            return k_error(kc, "shape %s has a negative size", ints_str(shape, n, s, sizeof s));
    if (n > K_MAX_DIMS)
        return k_error(kc, "shape %s has %u entries; results have at most %d dims",
                       ints_str(shape, n, s, sizeof s), n, K_MAX_DIMS);
    if (n < nx)
        return k_error(kc, "cannot broadcast %s to shape %s: the target has lower rank",
                       k_shape_str(x, xs, sizeof xs), ints_str(shape, n, s, sizeof s));
    for (uint32_t i = 0; i < nx; i++) {
        int64_t d = x->shape[i], t = shape[n - nx + i];
        if (d != 1 && d != t)
            return k_error(kc, "cannot broadcast %s to shape %s (dimension %u: %lld vs %lld)",
                           k_shape_str(x, xs, sizeof xs), ints_str(shape, n, s, sizeof s),
                           n - nx + i, (long long)d, (long long)t);
    }
    if (check_volume(kc, NULL, "shape", shape, n) != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_ints(&l, "shape", shape, n);
    return call_static(kc, OP_ID_BROADCAST_TO, ARG0, 1, &l);
}

static int dyn_tile(KCall *kc) {
    int64_t reps[DYN_MAX_VALS];
    uint32_t n;
    char s[512];
    if (load_vector(kc, 1, "reps", reps, &n) != 0) return -1;
    for (uint32_t i = 0; i < n; i++)
        if (reps[i] < 0)
            return k_error(kc, "reps %s has a negative entry", ints_str(reps, n, s, sizeof s));
    if (n > K_MAX_DIMS)
        return k_error(kc, "reps %s has %u entries; results have at most %d dims",
                       ints_str(reps, n, s, sizeof s), n, K_MAX_DIMS);
    if (check_volume(kc, k_arg(kc, 0), "reps", reps, n) != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_ints(&l, "reps", reps, n);
    return call_static(kc, OP_ID_TILE, ARG0, 1, &l);
}

/* ---- dyn.strided_slice ---------------------------------------------------------------------- */

static int dyn_strided_slice(KCall *kc) {
    static const char *const names[] = {"begin", "end", "strides"};
    uint32_t rank = (uint32_t)k_arg(kc, 0)->ndim, n[3];
    int64_t v[3][DYN_MAX_VALS];
    for (uint32_t i = 0; i < 3; i++)
        if (load_vector(kc, i + 1, names[i], v[i], &n[i]) != 0) return -1;
    if (k_is_none(kc, "axes")) {
        for (uint32_t i = 0; i < 3; i++)
            if (n[i] > rank)
                return k_error(kc, "%s has %u entries but data has rank %u", names[i], n[i], rank);
    } else {
        const int64_t *axes;
        uint32_t nax = k_ints(kc, "axes", &axes);
        if (n[0] != nax || n[1] != nax || n[2] > nax)
            return k_error(kc,
                           "axes has %u entries, so begin and end need %u each (and strides at "
                           "most %u); got %u, %u and %u",
                           nax, nax, nax, n[0], n[1], n[2]);
    }
    for (uint32_t i = 0; i < n[2]; i++)
        if (v[2][i] == 0) {
            char s[512];
            return k_error(kc, "strides %s has a 0; strides must be nonzero",
                           ints_str(v[2], n[2], s, sizeof s));
        }
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    for (uint32_t i = 0; i < 3; i++)
        lower_ints(&l, names[i], v[i], n[i]);
    return call_static(kc, OP_ID_STRIDED_SLICE, ARG0, 1, &l);
}

/* ---- dyn.full, dyn.zeros, dyn.ones, dyn.one_hot --------------------------------------------- */

/* The shape held by argument a, checked: non-negative sizes, a bounded volume. */
static int load_shape(KCall *kc, uint32_t a, int64_t *shape, uint32_t *n) {
    char s[512];
    if (load_vector(kc, a, "shape", shape, n) != 0) return -1;
    if (*n > K_MAX_DIMS)
        return k_error(kc, "shape %s has %u entries; results have at most %d dims",
                       ints_str(shape, *n, s, sizeof s), *n, K_MAX_DIMS);
    for (uint32_t i = 0; i < *n; i++)
        if (shape[i] < 0)
            return k_error(kc, "shape %s has a negative size", ints_str(shape, *n, s, sizeof s));
    return check_volume(kc, NULL, "shape", shape, *n);
}

static int dyn_full(KCall *kc) {
    int64_t shape[DYN_MAX_VALS];
    uint32_t n;
    if (load_shape(kc, 1, shape, &n) != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_ints(&l, "shape", shape, n);
    return call_static(kc, OP_ID_FULL, ARG0, 1, &l);
}

static int dyn_init(KCall *kc, uint32_t op) {
    int64_t shape[DYN_MAX_VALS];
    uint32_t n;
    if (load_shape(kc, 0, shape, &n) != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_ints(&l, "shape", shape, n);
    return call_static(kc, op, ARG0, 0, &l);
}

static int dyn_zeros(KCall *kc) { return dyn_init(kc, OP_ID_ZEROS); }
static int dyn_ones(KCall *kc) { return dyn_init(kc, OP_ID_ONES); }

static int dyn_one_hot(KCall *kc) {
    int64_t depth;
    if (load_scalar(kc, 3, "depth", &depth) != 0) return -1;
    if (depth < 1) return k_error(kc, "depth must be positive, got %lld", (long long)depth);
    if (check_volume(kc, k_arg(kc, 0), "depth", &depth, 1) != 0) return -1;
    static const uint32_t args[] = {0, 1, 2};
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_int(&l, "depth", depth);
    return call_static(kc, OP_ID_ONE_HOT, args, 3, &l);
}

/* ---- dyn.topk ------------------------------------------------------------------------------- */

/* k < 1 selects the whole axis, as topk's attribute does. */
static int dyn_topk(KCall *kc) {
    int64_t k;
    if (load_scalar(kc, 1, "k", &k) != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_int(&l, "k", k);
    return call_static(kc, OP_ID_TOPK, ARG0, 1, &l);
}

/* ---- dyn.nn.pad ----------------------------------------------------------------------------- */

static int dyn_pad(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0), *pw = k_arg(kc, 1);
    uint32_t n = (uint32_t)x->ndim, m;
    char s[512], ps[256];
    if (pw->ndim != 2 || pw->shape[0] != (int64_t)n || pw->shape[1] != 2)
        return k_error(kc,
                       "pad_width has shape %s but data has rank %u: it needs one [before, after] "
                       "row per axis, shape (%u, 2)",
                       k_shape_str(pw, ps, sizeof ps), n, n);
    int64_t w[DYN_MAX_VALS], shape[K_MAX_DIMS];
    if (load_ints(kc, 1, "pad_width", DYN_MAX_VALS, w, &m) != 0) return -1;
    for (uint32_t i = 0; i < m; i++)
        if (w[i] > PAD_LIMIT || w[i] < -PAD_LIMIT)
            return k_error(kc, "pad_width %s has an entry beyond 2^31 - 1",
                           ints_str(w, m, s, sizeof s));
    for (uint32_t i = 0; i < n; i++) {
        shape[i] = x->shape[i] + w[2 * i] + w[2 * i + 1];
        if (shape[i] < 0)
            return k_error(kc,
                           "pad_width [%lld, %lld] on axis %u removes more than its %lld elements",
                           (long long)w[2 * i], (long long)w[2 * i + 1], i, (long long)x->shape[i]);
    }
    if (check_volume(kc, NULL, "padding to", shape, n) != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_ints(&l, "pad_width", w, m);
    return call_static(kc, OP_ID_NN_PAD, ARG02, 2, &l);
}

/* ---- dyn.squeeze, dyn.expand_dims ----------------------------------------------------------- */

static int dyn_squeeze(KCall *kc) {
    uint32_t rank = (uint32_t)k_arg(kc, 0)->ndim, n;
    int64_t axes[DYN_MAX_VALS];
    bool seen[K_MAX_DIMS] = {0};
    char s[512];
    if (load_vector(kc, 1, "axis", axes, &n) != 0) return -1;
    for (uint32_t i = 0; i < n; i++) {
        int64_t a;
        if (!k_axis(axes[i], rank, &a))
            return k_error(kc, "axis %s: %lld is out of range for a tensor of rank %u",
                           ints_str(axes, n, s, sizeof s), (long long)axes[i], rank);
        if (seen[a])
            return k_error(kc, "axis %s names axis %lld twice", ints_str(axes, n, s, sizeof s),
                           (long long)a);
        seen[a] = true;
    }
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_ints(&l, "axis", axes, n);
    return call_static(kc, OP_ID_SQUEEZE, ARG0, 1, &l);
}

static int dyn_expand_dims(KCall *kc) {
    int64_t axis;
    if (load_scalar(kc, 1, "axis", &axis) != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_int(&l, "axis", axis);
    return call_static(kc, OP_ID_EXPAND_DIMS, ARG0, 1, &l);
}

/* ---- dyn.image.resize2d, dyn.nn.upsampling ----------------------------------------------------
 */

/* The positions of H and W in the layout attribute for data x. */
static int image_axes(KCall *kc, const DLTensor *x, int *hw) {
    KLayout lay;
    if (k_layout_attr(kc, "layout", (uint32_t)x->ndim, &lay) != 0) return -1;
    return k_layout_axes(kc, &lay, "HW", hw);
}

/* x's shape with H and W replaced by hw_size, checked for size. */
static int image_volume(KCall *kc, const DLTensor *x, const int *hw, const int64_t *hw_size,
                        const char *what) {
    int64_t shape[K_MAX_DIMS];
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof(int64_t));
    shape[hw[0]] = hw_size[0];
    shape[hw[1]] = hw_size[1];
    int64_t acc = 1;
    if (!volume_ok(&acc, shape, (uint32_t)x->ndim))
        return k_error(kc, "%s makes a result of more than 2^62 elements", what);
    return 0;
}

static int dyn_resize2d(KCall *kc) {
    const DLTensor *x = k_arg(kc, 0);
    int64_t size[DYN_MAX_VALS];
    uint32_t n;
    int hw[2];
    char s[512];
    if (load_vector(kc, 1, "size", size, &n) != 0) return -1;
    if (n != 2)
        return k_error(kc, "size %s must have 2 values (height, width)",
                       ints_str(size, n, s, sizeof s));
    if (size[0] <= 0 || size[1] <= 0)
        return k_error(kc, "size %s must be positive", ints_str(size, n, s, sizeof s));
    if (image_axes(kc, x, hw) != 0 || image_volume(kc, x, hw, size, "size") != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_ints(&l, "size", size, n);
    return call_static(kc, OP_ID_IMAGE_RESIZE2D, ARG0, 1, &l);
}

/* The result extent is nearbyint(extent * scale), as nn.upsampling computes it. */
static int dyn_upsampling(KCall *kc) {
    static const char *const names[] = {"scale_h", "scale_w"};
    const DLTensor *x = k_arg(kc, 0);
    double scale[2];
    int64_t out[2];
    int hw[2];
    if (image_axes(kc, x, hw) != 0) return -1;
    for (uint32_t i = 0; i < 2; i++) {
        if (load_number(kc, i + 1, names[i], &scale[i]) != 0) return -1;
        if (!(scale[i] > 0) || !isfinite(scale[i]))
            return k_error(kc, "%s must be a positive number, got %g", names[i], scale[i]);
        double d = nearbyint((double)x->shape[hw[i]] * scale[i]);
        if (d > (double)VOLUME_LIMIT)
            return k_error(kc, "%s %g makes a dimension of %g", names[i], scale[i], d);
        out[i] = (int64_t)d;
    }
    if (image_volume(kc, x, hw, out, "the scale") != 0) return -1;
    Lowered l;
    if (lower_init(kc, &l) != 0) return -1;
    lower_float(&l, "scale_h", scale[0]);
    lower_float(&l, "scale_w", scale[1]);
    return call_static(kc, OP_ID_NN_UPSAMPLING, ARG0, 1, &l);
}

/* ---- the table ------------------------------------------------------------------------------ */

const KernelDef kern_ref_dyn[] = {
    {OP_ID_DYN_RESHAPE, dyn_reshape},
    {OP_ID_DYN_BROADCAST_TO, dyn_broadcast_to},
    {OP_ID_DYN_STRIDED_SLICE, dyn_strided_slice},
    {OP_ID_DYN_TILE, dyn_tile},
    {OP_ID_DYN_FULL, dyn_full},
    {OP_ID_DYN_ZEROS, dyn_zeros},
    {OP_ID_DYN_ONES, dyn_ones},
    {OP_ID_DYN_ONE_HOT, dyn_one_hot},
    {OP_ID_DYN_TOPK, dyn_topk},
    {OP_ID_DYN_NN_PAD, dyn_pad},
    {OP_ID_DYN_SQUEEZE, dyn_squeeze},
    {OP_ID_DYN_EXPAND_DIMS, dyn_expand_dims},
    {OP_ID_DYN_IMAGE_RESIZE2D, dyn_resize2d},
    {OP_ID_DYN_NN_UPSAMPLING, dyn_upsampling},
    {0, NULL},
};
