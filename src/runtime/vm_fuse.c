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

/* A view: an operator whose result is its argument's elements, reshaped (squeeze, expand_dims)
 * or cut in contiguous pieces (split, when the dims before its axis are all 1: checked when the
 * run starts, vm.c view_piece). Inside a run a view computes nothing: the program reads the
 * argument's elements in place (vm.c fused_operands). */
bool vm_fuse_view_op(const VmNode *n) {
    if (n->kind != VM_NODE_CALL || n->n_args != 1) return false;
    switch (n->op_id) {
    case OP_ID_SQUEEZE:
    case OP_ID_EXPAND_DIMS: return !n->out_tuple;
    case OP_ID_SPLIT: return n->out_tuple;
    default: return false;
    }
}

/* Whether node k may sit in a run [start, ...) as a view node: a field of a tuple computed before
 * the run or of a split in it, or a view of a value computed before the run or of a view node
 * in it (a split's own tuple only through its fields). */
static bool view_node(const VmPacked *p, uint32_t k, uint32_t start) {
    const VmNode *n = &p->nodes[k];
    if (n->n_args != 1 || (n->kind != VM_NODE_FIELD && !vm_fuse_view_op(n))) return false;
    uint32_t a = n->args[0];
    if (a < p->n_inputs + start) return true; /* computed before the run */
    if (a >= p->n_inputs + k) return false;
    const VmNode *src = &p->nodes[a - p->n_inputs];
    bool split = src->kind == VM_NODE_CALL && src->op_id == OP_ID_SPLIT && src->out_tuple;
    if (n->kind == VM_NODE_FIELD) return split;
    /* nodes of the run before k are views, constants or calls (runs are scanned forward) */
    return src->kind == VM_NODE_CONST || src->kind == VM_NODE_FIELD ||
           (vm_fuse_view_op(src) && !split);
}

/* Whether a value of node v (in [start, end)) is read outside the run or is the result. */
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
        if (n->kind != VM_NODE_CALL || vm_fuse_view_op(n)) continue;
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
            const VmNode *src = id >= p->n_inputs ? &p->nodes[id - p->n_inputs] : NULL;
            bool inside =
                id >= p->n_inputs + f->start && src->kind == VM_NODE_CALL && !vm_fuse_view_op(src);
            if (src != NULL && src->kind == VM_NODE_CALL && src->out_tuple) { /* a whole tuple */
                ok = false;
                break;
            }
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

/* The run from node start (a fusable call or a view node) to the end of what may join it,
 * shortened until only its last call's value leaves it; 0 when a view node's value leaves it
 * before any call of the run (the caller then starts the run later). */
static uint32_t run_end(const VmPacked *p, uint32_t start) {
    uint32_t end = start;
    while (end < p->n_nodes && (fusable(&p->nodes[end]) || p->nodes[end].kind == VM_NODE_CONST ||
                                view_node(p, end, start)))
        end++;
    while (end > start && p->nodes[end - 1].kind != VM_NODE_CALL) /* no constants/fields last */
        end--;
    while (end > start && vm_fuse_view_op(&p->nodes[end - 1])) /* nor views */
        end--;
    /* a view node read after the run ends it before the node (the VM leaves the run's views
     * unset), a call read after it ends it after the call */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t k = start; k + 1 < end; k++) {
            const VmNode *n = &p->nodes[k];
            bool view = n->kind == VM_NODE_FIELD || vm_fuse_view_op(n);
            if ((view || n->kind == VM_NODE_CALL) && escapes(p, k, start, end)) {
                end = view ? k : k + 1;
                while (end > start && (p->nodes[end - 1].kind != VM_NODE_CALL ||
                                       vm_fuse_view_op(&p->nodes[end - 1])))
                    end--;
                changed = true;
                break;
            }
        }
    }
    return end;
}

VmFuse *vm_fuse_analyze(const VmPacked *p) {
    if (p->n_nodes == 0 || !kern_fast_enabled() || getenv("RLY_NO_FUSE") != NULL) return NULL;
    /* the first fusable call, the view nodes just before it, and the run from there */
    uint32_t first = 0;
    while (first < p->n_nodes && !fusable(&p->nodes[first]))
        first++;
    if (first == p->n_nodes) return NULL;
    uint32_t start = first;
    while (start > 0 &&
           (p->nodes[start - 1].kind == VM_NODE_FIELD || vm_fuse_view_op(&p->nodes[start - 1])))
        start--;
    for (uint32_t k = start; k < first; k++) /* each must be a view node of the run from start */
        if (!view_node(p, k, start)) start = k + 1;
    uint32_t end = run_end(p, start);
    if (end <= first && start < first) { /* a leading view is read after the run: no views */
        start = first;
        end = run_end(p, start);
    }
    if (end <= start) return NULL;
    uint32_t n_calls = 0, n_slots = 0, n_views = 0;
    for (uint32_t k = start; k < end; k++) {
        const VmNode *n = &p->nodes[k];
        if (n->kind == VM_NODE_FIELD || vm_fuse_view_op(n)) n_views++;
        if (n->kind != VM_NODE_CALL) continue;
        n_slots += n->out_tuple ? n->n_out : 1;
        n_calls += !vm_fuse_view_op(n);
    }
    if (n_views > VM_FUSE_MAX_VIEWS) return NULL;
    /* the anchor: the call before the run, read by the run alone */
    uint32_t anchor = UINT32_MAX;
    for (uint32_t k = start; k-- > 0;) {
        if (p->nodes[k].kind == VM_NODE_CONST) continue;
        const VmNode *a = &p->nodes[k];
        if (a->kind == VM_NODE_CALL && !a->out_tuple && !vm_fuse_view_op(a) &&
            !escapes(p, k, start, end)) {
            bool used = false;
            for (uint32_t j = start; j < end && !used; j++)
                for (uint32_t i = 0; i < p->nodes[j].n_args; i++)
                    used = used || p->nodes[j].args[i] == p->n_inputs + k;
            if (used) anchor = k;
        }
        break;
    }
    /* worth it: two operators or more, an anchor to finish, views spared a copy, or a run
     * feeding the rest (a reduction), which the program spares a full pass of each operator */
    if (n_calls < 2 && anchor == UINT32_MAX && n_slots == n_calls && end == p->n_nodes) return NULL;
    VmFuse f = {
        .anchor = anchor, .start = start, .end = end, .n_views = n_views, .n_slots = n_slots};
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
