/* test_fast_rnn.c - the LSTM and GRU cell kernels (src/kernels/fast/rnn.c) when their planned
 * outputs share bytes with their inputs. A memory plan may give a cell's result the storage of
 * an input that dies at the call (runtime/vm.c, run_cell); the tasks of a step all read h whole
 * and xp at their units, so the kernel then computes the new states in scratch and copies them
 * out after the join, and otherwise writes them straight into the outputs. Each case runs the
 * kernel on separate outputs, then with the outputs placed over the inputs (h2 over h, h2 over
 * xp across two gates, c2 over c, c2 over h; GRU h2 over h, x and bn), and wants the same bits, at
 * every instruction-set level this machine has and on 1 and 2 threads. The sizes give two tasks
 * on two threads (LSTM H = 128, GRU H = 160: whole 32-column panels, weights worth a second
 * thread), where a result written over what the other task reads would change it. Then the runs
 * of steps (kern_fast_lstm_seq, kern_fast_gru_seq: three steps in one call): the same bits as the
 * cell kernel called step by step, with separate outputs, with c1 over c0 (written in place),
 * and with outputs over inputs that later steps still read (staged through scratch). Prints `N
 * passed, N failed`. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fast/fast.h"
#include "kernels/fast/gemm.h"
#include "kernels/kernel.h"

enum { HL = 128, HG = 160, HMAX = 160 };
static int64_t H; /* the current cell's hidden size */

static int n_pass, n_fail;

static DLTensor tensor(float *data, int64_t *shape, int64_t d0, int64_t d1) {
    shape[0] = d0, shape[1] = d1;
    return (DLTensor){.data = data,
                      .device = {kDLCPU, 0},
                      .ndim = 2,
                      .dtype = k_dl_dtype(RLY_DTYPE_F32),
                      .shape = shape};
}

/* Where the outputs go: at[i] (H floats each). */
enum { MAX_OUT = 8 };
typedef struct Place {
    float *at[MAX_OUT];
    DLTensor t[MAX_OUT];
    int64_t shape[MAX_OUT][2];
} Place;

static int place_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    Place *p = kc->rt;
    if (dt != RLY_DTYPE_F32 || ndim != 2 || shape[0] != 1 || shape[1] != H) return -1;
    p->t[i] = tensor(p->at[i], p->shape[i], 1, H);
    kc->out[i] = &p->t[i];
    return 0;
}

/* The cell on inputs in[0..n_in) (copies: an output may overwrite one), results to place->at. */
static int run_cell(bool gru, float *const *in, SupPool *pool, Place *place) {
    int64_t shapes[4][2];
    DLTensor t[4];
    int n_in = 4;
    if (gru) {
        t[0] = tensor(in[0], shapes[0], 1, H);     /* h */
        t[1] = tensor(in[1], shapes[1], 3 * H, H); /* R */
        t[2] = tensor(in[2], shapes[2], 1, 3 * H); /* x */
        t[3] = tensor(in[3], shapes[3], 1, H);     /* bn */
    } else {
        t[0] = tensor(in[0], shapes[0], 1, H);     /* h */
        t[1] = tensor(in[1], shapes[1], 4 * H, H); /* R */
        t[2] = tensor(in[2], shapes[2], 1, 4 * H); /* xp */
        t[3] = tensor(in[3], shapes[3], 1, H);     /* c */
    }
    const DLTensor *ins[4] = {&t[0], &t[1], &t[2], &t[3]};
    int64_t lstm_gates[4] = {0, 2, 3, 1}, gru_gates[3] = {0, 1, 2};
    double fl[4] = {0, 2, 3, 1};
    KAttr at = {.name = "gates",
                .kind = KA_INTS,
                .n = gru ? 3 : 4,
                .ints = gru ? gru_gates : lstm_gates,
                .floats = fl};
    uint32_t start[4] = {0, 1, 2, 3}, len[4] = {1, 1, 1, 1};
    uint8_t tup[4] = {0};
    DLTensor *outs[2] = {NULL, NULL};
    char err[256] = "";
    KCall kc = {.op = gru ? "gru_cell" : "lstm_cell",
                .attrs = &at,
                .n_attrs = 1,
                .n_args = (uint32_t)n_in,
                .arg_start = start,
                .arg_len = len,
                .arg_tuple = tup,
                .in = ins,
                .n_in = (uint32_t)n_in,
                .out = outs,
                .n_out = gru ? 1 : 2,
                .out_tuple = !gru,
                .alloc = place_out,
                .rt = place,
                .err = err,
                .err_cap = sizeof err,
                .pool = pool};
    int rc = k_call_result(&kc, gru ? kern_fast_gru_cell(&kc) : kern_fast_lstm_cell(&kc));
    k_call_release(&kc);
    if (rc != 0) fprintf(stderr, "cell: %s\n", err);
    return rc;
}

static void check(bool ok, const char *what, const char *how) {
    if (ok) {
        n_pass++;
    } else {
        n_fail++;
        fprintf(stderr, "FAIL: %s (%s)\n", what, how);
    }
}

static float *fill(size_t n, uint32_t seed) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 0.5f;
    }
    return p;
}

/* A fresh copy of the inputs (sizes n[0..4)). */
static void copy_in(float *const *src, const size_t *n, float **dst) {
    for (int i = 0; i < 4; i++) {
        dst[i] = malloc(n[i] * sizeof(float));
        memcpy(dst[i], src[i], n[i] * sizeof(float));
    }
}

static void free_in(float **p) {
    for (int i = 0; i < 4; i++)
        free(p[i]);
}

/* Output placements: which input (0..3) and float offset each output takes, or -1: its own. */
typedef struct Case {
    const char *what;
    int in[2];
    size_t off[2];
} Case;

static void run_cases(bool gru, SupPool *pool, const char *how) {
    H = gru ? HG : HL;
    size_t h = (size_t)H, n[4] = {h, (size_t)(gru ? 3 : 4) * h * h, (size_t)(gru ? 3 : 4) * h, h};
    float *base[4];
    for (int i = 0; i < 4; i++)
        base[i] = fill(n[i], 7u + 31u * (uint32_t)i + (gru ? 1000u : 0u));
    /* the separate run */
    float *in[4], want[2][HMAX];
    copy_in(base, n, in);
    Place p = {.at = {want[0], want[1]}};
    check(run_cell(gru, in, pool, &p) == 0, gru ? "gru separate" : "lstm separate", how);
    free_in(in);
    static const Case lstm_cases[] = {
        {"lstm h2 over h", {0, -1}, {0, 0}},
        {"lstm h2 over xp, half a gate in", {2, -1}, {HL + HL / 2, 0}},
        {"lstm c2 over c", {-1, 3}, {0, 0}},
        {"lstm c2 over h", {-1, 0}, {0, 0}},
        {"lstm h2 over c, c2 over h", {3, 0}, {0, 0}},
    };
    static const Case gru_cases[] = {
        {"gru h2 over h", {0, -1}, {0, 0}},
        {"gru h2 over x, half a gate in", {2, -1}, {HG + HG / 2, 0}},
        {"gru h2 over bn", {3, -1}, {0, 0}},
    };
    const Case *cs = gru ? gru_cases : lstm_cases;
    size_t nc = gru ? sizeof gru_cases / sizeof *gru_cases : sizeof lstm_cases / sizeof *lstm_cases;
    for (size_t k = 0; k < nc; k++) {
        copy_in(base, n, in);
        float own[2][HMAX];
        Place q = {.at = {own[0], own[1]}};
        for (int o = 0; o < 2; o++)
            if (cs[k].in[o] >= 0) q.at[o] = in[cs[k].in[o]] + cs[k].off[o];
        bool ok = run_cell(gru, in, pool, &q) == 0 &&
                  memcmp(q.at[0], want[0], h * sizeof(float)) == 0 &&
                  (gru || memcmp(q.at[1], want[1], h * sizeof(float)) == 0);
        check(ok, cs[k].what, how);
        free_in(in);
    }
    for (int i = 0; i < 4; i++)
        free(base[i]);
}

/* ---- runs of steps (kern_fast_lstm_seq, kern_fast_gru_seq) ------------------------------------
 *
 * A run of STEPS steps against the cell kernel called step by step (the same bits), and with
 * its outputs placed over its inputs (staged through scratch) or c1 over c0 (allowed in place). */

enum { STEPS = 3 };

/* The run on in[0..n_in) (h0, R, c0 or bn, then the steps' xp or x), results to place->at. */
static int run_seq(bool gru, bool bn, float *const *in, SupPool *pool, Place *place) {
    uint32_t fixed = gru ? (bn ? 3 : 2) : 3, n_in = fixed + STEPS;
    int64_t shapes[3 + STEPS][2];
    DLTensor t[3 + STEPS];
    int64_t G = gru ? 3 : 4;
    t[0] = tensor(in[0], shapes[0], 1, H);
    t[1] = tensor(in[1], shapes[1], G * H, H);
    if (fixed == 3) t[2] = tensor(in[2], shapes[2], 1, H);
    for (uint32_t k = 0; k < STEPS; k++)
        t[fixed + k] = tensor(in[fixed + k], shapes[fixed + k], 1, G * H);
    const DLTensor *ins[3 + STEPS];
    uint32_t start[3 + STEPS], len[3 + STEPS];
    uint8_t tup[3 + STEPS] = {0};
    for (uint32_t i = 0; i < n_in; i++)
        ins[i] = &t[i], start[i] = i, len[i] = 1;
    int64_t lstm_gates[4] = {0, 2, 3, 1}, gru_gates[3] = {0, 1, 2};
    double fl[4] = {0, 2, 3, 1};
    KAttr at[2] = {{.name = "gates",
                    .kind = KA_INTS,
                    .n = gru ? 3 : 4,
                    .ints = gru ? gru_gates : lstm_gates,
                    .floats = fl},
                   {.name = "steps", .kind = KA_INT, .i = STEPS, .f = STEPS}};
    uint32_t n_out = gru ? STEPS : 2 * STEPS;
    DLTensor *outs[MAX_OUT] = {NULL};
    char err[256] = "";
    KCall kc = {.op = gru ? "gru_run" : "lstm_run",
                .attrs = at,
                .n_attrs = 2,
                .n_args = n_in,
                .arg_start = start,
                .arg_len = len,
                .arg_tuple = tup,
                .in = ins,
                .n_in = n_in,
                .out = outs,
                .n_out = n_out,
                .out_tuple = true,
                .alloc = place_out,
                .rt = place,
                .err = err,
                .err_cap = sizeof err,
                .pool = pool};
    int rc = k_call_result(&kc, gru ? kern_fast_gru_seq(&kc) : kern_fast_lstm_seq(&kc));
    k_call_release(&kc);
    if (rc != 0) fprintf(stderr, "run: %s\n", err);
    return rc;
}

static void run_seq_cases(bool gru, SupPool *pool, const char *how) {
    H = gru ? HG : HL;
    bool bn = gru;
    uint32_t fixed = gru ? (bn ? 3 : 2) : 3, n_in = fixed + STEPS, n_out = gru ? STEPS : 2 * STEPS;
    size_t h = (size_t)H, G = gru ? 3 : 4, n[3 + STEPS];
    n[0] = h, n[1] = G * h * h, n[2] = h;
    for (uint32_t k = 0; k < STEPS; k++)
        n[fixed + k] = G * h;
    float *base[3 + STEPS];
    for (uint32_t i = 0; i < n_in; i++)
        base[i] = fill(n[i], 101u + 17u * i + (gru ? 1000u : 0u));
    /* step by step on the cell kernel */
    float want[MAX_OUT][HMAX];
    float hc[2][HMAX];
    memcpy(hc[0], base[0], h * sizeof(float));
    if (!gru) memcpy(hc[1], base[2], h * sizeof(float));
    bool ok = true;
    for (uint32_t k = 0; k < STEPS; k++) {
        float *in[4] = {hc[0], base[1], base[fixed + k], gru ? base[2] : hc[1]};
        float *cin[4];
        size_t cn[4] = {h, n[1], G * h, h};
        copy_in(in, cn, cin);
        Place p = {.at = {want[gru ? k : 2 * k], gru ? hc[1] : want[2 * k + 1]}};
        ok = ok && run_cell(gru, cin, pool, &p) == 0;
        free_in(cin);
        memcpy(hc[0], want[gru ? k : 2 * k], h * sizeof(float));
        if (!gru) memcpy(hc[1], want[2 * k + 1], h * sizeof(float));
    }
    check(ok, gru ? "gru steps" : "lstm steps", how);
    /* placements: output i over input in[i] at off[i] (-1: its own buffer) */
    typedef struct SeqCase {
        const char *what;
        int in[MAX_OUT];
        size_t off[MAX_OUT];
    } SeqCase;
    static const SeqCase lstm_cases[] = {
        {"lstm run, separate outputs", {-1, -1, -1, -1, -1, -1}, {0}},
        {"lstm run, c1 over c0", {-1, 2, -1, -1, -1, -1}, {0}},
        {"lstm run, h1 over the last xp", {3 + STEPS - 1, -1, -1, -1, -1, -1}, {HL / 2}},
        {"lstm run, h3 over h0, c2 over c0", {-1, -1, -1, 2, 0, -1}, {0}},
    };
    static const SeqCase gru_cases[] = {
        {"gru run, separate outputs", {-1, -1, -1}, {0}},
        {"gru run, h1 over the last x", {3 + STEPS - 1, -1, -1}, {HG / 2}},
        {"gru run, h1 over h0, h2 over bn", {0, 2, -1}, {0}},
    };
    const SeqCase *cs = gru ? gru_cases : lstm_cases;
    size_t nc = gru ? sizeof gru_cases / sizeof *gru_cases : sizeof lstm_cases / sizeof *lstm_cases;
    for (size_t c = 0; c < nc; c++) {
        float *in[3 + STEPS];
        for (uint32_t i = 0; i < n_in; i++) {
            in[i] = malloc(n[i] * sizeof(float));
            memcpy(in[i], base[i], n[i] * sizeof(float));
        }
        float own[MAX_OUT][HMAX];
        Place q = {0};
        for (uint32_t o = 0; o < n_out; o++)
            q.at[o] = cs[c].in[o] >= 0 ? in[cs[c].in[o]] + cs[c].off[o] : own[o];
        bool same = run_seq(gru, bn, in, pool, &q) == 0;
        for (uint32_t o = 0; same && o < n_out; o++)
            same = memcmp(q.at[o], want[o], h * sizeof(float)) == 0;
        check(same, cs[c].what, how);
        for (uint32_t i = 0; i < n_in; i++)
            free(in[i]);
    }
    for (uint32_t i = 0; i < n_in; i++)
        free(base[i]);
}

int main(void) {
    SupPool *pool2 = sup_pool_new(2);
    SupIsa top = sup_isa_detected();
    for (int l = 0; l <= (int)top; l++) {
        sup_isa_force((SupIsa)l);
        for (int threads = 1; threads <= 2; threads++) {
            char how[64];
            snprintf(how, sizeof how, "%s, %d thread(s)", sup_isa_name((SupIsa)l), threads);
            run_cases(false, threads == 2 ? pool2 : NULL, how);
            run_cases(true, threads == 2 ? pool2 : NULL, how);
            run_seq_cases(false, threads == 2 ? pool2 : NULL, how);
            run_seq_cases(true, threads == 2 ? pool2 : NULL, how);
        }
    }
    sup_isa_force(top);
    sup_pool_free(pool2);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail != 0;
}
