/* fuzz_kernels.c - libFuzzer target for the reference kernels (src/kernels/ref) called the way a
 * hostile executable file can call them (docs/vm.md, "Kernels and untrusted executables").
 *
 * An input is a recipe for one call: two bytes give the operator (an id modulo OP_ID_COUNT), the
 * rest either spells the call out (an "explicit" recipe, byte 2 'X': see "explicit recipes"
 * below; the seeds made from the relation suite's accepted calls are such) or, any other byte 2,
 * is read one decision per byte (bytes past the end read as 0):
 *   - the attribute rows: the NAMES of the operator's schema (src/ops), each row left out, given
 *     its schema default, a value of its schema type (mostly small, often what the relation would
 *     accept), an extreme value (+-2^62, INT64_MIN, NaN, inf, a list longer than any rank), or a
 *     row of another kind; sometimes extra rows (unknown names, a schema name twice) or the rows
 *     reversed; KA_INTS rows carry their ints and perhaps floats, KA_FLOATS their floats and
 *     perhaps ints, as the .rlyx loader allows;
 *   - the arguments: as many as the operator takes, or fewer or more; each a tensor or a tuple of
 *     0-3 tensors; tensors of any of the 13 dtypes, rank 0-6, small dims including 0 (most
 *     sharing a base shape and dtype, so that calls get past the first checks), or an empty
 *     tensor with a dim near the shape limit; data from a PRNG seeded by the recipe: small
 *     numbers, indices, extremes, NaN, raw bits;
 *   - the result structure: a single result or a tuple of 1-5 (the file says which), sometimes a
 *     preallocated result of some shape (a VM plan's buffer).
 * Arguments are laid out as the VM lays them out (src/runtime/vm.c, run_call): ARG_PAD more
 * argument entries name a 0-d padding tensor whose shape reads as zeros. Input data, shape arrays
 * and results are allocated at their exact sizes, so ASan sees any access past them; the
 * allocator refuses results over a limit (64 MiB; the smoke driver uses less).
 *
 * Invariants (a violation aborts under libFuzzer; ASan + UBSan catch the rest):
 *   - the kernel returns 0 or -1, and -1 comes with a message (after k_call_result, which turns
 *     a recorded attribute problem into the call's error);
 *   - inputs are not written (their bytes are the same after the call);
 *   - no crash, no undefined behaviour, no leak, no hang (libFuzzer -timeout; the smoke driver's
 *     alarm).
 *
 * Built as the libFuzzer binary `fuzz_kernels` (RLY_FUZZ), into `fuzz_replay_kernels` (every
 * preset; replays tests/fuzz/corpus/kernels) and, with FUZZ_KERNELS_SMOKE, into
 * `fuzz_kernels_smoke`, a deterministic driver:
 *   fuzz_kernels_smoke [--mutate DIR [MUTANTS]] [PER_OP [SEED]]
 * runs PER_OP random recipes per operator (default 300), then every file of DIR and MUTANTS
 * mutations of each (default 20); RLY_SEED=N replays a seed, RLY_FUZZ_OP=NAME runs one operator,
 * RLY_FUZZ_LAST=FILE writes each recipe there before running it (a crash leaves it behind).
 *   fuzz_kernels_smoke --write-seeds REL_DIR OUT_DIR [PER_OP]
 * writes an explicit recipe per accepted case of the relation files in REL_DIR (tests/types/rel;
 * small static tensors only) and PER_OP random recipes per operator (the corpus's seeds). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kernels/fast/fast.h"
#include "kernels/kernel.h"
#include "ops/ops.h"

bool fuzz_keep_going;
size_t fuzz_n_failures;

static void violated(const char *op, const char *what, const char *detail) {
    fprintf(stderr, "fuzz_kernels: invariant violated: %s: %s%s%s\n", op, what, detail ? ": " : "",
            detail ? detail : "");
    if (!fuzz_keep_going) abort();
    fuzz_n_failures++;
}

/* ---- the recipe reader ------------------------------------------------------------------------
 */

typedef struct Src {
    const uint8_t *p;
    size_t n, i;
} Src;

static uint32_t take(Src *s) { return s->i < s->n ? s->p[s->i++] : 0; }
static uint32_t pick(Src *s, uint32_t n) { return take(s) % n; }
static uint32_t take16(Src *s) { return take(s) | take(s) << 8; }

/* Tensor data comes from a PRNG, seeded by recipe bytes. */
static uint64_t prng_next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* ---- limits -----------------------------------------------------------------------------------
 */

enum {
    MAX_ARGS = 12,   /* arguments of a call, before the padding */
    ARG_PAD = 8,     /* as the VM: argument entries past n_args naming the padding tensor */
    MAX_IN = 40,     /* tensors */
    MAX_OUT = 6,     /* results */
    MAX_ROWS = 48,   /* attribute rows */
    MAX_ITEMS = 40,  /* items of a list attribute: more than any rank */
    MAX_RANK = 6,    /* of generated tensors */
    MAX_NUMEL = 1024 /* elements of a generated tensor */
};

/* The most bytes a result may have; results past it are refused as a VM's allocator would. */
static size_t out_limit = (size_t)64 << 20;

/* ---- attributes -------------------------------------------------------------------------------
 */

static const int64_t int_pool[] = {0, 1, 2, 3, -1, 4, 1, 2, 0, 5, -2, 8, 16, 6, 7, -3};
static const int64_t int_extreme[] = {INT64_MIN,
                                      INT64_MAX,
                                      (int64_t)1 << 62,
                                      -((int64_t)1 << 62),
                                      (int64_t)1 << 31,
                                      -((int64_t)1 << 31) - 1,
                                      ((int64_t)1 << 32) + 1,
                                      1000000,
                                      65536,
                                      (int64_t)1 << 40,
                                      -1000,
                                      33,
                                      64,
                                      63,
                                      INT32_MAX,
                                      INT32_MIN};
static const double float_pool[] = {0.5, 1, -1, 2, 0, 0.25, 1e-3, 3.5, -0.5, 1e-5, 10, 0.1};
static const double float_extreme[] = {NAN,   INFINITY, -INFINITY,    1e30,          -1e30,
                                       1e300, 5e-324,   -0.0,         4e18,          -4e18,
                                       1e19,  65536.5,  2147483648.0, -2147483649.0, 1e-300};
static const char *const str_pool[] = {
    "NCHW",       "NHWC",
    "NCW",        "NWC",
    "NCDHW",      "NDHWC",
    "OIHW",       "HWIO",
    "OIW",        "WIO",
    "OIDHW",      "DHWIO",
    "IOHW",       "NCHW4c",
    "NCHW2c",     "OIHW2i2o",
    "HW",         "N",
    "",           "x",
    "NCHWW",      "nchw",
    "NC1HW",      "NCHW0c",
    "CHW",        "HWC",
    "IHWO",       "NCHW16c",
    "OIHW16o",    "IOW",
    "IODHW",      "NCHW999999999999999999c",
    "sum",        "mean",
    "none",       "bilinear",
    "linear",     "nearest_neighbor",
    "cubic",      "align_corners",
    "half_pixel", "asymmetric",
    "round",      "floor",
    "ceil",       "constant",
    "edge",       "reflect",
    "float32",    "int32",
    "int64",      "UPWARD",
    "TONEAREST",  "avg",
    "max",        "fast",
    "ij,jk->ik",  "i,i->",
    "ii->i",      "clip",
    "wrap",       "fill",
    "end",        "size",
    "left",       "right",
    "xyz",
};
static const char *const junk_names[] = {"", "axis", "x", "layout", "padding", "zzz"};

/* The attribute rows of one call, with their arrays. */
typedef struct FzAttrs {
    KAttr rows[MAX_ROWS];
    uint32_t n;
    int64_t ints[MAX_ROWS][MAX_ITEMS];
    double floats[MAX_ROWS][MAX_ITEMS];
    const char *strs[MAX_ROWS][MAX_ITEMS];
} FzAttrs;

static int64_t gen_int(Src *s, bool extreme) {
    if (extreme) return int_extreme[pick(s, RLY_ARRAY_LEN(int_extreme))];
    return int_pool[pick(s, RLY_ARRAY_LEN(int_pool))];
}
static double gen_float(Src *s, bool extreme) {
    if (extreme) return float_extreme[pick(s, RLY_ARRAY_LEN(float_extreme))];
    return float_pool[pick(s, RLY_ARRAY_LEN(float_pool))];
}

/* One of the '|'-separated choices of a schema row, copied into buf. */
static const char *gen_choice(Src *s, const char *choices, char *buf, size_t cap) {
    uint32_t n = 1;
    for (const char *p = choices; *p; p++)
        n += *p == '|';
    uint32_t k = pick(s, n);
    const char *c = choices;
    while (k-- > 0)
        c = strchr(c, '|') + 1;
    const char *end = strchr(c, '|');
    size_t len = end ? (size_t)(end - c) : strlen(c);
    if (len >= cap) len = cap - 1;
    memcpy(buf, c, len);
    buf[len] = '\0';
    return buf;
}

/* Choice strings need storage that lives through the call: one buffer per row. */
static char choice_buf[MAX_ROWS][64];

static uint32_t gen_len(Src *s, bool extreme) {
    if (extreme) return pick(s, 3) == 0 ? MAX_ITEMS - pick(s, 8) : 1 + pick(s, 12);
    return pick(s, 7);
}

/* Row r of kind `kind`, values from the pools (extreme ones when asked). */
static void gen_row(Src *s, FzAttrs *at, uint32_t r, KAttrKind kind, bool extreme,
                    const char *str) {
    KAttr *a = &at->rows[r];
    a->kind = (uint8_t)kind;
    a->i = 0, a->f = 0, a->s = NULL, a->n = 0;
    a->ints = NULL, a->floats = NULL, a->strs = NULL;
    switch (kind) {
    case KA_NONE: break;
    case KA_INT:
        a->i = gen_int(s, extreme);
        a->f = (double)a->i;
        break;
    case KA_FLOAT:
        a->f = gen_float(s, extreme);
        a->i = isfinite(a->f) && fabs(a->f) < 9e18 ? (int64_t)a->f : 0;
        break;
    case KA_STR: a->s = str != NULL ? str : str_pool[pick(s, RLY_ARRAY_LEN(str_pool))]; break;
    case KA_INTS:
    case KA_FLOATS: {
        a->n = gen_len(s, extreme);
        uint32_t arrays = pick(s, 4); /* the other array: absent, same values, other values */
        for (uint32_t j = 0; j < a->n; j++) {
            if (kind == KA_INTS) {
                at->ints[r][j] = gen_int(s, extreme && pick(s, 2));
                at->floats[r][j] = arrays == 3 ? gen_float(s, false) : (double)at->ints[r][j];
            } else {
                at->floats[r][j] = gen_float(s, extreme && pick(s, 2));
                double f = at->floats[r][j];
                at->ints[r][j] = arrays == 3                     ? gen_int(s, false)
                                 : isfinite(f) && fabs(f) < 9e18 ? (int64_t)f
                                                                 : 0;
            }
        }
        bool both = arrays != 0;
        if (kind == KA_INTS || both) a->ints = at->ints[r];
        if (kind == KA_FLOATS || both) a->floats = at->floats[r];
        break;
    }
    case KA_STRS:
        a->n = gen_len(s, extreme);
        for (uint32_t j = 0; j < a->n; j++)
            at->strs[r][j] = str_pool[pick(s, RLY_ARRAY_LEN(str_pool))];
        a->strs = at->strs[r];
        break;
    }
}

/* A value of the schema row's own type. */
static void gen_typed(Src *s, FzAttrs *at, uint32_t r, const AttrSpec *sp, bool extreme) {
    const char *str = NULL;
    switch (sp->type) {
    case AT_INT:
    case AT_BOOL: gen_row(s, at, r, KA_INT, extreme, NULL); break;
    case AT_OPT_INT: gen_row(s, at, r, pick(s, 4) == 0 ? KA_NONE : KA_INT, extreme, NULL); break;
    case AT_FLOAT: gen_row(s, at, r, pick(s, 4) == 0 ? KA_INT : KA_FLOAT, extreme, NULL); break;
    case AT_OPT_FLOAT:
        gen_row(s, at, r, pick(s, 4) == 0 ? KA_NONE : KA_FLOAT, extreme, NULL);
        break;
    case AT_DTYPE:
        gen_row(s, at, r, KA_INT, false, NULL);
        at->rows[r].i = extreme ? gen_int(s, true) : (int64_t)pick(s, RLY_DTYPE_COUNT + 1) - 1;
        break;
    case AT_STR:
        if (sp->choices != NULL && !extreme)
            str = gen_choice(s, sp->choices, choice_buf[r], sizeof choice_buf[r]);
        gen_row(s, at, r, KA_STR, extreme, str);
        break;
    case AT_INTS: gen_row(s, at, r, KA_INTS, extreme, NULL); break;
    case AT_OPT_INTS: gen_row(s, at, r, pick(s, 4) == 0 ? KA_NONE : KA_INTS, extreme, NULL); break;
    case AT_FLOATS: gen_row(s, at, r, KA_FLOATS, extreme, NULL); break;
    case AT_STRS: gen_row(s, at, r, KA_STRS, extreme, NULL); break;
    case AT_ANY: gen_row(s, at, r, (KAttrKind)pick(s, KA_STRS + 1), extreme, NULL); break;
    }
}

/* The schema's default of a row, lowered as src/ops/lower.c lowers values (a list nested one
 * level, nn.pad's pad_width, flattened). False when the row has no default. */
static bool gen_default(FzAttrs *at, uint32_t r, const OpDef *op, uint32_t k) {
    const AttrValue *v = op->defaults ? op->defaults[k] : NULL;
    const AttrSpec *sp = &op->attrs[k];
    if (v == NULL) return false;
    KAttr *a = &at->rows[r];
    memset(a, 0, sizeof *a);
    a->name = sp->name;
    switch (v->kind) {
    case ATTR_INT:
    case ATTR_BOOL:
        a->kind = KA_INT;
        a->i = v->kind == ATTR_INT ? v->i : v->b;
        a->f = (double)a->i;
        break;
    case ATTR_FLOAT:
        a->kind = KA_FLOAT;
        a->f = v->f;
        break;
    case ATTR_STR:
        if (sp->type == AT_DTYPE) {
            a->kind = KA_INT;
            a->i = v->s[0] ? sup_dtype_parse(v->s, strlen(v->s)) : -1;
        } else {
            a->kind = KA_STR;
        }
        a->s = v->s;
        break;
    case ATTR_LIST: {
        if (v->list.n > 0 && v->list.items[0]->kind == ATTR_STR) {
            a->kind = KA_STRS;
            for (uint32_t j = 0; j < v->list.n && j < MAX_ITEMS; j++)
                at->strs[r][j] = v->list.items[j]->kind == ATTR_STR ? v->list.items[j]->s : "";
            a->n = v->list.n < MAX_ITEMS ? v->list.n : MAX_ITEMS;
            a->strs = at->strs[r];
            break;
        }
        uint32_t n = 0;
        bool any_float = false;
        for (uint32_t j = 0; j < v->list.n; j++) {
            const AttrValue *it = v->list.items[j];
            uint32_t m = it->kind == ATTR_LIST ? it->list.n : 1;
            for (uint32_t q = 0; q < m && n < MAX_ITEMS; q++, n++) {
                const AttrValue *leaf = it->kind == ATTR_LIST ? it->list.items[q] : it;
                any_float |= leaf->kind == ATTR_FLOAT;
                at->ints[r][n] = leaf->kind == ATTR_FLOAT ? (int64_t)leaf->f
                                 : leaf->kind == ATTR_INT ? leaf->i
                                                          : 0;
                at->floats[r][n] = leaf->kind == ATTR_FLOAT ? leaf->f : (double)at->ints[r][n];
            }
        }
        a->kind = any_float || sp->type == AT_FLOATS ? KA_FLOATS : KA_INTS;
        a->n = n, a->ints = at->ints[r], a->floats = at->floats[r];
        break;
    }
    default: a->kind = KA_NONE; break;
    }
    return true;
}

static void gen_attrs(Src *s, const OpDef *op, FzAttrs *at) {
    at->n = 0;
    uint32_t n_schema = op->attrs ? op->n_attrs : 0;
    for (uint32_t k = 0; k < n_schema && at->n < MAX_ROWS; k++) {
        const AttrSpec *sp = &op->attrs[k];
        uint32_t mode = pick(s, 16), r = at->n;
        if (mode == 0) continue; /* left out */
        if (mode <= 4 && gen_default(at, r, op, k)) {
            at->n++;
            continue;
        }
        at->rows[r].name = sp->name;
        if (mode <= 11)
            gen_typed(s, at, r, sp, false);
        else if (mode <= 13)
            gen_typed(s, at, r, sp, true);
        else
            gen_row(s, at, r, (KAttrKind)pick(s, KA_STRS + 1), pick(s, 2), NULL);
        at->rows[r].name = sp->name;
        at->n++;
    }
    uint32_t extra = pick(s, 8) == 0 ? 1 + pick(s, 3) : 0;
    for (uint32_t e = 0; e < extra && at->n < MAX_ROWS; e++) {
        uint32_t r = at->n++;
        gen_row(s, at, r, (KAttrKind)pick(s, KA_STRS + 1), pick(s, 2), NULL);
        at->rows[r].name = n_schema && pick(s, 2) ? op->attrs[pick(s, n_schema)].name
                                                  : junk_names[pick(s, RLY_ARRAY_LEN(junk_names))];
    }
    if (pick(s, 16) == 0) /* in another order */
        for (uint32_t i = 0; i < at->n / 2; i++) {
            KAttr t = at->rows[i];
            at->rows[i] = at->rows[at->n - 1 - i];
            at->rows[at->n - 1 - i] = t;
        }
}

/* ---- tensors ------------------------------------------------------------------------------------
 */

static const rly_dtype base_dtypes[] = {
    RLY_DTYPE_F32,  RLY_DTYPE_F32, RLY_DTYPE_F32, RLY_DTYPE_I32, RLY_DTYPE_I64,
    RLY_DTYPE_F64,  RLY_DTYPE_F16, RLY_DTYPE_I8,  RLY_DTYPE_U8,  RLY_DTYPE_BOOL,
    RLY_DTYPE_BF16, RLY_DTYPE_I16, RLY_DTYPE_U16, RLY_DTYPE_U32, RLY_DTYPE_U64};

typedef struct Shape {
    uint32_t ndim;
    int64_t dims[MAX_RANK];
} Shape;

static void gen_shape(Src *s, Shape *sh) {
    sh->ndim = pick(s, MAX_RANK + 1);
    for (uint32_t d = 0; d < sh->ndim; d++) {
        uint32_t k = pick(s, 16);
        sh->dims[d] = k < 6 ? 1 : k < 10 ? 2 : k < 13 ? 3 : k < 14 ? 0 : 4 + pick(s, 5);
    }
}

/* Shrink dims until the element count is at most MAX_NUMEL. */
static void bound_shape(Shape *sh) {
    for (;;) {
        int64_t n = 1;
        uint32_t big = 0;
        for (uint32_t d = 0; d < sh->ndim; d++) {
            n = sup_dim_mul_sat(n, sh->dims[d]);
            if (sh->dims[d] > sh->dims[big]) big = d;
        }
        if (n <= MAX_NUMEL) return;
        sh->dims[big] = sh->dims[big] / 2;
    }
}

typedef struct Tensors {
    DLTensor t[MAX_IN];
    uint32_t n;
    uint64_t sum[MAX_IN]; /* a hash of each input's bytes, to see writes */
} Tensors;

static uint64_t hash_bytes(const DLTensor *t) {
    size_t n = (size_t)k_numel(t) * sup_dtype_size(k_dtype(t));
    const uint8_t *p = k_ptr(t);
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211u;
    for (int32_t d = 0; d < t->ndim; d++)
        h = (h ^ (uint64_t)t->shape[d]) * 1099511628211u;
    return h;
}

/* Element values: small numbers, indices, extremes, specials, raw bits. */
static void fill(DLTensor *t, uint32_t mode, uint64_t seed) {
    rly_dtype dt = k_dtype(t);
    int64_t n = k_numel(t);
    uint64_t x = seed | 1;
    void *p = k_ptr(t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = prng_next(&x);
        uint32_t m = mode == 0 ? (uint32_t)(r >> 60) % 4 : mode;
        switch (m) {
        case 1: /* small integers, as indices and sizes */
            k_storei(p, dt, i, (int64_t)(r % 11) - 3);
            break;
        case 2: /* extremes and specials */
            if (sup_dtype_is_float(dt))
                k_storef(p, dt, i, float_extreme[r % RLY_ARRAY_LEN(float_extreme)]);
            else
                k_storei(p, dt, i, int_extreme[r % RLY_ARRAY_LEN(int_extreme)]);
            break;
        case 3: { /* raw bits */
            size_t sz = sup_dtype_size(dt);
            memcpy((uint8_t *)p + (size_t)i * sz, &r, sz);
            if (dt == RLY_DTYPE_BOOL) ((uint8_t *)p)[i] &= 1;
            break;
        }
        default: /* small numbers */
            if (sup_dtype_is_float(dt))
                k_storef(p, dt, i, (double)((int64_t)(r % 33) - 16) / 4);
            else
                k_storei(p, dt, i, (int64_t)(r % 7) - 1);
            break;
        }
    }
}

/* Tensor i of dtype dt and shape sh, zero-sized arrays allocated exactly. */
static DLTensor *new_tensor(Tensors *ts, rly_dtype dt, uint32_t ndim, const int64_t *dims) {
    DLTensor *t = &ts->t[ts->n++];
    memset(t, 0, sizeof *t);
    t->device = (DLDevice){kDLCPU, 0};
    t->dtype = k_dl_dtype(dt);
    t->ndim = (int32_t)ndim;
    t->shape = malloc(ndim * sizeof(int64_t));
    if (ndim) memcpy(t->shape, dims, ndim * sizeof(int64_t));
    int64_t n = k_shape_numel(ndim, dims);
    t->data = malloc((size_t)n * sup_dtype_size(dt));
    return t;
}

static void free_tensor(DLTensor *t) {
    free(t->shape);
    free(t->data);
}

/* ---- the call -----------------------------------------------------------------------------------
 */

typedef struct FzCall {
    Tensors in;
    uint32_t n_args;
    uint32_t arg_start[MAX_ARGS + ARG_PAD], arg_len[MAX_ARGS + ARG_PAD];
    uint8_t arg_tuple[MAX_ARGS + ARG_PAD];
    const DLTensor *in_ptr[MAX_IN + 1];
    bool out_tuple;
    uint32_t n_out;
    DLTensor *out[MAX_OUT];
    DLTensor out_t[MAX_OUT];
} FzCall;

/* The VM's padding tensor: 0-d float32, zero data, a shape that reads as zeros at any rank. */
static int64_t pad_dims[K_MAX_DIMS];
static _Alignas(64) uint8_t pad_data[64];
static const DLTensor pad_tensor = {.data = pad_data,
                                    .device = {kDLCPU, 0},
                                    .ndim = 0,
                                    .dtype = {kDLFloat, 32, 1},
                                    .shape = pad_dims};

static int fz_alloc(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    FzCall *c = kc->rt;
    int64_t n = k_shape_numel(ndim, shape);
    size_t size = sup_dtype_size(dt);
    if (n < 0 || (uint64_t)n > out_limit / size) {
        k_error(kc, "out of memory (a result of %lld elements)", (long long)n);
        return -1;
    }
    DLTensor *t = &c->out_t[i];
    memset(t, 0, sizeof *t);
    t->device = (DLDevice){kDLCPU, 0};
    t->dtype = k_dl_dtype(dt);
    t->ndim = (int32_t)ndim;
    t->shape = malloc(ndim * sizeof(int64_t));
    if (ndim) memcpy(t->shape, shape, ndim * sizeof(int64_t));
    /* zero-filled, exactly sized (an empty result gets an empty block: ASan sees any access) */
    t->data = n > 0 ? calloc((size_t)n, size) : malloc(0);
    c->out[i] = t;
    return 0;
}

/* Argument entries past the arguments name the padding tensor, as the VM's do. */
static void pad_args(FzCall *c) {
    for (uint32_t i = 0; i < c->in.n; i++) {
        c->in_ptr[i] = &c->in.t[i];
        c->in.sum[i] = hash_bytes(&c->in.t[i]);
    }
    c->in_ptr[c->in.n] = &pad_tensor;
    for (uint32_t a = c->n_args; a < c->n_args + ARG_PAD; a++) {
        c->arg_start[a] = c->in.n;
        c->arg_len[a] = 1;
        c->arg_tuple[a] = 0;
    }
}

static void gen_inputs(Src *s, const OpDef *op, FzCall *c) {
    uint32_t n_args = op->n_args == OP_VARIADIC ? 1 + pick(s, 4) : (uint32_t)op->n_args;
    if (pick(s, 8) == 0) n_args = pick(s, n_args + 3); /* a wrong count */
    if (n_args > MAX_ARGS) n_args = MAX_ARGS;
    Shape base;
    gen_shape(s, &base);
    bound_shape(&base);
    rly_dtype base_dt = base_dtypes[pick(s, RLY_ARRAY_LEN(base_dtypes))];
    uint64_t seed = take(s) | (uint64_t)take(s) << 8 | (uint64_t)take(s) << 16;
    Tensors *ts = &c->in;
    ts->n = 0;
    for (uint32_t a = 0; a < n_args; a++) {
        bool tuple = pick(s, 8) == 0 || (op->n_args == OP_VARIADIC && pick(s, 2));
        uint32_t fields = tuple ? pick(s, 4) : 1;
        c->arg_start[a] = ts->n;
        c->arg_tuple[a] = tuple;
        for (uint32_t f = 0; f < fields && ts->n < MAX_IN; f++) {
            Shape sh = base;
            rly_dtype dt = base_dt;
            uint32_t mode = pick(s, 16);
            if (mode >= 8 && mode < 10) { /* the base shape, another dtype */
                dt = (rly_dtype)pick(s, RLY_DTYPE_COUNT);
            } else if (mode == 10) { /* a scalar */
                sh.ndim = 0;
                dt = pick(s, 2) ? RLY_DTYPE_I32 : base_dt;
            } else if (mode == 11) { /* an integer vector (shapes, indices) */
                sh.ndim = 1;
                sh.dims[0] = pick(s, 6);
                dt = pick(s, 2) ? RLY_DTYPE_I64 : RLY_DTYPE_I32;
            } else if (mode == 12 || mode == 13) { /* random */
                gen_shape(s, &sh);
                dt = (rly_dtype)pick(s, RLY_DTYPE_COUNT);
            } else if (mode == 14) { /* the base shape with one dim changed */
                if (sh.ndim) sh.dims[pick(s, sh.ndim)] = pick(s, 5);
            } else if (mode == 15) { /* empty, with a dim near the limit */
                gen_shape(s, &sh);
                if (sh.ndim == 0) sh.ndim = 1, sh.dims[0] = 1;
                uint32_t z = pick(s, sh.ndim), h = pick(s, sh.ndim);
                sh.dims[z] = 0;
                if (h != z) {
                    int64_t rest = 1;
                    for (uint32_t d = 0; d < sh.ndim; d++)
                        if (d != h && sh.dims[d] != 0) rest *= sh.dims[d];
                    sh.dims[h] = (pick(s, 2) ? SUP_DIM_MAX : (int64_t)1 << 31) / rest;
                }
            }
            bound_shape(&sh);
            DLTensor *t = new_tensor(ts, dt, sh.ndim, sh.dims);
            fill(t, pick(s, 5), seed + ts->n * 0x9E3779B97F4A7C15u);
        }
        c->arg_len[a] = ts->n - c->arg_start[a];
    }
    c->n_args = n_args;
    c->out_tuple = pick(s, 4) == 0;
    c->n_out = c->out_tuple ? 1 + pick(s, MAX_OUT - 1) : 1;
    if (pick(s, 16) == 0) { /* a preallocated first result (a VM plan's buffer) */
        static Tensors pre; /* only its first tensor is used: moved into out_t[0] */
        pre.n = 0;
        Shape sh;
        gen_shape(s, &sh);
        bound_shape(&sh);
        DLTensor *t = new_tensor(&pre, (rly_dtype)pick(s, RLY_DTYPE_COUNT), sh.ndim, sh.dims);
        memset(t->data, 0, (size_t)k_numel(t) * sup_dtype_size(k_dtype(t)));
        c->out_t[0] = *t;
        c->out[0] = &c->out_t[0];
    }
}

/* ---- explicit recipes ---------------------------------------------------------------------------
 * After the operator id, the byte 'X' selects a recipe that spells the call out (the seeds written
 * from the relation suite are such; mutating one byte changes one field):
 *   u8 results: bit 0 out_tuple, bits 1-3 n_out - 1 (modulo MAX_OUT); bit 4 set: tensor number
 *     bits 5-7 is made empty with a huge dim (one dim 0, another as large as the shape limit
 *     lets it be), which keeps the recipe's ranks and the other dims;
 *   u8 n_rows, then per row: u8 name (a schema row's index, else a junk name), u8 kind,
 *     u8 n (list length), u8 arrays (bit 0 ints, 1 floats, 2 strs; the kind's own is implied),
 *     i64 i, f64 f, str s, then n x i64 ints, n x f64 floats, n x str strs (those present);
 *     a str is u8 length + bytes
 *   u8 n_args, then per argument: u8 (bit 7 a tuple, bits 0-1 its field count), and per tensor
 *     u8 dtype, u8 rank (modulo MAX_RANK + 1), rank x u64 dims, u8 fill mode, u32 fill seed.
 * Dims past the shape limit are taken modulo 8; a shape past it, or a non-empty one of more than
 * MAX_NUMEL elements, is shrunk. */

enum { EXPLICIT = 'X', STR_POOL = 8192 };

static uint64_t take64(Src *s) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)take(s) << (8 * i);
    return v;
}
static double take_f64(Src *s) {
    uint64_t b = take64(s);
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static char str_pool_buf[STR_POOL];
static size_t str_pool_used;

/* A str of the recipe, copied NUL-terminated into the pool ("" when the pool is full). */
static const char *take_str(Src *s) {
    uint32_t len = take(s);
    bool room = str_pool_used + len + 1 <= STR_POOL;
    char *p = str_pool_buf + str_pool_used;
    for (uint32_t i = 0; i < len; i++) {
        char ch = (char)take(s);
        if (room) p[i] = ch;
    }
    if (!room) return "";
    p[len] = '\0';
    str_pool_used += len + 1;
    return p;
}

static void read_attrs(Src *s, const OpDef *op, FzAttrs *at) {
    uint32_t n_schema = op->attrs ? op->n_attrs : 0;
    at->n = take(s) % (MAX_ROWS + 1);
    for (uint32_t r = 0; r < at->n; r++) {
        KAttr *a = &at->rows[r];
        uint32_t name = take(s);
        a->name = name < n_schema ? op->attrs[name].name
                                  : junk_names[(name - n_schema) % RLY_ARRAY_LEN(junk_names)];
        a->kind = (uint8_t)(take(s) % (KA_STRS + 1));
        a->n = take(s) % (MAX_ITEMS + 1);
        uint32_t arrays = take(s);
        if (a->kind == KA_INTS) arrays |= 1;
        if (a->kind == KA_FLOATS) arrays |= 2;
        if (a->kind == KA_STRS) arrays |= 4;
        a->i = (int64_t)take64(s);
        a->f = take_f64(s);
        a->s = take_str(s);
        a->ints = NULL, a->floats = NULL, a->strs = NULL;
        if (arrays & 1) {
            for (uint32_t j = 0; j < a->n; j++)
                at->ints[r][j] = (int64_t)take64(s);
            a->ints = at->ints[r];
        }
        if (arrays & 2) {
            for (uint32_t j = 0; j < a->n; j++)
                at->floats[r][j] = take_f64(s);
            a->floats = at->floats[r];
        }
        if (arrays & 4) {
            for (uint32_t j = 0; j < a->n; j++)
                at->strs[r][j] = take_str(s);
            a->strs = at->strs[r];
        }
        if ((arrays & 7) == 0) a->n = 0; /* the loader's rule: a length needs items */
    }
}

/* A shape read from a recipe, made one the runtime could hold: dims within the limit, their
 * nonzero product too, and a non-empty tensor small. */
static void normalize_shape(Shape *sh) {
    int64_t prod = 1;
    for (uint32_t d = 0; d < sh->ndim; d++) {
        if ((uint64_t)sh->dims[d] > (uint64_t)SUP_DIM_MAX)
            sh->dims[d] = (int64_t)((uint64_t)sh->dims[d] % 8);
        if (sh->dims[d] != 0 && !sup_dim_mul(prod, sh->dims[d], &prod)) sh->dims[d] = 1;
    }
    bound_shape(sh);
}

/* The transformation of results bit 4: a dim 0, and the next one as large as the limit allows. */
static void empty_huge(Shape *sh) {
    if (sh->ndim == 0) return;
    uint32_t z = sh->ndim - 1, h = sh->ndim > 1 ? 0 : z;
    sh->dims[z] = 0;
    if (h == z) return;
    int64_t rest = 1;
    for (uint32_t d = 0; d < sh->ndim; d++)
        if (d != h && sh->dims[d] != 0) rest = sup_dim_mul_sat(rest, sh->dims[d]);
    sh->dims[h] = SUP_DIM_MAX / rest;
}

static void read_inputs(Src *s, FzCall *c, int empty_at) {
    Tensors *ts = &c->in;
    ts->n = 0;
    c->n_args = take(s) % (MAX_ARGS + 1);
    for (uint32_t a = 0; a < c->n_args; a++) {
        uint32_t flags = take(s);
        bool tuple = (flags & 0x80) != 0;
        uint32_t fields = tuple ? flags & 3 : 1;
        c->arg_start[a] = ts->n;
        c->arg_tuple[a] = tuple;
        for (uint32_t f = 0; f < fields && ts->n < MAX_IN; f++) {
            rly_dtype dt = (rly_dtype)(take(s) % RLY_DTYPE_COUNT);
            Shape sh;
            sh.ndim = take(s) % (MAX_RANK + 1);
            for (uint32_t d = 0; d < sh.ndim; d++)
                sh.dims[d] = (int64_t)take64(s);
            normalize_shape(&sh);
            if ((int)ts->n == empty_at) empty_huge(&sh);
            uint32_t mode = take(s) % 5;
            uint64_t seed = take(s) | (uint64_t)take(s) << 8 | (uint64_t)take(s) << 16 |
                            (uint64_t)take(s) << 24;
            fill(new_tensor(ts, dt, sh.ndim, sh.dims), mode, seed);
        }
        c->arg_len[a] = ts->n - c->arg_start[a];
    }
}

/* ---- running a recipe ---------------------------------------------------------------------------
 */

/* Run one recipe on the reference kernel (fast false) or on the operator's fast kernel
 * (src/kernels/fast, which an executable binds first; it hands what it does not cover to the
 * reference kernel); returns the kernel's result (after k_call_result). The error message, when
 * any, is in err. */
static int run_with(const uint8_t *data, size_t size, char *err, size_t err_cap, bool fast) {
    Src s = {data, size, 0};
    uint32_t id = take16(&s) % OP_ID_COUNT;
    const OpDef *op = op_at(id);
    KernelFn fn = fast ? kern_fast_lookup(id) : kern_ref_lookup(id);
    static FzAttrs at; /* large: not on the stack */
    static FzCall c;
    memset(&c, 0, sizeof c);
    str_pool_used = 0;
    if (s.n > 2 && s.p[2] == EXPLICIT) {
        s.i = 3;
        uint32_t res = take(&s);
        c.out_tuple = res & 1;
        c.n_out = c.out_tuple ? 1 + ((res >> 1) & 7) % MAX_OUT : 1;
        read_attrs(&s, op, &at);
        read_inputs(&s, &c, (res & 0x10) ? (int)(res >> 5) : -1);
    } else {
        gen_attrs(&s, op, &at);
        gen_inputs(&s, op, &c);
    }
    pad_args(&c);
    err[0] = '\0';
    KCall kc = {
        .op = op->name,
        .attrs = at.n ? at.rows : NULL, /* as a VM node without attributes has it */
        .n_attrs = at.n,
        .n_args = c.n_args,
        .arg_start = c.arg_start,
        .arg_len = c.arg_len,
        .arg_tuple = c.arg_tuple,
        .in = c.in_ptr,
        .n_in = c.in.n,
        .out = c.out,
        .n_out = c.n_out,
        .out_tuple = c.out_tuple,
        .alloc = fz_alloc,
        .rt = &c,
        .err = err,
        .err_cap = err_cap,
    };
    int rc = k_call_result(&kc, fn(&kc));
    k_call_release(&kc);
    if (rc != 0 && rc != -1) {
        char d[32];
        snprintf(d, sizeof d, "%d", rc);
        violated(op->name, "the kernel returned neither 0 nor -1", d);
    }
    if (rc != 0 && err[0] == '\0') violated(op->name, "a failure without a message", NULL);
    for (uint32_t i = 0; i < c.in.n; i++)
        if (hash_bytes(&c.in.t[i]) != c.in.sum[i]) violated(op->name, "an input was written", NULL);
    for (uint32_t i = 0; i < c.in.n; i++)
        free_tensor(&c.in.t[i]);
    for (uint32_t i = 0; i < MAX_OUT; i++)
        if (c.out[i] != NULL) free_tensor(&c.out_t[i]);
    return rc;
}

/* Run one recipe on the reference kernel, then on the fast kernel when the operator has one;
 * returns the reference kernel's result, its message in err. */
static int run_recipe(const uint8_t *data, size_t size, char *err, size_t err_cap) {
    int rc = run_with(data, size, err, err_cap, false);
    Src s = {data, size, 0};
    if (kern_fast_lookup(take16(&s) % OP_ID_COUNT) != NULL) {
        char ferr[1024];
        run_with(data, size, ferr, sizeof ferr, true);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[1024];
    run_recipe(data, size, err, sizeof err);
    return 0;
}

/* ---- the smoke driver and the seed writer -----------------------------------------------------
 */

#ifdef FUZZ_KERNELS_SMOKE
#include <dirent.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "rly/rly.h"
#include "../rel_case.h"

static const char *running_op = "";
static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "fuzz_kernels_smoke: FAIL: a call did not finish in time: ";
    ssize_t r = write(2, msg, sizeof msg - 1);
    r = write(2, running_op, strlen(running_op));
    r = write(2, "\n", 1);
    (void)r;
    _exit(3);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Counts of a run. */
typedef struct Tally {
    long ok, err;
    double slowest;
    const char *slowest_op;
} Tally;

/* One recipe, timed and counted; a failure prints the recipe. */
static int run_one(const uint8_t *buf, size_t len, const char *what, Tally *t) {
    char err[1024];
    uint8_t *copy = malloc(len ? len : 1); /* exactly sized, as libFuzzer passes it */
    if (len) memcpy(copy, buf, len);
    running_op = len >= 2 ? sup_op_name((buf[0] | buf[1] << 8) % OP_ID_COUNT) : "";
    const char *last = getenv("RLY_FUZZ_LAST"); /* a crash leaves its recipe in this file */
    FILE *f = last ? fopen(last, "wb") : NULL;
    if (f != NULL) {
        if (len) fwrite(buf, 1, len, f);
        fclose(f);
    }
    size_t before = fuzz_n_failures;
    double t0 = now();
    alarm(20);
    int rc = run_recipe(copy, len, err, sizeof err);
    alarm(0);
    double dt = now() - t0;
    if (dt > t->slowest) t->slowest = dt, t->slowest_op = running_op;
    if (fuzz_n_failures != before) {
        fprintf(stderr, "  (%s, %s; recipe:", running_op, what);
        for (size_t i = 0; i < len; i++)
            fprintf(stderr, " %02x", copy[i]);
        fprintf(stderr, ")\n");
    }
    free(copy);
    t->ok += rc == 0;
    t->err += rc != 0;
    return rc;
}

/* A random recipe for operator id: its id, then random bytes. */
static size_t random_recipe(uint64_t *x, uint32_t id, uint8_t *buf, size_t cap) {
    size_t len = 32 + prng_next(x) % (cap - 32);
    for (size_t i = 2; i < len; i++)
        buf[i] = (uint8_t)(prng_next(x) >> 32);
    buf[0] = (uint8_t)id;
    buf[1] = (uint8_t)(id >> 8);
    if (buf[2] == EXPLICIT) buf[2] = 0;
    return len;
}

/* The files of a directory, sorted; NULL-terminated, malloc'ed. */
static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}
static char **list_dir(const char *dir, size_t *n) {
    DIR *d = opendir(dir);
    char **v = NULL;
    *n = 0;
    if (d == NULL) return NULL;
    struct dirent *e;
    size_t cap = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (*n + 1 >= cap) v = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof *v);
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        v[*n] = malloc(len);
        snprintf(v[(*n)++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (*n) qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

/* Every file of dir and `mutants` mutations of each: 1 to 4 bytes past the operator id set to
 * random values, sometimes the recipe cut short, and for a third of the explicit ones a tensor
 * made empty with a huge dim (results bit 4). */
static int run_mutants(const char *dir, int mutants, uint64_t seed, Tally *t) {
    size_t n;
    char **files = list_dir(dir, &n);
    if (files == NULL || n == 0) {
        fprintf(stderr, "fuzz_kernels_smoke: no seed files in %s\n", dir);
        free(files);
        return 1;
    }
    uint64_t x = seed | 1;
    for (size_t f = 0; f < n; f++) {
        char err[256], *data = NULL;
        size_t len = 0;
        if (!sup_read_file(files[f], &data, &len, err, sizeof err)) {
            fprintf(stderr, "fuzz_kernels_smoke: %s\n", err);
            free(files[f]);
            continue;
        }
        run_one((const uint8_t *)data, len, files[f], t);
        uint8_t *m = malloc(len ? len : 1);
        for (int k = 0; k < mutants && len > 3; k++) {
            memcpy(m, data, len);
            size_t mlen = len;
            uint32_t changes = 1 + (uint32_t)(prng_next(&x) % 4);
            for (uint32_t q = 0; q < changes; q++)
                m[3 + prng_next(&x) % (len - 3)] = (uint8_t)(prng_next(&x) >> 40);
            if (prng_next(&x) % 8 == 0) mlen = 3 + prng_next(&x) % (len - 3);
            if (data[2] == EXPLICIT && prng_next(&x) % 3 == 0) /* a tensor emptied, dims huge */
                m[3] = (uint8_t)((m[3] & 0x0f) | 0x10 | (prng_next(&x) % 4) << 5);
            char what[64];
            snprintf(what, sizeof what, "mutant %d of a seed", k);
            run_one(m, mlen, what, t);
        }
        free(m);
        free(data);
        free(files[f]);
    }
    free(files);
    return 0;
}

/* ---- seeds: explicit recipes of the relation suite's accepted calls ---- */

typedef struct Out {
    uint8_t *p;
    size_t n, cap;
} Out;
static void put(Out *o, const void *p, size_t n) {
    if (n == 0) return;
    if (o->n + n > o->cap) o->p = realloc(o->p, o->cap = 2 * (o->n + n) + 64);
    memcpy(o->p + o->n, p, n);
    o->n += n;
}
static void put8(Out *o, uint32_t v) {
    uint8_t b = (uint8_t)v;
    put(o, &b, 1);
}
static void put64(Out *o, uint64_t v) {
    for (int i = 0; i < 8; i++)
        put8(o, (uint32_t)(v >> (8 * i)));
}
static void put_f64(Out *o, double d) {
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    put64(o, b);
}
static void put_str(Out *o, const char *s) {
    size_t len = s ? strlen(s) : 0;
    if (len > 255) len = 255;
    put8(o, (uint32_t)len);
    put(o, s, len);
}

/* A tensor type into the recipe; false when it is not a small static tensor. */
static bool put_tensor(Out *o, Type *t, uint64_t *x) {
    if (t == NULL || t->kind != TYPE_TENSOR) return false;
    TensorType *tt = AS_TENSOR_TYPE(t);
    if (tt->ndim > MAX_RANK) return false;
    for (uint32_t d = 0; d < tt->ndim; d++)
        if (tt->shape[d] < 0) return false;
    if (k_shape_numel(tt->ndim, tt->shape) > MAX_NUMEL) return false;
    put8(o, (uint32_t)tt->dtype);
    put8(o, tt->ndim);
    for (uint32_t d = 0; d < tt->ndim; d++)
        put64(o, (uint64_t)tt->shape[d]);
    put8(o, (uint32_t)(prng_next(x) % 2 ? 0 : 4)); /* mixed values or small numbers */
    put64(o, prng_next(x) & 0xffffffffu);
    o->n -= 4; /* a u32 seed */
    return true;
}

/* The recipe of call c (typed) of op, with the attribute rows lowered; false to skip it. */
static bool encode_call(const OpDef *op, Call *c, const KAttr *rows, uint64_t *x, Out *o) {
    put8(o, op->id), put8(o, op->id >> 8), put8(o, EXPLICIT);
    Type *rt = c->base.checked_type;
    bool tuple = rt != NULL && rt->kind == TYPE_TUPLE;
    uint32_t n_out = tuple ? AS_TUPLE_TYPE(rt)->n : 1;
    if (n_out < 1 || n_out > MAX_OUT) return false;
    put8(o, (tuple ? 1u : 0u) | (n_out - 1) << 1);
    put8(o, op->n_attrs);
    for (uint32_t r = 0; r < op->n_attrs; r++) {
        const KAttr *a = &rows[r];
        if (a->n > MAX_ITEMS) return false;
        uint32_t arrays = (a->ints ? 1u : 0u) | (a->floats ? 2u : 0u) | (a->strs ? 4u : 0u);
        put8(o, r), put8(o, a->kind), put8(o, a->n), put8(o, arrays);
        put64(o, (uint64_t)a->i), put_f64(o, a->f), put_str(o, a->s);
        for (uint32_t j = 0; (arrays & 1) && j < a->n; j++)
            put64(o, (uint64_t)a->ints[j]);
        for (uint32_t j = 0; (arrays & 2) && j < a->n; j++)
            put_f64(o, a->floats[j]);
        for (uint32_t j = 0; (arrays & 4) && j < a->n; j++)
            put_str(o, a->strs[j]);
    }
    if (c->n_args > MAX_ARGS) return false;
    put8(o, c->n_args);
    for (uint32_t i = 0; i < c->n_args; i++) {
        Type *t = c->args[i]->checked_type;
        if (t != NULL && t->kind == TYPE_TUPLE) {
            TupleType *tu = AS_TUPLE_TYPE(t);
            if (tu->n > 3) return false;
            put8(o, 0x80 | tu->n);
            for (uint32_t j = 0; j < tu->n; j++)
                if (!put_tensor(o, tu->fields[j], x)) return false;
        } else {
            put8(o, 1);
            if (!put_tensor(o, t, x)) return false;
        }
    }
    return true;
}

/* Writes a seed per accepted case "op(ARGS) -> TYPE" of the relation files in rel_dir (small
 * static tensors only) and per_op random recipes per operator into out_dir. */
static int write_seeds(const char *rel_dir, const char *out_dir, int per_op, uint64_t seed) {
    size_t n_files;
    char **files = list_dir(rel_dir, &n_files);
    uint64_t x = seed | 1;
    int written = 0, per[OP_ID_COUNT] = {0};
    for (size_t f = 0; f < n_files; f++) {
        FILE *in = fopen(files[f], "r");
        char line[4096];
        while (in != NULL && fgets(line, sizeof line, in)) {
            StrBuf text = {0};
            if (!rel_case_program(line, &text)) continue;
            rly_ctx *ctx;
            rly_ctx_new(&ctx);
            rly_module *m = NULL;
            if (rly_module_parse(ctx, text.data, text.len, "seed.rly", &m) == RLY_STATUS_OK &&
                rly_module_infer(m) == RLY_STATUS_OK) {
                FuncDef *fd = ir_module_lookup(m, "main", 4);
                Expr *body = fd && fd->func ? fd->func->body : NULL;
                Call *c = body && body->kind == EXPR_CALL ? AS_CALL(body) : NULL;
                const OpDef *op = c && c->op->kind == EXPR_OP ? op_def_of(c->op) : NULL;
                Arena arena;
                arena_init(&arena);
                StrBuf msg = {0};
                Span where;
                KAttr *rows = op && op->id < OP_ID_COUNT
                                  ? op_lower_attrs(op, c->attrs, &arena, &msg, &where)
                                  : NULL;
                Out o = {0};
                if (rows != NULL && encode_call(op, c, rows, &x, &o)) {
                    char path[4096];
                    snprintf(path, sizeof path, "%s/rel_%s_%d", out_dir, op->name, per[op->id]++);
                    FILE *w = fopen(path, "wb");
                    if (w == NULL || fwrite(o.p, 1, o.n, w) != o.n) {
                        fprintf(stderr, "cannot write %s\n", path);
                        return 1;
                    }
                    fclose(w);
                    written++;
                }
                free(o.p);
                sb_free(&msg);
                arena_free(&arena);
            }
            rly_ctx_free(ctx);
            sb_free(&text);
        }
        if (in) fclose(in);
        free(files[f]);
    }
    free(files);
    uint8_t buf[160];
    for (uint32_t id = 0; id < OP_ID_COUNT; id++)
        for (int k = 0; k < per_op; k++) {
            size_t len = random_recipe(&x, id, buf, sizeof buf);
            char path[4096];
            snprintf(path, sizeof path, "%s/gen_%s_%d", out_dir, sup_op_name(id), k);
            FILE *w = fopen(path, "wb");
            if (w == NULL || fwrite(buf, 1, len, w) != len) {
                fprintf(stderr, "cannot write %s\n", path);
                return 1;
            }
            fclose(w);
            written++;
        }
    printf("%d seeds written to %s\n", written, out_dir);
    return 0;
}

/* ---- the messages of attribute problems ---- */

/* An explicit recipe for op with at most one row (row: schema row `name` of kind `kind`, a
 * string attribute's text `str`) and float32 tensors of the given shapes (rank 4 or 2). */
static size_t message_recipe(const char *op_name, int kind, uint32_t name, const char *str,
                             uint32_t n_args, const int64_t (*shapes)[4], const uint32_t *ranks,
                             Out *o) {
    const OpDef *op = op_lookup(op_name, strlen(op_name));
    o->n = 0;
    put8(o, op->id), put8(o, op->id >> 8), put8(o, EXPLICIT), put8(o, 0);
    put8(o, kind < 0 ? 0 : 1);
    if (kind >= 0) {
        put8(o, name), put8(o, (uint32_t)kind), put8(o, 0), put8(o, 0);
        put64(o, 0), put_f64(o, 0), put_str(o, str);
    }
    put8(o, n_args);
    for (uint32_t a = 0; a < n_args; a++) {
        put8(o, 1), put8(o, RLY_DTYPE_F32), put8(o, ranks[a]);
        for (uint32_t d = 0; d < ranks[a]; d++)
            put64(o, (uint64_t)shapes[a][d]);
        put8(o, 4), put8(o, 1), put8(o, 0), put8(o, 0), put8(o, 0);
    }
    return o->n;
}

/* A row of a kind an accessor cannot read, and a missing row, fail the call with a message
 * naming the attribute, even when the kernel itself succeeds on the neutral value. */
static void check_messages(Tally *t) {
    static const int64_t conv_shapes[2][4] = {{1, 1, 3, 3}, {1, 1, 1, 1}},
                         sm_shape[1][4] = {{2, 3}};
    static const uint32_t conv_ranks[2] = {4, 4}, sm_ranks[1] = {2};
    static const struct {
        const char *op;
        int kind; /* -1: no row at all */
        uint32_t n_args;
        const char *want;
    } cases[] = {
        {"nn.conv2d", KA_STR, 2, "attribute 'strides': expected a list of integers"},
        {"nn.conv2d", -1, 2, "attribute 'strides': missing"},
        {"nn.softmax", KA_STR, 1, "attribute 'axis': expected an integer"},
        {"nn.softmax", KA_FLOATS, 1, "attribute 'axis': expected an integer"},
    };
    Out o = {0};
    char err[1024];
    for (size_t i = 0; i < RLY_ARRAY_LEN(cases); i++) {
        bool conv = cases[i].n_args == 2;
        size_t len =
            message_recipe(cases[i].op, cases[i].kind, 0, "x", cases[i].n_args,
                           conv ? conv_shapes : sm_shape, conv ? conv_ranks : sm_ranks, &o);
        int rc = run_recipe(o.p, len, err, sizeof err);
        t->ok += rc == 0, t->err += rc != 0;
        if (rc != -1 || strcmp(err, cases[i].want) != 0) {
            fprintf(stderr, "fuzz_kernels_smoke: FAIL: %s: got %d \"%s\", want -1 \"%s\"\n",
                    cases[i].op, rc, err, cases[i].want);
            fuzz_n_failures++;
        }
    }
    free(o.p);
}

int main(int argc, char **argv) {
    uint64_t seed = 0x6b667a7a5eedull;
    if (getenv("RLY_SEED")) seed = strtoull(getenv("RLY_SEED"), NULL, 0);
    if (argc > 3 && strcmp(argv[1], "--write-seeds") == 0)
        return write_seeds(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 1, seed);
    const char *mutate_dir = NULL;
    int mutants = 20;
    if (argc > 2 && strcmp(argv[1], "--mutate") == 0) {
        mutate_dir = argv[2];
        if (argc > 3 && argv[3][0] != '-') mutants = atoi(argv[3]), argc--, argv++;
        argc -= 2, argv += 2;
    }
    int per_op = argc > 1 ? atoi(argv[1]) : 300;
    if (argc > 2) seed = strtoull(argv[2], NULL, 0);
    printf("fuzz_kernels_smoke: %d random recipes per operator, seed %llu (RLY_SEED=N replays)\n",
           per_op, (unsigned long long)seed);
    fuzz_keep_going = true;
    out_limit = (size_t)4 << 20;
    signal(SIGALRM, on_alarm);
    uint64_t x = seed | 1;
    uint8_t buf[320];
    Tally t = {0, 0, 0, ""};
    check_messages(&t);
    const char *only = getenv("RLY_FUZZ_OP"); /* one operator, to reproduce a failure */
    for (uint32_t id = 0; id < OP_ID_COUNT; id++) {
        const char *name = sup_op_name(id);
        if (only != NULL && strcmp(only, name) != 0) continue;
        long ok0 = t.ok;
        for (int k = 0; k < per_op; k++) {
            size_t len = random_recipe(&x, id, buf, sizeof buf);
            char what[64];
            snprintf(what, sizeof what, "random recipe %d", k);
            run_one(buf, len, what, &t);
        }
        if (getenv("RLY_VERBOSE")) printf("%-36s ran %3ld of %d\n", name, t.ok - ok0, per_op);
    }
    if (mutate_dir != NULL) {
        printf("fuzz_kernels_smoke: the seeds of %s and %d mutants of each\n", mutate_dir, mutants);
        if (run_mutants(mutate_dir, mutants, seed, &t) != 0) fuzz_n_failures++;
    }
    printf("%ld calls: %ld succeeded, %ld failed with a message; slowest %.3f s (%s)\n",
           t.ok + t.err, t.ok, t.err, t.slowest, t.slowest_op);
    printf("%ld passed, %zu failed\n", t.ok + t.err - (long)fuzz_n_failures, fuzz_n_failures);
    return fuzz_n_failures ? 1 : 0;
}
#endif
