/* qnn.c - reference kernels of the qnn operators (see src/ops/op_qnn.c). */
#include "kernels/kernel.h"

const KernelDef kern_ref_qnn[] = {
    {NULL, NULL},
};
