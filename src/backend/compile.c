/* compile.c - the VM compiler's driver (backend.h): which VM functions exist (the entry, the
 * globals it reaches, lifted function literals, constructor wrappers), compiled from a
 * worklist; the executable's tables (constants copied into its arena, constructors, the string
 * table of names, messages and source locations, packed functions); the entry's interface;
 * then validation and kernel binding. */
#include <stdio.h>

#include "backend/be.h"

/* ---- errors, strings, locations ------------------------------------------------------------- */

void be_error(Be *be, Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_add(&be->ctx->diags, DIAG_ERROR, span, fmt, ap);
    va_end(ap);
    be->failed = true;
}

void *be_dup(Be *be, const void *p, size_t n, size_t elem) {
    void *q = arena_array(be->arena, n ? n : 1, elem);
    if (n) memcpy(q, p, n * elem);
    return q;
}

const char *be_strdup(Be *be, const char *s) { return arena_strndup(be->arena, s, strlen(s)); }

uint32_t be_str(Be *be, const char *s) {
    size_t n = strlen(s);
    uintptr_t i = (uintptr_t)strmap_get(&be->str_of, s, n);
    if (i != 0) return (uint32_t)(i - 1);
    vec_push(&be->strs, (void *)arena_strndup(be->arena, s, n));
    strmap_put(&be->str_of, s, n, (void *)(uintptr_t)be->strs.len);
    return (uint32_t)be->strs.len - 1;
}

uint32_t be_loc(Be *be, Span span) {
    const SourceFile *f = diags_file(&be->ctx->diags, span.file);
    if (span.file == 0 || f == NULL) return 0;
    uint32_t line, col;
    diags_line_col(&be->ctx->diags, span.file, span.lo, &line, &col);
    char buf[512];
    snprintf(buf, sizeof buf, "%s:%u:%u", f->name, line, col);
    return be_str(be, buf);
}

/* ---- kinds
 * --------------------------------------------------------------------------------------- */

uint8_t be_kind_of_dtype(rly_dtype dt) {
    switch (dt) {
    case RLY_DTYPE_BOOL: return VM_RK_BOOL;
    case RLY_DTYPE_I32: return VM_RK_I32;
    case RLY_DTYPE_I64: return VM_RK_I64;
    case RLY_DTYPE_F32: return VM_RK_F32;
    case RLY_DTYPE_F64: return VM_RK_F64;
    default: return VM_RK_VALUE;
    }
}

rly_dtype be_dtype_of_kind(uint8_t kind) {
    switch (kind) {
    case VM_RK_BOOL: return RLY_DTYPE_BOOL;
    case VM_RK_I32: return RLY_DTYPE_I32;
    case VM_RK_I64: return RLY_DTYPE_I64;
    case VM_RK_F32: return RLY_DTYPE_F32;
    case VM_RK_F64: return RLY_DTYPE_F64;
    default: RLY_UNREACHABLE();
    }
}

uint8_t be_kind_of(Type *t) {
    if (t == NULL || t->kind != TYPE_TENSOR) return VM_RK_VALUE;
    TensorType *tt = AS_TENSOR_TYPE(t);
    return tt->ndim == 0 ? be_kind_of_dtype(tt->dtype) : VM_RK_VALUE;
}

bool be_is_primitive(const Function *fn) {
    const AttrValue *v = fn->attrs ? ir_attrs_get(fn->attrs, "Primitive") : NULL;
    return v != NULL && ((v->kind == ATTR_INT && v->i != 0) || (v->kind == ATTR_BOOL && v->b));
}

/* The type a function returns: its checked FuncType's, else its body's, else its annotation. */
static Type *result_type(Function *fn) {
    Type *t = fn->base.checked_type;
    if (t != NULL && t->kind == TYPE_FUNC) return AS_FUNC_TYPE(t)->ret;
    return fn->body->checked_type ? fn->body->checked_type : fn->ret_type;
}

static Type *var_type(Var *v) { return v->base.checked_type ? v->base.checked_type : v->ann; }

/* ---- constants and constructors ---------------------------------------------------------------
 */

uint32_t be_const(Be *be, Constant *c) {
    uintptr_t i = (uintptr_t)ptrmap_get(&be->const_of, c);
    if (i != 0) return (uint32_t)(i - 1);
    /* Borrowed bytes are as aligned as the module's (the element size at least, as the
     * interpreter uses them); copies are 64-byte aligned. */
    char *data = c->data;
    if (!be->borrow_consts) {
        /* 64-byte aligned bytes in the arena, which lives as long as the executable. */
        char *raw = arena_alloc(be->arena, c->nbytes + 64);
        data = (char *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
        if (c->nbytes) memcpy(data, c->data, c->nbytes);
    }
    RtTensor *t = rt_tensor_borrow(c->dtype, c->ndim, c->shape, data, c->nbytes);
    t->hdr.flags |= RT_VF_CONST;
    vec_push(&be->consts, &t->hdr);
    ptrmap_put(&be->const_of, c, (void *)(uintptr_t)be->consts.len);
    return (uint32_t)be->consts.len - 1;
}

uint32_t be_ctor(Be *be, Constructor *ct) {
    uintptr_t i = (uintptr_t)ptrmap_get(&be->ctor_of, ct);
    if (i != 0) return (uint32_t)(i - 1);
    VmCtor vc = {
        .name = be_strdup(be, ct->name),
        .type_name = ct->belong_to ? be_strdup(be, ct->belong_to->name) : be_strdup(be, "?"),
        .tag = ct->tag,
        .arity = ct->n_inputs,
    };
    vec_push(&be->ctors, vc);
    ptrmap_put(&be->ctor_of, ct, (void *)(uintptr_t)be->ctors.len);
    return (uint32_t)be->ctors.len - 1;
}

/* ---- functions ----------------------------------------------------------------------------------
 */

static uint32_t add_func(Be *be, BeFunc *f, const void *key) {
    vec_push(&be->funcs, f);
    if (key) ptrmap_put(&be->func_of, key, (void *)(uintptr_t)be->funcs.len);
    return (uint32_t)be->funcs.len - 1;
}

/* Parameter kinds of fn's own parameters after n_pre VALUE ones. */
static void set_params(BeFunc *f, Function *fn, uint32_t n_pre) {
    f->n_params = n_pre + fn->n_params;
    f->param_kind = sup_malloc(f->n_params ? f->n_params : 1);
    for (uint32_t i = 0; i < n_pre; i++)
        f->param_kind[i] = VM_RK_VALUE;
    for (uint32_t i = 0; i < fn->n_params; i++)
        f->param_kind[n_pre + i] = be_kind_of(var_type(fn->params[i]));
    f->result_kind = be_kind_of(result_type(fn));
}

uint32_t be_func_global(Be *be, GlobalVar *gv, Span use) {
    uintptr_t i = (uintptr_t)ptrmap_get(&be->func_of, gv);
    if (i != 0) return (uint32_t)(i - 1);
    FuncDef *d = ir_module_def_of(be->m, gv);
    if (d == NULL || d->func == NULL) {
        be_error(be, use, "@%s is declared but not defined", gv->name);
        return 0;
    }
    BeFunc *f = sup_calloc(1, sizeof *f);
    f->kind = BF_GLOBAL;
    f->name = be_strdup(be, gv->name);
    f->fn = d->func;
    f->body = d->func->body;
    set_params(f, d->func, 0);
    return add_func(be, f, gv);
}

uint32_t be_func_lambda(Be *be, Function *fn, Var *self, const char *outer) {
    uintptr_t i = (uintptr_t)ptrmap_get(&be->func_of, fn);
    if (i != 0) return (uint32_t)(i - 1);
    BeFunc *f = sup_calloc(1, sizeof *f);
    f->kind = BF_LAMBDA;
    char name[300];
    snprintf(name, sizeof name, "%.200s$lambda%zu", outer, be->funcs.len);
    f->name = be_strdup(be, name);
    f->fn = fn;
    f->body = fn->body;
    PtrVec fv = {0};
    ir_free_vars(&fn->base, &fv);
    f->caps = sup_malloc(sizeof(Var *) * (fv.len ? fv.len : 1));
    bool self_free = false;
    for (size_t k = 0; k < fv.len; k++) {
        if (fv.data[k] == self) {
            self_free = true;
            continue;
        }
        f->caps[f->n_caps++] = fv.data[k];
    }
    vec_free(&fv);
    f->self = self_free ? self : NULL;
    set_params(f, fn, f->n_caps);
    return add_func(be, f, fn);
}

uint32_t be_func_prim(Be *be, Function *fn, const char *outer) {
    uintptr_t i = (uintptr_t)ptrmap_get(&be->func_of, fn);
    if (i != 0) return (uint32_t)(i - 1);
    BeFunc *f = sup_calloc(1, sizeof *f);
    f->kind = BF_PRIM;
    char name[300];
    snprintf(name, sizeof name, "%.200s$prim%zu", outer, be->funcs.len);
    f->name = be_strdup(be, name);
    f->fn = fn;
    f->body = fn->body;
    f->caps = sup_malloc(sizeof(Var *));
    set_params(f, fn, 0);
    return add_func(be, f, fn);
}

uint32_t be_func_ctor(Be *be, Constructor *ct) {
    uintptr_t i = (uintptr_t)ptrmap_get(&be->func_of, ct);
    if (i != 0) return (uint32_t)(i - 1);
    BeFunc *f = sup_calloc(1, sizeof *f);
    f->kind = BF_CTOR;
    char name[300];
    snprintf(name, sizeof name, "%.200s$ctor", ct->name);
    f->name = be_strdup(be, name);
    f->ctor = ct;
    f->caps = sup_malloc(sizeof(Var *));
    f->n_params = ct->n_inputs;
    f->param_kind = sup_malloc(f->n_params ? f->n_params : 1);
    for (uint32_t k = 0; k < f->n_params; k++)
        f->param_kind[k] = VM_RK_VALUE;
    f->result_kind = VM_RK_VALUE;
    return add_func(be, f, ct);
}

/* ---- the entry's interface ----------------------------------------------------------------------
 */

static VmTypeDesc type_desc(Be *be, Type *t) {
    VmTypeDesc d = {0};
    StrBuf sb = {0};
    if (t != NULL) ir_print_type(be->ctx, t, &sb);
    d.text = be_strdup(be, t != NULL ? sb_cstr(&sb) : "?");
    sb_free(&sb);
    if (t != NULL && t->kind == TYPE_TENSOR) {
        TensorType *tt = AS_TENSOR_TYPE(t);
        d.is_tensor = true;
        d.dtype = tt->dtype;
        d.ndim = tt->ndim;
        int64_t *shape = arena_array(be->arena, tt->ndim ? tt->ndim : 1, sizeof(int64_t));
        for (uint32_t i = 0; i < tt->ndim; i++)
            shape[i] = tt->shape[i] >= 0 ? tt->shape[i] : -1;
        d.shape = shape;
    }
    return d;
}

/* The list of `n` strings in attribute `key` of fn, or NULL. */
static const AttrValue *name_list(const Function *fn, const char *key, uint32_t n) {
    const AttrValue *a = fn && fn->attrs ? ir_attrs_get(fn->attrs, key) : NULL;
    if (a == NULL || a->kind != ATTR_LIST || a->list.n != n) return NULL;
    for (uint32_t i = 0; i < n; i++)
        if (a->list.items[i]->kind != ATTR_STR) return NULL;
    return a;
}

#define MAX_LEAF_OUTPUTS 65536u /* more (a type DAG: pairs of pairs of ...): the fields */

/* The outputs of a result that nests tuples: its leaves, depth first, output_0, output_1, ...
 * (as the .npz writer names them), each with its path of field indices; false (nothing set)
 * when there are more than MAX_LEAF_OUTPUTS (tuple types may share parts: a pair of pairs 40
 * deep has 2^40 leaves). Iterative. */
static bool leaf_outputs(Be *be, Type *ret) {
    VmExec *exe = be->exe;
    typedef struct Frame {
        const TupleType *t;
        uint32_t next;
    } Frame;
    Vec(Frame) stack = {0};
    Vec(uint32_t) path = {0}, off = {0};
    Vec(Type *) leaves = {0};
    vec_push(&stack, ((Frame){AS_TUPLE_TYPE(ret), 0}));
    while (stack.len > 0) {
        Frame *f = &stack.data[stack.len - 1];
        if (f->next == f->t->n) {
            stack.len--;
            continue;
        }
        uint32_t i = f->next++;
        Type *ft = f->t->fields[i];
        if (ft->kind == TYPE_TUPLE) {
            vec_push(&stack, ((Frame){AS_TUPLE_TYPE(ft), 0}));
            continue;
        }
        if (leaves.len == MAX_LEAF_OUTPUTS) {
            vec_free(&stack);
            vec_free(&path);
            vec_free(&off);
            vec_free(&leaves);
            return false;
        }
        vec_push(&off, (uint32_t)path.len);
        for (size_t d = 0; d < stack.len; d++) /* the index taken at each level */
            vec_push(&path, stack.data[d].next - 1);
        vec_push(&leaves, ft);
    }
    vec_push(&off, (uint32_t)path.len);
    uint32_t n = (uint32_t)leaves.len;
    const char **names = arena_array(be->arena, n ? n : 1, sizeof(char *));
    VmTypeDesc *types = arena_array(be->arena, n ? n : 1, sizeof(VmTypeDesc));
    uint32_t *po = arena_array(be->arena, n + 1, sizeof(uint32_t));
    uint32_t *pp = arena_array(be->arena, path.len ? path.len : 1, sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "output_%u", i);
        names[i] = be_strdup(be, buf);
        types[i] = type_desc(be, leaves.data[i]);
    }
    memcpy(po, off.data, (n + 1) * sizeof(uint32_t));
    if (path.len) memcpy(pp, path.data, path.len * sizeof(uint32_t));
    exe->n_outputs = n;
    exe->out_names = names;
    exe->out_types = types;
    exe->out_tuple = true;
    exe->out_path_off = po;
    exe->out_path = pp;
    vec_free(&stack);
    vec_free(&path);
    vec_free(&off);
    vec_free(&leaves);
    return true;
}

static void entry_interface(Be *be, Function *fn, Type *ret) {
    VmExec *exe = be->exe;
    uint32_t n_in = fn ? fn->n_params : 0;
    const AttrValue *in_names = name_list(fn, "onnx_input_names", n_in);
    const char **names = arena_array(be->arena, n_in ? n_in : 1, sizeof(char *));
    VmTypeDesc *types = arena_array(be->arena, n_in ? n_in : 1, sizeof(VmTypeDesc));
    for (uint32_t i = 0; i < n_in; i++) {
        names[i] = be_strdup(be, in_names ? in_names->list.items[i]->s : fn->params[i]->name);
        types[i] = type_desc(be, var_type(fn->params[i]));
    }
    exe->n_inputs = n_in;
    exe->in_names = names;
    exe->in_types = types;
    bool tuple = ret != NULL && ret->kind == TYPE_TUPLE;
    uint32_t n_out = tuple ? AS_TUPLE_TYPE(ret)->n : 1;
    bool nested = false;
    for (uint32_t i = 0; tuple && i < n_out; i++)
        nested |= AS_TUPLE_TYPE(ret)->fields[i]->kind == TYPE_TUPLE;
    if (nested && leaf_outputs(be, ret)) return;
    const AttrValue *out_names = name_list(fn, "onnx_output_names", n_out);
    const char **onames = arena_array(be->arena, n_out ? n_out : 1, sizeof(char *));
    VmTypeDesc *otypes = arena_array(be->arena, n_out ? n_out : 1, sizeof(VmTypeDesc));
    for (uint32_t i = 0; i < n_out; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "output_%u", i);
        onames[i] = be_strdup(be, out_names ? out_names->list.items[i]->s : buf);
        otypes[i] = type_desc(be, tuple ? AS_TUPLE_TYPE(ret)->fields[i] : ret);
    }
    exe->n_outputs = n_out;
    exe->out_names = onames;
    exe->out_types = otypes;
    exe->out_tuple = tuple;
}

/* ---- the driver
 * ---------------------------------------------------------------------------------- */

static void be_free_scratch(Be *be) {
    for (size_t i = 0; i < be->funcs.len; i++) {
        BeFunc *f = be->funcs.data[i];
        free(f->caps);
        free(f->param_kind);
        free(f);
    }
    vec_free(&be->funcs);
    ptrmap_free(&be->func_of);
    vec_free(&be->packed);
    ptrmap_free(&be->packed_of);
    strmap_free(&be->packed_key);
    vec_free(&be->consts);
    ptrmap_free(&be->const_of);
    vec_free(&be->ctors);
    ptrmap_free(&be->ctor_of);
    vec_free(&be->strs);
    strmap_free(&be->str_of);
    ptrmap_free(&be->pure);
    for (size_t i = 0; i < be->packed_types.len; i++)
        free(be->packed_types.data[i]);
    vec_free(&be->packed_types);
    vec_free(&be->site_types);
}

/* Move the tables into the executable (arena copies). */
static void assemble(Be *be) {
    VmExec *exe = be->exe;
    Arena *a = be->arena;
    exe->n_funcs = (uint32_t)be->funcs.len;
    VmFunction *funcs = arena_array(a, be->funcs.len ? be->funcs.len : 1, sizeof(VmFunction));
    for (size_t i = 0; i < be->funcs.len; i++)
        funcs[i] = ((BeFunc *)be->funcs.data[i])->vm;
    exe->funcs = funcs;
    exe->n_packed = (uint32_t)be->packed.len;
    exe->packed = be_dup(be, be->packed.data, be->packed.len, sizeof(VmPacked));
    exe->n_ctors = (uint32_t)be->ctors.len;
    exe->ctors = be_dup(be, be->ctors.data, be->ctors.len, sizeof(VmCtor));
    exe->n_strs = (uint32_t)be->strs.len;
    exe->strs = be_dup(be, be->strs.data, be->strs.len, sizeof(char *));
}

static void set_consts(Be *be) {
    VmExec *exe = be->exe;
    exe->n_consts = (uint32_t)be->consts.len;
    exe->consts = be_dup(be, be->consts.data, be->consts.len, sizeof(Value *));
}

VmExec *be_compile(Module *m, const char *entry) { return be_compile_ex(m, entry, NULL); }

VmExec *be_compile_ex(Module *m, const char *entry, const BeOptions *opts) {
    Be be_ = {.m = m, .ctx = m->ctx, .borrow_consts = opts && opts->borrow_consts};
    Be *be = &be_;
    VmExec *exe = sup_calloc(1, sizeof *exe);
    arena_init(&exe->arena);
    be->exe = exe;
    be->arena = &exe->arena;
    be_str(be, "");
    const char *name = entry ? entry : "main";
    FuncDef *d = ir_module_lookup(m, name, strlen(name));
    Function *efn = NULL;
    Type *eret = NULL;
    if (d != NULL && d->func != NULL) {
        exe->entry = be_func_global(be, d->gvar, d->span);
        efn = d->func;
        eret = result_type(efn);
    } else if (m->is_expr && m->expr != NULL && entry == NULL) {
        BeFunc *f = sup_calloc(1, sizeof *f);
        f->kind = BF_EXPR;
        f->name = be_strdup(be, "main");
        f->body = m->expr;
        f->caps = sup_malloc(sizeof(Var *));
        f->param_kind = sup_malloc(1);
        f->result_kind = be_kind_of(m->expr->checked_type);
        exe->entry = add_func(be, f, NULL);
        eret = m->expr->checked_type;
        PtrVec fv = {0};
        ir_free_vars(m->expr, &fv);
        if (fv.len > 0)
            be_error(be, ((Expr *)fv.data[0])->span,
                     "the expression has a free variable %%%s: the VM compiles closed programs",
                     ((Var *)fv.data[0])->name);
        vec_free(&fv);
    } else {
        be_error(be, SPAN_NONE, "no function @%s to compile", name);
    }
    for (size_t i = 0; i < be->funcs.len && !be->failed; i++) {
        BeFunc *f = be->funcs.data[i];
        if (!f->compiled) be_compile_func(be, f);
    }
    set_consts(be);
    if (!be->failed) {
        entry_interface(be, efn, eret);
        assemble(be);
        be_plan_memory(be);
        char err[1024];
        if (!vm_exec_validate(exe, err, sizeof err))
            be_error(be, SPAN_NONE, "internal error: the compiled program does not validate: %s",
                     err);
        else if (!vm_exec_bind(exe, err, sizeof err))
            be_error(be, SPAN_NONE, "%s", err);
    }
    be_free_scratch(be);
    if (be->failed) {
        vm_exec_free(exe);
        return NULL;
    }
    return exe;
}
