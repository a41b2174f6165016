/* registry.c - the fast kernels by operator id (fast.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fast.h"

static KernelFn table[OP_ID_COUNT];
static bool enabled;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void index_tables(void) {
    const char *e = getenv("RLY_KERNELS");
    if (e != NULL && strcmp(e, "ref") == 0) return;
    enabled = true;
    const KernelDef *const tables[] = {kern_fast_gemm, kern_fast_elem, kern_fast_nn,
                                       kern_fast_transform};
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const KernelDef *d = tables[t]; d->fn != NULL; d++)
            if (d->op < OP_ID_COUNT) table[d->op] = d->fn;
}

bool kern_fast_enabled(void) {
    pthread_once(&once, index_tables);
    return enabled;
}

KernelFn kern_fast_lookup(uint32_t op) {
    pthread_once(&once, index_tables);
    return op < OP_ID_COUNT ? table[op] : NULL;
}
