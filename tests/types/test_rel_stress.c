/* test_rel_stress.c - every operator's relation against hostile argument types and attribute
 * values: scalars, empty and huge dims (near 2^62), `?` and symbolic dims, high ranks, tuples,
 * every dtype; attributes at their defaults or replaced by extreme integers, empty and long
 * lists, unknown and listed strings. Deterministic (fixed seed), so failures reproduce.
 * Invariants (run under ASan + UBSan in CI): no crash and no undefined behaviour (e.g. signed
 * overflow in shape arithmetic); a relation on fully known arguments never defers; an error has a
 * message; a result is a type with no negative constant dims, within the shape limit (support.h,
 * "shapes": dims at most 2^62, and so the product of the nonzero ones), whatever the arguments
 * (op_relate refuses arguments past it, such as the INT64_MAX dims drawn here); every operator's
 * trials finish within OP_SECONDS (a relation must not loop over a dim).
 *   test_rel_stress [TRIALS [SEED]]     default 1000 trials per operator, the fixed seed
 * Closes with `N passed, N failed`. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "../check.h"
#include "ops/ops.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

#define BIG ((int64_t)1 << 62)
#define HALF ((int64_t)1 << 31)

/* All the trials of one operator must finish within this (a hang fails instead of stalling). */
#define OP_SECONDS 60
static const char *running_op = "";
static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL: the relation trials did not finish in time: ";
    ssize_t r = write(2, msg, sizeof msg - 1);
    r = write(2, running_op, strlen(running_op));
    r = write(2, "\n", 1);
    (void)r;
    _exit(3);
}

static Type *random_tensor(Ctx *ctx) {
    static const int64_t dims[] = {0,  0,   1,   1,         2,       3,   3,    4,   8,
                                   16, 224, BIG, INT64_MAX, DIM_ANY, BIG, HALF, HALF};
    static const rly_dtype dts[] = {RLY_DTYPE_F32, RLY_DTYPE_F32,  RLY_DTYPE_F32, RLY_DTYPE_I32,
                                    RLY_DTYPE_I64, RLY_DTYPE_BOOL, RLY_DTYPE_U8,  RLY_DTYPE_I8,
                                    RLY_DTYPE_F16, RLY_DTYPE_F64};
    uint32_t ndim = next(8) == 0 ? 6 + next(3) : next(6);
    int64_t shape[8];
    for (uint32_t i = 0; i < ndim; i++) {
        uint32_t k = next(RLY_ARRAY_LEN(dims) + 2);
        if (k < RLY_ARRAY_LEN(dims))
            shape[i] = dims[k];
        else
            shape[i] = ir_dim_sym(ctx, k & 1 ? "n" : "m", 1);
    }
    return ir_type_tensor(ctx, dts[next(RLY_ARRAY_LEN(dts))], ndim, shape);
}

/* Shapes real programs use, so that extreme attributes reach deep into the relations. */
static Type *realistic(Ctx *ctx) {
    static const struct {
        rly_dtype dt;
        uint32_t n;
        int64_t s[5];
    } pool[] = {
        {RLY_DTYPE_F32, 4, {1, 3, 8, 8}},
        {RLY_DTYPE_F32, 4, {4, 3, 3, 3}},
        {RLY_DTYPE_F32, 1, {4}},
        {RLY_DTYPE_F32, 4, {1, 4, 6, 6}},
        {RLY_DTYPE_F32, 2, {2, 3}},
        {RLY_DTYPE_F32, 2, {3, 4}},
        {RLY_DTYPE_F32, 3, {1, 8, 16}},
        {RLY_DTYPE_I32, 1, {3}},
        {RLY_DTYPE_F32, 0, {0}},
        {RLY_DTYPE_I32, 0, {0}},
        {RLY_DTYPE_F32, 5, {1, 2, 4, 4, 4}},
        {RLY_DTYPE_I8, 4, {1, 3, 8, 8}},
        {RLY_DTYPE_I64, 2, {2, 2}},
        {RLY_DTYPE_F32, 3, {2, 5, 6}},
    };
    uint32_t k = next(RLY_ARRAY_LEN(pool));
    return ir_type_tensor(ctx, pool[k].dt, pool[k].n, pool[k].s);
}

static Type *random_type(Ctx *ctx) {
    if (next(2)) return realistic(ctx);
    uint32_t k = next(10);
    if (k == 0) {
        Type *f[4];
        uint32_t n = next(4);
        for (uint32_t i = 0; i < n; i++)
            f[i] = random_tensor(ctx);
        return ir_type_tuple(ctx, n, f);
    }
    return random_tensor(ctx);
}

static AttrValue *random_int(Ctx *ctx) {
    static const int64_t v[] = {0,  1,    -1,  2,         3,         -3,        7,
                                64, -100, BIG, INT64_MAX, INT64_MIN, INT32_MAX, INT32_MIN};
    return ir_attr_int(ctx, v[next(RLY_ARRAY_LEN(v))], RLY_DTYPE_I64, SPAN_NONE);
}

static AttrValue *random_float(Ctx *ctx) {
    static const double v[] = {0, 1, -1, 0.5, 1e308, -1e308, 1e-300, 2.5};
    return ir_attr_float(ctx, v[next(RLY_ARRAY_LEN(v))], RLY_DTYPE_F32, SPAN_NONE);
}

static AttrValue *random_str(Ctx *ctx, const AttrSpec *sp) {
    static const char *const v[] = {"",        "bogus",  "NCHW",  "NHWC",      "OIHW",
                                    "HWIO",    "NCW",    "NCDHW", "NCHW4c",    "OIHW4i4o",
                                    "float32", "int8",   "int32", "ij,jk->ik", "...ij->...ji",
                                    "linear",  "a,b->ab"};
    if (sp->choices && next(2)) { /* one of the listed values */
        const char *c = sp->choices;
        uint32_t n = 1;
        for (const char *p = c; *p; p++)
            n += *p == '|';
        uint32_t k = next(n);
        while (k--)
            c = strchr(c, '|') + 1;
        const char *e = strchr(c, '|');
        return ir_attr_str(ctx, c, e ? (size_t)(e - c) : strlen(c), SPAN_NONE);
    }
    const char *s = v[next(RLY_ARRAY_LEN(v))];
    return ir_attr_str(ctx, s, strlen(s), SPAN_NONE);
}

static AttrValue *random_list(Ctx *ctx, AttrValue *(*item)(Ctx *)) {
    AttrValue *items[9];
    uint32_t n = next(10) == 0 ? 9 : next(5);
    for (uint32_t i = 0; i < n; i++)
        items[i] = item(ctx);
    return ir_attr_list(ctx, n, items, SPAN_NONE);
}

static AttrValue *random_value(Ctx *ctx, const AttrSpec *sp) {
    switch (sp->type) {
    case AT_INT: return random_int(ctx);
    case AT_FLOAT: return random_float(ctx);
    case AT_BOOL: return ir_attr_bool(ctx, next(2), SPAN_NONE);
    case AT_STR:
    case AT_DTYPE: return random_str(ctx, sp);
    case AT_INTS: return random_list(ctx, random_int);
    case AT_FLOATS: return random_list(ctx, random_float);
    case AT_OPT_INT: return next(3) ? random_int(ctx) : ir_attr_none(ctx, SPAN_NONE);
    case AT_OPT_INTS: return next(3) ? random_list(ctx, random_int) : ir_attr_none(ctx, SPAN_NONE);
    case AT_OPT_FLOAT: return next(3) ? random_float(ctx) : ir_attr_none(ctx, SPAN_NONE);
    case AT_STRS: {
        AttrValue *items[3];
        uint32_t n = next(4);
        for (uint32_t i = 0; i < n; i++)
            items[i] = random_str(ctx, sp);
        return ir_attr_list(ctx, n, items, SPAN_NONE);
    }
    case AT_ANY: return random_int(ctx);
    }
    return ir_attr_none(ctx, SPAN_NONE);
}

static bool dims_ok(Type *t) {
    if (t->kind == TYPE_TENSOR) {
        TensorType *tt = (TensorType *)t;
        for (uint32_t i = 0; i < tt->ndim; i++)
            if (tt->shape[i] < 0 && tt->shape[i] != DIM_ANY && !dim_is_sym(tt->shape[i]))
                return false;
        char why[128];
        return sup_shape_check(tt->ndim, tt->shape, true, why, sizeof why) == NULL;
    }
    if (t->kind == TYPE_TUPLE) {
        for (uint32_t i = 0; i < ((TupleType *)t)->n; i++)
            if (!dims_ok(((TupleType *)t)->fields[i])) return false;
        return true;
    }
    return false;
}

static void stress_op(const OpDef *op, int trials) {
    unsigned n_ok = 0, n_err = 0;
    for (int t = 0; t < trials; t++) {
        Ctx *ctx = ir_ctx_new();
        uint32_t n_args = op->n_args == OP_VARIADIC ? next(4) : (uint32_t)op->n_args;
        Type *args[16];
        for (uint32_t i = 0; i < n_args && i < 16; i++)
            args[i] = random_type(ctx);
        const char *keys[64];
        AttrValue *vals[64];
        uint32_t n_attrs = 0;
        for (uint32_t i = 0; i < op->n_attrs && n_attrs < 64; i++) {
            if (op->defaults[i] && next(3) != 0) continue; /* keep the default */
            keys[n_attrs] = ir_intern(ctx, op->attrs[i].name, strlen(op->attrs[i].name));
            vals[n_attrs++] = random_value(ctx, &op->attrs[i]);
        }
        const Attrs *attrs = ir_attrs_new(ctx, n_attrs, keys, vals);
        const AttrValue *bound[64];
        StrBuf msg = {0};
        Span where;
        if (op_bind_attrs(op, attrs, bound, &msg, &where)) {
            Type *out = NULL;
            int err_arg = -1;
            RelResult r = op_relate(ctx, op, bound, n_args, args, &out, &msg, &err_arg);
            CHECK(r != REL_DEFER, "%s: deferred on known arguments (trial %d)", op->name, t);
            if (r == REL_ERROR) {
                CHECK(msg.len > 0, "%s: error without a message (trial %d)", op->name, t);
                n_err++;
            } else if (r == REL_OK) {
                CHECK(out && dims_ok(out),
                      "%s: result with a negative dim or past the shape limit (trial %d)", op->name,
                      t);
                n_ok++;
            }
        } else {
            CHECK(msg.len > 0, "%s: attribute error without a message", op->name);
        }
        sb_free(&msg);
        ir_ctx_free(ctx);
    }
    (void)n_ok;
    (void)n_err;
}

int main(int argc, char **argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 1000;
    if (argc > 2) rng ^= strtoull(argv[2], NULL, 10) * 0x2545f4914f6cdd1dull;
    signal(SIGALRM, on_alarm);
    for (size_t i = 0; i < op_count(); i++) {
        running_op = op_at(i)->name;
        alarm(OP_SECONDS);
        stress_op(op_at(i), trials);
        alarm(0);
    }
    return check_summary();
}
