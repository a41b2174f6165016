/* convert_layout.c - ConvertLayout (TVM's ConvertLayout, opt level 3, a function pass): puts the
 * layout-sensitive operators (nn.conv2d, nn.conv2d_transpose, the 2-D pools, nn.upsampling,
 * image.resize2d) in the layouts the user asks for (desired_layouts) and lets the layout-agnostic
 * operators between them (elementwise and broadcast arithmetic, concatenate, reductions,
 * nn.batch_norm, nn.bias_add, nn.prelu, nn.pad) follow the layout of their inputs, so that
 * layout_transform appears only at the borders: where a value enters (a parameter, a value no
 * converted operator produced), where it leaves (a function's result, an operator that cannot
 * follow, a call, a reference, an if or a match) and on constants, which are transformed here,
 * at compile time, into new constants.
 *
 * Two walks over a function. The analysis (ir_visit, children first) decides for every node the
 * layout its rewritten value has relative to the original program (an LState), and for every
 * operator call that changes, its new attributes and the layout each argument must arrive in (a
 * Decision). Each decision is checked by the operator's own type relation before it is taken: an
 * operator whose converted form does not type as expected keeps its layout. The rewrite
 * (ir_rewrite) then builds the decisions, inserting a transform wherever a value's layout differs
 * from what its consumer wants; transforms of one value are built once and shared.
 * docs/passes.md, "ConvertLayout", gives the parameter's syntax and where this differs from TVM. */
#include <stdio.h>

#include "ops/ops.h"
#include "passes/passes.h"

/* ======================================================================================
 * Layout states
 * ====================================================================================== */

enum { LS_NONE, LS_LAYOUT, LS_TUPLE };

/* The layout of a value relative to the original program, or, in a Decision, the layout an
 * argument must arrive in. */
typedef struct LState {
    uint8_t kind;
    bool bcast;             /* want of a broadcast operand: a primal axis of extent 1 stays 1 */
    const char *orig, *cur; /* LS_LAYOUT (interned): the value is the original one transformed
                             * from layout orig to layout cur */
    uint32_t n;             /* LS_TUPLE: the fields */
    struct LState **fields;
    uint32_t depth; /* LS_TUPLE: how deeply tuple states nest in the fields, <= TUPLE_DEPTH */
    uint32_t pre_n; /* want only: reshape the original value to this shape (of rank len(orig))
                     * before transforming it; 0 when it has that rank already */
    const int64_t *pre_shape;
} LState;

static LState none_state = {.kind = LS_NONE};
static LState pass_state = {.kind = LS_NONE};
#define NONE (&none_state)
#define PASS (&pass_state) /* a child that is taken as it is (a binder, a tuple field) */
/* A tuple of tuples deeper than this goes back to the original layout, so that the walks over
 * states (state_type, adapt_tuple) recurse a bounded depth. */
#define TUPLE_DEPTH 32

/* What to do with one operator call. */
typedef struct Decision {
    const char *op;     /* the operator to call (bias_add may become add) */
    const Attrs *attrs; /* its attributes */
    LState **want;      /* per argument: the layout it must arrive in */
    bool identity;      /* the call is its argument (a layout_transform that the input undoes) */
} Decision;

/* ======================================================================================
 * The operators the pass converts on request
 * ====================================================================================== */

enum { K_CONV, K_CONV_T, K_LAYOUT_ATTR };

/* K_LAYOUT_ATTR: an operator with a `layout` attribute over N, C, H and W that needs H and W
 * unsplit. These also follow the layout of their input when not asked for. */
static const struct {
    const char *name;
    uint8_t kind;
} sensitive[] = {
    {"nn.conv2d", K_CONV},
    {"nn.conv2d_transpose", K_CONV_T},
    {"nn.max_pool2d", K_LAYOUT_ATTR},
    {"nn.avg_pool2d", K_LAYOUT_ATTR},
    {"nn.global_max_pool2d", K_LAYOUT_ATTR},
    {"nn.global_avg_pool2d", K_LAYOUT_ATTR},
    {"nn.adaptive_max_pool2d", K_LAYOUT_ATTR},
    {"nn.adaptive_avg_pool2d", K_LAYOUT_ATTR},
    {"nn.upsampling", K_LAYOUT_ATTR},
    {"image.resize2d", K_LAYOUT_ATTR},
};
#define N_SENSITIVE RLY_ARRAY_LEN(sensitive)

typedef struct Desired {
    const char *data;   /* interned; NULL: not asked for */
    const char *kernel; /* interned; NULL: the default for data */
} Desired;

typedef struct XForm { /* a transform already built of some value */
    const char *src, *dst;
    bool bcast;
    Expr *out;
    struct XForm *next;
} XForm;

typedef struct CL {
    Ctx *ctx;
    const char *names[N_SENSITIVE]; /* sensitive[i].name interned */
    Desired desired[N_SENSITIVE];
    PtrMap state;    /* node -> LState* once analysed (binders: once bound) */
    PtrMap decision; /* call -> Decision* */
    PtrMap binds;    /* let value not yet analysed -> its Var */
    PtrMap xforms;   /* rewritten value -> XForm* chain */
    PtrMap layouts;  /* interned layout text -> its parsed Layout* (bad_layout: not one) */
} CL;

static const char *intern_s(CL *cl, const char *s) { return ir_intern(cl->ctx, s, strlen(s)); }

static LState *state_of(CL *cl, Expr *e) {
    LState *s = ptrmap_get(&cl->state, e);
    return s ? s : NONE;
}

static LState *layout_state(CL *cl, const char *orig, const char *cur) {
    if (strcmp(orig, cur) == 0) return NONE;
    LState *s = arena_alloc(&cl->ctx->arena, sizeof *s);
    s->kind = LS_LAYOUT;
    s->orig = intern_s(cl, orig);
    s->cur = intern_s(cl, cur);
    return s;
}

/* ======================================================================================
 * Layout strings
 * ====================================================================================== */

static bool lay_parse(Ctx *ctx, const char *text, Layout *l) {
    StrBuf msg = {0};
    RelCall rc = {0};
    rc.ctx = ctx;
    rc.msg = &msg;
    rc.err_arg = -1;
    bool ok = rel_layout_parse(&rc, "layout", text, l);
    sb_free(&msg);
    return ok;
}

static Layout bad_layout;

/* Layout text parsed once per pass run (the analysis asks for the same few layouts at every
 * node). */
static bool lay(CL *cl, const char *text, Layout *l) {
    const char *key = intern_s(cl, text);
    Layout *p = ptrmap_get(&cl->layouts, key);
    if (p == NULL) {
        p = arena_alloc(&cl->ctx->arena, sizeof *p);
        if (!lay_parse(cl->ctx, key, p)) p = &bad_layout;
        ptrmap_put(&cl->layouts, key, p);
    }
    *l = *p;
    return p != &bad_layout;
}

static char upper(char c) { return (char)(c - 'a' + 'A'); }
static char lower(char c) { return (char)(c - 'A' + 'a'); }

/* The block size of primal axis a in l (0 when a is not split). */
static int64_t lay_block(const Layout *l, char a) {
    int i = layout_find(l, lower(a));
    return i < 0 ? 0 : l->factor[i];
}

/* A shape in layout src as a shape in layout dst (same primal axes). A split axis of dst needs a
 * known extent divisible by its block, except that with bcast an extent of 1 stays 1 (outer and
 * inner): the operand then broadcasts along that axis. False when that fails, the primal axes
 * differ, or a sub-axis of src does not have its block size. */
static bool lay_shape(const Layout *src, const Layout *dst, const int64_t *shape, bool bcast,
                      int64_t *out) {
    int64_t full[26];
    bool has[26] = {false};
    uint32_t n_primal = 0;
    for (uint32_t i = 0; i < src->n; i++) {
        char a = src->axis[i];
        if (src->factor[i]) {
            if (shape[i] != src->factor[i]) return false;
            continue;
        }
        int64_t d = shape[i], b = lay_block(src, a);
        if (b) d = dim_known(d) ? d * b : DIM_ANY;
        full[a - 'A'] = d;
        has[a - 'A'] = true;
        n_primal++;
    }
    for (uint32_t i = 0; i < dst->n; i++) {
        char a = dst->axis[i], p = dst->factor[i] ? upper(a) : a;
        if (!has[p - 'A']) return false;
        int64_t f = full[p - 'A'];
        if (dst->factor[i]) {
            out[i] = bcast && f == 1 ? 1 : dst->factor[i];
            continue;
        }
        n_primal--;
        int64_t b = lay_block(dst, a);
        if (b == 0) {
            out[i] = f;
        } else if (bcast && f == 1) {
            out[i] = 1;
        } else {
            if (!dim_known(f) || f % b != 0) return false;
            out[i] = f / b;
        }
    }
    return n_primal == 0;
}

/* t (a tensor type in layout src) in layout dst; NULL when lay_shape fails. */
static Type *lay_type(CL *cl, Type *t, const char *src, const char *dst, bool bcast) {
    if (t == NULL || t->kind != TYPE_TENSOR) return NULL;
    TensorType *tt = (TensorType *)t;
    Layout s, d;
    if (!lay(cl, src, &s) || !lay(cl, dst, &d) || tt->ndim != s.n) return NULL;
    int64_t shape[LAYOUT_MAX];
    if (!lay_shape(&s, &d, tt->shape, bcast, shape)) return NULL;
    return ir_type_tensor(cl->ctx, tt->dtype, d.n, shape);
}

/* The type a value of original type t has in state s (NULL when it cannot have it). */
static Type *state_type(CL *cl, Type *t, const LState *s) {
    if (s->kind == LS_NONE) return t;
    if (s->kind == LS_TUPLE) {
        if (t == NULL || t->kind != TYPE_TUPLE || ((TupleType *)t)->n != s->n) return NULL;
        Type **fs = arena_array(&cl->ctx->arena, s->n ? s->n : 1, sizeof *fs);
        for (uint32_t i = 0; i < s->n; i++)
            if ((fs[i] = state_type(cl, ((TupleType *)t)->fields[i], s->fields[i])) == NULL)
                return NULL;
        return ir_type_tuple(cl->ctx, s->n, fs);
    }
    if (s->pre_n) {
        if (t == NULL || t->kind != TYPE_TENSOR) return NULL;
        t = ir_type_tensor(cl->ctx, ((TensorType *)t)->dtype, s->pre_n, s->pre_shape);
    }
    return lay_type(cl, t, s->orig, s->cur, s->bcast);
}

/* ======================================================================================
 * desired_layouts
 * ====================================================================================== */

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    return p;
}

static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

/* A word, optionally quoted; NULL when there is none. */
static const char *read_word(CL *cl, const char **pp) {
    const char *p = skip_ws(*pp);
    char q = (*p == '"' || *p == '\'') ? *p++ : 0;
    const char *s = p;
    while (word_char(*p))
        p++;
    if (p == s || (q && *p != q)) return NULL;
    const char *w = ir_intern(cl->ctx, s, (size_t)(p - s));
    *pp = skip_ws(q ? p + 1 : p);
    return w;
}

static bool is_nchwxc(const char *s, int64_t *x) {
    if (strncmp(s, "NCHW", 4) != 0) return false;
    char *end;
    long long v = strtoll(s + 4, &end, 10);
    if (v <= 0 || strcmp(end, "c") != 0) return false;
    *x = v;
    return true;
}

/* Record `op` asked for in layouts ls[0..n). */
static bool set_desired(CL *cl, const char *op, uint32_t n, const char *const *ls, StrBuf *err) {
    size_t k = 0;
    while (k < N_SENSITIVE && strcmp(sensitive[k].name, op) != 0)
        k++;
    if (k == N_SENSITIVE) {
        sb_printf(err, "ConvertLayout cannot convert '%s' (it converts:", op);
        for (size_t i = 0; i < N_SENSITIVE; i++)
            sb_printf(err, " %s", sensitive[i].name);
        sb_putc(err, ')');
        return false;
    }
    bool conv = sensitive[k].kind != K_LAYOUT_ATTR;
    if (n == 0 || n > (conv ? 2u : 1u)) {
        sb_printf(err, "%s takes %s, got %u", op,
                  conv ? "a data layout and optionally a kernel layout" : "one layout", n);
        return false;
    }
    Layout l;
    if (strcmp(ls[0], "default") == 0 || !lay(cl, ls[0], &l)) {
        sb_printf(err, "%s: '%s' is not a data layout", op, ls[0]);
        return false;
    }
    const char *kernel = n == 2 && strcmp(ls[1], "default") != 0 ? ls[1] : NULL;
    if (kernel && !lay(cl, kernel, &l)) {
        sb_printf(err, "%s: '%s' is not a kernel layout", op, kernel);
        return false;
    }
    int64_t x;
    if (conv && kernel == NULL && strcmp(ls[0], "NCHW") != 0 && strcmp(ls[0], "NHWC") != 0 &&
        !(sensitive[k].kind == K_CONV && (strcmp(ls[0], "HWNC") == 0 || is_nchwxc(ls[0], &x)))) {
        sb_printf(err, "%s: no default kernel layout for data layout %s; give one", op, ls[0]);
        return false;
    }
    cl->desired[k].data = ls[0];
    cl->desired[k].kernel = kernel;
    return true;
}

/* A bare layout X stands for every operator the pass converts: the convolutions get X and their
 * default kernel layout (conv2d_transpose only for NCHW and NHWC), the others X. */
static void set_all(CL *cl, const char *data) {
    for (size_t k = 0; k < N_SENSITIVE; k++) {
        if (sensitive[k].kind == K_CONV_T && strcmp(data, "NCHW") != 0 && strcmp(data, "NHWC") != 0)
            continue;
        cl->desired[k].data = data;
        cl->desired[k].kernel = NULL;
    }
}

/* Three forms: TVM's dictionary {"nn.conv2d": ["NHWC", "default"], "nn.max_pool2d": ["NHWC"]},
 * entries `op=data[:kernel]` separated by ';', and a bare layout (set_all). */
static bool parse_desired(CL *cl, const char *text, StrBuf *err) {
    const char *p = skip_ws(text);
    if (*p == '\0') {
        sb_puts(err, "desired_layouts is required, e.g. desired_layouts=NHWC or "
                     "desired_layouts=\"nn.conv2d=NHWC:default;nn.max_pool2d=NHWC\"");
        return false;
    }
    if (*p == '{') {
        p = skip_ws(p + 1);
        while (*p != '}') {
            const char *op = read_word(cl, &p), *ls[3];
            uint32_t n = 0;
            if (op == NULL || *p != ':') goto bad;
            p = skip_ws(p + 1);
            if (*p != '[') goto bad;
            p = skip_ws(p + 1);
            while (*p != ']') {
                const char *w = read_word(cl, &p);
                if (w == NULL || n == 3) goto bad;
                ls[n++] = w;
                if (*p == ',') p = skip_ws(p + 1);
            }
            p = skip_ws(p + 1);
            if (!set_desired(cl, op, n, ls, err)) return false;
            if (*p == ',')
                p = skip_ws(p + 1);
            else if (*p != '}')
                goto bad;
        }
        if (*skip_ws(p + 1) != '\0') goto bad;
        return true;
    }
    while (*p) {
        const char *first = read_word(cl, &p), *ls[3];
        uint32_t n = 0;
        if (first == NULL) goto bad;
        const char *op = NULL;
        if (*p == '=') {
            op = first;
            p++;
        } else {
            ls[n++] = first;
            if (*p == ':' || *p == ',') p++;
        }
        while (*p && *p != ';') {
            const char *w = read_word(cl, &p);
            if (w == NULL || n == 3) goto bad;
            ls[n++] = w;
            if (*p == ':' || *p == ',') p++;
        }
        if (op) {
            if (!set_desired(cl, op, n, ls, err)) return false;
        } else {
            Layout l;
            if (n != 1 || strcmp(ls[0], "default") == 0 || !lay(cl, ls[0], &l)) {
                sb_printf(err, "'%s' is not a layout", ls[0]);
                return false;
            }
            set_all(cl, ls[0]);
        }
        if (*p == ';') p = skip_ws(p + 1);
    }
    return true;
bad:
    sb_printf(err,
              "cannot read desired_layouts at '%.30s' (forms: NHWC; "
              "nn.conv2d=NHWC:default;nn.max_pool2d=NHWC; or TVM's "
              "{\"nn.conv2d\": [\"NHWC\", \"default\"]})",
              p);
    return false;
}

/* ======================================================================================
 * Attributes
 * ====================================================================================== */

/* The value of attribute `key` of a call of def: given, or the schema's default (NULL when the
 * schema has no such attribute). */
static const AttrValue *attr_of(const OpDef *def, const Attrs *a, const char *key) {
    const AttrValue *v = a ? ir_attrs_get(a, key) : NULL;
    if (v) return v;
    for (uint32_t i = 0; def->attrs && def->attrs[i].name; i++)
        if (strcmp(def->attrs[i].name, key) == 0) return def->defaults[i];
    return NULL;
}

static bool has_attr(const OpDef *def, const char *key) {
    for (uint32_t i = 0; def->attrs && def->attrs[i].name; i++)
        if (strcmp(def->attrs[i].name, key) == 0) return true;
    return false;
}

static const char *attr_s(const OpDef *def, const Attrs *a, const char *key) {
    const AttrValue *v = attr_of(def, a, key);
    return v && v->kind == ATTR_STR ? v->s : NULL;
}

static bool attr_i(const OpDef *def, const Attrs *a, const char *key, int64_t *out) {
    const AttrValue *v = attr_of(def, a, key);
    if (v == NULL) return false;
    if (v->kind == ATTR_INT)
        *out = v->i;
    else if (v->kind == ATTR_BOOL)
        *out = v->b;
    else
        return false;
    return true;
}

/* Every item of list attribute key is the integer v. */
static bool attr_all(const OpDef *def, const Attrs *a, const char *key, int64_t v) {
    const AttrValue *l = attr_of(def, a, key);
    if (l == NULL || l->kind != ATTR_LIST) return false;
    for (uint32_t i = 0; i < l->list.n; i++)
        if (l->list.items[i]->kind != ATTR_INT || l->list.items[i]->i != v) return false;
    return true;
}

/* a with keys[i] set to vals[i] (replaced in place, or appended in order). */
static const Attrs *attrs_set(CL *cl, const Attrs *a, uint32_t n, const char *const *keys,
                              AttrValue *const *vals) {
    uint32_t na = a ? a->n : 0, m = na;
    const char **ks = arena_array(&cl->ctx->arena, na + n + 1, sizeof *ks);
    AttrValue **vs = arena_array(&cl->ctx->arena, na + n + 1, sizeof *vs);
    for (uint32_t i = 0; i < na; i++) {
        ks[i] = a->entries[i].key;
        vs[i] = a->entries[i].value;
    }
    for (uint32_t j = 0; j < n; j++) {
        const char *k = intern_s(cl, keys[j]);
        uint32_t i = 0;
        while (i < m && ks[i] != k)
            i++;
        if (i == m) ks[m++] = k;
        vs[i] = vals[j];
    }
    return ir_attrs_new(cl->ctx, m, ks, vs);
}

static AttrValue *a_str(CL *cl, const char *s) {
    return ir_attr_str(cl->ctx, s, strlen(s), SPAN_NONE);
}
static AttrValue *a_int(CL *cl, int64_t v) {
    return ir_attr_int(cl->ctx, v, RLY_DTYPE_I32, SPAN_NONE);
}
static AttrValue *a_ints(CL *cl, uint32_t n, const int64_t *v) {
    AttrValue **items = arena_array(&cl->ctx->arena, n ? n : 1, sizeof *items);
    for (uint32_t i = 0; i < n; i++)
        items[i] = a_int(cl, v[i]);
    return ir_attr_list(cl->ctx, n, items, SPAN_NONE);
}

/* ======================================================================================
 * The analysis: states and decisions
 * ====================================================================================== */

static Decision *new_decision(CL *cl, const char *op, uint32_t n_args, const Attrs *attrs) {
    Decision *d = arena_alloc(&cl->ctx->arena, sizeof *d);
    d->op = op;
    d->attrs = attrs;
    d->want = arena_array(&cl->ctx->arena, n_args ? n_args : 1, sizeof *d->want);
    for (uint32_t i = 0; i < n_args; i++)
        d->want[i] = NONE;
    return d;
}

static TensorType *tensor_of(Expr *e) {
    Type *t = e->checked_type;
    return t && t->kind == TYPE_TENSOR ? (TensorType *)t : NULL;
}

/* The type an operator's relation gives for these arguments and attributes; NULL when it
 * refuses. */
static Type *relate(CL *cl, const char *opname, const Attrs *attrs, uint32_t n, Type *const *args) {
    const OpDef *def = op_lookup(opname, strlen(opname));
    if (def == NULL) return NULL;
    const AttrValue **vals = arena_array(&cl->ctx->arena, def->n_attrs + 1, sizeof *vals);
    StrBuf msg = {0};
    Span where;
    int err_arg;
    Type *t = NULL;
    RelResult r = REL_ERROR;
    if (op_bind_attrs(def, attrs, vals, &msg, &where))
        r = op_relate(cl->ctx, def, vals, n, args, &t, &msg, &err_arg);
    sb_free(&msg);
    return r == REL_OK ? t : NULL;
}

/* Take decision d for call c, whose result then has state out, if the operator's relation types
 * the converted call as the converted result. */
static bool take(CL *cl, Call *c, Decision *d, LState *out) {
    Type **args = arena_array(&cl->ctx->arena, c->n_args + 1, sizeof *args);
    for (uint32_t i = 0; i < c->n_args; i++)
        if ((args[i] = state_type(cl, c->args[i]->checked_type, d->want[i])) == NULL) return false;
    Type *want = state_type(cl, c->base.checked_type, out);
    Type *got = d->identity ? args[0] : relate(cl, d->op, d->attrs, c->n_args, args);
    if (want == NULL || got != want) return false;
    ptrmap_put(&cl->decision, c, d);
    ptrmap_put(&cl->state, c, out);
    return true;
}

/* Every split axis of layout text l is one of `allowed` (upper case). */
static bool splits_only(CL *cl, const char *l, const char *allowed) {
    Layout x;
    if (!lay(cl, l, &x)) return false;
    for (uint32_t i = 0; i < x.n; i++)
        if (x.factor[i] && strchr(allowed, upper(x.axis[i])) == NULL) return false;
    return true;
}

/* The position in layout cur of the primal axis at position `axis` of layout orig, when that
 * axis is split in neither; -1 otherwise. */
static int moved_axis(CL *cl, const char *orig, const char *cur, int64_t axis) {
    Layout o, c;
    if (!lay(cl, orig, &o) || !lay(cl, cur, &c)) return -1;
    if (axis < 0) axis += o.n;
    if (axis < 0 || axis >= (int64_t)o.n || o.factor[axis]) return -1;
    char a = o.axis[axis];
    if (lay_block(&o, a) || lay_block(&c, a)) return -1;
    return layout_find(&c, a);
}

/* ---- convolutions ------------------------------------------------------------------------ */

/* nn.conv2d / nn.conv2d_transpose asked for in want->data (kernel want->kernel, NULL for the
 * default). */
static void decide_conv(CL *cl, Call *c, const OpDef *def, bool transposed, const Desired *want) {
    const char *dl = attr_s(def, c->attrs, "data_layout"),
               *kl = attr_s(def, c->attrs, "kernel_layout");
    const char *ol = attr_s(def, c->attrs, "out_layout");
    int64_t groups;
    TensorType *data = tensor_of(c->args[0]), *weight = tensor_of(c->args[1]);
    if (!dl || !kl || !ol || !attr_i(def, c->attrs, "groups", &groups) || !data || !weight) return;
    if (ol[0] && strcmp(ol, dl) != 0) return;
    const char *kref = transposed ? "IOHW" : "OIHW", *kd = want->kernel;
    Layout dlay, klay, nchw, ref;
    int64_t dref[4], kdims[4];
    if (!lay(cl, dl, &dlay) || !lay(cl, kl, &klay) || !lay(cl, "NCHW", &nchw) ||
        !lay(cl, kref, &ref) || dlay.n != data->ndim || klay.n != weight->ndim ||
        !lay_shape(&dlay, &nchw, data->shape, false, dref) ||
        !lay_shape(&klay, &ref, weight->shape, false, kdims))
        return;
    if (kd == NULL) { /* TVM's defaults (python/tvm/relay/op/nn/_nn.py, convert_conv2d) */
        bool depthwise = !transposed && dref[1] == groups && kdims[0] == groups;
        int64_t x;
        char buf[64];
        if (strcmp(want->data, "NCHW") == 0) {
            kd = kref;
        } else if (strcmp(want->data, "NHWC") == 0) {
            kd = depthwise ? "HWOI" : "HWIO";
        } else if (strcmp(want->data, "HWNC") == 0) {
            kd = "HWOI";
        } else if (is_nchwxc(want->data, &x)) {
            /* OIHW{x}i{x}o; an input-channel count per group that x does not divide (a
             * depthwise weight has 1) is blocked by 1 */
            int64_t xi = dim_known(kdims[1]) && kdims[1] % x == 0 ? x : 1;
            snprintf(buf, sizeof buf, "OIHW%lldi%lldo", (long long)xi, (long long)x);
            kd = intern_s(cl, buf);
        } else {
            return;
        }
    }
    kd = intern_s(cl, kd);
    if (strcmp(want->data, dl) == 0 && strcmp(kd, kl) == 0) return;
    const char *keys[3] = {"data_layout", "kernel_layout", "out_layout"};
    AttrValue *vals[3] = {a_str(cl, want->data), a_str(cl, kd), a_str(cl, want->data)};
    Decision *d =
        new_decision(cl, def->name, 2, attrs_set(cl, c->attrs, ol[0] ? 3 : 2, keys, vals));
    d->want[0] = layout_state(cl, dl, want->data);
    d->want[1] = layout_state(cl, kl, kd);
    if (take(cl, c, d, layout_state(cl, dl, want->data))) return;
    int64_t x;
    if (transposed || want->kernel != NULL || groups != 1 || strcmp(dl, "NCHW") != 0 ||
        strcmp(kl, "OIHW") != 0 || !is_nchwxc(want->data, &x))
        return;
    /* Output channels that x does not divide (MobileNetV2's 24-channel projections) of input
     * that arrives in NCHW{x}c: a 1x1, stride-1, unpadded convolution reads it as it is and
     * writes its result in NCHW (out_layout), the weight staying OIHW; the fast kernel (conv.c)
     * packs the product's B from the blocks, and the layout_transform back to NCHW before it is
     * gone. */
    LState *in = state_of(cl, c->args[0]);
    if (in->kind == LS_LAYOUT && in->cur == intern_s(cl, want->data) &&
        in->orig == intern_s(cl, dl) && kdims[2] == 1 && kdims[3] == 1 &&
        attr_all(def, c->attrs, "strides", 1) && attr_all(def, c->attrs, "padding", 0)) {
        AttrValue *bv[3] = {a_str(cl, want->data), a_str(cl, kl), a_str(cl, dl)};
        d = new_decision(cl, def->name, 2, attrs_set(cl, c->attrs, 3, keys, bv));
        d->want[0] = in;
        d->want[1] = NONE;
        if (take(cl, c, d, NONE)) return;
    }
    /* Input channels that x does not divide (a first layer's 3): the data stays NCHW and the
     * result comes out in NCHW{x}c (out_layout), the weight in OIHW1i{x}o, as onnxruntime's
     * NCHW-to-NCHWc convolution does; one group only. */
    char buf[64];
    snprintf(buf, sizeof buf, "OIHW1i%lldo", (long long)x);
    AttrValue *pv[3] = {a_str(cl, dl), a_str(cl, intern_s(cl, buf)), a_str(cl, want->data)};
    d = new_decision(cl, def->name, 2, attrs_set(cl, c->attrs, 3, keys, pv));
    d->want[0] = NONE;
    d->want[1] = layout_state(cl, kl, buf);
    take(cl, c, d, layout_state(cl, dl, want->data));
}

/* ---- operators with a `layout` attribute (pools, resizes) ---------------------------------- */

/* The call in layout target (asked for when `asked`, else followed from its input). */
static void decide_layout_attr(CL *cl, Call *c, const OpDef *def, const char *target, bool asked) {
    const char *l = attr_s(def, c->attrs, "layout");
    const char *ol = has_attr(def, "out_layout") ? attr_s(def, c->attrs, "out_layout") : "";
    if (!l || !ol || (ol[0] && (!asked || strcmp(ol, l) != 0)) || strcmp(l, target) == 0) return;
    if (!splits_only(cl, target, "NC")) return; /* H and W are what these operators work on */
    const char *keys[2] = {"layout", "out_layout"};
    AttrValue *vals[2] = {a_str(cl, target), a_str(cl, target)};
    /* asked: TVM's convert_*pool2d also sets out_layout; following keeps it "" */
    uint32_t n = asked && has_attr(def, "out_layout") ? 2 : 1;
    Decision *d = new_decision(cl, def->name, c->n_args, attrs_set(cl, c->attrs, n, keys, vals));
    d->want[0] = layout_state(cl, l, target);
    take(cl, c, d, layout_state(cl, l, target));
}

/* ---- operators that follow their inputs ------------------------------------------------------ */

/* All dims 1 (a scalar included): broadcasts the same in any layout. */
static bool all_ones(const TensorType *t) {
    for (uint32_t i = 0; i < t->ndim; i++)
        if (t->shape[i] != 1) return false;
    return true;
}

/* Elementwise with broadcasting (binary arithmetic, comparisons, where): the first converted
 * argument of the result's rank leads; the others arrive in its layout, a lower-rank operand
 * expanded to that rank first, a constant of extent 1 on a split axis broadcast along it. */
static void decide_broadcast(CL *cl, Call *c, const OpDef *def) {
    TensorType *ot = tensor_of(&c->base);
    if (ot == NULL) return;
    LState *lead = NULL;
    for (uint32_t i = 0; i < c->n_args && !lead; i++) {
        LState *s = state_of(cl, c->args[i]);
        TensorType *t = tensor_of(c->args[i]);
        if (s->kind == LS_LAYOUT && t && t->ndim == ot->ndim) lead = s;
    }
    if (lead == NULL) return;
    Decision *d = new_decision(cl, def->name, c->n_args, c->attrs);
    for (uint32_t i = 0; i < c->n_args; i++) {
        TensorType *t = tensor_of(c->args[i]);
        LState *s = state_of(cl, c->args[i]);
        if (t == NULL || t->ndim > ot->ndim) return;
        if (s->kind == LS_LAYOUT) {
            d->want[i] = lead;
            continue;
        }
        if (all_ones(t)) continue;
        LState *w = arena_alloc(&cl->ctx->arena, sizeof *w);
        *w = *lead;
        w->bcast = c->args[i]->kind == EXPR_CONSTANT;
        if (t->ndim < ot->ndim) {
            int64_t *shape = arena_array(&cl->ctx->arena, ot->ndim, sizeof *shape);
            uint32_t k = ot->ndim - t->ndim;
            for (uint32_t j = 0; j < ot->ndim; j++)
                shape[j] = j < k ? 1 : t->shape[j - k];
            w->pre_n = ot->ndim;
            w->pre_shape = shape;
        }
        d->want[i] = w;
    }
    take(cl, c, d, lead);
}

/* concatenate((fields), axis): every field arrives in the first converted field's layout. */
static void decide_concat(CL *cl, Call *c, const OpDef *def) {
    Type *tt = c->args[0]->checked_type;
    LState *ts = state_of(cl, c->args[0]);
    TensorType *ot = tensor_of(&c->base);
    int64_t axis;
    if (ts->kind != LS_TUPLE || !tt || tt->kind != TYPE_TUPLE || !ot ||
        !attr_i(def, c->attrs, "axis", &axis))
        return;
    LState *lead = NULL;
    for (uint32_t i = 0; i < ts->n && !lead; i++)
        if (ts->fields[i]->kind == LS_LAYOUT) lead = ts->fields[i];
    if (lead == NULL) return;
    /* the axis may be split in the new layout: blocks of whole fields concatenate */
    Layout o, l;
    if (!lay(cl, lead->orig, &o) || !lay(cl, lead->cur, &l)) return;
    if (axis < 0) axis += o.n;
    if (axis < 0 || axis >= (int64_t)o.n || o.factor[axis] || lay_block(&o, o.axis[axis])) return;
    LState *w = arena_alloc(&cl->ctx->arena, sizeof *w);
    w->kind = LS_TUPLE;
    w->n = ts->n;
    w->fields = arena_array(&cl->ctx->arena, ts->n, sizeof *w->fields);
    for (uint32_t i = 0; i < ts->n; i++)
        w->fields[i] = lead;
    AttrValue *v = a_int(cl, layout_find(&l, o.axis[axis]));
    const char *key = "axis";
    Decision *d = new_decision(cl, def->name, 1, attrs_set(cl, c->attrs, 1, &key, &v));
    d->want[0] = w;
    take(cl, c, d, lead);
}

/* The reductions: the reduced axes, found in the new layout; none of them split. */
static void decide_reduce(CL *cl, Call *c, const OpDef *def) {
    LState *s = state_of(cl, c->args[0]);
    int64_t keep = 0, excl = 0;
    const AttrValue *ax = attr_of(def, c->attrs, "axis");
    if (s->kind != LS_LAYOUT || !ax || !attr_i(def, c->attrs, "keepdims", &keep)) return;
    if (has_attr(def, "exclude") && !attr_i(def, c->attrs, "exclude", &excl)) return;
    Layout o, l;
    if (!lay(cl, s->orig, &o) || !lay(cl, s->cur, &l)) return;
    bool red[LAYOUT_MAX] = {false}; /* by position in o */
    if (ax->kind == ATTR_NONE) {
        if (excl) return;
        for (uint32_t i = 0; i < o.n; i++)
            red[i] = true;
    } else {
        uint32_t n = ax->kind == ATTR_LIST ? ax->list.n : 1;
        for (uint32_t i = 0; i < n; i++) {
            const AttrValue *it = ax->kind == ATTR_LIST ? ax->list.items[i] : ax;
            if (it->kind != ATTR_INT) return;
            int64_t a = it->i < 0 ? it->i + o.n : it->i;
            if (a < 0 || a >= (int64_t)o.n) return;
            red[a] = true;
        }
        if (excl)
            for (uint32_t i = 0; i < o.n; i++)
                red[i] = !red[i];
    }
    int64_t axes[LAYOUT_MAX] = {0};
    uint32_t n_axes = 0;
    char keep_o[LAYOUT_MAX * 12], keep_l[LAYOUT_MAX * 12];
    size_t ko = 0, kl = 0;
    bool red_l[LAYOUT_MAX] = {false};
    for (uint32_t i = 0; i < o.n; i++) {
        if (!red[i]) continue;
        char a = o.axis[i];
        if (o.factor[i] || lay_block(&o, a) || lay_block(&l, a)) return;
        red_l[layout_find(&l, a)] = true;
    }
    for (uint32_t i = 0; i < l.n; i++)
        if (red_l[i]) axes[n_axes++] = i;
    /* the layouts of the result without keepdims: the kept axes, in order */
    for (uint32_t i = 0; i < o.n; i++)
        if (!red[i]) {
            if (o.factor[i])
                ko += (size_t)snprintf(keep_o + ko, 12, "%lld", (long long)o.factor[i]);
            keep_o[ko++] = o.axis[i];
        }
    for (uint32_t i = 0; i < l.n; i++)
        if (!red_l[i]) {
            if (l.factor[i])
                kl += (size_t)snprintf(keep_l + kl, 12, "%lld", (long long)l.factor[i]);
            keep_l[kl++] = l.axis[i];
        }
    keep_o[ko] = keep_l[kl] = '\0';
    const char *keys[2] = {"axis", "exclude"};
    AttrValue *vals[2] = {a_ints(cl, n_axes, axes), ir_attr_bool(cl->ctx, false, SPAN_NONE)};
    Decision *d = new_decision(cl, def->name, 1, attrs_set(cl, c->attrs, excl ? 2 : 1, keys, vals));
    d->want[0] = s;
    LState *out = keep ? s : ko == 0 ? NONE : layout_state(cl, keep_o, keep_l);
    take(cl, c, d, out);
}

/* batch_norm, prelu, bias_add: an `axis` attribute naming the channel axis. bias_add over a
 * channel axis that the new layout splits becomes an add of the bias in that layout (TVM gets
 * there through CanonicalizeOps, which ConvertLayout requires). */
static void decide_axis_op(CL *cl, Call *c, const OpDef *def, bool tuple_out) {
    LState *s = state_of(cl, c->args[0]);
    int64_t axis;
    if (s->kind != LS_LAYOUT || !attr_i(def, c->attrs, "axis", &axis)) return;
    int na = moved_axis(cl, s->orig, s->cur, axis);
    const char *key = "axis";
    if (na >= 0) {
        AttrValue *v = a_int(cl, na);
        Decision *d = new_decision(cl, def->name, c->n_args, attrs_set(cl, c->attrs, 1, &key, &v));
        d->want[0] = s;
        LState *out = s;
        if (tuple_out) { /* (out, moving mean, moving var) */
            out = arena_alloc(&cl->ctx->arena, sizeof *out);
            out->kind = LS_TUPLE;
            out->n = 3;
            out->fields = arena_array(&cl->ctx->arena, 3, sizeof *out->fields);
            out->fields[0] = s;
            out->fields[1] = out->fields[2] = NONE;
        }
        take(cl, c, d, out);
        return;
    }
    TensorType *x = tensor_of(c->args[0]), *b = tensor_of(c->args[1]);
    Layout o;
    if (strcmp(def->name, "nn.bias_add") != 0 || !x || !b || b->ndim != 1 ||
        !lay(cl, s->orig, &o) || o.n != x->ndim)
        return;
    if (axis < 0) axis += o.n;
    if (axis < 0 || axis >= (int64_t)o.n) return;
    int64_t *shape = arena_array(&cl->ctx->arena, o.n, sizeof *shape);
    for (uint32_t i = 0; i < o.n; i++)
        shape[i] = i == axis ? b->shape[0] : 1;
    LState *w = arena_alloc(&cl->ctx->arena, sizeof *w);
    *w = *s;
    w->pre_n = o.n;
    w->pre_shape = shape;
    Decision *d = new_decision(cl, intern_s(cl, "add"), 2, NULL);
    d->want[0] = s;
    d->want[1] = w;
    take(cl, c, d, s);
}

/* nn.pad: pad_width reordered into the new layout; split axes must not be padded. */
static void decide_pad(CL *cl, Call *c, const OpDef *def) {
    LState *s = state_of(cl, c->args[0]);
    const AttrValue *pw = attr_of(def, c->attrs, "pad_width");
    Layout o, l;
    if (s->kind != LS_LAYOUT || !pw || pw->kind != ATTR_LIST || !lay(cl, s->orig, &o) ||
        !lay(cl, s->cur, &l) || pw->list.n != o.n)
        return;
    AttrValue *zero = NULL, **pairs = arena_array(&cl->ctx->arena, l.n, sizeof *pairs);
    for (uint32_t i = 0; i < o.n; i++) {
        const AttrValue *p = pw->list.items[i];
        if (p->kind != ATTR_LIST || p->list.n != 2) return;
        for (uint32_t j = 0; j < 2; j++)
            if (p->list.items[j]->kind != ATTR_INT) return;
        bool padded = p->list.items[0]->i != 0 || p->list.items[1]->i != 0;
        char a = o.factor[i] ? upper(o.axis[i]) : o.axis[i];
        if (padded && (o.factor[i] || lay_block(&o, a) || lay_block(&l, a))) return;
        if (!padded) zero = (AttrValue *)p;
        if (!o.factor[i]) pairs[layout_find(&l, a)] = (AttrValue *)p;
    }
    for (uint32_t i = 0; i < l.n; i++)
        if (pairs[i] == NULL) {
            if (zero == NULL) {
                int64_t z[2] = {0, 0};
                zero = a_ints(cl, 2, z);
            }
            pairs[i] = zero;
        }
    AttrValue *v = ir_attr_list(cl->ctx, l.n, pairs, SPAN_NONE);
    const char *key = "pad_width";
    Decision *d = new_decision(cl, def->name, c->n_args, attrs_set(cl, c->attrs, 1, &key, &v));
    d->want[0] = s;
    take(cl, c, d, s);
}

/* layout_transform of a converted value from its original layout: one transform from the
 * current layout, or none. */
static void decide_layout_transform(CL *cl, Call *c, const OpDef *def) {
    LState *s = state_of(cl, c->args[0]);
    const char *src = attr_s(def, c->attrs, "src_layout"),
               *dst = attr_s(def, c->attrs, "dst_layout");
    if (s->kind != LS_LAYOUT || !src || !dst || strcmp(src, s->orig) != 0) return;
    const char *key = "src_layout";
    AttrValue *v = a_str(cl, s->cur);
    Decision *d = new_decision(cl, def->name, 1, attrs_set(cl, c->attrs, 1, &key, &v));
    d->want[0] = s;
    d->identity = strcmp(dst, s->cur) == 0;
    take(cl, c, d, NONE);
}

static bool any_converted(CL *cl, Call *c) {
    for (uint32_t i = 0; i < c->n_args; i++)
        if (state_of(cl, c->args[i])->kind != LS_NONE) return true;
    return false;
}

static bool is_reduce(const char *n) {
    static const char *const names[] = {"sum", "mean", "max",    "min",   "prod",
                                        "all", "any",  "argmax", "argmin"};
    for (size_t i = 0; i < RLY_ARRAY_LEN(names); i++)
        if (strcmp(n, names[i]) == 0) return true;
    return false;
}

static void decide(CL *cl, Call *c) {
    if (c->op->kind != EXPR_OP || c->base.checked_type == NULL) return;
    const char *name = AS_OP(c->op)->name;
    const OpDef *def = op_lookup(name, strlen(name));
    if (def == NULL || def->user_rel) return;
    for (size_t k = 0; k < N_SENSITIVE; k++) {
        if (cl->names[k] != name) continue;
        if (sensitive[k].kind != K_LAYOUT_ATTR) {
            if (cl->desired[k].data)
                decide_conv(cl, c, def, sensitive[k].kind == K_CONV_T, &cl->desired[k]);
            return;
        }
        if (cl->desired[k].data) {
            decide_layout_attr(cl, c, def, cl->desired[k].data, true);
            return;
        }
        LState *s = state_of(cl, c->args[0]);
        const char *l = attr_s(def, c->attrs, "layout");
        if (s->kind == LS_LAYOUT && l && strcmp(s->orig, l) == 0)
            decide_layout_attr(cl, c, def, s->cur, false);
        return;
    }
    if (!any_converted(cl, c)) return;
    if (def->pattern == OP_ELEMWISE && c->n_args == 1) {
        /* elementwise: the same shape out as in (which excludes dyn.zeros and its kin) */
        LState *s = state_of(cl, c->args[0]);
        if (s->kind == LS_LAYOUT && c->args[0]->checked_type && tensor_of(&c->base) &&
            tensor_of(c->args[0]) && tensor_of(&c->base)->ndim == tensor_of(c->args[0])->ndim &&
            memcmp(tensor_of(&c->base)->shape, tensor_of(c->args[0])->shape,
                   tensor_of(c->args[0])->ndim * sizeof(int64_t)) == 0) {
            Decision *d = new_decision(cl, def->name, 1, c->attrs);
            d->want[0] = s;
            take(cl, c, d, s);
        }
    } else if (def->pattern == OP_BROADCAST && def->attrs == NULL) {
        decide_broadcast(cl, c, def);
    } else if (strcmp(name, "concatenate") == 0) {
        decide_concat(cl, c, def);
    } else if (is_reduce(name)) {
        decide_reduce(cl, c, def);
    } else if (strcmp(name, "nn.batch_norm") == 0) {
        decide_axis_op(cl, c, def, true);
    } else if (strcmp(name, "nn.bias_add") == 0 || strcmp(name, "nn.prelu") == 0) {
        decide_axis_op(cl, c, def, false);
    } else if (strcmp(name, "nn.pad") == 0) {
        decide_pad(cl, c, def);
    } else if (strcmp(name, "layout_transform") == 0) {
        decide_layout_transform(cl, c, def);
    }
}

/* A let's variable takes its value's state; the value may be analysed only later (its binding
 * is recorded for then). */
static VisitResult an_pre(Visitor *v, Expr *e) {
    CL *cl = v->state;
    if (e->kind == EXPR_LET) {
        Let *l = (Let *)e;
        if (ptrmap_has(&cl->state, l->value) || l->value->kind == EXPR_VAR) {
            LState *s = state_of(cl, l->value);
            if (s->kind != LS_NONE) ptrmap_put(&cl->state, l->var, s);
        } else if (!ptrmap_has(&cl->binds, l->value)) {
            ptrmap_put(&cl->binds, l->value, l->var);
        }
    }
    return VISIT_CONTINUE;
}

static void an_post(Visitor *v, Expr *e) {
    CL *cl = v->state;
    switch ((ExprKind)e->kind) {
    case EXPR_VAR: return; /* set where it is bound */
    case EXPR_TUPLE: {
        Tuple *t = (Tuple *)e;
        LState *s = NULL;
        for (uint32_t i = 0; i < t->n; i++) {
            LState *f = state_of(cl, t->fields[i]);
            if (f->kind == LS_NONE) continue;
            if (s == NULL) {
                s = arena_alloc(&cl->ctx->arena, sizeof *s);
                s->kind = LS_TUPLE;
                s->n = t->n;
                s->fields = arena_array(&cl->ctx->arena, t->n, sizeof *s->fields);
                for (uint32_t j = 0; j < t->n; j++)
                    s->fields[j] = NONE;
            }
            s->fields[i] = f;
            if (f->kind == LS_TUPLE && f->depth + 1 > s->depth) s->depth = f->depth + 1;
        }
        if (s && s->depth > TUPLE_DEPTH) s = NULL; /* the fields go back (child_want) */
        ptrmap_put(&cl->state, e, s ? s : NONE);
        break;
    }
    case EXPR_TUPLE_GET_ITEM: {
        TupleGetItem *g = (TupleGetItem *)e;
        LState *t = state_of(cl, g->tuple);
        ptrmap_put(&cl->state, e,
                   t->kind == LS_TUPLE && g->index < t->n ? t->fields[g->index] : NONE);
        break;
    }
    case EXPR_CALL:
        decide(cl, (Call *)e);
        if (!ptrmap_has(&cl->state, e)) ptrmap_put(&cl->state, e, NONE);
        break;
    default: ptrmap_put(&cl->state, e, NONE); break;
    }
    Var *bound = ptrmap_get(&cl->binds, e);
    LState *s = state_of(cl, e);
    if (bound && s->kind != LS_NONE) ptrmap_put(&cl->state, bound, s);
}

/* ======================================================================================
 * The rewrite
 * ====================================================================================== */

/* Constant c (layout src) in layout dst, computed here (lay_shape's rules). NULL when
 * lay_shape fails. The source offset of an element is a sum over the primal axes of a term that
 * depends on that axis's coordinate only, so each term is tabulated once per coordinate and an
 * element costs a few additions (weights have millions of elements). */
static Expr *relayout_const(CL *cl, Constant *c, const char *src_s, const char *dst_s, bool bcast) {
    Layout src, dst;
    int64_t shape[LAYOUT_MAX];
    if (!lay(cl, src_s, &src) || !lay(cl, dst_s, &dst) || c->ndim != src.n ||
        !lay_shape(&src, &dst, c->shape, bcast, shape))
        return NULL;
    size_t es = sup_dtype_size(c->dtype);
    int64_t total = 1, st[LAYOUT_MAX], stride = 1, full[26] = {0};
    for (uint32_t i = 0; i < dst.n; i++)
        total *= shape[i];
    for (int i = (int)src.n - 1; i >= 0; i--) {
        st[i] = stride;
        stride *= c->shape[i];
    }
    /* the extent of each primal axis in dst, and where dst's axes put their index */
    int prim[LAYOUT_MAX];
    int64_t mult[LAYOUT_MAX];
    for (uint32_t d = 0; d < dst.n; d++) {
        char a = dst.factor[d] ? upper(dst.axis[d]) : dst.axis[d];
        int64_t b = dst.factor[d] ? 0 : lay_block(&dst, a);
        prim[d] = a - 'A';
        mult[d] = b ? shape[layout_find(&dst, lower(a))] : 1; /* 1 when broadcast (extent 1) */
        int64_t reach = shape[d] * mult[d];
        if (reach > full[prim[d]]) full[prim[d]] = reach;
    }
    int64_t *tab[26] = {NULL};
    for (uint32_t d = 0; d < dst.n; d++) {
        int p = prim[d];
        if (tab[p]) continue;
        tab[p] = sup_calloc((size_t)(full[p] ? full[p] : 1), sizeof(int64_t));
        for (uint32_t s = 0; s < src.n; s++) {
            char a = src.axis[s];
            if ((src.factor[s] ? upper(a) : a) - 'A' != p) continue;
            int64_t b = src.factor[s] ? 0 : lay_block(&src, a);
            for (int64_t x = 0; x < full[p]; x++)
                tab[p][x] += (src.factor[s] ? x % src.factor[s] : b ? x / b : x) * st[s];
        }
    }
    char *out = sup_malloc(total ? sup_mul((size_t)total, es) : 1);
    int64_t idx[LAYOUT_MAX] = {0}, coord[26];
    uint32_t last = dst.n - 1;
    for (int64_t k = 0; k < total; k += shape[last]) { /* one row of the last dst axis */
        memset(coord, 0, sizeof coord);
        for (uint32_t d = 0; d < last; d++)
            coord[prim[d]] += idx[d] * mult[d];
        int p = prim[last];
        int64_t base = 0, at = coord[p];
        coord[p] = 0;
        for (int q = 0; q < 26; q++)
            if (tab[q]) base += tab[q][coord[q]];
        base -= tab[p][0];
        const char *from = (const char *)c->data;
        char *to = out + k * (int64_t)es;
        for (int64_t j = 0; j < shape[last]; j++, to += es)
            memcpy(to, from + (base + tab[p][at + j * mult[last]]) * (int64_t)es, es);
        for (int d = (int)last - 1; d >= 0; d--) { /* next row, row-major */
            if (++idx[d] < shape[d]) break;
            idx[d] = 0;
        }
    }
    for (int q = 0; q < 26; q++)
        free(tab[q]);
    Expr *r = ir_constant_new(cl->ctx, c->dtype, dst.n, shape, out, c->base.span);
    free(out);
    pass_retype(cl->ctx, r, NULL);
    return r;
}

/* x (original layout src) in layout dst: a layout_transform, or for a constant a new constant;
 * built once per value. */
static Expr *xform(CL *cl, Expr *x, const char *src, const char *dst, bool bcast) {
    if (strcmp(src, dst) == 0) return x;
    XForm *head = ptrmap_get(&cl->xforms, x);
    for (XForm *f = head; f; f = f->next)
        if (f->src == src && f->dst == dst && f->bcast == bcast) return f->out;
    Expr *r;
    if (x->kind == EXPR_CONSTANT) {
        r = relayout_const(cl, (Constant *)x, src, dst, bcast);
    } else {
        const char *keys[2] = {"src_layout", "dst_layout"};
        AttrValue *vals[2] = {a_str(cl, src), a_str(cl, dst)};
        r = pass_op_call(cl->ctx, "layout_transform", 1, &x, attrs_set(cl, NULL, 2, keys, vals),
                         x->span);
    }
    RLY_CHECK(r != NULL, "ConvertLayout: cannot transform %s to %s", src, dst);
    XForm *f = arena_alloc(&cl->ctx->arena, sizeof *f);
    *f = (XForm){src, dst, bcast, r, head};
    ptrmap_put(&cl->xforms, x, f);
    return r;
}

/* x reshaped to (n, shape): expand_dims when that adds leading ones, else reshape; a constant
 * gets its new shape directly. */
static Expr *reshape_to(CL *cl, Expr *x, uint32_t n, const int64_t *shape) {
    if (x->kind == EXPR_CONSTANT) {
        Constant *c = (Constant *)x;
        Expr *r = ir_constant_new(cl->ctx, c->dtype, n, shape, c->data, x->span);
        pass_retype(cl->ctx, r, NULL);
        return r;
    }
    TensorType *t = tensor_of(x);
    uint32_t k = n - t->ndim;
    bool leading = t->ndim < n && memcmp(t->shape, shape + k, t->ndim * sizeof *shape) == 0;
    for (uint32_t i = 0; leading && i < k; i++)
        leading = shape[i] == 1;
    Expr *r;
    if (leading) {
        const char *keys[2] = {"axis", "num_newaxis"};
        AttrValue *vals[2] = {a_int(cl, 0), a_int(cl, k)};
        r = pass_op_call(cl->ctx, "expand_dims", 1, &x, attrs_set(cl, NULL, 2, keys, vals),
                         x->span);
    } else {
        const char *key = "newshape";
        AttrValue *v = a_ints(cl, n, shape);
        r = pass_op_call(cl->ctx, "reshape", 1, &x, attrs_set(cl, NULL, 1, &key, &v), x->span);
    }
    RLY_CHECK(r != NULL, "ConvertLayout: cannot reshape");
    return r;
}

static Expr *adapt(CL *cl, Expr *x, LState *have, LState *want, Type *orig_ty);

/* A tuple value x (state have) with its fields in the states of want. */
static Expr *adapt_tuple(CL *cl, Expr *x, LState *have, LState *want, Type *orig_ty) {
    TupleType *tt = (TupleType *)orig_ty;
    Expr **fs = arena_array(&cl->ctx->arena, tt->n ? tt->n : 1, sizeof *fs);
    bool changed = false;
    for (uint32_t i = 0; i < tt->n; i++) {
        LState *fh = have->kind == LS_TUPLE ? have->fields[i] : NONE;
        LState *fw = want->kind == LS_TUPLE ? want->fields[i] : NONE;
        Expr *f;
        if (x->kind == EXPR_TUPLE) {
            f = ((Tuple *)x)->fields[i];
        } else {
            f = ir_tuple_get_item_new(cl->ctx, x, i, x->span);
            pass_retype(cl->ctx, f, NULL);
        }
        fs[i] = adapt(cl, f, fh, fw, tt->fields[i]);
        changed |= fs[i] != f || fh != fw;
    }
    if (!changed) return x;
    Expr *r = ir_tuple_new(cl->ctx, tt->n, fs, x->span);
    pass_retype(cl->ctx, r, NULL);
    return r;
}

/* x, whose value is in state have, in state want (orig_ty: the original type). */
static Expr *adapt(CL *cl, Expr *x, LState *have, LState *want, Type *orig_ty) {
    if (want == PASS || (have->kind == LS_NONE && want->kind == LS_NONE)) return x;
    if (have->kind == LS_TUPLE || want->kind == LS_TUPLE)
        return adapt_tuple(cl, x, have, want, orig_ty);
    if (want->kind == LS_NONE) return xform(cl, x, have->cur, have->orig, false);
    if (have->kind == LS_LAYOUT) {
        if (have->orig == want->orig) return xform(cl, x, have->cur, want->cur, want->bcast);
        x = xform(cl, x, have->cur, have->orig, false);
    }
    if (want->pre_n) x = reshape_to(cl, x, want->pre_n, want->pre_shape);
    return xform(cl, x, want->orig, want->cur, want->bcast);
}

/* What child i of orig must be given as. */
static LState *child_want(CL *cl, Expr *orig, const Decision *d, uint32_t i) {
    switch ((ExprKind)orig->kind) {
    case EXPR_TUPLE: return state_of(cl, orig)->kind == LS_TUPLE ? PASS : NONE;
    case EXPR_TUPLE_GET_ITEM: return PASS;
    case EXPR_LET: return i == 0 ? PASS : i == 1 ? state_of(cl, &((Let *)orig)->var->base) : NONE;
    case EXPR_FUNCTION: return i < ((Function *)orig)->n_params ? PASS : NONE;
    case EXPR_CALL: return i == 0 ? PASS : d ? d->want[i - 1] : NONE;
    default: return NONE;
    }
}

static Expr *cl_post(Rewriter *rw, Expr *orig, Expr *e) {
    CL *cl = rw->state;
    Ctx *ctx = rw->ctx;
    if (orig->kind == EXPR_VAR) {
        LState *s = state_of(cl, orig);
        if (s->kind == LS_NONE) return e;
        Var *v = (Var *)orig;
        Type *t = state_type(cl, orig->checked_type, s);
        RLY_CHECK(t != NULL, "ConvertLayout: no type for %%%s", v->name);
        Var *nv = ir_var_new(ctx, v->name, v->ann ? t : NULL, orig->span);
        nv->base.checked_type = t;
        return &nv->base;
    }
    Decision *d = orig->kind == EXPR_CALL ? ptrmap_get(&cl->decision, orig) : NULL;
    uint32_t n = ir_expr_n_children(orig);
    Expr *small[8], **kids = n <= 8 ? small : sup_malloc(sup_mul(n, sizeof(Expr *)));
    bool changed = false;
    for (uint32_t i = 0; i < n; i++) {
        Expr *oc = ir_expr_child(orig, i), *nc = ir_expr_child(e, i);
        kids[i] = adapt(cl, nc, state_of(cl, oc), child_want(cl, orig, d, i), oc->checked_type);
        changed |= kids[i] != nc;
    }
    Expr *r;
    if (d && d->identity) {
        r = kids[1];
    } else if (d) {
        r = pass_op_call(ctx, d->op, n - 1, kids + 1, d->attrs, orig->span);
        RLY_CHECK(r != NULL, "ConvertLayout: %s refuses its converted arguments", d->op);
    } else if (changed) {
        r = ir_expr_with_children(ctx, orig, kids);
        pass_retype(ctx, r, orig->checked_type);
    } else {
        r = pass_rebuild(rw, orig, e);
    }
    if (kids != small) free(kids);
    return r;
}

/* ---- desired_layouts=auto ---------------------------------------------------------------- */

/* What the auto mode looks for: float32 depthwise nn.conv2d calls in NCHW (groups = input
 * channels > 1), and grouped ones whose channels per group are not whole blocks of 16 (the
 * blocked kernels do not take them: the reference kernel would run them). */
typedef struct AutoScan {
    bool depthwise, odd_groups;
} AutoScan;

static void auto_scan(Visitor *v, Expr *e) {
    AutoScan *a = v->state;
    if (e->kind != EXPR_CALL) return;
    Call *c = (Call *)e;
    if (c->op->kind != EXPR_OP || strcmp(AS_OP(c->op)->name, "nn.conv2d") != 0 || c->n_args < 2)
        return;
    const OpDef *def = op_lookup("nn.conv2d", 9);
    const char *dl = attr_s(def, c->attrs, "data_layout");
    TensorType *data = tensor_of(c->args[0]), *out = tensor_of(&c->base);
    int64_t groups;
    if (!dl || strcmp(dl, "NCHW") != 0 || !data || data->ndim != 4 || !out || out->ndim != 4 ||
        data->dtype != RLY_DTYPE_F32 || !attr_i(def, c->attrs, "groups", &groups) || groups <= 1)
        return;
    int64_t cin = data->shape[1], cout = out->shape[1];
    if (cin == groups && cout == groups)
        a->depthwise = true;
    else if (cin < 0 || cout < 0 || cin % (16 * groups) != 0 || cout % (16 * groups) != 0)
        a->odd_groups = true;
}

/* desired_layouts=auto (the -O3 pipeline's): the convolutions of a function go to NCHW16c when
 * this machine has AVX-512 and the function has depthwise convolutions (a MobileNet's separable
 * blocks, where the blocked kernels beat the NCHW ones) and no grouped convolution the blocked
 * kernels do not take; otherwise nothing changes (dense 3x3 networks run faster in NCHW, by
 * Winograd and the direct kernels). docs/passes.md has the measurements. */
static const char *auto_layouts(Expr *e) {
    if (sup_isa() != SUP_ISA_AVX512) return NULL;
    AutoScan a = {false, false};
    Visitor v = {NULL, auto_scan, &a};
    ir_visit(&v, e);
    return a.depthwise && !a.odd_groups ? "nn.conv2d=NCHW16c" : NULL;
}

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    CL cl;
    memset(&cl, 0, sizeof cl);
    cl.ctx = pc->ctx;
    for (size_t k = 0; k < N_SENSITIVE; k++)
        cl.names[k] = intern_s(&cl, sensitive[k].name);
    StrBuf err = {0};
    const char *desired = pass_arg_str(pc, "desired_layouts");
    if (strcmp(desired, "auto") == 0 && (desired = auto_layouts(e)) == NULL) return e;
    if (!parse_desired(&cl, desired, &err)) {
        diag_error(&pc->ctx->diags, SPAN_NONE, "ConvertLayout: %s", sb_cstr(&err));
        sb_free(&err);
        return NULL;
    }
    sb_free(&err);
    Visitor v = {an_pre, an_post, &cl};
    ir_visit(&v, e);
    Expr *r = e;
    if (cl.decision.len > 0) {
        Rewriter rw = {.ctx = cl.ctx, .post = cl_post, .state = &cl};
        r = ir_rewrite(&rw, e);
        r = adapt(&cl, r, state_of(&cl, e), NONE, e->checked_type);
        ir_rewriter_free(&rw);
    }
    ptrmap_free(&cl.state);
    ptrmap_free(&cl.decision);
    ptrmap_free(&cl.binds);
    ptrmap_free(&cl.xforms);
    ptrmap_free(&cl.layouts);
    return r;
}

const PassDef pass_convert_layout = {
    .name = "ConvertLayout",
    .opt_level = 3,
    .kind = PASS_FUNCTION,
    .params = "desired_layouts:str=",
    .run_expr = run,
    .doc = "convert conv/pool operators to the desired layouts, with layout_transform only at "
           "borders",
};
