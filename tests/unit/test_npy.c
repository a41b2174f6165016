/* test_npy.c - tests of the .npy/.npz reader and writer (src/runtime/npy.c): round trips of
 * every dtype and shape, stored/deflated/ZIP64 archives, numpy's header variants (versions,
 * byte orders, Fortran order), and hostile inputs that must fail with a message.
 *
 * Standalone: `test_npy` runs the tests and ends with "N passed, N failed". The CLI modes are
 * used by tests/unit/npy_numpy_check.py to check against real numpy:
 *   test_npy --roundtrip [--compress] [--zip64] IN OUT   load IN (.npy/.npz), save OUT
 *   test_npy --gen [--compress] [--zip64] OUT.npz        write the deterministic sample archive
 *   test_npy --expect-error IN                           exit 0 iff loading IN fails */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/npy.h"
#include "support/support.h"

static int n_passed, n_failed;

static void check(bool ok, const char *what, ...) RLY_PRINTF(2, 3);
static void check(bool ok, const char *what, ...) {
    if (ok) {
        n_passed++;
        return;
    }
    n_failed++;
    va_list ap;
    va_start(ap, what);
    fputs("FAIL: ", stdout);
    vprintf(what, ap);
    putchar('\n');
    va_end(ap);
}

/* ---- deterministic contents ----------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void fill_random(NpyArray *a) {
    uint8_t *p = a->data;
    for (size_t i = 0; i < a->nbytes; i++)
        p[i] = (uint8_t)rng();
    if (a->dtype == RLY_DTYPE_BOOL)
        for (size_t i = 0; i < a->nbytes; i++)
            p[i] &= 1;
}

/* The value the sample archive (--gen) holds at flat index i; npy_numpy_check.py computes the
 * same: (i * 7 + 3) % 100, as bool i % 3 == 0, negated for odd i in signed/float types. */
static double sample_value(rly_dtype dt, size_t i) {
    double v = (double)((i * 7 + 3) % 100);
    if (dt == RLY_DTYPE_BOOL) return i % 3 == 0;
    if ((sup_dtype_is_int(dt) || sup_dtype_is_float(dt)) && (i & 1)) v = -v;
    return v;
}

static void store_value(NpyArray *a, size_t i, double v) {
    uint8_t *p = (uint8_t *)a->data + i * sup_dtype_size(a->dtype);
    switch (a->dtype) {
    case RLY_DTYPE_BOOL: *p = v != 0; break;
    case RLY_DTYPE_I8: {
        int8_t x = (int8_t)v;
        memcpy(p, &x, 1);
        break;
    }
    case RLY_DTYPE_I16: {
        int16_t x = (int16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case RLY_DTYPE_I32: {
        int32_t x = (int32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    case RLY_DTYPE_I64: {
        int64_t x = (int64_t)v;
        memcpy(p, &x, 8);
        break;
    }
    case RLY_DTYPE_U8: *p = (uint8_t)v; break;
    case RLY_DTYPE_U16: {
        uint16_t x = (uint16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case RLY_DTYPE_U32: {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    case RLY_DTYPE_U64: {
        uint64_t x = (uint64_t)v;
        memcpy(p, &x, 8);
        break;
    }
    case RLY_DTYPE_F16: {
        uint16_t x = sup_f32_to_f16((float)v);
        memcpy(p, &x, 2);
        break;
    }
    case RLY_DTYPE_F32: {
        float x = (float)v;
        memcpy(p, &x, 4);
        break;
    }
    case RLY_DTYPE_F64: memcpy(p, &v, 8); break;
    case RLY_DTYPE_BF16: {
        uint16_t x = sup_f32_to_bf16((float)v);
        memcpy(p, &x, 2);
        break;
    }
    default: RLY_UNREACHABLE();
    }
}

static bool same_array(const NpyArray *a, const NpyArray *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return false;
    for (uint32_t i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0;
}

static NpyArray make(rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    NpyArray a;
    char err[256];
    bool ok = rt_npy_alloc(&a, dt, ndim, shape, err, sizeof err);
    RLY_CHECK(ok, "rt_npy_alloc: %s", err);
    return a;
}

/* ---- .npy round trips --------------------------------------------------------------------- */

static const struct {
    uint32_t ndim;
    int64_t shape[6];
} shapes[] = {
    {0, {0}},
    {1, {0}},
    {1, {1}},
    {1, {7}},
    {2, {3, 0}},
    {2, {2, 3}},
    {3, {2, 3, 4}},
    {3, {0, 5, 2}},
    {4, {1, 2, 1, 3}},
    {5, {2, 1, 2, 1, 3}},
    {6, {1, 2, 1, 2, 3, 2}},
};

static void test_npy_roundtrip(void) {
    char err[256];
    for (int dt = 0; dt < RLY_DTYPE_COUNT; dt++) {
        for (size_t s = 0; s < RLY_ARRAY_LEN(shapes); s++) {
            NpyArray a = make((rly_dtype)dt, shapes[s].ndim, shapes[s].shape);
            fill_random(&a);
            StrBuf sb = {0};
            rt_npy_encode(&a, &sb);
            size_t hlen = (size_t)(uint8_t)sb.data[8] | ((size_t)(uint8_t)sb.data[9] << 8);
            bool aligned = (10 + hlen) % 64 == 0 && sb.data[10 + hlen - 1] == '\n';
            NpyArray b;
            bool ok = rt_npy_decode(sb.data, sb.len, &b, err, sizeof err);
            check(ok && aligned && same_array(&a, &b) && ((uintptr_t)b.data % RT_NPY_ALIGN) == 0,
                  "npy round trip %s shape #%zu: %s", sup_dtype_name((rly_dtype)dt), s,
                  ok ? "mismatch" : err);
            rt_npy_free(&b);
            rt_npy_free(&a);
            sb_free(&sb);
        }
    }
}

/* Build a .npy image from header text and raw data (version 1.0 unless `major` says). */
static void npy_image(StrBuf *sb, int major, const char *header, const void *data, size_t n) {
    sb->len = 0;
    sb_putn(sb, "\x93NUMPY", 6);
    sb_putc(sb, (char)major);
    sb_putc(sb, 0);
    size_t hl = strlen(header);
    sb_putc(sb, (char)(hl & 0xff));
    sb_putc(sb, (char)(hl >> 8));
    if (major > 1) {
        sb_putc(sb, 0);
        sb_putc(sb, 0);
    }
    sb_puts(sb, header);
    if (n) sb_putn(sb, data, n);
}

static bool decode_ok(StrBuf *sb, NpyArray *out, const char *what) {
    char err[256];
    bool ok = rt_npy_decode(sb->data, sb->len, out, err, sizeof err);
    if (!ok) printf("  (%s: %s)\n", what, err);
    return ok;
}

static void test_npy_variants(void) {
    StrBuf sb = {0};
    NpyArray a;
    /* big-endian int32 and float64 are byte-swapped */
    const uint8_t be[] = {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe};
    npy_image(&sb, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }\n", be, 8);
    bool ok = decode_ok(&sb, &a, "big-endian");
    check(ok && a.dtype == RLY_DTYPE_I32 && ((int32_t *)a.data)[0] == 1 &&
              ((int32_t *)a.data)[1] == -2,
          "big-endian >i4 is byte-swapped");
    rt_npy_free(&a);
    const uint8_t bed[] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0}; /* 1.5 */
    npy_image(&sb, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (), }", bed, 8);
    ok = decode_ok(&sb, &a, "big-endian f8");
    check(ok && a.dtype == RLY_DTYPE_F64 && a.ndim == 0 && ((double *)a.data)[0] == 1.5,
          "big-endian 0-d >f8");
    rt_npy_free(&a);

    /* Fortran order: the 2x3 matrix [[0,1,2],[3,4,5]] is stored column by column */
    const float fo[] = {0, 3, 1, 4, 2, 5};
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", fo, sizeof fo);
    ok = decode_ok(&sb, &a, "fortran");
    bool good = ok && a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3;
    for (int i = 0; good && i < 6; i++)
        good = ((float *)a.data)[i] == (float)i;
    check(good, "fortran_order 2x3 transposed to C order");
    rt_npy_free(&a);
    /* 3-d Fortran, big-endian int16: element (i,j,k) = 100i + 10j + k, shape (2,3,4) */
    uint8_t fo3[2 * 3 * 4 * 2];
    for (int k = 0, n = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++, n++) {
                int v = 100 * i + 10 * j + k;
                fo3[2 * n] = (uint8_t)(v >> 8);
                fo3[2 * n + 1] = (uint8_t)v;
            }
    npy_image(&sb, 1, "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3, 4), }", fo3,
              sizeof fo3);
    ok = decode_ok(&sb, &a, "fortran 3-d");
    good = ok && a.ndim == 3 && a.dtype == RLY_DTYPE_I16;
    for (int i = 0, n = 0; good && i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++, n++)
                good = good && ((int16_t *)a.data)[n] == 100 * i + 10 * j + k;
    check(good, "fortran_order 3-d big-endian transposed and swapped");
    rt_npy_free(&a);
    /* Fortran order with a zero-size dimension and 1-d */
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 0), }", NULL, 0);
    ok = decode_ok(&sb, &a, "fortran empty");
    check(ok && a.nbytes == 0 && a.data != NULL, "fortran_order with a zero dimension");
    rt_npy_free(&a);

    /* versions 2.0 and 3.0; double quotes, other key order, no trailing comma, Python 2 longs */
    const int32_t iv[] = {7, 8, 9};
    npy_image(&sb, 2, "{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"<i4\"}   \n", iv,
              sizeof iv);
    ok = decode_ok(&sb, &a, "v2");
    check(ok && a.shape[0] == 3 && ((int32_t *)a.data)[2] == 9, "version 2.0 header variant");
    rt_npy_free(&a);
    npy_image(&sb, 3, "{'descr':'<u2','fortran_order':False,'shape':(1,3)}",
              "\x01\x00\x02\x00\x03\x00", 6);
    ok = decode_ok(&sb, &a, "v3");
    check(ok && a.dtype == RLY_DTYPE_U16 && a.shape[1] == 3 && ((uint16_t *)a.data)[2] == 3,
          "version 3.0 header");
    rt_npy_free(&a);
    /* '=' and '|' and no byte order */
    npy_image(&sb, 1, "{'descr': '=i2', 'fortran_order': False, 'shape': (1,), }", "\x05\x00", 2);
    ok = decode_ok(&sb, &a, "=i2");
    check(ok && ((int16_t *)a.data)[0] == 5, "'=' byte order");
    rt_npy_free(&a);
    npy_image(&sb, 1, "{'descr': 'f2', 'fortran_order': False, 'shape': (1,), }", "\x00\x3c", 2);
    ok = decode_ok(&sb, &a, "f2");
    check(ok && a.dtype == RLY_DTYPE_F16 && sup_f16_to_f32(((uint16_t *)a.data)[0]) == 1.0f,
          "descr without byte order");
    rt_npy_free(&a);
    /* bool values normalized to 0/1 */
    npy_image(&sb, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", "\x00\x02\xff",
              3);
    ok = decode_ok(&sb, &a, "bool");
    check(ok && memcmp(a.data, "\x00\x01\x01", 3) == 0, "bool normalized to 0/1");
    rt_npy_free(&a);
    /* bfloat16 as 2-byte void, both spellings */
    npy_image(&sb, 1, "{'descr': '|V2', 'fortran_order': False, 'shape': (1,), }", "\x80\x3f", 2);
    ok = decode_ok(&sb, &a, "V2");
    check(ok && a.dtype == RLY_DTYPE_BF16 && sup_bf16_to_f32(((uint16_t *)a.data)[0]) == 1.0f,
          "|V2 read as bfloat16");
    rt_npy_free(&a);
    NpyArray bf = make(RLY_DTYPE_BF16, 0, NULL);
    sb.len = 0;
    rt_npy_encode(&bf, &sb);
    check(strstr(sb.data + 10, "'descr': '<V2'") != NULL, "bfloat16 written as <V2");
    rt_npy_free(&bf);
    sb_free(&sb);
}

/* ---- .npz round trips -------------------------------------------------------------------------
 */

static Npz sample_npz(void) {
    Npz z = {0};
    size_t n = RLY_DTYPE_COUNT + 3;
    z.items = sup_calloc(n, sizeof *z.items);
    for (int dt = 0; dt < RLY_DTYPE_COUNT; dt++) {
        int64_t shape[3] = {2, 3, (dt % 4) + 1};
        uint32_t ndim = (uint32_t)(dt % 4); /* 0-d .. 3-d */
        NpyArray a = make((rly_dtype)dt, ndim, shape);
        size_t count = a.nbytes / sup_dtype_size(a.dtype);
        for (size_t i = 0; i < count; i++)
            store_value(&a, i, sample_value(a.dtype, i));
        char name[64];
        snprintf(name, sizeof name, "%s", sup_dtype_name((rly_dtype)dt));
        z.items[z.n].name = strdup(name);
        z.items[z.n++].arr = a;
    }
    int64_t empty[2] = {0, 4}, big[2] = {300, 257};
    z.items[z.n].name = strdup("empty");
    z.items[z.n++].arr = make(RLY_DTYPE_F32, 2, empty);
    z.items[z.n].name = strdup("dir/weight");
    NpyArray w = make(RLY_DTYPE_F32, 2, big);
    for (size_t i = 0; i < 300 * 257; i++)
        ((float *)w.data)[i] = (float)(i % 1000) * 0.5f;
    z.items[z.n++].arr = w;
    z.items[z.n].name = strdup("caf\xc3\xa9");
    z.items[z.n++].arr = make(RLY_DTYPE_U8, 1, (int64_t[]){5});
    return z;
}

static bool same_npz(const Npz *a, const Npz *b) {
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->items[i].name, b->items[i].name) != 0 ||
            !same_array(&a->items[i].arr, &b->items[i].arr))
            return false;
    return true;
}

static void test_npz_roundtrip(void) {
    Npz z = sample_npz();
    char err[256];
    size_t sizes[4];
    for (unsigned flags = 0; flags < 4; flags++) {
        StrBuf sb = {0};
        bool ok = rt_npz_encode(&z, flags, &sb, err, sizeof err);
        Npz back;
        ok = ok && rt_npz_decode(sb.data, sb.len, &back, err, sizeof err);
        check(ok && same_npz(&z, &back), "npz round trip flags %u: %s", flags,
              ok ? "mismatch" : err);
        const NpyArray *w = ok ? rt_npz_find(&back, "dir/weight") : NULL;
        check(w != NULL && w->shape[1] == 257 && rt_npz_find(&back, "nope") == NULL,
              "rt_npz_find flags %u", flags);
        sizes[flags] = sb.len;
        rt_npz_free(&back);
        sb_free(&sb);
    }
    check(sizes[1] < sizes[0] / 2, "deflate shrinks the sample (%zu vs %zu)", sizes[1], sizes[0]);
    /* deterministic output */
    StrBuf s1 = {0}, s2 = {0};
    rt_npz_encode(&z, RT_NPZ_COMPRESS, &s1, err, sizeof err);
    rt_npz_encode(&z, RT_NPZ_COMPRESS, &s2, err, sizeof err);
    check(s1.len == s2.len && memcmp(s1.data, s2.data, s1.len) == 0, "npz output deterministic");
    sb_free(&s1);
    sb_free(&s2);
    /* an empty archive */
    Npz empty = {0}, back;
    StrBuf sb = {0};
    bool ok = rt_npz_encode(&empty, 0, &sb, err, sizeof err) &&
              rt_npz_decode(sb.data, sb.len, &back, err, sizeof err);
    check(ok && back.n == 0 && sb.len == 22, "empty npz");
    rt_npz_free(&back);
    sb_free(&sb);
    rt_npz_free(&z);
}

/* ---- files ------------------------------------------------------------------------------------
 */

static char tmpdir[256];

static void test_files(void) {
    char path[512], err[256];
    int64_t shape[2] = {4, 5};
    NpyArray a = make(RLY_DTYPE_F64, 2, shape), b;
    fill_random(&a);
    snprintf(path, sizeof path, "%s/a.npy", tmpdir);
    bool ok = rt_npy_save(path, &a, err, sizeof err) && rt_npy_load(path, &b, err, sizeof err);
    check(ok && same_array(&a, &b), "npy save/load: %s", ok ? "mismatch" : err);
    rt_npy_free(&b);
    Npz z = sample_npz(), back;
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s/z%d.npz", tmpdir, c);
        ok = rt_npz_save(path, &z, c == 1, err, sizeof err) &&
             rt_npz_load(path, &back, err, sizeof err);
        check(ok && same_npz(&z, &back), "npz save/load compress=%d: %s", c, ok ? "mismatch" : err);
        rt_npz_free(&back);
    }
    snprintf(path, sizeof path, "%s/missing.npy", tmpdir);
    ok = rt_npy_load(path, &b, err, sizeof err);
    check(!ok && strstr(err, "missing.npy") != NULL, "missing file names the path: %s", err);
    snprintf(path, sizeof path, "%s/no/such/dir/x.npz", tmpdir);
    ok = rt_npz_save(path, &z, false, err, sizeof err);
    check(!ok && err[0] != '\0', "save into a missing directory fails: %s", err);
    /* invalid arrays are refused by save */
    snprintf(path, sizeof path, "%s/bad.npy", tmpdir);
    NpyArray bad = a;
    bad.nbytes--;
    ok = rt_npy_save(path, &bad, err, sizeof err);
    check(!ok && strstr(err, "nbytes") != NULL, "save refuses inconsistent nbytes: %s", err);
    bad = a;
    bad.ndim = RT_NPY_MAX_DIMS + 1;
    check(!rt_npy_save(path, &bad, err, sizeof err), "save refuses too many dims: %s", err);
    check(access(path, F_OK) != 0, "failed save leaves no file");
    rt_npy_free(&a);
    /* duplicate and empty names are refused by encode */
    free(z.items[1].name);
    z.items[1].name = strdup(z.items[0].name);
    StrBuf sb = {0};
    ok = rt_npz_encode(&z, 0, &sb, err, sizeof err);
    check(!ok && strstr(err, "duplicate") != NULL, "encode refuses duplicate names: %s", err);
    z.items[1].name[0] = '\0';
    sb.len = 0;
    ok = rt_npz_encode(&z, 0, &sb, err, sizeof err);
    check(!ok && strstr(err, "empty name") != NULL, "encode refuses empty names: %s", err);
    sb_free(&sb);
    rt_npz_free(&z);
    NpyArray c;
    ok =
        rt_npy_alloc(&c, RLY_DTYPE_I64, 3, (int64_t[]){1 << 30, 1 << 30, 1 << 30}, err, sizeof err);
    check(!ok, "rt_npy_alloc refuses an impossible size: %s", err);
}

/* ---- hostile inputs ----------------------------------------------------------------------------
 */

static void expect_npy_error(StrBuf *sb, const char *what, const char *needle) {
    NpyArray a;
    char err[256] = "";
    bool ok = rt_npy_decode(sb->data, sb->len, &a, err, sizeof err);
    check(!ok && err[0] != '\0' && (needle == NULL || strstr(err, needle) != NULL) &&
              a.data == NULL,
          "hostile npy (%s) must fail mentioning '%s'; got %s: %s", what, needle ? needle : "",
          ok ? "success" : "error", err);
    if (ok) rt_npy_free(&a);
    if (getenv("TEST_NPY_VERBOSE")) printf("  npy %-40s -> %s\n", what, err);
}

static void expect_npz_error(const void *buf, size_t len, const char *what, const char *needle) {
    Npz z;
    char err[256] = "";
    bool ok = rt_npz_decode(buf, len, &z, err, sizeof err);
    check(!ok && err[0] != '\0' && (needle == NULL || strstr(err, needle) != NULL) && z.n == 0 &&
              z.items == NULL,
          "hostile npz (%s) must fail mentioning '%s'; got %s: %s", what, needle ? needle : "",
          ok ? "success" : "error", err);
    if (ok) rt_npz_free(&z);
    if (getenv("TEST_NPY_VERBOSE")) printf("  npz %-40s -> %s\n", what, err);
}

static void test_hostile_npy(void) {
    StrBuf sb = {0};
    const char *f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    const float two[2] = {1, 2};
    expect_npy_error(&sb, "empty", "magic");
    sb_puts(&sb, "PK\x03\x04 not an npy file at all");
    expect_npy_error(&sb, "bad magic", "magic");
    npy_image(&sb, 4, f4, two, 8);
    expect_npy_error(&sb, "version 4.0", "version");
    npy_image(&sb, 1, f4, two, 8);
    sb.data[8] = (char)0xff; /* header length past the end */
    sb.data[9] = (char)0x7f;
    expect_npy_error(&sb, "header length past the end", "truncated");
    npy_image(&sb, 2, f4, two, 8);
    sb.data[8] = sb.data[9] = sb.data[10] = sb.data[11] = (char)0xff;
    expect_npy_error(&sb, "v2 header length 4 GiB", "too long");
    npy_image(&sb, 1, f4, two, 8);
    sb.len = 9;
    expect_npy_error(&sb, "truncated before header length", "truncated");
    npy_image(&sb, 1, f4, two, 7);
    expect_npy_error(&sb, "data one byte short", "truncated");
    npy_image(&sb, 1, f4, two, 8);
    sb_putc(&sb, 0);
    expect_npy_error(&sb, "trailing byte", "trailing");
    npy_image(&sb, 1, "{'descr': '<f4', 'shape': (2,), }", two, 8);
    expect_npy_error(&sb, "missing key", "fortran_order");
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two, 8);
    expect_npy_error(&sb, "unknown key", "unexpected key");
    npy_image(&sb, 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
              two, 8);
    expect_npy_error(&sb, "duplicate key", "twice");
    npy_image(&sb, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", two, 8);
    expect_npy_error(&sb, "complex dtype", "unsupported dtype");
    npy_image(&sb, 1, "{'descr': '|V4', 'fortran_order': False, 'shape': (2,), }", two, 8);
    expect_npy_error(&sb, "void of 4 bytes", "unsupported dtype");
    npy_image(&sb, 1, "{'descr': '<U1', 'fortran_order': False, 'shape': (2,), }", two, 8);
    expect_npy_error(&sb, "unicode string", "unsupported dtype");
    npy_image(&sb, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", two, 8);
    expect_npy_error(&sb, "structured", "structured");
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two, 8);
    expect_npy_error(&sb, "negative dim", "negative");
    npy_image(&sb, 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 8), }",
              two, 8);
    expect_npy_error(&sb, "shape product overflows int64", "too large");
    npy_image(&sb, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }", two,
              8);
    expect_npy_error(&sb, "1 Ti elements in 8 bytes", "truncated");
    npy_image(&sb, 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", two,
              8);
    expect_npy_error(&sb, "dim past int64", "too large");
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", two, 8);
    expect_npy_error(&sb, "fortran_order not a bool", "True or False");
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", two, 8);
    expect_npy_error(&sb, "shape not a tuple", "tuple");
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", two, 8);
    expect_npy_error(&sb, "shape a list", "tuple");
    npy_image(&sb, 1, "{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", two, 8);
    expect_npy_error(&sb, "unbalanced quote", "bad .npy header");
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", two, 8);
    expect_npy_error(&sb, "unterminated dict", "bad .npy header");
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", two, 8);
    expect_npy_error(&sb, "text after the dict", "after the dict");
    StrBuf h = {0};
    sb_puts(&h, "{'descr': '|u1', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < RT_NPY_MAX_DIMS + 1; i++)
        sb_puts(&h, "1,");
    sb_puts(&h, "), }");
    npy_image(&sb, 1, h.data, "x", 1);
    expect_npy_error(&sb, "33 dimensions", "dimensions");
    sb_free(&h);
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two, 8);
    sb.data[10] = '\0'; /* a NUL in the header */
    expect_npy_error(&sb, "NUL in header", "bad .npy header");
    npy_image(&sb, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two, 8);
    sb.data[10 + 11] = '\0'; /* a NUL inside the descr string */
    expect_npy_error(&sb, "NUL in descr", "control byte");

    /* every truncation of a valid file fails cleanly */
    int64_t shape[2] = {3, 4};
    NpyArray a = make(RLY_DTYPE_I16, 2, shape);
    fill_random(&a);
    StrBuf full = {0};
    rt_npy_encode(&a, &full);
    rt_npy_free(&a);
    int wrong = 0;
    for (size_t n = 0; n < full.len; n++) {
        NpyArray b;
        char err[256] = "";
        if (rt_npy_decode(full.data, n, &b, err, sizeof err) || err[0] == '\0') wrong++;
    }
    check(wrong == 0, "all %zu truncations of a .npy fail with a message (%d did not)", full.len,
          wrong);
    /* flipping any byte never crashes (success or a message) */
    wrong = 0;
    for (size_t i = 0; i < full.len; i++)
        for (int bit = 0; bit < 8; bit++) {
            full.data[i] ^= (char)(1 << bit);
            NpyArray b;
            char err[256] = "";
            if (rt_npy_decode(full.data, full.len, &b, err, sizeof err))
                rt_npy_free(&b);
            else if (err[0] == '\0')
                wrong++;
            full.data[i] ^= (char)(1 << bit);
        }
    check(wrong == 0, "bit flips of a .npy give success or a message");
    sb_free(&full);
    sb_free(&sb);
}

/* A hand-built zip, for members our writer would never produce. */
typedef struct RawMember {
    const char *name;
    const void *data; /* as stored in the archive */
    size_t len;
    uint16_t method, flags;
    uint32_t crc;
    uint32_t usize;
} RawMember;

static RawMember stored(const char *name, const StrBuf *npy) {
    return (RawMember){name,
                       npy->data,
                       npy->len,
                       0,
                       0,
                       (uint32_t)crc32(0, (const Bytef *)npy->data, (uInt)npy->len),
                       (uint32_t)npy->len};
}

static void w16(StrBuf *sb, unsigned v) {
    sb_putc(sb, (char)(v & 0xff));
    sb_putc(sb, (char)((v >> 8) & 0xff));
}
static void w32(StrBuf *sb, uint32_t v) {
    w16(sb, v & 0xffff);
    w16(sb, v >> 16);
}

static void raw_zip(StrBuf *out, const RawMember *ms, size_t n) {
    uint32_t offs[16];
    out->len = 0;
    for (size_t i = 0; i < n; i++) {
        offs[i] = (uint32_t)out->len;
        w32(out, 0x04034b50);
        w16(out, 20);
        w16(out, ms[i].flags);
        w16(out, ms[i].method);
        w16(out, 0);
        w16(out, 0x21);
        w32(out, ms[i].crc);
        w32(out, (uint32_t)ms[i].len);
        w32(out, ms[i].usize);
        w16(out, (unsigned)strlen(ms[i].name));
        w16(out, 0);
        sb_puts(out, ms[i].name);
        sb_putn(out, ms[i].data, ms[i].len);
    }
    uint32_t cd = (uint32_t)out->len;
    for (size_t i = 0; i < n; i++) {
        w32(out, 0x02014b50);
        w16(out, 20);
        w16(out, 20);
        w16(out, ms[i].flags);
        w16(out, ms[i].method);
        w16(out, 0);
        w16(out, 0x21);
        w32(out, ms[i].crc);
        w32(out, (uint32_t)ms[i].len);
        w32(out, ms[i].usize);
        w16(out, (unsigned)strlen(ms[i].name));
        w16(out, 0);
        w16(out, 0);
        w16(out, 0);
        w16(out, 0);
        w32(out, 0);
        w32(out, offs[i]);
        sb_puts(out, ms[i].name);
    }
    uint32_t cd_size = (uint32_t)out->len - cd;
    w32(out, 0x06054b50);
    w16(out, 0);
    w16(out, 0);
    w16(out, (unsigned)n);
    w16(out, (unsigned)n);
    w32(out, cd_size);
    w32(out, cd);
    w16(out, 0);
}

static void put_le32(char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}
static uint32_t get_le32(const char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)(uint8_t)p[i] << (8 * i);
    return v;
}

static void test_hostile_npz(void) {
    char err[256];
    int64_t shape[1] = {10};
    NpyArray a = make(RLY_DTYPE_I32, 1, shape);
    for (int i = 0; i < 10; i++)
        ((int32_t *)a.data)[i] = i;
    StrBuf npy = {0}, zip = {0};
    rt_npy_encode(&a, &npy);

    /* non-.npy members and directories are skipped */
    RawMember ms[4] = {stored("x.npy", &npy),
                       {"notes.txt", "hello", 5, 0, 0, 0x3610a686u, 5},
                       {"dir/", "", 0, 0, 0, 0, 0},
                       stored("dir/y.npy", &npy)};
    raw_zip(&zip, ms, 4);
    Npz z;
    bool ok = rt_npz_decode(zip.data, zip.len, &z, err, sizeof err);
    check(ok && z.n == 2 && strcmp(z.items[1].name, "dir/y") == 0 &&
              same_array(&z.items[0].arr, &a),
          "non-.npy members skipped: %s", ok ? "wrong content" : err);
    rt_npz_free(&z);
    /* a non-.npy member with an unsupported method is still just skipped */
    ms[1].method = 12;
    raw_zip(&zip, ms, 2);
    ok = rt_npz_decode(zip.data, zip.len, &z, err, sizeof err);
    check(ok && z.n == 1, "skipped member's method is ignored: %s", ok ? "" : err);
    rt_npz_free(&z);

    expect_npz_error("", 0, "empty", "too short");
    expect_npz_error("this is not a zip file, just 40 bytes....", 40, "no EOCD", "end of central");
    ms[0] = stored("x.npy", &npy);
    ms[1] = stored("x.npy", &npy);
    raw_zip(&zip, ms, 2);
    expect_npz_error(zip.data, zip.len, "duplicate names", "duplicate");
    ms[0].crc ^= 1;
    raw_zip(&zip, ms, 1);
    expect_npz_error(zip.data, zip.len, "bad CRC", "CRC-32");
    ms[0] = stored("x.npy", &npy);
    ms[0].method = 12;
    raw_zip(&zip, ms, 1);
    expect_npz_error(zip.data, zip.len, "bzip2 member", "method 12");
    ms[0] = stored("x.npy", &npy);
    ms[0].flags = 1;
    raw_zip(&zip, ms, 1);
    expect_npz_error(zip.data, zip.len, "encrypted", "encrypted");
    ms[0] = stored("x.npy", &npy);
    ms[0].usize = (uint32_t)npy.len + 1;
    raw_zip(&zip, ms, 1);
    expect_npz_error(zip.data, zip.len, "stored sizes differ", "sizes differ");
    ms[0] = stored("x.npz.txt", &npy);
    char bad_npy[] = "\x93NUMPY\x01\x00\x02\x00{}";
    ms[1] = stored("bad.npy", &(StrBuf){bad_npy, 12, 0});
    raw_zip(&zip, ms, 2);
    expect_npz_error(zip.data, zip.len, "member is a bad npy", "member 'bad.npy'");

    /* deflated members: a claimed size no deflate stream can reach, corrupt and short streams */
    StrBuf def = {0};
    {
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
        char outb[4096];
        zs.next_in = (Bytef *)npy.data;
        zs.avail_in = (uInt)npy.len;
        zs.next_out = (Bytef *)outb;
        zs.avail_out = sizeof outb;
        deflate(&zs, Z_FINISH);
        sb_putn(&def, outb, sizeof outb - zs.avail_out);
        deflateEnd(&zs);
    }
    RawMember dm = {"d.npy",
                    def.data,
                    def.len,
                    8,
                    0,
                    (uint32_t)crc32(0, (const Bytef *)npy.data, (uInt)npy.len),
                    (uint32_t)npy.len};
    raw_zip(&zip, &dm, 1);
    ok = rt_npz_decode(zip.data, zip.len, &z, err, sizeof err);
    check(ok && z.n == 1 && same_array(&z.items[0].arr, &a), "hand-made deflated member: %s",
          ok ? "mismatch" : err);
    rt_npz_free(&z);
    RawMember bomb = dm;
    bomb.usize = 0xfffffff0u;
    raw_zip(&zip, &bomb, 1);
    expect_npz_error(zip.data, zip.len, "deflate bomb claim", "impossible");
    bomb = dm;
    bomb.usize = dm.usize - 1;
    raw_zip(&zip, &bomb, 1);
    expect_npz_error(zip.data, zip.len, "inflates past its declared size", "declares");
    bomb = dm;
    bomb.usize = dm.usize + 1;
    raw_zip(&zip, &bomb, 1);
    expect_npz_error(zip.data, zip.len, "inflates short of its declared size", "declares");
    bomb = dm;
    bomb.len = dm.len / 2;
    raw_zip(&zip, &bomb, 1);
    expect_npz_error(zip.data, zip.len, "truncated deflate stream", "truncated");
    StrBuf junk = {0};
    sb_putn(&junk, def.data, def.len);
    junk.data[0] = (char)0xff; /* reserved block type 3 */
    bomb = dm;
    bomb.data = junk.data;
    raw_zip(&zip, &bomb, 1);
    expect_npz_error(zip.data, zip.len, "corrupt deflate stream", "deflate");
    sb_free(&junk);

    /* patches of a valid archive written by rt_npz_encode */
    char name_x[] = "x", name_y[] = "y";
    Npz one = {&(NpzEntry){name_x, a}, 1};
    StrBuf good = {0};
    rt_npz_encode(&one, 0, &good, err, sizeof err);
    size_t eocd = good.len - 22, cd = get_le32(good.data + eocd + 16);
    StrBuf t = {0};
#define PATCH() (t.len = 0, sb_putn(&t, good.data, good.len), t.data)
    put_le32(PATCH() + eocd + 16, 0x7ffffff0u);
    expect_npz_error(t.data, t.len, "directory offset past the end", "outside");
    put_le32(PATCH() + eocd + 12, 0xfffffff0u);
    expect_npz_error(t.data, t.len, "directory size past the end", "outside");
    char *p = PATCH();
    p[eocd + 8] = p[eocd + 10] = (char)0xfe;
    p[eocd + 9] = p[eocd + 11] = 0x7f;
    expect_npz_error(t.data, t.len, "entry count larger than the directory", "too small");
    PATCH()[cd] = 'X';
    expect_npz_error(t.data, t.len, "bad central signature", "central directory entry");
    put_le32(PATCH() + cd + 42, 0x40000000u);
    expect_npz_error(t.data, t.len, "local header offset past the end", "local header");
    put_le32(PATCH() + cd + 20, 0x40000000u);
    expect_npz_error(t.data, t.len, "compressed size past the end", "past the end");
    put_le32(PATCH() + cd + 24, 0xffffffffu);
    expect_npz_error(t.data, t.len, "saturated size without ZIP64 extra", "ZIP64");
    p = PATCH();
    p[eocd + 10] = p[eocd + 8] = (char)0xff;
    p[eocd + 11] = p[eocd + 9] = (char)0xff;
    expect_npz_error(t.data, t.len, "saturated EOCD without ZIP64 record", "ZIP64");
    PATCH()[30] = 'y'; /* local header name differs from the directory's */
    expect_npz_error(t.data, t.len, "local name mismatch", "different file");
    p = PATCH();
    p[eocd + 4] = 1;
    expect_npz_error(t.data, t.len, "multi-disk", "multi-disk");
    /* Overlap: member a.npy's data holds a complete local header and data of b.npy, and the
     * directory entry of b.npy points inside a.npy. Every header is consistent, so only the
     * overlap check can refuse it (one compressed run must not be inflated twice). */
    StrBuf inner = {0};
    w32(&inner, 0x04034b50);
    w16(&inner, 20);
    w16(&inner, 0);
    w16(&inner, 0);
    w16(&inner, 0);
    w16(&inner, 0x21);
    w32(&inner, ms[0].crc);
    w32(&inner, (uint32_t)npy.len);
    w32(&inner, (uint32_t)npy.len);
    w16(&inner, 5);
    w16(&inner, 0);
    sb_puts(&inner, "b.npy");
    sb_putn(&inner, npy.data, npy.len);
    ms[0] = stored("a.npy", &inner);
    ms[1] = stored("b.npy", &npy);
    raw_zip(&zip, ms, 2);
    size_t cd2 = get_le32(zip.data + zip.len - 22 + 16);
    put_le32(zip.data + cd2 + 46 + 5 + 42, 30 + 5); /* b.npy's entry -> inside a.npy's data */
    expect_npz_error(zip.data, zip.len, "overlapping members", "overlap");
    sb_free(&inner);

    /* ZIP64 archives: a corrupt locator */
    StrBuf z64 = {0};
    rt_npz_encode(&one, RT_NPZ_ZIP64, &z64, err, sizeof err);
    ok = rt_npz_decode(z64.data, z64.len, &z, err, sizeof err);
    check(ok && z.n == 1 && same_array(&z.items[0].arr, &a), "zip64 archive: %s", ok ? "" : err);
    rt_npz_free(&z);
    size_t loc = z64.len - 22 - 20;
    put_le32(z64.data + loc + 8, 0x7fff0000u);
    expect_npz_error(z64.data, z64.len, "zip64 locator past the end", "locator");
    sb_free(&z64);

    /* every truncation fails; every bit flip fails cleanly or succeeds */
    for (int c = 0; c < 2; c++) {
        Npz two = {(NpzEntry[]){{name_x, a}, {name_y, a}}, 2};
        StrBuf full = {0};
        rt_npz_encode(&two, c ? RT_NPZ_COMPRESS | RT_NPZ_ZIP64 : 0, &full, err, sizeof err);
        int wrong = 0;
        for (size_t n = 0; n < full.len; n++) {
            Npz b;
            err[0] = '\0';
            if (rt_npz_decode(full.data, n, &b, err, sizeof err) || err[0] == '\0') wrong++;
        }
        check(wrong == 0, "all truncations of an npz (compress %d) fail (%d did not)", c, wrong);
        wrong = 0;
        for (size_t i = 0; i < full.len; i++)
            for (int bit = 0; bit < 8; bit++) {
                full.data[i] ^= (char)(1 << bit);
                Npz b;
                err[0] = '\0';
                if (rt_npz_decode(full.data, full.len, &b, err, sizeof err))
                    rt_npz_free(&b);
                else if (err[0] == '\0')
                    wrong++;
                full.data[i] ^= (char)(1 << bit);
            }
        check(wrong == 0, "bit flips of an npz (compress %d) give success or a message", c);
        sb_free(&full);
    }
#undef PATCH
    sb_free(&t);
    sb_free(&good);
    sb_free(&def);
    sb_free(&zip);
    sb_free(&npy);
    rt_npy_free(&a);
}

/* ---- CLI modes for npy_numpy_check.py ----------------------------------------------------------
 */

/* ---- lazy reading (NpzReader) ------------------------------------------------------------ */

/* Deflate (raw, level 9) `n` bytes into out. */
static void deflate_raw(const void *src, size_t n, StrBuf *out) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    uLong bound = deflateBound(&zs, (uLong)n);
    char *buf = malloc(bound);
    zs.next_in = (Bytef *)(uintptr_t)src;
    zs.avail_in = (uInt)n;
    zs.next_out = (Bytef *)buf;
    zs.avail_out = (uInt)bound;
    deflate(&zs, Z_FINISH);
    sb_putn(out, buf, bound - zs.avail_out);
    deflateEnd(&zs);
    free(buf);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

/* An archive whose unused members are poison (a bad CRC; a deflate stream cut off after its
 * first half, which only a whole decode notices): listing it, reading a header and reading the
 * wanted member must touch neither. */
static void test_lazy_reader(void) {
    char path[512], err[512];
    int64_t shape[2] = {3, 7};
    NpyArray a = make(RLY_DTYPE_F32, 2, shape);
    fill_random(&a);
    StrBuf npy = {0}, def = {0}, zip = {0}, bombnpy = {0}, bombdef = {0};
    rt_npy_encode(&a, &npy);
    deflate_raw(npy.data, npy.len, &def);
    int64_t bshape[1] = {16384};
    NpyArray b = make(RLY_DTYPE_F32, 1, bshape);
    fill_random(&b); /* incompressible: half the stream is half the data */
    size_t big = b.nbytes;
    rt_npy_encode(&b, &bombnpy);
    rt_npy_free(&b);
    deflate_raw(bombnpy.data, bombnpy.len, &bombdef);
    uint32_t bomb_crc = (uint32_t)crc32(0, (const Bytef *)bombnpy.data, (uInt)bombnpy.len);
    bombdef.len /= 2;
    RawMember ms[3] = {
        {"w.npy", def.data, def.len, 8, 0,
         (uint32_t)crc32(0, (const Bytef *)npy.data, (uInt)npy.len), (uint32_t)npy.len},
        stored("poison.npy", &npy),
        {"bomb.npy", bombdef.data, bombdef.len, 8, 0, bomb_crc, (uint32_t)bombnpy.len},
    };
    ms[1].crc ^= 1;
    sb_free(&bombnpy);
    raw_zip(&zip, ms, 3);
    snprintf(path, sizeof path, "%s/lazy.npz", tmpdir);
    write_bytes(path, zip.data, zip.len);
    NpzReader *r = NULL;
    bool ok = rt_npz_open(path, false, &r, err, sizeof err);
    check(ok && rt_npz_count(r) == 3 && strcmp(rt_npz_name(r, 0), "w") == 0 &&
              strcmp(rt_npz_name(r, 2), "bomb") == 0,
          "lazy open lists three members: %s", ok ? "wrong listing" : err);
    if (ok) {
        NpyArray h;
        ok = rt_npz_header(r, 2, &h, err, sizeof err);
        check(ok && h.nbytes == big && h.data == NULL && h.shape[0] == bshape[0],
              "the cut member's header alone: %s", ok ? "wrong header" : err);
        void *whole = malloc(big);
        ok = rt_npz_read(r, 2, whole, big, err, sizeof err);
        check(!ok && strstr(err, "truncated") != NULL, "the cut member fails when read: %s", err);
        free(whole);
        ok = rt_npz_header(r, 0, &h, err, sizeof err);
        check(ok && h.dtype == RLY_DTYPE_F32 && h.ndim == 2 && h.nbytes == a.nbytes,
              "header of the wanted member: %s", ok ? "wrong header" : err);
        void *dst = malloc(a.nbytes);
        ok = rt_npz_read(r, 0, dst, a.nbytes, err, sizeof err);
        check(ok && memcmp(dst, a.data, a.nbytes) == 0, "read straight into caller memory: %s",
              ok ? "mismatch" : err);
        ok = rt_npz_read(r, 0, dst, a.nbytes - 4, err, sizeof err);
        check(!ok && strstr(err, "expected") != NULL, "a wrong destination size is refused: %s",
              err);
        ok = rt_npz_read(r, 1, dst, a.nbytes, err, sizeof err);
        check(!ok && strstr(err, "CRC-32") != NULL && strstr(err, "poison") != NULL,
              "the poisoned member fails only when read, naming it: %s", err);
        free(dst);
        rt_npz_close(r);
    }
    /* a single .npy through the reader, and a truncated one */
    snprintf(path, sizeof path, "%s/lazy.npy", tmpdir);
    write_bytes(path, npy.data, npy.len);
    ok = rt_npz_open(path, true, &r, err, sizeof err);
    if (ok) {
        NpyArray h;
        void *dst = malloc(a.nbytes);
        ok = rt_npz_header(r, 0, &h, err, sizeof err) &&
             rt_npz_read(r, 0, dst, h.nbytes, err, sizeof err);
        check(ok && memcmp(dst, a.data, a.nbytes) == 0, "single .npy read: %s",
              ok ? "mismatch" : err);
        free(dst);
        rt_npz_close(r);
    }
    write_bytes(path, npy.data, npy.len - 1);
    ok = rt_npz_open(path, true, &r, err, sizeof err);
    if (ok) {
        NpyArray h;
        ok = rt_npz_header(r, 0, &h, err, sizeof err);
        check(!ok && strstr(err, "truncated") != NULL && strstr(err, "lazy.npy") != NULL,
              "truncated single .npy names the file: %s", err);
        rt_npz_close(r);
    }
    snprintf(path, sizeof path, "%s/none.npz", tmpdir);
    check(!rt_npz_open(path, false, &r, err, sizeof err) && strstr(err, "none.npz") != NULL,
          "missing archive names the path: %s", err);
    sb_free(&npy);
    sb_free(&def);
    sb_free(&bombdef);
    sb_free(&zip);
    rt_npy_free(&a);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int cli(int argc, char **argv) {
    unsigned flags = 0;
    int i = 2;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--compress") == 0)
            flags |= RT_NPZ_COMPRESS;
        else if (strcmp(argv[i], "--zip64") == 0)
            flags |= RT_NPZ_ZIP64;
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    char err[512];
    const char *mode = argv[1];
    if (strcmp(mode, "--gen") == 0 && i + 1 == argc) {
        Npz z = sample_npz();
        StrBuf sb = {0};
        bool ok = rt_npz_encode(&z, flags, &sb, err, sizeof err) &&
                  sup_write_file_atomic(argv[i], sb.data, sb.len, err, sizeof err);
        sb_free(&sb);
        rt_npz_free(&z);
        if (!ok) fprintf(stderr, "%s\n", err);
        return ok ? 0 : 1;
    }
    if (strcmp(mode, "--expect-error") == 0 && i + 1 == argc) {
        Npz z;
        NpyArray a;
        bool ok = ends_with(argv[i], ".npz") ? rt_npz_load(argv[i], &z, err, sizeof err)
                                             : rt_npy_load(argv[i], &a, err, sizeof err);
        if (ok) {
            fprintf(stderr, "%s: loaded, but an error was expected\n", argv[i]);
            return 1;
        }
        printf("%s\n", err);
        return 0;
    }
    if (strcmp(mode, "--roundtrip") == 0 && i + 2 == argc) {
        const char *in = argv[i], *out = argv[i + 1];
        bool ok;
        if (ends_with(in, ".npz")) {
            Npz z;
            ok = rt_npz_load(in, &z, err, sizeof err);
            if (ok) {
                StrBuf sb = {0};
                ok = rt_npz_encode(&z, flags, &sb, err, sizeof err) &&
                     sup_write_file_atomic(out, sb.data, sb.len, err, sizeof err);
                sb_free(&sb);
                rt_npz_free(&z);
            }
        } else {
            NpyArray a;
            ok = rt_npy_load(in, &a, err, sizeof err) && rt_npy_save(out, &a, err, sizeof err);
            rt_npy_free(&a);
        }
        if (!ok) fprintf(stderr, "%s\n", err);
        return ok ? 0 : 1;
    }
    fprintf(stderr,
            "usage: test_npy [--roundtrip [--compress] [--zip64] IN OUT | --gen [--compress] "
            "[--zip64] OUT.npz | --expect-error IN]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc > 1) return cli(argc, argv);
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_npy.XXXXXX", base && *base ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_npy_roundtrip();
    test_npy_variants();
    test_npz_roundtrip();
    test_files();
    test_hostile_npy();
    test_hostile_npz();
    test_lazy_reader();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
