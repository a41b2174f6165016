/* reduce.c - reference kernels of the reduce operators (see src/ops/op_reduce.c). */
#include "kernels/kernel.h"

const KernelDef kern_ref_reduce[] = {
    {NULL, NULL},
};
