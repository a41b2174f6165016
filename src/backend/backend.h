/* backend.h - the VM compiler: a typed, optimized Relay module to a VM executable
 * (src/runtime/vm.h). The interface of src/backend/.
 *
 * The caller runs the optimizer first (rly_module_optimize / pass_run at the wanted level); the
 * compiler then
 *   - brings the module to A-normal form (ToANormalForm) so that every intermediate value has a
 *     let and a register;
 *   - lifts every function literal to a VM function whose first parameters are its captured
 *     free variables (VM_ALLOC_CLOSURE captures them); let-bound recursive literals find
 *     themselves through their closure;
 *   - turns each call of a `Primitive=1` function (FuseOps's groups) and each call of an
 *     operator outside any group (at -O0) into a packed function (VmPacked) with its
 *     attributes lowered once (op_lower_attrs), or, when every input and output is an unboxed
 *     scalar and every operator has a VM_SCALAR form, into VM_SCALAR instructions;
 *   - compiles `match` into decision trees (VM_GET_TAG, VM_IF, VM_GET_FIELD, VM_FATAL for the
 *     unmatched leaf), `if` into VM_IF/VM_GOTO, references into VM_REF_*, tuples and
 *     constructors into VM_ALLOC_TUPLE/VM_ALLOC_ADT, calls in tail position into VM_F_TAIL
 *     invokes;
 *   - gives each register a kind from its type (a 0-d bool/int32/int64/float32/float64 tensor is
 *     an unboxed scalar; polymorphic parameters and everything else are VALUE) and inserts
 *     VM_BOX/VM_UNBOX where kinds meet;
 *   - records for each instruction the source location of its expression, so that a run-time
 *     error is reported at file:line:col as the interpreter does.
 * Every builtin operator compiles; a user-registered operator (rly_op_register) runs through
 * its kernel in memory, and such an executable cannot be saved. */
#ifndef RLY_BACKEND_H
#define RLY_BACKEND_H

#include "ir/ir.h"
#include "runtime/vm.h"

/* Compile m (type-checked, optimized as the caller wants) into an executable. Its entry is the
 * global `entry` (NULL: "main"); a module parsed from a bare expression compiles that
 * expression as an entry of no parameters. The result is validated (vm_exec_validate) and its
 * kernels are bound (vm_exec_bind). On failure: NULL, with located diagnostics in m's context
 * (an unsupported construct names itself and its source location). */
VmExec *be_compile(Module *m, const char *entry);

typedef struct BeOptions {
    /* Use the module's constant bytes in place (aligned to their element size, as the
     * interpreter uses them; copies are 64-byte aligned) instead of copying them
     * into the executable: for an executable that is run and freed while the module lives (rly
     * run compiling in memory), so a model's weights are not held twice. Saving such an
     * executable still writes the bytes. */
    bool borrow_consts;
} BeOptions;
/* be_compile with options (NULL: the defaults, as be_compile). */
VmExec *be_compile_ex(Module *m, const char *entry, const BeOptions *opts);

/* Append the text form of exe (any executable, compiled or loaded) to out: the entry's
 * interface, every function's bytecode with register kinds and source locations, every packed
 * function's nodes and attributes, the constants' types. For debugging and `rly compile
 * --disasm`. (Added by the compiler helper "vmc".) */
void be_disasm(const VmExec *exe, StrBuf *out);

#endif /* RLY_BACKEND_H */
