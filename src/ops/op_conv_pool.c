/* op_conv_pool.c - (being written) */
#include "ops/ops.h"

OpDef ops_conv_pool_table[] = {
    {0},
};
