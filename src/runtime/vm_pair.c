/* vm_pair.c - two packed calls the VM runs as one kernel (vm_impl.h, VmPair): a convolution's
 * group and the max pool of its result,
 *   pc i:     rX = invoke_packed C(x, w, b)   C: conv2d(x, w), add(that, b) (either order), relu
 *   pc i+1..: kill ...                         (only kills, none of rX or rY)
 *   pc j:     rY = invoke_packed P(rX)         P: max_pool2d(rX)
 *   pc j+1:   kill rX                          (rX read by nothing else)
 * At pc i the VM calls kern_fast_conv_maxpool on (x, w, b) with both calls' attributes (the
 * pool's named "pool.<name>") and writes rY; pc j then only steps on. The kernel declines
 * (K_DECLINED) what it does not compute, and the two calls run as compiled (RLY_VM_PAIRS=0: never
 * paired; --check-numerics checks the two calls; a profile shows a pair as one event, named
 * "CONV+POOL" after the two functions). Found by what the
 * packed functions compute, never by their names. SqueezeNet's first layer and its pool: the
 * 3.15 MB between them stayed in L3 and was read back; computed and pooled in bands it stays
 * in L2 (docs/kernels.md, "A convolution and its max pool"). */
#include <stdlib.h>
#include <string.h>

#include "kernels/fast/fast.h"
#include "kernels/fast/gemm.h"
#include "runtime/vm_impl.h"

/* Packed function p as a convolution, bias, relu group: the inputs of x, w, b in args, the
 * order of the add in *bias_first; false when it is not one. */
static bool conv_group(const VmPacked *p, uint32_t args[3], bool *bias_first) {
    if (p->n_inputs != 3 || p->n_nodes != 3 || p->result != 5) return false;
    const VmNode *cv = &p->nodes[0], *ad = &p->nodes[1], *re = &p->nodes[2];
    for (uint32_t k = 0; k < 3; k++)
        if (p->nodes[k].kind != VM_NODE_CALL || p->nodes[k].out_tuple) return false;
    if (cv->op_id != OP_ID_NN_CONV2D || cv->n_args != 2 || ad->op_id != OP_ID_ADD ||
        ad->n_args != 2 || re->op_id != OP_ID_NN_RELU || re->n_args != 1 || re->args[0] != 4)
        return false;
    *bias_first = ad->args[1] == 3;
    uint32_t bias = *bias_first ? ad->args[0] : ad->args[1];
    if (ad->args[*bias_first ? 1 : 0] != 3) return false;
    args[0] = cv->args[0], args[1] = cv->args[1], args[2] = bias;
    return args[0] < 3 && args[1] < 3 && args[2] < 3 && args[0] != args[1] && args[0] != args[2] &&
           args[1] != args[2];
}

/* Packed function p as one max_pool2d of its input. */
static bool pool_group(const VmPacked *p) {
    if (p->n_inputs != 1 || p->n_nodes != 1 || p->result != 1) return false;
    const VmNode *n = &p->nodes[0];
    return n->kind == VM_NODE_CALL && !n->out_tuple && n->op_id == OP_ID_NN_MAX_POOL2D &&
           n->n_args == 1 && n->args[0] == 0;
}

static VmPair *make_pair(const VmPacked *cp, const VmPacked *pp, const uint32_t args[3],
                         bool bias_first, uint32_t j) {
    const VmNode *conv = &cp->nodes[0], *pool = &pp->nodes[0];
    const char *cn = cp->name ? cp->name : "packed", *pn = pp->name ? pp->name : "packed";
    VmPair *pr = calloc(1, sizeof *pr);
    uint32_t n = conv->n_attrs + 1 + pool->n_attrs;
    size_t names = strlen(cn) + 1 + strlen(pn) + 1;
    for (uint32_t k = 0; k < pool->n_attrs; k++)
        names += strlen("pool.") + strlen(pool->attrs[k].name) + 1;
    KAttr *at = calloc(n, sizeof *at);
    char *s = malloc(names);
    if (pr == NULL || at == NULL || s == NULL) {
        free(pr), free(at), free(s);
        return NULL;
    }
    pr->attrs = at;
    pr->names = s;
    memcpy(at, conv->attrs, sizeof *at * conv->n_attrs);
    at[conv->n_attrs] =
        (KAttr){.name = "bias_first", .kind = KA_INT, .i = bias_first, .f = bias_first};
    for (uint32_t k = 0; k < pool->n_attrs; k++) {
        KAttr *a = &at[conv->n_attrs + 1 + k];
        *a = pool->attrs[k];
        size_t len = strlen(pool->attrs[k].name);
        memcpy(s, "pool.", 5);
        memcpy(s + 5, pool->attrs[k].name, len + 1);
        a->name = s;
        s += 5 + len + 1;
    }
    memcpy(pr->args, args, sizeof pr->args);
    pr->j = j;
    pr->packed = *cp; /* the profile's event: "CONV+POOL" on the convolution's inputs */
    pr->packed.name = s;
    size_t cl = strlen(cn);
    memcpy(s, cn, cl);
    s[cl] = '+';
    memcpy(s + cl + 1, pn, strlen(pn) + 1);
    pr->node = (VmNode){.kind = VM_NODE_CALL,
                        .op_id = UINT32_MAX,
                        .n_args = 3,
                        .args = pr->args,
                        .n_attrs = n,
                        .attrs = at,
                        .fn = kern_fast_conv_maxpool,
                        .loc = pool->loc};
    return pr;
}

VmPair **vm_pair_analyze(const VmExec *exe, const VmFunction *f) {
    const char *e = getenv("RLY_VM_PAIRS");
    if (!kern_fast_enabled() || (e != NULL && strcmp(e, "0") == 0)) return NULL;
    VmPair **pairs = NULL;
    const VmInstr *code = f->code;
    for (uint32_t i = 0; i + 2 < f->n_code; i++) {
        const VmInstr *ci = &code[i];
        uint32_t args[3];
        bool first;
        if (ci->op != VM_INVOKE_PACKED || ci->a >= exe->n_packed ||
            !conv_group(&exe->packed[ci->a], args, &first))
            continue;
        uint32_t rx = ci->dst, j = i + 1;
        const uint32_t *cargs = f->pool + ci->args;
        for (; j < f->n_code && code[j].op == VM_KILL && code[j].a != rx; j++) {
        }
        if (j + 1 >= f->n_code) continue;
        const VmInstr *cj = &code[j];
        if (cj->op != VM_INVOKE_PACKED || cj->a >= exe->n_packed ||
            !pool_group(&exe->packed[cj->a]) || cj->n != 1 || f->pool[cj->args] != rx ||
            code[j + 1].op != VM_KILL || code[j + 1].a != rx || cj->dst == rx)
            continue;
        /* rY is written at pc i: nothing between may read or kill it, nor be it */
        bool ok = true;
        for (uint32_t k = i + 1; k < j; k++)
            ok = ok && code[k].a != cj->dst;
        for (uint32_t k = 0; k < ci->n; k++)
            ok = ok && cargs[k] != cj->dst;
        if (!ok) continue;
        if (pairs == NULL && (pairs = calloc(f->n_code, sizeof *pairs)) == NULL) return NULL;
        pairs[i] = make_pair(&exe->packed[ci->a], &exe->packed[cj->a], args, first, j);
        i = j; /* the next pair starts after it */
    }
    return pairs;
}

void vm_pair_free(VmPair **pairs, uint32_t n_code) {
    if (pairs == NULL) return;
    for (uint32_t i = 0; i < n_code; i++)
        if (pairs[i] != NULL) {
            free(pairs[i]->attrs);
            free(pairs[i]->names);
            free(pairs[i]);
        }
    free(pairs);
}
