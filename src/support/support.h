/* support.h - the support layer: checks, arenas, growable vectors, string buffers, hash maps,
 * string interning and diagnostics. Everything else in rly builds on these; nothing here knows
 * about the IR.
 *
 * Memory: compiler objects live in an Arena (pointer bump, freed all at once). Out of memory in
 * an arena longjmps to the OomHandler installed by the public entry point (rly_try in api.c);
 * with no handler installed it aborts. Vec/StrBuf/PtrMap use malloc and must be freed by their
 * owner; they report OOM the same way. */
#ifndef RLY_SUPPORT_H
#define RLY_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rly/rly.h"

/* ---- checks: internal bugs only, never user input ------------------------------------ */

#if defined(__GNUC__)
#define RLY_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define RLY_NORETURN __attribute__((noreturn))
#else
#define RLY_PRINTF(a, b)
#define RLY_NORETURN
#endif

RLY_NORETURN void rly_panic(const char *file, int line, const char *fmt, ...) RLY_PRINTF(3, 4);
#define RLY_CHECK(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) rly_panic(__FILE__, __LINE__, __VA_ARGS__);                                   \
    } while (0)
#ifndef NDEBUG
#define RLY_ASSERT(cond) RLY_CHECK(cond, "assertion failed: %s", #cond)
#else
#define RLY_ASSERT(cond) ((void)0)
#endif
#define RLY_UNREACHABLE() rly_panic(__FILE__, __LINE__, "unreachable")
#define RLY_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- out of memory --------------------------------------------------------------------- */

/* The innermost protected region of this thread; sup_oom() longjmps to it. */
typedef struct OomHandler {
    jmp_buf jb;
    struct OomHandler *prev;
} OomHandler;
extern _Thread_local OomHandler *sup_oom_handler;
RLY_NORETURN void sup_oom(void);
/* malloc/realloc/calloc that call sup_oom() on failure (never return NULL for n > 0). Fault
 * injection: sup_fail_after(n) makes the (n+1)-th following allocation fail; -1 disables. */
void *sup_malloc(size_t n);
void *sup_realloc(void *p, size_t n);
void *sup_calloc(size_t count, size_t size);
void sup_fail_after(long n);
/* A data buffer (a tensor's storage, kernel scratch, packed weights) of bytes bytes aligned to
 * align (a power of two, at least sizeof(void *)), freed with free(); NULL when out of memory
 * (its callers report it). One of 2 MiB or more starts on a 2 MiB boundary and its whole 2 MiB
 * pages are offered to the kernel as transparent huge pages (madvise; Linux, where the system's
 * THP mode is "madvise" or "always"): in a virtual machine each TLB miss walks two page tables,
 * and SGEMM 1024^3 ran 5-6% faster with its operands and scratch in huge pages. RLY_HUGEPAGES=0
 * turns that off. Such a buffer is rounded up to whole 2 MiB pages (at most 2 MiB more, once
 * touched). */
void *sup_alloc_data(size_t align, size_t bytes);
/* sizes multiplied with an overflow check (overflow is treated as out of memory). */
size_t sup_mul(size_t a, size_t b);

/* ---- arena ----------------------------------------------------------------------------- */

typedef struct ArenaChunk ArenaChunk;
typedef struct Arena {
    ArenaChunk *head; /* newest chunk first */
    char *cur, *end;  /* free space in head */
    size_t total;     /* bytes requested from malloc, for statistics */
} Arena;

void arena_init(Arena *a);
void arena_free(Arena *a);                          /* frees all chunks; the arena can be reused */
void *arena_alloc(Arena *a, size_t n);              /* zeroed, 16-byte aligned; never NULL */
void *arena_array(Arena *a, size_t n, size_t size); /* zeroed array with overflow check */
char *arena_strndup(Arena *a, const char *s, size_t n);
void *arena_memdup(Arena *a, const void *p, size_t n);

/* ---- growable vector (type-generic through macros) --------------------------------------- */

#define Vec(T)                                                                                     \
    struct {                                                                                       \
        T *data;                                                                                   \
        size_t len, cap;                                                                           \
    }
void sup_vec_grow(void **data, size_t *cap, size_t elem, size_t need);
#define vec_push(v, x)                                                                             \
    do {                                                                                           \
        if ((v)->len == (v)->cap)                                                                  \
            sup_vec_grow((void **)&(v)->data, &(v)->cap, sizeof(*(v)->data), (v)->len + 1);        \
        (v)->data[(v)->len++] = (x);                                                               \
    } while (0)
#define vec_reserve(v, n)                                                                          \
    do {                                                                                           \
        if ((v)->cap < (n)) sup_vec_grow((void **)&(v)->data, &(v)->cap, sizeof(*(v)->data), (n)); \
    } while (0)
#define vec_pop(v) ((v)->data[--(v)->len])
#define vec_last(v) ((v)->data[(v)->len - 1])
#define vec_free(v)                                                                                \
    do {                                                                                           \
        free((v)->data);                                                                           \
        (v)->data = NULL;                                                                          \
        (v)->len = (v)->cap = 0;                                                                   \
    } while (0)

typedef Vec(void *) PtrVec;

/* ---- string buffer ---------------------------------------------------------------------- */

typedef struct StrBuf {
    char *data; /* always NUL-terminated when len > 0 or after sb_cstr */
    size_t len, cap;
} StrBuf;

void sb_putc(StrBuf *sb, char c);
void sb_puts(StrBuf *sb, const char *s);
void sb_putn(StrBuf *sb, const char *s, size_t n);
void sb_printf(StrBuf *sb, const char *fmt, ...) RLY_PRINTF(2, 3);
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap);
void sb_indent(StrBuf *sb, int n); /* n spaces */
const char *sb_cstr(StrBuf *sb);   /* "" for an empty buffer; pointer owned by sb */
char *sb_take(StrBuf *sb);         /* malloc'ed string; sb is reset */
void sb_free(StrBuf *sb);

/* ---- hashing and maps --------------------------------------------------------------------- */

uint64_t sup_hash_bytes(const void *p, size_t n, uint64_t seed);
static inline uint64_t sup_hash_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* Open-addressing map from a non-NULL pointer key to a pointer value. A zeroed PtrMap is empty.
 * Never iterate one to produce output: the order depends on addresses. */
typedef struct PtrMap {
    void **keys, **vals;
    size_t len, cap; /* cap is 0 or a power of two */
} PtrMap;
void *ptrmap_get(const PtrMap *m, const void *key); /* NULL when absent */
bool ptrmap_has(const PtrMap *m, const void *key);
void ptrmap_put(PtrMap *m, const void *key, void *val);
void ptrmap_free(PtrMap *m);

/* Map from a string (bytes, length) to a pointer. Keys are copied into the map's own storage. */
typedef struct StrMap {
    struct StrMapEntry *slots;
    size_t len, cap;
    Arena keys;
} StrMap;
void *strmap_get(const StrMap *m, const char *s, size_t n); /* NULL when absent */
void strmap_put(StrMap *m, const char *s, size_t n, void *val);
void strmap_free(StrMap *m);

/* String interning: equal strings give the same pointer (so names compare with ==). The
 * strings live in the interner's arena and stay valid until intern_free. */
typedef struct Interner {
    StrMap map;
    Arena arena;
} Interner;
const char *intern(Interner *in, const char *s, size_t n);
const char *intern_cstr(Interner *in, const char *s);
void intern_free(Interner *in);

/* ---- source files and diagnostics -------------------------------------------------------- */

/* A byte range [lo, hi) in source file `file` (index into the Diags' files; 0 = none). */
typedef struct Span {
    uint32_t file, lo, hi;
} Span;
#define SPAN_NONE ((Span){0, 0, 0})
static inline Span span_join(Span a, Span b) {
    if (a.file == 0) return b;
    if (b.file == 0) return a;
    return (Span){a.file, a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
}

typedef struct SourceFile {
    char *name; /* path or label, owned */
    char *text; /* owned copy, NUL-terminated */
    size_t len;
    uint32_t *line_starts; /* byte offset of each line start, computed on first render */
    size_t n_lines;
} SourceFile;

typedef enum DiagLevel { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagLevel;

typedef struct Diag {
    DiagLevel level;
    Span span;
    char *msg; /* owned */
} Diag;

typedef struct Diags {
    Vec(SourceFile) files; /* files.data[0] is a placeholder so that file 0 means "no file" */
    Vec(Diag) items;
    size_t n_errors;
} Diags;

void diags_init(Diags *ds);
void diags_free(Diags *ds);
/* Register a source; returns its file index (>= 1). The text is copied. */
uint32_t diags_add_file(Diags *ds, const char *name, const char *text, size_t len);
const SourceFile *diags_file(const Diags *ds, uint32_t file);
void diag_error(Diags *ds, Span span, const char *fmt, ...) RLY_PRINTF(3, 4);
void diag_note(Diags *ds, Span span, const char *fmt, ...) RLY_PRINTF(3, 4);
void diag_add(Diags *ds, DiagLevel level, Span span, const char *fmt, va_list ap);
static inline bool diags_has_errors(const Diags *ds) { return ds->n_errors > 0; }
/* 1-based line and column (column counts bytes) of byte offset `off` in `file`. */
void diags_line_col(Diags *ds, uint32_t file, uint32_t off, uint32_t *line, uint32_t *col);
/* Render every diagnostic from index `from` on:
 *   name:line:col: error: message
 *     source line
 *     ^~~~ */
void diags_render(Diags *ds, size_t from, StrBuf *out);
void diags_clear(Diags *ds); /* drop the diagnostics, keep the files */

/* ---- dtypes ------------------------------------------------------------------------------- */

int sup_dtype_bits(rly_dtype dt);    /* 8, 16, 32, 64 (bool: 8 as stored) */
size_t sup_dtype_size(rly_dtype dt); /* bytes per element as stored */
const char *sup_dtype_name(rly_dtype dt);
/* Parse a dtype name ("float32", "int8", "bool", "bfloat16", ...) or one of TVM's shorthands
 * for them ("int" = int32, "uint" = uint32, "float" = float32, "uint1" = bool, "float32x1" =
 * float32); -1 if unknown (vector dtypes of several lanes are unknown: rly has none). */
int sup_dtype_parse(const char *s, size_t n);
bool sup_dtype_is_float(rly_dtype dt);
bool sup_dtype_is_int(rly_dtype dt);  /* signed integer */
bool sup_dtype_is_uint(rly_dtype dt); /* unsigned integer */

/* IEEE half and bfloat16 conversions (round to nearest even). */
uint16_t sup_f32_to_f16(float f);
float sup_f16_to_f32(uint16_t h);
uint16_t sup_f32_to_bf16(float f);
float sup_bf16_to_f32(uint16_t h);

/* ---- shapes: the one size limit (dims.c; docs/eval.md, "Shapes") ---------------------------
 * Every shape rly accepts has each dim in [0, SUP_DIM_MAX] and the product of its nonzero dims
 * at most SUP_DIM_MAX (2^62). So the element count, each row-major stride, each flat offset and
 * the sum of two of them fit in int64, even for an empty tensor with a huge dim, and the byte
 * size of an allocated tensor is bounded by memory. Shapes are checked where they enter: .npy
 * and .npz headers, tensor allocation (so every kernel output, through k_out), type annotations
 * in the text format, and the argument and result types of every operator relation. Past that
 * point code may multiply the dims of one shape freely; arithmetic that mixes dims with other
 * numbers (attribute values, tensor data) goes through these helpers. Negative dims are the
 * type system's `?` and symbolic dims, never sizes. */
#define SUP_DIM_MAX ((int64_t)1 << 62)
#define SUP_DIM_OVER (SUP_DIM_MAX + 1) /* a saturated result: "over the limit" */
/* a + b and a * b for sizes a, b >= 0: false (and *out untouched) when an operand is negative or
 * the result would pass SUP_DIM_MAX. */
bool sup_dim_add(int64_t a, int64_t b, int64_t *out);
bool sup_dim_mul(int64_t a, int64_t b, int64_t *out);
/* a * b for a, b >= 0 (either may be SUP_DIM_OVER), saturated: the exact product when it is at
 * most SUP_DIM_MAX, else SUP_DIM_OVER; a zero factor gives 0. Chains like a running product. */
int64_t sup_dim_mul_sat(int64_t a, int64_t b);
/* The element count of a shape (1 for rank 0) by sup_dim_mul_sat: SUP_DIM_OVER past the limit,
 * -1 when a dim is negative. */
int64_t sup_shape_numel(uint32_t ndim, const int64_t *shape);
/* NULL when the shape obeys the limit; otherwise the reason, written into buf (and returned),
 * saying "too large" or "negative". With unknown_ok, negative dims (`?`, symbolic) are allowed
 * and left out of the product. */
const char *sup_shape_check(uint32_t ndim, const int64_t *shape, bool unknown_ok, char *buf,
                            size_t cap);

/* ---- files ---------------------------------------------------------------------------------- */

/* Read a whole file ("-" = stdin) into a malloc'ed NUL-terminated buffer. Returns false and
 * fills `err` (a static-ish message buffer of `errlen`) on failure. */
bool sup_read_file(const char *path, char **data, size_t *len, char *err, size_t errlen);
/* Write bytes to `path`. A regular file (or a missing one) is written atomically: a temporary
 * created with O_EXCL|O_NOFOLLOW beside it, then rename; a replaced file keeps its mode and, where
 * allowed, its owner. A symlink is written through (the file it names is replaced, the link
 * stays); a FIFO or character device is written in place; a directory, block device, socket or
 * dangling link is refused. Returns false with `err` filled, leaving no temporary behind. */
bool sup_write_file_atomic(const char *path, const void *data, size_t len, char *err,
                           size_t errlen);
/* The same, in pieces, for outputs too large to build in memory first: open, write any number
 * of times (a failed write is remembered and reported by commit), then commit (rename into
 * place; false with `err` filled, the temporary removed) or abort (nothing is left). A FIFO or
 * character device is written as the pieces come. Commit and abort free the handle. */
typedef struct SupOut SupOut;
SupOut *sup_out_open(const char *path, char *err, size_t errlen);
bool sup_out_write(SupOut *o, const void *data, size_t len);
bool sup_out_commit(SupOut *o, char *err, size_t errlen);
void sup_out_abort(SupOut *o); /* NULL is a no-op */

/* ---- operator ids (ops.def, op_id.c) ---------------------------------------------------------
 * Every builtin operator has a dense compile-time id; tables that keep a fact per operator (the
 * operator table, the reference kernels, the gradients) are indexed by it. Registered operators
 * get ids from OP_ID_COUNT on (src/ops, op_register), so ids are held in a uint32_t. */
enum {
#define OP(ID, NAME) OP_ID_##ID,
#include "support/ops.def"
#undef OP
    OP_ID_COUNT /* the number of builtin operators */
};
/* The TVM name of builtin operator id ("nn.conv2d"); NULL for id >= OP_ID_COUNT. */
const char *sup_op_name(uint32_t id);

/* ---- data layouts (layout.c) -----------------------------------------------------------------
 * A layout string as TVM writes it: primal axes in upper case, each once ("NCHW", "NHWC",
 * "NCDHW" for data: batch N, channels C, spatial D, H, W; "OIHW", "HWIO" for weights: output
 * channels O, input channels I); a split adds a sub-axis, written as a block size and the
 * lower-case letter of an axis the layout also names ("NCHW16c": C = C_outer * 16 + c). The one
 * parser of layouts: relations (src/ops, rel_layout_parse) and kernels (k_layout_attr) wrap it. */
#define SUP_LAYOUT_MAX 32 /* axes (the largest rank kernels handle) */
typedef struct SupLayout {
    const char *attr;               /* the attribute it came from, for messages (or NULL) */
    const char *text;               /* the string parsed */
    uint32_t n;                     /* axes, = the rank of a tensor in this layout (>= 1) */
    char axis[SUP_LAYOUT_MAX];      /* 'A'..'Z' a primal axis, 'a'..'z' a sub-axis */
    int64_t factor[SUP_LAYOUT_MAX]; /* block size of a sub-axis, in [1, INT32_MAX]; 0 for primal */
} SupLayout;
/* Parse text into l (l->attr is left as it is). NULL when it is a layout; otherwise why not,
 * written into why (cap bytes) and returned: a phrase to follow the attribute's name, such as
 * `"NCHH" names axis H twice` or `is empty`. */
const char *sup_layout_parse(const char *text, SupLayout *l, char *why, size_t cap);
/* The position of axis a ('N' primal, 'c' a sub-axis) in l, or -1. */
int sup_layout_find(const SupLayout *l, char a);
/* The block size of primal axis a's sub-axis, or 0 when l does not split a. */
int64_t sup_layout_block(const SupLayout *l, char a);
/* l names exactly the primal axes of ref ("NCHW"), in any order, any of them split: a tensor in
 * l converts to one in ref and back (TVM's BijectiveLayout exists). */
bool sup_layout_convertible(const SupLayout *l, const char *ref);

/* ---- einsum equations (einsum.c) -------------------------------------------------------------
 * numpy's notation: input terms separated by ',', optionally "->" and the output term; a term is
 * letters (labels; 'a'..'z' and 'A'..'Z' differ) and at most one "..." (the broadcast dims);
 * spaces are ignored. The one parser of equations: the relation, the kernel and the gradient of
 * einsum use it, and check against the tensors what needs their shapes. */
#define SUP_EINSUM_LABELS 52      /* label l: 'a' + l for l < 26, 'A' + l - 26 after */
#define SUP_EINSUM_ELLIPSIS (-1)  /* the item that stands for "..." */
#define SUP_EINSUM_MAX_TERMS 64   /* input terms */
#define SUP_EINSUM_MAX_ITEMS 1024 /* items (labels and "...") in all terms together */
typedef struct SupEinsumTerm {
    uint32_t start, n; /* items[start .. start + n) of the equation */
    bool has_ellipsis; /* one of them is SUP_EINSUM_ELLIPSIS */
} SupEinsumTerm;
typedef struct SupEinsum {
    uint32_t n_in;                          /* input terms */
    SupEinsumTerm in[SUP_EINSUM_MAX_TERMS]; /* the inputs */
    SupEinsumTerm out;                      /* the output: explicit, or numpy's implicit one */
    bool explicit_out;                      /* the equation has "->" */
    uint32_t count[SUP_EINSUM_LABELS];      /* occurrences of each label in the inputs */
    int8_t items[SUP_EINSUM_MAX_ITEMS];     /* a label, or SUP_EINSUM_ELLIPSIS */
} SupEinsum;
/* Parse eq. Checks what needs no shapes: only letters, ',', "->", "..." (once per term) and
 * spaces; one "->" at most; every output label in some input and none twice in the output. The
 * implicit output (no "->") is "..." when an input has one, then the labels that occur once,
 * capitals first (as in ASCII). NULL on success; otherwise the reason, in words that quote eq,
 * written into why and returned. */
const char *sup_einsum_parse(const char *eq, SupEinsum *e, char *why, size_t cap);
/* The letter of label l, for messages. */
static inline char sup_einsum_char(int l) { return (char)(l < 26 ? 'a' + l : 'A' + (l - 26)); }

/* ---- CPU features (cpu.c) ---------------------------------------------------------------------
 * The instruction-set level fast kernels (src/kernels/fast) use, chosen once at run time by
 * CPUID: nothing is built with -march=native; each level's code carries its own target
 * attribute. SUP_ISA_AVX2 needs AVX2 and FMA; SUP_ISA_AVX512 needs AVX-512 F, VL, BW and DQ. The
 * environment variable RLY_ISA=scalar|avx2|avx512|amx lowers the level (a level above what the CPU
 * has is capped at it), so every level is tested on one machine. The top level, amx, is AVX-512
 * with Intel's AMX tiles (bf16), which the float32 product uses for large products (gemm_amx.c);
 * sup_isa() reports it as SUP_ISA_AVX512 and sup_amx() tells it apart. */
typedef enum SupIsa { SUP_ISA_SCALAR, SUP_ISA_AVX2, SUP_ISA_AVX512 } SupIsa;
SupIsa sup_isa(void);          /* the level in force (detected once, thread-safe) */
SupIsa sup_isa_detected(void); /* what the CPU supports, RLY_ISA ignored */
/* Force the level for this process (tests): capped at sup_isa_detected(); returns the level set. */
SupIsa sup_isa_force(SupIsa isa);
const char *sup_isa_name(SupIsa isa); /* "scalar", "avx2", "avx512" */
/* Whether the AMX level is in force: the CPU has AMX-TILE and AMX-BF16, the OS granted this
 * process the tile state, RLY_ISA is unset or "amx", and sup_isa() is SUP_ISA_AVX512. */
bool sup_amx(void);
bool sup_amx_detected(void); /* the CPU and OS allow it, RLY_ISA ignored */
/* Turn the AMX level on (when detected) or off for this process (tests); returns whether on. It
 * also needs sup_isa() at SUP_ISA_AVX512; sup_isa_force leaves it as it is. */
bool sup_amx_force(bool on);

/* ---- thread pool (pool.c) ---------------------------------------------------------------------
 * Our own fork/join pool over pthreads for batch-1 kernels: persistent workers that spin briefly
 * and then sleep, the calling thread taking part. A pool of n threads runs n - 1 workers; a pool
 * of 1 (or a NULL pool) runs every task on the caller. One sup_pool_run at a time per pool (a
 * pool belongs to one session; a task must not call sup_pool_run on its own pool). */
typedef struct SupPool SupPool;
/* Task `task` of a run, on thread `worker` (0 = the caller, 1 .. n-1 the workers). */
typedef void (*SupTaskFn)(void *ctx, int64_t task, int worker);
/* A pool of n_threads threads (n_threads >= 1; 1 starts none). NULL when a thread cannot be
 * started (then run on the caller). */
SupPool *sup_pool_new(int n_threads);
void sup_pool_free(SupPool *p);         /* joins the workers; NULL is a no-op */
int sup_pool_threads(const SupPool *p); /* 1 for NULL */
/* Run fn(ctx, t, w) for every t in [0, n_tasks), spread over the pool's threads, and return when
 * all are done. Tasks are handed out dynamically in increasing order. */
void sup_pool_run(SupPool *p, int64_t n_tasks, SupTaskFn fn, void *ctx);
/* Profiles (docs/tools.md "Profiles"): while tracing is on, each run records, for each thread
 * that took a task (the caller is worker 0), the time from its first task's start to its last
 * task's end (CLOCK_MONOTONIC nanoseconds); sup_pool_take_spans moves the oldest (up to cap) into
 * out and returns how many. Off by default; on, it costs two clock reads per thread per run. Both
 * are no-ops on a pool of 1 or NULL (no spans: the caller's own event covers the work). */
typedef struct SupSpan {
    int worker;
    int64_t t0, t1;
} SupSpan;
void sup_pool_trace(SupPool *p, bool on);
size_t sup_pool_take_spans(SupPool *p, SupSpan *out, size_t cap);
/* The default thread count: RLY_NUM_THREADS when set to a positive integer, else the cores this
 * process may run on (sched_getaffinity), at least 1. */
int sup_default_threads(void);

#endif /* RLY_SUPPORT_H */
