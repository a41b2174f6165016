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

/* Structural text of a value: tensors summarized as numpy does (at most `max_elems` elements
 * before eliding with "..."), tuples as (a, b), constructor values as Cons(1, Nil), closures as
 * <closure>, references as ref(v). Iterative: deep lists print without recursion. A value that
 * shares parts prints as the tree it stands for, which can be exponentially larger, so printing
 * stops with "..." once the text passes EV_PRINT_MAX bytes. */
#define EV_PRINT_MAX (4u << 20) /* = RT_PRINT_MAX (runtime/print.h), which prints */
void ev_print_value(const Value *v, size_t max_elems, StrBuf *out);

#endif /* RLY_EVAL_H */
