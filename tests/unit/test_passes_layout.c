/* test_passes_layout.c - ConvertLayout and FoldScaleAxis (with its Forward and Backward halves)
 * beyond their goldens (tests/golden/passes/<Pass>/):
 *   - differential: every golden case of the four folders, the programs below (CNNs with conv,
 *     bias, relu, pools, residual adds, concatenation, reductions; closures, references, if,
 *     match over the prelude's lists) under several layouts, and an imported ONNX CNN
 *     (tests/unit/data/layout_cnn.onnx) run in the interpreter on random inputs before and
 *     after the pass. Outputs agree within 1e-5 of the tensor's largest magnitude
 *     (|a - b| <= 1e-5 * max|b|: folding a scale into a weight rounds in another order);
 *     integers and bools exactly;
 *   - borders: on the ONNX CNN, NHWC leaves exactly two layout_transforms (the input and the
 *     flattened result), every weight and bias folded into a constant;
 *   - scaling: 10^5-link chains (graph bindings and let chains) through each pass, the result's
 *     shape checked and the times printed for n/4 and n (a quadratic pass would take 16 times
 *     as long, a linear one 4).
 *   test_passes_layout GOLDEN_PASSES_DIR DATA_DIR
 * Closes with `N passed, N failed`. RLY_SEED=N replays the random inputs of a failing run. */
#include <stdio.h>
#include <string.h>

#include "pass_check.h"
#include "support/support.h"

/* ---- programs ------------------------------------------------------------------------------- */

static const char *const cnn =
    HDR "def @main(%x: Tensor[(2, 8, 8, 8), float32], %w1: Tensor[(16, 8, 3, 3), float32],\n"
        "          %w2: Tensor[(16, 8, 1, 1), float32], %w3: Tensor[(16, 16, 3, 3), float32],\n"
        "          %b: Tensor[(16), float32], %s: Tensor[(16, 1, 1), float32]) {\n"
        "  %0 = nn.conv2d(%x, %w1, padding=[1, 1, 1, 1]);\n"
        "  %1 = nn.bias_add(%0, %b);\n"
        "  %2 = nn.relu(%1);\n"
        "  %3 = nn.conv2d(%x, %w2);\n"
        "  %4 = add(%2, %3);\n"
        "  %5 = multiply(%4, %s);\n"
        "  %6 = nn.max_pool2d(%5, pool_size=[2, 2], strides=[2, 2]);\n"
        "  %7 = nn.conv2d(%6, %w3, padding=[1, 1]);\n"
        "  %8 = concatenate((%7, %6), axis=1);\n"
        "  %9 = nn.pad(%8, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [0, 1]]);\n"
        "  %10 = nn.avg_pool2d(%9, pool_size=[2, 2], count_include_pad=True);\n"
        "  %11 = mean(%10, axis=[2, 3]);\n"
        "  %12 = max(%10, axis=[1], keepdims=True);\n"
        "  %13 = nn.global_max_pool2d(%10);\n"
        "  %14 = nn.upsampling(%6, scale_h=2f, scale_w=2f);\n"
        "  %15 = image.resize2d(%14, size=[6, 6]);\n"
        "  (%11, %12, %13, sum(%15, axis=[1, 2]), argmax(%10, axis=[3]))\n"
        "}\n";

/* conv2d_transpose, depthwise and grouped convs, batch_norm, prelu, a constant of rank 1 added
 * over the width axis */
static const char *const cnn2 =
    HDR "def @main(%x: Tensor[(1, 16, 6, 6), float32], %wt: Tensor[(16, 8, 2, 2), float32],\n"
        "          %wd: Tensor[(8, 1, 3, 3), float32], %wg: Tensor[(16, 4, 3, 3), float32],\n"
        "          %g: Tensor[(16), float32], %v: Tensor[(16), float32],\n"
        "          %a: Tensor[(16), float32], %r: Tensor[(6), float32]) {\n"
        "  %0 = nn.conv2d_transpose(%x, %wt, strides=[2, 2]);\n"
        "  %1 = nn.conv2d(%0, %wd, padding=[1, 1], groups=8);\n"
        "  %2 = nn.relu(%1);\n"
        "  %3 = nn.conv2d(%x, %wg, padding=[1, 1], groups=4);\n"
        "  %4 = nn.batch_norm(%3, %g, %g, %g, add(abs(%v), 1f));\n"
        "  %5 = nn.prelu(%4.0, %a);\n"
        "  %6 = add(%5, %r);\n"
        "  (%2, %6, %4.1)\n"
        "}\n";

/* closures, references, if and a let chain around converted values */
static const char *const effects =
    HDR "def @f(%t: Tensor[(1, 8, 4, 4), float32], %w: Tensor[(8, 8, 3, 3), float32]) {\n"
        "  nn.relu(nn.conv2d(%t, %w, padding=[1, 1]))\n"
        "}\n"
        "def @main(%x: Tensor[(1, 8, 4, 4), float32], %w: Tensor[(8, 8, 3, 3), float32],\n"
        "          %s: Tensor[(8, 1, 1), float32], %c: bool) {\n"
        "  let %a = nn.conv2d(%x, %w, padding=[1, 1]);\n"
        "  let %b = nn.relu(%a);\n"
        "  let %g = fn (%y: Tensor[(1, 8, 4, 4), float32]) { add(%y, %b) };\n"
        "  let %r = ref(%b);\n"
        "  let %u = ref_write(%r, multiply(add(%b, %b), %s));\n"
        "  let %d = if (%c) { nn.max_pool2d(%b, pool_size=[2, 2]) }\n"
        "           else { nn.avg_pool2d(%a, pool_size=[2, 2]) };\n"
        "  (%g(%x), @f(%b, %w), %d, ref_read(%r), @f(multiply(%x, 2f), %w))\n"
        "}\n";

/* the prelude: a conv mapped over a list, a match whose arm convolves */
static const char *const lists =
    HDR "def @main(%x: Tensor[(1, 8, 4, 4), float32], %w: Tensor[(8, 8, 3, 3), float32]) {\n"
        "  let %l = Cons(%x, Cons(nn.relu(%x), Nil));\n"
        "  let %f = fn (%t: Tensor[(1, 8, 4, 4), float32]) {\n"
        "    multiply(nn.relu(nn.conv2d(multiply(%t, 3f), %w, padding=[1, 1])), 0.5f)\n"
        "  };\n"
        "  match (@map(%f, %l)) {\n"
        "    Cons(%h, _) => add(%h, nn.conv2d(%x, %w, padding=[1, 1])),\n"
        "    Nil => %x,\n"
        "  }\n"
        "}\n";

/* an NHWC network (HWIO weights), converted to NCHW and blocked layouts */
static const char *const nhwc =
    HDR "def @main(%x: Tensor[(1, 6, 6, 8), float32], %w: Tensor[(3, 3, 8, 16), float32],\n"
        "          %b: Tensor[(16), float32]) {\n"
        "  %0 = nn.conv2d(%x, %w, padding=[1, 1], data_layout=\"NHWC\", kernel_layout=\"HWIO\");\n"
        "  %1 = add(%0, %b);\n"
        "  %2 = nn.relu(%1);\n"
        "  %3 = nn.max_pool2d(%2, pool_size=[2, 2], strides=[2, 2], layout=\"NHWC\");\n"
        "  layout_transform(%3, src_layout=\"NHWC\", dst_layout=\"NCHW\")\n"
        "}\n";

/* scales before and after convs and dense layers, through relu and adds */
static const char *const scales =
    HDR "def @main(%x: Tensor[(2, 4, 6, 6), float32], %w1: Tensor[(8, 4, 3, 3), float32],\n"
        "          %w2: Tensor[(8, 8, 3, 3), float32], %w3: Tensor[(8, 8, 1, 1), float32],\n"
        "          %b: Tensor[(4, 1, 1), float32], %d: Tensor[(5, 8), float32]) {\n"
        "  %0 = multiply(%x, 2f);\n"
        "  %1 = add(%0, %b);\n"
        "  %2 = nn.relu(%1);\n"
        "  %3 = nn.conv2d(%2, %w1, padding=[1, 1]);\n"
        "  %4 = nn.leaky_relu(%3, alpha=0.1f);\n"
        "  %5 = multiply(%4, 0.25f);\n"
        "  %6 = nn.conv2d(%5, %w2, padding=[1, 1]);\n"
        "  %7 = nn.conv2d(%5, %w3);\n"
        "  %8 = multiply(add(%6, %7), 3f);\n"
        "  %9 = mean(%8, axis=[2, 3]);\n"
        "  %10 = multiply(%9, 1.5f);\n"
        "  multiply(nn.dense(%10, %d), 0.5f)\n"
        "}\n";

typedef struct Case {
    const char *name, *text, *passes;
    bool prelude;
} Case;

static const Case cases[] = {
    {"cnn NHWC", NULL, "ConvertLayout(desired_layouts=NHWC)", false},
    {"cnn NCHW8c", NULL, "ConvertLayout(desired_layouts=NCHW8c)", false},
    {"cnn NCHW16c", NULL, "ConvertLayout(desired_layouts=NCHW16c)", false},
    {"cnn conv only", NULL, "ConvertLayout(desired_layouts=\"nn.conv2d=NHWC:OHWI\")", false},
    {"cnn pools only", NULL, "ConvertLayout(desired_layouts={\"nn.max_pool2d\": [\"NHWC\"]})",
     false},
    {"cnn FoldScaleAxis", NULL, "FoldScaleAxis", false},
    {"cnn both", NULL, "FoldScaleAxis,ConvertLayout(desired_layouts=NCHW8c)", false},
    {"cnn2 NHWC", NULL, "ConvertLayout(desired_layouts=NHWC)", false},
    {"cnn2 NCHW8c", NULL, "ConvertLayout(desired_layouts=NCHW8c)", false},
    {"cnn2 NCHW4c", NULL, "ConvertLayout(desired_layouts=NCHW4c)", false},
    {"effects NHWC", NULL, "ConvertLayout(desired_layouts=NHWC)", false},
    {"effects NCHW8c", NULL, "ConvertLayout(desired_layouts=NCHW8c)", false},
    {"effects FoldScaleAxis", NULL, "FoldScaleAxis", false},
    {"lists NHWC", NULL, "ConvertLayout(desired_layouts=NHWC)", true},
    {"lists FoldScaleAxis", NULL, "FoldScaleAxis", true},
    {"nhwc NCHW", NULL, "ConvertLayout(desired_layouts=NCHW)", false},
    {"nhwc NCHW8c", NULL, "ConvertLayout(desired_layouts=NCHW8c)", false},
    {"scales Forward", NULL, "ForwardFoldScaleAxis", false},
    {"scales Backward", NULL, "BackwardFoldScaleAxis", false},
    {"scales FoldScaleAxis", NULL, "FoldScaleAxis", false},
    {"scales NHWC then fold", NULL, "ConvertLayout(desired_layouts=NHWC),FoldScaleAxis", false},
};

static const char *case_text(const char *name) {
    if (strncmp(name, "cnn2", 4) == 0) return cnn2;
    if (strncmp(name, "cnn", 3) == 0) return cnn;
    if (strncmp(name, "effects", 7) == 0) return effects;
    if (strncmp(name, "lists", 5) == 0) return lists;
    if (strncmp(name, "nhwc", 4) == 0) return nhwc;
    return scales;
}

static void programs(void) {
    for (size_t i = 0; i < RLY_ARRAY_LEN(cases); i++) {
        const Case *c = &cases[i];
        CHECK(pc_differ(case_text(c->name), NULL, c->prelude, c->passes, c->name, -1),
              "%s does not run", c->name);
    }
}

/* The ONNX CNN: NHWC leaves only the two border transforms; every pipeline agrees. */
static void onnx_model(const char *data_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/layout_cnn.onnx", data_dir);
    static const struct {
        const char *passes;
        int max_xforms;
    } runs[] = {
        {"ConvertLayout(desired_layouts=NHWC)", 2},
        {"ConvertLayout(desired_layouts=NCHW8c)", 4}, /* batch_norm over a split C stays NCHW */
        {"SimplifyInference,FoldConstant,ConvertLayout(desired_layouts=NCHW8c)", 2},
        {"FoldScaleAxis", -1},
        {"SimplifyInference,FoldScaleAxis,ConvertLayout(desired_layouts=NCHW16c)", -1},
    };
    for (size_t i = 0; i < RLY_ARRAY_LEN(runs); i++) {
        char what[256];
        snprintf(what, sizeof what, "layout_cnn.onnx %s", runs[i].passes);
        CHECK(pc_differ(NULL, path, false, runs[i].passes, what, runs[i].max_xforms),
              "%s does not run", what);
    }
}

/* ---- scaling --------------------------------------------------------------------------------- */

/* A chain (pass_check.h) and what its result holds. */
typedef struct Chain {
    PcChain base;
    size_t xforms, muls; /* layout_transforms and multiplies in the result */
} Chain;

static void check_chain(const PcChain *pc, rly_module *m) {
    const Chain *c = (const Chain *)pc;
    size_t k = pc_count_op(m, "layout_transform");
    CHECK(k == c->xforms, "%s: %zu layout_transforms, expected %zu", pc->name, k, c->xforms);
    size_t muls = pc_count_op(m, "multiply");
    CHECK(muls == c->muls, "%s: %zu multiplies, expected %zu", pc->name, muls, c->muls);
}

static const Chain chains[] = {
    /* a conv, then 10^5 relus (graph) or adds (lets): all follow; transforms at the two borders */
    {{"ConvertLayout graph chain", "ConvertLayout(desired_layouts=NHWC)",
      HDR "def @main(%x: Tensor[(1, 8, 2, 2), float32], %w: Tensor[(8, 8, 1, 1), float32]) {\n",
      "nn.conv2d(%x, %w)", "nn.relu($)", "$", false},
     3,
     0},
    {{"ConvertLayout let chain", "ConvertLayout(desired_layouts=NCHW8c)",
      HDR "def @main(%x: Tensor[(1, 8, 2, 2), float32], %w: Tensor[(8, 8, 1, 1), float32]) {\n",
      "nn.conv2d(%x, %w)", "add($, 1f)", "$", true},
     3,
     0},
    /* multiply by 2 then 10^5 relus into a conv (forward); a conv, 10^5 relus, then a multiply
     * (backward): the scales end in the weight (the one multiply left) */
    {{"FoldScaleAxis forward chain", "ForwardFoldScaleAxis",
      HDR "def @main(%x: Tensor[(1, 8, 2, 2), float32], %w: Tensor[(8, 8, 1, 1), float32]) {\n",
      "multiply(%x, 2f)", "nn.relu($)", "nn.conv2d($, %w)", false},
     0,
     1},
    {{"FoldScaleAxis backward chain", "BackwardFoldScaleAxis",
      HDR "def @main(%x: Tensor[(1, 8, 2, 2), float32], %w: Tensor[(8, 8, 1, 1), float32]) {\n",
      "nn.conv2d(%x, %w)", "nn.relu($)", "multiply($, 2f)", false},
     0,
     1},
};

static void scaling(void) {
    const size_t n = 100000;
    for (size_t i = 0; i < RLY_ARRAY_LEN(chains); i++) {
        const PcChain *c = &chains[i].base;
        double small = pc_chain_time(c, n / 4, false, check_chain);
        double big = pc_chain_time(c, n, false, check_chain);
        printf("%-32s %7zu links %8.3f s, %7zu links %8.3f s (x%.1f)\n", c->name, n / 4, small, n,
               big, small > 0 ? big / small : 0);
        /* a linear pass takes about 4x as long for 4x the links; quadratic would be 16x. Times
         * too short to measure say nothing. */
        CHECK(small < 0.05 || big < 10 * small, "%s: %.3f s for %zu links but %.3f s for %zu",
              c->name, small, n / 4, big, n);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_passes_layout GOLDEN_PASSES_DIR DATA_DIR\n");
        return 2;
    }
    pc_init("layout", true);
    static const char *const folders[] = {"ConvertLayout", "FoldScaleAxis", "ForwardFoldScaleAxis",
                                          "BackwardFoldScaleAxis"};
    for (size_t i = 0; i < RLY_ARRAY_LEN(folders); i++)
        pc_golden_differential(argv[1], folders[i], 4);
    programs();
    onnx_model(argv[2]);
    scaling();
    return pc_summary();
}
