/* vm_cell.c - a primitive function the VM runs as an LSTM or GRU kernel (vm_impl.h): the
 * structure FuseRNNCell gives one LSTM step (passes/fuse_rnn_cell.c),
 *   g = add(dense(h, R), xp) (either order), s = split(g, 4, last axis),
 *   c2 = add(multiply(sigmoid(s.F), c), multiply(sigmoid(s.I), tanh(s.G))),
 *   h2 = multiply(sigmoid(s.O), tanh(c2)), result (h2, c2),
 * with h, R, xp, c inputs of the function and every node of it one of these (any order of the
 * commutative operands). Found by following the result back, so a function made another way
 * (a file holds what it holds) is recognized by what it computes, never by its name. Likewise a
 * GRU step (gru_step), and a run of steps (FuseRNNCell's join_steps): a function whose result is
 * the tuple of every step's results, (h1, c1, ..., hn, cn) or (h1, ..., hn), each step one of
 * the above whose h (and c) are the values of the step before's results, all with one R (and
 * bn) and one gate order; the VM then calls the sequence kernels (kern_fast_lstm_seq,
 * kern_fast_gru_seq) once for all the steps. */
#include <stdlib.h>
#include <string.h>

#include "kernels/fast/fast.h"
#include "kernels/fast/gemm.h"
#include "runtime/vm_impl.h"

typedef struct Match {
    const VmPacked *p;
    uint32_t used; /* nodes matched */
} Match;

/* Node of value id when it is a call of op with n args (NULL otherwise); counts it. */
static const VmNode *node(Match *m, uint32_t id, uint32_t op, uint32_t n) {
    if (id < m->p->n_inputs || id - m->p->n_inputs >= m->p->n_nodes) return NULL;
    const VmNode *nd = &m->p->nodes[id - m->p->n_inputs];
    if (nd->kind != VM_NODE_CALL || nd->op_id != op || nd->n_args != n || nd->out_tuple ||
        nd->fn == NULL)
        return NULL;
    m->used++;
    return nd;
}

static const KAttr *attr(const VmNode *n, const char *name) {
    for (uint32_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].name != NULL && strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

/* Value id is field k < n of split value `split`; counts the field. */
static bool field_k(Match *m, uint32_t id, uint32_t split, uint32_t n, uint32_t *k) {
    if (id < m->p->n_inputs) return false;
    const VmNode *f = &m->p->nodes[id - m->p->n_inputs];
    if (f->kind != VM_NODE_FIELD || f->n_args != 1 || f->args[0] != split || f->index >= n)
        return false;
    m->used++;
    *k = f->index;
    return true;
}

/* Value id is unary(field k of the 4-way split value `split`); *k set. */
static bool gate(Match *m, uint32_t id, uint32_t op, uint32_t split, uint32_t *k) {
    const VmNode *u = node(m, id, op, 1);
    return u != NULL && field_k(m, u->args[0], split, 4, k);
}

/* Value id is split(v, n sections, axis 1 or -1); v in *arg; counts the split. */
static bool split_n(Match *m, uint32_t id, int64_t n, uint32_t *arg) {
    if (id < m->p->n_inputs) return false;
    const VmNode *sp = &m->p->nodes[id - m->p->n_inputs];
    const KAttr *sec = attr(sp, "indices_or_sections"), *ax = attr(sp, "axis");
    if (sp->kind != VM_NODE_CALL || sp->op_id != OP_ID_SPLIT || sp->n_args != 1 || !sp->out_tuple ||
        sp->n_out != n || sec == NULL || sec->kind != KA_INT || sec->i != n || ax == NULL ||
        ax->kind != KA_INT || (ax->i != 1 && ax->i != -1))
        return false;
    m->used++;
    *arg = sp->args[0];
    return true;
}

static bool input(const Match *m, uint32_t id) { return id < m->p->n_inputs; }

/* Value id is what a step wants there: an input of p (want ANY) or exactly want. */
#define ANY UINT32_MAX
static bool is(const Match *m, uint32_t id, uint32_t want) {
    return want == ANY ? input(m, id) : id == want;
}

/* A copy of c with the planned slots of its result nodes: a memory plan numbers the outputs of
 * a packed function's calls in node order (a tuple-valued call has one per field). A run's
 * arguments and results (n_args, n_res of them) follow the struct. */
static VmCell *cell_new(const VmPacked *p, const VmCell *c, const uint32_t *args,
                        const uint32_t *res) {
    size_t extra = c->steps ? (size_t)c->n_args + 2 * (size_t)c->n_res : 0;
    VmCell *out = malloc(sizeof *out + extra * sizeof(uint32_t));
    if (out == NULL) return NULL;
    *out = *c;
    if (c->steps) {
        out->args = (uint32_t *)(out + 1);
        out->res_node = out->args + c->n_args;
        out->res_slot = out->res_node + c->n_res;
        memcpy(out->args, args, sizeof(uint32_t) * c->n_args);
        memcpy(out->res_node, res, sizeof(uint32_t) * c->n_res);
    }
    for (uint32_t k = 0, at = 0; k < p->n_nodes; k++) {
        const VmNode *n = &p->nodes[k];
        if (n->kind != VM_NODE_CALL) continue;
        if (k == c->h2) out->h2_slot = at;
        if (!c->gru && k == c->c2) out->c2_slot = at;
        for (uint32_t i = 0; c->steps && i < c->n_res; i++)
            if (res[i] - p->n_inputs == k) out->res_slot[i] = at;
        at += n->out_tuple ? n->n_out : 1;
    }
    return out;
}

/* The split node's value: split(add(dense(h, R), xp), 4, axis 1 or -1) with h and R as want[0]
 * and want[1] say, xp an input. */
static bool step_split(Match *m, uint32_t split, const uint32_t *want, VmCell *c) {
    uint32_t g;
    if (!split_n(m, split, 4, &g)) return false;
    const VmNode *add = node(m, g, OP_ID_ADD, 2);
    if (add == NULL) return false;
    for (int side = 0; side < 2; side++) {
        uint32_t used = m->used;
        const VmNode *d = node(m, add->args[side], OP_ID_NN_DENSE, 2);
        if (d != NULL && is(m, d->args[0], want[0]) && is(m, d->args[1], want[1]) &&
            input(m, add->args[1 - side])) {
            c->in[0] = d->args[0], c->in[1] = d->args[1], c->in[2] = add->args[1 - side];
            return true;
        }
        m->used = used;
    }
    return false;
}

/* The LSTM step whose results are values h2id and c2id: its nodes counted in m, its gates and
 * inputs (h, R, xp, c) in c. want: what h, R and c must be (ANY: inputs of p), want[2] unused. */
static bool lstm_step(Match *m, uint32_t h2id, uint32_t c2id, const uint32_t *want, VmCell *c) {
    const VmPacked *p = m->p;
    const VmNode *h2 = node(m, h2id, OP_ID_MULTIPLY, 2);
    const VmNode *c2 = node(m, c2id, OP_ID_ADD, 2);
    if (h2 == NULL || c2 == NULL) return false;
    /* c2 = keep + in: keep = sigmoid(s.F) * c, in = sigmoid(s.I) * tanh(s.G) */
    for (int side = 0; side < 2; side++) {
        Match ms = *m;
        const VmNode *keep = node(&ms, c2->args[side], OP_ID_MULTIPLY, 2);
        const VmNode *in = node(&ms, c2->args[1 - side], OP_ID_MULTIPLY, 2);
        if (keep == NULL || in == NULL) continue;
        for (int a = 0; a < 2; a++) {
            Match mi = ms;
            const VmNode *sg = node(&mi, in->args[a], OP_ID_SIGMOID, 1);
            if (sg == NULL || sg->args[0] < p->n_inputs) continue;
            const VmNode *fi = &p->nodes[sg->args[0] - p->n_inputs];
            if (fi->kind != VM_NODE_FIELD || fi->n_args != 1) continue;
            uint32_t split = fi->args[0];
            uint32_t gi, gf, gg, go;
            mi.used--; /* gate() counts the sigmoid again */
            if (!gate(&mi, in->args[a], OP_ID_SIGMOID, split, &gi) ||
                !gate(&mi, in->args[1 - a], OP_ID_TANH, split, &gg))
                continue;
            for (int b = 0; b < 2; b++) {
                Match mk = mi;
                if (!gate(&mk, keep->args[b], OP_ID_SIGMOID, split, &gf) ||
                    !is(&mk, keep->args[1 - b], want[3]))
                    continue;
                c->in[3] = keep->args[1 - b];
                /* h2 = sigmoid(s.O) * tanh(c2) */
                for (int o = 0; o < 2; o++) {
                    Match mh = mk;
                    const VmNode *th = node(&mh, h2->args[1 - o], OP_ID_TANH, 1);
                    if (th == NULL || th->args[0] != c2id ||
                        !gate(&mh, h2->args[o], OP_ID_SIGMOID, split, &go) ||
                        !step_split(&mh, split, want, c))
                        continue;
                    bool seen[4] = {0};
                    seen[gi] = seen[gf] = seen[gg] = seen[go] = true;
                    if (!(seen[0] && seen[1] && seen[2] && seen[3])) continue;
                    c->gates[0] = gi, c->gates[1] = gf, c->gates[2] = gg, c->gates[3] = go;
                    for (int q = 0; q < 4; q++)
                        c->gates_f[q] = (double)c->gates[q];
                    *m = mh;
                    return true;
                }
            }
        }
    }
    return false;
}

/* The GRU step whose result is value h2id (below). */
static bool gru_step(Match *m, const VmExec *exe, uint32_t h2id, const uint32_t *want,
                     uint32_t *one_seen, VmCell *c);

/* A run of LSTM steps: the result a tuple (h1, c1, ..., hn, cn), n >= 2, step k's h and c the
 * values of step k - 1's results, the same R and gates for all, every node of p one step's. */
static VmCell *lstm_run(const VmPacked *p, const VmNode *res) {
    uint32_t n = res->n_args / 2;
    if (n < 2 || res->n_args != 2 * n) return NULL;
    uint32_t *args = malloc(sizeof(uint32_t) * (n + 3));
    if (args == NULL) return NULL;
    Match m = {.p = p, .used = 1};
    VmCell first = {0};
    VmCell *out = NULL;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t want[4] = {ANY, ANY, ANY, ANY};
        if (k > 0)
            want[0] = res->args[2 * k - 2], want[1] = first.in[1], want[3] = res->args[2 * k - 1];
        VmCell st = {.n_in = 4};
        if (!lstm_step(&m, res->args[2 * k], res->args[2 * k + 1], want, &st)) goto done;
        if (k == 0)
            first = st;
        else if (memcmp(st.gates, first.gates, sizeof st.gates) != 0)
            goto done;
        args[3 + k] = st.in[2];
    }
    if (m.used != p->n_nodes) goto done;
    args[0] = first.in[0], args[1] = first.in[1], args[2] = first.in[3];
    VmCell c = first;
    c.steps = n, c.n_args = n + 3, c.n_res = 2 * n;
    c.h2 = res->args[0] - p->n_inputs, c.c2 = res->args[1] - p->n_inputs;
    out = cell_new(p, &c, args, res->args);
done:
    free(args);
    return out;
}

/* A run of GRU steps: the result a tuple (h1, ..., hn), n >= 2, step k's h step k - 1's
 * result, the same R, bn and gates for all. */
static VmCell *gru_run(const VmExec *exe, const VmPacked *p, const VmNode *res) {
    uint32_t n = res->n_args;
    if (n < 2) return NULL;
    uint32_t *args = malloc(sizeof(uint32_t) * (n + 3));
    if (args == NULL) return NULL;
    Match m = {.p = p, .used = 1};
    VmCell first = {0};
    VmCell *out = NULL;
    uint32_t one = ANY;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t want[4] = {ANY, ANY, ANY, ANY};
        if (k > 0) want[0] = res->args[k - 1], want[1] = first.in[1];
        if (k > 0 && first.n_in == 4) want[3] = first.in[3];
        VmCell st = {0};
        if (!gru_step(&m, exe, res->args[k], want, &one, &st) ||
            (k > 0 &&
             (st.n_in != first.n_in || memcmp(st.gates, first.gates, sizeof st.gates) != 0)))
            goto done;
        if (k == 0) first = st;
        args[first.n_in - 1 + k] = st.in[2];
    }
    if (m.used != p->n_nodes) goto done;
    uint32_t fixed = first.n_in - 1; /* h0, R[, bn] */
    args[0] = first.in[0], args[1] = first.in[1];
    if (fixed == 3) args[2] = first.in[3];
    VmCell c = first;
    c.steps = n, c.n_args = fixed + n, c.n_res = n;
    c.h2 = res->args[0] - p->n_inputs;
    out = cell_new(p, &c, args, res->args);
done:
    free(args);
    return out;
}

VmCell *vm_cell_analyze(const VmExec *exe, const VmPacked *p) {
    if (!kern_fast_enabled() || getenv("RLY_NO_FUSE") != NULL || p->result < p->n_inputs)
        return NULL;
    const VmNode *res = &p->nodes[p->result - p->n_inputs];
    if (res->kind != VM_NODE_TUPLE) { /* one GRU step */
        Match m = {.p = p};
        uint32_t want[4] = {ANY, ANY, ANY, ANY}, one = ANY;
        VmCell c = {0};
        if (!gru_step(&m, exe, p->result, want, &one, &c) || m.used != p->n_nodes) return NULL;
        c.h2 = p->result - p->n_inputs;
        return cell_new(p, &c, NULL, NULL);
    }
    if (res->n_args == 2 && p->n_nodes == 17) { /* one LSTM step */
        Match m = {.p = p, .used = 1};
        uint32_t want[4] = {ANY, ANY, ANY, ANY};
        VmCell c = {.n_in = 4};
        /* every node matched once: 17 (the result tuple included) */
        if (lstm_step(&m, res->args[0], res->args[1], want, &c) && m.used == p->n_nodes) {
            c.h2 = res->args[0] - p->n_inputs, c.c2 = res->args[1] - p->n_inputs;
            return cell_new(p, &c, NULL, NULL);
        }
    }
    VmCell *c = lstm_run(p, res);
    return c != NULL ? c : gru_run(exe, p, res);
}

/* ---- GRU ------------------------------------------------------------------------------------ */

/* add(xs.k, gs.k): k. */
static bool pre(Match *m, uint32_t id, uint32_t xs, uint32_t gs, uint32_t *k) {
    const VmNode *a = node(m, id, OP_ID_ADD, 2);
    uint32_t k2;
    return a != NULL && field_k(m, a->args[0], xs, 3, k) && field_k(m, a->args[1], gs, 3, &k2) &&
           *k == k2;
}

/* The GRU step whose result is value h2id: its nodes counted in m (the constant 1 once: a run's
 * steps may share it, *one_seen), its gates and inputs (h, R, x[, bn]) in c. want: what h, R
 * and bn must be (ANY: inputs of p; bn ANY also allows none). */
static bool gru_step(Match *m, const VmExec *exe, uint32_t h2id, const uint32_t *want,
                     uint32_t *one_seen, VmCell *c) {
    const VmPacked *p = m->p;
    c->gru = true;
    const VmNode *h2 = node(m, h2id, OP_ID_ADD, 2);
    if (h2 == NULL) return false;
    const VmNode *upd = node(m, h2->args[0], OP_ID_MULTIPLY, 2);
    const VmNode *keep = node(m, h2->args[1], OP_ID_MULTIPLY, 2);
    if (upd == NULL || keep == NULL) return false;
    const VmNode *zc = node(m, upd->args[0], OP_ID_SUBTRACT, 2);
    const VmNode *n = node(m, upd->args[1], OP_ID_TANH, 1);
    if (zc == NULL || n == NULL || zc->args[1] != keep->args[0] || !is(m, keep->args[1], want[0]))
        return false;
    /* 1 - z: the constant 1 */
    uint32_t one = zc->args[0];
    if (one < p->n_inputs) return false;
    const VmNode *on = &p->nodes[one - p->n_inputs];
    if (on->kind != VM_NODE_CONST || on->index >= exe->n_consts) return false;
    const Value *ov = exe->consts[on->index];
    if (ov == NULL || ov->kind != VAL_TENSOR) return false;
    const DLTensor *ot = &RT_TENSOR(ov)->t;
    if (k_dtype(ot) != RLY_DTYPE_F32 || k_numel(ot) != 1 || *(const float *)k_ptr(ot) != 1.0f)
        return false;
    if (*one_seen != one) m->used++;
    *one_seen = one;
    const VmNode *z = node(m, keep->args[0], OP_ID_SIGMOID, 1);
    if (z == NULL) return false;
    const VmNode *za = &p->nodes[z->args[0] >= p->n_inputs ? z->args[0] - p->n_inputs : 0];
    if (z->args[0] < p->n_inputs || za->kind != VM_NODE_CALL || za->n_args != 2) return false;
    /* the splits: from z's add, xs.Z + gs.Z */
    uint32_t xs = UINT32_MAX, gs = UINT32_MAX;
    for (int s = 0; s < 2; s++) {
        uint32_t id = za->args[s];
        if (id < p->n_inputs || p->nodes[id - p->n_inputs].kind != VM_NODE_FIELD) return false;
        uint32_t sp = p->nodes[id - p->n_inputs].args[0];
        if (s == 0)
            xs = sp;
        else
            gs = sp;
    }
    uint32_t kz, kr, kn, k2, xin, gin;
    if (!pre(m, z->args[0], xs, gs, &kz)) return false;
    if (!split_n(m, xs, 3, &xin) || !split_n(m, gs, 3, &gin) || !input(m, xin)) return false;
    const VmNode *d = node(m, gin, OP_ID_NN_DENSE, 2);
    if (d == NULL || d->args[0] != keep->args[1] || !is(m, d->args[1], want[1])) return false;
    /* n = tanh(xs.N + r * hn) */
    const VmNode *na = node(m, n->args[0], OP_ID_ADD, 2);
    if (na == NULL || !field_k(m, na->args[0], xs, 3, &kn)) return false;
    const VmNode *rm = node(m, na->args[1], OP_ID_MULTIPLY, 2);
    if (rm == NULL) return false;
    const VmNode *r = node(m, rm->args[0], OP_ID_SIGMOID, 1);
    if (r == NULL || !pre(m, r->args[0], xs, gs, &kr)) return false;
    c->n_in = 3;
    Match mh = *m;
    if (field_k(&mh, rm->args[1], gs, 3, &k2)) {
        if (want[3] != ANY) return false; /* the run's first step has a bn */
        *m = mh;
    } else {
        const VmNode *ba = node(m, rm->args[1], OP_ID_ADD, 2);
        if (ba == NULL || !field_k(m, ba->args[0], gs, 3, &k2) || !is(m, ba->args[1], want[3]))
            return false;
        c->n_in = 4;
        c->in[3] = ba->args[1];
    }
    if (k2 != kn || kz == kr || kz == kn || kr == kn) return false;
    c->in[0] = keep->args[1], c->in[1] = d->args[1], c->in[2] = xin;
    c->gates[0] = kz, c->gates[1] = kr, c->gates[2] = kn;
    for (int q = 0; q < 3; q++)
        c->gates_f[q] = (double)c->gates[q];
    return true;
}
