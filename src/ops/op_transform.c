/* op_transform.c - (being written) */
#include "ops/ops.h"

OpDef ops_transform_table[] = {
    {0},
};
