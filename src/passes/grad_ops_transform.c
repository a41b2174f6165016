/* grad_ops_transform.c - gradients of the shape, layout, dtype and indexing operators (the
 * operators of op_transform.c and op_index.c): reshapes and transposes map the adjoint back,
 * slices pad it back (nn.dilate for strides, nn.pad for the offsets), gathers scatter-add it
 * back (scatter_elements / scatter_nd with reduction "add", which have gradients themselves),
 * joins split it and splits join it. Where an adjoint needs a reshape or a constant index
 * tensor, the shapes involved must be static; the gradient refuses otherwise. */
#include <string.h>

#include "passes/grad.h"

#define X (b->g->args[0])
#define G (b->g->dout)
#define MAXR 32 /* ranks handled (kernels' K_MAX_DIMS) */

/* ---- reshapes -------------------------------------------------------------------------------- */

/* reshape, reshape_like, expand_dims, squeeze, nn.batch_flatten: the adjoint takes x's shape */
static bool g_reshape(GradBuilder *b, Expr **d) {
    d[0] = grad_op2(b, "reshape_like", G, X);
    return true;
}

static bool g_transpose(GradBuilder *b, Expr **d) {
    const int64_t *axes;
    uint32_t n = attr_ints(&b->rc, "axes", &axes), ndim = grad_arg_tensor(b, 0)->ndim;
    if (n == 0) { /* reversing the axes is its own inverse */
        d[0] = grad_op1(b, "transpose", G);
        return true;
    }
    int64_t inv[MAXR];
    for (uint32_t i = 0; i < n; i++)
        inv[axes[i] < 0 ? axes[i] + ndim : axes[i]] = i;
    d[0] = grad_op1a(b, "transpose", G, grad_attrs(b, 1, "axes", grad_ais(b, n, inv)));
    return true;
}

/* ---- joins and splits ------------------------------------------------------------------------ */

/* strided_slice(x, begin=[lo], end=[hi], axes=[axis]) */
static Expr *slice_axis(GradBuilder *b, Expr *x, int64_t axis, int64_t lo, int64_t hi) {
    return grad_op1a(b, "strided_slice", x,
                     grad_attrs(b, 3, "begin", grad_ais(b, 1, &lo), "end", grad_ais(b, 1, &hi),
                                "axes", grad_ais(b, 1, &axis)));
}

static bool g_concatenate(GradBuilder *b, Expr **d) {
    TupleType *tt = AS_TUPLE_TYPE(b->g->arg_types[0]);
    TensorType *f0 = AS_TENSOR_TYPE(tt->fields[0]);
    int64_t axis = attr_int(&b->rc, "axis");
    if (axis < 0) axis += f0->ndim;
    Expr **parts = arena_array(&b->ctx->arena, tt->n, sizeof *parts);
    int64_t at = 0;
    for (uint32_t i = 0; i < tt->n; i++) {
        int64_t len = AS_TENSOR_TYPE(tt->fields[i])->shape[axis];
        if (!dim_known(len))
            return grad_fail(b, "the gradient needs the sizes along axis %lld to be static",
                             (long long)axis);
        parts[i] = slice_axis(b, G, axis, at, at + len);
        at += len;
    }
    d[0] = ir_tuple_new(b->ctx, tt->n, parts, b->span);
    return true;
}

static bool g_stack(GradBuilder *b, Expr **d) {
    TupleType *tt = AS_TUPLE_TYPE(b->g->arg_types[0]);
    int64_t axis = attr_int(&b->rc, "axis");
    if (axis < 0) axis += grad_out_tensor(b)->ndim;
    grad_begin(b);
    Expr *parts = grad_let(b, grad_op1a(b, "split", G,
                                        grad_attrs(b, 2, "indices_or_sections", grad_ai(b, tt->n),
                                                   "axis", grad_ai(b, axis))));
    Expr **fields = arena_array(&b->ctx->arena, tt->n, sizeof *fields);
    for (uint32_t i = 0; i < tt->n; i++)
        fields[i] = grad_op1a(b, "squeeze", ir_tuple_get_item_new(b->ctx, parts, i, b->span),
                              grad_attrs(b, 1, "axis", grad_ais(b, 1, &axis)));
    d[0] = grad_end(b, ir_tuple_new(b->ctx, tt->n, fields, b->span));
    return true;
}

static bool g_split(GradBuilder *b, Expr **d) {
    TupleType *tt = AS_TUPLE_TYPE(b->g->out_type);
    Expr **fields = arena_array(&b->ctx->arena, tt->n, sizeof *fields);
    for (uint32_t i = 0; i < tt->n; i++)
        fields[i] = ir_tuple_get_item_new(b->ctx, G, i, b->span);
    d[0] = grad_op1a(b, "concatenate", ir_tuple_new(b->ctx, tt->n, fields, b->span),
                     grad_attrs(b, 1, "axis", grad_attr_same(b, "axis")));
    return true;
}

/* tile: output axis i holds reps[i] copies of x's (1-padded) axis i; sum the copies */
static bool g_tile(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0);
    if (!grad_need_static(b, x, "data")) return false;
    const int64_t *reps;
    uint32_t r = attr_ints(&b->rc, "reps", &reps), n = x->ndim, t = n > r ? n : r;
    int64_t shape[2 * MAXR], axes[MAXR];
    for (uint32_t i = 0; i < t; i++) {
        shape[2 * i] = i < t - r ? 1 : reps[i - (t - r)];
        shape[2 * i + 1] = i < t - n ? 1 : x->shape[i - (t - n)];
        axes[i] = 2 * i;
    }
    Expr *s = grad_sum(b, grad_reshape(b, G, 2 * t, shape), t, axes, false, false);
    d[0] = grad_op2(b, "reshape_like", s, X);
    return true;
}

/* repeat: output index j * repeats + r along axis comes from x's j; sum over r */
static bool g_repeat(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0);
    if (!grad_need_static(b, x, "data")) return false;
    int64_t axis = attr_int(&b->rc, "axis"), k = attr_int(&b->rc, "repeats"), shape[MAXR + 1];
    if (axis < 0) axis += x->ndim;
    for (uint32_t i = 0, o = 0; i < x->ndim; i++) {
        shape[o++] = x->shape[i];
        if ((int64_t)i == axis) shape[o++] = k;
    }
    int64_t sum_axis = axis + 1;
    d[0] = grad_sum(b, grad_reshape(b, G, x->ndim + 1, shape), 1, &sum_axis, false, false);
    return true;
}

static bool g_reverse(GradBuilder *b, Expr **d) {
    d[0] = grad_op1a(b, "reverse", G, grad_attrs(b, 1, "axis", grad_attr_same(b, "axis")));
    return true;
}

static bool g_reverse_sequence(GradBuilder *b, Expr **d) { /* its own inverse */
    d[0] = grad_op2a(b, "reverse_sequence", G, b->g->args[1],
                     grad_attrs(b, 2, "seq_axis", grad_attr_same(b, "seq_axis"), "batch_axis",
                                grad_attr_same(b, "batch_axis")));
    return true;
}

/* ---- broadcasting and collapsing ---------------------------------------------------------- */

static bool g_broadcast_to(GradBuilder *b, Expr **d) {
    d[0] = grad_op2(b, "collapse_sum_like", G, X);
    return true;
}

static bool g_collapse_sum(GradBuilder *b, Expr **d) {
    d[0] = grad_op2(b, "broadcast_to_like", G, X);
    return true;
}

static bool g_where(GradBuilder *b, Expr **d) {
    Expr *c = b->g->args[0];
    for (uint32_t i = 1; i < 3; i++) {
        grad_begin(b);
        Expr *gl = grad_let(b, G), *z = grad_op1(b, "zeros_like", gl);
        Expr *a[3] = {c, i == 1 ? gl : z, i == 1 ? z : gl};
        Expr *w = grad_call(b, "where", 3, a, NULL);
        d[i] = grad_end(b, grad_collapse(b, w, b->g->out_type, b->g->args[i], b->g->arg_types[i]));
    }
    return true;
}

/* ---- dtypes and layouts -----------------------------------------------------------------------
 */

static bool g_cast(GradBuilder *b, Expr **d) {
    d[0] = grad_op2(b, "cast_like", G, X);
    return true;
}

/* layout_transform back, when it is a bijection (no block padding a split axis) */
static bool g_layout_transform(GradBuilder *b, Expr **d) {
    const char *src_s = attr_str(&b->rc, "src_layout"), *dst_s = attr_str(&b->rc, "dst_layout");
    Layout src, dst;
    if (!rel_layout_parse(&b->rc, "src_layout", src_s, &src) ||
        !rel_layout_parse(&b->rc, "dst_layout", dst_s, &dst))
        return false;
    TensorType *x = grad_arg_tensor(b, 0);
    for (uint32_t i = 0; i < dst.n; i++) {
        if (!dst.factor[i]) continue;
        char primal = (char)(dst.axis[i] - 'a' + 'A');
        int64_t full = x->shape[layout_find(&src, primal)];
        int si = layout_find(&src, dst.axis[i]);
        if (si >= 0) full = dim_mul(full, src.factor[si]);
        if (!dim_known(full) || full % dst.factor[i] != 0)
            return grad_fail(b,
                             "dst_layout %s pads axis %c (extent %s) to blocks of %lld: the "
                             "gradient needs a static extent divisible by the block",
                             dst_s, primal, dim_known(full) ? "not divisible" : "unknown",
                             (long long)dst.factor[i]);
    }
    d[0] = grad_op1a(
        b, "layout_transform", G,
        grad_attrs(b, 2, "src_layout", grad_as(b, dst_s), "dst_layout", grad_as(b, src_s)));
    return true;
}

/* ---- slices ------------------------------------------------------------------------------------
 */

/* Scatter the adjoint h of a strided selection back into a zero tensor of x's static shape.
 * Axis i selects n[i] elements first[i], first[i] + step[i], ...: reverse the axes stepping
 * down, dilate by the step, pad to x's extent. Every piece has a gradient (reverse, nn.dilate,
 * nn.pad), so the result can be differentiated again. */
static Expr *unslice(GradBuilder *b, Expr *h, const TensorType *x, const int64_t *first,
                     const int64_t *step, const int64_t *n) {
    uint32_t nd = x->ndim;
    int64_t st[MAXR], pads[2 * MAXR];
    bool dilate = false;
    for (uint32_t i = 0; i < nd; i++) {
        if (n[i] == 0) return grad_op1(b, "zeros_like", X);
        int64_t mag = step[i] < 0 ? -step[i] : step[i];
        int64_t lo = step[i] < 0 ? first[i] - (n[i] - 1) * mag : first[i];
        if (step[i] < 0 && n[i] > 1)
            h = grad_op1a(b, "reverse", h, grad_attrs(b, 1, "axis", grad_ai(b, i)));
        st[i] = n[i] > 1 ? mag : 1;
        dilate = dilate || st[i] > 1;
        pads[2 * i] = lo;
        pads[2 * i + 1] = x->shape[i] - (lo + (n[i] - 1) * st[i] + 1);
    }
    if (dilate) h = grad_op1a(b, "nn.dilate", h, grad_attrs(b, 1, "strides", grad_ais(b, nd, st)));
    AttrValue *pairs[MAXR];
    for (uint32_t i = 0; i < nd; i++)
        pairs[i] = grad_ais(b, 2, pads + 2 * i);
    const Attrs *pa = grad_attrs(b, 1, "pad_width", ir_attr_list(b->ctx, nd, pairs, b->span));
    return grad_op2a(b, "nn.pad", h, grad_scalar(b, x->dtype, 0), pa);
}

static int64_t ceil_div(int64_t a, int64_t m) { return (a + m - 1) / m; }

/* strided_slice: first index, step and count per axis, as the relation computes the extents */
static bool g_strided_slice(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0);
    if (!grad_need_static(b, x, "data")) return false;
    uint32_t nd = x->ndim, nax;
    const int64_t *bg, *en, *sv, *given;
    uint32_t nb = attr_ints(&b->rc, "begin", &bg), ne = attr_ints(&b->rc, "end", &en),
             ns = attr_ints(&b->rc, "strides", &sv);
    bool size_mode = strcmp(attr_str(&b->rc, "slice_mode"), "size") == 0;
    int64_t axes[MAXR], first[MAXR], step[MAXR], n[MAXR];
    if (attr_is_none(&b->rc, "axes")) {
        nax = nd;
        for (uint32_t i = 0; i < nd; i++)
            axes[i] = i;
    } else {
        nax = attr_ints(&b->rc, "axes", &given);
        for (uint32_t i = 0; i < nax; i++)
            axes[i] = given[i] < 0 ? given[i] + nd : given[i];
    }
    for (uint32_t i = 0; i < nd; i++)
        first[i] = 0, step[i] = 1, n[i] = x->shape[i];
    for (uint32_t i = 0; i < nax; i++) {
        int64_t a = axes[i], dd = x->shape[a];
        bool has_b = i < nb, has_e = i < ne;
        int64_t bi = has_b ? bg[i] : 0, ei = has_e ? en[i] : 0;
        int64_t st = size_mode || i >= ns ? 1 : sv[i];
        if (size_mode) {
            if (bi < 0) bi += dd;
            bi = bi < 0 ? 0 : bi > dd ? dd : bi;
            first[a] = bi;
            n[a] = !has_e || ei < 0 || ei > dd - bi ? dd - bi : ei;
        } else if (st > 0) {
            bi = has_b ? bi : 0;
            ei = has_e ? ei : dd;
            if (bi < 0) bi += dd;
            if (ei < 0) ei += dd;
            bi = bi < 0 ? 0 : bi > dd ? dd : bi;
            ei = ei < 0 ? 0 : ei > dd ? dd : ei;
            first[a] = bi;
            step[a] = st;
            n[a] = ei > bi ? ceil_div(ei - bi, st) : 0;
        } else {
            bi = has_b ? bi : dd - 1;
            if (bi < 0) bi += dd;
            bi = bi < -1 ? -1 : bi > dd - 1 ? dd - 1 : bi;
            if (has_e) {
                if (ei < 0) ei += dd;
                ei = ei < -1 ? -1 : ei > dd - 1 ? dd - 1 : ei;
            } else {
                ei = -1;
            }
            first[a] = bi;
            step[a] = st;
            n[a] = bi > ei ? ceil_div(bi - ei, -st) : 0;
        }
    }
    d[0] = unslice(b, G, x, first, step, n);
    return true;
}

/* slice_like: a slice from 0 to shape_like's sizes */
static bool g_slice_like(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0), *y = grad_out_tensor(b);
    if (!grad_need_static(b, x, "data") || !grad_need_static(b, y, "the result")) return false;
    int64_t first[MAXR] = {0}, step[MAXR], n[MAXR];
    for (uint32_t i = 0; i < x->ndim; i++)
        step[i] = 1, n[i] = y->shape[i];
    d[0] = unslice(b, G, x, first, step, n);
    return true;
}

/* ---- gathers and scatters ---------------------------------------------------------------------
 */

static Expr *zeros_of(GradBuilder *b, uint32_t n, const int64_t *shape, rly_dtype dt) {
    return grad_call(
        b, "zeros", 0, NULL,
        grad_attrs(b, 2, "shape", grad_ais(b, n, shape), "dtype", grad_as(b, sup_dtype_name(dt))));
}

/* take: data (B, P, A, Q) and indices (B, J) give (B, P, J, Q); scatter-add the adjoint into
 * (B, P, A, Q) along A with the indices broadcast over P and Q, after resolving them as the
 * mode does (clip clamps, wrap wraps; fast requires them in range). */
static bool g_take(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0), *ind = grad_arg_tensor(b, 1);
    if (!grad_need_static(b, x, "data") || !grad_need_static(b, ind, "indices")) return false;
    int64_t nb = 1, np = 1, na, nq = 1, nj = 1;
    if (attr_is_none(&b->rc, "axis")) {
        na = grad_numel(x);
        nj = grad_numel(ind);
    } else {
        int64_t axis = attr_int(&b->rc, "axis"), bd = attr_int(&b->rc, "batch_dims");
        if (axis < 0) axis += x->ndim;
        if (bd < 0) bd += ind->ndim;
        for (int64_t i = 0; i < (int64_t)x->ndim; i++) {
            int64_t s = x->shape[i];
            if (i < bd)
                nb *= s;
            else if (i < axis)
                np *= s;
            else if (i > axis)
                nq *= s;
        }
        na = x->shape[axis];
        for (uint32_t i = (uint32_t)bd; i < ind->ndim; i++)
            nj *= ind->shape[i];
    }
    Expr *idx = b->g->args[1];
    const char *mode = attr_str(&b->rc, "mode");
    if (strcmp(mode, "clip") == 0)
        idx = grad_op1a(
            b, "clip", idx,
            grad_attrs(b, 2, "a_min", grad_af(b, 0), "a_max", grad_af(b, (double)na - 1)));
    else if (strcmp(mode, "wrap") == 0)
        idx = grad_op2(b, "floor_mod", idx, ir_scalar_i64(b->ctx, ind->dtype, na, b->span));
    int64_t s_idx[4] = {nb, 1, nj, 1}, s_out[4] = {nb, np, nj, nq}, s_x[4] = {nb, np, na, nq};
    idx = grad_op1a(b, "broadcast_to", grad_reshape(b, idx, 4, s_idx),
                    grad_attrs(b, 1, "shape", grad_ais(b, 4, s_out)));
    Expr *a[3] = {zeros_of(b, 4, s_x, x->dtype), idx, grad_reshape(b, G, 4, s_out)};
    Expr *sc = grad_call(b, "scatter_elements", 3, a,
                         grad_attrs(b, 2, "axis", grad_ai(b, 2), "reduction", grad_as(b, "add")));
    d[0] = grad_op2(b, "reshape_like", sc, X);
    return true;
}

static bool g_gather(GradBuilder *b, Expr **d) {
    Expr *a[3] = {grad_op1(b, "zeros_like", X), b->g->args[1], G};
    d[0] = grad_call(
        b, "scatter_elements", 3, a,
        grad_attrs(b, 2, "axis", grad_attr_same(b, "axis"), "reduction", grad_as(b, "add")));
    return true;
}

/* gather_nd with batch_dims k: scatter_nd has no batch dims, so the batch coordinates become k
 * more index rows (a constant), in front of the given ones */
static bool g_gather_nd(GradBuilder *b, Expr **d) {
    Expr *idx = b->g->args[1];
    int64_t bd = attr_int(&b->rc, "batch_dims");
    if (bd > 0) {
        TensorType *ind = grad_arg_tensor(b, 1);
        if (!grad_need_static(b, ind, "indices (with batch_dims)")) return false;
        int64_t per = grad_numel(ind) / ind->shape[0]; /* elements of one index row */
        int64_t shape[MAXR], inner = 1;
        shape[0] = bd;
        for (uint32_t i = 1; i < ind->ndim; i++) {
            shape[i] = ind->shape[i];
            if (i > (uint32_t)bd) inner *= ind->shape[i];
        }
        int64_t *rows = arena_array(&b->ctx->arena, (size_t)(bd * per) + 1, sizeof *rows);
        for (int64_t f = 0; f < per; f++) { /* f = (batch..., y...) row-major */
            int64_t rest = f / inner;
            for (int64_t r = bd; r-- > 0;) {
                int64_t ext = ind->shape[1 + r];
                rows[r * per + f] = rest % ext;
                rest /= ext;
            }
        }
        Expr *coords = ir_constant_new(b->ctx, RLY_DTYPE_I64, ind->ndim, shape, rows, b->span);
        Expr *parts[2] = {grad_op2(b, "cast_like", coords, idx), idx};
        idx = grad_op1a(b, "concatenate", ir_tuple_new(b->ctx, 2, parts, b->span),
                        grad_attrs(b, 1, "axis", grad_ai(b, 0)));
    }
    Expr *a[3] = {grad_op1(b, "zeros_like", X), idx, G};
    d[0] = grad_call(b, "scatter_nd", 3, a, grad_attrs(b, 1, "mode", grad_as(b, "add")));
    return true;
}

/* scatter_elements(data, indices, updates) with reduction "add": data's adjoint passes
 * through, the updates' gathers it (negative indices count from the end, as the scatter reads
 * them) */
static bool g_scatter_elements(GradBuilder *b, Expr **d) {
    const char *red = attr_str(&b->rc, "reduction");
    if (strcmp(red, "add") != 0)
        return grad_fail(b, "reduction \"%s\" has no gradient (only \"add\")", red);
    TensorType *x = grad_arg_tensor(b, 0), *ind = grad_arg_tensor(b, 1);
    int64_t axis = attr_int(&b->rc, "axis");
    if (axis < 0) axis += x->ndim;
    d[0] = G;
    grad_begin(b);
    Expr *i = grad_let(b, b->g->args[1]);
    Expr *wrapped = i;
    if (!sup_dtype_is_uint(ind->dtype)) {
        int64_t ext = x->shape[axis];
        Expr *na;
        if (dim_known(ext)) {
            na = ir_scalar_i64(b->ctx, ind->dtype, ext, b->span);
        } else {
            Expr *shape = grad_op2(b, "cast_like", grad_op1(b, "shape_of", X), i);
            na = grad_op2a(b, "take", shape, ir_scalar_i64(b->ctx, ind->dtype, axis, b->span),
                           grad_attrs(b, 1, "axis", grad_ai(b, 0)));
        }
        Expr *neg = grad_op2(b, "less", i, ir_scalar_i64(b->ctx, ind->dtype, 0, b->span));
        Expr *a[3] = {neg, grad_add(b, i, na), i};
        wrapped = grad_call(b, "where", 3, a, NULL);
    }
    d[2] =
        grad_end(b, grad_op2a(b, "gather", G, wrapped, grad_attrs(b, 1, "axis", grad_ai(b, axis))));
    return true;
}

static bool g_scatter_nd(GradBuilder *b, Expr **d) {
    const char *mode = attr_str(&b->rc, "mode");
    if (strcmp(mode, "add") != 0)
        return grad_fail(b, "mode \"%s\" has no gradient (only \"add\")", mode);
    d[0] = G;
    d[2] = grad_op2(b, "gather_nd", G, b->g->args[1]);
    return true;
}

/* ---- scans, creation, triangles ---------------------------------------------------------------
 */

/* cumsum: x_j reaches y_i for i >= j (i > j exclusive): a reversed cumsum of the adjoint */
static bool g_cumsum(GradBuilder *b, Expr **d) {
    bool flat = attr_is_none(&b->rc, "axis");
    int64_t axis = flat ? 0 : attr_int(&b->rc, "axis");
    const Attrs *ra = grad_attrs(b, 1, "axis", grad_ai(b, axis));
    Expr *h = grad_op1a(b, "reverse", G, ra);
    h = grad_op1a(
        b, "cumsum", h,
        grad_attrs(b, 2, "axis", grad_ai(b, axis), "exclusive", grad_attr_same(b, "exclusive")));
    h = grad_op1a(b, "reverse", h, ra);
    if (flat) h = grad_op2(b, "reshape_like", h, X);
    d[0] = grad_op2(b, "cast_like", h, X);
    return true;
}

static bool g_full(GradBuilder *b, Expr **d) {
    d[0] = grad_op2(b, "cast_like", grad_sum(b, G, 0, NULL, false, false), X);
    return true;
}

static bool g_full_like(GradBuilder *b, Expr **d) {
    Expr *v = b->g->args[1];
    d[1] = grad_op2(b, "cast_like", grad_sum(b, G, 0, NULL, false, false), v);
    return true;
}

/* arange(start, stop, step): y_i = start + i * step, so start collects the adjoint and step its
 * products with i = (y_i - start) / step; stop only sets the length */
static bool g_arange(GradBuilder *b, Expr **d) {
    Expr *start = b->g->args[0], *step = b->g->args[2];
    d[0] = grad_sum(b, G, 0, NULL, false, false);
    Expr *i = grad_div(b, grad_sub(b, b->g->out, start), step);
    d[2] = grad_sum(b, grad_mul(b, G, i), 0, NULL, false, false);
    return true;
}

/* one_hot(indices, on, off): on collects the adjoint where the indices hit, off elsewhere */
static bool g_one_hot(GradBuilder *b, Expr **d) {
    TensorType *y = grad_out_tensor(b);
    Expr *on = b->g->args[1], *off = b->g->args[2];
    for (uint32_t i = 1; i < 3; i++) {
        Expr *a[3] = {X, grad_scalar(b, y->dtype, i == 1), grad_scalar(b, y->dtype, i == 2)};
        Expr *hit = grad_call(b, "one_hot", 3, a, b->g->call->attrs);
        Expr *s = grad_sum(b, grad_mul(b, G, hit), 0, NULL, false, false);
        d[i] = grad_op2(b, "cast_like", s, i == 1 ? on : off);
    }
    return true;
}

static bool g_trilu(GradBuilder *b, Expr **d) {
    d[0] = grad_op2a(b, "trilu", G, b->g->args[1],
                     grad_attrs(b, 1, "upper", grad_attr_same(b, "upper")));
    return true;
}

/* ---- identities, dynamic-shape variants -------------------------------------------------------
 */

/* annotation.stop_fusion, annotation.checkpoint, debug: the identity */
static bool g_identity(GradBuilder *b, Expr **d) {
    d[0] = G;
    return true;
}

/* ---- einsum -----------------------------------------------------------------------------------
 */

#define EIN_MAX 16 /* operands handled */

static bool ein_has(const char *lab, uint32_t n, char c) {
    for (uint32_t i = 0; i < n; i++)
        if (lab[i] == c) return true;
    return false;
}

/* einsum: the adjoint of operand i is the einsum of the adjoint and the other operands to i's
 * labels; labels only operand i has (summed in it alone) are broadcast back. Needs an explicit
 * "->", no "..." and no label repeated within a term (diagonals). */
static bool g_einsum(GradBuilder *b, Expr **d) {
    const char *eq = attr_str(&b->rc, "equation");
    TupleType *tt = AS_TUPLE_TYPE(b->g->arg_types[0]);
    uint32_t k = tt->n, n[EIN_MAX + 1];
    char lab[EIN_MAX + 1][MAXR];
    if (k > EIN_MAX)
        return grad_fail(b, "einsum of more than %d operands has no gradient", EIN_MAX);
    SupEinsum *ein = arena_alloc(&b->ctx->arena, sizeof *ein);
    char why[256];
    if (sup_einsum_parse(eq, ein, why, sizeof why) != NULL) return grad_fail(b, "%s", why);
    if (ein->n_in != k) return grad_fail(b, "equation \"%s\": unexpected operand count", eq);
    if (!ein->explicit_out)
        return grad_fail(b, "equation \"%s\": the gradient needs an explicit \"->\"", eq);
    for (uint32_t i = 0; i <= k; i++) { /* the inputs, then the output as term k */
        const SupEinsumTerm *t = i < k ? &ein->in[i] : &ein->out;
        if (t->has_ellipsis)
            return grad_fail(b, "equation \"%s\": the gradient handles letters only (no \"...\")",
                             eq);
        if (t->n > MAXR)
            return grad_fail(b, "equation \"%s\" has a term of more than %d labels", eq, MAXR);
        n[i] = t->n;
        for (uint32_t a = 0; a < t->n; a++) {
            lab[i][a] = sup_einsum_char(ein->items[t->start + a]);
            if (ein_has(lab[i], a, lab[i][a]))
                return grad_fail(b, "equation \"%s\" repeats a label in one term (no gradient)",
                                 eq);
        }
    }
    Expr **parts = arena_array(&b->ctx->arena, k, sizeof *parts);
    Expr **ops = arena_array(&b->ctx->arena, k, sizeof *ops);
    for (uint32_t i = 0; i < k; i++) {
        StrBuf s = {0};
        for (uint32_t a = 0; a < n[k]; a++)
            sb_printf(&s, "%c", lab[k][a]);
        ops[0] = G;
        uint32_t m = 1;
        for (uint32_t j = 0; j < k; j++) {
            if (j == i) continue;
            sb_printf(&s, ",");
            for (uint32_t a = 0; a < n[j]; a++)
                sb_printf(&s, "%c", lab[j][a]);
            ops[m++] = ir_tuple_get_item_new(b->ctx, X, j, b->span);
        }
        sb_printf(&s, "->");
        bool kept[MAXR], all = true;
        for (uint32_t a = 0; a < n[i]; a++) {
            char c = lab[i][a];
            kept[a] = ein_has(lab[k], n[k], c);
            for (uint32_t j = 0; j < k && !kept[a]; j++)
                kept[a] = j != i && ein_has(lab[j], n[j], c);
            if (kept[a]) sb_printf(&s, "%c", c);
            all = all && kept[a];
        }
        Expr *e = grad_op1a(b, "einsum", ir_tuple_new(b->ctx, m, ops, b->span),
                            grad_attrs(b, 1, "equation", grad_as(b, sb_cstr(&s))));
        sb_free(&s);
        if (!all) {
            Expr *xi = ir_tuple_get_item_new(b->ctx, X, i, b->span);
            for (uint32_t a = 0; a < n[i]; a++) /* ascending: each lands at its position */
                if (!kept[a])
                    e = grad_op1a(b, "expand_dims", e, grad_attrs(b, 1, "axis", grad_ai(b, a)));
            e = grad_op2(b, "broadcast_to_like", e, xi);
        }
        parts[i] = e;
    }
    d[0] = ir_tuple_new(b->ctx, k, parts, b->span);
    return true;
}

/* ---- scans and sorts --------------------------------------------------------------------------
 */

/* cumprod: y_i = prod_{j <= i} x_j (j < i exclusive), so dx_j = sum_{i >= j} g_i y_i / x_j: the
 * reversed cumsum of g y over x (defined for nonzero x, as prod's gradient) */
static bool g_cumprod(GradBuilder *b, Expr **d) {
    bool flat = attr_is_none(&b->rc, "axis");
    int64_t axis = flat ? 0 : attr_int(&b->rc, "axis");
    const Attrs *ra = grad_attrs(b, 1, "axis", grad_ai(b, axis));
    Expr *h = grad_op1a(b, "reverse", grad_mul(b, G, b->g->out), ra);
    h = grad_op1a(
        b, "cumsum", h,
        grad_attrs(b, 2, "axis", grad_ai(b, axis), "exclusive", grad_attr_same(b, "exclusive")));
    h = grad_op1a(b, "reverse", h, ra);
    if (flat) h = grad_op2(b, "reshape_like", h, X);
    d[0] = grad_div(b, grad_op2(b, "cast_like", h, X), X);
    return true;
}

/* scatter-add g back to the positions idx (along axis) came from */
static Expr *unsort(GradBuilder *b, Expr *g, Expr *idx, int64_t axis) {
    Expr *a[3] = {grad_op1(b, "zeros_like", X), idx, g};
    return grad_call(b, "scatter_elements", 3, a,
                     grad_attrs(b, 2, "axis", grad_ai(b, axis), "reduction", grad_as(b, "add")));
}

/* sort: y = gather(x, argsort(x)) along axis (ties are measure zero) */
static bool g_sort(GradBuilder *b, Expr **d) {
    int64_t axis = attr_int(&b->rc, "axis");
    if (axis < 0) axis += grad_arg_tensor(b, 0)->ndim;
    Expr *idx = grad_op1a(b, "argsort", X,
                          grad_attrs(b, 3, "axis", grad_ai(b, axis), "is_ascend",
                                     grad_attr_same(b, "is_ascend"), "dtype", grad_as(b, "int64")));
    d[0] = unsort(b, G, idx, axis);
    return true;
}

/* topk: the values' adjoint scatters back to their indices (the indices get none) */
static bool g_topk(GradBuilder *b, Expr **d) {
    int64_t axis = attr_int(&b->rc, "axis");
    if (axis < 0) axis += grad_arg_tensor(b, 0)->ndim;
    const char *rt = attr_str(&b->rc, "ret_type");
    Expr *gv, *idx;
    if (strcmp(rt, "both") == 0) {
        gv = ir_tuple_get_item_new(b->ctx, G, 0, b->span);
        idx = ir_tuple_get_item_new(b->ctx, b->g->out, 1, b->span);
    } else { /* "values" ("indices" has an integer result: no gradient reaches here) */
        gv = G;
        idx = grad_op1a(b, "topk", X,
                        grad_attrs(b, 5, "k", grad_attr_same(b, "k"), "axis", grad_ai(b, axis),
                                   "ret_type", grad_as(b, "indices"), "is_ascend",
                                   grad_attr_same(b, "is_ascend"), "dtype", grad_as(b, "int64")));
    }
    d[0] = unsort(b, gv, idx, axis);
    return true;
}

/* ---- windows, diagonals, grids, advanced indexing ---------------------------------------------
 */

#define WIN_MAX 256 /* window positions handled by sliding_window's gradient */

/* sliding_window: result[..., n..., w...] = x[..., n * stride + w]; for each window offset w,
 * the slice of the adjoint at w is scattered back with a strided unslice */
static bool g_sliding_window(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0), *y = grad_out_tensor(b);
    if (!grad_need_static(b, x, "data")) return false;
    int64_t axis = attr_int(&b->rc, "axis");
    if (axis < 0) axis += x->ndim;
    const int64_t *win, *str;
    attr_ints(&b->rc, "window_shape", &win);
    attr_ints(&b->rc, "strides", &str);
    uint32_t nd = x->ndim, m = nd - (uint32_t)axis;
    int64_t total = 1;
    for (uint32_t i = 0; i < m; i++)
        total *= win[i];
    if (total > WIN_MAX)
        return grad_fail(b, "window_shape with %lld positions: the gradient handles %d at most",
                         (long long)total, WIN_MAX);
    Expr *sum = NULL;
    for (int64_t t = 0; t < total; t++) {
        int64_t w[MAXR], rest = t;
        for (uint32_t i = m; i-- > 0;) {
            w[i] = rest % win[i];
            rest /= win[i];
        }
        int64_t bg[MAXR], en[MAXR], ax[MAXR], first[MAXR], step[MAXR], cnt[MAXR];
        for (uint32_t i = 0; i < m; i++)
            bg[i] = w[i], en[i] = w[i] + 1, ax[i] = nd + i;
        Expr *h = grad_op1a(b, "strided_slice", G,
                            grad_attrs(b, 3, "begin", grad_ais(b, m, bg), "end", grad_ais(b, m, en),
                                       "axes", grad_ais(b, m, ax)));
        h = grad_reshape(b, h, nd, y->shape);
        for (uint32_t i = 0; i < nd; i++)
            first[i] = 0, step[i] = 1, cnt[i] = x->shape[i];
        for (uint32_t i = 0; i < m; i++) {
            first[axis + i] = w[i];
            step[axis + i] = str[i];
            cnt[axis + i] = y->shape[axis + i];
        }
        h = unslice(b, h, x, first, step, cnt);
        sum = sum ? grad_add(b, sum, h) : h;
    }
    d[0] = sum;
    return true;
}

/* matrix_set_diag(input, diagonal): the input's adjoint is g with those diagonals zeroed; the
 * diagonal's gathers g where each of its elements landed, found by setting the element numbers
 * 0..n-1 as a diagonal of a -1 matrix (so padding elements, which land nowhere, get 0) */
static bool g_matrix_set_diag(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0), *dg = grad_arg_tensor(b, 1);
    if (!grad_need_static(b, x, "input") || !grad_need_static(b, dg, "diagonal")) return false;
    Expr *dv = b->g->args[1];
    d[0] = grad_op2a(b, "matrix_set_diag", G, grad_op1(b, "zeros_like", dv), b->g->call->attrs);
    int64_t nd = grad_numel(dg), ni = grad_numel(x);
    int64_t *ids = arena_array(&b->ctx->arena, (size_t)nd + 1, sizeof *ids);
    for (int64_t i = 0; i < nd; i++)
        ids[i] = i;
    Expr *idc =
        grad_op2(b, "cast_like",
                 ir_constant_new(b->ctx, RLY_DTYPE_I64, dg->ndim, dg->shape, ids, b->span), dv);
    grad_begin(b);
    Expr *pos = grad_op2a(
        b, "matrix_set_diag",
        grad_sub(b, zeros_of(b, x->ndim, x->shape, x->dtype), grad_scalar(b, x->dtype, 1)), idc,
        b->g->call->attrs);
    pos = grad_let(b, grad_reshape(b, pos, 1, &ni));
    Expr *w[3] = {grad_op2(b, "greater_equal", pos, grad_scalar(b, x->dtype, 0)), pos,
                  grad_scalar(b, x->dtype, (double)nd)};
    Expr *idx = grad_op1a(b, "cast", grad_call(b, "where", 3, w, NULL),
                          grad_attrs(b, 1, "dtype", grad_as(b, "int64")));
    int64_t n1 = nd + 1, zero = 0;
    Expr *a[3] = {zeros_of(b, 1, &n1, x->dtype), idx, grad_reshape(b, G, 1, &ni)};
    Expr *sc = grad_call(b, "scatter_elements", 3, a,
                         grad_attrs(b, 2, "axis", grad_ai(b, 0), "reduction", grad_as(b, "add")));
    sc = slice_axis(b, sc, zero, 0, nd);
    d[1] = grad_end(b, grad_reshape(b, sc, dg->ndim, dg->shape));
    return true;
}

/* meshgrid: grid k repeats x_k along its axis (k; with "xy" the first two swap); sum the rest */
static bool g_meshgrid(GradBuilder *b, Expr **d) {
    TupleType *tt = AS_TUPLE_TYPE(b->g->arg_types[0]);
    bool xy = strcmp(attr_str(&b->rc, "indexing"), "xy") == 0;
    Expr **parts = arena_array(&b->ctx->arena, tt->n, sizeof *parts);
    for (uint32_t k = 0; k < tt->n; k++) {
        Expr *gk = ir_tuple_get_item_new(b->ctx, G, k, b->span);
        int64_t ax = xy && tt->n >= 2 && k < 2 ? 1 - k : k;
        parts[k] = tt->n == 1 ? gk : grad_sum(b, gk, 1, &ax, false, true);
    }
    d[0] = ir_tuple_new(b->ctx, tt->n, parts, b->span);
    return true;
}

/* adv_index((data, i_1..i_k)): data[i_1, ..., i_k] with the indices broadcast; scatter-add the
 * adjoint back with scatter_nd over the stacked (wrapped) indices; the indices get zeros */
static bool g_adv_index(GradBuilder *b, Expr **d) {
    TupleType *tt = AS_TUPLE_TYPE(b->g->arg_types[0]);
    TensorType *x = AS_TENSOR_TYPE(tt->fields[0]), *y = grad_out_tensor(b);
    if (!grad_need_static(b, x, "data") || !grad_need_static(b, y, "the result")) return false;
    uint32_t k = tt->n - 1, bn = y->ndim - (x->ndim - k);
    Expr **parts = arena_array(&b->ctx->arena, tt->n, sizeof *parts);
    Expr *data = ir_tuple_get_item_new(b->ctx, X, 0, b->span);
    if (k == 0) {
        parts[0] = G;
    } else {
        Expr **rows = arena_array(&b->ctx->arena, k, sizeof *rows);
        const Attrs *i64 = grad_attrs(b, 1, "dtype", grad_as(b, "int64"));
        for (uint32_t j = 0; j < k; j++) {
            Expr *ij = grad_op1a(b, "cast", ir_tuple_get_item_new(b->ctx, X, j + 1, b->span), i64);
            ij = grad_op2(b, "floor_mod", ij,
                          ir_scalar_i64(b->ctx, RLY_DTYPE_I64, x->shape[j], b->span));
            rows[j] = grad_op1a(b, "broadcast_to", ij,
                                grad_attrs(b, 1, "shape", grad_ais(b, bn, y->shape)));
        }
        Expr *idx = grad_op1a(b, "stack", ir_tuple_new(b->ctx, k, rows, b->span),
                              grad_attrs(b, 1, "axis", grad_ai(b, 0)));
        Expr *a[3] = {grad_op1(b, "zeros_like", data), idx, G};
        parts[0] = grad_call(b, "scatter_nd", 3, a, grad_attrs(b, 1, "mode", grad_as(b, "add")));
    }
    for (uint32_t j = 1; j < tt->n; j++)
        parts[j] = grad_op1(b, "zeros_like", ir_tuple_get_item_new(b->ctx, X, j, b->span));
    d[0] = ir_tuple_new(b->ctx, tt->n, parts, b->span);
    return true;
}

/* sequence_mask: the adjoint masked the same way, with 0 */
static bool g_sequence_mask(GradBuilder *b, Expr **d) {
    d[0] =
        grad_op2a(b, "sequence_mask", G, b->g->args[1],
                  grad_attrs(b, 2, "mask_value", grad_af(b, 0), "axis", grad_attr_same(b, "axis")));
    return true;
}

/* sparse_to_dense(indices, values, default): the values gather the adjoint at their indices
 * (gather_nd wants them as rows: (N, r) transposed, (N,) or a scalar as one row); the default
 * collects it everywhere else (indices are taken as distinct) */
static bool g_sparse_to_dense(GradBuilder *b, Expr **d) {
    Expr *ind = b->g->args[0], *vals = b->g->args[1], *def = b->g->args[2];
    TensorType *it = grad_arg_tensor(b, 0);
    Expr *rows = it->ndim == 2
                     ? grad_op1(b, "transpose", ind)
                     : grad_op1a(b, "expand_dims", ind, grad_attrs(b, 1, "axis", grad_ai(b, 0)));
    d[1] = grad_op2(b, "collapse_sum_like", grad_op2(b, "gather_nd", G, rows), vals);
    Expr *a[3] = {ind, grad_op1(b, "zeros_like", vals), grad_op1(b, "ones_like", def)};
    Expr *rest = grad_call(b, "sparse_to_dense", 3, a, b->g->call->attrs);
    d[2] = grad_sum(b, grad_mul(b, G, rest), 0, NULL, false, false);
    return true;
}

/* ---- det --------------------------------------------------------------------------------------
 */

/* det: d det / d x_ij is the cofactor C_ij = (-1)^(i + j) det(minor_ij), so the adjoint is
 * g C (= g det x^-T where x is invertible, and right for singular x too). The minors are taken
 * at once with a constant index over the flattened matrix and their determinants with det, so
 * the gradient can be differentiated again. */
static bool g_det(GradBuilder *b, Expr **d) {
    TensorType *x = grad_arg_tensor(b, 0);
    uint32_t r = x->ndim;
    int64_t n = x->shape[r - 1];
    if (!dim_known(n)) return grad_fail(b, "the gradient needs a static matrix size");
    Expr *gb = grad_op1a(b, "expand_dims", G,
                         grad_attrs(b, 2, "axis", grad_ai(b, -1), "num_newaxis", grad_ai(b, 2)));
    if (n == 1) {
        d[0] = grad_op2(b, "broadcast_to_like", gb, X);
        return true;
    }
    int64_t nm = n - 1;
    int64_t *idx = arena_array(&b->ctx->arena, (size_t)(n * n * nm * nm), sizeof *idx);
    int64_t *sign = arena_array(&b->ctx->arena, (size_t)(n * n), sizeof *sign);
    for (int64_t i = 0, f = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            sign[i * n + j] = (i + j) % 2 ? -1 : 1;
            for (int64_t p = 0; p < nm; p++)
                for (int64_t q = 0; q < nm; q++)
                    idx[f++] = (p < i ? p : p + 1) * n + (q < j ? q : q + 1);
        }
    int64_t flat[MAXR], ishape[4] = {n, n, nm, nm}, sshape[2] = {n, n};
    for (uint32_t i = 0; i + 2 < r; i++)
        flat[i] = 0; /* copy the batch dims */
    flat[r - 2] = n * n;
    Expr *xf = grad_reshape(b, X, r - 1, flat);
    Expr *minors =
        grad_op2a(b, "take", xf, ir_constant_new(b->ctx, RLY_DTYPE_I64, 4, ishape, idx, b->span),
                  grad_attrs(b, 1, "axis", grad_ai(b, -1)));
    Expr *sg = grad_op2(b, "cast_like",
                        ir_constant_new(b->ctx, RLY_DTYPE_I64, 2, sshape, sign, b->span), X);
    d[0] = grad_mul(b, gb, grad_mul(b, grad_op1(b, "det", minors), sg));
    return true;
}

const GradDef grad_transform_table[] = {
    {OP_ID_RESHAPE, g_reshape},
    {OP_ID_RESHAPE_LIKE, g_reshape},
    {OP_ID_EXPAND_DIMS, g_reshape},
    {OP_ID_SQUEEZE, g_reshape},
    {OP_ID_TRANSPOSE, g_transpose},
    {OP_ID_CONCATENATE, g_concatenate},
    {OP_ID_STACK, g_stack},
    {OP_ID_SPLIT, g_split},
    {OP_ID_TILE, g_tile},
    {OP_ID_REPEAT, g_repeat},
    {OP_ID_REVERSE, g_reverse},
    {OP_ID_REVERSE_SEQUENCE, g_reverse_sequence},
    {OP_ID_BROADCAST_TO, g_broadcast_to},
    {OP_ID_BROADCAST_TO_LIKE, g_broadcast_to},
    {OP_ID_COLLAPSE_SUM_LIKE, g_collapse_sum},
    {OP_ID_COLLAPSE_SUM_TO, g_collapse_sum},
    {OP_ID_WHERE, g_where},
    {OP_ID_CAST, g_cast},
    {OP_ID_CAST_LIKE, g_cast},
    {OP_ID_LAYOUT_TRANSFORM, g_layout_transform},
    {OP_ID_STRIDED_SLICE, g_strided_slice},
    {OP_ID_SLICE_LIKE, g_slice_like},
    {OP_ID_TAKE, g_take},
    {OP_ID_GATHER, g_gather},
    {OP_ID_GATHER_ND, g_gather_nd},
    {OP_ID_SCATTER_ELEMENTS, g_scatter_elements},
    {OP_ID_SCATTER_ND, g_scatter_nd},
    {OP_ID_CUMSUM, g_cumsum},
    {OP_ID_FULL, g_full},
    {OP_ID_FULL_LIKE, g_full_like},
    {OP_ID_TRILU, g_trilu},
    {OP_ID_ONE_HOT, g_one_hot},
    {OP_ID_ARANGE, g_arange},
    {OP_ID_ANNOTATION_STOP_FUSION, g_identity},
    {OP_ID_ANNOTATION_CHECKPOINT, g_identity},
    {OP_ID_DEBUG, g_identity},
    {OP_ID_DYN_RESHAPE, g_reshape},
    {OP_ID_DYN_SQUEEZE, g_reshape},
    {OP_ID_DYN_EXPAND_DIMS, g_reshape},
    {OP_ID_DYN_BROADCAST_TO, g_broadcast_to},
    {OP_ID_EINSUM, g_einsum},
    {OP_ID_CUMPROD, g_cumprod},
    {OP_ID_SORT, g_sort},
    {OP_ID_TOPK, g_topk},
    {OP_ID_SLIDING_WINDOW, g_sliding_window},
    {OP_ID_MATRIX_SET_DIAG, g_matrix_set_diag},
    {OP_ID_MESHGRID, g_meshgrid},
    {OP_ID_ADV_INDEX, g_adv_index},
    {OP_ID_SEQUENCE_MASK, g_sequence_mask},
    {OP_ID_SPARSE_TO_DENSE, g_sparse_to_dense},
    {OP_ID_DET, g_det},
    /* zero gradients */
    {OP_ID_ZEROS, NULL},
    {OP_ID_ONES, NULL},
    {OP_ID_ARGSORT, NULL},
    {OP_ID_ARGWHERE, NULL},
    {OP_ID_SEARCHSORTED, NULL},
    {OP_ID_UNRAVEL_INDEX, NULL},
    GRAD_END,
};
