/* viz.c - rly_module_draw (`rly viz`, docs/tools.md "Graphs"): the dataflow graph of a module as
 * Graphviz DOT, or as a self-contained HTML page laid out here.
 *
 * The graph: a node per operator call, constant, parameter, tuple, field, if, match, reference
 * operation and call of a global or closure; an edge per use, labelled with the used value's
 * type. Each global function is a cluster (with an entry node that calls of it point at, dashed,
 * and a return node); a Primitive function (a FuseOps group) is a nested cluster named as the VM
 * names it (fused_conv2d_add_nn_relu), whose parameters are the call's arguments; other function
 * literals (closures) are nested clusters too. `let` and variables draw nothing: a variable's
 * uses are edges from its value.
 *
 * Both steps are linear and iterative: ir_visit walks the bodies (10^5-deep programs), variables
 * are resolved to their values with a loop, clusters print with an explicit stack, and the HTML
 * layout is a longest-path layering over the nodes in creation order (which is a topological
 * order of the dataflow edges; edges against it, from let-bound recursion or calls, do not
 * constrain it). */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "kernels/kernel.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "types/types.h"

/* ---- the graph ------------------------------------------------------------------------------ */

typedef enum NodeShape {
    SH_OP,    /* an operator call */
    SH_CONST, /* a constant */
    SH_PARAM, /* a parameter */
    SH_CTRL,  /* if, match */
    SH_CALL,  /* a call of a global or a closure */
    SH_DATA,  /* tuple, field, constructor, reference operations, values of functions */
    SH_ENTRY, /* a global function's entry */
    SH_RET,   /* a function's return */
} NodeShape;

typedef struct GNode {
    char *label; /* owned */
    uint8_t shape;
    uint32_t cluster;
} GNode;

/* An edge from the value of expression `src` (resolved when the walk is over: a variable stands
 * for its value) or from node `from` when src is NULL. */
typedef struct GEdge {
    Expr *src;
    uint32_t from, to;
    char *label;   /* owned; NULL: the source's type */
    uint8_t style; /* 0 dataflow, 1 call (dashed, not constraining) */
} GEdge;

typedef struct GCluster {
    char *label;     /* owned */
    uint32_t parent; /* UINT32_MAX for a top-level one */
    uint8_t kind;    /* 0 global function, 1 fused group, 2 closure */
} GCluster;

typedef struct Graph {
    Module *m;
    Ctx *ctx;
    Vec(GNode) nodes;
    Vec(GEdge) edges;
    Vec(GCluster) clusters;
    uint32_t *node_of; /* expr id -> node + 1 (0: none) */
    Expr **alias;      /* expr id -> the expression whose value it is (vars, lets, fused calls) */
    uint32_t n_ids;
    Vec(uint32_t) stack; /* clusters being walked */
    uint32_t *entry_of;  /* FuncDef index -> its entry node */
    bool top_level;      /* the next Function pre-visited is a global's */
    uint32_t top_cluster;
} Graph;

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = sup_malloc(n + 1);
    memcpy(d, s, n + 1);
    return d;
}

static uint32_t add_node(Graph *g, char *label_take, NodeShape shape) {
    GNode n = {label_take, (uint8_t)shape, g->stack.len ? vec_last(&g->stack) : 0};
    vec_push(&g->nodes, n);
    return (uint32_t)g->nodes.len - 1;
}

static void add_edge(Graph *g, Expr *src, uint32_t to, const char *label) {
    GEdge e = {src, 0, to, label ? dup_str(label) : NULL, 0};
    vec_push(&g->edges, e);
}

static void set_node(Graph *g, Expr *e, uint32_t n) {
    if (e->id < g->n_ids) g->node_of[e->id] = n + 1;
}

static void set_alias(Graph *g, Expr *e, Expr *to) {
    if (e->id < g->n_ids) g->alias[e->id] = to;
}

static char *str_of(StrBuf *sb) { return sb_take(sb); }

/* prefix and name: "@main", "call @f", "%x" */
static char *cat2(const char *prefix, const char *name) {
    StrBuf sb = {0};
    sb_puts(&sb, prefix);
    sb_puts(&sb, name);
    return str_of(&sb);
}

/* The short text of a type: float32[2, 3] for tensors (? for an unknown dim), fn for functions,
 * the printer's text (cut at 60 bytes) otherwise. */
static void type_text(Ctx *ctx, Type *t, StrBuf *out) {
    if (t == NULL) return;
    if (t->kind == TYPE_TENSOR) {
        TensorType *tt = AS_TENSOR_TYPE(t);
        sb_printf(out, "%s[", sup_dtype_name(tt->dtype));
        for (uint32_t d = 0; d < tt->ndim; d++) {
            if (d) sb_puts(out, ", ");
            if (tt->shape[d] < 0)
                sb_putc(out, '?');
            else
                sb_printf(out, "%lld", (long long)tt->shape[d]);
        }
        sb_putc(out, ']');
        return;
    }
    if (t->kind == TYPE_FUNC) { /* the callee's own cluster shows it */
        sb_puts(out, "fn");
        return;
    }
    ir_print_type_max(ctx, t, 60, out);
}

static bool is_primitive(const Function *fn) {
    const AttrValue *a = fn->attrs ? ir_attrs_get(fn->attrs, "Primitive") : NULL;
    return a != NULL;
}

/* The VM's name of a fused group: fused_ and its operators in dataflow order. */
typedef struct NameState {
    StrBuf *sb;
} NameState;
static void name_post(Visitor *v, Expr *e) {
    StrBuf *sb = ((NameState *)v->state)->sb;
    if (e->kind != EXPR_CALL || AS_CALL(e)->op->kind != EXPR_OP || sb->len >= 80) return;
    sb_putc(sb, '_');
    for (const char *s = AS_OP(AS_CALL(e)->op)->name; *s; s++)
        sb_putc(sb, *s == '.' ? '_' : *s);
}
static VisitResult name_pre(Visitor *v, Expr *e) {
    (void)v;
    return e->kind == EXPR_FUNCTION ? VISIT_SKIP : VISIT_CONTINUE; /* not nested functions */
}
static char *fused_name(Function *fn) {
    StrBuf sb = {0};
    sb_puts(&sb, "fused");
    NameState ns = {&sb};
    Visitor v = {.pre = name_pre, .post = name_post, .state = &ns};
    ir_visit(&v, fn->body);
    return str_of(&sb);
}

static void push_cluster(Graph *g, char *label_take, uint8_t kind) {
    GCluster c = {label_take, g->stack.len ? vec_last(&g->stack) : UINT32_MAX, kind};
    vec_push(&g->clusters, c);
    vec_push(&g->stack, (uint32_t)g->clusters.len - 1);
}

static VisitResult g_pre(Visitor *v, Expr *e) {
    Graph *g = v->state;
    if (e->kind != EXPR_FUNCTION) return VISIT_CONTINUE;
    Function *fn = AS_FUNCTION(e);
    if (g->top_level) { /* a global's function: its cluster is made already */
        g->top_level = false;
        vec_push(&g->stack, g->top_cluster);
    } else if (is_primitive(fn)) {
        push_cluster(g, fused_name(fn), 1);
    } else {
        push_cluster(g, dup_str("fn"), 2);
    }
    /* parameters: nodes, except a fused group's (its call's arguments stand for them) */
    if (!is_primitive(fn))
        for (uint32_t i = 0; i < fn->n_params; i++) {
            StrBuf sb = {0};
            sb_printf(&sb, "%%%s", fn->params[i]->name);
            set_node(g, &fn->params[i]->base, add_node(g, str_of(&sb), SH_PARAM));
        }
    return VISIT_CONTINUE;
}

/* A call's node label: the operator (with the most telling attributes left out: the node is a
 * picture, the text format has the rest), the constructor, @global or "call". */
static char *call_label(Call *c) {
    switch (c->op->kind) {
    case EXPR_OP: return dup_str(AS_OP(c->op)->name);
    case EXPR_CONSTRUCTOR: return dup_str(AS_CONSTRUCTOR(c->op)->name);
    case EXPR_GLOBAL_VAR: return cat2("call @", AS_GLOBAL_VAR(c->op)->name);
    default: return dup_str("call");
    }
}

static void g_post(Visitor *v, Expr *e) {
    Graph *g = v->state;
    uint32_t n;
    StrBuf sb = {0};
    switch (e->kind) {
    case EXPR_VAR: /* a parameter got its node in g_pre; other variables alias their value */
    case EXPR_OP:
    case EXPR_CONSTRUCTOR:
    case EXPR_GLOBAL_VAR: return; /* drawn where used (a callee), or lazily as a value */
    case EXPR_CONSTANT: {
        Constant *k = AS_CONSTANT(e);
        if (k->ndim == 0 && sup_dtype_is_float(k->dtype))
            sb_printf(&sb, "%.6g", k_loadf(k->data, k->dtype, 0));
        else if (k->ndim == 0)
            sb_printf(&sb, "%lld", (long long)k_loadi(k->data, k->dtype, 0));
        else {
            sb_puts(&sb, "const ");
            type_text(g->ctx, e->checked_type, &sb);
        }
        set_node(g, e, add_node(g, str_of(&sb), SH_CONST));
        return;
    }
    case EXPR_TUPLE: {
        Tuple *t = AS_TUPLE(e);
        n = add_node(g, dup_str("tuple"), SH_DATA);
        set_node(g, e, n);
        for (uint32_t i = 0; i < t->n; i++) {
            char lab[24];
            snprintf(lab, sizeof lab, "%u", i);
            add_edge(g, t->fields[i], n, t->n > 1 ? lab : NULL);
        }
        return;
    }
    case EXPR_TUPLE_GET_ITEM: {
        TupleGetItem *t = AS_TUPLE_GET_ITEM(e);
        sb_printf(&sb, ".%u", t->index);
        n = add_node(g, str_of(&sb), SH_DATA);
        set_node(g, e, n);
        add_edge(g, t->tuple, n, NULL);
        return;
    }
    case EXPR_LET: {
        Let *l = AS_LET(e);
        set_alias(g, &l->var->base, l->value);
        set_alias(g, e, l->body);
        /* name the value's node after the variable */
        uint32_t vn = l->value->id < g->n_ids ? g->node_of[l->value->id] : 0;
        if (vn != 0 && l->value->kind != EXPR_FUNCTION) {
            GNode *gn = &g->nodes.data[vn - 1];
            sb_printf(&sb, "%s\n%%%s", gn->label, l->var->name);
            free(gn->label);
            gn->label = str_of(&sb);
        }
        return;
    }
    case EXPR_FUNCTION: {
        Function *fn = AS_FUNCTION(e);
        uint32_t cl = vec_pop(&g->stack);
        if (g->stack.len == 0) { /* a global's: the return node */
            uint32_t saved = cl;
            vec_push(&g->stack, saved);
            n = add_node(g, dup_str("return"), SH_RET);
            g->stack.len--;
            add_edge(g, fn->body, n, NULL);
            return;
        }
        if (is_primitive(fn)) { /* its value is drawn through the call */
            set_alias(g, e, fn->body);
            return;
        }
        /* The closure's value: a node in its cluster, with no edge from the body, which would
         * close a cycle through a recursive call (dot cannot rank cycles through clusters). */
        vec_push(&g->stack, cl);
        n = add_node(g, dup_str("fn value"), SH_DATA);
        g->stack.len--;
        set_node(g, e, n);
        return;
    }
    case EXPR_CALL: {
        Call *c = AS_CALL(e);
        if (c->op->kind == EXPR_FUNCTION && is_primitive(AS_FUNCTION(c->op))) {
            Function *fn = AS_FUNCTION(c->op);
            for (uint32_t i = 0; i < fn->n_params && i < c->n_args; i++)
                set_alias(g, &fn->params[i]->base, c->args[i]);
            set_alias(g, e, fn->body);
            return;
        }
        bool op_call = c->op->kind == EXPR_OP || c->op->kind == EXPR_CONSTRUCTOR;
        n = add_node(g, call_label(c), op_call ? SH_OP : SH_CALL);
        set_node(g, e, n);
        if (c->op->kind == EXPR_GLOBAL_VAR) {
            FuncDef *d = ir_module_def_of(g->m, AS_GLOBAL_VAR(c->op));
            if (d != NULL) {
                GEdge ce = {NULL, n, g->entry_of[d - g->m->funcs.data], NULL, 1};
                vec_push(&g->edges, ce);
            }
        } else if (!op_call) {
            add_edge(g, c->op, n, "callee");
        }
        for (uint32_t i = 0; i < c->n_args; i++)
            add_edge(g, c->args[i], n, NULL);
        return;
    }
    case EXPR_IF: {
        If *f = AS_IF(e);
        n = add_node(g, dup_str("if"), SH_CTRL);
        set_node(g, e, n);
        add_edge(g, f->cond, n, "cond");
        add_edge(g, f->then_branch, n, "then");
        add_edge(g, f->else_branch, n, "else");
        return;
    }
    case EXPR_MATCH: {
        Match *mt = AS_MATCH(e);
        n = add_node(g, dup_str(mt->complete ? "match" : "match?"), SH_CTRL);
        set_node(g, e, n);
        add_edge(g, mt->data, n, "data");
        for (uint32_t i = 0; i < mt->n_clauses; i++) {
            Pattern *p = mt->clauses[i].lhs;
            const char *what = p->kind == PAT_CTOR    ? p->ctor->name
                               : p->kind == PAT_TUPLE ? "(...)"
                               : p->kind == PAT_VAR   ? p->var->name
                                                      : "_";
            add_edge(g, mt->clauses[i].rhs, n, what);
            PtrVec vars = {0};
            ir_pattern_vars(p, &vars);
            for (size_t k = 0; k < vars.len; k++)
                set_alias(g, &((Var *)vars.data[k])->base, mt->data);
            vec_free(&vars);
        }
        return;
    }
    case EXPR_REF_CREATE:
        n = add_node(g, dup_str("ref"), SH_DATA);
        set_node(g, e, n);
        add_edge(g, AS_REF_CREATE(e)->value, n, NULL);
        return;
    case EXPR_REF_READ:
        n = add_node(g, dup_str("ref read"), SH_DATA);
        set_node(g, e, n);
        add_edge(g, AS_REF_READ(e)->ref, n, NULL);
        return;
    case EXPR_REF_WRITE:
        n = add_node(g, dup_str("ref write"), SH_DATA);
        set_node(g, e, n);
        add_edge(g, AS_REF_WRITE(e)->ref, n, "ref");
        add_edge(g, AS_REF_WRITE(e)->value, n, NULL);
        return;
    default: return;
    }
}

/* The node standing for the value of e: follow aliases (variables to their values, lets to
 * their bodies, fused calls to their results); a value drawn nowhere (a global, an operator or a
 * constructor used as a value, a free variable) gets a node of its own, in cluster `cl`. */
static uint32_t resolve(Graph *g, Expr *e, uint32_t cl) {
    for (uint32_t guard = 0; e->id < g->n_ids && guard < g->n_ids; guard++) {
        if (g->node_of[e->id]) return g->node_of[e->id] - 1;
        if (g->alias[e->id] == NULL) break;
        e = g->alias[e->id];
    }
    char *label;
    switch (e->kind) {
    case EXPR_GLOBAL_VAR: label = cat2("@", AS_GLOBAL_VAR(e)->name); break;
    case EXPR_OP: label = dup_str(AS_OP(e)->name); break;
    case EXPR_CONSTRUCTOR: label = dup_str(AS_CONSTRUCTOR(e)->name); break;
    case EXPR_VAR: label = cat2("%", AS_VAR(e)->name); break;
    default: label = dup_str("?"); break;
    }
    GNode n = {label, SH_DATA, cl};
    vec_push(&g->nodes, n);
    uint32_t id = (uint32_t)g->nodes.len - 1;
    set_node(g, e, id);
    if (e->kind == EXPR_GLOBAL_VAR) {
        FuncDef *d = ir_module_def_of(g->m, AS_GLOBAL_VAR(e));
        if (d != NULL) {
            GEdge ce = {NULL, id, g->entry_of[d - g->m->funcs.data], NULL, 1};
            vec_push(&g->edges, ce);
        }
    }
    return id;
}

static void graph_free(Graph *g) {
    for (size_t i = 0; i < g->nodes.len; i++)
        free(g->nodes.data[i].label);
    for (size_t i = 0; i < g->edges.len; i++)
        free(g->edges.data[i].label);
    for (size_t i = 0; i < g->clusters.len; i++)
        free(g->clusters.data[i].label);
    vec_free(&g->nodes);
    vec_free(&g->edges);
    vec_free(&g->clusters);
    vec_free(&g->stack);
    free(g->node_of);
    free(g->alias);
    free(g->entry_of);
}

static void graph_build(Graph *g, Module *m) {
    g->m = m;
    g->ctx = m->ctx;
    g->n_ids = m->ctx->next_id;
    g->node_of = sup_calloc(g->n_ids + 1, sizeof *g->node_of);
    g->alias = sup_calloc(g->n_ids + 1, sizeof *g->alias);
    g->entry_of = sup_calloc(m->funcs.len + 1, sizeof *g->entry_of);
    Visitor v = {.pre = g_pre, .post = g_post, .state = g};
    if (m->is_expr) {
        push_cluster(g, dup_str("expression"), 0);
        uint32_t cl = vec_last(&g->stack);
        ir_visit(&v, m->expr);
        uint32_t r = add_node(g, dup_str("result"), SH_RET);
        add_edge(g, m->expr, r, NULL);
        (void)cl;
        g->stack.len = 0;
    }
    for (size_t i = 0; i < m->funcs.len;
         i++) { /* clusters and entries first: calls point at them */
        FuncDef *d = &m->funcs.data[i];
        if (d->func == NULL) continue;
        push_cluster(g, cat2("@", d->gvar->name), 0);
        g->entry_of[i] = add_node(g, cat2("@", d->gvar->name), SH_ENTRY);
        g->stack.len = 0;
    }
    for (size_t i = 0, k = 0; i < m->funcs.len; i++) {
        FuncDef *d = &m->funcs.data[i];
        if (d->func == NULL) continue;
        g->top_cluster = g->nodes.data[g->entry_of[i]].cluster;
        g->top_level = true;
        ir_visit(&v, &d->func->base);
        g->stack.len = 0;
        k++;
    }
    /* resolve the edges' sources; an edge into a node gets the type of the value it carries */
    for (size_t i = 0; i < g->edges.len; i++) {
        GEdge *e = &g->edges.data[i];
        if (e->src == NULL) continue;
        e->from = resolve(g, e->src, g->nodes.data[e->to].cluster);
        StrBuf sb = {0};
        if (e->label) sb_printf(&sb, "%s: ", e->label);
        type_text(g->ctx, e->src->checked_type, &sb);
        if (sb.len >= 2 && sb.data[sb.len - 2] == ':') sb.len -= 2; /* no type: the bare label */
        free(e->label);
        e->label = sb.len ? str_of(&sb) : NULL;
        sb_free(&sb);
    }
}

/* ---- DOT ------------------------------------------------------------------------------------ */

static void dot_str(StrBuf *sb, const char *s) {
    sb_putc(sb, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            sb_printf(sb, "\\%c", *s);
        else if (*s == '\n')
            sb_puts(sb, "\\n");
        else
            sb_putc(sb, *s);
    }
    sb_putc(sb, '"');
}

static const char *dot_shape(uint8_t s) {
    switch (s) {
    case SH_OP: return "shape=box, style=\"rounded,filled\", fillcolor=\"#dbe8fb\"";
    case SH_CONST: return "shape=box, style=filled, fillcolor=\"#eeeeee\", fontsize=8";
    case SH_PARAM: return "shape=ellipse, style=filled, fillcolor=\"#d9f2d9\"";
    case SH_CTRL: return "shape=diamond, style=filled, fillcolor=\"#fde9c9\"";
    case SH_CALL: return "shape=box, style=\"filled,bold\", fillcolor=\"#f6d5e5\"";
    case SH_ENTRY: return "shape=invhouse, style=filled, fillcolor=\"#c9e2f5\"";
    case SH_RET: return "shape=house, style=filled, fillcolor=\"#c9e2f5\"";
    default: return "shape=box, style=filled, fillcolor=\"#ffffff\"";
    }
}

static void graph_dot(const Graph *g, StrBuf *out) {
    sb_puts(out, "digraph rly {\n"
                 "  graph [fontname=\"Helvetica\", fontsize=10, compound=true];\n"
                 "  node [fontname=\"Helvetica\", fontsize=10];\n"
                 "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n");
    uint32_t nc = (uint32_t)g->clusters.len;
    /* nodes by cluster, clusters by parent (counting sorts: output order = creation order) */
    uint32_t *nstart = sup_calloc(nc + 2, sizeof *nstart),
             *nlist = sup_malloc(sizeof(uint32_t) * (g->nodes.len + 1));
    uint32_t *cstart = sup_calloc(nc + 2, sizeof *cstart),
             *clist = sup_malloc(sizeof(uint32_t) * (nc + 1));
    for (size_t i = 0; i < g->nodes.len; i++)
        nstart[g->nodes.data[i].cluster + 1]++;
    for (uint32_t c = 0; c < nc; c++)
        nstart[c + 1] += nstart[c];
    for (size_t i = 0; i < g->nodes.len; i++)
        nlist[nstart[g->nodes.data[i].cluster]++] = (uint32_t)i;
    for (uint32_t c = nc; c > 0; c--)
        nstart[c] = nstart[c - 1];
    nstart[0] = 0;
    for (uint32_t c = 0; c < nc; c++)
        if (g->clusters.data[c].parent != UINT32_MAX) cstart[g->clusters.data[c].parent + 1]++;
    for (uint32_t c = 0; c < nc; c++)
        cstart[c + 1] += cstart[c];
    uint32_t *cfill = sup_calloc(nc + 1, sizeof *cfill);
    for (uint32_t c = 0; c < nc; c++) {
        uint32_t p = g->clusters.data[c].parent;
        if (p != UINT32_MAX) clist[cstart[p] + cfill[p]++] = c;
    }
    /* print: an explicit stack of (cluster, next child) */
    Vec(uint32_t) st = {0}, nx = {0};
    for (uint32_t top = 0; top < nc; top++) {
        if (g->clusters.data[top].parent != UINT32_MAX) continue;
        vec_push(&st, top);
        vec_push(&nx, 0u);
        while (st.len) {
            uint32_t c = vec_last(&st), *k = &vec_last(&nx);
            int depth = (int)st.len;
            if (*k == 0) { /* first visit (a parent is revisited with *k > 0) */
                const GCluster *gc = &g->clusters.data[c];
                sb_indent(out, 2 * depth);
                sb_printf(out, "subgraph cluster_%u {\n", c);
                sb_indent(out, 2 * depth + 2);
                sb_puts(out, "label=");
                dot_str(out, gc->label);
                sb_printf(out, "; style=\"rounded,filled\"; fillcolor=\"%s\"; color=\"%s\";\n",
                          gc->kind == 1   ? "#fff7e0"
                          : gc->kind == 2 ? "#f3eefa"
                                          : "#f7f9fc",
                          gc->kind == 1 ? "#e0b050" : "#9aa8b8");
                for (uint32_t i = nstart[c]; i < nstart[c + 1]; i++) {
                    const GNode *n = &g->nodes.data[nlist[i]];
                    sb_indent(out, 2 * depth + 2);
                    sb_printf(out, "n%u [label=", nlist[i]);
                    dot_str(out, n->label);
                    sb_printf(out, ", %s];\n", dot_shape(n->shape));
                }
            }
            uint32_t n_kids = cstart[c + 1] - cstart[c];
            if (*k < n_kids) {
                uint32_t child = clist[cstart[c] + (*k)++];
                vec_push(&st, child);
                vec_push(&nx, 0u);
                continue;
            }
            sb_indent(out, 2 * depth);
            sb_puts(out, "}\n");
            st.len--;
            nx.len--;
        }
    }
    for (size_t i = 0; i < g->edges.len; i++) {
        const GEdge *e = &g->edges.data[i];
        sb_printf(out, "  n%u -> n%u", e->from, e->to);
        if (e->style == 1) {
            sb_puts(out, " [style=dashed, color=\"#b03060\", constraint=false]");
        } else if (e->label) {
            /* xlabel: placed after layout; a label would be a virtual node in the ranking,
             * which makes dot 2.43 fail ("trouble in init_rank") on clustered graphs */
            sb_puts(out, " [xlabel=");
            dot_str(out, e->label);
            sb_putc(out, ']');
        }
        sb_puts(out, ";\n");
    }
    sb_puts(out, "}\n");
    vec_free(&st);
    vec_free(&nx);
    free(nstart);
    free(nlist);
    free(cstart);
    free(clist);
    free(cfill);
}

/* ---- HTML: a layered layout here, inline SVG, pan and zoom -------------------------------- */

static void html_esc(StrBuf *sb, const char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++) {
        switch (s[i]) {
        case '&': sb_puts(sb, "&amp;"); break;
        case '<': sb_puts(sb, "&lt;"); break;
        case '>': sb_puts(sb, "&gt;"); break;
        case '"': sb_puts(sb, "&quot;"); break;
        default: sb_putc(sb, s[i]);
        }
    }
}

typedef struct Box {
    double x, y, w, h;
} Box;

enum { ROW = 80, GAP = 24, BLOCK_GAP = 60, PAD = 12 };

static void node_size(const char *label, double *w, double *h) {
    size_t lines = 1, longest = 0, cur = 0;
    for (const char *s = label; *s; s++) {
        if (*s == '\n') {
            lines++;
            cur = 0;
        } else if (++cur > longest) {
            longest = cur;
        }
    }
    *w = 16 + 6.4 * (double)longest;
    if (*w < 40) *w = 40;
    *h = 12 + 13 * (double)lines;
}

static void graph_layout(const Graph *g, Box *bx, Box *cb, double *width, double *height) {
    size_t nn = g->nodes.len, ne = g->edges.len, nc = g->clusters.len;
    uint32_t *layer = sup_calloc(nn + 1, sizeof *layer);
    /* incoming dataflow edges by target (CSR) */
    uint32_t *in_start = sup_calloc(nn + 2, sizeof *in_start),
             *in_src = sup_malloc(sizeof(uint32_t) * (ne + 1));
    for (size_t i = 0; i < ne; i++)
        if (g->edges.data[i].style == 0) in_start[g->edges.data[i].to + 1]++;
    for (size_t i = 0; i < nn; i++)
        in_start[i + 1] += in_start[i];
    uint32_t *fill = sup_calloc(nn + 1, sizeof *fill);
    for (size_t i = 0; i < ne; i++) {
        const GEdge *e = &g->edges.data[i];
        if (e->style == 0) in_src[in_start[e->to] + fill[e->to]++] = e->from;
    }
    free(fill);
    /* longest path over edges that follow creation order */
    for (size_t v = 0; v < nn; v++)
        for (uint32_t k = in_start[v]; k < in_start[v + 1]; k++) {
            uint32_t u = in_src[k];
            if (u < v && layer[u] + 1 > layer[v]) layer[v] = layer[u] + 1;
        }
    /* nodes without inputs other than parameters and entries (constants, values drawn nowhere
     * else) sit just above their first use, not in the top row */
    uint32_t *lowest = sup_malloc(sizeof(uint32_t) * (nn + 1));
    for (size_t v = 0; v < nn; v++)
        lowest[v] = UINT32_MAX;
    for (size_t i = 0; i < ne; i++) {
        const GEdge *e = &g->edges.data[i];
        if (e->style == 0 && layer[e->to] < lowest[e->from]) lowest[e->from] = layer[e->to];
    }
    for (size_t v = 0; v < nn; v++) {
        uint8_t sh = g->nodes.data[v].shape;
        if (in_start[v] == in_start[v + 1] && sh != SH_PARAM && sh != SH_ENTRY &&
            lowest[v] != UINT32_MAX && lowest[v] > 0)
            layer[v] = lowest[v] - 1;
    }
    free(lowest);
    /* each global function (top-level cluster) is a block of its own, left to right */
    uint32_t *top = sup_malloc(sizeof(uint32_t) * (nc + 1));
    for (size_t c = 0; c < nc; c++) {
        uint32_t p = g->clusters.data[c].parent;
        top[c] = p == UINT32_MAX ? (uint32_t)c : top[p]; /* parents come first */
    }
    uint32_t max_layer = 0;
    for (size_t v = 0; v < nn; v++)
        if (layer[v] > max_layer) max_layer = layer[v];
    double *cursor = sup_malloc(sizeof(double) * (max_layer + 1));
    double x0 = PAD, right = PAD;
    /* nodes by block: a counting sort keeps creation order */
    uint32_t *bstart = sup_calloc(nc + 2, sizeof *bstart),
             *blist = sup_malloc(sizeof(uint32_t) * (nn + 1));
    for (size_t v = 0; v < nn; v++)
        bstart[top[g->nodes.data[v].cluster] + 1]++;
    for (size_t c = 0; c < nc; c++)
        bstart[c + 1] += bstart[c];
    uint32_t *bfill = sup_calloc(nc + 1, sizeof *bfill);
    for (size_t v = 0; v < nn; v++) {
        uint32_t b = top[g->nodes.data[v].cluster];
        blist[bstart[b] + bfill[b]++] = (uint32_t)v;
    }
    free(bfill);
    for (size_t b = 0; b < nc; b++) {
        if (bstart[b] == bstart[b + 1]) continue;
        for (uint32_t l = 0; l <= max_layer; l++)
            cursor[l] = x0 + PAD;
        for (uint32_t k = bstart[b]; k < bstart[b + 1]; k++) {
            uint32_t v = blist[k];
            Box *x = &bx[v];
            node_size(g->nodes.data[v].label, &x->w, &x->h);
            /* under its inputs (the mean of their centres) when there is room */
            double sum = 0;
            uint32_t cnt = 0;
            for (uint32_t j = in_start[v]; j < in_start[v + 1]; j++)
                if (in_src[j] < v && top[g->nodes.data[in_src[j]].cluster] == b) {
                    sum += bx[in_src[j]].x + bx[in_src[j]].w / 2;
                    cnt++;
                }
            double want = cnt ? sum / cnt - x->w / 2 : cursor[layer[v]];
            x->x = want > cursor[layer[v]] ? want : cursor[layer[v]];
            x->y = PAD + 24 + (double)layer[v] * ROW;
            cursor[layer[v]] = x->x + x->w + GAP;
            if (cursor[layer[v]] > right) right = cursor[layer[v]];
        }
        x0 = right + BLOCK_GAP;
    }
    /* cluster boxes: their nodes', then their children's, padded */
    for (size_t c = 0; c < nc; c++)
        cb[c] = (Box){1e300, 1e300, -1e300, -1e300}; /* x0, y0, x1, y1 while computing */
    for (size_t v = 0; v < nn; v++) {
        Box *c = &cb[g->nodes.data[v].cluster];
        const Box *x = &bx[v];
        if (x->x < c->x) c->x = x->x;
        if (x->y < c->y) c->y = x->y;
        if (x->x + x->w > c->w) c->w = x->x + x->w;
        if (x->y + x->h > c->h) c->h = x->y + x->h;
    }
    for (size_t c = nc; c-- > 0;) {
        Box *x = &cb[c];
        if (x->x > x->w) continue; /* empty */
        x->x -= PAD, x->y -= PAD + 14, x->w += PAD, x->h += PAD;
        uint32_t p = g->clusters.data[c].parent;
        if (p == UINT32_MAX) continue;
        Box *q = &cb[p];
        if (x->x < q->x) q->x = x->x;
        if (x->y < q->y) q->y = x->y;
        if (x->w > q->w) q->w = x->w;
        if (x->h > q->h) q->h = x->h;
    }
    double w = right, h = PAD + 24 + (double)(max_layer + 1) * ROW;
    for (size_t c = 0; c < nc; c++) {
        Box *x = &cb[c];
        if (x->x > x->w) {
            *x = (Box){0, 0, 0, 0};
            continue;
        }
        x->w -= x->x, x->h -= x->y; /* to width and height */
        if (x->x + x->w > w) w = x->x + x->w;
        if (x->y + x->h > h) h = x->y + x->h;
    }
    *width = w + PAD;
    *height = h + PAD;
    free(layer);
    free(in_start);
    free(in_src);
    free(top);
    free(cursor);
    free(bstart);
    free(blist);
}

static const char *html_head =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
static const char *html_style =
    "</title>\n<style>\n"
    "html, body { margin: 0; height: 100%; overflow: hidden; font-family: Helvetica, Arial, "
    "sans-serif; }\n"
    "#bar { position: fixed; top: 0; left: 0; right: 0; padding: 4px 8px; background: #f0f3f7; "
    "border-bottom: 1px solid #ccd; font-size: 12px; z-index: 1; }\n"
    "svg { width: 100%; height: 100%; cursor: grab; background: #fff; }\n"
    "svg.drag { cursor: grabbing; }\n"
    ".c0 { fill: #f7f9fc; stroke: #9aa8b8; } .c1 { fill: #fff7e0; stroke: #e0b050; }\n"
    ".c2 { fill: #f3eefa; stroke: #a090c0; } .cl { font-size: 11px; fill: #445; }\n"
    ".e { stroke: #667; stroke-width: 1; fill: none; } .ec { stroke: #b03060; stroke-dasharray: "
    "4 3; fill: none; }\n"
    ".el { font-size: 8px; fill: #556; } .nt { font-size: 10px; text-anchor: middle; }\n"
    ".s0 rect { fill: #dbe8fb; } .s1 rect { fill: #eeeeee; } .s2 rect { fill: #d9f2d9; }\n"
    ".s3 rect { fill: #fde9c9; } .s4 rect { fill: #f6d5e5; } .s5 rect { fill: #ffffff; }\n"
    ".s6 rect, .s7 rect { fill: #c9e2f5; } .n rect { stroke: #445; }\n"
    "</style>\n</head>\n<body>\n";
/* Pan (drag) and zoom (wheel, around the pointer) by changing the viewBox; 0 fits. */
static const char *html_script =
    "<script>\n"
    "(function () {\n"
    "  var svg = document.getElementById('graph');\n"
    "  var full = svg.viewBox.baseVal, vb = {x: full.x, y: full.y, w: full.width, h: "
    "full.height};\n"
    "  var home = {x: vb.x, y: vb.y, w: vb.w, h: vb.h};\n"
    "  function apply() { svg.setAttribute('viewBox', vb.x + ' ' + vb.y + ' ' + vb.w + ' ' + "
    "vb.h); }\n"
    "  function scale() { var r = svg.getBoundingClientRect(); return Math.max(vb.w / r.width, "
    "vb.h / r.height); }\n"
    "  svg.addEventListener('wheel', function (ev) {\n"
    "    ev.preventDefault();\n"
    "    var r = svg.getBoundingClientRect(), s = scale();\n"
    "    var px = vb.x + (ev.clientX - r.left) * s, py = vb.y + (ev.clientY - r.top) * s;\n"
    "    var f = ev.deltaY < 0 ? 0.8 : 1.25;\n"
    "    vb.x = px - (px - vb.x) * f; vb.y = py - (py - vb.y) * f; vb.w *= f; vb.h *= f;\n"
    "    apply();\n"
    "  }, {passive: false});\n"
    "  var drag = null;\n"
    "  svg.addEventListener('mousedown', function (ev) { drag = {x: ev.clientX, y: ev.clientY}; "
    "svg.classList.add('drag'); });\n"
    "  window.addEventListener('mouseup', function () { drag = null; "
    "svg.classList.remove('drag'); });\n"
    "  window.addEventListener('mousemove', function (ev) {\n"
    "    if (!drag) return;\n"
    "    var s = scale();\n"
    "    vb.x -= (ev.clientX - drag.x) * s; vb.y -= (ev.clientY - drag.y) * s;\n"
    "    drag = {x: ev.clientX, y: ev.clientY};\n"
    "    apply();\n"
    "  });\n"
    "  window.addEventListener('keydown', function (ev) {\n"
    "    if (ev.key === '0') { vb = {x: home.x, y: home.y, w: home.w, h: home.h}; apply(); }\n"
    "  });\n"
    "})();\n"
    "</script>\n";

static void graph_html(const Graph *g, const char *title, StrBuf *out) {
    size_t nn = g->nodes.len, nc = g->clusters.len;
    Box *bx = sup_calloc(nn + 1, sizeof *bx), *cb = sup_calloc(nc + 1, sizeof *cb);
    double W, H;
    graph_layout(g, bx, cb, &W, &H);
    sb_puts(out, html_head);
    html_esc(out, title, strlen(title));
    sb_puts(out, html_style);
    sb_printf(out,
              "<div id=\"bar\">rly viz: %zu nodes, %zu edges, %zu clusters. Drag to pan, wheel "
              "to zoom, 0 to fit; hover a node or an edge for its text.</div>\n",
              nn, g->edges.len, nc);
    sb_printf(out,
              "<svg id=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 -30 %.0f "
              "%.0f\">\n",
              W, H + 30);
    sb_puts(out, "<defs><marker id=\"arrow\" viewBox=\"0 0 8 8\" refX=\"8\" refY=\"4\" "
                 "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 "
                 "z\" fill=\"#667\"/></marker></defs>\n");
    for (size_t c = 0; c < nc; c++) {
        const Box *x = &cb[c];
        if (x->w <= 0) continue;
        const GCluster *gc = &g->clusters.data[c];
        sb_printf(out,
                  "<g class=\"cluster\"><rect class=\"c%u\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                  "height=\"%.1f\" rx=\"8\"/><text class=\"cl\" x=\"%.1f\" y=\"%.1f\">",
                  gc->kind, x->x, x->y, x->w, x->h, x->x + 6, x->y + 13);
        html_esc(out, gc->label, strlen(gc->label));
        sb_puts(out, "</text></g>\n");
    }
    for (size_t i = 0; i < g->edges.len; i++) {
        const GEdge *e = &g->edges.data[i];
        const Box *a = &bx[e->from], *b = &bx[e->to];
        double x1 = a->x + a->w / 2, y1 = a->y + a->h, x2 = b->x + b->w / 2, y2 = b->y;
        if (e->style == 1) {
            sb_printf(out,
                      "<path class=\"ec\" d=\"M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f\" "
                      "marker-end=\"url(#arrow)\"/>\n",
                      x1, a->y + a->h / 2, x1 + 80, a->y, x2 - 80, y2 - 20, x2, y2);
            continue;
        }
        sb_printf(out,
                  "<g><line class=\"e\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                  "marker-end=\"url(#arrow)\"/>",
                  x1, y1, x2, y2);
        if (e->label) {
            sb_puts(out, "<title>");
            html_esc(out, e->label, strlen(e->label));
            sb_printf(out, "</title><text class=\"el\" x=\"%.1f\" y=\"%.1f\">", (x1 + x2) / 2 + 3,
                      (y1 + y2) / 2);
            html_esc(out, e->label, strlen(e->label));
            sb_puts(out, "</text>");
        }
        sb_puts(out, "</g>\n");
    }
    for (size_t v = 0; v < nn; v++) {
        const GNode *n = &g->nodes.data[v];
        const Box *x = &bx[v];
        sb_printf(out, "<g class=\"n s%u\" id=\"n%zu\"><title>", n->shape, v);
        html_esc(out, n->label, strlen(n->label));
        sb_printf(out,
                  "</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" rx=\"%d\"/>"
                  "<text class=\"nt\" x=\"%.1f\" y=\"%.1f\">",
                  x->x, x->y, x->w, x->h, n->shape == SH_PARAM || n->shape == SH_CTRL ? 12 : 4,
                  x->x + x->w / 2, x->y + 17);
        const char *s = n->label;
        for (int line = 0;; line++) {
            const char *nl = strchr(s, '\n');
            size_t len = nl ? (size_t)(nl - s) : strlen(s);
            if (line == 0) {
                html_esc(out, s, len);
            } else {
                sb_printf(out, "<tspan x=\"%.1f\" dy=\"13\">", x->x + x->w / 2);
                html_esc(out, s, len);
                sb_puts(out, "</tspan>");
            }
            if (nl == NULL) break;
            s = nl + 1;
        }
        sb_puts(out, "</text></g>\n");
    }
    sb_puts(out, "</svg>\n");
    sb_puts(out, html_script);
    sb_puts(out, "</body>\n</html>\n");
    free(bx);
    free(cb);
}

/* ---- the API -------------------------------------------------------------------------------- */

RLY_API rly_status rly_module_draw(rly_module *mod, rly_draw_format format, const char *title,
                                   char **out) {
    if (mod == NULL || out == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_draw: NULL argument");
    *out = NULL;
    if (format != RLY_DRAW_DOT && format != RLY_DRAW_HTML)
        return api_fail(RLY_STATUS_INVALID, "rly_module_draw: format %d is none of rly_draw_format",
                        (int)format);
    rly_status st = RLY_STATUS_OK;
    RLY_TRY;
    if (!ir_well_formed(mod) || !(pass_module_typed(mod) || ty_infer_module(mod)))
        st = api_fail_diags(mod->ctx);
    RLY_END_TRY;
    if (st != RLY_STATUS_OK) return st;
    /* outside the protected region: the graph is malloc'ed */
    Graph g = {0};
    graph_build(&g, mod);
    StrBuf sb = {0};
    if (format == RLY_DRAW_DOT)
        graph_dot(&g, &sb);
    else
        graph_html(&g, title ? title : "rly graph", &sb);
    graph_free(&g);
    *out = sb_take(&sb);
    return RLY_STATUS_OK;
}
