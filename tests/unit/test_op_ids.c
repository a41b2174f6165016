/* test_op_ids.c - the dense operator ids (support/ops.def) and the tables indexed by them (the
 * operator registry, the reference kernels, the gradients), and the two parsers that src/ops and
 * src/kernels share: layouts and einsum equations (support.h), on accepted and rejected strings. */
#include <string.h>

#include "../check.h"
#include "kernels/kernel.h"
#include "ops/ops.h"
#include "passes/grad.h"

/* ---- ids and the tables indexed by them ---------------------------------------------------- */

static void test_ids(void) {
    CHECK(op_count() >= OP_ID_COUNT, "op_count %zu < OP_ID_COUNT %d", op_count(), OP_ID_COUNT);
    CHECK(sup_op_name(OP_ID_COUNT) == NULL, "a name past the builtin ids");
    for (uint32_t id = 0; id < OP_ID_COUNT; id++) {
        const OpDef *d = op_at(id);
        const char *name = sup_op_name(id);
        CHECK(d != NULL && d->id == id, "op_at(%u) does not have id %u", id, id);
        CHECK(name != NULL && d != NULL && d->name == name,
              "op %u: the row's name is not ops.def's", id);
        if (name == NULL) continue;
        /* name -> id agrees with id -> row, so names are unique too */
        CHECK(op_lookup(name, strlen(name)) == d, "op_lookup(%s) is not op_at(%u)", name, id);
    }
    CHECK(strcmp(sup_op_name(OP_ID_ADD), "add") == 0, "OP_ID_ADD names %s", sup_op_name(OP_ID_ADD));
    CHECK(strcmp(sup_op_name(OP_ID_NN_CONV2D), "nn.conv2d") == 0, "OP_ID_NN_CONV2D");
    CHECK(strcmp(sup_op_name(OP_ID_DYN_NN_PAD), "dyn.nn.pad") == 0, "OP_ID_DYN_NN_PAD");
}

static RelResult user_rel(RelCall *rc) { return rel_out(rc, rc->args[0]); }

static void test_registered(void) {
    static OpDef def = {.name = "test_op_ids.user", .n_args = 1, .rel = user_rel, .doc = "a test"};
    StrBuf msg = {0};
    size_t before = op_count();
    CHECK(op_register(&def, &msg), "op_register: %s", sb_cstr(&msg));
    CHECK(def.id == before && def.id >= OP_ID_COUNT, "registered id %u, expected %zu", def.id,
          before);
    CHECK(op_at(def.id) == &def, "op_at(registered id)");
    CHECK(kern_ref_lookup(def.id) == NULL, "a registered operator has no reference kernel");
    CHECK(grad_of(&def) == NULL, "a registered operator has no gradient");
    sb_free(&msg);
}

static void test_calls(void) {
    Ctx *ctx = ir_ctx_new();
    Expr *conv = ir_op_get(ctx, "nn.conv2d", 9), *bogus = ir_op_get(ctx, "no.such_op", 10);
    CHECK(op_def_of(conv) == op_at(OP_ID_NN_CONV2D), "op_def_of(nn.conv2d)");
    CHECK(AS_OP(conv)->info == op_at(OP_ID_NN_CONV2D), "op_def_of keeps the row in Op.info");
    CHECK(op_def_of(bogus) == NULL, "op_def_of(unknown)");
    Expr *x = &ir_var_new(ctx, ir_intern(ctx, "x", 1), NULL, SPAN_NONE)->base;
    Expr *args[2] = {x, x};
    Expr *c = ir_call_new(ctx, conv, 2, args, NULL, 0, NULL, SPAN_NONE);
    Expr *u = ir_call_new(ctx, bogus, 1, args, NULL, 0, NULL, SPAN_NONE);
    CHECK(op_call_id(c) == OP_ID_NN_CONV2D, "op_call_id(nn.conv2d call) = %d", op_call_id(c));
    CHECK(op_call_id(u) == -1, "op_call_id(unknown operator call)");
    CHECK(op_call_id(x) == -1, "op_call_id(variable)");
    ir_ctx_free(ctx);
}

static void test_kernels(void) {
    uint32_t n = 0;
    for (uint32_t id = 0; id < OP_ID_COUNT; id++) {
        bool has = kern_ref_lookup(id) != NULL;
        n += has;
        CHECK(has, "no reference kernel for %s", sup_op_name(id));
    }
    CHECK(n == OP_ID_COUNT, "%u reference kernels for %d operators", n, OP_ID_COUNT);
    CHECK(kern_ref_lookup(OP_ID_COUNT) == NULL, "a kernel past the builtin ids");
}

static void test_gradients(void) {
    uint32_t rows = 0, nonzero = 0;
    for (uint32_t id = 0; id < OP_ID_COUNT; id++) {
        const OpDef *d = op_at(id);
        OpGradFn g = grad_of(d);
        CHECK(g == grad_lookup(d->name), "grad_of and grad_lookup disagree on %s", d->name);
        rows += g != NULL;
        nonzero += g != NULL && !grad_is_zero(d->name);
    }
    CHECK(rows == grad_count(), "%u operators with a gradient row, grad_count says %zu", rows,
          grad_count());
    /* as before the tables were indexed by id: 137 nonzero gradients and 34 zero ones */
    CHECK(nonzero == 137 && rows == 171, "%u nonzero gradients of %u (expected 137 of 171)",
          nonzero, rows);
    for (size_t i = 0; i < grad_count(); i++) {
        const char *nm = grad_name_at(i);
        CHECK(nm != NULL && grad_lookup(nm) != NULL, "gradient row %zu", i);
    }
    CHECK(grad_lookup("no.such_op") == NULL && !grad_is_zero("no.such_op"), "unknown names");
}

/* ---- layouts -----------------------------------------------------------------------------------
 */

static void layout_ok(const char *s, uint32_t n, const char *axes) {
    SupLayout l;
    char why[256];
    const char *err = sup_layout_parse(s, &l, why, sizeof why);
    CHECK(err == NULL, "layout \"%s\" rejected: %s", s, err ? err : "");
    if (err != NULL) return;
    CHECK(l.n == n && l.text == s, "layout \"%s\": %u axes, expected %u", s, l.n, n);
    for (uint32_t i = 0; axes[i] && i < l.n; i++)
        CHECK(l.axis[i] == axes[i], "layout \"%s\": axis %u is %c", s, i, l.axis[i]);
    KLayout k;
    CHECK(k_layout_parse(s, &k) && k.n == n, "kernels' k_layout_parse disagrees on \"%s\"", s);
}

static void layout_bad(const char *s, const char *want) {
    SupLayout l;
    char why[256];
    const char *err = sup_layout_parse(s, &l, why, sizeof why);
    CHECK(err != NULL && strstr(err, want) != NULL, "layout \"%s\": expected '%s', got '%s'",
          s ? s : "(null)", want, err ? err : "(accepted)");
    KLayout k;
    CHECK(!k_layout_parse(s, &k), "kernels' k_layout_parse accepts \"%s\"", s ? s : "(null)");
}

static void test_layouts(void) {
    layout_ok("NCHW", 4, "NCHW");
    layout_ok("NHWC", 4, "NHWC");
    layout_ok("NCDHW", 5, "NCDHW");
    layout_ok("N", 1, "N");
    layout_ok("NCHW16c", 5, "NCHWc");
    layout_ok("OIHW4i4o", 6, "OIHWio");
    layout_ok("NCHW2147483647c", 5, "NCHWc"); /* INT32_MAX, the largest block */
    layout_ok("ABCDEFGHIJKLMNOPQRSTUVWXYZ1a1b1c1d1e1f", 32, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef");
    SupLayout l;
    char why[64];
    CHECK(sup_layout_parse("OIHW4i8o", &l, why, sizeof why) == NULL, "OIHW4i8o");
    CHECK(sup_layout_block(&l, 'I') == 4 && sup_layout_block(&l, 'O') == 8 &&
              sup_layout_block(&l, 'H') == 0,
          "block sizes of OIHW4i8o");
    CHECK(sup_layout_find(&l, 'o') == 5 && sup_layout_find(&l, 'C') == -1, "find in OIHW4i8o");
    CHECK(l.factor[0] == 0 && l.factor[4] == 4, "factors of OIHW4i8o");
    CHECK(sup_layout_convertible(&l, "OIHW") && sup_layout_convertible(&l, "HWIO") &&
              !sup_layout_convertible(&l, "OIDHW") && !sup_layout_convertible(&l, "OIH"),
          "OIHW4i8o converts to OIHW and HWIO only");

    layout_bad("", "is empty");
    layout_bad(NULL, "is empty");
    layout_bad("NCHH", "names axis H twice");
    layout_bad("NCHW4", "is not a layout");
    layout_bad("NCHWc", "is not a layout");
    layout_bad("NCHW0c", "is not a layout");
    layout_bad("NCHW99999999999c", "is not a layout");
    layout_bad("NCHW2147483648c", "is not a layout");
    layout_bad("NCHW4c4c", "is not a layout");
    layout_bad("NC?W", "is not a layout");
    layout_bad("nchw", "is not a layout");
    layout_bad("NCHW4x", "has sub-axis x without axis X");
    layout_bad("ABCDEFGHIJKLMNOPQRSTUVWXYZ1a1b1c1d1e1f1g", "has more than 32 axes");
}

/* ---- einsum equations ---------------------------------------------------------------------------
 */

/* The terms of a parsed equation written back ("ij,jk->ik", "..." as '.'). */
static void unparse(const SupEinsum *e, char *buf) {
    char *p = buf;
    for (uint32_t i = 0; i <= e->n_in; i++) {
        const SupEinsumTerm *t = i < e->n_in ? &e->in[i] : &e->out;
        if (i == e->n_in)
            *p++ = '-', *p++ = '>';
        else if (i > 0)
            *p++ = ',';
        for (uint32_t j = 0; j < t->n; j++) {
            int l = e->items[t->start + j];
            *p++ = l == SUP_EINSUM_ELLIPSIS ? '.' : sup_einsum_char(l);
        }
    }
    *p = '\0';
}

static void einsum_ok(const char *eq, bool explicit_out, const char *want) {
    static SupEinsum e;
    char why[256], got[2048];
    const char *err = sup_einsum_parse(eq, &e, why, sizeof why);
    CHECK(err == NULL, "equation \"%s\" rejected: %s", eq, err ? err : "");
    if (err != NULL) return;
    unparse(&e, got);
    CHECK(strcmp(got, want) == 0 && e.explicit_out == explicit_out,
          "equation \"%s\" parsed as \"%s\", expected \"%s\"", eq, got, want);
}

static void einsum_bad(const char *eq, const char *want) {
    static SupEinsum e;
    char why[256];
    const char *err = sup_einsum_parse(eq, &e, why, sizeof why);
    CHECK(err != NULL && strstr(err, want) != NULL, "equation \"%.40s\": expected '%s', got '%s'",
          eq, want, err ? err : "(accepted)");
}

static void test_einsum(void) {
    einsum_ok("ij,jk->ik", true, "ij,jk->ik");
    einsum_ok("ij,jk", false, "ij,jk->ik");
    einsum_ok("ji", false, "ji->ij");
    einsum_ok("ba,aC", false, "ba,aC->Cb"); /* capitals first, as ASCII sorts them */
    einsum_ok("ii", false, "ii->");
    einsum_ok("ii->i", true, "ii->i");
    einsum_ok("i,i->", true, "i,i->");
    einsum_ok("bij, bjk ->bik ", true, "bij,bjk->bik");
    einsum_ok("...ij,jk->...ik", true, ".ij,jk->.ik");
    einsum_ok("...ij,...jk", false, ".ij,.jk->.ik");
    einsum_ok("i...->...i", true, "i.->.i");
    einsum_ok("ij->...ij", true, "ij->.ij"); /* "..." of no dims */
    einsum_ok("", false, "->");
    static SupEinsum e;
    char why[256];
    CHECK(sup_einsum_parse("iij,jk", &e, why, sizeof why) == NULL && e.count['i' - 'a'] == 2 &&
              e.count['j' - 'a'] == 2 && e.count['k' - 'a'] == 1 && e.n_in == 2 && e.in[0].n == 3,
          "label counts of iij,jk");

    einsum_bad("i.j", "write \"...\" at most once per term");
    einsum_bad("...i...", "write \"...\" at most once per term");
    einsum_bad("i1", "has '1', which is not a letter");
    einsum_bad("ij->j->i", "more than one \"->\"");
    einsum_bad("ij-k", "'-' must start \"->\"");
    einsum_bad("ij->ik", "output label k is not in any input");
    einsum_bad("ij->ii", "output label i appears twice");
    einsum_bad("ij,jk->i,k", "more than one output term");
    char many[200] = "";
    for (int i = 0; i < 65; i++)
        strcat(many, i ? ",i" : "i");
    einsum_bad(many, "more than 64 input terms");
    static char long_eq[1100];
    memset(long_eq, 'a', 1025);
    einsum_bad(long_eq, "more than 1024 labels");
}

int main(void) {
    test_ids();
    test_registered();
    test_calls();
    test_kernels();
    test_gradients();
    test_layouts();
    test_einsum();
    return check_summary();
}
