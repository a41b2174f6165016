/* test_ir.c - unit tests of the IR: type interning, node construction, the traversal engine
 * (visitor, rewriter, deep chains), free variables, well-formedness, structural equality and
 * hashing up to alpha-equivalence, and the printer on IR built through the constructors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ir/ir.h"

static Ctx *ctx;

static int setup(void **state) {
    (void)state;
    ctx = ir_ctx_new();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    ir_ctx_free(ctx);
    return 0;
}

static Expr *op(const char *name) { return ir_op_get(ctx, name, strlen(name)); }
static Expr *call2(const char *name, Expr *a, Expr *b) {
    Expr *args[2] = {a, b};
    return ir_call_new(ctx, op(name), 2, args, NULL, 0, NULL, SPAN_NONE);
}
static Var *var(const char *name) { return ir_var_new(ctx, name, NULL, SPAN_NONE); }

static char *print_expr(Expr *e) {
    Module *m = ir_module_new(ctx);
    m->is_expr = true;
    m->expr = e;
    StrBuf sb = {0};
    ir_print_module(m, NULL, &sb);
    return sb_take(&sb);
}

static void test_type_interning(void **state) {
    (void)state;
    int64_t s1[2] = {1, 2}, s2[2] = {1, 2};
    Type *a = ir_type_tensor(ctx, RLY_DTYPE_F32, 2, s1);
    assert_ptr_equal(a, ir_type_tensor(ctx, RLY_DTYPE_F32, 2, s2));
    assert_ptr_not_equal(a, ir_type_tensor(ctx, RLY_DTYPE_F16, 2, s2));
    Type *f[2] = {a, ir_type_scalar(ctx, RLY_DTYPE_BOOL)};
    Type *t = ir_type_tuple(ctx, 2, f);
    assert_ptr_equal(t, ir_type_tuple(ctx, 2, f));
    Type *fn = ir_type_func(ctx, 1, &a, t, 0, NULL, 0, NULL);
    assert_ptr_equal(fn, ir_type_func(ctx, 1, &a, t, 0, NULL, 0, NULL));
    assert_ptr_equal(ir_type_ref(ctx, a), ir_type_ref(ctx, a));
    int64_t n1 = ir_dim_sym(ctx, "n", 1), n2 = ir_dim_sym(ctx, "n", 1);
    assert_true(dim_is_sym(n1));
    assert_int_equal(n1, n2);
    assert_string_equal(ir_dim_sym_name(ctx, n1), "n");
    assert_true(ir_dim_sym(ctx, "m", 1) != n1);
    /* two type vars with one name are distinct; equality maps them when bound */
    TypeVar *A = ir_type_var_new(ctx, "A", KIND_TYPE), *B = ir_type_var_new(ctx, "A", KIND_TYPE);
    Type *fa = ir_type_func(ctx, 1, (Type **)&A, &A->base, 1, &A, 0, NULL);
    Type *fb = ir_type_func(ctx, 1, (Type **)&B, &B->base, 1, &B, 0, NULL);
    assert_ptr_not_equal(fa, fb);
    assert_true(ir_type_equal(fa, fb));
    assert_int_equal(ir_type_hash(fa), ir_type_hash(fb));
    assert_false(ir_type_equal(&A->base, &B->base)); /* free: must be the same var */
}

static void test_alpha_equal(void **state) {
    (void)state;
    /* fn (%x) { let %y = add(%x, %x); %y }  vs the same with other vars */
    Var *x1 = var("x"), *y1 = var("y"), *x2 = var("a"), *y2 = var("b");
    Expr *f1 = ir_function_new(
        ctx, 1, &x1, ir_let_new(ctx, y1, call2("add", &x1->base, &x1->base), &y1->base, SPAN_NONE),
        NULL, 0, NULL, NULL, SPAN_NONE);
    Expr *f2 = ir_function_new(
        ctx, 1, &x2, ir_let_new(ctx, y2, call2("add", &x2->base, &x2->base), &y2->base, SPAN_NONE),
        NULL, 0, NULL, NULL, SPAN_NONE);
    assert_true(ir_expr_equal(f1, f2, false));
    assert_int_equal(ir_expr_hash(f1), ir_expr_hash(f2));
    /* a different use pattern is not equal: add(%x, %y) inside vs add(%x, %x) */
    Var *x3 = var("x"), *y3 = var("y");
    Expr *f3 = ir_function_new(ctx, 1, &x3,
                               ir_let_new(ctx, y3, call2("add", &x3->base, &x3->base),
                                          call2("add", &x3->base, &y3->base), SPAN_NONE),
                               NULL, 0, NULL, NULL, SPAN_NONE);
    assert_false(ir_expr_equal(f1, f3, false));
    /* free variables: equal only when identical, unless mapped */
    Var *u = var("u"), *v = var("v");
    assert_false(ir_expr_equal(&u->base, &v->base, false));
    assert_true(ir_expr_equal(&u->base, &v->base, true));
    assert_false(
        ir_expr_equal(call2("add", &u->base, &v->base), call2("add", &u->base, &u->base), true));
    /* constants compare by value, ops by name */
    Expr *c1 = ir_scalar_f64(ctx, RLY_DTYPE_F32, 1.5, SPAN_NONE);
    Expr *c2 = ir_scalar_f64(ctx, RLY_DTYPE_F32, 1.5, SPAN_NONE);
    Expr *c3 = ir_scalar_f64(ctx, RLY_DTYPE_F64, 1.5, SPAN_NONE);
    assert_true(ir_expr_equal(c1, c2, false));
    assert_false(ir_expr_equal(c1, c3, false));
    assert_int_equal(ir_expr_hash(c1), ir_expr_hash(c2));
}

static int n_pre, n_post;
static VisitResult count_pre(Visitor *v, Expr *e) {
    (void)v;
    (void)e;
    n_pre++;
    return VISIT_CONTINUE;
}
static void count_post(Visitor *v, Expr *e) {
    (void)v;
    (void)e;
    n_post++;
}

static void test_visit_dag(void **state) {
    (void)state;
    /* a chain %i = add(%i-1, %i-1) of 60 nodes: 2^60 paths, 61 nodes + the op */
    Var *x = var("x");
    Expr *e = &x->base;
    for (int i = 0; i < 60; i++)
        e = call2("add", e, e);
    Visitor v = {.pre = count_pre, .post = count_post};
    n_pre = n_post = 0;
    assert_true(ir_visit(&v, e));
    assert_int_equal(n_pre, 62);
    assert_int_equal(n_post, 62);
    /* equality and hashing are memoized too */
    assert_true(ir_expr_equal(e, e, false));
    (void)ir_expr_hash(e);
}

static Expr *rename_add(Rewriter *rw, Expr *orig, Expr *e) {
    (void)orig;
    if (e->kind == EXPR_CALL && AS_CALL(e)->op == op("add")) {
        Call *c = AS_CALL(e);
        return ir_call_new(rw->ctx, op("multiply"), c->n_args, c->args, NULL, 0, NULL, e->span);
    }
    return e;
}

static void test_rewrite(void **state) {
    (void)state;
    Var *x = var("x");
    Expr *shared = call2("add", &x->base, &x->base);
    Expr *e = call2("subtract", shared, shared);
    Rewriter id = {.ctx = ctx};
    assert_ptr_equal(ir_rewrite(&id, e), e); /* nothing changed: same node */
    ir_rewriter_free(&id);
    Rewriter rw = {.ctx = ctx, .post = rename_add};
    Expr *r = ir_rewrite(&rw, e);
    ir_rewriter_free(&rw);
    Call *c = AS_CALL(r);
    assert_ptr_equal(c->op, op("subtract"));
    assert_ptr_equal(c->args[0], c->args[1]); /* sharing kept */
    assert_ptr_equal(AS_CALL(c->args[0])->op, op("multiply"));
}

static void test_deep_chain(void **state) {
    (void)state;
    /* 10^5 nested lets: visit, rewrite, equal, hash, free vars, well-formedness, print */
    enum { N = 100000 };
    Var *x = var("x");
    Var **vs = malloc(N * sizeof(Var *));
    for (int i = 0; i < N; i++)
        vs[i] = var("v");
    Expr *body = &vs[N - 1]->base;
    for (int i = N - 1; i >= 0; i--) {
        Expr *prev = i == 0 ? &x->base : &vs[i - 1]->base;
        body = ir_let_new(ctx, vs[i], call2("add", prev, prev), body, SPAN_NONE);
    }
    Visitor v = {.pre = count_pre};
    n_pre = 0;
    ir_visit(&v, body);
    assert_true(n_pre > 3 * N);
    Rewriter rw = {.ctx = ctx, .post = rename_add};
    Expr *r = ir_rewrite(&rw, body);
    ir_rewriter_free(&rw);
    assert_false(ir_expr_equal(body, r, false));
    assert_true(ir_expr_equal(body, body, false));
    PtrVec fv = {0};
    ir_free_vars(body, &fv);
    assert_int_equal(fv.len, 1);
    assert_ptr_equal(fv.data[0], x);
    vec_free(&fv);
    Module *m = ir_module_new(ctx);
    m->is_expr = true;
    m->expr = body;
    assert_true(ir_well_formed(m));
    char *text = print_expr(body);
    assert_non_null(strstr(text, "let %v99999 = add(%v99998, %v99998);"));
    free(text);
    free(vs);
}

static void test_well_formed_errors(void **state) {
    (void)state;
    /* a variable bound twice */
    Var *x = var("x");
    Expr *one = ir_scalar_i64(ctx, RLY_DTYPE_I32, 1, SPAN_NONE);
    Expr *e = ir_let_new(ctx, x, one, ir_let_new(ctx, x, one, &x->base, SPAN_NONE), SPAN_NONE);
    Module *m = ir_module_new(ctx);
    m->is_expr = true;
    m->expr = e;
    assert_false(ir_well_formed(m));
    assert_non_null(strstr(ctx->diags.items.data[0].msg, "bound more than once"));
    diags_clear(&ctx->diags);
    /* a use outside its scope: (let %y = 1; %y, %y) with the second %y outside */
    Var *y = var("y");
    Expr *fields[2] = {ir_let_new(ctx, y, one, &y->base, SPAN_NONE), &y->base};
    m->expr = ir_tuple_new(ctx, 2, fields, SPAN_NONE);
    assert_false(ir_well_formed(m));
    assert_non_null(strstr(ctx->diags.items.data[0].msg, "outside the scope"));
    diags_clear(&ctx->diags);
    /* a free variable in a global function */
    Var *z = var("z");
    Module *g = ir_module_new(ctx);
    GlobalVar *gv = ir_module_global(g, "f", 1, SPAN_NONE);
    ir_module_define(
        g, gv, AS_FUNCTION(ir_function_new(ctx, 0, NULL, &z->base, NULL, 0, NULL, NULL, SPAN_NONE)),
        SPAN_NONE);
    assert_false(ir_well_formed(g));
    assert_non_null(strstr(ctx->diags.items.data[0].msg, "free variable %z in @f"));
    diags_clear(&ctx->diags);
}

static void test_printer(void **state) {
    (void)state;
    Var *x = var("x"), *x2 = var("x");
    Expr *a = call2("add", &x->base, &x2->base);
    Expr *fields[2] = {a, a};
    Expr *t = ir_tuple_new(ctx, 2, fields, SPAN_NONE);
    Expr *e = ir_tuple_get_item_new(ctx, t, 1, SPAN_NONE);
    char *s = print_expr(e);
    assert_string_equal(s, "free_var %x;\n"
                           "free_var %x1;\n"
                           "%0 = add(%x, %x1);\n"
                           "%1 = (%0, %0);\n"
                           "%1.1\n");
    free(s);
    /* scalars print with their suffixes */
    struct {
        rly_dtype dt;
        double v;
        const char *text;
    } cases[] = {
        {RLY_DTYPE_I32, 42, "42"},       {RLY_DTYPE_I64, -7, "-7i64"},
        {RLY_DTYPE_I8, 3, "3i8"},        {RLY_DTYPE_U8, 255, "255u8"},
        {RLY_DTYPE_F32, 3, "3f"},        {RLY_DTYPE_F32, 0.1, "0.1f"},
        {RLY_DTYPE_F16, 3, "3f16"},      {RLY_DTYPE_F64, 3, "3f64"},
        {RLY_DTYPE_F64, 0.1, "0.1f64"},  {RLY_DTYPE_BF16, 1.5, "1.5bf16"},
        {RLY_DTYPE_F32, 1e-5, "1e-05f"}, {RLY_DTYPE_BOOL, 1, "True"},
    };
    for (size_t i = 0; i < RLY_ARRAY_LEN(cases); i++) {
        Expr *c = sup_dtype_is_float(cases[i].dt)
                      ? ir_scalar_f64(ctx, cases[i].dt, cases[i].v, SPAN_NONE)
                      : ir_scalar_i64(ctx, cases[i].dt, (int64_t)cases[i].v, SPAN_NONE);
        StrBuf sb = {0};
        ir_print_scalar(AS_CONSTANT(c), &sb);
        assert_string_equal(sb_cstr(&sb), cases[i].text);
        sb_free(&sb);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_interning), cmocka_unit_test(test_alpha_equal),
        cmocka_unit_test(test_visit_dag),      cmocka_unit_test(test_rewrite),
        cmocka_unit_test(test_deep_chain),     cmocka_unit_test(test_well_formed_errors),
        cmocka_unit_test(test_printer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
