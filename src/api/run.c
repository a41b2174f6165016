/* run.c - rly_module_run: check a module, bind its entry's parameters to inputs (files or
 * generated), run the reference interpreter, and write or render the result. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "eval/eval.h"
#include "passes/passes.h"
#include "runtime/npy.h"
#include "types/types.h"

typedef struct Binder {
    Ctx *ctx;
    int64_t sym[64]; /* symbolic dims seen, and the sizes they were given */
    int64_t val[64];
    uint32_t n_sym;
    uint64_t rng;
} Binder;

/* The ONNX names of f's parameters, when the ONNX importer recorded them (attribute
 * onnx_input_names: one string per parameter, present when some Relay name differs from its
 * ONNX name); NULL otherwise. */
static const AttrValue *onnx_names(const Function *f) {
    const AttrValue *a = f->attrs ? ir_attrs_get(f->attrs, "onnx_input_names") : NULL;
    if (a == NULL || a->kind != ATTR_LIST || a->list.n != f->n_params) return NULL;
    for (uint32_t i = 0; i < a->list.n; i++)
        if (a->list.items[i]->kind != ATTR_STR) return NULL;
    return a;
}

/* How well a given input name denotes parameter p of f: 2 when it is the parameter's name or
 * the ONNX name the importer recorded for it (the importer keeps both injective, so an exact
 * name never denotes two parameters); 1 when f records no ONNX names and the name equals the
 * parameter's after the importer's old renaming (characters outside [A-Za-z0-9_] become '_',
 * a 'v' prefix when the name does not start with a letter or '_'), for modules imported before
 * the names were recorded; 0 otherwise. */
static int name_match(const Function *f, uint32_t p, const char *given) {
    const char *param = f->params[p]->name;
    if (strcmp(param, given) == 0) return 2;
    const AttrValue *names = onnx_names(f);
    if (names != NULL) return strcmp(names->list.items[p]->s, given) == 0 ? 2 : 0;
    const char *q = param, *g = given;
    bool letter = (*g >= 'a' && *g <= 'z') || (*g >= 'A' && *g <= 'Z') || *g == '_';
    if (!letter) {
        if (*q != 'v') return 0;
        q++;
    }
    for (; *g; g++, q++) {
        char c = *g;
        bool ok =
            c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (*q != (ok ? c : '_')) return 0;
    }
    return *q == '\0';
}

/* The index of the given name (of n) that best denotes parameter p of f (an exact name before
 * a renamed one; the last of equals), or -1. */
static long best_name(const Function *f, uint32_t p, const char *const *names, size_t n) {
    long best = -1;
    int best_m = 0;
    for (size_t i = 0; i < n; i++) {
        int m = name_match(f, p, names[i]);
        if (m > 0 && m >= best_m) best = (long)i, best_m = m;
    }
    return best;
}

static const char *type_text(Ctx *ctx, Type *t, StrBuf *sb) {
    sb->len = 0;
    ir_print_type(ctx, t, sb);
    return sb_cstr(sb);
}

/* "x: Tensor[(2, 3), float32], y: ..." for messages. */
static void describe_params(Ctx *ctx, const Function *f, StrBuf *out) {
    StrBuf t = {0};
    const AttrValue *names = onnx_names(f);
    for (uint32_t i = 0; i < f->n_params; i++) {
        Var *p = f->params[i];
        sb_printf(out, "%s%s", i ? ", " : "", p->name);
        if (names && strcmp(names->list.items[i]->s, p->name) != 0)
            sb_printf(out, " (ONNX '%s')", names->list.items[i]->s);
        sb_printf(out, ": %s",
                  type_text(ctx, p->base.checked_type ? p->base.checked_type : p->ann, &t));
    }
    sb_free(&t);
}

/* Does array a fit tensor type tt? Symbolic dims must agree across all inputs. */
static bool fits(Binder *b, const TensorType *tt, const NpyArray *a, StrBuf *why) {
    if (a->dtype != tt->dtype) {
        sb_printf(why, "dtype %s, expected %s", sup_dtype_name(a->dtype),
                  sup_dtype_name(tt->dtype));
        return false;
    }
    if (a->ndim != tt->ndim) {
        sb_printf(why, "rank %u, expected %u", a->ndim, tt->ndim);
        return false;
    }
    for (uint32_t d = 0; d < tt->ndim; d++) {
        int64_t want = tt->shape[d], got = a->shape[d];
        if (want >= 0 && want != got) {
            sb_printf(why, "dimension %u is %lld, expected %lld", d, (long long)got,
                      (long long)want);
            return false;
        }
        if (dim_is_sym(want)) {
            uint32_t k = 0;
            while (k < b->n_sym && b->sym[k] != want)
                k++;
            if (k < b->n_sym && b->val[k] != got) {
                sb_printf(why, "dimension %u is %lld but %s is %lld in an earlier input", d,
                          (long long)got, ir_dim_sym_name(b->ctx, want), (long long)b->val[k]);
                return false;
            }
            if (k == b->n_sym && k < 64) {
                b->sym[k] = want;
                b->val[k] = got;
                b->n_sym++;
            }
        }
    }
    return true;
}

static uint64_t next_rand(Binder *b) {
    b->rng ^= b->rng << 13;
    b->rng ^= b->rng >> 7;
    b->rng ^= b->rng << 17;
    return b->rng;
}

/* Generated inputs and written outputs are bounded: a tuple type (or value) is a DAG whose tree
 * can be exponentially larger, and it may nest deeply. */
enum { FILL_MAX_TENSORS = 1000000, FILL_MAX_DEPTH = 1000 };

typedef struct FillSize {
    PtrMap tensors, depth; /* per tuple-type node: tensors in a value of it, nesting (+1 each) */
} FillSize;

static void fill_size_post(void *st, Type *t) {
    FillSize *fs = st;
    if (t->kind != TYPE_TUPLE) return;
    uint64_t n = 0, d = 0;
    TupleType *tt = AS_TUPLE_TYPE(t);
    for (uint32_t i = 0; i < tt->n; i++) {
        Type *f = tt->fields[i];
        uint64_t fn = f->kind == TYPE_TUPLE ? (uintptr_t)ptrmap_get(&fs->tensors, f) - 1 : 1;
        uint64_t fd = f->kind == TYPE_TUPLE ? (uintptr_t)ptrmap_get(&fs->depth, f) - 1 : 0;
        n = n + fn > FILL_MAX_TENSORS ? FILL_MAX_TENSORS + 1 : n + fn;
        d = fd > d ? fd : d;
    }
    ptrmap_put(&fs->tensors, t, (void *)(uintptr_t)(n + 1));
    ptrmap_put(&fs->depth, t, (void *)(uintptr_t)(d + 2));
}

static bool fill_pre(void *st, Type *t) { return (void)st, t->kind == TYPE_TUPLE; }

/* Whether a value of type t is small enough to generate; the reason in why otherwise. */
static bool fill_fits(Type *t, StrBuf *why) {
    if (t == NULL || t->kind != TYPE_TUPLE) return true;
    FillSize fs = {0};
    PtrMap seen = {0};
    ir_type_visit(t, &seen, fill_pre, fill_size_post, &fs);
    uint64_t n = (uintptr_t)ptrmap_get(&fs.tensors, t) - 1,
             d = (uintptr_t)ptrmap_get(&fs.depth, t) - 1;
    ptrmap_free(&seen);
    ptrmap_free(&fs.tensors);
    ptrmap_free(&fs.depth);
    if (n > FILL_MAX_TENSORS)
        sb_printf(why, "a value of this type holds more than %d tensors", FILL_MAX_TENSORS);
    else if (d > FILL_MAX_DEPTH)
        sb_printf(why, "its tuples nest %llu deep (at most %d)", (unsigned long long)d,
                  FILL_MAX_DEPTH);
    return n <= FILL_MAX_TENSORS && d <= FILL_MAX_DEPTH;
}

/* A generated value of type t (tensors and tuples of them); NULL with a message otherwise.
 * Recursive over tuple nesting, which fill_fits bounds. */
static Value *fill_value(Binder *b, Type *t, rly_fill fill, StrBuf *why) {
    if (t != NULL && t->kind == TYPE_TUPLE) {
        TupleType *tt = AS_TUPLE_TYPE(t);
        RtTuple *tu = rt_tuple_new(tt->n);
        for (uint32_t i = 0; i < tt->n; i++) {
            tu->f[i] = fill_value(b, tt->fields[i], fill, why);
            if (tu->f[i] == NULL) {
                rt_release(&tu->hdr);
                return NULL;
            }
        }
        return &tu->hdr;
    }
    if (t == NULL || t->kind != TYPE_TENSOR) {
        sb_puts(why, "only tensors and tuples of tensors can be generated");
        return NULL;
    }
    TensorType *tt = AS_TENSOR_TYPE(t);
    int64_t shape[K_MAX_DIMS];
    if (tt->ndim > K_MAX_DIMS) {
        sb_puts(why, "rank too large");
        return NULL;
    }
    for (uint32_t d = 0; d < tt->ndim; d++) {
        shape[d] = tt->shape[d];
        if (dim_is_sym(shape[d]))
            for (uint32_t k = 0; k < b->n_sym; k++)
                if (b->sym[k] == tt->shape[d]) shape[d] = b->val[k];
        if (shape[d] < 0) {
            sb_puts(why, "its shape has unknown dimensions: give it as an input");
            return NULL;
        }
    }
    char err[256];
    RtTensor *v = rt_tensor_new(tt->dtype, tt->ndim, shape, err, sizeof err);
    if (v == NULL) {
        sb_puts(why, err);
        return NULL;
    }
    int64_t n = k_numel(&v->t);
    void *p = rt_tensor_data(v);
    for (int64_t i = 0; i < n; i++) {
        if (fill == RLY_FILL_ONES)
            k_storei(p, tt->dtype, i, 1);
        else if (fill == RLY_FILL_RANDOM) {
            uint64_t r = next_rand(b);
            if (sup_dtype_is_float(tt->dtype))
                k_storef(p, tt->dtype, i, (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            else if (tt->dtype == RLY_DTYPE_BOOL)
                k_storei(p, tt->dtype, i, (int64_t)(r >> 63));
            else
                k_storei(p, tt->dtype, i, (int64_t)(r % 10));
        }
    }
    return &v->hdr;
}

/* Append the tensors of v depth-first to out (borrowed pointers). */
static bool flatten(const Value *v, PtrVec *out, StrBuf *why) {
    PtrVec st = {0};
    vec_push(&st, (void *)v);
    bool ok = true;
    while (st.len > 0 && ok) {
        const Value *x = vec_pop(&st);
        if (out->len > FILL_MAX_TENSORS) { /* a value with shared parts flattens as a tree */
            sb_printf(why, "the result holds more than %d tensors", FILL_MAX_TENSORS);
            ok = false;
            break;
        }
        switch (x->kind) {
        case VAL_TENSOR: vec_push(out, (void *)x); break;
        case VAL_TUPLE:
            for (uint32_t i = RT_TUPLE(x)->n; i-- > 0;)
                vec_push(&st, RT_TUPLE(x)->f[i]);
            break;
        case VAL_ADT:
            for (uint32_t i = RT_ADT(x)->n; i-- > 0;)
                vec_push(&st, RT_ADT(x)->f[i]);
            break;
        case VAL_REF: vec_push(&st, RT_REF(x)->v); break;
        default:
            sb_puts(why, "the result holds a function, which cannot be written to .npz");
            ok = false;
        }
    }
    vec_free(&st);
    return ok;
}

static rly_status write_outputs(const Value *v, const char *path) {
    PtrVec ts = {0};
    StrBuf why = {0};
    rly_status st = RLY_STATUS_OK;
    if (!flatten(v, &ts, &why)) {
        st = api_fail(RLY_STATUS_ERROR, "%s: %s", path, sb_cstr(&why));
        goto out;
    }
    Npz z = {0};
    z.n = ts.len;
    z.items = sup_calloc(ts.len ? ts.len : 1, sizeof *z.items);
    char names[64];
    for (size_t i = 0; i < ts.len; i++) {
        const RtTensor *t = ts.data[i];
        snprintf(names, sizeof names, "output_%zu", i);
        z.items[i].name = strdup(names);
        NpyArray *a = &z.items[i].arr;
        a->dtype = rt_tensor_dtype(t);
        a->ndim = (uint32_t)t->t.ndim;
        for (uint32_t d = 0; d < a->ndim; d++)
            a->shape[d] = t->shape[d];
        a->data = rt_tensor_data(t);
        a->nbytes = (size_t)k_numel(&t->t) * sup_dtype_size(a->dtype);
    }
    char err[512];
    if (!rt_npz_save(path, &z, false, err, sizeof err)) st = api_fail(RLY_STATUS_IO, "%s", err);
    for (size_t i = 0; i < z.n; i++)
        free(z.items[i].name);
    free(z.items);
out:
    vec_free(&ts);
    sb_free(&why);
    return st;
}

/* Bind every parameter of f: the owned values into args[]. */
static rly_status bind_inputs(Ctx *ctx, const Function *f, const char *entry,
                              const rly_run_options *o, Value **args) {
    Binder b = {.ctx = ctx,
                .rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)o->seed * 0x2545F4914F6CDD1Dull};
    if (b.rng == 0) b.rng = 1;
    NpzReader *zr = NULL, *single = NULL; /* nothing is decoded until a parameter wants it */
    size_t zn = 0;
    char err[512];
    StrBuf why = {0}, expect = {0}, ty = {0};
    rly_status st = RLY_STATUS_OK;
    describe_params(ctx, f, &expect);
    if (o->inputs_npz && !rt_npz_open(o->inputs_npz, false, &zr, err, sizeof err)) {
        st = api_fail(RLY_STATUS_IO, "%s", err);
        goto out;
    }
    zn = zr ? rt_npz_count(zr) : 0;
    /* Every given name must be a parameter. */
    for (size_t i = 0; i < zn + (size_t)o->n_inputs; i++) {
        const char *nm = i < zn ? rt_npz_name(zr, i) : o->input_names[i - zn];
        uint32_t p = 0;
        while (p < f->n_params && !name_match(f, p, nm))
            p++;
        if (p == f->n_params) {
            st = api_fail(RLY_STATUS_ERROR, "input '%s' is not a parameter of @%s; it expects %s",
                          nm, entry, f->n_params ? sb_cstr(&expect) : "no inputs");
            goto out;
        }
    }
    for (uint32_t p = 0; p < f->n_params; p++) {
        Var *v = f->params[p];
        Type *t = v->base.checked_type;
        NpzReader *src = NULL; /* the file holding this parameter's array, and its member */
        size_t member = 0;
        long gi = best_name(f, p, o->input_names, (size_t)o->n_inputs);
        if (gi >= 0) {
            if (!rt_npz_open(o->input_paths[gi], true, &single, err, sizeof err)) {
                st = api_fail(RLY_STATUS_IO, "input %s: %s", v->name, err);
                goto out;
            }
            src = single;
        }
        for (size_t i = 0; i < zn && src == NULL; i++) /* an exact name first */
            if (name_match(f, p, rt_npz_name(zr, i)) == 2) src = zr, member = i;
        for (size_t i = 0; i < zn && src == NULL; i++)
            if (name_match(f, p, rt_npz_name(zr, i))) src = zr, member = i;
        if (src != NULL) {
            NpyArray hdr;
            RtTensor *tensor = NULL;
            why.len = 0;
            if (!rt_npz_header(src, member, &hdr, err, sizeof err)) {
                st = api_fail(RLY_STATUS_IO, "input %s: %s", v->name, err);
            } else if (t == NULL || t->kind != TYPE_TENSOR) {
                st = api_fail(RLY_STATUS_ERROR,
                              "input %s: the parameter has type %s, which a .npy array cannot "
                              "give; @%s expects %s",
                              v->name, type_text(ctx, t, &ty), entry, sb_cstr(&expect));
            } else if (!fits(&b, AS_TENSOR_TYPE(t), &hdr, &why)) {
                st = api_fail(RLY_STATUS_ERROR, "input %s: %s; @%s expects %s", v->name,
                              sb_cstr(&why), entry, sb_cstr(&expect));
            } else if ((tensor = rt_tensor_new(hdr.dtype, hdr.ndim, hdr.shape, err, sizeof err)) ==
                       NULL) {
                st = api_fail(RLY_STATUS_ERROR, "input %s: %s", v->name, err);
            } else if (!rt_npz_read(src, member, rt_tensor_data(tensor), hdr.nbytes, err,
                                    sizeof err)) {
                st = api_fail(RLY_STATUS_IO, "input %s: %s", v->name, err);
                rt_release(&tensor->hdr);
            } else {
                args[p] = &tensor->hdr;
            }
            rt_npz_close(single);
            single = NULL;
            if (st != RLY_STATUS_OK) goto out;
        }
    }
    for (uint32_t p = 0; p < f->n_params; p++) {
        if (args[p] != NULL) continue;
        Var *v = f->params[p];
        if (o->fill == RLY_FILL_NONE) {
            st = api_fail(RLY_STATUS_ERROR, "missing input %s; @%s expects %s", v->name, entry,
                          sb_cstr(&expect));
            goto out;
        }
        why.len = 0;
        args[p] = fill_fits(v->base.checked_type, &why)
                      ? fill_value(&b, v->base.checked_type, o->fill, &why)
                      : NULL;
        if (args[p] == NULL) {
            st = api_fail(RLY_STATUS_ERROR, "cannot generate input %s of type %s: %s", v->name,
                          type_text(ctx, v->base.checked_type, &ty), sb_cstr(&why));
            goto out;
        }
    }
out:
    rt_npz_close(zr);
    rt_npz_close(single);
    sb_free(&why);
    sb_free(&expect);
    sb_free(&ty);
    return st;
}

RLY_API rly_status rly_module_run(rly_module *mod, const rly_run_options *opts, char **text) {
    if (mod == NULL || opts == NULL || (opts->output_npz == NULL && text == NULL))
        return api_fail(RLY_STATUS_INVALID, "rly_module_run: NULL argument");
    if (text) *text = NULL;
    Ctx *ctx = mod->ctx;
    Interp *it = NULL;
    Value **args = NULL;
    uint32_t n_args = 0;
    Value *result = NULL;
    rly_status st = RLY_STATUS_OK;
    RLY_TRY;
    if (opts->opt_level < 0 || opts->opt_level > 3) {
        st = api_fail(RLY_STATUS_INVALID, "opt level %d is not 0..3", opts->opt_level);
        goto out;
    }
    PassOptions po = {.opt_level = opts->opt_level};
    if (!ir_well_formed(mod) ||
        !(opts->opt_level > 0 ? pass_run(mod, &po)
                              : pass_module_typed(mod) || ty_infer_module(mod))) {
        st = api_fail_diags(ctx);
        goto out;
    }
    it = ev_new(mod);
    RtLimits lim = rt_limits_default();
    if (opts->max_memory != 0)
        lim.max_memory = opts->max_memory == RLY_NO_LIMIT ? 0 : opts->max_memory;
    if (opts->max_depth != 0) lim.max_depth = opts->max_depth == RLY_NO_LIMIT ? 0 : opts->max_depth;
    lim.timeout = opts->timeout > 0 ? opts->timeout : 0;
    ev_set_limits(it, &lim);
    if (mod->is_expr) {
        result = ev_eval_module_expr(it);
    } else {
        const char *entry = opts->entry ? opts->entry : "main";
        FuncDef *d = ir_module_lookup(mod, entry, strlen(entry));
        if (d == NULL || d->func == NULL) {
            StrBuf names = {0};
            for (size_t i = 0; i < mod->funcs.len; i++)
                sb_printf(&names, "%s@%s", i ? ", " : "", mod->funcs.data[i].gvar->name);
            st = api_fail(RLY_STATUS_ERROR, "no function @%s to run; the module defines %s", entry,
                          names.len ? sb_cstr(&names) : "no functions");
            sb_free(&names);
            goto out;
        }
        n_args = d->func->n_params;
        args = sup_calloc(n_args ? n_args : 1, sizeof *args);
        RtMemAccount *prev = rt_mem_swap(ev_account(it)); /* inputs count against the limit */
        st = bind_inputs(ctx, d->func, entry, opts, args);
        rt_mem_swap(prev);
        if (st != RLY_STATUS_OK) goto out;
        result = ev_call_global(it, entry, n_args, args);
    }
    if (result == NULL) {
        st = api_fail_diags(ctx);
        goto out;
    }
    if (opts->output_npz) {
        st = write_outputs(result, opts->output_npz);
    } else {
        StrBuf sb = {0};
        ev_print_value(result, opts->max_print > 0 ? (size_t)opts->max_print : 1000, &sb);
        sb_putc(&sb, '\n');
        *text = strdup(sb_cstr(&sb));
        sb_free(&sb);
    }
out:
    RLY_END_TRY;
    rt_release(result);
    for (uint32_t i = 0; args && i < n_args; i++)
        rt_release(args[i]);
    free(args);
    ev_free(it);
    return st;
}
