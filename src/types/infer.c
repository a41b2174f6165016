/* infer.c - type inference: constraint generation over the expression graph (one iterative,
 * DAG-aware walk per function), unification with a union-find over IncompleteTypes, and a
 * worklist of operator relations and tuple projections re-run until nothing changes.
 *
 * Invariants:
 * - ety[e->id] is the type being inferred for expression e (a Var's entry is its binder's type);
 *   it may mention IncompleteTypes until the end, when checked_type gets the resolved type.
 * - An IncompleteType is bound at most once (bind); resolve() follows bindings.
 * - `error` is a private IncompleteType (ir_type_error_new) that is never bound: it unifies with
 *   anything and a relation with an erroneous argument is not run, so one mistake reports once.
 * - Nothing recurses, over expressions or over types: types are DAGs whose tree size can be
 *   exponential in their node count (`let %a2 = (%a1, %a1)`), so every walk over a type uses an
 *   explicit stack and visits each node once (deep: ir_type_rewrite with a memo kept while no
 *   binding is made; occurs: marks by node id; unify: a memo of pairs), and skips the parts
 *   whose flags show there is nothing to do (a type without IncompleteTypes is its own deep). */
#include <stdio.h>

#include "types/types.h"

typedef enum PendKind { PEND_OP, PEND_PROJ } PendKind;

typedef struct Pending {
    PendKind kind;
    bool done;
    bool woken;   /* an IncompleteType it waits on was bound since its last try */
    uint32_t seq; /* creation order: the solver retries in this order, as passes would */
    Expr *at;     /* the call or projection */
    const OpDef *op;
    const AttrValue **vals;
    uint32_t n_args;
    Type **args;
    Expr **arg_exprs; /* NULL for an operator used as a value */
    Type *out;
} Pending;

typedef struct PolyCall {
    Call *call;
    uint32_t n;
    Type **targs;
} PolyCall;

typedef struct Infer {
    Ctx *ctx;
    Module *m;
    Diags *ds;
    Type **ety;
    size_t n_ety;
    Type **bind; /* IncompleteType id -> the type it is bound to (NULL: unbound) */
    size_t n_bind;
    uint64_t n_binds;     /* bindings made so far: deep's memo is valid while this stays */
    uint64_t deep_at;     /* n_binds when deep_rw.memo was started */
    TypeRewriter deep_rw; /* deep: node -> fully resolved node */
    uint32_t *mark;       /* by type id: the occurs walk that last entered the node */
    uint8_t *ground;      /* by type id: 1 once the node is known to resolve without unknowns */
    size_t n_mark, n_ground;
    uint32_t walk;   /* the current occurs walk */
    PtrMap kinds_ok; /* types that passed kind_check */
    PtrMap schemes;  /* Function -> its FuncType (from annotations and fresh types) */
    Let **let_of;    /* by expr id: body -> its Let, and Let -> itself, until the let variable
                      * is typed from its value */
    size_t n_let_of;
    Type *error;
    Type *unit, *bool_scalar;
    Vec(Pending *) pending; /* deferred items, in creation order (done ones dropped at the end) */
    uint32_t n_pending_made;
    struct Watch **watch; /* by IncompleteType id: the deferred items waiting on it */
    size_t n_watch;
    Vec(Pending *) woken; /* woken since the solver last ran, in any order */
    Vec(PolyCall) polycalls;
    PtrVec exprs;   /* every expression reached, in post order */
    PtrVec matches; /* complete matches, for the exhaustiveness check */
    StrBuf why;     /* the innermost reason of the last failed unification */
    size_t n_errors_at_start;
} Infer;

/* ---- types -------------------------------------------------------------------------------- */

static Type *fresh(Infer *in) { return ir_type_incomplete_new(in->ctx, KIND_TYPE); }

static Type *bound_to(Infer *in, Type *t) { return t->id < in->n_bind ? in->bind[t->id] : NULL; }

/* Grow a pointer array indexed by node id (zero-filled) so that index id exists. */
static void *grow_by_id(void *arr, size_t *n, uint32_t id) {
    if (id < *n) return arr;
    size_t m = *n ? *n : 1024;
    while (m <= id)
        m *= 2;
    void **a = sup_realloc(arr, sup_mul(m, sizeof(void *)));
    memset(a + *n, 0, (m - *n) * sizeof(void *));
    *n = m;
    return a;
}

/* Grow an array of elem-byte entries indexed by node id (zero-filled) so that index id exists. */
static void *grow_bytes_by_id(void *arr, size_t *n, uint32_t id, size_t elem) {
    if (id < *n) return arr;
    size_t m = *n ? *n : 1024;
    while (m <= id)
        m *= 2;
    char *a = sup_realloc(arr, sup_mul(m, elem));
    memset(a + *n * elem, 0, (m - *n) * elem);
    *n = m;
    return a;
}

/* A deferred item waiting on an IncompleteType (a list per type, in the ctx arena). */
typedef struct Watch {
    Pending *p;
    struct Watch *next;
} Watch;

static void bind(Infer *in, Type *v, Type *t) {
    in->bind = grow_by_id(in->bind, &in->n_bind, v->id);
    in->bind[v->id] = t;
    if (t->kind == TYPE_INCOMPLETE) t->flags |= TYPE_PLACED;
    in->n_binds++;
    if (v->id < in->n_watch) { /* wake what waited on v */
        for (Watch *w = in->watch[v->id]; w; w = w->next)
            if (!w->p->done && !w->p->woken) {
                w->p->woken = true;
                vec_push(&in->woken, w->p);
            }
        in->watch[v->id] = NULL;
    }
}

/* What t stands for: bindings followed to the end, with path compression (a chain of
 * IncompleteTypes bound to one another, as a chain of calls of globals makes, is followed once). */
static Type *resolve(Infer *in, Type *t) {
    Type *r = t;
    while (r->kind == TYPE_INCOMPLETE) {
        Type *b = bound_to(in, r);
        if (b == NULL) break;
        r = b;
    }
    while (t != r && t->kind == TYPE_INCOMPLETE) { /* every link now points at the end */
        Type *next = in->bind[t->id];
        in->bind[t->id] = r;
        t = next;
    }
    return r;
}

static Type *deep_pre(TypeRewriter *rw, Type *t, bool *stop) {
    Infer *in = rw->state;
    if (!(t->flags & TYPE_HAS_INCOMPLETE)) {
        *stop = true;
        return t;
    }
    if (t->kind != TYPE_INCOMPLETE) return t;
    Type *r = resolve(in, t);
    *stop = r->kind == TYPE_INCOMPLETE; /* unbound */
    return r;
}

/* t with every bound IncompleteType replaced (interned types). Linear in the nodes of t that
 * mention IncompleteTypes, and free for a part already resolved since the last binding. */
static Type *deep(Infer *in, Type *t) {
    if (!(t->flags & TYPE_HAS_INCOMPLETE)) return t;
    if (t->kind == TYPE_INCOMPLETE) { /* often bound to a type without unknowns */
        Type *r = resolve(in, t);
        if (r->kind == TYPE_INCOMPLETE || !(r->flags & TYPE_HAS_INCOMPLETE)) return r;
    }
    if (in->deep_at != in->n_binds) { /* a binding was made: what was resolved may change */
        ptrmap_free(&in->deep_rw.memo);
        in->deep_at = in->n_binds;
    }
    return ir_type_rewrite(&in->deep_rw, t);
}

/* Does t, resolved, mention no unbound IncompleteType (the error type aside)? */
static bool resolved(Infer *in, Type *t) { return !(deep(in, t)->flags & TYPE_HAS_INCOMPLETE); }

static bool has_error(Infer *in, Type *t) { return (deep(in, t)->flags & TYPE_HAS_ERROR) != 0; }

typedef struct OccFrame {
    Type *t;
    uint32_t next, n;
    bool open; /* an unbound IncompleteType was met below */
} OccFrame;

/* The occurs check: does t, resolved, mention the unbound IncompleteType v? Each node is entered
 * once per walk; a node whose whole DAG turns out to resolve without unknowns is remembered as
 * ground (bindings are never undone), so later walks skip it. */
static bool occurs(Infer *in, Type *v, Type *t) {
    /* v is in no other type and bound from no other unknown (such as the fresh result of a
     * projection solved before its consumers are typed): nothing can reach it */
    if (!(t->flags & TYPE_HAS_INCOMPLETE) || !(v->flags & TYPE_PLACED)) return false;
    uint32_t walk = ++in->walk;
    Vec(OccFrame) st = {0};
    bool found = false;
    OccFrame f0 = {t, 0, UINT32_MAX, false};
    vec_push(&st, f0);
    while (st.len && !found) {
        OccFrame *f = &vec_last(&st);
        if (f->n == UINT32_MAX) { /* first visit */
            Type *r = f->t->kind == TYPE_INCOMPLETE ? resolve(in, f->t) : f->t;
            bool skip =
                !(r->flags & TYPE_HAS_INCOMPLETE) || (r->id < in->n_ground && in->ground[r->id]);
            bool unbound = !skip && r->kind == TYPE_INCOMPLETE;
            if (unbound && r == v) found = true;
            bool seen = !skip && !unbound && r->id < in->n_mark && in->mark[r->id] == walk;
            if (skip || unbound || seen) {
                st.len--;
                if (st.len && (unbound || seen)) vec_last(&st).open = true;
                continue;
            }
            in->mark = grow_bytes_by_id(in->mark, &in->n_mark, r->id, sizeof *in->mark);
            in->mark[r->id] = walk;
            f->t = r;
            f->n = ir_type_n_children(r);
        }
        if (f->next < f->n) {
            OccFrame c = {ir_type_child(f->t, f->next++), 0, UINT32_MAX, false};
            vec_push(&st, c);
            continue;
        }
        bool open = f->open;
        if (!open) {
            in->ground = grow_bytes_by_id(in->ground, &in->n_ground, f->t->id, 1);
            in->ground[f->t->id] = 1;
        }
        st.len--;
        if (st.len && open) vec_last(&st).open = true;
    }
    vec_free(&st);
    return found;
}

typedef struct Subst {
    uint32_t n;
    TypeVar *const *from;
    Type *const *to;
} Subst;

static Type *subst_pre(TypeRewriter *rw, Type *t, bool *stop) {
    Subst *s = rw->state;
    if (!(t->flags & TYPE_HAS_VAR)) {
        *stop = true;
        return t;
    }
    if (t->kind == TYPE_VAR) {
        *stop = true;
        for (uint32_t i = 0; i < s->n; i++)
            if (t == &s->from[i]->base) return s->to[i];
    }
    return t;
}

/* A polymorphic FuncType with fresh types for its parameters; the fresh types go to *targs. */
static Type *instantiate(Infer *in, FuncType *ft, Type ***targs) {
    Type **to = arena_array(&in->ctx->arena, ft->n_tparams, sizeof(Type *));
    for (uint32_t i = 0; i < ft->n_tparams; i++)
        to[i] = fresh(in);
    Subst s = {ft->n_tparams, ft->tparams, to};
    TypeRewriter rw = {in->ctx, subst_pre, {0}, &s};
    Type **p = arena_array(&in->ctx->arena, ft->n_params ? ft->n_params : 1, sizeof(Type *));
    for (uint32_t i = 0; i < ft->n_params; i++)
        p[i] = ir_type_rewrite(&rw, ft->params[i]);
    Type *r = ir_type_rewrite(&rw, ft->ret);
    ptrmap_free(&rw.memo);
    if (targs) *targs = to;
    return ir_type_func(in->ctx, ft->n_params, p, r, 0, NULL, 0, NULL);
}

static const char *type_str(Infer *in, Type *t) {
    StrBuf sb = {0};
    ir_print_type(in->ctx, deep(in, t), &sb);
    const char *s = arena_strndup(&in->ctx->arena, sb_cstr(&sb), sb.len);
    sb_free(&sb);
    return s;
}

static void dim_text(Infer *in, StrBuf *sb, int64_t d) {
    if (d == DIM_ANY)
        sb_putc(sb, '?');
    else if (dim_is_sym(d))
        sb_puts(sb, ir_dim_sym_name(in->ctx, d));
    else
        sb_printf(sb, "%lld", (long long)d);
}

static Type *mismatch(Infer *in, Type *a, Type *b) {
    in->why.len = 0;
    sb_printf(&in->why, "%s vs %s", type_str(in, a), type_str(in, b));
    return NULL;
}

/* One pair being unified. n == UINT32_MAX: not started; else its n child pairs, whose results
 * go to kids[base..]. */
typedef struct UFrame {
    Type *a0, *b0; /* the pair as given */
    Type *a, *b;   /* resolved (a function type may be instantiated by unify_start) */
    Type *ra, *rb; /* resolved */
    uint32_t next, n;
    size_t base;
} UFrame;

/* What a unified pair gives its parent: the common type, and each side with what was met below
 * resolved (equal to the side as given, under the bindings made). */
typedef struct UKid {
    Type *r, *da, *db;
} UKid;

/* Pairs worth remembering: those whose unification could be long, so that meeting them again
 * (a DAG-shaped type meets its shared parts many times) repeats nothing. A pair of small types
 * without IncompleteTypes is cheap to redo; one with IncompleteTypes is not, whatever its size:
 * they may be bound to anything. */
#define UNIFY_MEMO_SIZE 16
static bool memo_worthy(Type *a, Type *b) {
    return ((a->flags | b->flags) & TYPE_HAS_INCOMPLETE) || a->size + b->size > UNIFY_MEMO_SIZE;
}
#if UINTPTR_MAX > 0xffffffffu
static void *pair_key(Type *a, Type *b) {
    return (void *)(uintptr_t)(((uint64_t)a->id << 32) | b->id); /* ids start at 1: never NULL */
}
#define PAIR_MEMO 1
#else
#define PAIR_MEMO 0 /* no room for a pair of ids in a pointer key: no memo */
#endif

/* Start unifying the resolved pair (f->a, f->b): 1 with *r when that is decided here, -1 on a
 * mismatch (in->why set), 0 when f->n child pairs (of f->a and f->b, possibly instantiated)
 * must be unified first. */
static int unify_start(Infer *in, UFrame *f, Type **r) {
    Type *a = f->a, *b = f->b;
    if (a == b || b == in->error) {
        *r = a;
        return 1;
    }
    if (a == in->error) {
        *r = b;
        return 1;
    }
    if (a->kind == TYPE_INCOMPLETE || b->kind == TYPE_INCOMPLETE) {
        Type *v = a->kind == TYPE_INCOMPLETE ? a : b, *t = v == a ? b : a;
        if (occurs(in, v, t)) {
            in->why.len = 0;
            sb_printf(&in->why, "a type cannot contain itself (%s)", type_str(in, t));
            return -1;
        }
        bind(in, v, t);
        *r = t;
        return 1;
    }
    if (a->kind == TYPE_FUNC && b->kind == TYPE_FUNC) {
        FuncType *fa = (FuncType *)a, *fb = (FuncType *)b;
        if (fa->n_tparams && !fb->n_tparams)
            fa = (FuncType *)instantiate(in, fa, NULL);
        else if (fb->n_tparams && !fa->n_tparams)
            fb = (FuncType *)instantiate(in, fb, NULL);
        else if (fa->n_tparams) {
            if (!ir_type_equal(a, b)) return mismatch(in, a, b), -1;
            *r = a;
            return 1;
        }
        if (fa->n_params != fb->n_params) {
            in->why.len = 0;
            sb_printf(&in->why, "functions of %u and %u parameters", fa->n_params, fb->n_params);
            return -1;
        }
        f->a = &fa->base;
        f->b = &fb->base;
        f->n = fa->n_params + 1;
        return 0;
    }
    if (a->kind != b->kind) return mismatch(in, a, b), -1;
    switch ((TypeKind)a->kind) {
    case TYPE_TENSOR: {
        TensorType *x = (TensorType *)a, *y = (TensorType *)b;
        if (x->dtype != y->dtype || x->ndim != y->ndim) return mismatch(in, a, b), -1;
        int64_t buf[16], *s = x->ndim <= 16 ? buf : arena_array(&in->ctx->arena, x->ndim, 8);
        for (uint32_t i = 0; i < x->ndim; i++) {
            int64_t p = x->shape[i], q = y->shape[i];
            if (p == q || q == DIM_ANY)
                s[i] = p == q ? p : DIM_ANY;
            else if (p == DIM_ANY)
                s[i] = DIM_ANY;
            else {
                mismatch(in, a, b);
                sb_printf(&in->why, " (dimension %u: ", i);
                dim_text(in, &in->why, p);
                sb_puts(&in->why, " vs ");
                dim_text(in, &in->why, q);
                sb_putc(&in->why, ')');
                return -1;
            }
        }
        *r = ir_type_tensor(in->ctx, x->dtype, x->ndim, s);
        return 1;
    }
    case TYPE_TUPLE:
        if (((TupleType *)a)->n != ((TupleType *)b)->n) return mismatch(in, a, b), -1;
        f->n = ((TupleType *)a)->n;
        return 0;
    case TYPE_CALL: {
        TypeCall *x = (TypeCall *)a, *y = (TypeCall *)b;
        if (resolve(in, x->func) != resolve(in, y->func) || x->n_args != y->n_args)
            return mismatch(in, a, b), -1;
        f->n = x->n_args + 1; /* child 0, the callee, is the same on both sides */
        return 0;
    }
    case TYPE_REF: f->n = 1; return 0;
    default: return mismatch(in, a, b), -1;
    }
}

/* A bound IncompleteType v turned out equal to d, v's binding with parts resolved: bind v to d
 * directly, so the next unification that meets v does not walk the same bindings again (a
 * chain of types bound through function results would be walked at each use: quadratic). */
static void compress(Infer *in, Type *v, Type *resolved_v, Type *d) {
    if (v != resolved_v && v->kind == TYPE_INCOMPLETE && d != resolved_v) {
        in->bind[v->id] = d;
        if (d->kind == TYPE_INCOMPLETE) d->flags |= TYPE_PLACED;
    }
}

/* Unify a and b; the common type, or NULL with in->why set. Iterative (types nest arbitrarily
 * deep), and a pair of big types met again reuses its first result, so unifying two DAG-shaped
 * types costs their distinct pairs of nodes, not their tree sizes. */
static Type *unify(Infer *in, Type *a, Type *b) {
    UFrame top = {a, b, a, b, NULL, NULL, 0, UINT32_MAX, 0};
    top.a = top.ra = resolve(in, a);
    top.b = top.rb = resolve(in, b);
    Type *r0 = NULL;
    int started = unify_start(in, &top, &r0); /* most pairs are decided at the top */
    if (started != 0) {
        if (started > 0) {
            compress(in, a, top.ra, resolve(in, top.ra));
            compress(in, b, top.rb, resolve(in, top.rb));
        }
        return started > 0 ? r0 : NULL;
    }
    Vec(UFrame) st = {0};
    Vec(UKid) kids = {0};
    PtrVec tmp = {0};
    PtrMap memo = {0};
    Type *result = NULL;
    top.base = 0; /* started: its children come next */
    vec_push(&st, top);
    while (st.len) {
        UFrame *f = &vec_last(&st);
        UKid k = {NULL, NULL, NULL};
        if (f->n == UINT32_MAX) {
            f->a = f->ra = resolve(in, f->a0);
            f->b = f->rb = resolve(in, f->b0);
#if PAIR_MEMO
            if (memo_worthy(f->a, f->b)) k.r = ptrmap_get(&memo, pair_key(f->a, f->b));
#endif
            if (k.r == NULL) {
                int how = unify_start(in, f, &k.r);
                if (how < 0) goto out;
                if (how == 0) {
                    f->base = kids.len;
                    continue;
                }
            }
            k.da = resolve(in, f->ra); /* an unknown just bound stands for its binding */
            k.db = resolve(in, f->rb);
        } else if (f->next < f->n) {
            Type *ca = ir_type_child(f->a, f->next), *cb = ir_type_child(f->b, f->next);
            UFrame c = {ca, cb, ca, cb, NULL, NULL, 0, UINT32_MAX, 0};
            f->next++;
            vec_push(&st, c); /* f is invalid from here */
            continue;
        } else {
            UKid *ks = kids.data + f->base;
            tmp.len = 0;
            for (uint32_t i = 0; i < f->n; i++)
                vec_push(&tmp, ks[i].r);
            Type **kr = (Type **)tmp.data;
            if (f->a->kind == TYPE_FUNC)
                k.r = ir_type_func(in->ctx, f->n - 1, kr, kr[f->n - 1], 0, NULL, 0, NULL);
            else
                k.r = ir_type_with_children(in->ctx, f->a, kr);
            k.da = f->ra;
            k.db = f->rb;
            if (f->a == f->ra && f->b == f->rb) { /* not instantiated: the sides' parts */
                tmp.len = 0;
                for (uint32_t i = 0; i < f->n; i++)
                    vec_push(&tmp, ks[i].da);
                k.da = ir_type_with_children(in->ctx, f->ra, (Type **)tmp.data);
                tmp.len = 0;
                for (uint32_t i = 0; i < f->n; i++)
                    vec_push(&tmp, ks[i].db);
                k.db = ir_type_with_children(in->ctx, f->rb, (Type **)tmp.data);
            }
            kids.len = f->base;
#if PAIR_MEMO
            if (memo_worthy(f->a, f->b)) ptrmap_put(&memo, pair_key(f->a, f->b), k.r);
#endif
        }
        compress(in, f->a0, f->ra, k.da);
        compress(in, f->b0, f->rb, k.db);
        st.len--;
        vec_push(&kids, k);
    }
    result = kids.data[0].r;
out:
    vec_free(&st);
    vec_free(&kids);
    vec_free(&tmp);
    ptrmap_free(&memo);
    return result;
}

/* ---- diagnostics ---------------------------------------------------------------------------- */

static void error_at(Infer *in, Span span, const char *fmt, ...) RLY_PRINTF(3, 4);
static void error_at(Infer *in, Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_add(in->ds, DIAG_ERROR, span, fmt, ap);
    va_end(ap);
}

/* Unify or report "WHAT: expected X, got Y (detail)" at span; the error type on failure. */
static Type *expect(Infer *in, Type *want, Type *got, Span span, const char *what) {
    Type *r = unify(in, want, got);
    if (r != NULL) return r;
    const char *ws = type_str(in, want), *gs = type_str(in, got);
    const char *detail = sb_cstr(&in->why);
    /* the detail repeats the types when the mismatch is at the top level */
    StrBuf top = {0};
    sb_printf(&top, "%s vs %s", ws, gs);
    if (strncmp(detail, top.data ? top.data : "", top.len) == 0 && detail[top.len] == '\0')
        error_at(in, span, "%s: expected %s, got %s", what, ws, gs);
    else if (strncmp(detail, top.data ? top.data : "", top.len) == 0)
        error_at(in, span, "%s: expected %s, got %s%s", what, ws, gs, detail + top.len);
    else
        error_at(in, span, "%s: expected %s, got %s (mismatch: %s)", what, ws, gs, detail);
    sb_free(&top);
    return in->error;
}

static const char *callee_name(Infer *in, Expr *op) {
    switch ((ExprKind)op->kind) {
    case EXPR_GLOBAL_VAR: {
        char *s = arena_alloc(&in->ctx->arena, strlen(AS_GLOBAL_VAR(op)->name) + 2);
        sprintf(s, "@%s", AS_GLOBAL_VAR(op)->name);
        return s;
    }
    case EXPR_VAR: {
        char *s = arena_alloc(&in->ctx->arena, strlen(AS_VAR(op)->name) + 2);
        sprintf(s, "%%%s", AS_VAR(op)->name);
        return s;
    }
    case EXPR_CONSTRUCTOR: return AS_CONSTRUCTOR(op)->name;
    default: return "the function";
    }
}

/* Where to report a problem with operand x of e: x itself, unless x is a variable (whose node,
 * shared by every use, carries its binder's span) or has no span. */
static Span use_span(const Expr *x, const Expr *e) {
    if (x->span.file == 0 || x->kind == EXPR_VAR || x->kind == EXPR_GLOBAL_VAR ||
        x->kind == EXPR_OP || x->kind == EXPR_CONSTRUCTOR)
        return e->span;
    return x->span;
}

/* ---- kinds ---------------------------------------------------------------------------------- */

/* The kind errors of node t itself (its children are checked on their own). */
static bool kind_ok_node(Infer *in, Type *t, Span span) {
    if (t->kind == TYPE_GLOBAL_VAR) {
        GlobalTypeVar *g = (GlobalTypeVar *)t;
        if (g->def && g->def->n_tvars) {
            error_at(in, span, "type %s needs %u type argument%s, as in %s[...]", g->name,
                     g->def->n_tvars, g->def->n_tvars == 1 ? "" : "s", g->name);
            return false;
        }
    } else if (t->kind == TYPE_CALL) {
        TypeCall *tc = (TypeCall *)t;
        if (tc->func->kind == TYPE_GLOBAL_VAR) {
            GlobalTypeVar *g = (GlobalTypeVar *)tc->func;
            if (g->def && g->def->n_tvars != tc->n_args) {
                error_at(in, span, "type %s takes %u type argument%s, not %u", g->name,
                         g->def->n_tvars, g->def->n_tvars == 1 ? "" : "s", tc->n_args);
                return false;
            }
        } else if (tc->func->kind != TYPE_VAR) {
            error_at(in, span, "%s is not a type constructor and cannot take type arguments",
                     type_str(in, tc->func));
            return false;
        }
    }
    return true;
}

typedef struct KindFrame {
    Type *t;
    uint32_t next, n;
    bool bad; /* an error in t or below */
} KindFrame;

/* Kind-check an annotation: ADTs get their number of type arguments. Each node once per call;
 * nodes found correct are remembered for the whole module (annotations share parts). */
static void kind_check(Infer *in, Type *t, Span span) {
    if (!(t->flags & TYPE_HAS_ADT) || ptrmap_has(&in->kinds_ok, t)) return;
    PtrMap seen = {0};
    Vec(KindFrame) st = {0};
    KindFrame f0 = {t, 0, UINT32_MAX, false};
    vec_push(&st, f0);
    while (st.len) {
        KindFrame *f = &vec_last(&st);
        if (f->n == UINT32_MAX) {
            Type *x = f->t;
            if (!(x->flags & TYPE_HAS_ADT) || ptrmap_has(&in->kinds_ok, x) ||
                ptrmap_has(&seen, x)) {
                bool bad = ptrmap_get(&seen, x) == (void *)&seen; /* met before, with an error */
                st.len--;
                if (bad && st.len) vec_last(&st).bad = true;
                continue;
            }
            ptrmap_put(&seen, x, x);
            f->bad = !kind_ok_node(in, x, span);
            f->n = ir_type_n_children(x);
            f->next = x->kind == TYPE_CALL ? 1 : 0; /* a TypeCall's callee is checked above */
        }
        if (f->next < f->n) {
            KindFrame c = {ir_type_child(f->t, f->next++), 0, UINT32_MAX, false};
            vec_push(&st, c);
            continue;
        }
        bool bad = f->bad;
        if (bad)
            ptrmap_put(&seen, f->t, &seen);
        else
            ptrmap_put(&in->kinds_ok, f->t, f->t);
        st.len--;
        if (bad && st.len) vec_last(&st).bad = true;
    }
    vec_free(&st);
    ptrmap_free(&seen);
}

/* ---- the solver's worklist --------------------------------------------------------------------
 */

static Type *type_of(Infer *in, Expr *e);

static Span arg_span(Pending *p, int arg) {
    if (arg >= 0 && p->arg_exprs && (uint32_t)arg < p->n_args)
        return use_span(p->arg_exprs[arg], p->at);
    return p->at->span;
}

/* Try to solve p; true when it is done (solved or failed). */
static bool try_solve(Infer *in, Pending *p) {
    if (p->kind == PEND_PROJ) {
        TupleGetItem *g = AS_TUPLE_GET_ITEM(p->at);
        Type *t = resolve(in, p->args[0]);
        if (t == in->error) {
            unify(in, p->out, in->error);
            return true;
        }
        if (t->kind == TYPE_INCOMPLETE) return false;
        if (t->kind != TYPE_TUPLE) {
            error_at(in, p->at->span, "projection .%u of a value of type %s, which is not a tuple",
                     g->index, type_str(in, t));
            unify(in, p->out, in->error);
        } else if (g->index >= ((TupleType *)t)->n) {
            uint32_t n = ((TupleType *)t)->n;
            error_at(in, p->at->span, "projection .%u out of range: the tuple has %u field%s (%s)",
                     g->index, n, n == 1 ? "" : "s", type_str(in, t));
            unify(in, p->out, in->error);
        } else {
            expect(in, p->out, ((TupleType *)t)->fields[g->index], p->at->span, "projection");
        }
        return true;
    }
    Type **args = arena_array(&in->ctx->arena, p->n_args ? p->n_args : 1, sizeof(Type *));
    for (uint32_t i = 0; i < p->n_args; i++) {
        args[i] = deep(in, p->args[i]);
        if (has_error(in, args[i])) {
            unify(in, p->out, in->error);
            return true;
        }
    }
    StrBuf msg = {0};
    Type *out = NULL;
    int err_arg = -1;
    RelResult r = op_relate(in->ctx, p->op, p->vals, p->n_args, args, &out, &msg, &err_arg);
    if (r == REL_DEFER) {
        sb_free(&msg);
        return false;
    }
    if (r == REL_ERROR) {
        error_at(in, arg_span(p, err_arg), "%s: %s", p->op->name, sb_cstr(&msg));
        unify(in, p->out, in->error);
    } else {
        char what[160];
        snprintf(what, sizeof what, "result of %s", p->op->name);
        expect(in, p->out, out, p->at->span, what);
    }
    sb_free(&msg);
    return true;
}

static void watch_on(Infer *in, Pending *p, Type *v) {
    in->watch = grow_by_id(in->watch, &in->n_watch, v->id);
    Watch *w = arena_alloc(&in->ctx->arena, sizeof *w);
    w->p = p;
    w->next = in->watch[v->id];
    in->watch[v->id] = w;
}

/* p was deferred: make it wait on the unbound IncompleteTypes its arguments mention (a try with
 * none of them bound would defer again, so it need not be made). */
static void wait_on_unknowns(Infer *in, Pending *p) {
    uint32_t walk = ++in->walk;
    PtrVec st = {0};
    for (uint32_t i = 0; i < p->n_args; i++)
        vec_push(&st, deep(in, p->args[i]));
    while (st.len) {
        Type *t = vec_pop(&st);
        if (!(t->flags & TYPE_HAS_INCOMPLETE)) continue;
        in->mark = grow_bytes_by_id(in->mark, &in->n_mark, t->id, sizeof *in->mark);
        if (in->mark[t->id] == walk) continue;
        in->mark[t->id] = walk;
        if (t->kind == TYPE_INCOMPLETE) {
            watch_on(in, p, t);
            continue;
        }
        for (uint32_t k = ir_type_n_children(t); k-- > 0;)
            vec_push(&st, ir_type_child(t, k));
    }
    vec_free(&st);
}

static void add_pending(Infer *in, Pending *p) {
    p->seq = in->n_pending_made++;
    if (try_solve(in, p)) {
        p->done = true;
    } else {
        vec_push(&in->pending, p);
        wait_on_unknowns(in, p);
    }
}

/* Min-heap of woken items by seq. */
static void heap_push(PtrVec *h, Pending *p) {
    vec_push(h, p);
    for (size_t i = h->len - 1; i > 0;) {
        size_t up = (i - 1) / 2;
        if (((Pending *)h->data[up])->seq <= p->seq) break;
        h->data[i] = h->data[up];
        h->data[up] = p;
        i = up;
    }
}

static Pending *heap_pop(PtrVec *h) {
    Pending *top = h->data[0], *last = vec_pop(h);
    if (h->len == 0) return top;
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        Pending *pm = last;
        if (l < h->len && ((Pending *)h->data[l])->seq < pm->seq) m = l, pm = h->data[l];
        if (r < h->len && ((Pending *)h->data[r])->seq < pm->seq) m = r, pm = h->data[r];
        if (m == i) break;
        h->data[i] = pm;
        i = m;
    }
    h->data[i] = last;
    return top;
}

/* Retry deferred items until nothing changes. Equivalent to passes over every deferred item in
 * creation order until a pass makes no progress, but an item is retried only when something it
 * waits on was bound (a pass over every item each time would be quadratic along a chain of
 * items each unblocking the one before it, as forward references make): an item woken by a
 * later one in the same pass waits for the next pass, as it would have. */
static void solve_all(Infer *in) {
    PtrVec now = {0}, next = {0};
    for (size_t i = 0; i < in->woken.len; i++)
        heap_push(&now, in->woken.data[i]);
    in->woken.len = 0;
    while (now.len) {
        while (now.len) {
            Pending *p = heap_pop(&now);
            p->woken = false;
            if (p->done) continue;
            if (try_solve(in, p))
                p->done = true;
            else
                wait_on_unknowns(in, p);
            for (size_t i = 0; i < in->woken.len; i++) { /* woken by this try */
                Pending *q = in->woken.data[i];
                heap_push(q->seq > p->seq ? &now : &next, q);
            }
            in->woken.len = 0;
        }
        PtrVec t = now;
        now = next;
        next = t;
    }
    vec_free(&now);
    vec_free(&next);
    size_t k = 0;
    for (size_t i = 0; i < in->pending.len; i++)
        if (!in->pending.data[i]->done) in->pending.data[k++] = in->pending.data[i];
    in->pending.len = k;
}

/* ---- constraint generation ----------------------------------------------------------------------
 */

static Let *let_of(Infer *in, Expr *e) { return e->id < in->n_let_of ? in->let_of[e->id] : NULL; }

static void set_let_of(Infer *in, Expr *e, Let *l) {
    in->let_of = grow_by_id(in->let_of, &in->n_let_of, e->id);
    in->let_of[e->id] = l;
}

static void set_ty(Infer *in, Expr *e, Type *t) {
    in->ety = grow_by_id(in->ety, &in->n_ety, e->id);
    in->ety[e->id] = t;
}

static Type *get_ty(Infer *in, Expr *e) { return e->id < in->n_ety ? in->ety[e->id] : NULL; }

/* The FuncType of a function from its annotations (fresh types where there are none). Sets the
 * parameters' types. */
static Type *scheme_of(Infer *in, Function *f) {
    Type *s = ptrmap_get(&in->schemes, f);
    if (s) return s;
    Type **p = arena_array(&in->ctx->arena, f->n_params ? f->n_params : 1, sizeof(Type *));
    for (uint32_t i = 0; i < f->n_params; i++) {
        Var *v = f->params[i];
        if (get_ty(in, &v->base) == NULL) {
            if (v->ann) kind_check(in, v->ann, v->base.span);
            set_ty(in, &v->base, v->ann ? v->ann : fresh(in));
        }
        p[i] = get_ty(in, &v->base);
    }
    if (f->ret_type) kind_check(in, f->ret_type, f->base.span);
    s = ir_type_func(in->ctx, f->n_params, p, f->ret_type ? f->ret_type : fresh(in), f->n_tparams,
                     f->tparams, 0, NULL);
    ptrmap_put(&in->schemes, f, s);
    return s;
}

static Type *ctor_scheme(Infer *in, Constructor *c) {
    TypeData *td = c->belong_to->def;
    Type *ret = &c->belong_to->base;
    if (td && td->n_tvars) {
        Type **a = arena_array(&in->ctx->arena, td->n_tvars, sizeof(Type *));
        for (uint32_t i = 0; i < td->n_tvars; i++)
            a[i] = &td->tvars[i]->base;
        ret = ir_type_call(in->ctx, ret, td->n_tvars, a);
    }
    return ir_type_func(in->ctx, c->n_inputs, c->inputs, ret, td ? td->n_tvars : 0,
                        td ? td->tvars : NULL, 0, NULL);
}

static const OpDef *op_def(Infer *in, Expr *callee, Span span) {
    Op *op = AS_OP(callee);
    if (op->info) return op->info;
    const OpDef *d = op_lookup(op->name, strlen(op->name));
    if (d == NULL) {
        const char *s = op_suggest(op->name, strlen(op->name));
        if (s)
            error_at(in, span, "unknown operator %s (did you mean %s?)", op->name, s);
        else
            error_at(in, span, "unknown operator or name %s", op->name);
        return NULL;
    }
    op->info = d;
    return d;
}

/* An operator used as a value: a monomorphic function type whose relation is solved later. */
static Type *op_value_type(Infer *in, Expr *e) {
    const OpDef *d = op_def(in, e, e->span);
    if (d == NULL) return in->error;
    if (d->n_args == OP_VARIADIC) {
        error_at(in, e->span, "operator %s takes any number of arguments and cannot be a value",
                 d->name);
        return in->error;
    }
    Pending *p = arena_alloc(&in->ctx->arena, sizeof *p);
    p->kind = PEND_OP;
    p->at = e;
    p->op = d;
    p->vals = arena_array(&in->ctx->arena, d->n_attrs ? d->n_attrs : 1, sizeof(AttrValue *));
    StrBuf msg = {0};
    Span where;
    if (!op_bind_attrs(d, NULL, p->vals, &msg, &where)) {
        error_at(in, e->span, "%s used as a value: %s", d->name, sb_cstr(&msg));
        sb_free(&msg);
        return in->error;
    }
    sb_free(&msg);
    p->n_args = (uint32_t)d->n_args;
    p->args = arena_array(&in->ctx->arena, p->n_args ? p->n_args : 1, sizeof(Type *));
    for (uint32_t i = 0; i < p->n_args; i++)
        p->args[i] = fresh(in);
    p->out = fresh(in);
    Type *ft = ir_type_func(in->ctx, p->n_args, p->args, p->out, 0, NULL, 0, NULL);
    p->seq = in->n_pending_made++;
    vec_push(&in->pending, p);
    p->woken = true; /* not tried yet: the solver's first pass tries it */
    vec_push(&in->woken, p);
    return ft;
}

/* The type of e as a child: operators and constructors used as values get their types here. */
static Type *type_of(Infer *in, Expr *e) {
    if (e->kind == EXPR_OP) return op_value_type(in, e);
    if (e->kind == EXPR_CONSTRUCTOR)
        return instantiate(in, (FuncType *)ctor_scheme(in, AS_CONSTRUCTOR(e)), NULL);
    Type *t = get_ty(in, e);
    RLY_CHECK(t != NULL, "type of a %s not computed", ir_expr_kind_names[e->kind]);
    return t;
}

static void infer_op_call(Infer *in, Call *c) {
    Expr *e = &c->base;
    const OpDef *d = op_def(in, c->op, e->span);
    if (d == NULL) {
        set_ty(in, e, in->error);
        return;
    }
    if (d->n_args != OP_VARIADIC && c->n_args != (uint32_t)d->n_args) {
        error_at(in, e->span, "%s expects %d argument%s (%s), got %u", d->name, d->n_args,
                 d->n_args == 1 ? "" : "s", d->arg_names ? d->arg_names : "", c->n_args);
        set_ty(in, e, in->error);
        return;
    }
    Pending *p = arena_alloc(&in->ctx->arena, sizeof *p);
    p->kind = PEND_OP;
    p->at = e;
    p->op = d;
    p->vals = arena_array(&in->ctx->arena, d->n_attrs ? d->n_attrs : 1, sizeof(AttrValue *));
    StrBuf msg = {0};
    Span where;
    if (!op_bind_attrs(d, c->attrs, p->vals, &msg, &where)) {
        error_at(in, where.file ? where : e->span, "%s: %s", d->name, sb_cstr(&msg));
        sb_free(&msg);
        set_ty(in, e, in->error);
        return;
    }
    sb_free(&msg);
    p->n_args = c->n_args;
    p->args = arena_array(&in->ctx->arena, c->n_args ? c->n_args : 1, sizeof(Type *));
    for (uint32_t i = 0; i < c->n_args; i++)
        p->args[i] = type_of(in, c->args[i]);
    p->arg_exprs = c->args;
    p->out = fresh(in);
    set_ty(in, e, p->out);
    add_pending(in, p);
}

static void note_def(Infer *in, Expr *callee) {
    if (callee->kind == EXPR_GLOBAL_VAR) {
        FuncDef *d = ir_module_def_of(in->m, AS_GLOBAL_VAR(callee));
        if (d && d->span.file) diag_note(in->ds, d->span, "@%s is defined here", d->gvar->name);
    } else if (callee->kind == EXPR_CONSTRUCTOR) {
        TypeData *td = AS_CONSTRUCTOR(callee)->belong_to->def;
        if (td && td->span.file)
            diag_note(in->ds, td->span, "%s is a constructor of %s", AS_CONSTRUCTOR(callee)->name,
                      td->header->name);
    }
}

static void infer_call(Infer *in, Call *c) {
    Expr *e = &c->base;
    if (c->op->kind == EXPR_OP) {
        infer_op_call(in, c);
        return;
    }
    Type *ft;
    if (c->op->kind == EXPR_CONSTRUCTOR)
        ft = ctor_scheme(in, AS_CONSTRUCTOR(c->op));
    else
        ft = resolve(in, type_of(in, c->op));
    if (ft == in->error) {
        set_ty(in, e, in->error);
        return;
    }
    if (ft->kind == TYPE_FUNC && ((FuncType *)ft)->n_tparams) {
        Type **targs;
        uint32_t n = ((FuncType *)ft)->n_tparams;
        ft = instantiate(in, (FuncType *)ft, &targs);
        vec_push(&in->polycalls, ((PolyCall){c, n, targs}));
    } else if (ft->kind == TYPE_INCOMPLETE) {
        Type **p = arena_array(&in->ctx->arena, c->n_args ? c->n_args : 1, sizeof(Type *));
        for (uint32_t i = 0; i < c->n_args; i++)
            p[i] = fresh(in);
        Type *g = ir_type_func(in->ctx, c->n_args, p, fresh(in), 0, NULL, 0, NULL);
        unify(in, ft, g);
        ft = g;
    } else if (ft->kind != TYPE_FUNC) {
        error_at(in, use_span(c->op, e),
                 "%s has type %s, which is not a function, and cannot be called",
                 callee_name(in, c->op), type_str(in, ft));
        set_ty(in, e, in->error);
        return;
    }
    FuncType *f = (FuncType *)ft;
    if (f->n_params != c->n_args) {
        error_at(in, e->span, "%s expects %u argument%s, got %u", callee_name(in, c->op),
                 f->n_params, f->n_params == 1 ? "" : "s", c->n_args);
        note_def(in, c->op);
        set_ty(in, e, in->error);
        return;
    }
    for (uint32_t i = 0; i < c->n_args; i++) {
        char what[200];
        snprintf(what, sizeof what, "argument %u of %s", i, callee_name(in, c->op));
        size_t before = in->ds->n_errors;
        expect(in, f->params[i], type_of(in, c->args[i]), use_span(c->args[i], e), what);
        if (in->ds->n_errors != before) note_def(in, c->op);
    }
    set_ty(in, e, f->ret);
}

/* Unify pattern p with the type t of the value it matches. */
static void infer_pattern(Infer *in, Pattern *p, Type *t) {
    switch ((PatternKind)p->kind) {
    case PAT_WILDCARD: return;
    case PAT_VAR: expect(in, get_ty(in, &p->var->base), t, p->span, "pattern variable"); return;
    case PAT_CTOR: {
        Constructor *c = p->ctor;
        FuncType *ft = (FuncType *)instantiate(in, (FuncType *)ctor_scheme(in, c), NULL);
        char what[160];
        snprintf(what, sizeof what, "pattern %s", c->name);
        if (expect(in, ft->ret, t, p->span, what) == in->error) {
            for (uint32_t i = 0; i < p->n && i < ft->n_params; i++)
                infer_pattern(in, p->pats[i], in->error);
            return;
        }
        if (p->n != ft->n_params) {
            error_at(in, p->span, "constructor %s takes %u field%s, the pattern has %u", c->name,
                     ft->n_params, ft->n_params == 1 ? "" : "s", p->n);
            return;
        }
        for (uint32_t i = 0; i < p->n; i++)
            infer_pattern(in, p->pats[i], ft->params[i]);
        return;
    }
    case PAT_TUPLE: {
        Type **f = arena_array(&in->ctx->arena, p->n ? p->n : 1, sizeof(Type *));
        for (uint32_t i = 0; i < p->n; i++)
            f[i] = fresh(in);
        Type *tt = ir_type_tuple(in->ctx, p->n, f);
        bool ok = expect(in, tt, t, p->span, "tuple pattern") != in->error;
        for (uint32_t i = 0; i < p->n; i++)
            infer_pattern(in, p->pats[i], ok ? f[i] : in->error);
        return;
    }
    }
}

static void bind_pattern_vars(Infer *in, Pattern *p) {
    if (p->kind == PAT_VAR) {
        Var *v = p->var;
        if (v->ann) kind_check(in, v->ann, v->base.span);
        set_ty(in, &v->base, v->ann ? v->ann : fresh(in));
    }
    for (uint32_t i = 0; i < p->n; i++)
        bind_pattern_vars(in, p->pats[i]);
}

/* Type the variable of let l from its value (before its body is walked, so that uses in the
 * body see it, and a mismatch is blamed where the variable is used, not at the let). */
static void type_let_var(Infer *in, Let *l) {
    Type *vt = get_ty(in, &l->var->base), *val = type_of(in, l->value);
    if (!l->var->ann && (vt == NULL || (vt->kind == TYPE_INCOMPLETE && vt != in->error &&
                                        bound_to(in, vt) == NULL))) {
        /* An unannotated variable has its value's type. Taking it as it is, rather than
         * unifying it with the unknown made when the binder was visited, spares an occurs check
         * of the value's type at every let (quadratic along a chain of lets that grow a type):
         * only an out-of-scope use inside the value can have met that unknown. */
        set_ty(in, &l->var->base, val);
        return;
    }
    expect(in, vt, val, use_span(l->value, &l->base),
           l->var->ann ? "value of an annotated let" : "let-bound value");
}

static VisitResult pre(Visitor *v, Expr *e) {
    Infer *in = v->state;
    Let *owner = let_of(in, e);
    /* the body may be met inside the value (a shared node): then wait for the let's post */
    if (owner && &owner->base != e &&
        (get_ty(in, owner->value) != NULL || owner->value->kind == EXPR_OP ||
         owner->value->kind == EXPR_CONSTRUCTOR)) {
        set_let_of(in, e, NULL);
        set_let_of(in, &owner->base, NULL); /* done: the let's post skips it */
        type_let_var(in, owner);
    }
    switch ((ExprKind)e->kind) {
    case EXPR_FUNCTION: scheme_of(in, AS_FUNCTION(e)); break;
    case EXPR_LET: {
        Let *l = AS_LET(e);
        if (get_ty(in, &l->var->base) == NULL) {
            if (l->var->ann) {
                kind_check(in, l->var->ann, l->var->base.span);
                set_ty(in, &l->var->base, l->var->ann);
            } else if (l->value->kind == EXPR_FUNCTION) {
                set_ty(in, &l->var->base, scheme_of(in, AS_FUNCTION(l->value)));
            }
        }
        if (l->body != &l->var->base && l->body != l->value) set_let_of(in, l->body, l);
        set_let_of(in, e, l); /* pending: typed at its body's pre, or at its post */
        break;
    }
    case EXPR_MATCH: {
        Match *m = AS_MATCH(e);
        for (uint32_t i = 0; i < m->n_clauses; i++)
            bind_pattern_vars(in, m->clauses[i].lhs);
        break;
    }
    default: break;
    }
    return VISIT_CONTINUE;
}

static void post(Visitor *v, Expr *e) {
    Infer *in = v->state;
    if (e->kind != EXPR_OP && e->kind != EXPR_CONSTRUCTOR) vec_push(&in->exprs, e);
    switch ((ExprKind)e->kind) {
    case EXPR_VAR: {
        Var *x = AS_VAR(e);
        if (get_ty(in, e) == NULL) {
            if (x->ann) kind_check(in, x->ann, e->span);
            set_ty(in, e, x->ann ? x->ann : fresh(in));
        }
        return;
    }
    case EXPR_GLOBAL_VAR:
        if (get_ty(in, e) == NULL) { /* declared, never defined: the parser reported it */
            set_ty(in, e, in->error);
        }
        return;
    case EXPR_CONSTANT: {
        Constant *c = AS_CONSTANT(e);
        set_ty(in, e, ir_type_tensor(in->ctx, c->dtype, c->ndim, c->shape));
        return;
    }
    case EXPR_TUPLE: {
        Tuple *t = AS_TUPLE(e);
        Type **f = arena_array(&in->ctx->arena, t->n ? t->n : 1, sizeof(Type *));
        for (uint32_t i = 0; i < t->n; i++)
            f[i] = type_of(in, t->fields[i]);
        set_ty(in, e, ir_type_tuple(in->ctx, t->n, f));
        return;
    }
    case EXPR_TUPLE_GET_ITEM: {
        Pending *p = arena_alloc(&in->ctx->arena, sizeof *p);
        p->kind = PEND_PROJ;
        p->at = e;
        p->n_args = 1;
        p->args = arena_alloc(&in->ctx->arena, sizeof(Type *));
        p->args[0] = type_of(in, AS_TUPLE_GET_ITEM(e)->tuple);
        p->out = fresh(in);
        set_ty(in, e, p->out);
        add_pending(in, p);
        return;
    }
    case EXPR_LET: {
        Let *l = AS_LET(e);
        if (let_of(in, e) == l) { /* the body was met before (shared) */
            set_let_of(in, e, NULL);
            type_let_var(in, l);
        }
        set_ty(in, e, type_of(in, l->body));
        return;
    }
    case EXPR_FUNCTION: {
        Function *f = AS_FUNCTION(e);
        FuncType *s = (FuncType *)scheme_of(in, f);
        expect(in, s->ret, type_of(in, f->body), use_span(f->body, e),
               f->ret_type ? "function body (against the annotated return type)" : "function body");
        set_ty(in, e, &s->base);
        return;
    }
    case EXPR_CALL: infer_call(in, AS_CALL(e)); return;
    case EXPR_IF: {
        If *x = AS_IF(e);
        expect(in, in->bool_scalar, type_of(in, x->cond), use_span(x->cond, e),
               "if condition (a bool scalar)");
        Type *tt = type_of(in, x->then_branch), *et = type_of(in, x->else_branch);
        Type *t = unify(in, tt, et);
        if (t == NULL) {
            error_at(in, use_span(x->else_branch, e),
                     "if branches have different types: then %s, else %s", type_str(in, tt),
                     type_str(in, et));
            t = in->error;
        }
        set_ty(in, e, t);
        return;
    }
    case EXPR_MATCH: {
        Match *m = AS_MATCH(e);
        Type *dt = type_of(in, m->data);
        Type *t = NULL;
        for (uint32_t i = 0; i < m->n_clauses; i++) {
            infer_pattern(in, m->clauses[i].lhs, dt);
            Type *rt = type_of(in, m->clauses[i].rhs);
            if (t == NULL) {
                t = rt;
                continue;
            }
            Type *u = unify(in, t, rt);
            if (u == NULL) {
                error_at(in, use_span(m->clauses[i].rhs, e),
                         "match clause %u has type %s, but the first clause has type %s", i,
                         type_str(in, rt), type_str(in, t));
                continue;
            }
            t = u;
        }
        if (t == NULL) {
            error_at(in, e->span, "a match needs at least one clause");
            t = in->error;
        }
        if (m->complete) vec_push(&in->matches, m);
        set_ty(in, e, t);
        return;
    }
    case EXPR_REF_CREATE:
        set_ty(in, e, ir_type_ref(in->ctx, type_of(in, AS_REF_CREATE(e)->value)));
        return;
    case EXPR_REF_READ: {
        Expr *r = AS_REF_READ(e)->ref;
        Type *rt = resolve(in, type_of(in, r));
        Type *val = fresh(in);
        if (rt != in->error && rt->kind != TYPE_INCOMPLETE && rt->kind != TYPE_REF) {
            error_at(in, use_span(r, e), "ref_read of a value of type %s, which is not a reference",
                     type_str(in, rt));
            set_ty(in, e, in->error);
            return;
        }
        expect(in, ir_type_ref(in->ctx, val), rt, e->span, "ref_read");
        set_ty(in, e, val);
        return;
    }
    case EXPR_REF_WRITE: {
        RefWrite *w = AS_REF_WRITE(e);
        Type *rt = resolve(in, type_of(in, w->ref));
        if (rt != in->error && rt->kind != TYPE_INCOMPLETE && rt->kind != TYPE_REF) {
            error_at(in, use_span(w->ref, e),
                     "ref_write to a value of type %s, which is not a reference", type_str(in, rt));
        } else {
            expect(in, rt, ir_type_ref(in->ctx, type_of(in, w->value)), use_span(w->value, e),
                   "ref_write");
        }
        set_ty(in, e, in->unit);
        return;
    }
    case EXPR_OP:
    case EXPR_CONSTRUCTOR: return; /* typed at each use (type_of) */
    case EXPR_KIND_COUNT: break;
    }
}

/* ---- the module ----------------------------------------------------------------------------- */

typedef struct Refs {
    Module *m;
    Vec(uint32_t) to; /* indexes of the globals the function being scanned mentions */
} Refs;

static void refs_post(Visitor *v, Expr *e) {
    Refs *r = v->state;
    if (e->kind != EXPR_GLOBAL_VAR) return;
    FuncDef *d = ir_module_def_of(r->m, AS_GLOBAL_VAR(e));
    if (d && d->func) vec_push(&r->to, (uint32_t)(d - r->m->funcs.data));
}

/* The order in which the globals' bodies are walked: every global after the globals that
 * mention it (where there is no cycle), so that the argument types of its calls are known when
 * its body is walked and types flow down a chain of calls. The other way round, each result
 * type would be bound to a chain of unknown results of the functions below it, and every
 * occurs check would walk that chain: quadratic. Reverse postorder of a depth-first walk of
 * the "mentions" graph, its roots taken in reverse module order and each global's callees in
 * reverse order of mention, so that unrelated globals keep their module order and the globals
 * one function calls are walked in the order it calls them (the order its values flow). */
static size_t *walk_order(Module *m) {
    size_t n = m->funcs.len, n_bodies = 0;
    size_t *order = sup_calloc(n + 1, sizeof *order);
    for (size_t i = 0; i < n; i++) {
        order[i] = i;
        n_bodies += m->funcs.data[i].func != NULL;
    }
    if (n_bodies < 2) return order; /* nothing to order: spare the walk */
    /* the edges of i: r.to[first[i]..first[i+1]) */
    size_t *first = sup_calloc(n + 1, sizeof *first);
    Refs r = {m, {0}};
    Visitor v = {NULL, refs_post, &r};
    for (size_t i = 0; i < n; i++) {
        first[i] = r.to.len;
        if (m->funcs.data[i].func) ir_visit(&v, &m->funcs.data[i].func->base);
    }
    first[n] = r.to.len;
    uint8_t *seen = sup_calloc(n + 1, 1);
    typedef struct {
        size_t f, next; /* edges to[first[f]..next) are still to follow, last first */
    } DFrame;
    Vec(DFrame) st = {0};
    size_t k = n; /* postorder fills order from the end: the reverse postorder */
    for (size_t root = n; root-- > 0;) {
        if (seen[root]) continue;
        seen[root] = 1;
        DFrame f0 = {root, first[root + 1]};
        vec_push(&st, f0);
        while (st.len) {
            DFrame *f = &vec_last(&st);
            if (f->next > first[f->f]) {
                size_t c = r.to.data[--f->next];
                if (!seen[c]) {
                    seen[c] = 1;
                    DFrame cf = {c, first[c + 1]};
                    vec_push(&st, cf);
                }
                continue;
            }
            order[--k] = f->f;
            st.len--;
        }
    }
    vec_free(&st);
    vec_free(&r.to);
    free(first);
    free(seen);
    return order;
}

static void report_unresolved(Infer *in) {
    bool any = false;
    for (size_t i = 0; i < in->exprs.len; i++) {
        Expr *e = in->exprs.data[i];
        if (e->kind != EXPR_VAR) continue;
        Type *t = get_ty(in, e);
        if (t && !resolved(in, t)) {
            error_at(in, e->span, "cannot infer the type of %%%s (it is %s); annotate it",
                     AS_VAR(e)->name, type_str(in, t));
            any = true;
        }
    }
    if (any) return;
    for (size_t i = 0; i < in->exprs.len; i++) {
        Expr *e = in->exprs.data[i];
        Type *t = get_ty(in, e);
        if (t && !resolved(in, t)) {
            error_at(in, e->span, "cannot infer the type of this expression (it is %s)",
                     type_str(in, t));
            return;
        }
    }
}

bool ty_infer_module(Module *m) {
    Ctx *ctx = m->ctx;
    Infer in = {0};
    in.ctx = ctx;
    in.m = m;
    in.ds = &ctx->diags;
    in.n_errors_at_start = ctx->diags.n_errors;
    in.error = ir_type_error_new(ctx);
    in.deep_rw = (TypeRewriter){ctx, deep_pre, {0}, &in};
    in.unit = ir_type_tuple(ctx, 0, NULL);
    in.bool_scalar = ir_type_scalar(ctx, RLY_DTYPE_BOOL);
    in.n_ety = ctx->next_id + 1024;
    in.ety = sup_calloc(in.n_ety, sizeof(Type *));

    for (size_t i = 0; i < m->types.len; i++) {
        TypeData *td = m->types.data[i];
        for (uint32_t k = 0; k < td->n_ctors; k++)
            for (uint32_t j = 0; j < td->ctors[k]->n_inputs; j++)
                kind_check(&in, td->ctors[k]->inputs[j], td->span);
    }
    /* globals first: their types are known to every use, in any order */
    for (size_t i = 0; i < m->funcs.len; i++) {
        FuncDef *d = &m->funcs.data[i];
        if (d->func) set_ty(&in, &d->gvar->base, scheme_of(&in, d->func));
    }
    Visitor v = {pre, post, &in};
    size_t *order = walk_order(m);
    for (size_t i = 0; i < m->funcs.len; i++)
        if (m->funcs.data[order[i]].func) ir_visit(&v, &m->funcs.data[order[i]].func->base);
    free(order);
    if (m->is_expr && m->expr) ir_visit(&v, m->expr);
    solve_all(&in);

    bool clean = ctx->diags.n_errors == in.n_errors_at_start;
    for (size_t i = 0; i < in.pending.len; i++) {
        Pending *p = in.pending.data[i];
        if (!clean) break;
        for (uint32_t k = 0; k < p->n_args; k++) {
            if (resolved(&in, p->args[k])) continue;
            error_at(&in, arg_span(p, (int)k),
                     "%s: cannot infer the type of argument %u (it is %s); annotate the values "
                     "it comes from",
                     p->op ? p->op->name : "projection", k, type_str(&in, p->args[k]));
            break;
        }
        if (p->kind == PEND_PROJ)
            error_at(&in, p->at->span, "cannot infer the type of the tuple projected here");
    }
    if (ctx->diags.n_errors == in.n_errors_at_start) report_unresolved(&in);

    for (size_t i = 0; i < in.matches.len; i++) {
        Match *mt = in.matches.data[i];
        const char *miss = ty_match_missing(ctx, mt);
        if (miss)
            error_at(&in, mt->base.span,
                     "match is not exhaustive: no clause matches %s (use "
                     "match? for a partial match)",
                     miss);
    }

    /* write back */
    for (size_t i = 0; i < in.exprs.len; i++) {
        Expr *e = in.exprs.data[i];
        Type *t = get_ty(&in, e);
        if (t) e->checked_type = deep(&in, t);
    }
    for (size_t i = 0; i < in.polycalls.len; i++) {
        PolyCall *pc = &in.polycalls.data[i];
        for (uint32_t k = 0; k < pc->n; k++)
            pc->targs[k] = deep(&in, pc->targs[k]);
        pc->call->n_type_args = pc->n;
        pc->call->type_args = pc->targs;
    }
    bool ok = ctx->diags.n_errors == in.n_errors_at_start;
    free(in.ety);
    free(in.bind);
    free(in.mark);
    free(in.watch);
    vec_free(&in.woken);
    free(in.ground);
    ptrmap_free(&in.deep_rw.memo);
    ptrmap_free(&in.kinds_ok);
    ptrmap_free(&in.schemes);
    free(in.let_of);
    vec_free(&in.pending);
    vec_free(&in.polycalls);
    vec_free(&in.exprs);
    vec_free(&in.matches);
    sb_free(&in.why);
    return ok;
}
