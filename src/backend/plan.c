/* plan.c - static memory planning (vm.h, "memory plans"; docs/vm.md, "Memory planning").
 *
 * A function is planned when it is first-order and alone on its call-graph paths: no closure
 * made or called, no reference, no backward jump, not on a cycle of the call graph (so one
 * activation at most is running). Within it, every output of a packed node whose type is a
 * tensor of static shape gets a buffer, unless its value may outlive the function (returned
 * from a function that is not the entry, or mixed with a parameter's value).
 *
 * Liveness is over plan steps (vm.h). Values flow between registers through moves, fields,
 * tuples, constructor values, reshapes and calls (a callee may return what it was given):
 * registers so connected form one class (union-find), and a buffer lives from its node's step
 * to the last step that reads any register of the class of the register it is returned in
 * (or the last node of its packed call that reads it). The code only jumps forward, so a path
 * visits steps in increasing order and this interval covers the value on every path (the
 * union over branches).
 *
 * In place: a node of an operator whose kernel allows it (vm_plan_inplace_ok) writes over an
 * argument buffer of its dtype and size whose interval ends at this node. Chains of in-place
 * buffers form groups that share one offset. Groups are packed into the arena greedily,
 * largest first, each at the best-fitting gap among the groups live at the same time. */
#include "backend/be.h"

typedef Vec(uint32_t) U32Vec;

static uint32_t uf_find(uint32_t *p, uint32_t x) {
    while (p[x] != x) {
        p[x] = p[p[x]];
        x = p[x];
    }
    return x;
}

static void uf_union(uint32_t *p, uint32_t a, uint32_t b) {
    a = uf_find(p, a);
    b = uf_find(p, b);
    if (a != b) p[a] = b;
}

/* ---- which functions ------------------------------------------------------------------------- */

/* Why function fi cannot be planned (ignoring cycles), or NULL. */
static const char *why_not(Be *be, uint32_t fi) {
    const BeFunc *bf = be->funcs.data[fi];
    if (bf->kind == BF_LAMBDA) return "a closure's code";
    if (bf->kind == BF_PRIM || bf->kind == BF_CTOR) return "a wrapper";
    const VmFunction *f = &be->exe->funcs[fi];
    for (uint32_t pc = 0; pc < f->n_code; pc++) {
        const VmInstr *in = &f->code[pc];
        switch (in->op) {
        case VM_ALLOC_CLOSURE:
        case VM_INVOKE_CLOSURE: return "makes or calls closures";
        case VM_REF_NEW:
        case VM_REF_READ:
        case VM_REF_WRITE: return "uses references";
        case VM_IF:
            if (in->b <= pc) return "jumps backward";
            break;
        case VM_GOTO:
            if (in->a <= pc) return "jumps backward";
            break;
        default: break;
        }
    }
    return NULL;
}

/* on_cycle[f]: f may be active twice at once (it reaches itself through calls; a function
 * that calls closures reaches every function a closure can run). */
static void find_cycles(Be *be, bool *on_cycle) {
    const VmExec *exe = be->exe;
    uint32_t n = exe->n_funcs;
    bool *closure_target = sup_calloc(n ? n : 1, 1);
    for (uint32_t i = 0; i < n; i++) {
        const BeFunc *bf = be->funcs.data[i];
        if (bf->kind != BF_GLOBAL && bf->kind != BF_EXPR) closure_target[i] = true;
        const VmFunction *f = &exe->funcs[i];
        for (uint32_t pc = 0; pc < f->n_code; pc++)
            if (f->code[pc].op == VM_ALLOC_CLOSURE) closure_target[f->code[pc].a] = true;
    }
    uint32_t *seen = sup_calloc(n ? n : 1, sizeof(uint32_t));
    U32Vec stack = {0};
    for (uint32_t s = 0; s < n; s++) {
        /* depth-first over the callees of s, marking with stamp s + 1 */
        vec_push(&stack, s);
        bool first = true;
        while (stack.len && !on_cycle[s]) {
            uint32_t g = vec_pop(&stack);
            if (!first) {
                if (g == s) {
                    on_cycle[s] = true;
                    break;
                }
                if (seen[g] == s + 1) continue;
                seen[g] = s + 1;
            }
            first = false;
            const VmFunction *f = &exe->funcs[g];
            for (uint32_t pc = 0; pc < f->n_code; pc++) {
                const VmInstr *in = &f->code[pc];
                if (in->op == VM_INVOKE) vec_push(&stack, in->a);
                if (in->op == VM_INVOKE_CLOSURE)
                    for (uint32_t t = 0; t < n; t++)
                        if (closure_target[t]) vec_push(&stack, t);
            }
        }
        stack.len = 0;
    }
    vec_free(&stack);
    free(seen);
    free(closure_target);
}

/* ---- one function -------------------------------------------------------------------------- */

typedef struct PBuf {
    VmPlanBuf b;
    uint32_t group;     /* the first buffer of its in-place chain */
    bool overwritten;   /* a later buffer is written in place over this one */
    uint64_t piece_off; /* a piece (b.inplace has VM_PLAN_PIECE): its byte offset in the result */
} PBuf;

typedef struct Planner {
    Be *be;
    const VmFunction *f;
    bool is_entry;
    uint32_t *cls;     /* register classes (union-find) */
    uint32_t *cls_end; /* by class root: the last step reading it */
    uint8_t *cls_bad;  /* by class root: 1 returned, 2 may outlive the function */
    uint32_t *step;    /* n_code + 1: each instruction's first step */
    uint32_t total;    /* steps */
    Vec(PBuf) bufs;
    U32Vec slots;
    Vec(VmPlanSite) sites;
    uint32_t *reg_buf; /* the buffer a register defined once holds, or VM_PLAN_NONE */
    uint32_t *n_defs;  /* instructions writing each register */
} Planner;

static uint32_t steps_of(const VmExec *exe, const VmInstr *in) {
    if (in->op != VM_INVOKE_PACKED) return 1;
    uint32_t n = exe->packed[in->a].n_nodes;
    return n ? n : 1;
}

/* Does packed p's result hold (a part of) one of its inputs? */
static bool result_from_input(const VmPacked *p) {
    uint32_t nv = p->n_inputs + p->n_nodes;
    uint8_t *from = sup_calloc(nv ? nv : 1, 1);
    for (uint32_t i = 0; i < p->n_inputs; i++)
        from[i] = 1;
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        const VmNode *n = &p->nodes[k];
        if (n->kind == VM_NODE_TUPLE || n->kind == VM_NODE_FIELD)
            for (uint32_t a = 0; a < n->n_args; a++)
                from[p->n_inputs + k] |= from[n->args[a]];
    }
    bool r = from[p->result];
    free(from);
    return r;
}

/* Classes, their ends and escapes. */
static void classes(Planner *P) {
    const VmFunction *f = P->f;
    const VmExec *exe = P->be->exe;
    uint32_t nr = f->n_regs;
    for (uint32_t r = 0; r < nr; r++)
        P->cls[r] = r;
    for (uint32_t pc = 0; pc < f->n_code; pc++) {
        const VmInstr *in = &f->code[pc];
        const uint32_t *args = f->pool + in->args;
        bool value_dst = in->dst < nr && f->reg_kind[in->dst] == VM_RK_VALUE;
        switch (in->op) {
        case VM_MOVE:
        case VM_GET_FIELD:
        case VM_RESHAPE_TENSOR:
            if (value_dst) uf_union(P->cls, in->dst, in->a);
            break;
        case VM_ALLOC_TUPLE:
        case VM_ALLOC_ADT:
            for (uint32_t i = 0; i < in->n; i++)
                uf_union(P->cls, in->dst, args[i]);
            break;
        case VM_INVOKE:
            if (!(in->flags & VM_F_TAIL) && value_dst)
                for (uint32_t i = 0; i < in->n; i++)
                    uf_union(P->cls, in->dst, args[i]);
            break;
        case VM_INVOKE_PACKED:
            if (result_from_input(&exe->packed[in->a]))
                for (uint32_t i = 0; i < in->n; i++)
                    uf_union(P->cls, in->dst, args[i]);
            break;
        default: break;
        }
    }
    for (uint32_t r = 0; r < nr; r++) {
        P->cls_end[r] = 0;
        P->cls_bad[r] = 0;
    }
    for (uint32_t r = 0; r < f->n_params; r++)
        P->cls_bad[uf_find(P->cls, r)] = 2;
    for (uint32_t pc = 0; pc < f->n_code; pc++) {
        const VmInstr *in = &f->code[pc];
        uint32_t at = P->step[pc] + steps_of(exe, in) - 1;
        uint32_t rd[2];
        bool pooled;
        uint32_t k = be_instr_reads(in, rd, &pooled);
        for (uint32_t j = 0; j < k; j++) {
            uint32_t c = uf_find(P->cls, rd[j]);
            if (P->cls_end[c] < at) P->cls_end[c] = at;
        }
        if (pooled)
            for (uint32_t j = 0; j < in->n; j++) {
                uint32_t c = uf_find(P->cls, f->pool[in->args + j]);
                if (P->cls_end[c] < at) P->cls_end[c] = at;
            }
        bool tail = in->op == VM_INVOKE && (in->flags & VM_F_TAIL);
        if (in->op == VM_RET) P->cls_bad[uf_find(P->cls, in->a)] |= 1;
        if (tail)
            for (uint32_t j = 0; j < in->n; j++)
                P->cls_bad[uf_find(P->cls, f->pool[in->args + j])] |= 1;
    }
}

/* The static tensor type t as (dtype, ndim, shape, bytes); false when it is not one. */
static bool static_tensor(Type *t, TensorType **out, uint64_t *bytes) {
    if (t == NULL || t->kind != TYPE_TENSOR) return false;
    TensorType *tt = AS_TENSOR_TYPE(t);
    if (tt->ndim > K_MAX_DIMS) return false;
    for (uint32_t d = 0; d < tt->ndim; d++)
        if (tt->shape[d] < 0) return false;
    char why[128];
    if (sup_shape_check(tt->ndim, tt->shape, false, why, sizeof why) != NULL) return false;
    uint64_t n = (uint64_t)sup_shape_numel(tt->ndim, tt->shape);
    uint64_t es = sup_dtype_size(tt->dtype);
    if (n == 0 || n > ((uint64_t)1 << 40) / es) return false;
    *out = tt;
    *bytes = n * es;
    return true;
}

static uint32_t new_buf(Planner *P, TensorType *tt, uint64_t bytes, uint32_t start, uint32_t end) {
    PBuf b = {.b = {.nbytes = bytes,
                    .dtype = tt->dtype,
                    .ndim = tt->ndim,
                    .shape = tt->shape,
                    .start = start,
                    .end = end,
                    .inplace = VM_PLAN_NONE},
              .group = (uint32_t)P->bufs.len};
    vec_push(&P->bufs, b);
    return (uint32_t)P->bufs.len - 1;
}

/* Whether buffer src, held by an input of packed call `in` (p), is read by no node of p after
 * node k: every input holding it, and every input of its register's class, is last read at
 * node k or before (last: by value, the last reading node), and it reaches no tuple or field
 * (those may carry it into the result). */
static bool input_dies_at(const Planner *P, const VmPacked *p, const VmInstr *in,
                          const uint32_t *last, uint32_t src, uint32_t k) {
    const VmFunction *f = P->f;
    uint32_t cls = VM_PLAN_NONE;
    for (uint32_t u = 0; u < p->n_inputs; u++) {
        uint32_t r = f->pool[in->args + u];
        if (P->reg_buf[r] == src) cls = uf_find(P->cls, r);
    }
    for (uint32_t u = 0; u < p->n_inputs; u++) {
        uint32_t r = f->pool[in->args + u];
        if (P->reg_buf[r] != src && uf_find(P->cls, r) != cls) continue;
        if (last[u] > k) return false;
    }
    for (uint32_t j = 0; j < p->n_nodes; j++) {
        const VmNode *n = &p->nodes[j];
        if (n->kind != VM_NODE_TUPLE && n->kind != VM_NODE_FIELD) continue;
        for (uint32_t a = 0; a < n->n_args; a++)
            if (n->args[a] < p->n_inputs) {
                uint32_t r = f->pool[in->args + n->args[a]];
                if (P->reg_buf[r] == src || uf_find(P->cls, r) == cls) return false;
            }
    }
    return true;
}

/* Whether concatenate or split node n, over (or into) buffer b, joins (cuts) along an axis after
 * dims of size 1 only: each piece is then one contiguous run of b. */
static bool runs_contiguous(const VmNode *n, const VmPlanBuf *b) {
    int64_t axis = -1;
    for (uint32_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].name && strcmp(n->attrs[i].name, "axis") == 0 && n->attrs[i].kind == KA_INT)
            axis = n->attrs[i].i < 0 ? n->attrs[i].i + b->ndim : n->attrs[i].i;
    if (axis < 0 || axis >= (int64_t)b->ndim) return false;
    for (int64_t d = 0; d < axis; d++)
        if (b->shape[d] != 1) return false;
    return true;
}

/* Concatenate in place: when packed call `in` (p) is a concatenate of its inputs along an axis
 * after dims of size 1 only (each input is one contiguous run of the result) and every input is
 * a buffer that dies here and is not overwritten in place (so its in-place chain ends with it),
 * each input's chain becomes a piece
 * of the result's buffer c: packed inside c's bytes at the input's offset there (a multiple of
 * 64), so that what made the input wrote it where the concatenate would copy it. SqueezeNet's
 * fire modules joined their two branches with 1.5 MB of copies per run. */
static void concat_pieces(Planner *P, const VmPacked *p, const VmInstr *in, uint32_t last_step,
                          uint32_t c) {
    const VmNode *t = &p->nodes[0], *cat = &p->nodes[p->n_nodes - 1];
    if (p->n_nodes != 2 || p->n_inputs < 2 || p->n_inputs > 64 || t->kind != VM_NODE_TUPLE ||
        t->n_args != p->n_inputs || cat->kind != VM_NODE_CALL || cat->op_id != OP_ID_CONCATENATE ||
        cat->n_args != 1 || cat->args[0] != p->n_inputs || p->result != p->n_inputs + 1)
        return;
    const VmPlanBuf *cb = &P->bufs.data[c].b;
    if (!runs_contiguous(cat, cb)) return;
    uint32_t piece[64];
    uint64_t off = 0;
    for (uint32_t i = 0; i < p->n_inputs; i++) {
        if (t->args[i] != i) return;
        uint32_t b = P->reg_buf[P->f->pool[in->args + i]];
        if (b == VM_PLAN_NONE || b == c || off % 64 != 0) return;
        const PBuf *pb = &P->bufs.data[b];
        if (pb->b.end != last_step || pb->overwritten || pb->b.dtype != cb->dtype ||
            vm_plan_piece_of(pb->b.inplace) != VM_PLAN_NONE)
            return;
        /* not overwritten: b ends its in-place chain (each buffer is overwritten once at most,
         * and its source ends where it starts) */
        for (uint32_t j = 0; j < i; j++)
            if (P->bufs.data[piece[j]].group == pb->group) return; /* one buffer twice */
        piece[i] = b;
        off += pb->b.nbytes;
    }
    if (off != cb->nbytes) return;
    off = 0;
    for (uint32_t i = 0; i < p->n_inputs; i++) {
        PBuf *pb = &P->bufs.data[piece[i]];
        pb->b.inplace = c | VM_PLAN_PIECE;
        pb->piece_off = off;
        off += pb->b.nbytes;
    }
}

/* Split in place: when packed call `in` (p) is one split of its input along an axis after dims
 * of size 1 only (each output is one contiguous run of the input), the input's buffer dies here
 * and every output has a buffer at an offset of the input that is a multiple of 64, the outputs
 * become pieces of the input's buffer: packed inside its bytes (which stay reserved while any
 * piece lives), so the split copies nothing. The LSTM's input projection, split by step: 128 KB
 * per run. `first`: the site's first slot. */
static void split_pieces(Planner *P, const VmPacked *p, const VmInstr *in, uint32_t last_step,
                         uint32_t first) {
    const VmNode *n = &p->nodes[0];
    if (p->n_nodes != 1 || p->n_inputs != 1 || n->kind != VM_NODE_CALL || n->op_id != OP_ID_SPLIT ||
        !n->out_tuple || n->n_args != 1 || n->args[0] != 0)
        return;
    uint32_t d = P->reg_buf[P->f->pool[in->args]];
    if (d == VM_PLAN_NONE) return;
    const PBuf *db = &P->bufs.data[d];
    if (db->b.end != last_step || db->overwritten ||
        vm_plan_piece_of(db->b.inplace) != VM_PLAN_NONE || !runs_contiguous(n, &db->b))
        return;
    uint64_t off = 0;
    for (uint32_t o = 0; o < n->n_out; o++) {
        uint32_t b = P->slots.data[first + o];
        if (b == VM_PLAN_NONE || off % 64 != 0 || P->bufs.data[b].b.dtype != db->b.dtype) return;
        off += P->bufs.data[b].b.nbytes;
    }
    if (off != db->b.nbytes) return;
    off = 0;
    for (uint32_t o = 0; o < n->n_out; o++) {
        PBuf *pb = &P->bufs.data[P->slots.data[first + o]];
        pb->b.inplace = d | VM_PLAN_PIECE;
        pb->piece_off = off;
        off += pb->b.nbytes;
    }
}

/* The buffers of the site at pc. */
static void plan_site(Planner *P, uint32_t pc) {
    Be *be = P->be;
    const VmFunction *f = P->f;
    const VmInstr *in = &f->code[pc];
    const VmPacked *p = &be->exe->packed[in->a];
    uint32_t site = (uint32_t)in->imm;
    if (site == 0 || site > be->site_types.len) return; /* not marked: leave it unplanned */
    Type *site_ty = be->site_types.data[site - 1];
    Type **types = in->a < be->packed_types.len ? be->packed_types.data[in->a] : NULL;
    if (types == NULL && p->n_nodes != 1) return;
    uint32_t base = P->step[pc], last_step = base + steps_of(be->exe, in) - 1;
    uint32_t nv = p->n_inputs + p->n_nodes;
    /* last reading node of each value; whether it flows into the result */
    uint32_t *last = sup_malloc(sizeof(uint32_t) * (nv ? nv : 1));
    uint8_t *in_res = sup_calloc(nv ? nv : 1, 1);
    uint32_t *vbuf = sup_malloc(sizeof(uint32_t) * (nv ? nv : 1)); /* single-output buffer */
    for (uint32_t v = 0; v < nv; v++) {
        last[v] = v < p->n_inputs ? 0 : v - p->n_inputs;
        vbuf[v] = VM_PLAN_NONE;
    }
    for (uint32_t k = 0; k < p->n_nodes; k++)
        for (uint32_t a = 0; a < p->nodes[k].n_args; a++)
            if (last[p->nodes[k].args[a]] < k) last[p->nodes[k].args[a]] = k;
    in_res[p->result] = 1;
    for (uint32_t k = p->n_nodes; k-- > 0;) {
        const VmNode *n = &p->nodes[k];
        if (n->kind != VM_NODE_TUPLE && n->kind != VM_NODE_FIELD) continue;
        for (uint32_t a = 0; a < n->n_args; a++) {
            uint32_t u = n->args[a];
            if (last[u] < last[p->n_inputs + k]) last[u] = last[p->n_inputs + k];
            in_res[u] |= in_res[p->n_inputs + k];
        }
    }
    uint32_t dcls = uf_find(P->cls, in->dst);
    uint8_t bad = P->cls_bad[dcls];
    uint32_t res_end = P->cls_end[dcls] > last_step ? P->cls_end[dcls] : last_step;
    if (bad == 1 && P->is_entry) res_end = VM_PLAN_FOREVER;
    bool res_ok = bad == 0 || (bad == 1 && P->is_entry);
    VmPlanSite st = {.pc = pc, .first = (uint32_t)P->slots.len, .n = 0};
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        const VmNode *n = &p->nodes[k];
        if (n->kind != VM_NODE_CALL) continue;
        uint32_t v = p->n_inputs + k;
        Type *t = types ? types[k] : site_ty;
        uint32_t n_out = n->out_tuple ? n->n_out : 1;
        for (uint32_t o = 0; o < n_out; o++) {
            Type *ot = t;
            if (n->out_tuple) {
                ot = NULL;
                if (t != NULL && t->kind == TYPE_TUPLE && o < AS_TUPLE_TYPE(t)->n)
                    ot = AS_TUPLE_TYPE(t)->fields[o];
            }
            TensorType *tt = NULL;
            uint64_t bytes = 0;
            uint32_t b = VM_PLAN_NONE;
            if ((!in_res[v] || res_ok) && static_tensor(ot, &tt, &bytes))
                b = new_buf(P, tt, bytes, base + k, in_res[v] ? res_end : base + last[v]);
            vec_push(&P->slots, b);
            st.n++;
            if (b == VM_PLAN_NONE || n->out_tuple) continue;
            vbuf[v] = b;
            /* in place over an argument that dies here */
            for (uint32_t a = 0; a < n->n_args; a++) {
                if (!vm_plan_inplace_ok(n->op_id, a)) continue;
                uint32_t u = n->args[a];
                uint32_t src = u < p->n_inputs ? P->reg_buf[f->pool[in->args + u]] : vbuf[u];
                if (src == VM_PLAN_NONE) continue;
                PBuf *sb = &P->bufs.data[src];
                if (sb->b.dtype != tt->dtype || sb->b.nbytes != bytes) continue;
                if (sb->b.end != base + k) {
                    /* an input's buffer lives to the site's last step; when node k is the
                     * last reader of it in the site (and no later step reads it), it dies
                     * here: BERT's reshapes of a product's result (10 copies of 64-128 KB
                     * per run) */
                    if (u >= p->n_inputs || sb->b.end != last_step || sb->overwritten ||
                        !input_dies_at(P, p, in, last, src, k))
                        continue;
                    sb->b.end = base + k;
                }
                if (sb->overwritten) continue; /* a buffer is overwritten in place once */
                sb->overwritten = true;
                P->bufs.data[b].b.inplace = src;
                P->bufs.data[b].group = sb->group;
                break;
            }
        }
    }
    if (vbuf[p->result] != VM_PLAN_NONE) concat_pieces(P, p, in, last_step, vbuf[p->result]);
    split_pieces(P, p, in, last_step, st.first);
    if (P->n_defs[in->dst] == 1) P->reg_buf[in->dst] = vbuf[p->result];
    vec_push(&P->sites, st);
    free(last);
    free(in_res);
    free(vbuf);
}

/* ---- packing -----------------------------------------------------------------------------------
 */

typedef struct Group {
    uint64_t size; /* rounded up to 64 */
    uint32_t start, end;
    uint64_t offset;
    bool placed;
} Group;

typedef struct Ev {
    uint32_t start, i;
} Ev;

static int by_start(const void *x, const void *y) {
    const Ev *a = x, *b = y;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

typedef struct Block {
    uint64_t off, size;
} Block;
typedef Vec(Block) BlockVec;

/* Give back [off, off + size) to the free list (sorted by offset, coalesced). */
static void give_back(BlockVec *fl, uint64_t off, uint64_t size) {
    size_t i = 0;
    while (i < fl->len && fl->data[i].off < off)
        i++;
    Block zero = {0, 0};
    vec_push(fl, zero);
    memmove(fl->data + i + 1, fl->data + i, (fl->len - 1 - i) * sizeof(Block));
    fl->data[i] = (Block){off, size};
    if (i + 1 < fl->len && fl->data[i].off + fl->data[i].size == fl->data[i + 1].off) {
        fl->data[i].size += fl->data[i + 1].size;
        memmove(fl->data + i + 1, fl->data + i + 2, (fl->len - i - 2) * sizeof(Block));
        fl->len--;
    }
    if (i > 0 && fl->data[i - 1].off + fl->data[i - 1].size == fl->data[i].off) {
        fl->data[i - 1].size += fl->data[i].size;
        memmove(fl->data + i, fl->data + i + 1, (fl->len - i - 1) * sizeof(Block));
        fl->len--;
    }
}

/* Offsets for the groups: a sweep over time that takes, for each group as it starts, the
 * best-fitting free block (the smallest that holds it; else the top of the arena, grown) and
 * gives blocks back when their groups end. Returns the arena's size. Groups of size 0 (not
 * chain heads) are skipped. */
static uint64_t pack(Group *g, uint32_t n) {
    Ev *ev = sup_malloc(sizeof(Ev) * (n ? n : 1));
    uint32_t ne = 0;
    for (uint32_t i = 0; i < n; i++)
        if (g[i].size) ev[ne++] = (Ev){g[i].start, i};
    qsort(ev, ne, sizeof *ev, by_start);
    /* live groups as a binary min-heap by end */
    uint32_t *heap = sup_malloc(sizeof(uint32_t) * (ne ? ne : 1));
    uint32_t nh = 0;
    BlockVec fl = {0};
    uint64_t top = 0;
    for (uint32_t k = 0; k < ne; k++) {
        Group *a = &g[ev[k].i];
        while (nh > 0 && g[heap[0]].end < a->start) { /* ended before a starts: free */
            Group *x = &g[heap[0]];
            give_back(&fl, x->offset, x->size);
            heap[0] = heap[--nh];
            for (uint32_t i = 0;;) {
                uint32_t l = 2 * i + 1, r = l + 1, m = i;
                if (l < nh && g[heap[l]].end < g[heap[m]].end) m = l;
                if (r < nh && g[heap[r]].end < g[heap[m]].end) m = r;
                if (m == i) break;
                uint32_t t = heap[i];
                heap[i] = heap[m];
                heap[m] = t;
                i = m;
            }
        }
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < fl.len; i++)
            if (fl.data[i].size >= a->size &&
                (best == SIZE_MAX || fl.data[i].size < fl.data[best].size))
                best = i;
        if (best != SIZE_MAX) {
            a->offset = fl.data[best].off;
            fl.data[best].off += a->size;
            fl.data[best].size -= a->size;
            if (fl.data[best].size == 0) {
                memmove(fl.data + best, fl.data + best + 1, (fl.len - best - 1) * sizeof(Block));
                fl.len--;
            }
        } else if (fl.len > 0 && fl.data[fl.len - 1].off + fl.data[fl.len - 1].size == top) {
            a->offset = fl.data[fl.len - 1].off; /* the free block at the top, grown */
            top = a->offset + a->size;
            fl.len--;
        } else {
            a->offset = top;
            top += a->size;
        }
        a->placed = true;
        uint32_t i = nh++;
        heap[i] = ev[k].i;
        while (i > 0 && g[heap[(i - 1) / 2]].end > g[heap[i]].end) {
            uint32_t p = (i - 1) / 2, t = heap[i];
            heap[i] = heap[p];
            heap[p] = t;
            i = p;
        }
    }
    vec_free(&fl);
    free(heap);
    free(ev);
    return top;
}

/* ---- the driver ------------------------------------------------------------------------------ */

static void plan_function(Be *be, uint32_t fi, VmFunction *f) {
    const VmExec *exe = be->exe;
    Planner P = {.be = be, .f = f, .is_entry = fi == exe->entry};
    uint32_t nr = f->n_regs ? f->n_regs : 1;
    P.cls = sup_malloc(sizeof(uint32_t) * nr);
    P.cls_end = sup_malloc(sizeof(uint32_t) * nr);
    P.cls_bad = sup_malloc(nr);
    P.reg_buf = sup_malloc(sizeof(uint32_t) * nr);
    P.n_defs = sup_calloc(nr, sizeof(uint32_t));
    P.step = sup_malloc(sizeof(uint32_t) * ((size_t)f->n_code + 1));
    uint64_t t = 0;
    for (uint32_t pc = 0; pc < f->n_code; pc++) {
        P.step[pc] = (uint32_t)t;
        t += steps_of(exe, &f->code[pc]);
        if (t >= VM_PLAN_FOREVER - 1) {
            f->no_plan = "too long";
            goto out;
        }
        const VmInstr *in = &f->code[pc];
        if (in->op != VM_RET && in->op != VM_IF && in->op != VM_GOTO && in->op != VM_KILL &&
            in->op != VM_FATAL && in->dst < f->n_regs)
            P.n_defs[in->dst]++;
    }
    P.step[f->n_code] = (uint32_t)t;
    P.total = (uint32_t)t;
    for (uint32_t r = 0; r < f->n_regs; r++)
        P.reg_buf[r] = VM_PLAN_NONE;
    classes(&P);
    for (uint32_t pc = 0; pc < f->n_code; pc++)
        if (f->code[pc].op == VM_INVOKE_PACKED) plan_site(&P, pc);
    if (P.bufs.len == 0) {
        f->no_plan = "no tensor of static shape to plan";
        goto out;
    }
    /* groups: a chain of in-place buffers shares one offset */
    uint32_t nb = (uint32_t)P.bufs.len;
    Group *g = sup_calloc(nb, sizeof(Group));
    for (uint32_t b = 0; b < nb; b++) {
        const PBuf *pb = &P.bufs.data[b];
        Group *x = &g[pb->group];
        uint64_t sz = (pb->b.nbytes + 63) / 64 * 64;
        if (pb->group == b) {
            x->size = sz;
            x->start = pb->b.start;
            x->end = pb->b.end;
        } else if (pb->b.end > x->end) {
            x->end = pb->b.end;
        }
    }
    /* pieces: their chains live inside their container's chain (a concatenate's result, a
     * split's input), which is placed from the earliest start of its pieces on and kept to the
     * latest end (ascending: a container that is itself a piece is extended first) */
    for (uint32_t b = 0; b < nb; b++) {
        const PBuf *pb = &P.bufs.data[b];
        uint32_t in = vm_plan_piece_of(pb->b.inplace);
        if (in == VM_PLAN_NONE) continue;
        Group *x = &g[pb->group], *r = &g[P.bufs.data[in].group];
        if (x->start < r->start) r->start = x->start;
        if (x->end > r->end) r->end = x->end;
        x->size = 0;
    }
    uint64_t top = pack(g, nb);       /* groups that are not chain heads have size 0: ignored */
    for (uint32_t b = nb; b-- > 0;) { /* descending: a result's offset is known first */
        const PBuf *pb = &P.bufs.data[b];
        uint32_t in = vm_plan_piece_of(pb->b.inplace);
        if (in != VM_PLAN_NONE)
            g[pb->group].offset = g[P.bufs.data[in].group].offset + pb->piece_off;
    }
    VmPlanBuf *bufs = arena_array(be->arena, nb, sizeof(VmPlanBuf));
    uint32_t n_inplace = 0;
    for (uint32_t b = 0; b < nb; b++) {
        bufs[b] = P.bufs.data[b].b;
        bufs[b].offset = g[P.bufs.data[b].group].offset;
        bufs[b].shape = be_dup(be, bufs[b].shape, bufs[b].ndim, sizeof(int64_t));
        n_inplace += bufs[b].inplace != VM_PLAN_NONE;
    }
    free(g);
    VmPlan *pl = arena_alloc(be->arena, sizeof *pl);
    pl->arena_bytes = top;
    pl->n_bufs = nb;
    pl->bufs = bufs;
    pl->n_sites = (uint32_t)P.sites.len;
    pl->sites = be_dup(be, P.sites.data, P.sites.len, sizeof(VmPlanSite));
    pl->n_slots = (uint32_t)P.slots.len;
    pl->slots = be_dup(be, P.slots.data, P.slots.len, sizeof(uint32_t));
    pl->n_inplace = n_inplace;
    f->plan = pl;
out:
    free(P.cls);
    free(P.cls_end);
    free(P.cls_bad);
    free(P.reg_buf);
    free(P.n_defs);
    free(P.step);
    vec_free(&P.bufs);
    vec_free(&P.slots);
    vec_free(&P.sites);
}

void be_plan_memory(Be *be) {
    VmExec *exe = be->exe;
    uint32_t n = exe->n_funcs;
    VmFunction *funcs = (VmFunction *)exe->funcs; /* in exe->arena, being assembled */
    bool *on_cycle = sup_calloc(n ? n : 1, 1);
    find_cycles(be, on_cycle);
    for (uint32_t i = 0; i < n; i++) {
        VmFunction *f = &funcs[i];
        const char *why = why_not(be, i);
        if (why == NULL && on_cycle[i]) why = "recursive (on a cycle of the call graph)";
        if (why != NULL)
            f->no_plan = why;
        else
            plan_function(be, i, f);
    }
    free(on_cycle);
    /* the site marks are the compiler's: executables carry imm 0 on INVOKE_PACKED */
    for (uint32_t i = 0; i < n; i++) {
        VmInstr *code = (VmInstr *)funcs[i].code;
        for (uint32_t pc = 0; pc < funcs[i].n_code; pc++)
            if (code[pc].op == VM_INVOKE_PACKED) code[pc].imm = 0;
    }
}
