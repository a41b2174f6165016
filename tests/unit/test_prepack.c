/* test_prepack.c - executables saved with their constants in the kernels' layouts (section
 * PREP, vm_exec_prepare). A program whose weights are constants (folded at -O3: a 3x3 and a 1x1
 * conv2d, a dense, a batch_matmul) is compiled, run, saved with and without the prepared forms,
 * loaded and run again at 1 and 2 threads: the outputs must equal the in-memory run's bit for
 * bit; the prepacked file's kernels must make nothing at run time (k_prep_cache_fills 0) while
 * the plain file's must (so the check can fail); an entry with a `?` input cannot be prepared
 * and still saves. Prints `N passed, N failed`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rly/rly.h"
#include "rly/rly_runtime.h"
#include "runtime/session.h"

static int n_pass, n_fail;
static void check(int ok, const char *what) {
    if (ok) {
        n_pass++;
    } else {
        n_fail++;
        printf("FAIL %s (%s)\n", what, rly_last_error());
    }
}

static const char *src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(1, 8, 20, 20), float32], %v: Tensor[(5, 64), float32],\n"
    "          %u: Tensor[(3, 4, 64), float32]) {\n"
    "  let %w = reshape(sin(arange(0f, 1152f, 1f, dtype=\"float32\")), newshape=[16, 8, 3, 3]);\n"
    "  let %c = nn.relu(nn.conv2d(%x, %w, padding=[1, 1, 1, 1]));\n"
    "  let %w1 = reshape(cos(arange(0f, 256f, 1f, dtype=\"float32\")), newshape=[32, 8, 1, 1]);\n"
    "  let %d = reshape(cos(arange(0f, 2304f, 1f, dtype=\"float32\")), newshape=[36, 64]);\n"
    "  let %e = reshape(sin(arange(0f, 1920f, 1f, dtype=\"float32\")), newshape=[3, 64, 10]);\n"
    "  (%c, nn.conv2d(%x, %w1), nn.dense(%v, %d), nn.batch_matmul(%u, %e, transpose_b=False))\n"
    "}\n";

static const char *src_dyn = "#[version = \"0.0.5\"]\n"
                             "def @main(%v: Tensor[(?, 64), float32]) {\n"
                             "  let %d = reshape(cos(arange(0f, 2304f, 1f, dtype=\"float32\")), "
                             "newshape=[36, 64]);\n"
                             "  nn.dense(%v, %d)\n"
                             "}\n";

enum { N_IN = 3, N_OUT = 4 };
static const char *in_names[N_IN] = {"x", "v", "u"};
static int64_t shapes[N_IN][4] = {{1, 8, 20, 20}, {5, 64}, {3, 4, 64}};
static const int ndims[N_IN] = {4, 2, 3};
static float *in_data[N_IN];

static size_t numel(const DLTensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (size_t)t->shape[i];
    return n;
}

/* Run exe on the inputs; each output's floats copied into out[] (malloc'ed). */
static int run(const rly_executable *exe, int threads, float **out, size_t *n_out) {
    rly_session *s = NULL;
    rly_session_options so = {.threads = threads};
    if (rly_session_new(exe, &so, &s) != RLY_STATUS_OK) return 0;
    int ok = 1;
    for (int i = 0; i < N_IN && ok; i++) {
        DLTensor t = {.data = in_data[i],
                      .device = {kDLCPU, 0},
                      .ndim = ndims[i],
                      .dtype = {kDLFloat, 32, 1},
                      .shape = shapes[i]};
        ok = rly_session_set_input(s, in_names[i], &t) == RLY_STATUS_OK;
    }
    ok = ok && rly_session_run(s) == RLY_STATUS_OK;
    for (int k = 0; k < N_OUT && ok; k++) {
        const DLTensor *y = NULL;
        ok = rly_session_get_output(s, (size_t)k, &y) == RLY_STATUS_OK;
        if (!ok) break;
        n_out[k] = numel(y);
        out[k] = malloc(n_out[k] * sizeof(float));
        memcpy(out[k], (const char *)y->data + y->byte_offset, n_out[k] * sizeof(float));
    }
    rly_session_free(s);
    return ok;
}

static int same_outputs(float **a, size_t *na, float **b, size_t *nb) {
    for (int k = 0; k < N_OUT; k++)
        if (a[k] == NULL || b[k] == NULL || na[k] != nb[k] ||
            memcmp(a[k], b[k], na[k] * sizeof(float)) != 0)
            return 0;
    return 1;
}

static void free_outputs(float **o) {
    for (int k = 0; k < N_OUT; k++) {
        free(o[k]);
        o[k] = NULL;
    }
}

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

int main(void) {
    for (int i = 0; i < N_IN; i++) {
        size_t n = 1;
        for (int d = 0; d < ndims[i]; d++)
            n *= (size_t)shapes[i][d];
        in_data[i] = malloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++)
            in_data[i][j] = (float)((j * 37 + (size_t)i * 11) % 29) / 14.0f - 1.0f;
    }
    char dir[] = "/tmp/test_prepack.XXXXXX", p_pack[96], p_plain[96], p_dyn[96];
    if (mkdtemp(dir) == NULL) return 1;
    snprintf(p_pack, sizeof p_pack, "%s/pack.rlyx", dir);
    snprintf(p_plain, sizeof p_plain, "%s/plain.rlyx", dir);
    snprintf(p_dyn, sizeof p_dyn, "%s/dyn.rlyx", dir);

    rly_ctx *ctx = NULL;
    rly_module *mod = NULL;
    rly_executable *exe = NULL, *pack = NULL, *plain = NULL;
    check(rly_ctx_new(&ctx) == RLY_STATUS_OK, "context");
    check(rly_module_parse(ctx, src, strlen(src), "prepack.rly", &mod) == RLY_STATUS_OK, "parse");
    check(mod && rly_module_compile(mod, 3, NULL, &exe) == RLY_STATUS_OK, "compile -O3");
    float *want[N_OUT] = {0}, *got[N_OUT] = {0};
    size_t n_want[N_OUT], n_got[N_OUT];
    if (exe == NULL) goto done;
    check(run(exe, 1, want, n_want), "run in memory");
    check(rly_executable_save_with(exe, p_plain, RLY_SAVE_NO_PREPACK) == RLY_STATUS_OK,
          "save without prepared constants");
    check(rly_executable_save(exe, p_pack) == RLY_STATUS_OK, "save with prepared constants");
    check(file_size(p_pack) > file_size(p_plain) + 4 * 64, "the prepared forms are in the file");
    check(rly_executable_load(p_pack, &pack) == RLY_STATUS_OK, "load prepacked");
    check(rly_executable_load(p_plain, &plain) == RLY_STATUS_OK, "load plain");
    if (pack == NULL || plain == NULL) goto done;
    check(pack->exe->n_preps >= 4, "each of the four weights has a prepared form");
    check(plain->exe->n_preps == 0, "the plain file has none");
    for (int threads = 1; threads <= 2; threads++) {
        char what[96];
        snprintf(what, sizeof what, "prepacked run on %d thread(s) = in-memory run", threads);
        check(run(pack, threads, got, n_got) && same_outputs(want, n_want, got, n_got), what);
        free_outputs(got);
        snprintf(what, sizeof what, "plain run on %d thread(s) = in-memory run", threads);
        check(run(plain, threads, got, n_got) && same_outputs(want, n_want, got, n_got), what);
        free_outputs(got);
    }
    /* the fast kernels (RLY_KERNELS=ref would make none) */
    const char *kern = getenv("RLY_KERNELS");
    if (kern == NULL || strcmp(kern, "ref") != 0) {
        check(k_prep_cache_fills(pack->exe->prep) == 0,
              "a prepacked executable packs nothing at run time");
        check(k_prep_cache_fills(plain->exe->prep) >= 4, "a plain executable packs at first use");
    }

    /* an entry with a `?` input is not prepared, and saves */
    rly_module *dyn = NULL;
    rly_executable *dexe = NULL, *dback = NULL;
    check(rly_module_parse(ctx, src_dyn, strlen(src_dyn), "dyn.rly", &dyn) == RLY_STATUS_OK,
          "parse dyn");
    check(dyn && rly_module_compile(dyn, 3, NULL, &dexe) == RLY_STATUS_OK, "compile dyn");
    if (dexe != NULL) {
        char why[256] = "";
        check(vm_exec_prepare(dexe->exe, 10, why, sizeof why) == -1 && strstr(why, "`?` dim"),
              "a `?` input cannot be prepared");
        check(rly_executable_save(dexe, p_dyn) == RLY_STATUS_OK, "save dyn");
        check(rly_executable_load(p_dyn, &dback) == RLY_STATUS_OK && dback->exe->n_preps == 0,
              "load dyn");
    }
    rly_executable_free(dback);
    rly_executable_free(dexe);
    /* unknown flags */
    check(rly_executable_save_with(exe, p_dyn, 0x80) == RLY_STATUS_INVALID, "unknown flags");

done:
    free_outputs(want);
    rly_executable_free(pack);
    rly_executable_free(plain);
    rly_executable_free(exe);
    rly_ctx_free(ctx);
    unlink(p_pack);
    unlink(p_plain);
    unlink(p_dyn);
    rmdir(dir);
    for (int i = 0; i < N_IN; i++)
        free(in_data[i]);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
