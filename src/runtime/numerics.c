/* numerics.c - tensor statistics and the NaN/Inf scan behind `rly run --check-numerics`
 * (probe.h, docs/tools.md "Numerics"). The executors decide when to look (after each operator
 * or fused group); this file only looks at values. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/probe.h"

static inline void stats_add(RtStats *s, double v) {
    if (isnan(v))
        s->n_nan++;
    else if (isinf(v))
        s->n_inf++;
    else {
        s->sum += v;
        if (v < s->min) s->min = v;
        if (v > s->max) s->max = v;
    }
}

void rt_stats_tensor(const DLTensor *t, RtStats *s) {
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    s->max = -INFINITY;
    rly_dtype dt = k_dtype(t);
    int64_t n = k_shape_numel((uint32_t)t->ndim, t->shape);
    s->n = (uint64_t)n;
    const void *base = k_ptr(t);
    if (dt == RLY_DTYPE_F32) { /* the common case, without the generic load */
        const float *x = base;
        for (int64_t i = 0; i < n; i++)
            stats_add(s, x[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        stats_add(s, k_loadf(base, dt, i));
}

/* Whether tensor t holds a NaN or an infinity (stops at the first). Integer tensors hold none. */
static bool tensor_nonfinite(const DLTensor *t) {
    rly_dtype dt = k_dtype(t);
    if (!sup_dtype_is_float(dt)) return false;
    int64_t n = k_shape_numel((uint32_t)t->ndim, t->shape);
    const void *base = k_ptr(t);
    if (dt == RLY_DTYPE_F32) {
        const float *x = base;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(x[i])) return true;
        return false;
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(k_loadf(base, dt, i))) return true;
    return false;
}

/* A depth-first walk over the tensors of a value through tuples, with an explicit stack (the
 * path of field indices is the stack). */
typedef struct Walk {
    Vec(const RtTuple *) tup;
    Vec(uint32_t) idx;
    const Value *root;
    bool started;
} Walk;

/* The next tensor of the walk, or NULL at the end. */
static const RtTensor *walk_next(Walk *w) {
    const Value *v = NULL;
    if (!w->started) {
        w->started = true;
        v = w->root;
    }
    for (;;) {
        if (v != NULL) {
            if (v->kind == VAL_TENSOR) return (const RtTensor *)v;
            if (v->kind == VAL_TUPLE) {
                vec_push(&w->tup, (const RtTuple *)v);
                vec_push(&w->idx, 0u);
            }
            v = NULL;
        }
        if (w->tup.len == 0) return NULL;
        const RtTuple *t = vec_last(&w->tup);
        uint32_t *i = &vec_last(&w->idx);
        if (*i >= t->n) {
            w->tup.len--;
            w->idx.len--;
            if (w->idx.len > 0) vec_last(&w->idx)++;
            continue;
        }
        v = t->f[*i];
        if (v == NULL || (v->kind != VAL_TENSOR && v->kind != VAL_TUPLE)) {
            (*i)++;
            v = NULL;
        } else if (v->kind == VAL_TENSOR) {
            (*i)++; /* the path printed for it is taken before this step: see walk_path */
            return (const RtTensor *)v;
        }
    }
}

/* The path of the tensor walk_next just returned (".0.2"; "" for the root). */
static void walk_path(const Walk *w, StrBuf *out) {
    for (size_t k = 0; k < w->idx.len; k++)
        sb_printf(out, ".%u", w->idx.data[k] - (k + 1 == w->idx.len ? 1u : 0u));
}

static void walk_free(Walk *w) {
    vec_free(&w->tup);
    vec_free(&w->idx);
}

bool rt_value_nonfinite(const Value *v) {
    if (v == NULL) return false;
    if (v->kind == VAL_TENSOR) return tensor_nonfinite(&((const RtTensor *)v)->t);
    Walk w = {.root = v};
    bool bad = false;
    for (const RtTensor *t; !bad && (t = walk_next(&w)) != NULL;)
        bad = tensor_nonfinite(&t->t);
    walk_free(&w);
    return bad;
}

void rt_value_nonfinite_counts(const Value *v, uint64_t *n_nan, uint64_t *n_inf) {
    *n_nan = *n_inf = 0;
    Walk w = {.root = v};
    for (const RtTensor *t; (t = walk_next(&w)) != NULL;) {
        RtStats s;
        rt_stats_tensor(&t->t, &s);
        *n_nan += s.n_nan;
        *n_inf += s.n_inf;
    }
    walk_free(&w);
}

void rt_nonfinite_text(const Value *v, StrBuf *out) {
    uint64_t nan, inf;
    rt_value_nonfinite_counts(v, &nan, &inf);
    if (nan) sb_printf(out, "%llu NaN", (unsigned long long)nan);
    if (nan && inf) sb_puts(out, " and ");
    if (inf || !nan) sb_printf(out, "%llu Inf", (unsigned long long)inf);
}

static void shape_text(const DLTensor *t, StrBuf *out) {
    sb_printf(out, "%s[", sup_dtype_name(k_dtype(t)));
    for (int d = 0; d < t->ndim; d++)
        sb_printf(out, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    sb_putc(out, ']');
}

void rt_value_stats_text(const Value *v, const char *indent, const char *label, StrBuf *out) {
    Walk w = {.root = v};
    bool any = false;
    for (const RtTensor *t; (t = walk_next(&w)) != NULL;) {
        any = true;
        RtStats s;
        rt_stats_tensor(&t->t, &s);
        sb_printf(out, "%s%s", indent, label);
        walk_path(&w, out);
        sb_puts(out, ": ");
        shape_text(&t->t, out);
        sb_putc(out, ':');
        uint64_t fin = s.n - s.n_nan - s.n_inf;
        if (fin > 0)
            sb_printf(out, " min %.6g, max %.6g, mean %.6g,", s.min, s.max, s.sum / (double)fin);
        else if (s.n == 0)
            sb_puts(out, " empty,");
        else
            sb_puts(out, " no finite element,");
        sb_printf(out, " %llu NaN, %llu Inf\n", (unsigned long long)s.n_nan,
                  (unsigned long long)s.n_inf);
    }
    if (!any) sb_printf(out, "%s%s: not a tensor\n", indent, label);
    walk_free(&w);
}

void rt_value_shape_text(const Value *v, StrBuf *out) {
    if (v == NULL) {
        sb_puts(out, "none");
        return;
    }
    if (v->kind == VAL_TENSOR) {
        shape_text(&((const RtTensor *)v)->t, out);
        return;
    }
    if (v->kind != VAL_TUPLE) {
        sb_puts(out, "value");
        return;
    }
    /* a tuple: its tensors in order, flattened (the nesting is rarely informative) */
    size_t start = out->len;
    Walk w = {.root = v};
    sb_putc(out, '(');
    int k = 0;
    for (const RtTensor *t; (t = walk_next(&w)) != NULL; k++) {
        if (out->len - start > 200) {
            sb_puts(out, ", ...");
            break;
        }
        if (k) sb_puts(out, ", ");
        shape_text(&t->t, out);
    }
    sb_putc(out, ')');
    walk_free(&w);
}
