/* run.c - running programs from the public API: rly_module_run checks a module, binds its
 * entry's parameters to inputs (files or generated), runs the reference interpreter or the VM
 * (compiled in memory), and writes or renders the result; rly_executable_run and
 * rly_session_bind_inputs do the same for a compiled executable, whose inputs are described by
 * the executable (names, tensor types) instead of the IR. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "backend/backend.h"
#include "eval/eval.h"
#include "frontend/text/text.h"
#include "passes/passes.h"
#include "runtime/npy.h"
#include "runtime/probe.h" /* diag */
#include "runtime/session.h"
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

/* A generated tensor of dtype dt and shape [ndim] (symbolic dims take the sizes earlier inputs
 * gave them; `?` is an error); NULL with a message. */
static Value *fill_tensor(Binder *b, rly_dtype dt, uint32_t ndim, const int64_t *dims,
                          rly_fill fill, StrBuf *why) {
    int64_t shape[K_MAX_DIMS];
    if (ndim > K_MAX_DIMS) {
        sb_puts(why, "rank too large");
        return NULL;
    }
    for (uint32_t d = 0; d < ndim; d++) {
        shape[d] = dims[d];
        if (dim_is_sym(shape[d]))
            for (uint32_t k = 0; k < b->n_sym; k++)
                if (b->sym[k] == dims[d]) shape[d] = b->val[k];
        if (shape[d] < 0) {
            sb_puts(why, "its shape has unknown dimensions: give it as an input");
            return NULL;
        }
    }
    char err[256];
    RtTensor *v = rt_tensor_new(dt, ndim, shape, err, sizeof err);
    if (v == NULL) {
        sb_puts(why, err);
        return NULL;
    }
    int64_t n = k_numel(&v->t);
    void *p = rt_tensor_data(v);
    for (int64_t i = 0; i < n; i++) {
        if (fill == RLY_FILL_ONES)
            k_storei(p, dt, i, 1);
        else if (fill == RLY_FILL_RANDOM) {
            uint64_t r = next_rand(b);
            if (sup_dtype_is_float(dt))
                k_storef(p, dt, i, (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            else if (dt == RLY_DTYPE_BOOL)
                k_storei(p, dt, i, (int64_t)(r >> 63));
            else
                k_storei(p, dt, i, (int64_t)(r % 10));
        }
    }
    return &v->hdr;
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
    return fill_tensor(b, tt->dtype, tt->ndim, tt->shape, fill, why);
}

/* ---- the parameters being bound: an IR function's, or an executable's inputs ----------------- */

typedef struct Params {
    Ctx *ctx;          /* IR: the entry's context; NULL for an executable */
    const Function *f; /* IR: the entry function; NULL for an executable */
    const VmExec *exe; /* an executable; NULL for IR */
    const char *entry; /* the entry's name, for messages ("@main expects ...") */
    uint32_t n;
} Params;

static Params ir_params(Ctx *ctx, const Function *f, const char *entry) {
    return (Params){.ctx = ctx, .f = f, .entry = entry, .n = f->n_params};
}

static Params exe_params(const VmExec *exe) {
    const char *nm = exe->entry < exe->n_funcs ? exe->funcs[exe->entry].name : NULL;
    return (Params){.exe = exe, .entry = nm ? nm : "main", .n = exe->n_inputs};
}

static const char *param_name(const Params *ps, uint32_t p) {
    return ps->f ? ps->f->params[p]->name : ps->exe->in_names[p];
}

/* 2: `given` is the parameter's name; 1: its name after the ONNX importer's old renaming (IR
 * only); 0: another name. */
static int param_match(const Params *ps, uint32_t p, const char *given) {
    if (ps->f) return name_match(ps->f, p, given);
    return strcmp(ps->exe->in_names[p], given) == 0 ? 2 : 0;
}

/* The index of the given name (of n) that best denotes parameter p (an exact name before a
 * renamed one; the last of equals), or -1. */
static long best_name(const Params *ps, uint32_t p, const char *const *names, size_t n) {
    long best = -1;
    int best_m = 0;
    for (size_t i = 0; i < n; i++) {
        int m = param_match(ps, p, names[i]);
        if (m > 0 && m >= best_m) best = (long)i, best_m = m;
    }
    return best;
}

static void describe(const Params *ps, StrBuf *out) {
    if (ps->f) {
        describe_params(ps->ctx, ps->f, out);
        return;
    }
    for (uint32_t i = 0; i < ps->n; i++) {
        const char *t = ps->exe->in_types[i].text;
        sb_printf(out, "%s%s: %s", i ? ", " : "", ps->exe->in_names[i], t ? t : "?");
    }
}

static Type *param_type(const Params *ps, uint32_t p) {
    return ps->f ? ps->f->params[p]->base.checked_type : NULL;
}

static const char *param_type_text(const Params *ps, uint32_t p, StrBuf *sb) {
    if (ps->f) return type_text(ps->ctx, param_type(ps, p), sb);
    const char *t = ps->exe->in_types[p].text;
    return t ? t : "?";
}

static bool param_is_tensor(const Params *ps, uint32_t p) {
    if (ps->f) {
        Type *t = param_type(ps, p);
        return t != NULL && t->kind == TYPE_TENSOR;
    }
    return ps->exe->in_types[p].is_tensor;
}

/* Does array a fit an executable's tensor input d? (`?` dims take any size.) */
static bool fits_desc(const VmTypeDesc *d, const NpyArray *a, StrBuf *why) {
    if (a->dtype != (rly_dtype)d->dtype) {
        sb_printf(why, "dtype %s, expected %s", sup_dtype_name(a->dtype),
                  sup_dtype_name((rly_dtype)d->dtype));
        return false;
    }
    if (a->ndim != d->ndim) {
        sb_printf(why, "rank %u, expected %u", a->ndim, d->ndim);
        return false;
    }
    for (uint32_t k = 0; k < d->ndim; k++)
        if (d->shape[k] >= 0 && d->shape[k] != a->shape[k]) {
            sb_printf(why, "dimension %u is %lld, expected %lld", k, (long long)a->shape[k],
                      (long long)d->shape[k]);
            return false;
        }
    return true;
}

static bool param_fits(const Params *ps, Binder *b, uint32_t p, const NpyArray *a, StrBuf *why) {
    if (ps->f) return fits(b, AS_TENSOR_TYPE(param_type(ps, p)), a, why);
    return fits_desc(&ps->exe->in_types[p], a, why);
}

static Value *param_fill(const Params *ps, Binder *b, uint32_t p, rly_fill fill, StrBuf *why) {
    if (ps->f) {
        Type *t = param_type(ps, p);
        return fill_fits(t, why) ? fill_value(b, t, fill, why) : NULL;
    }
    const VmTypeDesc *d = &ps->exe->in_types[p];
    if (d->is_tensor) return fill_tensor(b, (rly_dtype)d->dtype, d->ndim, d->shape, fill, why);
    /* Anything else (a tuple of tensors): the executable keeps the type as Relay text, which
     * the compiler's parser reads back here (librly_runtime's sessions take tensors only). */
    Ctx *ctx = ir_ctx_new();
    StrBuf src = {0};
    sb_printf(&src, "#[version = \"0.0.5\"]\ndef @input(%%x: %s) { %%x }\n",
              d->text ? d->text : "");
    Module *m = d->text ? text_parse(ctx, "input type", src.data, src.len, NULL, 0) : NULL;
    Value *v = NULL;
    if (m == NULL || m->funcs.len != 1) {
        sb_printf(why, "cannot generate a value of type %s", d->text ? d->text : "(unknown)");
    } else {
        Type *t = m->funcs.data[0].func->params[0]->ann;
        if (fill_fits(t, why)) v = fill_value(b, t, fill, why);
    }
    sb_free(&src);
    ir_ctx_free(ctx);
    return v;
}

/* Bind every parameter: the owned values into args[] (ps->n of them, NULL on entry). */
static rly_status bind_inputs(const Params *ps, const rly_run_options *o, Value **args) {
    Binder b = {.ctx = ps->ctx,
                .rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)o->seed * 0x2545F4914F6CDD1Dull};
    if (b.rng == 0) b.rng = 1;
    NpzReader *zr = NULL, *single = NULL; /* nothing is decoded until a parameter wants it */
    size_t zn = 0;
    char err[512];
    StrBuf why = {0}, expect = {0}, ty = {0};
    rly_status st = RLY_STATUS_OK;
    const char *entry = ps->entry;
    describe(ps, &expect);
    if (o->n_inputs < 0 ||
        (o->n_inputs > 0 && (o->input_names == NULL || o->input_paths == NULL))) {
        st = api_fail(RLY_STATUS_INVALID, "run options: n_inputs without input names and paths");
        goto out;
    }
    if (o->inputs_npz && !rt_npz_open(o->inputs_npz, false, &zr, err, sizeof err)) {
        st = api_fail(RLY_STATUS_IO, "%s", err);
        goto out;
    }
    zn = zr ? rt_npz_count(zr) : 0;
    /* Every given name must be a parameter. */
    for (size_t i = 0; i < zn + (size_t)o->n_inputs; i++) {
        const char *nm = i < zn ? rt_npz_name(zr, i) : o->input_names[i - zn];
        uint32_t p = 0;
        while (p < ps->n && !param_match(ps, p, nm))
            p++;
        if (p == ps->n) {
            st = api_fail(RLY_STATUS_ERROR, "input '%s' is not a parameter of @%s; it expects %s",
                          nm, entry, ps->n ? sb_cstr(&expect) : "no inputs");
            goto out;
        }
    }
    for (uint32_t p = 0; p < ps->n; p++) {
        const char *pname = param_name(ps, p);
        NpzReader *src = NULL; /* the file holding this parameter's array, and its member */
        size_t member = 0;
        long gi = best_name(ps, p, o->input_names, (size_t)o->n_inputs);
        if (gi >= 0) {
            if (!rt_npz_open(o->input_paths[gi], true, &single, err, sizeof err)) {
                st = api_fail(RLY_STATUS_IO, "input %s: %s", pname, err);
                goto out;
            }
            src = single;
        }
        for (size_t i = 0; i < zn && src == NULL; i++) /* an exact name first */
            if (param_match(ps, p, rt_npz_name(zr, i)) == 2) src = zr, member = i;
        for (size_t i = 0; i < zn && src == NULL; i++)
            if (param_match(ps, p, rt_npz_name(zr, i))) src = zr, member = i;
        if (src != NULL) {
            NpyArray hdr;
            RtTensor *tensor = NULL;
            why.len = 0;
            if (!rt_npz_header(src, member, &hdr, err, sizeof err)) {
                st = api_fail(RLY_STATUS_IO, "input %s: %s", pname, err);
            } else if (!param_is_tensor(ps, p)) {
                st = api_fail(RLY_STATUS_ERROR,
                              "input %s: the parameter has type %s, which a .npy array cannot "
                              "give; @%s expects %s",
                              pname, param_type_text(ps, p, &ty), entry, sb_cstr(&expect));
            } else if (!param_fits(ps, &b, p, &hdr, &why)) {
                st = api_fail(RLY_STATUS_ERROR, "input %s: %s; @%s expects %s", pname,
                              sb_cstr(&why), entry, sb_cstr(&expect));
            } else if ((tensor = rt_tensor_new(hdr.dtype, hdr.ndim, hdr.shape, err, sizeof err)) ==
                       NULL) {
                st = api_fail(RLY_STATUS_ERROR, "input %s: %s", pname, err);
            } else if (!rt_npz_read(src, member, rt_tensor_data(tensor), hdr.nbytes, err,
                                    sizeof err)) {
                st = api_fail(RLY_STATUS_IO, "input %s: %s", pname, err);
                rt_release(&tensor->hdr);
            } else {
                args[p] = &tensor->hdr;
            }
            rt_npz_close(single);
            single = NULL;
            if (st != RLY_STATUS_OK) goto out;
        }
    }
    for (uint32_t p = 0; p < ps->n; p++) {
        if (args[p] != NULL) continue;
        const char *pname = param_name(ps, p);
        if (o->fill == RLY_FILL_NONE) {
            st = api_fail(RLY_STATUS_ERROR, "missing input %s; @%s expects %s", pname, entry,
                          sb_cstr(&expect));
            goto out;
        }
        why.len = 0;
        args[p] = param_fill(ps, &b, p, o->fill, &why);
        if (args[p] == NULL) {
            st = api_fail(RLY_STATUS_ERROR, "cannot generate input %s of type %s: %s", pname,
                          param_type_text(ps, p, &ty), sb_cstr(&why));
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

/* ---- results --------------------------------------------------------------------------------- */

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

/* The arrays' names when the program names its outputs (names[0..n_names), ONNX output names):
 * output k is the whole result when n_names is 1, else field k of the result tuple; a tensor
 * output is called names[k], the tensors of another (a sequence) names[k]_0, names[k]_1, ...
 * False (and no names) when the result does not have that shape or two names would clash: the
 * caller then names them output_0, output_1, ... */
static bool output_names(const Value *v, const char *const *names, uint32_t n_names, PtrVec *ts,
                         PtrVec *out_names, StrBuf *why, bool *failed) {
    if (names == NULL || n_names == 0) return false;
    if (n_names > 1 && (v->kind != VAL_TUPLE || RT_TUPLE(v)->n != n_names)) return false;
    StrMap seen = {0};
    bool ok = true;
    for (uint32_t k = 0; k < n_names && ok; k++) {
        const Value *vk = n_names > 1 ? RT_TUPLE(v)->f[k] : v;
        size_t first = ts->len;
        if (!flatten(vk, ts, why)) {
            *failed = true;
            ok = false;
            break;
        }
        for (size_t j = first; j < ts->len && ok; j++) {
            StrBuf nm = {0};
            if (vk->kind == VAL_TENSOR)
                sb_puts(&nm, names[k]);
            else
                sb_printf(&nm, "%s_%zu", names[k], j - first);
            ok = nm.len > 0 && strmap_get(&seen, nm.data, nm.len) == NULL;
            if (ok) strmap_put(&seen, nm.data, nm.len, (void *)1);
            vec_push(out_names, sb_take(&nm));
        }
    }
    strmap_free(&seen);
    if (!ok) {
        for (size_t i = 0; i < out_names->len; i++)
            free(out_names->data[i]);
        out_names->len = 0;
        ts->len = 0;
    }
    return ok;
}

/* Write the tensors of v to an .npz at path, named as output_names says or output_0, ... */
static rly_status write_outputs(const Value *v, const char *path, const char *const *names,
                                uint32_t n_names) {
    PtrVec ts = {0}, nms = {0};
    StrBuf why = {0};
    rly_status st = RLY_STATUS_OK;
    bool failed = false;
    if (!output_names(v, names, n_names, &ts, &nms, &why, &failed) &&
        (failed || !flatten(v, &ts, &why))) {
        st = api_fail(RLY_STATUS_ERROR, "%s: %s", path, sb_cstr(&why));
        goto out;
    }
    for (size_t i = nms.len; i < ts.len; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "output_%zu", i);
        vec_push(&nms, strdup(nm));
    }
    Npz z = {0};
    z.n = ts.len;
    z.items = sup_calloc(ts.len ? ts.len : 1, sizeof *z.items);
    for (size_t i = 0; i < ts.len; i++) {
        const RtTensor *t = ts.data[i];
        z.items[i].name = nms.data[i];
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
    free(z.items);
out:
    for (size_t i = 0; i < nms.len; i++)
        free(nms.data[i]);
    vec_free(&nms);
    vec_free(&ts);
    sb_free(&why);
    return st;
}

/* The ONNX output names the importer recorded on f (attribute onnx_output_names, one string
 * per graph output) into *out (malloc'ed array of borrowed strings); 0 when there are none. */
static uint32_t onnx_output_names(const Function *f, const char ***out) {
    *out = NULL;
    const AttrValue *a = f && f->attrs ? ir_attrs_get(f->attrs, "onnx_output_names") : NULL;
    if (a == NULL || a->kind != ATTR_LIST || a->list.n == 0) return 0;
    for (uint32_t i = 0; i < a->list.n; i++)
        if (a->list.items[i]->kind != ATTR_STR) return 0;
    *out = sup_calloc(a->list.n, sizeof **out);
    for (uint32_t i = 0; i < a->list.n; i++)
        (*out)[i] = a->list.items[i]->s;
    return a->list.n;
}

/* An executable's output names when they are not all the default output_N. */
static uint32_t exe_output_names(const VmExec *exe, const char *const **out) {
    *out = NULL;
    for (uint32_t k = 0; k < exe->n_outputs; k++) {
        char dflt[32];
        snprintf(dflt, sizeof dflt, "output_%u", k);
        if (strcmp(exe->out_names[k], dflt) != 0) {
            *out = exe->out_names;
            return exe->n_outputs;
        }
    }
    return 0;
}

/* Write v to opts->output_npz, or render it into *text (the VM's printer when exe is given).
 * When the program names its outputs (names[0..n_names), as output_names takes them) each is
 * printed on its own as `NAME: value`; otherwise v is printed whole. */
static rly_status emit(const Value *v, const rly_run_options *opts, const VmExec *exe,
                       const char *const *names, uint32_t n_names, char **text) {
    if (opts->output_npz) return write_outputs(v, opts->output_npz, names, n_names);
    StrBuf sb = {0};
    size_t max = opts->max_print > 0 ? (size_t)opts->max_print : 1000;
    bool labelled = names != NULL && n_names > 0 &&
                    (n_names == 1 || (v->kind == VAL_TUPLE && RT_TUPLE(v)->n == n_names));
    for (uint32_t k = 0; k < (labelled ? n_names : 1); k++) {
        const Value *vk = labelled && n_names > 1 ? RT_TUPLE(v)->f[k] : v;
        if (labelled) sb_printf(&sb, "%s: ", names[k]);
        if (exe)
            vm_print_value(exe, vk, max, &sb);
        else
            ev_print_value(vk, max, &sb);
        sb_putc(&sb, '\n');
    }
    *text = sb_take(&sb);
    return RLY_STATUS_OK;
}

/* ---- running --------------------------------------------------------------------------------- */

static rly_status check_engine(rly_engine e, rly_engine *out) {
    if (e == RLY_ENGINE_DEFAULT) e = API_DEFAULT_ENGINE;
    if (e != RLY_ENGINE_VM && e != RLY_ENGINE_INTERP)
        return api_fail(RLY_STATUS_INVALID, "run options: engine %d is none of rly_engine", (int)e);
    *out = e;
    return RLY_STATUS_OK;
}

/* Make a session with opts' limits over exe (a handle taken over by the session's owner: it is
 * released here, so the session keeps it alive alone). */
static rly_status session_for(rly_executable *exe, const rly_run_options *opts, rly_session **s) {
    rly_session_options so = {.threads = opts->threads,
                              .max_memory = opts->max_memory,
                              .max_depth = opts->max_depth,
                              .timeout = opts->timeout};
    rly_status st = rly_session_new(exe, &so, s);
    rly_executable_free(exe);
    return st;
}

/* Bind ps's inputs into session s (the inputs count against its memory account). */
static rly_status bind_session(rly_session *s, const Params *ps, const rly_run_options *opts) {
    Value **args = sup_calloc(ps->n + 1, sizeof *args);
    RtMemAccount *prev = rt_mem_swap(vm_account(rt_session_vm(s)));
    rly_status st = bind_inputs(ps, opts, args);
    rt_mem_swap(prev);
    for (uint32_t i = 0; i < ps->n; i++) {
        if (st == RLY_STATUS_OK)
            rt_session_set_value(s, i, args[i]);
        else
            rt_release(args[i]);
    }
    free(args);
    return st;
}

/* ---- diag: probes of a run (--check-numerics, --profile; docs/tools.md) ---- */
static rly_status session_probes(rly_session *s, const rly_run_options *opts) {
    if (opts->profile_table) *opts->profile_table = NULL;
    unsigned mask =
        (opts->check_numerics ? RLY_PROBE_NUMERICS : 0u) | (opts->profile ? RLY_PROBE_PROFILE : 0u);
    return mask ? rly_session_set_probes(s, mask) : RLY_STATUS_OK;
}

/* The last error with the source line of its location (an ONNX node's line names it). */
static rly_status quote_loc(Ctx *ctx, rly_status st) {
    StrBuf sb = {0};
    ev_probe_quote(ctx, rly_last_error(), &sb);
    if (sb.len && sb.data[sb.len - 1] == '\n') sb.data[--sb.len] = '\0';
    st = api_fail(st, "%s", sb_cstr(&sb));
    sb_free(&sb);
    return st;
}

static rly_status write_profile(RtProfile *prof, const rly_run_options *opts) {
    char err[512];
    if (!rt_profile_write(prof, opts->profile, err, sizeof err))
        return api_fail(RLY_STATUS_IO, "%s", err);
    if (opts->profile_table) *opts->profile_table = rt_profile_table(prof, 20);
    return RLY_STATUS_OK;
}

RLY_API rly_status rly_module_run(rly_module *mod, const rly_run_options *opts, char **text) {
    if (mod == NULL || opts == NULL || (opts->output_npz == NULL && text == NULL))
        return api_fail(RLY_STATUS_INVALID, "rly_module_run: NULL argument");
    if (text) *text = NULL;
    Ctx *ctx = mod->ctx;
    Interp *it = NULL;
    rly_session *sess = NULL;
    Value **args = NULL;
    uint32_t n_args = 0;
    Value *result = NULL;
    const char **names = NULL;
    uint32_t n_names = 0;
    RtProfile *prof = NULL;
    rly_engine engine;
    rly_status st = check_engine(opts->engine, &engine);
    if (st != RLY_STATUS_OK) return st;
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
    const char *entry = opts->entry ? opts->entry : "main";
    FuncDef *d = NULL;
    if (!mod->is_expr) {
        d = ir_module_lookup(mod, entry, strlen(entry));
        if (d == NULL || d->func == NULL) {
            StrBuf fnames = {0};
            for (size_t i = 0; i < mod->funcs.len; i++)
                sb_printf(&fnames, "%s@%s", i ? ", " : "", mod->funcs.data[i].gvar->name);
            st = api_fail(RLY_STATUS_ERROR, "no function @%s to run; the module defines %s", entry,
                          fnames.len ? sb_cstr(&fnames) : "no functions");
            sb_free(&fnames);
            goto out;
        }
        n_names = onnx_output_names(d->func, &names);
    }
    RtLimits lim = rt_limits_from(opts->max_memory, opts->max_depth, opts->timeout);
    if (engine == RLY_ENGINE_VM) {
        /* The module outlives this run's executable: its weights are used in place. */
        BeOptions bo = {.borrow_consts = true};
        VmExec *exe = be_compile_ex(mod, mod->is_expr ? NULL : entry, &bo);
        if (exe == NULL) {
            st = api_fail_diags(ctx);
            goto out;
        }
        if ((st = session_for(rt_executable_wrap(exe), opts, &sess)) != RLY_STATUS_OK) goto out;
        if ((st = session_probes(sess, opts)) != RLY_STATUS_OK) goto out; /* diag */
        if (d != NULL) {
            Params ps = ir_params(ctx, d->func, entry);
            if ((st = bind_session(sess, &ps, opts)) != RLY_STATUS_OK) goto out;
        }
        if ((st = rly_session_run(sess)) != RLY_STATUS_OK) {
            if (opts->check_numerics) st = quote_loc(ctx, st); /* diag: name the ONNX node */
            goto out;
        }
        st = emit(rt_session_result(sess), opts, rt_session_exec(sess), (const char *const *)names,
                  n_names, text);
        if (st == RLY_STATUS_OK && opts->profile) /* diag */
            st = rly_session_write_profile(sess, opts->profile, 20, opts->profile_table);
        goto out;
    }
    it = ev_new(mod);
    ev_set_limits(it, &lim);
    if (opts->profile) prof = rt_profile_new(); /* diag: probes */
    ev_set_probe(it, opts->check_numerics != 0, prof);
    if (mod->is_expr) {
        result = ev_eval_module_expr(it);
    } else {
        n_args = d->func->n_params;
        args = sup_calloc(n_args ? n_args : 1, sizeof *args);
        Params ps = ir_params(ctx, d->func, entry);
        RtMemAccount *prev = rt_mem_swap(ev_account(it)); /* inputs count against the limit */
        st = bind_inputs(&ps, opts, args);
        rt_mem_swap(prev);
        if (st != RLY_STATUS_OK) goto out;
        result = ev_call_global(it, entry, n_args, args);
    }
    if (result == NULL) {
        st = api_fail_diags(ctx);
        goto out;
    }
    st = emit(result, opts, NULL, (const char *const *)names, n_names, text);
    if (st == RLY_STATUS_OK && prof != NULL) st = write_profile(prof, opts); /* diag */
out:
    RLY_END_TRY;
    rt_release(result);
    for (uint32_t i = 0; args && i < n_args; i++)
        rt_release(args[i]);
    free(args);
    free(names);
    ev_free(it);
    rt_profile_free(prof);
    rly_session_free(sess);
    return st;
}

RLY_API rly_status rly_executable_run(const rly_executable *exe, const rly_run_options *opts,
                                      char **text) {
    if (exe == NULL || opts == NULL || (opts->output_npz == NULL && text == NULL))
        return api_fail(RLY_STATUS_INVALID, "rly_executable_run: NULL argument");
    if (text) *text = NULL;
    rly_engine engine;
    rly_status st = check_engine(opts->engine, &engine);
    if (st != RLY_STATUS_OK) return st;
    if (opts->engine == RLY_ENGINE_INTERP)
        return api_fail(RLY_STATUS_INVALID,
                        "a compiled executable runs on the VM; the interpreter needs the source");
    if (opts->entry != NULL)
        return api_fail(RLY_STATUS_INVALID,
                        "a compiled executable runs its entry (@%s); choose the entry when "
                        "compiling (rly compile --entry NAME)",
                        exe_params(exe->exe).entry);
    if (opts->opt_level != 0)
        return api_fail(RLY_STATUS_INVALID,
                        "an executable is optimized when compiled (rly compile -O N)");
    rly_session_options so = {.threads = opts->threads,
                              .max_memory = opts->max_memory,
                              .max_depth = opts->max_depth,
                              .timeout = opts->timeout};
    rly_session *s = NULL;
    if ((st = rly_session_new(exe, &so, &s)) != RLY_STATUS_OK) return st;
    RLY_TRY;
    Params ps = exe_params(exe->exe);
    const char *const *names = NULL;
    uint32_t n_names = exe_output_names(exe->exe, &names);
    if ((st = session_probes(s, opts)) == RLY_STATUS_OK && /* diag */
        (st = bind_session(s, &ps, opts)) == RLY_STATUS_OK &&
        (st = rly_session_run(s)) == RLY_STATUS_OK)
        st = emit(rt_session_result(s), opts, exe->exe, names, n_names, text);
    if (st == RLY_STATUS_OK && opts->profile) /* diag */
        st = rly_session_write_profile(s, opts->profile, 20, opts->profile_table);
    RLY_END_TRY;
    rly_session_free(s);
    return st;
}

RLY_API rly_status rly_session_bind_inputs(rly_session *s, const rly_run_options *opts) {
    if (s == NULL || opts == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_session_bind_inputs: NULL argument");
    rly_status st;
    RLY_TRY;
    Params ps = exe_params(rt_session_exec(s));
    st = bind_session(s, &ps, opts);
    RLY_END_TRY;
    return st;
}
