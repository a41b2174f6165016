/* test_exec_programs.c - executable files over whole programs: every program of the given
 * folders that the VM compiler compiles (at -O0 and -O3) is saved and loaded back, through a
 * mapped file (vm_exec_save / vm_exec_load) and from bytes at an odd address
 * (vm_exec_load_bytes, constants copied); each loaded executable must validate and bind, equal
 * the compiled one field by field, and encode to the same bytes; when @main takes no
 * parameters, the compiled and the loaded executables are run and must give the same value (as
 * vm_print_value prints it) or the same error. A program the compiler rejects is skipped here
 * (tests/unit/test_vm_compile.c owns compiling); `// prelude` loads the prelude first.
 *
 *   test_exec_programs DIR...                       the round trips; `N passed, N failed`
 *   test_exec_programs --write-corpus OUT DIR...    also write the images of small programs as
 *                                                   fuzz seeds (tests/fuzz/corpus/exec) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "../golden/golden_util.h"
#include "backend/backend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/exec_file.h"

static char tmp_dir[256];
static const char *corpus_out;
static int n_compiled, n_ran;

/* The module of text, with the prelude when asked or when it does not parse alone. */
static Module *load(Ctx *ctx, const char *text, const char *name, bool prelude) {
    rly_module *m = NULL;
    if (!prelude && rly_module_parse(ctx, text, strlen(text), name, &m) == RLY_STATUS_OK) return m;
    diags_clear(&ctx->diags);
    if (rly_module_prelude(ctx, &m) != RLY_STATUS_OK ||
        rly_module_parse_into(m, text, strlen(text), name) != RLY_STATUS_OK)
        return NULL;
    return m;
}

/* Run the entry (no arguments): its value as text, or "error: " and the message. */
static char *run(const VmExec *exe) {
    Vm *vm = vm_new(exe);
    char err[2048] = "";
    Value *v = vm_invoke(vm, exe->entry, 0, NULL, err, sizeof err);
    StrBuf sb = {0};
    if (v != NULL)
        vm_print_value(exe, v, 64, &sb);
    else
        sb_printf(&sb, "error: %s", err);
    rt_release(v);
    vm_free(vm);
    return sb_take(&sb);
}

static void write_seed(const char *label, int level, const StrBuf *img) {
    if (corpus_out == NULL || img->len > 4096) return;
    const char *base = strrchr(label, '/');
    base = base ? base + 1 : label;
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/prog_%.*s_O%d.rlyx", corpus_out, (int)(strcspn(base, ".")),
             base, level);
    CHECK(sup_write_file_atomic(path, img->data, img->len, err, sizeof err), "%s", err);
}

static void round_trip(const char *label, int level, const VmExec *exe) {
    char err[2048], why[256], path[512];
    StrBuf img = {0}, img2 = {0};
    if (!rt_exec_encode(exe, &img, err, sizeof err)) {
        CHECK(false, "%s -O%d: encode: %s", label, level, err);
        return;
    }
    write_seed(label, level, &img);
    snprintf(path, sizeof path, "%s/prog.rlyx", tmp_dir);
    CHECK(vm_exec_save(exe, path, err, sizeof err), "%s -O%d: save: %s", label, level, err);
    VmExec *loaded = vm_exec_load(path, err, sizeof err);
    CHECK(loaded != NULL, "%s -O%d: load: %s", label, level, err);
    uint8_t *odd = malloc(img.len + 1);
    memcpy(odd + 1, img.data, img.len);
    VmExec *from_bytes = vm_exec_load_bytes(odd + 1, img.len, err, sizeof err);
    CHECK(from_bytes != NULL, "%s -O%d: load from bytes: %s", label, level, err);
    if (loaded != NULL) {
        CHECK(rt_exec_equal(exe, loaded, why, sizeof why), "%s -O%d: loaded: %s", label, level,
              why);
        CHECK(rt_exec_encode(loaded, &img2, err, sizeof err) && img2.len == img.len &&
                  memcmp(img.data, img2.data, img.len) == 0,
              "%s -O%d: the encoding is not a fixpoint", label, level);
    }
    if (from_bytes != NULL)
        CHECK(rt_exec_equal(exe, from_bytes, why, sizeof why), "%s -O%d: from bytes: %s", label,
              level, why);
    if (loaded != NULL && from_bytes != NULL && exe->entry < exe->n_funcs &&
        exe->funcs[exe->entry].n_params == 0) {
        n_ran++;
        char *a = run(exe), *b = run(loaded), *c = run(from_bytes);
        CHECK(strcmp(a, b) == 0 && strcmp(a, c) == 0,
              "%s -O%d: runs differ:\n  compiled: %.500s\n  loaded:   %.500s\n  bytes:    %.500s",
              label, level, a, b, c);
        free(a), free(b), free(c);
    }
    if (loaded) vm_exec_free(loaded);
    if (from_bytes) vm_exec_free(from_bytes);
    free(odd);
    unlink(path);
    sb_free(&img);
    sb_free(&img2);
}

static void check_file(const char *dir, const char *file) {
    char path[4096], flag[64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = golden_read(path, NULL);
    if (text == NULL) {
        CHECK(false, "%s: cannot read", path);
        return;
    }
    bool prelude = golden_directive(text, "prelude", flag, sizeof flag);
    for (int level = 0; level <= 3; level += 3) {
        Ctx *ctx = NULL;
        rly_ctx_new(&ctx);
        Module *m = load(ctx, text, path, prelude);
        FuncDef *d = m ? ir_module_lookup(m, "main", 4) : NULL;
        PassOptions po = {.opt_level = level};
        VmExec *exe = NULL;
        if (m != NULL && ((d != NULL && d->func != NULL) || m->is_expr) && pass_run(m, &po))
            exe = be_compile(m, NULL);
        if (exe != NULL) {
            n_compiled++;
            round_trip(path, level, exe);
            vm_exec_free(exe);
        }
        rly_ctx_free(ctx);
    }
    free(text);
}

int main(int argc, char **argv) {
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "--write-corpus") == 0) corpus_out = argv[2], first = 3;
    if (first >= argc) {
        fprintf(stderr, "usage: test_exec_programs [--write-corpus OUT] DIR...\n");
        return 2;
    }
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_exec_programs.XXXXXX");
    if (mkdtemp(tmp_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    for (int i = first; i < argc; i++) {
        char **names = NULL;
        size_t n = golden_list(argv[i], true, &names);
        CHECK(n > 0, "%s: no programs", argv[i]);
        for (size_t k = 0; k < n; k++) {
            check_file(argv[i], names[k]);
            free(names[k]);
        }
        free(names);
    }
    rmdir(tmp_dir);
    printf("%d programs compiled and round-tripped, %d runs compared\n", n_compiled, n_ran);
    CHECK(n_compiled > 0, "no program compiled");
    return check_summary();
}
