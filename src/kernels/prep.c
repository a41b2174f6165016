/* prep.c - data kernels derive once from constant inputs (kernel.h, "prepared constants").
 *
 * A hash table of entries keyed by (the constant's data address, the kernel's key, the byte
 * count), chained, doubled when it holds more entries than buckets, under one mutex (an
 * uncontended lock costs tens of nanoseconds; a call takes microseconds at least). Entries are
 * either made here by a kernel's fill (owned: freed with the cache) or seeded from an executable
 * file (borrowed: the bytes live in the file's mapping). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

typedef struct PrepEntry {
    const void *data; /* the constant's first element */
    uint64_t key;
    size_t bytes;
    void *blob;
    bool owned; /* made by a fill (freed here); else seeded (KPrepItem) */
    struct PrepEntry *next;
} PrepEntry;

struct KPrepCache {
    pthread_mutex_t mu;
    PrepEntry **buckets; /* n_buckets chains (a power of two), NULL until the first entry */
    size_t n_buckets, n_entries;
    size_t bytes;   /* held by owned entries */
    size_t n_fills; /* entries made by kernels */
};

KPrepCache *k_prep_cache_new(void) {
    KPrepCache *c = sup_calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void k_prep_cache_clear(KPrepCache *c) {
    if (c == NULL) return;
    pthread_mutex_lock(&c->mu);
    for (size_t b = 0; b < c->n_buckets; b++)
        for (PrepEntry *e = c->buckets[b], *nx; e != NULL; e = nx) {
            nx = e->next;
            if (e->owned) free(e->blob);
            free(e);
        }
    free(c->buckets);
    c->buckets = NULL;
    c->n_buckets = c->n_entries = c->bytes = c->n_fills = 0;
    pthread_mutex_unlock(&c->mu);
}

void k_prep_cache_free(KPrepCache *c) {
    if (c == NULL) return;
    k_prep_cache_clear(c);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

size_t k_prep_cache_bytes(const KPrepCache *c) { return c ? c->bytes : 0; }

size_t k_prep_cache_fills(const KPrepCache *c) { return c ? c->n_fills : 0; }

static size_t hash_of(const void *data, uint64_t key, size_t bytes) {
    uint64_t h = (uint64_t)(uintptr_t)data * 0x9e3779b97f4a7c15ull;
    h ^= key + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
    h ^= (uint64_t)bytes * 0xff51afd7ed558ccdull;
    return (size_t)(h ^ (h >> 29));
}

/* The entry for (data, key, bytes) or NULL; the lock held. */
static PrepEntry *find(const KPrepCache *c, const void *data, uint64_t key, size_t bytes) {
    if (c->n_buckets == 0) return NULL;
    for (PrepEntry *e = c->buckets[hash_of(data, key, bytes) & (c->n_buckets - 1)]; e != NULL;
         e = e->next)
        if (e->data == data && e->key == key && e->bytes == bytes) return e;
    return NULL;
}

/* Link e in, growing the table first when it is full; false when memory runs out (e is not
 * linked). The lock held. */
static bool link_entry(KPrepCache *c, PrepEntry *e) {
    if (c->n_entries >= c->n_buckets) {
        size_t nb = c->n_buckets ? 2 * c->n_buckets : 16;
        PrepEntry **bk = calloc(nb, sizeof *bk);
        if (bk == NULL) return false;
        for (size_t b = 0; b < c->n_buckets; b++)
            for (PrepEntry *x = c->buckets[b], *nx; x != NULL; x = nx) {
                nx = x->next;
                size_t h = hash_of(x->data, x->key, x->bytes) & (nb - 1);
                x->next = bk[h];
                bk[h] = x;
            }
        free(c->buckets);
        c->buckets = bk;
        c->n_buckets = nb;
    }
    size_t h = hash_of(e->data, e->key, e->bytes) & (c->n_buckets - 1);
    e->next = c->buckets[h];
    c->buckets[h] = e;
    c->n_entries++;
    return true;
}

bool k_prep_cache_seed(KPrepCache *c, const KPrepItem *it) {
    if (c == NULL || it->bytes == 0 || it->blob == NULL) return false;
    pthread_mutex_lock(&c->mu);
    bool ok = find(c, it->data, it->key, it->bytes) != NULL;
    if (!ok) {
        PrepEntry *e = malloc(sizeof *e);
        if (e != NULL) {
            *e =
                (PrepEntry){it->data, it->key, it->bytes, (void *)(uintptr_t)it->blob, false, NULL};
            ok = link_entry(c, e);
            if (!ok) free(e);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static int item_cmp(const void *pa, const void *pb) {
    const KPrepItem *a = pa, *b = pb;
    uintptr_t x = (uintptr_t)a->data, y = (uintptr_t)b->data;
    if (x != y) return x < y ? -1 : 1;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->bytes < b->bytes ? -1 : a->bytes > b->bytes;
}

KPrepItem *k_prep_cache_list(KPrepCache *c, size_t *n) {
    *n = 0;
    if (c == NULL) return NULL;
    pthread_mutex_lock(&c->mu);
    KPrepItem *items = sup_calloc(c->n_entries ? c->n_entries : 1, sizeof *items);
    size_t k = 0;
    for (size_t b = 0; b < c->n_buckets; b++)
        for (const PrepEntry *e = c->buckets[b]; e != NULL; e = e->next)
            items[k++] = (KPrepItem){e->data, e->key, e->bytes, e->blob};
    pthread_mutex_unlock(&c->mu);
    qsort(items, k, sizeof *items, item_cmp);
    *n = k;
    return items;
}

const void *k_prepared(KCall *kc, uint32_t in, uint64_t key, size_t bytes, KPrepFill fill,
                       const void *arg) {
    if (kc->in_const == NULL || in >= kc->n_in || bytes == 0) return NULL;
    KPrepCache *c = kc->in_const[in] == 1 ? kc->prep : kc->in_const[in] == 2 ? kc->prep_run : NULL;
    if (c == NULL) return NULL;
    const DLTensor *t = kc->in[in];
    const void *data = k_ptr(t);
    pthread_mutex_lock(&c->mu);
    PrepEntry *e = find(c, data, key, bytes);
    void *blob = e ? e->blob : NULL;
    if (blob == NULL) {
        size_t cap = (bytes + 63) / 64 * 64;
        e = malloc(sizeof *e);
        blob = sup_alloc_data(64, cap);
        if (e == NULL || blob == NULL) {
            free(e);
            free(blob);
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        memset(blob, 0, cap);
        fill(blob, t, arg);
        *e = (PrepEntry){data, key, bytes, blob, true, NULL};
        if (!link_entry(c, e)) {
            free(e);
            free(blob);
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        c->bytes += cap;
        c->n_fills++;
    }
    pthread_mutex_unlock(&c->mu);
    return blob;
}
