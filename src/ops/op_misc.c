/* op_misc.c - (being written) */
#include "ops/ops.h"

OpDef ops_misc_table[] = {
    {0},
};
