/* eval.h - the reference interpreter: runs a type-checked module, the whole language. The
 * interface of src/eval/.
 *
 * It is the oracle every other executor is tested against, so it is written for clarity and
 * exact semantics:
 *   - closures capture the values of their free variables; a let-bound function that calls
 *     itself (let-rec) finds itself without a reference cycle; globals may be mutually
 *     recursive;
 *   - operator calls run the reference kernels (src/kernels/ref) or a user kernel;
 *   - a shared subexpression (a DAG node with several parents in one function body) is
 *     evaluated once per activation, at its first use, as TVM's graph form means;
 *   - evaluation is a machine with heap stacks (tasks, values, frame slots) and proper tail
 *     calls, so recursion depth is bounded by memory, not by the C stack;
 *   - a runtime error (a kernel's check, a failing `match?`, a type mismatch of `?` dims in an
 *     input) is reported at the span of the failing expression into ctx->diags and evaluation
 *     stops cleanly, releasing everything it held. */
#ifndef RLY_EVAL_H
#define RLY_EVAL_H

#include "ir/ir.h"
#include "runtime/value.h"

typedef struct Interp Interp;

/* An interpreter over m, which must have passed type inference. */
Interp *ev_new(Module *m);
void ev_free(Interp *it);

/* Limits of every later run (ev_new starts with rt_limits_default()). Exceeding one ends the
 * run with an error at the expression being evaluated, naming the limit. */
void ev_set_limits(Interp *it, const RtLimits *limits);
/* The account runs are charged to: make it current (rt_mem_swap) while allocating a run's
 * inputs so they count against max_memory too. Its `peak` is the most a run has held. */
RtMemAccount *ev_account(Interp *it);

/* Call global `name` with the given arguments (borrowed). Returns an owned value, or NULL when
 * evaluation failed (diagnostics are in the module's context). */
Value *ev_call_global(Interp *it, const char *name, uint32_t n_args, Value *const *args);
/* Evaluate the bare expression of a module parsed from an expression. */
Value *ev_eval_module_expr(Interp *it);
/* Evaluate a closed expression (no free variables) whose nodes carry their checked types, e.g.
 * an operator call on constants (the ONNX importer folds with this). */
Value *ev_eval_closed(Interp *it, Expr *e);

/* ---- observing a run (the step debugger, src/eval/debug.c) ------------------------------------
 * An observer sees every evaluation step of an interpreter it is attached to. With none attached
 * (the default) the interpreter pays one predictable branch per step. The callbacks run inside
 * the run, so they may inspect the frames below (ev_frame, ev_frame_lookup) but not start
 * another run of the same interpreter. A callback returning false stops the run: it ends with
 * the error "stopped by the debugger" at the current expression (released like any failure). */
typedef struct EvObserver EvObserver;
struct EvObserver {
    /* Before expression e is evaluated in the innermost frame (once per evaluation; not for a
     * shared node whose value is already memoized in this activation). */
    bool (*on_eval)(EvObserver *ob, Interp *it, Expr *e);
    /* A Relay function was entered: fn's frame is now the innermost. call is the call
     * expression (NULL for the run's entry); tail: a tail call, which replaced the caller's
     * frame (so the depth did not grow). */
    bool (*on_enter)(EvObserver *ob, Interp *it, Function *fn, Expr *call, bool tail);
    /* The innermost frame returned v (borrowed); its caller is now the innermost. */
    bool (*on_return)(EvObserver *ob, Interp *it, const Value *v);
    void *state; /* the observer's own data */
};
/* Attach ob (NULL: detach) to it; ob must outlive the runs it observes. */
void ev_set_observer(Interp *it, EvObserver *ob);
/* Interpreters created on this thread from now on (ev_new) start with ob attached (NULL: none).
 * This lets a tool observe the interpreter that rly_module_run makes for it. */
void ev_observe_new(EvObserver *ob);

/* One active Relay frame, for a debugger. Frame 0 is the innermost. */
typedef struct EvFrame {
    Function *fn; /* the running function; NULL for the module's bare expression */
    Expr *at;     /* frame 0: the expression being evaluated; outer frames: the call (or,
                     when unknown, the innermost expression) they wait on; may be NULL */
} EvFrame;
/* Non-tail calls active now (1 in the entry's frame; a tail call keeps the depth). */
uint64_t ev_depth(const Interp *it);
/* Frames active now (tail calls replace their caller's frame, so they do not add one). O(task
 * stack). */
uint32_t ev_n_frames(const Interp *it);
/* Frame k (0 = innermost) into *out; false when there is no such frame. O(task stack). */
bool ev_frame(const Interp *it, uint32_t k, EvFrame *out);
/* The value variable `name` (without '%') has in frame k now (borrowed), or NULL when no
 * variable of that name is bound there yet; *var_out (may be NULL) gets its Var. Among several
 * bound variables of one name (shadowing), the one bound last in the function's text wins. */
const Value *ev_frame_lookup(Interp *it, uint32_t k, const char *name, Var **var_out);
/* The name of the global whose function fn is (without '@'), or NULL (a local function). */
const char *ev_global_name(const Interp *it, const Function *fn);

/* ---- probes (--check-numerics, --profile; src/eval/probe.c, runtime/probe.h) ------------------
 * With check_numerics, a run stops at the first operator call whose result holds a NaN or an
 * infinity made from finite arguments: the error, at the call, names the operator and gives the
 * statistics of its arguments and result. prof (borrowed; NULL: none) gets an event per
 * operator call. Off (the default), the interpreter pays one branch per operator call. */
struct RtProfile;
void ev_set_probe(Interp *it, bool check_numerics, struct RtProfile *prof);
typedef struct EvProbe {
    bool on, check_numerics;
    struct RtProfile *prof;
} EvProbe;
/* For eval.c: after operator call c (named op) of args gave r in [t0, t1): record it, check it.
 * false when it made a NaN or an infinity from finite arguments (the error is in ctx's diags). */
bool ev_probe_op(const EvProbe *pr, Ctx *ctx, Call *c, const char *op, Value *const *args,
                 uint32_t n, const Value *r, uint64_t t0, uint64_t t1);
/* A VM run's error text under --check-numerics ("model.onnx:40:1: error: ...") with the source
 * line of its location quoted when the location is one of ctx's sources (an ONNX model's node
 * line names the node), into out. */
void ev_probe_quote(Ctx *ctx, const char *msg, StrBuf *out);

/* Structural text of a value: tensors summarized as numpy does (at most `max_elems` elements
 * before eliding with "..."), tuples as (a, b), constructor values as Cons(1, Nil), closures as
 * <closure>, references as ref(v). Iterative: deep lists print without recursion. A value that
 * shares parts prints as the tree it stands for, which can be exponentially larger, so printing
 * stops with "..." once the text passes EV_PRINT_MAX bytes. */
#define EV_PRINT_MAX (4u << 20) /* = RT_PRINT_MAX (runtime/print.h), which prints */
void ev_print_value(const Value *v, size_t max_elems, StrBuf *out);

#endif /* RLY_EVAL_H */
