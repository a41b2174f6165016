/* vm_fuse.c - which primitive functions run as fused elementwise programs (vm_impl.h). */
#include <stdlib.h>
#include <string.h>

#include "kernels/fast/fast.h"
#include "kernels/fast/fused.h"
#include "runtime/vm_impl.h"

_Static_assert(FX_MAX_OPERANDS == 16, "VmFuse.operand has FX_MAX_OPERANDS entries");

VmFuse *vm_fuse_analyze(const VmPacked *p) {
    if (p->n_nodes == 0 || !kern_fast_enabled() || getenv("RLY_NO_FUSE") != NULL) return NULL;
    /* the calls: an optional anchor first, then elementwise steps; the result the last node */
    uint32_t first_call = UINT32_MAX;
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        const VmNode *n = &p->nodes[k];
        if (n->kind == VM_NODE_CONST) continue;
        if (n->kind != VM_NODE_CALL || n->out_tuple) return NULL;
        if (first_call == UINT32_MAX) first_call = k;
    }
    if (first_call == UINT32_MAX || p->result != p->n_inputs + p->n_nodes - 1 ||
        p->nodes[p->n_nodes - 1].kind != VM_NODE_CALL)
        return NULL;
    FxStep probe;
    uint32_t arity;
    const VmNode *fc = &p->nodes[first_call];
    uint32_t start = first_call;
    if (!fx_step_of(fc->op_id, fc->attrs, fc->n_attrs, &probe, &arity)) {
        start = UINT32_MAX; /* the anchor: the program starts at the next call */
        for (uint32_t k = first_call + 1; k < p->n_nodes && start == UINT32_MAX; k++)
            if (p->nodes[k].kind == VM_NODE_CALL) start = k;
        if (start == UINT32_MAX) return NULL;
    }
    FxProgram prog = {0};
    VmFuse f = {.start = start};
    uint32_t *as_value = calloc(p->n_inputs + p->n_nodes, sizeof(uint32_t)); /* id -> value + 1 */
    if (as_value == NULL) return NULL;
    bool ok = true;
    for (uint32_t k = start; k < p->n_nodes && ok; k++) {
        const VmNode *n = &p->nodes[k];
        if (n->kind != VM_NODE_CALL) continue;
        FxStep st;
        if (prog.n_steps == FX_MAX_STEPS ||
            !fx_step_of(n->op_id, n->attrs, n->n_attrs, &st, &arity) || n->n_args != arity) {
            ok = false;
            break;
        }
        uint16_t args[2] = {0, 0};
        for (uint32_t a = 0; a < arity && ok; a++) {
            uint32_t id = n->args[a];
            if (id >= p->n_inputs + k) {
                ok = false;
                break;
            }
            if (as_value[id] == 0) { /* an operand: an input, a constant or the anchor */
                bool node_ok = id < p->n_inputs || id < p->n_inputs + start;
                if (!node_ok || prog.n_operands == FX_MAX_OPERANDS) {
                    ok = false;
                    break;
                }
                f.operand[prog.n_operands] = id;
                as_value[id] = ++prog.n_operands;
            }
            args[a] = (uint16_t)(as_value[id] - 1);
        }
        st.a = args[0];
        st.b = arity == 2 ? args[1] : 0;
        prog.step[prog.n_steps] = st;
        as_value[p->n_inputs + k] =
            FX_MAX_OPERANDS + 1 + prog.n_steps; /* a step, renumbered below */
        prog.n_steps++;
        f.n_calls++;
    }
    free(as_value);
    /* one operator alone gains nothing from a program */
    if (!ok || prog.n_steps == 0 || (start == first_call && prog.n_steps < 2)) return NULL;
    /* step values were numbered FX_MAX_OPERANDS + s (the operand count was not final): renumber */
    for (uint32_t s = 0; s < prog.n_steps; s++) {
        FxStep *st = &prog.step[s];
        if (st->a >= FX_MAX_OPERANDS) st->a = (uint16_t)(st->a - FX_MAX_OPERANDS + prog.n_operands);
        if (st->b >= FX_MAX_OPERANDS) st->b = (uint16_t)(st->b - FX_MAX_OPERANDS + prog.n_operands);
    }
    VmFuse *out = malloc(sizeof *out);
    FxProgram *pp = malloc(sizeof *pp);
    if (out == NULL || pp == NULL) {
        free(out);
        free(pp);
        return NULL;
    }
    *pp = prog;
    *out = f;
    out->prog = pp;
    return out;
}

void vm_fuse_free(VmFuse *f) {
    if (f == NULL) return;
    free(f->prog);
    free(f);
}
