/* probe.h - what a run can be watched with (docs/tools.md "Numerics", "Profiles"): tensor
 * statistics and the NaN/Inf scan behind `rly run --check-numerics` (numerics.c), and the
 * recorder behind `--profile` that writes a Chrome trace (profile.c). Both executors use them:
 * the VM through vm_set_probe (vm.h), the interpreter through ev_set_probe (src/eval). Neither
 * costs anything when off: the executors test one pointer per kernel call. */
#ifndef RLY_RUNTIME_PROBE_H
#define RLY_RUNTIME_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/value.h"
#include "support/support.h"

/* ---- numerics (numerics.c) ------------------------------------------------------------------ */

/* Statistics of one tensor. min, max and the mean are over the finite elements (min > max when
 * there is none). */
typedef struct RtStats {
    uint64_t n;     /* elements */
    uint64_t n_nan; /* NaN elements (floating dtypes only) */
    uint64_t n_inf; /* +-Inf elements */
    double min, max, sum;
} RtStats;

void rt_stats_tensor(const DLTensor *t, RtStats *s);
/* Whether any tensor in v (a tensor, or tuples of them; other values hold none here) holds a
 * NaN or an infinity. Iterative. NULL: false. */
bool rt_value_nonfinite(const Value *v);
/* The NaN and Inf elements of every tensor in v; "6 NaN", "1 Inf" or "2 NaN and 1 Inf" into out. */
void rt_value_nonfinite_counts(const Value *v, uint64_t *n_nan, uint64_t *n_inf);
void rt_nonfinite_text(const Value *v, StrBuf *out);
/* One line per tensor of v: "<indent><label>[.i.j]: float32[2, 3]: min -1, max 4, mean 0.5,
 * 0 NaN, 0 Inf". Iterative over tuples. */
void rt_value_stats_text(const Value *v, const char *indent, const char *label, StrBuf *out);
/* "float32[2, 3]" for a tensor, "(float32[2], int64[])" for a tuple, "value" otherwise;
 * iterative, at most a few hundred bytes (longer tuples are elided). */
void rt_value_shape_text(const Value *v, StrBuf *out);

/* ---- profiles (profile.c) ------------------------------------------------------------------- */

/* Complete events ("ph":"X") of one recorder: name, category, thread, start and duration, and
 * an args object. Strings are interned once (an operator site runs many times). A recorder keeps
 * at most RT_PROFILE_MAX_EVENTS events (the rest are counted, and still summed into the table). */
typedef struct RtProfile RtProfile;
#define RT_PROFILE_MAX_EVENTS (1u << 21)

RtProfile *rt_profile_new(void);
void rt_profile_free(RtProfile *p); /* NULL is a no-op */
/* Nanoseconds of CLOCK_MONOTONIC. */
uint64_t rt_profile_now(void);
/* The id of string s (n bytes), interned in p. */
uint32_t rt_profile_intern(RtProfile *p, const char *s, size_t n);
/* Record an event [t0, t1) of the calling thread. args: an interned string holding the members
 * of a JSON object without its braces (`"loc": "a.rly:3:5", "shapes": "..."`), or UINT32_MAX. */
void rt_profile_add(RtProfile *p, uint32_t name, uint32_t cat, uint32_t args, uint64_t t0,
                    uint64_t t1);
/* Record an event of the thread pool's worker w (1, 2, ...: its own track in the trace, named
 * "pool worker w"), not summed into the table (the calling thread's event of the same operator
 * already counts its time). */
void rt_profile_add_worker(RtProfile *p, uint32_t name, uint32_t cat, uint32_t args, int worker,
                           uint64_t t0, uint64_t t1);
/* Append `"key": "value"` (value JSON-escaped) to an args object being built in sb. */
void rt_profile_arg(StrBuf *sb, const char *key, const char *value);
/* Write p as a Chrome trace (JSON object format, "traceEvents") to path, whole or not at all.
 * false with a message in err. */
bool rt_profile_write(const RtProfile *p, const char *path, char *err, size_t cap);
/* The table of the `top` names with the most total time: total, share, calls, mean, name;
 * malloc'ed. */
char *rt_profile_table(const RtProfile *p, int top);

#endif /* RLY_RUNTIME_PROBE_H */
