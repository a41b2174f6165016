/* profile.c - the recorder behind `rly run --profile` and `rly bench --profile` (probe.h,
 * docs/tools.md "Profiles"): complete events per operator call or fused group, written as a
 * Chrome trace (the JSON object format of the Trace Event Format: {"traceEvents": [...]}), which
 * Perfetto and chrome://tracing open, and a table of the names with the most time.
 *
 * Strings (names, categories, args objects) are interned: a site of a loop runs many times with
 * the same shapes, so an event is six integers. Totals per name are kept apart from the events,
 * so the table stays exact when events are dropped past RT_PROFILE_MAX_EVENTS. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/probe.h"
#include "runtime/session.h"

typedef struct ProfEvent {
    uint32_t name, cat, args, tid;
    uint64_t t0, dur;
} ProfEvent;

/* Totals of one name (indexed by the name's string id). */
typedef struct ProfTotal {
    uint64_t ns, calls;
    uint32_t cat;
} ProfTotal;

struct RtProfile {
    Vec(char *) strs;     /* id -> string (owned) */
    uint32_t *slots;      /* open addressing: string id + 1, 0 empty */
    size_t n_slots;       /* a power of two, at least twice the strings */
    Vec(ProfEvent) ev;    /* at most RT_PROFILE_MAX_EVENTS */
    Vec(ProfTotal) total; /* by name id (grown on demand) */
    uint64_t dropped;     /* events past the cap */
    int max_worker;       /* the highest pool worker with events (rt_profile_add_worker) */
    uint64_t origin;      /* rt_profile_now() at rt_profile_new: ts 0 */
};

uint64_t rt_profile_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A small id per thread (1, 2, ...), in the order threads first record: the trace's tid. */
static uint32_t thread_id(void) {
    static _Atomic uint32_t next = 1;
    static _Thread_local uint32_t id;
    if (id == 0) id = atomic_fetch_add(&next, 1);
    return id;
}

RtProfile *rt_profile_new(void) {
    RtProfile *p = sup_calloc(1, sizeof *p);
    p->n_slots = 256;
    p->slots = sup_calloc(p->n_slots, sizeof *p->slots);
    p->origin = rt_profile_now();
    return p;
}

void rt_profile_free(RtProfile *p) {
    if (p == NULL) return;
    for (size_t i = 0; i < p->strs.len; i++)
        free(p->strs.data[i]);
    vec_free(&p->strs);
    free(p->slots);
    vec_free(&p->ev);
    vec_free(&p->total);
    free(p);
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211u;
    return h;
}

uint32_t rt_profile_intern(RtProfile *p, const char *s, size_t n) {
    size_t mask = p->n_slots - 1, i = (size_t)hash_bytes(s, n) & mask;
    for (; p->slots[i] != 0; i = (i + 1) & mask) {
        const char *t = p->strs.data[p->slots[i] - 1];
        if (strncmp(t, s, n) == 0 && t[n] == '\0') return p->slots[i] - 1;
    }
    char *copy = sup_malloc(n + 1);
    memcpy(copy, s, n);
    copy[n] = '\0';
    uint32_t id = (uint32_t)p->strs.len;
    vec_push(&p->strs, copy);
    p->slots[i] = id + 1;
    if (p->strs.len * 2 > p->n_slots) { /* grow and reinsert */
        free(p->slots);
        p->n_slots *= 2;
        p->slots = sup_calloc(p->n_slots, sizeof *p->slots);
        mask = p->n_slots - 1;
        for (uint32_t k = 0; k < (uint32_t)p->strs.len; k++) {
            const char *t = p->strs.data[k];
            size_t j = (size_t)hash_bytes(t, strlen(t)) & mask;
            while (p->slots[j] != 0)
                j = (j + 1) & mask;
            p->slots[j] = k + 1;
        }
    }
    return id;
}

void rt_profile_add(RtProfile *p, uint32_t name, uint32_t cat, uint32_t args, uint64_t t0,
                    uint64_t t1) {
    uint64_t dur = t1 > t0 ? t1 - t0 : 0;
    while (p->total.len <= name) {
        ProfTotal z = {0, 0, cat};
        vec_push(&p->total, z);
    }
    p->total.data[name].ns += dur;
    p->total.data[name].calls++;
    p->total.data[name].cat = cat;
    if (p->ev.len >= RT_PROFILE_MAX_EVENTS) {
        p->dropped++;
        return;
    }
    ProfEvent e = {name, cat, args, thread_id(), t0, dur};
    vec_push(&p->ev, e);
}

/* Pool workers' tracks: tids past any calling thread's (thread_id counts those from 1). */
#define WORKER_TID 100000u

void rt_profile_add_worker(RtProfile *p, uint32_t name, uint32_t cat, uint32_t args, int worker,
                           uint64_t t0, uint64_t t1) {
    if (worker <= 0) return;
    if (p->ev.len >= RT_PROFILE_MAX_EVENTS) {
        p->dropped++;
        return;
    }
    ProfEvent e = {name, cat, args, WORKER_TID + (uint32_t)worker, t0, t1 > t0 ? t1 - t0 : 0};
    vec_push(&p->ev, e);
    if (worker > p->max_worker) p->max_worker = worker;
}

static void json_escaped(StrBuf *sb, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            sb_printf(sb, "\\%c", c);
        else if (c < 0x20)
            sb_printf(sb, "\\u%04x", c);
        else
            sb_putc(sb, (char)c);
    }
}

void rt_profile_arg(StrBuf *sb, const char *key, const char *value) {
    if (sb->len > 0) sb_puts(sb, ", ");
    sb_putc(sb, '"');
    json_escaped(sb, key);
    sb_puts(sb, "\": \"");
    json_escaped(sb, value);
    sb_putc(sb, '"');
}

bool rt_profile_write(const RtProfile *p, const char *path, char *err, size_t cap) {
    SupOut *o = sup_out_open(path, err, cap);
    if (o == NULL) return false;
    StrBuf sb = {0};
    bool ok = true;
    sb_puts(&sb, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"producer\": \"rly\"");
    if (p->dropped) sb_printf(&sb, ", \"dropped_events\": %llu", (unsigned long long)p->dropped);
    sb_puts(&sb, "},\n\"traceEvents\": [\n");
    sb_puts(&sb, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"args\": "
                 "{\"name\": \"rly\"}}");
    for (int w = 1; w <= p->max_worker; w++)
        sb_printf(&sb,
                  ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %u, "
                  "\"args\": {\"name\": \"pool worker %d\"}}",
                  WORKER_TID + (unsigned)w, w);
    for (size_t i = 0; i < p->ev.len && ok; i++) {
        const ProfEvent *e = &p->ev.data[i];
        uint64_t t0 = e->t0 >= p->origin ? e->t0 - p->origin : 0;
        sb_puts(&sb, ",\n{\"name\": \"");
        json_escaped(&sb, p->strs.data[e->name]);
        sb_puts(&sb, "\", \"cat\": \"");
        json_escaped(&sb, p->strs.data[e->cat]);
        /* microseconds with nanosecond digits: the format's unit */
        sb_printf(&sb,
                  "\", \"ph\": \"X\", \"ts\": %llu.%03u, \"dur\": %llu.%03u, \"pid\": 1, "
                  "\"tid\": %u",
                  (unsigned long long)(t0 / 1000), (unsigned)(t0 % 1000),
                  (unsigned long long)(e->dur / 1000), (unsigned)(e->dur % 1000), e->tid);
        if (e->args != UINT32_MAX) sb_printf(&sb, ", \"args\": {%s}", p->strs.data[e->args]);
        sb_putc(&sb, '}');
        if (sb.len > (1u << 20)) { /* stream in 1 MiB pieces */
            ok = sup_out_write(o, sb.data, sb.len);
            sb.len = 0;
        }
    }
    sb_puts(&sb, "\n]}\n");
    ok = ok && sup_out_write(o, sb.data, sb.len);
    sb_free(&sb);
    if (!ok) {
        sup_out_abort(o);
        snprintf(err, cap, "%s: cannot write the profile", path);
        return false;
    }
    return sup_out_commit(o, err, cap);
}

typedef struct ProfRow {
    uint64_t ns;
    uint32_t id;
} ProfRow;

static int by_total(const void *a, const void *b) {
    const ProfRow *x = a, *y = b;
    if (x->ns != y->ns) return x->ns < y->ns ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

char *rt_profile_table(const RtProfile *p, int top) {
    StrBuf sb = {0};
    uint32_t n = 0;
    ProfRow *rows = sup_malloc(sizeof(ProfRow) * (p->total.len + 1));
    uint64_t all = 0;
    for (uint32_t i = 0; i < (uint32_t)p->total.len; i++)
        if (p->total.data[i].calls > 0) {
            rows[n].ns = p->total.data[i].ns;
            rows[n++].id = i;
            all += p->total.data[i].ns;
        }
    qsort(rows, n, sizeof *rows, by_total);
    sb_printf(&sb, "profile: %u operators or fused groups, %.3f ms in all\n", n, (double)all / 1e6);
    sb_printf(&sb, "%12s %7s %9s %12s  %s\n", "total ms", "share", "calls", "mean us", "name");
    for (uint32_t k = 0; k < n && (top <= 0 || k < (uint32_t)top); k++) {
        const ProfTotal *t = &p->total.data[rows[k].id];
        sb_printf(&sb, "%12.3f %6.1f%% %9llu %12.3f  %s [%s]\n", (double)t->ns / 1e6,
                  all ? 100.0 * (double)t->ns / (double)all : 0.0, (unsigned long long)t->calls,
                  (double)t->ns / 1e3 / (double)t->calls, p->strs.data[rows[k].id],
                  p->strs.data[t->cat]);
    }
    if (top > 0 && n > (uint32_t)top) sb_printf(&sb, "(%u more)\n", n - (uint32_t)top);
    if (p->dropped)
        sb_printf(&sb, "(the trace keeps the first %u events; %llu more were only summed)\n",
                  RT_PROFILE_MAX_EVENTS, (unsigned long long)p->dropped);
    free(rows);
    return sb_take(&sb);
}

/* ---- the session API (rly_runtime.h, "probes") ---------------------------------------------- */

RLY_API rly_status rly_session_set_probes(rly_session *s, unsigned mask) {
    if (s == NULL) return rt_fail(RLY_STATUS_INVALID, "rly_session_set_probes: NULL session");
    if (mask & ~(unsigned)(RLY_PROBE_NUMERICS | RLY_PROBE_PROFILE))
        return rt_fail(RLY_STATUS_INVALID, "rly_session_set_probes: unknown bits in mask 0x%x",
                       mask);
    vm_set_probe(rt_session_vm(s), (mask & RLY_PROBE_NUMERICS ? VM_PROBE_NUMERICS : 0u) |
                                       (mask & RLY_PROBE_PROFILE ? VM_PROBE_PROFILE : 0u));
    return RLY_STATUS_OK;
}

RLY_API rly_status rly_session_write_profile(rly_session *s, const char *path, int top,
                                             char **table) {
    if (table) *table = NULL;
    if (s == NULL || path == NULL)
        return rt_fail(RLY_STATUS_INVALID, "rly_session_write_profile: NULL argument");
    const RtProfile *p = vm_profile(rt_session_vm(s));
    if (p == NULL)
        return rt_fail(RLY_STATUS_ERROR, "rly_session_write_profile: the session is not profiling "
                                         "(rly_session_set_probes with RLY_PROBE_PROFILE)");
    char err[512];
    if (!rt_profile_write(p, path, err, sizeof err)) return rt_fail(RLY_STATUS_IO, "%s", err);
    if (table) *table = rt_profile_table(p, top);
    return RLY_STATUS_OK;
}
