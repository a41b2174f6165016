/* printer.c - canonical Relay text in TVM's conventions (`#[version = "0.0.5"]`).
 *
 * Layout: a block (function body, let body, if branch, clause, top-level expression) prints its
 * result expression last; every non-atomic operand of an expression is first bound on its own
 * line as a graph binding `%N = ...;` (Graph Normal Form), so a shared subexpression prints
 * once. Let nodes print as `let %x = v;`. A subexpression used from several blocks (branches,
 * closures, clauses) is bound once, in the innermost block that encloses all its uses (as
 * Relay's conversion to A-normal form places it), just before the first line that needs it;
 * a planning pass (plan) finds those blocks before printing.
 * Variables get distinct names per definition (`%x`, `%x1`, ...); graph bindings are numbered
 * per definition in order of emission.
 *
 * Nothing recurses over expression depth: printing runs an explicit stack of tasks (blocks,
 * bindings, inline expressions, text). Types, patterns and attribute values are small and are
 * printed recursively. */
#include <math.h>
#include <stdio.h>

#include "ir/ir.h"

typedef enum TaskKind {
    T_BLOCK,      /* e: print the contents of a block whose result is e */
    T_PREP,       /* e: bind every non-atomic operand of e that has no name yet */
    T_BIND,       /* e: `%N = <e>;` unless e already has a name */
    T_BIND_END,   /* e, aux = N: close the binding line and name e */
    T_INLINE,     /* e: e itself on the current line (operands are named) */
    T_RESULT_END, /* e: close the result line of a block */
    T_TEXT,       /* s: literal text; aux = 1: indent first */
    T_TY_COMMENT, /* e: its type as a comment, when types are shown */
    T_INDENT,     /* aux: change the indentation by aux levels */
    T_PUSH_SCOPE,
    T_POP_SCOPE,
    T_CLAUSE, /* e (a Match), aux = clause index */
} TaskKind;

typedef struct Task {
    uint8_t kind;
    int32_t aux;
    Expr *e;
    const char *s;
} Task;

/* Where a non-atomic node prints. Use kinds: as an operand (always bound to a `%N`), as the
 * result of a block, or as the value of a let; a node with a single non-operand use prints
 * inline there, any other is bound in `home`, the lowest common block of its uses. */
enum { USE_OPERAND, USE_RESULT, USE_LETVAL };
typedef struct NodeInfo {
    uint32_t n_uses;
    uint8_t first_kind;
    bool multi_block; /* used from more than one block */
    int32_t first_block, home;
    int32_t block_base; /* the first block this node opens (fn body, branches, clauses, let) */
} NodeInfo;
typedef struct PBlock {
    int32_t parent, depth;
    bool deep; /* some node bound here is used inside a nested block */
} PBlock;

typedef struct Printer {
    Ctx *ctx;
    Module *m;
    StrBuf *out;
    bool show_types;
    int indent;
    Vec(Task) tasks;
    /* names */
    Arena scratch;
    PtrMap names;      /* Var, TypeVar -> name */
    StrMap used;       /* names taken in the current definition */
    PtrMap temp_of;    /* Expr -> temp number + 1, while the binding's block is open */
    PtrVec bound_log;  /* Exprs named, for closing scopes */
    Vec(size_t) marks; /* bound_log lengths at scope starts */
    uint32_t next_temp;
    PtrMap meta_index; /* Constant -> index + 1 */
    /* the plan of the definition being printed */
    PtrMap info; /* non-atomic Expr -> NodeInfo */
    Vec(struct PBlock) blocks;
    Vec(int32_t) cur; /* the blocks being printed, innermost last */
} Printer;

/* ---- names -------------------------------------------------------------------------------- */

static bool ident_char(char c, bool first) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
    return !first && ((c >= '0' && c <= '9') || c == '/');
}

/* A distinct printable name for a hint: invalid characters become '_', a leading digit gets a
 * 'v' prefix, and a taken name gets the smallest numeric suffix that is free. */
static const char *alloc_name(Printer *p, const char *hint) {
    StrBuf sb = {0};
    if (hint == NULL || hint[0] == '\0') hint = "x";
    if (hint[0] >= '0' && hint[0] <= '9') sb_putc(&sb, 'v');
    for (const char *c = hint; *c; c++)
        sb_putc(&sb, ident_char(*c, sb.len == 0) ? *c : '_');
    size_t base = sb.len;
    /* p->used maps a taken name to the first suffix not yet known to be taken, so that n
     * variables with one hint cost O(n) lookups, not O(n^2) */
    uintptr_t k = (uintptr_t)strmap_get(&p->used, sb.data, base);
    if (k != 0) {
        for (;; k++) {
            sb.len = base;
            sb_printf(&sb, "%u", (unsigned)k);
            if (strmap_get(&p->used, sb.data, sb.len) == NULL) break;
        }
        strmap_put(&p->used, sb.data, base, (void *)(k + 1));
    }
    strmap_put(&p->used, sb.data, sb.len, (void *)1);
    const char *name = arena_strndup(&p->scratch, sb.data, sb.len);
    sb_free(&sb);
    return name;
}

static const char *var_name(Printer *p, Var *v) {
    const char *n = ptrmap_get(&p->names, v);
    if (n == NULL) {
        n = alloc_name(p, v->name);
        ptrmap_put(&p->names, v, (void *)n);
    }
    return n;
}

static const char *tvar_name(Printer *p, TypeVar *v) {
    if (p == NULL) return v->name;
    const char *n = ptrmap_get(&p->names, v);
    if (n == NULL) {
        n = alloc_name(p, v->name);
        ptrmap_put(&p->names, v, (void *)n);
    }
    return n;
}

static void reset_def(Printer *p) {
    strmap_free(&p->used);
    p->next_temp = 0;
}

/* ---- scalars and types ----------------------------------------------------------------------- */

static const char *int_suffix(rly_dtype dt) {
    switch (dt) {
    case RLY_DTYPE_I8: return "i8";
    case RLY_DTYPE_I16: return "i16";
    case RLY_DTYPE_I64: return "i64";
    case RLY_DTYPE_U8: return "u8";
    case RLY_DTYPE_U16: return "u16";
    case RLY_DTYPE_U32: return "u32";
    case RLY_DTYPE_U64: return "u64";
    default: return "";
    }
}

static const char *float_suffix(rly_dtype dt) {
    switch (dt) {
    case RLY_DTYPE_F16: return "f16";
    case RLY_DTYPE_F64: return "f64";
    case RLY_DTYPE_BF16: return "bf16";
    default: return "f";
    }
}

/* True when the decimal text s denotes the same value of dtype dt as v. */
static bool float_roundtrips(const char *s, double v, rly_dtype dt) {
    double r = strtod(s, NULL);
    switch (dt) {
    case RLY_DTYPE_F16: return sup_f32_to_f16((float)r) == sup_f32_to_f16((float)v);
    case RLY_DTYPE_BF16: return sup_f32_to_bf16((float)r) == sup_f32_to_bf16((float)v);
    case RLY_DTYPE_F32: return (float)r == (float)v;
    default: return r == v;
    }
}

/* The shortest decimal form that reads back as the same value, with its suffix. */
static void print_float(double v, rly_dtype dt, StrBuf *out) {
    if (isnan(v)) {
        sb_printf(out, "%snan%s", signbit(v) ? "-" : "", float_suffix(dt));
        return;
    }
    if (isinf(v)) {
        sb_printf(out, "%sinf%s", v < 0 ? "-" : "", float_suffix(dt));
        return;
    }
    char buf[64];
    if (v == floor(v) && fabs(v) < 1e16) { /* whole numbers as digits: `10f`, not `1e+01f` */
        snprintf(buf, sizeof buf, "%.0f", v);
    } else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, v);
            if (float_roundtrips(buf, v, dt)) break;
        }
    }
    if (v == 0 && signbit(v)) snprintf(buf, sizeof buf, "-0");
    sb_printf(out, "%s%s", buf, float_suffix(dt));
}

static void print_int(int64_t v, rly_dtype dt, StrBuf *out) {
    if (dt == RLY_DTYPE_U64)
        sb_printf(out, "%llu", (unsigned long long)v);
    else
        sb_printf(out, "%lld", (long long)v);
    sb_puts(out, int_suffix(dt));
}

void ir_print_scalar(const Constant *c, StrBuf *out) {
    RLY_CHECK(c->ndim == 0, "ir_print_scalar: not a scalar");
    if (c->dtype == RLY_DTYPE_BOOL)
        sb_puts(out, ir_constant_as_i64(c) ? "True" : "False");
    else if (sup_dtype_is_float(c->dtype))
        print_float(ir_constant_as_f64(c), c->dtype, out);
    else
        print_int(ir_constant_as_i64(c), c->dtype, out);
}

static void print_dim(const Ctx *ctx, int64_t d, StrBuf *out) {
    if (d == DIM_ANY)
        sb_putc(out, '?');
    else if (dim_is_sym(d))
        sb_puts(out, ir_dim_sym_name(ctx, d));
    else
        sb_printf(out, "%lld", (long long)d);
}

static void print_tparams(Printer *p, uint32_t n, TypeVar **tv, StrBuf *out) {
    if (n == 0) return;
    sb_putc(out, '[');
    for (uint32_t i = 0; i < n; i++) {
        if (i) sb_puts(out, ", ");
        sb_puts(out, tvar_name(p, tv[i]));
    }
    sb_putc(out, ']');
}

/* What is left to print: a type, or text. */
typedef struct TyTask {
    Type *t;
    const char *s;
} TyTask;
typedef Vec(TyTask) TyTasks;

static void ty_push(TyTasks *st, Type *t, const char *s) {
    TyTask k = {t, s};
    vec_push(st, k);
}

/* Push items[n-1] .. items[0] with ", " between them, so that they print in order. */
static void ty_push_list(TyTasks *st, uint32_t n, Type **items) {
    for (uint32_t i = n; i-- > 0;) {
        ty_push(st, items[i], NULL);
        if (i) ty_push(st, NULL, ", ");
    }
}

/* Print t with an explicit stack (types nest arbitrarily deep); past `max` characters (0: no
 * limit) the text is cut, at a character boundary, and ends with `...`: a DAG-shaped type can
 * be exponentially longer than its node count. */
static void print_type_max(Printer *p, const Ctx *ctx, Type *root, size_t max, StrBuf *out) {
    size_t start = out->len;
    TyTasks st = {0};
    ty_push(&st, root, NULL);
    while (st.len) {
        TyTask k = vec_pop(&st);
        if (k.s) {
            sb_puts(out, k.s);
        } else {
            Type *t = k.t;
            switch ((TypeKind)t->kind) {
            case TYPE_TENSOR: {
                TensorType *x = (TensorType *)t;
                if (x->ndim == 0) {
                    sb_puts(out, sup_dtype_name(x->dtype));
                    break;
                }
                sb_puts(out, "Tensor[(");
                for (uint32_t i = 0; i < x->ndim; i++) {
                    if (i) sb_puts(out, ", ");
                    print_dim(ctx, x->shape[i], out);
                    if (max && out->len - start > max) break;
                }
                sb_printf(out, "), %s]", sup_dtype_name(x->dtype));
                break;
            }
            case TYPE_TUPLE: {
                TupleType *x = (TupleType *)t;
                sb_putc(out, '(');
                ty_push(&st, NULL, x->n == 1 ? ",)" : ")");
                ty_push_list(&st, x->n, x->fields);
                break;
            }
            case TYPE_FUNC: {
                FuncType *f = (FuncType *)t;
                sb_puts(out, "fn ");
                print_tparams(p, f->n_tparams, f->tparams, out);
                sb_putc(out, '(');
                ty_push(&st, f->ret, NULL);
                ty_push(&st, NULL, ") -> ");
                ty_push_list(&st, f->n_params, f->params);
                break;
            }
            case TYPE_VAR: sb_puts(out, tvar_name(p, (TypeVar *)t)); break;
            case TYPE_GLOBAL_VAR: sb_puts(out, ((GlobalTypeVar *)t)->name); break;
            case TYPE_CALL: {
                TypeCall *c = (TypeCall *)t;
                ty_push(&st, NULL, "]");
                ty_push_list(&st, c->n_args, c->args);
                ty_push(&st, NULL, "[");
                ty_push(&st, c->func, NULL);
                break;
            }
            case TYPE_REF:
                sb_puts(out, "ref(");
                ty_push(&st, NULL, ")");
                ty_push(&st, ((RefType *)t)->value, NULL);
                break;
            case TYPE_INCOMPLETE:
            case TYPE_RELATION:
            case TYPE_KIND_COUNT: sb_putc(out, '_'); break;
            }
        }
        if (max && out->len - start > max) {
            size_t cut = start + max;
            while (cut > start && ((unsigned char)out->data[cut] & 0xC0) == 0x80)
                cut--; /* not inside a UTF-8 sequence */
            out->len = cut;
            sb_puts(out, "...");
            break;
        }
    }
    vec_free(&st);
}

static void print_type(Printer *p, const Ctx *ctx, Type *t, StrBuf *out) {
    print_type_max(p, ctx, t, 0, out);
}

static void print_types(Printer *p, const Ctx *ctx, uint32_t n, Type **ts, StrBuf *out) {
    for (uint32_t i = 0; i < n; i++) {
        if (i) sb_puts(out, ", ");
        print_type(p, ctx, ts[i], out);
    }
}

void ir_print_type(const Ctx *ctx, Type *t, StrBuf *out) {
    print_type_max(NULL, ctx, t, IR_PRINT_TYPE_MAX, out);
}

void ir_print_type_max(const Ctx *ctx, Type *t, size_t max, StrBuf *out) {
    print_type_max(NULL, ctx, t, max, out);
}

/* ---- expressions -------------------------------------------------------------------------- */

static bool is_atomic(const Expr *e) {
    switch (e->kind) {
    case EXPR_VAR:
    case EXPR_GLOBAL_VAR:
    case EXPR_CONSTANT:
    case EXPR_OP:
    case EXPR_CONSTRUCTOR: return true;
    default: return false;
    }
}

static void push_task(Printer *p, TaskKind k, Expr *e, int32_t aux, const char *s) {
    Task t = {(uint8_t)k, aux, e, s};
    vec_push(&p->tasks, t);
}

static void put_indent(Printer *p) { sb_indent(p->out, 2 * p->indent); }

static void name_expr(Printer *p, Expr *e, uint32_t n) {
    ptrmap_put(&p->temp_of, e, (void *)(uintptr_t)(n + 1));
    vec_push(&p->bound_log, e);
}

static bool has_name(Printer *p, Expr *e) { return ptrmap_get(&p->temp_of, e) != NULL; }

/* Print an operand: an atom, or the graph binding that names it. */
static void print_operand(Printer *p, Expr *e) {
    StrBuf *out = p->out;
    uintptr_t n = (uintptr_t)ptrmap_get(&p->temp_of, e);
    if (n) {
        sb_printf(out, "%%%u", (unsigned)(n - 1));
        return;
    }
    switch (e->kind) {
    case EXPR_VAR: sb_printf(out, "%%%s", var_name(p, (Var *)e)); return;
    case EXPR_GLOBAL_VAR: sb_printf(out, "@%s", ((GlobalVar *)e)->name); return;
    case EXPR_OP: sb_puts(out, ((Op *)e)->name); return;
    case EXPR_CONSTRUCTOR: sb_puts(out, ((Constructor *)e)->name); return;
    case EXPR_CONSTANT: {
        Constant *c = (Constant *)e;
        if (c->ndim == 0) {
            ir_print_scalar(c, out);
            return;
        }
        uintptr_t k = (uintptr_t)ptrmap_get(&p->meta_index, c);
        if (k == 0) {
            vec_push(&p->m->meta, c);
            k = p->m->meta.len;
            ptrmap_put(&p->meta_index, c, (void *)k);
        }
        sb_printf(out, "meta[relay.Constant][%u]", (unsigned)(k - 1));
        return;
    }
    default: RLY_UNREACHABLE(); /* non-atomic operands are bound before use */
    }
}

/* A string literal: `"`, `\\` and control characters escaped (\", \\, \n, \t, \xHH), so any
 * string reads back as itself. Strings without them print as TVM prints them. */
static void print_string(const char *s, StrBuf *out) {
    sb_putc(out, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            sb_putc(out, '\\');
            sb_putc(out, (char)c);
        } else if (c == '\n') {
            sb_puts(out, "\\n");
        } else if (c == '\t') {
            sb_puts(out, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            sb_printf(out, "\\x%02x", c);
        } else {
            sb_putc(out, (char)c);
        }
    }
    sb_putc(out, '"');
}

static void print_attr_value(Printer *p, const AttrValue *a) {
    StrBuf *out = p->out;
    switch ((AttrKind)a->kind) {
    case ATTR_INT: print_int(a->i, a->dtype, out); return;
    case ATTR_FLOAT: print_float(a->f, a->dtype, out); return;
    case ATTR_BOOL: sb_puts(out, a->b ? "True" : "False"); return;
    case ATTR_STR: print_string(a->s, out); return;
    case ATTR_NONE: sb_puts(out, "None"); return;
    case ATTR_TYPE: print_type(p, p->ctx, a->type, out); return;
    case ATTR_EXPR: print_operand(p, a->expr); return;
    case ATTR_LIST:
        sb_putc(out, '[');
        for (uint32_t i = 0; i < a->list.n; i++) {
            if (i) sb_puts(out, ", ");
            print_attr_value(p, a->list.items[i]);
        }
        sb_putc(out, ']');
        return;
    }
}

static void print_attrs(Printer *p, const Attrs *a, bool comma_first) {
    if (a == NULL) return;
    for (uint32_t i = 0; i < a->n; i++) {
        if (comma_first || i) sb_puts(p->out, ", ");
        sb_printf(p->out, "%s=", a->entries[i].key);
        print_attr_value(p, a->entries[i].value);
    }
}

/* The operands of e printed inline (not nested blocks), in print order. */
static void operands(Expr *e, PtrVec *out) {
    switch ((ExprKind)e->kind) {
    case EXPR_TUPLE:
        for (uint32_t i = 0; i < ((Tuple *)e)->n; i++)
            vec_push(out, ((Tuple *)e)->fields[i]);
        break;
    case EXPR_TUPLE_GET_ITEM: vec_push(out, ((TupleGetItem *)e)->tuple); break;
    case EXPR_CALL: {
        Call *c = (Call *)e;
        vec_push(out, c->op);
        for (uint32_t i = 0; i < c->n_args; i++)
            vec_push(out, c->args[i]);
        break; /* attribute values are atoms (the parser enforces it): nothing to bind */
    }
    case EXPR_IF: vec_push(out, ((If *)e)->cond); break;
    case EXPR_MATCH: vec_push(out, ((Match *)e)->data); break;
    case EXPR_REF_CREATE: vec_push(out, ((RefCreate *)e)->value); break;
    case EXPR_REF_READ: vec_push(out, ((RefRead *)e)->ref); break;
    case EXPR_REF_WRITE:
        vec_push(out, ((RefWrite *)e)->ref);
        vec_push(out, ((RefWrite *)e)->value);
        break;
    default: break;
    }
}

static NodeInfo *info_of(Printer *p, const Expr *e) { return ptrmap_get(&p->info, e); }

/* Bound to a `%N` (not printed inline at its single use); unplanned nodes are bound. */
static bool is_bound(const NodeInfo *in) {
    return in == NULL || in->n_uses != 1 || in->first_kind == USE_OPERAND;
}

static bool is_bound_here(Printer *p, Expr *e) {
    NodeInfo *in = info_of(p, e);
    int32_t cur = p->cur.len ? vec_last(&p->cur) : -1;
    return in != NULL && is_bound(in) && in->home == cur;
}

/* Bind, before the current line, what it needs: the unnamed non-atomic operands of e, and, in a
 * block where shared nodes are used from nested blocks, every node homed here that e's nested
 * blocks use. With `self`, e itself when it is bound here (a line whose expression is shared). */
static void do_prep(Printer *p, Expr *e, bool self) {
    if (self && !is_atomic(e) && !has_name(p, e) && is_bound_here(p, e)) {
        push_task(p, T_BIND, e, 0, NULL);
        return;
    }
    int32_t cur = p->cur.len ? vec_last(&p->cur) : -1;
    PtrVec found = {0};
    if (cur < 0 || !p->blocks.data[cur].deep) {
        PtrVec ops = {0};
        operands(e, &ops);
        for (size_t i = 0; i < ops.len; i++) {
            Expr *c = ops.data[i];
            if (!is_atomic(c) && !has_name(p, c)) vec_push(&found, c);
        }
        vec_free(&ops);
    } else { /* walk into nested blocks too, stopping at nodes homed here */
        PtrMap seen = {0};
        PtrVec stack = {0};
        for (uint32_t i = ir_expr_n_children(e); i-- > 0;)
            vec_push(&stack, ir_expr_child(e, i));
        while (stack.len) {
            Expr *x = vec_pop(&stack);
            if (is_atomic(x) || has_name(p, x) || ptrmap_has(&seen, x)) continue;
            ptrmap_put(&seen, x, x);
            NodeInfo *in = info_of(p, x);
            if (is_bound(in) && (in == NULL || in->home == cur ||
                                 p->blocks.data[in->home].depth <= p->blocks.data[cur].depth)) {
                vec_push(&found, x); /* homed here (or, defensively, outside and unnamed) */
                continue;
            }
            for (uint32_t i = ir_expr_n_children(x); i-- > 0;)
                vec_push(&stack, ir_expr_child(x, i));
        }
        vec_free(&stack);
        ptrmap_free(&seen);
    }
    for (size_t i = found.len; i-- > 0;)
        push_task(p, T_BIND, found.data[i], 0, NULL);
    vec_free(&found);
}

static void print_var_binder(Printer *p, Var *v) {
    sb_printf(p->out, "%%%s", var_name(p, v));
    if (v->ann) {
        sb_puts(p->out, ": ");
        print_type(p, p->ctx, v->ann, p->out);
    }
}

static void print_pattern(Printer *p, Pattern *pat) {
    StrBuf *out = p->out;
    switch ((PatternKind)pat->kind) {
    case PAT_WILDCARD: sb_putc(out, '_'); return;
    case PAT_VAR: print_var_binder(p, pat->var); return;
    case PAT_CTOR:
        sb_puts(out, pat->ctor->name);
        if (pat->n == 0) return;
        break;
    case PAT_TUPLE: break;
    }
    sb_putc(out, '(');
    for (uint32_t i = 0; i < pat->n; i++) {
        if (i) sb_puts(out, ", ");
        print_pattern(p, pat->pats[i]);
    }
    sb_puts(out, pat->kind == PAT_TUPLE && pat->n == 1 ? ",)" : ")");
}

/* Tasks that print `{`-less block contents: indent, a new scope, the block, and back. The
 * caller has already written the opening text and pushes the closing text before this. */
static void push_nested_block(Printer *p, Expr *body, int32_t block) {
    push_task(p, T_INDENT, NULL, -1, NULL);
    push_task(p, T_POP_SCOPE, NULL, 0, NULL);
    push_task(p, T_BLOCK, body, 0, NULL);
    push_task(p, T_PUSH_SCOPE, NULL, block, NULL);
    push_task(p, T_INDENT, NULL, 1, NULL);
}

/* The first block e opens; -1 (no plan) keeps the enclosing block. */
static int32_t block_of(Printer *p, const Expr *e, int32_t k) {
    NodeInfo *in = info_of(p, e);
    return in ? in->block_base + k : -1;
}

static void print_fn_header(Printer *p, Function *f) {
    StrBuf *out = p->out;
    print_tparams(p, f->n_tparams, f->tparams, out);
    sb_putc(out, '(');
    for (uint32_t i = 0; i < f->n_params; i++) {
        if (i) sb_puts(out, ", ");
        print_var_binder(p, f->params[i]);
    }
    print_attrs(p, f->attrs, f->n_params > 0);
    sb_putc(out, ')');
    if (f->ret_type) {
        sb_puts(out, " -> ");
        print_type(p, p->ctx, f->ret_type, out);
    }
    sb_puts(out, " {\n");
}

static void do_inline(Printer *p, Expr *e) {
    StrBuf *out = p->out;
    if (is_atomic(e) || has_name(p, e)) {
        print_operand(p, e);
        return;
    }
    switch ((ExprKind)e->kind) {
    case EXPR_TUPLE: {
        Tuple *t = (Tuple *)e;
        sb_putc(out, '(');
        for (uint32_t i = 0; i < t->n; i++) {
            if (i) sb_puts(out, ", ");
            print_operand(p, t->fields[i]);
        }
        sb_puts(out, t->n == 1 ? ",)" : ")");
        return;
    }
    case EXPR_TUPLE_GET_ITEM: {
        /* `1.0` would read back as a float: literal operands go in parentheses */
        Expr *t = ((TupleGetItem *)e)->tuple;
        bool paren = t->kind != EXPR_VAR && !has_name(p, t);
        if (paren) sb_putc(out, '(');
        print_operand(p, t);
        if (paren) sb_putc(out, ')');
        sb_printf(out, ".%u", ((TupleGetItem *)e)->index);
        return;
    }
    case EXPR_CALL: {
        Call *c = (Call *)e;
        print_operand(p, c->op);
        if (c->op->kind == EXPR_CONSTRUCTOR && c->n_args == 0 && c->attrs == NULL) return;
        sb_putc(out, '(');
        for (uint32_t i = 0; i < c->n_args; i++) {
            if (i) sb_puts(out, ", ");
            print_operand(p, c->args[i]);
        }
        print_attrs(p, c->attrs, c->n_args > 0);
        sb_putc(out, ')');
        return;
    }
    case EXPR_REF_CREATE:
        sb_puts(out, "ref(");
        print_operand(p, ((RefCreate *)e)->value);
        sb_putc(out, ')');
        return;
    case EXPR_REF_READ:
        sb_puts(out, "ref_read(");
        print_operand(p, ((RefRead *)e)->ref);
        sb_putc(out, ')');
        return;
    case EXPR_REF_WRITE:
        sb_puts(out, "ref_write(");
        print_operand(p, ((RefWrite *)e)->ref);
        sb_puts(out, ", ");
        print_operand(p, ((RefWrite *)e)->value);
        sb_putc(out, ')');
        return;
    case EXPR_IF: {
        If *x = (If *)e;
        sb_puts(out, "if (");
        print_operand(p, x->cond);
        sb_puts(out, ") {\n");
        push_task(p, T_TEXT, NULL, 1, "}");
        push_nested_block(p, x->else_branch, block_of(p, e, 1));
        push_task(p, T_TEXT, NULL, 1, "} else {\n");
        push_nested_block(p, x->then_branch, block_of(p, e, 0));
        return;
    }
    case EXPR_FUNCTION: {
        Function *f = (Function *)e;
        sb_puts(out, "fn ");
        print_fn_header(p, f);
        push_task(p, T_TEXT, NULL, 1, "}");
        push_nested_block(p, f->body, block_of(p, e, 0));
        return;
    }
    case EXPR_MATCH: {
        Match *m = (Match *)e;
        sb_puts(out, m->complete ? "match (" : "match? (");
        print_operand(p, m->data);
        sb_puts(out, ") {\n");
        push_task(p, T_TEXT, NULL, 1, "}");
        for (uint32_t i = m->n_clauses; i-- > 0;)
            push_task(p, T_CLAUSE, e, (int32_t)i, NULL);
        return;
    }
    case EXPR_LET: /* a let in operand position prints as a scoped block */
        sb_puts(out, "{\n");
        push_task(p, T_TEXT, NULL, 1, "}");
        push_task(p, T_INDENT, NULL, -1, NULL);
        push_task(p, T_POP_SCOPE, NULL, 0, NULL);
        push_task(p, T_BLOCK, e, 2, NULL); /* 2: print as a let line even though it is bound */
        push_task(p, T_PUSH_SCOPE, NULL, block_of(p, e, 0), NULL);
        push_task(p, T_INDENT, NULL, 1, NULL);
        return;
    default: RLY_UNREACHABLE();
    }
}

#define TYPE_COMMENT_MAX 8192 /* characters of one type comment */

static void type_comment(Printer *p, Expr *e) {
    if (!p->show_types || e->checked_type == NULL) return;
    sb_puts(p->out, " /* ty=");
    /* a comment: cut, as in messages, so a DAG-shaped type cannot make the output explode */
    print_type_max(p, p->ctx, e->checked_type, TYPE_COMMENT_MAX, p->out);
    sb_puts(p->out, " */");
}

/* `let %x = <value>;`, then the body continues the same block. */
static void do_let_line(Printer *p, Expr *e) {
    Let *l = (Let *)e;
    put_indent(p);
    sb_puts(p->out, "let ");
    print_var_binder(p, l->var);
    sb_puts(p->out, " = ");
    /* what the value needs is bound before this line is started: see T_BLOCK */
    push_task(p, T_BLOCK, l->body, 0, NULL);
    push_task(p, T_TEXT, NULL, 0, ";\n");
    if (p->show_types && l->value->kind != EXPR_FUNCTION)
        push_task(p, T_TY_COMMENT, l->value, 0, NULL);
    push_task(p, T_INLINE, l->value, 0, NULL);
}

static void do_result(Printer *p, Expr *e) {
    push_task(p, T_RESULT_END, e, 0, NULL);
    push_task(p, T_INLINE, e, 0, NULL);
    push_task(p, T_TEXT, NULL, 1, "");
    push_task(p, T_PREP, e, 1, NULL);
}

/* A let prints as a line of its block when it has a single use as a block's result (or when
 * it is the contents of its own `{ }` block, aux 2); otherwise it is a shared value. */
static bool let_is_line(Printer *p, Expr *e, int32_t aux) {
    if (e->kind != EXPR_LET) return false;
    if (aux == 2) return true;
    NodeInfo *in = info_of(p, e);
    return in == NULL || (!is_bound(in) && in->first_kind == USE_RESULT);
}

static void run(Printer *p) {
    while (p->tasks.len) {
        Task t = vec_pop(&p->tasks);
        switch ((TaskKind)t.kind) {
        case T_BLOCK:
            if (t.aux != 1 && let_is_line(p, t.e, t.aux)) {
                /* bind what the value needs first, then come back to print the let line */
                push_task(p, T_BLOCK, t.e, 1, NULL);
                push_task(p, T_PREP, ((Let *)t.e)->value, 1, NULL);
            } else if (t.aux == 1) {
                do_let_line(p, t.e);
            } else {
                do_result(p, t.e);
            }
            break;
        case T_PREP: do_prep(p, t.e, t.aux == 1); break;
        case T_BIND:
            if (has_name(p, t.e)) break;
            push_task(p, T_BIND_END, t.e, 0, NULL);
            push_task(p, T_INLINE, t.e, 0, NULL);
            push_task(p, T_TEXT, NULL, 2, NULL); /* starts the line, see below */
            push_task(p, T_PREP, t.e, 0, NULL);
            break;
        case T_BIND_END:
            type_comment(p, t.e);
            sb_puts(p->out, ";\n");
            name_expr(p, t.e, (uint32_t)t.aux);
            break;
        case T_INLINE: do_inline(p, t.e); break;
        case T_TY_COMMENT: type_comment(p, t.e); break;
        case T_RESULT_END:
            type_comment(p, t.e);
            sb_putc(p->out, '\n');
            break;
        case T_TEXT:
            if (t.aux == 2) { /* the start of a binding line: allocate its number now */
                uint32_t n = p->next_temp++;
                put_indent(p);
                sb_printf(p->out, "%%%u = ", n);
                RLY_ASSERT(p->tasks.len > 0 && vec_last(&p->tasks).kind == T_INLINE);
                RLY_ASSERT(p->tasks.len > 1);
                p->tasks.data[p->tasks.len - 2].aux = (int32_t)n; /* the T_BIND_END */
                break;
            }
            if (t.aux == 1) put_indent(p);
            sb_puts(p->out, t.s);
            break;
        case T_INDENT: p->indent += t.aux; break;
        case T_PUSH_SCOPE:
            vec_push(&p->marks, p->bound_log.len);
            {
                int32_t blk = t.aux >= 0 ? t.aux : (p->cur.len ? vec_last(&p->cur) : -1);
                vec_push(&p->cur, blk);
            }
            break;
        case T_POP_SCOPE: {
            p->cur.len--;
            size_t mark = vec_pop(&p->marks);
            while (p->bound_log.len > mark)
                ptrmap_put(&p->temp_of, vec_pop(&p->bound_log), NULL);
            break;
        }
        case T_CLAUSE: {
            Match *m = (Match *)t.e;
            Clause *c = &m->clauses[t.aux];
            p->indent++;
            put_indent(p);
            print_pattern(p, c->lhs);
            sb_puts(p->out, " => {\n");
            push_task(p, T_INDENT, NULL, -1, NULL);
            push_task(p, T_TEXT, NULL, 1, "},\n");
            push_nested_block(p, c->rhs, block_of(p, t.e, t.aux));
            break;
        }
        }
    }
}

/* ---- the plan: where each shared node is bound ------------------------------------------- */

static int32_t new_block(Printer *p, int32_t parent) {
    struct PBlock b = {parent, parent < 0 ? 0 : p->blocks.data[parent].depth + 1, false};
    vec_push(&p->blocks, b);
    return (int32_t)p->blocks.len - 1;
}

static int32_t lca(Printer *p, int32_t a, int32_t b) {
    while (a != b) {
        if (p->blocks.data[a].depth >= p->blocks.data[b].depth)
            a = p->blocks.data[a].parent;
        else
            b = p->blocks.data[b].parent;
    }
    return a;
}

static void use(Printer *p, Expr *e, int32_t block, int kind) {
    if (is_atomic(e)) return;
    NodeInfo *in = info_of(p, e);
    if (in == NULL) {
        in = arena_alloc(&p->scratch, sizeof(NodeInfo));
        in->first_kind = (uint8_t)kind;
        in->first_block = in->home = block;
        ptrmap_put(&p->info, e, in);
    } else {
        in->multi_block |= block != in->first_block;
        in->home = lca(p, in->home, block);
    }
    in->n_uses++;
}

/* Parents are planned before their children (reverse post-order), so a node's home is final
 * when its own parts are placed: operands in its home, bodies in the blocks it opens. */
static void plan(Printer *p, Expr *root) {
    ptrmap_free(&p->info);
    p->blocks.len = 0;
    int32_t top = new_block(p, -1);
    PtrVec order = {0}, stack = {0};
    PtrMap seen = {0};
    Vec(uint32_t) next = {0};
    vec_push(&stack, root);
    vec_push(&next, 0);
    ptrmap_put(&seen, root, root);
    while (stack.len) { /* iterative post-order */
        Expr *e = vec_last(&stack);
        uint32_t i = vec_last(&next);
        if (i < ir_expr_n_children(e)) {
            vec_last(&next)++;
            Expr *c = ir_expr_child(e, i);
            if (!is_atomic(c) && !ptrmap_has(&seen, c)) {
                ptrmap_put(&seen, c, c);
                vec_push(&stack, c);
                vec_push(&next, 0);
            }
            continue;
        }
        vec_push(&order, e);
        stack.len--;
        next.len--;
    }
    use(p, root, top, USE_RESULT);
    for (size_t k = order.len; k-- > 0;) {
        Expr *e = order.data[k];
        NodeInfo *in = info_of(p, e);
        if (in == NULL) continue;
        int32_t h = in->home;
        if (in->multi_block) p->blocks.data[h].deep = true;
        switch ((ExprKind)e->kind) {
        case EXPR_LET: {
            Let *l = (Let *)e;
            int32_t b = h;
            if (is_bound(in) || in->first_kind != USE_RESULT) b = in->block_base = new_block(p, h);
            use(p, l->value, b, USE_LETVAL);
            use(p, l->body, b, USE_RESULT);
            break;
        }
        case EXPR_FUNCTION:
            in->block_base = new_block(p, h);
            use(p, ((Function *)e)->body, in->block_base, USE_RESULT);
            break;
        case EXPR_IF: {
            If *x = (If *)e;
            in->block_base = new_block(p, h);
            new_block(p, h);
            use(p, x->then_branch, in->block_base, USE_RESULT);
            use(p, x->else_branch, in->block_base + 1, USE_RESULT);
            break;
        }
        case EXPR_MATCH: {
            Match *m = (Match *)e;
            for (uint32_t i = 0; i < m->n_clauses; i++) {
                int32_t b = new_block(p, h);
                if (i == 0) in->block_base = b;
                use(p, m->clauses[i].rhs, b, USE_RESULT);
            }
            break;
        }
        default: break;
        }
        PtrVec ops = {0};
        operands(e, &ops);
        for (size_t i = 0; i < ops.len; i++)
            use(p, ops.data[i], h, USE_OPERAND);
        vec_free(&ops);
    }
    vec_free(&order);
    vec_free(&stack);
    vec_free(&next);
    ptrmap_free(&seen);
    p->cur.len = 0;
    vec_push(&p->cur, top);
}

static void print_block(Printer *p, Expr *e) {
    push_task(p, T_BLOCK, e, 0, NULL);
    run(p);
}

/* ---- module --------------------------------------------------------------------------------- */

static void print_typedata(Printer *p, TypeData *td) {
    StrBuf *out = p->out;
    reset_def(p);
    sb_printf(out, "%stype %s", td->is_extern ? "extern " : "", td->header->name);
    print_tparams(p, td->n_tvars, td->tvars, out);
    if (td->is_extern) {
        sb_putc(out, '\n');
        return;
    }
    sb_puts(out, " {\n");
    for (uint32_t i = 0; i < td->n_ctors; i++) {
        Constructor *c = td->ctors[i];
        sb_printf(out, "  %s", c->name);
        if (c->n_inputs) {
            sb_putc(out, '(');
            print_types(p, p->ctx, c->n_inputs, c->inputs, out);
            sb_putc(out, ')');
        }
        sb_puts(out, ",\n");
    }
    sb_puts(out, "}\n");
}

static void print_def(Printer *p, FuncDef *d) {
    reset_def(p);
    sb_printf(p->out, "def @%s", d->gvar->name);
    print_fn_header(p, d->func);
    p->indent = 1;
    vec_push(&p->marks, p->bound_log.len);
    plan(p, d->func->body);
    print_block(p, d->func->body);
    size_t mark = vec_pop(&p->marks);
    while (p->bound_log.len > mark)
        ptrmap_put(&p->temp_of, vec_pop(&p->bound_log), NULL);
    p->indent = 0;
    sb_puts(p->out, "}\n");
}

void ir_print_module(Module *m, const PrintOptions *opts, StrBuf *out) {
    Printer p = {.ctx = m->ctx, .m = m, .out = out, .show_types = opts && opts->show_types};
    for (size_t i = 0; i < m->meta.len; i++)
        ptrmap_put(&p.meta_index, m->meta.data[i], (void *)(uintptr_t)(i + 1));
    if (m->is_expr) {
        PtrVec fv = {0};
        if (m->expr) ir_free_vars(m->expr, &fv);
        for (size_t i = 0; i < fv.len; i++) {
            sb_puts(out, "free_var ");
            print_var_binder(&p, fv.data[i]);
            sb_puts(out, ";\n");
        }
        vec_free(&fv);
        if (m->expr) {
            plan(&p, m->expr);
            print_block(&p, m->expr);
        }
    } else {
        sb_puts(out, "#[version = \"0.0.5\"]\n");
        bool first = true;
        for (size_t i = 0; i < m->types.len; i++) {
            if (!first) sb_putc(out, '\n');
            first = false;
            print_typedata(&p, m->types.data[i]);
        }
        for (size_t i = 0; i < m->funcs.len; i++) {
            if (m->funcs.data[i].func == NULL) continue;
            if (!first) sb_putc(out, '\n');
            first = false;
            print_def(&p, &m->funcs.data[i]);
        }
    }
    vec_free(&p.tasks);
    arena_free(&p.scratch);
    ptrmap_free(&p.names);
    strmap_free(&p.used);
    ptrmap_free(&p.temp_of);
    vec_free(&p.bound_log);
    vec_free(&p.marks);
    ptrmap_free(&p.meta_index);
    ptrmap_free(&p.info);
    vec_free(&p.blocks);
    vec_free(&p.cur);
}
