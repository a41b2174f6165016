/* golden.c - the data-driven golden suites. Adding a test is adding a file.
 *
 *   golden parse DIR   each DIR/NAME.rly: print(parse(x)) must equal DIR/NAME.rly.out; the
 *                      printed text must re-parse to a structurally equal module with the same
 *                      hash, and print to the same text again (a fixpoint); the module must be
 *                      well-formed.
 *   golden errors DIR  each DIR/NAME.rly must fail to parse or fail the well-formedness check;
 *                      the rendered diagnostic must equal DIR/NAME.err.
 *
 *   golden typed DIR   each DIR/NAME.rly must type-check; the module printed with its types must
 *                      equal DIR/NAME.rly.out, and that text must re-parse, check again and
 *                      print the same (a fixpoint).
 *   golden type_errors DIR  each DIR/NAME.rly must parse but fail type inference; every
 *                      rendered diagnostic must equal DIR/NAME.err.
 *
 * RLY_UPDATE_GOLDEN=1 writes the expectations instead of comparing (review them in git).
 * Closes with `N passed, N failed`; exit status 1 when anything failed. */
#include <stdio.h>

#include "frontend/text/text.h"
#include "golden_util.h"
#include "ir/ir.h"
#include "types/types.h"

static bool update;

static void write_all(const char *path, const char *s) {
    char err[256];
    if (!sup_write_file_atomic(path, s, strlen(s), err, sizeof err)) fprintf(stderr, "%s\n", err);
}

static char *render(Ctx *ctx) {
    StrBuf sb = {0};
    diags_render(&ctx->diags, 0, &sb);
    diags_clear(&ctx->diags);
    return sb_take(&sb);
}

static char *print_mod(Module *m) {
    StrBuf sb = {0};
    ir_print_module(m, NULL, &sb);
    return sb_take(&sb);
}

static bool check_expect(const char *path, const char *got, const char *what, const char *name) {
    if (update) {
        write_all(path, got);
        return true;
    }
    size_t len;
    char *want = golden_read(path, &len);
    bool ok = want != NULL && strcmp(want, got) == 0;
    if (!ok) {
        fprintf(stderr, "FAIL %s: %s differs from %s\n--- expected\n%s--- got\n%s---\n", name, what,
                path, want ? want : "(missing file)\n", got);
    }
    free(want);
    return ok;
}

static bool run_parse_case(const char *dir, const char *name) {
    char path[4096], out_path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    size_t len;
    char *text = golden_read(path, &len);
    if (text == NULL) return false;
    Ctx *ctx = ir_ctx_new();
    bool ok = false;
    Module *m = text_parse(ctx, name, text, len, NULL, 0);
    char *p1 = NULL, *p2 = NULL, *msg = NULL;
    if (m == NULL) {
        msg = render(ctx);
        fprintf(stderr, "FAIL %s: does not parse:\n%s", name, msg);
        goto done;
    }
    if (!ir_well_formed(m)) {
        msg = render(ctx);
        fprintf(stderr, "FAIL %s: not well-formed:\n%s", name, msg);
        goto done;
    }
    p1 = print_mod(m);
    if (!check_expect(out_path, p1, "printed text", name)) goto done;
    Module *m2 = text_parse(ctx, "printed", p1, strlen(p1), m->meta.data, (uint32_t)m->meta.len);
    if (m2 == NULL) {
        msg = render(ctx);
        fprintf(stderr, "FAIL %s: printed text does not re-parse:\n%s", name, msg);
        goto done;
    }
    if (!ir_module_equal(m, m2)) {
        fprintf(stderr, "FAIL %s: re-parsed module is not structurally equal\n", name);
        goto done;
    }
    if (ir_module_hash(m) != ir_module_hash(m2)) {
        fprintf(stderr, "FAIL %s: structural hashes differ after re-parse\n", name);
        goto done;
    }
    p2 = print_mod(m2);
    if (strcmp(p1, p2) != 0) {
        fprintf(stderr, "FAIL %s: printing is not a fixpoint\n--- first\n%s--- second\n%s", name,
                p1, p2);
        goto done;
    }
    ok = true;
done:
    free(p1);
    free(p2);
    free(msg);
    free(text);
    ir_ctx_free(ctx);
    return ok;
}

static bool run_error_case(const char *dir, const char *name) {
    char path[4096], err_path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(err_path, sizeof err_path, "%.*s.err", (int)(strlen(path) - 4), path);
    size_t len;
    char *text = golden_read(path, &len);
    if (text == NULL) return false;
    Ctx *ctx = ir_ctx_new();
    bool ok = false;
    Module *m = text_parse(ctx, name, text, len, NULL, 0);
    if (m != NULL && ir_well_formed(m)) {
        fprintf(stderr, "FAIL %s: expected an error, but it parsed and is well-formed\n", name);
    } else {
        char *msg = render(ctx);
        ok = msg[0] != '\0' && check_expect(err_path, msg, "diagnostic", name);
        if (msg[0] == '\0') fprintf(stderr, "FAIL %s: failed without a diagnostic\n", name);
        free(msg);
    }
    free(text);
    ir_ctx_free(ctx);
    return ok;
}

static char *print_typed(Module *m) {
    StrBuf sb = {0};
    PrintOptions po = {.show_types = true};
    ir_print_module(m, &po, &sb);
    return sb_take(&sb);
}

static bool run_typed_case(const char *dir, const char *name) {
    char path[4096], out_path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    size_t len;
    char *text = golden_read(path, &len);
    if (text == NULL) return false;
    Ctx *ctx = ir_ctx_new();
    bool ok = false;
    char *p1 = NULL, *p2 = NULL, *msg = NULL;
    Module *m = text_parse(ctx, name, text, len, NULL, 0);
    if (m == NULL || !ir_well_formed(m) || !ty_infer_module(m)) {
        msg = render(ctx);
        fprintf(stderr, "FAIL %s: does not type-check:\n%s", name, msg);
        goto done;
    }
    p1 = print_typed(m);
    if (!check_expect(out_path, p1, "typed text", name)) goto done;
    Module *m2 = text_parse(ctx, "printed", p1, strlen(p1), m->meta.data, (uint32_t)m->meta.len);
    if (m2 == NULL || !ty_infer_module(m2)) {
        msg = render(ctx);
        fprintf(stderr, "FAIL %s: printed text does not re-check:\n%s", name, msg);
        goto done;
    }
    p2 = print_typed(m2);
    if (strcmp(p1, p2) != 0) {
        fprintf(stderr, "FAIL %s: typed printing is not a fixpoint\n--- first\n%s--- second\n%s",
                name, p1, p2);
        goto done;
    }
    ok = true;
done:
    free(p1);
    free(p2);
    free(msg);
    free(text);
    ir_ctx_free(ctx);
    return ok;
}

static bool run_type_error_case(const char *dir, const char *name) {
    char path[4096], err_path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(err_path, sizeof err_path, "%.*s.err", (int)(strlen(path) - 4), path);
    size_t len;
    char *text = golden_read(path, &len);
    if (text == NULL) return false;
    Ctx *ctx = ir_ctx_new();
    bool ok = false;
    Module *m = text_parse(ctx, name, text, len, NULL, 0);
    if (m == NULL || !ir_well_formed(m)) {
        char *msg = render(ctx);
        fprintf(stderr, "FAIL %s: must parse and be well-formed (the error is a type error):\n%s",
                name, msg);
        free(msg);
    } else if (ty_infer_module(m)) {
        fprintf(stderr, "FAIL %s: expected a type error, but it checks\n", name);
    } else {
        char *msg = render(ctx);
        ok = msg[0] != '\0' && check_expect(err_path, msg, "diagnostics", name);
        free(msg);
    }
    free(text);
    ir_ctx_free(ctx);
    return ok;
}

static const struct {
    const char *mode;
    bool (*run)(const char *dir, const char *name);
} modes[] = {
    {"parse", run_parse_case},
    {"errors", run_error_case},
    {"typed", run_typed_case},
    {"type_errors", run_type_error_case},
};

int main(int argc, char **argv) {
    for (size_t i = 0; argc == 3 && i < RLY_ARRAY_LEN(modes); i++) {
        if (strcmp(argv[1], modes[i].mode) != 0) continue;
        update = golden_update_requested();
        return golden_run_dir(argv[2], false, modes[i].run);
    }
    fprintf(stderr, "usage: golden parse|errors|typed|type_errors DIR\n");
    return 2;
}
