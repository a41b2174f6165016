/* gemm.c - fast kernels (fast.h). PLACEHOLDER: no rows yet. */
#include "fast.h"

const KernelDef kern_fast_gemm[] = {
    {0, NULL},
};
