/* einsum.c - the one parser of einsum equations (support.h, "einsum equations"). The relation
 * (src/ops/op_transform.c), the reference kernel (src/kernels/ref/transform.c) and the gradient
 * (src/passes/grad_ops_transform.c) of einsum all read equations through it, so they agree on
 * what an equation means; each then checks what depends on its tensors' shapes. */
#include <stdio.h>

#include "support/support.h"

static int label_of(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
}

#define QUOTE_MAX 80 /* messages quote at most this much of the equation */

typedef struct Parser {
    const char *eq, *p;
    int quote_len;    /* how much of eq messages quote */
    const char *more; /* "..." after the quote when eq is longer, else "" */
    SupEinsum *e;
    uint32_t n_items;
    char *why;
    size_t cap;
} Parser;

#define QUOTE(ps) (ps)->quote_len, (ps)->eq, (ps)->more

static bool fail(Parser *ps, const char *fmt, ...) RLY_PRINTF(2, 3);
static bool fail(Parser *ps, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->why, ps->cap, fmt, ap);
    va_end(ap);
    return false;
}

static bool push(Parser *ps, SupEinsumTerm *t, int item) {
    if (ps->n_items == SUP_EINSUM_MAX_ITEMS)
        return fail(ps, "equation \"%.*s%s\" has more than %d labels", QUOTE(ps),
                    SUP_EINSUM_MAX_ITEMS);
    ps->e->items[ps->n_items++] = (int8_t)item;
    t->n++;
    return true;
}

/* One term, from ps->p up to the ',', '-' or end that follows it. */
static bool term(Parser *ps, SupEinsumTerm *t) {
    *t = (SupEinsumTerm){.start = ps->n_items};
    for (;; ps->p++) {
        char c = *ps->p;
        if (c == ' ') continue;
        if (c == '\0' || c == ',' || c == '-') return true;
        if (c == '.') {
            if (ps->p[1] != '.' || ps->p[2] != '.' || t->has_ellipsis)
                return fail(ps, "equation \"%.*s%s\": write \"...\" at most once per term",
                            QUOTE(ps));
            t->has_ellipsis = true;
            ps->p += 2;
            if (!push(ps, t, SUP_EINSUM_ELLIPSIS)) return false;
            continue;
        }
        int l = label_of(c);
        if (l < 0)
            return fail(
                ps, "equation \"%.*s%s\" has '%c', which is not a letter, ',', \"->\" or \"...\"",
                QUOTE(ps), c);
        if (!push(ps, t, l)) return false;
    }
}

const char *sup_einsum_parse(const char *eq, SupEinsum *e, char *why, size_t cap) {
    size_t len = strlen(eq);
    Parser ps = {
        eq,  eq, len > QUOTE_MAX ? QUOTE_MAX : (int)len, len > QUOTE_MAX ? "..." : "", e, 0,
        why, cap};
    memset(e->count, 0, sizeof e->count);
    e->n_in = 0;
    for (;;) {
        if (e->n_in == SUP_EINSUM_MAX_TERMS) {
            fail(&ps, "equation \"%.*s%s\" has more than %d input terms", QUOTE(&ps),
                 SUP_EINSUM_MAX_TERMS);
            return why;
        }
        if (!term(&ps, &e->in[e->n_in++])) return why;
        if (*ps.p != ',') break;
        ps.p++;
    }
    for (uint32_t i = 0; i < ps.n_items; i++)
        if (e->items[i] != SUP_EINSUM_ELLIPSIS) e->count[e->items[i]]++;
    e->explicit_out = *ps.p == '-';
    if (e->explicit_out) {
        if (ps.p[1] != '>') {
            fail(&ps, "equation \"%.*s%s\": '-' must start \"->\"", QUOTE(&ps));
            return why;
        }
        ps.p += 2;
        if (!term(&ps, &e->out)) return why;
        if (*ps.p == ',') {
            fail(&ps, "equation \"%.*s%s\" has more than one output term", QUOTE(&ps));
            return why;
        }
        if (*ps.p != '\0') {
            fail(&ps, "equation \"%.*s%s\" has more than one \"->\"", QUOTE(&ps));
            return why;
        }
        bool seen[SUP_EINSUM_LABELS] = {0};
        for (uint32_t j = 0; j < e->out.n; j++) {
            int l = e->items[e->out.start + j];
            if (l == SUP_EINSUM_ELLIPSIS) continue;
            if (e->count[l] == 0) {
                fail(&ps, "equation \"%.*s%s\": output label %c is not in any input", QUOTE(&ps),
                     sup_einsum_char(l));
                return why;
            }
            if (seen[l]) {
                fail(&ps, "equation \"%.*s%s\": output label %c appears twice", QUOTE(&ps),
                     sup_einsum_char(l));
                return why;
            }
            seen[l] = true;
        }
        return NULL;
    }
    /* numpy's implicit output: "...", then the labels seen once, sorted as ASCII sorts them */
    bool ellipsis = false;
    for (uint32_t i = 0; i < e->n_in; i++)
        ellipsis |= e->in[i].has_ellipsis;
    e->out = (SupEinsumTerm){.start = ps.n_items};
    int order[SUP_EINSUM_LABELS + 1], n = 0;
    if (ellipsis) order[n++] = SUP_EINSUM_ELLIPSIS;
    for (int l = 26; l < SUP_EINSUM_LABELS; l++)
        if (e->count[l] == 1) order[n++] = l;
    for (int l = 0; l < 26; l++)
        if (e->count[l] == 1) order[n++] = l;
    for (int i = 0; i < n; i++)
        if (!push(&ps, &e->out, order[i])) return why;
    e->out.has_ellipsis = ellipsis;
    return NULL;
}
