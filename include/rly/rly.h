/* rly.h - the public C API of the rly compiler (Relay in C).
 *
 * Every function returns an rly_status (0 = ok); on failure rly_last_error() gives a
 * human-readable message (thread-local, valid until the next failing call on this thread).
 * Handles are opaque. A context owns every IR object created in it; freeing the context frees
 * them all. Nothing here aborts on bad input. */
#ifndef RLY_RLY_H
#define RLY_RLY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RLY_BUILDING_LIBRARY) && defined(__GNUC__)
#define RLY_API __attribute__((visibility("default")))
#else
#define RLY_API
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

typedef struct rly_ctx rly_ctx;       /* owns IR memory, interned types and strings, diagnostics */
typedef struct rly_module rly_module; /* a Relay module (or a bare expression wrapped as one) */

/* The message of the last failing call on this thread ("" if none). Never NULL. */
RLY_API const char *rly_last_error(void);

/* The library version, "MAJOR.MINOR.PATCH". */
RLY_API const char *rly_version(void);

/* Name of a dtype as Relay writes it ("float32", "int8", "bool", ...); NULL when out of range. */
RLY_API const char *rly_dtype_name(rly_dtype dt);

/* Create a context. *out is set on success. Free with rly_ctx_free. */
RLY_API rly_status rly_ctx_new(rly_ctx **out);
/* Free a context and every module and node created in it. NULL is a no-op. */
RLY_API void rly_ctx_free(rly_ctx *ctx);

/* Parse Relay text. A text that begins with a version header `#[version = "0.0.5"]` is a module;
 * any other text is a bare expression, held as a module with no definitions (see
 * rly_module_is_expr). `name` names the source in diagnostics (e.g. a file path). Tensors
 * referenced as meta[relay.Constant][i] need a side file, so here they are an error (use
 * rly_module_parse_file; see docs/text-format.md). On error, returns RLY_STATUS_ERROR and
 * rly_last_error() holds the rendered diagnostic (file:line:col, source line, caret). */
RLY_API rly_status rly_module_parse(rly_ctx *ctx, const char *text, size_t len, const char *name,
                                    rly_module **out);

/* Parse a file (path "-" reads standard input); tensor constants come from the side file
 * beside it when the text references them. */
RLY_API rly_status rly_module_parse_file(rly_ctx *ctx, const char *path, rly_module **out);

/* 1 if the module was parsed from a bare expression (printed without a version header). */
RLY_API int rly_module_is_expr(const rly_module *mod);

/* Check well-formedness (each variable bound once, every use in scope). RLY_STATUS_ERROR with
 * the diagnostics in rly_last_error() when it fails. */
RLY_API rly_status rly_module_check_well_formed(rly_module *mod);

/* Print the module as canonical Relay text. *out is malloc'ed, NUL-terminated; free with
 * rly_free. Tensor constants print as meta[relay.Constant][i] references. */
RLY_API rly_status rly_module_print(rly_module *mod, char **out);

/* Write the module to `path` as text, plus its tensor constants to the side file (only when it
 * has any). Output is written to temporary files and renamed, so a failure leaves no
 * half-written file. */
RLY_API rly_status rly_module_save(rly_module *mod, const char *path);

/* Structural equality up to alpha-equivalence of local variables and type variables. */
RLY_API int rly_module_equal(const rly_module *a, const rly_module *b);
/* Structural hash consistent with rly_module_equal. */
RLY_API uint64_t rly_module_hash(const rly_module *mod);

/* Free memory returned by rly_* functions (strings). NULL is a no-op. */
RLY_API void rly_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* RLY_RLY_H */
