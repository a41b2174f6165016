/* fuzz_onnx_import.c - libFuzzer target for the ONNX decoder and importer together: decode the
 * input as a model (ox_load_bytes), import it into a fresh context (imp_import, which also folds
 * constant calls through the interpreter) and type-check the result. Any outcome but a crash, a
 * sanitizer report or a leak is fine; the invariants checked are that a failed import reported
 * at least one error and a successful one gives a module that type-checks or reports errors.
 *
 * Built as the libFuzzer binary `fuzz_onnx_import` (the `fuzz` preset) and into
 * `fuzz_replay_onnx_import` (every preset), run over tests/fuzz/corpus/onnx as a CTest test. */
#include <stdio.h>
#include <stdlib.h>

#include "frontend/onnx/import.h"
#include "fuzz.h"
#include "types/types.h"

bool fuzz_keep_going;
size_t fuzz_n_failures;

static void violated(const char *what) {
    fprintf(stderr, "fuzz_onnx_import: invariant violated: %s\n", what);
    if (!fuzz_keep_going) abort();
    fuzz_n_failures++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    OxModel *m = ox_load_bytes(data, size, "fuzz.onnx", err, sizeof err);
    if (m == NULL) return 0;
    Ctx *ctx = ir_ctx_new();
    Module *mod = imp_import(ctx, m, NULL);
    if (mod == NULL) {
        if (!diags_has_errors(&ctx->diags)) violated("a failed import reported no error");
    } else {
        size_t before = ctx->diags.n_errors;
        if (!ty_infer_module(mod) && ctx->diags.n_errors == before)
            violated("type inference failed without an error");
    }
    ir_ctx_free(ctx);
    ox_model_free(m);
    return 0;
}
