/* gradient.c - reverse-mode automatic differentiation as a program transform (docs/autodiff.md).
 *
 * Higher-order mode (the whole language). Every tensor value v of the program becomes a pair
 * (v, ref(adjoint)); tuple, function, reference and ADT types are lifted structurally (an ADT
 * is lifted through its type arguments: List[Tensor] becomes List[(Tensor, Ref[Tensor])]). A
 * reference `bp : Ref[fn() -> ()]`, the backpropagator, holds the backward pass built so far.
 * An operator call y = op(a..) computes y from the forward parts of its arguments, pairs it
 * with a fresh zero adjoint, and replaces bp with a closure that reads y's adjoint, builds the
 * arguments' adjoints with the operator's gradient (grad.h), adds them into the arguments'
 * adjoint references, then runs the previous bp. Closures capture bp; a global function @g
 * becomes @g_rev with bp as an extra last parameter (recursion and mutual recursion follow);
 * if and match branch on forward values; references hold lifted values. The driver lifts the
 * parameters, runs the lifted entry, seeds the adjoint of every floating-point result tensor
 * with ones, runs bp, and returns the result with the parameters' adjoints. Since the output is
 * an ordinary program whose operators have gradients, applying the transform again gives
 * second derivatives.
 *
 * First-order mode (dataflow programs: let, tuples, projections, operator calls). The body is
 * put in evaluation order (a tape), replayed as let-bound forward code, then walked backwards
 * accumulating adjoints symbolically (per tuple field), so the result is straight-line code
 * without closures or references.
 *
 * Both walk dataflow with explicit stacks (programs imported from ONNX are 10^5 nodes deep);
 * only nested scopes (function bodies, if and match branches) recurse.
 *
 * Types are DAGs: `let %a2 = (%a1, %a1)` doubles the tree size of a type with one node, so
 * nothing here walks a type as a tree. Types are lifted with the type rewriter (each node once,
 * memoized for the whole pass); code that follows a value's type (lower, lift, read adjoints,
 * zeros, ones, add, accumulate) is inlined for types of at most GRAD_INLINE_SIZE nodes as trees
 * and otherwise calls a helper global per (operation, type), built once, whose fields call the
 * helpers of their own types, so the code is linear in the type's DAG. Parameter annotations of
 * generated functions are left out past GRAD_ANNOT_SIZE (inference finds them from the calls),
 * so printing the result stays linear too. */
#include <stdio.h>
#include <string.h>

#include "passes/grad.h"
#include "passes/passes.h"
#include "types/types.h"

typedef struct Bind {
    Var *var;
    Expr *val;
} Bind;

typedef struct Block {
    Vec(Bind) binds;
    PtrMap memo; /* original Expr -> its atom in this block */
    struct Block *parent;
} Block;

/* Code following a type: inlined up to this many nodes (as a tree), else a helper's call. */
#define GRAD_INLINE_SIZE 64
/* Annotations on generated parameters are left out for types larger than this (as trees). */
#define GRAD_ANNOT_SIZE 512

/* The helper globals: per operation, a function of one value (two for ADD and ACCUM). */
typedef enum Helper {
    H_LOWER,    /* lifted value -> its forward part */
    H_LIFT,     /* value -> lifted with zero adjoints */
    H_READ_ADJ, /* lifted value -> the adjoints its references hold */
    H_ZEROS,    /* value -> zeros like it */
    H_ONES,     /* value -> ones like it (zeros for integer tensors: they get no adjoint) */
    H_ADD,      /* two adjoints -> their sum (integer fields: the first) */
    H_ACCUM,    /* lifted value, adjoint -> () after adding the adjoint into its references */
    H_COUNT
} Helper;

typedef struct AD {
    Module *m;
    Ctx *ctx;
    TypeRewriter lift_rw;    /* lift_type, memoized for the whole pass */
    Span lift_span;          /* where to report a type that cannot be lifted */
    PtrMap helpers[H_COUNT]; /* Type -> GlobalVar of its helper */
    uint32_t n_helpers;
    Span helper_span;
    Block *blk;
    Var *bp;             /* the backpropagator of the function being transformed */
    PtrMap vars;         /* original Var -> atom */
    PtrMap globals;      /* original GlobalVar -> its _rev GlobalVar */
    PtrVec pending;      /* original GlobalVars whose _rev is still to build */
    PtrMap adt_ok;       /* TypeData -> (void*)1 liftable, (void*)2 not */
    StrMap missing;      /* op names without a gradient (reported once in the summary) */
    StrBuf missing_list; /* "a, b, c" */
    uint32_t n_missing;
    bool failed;
    Type *unit;
    const char *out_name; /* the gradient's name: twins must not take it */
} AD;

/* ==== helpers ================================================================================ */

static bool fail(AD *ad, Span sp, const char *fmt, ...) RLY_PRINTF(3, 4);
static bool fail(AD *ad, Span sp, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_add(&ad->ctx->diags, DIAG_ERROR, sp, fmt, ap);
    va_end(ap);
    ad->failed = true;
    return false;
}

static Type *type_of(Expr *e) {
    if (e->checked_type) return e->checked_type;
    if (e->kind == EXPR_VAR) return AS_VAR(e)->ann;
    return NULL;
}

static bool is_float_tensor(Type *t) {
    return t->kind == TYPE_TENSOR && sup_dtype_is_float(AS_TENSOR_TYPE(t)->dtype);
}

/* Does a value of type t (tensors and tuples of them) hold a floating-point tensor? */
static bool has_float(Type *t) { return (t->flags & TYPE_HAS_FLOAT) != 0; }

/* Is t made of tensors and tuples only? */
static bool is_data_type(Type *t) { return (t->flags & TYPE_IS_DATA) != 0; }

/* Is code following t (a data type) a helper's call rather than inlined? */
static bool big(Type *t) { return t->kind == TYPE_TUPLE && t->size > GRAD_INLINE_SIZE; }

/* t as a generated parameter's annotation: NULL (inferred from the calls) when large. */
static Type *annot(Type *t) { return t && t->size <= GRAD_ANNOT_SIZE ? t : NULL; }

static Expr *op_call(AD *ad, const char *op, uint32_t n, Expr *const *args, Span sp) {
    return ir_call_new(ad->ctx, ir_op_get(ad->ctx, op, strlen(op)), n, args, NULL, 0, NULL, sp);
}
static Expr *op1(AD *ad, const char *op, Expr *x, Span sp) { return op_call(ad, op, 1, &x, sp); }
static Expr *op2(AD *ad, const char *op, Expr *x, Expr *y, Span sp) {
    Expr *a[2] = {x, y};
    return op_call(ad, op, 2, a, sp);
}
static Expr *get(AD *ad, Expr *t, uint32_t i, Span sp) {
    if (t->kind == EXPR_TUPLE && i < AS_TUPLE(t)->n) return AS_TUPLE(t)->fields[i];
    return ir_tuple_get_item_new(ad->ctx, t, i, sp);
}

/* ---- blocks of let bindings ---- */

static void push_block(AD *ad, Block *b) {
    memset(b, 0, sizeof *b);
    b->parent = ad->blk;
    ad->blk = b;
}

/* Close the current block around `result`: let v1 = e1; ... result. */
static Expr *pop_block(AD *ad, Expr *result, Span sp) {
    Block *b = ad->blk;
    for (size_t i = b->binds.len; i-- > 0;)
        result = ir_let_new(ad->ctx, b->binds.data[i].var, b->binds.data[i].val, result, sp);
    vec_free(&b->binds);
    ptrmap_free(&b->memo);
    ad->blk = b->parent;
    return result;
}

static bool is_atom(Expr *e) {
    return e->kind == EXPR_VAR || e->kind == EXPR_CONSTANT || e->kind == EXPR_GLOBAL_VAR ||
           e->kind == EXPR_OP || e->kind == EXPR_CONSTRUCTOR;
}

/* Bind val to a fresh variable in the current block (atoms are returned as they are). */
static Expr *emit(AD *ad, const char *name, Expr *val) {
    if (is_atom(val)) return val;
    Var *v = ir_var_new(ad->ctx, name, NULL, val->span);
    Bind b = {v, val};
    vec_push(&ad->blk->binds, b);
    return &v->base;
}

static Expr *memo_get(AD *ad, Expr *e) {
    for (Block *b = ad->blk; b; b = b->parent) {
        Expr *r = ptrmap_get(&b->memo, e);
        if (r) return r;
    }
    return NULL;
}

/* Not fatal to the walk: every use is reported, then the summary. */
static void record_missing(AD *ad, const Call *c, const char *name) {
    diag_error(&ad->ctx->diags, c->base.span, "operator %s has no gradient", name);
    size_t n = strlen(name);
    if (strmap_get(&ad->missing, name, n)) return;
    strmap_put(&ad->missing, name, n, (void *)1);
    sb_printf(&ad->missing_list, "%s%s", ad->n_missing ? ", " : "", name);
    ad->n_missing++;
}

/* ==== higher-order mode ======================================================================= */

/* What the fields of an ADT's constructors mention: a tensor type (anywhere), and the ADTs
 * they name (as a TypeCall's callee or bare). */
typedef struct AdtScan {
    bool tensor;
    PtrVec named; /* TypeData */
} AdtScan;

static bool adt_scan_pre(void *st, Type *t) {
    AdtScan *a = st;
    if (t->kind == TYPE_TENSOR) a->tensor = true;
    if (t->kind == TYPE_GLOBAL_VAR && AS_GLOBAL_TYPE_VAR(t)->def)
        vec_push(&a->named, AS_GLOBAL_TYPE_VAR(t)->def);
    return true;
}

/* An ADT lifts through its type arguments when its constructors' fields hold no tensor type
 * and name only ADTs that lift (List[A], Tree[A], Option[A]; recursion through itself is fine).
 * Decided for every ADT reachable from td at once, without recursion: an ADT does not lift when
 * one of its fields holds a tensor or it names one that does not lift. */
static bool adt_liftable(AD *ad, TypeData *td) {
    void *known = ptrmap_get(&ad->adt_ok, td);
    if (known) return known == (void *)1;
    PtrVec order = {0};                 /* the ADTs not decided yet, reachable from td */
    PtrMap index = {0};                 /* TypeData -> 1 + its position in order */
    Vec(uint32_t) from = {0}, to = {0}; /* order[from[k]] names order[to[k]] */
    Vec(uint8_t) bad = {0};
    vec_push(&order, td);
    vec_push(&bad, 0);
    ptrmap_put(&index, td, (void *)1);
    PtrMap seen = {0}; /* type nodes scanned */
    for (size_t i = 0; i < order.len; i++) {
        TypeData *x = order.data[i];
        AdtScan sc = {0};
        for (uint32_t k = 0; k < x->n_ctors; k++)
            for (uint32_t j = 0; j < x->ctors[k]->n_inputs; j++) {
                sc.tensor = false;
                ir_type_visit(x->ctors[k]->inputs[j], &seen, adt_scan_pre, NULL, &sc);
                if (sc.tensor) bad.data[i] = 1;
            }
        ptrmap_free(&seen); /* per ADT: a part shared with another ADT counts for each */
        for (size_t k = 0; k < sc.named.len; k++) {
            TypeData *y = sc.named.data[k];
            void *ky = ptrmap_get(&ad->adt_ok, y);
            if (ky) {
                if (ky != (void *)1) bad.data[i] = 1;
                continue;
            }
            uintptr_t iy = (uintptr_t)ptrmap_get(&index, y);
            if (iy == 0) {
                vec_push(&order, y);
                vec_push(&bad, 0);
                iy = order.len;
                ptrmap_put(&index, y, (void *)iy);
            }
            vec_push(&from, (uint32_t)i);
            vec_push(&to, (uint32_t)(iy - 1));
        }
        vec_free(&sc.named);
    }
    /* not lifting spreads backwards along "names" */
    Vec(uint32_t) work = {0};
    for (size_t i = 0; i < order.len; i++)
        if (bad.data[i]) vec_push(&work, (uint32_t)i);
    /* reverse adjacency: for each ADT the edges into it */
    uint32_t *head = sup_calloc(order.len + 1, sizeof *head), *next = NULL;
    next = sup_calloc(from.len + 1, sizeof *next);
    for (size_t k = 0; k < from.len; k++) {
        next[k] = head[to.data[k]];
        head[to.data[k]] = (uint32_t)k + 1;
    }
    while (work.len) {
        uint32_t y = vec_pop(&work);
        for (uint32_t e = head[y]; e; e = next[e - 1]) {
            uint32_t x = from.data[e - 1];
            if (!bad.data[x]) {
                bad.data[x] = 1;
                vec_push(&work, x);
            }
        }
    }
    for (size_t i = 0; i < order.len; i++)
        ptrmap_put(&ad->adt_ok, order.data[i], bad.data[i] ? (void *)2 : (void *)1);
    bool ok = !bad.data[0];
    free(head);
    free(next);
    vec_free(&work);
    vec_free(&order);
    ptrmap_free(&index);
    vec_free(&from);
    vec_free(&to);
    vec_free(&bad);
    return ok;
}

static Type *lift_pre(TypeRewriter *rw, Type *t, bool *stop) {
    AD *ad = rw->state;
    Span sp = ad->lift_span;
    switch ((TypeKind)t->kind) {
    case TYPE_TENSOR: {
        Type *f[2] = {t, ir_type_ref(ad->ctx, t)};
        *stop = true;
        return ir_type_tuple(ad->ctx, 2, f);
    }
    case TYPE_TUPLE:
    case TYPE_REF: return t;
    case TYPE_FUNC:
        if (AS_FUNC_TYPE(t)->n_constraints) {
            fail(ad, sp, "cannot differentiate through a function type with type relations");
            return NULL;
        }
        return t;
    case TYPE_CALL: {
        TypeCall *tc = AS_TYPE_CALL(t);
        if (tc->func->kind == TYPE_GLOBAL_VAR && AS_GLOBAL_TYPE_VAR(tc->func)->def &&
            !adt_liftable(ad, AS_GLOBAL_TYPE_VAR(tc->func)->def)) {
            fail(ad, sp,
                 "cannot differentiate through ADT %s: its constructors hold tensors directly "
                 "(make the tensor type a type parameter, as in List[A])",
                 AS_GLOBAL_TYPE_VAR(tc->func)->name);
            return NULL;
        }
        return t; /* the callee (checked here) and the arguments are lifted */
    }
    case TYPE_GLOBAL_VAR:
        if (AS_GLOBAL_TYPE_VAR(t)->def && !adt_liftable(ad, AS_GLOBAL_TYPE_VAR(t)->def)) {
            fail(ad, sp, "cannot differentiate through ADT %s: its constructors hold tensors",
                 AS_GLOBAL_TYPE_VAR(t)->name);
            return NULL;
        }
        *stop = true;
        return t;
    case TYPE_VAR: *stop = true; return t;
    default: fail(ad, sp, "cannot differentiate: a value's type is not fully known"); return NULL;
    }
}

/* The lifted type: tensors become (tensor, ref(adjoint)), structurally through tuples,
 * functions, references and ADT arguments. NULL after reporting at sp. */
static Type *lift_type(AD *ad, Type *t, Span sp) {
    ad->lift_span = sp;
    return ir_type_rewrite(&ad->lift_rw, t);
}

/* What a helper (or its inlined code) does to one tensor x of type t (y: the second operand of
 * H_ADD, the adjoint of H_ACCUM). */
static Expr *leaf(AD *ad, Helper k, Expr *x, Expr *y, Type *t, Span sp) {
    switch (k) {
    case H_LOWER: return get(ad, x, 0, sp);
    case H_LIFT: {
        Expr *f[2] = {x, ir_ref_create_new(ad->ctx, op1(ad, "zeros_like", x, sp), sp)};
        return ir_tuple_new(ad->ctx, 2, f, sp);
    }
    case H_READ_ADJ: return ir_ref_read_new(ad->ctx, get(ad, x, 1, sp), sp);
    case H_ZEROS: return op1(ad, "zeros_like", x, sp);
    case H_ONES: return op1(ad, is_float_tensor(t) ? "ones_like" : "zeros_like", x, sp);
    case H_ADD: return is_float_tensor(t) ? op2(ad, "add", x, y, sp) : x;
    case H_ACCUM: {
        Expr *r = get(ad, x, 1, sp);
        Expr *sum = op2(ad, "add", ir_ref_read_new(ad->ctx, r, sp), y, sp);
        return ir_ref_write_new(ad->ctx, get(ad, x, 1, sp), sum, sp);
    }
    case H_COUNT: break;
    }
    RLY_UNREACHABLE();
}

static GlobalVar *helper(AD *ad, Helper k, Type *t);

/* The value built from x (and y, for H_ADD) of data type t by applying leaf to each tensor,
 * tuples rebuilt field by field: inlined for a small type (the recursion is bounded by
 * GRAD_INLINE_SIZE), a helper's call for a big one. */
static Expr *map_data(AD *ad, Expr *x, Expr *y, Type *t, Span sp, Helper k) {
    if (t->kind == TYPE_TENSOR) return leaf(ad, k, x, y, t, sp);
    if (big(t)) {
        Expr *a[2] = {x, y};
        return ir_call_new(ad->ctx, &helper(ad, k, t)->base, y ? 2 : 1, a, NULL, 0, NULL, sp);
    }
    TupleType *tt = AS_TUPLE_TYPE(t);
    Expr **f = sup_calloc(tt->n + 1, sizeof *f);
    for (uint32_t i = 0; i < tt->n; i++)
        f[i] = map_data(ad, get(ad, x, i, sp), y ? get(ad, y, i, sp) : NULL, tt->fields[i], sp, k);
    Expr *r = ir_tuple_new(ad->ctx, tt->n, f, sp);
    free(f);
    return r;
}

/* The forward part of a lifted value; a value lifted with zero adjoints; the adjoint a lifted
 * value holds; zeros and ones shaped like a value; the sum of two adjoints. */
static Expr *lower(AD *ad, Expr *l, Type *t, Span sp) {
    return map_data(ad, l, NULL, t, sp, H_LOWER);
}
static Expr *lift_value(AD *ad, Expr *x, Type *t, Span sp) {
    return map_data(ad, x, NULL, t, sp, H_LIFT);
}
static Expr *read_adj(AD *ad, Expr *l, Type *t, Span sp) {
    return map_data(ad, l, NULL, t, sp, H_READ_ADJ);
}
static Expr *zeros_of(AD *ad, Expr *x, Type *t, Span sp) {
    return map_data(ad, x, NULL, t, sp, H_ZEROS);
}
static Expr *ones_of(AD *ad, Expr *x, Type *t, Span sp) {
    return map_data(ad, x, NULL, t, sp, H_ONES);
}
static Expr *add_adj(AD *ad, Expr *a, Expr *b, Type *t, Span sp) {
    return map_data(ad, a, b, t, sp, H_ADD);
}

/* Add the adjoint atom d (data type t) into the references of lifted value l. */
static void accumulate(AD *ad, Expr *l, Type *t, Expr *d, Span sp) {
    if (!has_float(t)) return; /* integer tensors have no adjoint */
    if (t->kind == TYPE_TENSOR) {
        emit(ad, "_", leaf(ad, H_ACCUM, l, d, t, sp));
        return;
    }
    if (big(t)) {
        Expr *a[2] = {l, d};
        emit(ad, "_", ir_call_new(ad->ctx, &helper(ad, H_ACCUM, t)->base, 2, a, NULL, 0, NULL, sp));
        return;
    }
    TupleType *tt = AS_TUPLE_TYPE(t);
    for (uint32_t i = 0; i < tt->n; i++)
        if (has_float(tt->fields[i]))
            accumulate(ad, get(ad, l, i, sp), tt->fields[i], emit(ad, "d", get(ad, d, i, sp)), sp);
}

static GlobalVar *fresh_global(AD *ad, const char *base, const char *suffix, Span sp);

/* Define the helper of operation k for the big tuple type t, whose big fields' helpers exist:
 * fn(%v[, %w]) { (field code...) } (H_ACCUM: the fields' accumulations, then ()). Parameters
 * are not annotated: t is big, and each helper's calls give its types. */
static void build_helper(AD *ad, Helper k, Type *t) {
    static const char *const names[H_COUNT] = {"grad_lower", "grad_lift", "grad_read_adj",
                                               "grad_zeros", "grad_ones", "grad_add",
                                               "grad_acc"};
    Ctx *ctx = ad->ctx;
    Span sp = ad->helper_span;
    TupleType *tt = AS_TUPLE_TYPE(t);
    char base[32];
    snprintf(base, sizeof base, "%s%u", names[k], ++ad->n_helpers);
    GlobalVar *g = fresh_global(ad, base, "", sp);
    ptrmap_put(&ad->helpers[k], t, g);
    bool two = k == H_ADD || k == H_ACCUM;
    Var *ps[2] = {ir_var_new(ctx, "v", NULL, sp), two ? ir_var_new(ctx, "w", NULL, sp) : NULL};
    Expr *v = &ps[0]->base, *w = two ? &ps[1]->base : NULL;
    Block *saved = ad->blk;
    ad->blk = NULL; /* a global: nothing of the function being transformed is in scope */
    Block b;
    push_block(ad, &b);
    Expr *body;
    if (k == H_ACCUM) {
        for (uint32_t i = 0; i < tt->n; i++)
            if (has_float(tt->fields[i]))
                accumulate(ad, get(ad, v, i, sp), tt->fields[i], emit(ad, "d", get(ad, w, i, sp)),
                           sp);
        body = ir_tuple_new(ctx, 0, NULL, sp);
    } else {
        Expr **f = sup_calloc(tt->n + 1, sizeof *f);
        for (uint32_t i = 0; i < tt->n; i++)
            f[i] =
                map_data(ad, get(ad, v, i, sp), w ? get(ad, w, i, sp) : NULL, tt->fields[i], sp, k);
        body = ir_tuple_new(ctx, tt->n, f, sp);
        free(f);
    }
    body = pop_block(ad, body, sp);
    ad->blk = saved;
    Expr *fn = ir_function_new(ctx, two ? 2 : 1, ps, body, NULL, 0, NULL, NULL, sp);
    ir_module_define(ad->m, g, AS_FUNCTION(fn), sp);
}

typedef struct HelperWalk {
    AD *ad;
    Helper k;
} HelperWalk;

/* The types whose helper of operation k the helper of a type calls: only big tuples have
 * helpers, and only big types hold big tuples (a part is smaller); an accumulation skips parts
 * without floating-point tensors (a helper nobody calls would have parameters without types). */
static bool helper_pre(void *st, Type *t) {
    HelperWalk *w = st;
    return big(t) && !ptrmap_has(&w->ad->helpers[w->k], t) && (w->k != H_ACCUM || has_float(t));
}
static void helper_post(void *st, Type *t) {
    HelperWalk *w = st;
    if (helper_pre(st, t)) build_helper(w->ad, w->k, t);
}

/* The helper of operation k for big tuple type t, built (with those of its parts, children
 * first, without recursion) on first use. */
static GlobalVar *helper(AD *ad, Helper k, Type *t) {
    GlobalVar *g = ptrmap_get(&ad->helpers[k], t);
    if (g) return g;
    HelperWalk w = {ad, k};
    PtrMap seen = {0};
    ir_type_visit(t, &seen, helper_pre, helper_post, &w);
    ptrmap_free(&seen);
    g = ptrmap_get(&ad->helpers[k], t);
    RLY_CHECK(g != NULL, "gradient: no helper built");
    return g;
}

static Expr *ho_scope(AD *ad, Expr *e);
static Expr *ho_function(AD *ad, Function *f);
static GlobalVar *ho_global(AD *ad, GlobalVar *gv);

/* y = op(args) on lifted atoms la[]. */
static Expr *ho_op_call(AD *ad, Call *c, Expr **la) {
    Op *op = AS_OP(c->op);
    Span sp = c->base.span;
    Type *tout = c->base.checked_type;
    Type **targ = sup_calloc(c->n_args + 1, sizeof *targ);
    Expr **fa = sup_calloc(c->n_args + 1, sizeof *fa);
    Expr **dargs = sup_calloc(c->n_args + 1, sizeof *dargs);
    bool float_in = false, data = is_data_type(tout);
    for (uint32_t i = 0; i < c->n_args; i++) {
        targ[i] = type_of(c->args[i]);
        data = data && is_data_type(targ[i]);
        if (!data) break;
        float_in = float_in || has_float(targ[i]);
        fa[i] = emit(ad, "a", lower(ad, la[i], targ[i], sp));
    }
    Expr *res = NULL;
    if (!data) {
        fail(ad, sp,
             "cannot differentiate %s: an argument or its result is not a tensor or a tuple",
             op->name);
        goto out;
    }
    Expr *y = emit(
        ad, "y",
        ir_call_new(ad->ctx, c->op, c->n_args, fa, c->attrs, c->n_type_args, c->type_args, sp));
    res = emit(ad, "yl", lift_value(ad, y, tout, sp));
    if (!float_in || !has_float(tout)) goto out; /* no gradient can flow */
    OpGradFn fn = grad_lookup(op->name);
    if (fn == NULL) {
        record_missing(ad, c, op->name);
        goto out;
    }
    Expr *prev = emit(ad, "prev", ir_ref_read_new(ad->ctx, &ad->bp->base, sp));
    Block b;
    push_block(ad, &b);
    Expr *dy = emit(ad, "dy", read_adj(ad, res, tout, sp));
    GradCall g = {ad->ctx, c, op->info, c->attrs, c->n_args, fa, targ, y, tout, dy, sp};
    StrBuf msg = {0};
    if (!fn(&g, dargs, &msg)) {
        fail(ad, sp, "cannot differentiate %s: %s", op->name, sb_cstr(&msg));
    } else {
        for (uint32_t i = 0; i < c->n_args; i++)
            if (dargs[i] && has_float(targ[i]))
                accumulate(ad, la[i], targ[i], emit(ad, "da", dargs[i]), sp);
    }
    sb_free(&msg);
    Expr *body = pop_block(ad, ir_call_new(ad->ctx, prev, 0, NULL, NULL, 0, NULL, sp), sp);
    Expr *clo = ir_function_new(ad->ctx, 0, NULL, body, NULL, 0, NULL, NULL, sp);
    emit(ad, "_", ir_ref_write_new(ad->ctx, &ad->bp->base, clo, sp));
out:
    free(targ);
    free(fa);
    free(dargs);
    return res;
}

/* A global used as a value: fn(p..) { @g_rev(p.., bp) }. */
static Expr *ho_global_value(AD *ad, GlobalVar *gv, Span sp) {
    FuncDef *d = ir_module_def_of(ad->m, gv);
    if (d == NULL || d->func == NULL) {
        fail(ad, sp, "cannot differentiate: @%s has no definition", gv->name);
        return NULL;
    }
    Function *gf = d->func; /* d dies when globals are added */
    if (gf->n_tparams) {
        fail(ad, sp, "cannot differentiate: the polymorphic @%s is used as a value", gv->name);
        return NULL;
    }
    uint32_t n = gf->n_params;
    Var **ps = sup_calloc(n + 1, sizeof *ps);
    Expr **args = sup_calloc(n + 2, sizeof *args);
    Expr *r = NULL;
    uint32_t i = 0;
    for (; i < n; i++) {
        Type *t = lift_type(ad, type_of(&gf->params[i]->base), sp);
        if (t == NULL) break;
        ps[i] = ir_var_new(ad->ctx, gf->params[i]->name, annot(t), sp);
        args[i] = &ps[i]->base;
    }
    if (i == n) {
        args[n] = &ad->bp->base;
        Expr *body = ir_call_new(ad->ctx, &ho_global(ad, gv)->base, n + 1, args, NULL, 0, NULL, sp);
        r = ir_function_new(ad->ctx, n, ps, body, NULL, 0, NULL, NULL, sp);
    }
    free(ps);
    free(args);
    return r;
}

static Pattern *ho_pattern(AD *ad, Pattern *p) {
    switch ((PatternKind)p->kind) {
    case PAT_WILDCARD: return p;
    case PAT_VAR: {
        Var *nv = ir_var_new(ad->ctx, p->var->name, NULL, p->var->base.span);
        ptrmap_put(&ad->vars, p->var, nv);
        return ir_pattern_var(ad->ctx, nv, p->span);
    }
    case PAT_CTOR:
    case PAT_TUPLE: {
        Pattern **ps = sup_calloc(p->n + 1, sizeof *ps);
        for (uint32_t i = 0; i < p->n; i++)
            ps[i] = ho_pattern(ad, p->pats[i]);
        Pattern *r = p->kind == PAT_CTOR ? ir_pattern_ctor(ad->ctx, p->ctor, p->n, ps, p->span)
                                         : ir_pattern_tuple(ad->ctx, p->n, ps, p->span);
        free(ps);
        return r;
    }
    }
    return p;
}

typedef struct Frame {
    Expr *e;
    int state;
} Frame;
typedef Vec(Frame) FrameVec;

static void pushf(FrameVec *st, Expr *e) {
    Frame f = {e, 0};
    vec_push(st, f);
}

/* Push the dataflow children of e that must be computed before it. */
static void push_kids(FrameVec *st, Expr *e) {
    switch ((ExprKind)e->kind) {
    case EXPR_TUPLE:
        for (uint32_t i = AS_TUPLE(e)->n; i-- > 0;)
            pushf(st, AS_TUPLE(e)->fields[i]);
        break;
    case EXPR_TUPLE_GET_ITEM: pushf(st, AS_TUPLE_GET_ITEM(e)->tuple); break;
    case EXPR_CALL: {
        Call *c = AS_CALL(e);
        for (uint32_t i = c->n_args; i-- > 0;)
            pushf(st, c->args[i]);
        if (c->op->kind != EXPR_OP && c->op->kind != EXPR_GLOBAL_VAR &&
            c->op->kind != EXPR_CONSTRUCTOR)
            pushf(st, c->op);
        break;
    }
    case EXPR_REF_CREATE: pushf(st, AS_REF_CREATE(e)->value); break;
    case EXPR_REF_READ: pushf(st, AS_REF_READ(e)->ref); break;
    case EXPR_REF_WRITE:
        pushf(st, AS_REF_WRITE(e)->value);
        pushf(st, AS_REF_WRITE(e)->ref);
        break;
    case EXPR_IF: pushf(st, AS_IF(e)->cond); break;
    case EXPR_MATCH: pushf(st, AS_MATCH(e)->data); break;
    default: break;
    }
}

/* The lifted atom of an already transformed child. */
static Expr *done(AD *ad, Expr *e) {
    if (e->kind == EXPR_VAR) return ptrmap_get(&ad->vars, e);
    if (e->kind == EXPR_OP || e->kind == EXPR_CONSTRUCTOR) return e;
    return memo_get(ad, e);
}

/* Transform one node whose children are done; NULL after an error. */
static Expr *ho_node(AD *ad, Expr *e) {
    Ctx *ctx = ad->ctx;
    Span sp = e->span;
    switch ((ExprKind)e->kind) {
    case EXPR_CONSTANT: {
        Type *t = e->checked_type;
        return emit(ad, "c", lift_value(ad, e, t, sp));
    }
    case EXPR_GLOBAL_VAR: return emit(ad, "g", ho_global_value(ad, AS_GLOBAL_VAR(e), sp));
    case EXPR_OP: fail(ad, sp, "an operator used as a value cannot be differentiated"); return NULL;
    case EXPR_TUPLE: {
        Tuple *t = AS_TUPLE(e);
        Expr **f = sup_calloc(t->n + 1, sizeof *f);
        for (uint32_t i = 0; i < t->n; i++)
            f[i] = done(ad, t->fields[i]);
        Expr *r = emit(ad, "t", ir_tuple_new(ctx, t->n, f, sp));
        free(f);
        return r;
    }
    case EXPR_TUPLE_GET_ITEM: {
        TupleGetItem *g = AS_TUPLE_GET_ITEM(e);
        return emit(ad, "p", ir_tuple_get_item_new(ctx, done(ad, g->tuple), g->index, sp));
    }
    case EXPR_CALL: {
        Call *c = AS_CALL(e);
        Expr **a = sup_calloc(c->n_args + 2, sizeof *a);
        for (uint32_t i = 0; i < c->n_args; i++)
            a[i] = done(ad, c->args[i]);
        Expr *r = NULL;
        if (c->op->kind == EXPR_OP) {
            r = ho_op_call(ad, c, a);
        } else if (c->op->kind == EXPR_GLOBAL_VAR) {
            a[c->n_args] = &ad->bp->base;
            GlobalVar *g = ho_global(ad, AS_GLOBAL_VAR(c->op));
            r = emit(ad, "r", ir_call_new(ctx, &g->base, c->n_args + 1, a, NULL, 0, NULL, sp));
        } else {
            Expr *f = c->op->kind == EXPR_CONSTRUCTOR ? c->op : done(ad, c->op);
            r = emit(ad, "r", ir_call_new(ctx, f, c->n_args, a, NULL, 0, NULL, sp));
        }
        free(a);
        return r;
    }
    case EXPR_REF_CREATE:
        return emit(ad, "ref", ir_ref_create_new(ctx, done(ad, AS_REF_CREATE(e)->value), sp));
    case EXPR_REF_READ:
        return emit(ad, "v", ir_ref_read_new(ctx, done(ad, AS_REF_READ(e)->ref), sp));
    case EXPR_REF_WRITE: {
        RefWrite *w = AS_REF_WRITE(e);
        return emit(ad, "u", ir_ref_write_new(ctx, done(ad, w->ref), done(ad, w->value), sp));
    }
    case EXPR_IF: {
        If *i = AS_IF(e);
        Expr *cond = get(ad, done(ad, i->cond), 0, sp);
        Expr *th = ho_scope(ad, i->then_branch);
        Expr *el = ho_scope(ad, i->else_branch);
        return emit(ad, "r", ir_if_new(ctx, cond, th, el, sp));
    }
    case EXPR_MATCH: {
        Match *mt = AS_MATCH(e);
        Clause *cl = sup_calloc(mt->n_clauses + 1, sizeof *cl);
        for (uint32_t k = 0; k < mt->n_clauses; k++) {
            cl[k].lhs = ho_pattern(ad, mt->clauses[k].lhs);
            cl[k].rhs = ho_scope(ad, mt->clauses[k].rhs);
            cl[k].span = mt->clauses[k].span;
        }
        Expr *r = emit(ad, "r",
                       ir_match_new(ctx, done(ad, mt->data), mt->n_clauses, cl, mt->complete, sp));
        free(cl);
        return r;
    }
    case EXPR_FUNCTION: return emit(ad, "f", ho_function(ad, AS_FUNCTION(e)));
    default: fail(ad, sp, "cannot differentiate this expression"); return NULL;
    }
}

/* Transform e in the current block; its atom (NULL after an error). Iterative over dataflow and
 * let chains. */
static Expr *ho_walk(AD *ad, Expr *root) {
    FrameVec st = {0};
    pushf(&st, root);
    Expr *result = NULL;
    while (st.len && !ad->failed) {
        size_t top = st.len - 1;
        Expr *e = st.data[top].e;
        int state = st.data[top].state;
        if (state == 0 && done(ad, e)) {
            st.len--;
            continue;
        }
        if (e->kind == EXPR_VAR) {
            fail(ad, e->span, "internal: variable %s used out of scope", AS_VAR(e)->name);
            break;
        }
        if (e->kind == EXPR_LET) {
            Let *l = AS_LET(e);
            if (state == 0) {
                if (l->value->kind == EXPR_FUNCTION) {
                    Type *t = lift_type(ad, type_of(&l->var->base), l->var->base.span);
                    if (t == NULL) break;
                    Var *nv = ir_var_new(ad->ctx, l->var->name, annot(t), l->var->base.span);
                    ptrmap_put(&ad->vars, l->var, nv);
                    Expr *fn = ho_function(ad, AS_FUNCTION(l->value));
                    if (fn == NULL) break;
                    Bind b = {nv, fn};
                    vec_push(&ad->blk->binds, b);
                    st.data[top].state = 2;
                    pushf(&st, l->body);
                } else {
                    st.data[top].state = 1;
                    pushf(&st, l->value);
                }
            } else if (state == 1) {
                ptrmap_put(&ad->vars, l->var, done(ad, l->value));
                st.data[top].state = 2;
                pushf(&st, l->body);
            } else {
                ptrmap_put(&ad->blk->memo, e, done(ad, l->body));
                st.len--;
            }
            continue;
        }
        if (state == 0) {
            st.data[top].state = 1;
            push_kids(&st, e);
            continue;
        }
        Expr *r = ho_node(ad, e);
        if (r == NULL) {
            ad->failed = true;
            break;
        }
        ptrmap_put(&ad->blk->memo, e, r);
        st.len--;
    }
    if (!ad->failed) result = done(ad, root);
    vec_free(&st);
    return result;
}

static Expr *ho_scope(AD *ad, Expr *e) {
    Block b;
    push_block(ad, &b);
    Expr *r = ho_walk(ad, e);
    if (r == NULL) r = ir_tuple_new(ad->ctx, 0, NULL, e->span); /* failed: a placeholder */
    return pop_block(ad, r, e->span);
}

/* fn(p..) { body } with lifted parameters; bp is captured. */
static Expr *ho_function(AD *ad, Function *f) {
    Span sp = f->base.span;
    Var **ps = sup_calloc(f->n_params + 1, sizeof *ps);
    Expr *r = NULL;
    uint32_t i = 0;
    for (; i < f->n_params; i++) {
        Var *p = f->params[i];
        Type *t = lift_type(ad, type_of(&p->base), p->base.span);
        if (t == NULL) break;
        ps[i] = ir_var_new(ad->ctx, p->name, annot(t), p->base.span);
        ptrmap_put(&ad->vars, p, ps[i]);
    }
    if (i == f->n_params) {
        Expr *body = ho_scope(ad, f->body);
        if (!ad->failed)
            r = ir_function_new(ad->ctx, f->n_params, ps, body, NULL, f->n_tparams, f->tparams,
                                NULL, sp);
    }
    free(ps);
    return r;
}

/* A fresh global name "<base><suffix>" (then _2, _3, ...), neither defined nor the name the
 * gradient itself will get. */
static GlobalVar *fresh_global(AD *ad, const char *base, const char *suffix, Span sp) {
    StrBuf sb = {0};
    sb_printf(&sb, "%s%s", base, suffix);
    for (int k = 2; ir_module_lookup(ad->m, sb.data, sb.len) || strcmp(sb.data, ad->out_name) == 0;
         k++) {
        sb.len = 0;
        sb_printf(&sb, "%s%s_%d", base, suffix, k);
    }
    GlobalVar *g = ir_module_global(ad->m, sb.data, sb.len, sp);
    sb_free(&sb);
    return g;
}

/* The _rev twin of a global (built later, from ad->pending). */
static GlobalVar *ho_global(AD *ad, GlobalVar *gv) {
    GlobalVar *g = ptrmap_get(&ad->globals, gv);
    if (g) return g;
    g = fresh_global(ad, gv->name, "_rev", gv->base.span);
    ptrmap_put(&ad->globals, gv, g);
    vec_push(&ad->pending, gv);
    return g;
}

/* Build @g_rev(p.., bp) for a pending global. */
static void ho_build_global(AD *ad, GlobalVar *gv) {
    FuncDef *d = ir_module_def_of(ad->m, gv);
    if (d == NULL || d->func == NULL) {
        fail(ad, gv->base.span, "cannot differentiate: @%s has no definition", gv->name);
        return;
    }
    Function *f = d->func;
    Span sp = f->base.span, def_span = d->span; /* d dies when globals are added */
    Var *saved_bp = ad->bp;
    Block *saved_blk = ad->blk;
    ad->blk = NULL;
    Type *bpt = ir_type_ref(ad->ctx, ir_type_func(ad->ctx, 0, NULL, ad->unit, 0, NULL, 0, NULL));
    ad->bp = ir_var_new(ad->ctx, "bp", bpt, sp);
    Var **ps = sup_calloc(f->n_params + 2, sizeof *ps);
    uint32_t i = 0;
    for (; i < f->n_params; i++) {
        Var *p = f->params[i];
        Type *t = lift_type(ad, type_of(&p->base), p->base.span);
        if (t == NULL) break;
        ps[i] = ir_var_new(ad->ctx, p->name, annot(t), p->base.span);
        ptrmap_put(&ad->vars, p, ps[i]);
    }
    if (i == f->n_params) {
        ps[i] = ad->bp;
        Expr *body = ho_scope(ad, f->body);
        Type *ret = f->ret_type ? annot(lift_type(ad, f->ret_type, sp)) : NULL;
        if (!ad->failed) {
            Expr *fn = ir_function_new(ad->ctx, f->n_params + 1, ps, body, ret, f->n_tparams,
                                       f->tparams, NULL, sp);
            ir_module_define(ad->m, ptrmap_get(&ad->globals, gv), AS_FUNCTION(fn), def_span);
        }
    }
    free(ps);
    ad->bp = saved_bp;
    ad->blk = saved_blk;
}

/* fn(x..) { lift x; r = @entry_rev(x'.., bp); seed; bp(); (r, grads) } */
static Function *ho_driver(AD *ad, GlobalVar *entry, Function *f) {
    Span sp = f->base.span;
    Ctx *ctx = ad->ctx;
    Type *rt = AS_FUNC_TYPE(f->base.checked_type)->ret;
    Block b;
    push_block(ad, &b);
    Type *bpt = ir_type_ref(ctx, ir_type_func(ctx, 0, NULL, ad->unit, 0, NULL, 0, NULL));
    Expr *noop =
        ir_function_new(ctx, 0, NULL, ir_tuple_new(ctx, 0, NULL, sp), NULL, 0, NULL, NULL, sp);
    Var *bp = ir_var_new(ctx, "bp", bpt, sp);
    Bind bb = {bp, ir_ref_create_new(ctx, noop, sp)};
    vec_push(&ad->blk->binds, bb);
    uint32_t n = f->n_params;
    Var **ps = sup_calloc(n + 1, sizeof *ps);
    Expr **xl = sup_calloc(n + 2, sizeof *xl);
    Type **pt = sup_calloc(n + 1, sizeof *pt);
    Function *res = NULL;
    for (uint32_t i = 0; i < n; i++) {
        pt[i] = type_of(&f->params[i]->base);
        ps[i] = ir_var_new(ctx, f->params[i]->name, pt[i], f->params[i]->base.span);
        xl[i] = emit(ad, "xl", lift_value(ad, &ps[i]->base, pt[i], sp));
    }
    xl[n] = &bp->base;
    GlobalVar *g = ho_global(ad, entry);
    Expr *r = emit(ad, "r", ir_call_new(ctx, &g->base, n + 1, xl, NULL, 0, NULL, sp));
    /* seed: the adjoint of every float result tensor gets ones */
    PtrVec leaves = {0}, ltypes = {0};
    if (big(rt)) { /* by helpers: walking rt as a tree could take exponential time */
        Expr *one = emit(ad, "one", ones_of(ad, emit(ad, "rv", lower(ad, r, rt, sp)), rt, sp));
        accumulate(ad, r, rt, one, sp);
    } else {
        vec_push(&leaves, r);
        vec_push(&ltypes, rt);
    }
    while (leaves.len) {
        Expr *l = vec_pop(&leaves);
        Type *t = vec_pop(&ltypes);
        if (t->kind == TYPE_TUPLE) {
            for (uint32_t i = 0; i < AS_TUPLE_TYPE(t)->n; i++) {
                vec_push(&leaves, emit(ad, "rf", get(ad, l, i, sp)));
                vec_push(&ltypes, AS_TUPLE_TYPE(t)->fields[i]);
            }
        } else if (is_float_tensor(t)) {
            accumulate(ad, l, t, emit(ad, "one", op1(ad, "ones_like", get(ad, l, 0, sp), sp)), sp);
        }
    }
    vec_free(&leaves);
    vec_free(&ltypes);
    emit(ad, "_",
         ir_call_new(ctx, ir_ref_read_new(ctx, &bp->base, sp), 0, NULL, NULL, 0, NULL, sp));
    Expr **gr = sup_calloc(n + 1, sizeof *gr);
    for (uint32_t i = 0; i < n; i++)
        gr[i] = read_adj(ad, xl[i], pt[i], sp);
    Expr *out[2] = {lower(ad, r, rt, sp), ir_tuple_new(ctx, n, gr, sp)};
    Expr *body = pop_block(ad, ir_tuple_new(ctx, 2, out, sp), sp);
    res = AS_FUNCTION(ir_function_new(ctx, n, ps, body, NULL, 0, NULL, NULL, sp));
    free(gr);
    free(ps);
    free(xl);
    free(pt);
    return res;
}

/* ==== first-order mode ======================================================================== */

typedef struct Adj {
    Expr *sum;  /* a tensor's accumulated adjoint (atom), NULL when none yet */
    uint32_t n; /* a tuple's fields */
    struct Adj **f;
} Adj;

typedef struct FO {
    AD *ad;
    PtrMap alias; /* let-bound Var -> its value's source node */
    PtrMap fwd;   /* source node (tape node or parameter Var) -> forward atom */
    PtrMap adj;   /* source node -> Adj */
    PtrVec tape;  /* Call / Tuple / TupleGetItem nodes in evaluation order */
    PtrVec adjs;  /* every Adj, to free */
} FO;

static Expr *fo_src(FO *fo, Expr *e) {
    while (e->kind == EXPR_VAR || e->kind == EXPR_LET) {
        Expr *a = ptrmap_get(&fo->alias, e);
        if (a == NULL) break; /* a parameter */
        e = a;
    }
    return e;
}

static Expr *fo_atom(FO *fo, Expr *e) {
    e = fo_src(fo, e);
    if (e->kind == EXPR_CONSTANT) return e;
    return ptrmap_get(&fo->fwd, e);
}

static Adj *adj_new(FO *fo) {
    Adj *a = sup_calloc(1, sizeof *a);
    vec_push(&fo->adjs, a);
    return a;
}

static Adj *adj_of(FO *fo, Expr *src) {
    Adj *a = ptrmap_get(&fo->adj, src);
    if (a == NULL) {
        a = adj_new(fo);
        ptrmap_put(&fo->adj, src, a);
    }
    return a;
}

/* Give a tuple's Adj its per-field Adjs (once). */
static void adj_fields(FO *fo, Adj *a, TupleType *tt) {
    if (a->f) return;
    a->n = tt->n;
    a->f = sup_calloc(tt->n + 1, sizeof *a->f);
    vec_push(&fo->adjs, a->f); /* freed with the Adjs */
    for (uint32_t i = 0; i < tt->n; i++)
        a->f[i] = adj_new(fo);
}

static void adj_add(FO *fo, Adj *a, Type *t, Expr *d, Span sp) {
    AD *ad = fo->ad;
    if (t->kind == TYPE_TENSOR) {
        if (!is_float_tensor(t)) return;
        d = emit(ad, "d", d);
        a->sum = a->sum ? emit(ad, "acc", op2(ad, "add", a->sum, d, sp)) : d;
        return;
    }
    if (big(t)) { /* the whole value: per field, as below, would follow t as a tree */
        d = emit(ad, "d", d);
        a->sum = a->sum ? emit(ad, "acc", add_adj(ad, a->sum, d, t, sp)) : d;
        return;
    }
    TupleType *tt = AS_TUPLE_TYPE(t);
    adj_fields(fo, a, tt);
    if (d->kind != EXPR_TUPLE) d = emit(ad, "d", d);
    for (uint32_t i = 0; i < tt->n; i++)
        if (has_float(tt->fields[i])) adj_add(fo, a->f[i], tt->fields[i], get(ad, d, i, sp), sp);
}

/* The accumulated adjoint of primal x (type t); NULL when nothing flowed into it. A big tuple's
 * Adj has whole-value contributions (sum) and, from projections, per-field ones (f; each field
 * Adj is only ever added to, so this does not nest further than a small type's fields). */
static Expr *adj_value(FO *fo, Adj *a, Expr *x, Type *t, Span sp) {
    AD *ad = fo->ad;
    if (a == NULL) return NULL;
    if (t->kind == TYPE_TENSOR) return a->sum;
    if (a->f == NULL) return big(t) ? a->sum : NULL;
    TupleType *tt = AS_TUPLE_TYPE(t);
    Expr **f = sup_calloc(tt->n + 1, sizeof *f);
    bool any = false;
    for (uint32_t i = 0; i < tt->n; i++) {
        f[i] = adj_value(fo, a->f[i], get(ad, x, i, sp), tt->fields[i], sp);
        any = any || f[i];
    }
    Expr *r = NULL;
    if (any) {
        for (uint32_t i = 0; i < tt->n; i++)
            if (f[i] == NULL) f[i] = zeros_of(ad, get(ad, x, i, sp), tt->fields[i], sp);
        r = ir_tuple_new(ad->ctx, tt->n, f, sp);
    }
    free(f);
    if (big(t) && a->sum) r = r ? add_adj(ad, a->sum, emit(ad, "d", r), t, sp) : a->sum;
    return r;
}

/* Put the body in evaluation order; false after reporting constructs this mode does not take. */
static bool fo_tape(FO *fo, Expr *root) {
    AD *ad = fo->ad;
    FrameVec st = {0};
    PtrMap seen = {0};
    pushf(&st, root);
    while (st.len) {
        size_t top = st.len - 1;
        Expr *e = st.data[top].e;
        int state = st.data[top].state;
        switch ((ExprKind)e->kind) {
        case EXPR_VAR:
        case EXPR_CONSTANT: st.len--; continue;
        case EXPR_LET: {
            Let *l = AS_LET(e);
            if (state == 0) {
                if (l->value->kind == EXPR_FUNCTION) {
                    fail(ad, l->value->span,
                         "first-order gradient: local functions are not supported (use "
                         "--mode higher)");
                    st.len--;
                    continue;
                }
                st.data[top].state = 1;
                pushf(&st, l->value);
            } else if (state == 1) {
                ptrmap_put(&fo->alias, l->var, fo_src(fo, l->value));
                st.data[top].state = 2;
                pushf(&st, l->body);
            } else {
                ptrmap_put(&fo->alias, e, fo_src(fo, l->body));
                st.len--;
            }
            continue;
        }
        case EXPR_TUPLE:
        case EXPR_TUPLE_GET_ITEM:
        case EXPR_CALL:
            if (e->kind == EXPR_CALL && AS_CALL(e)->op->kind != EXPR_OP) {
                fail(ad, e->span,
                     "first-order gradient: only operator calls are supported, not calls of "
                     "functions, globals or constructors (use --mode higher)");
                st.len--;
                continue;
            }
            if (ptrmap_has(&seen, e)) {
                st.len--;
                continue;
            }
            if (state == 0) {
                st.data[top].state = 1;
                push_kids(&st, e);
            } else {
                ptrmap_put(&seen, e, e);
                vec_push(&fo->tape, e);
                st.len--;
            }
            continue;
        default: {
            static const char *const what[EXPR_KIND_COUNT] = {
                [EXPR_IF] = "if",
                [EXPR_MATCH] = "match",
                [EXPR_FUNCTION] = "functions",
                [EXPR_REF_CREATE] = "references",
                [EXPR_REF_READ] = "references",
                [EXPR_REF_WRITE] = "references",
                [EXPR_GLOBAL_VAR] = "globals used as values",
                [EXPR_CONSTRUCTOR] = "constructors",
                [EXPR_OP] = "operators used as values",
            };
            const char *w =
                e->kind < EXPR_KIND_COUNT && what[e->kind] ? what[e->kind] : "this expression";
            fail(ad, e->span, "first-order gradient: %s are not supported (use --mode higher)", w);
            st.len--;
            continue;
        }
        }
    }
    vec_free(&st);
    ptrmap_free(&seen);
    return !ad->failed;
}

/* One backward step: the adjoint dv of tape node e flows into its operands. */
static void fo_back(FO *fo, Expr *e, Expr *dv) {
    AD *ad = fo->ad;
    Span sp = e->span;
    if (e->kind == EXPR_TUPLE) {
        Tuple *t = AS_TUPLE(e);
        if (dv->kind != EXPR_TUPLE) dv = emit(ad, "d", dv);
        for (uint32_t i = 0; i < t->n; i++) {
            Expr *src = fo_src(fo, t->fields[i]);
            Type *ti = type_of(t->fields[i]);
            if (src->kind != EXPR_CONSTANT && has_float(ti))
                adj_add(fo, adj_of(fo, src), ti, get(ad, dv, i, sp), sp);
        }
        return;
    }
    if (e->kind == EXPR_TUPLE_GET_ITEM) {
        TupleGetItem *g = AS_TUPLE_GET_ITEM(e);
        Expr *src = fo_src(fo, g->tuple);
        Type *tt = type_of(g->tuple);
        if (src->kind == EXPR_CONSTANT) return;
        Adj *a = adj_of(fo, src);
        adj_fields(fo, a, AS_TUPLE_TYPE(tt));
        adj_add(fo, a->f[g->index], AS_TUPLE_TYPE(tt)->fields[g->index], dv, sp);
        return;
    }
    Call *c = AS_CALL(e);
    Op *op = AS_OP(c->op);
    Type *tout = e->checked_type;
    Type **targ = sup_calloc(c->n_args + 1, sizeof *targ);
    Expr **fa = sup_calloc(c->n_args + 1, sizeof *fa);
    Expr **dargs = sup_calloc(c->n_args + 1, sizeof *dargs);
    bool float_in = false;
    for (uint32_t i = 0; i < c->n_args; i++) {
        targ[i] = type_of(c->args[i]);
        fa[i] = fo_atom(fo, c->args[i]);
        float_in = float_in || has_float(targ[i]);
    }
    OpGradFn fn = float_in && has_float(tout) ? grad_lookup(op->name) : NULL;
    if (fn) {
        Expr *dy = emit(ad, "dy", dv);
        GradCall g = {ad->ctx, c,  op->info, c->attrs, c->n_args, fa, targ, ptrmap_get(&fo->fwd, e),
                      tout,    dy, sp};
        StrBuf msg = {0};
        if (!fn(&g, dargs, &msg)) {
            fail(ad, sp, "cannot differentiate %s: %s", op->name, sb_cstr(&msg));
        } else {
            for (uint32_t i = 0; i < c->n_args; i++) {
                Expr *src = fo_src(fo, c->args[i]);
                if (dargs[i] && has_float(targ[i]) && src->kind != EXPR_CONSTANT)
                    adj_add(fo, adj_of(fo, src), targ[i], dargs[i], sp);
            }
        }
        sb_free(&msg);
    }
    free(targ);
    free(fa);
    free(dargs);
}

static Function *fo_gradient(AD *ad, Function *f) {
    Span sp = f->base.span;
    Ctx *ctx = ad->ctx;
    FO fo = {0};
    fo.ad = ad;
    Function *res = NULL;
    uint32_t n = f->n_params;
    Var **ps = sup_calloc(n + 1, sizeof *ps);
    Expr **gr = sup_calloc(n + 1, sizeof *gr);
    Type *rt = AS_FUNC_TYPE(f->base.checked_type)->ret;
    Block b;
    push_block(ad, &b);
    bool ok = fo_tape(&fo, f->body);
    for (size_t k = 0; ok && k < fo.tape.len; k++) { /* every operator needs its gradient */
        Expr *e = fo.tape.data[k];
        if (e->kind != EXPR_CALL) continue;
        Call *c = AS_CALL(e);
        bool float_in = false;
        for (uint32_t i = 0; i < c->n_args; i++)
            float_in = float_in || has_float(type_of(c->args[i]));
        if (float_in && has_float(e->checked_type) && !grad_lookup(AS_OP(c->op)->name))
            record_missing(ad, c, AS_OP(c->op)->name);
    }
    ok = ok && ad->n_missing == 0;
    for (uint32_t i = 0; ok && i < n; i++) {
        Var *p = f->params[i];
        ps[i] = ir_var_new(ctx, p->name, type_of(&p->base), p->base.span);
        ptrmap_put(&fo.fwd, p, ps[i]);
    }
    /* forward */
    for (size_t k = 0; ok && k < fo.tape.len; k++) {
        Expr *e = fo.tape.data[k], *v = NULL;
        Span esp = e->span;
        if (e->kind == EXPR_TUPLE) {
            Tuple *t = AS_TUPLE(e);
            Expr **fs = sup_calloc(t->n + 1, sizeof *fs);
            for (uint32_t i = 0; i < t->n; i++)
                fs[i] = fo_atom(&fo, t->fields[i]);
            v = ir_tuple_new(ctx, t->n, fs, esp);
            free(fs);
        } else if (e->kind == EXPR_TUPLE_GET_ITEM) {
            TupleGetItem *g = AS_TUPLE_GET_ITEM(e);
            v = ir_tuple_get_item_new(ctx, fo_atom(&fo, g->tuple), g->index, esp);
        } else {
            Call *c = AS_CALL(e);
            Expr **as = sup_calloc(c->n_args + 1, sizeof *as);
            for (uint32_t i = 0; i < c->n_args; i++)
                as[i] = fo_atom(&fo, c->args[i]);
            v = ir_call_new(ctx, c->op, c->n_args, as, c->attrs, c->n_type_args, c->type_args, esp);
            free(as);
        }
        Var *x = ir_var_new(ctx, "x", NULL, esp);
        Bind bd = {x, v};
        vec_push(&ad->blk->binds, bd);
        ptrmap_put(&fo.fwd, e, x);
    }
    Expr *body = NULL;
    if (ok) {
        Expr *rsrc = fo_src(&fo, f->body);
        Expr *result = fo_atom(&fo, f->body);
        /* seed, then walk the tape backwards */
        if (rsrc->kind != EXPR_CONSTANT && has_float(rt))
            adj_add(&fo, adj_of(&fo, rsrc), rt, ones_of(ad, result, rt, sp), sp);
        for (size_t k = fo.tape.len; k-- > 0;) {
            Expr *e = fo.tape.data[k];
            Expr *dv = adj_value(&fo, ptrmap_get(&fo.adj, e), ptrmap_get(&fo.fwd, e),
                                 e->checked_type, e->span);
            if (dv) fo_back(&fo, e, dv);
        }
        for (uint32_t i = 0; i < n; i++) {
            Type *t = type_of(&ps[i]->base);
            gr[i] = adj_value(&fo, ptrmap_get(&fo.adj, f->params[i]), &ps[i]->base, t, sp);
            if (gr[i] == NULL) gr[i] = zeros_of(ad, &ps[i]->base, t, sp);
        }
        Expr *out[2] = {result, ir_tuple_new(ctx, n, gr, sp)};
        body = ir_tuple_new(ctx, 2, out, sp);
    }
    body = pop_block(ad, body ? body : ir_tuple_new(ctx, 0, NULL, sp), sp);
    if (ok && !ad->failed)
        res = AS_FUNCTION(ir_function_new(ctx, n, ps, body, NULL, 0, NULL, NULL, sp));
    for (size_t i = 0; i < fo.adjs.len; i++)
        free(fo.adjs.data[i]);
    vec_free(&fo.adjs);
    vec_free(&fo.tape);
    ptrmap_free(&fo.alias);
    ptrmap_free(&fo.fwd);
    ptrmap_free(&fo.adj);
    free(ps);
    free(gr);
    return res;
}

/* ==== entry =================================================================================== */

bool pass_gradient(Module *m, const char *entry, GradMode mode, const char *out_name) {
    Ctx *ctx = m->ctx;
    FuncDef *d = ir_module_lookup(m, entry, strlen(entry));
    if (d == NULL || d->func == NULL) {
        diag_error(&ctx->diags, SPAN_NONE, "gradient: no function @%s in the module", entry);
        return false;
    }
    Function *f = d->func;
    GlobalVar *entry_gv = d->gvar;
    Span def_span = d->span; /* d points into m->funcs, which grows below */
    if (f->n_tparams) {
        diag_error(&ctx->diags, f->base.span,
                   "gradient: @%s has type parameters; differentiate a monomorphic function",
                   entry);
        return false;
    }
    if (f->base.checked_type == NULL || f->base.checked_type->kind != TYPE_FUNC) {
        diag_error(&ctx->diags, f->base.span, "gradient: @%s is not type-checked", entry);
        return false;
    }
    FuncType *ft = AS_FUNC_TYPE(f->base.checked_type);
    bool ok = true;
    for (uint32_t i = 0; i < f->n_params; i++)
        if (!is_data_type(ft->params[i])) {
            diag_error(&ctx->diags, f->params[i]->base.span,
                       "gradient: parameter %%%s of @%s must be a tensor or a tuple of tensors",
                       f->params[i]->name, entry);
            ok = false;
        }
    if (!is_data_type(ft->ret)) {
        diag_error(&ctx->diags, f->base.span,
                   "gradient: the result of @%s must be a tensor or a tuple of tensors", entry);
        ok = false;
    }
    if (!ok) return false;

    AD ad = {0};
    ad.m = m;
    ad.out_name = out_name;
    ad.ctx = ctx;
    ad.lift_rw = (TypeRewriter){ctx, lift_pre, {0}, &ad};
    ad.helper_span = f->base.span;
    ad.unit = ir_type_tuple(ctx, 0, NULL);
    Function *g = NULL;
    if (mode == GRAD_FIRST) {
        g = fo_gradient(&ad, f);
    } else {
        g = ho_driver(&ad, entry_gv, f);
        for (size_t i = 0; i < ad.pending.len && !ad.failed; i++)
            ho_build_global(&ad, ad.pending.data[i]);
    }
    if (ad.n_missing)
        diag_error(&ctx->diags, f->base.span, "gradient: no gradient for %u operator%s: %s",
                   ad.n_missing, ad.n_missing == 1 ? "" : "s", sb_cstr(&ad.missing_list));
    bool good = !ad.failed && ad.n_missing == 0 && g != NULL;
    if (good) {
        GlobalVar *gv = ir_module_global(m, out_name, strlen(out_name), f->base.span);
        ir_module_define(m, gv, g, def_span);
        good = ir_well_formed(m) && ty_infer_module(m);
    }
    ptrmap_free(&ad.vars);
    ptrmap_free(&ad.globals);
    ptrmap_free(&ad.lift_rw.memo);
    for (int k = 0; k < H_COUNT; k++)
        ptrmap_free(&ad.helpers[k]);
    ptrmap_free(&ad.adt_ok);
    vec_free(&ad.pending);
    strmap_free(&ad.missing);
    sb_free(&ad.missing_list);
    return good;
}
