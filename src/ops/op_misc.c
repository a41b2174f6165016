/* op_misc.c - annotations and debugging hooks: operators that return their argument unchanged
 * (of any type, tuples included) and only carry a meaning for passes or the runtime. */
#include "ops/ops.h"

/* The result type is the argument's type, whatever it is. */
static RelResult identity_any_rel(RelCall *rc) {
    Type *t = rc->args[0];
    if (t->kind == TYPE_INCOMPLETE) return REL_DEFER;
    return rel_out(rc, t);
}

static const AttrSpec debug_attrs[] = {{"debug_func", AT_ANY, "None", NULL}, {0}};

#define ROW(name, n, pat, rel, attrs, args, doc)                                                   \
    { name, n, pat, rel, attrs, args, doc, 0, 0, 0, 0, 0 }

OpDef ops_misc_table[] = {
    ROW("annotation.stop_fusion", 1, OP_OPAQUE, identity_any_rel, NULL, "data",
        "identity that keeps FuseOps from fusing across it"),
    ROW("annotation.checkpoint", 1, OP_OPAQUE, identity_any_rel, NULL, "data",
        "identity marking a value to recompute rather than keep during gradient"),
    ROW("debug", 1, OP_OPAQUE, identity_any_rel, debug_attrs, "data",
        "identity that calls debug_func with the value at run time"),
    {0},
};
