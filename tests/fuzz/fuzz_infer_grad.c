/* fuzz_infer_grad.c - libFuzzer target for type inference and the gradient transform on
 * well-typed programs whose values share structure (the classes of issue 13, item 4: types
 * shaped as DAGs, whose trees are exponentially larger than their node counts).
 *
 * The input bytes are a recipe, read one byte at a time (0 once they run out): a program
 * @main(%x, %y: Tensor[(2), float64]) of up to 48 lets, each one of: a binary or unary operator
 * on float tensors, a tuple of earlier values (the same value may be picked twice: that is what
 * makes DAG-shaped types), a projection, a cast to int32, a pair of the last value with itself
 * or with %x, an `if` choosing between two values of one type, a closure with an inferred
 * parameter applied to a value, a global function applied to a value; the result is a tuple of
 * the last value and up to two others. It is printed as Relay text and parsed (so the parser is
 * fuzzed too), then:
 * - it must type-check (it is well-typed by construction), and inference must create at most a
 *   linear number of type nodes (WORK per byte of program text);
 * - the gradient in the higher-order mode, and in the first-order mode when the program is
 *   dataflow only, must succeed, and the module's code afterwards (expression nodes reached)
 *   and its printed text must stay linear in the program text;
 * - when every value's type is small as a tree (so that run-time values are small too), both
 *   gradients and @main run in the interpreter on fixed inputs: the gradients' values must equal
 *   @main's, and the two modes' gradients must agree.
 * Nothing here is timed, but libFuzzer's -timeout flags an input whose work explodes.
 *
 * Built twice: as the libFuzzer binary `fuzz_infer_grad` (RLY_FUZZ=ON) and into
 * `fuzz_replay_infer_grad` (every preset), which replays tests/fuzz/corpus/infer_grad. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "eval/eval.h"
#include "frontend/text/text.h"
#include "fuzz.h"
#include "passes/passes.h"
#include "runtime/value.h"
#include "types/types.h"

bool fuzz_keep_going;
size_t fuzz_n_failures;

enum { MAX_LETS = 48, MAX_VALUES = 64, MAX_TYPES = 256, MAX_FIELDS = 3 };
/* Work allowed per byte of program text: type nodes made, expression nodes after a gradient,
 * bytes of printed gradient (annotations of generated parameters stop at 512 nodes). */
enum { TYPES_PER_BYTE = 8, NODES_PER_BYTE = 60, PRINT_PER_BYTE = 2000 };
/* Run-time checks only when every value is at most this large as a tree of tensors. */
enum { RUN_MAX_LEAVES = 64 };

/* The generator's types, hash-consed (equal types are one pointer), as the IR's are. */
typedef enum { G_FLOAT, G_INT, G_TUPLE } GKind;
typedef struct GType GType;
struct GType {
    GKind kind;
    int n;
    GType *f[MAX_FIELDS];
    double leaves; /* tensors in the type written out as a tree */
};

typedef struct Gen {
    const uint8_t *data;
    size_t size, pos;
    GType types[MAX_TYPES];
    int n_types;
    GType *vt[MAX_VALUES]; /* value i is %v<i> (0: %x, 1: %y) */
    int n_values;
    StrBuf globals, body;
    int n_globals;
    bool dataflow; /* no if, closures or globals: the first-order mode applies */
    double max_leaves;
} Gen;

static unsigned next(Gen *g) { return g->pos < g->size ? g->data[g->pos++] : 0; }

static GType *gtype(Gen *g, GKind kind, int n, GType *const *f) {
    for (int i = 0; i < g->n_types; i++) {
        GType *t = &g->types[i];
        if (t->kind == kind && t->n == n && (n == 0 || memcmp(t->f, f, (size_t)n * sizeof *f) == 0))
            return t;
    }
    if (g->n_types == MAX_TYPES) return NULL;
    GType *t = &g->types[g->n_types++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->n = n;
    if (n) memcpy(t->f, f, (size_t)n * sizeof *f);
    t->leaves = kind == G_TUPLE ? 0 : 1;
    for (int i = 0; i < n; i++)
        t->leaves += f[i]->leaves;
    return t;
}

/* A value chosen by the next byte (among those satisfying want, if any does; else value 0). */
static int pick(Gen *g, bool (*want)(const GType *)) {
    int start = (int)(next(g) % (unsigned)g->n_values);
    for (int k = 0; k < g->n_values; k++) {
        int i = (start + k) % g->n_values;
        if (want == NULL || want(g->vt[i])) return i;
    }
    return 0;
}
static bool is_float(const GType *t) { return t->kind == G_FLOAT; }
static bool is_tuple(const GType *t) { return t->kind == G_TUPLE; }

static void add_value(Gen *g, GType *t) {
    g->vt[g->n_values++] = t;
    if (t->leaves > g->max_leaves) g->max_leaves = t->leaves;
}

/* One let of the recipe; false when nothing was added. */
static bool gen_let(Gen *g) {
    static const char *const binary[] = {"add", "multiply", "subtract"};
    static const char *const unary[] = {"tanh", "sin", "sigmoid", "negative"};
    int v = g->n_values;
    StrBuf *b = &g->body;
    switch (next(g) % 10) {
    case 0: {
        int x = pick(g, is_float), y = pick(g, is_float);
        sb_printf(b, "  let %%v%d = %s(%%v%d, %%v%d);\n", v, binary[next(g) % 3], x, y);
        add_value(g, g->vt[0]);
        return true;
    }
    case 1: {
        int x = pick(g, is_float);
        sb_printf(b, "  let %%v%d = %s(%%v%d);\n", v, unary[next(g) % 4], x);
        add_value(g, g->vt[0]);
        return true;
    }
    case 2: {
        int n = 1 + (int)(next(g) % MAX_FIELDS), ix[MAX_FIELDS];
        GType *f[MAX_FIELDS];
        for (int i = 0; i < n; i++) {
            ix[i] = pick(g, NULL);
            f[i] = g->vt[ix[i]];
        }
        GType *t = gtype(g, G_TUPLE, n, f);
        if (t == NULL) return false;
        sb_printf(b, "  let %%v%d = (", v);
        for (int i = 0; i < n; i++)
            sb_printf(b, "%s%%v%d", i ? ", " : "", ix[i]);
        sb_puts(b, n == 1 ? ",);\n" : ");\n");
        add_value(g, t);
        return true;
    }
    case 3: {
        int x = pick(g, is_tuple);
        GType *t = g->vt[x];
        if (t->kind != G_TUPLE) return false;
        int i = (int)(next(g) % (unsigned)t->n);
        sb_printf(b, "  let %%v%d = %%v%d.%d;\n", v, x, i);
        add_value(g, t->f[i]);
        return true;
    }
    case 4: {
        int x = pick(g, is_float);
        sb_printf(b, "  let %%v%d = cast(%%v%d, dtype=\"int32\");\n", v, x);
        add_value(g, gtype(g, G_INT, 0, NULL));
        return true;
    }
    case 5:
    case 6: { /* (last, last) or (last, %x): types that double or deepen each time */
        GType *f[2] = {g->vt[v - 1], g->vt[next(g) % 2 ? v - 1 : 0]};
        GType *t = gtype(g, G_TUPLE, 2, f);
        if (t == NULL) return false;
        sb_printf(b, "  let %%v%d = (%%v%d, %%v%d);\n", v, v - 1, f[1] == f[0] ? v - 1 : 0);
        add_value(g, t);
        return true;
    }
    case 7: { /* if: both branches of one type (the same value if no other has it) */
        int x = pick(g, NULL), y = x;
        for (int k = 0; k < g->n_values; k++)
            if (k != x && g->vt[k] == g->vt[x] && next(g) % 2) y = k;
        sb_printf(b, "  let %%v%d = if (less(sum(%%v0), sum(%%v1))) { %%v%d } else { %%v%d };\n", v,
                  x, y);
        add_value(g, g->vt[x]);
        g->dataflow = false;
        return true;
    }
    case 8: { /* a closure with an inferred parameter */
        int x = pick(g, NULL);
        GType *t = g->vt[x], *r = t;
        sb_printf(b, "  let %%f%d = fn (%%p) { ", v);
        unsigned how = next(g) % 3;
        if (how == 0 && t->kind == G_FLOAT) {
            sb_puts(b, "multiply(%p, %v0)");
        } else if (how == 1 && t->kind == G_TUPLE) {
            sb_puts(b, "%p.0");
            r = t->f[0];
        } else if (how == 2) {
            GType *f[2] = {t, g->vt[0]};
            if ((r = gtype(g, G_TUPLE, 2, f)) == NULL) return false;
            sb_puts(b, "(%p, %v0)");
        } else {
            sb_puts(b, "%p");
        }
        sb_printf(b, " };\n  let %%v%d = %%f%d(%%v%d);\n", v, v, x);
        add_value(g, r);
        g->dataflow = false;
        return true;
    }
    default: { /* a global function, parameter inferred from the call */
        int x = pick(g, NULL);
        GType *t = g->vt[x], *r = t;
        int k = g->n_globals++;
        sb_printf(&g->globals, "def @g%d(%%p) {\n  ", k);
        if (t->kind == G_FLOAT && next(g) % 2) {
            sb_puts(&g->globals, "tanh(%p)");
        } else if (t->kind == G_TUPLE && next(g) % 2) {
            sb_puts(&g->globals, "%p.0");
            r = t->f[0];
        } else {
            GType *f[2] = {t, t};
            if ((r = gtype(g, G_TUPLE, 2, f)) == NULL) return false;
            sb_puts(&g->globals, "(%p, %p)");
        }
        sb_puts(&g->globals, "\n}\n");
        sb_printf(b, "  let %%v%d = @g%d(%%v%d);\n", v, k, x);
        add_value(g, r);
        g->dataflow = false;
        return true;
    }
    }
}

static void gen_program(Gen *g, StrBuf *text) {
    GType *f64 = gtype(g, G_FLOAT, 0, NULL);
    add_value(g, f64);
    add_value(g, f64);
    g->dataflow = true;
    for (int i = 0; i < MAX_LETS && g->pos < g->size && g->n_values < MAX_VALUES; i++)
        gen_let(g);
    int n_out = 1 + (int)(next(g) % 3), out[3];
    for (int i = 0; i < n_out; i++) /* the last value first, then any */
        out[i] = i == 0 ? g->n_values - 1 : pick(g, NULL);
    sb_puts(text, "#[version = \"0.0.5\"]\n");
    sb_putn(text, g->globals.data ? g->globals.data : "", g->globals.len);
    sb_puts(text, "def @main(%v0: Tensor[(2), float64], %v1: Tensor[(2), float64]) {\n");
    sb_putn(text, g->body.data ? g->body.data : "", g->body.len);
    sb_puts(text, "  (");
    for (int i = 0; i < n_out; i++)
        sb_printf(text, "%s%%v%d", i ? ", " : "", out[i]);
    sb_puts(text, n_out == 1 ? ",)\n}\n" : ")\n}\n");
}

/* ---- checks ---------------------------------------------------------------------------------- */

static const char *cur_text;

RLY_PRINTF(1, 2)
static void fail(const char *fmt, ...) {
    fputs("fuzz_infer_grad: FAIL: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nprogram:\n%.6000s\n", cur_text);
    if (!fuzz_keep_going) abort();
    fuzz_n_failures++;
}

static char *render(Ctx *ctx) {
    StrBuf sb = {0};
    diags_render(&ctx->diags, 0, &sb);
    diags_clear(&ctx->diags);
    return sb_take(&sb);
}

static size_t n_seen;
static void count_post(Visitor *v, Expr *e) {
    (void)v;
    (void)e;
    n_seen++;
}
static size_t n_nodes(Module *m) {
    n_seen = 0;
    Visitor v = {NULL, count_post, NULL};
    for (size_t i = 0; i < m->funcs.len; i++)
        if (m->funcs.data[i].func) ir_visit(&v, &m->funcs.data[i].func->base);
    return n_seen;
}

static Value *tensor2(double a, double b) {
    char err[128];
    int64_t shape[1] = {2};
    RtTensor *t = rt_tensor_new(RLY_DTYPE_F64, 1, shape, err, sizeof err);
    double *d = rt_tensor_data(t);
    d[0] = a;
    d[1] = b;
    return &t->hdr;
}

/* The float64 tensors of v, depth-first, appended to out. */
static void leaves(Value *v, PtrVec *out) {
    if (v->kind == VAL_TUPLE) {
        RtTuple *t = (RtTuple *)v;
        for (uint32_t i = 0; i < t->n; i++)
            leaves(t->f[i], out); /* small: RUN_MAX_LEAVES */
    } else if (v->kind == VAL_TENSOR && rt_tensor_dtype((RtTensor *)v) == RLY_DTYPE_F64) {
        vec_push(out, v);
    }
}

/* Do the float64 tensors of a and b agree (same count, elements within tolerance)? */
static bool agree(Value *a, Value *b) {
    PtrVec la = {0}, lb = {0};
    leaves(a, &la);
    leaves(b, &lb);
    bool ok = la.len == lb.len;
    for (size_t i = 0; ok && i < la.len; i++) {
        const double *x = rt_tensor_data(la.data[i]), *y = rt_tensor_data(lb.data[i]);
        for (int k = 0; k < 2; k++)
            if (!(fabs(x[k] - y[k]) <= 1e-9 * (1 + fabs(x[k])))) ok = false;
    }
    vec_free(&la);
    vec_free(&lb);
    return ok;
}

/* Run @main and the gradients named in grads[0..n) (NULL: absent) on fixed inputs. */
static void check_runs(Module *m, const char *const *grads, int n) {
    Interp *it = ev_new(m);
    Value *args[2] = {tensor2(0.3, -0.7), tensor2(0.5, 1.1)};
    Value *main_v = ev_call_global(it, "main", 2, args);
    Value *gv[2] = {NULL, NULL};
    if (main_v == NULL) {
        char *msg = render(m->ctx);
        fail("@main does not run: %s", msg);
        free(msg);
    }
    for (int k = 0; k < n && main_v; k++) {
        if (grads[k] == NULL) continue;
        gv[k] = ev_call_global(it, grads[k], 2, args);
        if (gv[k] == NULL) {
            char *msg = render(m->ctx);
            fail("@%s does not run: %s", grads[k], msg);
            free(msg);
            continue;
        }
        RtTuple *t = (RtTuple *)gv[k];
        if (gv[k]->kind != VAL_TUPLE || t->n != 2 || !agree(t->f[0], main_v))
            fail("@%s's value differs from @main's", grads[k]);
    }
    if (gv[0] && gv[1] && !agree(((RtTuple *)gv[0])->f[1], ((RtTuple *)gv[1])->f[1]))
        fail("the two modes' gradients differ");
    for (int k = 0; k < 2; k++)
        if (gv[k]) rt_release(gv[k]);
    if (main_v) rt_release(main_v);
    rt_release(args[0]);
    rt_release(args[1]);
    ev_free(it);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Gen *g = calloc(1, sizeof *g);
    g->data = data;
    g->size = size;
    StrBuf text = {0};
    gen_program(g, &text);
    cur_text = sb_cstr(&text);
    Ctx *ctx = ir_ctx_new();
    Module *m = text_parse(ctx, "gen.rly", text.data, text.len, NULL, 0);
    size_t types0 = ctx->types.len;
    if (m == NULL || !ir_well_formed(m) || !ty_infer_module(m)) {
        char *msg = render(ctx);
        fail("the generated program does not check:\n%s", msg);
        free(msg);
        goto done;
    }
    if (ctx->types.len - types0 > TYPES_PER_BYTE * text.len)
        fail("inference made %zu type nodes for %zu bytes", ctx->types.len - types0, text.len);
    const char *grads[2] = {"grad_h", g->dataflow ? "grad_f" : NULL};
    for (int k = 0; k < 2; k++) {
        if (grads[k] == NULL) continue;
        if (!pass_gradient(m, "main", k ? GRAD_FIRST : GRAD_HIGHER, grads[k])) {
            char *msg = render(ctx);
            fail("the %s gradient failed:\n%s", k ? "first-order" : "higher-order", msg);
            free(msg);
            goto done;
        }
        size_t nodes = n_nodes(m);
        if (nodes > NODES_PER_BYTE * text.len)
            fail("%zu expression nodes after the %s gradient of %zu bytes", nodes,
                 k ? "first-order" : "higher-order", text.len);
    }
    StrBuf out = {0};
    ir_print_module(m, NULL, &out);
    if (out.len > PRINT_PER_BYTE * text.len)
        fail("the module prints in %zu bytes after the gradients of %zu bytes", out.len, text.len);
    sb_free(&out);
    if (g->max_leaves <= RUN_MAX_LEAVES) check_runs(m, grads, 2);
done:
    ir_ctx_free(ctx);
    sb_free(&text);
    sb_free(&g->globals);
    sb_free(&g->body);
    free(g);
    return 0;
}
