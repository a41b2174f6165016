/* test_types.c - type inference through the public API: the prelude (parsed, checked, the types
 * of its functions), programs that use it, user-defined operators (registration, checking,
 * errors), and inference over 10^5-deep programs without C recursion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "rly/rly.h"
#include "frontend/text/text.h"
#include "types/types.h"

static char *check_text(rly_ctx *ctx, rly_module *into, const char *text, rly_status *st) {
    rly_module *m = into;
    *st = into ? rly_module_parse_into(into, text, strlen(text), "test")
               : rly_module_parse(ctx, text, strlen(text), "test", &m);
    if (*st != RLY_STATUS_OK) return strdup(rly_last_error());
    *st = rly_module_infer(m);
    if (*st != RLY_STATUS_OK) return strdup(rly_last_error());
    char *out = NULL;
    *st = rly_module_print_typed(m, &out);
    return out;
}

static void test_prelude(void) {
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *p;
    CHECK(rly_module_prelude(ctx, &p) == RLY_STATUS_OK, "prelude parses: %s", rly_last_error());
    CHECK(rly_module_infer(p) == RLY_STATUS_OK, "prelude checks: %s", rly_last_error());
    char *text = NULL;
    rly_module_print_typed(p, &text);
    static const char *const defs[] = {
        "def @id[",      "def @compose[", "def @flip[",       "def @hd[",         "def @tl[",
        "def @nth[",     "def @length[",  "def @update[",     "def @map[",        "def @foldl[",
        "def @foldr[",   "def @foldr1[",  "def @sum(",        "def @concat[",     "def @filter[",
        "def @zip[",     "def @rev[",     "def @map_accuml[", "def @map_accumr[", "def @unfoldl[",
        "def @unfoldr[", "def @tmap[",    "def @size[",       "def @iterate[",    "type List[",
        "type Option[",  "type Tree[",    "type nat",
    };
    for (size_t i = 0; i < sizeof defs / sizeof *defs; i++)
        CHECK(text && strstr(text, defs[i]) != NULL, "prelude defines %s", defs[i]);
    rly_free(text);

    /* a program using the prelude */
    rly_status st;
    char *out = check_text(
        ctx, p,
        HDR "def @main(%xs: List[int32]) {\n"
            "  let %ys = @map(fn (%x) { add(%x, 1) }, %xs);\n"
            "  let %t = Rose(1f, Cons(Rose(2f, Nil), Nil));\n"
            "  (@sum(@rev(%ys)), @length(@filter(fn (%x: int32) { less(%x, 3) }, %ys)),\n"
            "   @size(@tmap(fn (%v: float32) { equal(%v, 1f) }, %t)),\n"
            "   @foldl(fn (%a: float32, %b: int32) { add(%a, cast(%b, dtype=\"float32\")) }, 0f, "
            "%ys),\n"
            "   @zip(%xs, @map(fn (%x: int32) { cast(%x, dtype=\"float32\") }, %xs)))\n"
            "}\n",
        &st);
    CHECK(st == RLY_STATUS_OK, "program over the prelude checks: %s", out);
    CHECK(out && strstr(out, "ty=(int32, int32, int32, float32, List[(int32, float32)])") != NULL,
          "result type of @main: %s", out ? out : "");
    free(out);
    rly_ctx_free(ctx);
}

static int double_rel(rly_ctx *ctx, const rly_type *const *args, int n, const rly_type **out,
                      char *err, size_t err_len, void *user) {
    (void)n;
    (void)user;
    if (!rly_type_is_tensor(args[0]) || rly_type_dtype(args[0]) != RLY_DTYPE_F32) {
        snprintf(err, err_len, "needs a float32 tensor");
        return 1;
    }
    int nd = rly_type_ndim(args[0]);
    int64_t shape[8];
    for (int i = 0; i < nd && i < 8; i++) {
        int64_t d = rly_type_dim(args[0], i);
        shape[i] = d >= 0 ? 2 * d : RLY_DIM_ANY;
    }
    *out = rly_type_tensor(ctx, RLY_DTYPE_F32, nd, shape);
    return 0;
}

static void test_user_op(void) {
    rly_op_def def = {"test.stretch", 1,    RLY_PATTERN_INJECTIVE,    double_rel,
                      NULL,           NULL, "doubles every dimension"};
    CHECK(rly_op_register(&def) == RLY_STATUS_OK, "register: %s", rly_last_error());
    CHECK(rly_op_register(&def) == RLY_STATUS_INVALID, "a second registration is refused");
    CHECK(strstr(rly_last_error(), "already defined") != NULL, "says why: %s", rly_last_error());
    rly_op_def bad = {"add", 2, RLY_PATTERN_BROADCAST, double_rel, NULL, NULL, NULL};
    CHECK(rly_op_register(&bad) == RLY_STATUS_INVALID, "a builtin name is refused");
    rly_op_def bad2 = {"x.y", 1, RLY_PATTERN_BROADCAST, NULL, NULL, NULL, NULL};
    CHECK(rly_op_register(&bad2) == RLY_STATUS_INVALID, "a missing relation is refused");

    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_status st;
    char *out = check_text(ctx, NULL,
                           "fn (%x: Tensor[(2, ?), float32]) { test.stretch(add(%x, %x)) }", &st);
    CHECK(st == RLY_STATUS_OK, "user op checks: %s", out);
    CHECK(out && strstr(out, "ty=Tensor[(4, ?), float32]") != NULL, "user op type: %s", out);
    free(out);
    out = check_text(ctx, NULL, "fn (%x: Tensor[(2, 3), int8]) { test.stretch(%x) }", &st);
    CHECK(st == RLY_STATUS_ERROR && out && strstr(out, "test.stretch: needs a float32 tensor"),
          "user relation error: %s", out);
    free(out);
    out = check_text(ctx, NULL, "fn (%x: Tensor[(2, 3), float32]) { test.stretch(%x, %x) }", &st);
    CHECK(st == RLY_STATUS_ERROR && out && strstr(out, "expects 1 argument"), "arity: %s", out);
    free(out);
    rly_ctx_free(ctx);
}

/* 10^5-deep let chains, nested ifs and calls: inference never recurses over program depth. */
static void test_deep(void) {
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    size_t n = 100000, cap = n * 64 + 256;
    char *s = malloc(cap), *p = s;
    p += sprintf(p, "fn (%%x: Tensor[(4), float32]) {\n");
    for (size_t i = 0; i < n; i++) {
        if (i == 0)
            p += sprintf(p, "let %%v0 = add(%%x, %%x);\n");
        else
            p += sprintf(p, "let %%v%zu = multiply(%%v%zu, %%x);\n", i, i - 1);
    }
    p += sprintf(p, "%%v%zu\n}\n", n - 1);
    rly_module *m;
    CHECK(rly_module_parse(ctx, s, (size_t)(p - s), "deep", &m) == RLY_STATUS_OK, "parse: %s",
          rly_last_error());
    CHECK(rly_module_infer(m) == RLY_STATUS_OK, "deep let chain checks: %s", rly_last_error());
    /* an error at the bottom of a deep chain is reported once, with no cascade */
    p = s;
    p += sprintf(p, "fn (%%x: Tensor[(4), float32], %%y: Tensor[(5), float32]) {\n");
    p += sprintf(p, "let %%v0 = add(%%x, %%y);\n");
    for (size_t i = 1; i < n; i++)
        p += sprintf(p, "let %%v%zu = multiply(%%v%zu, %%x);\n", i, i - 1);
    p += sprintf(p, "%%v%zu\n}\n", n - 1);
    CHECK(rly_module_parse(ctx, s, (size_t)(p - s), "deep2", &m) == RLY_STATUS_OK, "parse");
    CHECK(rly_module_infer(m) == RLY_STATUS_ERROR, "deep chain with an error fails");
    const char *e = rly_last_error();
    CHECK(strstr(e, "not broadcastable") != NULL, "the error: %.200s", e);
    size_t n_err = 0;
    for (const char *q = e; (q = strstr(q, "error:")) != NULL; q++)
        n_err++;
    CHECK(n_err == 1, "one error, no cascade (%zu)", n_err);
    free(s);
    rly_ctx_free(ctx);
}

/* Calls of polymorphic functions and constructors record their type arguments. */
static void test_type_args(void) {
    Ctx *ctx = ir_ctx_new();
    const char *text = HDR "type Pair[A, B] { MkPair(A, B) }\n"
                           "def @id[T](%x: T) -> T { %x }\n"
                           "def @main() { MkPair(@id(1f), @id(True)) }\n";
    Module *m = text_parse(ctx, "t", text, strlen(text), NULL, 0);
    CHECK(m && ty_infer_module(m), "checks");
    if (m) {
        Call *mk = AS_CALL(m->funcs.data[1].func->body);
        CHECK(mk->n_type_args == 2 && mk->type_args[0] == ir_type_scalar(ctx, RLY_DTYPE_F32) &&
                  mk->type_args[1] == ir_type_scalar(ctx, RLY_DTYPE_BOOL),
              "MkPair's type args are (float32, bool)");
        Call *id1 = AS_CALL(mk->args[1]);
        CHECK(id1->n_type_args == 1 && id1->type_args[0] == ir_type_scalar(ctx, RLY_DTYPE_BOOL),
              "@id(True)'s type arg is bool");
        CHECK(mk->base.checked_type != NULL && mk->base.checked_type->kind == TYPE_CALL,
              "the checked type is stored on the node");
    }
    ir_ctx_free(ctx);
}

int main(void) {
    test_type_args();
    test_prelude();
    test_user_op();
    test_deep();
    return check_summary();
}
