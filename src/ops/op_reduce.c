/* op_reduce.c - (being written) */
#include "ops/ops.h"

OpDef ops_reduce_table[] = {
    {0},
};
