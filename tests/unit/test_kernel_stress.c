/* test_kernel_stress.c - every operator's reference kernel against its type relation, on random
 * calls. For each operator, TRIALS one-call programs are generated with small realistic argument
 * types (tensors of 8 dtypes and ranks 0-5, tuples of them) and random attribute values drawn
 * from each schema row's type (small integers, short lists, the listed strings, dtypes); every
 * program the type checker accepts is run through the interpreter on random inputs
 * (`--fill random`). Invariants, under ASan + UBSan in CI:
 *   - no crash, no undefined behaviour, no leak;
 *   - the run succeeds, or fails with a located runtime error ("test.rly:L:C: error: op: ...");
 *   - never an internal error: the interpreter reports one when a kernel's result disagrees with
 *     the type the relation inferred (dtype, rank or a static dim), or leaves a result unset.
 * Deterministic (fixed seed).   test_kernel_stress [TRIALS [SEED]]   default 400 trials per op.
 *
 * With --shapes the argument shapes are zero-sized with huge dims instead ((2^62, 0), (0, 2^62),
 * (1, 3, 0, 2^62 / 3), (2^31, 0, 2^31), ...: the shape limit in docs/eval.md admits them),
 * integer attributes are sometimes +-2^62, runs have a 256 MiB memory limit, and each run must
 * also finish within 20 s (a kernel must not loop over a dim of an empty tensor). Every operator is
 * also checked to reject an annotation past the limit: (2^63-1, 0), (2^62+1, 0) and (2^31, 2^31,
 * 2^31) are parse errors. test_kernel_stress --shapes [--cases FILE] [TRIALS [SEED]]   default 200
 * trials per op;
 * --cases also runs every accepted case of FILE (a tests/types/rel file) under the time limit.
 * RLY_STRESS_OP=NAME runs one operator; RLY_RUN_SECONDS=N changes the time limit.
 * Prints per-operator counts of accepted and executed calls; closes with `N passed, N failed`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "../rel_case.h"
#include "ops/ops.h"
#include "rly/rly.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static const char *const dtypes[] = {"float32", "float32", "float32", "int32", "int64",
                                     "float64", "float16", "int8",    "uint8", "bool"};
static const char *const small_shapes[] = {
    "(2, 3)",       "(3)",    "()",        "(1, 3, 4, 4)",    "(2, 3, 4)", "(4)",
    "(1, 4, 4, 3)", "(2, 2)", "(3, 3, 3)", "(1, 2, 4, 4, 4)", "(1, 4, 6)", "(4, 3, 3, 3)"};
/* --shapes: empty tensors, most with a dim at the limit (2^62, or two of 2^31), of ranks 1-5. */
#define H "4611686018427387904"
#define G "2147483648"
static const char *const huge_shapes[] = {"(0)",
                                          "(" H ", 0)",
                                          "(0, " H ")",
                                          "(1, 0, " H ")",
                                          "(0, 3)",
                                          "(1, 0, 4, 4)",
                                          "(" H ", 0, 1)",
                                          "(1, " H ", 0, 1)",
                                          "(1, 1, " H ", 0)",
                                          "(2, 0)",
                                          "(" G ", 0, " G ")",
                                          "(" H ", 1, 0)",
                                          "(0, " H ", 1, 1)",
                                          "(1, 1, 0, " H ", 1)",
                                          "(" H ")"};
#define N_SHAPES 15
_Static_assert(RLY_ARRAY_LEN(small_shapes) <= N_SHAPES && RLY_ARRAY_LEN(huge_shapes) == N_SHAPES,
               "shape pools");
static const char *const *shapes = small_shapes;
static uint32_t n_shapes = RLY_ARRAY_LEN(small_shapes);
static bool huge; /* --shapes */

/* --shapes: results of 2^31 elements and more are legitimate (a reduction of (2^31, 0, 2^31) over
 * its first two axes) but slow; the memory limit turns them into clean errors. */
#define SHAPES_MAX_MEMORY ((uint64_t)1 << 28)

/* A run that takes longer than this is a hang (--shapes; RLY_RUN_SECONDS overrides). */
static unsigned run_seconds = 20;
static const char *running_op;
static const StrBuf *running_text;
static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL: a run did not finish in time (a loop over a huge dim?): ";
    ssize_t r = write(2, msg, sizeof msg - 1);
    r = write(2, running_op, strlen(running_op));
    r = write(2, "\n", 1);
    if (running_text && running_text->data) r = write(2, running_text->data, running_text->len);
    (void)r;
    _exit(3);
}

/* A random tensor type; half of the time the program's base type, a quarter of the time a
 * scalar of the base dtype or of int32 (scales, zero points, indices), so that multi-argument
 * operators see agreeing arguments often enough to pass their relations. */
static void tensor_type(StrBuf *sb, const char *base_shape, const char *base_dt) {
    uint32_t k = next(8);
    if (k < 4)
        sb_printf(sb, "Tensor[%s, %s]", base_shape, base_dt);
    else if (k == 4)
        sb_printf(sb, "Tensor[(), %s]", base_dt);
    else if (k == 5)
        sb_puts(sb, next(2) ? "Tensor[(), int32]" : "Tensor[(), float32]");
    else
        sb_printf(sb, "Tensor[%s, %s]", shapes[next(n_shapes)],
                  dtypes[next(RLY_ARRAY_LEN(dtypes))]);
}

static void rand_int(StrBuf *sb) {
    if (huge && next(8) == 0)
        sb_puts(sb, next(2) ? H : "-" H);
    else
        sb_printf(sb, "%d", (int)next(5) - 1);
}
static void rand_float(StrBuf *sb) {
    static const char *const f[] = {"0.5f", "1f", "-1f", "2f", "0f", "0.25f"};
    sb_puts(sb, f[next(RLY_ARRAY_LEN(f))]);
}
static void rand_str(StrBuf *sb, const AttrSpec *sp) {
    static const char *const pool[] = {"NCHW", "NHWC", "OIHW", "HWIO", "NCW", "NCDHW", "", "sum"};
    if (sp->choices != NULL) { /* one of "a|b|c" */
        const char *c = sp->choices;
        uint32_t n = 1;
        for (const char *p = c; *p; p++)
            n += *p == '|';
        uint32_t k = next(n);
        while (k-- > 0)
            c = strchr(c, '|') + 1;
        const char *end = strchr(c, '|');
        sb_printf(sb, "\"%.*s\"", (int)(end ? (size_t)(end - c) : strlen(c)), c);
        return;
    }
    sb_printf(sb, "\"%s\"", pool[next(RLY_ARRAY_LEN(pool))]);
}
static void rand_list(StrBuf *sb, void (*item)(StrBuf *)) {
    uint32_t n = next(5);
    sb_puts(sb, "[");
    for (uint32_t i = 0; i < n; i++) {
        if (i) sb_puts(sb, ", ");
        item(sb);
    }
    sb_puts(sb, "]");
}

/* A random value for schema row sp; false to leave the attribute at its default. */
static bool rand_attr(StrBuf *sb, const AttrSpec *sp) {
    if (sp->dflt != NULL && next(2) == 0) return false;
    sb_printf(sb, ", %s=", sp->name);
    switch (sp->type) {
    case AT_INT: rand_int(sb); break;
    case AT_OPT_INT:
        if (next(3) == 0)
            sb_puts(sb, "None");
        else
            rand_int(sb);
        break;
    case AT_FLOAT: rand_float(sb); break;
    case AT_OPT_FLOAT:
        if (next(3) == 0)
            sb_puts(sb, "None");
        else
            rand_float(sb);
        break;
    case AT_BOOL: sb_puts(sb, next(2) ? "True" : "False"); break;
    case AT_STR: rand_str(sb, sp); break;
    case AT_DTYPE: sb_printf(sb, "\"%s\"", dtypes[next(RLY_ARRAY_LEN(dtypes))]); break;
    case AT_INTS: rand_list(sb, rand_int); break;
    case AT_OPT_INTS:
        if (next(3) == 0)
            sb_puts(sb, "None");
        else
            rand_list(sb, rand_int);
        break;
    case AT_FLOATS: rand_list(sb, rand_float); break;
    default: return false; /* AT_STRS, AT_ANY: keep the default */
    }
    return true;
}

/* --shapes: a small shape emptied, as the program's base shape: one dim becomes 0 and, most of
 * the time, another becomes as large as the shape limit allows ((1, 3, 4, 4) -> (1, 3, 0,
 * 2^62 / 3)), so that arguments still agree with each other as the relations want. */
static void empty_shape(const char *small, char *buf, size_t cap) {
    int64_t d[8];
    uint32_t n = 0;
    for (const char *p = small; *p && n < 8; p++)
        if (*p >= '0' && *p <= '9') {
            d[n++] = strtoll(p, NULL, 10);
            while (p[1] >= '0' && p[1] <= '9')
                p++;
        }
    if (n == 0) {
        snprintf(buf, cap, "(0)");
        return;
    }
    uint32_t z = next(n), h = next(n);
    d[z] = 0;
    if (h != z && next(4) != 0) {
        int64_t rest = 1;
        for (uint32_t i = 0; i < n; i++)
            if (i != h && d[i] != 0) rest *= d[i];
        d[h] = ((int64_t)1 << 62) / rest;
    }
    size_t len = (size_t)snprintf(buf, cap, "(");
    for (uint32_t i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, i ? ", %lld" : "%lld", (long long)d[i]);
    snprintf(buf + len, cap - len, ")");
}

/* One random call of op as a program. */
static void gen_program(const OpDef *op, StrBuf *sb) {
    StrBuf params = {0}, args = {0};
    uint32_t n_args = op->n_args == OP_VARIADIC ? 1 + next(3) : (uint32_t)op->n_args;
    uint32_t n_params = 0;
    const char *base_shape = shapes[next(n_shapes)];
    char emptied[160];
    if (huge && next(4) != 0) {
        empty_shape(small_shapes[next(RLY_ARRAY_LEN(small_shapes))], emptied, sizeof emptied);
        base_shape = emptied;
    }
    const char *base_dt = dtypes[next(RLY_ARRAY_LEN(dtypes))];
    for (uint32_t a = 0; a < n_args; a++) {
        if (a) sb_puts(&args, ", ");
        bool tuple = next(4) == 0;
        uint32_t fields = tuple ? 1 + next(3) : 1;
        if (tuple) sb_puts(&args, "(");
        for (uint32_t f = 0; f < fields; f++) {
            sb_printf(&params, "%s%%p%u: ", n_params ? ", " : "", n_params);
            tensor_type(&params, base_shape, base_dt);
            sb_printf(&args, "%s%%p%u", f ? ", " : "", n_params);
            n_params++;
        }
        if (tuple) sb_puts(&args, fields == 1 ? ",)" : ")");
    }
    StrBuf attrs = {0};
    if (op->attrs)
        for (const AttrSpec *sp = op->attrs; sp->name; sp++)
            rand_attr(&attrs, sp);
    sb_printf(sb, "#[version = \"0.0.5\"]\ndef @main(%s) {\n  %s(%s%s)\n}\n",
              params.len ? sb_cstr(&params) : "", op->name, args.len ? sb_cstr(&args) : "",
              attrs.len ? sb_cstr(&attrs) + (args.len ? 0 : 2) : "");
    sb_free(&params);
    sb_free(&args);
    sb_free(&attrs);
}

/* --cases FILE: every accepted case of a relation-suite file (tests/types/rel format: one
 * `op(ARGS) -> TYPE` per line, ARGS types and name=value attributes) runs on random inputs
 * under the time limit, with the same expectations as a random call. The file is
 * tests/types/rel/shapes.txt: zero-sized arguments with huge dims, one or more per operator, for
 * the operators random shapes seldom fit. */
/* --shapes: an input of 2^62 elements cannot be made; that is a clean error. */
static bool input_too_large(const char *e) {
    return strncmp(e, "cannot generate input", 21) == 0 &&
           (strstr(e, "too large") != NULL || strstr(e, "limit") != NULL);
}

static void run_cases(const char *path) {
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (f == NULL) return;
    char line[4096];
    int lineno = 0, n_cases = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        StrBuf text = {0};
        if (!rel_case_program(line, &text)) continue;
        rly_ctx *ctx;
        rly_ctx_new(&ctx);
        rly_module *m = NULL;
        bool typed = rly_module_parse(ctx, text.data, text.len, "test.rly", &m) == RLY_STATUS_OK &&
                     rly_module_infer(m) == RLY_STATUS_OK;
        CHECK(typed, "%s:%d: the case does not type-check:\n%s%s", path, lineno, sb_cstr(&text),
              rly_last_error());
        if (typed) {
            n_cases++;
            rly_run_options o = {
                .fill = RLY_FILL_RANDOM, .seed = (unsigned)lineno, .max_memory = SHAPES_MAX_MEMORY};
            char *out = NULL;
            running_op = line;
            running_text = &text;
            alarm(run_seconds);
            rly_status st = rly_module_run(m, &o, &out);
            alarm(0);
            const char *e = st == RLY_STATUS_OK ? "" : rly_last_error();
            CHECK(st == RLY_STATUS_OK || input_too_large(e) ||
                      (strstr(e, "internal error") == NULL && strncmp(e, "test.rly:", 9) == 0),
                  "%s:%d: a bad runtime error for\n%s\n%s", path, lineno, sb_cstr(&text), e);
            free(out);
        }
        rly_ctx_free(ctx);
        sb_free(&text);
    }
    fclose(f);
    printf("%s: %d cases ran\n", path, n_cases);
}

/* Annotations past the shape limit are parse errors, whatever the operator. */
static void check_rejected(const OpDef *op) {
    static const char *const bad[] = {"(9223372036854775807, 0)", "(4611686018427387905, 0)",
                                      "(0, 2147483648, 2147483648, 2147483648)"};
    for (size_t k = 0; k < RLY_ARRAY_LEN(bad); k++) {
        StrBuf text = {0};
        sb_printf(&text, HDR "def @main(%%x: Tensor[%s, float32]) {\n  %s(%%x)\n}\n", bad[k],
                  op->name);
        rly_ctx *ctx;
        rly_ctx_new(&ctx);
        rly_module *m = NULL;
        rly_status st = rly_module_parse(ctx, text.data, text.len, "test.rly", &m);
        CHECK(st != RLY_STATUS_OK && strstr(rly_last_error(), "test.rly:2:") != NULL &&
                  strstr(rly_last_error(), "too large") != NULL,
              "%s: the annotation %s was not rejected: %s", op->name, bad[k],
              st == RLY_STATUS_OK ? "accepted" : rly_last_error());
        rly_ctx_free(ctx);
        sb_free(&text);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--shapes") == 0) {
        huge = true;
        shapes = huge_shapes;
        n_shapes = N_SHAPES;
        signal(SIGALRM, on_alarm);
        if (getenv("RLY_RUN_SECONDS")) run_seconds = (unsigned)atoi(getenv("RLY_RUN_SECONDS"));
        argc--, argv++;
        if (argc > 2 && strcmp(argv[1], "--cases") == 0) {
            run_cases(argv[2]);
            argc -= 2, argv += 2;
        }
    }
    int trials = argc > 1 ? atoi(argv[1]) : huge ? 200 : 400;
    const char *only = getenv("RLY_STRESS_OP"); /* one operator, to reproduce a failure */
    if (argc > 2) rng = strtoull(argv[2], NULL, 0) | 1;
    size_t n_ops = op_count(), accepted_ops = 0, executed_ops = 0;
    long total_run = 0, total_ok = 0;
    for (size_t i = 0; i < n_ops; i++) {
        const OpDef *op = op_at(i);
        if (op->user_rel != NULL) continue;
        if (only != NULL && strcmp(only, op->name) != 0) continue;
        if (huge) check_rejected(op);
        int accepted = 0, ok = 0;
        for (int t = 0; t < trials; t++) {
            StrBuf text = {0};
            gen_program(op, &text);
            rly_ctx *ctx;
            rly_ctx_new(&ctx);
            rly_module *m = NULL;
            if (rly_module_parse(ctx, text.data, text.len, "test.rly", &m) == RLY_STATUS_OK &&
                rly_module_infer(m) == RLY_STATUS_OK) {
                accepted++;
                rly_run_options o = {.fill = RLY_FILL_RANDOM, .seed = (unsigned)t};
                if (huge) o.max_memory = SHAPES_MAX_MEMORY;
                char *out = NULL;
                running_op = op->name;
                running_text = &text;
                if (huge) alarm(run_seconds);
                rly_status st = rly_module_run(m, &o, &out);
                alarm(0);
                if (st == RLY_STATUS_OK) {
                    ok++;
                } else {
                    const char *e = rly_last_error();
                    char want[128];
                    snprintf(want, sizeof want, "error: %s: ", op->name);
                    CHECK((huge && input_too_large(e)) ||
                              (strstr(e, "internal error") == NULL &&
                               strncmp(e, "test.rly:", 9) == 0 && strstr(e, want) != NULL),
                          "%s: a bad runtime error for\n%s\n%s", op->name, sb_cstr(&text), e);
                }
                free(out);
            }
            rly_ctx_free(ctx);
            sb_free(&text);
        }
        total_run += accepted;
        total_ok += ok;
        accepted_ops += accepted > 0;
        executed_ops += ok > 0;
        printf("%-36s accepted %3d  ran %3d\n", op->name, accepted, ok);
    }
    printf("%zu operators: %zu had calls the type checker accepted, %zu ran at least one; %ld "
           "runs, %ld succeeded\n",
           n_ops, accepted_ops, executed_ops, total_run, total_ok);
    CHECK(total_run > 0, "no call was accepted");
    return check_summary();
}
