/* binary.c - reference kernels of the binary operators (see src/ops/op_binary.c). */
#include "kernels/kernel.h"

const KernelDef kern_ref_binary[] = {
    {NULL, NULL},
};
