/* kernel.h - the kernel interface: how an operator's computation is called on tensors. The
 * interface of src/kernels/.
 *
 * Kernels never see the IR (the dependency rule: support <- kernels <- runtime). A caller (the
 * interpreter, the VM, constant folding) decodes the call's attributes into KAttr rows, flattens
 * its tensor arguments (a tuple argument contributes its fields), and calls the kernel with a
 * KCall. The kernel
 *   - checks its call: a kernel may not trust the type relation, because the VM runs calls read
 *     from executable files, which can be anything the file says (docs/vm.md, "Kernels and
 *     untrusted executables"). Attributes may be missing or of any kind, length or value (the
 *     accessors below survive that); arguments may have any of the 13 dtypes, any rank and shape
 *     within the shape limit, a tuple where a tensor is due, or be missing (the VM pads the
 *     argument arrays with a 0-d tensor); the result structure (n_out, out_tuple) may not be the
 *     operator's. So a kernel checks, preferably once at its top, the ranks and dtypes it
 *     indexes by, list lengths against ranks, layouts, axes, and what the relation could not
 *     know (a `?` dim that turns out inconsistent, an index out of range, an integer division by
 *     zero), and fails with k_error, which returns -1;
 *   - computes each output's dtype and shape itself and obtains the output with k_out, which
 *     allocates it through the caller's hook (which may refuse a large one), or checks a
 *     preallocated one against that shape;
 *   - fills the outputs and returns 0.
 * Whatever the call, a reference kernel never crashes, reads or writes out of bounds, or runs
 * into undefined behaviour; its sizes are computed with checked arithmetic against the shape
 * limit (sup_dim_mul, sup_dim_add) and its work is bounded by the sizes of its inputs and
 * outputs, never by an attribute's value (a window of 2^40 taps over a 3-element input visits
 * 3). tests/fuzz/fuzz_kernels.c checks all of this on generated calls.
 * Kernels read inputs at k_ptr(t) (data + byte_offset) as compact row-major tensors: callers
 * pass no strided views (strides == NULL).
 *
 * The reference kernels (src/kernels/ref) are the semantic oracle: plain C, no intrinsics,
 * every dtype a relation admits, every attribute combination. Element access is generic over
 * dtypes through k_loadf/k_loadi/k_storef/k_storei; a kernel may specialize hot dtypes (f32)
 * with typed loops where speed matters (conv, dense). */
#ifndef RLY_KERNELS_KERNEL_H
#define RLY_KERNELS_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rly/dlpack.h"
#include "rly/rly.h"
#include "support/support.h"

#define K_MAX_DIMS 32 /* the largest rank kernels handle (as .npy) */

/* ---- attributes ---------------------------------------------------------------------------- */

typedef enum KAttrKind {
    KA_NONE,   /* None (an optional attribute left out) */
    KA_INT,    /* i (bools are 0/1; AT_DTYPE attributes are the rly_dtype, or -1 for "") */
    KA_FLOAT,  /* f */
    KA_STR,    /* s */
    KA_INTS,   /* n items in ints[] (and the same values in floats[]) */
    KA_FLOATS, /* n items in floats[] */
    KA_STRS,   /* n items in strs[] */
} KAttrKind;

typedef struct KAttr {
    const char *name; /* the schema's name ("padding") */
    uint8_t kind;     /* KAttrKind */
    int64_t i;        /* KA_INT */
    double f;         /* KA_FLOAT, and KA_INT as a double */
    const char *s;    /* KA_STR */
    uint32_t n;       /* list length */
    const int64_t *ints;
    const double *floats;
    const char *const *strs;
} KAttr;

/* ---- a call -----------------------------------------------------------------------------------
 */

typedef struct KCall KCall;
struct KCall {
    const char *op; /* operator name, for messages */
    const KAttr *attrs;
    uint32_t n_attrs; /* every schema row, defaults filled in (from a file: any rows at all) */
    /* The first attribute problem an accessor met (a name not in the rows, a row of a kind it
     * cannot read): the attribute's name and what was expected; NULL when none. The accessor
     * returns a neutral value; the caller turns the problem into the call's error with
     * k_call_result, whatever the kernel returned. */
    const char *bad_attr, *bad_attr_want;

    /* Arguments: argument a is in[arg_start[a] .. arg_start[a] + arg_len[a]); arg_tuple[a] says
     * whether it was a tuple (then arg_len[a] is its field count, possibly 0). */
    uint32_t n_args;
    const uint32_t *arg_start, *arg_len;
    const uint8_t *arg_tuple;
    const DLTensor *const *in;
    uint32_t n_in;

    /* Result: one tensor (out_tuple false, n_out 1) or the fields of a tuple. out[i] is NULL
     * until k_out fills it, unless the caller preallocated it. */
    DLTensor **out;
    uint32_t n_out;
    bool out_tuple;

    /* The caller's allocator: make out[i] a new zero-filled tensor of this dtype and shape.
     * Returns 0, or -1 with kc->err filled (out of memory, size overflow). */
    int (*alloc)(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape);
    void *rt; /* the caller's data for alloc */

    char *err; /* the message of a failure; err_cap bytes, NUL-terminated */
    size_t err_cap;

    /* Scratch (k_scratch). The caller may lend a workspace: ws_cap bytes at ws (64-byte
     * aligned), of which ws_used are taken (0 before the call). Where no workspace is lent or it
     * is too small, k_scratch mallocs a block it links into `heap`; the caller frees those with
     * k_call_release after the call, whatever the call returned. scratch_cur is the scratch
     * live now (every k_scratch request rounded up to 64 bytes, less what k_scratch_reset gave
     * back) and scratch_need its peak: a workspace of scratch_need bytes serves the same call with
     * no malloc (ws_used == scratch_cur while everything fits). A zero-initialized KCall lends
     * none. */
    uint8_t *ws;
    size_t ws_cap, ws_used;
    size_t scratch_cur, scratch_need;
    void *heap; /* the fallback blocks, newest first (k_call_release) */

    /* Threads and constants (fast kernels, src/kernels/fast). pool: the threads k_parallel may
     * use (NULL: the calling thread only). in_const: NULL, or n_in flags: in_const[i] is 1 when
     * input i is a constant of the program (immutable, alive as long as `prep`), 2 when it is an
     * input of the running program, immutable until the run ends (prep_run is cleared then),
     * 0 otherwise. prep, prep_run: where kernels keep what they derive from such inputs (packed
     * weights), NULL for none. A zero-initialized KCall has none of them: kernels then work on
     * one thread and derive per call. */
    SupPool *pool;
    const uint8_t *in_const;
    struct KPrepCache *prep;
    struct KPrepCache *prep_run; /* for in_const 2: inputs of this run (weights given as inputs) */

    /* A fused tail (the VM's fused groups): NULL, or a program to apply to output 0. A kernel
     * that supports it calls epi->begin(epi->ctx, out0) once, on the calling thread, after
     * obtaining output 0; when that returns 0 it calls epi->apply(epi->ctx, flat0, n) on every
     * range of output 0's elements (row-major flat indices) as soon as their values are final,
     * each element once, from any thread (ranges are disjoint), and sets epi_done. A kernel
     * that does not (or whose begin returned nonzero) leaves epi_done false: the caller then
     * applies the tail itself. */
    const struct KEpilogue *epi;
    bool epi_done;

    /* The caller's preallocated outputs hold stale bytes (a memory plan's reused buffers): k_out
     * zeroes such an output before handing it out, which kernels may count on; k_out_raw, for
     * kernels that write every element, does not. */
    bool out_dirty;
};

/* A tail that is one clamp of output 0 (K_CLAMP_RELU: x > 0 ? x : 0, NaN to 0; K_CLAMP_CLIP:
 * min(hi, max(lo, x)) as x86 computes them, NaN kept) may be applied by the kernel itself to
 * each value as it stores it: after begin returned 0, the kernel writes clamp(v) at clamp_out
 * (the tail's result, output 0's shape) instead of v into output 0, never calls apply, and sets
 * epi_done. A kernel that does not know `clamp` uses begin/apply as usual. */
enum { K_CLAMP_NONE, K_CLAMP_RELU, K_CLAMP_CLIP };

/* A tail that is a bias add, then maybe one relu or clip: y = clamp(x + b) (or clamp(b + x): the
 * program's order, which x86 keeps for a NaN's payload), b a float32 tensor broadcast to output
 * 0's shape, may also be applied by the kernel as it stores: begin then sets bias (b's data,
 * compact), bias_mask (bit d set: b varies along output dimension d; it is constant along the
 * others) and clamp_out (the result). A kernel that knows how b's values map to its tiles (a
 * per-channel bias of NCHW or NCHW{b}c, a per-column bias of a product) writes y at clamp_out
 * and sets epi_done; any other uses begin/apply as usual. */
typedef struct KBias {
    const float *b; /* NULL: the tail is not one */
    uint32_t mask;  /* output dims along which b varies */
    bool first;     /* b + x, else x + b */
    uint8_t clamp;  /* K_CLAMP_* after the add */
    float lo, hi;   /* K_CLAMP_CLIP's bounds */
    int64_t run, n; /* b varies along one dim (mask one bit): output element f's value is
                     * b[(f / run) % n] (n: that dim's extent); else both 0 */
    /* NULL, or a residual added after the bias, before the clamp: y = clamp((x + b) + res[f])
     * (res_first: res[f] + (x + b)), res a compact float32 tensor of output 0's shape. A kernel
     * that does not know res must not take the tail. res_inplace: the result is res's own
     * buffer (no other overlap is offered), so only a kernel that reads each residual element
     * before it stores that element (in registers) may take it. */
    const float *res;
    bool res_first;
    bool res_inplace;
} KBias;

typedef struct KEpilogue {
    int (*begin)(void *ctx, const DLTensor *out0);
    void (*apply)(void *ctx, int64_t flat0, int64_t n);
    /* NULL, or apply over rows ranges of cols elements, the first at flat0, each ld after the
     * one before: one call for a kernel's 2-D block (a product's tile) */
    void (*apply2)(void *ctx, int64_t flat0, int64_t rows, int64_t cols, int64_t ld);
    void *ctx;
    uint8_t clamp;    /* K_CLAMP_*: what the whole tail is */
    float lo, hi;     /* K_CLAMP_CLIP's bounds */
    float *clamp_out; /* set by begin when clamp != K_CLAMP_NONE or bias.b != NULL */
    KBias bias;       /* set by begin (see above) */
} KEpilogue;

typedef int (*KernelFn)(KCall *kc);
/* What a kernel the VM calls on its own (not an operator's: kern_fast_conv_maxpool) returns when
 * it does not take the call, having written nothing: the VM then runs the calls it stands for. */
#define K_DECLINED 1

/* ---- threads and prepared constants (prep.c) ------------------------------------------------ */

/* Run fn(ctx, t, worker) for t in [0, n) on the call's pool (all on the caller without one).
 * Tasks must not call k_out, k_scratch, k_error or k_prepared (they touch the KCall): a kernel
 * obtains its outputs, scratch and prepared data first, then forks. */
static inline void k_parallel(const KCall *kc, int64_t n, SupTaskFn fn, void *ctx) {
    sup_pool_run(kc->pool, n, fn, ctx);
}
static inline int k_threads(const KCall *kc) { return sup_pool_threads(kc->pool); }

/* A cache of data derived from constant tensors, shared by the sessions of one executable
 * (thread-safe): entries are keyed by the constant's data address and a kernel's key, made once,
 * freed with the cache. */
typedef struct KPrepCache KPrepCache;
KPrepCache *k_prep_cache_new(void);
void k_prep_cache_free(KPrepCache *c);          /* NULL is a no-op */
size_t k_prep_cache_bytes(const KPrepCache *c); /* bytes held */
void k_prep_cache_clear(KPrepCache *c);         /* drop every entry; NULL is a no-op */
/* Filled `bytes` bytes (64-byte aligned) derived from input `in` of the call by
 * fill(dst, in tensor, arg), made the first time this (data address, key, bytes) is asked for
 * and kept in the call's cache; key names the kernel and its packing parameters. NULL when the
 * input is not a constant, the call has no cache, or memory runs out: the kernel then derives
 * the data itself, in scratch. */
typedef void (*KPrepFill)(void *dst, const DLTensor *src, const void *arg);
const void *k_prepared(KCall *kc, uint32_t in, uint64_t key, size_t bytes, KPrepFill fill,
                       const void *arg);
/* Prepared data may come from an executable file (k_prep_cache_seed): a kernel relies only on
 * having `bytes` readable bytes (and zeros up to the next multiple of 64 for a blob it filled
 * itself), never on their values for memory safety (no indices or sizes inside a blob). */

/* One entry of a cache: what k_prepared was asked for (data, key, bytes) and the bytes. */
typedef struct KPrepItem {
    const void *data;
    uint64_t key;
    size_t bytes;
    const void *blob;
} KPrepItem;
/* Enter an entry whose bytes the caller keeps alive as long as the cache (an executable file's
 * mapping): k_prepared then returns it without filling. bytes > 0; false when the entry exists
 * already or memory runs out. */
bool k_prep_cache_seed(KPrepCache *c, const KPrepItem *it);
/* Every entry, sorted by (data address, key, bytes); *n of them, in a malloc'ed array the caller
 * frees (never NULL when c is not). */
KPrepItem *k_prep_cache_list(KPrepCache *c, size_t *n);
/* Entries made by kernels' fills (not seeded) since the cache was made or cleared. */
size_t k_prep_cache_fills(const KPrepCache *c);

/* Fail the call: writes the message (printf format) and returns -1. */
int k_error(KCall *kc, const char *fmt, ...) RLY_PRINTF(2, 3);

/* Output i of dtype dt and the given shape: allocated, or the preallocated out[i] after checking
 * that its dtype and shape agree (a mismatch is an error naming both). A shape past the limit
 * (support.h, "shapes": a dim over 2^62, or nonzero dims whose product is) is an error, so every
 * tensor a kernel sees obeys it. NULL on failure (error set): the kernel then returns -1. */
DLTensor *k_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape);

/* k_out for a kernel that writes every element of the output: a preallocated output is handed
 * out as it is, never zeroed (KCall.out_dirty). */
DLTensor *k_out_raw(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape);

/* Scratch memory for the call: `bytes` zero-filled bytes, 64-byte aligned, valid until the
 * caller's k_call_release (a kernel never frees it). Taken from the caller's workspace where it
 * fits, else malloc'd (counted by k_scratch_mallocs). NULL with an error on out of memory. */
void *k_scratch(KCall *kc, size_t bytes);
/* k_scratch without the zero fill: the bytes are undefined (a kernel that writes before it reads).
 */
void *k_scratch_raw(KCall *kc, size_t bytes);
/* count elements of `size` bytes (at least one byte): NULL with an error when count is negative
 * or the product overflows. */
void *k_scratch_n(KCall *kc, int64_t count, size_t size);
/* A helper that takes scratch and is called in a loop (a GEMM per group) gives it back when it
 * is done: mark before, reset to the mark after; the scratch taken since is invalid then. */
typedef struct KScratchMark {
    size_t ws_used, cur;
    void *heap;
} KScratchMark;
static inline KScratchMark k_scratch_mark(const KCall *kc) {
    return (KScratchMark){kc->ws_used, kc->scratch_cur, kc->heap};
}
void k_scratch_reset(KCall *kc, KScratchMark m);
/* Free the call's fallback blocks and give back its workspace (ws_used = 0). scratch_need stays,
 * for the caller to size its next workspace. */
void k_call_release(KCall *kc);
/* The number of fallback mallocs k_scratch made in this process so far (for tests). */
uint64_t k_scratch_mallocs(void);

/* Every output is obtained and has no elements: the kernel is done. A kernel checks this before
 * any loop or scratch sized by dims, which may be huge when a tensor is empty (support.h,
 * "shapes"): its work must be bounded by its rank, not by its dims. */
bool k_outs_empty(const KCall *kc);

/* Argument a's first (or only) tensor; the j-th field of a tuple argument. */
static inline const DLTensor *k_arg(const KCall *kc, uint32_t a) {
    return kc->in[kc->arg_start[a]];
}
static inline const DLTensor *k_field(const KCall *kc, uint32_t a, uint32_t j) {
    return kc->in[kc->arg_start[a] + j];
}

/* Attributes by name. The rows come from the caller: the schema's rows with the defaults filled
 * in when the call was type-checked, but any rows at all from an executable file. So a name that
 * is not there, or a row of a kind an accessor cannot read, is not a bug but a bad call: the
 * accessor records it in the KCall (bad_attr, the first one only; hence the cast of the const
 * KCall, which is always a mutable object) and returns a neutral value, which the kernel must
 * survive like any other value; the caller then fails the call with k_call_result.
 *   k_attr: the row (the first of that name); missing: a static KA_NONE row.
 *   k_int: KA_INT, a KA_FLOAT holding an integer in int64 range, a list of one integer;
 *     otherwise 0 (KA_NONE included: read optional ints with k_is_none first).
 *   k_float: KA_INT, KA_FLOAT, a list of one number; otherwise 0.
 *   k_bool: k_int != 0.
 *   k_str: KA_STR; KA_NONE reads as ""; otherwise "".
 *   k_is_none: any row (a missing one is recorded and reads as None).
 *   k_ints: KA_INTS, KA_FLOATS with its integers, KA_INT (a list of one); KA_NONE is the empty
 *     list; otherwise 0 items. The length is returned, *out never NULL.
 *   k_floats: KA_FLOATS, KA_INTS with its floats, KA_INT or KA_FLOAT (a list of one); KA_NONE
 *     is the empty list; otherwise 0 items.
 * Values are what the caller gave: a kernel checks ranges, list lengths against ranks, layouts
 * (k_layout_attr) and dtypes (k_dtype_attr) before it uses them. */
const KAttr *k_attr(const KCall *kc, const char *name);
int64_t k_int(const KCall *kc, const char *name);
double k_float(const KCall *kc, const char *name);
bool k_bool(const KCall *kc, const char *name);
const char *k_str(const KCall *kc, const char *name);
bool k_is_none(const KCall *kc, const char *name);
uint32_t k_ints(const KCall *kc, const char *name, const int64_t **out);
uint32_t k_floats(const KCall *kc, const char *name, const double **out);
/* A dtype attribute (an AT_DTYPE row: the rly_dtype, or -1 for "", which gives `dflt`): false
 * with an error set on kc when it names no dtype. */
bool k_dtype_attr(KCall *kc, const char *name, rly_dtype dflt, rly_dtype *out);
/* Record an attribute problem (the first one is kept), as the accessors do. */
void k_attr_bad(const KCall *kc, const char *name, const char *want);
/* The result of a call whose kernel returned rc: -1 with the message "attribute 'NAME': WANT"
 * in kc->err when an accessor recorded a problem (it replaces the kernel's own message: a
 * kernel that read a neutral value may have failed for that reason), else rc. Every caller of a
 * kernel passes its return value through this. */
int k_call_result(KCall *kc, int rc);

/* ---- tensors ------------------------------------------------------------------------------- */

rly_dtype k_dtype(const DLTensor *t); /* the element type (a bug if DLPack-unknown) */
DLDataType k_dl_dtype(rly_dtype dt);  /* and back */
bool k_dl_dtype_known(DLDataType d);  /* one of rly's 13 dtypes with one lane */
static inline void *k_ptr(const DLTensor *t) { return (char *)t->data + t->byte_offset; }
int64_t k_numel(const DLTensor *t);
/* The product of the dims; 1 for rank 0. Exact for every shape that obeys the limit (support.h,
 * "shapes": every tensor's shape does); SUP_DIM_OVER for one past it, never an overflow. */
int64_t k_shape_numel(uint32_t ndim, const int64_t *shape);
bool k_same_shape(const DLTensor *a, const DLTensor *b);
/* "(2, 3)" into buf, for messages. */
const char *k_shape_str(const DLTensor *t, char *buf, size_t cap);

/* Element i (flat index) of a compact array of dtype dt, as double / as int64. Floats load
 * exactly (f16, bf16 widened); int64 and uint64 load exactly by k_loadi (uint64 as its bit
 * pattern: use k_loadu for the value). Bools load as 0/1. */
double k_loadf(const void *base, rly_dtype dt, int64_t i);
int64_t k_loadi(const void *base, rly_dtype dt, int64_t i);
uint64_t k_loadu(const void *base, rly_dtype dt, int64_t i);
/* Store v into element i, converting to dt as a C cast would, with the cases C leaves undefined
 * defined: float to integer truncates toward zero and saturates at the type's range, NaN gives
 * 0; any value to bool is v != 0; doubles round to nearest even into f32/f16/bf16. Integers
 * stored by k_storei wrap modulo 2^bits (two's complement). */
void k_storef(void *base, rly_dtype dt, int64_t i, double v);
void k_storei(void *base, rly_dtype dt, int64_t i, int64_t v);
void k_storeu(void *base, rly_dtype dt, int64_t i, uint64_t v);
/* Copy element i of src (dtype sd) into element j of dst (dtype dd), converting exactly as
 * cast does (integers to integers wrap, to floats round; floats as k_storef). */
void k_convert(void *dst, rly_dtype dd, int64_t j, const void *src, rly_dtype sd, int64_t i);

/* ---- iteration and broadcasting ------------------------------------------------------------- */

/* Row-major element strides of a shape (strides[ndim-1] = 1). Products saturate as
 * sup_dim_mul_sat, so a shape past the limit gives unusable strides but no overflow. */
void k_strides(uint32_t ndim, const int64_t *shape, int64_t *strides);
/* The strides that read tensor t (rank <= ndim, numpy-broadcastable to shape) in the index
 * space of `shape`: aligned at the right, 0 on broadcast (size-1 or missing) dims. */
void k_bcast_strides(const DLTensor *t, uint32_t ndim, const int64_t *shape, int64_t *strides);
/* Numpy broadcast of the shapes of a and b into out (*ndim set); false when incompatible. */
bool k_bcast_shape(const DLTensor *a, const DLTensor *b, uint32_t *ndim, int64_t *out);
/* Advance a multi-index over shape in row-major order; false after the last. */
static inline bool k_next(int64_t *idx, uint32_t ndim, const int64_t *shape) {
    for (uint32_t d = ndim; d-- > 0;) {
        if (++idx[d] < shape[d]) return true;
        idx[d] = 0;
    }
    return false;
}
/* Normalize an axis (negative counts from the end); false when outside [0, ndim). */
bool k_axis(int64_t axis, uint32_t ndim, int64_t *out);

/* ---- layouts ------------------------------------------------------------------------------- */

/* Layouts ("NCHW", "NCHW16c", "OIHW4i4o") are parsed by the one parser in support.h ("data
 * layouts"), which the type relations (src/ops) use too; the relation has checked the attribute,
 * a kernel still checks the parse, the rank and the axes it reads. */
typedef SupLayout KLayout;
/* Parse s; false when it is not a layout. */
static inline bool k_layout_parse(const char *s, KLayout *l) {
    char why[8]; /* the reason is not needed here */
    l->attr = NULL;
    return sup_layout_parse(s, l, why, sizeof why) == NULL;
}
/* The position of axis a ('N' primal, 'c' a sub-axis) in l, or -1. */
static inline int k_layout_find(const KLayout *l, char a) { return sup_layout_find(l, a); }
/* The block size of primal axis a's sub-axis, or 0 when l does not split a. */
static inline int64_t k_layout_block(const KLayout *l, char a) { return sup_layout_block(l, a); }
/* The layout attribute `attr` of a tensor of rank ndim, parsed: -1 with an error when it is not
 * a layout or has another number of axes. */
int k_layout_attr(KCall *kc, const char *attr, uint32_t ndim, KLayout *l);
/* The positions in l of the primal axes named in `axes` ("NCHW", "HW"), which must be present
 * and unsplit: pos[i] for axes[i]. -1 with an error otherwise. */
int k_layout_axes(KCall *kc, const KLayout *l, const char *axes, int *pos);

/* ---- the kernel registry ------------------------------------------------------------------- */

/* One row per operator: its id (support/ops.def) and its reference kernel. */
typedef struct KernelDef {
    uint32_t op; /* OP_ID_* */
    KernelFn fn;
} KernelDef;

/* Per-category tables of reference kernels (src/kernels/ref/<category>.c, the categories of
 * support/ops.def), each terminated by a row with fn NULL. Together they hold one row per
 * builtin operator, which the registry checks when it first indexes them. */
extern const KernelDef kern_ref_unary[], kern_ref_binary[], kern_ref_reduce[], kern_ref_transform[],
    kern_ref_index[], kern_ref_nn[], kern_ref_conv_pool[], kern_ref_image_vision[], kern_ref_qnn[],
    kern_ref_misc[], kern_ref_dyn[];

/* The reference kernel of operator id `op`: an array access (the tables are indexed by id once,
 * at first use). NULL for op >= OP_ID_COUNT (registered operators bring their own kernels). */
KernelFn kern_ref_lookup(uint32_t op);

#endif /* RLY_KERNELS_KERNEL_H */
