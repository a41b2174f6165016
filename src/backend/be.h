/* be.h - what the VM compiler's files share (private to src/backend):
 *   compile.c  the module driver: which functions exist, the executable's tables (constants,
 *              constructors, strings, packed functions), the entry's interface, be_compile;
 *   expr.c     one function's body to bytecode: an explicit task stack over the graph-form
 *              IR, with the interpreter's evaluation order and its memo of shared nodes;
 *   match.c    `match` to decision trees;
 *   packed.c   operator calls and Primitive functions to packed functions or VM_SCALAR code;
 *   kill.c     VM_KILL at the last use of each value register;
 *   disasm.c   the text form of an executable (be_disasm).
 * Everything an executable holds is allocated in its arena (exe->arena); the compiler's own
 * scratch is malloc'ed and freed before be_compile returns. */
#ifndef RLY_BACKEND_BE_H
#define RLY_BACKEND_BE_H

#include "backend/backend.h"
#include "ops/ops.h"

#define BE_NOREG UINT32_MAX

/* What a VM function is made from. */
typedef enum BeFuncKind {
    BF_GLOBAL, /* a global's Function */
    BF_LAMBDA, /* a function literal, lifted: its captured variables become its first params */
    BF_PRIM,   /* a Primitive=1 literal used as a value: its body is one packed call */
    BF_CTOR,   /* a constructor used as a value: builds the constructor value */
    BF_EXPR,   /* a module's bare expression, as an entry of no parameters */
} BeFuncKind;

typedef struct BeFunc {
    BeFuncKind kind;
    const char *name;    /* in exe->arena */
    Function *fn;        /* BF_GLOBAL, BF_LAMBDA, BF_PRIM */
    Expr *body;          /* BF_EXPR: the expression; else fn->body */
    Var *self;           /* BF_LAMBDA bound by a let that it names (let-rec), else NULL */
    uint32_t n_caps;     /* BF_LAMBDA: captured variables (their values come first) */
    Var **caps;          /* malloc'ed */
    Constructor *ctor;   /* BF_CTOR */
    uint32_t n_params;   /* including the captured values */
    uint8_t *param_kind; /* malloc'ed, n_params VmRegKind: known before the body compiles */
    uint8_t result_kind;
    VmFunction vm; /* filled when compiled (arrays in exe->arena) */
    bool compiled;
} BeFunc;

typedef struct Be {
    Module *m;
    Ctx *ctx;
    VmExec *exe;
    Arena *arena;        /* &exe->arena */
    Vec(BeFunc *) funcs; /* index = VM function index */
    PtrMap func_of;      /* GlobalVar / Function / Constructor node -> index + 1 */
    Vec(VmPacked) packed;
    PtrMap packed_of;  /* Primitive Function node -> packed index + 1 */
    StrMap packed_key; /* -O0 single-operator packed functions by operator and attributes */
    PtrVec consts;     /* Value* (immortal tensors over arena bytes) */
    PtrMap const_of;   /* Constant node -> index + 1 */
    Vec(VmCtor) ctors;
    PtrMap ctor_of; /* Constructor node -> index + 1 */
    PtrVec strs;    /* const char* in the arena; strs[0] = "" */
    StrMap str_of;  /* text -> index + 1 */
    PtrMap pure;    /* pass_is_pure memo */
    /* For the memory planner (plan.c): each INVOKE_PACKED carries imm = site + 1 while
     * compiling, site_types[site] is its call's result type; packed_types[p] holds the type of
     * each node of packed function p when it comes from a Primitive function (malloc'ed), NULL
     * for a shared single-operator packed function (its node's type is the site's). */
    PtrVec site_types;
    PtrVec packed_types;
    bool borrow_consts; /* BeOptions.borrow_consts */
    bool failed;        /* an error was reported into ctx->diags */
} Be;

/* ---- compile.c ---------------------------------------------------------------------------- */

/* Report a located error (once compilation fails, later errors are still reported). */
void be_error(Be *be, Span span, const char *fmt, ...) RLY_PRINTF(3, 4);
/* The index of s in the string table (interned); "" is 0. */
uint32_t be_str(Be *be, const char *s);
/* The string index of span's "file:line:col", 0 when the span has no file. */
uint32_t be_loc(Be *be, Span span);
/* An arena copy of n elements of `elem` bytes at p (p may be NULL when n is 0); never NULL. */
void *be_dup(Be *be, const void *p, size_t n, size_t elem);
/* An arena copy of s. */
const char *be_strdup(Be *be, const char *s);
/* The register kind of values of type t: an unboxed scalar for 0-d bool/int32/int64/float32/
 * float64 tensors, VM_RK_VALUE for everything else (type variables included). */
uint8_t be_kind_of(Type *t);
uint8_t be_kind_of_dtype(rly_dtype dt);   /* VM_RK_VALUE for dtypes that are not unboxed */
rly_dtype be_dtype_of_kind(uint8_t kind); /* of a scalar kind */
/* The index of the constant (an immortal tensor copied into the arena). */
uint32_t be_const(Be *be, Constant *c);
/* The index of constructor ct in the executable's table. */
uint32_t be_ctor(Be *be, Constructor *ct);
/* VM function indexes, created on first request (compiled later, from the worklist). */
uint32_t be_func_global(Be *be, GlobalVar *gv, Span use);
uint32_t be_func_lambda(Be *be, Function *fn, Var *self, const char *outer);
uint32_t be_func_prim(Be *be, Function *fn, const char *outer);
uint32_t be_func_ctor(Be *be, Constructor *ct);
/* Is fn a Primitive=1 function (FuseOps's groups)? */
bool be_is_primitive(const Function *fn);

/* ---- expr.c --------------------------------------------------------------------------------- */

/* Compile f's body into f->vm. False after reporting an error. */
bool be_compile_func(Be *be, BeFunc *f);

/* The per-function builder that expr.c, match.c and packed.c share. */
typedef struct FB FB;
uint32_t fb_reg(FB *fb, uint8_t kind);
uint8_t fb_kind(const FB *fb, uint32_t reg);
/* Append an instruction (with the location of span); returns its index. */
uint32_t fb_emit(FB *fb, VmInstr in, Span span);
uint32_t fb_pc(const FB *fb);
VmInstr *fb_at(FB *fb, uint32_t pc);
/* Append n operands to the pool; the index of the first. */
uint32_t fb_pool(FB *fb, const uint32_t *ops, uint32_t n);
/* The register holding src's value in kind `kind` (src itself, or a new register after a
 * VM_BOX / VM_UNBOX). */
uint32_t fb_as_kind(FB *fb, uint32_t src, uint8_t kind, Span span);
/* Make dst hold src's value (MOVE, BOX or UNBOX; nothing when they are the same register). */
void fb_move(FB *fb, uint32_t dst, uint32_t src, Span span);
uint32_t fb_load_imm_i(FB *fb, uint8_t kind, int64_t v, Span span);
Be *fb_be(FB *fb);
/* The register bound to v in this function, BE_NOREG when none; bind one. */
uint32_t fb_var(FB *fb, Var *v);
void fb_bind_var(FB *fb, Var *v, uint32_t reg);
/* Forget code emitted from pc on (the decision-tree fallback); registers stay allocated. */
void fb_truncate(FB *fb, uint32_t pc, uint32_t pool_len);
uint32_t fb_pool_len(const FB *fb);

/* ---- kill.c ------------------------------------------------------------------------------- */

/* The registers instruction `in` reads through its fixed operands, into out (at most two);
 * their number. *pooled: it also reads the registers of its operand pool (in->args, in->n). */
uint32_t be_instr_reads(const VmInstr *in, uint32_t *out, bool *pooled);

/* Insert VM_KILLs at the last uses of VALUE registers in a function's code (n instructions,
 * locations alongside; malloc'ed, replaced by new malloc'ed arrays; jumps retargeted). Does
 * nothing when the code jumps backward (the compiler never does). */
void be_insert_kills(VmInstr **code, uint32_t **locs, uint32_t *n, const uint32_t *pool,
                     const uint8_t *kinds, uint32_t n_regs, uint32_t n_params);

/* ---- plan.c ------------------------------------------------------------------------------- */

/* Plan the memory of every function that allows it (vm.h, "memory plans"; docs/vm.md): sets
 * each VmFunction's plan or no_plan, and clears the site marks (imm) of INVOKE_PACKED. Called
 * on the assembled executable, before validation. */
void be_plan_memory(Be *be);

/* ---- match.c ------------------------------------------------------------------------------ */

/* The decision tree of match m over the value in register `data`: tests, field loads and the
 * variable bindings of each leaf. Each leaf ends in a VM_GOTO whose target (a) is to be
 * patched to its clause's body: leaf_pcs receives (clause, pc) pairs; a value no clause
 * accepts reaches a VM_FATAL. */
typedef struct BeLeaf {
    uint32_t clause, pc;
} BeLeaf;
typedef Vec(BeLeaf) BeLeafVec;
void be_match_tree(FB *fb, Match *m, uint32_t data, BeLeafVec *leaves);

/* ---- packed.c ------------------------------------------------------------------------------ */

/* Emit the call of operator `op_expr` (a Call's callee) on the argument registers args[0..n)
 * (any kinds) as a VM_SCALAR instruction or a packed call; the result goes to a register of
 * call's typed kind, returned (dst when dst != BE_NOREG). */
uint32_t be_emit_op_call(FB *fb, Call *call, const uint32_t *args, uint32_t n, uint32_t dst);
/* Emit the call of Primitive function fn on args: VM_SCALAR code when everything is scalar,
 * else one packed call. Same result convention; BE_NOREG (nothing emitted) when fn's body is
 * not a dataflow program of operators. */
uint32_t be_emit_prim_call(FB *fb, Call *call, Function *fn, const uint32_t *args, uint32_t n,
                           uint32_t dst);
/* The packed function of Primitive fn (built once per node); -1 when its body is not a
 * dataflow program of operators (the caller then compiles it as an ordinary function). */
int32_t be_packed_of_prim(Be *be, Function *fn);

#endif /* RLY_BACKEND_BE_H */
