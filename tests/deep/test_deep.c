/* test_deep.c - very long and very deep programs must round-trip without C recursion over the
 * expression depth (the whole suite also runs under ASan + UBSan, whose frames are larger):
 *
 *   let_chain      @main with 10^5 nested lets `let %x1 = add(%x0, 1f); ...`
 *   graph_chain    @main with a 10^5-long graph-binding chain `%1 = add(%0, %0); ...`
 *   call_chain     negative(negative(... %x ...)) 10^5 deep, built with the IR constructors
 *   let_tree       10^5 nested Let nodes built with the IR constructors
 *   binop_chain    a bare expression `%a + %a + ... + %a` with 10^5 operands
 *   proj_chain     a bare expression `%t.0.0. ... .0` with 10^5 projections
 *   seq_chain      @main with 10^5 `ref_write(%r, i);` statements
 *   parens_ok      500 nested parentheses parse and round-trip
 *   parens_deep    1100 nested parentheses (and braces, fn, tuple types, patterns): one located
 *                  error, never a crash
 *
 * Each round trip: parse, ir_well_formed, print, re-parse (with the meta table), well-formed,
 * ir_module_equal and the same ir_module_hash, print again to the same text. RLY_DEEP_N
 * overrides 10^5. Prints each case's time, then `N passed, N failed`. */
#include <stdio.h>
#include <time.h>

#include "frontend/text/text.h"
#include "ir/ir.h"

#include "../check.h"
static long deep_n = 100000;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *render(Ctx *ctx) {
    StrBuf sb = {0};
    diags_render(&ctx->diags, 0, &sb);
    diags_clear(&ctx->diags);
    return sb_take(&sb);
}

/* The first line of s (for messages). */
static void put_first_line(const char *s) {
    const char *nl = strchr(s, '\n');
    fprintf(stderr, "  %.*s\n", (int)(nl ? (size_t)(nl - s) : strlen(s)), s);
}

/* Print m, re-parse the text, and check the round-trip properties against m. */
static void check_printed(const char *what, Ctx *ctx, Module *m) {
    StrBuf p1 = {0}, p2 = {0};
    ir_print_module(m, NULL, &p1);
    sb_cstr(&p1);
    Module *m2 = text_parse(ctx, "printed", p1.data, p1.len, (Constant *const *)m->meta.data,
                            (uint32_t)m->meta.len);
    if (m2 == NULL) {
        char *msg = render(ctx);
        CHECK(false, "%s: printed text does not re-parse:\n%s", what, msg);
        free(msg);
        goto done;
    }
    bool wf = ir_well_formed(m2);
    CHECK(wf, "%s: re-parsed module is not well-formed", what);
    if (!wf) {
        char *msg = render(ctx);
        put_first_line(msg);
        free(msg);
    }
    CHECK(ir_module_equal(m, m2), "%s: re-parsed module is not structurally equal", what);
    CHECK(ir_module_hash(m) == ir_module_hash(m2), "%s: hashes differ after re-parse", what);
    ir_print_module(m2, NULL, &p2);
    sb_cstr(&p2);
    CHECK(p1.len == p2.len && memcmp(p1.data, p2.data, p1.len) == 0,
          "%s: printing is not a fixpoint (%zu vs %zu bytes)", what, p1.len, p2.len);
done:
    sb_free(&p1);
    sb_free(&p2);
}

/* Parse text and run the whole round trip. */
static void roundtrip_text(const char *what, StrBuf *text) {
    double t0 = now();
    Ctx *ctx = ir_ctx_new();
    Module *m = text_parse(ctx, what, text->data, text->len, NULL, 0);
    if (m == NULL) {
        char *msg = render(ctx);
        CHECK(false, "%s: does not parse:", what);
        put_first_line(msg);
        free(msg);
    } else {
        bool wf = ir_well_formed(m);
        CHECK(wf, "%s: not well-formed", what);
        if (wf) check_printed(what, ctx, m);
    }
    ir_ctx_free(ctx);
    printf("%-12s %8zu bytes  %.3f s\n", what, text->len, now() - t0);
}

/* ---- generated texts ------------------------------------------------------------------------ */

static void case_let_chain(void) {
    StrBuf sb = {0};
    sb_puts(&sb, HDR "def @main(%x0: float32) -> float32 {\n");
    for (long i = 1; i <= deep_n; i++)
        sb_printf(&sb, "  let %%x%ld = add(%%x%ld, 1f);\n", i, i - 1);
    sb_printf(&sb, "  %%x%ld\n}\n", deep_n);
    roundtrip_text("let_chain", &sb);
    sb_free(&sb);
}

static void case_graph_chain(void) {
    StrBuf sb = {0};
    sb_puts(&sb, HDR "def @main(%x: Tensor[(2, 3), float32]) {\n  %0 = add(%x, %x);\n");
    for (long i = 1; i < deep_n; i++)
        sb_printf(&sb, "  %%%ld = add(%%%ld, %%%ld);\n", i, i - 1, i - 1);
    sb_printf(&sb, "  %%%ld\n}\n", deep_n - 1);
    roundtrip_text("graph_chain", &sb);
    sb_free(&sb);
}

static void case_binop_chain(void) {
    StrBuf sb = {0};
    sb_puts(&sb, "free_var %a: float32;\n%a");
    for (long i = 1; i < deep_n; i++)
        sb_puts(&sb, i % 3 ? " + %a" : " * %a");
    sb_putc(&sb, '\n');
    roundtrip_text("binop_chain", &sb);
    sb_free(&sb);
}

static void case_proj_chain(void) {
    StrBuf sb = {0};
    sb_puts(&sb, "free_var %t;\n%t");
    for (long i = 0; i < deep_n; i++)
        sb_puts(&sb, ".0");
    sb_putc(&sb, '\n');
    roundtrip_text("proj_chain", &sb);
    sb_free(&sb);
}

static void case_seq_chain(void) {
    StrBuf sb = {0};
    sb_puts(&sb, HDR "def @main(%r: ref(int32)) {\n");
    for (long i = 0; i < deep_n; i++)
        sb_printf(&sb, "  ref_write(%%r, %ld);\n", i % 1000);
    sb_puts(&sb, "  ref_read(%r)\n}\n");
    roundtrip_text("seq_chain", &sb);
    sb_free(&sb);
}

static void case_parens_ok(void) {
    StrBuf sb = {0};
    for (int i = 0; i < 500; i++)
        sb_putc(&sb, '(');
    sb_puts(&sb, "add(1f, 2f)");
    for (int i = 0; i < 500; i++)
        sb_putc(&sb, ')');
    roundtrip_text("parens_ok", &sb);
    sb_free(&sb);
}

/* ---- built with the IR constructors ---------------------------------------------------------- */

/* A module whose @main(%x) returns body(x). */
static Module *main_module(Ctx *ctx, Var *x, Expr *body) {
    Module *m = ir_module_new(ctx);
    Expr *f = ir_function_new(ctx, 1, &x, body, NULL, 0, NULL, NULL, SPAN_NONE);
    GlobalVar *gv = ir_module_global(m, "main", 4, SPAN_NONE);
    ir_module_define(m, gv, AS_FUNCTION(f), SPAN_NONE);
    return m;
}

static void roundtrip_built(const char *what, Ctx *ctx, Module *m, double t0) {
    bool wf = ir_well_formed(m);
    CHECK(wf, "%s: built module is not well-formed", what);
    if (wf) check_printed(what, ctx, m);
    ir_ctx_free(ctx);
    printf("%-12s %8ld nodes  %.3f s\n", what, deep_n, now() - t0);
}

static void case_call_chain(void) {
    double t0 = now();
    Ctx *ctx = ir_ctx_new();
    int64_t shape[2] = {2, 3};
    Var *x = ir_var_new(ctx, "x", ir_type_tensor(ctx, RLY_DTYPE_F32, 2, shape), SPAN_NONE);
    Expr *neg = ir_op_get(ctx, "negative", 8), *e = &x->base;
    for (long i = 0; i < deep_n; i++)
        e = ir_call_new(ctx, neg, 1, &e, NULL, 0, NULL, SPAN_NONE);
    roundtrip_built("call_chain", ctx, main_module(ctx, x, e), t0);
}

/* let %v1 = add(%v0, 1f); let %v2 = add(%v1, 1f); ... built inside out. */
static void case_let_tree(void) {
    double t0 = now();
    Ctx *ctx = ir_ctx_new();
    Type *f32 = ir_type_scalar(ctx, RLY_DTYPE_F32);
    Var *x = ir_var_new(ctx, "v", f32, SPAN_NONE);
    Var **vars = sup_calloc((size_t)deep_n + 1, sizeof(Var *));
    vars[0] = x;
    for (long i = 1; i <= deep_n; i++)
        vars[i] = ir_var_new(ctx, "v", NULL, SPAN_NONE); /* one hint: the printer numbers them */
    Expr *add = ir_op_get(ctx, "add", 3), *one = ir_scalar_f64(ctx, RLY_DTYPE_F32, 1.0, SPAN_NONE);
    Expr *body = &vars[deep_n]->base;
    for (long i = deep_n; i >= 1; i--) {
        Expr *args[2] = {&vars[i - 1]->base, one};
        Expr *value = ir_call_new(ctx, add, 2, args, NULL, 0, NULL, SPAN_NONE);
        body = ir_let_new(ctx, vars[i], value, body, SPAN_NONE);
    }
    free(vars);
    roundtrip_built("let_tree", ctx, main_module(ctx, x, body), t0);
}

/* ---- nesting beyond the limit: one located error ----------------------------------------- */

/* pre, then depth times open, mid, depth times close, then post. */
static void expect_nesting_error(const char *what, const char *pre, const char *open,
                                 const char *mid, const char *close, const char *post, int depth) {
    StrBuf sb = {0};
    sb_puts(&sb, pre);
    for (int i = 0; i < depth; i++)
        sb_puts(&sb, open);
    sb_puts(&sb, mid);
    for (int i = 0; i < depth; i++)
        sb_puts(&sb, close);
    sb_puts(&sb, post);
    Ctx *ctx = ir_ctx_new();
    Module *m = text_parse(ctx, what, sb.data, sb.len, NULL, 0);
    size_t n_errors = ctx->diags.n_errors;
    char *msg = render(ctx);
    CHECK(m == NULL, "%s: %d levels of nesting parsed", what, depth);
    CHECK(n_errors == 1, "%s: %zu errors, want 1", what, n_errors);
    /* name:line:col: error: nesting too deep ... */
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s:", what);
    unsigned line = 0, col = 0;
    bool located = strncmp(msg, prefix, strlen(prefix)) == 0 &&
                   sscanf(msg + strlen(prefix), "%u:%u: error:", &line, &col) == 2 && line >= 1 &&
                   col >= 1;
    CHECK(located, "%s: diagnostic is not located:", what);
    CHECK(strstr(msg, "nesting too deep") != NULL, "%s: unexpected diagnostic:", what);
    if (!located || strstr(msg, "nesting too deep") == NULL) put_first_line(msg);
    free(msg);
    ir_ctx_free(ctx);
    sb_free(&sb);
}

static void case_parens_deep(void) {
    double t0 = now();
    const int d = 1100;
    expect_nesting_error("parens", "", "(", "1", ")", "", d);
    expect_nesting_error("tuples", "", "(1, ", "2", ")", "", d);
    expect_nesting_error("calls", "", "add(1, ", "2", ")", "", d);
    expect_nesting_error("blocks", "", "if (True) { ", "1", " } else { 2 }", "", d);
    expect_nesting_error("fns", "", "fn (%x) { ", "1", " }", "", d);
    expect_nesting_error("types", "fn (%x: ", "(", "int32", ",)", ") { %x }", d);
    expect_nesting_error("fn_types", "fn (%x: ", "fn (", "int32", ") -> int32", ") { %x }", d);
    expect_nesting_error("attrs", "nn.pad(1, pad_width=", "[", "1", "]", ")", d);
    expect_nesting_error("patterns", "free_var %x;\nmatch (%x) { ", "(", "_", ")", " => 1 }", d);
    expect_nesting_error("refs", "", "ref(", "1", ")", "", d);
    expect_nesting_error("modules", HDR "def @f() { ", "(", "1", ")", " }", d);
    printf("%-12s %8d levels %.3f s\n", "parens_deep", d, now() - t0);
}

int main(void) {
    const char *n = getenv("RLY_DEEP_N");
    if (n != NULL && atol(n) > 0) deep_n = atol(n);
    double t0 = now();
    case_let_chain();
    case_graph_chain();
    case_call_chain();
    case_let_tree();
    case_binop_chain();
    case_proj_chain();
    case_seq_chain();
    case_parens_ok();
    case_parens_deep();
    printf("total %.3f s\n", now() - t0);
    return check_summary();
}
