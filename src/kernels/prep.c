/* prep.c - data kernels derive once from constant inputs (kernel.h, "prepared constants"). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

typedef struct PrepEntry {
    const void *data; /* the constant's first element */
    uint64_t key;
    size_t bytes;
    void *blob;
    struct PrepEntry *next;
} PrepEntry;

struct KPrepCache {
    pthread_mutex_t mu;
    PrepEntry *head;
    size_t bytes;
};

KPrepCache *k_prep_cache_new(void) {
    KPrepCache *c = sup_calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void k_prep_cache_clear(KPrepCache *c) {
    if (c == NULL) return;
    pthread_mutex_lock(&c->mu);
    for (PrepEntry *e = c->head, *nx; e != NULL; e = nx) {
        nx = e->next;
        free(e->blob);
        free(e);
    }
    c->head = NULL;
    c->bytes = 0;
    pthread_mutex_unlock(&c->mu);
}

void k_prep_cache_free(KPrepCache *c) {
    if (c == NULL) return;
    k_prep_cache_clear(c);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

size_t k_prep_cache_bytes(const KPrepCache *c) { return c ? c->bytes : 0; }

const void *k_prepared(KCall *kc, uint32_t in, uint64_t key, size_t bytes, KPrepFill fill,
                       const void *arg) {
    if (kc->in_const == NULL || in >= kc->n_in) return NULL;
    KPrepCache *c = kc->in_const[in] == 1 ? kc->prep : kc->in_const[in] == 2 ? kc->prep_run : NULL;
    if (c == NULL) return NULL;
    const DLTensor *t = kc->in[in];
    const void *data = k_ptr(t);
    pthread_mutex_lock(&c->mu);
    void *blob = NULL;
    for (PrepEntry *e = c->head; e != NULL; e = e->next)
        if (e->data == data && e->key == key && e->bytes == bytes) {
            blob = e->blob;
            break;
        }
    if (blob == NULL) {
        size_t cap = (bytes + 63) / 64 * 64;
        PrepEntry *e = malloc(sizeof *e);
        blob = cap ? aligned_alloc(64, cap) : NULL;
        if (e == NULL || blob == NULL) {
            free(e);
            free(blob);
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        memset(blob, 0, cap);
        fill(blob, t, arg);
        *e = (PrepEntry){data, key, bytes, blob, c->head};
        c->head = e;
        c->bytes += cap;
    }
    pthread_mutex_unlock(&c->mu);
    return blob;
}
