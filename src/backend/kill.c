/* kill.c - releasing values at their last use: VM_KILL instructions inserted into a compiled
 * function, so that a VALUE register (a tensor, most of all) does not hold its value until the
 * function returns. The interpreter frees an intermediate value as soon as its consumer has run;
 * without this the VM would keep every activation of a model alive at once.
 *
 * The compiler's code only jumps forward (there are no loops inside a function: repetition is
 * recursion), so a path visits instructions in increasing order, and a register is dead at every
 * point after its last use in code order. Two kinds of kills follow:
 *   - after the instruction holding a register's last use (or after a definition no later
 *     instruction uses);
 *   - at the target t of a jump from i, for each register whose last use lies in (i, t) (the
 *     path i -> t skips the kill placed there) and that may hold a value at i; and, for a
 *     conditional jump, the register of its condition when that is its last use.
 * A kill is safe wherever its register is dead, on every path through that point, so a kill at
 * a jump target also reached by falling through costs at most a release of an empty register.
 * RET moves its register out and a tail call or VM_FATAL ends the frame: no kill after those. */
#include "backend/be.h"

uint32_t be_instr_reads(const VmInstr *in, uint32_t *out, bool *pooled) {
    *pooled = false;
    switch (in->op) {
    case VM_MOVE:
    case VM_RET:
    case VM_GET_FIELD:
    case VM_GET_TAG:
    case VM_IF:
    case VM_SHAPE_OF:
    case VM_REF_NEW:
    case VM_REF_READ:
    case VM_BOX:
    case VM_UNBOX: out[0] = in->a; return 1;
    case VM_RESHAPE_TENSOR:
    case VM_REF_WRITE:
    case VM_SCALAR:
        out[0] = in->a;
        out[1] = in->b;
        return 2;
    case VM_INVOKE_CLOSURE:
        out[0] = in->a;
        *pooled = true;
        return 1;
    case VM_INVOKE:
    case VM_INVOKE_PACKED:
    case VM_ALLOC_ADT:
    case VM_ALLOC_TUPLE:
    case VM_ALLOC_CLOSURE: *pooled = true; return 0;
    default: return 0;
    }
}

static bool defines(const VmInstr *in) {
    switch (in->op) {
    case VM_RET:
    case VM_IF:
    case VM_GOTO:
    case VM_KILL:
    case VM_FATAL: return false;
    case VM_INVOKE:
    case VM_INVOKE_CLOSURE: return !(in->flags & VM_F_TAIL);
    default: return true;
    }
}

static bool ends_frame(const VmInstr *in) {
    return in->op == VM_RET || in->op == VM_FATAL ||
           ((in->op == VM_INVOKE || in->op == VM_INVOKE_CLOSURE) && (in->flags & VM_F_TAIL));
}

typedef Vec(uint32_t) U32Vec;

void be_insert_kills(VmInstr **code_io, uint32_t **locs_io, uint32_t *n_io, const uint32_t *pool,
                     const uint8_t *kinds, uint32_t n_regs, uint32_t n_params) {
    VmInstr *code = *code_io;
    uint32_t *locs = *locs_io;
    uint32_t n = *n_io;
    /* Forward jumps only, or nothing is done (the reasoning above needs it). */
    for (uint32_t i = 0; i < n; i++) {
        if (code[i].op == VM_IF && code[i].b <= i) return;
        if (code[i].op == VM_GOTO && code[i].a <= i) return;
    }
    int64_t *last = sup_malloc(sizeof(int64_t) * (n_regs ? n_regs : 1));  /* last use */
    int64_t *first = sup_malloc(sizeof(int64_t) * (n_regs ? n_regs : 1)); /* first def */
    uint32_t *stamp = sup_calloc(n_regs ? n_regs : 1, sizeof(uint32_t));
    for (uint32_t r = 0; r < n_regs; r++) {
        last[r] = -1;
        first[r] = r < n_params ? -1 : INT64_MAX;
    }
    uint32_t u[2];
    bool pooled;
    for (uint32_t i = 0; i < n; i++) {
        const VmInstr *in = &code[i];
        uint32_t k = be_instr_reads(in, u, &pooled);
        for (uint32_t j = 0; j < k; j++)
            if (u[j] < n_regs) last[u[j]] = i;
        if (pooled)
            for (uint32_t j = 0; j < in->n; j++)
                if (pool[in->args + j] < n_regs) last[pool[in->args + j]] = i;
        if (defines(in) && in->dst < n_regs && first[in->dst] == INT64_MAX) first[in->dst] = i;
    }
    /* Registers by last use, for the jump rule. */
    uint32_t *by_last_start = sup_calloc((size_t)n + 1, sizeof(uint32_t));
    for (uint32_t r = 0; r < n_regs; r++)
        if (kinds[r] == VM_RK_VALUE && last[r] >= 0) by_last_start[last[r] + 1]++;
    for (uint32_t i = 0; i < n; i++)
        by_last_start[i + 1] += by_last_start[i];
    uint32_t *by_last = sup_malloc(sizeof(uint32_t) * (by_last_start[n] ? by_last_start[n] : 1));
    uint32_t *fill = sup_calloc((size_t)n + 1, sizeof(uint32_t));
    for (uint32_t r = 0; r < n_regs; r++)
        if (kinds[r] == VM_RK_VALUE && last[r] >= 0)
            by_last[by_last_start[last[r]] + fill[last[r]]++] = r;
    free(fill);
    /* Kills at jump targets: (target, register) pairs. */
    typedef struct {
        uint32_t at, reg;
    } Kill;
    Vec(Kill) before = {0};
    for (uint32_t i = 0; i < n; i++) {
        const VmInstr *in = &code[i];
        uint32_t t;
        if (in->op == VM_IF)
            t = in->b;
        else if (in->op == VM_GOTO)
            t = in->a;
        else
            continue;
        if (in->op == VM_IF && in->a < n_regs && kinds[in->a] == VM_RK_VALUE &&
            last[in->a] == (int64_t)i) { /* the condition's last use */
            Kill kl = {t, in->a};
            vec_push(&before, kl);
        }
        for (uint32_t p = i + 1; p < t; p++)
            for (uint32_t k = by_last_start[p]; k < by_last_start[p + 1]; k++) {
                uint32_t r = by_last[k];
                if (first[r] >= (int64_t)i) continue; /* not set on the path that jumps */
                Kill kl = {t, r};
                vec_push(&before, kl);
            }
    }
    /* Sort the target kills by position (counting sort). */
    uint32_t *bstart = sup_calloc((size_t)n + 1, sizeof(uint32_t));
    for (size_t k = 0; k < before.len; k++)
        bstart[before.data[k].at + 1]++;
    for (uint32_t i = 0; i < n; i++)
        bstart[i + 1] += bstart[i];
    uint32_t *bregs = sup_malloc(sizeof(uint32_t) * (before.len ? before.len : 1));
    fill = sup_calloc((size_t)n + 1, sizeof(uint32_t));
    for (size_t k = 0; k < before.len; k++)
        bregs[bstart[before.data[k].at] + fill[before.data[k].at]++] = before.data[k].reg;
    free(fill);
    vec_free(&before);
    /* Rebuild. */
    Vec(VmInstr) out = {0};
    U32Vec oloc = {0};
    uint32_t *new_at = sup_malloc(sizeof(uint32_t) * ((size_t)n + 1));
    uint32_t st = 0;
    for (uint32_t i = 0; i < n; i++) {
        new_at[i] = (uint32_t)out.len;
        st++;
        for (uint32_t k = bstart[i]; k < bstart[i + 1]; k++) {
            uint32_t r = bregs[k];
            if (stamp[r] == st) continue;
            stamp[r] = st;
            VmInstr kill = {.op = VM_KILL, .a = r};
            vec_push(&out, kill);
            vec_push(&oloc, 0u);
        }
        const VmInstr *in = &code[i];
        vec_push(&out, *in);
        vec_push(&oloc, locs[i]);
        if (ends_frame(in)) continue;
        st++;
        uint32_t k = be_instr_reads(in, u, &pooled);
        uint32_t cand[2];
        for (uint32_t j = 0; j < k; j++)
            cand[j] = u[j];
        uint32_t dst = defines(in) ? in->dst : UINT32_MAX;
        for (uint32_t j = 0; j < k + (pooled ? in->n : 0); j++) {
            uint32_t r = j < k ? cand[j] : pool[in->args + (j - k)];
            if (r >= n_regs || kinds[r] != VM_RK_VALUE || last[r] != (int64_t)i || r == dst ||
                stamp[r] == st)
                continue;
            stamp[r] = st;
            VmInstr kill = {.op = VM_KILL, .a = r};
            vec_push(&out, kill);
            vec_push(&oloc, locs[i]);
        }
        /* A definition nothing later reads. */
        if (dst < n_regs && kinds[dst] == VM_RK_VALUE && last[dst] <= (int64_t)i &&
            stamp[dst] != st) {
            VmInstr kill = {.op = VM_KILL, .a = dst};
            vec_push(&out, kill);
            vec_push(&oloc, locs[i]);
        }
    }
    new_at[n] = (uint32_t)out.len;
    for (size_t i = 0; i < out.len; i++) {
        if (out.data[i].op == VM_IF) out.data[i].b = new_at[out.data[i].b];
        if (out.data[i].op == VM_GOTO) out.data[i].a = new_at[out.data[i].a];
    }
    free(new_at);
    free(bstart);
    free(bregs);
    free(by_last);
    free(by_last_start);
    free(stamp);
    free(first);
    free(last);
    free(code);
    free(locs);
    *code_io = out.data;
    *locs_io = oloc.data;
    *n_io = (uint32_t)out.len;
}
