/* op_unary.c - (being written) */
#include "ops/ops.h"

OpDef ops_unary_table[] = {
    {0},
};
