/* op_nn.c - (being written) */
#include "ops/ops.h"

OpDef ops_nn_table[] = {
    {0},
};
