/* match.c - `match` to a decision tree (the pattern-matrix method of Maranget, "Compiling
 * Pattern Matching to Good Decision Trees"): a matrix whose columns are values in registers
 * (occurrences) and whose rows are the clauses still possible. Tuple columns are split into
 * their fields (no test); columns of wildcards and variables are dropped (variables remember
 * their register); when the first row is all wildcards its clause is the leaf; otherwise the
 * first column where that row has a constructor is tested: one VM_GET_TAG, then a comparison
 * per constructor that appears there, each branch the matrix specialized to that constructor,
 * and a default branch (the rows with a wildcard there) when not every constructor of the type
 * appears. A field is loaded (VM_GET_FIELD) only when some row looks at it, after the tag test
 * that makes it exist. A leaf binds its clause's variables and jumps to the clause's body; no
 * row left is the unmatched case (VM_FATAL with the interpreter's message).
 *
 * Decision trees can grow exponentially on contrived matches; past a size budget the tree is
 * dropped and each clause is tested in turn instead (a backtracking automaton: the same code,
 * one row at a time, failing to the next clause). Recursion is over the patterns' structure,
 * which is small (ir.h). */
#include <stdio.h>

#include "backend/be.h"

typedef struct Bind {
    Var *var;
    uint32_t reg;
} Bind;

typedef struct Row {
    uint32_t clause;
    Pattern **cells; /* n_cols; NULL = wildcard */
    uint32_t n_binds;
    Bind *binds;
} Row;

typedef struct Mat {
    uint32_t n_cols;
    uint32_t *cols; /* occurrence registers */
    uint32_t n_rows;
    Row *rows;
} Mat;

typedef struct MCtx {
    FB *fb;
    Match *m;
    BeLeafVec *leaves;
    bool fail_mode;         /* sequential fallback: no rows jumps to the next clause */
    Vec(uint32_t) fail_pcs; /* GOTOs to patch to the next clause */
    uint32_t start, budget; /* tree size check */
    bool over;
} MCtx;

static bool wild(const Pattern *p) {
    return p == NULL || p->kind == PAT_WILDCARD || p->kind == PAT_VAR;
}

static Mat mat_new(uint32_t n_cols, uint32_t n_rows) {
    Mat m = {n_cols, sup_malloc(sizeof(uint32_t) * (n_cols ? n_cols : 1)), 0,
             sup_calloc(n_rows ? n_rows : 1, sizeof(Row))};
    return m;
}

static void mat_free(Mat *m) {
    for (uint32_t i = 0; i < m->n_rows; i++) {
        free(m->rows[i].cells);
        free(m->rows[i].binds);
    }
    free(m->rows);
    free(m->cols);
}

/* A new row of `to` for clause src->clause with src's bindings, plus (var, reg) when var. */
static Row *row_add(Mat *to, const Row *src, Var *var, uint32_t reg) {
    Row *r = &to->rows[to->n_rows++];
    r->clause = src->clause;
    r->cells = sup_calloc(to->n_cols ? to->n_cols : 1, sizeof(Pattern *));
    r->n_binds = src->n_binds + (var ? 1 : 0);
    r->binds = sup_malloc(sizeof(Bind) * (r->n_binds ? r->n_binds : 1));
    if (src->n_binds) memcpy(r->binds, src->binds, sizeof(Bind) * src->n_binds);
    if (var) r->binds[src->n_binds] = (Bind){var, reg};
    return r;
}

static Var *var_of(const Pattern *p) { return p && p->kind == PAT_VAR ? p->var : NULL; }

static Span mspan(MCtx *mc) { return mc->m->base.span; }

static uint32_t get_field(MCtx *mc, uint32_t reg, uint32_t index) {
    uint32_t r = fb_reg(mc->fb, VM_RK_VALUE);
    fb_emit(mc->fb, (VmInstr){.op = VM_GET_FIELD, .dst = r, .a = reg, .b = index}, mspan(mc));
    return r;
}

static void leaf(MCtx *mc, const Row *row) {
    FB *fb = mc->fb;
    Span span = mc->m->clauses[row->clause].span;
    for (uint32_t i = 0; i < row->n_binds; i++) {
        Var *v = row->binds[i].var;
        uint32_t r = fb_var(fb, v);
        if (r == BE_NOREG) {
            r = fb_reg(fb, be_kind_of(v->base.checked_type));
            fb_bind_var(fb, v, r);
        }
        fb_move(fb, r, row->binds[i].reg, span);
    }
    BeLeaf l = {row->clause, fb_emit(fb, (VmInstr){.op = VM_GOTO}, span)};
    vec_push(mc->leaves, l);
}

static void compile(MCtx *mc, Mat *m);

/* Replace column c, a tuple column of arity n, by the fields some row looks at. */
static void split_tuple(MCtx *mc, Mat *m, uint32_t c, uint32_t n) {
    bool *need = sup_calloc(n ? n : 1, sizeof(bool));
    uint32_t n_need = 0;
    for (uint32_t i = 0; i < m->n_rows; i++) {
        Pattern *p = m->rows[i].cells[c];
        if (p && p->kind == PAT_TUPLE)
            for (uint32_t j = 0; j < n; j++)
                if (!need[j] && p->pats[j] && p->pats[j]->kind != PAT_WILDCARD)
                    need[j] = true, n_need++;
    }
    Mat s = mat_new(m->n_cols - 1 + n_need, m->n_rows);
    uint32_t k = 0;
    for (uint32_t j = 0; j < n; j++)
        if (need[j]) s.cols[k++] = get_field(mc, m->cols[c], j);
    for (uint32_t j = 0; j < m->n_cols; j++)
        if (j != c) s.cols[k++] = m->cols[j];
    for (uint32_t i = 0; i < m->n_rows; i++) {
        const Row *src = &m->rows[i];
        Pattern *p = src->cells[c];
        Row *r = row_add(&s, src, var_of(p), m->cols[c]);
        k = 0;
        for (uint32_t j = 0; j < n; j++)
            if (need[j]) r->cells[k++] = p && p->kind == PAT_TUPLE ? p->pats[j] : NULL;
        for (uint32_t j = 0; j < m->n_cols; j++)
            if (j != c) r->cells[k++] = src->cells[j];
    }
    free(need);
    mat_free(m);
    *m = s;
}

/* Drop column c (every row has a wildcard or a variable there; variables are bound). */
static void drop_col(Mat *m, uint32_t c) {
    for (uint32_t i = 0; i < m->n_rows; i++) {
        Row *r = &m->rows[i];
        Var *v = var_of(r->cells[c]);
        if (v) {
            r->binds = sup_realloc(r->binds, sizeof(Bind) * (r->n_binds + 1));
            r->binds[r->n_binds++] = (Bind){v, m->cols[c]};
        }
        memmove(r->cells + c, r->cells + c + 1, sizeof(Pattern *) * (m->n_cols - c - 1));
    }
    memmove(m->cols + c, m->cols + c + 1, sizeof(uint32_t) * (m->n_cols - c - 1));
    m->n_cols--;
}

/* The rows of m that accept constructor ct (or, ct NULL, any constructor not in the heads) at
 * column c, with c replaced by ct's fields that some row looks at (loaded here). */
static void specialize(MCtx *mc, const Mat *m, uint32_t c, Constructor *ct, Mat *out) {
    uint32_t n = ct ? ct->n_inputs : 0;
    bool *need = sup_calloc(n ? n : 1, sizeof(bool));
    uint32_t n_need = 0, n_rows = 0;
    for (uint32_t i = 0; i < m->n_rows; i++) {
        Pattern *p = m->rows[i].cells[c];
        if (wild(p)) {
            n_rows++;
            continue;
        }
        if (ct == NULL || p->ctor != ct) continue;
        n_rows++;
        for (uint32_t j = 0; j < n; j++)
            if (!need[j] && p->pats[j] && p->pats[j]->kind != PAT_WILDCARD)
                need[j] = true, n_need++;
    }
    Mat s = mat_new(m->n_cols - 1 + n_need, n_rows);
    uint32_t k = 0;
    for (uint32_t j = 0; j < n; j++)
        if (need[j]) s.cols[k++] = get_field(mc, m->cols[c], j);
    for (uint32_t j = 0; j < m->n_cols; j++)
        if (j != c) s.cols[k++] = m->cols[j];
    for (uint32_t i = 0; i < m->n_rows; i++) {
        const Row *src = &m->rows[i];
        Pattern *p = src->cells[c];
        if (!wild(p) && (ct == NULL || p->ctor != ct)) continue;
        Row *r = row_add(&s, src, var_of(p), m->cols[c]);
        k = 0;
        for (uint32_t j = 0; j < n; j++)
            if (need[j]) r->cells[k++] = wild(p) ? NULL : p->pats[j];
        for (uint32_t j = 0; j < m->n_cols; j++)
            if (j != c) r->cells[k++] = src->cells[j];
    }
    free(need);
    *out = s;
}

/* Compile matrix m (consumed). */
static void compile(MCtx *mc, Mat *m) {
    FB *fb = mc->fb;
    Span span = mspan(mc);
    if (mc->over || fb_pc(fb) - mc->start > mc->budget) {
        mc->over = true;
        mat_free(m);
        return;
    }
    if (m->n_rows == 0) {
        if (mc->fail_mode) {
            vec_push(&mc->fail_pcs, fb_emit(fb, (VmInstr){.op = VM_GOTO}, span));
        } else {
            uint32_t msg = be_str(fb_be(fb), "no clause of this match accepts the value");
            fb_emit(fb, (VmInstr){.op = VM_FATAL, .a = msg}, span);
        }
        mat_free(m);
        return;
    }
    /* Split tuple columns until none is left. */
    for (uint32_t c = 0; c < m->n_cols;) {
        uint32_t arity = UINT32_MAX;
        for (uint32_t i = 0; i < m->n_rows && arity == UINT32_MAX; i++) {
            Pattern *p = m->rows[i].cells[c];
            if (p && p->kind == PAT_TUPLE) arity = p->n;
        }
        if (arity == UINT32_MAX) {
            c++;
            continue;
        }
        split_tuple(mc, m, c, arity); /* its fields come first: look at column 0 again */
        c = 0;
    }
    /* Drop the columns no row tests. */
    for (uint32_t c = m->n_cols; c-- > 0;) {
        bool all = true;
        for (uint32_t i = 0; i < m->n_rows && all; i++)
            all = wild(m->rows[i].cells[c]);
        if (all) drop_col(m, c);
    }
    /* The first row accepts anything left: its clause. */
    uint32_t c = 0;
    while (c < m->n_cols && wild(m->rows[0].cells[c]))
        c++;
    if (c == m->n_cols) {
        /* Variables of the first row in the remaining columns. */
        Row *r = &m->rows[0];
        for (uint32_t j = 0; j < m->n_cols; j++) {
            Var *v = var_of(r->cells[j]);
            if (!v) continue;
            r->binds = sup_realloc(r->binds, sizeof(Bind) * (r->n_binds + 1));
            r->binds[r->n_binds++] = (Bind){v, m->cols[j]};
        }
        leaf(mc, r);
        mat_free(m);
        return;
    }
    /* Test the constructor in column c. */
    Constructor *first = m->rows[0].cells[c]->ctor;
    TypeData *td = first->belong_to ? first->belong_to->def : NULL;
    PtrVec heads = {0};
    for (uint32_t i = 0; i < m->n_rows; i++) {
        Pattern *p = m->rows[i].cells[c];
        if (wild(p)) continue;
        bool seen = false;
        for (size_t k = 0; k < heads.len && !seen; k++)
            seen = heads.data[k] == p->ctor;
        if (!seen) vec_push(&heads, p->ctor);
    }
    bool complete = td != NULL && heads.len == td->n_ctors;
    uint32_t tag = fb_reg(fb, VM_RK_I32);
    fb_emit(fb, (VmInstr){.op = VM_GET_TAG, .dst = tag, .a = m->cols[c]}, span);
    for (size_t k = 0; k < heads.len; k++) {
        Constructor *ct = heads.data[k];
        bool test = !(complete && k + 1 == heads.len);
        uint32_t pif = 0;
        if (test) {
            uint32_t imm = fb_load_imm_i(fb, VM_RK_I32, ct->tag, span);
            uint32_t b = fb_reg(fb, VM_RK_BOOL);
            fb_emit(fb,
                    (VmInstr){.op = VM_SCALAR,
                              .sub = VM_SC_EQ,
                              .rk = VM_RK_I32,
                              .dst = b,
                              .a = tag,
                              .b = imm},
                    span);
            pif = fb_emit(fb, (VmInstr){.op = VM_IF, .a = b}, span);
        }
        Mat s;
        specialize(mc, m, c, ct, &s);
        compile(mc, &s);
        if (test) fb_at(fb, pif)->b = fb_pc(fb);
    }
    if (!complete) {
        Mat s;
        specialize(mc, m, c, NULL, &s);
        compile(mc, &s);
    }
    vec_free(&heads);
    mat_free(m);
}

static uint32_t pattern_size(const Pattern *p) {
    uint32_t n = 1;
    for (uint32_t i = 0; i < p->n; i++)
        n += pattern_size(p->pats[i]);
    return n;
}

static Mat one_column(uint32_t data, uint32_t n_rows) {
    Mat m = mat_new(1, n_rows);
    m.cols[0] = data;
    return m;
}

static void add_clause_row(Mat *m, Match *match, uint32_t i) {
    Row *r = &m->rows[m->n_rows++];
    r->clause = i;
    r->cells = sup_malloc(sizeof(Pattern *));
    r->cells[0] = match->clauses[i].lhs;
    r->binds = sup_malloc(sizeof(Bind));
}

void be_match_tree(FB *fb, Match *match, uint32_t data, BeLeafVec *leaves) {
    MCtx mc = {.fb = fb, .m = match, .leaves = leaves, .start = fb_pc(fb)};
    uint32_t size = 0;
    for (uint32_t i = 0; i < match->n_clauses; i++)
        size += pattern_size(match->clauses[i].lhs);
    mc.budget = 4096 + 64 * size;
    uint32_t pool = fb_pool_len(fb);
    Mat m = one_column(data, match->n_clauses);
    for (uint32_t i = 0; i < match->n_clauses; i++)
        add_clause_row(&m, match, i);
    compile(&mc, &m);
    if (!mc.over) return;
    /* Too large: test the clauses one after another. */
    fb_truncate(fb, mc.start, pool);
    leaves->len = 0;
    mc.over = false;
    mc.fail_mode = true;
    mc.budget = UINT32_MAX;
    for (uint32_t i = 0; i < match->n_clauses; i++) {
        uint32_t here = fb_pc(fb);
        for (size_t k = 0; k < mc.fail_pcs.len; k++)
            fb_at(fb, mc.fail_pcs.data[k])->a = here;
        mc.fail_pcs.len = 0;
        Mat one = one_column(data, 1);
        add_clause_row(&one, match, i);
        compile(&mc, &one);
    }
    uint32_t here = fb_pc(fb);
    for (size_t k = 0; k < mc.fail_pcs.len; k++)
        fb_at(fb, mc.fail_pcs.data[k])->a = here;
    vec_free(&mc.fail_pcs);
    uint32_t msg = be_str(fb_be(fb), "no clause of this match accepts the value");
    fb_emit(fb, (VmInstr){.op = VM_FATAL, .a = msg}, mspan(&mc));
}
