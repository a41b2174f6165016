/* image_vision.c - reference kernels of the image_vision operators (see src/ops/op_image_vision.c). */
#include "kernels/kernel.h"

const KernelDef kern_ref_image_vision[] = {
    {NULL, NULL},
};
