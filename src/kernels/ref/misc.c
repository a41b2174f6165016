/* misc.c - reference kernels of the misc operators (see src/ops/op_misc.c). */
#include "kernels/kernel.h"

const KernelDef kern_ref_misc[] = {
    {NULL, NULL},
};
