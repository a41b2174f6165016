/* infer_type.c - InferType: type inference over the whole module (TVM's InferType, opt level 0).
 * The pass manager already infers once at the start of a pipeline and every pass keeps types
 * valid, so in a pipeline this re-checks; it is here for `--passes InferType` and for TVM's
 * pipelines that name it. */
#include "passes/passes.h"
#include "types/types.h"

static bool run(PassCtx *pc, Module *m) {
    (void)pc;
    return ty_infer_module(m);
}

const PassDef pass_infer_type = {
    .name = "InferType",
    .opt_level = 0,
    .kind = PASS_MODULE,
    .params = "",
    .run_module = run,
    .doc = "infer and check the types of the whole module",
};
