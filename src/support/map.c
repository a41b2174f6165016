/* map.c - hashing, pointer-keyed and string-keyed open-addressing maps, string interning. */
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

uint64_t sup_hash_bytes(const void *p, size_t n, uint64_t seed) {
    /* FNV-1a over bytes, finished with a 64-bit mixer */
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static inline size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static size_t ptrmap_slot(const PtrMap *m, const void *key) {
    size_t mask = m->cap - 1, i = ptr_hash(key) & mask;
    while (m->keys[i] != NULL && m->keys[i] != key)
        i = (i + 1) & mask;
    return i;
}

void *ptrmap_get(const PtrMap *m, const void *key) {
    if (m->cap == 0) return NULL;
    size_t i = ptrmap_slot(m, key);
    return m->keys[i] ? m->vals[i] : NULL;
}

bool ptrmap_has(const PtrMap *m, const void *key) {
    if (m->cap == 0) return false;
    return m->keys[ptrmap_slot(m, key)] != NULL;
}

static void ptrmap_rehash(PtrMap *m, size_t cap) {
    /* keys and vals share one block (vals = keys + cap), so a failed allocation leaks nothing */
    void **block = sup_calloc(sup_mul(cap, 2), sizeof(void *));
    PtrMap n = {block, block + cap, 0, cap};
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == NULL) continue;
        size_t j = ptrmap_slot(&n, m->keys[i]);
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
        n.len++;
    }
    free(m->keys);
    *m = n;
}

void ptrmap_put(PtrMap *m, const void *key, void *val) {
    RLY_CHECK(key != NULL, "ptrmap_put: NULL key");
    if ((m->len + 1) * 4 >= m->cap * 3) ptrmap_rehash(m, m->cap ? m->cap * 2 : 16);
    size_t i = ptrmap_slot(m, key);
    if (m->keys[i] == NULL) {
        m->keys[i] = (void *)key;
        m->len++;
    }
    m->vals[i] = val;
}

void ptrmap_free(PtrMap *m) {
    free(m->keys); /* vals live in the same block */
    memset(m, 0, sizeof *m);
}

/* ---- string map ---------------------------------------------------------------------- */

struct StrMapEntry {
    const char *key; /* NUL-terminated copy in m->keys; NULL = empty slot */
    size_t len;
    uint64_t hash;
    void *val;
};

static size_t strmap_slot(const StrMap *m, const char *s, size_t n, uint64_t h) {
    size_t mask = m->cap - 1, i = (size_t)h & mask;
    for (;;) {
        struct StrMapEntry *e = &m->slots[i];
        if (e->key == NULL) return i;
        if (e->hash == h && e->len == n && memcmp(e->key, s, n) == 0) return i;
        i = (i + 1) & mask;
    }
}

void *strmap_get(const StrMap *m, const char *s, size_t n) {
    if (m->cap == 0) return NULL;
    size_t i = strmap_slot(m, s, n, sup_hash_bytes(s, n, 0));
    return m->slots[i].key ? m->slots[i].val : NULL;
}

void strmap_put(StrMap *m, const char *s, size_t n, void *val) {
    if ((m->len + 1) * 4 >= m->cap * 3) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct StrMapEntry *old = m->slots;
        size_t oldcap = m->cap;
        m->slots = sup_calloc(cap, sizeof *m->slots);
        m->cap = cap;
        for (size_t i = 0; i < oldcap; i++) {
            if (old[i].key == NULL) continue;
            m->slots[strmap_slot(m, old[i].key, old[i].len, old[i].hash)] = old[i];
        }
        free(old);
    }
    uint64_t h = sup_hash_bytes(s, n, 0);
    size_t i = strmap_slot(m, s, n, h);
    struct StrMapEntry *e = &m->slots[i];
    if (e->key == NULL) {
        e->key = arena_strndup(&m->keys, s, n);
        e->len = n;
        e->hash = h;
        m->len++;
    }
    e->val = val;
}

void strmap_free(StrMap *m) {
    free(m->slots);
    arena_free(&m->keys);
    memset(m, 0, sizeof *m);
}

/* ---- interning ------------------------------------------------------------------------ */

const char *intern(Interner *in, const char *s, size_t n) {
    const char *p = strmap_get(&in->map, s, n);
    if (p != NULL) return p;
    char *copy = arena_strndup(&in->arena, s, n);
    strmap_put(&in->map, s, n, copy);
    return copy;
}

const char *intern_cstr(Interner *in, const char *s) { return intern(in, s, strlen(s)); }

void intern_free(Interner *in) {
    strmap_free(&in->map);
    arena_free(&in->arena);
}
