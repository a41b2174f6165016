/* alloc.c - allocation with one out-of-memory path, fault injection, panics, and arenas.
 * Allocation failure longjmps to the innermost OomHandler of this thread (installed by each
 * public entry point), or aborts when there is none. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE (sup_alloc_data) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "support/support.h"

_Thread_local OomHandler *sup_oom_handler;
static _Thread_local long fail_countdown = -1;

void rly_panic(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "rly: internal error at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void sup_oom(void) {
    if (sup_oom_handler != NULL) longjmp(sup_oom_handler->jb, 1);
    fputs("rly: out of memory\n", stderr);
    abort();
}

void sup_fail_after(long n) { fail_countdown = n; }

static bool injected_failure(void) {
    if (fail_countdown < 0) return false;
    if (fail_countdown == 0) return true;
    fail_countdown--;
    return false;
}

void *sup_malloc(size_t n) {
    if (n == 0) n = 1;
    void *p = injected_failure() ? NULL : malloc(n);
    if (p == NULL) sup_oom();
    return p;
}

void *sup_realloc(void *p, size_t n) {
    if (n == 0) n = 1;
    void *q = injected_failure() ? NULL : realloc(p, n);
    if (q == NULL) sup_oom();
    return q;
}

void *sup_calloc(size_t count, size_t size) {
    size_t n = sup_mul(count, size);
    void *p = injected_failure() ? NULL : calloc(n ? n : 1, 1);
    if (p == NULL) sup_oom();
    return p;
}

#define HUGE_PAGE ((size_t)2 << 20)

static bool huge_on = true;
static pthread_once_t huge_once = PTHREAD_ONCE_INIT;
static void huge_init(void) {
    const char *e = getenv("RLY_HUGEPAGES");
    huge_on = e == NULL || strcmp(e, "0") != 0;
}

void *sup_alloc_data(size_t align, size_t bytes) {
    if (bytes == 0) bytes = 1;
    bool huge = false;
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_PAGE) {
        pthread_once(&huge_once, huge_init);
        huge = huge_on;
    }
#endif
    if (huge) { /* whole huge pages: the last one's tail (a GEMM's B block) too */
        if (align < HUGE_PAGE) align = HUGE_PAGE;
        if (bytes <= SIZE_MAX - HUGE_PAGE) bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    }
    void *p = NULL;
    if (posix_memalign(&p, align, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    /* advice only: where it is refused the buffer keeps small pages */
    if (huge) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

size_t sup_mul(size_t a, size_t b) {
    if (b != 0 && a > SIZE_MAX / b) sup_oom();
    return a * b;
}

void sup_vec_grow(void **data, size_t *cap, size_t elem, size_t need) {
    size_t c = *cap ? *cap : 4;
    while (c < need) {
        if (c > SIZE_MAX / 2) sup_oom();
        c *= 2;
    }
    *data = sup_realloc(*data, sup_mul(c, elem));
    *cap = c;
}

/* ---- arena ---------------------------------------------------------------------------- */

/* With RLY_ARENA_DEBUG every allocation is its own malloc block, so ASan sees each node. */
struct ArenaChunk {
    ArenaChunk *next;
    size_t size;
    _Alignas(16) char mem[];
};

#define ARENA_CHUNK (64 * 1024)

void arena_init(Arena *a) { memset(a, 0, sizeof *a); }

void arena_free(Arena *a) {
    ArenaChunk *c = a->head;
    while (c != NULL) {
        ArenaChunk *next = c->next;
        free(c);
        c = next;
    }
    memset(a, 0, sizeof *a);
}

static ArenaChunk *new_chunk(Arena *a, size_t size) {
    if (size > SIZE_MAX - sizeof(ArenaChunk)) sup_oom();
    ArenaChunk *c = sup_malloc(sizeof(ArenaChunk) + size);
    c->size = size;
    a->total += size;
    return c;
}

void *arena_alloc(Arena *a, size_t n) {
    if (n == 0) n = 1;
    if (n > SIZE_MAX - 15) sup_oom();
    n = (n + 15) & ~(size_t)15;
#ifdef RLY_ARENA_DEBUG
    ArenaChunk *c = new_chunk(a, n);
    c->next = a->head;
    a->head = c;
    memset(c->mem, 0, n);
    return c->mem;
#else
    if ((size_t)(a->end - a->cur) < n) {
        if (n > ARENA_CHUNK / 4) { /* big block: its own chunk, behind the current one */
            ArenaChunk *c = new_chunk(a, n);
            if (a->head) {
                c->next = a->head->next;
                a->head->next = c;
            } else {
                c->next = NULL;
                a->head = c;
                a->cur = a->end = c->mem + n;
            }
            memset(c->mem, 0, n);
            return c->mem;
        }
        ArenaChunk *c = new_chunk(a, ARENA_CHUNK);
        c->next = a->head;
        a->head = c;
        a->cur = c->mem;
        a->end = c->mem + ARENA_CHUNK;
    }
    void *p = a->cur;
    a->cur += n;
    memset(p, 0, n);
    return p;
#endif
}

void *arena_array(Arena *a, size_t n, size_t size) { return arena_alloc(a, sup_mul(n, size)); }

char *arena_strndup(Arena *a, const char *s, size_t n) {
    char *p = arena_alloc(a, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void *arena_memdup(Arena *a, const void *p, size_t n) {
    void *q = arena_alloc(a, n);
    if (n) memcpy(q, p, n);
    return q;
}
