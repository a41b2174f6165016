/* to_a_normal_form.c - ToANormalForm (TVM's to_a_normal_form.cc; module pass, opt level 1):
 * every intermediate value gets a name. Each call, tuple, projection, constant, reference
 * operation, if, match and function literal is let-bound, operands become variables, and the
 * body of every function, if arm and match clause ends in a let chain:
 *
 *   fn (%x) { %0 = add(%x, 1f); multiply(%0, %0) }
 *   ==>  fn (%x) { let %x1 = 1f; let %x2 = add(%x, %x1); let %x3 = multiply(%x2, %x2); %x3 }
 *
 * Scopes are a tree: a function's body, each if arm and each match clause opens one. A node of
 * the (DAG-shaped) program is bound once, in the least common ancestor of the scopes of its
 * uses (TVM's CalcScope), at its first use in evaluation order, so a node shared by both arms of
 * an if is bound before the if. Where TVM would hoist a node into a scope that does not itself
 * use it (a node shared by two match clauses of three, or by two closures), which evaluates it
 * when no use needs it, and where binding an effect once would move it past another effect (one
 * use in an arm, one after the if), the node stays a shared node of the graph instead: each
 * scope that uses it binds it (`let %v = N` in each, the one node N), and the interpreter
 * evaluates a shared node once, at its first use, as it did before. docs/passes.md says more.
 *
 * Two phases, both linear: an analysis over the nodes in topological order (ir_visit's post
 * order, reversed: every use of a node is seen before the node) gives each node its scope, with
 * lowest common ancestors by binary lifting; then a fill that walks the program in evaluation
 * order with an explicit stack. The fill is not an ir_rewrite: a let must be emitted where an
 * edge to an already-converted node is crossed, and the rewriter calls back only on a node's
 * first visit. */
#include "passes/passes.h"

/* ---- scopes ------------------------------------------------------------------------------- */

typedef struct Binding {
    Var *var;
    Expr *value;
} Binding;

typedef struct Scope Scope;
struct Scope {
    Scope *parent;
    uint32_t depth;      /* the root's is 0 */
    Scope **up;          /* up[k] is the 2^k-th ancestor, for every k with 2^k <= depth */
    Vec(Binding) lets;   /* the bindings of the fill so far, in evaluation order */
    PtrMap shared;       /* shared-mode node -> the variable this scope bound it to */
    bool open;           /* the fill is inside this scope (bindings may be added) */
    struct Node *arm_of; /* an if arm or match clause: the (normal) if or match, else NULL */
    struct Node *mark;   /* the node whose uses were last counted here (analysis) */
};

typedef struct Anf {
    Ctx *ctx;
    PtrVec work;   /* scratch: scopes to visit (coverage) */
    Arena arena;   /* scopes and nodes, freed with the pass */
    PtrVec scopes; /* every scope, to free their vectors and maps */
    PtrMap nodes;  /* Expr -> Node */
    PtrMap *pure;  /* pass_is_pure memo, shared by the whole module */
} Anf;

static Scope *scope_new(Anf *a, Scope *parent) {
    Scope *s = arena_alloc(&a->arena, sizeof *s);
    s->parent = parent;
    s->depth = parent ? parent->depth + 1 : 0;
    uint32_t levels = 0;
    while (levels < 32 && (1u << levels) <= s->depth)
        levels++;
    s->up = arena_array(&a->arena, levels ? levels : 1, sizeof(Scope *));
    for (uint32_t k = 0; k < levels; k++)
        s->up[k] = k == 0 ? parent : s->up[k - 1]->up[k - 1];
    vec_push(&a->scopes, s);
    return s;
}

static Scope *lca(Scope *x, Scope *y) {
    if (x->depth < y->depth) {
        Scope *t = x;
        x = y;
        y = t;
    }
    for (uint32_t k = 0, d = x->depth - y->depth; d; k++, d >>= 1)
        if (d & 1) x = x->up[k];
    if (x == y) return x;
    uint32_t levels = 0;
    while (levels < 32 && (1u << levels) <= x->depth)
        levels++;
    for (uint32_t k = levels; k-- > 0;)
        if ((1u << k) <= x->depth && x->up[k] != y->up[k]) {
            x = x->up[k];
            y = y->up[k];
        }
    return x->parent;
}

/* ---- the analysis ------------------------------------------------------------------------- */

enum { MODE_NORMAL, MODE_SHARED };

typedef struct Use {
    Scope *s;
    struct Use *next;
} Use;

/* A node that is not an atom. */
typedef struct Node {
    Scope *at;          /* lowest common ancestor of the scopes of its uses */
    bool used;          /* a use has been seen */
    bool direct_at;     /* some use evaluates it whenever `at` runs */
    bool uniform;       /* every use evaluates it directly, all in the one scope `at` */
    uint8_t mode;       /* MODE_NORMAL: bound once, in `at`; MODE_SHARED: see the file comment */
    Scope **sub;        /* the scopes it opens: if arms, match clauses, a function's body, the
                           inside of a shared let */
    Expr *done;         /* after the fill: the atom naming it (normal), or its new node (shared) */
    Use *direct;        /* the scopes of its direct uses */
    uint32_t n_arms;    /* an if or match: its arms */
    struct Node *cover; /* an if or match: the node whose uses cover_count counts */
    uint32_t cover_count; /* how many of the arms use `cover` directly */
} Node;

static bool is_atom(const Expr *e) {
    return e->kind == EXPR_VAR || e->kind == EXPR_GLOBAL_VAR || e->kind == EXPR_OP ||
           e->kind == EXPR_CONSTRUCTOR;
}

static bool primitive(const Expr *e) {
    if (e->kind != EXPR_FUNCTION) return false;
    const AttrValue *v = ir_attrs_get(((const Function *)e)->attrs, "Primitive");
    return v && v->kind == ATTR_INT && v->i != 0;
}

static Node *node_of(Anf *a, Expr *e) {
    Node *n = ptrmap_get(&a->nodes, e);
    if (n == NULL) {
        n = arena_alloc(&a->arena, sizeof *n);
        ptrmap_put(&a->nodes, e, n);
    }
    return n;
}

/* Record a use of e from scope s; `direct` when evaluating s evaluates the use. */
static void add_use(Anf *a, Expr *e, Scope *s, bool direct) {
    if (is_atom(e)) return;
    Node *n = node_of(a, e);
    if (direct) {
        Use *u = arena_alloc(&a->arena, sizeof *u);
        *u = (Use){s, n->direct};
        n->direct = u;
    }
    if (!n->used) {
        n->at = s;
        n->used = true;
        n->direct_at = n->uniform = direct;
        return;
    }
    Scope *l = lca(n->at, s);
    n->uniform = n->uniform && direct && s == n->at;
    n->direct_at = (l == n->at && n->direct_at) || (l == s && direct);
    n->at = l;
}

/* Whether n, used by no direct use in its scope, is still evaluated whenever that scope runs:
 * every arm of an if or match there (itself evaluated whenever the scope runs) uses it, or
 * every arm of one in such an arm, and so on. Linear in n's uses: each scope is counted once. */
static bool covered(Anf *a, Node *n) {
    a->work.len = 0;
    for (Use *u = n->direct; u; u = u->next)
        vec_push(&a->work, u->s);
    while (a->work.len) {
        Scope *s = vec_pop(&a->work);
        if (s->mark == n) continue;
        s->mark = n;
        if (s == n->at) return true;
        Node *c = s->arm_of;
        if (c == NULL) continue;
        if (c->cover != n) {
            c->cover = n;
            c->cover_count = 0;
        }
        if (++c->cover_count == c->n_arms) vec_push(&a->work, c->at);
    }
    return false;
}

static VisitResult order_pre(Visitor *v, Expr *e) {
    if (!primitive(e)) return VISIT_CONTINUE;
    vec_push((PtrVec *)v->state, e); /* a fused function is a value: its body is not ours */
    return VISIT_SKIP;
}

static void order_post(Visitor *v, Expr *e) { vec_push((PtrVec *)v->state, e); }

/* Decide every node under root (whose one use is in scope top): its mode, its scope and the
 * scopes it opens. */
static void analyse(Anf *a, Expr *root, Scope *top) {
    PtrVec order = {0};
    Visitor v = {order_pre, order_post, &order};
    ir_visit(&v, root);
    add_use(a, root, top, true);
    for (size_t k = order.len; k-- > 0;) { /* every use of a node comes before the node */
        Expr *e = order.data[k];
        if (is_atom(e)) continue;
        Node *n = node_of(a, e);
        RLY_CHECK(n->used, "ToANormalForm: a node without uses");
        bool pure = pass_is_pure(a->pure, e);
        /* An effect is bound once only where all its uses are in one scope: elsewhere binding
         * it once could move it past another effect. */
        if (pure && !n->direct_at) n->direct_at = covered(a, n);
        n->mode = e->kind == EXPR_FUNCTION || (pure ? n->direct_at : n->uniform) ? MODE_NORMAL
                                                                                 : MODE_SHARED;
        bool direct = n->mode == MODE_NORMAL;
        /* only a normal if or match runs whenever its scope does: its arms may cover a node */
        Node *arms_of = direct && (e->kind == EXPR_IF || e->kind == EXPR_MATCH) ? n : NULL;
        switch ((ExprKind)e->kind) {
        case EXPR_IF: {
            If *x = AS_IF(e);
            n->sub = arena_array(&a->arena, 2, sizeof(Scope *));
            n->sub[0] = scope_new(a, n->at);
            n->sub[1] = scope_new(a, n->at);
            n->sub[0]->arm_of = n->sub[1]->arm_of = arms_of;
            n->n_arms = 2;
            add_use(a, x->cond, n->at, direct);
            add_use(a, x->then_branch, n->sub[0], true);
            add_use(a, x->else_branch, n->sub[1], true);
            break;
        }
        case EXPR_MATCH: {
            Match *mt = AS_MATCH(e);
            n->sub = arena_array(&a->arena, mt->n_clauses ? mt->n_clauses : 1, sizeof(Scope *));
            n->n_arms = mt->n_clauses;
            add_use(a, mt->data, n->at, direct);
            for (uint32_t i = 0; i < mt->n_clauses; i++) {
                n->sub[i] = scope_new(a, n->at);
                n->sub[i]->arm_of = arms_of;
                add_use(a, mt->clauses[i].rhs, n->sub[i], true);
            }
            break;
        }
        case EXPR_FUNCTION:
            if (primitive(e)) break;
            n->sub = arena_array(&a->arena, 1, sizeof(Scope *));
            n->sub[0] = scope_new(a, n->at);
            add_use(a, AS_FUNCTION(e)->body, n->sub[0], true);
            break;
        case EXPR_LET: {
            /* A let binds into the scope it is in (let chains stay flat); a shared one cannot,
             * so it gets a scope of its own. */
            Let *l = AS_LET(e);
            Scope *in = n->at;
            if (n->mode == MODE_SHARED) {
                n->sub = arena_array(&a->arena, 1, sizeof(Scope *));
                in = n->sub[0] = scope_new(a, n->at);
            }
            add_use(a, l->value, in, true);
            add_use(a, l->body, in, true);
            break;
        }
        default: {
            uint32_t nk = ir_expr_n_children(e);
            for (uint32_t i = 0; i < nk; i++)
                add_use(a, ir_expr_child(e, i), n->at, direct);
            break;
        }
        }
    }
    vec_free(&order);
}

/* ---- the fill ------------------------------------------------------------------------------ */

/* What a use of a node needs: its value as an atom (a normal parent), the node itself (a
 * shared parent, which evaluates it in place), or bound to a given variable (a let's value). */
typedef struct Req {
    Scope *s;  /* the scope of the use: where a binding it needs goes */
    Var *bind; /* bind the value to this variable, or NULL */
    bool atom;
} Req;

typedef struct Frame {
    Expr *e;
    Node *n;
    Req req;
    uint32_t next; /* the child slot being filled */
    uint32_t base; /* its children's results start here on the value stack */
    bool waiting;  /* a frame for child `next` is above this one */
} Frame;

typedef struct Fill {
    Anf *a;
    Vec(Frame) frames;
    PtrVec vals;
} Fill;

static void push_let(Scope *s, Var *v, Expr *value) {
    RLY_CHECK(s->open, "ToANormalForm: a binding in a closed scope");
    Binding b = {v, value};
    vec_push(&s->lets, b);
}

static Var *fresh_var(Ctx *ctx, Expr *value) {
    Var *v = ir_var_new(ctx, "x", NULL, value->span);
    v->base.checked_type = value->checked_type;
    return v;
}

/* The bindings of s wrapped around body (each let typed ty), s emptied. */
static Expr *wrap(Ctx *ctx, Scope *s, Expr *body, Type *ty) {
    for (size_t i = s->lets.len; i-- > 0;) {
        Binding b = s->lets.data[i];
        body = ir_let_new(ctx, b.var, b.value, body, b.value->span);
        body->checked_type = ty;
    }
    s->lets.len = 0;
    return body;
}

/* The use r of a shared node whose new node is x. */
static Expr *shared_use(Fill *f, Node *n, Expr *x, Req r) {
    if (r.bind) {
        push_let(r.s, r.bind, x);
        ptrmap_put(&r.s->shared, n, r.bind);
        return &r.bind->base;
    }
    if (!r.atom) return x;
    Var *v = ptrmap_get(&r.s->shared, n);
    if (v == NULL) {
        v = fresh_var(f->a->ctx, x);
        push_let(r.s, v, x);
        ptrmap_put(&r.s->shared, n, v);
    }
    return &v->base;
}

/* The use r of e when e is already converted (or an atom); NULL when it must be converted. */
static Expr *resolve(Fill *f, Expr *e, Req r) {
    if (is_atom(e) || ((Node *)ptrmap_get(&f->a->nodes, e))->mode == MODE_NORMAL) {
        Expr *x = is_atom(e) ? e : ((Node *)ptrmap_get(&f->a->nodes, e))->done;
        if (x == NULL) return NULL;
        if (r.bind == NULL) return x;
        push_let(r.s, r.bind, x);
        return &r.bind->base;
    }
    Node *n = ptrmap_get(&f->a->nodes, e);
    return n->done ? shared_use(f, n, n->done, r) : NULL;
}

static Type *body_type(Expr *fn) {
    Type *t = fn->checked_type;
    RLY_CHECK(t && t->kind == TYPE_FUNC, "ToANormalForm: an untyped function");
    return ((FuncType *)t)->ret;
}

/* The scope child slot i of frame fr is filled in; *opens when the slot starts a scope of its
 * own, *closes when the slot ends it (its bindings then wrap the slot's result). */
static Scope *slot_scope(Frame *fr, uint32_t i, bool *opens, bool *closes) {
    Node *n = fr->n;
    *opens = *closes = true;
    switch ((ExprKind)fr->e->kind) {
    case EXPR_IF:
    case EXPR_MATCH:
        if (i > 0) return n->sub[i - 1];
        break;
    case EXPR_FUNCTION: return n->sub[0]; /* the body: parameters never get here */
    case EXPR_LET:
        if (n->mode == MODE_SHARED) { /* the inside opens at the value, closes after the body */
            *opens = i == 1;
            *closes = i == 2;
            return n->sub[0];
        }
        break;
    default: break;
    }
    *opens = *closes = false;
    return n->at;
}

static Type *slot_type(Frame *fr) {
    return fr->e->kind == EXPR_FUNCTION ? body_type(fr->e) : fr->e->checked_type;
}

static bool binder_slot(const Expr *e, uint32_t i) {
    return (e->kind == EXPR_LET && i == 0) ||
           (e->kind == EXPR_FUNCTION && i < ((const Function *)e)->n_params);
}

/* All children of the top frame are filled: build its node and answer its use. The result is
 * pushed on the value stack. */
static void finish(Fill *f) {
    Ctx *ctx = f->a->ctx;
    Frame fr = vec_pop(&f->frames);
    Node *n = fr.n;
    Expr *e = fr.e, **kids = (Expr **)f->vals.data + fr.base, *x, *out;
    if (e->kind == EXPR_LET && n->mode == MODE_NORMAL) {
        x = kids[2]; /* the let went into the scope; its value is its body's */
        n->done = x;
        out = x;
        if (fr.req.bind) {
            push_let(fr.req.s, fr.req.bind, x);
            out = &fr.req.bind->base;
        }
        f->vals.len = fr.base;
        vec_push(&f->vals, out);
        return;
    }
    if (e->kind == EXPR_LET) {
        x = kids[2]; /* the wrapped inside of a shared let */
    } else if (primitive(e)) {
        x = e;
    } else {
        uint32_t nk = ir_expr_n_children(e);
        bool changed = false;
        for (uint32_t i = 0; i < nk; i++)
            changed |= kids[i] != ir_expr_child(e, i);
        x = e;
        if (changed) {
            x = ir_expr_with_children(ctx, e, kids);
            if (!pass_retype(ctx, x, e->checked_type)) x->checked_type = e->checked_type;
        }
    }
    f->vals.len = fr.base;
    if (n->mode == MODE_SHARED) {
        n->done = x;
        out = shared_use(f, n, x, fr.req);
    } else {
        Var *v = fr.req.bind ? fr.req.bind : fresh_var(ctx, x);
        push_let(n->at, v, x);
        n->done = &v->base;
        out = &v->base;
    }
    vec_push(&f->vals, out);
}

/* The converted form of root, used as r asks. */
static Expr *fill(Fill *f, Expr *root, Req r) {
    Expr *done = resolve(f, root, r);
    if (done) return done;
    Frame f0 = {root, ptrmap_get(&f->a->nodes, root), r, 0, (uint32_t)f->vals.len, false};
    vec_push(&f->frames, f0);
    while (f->frames.len) {
        Frame *fr = &vec_last(&f->frames);
        Expr *e = fr->e;
        uint32_t nk = primitive(e) ? 0 : ir_expr_n_children(e);
        if (fr->waiting) { /* child `next` is done: its result is on top of the value stack */
            fr->waiting = false;
        } else if (fr->next < nk) {
            uint32_t i = fr->next;
            Expr *c = ir_expr_child(e, i);
            if (binder_slot(e, i)) {
                vec_push(&f->vals, c);
                fr->next++;
                continue;
            }
            bool opens, closes;
            Scope *s = slot_scope(fr, i, &opens, &closes);
            if (opens) {
                RLY_CHECK(s->lets.len == 0, "ToANormalForm: a scope filled twice");
                s->open = true;
            }
            /* a normal node names its operands; a shared one evaluates shared operands in place */
            Req cr = {s, NULL, fr->n->mode == MODE_NORMAL || opens || closes};
            if (e->kind == EXPR_LET && i == 1) cr.bind = AS_LET(e)->var;
            if (e->kind == EXPR_LET && i == 2) cr.atom = true;
            Expr *x = resolve(f, c, cr);
            if (x == NULL) {
                fr->waiting = true;
                Frame nf = {c, ptrmap_get(&f->a->nodes, c), cr, 0, (uint32_t)f->vals.len, false};
                vec_push(&f->frames, nf); /* fr is stale from here */
                continue;
            }
            vec_push(&f->vals, x);
        } else {
            finish(f);
            continue;
        }
        /* after child `next`: close the scope it filled */
        bool opens, closes;
        Scope *s = slot_scope(fr, fr->next, &opens, &closes);
        if (closes) {
            Expr **top = (Expr **)&vec_last(&f->vals);
            *top = wrap(f->a->ctx, s, *top, slot_type(fr));
            s->open = false;
        }
        fr->next++;
    }
    RLY_CHECK(f->vals.len >= 1, "ToANormalForm: lost the result");
    return vec_pop(&f->vals);
}

/* ---- the pass ------------------------------------------------------------------------------ */

static bool compiler_fn(const Function *fn) { return ir_attrs_get(fn->attrs, "Compiler") != NULL; }

/* e converted: a function's body (or a bare expression) becomes a let chain. */
static Expr *convert(Ctx *ctx, PtrMap *pure, Expr *e) {
    if (primitive(e) || (e->kind == EXPR_FUNCTION && compiler_fn(AS_FUNCTION(e)))) return e;
    Anf a = {.ctx = ctx, .pure = pure};
    arena_init(&a.arena);
    Expr *root = e->kind == EXPR_FUNCTION ? AS_FUNCTION(e)->body : e;
    Scope *top = scope_new(&a, NULL);
    top->open = true;
    analyse(&a, root, top);
    Fill f = {&a, {0}, {0}};
    Expr *atom = fill(&f, root, (Req){top, NULL, true});
    Type *ty = e->kind == EXPR_FUNCTION ? body_type(e) : e->checked_type;
    Expr *body = wrap(ctx, top, atom, ty);
    Expr *out = body;
    if (e->kind == EXPR_FUNCTION) {
        Function *fn = AS_FUNCTION(e);
        out = body == fn->body ? e
                               : ir_function_new(ctx, fn->n_params, fn->params, body, fn->ret_type,
                                                 fn->n_tparams, fn->tparams, fn->attrs, e->span);
        if (out != e) out->checked_type = e->checked_type;
    }
    vec_free(&f.frames);
    vec_free(&f.vals);
    for (size_t i = 0; i < a.scopes.len; i++) {
        Scope *s = a.scopes.data[i];
        vec_free(&s->lets);
        ptrmap_free(&s->shared);
    }
    vec_free(&a.scopes);
    vec_free(&a.work);
    ptrmap_free(&a.nodes);
    arena_free(&a.arena);
    return out;
}

static bool run(PassCtx *pc, Module *m) {
    PtrMap pure = {0};
    for (size_t i = 0; i < m->funcs.len; i++) {
        FuncDef *d = &m->funcs.data[i];
        if (d->func) d->func = AS_FUNCTION(convert(pc->ctx, &pure, &d->func->base));
    }
    if (m->expr) m->expr = convert(pc->ctx, &pure, m->expr);
    ptrmap_free(&pure);
    return true;
}

const PassDef pass_to_a_normal_form = {
    .name = "ToANormalForm",
    .opt_level = 1,
    .kind = PASS_MODULE,
    .params = "",
    .run_module = run,
    .doc = "let-bind every intermediate value, each in the innermost scope of all its uses",
};
