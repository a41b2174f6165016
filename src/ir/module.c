/* module.c - modules: global functions in definition order, ADT definitions, constructors with
 * module-unique tags, and the name maps. Lookups by name are O(1); output iterates the ordered
 * vectors, never the maps. */
#include "ir/ir.h"

Module *ir_module_new(Ctx *ctx) {
    vec_reserve(&ctx->modules, ctx->modules.len + 1); /* before the calloc: OOM leaks nothing */
    Module *m = sup_calloc(1, sizeof(Module));
    m->ctx = ctx;
    vec_push(&ctx->modules, m);
    return m;
}

void ir_module_free(Module *m) {
    vec_free(&m->funcs);
    vec_free(&m->types);
    vec_free(&m->meta);
    strmap_free(&m->global_by_name);
    strmap_free(&m->type_by_name);
    strmap_free(&m->ctor_by_name);
    free(m);
}

FuncDef *ir_module_lookup(const Module *m, const char *name, size_t len) {
    uintptr_t k = (uintptr_t)strmap_get(&m->global_by_name, name, len);
    return k ? &m->funcs.data[k - 1] : NULL;
}

FuncDef *ir_module_def_of(const Module *m, const GlobalVar *gv) {
    FuncDef *d = ir_module_lookup(m, gv->name, strlen(gv->name));
    return d && d->gvar == gv ? d : NULL;
}

GlobalVar *ir_module_global(Module *m, const char *name, size_t len, Span span) {
    FuncDef *d = ir_module_lookup(m, name, len);
    if (d) return d->gvar;
    GlobalVar *gv = arena_alloc(&m->ctx->arena, sizeof(GlobalVar));
    gv->base.kind = EXPR_GLOBAL_VAR;
    gv->base.id = m->ctx->next_id++;
    gv->base.span = span;
    gv->name = ir_intern(m->ctx, name, len);
    FuncDef def = {gv, NULL, span};
    vec_push(&m->funcs, def);
    strmap_put(&m->global_by_name, name, len, (void *)(uintptr_t)m->funcs.len);
    return gv;
}

void ir_module_define(Module *m, GlobalVar *gv, Function *f, Span span) {
    FuncDef *d = ir_module_def_of(m, gv);
    RLY_CHECK(d != NULL, "ir_module_define: @%s is not a global of this module", gv->name);
    d->func = f;
    d->span = span;
}

TypeData *ir_module_add_type(Module *m, GlobalTypeVar *header, uint32_t n_tvars,
                             TypeVar *const *tvars, bool is_extern, Span span) {
    TypeData *td = arena_alloc(&m->ctx->arena, sizeof(TypeData));
    td->header = header;
    td->n_tvars = n_tvars;
    td->tvars = n_tvars ? arena_memdup(&m->ctx->arena, tvars, n_tvars * sizeof(TypeVar *)) : NULL;
    td->is_extern = is_extern;
    td->span = span;
    header->def = td;
    vec_push(&m->types, td);
    strmap_put(&m->type_by_name, header->name, strlen(header->name), td);
    return td;
}

Constructor *ir_module_add_ctor(Module *m, TypeData *td, const char *name, size_t len,
                                uint32_t n_inputs, Type *const *inputs, Span span) {
    Ctx *ctx = m->ctx;
    Constructor *c = arena_alloc(&ctx->arena, sizeof(Constructor));
    c->base.kind = EXPR_CONSTRUCTOR;
    c->base.id = ctx->next_id++;
    c->base.span = span;
    c->name = ir_intern(ctx, name, len);
    c->n_inputs = n_inputs;
    c->inputs = n_inputs ? arena_memdup(&ctx->arena, inputs, n_inputs * sizeof(Type *)) : NULL;
    c->belong_to = td->header;
    c->tag = m->next_tag++;
    /* td->ctors has room for 4 or the next power of two entries, so it is copied only when
     * n_ctors reaches such a size (copying on every add was quadratic in the number of ctors) */
    uint32_t n = td->n_ctors;
    if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
        Constructor **ctors = arena_array(&ctx->arena, n < 4 ? 4 : (size_t)n * 2, sizeof *ctors);
        for (uint32_t i = 0; i < n; i++)
            ctors[i] = td->ctors[i];
        td->ctors = ctors;
    }
    td->ctors[td->n_ctors++] = c;
    strmap_put(&m->ctor_by_name, name, len, c);
    return c;
}

TypeData *ir_module_lookup_type(const Module *m, const char *name, size_t len) {
    return strmap_get(&m->type_by_name, name, len);
}

Constructor *ir_module_lookup_ctor(const Module *m, const char *name, size_t len) {
    return strmap_get(&m->ctor_by_name, name, len);
}
