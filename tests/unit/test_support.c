/* test_support.c - unit tests of the support layer: arena, string buffer, maps, interning,
 * diagnostics (line/col and rendering), dtypes and half-precision conversions, data buffers. */
#define _XOPEN_SOURCE 700 /* symlink, mkfifo */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/support.h"

static void test_arena(void **state) {
    (void)state;
    Arena a;
    arena_init(&a);
    char *prev = NULL;
    for (int i = 0; i < 10000; i++) {
        char *p = arena_alloc(&a, (size_t)(i % 100) + 1);
        assert_true(((uintptr_t)p & 15) == 0);
        assert_int_equal(p[0], 0);
        p[0] = 'x';
        assert_true(p != prev);
        prev = p;
    }
    char *big = arena_alloc(&a, 1 << 20);
    big[(1 << 20) - 1] = 1;
    assert_string_equal(arena_strndup(&a, "hello", 3), "hel");
    arena_free(&a);
}

static void test_strbuf(void **state) {
    (void)state;
    StrBuf sb = {0};
    assert_string_equal(sb_cstr(&sb), "");
    for (int i = 0; i < 1000; i++)
        sb_printf(&sb, "%d,", i);
    assert_int_equal(sb.len, strlen(sb.data));
    sb.len = 0;
    sb_puts(&sb, "ab");
    sb_indent(&sb, 3);
    sb_putc(&sb, 'c');
    assert_string_equal(sb_cstr(&sb), "ab   c");
    char *s = sb_take(&sb);
    assert_string_equal(s, "ab   c");
    assert_null(sb.data);
    free(s);
}

static void test_ptrmap(void **state) {
    (void)state;
    PtrMap m = {0};
    int xs[5000];
    for (int i = 0; i < 5000; i++)
        ptrmap_put(&m, &xs[i], (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 5000; i++)
        assert_int_equal((uintptr_t)ptrmap_get(&m, &xs[i]), i + 1);
    assert_int_equal(m.len, 5000);
    ptrmap_put(&m, &xs[7], NULL);
    assert_null(ptrmap_get(&m, &xs[7]));
    assert_true(ptrmap_has(&m, &xs[7]));
    int other;
    assert_false(ptrmap_has(&m, &other));
    ptrmap_free(&m);
}

static void test_strmap_intern(void **state) {
    (void)state;
    Interner in = {0};
    const char *a = intern_cstr(&in, "conv2d");
    static const char qualified[] = "nn.conv2d";
    const char *b = intern(&in, qualified + 3, 6);
    assert_ptr_equal(a, b);
    assert_ptr_not_equal(a, intern_cstr(&in, "conv3d"));
    char key[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        intern_cstr(&in, key);
    }
    assert_ptr_equal(a, intern_cstr(&in, "conv2d"));
    assert_ptr_equal(intern(&in, "", 0), intern(&in, "", 0));
    intern_free(&in);
}

static void test_diag_render(void **state) {
    (void)state;
    Diags ds;
    diags_init(&ds);
    const char *src = "line one\n  %x = add(%y);\nlast";
    uint32_t f = diags_add_file(&ds, "t.rly", src, strlen(src));
    uint32_t line, col;
    diags_line_col(&ds, f, 0, &line, &col);
    assert_int_equal(line, 1);
    assert_int_equal(col, 1);
    uint32_t off = (uint32_t)(strstr(src, "%y") - src);
    diags_line_col(&ds, f, off, &line, &col);
    assert_int_equal(line, 2);
    assert_int_equal(col, 12);
    diag_error(&ds, (Span){f, off, off + 2}, "unbound variable %s", "%y");
    diag_note(&ds, (Span){f, 25, 29}, "here");
    assert_int_equal(ds.n_errors, 1);
    StrBuf sb = {0};
    diags_render(&ds, 0, &sb);
    assert_string_equal(sb_cstr(&sb), "t.rly:2:12: error: unbound variable %y\n"
                                      "    %x = add(%y);\n"
                                      "             ^~\n"
                                      "t.rly:3:1: note: here\n"
                                      "  last\n"
                                      "  ^~~~\n");
    sb_free(&sb);
    diags_free(&ds);
}

static void test_dtypes(void **state) {
    (void)state;
    assert_int_equal(sup_dtype_parse("float32", 7), RLY_DTYPE_F32);
    assert_int_equal(sup_dtype_parse("bfloat16", 8), RLY_DTYPE_BF16);
    assert_int_equal(sup_dtype_parse("float", 5), RLY_DTYPE_F32); /* TVM's shorthands */
    assert_int_equal(sup_dtype_parse("int", 3), RLY_DTYPE_I32);
    assert_int_equal(sup_dtype_parse("uint1", 5), RLY_DTYPE_BOOL);
    assert_int_equal(sup_dtype_parse("int8x1", 6), RLY_DTYPE_I8);
    assert_int_equal(sup_dtype_parse("float32x4", 9), -1);
    assert_int_equal(sup_dtype_parse("floa", 4), -1);
    assert_string_equal(sup_dtype_name(RLY_DTYPE_U16), "uint16");
    assert_int_equal(sup_dtype_size(RLY_DTYPE_I64), 8);
    assert_true(sup_dtype_is_float(RLY_DTYPE_F16));
    assert_true(sup_dtype_is_uint(RLY_DTYPE_U8));
    assert_false(sup_dtype_is_int(RLY_DTYPE_U8));
}

static void test_half(void **state) {
    (void)state;
    assert_int_equal(sup_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(sup_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(sup_f32_to_f16(65520.0f), 0x7c00); /* rounds to inf */
    assert_int_equal(sup_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(sup_f32_to_f16(5.9604645e-8f), 0x0001); /* smallest subnormal */
    for (uint32_t h = 0; h < 0x7c00; h++)                    /* every finite half round-trips */
        assert_int_equal(sup_f32_to_f16(sup_f16_to_f32((uint16_t)h)), h);
    assert_int_equal(sup_f32_to_bf16(1.0f), 0x3f80);
    assert_true(sup_bf16_to_f32(sup_f32_to_bf16(3.140625f)) == 3.140625f);
}

static void test_files(void **state) {
    (void)state;
    char err[256], *data;
    size_t len;
    const char *path = "test_support_tmp.txt";
    assert_true(sup_write_file_atomic(path, "abc\0def", 7, err, sizeof err));
    assert_true(sup_read_file(path, &data, &len, err, sizeof err));
    assert_int_equal(len, 7);
    assert_memory_equal(data, "abc\0def", 7);
    free(data);
    remove(path);
    assert_false(sup_read_file("/nonexistent/x", &data, &len, err, sizeof err));
    assert_non_null(strstr(err, "cannot open"));
    assert_false(sup_write_file_atomic("/nonexistent/dir/x", "a", 1, err, sizeof err));
}

static bool file_is(const char *path, const char *want) {
    char err[256], *data;
    size_t len;
    if (!sup_read_file(path, &data, &len, err, sizeof err)) return false;
    bool same = len == strlen(want) && memcmp(data, want, len) == 0;
    free(data);
    return same;
}

/* Hostile output paths: every case is planted, written, and the aftermath checked. */
static void test_write_hostile(void **state) {
    (void)state;
    char err[256];
    const char *dir = "test_support_out";
    char out[64], victim[64], link[64], fifo[64], planted[128];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(victim, sizeof victim, "%s/victim.txt", dir);
    snprintf(link, sizeof link, "%s/link.txt", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    mkdir(dir, 0755);

    /* a symlink planted at the old predictable temporary name is neither followed nor removed */
    assert_true(sup_write_file_atomic(victim, "victim", 6, err, sizeof err));
    snprintf(planted, sizeof planted, "%s.tmp.%ld", out, (long)getpid());
    unlink(planted);
    assert_int_equal(symlink("victim.txt", planted), 0);
    assert_true(sup_write_file_atomic(out, "new", 3, err, sizeof err));
    assert_true(file_is(out, "new"));
    assert_true(file_is(victim, "victim"));
    struct stat st;
    assert_int_equal(lstat(planted, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    unlink(planted);

    /* a replaced file keeps its mode */
    assert_int_equal(chmod(out, 0640), 0);
    assert_true(sup_write_file_atomic(out, "again", 5, err, sizeof err));
    assert_int_equal(stat(out, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_true(file_is(out, "again"));

    /* a symlink is written through: the target changes, the link stays a link */
    unlink(link);
    assert_int_equal(symlink("victim.txt", link), 0);
    assert_true(sup_write_file_atomic(link, "through", 7, err, sizeof err));
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_true(file_is(victim, "through"));
    /* a dangling link is refused and left alone */
    unlink(link);
    assert_int_equal(symlink("missing.txt", link), 0);
    assert_false(sup_write_file_atomic(link, "x", 1, err, sizeof err));
    assert_non_null(strstr(err, "symbolic link to a missing file"));
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(access(link, F_OK), -1);
    unlink(link);

    /* a FIFO is written through (a reader holds it open), not replaced */
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    int rfd = open(fifo, O_RDONLY | O_NONBLOCK);
    assert_true(rfd >= 0);
    assert_true(sup_write_file_atomic(fifo, "pipe", 4, err, sizeof err));
    char buf[8] = {0};
    assert_int_equal(read(rfd, buf, sizeof buf), 4);
    assert_memory_equal(buf, "pipe", 4);
    close(rfd);
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    unlink(fifo);

    /* character devices: written in place; a failing one is an error and stays a device */
    assert_true(sup_write_file_atomic("/dev/null", "x", 1, err, sizeof err));
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    if (stat("/dev/full", &st) == 0) {
        assert_false(sup_write_file_atomic("/dev/full", "x", 1, err, sizeof err));
        assert_non_null(strstr(err, "/dev/full"));
        assert_int_equal(stat("/dev/full", &st), 0);
        assert_true(S_ISCHR(st.st_mode));
    }
    /* a directory is refused */
    assert_false(sup_write_file_atomic(dir, "x", 1, err, sizeof err));
    assert_non_null(strstr(err, "directory"));

    /* no temporary is left behind by any of the above */
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        assert_null(strstr(de->d_name, ".tmp."));
    closedir(d);
    unlink(out);
    unlink(victim);
    rmdir(dir);
}

/* The "THPeligible" value of the mapping holding p in /proc/self/smaps: 1 when it may take
 * transparent huge pages, 0 when not, -1 when unknown (no such file or field). */
static int thp_eligible(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (f == NULL) return -1;
    char line[512];
    bool in = false;
    int v = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && sscanf(line, "THPeligible: %d", &v) == 1) break;
    }
    fclose(f);
    return v;
}

/* The system's THP mode allows madvise'd regions ("always" or "madvise" selected). */
static bool thp_madvise_allowed(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == NULL) return false;
    char line[128] = "";
    bool ok = fgets(line, sizeof line, f) != NULL && strstr(line, "[never]") == NULL;
    fclose(f);
    return ok;
}

/* sup_alloc_data: aligned, usable to its last byte; 2 MiB buffers on 2 MiB boundaries, advised
 * for huge pages where the system allows them (RLY_HUGEPAGES=0 in the environment: neither). */
static void test_alloc_data(void **state) {
    (void)state;
    const char *e = getenv("RLY_HUGEPAGES");
    bool huge = e == NULL || strcmp(e, "0") != 0;
    size_t mib = (size_t)1 << 20, sizes[] = {0, 1, 100, 4096, 2 * mib - 1, 2 * mib, 3 * mib + 5};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *p = sup_alloc_data(64, n);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        memset(p, 0xab, n ? n : 1);
        assert_int_equal(p[n ? n - 1 : 0], 0xab);
        if (n >= 2 * mib && huge) {
            assert_int_equal((uintptr_t)p % (2 * mib), 0);
            int v = thp_eligible(p);
            if (v >= 0 && thp_madvise_allowed()) assert_int_equal(v, 1);
        }
        free(p);
    }
    void *q = sup_alloc_data(4096, 10); /* a larger alignment kept */
    assert_non_null(q);
    assert_int_equal((uintptr_t)q % 4096, 0);
    free(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_data),    cmocka_unit_test(test_arena),
        cmocka_unit_test(test_strbuf),        cmocka_unit_test(test_ptrmap),
        cmocka_unit_test(test_strmap_intern), cmocka_unit_test(test_diag_render),
        cmocka_unit_test(test_dtypes),        cmocka_unit_test(test_half),
        cmocka_unit_test(test_files),         cmocka_unit_test(test_write_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
