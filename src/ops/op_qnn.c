/* op_qnn.c - (being written) */
#include "ops/ops.h"

OpDef ops_qnn_table[] = {
    {0},
};
