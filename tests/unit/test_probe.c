/* test_probe.c - the probes behind --check-numerics and --profile (src/runtime/numerics.c,
 * src/runtime/profile.c, the session API of rly_runtime.h "probes"): statistics and NaN scans
 * of tensors of several dtypes and of nested tuples, the text of reports, the recorder's
 * interning, table, JSON escaping, atomic writing and bad paths, and the session calls'
 * errors. The commands themselves are tested by tests/cli/{numerics,profile}. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "rly/rly.h"
#include "runtime/probe.h"

static RtTensor *f32(int64_t n, const float *v) {
    char err[128];
    RtTensor *t = rt_tensor_new(RLY_DTYPE_F32, 1, &n, err, sizeof err);
    memcpy(k_ptr(&t->t), v, sizeof(float) * (size_t)n);
    return t;
}

static void test_stats(void) {
    float v[] = {1, NAN, -INFINITY, 3, -2};
    RtTensor *t = f32(5, v);
    RtStats s;
    rt_stats_tensor(&t->t, &s);
    CHECK(s.n == 5 && s.n_nan == 1 && s.n_inf == 1, "counts %llu %llu %llu",
          (unsigned long long)s.n, (unsigned long long)s.n_nan, (unsigned long long)s.n_inf);
    CHECK(s.min == -2 && s.max == 3 && s.sum == 2, "min %g max %g sum %g", s.min, s.max, s.sum);
    CHECK(rt_value_nonfinite(&t->hdr), "f32 with NaN is nonfinite");
    /* f16: 1.0 (0x3c00) and NaN (0x7e00); int32 never holds one */
    char err[128];
    int64_t two = 2;
    RtTensor *h = rt_tensor_new(RLY_DTYPE_F16, 1, &two, err, sizeof err);
    uint16_t hv[] = {0x3c00, 0x7e00};
    memcpy(k_ptr(&h->t), hv, sizeof hv);
    rt_stats_tensor(&h->t, &s);
    CHECK(s.n_nan == 1 && s.max == 1, "f16 stats: %llu NaN, max %g", (unsigned long long)s.n_nan,
          s.max);
    CHECK(rt_value_nonfinite(&h->hdr), "f16 NaN found");
    RtTensor *i = rt_tensor_new(RLY_DTYPE_I32, 1, &two, err, sizeof err);
    int32_t iv[] = {-7, 9};
    memcpy(k_ptr(&i->t), iv, sizeof iv);
    rt_stats_tensor(&i->t, &s);
    CHECK(!rt_value_nonfinite(&i->hdr) && s.min == -7 && s.max == 9, "int32 stats");
    int64_t zero = 0;
    RtTensor *e = rt_tensor_new(RLY_DTYPE_F32, 1, &zero, err, sizeof err);
    rt_stats_tensor(&e->t, &s);
    CHECK(s.n == 0 && !rt_value_nonfinite(&e->hdr) && !rt_value_nonfinite(NULL), "empty, NULL");
    StrBuf sb = {0};
    rt_value_stats_text(&e->hdr, "", "x", &sb);
    CHECK(strstr(sb_cstr(&sb), "x: float32[0]: empty, 0 NaN, 0 Inf") != NULL, "%s", sb_cstr(&sb));
    sb_free(&sb);
    rt_release(&t->hdr);
    rt_release(&h->hdr);
    rt_release(&i->hdr);
    rt_release(&e->hdr);
}

static void test_tuples(void) {
    float ok[] = {1, 2}, bad[] = {INFINITY};
    RtTuple *inner = rt_tuple_new(1), *outer = rt_tuple_new(2);
    inner->f[0] = &f32(1, bad)->hdr;
    outer->f[0] = &f32(2, ok)->hdr;
    outer->f[1] = &inner->hdr;
    CHECK(rt_value_nonfinite(&outer->hdr), "an Inf two tuples deep");
    StrBuf sb = {0};
    rt_value_stats_text(&outer->hdr, "  ", "input 0", &sb);
    const char *want = "  input 0.0: float32[2]: min 1, max 2, mean 1.5, 0 NaN, 0 Inf\n"
                       "  input 0.1.0: float32[1]: no finite element, 0 NaN, 1 Inf\n";
    CHECK(strcmp(sb_cstr(&sb), want) == 0, "stats text:\n%s", sb_cstr(&sb));
    sb.len = 0;
    rt_value_shape_text(&outer->hdr, &sb);
    CHECK(strcmp(sb_cstr(&sb), "(float32[2], float32[1])") == 0, "shape text %s", sb_cstr(&sb));
    sb.len = 0;
    rt_nonfinite_text(&outer->hdr, &sb);
    CHECK(strcmp(sb_cstr(&sb), "1 Inf") == 0, "nonfinite text %s", sb_cstr(&sb));
    sb_free(&sb);
    rt_release(&outer->hdr);
    /* deep nesting is iterative */
    RtTuple *deep = rt_tuple_new(1);
    RtTuple *cur = deep;
    for (int k = 0; k < 100000; k++) {
        RtTuple *next = rt_tuple_new(1);
        cur->f[0] = &next->hdr;
        cur = next;
    }
    float nan1[] = {NAN};
    cur->f[0] = &f32(1, nan1)->hdr;
    CHECK(rt_value_nonfinite(&deep->hdr), "NaN 10^5 tuples deep");
    rt_release(&deep->hdr);
}

static void test_profile(void) {
    RtProfile *p = rt_profile_new();
    uint32_t a = rt_profile_intern(p, "add", 3), b = rt_profile_intern(p, "nn.conv2d", 9);
    CHECK(a != b && rt_profile_intern(p, "add", 3) == a, "interning");
    char name[32];
    uint32_t first = 0;
    for (int k = 0; k < 5000; k++) { /* many strings: the table grows */
        snprintf(name, sizeof name, "op%d", k);
        uint32_t id = rt_profile_intern(p, name, strlen(name));
        if (k == 0) first = id;
    }
    CHECK(rt_profile_intern(p, "op0", 3) == first && rt_profile_intern(p, "add", 3) == a,
          "ids stable after growing");
    uint32_t cat = rt_profile_intern(p, "operator", 8);
    uint32_t odd = rt_profile_intern(p, "a\"b\\c\n", 6);
    StrBuf args = {0};
    rt_profile_arg(&args, "loc", "x.rly:1:2");
    rt_profile_arg(&args, "inputs", "q\"uote");
    uint32_t ar = rt_profile_intern(p, args.data, args.len);
    sb_free(&args);
    uint64_t t = rt_profile_now();
    rt_profile_add(p, a, cat, ar, t, t + 1000);
    rt_profile_add(p, b, cat, UINT32_MAX, t + 1000, t + 901000);
    rt_profile_add(p, b, cat, UINT32_MAX, t + 901000, t + 1801000);
    rt_profile_add(p, odd, cat, UINT32_MAX, t + 2000000, t + 1000000); /* t1 < t0: dur 0 */
    char *tab = rt_profile_table(p, 2);
    const char *conv = strstr(tab, "nn.conv2d"), *add = strstr(tab, "  add [");
    CHECK(conv != NULL && add != NULL && conv < add, "table sorted by total:\n%s", tab);
    CHECK(strstr(tab, "(1 more)") != NULL && strstr(tab, "3 operators") != NULL, "top 2 of 3:\n%s",
          tab);
    free(tab);
    char path[] = "/tmp/rly_probe_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char err[256];
    CHECK(rt_profile_write(p, path, err, sizeof err), "write: %s", err);
    FILE *f = fopen(path, "rb");
    char buf[4096] = "";
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    CHECK(strstr(buf, "\"name\": \"a\\\"b\\\\c\\u000a\"") != NULL, "escaped name:\n%s", buf);
    CHECK(strstr(buf, "\"inputs\": \"q\\\"uote\"") != NULL, "escaped args");
    CHECK(strstr(buf, "\"dur\": 900.000") != NULL && strstr(buf, "\"dur\": 0.000") != NULL,
          "durations in us:\n%s", buf);
    remove(path);
    CHECK(!rt_profile_write(p, "/nonexistent-dir/x.json", err, sizeof err) && err[0],
          "a bad path fails with a message");
    rt_profile_free(p);
    rt_profile_free(NULL);
}

static void test_session(void) {
    static const char text[] = HDR "def @main(%x: Tensor[(2, 2), float32]) {\n"
                                   "  %0 = subtract(%x, 3f);\n"
                                   "  nn.relu(log(%0))\n"
                                   "}\n";
    rly_ctx *ctx = NULL;
    rly_module *mod = NULL;
    rly_executable *exe = NULL;
    rly_session *s = NULL;
    CHECK(rly_ctx_new(&ctx) == RLY_STATUS_OK, "ctx");
    CHECK(rly_module_parse(ctx, text, sizeof text - 1, "probe.rly", &mod) == RLY_STATUS_OK, "%s",
          rly_last_error());
    CHECK(rly_module_compile(mod, 3, NULL, &exe) == RLY_STATUS_OK, "%s", rly_last_error());
    CHECK(rly_session_new(exe, NULL, &s) == RLY_STATUS_OK, "session");
    rly_run_options o = {.fill = RLY_FILL_ONES};
    CHECK(rly_session_bind_inputs(s, &o) == RLY_STATUS_OK, "%s", rly_last_error());
    char *table = (char *)1;
    CHECK(rly_session_write_profile(s, "/tmp/never.json", 5, &table) == RLY_STATUS_ERROR &&
              table == NULL && access("/tmp/never.json", F_OK) != 0,
          "not profiling: an error, no file");
    CHECK(rly_session_set_probes(NULL, 0) == RLY_STATUS_INVALID, "NULL session");
    CHECK(rly_session_set_probes(s, 8) == RLY_STATUS_INVALID, "unknown bits");
    CHECK(rly_session_write_profile(s, NULL, 5, NULL) == RLY_STATUS_INVALID, "NULL path");
    /* relu hides the NaN from the group's result: a plain run succeeds */
    CHECK(rly_session_run(s) == RLY_STATUS_OK, "plain run: %s", rly_last_error());
    CHECK(rly_session_set_probes(s, RLY_PROBE_PROFILE) == RLY_STATUS_OK, "profile on");
    CHECK(rly_session_run(s) == RLY_STATUS_OK && rly_session_run(s) == RLY_STATUS_OK, "runs");
    char path[] = "/tmp/rly_probe_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(rly_session_write_profile(s, path, 5, &table) == RLY_STATUS_OK && table != NULL &&
              strstr(table, "fused_subtract_log_nn_relu") != NULL,
          "profile table: %s", table ? table : rly_last_error());
    rly_free(table);
    remove(path);
    CHECK(rly_session_write_profile(s, "/nonexistent-dir/p.json", 5, NULL) == RLY_STATUS_IO,
          "unwritable: RLY_STATUS_IO");
    CHECK(rly_session_set_probes(s, RLY_PROBE_NUMERICS) == RLY_STATUS_OK, "numerics on");
    CHECK(rly_session_run(s) == RLY_STATUS_ERROR &&
              strstr(rly_last_error(), "probe.rly:4:11: error: check-numerics: log made 4 NaN") !=
                  NULL,
          "numerics: %s", rly_last_error());
    CHECK(rly_session_write_profile(s, path, 5, NULL) == RLY_STATUS_ERROR, "profile off again");
    CHECK(rly_session_set_probes(s, 0) == RLY_STATUS_OK && rly_session_run(s) == RLY_STATUS_OK,
          "probes off: the run succeeds again (the session stays usable)");
    rly_session_free(s);
    rly_executable_free(exe);
    rly_ctx_free(ctx);
}

int main(void) {
    test_stats();
    test_tuples();
    test_profile();
    test_session();
    return check_summary();
}
