/* conv_pool.c - reference kernels of the conv_pool operators (see src/ops/op_conv_pool.c). */
#include "kernels/kernel.h"

const KernelDef kern_ref_conv_pool[] = {
    {NULL, NULL},
};
