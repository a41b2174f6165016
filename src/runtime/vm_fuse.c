/* vm_fuse.c - the run of a primitive function the VM evaluates as a fused program (vm_impl.h). */
#include <stdlib.h>
#include <string.h>

#include "kernels/fast/fast.h"
#include "kernels/fast/fused.h"
#include "runtime/vm_impl.h"

_Static_assert(FX_MAX_OPERANDS == 16, "VmFuse.operand has FX_MAX_OPERANDS entries");

static bool fusable(const VmNode *n) {
    FxStep st;
    uint32_t arity;
    return n->kind == VM_NODE_CALL && !n->out_tuple &&
           fx_step_of(n->op_id, n->attrs, n->n_attrs, &st, &arity) && n->n_args == arity;
}

/* Whether a value of node v (a call in [start, end)) is read outside the run or is the result. */
static bool escapes(const VmPacked *p, uint32_t v, uint32_t start, uint32_t end) {
    uint32_t id = p->n_inputs + v;
    if (p->result == id) return true;
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        if (k >= start && k < end) continue;
        for (uint32_t a = 0; a < p->nodes[k].n_args; a++)
            if (p->nodes[k].args[a] == id) return true;
    }
    return false;
}

/* The run's program over its operands; false when it has too many of either. */
static bool build(const VmPacked *p, VmFuse *f, FxProgram *prog) {
    uint32_t *as_value = calloc(p->n_inputs + p->n_nodes, sizeof(uint32_t)); /* id -> value + 1 */
    if (as_value == NULL) return false;
    bool ok = true;
    /* steps first get value FX_MAX_OPERANDS + s (the operand count is not final yet) */
    for (uint32_t k = f->start; k < f->end && ok; k++) {
        const VmNode *n = &p->nodes[k];
        if (n->kind != VM_NODE_CALL) continue;
        FxStep st;
        uint32_t arity = 0;
        if (prog->n_steps == FX_MAX_STEPS ||
            !fx_step_of(n->op_id, n->attrs, n->n_attrs, &st, &arity))
            ok = false;
        uint16_t args[2] = {0, 0};
        for (uint32_t a = 0; a < arity && ok; a++) {
            uint32_t id = n->args[a];
            if (id >= p->n_inputs + k) {
                ok = false;
                break;
            }
            bool inside =
                id >= p->n_inputs + f->start && p->nodes[id - p->n_inputs].kind == VM_NODE_CALL;
            if (!inside && as_value[id] == 0) { /* an operand: any value computed before */
                if (prog->n_operands == FX_MAX_OPERANDS) {
                    ok = false;
                    break;
                }
                f->operand[prog->n_operands] = id;
                as_value[id] = ++prog->n_operands;
            }
            args[a] = (uint16_t)(as_value[id] - 1);
        }
        st.a = args[0];
        st.b = arity == 2 ? args[1] : 0;
        prog->step[prog->n_steps] = st;
        as_value[p->n_inputs + k] = FX_MAX_OPERANDS + 1 + prog->n_steps;
        prog->n_steps++;
    }
    free(as_value);
    if (!ok) return false;
    for (uint32_t s = 0; s < prog->n_steps; s++) { /* renumber the steps' values */
        FxStep *st = &prog->step[s];
        if (st->a >= FX_MAX_OPERANDS)
            st->a = (uint16_t)(st->a - FX_MAX_OPERANDS + prog->n_operands);
        if (st->b >= FX_MAX_OPERANDS)
            st->b = (uint16_t)(st->b - FX_MAX_OPERANDS + prog->n_operands);
    }
    return true;
}

VmFuse *vm_fuse_analyze(const VmPacked *p) {
    if (p->n_nodes == 0 || !kern_fast_enabled() || getenv("RLY_NO_FUSE") != NULL) return NULL;
    /* the first fusable call and the run of fusable calls (and constants) from it */
    uint32_t start = 0;
    while (start < p->n_nodes && !fusable(&p->nodes[start]))
        start++;
    if (start == p->n_nodes) return NULL;
    uint32_t end = start;
    while (end < p->n_nodes && (fusable(&p->nodes[end]) || p->nodes[end].kind == VM_NODE_CONST))
        end++;
    while (p->nodes[end - 1].kind != VM_NODE_CALL) /* no constants at the end */
        end--;
    /* shorten it until only its last call's value leaves it */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t k = start; k + 1 < end; k++)
            if (p->nodes[k].kind == VM_NODE_CALL && escapes(p, k, start, end)) {
                end = k + 1;
                changed = true;
                break;
            }
    }
    uint32_t n_calls = 0;
    for (uint32_t k = start; k < end; k++)
        n_calls += p->nodes[k].kind == VM_NODE_CALL;
    /* the anchor: the call before the run, read by the run alone */
    uint32_t anchor = UINT32_MAX;
    for (uint32_t k = start; k-- > 0;) {
        if (p->nodes[k].kind == VM_NODE_CONST) continue;
        const VmNode *a = &p->nodes[k];
        if (a->kind == VM_NODE_CALL && !a->out_tuple && !escapes(p, k, start, end)) {
            bool used = false;
            for (uint32_t j = start; j < end && !used; j++)
                for (uint32_t i = 0; i < p->nodes[j].n_args; i++)
                    used = used || p->nodes[j].args[i] == p->n_inputs + k;
            if (used) anchor = k;
        }
        break;
    }
    /* worth it: two operators or more, an anchor to finish, or a run feeding the rest (a
     * reduction), which the program spares a full pass of each operator */
    if (n_calls < 2 && anchor == UINT32_MAX && end == p->n_nodes) return NULL;
    VmFuse f = {.anchor = anchor, .start = start, .end = end, .n_calls = n_calls};
    FxProgram prog = {0};
    if (!build(p, &f, &prog) || prog.n_steps == 0) return NULL;
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
