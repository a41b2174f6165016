/* pool.c - the thread pool (support.h, "thread pool"). PLACEHOLDER: runs every task on the
 * caller until the pool lands. */
#include <stdlib.h>

#include "support.h"

struct SupPool {
    int n;
};

SupPool *sup_pool_new(int n_threads) {
    SupPool *p = sup_calloc(1, sizeof *p);
    p->n = n_threads < 1 ? 1 : n_threads;
    return p;
}
void sup_pool_free(SupPool *p) { free(p); }
int sup_pool_threads(const SupPool *p) { return p ? p->n : 1; }
void sup_pool_run(SupPool *p, int64_t n_tasks, SupTaskFn fn, void *ctx) {
    (void)p;
    for (int64_t t = 0; t < n_tasks; t++)
        fn(ctx, t, 0);
}
int sup_default_threads(void) { return 1; }
