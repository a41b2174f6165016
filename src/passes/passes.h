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

#endif /* RLY_PASSES_H */
