/* vm.c - the VM's run loop (vm.h, "running"): a register machine over a validated, bound
 * executable.
 *
 * State: one heap stack of registers (each active function owns n_regs consecutive slots
 * from its base) and one heap stack of frames (what a return goes back to), so recursion is
 * bounded by memory and RtLimits, never by the C stack. A tail call reuses its frame.
 *
 * At vm_new each instruction gets an extended opcode (Xop): the VM opcode split by the kinds
 * it meets (a move of a value or of a scalar, an if on a bool register or a boxed bool) and,
 * for the hottest VM_SCALAR forms (int32/int64/float32/float64 arithmetic and comparisons),
 * one opcode per operation and kind, so that the dispatch (computed goto under GNU C, a switch
 * elsewhere) lands directly on the code. Other scalar forms call vm_scalar_exec.
 *
 * Invariants the loop keeps (and unwinding relies on): a VALUE register holds an owned
 * reference or NULL; every active function's VALUE registers are its own (released when it
 * returns, by a tail call or at unwinding); scalar registers own nothing. The validator has
 * checked every index and static kind; what only run time knows (a value's kind, a field
 * index, a NULL register, a closure's arity) is checked here, so a hostile executable is an
 * error, never a crash. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "kernels/fast/fused.h"
#include "kernels/fast/gemm.h"
#include "runtime/probe.h"
#include "runtime/vm_impl.h"

/* ---- extended opcodes ------------------------------------------------------------------------ */

#define HOT_INT_OPS(X, K)                                                                          \
    X(K##_ADD) X(K##_SUB) X(K##_MUL) X(K##_EQ) X(K##_NE) X(K##_LT) X(K##_LE) X(K##_GT) X(K##_GE)
#define HOT_FLOAT_OPS(X, K) HOT_INT_OPS(X, K) X(K##_DIV)

/* One opcode handler a line; clang-format reflows this list differently on each run. */
/* clang-format off */
#define XOPS(X) \
    X(MOVE_V) \
    X(MOVE_S) \
    X(RET) \
    X(INVOKE) \
    X(INVOKE_TAIL) \
    X(INVOKE_CLOSURE) \
    X(INVOKE_PACKED) \
    X(INVOKE_PAIR) \
    X(INVOKE_PAIRED) \
    X(ALLOC_ADT) \
    X(ALLOC_TUPLE) \
    X(ALLOC_CLOSURE) \
    X(GET_FIELD) \
    X(GET_TAG) \
    X(IF_B) \
    X(IF_V) \
    X(GOTO) \
    X(LOAD_CONST) \
    X(LOAD_IMM_I) \
    X(LOAD_IMM_F32) \
    X(LOAD_IMM_F64) \
    X(SHAPE_OF) \
    X(RESHAPE) \
    X(KILL_V) \
    X(NOP) \
    X(FATAL) \
    X(REF_NEW) \
    X(REF_READ) \
    X(REF_WRITE) \
    X(BOX) \
    X(UNBOX) \
    X(SCALAR) \
    HOT_INT_OPS(X, I32) \
    HOT_INT_OPS(X, I64) \
    HOT_FLOAT_OPS(X, F32) \
    HOT_FLOAT_OPS(X, F64)
/* clang-format on */

enum {
#define X(name) X_##name,
    XOPS(X)
#undef X
        X_COUNT
};

/* The hot scalar opcode of (sub, rk), or X_SCALAR. */
static uint16_t hot_scalar(uint8_t sub, uint8_t rk) {
    static const uint8_t order[] = {VM_SC_ADD, VM_SC_SUB, VM_SC_MUL, VM_SC_EQ, VM_SC_NE,
                                    VM_SC_LT,  VM_SC_LE,  VM_SC_GT,  VM_SC_GE, VM_SC_DIV};
    uint16_t base;
    unsigned n = 9;
    switch (rk) {
    case VM_RK_I32: base = X_I32_ADD; break;
    case VM_RK_I64: base = X_I64_ADD; break;
    case VM_RK_F32: base = X_F32_ADD, n = 10; break;
    case VM_RK_F64: base = X_F64_ADD, n = 10; break;
    default: return X_SCALAR;
    }
    for (unsigned i = 0; i < n; i++)
        if (order[i] == sub) return (uint16_t)(base + i);
    return X_SCALAR;
}

static uint16_t xop_of(const VmFunction *f, const VmInstr *in) {
    switch (in->op) {
    case VM_MOVE: return f->reg_kind[in->a] == VM_RK_VALUE ? X_MOVE_V : X_MOVE_S;
    case VM_RET: return X_RET;
    case VM_INVOKE: return (in->flags & VM_F_TAIL) ? X_INVOKE_TAIL : X_INVOKE;
    case VM_INVOKE_CLOSURE: return X_INVOKE_CLOSURE;
    case VM_INVOKE_PACKED: return X_INVOKE_PACKED;
    case VM_ALLOC_ADT: return X_ALLOC_ADT;
    case VM_ALLOC_TUPLE: return X_ALLOC_TUPLE;
    case VM_ALLOC_CLOSURE: return X_ALLOC_CLOSURE;
    case VM_GET_FIELD: return X_GET_FIELD;
    case VM_GET_TAG: return X_GET_TAG;
    case VM_IF: return f->reg_kind[in->a] == VM_RK_BOOL ? X_IF_B : X_IF_V;
    case VM_GOTO: return X_GOTO;
    case VM_LOAD_CONST: return X_LOAD_CONST;
    case VM_LOAD_IMM:
        return in->rk == VM_RK_F32   ? X_LOAD_IMM_F32
               : in->rk == VM_RK_F64 ? X_LOAD_IMM_F64
                                     : X_LOAD_IMM_I;
    case VM_SHAPE_OF: return X_SHAPE_OF;
    case VM_RESHAPE_TENSOR: return X_RESHAPE;
    case VM_KILL: return f->reg_kind[in->a] == VM_RK_VALUE ? X_KILL_V : X_NOP;
    case VM_FATAL: return X_FATAL;
    case VM_REF_NEW: return X_REF_NEW;
    case VM_REF_READ: return X_REF_READ;
    case VM_REF_WRITE: return X_REF_WRITE;
    case VM_BOX: return X_BOX;
    case VM_UNBOX: return X_UNBOX;
    case VM_SCALAR: return hot_scalar(in->sub, in->rk);
    default: RLY_UNREACHABLE(); /* the validator refuses the rest */
    }
}

/* ---- the machine ----------------------------------------------------------------------------- */

/* A planned function's buffers (vm.h, "memory plans"): made at its first activation, kept
 * for the Vm's life. `active` says whether the running activation uses them: at entry every
 * buffer must be free (held by nothing but this table), else that activation allocates as an
 * unplanned one would (a result of the previous run still held, a hostile file's recursion). */
typedef struct FnPlan {
    RtStorage *arena;
    RtTensor **buf;    /* n_bufs headers, one reference each held here */
    uint32_t *site_at; /* n_code: the first slot of the site at pc, or UINT32_MAX */
    bool active;
} FnPlan;

typedef struct FnInfo {
    uint16_t *xop;   /* n_code extended opcodes */
    uint32_t *vregs; /* the VALUE registers */
    uint32_t n_vregs;
    FnPlan *plan;   /* NULL: the function has no plan */
    VmPair **pairs; /* vm_pair_analyze's (X_INVOKE_PAIR at pc i, X_INVOKE_PAIRED at its j) */
} FnInfo;

/* A packed function's plan: after node k, release the values rel[rel_start[k] ..
 * rel_start[k+1]) (their last use); inputs are borrowed and the result is kept. */
typedef struct PackedInfo {
    uint32_t *rel_start;
    uint32_t *rel;
    VmFuse *fuse; /* run as a fused program (vm_fuse.c), or NULL */
    VmCell *cell; /* run as an LSTM or GRU cell kernel (vm_cell.c), or NULL */
} PackedInfo;

/* What a return goes back to. */
typedef struct Frame {
    uint32_t fn;      /* the caller's function index; UINT32_MAX: the host (vm_invoke) */
    uint32_t pc;      /* the caller's next instruction */
    uint32_t base;    /* the caller's first register */
    uint32_t dst;     /* the caller's register for the result */
    uint8_t dst_kind; /* its kind: a return converts to it */
} Frame;

#define HOST UINT32_MAX

enum { POLL_TICKS = 1024 }; /* calls, jumps and kernels between polls of time and memory */

struct Vm {
    const VmExec *exe;
    FnInfo *fi;
    PackedInfo *pi;
    VmReg *regs;
    size_t regs_cap;
    Vec(Frame) frames;
    VmReg *targs;  /* a call's arguments in transit (max params) */
    Value **pvals; /* a packed function's values (max over packed) */
    /* kernel call scratch, reused by every call */
    Vec(const DLTensor *) k_in;
    Vec(uint32_t) k_start, k_len;
    Vec(uint8_t) k_tuple;
    Vec(uint8_t) k_const; /* KCall.in_const */
    SupPool *pool;        /* the kernels' threads (vm_set_pool); NULL: this thread */
    KPrepCache *prep_run; /* what kernels derive from this run's inputs (cleared after a run) */
    DLTensor **k_out;
    RtTensor **k_outv;
    RtTensor **k_pre; /* a call's planned outputs (max_out) */
    uint32_t max_out;
    /* The kernels' scratch workspace (KCall.ws), lent to every call in turn: after a call that
     * needed more (KCall.scratch_need), it grows to that, so a static-shaped function takes no
     * scratch malloc after its first run. 64-byte aligned; ws_cap bytes. */
    uint8_t *ws;
    size_t ws_cap;
    RtHeap heap;
    RtLimits limits;
    RtMemAccount mem;
    uint64_t depth; /* non-tail frames active */
    uint64_t deadline_ns;
    bool running;
    char *err;
    size_t err_cap;
    /* probes (vm_set_probe; probe.h): INVOKE_PACKED takes probe_packed when either is on */
    RtProfile *prof;
    bool check_numerics;
    StrBuf probe_sb[2]; /* probe_record's scratch */
    /* the pool call at pair_pc of the function whose code is pair_code was computed by its pair
     * (X_INVOKE_PAIR): X_INVOKE_PAIRED steps over it */
    const VmInstr *pair_code;
    uint32_t pair_pc;
    bool pair_declined; /* run_pair's NOT_FUSED came from the kernel */
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *fn_name(const VmFunction *f) { return f->name ? f->name : "?"; }

/* The location string of instruction pc of f ("" for none). */
static const char *loc_of(const Vm *vm, const VmFunction *f, uint32_t pc) {
    if (f == NULL || f->loc == NULL) return "";
    return vm->exe->strs[f->loc[pc]];
}

/* Write "LOC: error: MESSAGE" (or "error: MESSAGE") into the run's error buffer. */
static void fail_loc(Vm *vm, const char *loc, const char *fmt, ...) RLY_PRINTF(3, 4);
static void fail_loc(Vm *vm, const char *loc, const char *fmt, ...) {
    int n = loc[0] ? snprintf(vm->err, vm->err_cap, "%s: error: ", loc)
                   : snprintf(vm->err, vm->err_cap, "error: ");
    if (n < 0 || (size_t)n >= vm->err_cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(vm->err + n, vm->err_cap - (size_t)n, fmt, ap);
    va_end(ap);
}

/* A limit's note, after its error: where the program is. */
static void note_where(Vm *vm, const char *loc, const VmFunction *f) {
    size_t n = strlen(vm->err);
    if (n + 1 >= vm->err_cap) return;
    if (loc[0])
        snprintf(vm->err + n, vm->err_cap - n, "\n%s: note: while running @%s (call depth %llu)",
                 loc, fn_name(f), (unsigned long long)vm->depth);
    else
        snprintf(vm->err + n, vm->err_cap - n, "\nnote: while running @%s (call depth %llu)",
                 fn_name(f), (unsigned long long)vm->depth);
}

static uint64_t stack_bytes(const Vm *vm) {
    return (uint64_t)vm->regs_cap * sizeof(VmReg) + (uint64_t)vm->frames.cap * sizeof(Frame);
}

/* Time and memory; false (error written) when a limit is passed. */
static bool poll_limits(Vm *vm, const VmFunction *f, uint32_t pc) {
    if (vm->deadline_ns != 0 && now_ns() >= vm->deadline_ns) {
        fail_loc(vm, loc_of(vm, f, pc), "time limit of %g s exceeded (--timeout)",
                 vm->limits.timeout);
        note_where(vm, loc_of(vm, f, pc), f);
        return false;
    }
    uint64_t used = vm->mem.live + stack_bytes(vm);
    if (vm->limits.max_memory != 0 && used > vm->limits.max_memory) {
        fail_loc(vm, loc_of(vm, f, pc),
                 "memory limit of %llu bytes exceeded (--max-memory): %llu bytes in use",
                 (unsigned long long)vm->limits.max_memory, (unsigned long long)used);
        note_where(vm, loc_of(vm, f, pc), f);
        return false;
    }
    return true;
}

/* Room for registers [0, need). */
static void ensure_regs(Vm *vm, size_t need) {
    if (need <= vm->regs_cap) return;
    size_t cap = vm->regs_cap ? vm->regs_cap : 256;
    while (cap < need)
        cap *= 2;
    vm->regs = sup_realloc(vm->regs, sup_mul(cap, sizeof(VmReg)));
    vm->regs_cap = cap;
}

static void release_vregs(const FnInfo *fi, VmReg *R) {
    for (uint32_t i = 0; i < fi->n_vregs; i++) {
        rt_release(R[fi->vregs[i]].v);
        R[fi->vregs[i]].v = NULL;
    }
}

static void clear_vregs(const FnInfo *fi, VmReg *R) {
    for (uint32_t i = 0; i < fi->n_vregs; i++)
        R[fi->vregs[i]].v = NULL;
}

/* Store an owned value into VALUE register r (releasing what it held). */
static inline void set_v(VmReg *R, uint32_t r, Value *v) {
    Value *old = R[r].v;
    R[r].v = v;
    rt_release(old);
}

static inline Value *retain_opt(Value *v) { return v ? rt_retain(v) : NULL; }

/* A register of kind `from` (borrowed) as kind `to`, owned. false with the message in buf. */
static bool convert(uint8_t from, uint8_t to, VmReg v, VmReg *out, char *buf, size_t cap) {
    if (from == to) {
        *out = v;
        if (to == VM_RK_VALUE) out->v = retain_opt(v.v);
        return true;
    }
    if (to == VM_RK_VALUE) {
        out->v = vm_box(from, v, buf, cap);
        return out->v != NULL;
    }
    if (from == VM_RK_VALUE) return vm_unbox(to, v.v, out, buf, cap);
    snprintf(buf, cap, "internal error: a %s scalar where a %s one is needed",
             sup_dtype_name(vm_rk_dtype(from)), sup_dtype_name(vm_rk_dtype(to)));
    return false;
}

/* ---- packed functions ------------------------------------------------------------------------ */

static int alloc_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    Vm *vm = kc->rt;
    RtTensor *t = rt_tensor_new(dt, ndim, shape, kc->err, kc->err_cap);
    if (t == NULL) return -1;
    vm->k_outv[i] = t;
    kc->out[i] = &t->t;
    return 0;
}

/* KCall.in_const of a tensor: 1 for a constant of the executable, 2 for an input of this run. */
static uint8_t const_kind(const Value *v) {
    return (v->flags & RT_VF_CONST) ? 1 : (v->flags & RT_VF_INPUT) ? 2 : 0;
}

/* Flatten argument value v (a tensor or a tuple of tensors) into the kernel call arrays. */
static bool flatten(Vm *vm, const Value *v, char *why, size_t cap, uint32_t a) {
    vec_push(&vm->k_start, (uint32_t)vm->k_in.len);
    if (v != NULL && v->kind == VAL_TENSOR) {
        vec_push(&vm->k_in, &RT_TENSOR(v)->t);
        vec_push(&vm->k_const, const_kind(v));
        vec_push(&vm->k_len, 1u);
        vec_push(&vm->k_tuple, (uint8_t)0);
        return true;
    }
    if (v != NULL && v->kind == VAL_TUPLE) {
        const RtTuple *tu = RT_TUPLE(v);
        for (uint32_t j = 0; j < tu->n; j++) {
            if (tu->f[j] == NULL || tu->f[j]->kind != VAL_TENSOR) {
                snprintf(why, cap, "argument %u field %u is not a tensor", a, j);
                return false;
            }
            vec_push(&vm->k_in, &RT_TENSOR(tu->f[j])->t);
            vec_push(&vm->k_const, const_kind(tu->f[j]));
        }
        vec_push(&vm->k_len, tu->n);
        vec_push(&vm->k_tuple, (uint8_t)1);
        return true;
    }
    snprintf(why, cap, "argument %u is not a tensor or a tuple of tensors", a);
    return false;
}

/* Kernels trust the argument structure the types promise (a tensor where a tensor is due,
 * as many arguments as the operator takes). An executable from a file carries no types for
 * them, so every call's argument arrays continue past n_args and n_in with ARG_PAD entries
 * that name `pad_tensor`, an empty-looking 0-d tensor whose shape reads as zeros at any rank:
 * a kernel reading an argument that is not there (an empty tuple where a tensor is due, a
 * missing operand) reads that instead of memory past the arrays. ARG_PAD covers the highest
 * fixed argument index of any kernel (7). */
enum { ARG_PAD = 8 };
static int64_t pad_dims[K_MAX_DIMS];
static _Alignas(64) uint8_t pad_data[64];
static const DLTensor pad_tensor = {.data = pad_data,
                                    .device = {kDLCPU, 0},
                                    .ndim = 0,
                                    .dtype = {kDLFloat, 32, 1},
                                    .shape = pad_dims};

/* What run_fused (a program that does not fit) and run_call (a kernel that declines,
 * K_DECLINED) return when they did nothing. */
static Value not_fused_tag;
#define NOT_FUSED (&not_fused_tag)

/* Run one operator node on vals; the result (owned) or NULL with the error written. pre:
 * NULL, or a planned buffer (or NULL) for each output. NOT_FUSED when its kernel declines. */
static Value *run_call(Vm *vm, const VmNode *n, Value **vals, const char *loc, RtTensor *const *pre,
                       const KEpilogue *epi, bool *epi_done) {
    const char *op = sup_op_name(n->op_id);
    if (op == NULL) op = "operator";
    char why[1024];
    vm->k_in.len = vm->k_start.len = vm->k_len.len = vm->k_tuple.len = vm->k_const.len = 0;
    for (uint32_t a = 0; a < n->n_args; a++)
        if (!flatten(vm, vals[n->args[a]], why, sizeof why, a)) {
            fail_loc(vm, loc, "%s: %s", op, why);
            return NULL;
        }
    uint32_t n_in = (uint32_t)vm->k_in.len;
    vec_push(&vm->k_in, &pad_tensor);
    vec_push(&vm->k_const, (uint8_t)0);
    for (uint32_t i = 0; i < ARG_PAD; i++) {
        vec_push(&vm->k_start, n_in);
        vec_push(&vm->k_len, 1u);
        vec_push(&vm->k_tuple, (uint8_t)0);
    }
    uint32_t n_out = n->out_tuple ? n->n_out : 1;
    for (uint32_t i = 0; i < n_out; i++) {
        vm->k_out[i] = NULL;
        vm->k_outv[i] = NULL;
        RtTensor *b = pre ? pre[i] : NULL;
        if (b == NULL) continue;
        vm->k_outv[i] = (RtTensor *)rt_retain(&b->hdr);
        vm->k_out[i] = &b->t;
    }
    why[0] = '\0';
    KCall kc = {
        .op = op,
        .attrs = n->attrs,
        .n_attrs = n->n_attrs,
        .n_args = n->n_args,
        .arg_start = vm->k_start.data,
        .arg_len = vm->k_len.data,
        .arg_tuple = vm->k_tuple.data,
        .in = vm->k_in.data,
        .n_in = n_in,
        .out = vm->k_out,
        .n_out = n_out,
        .out_tuple = n->out_tuple,
        .alloc = alloc_out,
        .rt = vm,
        .err = why,
        .err_cap = sizeof why,
        .ws = vm->ws,
        .ws_cap = vm->ws_cap,
        .pool = vm->pool,
        .in_const = vm->k_const.data,
        .prep = vm->exe->prep,
        .prep_run = vm->prep_run,
        .epi = epi,
        /* Planned buffers hold stale bytes; kernels may count on zeroed outputs (alloc's
         * contract): k_out zeroes them, except for the in-place kernels (which write every
         * element, and whose output may be their input) and k_out_raw's callers. */
        .out_dirty = pre != NULL && !vm_plan_inplace_ok(n->op_id, 0),
    };
    int rc = k_call_result(&kc, n->fn(&kc));
    if (epi_done != NULL) *epi_done = rc == 0 && kc.epi_done;
    k_call_release(&kc);
    if (rc == K_DECLINED) { /* nothing written: the caller runs what it stands for */
        for (uint32_t i = 0; i < n_out; i++)
            rt_release(vm->k_outv[i] ? &vm->k_outv[i]->hdr : NULL);
        return NOT_FUSED;
    }
    if (kc.scratch_need > vm->ws_cap) { /* grow for the next call; on failure keep falling back */
        uint8_t *ws = sup_alloc_data(64, kc.scratch_need);
        if (ws != NULL) { /* charged to the run's account like any value */
            free(vm->ws);
            rt_mem_credit(vm->ws_cap);
            rt_mem_charge(kc.scratch_need);
            vm->ws = ws;
            vm->ws_cap = kc.scratch_need;
        }
    }
    if (rc != 0) {
        fail_loc(vm, loc, "%s: %s", op, why[0] ? why : "the kernel failed");
        goto free_outs;
    }
    for (uint32_t i = 0; i < n_out; i++)
        if (vm->k_outv[i] == NULL) {
            fail_loc(vm, loc, "%s: internal error: the kernel left result %u unset", op, i);
            goto free_outs;
        }
    if (!n->out_tuple) return &vm->k_outv[0]->hdr;
    RtTuple *tu = rt_tuple_new(n_out);
    for (uint32_t i = 0; i < n_out; i++)
        tu->f[i] = &vm->k_outv[i]->hdr;
    return &tu->hdr;
free_outs:
    for (uint32_t i = 0; i < n_out; i++)
        rt_release(vm->k_outv[i] ? &vm->k_outv[i]->hdr : NULL);
    return NULL;
}

/* The value of operand id of a fused program: a computed value, a constant, or a field of a
 * tuple computed before the run (vm_fuse.c early_field; the run leaves its fields unset). */
static const Value *fused_operand(const Vm *vm, const VmPacked *p, Value *const *vals,
                                  uint32_t id) {
    if (id < p->n_inputs) return vals[id];
    const VmNode *n = &p->nodes[id - p->n_inputs];
    if (n->kind == VM_NODE_CONST) return vm->exe->consts[n->index];
    if (n->kind == VM_NODE_FIELD) {
        const Value *t = vals[n->args[0]];
        if (t == NULL || t->kind != VAL_TUPLE || n->index >= RT_TUPLE(t)->n) return NULL;
        return RT_TUPLE(t)->f[n->index];
    }
    return vals[id];
}

/* The view nodes of a run (vm_fuse.c view_node), made when it starts: tensor headers over their
 * sources' elements. A split's entry is its source; each field of it, its piece. */
typedef struct FuseViews {
    uint32_t n;
    uint32_t node[VM_FUSE_MAX_VIEWS];
    DLTensor t[VM_FUSE_MAX_VIEWS];
    int64_t shape[VM_FUSE_MAX_VIEWS][K_MAX_DIMS];
} FuseViews;

static const KAttr *node_attr(const VmNode *n, const char *name) {
    for (uint32_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].name != NULL && strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

/* The tensor of value id to a run: a view's header, else the value's own (NULL: no tensor). */
static const DLTensor *run_tensor(const Vm *vm, const VmPacked *p, Value *const *vals,
                                  const FuseViews *fv, uint32_t id) {
    if (fv != NULL && id >= p->n_inputs)
        for (uint32_t i = 0; i < fv->n; i++)
            if (fv->node[i] == id - p->n_inputs) return &fv->t[i];
    const Value *v = fused_operand(vm, p, vals, id);
    return v != NULL && v->kind == VAL_TENSOR ? &RT_TENSOR(v)->t : NULL;
}

/* The shape of view node n over x into shape (its rank in *nd); false when it is none (a bad
 * attribute, or a split piece that is not contiguous: the run then does not apply). */
static bool view_shape(const VmNode *n, const DLTensor *x, uint32_t field, uint32_t *nd,
                       int64_t *shape, int64_t *elem_offset) {
    uint32_t r = (uint32_t)x->ndim, o = 0;
    *elem_offset = 0;
    if (n->op_id == OP_ID_SQUEEZE) {
        const KAttr *ax = node_attr(n, "axis");
        bool drop[K_MAX_DIMS] = {0};
        if (ax == NULL || ax->kind == KA_NONE) {
            for (uint32_t i = 0; i < r; i++)
                drop[i] = x->shape[i] == 1;
        } else if (ax->kind == KA_INTS) {
            for (uint32_t j = 0; j < ax->n; j++) {
                int64_t a;
                if (!k_axis(ax->ints[j], r, &a) || x->shape[a] != 1) return false;
                drop[a] = true;
            }
        } else {
            return false;
        }
        for (uint32_t i = 0; i < r; i++)
            if (!drop[i]) shape[o++] = x->shape[i];
    } else if (n->op_id == OP_ID_EXPAND_DIMS) {
        const KAttr *ax = node_attr(n, "axis"), *nn = node_attr(n, "num_newaxis");
        if (ax == NULL || nn == NULL || ax->kind != KA_INT || nn->kind != KA_INT) return false;
        if (ax->i < -(int64_t)r - 1 || ax->i > (int64_t)r || nn->i < 0 ||
            nn->i > K_MAX_DIMS - (int64_t)r)
            return false;
        int64_t pivot = ax->i < 0 ? (int64_t)r + ax->i + 1 : ax->i;
        for (int64_t i = 0; i < pivot; i++)
            shape[o++] = x->shape[i];
        for (int64_t i = 0; i < nn->i; i++)
            shape[o++] = 1;
        for (int64_t i = pivot; i < (int64_t)r; i++)
            shape[o++] = x->shape[i];
    } else { /* OP_ID_SPLIT: piece `field` */
        const KAttr *ax = node_attr(n, "axis"), *is = node_attr(n, "indices_or_sections");
        int64_t axis;
        if (ax == NULL || is == NULL || ax->kind != KA_INT || r == 0 || !k_axis(ax->i, r, &axis))
            return false;
        for (int64_t i = 0; i < axis; i++)
            if (x->shape[i] != 1) return false; /* pieces not contiguous */
        int64_t d = x->shape[axis], lo, hi;
        if (is->kind == KA_INT) {
            if (is->i <= 0 || d % is->i != 0 || field >= (uint64_t)is->i) return false;
            lo = (int64_t)field * (d / is->i);
            hi = lo + d / is->i;
        } else if (is->kind == KA_INTS) {
            if (field > is->n) return false;
            lo = field ? is->ints[field - 1] : 0;
            hi = field < is->n ? is->ints[field] : d;
            if (lo < 0 || hi < lo || hi > d) return false;
        } else {
            return false;
        }
        int64_t inner = k_shape_numel(r - (uint32_t)axis - 1, x->shape + axis + 1);
        for (uint32_t i = 0; i < r; i++)
            shape[o++] = x->shape[i];
        shape[axis] = hi - lo;
        *elem_offset = lo * inner;
    }
    *nd = o;
    return true;
}

/* The views of run fu over vals; false when one cannot be made (the run does not apply). */
static bool make_views(const Vm *vm, const VmPacked *p, const VmFuse *fu, Value *const *vals,
                       FuseViews *fv) {
    fv->n = 0;
    if (fu->n_views == 0) return true;
    for (uint32_t k = fu->start; k < fu->end; k++) {
        const VmNode *n = &p->nodes[k];
        bool field = n->kind == VM_NODE_FIELD;
        if (!field && !vm_fuse_view_op(n)) continue;
        uint32_t a = n->args[0];
        const VmNode *src = a >= p->n_inputs ? &p->nodes[a - p->n_inputs] : NULL;
        bool of_split = field && a >= p->n_inputs + fu->start && src->kind == VM_NODE_CALL;
        if (field && !of_split) continue; /* a field of a tuple value: fused_operand */
        const DLTensor *x = run_tensor(vm, p, vals, fv, a);
        if (x == NULL || fv->n == VM_FUSE_MAX_VIEWS || x->strides != NULL) return false;
        uint32_t i = fv->n;
        DLTensor *t = &fv->t[i];
        *t = *x;
        if (n->kind == VM_NODE_CALL && n->op_id == OP_ID_SPLIT) { /* its fields cut x */
            fv->node[fv->n++] = k;
            continue;
        }
        uint32_t nd;
        int64_t off;
        if (!view_shape(field ? src : n, x, field ? n->index : 0, &nd, fv->shape[i], &off))
            return false;
        t->ndim = (int32_t)nd;
        t->shape = fv->shape[i];
        t->byte_offset += (uint64_t)off * sup_dtype_size(k_dtype(x));
        fv->node[fv->n++] = k;
    }
    return true;
}

/* Whether a planned result buffer b can take a fused program's result: the plan does not see
 * the run (it places the result as the run's last operator's output), so an operand whose last
 * reader is an earlier operator of the run may lie under it. Sharing exactly the same elements
 * is fine (every step reads element i before the result's element i is written); any other
 * overlap makes the run write an operand before reading it. */
/* The bytes [*a0, *a1) of tensor t's elements. */
static void tensor_bytes(const DLTensor *t, const uint8_t **a0, const uint8_t **a1) {
    *a0 = (const uint8_t *)t->data + t->byte_offset;
    *a1 = *a0 + (size_t)k_numel(t) * sup_dtype_size(k_dtype(t));
}

static bool result_buffer_ok(const RtTensor *b, const DLTensor *const *ops, uint32_t n_ops) {
    const uint8_t *o0, *o1, *a0, *a1;
    tensor_bytes(&b->t, &o0, &o1);
    for (uint32_t i = 0; i < n_ops; i++) {
        tensor_bytes(ops[i], &a0, &a1);
        if (a1 <= o0 || o1 <= a0) continue;
        if (a0 != o0 || a1 != o1) return false;
    }
    return true;
}

/* The calls of p from fuse->start on, as one fused program over vals (the values before start
 * computed): the result (owned), NULL with an error, or NOT_FUSED when a tensor does not fit
 * the program (another dtype, a broadcast it does not do), leaving everything as it was. slot:
 * the planned buffers of the calls from start on (NULL: none). */
static Value *run_fused(Vm *vm, const VmPacked *p, const VmFuse *fu, Value **vals,
                        const uint32_t *slot, const FnPlan *fp, const char *loc) {
    const FxProgram *prog = fu->prog;
    const DLTensor *ops[FX_MAX_OPERANDS];
    FuseViews fv;
    if (!make_views(vm, p, fu, vals, &fv)) return NOT_FUSED;
    for (uint32_t i = 0; i < prog->n_operands; i++)
        if ((ops[i] = run_tensor(vm, p, vals, &fv, fu->operand[i])) == NULL) return NOT_FUSED;
    uint32_t nd;
    int64_t shape[K_MAX_DIMS];
    if (!fx_shape(prog, ops, &nd, shape)) return NOT_FUSED;
    RtTensor *out = NULL;
    if (slot != NULL && slot[fu->n_slots - 1] != VM_PLAN_NONE) {
        RtTensor *b = fp->buf[slot[fu->n_slots - 1]];
        if (k_dtype(&b->t) != RLY_DTYPE_F32 || (uint32_t)b->t.ndim != nd ||
            memcmp(b->t.shape, shape, sizeof(int64_t) * nd) != 0)
            return NOT_FUSED; /* the plan's buffer is for another shape: run as usual */
        if (result_buffer_ok(b, ops, prog->n_operands)) out = (RtTensor *)rt_retain(&b->hdr);
    }
    if (out == NULL) {
        char why[256];
        out = rt_tensor_new(RLY_DTYPE_F32, nd, shape, why, sizeof why);
        if (out == NULL) {
            fail_loc(vm, loc, "%s: %s", p->name ? p->name : "fused function", why);
            return NULL;
        }
    }
    fx_run(prog, ops, (float *)rt_tensor_data(out), nd, shape, vm->pool);
    return &out->hdr;
}

/* The tail of a fused group applied by its anchor's kernel as an epilogue (KCall.epi). */
typedef struct VmEpi {
    Vm *vm;
    const VmPacked *p;
    const VmFuse *fu;
    Value **vals;
    const uint32_t *res_slot; /* the result's planned slot, or NULL */
    const FnPlan *fp;
    const char *loc;
    FxBound bound;
    RtTensor *res;      /* the result, made by epi_begin */
    const char *failed; /* an allocation failed in epi_begin (the run fails) */
    char why[256];
    KEpilogue *epi; /* the anchor's view of it (clamp_out set by epi_begin) */
} VmEpi;

/* Whether buffer b overlaps a tensor among vals[ids[0 .. n)]. */
static bool lies_under(const RtTensor *b, Value *const *vals, const uint32_t *ids, uint32_t n) {
    const uint8_t *o0, *o1, *a0, *a1;
    tensor_bytes(&b->t, &o0, &o1);
    for (uint32_t a = 0; a < n; a++) {
        const Value *v = vals[ids[a]];
        if (v == NULL || v->kind != VAL_TENSOR) continue;
        tensor_bytes(&RT_TENSOR(v)->t, &a0, &a1);
        if (a0 < o1 && o0 < a1) return true;
    }
    return false;
}

/* Whether the anchor's kernel reads memory under buffer b: it still reads its arguments while
 * the epilogue writes the result, so b may not overlap any of them, not even exactly. (The plan
 * does not see the epilogue: an argument whose last reader is the anchor may lie under the
 * result's buffer.) */
static bool anchor_reads(const VmEpi *e, const RtTensor *b) {
    const VmNode *n = &e->p->nodes[e->fu->anchor];
    return lies_under(b, e->vals, n->args, n->n_args);
}

/* A tail that is x + b (or b + x), then maybe one relu or clip, x the anchor's result and b a
 * compact float32 tensor of at most its rank broadcast to it: KEpilogue.bias (kernel.h), for a
 * kernel that adds b as it stores (a per-channel bias in registers, where a pass of the program
 * over each finished block read it back; on NCHW16c data, whose bias varies along two merged
 * dims, the program's general path cost more than the convolution). */
static void epi_bias(VmEpi *e, const DLTensor *const *ops, const DLTensor *out0, uint32_t nd,
                     const int64_t *shape) {
    const FxProgram *prog = e->fu->prog;
    KBias *kb = &e->epi->bias;
    uint32_t x_id = e->p->n_inputs + e->fu->anchor, n_ops = prog->n_operands;
    if (prog->n_steps < 1 || prog->n_steps > 3 || prog->step[0].op != FX_ADD ||
        (uint32_t)out0->ndim != nd || memcmp(out0->shape, shape, sizeof(int64_t) * nd) != 0)
        return;
    const FxStep *s0 = &prog->step[0];
    if (s0->a >= n_ops || s0->b >= n_ops || s0->a == s0->b) return;
    bool first = e->fu->operand[s0->b] == x_id;
    if (!first && e->fu->operand[s0->a] != x_id) return;
    uint16_t bi = first ? s0->a : s0->b;
    if (e->fu->operand[bi] == x_id) return;
    /* then maybe a residual (an operand of the result's shape) added to the sum */
    uint32_t at = 1, last = n_ops; /* the next step; the value it continues from */
    const DLTensor *res = NULL;
    bool res_first = false, res_inplace = false;
    if (at < prog->n_steps && prog->step[at].op == FX_ADD) {
        const FxStep *s1 = &prog->step[at];
        res_first = s1->b == last;
        if (!res_first && s1->a != last) return;
        uint16_t ri = res_first ? s1->a : s1->b;
        if (ri >= n_ops || ri == bi || e->fu->operand[ri] == x_id) return;
        res = ops[ri];
        if (res == NULL || k_dtype(res) != RLY_DTYPE_F32 || res->strides != NULL ||
            (uint32_t)res->ndim != nd || memcmp(res->shape, shape, sizeof(int64_t) * nd) != 0 ||
            res->data == NULL)
            return;
        /* the result may take the residual's buffer (the plan's in-place reuse): said, since a
         * kernel that adds the tail by a pass over each stored block would read the residual
         * after its stores overwrote it; any other overlap: no */
        const uint8_t *r0, *r1, *o0, *o1;
        tensor_bytes(res, &r0, &r1);
        tensor_bytes(&e->res->t, &o0, &o1);
        res_inplace = r0 == o0 && r1 == o1;
        if (r0 < o1 && o0 < r1 && !res_inplace) return;
        last = n_ops + at++;
    }
    uint8_t clamp = K_CLAMP_NONE;
    float lo = 0, hi = 0;
    if (at < prog->n_steps) {
        const FxStep *s1 = &prog->step[at++];
        if (s1->a != last || (s1->op != FX_RELU && s1->op != FX_CLIP)) return;
        clamp = s1->op == FX_RELU ? K_CLAMP_RELU : K_CLAMP_CLIP;
        lo = s1->p0, hi = s1->p1;
    }
    if (at != prog->n_steps) return;
    const DLTensor *b = ops[bi];
    if (b == NULL || k_dtype(b) != RLY_DTYPE_F32 || b->strides != NULL || (uint32_t)b->ndim > nd ||
        b->data == NULL)
        return;
    uint32_t mask = 0, lead = nd - (uint32_t)b->ndim;
    for (uint32_t d = 0; d < (uint32_t)b->ndim; d++) {
        if (b->shape[d] == 1) continue;
        if (b->shape[d] != shape[lead + d]) return;
        mask |= 1u << (lead + d);
    }
    int64_t run = 0, n = 0;
    for (uint32_t d = 0; d < nd; d++)
        if (mask == 1u << d) {
            n = shape[d], run = 1;
            for (uint32_t i = d + 1; i < nd; i++)
                run *= shape[i];
        }
    *kb = (KBias){k_ptr(b),  mask,       first, clamp, lo, hi, run, n, res ? k_ptr(res) : NULL,
                  res_first, res_inplace};
    e->epi->clamp_out = (float *)rt_tensor_data(e->res);
}

static int epi_begin(void *ctx, const DLTensor *out0) {
    VmEpi *e = ctx;
    const FxProgram *prog = e->fu->prog;
    const DLTensor *ops[FX_MAX_OPERANDS];
    FuseViews fv;
    if (!make_views(e->vm, e->p, e->fu, e->vals, &fv)) return -1;
    for (uint32_t i = 0; i < prog->n_operands; i++) {
        uint32_t id = e->fu->operand[i];
        if (id == e->p->n_inputs + e->fu->anchor)
            ops[i] = out0;
        else if ((ops[i] = run_tensor(e->vm, e->p, e->vals, &fv, id)) == NULL)
            return -1;
    }
    uint32_t nd;
    int64_t shape[K_MAX_DIMS];
    if (!fx_shape(prog, ops, &nd, shape)) return -1;
    if (e->res_slot != NULL && *e->res_slot != VM_PLAN_NONE) {
        RtTensor *b = e->fp->buf[*e->res_slot];
        if (k_dtype(&b->t) != RLY_DTYPE_F32 || (uint32_t)b->t.ndim != nd ||
            memcmp(b->t.shape, shape, sizeof(int64_t) * nd) != 0)
            return -1;
        if (result_buffer_ok(b, ops, prog->n_operands) && !anchor_reads(e, b))
            e->res = (RtTensor *)rt_retain(&b->hdr);
    }
    if (e->res == NULL) {
        e->res = rt_tensor_new(RLY_DTYPE_F32, nd, shape, e->why, sizeof e->why);
        if (e->res == NULL) {
            e->failed = e->why;
            return -1;
        }
    }
    fx_bind(&e->bound, prog, ops, (float *)rt_tensor_data(e->res), nd, shape);
    if (e->epi->clamp != K_CLAMP_NONE) e->epi->clamp_out = (float *)rt_tensor_data(e->res);
    epi_bias(e, ops, out0, nd, shape);
    return 0;
}

/* A tail that is one relu or clip of the anchor's result: the kernel may apply it as it stores
 * (KEpilogue.clamp), with no pass of the program over the result. */
static void epi_clamp(const VmPacked *p, const VmFuse *fu, KEpilogue *epi) {
    const FxProgram *prog = fu->prog;
    if (prog->n_steps != 1 || prog->step[0].a >= prog->n_operands ||
        fu->operand[prog->step[0].a] != p->n_inputs + fu->anchor)
        return;
    const FxStep *st = &prog->step[0];
    if (st->op == FX_RELU) {
        epi->clamp = K_CLAMP_RELU;
    } else if (st->op == FX_CLIP) {
        epi->clamp = K_CLAMP_CLIP;
        epi->lo = st->p0;
        epi->hi = st->p1;
    }
}

static void epi_apply(void *ctx, int64_t flat0, int64_t n) {
    fx_range(&((VmEpi *)ctx)->bound, flat0, n);
}
static void epi_apply2(void *ctx, int64_t flat0, int64_t rows, int64_t cols, int64_t ld) {
    fx_range2(&((VmEpi *)ctx)->bound, flat0, rows, cols, ld);
}

/* A fused program computed sv, the value of node fu->end - 1, for the nodes from `from` (its
 * start, or its anchor) on: set the values the skipped nodes leave (their constants, sv), run
 * their release lists, and return the node the loop continues after. */
static uint32_t fused_done(Vm *vm, const VmPacked *p, const PackedInfo *pi, uint32_t from,
                           Value *sv, Value **vals) {
    const VmFuse *fu = pi->fuse;
    for (uint32_t k = from; k < fu->end; k++)
        vals[p->n_inputs + k] =
            p->nodes[k].kind == VM_NODE_CONST ? vm->exe->consts[p->nodes[k].index] : NULL;
    vals[p->n_inputs + fu->end - 1] = sv;
    for (uint32_t k = from; k < fu->end; k++)
        for (uint32_t r = pi->rel_start[k]; r < pi->rel_start[k + 1]; r++) {
            rt_release(vals[pi->rel[r]]);
            vals[pi->rel[r]] = NULL;
        }
    return fu->end - 1;
}

/* Packed function p as an LSTM or GRU cell kernel (vm_cell.c): the result (the tuple (h2, c2)
 * or h2), in the planned buffers of those nodes where the plan has them; NULL with an error.
 * The kernels read every input before they write a result, so a planned buffer the plan gave
 * an input's storage (dead after the function in the node-by-node order) is safe. */
static Value *run_cell(Vm *vm, const VmCell *cell, Value **vals, const uint32_t *slot,
                       const FnPlan *fp, const char *loc) {
    /* one step: the cell kernels, (h2, c2) or h2; a run of steps: the sequence kernels, the
     * function's result tuple */
    bool run = cell->steps != 0;
    uint32_t n_out = run ? cell->n_res : cell->gru ? 1 : 2;
    const uint32_t one[2] = {cell->h2_slot, cell->c2_slot};
    const uint32_t *outs = run ? cell->res_slot : one;
    RtTensor **pre = NULL;
    if (slot != NULL) {
        pre = vm->k_pre; /* max_out entries: a cell's split has 3 or 4, a run n_res */
        for (uint32_t i = 0; i < n_out; i++) {
            uint32_t b = slot[outs[i]];
            pre[i] = b == VM_PLAN_NONE ? NULL : fp->buf[b];
        }
    }
    KAttr attrs[2] = {{.name = "gates",
                       .kind = KA_INTS,
                       .n = cell->gru ? 3 : 4,
                       .ints = cell->gates,
                       .floats = cell->gates_f},
                      {.name = "steps", .kind = KA_INT, .i = cell->steps, .f = cell->steps}};
    KernelFn fn = run ? (cell->gru ? kern_fast_gru_seq : kern_fast_lstm_seq)
                      : (cell->gru ? kern_fast_gru_cell : kern_fast_lstm_cell);
    VmNode call = {.kind = VM_NODE_CALL,
                   .op_id = UINT32_MAX,
                   .n_args = run ? cell->n_args : cell->n_in,
                   .args = run ? cell->args : cell->in,
                   .n_attrs = run ? 2 : 1,
                   .attrs = attrs,
                   .fn = fn,
                   .out_tuple = run || !cell->gru,
                   .n_out = n_out};
    return run_call(vm, &call, vals, loc, pre, NULL, NULL);
}

/* Pair pr (vm_pair.c) on its convolution call's argument registers: the pool call's result
 * (owned), in that call's planned buffer when it has one; NULL with an error; NOT_FUSED when the
 * kernel declines or the planned buffer lies over the input (the plan lets the pool's result
 * reuse memory the convolution has finished reading, which the pair still reads). */
static Value *run_pair(Vm *vm, const VmPair *pr, const VmReg *R, const uint32_t *args,
                       const char *loc, const VmFunction *f, const FnPlan *fp) {
    Value **vals = vm->pvals;
    vm->pair_declined = false;
    for (uint32_t i = 0; i < 3; i++)
        vals[i] = R[args[i]].v;
    RtTensor **pre = NULL;
    if (fp != NULL && fp->active && fp->site_at[pr->j] != UINT32_MAX) {
        uint32_t b = f->plan->slots[fp->site_at[pr->j]];
        if (b != VM_PLAN_NONE) {
            if (lies_under(fp->buf[b], vals, pr->args, 3)) return NOT_FUSED;
            pre = vm->k_pre;
            pre[0] = fp->buf[b];
        }
    }
    Value *v = run_call(vm, &pr->node, vals, loc, pre, NULL, NULL);
    vm->pair_declined = v == NOT_FUSED; /* by the kernel (not the plan's buffer) */
    return v;
}

/* Run packed function p on the argument registers; the result (owned) or NULL (error
 * written, at the node's location or else the instruction's). */
static Value *run_packed(Vm *vm, uint32_t pidx, const VmReg *R, const uint32_t *args,
                         const char *iloc, const VmFunction *f, uint32_t pc, const FnPlan *fp) {
    const VmPacked *p = &vm->exe->packed[pidx];
    const PackedInfo *pi = &vm->pi[pidx];
    /* the planned buffers of this site's outputs, in node order */
    const uint32_t *slot = NULL;
    if (fp != NULL && fp->active && fp->site_at[pc] != UINT32_MAX)
        slot = f->plan->slots + fp->site_at[pc];
    Value **vals = vm->pvals;
    for (uint32_t i = 0; i < p->n_inputs; i++)
        vals[i] = R[args[i]].v;
    if (pi->cell != NULL) return run_cell(vm, pi->cell, vals, slot, fp, iloc);
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        const VmNode *n = &p->nodes[k];
        uint32_t id = p->n_inputs + k;
        const char *loc = n->loc ? vm->exe->strs[n->loc] : iloc;
        Value *v = NULL;
        const VmFuse *fu = pi->fuse;
        if (fu != NULL && k == fu->start) {
            /* nodes start .. end - 1 as one fused program, when the tensors fit */
            Value *sv = run_fused(vm, p, fu, vals, slot, fp, loc);
            if (sv == NULL) {
                for (uint32_t j = p->n_inputs; j < id; j++)
                    rt_release(vals[j]);
                return NULL;
            }
            if (sv != NOT_FUSED) {
                if (slot != NULL) slot += fu->n_slots;
                k = fused_done(vm, p, pi, k, sv, vals);
                continue;
            }
        }
        switch (n->kind) {
        case VM_NODE_CALL: {
            RtTensor **pre = NULL;
            if (slot != NULL) {
                uint32_t n_out = n->out_tuple ? n->n_out : 1;
                pre = vm->k_pre;
                for (uint32_t o = 0; o < n_out; o++, slot++)
                    pre[o] = *slot == VM_PLAN_NONE ? NULL : fp->buf[*slot];
            }
            if (fu != NULL && k == fu->anchor) { /* the program as the anchor's epilogue */
                /* fields set one by one: an initializer would zero the 25 KB FxBound (fx_bind
                 * fills what it reads) on every call */
                VmEpi e;
                e.vm = vm, e.p = p, e.fu = fu, e.vals = vals, e.fp = fp, e.loc = loc;
                e.res_slot = NULL, e.res = NULL, e.failed = NULL, e.why[0] = '\0';
                if (pre != NULL) e.res_slot = slot + fu->n_slots - 1; /* slot: past the anchor's */
                KEpilogue epi = {epi_begin, epi_apply, epi_apply2, &e, K_CLAMP_NONE,
                                 0,         0,         NULL,       {0}};
                epi_clamp(p, fu, &epi);
                e.epi = &epi;
                bool done = false;
                v = run_call(vm, n, vals, loc, pre, &epi, &done);
                if (v != NULL && done) {
                    rt_release(v); /* the anchor's own value: only the program read it */
                    if (slot != NULL) slot += fu->n_slots;
                    k = fused_done(vm, p, pi, k, &e.res->hdr, vals);
                    continue;
                }
                if (e.res != NULL) rt_release(&e.res->hdr);
                if (e.failed != NULL) {
                    rt_release(v);
                    fail_loc(vm, loc, "%s", e.failed);
                    v = NULL;
                }
                break;
            }
            v = run_call(vm, n, vals, loc, pre, NULL, NULL);
            break;
        }
        case VM_NODE_CONST: v = vm->exe->consts[n->index]; break; /* immortal */
        case VM_NODE_TUPLE: {
            RtTuple *tu = rt_tuple_new(n->n_args);
            for (uint32_t i = 0; i < n->n_args; i++)
                tu->f[i] = retain_opt(vals[n->args[i]]);
            v = &tu->hdr;
            for (uint32_t i = 0; i < n->n_args; i++)
                if (tu->f[i] == NULL) {
                    rt_release(v);
                    v = NULL;
                    fail_loc(vm, loc, "internal error: a tuple field has no value");
                    break;
                }
            break;
        }
        case VM_NODE_FIELD: {
            const Value *t = vals[n->args[0]];
            if (t == NULL || t->kind != VAL_TUPLE || n->index >= RT_TUPLE(t)->n)
                fail_loc(vm, loc,
                         "internal error: field %u of a value that is not a tuple of "
                         "as many fields",
                         n->index);
            else
                v = retain_opt(RT_TUPLE(t)->f[n->index]);
            break;
        }
        default: RLY_UNREACHABLE();
        }
        if (v == NULL) { /* release the node values still alive */
            for (uint32_t j = p->n_inputs; j < id; j++)
                rt_release(vals[j]);
            return NULL;
        }
        vals[id] = v;
        for (uint32_t r = pi->rel_start[k]; r < pi->rel_start[k + 1]; r++) {
            rt_release(vals[pi->rel[r]]);
            vals[pi->rel[r]] = NULL;
        }
        if (vm->deadline_ns != 0 && k + 1 < p->n_nodes && !poll_limits(vm, f, pc)) {
            for (uint32_t j = p->n_inputs; j <= id; j++)
                rt_release(vals[j]);
            return NULL;
        }
    }
    Value *res = vals[p->result];
    if (p->result < p->n_inputs) res = retain_opt(res);
    if (res == NULL)
        fail_loc(vm, iloc, "internal error: packed function %s has no result",
                 p->name ? p->name : "?");
    return res;
}

/* ---- probes (vm_set_probe; runtime/probe.h) ---------------------------------------------------
 * Off, they cost one test per INVOKE_PACKED. On: PROFILE times each packed call; NUMERICS checks
 * each packed call's result and, when it holds a NaN or an infinity that its inputs did not,
 * runs the group's nodes again one by one on the reference kernels to find the first node that
 * made one from finite arguments (the culprit). Memory plans are off under NUMERICS (activate),
 * so no input has been overwritten in place when the nodes run again. */

/* The profile event of a packed call: its name, the category (a fused group of several
 * operators, one operator, or an LSTM or GRU cell or run of steps that the cell kernels ran),
 * the location and the shapes of its inputs and result. */
static void probe_record(Vm *vm, const VmPacked *p, const VmCell *cell, const VmReg *R,
                         const uint32_t *args, const char *loc, const Value *res, uint64_t t0,
                         uint64_t t1) {
    StrBuf *sb = &vm->probe_sb[0], *shapes = &vm->probe_sb[1];
    sb->len = shapes->len = 0;
    if (loc[0]) rt_profile_arg(sb, "loc", loc);
    for (uint32_t i = 0; i < p->n_inputs; i++) {
        if (i) sb_puts(shapes, ", ");
        rt_value_shape_text(R[args[i]].v, shapes);
    }
    rt_profile_arg(sb, "inputs", sb_cstr(shapes));
    shapes->len = 0;
    rt_value_shape_text(res, shapes);
    rt_profile_arg(sb, "output", sb_cstr(shapes));
    uint32_t n_calls = 0;
    for (uint32_t k = 0; k < p->n_nodes; k++)
        n_calls += p->nodes[k].kind == VM_NODE_CALL;
    const char *name = p->name ? p->name : "packed";
    const char *cat = n_calls > 1 ? "fused group" : "operator";
    if (cell != NULL)
        cat = cell->steps ? (cell->gru ? "GRU run" : "LSTM run")
                          : (cell->gru ? "GRU cell" : "LSTM cell");
    RtProfile *pr = vm->prof;
    uint32_t nid = rt_profile_intern(pr, name, strlen(name)),
             cid = rt_profile_intern(pr, cat, strlen(cat)),
             aid = rt_profile_intern(pr, sb->data, sb->len);
    rt_profile_add(pr, nid, cid, aid, t0, t1);
    /* what the pool's workers did for it: their own tracks */
    SupSpan sp[64];
    for (size_t n; (n = sup_pool_take_spans(vm->pool, sp, 64)) > 0;)
        for (size_t i = 0; i < n; i++)
            rt_profile_add_worker(pr, nid, cid, aid, sp[i].worker, (uint64_t)sp[i].t0,
                                  (uint64_t)sp[i].t1);
}

/* The nodes of packed function p run again one by one, on the reference kernels (ref) or on
 * their bound kernels. Returns the first call node whose result holds a NaN or an infinity
 * while its arguments did not, with its report in out; PROBE_NONE when no node did (a fast
 * kernel or the fused program did, or a constant or an input of the group holds one);
 * PROBE_FAILED when a node failed (vm->err written). */
enum { PROBE_NONE = UINT32_MAX, PROBE_FAILED = UINT32_MAX - 1 };
static uint32_t probe_rerun(Vm *vm, const VmPacked *p, const VmReg *R, const uint32_t *args,
                            const char *iloc, bool ref_kernels, StrBuf *out) {
    uint32_t n_vals = p->n_inputs + p->n_nodes, found = PROBE_NONE;
    Value **vals = sup_calloc(n_vals, sizeof *vals);
    for (uint32_t i = 0; i < p->n_inputs; i++)
        vals[i] = R[args[i]].v; /* borrowed */
    for (uint32_t k = 0; k < p->n_nodes && found == PROBE_NONE; k++) {
        const VmNode *n = &p->nodes[k];
        const char *loc = n->loc ? vm->exe->strs[n->loc] : iloc;
        Value *v = NULL;
        if (n->kind == VM_NODE_CONST) {
            v = vm->exe->consts[n->index];
        } else if (n->kind == VM_NODE_CALL) {
            VmNode ref = *n;
            KernelFn fn = ref_kernels ? kern_ref_lookup(n->op_id) : NULL;
            if (fn != NULL) ref.fn = fn;
            v = run_call(vm, &ref, vals, loc, NULL, NULL, NULL);
        } else if (n->kind == VM_NODE_TUPLE) {
            RtTuple *tu = rt_tuple_new(n->n_args);
            for (uint32_t i = 0; i < n->n_args; i++)
                tu->f[i] = retain_opt(vals[n->args[i]]);
            v = &tu->hdr;
        } else if (n->kind == VM_NODE_FIELD) {
            const Value *t = vals[n->args[0]];
            if (t != NULL && t->kind == VAL_TUPLE && n->index < RT_TUPLE(t)->n)
                v = retain_opt(RT_TUPLE(t)->f[n->index]);
        }
        vals[p->n_inputs + k] = v;
        if (v == NULL) {
            if (n->kind == VM_NODE_CALL) found = PROBE_FAILED;
            continue;
        }
        if (n->kind != VM_NODE_CALL || !rt_value_nonfinite(v)) continue;
        bool clean = true;
        for (uint32_t a = 0; a < n->n_args && clean; a++)
            clean = !rt_value_nonfinite(vals[n->args[a]]);
        if (!clean) continue;
        const char *op = sup_op_name(n->op_id);
        sb_printf(out, "%s: error: check-numerics: %s made ", loc[0] ? loc : "<unknown>",
                  op ? op : "operator");
        rt_nonfinite_text(v, out);
        sb_puts(out, " from finite inputs\n");
        for (uint32_t a = 0; a < n->n_args; a++) {
            char label[32];
            snprintf(label, sizeof label, "input %u", a);
            rt_value_stats_text(vals[n->args[a]], "  ", label, out);
        }
        rt_value_stats_text(v, "  ", "result", out);
        found = k;
    }
    for (uint32_t i = p->n_inputs; i < n_vals; i++)
        rt_release(vals[i]);
    free(vals);
    return found;
}

static Value *probe_packed(Vm *vm, uint32_t pidx, const VmReg *R, const uint32_t *args,
                           const char *iloc, const VmFunction *f, uint32_t pc, const FnPlan *fp) {
    const VmPacked *p = &vm->exe->packed[pidx];
    uint64_t t0 = vm->prof ? rt_profile_now() : 0;
    Value *v = run_packed(vm, pidx, R, args, iloc, f, pc, fp);
    if (vm->prof && v != NULL)
        probe_record(vm, p, vm->pi[pidx].cell, R, args, iloc, v, t0, rt_profile_now());
    if (v == NULL || !vm->check_numerics) return v;
    uint32_t n_calls = 0;
    for (uint32_t j = 0; j < p->n_nodes; j++)
        n_calls += p->nodes[j].kind == VM_NODE_CALL;
    bool bad = rt_value_nonfinite(v);
    /* One operator: its result says it all. Several: a NaN made inside may be hidden from the
     * result (relu(NaN) is 0), so the nodes run again one by one and are checked: on the
     * reference kernels when the result shows one, else on the bound kernels (quicker). */
    if (!bad && n_calls < 2) return v;
    StrBuf out = {0};
    uint32_t k = probe_rerun(vm, p, R, args, iloc, bad, &out);
    const char *name = p->name ? p->name : "packed function";
    if (k == PROBE_NONE) {
        bool carried = !bad;
        for (uint32_t i = 0; i < p->n_inputs && !carried; i++)
            carried = rt_value_nonfinite(R[args[i]].v);
        for (uint32_t j = 0; j < p->n_nodes && !carried; j++)
            carried = p->nodes[j].kind == VM_NODE_CONST &&
                      rt_value_nonfinite(vm->exe->consts[p->nodes[j].index]);
        if (carried) { /* no NaN made here, or one carried in by an input or a constant */
            sb_free(&out);
            return v;
        }
        StrBuf in = {0}, what = {0};
        for (uint32_t i = 0; i < p->n_inputs; i++) {
            char label[32];
            snprintf(label, sizeof label, "input %u", i);
            rt_value_stats_text(R[args[i]].v, "  ", label, &in);
        }
        rt_value_stats_text(v, "  ", "result", &in);
        rt_nonfinite_text(v, &what);
        fail_loc(vm, iloc,
                 "check-numerics: %s made %s from finite inputs (its operators run one by one on "
                 "the reference kernels make none: a fast kernel differs)\n%s",
                 name, sb_cstr(&what), sb_cstr(&in));
        sb_free(&in);
        sb_free(&what);
    } else if (k != PROBE_FAILED) { /* PROBE_FAILED: the node's error is in vm->err */
        if (out.len && out.data[out.len - 1] == '\n') out.data[--out.len] = '\0';
        if (n_calls > 1)
            sb_printf(&out, "\n  in fused group %s (node %u of %u), called at %s%s", name, k + 1,
                      p->n_nodes, iloc[0] ? iloc : "<unknown>",
                      bad ? "" : "\n  (the group's result is finite: a later operator hides it)");
        snprintf(vm->err, vm->err_cap, "%s", sb_cstr(&out));
    }
    sb_free(&out);
    rt_release(v);
    return NULL;
}

/* Under NUMERICS: whether VM_SCALAR at pc made a NaN or an infinity r from finite operands
 * (then the error is written). */
static bool scalar_fault(Vm *vm, const VmFunction *f, uint32_t pc, const VmReg *R, VmReg r) {
    const VmInstr *in = &f->code[pc];
    uint8_t dk = f->reg_kind[in->dst];
    if (dk != VM_RK_F32 && dk != VM_RK_F64) return false;
    if (isfinite(dk == VM_RK_F32 ? (double)r.f : r.d)) return false;
    double a = 0, b = 0;
    bool fl = in->rk == VM_RK_F32 || in->rk == VM_RK_F64, unary = vm_scalar_unary(in->sub);
    if (fl) {
        a = in->rk == VM_RK_F32 ? (double)R[in->a].f : R[in->a].d;
        b = unary ? 0 : in->rk == VM_RK_F32 ? (double)R[in->b].f : R[in->b].d;
        if (!isfinite(a) || !isfinite(b)) return false;
    }
    char ops[96] = "";
    if (fl && unary)
        snprintf(ops, sizeof ops, ": operand %.9g", a);
    else if (fl)
        snprintf(ops, sizeof ops, ": operands %.9g and %.9g", a, b);
    fail_loc(vm, loc_of(vm, f, pc),
             "check-numerics: %s made %s from finite operands (a scalar %s)%s",
             vm_scalar_op_name(in->sub), isnan(dk == VM_RK_F32 ? (double)r.f : r.d) ? "NaN" : "Inf",
             dk == VM_RK_F32 ? "float32" : "float64", ops);
    return true;
}

/* The release plan of packed function p (see PackedInfo). */
static void plan_packed(const VmPacked *p, PackedInfo *pi) {
    uint32_t n_vals = p->n_inputs + p->n_nodes;
    uint32_t *last = sup_malloc(sizeof(uint32_t) * (n_vals ? n_vals : 1));
    for (uint32_t v = 0; v < n_vals; v++)
        last[v] = v < p->n_inputs ? UINT32_MAX : v - p->n_inputs; /* unused: at once */
    for (uint32_t k = 0; k < p->n_nodes; k++)
        for (uint32_t i = 0; i < p->nodes[k].n_args; i++) {
            uint32_t v = p->nodes[k].args[i];
            if (v >= p->n_inputs) last[v] = k;
        }
    last[p->result] = UINT32_MAX;
    pi->rel_start = sup_calloc((size_t)p->n_nodes + 1, sizeof(uint32_t));
    for (uint32_t v = p->n_inputs; v < n_vals; v++)
        if (last[v] != UINT32_MAX) pi->rel_start[last[v] + 1]++;
    for (uint32_t k = 0; k < p->n_nodes; k++)
        pi->rel_start[k + 1] += pi->rel_start[k];
    pi->rel = sup_malloc(sizeof(uint32_t) * (pi->rel_start[p->n_nodes] + 1));
    uint32_t *fill = sup_calloc((size_t)p->n_nodes + 1, sizeof(uint32_t));
    for (uint32_t v = p->n_inputs; v < n_vals; v++)
        if (last[v] != UINT32_MAX) pi->rel[pi->rel_start[last[v]] + fill[last[v]]++] = v;
    free(fill);
    free(last);
}

/* ---- memory plans ---------------------------------------------------------------------------- */

/* An activation of planned function fidx begins: make its buffers (first time: the arena,
 * zeroed once, and a header per buffer) and decide whether this activation uses them. */
static void activate(Vm *vm, uint32_t fidx) {
    FnPlan *fp = vm->fi[fidx].plan;
    const VmPlan *pl = vm->exe->funcs[fidx].plan;
    fp->active = false;
    if (vm->check_numerics) return; /* probe: keep inputs intact for the rerun (probe_packed) */
    if (fp->arena == NULL) {
        if (vm->limits.max_memory != 0 && (vm->mem.live > vm->limits.max_memory ||
                                           pl->arena_bytes > vm->limits.max_memory - vm->mem.live))
            return; /* unplanned: the run meets the limit where it allocates */
        fp->arena = rt_storage_new((size_t)pl->arena_bytes);
        if (fp->arena == NULL) return;
        for (uint32_t b = 0; b < pl->n_bufs; b++) {
            const VmPlanBuf *pb = &pl->bufs[b];
            fp->buf[b] = rt_tensor_in(fp->arena, (size_t)pb->offset, (rly_dtype)pb->dtype, pb->ndim,
                                      pb->shape, (size_t)pb->nbytes);
        }
    }
    for (uint32_t b = 0; b < pl->n_bufs; b++)
        if (fp->buf[b]->hdr.rc != 1 || fp->buf[b]->st->rc != 1) return;
    fp->active = true;
}

/* ---- the run loop ---------------------------------------------------------------------------- */

/* Release every register of every active frame down to (and including) the host's callee. */
static void unwind(Vm *vm, uint32_t fidx, uint32_t base) {
    for (;;) {
        release_vregs(&vm->fi[fidx], vm->regs + base);
        Frame fr = vec_pop(&vm->frames);
        if (fr.fn == HOST) break;
        fidx = fr.fn;
        base = fr.base;
    }
    vm->depth = 0;
}

#if defined(__GNUC__) && !defined(RLY_VM_SWITCH)
#define VM_COMPUTED_GOTO 1
#endif
#if defined(__GNUC__)
#define RLY_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RLY_UNLIKELY(x) (x)
#endif

#ifdef VM_COMPUTED_GOTO
#define CASE(x) L_##x:
#define NEXT() goto *labels[xop[pc]]
#else
#define CASE(x) case X_##x:
#define NEXT() goto dispatch
#endif

/* Run from function fidx at pc 0 (its registers at base, arguments in place) until the host
 * frame is returned to. The result (owned, boxed) or NULL with the error written. */
static Value *run(Vm *vm, uint32_t fidx) {
    const VmExec *exe = vm->exe;
    const VmFunction *f = &exe->funcs[fidx];
    const FnInfo *fi = &vm->fi[fidx];
    const VmInstr *code = f->code;
    const uint16_t *xop = fi->xop;
    const uint32_t *pool = f->pool;
    uint32_t base = 0, pc = 0;
    VmReg *R = vm->regs + base;
    uint32_t tick = POLL_TICKS;
    const VmInstr *in;
    Value *result = NULL;
    char buf[1024];

#ifdef VM_COMPUTED_GOTO
    static void *const labels[X_COUNT] = {
#define X(name) [X_##name] = &&L_##name,
        XOPS(X)
#undef X
    };
#endif

/* Enter function g (index gi) whose registers are at base. */
#define ENTER(gi)                                                                                  \
    do {                                                                                           \
        fidx = (gi);                                                                               \
        f = &exe->funcs[fidx];                                                                     \
        fi = &vm->fi[fidx];                                                                        \
        code = f->code;                                                                            \
        xop = fi->xop;                                                                             \
        pool = f->pool;                                                                            \
        pc = 0;                                                                                    \
    } while (0)
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fail_loc(vm, loc_of(vm, f, pc), __VA_ARGS__);                                              \
        goto fail;                                                                                 \
    } while (0)
#define TICK()                                                                                     \
    do {                                                                                           \
        if (RLY_UNLIKELY(--tick == 0)) {                                                           \
            tick = POLL_TICKS;                                                                     \
            if (!poll_limits(vm, f, pc)) goto fail;                                                \
        }                                                                                          \
    } while (0)
#define NEED_V(r, what)                                                                            \
    do {                                                                                           \
        if (R[r].v == NULL) FAIL("internal error: %s register %u has no value", what, r);          \
    } while (0)

#ifdef VM_COMPUTED_GOTO
    NEXT();
#else
dispatch:
    switch (xop[pc]) {
#endif

    CASE(MOVE_V) {
        in = &code[pc];
        set_v(R, in->dst, retain_opt(R[in->a].v));
        pc++;
        NEXT();
    }
    CASE(MOVE_S) {
        in = &code[pc];
        R[in->dst] = R[in->a];
        pc++;
        NEXT();
    }
    CASE(NOP) {
        pc++;
        NEXT();
    }
    CASE(KILL_V) {
        in = &code[pc];
        rt_release(R[in->a].v);
        R[in->a].v = NULL;
        pc++;
        NEXT();
    }
    CASE(LOAD_IMM_I) {
        in = &code[pc];
        R[in->dst].i = in->imm;
        pc++;
        NEXT();
    }
    CASE(LOAD_IMM_F32) {
        in = &code[pc];
        R[in->dst].f = (float)in->fimm;
        pc++;
        NEXT();
    }
    CASE(LOAD_IMM_F64) {
        in = &code[pc];
        R[in->dst].d = in->fimm;
        pc++;
        NEXT();
    }
    CASE(LOAD_CONST) {
        in = &code[pc];
        set_v(R, in->dst, rt_retain(exe->consts[in->a]));
        pc++;
        NEXT();
    }
    CASE(GOTO) {
        TICK();
        pc = code[pc].a;
        NEXT();
    }
    CASE(IF_B) {
        in = &code[pc];
        pc = R[in->a].i ? pc + 1 : in->b;
        NEXT();
    }
    CASE(IF_V) {
        in = &code[pc];
        const Value *c = R[in->a].v;
        if (c == NULL || c->kind != VAL_TENSOR || RT_TENSOR(c)->t.ndim != 0)
            FAIL("internal error: the condition is not a scalar tensor");
        const RtTensor *t = RT_TENSOR(c);
        pc = k_loadi(rt_tensor_data(t), rt_tensor_dtype(t), 0) != 0 ? pc + 1 : in->b;
        NEXT();
    }

    /* -- the hot scalar forms: (int64_t)(int32_t) of a wrapped uint32_t is modulo 2^32 in the
     *    compilers rly supports (GCC, Clang: implementation-defined, documented so) -- */
#define SC_I32(OP, expr)                                                                           \
    CASE(I32_##OP) {                                                                               \
        in = &code[pc];                                                                            \
        uint64_t a = (uint64_t)R[in->a].i, b = (uint64_t)R[in->b].i;                               \
        (void)a, (void)b;                                                                          \
        R[in->dst].i = (expr);                                                                     \
        pc++;                                                                                      \
        NEXT();                                                                                    \
    }
#define SC_I64(OP, expr)                                                                           \
    CASE(I64_##OP) {                                                                               \
        in = &code[pc];                                                                            \
        uint64_t a = (uint64_t)R[in->a].i, b = (uint64_t)R[in->b].i;                               \
        (void)a, (void)b;                                                                          \
        R[in->dst].i = (expr);                                                                     \
        pc++;                                                                                      \
        NEXT();                                                                                    \
    }
#define SC_FLT(K, field, OP, expr)                                                                 \
    CASE(K##_##OP) {                                                                               \
        in = &code[pc];                                                                            \
        double a = (double)R[in->a].field, b = (double)R[in->b].field;                             \
        expr;                                                                                      \
        pc++;                                                                                      \
        NEXT();                                                                                    \
    }
    SC_I32(ADD, (int64_t)(int32_t)(uint32_t)(a + b))
    SC_I32(SUB, (int64_t)(int32_t)(uint32_t)(a - b))
    SC_I32(MUL, (int64_t)(int32_t)(uint32_t)(a * b))
    SC_I32(EQ, R[in->a].i == R[in->b].i)
    SC_I32(NE, R[in->a].i != R[in->b].i)
    SC_I32(LT, R[in->a].i < R[in->b].i)
    SC_I32(LE, R[in->a].i <= R[in->b].i)
    SC_I32(GT, R[in->a].i > R[in->b].i)
    SC_I32(GE, R[in->a].i >= R[in->b].i)
    SC_I64(ADD, (int64_t)(a + b))
    SC_I64(SUB, (int64_t)(a - b))
    SC_I64(MUL, (int64_t)(a * b))
    SC_I64(EQ, R[in->a].i == R[in->b].i)
    SC_I64(NE, R[in->a].i != R[in->b].i)
    SC_I64(LT, R[in->a].i < R[in->b].i)
    SC_I64(LE, R[in->a].i <= R[in->b].i)
    SC_I64(GT, R[in->a].i > R[in->b].i)
    SC_I64(GE, R[in->a].i >= R[in->b].i)
    /* floats: computed in double, rounded once (as the kernels) */
    SC_FLT(F32, f, ADD, R[in->dst].f = (float)(a + b))
    SC_FLT(F32, f, SUB, R[in->dst].f = (float)(a - b))
    SC_FLT(F32, f, MUL, R[in->dst].f = (float)(a * b))
    SC_FLT(F32, f, DIV, R[in->dst].f = (float)(a / b))
    SC_FLT(F32, f, EQ, R[in->dst].i = a == b)
    SC_FLT(F32, f, NE, R[in->dst].i = a != b)
    SC_FLT(F32, f, LT, R[in->dst].i = a < b)
    SC_FLT(F32, f, LE, R[in->dst].i = a <= b)
    SC_FLT(F32, f, GT, R[in->dst].i = a > b)
    SC_FLT(F32, f, GE, R[in->dst].i = a >= b)
    SC_FLT(F64, d, ADD, R[in->dst].d = a + b)
    SC_FLT(F64, d, SUB, R[in->dst].d = a - b)
    SC_FLT(F64, d, MUL, R[in->dst].d = a * b)
    SC_FLT(F64, d, DIV, R[in->dst].d = a / b)
    SC_FLT(F64, d, EQ, R[in->dst].i = a == b)
    SC_FLT(F64, d, NE, R[in->dst].i = a != b)
    SC_FLT(F64, d, LT, R[in->dst].i = a < b)
    SC_FLT(F64, d, LE, R[in->dst].i = a <= b)
    SC_FLT(F64, d, GT, R[in->dst].i = a > b)
    SC_FLT(F64, d, GE, R[in->dst].i = a >= b)
#undef SC_I32
#undef SC_I64
#undef SC_FLT
    CASE(SCALAR) {
        in = &code[pc];
        VmReg r;
        int e = vm_scalar_exec(in->sub, in->rk, f->reg_kind[in->dst], R[in->a], R[in->b], &r);
        if (e != VM_SC_OK) FAIL("%s: %s", vm_scalar_op_name(in->sub), vm_scalar_error(e));
        if (RLY_UNLIKELY(vm->check_numerics) && scalar_fault(vm, f, pc, R, r)) goto fail;
        R[in->dst] = r;
        pc++;
        NEXT();
    }
    CASE(BOX) {
        in = &code[pc];
        Value *v = vm_box(f->reg_kind[in->a], R[in->a], buf, sizeof buf);
        if (v == NULL) FAIL("%s", buf);
        set_v(R, in->dst, v);
        pc++;
        NEXT();
    }
    CASE(UNBOX) {
        in = &code[pc];
        if (!vm_unbox(f->reg_kind[in->dst], R[in->a].v, &R[in->dst], buf, sizeof buf))
            FAIL("%s", buf);
        pc++;
        NEXT();
    }

    /* -- calls -- */
    CASE(INVOKE) {
        in = &code[pc];
        uint32_t gi = in->a;
        const VmFunction *g = &exe->funcs[gi];
        const FnInfo *gf = &vm->fi[gi];
        if (vm->limits.max_depth != 0 && vm->depth >= vm->limits.max_depth) {
            fail_loc(vm, loc_of(vm, f, pc), "call depth limit of %llu exceeded (--max-depth)",
                     (unsigned long long)vm->limits.max_depth);
            note_where(vm, loc_of(vm, f, pc), f);
            goto fail;
        }
        TICK();
        uint32_t nb = base + f->n_regs;
        ensure_regs(vm, (size_t)nb + g->n_regs);
        R = vm->regs + base;
        VmReg *G = vm->regs + nb;
        clear_vregs(gf, G);
        const uint32_t *args = pool + in->args;
        for (uint32_t i = 0; i < in->n; i++) {
            G[i] = R[args[i]];
            if (g->reg_kind[i] == VM_RK_VALUE) G[i].v = retain_opt(G[i].v);
        }
        Frame fr = {fidx, pc + 1, base, in->dst, f->reg_kind[in->dst]};
        vec_push(&vm->frames, fr);
        vm->depth++;
        base = nb;
        R = G;
        ENTER(gi);
        if (fi->plan) activate(vm, gi);
        NEXT();
    }
    CASE(INVOKE_TAIL) {
        in = &code[pc];
        uint32_t gi = in->a;
        TICK();
        const uint32_t *args = pool + in->args;
        VmReg *T = vm->targs;
        if (gi == fidx && fi->n_vregs == 0) { /* a loop on scalars: only the arguments move */
            for (uint32_t i = 0; i < in->n; i++)
                T[i] = R[args[i]];
            for (uint32_t i = 0; i < in->n; i++)
                R[i] = T[i];
            pc = 0;
            NEXT();
        }
        const VmFunction *g = &exe->funcs[gi];
        const FnInfo *gf = &vm->fi[gi];
        for (uint32_t i = 0; i < in->n; i++) {
            T[i] = R[args[i]];
            if (g->reg_kind[i] == VM_RK_VALUE) T[i].v = retain_opt(T[i].v);
        }
        release_vregs(fi, R);
        ensure_regs(vm, (size_t)base + g->n_regs);
        R = vm->regs + base;
        clear_vregs(gf, R);
        for (uint32_t i = 0; i < in->n; i++)
            R[i] = T[i];
        ENTER(gi);
        if (fi->plan) activate(vm, gi);
        NEXT();
    }
    CASE(INVOKE_CLOSURE) {
        in = &code[pc];
        bool tail = (in->flags & VM_F_TAIL) != 0;
        const Value *cv = R[in->a].v;
        if (cv == NULL || cv->kind != VAL_CLOSURE || RT_CLOSURE(cv)->code_kind != VM_CODE_FUNC)
            FAIL("the callee is not a function");
        const RtClosure *clo = RT_CLOSURE(cv);
        const VmFunction *g = clo->code;
        if (g < exe->funcs || g >= exe->funcs + exe->n_funcs)
            FAIL("internal error: a closure of another executable");
        uint32_t gi = (uint32_t)(g - exe->funcs);
        if (clo->n != g->n_captured || (uint64_t)clo->n + in->n != g->n_params)
            FAIL("function of %u parameters called with %u arguments", g->n_params - g->n_captured,
                 in->n);
        if (!tail && vm->limits.max_depth != 0 && vm->depth >= vm->limits.max_depth) {
            fail_loc(vm, loc_of(vm, f, pc), "call depth limit of %llu exceeded (--max-depth)",
                     (unsigned long long)vm->limits.max_depth);
            note_where(vm, loc_of(vm, f, pc), f);
            goto fail;
        }
        TICK();
        /* Gather captured values, then arguments, converted to the callee's kinds. */
        VmReg *T = vm->targs;
        const uint32_t *args = pool + in->args;
        uint32_t got = 0;
        for (; got < g->n_params; got++) {
            bool cap = got < clo->n;
            uint8_t from = cap ? VM_RK_VALUE : f->reg_kind[args[got - clo->n]];
            VmReg v;
            if (cap)
                v.v = clo->env[got];
            else
                v = R[args[got - clo->n]];
            if (from == VM_RK_VALUE && v.v == NULL) {
                snprintf(buf, sizeof buf, "internal error: argument %u has no value", got);
                break;
            }
            if (!convert(from, g->reg_kind[got], v, &T[got], buf, sizeof buf)) break;
        }
        if (got < g->n_params) {
            for (uint32_t i = 0; i < got; i++)
                if (g->reg_kind[i] == VM_RK_VALUE) rt_release(T[i].v);
            FAIL("%s", buf);
        }
        if (tail) {
            release_vregs(fi, R); /* may free the closure: g lives in exe */
            ensure_regs(vm, (size_t)base + g->n_regs);
            R = vm->regs + base;
        } else {
            uint32_t nb = base + f->n_regs;
            ensure_regs(vm, (size_t)nb + g->n_regs);
            R = vm->regs + base;
            Frame fr = {fidx, pc + 1, base, in->dst, f->reg_kind[in->dst]};
            vec_push(&vm->frames, fr);
            vm->depth++;
            base = nb;
            R = vm->regs + base;
        }
        clear_vregs(&vm->fi[gi], R);
        for (uint32_t i = 0; i < g->n_params; i++)
            R[i] = T[i];
        ENTER(gi);
        if (fi->plan) activate(vm, gi);
        NEXT();
    }
    CASE(RET) {
        in = &code[pc];
        Frame *top = &vec_last(&vm->frames);
        uint8_t rk = f->result_kind;
        VmReg v = R[in->a];
        if (rk == VM_RK_VALUE) {
            if (v.v == NULL) FAIL("internal error: the result register %u has no value", in->a);
            R[in->a].v = NULL; /* moved out */
        }
        if (rk != top->dst_kind) {
            VmReg w;
            bool ok = convert(rk, top->dst_kind, v, &w, buf, sizeof buf);
            if (rk == VM_RK_VALUE) rt_release(v.v);
            if (!ok) FAIL("%s", buf);
            v = w;
        }
        release_vregs(fi, R);
        Frame fr = vec_pop(&vm->frames);
        vm->depth--;
        if (fr.fn == HOST) {
            result = v.v;
            goto done;
        }
        base = fr.base;
        R = vm->regs + base;
        ENTER(fr.fn);
        pc = fr.pc;
        if (fr.dst_kind == VM_RK_VALUE)
            set_v(R, fr.dst, v.v);
        else
            R[fr.dst] = v;
        NEXT();
    }
    CASE(INVOKE_PAIR) { /* a convolution's call and its max pool's as one kernel (vm_pair.c) */
        in = &code[pc];
        VmPair *pr = fi->pairs[pc];
        if (RLY_UNLIKELY(vm->check_numerics) || pr->declined) goto invoke_packed; /* as compiled */
        const uint32_t *args = pool + in->args;
        for (uint32_t i = 0; i < in->n; i++)
            NEED_V(args[i], "argument");
        uint64_t t0 = RLY_UNLIKELY(vm->prof != NULL) ? rt_profile_now() : 0;
        Value *v = run_pair(vm, pr, R, args, loc_of(vm, f, pr->j), f, fi->plan);
        if (RLY_UNLIKELY(vm->prof != NULL) && v != NULL && v != NOT_FUSED)
            probe_record(vm, &pr->packed, NULL, R, args, loc_of(vm, f, pc), v, t0,
                         rt_profile_now());
        if (v == NULL) goto fail;
        if (v == NOT_FUSED) {
            pr->declined = vm->pair_declined;
            goto invoke_packed;
        }
        TICK();
        set_v(R, code[pr->j].dst, v);
        vm->pair_code = code;
        vm->pair_pc = pr->j;
        pc++;
        NEXT();
    }
    CASE(INVOKE_PAIRED) { /* the pool's call of a pair: done when its pair ran */
        if (vm->pair_code == code && vm->pair_pc == pc) {
            vm->pair_code = NULL;
            pc++;
            NEXT();
        }
        goto invoke_packed;
    }
    CASE(INVOKE_PACKED) {
    invoke_packed:
        in = &code[pc];
        TICK();
        const uint32_t *args = pool + in->args;
        for (uint32_t i = 0; i < in->n; i++)
            NEED_V(args[i], "argument");
        Value *v = RLY_UNLIKELY(vm->prof || vm->check_numerics)
                       ? probe_packed(vm, in->a, R, args, loc_of(vm, f, pc), f, pc, fi->plan)
                       : run_packed(vm, in->a, R, args, loc_of(vm, f, pc), f, pc, fi->plan);
        if (v == NULL) goto fail;
        set_v(R, in->dst, v);
        pc++;
        NEXT();
    }

    /* -- data -- */
    CASE(ALLOC_TUPLE) {
        in = &code[pc];
        const uint32_t *args = pool + in->args;
        for (uint32_t i = 0; i < in->n; i++)
            NEED_V(args[i], "field");
        RtTuple *t = in->n ? rt_tuple_new(in->n) : NULL;
        for (uint32_t i = 0; i < in->n; i++)
            t->f[i] = rt_retain(R[args[i]].v);
        set_v(R, in->dst, t ? &t->hdr : rt_unit());
        pc++;
        NEXT();
    }
    CASE(ALLOC_ADT) {
        in = &code[pc];
        const uint32_t *args = pool + in->args;
        for (uint32_t i = 0; i < in->n; i++)
            NEED_V(args[i], "field");
        const VmCtor *ct = &exe->ctors[in->a];
        RtAdt *t = rt_adt_new(ct->tag, ct, in->n);
        for (uint32_t i = 0; i < in->n; i++)
            t->f[i] = rt_retain(R[args[i]].v);
        set_v(R, in->dst, &t->hdr);
        pc++;
        NEXT();
    }
    CASE(ALLOC_CLOSURE) {
        in = &code[pc];
        const uint32_t *args = pool + in->args;
        for (uint32_t i = 0; i < in->n; i++)
            NEED_V(args[i], "captured");
        RtClosure *c = rt_closure_new(VM_CODE_FUNC, &exe->funcs[in->a], in->n);
        for (uint32_t i = 0; i < in->n; i++)
            c->env[i] = rt_retain(R[args[i]].v);
        set_v(R, in->dst, &c->hdr);
        pc++;
        NEXT();
    }
    CASE(GET_FIELD) {
        in = &code[pc];
        const Value *v = R[in->a].v;
        Value *x = NULL;
        if (v != NULL && v->kind == VAL_TUPLE && in->b < RT_TUPLE(v)->n)
            x = RT_TUPLE(v)->f[in->b];
        else if (v != NULL && v->kind == VAL_ADT && in->b < RT_ADT(v)->n)
            x = RT_ADT(v)->f[in->b];
        if (x == NULL)
            FAIL("internal error: no field %u in the value of register %u", in->b, in->a);
        set_v(R, in->dst, rt_retain(x));
        pc++;
        NEXT();
    }
    CASE(GET_TAG) {
        in = &code[pc];
        const Value *v = R[in->a].v;
        if (v == NULL || v->kind != VAL_ADT)
            FAIL("internal error: the tag of a value that is not a constructor value");
        R[in->dst].i = RT_ADT(v)->tag;
        pc++;
        NEXT();
    }
    CASE(SHAPE_OF) {
        in = &code[pc];
        const Value *v = R[in->a].v;
        if (v == NULL || v->kind != VAL_TENSOR) FAIL("internal error: shape_of a non-tensor");
        const RtTensor *t = RT_TENSOR(v);
        int64_t n = t->t.ndim;
        RtTensor *s = rt_tensor_new(RLY_DTYPE_I64, 1, &n, buf, sizeof buf);
        if (s == NULL) FAIL("%s", buf);
        for (int64_t d = 0; d < n; d++)
            ((int64_t *)rt_tensor_data(s))[d] = t->shape[d];
        set_v(R, in->dst, &s->hdr);
        pc++;
        NEXT();
    }
    CASE(RESHAPE) {
        in = &code[pc];
        const Value *v = R[in->a].v, *sv = R[in->b].v;
        if (v == NULL || v->kind != VAL_TENSOR || sv == NULL || sv->kind != VAL_TENSOR)
            FAIL("internal error: reshape_tensor of a non-tensor");
        const RtTensor *t = RT_TENSOR(v), *s = RT_TENSOR(sv);
        if (rt_tensor_dtype(s) != RLY_DTYPE_I64 || s->t.ndim != 1 || s->shape[0] > K_MAX_DIMS)
            FAIL("reshape_tensor: the shape must be a 1-d int64 tensor of at most %d dims",
                 K_MAX_DIMS);
        uint32_t nd = (uint32_t)s->shape[0];
        const int64_t *dims = rt_tensor_data(s);
        if (sup_shape_check(nd, dims, false, buf, sizeof buf) != NULL)
            FAIL("reshape_tensor: %s", buf);
        if (sup_shape_numel(nd, dims) != k_numel(&t->t)) {
            char a[256];
            FAIL("reshape_tensor: cannot view %s as %lld elements", k_shape_str(&t->t, a, sizeof a),
                 (long long)sup_shape_numel(nd, dims));
        }
        /* A view: a new header over the same storage (value.h: views share RtStorage). */
        RtTensor *r = sup_malloc(sizeof(RtTensor) + sizeof(int64_t) * (nd ? nd : 1));
        r->hdr.rc = 1;
        r->hdr.kind = VAL_TENSOR;
        r->hdr.flags = t->hdr.flags & RT_VF_CONST;
        r->t = t->t;
        r->t.ndim = (int32_t)nd;
        for (uint32_t d = 0; d < nd; d++)
            r->shape[d] = dims[d];
        r->t.shape = r->shape;
        r->t.strides = NULL;
        r->st = t->st;
        rt_storage_retain(r->st);
        set_v(R, in->dst, &r->hdr);
        pc++;
        NEXT();
    }
    CASE(REF_NEW) {
        in = &code[pc];
        NEED_V(in->a, "source");
        set_v(R, in->dst, &rt_ref_new(&vm->heap, rt_retain(R[in->a].v))->hdr);
        pc++;
        NEXT();
    }
    CASE(REF_READ) {
        in = &code[pc];
        const Value *r = R[in->a].v;
        if (r == NULL || r->kind != VAL_REF || RT_REF(r)->v == NULL)
            FAIL("internal error: ref_read of a value that is not a reference");
        set_v(R, in->dst, rt_retain(RT_REF(r)->v));
        pc++;
        NEXT();
    }
    CASE(REF_WRITE) {
        in = &code[pc];
        Value *r = R[in->a].v;
        if (r == NULL || r->kind != VAL_REF)
            FAIL("internal error: ref_write to a value that is not a reference");
        NEED_V(in->b, "source");
        Value *old = RT_REF(r)->v;
        RT_REF(r)->v = rt_retain(R[in->b].v);
        rt_release(old); /* after the store: it may hold the last reference to r */
        set_v(R, in->dst, rt_unit());
        pc++;
        NEXT();
    }
    CASE(FATAL) { FAIL("%s", exe->strs[code[pc].a]); }
#ifndef VM_COMPUTED_GOTO
default: RLY_UNREACHABLE();
}
#endif

fail : unwind(vm, fidx, base);
return NULL;
done : return result;
#undef ENTER
#undef FAIL
#undef TICK
#undef NEED_V
}

#undef CASE
#undef NEXT

/* ---- the API ----------------------------------------------------------------------------- */

Vm *vm_new(const VmExec *exe) {
    Vm *vm = sup_calloc(1, sizeof *vm);
    vm->exe = exe;
    vm->fi = sup_calloc(exe->n_funcs ? exe->n_funcs : 1, sizeof *vm->fi);
    uint32_t max_params = 1;
    for (uint32_t i = 0; i < exe->n_funcs; i++) {
        const VmFunction *f = &exe->funcs[i];
        FnInfo *fi = &vm->fi[i];
        fi->xop = sup_malloc(sizeof(uint16_t) * f->n_code);
        for (uint32_t pc = 0; pc < f->n_code; pc++)
            fi->xop[pc] = xop_of(f, &f->code[pc]);
        for (uint32_t r = 0; r < f->n_regs; r++)
            fi->n_vregs += f->reg_kind[r] == VM_RK_VALUE;
        fi->vregs = sup_malloc(sizeof(uint32_t) * (fi->n_vregs ? fi->n_vregs : 1));
        fi->n_vregs = 0;
        for (uint32_t r = 0; r < f->n_regs; r++)
            if (f->reg_kind[r] == VM_RK_VALUE) fi->vregs[fi->n_vregs++] = r;
        if (f->n_params > max_params) max_params = f->n_params;
        fi->pairs = vm_pair_analyze(exe, f);
        for (uint32_t pc = 0; fi->pairs != NULL && pc < f->n_code; pc++)
            if (fi->pairs[pc] != NULL) {
                fi->xop[pc] = X_INVOKE_PAIR;
                fi->xop[fi->pairs[pc]->j] = X_INVOKE_PAIRED;
            }
        if (f->plan != NULL) {
            const VmPlan *pl = f->plan;
            FnPlan *fp = sup_calloc(1, sizeof *fp);
            fp->buf = sup_calloc(pl->n_bufs ? pl->n_bufs : 1, sizeof *fp->buf);
            fp->site_at = sup_malloc(sizeof(uint32_t) * (f->n_code ? f->n_code : 1));
            for (uint32_t pc = 0; pc < f->n_code; pc++)
                fp->site_at[pc] = UINT32_MAX;
            for (uint32_t k = 0; k < pl->n_sites; k++)
                fp->site_at[pl->sites[k].pc] = pl->sites[k].first;
            fi->plan = fp;
        }
    }
    vm->targs = sup_malloc(sizeof(VmReg) * max_params);
    vm->pi = sup_calloc(exe->n_packed ? exe->n_packed : 1, sizeof *vm->pi);
    size_t max_vals = 1;
    vm->max_out = 1;
    for (uint32_t p = 0; p < exe->n_packed; p++) {
        const VmPacked *pk = &exe->packed[p];
        plan_packed(pk, &vm->pi[p]);
        vm->pi[p].cell = vm_cell_analyze(exe, pk);
        if (vm->pi[p].cell == NULL) vm->pi[p].fuse = vm_fuse_analyze(pk);
        if (vm->pi[p].cell != NULL && vm->pi[p].cell->n_res > vm->max_out)
            vm->max_out = vm->pi[p].cell->n_res;
        if ((size_t)pk->n_inputs + pk->n_nodes > max_vals)
            max_vals = (size_t)pk->n_inputs + pk->n_nodes;
        for (uint32_t k = 0; k < pk->n_nodes; k++)
            if (pk->nodes[k].out_tuple && pk->nodes[k].n_out > vm->max_out)
                vm->max_out = pk->nodes[k].n_out;
    }
    vm->pvals = sup_malloc(sizeof(Value *) * max_vals);
    vm->k_out = sup_malloc(sizeof(DLTensor *) * vm->max_out);
    vm->k_outv = sup_malloc(sizeof(RtTensor *) * vm->max_out);
    vm->k_pre = sup_malloc(sizeof(RtTensor *) * vm->max_out);
    rt_heap_init(&vm->heap);
    vm->limits = rt_limits_default();
    ensure_regs(vm, 256);
    vec_reserve(&vm->frames, 64);
    return vm;
}

void vm_free(Vm *vm) {
    if (vm == NULL) return;
    rt_heap_free(&vm->heap);
    for (uint32_t i = 0; i < vm->exe->n_funcs; i++) {
        free(vm->fi[i].xop);
        free(vm->fi[i].vregs);
        vm_pair_free(vm->fi[i].pairs, vm->exe->funcs[i].n_code);
        FnPlan *fp = vm->fi[i].plan;
        if (fp == NULL) continue;
        /* a buffer still held elsewhere keeps its bytes (its storage holds the arena's) */
        for (uint32_t b = 0; fp->arena && b < vm->exe->funcs[i].plan->n_bufs; b++)
            rt_release(&fp->buf[b]->hdr);
        rt_storage_release(fp->arena);
        free(fp->buf);
        free(fp->site_at);
        free(fp);
    }
    for (uint32_t p = 0; p < vm->exe->n_packed; p++) {
        free(vm->pi[p].rel_start);
        free(vm->pi[p].rel);
        vm_fuse_free(vm->pi[p].fuse);
        free(vm->pi[p].cell);
    }
    free(vm->fi);
    free(vm->pi);
    free(vm->regs);
    vec_free(&vm->frames);
    free(vm->targs);
    free(vm->pvals);
    vec_free(&vm->k_in);
    vec_free(&vm->k_start);
    vec_free(&vm->k_len);
    vec_free(&vm->k_tuple);
    vec_free(&vm->k_const);
    k_prep_cache_free(vm->prep_run);
    free(vm->k_out);
    RtMemAccount *prev = rt_mem_swap(&vm->mem);
    rt_mem_credit(vm->ws_cap);
    rt_mem_swap(prev);
    free(vm->ws);
    free(vm->k_outv);
    free(vm->k_pre);
    rt_profile_free(vm->prof);
    sb_free(&vm->probe_sb[0]);
    sb_free(&vm->probe_sb[1]);
    free(vm);
}

void vm_set_limits(Vm *vm, const RtLimits *limits) { vm->limits = *limits; }
void vm_set_pool(Vm *vm, SupPool *pool) {
    vm->pool = pool;
    sup_pool_trace(pool, vm->prof != NULL); /* workers' spans for the profile */
}

void vm_set_probe(Vm *vm, unsigned mask) {
    vm->check_numerics = (mask & VM_PROBE_NUMERICS) != 0;
    if (!(mask & VM_PROBE_PROFILE)) {
        rt_profile_free(vm->prof);
        vm->prof = NULL;
    } else if (vm->prof == NULL) {
        vm->prof = rt_profile_new();
    }
    sup_pool_trace(vm->pool, vm->prof != NULL); /* workers' spans for the profile */
    /* float scalar operations take the generic VM_SCALAR entry, which checks */
    for (uint32_t i = 0; i < vm->exe->n_funcs; i++) {
        const VmFunction *f = &vm->exe->funcs[i];
        for (uint32_t pc = 0; pc < f->n_code; pc++) {
            const VmInstr *in = &f->code[pc];
            if (in->op != VM_SCALAR) continue;
            uint8_t dk = f->reg_kind[in->dst];
            vm->fi[i].xop[pc] = vm->check_numerics && (dk == VM_RK_F32 || dk == VM_RK_F64)
                                    ? (uint16_t)X_SCALAR
                                    : xop_of(f, in);
        }
    }
}

RtProfile *vm_profile(Vm *vm) { return vm->prof; }

RtMemAccount *vm_account(Vm *vm) {
    vm->mem.limit = vm->limits.max_memory;
    return &vm->mem;
}

Value *vm_invoke(Vm *vm, uint32_t func, uint32_t n_args, Value *const *args, char *err,
                 size_t cap) {
    const VmExec *exe = vm->exe;
    if (vm->running) {
        snprintf(err, cap, "error: the VM is already running");
        return NULL;
    }
    if (func >= exe->n_funcs) {
        snprintf(err, cap, "error: no function %u in the executable", func);
        return NULL;
    }
    const VmFunction *f = &exe->funcs[func];
    if (n_args != f->n_params) {
        snprintf(err, cap, "error: @%s takes %u arguments, %u given", fn_name(f), f->n_params,
                 n_args);
        return NULL;
    }
    vm->err = err;
    vm->err_cap = cap;
    if (cap > 0) err[0] = '\0';
    vm->mem.limit = vm->limits.max_memory;
    vm->deadline_ns = 0;
    if (vm->limits.timeout > 0) {
        double ns = vm->limits.timeout * 1e9;
        vm->deadline_ns = now_ns() + (ns > 1e18 ? (uint64_t)1e18 : (uint64_t)ns);
    }
    RtMemAccount *prev = rt_mem_swap(&vm->mem);
    ensure_regs(vm, f->n_regs);
    VmReg *R = vm->regs;
    clear_vregs(&vm->fi[func], R);
    char buf[512];
    if (vm->prep_run == NULL) vm->prep_run = k_prep_cache_new();
    for (uint32_t i = 0; i < n_args; i++) {
        if (args[i] != NULL && args[i]->kind == VAL_TENSOR) args[i]->flags |= RT_VF_INPUT;
        VmReg v = {.v = args[i]};
        if (args[i] == NULL || !convert(VM_RK_VALUE, f->reg_kind[i], v, &R[i], buf, sizeof buf)) {
            if (args[i] == NULL) snprintf(buf, sizeof buf, "no value");
            snprintf(err, cap, "error: argument %u of @%s: %s", i, fn_name(f), buf);
            release_vregs(&vm->fi[func], R);
            rt_mem_swap(prev);
            return NULL;
        }
    }
    Frame host = {HOST, 0, 0, 0, VM_RK_VALUE};
    vm->frames.len = 0;
    vec_push(&vm->frames, host);
    vm->depth = 1;
    vm->running = true;
    if (vm->fi[func].plan) activate(vm, func);
    Value *v = run(vm, func);
    k_prep_cache_clear(vm->prep_run); /* the inputs may change before the next run */
    vm->running = false;
    vm->frames.len = 0;
    vm->depth = 0;
    rt_mem_swap(prev);
    return v;
}
