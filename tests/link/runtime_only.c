/* runtime_only.c - a program linked ONLY against librly_runtime (include/rly/rly_runtime.h):
 * it proves that the deployable runtime loads and runs an executable without any compiler code.
 * Driven by runtime_only.sh:
 *   runtime_only gen DIR                 write the inputs x.npy, y.npy (fixed values)
 *   runtime_only check EXE.rlyx REF.npz NAME=IN.npy ...
 *                                        bind each input (from its .npy), run, compare every
 *                                        output (by name) with REF.npz, written by
 *                                        `rly run --engine interp --output`; then run the
 *                                        session API's error paths and the strided, misaligned
 *                                        and aliased-input cases against the same reference,
 *                                        and sessions of the executable on 4 threads at once.
 * The .npy and (stored) .npz readers here are this test's own: the runtime's are internal.
 * Prints `N passed, N failed`. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rly/rly_runtime.h"

static int n_pass, n_fail;

static void check(bool ok, const char *what, const char *detail) {
    if (ok) {
        n_pass++;
    } else {
        n_fail++;
        printf("FAIL %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    }
}

/* ---- a minimal .npy reader and writer (little-endian, C order, float32/int64/bool) -------- */

typedef struct Arr {
    char name[256];
    char descr[8]; /* "<f4", "<i8", "|b1" */
    int ndim;
    int64_t shape[8];
    size_t nbytes;
    unsigned char *data; /* malloc'ed */
} Arr;

static bool parse_npy(const unsigned char *p, size_t n, Arr *a) {
    if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0) return false;
    size_t hl, off;
    if (p[6] == 1) {
        hl = (size_t)p[8] | (size_t)p[9] << 8;
        off = 10;
    } else {
        if (n < 12) return false;
        hl = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
        off = 12;
    }
    if (off + hl > n) return false;
    char hdr[1024];
    if (hl >= sizeof hdr) return false;
    memcpy(hdr, p + off, hl);
    hdr[hl] = '\0';
    const char *d = strstr(hdr, "'descr': '");
    const char *s = strstr(hdr, "'shape': (");
    if (d == NULL || s == NULL || strstr(hdr, "'fortran_order': False") == NULL) return false;
    snprintf(a->descr, sizeof a->descr, "%.3s", d + 10);
    a->ndim = 0;
    for (const char *q = s + 10; *q && *q != ')';) {
        if (*q >= '0' && *q <= '9') {
            if (a->ndim == 8) return false;
            a->shape[a->ndim++] = strtoll(q, (char **)&q, 10);
        } else {
            q++;
        }
    }
    a->nbytes = n - off - hl;
    a->data = aligned_alloc(64, (a->nbytes + 63) / 64 * 64 + 64); /* so inputs are zero-copy */
    memcpy(a->data, p + off + hl, a->nbytes);
    return true;
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(len > 0 ? (size_t)len : 1);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

static uint32_t rd(const unsigned char *p, int bytes) {
    uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The members of a stored (uncompressed) .npz, as rly writes it; returns the count. */
static int read_npz(const char *path, Arr *out, int cap) {
    size_t n = 0;
    unsigned char *z = read_all(path, &n);
    if (z == NULL) return -1;
    int k = 0;
    size_t pos = 0;
    while (pos + 30 <= n && rd(z + pos, 4) == 0x04034b50u && k < cap) {
        uint32_t method = rd(z + pos + 8, 2), csize = rd(z + pos + 18, 4);
        uint32_t nlen = rd(z + pos + 26, 2), xlen = rd(z + pos + 28, 2);
        size_t data = pos + 30 + nlen + xlen;
        if (method != 0 || data + csize > n || nlen < 5) break;
        Arr *a = &out[k];
        memset(a, 0, sizeof *a);
        snprintf(a->name, sizeof a->name, "%.*s", (int)(nlen - 4), (const char *)z + pos + 30);
        if (!parse_npy(z + data, csize, a)) break;
        k++;
        pos = data + csize;
    }
    free(z);
    return k;
}

static void write_npy_f32(const char *path, int ndim, const int64_t *shape, const float *v) {
    char hdr[128];
    int len = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        len += snprintf(hdr + len, sizeof hdr - (size_t)len, "%lld,%s", (long long)shape[d],
                        d + 1 < ndim ? " " : "");
        n *= (size_t)shape[d];
    }
    len += snprintf(hdr + len, sizeof hdr - (size_t)len, "), }");
    while ((10 + len + 1) % 64 != 0)
        hdr[len++] = ' ';
    hdr[len++] = '\n';
    FILE *f = fopen(path, "wb");
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)len, 0};
    fwrite(pre, 1, 10, f);
    fwrite(hdr, 1, (size_t)len, f);
    fwrite(v, sizeof *v, n, f);
    fclose(f);
}

/* ---- checks ---------------------------------------------------------------------------------- */

static DLTensor dl_of(Arr *a) {
    DLTensor t = {.data = a->data, .device = {kDLCPU, 0}, .ndim = a->ndim, .shape = a->shape};
    if (strcmp(a->descr, "<f4") == 0) t.dtype = (DLDataType){kDLFloat, 32, 1};
    if (strcmp(a->descr, "<f8") == 0) t.dtype = (DLDataType){kDLFloat, 64, 1};
    if (strcmp(a->descr, "<i8") == 0) t.dtype = (DLDataType){kDLInt, 64, 1};
    if (strcmp(a->descr, "<i4") == 0) t.dtype = (DLDataType){kDLInt, 32, 1};
    if (strcmp(a->descr, "|b1") == 0) t.dtype = (DLDataType){kDLBool, 8, 1};
    return t;
}

/* Compare a session output with a reference array: dtype, shape, values (float: 1e-5). */
static bool same(const DLTensor *got, const Arr *want, char *why, size_t cap) {
    DLTensor w = dl_of((Arr *)want);
    if (got->dtype.code != w.dtype.code || got->dtype.bits != w.dtype.bits) {
        snprintf(why, cap, "dtype code %u bits %u, want %s", got->dtype.code, got->dtype.bits,
                 want->descr);
        return false;
    }
    if (got->ndim != want->ndim) {
        snprintf(why, cap, "rank %d, want %d", got->ndim, want->ndim);
        return false;
    }
    size_t n = 1;
    for (int d = 0; d < got->ndim; d++) {
        if (got->shape[d] != want->shape[d]) {
            snprintf(why, cap, "dim %d is %lld, want %lld", d, (long long)got->shape[d],
                     (long long)want->shape[d]);
            return false;
        }
        n *= (size_t)got->shape[d];
    }
    if (got->strides != NULL) {
        snprintf(why, cap, "an output view has strides");
        return false;
    }
    const unsigned char *g = (const unsigned char *)got->data + got->byte_offset;
    size_t es = (size_t)got->dtype.bits / 8;
    for (size_t i = 0; i < n; i++) {
        bool ok;
        if (got->dtype.code == kDLFloat && es == 4) {
            float a, b;
            memcpy(&a, g + i * 4, 4);
            memcpy(&b, want->data + i * 4, 4);
            ok = fabsf(a - b) <= 1e-5f + 1e-5f * fabsf(b);
        } else {
            ok = memcmp(g + i * es, want->data + i * es, es) == 0;
        }
        if (!ok) {
            snprintf(why, cap, "element %zu differs", i);
            return false;
        }
    }
    return true;
}

/* Compare every output of a successful run with the reference (by output name). */
static void compare_outputs(rly_session *s, Arr *ref, int n_ref, const char *what) {
    int n_out = rly_session_num_outputs(s);
    char label[512], why[256];
    snprintf(label, sizeof label, "%s: %d outputs, reference %d", what, n_out, n_ref);
    check(n_out == n_ref, label, NULL);
    for (int k = 0; k < n_out; k++) {
        const char *nm = rly_session_output_name(s, k);
        const Arr *want = NULL;
        for (int j = 0; j < n_ref; j++)
            if (nm && strcmp(ref[j].name, nm) == 0) want = &ref[j];
        const DLTensor *got = NULL;
        snprintf(label, sizeof label, "%s: output %d '%s'", what, k, nm ? nm : "(null)");
        if (want == NULL) {
            check(false, label, "no reference array of that name");
            continue;
        }
        if (rly_session_get_output(s, k, &got) != RLY_STATUS_OK) {
            check(false, label, rly_last_error());
            continue;
        }
        bool ok = same(got, want, why, sizeof why);
        check(ok, label, ok ? NULL : why);
    }
}

/* ---- sessions of one executable on several threads at once -------------------------------- */

enum { CONC_THREADS = 4, CONC_RUNS = 40 };
typedef struct Conc {
    rly_executable *exe;
    Arr *in, *ref;
    int n_in, n_ref, threads; /* kernel threads of each session */
    int fails;                /* runs whose outputs differ from the reference, or failed */
    char why[256];
} Conc;

static void *conc_main(void *arg) {
    Conc *c = arg;
    rly_session *s = NULL;
    rly_session_options so = {.threads = c->threads, .max_memory = 1u << 30};
    if (rly_session_new(c->exe, &so, &s) != RLY_STATUS_OK) {
        c->fails = CONC_RUNS;
        snprintf(c->why, sizeof c->why, "session: %s", rly_last_error());
        return NULL;
    }
    for (int i = 0; i < c->n_in; i++) {
        DLTensor t = dl_of(&c->in[i]);
        if (rly_session_set_input(s, c->in[i].name, &t) != RLY_STATUS_OK) c->fails++;
    }
    for (int r = 0; r < CONC_RUNS; r++) {
        if (rly_session_run(s) != RLY_STATUS_OK) {
            c->fails++;
            snprintf(c->why, sizeof c->why, "run: %s", rly_last_error());
            continue;
        }
        for (int k = 0; k < rly_session_num_outputs(s); k++) {
            const char *nm = rly_session_output_name(s, k);
            const DLTensor *got = NULL;
            const Arr *want = NULL;
            for (int j = 0; j < c->n_ref; j++)
                if (nm && strcmp(c->ref[j].name, nm) == 0) want = &c->ref[j];
            if (want == NULL || rly_session_get_output(s, k, &got) != RLY_STATUS_OK ||
                !same(got, want, c->why, sizeof c->why))
                c->fails++;
        }
    }
    rly_session_free(s);
    return NULL;
}

/* CONC_THREADS threads each make a session of exe (kernel threads 1 and 2 alternating) and run
 * it CONC_RUNS times against the reference while the others do the same. */
static void concurrent_sessions(rly_executable *exe, Arr *in, int n_in, Arr *ref, int n_ref) {
    Conc c[CONC_THREADS];
    pthread_t th[CONC_THREADS];
    for (int t = 0; t < CONC_THREADS; t++) {
        c[t] = (Conc){exe, in, ref, n_in, n_ref, 1 + t % 2, 0, ""};
        if (pthread_create(&th[t], NULL, conc_main, &c[t]) != 0) {
            check(false, "pthread_create", NULL);
            return;
        }
    }
    for (int t = 0; t < CONC_THREADS; t++) {
        pthread_join(th[t], NULL);
        char label[128];
        snprintf(label, sizeof label, "concurrent session %d: %d runs match the reference", t,
                 CONC_RUNS);
        check(c[t].fails == 0, label, c[t].fails ? c[t].why : NULL);
    }
}

static bool expect_error(rly_status st, const char *what, const char *needle) {
    char label[256];
    snprintf(label, sizeof label, "%s is an error mentioning '%s'", what, needle);
    bool ok = st != RLY_STATUS_OK && strstr(rly_last_error(), needle) != NULL;
    check(ok, label, ok ? NULL : rly_last_error());
    return ok;
}

static int cmd_check(int argc, char **argv) {
    const char *exe_path = argv[0], *ref_path = argv[1];
    Arr ref[32], in[16];
    int n_ref = read_npz(ref_path, ref, 32), n_in = 0;
    check(n_ref > 0, "the reference .npz reads", ref_path);
    for (int i = 2; i < argc && n_in < 16; i++) {
        char *eq = strchr(argv[i], '=');
        size_t n = 0;
        unsigned char *bytes = eq ? read_all(eq + 1, &n) : NULL;
        Arr *a = &in[n_in];
        memset(a, 0, sizeof *a);
        bool ok = bytes && parse_npy(bytes, n, a);
        free(bytes);
        check(ok, "an input .npy reads", argv[i]);
        if (!ok) break;
        snprintf(a->name, sizeof a->name, "%.*s", (int)(eq - argv[i]), argv[i]);
        n_in++;
    }

    rly_executable *exe = NULL;
    rly_session *s = NULL;
    check(rly_executable_load(exe_path, &exe) == RLY_STATUS_OK, "load", rly_last_error());
    if (exe == NULL) goto done;
    rly_session_options so = {.threads = 1, .max_memory = 1u << 30};
    check(rly_session_new(exe, &so, &s) == RLY_STATUS_OK, "session", rly_last_error());
    if (s == NULL) goto done;

    /* The interface: names and types. */
    check(rly_session_num_inputs(s) == n_in, "number of inputs", NULL);
    for (int i = 0; i < rly_session_num_inputs(s); i++) {
        rly_tensor_info info;
        const char *nm = rly_session_input_name(s, i);
        check(nm != NULL && rly_session_input_index(s, nm) == i, "input name and index", nm);
        check(rly_session_input_info(s, i, &info) == RLY_STATUS_OK && info.type != NULL,
              "input info", rly_last_error());
    }
    check(rly_session_input_name(s, 99) == NULL, "input name out of range is NULL", NULL);

    /* Errors before binding. */
    expect_error(rly_session_run(s), "a run with unbound inputs", "not set");
    const DLTensor *o = NULL;
    expect_error(rly_session_get_output(s, 0, &o), "an output before any run", "no outputs");
    expect_error(rly_session_get_output(s, 99, &o), "output 99", "no output 99");
    DLTensor t0 = dl_of(&in[0]);
    expect_error(rly_session_set_input(s, "no_such_input", &t0), "an unknown input",
                 "the inputs are");
    DLTensor wrong = t0;
    wrong.dtype = (DLDataType){kDLInt, 32, 1};
    expect_error(rly_session_set_input(s, in[0].name, &wrong), "a wrong dtype", "expected");
    int64_t bad_shape[8] = {7, 7, 7, 7, 7, 7, 7, 7};
    wrong = t0;
    wrong.shape = bad_shape;
    expect_error(rly_session_set_input(s, in[0].name, &wrong), "a wrong shape", "expected");
    wrong = t0;
    wrong.device.device_type = kDLCUDA;
    expect_error(rly_session_set_input(s, in[0].name, &wrong), "a GPU tensor", "CPU");
    wrong = t0;
    wrong.dtype.lanes = 4;
    expect_error(rly_session_set_input(s, in[0].name, &wrong), "a vector dtype", "lanes");
    expect_error(rly_session_set_input(NULL, in[0].name, &t0), "a NULL session", "NULL");

    /* Zero-copy run, twice (inputs stay bound), against the reference. */
    bool bound = true;
    for (int i = 0; i < n_in; i++) {
        DLTensor t = dl_of(&in[i]);
        bool ok = rly_session_set_input(s, in[i].name, &t) == RLY_STATUS_OK;
        check(ok, "set_input", rly_last_error());
        bound = bound && ok;
    }
    if (bound) {
        for (int rep = 0; rep < 2; rep++) {
            bool ok = rly_session_run(s) == RLY_STATUS_OK;
            check(ok, "run", rly_last_error());
            if (ok) compare_outputs(s, ref, n_ref, rep ? "second run" : "zero-copy run");
        }
        /* No output points into an input buffer (an output equal to an input is copied). */
        for (int k = 0; k < rly_session_num_outputs(s); k++) {
            const DLTensor *g = NULL;
            if (rly_session_get_output(s, k, &g) != RLY_STATUS_OK) continue;
            const unsigned char *p = (const unsigned char *)g->data + g->byte_offset;
            for (int i = 0; i < n_in; i++)
                check(!(p >= in[i].data && p < in[i].data + in[i].nbytes),
                      "an output does not alias an input buffer", in[i].name);
        }
    }

    /* What a run allocates is credited back: 5000 runs fit a 64 KiB memory limit (outputs of a
     * run are released, under the session's account, before the next). */
    if (bound) {
        rly_session *small = NULL;
        rly_session_options lim = {.max_memory = 64 * 1024};
        bool ok = rly_session_new(exe, &lim, &small) == RLY_STATUS_OK;
        for (int i = 0; ok && i < n_in; i++) {
            DLTensor t = dl_of(&in[i]);
            ok = rly_session_set_input(small, in[i].name, &t) == RLY_STATUS_OK;
        }
        int runs = 0;
        while (ok && runs < 5000 && rly_session_run(small) == RLY_STATUS_OK)
            runs++;
        check(ok && runs == 5000, "5000 runs under a 64 KiB limit", rly_last_error());
        rly_session_free(small);
    }

    /* The copying paths: a misaligned copy and a transposed (strided) view of each input give
     * the same results. */
    unsigned char *keep[16] = {0};
    int64_t strides[16][8];
    int64_t tshape[16][8];
    for (int i = 0; i < n_in; i++) {
        Arr *a = &in[i];
        size_t es = (size_t)dl_of(a).dtype.bits / 8;
        DLTensor t = dl_of(a);
        if (a->ndim == 2) { /* the transposed buffer, viewed back through strides */
            int64_t r = a->shape[0], c = a->shape[1];
            keep[i] = malloc(a->nbytes + 1);
            for (int64_t x = 0; x < r; x++)
                for (int64_t y = 0; y < c; y++)
                    memcpy(keep[i] + (size_t)(y * r + x) * es, a->data + (size_t)(x * c + y) * es,
                           es);
            t.data = keep[i];
            strides[i][0] = 1;
            strides[i][1] = r;
            t.strides = strides[i];
        } else { /* the same bytes one byte past an aligned address */
            keep[i] = malloc(a->nbytes + 65);
            unsigned char *p = keep[i] + (64 - (uintptr_t)keep[i] % 64) % 64 + 1;
            memcpy(p, a->data, a->nbytes);
            t.data = p;
        }
        memcpy(tshape[i], a->shape, sizeof a->shape);
        t.shape = tshape[i];
        check(rly_session_set_input(s, a->name, &t) == RLY_STATUS_OK, "set_input (copied)",
              rly_last_error());
    }
    for (int i = 0; i < n_in; i++) { /* copied at set_input: the caller's buffers may go */
        memset(keep[i], 0xff, in[i].nbytes);
        free(keep[i]);
    }
    if (rly_session_run(s) == RLY_STATUS_OK)
        compare_outputs(s, ref, n_ref, "copied inputs");
    else
        check(false, "run on copied inputs", rly_last_error());

    concurrent_sessions(exe, in, n_in, ref, n_ref);

done:
    rly_executable_free(exe); /* sessions keep it alive: freeing it first is allowed too */
    rly_session_free(s);
    for (int i = 0; i < n_ref; i++)
        free(ref[i].data);
    for (int i = 0; i < n_in; i++)
        free(in[i].data);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "gen") == 0) {
        char path[4096];
        float x[6], y[3];
        for (int i = 0; i < 6; i++)
            x[i] = (float)(i % 4) * 0.75f - 1.0f;
        for (int i = 0; i < 3; i++)
            y[i] = 0.5f * (float)i - 0.25f;
        int64_t xs[2] = {2, 3}, ys[1] = {3};
        snprintf(path, sizeof path, "%s/x.npy", argv[2]);
        write_npy_f32(path, 2, xs, x);
        snprintf(path, sizeof path, "%s/y.npy", argv[2]);
        write_npy_f32(path, 1, ys, y);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "check") == 0) return cmd_check(argc - 2, argv + 2);
    fprintf(stderr, "usage: runtime_only gen DIR | check EXE.rlyx REF.npz NAME=IN.npy ...\n");
    return 2;
}
