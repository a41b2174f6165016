/* test_passes_fuse.c - FuseOps beyond its goldens (tests/golden/passes/FuseOps):
 *   - the post-dominator tree (src/passes/dominators.c) against Relay's parent-walking LCA on
 *     random DAGs, and on the chain shape where that walk is quadratic;
 *   - every golden input runs in the interpreter to the same printed result before and after
 *     its pipeline (random inputs, seeded; fused groups run the same kernels in the same order,
 *     so the results are bit-identical);
 *   - 10^5-node programs through FuseOps (under ASan in the test build): an element-wise chain
 *     (groups of max_depth), an A-normal-form let chain (one group per call), and a chain whose
 *     every node also feeds one final concatenate (the walk-up LCA would be quadratic there).
 *
 *   test_passes_fuse GOLDEN_DIR     (GOLDEN_DIR: tests/golden/passes/FuseOps)
 * Closes with `N passed, N failed`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../golden/golden_util.h"
#include "ir/ir.h"
#include "pass_check.h"
#include "passes/dominators.h"

/* ---- the post-dominator tree ---------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* Relay's DominatorTree::PostDom, walking parent links (graph_partitioner.cc). */
typedef struct Naive {
    int64_t *parent; /* -1: none */
    int *depth;
    uint8_t *pattern;
} Naive;

static int64_t naive_lca(Naive *t, int64_t a, int64_t b, uint8_t *pat) {
    while (a != b) {
        if (a < 0 || b < 0) return -1;
        if (t->depth[a] < t->depth[b]) {
            if (t->pattern[b] > *pat) *pat = t->pattern[b];
            b = t->parent[b];
        } else if (t->depth[b] < t->depth[a]) {
            if (t->pattern[a] > *pat) *pat = t->pattern[a];
            a = t->parent[a];
        } else {
            if (t->pattern[a] > *pat) *pat = t->pattern[a];
            if (t->pattern[b] > *pat) *pat = t->pattern[b];
            a = t->parent[a];
            b = t->parent[b];
        }
    }
    return a;
}

static void naive_build(Naive *t, uint32_t n, const uint32_t *off, const DomEdge *out,
                        const bool *ext) {
    for (uint32_t i = n; i-- > 0;) {
        if (ext[i]) {
            t->parent[i] = -1, t->depth[i] = 1, t->pattern[i] = 8;
            continue;
        }
        int64_t p = -1;
        uint8_t pat = 0;
        for (uint32_t k = off[i]; k < off[i + 1]; k++) {
            p = k == off[i] ? (int64_t)out[k].node : naive_lca(t, p, out[k].node, &pat);
            if (out[k].pattern > pat) pat = out[k].pattern;
        }
        t->parent[i] = p;
        t->depth[i] = p >= 0 ? t->depth[p] + 1 : 1;
        t->pattern[i] = pat;
    }
}

static void test_dominators_random(void) {
    int bad = 0;
    for (int round = 0; round < 300; round++) {
        uint32_t n = 2 + rnd(round < 200 ? 40 : 400);
        uint32_t *off = calloc(n + 1, sizeof *off);
        DomEdge *out = malloc(4 * n * sizeof *out);
        bool *ext = calloc(n, sizeof *ext);
        uint32_t m = 0;
        for (uint32_t i = 0; i < n; i++) {
            off[i] = m;
            ext[i] = rnd(12) == 0;
            uint32_t k = i + 1 < n ? rnd(4) : 0;
            for (uint32_t j = 0; j < k; j++) {
                /* mostly near consumers, so that trees get deep */
                uint32_t span = rnd(3) ? 3 : n;
                uint32_t to = i + 1 + rnd(span < n - i - 1 ? span : n - i - 1);
                uint8_t pats[] = {0, 1, 2, 3, 4, 7, 8};
                out[m++] = (DomEdge){to, pats[rnd(7)]};
            }
        }
        off[n] = m;
        PostDom t;
        pass_postdom_build(&t, n, off, out, ext);
        Naive nv = {malloc(n * sizeof(int64_t)), malloc(n * sizeof(int)), malloc(n)};
        naive_build(&nv, n, off, out, ext);
        for (uint32_t i = 0; i < n && !bad; i++) {
            int64_t want = nv.parent[i], got = t.parent[i] == n ? -1 : (int64_t)t.parent[i];
            if (want != got || (want >= 0 && nv.pattern[i] != t.pattern[i]) ||
                (uint32_t)nv.depth[i] != t.depth[i]) {
                fprintf(stderr, "round %d node %u: parent %lld/%lld pattern %u/%u\n", round, i,
                        (long long)got, (long long)want, t.pattern[i], nv.pattern[i]);
                bad++;
            }
        }
        /* LCAs of random pairs */
        for (int q = 0; q < 50 && !bad; q++) {
            uint32_t a = rnd(n), b = rnd(n);
            uint8_t p1 = 0, p2 = 0;
            uint32_t l1 = pass_postdom_lca(&t, a, b, &p1);
            int64_t l2 = naive_lca(&nv, a, b, &p2);
            if ((l2 < 0 ? n : (uint32_t)l2) != l1 || (l2 >= 0 && p1 != p2)) {
                fprintf(stderr, "round %d lca(%u, %u): %u/%lld\n", round, a, b, l1, (long long)l2);
                bad++;
            }
        }
        pass_postdom_free(&t);
        free(nv.parent);
        free(nv.depth);
        free(nv.pattern);
        free(off);
        free(out);
        free(ext);
    }
    CHECK(bad == 0, "post-dominator trees match Relay's on random DAGs");
}

/* x_i feeds y_i and the last y; y_i feeds y_(i+1). Every x_i's LCA walks the whole chain in
 * Relay's tree; here it takes O(log n) jumps. */
static void test_dominators_chain(void) {
    uint32_t k = 100000, n = 2 * k;
    uint32_t *off = calloc(n + 1, sizeof *off);
    DomEdge *out = malloc(2 * n * sizeof *out);
    bool *ext = calloc(n, sizeof *ext);
    uint32_t m = 0;
    for (uint32_t i = 0; i < k; i++) {
        off[2 * i] = m; /* x_i = 2i */
        out[m++] = (DomEdge){2 * i + 1, 0};
        if (i + 1 < k) out[m++] = (DomEdge){n - 1, 1};
        off[2 * i + 1] = m; /* y_i = 2i + 1 */
        if (i + 1 < k) out[m++] = (DomEdge){2 * i + 3, 0};
    }
    off[n] = m;
    ext[n - 1] = true;
    double t0 = pc_now();
    PostDom t;
    pass_postdom_build(&t, n, off, out, ext);
    double dt = pc_now() - t0;
    bool ok = true;
    for (uint32_t i = 0; i + 1 < k && ok; i++)
        ok = t.parent[2 * i] == n - 1 && t.pattern[2 * i] == 1 && t.parent[2 * i + 1] == 2 * i + 3;
    CHECK(ok, "chain: every x_i is post-dominated by the last y");
    printf("post-dominator tree of a %u-node chain with long edges: %.3f s\n", n, dt);
    pass_postdom_free(&t);
    free(off);
    free(out);
    free(ext);
}

/* ---- goldens through the interpreter -------------------------------------------------------- */

static char *run_text(rly_module *m) {
    rly_run_options o = {.fill = RLY_FILL_RANDOM, .seed = 7};
    char *text = NULL;
    if (rly_module_run(m, &o, &text) != RLY_STATUS_OK) return strdup(rly_last_error());
    char *r = strdup(text);
    rly_free(text);
    return r;
}

static void test_goldens_run(const char *dir) {
    char **names;
    size_t n_names = golden_list(dir, true, &names);
    CHECK(n_names > 0, "open %s (or it holds no goldens)", dir);
    int n = 0;
    for (size_t i = 0; i < n_names; i++) {
        const char *name = names[i];
        char path[4096], pipeline[256] = "FuseOps", level[16];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        char *text = golden_read(path, NULL);
        if (text) golden_directive(text, "passes", pipeline, sizeof pipeline);
        int opt_level =
            text && golden_directive(text, "opt-level", level, sizeof level) ? atoi(level) : 3;
        free(text);
        rly_ctx *ctx;
        rly_ctx_new(&ctx);
        rly_module *a = NULL, *b = NULL;
        bool loaded = rly_module_parse_file(ctx, path, &a) == RLY_STATUS_OK &&
                      rly_module_parse_file(ctx, path, &b) == RLY_STATUS_OK;
        CHECK(loaded, "%s loads: %s", name, rly_last_error());
        if (loaded) {
            rly_opt_options o = {.opt_level = opt_level, .passes = pipeline, .verify_types = 1};
            bool opt = rly_module_optimize(b, &o, NULL) == RLY_STATUS_OK;
            CHECK(opt, "%s: %s: %s", name, pipeline, rly_last_error());
            char *ra = run_text(a), *rb = opt ? run_text(b) : strdup("");
            CHECK(strcmp(ra, rb) == 0, "%s: the same result before and after %s:\n%s\n%s", name,
                  pipeline, ra, rb);
            free(ra);
            free(rb);
            n++;
        }
        rly_ctx_free(ctx);
        free(names[i]);
    }
    free(names);
    CHECK(n >= 8, "at least 8 golden programs ran (%d)", n);
}

/* ---- 10^5-node programs --------------------------------------------------------------------- */

typedef struct Count {
    size_t groups, calls, max_calls;
} Count;

static VisitResult count_pre(Visitor *v, Expr *e) {
    Count *c = v->state;
    if (e->kind != EXPR_FUNCTION) return VISIT_CONTINUE;
    const AttrValue *prim = ir_attrs_get(((Function *)e)->attrs, "Primitive");
    if (prim == NULL) return VISIT_CONTINUE;
    /* count the operator calls of this group (its body is a small dataflow graph) */
    PtrVec stack = {0};
    PtrMap seen = {0};
    size_t calls = 0;
    vec_push(&stack, ((Function *)e)->body);
    while (stack.len) {
        Expr *x = vec_pop(&stack);
        if (ptrmap_has(&seen, x)) continue;
        ptrmap_put(&seen, x, x);
        if (x->kind == EXPR_CALL && ((Call *)x)->op->kind == EXPR_OP) calls++;
        for (uint32_t i = 0; i < ir_expr_n_children(x); i++)
            vec_push(&stack, ir_expr_child(x, i));
    }
    vec_free(&stack);
    ptrmap_free(&seen);
    c->groups++;
    c->calls += calls;
    if (calls > c->max_calls) c->max_calls = calls;
    return VISIT_SKIP;
}

static bool fuse_text(const char *what, const char *text, Count *c) {
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *m = NULL;
    bool ok = rly_module_parse(ctx, text, strlen(text), what, &m) == RLY_STATUS_OK &&
              rly_module_infer(m) == RLY_STATUS_OK;
    CHECK(ok, "%s parses and checks: %s", what, rly_last_error());
    if (ok) {
        rly_opt_options o = {.opt_level = 3, .passes = "FuseOps"};
        double t0 = pc_now();
        ok = rly_module_optimize(m, &o, NULL) == RLY_STATUS_OK;
        double dt = pc_now() - t0;
        CHECK(ok, "%s: FuseOps: %s", what, rly_last_error());
        printf("%-10s FuseOps %.3f s\n", what, dt);
        *c = (Count){0};
        Visitor v = {count_pre, NULL, c};
        ir_visit(&v, &ir_module_lookup(m, "main", 4)->func->base);
    }
    rly_ctx_free(ctx);
    return ok;
}

static void test_scaling(void) {
    enum { N = 100000 };
    StrBuf sb = {0};
    Count c;

    /* an element-wise chain: groups of max_depth (256) nodes (a fused scalar constant would
     * count as a node too, as in Relay) */
    sb_puts(&sb, HDR "def @main(%x: Tensor[(4), float32]) {\n  %0 = exp(%x);\n");
    for (int i = 1; i < N; i++)
        sb_printf(&sb, "  %%%d = %s(%%%d);\n", i, i % 2 ? "exp" : "negative", i - 1);
    sb_printf(&sb, "  %%%d\n}\n", N - 1);
    if (fuse_text("chain", sb_cstr(&sb), &c))
        CHECK(c.calls == N && c.max_calls == 256 && c.groups == (N + 255) / 256,
              "chain: %zu groups of at most %zu calls, %zu calls", c.groups, c.max_calls, c.calls);

    /* an A-normal-form chain: one group per call */
    sb.len = 0;
    sb_puts(&sb, HDR "def @main(%x: Tensor[(4), float32]) {\n  let %a0 = exp(%x);\n");
    for (int i = 1; i < N; i++)
        sb_printf(&sb, "  let %%a%d = add(%%a%d, 1f);\n", i, i - 1);
    sb_printf(&sb, "  %%a%d\n}\n", N - 1);
    if (fuse_text("anf", sb_cstr(&sb), &c))
        CHECK(c.groups == N && c.max_calls == 1, "anf: %zu groups", c.groups);

    /* y_i = add(y_(i-1), x_i), x_i = negative(y_(i-1)), and every x_i also feeds the final
     * concatenate: each x's post-dominator is that far node (y_i is %2i, x_i is %(2i-1)) */
    enum { M = N / 3 };
    sb.len = 0;
    sb_puts(&sb, HDR "def @main(%x: Tensor[(4), float32]) {\n  %0 = exp(%x);\n");
    for (int i = 1; i < M; i++)
        sb_printf(&sb, "  %%%d = negative(%%%d);\n  %%%d = add(%%%d, %%%d);\n", 2 * i - 1,
                  2 * i - 2, 2 * i, 2 * i - 2, 2 * i - 1);
    sb_puts(&sb, "  concatenate((");
    for (int i = 1; i < M; i++)
        sb_printf(&sb, "%%%d, ", 2 * i - 1);
    sb_printf(&sb, "%%%d))\n}\n", 2 * M - 2);
    if (fuse_text("fan-in", sb_cstr(&sb), &c))
        CHECK(c.calls == 2 * (M - 1) + 2 && c.max_calls <= 256, "fan-in: %zu calls, max %zu",
              c.calls, c.max_calls);
    sb_free(&sb);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_passes_fuse GOLDEN_DIR\n");
        return 2;
    }
    test_dominators_random();
    test_dominators_chain();
    test_goldens_run(argv[1]);
    test_scaling();
    return pc_summary();
}
