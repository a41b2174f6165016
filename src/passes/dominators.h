/* dominators.h - post-dominator trees of dataflow DAGs, for FuseOps (fuse_ops.c). The
 * immediate post-dominator of a node is the least common ancestor (LCA), in the tree built so
 * far, of the post-dominators of its consumers; on a DAG numbered in topological order one pass
 * from the last node to the first builds the tree (Relay's DominatorTree::PostDom in
 * src/relay/analysis/graph_partitioner.cc).
 *
 * Every tree node also carries a pattern, the largest (OpPattern order) edge and node pattern on
 * the way to its parent, as Relay's tree does: FuseOps asks whether everything between a node
 * and its post-dominator is element-wise. Relay walks parent links to find an LCA, which is
 * quadratic on a long chain whose nodes also feed its end; here each node keeps one jump
 * pointer as well (Myers' skew-binary jumps), so an LCA costs O(log depth) and the tree O(n)
 * memory. */
#ifndef RLY_PASSES_DOMINATORS_H
#define RLY_PASSES_DOMINATORS_H

#include "support/support.h"

/* An edge to a consumer: the consumer's index and the edge's pattern (an OpPattern). */
typedef struct DomEdge {
    uint32_t node;
    uint8_t pattern;
} DomEdge;

typedef struct PostDom {
    uint32_t n;       /* nodes; index n is a virtual root above every real root */
    uint32_t *parent; /* immediate post-dominator, or n when the node has none */
    uint32_t *depth;  /* 1 for a node without post-dominator; the virtual root has 0 */
    uint32_t *jump;   /* an ancestor (skew-binary jump) */
    uint8_t *pattern; /* the combined pattern of the way to parent */
    uint8_t *jmax;    /* the combined pattern of the nodes from this one up to (not incl.) jump */
} PostDom;

/* Build the post-dominator tree of a DAG of n nodes numbered in topological order (every edge
 * goes from a lower to a higher index): out[off[v] .. off[v + 1]) are v's consumer edges, and
 * ext[v] marks a node used outside the graph (it has no post-dominator; nor has a node without
 * consumers). As Relay's: a node's pattern is the largest of its edge patterns and of the
 * patterns of the tree nodes passed on the way to the LCA. Free with pass_postdom_free. */
void pass_postdom_build(PostDom *t, uint32_t n, const uint32_t *off, const DomEdge *out,
                        const bool *ext);
/* The least common ancestor of a and b (either may be n, the virtual root), and the largest of
 * *pattern and the patterns of the tree nodes passed below it on both sides into *pattern.
 * n when they have none. */
uint32_t pass_postdom_lca(const PostDom *t, uint32_t a, uint32_t b, uint8_t *pattern);
void pass_postdom_free(PostDom *t);

#endif /* RLY_PASSES_DOMINATORS_H */
