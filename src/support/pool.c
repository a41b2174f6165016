/* pool.c - the thread pool (support.h, "thread pool"): persistent pthread workers and a fork/join
 * sup_pool_run for batch-1 kernels, whose runs last microseconds.
 *
 * One run: the caller writes the task (fn, ctx, n_tasks), cuts the task indices into one
 * contiguous range per thread and publishes a new generation in `ctl`; workers that notice it
 * join the run, and every participant (the caller too) takes the indices of its own range, in
 * order, from that range's atomic counter, then those left in the other ranges. So task i of a
 * run goes to the same thread run after run unless that thread is late: consecutive kernels that
 * split their data alike (a convolution's output blocks, the next layer's input blocks) find it
 * in the cache of the core that wrote it. (With one shared counter, tasks went to whichever thread
 * was free, and at 2 threads small memory-bound operators ran slower than at 1.) A worker waits for
 * the next generation by spinning (pause) for up to SPIN_NS, then sleeps on a condition variable;
 * the caller broadcasts only when some worker sleeps, so back-to-back runs (a model's kernels)
 * cost no futex call at all. The caller closes the run when the counter is exhausted and waits
 * only for the workers that joined before the close: a worker still asleep (or descheduled) does
 * not delay a run it did not take part in, and can never touch a later run's task by mistake.
 *
 * ctl packs the generation (bits 32..63), CTL_CLOSED (bit 31) and the number of workers that
 * joined (bits 0..30). Invariant: a worker joins (CAS on ctl) only an open run of a generation it
 * has not seen, so fn/ctx/n_tasks/next/finished are not rewritten before every joined worker has
 * counted itself in `finished` (the caller waits for finished == joined after the close). The
 * spin/sleep handshakes (n_sleeping vs ctl, caller_sleeping vs finished) are Dekker pairs in
 * sequentially consistent atomics, the sleeping side rechecking under the mutex. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

#define SPIN_NS 200000       /* how long an idle worker spins before it sleeps (0.2 ms) */
#define CALLER_SPIN_NS 50000 /* how long the caller spins for joined workers before it sleeps */
#define YIELD_NS 20000 /* past this, spinners also sched_yield (more threads than free cores) */
#define SPREADS 8      /* times a pool moves a worker off its caller's CPU (spread), at most */

#define CTL_CLOSED ((uint64_t)1 << 31)
#define CTL_JOINED_MASK (CTL_CLOSED - 1)
#define CTL_GEN(s) ((s) >> 32)

typedef struct Worker {
    SupPool *pool;
    int index; /* 1 .. n - 1 */
    pthread_t th;
    _Atomic int tid; /* its kernel thread id, once it runs (0 before) */
    _Atomic int cpu; /* the CPU it last ran on, as it last looked (-1: not known) */
    bool kept_off;   /* spread: its affinity excludes a CPU for now (the caller's side only) */
} Worker;

struct SupPool {
    int n;                /* threads, the caller included; >= 2 (a 1-thread pool has no workers) */
    Worker *workers;      /* n - 1 */
    _Atomic uint64_t ctl; /* generation | CTL_CLOSED | joined (see the file comment) */
    struct TaskRange *ranges;    /* n: thread i's task indices of the current run */
    _Atomic int finished;        /* joined workers done with the current run */
    _Atomic int n_sleeping;      /* workers blocked (or about to block) on wake */
    _Atomic int caller_sleeping; /* the caller blocked (or about to block) on done */
    _Atomic int busy;            /* a run is in progress (one at a time: support.h) */
    _Atomic bool stop;           /* sup_pool_free: workers exit at the next generation */
    SupTaskFn fn;                /* the current run, written before its generation is published */
    void *ctx;
    int64_t n_tasks;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* a new generation (workers wait) */
    pthread_cond_t done; /* a worker finished (the caller waits) */
    cpu_set_t allowed;   /* the CPUs the process may use, when the pool was made */
    int n_allowed;
    int spreads_left; /* spread: how many more times a worker may be moved off the caller's CPU */
    bool trace;       /* sup_pool_trace: spans are recorded (set between runs only) */
    int64_t *span_t0, *span_t1; /* per thread: its span in the current run (t0 0: none) */
    SupSpan *spans;             /* the runs' spans since sup_pool_take_spans */
    size_t n_spans, cap_spans;
};

/* Thread i's share of a run: indices next .. end - 1 are not taken yet (next may pass end). One
 * cache line each. */
typedef struct TaskRange {
    _Atomic int64_t next;
    int64_t end;
    char pad[64 - sizeof(int64_t) * 2];
} TaskRange;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Take the tasks of this thread's range, then those left in the others'. */
static void take_tasks(SupPool *p, int worker) {
    SupTaskFn fn = p->fn;
    void *ctx = p->ctx;
    int64_t t0 = 0;
    bool trace = p->trace;
    for (int k = 0; k < p->n; k++) {
        TaskRange *r = &p->ranges[(worker + k) % p->n];
        for (;;) {
            int64_t t = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
            if (t >= r->end) break;
            if (trace && t0 == 0) t0 = now_ns();
            fn(ctx, t, worker);
        }
    }
    if (t0 != 0) { /* read by the caller after `finished` counts this worker (or its own) */
        p->span_t0[worker] = t0;
        p->span_t1[worker] = now_ns();
    }
}

/* ---- workers ------------------------------------------------------------------------------- */

/* Wait until ctl's generation differs from `seen`: spin, then sleep. Returns the ctl seen. While
 * it spins, w says where it runs (spread). */
static uint64_t wait_generation(SupPool *p, Worker *w, uint64_t seen) {
    uint64_t s = atomic_load(&p->ctl);
    if (CTL_GEN(s) != seen) return s;
    int64_t t0 = now_ns();
    for (unsigned i = 1;; i++) {
        cpu_relax();
        s = atomic_load_explicit(&p->ctl, memory_order_acquire);
        if (CTL_GEN(s) != seen) return s;
        if ((i & 63) == 0) {
            atomic_store_explicit(&w->cpu, sched_getcpu(), memory_order_relaxed);
            int64_t dt = now_ns() - t0;
            if (dt > SPIN_NS) break;
            if (dt > YIELD_NS) sched_yield(); /* let a descheduled peer run (oversubscribed) */
        }
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->n_sleeping, 1);
    while (CTL_GEN(s = atomic_load(&p->ctl)) == seen)
        pthread_cond_wait(&p->wake, &p->mu);
    atomic_fetch_sub(&p->n_sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return s;
}

static void *worker_main(void *arg) {
    Worker *w = arg;
    SupPool *p = w->pool;
    atomic_store(&w->tid, (int)syscall(SYS_gettid));
    atomic_store(&w->cpu, sched_getcpu());
    uint64_t seen = 0; /* the generation this worker last looked at (the pool starts at 0) */
    for (;;) {
        uint64_t s = wait_generation(p, w, seen);
        if (atomic_load(&p->stop)) break;
        seen = CTL_GEN(s);
        /* Join the run unless it is closed (the caller did every task already). */
        bool joined = false;
        while (CTL_GEN(s) == seen && !(s & CTL_CLOSED)) {
            if (atomic_compare_exchange_weak(&p->ctl, &s, s + 1)) {
                joined = true;
                break;
            }
        }
        if (!joined) continue; /* closed, or already the next generation: look again */
        atomic_store_explicit(&w->cpu, sched_getcpu(), memory_order_relaxed);
        take_tasks(p, w->index);
        atomic_fetch_add(&p->finished, 1);
        if (atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* ---- the pool ------------------------------------------------------------------------------ */

static void stop_workers(SupPool *p, int started) {
    atomic_store(&p->stop, true);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->ctl, (uint64_t)1 << 32);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < started; i++)
        pthread_join(p->workers[i].th, NULL);
}

SupPool *sup_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    SupPool *p = sup_calloc(1, sizeof *p);
    p->n = n_threads;
    if (n_threads == 1) return p;
    p->workers = sup_calloc((size_t)n_threads - 1, sizeof *p->workers);
    p->ranges = sup_calloc((size_t)n_threads, sizeof *p->ranges);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    /* Workers start with every signal blocked: signals go to the application's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    CPU_ZERO(&p->allowed);
    if (sched_getaffinity(0, sizeof p->allowed, &p->allowed) == 0)
        p->n_allowed = CPU_COUNT(&p->allowed);
    p->spreads_left = SPREADS;
    int started = 0;
    for (; started < n_threads - 1; started++) {
        Worker *w = &p->workers[started];
        w->pool = p;
        w->index = started + 1;
        atomic_store(&w->cpu, -1);
        if (pthread_create(&w->th, NULL, worker_main, w) != 0) break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started < n_threads - 1) {
        stop_workers(p, started);
        pthread_cond_destroy(&p->done);
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
        free(p->workers);
        free(p->ranges);
        free(p);
        return NULL;
    }
    return p;
}

void sup_pool_free(SupPool *p) {
    if (p == NULL) return;
    if (p->n > 1) {
        RLY_CHECK(atomic_load(&p->busy) == 0, "sup_pool_free during a run");
        stop_workers(p, p->n - 1);
        free(p->span_t0);
        free(p->span_t1);
        free(p->spans);
        pthread_cond_destroy(&p->done);
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
        free(p->workers);
        free(p->ranges);
    }
    free(p);
}

int sup_pool_threads(const SupPool *p) { return p ? p->n : 1; }

/* A worker last seen (starting, spinning, joining a run) on the caller's CPU shares that core
 * with it: the caller then does most tasks itself while the worker waits for its turn, and a
 * 2-thread run takes the 1-thread time (LSTM: 0.62 ms instead of 0.34, for whole 20 ms
 * benchmarks, in 9 of 20 fresh processes started 0.3 s apart on an idle machine). The scheduler
 * puts them there at times (a new thread beside its creator, a wake-up on the waker's CPU) and is
 * slow to part two threads that hand work back and forth every few microseconds (each looks
 * cache-hot). So such a worker gets an affinity of every allowed CPU but the caller's, and its
 * full affinity back as soon as it is seen elsewhere: the scheduler stays free to place it (a
 * worker kept off the caller's CPU for good doubled SqueezeNet's 2-thread time while another
 * process held the other core). SPREADS moves per pool at most, so a machine whose other cores
 * are busy is not fought over run after run. Needs at least as many CPUs as threads. */
static void spread(SupPool *p) {
    int me = sched_getcpu();
    if (me < 0 || me >= CPU_SETSIZE) return;
    for (int i = 0; i < p->n - 1; i++) {
        Worker *w = &p->workers[i];
        int tid = atomic_load_explicit(&w->tid, memory_order_relaxed);
        int at = atomic_load_explicit(&w->cpu, memory_order_relaxed);
        if (tid <= 0) continue;
        if (w->kept_off) { /* moved: free again (so a busy machine can still place it) */
            if (at >= 0 && at != me) {
                (void)sched_setaffinity(tid, sizeof p->allowed, &p->allowed);
                w->kept_off = false;
            }
            continue;
        }
        if (at != me || p->spreads_left <= 0) continue;
        cpu_set_t set = p->allowed;
        CPU_CLR(me, &set);
        if (CPU_COUNT(&set) > 0 && sched_setaffinity(tid, sizeof set, &set) == 0) {
            w->kept_off = true;
            p->spreads_left--;
        }
        atomic_store_explicit(&w->cpu, -1, memory_order_relaxed);
    }
}

/* The spans of the run just joined, appended to p->spans (the caller's thread: no race). A
 * profile that never takes them keeps the last 2^20 runs' worth at most. */
static void collect_spans(SupPool *p) {
    for (int w = 0; w < p->n; w++) {
        if (p->span_t0[w] == 0) continue;
        if (p->n_spans == p->cap_spans) {
            if (p->cap_spans >= ((size_t)1 << 20))
                p->n_spans = 0; /* never taken: start over */
            else {
                p->cap_spans = p->cap_spans ? 2 * p->cap_spans : 64;
                p->spans = sup_realloc(p->spans, p->cap_spans * sizeof *p->spans);
            }
        }
        p->spans[p->n_spans++] = (SupSpan){w, p->span_t0[w], p->span_t1[w]};
        p->span_t0[w] = 0;
    }
}

void sup_pool_run(SupPool *p, int64_t n_tasks, SupTaskFn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p == NULL || p->n == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        return;
    }
    RLY_CHECK(atomic_exchange(&p->busy, 1) == 0,
              "sup_pool_run: the pool is already running (nested or concurrent run)");
    if (p->n_allowed >= p->n) spread(p);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    for (int i = 0; i < p->n; i++) {
        atomic_store_explicit(&p->ranges[i].next, n_tasks * i / p->n, memory_order_relaxed);
        p->ranges[i].end = n_tasks * (i + 1) / p->n;
    }
    atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
    /* Publish: a new generation, open, nobody joined. The seq_cst store orders the writes above
     * before any worker's acquire of it, and pairs with n_sleeping below. */
    uint64_t gen = CTL_GEN(atomic_load_explicit(&p->ctl, memory_order_relaxed)) + 1;
    atomic_store(&p->ctl, gen << 32);
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    take_tasks(p, 0);
    /* Close the run; wait for the workers that joined it. */
    uint64_t s = atomic_fetch_or(&p->ctl, CTL_CLOSED);
    int joined = (int)(s & CTL_JOINED_MASK);
    if (atomic_load(&p->finished) != joined) {
        int64_t t0 = now_ns();
        for (unsigned i = 1; atomic_load_explicit(&p->finished, memory_order_acquire) != joined;
             i++) {
            cpu_relax();
            if ((i & 63) != 0) continue;
            int64_t dt = now_ns() - t0;
            if (dt > YIELD_NS) sched_yield();
            if (dt > CALLER_SPIN_NS) {
                pthread_mutex_lock(&p->mu);
                atomic_store(&p->caller_sleeping, 1);
                while (atomic_load(&p->finished) != joined)
                    pthread_cond_wait(&p->done, &p->mu);
                atomic_store(&p->caller_sleeping, 0);
                pthread_mutex_unlock(&p->mu);
                break;
            }
        }
    }
    if (p->trace) collect_spans(p);
    atomic_store(&p->busy, 0);
}

void sup_pool_trace(SupPool *p, bool on) {
    if (p == NULL || p->n == 1) return;
    RLY_CHECK(atomic_load(&p->busy) == 0, "sup_pool_trace during a run");
    if (on && p->span_t0 == NULL) {
        p->span_t0 = sup_calloc((size_t)p->n, sizeof *p->span_t0);
        p->span_t1 = sup_calloc((size_t)p->n, sizeof *p->span_t1);
    }
    p->trace = on;
}

size_t sup_pool_take_spans(SupPool *p, SupSpan *out, size_t cap) {
    if (p == NULL || p->n == 1) return 0;
    size_t n = p->n_spans < cap ? p->n_spans : cap;
    if (n == 0) return 0;
    memcpy(out, p->spans, n * sizeof *out);
    memmove(p->spans, p->spans + n, (p->n_spans - n) * sizeof *out);
    p->n_spans -= n;
    return n;
}

/* ---- the default thread count ------------------------------------------------------------ */

int sup_default_threads(void) {
    const char *e = getenv("RLY_NUM_THREADS");
    if (e != NULL && e[0] != '\0') {
        char *end;
        errno = 0;
        long v = strtol(e, &end, 10);
        if (errno == 0 && *end == '\0' && v > 0 && v <= 1024) return (int)v;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    return 1;
}
