/* lower.c - attribute lowering: a call's IR attributes (Attrs, checked against the operator's
 * schema) to the kernel attributes (KAttr rows, kernels/kernel.h) that kernels read. Every
 * executor runs it once per call site and keeps the rows: the interpreter per call node, a
 * compiled program per instruction. */
#include "kernels/kernel.h"
#include "ops/ops.h"

static double leaf_float(const AttrValue *v) {
    return v->kind == ATTR_FLOAT ? v->f : v->kind == ATTR_INT ? (double)v->i : v->b;
}

static int64_t leaf_int(const AttrValue *v) {
    return v->kind == ATTR_FLOAT ? (int64_t)v->f : v->kind == ATTR_INT ? v->i : v->b;
}

/* The scalar leaves of a (possibly nested) attribute list, counted or stored in order. Attribute
 * values are small and written by hand, so recursion over their nesting is bounded by the
 * parser's nesting limit. */
static uint32_t count_leaves(const AttrValue *v) {
    if (v->kind != ATTR_LIST) return 1;
    uint32_t n = 0;
    for (uint32_t i = 0; i < v->list.n; i++)
        n += count_leaves(v->list.items[i]);
    return n;
}

static void store_leaves(const AttrValue *v, const AttrValue **out, uint32_t *n) {
    if (v->kind != ATTR_LIST) {
        out[(*n)++] = v;
        return;
    }
    for (uint32_t i = 0; i < v->list.n; i++)
        store_leaves(v->list.items[i], out, n);
}

static void lower_one(const AttrSpec *spec, const AttrValue *v, Arena *arena, KAttr *k) {
    memset(k, 0, sizeof *k);
    k->name = spec->name;
    bool list_type = spec->type == AT_INTS || spec->type == AT_OPT_INTS ||
                     spec->type == AT_FLOATS || spec->type == AT_STRS;
    switch (v->kind) {
    case ATTR_INT:
    case ATTR_BOOL:
    case ATTR_FLOAT:
        if (list_type) { /* a single number where the schema takes a list: a list of one */
            int64_t *ints = arena_alloc(arena, sizeof *ints);
            double *floats = arena_alloc(arena, sizeof *floats);
            ints[0] = leaf_int(v), floats[0] = leaf_float(v);
            k->kind = spec->type == AT_FLOATS ? KA_FLOATS : KA_INTS;
            k->n = 1, k->ints = ints, k->floats = floats;
        } else {
            k->kind = v->kind == ATTR_FLOAT ? KA_FLOAT : KA_INT;
            k->i = leaf_int(v), k->f = leaf_float(v);
        }
        break;
    case ATTR_STR:
        if (spec->type == AT_DTYPE) {
            k->kind = KA_INT;
            k->i = v->s[0] ? sup_dtype_parse(v->s, strlen(v->s)) : -1;
        } else {
            k->kind = KA_STR;
        }
        k->s = v->s;
        break;
    case ATTR_LIST: {
        /* Nested lists (nn.pad's pad_width=[[1, 2], [0, 0]]) are flattened row by row. */
        uint32_t n = count_leaves(v), m = 0;
        const AttrValue **items = arena_array(arena, n ? n : 1, sizeof *items);
        store_leaves(v, items, &m);
        k->n = n;
        if (n > 0 && items[0]->kind == ATTR_STR) {
            const char **strs = arena_array(arena, n, sizeof *strs);
            for (uint32_t i = 0; i < n; i++)
                strs[i] = items[i]->kind == ATTR_STR ? items[i]->s : "";
            k->kind = KA_STRS, k->strs = strs;
            break;
        }
        int64_t *ints = arena_array(arena, n ? n : 1, sizeof *ints);
        double *floats = arena_array(arena, n ? n : 1, sizeof *floats);
        bool any_float = false;
        for (uint32_t i = 0; i < n; i++) {
            ints[i] = leaf_int(items[i]), floats[i] = leaf_float(items[i]);
            any_float |= items[i]->kind == ATTR_FLOAT;
        }
        k->kind = any_float || spec->type == AT_FLOATS ? KA_FLOATS : KA_INTS;
        k->ints = ints, k->floats = floats;
        break;
    }
    default: k->kind = KA_NONE; break;
    }
}

KAttr *op_lower_attrs(const OpDef *op, const Attrs *attrs, Arena *arena, StrBuf *msg, Span *where) {
    uint32_t n = op->n_attrs;
    const AttrValue **vals = arena_array(arena, n ? n : 1, sizeof *vals);
    if (!op_bind_attrs(op, attrs, vals, msg, where)) return NULL;
    KAttr *rows = arena_array(arena, n ? n : 1, sizeof *rows);
    for (uint32_t i = 0; i < n; i++)
        lower_one(&op->attrs[i], vals[i], arena, &rows[i]);
    return rows;
}
