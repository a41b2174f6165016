/* ops.c - the operator registry (builtin tables plus rows registered at run time), attribute
 * schemas (defaults parsed once from their Relay text, validation of a call's attributes), and
 * the helpers relations are written with. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "ops/ops.h"

const char *op_pattern_name(OpPattern p) {
    switch (p) {
    case OP_ELEMWISE: return "elemwise";
    case OP_BROADCAST: return "broadcast";
    case OP_INJECTIVE: return "injective";
    case OP_COMM_REDUCE: return "comm-reduce";
    case OP_OUT_EWISE_FUSABLE: return "out-elemwise-fusable";
    case OP_TUPLE: return "tuple";
    case OP_OPAQUE: return "opaque";
    }
    return "?";
}

/* ---- registry ---------------------------------------------------------------------------- */

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;
    Ctx *ctx; /* owns the default AttrValues */
    StrMap by_name;
    PtrVec all;
} reg = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, NULL, {0}, {0}};

/* A tiny reader for the default texts: numbers, strings, True/False, None, lists. */
typedef struct DefReader {
    const char *s;
    bool bad;
} DefReader;

static void skip_ws(DefReader *r) {
    while (*r->s == ' ')
        r->s++;
}

static AttrValue *read_default(DefReader *r) {
    Ctx *ctx = reg.ctx;
    skip_ws(r);
    const char *s = r->s;
    if (*s == '[') {
        r->s++;
        AttrValue *items[64];
        uint32_t n = 0;
        skip_ws(r);
        while (*r->s != ']' && !r->bad) {
            if (n == 64) {
                r->bad = true;
                return NULL;
            }
            items[n++] = read_default(r);
            skip_ws(r);
            if (*r->s == ',')
                r->s++;
            else if (*r->s != ']')
                r->bad = true;
            skip_ws(r);
        }
        if (*r->s != ']') {
            r->bad = true;
            return NULL;
        }
        r->s++;
        return ir_attr_list(ctx, n, items, SPAN_NONE);
    }
    if (*s == '"') {
        const char *e = strchr(s + 1, '"');
        if (e == NULL) {
            r->bad = true;
            return NULL;
        }
        r->s = e + 1;
        return ir_attr_str(ctx, s + 1, (size_t)(e - s - 1), SPAN_NONE);
    }
    if (strncmp(s, "True", 4) == 0 || strncmp(s, "False", 5) == 0) {
        bool b = s[0] == 'T';
        r->s += b ? 4 : 5;
        return ir_attr_bool(ctx, b, SPAN_NONE);
    }
    if (strncmp(s, "None", 4) == 0) {
        r->s += 4;
        return ir_attr_none(ctx, SPAN_NONE);
    }
    char *end;
    if (strcmp(s, "inf") == 0 || strcmp(s, "-inf") == 0) {
        r->s += strlen(s);
        return ir_attr_float(ctx, s[0] == '-' ? -INFINITY : INFINITY, RLY_DTYPE_F32, SPAN_NONE);
    }
    long long v = strtoll(s, &end, 10);
    if (end != s && *end != '.' && *end != 'e' && *end != 'E') {
        r->s = end;
        return ir_attr_int(ctx, v, RLY_DTYPE_I32, SPAN_NONE);
    }
    double d = strtod(s, &end);
    if (end == s) {
        r->bad = true;
        return NULL;
    }
    r->s = end;
    return ir_attr_float(ctx, d, RLY_DTYPE_F32, SPAN_NONE);
}

static bool value_fits(const AttrSpec *spec, const AttrValue *v, StrBuf *msg, Span *where);

/* Count the schema rows and parse the defaults of one row. */
static bool prepare(OpDef *def, StrBuf *msg) {
    uint32_t n = 0;
    if (def->attrs)
        while (def->attrs[n].name)
            n++;
    def->n_attrs = n;
    def->defaults = n ? arena_array(&reg.ctx->arena, n, sizeof(AttrValue *)) : NULL;
    for (uint32_t i = 0; i < n; i++) {
        const AttrSpec *sp = &def->attrs[i];
        if (sp->dflt == NULL) continue;
        DefReader r = {sp->dflt, false};
        AttrValue *v = read_default(&r);
        skip_ws(&r);
        Span where;
        if (r.bad || *r.s != '\0' || v == NULL || !value_fits(sp, v, msg, &where)) {
            sb_printf(msg, "%s: bad default for attribute %s: %s", def->name, sp->name, sp->dflt);
            return false;
        }
        def->defaults[i] = v;
    }
    return true;
}

/* A new operator changes this count: give it its rows (support/ops.def lists them), then update
 * it. The registry checks at first use that the tables hold exactly one row per id. */
_Static_assert(OP_ID_COUNT == 231, "operator added or removed: see support/ops.def");

static void reg_init(void) {
    reg.ctx = ir_ctx_new();
    OpDef *tables[] = {ops_unary_table,     ops_binary_table,       ops_reduce_table,
                       ops_transform_table, ops_index_table,        ops_nn_table,
                       ops_conv_pool_table, ops_image_vision_table, ops_qnn_table,
                       ops_misc_table,      ops_dyn_table};
    OpDef *by_id[OP_ID_COUNT] = {0};
    for (size_t t = 0; t < RLY_ARRAY_LEN(tables); t++)
        for (OpDef *d = tables[t]; d->rel; d++) {
            RLY_CHECK(d->id < OP_ID_COUNT && by_id[d->id] == NULL,
                      "operator table: id %u out of range or given two rows", d->id);
            by_id[d->id] = d;
        }
    StrBuf msg = {0};
    for (uint32_t id = 0; id < OP_ID_COUNT; id++) {
        OpDef *d = by_id[id];
        RLY_CHECK(d != NULL, "operator table: %s has no row", sup_op_name(id));
        d->name = sup_op_name(id);
        bool ok = prepare(d, &msg);
        RLY_CHECK(ok, "operator table: %s", sb_cstr(&msg));
        RLY_CHECK(strmap_get(&reg.by_name, d->name, strlen(d->name)) == NULL,
                  "operator table: %s named twice in ops.def", d->name);
        strmap_put(&reg.by_name, d->name, strlen(d->name), d);
        vec_push(&reg.all, d);
    }
    sb_free(&msg);
}

static void ensure_init(void) { pthread_once(&reg.once, reg_init); }

const OpDef *op_lookup(const char *name, size_t len) {
    ensure_init();
    pthread_mutex_lock(&reg.lock);
    const OpDef *d = strmap_get(&reg.by_name, name, len);
    pthread_mutex_unlock(&reg.lock);
    return d;
}

size_t op_count(void) {
    ensure_init();
    return reg.all.len;
}

const OpDef *op_at(size_t i) {
    ensure_init();
    return i < reg.all.len ? reg.all.data[i] : NULL;
}

bool op_register(OpDef *def, StrBuf *msg) {
    ensure_init();
    pthread_mutex_lock(&reg.lock);
    bool ok = false;
    if (strmap_get(&reg.by_name, def->name, strlen(def->name)) != NULL)
        sb_printf(msg, "operator %s is already defined", def->name);
    else if (prepare(def, msg)) {
        def->id = (uint32_t)reg.all.len;
        strmap_put(&reg.by_name, def->name, strlen(def->name), def);
        vec_push(&reg.all, def);
        ok = true;
    }
    pthread_mutex_unlock(&reg.lock);
    return ok;
}

const OpDef *op_resolve(Expr *op) {
    Op *o = AS_OP(op);
    if (o->info == NULL) o->info = op_lookup(o->name, strlen(o->name));
    return o->info;
}

int op_call_id(Expr *e) {
    if (e->kind != EXPR_CALL || AS_CALL(e)->op->kind != EXPR_OP) return -1;
    const OpDef *d = op_def_of(AS_CALL(e)->op);
    return d ? (int)d->id : -1;
}

static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb) {
    size_t row[64];
    if (nb >= 63) return (size_t)-1;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t cur = row[j];
            size_t sub = prev + (a[i - 1] != b[j - 1]);
            size_t del = row[j] + 1, ins = row[j - 1] + 1;
            row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            prev = cur;
        }
    }
    return row[nb];
}

const char *op_suggest(const char *name, size_t len) {
    ensure_init();
    const char *best = NULL;
    size_t best_d = len / 3 + 1;
    for (size_t i = 0; i < reg.all.len; i++) {
        const OpDef *d = reg.all.data[i];
        size_t n = strlen(d->name);
        /* "conv2d" -> "nn.conv2d": a missing namespace */
        const char *dot = strrchr(d->name, '.');
        if (dot && strlen(dot + 1) == len && memcmp(dot + 1, name, len) == 0) return d->name;
        size_t e = edit_distance(name, len, d->name, n);
        if (e < best_d) {
            best_d = e;
            best = d->name;
        }
    }
    return best;
}

/* ---- attributes ------------------------------------------------------------------------------ */

static const char *type_words(AttrType t) {
    switch (t) {
    case AT_INT: return "an integer";
    case AT_FLOAT: return "a number";
    case AT_BOOL: return "a boolean";
    case AT_STR: return "a string";
    case AT_DTYPE: return "a dtype string";
    case AT_INTS: return "a list of integers";
    case AT_FLOATS: return "a list of numbers";
    case AT_STRS: return "a list of strings";
    case AT_OPT_INT: return "an integer or None";
    case AT_OPT_INTS: return "a list of integers or None";
    case AT_OPT_FLOAT: return "a number or None";
    case AT_ANY: return "any value";
    }
    return "?";
}

static bool is_int(const AttrValue *v) { return v->kind == ATTR_INT || v->kind == ATTR_BOOL; }
static bool is_num(const AttrValue *v) { return is_int(v) || v->kind == ATTR_FLOAT; }

static bool all_items(const AttrValue *v, bool (*pred)(const AttrValue *)) {
    if (v->kind != ATTR_LIST) return false;
    for (uint32_t i = 0; i < v->list.n; i++)
        if (!pred(v->list.items[i])) return false;
    return true;
}

static bool is_str(const AttrValue *v) { return v->kind == ATTR_STR; }

static bool choice_ok(const char *choices, const char *s) {
    size_t n = strlen(s);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t m = bar ? (size_t)(bar - c) : strlen(c);
        if (m == n && memcmp(c, s, n) == 0) return true;
        if (!bar) break;
        c = bar + 1;
    }
    return false;
}

static bool value_fits(const AttrSpec *spec, const AttrValue *v, StrBuf *msg, Span *where) {
    bool ok;
    switch (spec->type) {
    case AT_INT: ok = is_int(v); break;
    case AT_FLOAT: ok = is_num(v); break;
    case AT_BOOL: ok = is_int(v); break;
    case AT_STR: ok = is_str(v); break;
    case AT_DTYPE:
        ok = is_str(v) && (v->s[0] == '\0' || sup_dtype_parse(v->s, strlen(v->s)) >= 0 ||
                           strcmp(v->s, "void") == 0);
        if (is_str(v) && !ok) {
            sb_printf(msg, "attribute %s: unknown dtype \"%s\"", spec->name, v->s);
            *where = v->span;
            return false;
        }
        break;
    case AT_INTS: ok = is_int(v) || all_items(v, is_int); break;
    case AT_FLOATS: ok = is_num(v) || all_items(v, is_num); break;
    case AT_STRS: ok = all_items(v, is_str); break;
    case AT_OPT_INT: ok = is_int(v) || v->kind == ATTR_NONE; break;
    case AT_OPT_INTS: ok = v->kind == ATTR_NONE || is_int(v) || all_items(v, is_int); break;
    case AT_OPT_FLOAT: ok = is_num(v) || v->kind == ATTR_NONE; break;
    case AT_ANY: ok = true; break;
    default: ok = false;
    }
    if (!ok) {
        sb_printf(msg, "attribute %s must be %s", spec->name, type_words(spec->type));
        *where = v->span;
        return false;
    }
    if (spec->type == AT_STR && spec->choices && !choice_ok(spec->choices, v->s)) {
        sb_printf(msg, "attribute %s: \"%s\" is not one of ", spec->name, v->s);
        for (const char *c = spec->choices; *c; c++)
            sb_puts(msg, *c == '|' ? ", " : (char[]){*c, 0});
        *where = v->span;
        return false;
    }
    return true;
}

bool op_bind_attrs(const OpDef *op, const Attrs *attrs, const AttrValue **vals, StrBuf *msg,
                   Span *where) {
    *where = SPAN_NONE;
    for (uint32_t i = 0; i < op->n_attrs; i++)
        vals[i] = op->defaults[i];
    uint32_t n = attrs ? attrs->n : 0;
    for (uint32_t k = 0; k < n; k++) {
        const AttrEntry *e = &attrs->entries[k];
        uint32_t i = 0;
        while (i < op->n_attrs && strcmp(op->attrs[i].name, e->key) != 0)
            i++;
        if (i == op->n_attrs) {
            *where = e->value->span;
            if (op->n_attrs == 0) {
                sb_printf(msg, "unknown attribute %s (this operator takes no attributes)", e->key);
            } else {
                sb_printf(msg, "unknown attribute %s; the attributes are ", e->key);
                for (uint32_t j = 0; j < op->n_attrs; j++)
                    sb_printf(msg, "%s%s", j ? ", " : "", op->attrs[j].name);
            }
            return false;
        }
        if (!value_fits(&op->attrs[i], e->value, msg, where)) return false;
        vals[i] = e->value;
    }
    for (uint32_t i = 0; i < op->n_attrs; i++)
        if (vals[i] == NULL) {
            sb_printf(msg, "attribute %s is required (%s)", op->attrs[i].name,
                      type_words(op->attrs[i].type));
            return false;
        }
    return true;
}

/* The first tensor type in a tuple type that breaks the shape limit. */
typedef struct LimitWalk {
    char *buf;
    size_t cap;
    const char *why; /* NULL until one is found */
} LimitWalk;

static bool limit_pre(void *st, Type *t) {
    LimitWalk *w = st;
    if (w->why != NULL) return false;
    if (t->kind == TYPE_TENSOR) {
        TensorType *tt = (TensorType *)t;
        w->why = sup_shape_check(tt->ndim, tt->shape, true, w->buf, w->cap);
    }
    return t->kind == TYPE_TUPLE; /* other types are not looked into */
}

/* The reason the first tensor type in t (a tensor, or tuples of them; other types are not
 * looked into) breaks the shape limit (support.h, "shapes"), written into buf; NULL when none
 * does. A tuple type is a DAG (a field may be shared many times): each node is visited once. */
static const char *shape_limit_error(Type *t, char *buf, size_t cap) {
    if (t->kind == TYPE_TENSOR)
        return sup_shape_check(AS_TENSOR_TYPE(t)->ndim, AS_TENSOR_TYPE(t)->shape, true, buf, cap);
    if (t->kind != TYPE_TUPLE) return NULL;
    LimitWalk w = {buf, cap, NULL};
    PtrMap seen = {0};
    ir_type_visit(t, &seen, limit_pre, NULL, &w);
    ptrmap_free(&seen);
    return w.why;
}

/* Relations see only argument types within the shape limit, and their results obey it too. */
RelResult op_relate(Ctx *ctx, const OpDef *op, const AttrValue *const *vals, uint32_t n_args,
                    Type *const *args, Type **out, StrBuf *msg, int *err_arg) {
    RelCall rc = {ctx, op, n_args, args, vals, NULL, msg, -1, REL_OK};
    char why[128];
    for (uint32_t i = 0; i < n_args; i++)
        if (args[i] != NULL && shape_limit_error(args[i], why, sizeof why) != NULL) {
            *err_arg = (int)i;
            return rel_error_arg(&rc, (int)i, "argument %u has type %s, but %s", i,
                                 rel_type_str(&rc, args[i]), why);
        }
    RelResult r = op->rel(&rc);
    *err_arg = rc.err_arg;
    if (r == REL_OK) {
        RLY_CHECK(rc.out != NULL, "relation of %s returned no type", op->name);
        if (shape_limit_error(rc.out, why, sizeof why) != NULL) {
            *err_arg = -1;
            return rel_error(&rc, "the result would have type %s, but %s",
                             rel_type_str(&rc, rc.out), why);
        }
        *out = rc.out;
    }
    return r;
}

static size_t attr_index(const RelCall *rc, const char *name) {
    const OpDef *op = rc->op;
    for (uint32_t i = 0; i < op->n_attrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0) return i;
    rly_panic(__FILE__, __LINE__, "%s has no attribute %s in its schema", op->name, name);
}

const AttrValue *attr_value(const RelCall *rc, const char *name) {
    return rc->attrs[attr_index(rc, name)];
}

static int64_t as_int(const AttrValue *v) {
    if (v->kind == ATTR_BOOL) return v->b;
    if (v->kind == ATTR_FLOAT) return (int64_t)v->f;
    return v->i;
}

static double as_float(const AttrValue *v) {
    if (v->kind == ATTR_FLOAT) return v->f;
    return (double)as_int(v);
}

int64_t attr_int(const RelCall *rc, const char *name) { return as_int(attr_value(rc, name)); }
double attr_float(const RelCall *rc, const char *name) { return as_float(attr_value(rc, name)); }
bool attr_bool(const RelCall *rc, const char *name) { return as_int(attr_value(rc, name)) != 0; }
bool attr_is_none(const RelCall *rc, const char *name) {
    return attr_value(rc, name)->kind == ATTR_NONE;
}

const char *attr_str(const RelCall *rc, const char *name) {
    const AttrValue *v = attr_value(rc, name);
    return v->kind == ATTR_STR ? v->s : "";
}

int attr_dtype(const RelCall *rc, const char *name) {
    const char *s = attr_str(rc, name);
    if (s[0] == '\0' || strcmp(s, "void") == 0) return -1;
    return sup_dtype_parse(s, strlen(s));
}

rly_dtype attr_dtype_or(const RelCall *rc, const char *name, rly_dtype dflt) {
    int dt = attr_dtype(rc, name);
    return dt < 0 ? dflt : (rly_dtype)dt;
}

uint32_t attr_ints(const RelCall *rc, const char *name, const int64_t **out) {
    const AttrValue *v = attr_value(rc, name);
    if (v->kind == ATTR_NONE) {
        *out = rel_dims((RelCall *)rc, 0);
        return 0;
    }
    if (v->kind != ATTR_LIST) {
        int64_t *a = rel_dims((RelCall *)rc, 1);
        a[0] = as_int(v);
        *out = a;
        return 1;
    }
    int64_t *a = rel_dims((RelCall *)rc, v->list.n);
    for (uint32_t i = 0; i < v->list.n; i++)
        a[i] = as_int(v->list.items[i]);
    *out = a;
    return v->list.n;
}

uint32_t attr_floats(const RelCall *rc, const char *name, const double **out) {
    const AttrValue *v = attr_value(rc, name);
    uint32_t n = v->kind == ATTR_LIST ? v->list.n : v->kind == ATTR_NONE ? 0 : 1;
    double *a = arena_array(&rc->ctx->arena, n ? n : 1, sizeof(double));
    if (v->kind == ATTR_LIST)
        for (uint32_t i = 0; i < n; i++)
            a[i] = as_float(v->list.items[i]);
    else if (n)
        a[0] = as_float(v);
    *out = a;
    return n;
}

/* ---- relation helpers --------------------------------------------------------------------------
 */

TensorType *rel_tensor(RelCall *rc, uint32_t i) {
    RLY_CHECK(i < rc->n_args, "%s: argument %u out of range", rc->op->name, i);
    Type *t = rc->args[i];
    if (t->kind == TYPE_TENSOR) return (TensorType *)t;
    if (t->kind == TYPE_INCOMPLETE) {
        rc->status = REL_DEFER;
        return NULL;
    }
    rel_error_arg(rc, (int)i, "argument %u must be a tensor, got %s", i, rel_type_str(rc, t));
    return NULL;
}

TensorType **rel_tensor_tuple(RelCall *rc, uint32_t i, uint32_t *n) {
    RLY_CHECK(i < rc->n_args, "%s: argument %u out of range", rc->op->name, i);
    Type *t = rc->args[i];
    if (t->kind == TYPE_INCOMPLETE) {
        rc->status = REL_DEFER;
        return NULL;
    }
    if (t->kind != TYPE_TUPLE) {
        rel_error_arg(rc, (int)i, "argument %u must be a tuple of tensors, got %s", i,
                      rel_type_str(rc, t));
        return NULL;
    }
    TupleType *tt = (TupleType *)t;
    TensorType **out = arena_array(&rc->ctx->arena, tt->n ? tt->n : 1, sizeof(TensorType *));
    for (uint32_t k = 0; k < tt->n; k++) {
        Type *f = tt->fields[k];
        if (f->kind == TYPE_INCOMPLETE) {
            rc->status = REL_DEFER;
            return NULL;
        }
        if (f->kind != TYPE_TENSOR) {
            rel_error_arg(rc, (int)i, "field %u of argument %u must be a tensor, got %s", k, i,
                          rel_type_str(rc, f));
            return NULL;
        }
        out[k] = (TensorType *)f;
    }
    *n = tt->n;
    return out;
}

static RelResult verror(RelCall *rc, int arg, const char *fmt, va_list ap) {
    sb_vprintf(rc->msg, fmt, ap);
    rc->err_arg = arg;
    rc->status = REL_ERROR;
    return REL_ERROR;
}

RelResult rel_error(RelCall *rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    RelResult r = verror(rc, -1, fmt, ap);
    va_end(ap);
    return r;
}

RelResult rel_error_arg(RelCall *rc, int arg, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    RelResult r = verror(rc, arg, fmt, ap);
    va_end(ap);
    return r;
}

RelResult rel_out(RelCall *rc, Type *t) {
    rc->out = t;
    return REL_OK;
}

RelResult rel_out_tensor(RelCall *rc, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    rc->out = ir_type_tensor(rc->ctx, dt, ndim, shape);
    return REL_OK;
}

static const char *arena_str(RelCall *rc, StrBuf *sb) {
    const char *s = arena_strndup(&rc->ctx->arena, sb_cstr(sb), sb->len);
    sb_free(sb);
    return s;
}

const char *rel_type_str(RelCall *rc, Type *t) {
    StrBuf sb = {0};
    ir_print_type(rc->ctx, t, &sb);
    return arena_str(rc, &sb);
}

static void put_dim(RelCall *rc, StrBuf *sb, int64_t d) {
    if (d == DIM_ANY)
        sb_putc(sb, '?');
    else if (dim_is_sym(d))
        sb_puts(sb, ir_dim_sym_name(rc->ctx, d));
    else
        sb_printf(sb, "%lld", (long long)d);
}

const char *rel_shape_str(RelCall *rc, uint32_t ndim, const int64_t *shape) {
    StrBuf sb = {0};
    sb_putc(&sb, '(');
    for (uint32_t i = 0; i < ndim; i++) {
        if (i) sb_puts(&sb, ", ");
        put_dim(rc, &sb, shape[i]);
    }
    if (ndim == 1) sb_putc(&sb, ',');
    sb_putc(&sb, ')');
    return arena_str(rc, &sb);
}

const char *rel_dim_str(RelCall *rc, int64_t d) {
    StrBuf sb = {0};
    put_dim(rc, &sb, d);
    return arena_str(rc, &sb);
}

bool rel_axis(RelCall *rc, int64_t axis, uint32_t ndim, const char *what, int64_t *out) {
    int64_t a = axis < 0 ? axis + (int64_t)ndim : axis;
    if (a < 0 || a >= (int64_t)ndim) {
        rel_error(rc, "%s %lld is out of range for a tensor of rank %u (valid: %lld to %lld)", what,
                  (long long)axis, ndim, -(long long)ndim, (long long)ndim - 1);
        return false;
    }
    *out = a;
    return true;
}

int64_t *rel_dims(RelCall *rc, uint32_t n) {
    return arena_array(&rc->ctx->arena, n ? n : 1, sizeof(int64_t));
}

bool rel_is_float(rly_dtype dt) { return sup_dtype_is_float(dt); }
bool rel_is_integer(rly_dtype dt) { return sup_dtype_is_int(dt) || sup_dtype_is_uint(dt); }

/* ---- dims -------------------------------------------------------------------------------------
 */

int64_t dim_merge(int64_t a, int64_t b) {
    if (dim_known(a)) return a;
    if (dim_known(b)) return b;
    if (dim_is_sym(a)) return a;
    return b;
}

bool dim_broadcast(int64_t a, int64_t b, int64_t *out) {
    if (a == b)
        *out = a;
    else if (a == 1)
        *out = b;
    else if (b == 1)
        *out = a;
    else if (dim_known(a) && dim_known(b))
        return false;
    else if (dim_known(a))
        *out = a; /* the unknown one is 1 or a */
    else if (dim_known(b))
        *out = b;
    else
        *out = DIM_ANY;
    return true;
}

/* Constant results that overflow int64 become `?`: a later check reports the size. */
int64_t dim_add(int64_t a, int64_t b) {
    if (b == 0) return a;
    if (a == 0) return b;
    int64_t r;
    if (!dim_known(a) || !dim_known(b) || __builtin_add_overflow(a, b, &r)) return DIM_ANY;
    return r;
}

int64_t dim_sub(int64_t a, int64_t b) {
    if (b == 0) return a;
    int64_t r;
    if (!dim_known(a) || !dim_known(b) || __builtin_sub_overflow(a, b, &r)) return DIM_ANY;
    return r;
}

int64_t dim_mul(int64_t a, int64_t b) {
    if (a == 0 || b == 0) return 0;
    if (b == 1) return a;
    if (a == 1) return b;
    int64_t r;
    if (!dim_known(a) || !dim_known(b) || __builtin_mul_overflow(a, b, &r)) return DIM_ANY;
    return r;
}

int64_t dim_floordiv(int64_t a, int64_t b) {
    if (b == 1) return a;
    if (!dim_known(a) || !dim_known(b) || b == 0) return DIM_ANY;
    return a / b;
}

int64_t dim_ceildiv(int64_t a, int64_t b) {
    if (b == 1) return a;
    if (!dim_known(a) || !dim_known(b) || b == 0) return DIM_ANY;
    return a / b + (a % b != 0);
}

bool rel_broadcast(RelCall *rc, uint32_t na, const int64_t *a, uint32_t nb, const int64_t *b,
                   uint32_t *nout, int64_t **out) {
    uint32_t n = na > nb ? na : nb;
    int64_t *s = rel_dims(rc, n);
    for (uint32_t i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (!dim_broadcast(da, db, &s[i])) {
            rel_error(rc, "shapes %s and %s are not broadcastable (dimension %u: %lld vs %lld)",
                      rel_shape_str(rc, na, a), rel_shape_str(rc, nb, b), i, (long long)da,
                      (long long)db);
            return false;
        }
    }
    *nout = n;
    *out = s;
    return true;
}

bool rel_dim_add(RelCall *rc, int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (dim_known(a) && dim_known(b) && !sup_dim_add(a, b, &r)) {
        rel_error(rc, "a result dimension %lld + %lld is too large (over 2^62)", (long long)a,
                  (long long)b);
        return false;
    }
    *out = dim_add(a, b);
    return true;
}

bool rel_dim_mul(RelCall *rc, int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (dim_known(a) && dim_known(b) && !sup_dim_mul(a, b, &r)) {
        rel_error(rc, "a result dimension %lld * %lld is too large (over 2^62)", (long long)a,
                  (long long)b);
        return false;
    }
    *out = dim_mul(a, b);
    return true;
}

/* ---- layouts ----------------------------------------------------------------------------------
 */

bool rel_layout_parse(RelCall *rc, const char *attr, const char *text, Layout *l) {
    char why[256];
    l->attr = attr;
    if (sup_layout_parse(text, l, why, sizeof why) == NULL) return true;
    rel_error(rc, "%s %s", attr, why);
    return false;
}

bool rel_layout_fits(RelCall *rc, int arg, const TensorType *t, const Layout *l, const char *what) {
    if (t->ndim != l->n) {
        rel_error_arg(rc, arg, "%s has rank %u but %s \"%s\" has %u axes (shape %s)", what, t->ndim,
                      l->attr, l->text, l->n, rel_shape_str(rc, t->ndim, t->shape));
        return false;
    }
    for (uint32_t i = 0; i < l->n; i++)
        if (l->factor[i] > 0 && !dim_compat(t->shape[i], l->factor[i])) {
            rel_error_arg(rc, arg, "%s dimension %u (sub-axis %c of %s \"%s\") is %s, not %lld",
                          what, i, l->axis[i], l->attr, l->text, rel_dim_str(rc, t->shape[i]),
                          (long long)l->factor[i]);
            return false;
        }
    return true;
}
