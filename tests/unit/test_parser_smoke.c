/* test_parser_smoke.c - smoke test of the Relay text parser (src/frontend/text): a table of
 * snippets that must parse or must fail with a given message, a few structural checks, deep and
 * long inputs (which must not recurse), and random bytes (which must never crash). Exit status 0
 * when every check passes. Adding a case is adding a row to `cases`. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/text/text.h"

#include "../check.h"

#define LIST_ADT "type List[A] { Cons(A, List[A]), Nil, }\n"

/* ok: NULL = must parse; else a substring of the single error message. */
typedef struct Case {
    const char *text;
    const char *err;
} Case;

static const Case cases[] = {
    /* literals */
    {"1", NULL},
    {"1i64", NULL},
    {"-1i8", NULL},
    {"---10", NULL},
    {"-128i8", NULL},
    {"255u8", NULL},
    {"18446744073709551615u64", NULL},
    {"-9223372036854775808i64", NULL},
    {"2147483648", NULL}, /* int64 */
    {"1.5", NULL},
    {"1.5f", NULL},
    {"1e-1f", NULL},
    {"3f16", NULL},
    {"65504f16", NULL},
    {"3f64", NULL},
    {"3bf16", NULL},
    {"inff", NULL},
    {"-inff", NULL},
    {"nanf", NULL},
    {"inff16", NULL},
    {"True", NULL},
    {"False", NULL},
    {"1 - 1", NULL},
    {"2147483648i32", "out of range for int32"},
    {"32768i16", "out of range for int16"},
    {"256u8", "out of range for uint8"},
    {"-1u8", "out of range for uint8"},
    {"65505f16", "out of range for float16"},
    {"1e39f", "out of range for float32"},
    {"1e39", "out of range for float32"},
    {"1e400f64", "out of range for float64"},
    {"99999999999999999999", "out of range for int64"},
    {"99999999999999999999999999999999999999999i64", "out of range for int64"},
    {"1.5i32", "invalid integer literal"},
    {"1-1", "invalid number literal"},
    {"1q", "expected end of input but found 'q'"},
    {"1u", "invalid suffix 'u'"},
    {"1f8", "invalid suffix 'f8'"},
    /* tuples, projections, calls, operators */
    {"()", NULL},
    {"(1,)", NULL},
    {"(1, 2)", NULL},
    {"(1, 2,)", NULL},
    {"(1)", NULL},
    {"free_var %t; %t.0.1", NULL},
    {"free_var %t; %t.0.1.2.3", NULL},
    {"free_var %t; %t.-1", "expected a tuple index after '.'"},
    {"free_var %t; %t.99999999999", "too large"},
    {"f(1)(2)(3)", NULL},
    {"nn.conv2d(1, 2, padding=[1, 1], data_layout=\"NCHW\", strides=(1, 1), a=None, b=nullptr, "
     "c=True, d=1.5f, e=[[1, 2], [3]], f=(2), g=meta[relay.Constant][0], h=nn.relu, i.j=3)",
     NULL},
    {"f(a=1, a=2)", "duplicate attribute 'a'"},
    {"f(a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9, j=10, b=11)", "duplicate attribute 'b'"},
    {"1 + 2 * 3 == 7 != False", NULL},
    {"1 < 2 <= 3 > 4 >= 5 - 6 / 7", NULL},
    {"ref_write(ref(1), ref_read(ref(2)))", NULL},
    {"ref(1 let", "expected ')' but found 'let'"},
    {"(1 let", "expected ',' or ')' but found 'let'"},
    {"f(", "found end of input"},
    {"\"abc\"", "string literal can only be an attribute value"},
    {"", "expected an expression but found end of input"},
    {"_", "expected an expression but found '_'"},
    /* let, sequences, graph bindings, scopes */
    {"let %x = 1; %x", NULL},
    {"let %x: int32 = 1; let %y = add(%x, %x); %y", NULL},
    {"let %x = 1; let %x = %x; %x", NULL},
    {"1; 2; 3", NULL},
    {"%0 = add(1, 2); %1 = multiply(%0, %0); %1", NULL},
    {"%0 = 1; { %0 = 2; %0 }", NULL},
    {"%0 = 1; %0 = 2; %0", "graph variable %0 is already bound in this scope"},
    {"let %f = fn (%n: int32) -> int32 { %f(%n) }; %f(1)", NULL},
    {"let %f = %f; 1", "unbound variable %f"},
    {"%x", "unbound variable %x"},
    {"%3", "unbound graph variable %3"},
    {"let @g = 1; 2", "cannot bind a global with let"},
    {"let x = 1; x", "expected a local variable like %x after 'let' but found 'x'"},
    {"let %x = 1;", "expected an expression but found end of input"},
    {"let %x = 1", "expected ';' after the let value but found end of input"},
    {"let %y = { let %x = 1; %x }; %x", "unbound variable %x"},
    {"let %y = if (True) { let %x = 1; %x } else { 2 }; %x", "unbound variable %x"},
    {"let %y = fn (%a) { %a }; %a", "unbound variable %a"},
    {"let %y = (let %x = 1; %x); %x", "unbound variable %x"},
    {"{ 1 }", NULL},
    {"free_var %x: Tensor[(1, ?, n), float32]; free_var %y; add(%x, %y)", NULL},
    {"%", "expected a name after '%'"},
    {"@", "expected a name after '@'"},
    {"@f", "global @f is used but never defined"},
    /* functions and types */
    {"fn [A](%x: A, Attr=1, B.c=\"s\") -> A { %x }", NULL},
    {"fn () { 1 }", NULL},
    {"fn (%x, %y,) { %x }", NULL},
    {"fn (a=1, %x) { 1 }", "parameters must come before attributes"},
    {"fn () -> fn (int32) -> int32 { fn (%x: int32) { %x } }", NULL},
    {"fn (%f: fn [A](A) -> A) { %f }", NULL},
    {"free_var %t: (int32, (float32,), (), (bool)); %t", NULL},
    {"fn (%r: ref(int32), %u: _) { %r }", NULL},
    {"fn (%x: Tensor[(), float32], %y: Tensor[(1), int8], %z: Tensor[(1,), uint64]) { %x }", NULL},
    {"fn (%x: Tensor[(meta[tir.SizeVar][0], 3), bfloat16]) { %x }", NULL},
    {"fn (%x: Foo) { %x }", "unknown type 'Foo'"},
    {"fn (%x: Tensor[(1), float33]) { %x }", "expected a dtype like float32"},
    {"fn (%x: Tensor[(-1), float32]) { %x }", "invalid tensor dimension"},
    {"fn (%x: A) { %x }", "unknown type 'A'"},
    {"fn [A](%x: A) { fn (%y: A) { %y } }", NULL},
    {"let %f = fn [A](%x: A) { %x }; fn (%y: A) { %y }", "unknown type 'A'"},
    {"if (True) { 1 } else { 2 }", NULL},
    {"if (True) { 1 }", "expected 'else' but found end of input"},
    {"if True { 1 } else { 2 }", "expected '(' but found 'True'"},
    /* comments and bad bytes */
    {"/* a /* nested */ comment */ 1 // line comment", NULL},
    {"add(1, 2) /* ty=int32 */", NULL},
    {"/* never closed /* */", "unterminated block comment"},
    {"f(x=\"abc)", "unterminated string literal"},
    {"1 $ 2", "invalid character '$'"},
    {"1 \xff", "invalid byte 0xff"},
    {"1 ! 2", "invalid character '!'"},
    {"\xef\xbb\xbf" HDR "def @main() { 1 }", NULL}, /* a byte order mark is skipped */
    {"1 \xef\xbb\xbf", "invalid byte 0xef"},
    /* meta */
    {"meta[relay.Constant][0]", NULL},
    {"meta[relay.Constant][1]", "out of range: the metadata table has 1 constants"},
    {"meta[relay.Constant][99999999999999999999999]", "out of range"},
    {"meta[VirtualDevice][0]", "unsupported metadata reference"},
    {"meta[tir.SizeVar][0]", "only appear as a tensor dimension"},
    /* modules */
    {HDR, NULL},
    {HDR "def @main() { 1 }", NULL},
    {HDR "def @main(%x: int32) -> int32 { %x }\n#[metadata]\n{\"root\": 1, $$$ \"never lexed",
     NULL},
    {"def @f() { 1 }", "#[version = \"0.0.5\"]"},
    {"type T { A }", "#[version = \"0.0.5\"]"},
    {"extern type T", "#[version = \"0.0.5\"]"},
    {"#[version = \"0.0.4\"]", "unsupported version '\"0.0.4\"'"},
    {"#[versio = \"0.0.5\"]", "expected 'version'"},
    {HDR "1", NULL}, /* TVM's astext() of an expression: the header, then the expression */
    {HDR "def @f() { 1 } 1", "expected 'def', 'type' or 'extern' but found '1'"},
    {HDR "def @f() { 1 } def @f() { 2 }", "duplicate definition of global '@f'"},
    {HDR "def @f() { @g() } def @g() { @f() }", NULL},
    {HDR "def @f() { @h() }", "global @h is used but never defined"},
    {HDR "def @f[A](%x: A) -> A { let %y: A = %x; %y }", NULL},
    {HDR "def @f(%x) { free_var %y; %y }", "free_var is only allowed in a bare expression"},
    {HDR "type T { A } type T { B }", "duplicate type 'T'"},
    {HDR "type T { A } type U { A }", "duplicate constructor 'A'"},
    {HDR "type T { A, A }", "duplicate constructor 'A'"},
    {HDR "extern type Storage", NULL},
    {HDR "extern type Storage[A]", NULL},
    {HDR "extern type S { A }", "an extern type cannot have constructors"},
    {HDR "type nat { zero, succ(nat) }\n"
         "def @double(%n: nat) -> nat { match (%n) { zero => zero, succ(%m) => "
         "succ(succ(@double(%m))) } }",
     NULL},
    /* forward references to types and constructors defined later */
    {HDR "def @len[A](%l: List[A]) -> int32 {\n"
         "  match (%l) {\n"
         "    Cons(_, %rest) => { add(1, @len(%rest)) },\n"
         "    Nil => 0,\n"
         "  }\n"
         "}\n" LIST_ADT,
     NULL},
    {HDR LIST_ADT "def @hd[A](%l: List[A]) -> A { match? (%l) { Cons(%x, _) => %x } }", NULL},
    {HDR LIST_ADT "def @f() -> List[int32] { Cons(1, Cons(2, Nil)) }", NULL},
    {HDR LIST_ADT "def @f() { Cons }", NULL},
    {HDR LIST_ADT "def @f(%l: List[int32]) { match (%l) { Cons(%x) => 1 } }",
     "constructor 'Cons' takes 2 arguments but the pattern has 1 sub-pattern"},
    {HDR LIST_ADT "def @f(%l: List[int32]) { match (%l) { Cons => 1 } }",
     "takes 2 arguments but the pattern has 0"},
    {HDR LIST_ADT "def @f(%l: List[int32]) { match (%l) { Conz(%x, %y) => 1 } }",
     "unknown constructor 'Conz' in pattern"},
    {HDR LIST_ADT "def @f(%l: List[int32]) { match (%l) { Cons(%x, %y) => %x, _ => 0 }; %x }",
     "unbound variable %x"},
    {HDR LIST_ADT
     "def @f(%p: (List[int32], int32)) {\n"
     "  match (%p) { (Cons(%x: int32, Nil), %n) => %x, ((), _) => { 0 }, (_, %m) => %m, }\n"
     "}",
     NULL},
    {HDR "type Tree[A] { Rose(A, List[Tree[A]]) }\n" LIST_ADT "type Option[A] { Some(A), None }\n"
         "def @f() -> Option[Tree[int32]] { Some(Rose(1, Nil)) }",
     NULL},
    {HDR "type GradCell[T] { Raw(T), One(fn() -> T), Zero(fn() -> T) }", NULL},
    {HDR "type T[A] { C(B) }", "unknown type 'B'"},
    {HDR "def @f(%x) { %x } type", "expected a type name but found end of input"},
};

/* ---- helpers -------------------------------------------------------------------------------- */

static Constant *meta_table[1];

static Module *parse_n(Ctx *ctx, const char *text, size_t len) {
    return text_parse(ctx, "test.rly", text, len, meta_table, 1);
}

static const char *first_error(Ctx *ctx) {
    for (size_t i = 0; i < ctx->diags.items.len; i++)
        if (ctx->diags.items.data[i].level == DIAG_ERROR) return ctx->diags.items.data[i].msg;
    return "(none)";
}

/* The contract: a module and no error, or NULL and exactly one error. */
static void check_contract(Ctx *ctx, Module *m, const char *what) {
    if (m != NULL)
        CHECK(ctx->diags.n_errors == 0, "%s: parsed but reported %zu errors", what,
              ctx->diags.n_errors);
    else
        CHECK(ctx->diags.n_errors == 1, "%s: failed with %zu errors", what, ctx->diags.n_errors);
}

static void run_case(const Case *c) {
    Ctx *ctx = ir_ctx_new();
    Module *m = parse_n(ctx, c->text, strlen(c->text));
    check_contract(ctx, m, c->text);
    if (c->err == NULL) {
        CHECK(m != NULL, "should parse: %s\n  error: %s", c->text, first_error(ctx));
    } else {
        CHECK(m == NULL, "should fail with \"%s\": %s", c->err, c->text);
        if (m == NULL)
            CHECK(strstr(first_error(ctx), c->err) != NULL,
                  "wrong message for %s\n  want: %s\n  got:  %s", c->text, c->err,
                  first_error(ctx));
    }
    ir_ctx_free(ctx);
}

/* Parse text, which must succeed; returns the expression of a bare expression. */
static Expr *must_expr(Ctx *ctx, const char *text) {
    Module *m = parse_n(ctx, text, strlen(text));
    CHECK(m != NULL && m->is_expr, "should parse as an expression: %s (%s)", text,
          first_error(ctx));
    return m ? m->expr : NULL;
}

/* ---- structural checks ------------------------------------------------------------------------
 */

static void check_literals(void) {
    static const struct {
        const char *text;
        rly_dtype dt;
        double v;
    } lits[] = {
        {"1", RLY_DTYPE_I32, 1},
        {"---10", RLY_DTYPE_I32, -10},
        {"--10", RLY_DTYPE_I32, 10},
        {"2147483648", RLY_DTYPE_I64, 2147483648.0},
        {"-2147483648", RLY_DTYPE_I32, -2147483648.0},
        {"7i", RLY_DTYPE_I32, 7},
        {"-42i16", RLY_DTYPE_I16, -42},
        {"42u16", RLY_DTYPE_U16, 42},
        {"1.5", RLY_DTYPE_F32, 1.5},
        {"3f", RLY_DTYPE_F32, 3},
        {"3f16", RLY_DTYPE_F16, 3},
        {"-2.5f64", RLY_DTYPE_F64, -2.5},
        {"1e2f", RLY_DTYPE_F32, 100},
        {"True", RLY_DTYPE_BOOL, 1},
        {"False", RLY_DTYPE_BOOL, 0},
        {"2bf16", RLY_DTYPE_BF16, 2},
    };
    for (size_t i = 0; i < RLY_ARRAY_LEN(lits); i++) {
        Ctx *ctx = ir_ctx_new();
        Expr *e = must_expr(ctx, lits[i].text);
        if (e != NULL) {
            CHECK(e->kind == EXPR_CONSTANT, "%s: not a constant", lits[i].text);
            Constant *c = AS_CONSTANT(e);
            CHECK(c->dtype == lits[i].dt && c->ndim == 0, "%s: dtype %s", lits[i].text,
                  sup_dtype_name(c->dtype));
            CHECK(ir_constant_as_f64(c) == lits[i].v, "%s: value %g", lits[i].text,
                  ir_constant_as_f64(c));
            CHECK(e->span.lo == 0 && e->span.hi == strlen(lits[i].text), "%s: span", lits[i].text);
        }
        ir_ctx_free(ctx);
    }
    Ctx *ctx = ir_ctx_new();
    Expr *e = must_expr(ctx, "-inff64");
    if (e) CHECK(ir_constant_as_f64(AS_CONSTANT(e)) < -1e308, "-inff64");
    e = must_expr(ctx, "18446744073709551615u64");
    if (e) CHECK((uint64_t)ir_constant_as_i64(AS_CONSTANT(e)) == UINT64_MAX, "u64 max");
    ir_ctx_free(ctx);
}

static void check_structure(void) {
    Ctx *ctx = ir_ctx_new();
    /* graph bindings share the node */
    Expr *e = must_expr(ctx, "%0 = add(1, 2); (%0, %0)");
    if (e) {
        CHECK(e->kind == EXPR_TUPLE, "graph: tuple");
        Tuple *t = AS_TUPLE(e);
        CHECK(t->n == 2 && t->fields[0] == t->fields[1], "graph: shared node");
        CHECK(t->fields[0]->kind == EXPR_CALL, "graph: call");
    }
    /* let: the body refers to the bound Var; the span covers the whole text */
    const char *txt = "let %x = 1; %x";
    e = must_expr(ctx, txt);
    if (e) {
        CHECK(e->kind == EXPR_LET, "let");
        Let *l = AS_LET(e);
        CHECK(l->body == &l->var->base, "let: body is the var");
        CHECK(strcmp(l->var->name, "x") == 0, "let: var name");
        CHECK(e->span.lo == 0 && e->span.hi == strlen(txt), "let: span %u..%u", e->span.lo,
              e->span.hi);
    }
    /* sequence: let %_ */
    e = must_expr(ctx, "1; 2");
    if (e) {
        CHECK(e->kind == EXPR_LET && strcmp(AS_LET(e)->var->name, "_") == 0, "seq");
    }
    /* recursive let */
    e = must_expr(ctx, "let %f = fn () { %f() }; %f");
    if (e) {
        Let *l = AS_LET(e);
        Function *f = AS_FUNCTION(l->value);
        CHECK(AS_CALL(f->body)->op == &l->var->base, "letrec: value refers to the var");
    }
    /* precedence and associativity: 1 - 2 - 3 * 4 == (1 - 2) - (3 * 4) */
    e = must_expr(ctx, "1 - 2 - 3 * 4");
    if (e) {
        Call *c = AS_CALL(e);
        CHECK(strcmp(AS_OP(c->op)->name, "subtract") == 0, "prec: top op");
        CHECK(strcmp(AS_OP(AS_CALL(c->args[0])->op)->name, "subtract") == 0, "prec: left");
        CHECK(strcmp(AS_OP(AS_CALL(c->args[1])->op)->name, "multiply") == 0, "prec: right");
    }
    /* projections: %t.0.1 is two TupleGetItems */
    e = must_expr(ctx, "free_var %t; %t.0.1");
    if (e) {
        CHECK(e->kind == EXPR_TUPLE_GET_ITEM && AS_TUPLE_GET_ITEM(e)->index == 1, "proj outer");
        Expr *in = AS_TUPLE_GET_ITEM(e)->tuple;
        CHECK(in->kind == EXPR_TUPLE_GET_ITEM && AS_TUPLE_GET_ITEM(in)->index == 0, "proj inner");
    }
    /* call attributes */
    e = must_expr(ctx, "nn.conv2d(1, 2, padding=[1, 1], data_layout=\"NCHW\", x=None)");
    if (e) {
        Call *c = AS_CALL(e);
        CHECK(strcmp(AS_OP(c->op)->name, "nn.conv2d") == 0 && c->n_args == 2, "attrs: call");
        CHECK(c->attrs && c->attrs->n == 3, "attrs: count");
        const AttrValue *pad = ir_attrs_get(c->attrs, ir_intern(ctx, "padding", 7));
        CHECK(pad && pad->kind == ATTR_LIST && pad->list.n == 2 &&
                  pad->list.items[1]->kind == ATTR_INT && pad->list.items[1]->i == 1,
              "attrs: padding");
        const AttrValue *dl = ir_attrs_get(c->attrs, ir_intern(ctx, "data_layout", 11));
        CHECK(dl && dl->kind == ATTR_STR && strcmp(dl->s, "NCHW") == 0, "attrs: layout");
    }
    /* the same meta node every time */
    e = must_expr(ctx, "(meta[relay.Constant][0], meta[relay.Constant][0])");
    if (e) {
        Tuple *t = AS_TUPLE(e);
        CHECK(t->fields[0] == &meta_table[0]->base && t->fields[1] == t->fields[0], "meta node");
    }
    /* tensor types with symbolic and unknown dims */
    e = must_expr(ctx, "free_var %x: Tensor[(1, ?, n, meta[tir.SizeVar][2]), float32]; %x");
    if (e) {
        Var *v = AS_VAR(e);
        TensorType *tt = AS_TENSOR_TYPE(v->ann);
        CHECK(tt->ndim == 4 && tt->shape[0] == 1 && tt->shape[1] == DIM_ANY, "tensor dims");
        CHECK(dim_is_sym(tt->shape[2]) && strcmp(ir_dim_sym_name(ctx, tt->shape[2]), "n") == 0,
              "sym dim n");
        CHECK(dim_is_sym(tt->shape[3]) && strcmp(ir_dim_sym_name(ctx, tt->shape[3]), "sv_2") == 0,
              "sym dim sv_2");
    }
    ir_ctx_free(ctx);

    /* module: forward references resolve to the same constructor nodes; tags unique */
    ctx = ir_ctx_new();
    const char *mod = HDR "def @f() -> List[int32] { Cons(1, Nil) }\n" LIST_ADT "extern type S";
    Module *m = parse_n(ctx, mod, strlen(mod));
    CHECK(m != NULL && !m->is_expr, "module: %s", first_error(ctx));
    if (m) {
        CHECK(m->types.len == 2 && m->funcs.len == 1, "module: counts");
        TypeData *td = m->types.data[0];
        CHECK(td->n_ctors == 2 && td->n_tvars == 1 && !td->is_extern, "module: List");
        CHECK(td->header->def == td, "module: header def");
        Constructor *cons = td->ctors[0], *nil = td->ctors[1];
        CHECK(cons->n_inputs == 2 && nil->n_inputs == 0 && cons->tag != nil->tag, "module: ctors");
        CHECK(cons->inputs[0] == &td->tvars[0]->base, "module: Cons input 0 is A");
        CHECK(cons->inputs[1]->kind == TYPE_CALL, "module: Cons input 1 is List[A]");
        Function *f = m->funcs.data[0].func;
        Call *c = AS_CALL(f->body);
        CHECK(c->op == &cons->base, "module: Cons");
        CHECK(c->args[1]->kind == EXPR_CALL && AS_CALL(c->args[1])->op == &nil->base &&
                  AS_CALL(c->args[1])->n_args == 0,
              "module: Nil is a zero-argument call");
        CHECK(m->types.data[1]->is_extern && m->types.data[1]->n_ctors == 0, "module: extern");
    }
    ir_ctx_free(ctx);

    /* a duplicate constructor notes the first definition */
    ctx = ir_ctx_new();
    const char *dup = HDR "type T { A }\ntype U { A }";
    m = parse_n(ctx, dup, strlen(dup));
    CHECK(m == NULL && ctx->diags.items.len == 2 && ctx->diags.items.data[1].level == DIAG_NOTE,
          "dup ctor note");
    if (ctx->diags.items.len == 2) {
        Span first = ctx->diags.items.data[1].span, second = ctx->diags.items.data[0].span;
        CHECK(dup[first.lo] == 'A' && first.lo < second.lo && dup[second.lo] == 'A',
              "dup ctor spans");
    }
    ir_ctx_free(ctx);

    /* the error span points at the offending token */
    ctx = ir_ctx_new();
    const char *bad = "let %x = 1; %y";
    m = parse_n(ctx, bad, strlen(bad));
    CHECK(m == NULL && ctx->diags.items.len == 1 && ctx->diags.items.data[0].span.lo == 12 &&
              ctx->diags.items.data[0].span.hi == 14,
          "unbound span");
    ir_ctx_free(ctx);
}

/* ---- big inputs ---------------------------------------------------------------------------- */

static char *repeat3(const char *head, const char *item, size_t n, const char *tail, size_t *len) {
    size_t hl = strlen(head), il = strlen(item), tl = strlen(tail);
    char *s = malloc(hl + il * n + tl + 1);
    memcpy(s, head, hl);
    for (size_t i = 0; i < n; i++)
        memcpy(s + hl + i * il, item, il);
    memcpy(s + hl + il * n, tail, tl + 1);
    *len = hl + il * n + tl;
    return s;
}

static void expect_big(const char *what, const char *text, size_t len, const char *err) {
    Ctx *ctx = ir_ctx_new();
    Module *m = parse_n(ctx, text, len);
    check_contract(ctx, m, what);
    if (err == NULL)
        CHECK(m != NULL, "%s: should parse (%s)", what, first_error(ctx));
    else
        CHECK(m == NULL && strstr(first_error(ctx), err), "%s: want \"%s\", got \"%s\"", what, err,
              first_error(ctx));
    ir_ctx_free(ctx);
}

static void check_big(void) {
    enum { N = 100000 };
    StrBuf sb = {0};
    /* 10^5 nested lets */
    for (int i = 1; i <= N; i++)
        sb_printf(&sb, "let %%x%d = add(%%x%d, 1);\n", i, i - 1);
    sb_printf(&sb, "%%x%d", N);
    char *lets = NULL;
    {
        StrBuf full = {0};
        sb_puts(&full, "free_var %x0: int32;\n");
        sb_putn(&full, sb.data, sb.len);
        lets = sb_take(&full);
    }
    sb_free(&sb);
    expect_big("100k lets", lets, strlen(lets), NULL);
    free(lets);

    /* 10^5 graph bindings in a def */
    sb_puts(&sb, HDR "def @main(%x: float32) {\n  %0 = add(%x, %x);\n");
    for (int i = 1; i < N; i++)
        sb_printf(&sb, "  %%%d = add(%%%d, %%%d);\n", i, i - 1, i - 1);
    sb_printf(&sb, "  %%%d\n}\n", N - 1);
    expect_big("100k graph bindings", sb.data, sb.len, NULL);
    sb_free(&sb);

    size_t len;
    char *s = repeat3("", "(", N, "1", &len);
    expect_big("100k parens", s, len, "nesting too deep");
    free(s);
    s = repeat3("", "{", N, "1", &len);
    expect_big("100k braces", s, len, "nesting too deep");
    free(s);
    s = repeat3("f(a=", "[", N, "", &len);
    expect_big("100k attr lists", s, len, "nesting too deep");
    free(s);
    s = repeat3("free_var %x: ", "fn () -> ", N, "int32; %x", &len);
    expect_big("100k function types", s, len, "nesting too deep");
    free(s);
    s = repeat3("free_var %x: ", "(", N, "int32", &len);
    expect_big("100k tuple types", s, len, "nesting too deep");
    free(s);
    s = repeat3("", "match ", N, "", &len);
    expect_big("100k match", s, len, "nesting too deep");
    free(s);
    s = repeat3("", "fn () { ", N, "", &len);
    expect_big("100k fn", s, len, "nesting too deep");
    free(s);
    s = repeat3(HDR LIST_ADT "def @f(%l: List[int32]) { match (%l) { ", "Cons(_, ", N, "", &len);
    expect_big("100k patterns", s, len, "nesting too deep");
    free(s);
    s = repeat3("", "/*", N, "", &len);
    expect_big("100k comment openers", s, len, "unterminated block comment");
    free(s);
    /* just under the limit works */
    s = repeat3("", "(", 900, "1", &len);
    {
        StrBuf t = {0};
        sb_putn(&t, s, len);
        for (int i = 0; i < 900; i++)
            sb_putc(&t, ')');
        expect_big("900 parens", t.data, t.len, NULL);
        sb_free(&t);
    }
    free(s);
    /* long flat chains */
    s = repeat3("1", " + 1", N, "", &len);
    expect_big("100k binops", s, len, NULL);
    free(s);
    s = repeat3("f", "(1)", N, "", &len);
    expect_big("100k curried calls", s, len, NULL);
    free(s);
    s = repeat3("free_var %t; %t", ".0", N, "", &len);
    expect_big("100k projections", s, len, NULL);
    free(s);
    s = repeat3("", "1; ", N, "1", &len);
    expect_big("100k sequence", s, len, NULL);
    free(s);
    s = repeat3("(", "1, ", N, "1)", &len);
    expect_big("100k tuple", s, len, NULL);
    free(s);
    s = repeat3("", "9", N, "", &len);
    expect_big("huge integer", s, len, "out of range for int64");
    free(s);
    s = repeat3("", "9", N, ".5f", &len);
    expect_big("huge float", s, len, "too long");
    free(s);
    /* embedded NUL */
    expect_big("NUL", "1 +\0 2", 6, "invalid byte 0x00");
}

/* ---- random inputs: never crash, always honour the contract ------------------------------------
 */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static void check_random(void) {
    static const char *const frags[] = {
        "(",           ")",         "[",
        "]",           "{",         "}",
        ",",           ";",         ":",
        ".",           "=",         "=>",
        "->",          "+",         "-",
        "*",           "/",         "<",
        ">=",          "==",        "!=",
        "%x",          "%0",        "%1",
        "@f",          "@g",        "1",
        "-2i8",        "1.5f",      "inff",
        "0",           "let ",      "fn ",
        "def ",        "if ",       "else ",
        "match ",      "match? ",   "type ",
        "extern ",     "ref ",      "ref_read",
        "ref_write",   "free_var ", "True",
        "False",       "_",         "Cons",
        "Nil",         "List",      "A",
        "Tensor",      "float32",   "int32",
        "?",           "meta",      "relay.Constant",
        "tir.SizeVar", "\"s\"",     "/*",
        "*/",          "//",        "\n",
        " ",           "#",         "[version = \"0.0.5\"]",
        "nn.conv2d",   "a=",        "None",
        "\0",          "\xff",      "`",
    };
    const char *seeds[] = {
        HDR LIST_ADT
        "def @f[A](%l: List[A]) -> int32 { match (%l) { Cons(_, %r) => 1, Nil => 0 } }",
        "let %x = fn (%y: Tensor[(1, ?), float32]) { %y }; %x(meta[relay.Constant][0]).0",
        "%0 = add(1, 2); %1 = nn.conv2d(%0, %0, padding=[1, 1]); if (%1) { ref(%0) } else { () }",
    };
    StrBuf sb = {0};
    for (int iter = 0; iter < 20000; iter++) {
        sb.len = 0;
        if (iter % 2 == 0) {
            int n = (int)(rnd() % 40);
            for (int i = 0; i < n; i++) {
                const char *f = frags[rnd() % RLY_ARRAY_LEN(frags)];
                sb_putn(&sb, f, f[0] ? strlen(f) : 1);
            }
        } else { /* mutate a valid program: delete, duplicate or replace a byte range */
            const char *seed = seeds[rnd() % RLY_ARRAY_LEN(seeds)];
            size_t n = strlen(seed), a = rnd() % n, b = a + rnd() % 8;
            if (b > n) b = n;
            sb_putn(&sb, seed, a);
            switch (rnd() % 3) {
            case 0: break;
            case 1:
                sb_putn(&sb, seed + a, b - a);
                sb_putn(&sb, seed + a, b - a);
                break;
            default: {
                const char *f = frags[rnd() % RLY_ARRAY_LEN(frags)];
                sb_putn(&sb, f, f[0] ? strlen(f) : 1);
            }
            }
            sb_putn(&sb, seed + b, n - b);
        }
        Ctx *ctx = ir_ctx_new();
        Module *m = parse_n(ctx, sb.len ? sb.data : "", sb.len);
        size_t before = (size_t)n_fail;
        check_contract(ctx, m, "random input");
        if ((size_t)n_fail != before) fprintf(stderr, "  input: %.*s\n", (int)sb.len, sb.data);
        ir_ctx_free(ctx);
    }
    sb_free(&sb);
}

/* ---- out of memory: every allocation failure unwinds cleanly (ASan checks for leaks) --------- */

/* Parse with the (n+1)-th allocation failing: 1 parsed, 0 out of memory, -1 parse error. */
static int parse_failing_at(const char *text, long n) {
    Ctx *const ctx = ir_ctx_new();
    OomHandler h;
    int r;
    h.prev = sup_oom_handler;
    sup_oom_handler = &h;
    if (setjmp(h.jb) == 0) {
        sup_fail_after(n);
        Module *m = text_parse(ctx, "oom.rly", text, strlen(text), NULL, 0);
        sup_fail_after(-1);
        r = m != NULL ? 1 : -1;
    } else {
        sup_fail_after(-1);
        r = 0;
    }
    sup_oom_handler = h.prev;
    ir_ctx_free(ctx);
    return r;
}

static void check_oom(void) {
    const char *text = HDR LIST_ADT "def @f[A](%l: List[A], Primitive=1) -> int32 {\n"
                                    "  %0 = nn.conv2d(1, 2, padding=[1, 1], layout=\"NCHW\");\n"
                                    "  let %y: Tensor[(1, ?), float32] = (%0, %0).1;\n"
                                    "  match (%l) { Cons(_, %r) => @f(%r), Nil => 0 }\n"
                                    "}\n"
                                    "def @g() { @f(Nil) }\n";
    int n_oom = 0, r = 0;
    for (long n = 0; n < 100000 && r == 0; n++) {
        r = parse_failing_at(text, n);
        n_oom += r == 0;
    }
    CHECK(r == 1 && n_oom > 10, "oom: result %d after %d injected failures", r, n_oom);
}

int main(void) {
    /* one constant for meta[relay.Constant][0] */
    Ctx *meta_ctx = ir_ctx_new();
    int64_t shape[1] = {2};
    float data[2] = {1, 2};
    meta_table[0] =
        AS_CONSTANT(ir_constant_new(meta_ctx, RLY_DTYPE_F32, 1, shape, data, SPAN_NONE));

    for (size_t i = 0; i < RLY_ARRAY_LEN(cases); i++)
        run_case(&cases[i]);
    check_literals();
    check_structure();
    check_big();
    check_random();
    check_oom();

    /* NULL text of length 0 is the empty expression */
    Ctx *nctx = ir_ctx_new();
    CHECK(text_parse(nctx, NULL, NULL, 0, NULL, 0) == NULL &&
              strstr(first_error(nctx), "found end of input"),
          "NULL text: %s", first_error(nctx));
    ir_ctx_free(nctx);

    /* no table at all */
    Ctx *ctx = ir_ctx_new();
    const char *t = "meta[relay.Constant][0]";
    Module *m = text_parse(ctx, "t", t, strlen(t), NULL, 0);
    CHECK(m == NULL && strstr(first_error(ctx), "no metadata table"), "no table: %s",
          first_error(ctx));
    ir_ctx_free(ctx);
    ir_ctx_free(meta_ctx);

    return check_summary();
}
