/* op_transform.c - shape, layout and dtype transforms: casts, expand/squeeze/reshape/transpose,
 * joining and splitting (concatenate, stack, split, meshgrid), repetition (tile, repeat),
 * reversal, selection (where), broadcasting to and collapsing onto a shape, layout_transform,
 * slicing (strided_slice, slice_like, sliding_window), einsum, and the matrix diagonal/triangle
 * operators.
 *
 * Names, attributes, defaults and fusion patterns follow TVM Relay (src/relay/op/tensor/
 * transform.cc, math.cc, python/tvm/relay/op/_transform.py). Where TVM's relation would crash or
 * silently accept a call that its kernel cannot run, these relations reject it with a message;
 * where TVM's shape arithmetic loses a symbolic dim the relation keeps it when it can. */

#include <ctype.h>

#include "ops/ops.h"

#define MAX_RANK 1024    /* the largest rank a relation here creates */
#define MAX_FIELDS 65536 /* the most tensors split and meshgrid return */

/* ---- small helpers --------------------------------------------------------------------------- */

static const char *shape_of(RelCall *rc, const TensorType *t) {
    return rel_shape_str(rc, t->ndim, t->shape);
}

static const char *ints_str(RelCall *rc, uint32_t n, const int64_t *v) {
    StrBuf sb = {0};
    sb_putc(&sb, '[');
    for (uint32_t i = 0; i < n; i++)
        sb_printf(&sb, "%s%lld", i ? ", " : "", (long long)v[i]);
    sb_putc(&sb, ']');
    const char *s = arena_strndup(&rc->ctx->arena, sb_cstr(&sb), sb.len);
    sb_free(&sb);
    return s;
}

/* dim_mul that refuses to overflow: false (with a message) when the product does not fit. */
static int64_t ceil_div_pos(int64_t x, int64_t d) { return x <= 0 ? 0 : (x - 1) / d + 1; }

/* The element count of a shape, split into a constant factor and the symbolic factors. */
typedef struct Volume {
    int64_t k;      /* product of the constant dims (0 when one of them is 0) */
    uint32_t n_sym; /* symbolic factors, in sym[] */
    int64_t *sym;
    bool any; /* some dim is `?` */
} Volume;

static bool volume_of(RelCall *rc, uint32_t n, const int64_t *s, Volume *v) {
    v->k = 1;
    v->n_sym = 0;
    v->any = false;
    v->sym = rel_dims(rc, n);
    for (uint32_t i = 0; i < n; i++)
        if (s[i] == 0) {
            v->k = 0;
            return true;
        }
    for (uint32_t i = 0; i < n; i++) {
        if (s[i] == DIM_ANY)
            v->any = true;
        else if (dim_is_sym(s[i]))
            v->sym[v->n_sym++] = s[i];
        else if (!sup_dim_mul(v->k, s[i], &v->k)) {
            rel_error(rc, "shape %s has more than 2^62 elements", rel_shape_str(rc, n, s));
            return false;
        }
    }
    return true;
}

/* Remove the symbolic factors the two volumes share. */
static void volume_cancel(Volume *a, Volume *b) {
    for (uint32_t i = 0; i < a->n_sym;) {
        uint32_t j = 0;
        while (j < b->n_sym && b->sym[j] != a->sym[i])
            j++;
        if (j < b->n_sym) {
            a->sym[i] = a->sym[--a->n_sym];
            b->sym[j] = b->sym[--b->n_sym];
        } else {
            i++;
        }
    }
}

/* Whether two shapes may hold the same number of elements (true when it cannot be decided). */
static bool same_volume(RelCall *rc, uint32_t na, const int64_t *a, uint32_t nb, const int64_t *b,
                        bool *ok) {
    Volume va, vb;
    if (!volume_of(rc, na, a, &va) || !volume_of(rc, nb, b, &vb)) return false;
    *ok = true;
    if (va.k == 0 && vb.k == 0) return true;
    if (va.any || vb.any) return true;
    volume_cancel(&va, &vb);
    if (va.n_sym || vb.n_sym) return true;
    *ok = va.k == vb.k;
    return true;
}

static const char *volume_words(RelCall *rc, uint32_t n, const int64_t *s) {
    Volume v;
    StrBuf sb = {0};
    sb_puts(&sb, rel_shape_str(rc, n, s));
    /* volume_of only fails on overflow, reported before this is called */
    if (volume_of(rc, n, s, &v) && !v.any && v.n_sym == 0)
        sb_printf(&sb, " (%lld elements)", (long long)v.k);
    const char *r = arena_strndup(&rc->ctx->arena, sb_cstr(&sb), sb.len);
    sb_free(&sb);
    return r;
}

/* ---- casts ------------------------------------------------------------------------------------
 */

static RelResult cast_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int dt = attr_dtype(rc, "dtype");
    if (dt < 0) return rel_error(rc, "attribute dtype must name the target dtype");
    return rel_out_tensor(rc, (rly_dtype)dt, data->ndim, data->shape);
}

static RelResult cast_like_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(like, rc, 1);
    return rel_out_tensor(rc, like->dtype, data->ndim, data->shape);
}

static int value_bits(rly_dtype dt) { return dt == RLY_DTYPE_BOOL ? 1 : sup_dtype_bits(dt); }

static RelResult reinterpret_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int dt = attr_dtype(rc, "dtype");
    if (dt < 0) return rel_error(rc, "attribute dtype must name the target dtype");
    int from = value_bits(data->dtype), to = value_bits((rly_dtype)dt);
    if (from != to)
        return rel_error(rc, "cannot reinterpret %s (%d bits) as %s (%d bits): the widths differ",
                         sup_dtype_name(data->dtype), from, sup_dtype_name((rly_dtype)dt), to);
    return rel_out_tensor(rc, (rly_dtype)dt, data->ndim, data->shape);
}

/* ---- expand_dims, squeeze ------------------------------------------------------------------- */

static RelResult expand_dims_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int64_t n = data->ndim, axis = attr_int(rc, "axis"), k = attr_int(rc, "num_newaxis");
    if (k < 0) return rel_error(rc, "num_newaxis must be >= 0, got %lld", (long long)k);
    if (axis < -n - 1 || axis > n)
        return rel_error(
            rc, "axis %lld is out of range for a tensor of rank %lld (valid: %lld to %lld)",
            (long long)axis, (long long)n, (long long)(-n - 1), (long long)n);
    if (k > MAX_RANK - n)
        return rel_error(rc, "num_newaxis %lld on a tensor of rank %lld exceeds the rank limit %d",
                         (long long)k, (long long)n, MAX_RANK);
    int64_t pivot = axis < 0 ? n + axis + 1 : axis;
    int64_t *out = rel_dims(rc, (uint32_t)(n + k));
    uint32_t o = 0;
    for (int64_t i = 0; i < pivot; i++)
        out[o++] = data->shape[i];
    for (int64_t i = 0; i < k; i++)
        out[o++] = 1;
    for (int64_t i = pivot; i < n; i++)
        out[o++] = data->shape[i];
    return rel_out_tensor(rc, data->dtype, o, out);
}

static RelResult squeeze_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    uint32_t n = data->ndim, o = 0;
    int64_t *out = rel_dims(rc, n);
    if (attr_is_none(rc, "axis")) {
        for (uint32_t i = 0; i < n; i++) {
            int64_t d = data->shape[i];
            if (!dim_known(d))
                return rel_error(rc,
                                 "axis must be given when data has unknown dimensions (shape %s)",
                                 shape_of(rc, data));
            if (d != 1) out[o++] = d;
        }
        return rel_out_tensor(rc, data->dtype, o, out);
    }
    const int64_t *axes;
    uint32_t na = attr_ints(rc, "axis", &axes);
    int64_t *drop = rel_dims(rc, n);
    for (uint32_t j = 0; j < na; j++) {
        int64_t a;
        if (!rel_axis(rc, axes[j], n, "axis", &a)) return REL_ERROR;
        if (drop[a]) return rel_error(rc, "axis %lld is given twice", (long long)a);
        int64_t d = data->shape[a];
        if (dim_known(d) && d != 1)
            return rel_error(rc,
                             "cannot squeeze axis %lld of size %lld (shape %s): only size-1 "
                             "dimensions can be squeezed",
                             (long long)axes[j], (long long)d, shape_of(rc, data));
        drop[a] = 1;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!drop[i]) out[o++] = data->shape[i];
    return rel_out_tensor(rc, data->dtype, o, out);
}

/* ---- reshape, reshape_like ------------------------------------------------------------------ */

/* A split size for -4: `f` divides `d0` (when known); the other size is d0 / f. */
static bool split_other(RelCall *rc, int64_t d0, int64_t f, int64_t *out) {
    if (dim_known(d0)) {
        if (d0 % f != 0) {
            rel_error(rc, "-4 cannot split a dimension of size %lld by %lld", (long long)d0,
                      (long long)f);
            return false;
        }
        *out = d0 / f;
    } else {
        *out = dim_floordiv(d0, f);
    }
    return true;
}

/* The size that -1 stands for: the input dims not copied, divided by the output dims not copied. */
static bool infer_minus_one(RelCall *rc, TensorType *data, const int64_t *in_used, uint32_t n_out,
                            const int64_t *out, const int64_t *copied, uint32_t infer,
                            const int64_t *ns, uint32_t nn, int64_t *res) {
    uint32_t n = data->ndim, a = 0, b = 0;
    int64_t *rest_in = rel_dims(rc, n), *rest_out = rel_dims(rc, n_out);
    for (uint32_t i = 0; i < n; i++)
        if (!in_used[i]) rest_in[a++] = data->shape[i];
    for (uint32_t i = 0; i < n_out; i++)
        if (!copied[i] && i != infer) rest_out[b++] = out[i];
    Volume vi, vo;
    if (!volume_of(rc, a, rest_in, &vi) || !volume_of(rc, b, rest_out, &vo)) return false;
    *res = DIM_ANY;
    if (vo.k == 0) {
        rel_error(rc, "cannot infer the -1 in newshape %s: the other sizes hold zero elements",
                  ints_str(rc, nn, ns));
        return false;
    }
    if (vi.k == 0) {
        *res = 0;
        return true;
    }
    if (vo.any) return true;
    volume_cancel(&vi, &vo);
    if (vo.n_sym) return true;
    if (vi.any) return true;
    if (vi.n_sym == 0) {
        if (vi.k % vo.k != 0) {
            rel_error(rc, "cannot reshape %s into newshape %s: %lld elements do not divide by %lld",
                      shape_of(rc, data), ints_str(rc, nn, ns), (long long)vi.k, (long long)vo.k);
            return false;
        }
        *res = vi.k / vo.k;
    } else if (vi.n_sym == 1 && vi.k == vo.k) {
        *res = vi.sym[0];
    }
    return true;
}

static RelResult reshape_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    const int64_t *ns;
    uint32_t nn = attr_ints(rc, "newshape", &ns);
    bool allowzero = attr_bool(rc, "allowzero");
    uint32_t n = data->ndim, src = 0, o = 0;
    int64_t infer = -1;
    if (nn > MAX_RANK)
        return rel_error(rc, "newshape has %u entries (the limit is %d)", nn, MAX_RANK);
    /* each entry gives at most one output dim, except -2 which gives at most n */
    int64_t *out = rel_dims(rc, nn + n), *copied = rel_dims(rc, nn + n), *in_used = rel_dims(rc, n);
    for (uint32_t i = 0; i < nn; i++) {
        int64_t v = ns[i];
        if (v > 0 || (v == 0 && allowzero)) {
            out[o++] = v;
            src++;
        } else if (v == 0) {
            if (src >= n)
                return rel_error(rc,
                                 "newshape[%u] = 0 copies input dimension %u, but data has "
                                 "rank %u",
                                 i, src, n);
            in_used[src] = copied[o] = 1;
            out[o++] = data->shape[src++];
        } else if (v == -1) {
            if (infer >= 0)
                return rel_error(rc, "newshape %s has more than one -1", ints_str(rc, nn, ns));
            infer = o;
            out[o++] = 1;
            src++;
        } else if (v == -2) {
            while (src < n) {
                in_used[src] = copied[o] = 1;
                out[o++] = data->shape[src++];
            }
        } else if (v == -3) {
            if (src >= n || n - src < 2)
                return rel_error(rc,
                                 "newshape[%u] = -3 merges input dimensions %u and %u, but data "
                                 "has rank %u",
                                 i, src, src + 1, n);
            in_used[src] = in_used[src + 1] = copied[o] = 1;
            if (!rel_dim_mul(rc, data->shape[src], data->shape[src + 1], &out[o])) return REL_ERROR;
            o++;
            src += 2;
        } else if (v == -4) {
            if (i + 2 >= nn)
                return rel_error(rc,
                                 "newshape[%u] = -4 must be followed by the two sizes to split "
                                 "into",
                                 i);
            if (src >= n)
                return rel_error(rc,
                                 "newshape[%u] = -4 splits input dimension %u, but data has "
                                 "rank %u",
                                 i, src, n);
            int64_t d0 = data->shape[src];
            in_used[src++] = 1;
            int64_t a = ns[++i], b = ns[++i];
            if (a == -1 && b == -1)
                return rel_error(rc, "the two sizes after -4 cannot both be -1");
            if ((a <= 0 && a != -1) || (b <= 0 && b != -1))
                return rel_error(rc, "the sizes after -4 must be positive or -1, got %lld and %lld",
                                 (long long)a, (long long)b);
            if (a == -1) {
                if (!split_other(rc, d0, b, &a)) return REL_ERROR;
            } else if (b == -1) {
                if (!split_other(rc, d0, a, &b)) return REL_ERROR;
            } else {
                int64_t p;
                if (!sup_dim_mul(a, b, &p) || (dim_known(d0) && p != d0))
                    return rel_error(rc, "-4 cannot split a dimension of size %s into %lld x %lld",
                                     rel_dim_str(rc, d0), (long long)a, (long long)b);
            }
            copied[o] = 1;
            out[o++] = a;
            copied[o] = 1;
            out[o++] = b;
        } else {
            return rel_error(rc,
                             "newshape[%u] = %lld is neither a size nor one of the special "
                             "values 0, -1, -2, -3, -4",
                             i, (long long)v);
        }
    }
    if (infer >= 0 &&
        !infer_minus_one(rc, data, in_used, o, out, copied, (uint32_t)infer, ns, nn, &out[infer]))
        return REL_ERROR;
    bool same;
    if (!same_volume(rc, n, data->shape, o, out, &same)) return REL_ERROR;
    if (!same)
        return rel_error(rc, "cannot reshape %s into %s", volume_words(rc, n, data->shape),
                         volume_words(rc, o, out));
    return rel_out_tensor(rc, data->dtype, o, out);
}

/* Normalize a [begin, end) pair of axes (end None = rank) against a rank. */
static bool axis_range(RelCall *rc, const char *bname, const char *ename, uint32_t n, int64_t *b,
                       int64_t *e) {
    int64_t rb = attr_int(rc, bname), re = attr_is_none(rc, ename) ? n : attr_int(rc, ename);
    *b = rb < 0 ? rb + n : rb;
    *e = re < 0 ? re + n : re;
    if (*b < 0 || *e > n || *b > *e) {
        rel_error(rc, "%s = %lld and %s = %lld do not select a range of %u dimensions", bname,
                  (long long)rb, ename, (long long)re, n);
        return false;
    }
    return true;
}

static RelResult reshape_like_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(like, rc, 1);
    int64_t lb, le, rb, re;
    if (!axis_range(rc, "lhs_begin", "lhs_end", data->ndim, &lb, &le) ||
        !axis_range(rc, "rhs_begin", "rhs_end", like->ndim, &rb, &re))
        return REL_ERROR;
    uint32_t n = (uint32_t)(lb + (re - rb) + ((int64_t)data->ndim - le)), o = 0;
    int64_t *out = rel_dims(rc, n);
    for (int64_t i = 0; i < lb; i++)
        out[o++] = data->shape[i];
    for (int64_t i = rb; i < re; i++)
        out[o++] = like->shape[i];
    for (int64_t i = le; i < data->ndim; i++)
        out[o++] = data->shape[i];
    bool same;
    if (!same_volume(rc, data->ndim, data->shape, o, out, &same)) return REL_ERROR;
    if (!same)
        return rel_error(rc, "cannot reshape %s into %s", volume_words(rc, data->ndim, data->shape),
                         volume_words(rc, o, out));
    return rel_out_tensor(rc, data->dtype, o, out);
}

/* ---- transpose ---------------------------------------------------------------------------- */

static RelResult transpose_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    uint32_t n = data->ndim;
    int64_t *out = rel_dims(rc, n);
    const int64_t *axes;
    uint32_t na = attr_ints(rc, "axes", &axes);
    if (na == 0) { /* None or []: reverse the axes */
        for (uint32_t i = 0; i < n; i++)
            out[i] = data->shape[n - 1 - i];
        return rel_out_tensor(rc, data->dtype, n, out);
    }
    if (na != n)
        return rel_error(rc, "axes %s has %u entries but data has rank %u", ints_str(rc, na, axes),
                         na, n);
    int64_t *seen = rel_dims(rc, n);
    for (uint32_t i = 0; i < n; i++) {
        int64_t a;
        if (!rel_axis(rc, axes[i], n, "axis", &a)) return REL_ERROR;
        if (seen[a])
            return rel_error(rc, "axes %s names axis %lld twice", ints_str(rc, na, axes),
                             (long long)a);
        seen[a] = 1;
        out[i] = data->shape[a];
    }
    return rel_out_tensor(rc, data->dtype, n, out);
}

/* ---- concatenate, stack -------------------------------------------------------------------- */

/* The tensors of a tuple argument, all of one rank and dtype. */
static TensorType **same_kind_tuple(RelCall *rc, uint32_t *k) {
    TensorType **ts = rel_tensor_tuple(rc, 0, k);
    if (ts == NULL) return NULL;
    if (*k == 0) {
        rel_error(rc, "needs at least one tensor, got an empty tuple");
        return NULL;
    }
    for (uint32_t i = 1; i < *k; i++) {
        if (ts[i]->dtype != ts[0]->dtype) {
            rel_error(rc, "tensor %u has dtype %s but tensor 0 has %s", i,
                      sup_dtype_name(ts[i]->dtype), sup_dtype_name(ts[0]->dtype));
            return NULL;
        }
        if (ts[i]->ndim != ts[0]->ndim) {
            rel_error(rc, "tensor %u has rank %u but tensor 0 has rank %u", i, ts[i]->ndim,
                      ts[0]->ndim);
            return NULL;
        }
    }
    return ts;
}

static RelResult concatenate_rel(RelCall *rc) {
    uint32_t k;
    TensorType **ts = same_kind_tuple(rc, &k);
    if (ts == NULL) return rc->status;
    uint32_t n = ts[0]->ndim;
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), n, "axis", &axis)) return REL_ERROR;
    int64_t *out = rel_dims(rc, n);
    for (uint32_t j = 0; j < n; j++)
        out[j] = ts[0]->shape[j];
    for (uint32_t i = 1; i < k; i++)
        for (uint32_t j = 0; j < n; j++) {
            if (j == axis) {
                if (!rel_dim_add(rc, out[j], ts[i]->shape[j], &out[j])) return REL_ERROR;
            } else if (dim_compat(out[j], ts[i]->shape[j])) {
                out[j] = dim_merge(out[j], ts[i]->shape[j]);
            } else {
                return rel_error(rc,
                                 "tensor %u has shape %s, which differs from tensor 0's %s "
                                 "outside axis %lld",
                                 i, shape_of(rc, ts[i]), shape_of(rc, ts[0]), (long long)axis);
            }
        }
    return rel_out_tensor(rc, ts[0]->dtype, n, out);
}

static RelResult stack_rel(RelCall *rc) {
    uint32_t k;
    TensorType **ts = same_kind_tuple(rc, &k);
    if (ts == NULL) return rc->status;
    int64_t n = ts[0]->ndim, axis = attr_int(rc, "axis");
    if (axis < -n - 1 || axis > n)
        return rel_error(rc,
                         "axis %lld is out of range for stacking tensors of rank %lld (valid: "
                         "%lld to %lld)",
                         (long long)axis, (long long)n, (long long)(-n - 1), (long long)n);
    if (axis < 0) axis += n + 1;
    int64_t *same = rel_dims(rc, (uint32_t)n);
    for (int64_t j = 0; j < n; j++)
        same[j] = ts[0]->shape[j];
    for (uint32_t i = 1; i < k; i++)
        for (int64_t j = 0; j < n; j++) {
            if (!dim_compat(same[j], ts[i]->shape[j]))
                return rel_error(rc,
                                 "tensor %u has shape %s but tensor 0 has %s; stacked tensors "
                                 "must have one shape",
                                 i, shape_of(rc, ts[i]), shape_of(rc, ts[0]));
            same[j] = dim_merge(same[j], ts[i]->shape[j]);
        }
    int64_t *out = rel_dims(rc, (uint32_t)n + 1);
    for (int64_t j = 0, o = 0; j <= n; j++)
        out[j] = j == axis ? (int64_t)k : same[o++];
    return rel_out_tensor(rc, ts[0]->dtype, (uint32_t)n + 1, out);
}

/* ---- split -------------------------------------------------------------------------------- */

static RelResult split_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    uint32_t n = data->ndim;
    if (n == 0) return rel_error(rc, "cannot split a 0-d tensor");
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), n, "axis", &axis)) return REL_ERROR;
    int64_t d = data->shape[axis];
    const AttrValue *v = attr_value(rc, "indices_or_sections");
    Type **fields;
    uint32_t nf;
    if (v->kind == ATTR_INT || v->kind == ATTR_BOOL) {
        int64_t s = v->kind == ATTR_INT ? v->i : v->b;
        if (s <= 0)
            return rel_error(rc, "the number of sections must be positive, got %lld", (long long)s);
        if (s > MAX_FIELDS)
            return rel_error(rc, "%lld sections are too many (the limit is %d)", (long long)s,
                             MAX_FIELDS);
        if (dim_known(d) && d % s != 0)
            return rel_error(rc, "axis %lld of size %lld does not divide into %lld equal sections",
                             (long long)axis, (long long)d, (long long)s);
        int64_t *shape = rel_dims(rc, n);
        memcpy(shape, data->shape, n * sizeof(int64_t));
        shape[axis] = dim_floordiv(d, s);
        Type *t = ir_type_tensor(rc->ctx, data->dtype, n, shape);
        nf = (uint32_t)s;
        fields = arena_array(&rc->ctx->arena, nf, sizeof(Type *));
        for (uint32_t i = 0; i < nf; i++)
            fields[i] = t;
        return rel_out(rc, ir_type_tuple(rc->ctx, nf, fields));
    }
    if (v->kind != ATTR_LIST)
        return rel_error(rc, "indices_or_sections must be an integer or a list of integers");
    nf = v->list.n + 1;
    if (nf > MAX_FIELDS)
        return rel_error(rc, "%u indices are too many (the limit is %d)", v->list.n,
                         MAX_FIELDS - 1);
    fields = arena_array(&rc->ctx->arena, nf, sizeof(Type *));
    int64_t *idx = rel_dims(rc, nf);
    for (uint32_t i = 0; i < v->list.n; i++) {
        const AttrValue *it = v->list.items[i];
        if (it->kind != ATTR_INT && it->kind != ATTR_BOOL)
            return rel_error(rc, "indices_or_sections must be an integer or a list of integers");
        idx[i] = it->kind == ATTR_INT ? it->i : it->b;
    }
    for (uint32_t i = 0; i < v->list.n; i++) {
        if (idx[i] <= (i ? idx[i - 1] : 0))
            return rel_error(rc, "split indices %s must be positive and strictly ascending",
                             ints_str(rc, v->list.n, idx));
        if (dim_known(d) && idx[i] >= d)
            return rel_error(rc, "split index %lld is not inside axis %lld of size %lld",
                             (long long)idx[i], (long long)axis, (long long)d);
    }
    for (uint32_t i = 0; i < nf; i++) {
        int64_t prev = i ? idx[i - 1] : 0;
        int64_t *shape = rel_dims(rc, n);
        memcpy(shape, data->shape, n * sizeof(int64_t));
        shape[axis] = i < v->list.n ? idx[i] - prev : dim_sub(d, prev);
        fields[i] = ir_type_tensor(rc->ctx, data->dtype, n, shape);
    }
    return rel_out(rc, ir_type_tuple(rc->ctx, nf, fields));
}

/* ---- tile, repeat, reverse, reverse_sequence ------------------------------------------------ */

static RelResult tile_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    const int64_t *reps;
    uint32_t r = attr_ints(rc, "reps", &reps), n = data->ndim, t = n > r ? n : r;
    if (t > MAX_RANK) return rel_error(rc, "reps has %u entries (the limit is %d)", r, MAX_RANK);
    int64_t *out = rel_dims(rc, t);
    for (uint32_t i = 0; i < t; i++) {
        int64_t d = i < t - n ? 1 : data->shape[i - (t - n)];
        int64_t k = i < t - r ? 1 : reps[i - (t - r)];
        if (k < 0) /* 0 empties the axis, as numpy.tile and ONNX Tile allow */
            return rel_error(rc, "reps must not be negative, got %s", ints_str(rc, r, reps));
        if (!rel_dim_mul(rc, d, k, &out[i])) return REL_ERROR;
    }
    return rel_out_tensor(rc, data->dtype, t, out);
}

static RelResult repeat_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int64_t k = attr_int(rc, "repeats"), axis;
    if (k < 1) return rel_error(rc, "repeats must be >= 1, got %lld", (long long)k);
    if (attr_is_none(rc, "axis")) return rel_error(rc, "attribute axis is required");
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    int64_t *out = rel_dims(rc, data->ndim);
    memcpy(out, data->shape, data->ndim * sizeof(int64_t));
    if (!rel_dim_mul(rc, out[axis], k, &out[axis])) return REL_ERROR;
    return rel_out_tensor(rc, data->dtype, data->ndim, out);
}

static RelResult reverse_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    int64_t axis;
    if (attr_is_none(rc, "axis")) return rel_error(rc, "attribute axis is required");
    if (!rel_axis(rc, attr_int(rc, "axis"), data->ndim, "axis", &axis)) return REL_ERROR;
    return rel_out(rc, &data->base);
}

static RelResult reverse_sequence_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(lens, rc, 1);
    int64_t seq, batch;
    if (!rel_axis(rc, attr_int(rc, "seq_axis"), data->ndim, "seq_axis", &seq) ||
        !rel_axis(rc, attr_int(rc, "batch_axis"), data->ndim, "batch_axis", &batch))
        return REL_ERROR;
    if (seq == batch)
        return rel_error(rc, "seq_axis and batch_axis are both axis %lld; they must differ",
                         (long long)seq);
    if (lens->ndim != 1 || !rel_is_integer(lens->dtype))
        return rel_error_arg(rc, 1, "seq_lengths must be a 1-D integer tensor, got %s",
                             rel_type_str(rc, &lens->base));
    if (!dim_compat(lens->shape[0], data->shape[batch]))
        return rel_error_arg(rc, 1,
                             "seq_lengths has %s entries but batch axis %lld of data has "
                             "size %s",
                             rel_dim_str(rc, lens->shape[0]), (long long)batch,
                             rel_dim_str(rc, data->shape[batch]));
    return rel_out(rc, &data->base);
}

/* ---- where, broadcast_to(_like), collapse_sum_like/to -------------------------------------- */

static RelResult where_rel(RelCall *rc) {
    REL_TENSOR(cond, rc, 0);
    REL_TENSOR(x, rc, 1);
    REL_TENSOR(y, rc, 2);
    if (x->dtype != y->dtype)
        return rel_error_arg(rc, 2, "x and y must have one dtype, got %s and %s",
                             sup_dtype_name(x->dtype), sup_dtype_name(y->dtype));
    uint32_t nxy, n;
    int64_t *sxy, *s;
    if (!rel_broadcast(rc, x->ndim, x->shape, y->ndim, y->shape, &nxy, &sxy) ||
        !rel_broadcast(rc, cond->ndim, cond->shape, nxy, sxy, &n, &s))
        return REL_ERROR;
    return rel_out_tensor(rc, x->dtype, n, s);
}

/* Where `from` fails to broadcast to exactly `to` (numpy rules, the result equal to `to`): -1 when
 * it does, `nt` when `from` has the higher rank, else the failing dimension of `to`. */
static int64_t broadcast_mismatch(uint32_t nf, const int64_t *from, uint32_t nt,
                                  const int64_t *to) {
    if (nf > nt) return nt;
    for (uint32_t i = 0; i < nf; i++) {
        int64_t f = from[i], t = to[nt - nf + i];
        if (f != 1 && !dim_compat(f, t)) return nt - nf + i;
    }
    return -1;
}

static bool broadcasts_to(RelCall *rc, uint32_t nf, const int64_t *from, uint32_t nt,
                          const int64_t *to) {
    int64_t at = broadcast_mismatch(nf, from, nt, to);
    if (at < 0) return true;
    if (at == nt)
        rel_error(rc, "cannot broadcast %s to %s: the target has lower rank",
                  rel_shape_str(rc, nf, from), rel_shape_str(rc, nt, to));
    else
        rel_error(rc, "cannot broadcast %s to %s (dimension %lld: %s vs %s)",
                  rel_shape_str(rc, nf, from), rel_shape_str(rc, nt, to), (long long)at,
                  rel_dim_str(rc, from[at - (nt - nf)]), rel_dim_str(rc, to[at]));
    return false;
}

static bool same_dtype(RelCall *rc, const TensorType *a, const TensorType *b) {
    if (a->dtype == b->dtype) return true;
    rel_error_arg(rc, 1, "dtypes differ: %s and %s", sup_dtype_name(a->dtype),
                  sup_dtype_name(b->dtype));
    return false;
}

static RelResult broadcast_to_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    const int64_t *shape;
    uint32_t n = attr_ints(rc, "shape", &shape);
    for (uint32_t i = 0; i < n; i++)
        if (shape[i] < 0)
            return rel_error(rc, "shape %s has a negative size", ints_str(rc, n, shape));
    if (!broadcasts_to(rc, data->ndim, data->shape, n, shape)) return REL_ERROR;
    return rel_out_tensor(rc, data->dtype, n, shape);
}

static RelResult broadcast_to_like_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(like, rc, 1);
    if (!same_dtype(rc, data, like)) return REL_ERROR;
    if (!broadcasts_to(rc, data->ndim, data->shape, like->ndim, like->shape)) return REL_ERROR;
    int64_t *out = rel_dims(rc, like->ndim);
    for (uint32_t i = 0; i < like->ndim; i++) {
        int64_t t = like->shape[i];
        uint32_t off = like->ndim - data->ndim;
        out[i] = i >= off && data->shape[i - off] != 1 ? dim_merge(t, data->shape[i - off]) : t;
    }
    return rel_out_tensor(rc, data->dtype, like->ndim, out);
}

/* Collapsing sums `data` down to `to`: `to` must broadcast back to data's shape. */
static RelResult collapse_to(RelCall *rc, TensorType *data, uint32_t n, const int64_t *to) {
    int64_t at = broadcast_mismatch(n, to, data->ndim, data->shape);
    if (at == data->ndim)
        return rel_error(rc, "cannot collapse %s to the higher rank shape %s", shape_of(rc, data),
                         rel_shape_str(rc, n, to));
    if (at >= 0)
        return rel_error(rc, "cannot collapse %s to %s (dimension %lld: %s vs %s)",
                         shape_of(rc, data), rel_shape_str(rc, n, to), (long long)at,
                         rel_dim_str(rc, data->shape[at]),
                         rel_dim_str(rc, to[at - (data->ndim - n)]));
    return rel_out_tensor(rc, data->dtype, n, to);
}

static RelResult collapse_sum_like_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(like, rc, 1);
    if (!same_dtype(rc, data, like)) return REL_ERROR;
    return collapse_to(rc, data, like->ndim, like->shape);
}

static RelResult collapse_sum_to_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(shape_t, rc, 1);
    if (shape_t->ndim != 1 || !rel_is_integer(shape_t->dtype))
        return rel_error_arg(rc, 1, "shape must be a 1-D integer tensor, got %s",
                             rel_type_str(rc, &shape_t->base));
    int64_t len = shape_t->shape[0];
    if (attr_is_none(rc, "shape")) {
        if (!dim_known(len))
            return rel_error(rc,
                             "the target rank is unknown: shape has type %s and no shape "
                             "attribute is given",
                             rel_type_str(rc, &shape_t->base));
        if (len > data->ndim)
            return rel_error(rc, "cannot collapse %s to rank %lld", shape_of(rc, data),
                             (long long)len);
        int64_t *to = rel_dims(rc, (uint32_t)len);
        for (int64_t i = 0; i < len; i++)
            to[i] = DIM_ANY;
        return collapse_to(rc, data, (uint32_t)len, to);
    }
    const int64_t *to;
    uint32_t n = attr_ints(rc, "shape", &to);
    if (dim_known(len) && len != n)
        return rel_error_arg(rc, 1,
                             "the shape attribute %s has %u entries but the shape argument "
                             "has %lld",
                             ints_str(rc, n, to), n, (long long)len);
    for (uint32_t i = 0; i < n; i++)
        if (to[i] < 0) return rel_error(rc, "shape %s has a negative size", ints_str(rc, n, to));
    return collapse_to(rc, data, n, to);
}

/* ---- layout_transform ---------------------------------------------------------------------- */

/* A data layout such as "NCHW" or "NCHW16c": primal axes are capitals, a split-off sub-axis is
 * its lower-case letter preceded by its size. */
static RelResult layout_transform_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    const char *src_s = attr_str(rc, "src_layout"), *dst_s = attr_str(rc, "dst_layout");
    Layout src, dst;
    if (!rel_layout_parse(rc, "src_layout", src_s, &src) ||
        !rel_layout_parse(rc, "dst_layout", dst_s, &dst))
        return REL_ERROR;
    for (uint32_t i = 0; i < src.n; i++)
        if (!src.factor[i] && layout_find(&dst, src.axis[i]) < 0)
            return rel_error(rc, "cannot convert %s to %s: axis %c is missing from %s", src_s,
                             dst_s, src.axis[i], dst_s);
    for (uint32_t i = 0; i < dst.n; i++)
        if (!dst.factor[i] && layout_find(&src, dst.axis[i]) < 0)
            return rel_error(rc, "cannot convert %s to %s: axis %c is missing from %s", src_s,
                             dst_s, dst.axis[i], src_s);
    if (data->ndim != src.n)
        return rel_error(rc, "data has rank %u but src_layout %s has %u axes", data->ndim, src_s,
                         src.n);
    int64_t *out = rel_dims(rc, dst.n);
    for (uint32_t i = 0; i < src.n; i++)
        if (src.factor[i] && !dim_compat(data->shape[i], src.factor[i]))
            return rel_error(rc, "axis %u (%c) of data has size %s but src_layout %s says %lld", i,
                             src.axis[i], rel_dim_str(rc, data->shape[i]), src_s,
                             (long long)src.factor[i]);
    for (uint32_t i = 0; i < dst.n; i++) {
        if (dst.factor[i]) {
            out[i] = dst.factor[i];
            continue;
        }
        /* the full extent of the primal axis, then its outer part in dst */
        char c = dst.axis[i], sub = (char)tolower((unsigned char)c);
        int64_t full = data->shape[layout_find(&src, c)];
        int si = layout_find(&src, sub), di = layout_find(&dst, sub);
        if (si >= 0 && !rel_dim_mul(rc, full, src.factor[si], &full)) return REL_ERROR;
        out[i] = di >= 0 ? dim_ceildiv(full, dst.factor[di]) : full;
    }
    return rel_out_tensor(rc, data->dtype, dst.n, out);
}

/* ---- strided_slice, slice_like -------------------------------------------------------------- */

#define END_OF_AXIS ((int64_t)INT32_MAX) /* an end at least this large means "to the end" */

/* The length of one sliced axis of known size d (numpy clamping). */
static int64_t slice_len(int64_t d, bool has_b, int64_t b, bool has_e, int64_t e, int64_t st) {
    int64_t mag = st == INT64_MIN ? INT64_MAX : (st < 0 ? -st : st);
    if (st > 0) {
        b = has_b ? b : 0;
        e = has_e ? e : d;
        if (b < 0) b += d;
        if (e < 0) e += d;
        b = b < 0 ? 0 : b > d ? d : b;
        e = e < 0 ? 0 : e > d ? d : e;
        return e > b ? ceil_div_pos(e - b, mag) : 0;
    }
    b = has_b ? b : d - 1;
    if (b < 0) b += d;
    b = b < -1 ? -1 : b > d - 1 ? d - 1 : b;
    if (has_e) {
        if (e < 0) e += d;
        e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
    } else {
        e = -1;
    }
    return b > e ? ceil_div_pos(b - e, mag) : 0;
}

static RelResult strided_slice_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    uint32_t n = data->ndim, nax;
    const int64_t *b, *e, *s, *given;
    uint32_t nb = attr_ints(rc, "begin", &b), ne = attr_ints(rc, "end", &e),
             ns = attr_ints(rc, "strides", &s);
    bool size_mode = strcmp(attr_str(rc, "slice_mode"), "size") == 0;
    int64_t *axes;
    if (attr_is_none(rc, "axes")) {
        if (nb > n || ne > n || ns > n)
            return rel_error(rc,
                             "begin, end and strides have %u, %u and %u entries but data has "
                             "rank %u",
                             nb, ne, ns, n);
        nax = n;
        axes = rel_dims(rc, n);
        for (uint32_t i = 0; i < n; i++)
            axes[i] = i;
    } else {
        nax = attr_ints(rc, "axes", &given);
        if (nb != nax || ne != nax || ns > nax)
            return rel_error(rc,
                             "axes has %u entries, so begin and end need %u each (and strides "
                             "at most %u); got %u, %u and %u",
                             nax, nax, nax, nb, ne, ns);
        axes = rel_dims(rc, nax);
        int64_t *seen = rel_dims(rc, n);
        for (uint32_t i = 0; i < nax; i++) {
            if (!rel_axis(rc, given[i], n, "axis", &axes[i])) return REL_ERROR;
            if (seen[axes[i]])
                return rel_error(rc, "axes names axis %lld twice", (long long)axes[i]);
            seen[axes[i]] = 1;
        }
    }
    int64_t *out = rel_dims(rc, n);
    memcpy(out, data->shape, n * sizeof(int64_t));
    for (uint32_t i = 0; i < nax; i++) {
        int64_t a = axes[i], d = data->shape[a];
        int64_t st = size_mode || i >= ns ? 1 : s[i];
        if (st == 0)
            return rel_error(rc, "strides %s has a 0; strides must be nonzero",
                             ints_str(rc, ns, s));
        bool has_b = i < nb, has_e = i < ne;
        int64_t bi = has_b ? b[i] : 0, ei = has_e ? e[i] : 0;
        if (size_mode) {
            if (!dim_known(d)) {
                out[a] = bi == 0 && (!has_e || ei < 0) ? d : DIM_ANY;
                continue;
            }
            if (bi < 0) bi += d;
            bi = bi < 0 ? 0 : bi > d ? d : bi;
            out[a] = !has_e || ei < 0 || ei > d - bi ? d - bi : ei;
            continue;
        }
        if (!dim_known(d)) {
            bool whole = st > 0 && bi == 0 && (!has_e || ei >= END_OF_AXIS);
            out[a] = whole ? dim_ceildiv(d, st) : DIM_ANY;
            continue;
        }
        out[a] = slice_len(d, has_b, bi, has_e, ei, st);
    }
    return rel_out_tensor(rc, data->dtype, n, out);
}

static RelResult slice_like_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(like, rc, 1);
    uint32_t n = data->ndim;
    int64_t *out = rel_dims(rc, n);
    memcpy(out, data->shape, n * sizeof(int64_t));
    const int64_t *given;
    uint32_t na = attr_ints(rc, "axes", &given);
    bool all = attr_is_none(rc, "axes");
    if (!all && na == 0) return rel_error(rc, "axes must not be empty");
    uint32_t count = all ? (n < like->ndim ? n : like->ndim) : na;
    for (uint32_t i = 0; i < count; i++) {
        int64_t a = i;
        if (!all && !rel_axis(rc, given[i], n, "axis", &a)) return REL_ERROR;
        if (a >= like->ndim)
            return rel_error_arg(rc, 1, "axis %lld is beyond the rank %u of shape_like",
                                 (long long)a, like->ndim);
        int64_t t = like->shape[a], d = data->shape[a];
        if (dim_known(t) && dim_known(d) && t > d)
            return rel_error_arg(rc, 1,
                                 "shape_like has size %lld on axis %lld, larger than data's "
                                 "%lld",
                                 (long long)t, (long long)a, (long long)d);
        out[a] = t;
    }
    return rel_out_tensor(rc, data->dtype, n, out);
}

/* ---- meshgrid ------------------------------------------------------------------------------- */

static RelResult meshgrid_rel(RelCall *rc) {
    uint32_t k;
    TensorType **ts = rel_tensor_tuple(rc, 0, &k);
    if (ts == NULL) return rc->status;
    if (k == 0) return rel_error(rc, "needs at least one tensor, got an empty tuple");
    if (k > MAX_RANK)
        return rel_error(rc, "%u tensors are too many (the limit is %d)", k, MAX_RANK);
    int64_t *grid = rel_dims(rc, k);
    for (uint32_t i = 0; i < k; i++) {
        if (ts[i]->dtype != ts[0]->dtype)
            return rel_error(rc, "tensor %u has dtype %s but tensor 0 has %s", i,
                             sup_dtype_name(ts[i]->dtype), sup_dtype_name(ts[0]->dtype));
        if (ts[i]->ndim > 1)
            return rel_error(rc, "tensor %u has shape %s; meshgrid takes scalars and 1-D tensors",
                             i, shape_of(rc, ts[i]));
        grid[i] = ts[i]->ndim ? ts[i]->shape[0] : 1;
    }
    if (strcmp(attr_str(rc, "indexing"), "xy") == 0 && k >= 2) {
        int64_t t = grid[0];
        grid[0] = grid[1];
        grid[1] = t;
    }
    Type *t = ir_type_tensor(rc->ctx, ts[0]->dtype, k, grid);
    Type **fields = arena_array(&rc->ctx->arena, k, sizeof(Type *));
    for (uint32_t i = 0; i < k; i++)
        fields[i] = t;
    return rel_out(rc, ir_type_tuple(rc->ctx, k, fields));
}

/* ---- einsum ---------------------------------------------------------------------------------- */

static RelResult einsum_rel(RelCall *rc) {
    uint32_t k;
    TensorType **ts = rel_tensor_tuple(rc, 0, &k);
    if (ts == NULL) return rc->status;
    if (k == 0) return rel_error(rc, "needs at least one tensor, got an empty tuple");
    for (uint32_t i = 1; i < k; i++)
        if (ts[i]->dtype != ts[0]->dtype)
            return rel_error(rc, "tensor %u has dtype %s but tensor 0 has %s", i,
                             sup_dtype_name(ts[i]->dtype), sup_dtype_name(ts[0]->dtype));
    const char *eq = attr_str(rc, "equation");
    SupEinsum *ein = arena_alloc(&rc->ctx->arena, sizeof *ein);
    char why[256];
    if (sup_einsum_parse(eq, ein, why, sizeof why) != NULL) return rel_error(rc, "%s", why);
    if (ein->n_in != k)
        return rel_error(rc, "equation \"%s\" has %u input terms but %u tensors are given", eq,
                         ein->n_in, k);
    /* the size of each label, and the broadcast shape of the ellipsis dims */
    int64_t size[SUP_EINSUM_LABELS] = {0};
    bool seen[SUP_EINSUM_LABELS] = {0};
    uint32_t n_ell = 0;
    for (uint32_t i = 0; i < k; i++) {
        const SupEinsumTerm *t = &ein->in[i];
        uint32_t labels = t->n - (t->has_ellipsis ? 1 : 0);
        if (t->has_ellipsis ? ts[i]->ndim < labels : ts[i]->ndim != labels)
            return rel_error(rc, "term %u of \"%s\" has %u labels but tensor %u has rank %u", i, eq,
                             labels, i, ts[i]->ndim);
        uint32_t ell = ts[i]->ndim - labels;
        if (ell > n_ell) n_ell = ell;
    }
    int64_t *ell_shape = rel_dims(rc, n_ell);
    for (uint32_t j = 0; j < n_ell; j++)
        ell_shape[j] = 1;
    for (uint32_t i = 0; i < k; i++) {
        const SupEinsumTerm *t = &ein->in[i];
        uint32_t ell = ts[i]->ndim - (t->n - (t->has_ellipsis ? 1 : 0)), dim = 0;
        for (uint32_t j = 0; j < t->n; j++) {
            int l = ein->items[t->start + j];
            if (l == SUP_EINSUM_ELLIPSIS) {
                for (uint32_t e = 0; e < ell; e++) {
                    int64_t *slot = &ell_shape[n_ell - ell + e], d = ts[i]->shape[dim++];
                    if (!dim_broadcast(*slot, d, slot))
                        return rel_error(rc,
                                         "the \"...\" dims of tensor %u (%s) do not broadcast "
                                         "with the others",
                                         i, shape_of(rc, ts[i]));
                }
                continue;
            }
            int64_t d = ts[i]->shape[dim++];
            if (!seen[l])
                size[l] = d, seen[l] = true;
            else if (!dim_compat(size[l], d))
                return rel_error(rc, "label %c has size %s in one place and %s in tensor %u",
                                 sup_einsum_char(l), rel_dim_str(rc, size[l]), rel_dim_str(rc, d),
                                 i);
            else
                size[l] = dim_merge(size[l], d);
        }
    }
    if (n_ell > 0 && !ein->out.has_ellipsis)
        return rel_error(rc,
                         "equation \"%s\": the inputs have \"...\" dims but the output has no "
                         "\"...\"",
                         eq);
    /* the parser checked the output's labels */
    uint32_t rank = ein->out.n - (ein->out.has_ellipsis ? 1 : 0) + n_ell;
    if (rank > MAX_RANK) return rel_error(rc, "the result would have rank %u", rank);
    int64_t *out = rel_dims(rc, rank);
    uint32_t o = 0;
    for (uint32_t j = 0; j < ein->out.n; j++) {
        int l = ein->items[ein->out.start + j];
        if (l == SUP_EINSUM_ELLIPSIS)
            for (uint32_t e = 0; e < n_ell; e++)
                out[o++] = ell_shape[e];
        else
            out[o++] = size[l];
    }
    return rel_out_tensor(rc, ts[0]->dtype, o, out);
}

/* ---- trilu, matrix_set_diag, sliding_window, invert_permutation ------------------------------ */

static RelResult trilu_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    REL_TENSOR(kt, rc, 1);
    if (data->ndim < 2)
        return rel_error(rc, "data must have rank 2 or more, got shape %s", shape_of(rc, data));
    if (kt->ndim != 0 || !rel_is_integer(kt->dtype))
        return rel_error_arg(rc, 1, "k must be a 0-d integer tensor, got %s",
                             rel_type_str(rc, &kt->base));
    return rel_out(rc, &data->base);
}

static RelResult matrix_set_diag_rel(RelCall *rc) {
    REL_TENSOR(in, rc, 0);
    REL_TENSOR(diag, rc, 1);
    if (!same_dtype(rc, in, diag)) return REL_ERROR;
    uint32_t r = in->ndim;
    if (r < 2)
        return rel_error(rc, "input must have rank 2 or more, got shape %s", shape_of(rc, in));
    int64_t k1 = attr_int(rc, "k1"), k2 = attr_int(rc, "k2");
    if (k1 > k2)
        return rel_error(rc, "k1 (%lld) must not be larger than k2 (%lld)", (long long)k1,
                         (long long)k2);
    int64_t m = in->shape[r - 2], nc = in->shape[r - 1];
    if ((dim_known(m) && k1 <= -m) || (dim_known(nc) && k2 >= nc))
        return rel_error(rc, "diagonals k1 = %lld to k2 = %lld do not all lie in a %s x %s matrix",
                         (long long)k1, (long long)k2, rel_dim_str(rc, m), rel_dim_str(rc, nc));
    int64_t span; /* k2 - k1 + 1 diagonals: within the shape limit */
    if (__builtin_sub_overflow(k2, k1, &span) || span >= SUP_DIM_MAX)
        return rel_error(rc, "k1 = %lld and k2 = %lld are too far apart", (long long)k1,
                         (long long)k2);
    uint32_t want = k1 == k2 ? r - 1 : r;
    if (diag->ndim != want)
        return rel_error_arg(rc, 1,
                             "diagonal must have rank %u for k1 = %lld, k2 = %lld, got "
                             "shape %s",
                             want, (long long)k1, (long long)k2, shape_of(rc, diag));
    for (uint32_t i = 0; i + 2 < r; i++)
        if (!dim_compat(in->shape[i], diag->shape[i]))
            return rel_error_arg(rc, 1, "diagonal %s and input %s differ in batch dimension %u",
                                 shape_of(rc, diag), shape_of(rc, in), i);
    if (k1 != k2 && !dim_compat(diag->shape[r - 2], k2 - k1 + 1))
        return rel_error_arg(rc, 1,
                             "diagonal has %s diagonals but k1 = %lld to k2 = %lld needs "
                             "%lld",
                             rel_dim_str(rc, diag->shape[r - 2]), (long long)k1, (long long)k2,
                             (long long)(k2 - k1 + 1));
    if (dim_known(m) && dim_known(nc)) {
        int64_t rows = m + (k2 < 0 ? k2 : 0), cols = nc - (k1 > 0 ? k1 : 0);
        int64_t len = rows < cols ? rows : cols;
        if (!dim_compat(diag->shape[want - 1], len))
            return rel_error_arg(rc, 1,
                                 "diagonal has length %s but the longest diagonal from k1 = "
                                 "%lld to k2 = %lld in a %lld x %lld matrix has %lld",
                                 rel_dim_str(rc, diag->shape[want - 1]), (long long)k1,
                                 (long long)k2, (long long)m, (long long)nc, (long long)len);
    }
    return rel_out(rc, &in->base);
}

static RelResult sliding_window_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    uint32_t n = data->ndim;
    int64_t axis;
    if (!rel_axis(rc, attr_int(rc, "axis"), n, "axis", &axis)) return REL_ERROR;
    const int64_t *win, *str;
    uint32_t nw = attr_ints(rc, "window_shape", &win), ns = attr_ints(rc, "strides", &str);
    uint32_t m = n - (uint32_t)axis;
    if (nw != m || ns != m)
        return rel_error(rc,
                         "window_shape and strides need %u entries each (rank %u minus axis "
                         "%lld), got %u and %u",
                         m, n, (long long)axis, nw, ns);
    int64_t *out = rel_dims(rc, n + m);
    for (uint32_t i = 0; i < (uint32_t)axis; i++)
        out[i] = data->shape[i];
    for (uint32_t i = 0; i < m; i++) {
        int64_t d = data->shape[axis + i], w = win[i], s = str[i];
        if (w <= 0 || s <= 0)
            return rel_error(rc, "window_shape %s and strides %s must be positive",
                             ints_str(rc, nw, win), ints_str(rc, ns, str));
        if (dim_known(d) && d < w)
            return rel_error(rc, "window size %lld is larger than axis %lld of size %lld",
                             (long long)w, (long long)(axis + i), (long long)d);
        out[axis + i] = dim_known(d) ? (d - w) / s + 1 : (w == 1 && s == 1 ? d : DIM_ANY);
        out[n + i] = w;
    }
    return rel_out_tensor(rc, data->dtype, n + m, out);
}

static RelResult invert_permutation_rel(RelCall *rc) {
    REL_TENSOR(data, rc, 0);
    if (data->ndim != 1 || !rel_is_integer(data->dtype))
        return rel_error(rc, "data must be a 1-D integer tensor, got %s",
                         rel_type_str(rc, &data->base));
    return rel_out(rc, &data->base);
}

/* ---- the table ------------------------------------------------------------------------------- */

static const AttrSpec cast_attrs[] = {{"dtype", AT_DTYPE, NULL, NULL}, {0}};
static const AttrSpec expand_dims_attrs[] = {
    {"axis", AT_INT, NULL, NULL}, {"num_newaxis", AT_INT, "1", NULL}, {0}};
static const AttrSpec squeeze_attrs[] = {{"axis", AT_OPT_INTS, "None", NULL}, {0}};
static const AttrSpec reshape_attrs[] = {
    {"newshape", AT_INTS, NULL, NULL}, {"allowzero", AT_BOOL, "False", NULL}, {0}};
static const AttrSpec reshape_like_attrs[] = {{"lhs_begin", AT_INT, "0", NULL},
                                              {"lhs_end", AT_OPT_INT, "None", NULL},
                                              {"rhs_begin", AT_INT, "0", NULL},
                                              {"rhs_end", AT_OPT_INT, "None", NULL},
                                              {0}};
static const AttrSpec transpose_attrs[] = {{"axes", AT_OPT_INTS, "None", NULL}, {0}};
static const AttrSpec axis0_attrs[] = {{"axis", AT_INT, "0", NULL}, {0}};
static const AttrSpec split_attrs[] = {
    {"indices_or_sections", AT_ANY, NULL, NULL}, {"axis", AT_INT, "0", NULL}, {0}};
static const AttrSpec tile_attrs[] = {{"reps", AT_INTS, NULL, NULL}, {0}};
static const AttrSpec repeat_attrs[] = {
    {"repeats", AT_INT, NULL, NULL}, {"axis", AT_OPT_INT, "None", NULL}, {0}};
static const AttrSpec reverse_attrs[] = {{"axis", AT_OPT_INT, "None", NULL}, {0}};
static const AttrSpec reverse_sequence_attrs[] = {
    {"seq_axis", AT_INT, "1", NULL}, {"batch_axis", AT_INT, "0", NULL}, {0}};
static const AttrSpec broadcast_to_attrs[] = {
    {"shape", AT_INTS, NULL, NULL}, {"dtype", AT_DTYPE, "\"\"", NULL}, {0}};
static const AttrSpec collapse_sum_to_attrs[] = {
    {"shape", AT_OPT_INTS, "None", NULL}, {"dtype", AT_DTYPE, "\"\"", NULL}, {0}};
static const AttrSpec layout_transform_attrs[] = {
    {"src_layout", AT_STR, NULL, NULL}, {"dst_layout", AT_STR, NULL, NULL}, {0}};
static const AttrSpec strided_slice_attrs[] = {
    {"begin", AT_INTS, NULL, NULL},      {"end", AT_INTS, NULL, NULL},
    {"strides", AT_INTS, "[1]", NULL},   {"slice_mode", AT_STR, "\"end\"", "end|size"},
    {"axes", AT_OPT_INTS, "None", NULL}, {0}};
static const AttrSpec slice_like_attrs[] = {{"axes", AT_OPT_INTS, "None", NULL}, {0}};
static const AttrSpec meshgrid_attrs[] = {{"indexing", AT_STR, "\"ij\"", "ij|xy"}, {0}};
static const AttrSpec einsum_attrs[] = {{"equation", AT_STR, NULL, NULL}, {0}};
static const AttrSpec trilu_attrs[] = {{"upper", AT_BOOL, "True", NULL}, {0}};
static const AttrSpec matrix_set_diag_attrs[] = {{"k1", AT_INT, "0", NULL},
                                                 {"k2", AT_INT, "0", NULL},
                                                 {"super_diag_right_align", AT_BOOL, "True", NULL},
                                                 {"sub_diag_right_align", AT_BOOL, "False", NULL},
                                                 {0}};
static const AttrSpec sliding_window_attrs[] = {{"axis", AT_INT, NULL, NULL},
                                                {"window_shape", AT_INTS, NULL, NULL},
                                                {"strides", AT_INTS, NULL, NULL},
                                                {0}};

OpDef ops_transform_table[] = {
    OP_ROW(CAST, 1, OP_ELEMWISE, cast_rel, cast_attrs, "data", "convert to dtype, elementwise"),
    OP_ROW(CAST_LIKE, 2, OP_ELEMWISE, cast_like_rel, NULL, "data, dtype_like",
           "convert data to the dtype of dtype_like"),
    OP_ROW(REINTERPRET, 1, OP_ELEMWISE, reinterpret_rel, cast_attrs, "data",
           "view the bits of data as dtype (same bit width)"),
    OP_ROW(EXPAND_DIMS, 1, OP_BROADCAST, expand_dims_rel, expand_dims_attrs, "data",
           "insert num_newaxis size-1 axes at axis"),
    OP_ROW(SQUEEZE, 1, OP_INJECTIVE, squeeze_rel, squeeze_attrs, "data",
           "drop the size-1 axes listed in axis (all of them when None)"),
    OP_ROW(RESHAPE, 1, OP_INJECTIVE, reshape_rel, reshape_attrs, "data",
           "reshape to newshape; 0 copies, -1 infers, -2 copies the rest, -3 merges, -4 splits"),
    OP_ROW(RESHAPE_LIKE, 2, OP_INJECTIVE, reshape_like_rel, reshape_like_attrs, "data, shape_like",
           "replace data dims [lhs_begin, lhs_end) by shape_like dims [rhs_begin, rhs_end)"),
    OP_ROW(TRANSPOSE, 1, OP_INJECTIVE, transpose_rel, transpose_attrs, "data",
           "permute the axes (reverse them when axes is None)"),
    OP_ROW(CONCATENATE, 1, OP_INJECTIVE, concatenate_rel, axis0_attrs, "data",
           "join a tuple of tensors along axis"),
    OP_ROW(STACK, 1, OP_INJECTIVE, stack_rel, axis0_attrs, "data",
           "join a tuple of same-shape tensors along a new axis"),
    OP_ROW(SPLIT, 1, OP_INJECTIVE, split_rel, split_attrs, "data",
           "split along axis into equal sections or at indices; a tuple"),
    OP_ROW(TILE, 1, OP_BROADCAST, tile_rel, tile_attrs, "data",
           "repeat the whole tensor reps times"),
    OP_ROW(REPEAT, 1, OP_BROADCAST, repeat_rel, repeat_attrs, "data",
           "repeat each element repeats times along axis"),
    OP_ROW(REVERSE, 1, OP_INJECTIVE, reverse_rel, reverse_attrs, "data",
           "reverse the order of elements along axis"),
    OP_ROW(REVERSE_SEQUENCE, 2, OP_INJECTIVE, reverse_sequence_rel, reverse_sequence_attrs,
           "data, seq_lengths",
           "reverse the first seq_lengths[b] elements along seq_axis per batch b"),
    OP_ROW(WHERE, 3, OP_BROADCAST, where_rel, NULL, "condition, x, y",
           "x where condition is nonzero, else y, with broadcasting"),
    OP_ROW(BROADCAST_TO, 1, OP_BROADCAST, broadcast_to_rel, broadcast_to_attrs, "data",
           "broadcast data to shape"),
    OP_ROW(BROADCAST_TO_LIKE, 2, OP_BROADCAST, broadcast_to_like_rel, NULL, "data, broadcast_type",
           "broadcast data to the shape of broadcast_type"),
    OP_ROW(COLLAPSE_SUM_LIKE, 2, OP_COMM_REDUCE, collapse_sum_like_rel, NULL, "data, collapse_type",
           "sum data down to the shape of collapse_type (the inverse of broadcasting)"),
    OP_ROW(COLLAPSE_SUM_TO, 2, OP_COMM_REDUCE, collapse_sum_to_rel, collapse_sum_to_attrs,
           "data, shape", "sum data down to shape (the inverse of broadcasting)"),
    OP_ROW(LAYOUT_TRANSFORM, 1, OP_INJECTIVE, layout_transform_rel, layout_transform_attrs, "data",
           "change the data layout, e.g. NCHW to NHWC or NCHW16c"),
    OP_ROW(STRIDED_SLICE, 1, OP_INJECTIVE, strided_slice_rel, strided_slice_attrs, "data",
           "slice [begin, end) with strides (or sizes) on all or the given axes"),
    OP_ROW(SLICE_LIKE, 2, OP_INJECTIVE, slice_like_rel, slice_like_attrs, "data, shape_like",
           "slice data from 0 to the sizes of shape_like on axes"),
    OP_ROW(MESHGRID, 1, OP_INJECTIVE, meshgrid_rel, meshgrid_attrs, "data",
           "coordinate grids from a tuple of 1-D tensors; a tuple"),
    OP_ROW(EINSUM, 1, OP_INJECTIVE, einsum_rel, einsum_attrs, "data",
           "Einstein summation over a tuple of tensors"),
    OP_ROW(TRILU, 2, OP_ELEMWISE, trilu_rel, trilu_attrs, "data, k",
           "keep the upper (or lower) triangle from diagonal k, zero the rest"),
    OP_ROW(MATRIX_SET_DIAG, 2, OP_INJECTIVE, matrix_set_diag_rel, matrix_set_diag_attrs,
           "input, diagonal", "replace diagonals k1..k2 of the innermost matrices"),
    OP_ROW(SLIDING_WINDOW, 1, OP_OPAQUE, sliding_window_rel, sliding_window_attrs, "data",
           "windows of window_shape slid with strides over the axes from axis on"),
    OP_ROW(INVERT_PERMUTATION, 1, OP_INJECTIVE, invert_permutation_rel, NULL, "data",
           "the inverse of a permutation vector"),
    {0},
};
