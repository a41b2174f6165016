/* value.h - runtime values: tensors, tuples, closures, constructor values and reference cells.
 * The interface of src/runtime/ (with npy.h).
 *
 * Every value starts with a Value header {rc, kind}. Values are reference counted:
 * rt_retain/rt_release; a count of RT_IMMORTAL marks shared constants that are never freed
 * (constants of a program, the unit tuple). Invariants:
 *   - a tensor is compact row-major (t.strides == NULL), its data 64-byte aligned at
 *     k_ptr(&t), shape[] inline; its bytes live in a refcounted RtStorage that views share;
 *   - containers own one reference to each field; releasing is iterative (a list of 10^6
 *     cells is freed without recursion);
 *   - reference cells are linked into their RtHeap so that cycles through them (a cell that
 *     holds a closure capturing the cell) are broken by rt_heap_free at teardown.
 * Closures hold an opaque `code` pointer that only the executor interprets (the interpreter
 * stores a Function, the VM a function index), so this layer never sees the IR. */
#ifndef RLY_RUNTIME_VALUE_H
#define RLY_RUNTIME_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "rly/dlpack.h"
#include "rly/rly.h"

typedef enum ValueKind {
    VAL_TENSOR,
    VAL_TUPLE,
    VAL_CLOSURE,
    VAL_ADT, /* a constructor applied to its fields */
    VAL_REF,
} ValueKind;

#define RT_IMMORTAL UINT32_MAX

typedef struct Value {
    uint32_t rc;   /* references; RT_IMMORTAL: never freed */
    uint8_t kind;  /* ValueKind */
    uint8_t flags; /* RT_VF_* */
} Value;

/* A tensor whose bytes never change while its executable lives: an executable's constant, or a
 * view of one. Kernels may cache what they derive from it (KCall.in_const, k_prepared). */
#define RT_VF_CONST 1u
/* A tensor passed to the entry function of a VM run (vm_invoke sets it): its bytes do not change
 * until the run ends, so kernels may cache what they derive from it for the run (weights given
 * as inputs: KCall.in_const 2). */
#define RT_VF_INPUT 2u

/* ---- limits of a run ---------------------------------------------------------------------
 * Every executor (the interpreter now, the VM later) honours the same three limits and ends the
 * run with an error that names the limit and the expression being evaluated. */
typedef struct RtLimits {
    uint64_t max_memory; /* bytes of run-time values live at once; 0: none */
    uint64_t max_depth;  /* non-tail Relay calls active at once; 0: none */
    double timeout;      /* seconds of wall-clock time for one run; 0: none */
} RtLimits;

#define RT_DEFAULT_MAX_DEPTH 10000000u /* 10^7 frames: ~1 GB of interpreter frames */
/* The defaults: memory a quarter of physical memory, depth RT_DEFAULT_MAX_DEPTH, no timeout. They
 * stop a runaway recursion before it takes the machine. */
RtLimits rt_limits_default(void);

/* Memory accounting. The account current on a thread is charged for every owned tensor buffer
 * and every object allocated there, and credited (never below zero) for each one freed while it
 * is current. An executor makes its run's account current for the whole run, input binding
 * included, so what a run allocates and frees balances; values that outlive the run are simply
 * not credited. A tensor that would take the account past its limit is not allocated
 * (rt_tensor_new fails with a message); executors poll `live` against the limit for the rest.
 * Single-threaded for now: a thread pool that allocates on workers must share the account. */
typedef struct RtMemAccount {
    uint64_t live;  /* bytes charged and not yet credited */
    uint64_t peak;  /* the most `live` has been */
    uint64_t limit; /* 0: none */
} RtMemAccount;
/* Make `a` (or NULL: none) the current account of this thread; returns the previous one. */
RtMemAccount *rt_mem_swap(RtMemAccount *a);
/* Charge `n` bytes to the current account (if any); credit them back. Used for memory an
 * executor holds outside values (frames, stacks). */
void rt_mem_charge(uint64_t n);
void rt_mem_credit(uint64_t n);

typedef struct RtStorage {
    uint32_t rc;
    bool owned; /* data is ours to free (false: borrowed, e.g. a program constant) */
    size_t nbytes;
    void *data;
    /* Added by the planner: the storage whose bytes these are (a buffer of a VM memory plan
     * lies in its arena's storage), released when this one is freed; NULL: none. */
    struct RtStorage *base;
} RtStorage;

typedef struct RtTensor {
    Value hdr;
    DLTensor t;      /* t.shape points at shape[]; t.strides NULL */
    RtStorage *st;   /* t.data == st->data */
    int64_t shape[]; /* t.ndim dims */
} RtTensor;

typedef struct RtTuple {
    Value hdr;
    uint32_t n;
    Value *f[];
} RtTuple;

typedef struct RtClosure {
    Value hdr;
    uint8_t code_kind; /* the executor's tag for `code` (function, constructor, operator, ...) */
    const void *code;
    uint32_t n; /* captured values */
    Value *env[];
} RtClosure;

typedef struct RtAdt {
    Value hdr;
    int32_t tag;      /* the constructor's tag */
    const void *ctor; /* the executor's constructor handle (for printing) */
    uint32_t n;
    Value *f[];
} RtAdt;

typedef struct RtRef {
    Value hdr;
    Value *v; /* owned */
    struct RtRef *prev, *next;
    struct RtHeap *heap;
} RtRef;

/* What an executor's values belong to: the list of live reference cells. */
typedef struct RtHeap {
    RtRef *refs;
} RtHeap;

void rt_heap_init(RtHeap *h);
/* Break cycles through reference cells: release the contents of every live cell. */
void rt_heap_free(RtHeap *h);

static inline Value *rt_retain(Value *v) {
    if (v->rc != RT_IMMORTAL) v->rc++;
    return v;
}
/* Drop a reference; frees v (and, iteratively, what it alone held) at zero. NULL is a no-op. */
void rt_release(Value *v);

/* A new zero-filled tensor; NULL (with a message in err) when the shape breaks the shape limit
 * (support.h: each dim and the product of the nonzero dims at most 2^62), the bytes do not fit
 * in size_t and ptrdiff_t, the current memory account's limit would be passed, or memory is
 * short. */
RtTensor *rt_tensor_new(rly_dtype dt, uint32_t ndim, const int64_t *shape, char *err,
                        size_t errlen);
/* How many tensors rt_tensor_new has made on this thread (a test hook: a planned run makes
 * none). */
uint64_t rt_tensor_new_count(void);
/* A tensor header over bytes [offset, offset + nbytes) of storage `base` (retained; nbytes
 * must match dtype and shape, offset keep the 64-byte alignment): a planned buffer. Count 1. */
RtTensor *rt_tensor_in(RtStorage *base, size_t offset, rly_dtype dt, uint32_t ndim,
                       const int64_t *shape, size_t nbytes);
/* Another reference to st (an immortal storage, a constant's, is not counted: sessions on several
 * threads share it). */
static inline void rt_storage_retain(RtStorage *st) {
    if (st->rc != RT_IMMORTAL) st->rc++;
}
/* A storage of nbytes zeroed, 64-byte aligned bytes (count 1, charged to the current
 * account); NULL when memory is short. Released by rt_storage_release. */
RtStorage *rt_storage_new(size_t nbytes);
void rt_storage_release(RtStorage *st);
/* An immortal tensor over borrowed bytes (not copied, never freed; must outlive its use). */
RtTensor *rt_tensor_borrow(rly_dtype dt, uint32_t ndim, const int64_t *shape, void *data,
                           size_t nbytes);
/* Make an immortal value mortal again so rt_release can free it (the owner's teardown). */
void rt_value_free_immortal(Value *v);
rly_dtype rt_tensor_dtype(const RtTensor *t);
static inline void *rt_tensor_data(const RtTensor *t) { return k_ptr(&t->t); }

RtTuple *rt_tuple_new(uint32_t n); /* fields NULL: the caller fills each with an owned ref */
Value *rt_unit(void);              /* the immortal empty tuple */
RtClosure *rt_closure_new(uint8_t code_kind, const void *code, uint32_t n);
RtAdt *rt_adt_new(int32_t tag, const void *ctor, uint32_t n);
RtRef *rt_ref_new(RtHeap *h, Value *v_take);

#define RT_TENSOR(v) ((RtTensor *)(v))
#define RT_TUPLE(v) ((RtTuple *)(v))
#define RT_CLOSURE(v) ((RtClosure *)(v))
#define RT_ADT(v) ((RtAdt *)(v))
#define RT_REF(v) ((RtRef *)(v))

#endif /* RLY_RUNTIME_VALUE_H */
