/* fuzz_parse.c - libFuzzer target for the Relay text parser, as a round trip.
 *
 * For each input (fresh context each time):
 * - parse it with text_parse (no meta table; a `#[metadata]` section supplies one);
 * - on failure there must be exactly one error diagnostic, and it must render;
 * - on success there must be no error, and the module must be well-formed or the
 *   well-formedness check must have reported an error;
 * - a well-formed module is printed, the text re-parsed (with the first module's meta table):
 *   the re-parse must succeed, be well-formed, be ir_module_equal to the first module with the
 *   same ir_module_hash, and print to the same text (printing is a fixpoint);
 * - the module is type-checked: a failure must report an error that renders; a success must
 *   print with types to a text that re-parses, checks again and prints the same;
 * - a module that type-checks is optimized at -O3 (rly opt) with every pass's types verified;
 *   the result must print and parse back to an equal module.
 *
 * Built twice: as the libFuzzer binary `fuzz_parse` (RLY_FUZZ=ON, the `fuzz` preset) and into
 * `fuzz_replay` (every preset), which runs it over tests/fuzz/corpus/parse as a CTest test. */
#include <stdarg.h>
#include <stdio.h>

#include "frontend/text/text.h"
#include "fuzz.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "types/types.h"

bool fuzz_keep_going;
size_t fuzz_n_failures;

/* The input, escaped, at most 600 bytes of it. */
static void dump_input(const uint8_t *data, size_t size) {
    fputs("input: \"", stderr);
    for (size_t i = 0; i < size && i < 600; i++) {
        unsigned c = data[i];
        if (c == '\n')
            fputs("\\n", stderr);
        else if (c == '"' || c == '\\')
            fprintf(stderr, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            fputc((int)c, stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, "\"%s (%zu bytes)\n", size > 600 ? "..." : "", size);
}

/* An invariant failed: report it, then abort (libFuzzer) or count it (replay). */
RLY_PRINTF(3, 4)
static void fail(const uint8_t *data, size_t size, const char *fmt, ...) {
    fputs("fuzz_parse: FAIL: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    dump_input(data, size);
    if (!fuzz_keep_going) abort();
    fuzz_n_failures++;
}

/* Render and drop the context's diagnostics (a malloc'ed string). */
static char *render(Ctx *ctx) {
    StrBuf sb = {0};
    diags_render(&ctx->diags, 0, &sb);
    diags_clear(&ctx->diags);
    return sb_take(&sb);
}

static void print_mod(Module *m, StrBuf *out) {
    out->len = 0;
    ir_print_module(m, NULL, out);
    sb_cstr(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = size ? (const char *)data : "";
    Ctx *ctx = ir_ctx_new();
    StrBuf p1 = {0}, p2 = {0};
    char *msg = NULL;
    Module *m = text_parse(ctx, "fuzz.rly", text, size, NULL, 0);
    if (m == NULL) {
        size_t n_errors = ctx->diags.n_errors;
        msg = render(ctx);
        if (n_errors != 1)
            fail(data, size, "parse failed with %zu errors (want exactly 1):\n%s", n_errors, msg);
        else if (msg[0] == '\0')
            fail(data, size, "parse failed but the diagnostic renders empty");
        goto done;
    }
    if (diags_has_errors(&ctx->diags)) {
        msg = render(ctx);
        fail(data, size, "parse succeeded but reported an error:\n%s", msg);
        goto done;
    }
    if (!ir_well_formed(m)) {
        if (!diags_has_errors(&ctx->diags))
            fail(data, size, "module is not well-formed, but no diagnostic was reported");
        goto done;
    }

    print_mod(m, &p1);
    if (memchr(p1.data, '\0', p1.len) != NULL) {
        fail(data, size, "printed text contains a NUL byte");
        goto done;
    }
    Module *m2 = text_parse(ctx, "printed.rly", p1.data, p1.len, (Constant *const *)m->meta.data,
                            (uint32_t)m->meta.len);
    if (m2 == NULL) {
        msg = render(ctx);
        fail(data, size, "printed text does not re-parse:\n%s--- printed\n%s---", msg, p1.data);
        goto done;
    }
    if (!ir_well_formed(m2)) {
        msg = render(ctx);
        fail(data, size, "re-parsed module is not well-formed:\n%s--- printed\n%s---", msg,
             p1.data);
        goto done;
    }
    if (!ir_module_equal(m, m2)) {
        fail(data, size, "re-parsed module is not structurally equal\n--- printed\n%s---", p1.data);
        goto done;
    }
    if (ir_module_hash(m) != ir_module_hash(m2)) {
        fail(data, size, "structural hashes differ after re-parse\n--- printed\n%s---", p1.data);
        goto done;
    }
    print_mod(m2, &p2);
    if (p1.len != p2.len || memcmp(p1.data, p2.data, p1.len) != 0) {
        fail(data, size, "printing is not a fixpoint\n--- first\n%s--- second\n%s---", p1.data,
             p2.data);
        goto done;
    }
    /* type inference: never crashes; errors render; typed text is a fixpoint */
    if (!ty_infer_module(m)) {
        size_t n_errors = ctx->diags.n_errors;
        msg = render(ctx);
        if (n_errors == 0 || msg[0] == '\0')
            fail(data, size, "type inference failed without a diagnostic");
        goto done;
    }
    PrintOptions po = {.show_types = true};
    p1.len = 0;
    ir_print_module(m, &po, &p1);
    sb_cstr(&p1);
    Module *m3 = text_parse(ctx, "typed.rly", p1.data, p1.len, (Constant *const *)m->meta.data,
                            (uint32_t)m->meta.len);
    if (m3 == NULL || !ty_infer_module(m3)) {
        msg = render(ctx);
        fail(data, size, "typed text does not re-check:\n%s--- typed\n%s---", msg, p1.data);
        goto done;
    }
    p2.len = 0;
    ir_print_module(m3, &po, &p2);
    sb_cstr(&p2);
    if (p1.len != p2.len || memcmp(p1.data, p2.data, p1.len) != 0) {
        fail(data, size, "typed printing is not a fixpoint\n--- first\n%s--- second\n%s---",
             p1.data, p2.data);
        goto done;
    }
    /* the optimizer: -O3 with every pass's types verified; its result prints and parses back */
    PassOptions opt = {.opt_level = 3, .verify_types = true};
    if (!pass_run(m, &opt)) {
        msg = render(ctx);
        fail(data, size, "rly opt -O3 failed on a module that type-checks:\n%s", msg);
        goto done;
    }
    print_mod(m, &p1);
    Module *m4 = text_parse(ctx, "optimized.rly", p1.data, p1.len, (Constant *const *)m->meta.data,
                            (uint32_t)m->meta.len);
    if (m4 == NULL || !ty_infer_module(m4) || !ir_module_equal(m, m4)) { /* type args too */
        msg = render(ctx);
        fail(data, size, "optimized text does not parse back:\n%s--- optimized\n%s---", msg,
             p1.data);
    }
done:
    free(msg);
    sb_free(&p1);
    sb_free(&p2);
    ir_ctx_free(ctx);
    return 0;
}
