/* rly_runtime.h - the deployable C API of rly: load a compiled executable (an .rlyx file written
 * by `rly compile` or rly_executable_save), make sessions over it, feed inputs as DLPack tensors,
 * run, read the outputs. librly_runtime implements exactly this header and holds no compiler
 * code; librly implements it too (rly.h includes this header). Usable from C and C++.
 *
 * Conventions (shared with rly.h): every function that can fail returns an rly_status (0 = ok);
 * rly_last_error() then gives a human-readable message (thread-local, valid until the next
 * failing call on this thread). Handles are opaque. Nothing here aborts on bad input: a NULL
 * handle, an unknown name, a tensor of the wrong type or a hostile file is an error status.
 *
 * Threads: a session is used by one thread at a time; sessions (of one executable or of several)
 * may run at the same time on different threads. A session runs its kernels on its own pool of
 * `threads` threads (the calling thread and threads - 1 workers). */
#ifndef RLY_RLY_RUNTIME_H
#define RLY_RLY_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "rly/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef RLY_API
#if defined(RLY_BUILDING_LIBRARY) && defined(__GNUC__)
#define RLY_API __attribute__((visibility("default")))
#else
#define RLY_API
#endif
#endif

typedef enum rly_status {
    RLY_STATUS_OK = 0,
    RLY_STATUS_ERROR = 1,   /* user-input error: diagnostics were rendered into rly_last_error() */
    RLY_STATUS_NOMEM = 2,   /* out of memory; the context is still usable */
    RLY_STATUS_IO = 3,      /* a file could not be read or written */
    RLY_STATUS_INVALID = 4, /* an argument of the call itself is invalid (NULL handle, ...) */
} rly_status;

/* The 13 element types. Values are stable (they index tables and appear in files). */
typedef enum rly_dtype {
    RLY_DTYPE_BOOL = 0,
    RLY_DTYPE_I8,
    RLY_DTYPE_I16,
    RLY_DTYPE_I32,
    RLY_DTYPE_I64,
    RLY_DTYPE_U8,
    RLY_DTYPE_U16,
    RLY_DTYPE_U32,
    RLY_DTYPE_U64,
    RLY_DTYPE_F16,
    RLY_DTYPE_F32,
    RLY_DTYPE_F64,
    RLY_DTYPE_BF16,
    RLY_DTYPE_COUNT
} rly_dtype;

/* A limit value meaning "none" (rly_session_options, rly_run_options). */
#define RLY_NO_LIMIT UINT64_MAX

/* The message of the last failing call on this thread ("" if none). Never NULL. */
RLY_API const char *rly_last_error(void);

/* The library version, "MAJOR.MINOR.PATCH". */
RLY_API const char *rly_version(void);

/* Name of a dtype as Relay writes it ("float32", "int8", "bool", ...); NULL when out of range. */
RLY_API const char *rly_dtype_name(rly_dtype dt);

/* Free memory returned by rly_* functions (strings). NULL is a no-op. */
RLY_API void rly_free(void *p);

/* ---- executables ----------------------------------------------------------------------------
 * An executable is a compiled program: bytecode, constants, the entry function's input and
 * output names and types. It is immutable once made and shared by the sessions made from it. */

typedef struct rly_executable rly_executable;

/* Load an .rlyx file. The file is mapped and every part is validated: a truncated, corrupt or
 * hostile file is RLY_STATUS_ERROR with a message (a missing or unreadable one is too, with
 * the path), never a crash. *out is set on success; free with rly_executable_free. */
RLY_API rly_status rly_executable_load(const char *path, rly_executable **out);

/* Release the caller's handle. Sessions made from exe keep it alive: the executable is freed
 * when the handle and every session of it are gone. NULL is a no-op. */
RLY_API void rly_executable_free(rly_executable *exe);

/* ---- sessions --------------------------------------------------------------------------------
 * A session is a machine for one executable: it holds the bound inputs, the machine's state
 * and the outputs of the last run. Run it as often as wanted; inputs stay bound between runs. */

typedef struct rly_session rly_session;

typedef struct rly_session_options {
    int threads;         /* kernel threads; 0: the default (RLY_NUM_THREADS, else the cores
                            this process may use); 1: the calling thread only */
    uint64_t max_memory; /* bytes of run-time values live at once; 0: a quarter of physical
                            memory; RLY_NO_LIMIT: none */
    uint64_t max_depth;  /* non-tail calls active at once; 0: 10^7; RLY_NO_LIMIT: none */
    double timeout;      /* seconds of wall-clock time per run; 0: none */
} rly_session_options;

/* A new session over exe (which it keeps alive). opts may be NULL (all defaults). Errors: a
 * NULL argument or a negative thread count is RLY_STATUS_INVALID. */
RLY_API rly_status rly_session_new(const rly_executable *exe, const rly_session_options *opts,
                                   rly_session **out);
/* Free the session (its outputs with it). NULL is a no-op. */
RLY_API void rly_session_free(rly_session *s);
/* The threads s runs its kernels on: its pool's size, 1 for the calling thread alone; -1 for a
 * NULL session. */
RLY_API int rly_session_threads(const rly_session *s);

/* The entry function's inputs (its parameters, in order) and outputs (the fields of a tuple
 * result, or the one result). -1 for a NULL session. */
RLY_API int rly_session_num_inputs(const rly_session *s);
RLY_API int rly_session_num_outputs(const rly_session *s);
/* Their names: ONNX names for an imported model, else the Relay parameter names and
 * "output_0", "output_1", ... NULL when i is out of range. Valid while the session lives. */
RLY_API const char *rly_session_input_name(const rly_session *s, int i);
RLY_API const char *rly_session_output_name(const rly_session *s, int i);
/* The index of the input with this name, or -1. */
RLY_API int rly_session_input_index(const rly_session *s, const char *name);

/* The declared type of an input or output. Pointers are valid while the session lives. */
typedef struct rly_tensor_info {
    int is_tensor;        /* 0: a tuple, ADT, function or reference (no DLTensor gives or shows it;
                             dtype, ndim and shape are then 0) */
    rly_dtype dtype;      /* element type */
    int ndim;             /* rank */
    const int64_t *shape; /* ndim dims; -1 for a dimension known only at run time (`?`) */
    const char *type;     /* the Relay type as text: "Tensor[(1, 3, ?), float32]" */
} rly_tensor_info;
RLY_API rly_status rly_session_input_info(const rly_session *s, int i, rly_tensor_info *info);
RLY_API rly_status rly_session_output_info(const rly_session *s, int i, rly_tensor_info *info);

/* Bind input `name` to t; it stays bound for every later run until bound again. Zero-copy:
 * the session reads the DLTensor struct here but borrows t->data for as long as the input
 * stays bound (each run reads the buffer's contents at that time; the session never writes to
 * it, and frees nothing of it). After each run, an output that would share an input buffer's
 * memory (an identity model) is copied, so outputs never point into caller buffers and a
 * buffer may be freed once the runs that use it have returned and before it is bound again.
 * t is checked against the input's type (dtype, rank, every static dimension; a `?` dimension
 * takes any size) and must be a CPU tensor of one lane. A tensor whose strides are not compact
 * row-major, or whose first element is not 64-byte aligned, is COPIED here instead (into an
 * aligned buffer the session owns): correct, but it costs an allocation and a copy per call.
 * bool elements must be 0 or 1 (checked). Errors: an unknown name lists the inputs; a mismatch
 * names the input and both types. */
RLY_API rly_status rly_session_set_input(rly_session *s, const char *name, const DLTensor *t);

/* Run the entry function on the bound inputs (every input must be bound). Outputs of the
 * previous run are released first. A run-time error (an operator's, a limit exceeded, an
 * unmatched `match`) is RLY_STATUS_ERROR with its message and source location when known; the
 * session stays usable. */
RLY_API rly_status rly_session_run(rly_session *s);

/* A view of output i of the last run: compact row-major, CPU, owned by the session; valid until
 * the next rly_session_run or rly_session_free, never to be written. RLY_STATUS_ERROR before
 * the first successful run or for an output that is not a tensor; RLY_STATUS_INVALID for i out
 * of range. */
RLY_API rly_status rly_session_get_output(const rly_session *s, int i, const DLTensor **out);

/* ---- probes (docs/tools.md "Numerics", "Profiles") -----------------------------------------
 * RLY_PROBE_NUMERICS: a run stops at the first fused group (or operator) whose result holds a NaN
 * or an infinity made from finite inputs, with an error at the operator that made it (the
 * group's operators are run again one by one on the reference kernels to find it) and the
 * statistics of its inputs. RLY_PROBE_PROFILE: every later run records an event per operator or
 * fused group. mask 0 turns both off (and drops the events). Off, they cost nothing. */
enum { RLY_PROBE_NUMERICS = 1, RLY_PROBE_PROFILE = 2 };
RLY_API rly_status rly_session_set_probes(rly_session *s, unsigned mask);
/* Write the events recorded since RLY_PROBE_PROFILE was set as a Chrome trace (JSON; Perfetto
 * and chrome://tracing open it) to path, whole or not at all; table (may be NULL) receives the
 * `top` names with the most total time (top <= 0: all), to free with rly_free.
 * RLY_STATUS_ERROR when the session is not profiling; RLY_STATUS_IO when path cannot be
 * written. */
RLY_API rly_status rly_session_write_profile(rly_session *s, const char *path, int top,
                                             char **table);

#ifdef __cplusplus
}
#endif
#endif /* RLY_RLY_RUNTIME_H */
