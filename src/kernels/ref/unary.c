/* unary.c - reference kernels of the unary operators (see src/ops/op_unary.c). */
#include "kernels/kernel.h"

const KernelDef kern_ref_unary[] = {
    {NULL, NULL},
};
