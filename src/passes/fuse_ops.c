/* fuse_ops.c - FuseOps: group operator calls into functions marked Primitive=1 (TVM's FuseOps,
 * opt level 0; src/relay/transforms/fuse_ops.cc and src/relay/analysis/graph_partitioner.cc).
 * docs/passes.md says what it does and where it differs from TVM.
 *
 * Per function (nested function literals included, Primitive ones skipped):
 *   1. the indexed dataflow graph: operator calls, tuples, projections, constants and variables
 *      are nodes numbered in post order, with an edge to each consumer carrying the consumer's
 *      pattern (a broadcast whose argument has the result's shape is element-wise there);
 *      let, if, match, references and calls of functions or closures are nodes too, but every
 *      child of theirs is used "outside" (it ends its dataflow region: no post-dominator);
 *   2. the post-dominator tree (dominators.c);
 *   3. the partition, a union-find over nodes, in three phases: out-elemwise-fusable anchors
 *      (conv2d, dense, ...) take their element-wise and broadcast consumers up to the
 *      post-dominator; element-wise, broadcast and injective chains fuse into what follows
 *      (a reduction included); then injective nodes fuse into a tuple that itself fused into
 *      an injective consumer (concatenate). A group never exceeds max_depth nodes;
 *   4. the rewrite: each group becomes `fn (%p0, ..., Primitive=1) { ... }` called where the
 *      group's last node was, with the group's inputs (other groups, variables, tensor
 *      constants) as arguments in the order the group first uses them.
 * Members of a group are operator calls, tuples, projections and scalar constants, all pure;
 * each member's consumers are members or (for the last node) anything, so nothing is moved
 * across a let, an arm or a function boundary, and the inputs are evaluated in their order.
 * The analysis walks are iterative (explicit stacks) and bounded by max_depth per node; the
 * LCA costs O(log n); the pass is O(n log n) in the function's size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "passes/dominators.h"
#include "passes/passes.h"

/* ======================================================================================
 * The indexed dataflow graph
 * ====================================================================================== */

typedef struct GEdge {
    uint32_t src, dst;
    uint8_t pattern;
} GEdge;

typedef struct Graph {
    PtrMap index;         /* Expr -> node index + 1 */
    PtrVec nodes;         /* index -> Expr */
    Vec(uint8_t) pattern; /* index -> OpPattern of the node */
    Vec(uint8_t) ext;     /* index -> used outside the dataflow graph */
    Vec(GEdge) edges;     /* producer -> consumer */
    uint32_t *off;        /* consumers of v: out[off[v] .. off[v + 1]) */
    DomEdge *out;
} Graph;

static bool is_primitive(const Expr *e) {
    if (e->kind != EXPR_FUNCTION) return false;
    const AttrValue *v = ir_attrs_get(((const Function *)e)->attrs, "Primitive");
    return v && ((v->kind == ATTR_INT && v->i != 0) || (v->kind == ATTR_BOOL && v->b));
}

static int64_t node_of(const Graph *g, const Expr *e) {
    return (int64_t)(uintptr_t)ptrmap_get(&g->index, e) - 1;
}

static void mark_ext(Graph *g, const Expr *e) {
    int64_t i = node_of(g, e);
    if (i >= 0) g->ext.data[i] = 1;
}

static void add_edge(Graph *g, const Expr *from, uint32_t to, uint8_t pattern) {
    int64_t i = node_of(g, from);
    if (i < 0) return; /* a function literal, operator, global or constructor: not a node */
    GEdge ed = {(uint32_t)i, to, pattern};
    vec_push(&g->edges, ed);
}

static const OpDef *op_def(Expr *op) {
    Op *o = AS_OP(op);
    return o->info ? (const OpDef *)o->info : op_lookup(o->name, strlen(o->name));
}

static bool same_shape(const Type *a, const Type *b) {
    if (a == NULL || b == NULL || a->kind != TYPE_TENSOR || b->kind != TYPE_TENSOR) return false;
    const TensorType *x = (const TensorType *)a, *y = (const TensorType *)b;
    return x->ndim == y->ndim && memcmp(x->shape, y->shape, x->ndim * sizeof *x->shape) == 0;
}

static bool is_tensor(const Type *t) { return t && t->kind == TYPE_TENSOR; }

static VisitResult graph_pre(Visitor *v, Expr *e) {
    (void)v;
    return is_primitive(e) ? VISIT_SKIP : VISIT_CONTINUE;
}

/* After e's children: number e (when it is a node) and connect its children to it. */
static void graph_post(Visitor *v, Expr *e) {
    Graph *g = v->state;
    if (e->kind == EXPR_OP || e->kind == EXPR_GLOBAL_VAR || e->kind == EXPR_CONSTRUCTOR) return;
    uint32_t me = (uint32_t)g->nodes.len;
    uint8_t pattern = OP_OPAQUE;
    if (e->kind != EXPR_FUNCTION) {
        vec_push(&g->nodes, e);
        vec_push(&g->pattern, (uint8_t)OP_OPAQUE);
        vec_push(&g->ext, (uint8_t)0);
        ptrmap_put(&g->index, e, (void *)(uintptr_t)(me + 1));
    }
    switch ((ExprKind)e->kind) {
    case EXPR_CONSTANT: {
        /* Scalars of the types kernels take inline fuse into their consumer; any other constant
         * is its own (opaque) group, passed to the fused function as an argument. */
        Constant *c = AS_CONSTANT(e);
        bool simple = c->dtype == RLY_DTYPE_I32 || c->dtype == RLY_DTYPE_I64 ||
                      c->dtype == RLY_DTYPE_F32 || c->dtype == RLY_DTYPE_F64 ||
                      c->dtype == RLY_DTYPE_BOOL;
        pattern = c->ndim == 0 && simple ? OP_ELEMWISE : OP_OPAQUE;
        break;
    }
    case EXPR_CALL: {
        Call *c = AS_CALL(e);
        if (c->op->kind == EXPR_OP) {
            const OpDef *d = op_def(c->op);
            pattern = d ? d->pattern : OP_OPAQUE;
        } else {
            add_edge(g, c->op, me, OP_OPAQUE);
        }
        mark_ext(g, c->op);
        for (uint32_t i = 0; i < c->n_args; i++) {
            uint8_t edge = pattern;
            if (edge == OP_BROADCAST && same_shape(c->args[i]->checked_type, e->checked_type))
                edge = OP_ELEMWISE;
            add_edge(g, c->args[i], me, edge);
        }
        break;
    }
    case EXPR_TUPLE: {
        Tuple *t = AS_TUPLE(e);
        pattern = OP_TUPLE;
        for (uint32_t i = 0; i < t->n; i++) {
            if (is_tensor(t->fields[i]->checked_type))
                add_edge(g, t->fields[i], me, OP_INJECTIVE);
            else
                mark_ext(g, t->fields[i]);
        }
        break;
    }
    case EXPR_TUPLE_GET_ITEM: {
        /* Fused functions take tensors and tuples of tensors: a projection of a tuple with
         * other fields is a barrier. */
        TupleGetItem *t = AS_TUPLE_GET_ITEM(e);
        Type *tt = t->tuple->checked_type;
        bool tensors = tt && tt->kind == TYPE_TUPLE;
        for (uint32_t i = 0; tensors && i < AS_TUPLE_TYPE(tt)->n; i++)
            tensors = is_tensor(AS_TUPLE_TYPE(tt)->fields[i]);
        if (tensors) {
            pattern = OP_INJECTIVE;
            add_edge(g, t->tuple, me, OP_INJECTIVE);
        } else {
            mark_ext(g, t->tuple);
        }
        break;
    }
    case EXPR_VAR:
    case EXPR_OP:
    case EXPR_GLOBAL_VAR:
    case EXPR_CONSTRUCTOR:
    case EXPR_KIND_COUNT: break;
    case EXPR_FUNCTION:
    case EXPR_LET:
    case EXPR_IF:
    case EXPR_MATCH:
    case EXPR_REF_CREATE:
    case EXPR_REF_READ:
    case EXPR_REF_WRITE: {
        /* Not dataflow: each child ends its region. */
        uint32_t n = ir_expr_n_children(e);
        for (uint32_t i = 0; i < n; i++)
            mark_ext(g, ir_expr_child(e, i));
        break;
    }
    }
    if (e->kind != EXPR_FUNCTION) g->pattern.data[me] = pattern;
}

/* Build the graph of `root` (its value is used outside, so it is a region's end). */
static void graph_build(Graph *g, Expr *root) {
    Visitor v = {graph_pre, graph_post, g};
    if (!is_primitive(root)) ir_visit(&v, root);
    mark_ext(g, root);
    uint32_t n = (uint32_t)g->nodes.len;
    g->off = sup_calloc((size_t)n + 1, sizeof *g->off);
    g->out = sup_malloc(sup_mul(g->edges.len ? g->edges.len : 1, sizeof *g->out));
    for (size_t k = 0; k < g->edges.len; k++)
        g->off[g->edges.data[k].src + 1]++;
    for (uint32_t i = 0; i < n; i++)
        g->off[i + 1] += g->off[i];
    uint32_t *fill = sup_malloc(sup_mul((size_t)n + 1, sizeof *fill));
    memcpy(fill, g->off, ((size_t)n + 1) * sizeof *fill);
    for (size_t k = 0; k < g->edges.len; k++) {
        GEdge ed = g->edges.data[k];
        g->out[fill[ed.src]++] = (DomEdge){ed.dst, ed.pattern};
    }
    free(fill);
}

static void graph_free(Graph *g) {
    ptrmap_free(&g->index);
    vec_free(&g->nodes);
    vec_free(&g->pattern);
    vec_free(&g->ext);
    vec_free(&g->edges);
    free(g->off);
    free(g->out);
}

/* ======================================================================================
 * The partition (Relay's GraphPartitioner): one group object per node, joined by union-find.
 * As in Relay, a group object keeps the pattern and node count it had when it stopped being a
 * root, and the walks below read a node's own object, not its root's, where Relay does.
 * ====================================================================================== */

typedef struct Part {
    const Graph *g;
    const PostDom *dom;
    uint32_t n;
    uint32_t *uf;        /* union-find parent; itself for a root */
    uint8_t *pattern;    /* the group's pattern */
    uint8_t *anchor;     /* the group holds an out-elemwise-fusable node */
    uint32_t *num_nodes; /* the group's size */
    uint32_t *seen;      /* == epoch: visited by the current walk */
    uint32_t epoch;
    Vec(uint32_t) stack;
    int64_t max_depth;
} Part;

static uint32_t find(Part *p, uint32_t v) {
    uint32_t r = v;
    while (p->uf[r] != r)
        r = p->uf[r];
    while (p->uf[v] != r) {
        uint32_t next = p->uf[v];
        p->uf[v] = r;
        v = next;
    }
    return r;
}

static uint8_t combine(uint8_t a, uint8_t b) {
    RLY_CHECK(a <= OP_BROADCAST || b <= OP_BROADCAST,
              "FuseOps: cannot merge two complex groups together");
    return a > b ? a : b;
}

static void merge(Part *p, uint32_t child, uint32_t parent) {
    child = find(p, child);
    parent = find(p, parent);
    if (child == parent) return;
    p->num_nodes[parent] += p->num_nodes[child];
    p->uf[child] = parent;
    if (p->anchor[child]) {
        RLY_CHECK(!p->anchor[parent], "FuseOps: a group with two anchors");
        p->anchor[parent] = 1;
        p->pattern[parent] = combine(p->pattern[child], p->pattern[parent]);
    }
}

static void push_outputs(Part *p, uint32_t v) {
    for (uint32_t k = p->g->off[v]; k < p->g->off[v + 1]; k++)
        vec_push(&p->stack, p->g->out[k].node);
}

static void walk_start(Part *p) {
    p->epoch++;
    p->stack.len = 0;
}

static bool visit_once(Part *p, uint32_t v) {
    if (p->seen[v] == p->epoch) return false;
    p->seen[v] = p->epoch;
    return true;
}

/* What may lie between a node and its post-dominator (Relay's fcond lambdas). */
typedef enum Cond {
    COND_BROADCAST,     /* everything element-wise or broadcast */
    COND_INJECTIVE,     /* everything at most injective */
    COND_TO_ANY_ANCHOR, /* at most injective before the sink; the sink may be anything fusable */
} Cond;

static bool cond_holds(Cond c, uint8_t kind, bool is_sink) {
    switch (c) {
    case COND_BROADCAST: return kind <= OP_BROADCAST;
    case COND_INJECTIVE: return kind <= OP_INJECTIVE;
    case COND_TO_ANY_ANCHOR: return kind <= (is_sink ? OP_OUT_EWISE_FUSABLE : OP_INJECTIVE);
    }
    return false;
}

/* Does every node on the paths from src (not included) to sink satisfy c? */
static bool check_path(Part *p, uint32_t src, uint32_t sink, Cond c) {
    walk_start(p);
    push_outputs(p, src);
    while (p->stack.len) {
        uint32_t v = vec_pop(&p->stack);
        if (!visit_once(p, v)) continue;
        if (!cond_holds(c, p->pattern[find(p, v)], v == sink)) return false;
        if (v != sink) push_outputs(p, v);
    }
    return true;
}

/* Merge every node on the paths from src to sink into sink's group. */
static void commit_fuse(Part *p, uint32_t src, uint32_t sink) {
    walk_start(p);
    vec_push(&p->stack, src);
    while (p->stack.len) {
        uint32_t v = vec_pop(&p->stack);
        if (v == sink || !visit_once(p, v)) continue;
        merge(p, v, sink);
        push_outputs(p, v);
    }
}

/* Would the group of dom_parent exceed max_depth nodes with everything from child up to it?
 * (Relay's CountFusedNodesWithNewChild > max_fuse_depth; the walk stops once it knows.) */
static bool too_deep(Part *p, uint32_t child, uint32_t dom_parent) {
    int64_t sum = p->num_nodes[find(p, dom_parent)];
    if (sum > p->max_depth) return true;
    walk_start(p);
    vec_push(&p->stack, child);
    while (p->stack.len) {
        uint32_t v = vec_pop(&p->stack);
        if (v == dom_parent || !visit_once(p, v)) continue;
        sum += p->num_nodes[v];
        if (sum > p->max_depth) return true;
        push_outputs(p, v);
    }
    return false;
}

static void run_phase(Part *p, int phase) {
    for (uint32_t v = 0; v < p->n; v++) {
        uint8_t pat = p->pattern[v];
        if (pat == OP_OPAQUE) continue;
        uint32_t dom = p->dom->parent[v];
        if (dom == p->n) continue; /* no post-dominator */
        RLY_CHECK(!p->g->ext.data[v], "FuseOps: an outside use with a post-dominator");
        if (too_deep(p, v, dom)) continue;
        if (phase == 2) {
            /* Fuse injective nodes into a tuple that has fused into an injective consumer. */
            if (pat > OP_INJECTIVE) continue;
            uint32_t dom_root = find(p, dom);
            if (p->pattern[dom_root] == OP_TUPLE) continue;
            if (p->pattern[dom] == OP_TUPLE && p->pattern[dom_root] <= OP_INJECTIVE &&
                check_path(p, v, dom, COND_INJECTIVE))
                commit_fuse(p, v, dom);
            continue;
        }
        if (find(p, v) == find(p, dom)) continue;
        if (p->pattern[dom] == OP_TUPLE) continue; /* not into a tuple (yet) */
        if (pat == OP_OUT_EWISE_FUSABLE) {
            /* An anchor takes its consumers when the way there is element-wise. */
            if (phase == 0 && p->dom->pattern[v] == OP_ELEMWISE &&
                check_path(p, v, dom, COND_BROADCAST))
                commit_fuse(p, v, dom);
        } else if (pat <= OP_BROADCAST) {
            uint8_t way = p->dom->pattern[v];
            if ((way <= OP_INJECTIVE || way == OP_COMM_REDUCE) &&
                check_path(p, v, dom, COND_TO_ANY_ANCHOR))
                commit_fuse(p, v, dom);
        } else if (pat == OP_INJECTIVE || pat == OP_TUPLE) {
            /* after phase 0, so that anchors have taken their consumers first */
            if (phase == 1 && check_path(p, v, dom, COND_INJECTIVE)) commit_fuse(p, v, dom);
        }
        /* a reduction fuses into nothing after it */
    }
}

static void partition(Part *p, const Graph *g, const PostDom *dom, bool fuse, int64_t max_depth) {
    uint32_t n = (uint32_t)g->nodes.len;
    *p = (Part){.g = g, .dom = dom, .n = n, .max_depth = max_depth};
    p->uf = sup_malloc(sup_mul((size_t)n + 1, sizeof *p->uf));
    p->pattern = sup_malloc((size_t)n + 1);
    p->anchor = sup_calloc((size_t)n + 1, 1);
    p->num_nodes = sup_malloc(sup_mul((size_t)n + 1, sizeof *p->num_nodes));
    p->seen = sup_calloc((size_t)n + 1, sizeof *p->seen);
    for (uint32_t v = 0; v < n; v++) {
        p->uf[v] = v;
        p->pattern[v] = g->pattern.data[v];
        p->anchor[v] = g->pattern.data[v] == OP_OUT_EWISE_FUSABLE;
        p->num_nodes[v] = 1;
    }
    if (fuse)
        for (int phase = 0; phase < 3; phase++)
            run_phase(p, phase);
}

static void part_free(Part *p) {
    free(p->uf);
    free(p->pattern);
    free(p->anchor);
    free(p->num_nodes);
    free(p->seen);
    vec_free(&p->stack);
}

/* ======================================================================================
 * The rewrite: group members are rebuilt over the group's parameters; the last node of each
 * group becomes the call of the group's function.
 * ====================================================================================== */

/* The parameters of one group's function and the arguments of its call. */
typedef struct GroupInfo {
    PtrVec params, args;
    PtrMap by_arg; /* arg -> param, once the group has many inputs */
    bool has_call;
} GroupInfo;

enum { LINEAR_PARAMS = 16 }; /* up to this many inputs a scan finds a parameter */

typedef struct Fuse {
    Ctx *ctx;
    Graph *g;
    Part *p;
    uint32_t *group;      /* node index -> its group (the root's node index) */
    uint32_t *info_of;    /* root node index -> 1 + its GroupInfo's index, 0 before first use */
    Vec(GroupInfo) infos; /* one per group with a function */
    bool link_params;
    const Attrs *prim[2]; /* Primitive=0, Primitive=1 */
} Fuse;

static uint32_t group_of(Fuse *f, int64_t node) { return f->group[node]; }

static GroupInfo *info(Fuse *f, uint32_t gr) {
    if (f->info_of[gr] == 0) {
        GroupInfo gi = {0};
        vec_push(&f->infos, gi);
        f->info_of[gr] = (uint32_t)f->infos.len;
    }
    return &f->infos.data[f->info_of[gr] - 1];
}

/* The parameter of group gr standing for argument `arg` (its rewritten form) of type t. */
static Expr *param_for(Fuse *f, uint32_t gr, Expr *arg, Type *t) {
    GroupInfo *gi = info(f, gr);
    if (gi->args.len <= LINEAR_PARAMS) {
        for (size_t i = 0; i < gi->args.len; i++)
            if (gi->args.data[i] == arg) return gi->params.data[i];
    } else {
        Expr *p = ptrmap_get(&gi->by_arg, arg);
        if (p) return p;
    }
    char name[32];
    snprintf(name, sizeof name, "p%zu", gi->params.len);
    Var *v = ir_var_new(f->ctx, name, t, arg->span);
    v->base.checked_type = t;
    vec_push(&gi->params, v);
    vec_push(&gi->args, arg);
    if (gi->args.len == LINEAR_PARAMS + 1)
        for (size_t i = 0; i < gi->args.len; i++)
            ptrmap_put(&gi->by_arg, gi->args.data[i], gi->params.data[i]);
    else if (gi->args.len > LINEAR_PARAMS + 1)
        ptrmap_put(&gi->by_arg, arg, v);
    return &v->base;
}

/* The operand of a member of group gr: the rewritten operand itself when it is in gr,
 * otherwise a parameter (or, with link_params, a tensor constant itself). */
static Expr *operand(Fuse *f, uint32_t gr, Expr *orig, Expr *now) {
    int64_t i = node_of(f->g, orig);
    if (i >= 0 && group_of(f, i) == gr) return now;
    if (f->link_params && now->kind == EXPR_CONSTANT) return now;
    return param_for(f, gr, now, orig->checked_type);
}

/* Close group gr, whose last node rebuilt is `body` of type ret, into its function and call. */
static Expr *make_function(Fuse *f, uint32_t gr, Expr *body, Type *ret, Span span) {
    GroupInfo *gi = info(f, gr);
    uint32_t n = (uint32_t)gi->params.len;
    Type **pts = arena_array(&f->ctx->arena, n ? n : 1, sizeof *pts);
    for (uint32_t i = 0; i < n; i++)
        pts[i] = ((Expr *)gi->params.data[i])->checked_type;
    Expr *fn = ir_function_new(f->ctx, n, (Var *const *)gi->params.data, body, ret, 0, NULL,
                               f->prim[gi->has_call], span);
    fn->checked_type = ir_type_func(f->ctx, n, pts, ret, 0, NULL, 0, NULL);
    Expr *call = ir_call_new(f->ctx, fn, n, (Expr *const *)gi->args.data, NULL, 0, NULL, span);
    call->checked_type = ret;
    return call;
}

static Expr *fuse_pre(Rewriter *rw, Expr *e) {
    (void)rw;
    return is_primitive(e) ? e : NULL;
}

static Expr *fuse_post(Rewriter *rw, Expr *orig, Expr *e) {
    Fuse *f = rw->state;
    int64_t me = node_of(f->g, orig);
    if (me < 0) return pass_rebuild(rw, orig, e);
    uint32_t gr = group_of(f, me);
    bool last = gr == (uint32_t)me; /* a group's root is its last node (merges go forward) */
    switch ((ExprKind)orig->kind) {
    case EXPR_CALL: {
        Call *oc = AS_CALL(orig), *c = AS_CALL(e);
        if (oc->op->kind != EXPR_OP) break;
        if (strcmp(AS_OP(oc->op)->name, "annotation.stop_fusion") == 0) return c->args[0];
        Expr *small[8],
            **args = oc->n_args <= 8 ? small : sup_malloc(sup_mul(oc->n_args, sizeof *args));
        for (uint32_t i = 0; i < oc->n_args; i++)
            args[i] = operand(f, gr, oc->args[i], c->args[i]);
        Expr *call = ir_call_new(f->ctx, oc->op, oc->n_args, args, oc->attrs, oc->n_type_args,
                                 oc->type_args, orig->span);
        if (args != small) free(args);
        call->checked_type = orig->checked_type; /* the same operands' types */
        info(f, gr)->has_call = true;
        return last ? make_function(f, gr, call, orig->checked_type, orig->span) : call;
    }
    case EXPR_TUPLE: {
        if (last) break;
        Tuple *ot = AS_TUPLE(orig), *t = AS_TUPLE(e);
        Expr *small[8], **fs = ot->n <= 8 ? small : sup_malloc(sup_mul(ot->n, sizeof *fs));
        for (uint32_t i = 0; i < ot->n; i++)
            fs[i] = operand(f, gr, ot->fields[i], t->fields[i]);
        Expr *tup = ir_tuple_new(f->ctx, ot->n, fs, orig->span);
        if (fs != small) free(fs);
        tup->checked_type = orig->checked_type;
        return tup;
    }
    case EXPR_TUPLE_GET_ITEM: {
        TupleGetItem *og = AS_TUPLE_GET_ITEM(orig);
        int64_t ti = node_of(f->g, og->tuple);
        /* A projection whose tuple is another group's (an opaque operator's result) stays. */
        if (last && (ti < 0 || group_of(f, ti) != gr)) break;
        Expr *tup = operand(f, gr, og->tuple, AS_TUPLE_GET_ITEM(e)->tuple);
        Expr *get = ir_tuple_get_item_new(f->ctx, tup, og->index, orig->span);
        get->checked_type = orig->checked_type;
        return last ? make_function(f, gr, get, orig->checked_type, orig->span) : get;
    }
    default: break;
    }
    return pass_rebuild(rw, orig, e);
}

/* ======================================================================================
 * The pass
 * ====================================================================================== */

static Expr *run(PassCtx *pc, Module *m, Expr *e) {
    (void)m;
    Ctx *ctx = pc->ctx;
    int64_t level = pass_arg_int(pc, "fuse_opt_level");
    int64_t max_depth = pass_arg_int(pc, "max_depth");
    if (level == -1) level = pc->opt_level;
    if (max_depth < 0) {
        diag_error(&ctx->diags, SPAN_NONE, "FuseOps: max_depth must be at least 0, not %lld",
                   (long long)max_depth);
        return NULL;
    }
    if (is_primitive(e)) return e;
    Graph g = {0};
    graph_build(&g, e);
    PostDom dom;
    pass_postdom_build(&dom, (uint32_t)g.nodes.len, g.off, g.out, (const bool *)g.ext.data);
    Part p;
    partition(&p, &g, &dom, level != 0, max_depth);
    const char *key = ir_intern(ctx, "Primitive", 9);
    AttrValue *zero = ir_attr_int(ctx, 0, RLY_DTYPE_I32, SPAN_NONE);
    AttrValue *one = ir_attr_int(ctx, 1, RLY_DTYPE_I32, SPAN_NONE);
    Fuse f = {
        .ctx = ctx,
        .g = &g,
        .p = &p,
        .group = sup_malloc(sup_mul(p.n ? p.n : 1, sizeof *f.group)),
        .info_of = sup_calloc(p.n ? p.n : 1, sizeof *f.info_of),
        .link_params = pass_arg_bool(pc, "link_params"),
        .prim = {ir_attrs_new(ctx, 1, &key, &zero), ir_attrs_new(ctx, 1, &key, &one)},
    };
    for (uint32_t v = 0; v < p.n; v++)
        f.group[v] = find(&p, v);
    Rewriter rw = {.ctx = ctx, .pre = fuse_pre, .post = fuse_post, .state = &f};
    Expr *r = ir_rewrite(&rw, e);
    ir_rewriter_free(&rw);
    for (size_t i = 0; i < f.infos.len; i++) {
        vec_free(&f.infos.data[i].params);
        vec_free(&f.infos.data[i].args);
        ptrmap_free(&f.infos.data[i].by_arg);
    }
    vec_free(&f.infos);
    free(f.group);
    free(f.info_of);
    part_free(&p);
    pass_postdom_free(&dom);
    graph_free(&g);
    return r;
}

const PassDef pass_fuse_ops = {
    .name = "FuseOps",
    .opt_level = 0,
    .kind = PASS_FUNCTION,
    .params = "fuse_opt_level:int=-1,max_depth:int=256,link_params:bool=False",
    .run_expr = run,
    .doc = "fuse operator calls into Primitive=1 functions along post-dominators (fusion "
           "patterns of the operator table); fuse_opt_level 0 wraps each call alone",
};
