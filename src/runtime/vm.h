/* vm.h - the VM: bytecode, executables and the machine that runs them. The interface between
 * src/backend (which compiles a typed, optimized Relay module into a VmExec) and src/runtime
 * (which validates, saves, loads and runs one). Nothing here sees the IR: an executable is
 * self-contained, so librly_runtime runs one without any compiler source.
 *
 * The machine (after TVM's Relay VM; docs/vm.md says where rly differs):
 *   - a register machine; every function has n_regs registers, the first n_params of which are
 *     its parameters (for a closure's code: the captured values first, then the parameters);
 *   - frames live on a heap stack, so recursion depth is bounded by memory (and RtLimits), not
 *     by the C stack; Invoke/InvokeClosure with VM_F_TAIL reuse the frame (proper tail calls);
 *   - each register has a static kind (VmFunction.reg_kind): VM_RK_VALUE holds a Value* (an
 *     owned reference, or NULL), the scalar kinds hold an unboxed 0-d tensor of that dtype in
 *     VmReg (bool/int32/int64 in .i, sign-extended, bool 0/1; float32 in .f; float64 in .d).
 *     Scalar registers never own memory. VM_BOX / VM_UNBOX convert; Invoke requires the
 *     argument and result kinds to equal the callee's (the loader checks it), InvokeClosure and
 *     Ret from a closure convert at run time, because a closure's code is known only then.
 *   - operators run through "packed" functions: one fused primitive each, a small dataflow
 *     program of operator calls with pre-lowered attributes (KAttr rows), run as the kernels
 *     the registry binds (reference kernels for now) in sequence. Scalar primitives of the
 *     simple arithmetic ops compile to VM_SCALAR instructions on unboxed registers instead.
 *
 * Every index in an instruction (register, function, packed, constant, constructor, jump
 * target, operand-pool slice) is validated once, by vm_exec_validate, before anything runs:
 * the executor itself trusts a validated executable and never checks bounds again. */
#ifndef RLY_RUNTIME_VM_H
#define RLY_RUNTIME_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "runtime/value.h"
#include "support/support.h"

/* ---- registers -------------------------------------------------------------------------- */

typedef union VmReg {
    Value *v;  /* VM_RK_VALUE: owned, or NULL */
    int64_t i; /* VM_RK_BOOL, VM_RK_I32 (sign-extended), VM_RK_I64 */
    float f;   /* VM_RK_F32 */
    double d;  /* VM_RK_F64 */
} VmReg;

typedef enum VmRegKind {
    VM_RK_VALUE = 0,
    VM_RK_BOOL, /* Tensor[(), bool] */
    VM_RK_I32,  /* Tensor[(), int32] */
    VM_RK_I64,  /* Tensor[(), int64] */
    VM_RK_F32,  /* Tensor[(), float32] */
    VM_RK_F64,  /* Tensor[(), float64] */
    VM_RK_COUNT
} VmRegKind;

/* The dtype of a scalar kind, and the scalar kind of a dtype (VM_RK_VALUE when not unboxed). */
rly_dtype vm_rk_dtype(uint8_t rk);
uint8_t vm_rk_of_dtype(rly_dtype dt);

/* ---- instructions ----------------------------------------------------------------------------
 * Fixed-size records. `dst` is the destination register, a/b/c fixed operands, and the variable
 * operands (registers unless said otherwise) are pool[args .. args + n) of the function's
 * operand pool. Jump targets are absolute instruction indices within the function. */

typedef enum VmOpcode {
    VM_MOVE,             /* dst = a (same kind; a VALUE is retained) */
    VM_RET,              /* return a */
    VM_INVOKE,           /* dst = funcs[a](args...); flags VM_F_TAIL */
    VM_INVOKE_CLOSURE,   /* dst = (closure in a)(args...); flags VM_F_TAIL */
    VM_INVOKE_PACKED,    /* dst = packed[a](args...): a tensor, or a tuple of tensors; tuple
                            arguments are flattened as kernels take them */
    VM_ALLOC_STORAGE,    /* dst = a storage of imm bytes (alignment 64); reserved for planning */
    VM_ALLOC_TENSOR,     /* dst = tensor of dtype `dtype`, shape pool[args..args+n) (immediate
                            dims, not registers) in storage a at byte offset b; reserved */
    VM_ALLOC_TENSOR_REG, /* dst = tensor of dtype `dtype` whose shape is the int64 tensor in b,
                            in storage a at offset c; reserved */
    VM_ALLOC_ADT,        /* dst = constructor value ctors[a] of the n fields args (VALUE regs) */
    VM_ALLOC_TUPLE,      /* dst = tuple of the n fields args (VALUE regs) */
    VM_ALLOC_CLOSURE,    /* dst = closure of funcs[a] capturing the n values args (VALUE regs) */
    VM_GET_FIELD,        /* dst = field b of the tuple or constructor value in a (retained) */
    VM_GET_TAG,          /* dst (I32) = the tag of the constructor value in a */
    VM_IF,               /* if the bool in a (BOOL reg, or a VALUE 0-d bool tensor) is false,
                            jump to b; else fall through */
    VM_GOTO,             /* jump to a */
    VM_LOAD_CONST,       /* dst = consts[a] (retained) */
    VM_LOAD_IMM,         /* dst (a scalar kind) = imm (int kinds) or fimm (float kinds) */
    VM_SHAPE_OF,         /* dst = shape of the tensor in a, as a 1-d int64 tensor */
    VM_RESHAPE_TENSOR,   /* dst = the tensor in a viewed with the shape in the int64 tensor b */
    VM_KILL,             /* release register a now (its last use) */
    VM_FATAL,            /* stop with the message strs[a] (an unmatched `match`, ...) */
    VM_REF_NEW,          /* dst = a new reference cell holding a (VALUE) */
    VM_REF_READ,         /* dst = the contents of the cell in a (retained) */
    VM_REF_WRITE,        /* cell a := b (VALUE); dst = () */
    VM_BOX,              /* dst (VALUE) = 0-d tensor of scalar register a */
    VM_UNBOX,            /* dst (scalar kind) = the 0-d tensor in a, checked (dtype, rank) */
    VM_SCALAR,           /* dst = sub(a, b) on scalar registers; see VmScalarOp */
    VM_OPCODE_COUNT
} VmOpcode;

#define VM_F_TAIL 1u /* flags of VM_INVOKE / VM_INVOKE_CLOSURE: a call in tail position */

/* Scalar operations: the reference kernels' semantics exactly (src/kernels/ref/binary.c,
 * unary.c): integer arithmetic wraps (two's complement), integer division truncates and a
 * division by zero is a run-time error, floor_divide/floor_mod floor, comparisons give BOOL,
 * float32 rounds after each operation. Binary ops read a and b of kind `rk`; VM_SC_CAST
 * converts a (kind `rk`) to dst's kind as `cast` does. */
typedef enum VmScalarOp {
    VM_SC_ADD,
    VM_SC_SUB,
    VM_SC_MUL,
    VM_SC_DIV,
    VM_SC_MOD,
    VM_SC_FLOOR_DIV,
    VM_SC_FLOOR_MOD,
    VM_SC_MAX,
    VM_SC_MIN,
    VM_SC_POW,
    VM_SC_EQ,
    VM_SC_NE,
    VM_SC_LT,
    VM_SC_LE,
    VM_SC_GT,
    VM_SC_GE,
    VM_SC_AND,
    VM_SC_OR,
    VM_SC_XOR, /* logical on BOOL, bitwise on ints */
    VM_SC_NOT,
    VM_SC_NEG,
    VM_SC_ABS, /* unary: b unused */
    VM_SC_CAST,
    VM_SC_COUNT
} VmScalarOp;

typedef struct VmInstr {
    uint8_t op;    /* VmOpcode */
    uint8_t sub;   /* VM_SCALAR: VmScalarOp */
    uint8_t rk;    /* VM_SCALAR: the operands' kind; VM_LOAD_IMM: dst's kind */
    uint8_t flags; /* VM_F_* */
    uint32_t dst;
    uint32_t a, b, c;
    uint32_t n, args; /* variable operands: pool[args .. args + n) */
    uint32_t dtype;   /* VM_ALLOC_TENSOR(_REG): rly_dtype */
    union {
        int64_t imm; /* VM_LOAD_IMM (int kinds), VM_ALLOC_STORAGE (bytes) */
        double fimm; /* VM_LOAD_IMM (float kinds) */
    };
} VmInstr;

/* ---- functions, packed functions, constructors, the executable ---------------------------- */

/* A value type as a session reports it (input and output types of the entry function). */
typedef struct VmTypeDesc {
    bool is_tensor; /* false: anything else (tuple, function, ADT, reference) */
    uint32_t dtype; /* rly_dtype */
    uint32_t ndim;
    const int64_t *shape; /* ndim dims; -1 for `?` */
    const char *text;     /* the Relay type as text, for messages ("Tensor[(1, 3), float32]") */
} VmTypeDesc;

/* ---- memory plans (docs/vm.md, "Memory planning"; added by the planner helper) ------------
 * A function whose tensors all have static shapes may carry a plan: every tensor that a packed
 * call at a planned site creates (packed outputs and packed intermediates) lives at a fixed
 * offset in one arena per function, allocated once per Vm and reused by every activation.
 * Time is counted in plan steps: instruction pc takes one step, an INVOKE_PACKED of n nodes
 * takes max(n, 1) (node k at step start + k). A buffer is live over [start, end] (end
 * VM_PLAN_FOREVER: the entry's output, live until the next run). Two buffers live at the same
 * step never share bytes, except a buffer written in place over its `inplace` source, whose
 * interval ends at the step where the new one starts, and a piece of a concatenate's result
 * (`inplace` = that buffer | VM_PLAN_PIECE): the value that the concatenate copies to those
 * bytes is made there, so the copy is skipped; the piece ends where the result starts. */
#define VM_PLAN_NONE UINT32_MAX
#define VM_PLAN_FOREVER UINT32_MAX
#define VM_PLAN_PIECE 0x80000000u
/* The buffer a plan buffer's `inplace` makes it a piece of, or VM_PLAN_NONE. */
static inline uint32_t vm_plan_piece_of(uint32_t inplace) {
    return inplace != VM_PLAN_NONE && (inplace & VM_PLAN_PIECE) ? inplace & ~VM_PLAN_PIECE
                                                                : VM_PLAN_NONE;
}

typedef struct VmPlanBuf {
    uint64_t offset; /* in the arena; a multiple of 64 */
    uint64_t nbytes; /* the elements of dtype/shape times the element size */
    uint32_t dtype;  /* rly_dtype */
    uint32_t ndim;
    const int64_t *shape;
    uint32_t start, end; /* live steps, inclusive */
    uint32_t inplace;    /* the buffer this one overwrites in place, or VM_PLAN_NONE; or
                          * VM_PLAN_PIECE | the concatenate result it is a piece of */
} VmPlanBuf;

/* The planned outputs of one INVOKE_PACKED: slots[first .. first + n) name a buffer (or
 * VM_PLAN_NONE: allocated at run time) for each output of each VM_NODE_CALL node, in node
 * order (out_tuple nodes have n_out outputs, others one). */
typedef struct VmPlanSite {
    uint32_t pc;
    uint32_t first, n;
} VmPlanSite;

typedef struct VmPlan {
    uint64_t arena_bytes;
    uint32_t n_bufs;
    const VmPlanBuf *bufs;
    uint32_t n_sites; /* by increasing pc */
    const VmPlanSite *sites;
    uint32_t n_slots;
    const uint32_t *slots;
    uint32_t n_inplace; /* buffers with inplace != VM_PLAN_NONE (statistics) */
} VmPlan;

typedef struct VmFunction {
    const char *name;  /* the global's name; lifted closures "outer$lambda3"; for messages */
    uint32_t n_params; /* including captured values, which come first */
    uint32_t n_captured;
    uint32_t n_regs;
    const uint8_t *reg_kind; /* n_regs VmRegKind */
    uint8_t result_kind;
    uint32_t n_code;
    const VmInstr *code;
    uint32_t n_pool;
    const uint32_t *pool;
    const uint32_t *loc; /* n_code: index into VmExec.strs of "file:line:col", 0 for none */
    /* Added by the planner: the memory plan (NULL: every tensor is allocated at run time), and
     * for a compiled executable why there is none (NULL when planned or loaded from a file). */
    const VmPlan *plan;
    const char *no_plan;
} VmFunction;

/* A packed (primitive) function: a dataflow program over values numbered 0.. in order: the
 * n_inputs inputs first (a tuple input is one value), then one value per node. The result is
 * value `result` (a tensor, or a tuple of tensors). */
typedef enum VmNodeKind {
    VM_NODE_CALL,  /* operator op_id on args (value ids); attrs pre-lowered */
    VM_NODE_TUPLE, /* a tuple of args */
    VM_NODE_FIELD, /* field `index` of tuple value args[0] */
    VM_NODE_CONST, /* consts[index] */
} VmNodeKind;

typedef struct VmNode {
    uint8_t kind;   /* VmNodeKind */
    uint32_t op_id; /* VM_NODE_CALL: OP_ID_* (support/ops.def) */
    uint32_t index; /* VM_NODE_FIELD: the field; VM_NODE_CONST: the constant */
    uint32_t n_args;
    const uint32_t *args;
    uint32_t n_attrs; /* VM_NODE_CALL: every schema row in order, defaults filled */
    const KAttr *attrs;
    KernelFn fn;  /* bound at load/compile by the kernel registry; not serialized */
    uint32_t loc; /* index into VmExec.strs, 0 for none */
    /* Added by the executor (vmr): a kernel needs its caller to say how many results it makes
     * (KCall.out_tuple/n_out: split, topk, unique check it). VM_NODE_CALL only: out_tuple false
     * means one tensor (n_out is then ignored, 0 or 1); true means a tuple of n_out tensors.
     * The compiler fills them from the call's type; the file format must save them. */
    bool out_tuple;
    uint32_t n_out;
} VmNode;

typedef struct VmPacked {
    const char *name; /* "fused_nn_conv2d_add_nn_relu" */
    uint32_t n_inputs;
    uint32_t n_nodes;
    const VmNode *nodes;
    uint32_t result;
} VmPacked;

typedef struct VmCtor {
    const char *name;      /* "Cons" */
    const char *type_name; /* "List" */
    int32_t tag;
    uint32_t arity;
} VmCtor;

/* A prepared constant of an executable file: what a kernel derived from constant `konst` under
 * its key (kernel.h, k_prepared), `bytes` bytes at blob. */
typedef struct VmPrep {
    uint32_t konst;
    uint64_t key;
    uint64_t bytes;
    const void *blob;
} VmPrep;

typedef struct VmExec {
    uint32_t n_funcs;
    const VmFunction *funcs;
    uint32_t n_packed;
    const VmPacked *packed;
    uint32_t n_consts;
    Value *const *consts; /* immortal tensors */
    uint32_t n_ctors;
    const VmCtor *ctors;
    uint32_t n_strs;
    const char *const *strs; /* strs[0] = "" */
    uint32_t entry;          /* the function `rly run` calls (@main) */
    /* The entry's interface: its parameters' names ("data" for %data; ONNX input names) and
     * types, and its outputs: the fields of a tuple result (one output otherwise), named by
     * out_names (ONNX output names) or "output_N". */
    uint32_t n_inputs;
    const char *const *in_names;
    const VmTypeDesc *in_types;
    uint32_t n_outputs;
    const char *const *out_names;
    const VmTypeDesc *out_types;
    bool out_tuple; /* the result is a tuple whose fields are the outputs */
    /* When the result nests tuples, its outputs are the leaves of the nesting, depth first:
     * output k is result.out_path[out_path_off[k]].out_path[out_path_off[k] + 1]... (fields
     * followed down to out_path_off[k + 1]); NULL otherwise (the fields, as out_tuple says). */
    const uint32_t *out_path_off; /* n_outputs + 1 offsets into out_path */
    const uint32_t *out_path;
    /* What kernels derive once from constants (packed weights; KCall.prep), made by
     * vm_exec_bind, shared by every session, freed with the executable. */
    KPrepCache *prep;
    /* Prepared constants read from an executable file (section PREP), seeded into prep by
     * vm_exec_bind: kernels find their packed weights made (vm_exec_prepare made them when the
     * file was written). The bytes live in the mapping (or the arena). */
    uint32_t n_preps;
    const VmPrep *preps;
    Arena arena;   /* everything above lives here (or in the mapping of a loaded file) */
    void *mapping; /* a loaded file's mmap, NULL for a compiled executable */
    size_t mapping_len;
} VmExec;

/* Check every index, kind and jump of exe (see the top of this file). false with a message
 * naming the function and instruction otherwise. Compiled executables are validated too, in
 * debug builds, so the compiler's mistakes show up where they are made. */
bool vm_exec_validate(const VmExec *exe, char *err, size_t cap);
/* Whether operator op_id's reference kernel may write its output over argument `arg` (same
 * dtype and size): it reads element i of that argument before it writes element i of the
 * output and reads nothing else of it. A short list of elementwise kernels (vm_plan.c). */
bool vm_plan_inplace_ok(uint32_t op_id, uint32_t arg);
/* Check function f's plan (vm_exec_validate calls it): sites at INVOKE_PACKED instructions in
 * increasing order, one slot per node output, each buffer used by one slot, offsets and sizes
 * inside the arena and matching the shapes, no two buffers live at once sharing bytes unless
 * in place. Kernels check a preallocated output's dtype and shape, so a plan that passes can
 * make a run compute wrong values (a liveness claim that is false) but never write outside
 * a buffer. */
bool vm_plan_validate(const VmExec *exe, const VmFunction *f, char *err, size_t cap);

/* Bind each packed node's kernel (fn) by the registry: op id, dtypes, CPU features; the
 * reference kernel is the fallback. false with a message when an operator has no kernel. */
bool vm_exec_bind(VmExec *exe, char *err, size_t cap);
/* Free exe and all it holds: each constant (rt_value_free_immortal), the arena, the mapping
 * (munmap of mapping_len bytes), then exe itself, which the compiler and the loader allocate
 * with sup_calloc (contract added by vmr). NULL is a no-op. */
void vm_exec_free(VmExec *exe);

/* ---- saving and loading (exec_file.c) ----------------------------------------------------
 * A versioned, self-contained file: header (magic "RLYX", version), sections for strings,
 * constants (64-byte aligned, used in place from the mapping), packed functions, functions,
 * constructors and the entry's interface. Loading maps the file, decodes and validates
 * everything (vm_exec_validate): a truncated or hostile file is an error, never a crash. */
bool vm_exec_save(const VmExec *exe, const char *path, char *err, size_t cap);
/* vm_exec_save, with the prepared constants (section PREP: what exe's cache holds, see
 * vm_exec_prepare) or without (preps false: an empty PREP). vm_exec_save writes them. */
bool vm_exec_save_with(const VmExec *exe, const char *path, bool preps, char *err, size_t cap);
/* Let the kernels prepare what they derive from constants (packed weights) before exe is saved,
 * so that the file holds them (section PREP) and a loaded executable packs nothing at run time:
 * the entry runs once on zero-filled inputs, on the calling thread, bounded by `seconds`, when
 * every input is a tensor of static shape. What the run fails on (a zero where the program
 * needs another value, the time bound) is not an error: what was prepared until then is kept.
 * Returns the number of entries the cache holds, or -1 when the entry cannot run this way
 * (a `?` dim, an input that is not a tensor; reason in why). */
int64_t vm_exec_prepare(VmExec *exe, double seconds, char *why, size_t cap);
VmExec *vm_exec_load(const char *path, char *err, size_t cap);
/* The same over bytes in memory (the loader fuzz target); `data` must outlive the result. */
VmExec *vm_exec_load_bytes(const void *data, size_t len, char *err, size_t cap);

/* ---- running (vm.c) ----------------------------------------------------------------------- */

typedef struct Vm Vm;

/* A machine for exe (which must stay alive and be validated and bound). */
Vm *vm_new(const VmExec *exe);
void vm_free(Vm *vm);
void vm_set_limits(Vm *vm, const RtLimits *limits);
/* The threads kernels may use (owned by the caller, alive while vm runs); NULL: this thread. */
void vm_set_pool(Vm *vm, SupPool *pool);
RtMemAccount *vm_account(Vm *vm);
/* Probes of later runs (runtime/probe.h, docs/tools.md "Numerics", "Profiles"), a mask of
 * VM_PROBE_*: NUMERICS stops a run at the first fused group (or scalar operation) whose result
 * holds a NaN or an infinity while its inputs did not, names the operator by running the
 * group's nodes again one by one on the reference kernels, and reports input statistics (memory
 * plans are off meanwhile, so no input is overwritten in place); PROFILE records an event per
 * packed call into vm_profile(vm) (made here, owned by vm). 0 turns both off. */
enum { VM_PROBE_NUMERICS = 1, VM_PROBE_PROFILE = 2 };
void vm_set_probe(Vm *vm, unsigned mask);
struct RtProfile *vm_profile(Vm *vm); /* NULL unless profiling */
/* Call function `func` with boxed arguments (borrowed; converted to its parameter kinds).
 * Returns an owned, boxed value, or NULL with a message ("file:line:col: error: ..." when the
 * failing instruction has a location) in err. */
Value *vm_invoke(Vm *vm, uint32_t func, uint32_t n_args, Value *const *args, char *err, size_t cap);

/* Structural text of a VM value (constructor names from exe), as ev_print_value. */
void vm_print_value(const VmExec *exe, const Value *v, size_t max_elems, StrBuf *out);

#endif /* RLY_RUNTIME_VM_H */
