/* exec_file.c - saving and loading VM executables (vm.h; internals in exec_file.h). Saving
 * encodes every field one by one into sections and writes the file atomically (a temporary
 * and a rename, support.h sup_out_*); loading maps the file read-only, checks every offset,
 * length and count against the bytes that hold it before using it, decodes into exe->arena,
 * uses the constants' bytes and the strings in place, then validates and binds.
 *
 * The format, version 1 (docs/vm.md, "Executable files"). Integers are little-endian and of
 * fixed width, floats are the bits of their IEEE binary64 value, and no C struct is ever
 * written or read whole.
 *
 *   header    "RLYX" | u32 version (1) | u32 flags (0: other bits are rejected) | u32 n_sections
 *   table     n_sections x { u32 kind | u32 0 | u64 offset | u64 length } (24 bytes each)
 *   sections  at their offsets: 8-byte aligned (DATA 64-byte aligned), after the table, inside
 *             the file, not overlapping, each kind exactly once, each read to its last byte
 *
 * A string reference ("str") is a u32 id into STRINGS, or 0xFFFFFFFF for none (only where
 * "or none" is said). The sections:
 *   1 STRINGS       u32 n | n x { u32 offset | u32 len } into STRING_BYTES: the bytes
 *                   [offset, offset + len) hold no NUL and are followed by one; the entries go
 *                   up in offset and do not overlap
 *   2 STRING_BYTES  the strings, each NUL-terminated (used in place)
 *   3 STRS          VmExec.strs: u32 n | n x str
 *   4 CTORS         u32 n | n x { str name | str type_name (or none) | i32 tag | u32 arity }
 *   5 PACKED        u32 n | n x { str name | u32 n_inputs | u32 n_nodes | u32 result |
 *                                 n_nodes x node }
 *                   node: u32 kind | u32 op_id | u32 index | u32 loc | u32 out_tuple |
 *                         u32 n_out | u32 n_args | u32 n_attrs | n_args x u32 |
 *                         n_attrs x attr           (op_id < OP_ID_COUNT; out_tuple 0 or 1)
 *                   attr: str name | u32 kind | i64 i | f64 f | str s (or none; KA_STR: set) |
 *                         u32 n | u32 arrays (bit 0: ints, 1: floats, 2: strs; n = 0 when none;
 *                         KA_INTS needs ints, KA_FLOATS floats, KA_STRS strs) |
 *                         then the arrays present, in that order: n x i64, n x f64, n x str
 *   6 FUNCS         u32 n | n x { str name | u32 n_params | u32 n_captured | u32 n_regs |
 *                                 u32 result_kind | u32 n_code | u32 n_pool | u32 has_loc |
 *                                 n_regs x u8 reg_kind | n_code x instr | n_pool x u32 |
 *                                 n_code x u32 loc (when has_loc) | u32 has_plan |
 *                                 plan (when has_plan) }
 *                   plan (vm.h, VmPlan): u64 arena_bytes | u32 n_bufs | u32 n_sites |
 *                         u32 n_slots | n_bufs x { u64 offset | u64 nbytes | u32 dtype |
 *                         u32 ndim | u32 start | u32 end | u32 inplace | ndim x i64 } |
 *                         n_sites x { u32 pc | u32 first | u32 n } | n_slots x u32
 *                         (vm_plan_validate checks what they mean)
 *                   instr (40 bytes): u8 op | u8 sub | u8 rk | u8 flags | u32 dst | u32 a |
 *                         u32 b | u32 c | u32 n | u32 args | u32 dtype | u64 imm (the bits of
 *                         imm or fimm)
 *   7 ENTRY         u32 entry | u32 out_tuple | u32 n_inputs | n_inputs x { str name | type } |
 *                   u32 n_outputs | n_outputs x { str name | type } | (version 2) u32 has_paths
 *                   | when has_paths: n_outputs x { u32 depth (1..1024) | depth x u32 field }
 *                   (a result of nested tuples: each output's path of fields to its leaf)
 *                   type: u32 is_tensor | u32 dtype | u32 ndim | str text (or none) | ndim x i64
 *                         (a tensor: dtype known, ndim <= 32, dims in [-1, 2^62]; else ndim 0)
 *   8 CONSTS        u32 n | n x { u32 dtype | u32 ndim | u64 offset | u64 nbytes | ndim x i64 }:
 *                   tensors whose bytes are DATA[offset, offset + nbytes): offset a multiple
 *                   of 64, going up, not overlapping; nbytes = elements x element size
 *   9 DATA          the constants' bytes (row-major, little-endian)
 *  10 PREP          (version 2) u32 n | n x { u32 const | u32 0 | u64 key | u64 offset |
 *                   u64 nbytes }: what kernels derived from constant `const` under `key`
 *                   (packed weights, kernel.h k_prepared): PREP_DATA[offset, offset + nbytes),
 *                   nbytes > 0, offset a multiple of 64, going up, each entry's bytes and their
 *                   zero padding to a multiple of 64 inside PREP_DATA and not overlapping;
 *                   sorted by (const, key, nbytes), no two alike
 *  11 PREP_DATA     (version 2) the prepared bytes (64-byte aligned)
 *
 * Version 1 files (no PREP, PREP_DATA) still load: their kernels prepare at first use.
 *
 * What is not saved: VmNode.fn (vm_exec_bind binds kernels after loading), the arena and the
 * mapping. An executable with a user-registered operator (op_id >= OP_ID_COUNT) cannot be
 * saved. The checks here are structural (every count, offset and string id inside its bytes);
 * what the indices inside instructions and nodes mean is vm_exec_validate's to check.
 *
 * Bounds on work: every count is checked against the bytes its items need before anything is
 * allocated for it, strings and constants may not overlap, so decoding takes time and memory
 * linear in the file's size, whatever its contents. A file that is changed or truncated while
 * mapped may still fault (as any mmap). Big-endian hosts are refused (constants are used in
 * place). */
#include "runtime/exec_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "RLYX"
#define HEADER_BYTES 16u
#define SECTION_ENTRY_BYTES 24u
#define INSTR_BYTES 40u
#define STR_NONE UINT32_MAX
#define CONST_ALIGN 64u
#define SECTION_ALIGN 8u
#define MAX_SECTIONS 64u /* a table longer than this is hostile (version 2 has 11 kinds) */
#define PREP_ENTRY_BYTES 32u
#define MAX_OUT_DEPTH 1024u /* fields on the path to an output (nested tuples) */
#define ATTR_ARRAYS_ALL 7u

typedef enum SecKind {
    SEC_STRINGS = 1,
    SEC_STRING_BYTES,
    SEC_STRS,
    SEC_CTORS,
    SEC_PACKED,
    SEC_FUNCS,
    SEC_ENTRY,
    SEC_CONSTS,
    SEC_DATA,
    SEC_PREP,
    SEC_PREP_DATA,
    SEC_END /* one past the last kind */
} SecKind;

static const char *const sec_names[SEC_END] = {
    [SEC_STRINGS] = "strings",
    [SEC_STRING_BYTES] = "string bytes",
    [SEC_STRS] = "strs",
    [SEC_CTORS] = "constructors",
    [SEC_PACKED] = "packed",
    [SEC_FUNCS] = "functions",
    [SEC_ENTRY] = "entry",
    [SEC_CONSTS] = "constants",
    [SEC_DATA] = "data",
    [SEC_PREP] = "prepared",
    [SEC_PREP_DATA] = "prepared data",
};

/* Sections whose bytes are 64-byte aligned (read in place as tensors or packed weights). */
static bool sec_aligned64(uint32_t k) { return k == SEC_DATA || k == SEC_PREP_DATA; }

static uint64_t round64(uint64_t n) { return (n + CONST_ALIGN - 1) / CONST_ALIGN * CONST_ALIGN; }

static bool host_little_endian(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* ---- rules both sides share (what the saver refuses, the loader rejects) ------------------ */

/* NULL when an attribute row's arrays fit its kind; otherwise why not. */
static const char *attr_problem(uint8_t kind, uint32_t n, uint32_t arrays, const char *s) {
    if (kind > KA_STRS) return "has an unknown kind";
    if (arrays > ATTR_ARRAYS_ALL) return "has unknown array bits";
    if (kind == KA_STR && s == NULL) return "is a string attribute without its string";
    if (kind == KA_INTS && !(arrays & 1u)) return "is an integer list without its integers";
    if (kind == KA_FLOATS && !(arrays & 2u)) return "is a float list without its floats";
    if (kind == KA_STRS && !(arrays & 4u)) return "is a string list without its strings";
    if (arrays == 0 && n != 0) return "has a length but no items";
    return NULL;
}

static uint32_t attr_arrays(const KAttr *k) {
    return (k->ints ? 1u : 0u) | (k->floats ? 2u : 0u) | (k->strs ? 4u : 0u);
}

/* NULL when a type description can be saved and loaded; otherwise why not. */
static const char *type_problem(bool is_tensor, uint32_t dtype, uint32_t ndim,
                                const int64_t *shape) {
    if (!is_tensor) return ndim == 0 ? NULL : "is not a tensor but has dims";
    if (dtype >= RLY_DTYPE_COUNT) return "has an unknown dtype";
    if (ndim > K_MAX_DIMS) return "has more than 32 dims";
    for (uint32_t d = 0; d < ndim; d++)
        if (shape[d] < -1 || shape[d] > SUP_DIM_MAX) return "has a dim out of range";
    return NULL;
}

/* ======================================================================================
 * Encoding
 * ====================================================================================== */

typedef struct Enc {
    StrBuf sec[SEC_END]; /* each section's bytes (DATA stays empty: written from the tensors) */
    StrBuf str_entries;  /* STRINGS without its count */
    StrMap ids;          /* string -> id + 1 */
    uint32_t n_strings;
    uint64_t data_len;         /* DATA's length */
    const uint64_t *const_off; /* each constant's offset in DATA */
    VmPrep *preps;             /* PREP's entries (blob: the bytes to write) */
    uint32_t n_preps;
    uint64_t prep_len;
    bool no_preps; /* write an empty PREP */
    bool failed;
    char msg[256];
} Enc;

static void put_u8(StrBuf *b, uint8_t v) { sb_putc(b, (char)v); }

static void put_u32(StrBuf *b, uint32_t v) {
    char c[4];
    for (int i = 0; i < 4; i++)
        c[i] = (char)(uint8_t)(v >> (8 * i));
    sb_putn(b, c, 4);
}

static void put_u64(StrBuf *b, uint64_t v) {
    char c[8];
    for (int i = 0; i < 8; i++)
        c[i] = (char)(uint8_t)(v >> (8 * i));
    sb_putn(b, c, 8);
}

static void put_i64(StrBuf *b, int64_t v) { put_u64(b, (uint64_t)v); }

static void put_f64(StrBuf *b, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put_u64(b, u);
}

static void enc_fail(Enc *e, const char *fmt, ...) RLY_PRINTF(2, 3);
static void enc_fail(Enc *e, const char *fmt, ...) {
    if (e->failed) return;
    e->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

/* Write the id of string s (interned in STRINGS on first use); `what` names it for messages. */
static void put_str(Enc *e, StrBuf *b, const char *s, bool optional, const char *what) {
    if (s == NULL) {
        if (!optional) enc_fail(e, "%s is missing", what);
        put_u32(b, STR_NONE);
        return;
    }
    size_t n = strlen(s);
    void *got = strmap_get(&e->ids, s, n);
    if (got != NULL) {
        put_u32(b, (uint32_t)((uintptr_t)got - 1));
        return;
    }
    StrBuf *bytes = &e->sec[SEC_STRING_BYTES];
    if (n >= UINT32_MAX || bytes->len > UINT32_MAX - 1 - n || e->n_strings >= STR_NONE - 1) {
        enc_fail(e, "the strings take more than 4 GiB");
        put_u32(b, STR_NONE);
        return;
    }
    uint32_t id = e->n_strings++;
    put_u32(&e->str_entries, (uint32_t)bytes->len);
    put_u32(&e->str_entries, (uint32_t)n);
    sb_putn(bytes, s, n);
    sb_putc(bytes, '\0');
    strmap_put(&e->ids, s, n, (void *)((uintptr_t)id + 1));
    put_u32(b, id);
}

static void enc_type(Enc *e, StrBuf *b, const VmTypeDesc *t, const char *what, uint32_t i) {
    const char *why = type_problem(t->is_tensor, t->dtype, t->ndim, t->shape);
    if (why != NULL) enc_fail(e, "the type of %s %u %s", what, i, why);
    put_u32(b, t->is_tensor ? 1u : 0u);
    put_u32(b, t->dtype);
    put_u32(b, t->ndim);
    put_str(e, b, t->text, true, "a type's text");
    for (uint32_t d = 0; d < t->ndim && why == NULL; d++)
        put_i64(b, t->shape[d]);
}

static void enc_packed(Enc *e, const VmExec *x) {
    StrBuf *b = &e->sec[SEC_PACKED];
    put_u32(b, x->n_packed);
    for (uint32_t p = 0; p < x->n_packed && !e->failed; p++) {
        const VmPacked *pk = &x->packed[p];
        put_str(e, b, pk->name, false, "a packed function's name");
        put_u32(b, pk->n_inputs);
        put_u32(b, pk->n_nodes);
        put_u32(b, pk->result);
        for (uint32_t k = 0; k < pk->n_nodes; k++) {
            const VmNode *nd = &pk->nodes[k];
            if (nd->kind == VM_NODE_CALL && nd->op_id >= OP_ID_COUNT)
                enc_fail(e,
                         "packed function %u (%s), node %u: operator id %u is a user-registered "
                         "operator, and an executable that calls one cannot be saved",
                         p, pk->name ? pk->name : "?", k, nd->op_id);
            put_u32(b, nd->kind);
            put_u32(b, nd->op_id);
            put_u32(b, nd->index);
            put_u32(b, nd->loc);
            put_u32(b, nd->out_tuple ? 1u : 0u);
            put_u32(b, nd->n_out);
            put_u32(b, nd->n_args);
            put_u32(b, nd->n_attrs);
            for (uint32_t a = 0; a < nd->n_args; a++)
                put_u32(b, nd->args[a]);
            for (uint32_t a = 0; a < nd->n_attrs; a++) {
                const KAttr *ka = &nd->attrs[a];
                uint32_t arrays = attr_arrays(ka);
                const char *why = attr_problem(ka->kind, ka->n, arrays, ka->s);
                if (why != NULL)
                    enc_fail(e, "packed function %u, node %u: attribute %s %s", p, k,
                             ka->name ? ka->name : "?", why);
                put_str(e, b, ka->name, false, "an attribute's name");
                put_u32(b, ka->kind);
                put_i64(b, ka->i);
                put_f64(b, ka->f);
                put_str(e, b, ka->s, true, "an attribute's string");
                put_u32(b, ka->n);
                put_u32(b, arrays);
                if (ka->ints)
                    for (uint32_t j = 0; j < ka->n; j++)
                        put_i64(b, ka->ints[j]);
                if (ka->floats)
                    for (uint32_t j = 0; j < ka->n; j++)
                        put_f64(b, ka->floats[j]);
                if (ka->strs)
                    for (uint32_t j = 0; j < ka->n; j++)
                        put_str(e, b, ka->strs[j], false, "an item of a string list");
            }
        }
    }
}

static void enc_funcs(Enc *e, const VmExec *x) {
    StrBuf *b = &e->sec[SEC_FUNCS];
    put_u32(b, x->n_funcs);
    for (uint32_t f = 0; f < x->n_funcs && !e->failed; f++) {
        const VmFunction *fn = &x->funcs[f];
        put_str(e, b, fn->name, false, "a function's name");
        put_u32(b, fn->n_params);
        put_u32(b, fn->n_captured);
        put_u32(b, fn->n_regs);
        put_u32(b, fn->result_kind);
        put_u32(b, fn->n_code);
        put_u32(b, fn->n_pool);
        put_u32(b, fn->loc ? 1u : 0u);
        for (uint32_t r = 0; r < fn->n_regs; r++)
            put_u8(b, fn->reg_kind[r]);
        for (uint32_t k = 0; k < fn->n_code; k++) {
            const VmInstr *in = &fn->code[k];
            put_u8(b, in->op);
            put_u8(b, in->sub);
            put_u8(b, in->rk);
            put_u8(b, in->flags);
            put_u32(b, in->dst);
            put_u32(b, in->a);
            put_u32(b, in->b);
            put_u32(b, in->c);
            put_u32(b, in->n);
            put_u32(b, in->args);
            put_u32(b, in->dtype);
            put_i64(b, in->imm); /* the union's bits: imm or fimm */
        }
        for (uint32_t k = 0; k < fn->n_pool; k++)
            put_u32(b, fn->pool[k]);
        if (fn->loc)
            for (uint32_t k = 0; k < fn->n_code; k++)
                put_u32(b, fn->loc[k]);
        const VmPlan *pl = fn->plan;
        put_u32(b, pl ? 1u : 0u);
        if (pl == NULL) continue;
        put_u64(b, pl->arena_bytes);
        put_u32(b, pl->n_bufs);
        put_u32(b, pl->n_sites);
        put_u32(b, pl->n_slots);
        for (uint32_t k = 0; k < pl->n_bufs; k++) {
            const VmPlanBuf *pb = &pl->bufs[k];
            put_u64(b, pb->offset);
            put_u64(b, pb->nbytes);
            put_u32(b, pb->dtype);
            put_u32(b, pb->ndim);
            put_u32(b, pb->start);
            put_u32(b, pb->end);
            put_u32(b, pb->inplace);
            for (uint32_t j = 0; j < pb->ndim; j++)
                put_i64(b, pb->shape[j]);
        }
        for (uint32_t k = 0; k < pl->n_sites; k++) {
            put_u32(b, pl->sites[k].pc);
            put_u32(b, pl->sites[k].first);
            put_u32(b, pl->sites[k].n);
        }
        for (uint32_t k = 0; k < pl->n_slots; k++)
            put_u32(b, pl->slots[k]);
    }
}

static void enc_entry(Enc *e, const VmExec *x) {
    StrBuf *b = &e->sec[SEC_ENTRY];
    put_u32(b, x->entry);
    put_u32(b, x->out_tuple ? 1u : 0u);
    put_u32(b, x->n_inputs);
    for (uint32_t i = 0; i < x->n_inputs; i++) {
        put_str(e, b, x->in_names[i], false, "an input's name");
        enc_type(e, b, &x->in_types[i], "input", i);
    }
    put_u32(b, x->n_outputs);
    for (uint32_t i = 0; i < x->n_outputs; i++) {
        put_str(e, b, x->out_names[i], false, "an output's name");
        enc_type(e, b, &x->out_types[i], "output", i);
    }
    put_u32(b, x->out_path != NULL); /* version 2: the outputs' paths into nested tuples */
    for (uint32_t i = 0; x->out_path != NULL && i < x->n_outputs; i++) {
        put_u32(b, x->out_path_off[i + 1] - x->out_path_off[i]);
        for (uint32_t j = x->out_path_off[i]; j < x->out_path_off[i + 1]; j++)
            put_u32(b, x->out_path[j]);
    }
}

/* CONSTS, and DATA's layout (each constant 64-aligned, in order): off[i], e->data_len. */
static void enc_consts(Enc *e, const VmExec *x, uint64_t *off) {
    StrBuf *b = &e->sec[SEC_CONSTS];
    put_u32(b, x->n_consts);
    uint64_t pos = 0;
    for (uint32_t i = 0; i < x->n_consts && !e->failed; i++) {
        const Value *v = x->consts[i];
        if (v == NULL || v->kind != VAL_TENSOR) {
            enc_fail(e, "constant %u is not a tensor", i);
            break;
        }
        const RtTensor *t = RT_TENSOR(v);
        rly_dtype dt = rt_tensor_dtype(t);
        uint32_t ndim = (uint32_t)t->t.ndim;
        int64_t numel = sup_shape_numel(ndim, t->shape);
        if (ndim > K_MAX_DIMS || numel < 0 || numel > SUP_DIM_MAX || t->t.strides != NULL) {
            enc_fail(e, "constant %u is not a compact tensor of at most 32 dims", i);
            break;
        }
        uint64_t nbytes = (uint64_t)numel * sup_dtype_size(dt);
        pos = (pos + CONST_ALIGN - 1) / CONST_ALIGN * CONST_ALIGN;
        off[i] = pos;
        pos += nbytes;
        put_u32(b, (uint32_t)dt);
        put_u32(b, ndim);
        put_u64(b, off[i]);
        put_u64(b, nbytes);
        for (uint32_t d = 0; d < ndim; d++)
            put_i64(b, t->shape[d]);
    }
    e->data_len = pos;
}

typedef struct ConstAt {
    uintptr_t p; /* the constant's data address */
    uint32_t i;
} ConstAt;

static int const_at_cmp(const void *pa, const void *pb) {
    const ConstAt *a = pa, *b = pb;
    if (a->p != b->p) return a->p < b->p ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static int prep_cmp(const void *pa, const void *pb) {
    const VmPrep *a = pa, *b = pb;
    if (a->konst != b->konst) return a->konst < b->konst ? -1 : 1;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->bytes < b->bytes ? -1 : a->bytes > b->bytes;
}

/* The prepared constants of x: its cache's entries whose address is a constant's (the lowest
 * index of a constant listed twice), or, without a cache (decoded and not bound), the ones it
 * was decoded with; sorted by (constant, key, bytes). *n of them, malloc'ed. */
static VmPrep *prep_list(const VmExec *x, uint32_t *n_out) {
    *n_out = 0;
    if (x->prep == NULL) {
        VmPrep *l = sup_calloc(x->n_preps ? x->n_preps : 1, sizeof *l);
        if (x->n_preps) memcpy(l, x->preps, x->n_preps * sizeof *l);
        *n_out = x->n_preps;
        return l;
    }
    size_t n_items = 0;
    KPrepItem *items = k_prep_cache_list(x->prep, &n_items);
    ConstAt *at = sup_calloc(x->n_consts ? x->n_consts : 1, sizeof *at);
    uint32_t n_at = 0;
    for (uint32_t i = 0; i < x->n_consts; i++) {
        const void *p = rt_tensor_data(RT_TENSOR(x->consts[i]));
        if (p != NULL) at[n_at++] = (ConstAt){(uintptr_t)p, i};
    }
    qsort(at, n_at, sizeof *at, const_at_cmp);
    VmPrep *l = sup_calloc(n_items ? n_items : 1, sizeof *l);
    uint32_t n = 0;
    for (size_t k = 0; k < n_items && n < UINT32_MAX; k++) {
        uintptr_t p = (uintptr_t)items[k].data;
        uint32_t lo = 0, hi = n_at; /* the first at[] with address >= p */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (at[mid].p < p)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n_at && at[lo].p == p && items[k].bytes > 0)
            l[n++] = (VmPrep){at[lo].i, items[k].key, items[k].bytes, items[k].blob};
    }
    free(at);
    free(items);
    qsort(l, n, sizeof *l, prep_cmp);
    *n_out = n;
    return l;
}

/* PREP, and PREP_DATA's layout (each entry 64-aligned and padded to 64 bytes with zeros). */
static void enc_preps(Enc *e, const VmExec *x) {
    StrBuf *b = &e->sec[SEC_PREP];
    if (e->no_preps)
        e->preps = sup_calloc(1, sizeof *e->preps);
    else
        e->preps = prep_list(x, &e->n_preps);
    put_u32(b, e->n_preps);
    uint64_t pos = 0;
    for (uint32_t i = 0; i < e->n_preps; i++) {
        const VmPrep *p = &e->preps[i];
        put_u32(b, p->konst);
        put_u32(b, 0);
        put_u64(b, p->key);
        put_u64(b, pos);
        put_u64(b, p->bytes);
        pos += round64(p->bytes);
    }
    e->prep_len = pos;
}

/* Encode every section but DATA (whose layout goes to off, n_consts entries). */
static bool enc_build(Enc *e, const VmExec *x, uint64_t *off) {
    if (!host_little_endian()) {
        enc_fail(e, "this build runs on a big-endian machine, which rly executables do not "
                    "support");
        return false;
    }
    StrBuf *strs = &e->sec[SEC_STRS];
    put_u32(strs, x->n_strs);
    for (uint32_t i = 0; i < x->n_strs; i++)
        put_str(e, strs, x->strs[i], false, "an entry of strs");
    StrBuf *ctors = &e->sec[SEC_CTORS];
    put_u32(ctors, x->n_ctors);
    for (uint32_t i = 0; i < x->n_ctors; i++) {
        put_str(e, ctors, x->ctors[i].name, false, "a constructor's name");
        put_str(e, ctors, x->ctors[i].type_name, true, "a constructor's type name");
        put_u32(ctors, (uint32_t)x->ctors[i].tag);
        put_u32(ctors, x->ctors[i].arity);
    }
    enc_packed(e, x);
    enc_funcs(e, x);
    enc_entry(e, x);
    enc_consts(e, x, off);
    if (!e->failed) enc_preps(e, x);
    put_u32(&e->sec[SEC_STRINGS], e->n_strings);
    sb_putn(&e->sec[SEC_STRINGS], e->str_entries.data, e->str_entries.len);
    return !e->failed;
}

static void enc_free(Enc *e) {
    for (int k = 0; k < SEC_END; k++)
        sb_free(&e->sec[k]);
    sb_free(&e->str_entries);
    strmap_free(&e->ids);
    free(e->preps);
}

/* Where the image goes: a file being written, or memory. */
typedef struct Sink {
    SupOut *out;
    StrBuf *mem;
    uint64_t pos;
} Sink;

static void sink_put(Sink *s, const void *p, size_t n) {
    if (n == 0) return;
    if (s->out)
        sup_out_write(s->out, p, n); /* a failure is reported by sup_out_commit */
    else
        sb_putn(s->mem, p, n);
    s->pos += n;
}

static void sink_pad(Sink *s, uint64_t to) {
    static const char zeros[CONST_ALIGN];
    while (s->pos < to) {
        uint64_t k = to - s->pos < CONST_ALIGN ? to - s->pos : CONST_ALIGN;
        sink_put(s, zeros, (size_t)k);
    }
}

/* The sections in the order they are written. */
static const SecKind file_order[] = {SEC_STRINGS, SEC_STRING_BYTES, SEC_STRS,     SEC_CTORS,
                                     SEC_PACKED,  SEC_FUNCS,        SEC_ENTRY,    SEC_CONSTS,
                                     SEC_DATA,    SEC_PREP,         SEC_PREP_DATA};
_Static_assert(RLY_ARRAY_LEN(file_order) == SEC_END - 1, "every section kind is written");

static void enc_emit(Enc *e, const VmExec *x, const uint64_t *off, Sink *s) {
    uint32_t n_sec = RLY_ARRAY_LEN(file_order);
    uint64_t sec_off[SEC_END], sec_len[SEC_END];
    uint64_t pos = HEADER_BYTES + (uint64_t)n_sec * SECTION_ENTRY_BYTES;
    for (uint32_t i = 0; i < n_sec; i++) {
        SecKind k = file_order[i];
        uint64_t align = sec_aligned64(k) ? CONST_ALIGN : SECTION_ALIGN;
        pos = (pos + align - 1) / align * align;
        sec_off[k] = pos;
        sec_len[k] = k == SEC_DATA ? e->data_len : k == SEC_PREP_DATA ? e->prep_len : e->sec[k].len;
        pos += sec_len[k];
    }
    StrBuf head = {0};
    sb_putn(&head, MAGIC, 4);
    put_u32(&head, RT_EXEC_VERSION);
    put_u32(&head, 0); /* flags */
    put_u32(&head, n_sec);
    for (uint32_t i = 0; i < n_sec; i++) {
        put_u32(&head, (uint32_t)file_order[i]);
        put_u32(&head, 0);
        put_u64(&head, sec_off[file_order[i]]);
        put_u64(&head, sec_len[file_order[i]]);
    }
    sink_put(s, head.data, head.len);
    sb_free(&head);
    for (uint32_t i = 0; i < n_sec; i++) {
        SecKind k = file_order[i];
        sink_pad(s, sec_off[k]);
        if (k == SEC_PREP_DATA) {
            uint64_t at = sec_off[k];
            for (uint32_t j = 0; j < e->n_preps; j++) {
                sink_pad(s, at);
                sink_put(s, e->preps[j].blob, (size_t)e->preps[j].bytes);
                at += round64(e->preps[j].bytes);
            }
            continue;
        }
        if (k != SEC_DATA) {
            sink_put(s, e->sec[k].data, e->sec[k].len);
            continue;
        }
        for (uint32_t c = 0; c < x->n_consts; c++) {
            const RtTensor *t = RT_TENSOR(x->consts[c]);
            size_t nbytes = (size_t)sup_shape_numel((uint32_t)t->t.ndim, t->shape) *
                            sup_dtype_size(rt_tensor_dtype(t));
            sink_pad(s, sec_off[k] + off[c]);
            sink_put(s, rt_tensor_data(t), nbytes);
        }
    }
    sink_pad(s, pos);
}

bool rt_exec_encode(const VmExec *exe, StrBuf *out, char *err, size_t cap) {
    Enc e = {0};
    uint64_t *off = sup_calloc(exe->n_consts ? exe->n_consts : 1, sizeof *off);
    bool ok = enc_build(&e, exe, off);
    if (ok) {
        Sink s = {.mem = out};
        enc_emit(&e, exe, off, &s);
    } else {
        snprintf(err, cap, "cannot save the executable: %s", e.msg);
    }
    free(off);
    enc_free(&e);
    return ok;
}

bool vm_exec_save(const VmExec *exe, const char *path, char *err, size_t cap) {
    return vm_exec_save_with(exe, path, true, err, cap);
}

bool vm_exec_save_with(const VmExec *exe, const char *path, bool preps, char *err, size_t cap) {
    Enc e = {.no_preps = !preps};
    uint64_t *off = sup_calloc(exe->n_consts ? exe->n_consts : 1, sizeof *off);
    bool ok = enc_build(&e, exe, off);
    if (!ok) snprintf(err, cap, "cannot save %s: %s", path, e.msg);
    SupOut *o = ok ? sup_out_open(path, err, cap) : NULL;
    if (o != NULL) {
        Sink s = {.out = o};
        enc_emit(&e, exe, off, &s);
        ok = sup_out_commit(o, err, cap);
    } else {
        ok = false;
    }
    free(off);
    enc_free(&e);
    return ok;
}

/* ======================================================================================
 * Decoding
 * ====================================================================================== */

typedef struct Dec {
    const uint8_t *base;
    size_t len;
    VmExec *exe;
    uint32_t n_strings;
    const char **strings;
    uint64_t sec_off[SEC_END], sec_len[SEC_END];
    uint32_t sec_index[SEC_END]; /* the section's row in the table, for messages */
    uint32_t version;
    /* Where decoding is, for messages (formatted only on failure): item i [, sub j]. */
    const char *item, *sub;
    uint32_t i, j;
    bool failed;
    char msg[512];
} Dec;

/* A reader over one section. Past a failure every read returns 0 (and d->failed is set), so
 * callers check d->failed before using what they read to size anything. */
typedef struct Rd {
    Dec *d;
    SecKind kind;
    const uint8_t *p;
    size_t len, pos; /* pos <= len */
} Rd;

static void dec_vfail(Dec *d, bool with_where, const char *fmt, va_list ap) RLY_PRINTF(3, 0);
static void dec_vfail(Dec *d, bool with_where, const char *fmt, va_list ap) {
    if (d->failed) return;
    d->failed = true;
    size_t n = 0;
    if (with_where && d->item != NULL) {
        n = (size_t)snprintf(d->msg, sizeof d->msg, "%s %u", d->item, d->i);
        if (d->sub != NULL && n < sizeof d->msg)
            n += (size_t)snprintf(d->msg + n, sizeof d->msg - n, ", %s %u", d->sub, d->j);
        if (n < sizeof d->msg) n += (size_t)snprintf(d->msg + n, sizeof d->msg - n, ": ");
    }
    if (n < sizeof d->msg) vsnprintf(d->msg + n, sizeof d->msg - n, fmt, ap);
}

/* A failure inside the current item ("function 3, instruction 7: ..."). */
static void dec_fail(Dec *d, const char *fmt, ...) RLY_PRINTF(2, 3);
static void dec_fail(Dec *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dec_vfail(d, true, fmt, ap);
    va_end(ap);
}

/* A failure of the file as a whole. */
static void dec_fail_file(Dec *d, const char *fmt, ...) RLY_PRINTF(2, 3);
static void dec_fail_file(Dec *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dec_vfail(d, false, fmt, ap);
    va_end(ap);
}

static void set_where(Dec *d, const char *item, uint32_t i, const char *sub, uint32_t j) {
    d->item = item, d->i = i, d->sub = sub, d->j = j;
}

static Rd rd_open(Dec *d, SecKind k) {
    d->item = d->sub = NULL;
    return (Rd){d, k, d->base + d->sec_off[k], (size_t)d->sec_len[k], 0};
}

static void rd_truncated(Rd *r) {
    Dec *d = r->d;
    if (d->failed) return;
    char where[128] = "";
    if (d->item != NULL) {
        int n = snprintf(where, sizeof where, " inside %s %u", d->item, d->i);
        if (d->sub != NULL && n > 0 && (size_t)n < sizeof where)
            snprintf(where + n, sizeof where - (size_t)n, ", %s %u", d->sub, d->j);
    }
    dec_fail_file(d, "section %u (%s) ends too early%s", d->sec_index[r->kind], sec_names[r->kind],
                  where);
}

static bool rd_need(Rd *r, size_t n) {
    if (r->d->failed) return false;
    if (n <= r->len - r->pos) return true;
    rd_truncated(r);
    return false;
}

/* The section still holds n items of `each` bytes (checked before sizing anything by n). */
static bool rd_count(Rd *r, uint32_t n, size_t each, const char *what) {
    if (r->d->failed) return false;
    if (n <= (r->len - r->pos) / each) return true;
    dec_fail(r->d, "%u %s need more bytes than section %u (%s) has left", n, what,
             r->d->sec_index[r->kind], sec_names[r->kind]);
    return false;
}

static uint8_t rd_u8(Rd *r) {
    if (!rd_need(r, 1)) return 0;
    return r->p[r->pos++];
}

static uint32_t rd_u32(Rd *r) {
    if (!rd_need(r, 4)) return 0;
    const uint8_t *p = r->p + r->pos;
    r->pos += 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd_u64(Rd *r) {
    if (!rd_need(r, 8)) return 0;
    const uint8_t *p = r->p + r->pos;
    r->pos += 8;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int64_t rd_i64(Rd *r) { return (int64_t)rd_u64(r); }

static double rd_f64(Rd *r) {
    uint64_t u = rd_u64(r);
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* A flag stored as a u32: 0 or 1. */
static bool rd_bool(Rd *r, const char *what) {
    uint32_t v = rd_u32(r);
    if (v > 1) dec_fail(r->d, "%s is %u, not 0 or 1", what, v);
    return v == 1;
}

/* A string reference: NULL for none (allowed only when optional) or on failure. */
static const char *rd_str(Rd *r, bool optional, const char *what) {
    uint32_t id = rd_u32(r);
    if (r->d->failed) return NULL;
    if (id == STR_NONE) {
        if (!optional) dec_fail(r->d, "%s is missing", what);
        return NULL;
    }
    if (id >= r->d->n_strings) {
        dec_fail(r->d, "%s: string id %u is out of range (%u strings)", what, id, r->d->n_strings);
        return NULL;
    }
    return r->d->strings[id];
}

static bool rd_end(Rd *r) {
    if (r->d->failed) return false;
    if (r->pos == r->len) return true;
    dec_fail_file(r->d, "section %u (%s) has %zu bytes past its contents", r->d->sec_index[r->kind],
                  sec_names[r->kind], r->len - r->pos);
    return false;
}

static void *dec_array(Dec *d, uint32_t n, size_t size) {
    return n ? arena_array(&d->exe->arena, n, size) : NULL;
}

/* ---- the header and the section table ---------------------------------------------------- */

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

static bool dec_header(Dec *d) {
    if (d->len < 4 || memcmp(d->base, MAGIC, 4) != 0) {
        dec_fail_file(d, "not an rly executable (the file does not begin with \"RLYX\")");
        return false;
    }
    if (d->len < HEADER_BYTES) {
        dec_fail_file(d, "the header is truncated (%zu of %u bytes)", d->len, HEADER_BYTES);
        return false;
    }
    uint32_t version = le32(d->base + 4), flags = le32(d->base + 8), n = le32(d->base + 12);
    if (version != RT_EXEC_VERSION && version != 1) {
        dec_fail_file(d, "version %u, this build reads versions 1 to %u", version, RT_EXEC_VERSION);
        return false;
    }
    d->version = version;
    /* version 1 has no prepared constants */
    int n_kinds = version == 1 ? SEC_PREP : SEC_END;
    if (flags != 0) {
        dec_fail_file(d, "unknown flags 0x%x", flags);
        return false;
    }
    if (n > MAX_SECTIONS) {
        dec_fail_file(d, "%u sections (at most %u)", n, MAX_SECTIONS);
        return false;
    }
    uint64_t table_end = HEADER_BYTES + (uint64_t)n * SECTION_ENTRY_BYTES;
    if (table_end > d->len) {
        dec_fail_file(d, "the section table (%u sections) extends past the end of the file", n);
        return false;
    }
    bool seen[SEC_END] = {false};
    for (uint32_t s = 0; s < n; s++) {
        const uint8_t *row = d->base + HEADER_BYTES + (size_t)s * SECTION_ENTRY_BYTES;
        uint32_t kind = le32(row), zero = le32(row + 4);
        uint64_t off = le64(row + 8), len = le64(row + 16);
        if (kind == 0 || kind >= (uint32_t)n_kinds) {
            dec_fail_file(d, "section %u has unknown kind %u", s, kind);
            return false;
        }
        const char *name = sec_names[kind];
        if (seen[kind]) {
            dec_fail_file(d, "section %u (%s) repeats section %u", s, name, d->sec_index[kind]);
            return false;
        }
        uint64_t align = sec_aligned64(kind) ? CONST_ALIGN : SECTION_ALIGN;
        if (zero != 0) {
            dec_fail_file(d, "section %u (%s) has a nonzero reserved word", s, name);
            return false;
        }
        if (off > d->len || len > d->len - off) {
            dec_fail_file(d, "section %u (%s) extends past the end of the file", s, name);
            return false;
        }
        if (off < table_end) {
            dec_fail_file(d, "section %u (%s) overlaps the header", s, name);
            return false;
        }
        if (off % align != 0) {
            dec_fail_file(d, "section %u (%s) is not %u-byte aligned", s, name, (unsigned)align);
            return false;
        }
        for (int k = 1; k < SEC_END; k++)
            if (seen[k] && off < d->sec_off[k] + d->sec_len[k] && d->sec_off[k] < off + len) {
                dec_fail_file(d, "sections %u (%s) and %u (%s) overlap", d->sec_index[k],
                              sec_names[k], s, name);
                return false;
            }
        seen[kind] = true;
        d->sec_off[kind] = off, d->sec_len[kind] = len, d->sec_index[kind] = s;
    }
    for (int k = 1; k < n_kinds; k++)
        if (!seen[k]) {
            dec_fail_file(d, "the %s section is missing", sec_names[k]);
            return false;
        }
    return true;
}

/* ---- the sections ------------------------------------------------------------------------ */

static bool dec_strings(Dec *d) {
    Rd r = rd_open(d, SEC_STRINGS);
    const uint8_t *bytes = d->base + d->sec_off[SEC_STRING_BYTES];
    uint64_t n_bytes = d->sec_len[SEC_STRING_BYTES];
    uint32_t n = rd_u32(&r);
    if (!rd_count(&r, n, 8, "strings")) return false;
    d->n_strings = n;
    d->strings = dec_array(d, n, sizeof *d->strings);
    uint64_t prev_end = 0;
    for (uint32_t i = 0; i < n && !d->failed; i++) {
        set_where(d, "string", i, NULL, 0);
        uint64_t off = rd_u32(&r), len = rd_u32(&r);
        if (d->failed) break;
        if (off < prev_end)
            dec_fail(d, "overlaps the string before it");
        else if (off > n_bytes || len >= n_bytes - off)
            dec_fail(d, "extends past the end of section %u (string bytes)",
                     d->sec_index[SEC_STRING_BYTES]);
        else if (bytes[off + len] != 0)
            dec_fail(d, "is not followed by a NUL");
        else if (memchr(bytes + off, 0, (size_t)len) != NULL)
            dec_fail(d, "contains a NUL byte");
        else
            d->strings[i] = (const char *)bytes + off;
        prev_end = off + len + 1;
    }
    return rd_end(&r);
}

static bool dec_strs(Dec *d) {
    Rd r = rd_open(d, SEC_STRS);
    VmExec *x = d->exe;
    uint32_t n = rd_u32(&r);
    if (!rd_count(&r, n, 4, "strs")) return false;
    const char **strs = dec_array(d, n, sizeof *strs);
    x->n_strs = n, x->strs = strs;
    for (uint32_t i = 0; i < n && !d->failed; i++) {
        set_where(d, "strs entry", i, NULL, 0);
        strs[i] = rd_str(&r, false, "the string");
    }
    return rd_end(&r);
}

static bool dec_ctors(Dec *d) {
    Rd r = rd_open(d, SEC_CTORS);
    VmExec *x = d->exe;
    uint32_t n = rd_u32(&r);
    if (!rd_count(&r, n, 16, "constructors")) return false;
    VmCtor *ctors = dec_array(d, n, sizeof *ctors);
    x->n_ctors = n, x->ctors = ctors;
    for (uint32_t i = 0; i < n && !d->failed; i++) {
        set_where(d, "constructor", i, NULL, 0);
        ctors[i].name = rd_str(&r, false, "its name");
        ctors[i].type_name = rd_str(&r, true, "its type name");
        ctors[i].tag = (int32_t)rd_u32(&r);
        ctors[i].arity = rd_u32(&r);
    }
    return rd_end(&r);
}

static void dec_attr(Rd *r, KAttr *k) {
    Dec *d = r->d;
    k->name = rd_str(r, false, "an attribute's name");
    uint32_t kind = rd_u32(r);
    k->i = rd_i64(r);
    k->f = rd_f64(r);
    k->s = rd_str(r, true, "an attribute's string");
    k->n = rd_u32(r);
    uint32_t arrays = rd_u32(r);
    if (d->failed) return;
    const char *why = attr_problem(kind > KA_STRS ? UINT8_MAX : (uint8_t)kind, k->n, arrays, k->s);
    if (why != NULL) {
        dec_fail(d, "attribute %s %s", k->name, why);
        return;
    }
    k->kind = (uint8_t)kind;
    size_t each = ((arrays & 1u) ? 8u : 0u) + ((arrays & 2u) ? 8u : 0u) + ((arrays & 4u) ? 4u : 0u);
    if (each == 0 || !rd_count(r, k->n, each, "attribute items")) return;
    uint32_t m = k->n ? k->n : 1; /* an empty list keeps a non-NULL array */
    if (arrays & 1u) {
        int64_t *ints = arena_array(&d->exe->arena, m, sizeof *ints);
        for (uint32_t j = 0; j < k->n; j++)
            ints[j] = rd_i64(r);
        k->ints = ints;
    }
    if (arrays & 2u) {
        double *floats = arena_array(&d->exe->arena, m, sizeof *floats);
        for (uint32_t j = 0; j < k->n; j++)
            floats[j] = rd_f64(r);
        k->floats = floats;
    }
    if (arrays & 4u) {
        const char **strs = arena_array(&d->exe->arena, m, sizeof *strs);
        for (uint32_t j = 0; j < k->n && !d->failed; j++)
            strs[j] = rd_str(r, false, "an item of a string list");
        k->strs = strs;
    }
}

#define NODE_MIN_BYTES 32u /* eight u32 */
#define ATTR_MIN_BYTES 36u /* name, kind, i, f, s, n, arrays */

static bool dec_packed(Dec *d) {
    Rd r = rd_open(d, SEC_PACKED);
    VmExec *x = d->exe;
    uint32_t n = rd_u32(&r);
    if (!rd_count(&r, n, 16, "packed functions")) return false;
    VmPacked *packed = dec_array(d, n, sizeof *packed);
    x->n_packed = n, x->packed = packed;
    for (uint32_t p = 0; p < n && !d->failed; p++) {
        VmPacked *pk = &packed[p];
        set_where(d, "packed function", p, NULL, 0);
        pk->name = rd_str(&r, false, "its name");
        pk->n_inputs = rd_u32(&r);
        uint32_t n_nodes = rd_u32(&r);
        pk->result = rd_u32(&r);
        if (!rd_count(&r, n_nodes, NODE_MIN_BYTES, "nodes")) break;
        VmNode *nodes = dec_array(d, n_nodes, sizeof *nodes);
        pk->n_nodes = n_nodes, pk->nodes = nodes;
        for (uint32_t k = 0; k < n_nodes && !d->failed; k++) {
            VmNode *nd = &nodes[k];
            set_where(d, "packed function", p, "node", k);
            uint32_t kind = rd_u32(&r);
            nd->op_id = rd_u32(&r);
            nd->index = rd_u32(&r);
            nd->loc = rd_u32(&r);
            uint32_t out_tuple = rd_u32(&r);
            nd->n_out = rd_u32(&r);
            uint32_t n_args = rd_u32(&r), n_attrs = rd_u32(&r);
            if (d->failed) break;
            if (out_tuple > 1) {
                dec_fail(d, "out_tuple is %u (0 or 1)", out_tuple);
                break;
            }
            nd->out_tuple = out_tuple == 1;
            if (kind > VM_NODE_CONST) {
                dec_fail(d, "unknown node kind %u", kind);
                break;
            }
            nd->kind = (uint8_t)kind;
            if (kind == VM_NODE_CALL && nd->op_id >= OP_ID_COUNT) {
                dec_fail(d, "operator id %u is not a builtin operator (this build has %u)",
                         nd->op_id, (unsigned)OP_ID_COUNT);
                break;
            }
            if (!rd_count(&r, n_args, 4, "arguments")) break;
            uint32_t *args = dec_array(d, n_args, sizeof *args);
            for (uint32_t a = 0; a < n_args; a++)
                args[a] = rd_u32(&r);
            nd->n_args = n_args, nd->args = args;
            if (!rd_count(&r, n_attrs, ATTR_MIN_BYTES, "attributes")) break;
            KAttr *attrs = dec_array(d, n_attrs, sizeof *attrs);
            nd->n_attrs = n_attrs, nd->attrs = attrs;
            for (uint32_t a = 0; a < n_attrs && !d->failed; a++)
                dec_attr(&r, &attrs[a]);
        }
    }
    return rd_end(&r);
}

#define FUNC_MIN_BYTES 36u /* name and eight u32 */
#define PLAN_BUF_MIN_BYTES 36u

/* A function's memory plan (vm.h); what it means is vm_plan_validate's to check. */
static bool dec_plan(Dec *d, Rd *r, VmFunction *fn) {
    VmExec *x = d->exe;
    VmPlan *pl = arena_alloc(&x->arena, sizeof *pl);
    pl->arena_bytes = (uint64_t)rd_i64(r);
    uint32_t n_bufs = rd_u32(r), n_sites = rd_u32(r), n_slots = rd_u32(r);
    if (!rd_count(r, n_bufs, PLAN_BUF_MIN_BYTES, "planned buffers")) return false;
    VmPlanBuf *bufs = dec_array(d, n_bufs, sizeof *bufs);
    for (uint32_t k = 0; k < n_bufs && !d->failed; k++) {
        VmPlanBuf *pb = &bufs[k];
        pb->offset = (uint64_t)rd_i64(r);
        pb->nbytes = (uint64_t)rd_i64(r);
        pb->dtype = rd_u32(r);
        pb->ndim = rd_u32(r);
        pb->start = rd_u32(r);
        pb->end = rd_u32(r);
        pb->inplace = rd_u32(r);
        if (d->failed) return false;
        if (pb->ndim > K_MAX_DIMS) {
            dec_fail(d, "planned buffer %u has %u dims (at most %u)", k, pb->ndim, K_MAX_DIMS);
            return false;
        }
        if (!rd_count(r, pb->ndim, 8, "dims")) return false;
        int64_t *shape = arena_array(&x->arena, pb->ndim ? pb->ndim : 1, sizeof *shape);
        for (uint32_t j = 0; j < pb->ndim; j++)
            shape[j] = rd_i64(r);
        pb->shape = shape;
        pl->n_inplace += pb->inplace != VM_PLAN_NONE;
    }
    if (!rd_count(r, n_sites, 12, "plan sites")) return false;
    VmPlanSite *sites = dec_array(d, n_sites, sizeof *sites);
    for (uint32_t k = 0; k < n_sites; k++) {
        sites[k].pc = rd_u32(r);
        sites[k].first = rd_u32(r);
        sites[k].n = rd_u32(r);
    }
    if (!rd_count(r, n_slots, 4, "plan slots")) return false;
    uint32_t *slots = dec_array(d, n_slots, sizeof *slots);
    for (uint32_t k = 0; k < n_slots; k++)
        slots[k] = rd_u32(r);
    pl->n_bufs = n_bufs, pl->bufs = bufs;
    pl->n_sites = n_sites, pl->sites = sites;
    pl->n_slots = n_slots, pl->slots = slots;
    fn->plan = pl;
    return !d->failed;
}

static bool dec_funcs(Dec *d) {
    Rd r = rd_open(d, SEC_FUNCS);
    VmExec *x = d->exe;
    uint32_t n = rd_u32(&r);
    if (!rd_count(&r, n, FUNC_MIN_BYTES, "functions")) return false;
    VmFunction *funcs = dec_array(d, n, sizeof *funcs);
    x->n_funcs = n, x->funcs = funcs;
    for (uint32_t f = 0; f < n && !d->failed; f++) {
        VmFunction *fn = &funcs[f];
        set_where(d, "function", f, NULL, 0);
        fn->name = rd_str(&r, false, "its name");
        fn->n_params = rd_u32(&r);
        fn->n_captured = rd_u32(&r);
        uint32_t n_regs = rd_u32(&r), result_kind = rd_u32(&r);
        uint32_t n_code = rd_u32(&r), n_pool = rd_u32(&r);
        bool has_loc = rd_bool(&r, "has_loc");
        if (d->failed) break;
        if (result_kind >= VM_RK_COUNT) {
            dec_fail(d, "unknown result kind %u", result_kind);
            break;
        }
        fn->result_kind = (uint8_t)result_kind;
        if (!rd_count(&r, n_regs, 1, "register kinds")) break;
        uint8_t *reg_kind = dec_array(d, n_regs, 1);
        if (n_regs) memcpy(reg_kind, r.p + r.pos, n_regs);
        r.pos += n_regs;
        fn->n_regs = n_regs, fn->reg_kind = reg_kind;
        if (!rd_count(&r, n_code, INSTR_BYTES, "instructions")) break;
        VmInstr *code = dec_array(d, n_code, sizeof *code);
        for (uint32_t k = 0; k < n_code; k++) {
            VmInstr *in = &code[k];
            in->op = rd_u8(&r);
            in->sub = rd_u8(&r);
            in->rk = rd_u8(&r);
            in->flags = rd_u8(&r);
            in->dst = rd_u32(&r);
            in->a = rd_u32(&r);
            in->b = rd_u32(&r);
            in->c = rd_u32(&r);
            in->n = rd_u32(&r);
            in->args = rd_u32(&r);
            in->dtype = rd_u32(&r);
            in->imm = rd_i64(&r); /* the union's bits */
        }
        fn->n_code = n_code, fn->code = code;
        if (!rd_count(&r, n_pool, 4, "pool entries")) break;
        uint32_t *pool = dec_array(d, n_pool, sizeof *pool);
        for (uint32_t k = 0; k < n_pool; k++)
            pool[k] = rd_u32(&r);
        fn->n_pool = n_pool, fn->pool = pool;
        if (has_loc) {
            if (!rd_count(&r, n_code, 4, "locations")) break;
            /* n_code may be 0: a present, empty table stays non-NULL */
            uint32_t *loc = arena_array(&x->arena, n_code ? n_code : 1, sizeof *loc);
            for (uint32_t k = 0; k < n_code; k++)
                loc[k] = rd_u32(&r);
            fn->loc = loc;
        }
        if (rd_bool(&r, "has_plan") && !dec_plan(d, &r, fn)) break;
    }
    return rd_end(&r);
}

static void dec_type(Rd *r, VmTypeDesc *t) {
    Dec *d = r->d;
    t->is_tensor = rd_bool(r, "is_tensor");
    t->dtype = rd_u32(r);
    uint32_t ndim = rd_u32(r);
    t->text = rd_str(r, true, "the type's text");
    if (d->failed) return;
    if (ndim > K_MAX_DIMS) {
        dec_fail(d, "the type has %u dims (at most %u)", ndim, K_MAX_DIMS);
        return;
    }
    if (!rd_count(r, ndim, 8, "dims")) return;
    int64_t *shape = dec_array(d, ndim, sizeof *shape);
    for (uint32_t k = 0; k < ndim; k++)
        shape[k] = rd_i64(r);
    t->ndim = ndim, t->shape = shape;
    const char *why = type_problem(t->is_tensor, t->dtype, ndim, shape);
    if (why != NULL) dec_fail(d, "the type %s", why);
}

#define PORT_MIN_BYTES 20u /* name, is_tensor, dtype, ndim, text */

static bool dec_entry(Dec *d) {
    Rd r = rd_open(d, SEC_ENTRY);
    VmExec *x = d->exe;
    x->entry = rd_u32(&r);
    x->out_tuple = rd_bool(&r, "out_tuple");
    for (int side = 0; side < 2 && !d->failed; side++) {
        const char *what = side == 0 ? "input" : "output";
        uint32_t n = rd_u32(&r);
        if (!rd_count(&r, n, PORT_MIN_BYTES, side == 0 ? "inputs" : "outputs")) break;
        const char **names = dec_array(d, n, sizeof *names);
        VmTypeDesc *types = dec_array(d, n, sizeof *types);
        if (side == 0)
            x->n_inputs = n, x->in_names = names, x->in_types = types;
        else
            x->n_outputs = n, x->out_names = names, x->out_types = types;
        for (uint32_t i = 0; i < n && !d->failed; i++) {
            set_where(d, what, i, NULL, 0);
            names[i] = rd_str(&r, false, "its name");
            dec_type(&r, &types[i]);
        }
    }
    if (d->version >= 2 && !d->failed && rd_bool(&r, "has_paths") && !d->failed) {
        uint32_t n = x->n_outputs;
        uint32_t *off = dec_array(d, n + 1, sizeof *off);
        Vec(uint32_t) items = {0};
        for (uint32_t i = 0; i < n && !d->failed; i++) {
            set_where(d, "output", i, NULL, 0);
            uint32_t depth = rd_u32(&r);
            if (d->failed) break;
            if (depth == 0 || depth > MAX_OUT_DEPTH) {
                dec_fail(d, "a path of %u fields (1 to %u)", depth, MAX_OUT_DEPTH);
                break;
            }
            if (!rd_count(&r, depth, 4, "path fields")) break;
            off[i] = (uint32_t)items.len;
            for (uint32_t j = 0; j < depth; j++)
                vec_push(&items, rd_u32(&r));
        }
        off[n] = (uint32_t)items.len;
        uint32_t *path = arena_array(&x->arena, items.len ? items.len : 1, sizeof *path);
        if (items.len) memcpy(path, items.data, items.len * sizeof *path);
        vec_free(&items);
        if (d->failed) return false;
        x->out_path_off = off, x->out_path = path;
    }
    return rd_end(&r);
}

#define CONST_MIN_BYTES 24u /* dtype, ndim, offset, nbytes */

static bool dec_consts(Dec *d) {
    Rd r = rd_open(d, SEC_CONSTS);
    VmExec *x = d->exe;
    const uint8_t *data = d->base + d->sec_off[SEC_DATA];
    uint64_t data_len = d->sec_len[SEC_DATA];
    /* In place when aligned in memory (always so for a mapped file); else copied. */
    bool in_place = (uintptr_t)data % CONST_ALIGN == 0;
    uint32_t n = rd_u32(&r);
    if (!rd_count(&r, n, CONST_MIN_BYTES, "constants")) return false;
    Value **consts = dec_array(d, n, sizeof *consts);
    x->n_consts = n, x->consts = consts; /* filled in order: rt_exec_release frees non-NULL */
    uint64_t prev_end = 0;
    for (uint32_t i = 0; i < n && !d->failed; i++) {
        set_where(d, "constant", i, NULL, 0);
        uint32_t dtype = rd_u32(&r), ndim = rd_u32(&r);
        uint64_t off = rd_u64(&r), nbytes = rd_u64(&r);
        if (d->failed) break;
        if (dtype >= RLY_DTYPE_COUNT) {
            dec_fail(d, "unknown dtype %u", dtype);
            break;
        }
        if (ndim > K_MAX_DIMS) {
            dec_fail(d, "%u dims (at most %u)", ndim, K_MAX_DIMS);
            break;
        }
        if (!rd_count(&r, ndim, 8, "dims")) break;
        int64_t shape[K_MAX_DIMS];
        for (uint32_t k = 0; k < ndim; k++)
            shape[k] = rd_i64(&r);
        char why[128];
        if (sup_shape_check(ndim, shape, false, why, sizeof why) != NULL) {
            dec_fail(d, "its shape is %s", why);
            break;
        }
        uint64_t numel = (uint64_t)sup_shape_numel(ndim, shape);
        size_t es = sup_dtype_size((rly_dtype)dtype);
        if (numel > UINT64_MAX / es || numel * es != nbytes) {
            dec_fail(d, "has %llu bytes, but its shape and dtype need %llu",
                     (unsigned long long)nbytes,
                     numel > UINT64_MAX / es ? 0ull : (unsigned long long)(numel * es));
            break;
        }
        if (off % CONST_ALIGN != 0) {
            dec_fail(d, "its bytes are not %u-byte aligned", CONST_ALIGN);
            break;
        }
        if (off < prev_end) {
            dec_fail(d, "its bytes overlap the constant before it");
            break;
        }
        if (off > data_len || nbytes > data_len - off) {
            dec_fail(d, "its bytes extend past the end of section %u (data)",
                     d->sec_index[SEC_DATA]);
            break;
        }
        prev_end = off + nbytes;
        void *bytes = (void *)(uintptr_t)(data + off); /* read-only: constants are never written */
        if (!in_place) {
            char *copy = arena_alloc(&x->arena, (size_t)nbytes + CONST_ALIGN - 1);
            copy += (CONST_ALIGN - (uintptr_t)copy % CONST_ALIGN) % CONST_ALIGN;
            if (nbytes) memcpy(copy, bytes, (size_t)nbytes);
            bytes = copy;
        }
        consts[i] = &rt_tensor_borrow((rly_dtype)dtype, ndim, shape, bytes, (size_t)nbytes)->hdr;
        consts[i]->flags |= RT_VF_CONST;
    }
    return rd_end(&r);
}

/* PREP: each entry checked against PREP_DATA and the constants (decoded before). */
static bool dec_preps(Dec *d) {
    if (d->version == 1) return true;
    Rd r = rd_open(d, SEC_PREP);
    VmExec *x = d->exe;
    const uint8_t *data = d->base + d->sec_off[SEC_PREP_DATA];
    uint64_t data_len = d->sec_len[SEC_PREP_DATA];
    bool in_place = (uintptr_t)data % CONST_ALIGN == 0;
    uint32_t n = rd_u32(&r);
    if (!rd_count(&r, n, PREP_ENTRY_BYTES, "prepared constants")) return false;
    VmPrep *preps = dec_array(d, n, sizeof *preps);
    uint64_t prev_end = 0;
    for (uint32_t i = 0; i < n && !d->failed; i++) {
        set_where(d, "prepared constant", i, NULL, 0);
        uint32_t konst = rd_u32(&r), zero = rd_u32(&r);
        uint64_t key = rd_u64(&r), off = rd_u64(&r), nbytes = rd_u64(&r);
        if (d->failed) break;
        if (zero != 0) {
            dec_fail(d, "has a nonzero reserved word");
            break;
        }
        if (konst >= x->n_consts) {
            dec_fail(d, "names constant %u (%u constants)", konst, x->n_consts);
            break;
        }
        if (nbytes == 0 || nbytes > UINT64_MAX - CONST_ALIGN) {
            dec_fail(d, "has %llu bytes", (unsigned long long)nbytes);
            break;
        }
        if (i > 0) {
            VmPrep cur = {konst, key, nbytes, NULL};
            if (prep_cmp(&preps[i - 1], &cur) >= 0) {
                dec_fail(d, "is not after the one before it (by constant, key, bytes)");
                break;
            }
        }
        if (off % CONST_ALIGN != 0) {
            dec_fail(d, "its bytes are not %u-byte aligned", CONST_ALIGN);
            break;
        }
        if (off < prev_end) {
            dec_fail(d, "its bytes overlap the entry before it");
            break;
        }
        if (off > data_len || round64(nbytes) > data_len - off) {
            dec_fail(d,
                     "its bytes (padded to 64) extend past the end of section %u (prepared "
                     "data)",
                     d->sec_index[SEC_PREP_DATA]);
            break;
        }
        prev_end = off + round64(nbytes);
        const void *bytes = data + off;
        if (!in_place) {
            char *copy = arena_alloc(&x->arena, (size_t)round64(nbytes) + CONST_ALIGN - 1);
            copy += (CONST_ALIGN - (uintptr_t)copy % CONST_ALIGN) % CONST_ALIGN;
            memcpy(copy, bytes, (size_t)round64(nbytes));
            bytes = copy;
        }
        preps[i] = (VmPrep){konst, key, nbytes, bytes};
    }
    if (d->failed) return false;
    x->n_preps = n, x->preps = preps;
    return rd_end(&r);
}

/* Decode an image. Owns `mapping` (the file's mmap, or NULL): it becomes the result's, or is
 * unmapped on failure. The message goes to err as "<prefix>: <what>". */
static VmExec *decode_image(const uint8_t *data, size_t len, void *mapping, unsigned flags,
                            const char *prefix, char *err, size_t cap) {
    Dec d = {.base = data, .len = len};
    VmExec *x = NULL;
    if (!host_little_endian()) {
        dec_fail_file(&d, "this build runs on a big-endian machine, which rly executables do "
                          "not support");
    } else if (dec_header(&d)) {
        x = sup_calloc(1, sizeof *x);
        arena_init(&x->arena);
        x->mapping = mapping, x->mapping_len = mapping ? len : 0;
        mapping = NULL;
        d.exe = x;
        (void)(dec_strings(&d) && dec_strs(&d) && dec_ctors(&d) && dec_consts(&d) &&
               dec_preps(&d) && dec_packed(&d) && dec_funcs(&d) && dec_entry(&d));
    }
    if (!d.failed && (flags & RT_EXEC_CHECK)) {
        char why[512];
        if (!vm_exec_validate(x, why, sizeof why))
            dec_fail_file(&d, "invalid executable: %s", why);
        else if (!vm_exec_bind(x, why, sizeof why))
            dec_fail_file(&d, "%s", why);
    }
    if (!d.failed) return x;
    snprintf(err, cap, "%s: %s", prefix, d.msg);
    rt_exec_release(x);
    if (mapping != NULL) munmap(mapping, len);
    return NULL;
}

VmExec *rt_exec_decode(const void *data, size_t len, unsigned flags, char *err, size_t cap) {
    return decode_image(data, len, NULL, flags, "rlyx", err, cap);
}

VmExec *rt_exec_load_file(const char *path, unsigned flags, char *err, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, cap, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, cap, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        snprintf(err, cap, "%s: the file is empty, not an rly executable", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        snprintf(err, cap, "%s: the file is too large to map", path);
        close(fd);
        return NULL;
    }
    size_t len = (size_t)st.st_size;
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, cap, "%s: cannot map the file: %s", path, strerror(map_errno));
        return NULL;
    }
    return decode_image(map, len, map, flags, path, err, cap);
}

VmExec *vm_exec_load(const char *path, char *err, size_t cap) {
    return rt_exec_load_file(path, RT_EXEC_CHECK, err, cap);
}

VmExec *vm_exec_load_bytes(const void *data, size_t len, char *err, size_t cap) {
    return rt_exec_decode(data, len, RT_EXEC_CHECK, err, cap);
}

void rt_exec_release(VmExec *exe) {
    if (exe == NULL) return;
    for (uint32_t i = 0; exe->consts != NULL && i < exe->n_consts; i++)
        rt_value_free_immortal(exe->consts[i]);
    k_prep_cache_free(exe->prep);
    arena_free(&exe->arena);
    if (exe->mapping != NULL) munmap(exe->mapping, exe->mapping_len);
    free(exe);
}

/* ======================================================================================
 * Equality (tests, the fuzz target)
 * ====================================================================================== */

static bool differ(char *why, size_t cap, const char *fmt, ...) RLY_PRINTF(3, 4);
static bool differ(char *why, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return false;
}

static bool same_str(const char *a, const char *b) {
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static bool same_type(const VmTypeDesc *a, const VmTypeDesc *b) {
    if (a->is_tensor != b->is_tensor || a->dtype != b->dtype || a->ndim != b->ndim ||
        !same_str(a->text, b->text))
        return false;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

static bool same_attr(const KAttr *a, const KAttr *b) {
    if (!same_str(a->name, b->name) || a->kind != b->kind || a->i != b->i ||
        !same_bits(a->f, b->f) || !same_str(a->s, b->s) || a->n != b->n ||
        attr_arrays(a) != attr_arrays(b))
        return false;
    for (uint32_t j = 0; j < a->n; j++) {
        if (a->ints && a->ints[j] != b->ints[j]) return false;
        if (a->floats && !same_bits(a->floats[j], b->floats[j])) return false;
        if (a->strs && !same_str(a->strs[j], b->strs[j])) return false;
    }
    return true;
}

static bool same_instr(const VmInstr *a, const VmInstr *b) {
    return a->op == b->op && a->sub == b->sub && a->rk == b->rk && a->flags == b->flags &&
           a->dst == b->dst && a->a == b->a && a->b == b->b && a->c == b->c && a->n == b->n &&
           a->args == b->args && a->dtype == b->dtype && a->imm == b->imm;
}

static bool same_tensor(const Value *va, const Value *vb) {
    if (va == NULL || vb == NULL || va->kind != VAL_TENSOR || vb->kind != VAL_TENSOR)
        return va == vb;
    const RtTensor *a = RT_TENSOR(va), *b = RT_TENSOR(vb);
    if (rt_tensor_dtype(a) != rt_tensor_dtype(b) || a->t.ndim != b->t.ndim) return false;
    for (int32_t d = 0; d < a->t.ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    size_t n =
        (size_t)sup_shape_numel((uint32_t)a->t.ndim, a->shape) * sup_dtype_size(rt_tensor_dtype(a));
    return n == 0 || memcmp(rt_tensor_data(a), rt_tensor_data(b), n) == 0;
}

static bool equal_plans(const VmPlan *x, const VmPlan *y) {
    if (x == NULL || y == NULL) return x == y;
    if (x->arena_bytes != y->arena_bytes || x->n_bufs != y->n_bufs || x->n_sites != y->n_sites ||
        x->n_slots != y->n_slots || x->n_inplace != y->n_inplace)
        return false;
    for (uint32_t k = 0; k < x->n_bufs; k++) {
        const VmPlanBuf *a = &x->bufs[k], *b = &y->bufs[k];
        if (a->offset != b->offset || a->nbytes != b->nbytes || a->dtype != b->dtype ||
            a->ndim != b->ndim || a->start != b->start || a->end != b->end ||
            a->inplace != b->inplace ||
            (a->ndim && memcmp(a->shape, b->shape, a->ndim * sizeof *a->shape) != 0))
            return false;
    }
    for (uint32_t k = 0; k < x->n_sites; k++)
        if (x->sites[k].pc != y->sites[k].pc || x->sites[k].first != y->sites[k].first ||
            x->sites[k].n != y->sites[k].n)
            return false;
    return x->n_slots == 0 || memcmp(x->slots, y->slots, x->n_slots * sizeof *x->slots) == 0;
}

static bool equal_funcs(const VmExec *a, const VmExec *b, char *why, size_t cap) {
    for (uint32_t f = 0; f < a->n_funcs; f++) {
        const VmFunction *x = &a->funcs[f], *y = &b->funcs[f];
        if (!same_str(x->name, y->name) || x->n_params != y->n_params ||
            x->n_captured != y->n_captured || x->n_regs != y->n_regs ||
            x->result_kind != y->result_kind || x->n_code != y->n_code || x->n_pool != y->n_pool ||
            (x->loc == NULL) != (y->loc == NULL))
            return differ(why, cap, "function %u: the header differs", f);
        if (x->n_regs && memcmp(x->reg_kind, y->reg_kind, x->n_regs) != 0)
            return differ(why, cap, "function %u: the register kinds differ", f);
        for (uint32_t k = 0; k < x->n_code; k++) {
            if (!same_instr(&x->code[k], &y->code[k]))
                return differ(why, cap, "function %u, instruction %u differs", f, k);
            if (x->loc && x->loc[k] != y->loc[k])
                return differ(why, cap, "function %u, location %u differs", f, k);
        }
        if (x->n_pool && memcmp(x->pool, y->pool, x->n_pool * sizeof *x->pool) != 0)
            return differ(why, cap, "function %u: the pools differ", f);
        if (!equal_plans(x->plan, y->plan))
            return differ(why, cap, "function %u: the memory plans differ", f);
    }
    return true;
}

static bool equal_packed(const VmExec *a, const VmExec *b, char *why, size_t cap) {
    for (uint32_t p = 0; p < a->n_packed; p++) {
        const VmPacked *x = &a->packed[p], *y = &b->packed[p];
        if (!same_str(x->name, y->name) || x->n_inputs != y->n_inputs || x->n_nodes != y->n_nodes ||
            x->result != y->result)
            return differ(why, cap, "packed function %u: the header differs", p);
        for (uint32_t k = 0; k < x->n_nodes; k++) {
            const VmNode *m = &x->nodes[k], *n = &y->nodes[k];
            if (m->kind != n->kind || m->op_id != n->op_id || m->index != n->index ||
                m->loc != n->loc || m->out_tuple != n->out_tuple || m->n_out != n->n_out ||
                m->n_args != n->n_args || m->n_attrs != n->n_attrs ||
                (m->n_args && memcmp(m->args, n->args, m->n_args * sizeof *m->args) != 0))
                return differ(why, cap, "packed function %u, node %u differs", p, k);
            for (uint32_t j = 0; j < m->n_attrs; j++)
                if (!same_attr(&m->attrs[j], &n->attrs[j]))
                    return differ(why, cap, "packed function %u, node %u, attribute %u differs", p,
                                  k, j);
        }
    }
    return true;
}

static bool equal_preps(const VmExec *a, const VmExec *b, char *why, size_t cap) {
    uint32_t na, nb;
    VmPrep *pa = prep_list(a, &na), *pb = prep_list(b, &nb);
    bool same = na == nb;
    if (!same) differ(why, cap, "%u and %u prepared constants", na, nb);
    for (uint32_t i = 0; same && i < na; i++)
        if (pa[i].konst != pb[i].konst || pa[i].key != pb[i].key || pa[i].bytes != pb[i].bytes ||
            memcmp(pa[i].blob, pb[i].blob, (size_t)pa[i].bytes) != 0)
            same = differ(why, cap, "prepared constant %u differs", i);
    free(pa);
    free(pb);
    return same;
}

bool rt_exec_equal(const VmExec *a, const VmExec *b, char *why, size_t cap) {
    if (a->n_funcs != b->n_funcs || a->n_packed != b->n_packed || a->n_consts != b->n_consts ||
        a->n_ctors != b->n_ctors || a->n_strs != b->n_strs || a->entry != b->entry ||
        a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs || a->out_tuple != b->out_tuple)
        return differ(why, cap, "the counts or the entry differ");
    for (uint32_t i = 0; i < a->n_strs; i++)
        if (!same_str(a->strs[i], b->strs[i])) return differ(why, cap, "strs[%u] differs", i);
    for (uint32_t i = 0; i < a->n_ctors; i++) {
        const VmCtor *x = &a->ctors[i], *y = &b->ctors[i];
        if (!same_str(x->name, y->name) || !same_str(x->type_name, y->type_name) ||
            x->tag != y->tag || x->arity != y->arity)
            return differ(why, cap, "constructor %u differs", i);
    }
    for (uint32_t i = 0; i < a->n_consts; i++)
        if (!same_tensor(a->consts[i], b->consts[i]))
            return differ(why, cap, "constant %u differs", i);
    for (uint32_t i = 0; i < a->n_inputs; i++)
        if (!same_str(a->in_names[i], b->in_names[i]) ||
            !same_type(&a->in_types[i], &b->in_types[i]))
            return differ(why, cap, "input %u differs", i);
    for (uint32_t i = 0; i < a->n_outputs; i++)
        if (!same_str(a->out_names[i], b->out_names[i]) ||
            !same_type(&a->out_types[i], &b->out_types[i]))
            return differ(why, cap, "output %u differs", i);
    if ((a->out_path == NULL) != (b->out_path == NULL))
        return differ(why, cap, "one has output paths, the other not");
    for (uint32_t i = 0; a->out_path != NULL && i < a->n_outputs; i++) {
        uint32_t la = a->out_path_off[i + 1] - a->out_path_off[i];
        if (la != b->out_path_off[i + 1] - b->out_path_off[i] ||
            memcmp(a->out_path + a->out_path_off[i], b->out_path + b->out_path_off[i],
                   la * sizeof(uint32_t)) != 0)
            return differ(why, cap, "output %u's path differs", i);
    }
    return equal_packed(a, b, why, cap) && equal_funcs(a, b, why, cap) &&
           equal_preps(a, b, why, cap);
}
