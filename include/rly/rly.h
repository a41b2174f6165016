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

#include "rly/rly_runtime.h" /* rly_status, rly_dtype, rly_last_error, executables, sessions */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rly_ctx rly_ctx;       /* owns IR memory, interned types and strings, diagnostics */
typedef struct rly_module rly_module; /* a Relay module (or a bare expression wrapped as one) */

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

/* Parse more text into an existing module: the text may use the module's globals, types and
 * constructors (e.g. those of the prelude). On error the module may keep part of the text's
 * definitions. */
RLY_API rly_status rly_module_parse_into(rly_module *mod, const char *text, size_t len,
                                         const char *name);
RLY_API rly_status rly_module_parse_file_into(rly_module *mod, const char *path);

/* A new module holding Relay's standard library: List, Option, Tree, nat and their functions
 * (map, foldl, foldr, filter, zip, rev, tmap, size, iterate, ...). Parse a program into it with
 * rly_module_parse_into to use them. */
RLY_API rly_status rly_module_prelude(rly_ctx *ctx, rly_module **out);

/* Type inference and checking of the whole module (after the well-formedness check). Every
 * error is reported: RLY_STATUS_ERROR with all diagnostics rendered in rly_last_error(). On
 * success every expression carries its type. */
RLY_API rly_status rly_module_infer(rly_module *mod);

/* Reverse-mode automatic differentiation (docs/autodiff.md): type-checks the module, then
 * defines @out_name (NULL: "main") as the gradient of @entry (NULL: "main"), a function
 * fn(T1..Tn) -> (R, (T1..Tn)) returning @entry's result and the gradient of the sum of its
 * floating-point result elements with respect to every parameter. mode "higher" (NULL) takes the
 * whole language (closures, references, ADTs, recursion, globals, which get @<name>_rev twins);
 * "first" takes dataflow programs and emits a plain dataflow program. An operator without a
 * gradient is an error at each use, all reported. */
RLY_API rly_status rly_module_gradient(rly_module *mod, const char *entry, const char *mode,
                                       const char *out_name);

/* Print like rly_module_print, with each expression's inferred type as a `/ * ty=... * /`
 * comment (written without the spaces). */
RLY_API rly_status rly_module_print_typed(rly_module *mod, char **out);

/* ---- optimizing ---------------------------------------------------------------------------
 * A pipeline of Relay's passes (docs/passes.md) over a module, in place: the default pipeline of
 * an opt level (TVM's: a pass runs when its level is at most opt_level), or an explicit list
 * "FoldConstant,FuseOps(fuse_opt_level=2)" run in order. Types are inferred once and kept valid
 * by every pass. */
typedef struct rly_opt_options {
    int opt_level;               /* 0..3 */
    const char *passes;          /* NULL: the default pipeline; else the passes to run */
    const char *required_passes; /* comma-separated: run whatever their level; may be NULL */
    const char *disabled_passes; /* comma-separated: never run; may be NULL */
    const char *print_ir_after;  /* NULL, a pass name, or "all": print the module after it */
    int time_passes;             /* nonzero: a table of the time each pass took */
    int verify_types;            /* nonzero: re-infer after every pass and check (tests) */
} rly_opt_options;
/* Optimize mod in place. *report (when report is not NULL) receives what print_ir_after and
 * time_passes asked for, or NULL; free it with rly_free. Errors (a bad pipeline, a type error
 * in the module) are RLY_STATUS_ERROR with the message in rly_last_error(). */
RLY_API rly_status rly_module_optimize(rly_module *mod, const rly_opt_options *opts, char **report);
/* The registered passes: name, opt level, parameters with defaults, one line each; free with
 * rly_free. */
RLY_API rly_status rly_passes_describe(char **out);
/* Whether a and b (of one context) are alpha-equivalent (TVM's assert_structural_equal with
 * map_free_vars); when not, rly_last_error() shows where they first differ, located in both.
 * The type arguments inference records on calls of polymorphic functions count: compare two
 * inferred modules or two uninferred ones. */
RLY_API rly_status rly_module_compare(rly_module *a, rly_module *b, int *equal);

/* ---- running ------------------------------------------------------------------------------
 * rly_module_run type-checks a module and runs one function, through the reference interpreter
 * (the semantic oracle) or the VM (compiled in memory), with inputs from .npy/.npz files or
 * generated, and either writes the results to an .npz or renders them as text. The .npz
 * holds every tensor of the result flattened depth-first (tuple fields and constructor fields
 * in order) as output_0, output_1, ...; a module imported from ONNX names its arrays by the
 * graph's output names instead (an output that is a sequence of tensors: NAME_0, NAME_1, ...).
 * rly_executable_run does the same for a compiled executable. */

/* Which machine runs a program. */
typedef enum rly_engine {
    RLY_ENGINE_DEFAULT = 0, /* the VM */
    RLY_ENGINE_VM,          /* compile in memory (src/backend), run on the VM */
    RLY_ENGINE_INTERP,      /* the reference interpreter over the IR */
    RLY_ENGINE_RLYX,        /* rly_onnx_test_case only: compile, save as an .rlyx file, load
                               it back and run it on the VM (the executable round trip) */
} rly_engine;

typedef enum rly_fill {
    RLY_FILL_NONE = 0, /* every parameter must be given */
    RLY_FILL_RANDOM,   /* missing inputs: deterministic pseudo-random values */
    RLY_FILL_ZEROS,
    RLY_FILL_ONES,
} rly_fill;

typedef struct rly_run_options {
    const char *entry;      /* the global to run; NULL means "main" (ignored for an expression) */
    const char *inputs_npz; /* NULL, or an .npz whose arrays are named after the parameters */
    int n_inputs;           /* --input NAME=path.npy pairs: names[i] is read from paths[i] */
    const char *const *input_names;
    const char *const *input_paths;
    rly_fill fill;          /* what to do for parameters no file gives */
    unsigned seed;          /* for RLY_FILL_RANDOM */
    const char *output_npz; /* NULL: render the result as text into *text */
    int max_print;          /* tensors with more elements print summarized (0: 1000) */
    /* Limits; exceeding one ends the run with an error naming it and the expression being run.
     * 0 means the default; RLY_NO_LIMIT means none. */
    uint64_t max_memory; /* bytes of values live at once, inputs included (default: a quarter
                            of physical memory) */
    uint64_t max_depth;  /* non-tail Relay calls active at once (default: 10^7) */
    double timeout;      /* seconds of wall-clock time (0: none); checked between operations */
    int opt_level;       /* run the default pipeline of this level (0: none) before running */
    rly_engine engine;   /* RLY_ENGINE_DEFAULT (0), _VM or _INTERP */
    int threads;         /* VM kernel threads (0: the default, as rly_session_options.threads);
                            the interpreter uses one */
    /* Probes (docs/tools.md "Numerics", "Profiles"); both engines. */
    int check_numerics;   /* stop at the first operator or fused group whose result holds NaN or
                             Inf made from finite inputs: an error at its location with the
                             statistics of its inputs */
    const char *profile;  /* write a Chrome trace of the run (an event per operator or fused
                             group) to this path */
    char **profile_table; /* with profile: when not NULL, receives the table of the operators
                             with the most time (free with rly_free) */
} rly_run_options;

/* Run the module; on success *text (when output_npz is NULL) is the rendered result, to be freed
 * with rly_free. Errors (bad inputs, a runtime error at a source span) are RLY_STATUS_ERROR or
 * RLY_STATUS_IO with the message in rly_last_error(); an output file is written whole or not at
 * all. */
RLY_API rly_status rly_module_run(rly_module *mod, const rly_run_options *opts, char **text);

/* ---- drawing (`rly viz`; docs/tools.md "Graphs") -------------------------------------------- */
typedef enum rly_draw_format {
    RLY_DRAW_DOT = 0,  /* Graphviz DOT text (`dot -Tsvg` draws it) */
    RLY_DRAW_HTML = 1, /* a self-contained HTML page: inline SVG laid out here, pan and zoom by
                          mouse, nothing fetched */
} rly_draw_format;
/* The dataflow graph of mod (its types are inferred first): each global function a cluster,
 * FuseOps's primitive functions nested clusters named as the VM names them, operator calls,
 * constants, parameters, if/match with their branches, calls of globals (dashed edges to the
 * callee's entry), each edge labelled with the type of the value it carries. Linear in the size
 * of the module, iterative. title: the HTML page's title (NULL: "rly graph"). *out: free with
 * rly_free. Errors (a type error) are RLY_STATUS_ERROR with the message in rly_last_error(). */
RLY_API rly_status rly_module_draw(rly_module *mod, rly_draw_format format, const char *title,
                                   char **out);

/* ---- compiling to executables -------------------------------------------------------------
 * The VM's executables (rly_runtime.h): compile a module, save it as an .rlyx file that
 * librly_runtime loads without the compiler, run one as `rly run` does. */

/* Optimize mod in place with the default pipeline of opt_level (0..3; as rly_module_optimize),
 * then compile it for the VM with the global `entry` (NULL: "main"; a bare expression compiles
 * as an entry of no parameters) as the executable's entry. *out is independent of mod and its
 * context (it may outlive both); free with rly_executable_free. Errors (type errors, a
 * construct the compiler does not support, located) are RLY_STATUS_ERROR. */
RLY_API rly_status rly_module_compile(rly_module *mod, int opt_level, const char *entry,
                                      rly_executable **out);
/* Write exe to path (an .rlyx file), whole or not at all. An executable that calls a
 * user-registered operator (rly_op_register) cannot be saved: RLY_STATUS_ERROR. Before writing,
 * the kernels prepare what they derive from the constants (weights packed in the layout of the
 * matrix-product kernels, Winograd-transformed filters), by running the entry once on
 * zero-filled inputs (at most 10 s; skipped when an input is not a tensor of static shape), and
 * the file holds those forms next to the constants, so that a loaded executable packs nothing:
 * rly_executable_save_with(exe, path, 0). */
RLY_API rly_status rly_executable_save(const rly_executable *exe, const char *path);
/* Flags of rly_executable_save_with. */
enum {
    RLY_SAVE_NO_PREPACK = 1, /* write the constants only (a smaller file; kernels pack at first
                                use, once per loaded executable) */
};
RLY_API rly_status rly_executable_save_with(const rly_executable *exe, const char *path,
                                            unsigned flags);

/* What rly_executable_describe prints. */
typedef enum rly_describe {
    RLY_DESCRIBE_STATS = 1,  /* counts: functions, instructions, registers, packed functions,
                                operator calls, constants and their bytes, inputs, outputs */
    RLY_DESCRIBE_DISASM = 2, /* every function's bytecode and every packed function */
} rly_describe;
/* A text description of exe (what = a mask of rly_describe bits); free *out with rly_free. */
RLY_API rly_status rly_executable_describe(const rly_executable *exe, int what, char **out);

/* Run exe's entry with inputs as rly_module_run takes them (inputs_npz, input_names/paths,
 * fill, seed; matched against the executable's input names) and write or render the result
 * the same way (outputs named by the executable's output names when it came from an ONNX
 * model). entry must be NULL and opt_level 0 (an executable is compiled already), engine
 * DEFAULT or VM. Only tensor inputs can be read or generated. */
RLY_API rly_status rly_executable_run(const rly_executable *exe, const rly_run_options *opts,
                                      char **text);

/* Bind every input of session s as rly_executable_run would (inputs_npz, input_names/paths,
 * fill, seed of opts; the rest is ignored). The session owns the tensors it reads or
 * generates. For `rly bench` and for tests that feed a session from files. */
RLY_API rly_status rly_session_bind_inputs(rly_session *s, const rly_run_options *opts);

/* ---- user-defined operators -------------------------------------------------------------
 * An operator registered here is used like a builtin one: by name in Relay text, checked by its
 * type relation, fused by its pattern; its kernel runs it. Registration is process-wide. */

typedef struct rly_type rly_type; /* a type, owned by its context (interned) */
#define RLY_DIM_ANY (-1)          /* a `?` dimension */
#define RLY_DIM_SYMBOLIC (-2)     /* a named symbolic dimension (`n`) */
RLY_API int rly_type_is_tensor(const rly_type *t);
RLY_API rly_dtype rly_type_dtype(const rly_type *t); /* of a tensor type */
RLY_API int rly_type_ndim(const rly_type *t);        /* of a tensor type */
/* Dimension i of a tensor type: its size, RLY_DIM_ANY or RLY_DIM_SYMBOLIC. */
RLY_API int64_t rly_type_dim(const rly_type *t, int i);
/* The tensor type (dtype, shape[0..ndim)); dims may be RLY_DIM_ANY. NULL on bad arguments,
 * including a shape past the limit (each dim and the product of the known nonzero dims <= 2^62). */
RLY_API const rly_type *rly_type_tensor(rly_ctx *ctx, rly_dtype dt, int ndim, const int64_t *shape);

/* The type relation of a user operator: given the argument types (all known; tensors or tuples),
 * set *out to the result type and return 0, or write the reason to err (err_len bytes) and
 * return nonzero. */
typedef int (*rly_type_rel_fn)(rly_ctx *ctx, const rly_type *const *args, int n_args,
                               const rly_type **out, char *err, size_t err_len, void *user);
struct DLTensor;
/* The kernel of a user operator: compute out from args (DLPack tensors); 0 on success. */
typedef int (*rly_kernel_fn)(const struct DLTensor *args, int n_args, struct DLTensor *out,
                             void *user);

/* Fusion patterns (Relay's TOpPattern numbering). */
typedef enum rly_op_pattern {
    RLY_PATTERN_ELEMWISE = 0,
    RLY_PATTERN_BROADCAST = 1,
    RLY_PATTERN_INJECTIVE = 2,
    RLY_PATTERN_COMM_REDUCE = 3,
    RLY_PATTERN_OUT_ELEMWISE_FUSABLE = 4,
    RLY_PATTERN_OPAQUE = 8,
} rly_op_pattern;

typedef struct rly_op_def {
    const char *name; /* e.g. "my.scale"; must not name an existing operator */
    int n_args;       /* number of arguments (>= 0) */
    rly_op_pattern pattern;
    rly_type_rel_fn rel;  /* required */
    rly_kernel_fn kernel; /* may be NULL (the operator then type-checks but cannot run) */
    void *user;           /* passed to rel and kernel */
    const char *doc;      /* one line, may be NULL */
} rly_op_def;

/* Register an operator (the definition is copied). RLY_STATUS_INVALID when the name is taken
 * or the definition is incomplete. */
RLY_API rly_status rly_op_register(const rly_op_def *def);

/* The operator table as text: one line per operator (name, arguments, fusion pattern, doc) and
 * its attributes with their types and defaults. With a name, only that operator (or
 * RLY_STATUS_ERROR when unknown). *out is malloc'ed; free with rly_free. */
RLY_API rly_status rly_ops_describe(const char *name, char **out);

/* ---- ONNX ------------------------------------------------------------------------------------ */

/* Import an ONNX model file into a new type-checked module of ctx whose @main takes the graph's
 * inputs and returns its outputs. input_shapes (or NULL) gives concrete shapes for inputs with
 * dynamic dims: "name:[1,3,224,224] other:[8]". Weights stay in the mapped file (released with
 * ctx). Errors (the reader's, every unsupported operator at once, converter and type errors at
 * ONNX node names) are in rly_last_error(). */
RLY_API rly_status rly_module_import_onnx(rly_ctx *ctx, const char *path, const char *input_shapes,
                                          rly_module **out);
/* As rly_module_import_onnx, but the model's floating-point initializers of rank >= 1 (its
 * weights) become parameters of @main after the graph inputs instead of constants, so
 * rly_module_gradient differentiates with respect to them; their values are written to
 * params_npz, an .npz keyed by parameter name (what rly run --inputs binds). Integer and bool
 * initializers, float scalars and the settings nodes read at import time (Resize scales, Clip
 * bounds, ...; docs/onnx.md) stay constants. */
RLY_API rly_status rly_module_import_onnx_params(rly_ctx *ctx, const char *path,
                                                 const char *input_shapes, const char *params_npz,
                                                 rly_module **out);
/* A text description of an ONNX model: IR version, opsets, inputs, outputs, operator histogram
 * and the operators the importer does not support. Free with rly_free. */
RLY_API rly_status rly_onnx_info(const char *path, char **text);
/* Run one ONNX test-case folder (model.onnx + test_data_set_N/{input,output}_K.pb) through the
 * interpreter or the VM (engine; the VM compiles the model once per case) and compare with its
 * outputs. opt_level 1..3 first optimizes the imported module with the default pipeline of
 * that level (as rly_module_optimize); 0 runs it as imported. *passed is 1 or 0; *report (free
 * with rly_free) gives the reason of a failure. RLY_STATUS_OK unless the run itself could not
 * happen. */
RLY_API rly_status rly_onnx_test_case(const char *dir, int opt_level, rly_engine engine,
                                      int *passed, char **report);

#ifdef __cplusplus
}
#endif
#endif /* RLY_RLY_H */
