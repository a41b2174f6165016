/* test_exec_file.c - tests of VM executable files (src/runtime/exec_file.c): executables built
 * by hand (every opcode, every KAttr kind, constants of many dtypes including 0-d and empty
 * tensors, constructors, the entry's interface) saved and loaded back field by field, through
 * memory, through a file (mmap) and at misaligned addresses; every truncation and many byte and
 * bit corruptions (a deterministic PRNG: RLY_SEED=N replays a run) must fail with a message or
 * give an executable that round-trips; hand-made hostile images must fail with the message
 * that names their fault; saving writes the whole file or nothing.
 *
 *   test_exec_file                      run the tests; ends with "N passed, N failed"
 *   test_exec_file --write-corpus DIR   write the fuzz seeds (tests/fuzz/corpus/exec) to DIR */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/exec_file.h"
#include "support/support.h"

static int n_passed, n_failed;

static bool check(bool ok, const char *what, ...) RLY_PRINTF(2, 3);
static bool check(bool ok, const char *what, ...) {
    if (ok) {
        n_passed++;
        return true;
    }
    n_failed++;
    va_list ap;
    va_start(ap, what);
    fputs("FAIL: ", stdout);
    vprintf(what, ap);
    putchar('\n');
    va_end(ap);
    return false;
}

/* ---- deterministic randomness ---------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static uint32_t rng_below(uint32_t n) { return (uint32_t)(rng_next() % n); }

/* ---- executables built by hand ----------------------------------------------------------- */

static VmExec *exec_new(void) {
    VmExec *x = sup_calloc(1, sizeof *x);
    arena_init(&x->arena);
    return x;
}

static void *alloc(VmExec *x, size_t n, size_t size) { return arena_array(&x->arena, n, size); }

/* An immortal tensor with deterministic random bytes (freed by rt_exec_release). */
static Value *make_const(rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    char err[256];
    RtTensor *t = rt_tensor_new(dt, ndim, shape, err, sizeof err);
    RLY_CHECK(t != NULL, "%s", err);
    size_t n = (size_t)sup_shape_numel(ndim, shape) * sup_dtype_size(dt);
    uint8_t *p = rt_tensor_data(t);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rng_next();
    if (dt == RLY_DTYPE_BOOL)
        for (size_t i = 0; i < n; i++)
            p[i] &= 1;
    t->hdr.rc = RT_IMMORTAL;
    return &t->hdr;
}

static const char *const sample_strs[] = {"", "a.rly:1:2: the match is not exhaustive", "a.rly:3:4",
                                          "lib.rly:10:1"};

/* An executable with every field used: all opcodes and scalar ops, every register kind, every
 * attribute kind, constants of 9 dtypes (0-d and empty ones too), constructors (one without a
 * type name), functions with and without locations, an empty function, an empty packed
 * function, inputs with `?` dims and a non-tensor, a tuple result. Not meant to validate. */
static VmExec *make_sample(void) {
    VmExec *x = exec_new();
    x->n_strs = RLY_ARRAY_LEN(sample_strs);
    x->strs = sample_strs;

    VmCtor *ctors = alloc(x, 3, sizeof *ctors);
    ctors[0] = (VmCtor){"Nil", "List", 0, 0};
    ctors[1] = (VmCtor){"Cons", "List", 1, 2};
    ctors[2] = (VmCtor){"Orphan", NULL, -5, 7};
    x->n_ctors = 3, x->ctors = ctors;

    static const struct {
        rly_dtype dt;
        uint32_t ndim;
        int64_t shape[4];
    } cs[] = {
        {RLY_DTYPE_F32, 2, {2, 3}}, {RLY_DTYPE_I64, 0, {0}},           {RLY_DTYPE_U8, 2, {0, 5}},
        {RLY_DTYPE_BOOL, 1, {4}},   {RLY_DTYPE_F16, 1, {3}},           {RLY_DTYPE_BF16, 2, {2, 2}},
        {RLY_DTYPE_F64, 1, {1}},    {RLY_DTYPE_I8, 3, {1, 1, 1}},      {RLY_DTYPE_U64, 1, {2}},
        {RLY_DTYPE_I32, 1, {0}},    {RLY_DTYPE_F32, 4, {1, 2, 1, 65}},
    };
    Value **consts = alloc(x, RLY_ARRAY_LEN(cs), sizeof *consts);
    for (size_t i = 0; i < RLY_ARRAY_LEN(cs); i++)
        consts[i] = make_const(cs[i].dt, cs[i].ndim, cs[i].shape);
    x->n_consts = RLY_ARRAY_LEN(cs), x->consts = consts;

    /* packed 0: nodes of every kind; a call with every attribute kind */
    KAttr *attrs = alloc(x, 9, sizeof *attrs);
    int64_t *ints = alloc(x, 3, sizeof *ints);
    double *floats = alloc(x, 3, sizeof *floats);
    ints[0] = -1, ints[1] = INT64_MAX, ints[2] = INT64_MIN;
    floats[0] = -1.0, floats[1] = 9.2e18, floats[2] = -9.2e18;
    double *fl2 = alloc(x, 2, sizeof *fl2);
    fl2[0] = 0.5, fl2[1] = -0.0;
    const char **sl = alloc(x, 2, sizeof *sl);
    sl[0] = "NCHW", sl[1] = "";
    attrs[0] = (KAttr){.name = "axis_none", .kind = KA_NONE};
    attrs[1] = (KAttr){.name = "axis", .kind = KA_INT, .i = -3, .f = -3.0};
    attrs[2] = (KAttr){.name = "dtype", .kind = KA_INT, .i = RLY_DTYPE_F16, .f = 9, .s = "float16"};
    attrs[3] = (KAttr){.name = "eps", .kind = KA_FLOAT, .i = 0, .f = 1e-5};
    attrs[4] = (KAttr){.name = "layout", .kind = KA_STR, .s = "NCHW16c"};
    attrs[5] = (KAttr){.name = "padding", .kind = KA_INTS, .n = 3, .ints = ints, .floats = floats};
    attrs[6] = (KAttr){.name = "empty", .kind = KA_INTS, .n = 0, .ints = ints, .floats = floats};
    attrs[7] = (KAttr){.name = "scales", .kind = KA_FLOATS, .n = 2, .floats = fl2};
    attrs[8] = (KAttr){.name = "names", .kind = KA_STRS, .n = 2, .strs = sl};
    uint32_t *args = alloc(x, 3, sizeof *args);
    args[0] = 0, args[1] = 1, args[2] = 2;
    VmNode *nodes = alloc(x, 5, sizeof *nodes);
    nodes[0] =
        (VmNode){.kind = VM_NODE_CALL, .op_id = OP_ID_ADD, .n_args = 2, .args = args, .loc = 3};
    nodes[1] = (VmNode){.kind = VM_NODE_CALL,
                        .op_id = OP_ID_COUNT - 1,
                        .n_args = 1,
                        .args = args + 2,
                        .n_attrs = 9,
                        .attrs = attrs,
                        .loc = 2};
    nodes[2] = (VmNode){.kind = VM_NODE_TUPLE, .n_args = 3, .args = args};
    nodes[3] = (VmNode){.kind = VM_NODE_FIELD, .index = 1, .n_args = 1, .args = args + 2};
    nodes[4] = (VmNode){.kind = VM_NODE_CONST, .index = 7};
    VmPacked *packed = alloc(x, 2, sizeof *packed);
    packed[0] = (VmPacked){"fused_add_everything", 2, 5, nodes, 6};
    packed[1] = (VmPacked){"fused_nothing", 0, 0, NULL, 0};
    x->n_packed = 2, x->packed = packed;

    /* function 0: every opcode, then every scalar op */
    uint32_t n_code = VM_OPCODE_COUNT + VM_SC_COUNT + 3;
    VmInstr *code = alloc(x, n_code, sizeof *code);
    uint32_t *loc = alloc(x, n_code, sizeof *loc);
    uint32_t k = 0;
    for (uint32_t op = 0; op < VM_OPCODE_COUNT; op++, k++)
        code[k] = (VmInstr){.op = (uint8_t)op,
                            .flags = (uint8_t)(op % 2),
                            .dst = op,
                            .a = op + 1,
                            .b = 2 * op,
                            .c = 3 * op,
                            .n = op % 4,
                            .args = op % 7,
                            .dtype = op % RLY_DTYPE_COUNT,
                            .imm = (int64_t)op * -1234567};
    for (uint32_t sc = 0; sc < VM_SC_COUNT; sc++, k++)
        code[k] = (VmInstr){.op = VM_SCALAR,
                            .sub = (uint8_t)sc,
                            .rk = (uint8_t)(sc % VM_RK_COUNT),
                            .dst = sc,
                            .a = sc + 2,
                            .b = sc + 3};
    code[k++] = (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_I64, .dst = 1, .imm = INT64_MIN};
    code[k] = (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_F64, .dst = 2};
    code[k++].fimm = -0.0;
    code[k] = (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_F32, .dst = 3};
    uint64_t nan_bits = 0x7ff8000000000123ull; /* a NaN with a payload: bits survive */
    memcpy(&code[k++].fimm, &nan_bits, sizeof nan_bits);
    for (uint32_t i = 0; i < n_code; i++)
        loc[i] = i % x->n_strs;
    uint8_t *rk = alloc(x, 2 * VM_RK_COUNT, 1);
    for (uint32_t i = 0; i < 2 * VM_RK_COUNT; i++)
        rk[i] = (uint8_t)(i % VM_RK_COUNT);
    uint32_t *pool = alloc(x, 10, sizeof *pool);
    for (uint32_t i = 0; i < 10; i++)
        pool[i] = i * 3 % 11;
    VmInstr *code1 = alloc(x, 2, sizeof *code1);
    code1[0] = (VmInstr){.op = VM_INVOKE, .flags = VM_F_TAIL, .a = 0, .n = 1, .args = 0};
    code1[1] = (VmInstr){.op = VM_RET, .a = 1};
    VmFunction *funcs = alloc(x, 3, sizeof *funcs);
    funcs[0] = (VmFunction){.name = "main",
                            .n_params = 2,
                            .n_captured = 0,
                            .n_regs = 2 * VM_RK_COUNT,
                            .reg_kind = rk,
                            .result_kind = VM_RK_VALUE,
                            .n_code = n_code,
                            .code = code,
                            .n_pool = 10,
                            .pool = pool,
                            .loc = loc};
    funcs[1] = (VmFunction){.name = "outer$lambda3",
                            .n_params = 2,
                            .n_captured = 1,
                            .n_regs = 3,
                            .reg_kind = rk,
                            .result_kind = VM_RK_F64,
                            .n_code = 2,
                            .code = code1,
                            .n_pool = 1,
                            .pool = pool};
    funcs[2] = (VmFunction){.name = "empty"};
    x->n_funcs = 3, x->funcs = funcs;

    /* the entry's interface */
    x->entry = 0;
    static const int64_t in_shape[] = {1, -1, 224};
    const char **in_names = alloc(x, 2, sizeof *in_names);
    in_names[0] = "data", in_names[1] = "state";
    VmTypeDesc *in_types = alloc(x, 2, sizeof *in_types);
    in_types[0] = (VmTypeDesc){true, RLY_DTYPE_F32, 3, in_shape, "Tensor[(1, ?, 224), float32]"};
    in_types[1] = (VmTypeDesc){false, 0, 0, NULL, "(Tensor[(2), int64], List[int32])"};
    x->n_inputs = 2, x->in_names = in_names, x->in_types = in_types;
    const char **out_names = alloc(x, 2, sizeof *out_names);
    out_names[0] = "output_0", out_names[1] = "probabilities";
    VmTypeDesc *out_types = alloc(x, 2, sizeof *out_types);
    out_types[0] = (VmTypeDesc){true, RLY_DTYPE_BOOL, 0, NULL, NULL};
    out_types[1] = (VmTypeDesc){true, RLY_DTYPE_F64, 1, in_shape + 2, "Tensor[(224), float64]"};
    x->n_outputs = 2, x->out_names = out_names, x->out_types = out_types;
    x->out_tuple = true;

    /* prepared forms: two of constant 0 (keys apart), one of 1 byte of constant 10 */
    static const size_t prep_bytes[] = {100, 64, 1};
    static const uint32_t prep_const[] = {0, 0, 10};
    VmPrep *preps = alloc(x, 3, sizeof *preps);
    for (int i = 0; i < 3; i++) {
        uint8_t *b = alloc(x, prep_bytes[i], 1);
        for (size_t j = 0; j < prep_bytes[i]; j++)
            b[j] = (uint8_t)rng_next();
        preps[i] = (VmPrep){prep_const[i], 7u + 2u * (uint32_t)i, prep_bytes[i], b};
    }
    x->n_preps = 3, x->preps = preps;

    /* outputs as leaves of nested tuples: output 0 at result.1.0, output 1 at result.2 */
    uint32_t *off = alloc(x, 3, sizeof *off), *path = alloc(x, 3, sizeof *path);
    off[0] = 0, off[1] = 2, off[2] = 3;
    path[0] = 1, path[1] = 0, path[2] = 2;
    x->out_path_off = off, x->out_path = path;
    return x;
}

/* A small executable that a VM could run: main() = exp(const [1, 2]). Its packed function's
 * node has `n_attrs` attributes (0: as exp has; tests add one to patch). */
static VmExec *make_minimal(uint32_t n_attrs) {
    VmExec *x = exec_new();
    static const char *const strs[] = {""};
    x->n_strs = 1, x->strs = strs;
    int64_t shape[] = {2};
    char err[256];
    RtTensor *t = rt_tensor_new(RLY_DTYPE_F32, 1, shape, err, sizeof err);
    ((float *)rt_tensor_data(t))[0] = 1.0f, ((float *)rt_tensor_data(t))[1] = 2.0f;
    t->hdr.rc = RT_IMMORTAL;
    Value **consts = alloc(x, 1, sizeof *consts);
    consts[0] = &t->hdr;
    x->n_consts = 1, x->consts = consts;
    uint32_t *nargs = alloc(x, 1, sizeof *nargs); /* value 0: the input */
    KAttr *attrs = NULL;
    if (n_attrs) {
        attrs = alloc(x, n_attrs, sizeof *attrs);
        for (uint32_t i = 0; i < n_attrs; i++)
            attrs[i] = (KAttr){.name = "axis", .kind = KA_INT, .i = 1, .f = 1.0};
    }
    VmNode *node = alloc(x, 1, sizeof *node);
    *node = (VmNode){.kind = VM_NODE_CALL,
                     .op_id = OP_ID_EXP,
                     .n_args = 1,
                     .args = nargs,
                     .n_attrs = n_attrs,
                     .attrs = attrs};
    VmPacked *pk = alloc(x, 1, sizeof *pk);
    *pk = (VmPacked){"fused_exp", 1, 1, node, 1};
    x->n_packed = 1, x->packed = pk;
    VmInstr *code = alloc(x, 3, sizeof *code);
    code[0] = (VmInstr){.op = VM_LOAD_CONST, .dst = 0, .a = 0};
    code[1] = (VmInstr){.op = VM_INVOKE_PACKED, .dst = 1, .a = 0, .n = 1, .args = 0};
    code[2] = (VmInstr){.op = VM_RET, .a = 1};
    uint8_t *rk = alloc(x, 2, 1); /* both VM_RK_VALUE */
    uint32_t *pool = alloc(x, 1, sizeof *pool);
    pool[0] = 0;
    uint32_t *loc = alloc(x, 3, sizeof *loc);
    VmFunction *fn = alloc(x, 1, sizeof *fn);
    *fn = (VmFunction){.name = "main",
                       .n_regs = 2,
                       .reg_kind = rk,
                       .result_kind = VM_RK_VALUE,
                       .n_code = 3,
                       .code = code,
                       .n_pool = 1,
                       .pool = pool,
                       .loc = loc};
    x->n_funcs = 1, x->funcs = fn;
    const char **out_names = alloc(x, 1, sizeof *out_names);
    out_names[0] = "output_0";
    VmTypeDesc *out_types = alloc(x, 1, sizeof *out_types);
    static const int64_t out_shape[] = {2};
    out_types[0] = (VmTypeDesc){true, RLY_DTYPE_F32, 1, out_shape, "Tensor[(2), float32]"};
    x->n_outputs = 1, x->out_names = out_names, x->out_types = out_types;
    static const float prep_blob[3] = {2.0f, 1.0f, 0.5f}; /* a prepared form of constant 0 */
    VmPrep *prep = alloc(x, 1, sizeof *prep);
    *prep = (VmPrep){0, 0x1234, sizeof prep_blob, prep_blob};
    x->n_preps = 1, x->preps = prep;
    return x;
}

static void encode(const VmExec *x, StrBuf *out) {
    char err[512];
    bool ok = rt_exec_encode(x, out, err, sizeof err);
    RLY_CHECK(ok, "encode: %s", err);
}

/* ---- images as sections (the test knows the format: exec_file.c's top comment) ------------ */

enum {
    K_STRINGS = 1,
    K_STRING_BYTES,
    K_STRS,
    K_CTORS,
    K_PACKED,
    K_FUNCS,
    K_ENTRY,
    K_CONSTS,
    K_DATA,
    K_PREP,
    K_PREP_DATA
};

typedef struct Img {
    uint32_t version, flags, n;
    uint32_t kind[16];
    StrBuf sec[16];
} Img;

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p) { return get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }
static void set_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void set_u64(uint8_t *p, uint64_t v) {
    set_u32(p, (uint32_t)v);
    set_u32(p + 4, (uint32_t)(v >> 32));
}

static void img_split(const StrBuf *image, Img *m) {
    const uint8_t *p = (const uint8_t *)image->data;
    memset(m, 0, sizeof *m);
    m->version = get_u32(p + 4), m->flags = get_u32(p + 8), m->n = get_u32(p + 12);
    RLY_CHECK(m->n <= 16, "too many sections");
    for (uint32_t s = 0; s < m->n; s++) {
        const uint8_t *row = p + 16 + 24 * s;
        m->kind[s] = get_u32(row);
        sb_putn(&m->sec[s], image->data + get_u64(row + 8), (size_t)get_u64(row + 16));
    }
}

/* Lay the sections out again (8-byte aligned, DATA 64) into out. */
static void img_join(const Img *m, StrBuf *out) {
    out->len = 0;
    uint8_t head[16 + 24 * 16] = {0};
    memcpy(head, "RLYX", 4);
    set_u32(head + 4, m->version), set_u32(head + 8, m->flags), set_u32(head + 12, m->n);
    uint64_t pos = 16 + 24 * (uint64_t)m->n, off[16];
    for (uint32_t s = 0; s < m->n; s++) {
        uint64_t align = m->kind[s] == K_DATA || m->kind[s] == K_PREP_DATA ? 64 : 8;
        pos = (pos + align - 1) / align * align;
        off[s] = pos;
        set_u32(head + 16 + 24 * s, m->kind[s]);
        set_u64(head + 16 + 24 * s + 8, pos);
        set_u64(head + 16 + 24 * s + 16, m->sec[s].len);
        pos += m->sec[s].len;
    }
    sb_putn(out, (const char *)head, 16 + 24 * (size_t)m->n);
    for (uint32_t s = 0; s < m->n; s++) {
        while (out->len < off[s])
            sb_putc(out, 0);
        sb_putn(out, m->sec[s].data, m->sec[s].len);
    }
}

static StrBuf *img_sec(Img *m, uint32_t kind) {
    for (uint32_t s = 0; s < m->n; s++)
        if (m->kind[s] == kind) return &m->sec[s];
    RLY_UNREACHABLE();
}

static void img_free(Img *m) {
    for (int s = 0; s < 16; s++)
        sb_free(&m->sec[s]);
}

/* Decode bytes from an exact-size heap copy (so ASan sees any read past the end). The result's
 * strings (and perhaps constants) point into the copy: *keep, to free after the result. */
static VmExec *decode_copy(const void *data, size_t len, unsigned flags, char *err, size_t cap,
                           uint8_t **keep) {
    uint8_t *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, data, len);
    VmExec *x = rt_exec_decode(copy, len, flags, err, cap);
    *keep = copy;
    return x;
}

/* ---- round trips ------------------------------------------------------------------------- */

static bool const_inside(const VmExec *x, uint32_t i, const void *lo, size_t len) {
    const uint8_t *p = rt_tensor_data(RT_TENSOR(x->consts[i]));
    return p >= (const uint8_t *)lo && p <= (const uint8_t *)lo + len;
}

static bool consts_aligned(const VmExec *x) {
    for (uint32_t i = 0; i < x->n_consts; i++)
        if ((uintptr_t)rt_tensor_data(RT_TENSOR(x->consts[i])) % 64 != 0) return false;
    return true;
}

static void test_round_trip_memory(const char *label, VmExec *orig) {
    StrBuf img = {0}, img2 = {0};
    encode(orig, &img);
    char err[512], why[256];
    /* a 64-aligned copy: constants are used in place */
    uint8_t *buf = aligned_alloc(64, (img.len + 63) / 64 * 64);
    memcpy(buf, img.data, img.len);
    VmExec *x = rt_exec_decode(buf, img.len, 0, err, sizeof err);
    if (check(x != NULL, "%s: decode: %s", label, err)) {
        check(rt_exec_equal(orig, x, why, sizeof why), "%s: round trip: %s", label, why);
        check(consts_aligned(x), "%s: constants 64-byte aligned", label);
        bool inside = true;
        for (uint32_t i = 0; i < x->n_consts; i++)
            inside &= const_inside(x, i, buf, img.len);
        check(inside, "%s: aligned image: constants used in place", label);
        encode(x, &img2);
        check(img2.len == img.len && memcmp(img.data, img2.data, img.len) == 0,
              "%s: encoding is a fixpoint", label);
        check(x->mapping == NULL, "%s: no mapping from bytes", label);
        rt_exec_release(x);
    }
    /* every misalignment mod 64 that matters: constants are copied, aligned */
    for (size_t shift = 1; shift < 64; shift += 7) {
        uint8_t *odd = aligned_alloc(64, (img.len + shift + 63) / 64 * 64);
        memcpy(odd + shift, img.data, img.len);
        x = rt_exec_decode(odd + shift, img.len, 0, err, sizeof err);
        if (check(x != NULL, "%s: decode at +%zu: %s", label, shift, err)) {
            check(rt_exec_equal(orig, x, why, sizeof why), "%s: at +%zu: %s", label, shift, why);
            check(consts_aligned(x), "%s: at +%zu: constants aligned", label, shift);
            bool outside = true;
            for (uint32_t i = 0; i < x->n_consts; i++)
                outside &= !const_inside(x, i, odd, img.len + shift);
            check(outside, "%s: at +%zu: constants copied", label, shift);
        }
        rt_exec_release(x);
        free(odd);
    }
    free(buf);
    sb_free(&img);
    sb_free(&img2);
}

static char tmp_dir[256];

static void tmp_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", tmp_dir, name);
}

static void test_round_trip_file(const char *label, VmExec *orig) {
    char path[512], err[512], why[256];
    tmp_path(path, sizeof path, "rt.rlyx");
    if (!check(vm_exec_save(orig, path, err, sizeof err), "%s: save: %s", label, err)) return;
    VmExec *x = rt_exec_load_file(path, 0, err, sizeof err);
    if (check(x != NULL, "%s: load: %s", label, err)) {
        check(rt_exec_equal(orig, x, why, sizeof why), "%s: file round trip: %s", label, why);
        check(x->mapping != NULL && x->mapping_len > 0, "%s: mapped", label);
        check(consts_aligned(x), "%s: mapped constants aligned", label);
        bool inside = true;
        for (uint32_t i = 0; i < x->n_consts; i++)
            inside &= const_inside(x, i, x->mapping, x->mapping_len);
        check(inside, "%s: mapped constants used in place", label);
        /* the file holds exactly the encoding */
        StrBuf img = {0};
        encode(orig, &img);
        char *data = NULL;
        size_t len = 0;
        check(sup_read_file(path, &data, &len, err, sizeof err) && len == img.len &&
                  memcmp(data, img.data, len) == 0,
              "%s: the file is the encoding", label);
        free(data);
        sb_free(&img);
        rt_exec_release(x);
    }
    unlink(path);
}

/* vm_exec_load = decode + vm_exec_validate + vm_exec_bind: a minimal executable loads when the
 * VM accepts it in memory; until the VM exists its rejection is reported as such. */
static void test_load_checked(void) {
    VmExec *orig = make_minimal(0);
    char path[512], err[512], why[256];
    tmp_path(path, sizeof path, "min.rlyx");
    check(vm_exec_save(orig, path, err, sizeof err), "minimal: save: %s", err);
    bool valid = vm_exec_validate(orig, why, sizeof why);
    VmExec *x = vm_exec_load(path, err, sizeof err);
    if (valid) {
        if (check(x != NULL, "minimal: vm_exec_load: %s", err))
            check(rt_exec_equal(orig, x, why, sizeof why), "minimal: loaded: %s", why);
        StrBuf img = {0};
        encode(orig, &img);
        VmExec *y = vm_exec_load_bytes(img.data, img.len, err, sizeof err);
        if (check(y != NULL, "minimal: vm_exec_load_bytes: %s", err)) vm_exec_free(y);
        sb_free(&img);
    } else {
        printf("note: vm_exec_validate rejects the minimal executable (%s): checked loads fail\n",
               why);
        check(x == NULL && strstr(err, "invalid executable") != NULL &&
                  strncmp(err, path, strlen(path)) == 0,
              "minimal: an invalid executable is reported as such, after the path: %s", err);
    }
    if (x != NULL) vm_exec_free(x);
    unlink(path);
    rt_exec_release(orig);
}

/* ---- hostile images -------------------------------------------------------------------- */

/* Decoding image must fail with a message containing `want`. */
static void expect_error(const char *label, const StrBuf *image, const char *want) {
    char err[512] = "";
    uint8_t *keep;
    VmExec *x = decode_copy(image->data, image->len, 0, err, sizeof err, &keep);
    bool decoded = x != NULL;
    rt_exec_release(x);
    free(keep);
    if (decoded) {
        check(false, "%s: decoded, expected \"%s\"", label, want);
        return;
    }
    check(strncmp(err, "rlyx: ", 6) == 0 && strstr(err, want) != NULL,
          "%s: message \"%s\" lacks \"%s\"", label, err, want);
}

typedef void (*Patch)(Img *m);

static void expect_patch(const char *label, VmExec *x, Patch patch, const char *want) {
    StrBuf image = {0}, out = {0};
    encode(x, &image);
    Img m;
    img_split(&image, &m);
    patch(&m);
    img_join(&m, &out);
    expect_error(label, &out, want);
    img_free(&m);
    sb_free(&image);
    sb_free(&out);
}

static void p_version(Img *m) { m->version = 3; }
static void p_flags(Img *m) { m->flags = 0x10; }
static void p_drop_entry(Img *m) { /* the last row takes its place */
    for (uint32_t s = 0; s < m->n; s++)
        if (m->kind[s] == K_ENTRY) {
            StrBuf gone = m->sec[s];
            m->n--;
            m->kind[s] = m->kind[m->n], m->sec[s] = m->sec[m->n], m->sec[m->n] = gone;
            break;
        }
}
static void p_dup(Img *m) { m->kind[0] = K_STRS; }
static void p_unknown_kind(Img *m) { m->kind[2] = 77; }
static void p_funcs_huge(Img *m) { /* 2^32-1 functions in a 4-byte section */
    StrBuf *s = img_sec(m, K_FUNCS);
    s->len = 0;
    sb_putn(s, "\xff\xff\xff\xff", 4);
}
static void p_trailing(Img *m) { sb_putn(img_sec(m, K_CTORS), "\0\0\0", 3); }
static void p_str_id(Img *m) { /* function 0's name: id 1000 */
    set_u32((uint8_t *)img_sec(m, K_FUNCS)->data + 4, 1000);
}
static void p_str_unterminated(Img *m) { /* string 0 ("") takes the next string's first byte */
    set_u32((uint8_t *)img_sec(m, K_STRINGS)->data + 8, 1);
}
static void p_str_nul(Img *m) { /* last string's NUL moved inside it */
    StrBuf *b = img_sec(m, K_STRING_BYTES);
    b->data[b->len - 2] = '\0';
}
static void p_str_overlap(Img *m) { /* string 1 starts on string 0's NUL */
    set_u32((uint8_t *)img_sec(m, K_STRINGS)->data + 12, 0);
}
static void p_result_kind(Img *m) { set_u32((uint8_t *)img_sec(m, K_FUNCS)->data + 20, 9); }
static void p_has_loc(Img *m) { set_u32((uint8_t *)img_sec(m, K_FUNCS)->data + 32, 2); }
/* packed 0, node 0 begins at 4 + 16 = 20: kind, op_id, index, loc, out_tuple (36), n_out,
 * n_args (44), n_attrs, args */
static void p_node_kind(Img *m) { set_u32((uint8_t *)img_sec(m, K_PACKED)->data + 20, 4); }
static void p_user_op(Img *m) {
    set_u32((uint8_t *)img_sec(m, K_PACKED)->data + 24, OP_ID_COUNT + 1);
}
static void p_out_tuple_node(Img *m) { set_u32((uint8_t *)img_sec(m, K_PACKED)->data + 36, 2); }
static void p_n_args(Img *m) { set_u32((uint8_t *)img_sec(m, K_PACKED)->data + 44, 1u << 30); }
/* its attribute 0 begins at 20 + 32 + 4 = 56: name, kind (60), i, f, s (80), n (84), arrays (88) */
static void p_attr_kind(Img *m) { set_u32((uint8_t *)img_sec(m, K_PACKED)->data + 60, 99); }
static void p_attr_ints(Img *m) { set_u32((uint8_t *)img_sec(m, K_PACKED)->data + 60, KA_INTS); }
static void p_attr_str(Img *m) { set_u32((uint8_t *)img_sec(m, K_PACKED)->data + 60, KA_STR); }
static void p_attr_n(Img *m) { set_u32((uint8_t *)img_sec(m, K_PACKED)->data + 84, 5); }
static void p_attr_arrays(Img *m) { set_u32((uint8_t *)img_sec(m, K_PACKED)->data + 88, 8); }
/* constant 0 at 4: dtype, ndim, offset (12), nbytes (20), dims (28) */
static void p_const_dtype(Img *m) { set_u32((uint8_t *)img_sec(m, K_CONSTS)->data + 4, 13); }
static void p_const_nbytes(Img *m) { set_u64((uint8_t *)img_sec(m, K_CONSTS)->data + 20, 12); }
static void p_const_offset(Img *m) { set_u64((uint8_t *)img_sec(m, K_CONSTS)->data + 12, 8); }
static void p_const_past(Img *m) { set_u64((uint8_t *)img_sec(m, K_CONSTS)->data + 12, 64); }
static void p_const_dim(Img *m) { set_u64((uint8_t *)img_sec(m, K_CONSTS)->data + 28, -2); }
static void p_const_ndim(Img *m) { set_u32((uint8_t *)img_sec(m, K_CONSTS)->data + 8, 40); }
/* the entry: entry, out_tuple (4), n_inputs (8) = 0, n_outputs (12), output 0: name (16),
 * is_tensor (20), dtype (24), ndim (28), text, dims */
static void p_out_tuple(Img *m) { set_u32((uint8_t *)img_sec(m, K_ENTRY)->data + 4, 7); }
static void p_out_dtype(Img *m) { set_u32((uint8_t *)img_sec(m, K_ENTRY)->data + 24, 200); }
static void p_out_ndim(Img *m) { set_u32((uint8_t *)img_sec(m, K_ENTRY)->data + 28, 1000); }

/* PREP's entry i: u32 const | u32 0 | u64 key | u64 offset | u64 nbytes, after a u32 count */
static uint8_t *prep_entry(Img *m, uint32_t i) {
    return (uint8_t *)img_sec(m, K_PREP)->data + 4 + 32 * i;
}
static void p_prep_const(Img *m) { set_u32(prep_entry(m, 0), 5); }
static void p_prep_reserved(Img *m) { set_u32(prep_entry(m, 0) + 4, 1); }
static void p_prep_offset(Img *m) { set_u64(prep_entry(m, 0) + 16, 8); }
static void p_prep_past(Img *m) { set_u64(prep_entry(m, 0) + 24, 65); }
static void p_prep_huge(Img *m) { set_u64(prep_entry(m, 0) + 24, UINT64_MAX - 3); }
static void p_prep_zero(Img *m) { set_u64(prep_entry(m, 0) + 24, 0); }
static void p_prep_count(Img *m) { set_u32((uint8_t *)img_sec(m, K_PREP)->data, 2); }
static void p_prep_order(Img *m) { set_u64(prep_entry(m, 1) + 8, 1); }     /* key 9 -> 1 after 7 */
static void p_prep_overlap(Img *m) { set_u64(prep_entry(m, 1) + 16, 64); } /* in entry 0 */
static void p_prep_v1(Img *m) { m->version = 1; }
static void p_drop_prep(Img *m) { /* a version-1 image: the two last sections gone */
    m->version = 1;
    m->n -= 2;
    img_sec(m, K_ENTRY)->len -= 4; /* and ENTRY's has_paths (0) */
}
/* the sample's ENTRY ends with has_paths 1 and two paths: u32 2 | u32 1 | u32 0 | u32 1 | u32 2 */
static uint8_t *entry_tail(Img *m, uint32_t back) {
    StrBuf *e = img_sec(m, K_ENTRY);
    return (uint8_t *)e->data + e->len - back;
}
static void p_path_depth0(Img *m) { set_u32(entry_tail(m, 20), 0); }
static void p_path_deep(Img *m) { set_u32(entry_tail(m, 20), 5000); }
static void p_path_flag(Img *m) { set_u32(entry_tail(m, 24), 2); }

static void test_hostile(void) {
    VmExec *mini = make_minimal(0), *attr = make_minimal(1);
    StrBuf image = {0}, bad = {0};
    encode(mini, &image);

    sb_putn(&bad, "RLYZ", 4);
    sb_putn(&bad, image.data + 4, image.len - 4);
    expect_error("magic", &bad, "not an rly executable");
    bad.len = 0;
    expect_error("empty", &bad, "not an rly executable");
    sb_putn(&bad, image.data, 10);
    expect_error("short header", &bad, "the header is truncated");
    bad.len = 0;
    sb_putn(&bad, image.data, image.len);
    set_u32((uint8_t *)bad.data + 12, 1000);
    expect_error("table", &bad, "1000 sections");
    set_u32((uint8_t *)bad.data + 12, 60);
    expect_error("table past end", &bad, "the section table (60 sections) extends past the end");
    memcpy(bad.data, image.data, image.len);
    set_u64((uint8_t *)bad.data + 16 + 24 * 5 + 16, 1ull << 40); /* row 5 (functions) */
    expect_error("length", &bad, "section 5 (functions) extends past the end of the file");
    memcpy(bad.data, image.data, image.len);
    set_u64((uint8_t *)bad.data + 16 + 24 * 5 + 8, UINT64_MAX - 7); /* offset + length wraps */
    expect_error("offset wrap", &bad, "section 5 (functions) extends past the end of the file");
    memcpy(bad.data, image.data, image.len);
    set_u64((uint8_t *)bad.data + 16 + 24 * 5 + 8,
            get_u64((uint8_t *)bad.data + 16 + 24 * 5 + 8) + 4);
    expect_error("section alignment", &bad, "section 5 (functions) is not 8-byte aligned");
    memcpy(bad.data, image.data, image.len);
    set_u64((uint8_t *)bad.data + 16 + 24 * 5 + 8, get_u64((uint8_t *)bad.data + 16 + 24 * 4 + 8));
    expect_error("overlap", &bad, "sections 4 (packed) and 5 (functions) overlap");
    memcpy(bad.data, image.data, image.len);
    set_u64((uint8_t *)bad.data + 16 + 24 * 0 + 8, 8);
    expect_error("over the header", &bad, "section 0 (strings) overlaps the header");
    memcpy(bad.data, image.data, image.len);
    set_u32((uint8_t *)bad.data + 16 + 4, 1);
    expect_error("reserved", &bad, "section 0 (strings) has a nonzero reserved word");

    expect_patch("version", mini, p_version, "version 3, this build reads versions 1 to 2");
    expect_patch("flags", mini, p_flags, "unknown flags 0x10");
    expect_patch("missing", mini, p_drop_entry, "the entry section is missing");
    expect_patch("duplicate", mini, p_dup, "repeats section");
    expect_patch("unknown kind", mini, p_unknown_kind, "section 2 has unknown kind 77");
    expect_patch("huge count", mini, p_funcs_huge,
                 "4294967295 functions need more bytes than section 5 (functions) has left");
    expect_patch("trailing", mini, p_trailing, "section 3 (constructors) has 3 bytes past");
    expect_patch("string id", mini, p_str_id,
                 "function 0: its name: string id 1000 is out of range");
    expect_patch("unterminated", mini, p_str_unterminated, "string 0: is not followed by a NUL");
    expect_patch("inner NUL", mini, p_str_nul, "contains a NUL byte");
    expect_patch("string overlap", mini, p_str_overlap, "string 1: overlaps the string before");
    expect_patch("result kind", mini, p_result_kind, "function 0: unknown result kind 9");
    expect_patch("has_loc", mini, p_has_loc, "function 0: has_loc is 2, not 0 or 1");
    expect_patch("node kind", mini, p_node_kind, "packed function 0, node 0: unknown node kind 4");
    expect_patch("user op", mini, p_user_op, "is not a builtin operator");
    expect_patch("n_args", mini, p_n_args,
                 "1073741824 arguments need more bytes than section 4 (packed) has left");
    expect_patch("node out_tuple", mini, p_out_tuple_node, "out_tuple is 2 (0 or 1)");
    expect_patch("attr kind", attr, p_attr_kind, "attribute axis has an unknown kind");
    expect_patch("attr ints", attr, p_attr_ints, "attribute axis is an integer list without");
    expect_patch("attr str", attr, p_attr_str, "attribute axis is a string attribute without");
    expect_patch("attr n", attr, p_attr_n, "attribute axis has a length but no items");
    expect_patch("attr arrays", attr, p_attr_arrays, "attribute axis has unknown array bits");
    expect_patch("const dtype", mini, p_const_dtype, "constant 0: unknown dtype 13");
    expect_patch("const nbytes", mini, p_const_nbytes,
                 "constant 0: has 12 bytes, but its shape and dtype need 8");
    expect_patch("const offset", mini, p_const_offset, "constant 0: its bytes are not 64-byte");
    expect_patch("const past", mini, p_const_past, "its bytes extend past the end of section 8");
    expect_patch("const dim", mini, p_const_dim, "constant 0: its shape is");
    expect_patch("const ndim", mini, p_const_ndim, "constant 0: 40 dims (at most 32)");
    expect_patch("out_tuple", mini, p_out_tuple, "out_tuple is 7, not 0 or 1");
    expect_patch("out dtype", mini, p_out_dtype, "output 0: the type has an unknown dtype");
    expect_patch("out ndim", mini, p_out_ndim, "output 0: the type has 1000 dims");
    expect_patch("prep const", mini, p_prep_const,
                 "prepared constant 0: names constant 5 (1 constants)");
    expect_patch("prep reserved", mini, p_prep_reserved, "has a nonzero reserved word");
    expect_patch("prep offset", mini, p_prep_offset, "its bytes are not 64-byte aligned");
    expect_patch("prep past", mini, p_prep_past, "extend past the end of section 10");
    expect_patch("prep huge", mini, p_prep_huge, "prepared constant 0: has 18446744073709551612");
    expect_patch("prep zero", mini, p_prep_zero, "prepared constant 0: has 0 bytes");
    expect_patch("prep count", mini, p_prep_count,
                 "2 prepared constants need more bytes than section 9 (prepared) has left");
    VmExec *sample = make_sample();
    expect_patch("prep order", sample, p_prep_order, "prepared constant 1: is not after");
    expect_patch("prep overlap", sample, p_prep_overlap,
                 "prepared constant 1: its bytes overlap the entry before it");
    expect_patch("path depth 0", sample, p_path_depth0, "output 0: a path of 0 fields");
    expect_patch("path depth", sample, p_path_deep, "output 0: a path of 5000 fields");
    expect_patch("path flag", sample, p_path_flag, "has_paths is 2");
    rt_exec_release(sample);
    expect_patch("version 1 with PREP", mini, p_prep_v1, "section 9 has unknown kind 10");
    { /* a version-1 image (no PREP) still loads, with nothing prepared */
        StrBuf v1 = {0}, img1 = {0};
        encode(mini, &img1);
        Img m1;
        img_split(&img1, &m1);
        p_drop_prep(&m1);
        img_join(&m1, &v1);
        char err[512] = "", why[256] = "";
        uint8_t *keep;
        VmExec *x1 = decode_copy(v1.data, v1.len, 0, err, sizeof err, &keep);
        if (check(x1 != NULL, "version 1 image: %s", err)) {
            check(x1->n_preps == 0, "version 1: nothing prepared");
            check(x1->n_consts == 1 && x1->n_funcs == 1, "version 1: decoded");
            (void)why;
        }
        rt_exec_release(x1);
        free(keep);
        img_free(&m1);
        sb_free(&v1);
        sb_free(&img1);
    }

    /* overlapping constants: constant 1 given constant 0's bytes */
    VmExec *two = make_minimal(0);
    Value **c2 = alloc(two, 2, sizeof *c2);
    c2[0] = two->consts[0];
    int64_t sh[] = {16};
    c2[1] = make_const(RLY_DTYPE_F32, 1, sh);
    two->consts = c2, two->n_consts = 2;
    image.len = 0;
    encode(two, &image);
    Img m;
    img_split(&image, &m);
    StrBuf *cs = img_sec(&m, K_CONSTS);
    set_u64((uint8_t *)cs->data + 4 + 32 + 8, 0); /* constant 1's offset (after constant 0) */
    img_join(&m, &bad);
    expect_error("const overlap", &bad, "constant 1: its bytes overlap the constant before it");
    img_free(&m);

    rt_exec_release(two);
    rt_exec_release(mini);
    rt_exec_release(attr);
    sb_free(&image);
    sb_free(&bad);
}

/* ---- truncation and corruption ------------------------------------------------------------ */

/* A decoded corruption must be a well-formed executable: it re-encodes, decodes equal, and the
 * validator runs on it without crashing. */
static void check_decoded(const char *label, size_t at, VmExec *x) {
    StrBuf img = {0};
    char err[512], why[256];
    if (!check(rt_exec_encode(x, &img, err, sizeof err), "%s at %zu: re-encode: %s", label, at,
               err)) {
        sb_free(&img);
        return;
    }
    uint8_t *keep;
    VmExec *y = decode_copy(img.data, img.len, 0, err, sizeof err, &keep);
    if (check(y != NULL, "%s at %zu: re-decode: %s", label, at, err))
        check(rt_exec_equal(x, y, why, sizeof why), "%s at %zu: re-decode: %s", label, at, why);
    rt_exec_release(y);
    free(keep);
    (void)vm_exec_validate(x, why, sizeof why);
    sb_free(&img);
}

static void test_truncation(const char *label, VmExec *orig) {
    StrBuf img = {0};
    encode(orig, &img);
    size_t clean = 0;
    for (size_t len = 0; len < img.len; len++) {
        char err[512] = "";
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, img.data, len);
        VmExec *x = rt_exec_decode(copy, len, len % 2 ? RT_EXEC_CHECK : 0, err, sizeof err);
        if (x == NULL && strncmp(err, "rlyx: ", 6) == 0 && err[6] != '\0') clean++;
        rt_exec_release(x);
        free(copy);
    }
    check(clean == img.len, "%s: %zu of %zu truncations fail with a message", label, clean,
          img.len);
    sb_free(&img);
}

/* Every byte inverted in turn, then random corruptions: bits, bytes, words set to edge values,
 * several at once. Each decode fails with a message or gives an executable that round-trips. */
static void test_corruption(const char *label, VmExec *orig, uint32_t n_random) {
    StrBuf img = {0};
    encode(orig, &img);
    size_t n_ok = 0, n_err = 0, bad = 0;
    uint8_t *buf = malloc(img.len);
    for (size_t round = 0; round < img.len + n_random; round++) {
        memcpy(buf, img.data, img.len);
        size_t at;
        if (round < img.len) {
            at = round;
            buf[at] ^= 0xff;
        } else {
            uint32_t n_mut = 1 + rng_below(4);
            /* the header, the table and the small sections are hit more often than DATA */
            size_t span = rng_below(2) ? (img.len < 600 ? img.len : 600) : img.len;
            at = rng_below((uint32_t)span);
            for (uint32_t k = 0; k < n_mut; k++) {
                size_t p = k == 0 ? at : rng_below((uint32_t)span);
                switch (rng_below(4)) {
                case 0: buf[p] ^= (uint8_t)(1u << rng_below(8)); break;
                case 1: buf[p] = (uint8_t)rng_next(); break;
                default: {
                    static const uint32_t edge[] = {0,          1,          2,          7,
                                                    8,          63,         64,         0x7fffffff,
                                                    0x80000000, 0xfffffffe, 0xffffffff, 1u << 20};
                    uint32_t v = rng_below(3) ? edge[rng_below(RLY_ARRAY_LEN(edge))]
                                              : (uint32_t)img.len + rng_below(64) - 32;
                    p &= ~(size_t)3;
                    if (p + 4 <= img.len) set_u32(buf + p, v);
                    break;
                }
                }
            }
        }
        char err[512] = "";
        uint8_t *keep;
        VmExec *x = decode_copy(buf, img.len, 0, err, sizeof err, &keep);
        if (x == NULL) {
            free(keep);
            n_err++;
            if (strncmp(err, "rlyx: ", 6) != 0 || err[6] == '\0') {
                if (bad++ < 5)
                    check(false, "%s: corruption at %zu: message \"%s\"", label, at, err);
            }
            continue;
        }
        n_ok++;
        check_decoded(label, at, x);
        rt_exec_release(x);
        free(keep);
    }
    printf("%s: %zu corruptions decoded (and round-tripped), %zu rejected\n", label, n_ok, n_err);
    check(bad == 0 && n_err > 0, "%s: corruptions fail cleanly", label);
    free(buf);
    sb_free(&img);
}

/* ---- saving --------------------------------------------------------------------------------- */

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void test_save_errors(void) {
    char path[512], err[512];
    tmp_path(path, sizeof path, "user.rlyx");
    unlink(path);
    VmExec *x = make_minimal(0);
    VmNode *node = (VmNode *)&x->packed[0].nodes[0];
    node->op_id = OP_ID_COUNT + 3;
    check(!vm_exec_save(x, path, err, sizeof err) && strstr(err, "user-registered operator") &&
              strstr(err, path),
          "user operator: %s", err);
    check(!exists(path), "user operator: no file left");
    /* a failed save over an existing file leaves it as it was */
    FILE *f = fopen(path, "w");
    fputs("old contents", f);
    fclose(f);
    check(!vm_exec_save(x, path, err, sizeof err), "user operator over a file");
    char *data = NULL;
    size_t len = 0;
    check(sup_read_file(path, &data, &len, err, sizeof err) && len == 12 &&
              memcmp(data, "old contents", 12) == 0,
          "a failed save keeps the old file");
    free(data);
    node->op_id = OP_ID_EXP;
    check(vm_exec_save(x, path, err, sizeof err), "save over a file: %s", err);
    VmExec *y = rt_exec_load_file(path, 0, err, sizeof err);
    check(y != NULL, "saved over a file loads: %s", err);
    rt_exec_release(y);
    char dir_tmp[600];
    snprintf(dir_tmp, sizeof dir_tmp, "%s/no/such/dir/x.rlyx", tmp_dir);
    check(!vm_exec_save(x, dir_tmp, err, sizeof err) && err[0], "unwritable path: %s", err);
    /* a constant that is not a tensor */
    Value *saved = x->consts[0];
    ((Value **)x->consts)[0] = rt_unit();
    check(!vm_exec_save(x, path, err, sizeof err) && strstr(err, "constant 0 is not a tensor"),
          "non-tensor constant: %s", err);
    ((Value **)x->consts)[0] = saved;
    /* a missing name */
    ((VmFunction *)x->funcs)[0].name = NULL;
    check(!vm_exec_save(x, path, err, sizeof err) && strstr(err, "a function's name is missing"),
          "missing name: %s", err);
    ((VmFunction *)x->funcs)[0].name = "main";
    /* a type the loader would reject */
    ((VmTypeDesc *)x->out_types)[0].dtype = 99;
    check(!vm_exec_save(x, path, err, sizeof err) && strstr(err, "unknown dtype"), "bad type: %s",
          err);
    ((VmTypeDesc *)x->out_types)[0].dtype = RLY_DTYPE_F32;
    unlink(path);
    rt_exec_release(x);
}

static void test_load_errors(void) {
    char path[512], err[512];
    tmp_path(path, sizeof path, "missing.rlyx");
    unlink(path);
    check(rt_exec_load_file(path, 0, err, sizeof err) == NULL && strstr(err, "cannot open"),
          "missing file: %s", err);
    check(vm_exec_load(tmp_dir, err, sizeof err) == NULL && strstr(err, "not a regular file"),
          "directory: %s", err);
    FILE *f = fopen(path, "w");
    fclose(f);
    check(vm_exec_load(path, err, sizeof err) == NULL && strstr(err, "is empty"), "empty file: %s",
          err);
    f = fopen(path, "w");
    fwrite("RLYX\3\0\0\0\0\0\0\0\0\0\0\0", 1, 16, f);
    fclose(f);
    check(vm_exec_load(path, err, sizeof err) == NULL && strncmp(err, path, strlen(path)) == 0 &&
              strstr(err, "version 3, this build reads versions 1 to 2"),
          "version from a file: %s", err);
    unlink(path);
}

/* ---- the fuzz corpus ------------------------------------------------------------------------ */

static void write_file(const char *dir, const char *name, const void *data, size_t len) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    RLY_CHECK(sup_write_file_atomic(path, data, len, err, sizeof err), "%s", err);
}

static void patched(const char *dir, const char *name, VmExec *x, Patch patch) {
    StrBuf image = {0}, out = {0};
    encode(x, &image);
    Img m;
    img_split(&image, &m);
    patch(&m);
    img_join(&m, &out);
    write_file(dir, name, out.data, out.len);
    img_free(&m);
    sb_free(&image);
    sb_free(&out);
}

static int write_corpus(const char *dir) {
    VmExec *sample = make_sample(), *mini = make_minimal(0), *attr = make_minimal(1);
    VmExec *empty = exec_new();
    StrBuf img = {0};
    encode(sample, &img);
    write_file(dir, "seed_sample.rlyx", img.data, img.len);
    write_file(dir, "seed_truncated.rlyx", img.data, img.len / 2);
    img.len = 0;
    encode(mini, &img);
    write_file(dir, "seed_minimal.rlyx", img.data, img.len);
    img.len = 0;
    encode(attr, &img);
    write_file(dir, "seed_attr.rlyx", img.data, img.len);
    img.len = 0;
    encode(empty, &img);
    write_file(dir, "seed_empty_exec.rlyx", img.data, img.len);
    write_file(dir, "seed_header_only.rlyx", img.data, 16);
    patched(dir, "seed_bad_version.rlyx", mini, p_version);
    patched(dir, "seed_huge_count.rlyx", mini, p_funcs_huge);
    patched(dir, "seed_bad_string.rlyx", mini, p_str_unterminated);
    patched(dir, "seed_const_misaligned.rlyx", mini, p_const_offset);
    patched(dir, "seed_user_op.rlyx", mini, p_user_op);
    patched(dir, "seed_attr_ints.rlyx", attr, p_attr_ints);
    sb_free(&img);
    rt_exec_release(sample);
    rt_exec_release(mini);
    rt_exec_release(attr);
    rt_exec_release(empty);
    return 0;
}

int main(int argc, char **argv) {
    const char *seed_env = getenv("RLY_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 20240607u;
    rng_state = seed ? seed : 1;
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);
    printf("test_exec_file: RLY_SEED=%llu\n", (unsigned long long)seed);
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_exec_file.XXXXXX");
    RLY_CHECK(mkdtemp(tmp_dir) != NULL, "mkdtemp");

    VmExec *sample = make_sample(), *mini = make_minimal(0), *attr = make_minimal(1);
    VmExec *empty = exec_new();
    test_round_trip_memory("sample", sample);
    test_round_trip_memory("minimal", mini);
    test_round_trip_memory("empty", empty);
    test_round_trip_file("sample", sample);
    test_round_trip_file("empty", empty);
    test_load_checked();
    test_hostile();
    test_save_errors();
    test_load_errors();
    test_truncation("sample", sample);
    test_truncation("empty", empty);
    test_corruption("sample", sample, 20000);
    test_corruption("attr", attr, 5000);
    rt_exec_release(sample);
    rt_exec_release(mini);
    rt_exec_release(attr);
    rt_exec_release(empty);
    rmdir(tmp_dir);
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
