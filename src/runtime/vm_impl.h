/* vm_impl.h - what the executor's files share (vm.c runs, vm_scalar.c computes VM_SCALAR,
 * vm_validate.c checks and binds executables, vm_print.c prints values). Private to
 * src/runtime: nothing outside includes it. */
#ifndef RLY_RUNTIME_VM_IMPL_H
#define RLY_RUNTIME_VM_IMPL_H

#include "runtime/vm.h"

/* RtClosure.code_kind of a VM closure: code is a `const VmFunction *` into its executable's
 * funcs[] (the interpreter's closures use other tags and never reach the VM). */
enum { VM_CODE_FUNC = 0x56 };

/* ---- scalars (vm_scalar.c) --------------------------------------------------------------- */

/* The outcome of a scalar operation. */
enum { VM_SC_OK, VM_SC_ERR_DIV0, VM_SC_ERR_POW0 };

/* dst = sub(a, b) with a and b of kind rk and the result of kind dst_rk (vm.h, VmScalarOp):
 * the reference kernels' semantics exactly. Returns VM_SC_OK or an error (the kernels'
 * run-time errors: an integer division by zero, 0 raised to a negative power), leaving *out
 * unset. The kinds must satisfy vm_scalar_kinds_ok. */
int vm_scalar_exec(uint8_t sub, uint8_t rk, uint8_t dst_rk, VmReg a, VmReg b, VmReg *out);
/* Whether sub takes operands of kind rk and gives dst_rk (the validator's check): arithmetic
 * keeps rk, comparisons give BOOL, AND/OR/XOR/NOT take BOOL (logical) or ints (bitwise),
 * NEG/ABS take no BOOL, CAST goes from any scalar kind to any. */
bool vm_scalar_kinds_ok(uint8_t sub, uint8_t rk, uint8_t dst_rk);
/* Whether sub is unary (b unused). */
bool vm_scalar_unary(uint8_t sub);
/* The operator a scalar error is reported as ("divide: integer division by zero"), the
 * message of an error code. */
const char *vm_scalar_op_name(uint8_t sub);
const char *vm_scalar_error(int code);

/* ---- scalar kinds and boxes (vm_validate.c) ---------------------------------------------- */

/* Box scalar register r of kind rk into a new 0-d tensor; NULL with a message (the memory
 * limit) in err. */
Value *vm_box(uint8_t rk, VmReg r, char *err, size_t cap);
/* Unbox the 0-d tensor v into a register of kind rk; false with a message when v is not a 0-d
 * tensor of rk's dtype. */
bool vm_unbox(uint8_t rk, const Value *v, VmReg *out, char *err, size_t cap);

/* ---- fused groups (vm_fuse.c) ------------------------------------------------------------ */

/* A run of elementwise float32 operators in a primitive function that the VM evaluates as one
 * fused program (kernels/fast/fused.h): nodes start .. end - 1 (calls of those operators and
 * constants), whose values are used only among themselves except the last one's (the function's
 * result, or read by the nodes after: a reduction the run feeds). When the call just before
 * `start` (the anchor: a conv2d, a dense, ...) is read only by the run, its kernel may apply the
 * program to each block of its output as an epilogue (KCall.epi); otherwise the program runs in
 * one pass after it. When the call's tensors do not fit (fx_shape), the nodes run one by one. */
typedef struct VmFuse {
    uint32_t anchor;      /* the anchor's node, UINT32_MAX for none */
    uint32_t start, end;  /* the run: nodes start .. end - 1 */
    uint32_t n_views;     /* fields and views in the run (vm.c make_views; 0: none to make) */
    uint32_t n_slots;     /* planned slots of the run's calls (views and a split's fields too) */
    uint32_t operand[16]; /* prog's operands as value ids of the primitive function */
    struct FxProgram *prog;
} VmFuse;
/* The fused program of p, or NULL when p is not such a group (or has one operator only).
 * Free with vm_fuse_free. */
VmFuse *vm_fuse_analyze(const VmPacked *p);
/* Views (squeeze, expand_dims, split) and fields in a run: at most this many. */
#define VM_FUSE_MAX_VIEWS 32
bool vm_fuse_view_op(const VmNode *n);
void vm_fuse_free(VmFuse *f);

/* ---- LSTM and GRU cells (vm_cell.c) ------------------------------------------------------ */

/* A primitive function that is one LSTM step as FuseRNNCell writes it (passes/
 * fuse_rnn_cell.c): the VM runs it as the cell kernel (kernels/fast/rnn.c) on its inputs
 * in[0..4) = h, R, xp, c, with the split's fields of the input, forget, cell and output gates,
 * and makes the result (h2, c2) from the kernel's two outputs, in the planned buffers of nodes
 * h2 and c2. */
typedef struct VmCell {
    bool gru;       /* a GRU step (below), else an LSTM step */
    uint32_t n_in;  /* inputs of the kernel: 4 (LSTM; GRU with bn), 3 (GRU without) */
    uint32_t in[4]; /* value ids of p */
    int64_t gates[4];
    double gates_f[4];
    uint32_t h2, c2;           /* nodes (c2: LSTM only) */
    uint32_t h2_slot, c2_slot; /* their planned slots among the calls' outputs (node order) */
    /* A run of steps (FuseRNNCell's run function): steps >= 2, and then the fields above
     * describe its first step; the kernel's arguments (value ids: h0, R, c0 for an LSTM, h0, R
     * and bn if any for a GRU, then each step's xp or x) and its results (the function's
     * result fields: h1, c1, ..., hn, cn or h1, ..., hn) with their planned slots. */
    uint32_t steps;
    uint32_t n_args, n_res;
    uint32_t *args, *res_node, *res_slot; /* in the same allocation as the struct */
} VmCell;
/* The cell of p, or NULL when p is not one (or the fast kernels are off). Free with free. A run
 * of steps is a function whose result is the tuple of every step's results, each step one of
 * the steps below whose h (and c) are the step before's results.
 * A GRU step (linear_before_reset) as FuseRNNCell writes it: gs = split(dense(h, R), 3),
 * xs = split(x, 3), z = sigmoid(xs.Z + gs.Z), r = sigmoid(xs.R + gs.R),
 * n = tanh(xs.N + r * (gs.N [+ bn])), result (1 - z) * n + z * h; in = h, R, x[, bn], gates
 * Z, R, N: the GRU cell kernel. */
VmCell *vm_cell_analyze(const VmExec *exe, const VmPacked *p);

/* A convolution's packed call at pc i whose result only the max pool's call at pc j reads, run
 * as one kernel (vm_pair.c): node calls kern_fast_conv_maxpool on the convolution call's inputs
 * args (x, w, b) with both calls' attributes. */
typedef struct VmPair {
    uint32_t j;       /* the pool's call */
    VmNode node;      /* kern_fast_conv_maxpool(vals[args[0..2]]) */
    uint32_t args[3]; /* node's arguments: inputs of the convolution's call */
    KAttr *attrs;     /* node's attributes (owned), and the pool's renamed ones' names */
    char *names;
    VmPacked packed; /* for profiles: the convolution's function named "CONV+POOL" */
    bool declined;   /* the kernel declined once: the two calls run as compiled from then on (a
                      * function's shapes are its types', fixed but for `?` dims) */
} VmPair;
/* Function f's pairs: an array of f->n_code entries (the pair whose first call is at pc, or
 * NULL), or NULL when f has none (or the fast kernels are off). */
VmPair **vm_pair_analyze(const VmExec *exe, const VmFunction *f);
void vm_pair_free(VmPair **pairs, uint32_t n_code);

#endif /* RLY_RUNTIME_VM_IMPL_H */
