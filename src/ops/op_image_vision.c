/* op_image_vision.c - (being written) */
#include "ops/ops.h"

OpDef ops_image_vision_table[] = {
    {0},
};
