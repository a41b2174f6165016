/* op_id.c - the names of the builtin operators by id (support.h, "operator ids"; the list is
 * ops.def). The operator registry (src/ops) takes each builtin row's name from here, and kernels
 * and loaders that know only ids can still name an operator. */
#include "support/support.h"

static const char *const op_names[] = {
#define OP(ID, NAME) [OP_ID_##ID] = NAME,
#include "support/ops.def"
#undef OP
};
_Static_assert(RLY_ARRAY_LEN(op_names) == OP_ID_COUNT, "one name per operator id");

const char *sup_op_name(uint32_t id) { return id < OP_ID_COUNT ? op_names[id] : NULL; }
