/* vm_plan.c - what the runtime knows of memory plans (vm.h, "memory plans"; docs/vm.md,
 * "Memory planning"): which kernels may write in place, and the validation of a plan from a
 * file. The plans themselves are made by the compiler (src/backend/plan.c) and used by the
 * executor (vm.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/vm_impl.h"

bool vm_plan_inplace_ok(uint32_t op_id, uint32_t arg) {
    switch (op_id) {
    /* unary.c: unary_float / unary_numeric / clip read x[i], then write y[i] */
    case OP_ID_LOG:
    case OP_ID_LOG2:
    case OP_ID_LOG10:
    case OP_ID_EXP:
    case OP_ID_FAST_EXP:
    case OP_ID_ERF:
    case OP_ID_FAST_ERF:
    case OP_ID_SQRT:
    case OP_ID_RSQRT:
    case OP_ID_SIGMOID:
    case OP_ID_TANH:
    case OP_ID_FAST_TANH:
    case OP_ID_SIN:
    case OP_ID_COS:
    case OP_ID_TAN:
    case OP_ID_FLOOR:
    case OP_ID_CEIL:
    case OP_ID_TRUNC:
    case OP_ID_ROUND:
    case OP_ID_SIGN:
    case OP_ID_ABS:
    case OP_ID_NEGATIVE:
    case OP_ID_CLIP:
    /* nn.c: relu, leaky_relu and bias_add read x[f], then write y[f] */
    case OP_ID_NN_RELU:
    case OP_ID_NN_LEAKY_RELU:
    case OP_ID_NN_BIAS_ADD:
    /* transform.c: same_data copies x to y (nothing when they are one buffer) */
    case OP_ID_RESHAPE:
    case OP_ID_RESHAPE_LIKE:
    case OP_ID_EXPAND_DIMS:
    case OP_ID_SQUEEZE: return arg == 0;
    /* binary.c: reads a[ia] and b[ib], then writes y[i]; an operand of the output's size
     * broadcasts to it as the identity (ia == i) */
    case OP_ID_ADD:
    case OP_ID_SUBTRACT:
    case OP_ID_MULTIPLY:
    case OP_ID_DIVIDE:
    case OP_ID_POWER:
    case OP_ID_MAXIMUM:
    case OP_ID_MINIMUM:
    case OP_ID_MOD:
    case OP_ID_FLOOR_DIVIDE:
    case OP_ID_FLOOR_MOD:
    case OP_ID_TRUNC_DIVIDE:
    case OP_ID_TRUNC_MOD: return arg <= 1;
    default: return false;
    }
}

static bool fail(char *err, size_t cap, const VmFunction *f, const char *fmt, ...) RLY_PRINTF(4, 5);
static bool fail(char *err, size_t cap, const VmFunction *f, const char *fmt, ...) {
    int n = snprintf(err, cap,
                     "invalid executable: function %s: memory plan: ", f->name ? f->name : "?");
    if (n >= 0 && (size_t)n < cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* The outputs a packed node makes (0 for nodes that are not calls). */
static uint32_t node_outs(const VmNode *n) {
    if (n->kind != VM_NODE_CALL) return 0;
    return n->out_tuple ? n->n_out : 1;
}

typedef struct OffIdx {
    uint64_t off;
    uint32_t i;
} OffIdx;

static int by_offset(const void *x, const void *y) {
    const OffIdx *a = x, *b = y;
    return a->off < b->off ? -1 : a->off > b->off ? 1 : (a->i > b->i) - (a->i < b->i);
}

bool vm_plan_validate(const VmExec *exe, const VmFunction *f, char *err, size_t cap) {
    const VmPlan *pl = f->plan;
    if (pl == NULL) return true;
    if ((pl->n_bufs && pl->bufs == NULL) || (pl->n_sites && pl->sites == NULL) ||
        (pl->n_slots && pl->slots == NULL))
        return fail(err, cap, f, "a table is missing");
    if (pl->n_bufs >= VM_PLAN_PIECE) return fail(err, cap, f, "%u buffers", pl->n_bufs);
    if (pl->arena_bytes > ((uint64_t)1 << 48))
        return fail(err, cap, f, "an arena of %llu bytes", (unsigned long long)pl->arena_bytes);
    for (uint32_t b = 0; b < pl->n_bufs; b++) {
        const VmPlanBuf *bf = &pl->bufs[b];
        char why[128];
        if (bf->dtype >= RLY_DTYPE_COUNT) return fail(err, cap, f, "buffer %u: dtype", b);
        if (bf->ndim > K_MAX_DIMS || (bf->ndim && bf->shape == NULL))
            return fail(err, cap, f, "buffer %u: rank %u", b, bf->ndim);
        if (sup_shape_check(bf->ndim, bf->shape, false, why, sizeof why) != NULL)
            return fail(err, cap, f, "buffer %u: %s", b, why);
        uint64_t n = (uint64_t)sup_shape_numel(bf->ndim, bf->shape);
        uint64_t es = sup_dtype_size((rly_dtype)bf->dtype);
        if (n > pl->arena_bytes / es || n * es != bf->nbytes || bf->nbytes == 0)
            return fail(err, cap, f, "buffer %u: %llu bytes for its shape", b,
                        (unsigned long long)bf->nbytes);
        if (bf->offset % 64 != 0 || bf->offset > pl->arena_bytes ||
            bf->nbytes > pl->arena_bytes - bf->offset)
            return fail(err, cap, f, "buffer %u: bytes [%llu, +%llu) outside the arena of %llu", b,
                        (unsigned long long)bf->offset, (unsigned long long)bf->nbytes,
                        (unsigned long long)pl->arena_bytes);
        if (bf->start > bf->end) return fail(err, cap, f, "buffer %u: interval", b);
        uint32_t r = vm_plan_piece_of(bf->inplace);
        if (r != VM_PLAN_NONE) {
            /* a piece of a concatenate's result (ending where it starts) or of a split's input
             * (starting where it ends): inside its bytes */
            if (r >= pl->n_bufs || r == b ||
                (pl->bufs[r].start != bf->end && pl->bufs[r].end != bf->start) ||
                bf->offset < pl->bufs[r].offset ||
                bf->offset - pl->bufs[r].offset > pl->bufs[r].nbytes ||
                bf->nbytes > pl->bufs[r].nbytes - (bf->offset - pl->bufs[r].offset))
                return fail(err, cap, f, "buffer %u: a piece of buffer %u", b, r);
            continue;
        }
        if (bf->inplace != VM_PLAN_NONE &&
            (bf->inplace >= pl->n_bufs || bf->inplace == b ||
             pl->bufs[bf->inplace].end != bf->start || pl->bufs[bf->inplace].offset != bf->offset ||
             pl->bufs[bf->inplace].nbytes != bf->nbytes))
            return fail(err, cap, f, "buffer %u: in place over buffer %u", b, bf->inplace);
    }
    /* Sites and slots; each buffer at most once, and its start at its node's step. */
    uint8_t *used = sup_calloc(pl->n_bufs ? pl->n_bufs : 1, 1);
    bool ok = true;
    uint64_t step = 0;
    uint32_t s = 0;
    for (uint32_t pc = 0; pc < f->n_code && ok; pc++) {
        const VmInstr *in = &f->code[pc];
        uint32_t steps = 1;
        const VmPacked *p = NULL;
        if (in->op == VM_INVOKE_PACKED) {
            p = &exe->packed[in->a];
            steps = p->n_nodes ? p->n_nodes : 1;
        }
        if (s < pl->n_sites && pl->sites[s].pc == pc) {
            const VmPlanSite *st = &pl->sites[s];
            if (p == NULL) {
                ok = fail(err, cap, f, "site %u at instruction %u, not an invoke_packed", s, pc);
                break;
            }
            uint32_t want = 0;
            for (uint32_t k = 0; k < p->n_nodes; k++)
                want += node_outs(&p->nodes[k]);
            if (st->n != want || st->first > pl->n_slots || st->n > pl->n_slots - st->first) {
                ok = fail(err, cap, f, "site %u: %u slots for %u outputs", s, st->n, want);
                break;
            }
            uint32_t j = st->first;
            for (uint32_t k = 0; k < p->n_nodes && ok; k++) {
                const VmNode *nd = &p->nodes[k];
                for (uint32_t o = 0; o < node_outs(nd) && ok; o++, j++) {
                    uint32_t b = pl->slots[j];
                    if (b == VM_PLAN_NONE) continue;
                    if (b >= pl->n_bufs || used[b]) {
                        ok = fail(err, cap, f, "site %u: slot %u names buffer %u", s, j, b);
                        break;
                    }
                    used[b] = 1;
                    if (nd->kind == VM_NODE_CALL && nd->op_id == OP_ID_CONCATENATE) used[b] = 2;
                    if (nd->kind == VM_NODE_CALL && nd->op_id == OP_ID_SPLIT) used[b] = 3;
                    if (pl->bufs[b].start != step + k)
                        ok = fail(err, cap, f, "buffer %u starts at step %u, its node at %llu", b,
                                  pl->bufs[b].start, (unsigned long long)(step + k));
                    else if (pl->bufs[b].inplace != VM_PLAN_NONE &&
                             vm_plan_piece_of(pl->bufs[b].inplace) == VM_PLAN_NONE) {
                        /* in place only over an argument of a kernel that allows it */
                        bool arg_ok = false;
                        for (uint32_t a = 0; a < nd->n_args && !nd->out_tuple; a++)
                            arg_ok |= vm_plan_inplace_ok(nd->op_id, a);
                        if (!arg_ok)
                            ok = fail(err, cap, f, "buffer %u: operator %u does not run in place",
                                      b, nd->op_id);
                    }
                }
            }
            s++;
        }
        step += steps;
        if (step >= VM_PLAN_FOREVER) ok = fail(err, cap, f, "too many steps");
    }
    if (ok && s != pl->n_sites) ok = fail(err, cap, f, "site %u is out of order", s);
    for (uint32_t b = 0; ok && b < pl->n_bufs; b++) {
        uint32_t r = vm_plan_piece_of(pl->bufs[b].inplace);
        if (!used[b])
            ok = fail(err, cap, f, "buffer %u is not used by any site", b);
        else if (r != VM_PLAN_NONE && !(used[r] == 2 && pl->bufs[r].start == pl->bufs[b].end) &&
                 !(used[b] == 3 && pl->bufs[r].end == pl->bufs[b].start))
            ok = fail(err, cap, f,
                      "buffer %u: a piece of buffer %u, not a concatenate's or split's", b, r);
    }
    free(used);
    if (!ok) return false;
    /* No two buffers live at once share bytes, except in place: a sweep over time keeps the
     * live buffers sorted by offset, pairwise disjoint, so a new one meets one of them only
     * if it meets its neighbours. A buffer written in place takes its source's place. */
    OffIdx *ev = sup_malloc(sizeof(OffIdx) * (pl->n_bufs ? pl->n_bufs : 1));
    for (uint32_t b = 0; b < pl->n_bufs; b++)
        ev[b] = (OffIdx){pl->bufs[b].start, b};
    qsort(ev, pl->n_bufs, sizeof *ev, by_offset); /* by start here */
    uint32_t *live = sup_malloc(sizeof(uint32_t) * (pl->n_bufs ? pl->n_bufs : 1));
    uint32_t n_live = 0;
    for (uint32_t k = 0; k < pl->n_bufs && ok; k++) {
        uint32_t bi = ev[k].i;
        const VmPlanBuf *nb = &pl->bufs[bi];
        uint32_t w = 0, of = vm_plan_piece_of(nb->inplace); /* drop the buffers that ended, */
        for (uint32_t j = 0; j < n_live; j++) {             /* and the in-place source */
            const VmPlanBuf *x = &pl->bufs[live[j]];
            if (x->end < nb->start || live[j] == nb->inplace) continue;
            if (vm_plan_piece_of(x->inplace) == bi) continue; /* its piece: ends here */
            /* nb a piece: of a split's input, which ends where nb starts; or written in place
             * over the end of a chain (a fused tail over its anchor's output: nb's field names
             * its container, the chain's source is implied) */
            if (of != VM_PLAN_NONE && x->end == nb->start &&
                (live[j] == of || (x->offset == nb->offset && x->nbytes == nb->nbytes)))
                continue;
            live[w++] = live[j];
        }
        n_live = w;
        uint32_t lo = 0, hi = n_live; /* the first live buffer at or after nb's offset */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (pl->bufs[live[mid]].offset < nb->offset)
                lo = mid + 1;
            else
                hi = mid;
        }
        const VmPlanBuf *prev = lo > 0 ? &pl->bufs[live[lo - 1]] : NULL;
        const VmPlanBuf *next = lo < n_live ? &pl->bufs[live[lo]] : NULL;
        if ((prev && prev->offset + prev->nbytes > nb->offset) ||
            (next && nb->offset + nb->nbytes > next->offset)) {
            ok = fail(err, cap, f, "buffer %u shares bytes with buffer %u while both live", bi,
                      (prev && prev->offset + prev->nbytes > nb->offset) ? live[lo - 1] : live[lo]);
            break;
        }
        memmove(live + lo + 1, live + lo, (n_live - lo) * sizeof *live);
        live[lo] = bi;
        n_live++;
    }
    free(live);
    free(ev);
    return ok;
}
