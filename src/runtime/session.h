/* session.h - what the session API (session.c, include/rly/rly_runtime.h) shares with the
 * compiler's public API (src/api): the thread-local last error, which both libraries report
 * through, and the executable and session internals that `rly run`, `rly compile` and the ONNX
 * test runner use. librly_runtime holds session.c but nothing of src/api. */
#ifndef RLY_RUNTIME_SESSION_H
#define RLY_RUNTIME_SESSION_H

#include <stdatomic.h>

#include "rly/rly_runtime.h"
#include "runtime/value.h"
#include "runtime/vm.h"
#include "support/support.h"

/* ---- the last error ------------------------------------------------------------------------ */

/* Set the last error (printf format) and return st. */
rly_status rt_fail(rly_status st, const char *fmt, ...) RLY_PRINTF(2, 3);
/* The thread's last-error buffer (NUL-terminated, *cap bytes), for callers that render into it
 * directly (src/api's diagnostics). */
char *rt_error_buf(size_t *cap);

/* ---- executables ------------------------------------------------------------------------- */

struct rly_executable {
    VmExec *exe; /* owned */
    /* References: the handle's own (until rly_executable_free) plus one per live session; the
     * last one frees it. Atomic: sessions of one executable may live on several threads. */
    _Atomic uint32_t refs;
    _Atomic bool released; /* rly_executable_free was called */
};

/* Wrap a validated, bound executable (taking it) into a handle; never NULL. */
rly_executable *rt_executable_wrap(VmExec *exe_take);

/* ---- sessions ---------------------------------------------------------------------------- */

/* Bind input i to v (taking the reference): any value the input's type allows (a tuple or an
 * ADT too), not checked here; the interpreter's input binding has checked it. */
void rt_session_set_value(rly_session *s, uint32_t i, Value *v_take);
/* Whether input i is bound. */
bool rt_session_is_bound(const rly_session *s, uint32_t i);
/* The whole result of the last successful run (borrowed; NULL before one). */
const Value *rt_session_result(const rly_session *s);
/* The session's machine (its memory account counts inputs made for it). */
Vm *rt_session_vm(rly_session *s);
const VmExec *rt_session_exec(const rly_session *s);

/* Resolve session options into limits (0: default, RLY_NO_LIMIT: none), as `rly run` does. */
RtLimits rt_limits_from(uint64_t max_memory, uint64_t max_depth, double timeout);

#endif /* RLY_RUNTIME_SESSION_H */
