/* match.c - exhaustiveness of `match`: the space of values not covered by any clause, computed
 * by subtracting each clause's pattern from the space of all values (a list of patterns; `_`
 * at first). A space pattern `_` facing a constructor pattern is split into every constructor of
 * its ADT; tuples into their fields. The first remaining space, printed, is the missing case.
 * Patterns are small, so this recurses over pattern depth (bounded by the parser's nesting
 * limit); the space is capped so a pathological match cannot blow up. */
#include "types/types.h"

typedef struct Space Space;
struct Space {
    Constructor *ctor; /* NULL with is_tuple false: `_` */
    bool is_tuple;
    uint32_t n;
    Space **kids;
};

typedef struct Sub {
    Arena *arena;
    size_t budget; /* spaces left to create; 0: give up (treated as exhaustive) */
} Sub;

static Space *wild(Sub *s) {
    if (s->budget) s->budget--;
    return arena_alloc(s->arena, sizeof(Space));
}

static Space *make(Sub *s, Constructor *c, bool tuple, uint32_t n) {
    Space *x = wild(s);
    x->ctor = c;
    x->is_tuple = tuple;
    x->n = n;
    x->kids = arena_array(s->arena, n ? n : 1, sizeof(Space *));
    for (uint32_t i = 0; i < n; i++)
        x->kids[i] = wild(s);
    return x;
}

static bool is_wild(const Space *x) { return x->ctor == NULL && !x->is_tuple; }

/* Append to out the spaces of x not matched by p. */
static void subtract(Sub *s, Space *x, Pattern *p, PtrVec *out) {
    if (s->budget == 0) return;
    if (p->kind == PAT_WILDCARD || p->kind == PAT_VAR) return;
    if (is_wild(x)) {
        if (p->kind == PAT_TUPLE) {
            subtract(s, make(s, NULL, true, p->n), p, out);
            return;
        }
        TypeData *td = p->ctor->belong_to->def;
        for (uint32_t i = 0; td && i < td->n_ctors; i++) {
            Constructor *c = td->ctors[i];
            subtract(s, make(s, c, false, c->n_inputs), p, out);
        }
        return;
    }
    if (p->kind == PAT_CTOR && x->ctor != p->ctor) {
        vec_push(out, x);
        return;
    }
    if (p->n != x->n) return; /* an arity error, reported by inference */
    /* x \ p = union over i of x with field i replaced by (x_i \ p_i) */
    for (uint32_t i = 0; i < x->n; i++) {
        PtrVec rest = {0};
        subtract(s, x->kids[i], p->pats[i], &rest);
        for (size_t k = 0; k < rest.len; k++) {
            Space *y = wild(s);
            *y = *x;
            y->kids = arena_array(s->arena, x->n, sizeof(Space *));
            memcpy(y->kids, x->kids, x->n * sizeof(Space *));
            y->kids[i] = rest.data[k];
            vec_push(out, y);
        }
        vec_free(&rest);
    }
}

static void print_space(const Space *x, StrBuf *sb) {
    if (is_wild(x)) {
        sb_putc(sb, '_');
        return;
    }
    if (x->ctor) sb_puts(sb, x->ctor->name);
    if (x->ctor && x->n == 0) return;
    sb_putc(sb, '(');
    for (uint32_t i = 0; i < x->n; i++) {
        if (i) sb_puts(sb, ", ");
        print_space(x->kids[i], sb);
    }
    if (x->is_tuple && x->n == 1) sb_putc(sb, ',');
    sb_putc(sb, ')');
}

const char *ty_match_missing(Ctx *ctx, const Match *m) {
    Arena arena;
    arena_init(&arena);
    Sub s = {&arena, 100000};
    PtrVec space = {0};
    vec_push(&space, wild(&s));
    for (uint32_t c = 0; c < m->n_clauses && space.len && s.budget; c++) {
        PtrVec next = {0};
        for (size_t i = 0; i < space.len; i++)
            subtract(&s, space.data[i], m->clauses[c].lhs, &next);
        vec_free(&space);
        space = next;
    }
    const char *r = NULL;
    if (space.len && s.budget) {
        StrBuf sb = {0};
        print_space(space.data[0], &sb);
        r = arena_strndup(&ctx->arena, sb_cstr(&sb), sb.len);
        sb_free(&sb);
    }
    vec_free(&space);
    arena_free(&arena);
    return r;
}
