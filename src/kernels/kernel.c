/* kernel.c - the kernel interface's helpers: errors, outputs, attributes, element access,
 * broadcasting, and the registry of reference kernels. */
#include "kernels/kernel.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

int k_error(KCall *kc, const char *fmt, ...) {
    if (kc->err != NULL && kc->err_cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(kc->err, kc->err_cap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *k_shape_str(const DLTensor *t, char *buf, size_t cap) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "(");
    for (int32_t d = 0; d < t->ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, t->ndim == 1 ? ",)" : ")");
    return buf;
}

static DLTensor *out_impl(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape,
                          bool zero) {
    /* The caller's result structure comes from a file in the VM: a kernel may ask for a result
     * the call does not have. */
    if (i >= kc->n_out || (i > 0 && !kc->out_tuple)) {
        k_error(kc, "the kernel makes result %u but the call has %s", i,
                kc->out_tuple ? "fewer results" : "a single result");
        return NULL;
    }
    if ((unsigned)dt >= RLY_DTYPE_COUNT) {
        k_error(kc, "result dtype %d is not a dtype", (int)dt);
        return NULL;
    }
    if (ndim > K_MAX_DIMS) {
        k_error(kc, "result rank %u exceeds the limit of %d", ndim, K_MAX_DIMS);
        return NULL;
    }
    char why[128];
    if (sup_shape_check(ndim, shape, false, why, sizeof why) != NULL) {
        char buf[256];
        DLTensor want = {.ndim = (int32_t)ndim, .shape = (int64_t *)(uintptr_t)shape};
        k_error(kc, "result %s: %s", k_shape_str(&want, buf, sizeof buf), why);
        return NULL;
    }
    DLTensor *t = kc->out[i];
    if (t == NULL) {
        if (kc->alloc(kc, i, dt, ndim, shape) != 0) return NULL;
        t = kc->out[i];
        RLY_ASSERT(t != NULL);
        return t;
    }
    bool same = k_dtype(t) == dt && (uint32_t)t->ndim == ndim;
    for (uint32_t d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        char a[256], b[256];
        DLTensor want = {.ndim = (int32_t)ndim, .shape = (int64_t *)(uintptr_t)shape};
        k_error(kc, "result %u is %s%s but the caller expected %s%s", i, sup_dtype_name(dt),
                k_shape_str(&want, a, sizeof a), sup_dtype_name(k_dtype(t)),
                k_shape_str(t, b, sizeof b));
        return NULL;
    }
    if (zero && kc->out_dirty) memset(k_ptr(t), 0, (size_t)k_numel(t) * sup_dtype_size(dt));
    return t;
}

DLTensor *k_out(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    return out_impl(kc, i, dt, ndim, shape, true);
}

DLTensor *k_out_raw(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    return out_impl(kc, i, dt, ndim, shape, false);
}

/* ---- scratch ------------------------------------------------------------------------------- */

enum { K_SCRATCH_ALIGN = 64 };
static _Atomic uint64_t n_scratch_mallocs;

uint64_t k_scratch_mallocs(void) { return n_scratch_mallocs; }

static void *scratch(KCall *kc, size_t bytes, bool zero) {
    if (bytes == 0) bytes = 1;
    if (bytes > SIZE_MAX / 2) {
        k_error(kc, "out of memory (scratch of %zu bytes)", bytes);
        return NULL;
    }
    size_t n = (bytes + K_SCRATCH_ALIGN - 1) & ~(size_t)(K_SCRATCH_ALIGN - 1);
    kc->scratch_cur = kc->scratch_cur > SIZE_MAX - n ? SIZE_MAX : kc->scratch_cur + n;
    if (kc->scratch_cur > kc->scratch_need) kc->scratch_need = kc->scratch_cur;
    if (kc->ws != NULL && kc->ws_used <= kc->ws_cap && n <= kc->ws_cap - kc->ws_used) {
        void *p = kc->ws + kc->ws_used;
        kc->ws_used += n;
        if (zero) memset(p, 0, bytes);
        return p;
    }
    /* a block: one aligned header holding the list link, then the scratch */
    uint8_t *blk = sup_alloc_data(K_SCRATCH_ALIGN, K_SCRATCH_ALIGN + n);
    if (blk == NULL) {
        k_error(kc, "out of memory (scratch of %zu bytes)", bytes);
        return NULL;
    }
    n_scratch_mallocs++;
    memcpy(blk, &kc->heap, sizeof kc->heap);
    kc->heap = blk;
    if (zero) memset(blk + K_SCRATCH_ALIGN, 0, bytes);
    return blk + K_SCRATCH_ALIGN;
}

void *k_scratch(KCall *kc, size_t bytes) { return scratch(kc, bytes, true); }
void *k_scratch_raw(KCall *kc, size_t bytes) { return scratch(kc, bytes, false); }

void *k_scratch_n(KCall *kc, int64_t count, size_t size) {
    if (count < 0 || size == 0 || (uint64_t)count > (SIZE_MAX / 2) / size) {
        k_error(kc, "out of memory (scratch of %lld elements)", (long long)count);
        return NULL;
    }
    return k_scratch(kc, (size_t)count * size);
}

/* Free the fallback blocks newer than `until` (the list is newest first). */
static void free_blocks(KCall *kc, void *until) {
    while (kc->heap != NULL && kc->heap != until) {
        void *next;
        memcpy(&next, kc->heap, sizeof next);
        free(kc->heap);
        kc->heap = next;
    }
}

void k_scratch_reset(KCall *kc, KScratchMark m) {
    free_blocks(kc, m.heap);
    RLY_ASSERT(kc->heap == m.heap && m.ws_used <= kc->ws_used && m.cur <= kc->scratch_cur);
    kc->ws_used = m.ws_used;
    kc->scratch_cur = m.cur;
}

void k_call_release(KCall *kc) {
    free_blocks(kc, NULL);
    kc->ws_used = kc->scratch_cur = 0;
}

bool k_outs_empty(const KCall *kc) {
    for (uint32_t i = 0; i < kc->n_out; i++)
        if (kc->out[i] == NULL || k_numel(kc->out[i]) != 0) return false;
    return true;
}

/* ---- attributes ---------------------------------------------------------------------------- */

/* Attribute positions, resolved once: a kernel asks by name, but the rows of an operator come
 * in its schema's order, so the position of (operator, name) found by the first search is the
 * answer to every later one. The cache is a hint keyed by the two pointers (the kernel's name
 * literal, the caller's operator name): a hit is checked with one strcmp against the row, so a
 * stale or colliding entry, or a caller with rows in another order (dyn's lowered attributes,
 * a user operator's extra rows), costs a search and never a wrong row. Entries are atomics:
 * racing callers at worst overwrite each other's hint. */
enum { ATTR_CACHE_BITS = 10 };
static _Atomic uint32_t attr_cache[1u << ATTR_CACHE_BITS]; /* position + 1; 0: none */

static uint32_t attr_slot(const char *op, const char *name) {
    uint64_t h = (uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15u ^
                 (uint64_t)(uintptr_t)op * 0xC2B2AE3D27D4EB4Fu;
    return (uint32_t)(h >> (64 - ATTR_CACHE_BITS));
}

void k_attr_bad(const KCall *kc, const char *name, const char *want) {
    KCall *m = (KCall *)(uintptr_t)kc; /* every KCall is a mutable object (kernel.h) */
    if (m->bad_attr != NULL) return;
    m->bad_attr = name;
    m->bad_attr_want = want;
}

int k_call_result(KCall *kc, int rc) {
    if (kc->bad_attr == NULL) return rc;
    k_error(kc, "attribute '%s': %s", kc->bad_attr, kc->bad_attr_want);
    return -1;
}

/* What a missing attribute reads as: None, which every accessor turns into its neutral value. */
static const KAttr missing_attr = {.name = "", .kind = KA_NONE};
static const int64_t no_ints[1];
static const double no_floats[1];

const KAttr *k_attr(const KCall *kc, const char *name) {
    uint32_t slot = attr_slot(kc->op, name);
    uint32_t hint = atomic_load_explicit(&attr_cache[slot], memory_order_relaxed);
    if (hint > 0 && hint <= kc->n_attrs && strcmp(kc->attrs[hint - 1].name, name) == 0)
        return &kc->attrs[hint - 1];
    for (uint32_t i = 0; i < kc->n_attrs; i++)
        if (strcmp(kc->attrs[i].name, name) == 0) {
            atomic_store_explicit(&attr_cache[slot], i + 1, memory_order_relaxed);
            return &kc->attrs[i];
        }
    k_attr_bad(kc, name, "missing");
    return &missing_attr;
}

/* v as an int64 when it is an integer in range (no undefined conversion). */
static bool float_int(double v, int64_t *out) {
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0) || v != trunc(v)) return false;
    *out = (int64_t)v;
    return true;
}

int64_t k_int(const KCall *kc, const char *name) {
    const KAttr *a = k_attr(kc, name);
    int64_t v;
    if (a->kind == KA_INT) return a->i;
    if (a->kind == KA_FLOAT && float_int(a->f, &v)) return v;
    if (a->kind == KA_INTS && a->n == 1 && a->ints != NULL) return a->ints[0];
    if (a != &missing_attr) k_attr_bad(kc, name, "expected an integer");
    return 0;
}
double k_float(const KCall *kc, const char *name) {
    const KAttr *a = k_attr(kc, name);
    if (a->kind == KA_INT) return (double)a->i;
    if (a->kind == KA_FLOAT) return a->f;
    if ((a->kind == KA_INTS || a->kind == KA_FLOATS) && a->n == 1 && a->floats != NULL)
        return a->floats[0];
    if (a->kind == KA_INTS && a->n == 1 && a->ints != NULL) return (double)a->ints[0];
    if (a != &missing_attr) k_attr_bad(kc, name, "expected a number");
    return 0;
}
bool k_bool(const KCall *kc, const char *name) { return k_int(kc, name) != 0; }
const char *k_str(const KCall *kc, const char *name) {
    const KAttr *a = k_attr(kc, name);
    if (a->kind == KA_STR && a->s != NULL) return a->s;
    if (a->kind != KA_NONE) k_attr_bad(kc, name, "expected a string");
    return "";
}
bool k_is_none(const KCall *kc, const char *name) { return k_attr(kc, name)->kind == KA_NONE; }
uint32_t k_ints(const KCall *kc, const char *name, const int64_t **out) {
    const KAttr *a = k_attr(kc, name);
    *out = no_ints;
    if ((a->kind == KA_INTS || a->kind == KA_FLOATS) && (a->ints != NULL || a->n == 0)) {
        if (a->ints != NULL) *out = a->ints;
        return a->n;
    }
    if (a->kind == KA_INT) {
        *out = &a->i;
        return 1;
    }
    if (a->kind != KA_NONE) k_attr_bad(kc, name, "expected a list of integers");
    return 0;
}
uint32_t k_floats(const KCall *kc, const char *name, const double **out) {
    const KAttr *a = k_attr(kc, name);
    *out = no_floats;
    if ((a->kind == KA_INTS || a->kind == KA_FLOATS) && (a->floats != NULL || a->n == 0)) {
        if (a->floats != NULL) *out = a->floats;
        return a->n;
    }
    if (a->kind == KA_INT || a->kind == KA_FLOAT) {
        *out = &a->f;
        return 1;
    }
    if (a->kind != KA_NONE) k_attr_bad(kc, name, "expected a list of numbers");
    return 0;
}

bool k_dtype_attr(KCall *kc, const char *name, rly_dtype dflt, rly_dtype *out) {
    const KAttr *a = k_attr(kc, name);
    if (a == &missing_attr) {
        *out = dflt;
        k_error(kc, "attribute '%s' is missing", name);
        return false;
    }
    int64_t v = k_int(kc, name);
    if (v == -1) {
        *out = dflt;
        return true;
    }
    if (a->kind != KA_INT || v < 0 || v >= RLY_DTYPE_COUNT) {
        *out = dflt;
        k_error(kc, "attribute '%s' names no dtype (%lld)", name, (long long)v);
        return false;
    }
    *out = (rly_dtype)v;
    return true;
}

/* ---- dtypes -----------------------------------------------------------------------------------
 */

rly_dtype k_dtype(const DLTensor *t) {
    DLDataType d = t->dtype;
    switch (d.code) {
    case kDLBool: return RLY_DTYPE_BOOL;
    case kDLInt:
        switch (d.bits) {
        case 8: return RLY_DTYPE_I8;
        case 16: return RLY_DTYPE_I16;
        case 32: return RLY_DTYPE_I32;
        case 64: return RLY_DTYPE_I64;
        }
        break;
    case kDLUInt:
        switch (d.bits) {
        case 1:
        case 8: return d.bits == 1 ? RLY_DTYPE_BOOL : RLY_DTYPE_U8;
        case 16: return RLY_DTYPE_U16;
        case 32: return RLY_DTYPE_U32;
        case 64: return RLY_DTYPE_U64;
        }
        break;
    case kDLFloat:
        switch (d.bits) {
        case 16: return RLY_DTYPE_F16;
        case 32: return RLY_DTYPE_F32;
        case 64: return RLY_DTYPE_F64;
        }
        break;
    case kDLBfloat:
        if (d.bits == 16) return RLY_DTYPE_BF16;
        break;
    }
    fprintf(stderr, "rly: unknown DLPack dtype code %u bits %u\n", d.code, d.bits);
    abort();
}

bool k_dl_dtype_known(DLDataType d) {
    if (d.lanes != 1) return false;
    switch (d.code) {
    case kDLBool: return d.bits == 8;
    case kDLInt: return d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
    case kDLUInt: return d.bits == 1 || d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
    case kDLFloat: return d.bits == 16 || d.bits == 32 || d.bits == 64;
    case kDLBfloat: return d.bits == 16;
    }
    return false;
}

DLDataType k_dl_dtype(rly_dtype dt) {
    DLDataType d = {.code = kDLInt, .bits = (uint8_t)sup_dtype_bits(dt), .lanes = 1};
    if (dt == RLY_DTYPE_BOOL)
        d.code = kDLBool, d.bits = 8;
    else if (sup_dtype_is_uint(dt))
        d.code = kDLUInt;
    else if (dt == RLY_DTYPE_BF16)
        d.code = kDLBfloat;
    else if (sup_dtype_is_float(dt))
        d.code = kDLFloat;
    return d;
}

int64_t k_shape_numel(uint32_t ndim, const int64_t *shape) { return sup_shape_numel(ndim, shape); }
int64_t k_numel(const DLTensor *t) { return k_shape_numel((uint32_t)t->ndim, t->shape); }

bool k_same_shape(const DLTensor *a, const DLTensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* ---- element access ------------------------------------------------------------------------- */

double k_loadf(const void *base, rly_dtype dt, int64_t i) {
    switch (dt) {
    case RLY_DTYPE_BOOL: return ((const uint8_t *)base)[i] != 0;
    case RLY_DTYPE_I8: return ((const int8_t *)base)[i];
    case RLY_DTYPE_I16: return ((const int16_t *)base)[i];
    case RLY_DTYPE_I32: return ((const int32_t *)base)[i];
    case RLY_DTYPE_I64: return (double)((const int64_t *)base)[i];
    case RLY_DTYPE_U8: return ((const uint8_t *)base)[i];
    case RLY_DTYPE_U16: return ((const uint16_t *)base)[i];
    case RLY_DTYPE_U32: return ((const uint32_t *)base)[i];
    case RLY_DTYPE_U64: return (double)((const uint64_t *)base)[i];
    case RLY_DTYPE_F16: return sup_f16_to_f32(((const uint16_t *)base)[i]);
    case RLY_DTYPE_F32: return ((const float *)base)[i];
    case RLY_DTYPE_F64: return ((const double *)base)[i];
    case RLY_DTYPE_BF16: return sup_bf16_to_f32(((const uint16_t *)base)[i]);
    default: RLY_UNREACHABLE();
    }
}

/* Float to integer with C's undefined cases defined: truncate, saturate, NaN -> 0. */
static int64_t f_to_i64(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return v >= 9223372036854775807.0 ? INT64_MAX : (int64_t)hi;
    return (int64_t)v;
}
static uint64_t f_to_u64(double v, double hi) {
    if (isnan(v) || v <= 0) return 0;
    if (v >= 18446744073709551615.0) return UINT64_MAX;
    if (v >= hi) return (uint64_t)hi;
    return (uint64_t)v;
}

int64_t k_loadi(const void *base, rly_dtype dt, int64_t i) {
    switch (dt) {
    case RLY_DTYPE_BOOL: return ((const uint8_t *)base)[i] != 0;
    case RLY_DTYPE_I8: return ((const int8_t *)base)[i];
    case RLY_DTYPE_I16: return ((const int16_t *)base)[i];
    case RLY_DTYPE_I32: return ((const int32_t *)base)[i];
    case RLY_DTYPE_I64: return ((const int64_t *)base)[i];
    case RLY_DTYPE_U8: return ((const uint8_t *)base)[i];
    case RLY_DTYPE_U16: return ((const uint16_t *)base)[i];
    case RLY_DTYPE_U32: return ((const uint32_t *)base)[i];
    case RLY_DTYPE_U64: return (int64_t)((const uint64_t *)base)[i];
    default: return f_to_i64(k_loadf(base, dt, i), -9223372036854775808.0, 9223372036854775807.0);
    }
}

uint64_t k_loadu(const void *base, rly_dtype dt, int64_t i) {
    if (sup_dtype_is_float(dt)) return f_to_u64(k_loadf(base, dt, i), 18446744073709551615.0);
    return (uint64_t)k_loadi(base, dt, i);
}

/* v rounded to float with round-to-odd: truncate toward zero, then set the last mantissa bit if
 * anything was lost. Rounding that float to a format with at least two fewer mantissa bits
 * (f16: 11, bf16: 8, versus 24) is then the correctly rounded result of v, with no double
 * rounding. */
static float round_odd_f32(double v) {
    float f = (float)v;
    if (isnan(v) || isinf(f) || (double)f == v) return f;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if (fabs((double)f) > fabs(v)) bits--; /* rounded away from zero: step back toward it */
    bits |= 1u;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void k_storef(void *base, rly_dtype dt, int64_t i, double v) {
    switch (dt) {
    case RLY_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0; break;
    case RLY_DTYPE_I8: ((int8_t *)base)[i] = (int8_t)f_to_i64(v, INT8_MIN, INT8_MAX); break;
    case RLY_DTYPE_I16: ((int16_t *)base)[i] = (int16_t)f_to_i64(v, INT16_MIN, INT16_MAX); break;
    case RLY_DTYPE_I32: ((int32_t *)base)[i] = (int32_t)f_to_i64(v, INT32_MIN, INT32_MAX); break;
    case RLY_DTYPE_I64:
        ((int64_t *)base)[i] = f_to_i64(v, -9223372036854775808.0, 9223372036854775807.0);
        break;
    case RLY_DTYPE_U8: ((uint8_t *)base)[i] = (uint8_t)f_to_u64(v, UINT8_MAX); break;
    case RLY_DTYPE_U16: ((uint16_t *)base)[i] = (uint16_t)f_to_u64(v, UINT16_MAX); break;
    case RLY_DTYPE_U32: ((uint32_t *)base)[i] = (uint32_t)f_to_u64(v, UINT32_MAX); break;
    case RLY_DTYPE_U64: ((uint64_t *)base)[i] = f_to_u64(v, 18446744073709551615.0); break;
    case RLY_DTYPE_F16: ((uint16_t *)base)[i] = sup_f32_to_f16(round_odd_f32(v)); break;
    case RLY_DTYPE_F32: ((float *)base)[i] = (float)v; break;
    case RLY_DTYPE_F64: ((double *)base)[i] = v; break;
    case RLY_DTYPE_BF16: ((uint16_t *)base)[i] = sup_f32_to_bf16(round_odd_f32(v)); break;
    default: RLY_UNREACHABLE();
    }
}

void k_storeu(void *base, rly_dtype dt, int64_t i, uint64_t v) {
    switch (dt) {
    case RLY_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0; break;
    case RLY_DTYPE_I8:
    case RLY_DTYPE_U8: ((uint8_t *)base)[i] = (uint8_t)v; break;
    case RLY_DTYPE_I16:
    case RLY_DTYPE_U16: ((uint16_t *)base)[i] = (uint16_t)v; break;
    case RLY_DTYPE_I32:
    case RLY_DTYPE_U32: ((uint32_t *)base)[i] = (uint32_t)v; break;
    case RLY_DTYPE_I64:
    case RLY_DTYPE_U64: ((uint64_t *)base)[i] = v; break;
    default: k_storef(base, dt, i, (double)v); break;
    }
}

void k_storei(void *base, rly_dtype dt, int64_t i, int64_t v) {
    if (sup_dtype_is_float(dt))
        k_storef(base, dt, i, (double)v);
    else
        k_storeu(base, dt, i, (uint64_t)v);
}

void k_convert(void *dst, rly_dtype dd, int64_t j, const void *src, rly_dtype sd, int64_t i) {
    if (sup_dtype_is_float(sd))
        k_storef(dst, dd, j, k_loadf(src, sd, i));
    else if (sd == RLY_DTYPE_U64) {
        uint64_t u = k_loadu(src, sd, i);
        if (sup_dtype_is_float(dd))
            k_storef(dst, dd, j, (double)u);
        else
            k_storeu(dst, dd, j, u);
    } else
        k_storei(dst, dd, j, k_loadi(src, sd, i));
}

/* ---- iteration and broadcasting ------------------------------------------------------------- */

void k_strides(uint32_t ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (uint32_t d = ndim; d-- > 0;) {
        strides[d] = s;
        s = sup_dim_mul_sat(s, shape[d]);
    }
}

void k_bcast_strides(const DLTensor *t, uint32_t ndim, const int64_t *shape, int64_t *strides) {
    uint32_t tn = (uint32_t)t->ndim;
    RLY_ASSERT(tn <= ndim);
    int64_t s = 1;
    for (uint32_t d = ndim; d-- > 0;) {
        if (d + tn < ndim) {
            strides[d] = 0;
            continue;
        }
        int64_t td = t->shape[d + tn - ndim];
        strides[d] = (td == 1 && shape[d] != 1) ? 0 : s;
        s = sup_dim_mul_sat(s, td);
    }
}

bool k_bcast_shape(const DLTensor *a, const DLTensor *b, uint32_t *ndim, int64_t *out) {
    uint32_t na = (uint32_t)a->ndim, nb = (uint32_t)b->ndim, n = na > nb ? na : nb;
    for (uint32_t d = 0; d < n; d++) {
        int64_t da = d + na >= n ? a->shape[d + na - n] : 1;
        int64_t db = d + nb >= n ? b->shape[d + nb - n] : 1;
        if (da != db && da != 1 && db != 1) return false;
        out[d] = da == 1 ? db : da;
    }
    *ndim = n;
    return true;
}

bool k_axis(int64_t axis, uint32_t ndim, int64_t *out) {
    if (axis < 0) axis += ndim;
    if (axis < 0 || axis >= (int64_t)ndim) return false;
    *out = axis;
    return true;
}

/* ---- layouts ------------------------------------------------------------------------------- */

_Static_assert(SUP_LAYOUT_MAX >= K_MAX_DIMS, "a layout can name every axis of a tensor");

int k_layout_attr(KCall *kc, const char *attr, uint32_t ndim, KLayout *l) {
    const char *s = k_str(kc, attr);
    char why[256];
    l->attr = attr;
    if (sup_layout_parse(s, l, why, sizeof why) != NULL) return k_error(kc, "%s %s", attr, why);
    if (l->n != ndim)
        return k_error(kc, "%s \"%s\" has %u axes but its tensor has rank %u", attr, s, l->n, ndim);
    return 0;
}

int k_layout_axes(KCall *kc, const KLayout *l, const char *axes, int *pos) {
    for (uint32_t i = 0; axes[i]; i++) {
        pos[i] = k_layout_find(l, axes[i]);
        if (pos[i] < 0 || k_layout_block(l, axes[i]) > 0)
            return k_error(kc, "layout \"%s\" must have the axis %c, unsplit", l->text, axes[i]);
    }
    return 0;
}

/* ---- registry ---------------------------------------------------------------------------- */

/* A new operator changes this count: give it a kernel row (support/ops.def), then update it. */
_Static_assert(OP_ID_COUNT == 231, "operator added or removed: see support/ops.def");

static struct {
    pthread_once_t once;
    KernelFn by_id[OP_ID_COUNT];
} reg = {PTHREAD_ONCE_INIT, {0}};

static void reg_init(void) {
    static const KernelDef *const tables[] = {
        kern_ref_unary, kern_ref_binary, kern_ref_reduce,    kern_ref_transform,
        kern_ref_index, kern_ref_nn,     kern_ref_conv_pool, kern_ref_image_vision,
        kern_ref_qnn,   kern_ref_misc,   kern_ref_dyn,
    };
    for (size_t t = 0; t < RLY_ARRAY_LEN(tables); t++)
        for (const KernelDef *k = tables[t]; k->fn != NULL; k++) {
            RLY_CHECK(k->op < OP_ID_COUNT && reg.by_id[k->op] == NULL,
                      "kernel table: id %u out of range or given two kernels", k->op);
            reg.by_id[k->op] = k->fn;
        }
    for (uint32_t id = 0; id < OP_ID_COUNT; id++)
        RLY_CHECK(reg.by_id[id] != NULL, "kernel table: %s has no reference kernel",
                  sup_op_name(id));
}

KernelFn kern_ref_lookup(uint32_t op) {
    if (op >= OP_ID_COUNT) return NULL;
    pthread_once(&reg.once, reg_init);
    return reg.by_id[op];
}
