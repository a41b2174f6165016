/* expr.c - one function's body to bytecode.
 *
 * The body is compiled in the graph form the optimizer leaves (no ANF first), with the
 * interpreter's semantics (src/eval/eval.c), which is the oracle:
 *   - evaluation order: a call's callee (when it is not an operator, constructor or global),
 *     then its arguments left to right; a let's value, then its body; fields left to right;
 *   - a shared node (a non-trivial node with several parents in this body, counted as the
 *     interpreter's layout counts them) is evaluated once per activation, at its first use,
 *     into its own register. Where the first use is not known statically (the node was computed
 *     in one arm of an `if` and is used after it), a BOOL flag register records whether it is
 *     computed yet. Which nodes need a flag is found by compiling the body, and compiling it
 *     again with those flags when some were found;
 *   - lets, ifs, matches and function literals are never shared: each use evaluates them again,
 *     as the interpreter does.
 * The compiler is a machine with an explicit task stack (one task per expression being
 * compiled, a let chain replacing its task), so a 10^5-deep expression or let chain costs heap,
 * not C stack. Each task leaves the register holding its value on a result stack, or, in tail
 * position, returns it (VM_RET, or a tail call). */
#include <stdio.h>

#include "backend/be.h"

enum { MS_NONE, MS_MAYBE, MS_DONE }; /* a shared node's state at a program point */

typedef struct MemoNode {
    Expr *e;
    uint32_t reg;   /* the node's register (this pass), BE_NOREG until first needed */
    uint32_t flag;  /* BOOL register "computed yet", BE_NOREG when the node needs none */
    bool need_flag; /* found by a pass: the node is used where it may or may not be computed */
    uint8_t state;  /* MS_* at the point being compiled */
    uint32_t stamp, count; /* scratch of branch_merge */
} MemoNode;

typedef struct TrailEntry {
    uint32_t idx;
    uint8_t old;
} TrailEntry;
typedef struct ArmChange {
    uint32_t idx;
    uint8_t final;
} ArmChange;
/* An if or match being compiled: its arms' effects on the shared nodes' states. */
typedef struct Branch {
    uint32_t trail_save; /* trail length before the arms */
    uint32_t chg_start;  /* its arms' ArmChanges start here in fb->chg */
    uint32_t n_reach;    /* arms whose end reaches the join (not in tail position) */
} Branch;

enum { T_EXPR, T_MEMO };
/* Callee classes of a call (CTask.a at step > 0). */
enum { CK_OP, CK_CTOR, CK_GLOBAL, CK_PRIM, CK_LAMBDA, CK_SELF, CK_CLOSURE };

typedef struct CTask {
    Expr *e;
    uint8_t kind; /* T_EXPR, T_MEMO */
    bool tail;    /* the value is the function's result: return it */
    bool no_memo; /* the shared-node check was made (T_EXPR under a T_MEMO) */
    uint32_t step;
    uint32_t dst;        /* the register the value must go to, BE_NOREG: any */
    uint32_t vbase;      /* result-stack height when the operands started */
    uint32_t a, b, c, d; /* per kind */
    Var *self;           /* a function literal task: the let variable naming it */
} CTask;

struct FB {
    Be *be;
    BeFunc *f;
    Vec(VmInstr) code;
    Vec(uint32_t) locs;
    Vec(uint32_t) pool;
    Vec(uint8_t) kinds;
    PtrVec reg_const; /* per register: the scalar Constant it alone ever holds, or NULL */
    PtrMap var_reg;   /* Var -> register + 1 */
    PtrMap let_fn;    /* Var -> the function literal a let binds it to */
    PtrMap memo_of;   /* shared node -> memo index + 1 */
    Vec(MemoNode) memo;
    Vec(TrailEntry) trail;
    Vec(ArmChange) chg;
    Vec(Branch) br;
    Vec(CTask) tasks;
    Vec(uint32_t) res;
    Vec(uint32_t) side; /* match tasks: leaves and end jumps */
    uint32_t stamp;
    bool redo;
    bool self_value; /* the let-rec variable is used as a value: materialize it at entry */
};

/* ---- the builder ----------------------------------------------------------------------------- */

Be *fb_be(FB *fb) { return fb->be; }

uint32_t fb_reg(FB *fb, uint8_t kind) {
    vec_push(&fb->kinds, kind);
    vec_push(&fb->reg_const, NULL);
    return (uint32_t)fb->kinds.len - 1;
}

uint8_t fb_kind(const FB *fb, uint32_t reg) { return fb->kinds.data[reg]; }

uint32_t fb_pc(const FB *fb) { return (uint32_t)fb->code.len; }
VmInstr *fb_at(FB *fb, uint32_t pc) { return &fb->code.data[pc]; }
uint32_t fb_pool_len(const FB *fb) { return (uint32_t)fb->pool.len; }

uint32_t fb_emit(FB *fb, VmInstr in, Span span) {
    vec_push(&fb->code, in);
    vec_push(&fb->locs, be_loc(fb->be, span));
    return (uint32_t)fb->code.len - 1;
}

uint32_t fb_pool(FB *fb, const uint32_t *ops, uint32_t n) {
    uint32_t at = (uint32_t)fb->pool.len;
    for (uint32_t i = 0; i < n; i++)
        vec_push(&fb->pool, ops[i]);
    return at;
}

void fb_truncate(FB *fb, uint32_t pc, uint32_t pool_len) {
    fb->code.len = fb->locs.len = pc;
    fb->pool.len = pool_len;
}

void fb_move(FB *fb, uint32_t dst, uint32_t src, Span span) {
    if (dst == src) return;
    uint8_t kd = fb_kind(fb, dst), ks = fb_kind(fb, src);
    Constant *k = fb->reg_const.data[src];
    if (kd == VM_RK_VALUE && k != NULL) { /* an immortal constant: no box to allocate */
        fb_emit(fb, (VmInstr){.op = VM_LOAD_CONST, .dst = dst, .a = be_const(fb->be, k)}, span);
        return;
    }
    VmInstr in = {.dst = dst, .a = src};
    if (kd == ks)
        in.op = VM_MOVE;
    else if (kd == VM_RK_VALUE)
        in.op = VM_BOX;
    else if (ks == VM_RK_VALUE)
        in.op = VM_UNBOX;
    else { /* two different scalar kinds: the types disagree; box and let the unbox check */
        uint32_t t = fb_reg(fb, VM_RK_VALUE);
        fb_emit(fb, (VmInstr){.op = VM_BOX, .dst = t, .a = src}, span);
        in.op = VM_UNBOX;
        in.a = t;
    }
    fb_emit(fb, in, span);
}

uint32_t fb_as_kind(FB *fb, uint32_t src, uint8_t kind, Span span) {
    if (fb_kind(fb, src) == kind) return src;
    uint32_t r = fb_reg(fb, kind);
    fb_move(fb, r, src, span);
    return r;
}

uint32_t fb_load_imm_i(FB *fb, uint8_t kind, int64_t v, Span span) {
    uint32_t r = fb_reg(fb, kind);
    fb_emit(fb, (VmInstr){.op = VM_LOAD_IMM, .rk = kind, .dst = r, .imm = v}, span);
    return r;
}

uint32_t fb_var(FB *fb, Var *v) {
    uintptr_t r = (uintptr_t)ptrmap_get(&fb->var_reg, v);
    return r ? (uint32_t)(r - 1) : BE_NOREG;
}

void fb_bind_var(FB *fb, Var *v, uint32_t reg) {
    ptrmap_put(&fb->var_reg, v, (void *)(uintptr_t)(reg + 1));
}

static uint8_t kind_of_expr(const Expr *e) { return be_kind_of(e->checked_type); }

/* ---- shared nodes: which, and their state along the code ------------------------------------ */

/* Is e a node the interpreter never memoizes (evaluating it again costs nothing, or it is a
 * control construct evaluated anew at each use)? Mirrors eval.c's cheap(). */
static bool cheap(const Expr *e) {
    return e->kind == EXPR_VAR || e->kind == EXPR_CONSTANT || e->kind == EXPR_OP ||
           e->kind == EXPR_GLOBAL_VAR || e->kind == EXPR_CONSTRUCTOR || e->kind == EXPR_LET ||
           e->kind == EXPR_IF || e->kind == EXPR_MATCH || e->kind == EXPR_FUNCTION;
}

typedef struct SharedScan {
    FB *fb;
    Expr *root;
    PtrMap parents; /* child -> parents counted (as the interpreter's layout counts them) */
} SharedScan;

static VisitResult scan_pre(Visitor *v, Expr *e) {
    SharedScan *s = v->state;
    FB *fb = s->fb;
    if (e->kind == EXPR_FUNCTION && e != s->root) {
        /* A nested literal may capture the let-rec variable (a Primitive one is closed). */
        if (fb->f->self != NULL && !be_is_primitive(AS_FUNCTION(e))) fb->self_value = true;
        return VISIT_SKIP;
    }
    uint32_t n = ir_expr_n_children(e);
    for (uint32_t i = 0; i < n; i++) {
        Expr *c = ir_expr_child(e, i);
        if (c == NULL) continue;
        if (c->kind == EXPR_VAR) {
            bool callee = e->kind == EXPR_CALL && i == 0;
            bool binder = (e->kind == EXPR_LET && i == 0) || (e->kind == EXPR_FUNCTION);
            if (fb->f->self != NULL && AS_VAR(c) == fb->f->self && !callee && !binder)
                fb->self_value = true;
            continue;
        }
        uintptr_t k = (uintptr_t)ptrmap_get(&s->parents, c) + 1;
        ptrmap_put(&s->parents, c, (void *)k);
        if (k == 2 && !cheap(c)) {
            MemoNode mn = {.e = c, .reg = BE_NOREG, .flag = BE_NOREG};
            vec_push(&fb->memo, mn);
            ptrmap_put(&fb->memo_of, c, (void *)(uintptr_t)fb->memo.len);
        }
    }
    return VISIT_CONTINUE;
}

static void find_shared(FB *fb, Expr *root) {
    SharedScan s = {.fb = fb, .root = root};
    Visitor v = {.pre = scan_pre, .state = &s};
    ir_visit(&v, root);
    ptrmap_free(&s.parents);
}

static void set_state(FB *fb, uint32_t idx, uint8_t st) {
    MemoNode *mn = &fb->memo.data[idx];
    if (mn->state == st) return;
    TrailEntry t = {idx, mn->state};
    vec_push(&fb->trail, t);
    mn->state = st;
}

static void undo_to(FB *fb, uint32_t len) {
    while (fb->trail.len > len) {
        TrailEntry t = vec_pop(&fb->trail);
        fb->memo.data[t.idx].state = t.old;
    }
}

static uint32_t branch_begin(FB *fb) {
    Branch b = {(uint32_t)fb->trail.len, (uint32_t)fb->chg.len, 0};
    vec_push(&fb->br, b);
    return (uint32_t)fb->br.len - 1;
}

/* An arm of the innermost branch is compiled: keep what it computed (when its end reaches
 * the join) and go back to the state before the arms. */
static void arm_end(FB *fb, bool reaches) {
    Branch *b = &vec_last(&fb->br);
    if (reaches) {
        b->n_reach++;
        uint32_t stamp = ++fb->stamp;
        for (size_t i = b->trail_save; i < fb->trail.len; i++) {
            uint32_t idx = fb->trail.data[i].idx;
            MemoNode *mn = &fb->memo.data[idx];
            if (mn->stamp == stamp) continue;
            mn->stamp = stamp;
            ArmChange c = {idx, mn->state}; /* the state at the arm's end */
            vec_push(&fb->chg, c);
        }
    }
    undo_to(fb, b->trail_save);
}

/* After all arms: a node is computed at the join when every arm that reaches it computed it;
 * maybe computed when some did. */
static void branch_merge(FB *fb) {
    Branch b = vec_pop(&fb->br);
    uint32_t count_stamp = ++fb->stamp;
    for (size_t i = b.chg_start; i < fb->chg.len; i++) {
        MemoNode *mn = &fb->memo.data[fb->chg.data[i].idx];
        if (mn->stamp != count_stamp) mn->stamp = count_stamp, mn->count = 0;
        if (fb->chg.data[i].final == MS_DONE) mn->count++;
    }
    uint32_t apply_stamp = ++fb->stamp;
    if (b.n_reach > 0)
        for (size_t i = b.chg_start; i < fb->chg.len; i++) {
            uint32_t idx = fb->chg.data[i].idx;
            MemoNode *mn = &fb->memo.data[idx];
            if (mn->stamp == apply_stamp) continue;
            uint8_t st = mn->count == b.n_reach ? MS_DONE : MS_MAYBE;
            mn->stamp = apply_stamp;
            set_state(fb, idx, st);
        }
    fb->chg.len = b.chg_start;
}

/* ---- tasks ------------------------------------------------------------------------------------
 */

static void push_task(FB *fb, Expr *e, bool tail, uint32_t dst) {
    CTask t = {.e = e, .kind = T_EXPR, .tail = tail, .dst = dst};
    vec_push(&fb->tasks, t);
}

static void emit_ret(FB *fb, uint32_t reg, Span span) {
    uint32_t r = fb_as_kind(fb, reg, fb->f->result_kind, span);
    fb_emit(fb, (VmInstr){.op = VM_RET, .a = r}, span);
}

/* The top task is done; its value is in reg. */
static void finish(FB *fb, uint32_t reg) {
    CTask t = vec_pop(&fb->tasks);
    Span span = t.e->span;
    if (t.tail) {
        emit_ret(fb, reg, span);
        return;
    }
    if (t.dst != BE_NOREG) {
        fb_move(fb, t.dst, reg, span);
        reg = t.dst;
    } else {
        reg = fb_as_kind(fb, reg, kind_of_expr(t.e), span);
    }
    vec_push(&fb->res, reg);
}

/* The top task is done without a value: a tail call or a path that ends. */
static void finish_void(FB *fb) {
    RLY_ASSERT(vec_last(&fb->tasks).tail);
    fb->tasks.len--;
}

/* A register for the top task's value of kind `kind`: its dst when that has the kind. */
static uint32_t target(FB *fb, const CTask *t, uint8_t kind) {
    if (t->dst != BE_NOREG && fb_kind(fb, t->dst) == kind) return t->dst;
    return fb_reg(fb, kind);
}

static uint32_t *operands(FB *fb, const CTask *t, uint32_t *n) {
    *n = (uint32_t)fb->res.len - t->vbase;
    return fb->res.data + t->vbase;
}

/* ---- calls ------------------------------------------------------------------------------------
 */

/* Invoke VM function fidx on pre[0..n_pre) then args[0..n) (converted to its parameter kinds).
 * In tail position (and when its result kind is ours) a tail call ends the task. */
static void emit_invoke(FB *fb, uint32_t fidx, const uint32_t *pre, uint32_t n_pre,
                        const uint32_t *args, uint32_t n) {
    CTask *t = &vec_last(&fb->tasks);
    Span span = t->e->span;
    BeFunc *g = fb->be->funcs.data[fidx];
    uint32_t nall = n_pre + n;
    if (nall != g->n_params) {
        be_error(fb->be, span, "internal error: %s takes %u arguments, %u given", g->name,
                 g->n_params, nall);
        return;
    }
    uint32_t buf[16] = {0};
    uint32_t *ops = nall <= 16 ? buf : sup_malloc(sizeof(uint32_t) * nall);
    for (uint32_t i = 0; i < nall; i++) {
        uint32_t r = i < n_pre ? pre[i] : args[i - n_pre];
        ops[i] = fb_as_kind(fb, r, g->param_kind[i], span);
    }
    uint32_t at = fb_pool(fb, ops, nall);
    if (ops != buf) free(ops);
    if (t->tail && g->result_kind == fb->f->result_kind) {
        uint32_t d = fb_reg(fb, g->result_kind);
        fb_emit(
            fb,
            (VmInstr){
                .op = VM_INVOKE, .flags = VM_F_TAIL, .dst = d, .a = fidx, .n = nall, .args = at},
            span);
        finish_void(fb);
        return;
    }
    uint32_t d = target(fb, t, g->result_kind);
    fb_emit(fb, (VmInstr){.op = VM_INVOKE, .dst = d, .a = fidx, .n = nall, .args = at}, span);
    finish(fb, d);
}

static void emit_invoke_closure(FB *fb, uint32_t clo, const uint32_t *args, uint32_t n) {
    CTask *t = &vec_last(&fb->tasks);
    Span span = t->e->span;
    uint32_t at = fb_pool(fb, args, n);
    if (t->tail) {
        uint32_t d = fb_reg(fb, fb->f->result_kind);
        fb_emit(fb,
                (VmInstr){.op = VM_INVOKE_CLOSURE,
                          .flags = VM_F_TAIL,
                          .dst = d,
                          .a = clo,
                          .n = n,
                          .args = at},
                span);
        finish_void(fb);
        return;
    }
    uint32_t d = target(fb, t, kind_of_expr(t->e));
    fb_emit(fb, (VmInstr){.op = VM_INVOKE_CLOSURE, .dst = d, .a = clo, .n = n, .args = at}, span);
    finish(fb, d);
}

/* The registers holding a lambda's captured values, boxed (ALLOC_CLOSURE and direct calls of a
 * lifted function take them as VALUE registers). False after an error. */
static bool capture_regs(FB *fb, BeFunc *g, Span span, uint32_t *out) {
    for (uint32_t i = 0; i < g->n_caps; i++) {
        Var *v = g->caps[i];
        uint32_t r = fb_var(fb, v);
        if (r == BE_NOREG) {
            be_error(fb->be, span, "internal error: captured %%%s has no register here", v->name);
            return false;
        }
        out[i] = fb_as_kind(fb, r, VM_RK_VALUE, span);
    }
    return true;
}

static const char *outer_name(FB *fb) { return fb->f->name; }

/* Which kind of callee, and the function node behind it when known. */
static int callee_class(FB *fb, Call *c, Function **fn_out) {
    Expr *op = c->op;
    *fn_out = NULL;
    switch (op->kind) {
    case EXPR_OP: return CK_OP;
    case EXPR_CONSTRUCTOR: return CK_CTOR;
    case EXPR_GLOBAL_VAR: return CK_GLOBAL;
    case EXPR_FUNCTION:
        *fn_out = AS_FUNCTION(op);
        return be_is_primitive(*fn_out) ? CK_PRIM : CK_LAMBDA;
    case EXPR_VAR: {
        Var *v = AS_VAR(op);
        if (fb->f->self == v) return CK_SELF;
        Function *lf = ptrmap_get(&fb->let_fn, v);
        if (lf != NULL && be_is_primitive(lf)) {
            *fn_out = lf;
            return CK_PRIM;
        }
        return CK_CLOSURE;
    }
    default: return CK_CLOSURE;
    }
}

static void step_call(FB *fb, CTask *t) {
    Call *c = AS_CALL(t->e);
    Function *fn = NULL;
    int ck = callee_class(fb, c, &fn);
    uint32_t first = ck == CK_CLOSURE ? 1 : 0;
    if (t->step == 0) t->vbase = (uint32_t)fb->res.len;
    if (t->step < first + c->n_args) {
        uint32_t k = t->step++;
        push_task(fb, k < first ? c->op : c->args[k - first], false, BE_NOREG);
        return;
    }
    uint32_t n_ops;
    uint32_t *ops = operands(fb, t, &n_ops);
    /* Copy: emitting may push results (never here) or grow vectors. */
    uint32_t buf[16] = {0};
    uint32_t *regs = n_ops <= 16 ? buf : sup_malloc(sizeof(uint32_t) * n_ops);
    if (n_ops) memcpy(regs, ops, sizeof(uint32_t) * n_ops);
    fb->res.len = t->vbase;
    uint32_t *args = regs + first;
    uint32_t n = c->n_args;
    Span span = c->base.span;
    Be *be = fb->be;
    switch (ck) {
    case CK_OP: {
        uint32_t d = t->dst != BE_NOREG && !t->tail ? t->dst : BE_NOREG;
        uint32_t r = be_emit_op_call(fb, c, args, n, d);
        if (r != BE_NOREG) finish(fb, r);
        break;
    }
    case CK_CTOR: {
        Constructor *ct = AS_CONSTRUCTOR(c->op);
        for (uint32_t i = 0; i < n; i++)
            args[i] = fb_as_kind(fb, args[i], VM_RK_VALUE, span);
        uint32_t at = fb_pool(fb, args, n);
        uint32_t d = target(fb, t, VM_RK_VALUE);
        fb_emit(fb,
                (VmInstr){.op = VM_ALLOC_ADT, .dst = d, .a = be_ctor(be, ct), .n = n, .args = at},
                span);
        finish(fb, d);
        break;
    }
    case CK_GLOBAL: {
        uint32_t g = be_func_global(be, AS_GLOBAL_VAR(c->op), span);
        if (!be->failed) emit_invoke(fb, g, NULL, 0, args, n);
        break;
    }
    case CK_PRIM: {
        uint32_t d = t->dst != BE_NOREG && !t->tail ? t->dst : BE_NOREG;
        uint32_t r = be_emit_prim_call(fb, c, fn, args, n, d);
        if (r != BE_NOREG) {
            finish(fb, r);
            break;
        }
        if (be->failed) break;
        /* Not a dataflow body: an ordinary function. A let-bound one is called as a closure. */
        if (c->op->kind != EXPR_FUNCTION) {
            uint32_t clo = fb_var(fb, AS_VAR(c->op));
            emit_invoke_closure(fb, clo, args, n);
            break;
        }
        goto lambda;
    }
    case CK_LAMBDA:
    lambda : {
        uint32_t g = be_func_lambda(be, fn, NULL, outer_name(fb));
        BeFunc *gf = be->funcs.data[g];
        uint32_t *caps = sup_malloc(sizeof(uint32_t) * (gf->n_caps ? gf->n_caps : 1));
        if (capture_regs(fb, gf, span, caps)) emit_invoke(fb, g, caps, gf->n_caps, args, n);
        free(caps);
        break;
    }
    case CK_SELF: {
        BeFunc *f = fb->f;
        uint32_t *pre = sup_malloc(sizeof(uint32_t) * (f->n_caps ? f->n_caps : 1));
        for (uint32_t i = 0; i < f->n_caps; i++)
            pre[i] = i; /* the captured values are the first parameters */
        uint32_t self_idx = (uint32_t)(uintptr_t)ptrmap_get(&be->func_of, f->fn) - 1;
        emit_invoke(fb, self_idx, pre, f->n_caps, args, n);
        free(pre);
        break;
    }
    case CK_CLOSURE: emit_invoke_closure(fb, regs[0], args, n); break;
    }
    if (regs != buf) free(regs);
}

/* ---- one step ---------------------------------------------------------------------------------
 */

static void step_expr(FB *fb) {
    CTask *t = &vec_last(&fb->tasks);
    Expr *e = t->e;
    Be *be = fb->be;
    Span span = e->span;
    if (t->step == 0 && !t->no_memo && !cheap(e)) {
        uintptr_t mi = (uintptr_t)ptrmap_get(&fb->memo_of, e);
        if (mi != 0) {
            uint32_t idx = (uint32_t)mi - 1;
            MemoNode *mn = &fb->memo.data[idx];
            if (mn->state == MS_DONE) {
                finish(fb, mn->reg);
                return;
            }
            if (mn->reg == BE_NOREG) mn->reg = fb_reg(fb, kind_of_expr(e));
            if (mn->state == MS_MAYBE && mn->flag == BE_NOREG) {
                mn->need_flag = true; /* this pass's code is thrown away */
                fb->redo = true;
            }
            t->kind = T_MEMO;
            t->a = idx;
            t->b = t->c = BE_NOREG;
            if (mn->flag != BE_NOREG && mn->state == MS_MAYBE) {
                /* if (!flag) compute; else skip it */
                uint32_t pif = fb_emit(fb, (VmInstr){.op = VM_IF, .a = mn->flag}, span);
                t->b = fb_emit(fb, (VmInstr){.op = VM_GOTO}, span);
                fb_at(fb, pif)->b = fb_pc(fb);
            }
            uint32_t reg = mn->reg;
            CTask inner = {.e = e, .kind = T_EXPR, .no_memo = true, .dst = reg};
            vec_push(&fb->tasks, inner);
            return;
        }
    }
    switch (e->kind) {
    case EXPR_VAR: {
        uint32_t r = fb_var(fb, AS_VAR(e));
        if (r == BE_NOREG) {
            be_error(be, span, "internal error: %%%s has no register here", AS_VAR(e)->name);
            return;
        }
        finish(fb, r);
        return;
    }
    case EXPR_CONSTANT: {
        Constant *k = AS_CONSTANT(e);
        uint8_t kind = kind_of_expr(e);
        if (k->ndim == 0 && kind != VM_RK_VALUE && be_kind_of_dtype(k->dtype) == kind) {
            uint32_t r = target(fb, t, kind);
            if (r != t->dst) fb->reg_const.data[r] = k; /* a register of its own */
            VmInstr in = {.op = VM_LOAD_IMM, .rk = kind, .dst = r};
            if (kind == VM_RK_F32 || kind == VM_RK_F64)
                in.fimm = ir_constant_as_f64(k);
            else
                in.imm = ir_constant_as_i64(k);
            fb_emit(fb, in, span);
            finish(fb, r);
            return;
        }
        uint32_t r = target(fb, t, VM_RK_VALUE);
        fb_emit(fb, (VmInstr){.op = VM_LOAD_CONST, .dst = r, .a = be_const(be, k)}, span);
        finish(fb, r);
        return;
    }
    case EXPR_GLOBAL_VAR: {
        uint32_t g = be_func_global(be, AS_GLOBAL_VAR(e), span);
        if (be->failed) return;
        uint32_t r = target(fb, t, VM_RK_VALUE);
        fb_emit(fb, (VmInstr){.op = VM_ALLOC_CLOSURE, .dst = r, .a = g}, span);
        finish(fb, r);
        return;
    }
    case EXPR_CONSTRUCTOR: {
        Constructor *ct = AS_CONSTRUCTOR(e);
        uint32_t r = target(fb, t, VM_RK_VALUE);
        if (ct->n_inputs == 0)
            fb_emit(fb, (VmInstr){.op = VM_ALLOC_ADT, .dst = r, .a = be_ctor(be, ct)}, span);
        else
            fb_emit(fb, (VmInstr){.op = VM_ALLOC_CLOSURE, .dst = r, .a = be_func_ctor(be, ct)},
                    span);
        finish(fb, r);
        return;
    }
    case EXPR_OP: {
        char msg[256];
        snprintf(msg, sizeof msg, "operator %s used as a value: call it instead", AS_OP(e)->name);
        fb_emit(fb, (VmInstr){.op = VM_FATAL, .a = be_str(be, msg)}, span);
        if (t->tail)
            finish_void(fb);
        else
            finish(fb, fb_reg(fb, kind_of_expr(e))); /* never reached at run time */
        return;
    }
    case EXPR_TUPLE: {
        Tuple *tu = AS_TUPLE(e);
        if (t->step == 0) t->vbase = (uint32_t)fb->res.len;
        if (t->step < tu->n) {
            push_task(fb, tu->fields[t->step++], false, BE_NOREG);
            return;
        }
        uint32_t n;
        uint32_t *ops = operands(fb, t, &n);
        for (uint32_t i = 0; i < n; i++)
            ops[i] = fb_as_kind(fb, ops[i], VM_RK_VALUE, span);
        uint32_t at = fb_pool(fb, ops, n);
        fb->res.len = t->vbase;
        uint32_t r = target(fb, t, VM_RK_VALUE);
        fb_emit(fb, (VmInstr){.op = VM_ALLOC_TUPLE, .dst = r, .n = n, .args = at}, span);
        finish(fb, r);
        return;
    }
    case EXPR_TUPLE_GET_ITEM: {
        TupleGetItem *g = AS_TUPLE_GET_ITEM(e);
        if (t->step++ == 0) {
            push_task(fb, g->tuple, false, BE_NOREG);
            return;
        }
        uint32_t tr = fb_as_kind(fb, vec_pop(&fb->res), VM_RK_VALUE, span);
        uint32_t r = target(fb, t, VM_RK_VALUE);
        fb_emit(fb, (VmInstr){.op = VM_GET_FIELD, .dst = r, .a = tr, .b = g->index}, span);
        finish(fb, r);
        return;
    }
    case EXPR_LET: {
        Let *l = AS_LET(e);
        if (t->step++ == 0) {
            push_task(fb, l->value, false, BE_NOREG);
            if (l->value->kind == EXPR_FUNCTION) {
                vec_last(&fb->tasks).self = l->var;
                ptrmap_put(&fb->let_fn, l->var, l->value);
            }
            return;
        }
        uint32_t r = vec_pop(&fb->res);
        r = fb_as_kind(fb, r, kind_of_expr(&l->var->base), span);
        fb_bind_var(fb, l->var, r);
        /* The body replaces the let: a chain of lets runs in constant task space. */
        t->e = l->body;
        t->step = 0;
        t->no_memo = false;
        return;
    }
    case EXPR_FUNCTION: {
        Function *fn = AS_FUNCTION(e);
        /* A Primitive literal used as a value calls its packed function; one whose body is not
         * a dataflow program of operators is an ordinary function. */
        bool prim = be_is_primitive(fn) && be_packed_of_prim(be, fn) >= 0;
        if (be->failed) return;
        uint32_t g = prim ? be_func_prim(be, fn, outer_name(fb))
                          : be_func_lambda(be, fn, t->self, outer_name(fb));
        BeFunc *gf = be->funcs.data[g];
        uint32_t *caps = sup_malloc(sizeof(uint32_t) * (gf->n_caps ? gf->n_caps : 1));
        if (capture_regs(fb, gf, span, caps)) {
            uint32_t at = fb_pool(fb, caps, gf->n_caps);
            uint32_t r = target(fb, t, VM_RK_VALUE);
            fb_emit(
                fb,
                (VmInstr){.op = VM_ALLOC_CLOSURE, .dst = r, .a = g, .n = gf->n_caps, .args = at},
                span);
            finish(fb, r);
        }
        free(caps);
        return;
    }
    case EXPR_CALL: step_call(fb, t); return;
    case EXPR_IF: {
        If *f = AS_IF(e);
        switch (t->step++) {
        case 0: push_task(fb, f->cond, false, BE_NOREG); return;
        case 1: {
            uint32_t c = vec_pop(&fb->res);
            if (fb_kind(fb, c) != VM_RK_BOOL && fb_kind(fb, c) != VM_RK_VALUE)
                c = fb_as_kind(fb, c, VM_RK_VALUE, span);
            t->a = fb_emit(fb, (VmInstr){.op = VM_IF, .a = c}, span);
            if (!t->tail && t->dst == BE_NOREG) t->dst = fb_reg(fb, kind_of_expr(e));
            branch_begin(fb);
            uint32_t dst = t->dst;
            bool tail = t->tail;
            push_task(fb, f->then_branch, tail, tail ? BE_NOREG : dst);
            return;
        }
        case 2: {
            if (!t->tail) {
                fb->res.len--; /* == dst */
                t->b = fb_emit(fb, (VmInstr){.op = VM_GOTO}, span);
            }
            arm_end(fb, !t->tail);
            fb_at(fb, t->a)->b = fb_pc(fb);
            uint32_t dst = t->dst;
            bool tail = t->tail;
            push_task(fb, f->else_branch, tail, tail ? BE_NOREG : dst);
            return;
        }
        default:
            if (!t->tail) fb->res.len--;
            arm_end(fb, !t->tail);
            branch_merge(fb);
            if (t->tail) {
                finish_void(fb);
                return;
            }
            fb_at(fb, t->b)->a = fb_pc(fb);
            finish(fb, t->dst);
            return;
        }
    }
    case EXPR_MATCH: {
        Match *m = AS_MATCH(e);
        if (t->step == 0) {
            t->step = 1;
            push_task(fb, m->data, false, BE_NOREG);
            return;
        }
        if (t->step == 1) {
            uint32_t data = vec_pop(&fb->res);
            BeLeafVec leaves = {0};
            be_match_tree(fb, m, data, &leaves);
            t->a = (uint32_t)fb->side.len; /* leaves as (clause, pc) pairs */
            for (size_t i = 0; i < leaves.len; i++) {
                vec_push(&fb->side, leaves.data[i].clause);
                vec_push(&fb->side, leaves.data[i].pc);
            }
            t->b = (uint32_t)leaves.len;
            vec_free(&leaves);
            t->c = 0; /* the next clause to consider */
            if (!t->tail && t->dst == BE_NOREG) t->dst = fb_reg(fb, kind_of_expr(e));
            branch_begin(fb);
            t->step = 2;
        } else {
            /* A clause body is done. */
            if (!t->tail) {
                fb->res.len--;
                uint32_t j = fb_emit(fb, (VmInstr){.op = VM_GOTO}, span);
                vec_push(&fb->side, j);
            }
            arm_end(fb, !t->tail);
        }
        /* The next clause some leaf reaches. */
        uint32_t *lv = fb->side.data + t->a;
        for (; t->c < m->n_clauses; t->c++) {
            bool reached = false;
            for (uint32_t i = 0; i < t->b; i++)
                if (lv[2 * i] == t->c) {
                    fb_at(fb, lv[2 * i + 1])->a = fb_pc(fb);
                    reached = true;
                }
            if (reached) break;
        }
        if (t->c < m->n_clauses) {
            Expr *rhs = m->clauses[t->c++].rhs;
            uint32_t dst = t->dst;
            bool tail = t->tail;
            push_task(fb, rhs, tail, tail ? BE_NOREG : dst);
            return;
        }
        branch_merge(fb);
        for (size_t i = t->a + 2 * (size_t)t->b; i < fb->side.len; i++)
            fb_at(fb, fb->side.data[i])->a = fb_pc(fb);
        fb->side.len = t->a;
        if (t->tail) {
            finish_void(fb);
            return;
        }
        finish(fb, t->dst);
        return;
    }
    case EXPR_REF_CREATE: {
        if (t->step++ == 0) {
            push_task(fb, AS_REF_CREATE(e)->value, false, BE_NOREG);
            return;
        }
        uint32_t v = fb_as_kind(fb, vec_pop(&fb->res), VM_RK_VALUE, span);
        uint32_t r = target(fb, t, VM_RK_VALUE);
        fb_emit(fb, (VmInstr){.op = VM_REF_NEW, .dst = r, .a = v}, span);
        finish(fb, r);
        return;
    }
    case EXPR_REF_READ: {
        if (t->step++ == 0) {
            push_task(fb, AS_REF_READ(e)->ref, false, BE_NOREG);
            return;
        }
        uint32_t cell = vec_pop(&fb->res);
        uint32_t r = target(fb, t, VM_RK_VALUE);
        fb_emit(fb, (VmInstr){.op = VM_REF_READ, .dst = r, .a = cell}, span);
        finish(fb, r);
        return;
    }
    case EXPR_REF_WRITE: {
        RefWrite *w = AS_REF_WRITE(e);
        if (t->step == 0) t->vbase = (uint32_t)fb->res.len;
        if (t->step < 2) {
            Expr *next = t->step++ == 0 ? w->ref : w->value;
            push_task(fb, next, false, BE_NOREG);
            return;
        }
        uint32_t v = fb_as_kind(fb, vec_pop(&fb->res), VM_RK_VALUE, span);
        uint32_t cell = vec_pop(&fb->res);
        uint32_t r = target(fb, t, VM_RK_VALUE);
        fb_emit(fb, (VmInstr){.op = VM_REF_WRITE, .dst = r, .a = cell, .b = v}, span);
        finish(fb, r);
        return;
    }
    default:
        be_error(be, span, "the VM compiler does not support this expression (%s)",
                 ir_expr_kind_names[e->kind]);
        return;
    }
}

static void step_memo(FB *fb) {
    CTask *t = &vec_last(&fb->tasks);
    MemoNode *mn = &fb->memo.data[t->a];
    Span span = t->e->span;
    fb->res.len--; /* == mn->reg */
    if (mn->flag != BE_NOREG)
        fb_emit(fb, (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_BOOL, .dst = mn->flag, .imm = 1},
                span);
    if (t->b != BE_NOREG) fb_at(fb, t->b)->a = fb_pc(fb);
    set_state(fb, t->a, MS_DONE);
    finish(fb, mn->reg);
}

/* ---- a whole function -------------------------------------------------------------------------
 */

enum { FB_MAX_CODE = 1u << 26 }; /* instructions per function */

static void fb_reset(FB *fb) {
    fb->code.len = fb->locs.len = fb->pool.len = fb->kinds.len = fb->reg_const.len = 0;
    ptrmap_free(&fb->var_reg);
    ptrmap_free(&fb->let_fn);
    fb->trail.len = fb->chg.len = fb->br.len = fb->tasks.len = fb->res.len = fb->side.len = 0;
    for (size_t i = 0; i < fb->memo.len; i++) {
        MemoNode *mn = &fb->memo.data[i];
        mn->reg = mn->flag = BE_NOREG;
        mn->state = MS_NONE;
    }
    fb->redo = false;
}

static void fb_free(FB *fb) {
    vec_free(&fb->code);
    vec_free(&fb->locs);
    vec_free(&fb->pool);
    vec_free(&fb->kinds);
    vec_free(&fb->reg_const);
    ptrmap_free(&fb->var_reg);
    ptrmap_free(&fb->let_fn);
    ptrmap_free(&fb->memo_of);
    vec_free(&fb->memo);
    vec_free(&fb->trail);
    vec_free(&fb->chg);
    vec_free(&fb->br);
    vec_free(&fb->tasks);
    vec_free(&fb->res);
    vec_free(&fb->side);
}

/* The code of a constructor wrapper or of a Primitive literal used as a value. */
static void body_special(FB *fb) {
    BeFunc *f = fb->f;
    Be *be = fb->be;
    if (f->kind == BF_CTOR) {
        Span span = f->ctor->base.span;
        uint32_t *args = sup_malloc(sizeof(uint32_t) * (f->n_params ? f->n_params : 1));
        for (uint32_t i = 0; i < f->n_params; i++)
            args[i] = i;
        uint32_t at = fb_pool(fb, args, f->n_params);
        free(args);
        uint32_t r = fb_reg(fb, VM_RK_VALUE);
        fb_emit(fb,
                (VmInstr){.op = VM_ALLOC_ADT,
                          .dst = r,
                          .a = be_ctor(be, f->ctor),
                          .n = f->n_params,
                          .args = at},
                span);
        fb_emit(fb, (VmInstr){.op = VM_RET, .a = r}, span);
        return;
    }
    /* BF_PRIM: call the packed function (or its scalar code) on the parameters. */
    Function *fn = f->fn;
    Span span = fn->base.span;
    uint32_t *args = sup_malloc(sizeof(uint32_t) * (f->n_params ? f->n_params : 1));
    for (uint32_t i = 0; i < f->n_params; i++)
        args[i] = i;
    /* A call node to carry the span and the result type. */
    Call call = {
        .base = {.kind = EXPR_CALL, .span = fn->body->span, .checked_type = fn->body->checked_type},
        .op = &fn->base,
        .n_args = fn->n_params,
        .args = (Expr **)fn->params};
    uint32_t r = be_emit_prim_call(fb, &call, fn, args, f->n_params, BE_NOREG);
    free(args);
    if (r == BE_NOREG) {
        if (!be->failed)
            be_error(be, span,
                     "internal error: a Primitive function used as a value must be a "
                     "dataflow program of operators");
        return;
    }
    emit_ret(fb, r, span);
}

static bool compile_pass(FB *fb) {
    BeFunc *f = fb->f;
    Be *be = fb->be;
    fb_reset(fb);
    for (uint32_t i = 0; i < f->n_params; i++)
        fb_reg(fb, f->param_kind[i]);
    if (f->kind == BF_CTOR || f->kind == BF_PRIM) {
        body_special(fb);
        return !be->failed;
    }
    Span span = f->fn ? f->fn->base.span : f->body->span;
    /* Flags of the shared nodes that need one: false at entry. */
    for (size_t i = 0; i < fb->memo.len; i++) {
        MemoNode *mn = &fb->memo.data[i];
        if (!mn->need_flag) continue;
        mn->flag = fb_reg(fb, VM_RK_BOOL);
        fb_emit(fb, (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_BOOL, .dst = mn->flag, .imm = 0},
                span);
    }
    /* Captured values, unboxed where the body wants a scalar. */
    for (uint32_t i = 0; i < f->n_caps; i++) {
        Var *v = f->caps[i];
        fb_bind_var(fb, v, fb_as_kind(fb, i, kind_of_expr(&v->base), span));
    }
    if (f->fn)
        for (uint32_t i = 0; i < f->fn->n_params; i++)
            fb_bind_var(fb, f->fn->params[i], f->n_caps + i);
    if (f->self != NULL && fb->self_value) { /* the closure itself, rebuilt from its captures */
        uint32_t *caps = sup_malloc(sizeof(uint32_t) * (f->n_caps ? f->n_caps : 1));
        for (uint32_t i = 0; i < f->n_caps; i++)
            caps[i] = i;
        uint32_t at = fb_pool(fb, caps, f->n_caps);
        free(caps);
        uint32_t r = fb_reg(fb, VM_RK_VALUE);
        uint32_t self_idx = (uint32_t)(uintptr_t)ptrmap_get(&be->func_of, f->fn) - 1;
        fb_emit(
            fb,
            (VmInstr){.op = VM_ALLOC_CLOSURE, .dst = r, .a = self_idx, .n = f->n_caps, .args = at},
            span);
        fb_bind_var(fb, f->self, r);
    }
    push_task(fb, f->body, true, BE_NOREG);
    while (fb->tasks.len > 0 && !be->failed) {
        if (fb->code.len > FB_MAX_CODE) {
            be_error(be, span, "%s is too large for the VM compiler (over %u instructions)",
                     f->name, FB_MAX_CODE);
            break;
        }
        if (vec_last(&fb->tasks).kind == T_MEMO)
            step_memo(fb);
        else
            step_expr(fb);
    }
    return !be->failed;
}

bool be_compile_func(Be *be, BeFunc *f) {
    FB fb = {.be = be, .f = f};
    if (f->kind != BF_CTOR && f->kind != BF_PRIM) find_shared(&fb, f->fn ? &f->fn->base : f->body);
    bool ok = compile_pass(&fb);
    if (ok && fb.redo) {
        ok = compile_pass(&fb);
        RLY_CHECK(!ok || !fb.redo, "be_compile_func: flags did not settle");
    }
    if (ok) {
        uint32_t n = (uint32_t)fb.code.len;
        be_insert_kills(&fb.code.data, &fb.locs.data, &n, fb.pool.data, fb.kinds.data,
                        (uint32_t)fb.kinds.len, f->n_params);
        fb.code.len = fb.code.cap = fb.locs.len = fb.locs.cap = n;
        VmFunction *vf = &f->vm;
        vf->name = f->name;
        vf->n_params = f->n_params;
        vf->n_captured = f->n_caps;
        vf->n_regs = (uint32_t)fb.kinds.len;
        vf->reg_kind = be_dup(be, fb.kinds.data, fb.kinds.len, 1);
        vf->result_kind = f->result_kind;
        vf->n_code = (uint32_t)fb.code.len;
        vf->code = be_dup(be, fb.code.data, fb.code.len, sizeof(VmInstr));
        vf->n_pool = (uint32_t)fb.pool.len;
        vf->pool = be_dup(be, fb.pool.data, fb.pool.len, sizeof(uint32_t));
        vf->loc = be_dup(be, fb.locs.data, fb.locs.len, sizeof(uint32_t));
        f->compiled = true;
    }
    fb_free(&fb);
    return ok;
}
