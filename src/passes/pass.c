/* pass.c - the pass manager: the registry (passes.def), pipelines and their arguments, type
 * inference once per pipeline and the check of every pass's types, printing and timing, and the
 * typed-construction helpers that passes build with (docs/passes.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/passes.h"
#include "types/types.h"

#define PASS(c) extern const PassDef pass_##c;
#include "passes/passes.def"
#undef PASS

static const PassDef *const registry[] = {
#define PASS(c) &pass_##c,
#include "passes/passes.def"
#undef PASS
};

size_t pass_count(void) { return RLY_ARRAY_LEN(registry); }
const PassDef *pass_at(size_t i) { return i < pass_count() ? registry[i] : NULL; }

const PassDef *pass_lookup(const char *name) {
    for (size_t i = 0; i < pass_count(); i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

/* The default pipeline, TVM's build prefix (relay-language.md 4.2) without its target-specific
 * passes but one (ConvertLayout's auto mode, which picks a layout for this machine); each runs
 * when its opt level is at most the pipeline's. Names not (yet) registered are
 * left out. */
static const char *const default_names[] = {
    "SimplifyInference",
    "EliminateCommonSubexpr",
    "FoldConstant",
    "FoldScaleAxis",
    "SimplifyExpr",
    "CanonicalizeOps",
    "ConvertLayout(desired_layouts=auto)", /* a target-specific pass: NCHW16c or nothing */
    "DynamicToStatic",
    "FoldConstant",
    "SimplifyExpr",
    "DeadCodeElimination",
    "FuseRNNCell",
    "FuseOps",
};

const char *pass_default_pipeline(void) {
    static char buf[512];
    if (buf[0] == '\0') {
        size_t n = 0;
        for (size_t i = 0; i < RLY_ARRAY_LEN(default_names); i++) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(default_names[i], "("),
                     default_names[i]);
            if (pass_lookup(name))
                n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? "," : "",
                                      default_names[i]);
        }
    }
    return buf;
}

/* ---- arguments -------------------------------------------------------------------------- */

static const char *arg_text(const PassCtx *pc, const char *key) {
    for (uint32_t i = 0; i < pc->args->n; i++)
        if (strcmp(pc->args->items[i].key, key) == 0) return pc->args->items[i].val;
    rly_panic(__FILE__, __LINE__, "pass %s has no parameter %s", pc->name, key);
}

int64_t pass_arg_int(const PassCtx *pc, const char *key) {
    return strtoll(arg_text(pc, key), NULL, 10);
}

bool pass_arg_bool(const PassCtx *pc, const char *key) {
    const char *v = arg_text(pc, key);
    return strcmp(v, "True") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
}

double pass_arg_float(const PassCtx *pc, const char *key) {
    return strtod(arg_text(pc, key), NULL);
}

const char *pass_arg_str(const PassCtx *pc, const char *key) { return arg_text(pc, key); }

/* Does `v` read as a value of declared type `ty` (int, bool, float, str)? */
static bool value_fits(const char *ty, const char *v) {
    char *end;
    if (strcmp(ty, "int") == 0) {
        (void)strtoll(v, &end, 10);
        return *v != '\0' && *end == '\0';
    }
    if (strcmp(ty, "float") == 0) {
        (void)strtod(v, &end);
        return *v != '\0' && *end == '\0';
    }
    if (strcmp(ty, "bool") == 0)
        return strcmp(v, "True") == 0 || strcmp(v, "False") == 0 || strcmp(v, "true") == 0 ||
               strcmp(v, "false") == 0 || strcmp(v, "1") == 0 || strcmp(v, "0") == 0;
    return true;
}

/* ---- pipelines: "A,B(k=v, k2=[1, 2]),C" -------------------------------------------------- */

typedef struct Step {
    const PassDef *def;
    PassArgs args;
} Step;
typedef Vec(Step) Steps;

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    return p;
}

/* The end of a value: the first ',' or ')' outside brackets, parentheses and quotes. */
static const char *value_end(const char *p) {
    int depth = 0;
    char quote = 0;
    for (; *p; p++) {
        if (quote) {
            if (*p == quote) quote = 0;
        } else if (*p == '"' || *p == '\'') {
            quote = *p;
        } else if (*p == '[' || *p == '(' || *p == '{') {
            depth++;
        } else if (*p == ']' || *p == '}' || (*p == ')' && depth > 0)) {
            depth--;
        } else if ((*p == ',' || *p == ')') && depth == 0) {
            break;
        }
    }
    return p;
}

static const char *arena_strn(Ctx *ctx, const char *s, size_t n) {
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n >= 2 && (s[0] == '"' || s[0] == '\'') && s[n - 1] == s[0]) s++, n -= 2;
    return arena_strndup(&ctx->arena, s, n);
}

static void list_passes(StrBuf *sb) {
    for (size_t i = 0; i < pass_count(); i++)
        sb_printf(sb, "%s%s", i ? ", " : "", registry[i]->name);
}

/* Bind the given key=value pairs of one step against the pass's declared parameters. */
static bool bind_args(Ctx *ctx, const PassDef *def, uint32_t n_given, const PassArg *given,
                      PassArgs *out, StrBuf *err) {
    PtrVec keys = {0}, vals = {0}, types = {0};
    for (const char *p = def->params; *p;) { /* "name:type=default,..." */
        const char *colon = strchr(p, ':'), *eq = strchr(p, '='), *end = value_end(eq + 1);
        RLY_CHECK(colon && eq && colon < eq, "pass %s: bad parameter list \"%s\"", def->name,
                  def->params);
        vec_push(&keys, (void *)arena_strn(ctx, p, (size_t)(colon - p)));
        vec_push(&types, (void *)arena_strn(ctx, colon + 1, (size_t)(eq - colon - 1)));
        vec_push(&vals, (void *)arena_strn(ctx, eq + 1, (size_t)(end - eq - 1)));
        p = *end ? skip_ws(end + 1) : end;
    }
    bool ok = true;
    for (uint32_t i = 0; i < n_given && ok; i++) {
        size_t k = 0;
        while (k < keys.len && strcmp(keys.data[k], given[i].key) != 0)
            k++;
        if (k == keys.len) {
            sb_printf(err, "%s has no parameter '%s' (it takes: ", def->name, given[i].key);
            for (size_t j = 0; j < keys.len; j++)
                sb_printf(err, "%s%s", j ? ", " : "", (const char *)keys.data[j]);
            sb_puts(err, keys.len ? ")" : "none)");
            ok = false;
        } else if (!value_fits(types.data[k], given[i].val)) {
            sb_printf(err, "%s: parameter '%s' takes a %s, not '%s'", def->name, given[i].key,
                      (const char *)types.data[k], given[i].val);
            ok = false;
        } else {
            vals.data[k] = (void *)given[i].val;
        }
    }
    out->n = (uint32_t)keys.len;
    out->items = arena_array(&ctx->arena, keys.len ? keys.len : 1, sizeof *out->items);
    for (size_t k = 0; k < keys.len; k++)
        out->items[k] = (PassArg){keys.data[k], vals.data[k]};
    vec_free(&keys);
    vec_free(&vals);
    vec_free(&types);
    return ok;
}

static bool parse_pipeline(Ctx *ctx, const char *text, Steps *out, StrBuf *err) {
    const char *p = skip_ws(text);
    while (*p) {
        const char *name = p;
        while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
               *p == '_')
            p++;
        if (p == name) {
            sb_printf(err, "expected a pass name at '%.20s'", p);
            return false;
        }
        const char *nm = arena_strn(ctx, name, (size_t)(p - name));
        const PassDef *def = pass_lookup(nm);
        if (def == NULL) {
            sb_printf(err, "unknown pass '%s' (passes: ", nm);
            list_passes(err);
            sb_putc(err, ')');
            return false;
        }
        Vec(PassArg) given = {0};
        p = skip_ws(p);
        if (*p == '(') {
            p = skip_ws(p + 1);
            while (*p != ')') {
                const char *k = p;
                while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                       (*p >= '0' && *p <= '9') || *p == '_')
                    p++;
                const char *ke = p;
                p = skip_ws(p);
                if (ke == k || *p != '=') {
                    sb_printf(err, "%s: expected key=value at '%.20s'", nm, k);
                    vec_free(&given);
                    return false;
                }
                p = skip_ws(p + 1);
                const char *ve = value_end(p);
                if (*ve == '\0') {
                    sb_printf(err, "%s: missing ')'", nm);
                    vec_free(&given);
                    return false;
                }
                PassArg a = {arena_strn(ctx, k, (size_t)(ke - k)),
                             arena_strn(ctx, p, (size_t)(ve - p))};
                vec_push(&given, a);
                p = *ve == ',' ? skip_ws(ve + 1) : ve;
            }
            p = skip_ws(p + 1);
        }
        Step st = {def, {0, NULL}};
        bool ok = bind_args(ctx, def, (uint32_t)given.len, given.data, &st.args, err);
        vec_free(&given);
        if (!ok) return false;
        vec_push(out, st);
        if (*p == ',') {
            p = skip_ws(p + 1);
        } else if (*p != '\0') {
            sb_printf(err, "expected ',' between passes at '%.20s'", p);
            return false;
        }
    }
    return true;
}

/* The next item of a comma-separated list at *p: its text in [*item, *item + return value),
 * blanks trimmed; *p moves past it. Returns -1 at the end of the list. */
static int next_item(const char **p, const char **item) {
    if (**p == '\0') return -1;
    const char *s = skip_ws(*p), *e = s;
    while (*e && *e != ',')
        e++;
    const char *t = e;
    while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
        t--;
    *item = s;
    *p = *e ? e + 1 : e;
    return (int)(t - s);
}

/* Is `name` in the comma-separated list? */
static bool in_list(const char *list, const char *name) {
    if (list == NULL) return false;
    size_t n = strlen(name);
    const char *item;
    int len;
    for (const char *p = list; (len = next_item(&p, &item)) >= 0;)
        if ((size_t)len == n && strncmp(item, name, n) == 0) return true;
    return false;
}

static bool check_list(const char *list, const char *what, StrBuf *err) {
    if (list == NULL) return true;
    const char *item;
    int len;
    for (const char *p = list; (len = next_item(&p, &item)) >= 0;) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", len, item);
        if (len > 0 && pass_lookup(name) == NULL) {
            sb_printf(err, "%s: unknown pass '%s' (passes: ", what, name);
            list_passes(err);
            sb_putc(err, ')');
            return false;
        }
    }
    return true;
}

/* ---- running ------------------------------------------------------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every node reachable from the module's definitions (and expression), in visit order. */
typedef struct Collect {
    PtrVec nodes;
} Collect;

static void collect_post(Visitor *v, Expr *e) {
    Collect *c = v->state;
    vec_push(&c->nodes, e);
}

static void collect(Module *m, PtrVec *out) {
    Collect c = {{0}};
    Visitor v = {NULL, collect_post, &c};
    for (size_t i = 0; i < m->funcs.len; i++)
        if (m->funcs.data[i].func) ir_visit(&v, &m->funcs.data[i].func->base);
    if (m->expr) ir_visit(&v, m->expr);
    *out = c.nodes;
}

/* Nodes whose type inference decides (not Op/Constructor/GlobalVar references). */
static bool typed_kind(const Expr *e) {
    return e->kind != EXPR_OP && e->kind != EXPR_CONSTRUCTOR && e->kind != EXPR_GLOBAL_VAR;
}

/* After pass `name`: infer the module afresh and compare every node's type with what the pass
 * left. A difference is a bug in the pass, reported at the node. */
static bool verify_types(Module *m, const char *name) {
    Ctx *ctx = m->ctx;
    PtrVec nodes = {0};
    collect(m, &nodes);
    Type **before = sup_calloc(nodes.len ? nodes.len : 1, sizeof *before);
    for (size_t i = 0; i < nodes.len; i++)
        before[i] = ((Expr *)nodes.data[i])->checked_type;
    size_t errs = ctx->diags.n_errors;
    bool ok = ty_infer_module(m);
    if (!ok)
        diag_error(&ctx->diags, SPAN_NONE,
                   "internal error: after %s the module no longer type-checks", name);
    for (size_t i = 0; ok && i < nodes.len; i++) {
        Expr *e = nodes.data[i];
        if (!typed_kind(e) || before[i] == e->checked_type) continue;
        StrBuf a = {0}, b = {0};
        if (before[i]) ir_print_type(ctx, before[i], &a);
        if (e->checked_type) ir_print_type(ctx, e->checked_type, &b);
        diag_error(&ctx->diags, e->span,
                   "internal error: after %s this %s has type %s, but inference gives %s", name,
                   ir_expr_kind_names[e->kind], before[i] ? sb_cstr(&a) : "(none)",
                   e->checked_type ? sb_cstr(&b) : "(none)");
        sb_free(&a);
        sb_free(&b);
        ok = false;
    }
    free(before);
    vec_free(&nodes);
    return ok && ctx->diags.n_errors == errs;
}

/* Does every node that inference would type carry a type? */
static bool all_typed(Module *m) {
    PtrVec nodes = {0};
    collect(m, &nodes);
    bool ok = true;
    for (size_t i = 0; i < nodes.len && ok; i++) {
        Expr *e = nodes.data[i];
        ok = !typed_kind(e) || e->checked_type != NULL;
    }
    vec_free(&nodes);
    return ok;
}

bool pass_module_typed(Module *m) {
    PtrVec nodes = {0};
    collect(m, &nodes);
    bool ok = true;
    for (size_t i = 0; i < nodes.len && ok; i++) {
        Expr *e = nodes.data[i];
        ok = !typed_kind(e) || (e->checked_type != NULL &&
                                !(e->checked_type->flags & (TYPE_HAS_INCOMPLETE | TYPE_HAS_ERROR)));
    }
    vec_free(&nodes);
    return ok;
}

static bool run_step(PassCtx *pc, const PassDef *def, Module *m) {
    if (def->kind == PASS_MODULE) return def->run_module(pc, m);
    for (size_t i = 0; i < m->funcs.len; i++) {
        FuncDef *d = &m->funcs.data[i];
        if (d->func == NULL) continue;
        Expr *r = def->run_expr(pc, m, &d->func->base);
        if (r == NULL) return false;
        RLY_CHECK(r->kind == EXPR_FUNCTION, "%s rewrote @%s into a %s", def->name, d->gvar->name,
                  ir_expr_kind_names[r->kind]);
        d->func = (Function *)r;
    }
    if (m->expr) {
        Expr *r = def->run_expr(pc, m, m->expr);
        if (r == NULL) return false;
        m->expr = r;
    }
    return true;
}

static void put_report(const PassOptions *o, const char *text) {
    if (o->report)
        sb_puts(o->report, text);
    else
        fputs(text, stderr);
}

bool pass_run(Module *m, const PassOptions *o) {
    Ctx *ctx = m->ctx;
    StrBuf err = {0};
    Steps steps = {0};
    bool explicit_list = o->passes != NULL;
    bool ok =
        parse_pipeline(ctx, explicit_list ? o->passes : pass_default_pipeline(), &steps, &err) &&
        check_list(o->required, "required", &err) && check_list(o->disabled, "disabled", &err);
    if (ok && o->print_after && strcmp(o->print_after, "all") != 0 &&
        pass_lookup(o->print_after) == NULL) {
        sb_printf(&err, "--print-ir-after: unknown pass '%s' (passes: ", o->print_after);
        list_passes(&err);
        sb_putc(&err, ')');
        ok = false;
    }
    if (!ok) {
        diag_error(&ctx->diags, SPAN_NONE, "pipeline: %s", sb_cstr(&err));
        sb_free(&err);
        vec_free(&steps);
        return false;
    }
    sb_free(&err);
    size_t errs = ctx->diags.n_errors;
    double t0 = now_s();
    /* once per pipeline, and not again for a module already typed (an import checked by
     * inference, a module optimized before): the passes keep the types valid */
    ok = pass_module_typed(m) || ty_infer_module(m);
    double t_infer = now_s() - t0;
    StrBuf rep = {0}, times = {0}; /* the printed modules, then the table of times */
    if (o->time_passes) {
        sb_puts(&times, "pass                          time (ms)\n");
        sb_printf(&times, "%-28s %10.3f\n", "InferType (pipeline start)", t_infer * 1e3);
    }
    double total = t_infer;
    for (size_t i = 0; ok && i < steps.len; i++) {
        const PassDef *def = steps.data[i].def;
        bool run =
            !in_list(o->disabled, def->name) &&
            (explicit_list || in_list(o->required, def->name) || def->opt_level <= o->opt_level);
        if (!run) continue;
        PassCtx pc = {ctx, o->opt_level, &steps.data[i].args, def->name};
        double s = now_s();
        ok = run_step(&pc, def, m) && ctx->diags.n_errors == errs;
        if (ok && !all_typed(m)) { /* a pass that builds untyped nodes: infer them here */
            if (o->verify_types) {
                diag_error(&ctx->diags, SPAN_NONE, "internal error: %s left nodes without types",
                           def->name);
                ok = false;
            } else {
                ok = ty_infer_module(m);
            }
        }
        double dt = now_s() - s;
        total += dt;
        if (o->time_passes) sb_printf(&times, "%-28s %10.3f\n", def->name, dt * 1e3);
        if (ok && o->verify_types) ok = verify_types(m, def->name);
        if (ok && o->print_after &&
            (strcmp(o->print_after, "all") == 0 || strcmp(o->print_after, def->name) == 0)) {
            sb_printf(&rep, "// after %s\n", def->name);
            ir_print_module(m, NULL, &rep);
            if (rep.len && rep.data[rep.len - 1] != '\n') sb_putc(&rep, '\n');
        }
    }
    if (o->time_passes) {
        sb_printf(&times, "%-28s %10.3f\n", "total", total * 1e3);
        sb_puts(&rep, sb_cstr(&times));
    }
    if (rep.len) put_report(o, sb_cstr(&rep));
    sb_free(&rep);
    sb_free(&times);
    vec_free(&steps);
    return ok && ctx->diags.n_errors == errs;
}

/* ---- typed construction -------------------------------------------------------------------- */

Expr *pass_op_call(Ctx *ctx, const char *op, uint32_t n_args, Expr *const *args, const Attrs *attrs,
                   Span span) {
    Expr *opx = ir_op_get(ctx, op, strlen(op));
    if (AS_OP(opx)->info == NULL) AS_OP(opx)->info = op_lookup(op, strlen(op));
    RLY_CHECK(AS_OP(opx)->info != NULL, "pass_op_call: unknown operator %s", op);
    Expr *call = ir_call_new(ctx, opx, n_args, args, attrs, 0, NULL, span);
    return pass_retype(ctx, call, NULL) ? call : NULL;
}

static Type *type_of(Expr *e) {
    if (e->checked_type) return e->checked_type;
    if (e->kind == EXPR_VAR) return ((Var *)e)->ann;
    return NULL;
}

/* The result type of calling a value of type ft, or NULL when it is polymorphic or unknown. */
static Type *mono_result(Type *ft) {
    if (ft == NULL || ft->kind != TYPE_FUNC) return NULL;
    FuncType *f = (FuncType *)ft;
    return f->n_tparams == 0 ? f->ret : NULL;
}

bool pass_retype(Ctx *ctx, Expr *e, Type *fallback) {
    Type *t = NULL;
    switch ((ExprKind)e->kind) {
    case EXPR_CONSTANT: {
        Constant *c = (Constant *)e;
        t = ir_type_tensor(ctx, c->dtype, c->ndim, c->shape);
        break;
    }
    case EXPR_TUPLE: {
        Tuple *tu = (Tuple *)e;
        Type **fs = arena_array(&ctx->arena, tu->n ? tu->n : 1, sizeof *fs);
        for (uint32_t i = 0; i < tu->n; i++)
            if ((fs[i] = type_of(tu->fields[i])) == NULL) return e->checked_type = fallback, true;
        t = ir_type_tuple(ctx, tu->n, fs);
        break;
    }
    case EXPR_TUPLE_GET_ITEM: {
        TupleGetItem *g = (TupleGetItem *)e;
        Type *tt = type_of(g->tuple);
        if (tt && tt->kind == TYPE_TUPLE && g->index < ((TupleType *)tt)->n)
            t = ((TupleType *)tt)->fields[g->index];
        break;
    }
    case EXPR_LET: t = type_of(((Let *)e)->body); break;
    /* Inference unifies the branches, and unifying `?` with a known dim gives `?`: when the
     * branches' types differ, their unifier is the node's type from before the rebuild. */
    case EXPR_IF: {
        If *x = (If *)e;
        t = type_of(x->then_branch);
        if (t != type_of(x->else_branch)) t = fallback;
        break;
    }
    case EXPR_MATCH: {
        Match *mt = (Match *)e;
        if (mt->n_clauses > 0) t = type_of(mt->clauses[0].rhs);
        for (uint32_t i = 1; i < mt->n_clauses && t != fallback; i++)
            if (type_of(mt->clauses[i].rhs) != t) t = fallback;
        break;
    }
    case EXPR_FUNCTION: {
        Function *f = (Function *)e;
        Type **ps = arena_array(&ctx->arena, f->n_params ? f->n_params : 1, sizeof *ps);
        bool known = true;
        for (uint32_t i = 0; i < f->n_params; i++)
            known &= (ps[i] = type_of(&f->params[i]->base)) != NULL;
        Type *ret = f->ret_type ? f->ret_type : type_of(f->body); /* the annotation wins */
        if (known && ret)
            t = ir_type_func(ctx, f->n_params, ps, ret, f->n_tparams, f->tparams, 0, NULL);
        break;
    }
    case EXPR_CALL: {
        Call *c = (Call *)e;
        if (c->op->kind == EXPR_OP) {
            const OpDef *def = ((Op *)c->op)->info;
            if (def == NULL) def = op_lookup(((Op *)c->op)->name, strlen(((Op *)c->op)->name));
            RLY_CHECK(def != NULL, "pass_retype: unknown operator %s", ((Op *)c->op)->name);
            const AttrValue **vals =
                arena_array(&ctx->arena, def->n_attrs ? def->n_attrs : 1, sizeof *vals);
            Type **args = arena_array(&ctx->arena, c->n_args ? c->n_args : 1, sizeof *args);
            StrBuf msg = {0};
            Span where;
            for (uint32_t i = 0; i < c->n_args; i++) {
                args[i] = type_of(c->args[i]);
                RLY_CHECK(args[i] != NULL, "pass_retype: argument %u of %s is untyped", i,
                          def->name);
            }
            int err_arg = -1;
            RelResult r = REL_ERROR;
            if (op_bind_attrs(def, c->attrs, vals, &msg, &where))
                r = op_relate(ctx, def, vals, c->n_args, args, &t, &msg, &err_arg);
            if (r != REL_OK) {
                diag_error(&ctx->diags, e->span, "%s: %s", def->name,
                           r == REL_DEFER ? "argument types unknown" : sb_cstr(&msg));
                sb_free(&msg);
                return false;
            }
            sb_free(&msg);
        } else if (c->op->kind != EXPR_CONSTRUCTOR) {
            Type *ft = c->op->kind == EXPR_GLOBAL_VAR ? c->op->checked_type : type_of(c->op);
            t = mono_result(ft);
        }
        break;
    }
    case EXPR_REF_CREATE: {
        Type *v = type_of(((RefCreate *)e)->value);
        if (v) t = ir_type_ref(ctx, v);
        break;
    }
    case EXPR_REF_READ: {
        Type *r = type_of(((RefRead *)e)->ref);
        if (r && r->kind == TYPE_REF) t = ((RefType *)r)->value;
        break;
    }
    case EXPR_REF_WRITE: t = ir_type_tuple(ctx, 0, NULL); break;
    case EXPR_VAR:
    case EXPR_GLOBAL_VAR:
    case EXPR_CONSTRUCTOR:
    case EXPR_OP:
    case EXPR_KIND_COUNT: t = e->checked_type; break;
    }
    e->checked_type = t ? t : fallback;
    return true;
}

Expr *pass_rebuild(Rewriter *rw, Expr *orig, Expr *e) {
    if (e != orig && !pass_retype(rw->ctx, e, orig->checked_type))
        e->checked_type = orig->checked_type;
    return e;
}

void pass_rewrite_module(Rewriter *rw, Module *m) {
    for (size_t i = 0; i < m->funcs.len; i++) {
        FuncDef *d = &m->funcs.data[i];
        if (d->func == NULL) continue;
        Expr *r = ir_rewrite(rw, &d->func->base);
        RLY_CHECK(r->kind == EXPR_FUNCTION, "a global function was rewritten into a %s",
                  ir_expr_kind_names[r->kind]);
        d->func = (Function *)r;
    }
    if (m->expr) m->expr = ir_rewrite(rw, m->expr);
}

/* ---- purity -----------------------------------------------------------------------------------
 */

enum { PURE = 1, IMPURE = 2 };

typedef struct PureWalk {
    PtrMap *memo;
} PureWalk;

static VisitResult pure_pre(Visitor *v, Expr *e) {
    PureWalk *w = v->state;
    if (ptrmap_has(w->memo, e)) return VISIT_SKIP;
    if (e->kind == EXPR_FUNCTION) { /* a closure is a value, whatever its body does */
        ptrmap_put(w->memo, e, (void *)(uintptr_t)PURE);
        return VISIT_SKIP;
    }
    return VISIT_CONTINUE;
}

static void pure_post(Visitor *v, Expr *e) {
    PureWalk *w = v->state;
    bool pure = true;
    switch ((ExprKind)e->kind) {
    case EXPR_REF_CREATE:
    case EXPR_REF_READ:
    case EXPR_REF_WRITE: pure = false; break;
    case EXPR_CALL: {
        ExprKind k = (ExprKind)((Call *)e)->op->kind;
        pure = k == EXPR_OP || k == EXPR_CONSTRUCTOR;
        break;
    }
    default: break;
    }
    uint32_t n = ir_expr_n_children(e);
    for (uint32_t i = 0; i < n && pure; i++)
        pure = (uintptr_t)ptrmap_get(w->memo, ir_expr_child(e, i)) != IMPURE;
    ptrmap_put(w->memo, e, (void *)(uintptr_t)(pure ? PURE : IMPURE));
}

bool pass_is_pure(PtrMap *memo, Expr *e) {
    uintptr_t r = (uintptr_t)ptrmap_get(memo, e);
    if (r == 0) {
        PureWalk w = {memo};
        Visitor v = {pure_pre, pure_post, &w};
        ir_visit(&v, e);
        r = (uintptr_t)ptrmap_get(memo, e);
    }
    return r == PURE;
}
