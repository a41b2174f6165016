/* test_session_inputs.c - what kernels derive from a run's inputs lives for that run only. A
 * dense layer whose weight is an input of @main (packed once per run: KCall.in_const 2) is run
 * through a session with the weight bound zero-copy; the caller then changes the weight's bytes
 * in place and runs again, several times, and each result must be x * w^T of the weight as it is
 * then (computed here in double). Also run on 2 threads and after re-binding. Prints `N passed,
 * N failed`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rly/rly.h"
#include "rly/rly_runtime.h"

enum { M = 3, K = 37, N = 45 };

static int n_pass, n_fail;
static void check(int ok, const char *what) {
    if (ok) {
        n_pass++;
    } else {
        n_fail++;
        printf("FAIL %s: %s\n", what, rly_last_error());
    }
}

static const char *src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(3, 37), float32], %w: Tensor[(45, 37), float32]) {\n"
    "  nn.relu(nn.dense(%x, %w))\n"
    "}\n";

static int expect(rly_session *s, const float *x, const float *w, const char *what) {
    const DLTensor *y = NULL;
    if (rly_session_run(s) != RLY_STATUS_OK || rly_session_get_output(s, 0, &y) != RLY_STATUS_OK) {
        check(0, what);
        return 0;
    }
    const float *yd = (const float *)((const char *)y->data + y->byte_offset);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                acc += (double)x[i * K + k] * w[j * K + k];
                mag += fabs((double)x[i * K + k] * w[j * K + k]);
            }
            double want = acc > 0 ? acc : 0;
            if (fabs(yd[i * N + j] - want) > 1e-5 * (mag + 1)) {
                printf("FAIL %s: y[%d][%d] = %.7g, want %.7g\n", what, i, j, yd[i * N + j], want);
                n_fail++;
                return 0;
            }
        }
    n_pass++;
    return 1;
}

int main(void) {
    rly_ctx *ctx = NULL;
    rly_module *mod = NULL;
    rly_executable *exe = NULL;
    check(rly_ctx_new(&ctx) == RLY_STATUS_OK, "context");
    check(rly_module_parse(ctx, src, strlen(src), "dense.rly", &mod) == RLY_STATUS_OK, "parse");
    check(mod && rly_module_compile(mod, 3, NULL, &exe) == RLY_STATUS_OK, "compile -O3");
    float *x = aligned_alloc(64, 512), *w = aligned_alloc(64, 64 * 112);
    for (int i = 0; i < M * K; i++)
        x[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
    int64_t xs[2] = {M, K}, ws[2] = {N, K};
    DLTensor xt = {
        .data = x, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = xs};
    DLTensor wt = xt;
    wt.data = w;
    wt.shape = ws;
    for (int threads = 1; exe && threads <= 2; threads++) {
        rly_session *s = NULL;
        rly_session_options so = {.threads = threads};
        check(rly_session_new(exe, &so, &s) == RLY_STATUS_OK, "session");
        if (s == NULL) continue;
        check(rly_session_set_input(s, "x", &xt) == RLY_STATUS_OK, "bind x");
        check(rly_session_set_input(s, "w", &wt) == RLY_STATUS_OK, "bind w");
        char what[96];
        for (int round = 0; round < 4; round++) {
            /* change the weight in place (the session borrows it) */
            for (int i = 0; i < N * K; i++)
                w[i] = (float)(((i + 3) * (round + 2)) % 13) / 6.0f - 1.0f;
            snprintf(what, sizeof what, "threads %d, weight changed in place, run %d", threads,
                     round);
            expect(s, x, w, what);
        }
        for (int i = 0; i < N * K; i++) /* and re-bound */
            w[i] = (float)(i % 5) / 4.0f - 0.5f;
        check(rly_session_set_input(s, "w", &wt) == RLY_STATUS_OK, "re-bind w");
        snprintf(what, sizeof what, "threads %d, weight re-bound", threads);
        expect(s, x, w, what);
        rly_session_free(s);
    }
    rly_executable_free(exe);
    rly_ctx_free(ctx);
    free(x);
    free(w);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
