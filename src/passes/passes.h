/* passes.h - program transforms over a type-checked module. The interface of src/passes/
 * (besides grad.h, the per-operator gradients). */
#ifndef RLY_PASSES_H
#define RLY_PASSES_H

#include "ir/ir.h"

typedef enum GradMode {
    GRAD_HIGHER, /* the whole language: closures, references, ADTs, globals, recursion */
    GRAD_FIRST,  /* dataflow programs only; emits a plain dataflow program */
} GradMode;

/* Reverse-mode AD (docs/autodiff.md). m must have passed type inference; @entry is a function
 * fn(T1..Tn) -> R without type parameters whose parameters and result are tensors or (nested)
 * tuples of tensors. Defines @out_name : fn(T1..Tn) -> (R, (T1..Tn)), the value and the
 * gradient of the sum of every floating-point element of R with respect to every input
 * (replacing a function of that name); the higher-order mode also adds @<g>_rev for every
 * global it reaches. Re-runs type inference over m. Returns false after reporting every
 * problem into ctx->diags (each use of an operator without a gradient, each construct the
 * first-order mode does not take, at its span). */
bool pass_gradient(Module *m, const char *entry, GradMode mode, const char *out_name);

/* ======================================================================================
 * The pass manager (pass.c). docs/passes.md says what each pass does and who writes
 * checked_type when.
 *
 * A pass is a row of the registry (passes.def lists one PASS(c_name) per file; each file
 * defines `const PassDef pass_<c_name>`): TVM's name, its opt level, its parameters with
 * defaults, and the function that runs it. A pipeline is a list of passes with arguments,
 * `FoldConstant,FuseOps(fuse_opt_level=2)`, or the default pipeline of an opt level.
 *
 * Types: the pipeline infers types once at its start. A pass keeps them valid: every node it
 * builds gets its checked_type as it is built (pass_op_call, pass_retype, pass_rebuild), so
 * no pass needs inference after it. PassOptions.verify_types re-infers the whole module after
 * every pass and reports any node whose type a pass got wrong (the tests run with it).
 * Effects: no pass drops, duplicates or reorders a reference write or a call that may do one
 * (pass_is_pure says which expressions are free of effects), and nothing in an if/match arm is
 * evaluated before the arm is chosen.
 * ====================================================================================== */

typedef enum PassKind {
    PASS_MODULE,   /* run_module transforms the whole module in place */
    PASS_FUNCTION, /* run_expr rewrites each global function and the bare expression */
} PassKind;

/* The arguments of one pass in a pipeline: every declared parameter, given or defaulted, as
 * text ("2", "True", "NHWC", "[1, 2]"), checked against its declared type. */
typedef struct PassArg {
    const char *key, *val;
} PassArg;
typedef struct PassArgs {
    uint32_t n;
    PassArg *items;
} PassArgs;

typedef struct PassCtx {
    Ctx *ctx;
    int opt_level;        /* the pipeline's (a pass parameter of -1 often means "this") */
    const PassArgs *args; /* this pass's arguments */
    const char *name;     /* this pass's name, for messages */
} PassCtx;

/* Argument values (the key must be a declared parameter: a bug otherwise). */
int64_t pass_arg_int(const PassCtx *pc, const char *key);
bool pass_arg_bool(const PassCtx *pc, const char *key);
double pass_arg_float(const PassCtx *pc, const char *key);
const char *pass_arg_str(const PassCtx *pc, const char *key); /* quotes removed */

typedef struct PassDef {
    const char *name; /* TVM's registered name: "FoldConstant" */
    int opt_level;    /* runs in the default pipeline of this level and above */
    PassKind kind;
    const char *params; /* "name:type=default,..." with type int|bool|float|str; "" for none */
    /* PASS_MODULE: transform m in place (definitions replaced, added or removed). False after
     * reporting an error into ctx->diags. */
    bool (*run_module)(PassCtx *pc, Module *m);
    /* PASS_FUNCTION: the rewritten expression (a Function for a global; e itself when nothing
     * changes); NULL after reporting an error. */
    Expr *(*run_expr)(PassCtx *pc, Module *m, Expr *e);
    const char *doc; /* one line */
} PassDef;

/* The registry, in passes.def order. */
size_t pass_count(void);
const PassDef *pass_at(size_t i);
const PassDef *pass_lookup(const char *name); /* NULL when unknown */

typedef struct PassOptions {
    int opt_level;           /* 0..3: which passes of the default pipeline run */
    const char *passes;      /* NULL: the default pipeline; else "A,B(k=v,...),..." run in order */
    const char *required;    /* comma-separated names run whatever their level; may be NULL */
    const char *disabled;    /* comma-separated names never run; may be NULL */
    const char *print_after; /* a pass name or "all": the module is printed after it */
    bool time_passes;        /* a table of the time each pass took */
    bool verify_types;       /* re-infer after each pass and check every node's type */
    StrBuf *report;          /* where print_after and time_passes write (NULL: stderr) */
} PassOptions;

/* Run a pipeline over m in place. Infers types first (once; not when pass_module_typed). False
 * after reporting an error into ctx->diags (a bad pipeline text, a pass that failed, a type a
 * pass got wrong). */
bool pass_run(Module *m, const PassOptions *o);
/* Does every node of m that inference types carry a complete type? True after inference, an
 * import (which infers) and any pipeline (passes keep types valid); false once a definition was
 * added or replaced by untyped nodes. pass_run and rly_module_run infer only when it is false,
 * so a module is inferred once on its way from a frontend through the passes to a run. */
bool pass_module_typed(Module *m);
/* The default pipeline (the names, comma-separated) of an opt level. */
const char *pass_default_pipeline(void);

/* ---- for passes: typed construction ----------------------------------------------------- */

/* A call of operator `op` typed by its relation; NULL with an error in ctx->diags when the
 * relation refuses the arguments (each argument must carry its checked_type). */
Expr *pass_op_call(Ctx *ctx, const char *op, uint32_t n_args, Expr *const *args, const Attrs *attrs,
                   Span span);
/* Set the checked_type of e (a node just built from typed children) from its children, as
 * inference would: an operator call by its relation, a call of a monomorphic function by its
 * result type, a tuple from its fields, a let from its body, ... A call of a polymorphic
 * function or a constructor keeps `fallback`. False (an error in ctx->diags) when an operator's
 * relation refuses. */
bool pass_retype(Ctx *ctx, Expr *e, Type *fallback);
/* A Rewriter post callback for passes that rebuild nodes: e (rebuilt from orig when a child
 * changed) gets its type with pass_retype(orig's type as fallback). */
Expr *pass_rebuild(Rewriter *rw, Expr *orig, Expr *e);
/* Rewrite every function of m (and its expression) in place with rw. */
void pass_rewrite_module(Rewriter *rw, Module *m);
/* Whether evaluating e is free of effects, so that it may be dropped, duplicated or moved:
 * no reference is created, read or written, and no function or closure is called (a callee may
 * do any of these; a function literal is a value, pure whatever its body). Conservative;
 * memoized in `memo` (node -> answer) across calls; free it with ptrmap_free. */
bool pass_is_pure(PtrMap *memo, Expr *e);

/* ---- for passes: let chains and refined types (rewrite_util.c) ----------------------------- */

/* How pass_rewrite_lets treats each let of a chain. */
typedef struct LetHooks {
    /* Optional; asked before orig's value is rewritten. False drops the let and its value
     * unrewritten; its variable must have no use left in the rewritten body. */
    bool (*keep_value)(Rewriter *rw, Let *orig);
    /* Optional; asked after orig's value is rewritten (to `value`), before the body is: what
     * orig's variable stands for in the rewritten body. A Var keeps the let with that binder;
     * with *drop set the let is dropped and the returned expression (NULL when the variable has
     * no use left) replaces the variable. Absent: the let is kept with its variable rewritten. */
    Expr *(*bind)(Rewriter *rw, Let *orig, Expr *value, bool *drop);
} LetHooks;
/* Rewrite the chain of lets starting at `let` (let x1 = v1; let x2 = v2; ... body) with rw, for
 * a Rewriter's pre callback on a Let: the chain is walked in a loop, so a 10^5-let ANF chain
 * costs no C recursion; each value and the final body go through ir_rewrite (recursion only over
 * the nesting of scopes: a let chain inside a value). A let-bound function's variable is
 * rewritten before its value (the function may call itself). Rebuilt lets get their type
 * (pass_retype) and are not offered to rw->post. Returns the rewritten chain; every let of it is
 * recorded in rw->memo. */
Expr *pass_rewrite_lets(Rewriter *rw, Expr *let, const LetHooks *hooks);

/* A function pass rewrote `old` (a global's function or m's bare expression) into `e`, and some
 * node of e got a more precise type than the node it replaced (a call of `?` shape folded into a
 * constant, a dyn.* call made static). Such a type travels further than pass_retype follows it
 * (let-bound and parameter variables, if branches, the callers of a global), so this puts e in
 * old's place in m and infers m's types again. If the refined module no longer type-checks (a
 * folded value contradicts an annotation: the program would have failed when it ran), old is put
 * back, the types are inferred again and the diagnostics dropped. Returns what m now holds. */
Expr *pass_refine_types(Module *m, Expr *old, Expr *e);

/* Diagnostics a pass reports only if what it tries fails for good: mark, then roll back to the
 * mark (the messages are freed; with `why`, rendered into it first). */
typedef struct DiagMark {
    size_t items, errors;
} DiagMark;
DiagMark pass_diag_mark(const Ctx *ctx);
void pass_diag_rollback(Ctx *ctx, DiagMark mark, StrBuf *why);

/* ---- constant folding (fold_constant.c) ---------------------------------------------------- */

/* Results with more elements than this stay calls (not folded). */
#define PASS_FOLD_MAX_ELEMS ((size_t)1 << 20)

/* A folder: evaluates operator calls on constants with the reference interpreter, which it
 * creates at its first fold and keeps, so folding many calls (the ONNX importer folds as it
 * builds) costs one interpreter. */
typedef struct PassFolder PassFolder;
/* static_only: fold only calls whose result type gives every dim (the importer); otherwise a
 * result of unknown shape is evaluated under a memory limit and kept when small enough.
 * fold_qnn: also fold qnn.* operators. */
PassFolder *pass_folder_new(Ctx *ctx, bool static_only, bool fold_qnn);
void pass_folder_free(PassFolder *f); /* NULL is a no-op */
/* The value of `call`, a typed call of an operator whose arguments are constants or tuples of
 * constants, as a typed Constant or Tuple of Constants; NULL when it is not folded: an operator
 * that must not be (debug, trap, annotations, user operators, qnn.* without fold_qnn), a
 * result over PASS_FOLD_MAX_ELEMS, or a run-time error (its diagnostic is dropped; with `why`,
 * rendered into it), which is left for the program's run to report. */
Expr *pass_fold_call(PassFolder *f, Expr *call, StrBuf *why);
/* FoldConstant over e (a function or an expression of m), with `hook` (optional) offered every
 * operator call after its arguments are rewritten and before it is folded; the hook returns a
 * typed replacement or the call itself. DynamicToStatic folds through this. Returns the
 * rewritten e (e itself when nothing changed). */
typedef Expr *(*PassCallHook)(Ctx *ctx, Expr *call, void *state);
Expr *pass_fold_constant_expr(Module *m, Expr *e, bool fold_qnn, PassCallHook hook, void *state);

#endif /* RLY_PASSES_H */
