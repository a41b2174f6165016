/* api.c - the public C API (include/rly/rly.h): failing with the thread-local last error (whose
 * storage is the runtime's, runtime/session.c), out-of-memory protection around every entry
 * point, and file handling (the text plus its side file of tensor constants). */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>

#include "frontend/text/text.h"
#include "ir/ir.h"
#include "runtime/npy.h"
#include "passes/grad.h"
#include "passes/passes.h"
#include "types/types.h"
#include "api/api.h"
#include "runtime/session.h"

/* The last error's storage is the runtime's (runtime/session.c), so that librly_runtime, which
 * holds no src/api code, reports through the same rly_last_error(). */
rly_status api_fail(rly_status st, const char *fmt, ...) {
    size_t cap;
    char *buf = rt_error_buf(&cap);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return st;
}

/* Render the context's diagnostics into the last error and clear them. */
rly_status api_fail_diags(Ctx *ctx) {
    size_t cap;
    char *last_error = rt_error_buf(&cap);
    StrBuf sb = {0};
    diags_render(&ctx->diags, 0, &sb);
    size_t n = sb.len < cap - 1 ? sb.len : cap - 1;
    memcpy(last_error, sb_cstr(&sb), n);
    if (n < sb.len) { /* cut at a line end and say so */
        static const char more[] = "\n... (more diagnostics not shown)";
        n = cap - sizeof more;
        while (n > 0 && last_error[n - 1] != '\n')
            n--;
        memcpy(last_error + (n ? n - 1 : 0), more, sizeof more);
        n = strlen(last_error);
    }
    last_error[n] = '\0';
    if (n && last_error[n - 1] == '\n') last_error[n - 1] = '\0';
    sb_free(&sb);
    diags_clear(&ctx->diags);
    return RLY_STATUS_ERROR;
}

RLY_API rly_status rly_ctx_new(rly_ctx **out) {
    if (out == NULL) return api_fail(RLY_STATUS_INVALID, "rly_ctx_new: out is NULL");
    RLY_TRY;
    *out = ir_ctx_new();
    RLY_END_TRY;
    return RLY_STATUS_OK;
}

RLY_API void rly_ctx_free(rly_ctx *ctx) { ir_ctx_free(ctx); }

/* Parse into a new module, or into `into` when it is not NULL. */
static rly_status parse(Ctx *ctx, Module *into, const char *text, size_t len, const char *name,
                        Constant *const *meta, uint32_t n_meta, rly_module **out) {
    Module *m = text_parse_into(ctx, into, name, text, len, meta, n_meta);
    if (m == NULL) return api_fail_diags(ctx);
    *out = m;
    return RLY_STATUS_OK;
}

RLY_API rly_status rly_module_parse(rly_ctx *ctx, const char *text, size_t len, const char *name,
                                    rly_module **out) {
    if (ctx == NULL || text == NULL || out == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_parse: NULL argument");
    RLY_TRY;
    rly_status st = parse(ctx, NULL, text, len, name ? name : "<string>", NULL, 0, out);
    RLY_END_TRY;
    return st;
}

/* The side file of `path`: its extension (.rly, .relay, .txt) replaced by .npz. */
static char *side_path(const char *path) {
    size_t n = strlen(path);
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (dot != NULL && (slash == NULL || dot > slash)) n = (size_t)(dot - path);
    char *s = sup_malloc(n + 5);
    memcpy(s, path, n);
    memcpy(s + n, ".npz", 5);
    return s;
}

static bool file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Load the side file's tensors as Constants, in index order (constant_0, constant_1, ...). */
static rly_status load_side(Ctx *ctx, const char *spath, PtrVec *consts) {
    Npz z = {0};
    char err[512];
    if (!rt_npz_load(spath, &z, err, sizeof err)) return api_fail(RLY_STATUS_IO, "%s", err);
    rly_status st = RLY_STATUS_OK;
    for (size_t i = 0; i < z.n && st == RLY_STATUS_OK; i++) {
        char want[32];
        snprintf(want, sizeof want, "constant_%zu", i);
        NpzEntry *e = NULL;
        for (size_t j = 0; j < z.n; j++)
            if (strcmp(z.items[j].name, want) == 0) e = &z.items[j];
        if (e == NULL) {
            st = api_fail(RLY_STATUS_ERROR,
                          "%s: no array '%s' (tensor constants are named constant_0, "
                          "constant_1, ... in order)",
                          spath, want);
            break;
        }
        Expr *c =
            ir_constant_new(ctx, e->arr.dtype, e->arr.ndim, e->arr.shape, e->arr.data, SPAN_NONE);
        vec_push(consts, c);
    }
    rt_npz_free(&z);
    return st;
}

static rly_status parse_file(rly_ctx *ctx, rly_module *into, const char *path, rly_module **out);

RLY_API rly_status rly_module_parse_file(rly_ctx *ctx, const char *path, rly_module **out) {
    if (ctx == NULL || path == NULL || out == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_parse_file: NULL argument");
    return parse_file(ctx, NULL, path, out);
}

RLY_API rly_status rly_module_parse_file_into(rly_module *mod, const char *path) {
    if (mod == NULL || path == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_parse_file_into: NULL argument");
    rly_module *out;
    return parse_file(mod->ctx, mod, path, &out);
}

RLY_API rly_status rly_module_parse_into(rly_module *mod, const char *text, size_t len,
                                         const char *name) {
    if (mod == NULL || text == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_parse_into: NULL argument");
    rly_module *out;
    RLY_TRY;
    rly_status st = parse(mod->ctx, mod, text, len, name ? name : "<string>", NULL, 0, &out);
    RLY_END_TRY;
    return st;
}

RLY_API rly_status rly_module_prelude(rly_ctx *ctx, rly_module **out) {
    if (ctx == NULL || out == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_prelude: NULL argument");
    const char *t = ty_prelude_text();
    RLY_TRY;
    rly_status st = parse(ctx, NULL, t, strlen(t), "prelude.rly", NULL, 0, out);
    RLY_END_TRY;
    return st;
}

RLY_API rly_status rly_module_infer(rly_module *mod) {
    if (mod == NULL) return api_fail(RLY_STATUS_INVALID, "rly_module_infer: NULL module");
    RLY_TRY;
    bool ok = ir_well_formed(mod) && ty_infer_module(mod);
    RLY_END_TRY;
    return ok ? RLY_STATUS_OK : api_fail_diags(mod->ctx);
}

RLY_API rly_status rly_module_gradient(rly_module *mod, const char *entry, const char *mode,
                                       const char *out_name) {
    if (mod == NULL) return api_fail(RLY_STATUS_INVALID, "rly_module_gradient: NULL module");
    GradMode gm = GRAD_HIGHER;
    if (mode && strcmp(mode, "first") == 0)
        gm = GRAD_FIRST;
    else if (mode && strcmp(mode, "higher") != 0)
        return api_fail(RLY_STATUS_INVALID,
                        "rly_module_gradient: mode must be \"higher\" or \"first\", not \"%s\"",
                        mode);
    RLY_TRY;
    bool ok = ir_well_formed(mod) && ty_infer_module(mod) &&
              pass_gradient(mod, entry ? entry : "main", gm, out_name ? out_name : "main");
    RLY_END_TRY;
    return ok ? RLY_STATUS_OK : api_fail_diags(mod->ctx);
}

static rly_status print(rly_module *mod, bool show_types, char **out);

RLY_API rly_status rly_module_print_typed(rly_module *mod, char **out) {
    return print(mod, true, out);
}

static rly_status parse_file(rly_ctx *ctx, rly_module *into, const char *path, rly_module **out) {
    char err[512];
    char *text = NULL;
    size_t len = 0;
    if (!sup_read_file(path, &text, &len, err, sizeof err))
        return api_fail(RLY_STATUS_IO, "%s", err);
    PtrVec consts = {0};
    char *spath = NULL;
    bool side_missing = false;
    RLY_TRY;
    rly_status st = RLY_STATUS_OK;
    if (strcmp(path, "-") != 0 && memmem(text, len, "meta[relay.Constant]", 20) != NULL) {
        spath = side_path(path);
        if (file_exists(spath))
            st = load_side(ctx, spath, &consts);
        else
            side_missing = memmem(text, len, "#[metadata]", 11) == NULL;
    }
    if (st == RLY_STATUS_OK)
        st = parse(ctx, into, text, len, strcmp(path, "-") == 0 ? "<stdin>" : path,
                   (Constant *const *)consts.data, (uint32_t)consts.len, out);
    if (st == RLY_STATUS_ERROR && side_missing) {
        size_t cap;
        char *last_error = rt_error_buf(&cap);
        size_t n = strlen(last_error);
        snprintf(last_error + n, cap - n,
                 "\nnote: tensor constants are read from the side file '%s', which does not exist",
                 spath);
    }
    RLY_END_TRY;
    vec_free(&consts);
    free(spath);
    free(text);
    return st;
}

RLY_API int rly_module_is_expr(const rly_module *mod) { return mod && mod->is_expr; }

RLY_API rly_status rly_module_check_well_formed(rly_module *mod) {
    if (mod == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_check_well_formed: NULL module");
    RLY_TRY;
    bool ok = ir_well_formed(mod);
    RLY_END_TRY;
    return ok ? RLY_STATUS_OK : api_fail_diags(mod->ctx);
}

static rly_status print(rly_module *mod, bool show_types, char **out) {
    if (mod == NULL || out == NULL)
        return api_fail(RLY_STATUS_INVALID, "%s: NULL argument",
                        show_types ? "rly_module_print_typed" : "rly_module_print");
    StrBuf sb = {0};
    PrintOptions po = {.show_types = show_types};
    RLY_TRY;
    ir_print_module(mod, &po, &sb);
    RLY_END_TRY;
    *out = sb_take(&sb);
    return RLY_STATUS_OK;
}

RLY_API rly_status rly_module_print(rly_module *mod, char **out) { return print(mod, false, out); }

RLY_API rly_status rly_module_save(rly_module *mod, const char *path) {
    if (mod == NULL || path == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_save: NULL argument");
    StrBuf sb = {0};
    char err[512];
    rly_status st = RLY_STATUS_OK;
    char *spath = NULL;
    bool side_existed = false;
    Npz z = {0};
    RLY_TRY;
    ir_print_module(mod, NULL, &sb);
    if (mod->meta.len) {
        spath = side_path(path);
        if (strcmp(spath, path) == 0) {
            st = api_fail(RLY_STATUS_INVALID,
                          "'%s': the text and its side file would have the same name", path);
        } else {
            side_existed = file_exists(spath);
            z.n = mod->meta.len;
            z.items = sup_calloc(z.n, sizeof(NpzEntry));
            for (size_t i = 0; i < z.n; i++) {
                Constant *c = mod->meta.data[i];
                char name[32];
                snprintf(name, sizeof name, "constant_%zu", i);
                z.items[i].name = strdup(name);
                z.items[i].arr.dtype = c->dtype;
                z.items[i].arr.ndim = c->ndim;
                for (uint32_t d = 0; d < c->ndim; d++)
                    z.items[i].arr.shape[d] = c->shape[d];
                z.items[i].arr.data = c->data; /* borrowed: not freed below */
                z.items[i].arr.nbytes = c->nbytes;
            }
            if (!rt_npz_save(spath, &z, false, err, sizeof err))
                st = api_fail(RLY_STATUS_IO, "%s", err);
        }
    }
    if (st == RLY_STATUS_OK &&
        !sup_write_file_atomic(path, sb_cstr(&sb), sb.len, err, sizeof err)) {
        st = api_fail(RLY_STATUS_IO, "%s", err);
        if (spath && !side_existed) remove(spath); /* no half of a new pair is left behind */
    }
    RLY_END_TRY;
    for (size_t i = 0; i < z.n; i++)
        free(z.items[i].name);
    free(z.items);
    free(spath);
    sb_free(&sb);
    return st;
}

RLY_API int rly_module_equal(const rly_module *a, const rly_module *b) {
    return a && b && ir_module_equal(a, b);
}

RLY_API uint64_t rly_module_hash(const rly_module *mod) { return mod ? ir_module_hash(mod) : 0; }

/* ---- user-defined operators ------------------------------------------------------------- */

RLY_API int rly_type_is_tensor(const rly_type *t) {
    return t && ((const Type *)t)->kind == TYPE_TENSOR;
}
RLY_API rly_dtype rly_type_dtype(const rly_type *t) {
    return rly_type_is_tensor(t) ? ((const TensorType *)t)->dtype : RLY_DTYPE_COUNT;
}
RLY_API int rly_type_ndim(const rly_type *t) {
    return rly_type_is_tensor(t) ? (int)((const TensorType *)t)->ndim : -1;
}
RLY_API int64_t rly_type_dim(const rly_type *t, int i) {
    if (!rly_type_is_tensor(t) || i < 0 || (uint32_t)i >= ((const TensorType *)t)->ndim)
        return RLY_DIM_ANY;
    int64_t d = ((const TensorType *)t)->shape[i];
    return dim_is_sym(d) ? RLY_DIM_SYMBOLIC : d;
}
RLY_API const rly_type *rly_type_tensor(rly_ctx *ctx, rly_dtype dt, int ndim,
                                        const int64_t *shape) {
    if (ctx == NULL || (unsigned)dt >= RLY_DTYPE_COUNT || ndim < 0 || ndim > 64 ||
        (ndim > 0 && shape == NULL))
        return NULL;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < RLY_DIM_ANY) return NULL;
    char why[128];
    if (sup_shape_check((uint32_t)ndim, shape, true, why, sizeof why) != NULL) return NULL;
    return (const rly_type *)ir_type_tensor(ctx, dt, (uint32_t)ndim, shape);
}

/* No unknown (or error) anywhere in t: the construction-time flags say so without a walk. */
static bool type_known(const Type *t) {
    return (t->flags & (TYPE_HAS_INCOMPLETE | TYPE_HAS_ERROR)) == 0 && t->kind != TYPE_INCOMPLETE;
}

/* The relation of every user operator: defers until the arguments are known, then calls the
 * user's function. */
static RelResult user_rel(RelCall *rc) {
    for (uint32_t i = 0; i < rc->n_args; i++)
        if (!type_known(rc->args[i])) return REL_DEFER;
    rly_type_rel_fn fn = (rly_type_rel_fn)(uintptr_t)rc->op->user_rel;
    char err[512] = "";
    const rly_type *out = NULL;
    int r = fn(rc->ctx, (const rly_type *const *)rc->args, (int)rc->n_args, &out, err, sizeof err,
               rc->op->user_data);
    if (r != 0 || out == NULL)
        return rel_error(rc, "%s", err[0] ? err : "the operator's type relation rejected the call");
    return rel_out(rc, (Type *)out);
}

RLY_API rly_status rly_op_register(const rly_op_def *def) {
    if (def == NULL || def->name == NULL || def->name[0] == '\0' || def->rel == NULL ||
        def->n_args < 0)
        return api_fail(RLY_STATUS_INVALID,
                        "rly_op_register: name, rel and n_args >= 0 are required");
    int p = def->pattern;
    if (!(p >= 0 && p <= 4) && p != 8)
        return api_fail(RLY_STATUS_INVALID, "rly_op_register: invalid fusion pattern %d", p);
    OpDef *d = calloc(1, sizeof *d);
    char *name = strdup(def->name);
    char *doc = strdup(def->doc ? def->doc : "user-defined operator");
    if (d == NULL || name == NULL || doc == NULL) {
        free(d), free(name), free(doc);
        return api_fail(RLY_STATUS_NOMEM, "out of memory");
    }
    d->name = name;
    d->n_args = def->n_args;
    d->pattern = (uint8_t)p;
    d->rel = user_rel;
    d->arg_names = "";
    d->doc = doc;
    d->user_rel = (const void *)(uintptr_t)def->rel;
    d->user_kernel = (const void *)(uintptr_t)def->kernel;
    d->user_data = def->user;
    StrBuf msg = {0};
    bool ok = op_register(d, &msg);
    rly_status st =
        ok ? RLY_STATUS_OK : api_fail(RLY_STATUS_INVALID, "rly_op_register: %s", sb_cstr(&msg));
    sb_free(&msg);
    if (!ok) free(d), free(name), free(doc);
    return st;
}

static const char *attr_type_name(AttrType t) {
    static const char *const names[] = {"int",    "float", "bool", "str",   "dtype",  "ints",
                                        "floats", "strs",  "int?", "ints?", "float?", "any"};
    return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?";
}

static void describe_op(const OpDef *d, StrBuf *sb) {
    sb_printf(sb, "%s(%s)  [%s]  %s\n", d->name, d->arg_names ? d->arg_names : "",
              op_pattern_name((OpPattern)d->pattern), d->doc ? d->doc : "");
    for (uint32_t i = 0; i < d->n_attrs; i++) {
        const AttrSpec *a = &d->attrs[i];
        sb_printf(sb, "    %s: %s = %s", a->name, attr_type_name(a->type),
                  a->dflt ? a->dflt : "(required)");
        if (a->choices) sb_printf(sb, "  {%s}", a->choices);
        sb_putc(sb, '\n');
    }
}

RLY_API rly_status rly_ops_describe(const char *name, char **out) {
    if (out == NULL) return api_fail(RLY_STATUS_INVALID, "rly_ops_describe: NULL argument");
    StrBuf sb = {0};
    RLY_TRY;
    if (name) {
        const OpDef *d = op_lookup(name, strlen(name));
        if (d) {
            describe_op(d, &sb);
            sb_printf(&sb, "  gradient: %s\n",
                      !grad_lookup(d->name)   ? "none (rly grad rejects programs using it)"
                      : grad_is_zero(d->name) ? "zero (its result does not depend smoothly on "
                                                "its inputs)"
                                              : "yes");
        }
    } else {
        for (size_t i = 0; i < op_count(); i++)
            describe_op(op_at(i), &sb);
        sb_printf(&sb, "%zu operators\n", op_count());
    }
    RLY_END_TRY;
    if (sb.len == 0) {
        const char *s = op_suggest(name, strlen(name));
        sb_free(&sb);
        return api_fail(RLY_STATUS_ERROR, "unknown operator %s%s%s%s", name,
                        s ? " (did you mean " : "", s ? s : "", s ? "?)" : "");
    }
    *out = sb_take(&sb);
    return RLY_STATUS_OK;
}
