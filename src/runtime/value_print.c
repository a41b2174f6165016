/* value_print.c - the text of a runtime value (print.h), shared by the interpreter and the VM:
 * tensors summarized as numpy does, tuples, constructor values, closures, references. */
#include <math.h>

#include "runtime/print.h"

static void print_elem(const RtTensor *t, int64_t i, StrBuf *out) {
    rly_dtype dt = rt_tensor_dtype(t);
    const void *p = rt_tensor_data(t);
    if (dt == RLY_DTYPE_BOOL)
        sb_puts(out, k_loadi(p, dt, i) ? "True" : "False");
    else if (dt == RLY_DTYPE_U64)
        sb_printf(out, "%llu", (unsigned long long)k_loadu(p, dt, i));
    else if (!sup_dtype_is_float(dt))
        sb_printf(out, "%lld", (long long)k_loadi(p, dt, i));
    else {
        double x = k_loadf(p, dt, i);
        if (isnan(x))
            sb_puts(out, "nan");
        else if (isinf(x))
            sb_puts(out, x > 0 ? "inf" : "-inf");
        else
            sb_printf(out, "%.*g", dt == RLY_DTYPE_F64 ? 17 : dt == RLY_DTYPE_F32 ? 8 : 4, x);
    }
}

/* Elements of dimension d starting at flat offset off, numpy style ("[1, 2, ..., 9]"). */
static void print_dims(const RtTensor *t, uint32_t d, int64_t off, bool summarize, StrBuf *out) {
    uint32_t nd = (uint32_t)t->t.ndim;
    if (d == nd) {
        print_elem(t, off, out);
        return;
    }
    int64_t n = t->shape[d], inner = k_shape_numel(nd - d - 1, t->shape + d + 1);
    sb_puts(out, "[");
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 6 && i == 3) {
            sb_puts(out, d + 1 == nd ? "..., " : "...,\n");
            i = n - 3;
        }
        print_dims(t, d + 1, off + i * inner, summarize, out);
        if (i + 1 < n) sb_puts(out, d + 1 == nd ? ", " : ",\n");
    }
    sb_puts(out, "]");
}

static void print_tensor(const RtTensor *t, size_t max_elems, StrBuf *out) {
    if (t->t.ndim == 0) { /* a scalar prints as a Relay literal: 3, 2.5f, 7i64, True */
        static const char *const suffix[RLY_DTYPE_COUNT] = {
            [RLY_DTYPE_I8] = "i8",   [RLY_DTYPE_I16] = "i16",  [RLY_DTYPE_I64] = "i64",
            [RLY_DTYPE_U8] = "u8",   [RLY_DTYPE_U16] = "u16",  [RLY_DTYPE_U32] = "u32",
            [RLY_DTYPE_U64] = "u64", [RLY_DTYPE_F16] = "f16",  [RLY_DTYPE_F32] = "f",
            [RLY_DTYPE_F64] = "f64", [RLY_DTYPE_BF16] = "bf16"};
        rly_dtype dt = rt_tensor_dtype(t);
        print_elem(t, 0, out);
        if (suffix[dt]) sb_puts(out, suffix[dt]);
        return;
    }
    sb_puts(out, "Tensor[("); /* the shape as Relay types write it: (1), (2, 3) */
    for (int32_t d = 0; d < t->t.ndim; d++)
        sb_printf(out, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    sb_printf(out, "), %s] ", sup_dtype_name(rt_tensor_dtype(t)));
    /* Rank is bounded (K_MAX_DIMS): this recursion is over dimensions, not program size. An
     * empty tensor prints as numpy's `[]`: its other dims may be huge (up to 2^62). */
    int64_t n = k_numel(&t->t);
    if (n == 0)
        sb_puts(out, "[]");
    else
        print_dims(t, 0, 0, (size_t)n > max_elems, out);
}

void rt_print_value(const Value *root, size_t max_elems, RtCtorName ctor_name, const void *ud,
                    StrBuf *out) {
    size_t start = out->len;
    /* An explicit stack of (value, next field) pairs. */
    typedef struct {
        const Value *v;
        uint32_t i;
    } Item;
    Vec(Item) st = {0};
    Item first = {root, 0};
    vec_push(&st, first);
    while (st.len > 0) {
        Item *top = &vec_last(&st);
        const Value *v = top->v;
        uint32_t n = 0;
        Value *const *fields = NULL;
        const char *open = "(", *close = ")";
        if (v == NULL) { /* never in a finished value; printed rather than crashed on */
            sb_puts(out, "<null>");
            st.len--;
            continue;
        }
        switch (v->kind) {
        case VAL_TENSOR:
            print_tensor(RT_TENSOR(v), max_elems, out);
            st.len--;
            continue;
        case VAL_CLOSURE:
            sb_puts(out, "<closure>");
            st.len--;
            continue;
        case VAL_TUPLE:
            n = RT_TUPLE(v)->n;
            fields = RT_TUPLE(v)->f;
            break;
        case VAL_ADT: {
            const char *name = ctor_name ? ctor_name(RT_ADT(v)->ctor, ud) : NULL;
            n = RT_ADT(v)->n;
            fields = RT_ADT(v)->f;
            if (top->i == 0) sb_puts(out, name ? name : "?");
            if (n == 0) {
                st.len--;
                continue;
            }
            break;
        }
        case VAL_REF:
            n = 1;
            fields = &RT_REF(v)->v;
            open = "ref(";
            break;
        }
        if (top->i == 0) sb_puts(out, open);
        if (top->i == n) {
            if (v->kind == VAL_TUPLE && n == 1) sb_puts(out, ",");
            sb_puts(out, close);
            st.len--;
            continue;
        }
        if (top->i > 0) sb_puts(out, ", ");
        if (out->len - start > RT_PRINT_MAX) { /* a value with shared parts prints as a tree */
            sb_puts(out, "... (printing stopped after 4 MB)");
            break;
        }
        Item next = {fields[top->i++], 0};
        vec_push(&st, next);
    }
    vec_free(&st);
}
