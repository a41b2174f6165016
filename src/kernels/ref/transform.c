/* transform.c - reference kernels of the transform operators (see src/ops/op_transform.c). */
#include "kernels/kernel.h"

const KernelDef kern_ref_transform[] = {
    {NULL, NULL},
};
