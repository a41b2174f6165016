/* api.h - what the public API's files share: failing with the thread-local last error, the
 * default engine, and the out-of-memory protection around entry points. Internal to src/api/. */
#ifndef RLY_API_API_H
#define RLY_API_API_H

#include "ir/ir.h"

/* What RLY_ENGINE_DEFAULT runs (rly_run_options.engine, rly_onnx_test_case, the CLI): the VM,
 * since it gives the interpreter's results on every corpus (issue 15's differential tests,
 * tests/diff and the diff_vm_* CTest entries). The interpreter stays the oracle (--engine
 * interp). */
#define API_DEFAULT_ENGINE RLY_ENGINE_VM

/* Set the last error (printf format) and return st. The message lives in the runtime's
 * thread-local buffer (runtime/session.h), which rly_last_error() returns. */
rly_status api_fail(rly_status st, const char *fmt, ...) RLY_PRINTF(2, 3);
/* Render the context's diagnostics into the last error, clear them; RLY_STATUS_ERROR. */
rly_status api_fail_diags(Ctx *ctx);

/* Every entry point that allocates runs inside RLY_TRY; an allocation failure longjmps to it.
 * Compiler memory is arena-owned, so nothing leaks except malloc'ed temporaries, which
 * protected regions avoid holding across allocations. */
#define RLY_TRY                                                                                    \
    OomHandler oom_handler_;                                                                       \
    oom_handler_.prev = sup_oom_handler;                                                           \
    if (setjmp(oom_handler_.jb) != 0) {                                                            \
        sup_oom_handler = oom_handler_.prev;                                                       \
        return api_fail(RLY_STATUS_NOMEM, "out of memory");                                        \
    }                                                                                              \
    sup_oom_handler = &oom_handler_
#define RLY_END_TRY (sup_oom_handler = oom_handler_.prev)

#endif /* RLY_API_API_H */
