/* test_passes_forms.c - EtaExpand, ToANormalForm and ToGraphNormalForm at scale and the
 * properties the goldens cannot show (docs/passes.md):
 *
 *   graph_chain   a 10^5-node graph (each node used twice): ToANormalForm binds every node
 *                 once, its result is in A-normal form (every operand an atom) and computes the
 *                 same value; ToGraphNormalForm gives back the original graph (alpha-equal)
 *   let_chain     10^5 lets already in A-normal form: ToANormalForm changes nothing;
 *                 ToGraphNormalForm then inlines every let
 *   nested_ifs    10^5 ifs nested in then arms, one node used in both arms of each: it is bound
 *                 once, before the outermost if (lowest common ancestors over a deep scope tree
 *                 take n log n, not n x depth)
 *   effect_chain  10^5 reference writes and reads in a let chain: ToGraphNormalForm keeps every
 *                 let, ToANormalForm keeps the order; the final value is unchanged
 *   eta_chain     10^5 bare uses of a global and a constructor: EtaExpand builds one wrapper each
 *   round_trip    a dataflow program with tuples, projections, shared nodes and constants:
 *                 GNF(ANF(p)) is p, and ANF(GNF(ANF(p))) is ANF(p)
 *
 * Every pipeline runs with --verify (types re-inferred and compared after each pass).
 *
 *   test_passes_forms [CASE]   run one case (each is a CTest entry), or all of them
 *
 * Prints each case's time; RLY_FORMS_N overrides 10^5. Closes with `N passed, N failed`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "frontend/text/text.h"
#include "passes/passes.h"
#include "types/types.h"

#include "pass_check.h"

static long forms_n = 100000;

static void show_diags(Ctx *ctx) {
    StrBuf sb = {0};
    diags_render(&ctx->diags, 0, &sb);
    if (sb.len) fprintf(stderr, "%.2000s\n", sb_cstr(&sb));
    diags_clear(&ctx->diags);
    sb_free(&sb);
}

static Module *parse(Ctx *ctx, const StrBuf *text) {
    Module *m = text_parse(ctx, "test", text->data, text->len, NULL, 0);
    if (m == NULL || !ty_infer_module(m)) {
        show_diags(ctx);
        return NULL;
    }
    return m;
}

static bool run_passes(Module *m, const char *passes) {
    PassOptions o = {.opt_level = 3, .passes = passes, .verify_types = true};
    bool ok = pass_run(m, &o);
    if (!ok) show_diags(m->ctx);
    return ok;
}

/* @main's result, printed (NULL on a run error); free with free(). */
static char *run_main(Module *m) {
    Interp *it = ev_new(m);
    Value *v = ev_call_global(it, "main", 0, NULL);
    StrBuf sb = {0};
    if (v) {
        ev_print_value(v, 16, &sb);
        rt_release(v);
    } else {
        show_diags(m->ctx);
    }
    ev_free(it);
    return v ? sb_take(&sb) : NULL;
}

static bool same_text(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* ---- facts about a converted module ------------------------------------------------------ */

typedef struct Census {
    size_t lets, calls_of; /* lets; calls of the operator `op` */
    const char *op;
    bool anf; /* every operand of a call, tuple, projection or reference op is an atom */
} Census;

static bool atom(const Expr *e) {
    return e->kind == EXPR_VAR || e->kind == EXPR_GLOBAL_VAR || e->kind == EXPR_OP ||
           e->kind == EXPR_CONSTRUCTOR;
}

static void census_post(Visitor *v, Expr *e) {
    Census *c = v->state;
    if (e->kind == EXPR_LET) c->lets++;
    if (e->kind == EXPR_CALL && AS_CALL(e)->op->kind == EXPR_OP &&
        strcmp(AS_OP(AS_CALL(e)->op)->name, c->op) == 0)
        c->calls_of++;
    bool operands = e->kind == EXPR_CALL || e->kind == EXPR_TUPLE ||
                    e->kind == EXPR_TUPLE_GET_ITEM || e->kind == EXPR_REF_CREATE ||
                    e->kind == EXPR_REF_READ || e->kind == EXPR_REF_WRITE;
    uint32_t n = ir_expr_n_children(e);
    for (uint32_t i = 0; operands && i < n; i++)
        if (!atom(ir_expr_child(e, i))) c->anf = false;
    if (e->kind == EXPR_IF && !atom(AS_IF(e)->cond)) c->anf = false;
}

static Census census(Module *m, const char *op) {
    Census c = {0, 0, op, true};
    Visitor v = {NULL, census_post, &c};
    for (size_t i = 0; i < m->funcs.len; i++)
        ir_visit(&v, &m->funcs.data[i].func->base);
    return c;
}

/* ---- cases --------------------------------------------------------------------------------- */

/* %i = subtract(add(%i-1, %i-1), %i-1): every node used twice, the value stays 1.5. */
static void chain_text(StrBuf *sb, long n) {
    sb_puts(sb, HDR "def @main() -> float32 {\n  %0 = add(1.5f, 0f);\n");
    for (long i = 1; i < n; i++)
        sb_printf(sb, "  %%%ld = subtract(add(%%%ld, %%%ld), %%%ld);\n", i, i - 1, i - 1, i - 1);
    sb_printf(sb, "  %%%ld\n}\n", n - 1);
}

static void case_graph_chain(void) {
    double t0 = pc_now();
    Ctx *ctx = ir_ctx_new();
    StrBuf sb = {0};
    long steps = forms_n / 2;
    chain_text(&sb, steps);
    Module *m = parse(ctx, &sb), *orig = parse(ctx, &sb);
    sb_free(&sb);
    CHECK(m && orig, "graph_chain: does not parse");
    if (m && orig) {
        char *before = run_main(orig);
        double t1 = pc_now();
        bool ok = run_passes(m, "ToANormalForm");
        double t_anf = pc_now() - t1;
        CHECK(ok, "graph_chain: ToANormalForm failed");
        if (ok) {
            Census c = census(m, "add");
            /* 2 calls per step, 1 + 2 constants, and the first add */
            CHECK(c.lets == (size_t)(2 * (steps - 1) + 3), "graph_chain: %zu lets", c.lets);
            CHECK(c.calls_of == (size_t)steps, "graph_chain: %zu adds", c.calls_of);
            CHECK(c.anf, "graph_chain: an operand is not an atom");
            char *after = run_main(m);
            CHECK(same_text(before, after), "graph_chain: %s before, %s after", before, after);
            free(after);
            t1 = pc_now();
            ok = run_passes(m, "ToGraphNormalForm");
            double t_gnf = pc_now() - t1;
            CHECK(ok, "graph_chain: ToGraphNormalForm failed");
            CHECK(ok && ir_module_equal(m, orig), "graph_chain: GNF(ANF(p)) is not p");
            printf("graph_chain  %ld nodes: ToANormalForm %.3f s, ToGraphNormalForm %.3f s\n",
                   2 * steps, t_anf, t_gnf);
        }
        free(before);
    }
    ir_ctx_free(ctx);
    printf("graph_chain  total %.3f s\n", pc_now() - t0);
}

static void case_let_chain(void) {
    double t0 = pc_now();
    Ctx *ctx = ir_ctx_new();
    StrBuf sb = {0};
    sb_puts(&sb, HDR "def @main() -> float32 {\n  let %c = 1f;\n  let %x0 = %c;\n");
    for (long i = 1; i < forms_n; i++)
        sb_printf(&sb, "  let %%x%ld = add(%%x%ld, %%c);\n", i, i - 1);
    sb_printf(&sb, "  %%x%ld\n}\n", forms_n - 1);
    Module *m = parse(ctx, &sb), *orig = parse(ctx, &sb);
    sb_free(&sb);
    CHECK(m && orig, "let_chain: does not parse");
    if (m && orig) {
        double t1 = pc_now();
        bool ok = run_passes(m, "ToANormalForm");
        double t_anf = pc_now() - t1;
        CHECK(ok && ir_module_equal(m, orig), "let_chain: ToANormalForm changed an ANF program");
        t1 = pc_now();
        ok = ok && run_passes(m, "ToGraphNormalForm");
        double t_gnf = pc_now() - t1;
        CHECK(ok, "let_chain: ToGraphNormalForm failed");
        Census c = census(m, "add");
        CHECK(ok && c.lets == 0 && c.calls_of == (size_t)forms_n - 1,
              "let_chain: %zu lets, %zu adds after ToGraphNormalForm", c.lets, c.calls_of);
        char *before = run_main(orig), *after = run_main(m);
        CHECK(same_text(before, after), "let_chain: %s before, %s after", before, after);
        free(before);
        free(after);
        printf("let_chain    %ld lets: ToANormalForm %.3f s, ToGraphNormalForm %.3f s\n", forms_n,
               t_anf, t_gnf);
    }
    ir_ctx_free(ctx);
    printf("let_chain    total %.3f s\n", pc_now() - t0);
}

/* e_0 = s; e_k = if (%c) { add(e_k-1, s) } else { s }, with s = exp(1f) and %c = True, built
 * with the IR constructors (the parser limits nesting). */
static void case_nested_ifs(void) {
    double t0 = pc_now();
    Ctx *ctx = ir_ctx_new();
    Type *f32 = ir_type_scalar(ctx, RLY_DTYPE_F32);
    Var *c = ir_var_new(ctx, "c", NULL, SPAN_NONE);
    Expr *one = ir_scalar_f64(ctx, RLY_DTYPE_F32, 0.5, SPAN_NONE);
    Expr *s = ir_call_new(ctx, ir_op_get(ctx, "exp", 3), 1, &one, NULL, 0, NULL, SPAN_NONE);
    Expr *add = ir_op_get(ctx, "add", 3), *e = s;
    for (long k = 0; k < forms_n; k++) {
        Expr *args[2] = {e, s};
        Expr *sum = ir_call_new(ctx, add, 2, args, NULL, 0, NULL, SPAN_NONE);
        e = ir_if_new(ctx, &c->base, sum, s, SPAN_NONE);
    }
    Expr *body = ir_let_new(ctx, c, ir_scalar_i64(ctx, RLY_DTYPE_BOOL, 1, SPAN_NONE), e, SPAN_NONE);
    Module *m = ir_module_new(ctx);
    Expr *f = ir_function_new(ctx, 0, NULL, body, f32, 0, NULL, NULL, SPAN_NONE);
    ir_module_define(m, ir_module_global(m, "main", 4, SPAN_NONE), AS_FUNCTION(f), SPAN_NONE);
    bool ok = ty_infer_module(m);
    CHECK(ok, "nested_ifs: does not type-check");
    if (ok) {
        char *before = run_main(m);
        double t1 = pc_now();
        ok = run_passes(m, "ToANormalForm");
        double t_anf = pc_now() - t1;
        CHECK(ok, "nested_ifs: ToANormalForm failed");
        Census cs = census(m, "exp");
        CHECK(cs.calls_of == 1 && cs.anf, "nested_ifs: %zu calls of exp (want 1), anf %d",
              cs.calls_of, (int)cs.anf);
        /* bound before the outermost if: the body is let %c = True; let %x = 0.5f; let ... =
         * exp(...); ... */
        Expr *b = m->funcs.data[0].func->body;
        bool hoisted = false;
        for (int i = 0; i < 4 && b->kind == EXPR_LET; i++, b = AS_LET(b)->body)
            hoisted |= AS_LET(b)->value->kind == EXPR_CALL &&
                       AS_CALL(AS_LET(b)->value)->op == ir_op_get(ctx, "exp", 3);
        CHECK(hoisted, "nested_ifs: exp is not bound before the outermost if");
        char *after = run_main(m);
        CHECK(same_text(before, after), "nested_ifs: %s before, %s after", before, after);
        free(before);
        free(after);
        printf("nested_ifs   %ld ifs: ToANormalForm %.3f s\n", forms_n, t_anf);
    }
    ir_ctx_free(ctx);
    printf("nested_ifs   total %.3f s\n", pc_now() - t0);
}

static void case_effect_chain(void) {
    double t0 = pc_now();
    Ctx *ctx = ir_ctx_new();
    StrBuf sb = {0};
    sb_puts(&sb, HDR "def @main() -> int32 {\n  let %r = ref(0);\n");
    for (long i = 0; i < forms_n / 2; i++)
        sb_printf(&sb, "  let %%w%ld = ref_write(%%r, add(ref_read(%%r), %ld));\n", i, i % 7);
    sb_puts(&sb, "  ref_read(%r)\n}\n");
    Module *m = parse(ctx, &sb);
    sb_free(&sb);
    CHECK(m != NULL, "effect_chain: does not parse");
    if (m) {
        char *before = run_main(m);
        double t1 = pc_now();
        bool ok = run_passes(m, "ToGraphNormalForm");
        double t_gnf = pc_now() - t1;
        Census c = census(m, "add");
        CHECK(ok && c.lets == (size_t)forms_n / 2 + 1, "effect_chain: %zu lets after GNF", c.lets);
        t1 = pc_now();
        ok = ok && run_passes(m, "ToANormalForm");
        double t_anf = pc_now() - t1;
        c = census(m, "add");
        CHECK(ok && c.anf, "effect_chain: ToANormalForm failed or left a compound operand");
        char *after = run_main(m);
        CHECK(same_text(before, after), "effect_chain: %s before, %s after", before, after);
        free(before);
        free(after);
        printf("effect_chain %ld effects: ToGraphNormalForm %.3f s, ToANormalForm %.3f s\n",
               forms_n, t_gnf, t_anf);
    }
    ir_ctx_free(ctx);
    printf("effect_chain total %.3f s\n", pc_now() - t0);
}

static void case_eta_chain(void) {
    double t0 = pc_now();
    Ctx *ctx = ir_ctx_new();
    StrBuf sb = {0};
    sb_puts(&sb, HDR "type Box { MkBox(float32), }\n"
                     "def @g(%v: float32) -> float32 { %v }\n"
                     "def @ap(%f: fn (float32) -> float32, %v: float32) -> float32 { %f(%v) }\n"
                     "def @box(%k: fn (float32) -> Box, %v: float32) -> float32 {\n"
                     "  match (%k(%v)) { MkBox(%y) => %y }\n}\n"
                     "def @main() -> float32 {\n  %0 = 0.25f;\n");
    for (long i = 1; i < forms_n / 2; i++)
        sb_printf(&sb, "  %%%ld = %s(%s, %%%ld);\n", i, i % 2 ? "@ap" : "@box",
                  i % 2 ? "@g" : "MkBox", i - 1);
    sb_printf(&sb, "  %%%ld\n}\n", forms_n / 2 - 1);
    Module *m = parse(ctx, &sb);
    sb_free(&sb);
    CHECK(m != NULL, "eta_chain: does not parse");
    if (m) {
        char *before = run_main(m);
        double t1 = pc_now();
        bool ok = run_passes(m, "EtaExpand(expand_constructor=True, expand_global_var=True)");
        double t_eta = pc_now() - t1;
        CHECK(ok, "eta_chain: EtaExpand failed");
        size_t fns = 0;
        Expr *b = m->funcs.data[m->funcs.len - 1].func->body;
        PtrVec seen = {0};
        for (; b->kind == EXPR_CALL; b = AS_CALL(b)->args[1]) {
            Expr *f = AS_CALL(b)->args[0];
            bool fresh = f->kind == EXPR_FUNCTION;
            for (size_t i = 0; fresh && i < seen.len; i++)
                fresh = seen.data[i] != f;
            if (fresh) {
                vec_push(&seen, f);
                fns++;
            }
        }
        vec_free(&seen);
        CHECK(fns == 2, "eta_chain: %zu distinct wrappers (want 2: one per global/constructor)",
              fns);
        char *after = run_main(m);
        CHECK(same_text(before, after), "eta_chain: %s before, %s after", before, after);
        free(before);
        free(after);
        printf("eta_chain    %ld uses: EtaExpand %.3f s\n", forms_n / 2, t_eta);
    }
    ir_ctx_free(ctx);
    printf("eta_chain    total %.3f s\n", pc_now() - t0);
}

static void case_round_trip(void) {
    static const char text[] =
        HDR "def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]) {\n"
            "  %0 = add(%x, %y);\n"
            "  %1 = (%0, multiply(%0, 2f), %y);\n"
            "  %2 = nn.relu(%1.1);\n"
            "  %3 = concatenate((%2, %1.0), axis=1);\n"
            "  %4 = sum(%3, axis=[1], keepdims=True);\n"
            "  (%4, %1.2, subtract(%2, %0), %1)\n"
            "}\n";
    Ctx *ctx = ir_ctx_new();
    StrBuf sb = {0};
    sb_puts(&sb, text);
    Module *m = parse(ctx, &sb), *orig = parse(ctx, &sb), *anf = parse(ctx, &sb);
    sb_free(&sb);
    CHECK(m && orig && anf, "round_trip: does not parse");
    if (m && orig && anf) {
        bool ok = run_passes(anf, "ToANormalForm");
        CHECK(ok && census(anf, "add").anf, "round_trip: ToANormalForm");
        ok = ok && run_passes(m, "ToANormalForm,ToGraphNormalForm");
        CHECK(ok && ir_module_equal(m, orig), "round_trip: GNF(ANF(p)) is not p");
        ok = ok && run_passes(m, "ToANormalForm");
        CHECK(ok && ir_module_equal(m, anf), "round_trip: ANF(GNF(ANF(p))) is not ANF(p)");
    }
    ir_ctx_free(ctx);
}

static const struct {
    const char *name;
    void (*run)(void);
} cases[] = {
    {"graph_chain", case_graph_chain}, {"let_chain", case_let_chain},
    {"nested_ifs", case_nested_ifs},   {"effect_chain", case_effect_chain},
    {"eta_chain", case_eta_chain},     {"round_trip", case_round_trip},
};

int main(int argc, char **argv) {
    const char *n = getenv("RLY_FORMS_N");
    if (n && atol(n) > 2) forms_n = atol(n);
    bool ran = false;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (argc < 2 || strcmp(argv[1], cases[i].name) == 0) {
            cases[i].run();
            ran = true;
        }
    CHECK(ran, "no case named %s", argv[1]);
    return pc_summary();
}
