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
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/text/text.h"
#include "passes/passes.h"
#include "rly/rly.h"
#include "types/types.h"

static bool update;

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted case files of DIR: NAME.rly, not NAME.expected.rly. */
static size_t list_cases(const char *dir, char ***out) {
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    PtrVec names = {0};
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        size_t n = strlen(ent->d_name);
        if (n > 4 && strcmp(ent->d_name + n - 4, ".rly") == 0 &&
            !(n > 13 && strcmp(ent->d_name + n - 13, ".expected.rly") == 0))
            vec_push(&names, strdup(ent->d_name));
    }
    closedir(d);
    qsort(names.data, names.len, sizeof(char *), cmp_names);
    *out = (char **)names.data;
    return names.len;
}

/* The value of directive `key` in the leading comment lines of text, copied into buf. */
static bool directive(const char *text, const char *key, char *buf, size_t cap) {
    size_t kn = strlen(key);
    for (const char *p = text; strncmp(p, "//", 2) == 0 || strncmp(p, "#[", 2) == 0;) {
        const char *q = p + 2;
        while (*q == ' ')
            q++;
        const char *eol = strchr(p, '\n');
        if (eol == NULL) eol = p + strlen(p);
        if (strncmp(p, "//", 2) == 0 && strncmp(q, key, kn) == 0 &&
            (q[kn] == ':' || q[kn] == '\n' || q[kn] == ' ' || q[kn] == '\0')) {
            q += kn;
            if (*q == ':') q++;
            while (*q == ' ')
                q++;
            snprintf(buf, cap, "%.*s", (int)(eol - q), q);
            return true;
        }
        if (*eol == '\0') break;
        p = eol + 1;
    }
    return false;
}

static rly_status load(rly_ctx *ctx, const char *path, bool prelude, rly_module **m) {
    if (!prelude) return rly_module_parse_file(ctx, path, m);
    rly_status st = rly_module_prelude(ctx, m);
    return st == RLY_STATUS_OK ? rly_module_parse_file_into(*m, path) : st;
}

static bool run_case(const char *dir, const char *name) {
    char path[4096], exp_path[4200], pipeline[1024], level[16];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(exp_path, sizeof exp_path, "%.*s.expected.rly", (int)(strlen(path) - 4), path);
    char err[256], *text = NULL;
    size_t len;
    if (!sup_read_file(path, &text, &len, err, sizeof err)) {
        fprintf(stderr, "FAIL %s: %s\n", name, err);
        return false;
    }
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    if (!directive(text, "passes", pipeline, sizeof pipeline))
        snprintf(pipeline, sizeof pipeline, "%s", base);
    int opt_level = directive(text, "opt-level", level, sizeof level) ? atoi(level) : 3;
    bool prelude = directive(text, "prelude", level, sizeof level);
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
    update = getenv("RLY_UPDATE_GOLDEN") && strcmp(getenv("RLY_UPDATE_GOLDEN"), "1") == 0;
    char **names = NULL;
    size_t n = list_cases(argv[1], &names), passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        run_case(argv[1], names[i]) ? passed++ : failed++;
        free(names[i]);
    }
    free(names);
    if (n == 0) {
        fprintf(stderr, "no cases in %s\n", argv[1]);
        failed = 1;
    }
    printf("%zu passed, %zu failed\n", passed, failed);
    return failed ? 1 : 0;
}
