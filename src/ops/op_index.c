/* op_index.c - (being written) */
#include "ops/ops.h"

OpDef ops_index_table[] = {
    {0},
};
