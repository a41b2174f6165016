/* passes.c - before/after goldens of the passes (tests/golden/passes/<Pass>/). Adding a test is
 * adding a file pair:
 *
 *   NAME.rly           the program (with NAME.npz beside it when it has tensor constants).
 *                      Leading comment lines may hold directives:
 *                        // passes: A,B(k=v)   the pipeline (default: the folder's name)
 *                        // opt-level: N       the pipeline's opt level (default 3)
 *                        // prelude            the program may use the prelude
 *   NAME.expected.rly  the expected result (and NAME.expected.npz for its tensor constants).
 *
 * Each program is type-checked, run through the pipeline with every pass's types verified (the
 * pass manager re-infers after each pass and compares), and compared with the expected module up
 * to alpha-equivalence (`rly equal`); the result must also print and parse back to an equal
 * module. RLY_UPDATE_GOLDEN=1 writes the expected files instead (review them in git).
 *
 *   golden_passes DIR   run every case of DIR (one pass's folder)
 * Closes with `N passed, N failed`; exit status 1 when anything failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/text/text.h"
#include "golden_util.h"
#include "passes/passes.h"
#include "rly/rly.h"
#include "types/types.h"

static bool update;

static rly_status load(rly_ctx *ctx, const char *path, bool prelude, rly_module **m) {
    if (!prelude) return rly_module_parse_file(ctx, path, m);
    rly_status st = rly_module_prelude(ctx, m);
    return st == RLY_STATUS_OK ? rly_module_parse_file_into(*m, path) : st;
}

static bool run_case(const char *dir, const char *name) {
    char path[4096], exp_path[4200], pipeline[1024], level[16];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(exp_path, sizeof exp_path, "%.*s.expected.rly", (int)(strlen(path) - 4), path);
    char *text = golden_read(path, NULL);
    if (text == NULL) return false;
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    if (!golden_directive(text, "passes", pipeline, sizeof pipeline))
        snprintf(pipeline, sizeof pipeline, "%s", base);
    int opt_level = golden_directive(text, "opt-level", level, sizeof level) ? atoi(level) : 3;
    bool prelude = golden_directive(text, "prelude", level, sizeof level);
    free(text);

    rly_ctx *ctx;
    rly_ctx_new(&ctx);
    bool ok = false;
    rly_module *m = NULL, *want = NULL;
    if (load(ctx, path, prelude, &m) != RLY_STATUS_OK) {
        fprintf(stderr, "FAIL %s: does not load:\n%s\n", name, rly_last_error());
        goto done;
    }
    rly_opt_options o = {.opt_level = opt_level, .passes = pipeline, .verify_types = 1};
    char *report = NULL;
    if (rly_module_optimize(m, &o, &report) != RLY_STATUS_OK) {
        fprintf(stderr, "FAIL %s: %s failed:\n%s\n", name, pipeline, rly_last_error());
        rly_free(report);
        goto done;
    }
    rly_free(report);
    /* the result prints and parses back to itself */
    StrBuf sb = {0};
    ir_print_module(m, NULL, &sb);
    Module *back = text_parse(ctx, "printed", sb.data, sb.len, m->meta.data, (uint32_t)m->meta.len);
    IrDiff d;
    /* both sides inferred: calls of polymorphic functions carry their type arguments */
    if (back == NULL || !ty_infer_module(back) || !ir_module_equal_diff(m, back, &d)) {
        fprintf(stderr, "FAIL %s: the result does not parse back to itself (%s):\n%s\n", name,
                back ? d.what : "parse error", sb_cstr(&sb));
        sb_free(&sb);
        goto done;
    }
    if (update) {
        ok = rly_module_save(m, exp_path) == RLY_STATUS_OK;
        if (!ok) fprintf(stderr, "FAIL %s: %s\n", name, rly_last_error());
        sb_free(&sb);
        goto done;
    }
    /* the expected file holds the whole module, the prelude's definitions included */
    if (load(ctx, exp_path, false, &want) != RLY_STATUS_OK) {
        fprintf(stderr, "FAIL %s: the expected module does not load:\n%s\n--- got\n%s", name,
                rly_last_error(), sb_cstr(&sb));
        sb_free(&sb);
        goto done;
    }
    int equal = 0;
    if (rly_module_infer(want) != RLY_STATUS_OK) {
        fprintf(stderr, "FAIL %s: the expected module does not type-check:\n%s\n", name,
                rly_last_error());
        sb_free(&sb);
        goto done;
    }
    rly_module_compare(m, want, &equal);
    if (!equal)
        fprintf(stderr, "FAIL %s: %s gives a different module:\n%s\n--- got\n%s", name, pipeline,
                rly_last_error(), sb_cstr(&sb));
    ok = equal != 0;
    sb_free(&sb);
done:
    rly_ctx_free(ctx);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: golden_passes DIR\n");
        return 2;
    }
    update = golden_update_requested();
    return golden_run_dir(argv[1], true, run_case);
}
