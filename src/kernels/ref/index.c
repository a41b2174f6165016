/* index.c - reference kernels of the index operators (see src/ops/op_index.c). */
#include "kernels/kernel.h"

const KernelDef kern_ref_index[] = {
    {NULL, NULL},
};
