/* rnn.c - the LSTM and GRU cell kernels: one step of an LSTM or a GRU as the VM finds it in a
 * FuseRNNCell function (passes/fuse_rnn_cell.c, runtime/vm_cell.c).
 *
 * LSTM:
 * Arguments h (1, H), R (4H, H), xp (1, 4H), c (1, H), all float32; attribute "gates": the
 * fields (0..3) of the split of g = xp + dense(h, R) that are the input, forget, cell and output
 * gates. Results (h2, c2), both (1, H). One fork per step: each task takes a range of hidden
 * units (whole 32-column panels of R's packed form, so that each core streams the same quarter
 * of every gate's weights call after call, from its own L2), computes those units' four gate
 * pre-activations (four GEMV ranges), then their new cell and hidden state. The sums are the
 * dense kernel's (the packed GEMV's, or rowdot's for a weight read in place), the gates the
 * elementwise kernels' sigmoid and tanh, so a step gives what the unfused operators give on the
 * fast kernels, operator for operator. The VM calls it only on a function whose types are
 * these (FuseRNNCell makes no other); any other call (an executable file may hold anything) is
 * an error. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "kernels/fast/gemm.h"

#define FAST_LEVEL 2
#include "vmath_level.h"
#include "rnn_level.h"
#undef FAST_LEVEL
#define FAST_LEVEL 1
#include "vmath_level.h"
#include "rnn_level.h"
#undef FAST_LEVEL
#define FAST_LEVEL 0
#include "vmath_level.h"
#include "rnn_level.h"
#undef FAST_LEVEL

typedef void (*GateFn)(const float *gp, const float *xp, const float *c, int64_t h,
                       const int64_t *gate, int64_t u0, int64_t u1, float *h2, float *c2);

static GateFn gate_level(void) {
    switch (sup_isa()) {
    case SUP_ISA_AVX512: return lstm_gates_avx512;
    case SUP_ISA_AVX2: return lstm_gates_avx2;
    default: return lstm_gates_scalar;
    }
}

typedef void (*GruFn)(const float *gp, const float *xp, const float *bn, const float *h, int64_t H,
                      const int64_t *gate, int64_t u0, int64_t u1, float *h2);

static GruFn gru_level(void) {
    switch (sup_isa()) {
    case SUP_ISA_AVX512: return gru_gates_avx512;
    case SUP_ISA_AVX2: return gru_gates_avx2;
    default: return gru_gates_scalar;
    }
}

typedef struct Step {
    const float *h, *r, *rp, *xp, *c, *bn;
    int64_t H, part, n_gates;
    const int64_t *gate;
    float *gp, *h2, *c2; /* scratch: g (n_gates H), the new states (H each) */
    GateFn gates;        /* LSTM */
    GruFn gru;           /* GRU */
    bool backward;       /* walk the weight last to first (every other call) */
} Step;

static void step_task(void *ctx, int64_t t, int worker) {
    (void)worker;
    const Step *s = ctx;
    int64_t H = s->H, u0 = t * s->part, u1 = u0 + s->part < H ? u0 + s->part : H;
    for (int64_t i = 0; i < s->n_gates; i++) {
        int64_t q = s->backward ? s->n_gates - 1 - i : i, j0 = q * H + u0, j1 = q * H + u1;
        if (s->rp != NULL)
            kern_sgemv_packed(s->h, s->rp, H, s->n_gates * H, j0, j1, s->gp, s->backward);
        else
            kern_sgemv_rows(s->h, s->r + j0 * H, H, H, s->gp + j0, j1 - j0);
    }
    if (s->gru != NULL)
        s->gru(s->gp, s->xp, s->bn, s->h, H, s->gate, u0, u1, s->h2);
    else
        s->gates(s->gp, s->xp, s->c, H, s->gate, u0, u1, s->h2, s->c2);
}

/* The tasks: whole 32-column panels each; a weight stream worth a second thread (as the GEMV
 * counts: 4 x its multiply-adds against 2 x 131072 for a split) */
static int64_t step_parts(const KCall *kc, Step *s) {
    int64_t H = s->H, parts = k_threads(kc);
    if (4.0 * (double)s->n_gates * (double)H * (double)H < 262144.0 || H % 32 != 0) parts = 1;
    int64_t panels = (H + 31) / 32;
    if (parts > panels) parts = panels;
    s->part = (panels + parts - 1) / parts * 32;
    if (s->part > H) s->part = H;
    return (H + s->part - 1) / s->part;
}

static void run_step(KCall *kc, Step *s) {
    static _Atomic unsigned calls;
    s->backward = (calls++ & 1) != 0;
    k_parallel(kc, step_parts(kc, s), step_task, s);
}

/* Byte ranges [p, p + n) and [q, q + m) do not meet. */
static bool apart(const void *p, size_t n, const void *q, size_t m) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a + n <= b || b + m <= a;
}

/* Whether outputs out[0..n_out) (H floats each) share no byte with each other nor with the
 * arguments of kc, but for output `may` being exactly argument `as`. */
static bool outs_apart(const KCall *kc, float *const *out, uint32_t n_out, int64_t H, uint32_t may,
                       uint32_t as) {
    size_t row = (size_t)H * sizeof(float);
    for (uint32_t i = 0; i < n_out; i++)
        for (uint32_t j = i + 1; j < n_out; j++)
            if (!apart(out[i], row, out[j], row)) return false;
    for (uint32_t a = 0; a < kc->n_args; a++) {
        const DLTensor *t = k_arg(kc, a);
        size_t bytes = (size_t)k_numel(t) * sizeof(float);
        for (uint32_t i = 0; i < n_out; i++)
            if (!apart(out[i], row, k_ptr(t), bytes) &&
                !(i == may && a == as && out[i] == k_ptr(t)))
                return false;
    }
    return true;
}

static bool row_f32(const DLTensor *t, int64_t n) {
    return k_dtype(t) == RLY_DTYPE_F32 && t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == n &&
           t->strides == NULL;
}

/* The step's weight (R's packed form, the dense kernel's own cache entry, or R in place) and
 * scratch: g (n_gates H) and the new states (2 H). The tasks write the new states to scratch
 * when a planned output shares bytes with an input every task reads (they are copied out after
 * the join), else straight to the outputs (kern_fast_lstm_cell). False: out of memory. */
static bool step_begin(KCall *kc, const DLTensor *h, const DLTensor *r, int64_t H, int64_t n_gates,
                       Step *s) {
    SGemm g = {.m = 1,
               .n = n_gates * H,
               .k = H,
               .batch = 1,
               .a = k_ptr(h),
               .a_rs = H,
               .a_cs = 1,
               .b = k_ptr(r),
               .b_rs = 1,
               .b_cs = H,
               .b_mod = 1,
               .ldc = n_gates * H};
    kern_sgemm_prepare(kc, &g, false, 1, 1);
    float *gp = k_scratch_raw(kc, (size_t)(n_gates + 2) * (size_t)H * sizeof(float));
    if (gp == NULL) return false;
    s->h = k_ptr(h), s->r = k_ptr(r), s->rp = g.b_packed, s->H = H, s->n_gates = n_gates;
    s->gp = gp, s->h2 = gp + n_gates * H;
    return true;
}

int kern_fast_lstm_cell(KCall *kc) {
    if (kc->n_args != 4 || kc->n_in != 4 || kc->n_out != 2 || !kc->out_tuple)
        return k_error(kc, "an LSTM cell takes 4 tensors and makes 2");
    const DLTensor *h = k_arg(kc, 0), *r = k_arg(kc, 1), *xp = k_arg(kc, 2), *c = k_arg(kc, 3);
    int64_t H = h->ndim == 2 ? h->shape[1] : 0;
    const int64_t *gate;
    if (H <= 0 || !row_f32(h, H) || !row_f32(xp, 4 * H) || !row_f32(c, H) ||
        k_dtype(r) != RLY_DTYPE_F32 || r->ndim != 2 || r->shape[0] != 4 * H || r->shape[1] != H ||
        r->strides != NULL || k_ints(kc, "gates", &gate) != 4)
        return k_error(kc, "an LSTM cell takes float32 h (1, H), R (4H, H), xp (1, 4H), c (1, H)"
                           " and 4 gates");
    bool seen[4] = {0};
    for (int q = 0; q < 4; q++) {
        if (gate[q] < 0 || gate[q] > 3 || seen[gate[q]])
            return k_error(kc, "an LSTM cell's gates are the 4 fields 0..3");
        seen[gate[q]] = true;
    }
    int64_t shape[2] = {1, H};
    DLTensor *h2 = k_out_raw(kc, 0, RLY_DTYPE_F32, 2, shape);
    DLTensor *c2 = h2 ? k_out_raw(kc, 1, RLY_DTYPE_F32, 2, shape) : NULL;
    if (c2 == NULL) return -1;
    Step s = {.xp = k_ptr(xp), .c = k_ptr(c), .gate = gate, .gates = gate_level()};
    if (!step_begin(kc, h, r, H, 4, &s)) return -1;
    s.c2 = s.h2 + H;
    /* Straight to the outputs when no task writes what another task reads: h and xp are read
     * by every task (h whole, xp at the task's units), c at the task's units before they are
     * written (so c2 may be c itself). Otherwise through scratch: copying a result out after
     * the join costs a serial pass over lines the other threads wrote. */
    size_t row = (size_t)H * sizeof(float);
    float *ho = k_ptr(h2), *co = k_ptr(c2);
    bool direct = outs_apart(kc, (float *const[]){ho, co}, 2, H, 1, 3); /* c2 may be c (arg 3) */
    if (direct) s.h2 = ho, s.c2 = co;
    run_step(kc, &s);
    if (!direct) {
        memcpy(ho, s.h2, row);
        memcpy(co, s.c2, row);
    }
    return 0;
}

int kern_fast_gru_cell(KCall *kc) {
    if ((kc->n_args != 3 && kc->n_args != 4) || kc->n_in != kc->n_args || kc->n_out != 1 ||
        kc->out_tuple)
        return k_error(kc, "a GRU cell takes 3 or 4 tensors and makes 1");
    const DLTensor *h = k_arg(kc, 0), *r = k_arg(kc, 1), *x = k_arg(kc, 2);
    const DLTensor *bn = kc->n_args == 4 ? k_arg(kc, 3) : NULL;
    int64_t H = h->ndim == 2 ? h->shape[1] : 0;
    const int64_t *gate;
    if (H <= 0 || !row_f32(h, H) || !row_f32(x, 3 * H) || k_dtype(r) != RLY_DTYPE_F32 ||
        r->ndim != 2 || r->shape[0] != 3 * H || r->shape[1] != H || r->strides != NULL ||
        (bn != NULL && (k_dtype(bn) != RLY_DTYPE_F32 || k_numel(bn) != H || bn->ndim > 2 ||
                        bn->shape[bn->ndim - 1] != H || bn->strides != NULL)) ||
        k_ints(kc, "gates", &gate) != 3)
        return k_error(kc, "a GRU cell takes float32 h (1, H), R (3H, H), x (1, 3H), bn (H) and "
                           "3 gates");
    if (gate[0] < 0 || gate[0] > 2 || gate[1] < 0 || gate[1] > 2 || gate[2] < 0 || gate[2] > 2 ||
        gate[0] == gate[1] || gate[0] == gate[2] || gate[1] == gate[2])
        return k_error(kc, "a GRU cell's gates are the 3 fields 0..2");
    int64_t shape[2] = {1, H};
    DLTensor *h2 = k_out_raw(kc, 0, RLY_DTYPE_F32, 2, shape);
    if (h2 == NULL) return -1;
    Step s = {.xp = k_ptr(x), .bn = bn ? k_ptr(bn) : NULL, .gate = gate, .gru = gru_level()};
    if (!step_begin(kc, h, r, H, 3, &s)) return -1;
    /* Straight to the output unless it shares bytes with h, x or bn (every task reads h) */
    size_t row = (size_t)H * sizeof(float);
    float *ho = k_ptr(h2);
    bool direct = outs_apart(kc, (float *const[]){ho}, 1, H, UINT32_MAX, UINT32_MAX);
    if (direct) s.h2 = ho;
    run_step(kc, &s);
    if (!direct) memcpy(ho, s.h2, row);
    return 0;
}

/* ---- runs of steps ---------------------------------------------------------------------------
 *
 * A FuseRNNCell run function (its consecutive steps as one function): the steps in order, each
 * as the cell kernel runs it (the same sums and gate arithmetic, so the same bits as one call
 * per step), step t reading the h and c that step t - 1 wrote into its outputs, all in one pool
 * run (seq_run). The call saves what the VM did between two cell calls, and the fork per step. The
 * outputs go straight to their buffers when none of them shares bytes with an input (c_1 may be c0
 * itself: a task reads c at its units before it writes them); otherwise every result goes to
 * scratch first and is copied out at the end, once every input has been read. */

/* The steps of a run with two or more tasks a step: one pool run for all of them, not one per
 * step. Task t's thread computes unit t of every step (its units' weights stay in its L2, as
 * with a fork per step), then any unit of the step nobody has claimed (a thread that never
 * joined, or was descheduled), then waits until every unit of the step is done (the step's h is
 * whole) before it starts the next. A thread that joins late finds the steps before claimed and
 * catches up; the caller alone, when no worker joins, claims every unit of every step in order.
 * Each unit is step_task's, so the bits are those of one fork per step. */
typedef struct SeqRun {
    Step s;               /* the run's fixed fields */
    int64_t n, units;     /* steps, units a step */
    const float *h0, *c0; /* the run's initial state */
    const float *const *xp;
    float *const *dst;        /* results: h (and c) of each step, 2 a step for an LSTM */
    int per;                  /* results a step: 2 (LSTM) or 1 (GRU) */
    _Atomic uint8_t *claimed; /* n x units */
    _Atomic int64_t done;     /* units finished, all steps */
} SeqRun;

/* Step k of the run: the fixed fields, its state in and its results out. */
static Step seq_step(const SeqRun *q, int64_t k) {
    Step st = q->s;
    int per = q->per;
    st.h = k == 0 ? q->h0 : q->dst[per * (k - 1)];
    st.c = k == 0 ? q->c0 : per == 2 ? q->dst[2 * k - 1] : NULL;
    st.xp = q->xp[k];
    st.h2 = q->dst[per * k];
    st.c2 = per == 2 ? q->dst[2 * k + 1] : NULL;
    st.backward = (k & 1) != 0;
    return st;
}

static void seq_unit(SeqRun *q, int64_t k, int64_t u, int worker) {
    Step st = seq_step(q, k);
    step_task(&st, u, worker);
    atomic_fetch_add_explicit(&q->done, 1, memory_order_release);
}

static void seq_wait(SeqRun *q, int64_t target) {
    if (atomic_load_explicit(&q->done, memory_order_acquire) >= target) return;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 1; atomic_load_explicit(&q->done, memory_order_acquire) < target; i++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if ((i & 1023) != 0) continue;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 50000L)
            sched_yield(); /* the unit's thread was descheduled: let it run */
    }
}

static void seq_task(void *ctx, int64_t t, int worker) {
    SeqRun *q = ctx;
    for (int64_t k = 0; k < q->n; k++) {
        _Atomic uint8_t *cl = q->claimed + k * q->units;
        for (int64_t i = 0; i < q->units; i++) {
            int64_t u = (t + i) % q->units; /* its own unit first */
            if (atomic_load_explicit(&cl[u], memory_order_relaxed) == 0 &&
                atomic_exchange_explicit(&cl[u], 1, memory_order_relaxed) == 0)
                seq_unit(q, k, u, worker);
        }
        seq_wait(q, (k + 1) * q->units);
    }
}

/* Steps 0 .. n - 1 of a run; s holds the fixed fields (R, gates, scratch). False: out of memory
 * (error set). */
static bool seq_run(KCall *kc, const Step *s, int64_t n, const float *h0, const float *c0,
                    const float *const *xp, float *const *dst, int per) {
    SeqRun q = {.s = *s, .n = n, .h0 = h0, .c0 = c0, .xp = xp, .dst = dst, .per = per};
    q.units = step_parts(kc, &q.s);
    if (q.units <= 1) { /* one task a step: no pool */
        for (int64_t k = 0; k < n; k++) {
            Step st = seq_step(&q, k);
            step_task(&st, 0, 0);
        }
        return true;
    }
    q.claimed = k_scratch(kc, (size_t)(n * q.units)); /* zeroed */
    if (q.claimed == NULL) return false;
    atomic_init(&q.done, 0);
    k_parallel(kc, q.units, seq_task, &q);
    return true;
}

/* Output i of the call, checked to be float32 (1, H) rows: its data, NULL (error set). */
static float *seq_out(KCall *kc, uint32_t i, int64_t H) {
    int64_t shape[2] = {1, H};
    DLTensor *o = k_out_raw(kc, i, RLY_DTYPE_F32, 2, shape);
    return o != NULL ? k_ptr(o) : NULL;
}

/* The outputs (n_out of H floats) of a run, or where its steps write them (staged: scratch,
 * copied out by seq_finish). False: out of memory (error set). */
static bool seq_begin(KCall *kc, uint32_t n_out, int64_t H, uint32_t may, uint32_t as, float **out,
                      float **dst, bool *staged) {
    for (uint32_t i = 0; i < n_out; i++)
        if ((out[i] = seq_out(kc, i, H)) == NULL) return false;
    *staged = !outs_apart(kc, out, n_out, H, may, as);
    if (!*staged) {
        memcpy(dst, out, sizeof(float *) * n_out);
        return true;
    }
    float *st = k_scratch_raw(kc, (size_t)n_out * (size_t)H * sizeof(float));
    if (st == NULL) return false;
    for (uint32_t i = 0; i < n_out; i++)
        dst[i] = st + (size_t)i * (size_t)H;
    return true;
}

static void seq_finish(float *const *out, float *const *dst, uint32_t n_out, int64_t H,
                       bool staged) {
    if (staged)
        for (uint32_t i = 0; i < n_out; i++)
            memcpy(out[i], dst[i], (size_t)H * sizeof(float));
}

/* The steps attribute: n >= 1 with n_args == fixed + n, else 0. */
static int64_t seq_steps(KCall *kc, uint32_t fixed) {
    int64_t n = k_int(kc, "steps");
    return n >= 1 && n <= 65536 && kc->n_args == fixed + (uint64_t)n && kc->n_in == kc->n_args &&
                   kc->out_tuple
               ? n
               : 0;
}

int kern_fast_lstm_seq(KCall *kc) {
    int64_t n = seq_steps(kc, 3);
    const DLTensor *h = n ? k_arg(kc, 0) : NULL, *r = n ? k_arg(kc, 1) : NULL;
    const DLTensor *c = n ? k_arg(kc, 2) : NULL;
    int64_t H = h != NULL && h->ndim == 2 ? h->shape[1] : 0;
    const int64_t *gate;
    if (n == 0 || kc->n_out != 2 * (uint64_t)n || H <= 0 || !row_f32(h, H) || !row_f32(c, H) ||
        k_dtype(r) != RLY_DTYPE_F32 || r->ndim != 2 || r->shape[0] != 4 * H || r->shape[1] != H ||
        r->strides != NULL || k_ints(kc, "gates", &gate) != 4)
        return k_error(kc, "an LSTM run takes float32 h (1, H), R (4H, H), c (1, H), its steps' "
                           "xp (1, 4H), 4 gates and its number of steps");
    for (int64_t t = 0; t < n; t++)
        if (!row_f32(k_arg(kc, 3 + (uint32_t)t), 4 * H))
            return k_error(kc, "an LSTM run's xp are float32 (1, 4H)");
    bool seen[4] = {0};
    for (int q = 0; q < 4; q++) {
        if (gate[q] < 0 || gate[q] > 3 || seen[gate[q]])
            return k_error(kc, "an LSTM cell's gates are the 4 fields 0..3");
        seen[gate[q]] = true;
    }
    uint32_t n_out = 2 * (uint32_t)n;
    float **out = k_scratch_raw(kc, 2 * sizeof(float *) * n_out);
    if (out == NULL) return -1;
    float **dst = out + n_out;
    bool staged;
    if (!seq_begin(kc, n_out, H, 1, 2, out, dst, &staged)) return -1;
    Step s = {.gate = gate, .gates = gate_level()};
    if (!step_begin(kc, h, r, H, 4, &s)) return -1;
    const float **xp = k_scratch_raw(kc, sizeof(float *) * (size_t)n);
    if (xp == NULL) return -1;
    for (int64_t t = 0; t < n; t++)
        xp[t] = k_ptr(k_arg(kc, 3 + (uint32_t)t));
    if (!seq_run(kc, &s, n, k_ptr(h), k_ptr(c), xp, dst, 2)) return -1;
    seq_finish(out, dst, n_out, H, staged);
    return 0;
}

int kern_fast_gru_seq(KCall *kc) {
    int64_t steps = k_int(kc, "steps");
    uint32_t fixed = kc->n_args == 3 + (uint64_t)steps ? 3 : 2;
    int64_t n = seq_steps(kc, fixed);
    const DLTensor *h = n ? k_arg(kc, 0) : NULL, *r = n ? k_arg(kc, 1) : NULL;
    const DLTensor *bn = n && fixed == 3 ? k_arg(kc, 2) : NULL;
    int64_t H = h != NULL && h->ndim == 2 ? h->shape[1] : 0;
    const int64_t *gate;
    if (n == 0 || kc->n_out != (uint64_t)n || H <= 0 || !row_f32(h, H) ||
        k_dtype(r) != RLY_DTYPE_F32 || r->ndim != 2 || r->shape[0] != 3 * H || r->shape[1] != H ||
        r->strides != NULL ||
        (bn != NULL && (k_dtype(bn) != RLY_DTYPE_F32 || k_numel(bn) != H || bn->ndim > 2 ||
                        bn->shape[bn->ndim - 1] != H || bn->strides != NULL)) ||
        k_ints(kc, "gates", &gate) != 3)
        return k_error(kc, "a GRU run takes float32 h (1, H), R (3H, H), bn (H), its steps' x "
                           "(1, 3H), 3 gates and its number of steps");
    for (int64_t t = 0; t < n; t++)
        if (!row_f32(k_arg(kc, fixed + (uint32_t)t), 3 * H))
            return k_error(kc, "a GRU run's x are float32 (1, 3H)");
    if (gate[0] < 0 || gate[0] > 2 || gate[1] < 0 || gate[1] > 2 || gate[2] < 0 || gate[2] > 2 ||
        gate[0] == gate[1] || gate[0] == gate[2] || gate[1] == gate[2])
        return k_error(kc, "a GRU cell's gates are the 3 fields 0..2");
    uint32_t n_out = (uint32_t)n;
    float **out = k_scratch_raw(kc, 2 * sizeof(float *) * n_out);
    if (out == NULL) return -1;
    float **dst = out + n_out;
    bool staged;
    if (!seq_begin(kc, n_out, H, UINT32_MAX, UINT32_MAX, out, dst, &staged)) return -1;
    Step s = {.bn = bn ? k_ptr(bn) : NULL, .gate = gate, .gru = gru_level()};
    if (!step_begin(kc, h, r, H, 3, &s)) return -1;
    const float **xp = k_scratch_raw(kc, sizeof(float *) * (size_t)n);
    if (xp == NULL) return -1;
    for (int64_t t = 0; t < n; t++)
        xp[t] = k_ptr(k_arg(kc, fixed + (uint32_t)t));
    if (!seq_run(kc, &s, n, k_ptr(h), NULL, xp, dst, 1)) return -1;
    seq_finish(out, dst, n_out, H, staged);
    return 0;
}
