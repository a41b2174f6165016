/* op_misc.c - annotations and debugging hooks: operators that return their argument unchanged
 * (of any type, tuples included) and only carry a meaning for passes or the runtime. */
#include "ops/ops.h"

/* The result type is the argument's type, whatever it is. */
static RelResult identity_any_rel(RelCall *rc) {
    Type *t = rc->args[0];
    if (t->kind == TYPE_INCOMPLETE) return REL_DEFER;
    return rel_out(rc, t);
}

/* trap: Tensor[shape, dtype] (-1 in shape is `?`) that never produces a value. */
static RelResult trap_rel(RelCall *rc) {
    const int64_t *shape;
    uint32_t n = attr_ints(rc, "shape", &shape);
    int64_t *dims = rel_dims(rc, n);
    for (uint32_t i = 0; i < n; i++) {
        if (shape[i] < -1)
            return rel_error(rc, "shape[%u] is %lld (-1 means ?)", i, (long long)shape[i]);
        dims[i] = shape[i] < 0 ? DIM_ANY : shape[i];
    }
    int dt = attr_dtype(rc, "dtype");
    if (dt < 0) return rel_error(rc, "dtype must name a dtype");
    return rel_out_tensor(rc, (rly_dtype)dt, n, dims);
}

static const AttrSpec trap_attrs[] = {{"shape", AT_INTS, "[]", NULL},
                                      {"dtype", AT_DTYPE, "\"float32\"", NULL},
                                      {"message", AT_STR, "\"unreachable\"", NULL},
                                      {0}};

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
    ROW("trap", 0, OP_OPAQUE, trap_rel, trap_attrs, "",
        "a runtime error with `message` where a Tensor[shape, dtype] is expected (rly's own; the "
        "ONNX importer puts it in If branches that cannot run for the model's static shapes)"),
    {0},
};
