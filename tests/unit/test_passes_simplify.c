/* test_passes_simplify.c - SimplifyInference, SimplifyExpr and CanonicalizeOps beyond their
 * goldens (tests/golden/passes/<Pass>/):
 *   - differential: every golden case whose @main takes only tensors runs in the interpreter on
 *     random inputs before and after its pipeline, and normalization programs with positive
 *     variances run before and after SimplifyInference (alone and followed by SimplifyExpr and
 *     CanonicalizeOps). Outputs agree: integers and bools exactly, floats within 1e-5 of the
 *     tensor's largest magnitude (|a - b| <= 1e-5 * max|b|; the expansions round at every
 *     operator, in the data's dtype, where the kernels compute in double and round once), NaN where
 * the other has NaN;
 *   - scaling: chains of about 10^5 nodes (graph bindings and let chains) through each pass,
 *     with the result's shape checked and the times printed for n/8 and n links (a quadratic
 *     pass would take 64 times as long, a linear one 8).
 *   test_passes_simplify GOLDEN_PASSES_DIR
 * Closes with `N passed, N failed`. RLY_SEED=N replays the random inputs of a failing run. */
#include <math.h>
#include <stdio.h>

#include "ir/ir.h"
#include "pass_check.h"

/* ---- differential -------------------------------------------------------------------------- */

/* Normalizations over variances kept positive (x * x + 0.5), every attribute combination the
 * expansions distinguish. */
static const char *const norm_cases[] = {
    HDR "def @main(%x: Tensor[(2, 4, 3, 3), float32], %g: Tensor[(4), float32], %b: Tensor[(4), "
        "float32], %m: Tensor[(4), float32], %v: Tensor[(4), float32]) {\n"
        "  %0 = add(multiply(%v, %v), 0.5f);\n"
        "  %1 = nn.batch_norm(%x, %g, %b, %m, %0, epsilon=0.001f);\n"
        "  %2 = nn.batch_norm(%x, %g, %b, %m, %0, center=False);\n"
        "  %3 = nn.batch_norm(%x, %g, %b, %m, %0, scale=False);\n"
        "  (%1.0, %2.0, %3.0, %1.1)\n}\n",
    HDR "def @main(%x: Tensor[(3, 5, 4), float64], %g: Tensor[(4), float64], %b: Tensor[(4), "
        "float64], %m: Tensor[(4), float64], %v: Tensor[(4), float64]) {\n"
        "  %0 = add(multiply(%v, %v), 0.25f64);\n"
        "  %1 = nn.batch_norm(%x, %g, %b, %m, %0, axis=-1, center=False, scale=False);\n"
        "  (%1.0, nn.dropout(%x).0)\n}\n",
    HDR "def @main(%x: Tensor[(2, 3, 8), float32], %g: Tensor[(8), float32], %b: Tensor[(8), "
        "float32], %g3: Tensor[(3), float32], %b3: Tensor[(3), float32]) {\n"
        "  (nn.layer_norm(%x, %g, %b), nn.layer_norm(%x, %g3, %b3, axis=1, epsilon=0.01f),\n"
        "   nn.layer_norm(%x, %g, %b, scale=False), nn.layer_norm(%x, %g, %b, center=False))\n}\n",
    HDR "def @main(%x: Tensor[(2, 6, 4, 5), float32], %g: Tensor[(6), float32], %b: Tensor[(6), "
        "float32], %g5: Tensor[(5), float32], %b5: Tensor[(5), float32]) {\n"
        "  (nn.instance_norm(%x, %g, %b), nn.instance_norm(%x, %g5, %b5, axis=3),\n"
        "   nn.group_norm(%x, %g, %b, num_groups=3), nn.group_norm(%x, %g, %b, num_groups=1),\n"
        "   nn.group_norm(%x, %g, %b, num_groups=6, epsilon=0.1f, center=False),\n"
        "   nn.group_norm(%x, %g5, %b5, num_groups=5, axis=3))\n}\n",
    HDR "def @main(%x: Tensor[(3, 4, 5), float32]) {\n"
        "  (nn.l2_normalize(%x, eps=1e-10f, axis=[1]), nn.l2_normalize(%x, eps=0.5f),\n"
        "   nn.l2_normalize(%x, eps=1e-05f, axis=[0, 2]), nn.l2_normalize(%x, eps=0.001f, "
        "axis=[]))\n}\n",
    HDR "def @main(%x: Tensor[(1, 4, 2, 2), float32], %w: Tensor[(4, 4, 1, 1), float32], %c: "
        "Tensor[(4), float32], %g: Tensor[(4), float32], %m: Tensor[(4), float32], %v: "
        "Tensor[(4), float32]) {\n"
        "  %0 = nn.bias_add(nn.conv2d(%x, %w), %c);\n"
        "  %1 = nn.batch_norm(%0, %g, %c, %m, add(multiply(%v, %v), 1f));\n"
        "  nn.relu(%1.0)\n}\n",
};

static void norm_differential(void) {
    for (size_t i = 0; i < RLY_ARRAY_LEN(norm_cases); i++) {
        char what[64];
        snprintf(what, sizeof what, "norm case %zu", i);
        CHECK(pc_differ(norm_cases[i], NULL, false, "SimplifyInference", what, -1),
              "%s does not run", what);
        snprintf(what, sizeof what, "norm case %zu, three passes", i);
        pc_differ(norm_cases[i], NULL, false, "SimplifyInference,SimplifyExpr,CanonicalizeOps",
                  what, -1);
    }
}

/* ---- scaling --------------------------------------------------------------------------------- */

/* A chain (pass_check.h) and what its optimized body must be. */
typedef struct Chain {
    PcChain base;
    size_t n;           /* links: about 10^5 nodes before or after the pass */
    ExprKind body_kind; /* what the optimized body is */
} Chain;

static void check_body(const PcChain *pc, rly_module *m) {
    const Chain *c = (const Chain *)pc;
    Expr *body = m->funcs.data[0].func->body;
    CHECK(body->kind == c->body_kind, "%s: the optimized body is a %s, not a %s", pc->name,
          ir_expr_kind_names[body->kind], ir_expr_kind_names[c->body_kind]);
}

/* Optimize the chain of n links; its time, or a negative number on failure. */
static double chain_time(const Chain *c, size_t n, bool verify) {
    return pc_chain_time(&c->base, n, verify, check_body);
}

static const Chain chains[] = {
    /* 10^5 reshapes between two shapes: one reshape of %x is left */
    {{"SimplifyExpr reshapes", "SimplifyExpr", HDR "def @main(%x: Tensor[(2, 3), float32]) {\n",
      "%x", "reshape($, newshape=[3, 2])", "$", false},
     100000,
     EXPR_CALL},
    /* x * 1, then + 0, as a let chain: every operation goes, the lets stay */
    {{"SimplifyExpr let identities", "SimplifyExpr", HDR "def @main(%x: Tensor[(4), float32]) {\n",
      "%x", "add(multiply($, 1f), 0f)", "$", true},
     50000,
     EXPR_LET},
    /* dropout(...).0 10^5 times (2 nodes a link): %x is left */
    {{"SimplifyInference dropouts", "SimplifyInference",
      HDR "def @main(%x: Tensor[(4), float32]) {\n", "%x", "nn.dropout($).0", "$", false},
     50000,
     EXPR_VAR},
    /* layer norms over a let chain: each expands in its binding (into 9 calls) */
    {{"SimplifyInference let layer_norms", "SimplifyInference",
      HDR "def @main(%x: Tensor[(2, 4), float32], %g: Tensor[(4), float32]) {\n", "%x",
      "nn.layer_norm($, %g, %g)", "$", true},
     10000,
     EXPR_LET},
    /* bias_add 10^5 times along axis 1 of a 3-D tensor: add(x, expand_dims(b)) each */
    {{"CanonicalizeOps bias_adds", "CanonicalizeOps",
      HDR "def @main(%x: Tensor[(2, 3, 2), float32], %b: Tensor[(3), float32]) {\n", "%x",
      "nn.bias_add($, %b)", "$", false},
     100000,
     EXPR_CALL},
};

static void scaling(void) {
    for (size_t i = 0; i < RLY_ARRAY_LEN(chains); i++) {
        const Chain *c = &chains[i];
        size_t n = c->n;
        /* the best of three for the short chain: its time is the one noise distorts most */
        double small = chain_time(c, n / 8, false);
        for (int k = 0; k < 2; k++)
            small = fmin(small, chain_time(c, n / 8, false));
        double big = chain_time(c, n, false);
        printf("%-36s %7zu links %8.3f s, %7zu links %8.3f s (x%.1f)\n", c->base.name, n / 8, small,
               n, big, small > 0 ? big / small : 0);
        /* a linear pass takes about 8x as long for 8x the links, a quadratic one 64x. The
         * bound is half that: the short chain runs on a warm allocator (about 12x is usual
         * under ASan) and the machine may be loaded. Times too short to measure say nothing. */
        CHECK(small < 0.02 || big < 32 * small, "%s: %.3f s for %zu links but %.3f s for %zu",
              c->base.name, small, n / 8, big, n);
    }
    /* the verified run re-infers after the pass and compares every node's type */
    CHECK(chain_time(&chains[4], chains[4].n, true) >= 0, "verified bias_add chain");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_passes_simplify GOLDEN_PASSES_DIR\n");
        return 2;
    }
    pc_init("simplify", false);
    pc_golden_differential(argv[1], "SimplifyInference", 5);
    pc_golden_differential(argv[1], "SimplifyExpr", 5);
    pc_golden_differential(argv[1], "CanonicalizeOps", 5);
    norm_differential();
    printf("largest float difference: %.3g of the tensor's largest magnitude\n", pc_largest_diff());
    scaling();
    return pc_summary();
}
