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
 * Prints per-operator counts of accepted and executed calls; closes with `N passed, N failed`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
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
static const char *const shapes[] = {
    "(2, 3)",       "(3)",    "()",        "(1, 3, 4, 4)",    "(2, 3, 4)", "(4)",
    "(1, 4, 4, 3)", "(2, 2)", "(3, 3, 3)", "(1, 2, 4, 4, 4)", "(1, 4, 6)", "(4, 3, 3, 3)"};

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
        sb_printf(sb, "Tensor[%s, %s]", shapes[next(RLY_ARRAY_LEN(shapes))],
                  dtypes[next(RLY_ARRAY_LEN(dtypes))]);
}

static void rand_int(StrBuf *sb) { sb_printf(sb, "%d", (int)next(5) - 1); }
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

/* One random call of op as a program. */
static void gen_program(const OpDef *op, StrBuf *sb) {
    StrBuf params = {0}, args = {0};
    uint32_t n_args = op->n_args == OP_VARIADIC ? 1 + next(3) : (uint32_t)op->n_args;
    uint32_t n_params = 0;
    const char *base_shape = shapes[next(RLY_ARRAY_LEN(shapes))];
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

int main(int argc, char **argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 400;
    if (argc > 2) rng = strtoull(argv[2], NULL, 0) | 1;
    size_t n_ops = op_count(), accepted_ops = 0, executed_ops = 0;
    long total_run = 0, total_ok = 0;
    for (size_t i = 0; i < n_ops; i++) {
        const OpDef *op = op_at(i);
        if (op->user_rel != NULL) continue;
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
                char *out = NULL;
                rly_status st = rly_module_run(m, &o, &out);
                if (st == RLY_STATUS_OK) {
                    ok++;
                } else {
                    const char *e = rly_last_error();
                    char want[128];
                    snprintf(want, sizeof want, "error: %s: ", op->name);
                    CHECK(strstr(e, "internal error") == NULL && strncmp(e, "test.rly:", 9) == 0 &&
                              strstr(e, want) != NULL,
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
