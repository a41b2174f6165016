/* dominators.c - post-dominator trees of dataflow DAGs with jump pointers for the LCA
 * (dominators.h). Jump pointers: a node's jump is its parent, or, when its parent's jump and
 * that node's jump span equal depths, the jump of its parent's jump; the spans then grow as
 * 1, 1, 3, 1, 1, 3, 7, ... so any ancestor is O(log depth) jumps away, with one pointer per
 * node (E. W. Myers, "An applicative random-access stack", 1983). */
#include "passes/dominators.h"

#include <stdlib.h>

static uint8_t combine(uint8_t a, uint8_t b) { return a > b ? a : b; }

/* Hang v below p (already in the tree). */
static void attach(PostDom *t, uint32_t v, uint32_t p, uint8_t pattern) {
    uint32_t j = t->jump[p], jj = t->jump[j];
    t->parent[v] = p;
    t->depth[v] = t->depth[p] + 1;
    t->pattern[v] = pattern;
    if (t->depth[p] - t->depth[j] == t->depth[j] - t->depth[jj]) {
        t->jump[v] = jj;
        t->jmax[v] = combine(pattern, combine(t->jmax[p], t->jmax[j]));
    } else {
        t->jump[v] = p;
        t->jmax[v] = pattern;
    }
}

uint32_t pass_postdom_lca(const PostDom *t, uint32_t a, uint32_t b, uint8_t *pattern) {
    uint8_t pat = *pattern;
    if (t->depth[a] < t->depth[b]) {
        uint32_t s = a;
        a = b;
        b = s;
    }
    while (t->depth[a] > t->depth[b]) {
        if (t->depth[t->jump[a]] >= t->depth[b]) {
            pat = combine(pat, t->jmax[a]);
            a = t->jump[a];
        } else {
            pat = combine(pat, t->pattern[a]);
            a = t->parent[a];
        }
    }
    while (a != b) { /* equal depths, so equal jump depths */
        if (t->jump[a] != t->jump[b]) {
            pat = combine(pat, combine(t->jmax[a], t->jmax[b]));
            a = t->jump[a];
            b = t->jump[b];
        } else {
            pat = combine(pat, combine(t->pattern[a], t->pattern[b]));
            a = t->parent[a];
            b = t->parent[b];
        }
    }
    *pattern = pat;
    return a;
}

void pass_postdom_build(PostDom *t, uint32_t n, const uint32_t *off, const DomEdge *out,
                        const bool *ext) {
    t->n = n;
    t->parent = sup_malloc(sup_mul((size_t)n + 1, sizeof *t->parent));
    t->depth = sup_malloc(sup_mul((size_t)n + 1, sizeof *t->depth));
    t->jump = sup_malloc(sup_mul((size_t)n + 1, sizeof *t->jump));
    t->pattern = sup_malloc((size_t)n + 1);
    t->jmax = sup_malloc((size_t)n + 1);
    t->parent[n] = t->jump[n] = n;
    t->depth[n] = 0;
    t->pattern[n] = t->jmax[n] = 0;
    enum { ELEMWISE = 0, OPAQUE = 8 }; /* OpPattern's ends (ops.h) */
    for (uint32_t i = n; i-- > 0;) {
        if (ext[i]) {
            attach(t, i, n, OPAQUE);
            continue;
        }
        uint32_t p = n;
        uint8_t pat = ELEMWISE;
        for (uint32_t k = off[i]; k < off[i + 1]; k++) {
            RLY_ASSERT(out[k].node > i && out[k].node < n);
            p = k == off[i] ? out[k].node : pass_postdom_lca(t, p, out[k].node, &pat);
            pat = combine(pat, out[k].pattern);
        }
        attach(t, i, p, pat);
    }
}

void pass_postdom_free(PostDom *t) {
    free(t->parent);
    free(t->depth);
    free(t->jump);
    free(t->pattern);
    free(t->jmax);
    *t = (PostDom){0};
}
