/* value.c - runtime values: allocation, reference counting, iterative release. */
#include "runtime/value.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/support.h"

#define RT_ALIGN 64

/* ---- limits and memory accounting ---------------------------------------------------------- */

static _Thread_local RtMemAccount *mem_cur;

RtLimits rt_limits_default(void) {
    RtLimits l = {.max_depth = RT_DEFAULT_MAX_DEPTH};
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) l.max_memory = (uint64_t)pages * (uint64_t)page / 4;
    return l;
}

RtMemAccount *rt_mem_swap(RtMemAccount *a) {
    RtMemAccount *prev = mem_cur;
    mem_cur = a;
    return prev;
}

void rt_mem_charge(uint64_t n) {
    RtMemAccount *a = mem_cur;
    if (a == NULL) return;
    a->live += n;
    if (a->live > a->peak) a->peak = a->live;
}

void rt_mem_credit(uint64_t n) {
    RtMemAccount *a = mem_cur;
    if (a != NULL) a->live = a->live > n ? a->live - n : 0;
}

/* The bytes an object of `n` pointer fields takes (what it is charged). */
static uint64_t obj_bytes(size_t head, uint32_t n) { return head + sizeof(Value *) * (uint64_t)n; }

void rt_heap_init(RtHeap *h) { memset(h, 0, sizeof *h); }

void rt_heap_free(RtHeap *h) {
    /* Empty every cell first (that may free other cells: they unlink themselves). */
    while (h->refs != NULL) {
        RtRef *r = h->refs;
        h->refs = r->next;
        if (r->next) r->next->prev = NULL;
        r->prev = r->next = NULL;
        r->heap = NULL;
        Value *v = r->v;
        r->v = NULL;
        rt_release(v);
    }
}

static void storage_release(RtStorage *st) {
    /* iterative along base; an immortal storage (a constant's) is never counted */
    while (st != NULL && st->rc != RT_IMMORTAL && --st->rc == 0) {
        if (st->owned) {
            rt_mem_credit(st->nbytes);
            free(st->data);
        }
        RtStorage *base = st->base;
        free(st);
        st = base;
    }
}

void rt_storage_release(RtStorage *st) { storage_release(st); }

RtStorage *rt_storage_new(size_t nbytes) {
    size_t alloc = (nbytes + RT_ALIGN - 1) / RT_ALIGN * RT_ALIGN;
    if (alloc == 0) alloc = RT_ALIGN;
    void *data = sup_alloc_data(RT_ALIGN, alloc);
    if (data == NULL) return NULL;
    memset(data, 0, alloc);
    rt_mem_charge(nbytes);
    RtStorage *st = sup_malloc(sizeof *st);
    *st = (RtStorage){.rc = 1, .owned = true, .nbytes = nbytes, .data = data};
    return st;
}

static _Thread_local uint64_t n_tensor_new;

uint64_t rt_tensor_new_count(void) { return n_tensor_new; }

/* Free one value whose count reached zero; its children are pushed on `stack` to release. */
static void free_one(Value *v, PtrVec *stack) {
    switch (v->kind) {
    case VAL_TENSOR: storage_release(RT_TENSOR(v)->st); break;
    case VAL_TUPLE:
        rt_mem_credit(obj_bytes(sizeof(RtTuple), RT_TUPLE(v)->n));
        for (uint32_t i = 0; i < RT_TUPLE(v)->n; i++)
            if (RT_TUPLE(v)->f[i]) vec_push(stack, RT_TUPLE(v)->f[i]);
        break;
    case VAL_CLOSURE:
        rt_mem_credit(obj_bytes(sizeof(RtClosure), RT_CLOSURE(v)->n));
        for (uint32_t i = 0; i < RT_CLOSURE(v)->n; i++)
            if (RT_CLOSURE(v)->env[i]) vec_push(stack, RT_CLOSURE(v)->env[i]);
        break;
    case VAL_ADT:
        rt_mem_credit(obj_bytes(sizeof(RtAdt), RT_ADT(v)->n));
        for (uint32_t i = 0; i < RT_ADT(v)->n; i++)
            if (RT_ADT(v)->f[i]) vec_push(stack, RT_ADT(v)->f[i]);
        break;
    case VAL_REF: {
        RtRef *r = RT_REF(v);
        rt_mem_credit(sizeof(RtRef));
        if (r->heap != NULL) {
            if (r->prev)
                r->prev->next = r->next;
            else
                r->heap->refs = r->next;
            if (r->next) r->next->prev = r->prev;
        }
        if (r->v) vec_push(stack, r->v);
        break;
    }
    default: RLY_UNREACHABLE();
    }
    free(v);
}

void rt_release(Value *v) {
    if (v == NULL || v->rc == RT_IMMORTAL) return;
    RLY_CHECK(v->rc > 0, "rt_release: value already freed");
    if (--v->rc > 0) return;
    if (v->kind == VAL_TENSOR) { /* the common case: no children */
        free_one(v, NULL);
        return;
    }
    PtrVec stack = {0};
    free_one(v, &stack);
    while (stack.len > 0) {
        Value *c = vec_pop(&stack);
        if (c->rc == RT_IMMORTAL) continue;
        RLY_CHECK(c->rc > 0, "rt_release: value already freed");
        if (--c->rc == 0) free_one(c, &stack);
    }
    vec_free(&stack);
}

static RtTensor *tensor_header(rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    RtTensor *t = sup_malloc(sizeof(RtTensor) + sizeof(int64_t) * (ndim ? ndim : 1));
    t->hdr.rc = 1;
    t->hdr.kind = VAL_TENSOR;
    t->hdr.flags = 0;
    memset(&t->t, 0, sizeof t->t);
    t->t.device.device_type = kDLCPU;
    t->t.ndim = (int32_t)ndim;
    t->t.dtype = k_dl_dtype(dt);
    for (uint32_t d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    t->t.shape = t->shape;
    t->st = NULL;
    return t;
}

RtTensor *rt_tensor_new(rly_dtype dt, uint32_t ndim, const int64_t *shape, char *err,
                        size_t errlen) {
    char why[128]; /* the shape limit (support.h, "shapes") holds for every tensor */
    if (sup_shape_check(ndim, shape, false, why, sizeof why) != NULL) {
        snprintf(err, errlen, "cannot make a tensor: %s", why);
        return NULL;
    }
    uint64_t n = (uint64_t)sup_shape_numel(ndim, shape);
    size_t es = sup_dtype_size(dt);
    if (n > (uint64_t)PTRDIFF_MAX / es) {
        snprintf(err, errlen, "tensor of so many elements is too large");
        return NULL;
    }
    size_t nbytes = (size_t)n * es;
    RtMemAccount *acct = mem_cur;
    if (acct != NULL && acct->limit != 0 &&
        (acct->live > acct->limit || nbytes > acct->limit - acct->live)) {
        snprintf(err, errlen,
                 "memory limit of %llu bytes exceeded (--max-memory): a tensor of %zu bytes was "
                 "needed with %llu bytes already in use",
                 (unsigned long long)acct->limit, nbytes, (unsigned long long)acct->live);
        return NULL;
    }
    size_t alloc = (nbytes + RT_ALIGN - 1) / RT_ALIGN * RT_ALIGN;
    if (alloc == 0) alloc = RT_ALIGN;
    void *data = sup_alloc_data(RT_ALIGN, alloc);
    if (data == NULL) {
        snprintf(err, errlen, "out of memory allocating a tensor of %zu bytes", nbytes);
        return NULL;
    }
    memset(data, 0, nbytes);
    rt_mem_charge(nbytes);
    n_tensor_new++;
    RtStorage *st = sup_malloc(sizeof *st);
    st->rc = 1;
    st->base = NULL;
    st->owned = true;
    st->nbytes = nbytes;
    st->data = data;
    RtTensor *t = tensor_header(dt, ndim, shape);
    t->st = st;
    t->t.data = data;
    return t;
}

RtTensor *rt_tensor_borrow(rly_dtype dt, uint32_t ndim, const int64_t *shape, void *data,
                           size_t nbytes) {
    RtStorage *st = sup_malloc(sizeof *st);
    st->rc = RT_IMMORTAL; /* views of an immortal tensor leave its count alone */
    st->base = NULL;
    st->owned = false;
    st->nbytes = nbytes;
    st->data = data;
    RtTensor *t = tensor_header(dt, ndim, shape);
    t->st = st;
    t->t.data = data;
    t->hdr.rc = RT_IMMORTAL;
    return t;
}

RtTensor *rt_tensor_in(RtStorage *base, size_t offset, rly_dtype dt, uint32_t ndim,
                       const int64_t *shape, size_t nbytes) {
    RLY_ASSERT(offset <= base->nbytes && nbytes <= base->nbytes - offset);
    RtStorage *st = sup_malloc(sizeof *st);
    *st = (RtStorage){.rc = 1,
                      .owned = false,
                      .nbytes = nbytes,
                      .data = (char *)base->data + offset,
                      .base = base};
    rt_storage_retain(base);
    RtTensor *t = tensor_header(dt, ndim, shape);
    t->st = st;
    t->t.data = st->data;
    return t;
}

void rt_value_free_immortal(Value *v) {
    if (v == NULL || v->rc != RT_IMMORTAL) return;
    v->rc = 1;
    if (v->kind == VAL_TENSOR && RT_TENSOR(v)->st != NULL && RT_TENSOR(v)->st->rc == RT_IMMORTAL)
        RT_TENSOR(v)->st->rc = 1;
    rt_release(v);
}

rly_dtype rt_tensor_dtype(const RtTensor *t) { return k_dtype(&t->t); }

RtTuple *rt_tuple_new(uint32_t n) {
    RtTuple *t = sup_calloc(1, sizeof(RtTuple) + sizeof(Value *) * n);
    t->hdr.rc = 1;
    t->hdr.kind = VAL_TUPLE;
    t->n = n;
    rt_mem_charge(obj_bytes(sizeof(RtTuple), n));
    return t;
}

Value *rt_unit(void) {
    static RtTuple unit = {.hdr = {.rc = RT_IMMORTAL, .kind = VAL_TUPLE}, .n = 0};
    return &unit.hdr;
}

RtClosure *rt_closure_new(uint8_t code_kind, const void *code, uint32_t n) {
    RtClosure *c = sup_calloc(1, sizeof(RtClosure) + sizeof(Value *) * n);
    c->hdr.rc = 1;
    c->hdr.kind = VAL_CLOSURE;
    c->code_kind = code_kind;
    c->code = code;
    c->n = n;
    rt_mem_charge(obj_bytes(sizeof(RtClosure), n));
    return c;
}

RtAdt *rt_adt_new(int32_t tag, const void *ctor, uint32_t n) {
    RtAdt *a = sup_calloc(1, sizeof(RtAdt) + sizeof(Value *) * n);
    a->hdr.rc = 1;
    a->hdr.kind = VAL_ADT;
    a->tag = tag;
    a->ctor = ctor;
    a->n = n;
    rt_mem_charge(obj_bytes(sizeof(RtAdt), n));
    return a;
}

RtRef *rt_ref_new(RtHeap *h, Value *v_take) {
    RtRef *r = sup_calloc(1, sizeof *r);
    r->hdr.rc = 1;
    r->hdr.kind = VAL_REF;
    r->v = v_take;
    r->heap = h;
    rt_mem_charge(sizeof(RtRef));
    r->next = h->refs;
    if (h->refs) h->refs->prev = r;
    h->refs = r;
    return r;
}
