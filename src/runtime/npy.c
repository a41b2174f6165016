/* npy.c - NumPy .npy and .npz reading and writing (see npy.h for the decisions).
 *
 * Three layers: the .npy header (a Python dict literal, parsed by a small recursive-descent
 * parser that accepts only the three keys numpy writes), the element copy (byte swap, Fortran
 * transpose, bool normalization), and the zip container (central directory first, ZIP64
 * records, stored and raw-deflate members through zlib). Every offset read from a file is
 * checked against the buffer before use; all arithmetic on sizes is overflow-checked. */
#define _DEFAULT_SOURCE /* madvise */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/npy.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c assumes a little-endian host"
#endif

/* ======================================================================================
 * small helpers
 * ====================================================================================== */

static bool fail(char *err, size_t errlen, const char *fmt, ...) RLY_PRINTF(3, 4);
static bool fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return false;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

static void put16(StrBuf *sb, uint32_t v) {
    char b[2] = {(char)(v & 0xff), (char)((v >> 8) & 0xff)};
    sb_putn(sb, b, 2);
}
static void put32(StrBuf *sb, uint32_t v) {
    put16(sb, v & 0xffffu);
    put16(sb, v >> 16);
}
static void put64(StrBuf *sb, uint64_t v) {
    put32(sb, (uint32_t)(v & 0xffffffffu));
    put32(sb, (uint32_t)(v >> 32));
}

/* Input-sized allocations fail softly (NULL) instead of going through sup_oom. */
static void *data_alloc(size_t n) {
    size_t rounded = n == 0 ? RT_NPY_ALIGN : n;
    if (rounded > SIZE_MAX - (RT_NPY_ALIGN - 1)) return NULL;
    rounded = (rounded + RT_NPY_ALIGN - 1) & ~(size_t)(RT_NPY_ALIGN - 1);
    return aligned_alloc(RT_NPY_ALIGN, rounded);
}

/* CRC-32 over a buffer of any size (zlib's crc32 takes a uInt length). */
static uint32_t crc32_all(const uint8_t *p, size_t n) {
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt chunk = n > 0x40000000u ? 0x40000000u : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

/* ======================================================================================
 * dtypes and descr strings
 * ====================================================================================== */

static const char *const descr_of[RLY_DTYPE_COUNT] = {
    [RLY_DTYPE_BOOL] = "|b1", [RLY_DTYPE_I8] = "|i1",  [RLY_DTYPE_I16] = "<i2",
    [RLY_DTYPE_I32] = "<i4",  [RLY_DTYPE_I64] = "<i8", [RLY_DTYPE_U8] = "|u1",
    [RLY_DTYPE_U16] = "<u2",  [RLY_DTYPE_U32] = "<u4", [RLY_DTYPE_U64] = "<u8",
    [RLY_DTYPE_F16] = "<f2",  [RLY_DTYPE_F32] = "<f4", [RLY_DTYPE_F64] = "<f8",
    [RLY_DTYPE_BF16] = "<V2", /* what numpy writes for ml_dtypes.bfloat16 */
};
_Static_assert(RLY_DTYPE_COUNT == 13, "update descr_of");

/* Parse a descr such as "<f4" into a dtype; *swap is set for big-endian multi-byte data. */
static bool parse_descr(const char *s, size_t n, rly_dtype *dt, bool *swap, char *err,
                        size_t errlen) {
    size_t i = 0;
    char order = '=';
    if (n > 0 && s[0] != '\0' && strchr("<>|=", s[0]) != NULL) order = s[i++];
    if (i >= n) goto bad;
    char kind = s[i++];
    if (i >= n || n - i > 2) goto bad;
    unsigned size = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') goto bad;
        size = size * 10u + (unsigned)(s[i] - '0');
    }
    int found = -1;
    switch (kind) {
    case 'b':
        if (size == 1) found = RLY_DTYPE_BOOL;
        break;
    case 'i':
        found = size == 1   ? RLY_DTYPE_I8
                : size == 2 ? RLY_DTYPE_I16
                : size == 4 ? RLY_DTYPE_I32
                : size == 8 ? RLY_DTYPE_I64
                            : -1;
        break;
    case 'u':
        found = size == 1   ? RLY_DTYPE_U8
                : size == 2 ? RLY_DTYPE_U16
                : size == 4 ? RLY_DTYPE_U32
                : size == 8 ? RLY_DTYPE_U64
                            : -1;
        break;
    case 'f':
        found = size == 2   ? RLY_DTYPE_F16
                : size == 4 ? RLY_DTYPE_F32
                : size == 8 ? RLY_DTYPE_F64
                            : -1;
        break;
    case 'V':
        if (size == 2) found = RLY_DTYPE_BF16;
        break;
    default: break;
    }
    if (found < 0) goto bad;
    *dt = (rly_dtype)found;
    *swap = order == '>' && size > 1;
    return true;
bad:
    return fail(err, errlen,
                "unsupported dtype descr '%.*s' (supported: bool, int8..int64, uint8..uint64, "
                "float16/32/64, and bfloat16 as 2-byte void 'V2')",
                (int)(n > 32 ? 32 : n), s);
}

/* ======================================================================================
 * the .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * ====================================================================================== */

typedef struct Header {
    char descr[16];
    bool fortran;
    uint32_t ndim;
    int64_t shape[RT_NPY_MAX_DIMS];
} Header;

typedef struct HParser {
    const char *p, *end;
    char *err;
    size_t errlen;
} HParser;

static void hp_ws(HParser *hp) {
    while (hp->p < hp->end && (*hp->p == ' ' || *hp->p == '\t' || *hp->p == '\n' || *hp->p == '\r'))
        hp->p++;
}

static bool hp_eat(HParser *hp, char c) {
    hp_ws(hp);
    if (hp->p < hp->end && *hp->p == c) {
        hp->p++;
        return true;
    }
    return false;
}

static bool hp_expect(HParser *hp, char c, const char *what) {
    if (hp_eat(hp, c)) return true;
    if (hp->p >= hp->end)
        return fail(hp->err, hp->errlen, "bad .npy header: expected '%c' %s, found the end", c,
                    what);
    unsigned char f = (unsigned char)*hp->p;
    if (f < 0x20 || f >= 0x7f)
        return fail(hp->err, hp->errlen, "bad .npy header: expected '%c' %s, found byte 0x%02x", c,
                    what, f);
    return fail(hp->err, hp->errlen, "bad .npy header: expected '%c' %s, found '%c'", c, what,
                (char)f);
}

/* A quoted string without escapes (descr strings and keys never need them). */
static bool hp_string(HParser *hp, const char **s, size_t *n) {
    hp_ws(hp);
    if (hp->p >= hp->end || (*hp->p != '\'' && *hp->p != '"'))
        return fail(hp->err, hp->errlen, "bad .npy header: expected a quoted string");
    char q = *hp->p++;
    const char *start = hp->p;
    while (hp->p < hp->end && *hp->p != q) {
        if (*hp->p == '\\')
            return fail(hp->err, hp->errlen,
                        "bad .npy header: escapes in strings are not supported");
        if ((unsigned char)*hp->p < 0x20)
            return fail(hp->err, hp->errlen, "bad .npy header: control byte in a string");
        hp->p++;
    }
    if (hp->p >= hp->end) return fail(hp->err, hp->errlen, "bad .npy header: unterminated string");
    *s = start;
    *n = (size_t)(hp->p - start);
    hp->p++;
    return true;
}

static bool hp_word(HParser *hp, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(hp->end - hp->p) >= n && memcmp(hp->p, w, n) == 0) {
        const char *after = hp->p + n;
        if (after == hp->end ||
            !((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
              *after == '_' || (*after >= '0' && *after <= '9'))) {
            hp->p = after;
            return true;
        }
    }
    return false;
}

static bool hp_bool(HParser *hp, bool *out) {
    hp_ws(hp);
    if (hp_word(hp, "True"))
        *out = true;
    else if (hp_word(hp, "False"))
        *out = false;
    else
        return fail(hp->err, hp->errlen, "bad .npy header: 'fortran_order' must be True or False");
    return true;
}

static bool hp_dim(HParser *hp, int64_t *out) {
    hp_ws(hp);
    if (hp->p < hp->end && *hp->p == '-')
        return fail(hp->err, hp->errlen, "bad .npy header: negative dimension in 'shape'");
    if (hp->p >= hp->end || *hp->p < '0' || *hp->p > '9')
        return fail(hp->err, hp->errlen, "bad .npy header: 'shape' must be a tuple of integers");
    int64_t v = 0;
    while (hp->p < hp->end && *hp->p >= '0' && *hp->p <= '9') {
        int d = *hp->p++ - '0';
        if (v > (SUP_DIM_MAX - d) / 10) /* the shape limit (support.h, "shapes") */
            return fail(hp->err, hp->errlen,
                        "bad .npy header: a dimension in 'shape' is too large (over 2^62)");
        v = v * 10 + d;
    }
    if (hp->p < hp->end && (*hp->p == 'L' || *hp->p == 'l')) hp->p++; /* Python 2 long */
    *out = v;
    return true;
}

static bool hp_shape(HParser *hp, Header *h) {
    if (!hp_eat(hp, '('))
        return fail(hp->err, hp->errlen, "bad .npy header: 'shape' must be a tuple");
    h->ndim = 0;
    bool comma = false;
    while (!hp_eat(hp, ')')) {
        if (h->ndim > 0 && !comma) return hp_expect(hp, ',', "between dimensions");
        if (h->ndim == RT_NPY_MAX_DIMS)
            return fail(hp->err, hp->errlen, "array has more than %d dimensions", RT_NPY_MAX_DIMS);
        if (!hp_dim(hp, &h->shape[h->ndim])) return false;
        h->ndim++;
        comma = hp_eat(hp, ',');
    }
    if (h->ndim == 1 && !comma) /* (3) is the integer 3 in Python, not a tuple */
        return fail(hp->err, hp->errlen, "bad .npy header: 'shape' must be a tuple");
    return true;
}

static bool parse_header(const char *text, size_t n, Header *h, char *err, size_t errlen) {
    HParser hp = {text, text + n, err, errlen};
    memset(h, 0, sizeof *h);
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    if (!hp_expect(&hp, '{', "at the start of the header")) return false;
    while (!hp_eat(&hp, '}')) {
        const char *key;
        size_t kn;
        if (!hp_string(&hp, &key, &kn)) return false;
        if (!hp_expect(&hp, ':', "after a key")) return false;
        bool *seen;
        if (kn == 5 && memcmp(key, "descr", 5) == 0) {
            seen = &seen_descr;
            hp_ws(&hp);
            if (hp.p < hp.end && *hp.p == '[')
                return fail(err, errlen, "structured dtypes are not supported");
            const char *s;
            size_t sn;
            if (!hp_string(&hp, &s, &sn)) return false;
            if (sn >= sizeof h->descr)
                return fail(err, errlen, "unsupported dtype descr '%.*s'", 32, s);
            memcpy(h->descr, s, sn);
            h->descr[sn] = '\0';
        } else if (kn == 13 && memcmp(key, "fortran_order", 13) == 0) {
            seen = &seen_fortran;
            if (!hp_bool(&hp, &h->fortran)) return false;
        } else if (kn == 5 && memcmp(key, "shape", 5) == 0) {
            seen = &seen_shape;
            if (!hp_shape(&hp, h)) return false;
        } else {
            return fail(err, errlen, "bad .npy header: unexpected key '%.*s'",
                        (int)(kn > 32 ? 32 : kn), key);
        }
        if (*seen)
            return fail(err, errlen, "bad .npy header: key '%.*s' appears twice", (int)kn, key);
        *seen = true;
        if (!hp_eat(&hp, ',')) {
            if (!hp_expect(&hp, '}', "after a value")) return false;
            break;
        }
    }
    hp_ws(&hp);
    if (hp.p != hp.end) return fail(err, errlen, "bad .npy header: unexpected text after the dict");
    if (!seen_descr || !seen_fortran || !seen_shape)
        return fail(err, errlen, "bad .npy header: missing key '%s'",
                    !seen_descr     ? "descr"
                    : !seen_fortran ? "fortran_order"
                                    : "shape");
    return true;
}

/* ======================================================================================
 * arrays
 * ====================================================================================== */

/* Elements and bytes of a shape: the shape limit (support.h, "shapes"), then size_t. */
static bool shape_size(rly_dtype dt, uint32_t ndim, const int64_t *shape, size_t *count,
                       size_t *nbytes, char *err, size_t errlen) {
    char why[128];
    if (sup_shape_check(ndim, shape, false, why, sizeof why) != NULL)
        return fail(err, errlen, "array shape: %s", why);
    uint64_t c = (uint64_t)sup_shape_numel(ndim, shape);
    uint64_t sz = sup_dtype_size(dt);
    if (c > (uint64_t)SIZE_MAX / sz) return fail(err, errlen, "array size overflows size_t");
    *count = (size_t)c;
    *nbytes = (size_t)(c * sz);
    return true;
}

bool rt_npy_validate(const NpyArray *a, char *err, size_t errlen) {
    if ((unsigned)a->dtype >= RLY_DTYPE_COUNT)
        return fail(err, errlen, "invalid dtype %d", (int)a->dtype);
    if (a->ndim > RT_NPY_MAX_DIMS)
        return fail(err, errlen, "%u dimensions (at most %d)", a->ndim, RT_NPY_MAX_DIMS);
    size_t count = 0, nbytes = 0;
    if (!shape_size(a->dtype, a->ndim, a->shape, &count, &nbytes, err, errlen)) return false;
    if (nbytes != a->nbytes)
        return fail(err, errlen, "nbytes is %zu but the shape and dtype give %zu", a->nbytes,
                    nbytes);
    if (nbytes > 0 && a->data == NULL) return fail(err, errlen, "data is NULL");
    return true;
}

bool rt_npy_alloc(NpyArray *out, rly_dtype dtype, uint32_t ndim, const int64_t *shape, char *err,
                  size_t errlen) {
    memset(out, 0, sizeof *out);
    if ((unsigned)dtype >= RLY_DTYPE_COUNT)
        return fail(err, errlen, "invalid dtype %d", (int)dtype);
    if (ndim > RT_NPY_MAX_DIMS)
        return fail(err, errlen, "%u dimensions (at most %d)", ndim, RT_NPY_MAX_DIMS);
    size_t count = 0, nbytes = 0;
    if (!shape_size(dtype, ndim, shape, &count, &nbytes, err, errlen)) return false;
    void *data = data_alloc(nbytes);
    if (data == NULL) return fail(err, errlen, "out of memory allocating %zu bytes", nbytes);
    memset(data, 0, nbytes);
    out->dtype = dtype;
    out->ndim = ndim;
    if (ndim > 0) memcpy(out->shape, shape, ndim * sizeof *shape);
    out->data = data;
    out->nbytes = nbytes;
    return true;
}

void rt_npy_free(NpyArray *a) {
    if (a == NULL) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

static void byteswap(uint8_t *p, size_t count, size_t size) {
    for (size_t i = 0; i < count; i++, p += size)
        for (size_t lo = 0, hi = size - 1; lo < hi; lo++, hi--) {
            uint8_t t = p[lo];
            p[lo] = p[hi];
            p[hi] = t;
        }
}

/* Copy Fortran-ordered (column-major) elements of `shape` into C order. Walks the destination
 * in order while keeping the source offset of the current multi-index up to date. */
static void fortran_to_c(uint8_t *dst, const uint8_t *src, uint32_t ndim, const int64_t *shape,
                         size_t count, size_t size) {
    size_t stride[RT_NPY_MAX_DIMS], idx[RT_NPY_MAX_DIMS] = {0};
    size_t s = 1;
    for (uint32_t k = 0; k < ndim; k++) {
        stride[k] = s;
        s *= (size_t)shape[k];
    }
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        memcpy(dst + i * size, src + off * size, size);
        for (uint32_t k = ndim; k-- > 0;) {
            off += stride[k];
            if (++idx[k] < (size_t)shape[k]) break;
            off -= stride[k] * (size_t)shape[k];
            idx[k] = 0;
        }
    }
}

static bool load_all(NpzReader *r, Npz *z, char *err, size_t errlen);

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER (1u << 20) /* numpy writes < 1 KiB; its own loader stops at 10,000 */

/* What the prefix of a .npy image says: where the elements start and what they are. */
typedef struct NpyHead {
    rly_dtype dt;
    bool swap, fortran;
    uint32_t ndim;
    int64_t shape[RT_NPY_MAX_DIMS];
    size_t count, nbytes, data_off;
} NpyHead;

/* The length of the prefix (magic, version, header) of an image that starts with b[0..len):
 * len >= 12 or the whole image. */
static bool head_len(const uint8_t *b, size_t len, size_t *out, char *err, size_t errlen) {
    if (len < 6 || memcmp(b, NPY_MAGIC, 6) != 0)
        return fail(err, errlen, "not a .npy file (bad magic)");
    if (len < 10) return fail(err, errlen, "truncated .npy header");
    unsigned major = b[6], minor = b[7];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = rd16(b + 8);
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return fail(err, errlen, "truncated .npy header");
        hlen = rd32(b + 8);
        hstart = 12;
    } else {
        return fail(err, errlen, "unsupported .npy version %u.%u", major, minor);
    }
    if (minor != 0) return fail(err, errlen, "unsupported .npy version %u.%u", major, minor);
    if (hlen > NPY_MAX_HEADER)
        return fail(err, errlen, ".npy header of %zu bytes is too long (at most %u)", hlen,
                    NPY_MAX_HEADER);
    *out = hstart + hlen;
    return true;
}

/* Parse the prefix b[0..len) (exactly head_len bytes). */
static bool parse_head(const uint8_t *b, size_t len, NpyHead *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    size_t hstart = b[6] == 1 ? 10 : 12;
    /* Versions 1 and 2 are latin-1, 3 is UTF-8: the keys and values we accept are ASCII. */
    Header hd;
    if (!parse_header((const char *)b + hstart, len - hstart, &hd, err, errlen)) return false;
    if (!parse_descr(hd.descr, strlen(hd.descr), &h->dt, &h->swap, err, errlen)) return false;
    if (!shape_size(h->dt, hd.ndim, hd.shape, &h->count, &h->nbytes, err, errlen)) return false;
    h->fortran = hd.fortran;
    h->ndim = hd.ndim;
    memcpy(h->shape, hd.shape, sizeof h->shape);
    h->data_off = len;
    return true;
}

/* The elements in C order: `src` (h->nbytes bytes as stored) copied or transposed into dst,
 * which may be src itself when the array is not Fortran-ordered; then byte order and bools. */
static void place(uint8_t *dst, const uint8_t *src, const NpyHead *h) {
    size_t size = sup_dtype_size(h->dt);
    if (h->fortran && h->ndim > 1 && h->count > 0)
        fortran_to_c(dst, src, h->ndim, h->shape, h->count, size);
    else if (h->nbytes > 0 && dst != src)
        memcpy(dst, src, h->nbytes);
    if (h->swap) byteswap(dst, h->count, size);
    if (h->dt == RLY_DTYPE_BOOL)
        for (size_t i = 0; i < h->count; i++)
            dst[i] = dst[i] != 0;
}

/* The image's length must be the prefix plus the elements, exactly. */
static bool check_extent(const NpyHead *h, uint64_t len, char *err, size_t errlen) {
    uint64_t avail = len - h->data_off;
    if (h->nbytes > avail)
        return fail(err, errlen, "truncated .npy data: shape needs %zu bytes, %llu present",
                    h->nbytes, (unsigned long long)avail);
    if (h->nbytes < avail)
        return fail(err, errlen, "%llu bytes of trailing data after the array",
                    (unsigned long long)(avail - h->nbytes));
    return true;
}

static void head_to_array(const NpyHead *h, NpyArray *a) {
    a->dtype = h->dt;
    a->ndim = h->ndim;
    memcpy(a->shape, h->shape, sizeof a->shape);
    a->nbytes = h->nbytes;
}

bool rt_npy_decode(const void *buf, size_t len, NpyArray *out, char *err, size_t errlen) {
    const uint8_t *b = buf;
    memset(out, 0, sizeof *out);
    size_t hl = 0;
    NpyHead h;
    if (!head_len(b, len, &hl, err, errlen)) return false;
    if (hl > len)
        return fail(err, errlen, "truncated .npy header (%zu bytes declared, %zu present)",
                    hl - (b[6] == 1 ? 10 : 12), len - (b[6] == 1 ? 10 : 12));
    if (!parse_head(b, hl, &h, err, errlen) || !check_extent(&h, len, err, errlen)) return false;
    uint8_t *data = data_alloc(h.nbytes);
    if (data == NULL) return fail(err, errlen, "out of memory allocating %zu bytes", h.nbytes);
    place(data, b + h.data_off, &h);
    head_to_array(&h, out);
    out->data = data;
    return true;
}

/* The prefix of a's .npy image: magic, version, header dict padded so the data starts at a
 * multiple of 64. */
static void npy_prefix(const NpyArray *a, StrBuf *out) {
    StrBuf h = {0};
    sb_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr_of[a->dtype]);
    for (uint32_t i = 0; i < a->ndim; i++)
        sb_printf(&h, i == 0 ? "%lld" : ", %lld", (long long)a->shape[i]);
    sb_puts(&h, a->ndim == 1 ? ",), }" : "), }");
    /* Pad with spaces and a final newline so the data starts at a multiple of 64. */
    size_t prefix = h.len + 1 + 10 > 65535 ? 12 : 10;
    size_t total = prefix + h.len + 1;
    size_t pad = (RT_NPY_ALIGN - total % RT_NPY_ALIGN) % RT_NPY_ALIGN;
    for (size_t i = 0; i < pad; i++)
        sb_putc(&h, ' ');
    sb_putc(&h, '\n');
    sb_putn(out, NPY_MAGIC, 6);
    if (prefix == 10) {
        sb_putn(out, "\x01\x00", 2);
        put16(out, (uint32_t)h.len);
    } else {
        sb_putn(out, "\x02\x00", 2);
        put32(out, (uint32_t)h.len);
    }
    sb_putn(out, h.data, h.len);
    sb_free(&h);
}

void rt_npy_encode(const NpyArray *a, StrBuf *out) {
    char why[128];
    RLY_CHECK(rt_npy_validate(a, why, sizeof why), "rt_npy_encode: %s", why);
    npy_prefix(a, out);
    if (a->nbytes > 0) sb_putn(out, a->data, a->nbytes);
}

bool rt_npy_load(const char *path, NpyArray *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    NpzReader *r;
    if (!rt_npz_open(path, true, &r, err, errlen)) return false;
    Npz z = {0};
    bool ok = load_all(r, &z, err, errlen);
    rt_npz_close(r);
    if (ok) *out = z.items[0].arr;
    free(z.items ? z.items[0].name : NULL);
    free(z.items);
    return ok;
}

bool rt_npy_save(const char *path, const NpyArray *a, char *err, size_t errlen) {
    char msg[512];
    if (!rt_npy_validate(a, msg, sizeof msg)) return fail(err, errlen, "%s: %s", path, msg);
    StrBuf sb = {0};
    npy_prefix(a, &sb);
    SupOut *o = sup_out_open(path, err, errlen);
    bool ok = o != NULL;
    if (ok) {
        sup_out_write(o, sb.data, sb.len);
        sup_out_write(o, a->data, a->nbytes);
        ok = sup_out_commit(o, err, errlen);
    }
    sb_free(&sb);
    return ok;
}

/* ======================================================================================
 * zip containers
 * ====================================================================================== */

enum {
    ZIP_LOCAL_SIG = 0x04034b50,
    ZIP_CENTRAL_SIG = 0x02014b50,
    ZIP_EOCD_SIG = 0x06054b50,
    ZIP64_EOCD_SIG = 0x06064b50,
    ZIP64_LOCATOR_SIG = 0x07064b50,
    ZIP_LOCAL_SIZE = 30,
    ZIP_CENTRAL_SIZE = 46,
    ZIP_EOCD_SIZE = 22,
    ZIP64_EOCD_SIZE = 56,
    ZIP64_LOCATOR_SIZE = 20,
    ZIP_DOS_DATE = (0 << 9) | (1 << 5) | 1, /* 1980-01-01: deterministic output */
    /* Deflate cannot expand more than about 1032:1 (a 258-byte match in under 2 bits). */
    ZIP_MAX_INFLATE_RATIO = 1032,
};

/* A member as described by the central directory. */
typedef struct ZipMember {
    const char *name; /* in the archive buffer, not terminated */
    size_t name_len;
    uint16_t flags, method;
    uint32_t crc;
    uint64_t csize, usize, local_off;
    uint64_t data_off, end; /* of the compressed data, and of the whole member */
} ZipMember;

static bool is_npy_member(const ZipMember *m) {
    return m->name_len >= 4 && memcmp(m->name + m->name_len - 4, ".npy", 4) == 0;
}

/* Apply a ZIP64 extended-information extra field to the saturated fields of a central entry. */
static bool apply_zip64_extra(const uint8_t *x, size_t n, ZipMember *m, bool *need_usize,
                              bool *need_csize, bool *need_off, char *err, size_t errlen) {
    while (n > 0) {
        if (n < 4) return fail(err, errlen, "malformed extra field");
        uint16_t id = rd16(x), sz = rd16(x + 2);
        if (sz > n - 4) return fail(err, errlen, "extra field runs past its entry");
        if (id == 0x0001) {
            const uint8_t *d = x + 4;
            size_t left = sz;
            uint64_t *fields[3] = {&m->usize, &m->csize, &m->local_off};
            bool *needs[3] = {need_usize, need_csize, need_off};
            for (int i = 0; i < 3; i++) {
                if (!*needs[i]) continue;
                if (left < 8) return fail(err, errlen, "ZIP64 extra field too short");
                *fields[i] = rd64(d);
                *needs[i] = false;
                d += 8;
                left -= 8;
            }
        }
        x += 4 + (size_t)sz;
        n -= 4 + (size_t)sz;
    }
    return true;
}

/* Find the end-of-central-directory record(s) and return the directory's extent. */
static bool find_directory(const uint8_t *b, size_t len, uint64_t *n_entries, uint64_t *cd_off,
                           uint64_t *cd_size, size_t *cd_limit, char *err, size_t errlen) {
    if (len < ZIP_EOCD_SIZE) return fail(err, errlen, "not a zip archive (too short)");
    size_t last = len - ZIP_EOCD_SIZE;
    size_t first = last > 65535 ? last - 65535 : 0;
    size_t eocd = SIZE_MAX;
    for (size_t off = last + 1; off-- > first;) {
        if (rd32(b + off) == ZIP_EOCD_SIG && rd16(b + off + 20) <= len - off - ZIP_EOCD_SIZE) {
            eocd = off;
            break;
        }
    }
    if (eocd == SIZE_MAX)
        return fail(err, errlen, "not a zip archive (no end of central directory)");
    const uint8_t *e = b + eocd;
    if (rd16(e + 4) != 0 || rd16(e + 6) != 0)
        return fail(err, errlen, "multi-disk zip archives are not supported");
    *n_entries = rd16(e + 10);
    *cd_size = rd32(e + 12);
    *cd_off = rd32(e + 16);
    *cd_limit = eocd;
    if (rd16(e + 8) != rd16(e + 10))
        return fail(err, errlen, "multi-disk zip archives are not supported");
    bool saturated = *n_entries == 0xffff || *cd_size == 0xffffffffu || *cd_off == 0xffffffffu;
    if (eocd >= ZIP64_LOCATOR_SIZE && rd32(e - ZIP64_LOCATOR_SIZE) == ZIP64_LOCATOR_SIG) {
        const uint8_t *loc = e - ZIP64_LOCATOR_SIZE;
        uint64_t z = rd64(loc + 8);
        size_t loc_off = eocd - ZIP64_LOCATOR_SIZE;
        if (rd32(loc + 4) != 0 || rd32(loc + 16) > 1)
            return fail(err, errlen, "multi-disk zip archives are not supported");
        if (z > loc_off || loc_off - z < ZIP64_EOCD_SIZE || rd32(b + z) != ZIP64_EOCD_SIG)
            return fail(err, errlen, "bad ZIP64 end of central directory locator");
        const uint8_t *r = b + z;
        if (rd32(r + 16) != 0 || rd32(r + 20) != 0 || rd64(r + 24) != rd64(r + 32))
            return fail(err, errlen, "multi-disk zip archives are not supported");
        *n_entries = rd64(r + 32);
        *cd_size = rd64(r + 40);
        *cd_off = rd64(r + 48);
        *cd_limit = (size_t)z;
    } else if (saturated) {
        return fail(err, errlen, "zip archive needs a ZIP64 end of central directory, none found");
    }
    if (*cd_off > *cd_limit || *cd_size > *cd_limit - *cd_off)
        return fail(err, errlen, "central directory lies outside the archive");
    if (*n_entries > *cd_size / ZIP_CENTRAL_SIZE)
        return fail(err, errlen, "central directory too small for %llu entries",
                    (unsigned long long)*n_entries);
    return true;
}

/* Read one central directory entry at *pos (advanced past it) and its local header. */
static bool read_member(const uint8_t *b, size_t len, size_t *pos, size_t cd_end, ZipMember *m,
                        char *err, size_t errlen) {
    size_t p = *pos;
    if (cd_end - p < ZIP_CENTRAL_SIZE || rd32(b + p) != ZIP_CENTRAL_SIG)
        return fail(err, errlen, "bad central directory entry at offset %zu", p);
    const uint8_t *c = b + p;
    memset(m, 0, sizeof *m);
    m->flags = rd16(c + 8);
    m->method = rd16(c + 10);
    m->crc = rd32(c + 16);
    m->csize = rd32(c + 20);
    m->usize = rd32(c + 24);
    size_t nlen = rd16(c + 28), xlen = rd16(c + 30), clen = rd16(c + 32);
    m->local_off = rd32(c + 42);
    if (cd_end - p - ZIP_CENTRAL_SIZE < nlen + xlen + clen)
        return fail(err, errlen, "central directory entry at offset %zu runs past the directory",
                    p);
    m->name = (const char *)c + ZIP_CENTRAL_SIZE;
    m->name_len = nlen;
    bool need_usize = m->usize == 0xffffffffu, need_csize = m->csize == 0xffffffffu,
         need_off = m->local_off == 0xffffffffu;
    if (!apply_zip64_extra(c + ZIP_CENTRAL_SIZE + nlen, xlen, m, &need_usize, &need_csize,
                           &need_off, err, errlen))
        return false;
    if (need_usize || need_csize || need_off)
        return fail(err, errlen,
                    "member '%.*s': saturated size or offset without ZIP64 extra field", (int)nlen,
                    m->name);
    *pos = p + ZIP_CENTRAL_SIZE + nlen + xlen + clen;
    if (!is_npy_member(m)) return true; /* skipped: its local header is never read */

    /* The local header: only its name and extra lengths matter (the directory is the truth,
     * and numpy writes placeholder sizes there). */
    if (m->local_off > len || len - m->local_off < ZIP_LOCAL_SIZE ||
        rd32(b + m->local_off) != ZIP_LOCAL_SIG)
        return fail(err, errlen, "member '%.*s': bad local header offset", (int)nlen, m->name);
    const uint8_t *l = b + m->local_off;
    size_t lnlen = rd16(l + 26), lxlen = rd16(l + 28);
    uint64_t data_off = m->local_off + ZIP_LOCAL_SIZE + lnlen + lxlen;
    if (data_off > len || m->csize > len - data_off)
        return fail(err, errlen, "member '%.*s': data runs past the end of the archive", (int)nlen,
                    m->name);
    if (lnlen != nlen || memcmp(l + ZIP_LOCAL_SIZE, m->name, nlen) != 0)
        return fail(err, errlen, "member '%.*s': local header names a different file", (int)nlen,
                    m->name);
    m->data_off = data_off;
    m->end = data_off + m->csize;
    return true;
}

/* ---- member streams: a member's bytes produced in order, inflated on the fly ---------------- */

typedef struct MStream {
    const uint8_t *src; /* stored: the bytes not yet produced; deflate: input not yet given */
    size_t src_left;
    bool mapped;            /* src lies in a file mapping: consumed pages are dropped */
    const uint8_t *dropped; /* pages below this have been dropped */
    bool deflate, crc_check;
    z_stream zs;
    uLong crc;
    uint64_t usize, produced; /* declared and produced so far */
    uint32_t want_crc;
} MStream;

static bool ms_open(MStream *s, const uint8_t *src, size_t csize, const ZipMember *m, char *err,
                    size_t errlen) {
    memset(s, 0, sizeof *s);
    s->src = src;
    s->src_left = csize;
    s->usize = m ? m->usize : csize;
    s->crc_check = m != NULL;
    s->want_crc = m ? m->crc : 0;
    s->crc = crc32(0L, Z_NULL, 0);
    s->deflate = m != NULL && m->method == 8;
    if (s->deflate && inflateInit2(&s->zs, -15) != Z_OK)
        return fail(err, errlen, "zlib inflateInit2 failed");
    return true;
}

enum { MS_CHUNK = 8u << 20 }; /* input is consumed in pieces of this size */

/* Drop the mapped pages wholly below `upto`: clean file pages, re-read if ever touched again,
 * so a large input does not stay resident beside the tensor it was decoded into. */
static void ms_drop(MStream *s, const uint8_t *upto) {
    if (!s->mapped) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGE_SIZE);
    uintptr_t lo = ((uintptr_t)s->dropped + page - 1) / page * page,
              hi = (uintptr_t)upto / page * page;
    if (hi > lo + MS_CHUNK / 2 || (hi > lo && upto == s->src + s->src_left)) {
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
        s->dropped = (const uint8_t *)hi;
    }
}

static void ms_close(MStream *s) {
    if (s->deflate) inflateEnd(&s->zs);
    s->deflate = false;
}

/* Produce exactly n more bytes into dst (n must not pass the declared size). */
static bool ms_read(MStream *s, uint8_t *dst, size_t n, char *err, size_t errlen) {
    RLY_CHECK(n <= s->usize - s->produced, "ms_read past the member");
    uint8_t *p = dst;
    size_t left = n;
    if (!s->deflate) {
        RLY_CHECK(n <= s->src_left, "ms_read past stored data"); /* usize == csize, checked */
        for (size_t done = 0; done < n;) {
            size_t k = n - done < MS_CHUNK ? n - done : MS_CHUNK;
            memcpy(dst + done, s->src, k);
            s->src += k;
            s->src_left -= k;
            done += k;
            ms_drop(s, s->src);
        }
    } else {
        while (left > 0) {
            if (s->zs.avail_in == 0 && s->src_left > 0) {
                ms_drop(s, s->src);
                s->zs.next_in = (Bytef *)(uintptr_t)s->src; /* zlib does not write through it */
                s->zs.avail_in = s->src_left > MS_CHUNK ? MS_CHUNK : (uInt)s->src_left;
                s->src += s->zs.avail_in;
                s->src_left -= s->zs.avail_in;
            }
            uInt chunk = left > 0x40000000u ? 0x40000000u : (uInt)left;
            s->zs.next_out = p;
            s->zs.avail_out = chunk;
            uInt before_in = s->zs.avail_in;
            int rc = inflate(&s->zs, Z_NO_FLUSH);
            size_t got = chunk - s->zs.avail_out;
            p += got;
            left -= got;
            if (rc == Z_STREAM_END && left > 0)
                return fail(err, errlen, "inflated %llu bytes, the directory declares %llu",
                            (unsigned long long)(s->produced + (n - left)),
                            (unsigned long long)s->usize);
            if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
                return fail(err, errlen, "corrupt deflate stream (%s)",
                            s->zs.msg != NULL ? s->zs.msg : "zlib error");
            if (got == 0 && before_in == s->zs.avail_in && (rc == Z_BUF_ERROR || rc == Z_OK))
                return fail(err, errlen, "truncated deflate stream");
        }
    }
    for (size_t done = 0; s->crc_check && done < n;) {
        uInt chunk = n - done > 0x40000000u ? 0x40000000u : (uInt)(n - done);
        s->crc = crc32(s->crc, dst + done, chunk);
        done += chunk;
    }
    s->produced += n;
    return true;
}

/* After the declared size: the deflate stream must end there, and the CRC-32 match. */
static bool ms_finish(MStream *s, char *err, size_t errlen) {
    if (s->deflate) {
        uint8_t extra;
        int rc = Z_OK;
        for (int guard = 0; rc == Z_OK && guard < 64; guard++) {
            if (s->zs.avail_in == 0 && s->src_left > 0) {
                s->zs.next_in = (Bytef *)(uintptr_t)s->src;
                s->zs.avail_in = s->src_left > MS_CHUNK ? MS_CHUNK : (uInt)s->src_left;
                s->src += s->zs.avail_in;
                s->src_left -= s->zs.avail_in;
            }
            s->zs.next_out = &extra;
            s->zs.avail_out = 1;
            uInt before_in = s->zs.avail_in;
            rc = inflate(&s->zs, Z_NO_FLUSH);
            if (s->zs.avail_out == 0)
                return fail(err, errlen, "inflated data is larger than its declared size");
            if (rc == Z_OK && before_in == s->zs.avail_in) rc = Z_BUF_ERROR;
        }
        if (rc != Z_STREAM_END)
            return fail(err, errlen,
                        rc == Z_BUF_ERROR ? "truncated deflate stream"
                                          : "corrupt deflate stream (%s)",
                        s->zs.msg != NULL ? s->zs.msg : "zlib error");
    }
    if (s->crc_check && (uint32_t)s->crc != s->want_crc)
        return fail(err, errlen, "CRC-32 mismatch (stored %08x, computed %08x)", s->want_crc,
                    (uint32_t)s->crc);
    return true;
}

/* Produce the .npy prefix of a stream and parse it; the stream is left at the elements, whose
 * extent is checked against the member's size. */
static bool ms_head(MStream *s, NpyHead *h, char *err, size_t errlen) {
    uint8_t first[12];
    size_t n0 = s->usize < 12 ? (size_t)s->usize : 12, hl = 0;
    if (!ms_read(s, first, n0, err, errlen) || !head_len(first, n0, &hl, err, errlen)) return false;
    if (hl > s->usize)
        return fail(err, errlen, "truncated .npy header (%zu bytes declared, %llu present)",
                    hl - (first[6] == 1 ? 10 : 12),
                    (unsigned long long)(s->usize - (first[6] == 1 ? 10 : 12)));
    uint8_t *buf = sup_malloc(hl);
    memcpy(buf, first, n0);
    bool ok = ms_read(s, buf + n0, hl - n0, err, errlen) && parse_head(buf, hl, h, err, errlen);
    free(buf);
    if (ok && s->crc_check && h->nbytes != s->usize - h->data_off)
        return fail(err, errlen,
                    "the directory declares %llu bytes, leaving %llu for elements the header's "
                    "shape needs %zu bytes for",
                    (unsigned long long)s->usize, (unsigned long long)(s->usize - h->data_off),
                    h->nbytes);
    return ok && check_extent(h, s->usize, err, errlen);
}

/* The elements (h->nbytes, after ms_head) into dst, then the end of the member checked. */
static bool ms_elems(MStream *s, const NpyHead *h, uint8_t *dst, char *err, size_t errlen) {
    bool transpose = h->fortran && h->ndim > 1 && h->count > 0;
    uint8_t *raw = dst;
    if (transpose && (raw = malloc(h->nbytes)) == NULL)
        return fail(err, errlen, "out of memory allocating %zu bytes", h->nbytes);
    bool ok = ms_read(s, raw, h->nbytes, err, errlen) && ms_finish(s, err, errlen);
    if (ok) place(dst, raw, h);
    if (raw != dst) free(raw);
    return ok;
}

/* ---- listing an archive ------------------------------------------------------------------- */

static int cmp_offset(const void *a, const void *b) {
    const ZipMember *x = *(const ZipMember *const *)a, *y = *(const ZipMember *const *)b;
    return x->local_off < y->local_off ? -1 : x->local_off > y->local_off;
}

static int cmp_name(const void *a, const void *b) {
    const ZipMember *x = *(const ZipMember *const *)a, *y = *(const ZipMember *const *)b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c != 0) return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

/* The .npy members of the archive b[0..len), checked: directory sane, local headers agree, no
 * two members overlap or share a name, supported methods and plausible sizes. Nothing is
 * inflated. *ms_out is malloc'ed (n_out entries, in directory order). */
static bool list_members(const uint8_t *b, size_t len, ZipMember **ms_out, size_t *n_out, char *err,
                         size_t errlen) {
    uint64_t n_entries = 0, cd_off = 0, cd_size = 0;
    size_t cd_limit = 0;
    *ms_out = NULL;
    *n_out = 0;
    if (!find_directory(b, len, &n_entries, &cd_off, &cd_size, &cd_limit, err, errlen))
        return false;
    /* n_entries <= cd_size / 46 <= len / 46: the arrays below are bounded by the input. */
    size_t n = (size_t)n_entries, n_npy = 0;
    ZipMember *ms = sup_calloc(n ? n : 1, sizeof *ms);
    ZipMember **order = sup_calloc(n ? n : 1, sizeof *order);
    size_t pos = (size_t)cd_off, cd_end = (size_t)(cd_off + cd_size);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        ZipMember m;
        ok = read_member(b, len, &pos, cd_end, &m, err, errlen);
        if (ok && is_npy_member(&m)) ms[n_npy++] = m;
    }
    for (size_t i = 0; i < n_npy && ok; i++) {
        ZipMember *m = &ms[i];
        const char *why = NULL;
        char msg[160];
        if (m->flags & 1u)
            why = "encrypted members are not supported";
        else if (m->method != 0 && m->method != 8)
            snprintf(msg, sizeof msg,
                     "compression method %u is not supported (only stored and deflate)", m->method),
                why = msg;
        else if (memchr(m->name, '\0', m->name_len - 4) != NULL)
            why = "member name contains a NUL byte";
        else if (m->method == 0 && m->csize != m->usize)
            snprintf(msg, sizeof msg, "stored member sizes differ (%llu vs %llu)",
                     (unsigned long long)m->csize, (unsigned long long)m->usize),
                why = msg;
        else if (m->method == 8 &&
                 (m->usize > m->csize * ZIP_MAX_INFLATE_RATIO + 258 || m->usize > SIZE_MAX))
            snprintf(msg, sizeof msg,
                     "declared size %llu is impossible for %llu bytes of deflate data",
                     (unsigned long long)m->usize, (unsigned long long)m->csize),
                why = msg;
        if (why) ok = fail(err, errlen, "member '%.*s': %s", (int)m->name_len, m->name, why);
        order[i] = m;
    }
    /* Members may not overlap: otherwise one compressed run could be inflated many times. */
    if (ok && n_npy > 1) {
        qsort(order, n_npy, sizeof *order, cmp_offset);
        for (size_t i = 1; i < n_npy && ok; i++)
            if (order[i]->local_off < order[i - 1]->end)
                ok = fail(err, errlen, "members '%.*s' and '%.*s' overlap",
                          (int)order[i - 1]->name_len, order[i - 1]->name, (int)order[i]->name_len,
                          order[i]->name);
        qsort(order, n_npy, sizeof *order, cmp_name);
        for (size_t i = 1; i < n_npy && ok; i++)
            if (cmp_name(&order[i - 1], &order[i]) == 0)
                ok = fail(err, errlen, "duplicate member '%.*s'", (int)order[i]->name_len,
                          order[i]->name);
    }
    free(order);
    if (!ok) {
        free(ms);
        return false;
    }
    *ms_out = ms;
    *n_out = n_npy;
    return true;
}

/* Decode member m of archive b into e (name and a new array). */
static bool decode_member(const uint8_t *b, const ZipMember *m, NpzEntry *e, char *err,
                          size_t errlen) {
    MStream s;
    NpyHead h;
    if (!ms_open(&s, b + m->data_off, (size_t)m->csize, m, err, errlen)) return false;
    bool ok = ms_head(&s, &h, err, errlen);
    uint8_t *data = NULL;
    if (ok && (data = data_alloc(h.nbytes)) == NULL)
        ok = fail(err, errlen, "out of memory allocating %zu bytes", h.nbytes);
    ok = ok && ms_elems(&s, &h, data, err, errlen);
    ms_close(&s);
    if (!ok) {
        free(data);
        return false;
    }
    head_to_array(&h, &e->arr);
    e->arr.data = data;
    size_t n = m->name_len - 4;
    e->name = sup_malloc(n + 1);
    memcpy(e->name, m->name, n);
    e->name[n] = '\0';
    return true;
}

bool rt_npz_decode(const void *buf, size_t len, Npz *out, char *err, size_t errlen) {
    const uint8_t *b = buf;
    memset(out, 0, sizeof *out);
    ZipMember *ms;
    size_t n;
    if (!list_members(b, len, &ms, &n, err, errlen)) return false;
    bool ok = true;
    out->items = sup_calloc(n ? n : 1, sizeof *out->items);
    for (size_t i = 0; i < n && ok; i++) {
        char msg[512];
        ok = decode_member(b, &ms[i], &out->items[i], msg, sizeof msg);
        if (ok)
            out->n++;
        else
            ok = fail(err, errlen, "member '%.*s': %s", (int)ms[i].name_len, ms[i].name, msg);
    }
    free(ms);
    if (!ok) rt_npz_free(out);
    return ok;
}

/* ---- lazy reading ----------------------------------------------------------------------- */

struct NpzReader {
    char *path;
    const uint8_t *b; /* the file's bytes: mapped, or read when it cannot be mapped */
    size_t len;
    bool mapped;
    bool single;   /* one .npy file: member 0 is the whole of it */
    ZipMember *ms; /* archive members (not for single) */
    char **names;  /* NUL-terminated, without ".npy" */
    size_t n;
};

bool rt_npz_open(const char *path, bool single, NpzReader **out, char *err, size_t errlen) {
    *out = NULL;
    NpzReader *r = sup_calloc(1, sizeof *r);
    r->single = single;
    r->path = sup_malloc(strlen(path) + 1);
    strcpy(r->path, path);
    char msg[512];
    int fd = strcmp(path, "-") == 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= SIZE_MAX) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            r->b = p;
            r->len = (size_t)st.st_size;
            r->mapped = true;
        }
    }
    if (fd >= 0) close(fd);
    if (!r->mapped) { /* stdin, a pipe, an empty file: read it */
        char *buf;
        if (!sup_read_file(path, &buf, &r->len, err, errlen)) {
            rt_npz_close(r);
            return false;
        }
        r->b = (const uint8_t *)buf;
    }
    bool ok = true;
    if (single) {
        r->n = 1;
        r->names = sup_calloc(1, sizeof *r->names);
        r->names[0] = sup_malloc(1);
        r->names[0][0] = '\0';
    } else if ((ok = list_members(r->b, r->len, &r->ms, &r->n, msg, sizeof msg))) {
        r->names = sup_calloc(r->n ? r->n : 1, sizeof *r->names);
        for (size_t i = 0; i < r->n; i++) {
            size_t k = r->ms[i].name_len - 4;
            r->names[i] = sup_malloc(k + 1);
            memcpy(r->names[i], r->ms[i].name, k);
            r->names[i][k] = '\0';
        }
    }
    if (!ok) {
        fail(err, errlen, "%s: %s", path, msg);
        rt_npz_close(r);
        return false;
    }
    *out = r;
    return true;
}

size_t rt_npz_count(const NpzReader *r) { return r->n; }
const char *rt_npz_name(const NpzReader *r, size_t i) { return r->names[i]; }

static bool reader_stream(NpzReader *r, size_t i, MStream *s, char *err, size_t errlen) {
    RLY_CHECK(i < r->n, "rt_npz: member %zu of %zu", i, r->n);
    bool ok = r->single ? ms_open(s, r->b, r->len, NULL, err, errlen)
                        : ms_open(s, r->b + r->ms[i].data_off, (size_t)r->ms[i].csize, &r->ms[i],
                                  err, errlen);
    s->mapped = r->mapped;
    s->dropped = s->src;
    return ok;
}

/* Prefix an error with the file (and the member). */
static bool reader_fail(const NpzReader *r, size_t i, char *err, size_t errlen, const char *msg) {
    if (r->single) return fail(err, errlen, "%s: %s", r->path, msg);
    return fail(err, errlen, "%s: member '%s': %s", r->path, r->names[i], msg);
}

bool rt_npz_header(NpzReader *r, size_t i, NpyArray *hdr, char *err, size_t errlen) {
    memset(hdr, 0, sizeof *hdr);
    MStream s;
    NpyHead h;
    char msg[512];
    bool ok = reader_stream(r, i, &s, msg, sizeof msg) && ms_head(&s, &h, msg, sizeof msg);
    ms_close(&s);
    if (!ok) return reader_fail(r, i, err, errlen, msg);
    head_to_array(&h, hdr);
    return true;
}

bool rt_npz_read(NpzReader *r, size_t i, void *dst, size_t nbytes, char *err, size_t errlen) {
    MStream s;
    NpyHead h;
    char msg[512];
    bool ok = reader_stream(r, i, &s, msg, sizeof msg) && ms_head(&s, &h, msg, sizeof msg);
    if (ok && h.nbytes != nbytes)
        ok = fail(msg, sizeof msg, "holds %zu bytes of elements, %zu expected", h.nbytes, nbytes);
    ok = ok && ms_elems(&s, &h, dst, msg, sizeof msg);
    ms_close(&s);
    return ok ? true : reader_fail(r, i, err, errlen, msg);
}

void rt_npz_close(NpzReader *r) {
    if (r == NULL) return;
    if (r->mapped)
        munmap((void *)(uintptr_t)r->b, r->len);
    else
        free((void *)(uintptr_t)r->b);
    for (size_t i = 0; r->names && i < r->n; i++)
        free(r->names[i]);
    free(r->names);
    free(r->ms);
    free(r->path);
    free(r);
}

/* Deflate the concatenation of two buffers (an .npy prefix and its elements) into out. */
static void deflate_parts(const uint8_t *a, size_t an, const uint8_t *b, size_t bn, StrBuf *out) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    RLY_CHECK(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) ==
                  Z_OK,
              "zlib deflateInit2 failed");
    uint8_t chunk[65536];
    const uint8_t *src[2] = {a, b};
    size_t left[2] = {an, bn};
    int part = 0, rc = Z_OK;
    while (rc != Z_STREAM_END) {
        while (zs.avail_in == 0 && part < 2) {
            if (left[part] == 0) {
                part++;
                continue;
            }
            zs.next_in = (Bytef *)(uintptr_t)src[part];
            zs.avail_in = left[part] > 0x40000000u ? 0x40000000u : (uInt)left[part];
            src[part] += zs.avail_in;
            left[part] -= zs.avail_in;
        }
        zs.next_out = chunk;
        zs.avail_out = sizeof chunk;
        rc = deflate(&zs, part == 2 ? Z_FINISH : Z_NO_FLUSH);
        RLY_CHECK(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR, "zlib deflate: %d", rc);
        sb_putn(out, (const char *)chunk, sizeof chunk - zs.avail_out);
    }
    deflateEnd(&zs);
}

/* Where an archive goes as it is encoded: appended to a buffer, or written to a file piece by
 * piece (a member's elements go from the array to the file without an intermediate copy). */
typedef struct Sink {
    StrBuf *sb;
    SupOut *out;
    uint64_t pos; /* bytes put so far */
} Sink;

static void sink_put(Sink *k, const void *p, size_t n) {
    if (n == 0) return;
    if (k->sb)
        sb_putn(k->sb, p, n);
    else
        sup_out_write(k->out, p, n);
    k->pos += n;
}

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const NpzEntry *const *)a)->name, (*(const NpzEntry *const *)b)->name);
}

/* What the central directory needs to know about a written member. */
typedef struct ZipWritten {
    uint32_t crc;
    uint64_t csize, usize, off;
} ZipWritten;

static void put_local(StrBuf *sb, const char *name, size_t nlen, uint16_t flags, uint16_t method,
                      const ZipWritten *w, bool zip64) {
    put32(sb, ZIP_LOCAL_SIG);
    put16(sb, zip64 ? 45 : 20);
    put16(sb, flags);
    put16(sb, method);
    put16(sb, 0);
    put16(sb, ZIP_DOS_DATE);
    put32(sb, w->crc);
    put32(sb, zip64 ? 0xffffffffu : (uint32_t)w->csize);
    put32(sb, zip64 ? 0xffffffffu : (uint32_t)w->usize);
    put16(sb, (uint32_t)nlen);
    put16(sb, zip64 ? 20 : 0);
    sb_putn(sb, name, nlen - 4);
    sb_putn(sb, ".npy", 4);
    if (zip64) { /* the local ZIP64 extra holds both sizes */
        put16(sb, 1);
        put16(sb, 16);
        put64(sb, w->usize);
        put64(sb, w->csize);
    }
}

static void put_central(StrBuf *sb, const char *name, size_t nlen, uint16_t flags, uint16_t method,
                        const ZipWritten *w, bool force64) {
    bool big_u = force64 || w->usize >= 0xffffffffu, big_c = force64 || w->csize >= 0xffffffffu,
         big_o = force64 || w->off >= 0xffffffffu;
    uint32_t xlen = 8u * ((unsigned)big_u + (unsigned)big_c + (unsigned)big_o);
    put32(sb, ZIP_CENTRAL_SIG);
    put16(sb, (3u << 8) | 45u); /* made by: Unix, spec 4.5 */
    put16(sb, xlen ? 45 : 20);
    put16(sb, flags);
    put16(sb, method);
    put16(sb, 0);
    put16(sb, ZIP_DOS_DATE);
    put32(sb, w->crc);
    put32(sb, big_c ? 0xffffffffu : (uint32_t)w->csize);
    put32(sb, big_u ? 0xffffffffu : (uint32_t)w->usize);
    put16(sb, (uint32_t)nlen);
    put16(sb, xlen ? xlen + 4 : 0);
    put16(sb, 0);              /* comment */
    put16(sb, 0);              /* disk */
    put16(sb, 0);              /* internal attributes */
    put32(sb, 0100644u << 16); /* external: regular file, rw-r--r-- */
    put32(sb, big_o ? 0xffffffffu : (uint32_t)w->off);
    sb_putn(sb, name, nlen - 4);
    sb_putn(sb, ".npy", 4);
    if (xlen) {
        put16(sb, 1);
        put16(sb, xlen);
        if (big_u) put64(sb, w->usize);
        if (big_c) put64(sb, w->csize);
        if (big_o) put64(sb, w->off);
    }
}

static bool npz_write(const Npz *z, unsigned flags, Sink *k, char *err, size_t errlen) {
    bool compress = (flags & RT_NPZ_COMPRESS) != 0, force64 = (flags & RT_NPZ_ZIP64) != 0;
    char msg[512];
    for (size_t i = 0; i < z->n; i++) {
        const NpzEntry *e = &z->items[i];
        if (e->name == NULL || e->name[0] == '\0')
            return fail(err, errlen, "entry %zu: empty name", i);
        if (strlen(e->name) > 65535 - 4)
            return fail(err, errlen, "entry %zu: name too long for a zip member", i);
        if (!rt_npy_validate(&e->arr, msg, sizeof msg))
            return fail(err, errlen, "entry '%s': %s", e->name, msg);
    }
    if (z->n > 1) {
        const NpzEntry **sorted = sup_calloc(z->n, sizeof *sorted);
        for (size_t i = 0; i < z->n; i++)
            sorted[i] = &z->items[i];
        qsort(sorted, z->n, sizeof *sorted, cmp_entry_name);
        bool dup = false;
        size_t i = 1;
        for (; i < z->n && !dup; i++)
            dup = strcmp(sorted[i - 1]->name, sorted[i]->name) == 0;
        const char *name = dup ? sorted[i - 1]->name : NULL;
        free(sorted);
        if (dup) return fail(err, errlen, "duplicate entry name '%s'", name);
    }

    ZipWritten *ws = sup_calloc(z->n ? z->n : 1, sizeof *ws);
    StrBuf pre = {0}, packed = {0}, rec = {0};
    uint16_t method = compress ? 8 : 0;
    for (size_t i = 0; i < z->n; i++) {
        const NpzEntry *e = &z->items[i];
        pre.len = 0;
        npy_prefix(&e->arr, &pre);
        ZipWritten *w = &ws[i];
        uint32_t crc = crc32_all((const uint8_t *)pre.data, pre.len);
        w->crc = (uint32_t)crc32_combine(crc, crc32_all(e->arr.data, e->arr.nbytes),
                                         (z_off_t)e->arr.nbytes);
        w->usize = pre.len + e->arr.nbytes;
        w->off = k->pos;
        w->csize = w->usize;
        if (compress) {
            packed.len = 0;
            deflate_parts((const uint8_t *)pre.data, pre.len, e->arr.data, e->arr.nbytes, &packed);
            w->csize = packed.len;
        }
        bool zip64 = force64 || w->usize >= 0xffffffffu || w->csize >= 0xffffffffu;
        size_t nlen = strlen(e->name) + 4;
        uint16_t gp = 0;
        for (const char *c = e->name; *c; c++)
            if ((unsigned char)*c >= 0x80) gp = 1u << 11; /* UTF-8 name */
        rec.len = 0;
        put_local(&rec, e->name, nlen, gp, method, w, zip64);
        sink_put(k, rec.data, rec.len);
        if (compress) {
            sink_put(k, packed.data, packed.len);
        } else {
            sink_put(k, pre.data, pre.len);
            sink_put(k, e->arr.data, e->arr.nbytes);
        }
    }
    sb_free(&pre);
    sb_free(&packed);

    uint64_t cd_off = k->pos;
    StrBuf *out = &rec;
    out->len = 0;
    for (size_t i = 0; i < z->n; i++) {
        const char *name = z->items[i].name;
        uint16_t gp = 0;
        for (const char *c = name; *c; c++)
            if ((unsigned char)*c >= 0x80) gp = 1u << 11;
        put_central(out, name, strlen(name) + 4, gp, method, &ws[i], force64);
    }
    free(ws);
    uint64_t cd_size = out->len;
    bool z64 = force64 || z->n >= 0xffff || cd_off >= 0xffffffffu || cd_size >= 0xffffffffu;
    if (z64) {
        uint64_t rec_off = cd_off + out->len;
        put32(out, ZIP64_EOCD_SIG);
        put64(out, ZIP64_EOCD_SIZE - 12); /* size of the rest of this record */
        put16(out, (3u << 8) | 45u);
        put16(out, 45);
        put32(out, 0);
        put32(out, 0);
        put64(out, z->n);
        put64(out, z->n);
        put64(out, cd_size);
        put64(out, cd_off);
        put32(out, ZIP64_LOCATOR_SIG);
        put32(out, 0);
        put64(out, rec_off);
        put32(out, 1);
    }
    put32(out, ZIP_EOCD_SIG);
    put16(out, 0);
    put16(out, 0);
    put16(out, z64 ? 0xffffu : (uint32_t)z->n);
    put16(out, z64 ? 0xffffu : (uint32_t)z->n);
    put32(out, z64 ? 0xffffffffu : (uint32_t)cd_size);
    put32(out, z64 ? 0xffffffffu : (uint32_t)cd_off);
    put16(out, 0);
    sink_put(k, out->data, out->len);
    sb_free(&rec);
    return true;
}

bool rt_npz_encode(const Npz *z, unsigned flags, StrBuf *out, char *err, size_t errlen) {
    Sink k = {.sb = out};
    return npz_write(z, flags, &k, err, errlen);
}

/* Load every member of an opened reader into z. */
static bool load_all(NpzReader *r, Npz *z, char *err, size_t errlen) {
    z->items = sup_calloc(r->n ? r->n : 1, sizeof *z->items);
    for (size_t i = 0; i < r->n; i++) {
        NpyArray a;
        if (!rt_npz_header(r, i, &a, err, errlen)) return false;
        if ((a.data = data_alloc(a.nbytes)) == NULL)
            return reader_fail(r, i, err, errlen, "out of memory");
        if (!rt_npz_read(r, i, a.data, a.nbytes, err, errlen)) {
            free(a.data);
            return false;
        }
        z->items[z->n].arr = a;
        z->items[z->n].name = sup_malloc(strlen(r->names[i]) + 1);
        strcpy(z->items[z->n++].name, r->names[i]);
    }
    return true;
}

bool rt_npz_load(const char *path, Npz *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    NpzReader *r;
    if (!rt_npz_open(path, false, &r, err, errlen)) return false;
    bool ok = load_all(r, out, err, errlen);
    rt_npz_close(r);
    if (!ok) rt_npz_free(out);
    return ok;
}

bool rt_npz_save(const char *path, const Npz *z, bool compress, char *err, size_t errlen) {
    char msg[512];
    SupOut *o = sup_out_open(path, err, errlen);
    if (o == NULL) return false;
    Sink k = {.out = o};
    if (!npz_write(z, compress ? RT_NPZ_COMPRESS : 0, &k, msg, sizeof msg)) {
        sup_out_abort(o);
        return fail(err, errlen, "%s: %s", path, msg);
    }
    return sup_out_commit(o, err, errlen);
}

const NpyArray *rt_npz_find(const Npz *z, const char *name) {
    for (size_t i = 0; i < z->n; i++)
        if (strcmp(z->items[i].name, name) == 0) return &z->items[i].arr;
    return NULL;
}

void rt_npz_free(Npz *z) {
    if (z == NULL) return;
    for (size_t i = 0; i < z->n; i++) {
        free(z->items[i].name);
        rt_npy_free(&z->items[i].arr);
    }
    free(z->items);
    z->items = NULL;
    z->n = 0;
}
