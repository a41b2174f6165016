/* test_pool.c - the thread pool (src/support/pool.c): every task runs exactly once on a thread
 * of the pool, over 1..8 threads, empty/single/large runs, runs after the workers went to sleep,
 * runs whose tasks outlast the caller's spin, 10^5 tiny runs; the default thread count. Prints
 * (does not assert) the fork/join latency of an empty run, hot and after an idle sleep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "support/support.h"

typedef struct Count {
    _Atomic int *hits; /* per task */
    _Atomic int by_worker[16];
    int n_threads;
    _Atomic int bad_worker;
    int sleep_us; /* > 0: tasks on a worker sleep this long (the caller's sleeping wait); < 0:
                     tasks on every thread sleep -sleep_us */
} Count;

static void sleep_us(int us) {
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void count_task(void *ctx, int64_t t, int w) {
    Count *c = ctx;
    atomic_fetch_add(&c->hits[t], 1);
    if (w < 0 || w >= c->n_threads || w >= 16)
        atomic_store(&c->bad_worker, 1);
    else
        atomic_fetch_add(&c->by_worker[w], 1);
    if (c->sleep_us > 0 && w != 0) sleep_us(c->sleep_us); /* the caller waits for the worker */
    if (c->sleep_us < 0) sleep_us(-c->sleep_us);          /* every thread blocks */
}

/* Run n tasks on p and check each ran once on a valid worker. */
static void run_checked(SupPool *p, int64_t n, Count *c) {
    for (int64_t t = 0; t < n; t++)
        atomic_store(&c->hits[t], 0);
    sup_pool_run(p, n, count_task, c);
    assert_int_equal(atomic_load(&c->bad_worker), 0);
    for (int64_t t = 0; t < n; t++)
        if (atomic_load(&c->hits[t]) != 1)
            fail_msg("threads %d, %lld tasks: task %lld ran %d times", c->n_threads, (long long)n,
                     (long long)t, atomic_load(&c->hits[t]));
}

static void test_exactly_once(void **state) {
    (void)state;
    enum { MAX_TASKS = 100000 };
    Count c;
    memset(&c, 0, sizeof c);
    c.hits = calloc(MAX_TASKS, sizeof *c.hits);
    assert_non_null(c.hits);
    static const int64_t sizes[] = {0, 1, 2, 3, 7, 8, 64, 1000, MAX_TASKS};
    for (int th = 1; th <= 8; th++) {
        SupPool *p = sup_pool_new(th);
        assert_non_null(p);
        assert_int_equal(sup_pool_threads(p), th);
        c.n_threads = th;
        for (int rep = 0; rep < 20; rep++)
            for (size_t k = 0; k < RLY_ARRAY_LEN(sizes); k++)
                run_checked(p, sizes[k], &c);
        sup_pool_free(p);
    }
    /* NULL: everything on the caller */
    c.n_threads = 1;
    memset(c.by_worker, 0, sizeof c.by_worker);
    assert_int_equal(sup_pool_threads(NULL), 1);
    run_checked(NULL, 1000, &c);
    assert_int_equal(atomic_load(&c.by_worker[0]), 1000);
    sup_pool_free(NULL);
    free(c.hits);
}

/* Task ranges: each thread takes its own contiguous range first. With 2 threads, a thread's
 * first task therefore lies in its own range when that range is not empty: it leaves its range
 * only when the range is exhausted, and the other thread takes that range only after its own,
 * so nothing is left anywhere by then. (With 3 or more a late thread may begin in a third
 * thread's range.) */
typedef struct First {
    _Atomic int64_t first[8];
} First;

static void first_task(void *ctx, int64_t t, int worker) {
    First *f = ctx;
    int64_t none = -1;
    atomic_compare_exchange_strong(&f->first[worker], &none, t);
}

static void test_own_range_first(void **state) {
    (void)state;
    for (int th = 2; th <= 4; th++) {
        SupPool *p = sup_pool_new(th);
        bool ranges = th == 2; /* the claim above */
        assert_non_null(p);
        static const int64_t sizes[] = {2, 3, 10, 64, 1001};
        for (int rep = 0; rep < 200; rep++)
            for (size_t k = 0; k < RLY_ARRAY_LEN(sizes); k++) {
                int64_t n = sizes[k];
                First f;
                for (int i = 0; i < 8; i++)
                    atomic_store(&f.first[i], -1);
                sup_pool_run(p, n, first_task, &f);
                for (int i = 0; i < th; i++) {
                    int64_t t = atomic_load(&f.first[i]), lo = n * i / th, hi = n * (i + 1) / th;
                    if (ranges && t >= 0 && lo < hi && (t < lo || t >= hi))
                        fail_msg("threads %d, %lld tasks: thread %d began with task %lld, not in "
                                 "its range [%lld, %lld)",
                                 th, (long long)n, i, (long long)t, (long long)lo, (long long)hi);
                }
            }
        sup_pool_free(p);
    }
}

/* Runs after the workers have gone to sleep (idle > the spin time), and runs whose tasks keep
 * the workers busy past the caller's spin (the caller sleeps). */
static void test_sleep_paths(void **state) {
    (void)state;
    Count c;
    memset(&c, 0, sizeof c);
    c.hits = calloc(64, sizeof *c.hits);
    for (int th = 2; th <= 4; th++) {
        SupPool *p = sup_pool_new(th);
        assert_non_null(p);
        c.n_threads = th;
        for (int rep = 0; rep < 5; rep++) {
            sleep_us(2000); /* > SPIN_NS: the workers sleep on the condition variable */
            run_checked(p, 64, &c);
        }
        c.sleep_us = 2000;
        for (int rep = 0; rep < 3; rep++)
            run_checked(p, 8, &c);
        c.sleep_us = 0;
        sup_pool_free(p);
    }
    /* tasks that block (sleep 1 ms) on every thread: the worker must take some of them */
    {
        SupPool *p = sup_pool_new(2);
        c.n_threads = 2;
        memset(c.by_worker, 0, sizeof c.by_worker);
        c.sleep_us = -1000; /* every thread sleeps */
        run_checked(p, 50, &c);
        c.sleep_us = 0;
        assert_true(atomic_load(&c.by_worker[1]) > 0);
        printf("blocking tasks: %d of 50 on the worker\n", atomic_load(&c.by_worker[1]));
        sup_pool_free(p);
    }
    /* a pool freed right after creation, and one freed while its workers sleep */
    sup_pool_free(sup_pool_new(3));
    SupPool *p = sup_pool_new(2);
    sleep_us(2000);
    sup_pool_free(p);
    free(c.hits);
}

typedef struct Sum {
    _Atomic int64_t total;
} Sum;

static void sum_task(void *ctx, int64_t t, int w) {
    (void)w;
    atomic_fetch_add_explicit(&((Sum *)ctx)->total, t + 1, memory_order_relaxed);
}

/* 10^5 tiny runs: no lost or doubled task, no hang (a lost wake-up would hang here). */
static void test_stress(void **state) {
    (void)state;
    static const int threads[] = {2, 3};
    for (size_t k = 0; k < RLY_ARRAY_LEN(threads); k++) {
        SupPool *p = sup_pool_new(threads[k]);
        assert_non_null(p);
        Sum s = {0};
        int64_t want = 0;
        for (int r = 0; r < 100000; r++) {
            int64_t n = 1 + r % 5;
            sup_pool_run(p, n, sum_task, &s);
            want += n * (n + 1) / 2;
        }
        assert_int_equal(atomic_load(&s.total), want);
        sup_pool_free(p);
    }
}

/* Plain (non-atomic) writes by tasks are visible to the caller after the run, and the caller's
 * writes before a run are visible to the tasks. */
typedef struct Plain {
    int64_t *in, *out;
} Plain;

static void plain_task(void *ctx, int64_t t, int w) {
    (void)w;
    Plain *pl = ctx;
    pl->out[t] = pl->in[t] * 3 + 1;
}

static void test_visibility(void **state) {
    (void)state;
    enum { N = 4096 };
    int64_t *in = calloc(N, sizeof *in), *out = calloc(N, sizeof *out);
    Plain pl = {in, out};
    SupPool *p = sup_pool_new(4);
    for (int r = 0; r < 2000; r++) {
        int64_t n = 1 + (r * 37) % N;
        for (int64_t t = 0; t < n; t++)
            in[t] = r + t;
        sup_pool_run(p, n, plain_task, &pl);
        for (int64_t t = 0; t < n; t++)
            if (out[t] != (r + t) * 3 + 1) fail_msg("run %d task %lld: stale", r, (long long)t);
    }
    sup_pool_free(p);
    free(in);
    free(out);
}

static void test_default_threads(void **state) {
    (void)state;
    const char *old = getenv("RLY_NUM_THREADS");
    char *saved = old ? strdup(old) : NULL;
    setenv("RLY_NUM_THREADS", "3", 1);
    assert_int_equal(sup_default_threads(), 3);
    unsetenv("RLY_NUM_THREADS");
    int cores = sup_default_threads();
    assert_true(cores >= 1);
    setenv("RLY_NUM_THREADS", "abc", 1);
    assert_int_equal(sup_default_threads(), cores);
    setenv("RLY_NUM_THREADS", "0", 1);
    assert_int_equal(sup_default_threads(), cores);
    setenv("RLY_NUM_THREADS", "-2", 1);
    assert_int_equal(sup_default_threads(), cores);
    if (saved) {
        setenv("RLY_NUM_THREADS", saved, 1);
        free(saved);
    } else {
        unsetenv("RLY_NUM_THREADS");
    }
}

/* ---- latency (printed) ------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nop_task(void *ctx, int64_t t, int w) {
    (void)ctx;
    (void)t;
    (void)w;
}

/* Each task waits until every thread holds one: the run measures a fork/join in which all
 * threads take part (the time for the last worker to notice the run and report back). */
typedef struct Meet {
    _Atomic int arrived;
    int want;
} Meet;

static void meet_task(void *ctx, int64_t t, int w) {
    (void)t;
    (void)w;
    Meet *m = ctx;
    atomic_fetch_add(&m->arrived, 1);
    double t0 = now_s();
    while (atomic_load(&m->arrived) < m->want && now_s() - t0 < 1.0) {
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_latency(void **state) {
    (void)state;
    enum { RUNS = 20000, COLD = 50 };
    static double t[RUNS];
    int cores = sup_default_threads();
    for (int th = 2; th <= 4; th += 2) {
        if (th > cores) break; /* more threads than cores measures the scheduler */
        SupPool *p = sup_pool_new(th);
        for (int r = 0; r < 100; r++) /* warm up */
            sup_pool_run(p, th, nop_task, NULL);
        for (int r = 0; r < RUNS; r++) {
            double t0 = now_s();
            sup_pool_run(p, th, nop_task, NULL);
            t[r] = now_s() - t0;
        }
        qsort(t, RUNS, sizeof t[0], cmp_double);
        printf("pool latency, %d threads, %d empty tasks, hot: median %.2f us, p90 %.2f us\n", th,
               th, t[RUNS / 2] * 1e6, t[RUNS * 9 / 10] * 1e6);
        for (int r = 0; r < RUNS; r++) {
            Meet m = {0, th};
            double t0 = now_s();
            sup_pool_run(p, th, meet_task, &m);
            t[r] = now_s() - t0;
        }
        qsort(t, RUNS, sizeof t[0], cmp_double);
        printf("pool latency, %d threads, every thread taking part, hot: median %.2f us, p90 %.2f "
               "us\n",
               th, t[RUNS / 2] * 1e6, t[RUNS * 9 / 10] * 1e6);
        for (int r = 0; r < COLD; r++) {
            sleep_us(1000); /* the workers sleep */
            double t0 = now_s();
            sup_pool_run(p, 64 * th, nop_task, NULL);
            t[r] = now_s() - t0;
        }
        qsort(t, COLD, sizeof t[0], cmp_double);
        printf("pool latency, %d threads, %d empty tasks, after 1 ms idle: median %.2f us\n", th,
               64 * th, t[COLD / 2] * 1e6);
        sup_pool_free(p);
    }
}

/* Profiles' spans (sup_pool_trace): none while off; while on, one per thread that took a task
 * in each run, inside the run's wall time, on valid workers, handed over oldest first and in
 * pieces of at most cap; tasks that block make the worker take some (the caller sleeps in its
 * own). A pool of 1 records none. */
static void test_spans(void **state) {
    (void)state;
    _Atomic int hits[64];
    Count c = {.hits = hits, .n_threads = 3, .sleep_us = -300};
    SupPool *p = sup_pool_new(3);
    assert_non_null(p);
    SupSpan sp[64];
    run_checked(p, 12, &c);
    assert_int_equal((int)sup_pool_take_spans(p, sp, 64), 0); /* off */
    sup_pool_trace(p, true);
    struct timespec a, b;
    int runs = 5, total = 0, by_worker[3] = {0};
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int r = 0; r < runs; r++)
        run_checked(p, 12, &c);
    clock_gettime(CLOCK_MONOTONIC, &b);
    int64_t t_a = (int64_t)a.tv_sec * 1000000000 + a.tv_nsec;
    int64_t t_b = (int64_t)b.tv_sec * 1000000000 + b.tv_nsec;
    /* in pieces of 4: the rest stays for the next call */
    for (size_t n; (n = sup_pool_take_spans(p, sp, 4)) > 0;) {
        assert_true(n <= 4);
        for (size_t i = 0; i < n; i++) {
            assert_true(sp[i].worker >= 0 && sp[i].worker < 3);
            assert_true(sp[i].t0 >= t_a && sp[i].t0 <= sp[i].t1 && sp[i].t1 <= t_b);
            by_worker[sp[i].worker]++;
            total++;
        }
    }
    assert_true(total >= runs && total <= 3 * runs);
    assert_true(by_worker[0] >= 1);                /* the caller took tasks */
    assert_true(by_worker[1] + by_worker[2] >= 1); /* and the workers did */
    sup_pool_trace(p, false);
    run_checked(p, 12, &c);
    assert_int_equal((int)sup_pool_take_spans(p, sp, 64), 0);
    sup_pool_free(p);
    SupPool *one = sup_pool_new(1);
    sup_pool_trace(one, true);
    run_checked(one, 4, &c);
    assert_int_equal((int)sup_pool_take_spans(one, sp, 64), 0);
    sup_pool_free(one);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spans),           cmocka_unit_test(test_exactly_once),
        cmocka_unit_test(test_own_range_first), cmocka_unit_test(test_sleep_paths),
        cmocka_unit_test(test_stress),          cmocka_unit_test(test_visibility),
        cmocka_unit_test(test_default_threads), cmocka_unit_test(test_latency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
