/* test_eval.c - the interpreter through the public API (rly_module_run): every operator of the
 * table has a reference kernel; recursion 10^6 deep (non-tail) and a 10^6-iteration loop run
 * without a C stack overflow; a list of 10^6 cells is built, printed and freed iteratively;
 * runtime errors carry the failing expression's location; inputs are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "kernels/kernel.h"
#include "ops/ops.h"
#include "rly/rly.h"

/* Run text's @main (prelude loaded when asked); the rendered result or the error text. */
static char *run_text(const char *text, bool prelude, const rly_run_options *opts, rly_status *st) {
    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    rly_module *m = NULL;
    if (prelude) {
        rly_module_prelude(ctx, &m);
        *st = rly_module_parse_into(m, text, strlen(text), "test.rly");
    } else {
        *st = rly_module_parse(ctx, text, strlen(text), "test.rly", &m);
    }
    char *out = NULL;
    rly_run_options o = {0};
    if (opts) o = *opts;
    if (*st == RLY_STATUS_OK) *st = rly_module_run(m, &o, &out);
    if (*st != RLY_STATUS_OK) out = strdup(rly_last_error());
    rly_ctx_free(ctx);
    return out;
}

static void expect(const char *text, bool prelude, const char *want) {
    rly_status st;
    char *got = run_text(text, prelude, NULL, &st);
    CHECK(st == RLY_STATUS_OK && got && strstr(got, want) != NULL,
          "expected '%s' in the result of\n%s\ngot: %s", want, text, got ? got : "(null)");
    free(got);
}

static void expect_error(const char *text, const rly_run_options *o, const char *want) {
    rly_status st;
    char *got = run_text(text, strstr(text, "Cons") != NULL, o, &st);
    CHECK(st != RLY_STATUS_OK && got && strstr(got, want) != NULL,
          "expected an error with '%s' from\n%s\ngot: %s", want, text, got ? got : "(null)");
    free(got);
}

static void test_kernel_coverage(void) {
    size_t n = op_count(), missing = 0;
    for (size_t i = 0; i < n; i++) {
        const OpDef *op = op_at(i);
        if (op->user_rel != NULL) continue;
        if (kern_ref_lookup(op->id) == NULL) {
            missing++;
            fprintf(stderr, "no reference kernel: %s\n", op->name);
        }
    }
    CHECK(missing == 0, "%zu operators have no reference kernel", missing);
}

static void test_deep(void) {
    /* Non-tail recursion 10^6 deep: the frames live on the heap. */
    expect(HDR "def @sumto(%n: int64) -> int64 {\n"
               "  if (equal(%n, 0i64)) { 0i64 } else { add(%n, @sumto(subtract(%n, 1i64))) }\n"
               "}\n"
               "def @main() { @sumto(1000000i64) }\n",
           false, "500000500000i64");
    /* A loop as tail recursion: constant space. */
    expect(HDR "def @loop(%i: int32, %acc: int32) -> int32 {\n"
               "  if (less(%i, 1000000)) { @loop(add(%i, 1), add(%acc, 2)) } else { %acc }\n"
               "}\n"
               "def @main() { @loop(0, 0) }\n",
           false, "2000000");
    /* Let-bound recursion through a closure. */
    expect(HDR "def @main() {\n"
               "  let %f = fn (%n: int32) -> int32 {\n"
               "    if (equal(%n, 0)) { 0 } else { add(1, %f(subtract(%n, 1))) }\n"
               "  };\n"
               "  %f(300000)\n"
               "}\n",
           false, "300000");
    /* A 10^6-cell list: built by tail recursion, measured, freed without C recursion. */
    expect(HDR "def @build(%n: int32, %acc: List[int32]) -> List[int32] {\n"
               "  if (equal(%n, 0)) { %acc } else { @build(subtract(%n, 1), Cons(%n, %acc)) }\n"
               "}\n"
               "def @main() { @length(@build(1000000, Nil)) }\n",
           true, "1000000");
}

static void test_errors(void) {
    expect_error(HDR "def @main(%x: int32) { divide(%x, 0) }\n",
                 &(rly_run_options){.fill = RLY_FILL_ONES}, "test.rly:2:24");
    expect_error(HDR "def @main(%x: int32) { divide(%x, 0) }\n",
                 &(rly_run_options){.fill = RLY_FILL_ONES}, "division by zero");
    expect_error(HDR "def @main() {\n  match? (Cons(1, Nil)) {\n    Nil => 0,\n  }\n}\n", NULL,
                 "test.rly:3:3: error: no clause of this match accepts the value");
    expect_error(HDR "def @main(%x: Tensor[(2, 3), float32]) { %x }\n", NULL,
                 "missing input x; @main expects x: Tensor[(2, 3), float32]");
    expect_error(HDR "def @main(%x: Tensor[(?, 3), float32]) { %x }\n",
                 &(rly_run_options){.fill = RLY_FILL_RANDOM}, "unknown dimensions");
    expect_error(HDR "def @f() { 1 }\n", NULL, "no function @main to run; the module defines @f");
}

int main(void) {
    test_kernel_coverage();
    test_deep();
    test_errors();
    return check_summary();
}
