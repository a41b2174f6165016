/* onnx.c - the ONNX model reader (onnx.h): ModelProto and the messages under it, decoded from the
 * protobuf wire format (pb.h) into structs in the model's arena.
 *
 * How it reads. A model file is mapped read-only; every message is a byte range of the mapping.
 * Each message is read in two passes over its own fields: the first checks every field's wire
 * framing and wire type and counts the repeated fields (packed or not, even mixed), the second
 * allocates exactly those counts and decodes, recursing into sub-messages. So every array the
 * reader allocates has one element per field (or packed element) present in the file: the
 * reader's memory is bounded by a constant multiple of the file's size (the worst ratio: an
 * empty 2-byte AttributeProto costs one 152-byte OxAttr before it is found to have no name, so
 * about 76x), never by a count the file merely claims (dims, lengths). Tensor payloads in raw_data
 * are not copied: OxTensor.data points into the mapping when aligned for the element type. Unknown
 * fields of every wire type are skipped (groups included); a known field with the wrong wire type
 * is an error. For a singular field given twice the last one wins (sub-messages are not merged).
 *
 * Errors longjmp to the entry point (the same jump an out-of-memory in the arena takes, through
 * the OomHandler the entry point installs), which frees everything: the arena, the mappings.
 * Messages read "name: where: what (at byte N)", where is a path such as
 * `graph.node[3] 'conv1' attribute 'pads'`, kept as a string stack while descending. */
#define _XOPEN_SOURCE 700 /* realpath */
#define _DEFAULT_SOURCE   /* madvise (MADV_DONTNEED: posix_madvise's is a no-op on Linux) */
#include "frontend/onnx/onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/onnx/pb.h"

/* An external-data file, mapped whole once per model (tensors are ranges of it). */
typedef struct OxExtMap {
    struct OxExtMap *next;
    dev_t dev;
    ino_t ino;
    const uint8_t *map; /* NULL for an empty file */
    size_t len;
} OxExtMap;

#define WHERE_CAP 512
#define NO_OFFSET SIZE_MAX

typedef struct Dec {
    OomHandler oom; /* arena OOM and decode errors both jump to oom.jb */
    bool failed;    /* a decode error (err filled) rather than OOM */
    Arena *arena;
    const char *name;    /* the error prefix: a path or a label */
    const uint8_t *base; /* the buffer being decoded (byte offsets are from here) */
    bool copy;           /* copy raw_data into the arena instead of borrowing it */
    bool mapped;         /* base is a read-only file mapping (copy_payload may drop its pages) */
    const char *dir;     /* the model's directory, for external data; NULL: not allowed */
    OxModel *model;      /* owner of external mappings; NULL for a lone tensor */
    int graph_depth, type_depth;
    char where[WHERE_CAP];
    size_t where_len;
    char *err;
    size_t err_cap;
} Dec;

/* ==== element types ======================================================================== */

size_t ox_elem_size(int32_t t) {
    switch (t) {
    case OX_UINT8:
    case OX_INT8:
    case OX_BOOL:
    case 17: /* FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ: one byte each */
    case 18:
    case 19:
    case 20:
    case OX_UINT4: /* unpacked by the reader: one byte per element */
    case OX_INT4: return 1;
    case OX_UINT16:
    case OX_INT16:
    case OX_FLOAT16:
    case OX_BFLOAT16: return 2;
    case OX_FLOAT:
    case OX_INT32:
    case OX_UINT32: return 4;
    case OX_INT64:
    case OX_DOUBLE:
    case OX_UINT64:
    case OX_COMPLEX64: return 8;
    case OX_COMPLEX128: return 16;
    default: return 0; /* UNDEFINED, STRING, other sub-byte types (FLOAT4E2M1 ...), unknown */
    }
}

float ox_float8_value(int32_t t, uint8_t b) {
    /* 1 sign bit, then e exponent bits of bias `bias`, then m mantissa bits; exponent 0 is
     * subnormal. fn: no infinities, S.1111.111 is NaN; fnuz: no -0, no inf, 0x80 alone is NaN;
     * e5m2: IEEE-like (exponent all ones: inf or NaN). */
    bool e5 = t == OX_FLOAT8E5M2 || t == OX_FLOAT8E5M2FNUZ;
    bool uz = t == OX_FLOAT8E4M3FNUZ || t == OX_FLOAT8E5M2FNUZ;
    int m_bits = e5 ? 2 : 3, bias = (e5 ? 15 : 7) + (uz ? 1 : 0);
    int exp = (b & 0x7f) >> m_bits, man = b & ((1 << m_bits) - 1);
    int exp_max = (1 << (7 - m_bits)) - 1;
    float sign = (b & 0x80) ? -1.0f : 1.0f;
    if (uz && b == 0x80) return NAN;
    if (t == OX_FLOAT8E4M3FN && exp == exp_max && man == (1 << m_bits) - 1) return NAN;
    if (t == OX_FLOAT8E5M2 && exp == exp_max) return man ? NAN : sign * INFINITY;
    if (exp == 0) return sign * ldexpf((float)man, 1 - bias - m_bits);
    return sign * ldexpf((float)((1 << m_bits) | man), exp - bias - m_bits);
}

const char *ox_type_name(int32_t t) {
    static const char *const names[] = {
        "undefined",      "float",    "uint8",        "int8",           "uint16",
        "int16",          "int32",    "int64",        "string",         "bool",
        "float16",        "double",   "uint32",       "uint64",         "complex64",
        "complex128",     "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
        "float8e5m2fnuz", "uint4",    "int4",         "float4e2m1",     "float8e8m0",
        "uint2",          "int2",     "float6e2m3",   "float6e3m2",
    };
    if (t >= 0 && (size_t)t < RLY_ARRAY_LEN(names)) return names[t];
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "UNKNOWN(%" PRId32 ")", t);
    return buf;
}

/* Bytes of one scalar component: the alignment a borrowed payload needs. */
static size_t elem_align(int32_t t) {
    size_t s = ox_elem_size(t);
    return t == OX_COMPLEX64 || t == OX_COMPLEX128 ? s / 2 : s;
}

/* ==== errors and locations ================================================================= */

static RLY_NORETURN void fail_at(Dec *d, size_t off, const char *fmt, ...) RLY_PRINTF(3, 4);

static void fail_at(Dec *d, size_t off, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char at[48] = "";
    if (off != NO_OFFSET) snprintf(at, sizeof at, " (at byte %zu)", off);
    if (d->where_len)
        snprintf(d->err, d->err_cap, "%s: %s: %s%s", d->name, d->where, what, at);
    else
        snprintf(d->err, d->err_cap, "%s: %s%s", d->name, what, at);
    d->failed = true;
    longjmp(d->oom.jb, 1);
}

static size_t where_push(Dec *d, const char *fmt, ...) RLY_PRINTF(2, 3);

/* Append to the location; returns the mark where_pop restores (truncates when full). */
static size_t where_push(Dec *d, const char *fmt, ...) {
    size_t mark = d->where_len;
    if (mark + 1 >= WHERE_CAP) return mark;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(d->where + mark, WHERE_CAP - mark, fmt, ap);
    va_end(ap);
    if (n > 0) d->where_len = mark + (size_t)n < WHERE_CAP ? mark + (size_t)n : WHERE_CAP - 1;
    return mark;
}

static void where_pop(Dec *d, size_t mark) {
    d->where_len = mark;
    d->where[mark] = '\0';
}

/* A name for messages: at most 64 bytes, control bytes and quotes shown as '?'. */
static const char *shown(const uint8_t *s, size_t n, char *buf, size_t cap) {
    size_t k = 0, lim = n < 64 ? n : 64;
    for (size_t i = 0; i < lim && k + 4 < cap; i++)
        buf[k++] = (s[i] < 0x20 || s[i] == 0x7f || s[i] == '\'') ? '?' : (char)s[i];
    if (n > lim && k + 4 < cap) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

/* The last string field `num` of the message [p, p+n), for locations; NULL when absent. Reads
 * leniently (stops at the first malformed field: the real pass reports it). */
static const char *peek_name(Dec *d, const uint8_t *p, size_t n, uint32_t num, char *buf,
                             size_t cap) {
    PbReader r = pb_reader(d->base, p, n);
    PbField f;
    const char *why;
    size_t off;
    const char *found = NULL;
    while (pb_next(&r, &f, &why, &off) == 1)
        if (f.num == num && f.wire == PB_LEN && f.len > 0) found = shown(f.data, f.len, buf, cap);
    return found;
}

static const char *wire_name(int w) {
    static const char *const names[] = {"varint",      "64-bit",    "length-delimited",
                                        "start-group", "end-group", "32-bit"};
    return w >= 0 && w < 6 ? names[w] : "invalid";
}

/* ==== field access ========================================================================= */

static bool next_field(Dec *d, PbReader *r, PbField *f) {
    const char *why;
    size_t off;
    int rc = pb_next(r, f, &why, &off);
    if (rc < 0) fail_at(d, off, "%s", why);
    return rc == 1;
}

static void want(Dec *d, const PbField *f, int wire, const char *fname) {
    if (f->wire != wire)
        fail_at(d, f->off, "field %" PRIu32 " (%s) has wire type %s; expected %s", f->num, fname,
                wire_name(f->wire), wire_name(wire));
}

static PbReader sub_reader(Dec *d, const PbField *f, const char *fname) {
    want(d, f, PB_LEN, fname);
    return pb_reader(d->base, f->data, f->len);
}

/* Elements in one occurrence of a repeated scalar field (packed or one unpacked value). */
static size_t rep_count(Dec *d, const PbField *f, int elem_wire, const char *fname) {
    if (f->wire == elem_wire) return 1;
    if (f->wire != PB_LEN)
        fail_at(d, f->off, "field %" PRIu32 " (%s) has wire type %s; expected %s or packed", f->num,
                fname, wire_name(f->wire), wire_name(elem_wire));
    size_t n;
    const char *why = pb_packed_count(f->data, f->len, elem_wire, &n);
    if (why != NULL) fail_at(d, f->off, "field %" PRIu32 " (%s): %s", f->num, fname, why);
    return n;
}

static uint32_t count32(Dec *d, size_t n, const char *what) {
    if (n > UINT32_MAX) fail_at(d, NO_OFFSET, "too many %s (%zu)", what, n);
    return (uint32_t)n;
}

/* A string field, copied NUL-terminated ("" is shared). */
static const char *str_field(Dec *d, const PbField *f, const char *fname) {
    want(d, f, PB_LEN, fname);
    return f->len ? arena_strndup(d->arena, (const char *)f->data, f->len) : "";
}

/* A name (value, node, attribute, op, domain): a NUL inside would make two names look equal. */
static const char *name_field(Dec *d, const PbField *f, const char *fname) {
    want(d, f, PB_LEN, fname);
    if (memchr(f->data, 0, f->len) != NULL) fail_at(d, f->off, "%s contains a NUL byte", fname);
    return f->len ? arena_strndup(d->arena, (const char *)f->data, f->len) : "";
}

static OxStr bytes_field(Dec *d, const PbField *f, const char *fname) {
    want(d, f, PB_LEN, fname);
    OxStr s = {"", f->len};
    if (f->len) s.s = arena_strndup(d->arena, (const char *)f->data, f->len);
    return s;
}

static void *alloc_n(Dec *d, size_t n, size_t size) {
    return n ? arena_array(d->arena, n, size) : NULL;
}

/* A copy of n bytes of a payload (a misaligned raw_data, or any payload when d->copy) into the
 * arena. When the bytes lie in a file mapping (mapped), the pages copied are dropped from the
 * process as the copy proceeds (MADV_DONTNEED on a read-only private file mapping only unmaps
 * them: a later read faults them in again from the file), so a model of misaligned weights
 * costs its size once in memory, not twice (the copy plus the mapped pages it was read from). */
static const void *copy_payload(Dec *d, const uint8_t *src, size_t n, bool mapped) {
    uint8_t *dst = arena_alloc(d->arena, n);
    const size_t chunk = (size_t)4 << 20;
    long page_l = sysconf(_SC_PAGESIZE);
    uintptr_t page = page_l > 0 ? (uintptr_t)page_l : 4096;
    /* [dropped, ...): the whole pages of the payload not dropped yet (the partial first and
     * last pages may hold other fields: they stay) */
    uintptr_t dropped = ((uintptr_t)src + page - 1) / page * page;
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        memcpy(dst + off, src + off, k);
        if (!mapped) continue;
        uintptr_t hi = ((uintptr_t)src + off + k) / page * page;
        if (hi <= dropped) continue;
        (void)madvise((void *)dropped, hi - dropped, MADV_DONTNEED); /* a hint: errors harmless */
        dropped = hi;
    }
    return dst;
}

/* ==== TensorProto ========================================================================== */

static void fmt_dims(const int64_t *dims, size_t n, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "(");
    for (size_t i = 0; i < n && k < cap; i++) {
        if (i == 8 && n > 9) {
            k += (size_t)snprintf(buf + k, cap - k, ", ...");
            break;
        }
        k += (size_t)snprintf(buf + k, cap - k, i ? ", %" PRId64 : "%" PRId64, dims[i]);
    }
    if (k < cap) snprintf(buf + k, cap - k, ")");
}

/* Store the low `w` bytes of v as element i of dst (little-endian host). */
static void store_elem(uint8_t *dst, size_t i, size_t w, uint64_t v) { memcpy(dst + i * w, &v, w); }

static bool parse_decimal(const uint8_t *s, size_t n, uint64_t *out) {
    uint64_t v = 0;
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        uint64_t dgt = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - dgt) / 10) return false;
        v = v * 10 + dgt;
    }
    *out = v;
    return true;
}

/* Map (once per model) the external-data file `loc` relative to the model's directory. */
static OxExtMap *ext_map(Dec *d, const uint8_t *loc, size_t n_loc) {
    char shown_loc[80];
    shown(loc, n_loc, shown_loc, sizeof shown_loc);
    if (d->dir == NULL)
        fail_at(d, NO_OFFSET,
                "external data ('%s') can only be read from a model file (not from memory)",
                shown_loc);
    if (n_loc == 0) fail_at(d, NO_OFFSET, "external data without a location");
    if (memchr(loc, 0, n_loc) != NULL)
        fail_at(d, NO_OFFSET, "external data location '%s' contains a NUL byte", shown_loc);
    if (loc[0] == '/' || loc[0] == '\\')
        fail_at(d, NO_OFFSET, "external data location '%s' is an absolute path", shown_loc);
    for (size_t i = 0; i < n_loc;) { /* no ".." component (either separator) */
        size_t j = i;
        while (j < n_loc && loc[j] != '/' && loc[j] != '\\')
            j++;
        if (j - i == 2 && loc[i] == '.' && loc[i + 1] == '.')
            fail_at(d, NO_OFFSET, "external data location '%s' leaves the model's directory",
                    shown_loc);
        i = j + 1;
    }
    char path[PATH_MAX], real_dir[PATH_MAX], real_path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%.*s", d->dir, (int)n_loc, (const char *)loc) >=
        sizeof path)
        fail_at(d, NO_OFFSET, "external data location '%s' is too long", shown_loc);
    if (realpath(d->dir, real_dir) == NULL || realpath(path, real_path) == NULL)
        fail_at(d, NO_OFFSET, "external data file '%s': %s", path, strerror(errno));
    size_t n_dir = strlen(real_dir);
    bool inside = strncmp(real_path, real_dir, n_dir) == 0 &&
                  (real_path[n_dir] == '/' || (n_dir == 1 && real_dir[0] == '/'));
    if (!inside)
        fail_at(d, NO_OFFSET, "external data file '%s' resolves outside the model's directory",
                path);
    int fd = open(real_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_at(d, NO_OFFSET, "external data file '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        fail_at(d, NO_OFFSET, "external data file '%s' is not a regular file", path);
    }
    for (OxExtMap *e = d->model->ext_maps; e != NULL; e = e->next)
        if (e->dev == st.st_dev && e->ino == st.st_ino) {
            close(fd);
            return e;
        }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        fail_at(d, NO_OFFSET, "external data file '%s' is too large", path);
    }
    size_t len = (size_t)st.st_size;
    void *map = NULL;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            fail_at(d, NO_OFFSET, "cannot map external data file '%s': %s", path, strerror(e));
        }
    }
    close(fd);
    /* the list node lives in the arena; if allocating it fails, unmap first */
    OxExtMap *e;
    {
        OomHandler h = {.prev = sup_oom_handler};
        if (setjmp(h.jb) != 0) {
            sup_oom_handler = h.prev;
            if (map) munmap(map, len);
            sup_oom();
        }
        sup_oom_handler = &h;
        e = arena_alloc(d->arena, sizeof *e);
        sup_oom_handler = h.prev;
    }
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->map = map;
    e->len = len;
    e->next = d->model->ext_maps;
    d->model->ext_maps = e;
    return e;
}

typedef struct KV {
    const uint8_t *key, *val;
    size_t n_key, n_val;
} KV;

static KV decode_kv(Dec *d, const PbField *fld) {
    KV kv = {(const uint8_t *)"", (const uint8_t *)"", 0, 0};
    PbReader r = sub_reader(d, fld, "external_data");
    PbField f;
    while (next_field(d, &r, &f)) {
        if (f.num == 1 || f.num == 2) {
            want(d, &f, PB_LEN, f.num == 1 ? "key" : "value");
            if (f.num == 1) {
                kv.key = f.data;
                kv.n_key = f.len;
            } else {
                kv.val = f.data;
                kv.n_val = f.len;
            }
        }
    }
    return kv;
}

static bool kv_is(const KV *kv, const char *key) {
    return kv->n_key == strlen(key) && memcmp(kv->key, key, kv->n_key) == 0;
}

/* Point t at its external bytes (ext entries: location, offset, length). */
static void load_external(Dec *d, OxTensor *t, const KV *ext, size_t n_ext, size_t want_bytes) {
    const KV *loc = NULL;
    uint64_t offset = 0, length = 0;
    bool has_length = false;
    for (size_t i = 0; i < n_ext; i++) {
        const KV *kv = &ext[i];
        char v[80];
        if (kv_is(kv, "location")) {
            loc = kv;
        } else if (kv_is(kv, "offset")) {
            if (!parse_decimal(kv->val, kv->n_val, &offset))
                fail_at(d, NO_OFFSET, "external data offset '%s' is not a decimal number",
                        shown(kv->val, kv->n_val, v, sizeof v));
        } else if (kv_is(kv, "length")) {
            if (!parse_decimal(kv->val, kv->n_val, &length))
                fail_at(d, NO_OFFSET, "external data length '%s' is not a decimal number",
                        shown(kv->val, kv->n_val, v, sizeof v));
            has_length = true;
        } /* checksum, basepath, ...: ignored */
    }
    if (loc == NULL) fail_at(d, NO_OFFSET, "external data without a location");
    OxExtMap *e = ext_map(d, loc->val, loc->n_val);
    char shown_loc[80];
    shown(loc->val, loc->n_val, shown_loc, sizeof shown_loc);
    if (offset > e->len)
        fail_at(d, NO_OFFSET,
                "external data offset %" PRIu64 " is past the end of '%s' (%zu bytes)", offset,
                shown_loc, e->len);
    if (!has_length) length = e->len - offset;
    if (length > e->len - offset)
        fail_at(d, NO_OFFSET,
                "external data range %" PRIu64 "+%" PRIu64 " is past the end of '%s' (%zu bytes)",
                offset, length, shown_loc, e->len);
    if (length != want_bytes)
        fail_at(d, NO_OFFSET, "external data has %" PRIu64 " bytes; the tensor needs %zu", length,
                want_bytes);
    if (length == 0) return;
    const uint8_t *p = e->map + offset;
    size_t align = elem_align(t->data_type);
    if (!d->copy && (uintptr_t)p % align == 0) {
        t->data = p;
        t->borrowed = true;
    } else {
        t->data = copy_payload(d, p, length, true); /* e->map, mapped by ext_map */
    }
}

enum {
    SRC_RAW,
    SRC_FLOAT,
    SRC_INT32,
    SRC_STRING,
    SRC_INT64,
    SRC_DOUBLE,
    SRC_UINT64,
    SRC_EXT,
    SRC_N
};
static const char *const src_names[SRC_N] = {
    "raw_data",   "float_data",  "int32_data",  "string_data",
    "int64_data", "double_data", "uint64_data", "external data",
};

/* Which typed field may hold a data type's values, and how many values make one element. */
static bool src_fits(int src, int32_t t, size_t *per) {
    *per = 1;
    switch (src) {
    case SRC_RAW:
    case SRC_EXT: return t != OX_STRING;
    case SRC_FLOAT: *per = t == OX_COMPLEX64 ? 2 : 1; return t == OX_FLOAT || t == OX_COMPLEX64;
    case SRC_DOUBLE: *per = t == OX_COMPLEX128 ? 2 : 1; return t == OX_DOUBLE || t == OX_COMPLEX128;
    case SRC_INT32:
        return t == OX_INT32 || t == OX_INT16 || t == OX_INT8 || t == OX_UINT16 || t == OX_UINT8 ||
               t == OX_BOOL || t == OX_FLOAT16 || t == OX_BFLOAT16 || OX_IS_FLOAT8(t) ||
               OX_IS_INT4(t); /* 4-bit: one value holds a packed byte */
    case SRC_STRING: return t == OX_STRING;
    case SRC_INT64: return t == OX_INT64;
    case SRC_UINT64: return t == OX_UINT32 || t == OX_UINT64;
    default: return false;
    }
}

/* Count the values of one occurrence of a typed data field (string_data: one per field). */
static void count_vals(Dec *d, const PbField *f, int src, int wire, size_t *n_vals, bool *has) {
    if (wire == PB_LEN) {
        want(d, f, PB_LEN, src_names[src]);
        n_vals[src]++;
    } else {
        n_vals[src] += rep_count(d, f, wire, src_names[src]);
    }
    has[src] = true;
}

/* INT4/UINT4 elements packed two a byte (low nibble first) into one byte each, int4
 * sign-extended. The caller checked that src holds (count + 1) / 2 bytes. */
static const void *unpack4(Dec *d, const uint8_t *src, int64_t count, bool sign) {
    uint8_t *dst = alloc_n(d, (size_t)count, 1);
    for (int64_t i = 0; i < count; i++) {
        unsigned v = (src[i / 2] >> (4 * (i & 1))) & 0xfu;
        dst[i] = (uint8_t)(sign && v >= 8 ? v + 0xf0u : v);
    }
    return dst;
}

static void decode_tensor(Dec *d, const uint8_t *p, size_t n, OxTensor *t) {
    memset(t, 0, sizeof *t);
    t->name = "";
    size_t n_dims = 0, n_vals[SRC_N] = {0}, n_ext = 0;
    bool has[SRC_N] = {false};
    int64_t data_type = 0, location = 0;
    bool has_type = false;
    const uint8_t *raw = NULL;
    size_t raw_len = 0;
    /* first pass: framing, wire types, counts */
    PbReader r = pb_reader(d->base, p, n);
    PbField f;
    while (next_field(d, &r, &f)) {
        switch (f.num) {
        case 1: n_dims += rep_count(d, &f, PB_VARINT, "dims"); break;
        case 2:
            want(d, &f, PB_VARINT, "data_type");
            data_type = (int64_t)f.v;
            has_type = true;
            break;
        case 3: fail_at(d, f.off, "segmented tensors (field 3, segment) are not supported");
        case 4: count_vals(d, &f, SRC_FLOAT, PB_I32, n_vals, has); break;
        case 5: count_vals(d, &f, SRC_INT32, PB_VARINT, n_vals, has); break;
        case 6: count_vals(d, &f, SRC_STRING, PB_LEN, n_vals, has); break;
        case 7: count_vals(d, &f, SRC_INT64, PB_VARINT, n_vals, has); break;
        case 8: want(d, &f, PB_LEN, "name"); break;
        case 9:
            want(d, &f, PB_LEN, "raw_data");
            raw = f.data;
            raw_len = f.len;
            has[SRC_RAW] = true;
            break;
        case 10: count_vals(d, &f, SRC_DOUBLE, PB_I64, n_vals, has); break;
        case 11: count_vals(d, &f, SRC_UINT64, PB_VARINT, n_vals, has); break;
        case 12: want(d, &f, PB_LEN, "doc_string"); break;
        case 13: want(d, &f, PB_LEN, "external_data"), n_ext++; break;
        case 14:
            want(d, &f, PB_VARINT, "data_location");
            location = (int64_t)f.v;
            break;
        case 16: want(d, &f, PB_LEN, "metadata_props"); break;
        default: break;
        }
    }
    if (!has_type || data_type == OX_UNDEFINED)
        fail_at(d, NO_OFFSET, "the tensor has no data_type");
    if (data_type < 0 || data_type > INT32_MAX)
        fail_at(d, NO_OFFSET, "data_type %" PRId64 " is not a data type", data_type);
    t->data_type = (int32_t)data_type;
    size_t esize = ox_elem_size(t->data_type);
    if (t->data_type != OX_STRING && esize == 0)
        fail_at(d, NO_OFFSET, "tensors of data type %s are not supported",
                ox_type_name(t->data_type));
    if (location != 0 && location != 1)
        fail_at(d, NO_OFFSET, "data_location %" PRId64 " is neither DEFAULT (0) nor EXTERNAL (1)",
                location);
    if (location == 1) has[SRC_EXT] = true;
    int src = -1;
    for (int s = 0; s < SRC_N; s++) {
        if (!has[s]) continue;
        if (src >= 0)
            fail_at(d, NO_OFFSET, "the tensor has both %s and %s", src_names[src], src_names[s]);
        src = s;
    }
    size_t per = 1;
    if (src >= 0 && !src_fits(src, t->data_type, &per))
        fail_at(d, NO_OFFSET, "%s cannot hold %s values", src_names[src],
                ox_type_name(t->data_type));
    /* second pass: decode into buffers sized by what the fields hold */
    t->ndim = count32(d, n_dims, "dims");
    t->dims = alloc_n(d, n_dims, sizeof(int64_t));
    size_t comp = src == SRC_STRING ? 0 : esize / per; /* bytes per value of a typed field */
    uint8_t *vals = NULL;
    OxStr *strs = NULL;
    KV *ext = alloc_n(d, n_ext, sizeof(KV));
    if (src >= 0 && src != SRC_RAW && src != SRC_EXT) {
        if (src == SRC_STRING)
            strs = alloc_n(d, n_vals[src], sizeof(OxStr));
        else
            vals = alloc_n(d, n_vals[src], comp);
    }
    size_t i_dim = 0, i_val = 0, i_ext = 0;
    r = pb_reader(d->base, p, n);
    while (next_field(d, &r, &f)) {
        PbRep it;
        uint64_t v;
        switch (f.num) {
        case 1:
            pb_rep_begin(&it, &f, PB_VARINT);
            while (pb_rep_next(&it, &v))
                t->dims[i_dim++] = (int64_t)v;
            break;
        case 4:
        case 5:
        case 7:
        case 10:
        case 11: {
            int wire = f.num == 4 ? PB_I32 : f.num == 10 ? PB_I64 : PB_VARINT;
            pb_rep_begin(&it, &f, wire);
            while (pb_rep_next(&it, &v)) {
                if (t->data_type == OX_BOOL) v = (uint32_t)v != 0;
                store_elem(vals, i_val++, comp, v);
            }
            break;
        }
        case 6: strs[i_val++] = bytes_field(d, &f, "string_data"); break;
        case 8: t->name = name_field(d, &f, "name"); break;
        case 12: t->doc = str_field(d, &f, "doc_string"); break;
        case 13: ext[i_ext++] = decode_kv(d, &f); break;
        default: break;
        }
    }
    /* dims give the element count; the data must hold exactly that many */
    int64_t count = 1;
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (t->dims[i] < 0)
            fail_at(d, NO_OFFSET, "dims[%" PRIu32 "] = %" PRId64 " is negative", i, t->dims[i]);
        if (t->dims[i] != 0 && count > INT64_MAX / t->dims[i]) {
            char ds[160];
            fmt_dims(t->dims, t->ndim, ds, sizeof ds);
            fail_at(d, NO_OFFSET, "dims %s: the element count overflows", ds);
        }
        count *= t->dims[i];
    }
    t->count = count;
    char ds[160];
    fmt_dims(t->dims, t->ndim, ds, sizeof ds);
    if (src < 0) { /* never an allocation by dims: no data is only right for no elements */
        if (count != 0)
            fail_at(d, NO_OFFSET, "dims %s give %" PRId64 " elements but the tensor has no data",
                    ds, count);
        return;
    }
    size_t nbytes = 0;
    if (esize) {
        if ((uint64_t)count > SIZE_MAX / esize)
            fail_at(d, NO_OFFSET, "dims %s: %" PRId64 " elements of %zu bytes overflow", ds, count,
                    esize);
        nbytes = (size_t)count * esize;
    }
    bool four = OX_IS_INT4(t->data_type), sign4 = t->data_type == OX_INT4;
    size_t packed = four ? (size_t)(count / 2 + count % 2) : nbytes; /* bytes in the file */
    if (src == SRC_RAW) {
        if (four && raw_len != packed)
            fail_at(d, NO_OFFSET,
                    "raw_data has %zu bytes; dims %s of %s (two a byte) need %zu bytes", raw_len,
                    ds, ox_type_name(t->data_type), packed);
        if (raw_len != packed)
            fail_at(d, NO_OFFSET,
                    "raw_data has %zu bytes; dims %s of %s need %" PRId64 " x %zu = %zu bytes",
                    raw_len, ds, ox_type_name(t->data_type), count, esize, nbytes);
        if (nbytes == 0) return;
        if (four) {
            t->data = unpack4(d, raw, count, sign4);
            t->nbytes = nbytes;
            return;
        }
        if (!d->copy && (uintptr_t)raw % elem_align(t->data_type) == 0) {
            t->data = raw;
            t->borrowed = true;
        } else {
            t->data = copy_payload(d, raw, nbytes, d->mapped);
        }
        t->nbytes = nbytes;
        return;
    }
    if (src == SRC_EXT) {
        load_external(d, t, ext, n_ext, packed);
        if (four && t->data) t->data = unpack4(d, t->data, count, sign4);
        t->nbytes = t->data ? nbytes : 0;
        return;
    }
    if (four && n_vals[src] != packed)
        fail_at(d, NO_OFFSET, "%s has %zu values; dims %s of %s need %zu (two a value)",
                src_names[src], n_vals[src], ds, ox_type_name(t->data_type), packed);
    if (!four && (n_vals[src] % per != 0 || (uint64_t)(n_vals[src] / per) != (uint64_t)count))
        fail_at(d, NO_OFFSET, "%s has %zu values; dims %s of %s need %" PRId64 "%s", src_names[src],
                n_vals[src], ds, ox_type_name(t->data_type), count,
                per == 2 ? " complex elements (2 values each)" : "");
    if (count == 0) return;
    if (src == SRC_STRING) {
        t->strings = strs;
        return;
    }
    t->data = four ? unpack4(d, vals, count, sign4) : vals;
    t->nbytes = nbytes;
}

/* ==== TypeProto and ValueInfoProto ========================================================== */

static void decode_type(Dec *d, const PbField *fld, OxType *t);

static void decode_shape(Dec *d, const PbField *fld, OxType *t) {
    PbReader r = sub_reader(d, fld, "shape");
    PbField f;
    size_t n = 0;
    while (next_field(d, &r, &f))
        if (f.num == 1) want(d, &f, PB_LEN, "dim"), n++;
    if (n > INT32_MAX) fail_at(d, fld->off, "too many shape dims (%zu)", n);
    t->ndim = (int32_t)n;
    t->dims = alloc_n(d, n, sizeof(OxDim));
    size_t i = 0;
    r = pb_reader(d->base, fld->data, fld->len);
    while (next_field(d, &r, &f)) {
        if (f.num != 1) continue;
        OxDim *dim = &t->dims[i++];
        dim->value = -1;
        PbReader rd = pb_reader(d->base, f.data, f.len);
        PbField g;
        while (next_field(d, &rd, &g)) {
            if (g.num == 1) {
                want(d, &g, PB_VARINT, "dim_value");
                /* a negative dim_value (some exporters write -1) means unknown */
                dim->value = (int64_t)g.v >= 0 ? (int64_t)g.v : -1;
                dim->param = NULL;
            } else if (g.num == 2) {
                dim->param = name_field(d, &g, "dim_param");
                dim->value = -1;
            } else if (g.num == 3) {
                want(d, &g, PB_LEN, "denotation");
            }
        }
    }
}

/* TypeProto.Tensor and TypeProto.SparseTensor: elem_type = 1, shape = 2. */
static void decode_tensor_type(Dec *d, const PbField *fld, OxType *t) {
    PbReader r = sub_reader(d, fld, "tensor_type");
    PbField f;
    while (next_field(d, &r, &f)) {
        if (f.num == 1) {
            want(d, &f, PB_VARINT, "elem_type");
            t->elem_type = (int32_t)f.v;
        } else if (f.num == 2) {
            decode_shape(d, &f, t);
        }
    }
}

/* TypeProto.Sequence / Optional (elem_type = 1) and Map (key_type = 1, value_type = 2). */
static void decode_wrapped(Dec *d, const PbField *fld, OxType *t, bool is_map) {
    PbReader r = sub_reader(d, fld, is_map ? "map_type" : "elem_type");
    PbField f;
    while (next_field(d, &r, &f)) {
        if (is_map && f.num == 1) {
            want(d, &f, PB_VARINT, "key_type");
            t->elem_type = (int32_t)f.v;
        } else if (f.num == (is_map ? 2u : 1u)) {
            OxType *e = arena_alloc(d->arena, sizeof *e);
            decode_type(d, &f, e);
            t->elem = e;
            if (!is_map) t->elem_type = e->elem_type;
        }
    }
}

static void decode_type(Dec *d, const PbField *fld, OxType *t) {
    if (++d->type_depth > OX_MAX_DEPTH)
        fail_at(d, fld->off, "types nested deeper than %d", OX_MAX_DEPTH);
    memset(t, 0, sizeof *t);
    t->ndim = -1;
    PbReader r = sub_reader(d, fld, "type");
    PbField f;
    while (next_field(d, &r, &f)) {
        switch (f.num) {
        case 1: /* one of the value kinds: the last one given wins */
        case 8:
            memset(t, 0, sizeof *t);
            t->ndim = -1;
            t->kind = f.num == 1 ? OXT_TENSOR : OXT_SPARSE_TENSOR;
            decode_tensor_type(d, &f, t);
            break;
        case 4:
        case 9:
        case 5:
            memset(t, 0, sizeof *t);
            t->ndim = -1;
            t->kind = f.num == 4 ? OXT_SEQUENCE : f.num == 9 ? OXT_OPTIONAL : OXT_MAP;
            decode_wrapped(d, &f, t, f.num == 5);
            break;
        case 7: /* opaque_type: no kind of ours */
            want(d, &f, PB_LEN, "opaque_type");
            memset(t, 0, sizeof *t);
            t->ndim = -1;
            break;
        case 6: want(d, &f, PB_LEN, "denotation"); break;
        default: break;
        }
    }
    d->type_depth--;
}

static void decode_value_info(Dec *d, const PbField *fld, OxValueInfo *vi) {
    vi->name = "";
    vi->type.ndim = -1;
    PbReader r = sub_reader(d, fld, "value info");
    PbField f;
    while (next_field(d, &r, &f)) {
        switch (f.num) {
        case 1: vi->name = name_field(d, &f, "name"); break;
        case 2: decode_type(d, &f, &vi->type); break;
        case 3: vi->doc = str_field(d, &f, "doc_string"); break;
        case 4: want(d, &f, PB_LEN, "metadata_props"); break;
        default: break;
        }
    }
}

/* ==== GraphProto, NodeProto, AttributeProto ================================================== */

static void decode_graph(Dec *d, const PbField *fld, OxGraph *g);

static void decode_tensor_field(Dec *d, const PbField *f, OxTensor *t, const char *fname) {
    want(d, f, PB_LEN, fname);
    decode_tensor(d, f->data, f->len, t);
}

static OxGraph *graph_field(Dec *d, const PbField *f) {
    OxGraph *g = arena_alloc(d->arena, sizeof *g);
    decode_graph(d, f, g);
    return g;
}

#define BIT(t) (1u << (t))

static void decode_attr(Dec *d, const PbField *fld, uint32_t index, OxAttr *a) {
    char nm[80];
    const char *shown_name = peek_name(d, fld->data, fld->len, 1, nm, sizeof nm);
    size_t mark = shown_name ? where_push(d, " attribute '%s'", shown_name)
                             : where_push(d, " attribute[%" PRIu32 "]", index);
    size_t n_floats = 0, n_ints = 0, n_strings = 0, n_tensors = 0, n_graphs = 0, n_tps = 0;
    uint32_t seen = 0;
    int64_t type = 0;
    PbReader r = sub_reader(d, fld, "attribute");
    PbField f;
    while (next_field(d, &r, &f)) {
        switch (f.num) {
        case 1: want(d, &f, PB_LEN, "name"); break;
        case 2: want(d, &f, PB_I32, "f"), seen |= BIT(OXA_FLOAT); break;
        case 3: want(d, &f, PB_VARINT, "i"), seen |= BIT(OXA_INT); break;
        case 4: want(d, &f, PB_LEN, "s"), seen |= BIT(OXA_STRING); break;
        case 5: want(d, &f, PB_LEN, "t"), seen |= BIT(OXA_TENSOR); break;
        case 6: want(d, &f, PB_LEN, "g"), seen |= BIT(OXA_GRAPH); break;
        case 7: n_floats += rep_count(d, &f, PB_I32, "floats"), seen |= BIT(OXA_FLOATS); break;
        case 8: n_ints += rep_count(d, &f, PB_VARINT, "ints"), seen |= BIT(OXA_INTS); break;
        case 9: want(d, &f, PB_LEN, "strings"), n_strings++, seen |= BIT(OXA_STRINGS); break;
        case 10: want(d, &f, PB_LEN, "tensors"), n_tensors++, seen |= BIT(OXA_TENSORS); break;
        case 11: want(d, &f, PB_LEN, "graphs"), n_graphs++, seen |= BIT(OXA_GRAPHS); break;
        case 13: want(d, &f, PB_LEN, "doc_string"); break;
        case 14: want(d, &f, PB_LEN, "tp"), seen |= BIT(OXA_TYPE_PROTO); break;
        case 15: want(d, &f, PB_LEN, "type_protos"), n_tps++, seen |= BIT(OXA_TYPE_PROTOS); break;
        case 20:
            want(d, &f, PB_VARINT, "type");
            type = (int64_t)f.v;
            break;
        case 21: want(d, &f, PB_LEN, "ref_attr_name"); break;
        case 22: want(d, &f, PB_LEN, "sparse_tensor"), seen |= BIT(OXA_SPARSE_TENSOR); break;
        case 23: want(d, &f, PB_LEN, "sparse_tensors"), seen |= BIT(OXA_SPARSE_TENSORS); break;
        default: break;
        }
    }
    a->name = "";
    a->n_floats = count32(d, n_floats, "floats");
    a->n_ints = count32(d, n_ints, "ints");
    a->n_strings = count32(d, n_strings, "strings");
    a->n_tensors = count32(d, n_tensors, "tensors");
    a->n_graphs = count32(d, n_graphs, "graphs");
    a->n_type_protos = count32(d, n_tps, "type_protos");
    a->floats = alloc_n(d, n_floats, sizeof(float));
    a->ints = alloc_n(d, n_ints, sizeof(int64_t));
    a->strings = alloc_n(d, n_strings, sizeof(OxStr));
    a->tensors = alloc_n(d, n_tensors, sizeof(OxTensor));
    a->graphs = alloc_n(d, n_graphs, sizeof(OxGraph *));
    a->type_protos = alloc_n(d, n_tps, sizeof(OxType));
    size_t i_f = 0, i_i = 0, i_s = 0, i_t = 0, i_g = 0, i_tp = 0;
    r = pb_reader(d->base, fld->data, fld->len);
    while (next_field(d, &r, &f)) {
        PbRep it;
        uint64_t v;
        switch (f.num) {
        case 1: a->name = name_field(d, &f, "name"); break;
        case 2: {
            uint32_t bits = (uint32_t)f.v;
            memcpy(&a->f, &bits, 4);
            break;
        }
        case 3: a->i = (int64_t)f.v; break;
        case 4: a->s = bytes_field(d, &f, "s"); break;
        case 5:
            a->t = arena_alloc(d->arena, sizeof *a->t);
            decode_tensor_field(d, &f, a->t, "t");
            break;
        case 6: {
            size_t m = where_push(d, " graph");
            a->g = graph_field(d, &f);
            where_pop(d, m);
            break;
        }
        case 7:
            pb_rep_begin(&it, &f, PB_I32);
            while (pb_rep_next(&it, &v)) {
                uint32_t bits = (uint32_t)v;
                memcpy(&a->floats[i_f++], &bits, 4);
            }
            break;
        case 8:
            pb_rep_begin(&it, &f, PB_VARINT);
            while (pb_rep_next(&it, &v))
                a->ints[i_i++] = (int64_t)v;
            break;
        case 9: a->strings[i_s++] = bytes_field(d, &f, "strings"); break;
        case 10: {
            size_t m = where_push(d, " tensors[%zu]", i_t);
            decode_tensor_field(d, &f, &a->tensors[i_t++], "tensors");
            where_pop(d, m);
            break;
        }
        case 11: {
            size_t m = where_push(d, " graphs[%zu]", i_g);
            a->graphs[i_g++] = graph_field(d, &f);
            where_pop(d, m);
            break;
        }
        case 14:
            a->tp = arena_alloc(d->arena, sizeof *a->tp);
            decode_type(d, &f, a->tp);
            break;
        case 15: decode_type(d, &f, &a->type_protos[i_tp++]); break;
        case 21: a->ref_attr_name = name_field(d, &f, "ref_attr_name"); break;
        default: break;
        }
    }
    if (a->name[0] == '\0') fail_at(d, fld->off, "the attribute has no name");
    if (type < 0 || type > OXA_TYPE_PROTOS)
        fail_at(d, fld->off, "unknown attribute type %" PRId64, type);
    a->type = (int32_t)type;
    if (a->type == OXA_UNDEFINED && a->ref_attr_name == NULL) {
        /* older files leave the type out: it is the one kind of value present */
        if (seen == 0) fail_at(d, fld->off, "the attribute has neither a type nor a value");
        if ((seen & (seen - 1)) != 0)
            fail_at(d, fld->off, "the attribute has no type and values of several kinds");
        while (!(seen & BIT(a->type)))
            a->type++;
    }
    where_pop(d, mark);
}

static void decode_node(Dec *d, const PbField *fld, uint32_t index, OxNode *node) {
    char nm[80];
    const char *shown_name = peek_name(d, fld->data, fld->len, 3, nm, sizeof nm);
    size_t mark = shown_name ? where_push(d, ".node[%" PRIu32 "] '%s'", index, shown_name)
                             : where_push(d, ".node[%" PRIu32 "]", index);
    node->index = index;
    node->name = "";
    node->domain = "";
    size_t n_in = 0, n_out = 0, n_attr = 0;
    PbReader r = sub_reader(d, fld, "node");
    PbField f;
    while (next_field(d, &r, &f)) {
        switch (f.num) {
        case 1: want(d, &f, PB_LEN, "input"), n_in++; break;
        case 2: want(d, &f, PB_LEN, "output"), n_out++; break;
        case 3: want(d, &f, PB_LEN, "name"); break;
        case 4: want(d, &f, PB_LEN, "op_type"); break;
        case 5: want(d, &f, PB_LEN, "attribute"), n_attr++; break;
        case 6: want(d, &f, PB_LEN, "doc_string"); break;
        case 7: want(d, &f, PB_LEN, "domain"); break;
        case 8: want(d, &f, PB_LEN, "overload"); break;
        default: break;
        }
    }
    node->n_inputs = count32(d, n_in, "inputs");
    node->n_outputs = count32(d, n_out, "outputs");
    node->n_attrs = count32(d, n_attr, "attributes");
    node->inputs = alloc_n(d, n_in, sizeof(char *));
    node->outputs = alloc_n(d, n_out, sizeof(char *));
    node->attrs = alloc_n(d, n_attr, sizeof(OxAttr));
    uint32_t i_in = 0, i_out = 0, i_attr = 0;
    r = pb_reader(d->base, fld->data, fld->len);
    while (next_field(d, &r, &f)) {
        switch (f.num) {
        case 1: node->inputs[i_in++] = name_field(d, &f, "input"); break;
        case 2: node->outputs[i_out++] = name_field(d, &f, "output"); break;
        case 3: node->name = name_field(d, &f, "name"); break;
        case 4: node->op_type = name_field(d, &f, "op_type"); break;
        case 5: decode_attr(d, &f, i_attr, &node->attrs[i_attr]), i_attr++; break;
        case 7: node->domain = name_field(d, &f, "domain"); break;
        default: break;
        }
    }
    if (node->op_type == NULL || node->op_type[0] == '\0')
        fail_at(d, fld->off, "the node has no op_type");
    where_pop(d, mark);
}

static void decode_graph(Dec *d, const PbField *fld, OxGraph *g) {
    if (++d->graph_depth > OX_MAX_DEPTH)
        fail_at(d, fld->off, "graphs nested deeper than %d", OX_MAX_DEPTH);
    g->name = "";
    size_t n_nodes = 0, n_inits = 0, n_in = 0, n_out = 0, n_vi = 0, n_sparse = 0;
    PbReader r = sub_reader(d, fld, "graph");
    PbField f;
    while (next_field(d, &r, &f)) {
        switch (f.num) {
        case 1: want(d, &f, PB_LEN, "node"), n_nodes++; break;
        case 2: want(d, &f, PB_LEN, "name"); break;
        case 5: want(d, &f, PB_LEN, "initializer"), n_inits++; break;
        case 10: want(d, &f, PB_LEN, "doc_string"); break;
        case 11: want(d, &f, PB_LEN, "input"), n_in++; break;
        case 12: want(d, &f, PB_LEN, "output"), n_out++; break;
        case 13: want(d, &f, PB_LEN, "value_info"), n_vi++; break;
        case 14: want(d, &f, PB_LEN, "quantization_annotation"); break;
        case 15: want(d, &f, PB_LEN, "sparse_initializer"), n_sparse++; break;
        case 16: want(d, &f, PB_LEN, "metadata_props"); break;
        default: break;
        }
    }
    g->n_nodes = count32(d, n_nodes, "nodes");
    g->n_inits = count32(d, n_inits, "initializers");
    g->n_inputs = count32(d, n_in, "inputs");
    g->n_outputs = count32(d, n_out, "outputs");
    g->n_value_infos = count32(d, n_vi, "value_infos");
    g->n_sparse_inits = count32(d, n_sparse, "sparse initializers");
    g->nodes = alloc_n(d, n_nodes, sizeof(OxNode));
    g->inits = alloc_n(d, n_inits, sizeof(OxTensor));
    g->inputs = alloc_n(d, n_in, sizeof(OxValueInfo));
    g->outputs = alloc_n(d, n_out, sizeof(OxValueInfo));
    g->value_infos = alloc_n(d, n_vi, sizeof(OxValueInfo));
    uint32_t i_node = 0, i_init = 0, i_in = 0, i_out = 0, i_vi = 0;
    r = pb_reader(d->base, fld->data, fld->len);
    while (next_field(d, &r, &f)) {
        char nm[80];
        const char *shown_name;
        size_t mark;
        OxValueInfo *vi;
        const char *list;
        uint32_t idx;
        switch (f.num) {
        case 1: decode_node(d, &f, i_node, &g->nodes[i_node]), i_node++; break;
        case 2: g->name = name_field(d, &f, "name"); break;
        case 5:
            shown_name = peek_name(d, f.data, f.len, 8, nm, sizeof nm);
            mark = shown_name ? where_push(d, ".initializer[%" PRIu32 "] '%s'", i_init, shown_name)
                              : where_push(d, ".initializer[%" PRIu32 "]", i_init);
            decode_tensor_field(d, &f, &g->inits[i_init++], "initializer");
            where_pop(d, mark);
            break;
        case 11:
        case 12:
        case 13:
            if (f.num == 11)
                vi = &g->inputs[idx = i_in++], list = "input";
            else if (f.num == 12)
                vi = &g->outputs[idx = i_out++], list = "output";
            else
                vi = &g->value_infos[idx = i_vi++], list = "value_info";
            shown_name = peek_name(d, f.data, f.len, 1, nm, sizeof nm);
            mark = shown_name ? where_push(d, ".%s[%" PRIu32 "] '%s'", list, idx, shown_name)
                              : where_push(d, ".%s[%" PRIu32 "]", list, idx);
            decode_value_info(d, &f, vi);
            where_pop(d, mark);
            break;
        default: break;
        }
    }
    d->graph_depth--;
}

/* ==== ModelProto ============================================================================= */

static void decode_opset(Dec *d, const PbField *fld, OxOpset *o) {
    o->domain = "";
    PbReader r = sub_reader(d, fld, "opset_import");
    PbField f;
    while (next_field(d, &r, &f)) {
        if (f.num == 1) {
            o->domain = name_field(d, &f, "domain");
        } else if (f.num == 2) {
            want(d, &f, PB_VARINT, "version");
            o->version = (int64_t)f.v;
        }
    }
}

static void decode_model(Dec *d, const uint8_t *p, size_t n, OxModel *m) {
    size_t n_opsets = 0, n_functions = 0;
    bool has_ir = false;
    PbField graph = {0};
    m->producer_name = m->producer_version = m->domain = m->doc = "";
    PbReader r = pb_reader(d->base, p, n);
    PbField f;
    while (next_field(d, &r, &f)) {
        switch (f.num) {
        case 1:
            want(d, &f, PB_VARINT, "ir_version");
            m->ir_version = (int64_t)f.v;
            has_ir = true;
            break;
        case 2: want(d, &f, PB_LEN, "producer_name"); break;
        case 3: want(d, &f, PB_LEN, "producer_version"); break;
        case 4: want(d, &f, PB_LEN, "domain"); break;
        case 5:
            want(d, &f, PB_VARINT, "model_version");
            m->model_version = (int64_t)f.v;
            break;
        case 6: want(d, &f, PB_LEN, "doc_string"); break;
        case 7: want(d, &f, PB_LEN, "graph"), graph = f; break;
        case 8: want(d, &f, PB_LEN, "opset_import"), n_opsets++; break;
        case 14: want(d, &f, PB_LEN, "metadata_props"); break;
        case 20: want(d, &f, PB_LEN, "training_info"); break;
        case 25: want(d, &f, PB_LEN, "functions"), n_functions++; break;
        default: break;
        }
    }
    if (!has_ir) fail_at(d, NO_OFFSET, "no ir_version (is this an ONNX model?)");
    if (m->ir_version < 3)
        fail_at(d, NO_OFFSET, "ir_version %" PRId64 " is not supported (IR 3 or newer is needed)",
                m->ir_version);
    if (graph.data == NULL) fail_at(d, NO_OFFSET, "the model has no graph");
    m->n_opsets = count32(d, n_opsets, "opset imports");
    m->n_functions = count32(d, n_functions, "functions");
    m->opsets = alloc_n(d, n_opsets, sizeof(OxOpset));
    uint32_t i_op = 0;
    r = pb_reader(d->base, p, n);
    while (next_field(d, &r, &f)) {
        switch (f.num) {
        case 2: m->producer_name = str_field(d, &f, "producer_name"); break;
        case 3: m->producer_version = str_field(d, &f, "producer_version"); break;
        case 4: m->domain = str_field(d, &f, "domain"); break;
        case 6: m->doc = str_field(d, &f, "doc_string"); break;
        case 8: {
            size_t mark = where_push(d, "opset_import[%" PRIu32 "]", i_op);
            decode_opset(d, &f, &m->opsets[i_op++]);
            where_pop(d, mark);
            break;
        }
        default: break;
        }
    }
    m->graph = arena_alloc(d->arena, sizeof *m->graph);
    size_t mark = where_push(d, "graph");
    decode_graph(d, &graph, m->graph);
    where_pop(d, mark);
}

/* ==== entry points ============================================================================ */

typedef void (*DecFn)(Dec *d, const uint8_t *p, size_t n, void *out);

/* Run fn with errors and arena OOM caught; false (err filled) when it failed. */
static bool run_decode(Dec *d, DecFn fn, const uint8_t *p, size_t n, void *out) {
    d->oom.prev = sup_oom_handler;
    if (setjmp(d->oom.jb) != 0) {
        sup_oom_handler = d->oom.prev;
        if (!d->failed) snprintf(d->err, d->err_cap, "%s: out of memory", d->name);
        return false;
    }
    sup_oom_handler = &d->oom;
    fn(d, p, n, out);
    sup_oom_handler = d->oom.prev;
    return true;
}

static void model_fn(Dec *d, const uint8_t *p, size_t n, void *out) {
    OxModel *m = out;
    m->path = arena_strndup(d->arena, d->name, strlen(d->name));
    decode_model(d, p, n, m);
}

static void free_ext_maps(OxModel *m) {
    for (OxExtMap *e = m->ext_maps; e != NULL; e = e->next)
        if (e->map) munmap((void *)e->map, e->len);
    m->ext_maps = NULL;
}

static void set_err(char *err, size_t cap, const char *fmt, ...) RLY_PRINTF(3, 4);
static void set_err(char *err, size_t cap, const char *fmt, ...) {
    if (cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

static OxModel *load_model(const uint8_t *data, size_t len, bool mapped, const char *name,
                           const char *dir, char *err, size_t err_cap) {
    char dummy[1];
    if (err == NULL || err_cap == 0) err = dummy, err_cap = sizeof dummy;
    err[0] = '\0';
    OxModel *m = calloc(1, sizeof *m);
    if (m == NULL) {
        set_err(err, err_cap, "%s: out of memory", name);
        return NULL;
    }
    arena_init(&m->arena);
    Dec d = {.arena = &m->arena,
             .name = name,
             .base = data,
             .dir = dir,
             .model = m,
             .mapped = mapped,
             .err = err,
             .err_cap = err_cap};
    if (!run_decode(&d, model_fn, data, len, m)) {
        free_ext_maps(m);
        arena_free(&m->arena);
        free(m);
        return NULL;
    }
    return m;
}

OxModel *ox_load_bytes(const void *data, size_t len, const char *name, char *err, size_t err_cap) {
    if (name == NULL) name = "<memory>";
    static const uint8_t empty[1];
    return load_model(data ? data : empty, data ? len : 0, false, name, NULL, err, err_cap);
}

OxModel *ox_load_file(const char *path, char *err, size_t err_cap) {
    char dummy[1];
    if (err == NULL || err_cap == 0) err = dummy, err_cap = sizeof dummy;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        set_err(err, err_cap, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        set_err(err, err_cap, "%s: not a regular file", path);
        return NULL;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        set_err(err, err_cap, "%s: too large", path);
        return NULL;
    }
    size_t len = (size_t)st.st_size;
    void *map = NULL;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            set_err(err, err_cap, "%s: cannot map: %s", path, strerror(errno));
            close(fd);
            return NULL;
        }
    }
    close(fd);
    /* the model's directory: external data locations are relative to it */
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    static const uint8_t empty[1];
    OxModel *m = load_model(map ? map : empty, len, map != NULL, path, dir, err, err_cap);
    if (m == NULL) {
        if (map) munmap(map, len);
        return NULL;
    }
    m->map = map;
    m->map_len = len;
    return m;
}

void ox_model_free(OxModel *m) {
    if (m == NULL) return;
    free_ext_maps(m);
    if (m->map) munmap(m->map, m->map_len);
    arena_free(&m->arena);
    free(m);
}

static bool domain_is_default(const char *s) { return s[0] == '\0' || strcmp(s, "ai.onnx") == 0; }

int64_t ox_opset(const OxModel *m, const char *domain) {
    if (domain == NULL) domain = "";
    int64_t v = 0;
    for (uint32_t i = 0; i < m->n_opsets; i++) {
        const char *d = m->opsets[i].domain;
        bool same = domain_is_default(domain) ? domain_is_default(d) : strcmp(d, domain) == 0;
        if (same) v = m->opsets[i].version; /* the last one given, as protobuf would */
    }
    return v;
}

static void tensor_fn(Dec *d, const uint8_t *p, size_t n, void *out) {
    OxTensor **t = out;
    *t = arena_alloc(d->arena, sizeof **t);
    decode_tensor(d, p, n, *t);
}

static OxTensor *decode_tensor_named(const void *data, size_t len, const char *name, Arena *arena,
                                     char *err, size_t err_cap) {
    char dummy[1];
    if (err == NULL || err_cap == 0) err = dummy, err_cap = sizeof dummy;
    err[0] = '\0';
    static const uint8_t empty[1];
    const uint8_t *p = data ? data : empty;
    Dec d = {.arena = arena, .name = name, .base = p, .copy = true, .err = err, .err_cap = err_cap};
    OxTensor *t = NULL;
    if (!run_decode(&d, tensor_fn, p, data ? len : 0, &t)) return NULL;
    return t;
}

OxTensor *ox_decode_tensor(const void *data, size_t len, Arena *arena, char *err, size_t err_cap) {
    return decode_tensor_named(data, len, "TensorProto", arena, err, err_cap);
}

OxTensor *ox_load_tensor_file(const char *path, Arena *arena, char *err, size_t err_cap) {
    char *data;
    size_t len;
    char msg[256];
    if (!sup_read_file(path, &data, &len, msg, sizeof msg)) {
        set_err(err, err_cap, "%s: %s", path, msg);
        return NULL;
    }
    OxTensor *t = decode_tensor_named(data, len, path, arena, err, err_cap);
    free(data);
    return t;
}

void ox_encode_tensor(const OxTensor *t, StrBuf *out) {
    for (uint32_t i = 0; i < t->ndim; i++) {
        pb_put_tag(out, 1, PB_VARINT);
        pb_put_varint(out, (uint64_t)t->dims[i]);
    }
    pb_put_tag(out, 2, PB_VARINT);
    pb_put_varint(out, (uint64_t)(int64_t)t->data_type);
    if (t->data_type == OX_STRING)
        for (int64_t i = 0; t->strings != NULL && i < t->count; i++)
            pb_put_bytes(out, 6, t->strings[i].s, t->strings[i].n);
    if (t->name != NULL && t->name[0] != '\0') pb_put_bytes(out, 8, t->name, strlen(t->name));
    if (OX_IS_INT4(t->data_type)) { /* packed again, two a byte, low nibble first */
        size_t n = t->data && t->count > 0 ? (size_t)(t->count / 2 + t->count % 2) : 0;
        uint8_t *packed = n ? sup_calloc(n, 1) : NULL;
        const uint8_t *u = t->data;
        for (size_t i = 0; i < 2 * n && (int64_t)i < t->count; i++)
            packed[i / 2] |= (uint8_t)((u[i] & 0xfu) << (4 * (i & 1)));
        pb_put_bytes(out, 9, packed, n);
        free(packed);
    } else if (t->data_type != OX_STRING) {
        size_t n = t->count > 0 ? (size_t)t->count * ox_elem_size(t->data_type) : 0;
        pb_put_bytes(out, 9, t->data, t->data ? n : 0);
    }
    if (t->doc != NULL && t->doc[0] != '\0') pb_put_bytes(out, 12, t->doc, strlen(t->doc));
}

/* ==== SequenceProto and OptionalProto (test data) =========================================== */

static const char *elem_kind_name(int64_t k) {
    static const char *const names[] = {"undefined", "tensor", "sparse tensor",
                                        "sequence",  "map",    "optional"};
    return k >= 0 && k < (int64_t)RLY_ARRAY_LEN(names) ? names[k] : "unknown";
}

static void decode_value(Dec *d, const PbField *f, OxValueKind kind, OxValue *v);

/* The element kind (OXE_*) a value field of SequenceProto/OptionalProto holds (field numbers
 * agree between the two: tensor 3, sparse tensor 4, sequence 5, map 6, optional 7); fails on
 * the kinds we do not read. 0 for other fields. */
static int value_field_kind(Dec *d, const PbField *f, bool seq) {
    switch (f->num) {
    case 3: want(d, f, PB_LEN, seq ? "tensor_values" : "tensor_value"); return OXE_TENSOR;
    case 5: want(d, f, PB_LEN, seq ? "sequence_values" : "sequence_value"); return OXE_SEQUENCE;
    case 7: want(d, f, PB_LEN, seq ? "optional_values" : "optional_value"); return OXE_OPTIONAL;
    case 4: fail_at(d, f->off, "sparse tensor values are not supported");
    case 6: fail_at(d, f->off, "map values are not supported");
    default: return 0;
    }
}

/* elem_type (when given) must be a kind we read and agree with the values held. */
static void check_elem_type(Dec *d, int64_t elem, int held, size_t off) {
    if (elem == OXE_SPARSE_TENSOR || elem == OXE_MAP)
        fail_at(d, off, "elem_type %s is not supported", elem_kind_name(elem));
    if (elem < 0 || elem > OXE_OPTIONAL)
        fail_at(d, off, "elem_type %" PRId64 " is not a known element kind", elem);
    if (elem != OXE_UNDEFINED && held != 0 && held != elem)
        fail_at(d, off, "elem_type is %s but it holds %s values", elem_kind_name(elem),
                elem_kind_name(held));
}

/* SequenceProto: name = 1, elem_type = 2, then the values (see value_field_kind). */
static void decode_sequence(Dec *d, const uint8_t *p, size_t n, OxValue *v) {
    int64_t elem = 0;
    size_t elem_off = NO_OFFSET, count = 0;
    int held = 0;
    PbReader r = pb_reader(d->base, p, n);
    PbField f;
    while (next_field(d, &r, &f)) {
        if (f.num == 1) {
            want(d, &f, PB_LEN, "name");
        } else if (f.num == 2) {
            want(d, &f, PB_VARINT, "elem_type");
            elem = (int64_t)f.v, elem_off = f.off;
        } else {
            int k = value_field_kind(d, &f, true);
            if (k == 0) continue;
            if (held != 0 && held != k)
                fail_at(d, f.off, "holds values of two kinds (%s and %s)", elem_kind_name(held),
                        elem_kind_name(k));
            held = k;
            count++;
        }
    }
    check_elem_type(d, elem, held, elem_off);
    v->elem_type = (int32_t)(elem != OXE_UNDEFINED ? elem : held);
    v->n = count32(d, count, "sequence values");
    v->items = alloc_n(d, count, sizeof(OxValue));
    uint32_t i = 0;
    r = pb_reader(d->base, p, n);
    while (next_field(d, &r, &f)) {
        if (f.num == 1) {
            v->name = str_field(d, &f, "name");
            continue;
        }
        int k = value_field_kind(d, &f, true);
        if (k == 0) continue;
        size_t mark = where_push(d, "%s%s[%" PRIu32 "]", d->where_len ? "." : "",
                                 k == OXE_TENSOR     ? "tensor_values"
                                 : k == OXE_SEQUENCE ? "sequence_values"
                                                     : "optional_values",
                                 i);
        decode_value(d, &f,
                     k == OXE_TENSOR     ? OXV_TENSOR
                     : k == OXE_SEQUENCE ? OXV_SEQUENCE
                                         : OXV_OPTIONAL,
                     &v->items[i++]);
        where_pop(d, mark);
    }
}

/* OptionalProto: name = 1, elem_type = 2, then at most one value (the last one given wins). An
 * empty optional has elem_type UNDEFINED and no value. */
static void decode_optional(Dec *d, const uint8_t *p, size_t n, OxValue *v) {
    int64_t elem = 0;
    size_t elem_off = NO_OFFSET;
    PbField value = {0};
    int held = 0;
    PbReader r = pb_reader(d->base, p, n);
    PbField f;
    while (next_field(d, &r, &f)) {
        if (f.num == 1) {
            v->name = str_field(d, &f, "name");
        } else if (f.num == 2) {
            want(d, &f, PB_VARINT, "elem_type");
            elem = (int64_t)f.v, elem_off = f.off;
        } else {
            int k = value_field_kind(d, &f, false);
            if (k == 0) continue;
            if (held != 0 && held != k)
                fail_at(d, f.off, "holds values of two kinds (%s and %s)", elem_kind_name(held),
                        elem_kind_name(k));
            held = k, value = f;
        }
    }
    check_elem_type(d, elem, held, elem_off);
    if (elem == OXE_UNDEFINED && held != 0)
        fail_at(d, elem_off, "elem_type is undefined (an empty optional) but it holds a %s value",
                elem_kind_name(held));
    if (elem != OXE_UNDEFINED && held == 0)
        fail_at(d, elem_off, "elem_type is %s but it holds no value", elem_kind_name(elem));
    v->elem_type = (int32_t)elem;
    if (held == 0) return;
    v->n = 1;
    v->items = alloc_n(d, 1, sizeof(OxValue));
    size_t mark = where_push(d, "%s%s", d->where_len ? "." : "",
                             held == OXE_TENSOR     ? "tensor_value"
                             : held == OXE_SEQUENCE ? "sequence_value"
                                                    : "optional_value");
    decode_value(d, &value,
                 held == OXE_TENSOR     ? OXV_TENSOR
                 : held == OXE_SEQUENCE ? OXV_SEQUENCE
                                        : OXV_OPTIONAL,
                 v->items);
    where_pop(d, mark);
}

static void decode_value_at(Dec *d, const uint8_t *p, size_t n, OxValueKind kind, OxValue *v,
                            size_t off) {
    if (++d->type_depth > OX_MAX_DEPTH) {
        where_pop(d, 0); /* the path would be all of the message */
        fail_at(d, off, "values nested deeper than %d", OX_MAX_DEPTH);
    }
    memset(v, 0, sizeof *v);
    v->kind = (uint8_t)kind;
    v->name = "";
    if (kind == OXV_TENSOR) {
        v->elem_type = OXE_TENSOR;
        v->tensor = arena_alloc(d->arena, sizeof *v->tensor);
        decode_tensor(d, p, n, v->tensor);
        v->name = v->tensor->name;
    } else if (kind == OXV_SEQUENCE) {
        decode_sequence(d, p, n, v);
    } else {
        decode_optional(d, p, n, v);
    }
    d->type_depth--;
}

static void decode_value(Dec *d, const PbField *f, OxValueKind kind, OxValue *v) {
    decode_value_at(d, f->data, f->len, kind, v, f->off);
}

typedef struct ValueJob {
    OxValueKind kind;
    OxValue *v;
} ValueJob;

static void value_fn(Dec *d, const uint8_t *p, size_t n, void *out) {
    ValueJob *job = out;
    job->v = arena_alloc(d->arena, sizeof *job->v);
    decode_value_at(d, p, n, job->kind, job->v, 0);
}

static OxValue *decode_value_named(const void *data, size_t len, OxValueKind kind, const char *name,
                                   Arena *arena, char *err, size_t err_cap) {
    char dummy[1];
    if (err == NULL || err_cap == 0) err = dummy, err_cap = sizeof dummy;
    err[0] = '\0';
    static const uint8_t empty[1];
    const uint8_t *p = data ? data : empty;
    Dec d = {.arena = arena, .name = name, .base = p, .copy = true, .err = err, .err_cap = err_cap};
    ValueJob job = {kind, NULL};
    if (!run_decode(&d, value_fn, p, data ? len : 0, &job)) return NULL;
    return job.v;
}

OxValue *ox_decode_value(const void *data, size_t len, OxValueKind kind, Arena *arena, char *err,
                         size_t err_cap) {
    const char *name = kind == OXV_TENSOR     ? "TensorProto"
                       : kind == OXV_SEQUENCE ? "SequenceProto"
                                              : "OptionalProto";
    return decode_value_named(data, len, kind, name, arena, err, err_cap);
}

OxValue *ox_load_value_file(const char *path, OxValueKind kind, Arena *arena, char *err,
                            size_t err_cap) {
    char *data;
    size_t len;
    char msg[256];
    if (!sup_read_file(path, &data, &len, msg, sizeof msg)) {
        set_err(err, err_cap, "%s: %s", path, msg);
        return NULL;
    }
    OxValue *v = decode_value_named(data, len, kind, path, arena, err, err_cap);
    free(data);
    return v;
}

void ox_encode_value(const OxValue *v, StrBuf *out) {
    if (v->kind == OXV_TENSOR) {
        ox_encode_tensor(v->tensor, out);
        return;
    }
    if (v->name != NULL && v->name[0] != '\0') pb_put_bytes(out, 1, v->name, strlen(v->name));
    pb_put_tag(out, 2, PB_VARINT);
    pb_put_varint(out, (uint64_t)(int64_t)v->elem_type);
    for (uint32_t i = 0; i < v->n; i++) {
        const OxValue *it = &v->items[i];
        StrBuf sub = {0};
        ox_encode_value(it, &sub);
        uint32_t num = it->kind == OXV_TENSOR ? 3 : it->kind == OXV_SEQUENCE ? 5 : 7;
        pb_put_bytes(out, num, sub.len ? sub.data : "", sub.len);
        sb_free(&sub);
    }
}
