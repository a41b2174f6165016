/* test_fusion.c - the groups FuseOps forms on real networks (issue 14's fusion test), driven by
 * tests/models/test_fusion.sh over the models tests/models/test_fusion.py exports (ResNet-18
 * and MobileNetV2 with their batch norms kept).
 *
 *   test_fusion MODELDIR NAME...
 *
 * For each MODELDIR/NAME.onnx: import it twice; run the default -O3 pipeline over one copy
 * (every pass registered at the time, types verified after each); print one line per group of
 * @main (its operators, and the groups it takes inputs from), then a histogram of the group
 * shapes; and check that every convolution carries its tail:
 *   - every conv2d group holds one conv2d and its bias: an add of a constant (the batch norm,
 *     folded into the weight and this add by SimplifyInference, FoldScaleAxis, FoldConstant);
 *   - every activation (nn.relu, clip) and every residual add (an add of two computed tensors)
 *     of the imported graph is in a conv2d group;
 *   - no conv2d group's only consumer is a group of element-wise/broadcast operators alone
 *     (Relay's rule would have fused it);
 * then run both copies in the interpreter on MODELDIR/NAME.npz and require every output to
 * agree within 1e-4 of the output's largest magnitude (folding the batch norm into the weights
 * rounds differently). Closes with `N passed, N failed`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "ir/ir.h"
#include "ops/ops.h"
#include "rly/rly.h"
#include "runtime/npy.h"

#define TOLERANCE 1e-4

typedef struct Group {
    Call *call;
    Function *fn;
    PtrVec ops;     /* the operator calls of the body, in post order */
    PtrVec inputs;  /* indexes (as uintptr_t + 1) of the groups it takes inputs from */
    uint32_t uses;  /* references to the group's call */
    int group_uses; /* the group consuming it, when uses == 1 and that one is a group */
} Group;

typedef struct Walk {
    Vec(Group) groups;
    PtrMap index; /* group call -> index + 1 */
    PtrMap uses;  /* node -> references (uintptr_t) */
} Walk;

static bool is_primitive(const Expr *e) {
    return e->kind == EXPR_FUNCTION && ir_attrs_get(((const Function *)e)->attrs, "Primitive");
}

static bool is_group_call(const Expr *e) {
    return e->kind == EXPR_CALL && is_primitive(((const Call *)e)->op);
}

static const char *op_name(const Expr *e) {
    if (e->kind != EXPR_CALL || ((const Call *)e)->op->kind != EXPR_OP) return NULL;
    return ((const Op *)((const Call *)e)->op)->name;
}

static VisitResult skip_primitive(Visitor *v, Expr *e) {
    (void)v;
    return is_primitive(e) ? VISIT_SKIP : VISIT_CONTINUE;
}

static void collect_ops(Visitor *v, Expr *e) {
    if (op_name(e)) vec_push((PtrVec *)v->state, e);
}

static void walk_post(Visitor *v, Expr *e) {
    Walk *w = v->state;
    for (uint32_t i = 0; i < ir_expr_n_children(e); i++) {
        Expr *c = ir_expr_child(e, i);
        ptrmap_put(&w->uses, c, (void *)((uintptr_t)ptrmap_get(&w->uses, c) + 1));
    }
    if (!is_group_call(e)) return;
    Group g = {.call = (Call *)e, .fn = (Function *)((Call *)e)->op, .group_uses = -1};
    Visitor ov = {NULL, collect_ops, &g.ops};
    ir_visit(&ov, g.fn->body);
    for (uint32_t i = 0; i < g.call->n_args; i++) {
        uintptr_t k = (uintptr_t)ptrmap_get(&w->index, g.call->args[i]);
        if (k) vec_push(&g.inputs, (void *)k);
    }
    vec_push(&w->groups, g);
    ptrmap_put(&w->index, e, (void *)(uintptr_t)w->groups.len);
}

static size_t count_ops(const Group *g, const char *name) {
    size_t n = 0;
    for (size_t i = 0; i < g->ops.len; i++)
        n += strcmp(op_name(g->ops.data[i]), name) == 0;
    return n;
}

/* Is operand e of a call in group g a constant (a parameter bound to one, or one inside)? */
static bool is_const_operand(const Group *g, const Expr *e) {
    if (e->kind == EXPR_CONSTANT) return true;
    for (uint32_t i = 0; i < g->fn->n_params; i++)
        if (e == &g->fn->params[i]->base) return g->call->args[i]->kind == EXPR_CONSTANT;
    return false;
}

static bool is_residual_add(const Group *g, const Expr *e) {
    const char *n = op_name(e);
    const Call *c = (const Call *)e;
    return n && strcmp(n, "add") == 0 && !is_const_operand(g, c->args[0]) &&
           !is_const_operand(g, c->args[1]);
}

static bool all_elementwise(const Group *g) {
    for (size_t i = 0; i < g->ops.len; i++) {
        const char *n = op_name(g->ops.data[i]);
        const OpDef *d = op_lookup(n, strlen(n));
        if (d == NULL || d->pattern > OP_BROADCAST) return false;
    }
    return true;
}

/* Activations and residual adds of the imported graph. */
typedef struct Imported {
    size_t convs, acts, residuals;
} Imported;

static void count_imported(Visitor *v, Expr *e) {
    Imported *im = v->state;
    const char *n = op_name(e);
    if (n == NULL) return;
    const Call *c = (const Call *)e;
    im->convs += strcmp(n, "nn.conv2d") == 0;
    im->acts += strcmp(n, "nn.relu") == 0 || strcmp(n, "clip") == 0;
    im->residuals += strcmp(n, "add") == 0 && c->args[0]->kind != EXPR_CONSTANT &&
                     c->args[1]->kind != EXPR_CONSTANT;
}

static Function *main_of(rly_module *m) {
    FuncDef *d = ir_module_lookup(m, "main", 4);
    return d ? d->func : NULL;
}

static void check_groups(const char *name, rly_module *m0, rly_module *m3) {
    Imported im = {0};
    Visitor iv = {NULL, count_imported, &im};
    ir_visit(&iv, &main_of(m0)->base);

    Walk w = {0};
    Visitor v = {skip_primitive, walk_post, &w};
    ir_visit(&v, &main_of(m3)->base);
    for (size_t i = 0; i < w.groups.len; i++) {
        Group *g = &w.groups.data[i];
        g->uses = (uint32_t)(uintptr_t)ptrmap_get(&w.uses, g->call);
    }
    for (size_t i = 0; i < w.groups.len; i++) /* the consuming group of a single-use input */
        for (size_t k = 0; k < w.groups.data[i].inputs.len; k++) {
            Group *in = &w.groups.data[(uintptr_t)w.groups.data[i].inputs.data[k] - 1];
            if (in->uses == 1) in->group_uses = (int)i;
        }

    printf("%s: %zu groups\n", name, w.groups.len);
    size_t conv_groups = 0, biased = 0, acts = 0, residuals = 0, bare_tails = 0, multi = 0;
    StrMap shapes = {0};
    PtrVec shape_names = {0};
    for (size_t i = 0; i < w.groups.len; i++) {
        Group *g = &w.groups.data[i];
        StrBuf line = {0};
        for (size_t k = 0; k < g->ops.len; k++)
            sb_printf(&line, "%s%s", k ? " " : "", op_name(g->ops.data[k]));
        const char *shape = sb_cstr(&line);
        uintptr_t seen = (uintptr_t)strmap_get(&shapes, shape, strlen(shape));
        if (seen == 0) vec_push(&shape_names, strdup(shape));
        strmap_put(&shapes, shape, strlen(shape), (void *)(seen + 1));
        printf("  g%-3zu %s", i, shape);
        if (g->inputs.len) {
            printf("  <-");
            for (size_t k = 0; k < g->inputs.len; k++)
                printf(" g%zu", (size_t)((uintptr_t)g->inputs.data[k] - 1));
        }
        printf("\n");
        sb_free(&line);

        size_t convs = count_ops(g, "nn.conv2d");
        if (convs == 0) continue;
        conv_groups++;
        multi += convs > 1;
        bool bias = false;
        for (size_t k = 0; k < g->ops.len; k++) {
            Expr *e = g->ops.data[k];
            const char *n = op_name(e);
            acts += strcmp(n, "nn.relu") == 0 || strcmp(n, "clip") == 0;
            residuals += is_residual_add(g, e);
            bias |= strcmp(n, "add") == 0 && !is_residual_add(g, e);
        }
        biased += bias;
        if (g->group_uses >= 0 && all_elementwise(&w.groups.data[g->group_uses])) {
            fprintf(stderr, "%s: g%zu's only consumer g%d is element-wise alone\n", name, i,
                    g->group_uses);
            bare_tails++;
        }
    }
    printf("%s: group shapes:\n", name);
    for (size_t i = 0; i < shape_names.len; i++) {
        const char *s = shape_names.data[i];
        printf("  %3zu x %s\n", (size_t)(uintptr_t)strmap_get(&shapes, s, strlen(s)), s);
        free(shape_names.data[i]);
    }
    CHECK(conv_groups == im.convs && multi == 0, "%s: %zu convolutions in %zu groups of one", name,
          im.convs, conv_groups);
    CHECK(biased == conv_groups, "%s: %zu of %zu conv2d groups add their bias", name, biased,
          conv_groups);
    CHECK(acts == im.acts, "%s: %zu of %zu activations are in conv2d groups", name, acts, im.acts);
    CHECK(residuals == im.residuals, "%s: %zu of %zu residual adds are in conv2d groups", name,
          residuals, im.residuals);
    CHECK(bare_tails == 0, "%s: no conv2d group leaves its element-wise tail to another", name);
    printf("%s: %zu conv2d groups: %zu with bias, %zu activations, %zu residual adds\n", name,
           conv_groups, biased, acts, residuals);

    for (size_t i = 0; i < w.groups.len; i++) {
        vec_free(&w.groups.data[i].ops);
        vec_free(&w.groups.data[i].inputs);
    }
    vec_free(&w.groups);
    vec_free(&shape_names);
    strmap_free(&shapes);
    ptrmap_free(&w.index);
    ptrmap_free(&w.uses);
}

static bool run_to(rly_module *m, const char *inputs, const char *out) {
    rly_run_options o = {.inputs_npz = inputs, .output_npz = out};
    rly_status st = rly_module_run(m, &o, NULL);
    CHECK(st == RLY_STATUS_OK, "run -> %s: %s", out, rly_last_error());
    return st == RLY_STATUS_OK;
}

static void compare_outputs(const char *name, const char *a_path, const char *b_path) {
    Npz a = {0}, b = {0};
    char err[512];
    bool ok = rt_npz_load(a_path, &a, err, sizeof err) && rt_npz_load(b_path, &b, err, sizeof err);
    CHECK(ok, "%s: outputs load: %s", name, err);
    if (ok) CHECK(a.n == b.n && a.n > 0, "%s: %zu and %zu outputs", name, a.n, b.n);
    for (size_t i = 0; ok && i < a.n && i < b.n; i++) {
        const NpyArray *x = &a.items[i].arr, *y = rt_npz_find(&b, a.items[i].name);
        bool same = y && x->dtype == RLY_DTYPE_F32 && y->dtype == x->dtype && y->ndim == x->ndim &&
                    x->nbytes == y->nbytes;
        CHECK(same, "%s: output %s has the same type", name, a.items[i].name);
        if (!same) continue;
        size_t n = x->nbytes / sizeof(float);
        const float *p = x->data, *q = y->data;
        double scale = 1e-6, worst = 0;
        for (size_t k = 0; k < n; k++)
            scale = fmax(scale, fabs((double)p[k]));
        for (size_t k = 0; k < n; k++)
            worst = fmax(worst, fabs((double)p[k] - (double)q[k]));
        printf("%s: output %s: -O3 vs -O0 max error %.2e relative to the output's magnitude\n",
               name, a.items[i].name, worst / scale);
        CHECK(worst <= TOLERANCE * scale, "%s: output %s within %g (%.2e)", name, a.items[i].name,
              TOLERANCE, worst / scale);
    }
    rt_npz_free(&a);
    rt_npz_free(&b);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_fusion MODELDIR NAME...\n");
        return 2;
    }
    for (int k = 2; k < argc; k++) {
        const char *name = argv[k];
        char onnx[4096], in[4096], out0[4096], out3[4096];
        snprintf(onnx, sizeof onnx, "%s/%s.onnx", argv[1], name);
        snprintf(in, sizeof in, "%s/%s.npz", argv[1], name);
        snprintf(out0, sizeof out0, "%s/%s.O0.out.npz", argv[1], name);
        snprintf(out3, sizeof out3, "%s/%s.O3.out.npz", argv[1], name);
        rly_ctx *ctx;
        rly_ctx_new(&ctx);
        rly_module *m0 = NULL, *m3 = NULL;
        bool ok = rly_module_import_onnx(ctx, onnx, NULL, &m0) == RLY_STATUS_OK &&
                  rly_module_import_onnx(ctx, onnx, NULL, &m3) == RLY_STATUS_OK;
        CHECK(ok, "%s imports: %s", name, rly_last_error());
        if (ok) {
            rly_opt_options o = {.opt_level = 3, .verify_types = 1};
            ok = rly_module_optimize(m3, &o, NULL) == RLY_STATUS_OK;
            CHECK(ok, "%s: -O3: %s", name, rly_last_error());
        }
        if (ok) check_groups(name, m0, m3);
        if (ok && run_to(m0, in, out0) && run_to(m3, in, out3)) compare_outputs(name, out0, out3);
        rly_ctx_free(ctx);
    }
    return check_summary();
}
