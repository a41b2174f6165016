/* import_seq.c - ONNX converters for sequences and optionals: SequenceEmpty, SequenceConstruct,
 * SequenceInsert, SequenceAt, SequenceErase, SequenceLength, ConcatFromSequence,
 * SplitToSequence, SequenceMap, Optional, OptionalHasElement, OptionalGetElement (Identity, If
 * and Loop of these types are the core's, import.c).
 *
 * Design: docs/onnx.md, "Sequences and optionals". */
#include <stdio.h>
#include <string.h>

#include "frontend/onnx/import.h"
#include "frontend/text/text.h"

#define STATIC_MAX 4096 /* longer lists built at import time are left to the run-time path */

/* ---- the helpers and constructors ------------------------------------------------------------ */

/* Functions the prelude lacks, parsed into the module next to it. Callers check positions first
 * (0 <= n <= length for an insertion, n < length for an erasure). */
static const char helpers_src[] =
    "#[version = \"0.0.5\"]\n"
    "// The ONNX importer's sequence functions (src/frontend/onnx/import_seq.c).\n"
    "\n"
    "// xs with v inserted before index n.\n"
    "def @seq_insert[A](%xs: List[A], %n: int32, %v: A) -> List[A] {\n"
    "  if (%n == 0) {\n"
    "    Cons(%v, %xs)\n"
    "  } else {\n"
    "    match? (%xs) {\n"
    "      Cons(%x, %rest) => Cons(%x, @seq_insert(%rest, %n - 1, %v)),\n"
    "    }\n"
    "  }\n"
    "}\n"
    "\n"
    "// xs without the element at index n.\n"
    "def @seq_erase[A](%xs: List[A], %n: int32) -> List[A] {\n"
    "  match? (%xs) {\n"
    "    Cons(%x, %rest) => if (%n == 0) { %rest } else { Cons(%x, @seq_erase(%rest, %n - 1)) },\n"
    "  }\n"
    "}\n"
    "\n"
    "// One pass of @seq_merge: neighbours joined by f (f(a, b) when fwd, f(b, a) otherwise),\n"
    "// consed onto acc, so the result is in the other direction. Tail-recursive.\n"
    "def @seq_merge_pass[A](%f: fn (A, A) -> A, %xs: List[A], %acc: List[A], %fwd: bool)\n"
    "    -> List[A] {\n"
    "  match (%xs) {\n"
    "    Cons(%a, Cons(%b, %rest)) => {\n"
    "      let %ab = if (%fwd) { %f(%a, %b) } else { %f(%b, %a) };\n"
    "      @seq_merge_pass(%f, %rest, Cons(%ab, %acc), %fwd)\n"
    "    },\n"
    "    Cons(%a, Nil) => Cons(%a, %acc),\n"
    "    Nil => %acc,\n"
    "  }\n"
    "}\n"
    "\n"
    "// xs joined by the associative f as a balanced tree: a list of at most one element, f of\n"
    "// all of them in order (the list's order when fwd, the reverse otherwise). log2(n) passes\n"
    "// (a concatenation copies each element about log2(n) times, not n/2 as a fold would).\n"
    "def @seq_merge[A](%f: fn (A, A) -> A, %xs: List[A], %fwd: bool) -> List[A] {\n"
    "  match (%xs) {\n"
    "    Cons(_, Cons(_, _)) =>\n"
    "      @seq_merge(%f, @seq_merge_pass(%f, %xs, Nil, %fwd), logical_not(%fwd)),\n"
    "    _ => %xs,\n"
    "  }\n"
    "}\n"
    "\n"
    "// The first element of xs, or none when xs is empty.\n"
    "def @seq_first[A](%xs: List[A], %none: A) -> A {\n"
    "  match (%xs) {\n"
    "    Cons(%x, _) => %x,\n"
    "    Nil => %none,\n"
    "  }\n"
    "}\n";

static Expr *typed(Expr *e, Type *t) {
    e->checked_type = t;
    return e;
}

/* The global @name of the prelude or of helpers_src. */
static GlobalVar *global(Imp *imp, const char *name) {
    Module *m = imp_module(imp);
    if (ir_module_lookup(m, "seq_insert", 10) == NULL)
        RLY_CHECK(text_parse_into(imp_ctx(imp), m, "onnx_sequence.rly", helpers_src,
                                  strlen(helpers_src), NULL, 0) != NULL,
                  "the sequence helpers do not parse");
    FuncDef *d = ir_module_lookup(m, name, strlen(name));
    RLY_CHECK(d != NULL && d->func != NULL, "no global @%s", name);
    return d->gvar;
}

static Constructor *ctor(Imp *imp, const char *name) {
    Constructor *c = ir_module_lookup_ctor(imp_module(imp), name, strlen(name));
    RLY_CHECK(c != NULL, "the prelude has no constructor %s", name);
    return c;
}

/* @name(args) of type ret; NULL when an argument is (an earlier error). */
static Expr *gcall(Imp *imp, const char *name, uint32_t n, Expr *const *args, Type *ret) {
    for (uint32_t i = 0; i < n; i++)
        if (args[i] == NULL) return NULL;
    Expr *f = &global(imp, name)->base;
    return typed(ir_call_new(imp_ctx(imp), f, n, args, NULL, 0, NULL, imp_span(imp)), ret);
}

static Expr *ccall(Imp *imp, const char *name, uint32_t n, Expr *const *args, Type *t) {
    for (uint32_t i = 0; i < n; i++)
        if (args[i] == NULL) return NULL;
    Expr *c = &ctor(imp, name)->base;
    return typed(ir_call_new(imp_ctx(imp), c, n, args, NULL, 0, NULL, imp_span(imp)), t);
}

static Expr *if_expr(Imp *imp, Expr *cond, Expr *then_e, Expr *else_e, Type *t) {
    if (cond == NULL || then_e == NULL || else_e == NULL) return NULL;
    return typed(ir_if_new(imp_ctx(imp), cond, then_e, else_e, imp_span(imp)), t);
}

/* A pattern variable (typed, not annotated: inference types it from the matched value). */
static Var *pvar(Imp *imp, const char *name, Type *t) {
    Var *v = ir_var_new(imp_ctx(imp), ir_intern(imp_ctx(imp), name, strlen(name)), NULL, SPAN_NONE);
    v->base.checked_type = t;
    return v;
}

/* x as a value of type elem (its type with every dim `?`): an annotated let when x's type is
 * more precise (see the design note on Cons). */
static Expr *upcast(Imp *imp, Expr *x, Type *elem) {
    if (x == NULL || imp_type(x) == elem) return x;
    Var *v = imp_var(imp, "elem", elem);
    return typed(ir_let_new(imp_ctx(imp), v, x, &v->base, imp_span(imp)), elem);
}

static Expr *nil(Imp *imp, Type *elem) {
    return ccall(imp, "Nil", 0, NULL, imp_list_type(imp, elem));
}

static Expr *cons(Imp *imp, Expr *x, Expr *rest, Type *elem) {
    Expr *args[2] = {upcast(imp, x, elem), rest};
    return ccall(imp, "Cons", 2, args, imp_list_type(imp, elem));
}

static bool is_ctor_call(Expr *e, const char *name, uint32_t n_args) {
    if (e == NULL || e->kind != EXPR_CALL) return false;
    Call *c = AS_CALL(e);
    return c->op->kind == EXPR_CONSTRUCTOR && c->n_args == n_args &&
           strcmp(AS_CONSTRUCTOR(c->op)->name, name) == 0;
}

/* The elements of a list built at import time (Cons ... Nil), unwrapped from their upcasts, in
 * the import arena; false for any other list (a variable, a call) or one of more than
 * STATIC_MAX elements. */
static bool static_list(Imp *imp, Expr *seq, Expr ***out, uint32_t *n) {
    uint32_t k = 0;
    for (Expr *e = seq; !is_ctor_call(e, "Nil", 0); e = AS_CALL(e)->args[1])
        if (!is_ctor_call(e, "Cons", 2) || ++k > STATIC_MAX) return false;
    Expr **el = imp_alloc(imp, (k + 1) * sizeof *el);
    uint32_t i = 0;
    for (Expr *e = seq; i < k; e = AS_CALL(e)->args[1]) {
        Expr *x = AS_CALL(e)->args[0];
        if (x->kind == EXPR_LET && AS_LET(x)->body == &AS_LET(x)->var->base &&
            AS_LET(x)->var->ann != NULL)
            x = AS_LET(x)->value;
        el[i++] = x;
    }
    *out = el;
    *n = k;
    return true;
}

/* The list of elems[0..n) (a fresh chain: the elements are upcast again). */
static Expr *list_of(Imp *imp, Expr *const *elems, uint32_t n, Type *elem) {
    Expr *l = nil(imp, elem);
    for (uint32_t i = n; i-- > 0 && l != NULL;)
        l = cons(imp, elems[i], l, elem);
    return l;
}

/* fn (%x: t, %y: t) -> t { concatenate((%x, %y), axis) }: the join of @seq_merge. */
static Expr *concat_fn(Imp *imp, Type *t, int64_t axis) {
    Ctx *ctx = imp_ctx(imp);
    Var *x = imp_var(imp, "x", t), *y = imp_var(imp, "y", t);
    Expr *pair[2] = {&x->base, &y->base};
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    Expr *body = imp_call1(imp, "concatenate", imp_tuple(imp, 2, pair), &a);
    if (body == NULL) return NULL;
    Var *ps[2] = {x, y};
    Type *pt[2] = {t, t};
    return typed(ir_function_new(ctx, 2, ps, upcast(imp, body, t), t, 0, NULL, NULL, imp_span(imp)),
                 ir_type_func(ctx, 2, pt, t, 0, NULL, 0, NULL));
}

/* @seq_merge(concat along axis, xs, fwd) of a List[t]: a list of at most one element. */
static Expr *merge_list(Imp *imp, Expr *xs, Type *t, int64_t axis, bool fwd) {
    Expr *f = concat_fn(imp, t, axis);
    Expr *args[3] = {f, xs, imp_scalar_i(imp, RLY_DTYPE_BOOL, fwd)};
    return gcall(imp, "seq_merge", 3, args, imp_list_type(imp, t));
}

Type *imp_rows_elem(Imp *imp, const TensorType *row) {
    int64_t *d = imp_alloc(imp, ((size_t)row->ndim + 1) * sizeof *d);
    d[0] = DIM_ANY;
    for (uint32_t j = 0; j < row->ndim; j++)
        d[j + 1] = row->shape[j];
    return ir_type_tensor(imp_ctx(imp), row->dtype, row->ndim + 1, d);
}

Type *imp_rows_type(Imp *imp, Type *elem) { return imp_list_type(imp, elem); }

Expr *imp_rows_empty(Imp *imp, Type *elem) { return nil(imp, elem); }

Expr *imp_rows_push(Imp *imp, Expr *rows, Expr *row, Type *elem) {
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", 0);
    Expr *r = imp_call1(imp, "expand_dims", row, &a);
    return r && rows ? cons(imp, r, rows, elem) : NULL;
}

Expr *imp_rows_join(Imp *imp, Expr *rows, Type *elem) {
    if (rows == NULL) return NULL;
    TensorType *et = AS_TENSOR_TYPE(elem);
    int64_t *d0 = imp_alloc(imp, ((size_t)et->ndim + 1) * sizeof *d0);
    d0[0] = 0;
    for (uint32_t j = 1; j < et->ndim; j++)
        d0[j] = et->shape[j] >= 0 ? et->shape[j] : 0;
    Expr *none = imp_const_tensor(imp, et->dtype, et->ndim, d0, NULL);
    none->checked_type = elem; /* (0, row...) as the rows' type */
    Expr *args[2] = {merge_list(imp, rows, elem, 0, false), none};
    return gcall(imp, "seq_first", 2, args, elem);
}

static const char *type_text(Imp *imp, Type *t) {
    StrBuf sb = {0};
    ir_print_type(imp_ctx(imp), imp_resolve(imp, t), &sb);
    char *s = imp_alloc(imp, sb.len + 1);
    memcpy(s, sb_cstr(&sb), sb.len + 1);
    sb_free(&sb);
    return s;
}

/* "SequenceEmpty 'name' (node 3)" for messages about values a node made. */
static const char *node_text(Imp *imp) {
    const OxNode *nd = imp_node(imp);
    char buf[400];
    snprintf(buf, sizeof buf, "the output of %s%s%.300s%s (node %u)", nd->op_type,
             nd->name[0] ? " '" : "", nd->name, nd->name[0] ? "'" : "", nd->index);
    char *s = imp_alloc(imp, strlen(buf) + 1);
    memcpy(s, buf, strlen(buf) + 1);
    return s;
}

/* ---- inputs ---------------------------------------------------------------------------------- */

/* Required input i, a sequence; *elem gets its element type (resolved). */
static Expr *seq_in(Imp *imp, uint32_t i, const char *what, Type **elem) {
    Expr *s = imp_in_req(imp, i, what);
    if (s == NULL) return NULL;
    *elem = imp_list_elem(imp, imp_type(s));
    if (*elem == NULL) {
        imp_error(imp, "input %u (%s) must be a sequence, got %s", i, what,
                  type_text(imp, imp_type(s)));
        return NULL;
    }
    return s;
}

/* Input i, a position (an int32 or int64 tensor of one element), as an int32 scalar; *is_const
 * and *c tell whether (and what) it is at import time. NULL after an error. */
static Expr *position(Imp *imp, uint32_t i, bool *is_const, int64_t *c) {
    Expr *p = imp_tin(imp, i, "position");
    if (p == NULL) return NULL;
    TensorType *t = imp_tt(p);
    bool one = true;
    for (uint32_t d = 0; d < t->ndim; d++)
        one &= t->shape[d] == 1 || !dim_known(t->shape[d]);
    if ((t->dtype != RLY_DTYPE_I32 && t->dtype != RLY_DTYPE_I64) || !one) {
        imp_error(imp, "the position must be an int32 or int64 scalar, got %s",
                  type_text(imp, imp_type(p)));
        return NULL;
    }
    const int64_t *v;
    uint32_t n;
    *is_const = imp_const_ints(imp, p, &v, &n) && n == 1;
    if (*is_const) {
        *c = v[0];
        return imp_scalar_i(imp, RLY_DTYPE_I32,
                            v[0] < INT32_MIN   ? INT32_MIN
                            : v[0] > INT32_MAX ? INT32_MAX
                                               : v[0]);
    }
    if (t->ndim > 0) {
        ImpAttrs a = {0};
        ia_ints(imp, &a, "newshape", 0, NULL);
        p = imp_call1(imp, "reshape", p, &a);
    }
    return imp_cast(imp, p, RLY_DTYPE_I32);
}

/* A constant position p in a list of n elements, made non-negative; false (reported) when out of
 * range: [-n, n - 1], or [-n, n] with end_ok. */
static bool static_index(Imp *imp, int64_t p, uint32_t n, bool end_ok, int64_t *out) {
    int64_t hi = end_ok ? (int64_t)n : (int64_t)n - 1;
    *out = 0;
    if (p < -(int64_t)n || p > hi)
        return imp_error(imp,
                         "position %lld is out of range for a sequence of length %u (valid: "
                         "%lld to %lld)",
                         (long long)p, n, -(long long)n, (long long)hi);
    *out = p < 0 ? p + n : p;
    return true;
}

/* The run-time position p (int32 scalar) in a list of length len (int32 scalar): p + len when
 * negative, checked to be in [0, len - 1] ([0, len] with end_ok); otherwise the program stops
 * with "<Op> 'name': position out of range" at the node. */
static Expr *checked_index(Imp *imp, Expr *p, Expr *len, bool end_ok) {
    if (p == NULL || len == NULL) return NULL;
    Expr *zero = imp_scalar_i(imp, RLY_DTYPE_I32, 0);
    Expr *args[3] = {imp_call2(imp, "less", p, zero, NULL), imp_call2(imp, "add", p, len, NULL), p};
    Expr *fixed = args[0] && args[1] ? imp_call(imp, "where", 3, args, NULL) : NULL;
    Expr *lo = imp_call2(imp, "greater_equal", fixed, zero, NULL);
    Expr *hi = imp_call2(imp, end_ok ? "less_equal" : "less", fixed, len, NULL);
    Expr *ok = imp_call2(imp, "logical_and", lo, hi, NULL);
    Expr *trap = imp_trap(imp, 0, NULL, RLY_DTYPE_I32, "position out of range");
    return if_expr(imp, ok, fixed, trap, ir_type_scalar(imp_ctx(imp), RLY_DTYPE_I32));
}

static Expr *length(Imp *imp, Expr *seq) {
    return gcall(imp, "length", 1, &seq, ir_type_scalar(imp_ctx(imp), RLY_DTYPE_I32));
}

/* ---- sequences ------------------------------------------------------------------------------- */

static bool conv_sequence_empty(Imp *imp) {
    int dt = imp_onnx_dtype(imp, (int32_t)imp_attr_int(imp, "dtype", OX_FLOAT));
    if (dt < 0) return false;
    return imp_set_out(imp, 0, nil(imp, imp_elem_new(imp, dt, -1, node_text(imp))));
}

static bool conv_sequence_construct(Imp *imp) {
    uint32_t n = imp_n_inputs(imp);
    if (n == 0) return imp_error(imp, "needs at least one input");
    Expr **xs = imp_alloc(imp, n * sizeof *xs);
    for (uint32_t i = 0; i < n; i++) {
        if ((xs[i] = imp_tin(imp, i, "input")) == NULL) return false;
        if (imp_dtype(xs[i]) != imp_dtype(xs[0]) || imp_rank(xs[i]) != imp_rank(xs[0]))
            return imp_error(imp,
                             "input %u is %s and input 0 is %s: the tensors of a sequence have one "
                             "dtype and rank",
                             i, type_text(imp, imp_type(xs[i])), type_text(imp, imp_type(xs[0])));
    }
    return imp_set_out(imp, 0, list_of(imp, xs, n, imp_any_dims(imp, imp_type(xs[0]))));
}

/* The element type elem (resolved) made to hold x's type; reports when it cannot. */
static Type *elem_for(Imp *imp, Type *elem, Expr *x) {
    if (!imp_elem_unify(imp, elem, imp_type(x))) {
        Type *e = imp_resolve(imp, elem);
        if (e->kind == TYPE_TENSOR)
            imp_error(imp,
                      "the tensor is %s of rank %u but the sequence holds %s tensors of rank %u "
                      "(a Relay list holds tensors of one dtype and rank)",
                      sup_dtype_name(imp_dtype(x)), imp_rank(x),
                      sup_dtype_name(AS_TENSOR_TYPE(e)->dtype), AS_TENSOR_TYPE(e)->ndim);
        else
            imp_error(imp, "the tensor is %s but the sequence was made for another dtype",
                      sup_dtype_name(imp_dtype(x)));
        return NULL;
    }
    return imp_resolve(imp, elem);
}

static bool conv_sequence_insert(Imp *imp) {
    Type *elem;
    Expr *s = seq_in(imp, 0, "input_sequence", &elem), *x = imp_tin(imp, 1, "tensor");
    if (s == NULL || x == NULL || (elem = elem_for(imp, elem, x)) == NULL) return false;
    bool has_pos = imp_in(imp, 2) != NULL, is_const = false;
    int64_t c = 0;
    Expr *p = has_pos ? position(imp, 2, &is_const, &c) : NULL;
    if (has_pos && p == NULL) return false;
    Expr **el;
    uint32_t n;
    if ((!has_pos || is_const) && static_list(imp, s, &el, &n)) {
        int64_t at = n;
        if (has_pos && !static_index(imp, c, n, true, &at)) return false;
        Expr **el2 = imp_alloc(imp, (n + 1) * sizeof *el2);
        memcpy(el2, el, (size_t)at * sizeof *el2);
        el2[at] = x;
        memcpy(el2 + at + 1, el + at, (n - (size_t)at) * sizeof *el2);
        return imp_set_out(imp, 0, list_of(imp, el2, n + 1, elem));
    }
    Expr *len = length(imp, s);
    p = has_pos ? checked_index(imp, p, len, true) : len;
    Expr *args[3] = {s, p, upcast(imp, x, elem)};
    return imp_set_out(imp, 0, gcall(imp, "seq_insert", 3, args, imp_list_type(imp, elem)));
}

static bool conv_sequence_at(Imp *imp) {
    Type *elem;
    Expr *s = seq_in(imp, 0, "input_sequence", &elem);
    if (s == NULL || (elem = imp_force(imp, elem)) == NULL) return false;
    bool is_const;
    int64_t c;
    Expr *p = position(imp, 1, &is_const, &c);
    if (p == NULL) return false;
    Expr **el;
    uint32_t n;
    if (is_const && static_list(imp, s, &el, &n)) {
        int64_t at = 0;
        if (!static_index(imp, c, n, false, &at)) return false;
        imp_out(imp, 0, el[at]);
        return true;
    }
    Expr *args[2] = {s, checked_index(imp, p, length(imp, s), false)};
    return imp_set_out(imp, 0, gcall(imp, "nth", 2, args, elem));
}

static bool conv_sequence_erase(Imp *imp) {
    Type *elem;
    Expr *s = seq_in(imp, 0, "input_sequence", &elem);
    if (s == NULL) return false;
    bool has_pos = imp_in(imp, 1) != NULL, is_const = true;
    int64_t c = -1;
    Expr *p = has_pos ? position(imp, 1, &is_const, &c) : imp_scalar_i(imp, RLY_DTYPE_I32, -1);
    if (p == NULL) return false;
    Expr **el;
    uint32_t n;
    if (is_const && static_list(imp, s, &el, &n)) {
        int64_t at = 0;
        if (!static_index(imp, c, n, false, &at)) return false;
        memmove(el + at, el + at + 1, (n - 1 - (size_t)at) * sizeof *el);
        return imp_set_out(imp, 0, list_of(imp, el, n - 1, elem));
    }
    Expr *args[2] = {s, checked_index(imp, p, length(imp, s), false)};
    return imp_set_out(imp, 0, gcall(imp, "seq_erase", 2, args, imp_list_type(imp, elem)));
}

static bool conv_sequence_length(Imp *imp) {
    Type *elem;
    Expr *s = seq_in(imp, 0, "input_sequence", &elem);
    if (s == NULL) return false;
    Expr **el;
    uint32_t n;
    if (static_list(imp, s, &el, &n))
        return imp_set_out(imp, 0, imp_scalar_i(imp, RLY_DTYPE_I64, n));
    return imp_set_out(imp, 0, imp_cast(imp, length(imp, s), RLY_DTYPE_I64));
}

/* ConcatFromSequence: concatenate along axis, or stack along a new axis (new_axis = 1). A
 * run-time list (its elements expanded first for a new axis) is joined by @seq_merge with
 * concatenate, after a check that it is not empty. */
static bool conv_concat_from_sequence(Imp *imp) {
    Type *elem;
    Expr *s = seq_in(imp, 0, "input_sequence", &elem);
    if (s == NULL || (elem = imp_force(imp, elem)) == NULL) return false;
    if (imp_attr(imp, "axis") == NULL) return imp_error(imp, "attribute 'axis' is required");
    bool new_axis = imp_attr_int(imp, "new_axis", 0) != 0;
    TensorType *et = AS_TENSOR_TYPE(elem);
    int64_t r = (int64_t)et->ndim + new_axis, axis = imp_attr_int(imp, "axis", 0);
    if (axis < -r || axis >= r)
        return imp_error(imp, "axis %lld is out of range for rank %lld (valid: %lld to %lld)",
                         (long long)axis, (long long)r, (long long)-r, (long long)(r - 1));
    if (axis < 0) axis += r;
    if (!new_axis && et->ndim == 0) return imp_error(imp, "cannot concatenate 0-d tensors");
    ImpAttrs a = {0};
    ia_int(imp, &a, "axis", axis);
    const char *op = new_axis ? "stack" : "concatenate";
    Expr **el;
    uint32_t n;
    if (static_list(imp, s, &el, &n)) {
        if (n == 0) return imp_error(imp, "the sequence is empty");
        return imp_set_out(imp, 0, imp_call1(imp, op, imp_tuple(imp, n, el), &a));
    }
    Ctx *ctx = imp_ctx(imp);
    int64_t *shape = imp_alloc(imp, (size_t)r * sizeof *shape + 1);
    for (int64_t i = 0; i < r; i++)
        shape[i] = DIM_ANY; /* -1: also `?` in trap's shape attribute */
    Type *acc_t = ir_type_tensor(ctx, et->dtype, (uint32_t)r, shape);
    Expr *parts = s; /* List[acc_t] */
    if (new_axis) {  /* @map(fn (%x) { expand_dims(%x, axis) }, s) */
        ImpAttrs ex = {0};
        ia_int(imp, &ex, "axis", axis);
        Var *x = imp_var(imp, "x", elem);
        Expr *xe = imp_call1(imp, "expand_dims", &x->base, &ex);
        if (xe == NULL) return false;
        Expr *fn = typed(ir_function_new(ctx, 1, &x, upcast(imp, xe, acc_t), acc_t, 0, NULL, NULL,
                                         imp_span(imp)),
                         ir_type_func(ctx, 1, &elem, acc_t, 0, NULL, 0, NULL));
        Expr *margs[2] = {fn, s};
        parts = gcall(imp, "map", 2, margs, imp_list_type(imp, acc_t));
    } else if (elem != acc_t) {
        return imp_error(imp, "internal error: sequence elements are not all-? tensors");
    }
    Expr *merged = merge_list(imp, parts, acc_t, axis, true);
    Expr *fold = gcall(imp, "hd", 1, &merged, acc_t);
    Expr *empty =
        imp_call2(imp, "equal", length(imp, s), imp_scalar_i(imp, RLY_DTYPE_I32, 0), NULL);
    Expr *trap = imp_trap(imp, (uint32_t)r, shape, et->dtype, "the sequence is empty");
    return imp_set_out(imp, 0, if_expr(imp, empty, trap, fold, acc_t));
}

/* SplitToSequence with a run-time length or chunk size: a recursive slicer
 *   %go(%x, %off, %len, %step) = if (%off >= %len) { Nil }
 *       else { Cons(x[off : end] along axis, %go(%x, end, %len, %step)) }
 * with end = off + min(step, len - off)
 * called as %go(x, 0, x.shape[axis], step). */
static Expr *split_dynamic(Imp *imp, Expr *x, int64_t axis, Expr *len, Expr *step, bool squeeze,
                           Type *elem) {
    if (len == NULL || step == NULL) return NULL;
    Ctx *ctx = imp_ctx(imp);
    Type *i64 = ir_type_scalar(ctx, RLY_DTYPE_I64), *lt = imp_list_type(imp, elem);
    Var *px = imp_var(imp, "x", imp_type(x)), *off = imp_var(imp, "off", i64),
        *pl = imp_var(imp, "len", i64), *ps = imp_var(imp, "step", i64);
    Type *pt[4] = {imp_type(x), i64, i64, i64};
    Var *go = imp_var(imp, "split", ir_type_func(ctx, 4, pt, lt, 0, NULL, 0, NULL));
    Expr *rem = imp_call2(imp, "subtract", &pl->base, &off->base, NULL); /* > 0 here */
    Expr *end = imp_call2(imp, "add", &off->base, imp_call2(imp, "minimum", &ps->base, rem, NULL),
                          NULL); /* min(off + step, len) without overflow */
    static const int64_t one[1] = {1};
    ImpAttrs ra = {0};
    ia_ints(imp, &ra, "newshape", 1, one);
    ImpAttrs sa = {0};
    ia_ints(imp, &sa, "axes", 1, &axis);
    Expr *sargs[4] = {&px->base, imp_call1(imp, "reshape", &off->base, &ra),
                      imp_call1(imp, "reshape", end, &ra), imp_const_i64s(imp, 1, one)};
    Expr *chunk = sargs[1] && sargs[2] ? imp_call(imp, "dyn.strided_slice", 4, sargs, &sa) : NULL;
    if (squeeze && chunk) {
        ImpAttrs qa = {0};
        ia_ints(imp, &qa, "axis", 1, &axis);
        chunk = imp_call1(imp, "squeeze", chunk, &qa);
    }
    Expr *rargs[4] = {&px->base, end, &pl->base, &ps->base};
    Expr *rec =
        end ? typed(ir_call_new(ctx, &go->base, 4, rargs, NULL, 0, NULL, imp_span(imp)), lt) : NULL;
    Expr *more = chunk && rec ? cons(imp, chunk, rec, elem) : NULL;
    Expr *done = imp_call2(imp, "greater_equal", &off->base, &pl->base, NULL);
    Expr *body = if_expr(imp, done, nil(imp, elem), more, lt);
    if (body == NULL) return NULL;
    Var *params[4] = {px, off, pl, ps};
    Expr *fn =
        typed(ir_function_new(ctx, 4, params, body, lt, 0, NULL, NULL, imp_span(imp)), go->ann);
    Expr *args[4] = {x, imp_scalar_i(imp, RLY_DTYPE_I64, 0), len, step};
    Expr *call = typed(ir_call_new(ctx, &go->base, 4, args, NULL, 0, NULL, imp_span(imp)), lt);
    return typed(ir_let_new(ctx, go, fn, call, imp_span(imp)), lt);
}

static Expr *slice1(Imp *imp, Expr *x, int64_t axis, int64_t begin, int64_t end) {
    int64_t step = 1;
    ImpAttrs a = {0};
    ia_ints(imp, &a, "begin", 1, &begin);
    ia_ints(imp, &a, "end", 1, &end);
    ia_ints(imp, &a, "strides", 1, &step);
    ia_ints(imp, &a, "axes", 1, &axis);
    return imp_call1(imp, "strided_slice", x, &a);
}

static bool conv_split_to_sequence(Imp *imp) {
    Expr *x = imp_tin(imp, 0, "input"), *s = imp_in(imp, 1);
    if (x == NULL) return false;
    int64_t r = imp_rank(x), axis = imp_attr_int(imp, "axis", 0);
    if (r == 0) return imp_error(imp, "cannot split a 0-d tensor");
    if (axis < -r || axis >= r)
        return imp_error(imp, "axis %lld is out of range for rank %lld (valid: %lld to %lld)",
                         (long long)axis, (long long)r, (long long)-r, (long long)(r - 1));
    if (axis < 0) axis += r;
    if (s != NULL && imp_tt(s) == NULL) return imp_error(imp, "input 1 (split) must be a tensor");
    if (s != NULL && (!(sup_dtype_is_int(imp_dtype(s))) || imp_rank(s) > 1))
        return imp_error(imp, "'split' must be an integer scalar or 1-D tensor, got %s",
                         type_text(imp, imp_type(s)));
    int64_t d = imp_tt(x)->shape[axis];
    const int64_t *sv = NULL;
    uint32_t n_sv = 0;
    bool s_const = s != NULL && imp_const_ints(imp, s, &sv, &n_sv);
    if (s != NULL && imp_rank(s) == 1) { /* sizes: one chunk each (keepdims does not apply) */
        Type *elem = imp_any_dims(imp, imp_type(x));
        int64_t k = imp_tt(s)->shape[0];
        if (!dim_known(k)) return imp_error(imp, "the length of 'split' must be known");
        if (k > STATIC_MAX)
            return imp_error(imp, "'split' has %lld parts (at most %d)", (long long)k, STATIC_MAX);
        Expr **parts = imp_alloc(imp, (size_t)(k + 1) * sizeof *parts);
        if (s_const) {
            int64_t at = 0;
            for (int64_t i = 0; i < k; i++) {
                if (sv[i] < 0)
                    return imp_error(imp, "split size %lld is negative", (long long)sv[i]);
                if (sv[i] > INT64_MAX - at) return imp_error(imp, "the split sizes overflow");
                if ((parts[i] = slice1(imp, x, axis, at, at + sv[i])) == NULL) return false;
                at += sv[i];
            }
            if (dim_known(d) && at != d)
                return imp_error(imp, "the split sizes add up to %lld but axis %lld has size %lld",
                                 (long long)at, (long long)axis, (long long)d);
        } else { /* part i is x[ends[i] - sizes[i] : ends[i]] */
            Expr *sz = imp_cast(imp, s, RLY_DTYPE_I64);
            ImpAttrs cs = {0};
            ia_int(imp, &cs, "axis", 0);
            Expr *ends = imp_call1(imp, "cumsum", sz, &cs);
            Expr *begins = ends ? imp_call2(imp, "subtract", ends, sz, NULL) : NULL;
            static const int64_t one[1] = {1};
            for (int64_t i = 0; i < k; i++) {
                if (begins == NULL) return false;
                ImpAttrs a = {0};
                ia_ints(imp, &a, "axes", 1, &axis);
                Expr *args[4] = {x, slice1(imp, begins, 0, i, i + 1),
                                 slice1(imp, ends, 0, i, i + 1), imp_const_i64s(imp, 1, one)};
                parts[i] =
                    args[1] && args[2] ? imp_call(imp, "dyn.strided_slice", 4, args, &a) : NULL;
                if (parts[i] == NULL) return false;
            }
        }
        return imp_set_out(imp, 0, list_of(imp, parts, (uint32_t)k, elem));
    }
    /* chunks of `step` (the last one may be shorter); without 'split', chunks of 1 whose axis
     * goes away when keepdims = 0 */
    bool squeeze = s == NULL && imp_attr_int(imp, "keepdims", 1) == 0;
    Type *elem = imp_any_dims(imp, imp_type(x));
    if (squeeze) {
        TensorType *xt = imp_tt(x);
        int64_t *dims = imp_alloc(imp, (size_t)r * sizeof *dims);
        for (int64_t i = 0; i < r - 1; i++)
            dims[i] = DIM_ANY;
        elem = ir_type_tensor(imp_ctx(imp), xt->dtype, (uint32_t)(r - 1), dims);
    }
    int64_t step = s == NULL ? 1 : s_const ? sv[0] : -1;
    if (s_const && step <= 0)
        return imp_error(imp, "the split size must be positive, got %lld", (long long)step);
    if (dim_known(d) && step > 0 && d / step + (d % step != 0) <= STATIC_MAX) {
        int64_t k = d / step + (d % step != 0);
        Expr **parts = imp_alloc(imp, (size_t)(k + 1) * sizeof *parts);
        for (int64_t i = 0; i < k; i++) {
            int64_t b = i * step, e = step < d - b ? b + step : d; /* b < d: no overflow */
            parts[i] = slice1(imp, x, axis, b, e);
            if (squeeze && parts[i]) {
                ImpAttrs qa = {0};
                ia_ints(imp, &qa, "axis", 1, &axis);
                parts[i] = imp_call1(imp, "squeeze", parts[i], &qa);
            }
            if (parts[i] == NULL) return false;
        }
        return imp_set_out(imp, 0, list_of(imp, parts, (uint32_t)k, elem));
    }
    Expr *len;
    if (dim_known(d)) {
        len = imp_scalar_i(imp, RLY_DTYPE_I64, d);
    } else {
        ImpAttrs sa = {0}, ta = {0};
        ia_str(imp, &sa, "dtype", "int64");
        ia_int(imp, &ta, "axis", 0);
        len = imp_call2(imp, "take", imp_call1(imp, "shape_of", x, &sa),
                        imp_scalar_i(imp, RLY_DTYPE_I64, axis), &ta);
    }
    Expr *st;
    if (step > 0) {
        st = imp_scalar_i(imp, RLY_DTYPE_I64, step);
    } else { /* a run-time chunk size: checked positive (0 would never end) */
        Expr *v = imp_cast(imp, s, RLY_DTYPE_I64);
        Expr *ok = imp_call2(imp, "greater", v, imp_scalar_i(imp, RLY_DTYPE_I64, 0), NULL);
        st = if_expr(imp, ok, v,
                     imp_trap(imp, 0, NULL, RLY_DTYPE_I64, "the split size must be positive"),
                     ir_type_scalar(imp_ctx(imp), RLY_DTYPE_I64));
    }
    return imp_set_out(imp, 0, split_dynamic(imp, x, axis, len, st, squeeze, elem));
}

/* SequenceMap: the body mapped over the sequence inputs zipped, the tensor inputs the same in
 * every step. A let-bound recursive function
 *   %map(%s0, %s1, ..., %t..., %captured...) = match (%s0) {
 *     Cons(%x0, %r0) => match? (%s1) { Cons(%x1, %r1) => ...
 *         let %rest = %map(%r0, %r1, ..., %t..., %captured...);
 *         (Cons(out0, %rest.0), Cons(out1, %rest.1), ...) },
 *     Nil => (Nil, Nil, ...) }
 * whose body is the subgraph converted with %x_i and %t_j bound to its inputs. */
static bool conv_sequence_map(Imp *imp) {
    Ctx *ctx = imp_ctx(imp);
    const OxAttr *ga = imp_attr(imp, "body");
    if (ga == NULL || ga->g == NULL)
        return imp_error(imp, "attribute 'body' (a graph) is required");
    const OxGraph *g = ga->g;
    uint32_t n_in = imp_n_inputs(imp), n_out = g->n_outputs;
    if (n_in == 0) return imp_error(imp, "needs at least one input");
    if (g->n_inputs != n_in)
        return imp_error(imp, "the body takes %u inputs, the node gives %u", g->n_inputs, n_in);
    if (imp_n_outputs(imp) > n_out)
        return imp_error(imp, "the node names %u outputs, the body gives %u", imp_n_outputs(imp),
                         n_out);
    Expr **in = imp_alloc(imp, n_in * sizeof *in), **vals = imp_alloc(imp, n_in * sizeof *vals);
    Type **elem = imp_alloc(imp, n_in * sizeof *elem);
    Var **sp = imp_alloc(imp, n_in * sizeof *sp), **xv = imp_alloc(imp, n_in * sizeof *xv),
        **rv = imp_alloc(imp, n_in * sizeof *rv);
    for (uint32_t i = 0; i < n_in; i++) {
        if ((in[i] = imp_in_req(imp, i, i ? "additional input" : "input_sequence")) == NULL)
            return false;
        elem[i] = imp_list_elem(imp, imp_type(in[i]));
        if (i == 0 && elem[i] == NULL)
            return imp_error(imp, "input 0 must be a sequence, got %s",
                             type_text(imp, imp_type(in[0])));
        if (elem[i] != NULL) {
            if ((elem[i] = imp_force(imp, elem[i])) == NULL) return false;
            sp[i] = imp_var(imp, "seq", imp_list_type(imp, elem[i]));
            xv[i] = pvar(imp, "x", elem[i]);
            rv[i] = pvar(imp, "rest", imp_list_type(imp, elem[i]));
            vals[i] = &xv[i]->base;
        } else {
            if (imp_tt(in[i]) == NULL)
                return imp_error(imp, "input %u must be a sequence or a tensor, got %s", i,
                                 type_text(imp, imp_type(in[i])));
            sp[i] = imp_var(imp, "t", imp_type(in[i]));
            vals[i] = &sp[i]->base;
        }
    }
    PtrVec cap_outer = {0}, cap_inner = {0};
    Expr **outs = imp_convert_body(imp, g, n_in, vals, &cap_outer, &cap_inner);
    bool ok = outs != NULL;
    Type **ot = imp_alloc(imp, (n_out + 1) * sizeof *ot),
         **lt = imp_alloc(imp, (n_out + 1) * sizeof *lt);
    for (uint32_t j = 0; ok && j < n_out; j++) {
        if (imp_tt(outs[j]) == NULL) {
            ok = imp_error(imp,
                           "body output %u is %s; only tensors can be mapped (sequences of "
                           "sequences are not supported)",
                           j, type_text(imp, imp_type(outs[j])));
            break;
        }
        ot[j] = imp_any_dims(imp, imp_type(outs[j]));
        lt[j] = imp_list_type(imp, ot[j]);
    }
    uint32_t n_cap = (uint32_t)cap_inner.len, n_params = n_in + n_cap;
    Var **params = imp_alloc(imp, (n_params + 1) * sizeof *params);
    Type **pt = imp_alloc(imp, (n_params + 1) * sizeof *pt);
    Expr **rec_args = imp_alloc(imp, (n_params + 1) * sizeof *rec_args);
    Expr **first = imp_alloc(imp, (n_params + 1) * sizeof *first);
    for (uint32_t i = 0; i < n_params; i++) {
        params[i] = i < n_in ? sp[i] : AS_VAR(cap_inner.data[i - n_in]);
        pt[i] = params[i]->base.checked_type;
        rec_args[i] = i < n_in && elem[i] ? &rv[i]->base : &params[i]->base;
        first[i] = i < n_in ? in[i] : cap_outer.data[i - n_in];
    }
    vec_free(&cap_outer);
    vec_free(&cap_inner);
    if (!ok) return false;
    Type *ret = ir_type_tuple(ctx, n_out, lt);
    Var *map = imp_var(imp, "map", ir_type_func(ctx, n_params, pt, ret, 0, NULL, 0, NULL));
    Span span = imp_span(imp);
    Expr *rec = typed(ir_call_new(ctx, &map->base, n_params, rec_args, NULL, 0, NULL, span), ret);
    Var *rest = imp_var(imp, "rest", ret);
    Expr **cells = imp_alloc(imp, (n_out + 1) * sizeof *cells),
         **nils = imp_alloc(imp, (n_out + 1) * sizeof *nils);
    for (uint32_t j = 0; j < n_out; j++) {
        cells[j] = cons(imp, outs[j], imp_get(imp, &rest->base, j), ot[j]);
        nils[j] = nil(imp, ot[j]);
        if (cells[j] == NULL || nils[j] == NULL) return false;
    }
    Expr *inner = typed(ir_let_new(ctx, rest, rec, imp_tuple(imp, n_out, cells), span), ret);
    Constructor *c_cons = ctor(imp, "Cons"), *c_nil = ctor(imp, "Nil");
    for (uint32_t i = n_in; i-- > 0;) {
        if (elem[i] == NULL) continue;
        Pattern *sub[2] = {ir_pattern_var(ctx, xv[i], span), ir_pattern_var(ctx, rv[i], span)};
        Clause cl[2] = {
            {ir_pattern_ctor(ctx, c_cons, 2, sub, span), inner, span},
            {ir_pattern_ctor(ctx, c_nil, 0, NULL, span), imp_tuple(imp, n_out, nils), span}};
        inner = typed(ir_match_new(ctx, &sp[i]->base, i == 0 ? 2 : 1, cl, i == 0, span), ret);
    }
    Expr *fn =
        typed(ir_function_new(ctx, n_params, params, inner, ret, 0, NULL, NULL, span), map->ann);
    Expr *call = typed(ir_call_new(ctx, &map->base, n_params, first, NULL, 0, NULL, span), ret);
    Expr *let = typed(ir_let_new(ctx, map, fn, call, span), ret);
    for (uint32_t j = 0; j < n_out; j++)
        imp_out(imp, j, imp_get(imp, let, j));
    return true;
}

/* ---- optionals ------------------------------------------------------------------------------- */

static bool conv_optional(Imp *imp) {
    Expr *x = imp_in(imp, 0);
    if (x != NULL) {
        Type *t = imp_resolve(imp, imp_type(x));
        if (t->kind != TYPE_TENSOR && imp_list_elem(imp, t) == NULL)
            return imp_error(imp, "input 0 must be a tensor or a sequence, got %s",
                             type_text(imp, t));
        Type *vt = imp_any_dims(imp, t);
        Expr *v = upcast(imp, x, vt);
        return imp_set_out(imp, 0, ccall(imp, "Some", 1, &v, imp_option_type(imp, vt)));
    }
    const OxAttr *a = imp_attr(imp, "type");
    if (a == NULL || a->tp == NULL)
        return imp_error(imp, "without an input, the attribute 'type' is required");
    Type *t;
    if (a->tp->kind == OXT_TENSOR && a->tp->ndim < 0) { /* rank unknown: fixed later, or a hint */
        int dt = imp_onnx_dtype(imp, a->tp->elem_type);
        if (dt < 0) return false;
        t = imp_elem_new(imp, dt, -1, node_text(imp));
    } else if ((t = imp_onnx_type(imp, a->tp, "the 'type' attribute")) == NULL) {
        return false;
    }
    if (imp_option_elem(imp, t) != NULL)
        return imp_error(imp, "optionals of optionals are not supported");
    return imp_set_out(imp, 0,
                       ccall(imp, "None", 0, NULL, imp_option_type(imp, imp_any_dims(imp, t))));
}

static bool conv_optional_has_element(Imp *imp) {
    Expr *x = imp_in(imp, 0);
    Expr *yes = imp_scalar_i(imp, RLY_DTYPE_BOOL, 1), *no = imp_scalar_i(imp, RLY_DTYPE_BOOL, 0);
    if (x == NULL) return imp_set_out(imp, 0, no); /* an omitted input: no element */
    Type *vt = imp_option_elem(imp, imp_type(x));
    if (vt == NULL) return imp_set_out(imp, 0, yes); /* a plain tensor or sequence (opset 18) */
    Ctx *ctx = imp_ctx(imp);
    Span span = imp_span(imp);
    Pattern *any = ir_pattern_wildcard(ctx, span);
    Clause cl[2] = {{ir_pattern_ctor(ctx, ctor(imp, "Some"), 1, &any, span), yes, span},
                    {ir_pattern_ctor(ctx, ctor(imp, "None"), 0, NULL, span), no, span}};
    return imp_set_out(
        imp, 0,
        typed(ir_match_new(ctx, x, 2, cl, true, span), ir_type_scalar(ctx, RLY_DTYPE_BOOL)));
}

/* OptionalGetElement: the value, or a run-time error at the node when there is none. A plain
 * tensor or sequence passes through (opset 18 allows them). */
static bool conv_optional_get_element(Imp *imp) {
    Expr *x = imp_in_req(imp, 0, "input");
    if (x == NULL) return false;
    Type *vt = imp_option_elem(imp, imp_type(x));
    if (vt == NULL) {
        Type *t = imp_resolve(imp, imp_type(x));
        if (t->kind != TYPE_TENSOR && imp_list_elem(imp, t) == NULL)
            return imp_error(imp, "input 0 must be an optional, got %s", type_text(imp, t));
        imp_out(imp, 0, x);
        return true;
    }
    if ((vt = imp_force(imp, vt)) == NULL) return false;
    Ctx *ctx = imp_ctx(imp);
    Span span = imp_span(imp);
    if (is_ctor_call(x, "Some", 1)) { /* made at import time */
        imp_out(imp, 0, AS_CALL(x)->args[0]);
        return true;
    }
    Var *v = pvar(imp, "value", vt);
    Pattern *pv = ir_pattern_var(ctx, v, span);
    Clause cl[2] = {{ir_pattern_ctor(ctx, ctor(imp, "Some"), 1, &pv, span), &v->base, span}, {0}};
    uint32_t n_cl = 1;
    if (vt->kind == TYPE_TENSOR) { /* a clear message; a list has no `trap` (match? fails) */
        TensorType *tt = AS_TENSOR_TYPE(vt);
        Expr *trap = imp_trap(imp, tt->ndim, tt->shape, tt->dtype, "the optional is empty");
        if (trap == NULL) return false;
        cl[1] = (Clause){ir_pattern_ctor(ctx, ctor(imp, "None"), 0, NULL, span), trap, span};
        n_cl = 2;
    }
    return imp_set_out(imp, 0, typed(ir_match_new(ctx, x, n_cl, cl, n_cl == 2, span), vt));
}

const ImpConv imp_conv_seq[] = {
    {"SequenceEmpty", "", 11, conv_sequence_empty},
    {"SequenceConstruct", "", 11, conv_sequence_construct},
    {"SequenceInsert", "", 11, conv_sequence_insert},
    {"SequenceAt", "", 11, conv_sequence_at},
    {"SequenceErase", "", 11, conv_sequence_erase},
    {"SequenceLength", "", 11, conv_sequence_length},
    {"ConcatFromSequence", "", 11, conv_concat_from_sequence},
    {"SplitToSequence", "", 11, conv_split_to_sequence},
    {"SequenceMap", "", 17, conv_sequence_map},
    {"Optional", "", 15, conv_optional},
    {"OptionalHasElement", "", 15, conv_optional_has_element},
    {"OptionalGetElement", "", 15, conv_optional_get_element},
    {NULL, NULL, 0, NULL},
};
