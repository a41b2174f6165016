/* test_dag.c - types shaped as DAGs and long chains: type inference, the gradient transform,
 * type printing, equality and hashing must cost the size of the program (and of its types) as
 * a DAG, and never recurse over type depth.
 *
 *   test_dag CASE [N]     one case (CTest runs each with a TIMEOUT: the code this guards
 *                         against took exponential or quadratic time, hours for these sizes)
 *
 *   infer_pairs     60 lets `let %a2 = (%a1, %a1)`: a type of 61 nodes and 2^60 leaves; the
 *                   typed print and every message stay bounded
 *   infer_unknown   the same from an unannotated parameter: every error message is bounded
 *   op_arg          such a tuple given to operators (a type error): reported, bounded
 *   grad_higher     the gradient of a 60-let pairing program (with projections and operators),
 *   grad_first      in each mode: its code and printed size are linear in the program
 *   grad_grow       the gradient of N lets `let %a1 = (%a0, %x)` (a type N deep; N = 3000),
 *                   both modes
 *   curry           `%f(0)(1)...(N-1)` (N = 30000): %f's type is N functions deep; the
 *                   unresolved-type error, and a mismatch deep inside two such types
 *   deep_types      N-deep tuple and function types built with the IR constructors (N = 10^5)
 *                   and 64-level DAG types, in two contexts: ir_type_equal, ir_type_hash,
 *                   printing (whole and cut), ir_module_equal / ir_module_hash of modules
 *                   annotated with them
 *   grow_chain      N lets each nesting the tuple type one level deeper (N = 30000), also
 *                   through closures whose parameters are inferred
 *   forward_globals N globals each calling the next one, defined later (N = 30000): plain,
 *                   through an operator, through a projection
 *
 * Besides time (the TIMEOUT), the cases check work that does not depend on the machine: the
 * number of type nodes created, the number of expression nodes the gradient emits, the
 * length of printed text. Prints `N passed, N failed`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/text/text.h"
#include "passes/passes.h"
#include "types/types.h"

#include "../check.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *render(Ctx *ctx) {
    StrBuf sb = {0};
    diags_render(&ctx->diags, 0, &sb);
    return sb_take(&sb);
}

static Module *parse(Ctx *ctx, const char *what, StrBuf *text) {
    Module *m = text_parse(ctx, what, sb_cstr(text), text->len, NULL, 0);
    if (m == NULL) {
        char *msg = render(ctx);
        CHECK(false, "%s: does not parse:\n%.2000s", what, msg);
        free(msg);
    }
    return m;
}

/* ok, or a failure saying that `what` does not type-check. */
static bool checked(bool ok, const char *what) {
    CHECK(ok, "%s: does not check", what);
    return ok;
}

/* The longest line of s. */
static size_t longest_line(const char *s) {
    size_t best = 0;
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        if (n > best) best = n;
        s += n + (nl != NULL);
    }
    return best;
}

/* Type nodes the context holds (interned ones). */
static size_t n_types(Ctx *ctx) { return ctx->types.len; }

/* Expression nodes reachable from every function of m. */
static size_t n_seen;
static void count_post(Visitor *v, Expr *e) {
    (void)v;
    (void)e;
    n_seen++;
}
static size_t n_nodes(Module *m) {
    n_seen = 0;
    Visitor v = {NULL, count_post, NULL};
    for (size_t i = 0; i < m->funcs.len; i++)
        if (m->funcs.data[i].func) ir_visit(&v, &m->funcs.data[i].func->base);
    return n_seen;
}

/* There are messages, and they are bounded: in all, and per line. */
static void check_messages_bounded(const char *what, Ctx *ctx, size_t max_total) {
    char *msg = render(ctx);
    size_t len = strlen(msg), line = longest_line(msg);
    CHECK(len > 0, "%s: expected errors", what);
    CHECK(len <= max_total, "%s: %zu bytes of messages", what, len);
    CHECK(line <= 4 * IR_PRINT_TYPE_MAX + 400, "%s: a message line of %zu bytes", what, line);
    free(msg);
}

/* ---- infer_pairs, infer_unknown -------------------------------------------------------- */

static void gen_pairs(StrBuf *sb, int n, bool annotated) {
    sb_printf(sb, HDR "def @main(%%x%s) {\n  let %%a0 = (%%x, %%x);\n",
              annotated ? ": Tensor[(2), float32]" : "");
    for (int i = 1; i <= n; i++)
        sb_printf(sb, "  let %%a%d = (%%a%d, %%a%d);\n", i, i - 1, i - 1);
    sb_printf(sb, "  %%a%d\n}\n", n);
}

static void case_infer_pairs(long n) {
    Ctx *ctx = ir_ctx_new();
    StrBuf text = {0};
    gen_pairs(&text, (int)n, true);
    Module *m = parse(ctx, "pairs", &text);
    size_t types0 = m ? n_types(ctx) : 0;
    if (m && checked(ty_infer_module(m), "pairs")) {
        CHECK(n_types(ctx) - types0 <= (size_t)(4 * n + 64), "pairs: %zu types made for %ld lets",
              n_types(ctx) - types0, n);
        Type *rt = AS_FUNC_TYPE(m->funcs.data[0].func->base.checked_type)->ret;
        StrBuf t = {0};
        ir_print_type(ctx, rt, &t);
        CHECK(t.len <= IR_PRINT_TYPE_MAX + 3 && t.len >= IR_PRINT_TYPE_MAX &&
                  strcmp(t.data + t.len - 3, "...") == 0,
              "pairs: printed type of %zu bytes", t.len);
        sb_free(&t);
        StrBuf typed = {0};
        PrintOptions po = {true};
        ir_print_module(m, &po, &typed);
        CHECK(typed.len < (size_t)(n + 4) * 10000, "pairs: typed print of %zu bytes", typed.len);
        sb_free(&typed);
    }
    sb_free(&text);
    ir_ctx_free(ctx);
}

static void case_infer_unknown(long n) {
    Ctx *ctx = ir_ctx_new();
    StrBuf text = {0};
    gen_pairs(&text, (int)n, false);
    Module *m = parse(ctx, "unknown", &text);
    if (m) {
        CHECK(!ty_infer_module(m), "unknown: %%x cannot be inferred, yet it checks");
        check_messages_bounded("unknown", ctx, (size_t)(n + 4) * 8000);
    }
    sb_free(&text);
    ir_ctx_free(ctx);
}

/* A DAG-shaped tuple given to an operator (concatenate takes a tuple, of tensors): the error
 * comes quickly, with a bounded message, whatever walks the argument types on the way. */
static void case_op_arg(long n) {
    Ctx *ctx = ir_ctx_new();
    StrBuf text = {0};
    sb_puts(&text, HDR "def @main(%x: Tensor[(2), float32]) {\n  let %a0 = (%x, %x);\n");
    for (long i = 1; i <= n; i++)
        sb_printf(&text, "  let %%a%ld = (%%a%ld, %%a%ld);\n", i, i - 1, i - 1);
    sb_printf(&text, "  (concatenate(%%a%ld), add(%%a%ld, %%x))\n}\n", n, n);
    Module *m = parse(ctx, "op_arg", &text);
    if (m) {
        CHECK(!ty_infer_module(m), "op_arg: a tuple of tuples is concatenated, yet it checks");
        check_messages_bounded("op_arg", ctx, 100000);
    }
    sb_free(&text);
    ir_ctx_free(ctx);
}

/* ---- grad_higher, grad_first, grad_grow ------------------------------------------------- */

/* Pairs of pairs with operators on the way and projections at the end. */
static void gen_grad_pairs(StrBuf *sb, int n) {
    sb_puts(sb, HDR "def @main(%x: Tensor[(3), float32], %y: Tensor[(3), float32]) {\n"
                    "  let %a0 = (multiply(%x, %y), cast(%x, dtype=\"int32\"));\n");
    for (int i = 1; i <= n; i++)
        sb_printf(sb, "  let %%a%d = (%%a%d, %%a%d);\n", i, i - 1, i - 1);
    sb_printf(sb, "  let %%b = %%a%d.1.0.1;\n  let %%c = tanh(%%a%d", n, n - 1);
    for (int i = 0; i < n; i++) /* down to %a0's first field */
        sb_puts(sb, ".0");
    sb_printf(sb, ");\n  (%%c, %%b, %%a%d, %%a%d)\n}\n", n, n / 2);
}

static void check_gradient(const char *what, StrBuf *text, GradMode mode, size_t n_lets) {
    Ctx *ctx = ir_ctx_new();
    Module *m = parse(ctx, what, text);
    if (m && checked(ty_infer_module(m), what)) {
        size_t before = n_nodes(m);
        bool ok = pass_gradient(m, "main", mode, "grad");
        if (!ok) {
            char *msg = render(ctx);
            CHECK(false, "%s: gradient failed:\n%.3000s", what, msg);
            free(msg);
        } else {
            size_t after = n_nodes(m);
            CHECK(after <= 400 * (n_lets + 10), "%s: %zu nodes after the gradient (%zu before)",
                  what, after, before);
            StrBuf out = {0};
            ir_print_module(m, NULL, &out);
            CHECK(out.len <= 20000 * (n_lets + 10), "%s: printed gradient of %zu bytes", what,
                  out.len);
            sb_free(&out);
        }
    }
    ir_ctx_free(ctx);
}

static void case_grad(long n, GradMode mode) {
    StrBuf text = {0};
    gen_grad_pairs(&text, (int)n);
    check_gradient(mode == GRAD_FIRST ? "grad_first" : "grad_higher", &text, mode, (size_t)n);
    sb_free(&text);
}

static void case_grad_grow(long n) {
    StrBuf text = {0};
    sb_puts(&text, HDR "def @main(%x: Tensor[(2), float32]) {\n  let %a0 = (sin(%x),);\n");
    for (long i = 1; i <= n; i++)
        sb_printf(&text, "  let %%a%ld = (%%a%ld, multiply(%%x, %%x));\n", i, i - 1);
    sb_printf(&text, "  (%%a%ld, %%a%ld.0.0.1)\n}\n", n, n);
    check_gradient("grad_grow (higher)", &text, GRAD_HIGHER, (size_t)n);
    check_gradient("grad_grow (first)", &text, GRAD_FIRST, (size_t)n);
    sb_free(&text);
}

/* ---- curry -------------------------------------------------------------------------------- */

static void case_curry(long n) {
    /* %f's type becomes fn (int32) -> fn (int32) -> ... n deep, its end unknown */
    Ctx *ctx = ir_ctx_new();
    StrBuf text = {0};
    sb_puts(&text, HDR "def @main(%f) {\n  %f");
    for (long i = 0; i < n; i++)
        sb_printf(&text, "(%ld)", i);
    sb_puts(&text, "\n}\n");
    Module *m = parse(ctx, "curry", &text);
    if (m) {
        CHECK(!ty_infer_module(m), "curry: the result type cannot be inferred, yet it checks");
        check_messages_bounded("curry", ctx, 100000);
    }
    ir_ctx_free(ctx);

    /* two n-deep function types that differ at the end: a mismatch deep inside */
    ctx = ir_ctx_new();
    text.len = 0;
    sb_puts(&text, HDR "def @main(%f, %g) {\n  let %a = %f");
    for (long i = 0; i < n; i++)
        sb_printf(&text, "(%ld)", i);
    sb_puts(&text, ";\n  let %b = %g");
    for (long i = 0; i + 1 < n; i++)
        sb_printf(&text, "(%ld)", i);
    sb_puts(&text, "(True);\n  if (True) { %f } else { %g }\n}\n");
    m = parse(ctx, "curry_mismatch", &text);
    if (m) {
        CHECK(!ty_infer_module(m), "curry_mismatch: the branches differ, yet it checks");
        check_messages_bounded("curry_mismatch", ctx, 100000);
    }
    ir_ctx_free(ctx);
    sb_free(&text);
}

/* ---- deep_types ----------------------------------------------------------------------------- */

/* n-deep: ((((x,),),),) and fn (int32) -> fn (int32) -> ... -> float32 */
static Type *deep_tuple(Ctx *ctx, long n) {
    Type *t = ir_type_tensor(ctx, RLY_DTYPE_F32, 1, (int64_t[]){3});
    for (long i = 0; i < n; i++)
        t = ir_type_tuple(ctx, 1, &t);
    return t;
}
static Type *deep_func(Ctx *ctx, long n) {
    Type *t = ir_type_scalar(ctx, RLY_DTYPE_F32), *p = ir_type_scalar(ctx, RLY_DTYPE_I32);
    for (long i = 0; i < n; i++)
        t = ir_type_func(ctx, 1, &p, t, 0, NULL, 0, NULL);
    return t;
}
/* levels-deep pairs (2^levels leaves), polymorphic over A: fn [A](((A, A), (A, A))...) -> A */
static Type *dag_poly(Ctx *ctx, int levels) {
    TypeVar *a = ir_type_var_new(ctx, "A", KIND_TYPE);
    Type *t = &a->base;
    for (int i = 0; i < levels; i++) {
        Type *f[2] = {t, t};
        t = ir_type_tuple(ctx, 2, f);
    }
    return ir_type_func(ctx, 1, &t, &a->base, 1, &a, 0, NULL);
}

/* fn (%v: t) { %v } as @main of a new module */
static Module *annotated_module(Ctx *ctx, Type *t) {
    Module *m = ir_module_new(ctx);
    Var *v = ir_var_new(ctx, "v", t, SPAN_NONE);
    Expr *f = ir_function_new(ctx, 1, &v, &v->base, NULL, 0, NULL, NULL, SPAN_NONE);
    ir_module_define(m, ir_module_global(m, "main", 4, SPAN_NONE), AS_FUNCTION(f), SPAN_NONE);
    return m;
}

static void case_deep_types(long n) {
    Ctx *c1 = ir_ctx_new(), *c2 = ir_ctx_new();
    Type *ts1[3] = {deep_tuple(c1, n), deep_func(c1, n), dag_poly(c1, 64)};
    Type *ts2[3] = {deep_tuple(c2, n), deep_func(c2, n), dag_poly(c2, 64)};
    const char *names[3] = {"deep tuple", "deep function", "64-level DAG"};
    for (int k = 0; k < 3; k++) {
        CHECK(ir_type_equal(ts1[k], ts2[k]), "%s: not equal to its copy", names[k]);
        CHECK(ir_type_hash(ts1[k]) == ir_type_hash(ts2[k]), "%s: hashes differ", names[k]);
        StrBuf s = {0};
        ir_print_type(c1, ts1[k], &s);
        CHECK(s.len <= IR_PRINT_TYPE_MAX + 3, "%s: printed in %zu bytes", names[k], s.len);
        sb_free(&s);
        Module *m1 = annotated_module(c1, ts1[k]), *m2 = annotated_module(c2, ts2[k]);
        CHECK(ir_module_equal(m1, m2), "%s: annotated modules not equal", names[k]);
        CHECK(ir_module_hash(m1) == ir_module_hash(m2), "%s: module hashes differ", names[k]);
        if (k < 2) { /* the whole text: linear for a tree, and without recursion */
            StrBuf p = {0};
            ir_print_module(m1, NULL, &p);
            CHECK(p.len > (size_t)n && p.len < (size_t)n * 40, "%s: module printed in %zu bytes",
                  names[k], p.len);
            sb_free(&p);
        }
    }
    /* and different ones: a deep difference is found */
    Type *other = ir_type_tuple(c2, 1, &ts2[0]);
    CHECK(!ir_type_equal(ts1[0], other), "deep tuple: equal to a deeper one");
    ir_ctx_free(c1);
    ir_ctx_free(c2);
}

/* ---- grow_chain, forward_globals ---------------------------------------------------------- */

static void check_infers(const char *what, StrBuf *text, long n) {
    Ctx *ctx = ir_ctx_new();
    double t0 = now();
    Module *m = parse(ctx, what, text);
    size_t types0 = m ? n_types(ctx) : 0;
    if (m) {
        bool ok = ty_infer_module(m);
        if (!ok) {
            char *msg = render(ctx);
            CHECK(false, "%s: does not check:\n%.2000s", what, msg);
            free(msg);
        }
        CHECK(n_types(ctx) - types0 <= (size_t)(20 * n + 100), "%s: %zu types made for N = %ld",
              what, n_types(ctx) - types0, n);
    }
    printf("%-22s N = %-7ld %.3f s\n", what, n, now() - t0);
    ir_ctx_free(ctx);
}

static void case_grow_chain(long n) {
    StrBuf text = {0};
    sb_puts(&text, HDR "def @main(%x: Tensor[(2), float32]) {\n  let %a0 = (%x,);\n");
    for (long i = 1; i <= n; i++)
        sb_printf(&text, "  let %%a%ld = (%%a%ld, %%x);\n", i, i - 1);
    sb_printf(&text, "  %%a%ld\n}\n", n);
    check_infers("grow_chain", &text, n);
    text.len = 0;
    sb_puts(&text, HDR "def @main(%x: float32) {\n  let %a0 = (%x,);\n");
    for (long i = 1; i <= n; i++)
        sb_printf(&text,
                  "  let %%f%ld = fn (%%p) { (%%p, %%x) };\n  let %%a%ld = %%f%ld(%%a%ld);\n", i, i,
                  i, i - 1);
    sb_printf(&text, "  %%a%ld\n}\n", n);
    check_infers("grow_chain (closures)", &text, n);
    sb_free(&text);
}

static void case_forward_globals(long n) {
    /* @fI's body: the call of @f(I+1) (plain, in an operator, projected), or the last value */
    static const char *const shapes[3][3] = {
        {"", "", "1f"},
        {"add(", ", 1f)", "1f"},
        {"(", ".0,)", "(1f,)"},
    };
    static const char *const names[3] = {"forward_globals", "forward_globals (op)",
                                         "forward_globals (proj)"};
    for (int k = 0; k < 3; k++) {
        StrBuf text = {0};
        sb_puts(&text, HDR);
        for (long i = 0; i < n; i++) {
            if (i + 1 < n)
                sb_printf(&text, "def @f%ld() { %s@f%ld()%s }\n", i, shapes[k][0], i + 1,
                          shapes[k][1]);
            else
                sb_printf(&text, "def @f%ld() { %s }\n", i, shapes[k][2]);
        }
        check_infers(names[k], &text, n);
        sb_free(&text);
    }
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        long n;
    } cases[] = {
        {"infer_pairs", 60},   {"infer_unknown", 60},      {"op_arg", 60},   {"grad_higher", 60},
        {"grad_first", 60},    {"grad_grow", 3000},        {"curry", 30000}, {"deep_types", 100000},
        {"grow_chain", 30000}, {"forward_globals", 30000},
    };
    const char *which = argc > 1 ? argv[1] : NULL;
    bool any = false;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (which && strcmp(which, cases[i].name) != 0) continue;
        any = true;
        long n = argc > 2 ? atol(argv[2]) : cases[i].n;
        const char *c = cases[i].name;
        double t0 = now();
        if (strcmp(c, "infer_pairs") == 0) case_infer_pairs(n);
        if (strcmp(c, "infer_unknown") == 0) case_infer_unknown(n);
        if (strcmp(c, "op_arg") == 0) case_op_arg(n);
        if (strcmp(c, "grad_higher") == 0) case_grad(n, GRAD_HIGHER);
        if (strcmp(c, "grad_first") == 0) case_grad(n, GRAD_FIRST);
        if (strcmp(c, "grad_grow") == 0) case_grad_grow(n);
        if (strcmp(c, "curry") == 0) case_curry(n);
        if (strcmp(c, "deep_types") == 0) case_deep_types(n);
        if (strcmp(c, "grow_chain") == 0) case_grow_chain(n);
        if (strcmp(c, "forward_globals") == 0) case_forward_globals(n);
        printf("%-16s N = %-7ld %.3f s\n", c, n, now() - t0);
    }
    CHECK(any, "no case named %s", which ? which : "");
    return check_summary();
}
