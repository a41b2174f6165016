/* session.c - the deployable session API (include/rly/rly_runtime.h) over the VM (vm.h): the
 * thread-local last error, executables loaded from .rlyx files, sessions that bind DLPack
 * inputs zero-copy, run the entry function and show the outputs as DLPack views. Part of
 * librly_runtime: nothing here sees the compiler. */
#include "runtime/session.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the last error -------------------------------------------------------------------------- */

static _Thread_local char last_error[65536];

rly_status rt_fail(rly_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

char *rt_error_buf(size_t *cap) {
    *cap = sizeof last_error;
    return last_error;
}

RLY_API const char *rly_last_error(void) { return last_error; }
RLY_API const char *rly_version(void) { return "0.1.0"; }
RLY_API const char *rly_dtype_name(rly_dtype dt) { return sup_dtype_name(dt); }
RLY_API void rly_free(void *p) { free(p); }

RtLimits rt_limits_from(uint64_t max_memory, uint64_t max_depth, double timeout) {
    RtLimits lim = rt_limits_default();
    if (max_memory != 0) lim.max_memory = max_memory == RLY_NO_LIMIT ? 0 : max_memory;
    if (max_depth != 0) lim.max_depth = max_depth == RLY_NO_LIMIT ? 0 : max_depth;
    lim.timeout = timeout > 0 ? timeout : 0;
    return lim;
}

/* ---- executables ----------------------------------------------------------------------------- */

rly_executable *rt_executable_wrap(VmExec *exe_take) {
    rly_executable *e = sup_calloc(1, sizeof *e);
    e->exe = exe_take;
    atomic_init(&e->refs, 1u);
    atomic_init(&e->released, false);
    return e;
}

static void executable_unref(rly_executable *e) {
    if (atomic_fetch_sub(&e->refs, 1u) != 1u) return;
    vm_exec_free(e->exe);
    free(e);
}

RLY_API rly_status rly_executable_load(const char *path, rly_executable **out) {
    if (out) *out = NULL;
    if (path == NULL || out == NULL)
        return rt_fail(RLY_STATUS_INVALID, "rly_executable_load: NULL argument");
    char err[1024] = "";
    VmExec *exe = vm_exec_load(path, err, sizeof err);
    if (exe == NULL)
        return rt_fail(RLY_STATUS_ERROR, "%s", err[0] ? err : "cannot load the executable");
    *out = rt_executable_wrap(exe);
    return RLY_STATUS_OK;
}

RLY_API void rly_executable_free(rly_executable *exe) {
    if (exe == NULL) return;
    if (atomic_exchange(&exe->released, true)) return; /* freed twice: the second is a no-op */
    executable_unref(exe);
}

/* ---- sessions -------------------------------------------------------------------------------- */

/* A bound input and the caller's memory it borrows (none when the session owns the value). */
typedef struct Bound {
    Value *v;            /* owned reference; NULL: unbound */
    const char *lo, *hi; /* a zero-copy input: the caller's bytes [lo, hi) */
} Bound;

struct rly_session {
    rly_executable *owner; /* holds a reference (refs) */
    const VmExec *exe;
    Vm *vm;
    Bound *in;     /* exe->n_inputs */
    Value *result; /* the last successful run's result (owned), or NULL */
    Value **out;   /* exe->n_outputs (owned references), valid when result != NULL */
    Value **args;  /* exe->n_inputs: scratch for vm_invoke, so a run does not allocate it */
    int threads;   /* kernel threads: the pool's size */
    SupPool *pool; /* NULL for one thread (or when no thread could be started) */
};

RLY_API rly_status rly_session_new(const rly_executable *exe, const rly_session_options *opts,
                                   rly_session **out) {
    if (out) *out = NULL;
    if (exe == NULL || out == NULL)
        return rt_fail(RLY_STATUS_INVALID, "rly_session_new: NULL argument");
    if (exe->released)
        return rt_fail(RLY_STATUS_INVALID, "rly_session_new: the executable was freed");
    rly_session_options o = opts ? *opts : (rly_session_options){0};
    if (o.threads < 0)
        return rt_fail(RLY_STATUS_INVALID, "rly_session_new: threads is %d (0 for the default)",
                       o.threads);
    if (!(o.timeout >= 0) || o.timeout > 1e9)
        return rt_fail(RLY_STATUS_INVALID, "rly_session_new: timeout %g is not 0..1e9 seconds",
                       o.timeout);
    Vm *vm = vm_new(exe->exe);
    if (vm == NULL) return rt_fail(RLY_STATUS_ERROR, "rly_session_new: the VM is unavailable");
    RtLimits lim = rt_limits_from(o.max_memory, o.max_depth, o.timeout);
    vm_set_limits(vm, &lim);
    rly_session *s = sup_calloc(1, sizeof *s);
    s->owner = (rly_executable *)exe; /* the count is the handle's only mutable part */
    atomic_fetch_add(&s->owner->refs, 1u);
    s->exe = exe->exe;
    s->vm = vm;
    s->threads = o.threads ? o.threads : sup_default_threads();
    if (s->threads > 1) s->pool = sup_pool_new(s->threads);
    if (s->pool == NULL) s->threads = 1;
    vm_set_pool(vm, s->pool);
    s->in = sup_calloc(s->exe->n_inputs + 1, sizeof *s->in);
    s->out = sup_calloc(s->exe->n_outputs + 1, sizeof *s->out);
    s->args = sup_calloc(s->exe->n_inputs + 1, sizeof *s->args);
    *out = s;
    return RLY_STATUS_OK;
}

/* Every value the session allocates or releases is charged or credited to its machine's
 * memory account (the run's limit counts inputs and the outputs kept between runs, and what a
 * run allocates balances what is released before the next). */
static RtMemAccount *enter(rly_session *s) { return rt_mem_swap(vm_account(s->vm)); }

static void release_outputs(rly_session *s) {
    if (s->result == NULL) return;
    RtMemAccount *prev = enter(s);
    for (uint32_t k = 0; k < s->exe->n_outputs; k++) {
        rt_release(s->out[k]);
        s->out[k] = NULL;
    }
    rt_release(s->result);
    s->result = NULL;
    rt_mem_swap(prev);
}

RLY_API int rly_session_threads(const rly_session *s) { return s ? s->threads : -1; }

RLY_API void rly_session_free(rly_session *s) {
    if (s == NULL) return;
    release_outputs(s);
    RtMemAccount *prev = enter(s);
    for (uint32_t i = 0; i < s->exe->n_inputs; i++)
        rt_release(s->in[i].v);
    rt_mem_swap(prev);
    free(s->in);
    free(s->out);
    free(s->args);
    vm_free(s->vm);
    sup_pool_free(s->pool);
    executable_unref(s->owner);
    free(s);
}

RLY_API int rly_session_num_inputs(const rly_session *s) { return s ? (int)s->exe->n_inputs : -1; }
RLY_API int rly_session_num_outputs(const rly_session *s) {
    return s ? (int)s->exe->n_outputs : -1;
}
RLY_API const char *rly_session_input_name(const rly_session *s, int i) {
    return s && i >= 0 && (uint32_t)i < s->exe->n_inputs ? s->exe->in_names[i] : NULL;
}
RLY_API const char *rly_session_output_name(const rly_session *s, int i) {
    return s && i >= 0 && (uint32_t)i < s->exe->n_outputs ? s->exe->out_names[i] : NULL;
}
RLY_API int rly_session_input_index(const rly_session *s, const char *name) {
    if (s == NULL || name == NULL) return -1;
    for (uint32_t i = 0; i < s->exe->n_inputs; i++)
        if (strcmp(s->exe->in_names[i], name) == 0) return (int)i;
    return -1;
}

static rly_status info_of(const VmTypeDesc *d, rly_tensor_info *info) {
    memset(info, 0, sizeof *info);
    info->is_tensor = d->is_tensor;
    info->type = d->text ? d->text : "";
    if (d->is_tensor) {
        info->dtype = (rly_dtype)d->dtype;
        info->ndim = (int)d->ndim;
        info->shape = d->shape;
    }
    return RLY_STATUS_OK;
}

RLY_API rly_status rly_session_input_info(const rly_session *s, int i, rly_tensor_info *info) {
    if (s == NULL || info == NULL || i < 0 || (uint32_t)i >= s->exe->n_inputs)
        return rt_fail(RLY_STATUS_INVALID, "rly_session_input_info: no input %d", i);
    return info_of(&s->exe->in_types[i], info);
}
RLY_API rly_status rly_session_output_info(const rly_session *s, int i, rly_tensor_info *info) {
    if (s == NULL || info == NULL || i < 0 || (uint32_t)i >= s->exe->n_outputs)
        return rt_fail(RLY_STATUS_INVALID, "rly_session_output_info: no output %d", i);
    return info_of(&s->exe->out_types[i], info);
}

/* "Tensor[(2, 3), float32]" for a DLTensor whose dtype and rank were checked. */
static void dl_type_text(const DLTensor *t, StrBuf *sb) {
    sb_puts(sb, "Tensor[(");
    for (int32_t d = 0; d < t->ndim; d++)
        sb_printf(sb, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    sb_printf(sb, "%s), %s]", t->ndim == 1 ? "," : "", sup_dtype_name(k_dtype(t)));
}

static void input_names(const VmExec *exe, StrBuf *sb) {
    for (uint32_t i = 0; i < exe->n_inputs; i++)
        sb_printf(sb, "%s'%s'", i ? ", " : "", exe->in_names[i]);
    if (exe->n_inputs == 0) sb_puts(sb, "none");
}

/* Copy the elements of t (any strides, in elements; checked shape) into dst, row-major. */
static void gather(const DLTensor *t, size_t es, char *dst) {
    int64_t n = k_numel(t);
    if (n == 0) return;
    const char *base = (const char *)t->data + t->byte_offset;
    int64_t idx[K_MAX_DIMS] = {0}, stride[K_MAX_DIMS];
    int64_t row = 1;
    for (int32_t d = t->ndim - 1; d >= 0; d--) { /* NULL strides: row-major */
        stride[d] = t->strides ? t->strides[d] : row;
        row *= t->shape[d];
    }
    int64_t off = 0; /* element offset of idx */
    for (int64_t k = 0; k < n; k++) {
        memcpy(dst + (size_t)k * es, base + off * (int64_t)es, es);
        for (int32_t d = t->ndim - 1; d >= 0; d--) { /* advance the multi-index */
            int64_t st = stride[d];
            if (++idx[d] < t->shape[d]) {
                off += st;
                break;
            }
            off -= st * (idx[d] - 1);
            idx[d] = 0;
        }
    }
}

/* Whether t's strides (if any) are those of a compact row-major tensor (dims of size 1 may
 * carry any stride). */
static bool compact(const DLTensor *t) {
    if (t->strides == NULL) return true;
    int64_t want = 1;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != want) return false;
        want *= t->shape[d];
    }
    return true;
}

RLY_API rly_status rly_session_set_input(rly_session *s, const char *name, const DLTensor *t) {
    if (s == NULL || name == NULL || t == NULL)
        return rt_fail(RLY_STATUS_INVALID, "rly_session_set_input: NULL argument");
    int i = rly_session_input_index(s, name);
    StrBuf sb = {0};
    rly_status st = RLY_STATUS_OK;
    if (i < 0) {
        input_names(s->exe, &sb);
        st = rt_fail(RLY_STATUS_ERROR, "no input '%s'; the inputs are %s", name, sb_cstr(&sb));
        goto out;
    }
    const VmTypeDesc *want = &s->exe->in_types[i];
    const char *want_text = want->text ? want->text : "?";
    if (!want->is_tensor) {
        st = rt_fail(RLY_STATUS_ERROR, "input '%s' has type %s, which a DLTensor cannot give", name,
                     want_text);
        goto out;
    }
    if (t->device.device_type != kDLCPU) {
        st = rt_fail(RLY_STATUS_ERROR, "input '%s': device type %d; only CPU tensors (kDLCPU) run",
                     name, (int)t->device.device_type);
        goto out;
    }
    if (!k_dl_dtype_known(t->dtype)) {
        st = rt_fail(RLY_STATUS_ERROR,
                     "input '%s': DLPack dtype (code %u, bits %u, lanes %u) is none of rly's "
                     "types; expected %s",
                     name, t->dtype.code, t->dtype.bits, t->dtype.lanes, want_text);
        goto out;
    }
    if (t->ndim < 0 || t->ndim > K_MAX_DIMS || (t->ndim > 0 && t->shape == NULL)) {
        st = rt_fail(RLY_STATUS_ERROR, "input '%s': rank %d (at most %d, with a shape)", name,
                     (int)t->ndim, K_MAX_DIMS);
        goto out;
    }
    char why[128];
    if (sup_shape_check((uint32_t)t->ndim, t->shape, false, why, sizeof why) != NULL) {
        st = rt_fail(RLY_STATUS_ERROR, "input '%s': shape %s", name, why);
        goto out;
    }
    rly_dtype dt = k_dtype(t);
    bool fits = dt == (rly_dtype)want->dtype && (uint32_t)t->ndim == want->ndim;
    for (int32_t d = 0; fits && d < t->ndim; d++)
        fits = want->shape[d] < 0 || want->shape[d] == t->shape[d];
    if (!fits) {
        dl_type_text(t, &sb);
        st = rt_fail(RLY_STATUS_ERROR, "input '%s': got %s, expected %s", name, sb_cstr(&sb),
                     want_text);
        goto out;
    }
    int64_t n = k_numel(t);
    size_t es = sup_dtype_size(dt);
    if ((uint64_t)n > (uint64_t)PTRDIFF_MAX / es) {
        st = rt_fail(RLY_STATUS_ERROR, "input '%s': a tensor of %lld elements is too large", name,
                     (long long)n);
        goto out;
    }
    size_t nbytes = (size_t)n * es;
    if (n > 0 && t->data == NULL) {
        st = rt_fail(RLY_STATUS_INVALID, "input '%s': data is NULL", name);
        goto out;
    }
    const char *first = n > 0 ? (const char *)t->data + t->byte_offset : NULL;
    Bound b = {0};
    RtMemAccount *prev = enter(s);
    if (n > 0 && compact(t) && (uintptr_t)first % 64 == 0) { /* zero-copy */
        RtTensor *w = rt_tensor_borrow(dt, (uint32_t)t->ndim, t->shape, (void *)first, nbytes);
        w->hdr.rc = 1; /* mortal: the session holds the one reference; the bytes stay borrowed
                          (the storage is not owned), so releasing never frees them */
        w->st->rc = 1;
        b = (Bound){.v = &w->hdr, .lo = first, .hi = first + nbytes};
    } else {
        char err[256];
        RtTensor *c = rt_tensor_new(dt, (uint32_t)t->ndim, t->shape, err, sizeof err);
        if (c == NULL) {
            st = rt_fail(RLY_STATUS_ERROR, "input '%s': %s", name, err);
            goto out_account;
        }
        gather(t, es, rt_tensor_data(c));
        b.v = &c->hdr;
    }
    if (dt == RLY_DTYPE_BOOL) { /* kernels rely on 0/1 bools */
        const uint8_t *p = rt_tensor_data(RT_TENSOR(b.v));
        for (int64_t k = 0; k < n; k++)
            if (p[k] > 1) {
                rt_release(b.v);
                st = rt_fail(RLY_STATUS_ERROR, "input '%s': bool element %lld is %u, not 0 or 1",
                             name, (long long)k, p[k]);
                goto out_account;
            }
    }
    rt_release(s->in[i].v);
    s->in[i] = b;
out_account:
    rt_mem_swap(prev);
out:
    sb_free(&sb);
    return st;
}

void rt_session_set_value(rly_session *s, uint32_t i, Value *v_take) {
    RLY_CHECK(i < s->exe->n_inputs, "rt_session_set_value: input %u of %u", i, s->exe->n_inputs);
    RtMemAccount *prev = enter(s);
    rt_release(s->in[i].v);
    rt_mem_swap(prev);
    s->in[i] = (Bound){.v = v_take};
}

bool rt_session_is_bound(const rly_session *s, uint32_t i) {
    return i < s->exe->n_inputs && s->in[i].v != NULL;
}
const Value *rt_session_result(const rly_session *s) { return s->result; }
Vm *rt_session_vm(rly_session *s) { return s->vm; }
const VmExec *rt_session_exec(const rly_session *s) { return s->exe; }

/* Whether tensor v's bytes overlap a zero-copy input's. */
static bool aliases_input(const rly_session *s, const RtTensor *v) {
    size_t nbytes = (size_t)k_numel(&v->t) * sup_dtype_size(rt_tensor_dtype(v));
    const char *lo = rt_tensor_data(v), *hi = lo + nbytes;
    for (uint32_t i = 0; nbytes && i < s->exe->n_inputs; i++)
        if (s->in[i].lo != NULL && lo < s->in[i].hi && s->in[i].lo < hi) return true;
    return false;
}

RLY_API rly_status rly_session_run(rly_session *s) {
    if (s == NULL) return rt_fail(RLY_STATUS_INVALID, "rly_session_run: NULL session");
    const VmExec *exe = s->exe;
    StrBuf sb = {0};
    for (uint32_t i = 0; i < exe->n_inputs; i++)
        if (s->in[i].v == NULL) sb_printf(&sb, "%s'%s'", sb.len ? ", " : "", exe->in_names[i]);
    if (sb.len) {
        rly_status st =
            rt_fail(RLY_STATUS_ERROR, "rly_session_run: input %s not set", sb_cstr(&sb));
        sb_free(&sb);
        return st;
    }
    release_outputs(s);
    for (uint32_t i = 0; i < exe->n_inputs; i++)
        s->args[i] = s->in[i].v;
    static _Thread_local char err[8192];
    err[0] = '\0';
    Value *r = vm_invoke(s->vm, exe->entry, exe->n_inputs, s->args, err, sizeof err);
    if (r == NULL) return rt_fail(RLY_STATUS_ERROR, "%s", err[0] ? err : "the run failed");
    if (exe->out_tuple && exe->out_path == NULL &&
        (r->kind != VAL_TUPLE || RT_TUPLE(r)->n != exe->n_outputs)) {
        rt_release(r);
        return rt_fail(RLY_STATUS_ERROR, "the entry's result is not a tuple of %u outputs",
                       exe->n_outputs);
    }
    RtMemAccount *prev = enter(s); /* copies count like the run's values */
    rly_status st = RLY_STATUS_OK;
    for (uint32_t k = 0; k < exe->n_outputs; k++) {
        Value *v = r;
        if (exe->out_path == NULL) {
            if (exe->out_tuple) v = RT_TUPLE(r)->f[k];
        } else { /* a leaf of nested tuples */
            for (uint32_t j = exe->out_path_off[k]; j < exe->out_path_off[k + 1] && v; j++) {
                uint32_t f = exe->out_path[j];
                v = v->kind == VAL_TUPLE && f < RT_TUPLE(v)->n ? RT_TUPLE(v)->f[f] : NULL;
            }
            if (v == NULL) {
                st = rt_fail(RLY_STATUS_ERROR, "output '%s': the result has no such field",
                             exe->out_names[k]);
                break;
            }
        }
        if (v->kind == VAL_TENSOR && aliases_input(s, RT_TENSOR(v))) {
            RtTensor *src = RT_TENSOR(v);
            char why[256];
            RtTensor *c = rt_tensor_new(rt_tensor_dtype(src), (uint32_t)src->t.ndim, src->shape,
                                        why, sizeof why);
            if (c == NULL) {
                st = rt_fail(RLY_STATUS_ERROR, "output '%s': %s", exe->out_names[k], why);
                break;
            }
            memcpy(rt_tensor_data(c), rt_tensor_data(src),
                   (size_t)k_numel(&src->t) * sup_dtype_size(rt_tensor_dtype(src)));
            s->out[k] = &c->hdr;
        } else {
            s->out[k] = rt_retain(v);
        }
    }
    rt_mem_swap(prev);
    s->result = r;
    if (st != RLY_STATUS_OK) release_outputs(s);
    return st;
}

RLY_API rly_status rly_session_get_output(const rly_session *s, int i, const DLTensor **out) {
    if (out) *out = NULL;
    if (s == NULL || out == NULL || i < 0 || (uint32_t)i >= s->exe->n_outputs)
        return rt_fail(RLY_STATUS_INVALID, "rly_session_get_output: no output %d", i);
    if (s->result == NULL)
        return rt_fail(RLY_STATUS_ERROR,
                       "rly_session_get_output: no outputs (no successful run yet, or the last "
                       "run failed)");
    const Value *v = s->out[i];
    if (v->kind != VAL_TENSOR) {
        const char *ty = s->exe->out_types[i].text;
        return rt_fail(RLY_STATUS_ERROR, "output '%s' is not a tensor (type %s)",
                       s->exe->out_names[i], ty ? ty : "?");
    }
    *out = &RT_TENSOR(v)->t;
    return RLY_STATUS_OK;
}
