/* eval.c - the reference interpreter: a machine with heap stacks over the checked IR.
 *
 * State: a task stack (what to do next), a value stack (results of finished tasks) and a slot
 * stack (the frames: one slot per variable bound in a function body, per memoized shared node
 * and per captured variable). A task is "evaluate e, now at step k"; finishing a task pops it
 * and pushes one value. Let bodies, if branches, match clauses and calls in tail position
 * replace their task instead of nesting, so a loop written as tail recursion runs in constant
 * space and non-tail recursion grows only the heap stacks.
 *
 * Per-node facts are computed lazily into side tables indexed by node id: a variable's frame
 * slot and owning function; a shared node's memo slot; a function's frame layout (FnInfo); an
 * operator call's decoded attributes and kernel (CallInfo); a constant's tensor value. */
#include "eval/eval.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kernels/kernel.h"
#include "ops/ops.h"
#include "runtime/print.h"
#include "runtime/probe.h"

/* Closure code kinds (RtClosure.code_kind). */
enum { CODE_FUNC, CODE_CTOR };

typedef struct FnInfo {
    Function *fn; /* NULL for a module's bare expression */
    Expr *body;
    uint32_t n_slots; /* locals + memo slots + captures */
    uint32_t n_caps;  /* captured variables, in slots [cap_base, cap_base + n_caps) */
    uint32_t cap_base;
    Var **caps;
} FnInfo;

typedef struct CallInfo {
    const OpDef *op;
    KernelFn fn;
    KAttr *attrs;
    uint32_t n_attrs;
} CallInfo;

typedef struct NodeInfo {
    FnInfo *owner; /* Var: the function binding it; other nodes: the function memoizing it */
    int32_t slot;  /* Var: its slot; other nodes: memo slot, or -1 */
    void *info;    /* Function: FnInfo; Call of an op: CallInfo; Constant: its Value */
} NodeInfo;

enum { TASK_EVAL, TASK_RETURN };
typedef struct Task {
    uint8_t kind;
    uint32_t step;
    Expr *e;    /* TASK_EVAL */
    FnInfo *fn; /* TASK_RETURN: the caller's frame */
    uint32_t base;
} Task;

struct Interp {
    Module *m;
    Ctx *ctx;
    Arena arena;
    NodeInfo *ni;
    size_t n_ni;
    Vec(Task) tasks;
    PtrVec vals;
    PtrVec slots;
    FnInfo *fn; /* the running frame */
    uint32_t base;
    Var *letrec; /* the let variable whose Function value is being closed over */
    RtHeap heap;
    bool failed;
    PtrVec immortals; /* constants' values, freed with the interpreter */
    /* kernel call scratch */
    Vec(const DLTensor *) k_in;
    Vec(uint32_t) k_start, k_len;
    Vec(uint8_t) k_tuple;
    PtrVec k_out;  /* DLTensor* per output */
    PtrVec k_outv; /* RtTensor* per output */
    char err[1024];
    /* limits (ev_set_limits) */
    RtLimits limits;
    RtMemAccount mem;     /* charged while a run is in progress */
    uint64_t depth;       /* TASK_RETURN tasks on the stack: non-tail calls active */
    uint64_t deadline_ns; /* CLOCK_MONOTONIC end of the run; 0: none */
    uint32_t tick;        /* steps since the last poll of time and memory */
    EvObserver *obs;      /* debugger hooks (ev_set_observer); NULL: none, the usual case */
    EvProbe probe;        /* --check-numerics, --profile (ev_set_probe, probe.c) */
};

/* ---- errors ------------------------------------------------------------------------------- */

static void fail(Interp *it, Span span, const char *fmt, ...) RLY_PRINTF(3, 4);
static void fail(Interp *it, Span span, const char *fmt, ...) {
    if (it->failed) return;
    it->failed = true;
    va_list ap;
    va_start(ap, fmt);
    diag_add(&it->ctx->diags, DIAG_ERROR, span, fmt, ap);
    va_end(ap);
}

/* A debugger's callback asked to stop the run. */
static void observer_stop(Interp *it) {
    Span sp = SPAN_NONE;
    for (size_t i = it->tasks.len; i-- > 0;)
        if (it->tasks.data[i].kind == TASK_EVAL) {
            sp = it->tasks.data[i].e->span;
            break;
        }
    fail(it, sp, "stopped by the debugger");
}

/* ---- limits ----------------------------------------------------------------------------------
 * The depth limit is checked on every non-tail call; time and memory are polled every
 * POLL_STEPS steps (a kernel call is one step, so a single long kernel is not interrupted; a
 * tensor allocation that would pass the memory limit fails at once in rt_tensor_new). */

enum { POLL_STEPS = 1024 };

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Where the program is: a note naming the running global (or a closure). */
static void note_where(Interp *it, Span span) {
    if (it->fn == NULL || it->fn->fn == NULL) return;
    for (size_t i = 0; i < it->m->funcs.len; i++)
        if (it->m->funcs.data[i].func == it->fn->fn) {
            diag_note(&it->ctx->diags, span, "while running @%s (call depth %llu)",
                      it->m->funcs.data[i].gvar->name, (unsigned long long)it->depth);
            return;
        }
    diag_note(&it->ctx->diags, span, "while running a local function (call depth %llu)",
              (unsigned long long)it->depth);
}

/* The span of the innermost expression being evaluated. */
static Span current_span(Interp *it) {
    for (size_t i = it->tasks.len; i-- > 0;)
        if (it->tasks.data[i].kind == TASK_EVAL) return it->tasks.data[i].e->span;
    return SPAN_NONE;
}

static uint64_t stack_bytes(const Interp *it) {
    return (uint64_t)it->tasks.cap * sizeof(Task) +
           (uint64_t)(it->vals.cap + it->slots.cap) * sizeof(void *);
}

static void poll_limits(Interp *it) {
    it->tick = 0;
    if (it->deadline_ns != 0 && now_ns() >= it->deadline_ns) {
        Span sp = current_span(it);
        fail(it, sp, "time limit of %g s exceeded (--timeout)", it->limits.timeout);
        note_where(it, sp);
        return;
    }
    uint64_t used = it->mem.live + stack_bytes(it);
    if (it->limits.max_memory != 0 && used > it->limits.max_memory) {
        Span sp = current_span(it);
        fail(it, sp, "memory limit of %llu bytes exceeded (--max-memory): %llu bytes in use",
             (unsigned long long)it->limits.max_memory, (unsigned long long)used);
        note_where(it, sp);
    }
}

/* ---- side tables ---------------------------------------------------------------------------- */

static NodeInfo *node(Interp *it, uint32_t id) {
    if (id >= it->n_ni) {
        size_t n = it->n_ni ? it->n_ni : 1024;
        while (n <= id)
            n *= 2;
        it->ni = sup_realloc(it->ni, n * sizeof *it->ni);
        for (size_t i = it->n_ni; i < n; i++)
            it->ni[i] = (NodeInfo){NULL, -1, NULL};
        it->n_ni = n;
    }
    return &it->ni[id];
}

/* Is e an atom that costs nothing to evaluate again (never memoized)? */
static bool cheap(const Expr *e) {
    return e->kind == EXPR_VAR || e->kind == EXPR_CONSTANT || e->kind == EXPR_OP ||
           e->kind == EXPR_GLOBAL_VAR || e->kind == EXPR_CONSTRUCTOR || e->kind == EXPR_LET ||
           e->kind == EXPR_IF || e->kind == EXPR_MATCH || e->kind == EXPR_FUNCTION;
}

typedef struct LayoutState {
    Interp *it;
    FnInfo *fi;
    Expr *root_fn;  /* the function being laid out (its own node is not skipped) */
    PtrMap parents; /* child -> number of parents seen (as uintptr_t); per function, so that
                       laying out many small closures costs their size, not the node count */
    PtrVec memo;
} LayoutState;

static void bind_slot(LayoutState *ls, Var *v) {
    NodeInfo *n = node(ls->it, v->base.id);
    n->owner = ls->fi;
    n->slot = (int32_t)ls->fi->n_slots++;
}

static void bind_pattern(LayoutState *ls, Pattern *p) {
    if (p->kind == PAT_VAR) bind_slot(ls, p->var);
    for (uint32_t i = 0; i < p->n; i++)
        bind_pattern(ls, p->pats[i]);
}

static VisitResult layout_pre(Visitor *v, Expr *e) {
    LayoutState *ls = v->state;
    if (e->kind == EXPR_FUNCTION && e != ls->root_fn) return VISIT_SKIP;
    uint32_t n = ir_expr_n_children(e);
    for (uint32_t i = 0; i < n; i++) {
        Expr *c = ir_expr_child(e, i);
        if (c == NULL || c->kind == EXPR_VAR) continue;
        uintptr_t k = (uintptr_t)ptrmap_get(&ls->parents, c) + 1;
        ptrmap_put(&ls->parents, c, (void *)k);
        if (k == 2 && !cheap(c)) vec_push(&ls->memo, c);
    }
    switch (e->kind) {
    case EXPR_LET: bind_slot(ls, AS_LET(e)->var); break;
    case EXPR_MATCH: {
        Match *m = AS_MATCH(e);
        for (uint32_t i = 0; i < m->n_clauses; i++)
            bind_pattern(ls, m->clauses[i].lhs);
        break;
    }
    default: break;
    }
    return VISIT_CONTINUE;
}

/* The frame layout of a function (or of the module's bare expression when fn is NULL). */
static FnInfo *fn_info(Interp *it, Function *fn, Expr *body) {
    NodeInfo *n = fn ? node(it, fn->base.id) : NULL;
    if (n && n->info) return n->info;
    FnInfo *fi = arena_alloc(&it->arena, sizeof *fi);
    fi->fn = fn;
    fi->body = body;
    LayoutState ls = {.it = it, .fi = fi, .root_fn = fn ? &fn->base : NULL};
    if (fn)
        for (uint32_t i = 0; i < fn->n_params; i++)
            bind_slot(&ls, fn->params[i]);
    Visitor v = {.pre = layout_pre, .state = &ls};
    ir_visit(&v, fn ? &fn->base : body);
    for (size_t i = 0; i < ls.memo.len; i++) {
        NodeInfo *mn = node(it, ((Expr *)ls.memo.data[i])->id);
        if (mn->owner != NULL) continue; /* memoized by another function already */
        mn->owner = fi;
        mn->slot = (int32_t)fi->n_slots++;
    }
    ptrmap_free(&ls.parents);
    vec_free(&ls.memo);
    /* Captures: the free variables of a function. */
    PtrVec fv = {0};
    if (fn) ir_free_vars(&fn->base, &fv);
    fi->cap_base = fi->n_slots;
    fi->n_caps = (uint32_t)fv.len;
    fi->caps = arena_array(&it->arena, fv.len ? fv.len : 1, sizeof(Var *));
    for (size_t i = 0; i < fv.len; i++)
        fi->caps[i] = fv.data[i];
    fi->n_slots += fi->n_caps;
    vec_free(&fv);
    if (n) {
        n = node(it, fn->base.id); /* node() may have moved the table */
        n->info = fi;
    }
    return fi;
}

/* ---- values ------------------------------------------------------------------------------------
 */

static Value *const_value(Interp *it, Constant *c) {
    NodeInfo *n = node(it, c->base.id);
    if (n->info) return n->info;
    RtTensor *t = rt_tensor_borrow(c->dtype, c->ndim, c->shape, c->data, c->nbytes);
    vec_push(&it->immortals, t);
    node(it, c->base.id)->info = t;
    return &t->hdr;
}

static bool scalar_true(const Value *v) {
    const RtTensor *t = RT_TENSOR(v);
    return k_loadi(rt_tensor_data(t), rt_tensor_dtype(t), 0) != 0;
}

/* ---- the stacks
 * ---------------------------------------------------------------------------------- */

static void push_eval(Interp *it, Expr *e) {
    Task t = {.kind = TASK_EVAL, .step = 0, .e = e};
    vec_push(&it->tasks, t);
}

static inline Value **slot(Interp *it, uint32_t i) {
    return (Value **)&it->slots.data[it->base + i];
}

static void set_slot(Interp *it, uint32_t i, Value *v_take) {
    Value **s = slot(it, i);
    rt_release(*s);
    *s = v_take;
}

/* The slot of variable v in the running frame, or NULL. */
static Value **var_slot(Interp *it, Var *v) {
    NodeInfo *n = node(it, v->base.id);
    if (n->owner == it->fn && n->slot >= 0) return slot(it, (uint32_t)n->slot);
    FnInfo *fi = it->fn;
    for (uint32_t i = 0; i < fi->n_caps; i++)
        if (fi->caps[i] == v) return slot(it, fi->cap_base + i);
    return NULL;
}

/* Finish the top task with value v (owned): memoize if e is shared, push it. */
static void finish(Interp *it, Expr *e, Value *v) {
    it->tasks.len--;
    NodeInfo *n = node(it, e->id);
    if (n->slot >= 0 && n->owner == it->fn && e->kind != EXPR_VAR)
        set_slot(it, (uint32_t)n->slot, rt_retain(v));
    vec_push(&it->vals, v);
}

/* Enter function fi with argument values args[0..n) (owned, taken) and closure env. Replaces
 * the top task (the call); in tail position the caller's frame is dropped first. */
static void enter(Interp *it, FnInfo *fi, Value **args, uint32_t n, RtClosure *clo, Expr *call) {
    NodeInfo *cn = node(it, call->id);
    bool memo = cn->slot >= 0 && cn->owner == it->fn;
    it->tasks.len--; /* the call task */
    bool tail = !memo && it->tasks.len > 0 && vec_last(&it->tasks).kind == TASK_RETURN;
    if (!tail && it->limits.max_depth != 0 && it->depth >= it->limits.max_depth) {
        fail(it, call->span, "call depth limit of %llu exceeded (--max-depth)",
             (unsigned long long)it->limits.max_depth);
        note_where(it, call->span);
        for (uint32_t i = 0; i < n; i++)
            rt_release(args[i]);
        return;
    }
    /* Captured values first (they are read from the closure, not the frame). */
    if (tail) {
        for (size_t i = it->base; i < it->slots.len; i++)
            rt_release(it->slots.data[i]);
        it->slots.len = it->base;
    } else {
        if (memo) { /* come back to store the memo */
            Task t = {.kind = TASK_EVAL, .step = UINT32_MAX, .e = call};
            vec_push(&it->tasks, t);
        }
        Task r = {.kind = TASK_RETURN, .fn = it->fn, .base = it->base, .e = call};
        vec_push(&it->tasks, r);
        it->depth++;
        it->base = (uint32_t)it->slots.len;
    }
    it->fn = fi;
    vec_reserve(&it->slots, it->slots.len + fi->n_slots);
    for (uint32_t i = 0; i < fi->n_slots; i++)
        it->slots.data[it->slots.len++] = NULL;
    for (uint32_t i = 0; i < n; i++)
        *slot(it, (uint32_t)node(it, fi->fn->params[i]->base.id)->slot) = args[i];
    if (clo) {
        for (uint32_t i = 0; i < fi->n_caps; i++)
            *slot(it, fi->cap_base + i) = rt_retain(clo->env[i] ? clo->env[i] : &clo->hdr);
    }
    push_eval(it, fi->body);
    if (it->obs && !it->obs->on_enter(it->obs, it, fi->fn, call, tail)) observer_stop(it);
}

/* ---- operator calls ---------------------------------------------------------------------------
 */

/* The kernel and the lowered attributes of an operator call, made on its first run. */
static CallInfo *call_info(Interp *it, Call *c, const OpDef *op) {
    NodeInfo *n = node(it, c->base.id);
    if (n->info) return n->info;
    StrBuf msg = {0};
    Span where;
    KAttr *attrs = op_lower_attrs(op, c->attrs, &it->arena, &msg, &where);
    if (attrs == NULL) {
        fail(it, where.file ? where : c->base.span, "%s: %s", op->name, sb_cstr(&msg));
        sb_free(&msg);
        return NULL;
    }
    sb_free(&msg);
    CallInfo *ci = arena_alloc(&it->arena, sizeof *ci);
    ci->op = op;
    ci->fn = op->user_kernel ? NULL : kern_ref_lookup(op->id);
    ci->attrs = attrs;
    ci->n_attrs = op->n_attrs;
    node(it, c->base.id)->info = ci;
    return ci;
}

static int alloc_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    Interp *it = kc->rt;
    RtTensor *t = rt_tensor_new(dt, ndim, shape, kc->err, kc->err_cap);
    if (t == NULL) return -1;
    it->k_outv.data[i] = t;
    kc->out[i] = &t->t;
    return 0;
}

/* Does the kernel's result agree with the inferred type (where the type is static)? */
static bool agrees(const RtTensor *t, Type *ty) {
    if (ty == NULL || ty->kind != TYPE_TENSOR) return true;
    TensorType *tt = AS_TENSOR_TYPE(ty);
    if (rt_tensor_dtype(t) != tt->dtype || (uint32_t)t->t.ndim != tt->ndim) return false;
    for (uint32_t d = 0; d < tt->ndim; d++)
        if (tt->shape[d] >= 0 && tt->shape[d] != t->shape[d]) return false;
    return true;
}

static void describe(const RtTensor *t, char *buf, size_t cap) {
    char s[256];
    snprintf(buf, cap, "Tensor[%s, %s]", k_shape_str(&t->t, s, sizeof s),
             sup_dtype_name(rt_tensor_dtype(t)));
}

static bool flatten_arg(Interp *it, Value *v, const OpDef *op, uint32_t a, Span span) {
    vec_push(&it->k_start, (uint32_t)it->k_in.len);
    if (v->kind == VAL_TENSOR) {
        vec_push(&it->k_in, &RT_TENSOR(v)->t);
        vec_push(&it->k_len, 1u);
        vec_push(&it->k_tuple, (uint8_t)0);
        return true;
    }
    if (v->kind == VAL_TUPLE) {
        RtTuple *tu = RT_TUPLE(v);
        for (uint32_t j = 0; j < tu->n; j++) {
            if (tu->f[j]->kind != VAL_TENSOR) {
                fail(it, span, "%s: argument %u field %u is not a tensor", op->name, a, j);
                return false;
            }
            vec_push(&it->k_in, &RT_TENSOR(tu->f[j])->t);
        }
        vec_push(&it->k_len, tu->n);
        vec_push(&it->k_tuple, (uint8_t)1);
        return true;
    }
    fail(it, span, "%s: argument %u is not a tensor or a tuple of tensors", op->name, a);
    return false;
}

/* Run operator op on args (owned; released here). Returns the result or NULL (failed). */
static Value *call_op(Interp *it, Call *c, const OpDef *op, Value **args, uint32_t n) {
    Value *result = NULL;
    CallInfo *ci = call_info(it, c, op);
    it->k_in.len = it->k_start.len = it->k_len.len = it->k_tuple.len = 0;
    Type *ty = c->base.checked_type;
    uint32_t n_out = 1;
    bool out_tuple = ty != NULL && ty->kind == TYPE_TUPLE;
    if (out_tuple) n_out = AS_TUPLE_TYPE(ty)->n;
    vec_reserve(&it->k_out, n_out);
    vec_reserve(&it->k_outv, n_out);
    for (uint32_t i = 0; i < n_out; i++)
        it->k_out.data[i] = it->k_outv.data[i] = NULL;
    if (ci == NULL) goto done;
    for (uint32_t a = 0; a < n; a++)
        if (!flatten_arg(it, args[a], op, a, c->base.span)) goto done;
    if (op->user_kernel != NULL) {
        /* A user kernel writes into a result allocated from the static type. */
        if (ty == NULL || ty->kind != TYPE_TENSOR) {
            fail(it, c->base.span, "%s: a user operator must return a tensor", op->name);
            goto done;
        }
        TensorType *tt = AS_TENSOR_TYPE(ty);
        for (uint32_t d = 0; d < tt->ndim; d++)
            if (tt->shape[d] < 0) {
                fail(it, c->base.span, "%s: a user operator needs a static result shape", op->name);
                goto done;
            }
        RtTensor *o = rt_tensor_new(tt->dtype, tt->ndim, tt->shape, it->err, sizeof it->err);
        if (o == NULL) {
            fail(it, c->base.span, "%s: %s", op->name, it->err);
            goto done;
        }
        DLTensor *targs = sup_malloc(sizeof(DLTensor) * (it->k_in.len ? it->k_in.len : 1));
        for (size_t i = 0; i < it->k_in.len; i++)
            targs[i] = *it->k_in.data[i];
        rly_kernel_fn kf = (rly_kernel_fn)(uintptr_t)op->user_kernel;
        int rc = kf(targs, (int)it->k_in.len, &o->t, op->user_data);
        free(targs);
        if (rc != 0) {
            rt_release(&o->hdr);
            fail(it, c->base.span, "%s: the user kernel failed (status %d)", op->name, rc);
            goto done;
        }
        result = &o->hdr;
        goto done;
    }
    if (ci->fn == NULL) {
        fail(it, c->base.span, "%s: no kernel implements this operator yet", op->name);
        goto done;
    }
    it->err[0] = '\0';
    KCall kc = {
        .op = op->name,
        .attrs = ci->attrs,
        .n_attrs = ci->n_attrs,
        .n_args = n,
        .arg_start = it->k_start.data,
        .arg_len = it->k_len.data,
        .arg_tuple = it->k_tuple.data,
        .in = it->k_in.data,
        .n_in = (uint32_t)it->k_in.len,
        .out = (DLTensor **)it->k_out.data,
        .n_out = n_out,
        .out_tuple = out_tuple,
        .alloc = alloc_out,
        .rt = it,
        .err = it->err,
        .err_cap = sizeof it->err,
    };
    int rc = k_call_result(&kc, ci->fn(&kc));
    k_call_release(&kc); /* no workspace lent: the kernel's scratch came from malloc */
    if (rc != 0) {
        fail(it, c->base.span, "%s: %s", op->name, it->err[0] ? it->err : "the kernel failed");
        goto free_outs;
    }
    for (uint32_t i = 0; i < n_out; i++) {
        RtTensor *o = it->k_outv.data[i];
        if (o == NULL) {
            fail(it, c->base.span, "%s: internal error: the kernel left result %u unset", op->name,
                 i);
            goto free_outs;
        }
        Type *fty = out_tuple ? AS_TUPLE_TYPE(ty)->fields[i] : ty;
        if (!agrees(o, fty)) {
            char a[300];
            StrBuf want = {0};
            ir_print_type(it->ctx, fty, &want);
            describe(o, a, sizeof a);
            fail(it, c->base.span, "%s: internal error: the kernel returned %s but the type is %s",
                 op->name, a, sb_cstr(&want));
            sb_free(&want);
            goto free_outs;
        }
    }
    if (out_tuple) {
        RtTuple *tu = rt_tuple_new(n_out);
        for (uint32_t i = 0; i < n_out; i++)
            tu->f[i] = it->k_outv.data[i];
        result = &tu->hdr;
    } else {
        result = it->k_outv.data[0];
    }
    goto done;
free_outs:
    for (uint32_t i = 0; i < n_out; i++)
        rt_release(it->k_outv.data[i]);
done:
    for (uint32_t a = 0; a < n; a++)
        rt_release(args[a]);
    return result;
}

/* call_op under a probe (ev_set_probe): the call timed, its result checked (probe.c). */
static Value *probe_call_op(Interp *it, Call *c, const OpDef *op, Value **args, uint32_t n) {
    for (uint32_t a = 0; a < n; a++)
        rt_retain(args[a]); /* call_op releases them; the probe reads them after */
    uint64_t t0 = rt_profile_now();
    Value *r = call_op(it, c, op, args, n);
    uint64_t t1 = rt_profile_now();
    if (r != NULL && !ev_probe_op(&it->probe, it->ctx, c, op->name, args, n, r, t0, t1)) {
        it->failed = true; /* ev_probe_op reported it */
        rt_release(r);
        r = NULL;
    }
    for (uint32_t a = 0; a < n; a++)
        rt_release(args[a]);
    return r;
}

/* ---- pattern matching ---------------------------------------------------------------------- */

static bool matches(const Pattern *p, const Value *v) {
    switch (p->kind) {
    case PAT_WILDCARD:
    case PAT_VAR: return true;
    case PAT_CTOR: {
        if (v->kind != VAL_ADT || RT_ADT(v)->tag != p->ctor->tag) return false;
        for (uint32_t i = 0; i < p->n; i++)
            if (!matches(p->pats[i], RT_ADT(v)->f[i])) return false;
        return true;
    }
    case PAT_TUPLE:
        for (uint32_t i = 0; i < p->n; i++)
            if (!matches(p->pats[i], RT_TUPLE(v)->f[i])) return false;
        return true;
    }
    return false;
}

static void bind(Interp *it, const Pattern *p, Value *v) {
    switch (p->kind) {
    case PAT_WILDCARD: return;
    case PAT_VAR: set_slot(it, (uint32_t)node(it, p->var->base.id)->slot, rt_retain(v)); return;
    case PAT_CTOR:
        for (uint32_t i = 0; i < p->n; i++)
            bind(it, p->pats[i], RT_ADT(v)->f[i]);
        return;
    case PAT_TUPLE:
        for (uint32_t i = 0; i < p->n; i++)
            bind(it, p->pats[i], RT_TUPLE(v)->f[i]);
        return;
    }
}

/* ---- the machine ------------------------------------------------------------------------------
 */

static Value *pop_val(Interp *it) { return vec_pop(&it->vals); }

/* Apply a function value to args (owned) for call task `call`. */
static void apply(Interp *it, Call *call, Value *f, Value **args, uint32_t n) {
    if (f->kind != VAL_CLOSURE) {
        fail(it, call->base.span, "the callee is not a function");
        rt_release(f);
        for (uint32_t i = 0; i < n; i++)
            rt_release(args[i]);
        return;
    }
    RtClosure *clo = RT_CLOSURE(f);
    if (clo->code_kind == CODE_CTOR) {
        Constructor *ct = (Constructor *)clo->code;
        RtAdt *a = rt_adt_new(ct->tag, ct, n);
        for (uint32_t i = 0; i < n; i++)
            a->f[i] = args[i];
        rt_release(f);
        finish(it, &call->base, &a->hdr);
        return;
    }
    Function *fn = (Function *)clo->code;
    FnInfo *fi = fn_info(it, fn, fn->body);
    if (fi->fn->n_params != n) {
        fail(it, call->base.span, "function of %u parameters called with %u arguments",
             fi->fn->n_params, n);
        rt_release(f);
        for (uint32_t i = 0; i < n; i++)
            rt_release(args[i]);
        return;
    }
    enter(it, fi, args, n, clo, &call->base);
    rt_release(f); /* the frame holds what it needs from the closure */
}

static Value *global_closure(Interp *it, GlobalVar *gv, Span span) {
    FuncDef *d = ir_module_def_of(it->m, gv);
    if (d == NULL || d->func == NULL) {
        fail(it, span, "@%s is declared but not defined", gv->name);
        return NULL;
    }
    NodeInfo *n = node(it, gv->base.id);
    if (n->info == NULL) {
        RtClosure *c = rt_closure_new(CODE_FUNC, d->func, 0);
        c->hdr.rc = RT_IMMORTAL;
        vec_push(&it->immortals, c);
        node(it, gv->base.id)->info = c;
        return &c->hdr;
    }
    return n->info;
}

static Value *ctor_value(Interp *it, Constructor *ct) {
    NodeInfo *n = node(it, ct->base.id);
    if (n->info) return n->info;
    Value *v;
    if (ct->n_inputs == 0)
        v = &rt_adt_new(ct->tag, ct, 0)->hdr;
    else
        v = &rt_closure_new(CODE_CTOR, ct, 0)->hdr;
    v->rc = RT_IMMORTAL;
    vec_push(&it->immortals, v);
    node(it, ct->base.id)->info = v;
    return v;
}

static void step_call(Interp *it, Task *t) {
    Call *c = AS_CALL(t->e);
    Expr *callee = c->op;
    bool direct = callee->kind == EXPR_OP || callee->kind == EXPR_CONSTRUCTOR ||
                  callee->kind == EXPR_GLOBAL_VAR;
    uint32_t first_arg = direct ? 0 : 1;
    if (t->step == UINT32_MAX) { /* returned from a memoized closure call */
        finish(it, t->e, pop_val(it));
        return;
    }
    if (t->step < first_arg + c->n_args) {
        uint32_t k = t->step++;
        push_eval(it, k < first_arg ? callee : c->args[k - first_arg]);
        return;
    }
    uint32_t n = c->n_args;
    Value *argv[16];
    Value **own = n <= 16 ? argv : sup_malloc(sizeof(Value *) * n);
    if (n > 0) memcpy(own, &it->vals.data[it->vals.len - n], sizeof(Value *) * n);
    it->vals.len -= n;
    if (callee->kind == EXPR_OP) {
        const OpDef *op = op_def_of(callee);
        if (op == NULL) {
            fail(it, c->base.span, "unknown operator %s", AS_OP(callee)->name);
            for (uint32_t i = 0; i < n; i++)
                rt_release(own[i]);
        } else {
            Value *r = it->probe.on ? probe_call_op(it, c, op, own, n) : call_op(it, c, op, own, n);
            if (r) finish(it, t->e, r);
        }
    } else if (callee->kind == EXPR_CONSTRUCTOR) {
        Constructor *ct = AS_CONSTRUCTOR(callee);
        RtAdt *a = rt_adt_new(ct->tag, ct, n);
        for (uint32_t i = 0; i < n; i++)
            a->f[i] = own[i];
        finish(it, t->e, &a->hdr);
    } else if (callee->kind == EXPR_GLOBAL_VAR) {
        Value *f = global_closure(it, AS_GLOBAL_VAR(callee), c->base.span);
        if (f)
            apply(it, c, f, own, n);
        else
            for (uint32_t i = 0; i < n; i++)
                rt_release(own[i]);
    } else {
        apply(it, c, pop_val(it), own, n);
    }
    if (own != argv) free(own);
}

static void step(Interp *it) {
    Task *t = &vec_last(&it->tasks);
    if (t->kind == TASK_RETURN) {
        Value *v = pop_val(it);
        for (size_t i = it->base; i < it->slots.len; i++)
            rt_release(it->slots.data[i]);
        it->slots.len = it->base;
        it->fn = t->fn;
        it->base = t->base;
        it->tasks.len--;
        it->depth--;
        vec_push(&it->vals, v);
        if (it->obs && !it->obs->on_return(it->obs, it, v)) observer_stop(it);
        return;
    }
    Expr *e = t->e;
    if (t->step == 0 && !cheap(e)) { /* a memoized shared node already computed? */
        NodeInfo *n = node(it, e->id);
        if (n->slot >= 0 && n->owner == it->fn && *slot(it, (uint32_t)n->slot) != NULL) {
            it->tasks.len--;
            vec_push(&it->vals, rt_retain(*slot(it, (uint32_t)n->slot)));
            return;
        }
    }
    if (it->obs && t->step == 0 && !it->obs->on_eval(it->obs, it, e)) {
        observer_stop(it);
        return;
    }
    switch (e->kind) {
    case EXPR_VAR: {
        Value **s = var_slot(it, AS_VAR(e));
        if (s == NULL || *s == NULL) {
            fail(it, e->span, "internal error: %%%s has no value here", AS_VAR(e)->name);
            return;
        }
        finish(it, e, rt_retain(*s));
        return;
    }
    case EXPR_CONSTANT: finish(it, e, const_value(it, AS_CONSTANT(e))); return;
    case EXPR_GLOBAL_VAR: {
        Value *v = global_closure(it, AS_GLOBAL_VAR(e), e->span);
        if (v) finish(it, e, v);
        return;
    }
    case EXPR_CONSTRUCTOR: finish(it, e, ctor_value(it, AS_CONSTRUCTOR(e))); return;
    case EXPR_OP:
        fail(it, e->span, "operator %s used as a value: call it instead", AS_OP(e)->name);
        return;
    case EXPR_TUPLE: {
        Tuple *tu = AS_TUPLE(e);
        if (t->step < tu->n) {
            push_eval(it, tu->fields[t->step++]);
            return;
        }
        RtTuple *v = rt_tuple_new(tu->n);
        if (tu->n > 0) memcpy(v->f, &it->vals.data[it->vals.len - tu->n], sizeof(Value *) * tu->n);
        it->vals.len -= tu->n;
        finish(it, e, &v->hdr);
        return;
    }
    case EXPR_TUPLE_GET_ITEM: {
        TupleGetItem *g = AS_TUPLE_GET_ITEM(e);
        if (t->step++ == 0) {
            push_eval(it, g->tuple);
            return;
        }
        Value *tv = pop_val(it);
        if (tv->kind != VAL_TUPLE || g->index >= RT_TUPLE(tv)->n) {
            rt_release(tv);
            fail(it, e->span, "internal error: tuple index %u out of range", g->index);
            return;
        }
        Value *f = rt_retain(RT_TUPLE(tv)->f[g->index]);
        rt_release(tv);
        finish(it, e, f);
        return;
    }
    case EXPR_LET: {
        Let *l = AS_LET(e);
        if (t->step++ == 0) {
            if (l->value->kind == EXPR_FUNCTION) it->letrec = l->var;
            push_eval(it, l->value);
            return;
        }
        set_slot(it, (uint32_t)node(it, l->var->base.id)->slot, pop_val(it));
        t->e = l->body; /* the body replaces the let (a chain of lets runs in constant space) */
        t->step = 0;
        return;
    }
    case EXPR_FUNCTION: {
        Function *fn = AS_FUNCTION(e);
        Var *self = it->letrec;
        it->letrec = NULL;
        FnInfo *fi = fn_info(it, fn, fn->body);
        RtClosure *c = rt_closure_new(CODE_FUNC, fn, fi->n_caps);
        for (uint32_t i = 0; i < fi->n_caps; i++) {
            if (fi->caps[i] == self) continue; /* NULL: the closure itself, bound on entry */
            Value **s = var_slot(it, fi->caps[i]);
            if (s == NULL || *s == NULL) {
                rt_release(&c->hdr);
                fail(it, e->span, "internal error: captured %%%s has no value", fi->caps[i]->name);
                return;
            }
            c->env[i] = rt_retain(*s);
        }
        finish(it, e, &c->hdr);
        return;
    }
    case EXPR_CALL: step_call(it, t); return;
    case EXPR_IF: {
        If *f = AS_IF(e);
        if (t->step++ == 0) {
            push_eval(it, f->cond);
            return;
        }
        Value *cv = pop_val(it);
        bool b = scalar_true(cv);
        rt_release(cv);
        t->e = b ? f->then_branch : f->else_branch;
        t->step = 0;
        return;
    }
    case EXPR_MATCH: {
        Match *m = AS_MATCH(e);
        if (t->step++ == 0) {
            push_eval(it, m->data);
            return;
        }
        Value *d = pop_val(it);
        for (uint32_t i = 0; i < m->n_clauses; i++) {
            if (!matches(m->clauses[i].lhs, d)) continue;
            bind(it, m->clauses[i].lhs, d);
            rt_release(d);
            t->e = m->clauses[i].rhs;
            t->step = 0;
            return;
        }
        rt_release(d);
        fail(it, e->span, "no clause of this match accepts the value");
        return;
    }
    case EXPR_REF_CREATE: {
        if (t->step++ == 0) {
            push_eval(it, AS_REF_CREATE(e)->value);
            return;
        }
        finish(it, e, &rt_ref_new(&it->heap, pop_val(it))->hdr);
        return;
    }
    case EXPR_REF_READ: {
        if (t->step++ == 0) {
            push_eval(it, AS_REF_READ(e)->ref);
            return;
        }
        Value *r = pop_val(it);
        Value *v = rt_retain(RT_REF(r)->v);
        rt_release(r);
        finish(it, e, v);
        return;
    }
    case EXPR_REF_WRITE: {
        RefWrite *w = AS_REF_WRITE(e);
        if (t->step == 0 || t->step == 1) {
            push_eval(it, t->step++ == 0 ? w->ref : w->value);
            return;
        }
        Value *v = pop_val(it), *r = pop_val(it);
        Value *old = RT_REF(r)->v;
        RT_REF(r)->v = v;
        rt_release(old);
        rt_release(r);
        finish(it, e, rt_unit());
        return;
    }
    default: fail(it, e->span, "internal error: cannot evaluate this expression"); return;
    }
}

/* Run the machine until the task stack is back at `floor`. */
static Value *run(Interp *it, size_t floor) {
    while (it->tasks.len > floor && !it->failed) {
        step(it);
        if (++it->tick >= POLL_STEPS) poll_limits(it);
    }
    if (it->failed) {
        /* Unwind: release every value and frame this run created. */
        it->tasks.len = floor;
        return NULL;
    }
    return pop_val(it);
}

static void reset(Interp *it) {
    for (size_t i = 0; i < it->vals.len; i++)
        rt_release(it->vals.data[i]);
    for (size_t i = 0; i < it->slots.len; i++)
        rt_release(it->slots.data[i]);
    it->vals.len = it->slots.len = it->tasks.len = 0;
    it->fn = NULL;
    it->base = 0;
    it->letrec = NULL;
    it->depth = 0;
}

/* Start a run: its account current, its clock started. Returns the account to restore. */
static RtMemAccount *run_begin(Interp *it) {
    it->tick = 0;
    it->mem.limit = it->limits.max_memory;
    it->deadline_ns = 0;
    if (it->limits.timeout > 0) {
        double ns = it->limits.timeout * 1e9;
        it->deadline_ns = now_ns() + (ns > 1e18 ? (uint64_t)1e18 : (uint64_t)ns);
    }
    return rt_mem_swap(&it->mem);
}

/* ---- entry points -------------------------------------------------------------------------------
 */

static _Thread_local EvObserver *observe_new; /* ev_observe_new */

Interp *ev_new(Module *m) {
    Interp *it = sup_calloc(1, sizeof *it);
    it->m = m;
    it->ctx = m->ctx;
    arena_init(&it->arena);
    rt_heap_init(&it->heap);
    it->limits = rt_limits_default();
    it->obs = observe_new;
    node(it, m->ctx->next_id);
    return it;
}

void ev_set_limits(Interp *it, const RtLimits *limits) { it->limits = *limits; }

void ev_set_probe(Interp *it, bool check_numerics, RtProfile *prof) {
    it->probe = (EvProbe){check_numerics || prof != NULL, check_numerics, prof};
}

RtMemAccount *ev_account(Interp *it) {
    it->mem.limit = it->limits.max_memory;
    return &it->mem;
}

void ev_free(Interp *it) {
    if (it == NULL) return;
    reset(it);
    rt_heap_free(&it->heap);
    for (size_t i = 0; i < it->immortals.len; i++)
        rt_value_free_immortal(it->immortals.data[i]);
    vec_free(&it->immortals);
    vec_free(&it->tasks);
    vec_free(&it->vals);
    vec_free(&it->slots);
    vec_free(&it->k_in);
    vec_free(&it->k_start);
    vec_free(&it->k_len);
    vec_free(&it->k_tuple);
    vec_free(&it->k_out);
    vec_free(&it->k_outv);
    free(it->ni);
    arena_free(&it->arena);
    free(it);
}

Value *ev_call_global(Interp *it, const char *name, uint32_t n_args, Value *const *args) {
    it->failed = false;
    FuncDef *d = ir_module_lookup(it->m, name, strlen(name));
    if (d == NULL || d->func == NULL) {
        fail(it, SPAN_NONE, "no function @%s in the module", name);
        return NULL;
    }
    FnInfo *fi = fn_info(it, d->func, d->func->body);
    if (n_args != d->func->n_params) {
        fail(it, d->span, "@%s takes %u arguments, %u given", name, d->func->n_params, n_args);
        return NULL;
    }
    RtMemAccount *prev = run_begin(it);
    /* A frame of its own under a return task, as if called. */
    Task r = {.kind = TASK_RETURN, .fn = NULL, .base = (uint32_t)it->slots.len};
    vec_push(&it->tasks, r);
    it->depth = 1;
    it->base = (uint32_t)it->slots.len;
    it->fn = fi;
    for (uint32_t i = 0; i < fi->n_slots; i++)
        vec_push(&it->slots, NULL);
    for (uint32_t i = 0; i < n_args; i++)
        *slot(it, (uint32_t)node(it, d->func->params[i]->base.id)->slot) = rt_retain(args[i]);
    push_eval(it, fi->body);
    if (it->obs && !it->obs->on_enter(it->obs, it, d->func, NULL, false)) observer_stop(it);
    Value *v = run(it, 0);
    reset(it);
    rt_mem_swap(prev);
    return v;
}

Value *ev_eval_module_expr(Interp *it) {
    RLY_CHECK(it->m->is_expr && it->m->expr != NULL, "ev_eval_module_expr: not an expression");
    /* a free_var has no value to run with (the VM's compiler says the same) */
    PtrVec fv = {0};
    ir_free_vars(it->m->expr, &fv);
    if (fv.len > 0) {
        it->failed = false;
        fail(it, ((Expr *)fv.data[0])->span,
             "the expression has a free variable %%%s: only closed programs run (write a def "
             "@main(%%%s: ...) to take it as an input)",
             ((Var *)fv.data[0])->name, ((Var *)fv.data[0])->name);
        vec_free(&fv);
        return NULL;
    }
    vec_free(&fv);
    return ev_eval_closed(it, it->m->expr);
}

Value *ev_eval_closed(Interp *it, Expr *e) {
    it->failed = false;
    FnInfo *fi = fn_info(it, NULL, e);
    RtMemAccount *prev = run_begin(it);
    Task r = {.kind = TASK_RETURN, .fn = NULL, .base = 0};
    vec_push(&it->tasks, r);
    it->depth = 1;
    it->base = 0;
    it->fn = fi;
    for (uint32_t i = 0; i < fi->n_slots; i++)
        vec_push(&it->slots, NULL);
    push_eval(it, fi->body);
    Value *v = run(it, 0);
    reset(it);
    rt_mem_swap(prev);
    return v;
}

/* ---- observing (the debugger's view of a run; eval.h) ---------------------------------------- */

void ev_set_observer(Interp *it, EvObserver *ob) { it->obs = ob; }
void ev_observe_new(EvObserver *ob) { observe_new = ob; }
uint64_t ev_depth(const Interp *it) { return it->depth; }

/* Walk the frames from the innermost: frame k's function, slot base and what it waits on. A
 * TASK_RETURN separates a frame from its caller's (r.fn, r.base; r.e the call, set by enter);
 * the one with fn == NULL at the bottom of a run is the sentinel when the run entered a global. */
static bool frame_at(const Interp *it, uint32_t k, FnInfo **fi, uint32_t *base, Expr **at) {
    FnInfo *f = it->fn;
    uint32_t b = it->base;
    Expr *e = NULL;
    uint32_t level = 0;
    if (f == NULL) return false;
    for (size_t i = it->tasks.len; i-- > 0;) {
        const Task *t = &it->tasks.data[i];
        if (t->kind == TASK_EVAL) {
            if (e == NULL) e = t->e;
            continue;
        }
        if (level == k) break;
        if (t->fn == NULL) return false;
        f = t->fn;
        b = t->base;
        e = t->e;
        level++;
    }
    if (level != k) return false;
    *fi = f;
    *base = b;
    *at = e;
    return true;
}

uint32_t ev_n_frames(const Interp *it) {
    if (it->fn == NULL) return 0;
    uint32_t n = 1;
    for (size_t i = it->tasks.len; i-- > 0;)
        if (it->tasks.data[i].kind == TASK_RETURN && it->tasks.data[i].fn != NULL) n++;
    return n;
}

bool ev_frame(const Interp *it, uint32_t k, EvFrame *out) {
    FnInfo *fi;
    uint32_t base;
    Expr *at;
    if (!frame_at(it, k, &fi, &base, &at)) return false;
    out->fn = fi->fn;
    out->at = at;
    return true;
}

typedef struct LookupState {
    Interp *it;
    FnInfo *fi;
    uint32_t base;
    const char *name;
    Var *found;
    Value *value;
} LookupState;

/* The value of v in frame (fi, base), or NULL. */
static Value *frame_value(Interp *it, FnInfo *fi, uint32_t base, Var *v) {
    if (v->base.id >= it->n_ni) return NULL;
    const NodeInfo *n = &it->ni[v->base.id];
    if (n->owner == fi && n->slot >= 0) return it->slots.data[base + (uint32_t)n->slot];
    for (uint32_t i = 0; i < fi->n_caps; i++)
        if (fi->caps[i] == v) return it->slots.data[base + fi->cap_base + i];
    return NULL;
}

static void lookup_try(LookupState *ls, Var *v) {
    if (strcmp(v->name, ls->name) != 0) return;
    Value *x = frame_value(ls->it, ls->fi, ls->base, v);
    if (x != NULL) ls->found = v, ls->value = x;
}

static void lookup_pattern(LookupState *ls, const Pattern *p) {
    if (p->kind == PAT_VAR) lookup_try(ls, p->var);
    for (uint32_t i = 0; i < p->n; i++)
        lookup_pattern(ls, p->pats[i]);
}

static VisitResult lookup_pre(Visitor *v, Expr *e) {
    LookupState *ls = v->state;
    if (e->kind == EXPR_FUNCTION && e != (Expr *)ls->fi->fn) return VISIT_SKIP;
    if (e->kind == EXPR_VAR) lookup_try(ls, AS_VAR(e));
    if (e->kind == EXPR_MATCH)
        for (uint32_t i = 0; i < AS_MATCH(e)->n_clauses; i++)
            lookup_pattern(ls, AS_MATCH(e)->clauses[i].lhs);
    return VISIT_CONTINUE;
}

const Value *ev_frame_lookup(Interp *it, uint32_t k, const char *name, Var **var_out) {
    LookupState ls = {.it = it, .name = name};
    Expr *at;
    if (!frame_at(it, k, &ls.fi, &ls.base, &at)) return NULL;
    for (uint32_t i = 0; i < ls.fi->n_caps; i++)
        lookup_try(&ls, ls.fi->caps[i]);
    if (ls.fi->fn)
        for (uint32_t i = 0; i < ls.fi->fn->n_params; i++)
            lookup_try(&ls, ls.fi->fn->params[i]);
    Visitor v = {.pre = lookup_pre, .state = &ls};
    ir_visit(&v, ls.fi->fn ? &ls.fi->fn->base : ls.fi->body);
    if (var_out) *var_out = ls.found;
    return ls.value;
}

const char *ev_global_name(const Interp *it, const Function *fn) {
    for (size_t i = 0; fn && i < it->m->funcs.len; i++)
        if (it->m->funcs.data[i].func == fn) return it->m->funcs.data[i].gvar->name;
    return NULL;
}

/* ---- printing
 * ------------------------------------------------------------------------------------ */

static const char *ev_ctor_name(const void *ctor, const void *ud) {
    (void)ud;
    return ctor ? ((const Constructor *)ctor)->name : NULL;
}

void ev_print_value(const Value *root, size_t max_elems, StrBuf *out) {
    rt_print_value(root, max_elems, ev_ctor_name, NULL, out);
}
