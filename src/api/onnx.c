/* onnx.c - the public ONNX entry points: import a model file, describe it, and run ONNX test-case
 * folders (model.onnx + test_data_set_N/input_K.pb, output_K.pb) on the interpreter or the VM. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "runtime/session.h"
#include "eval/eval.h"
#include "frontend/onnx/import.h"
#include "kernels/kernel.h"
#include "runtime/npy.h"
#include "types/types.h"

static void free_model(void *m) { ox_model_free(m); }

/* A float8 tensor as the emulated float32 tensor the importer carries it as (docs/onnx.md,
 * "float8 and int4 emulation"), in arena; other tensors unchanged (int4/uint4 are read
 * unpacked, one int8/uint8 each, already). */
static const OxTensor *emulated(const OxTensor *t, Arena *arena) {
    if (!OX_IS_FLOAT8(t->data_type)) return t;
    OxTensor *w = arena_alloc(arena, sizeof *w);
    *w = *t;
    w->data_type = OX_FLOAT;
    w->borrowed = false;
    w->nbytes = t->data ? (size_t)t->count * sizeof(float) : 0;
    float *f = t->data ? arena_array(arena, (size_t)t->count, sizeof *f) : NULL;
    for (int64_t i = 0; f && i < t->count; i++)
        f[i] = ox_float8_value(t->data_type, ((const uint8_t *)t->data)[i]);
    w->data = f;
    return w;
}

/* Every tensor of a test value (inside sequences and optionals) as emulated(). */
static void emulate_value(OxValue *v, Arena *arena) {
    if (v->kind == OXV_TENSOR) {
        v->tensor = (OxTensor *)emulated(v->tensor, arena);
        return;
    }
    for (uint32_t i = 0; i < v->n; i++)
        emulate_value(&v->items[i], arena); /* depth bounded by the reader (OX_MAX_DEPTH) */
}

/* Parse "name:[1,3,224,224] other:[2]" (also ';' or ',' between entries); a dim `?` stays
 * unknown (for a sequence or optional input the entry gives its tensors' rank). */
static bool parse_shapes(const char *s, ImpShape *out, uint32_t cap, uint32_t *n, char *err,
                         size_t err_cap) {
    *n = 0;
    while (s && *s) {
        while (*s == ' ' || *s == ';' || *s == ',')
            s++;
        if (!*s) break;
        const char *colon = strchr(s, ':');
        const char *open = colon ? strchr(colon, '[') : NULL;
        const char *close = open ? strchr(open, ']') : NULL;
        if (colon == NULL || open != colon + 1 || close == NULL) {
            snprintf(err, err_cap, "--input-shapes: expected NAME:[d0,d1,...] at '%s'", s);
            return false;
        }
        if (*n == cap) {
            snprintf(err, err_cap, "--input-shapes: at most %u entries", cap);
            return false;
        }
        ImpShape *sh = &out[(*n)++];
        size_t nl = (size_t)(colon - s);
        char *name = malloc(nl + 1);
        memcpy(name, s, nl);
        name[nl] = '\0';
        sh->name = name;
        sh->ndim = 0;
        const char *p = open + 1;
        while (p < close) {
            while (*p == ' ' || *p == ',')
                p++;
            if (p >= close) break;
            char *end;
            long long v;
            if (*p == '?') { /* unknown: the dim stays `?` (a sequence's rank: x:[?,?]) */
                v = -1;
                end = (char *)p + 1;
            } else {
                v = strtoll(p, &end, 10);
                if (v < 0) end = (char *)p;
            }
            if (end == p || sh->ndim == 32) {
                snprintf(err, err_cap, "--input-shapes: bad dimension list for '%s'", name);
                return false;
            }
            sh->dims[sh->ndim++] = v;
            p = end;
        }
        s = close + 1;
    }
    return true;
}

static rly_status import_with(rly_ctx *ctx, OxModel *m, const ImpOptions *o, rly_module **out) {
    RLY_TRY;
    Module *mod = imp_import(ctx, m, o);
    bool ok = mod != NULL && ty_infer_module(mod);
    RLY_END_TRY;
    if (!ok) return api_fail_diags(ctx);
    *out = mod;
    return RLY_STATUS_OK;
}

static rly_status import_checked(rly_ctx *ctx, OxModel *m, const ImpShape *shapes, uint32_t n,
                                 bool params_as_inputs, rly_module **out) {
    ImpOptions o = {.shapes = shapes, .n_shapes = n, .params_as_inputs = params_as_inputs};
    return import_with(ctx, m, &o, out);
}

/* Write the initializers of m's graph that became parameters of mod's @main to params_npz,
 * each array named by its parameter (the ONNX name when @main records onnx_input_names). */
static rly_status save_params(const OxModel *m, Module *mod, const char *params_npz) {
    FuncDef *d = ir_module_lookup(mod, "main", 4);
    RLY_CHECK(d != NULL && d->func != NULL, "the importer defines @main");
    const Function *f = d->func;
    const AttrValue *on = f->attrs ? ir_attrs_get(f->attrs, "onnx_input_names") : NULL;
    const OxGraph *g = m->graph;
    Npz z = {0};
    z.items = calloc(f->n_params + 1, sizeof *z.items); /* outside RLY_TRY: checked here */
    if (z.items == NULL) return api_fail(RLY_STATUS_NOMEM, "out of memory");
    Arena tmp; /* float8 initializers widened */
    arena_init(&tmp);
    for (uint32_t i = 0; i < f->n_params; i++) {
        const char *onnx = f->params[i]->name;
        if (on && on->kind == ATTR_LIST && i < on->list.n && on->list.items[i]->kind == ATTR_STR)
            onnx = on->list.items[i]->s;
        const OxTensor *t = NULL;
        for (uint32_t k = 0; k < g->n_inits && t == NULL; k++)
            if (strcmp(g->inits[k].name, onnx) == 0) t = &g->inits[k];
        if (t == NULL) continue; /* a graph input */
        t = emulated(t, &tmp);   /* float8 weights: the float32 parameter */
        NpzEntry *e = &z.items[z.n++];
        e->name = (char *)f->params[i]->name;
        e->arr.dtype = (rly_dtype)ox_to_rly_dtype(t->data_type);
        e->arr.ndim = t->ndim;
        for (uint32_t k = 0; k < t->ndim; k++)
            e->arr.shape[k] = t->dims[k];
        e->arr.data = (void *)t->data;
        e->arr.nbytes = t->data ? t->nbytes : 0;
    }
    char err[512];
    rly_status st = RLY_STATUS_OK;
    if (!rt_npz_save(params_npz, &z, false, err, sizeof err))
        st = api_fail(RLY_STATUS_IO, "%s", err);
    free(z.items);
    arena_free(&tmp);
    return st;
}

static rly_status import_file(rly_ctx *ctx, const char *path, const char *input_shapes,
                              const char *params_npz, rly_module **out) {
    *out = NULL;
    ImpShape shapes[64];
    uint32_t n_shapes = 0;
    char err[512];
    rly_status st = RLY_STATUS_OK;
    if (!parse_shapes(input_shapes, shapes, 64, &n_shapes, err, sizeof err)) {
        st = api_fail(RLY_STATUS_ERROR, "%s", err);
        goto done;
    }
    OxModel *m = ox_load_file(path, err, sizeof err);
    if (m == NULL) {
        st = api_fail(RLY_STATUS_ERROR, "%s", err);
        goto done;
    }
    ir_ctx_keep(ctx, m, free_model);
    st = import_checked(ctx, m, shapes, n_shapes, params_npz != NULL, out);
    if (st == RLY_STATUS_OK && params_npz != NULL) {
        st = save_params(m, *out, params_npz);
        if (st != RLY_STATUS_OK) *out = NULL;
    }
done:
    for (uint32_t i = 0; i < n_shapes; i++)
        free((char *)shapes[i].name);
    return st;
}

rly_status rly_module_import_onnx(rly_ctx *ctx, const char *path, const char *input_shapes,
                                  rly_module **out) {
    return import_file(ctx, path, input_shapes, NULL, out);
}

rly_status rly_module_import_onnx_params(rly_ctx *ctx, const char *path, const char *input_shapes,
                                         const char *params_npz, rly_module **out) {
    if (params_npz == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_import_onnx_params: NULL params path");
    return import_file(ctx, path, input_shapes, params_npz, out);
}

/* ---- rly info ------------------------------------------------------------------------------ */

static void describe_type(const OxType *t, StrBuf *sb) {
    if ((t->kind == OXT_SEQUENCE || t->kind == OXT_OPTIONAL) && t->elem != NULL) {
        sb_puts(sb, t->kind == OXT_SEQUENCE ? "sequence(" : "optional(");
        describe_type(t->elem, sb); /* nesting is bounded by the reader (OX_MAX_DEPTH) */
        sb_putc(sb, ')');
        return;
    }
    if (t->kind != OXT_TENSOR) {
        sb_puts(sb, t->kind == OXT_SEQUENCE   ? "sequence"
                    : t->kind == OXT_OPTIONAL ? "optional"
                    : t->kind == OXT_MAP      ? "map"
                                              : "(no type)");
        return;
    }
    sb_printf(sb, "%s", ox_type_name(t->elem_type));
    if (t->ndim < 0) {
        sb_puts(sb, "[shape unknown]");
        return;
    }
    sb_putc(sb, '[');
    for (int32_t i = 0; i < t->ndim; i++) {
        if (i) sb_puts(sb, ", ");
        if (t->dims[i].value >= 0)
            sb_printf(sb, "%lld", (long long)t->dims[i].value);
        else if (t->dims[i].param)
            sb_puts(sb, t->dims[i].param);
        else
            sb_putc(sb, '?');
    }
    sb_putc(sb, ']');
}

typedef struct OpCount {
    const char *name; /* "domain:op" */
    uint32_t n;
    bool supported;
} OpCount;

static int by_count(const void *a, const void *b) {
    const OpCount *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* Bit t of *seen for each emulated type (float8, int4/uint4) a type uses. */
static void note_emulated(const OxType *t, uint32_t *seen) {
    for (; t != NULL; t = t->kind == OXT_SEQUENCE || t->kind == OXT_OPTIONAL ? t->elem : NULL)
        if (t->kind == OXT_TENSOR && (OX_IS_FLOAT8(t->elem_type) || OX_IS_INT4(t->elem_type)))
            *seen |= 1u << t->elem_type;
}

static void note_emulated_dt(int64_t dt, uint32_t *seen) {
    if (OX_IS_FLOAT8(dt) || OX_IS_INT4(dt)) *seen |= 1u << dt;
}

rly_status rly_onnx_info(const char *path, char **text) {
    *text = NULL;
    char err[512];
    OxModel *m = ox_load_file(path, err, sizeof err);
    if (m == NULL) return api_fail(RLY_STATUS_ERROR, "%s", err);
    StrBuf sb = {0};
    sb_printf(&sb, "model: %s\nir_version: %lld\nproducer: %s %s\nopsets:", path,
              (long long)m->ir_version, m->producer_name, m->producer_version);
    for (uint32_t i = 0; i < m->n_opsets; i++)
        sb_printf(&sb, " %s=%lld", m->opsets[i].domain[0] ? m->opsets[i].domain : "ai.onnx",
                  (long long)m->opsets[i].version);
    sb_putc(&sb, '\n');
    const OxGraph *g = m->graph;
    StrMap inits = {0};
    for (uint32_t i = 0; i < g->n_inits; i++)
        strmap_put(&inits, g->inits[i].name, strlen(g->inits[i].name), (void *)1);
    size_t weight_bytes = 0;
    for (uint32_t i = 0; i < g->n_inits; i++)
        weight_bytes += g->inits[i].nbytes;
    sb_puts(&sb, "inputs:\n");
    for (uint32_t i = 0; i < g->n_inputs; i++) {
        if (strmap_get(&inits, g->inputs[i].name, strlen(g->inputs[i].name))) continue;
        sb_printf(&sb, "  %s: ", g->inputs[i].name);
        describe_type(&g->inputs[i].type, &sb);
        sb_putc(&sb, '\n');
    }
    strmap_free(&inits);
    sb_puts(&sb, "outputs:\n");
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        sb_printf(&sb, "  %s: ", g->outputs[i].name);
        describe_type(&g->outputs[i].type, &sb);
        sb_putc(&sb, '\n');
    }
    sb_printf(&sb, "initializers: %u (%zu bytes)\n", g->n_inits, weight_bytes);
    /* float8 / int4 values anywhere: the graph's values, initializers, Constant values and the
     * targets of Cast and QuantizeLinear (output_dtype) */
    uint32_t emul = 0;
    for (uint32_t i = 0; i < g->n_inputs; i++)
        note_emulated(&g->inputs[i].type, &emul);
    for (uint32_t i = 0; i < g->n_outputs; i++)
        note_emulated(&g->outputs[i].type, &emul);
    for (uint32_t i = 0; i < g->n_value_infos; i++)
        note_emulated(&g->value_infos[i].type, &emul);
    for (uint32_t i = 0; i < g->n_inits; i++)
        note_emulated_dt(g->inits[i].data_type, &emul);
    /* Operator histogram over every graph (subgraphs included). */
    Vec(OpCount) counts = {0};
    StrMap index = {0};
    PtrVec stack = {0};
    vec_push(&stack, (void *)g);
    uint32_t n_nodes = 0;
    while (stack.len) {
        const OxGraph *gg = vec_pop(&stack);
        for (uint32_t i = 0; i < gg->n_nodes; i++) {
            const OxNode *nd = &gg->nodes[i];
            n_nodes++;
            for (uint32_t a = 0; a < nd->n_attrs; a++) {
                const OxAttr *at = &nd->attrs[a];
                if (at->t) note_emulated_dt(at->t->data_type, &emul);
                if (at->type == OXA_INT &&
                    (strcmp(at->name, "to") == 0 || strcmp(at->name, "output_dtype") == 0))
                    note_emulated_dt(at->i, &emul);
                if (nd->attrs[a].g) vec_push(&stack, nd->attrs[a].g);
                for (uint32_t j = 0; j < nd->attrs[a].n_graphs; j++)
                    vec_push(&stack, nd->attrs[a].graphs[j]);
            }
            char key[300];
            snprintf(key, sizeof key, "%s%s%s", nd->domain, nd->domain[0] ? ":" : "", nd->op_type);
            uintptr_t k = (uintptr_t)strmap_get(&index, key, strlen(key));
            if (k == 0) {
                int64_t opset = ox_opset(m, nd->domain);
                if (opset == 0 && nd->domain[0] && strcmp(nd->domain, "ai.onnx")) opset = 1;
                /* helper opset (issue 18): an unsupported operator is named with its opset, and
                 * every ai.onnx operator of an opset newer than the importer's is unsupported */
                bool sup = imp_find_conv(nd->op_type, nd->domain, opset) != NULL;
                if (!nd->domain[0] || strcmp(nd->domain, "ai.onnx") == 0)
                    sup = sup && !imp_opset_unsupported(m);
                char name[330];
                if (sup)
                    snprintf(name, sizeof name, "%s", key);
                else
                    snprintf(name, sizeof name, "%s-%lld", key, (long long)opset);
                OpCount c = {arena_strndup(&m->arena, name, strlen(name)), 0, sup};
                /* end helper opset */
                vec_push(&counts, c);
                k = counts.len;
                strmap_put(&index, key, strlen(key), (void *)k);
            }
            counts.data[k - 1].n++;
        }
    }
    if (counts.len > 1)
        qsort(counts.data, counts.len, sizeof(OpCount), by_count); /* data may be NULL */
    if (emul) { /* issue 18: Relay has no float8/int4 dtypes; say how they are carried */
        sb_puts(&sb, "emulated types:");
        for (int32_t t = OX_FLOAT8E4M3FN, k = 0; t <= OX_INT4; t++)
            if (emul & (1u << t))
                sb_printf(&sb, "%s %s (as %s)", k++ ? "," : "", ox_type_name(t),
                          OX_IS_FLOAT8(t) ? "float32"
                          : t == OX_INT4  ? "int8"
                                          : "uint8");
        sb_putc(&sb, '\n');
    }
    sb_printf(&sb, "nodes: %u\noperators:\n", n_nodes);
    uint32_t n_unsup = 0;
    for (size_t i = 0; i < counts.len; i++) {
        sb_printf(&sb, "  %6u  %s%s\n", counts.data[i].n, counts.data[i].name,
                  counts.data[i].supported ? "" : "  (unsupported)");
        n_unsup += !counts.data[i].supported;
    }
    /* helper opset (issue 18) */
    if (imp_opset_unsupported(m))
        sb_printf(&sb, "unsupported opset: ai.onnx %lld (the importer supports 7 to %d)\n",
                  (long long)imp_opset_unsupported(m), IMP_OPSET_MAX);
    /* end helper opset */
    sb_printf(&sb, "unsupported operators: %u", n_unsup);
    for (size_t i = 0, k = 0; i < counts.len; i++)
        if (!counts.data[i].supported)
            sb_printf(&sb, "%s%s", k++ ? ", " : " (", counts.data[i].name);
    sb_puts(&sb, n_unsup ? ")\n" : "\n");
    vec_free(&counts);
    strmap_free(&index);
    vec_free(&stack);
    ox_model_free(m);
    *text = sb_take(&sb);
    return RLY_STATUS_OK;
}

/* ---- rly test ------------------------------------------------------------------------------ */

static int data_dtype(const OxTensor *t, rly_dtype model_dt);

/* A tensor value of a test input for parameter type ty (checked: dtype, rank, static dims). */
static Value *value_of(Ctx *ctx, const OxTensor *t, Type *ty, char *err, size_t cap) {
    TensorType *tt = ty && ty->kind == TYPE_TENSOR ? AS_TENSOR_TYPE(ty) : NULL;
    int dt = data_dtype(t, tt ? tt->dtype : RLY_DTYPE_F32);
    if (tt && dt >= 0) {
        bool ok = (int)tt->dtype == dt && tt->ndim == t->ndim;
        for (uint32_t i = 0; ok && i < t->ndim; i++)
            ok = tt->shape[i] < 0 || tt->shape[i] == t->dims[i];
        if (!ok) {
            StrBuf sb = {0};
            ir_print_type(ctx, ty, &sb);
            snprintf(err, cap, "a %s tensor of rank %u does not fit the model's %s",
                     ox_type_name(t->data_type), t->ndim, sb_cstr(&sb));
            sb_free(&sb);
            return NULL;
        }
    }
    if (dt < 0) {
        snprintf(err, cap, "data type %s is not supported", ox_type_name(t->data_type));
        return NULL;
    }
    RtTensor *r = rt_tensor_new((rly_dtype)dt, t->ndim, t->dims, err, cap);
    if (r == NULL) return NULL;
    if (t->nbytes) memcpy(rt_tensor_data(r), t->data, t->nbytes);
    return &r->hdr;
}

/* Tolerances per dtype: |got - want| <= atol + rtol * |want| (NaN equals NaN). */
static void tolerance(rly_dtype dt, double *rtol, double *atol) {
    switch (dt) {
    case RLY_DTYPE_F64: *rtol = 1e-7, *atol = 1e-9; break;
    case RLY_DTYPE_F32: *rtol = 1e-3, *atol = 1e-5; break;
    case RLY_DTYPE_F16:
    case RLY_DTYPE_BF16: *rtol = 1e-2, *atol = 1e-3; break;
    default: *rtol = 0, *atol = 0; break;
    }
}

/* The test data of onnx 1.12 stores bfloat16 tensors as UINT16 (numpy has no bfloat16): read
 * such a tensor as bfloat16 where the model has bfloat16. */
static int data_dtype(const OxTensor *t, rly_dtype model_dt) {
    if (t->data_type == OX_UINT16 && model_dt == RLY_DTYPE_BF16) return RLY_DTYPE_BF16;
    return ox_to_rly_dtype(t->data_type);
}

static bool compare(const RtTensor *got, const OxTensor *want, StrBuf *why) {
    int dt = data_dtype(want, rt_tensor_dtype(got));
    if (dt < 0 || (int)rt_tensor_dtype(got) != dt) {
        sb_printf(why, "dtype %s, expected %s", sup_dtype_name(rt_tensor_dtype(got)),
                  ox_type_name(want->data_type));
        return false;
    }
    bool shape_ok = (uint32_t)got->t.ndim == want->ndim;
    for (uint32_t i = 0; shape_ok && i < want->ndim; i++)
        shape_ok = got->shape[i] == want->dims[i];
    if (!shape_ok) {
        sb_puts(why, "shape (");
        for (int i = 0; i < got->t.ndim; i++)
            sb_printf(why, "%s%lld", i ? ", " : "", (long long)got->shape[i]);
        sb_puts(why, "), expected (");
        for (uint32_t i = 0; i < want->ndim; i++)
            sb_printf(why, "%s%lld", i ? ", " : "", (long long)want->dims[i]);
        sb_putc(why, ')');
        return false;
    }
    double rtol, atol;
    tolerance((rly_dtype)dt, &rtol, &atol);
    int64_t n = want->count, bad = 0, first = -1;
    double worst = 0;
    const void *g = rt_tensor_data(got);
    bool is_float = sup_dtype_is_float((rly_dtype)dt);
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        double a = 0, b = 0;
        if (is_float) {
            a = k_loadf(g, (rly_dtype)dt, i);
            b = k_loadf(want->data, (rly_dtype)dt, i);
            ok = (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= atol + rtol * fabs(b);
            if (!ok && !isnan(a) && !isnan(b) && fabs(a - b) > worst) worst = fabs(a - b);
        } else {
            size_t es = sup_dtype_size((rly_dtype)dt);
            ok = memcmp((const char *)g + i * es, (const char *)want->data + i * es, es) == 0;
            a = (double)k_loadi(g, (rly_dtype)dt, i);
            b = (double)k_loadi(want->data, (rly_dtype)dt, i);
        }
        if (!ok) {
            if (first < 0) {
                first = i;
                sb_printf(why, "element %lld is %.9g, expected %.9g", (long long)i, a, b);
            }
            bad++;
        }
    }
    if (bad) {
        sb_printf(why, " (%lld of %lld elements differ", (long long)bad, (long long)n);
        if (is_float) sb_printf(why, ", max abs diff %.3g; rtol %g atol %g", worst, rtol, atol);
        sb_putc(why, ')');
    }
    return bad == 0;
}

/* ---- sequences and optionals (List and Option values of the prelude's types) ------------------
 */

/* The argument of ty = NAME[arg] (NAME "List" or "Option"), NULL for other types. */
static Type *adt_arg(Type *ty, const char *name) {
    if (ty == NULL || ty->kind != TYPE_CALL) return NULL;
    TypeCall *c = AS_TYPE_CALL(ty);
    if (c->func->kind != TYPE_GLOBAL_VAR || c->n_args != 1 ||
        strcmp(AS_GLOBAL_TYPE_VAR(c->func)->name, name) != 0)
        return NULL;
    return c->args[0];
}

/* Which message a test-data file for a value of type ty holds. */
static OxValueKind data_kind(Type *ty) {
    if (adt_arg(ty, "List")) return OXV_SEQUENCE;
    if (adt_arg(ty, "Option")) return OXV_OPTIONAL;
    return OXV_TENSOR;
}

/* A constructor value; its handle is the executor's: the IR Constructor for the interpreter,
 * the executable's VmCtor (found by name) for the VM. An executable holds only the
 * constructors its code builds or matches, so one it lacks gets the module's tag (which the
 * compiler keeps) and no handle: the program never looks at it except through its tag. */
static Value *adt_value(Module *mod, const VmExec *exe, const char *ctor, uint32_t n,
                        Value **fields) {
    RtAdt *a = NULL;
    const VmCtor *vc = NULL;
    for (uint32_t i = 0; exe != NULL && i < exe->n_ctors && vc == NULL; i++)
        if (strcmp(exe->ctors[i].name, ctor) == 0) vc = &exe->ctors[i];
    if (vc != NULL) {
        a = rt_adt_new(vc->tag, vc, n);
    } else {
        Constructor *c = ir_module_lookup_ctor(mod, ctor, strlen(ctor));
        RLY_CHECK(c != NULL, "the module has no constructor %s", ctor);
        a = rt_adt_new(c->tag, exe ? NULL : c, n);
    }
    for (uint32_t i = 0; i < n; i++)
        a->f[i] = fields[i];
    return &a->hdr;
}

/* The value of a test input for parameter type ty: a tensor, or a List / Option of them. */
static Value *value_from(Ctx *ctx, Module *mod, const VmExec *exe, const OxValue *v, Type *ty,
                         char *err, size_t cap) {
    Type *elem = adt_arg(ty, "List"), *opt = adt_arg(ty, "Option");
    if (v->kind == OXV_TENSOR) return value_of(ctx, v->tensor, ty, err, cap);
    if (opt != NULL) {
        if (v->n == 0) return adt_value(mod, exe, "None", 0, NULL);
        Value *x = value_from(ctx, mod, exe, &v->items[0], opt, err, cap);
        return x ? adt_value(mod, exe, "Some", 1, &x) : NULL;
    }
    RLY_CHECK(elem != NULL && v->kind == OXV_SEQUENCE, "value_from: kinds disagree");
    Value *list = adt_value(mod, exe, "Nil", 0, NULL);
    for (uint32_t i = v->n; i-- > 0;) {
        char why[400];
        Value *x = NULL;
        if (v->items[i].kind != OXV_TENSOR && adt_arg(elem, "List") == NULL &&
            adt_arg(elem, "Option") == NULL)
            snprintf(why, sizeof why, "a sequence of %s, the model takes tensors",
                     v->items[i].kind == OXV_SEQUENCE ? "sequences" : "optionals");
        else
            x = value_from(ctx, mod, exe, &v->items[i], elem, why, sizeof why);
        if (x == NULL) {
            snprintf(err, cap, "element %u: %s", i, why);
            rt_release(list);
            return NULL;
        }
        Value *f[2] = {x, list};
        list = adt_value(mod, exe, "Cons", 2, f);
    }
    return list;
}

/* Compare a result value with the expected one (a tensor, sequence or optional, nested). */
static bool compare_value(const Value *got, const OxValue *want, StrBuf *why) {
    if (want->kind == OXV_TENSOR) {
        if (got->kind != VAL_TENSOR) {
            sb_puts(why, "not a tensor, expected one");
            return false;
        }
        return compare(RT_TENSOR(got), want->tensor, why);
    }
    if (got->kind != VAL_ADT) {
        sb_printf(why, "not a %s, expected one",
                  want->kind == OXV_SEQUENCE ? "sequence" : "optional");
        return false;
    }
    if (want->kind == OXV_OPTIONAL) {
        if (RT_ADT(got)->n != want->n) {
            sb_puts(why, want->n ? "an empty optional, expected a value"
                                 : "an optional with a value, expected an empty one");
            return false;
        }
        return want->n == 0 || compare_value(RT_ADT(got)->f[0], &want->items[0], why);
    }
    uint32_t n = 0; /* the list's length: Cons cells have two fields, Nil none */
    for (const Value *c = got; c->kind == VAL_ADT && RT_ADT(c)->n == 2; c = RT_ADT(c)->f[1])
        n++;
    if (n != want->n) {
        sb_printf(why, "sequence length %u, expected %u", n, want->n);
        return false;
    }
    const Value *c = got;
    for (uint32_t i = 0; i < n; i++, c = RT_ADT(c)->f[1]) {
        StrBuf w = {0};
        bool ok = compare_value(RT_ADT(c)->f[0], &want->items[i], &w);
        if (!ok) sb_printf(why, "element %u: %s", i, sb_cstr(&w));
        sb_free(&w);
        if (!ok) return false;
    }
    return true;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in dir starting with prefix (malloc'ed). */
static uint32_t list_dir(const char *dir, const char *prefix, char ***out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    uint32_t n = 0, cap = 0;
    char **names = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            names = sup_realloc(names, cap * sizeof *names);
        }
        size_t len = strlen(e->d_name);
        names[n] = sup_malloc(len + 1);
        memcpy(names[n++], e->d_name, len + 1);
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, name_cmp);
    *out = names;
    return n;
}

/* "input_10.pb" after "input_9.pb": numeric order of the index. */
static int pb_index(const char *name, const char *prefix) { return atoi(name + strlen(prefix)); }

static void free_names(char **names, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The messages of rendered diagnostics ("file:line:col: error: MSG" lines), joined by "; ". */
static void brief(const char *text, StrBuf *out) {
    bool first = true;
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *e = NULL;
        for (const char *q = p; q + 8 <= p + n; q++)
            if (memcmp(q, ": error: ", 9) == 0) {
                e = q + 9;
                break;
            }
        if (e) {
            if (!first) sb_puts(out, "; ");
            sb_putn(out, e, n - (size_t)(e - p));
            first = false;
        }
        p = nl ? nl + 1 : p + n;
    }
    if (first) sb_puts(out, text ? text : "");
}

/* Load the files named input_K.pb / output_K.pb of a data set (K < n) into vals[K], each as the
 * message its value's type (types[K], NULL: a tensor) calls for. False with the reason in why. */
static bool load_set_files(const char *set_dir, char **names, uint32_t n, const char *prefix,
                           Type *const *types, uint32_t n_types, OxValue **vals, Arena *arena,
                           StrBuf *why) {
    char err[512];
    for (uint32_t i = 0; i < n; i++) {
        StrBuf p_sb = {0};
        sb_printf(&p_sb, "%s/%s", set_dir, names[i]);
        const char *p = sb_cstr(&p_sb);
        int k = pb_index(names[i], prefix);
        bool ok = true;
        if (k < 0 || (uint32_t)k >= n) {
            sb_printf(why, "%s: unexpected file name", p);
            ok = false;
        } else {
            OxValueKind kind = (uint32_t)k < n_types ? data_kind(types[k]) : OXV_TENSOR;
            if ((vals[k] = ox_load_value_file(p, kind, arena, err, sizeof err)) == NULL) {
                sb_printf(why, "%s", err);
                ok = false;
            } else {
                emulate_value(vals[k], arena); /* float8 data: float32 values */
            }
        }
        sb_free(&p_sb);
        if (!ok) return false;
    }
    for (uint32_t k = 0; k < n; k++)
        if (vals[k] == NULL) { /* "input_0.pb" next to "input_00.pb" */
            sb_printf(why, "%s: no %s%u.pb among %u files", set_dir, prefix, k, n);
            return false;
        }
    return true;
}

/* Run one data set (on the VM when exe is given); false with the reason in why. The inputs of
 * skip_mask (bit k: input_k.pb) were bound at import (run_bound) and are not passed. */
static bool run_set(Ctx *ctx, Module *mod, const rly_executable *exe, const char *set_dir,
                    uint32_t skip_mask, StrBuf *why) {
    char **ins, **outs;
    uint32_t n_in = list_dir(set_dir, "input_", &ins), n_out = list_dir(set_dir, "output_", &outs);
    Arena arena;
    arena_init(&arena);
    char err[512];
    FuncDef *d = ir_module_lookup(mod, "main", 4);
    Function *f = d->func;
    Type **in_ty = sup_calloc(f->n_params + 1, sizeof *in_ty);
    for (uint32_t i = 0; i < f->n_params; i++)
        in_ty[i] = f->params[i]->base.checked_type;
    /* the outputs' types: main's result, a tuple when the model has several outputs */
    Type *ret = f->base.checked_type ? AS_FUNC_TYPE(f->base.checked_type)->ret : NULL;
    uint32_t n_ret = ret && ret->kind == TYPE_TUPLE ? AS_TUPLE_TYPE(ret)->n : 1;
    Type **out_ty = sup_calloc(n_ret + 1, sizeof *out_ty);
    for (uint32_t i = 0; i < n_ret; i++)
        out_ty[i] = ret && ret->kind == TYPE_TUPLE ? AS_TUPLE_TYPE(ret)->fields[i] : ret;
    OxValue **in_v = sup_calloc(n_in + 1, sizeof *in_v),
            **out_v = sup_calloc(n_out + 1, sizeof *out_v);
    /* file k's type: the next parameter's, unless the input was bound */
    Type **file_ty = sup_calloc(n_in + 1, sizeof *file_ty);
    uint32_t n_args = 0;
    for (uint32_t k = 0; k < n_in; k++)
        if (!(k < 32 && (skip_mask >> k & 1)))
            file_ty[k] = n_args < f->n_params ? in_ty[n_args] : NULL, n_args++;
    bool ok = load_set_files(set_dir, ins, n_in, "input_", file_ty, n_in, in_v, &arena, why) &&
              load_set_files(set_dir, outs, n_out, "output_", out_ty, n_ret, out_v, &arena, why);
    if (ok && n_args != f->n_params) {
        sb_printf(why, "the data set has %u inputs, the model takes %u", n_args, f->n_params);
        ok = false;
    }
    Value **args = sup_calloc(n_in + 1, sizeof *args);
    const VmExec *vx = exe ? exe->exe : NULL;
    for (uint32_t k = 0, i = 0; k < n_in && ok; k++) {
        if (k < 32 && (skip_mask >> k & 1)) continue;
        if ((args[i] = value_from(ctx, mod, vx, in_v[k], file_ty[k], err, sizeof err)) == NULL) {
            sb_printf(why, "input %u: %s", k, err);
            ok = false;
        }
        i++;
    }
    uint32_t n_files = n_in;
    n_in = n_args; /* from here: the arguments passed */
    if (ok && exe && vx->n_inputs != n_in) {
        sb_printf(why, "the executable takes %u inputs, the data set has %u", vx->n_inputs, n_in);
        ok = false;
    }
    if (ok) {
        Interp *it = NULL;
        rly_session *sess = NULL;
        Value *r = NULL;
        if (exe) { /* the VM: the session takes the inputs */
            if (rly_session_new(exe, NULL, &sess) == RLY_STATUS_OK) {
                for (uint32_t i = 0; i < n_in; i++) {
                    rt_session_set_value(sess, i, args[i]);
                    args[i] = NULL;
                }
                if (rly_session_run(sess) == RLY_STATUS_OK)
                    r = rt_retain((Value *)rt_session_result(sess));
            }
            if (r == NULL) {
                sb_puts(why, "runtime error: ");
                brief(rly_last_error(), why);
                ok = false;
            }
        } else {
            it = ev_new(mod);
            size_t mark = ctx->diags.items.len;
            r = ev_call_global(it, "main", n_in, args);
            if (r == NULL) {
                StrBuf msg = {0};
                diags_render(&ctx->diags, mark, &msg);
                sb_puts(why, "runtime error: ");
                brief(sb_cstr(&msg), why);
                sb_free(&msg);
                diags_clear(&ctx->diags);
                ok = false;
            }
        }
        if (r != NULL) {
            uint32_t n_res = n_ret > 1 && r->kind == VAL_TUPLE ? RT_TUPLE(r)->n : 1;
            if (n_res != n_out) {
                sb_printf(why, "%u outputs, the data set has %u", n_res, n_out);
                ok = false;
            }
            for (uint32_t k = 0; k < n_out && ok; k++) {
                Value *v = n_ret > 1 && r->kind == VAL_TUPLE ? RT_TUPLE(r)->f[k] : r;
                StrBuf w = {0};
                if (!compare_value(v, out_v[k], &w)) {
                    sb_printf(why, "output %u: %s", k, sb_cstr(&w));
                    ok = false;
                }
                sb_free(&w);
            }
            rt_release(r);
        }
        ev_free(it);
        rly_session_free(sess);
    }
    for (uint32_t i = 0; i < n_in; i++)
        if (args[i]) rt_release(args[i]);
    free(args);
    free(in_v);
    free(out_v);
    free(file_ty);
    free(in_ty);
    free(out_ty);
    arena_free(&arena);
    free_names(ins, n_files);
    free_names(outs, n_out);
    return ok;
}

/* Every test_data_set_* of a case (only the one named `only` when given); false with the first
 * failure's reason in why. */
static bool run_sets(rly_ctx *ctx, rly_module *mod, const rly_executable *exe, const char *dir,
                     const char *only, uint32_t skip_mask, StrBuf *why) {
    char **sets;
    uint32_t n_sets = list_dir(dir, "test_data_set_", &sets);
    bool ok = n_sets > 0;
    if (!ok) sb_puts(why, "no test_data_set_* folder");
    for (uint32_t s = 0; s < n_sets && ok; s++) {
        if (only && strcmp(sets[s], only) != 0) continue;
        StrBuf sd = {0}, w = {0};
        sb_printf(&sd, "%s/%s", dir, sets[s]);
        if (!run_set((Ctx *)ctx, (Module *)mod, exe, sb_cstr(&sd), skip_mask, &w)) {
            sb_printf(why, "%s: %s", sets[s], sb_cstr(&w));
            ok = false;
        }
        sb_free(&w);
        sb_free(&sd);
    }
    free_names(sets, n_sets);
    return ok;
}

static rly_status run_sets_checked(rly_ctx *ctx, rly_module *mod, const rly_executable *exe,
                                   const char *dir, const char *only, uint32_t skip_mask,
                                   StrBuf *why, int *passed) {
    RLY_TRY;
    *passed = run_sets(ctx, mod, exe, dir, only, skip_mask, why);
    RLY_END_TRY;
    return RLY_STATUS_OK;
}

/* The first tensor of a test value (inside sequences and optionals), NULL when there is none. */
static const OxTensor *first_tensor(const OxValue *v) {
    if (v->kind == OXV_TENSOR) return v->tensor;
    for (uint32_t i = 0; i < v->n; i++) {
        const OxTensor *t = first_tensor(&v->items[i]);
        if (t) return t;
    }
    return NULL;
}

/* Whether graph input `name` is also an initializer (a default, not fed by the test data). */
static bool is_initializer(const OxGraph *g, const char *name) {
    for (uint32_t j = 0; j < g->n_inits; j++)
        if (strcmp(g->inits[j].name, name) == 0) return true;
    return false;
}

/* Rank hints for the sequence and optional inputs whose element tensors have no shape in the
 * model (the importer could not know their rank otherwise; test_identity_sequence): the rank of
 * the first tensor of test_data_set_0's input, as an ImpShape of `?` dims. Returns the count. */
static uint32_t data_hints(const OxModel *m, const char *dir, ImpShape *out, uint32_t cap) {
    const OxGraph *g = m->graph;
    uint32_t n = 0, k = 0;
    for (uint32_t i = 0; i < g->n_inputs; i++) {
        const OxValueInfo *vi = &g->inputs[i];
        if (is_initializer(g, vi->name)) continue;
        uint32_t index = k++;
        const OxType *t = &vi->type;
        if (t->kind != OXT_SEQUENCE && t->kind != OXT_OPTIONAL) continue;
        while ((t->kind == OXT_SEQUENCE || t->kind == OXT_OPTIONAL) && t->elem)
            t = t->elem;
        if (t->kind != OXT_TENSOR || t->ndim >= 0 || n == cap) continue;
        StrBuf p = {0};
        sb_printf(&p, "%s/test_data_set_0/input_%u.pb", dir, index);
        Arena a;
        arena_init(&a);
        char err[512];
        OxValue *v = ox_load_value_file(sb_cstr(&p),
                                        vi->type.kind == OXT_SEQUENCE ? OXV_SEQUENCE : OXV_OPTIONAL,
                                        &a, err, sizeof err);
        const OxTensor *ft = v ? first_tensor(v) : NULL;
        if (ft && ft->ndim <= 32) {
            ImpShape *sh = &out[n++];
            sh->name = vi->name;
            sh->ndim = ft->ndim;
            for (uint32_t d = 0; d < ft->ndim; d++)
                sh->dims[d] = -1;
        }
        arena_free(&a);
        sb_free(&p);
    }
    return n;
}

/* Save *exe to a temporary .rlyx file and replace it with the executable loaded from it. */
static bool round_trip(rly_executable **exe, StrBuf *why) {
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/rly_case_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        sb_printf(why, "save: cannot make a temporary file in %s", tmp && tmp[0] ? tmp : "/tmp");
        return false;
    }
    close(fd);
    rly_executable *back = NULL;
    bool ok = rly_executable_save(*exe, path) == RLY_STATUS_OK;
    if (!ok) sb_puts(why, "save: ");
    if (ok && !(ok = rly_executable_load(path, &back) == RLY_STATUS_OK)) sb_puts(why, "load: ");
    if (!ok) brief(rly_last_error(), why);
    unlink(path);
    if (!ok) return false;
    rly_executable_free(*exe);
    *exe = back;
    return true;
}

/* Optimize mod (opt_level), compile it for the VM engines, and run the data sets of dir (only
 * `only` when given, without the inputs of skip_mask); *passed and why say how it went. */
static rly_status run_module(rly_ctx *ctx, rly_module *mod, int opt_level, rly_engine engine,
                             const char *dir, const char *only, uint32_t skip_mask, StrBuf *why,
                             int *passed) {
    rly_status st = RLY_STATUS_OK;
    if (opt_level > 0 && rly_module_optimize(mod, &(rly_opt_options){.opt_level = opt_level},
                                             NULL) != RLY_STATUS_OK) {
        sb_printf(why, "optimize (-O%d): ", opt_level);
        brief(rly_last_error(), why);
    } else if (engine == RLY_ENGINE_VM || engine == RLY_ENGINE_RLYX) {
        rly_executable *exe = NULL;
        if (rly_module_compile(mod, 0, NULL, &exe) != RLY_STATUS_OK) {
            sb_puts(why, "compile: ");
            brief(rly_last_error(), why);
        } else if (engine == RLY_ENGINE_RLYX && !round_trip(&exe, why)) {
            /* why says what failed */
        } else {
            st = run_sets_checked(ctx, mod, exe, dir, only, skip_mask, why, passed);
        }
        rly_executable_free(exe);
    } else {
        st = run_sets_checked(ctx, mod, NULL, dir, only, skip_mask, why, passed);
    }
    return st;
}

/* The graph inputs (not initializers) of integer tensor type, as bits of their data-file index
 * (the first 32). */
static uint32_t int_inputs(const OxModel *m) {
    const OxGraph *g = m->graph;
    uint32_t mask = 0, k = 0;
    for (uint32_t i = 0; i < g->n_inputs; i++) {
        const OxValueInfo *vi = &g->inputs[i];
        if (is_initializer(g, vi->name)) continue;
        int32_t t = vi->type.elem_type;
        if (k < 32 && vi->type.kind == OXT_TENSOR && (t == OX_INT64 || t == OX_INT32))
            mask |= 1u << k;
        k++;
    }
    return mask;
}

/* A model whose import needs the value of a graph input that the test feeds (Col2Im's
 * image_shape and block_shape, AffineGrid's size, which exporters write as constants): each
 * data set imported again with its integer inputs (mask) bound as constants, and run with the
 * others. False with the reason in why when an import or a set fails. */
static rly_status run_bound(OxModel *m, const char *dir, const ImpShape *hints, uint32_t n_hints,
                            uint32_t mask, int opt_level, rly_engine engine, StrBuf *why,
                            int *passed) {
    const OxGraph *g = m->graph;
    const char *names[32];
    uint32_t n_names = 0;
    for (uint32_t i = 0, k = 0; i < g->n_inputs && k < 32; i++) {
        bool init = false;
        for (uint32_t j = 0; j < g->n_inits && !init; j++)
            init = strcmp(g->inits[j].name, g->inputs[i].name) == 0;
        if (init) continue;
        if (mask >> k & 1) names[n_names++] = g->inputs[i].name;
        k++;
    }
    char **sets;
    uint32_t n_sets = list_dir(dir, "test_data_set_", &sets);
    rly_status st = RLY_STATUS_OK;
    *passed = n_sets > 0;
    for (uint32_t s = 0; s < n_sets && *passed && st == RLY_STATUS_OK; s++) {
        Arena a;
        arena_init(&a);
        const OxTensor *vals[32];
        uint32_t n_vals = 0;
        char err[512];
        for (uint32_t k = 0; k < 32 && *passed; k++) {
            if (!(mask >> k & 1)) continue;
            StrBuf p = {0};
            sb_printf(&p, "%s/%s/input_%u.pb", dir, sets[s], k);
            OxValue *v = ox_load_value_file(sb_cstr(&p), OXV_TENSOR, &a, err, sizeof err);
            sb_free(&p);
            if (v == NULL) {
                sb_printf(why, "%s", err);
                *passed = 0;
            } else {
                vals[n_vals++] = v->tensor;
            }
        }
        rly_ctx *ctx = NULL;
        rly_module *mod = NULL;
        if (*passed && (st = rly_ctx_new(&ctx)) == RLY_STATUS_OK) {
            ImpOptions o = {.shapes = hints,
                            .n_shapes = n_hints,
                            .bind_names = names,
                            .bind_vals = vals,
                            .n_binds = n_vals};
            if (import_with(ctx, m, &o, &mod) != RLY_STATUS_OK) {
                sb_printf(why, "import (%s's integer inputs bound): ", sets[s]);
                brief(rly_last_error(), why);
                *passed = 0;
            } else {
                int ok = 0;
                st = run_module(ctx, mod, opt_level, engine, dir, sets[s], mask, why, &ok);
                *passed = ok;
            }
        }
        rly_ctx_free(ctx);
        arena_free(&a);
    }
    free_names(sets, n_sets);
    return st;
}

rly_status rly_onnx_test_case(const char *dir, int opt_level, rly_engine engine, int *passed,
                              char **report) {
    if (dir == NULL || passed == NULL || report == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_onnx_test_case: NULL argument");
    *passed = 0;
    *report = NULL;
    if (engine == RLY_ENGINE_DEFAULT) engine = API_DEFAULT_ENGINE;
    if (engine != RLY_ENGINE_VM && engine != RLY_ENGINE_INTERP && engine != RLY_ENGINE_RLYX)
        return api_fail(RLY_STATUS_INVALID, "rly_onnx_test_case: engine %d is none of rly_engine",
                        (int)engine);
    StrBuf why = {0};
    StrBuf path_sb = {0};
    sb_printf(&path_sb, "%s/model.onnx", dir);
    const char *path = sb_cstr(&path_sb);
    rly_ctx *ctx;
    rly_status st = rly_ctx_new(&ctx);
    if (st != RLY_STATUS_OK) return st;
    rly_module *mod = NULL;
    char err[512];
    OxModel *m = ox_load_file(path, err, sizeof err);
    if (m == NULL) {
        sb_printf(&why, "import: %s", err);
    } else {
        ImpShape hints[64];
        uint32_t n_hints = data_hints(m, dir, hints, 64);
        ir_ctx_keep(ctx, m, free_model);
        uint32_t mask;
        if (import_checked(ctx, m, hints, n_hints, false, &mod) != RLY_STATUS_OK) {
            sb_puts(&why, "import: ");
            brief(rly_last_error(), &why);
            if ((mask = int_inputs(m)) != 0) { /* again, with the integer inputs bound */
                StrBuf w = {0};
                st = run_bound(m, dir, hints, n_hints, mask, opt_level, engine, &w, passed);
                if (*passed && why.data) /* the import error no longer applies */
                    why.len = 0, why.data[0] = '\0';
                if (!*passed) sb_printf(&why, "; then %s", sb_cstr(&w));
                sb_free(&w);
            }
        } else {
            st = run_module(ctx, mod, opt_level, engine, dir, NULL, 0, &why, passed);
        }
    }
    rly_ctx_free(ctx);
    sb_free(&path_sb);
    *report = sb_take(&why);
    return st;
}
