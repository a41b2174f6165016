/* test_vm_compile.c - the VM compiler (src/backend) against the interpreter, its oracle.
 *
 * Every program of the given folders (tests/vm, tests/autodiff, examples, tests/golden/typed)
 * that has an @main (or is a bare expression) is compiled with types only (operators called
 * directly, as `rly run -O0` runs them), after the level-0 pipeline (one Primitive function per
 * operator) and after the -O3 pipeline (be_compile
 * validates and binds the executable); when @main's parameters can be generated (tensors and
 * tuples of them: random, seeded) it is run through the VM (vm_invoke) and through the
 * interpreter (ev_call_global) on the same inputs, and the two results must be identical:
 * tensors bitwise (any NaN equals any NaN), tuples, constructor values and references
 * structurally, functions as functions. A program that fails must fail in both with the same
 * first line ("file:line:col: error: message"); a program whose leading comments say
 * `// error: TEXT` must fail so, with TEXT in the message. `// prelude` loads the prelude first
 * (a program that does not parse alone is retried with it); `// expect: TEXT` gives the result
 * as vm_print_value prints it, in place of the interpreter's (for programs that take the
 * interpreter too long under ASan). Unit cases check what the
 * differential run cannot see: the scalar fast path, tail calls, decision trees, locations.
 *
 *   test_vm_compile DIR...              the differential run (seed printed; RLY_SEED replays)
 *   test_vm_compile --disasm FILE [-ON] print FILE's executable */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "../golden/golden_util.h"
#include "backend/backend.h"
#include "eval/eval.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "types/types.h"

static uint64_t seed;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- loading and compiling --------------------------------------------------------------------
 */

/* The module of text (prelude first when asked, or when it does not parse alone); NULL after
 * printing why. */
static Module *load(Ctx *ctx, const char *text, const char *name, bool prelude) {
    rly_module *m = NULL;
    rly_status st;
    if (!prelude) {
        st = rly_module_parse(ctx, text, strlen(text), name, &m);
        if (st == RLY_STATUS_OK) return m;
        diags_clear(&ctx->diags);
    }
    st = rly_module_prelude(ctx, &m);
    if (st == RLY_STATUS_OK) st = rly_module_parse_into(m, text, strlen(text), name);
    if (st != RLY_STATUS_OK) {
        fprintf(stderr, "%s: does not load: %s\n", name, rly_last_error());
        return NULL;
    }
    return m;
}

/* Level -1: types only (what `rly run -O0` runs: operators called directly); 0: the level-0
 * pipeline (FuseOps makes one Primitive function per operator); 3: the default pipeline. */
static bool optimize(Module *m, int level) {
    if (level < 0) return pass_module_typed(m) || ty_infer_module(m);
    PassOptions po = {.opt_level = level};
    return pass_run(m, &po);
}

static char *diag_text(Ctx *ctx, size_t from) {
    StrBuf sb = {0};
    diags_render(&ctx->diags, from, &sb);
    return sb_take(&sb);
}

/* The first line of s (a copy). */
static char *first_line(const char *s) {
    const char *nl = strchr(s, '\n');
    size_t n = nl ? (size_t)(nl - s) : strlen(s);
    char *r = malloc(n + 1);
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}

/* ---- inputs -----------------------------------------------------------------------------------
 */

static uint64_t rng;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A random value of type t (tensors and tuples of them); NULL when t has another kind or an
 * unknown dim. Recursion over the type's tuple nesting (small in these programs). */
static Value *gen(Type *t, int depth) {
    if (t == NULL || depth > 32) return NULL;
    if (t->kind == TYPE_TUPLE) {
        TupleType *tt = AS_TUPLE_TYPE(t);
        RtTuple *tu = rt_tuple_new(tt->n);
        for (uint32_t i = 0; i < tt->n; i++) {
            tu->f[i] = gen(tt->fields[i], depth + 1);
            if (tu->f[i] == NULL) {
                rt_release(&tu->hdr);
                return NULL;
            }
        }
        return &tu->hdr;
    }
    if (t->kind != TYPE_TENSOR) return NULL;
    TensorType *tt = AS_TENSOR_TYPE(t);
    for (uint32_t d = 0; d < tt->ndim; d++)
        if (tt->shape[d] < 0) return NULL;
    char err[256];
    RtTensor *v = rt_tensor_new(tt->dtype, tt->ndim, tt->shape, err, sizeof err);
    if (v == NULL) return NULL;
    int64_t n = k_numel(&v->t);
    void *p = rt_tensor_data(v);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = next_rand();
        if (sup_dtype_is_float(tt->dtype))
            k_storef(p, tt->dtype, i, (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        else if (tt->dtype == RLY_DTYPE_BOOL)
            k_storei(p, tt->dtype, i, (int64_t)(r >> 63));
        else
            k_storei(p, tt->dtype, i, (int64_t)(r % 10));
    }
    return &v->hdr;
}

/* ---- comparing values -------------------------------------------------------------------------
 */

static bool same_tensor(const RtTensor *a, const RtTensor *b, char *why, size_t cap) {
    rly_dtype da = rt_tensor_dtype(a), db = rt_tensor_dtype(b);
    char sa[128], sb[128];
    if (da != db || !k_same_shape(&a->t, &b->t)) {
        snprintf(why, cap, "Tensor[%s, %s] vs Tensor[%s, %s]", k_shape_str(&a->t, sa, sizeof sa),
                 sup_dtype_name(da), k_shape_str(&b->t, sb, sizeof sb), sup_dtype_name(db));
        return false;
    }
    int64_t n = k_numel(&a->t);
    size_t es = sup_dtype_size(da);
    const char *pa = rt_tensor_data(a), *pb = rt_tensor_data(b);
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(pa + i * (int64_t)es, pb + i * (int64_t)es, es) == 0) continue;
        if (sup_dtype_is_float(da) && isnan(k_loadf(pa, da, i)) && isnan(k_loadf(pb, da, i)))
            continue;
        if (sup_dtype_is_float(da))
            snprintf(why, cap, "element %lld: %.17g vs %.17g", (long long)i, k_loadf(pa, da, i),
                     k_loadf(pb, da, i));
        else
            snprintf(why, cap, "element %lld: %lld vs %lld", (long long)i,
                     (long long)k_loadi(pa, da, i), (long long)k_loadi(pb, da, i));
        return false;
    }
    return true;
}

/* Structural equality (an explicit stack; at most 10^7 steps, a DAG-shaped value may be
 * exponentially large as a tree). */
static bool same_value(const Value *a, const Value *b, char *why, size_t cap) {
    typedef struct {
        const Value *a, *b;
    } Pair;
    Vec(Pair) st = {0};
    Pair p0 = {a, b};
    vec_push(&st, p0);
    bool ok = true;
    size_t steps = 0;
    while (st.len > 0 && ok && steps++ < 10000000) {
        Pair p = vec_pop(&st);
        if (p.a == NULL || p.b == NULL) {
            ok = p.a == p.b;
            if (!ok) snprintf(why, cap, "a missing value");
            break;
        }
        if (p.a->kind != p.b->kind) {
            snprintf(why, cap, "value kinds %u vs %u", p.a->kind, p.b->kind);
            ok = false;
            break;
        }
        switch (p.a->kind) {
        case VAL_TENSOR: ok = same_tensor(RT_TENSOR(p.a), RT_TENSOR(p.b), why, cap); break;
        case VAL_TUPLE:
            if (RT_TUPLE(p.a)->n != RT_TUPLE(p.b)->n) {
                snprintf(why, cap, "tuples of %u and %u fields", RT_TUPLE(p.a)->n,
                         RT_TUPLE(p.b)->n);
                ok = false;
                break;
            }
            for (uint32_t i = 0; i < RT_TUPLE(p.a)->n; i++) {
                Pair q = {RT_TUPLE(p.a)->f[i], RT_TUPLE(p.b)->f[i]};
                vec_push(&st, q);
            }
            break;
        case VAL_ADT:
            if (RT_ADT(p.a)->tag != RT_ADT(p.b)->tag || RT_ADT(p.a)->n != RT_ADT(p.b)->n) {
                snprintf(why, cap, "constructor tags %d vs %d", RT_ADT(p.a)->tag, RT_ADT(p.b)->tag);
                ok = false;
                break;
            }
            for (uint32_t i = 0; i < RT_ADT(p.a)->n; i++) {
                Pair q = {RT_ADT(p.a)->f[i], RT_ADT(p.b)->f[i]};
                vec_push(&st, q);
            }
            break;
        case VAL_REF: {
            Pair q = {RT_REF(p.a)->v, RT_REF(p.b)->v};
            vec_push(&st, q);
            break;
        }
        case VAL_CLOSURE: break; /* functions compare as functions */
        }
    }
    vec_free(&st);
    return ok;
}

/* ---- one program ------------------------------------------------------------------------------
 */

typedef struct Outcome {
    Value *v;    /* owned, or NULL */
    char *error; /* the first line of the error, malloc'ed, or NULL */
    Interp *it;  /* the interpreter whose constants v may hold */
} Outcome;

static void outcome_free(Outcome *o) {
    rt_release(o->v);
    free(o->error);
    ev_free(o->it);
}

static Outcome run_interp(Module *m, const char *entry, Function *main_fn, uint32_t n,
                          Value **args) {
    Outcome o = {0};
    Interp *it = ev_new(m);
    o.it = it;
    size_t from = m->ctx->diags.items.len;
    o.v = main_fn ? ev_call_global(it, entry, n, args) : ev_eval_module_expr(it);
    if (o.v == NULL) {
        char *t = diag_text(m->ctx, from);
        o.error = first_line(t);
        free(t);
    }
    diags_clear(&m->ctx->diags);
    return o;
}

static Outcome run_vm(const VmExec *exe, uint32_t n, Value **args) {
    Outcome o = {0};
    Vm *vm = vm_new(exe);
    /* Some programs loop forever on some inputs (tests/golden/typed/let_rec_closure.rly with
     * %step = 0): such a run ends at the time limit and is not compared. */
    RtLimits lim = rt_limits_default();
    lim.timeout = 5;
    vm_set_limits(vm, &lim);
    char err[2048] = "";
    o.v = vm_invoke(vm, exe->entry, n, args, err, sizeof err);
    if (o.v == NULL) o.error = first_line(err[0] ? err : "(no message)");
    vm_free(vm);
    return o;
}

static int n_ran, n_compiled;

/* What a program expects of its run (its leading directives). */
typedef struct Expect {
    const char *error; /* the run must fail with this in its message, or NULL */
    const char *value; /* the VM's printed result (the interpreter is not run), or NULL */
    bool same_place;   /* errors need only agree on their location (see test_user_op) */
} Expect;

static void check_module(const char *name, Ctx *ctx, Module *m, const char *entry, int level,
                         const Expect *ex, bool verbose);

/* Compile (and run, when its inputs can be made) @main of text at opt level `level`. */
static void check_program(const char *name, const char *text, int level, bool verbose) {
    char flag[256], want_err[512], want_val[4096];
    bool prelude = golden_directive(text, "prelude", flag, sizeof flag);
    Expect ex = {0};
    if (golden_directive(text, "expect", want_val, sizeof want_val)) ex.value = want_val;
    if (golden_directive(text, "error", want_err, sizeof want_err)) ex.error = want_err;
    Ctx *ctx = NULL;
    rly_ctx_new(&ctx);
    Module *m = load(ctx, text, name, prelude);
    if (m == NULL) {
        CHECK(false, "%s: does not load", name);
        rly_ctx_free(ctx);
        return;
    }
    FuncDef *d = ir_module_lookup(m, "main", 4);
    if ((d != NULL && d->func != NULL) || m->is_expr)
        check_module(name, ctx, m, "main", level, &ex, verbose);
    rly_ctx_free(ctx);
}

/* Optimize m at `level`, compile it with `entry`, and compare its run with the interpreter's.
 * The caller frees ctx. */
static void check_module(const char *name, Ctx *ctx, Module *m, const char *entry, int level,
                         const Expect *ex, bool verbose) {
    bool given = ex->value != NULL, expect_error = ex->error != NULL;
    const char *want_val = ex->value, *want_err = ex->error;
    if (!optimize(m, level)) {
        char *t = diag_text(ctx, 0);
        CHECK(false, "%s -O%d: does not optimize:\n%s", name, level, t);
        free(t);
        return;
    }
    FuncDef *d = ir_module_lookup(m, entry, strlen(entry));
    Function *main_fn = d && d->func ? d->func : NULL;
    size_t from = ctx->diags.items.len;
    double tc = now_s();
    VmExec *exe = be_compile(m, main_fn ? entry : NULL);
    if (getenv("VMC_TIME")) printf("%s -O%d: compiled in %.3f s\n", name, level, now_s() - tc);
    if (exe == NULL) {
        char *t = diag_text(ctx, from);
        CHECK(false, "%s -O%d: does not compile:\n%s", name, level, t);
        free(t);
        return;
    }
    n_compiled++;
    if (verbose) {
        StrBuf sb = {0};
        be_disasm(exe, &sb);
        printf("%s", sb_cstr(&sb));
        sb_free(&sb);
    }
    /* Inputs. */
    uint32_t n = main_fn ? main_fn->n_params : 0;
    Value **args = calloc(n ? n : 1, sizeof *args);
    bool can_run = true;
    rng = seed ^ 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < n && can_run; i++) {
        args[i] = gen(main_fn->params[i]->base.checked_type, 0);
        can_run = args[i] != NULL;
    }
    if (can_run) {
        n_ran++;
        if (getenv("VMC_TRACE")) fprintf(stderr, "run %s -O%d\n", name, level);
        double t0 = now_s();
        Outcome vi = run_vm(exe, n, args);
        double t1 = now_s();
        Outcome ii = {0};
        if (vi.error && strstr(vi.error, "time limit")) {
            printf("%s -O%d: not compared: no result within the VM's time limit on these "
                   "inputs\n",
                   name, level);
            outcome_free(&vi);
            goto done;
        }
        if (given) {
            StrBuf sb = {0};
            if (vi.v) vm_print_value(exe, vi.v, 1000, &sb);
            CHECK(vi.v && strcmp(sb_cstr(&sb), want_val) == 0, "%s -O%d: expected %s, got %s", name,
                  level, want_val, vi.v ? sb_cstr(&sb) : vi.error);
            sb_free(&sb);
            outcome_free(&vi);
            goto done;
        }
        ii = run_interp(m, entry, main_fn, n, args);
        double t2 = now_s();
        if (verbose || getenv("VMC_TIME"))
            printf("%s -O%d: vm %.3f s, interpreter %.3f s\n", name, level, t1 - t0, t2 - t1);
        if (expect_error) {
            CHECK(vi.error && strstr(vi.error, want_err),
                  "%s -O%d: expected an error with '%s', "
                  "the VM gave %s",
                  name, level, want_err, vi.error ? vi.error : "a value");
        }
        if (ii.error && vi.error && ex->same_place) {
            const char *ei = strstr(ii.error, ": error: "), *ev = strstr(vi.error, ": error: ");
            CHECK(ei && ev && ei - ii.error == ev - vi.error &&
                      strncmp(ii.error, vi.error, (size_t)(ei - ii.error)) == 0,
                  "%s -O%d: errors differ in place:\n  interpreter: %s\n  vm:          %s", name,
                  level, ii.error, vi.error);
        } else if (ii.error || vi.error) {
            CHECK(ii.error && vi.error && strcmp(ii.error, vi.error) == 0,
                  "%s -O%d: errors differ:\n  interpreter: %s\n  vm:          %s", name, level,
                  ii.error ? ii.error : "(a value)", vi.error ? vi.error : "(a value)");
        } else {
            char why[512] = "";
            bool same = same_value(ii.v, vi.v, why, sizeof why);
            if (!same) {
                StrBuf a = {0}, b = {0};
                ev_print_value(ii.v, 20, &a);
                ev_print_value(vi.v, 20, &b);
                CHECK(
                    false,
                    "%s -O%d: results differ (%s):\n  interpreter: %.2000s\n  vm:          %.2000s",
                    name, level, why, sb_cstr(&a), sb_cstr(&b));
                sb_free(&a);
                sb_free(&b);
            } else {
                CHECK(true, "%s", "ok");
            }
        }
        if (verbose) {
            StrBuf a = {0};
            if (vi.v) vm_print_value(exe, vi.v, 20, &a);
            printf("vm: %s\ninterpreter: %s\n", vi.v ? sb_cstr(&a) : vi.error,
                   ii.v ? "(a value)" : ii.error);
            sb_free(&a);
        }
        outcome_free(&vi);
        outcome_free(&ii);
    } else {
        CHECK(true, "%s", "ok");
    }
done:
    for (uint32_t i = 0; i < n; i++)
        rt_release(args[i]);
    free(args);
    vm_exec_free(exe);
}

/* The gradient @grad of @main in each mode the file's `// modes:` lists, compiled and run as
 * @main is (the reverse-mode programs use closures, references and tuples heavily). */
static void check_gradients(const char *path, const char *text) {
    char modes[256];
    if (!golden_directive(text, "modes", modes, sizeof modes)) return;
    for (int mode = 0; mode < 2; mode++) {
        if (!strstr(modes, mode == 0 ? "higher" : "first")) continue;
        for (int level = 0; level <= 3; level += 3) {
            Ctx *ctx = NULL;
            rly_ctx_new(&ctx);
            Module *m = load(ctx, text, path, false);
            if (m == NULL || !ty_infer_module(m) ||
                !pass_gradient(m, "main", mode == 0 ? GRAD_HIGHER : GRAD_FIRST, "grad")) {
                char *t = diag_text(ctx, 0);
                CHECK(false, "%s: no gradient (mode %d):\n%s", path, mode, t);
                free(t);
            } else {
                char name[4200];
                snprintf(name, sizeof name, "%s (@grad, %s)", path, mode == 0 ? "higher" : "first");
                Expect ex = {0};
                check_module(name, ctx, m, "grad", level, &ex, false);
            }
            rly_ctx_free(ctx);
        }
    }
}

/* examples/mlp_train.rly calls @loss_grad, the gradient of examples/mlp_loss.rly's @loss
 * (examples/train_mlp.sh builds it with `rly grad`): built here the same way. */
static void check_mlp_train(const char *dir, const char *train) {
    char path[4096];
    snprintf(path, sizeof path, "%s/mlp_loss.rly", dir);
    char *loss = golden_read(path, NULL);
    if (loss == NULL) {
        CHECK(false, "%s: cannot read", path);
        return;
    }
    for (int level = 0; level <= 3; level += 3) {
        Ctx *ctx = NULL;
        rly_ctx_new(&ctx);
        Module *m = load(ctx, loss, path, false);
        bool ok = m && ty_infer_module(m) && pass_gradient(m, "loss", GRAD_FIRST, "loss_grad") &&
                  rly_module_parse_into(m, train, strlen(train), "mlp_train.rly") == RLY_STATUS_OK;
        CHECK(ok, "mlp_train: does not load: %s", rly_last_error());
        Expect ex = {0};
        if (ok) check_module("examples/mlp_train.rly", ctx, m, "main", level, &ex, false);
        rly_ctx_free(ctx);
    }
    free(loss);
}

static void check_file(const char *dir, const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = golden_read(path, NULL);
    if (text == NULL) {
        CHECK(false, "%s: cannot read", path);
        return;
    }
    if (strcmp(file, "mlp_train.rly") == 0) {
        check_mlp_train(dir, text);
    } else {
        static const int levels[] = {-1, 0, 3};
        for (size_t i = 0; i < RLY_ARRAY_LEN(levels); i++)
            check_program(path, text, levels[i], false);
        check_gradients(path, text);
    }
    free(text);
}

/* ---- unit cases -------------------------------------------------------------------------------
 */

/* The executable of text at level (NULL after a CHECK failure); its module stays in *ctx. */
static VmExec *compile_text(const char *text, int level, Ctx **ctx_out) {
    Ctx *ctx = NULL;
    rly_ctx_new(&ctx);
    *ctx_out = ctx;
    Module *m = load(ctx, text, "unit.rly", strstr(text, "Cons") != NULL);
    if (m == NULL || !optimize(m, level)) {
        CHECK(false, "unit program does not load:\n%s", text);
        return NULL;
    }
    VmExec *exe = be_compile(m, NULL);
    if (exe == NULL) {
        char *t = diag_text(ctx, 0);
        CHECK(false, "unit program does not compile:\n%s\n%s", text, t);
        free(t);
    }
    return exe;
}

static size_t count_op(const VmExec *exe, uint32_t func, int op, int flags) {
    size_t n = 0;
    for (uint32_t i = 0; i < exe->n_funcs; i++) {
        if (func != UINT32_MAX && i != func) continue;
        for (uint32_t pc = 0; pc < exe->funcs[i].n_code; pc++)
            if (exe->funcs[i].code[pc].op == op &&
                (flags < 0 || (exe->funcs[i].code[pc].flags & flags) == (uint32_t)flags))
                n++;
    }
    return n;
}

static uint32_t func_named(const VmExec *exe, const char *name) {
    for (uint32_t i = 0; i < exe->n_funcs; i++)
        if (strcmp(exe->funcs[i].name, name) == 0) return i;
    return UINT32_MAX;
}

static void test_scalar_loop(void) {
    const char *text = HDR "def @loop(%i: int32, %acc: int32) -> int32 {\n"
                           "  if (less(%i, 10)) { @loop(add(%i, 1), add(%acc, 2)) } else { %acc }\n"
                           "}\n"
                           "def @main() { @loop(0, 0) }\n";
    for (int level = 0; level <= 3; level += 3) {
        Ctx *ctx;
        VmExec *exe = compile_text(text, level, &ctx);
        if (exe) {
            uint32_t f = func_named(exe, "loop");
            CHECK(f != UINT32_MAX, "no @loop");
            /* Unboxed: no packed call, no box; a tail call. */
            CHECK(count_op(exe, f, VM_INVOKE_PACKED, -1) == 0, "-O%d: @loop calls a kernel", level);
            CHECK(count_op(exe, f, VM_BOX, -1) == 0, "-O%d: @loop boxes", level);
            CHECK(count_op(exe, f, VM_SCALAR, -1) == 3, "-O%d: @loop has %zu scalar ops", level,
                  count_op(exe, f, VM_SCALAR, -1));
            CHECK(count_op(exe, f, VM_INVOKE, VM_F_TAIL) == 1, "-O%d: no tail call", level);
            CHECK(exe->funcs[f].reg_kind[0] == VM_RK_I32, "-O%d: parameter not unboxed", level);
        }
        vm_exec_free(exe);
        rly_ctx_free(ctx);
    }
}

static void test_match_tree(void) {
    /* Nested patterns: the tree tests each tag once per path (no clause is retried). */
    const char *text = HDR "type T { A, B(T), C(T, T) }\n"
                           "def @f(%t: T) -> int32 {\n"
                           "  match (%t) {\n"
                           "    B(A) => 1,\n"
                           "    B(B(_)) => 2,\n"
                           "    C(A, %x) => 3,\n"
                           "    C(_, A) => 4,\n"
                           "    _ => 5,\n"
                           "  }\n"
                           "}\n"
                           "def @main() { (@f(B(A)), @f(B(B(A))), @f(C(A, B(A))), @f(C(B(A), A)),"
                           " @f(C(B(A), B(A))), @f(A), @f(B(C(A, A)))) }\n";
    Ctx *ctx;
    VmExec *exe = compile_text(text, 0, &ctx);
    if (exe) {
        uint32_t f = func_named(exe, "f");
        CHECK(count_op(exe, f, VM_FATAL, -1) == 0, "an exhaustive match has an unmatched leaf");
        CHECK(count_op(exe, f, VM_GET_TAG, -1) <= 6, "%zu tag tests",
              count_op(exe, f, VM_GET_TAG, -1));
        Vm *vm = vm_new(exe);
        char err[512];
        Value *v = vm_invoke(vm, exe->entry, 0, NULL, err, sizeof err);
        StrBuf sb = {0};
        if (v) ev_print_value(v, 100, &sb);
        CHECK(v && strcmp(sb_cstr(&sb), "(1, 2, 3, 4, 5, 5, 5)") == 0, "match gave %s",
              v ? sb_cstr(&sb) : err);
        sb_free(&sb);
        rt_release(v);
        vm_free(vm);
    }
    vm_exec_free(exe);
    rly_ctx_free(ctx);
}

static void test_errors_located(void) {
    const char *text = HDR "def @main(%x: int32) {\n  divide(%x, 0)\n}\n";
    Ctx *ctx;
    VmExec *exe = compile_text(text, 0, &ctx);
    if (exe) {
        Vm *vm = vm_new(exe);
        char err[512] = "";
        RtTensor *x = rt_tensor_new(RLY_DTYPE_I32, 0, NULL, err, sizeof err);
        Value *args[1] = {&x->hdr};
        Value *v = vm_invoke(vm, exe->entry, 1, args, err, sizeof err);
        CHECK(v == NULL && strstr(err, "unit.rly:3:3: error:") && strstr(err, "division by zero"),
              "division by zero gave: %s", v ? "a value" : err);
        rt_release(v);
        rt_release(&x->hdr);
        vm_free(vm);
    }
    vm_exec_free(exe);
    rly_ctx_free(ctx);
}

static void test_interface(void) {
    const char *text = HDR "def @main(%data: Tensor[(2, ?), float32], %k: int64) {\n"
                           "  (add(%data, 1f), %k)\n}\n";
    Ctx *ctx;
    VmExec *exe = compile_text(text, 3, &ctx);
    if (exe) {
        CHECK(exe->n_inputs == 2 && strcmp(exe->in_names[0], "data") == 0 &&
                  strcmp(exe->in_names[1], "k") == 0,
              "input names");
        CHECK(exe->in_types[0].is_tensor && exe->in_types[0].ndim == 2 &&
                  exe->in_types[0].shape[1] == -1 && exe->in_types[0].dtype == RLY_DTYPE_F32,
              "input type");
        CHECK(exe->out_tuple && exe->n_outputs == 2 && strcmp(exe->out_names[1], "output_1") == 0,
              "outputs");
        CHECK(exe->out_types[1].is_tensor && exe->out_types[1].dtype == RLY_DTYPE_I64 &&
                  exe->out_types[1].ndim == 0,
              "output type");
    }
    vm_exec_free(exe);
    rly_ctx_free(ctx);
}

/* 10^5-deep programs: a let chain and a graph-form chain (nested calls 10^5 deep) compile
 * without recursion and run as the interpreter runs them. */
static void test_deep(void) {
    enum { N = 100000 };
    StrBuf sb = {0};
    sb_puts(&sb, HDR "def @main(%x: int32) {\n  let %v0 = add(%x, 1);\n");
    for (int i = 1; i < N; i++)
        sb_printf(&sb, "  let %%v%d = %s(%%v%d, %d);\n", i, i % 3 ? "add" : "subtract", i - 1,
                  i % 7);
    sb_printf(&sb, "  %%v%d\n}\n", N - 1);
    Expect ex = {0};
    for (int level = 0; level <= 0; level += 3) { /* -O3's passes on it are theirs to test */
        Ctx *ctx = NULL;
        rly_ctx_new(&ctx);
        Module *m = load(ctx, sb_cstr(&sb), "let_chain.rly", false);
        if (m) check_module("let_chain.rly", ctx, m, "main", level, &ex, false);
        rly_ctx_free(ctx);
    }
    sb.len = 0;
    sb_puts(&sb, HDR "def @main(%x: Tensor[(2), float32]) {\n  %0 = add(%x, 1f);\n");
    for (int i = 1; i < N; i++)
        sb_printf(&sb, "  %%%d = %s(%%%d, %s);\n", i, i % 2 ? "multiply" : "add", i - 1,
                  i % 2 ? "0.5f" : "%x");
    sb_printf(&sb, "  %%%d\n}\n", N - 1);
    for (int level = 0; level <= 3; level += 3) {
        Ctx *ctx = NULL;
        rly_ctx_new(&ctx);
        Module *m = load(ctx, sb_cstr(&sb), "graph_chain.rly", false);
        if (m) check_module("graph_chain.rly", ctx, m, "main", level, &ex, false);
        rly_ctx_free(ctx);
    }
    sb_free(&sb);
}

/* A random tensor of an entry's input type (the interface alone). */
static Value *gen_desc(const VmTypeDesc *d) {
    if (!d->is_tensor) return NULL;
    char err[256];
    RtTensor *v = rt_tensor_new((rly_dtype)d->dtype, d->ndim, d->shape, err, sizeof err);
    if (v == NULL) return NULL;
    for (int64_t i = 0; i < k_numel(&v->t); i++)
        k_storef(rt_tensor_data(v), (rly_dtype)d->dtype, i,
                 (double)(next_rand() % 200) / 100.0 - 1.0);
    return &v->hdr;
}

/* An executable does not depend on its module: run after the context is freed (attribute
 * strings, names, constants, types all copied; ASan sees any dangling pointer). */
static void test_independent(void) {
    const char *text =
        HDR "def @main(%x: Tensor[(1, 2, 4, 4), float32], %w: Tensor[(3, 2, 3, 3), float32]) {\n"
            "  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], data_layout=\"NCHW\", "
            "kernel_layout=\"OIHW\");\n"
            "  %1 = topk(%0, k=2, axis=-1, ret_type=\"both\", dtype=\"int64\");\n"
            "  %2 = image.resize2d(%0, size=[8, 8], method=\"nearest_neighbor\", "
            "coordinate_transformation_mode=\"asymmetric\");\n"
            "  (%1.0, %1.1, add(%2, ones(shape=[1, 3, 8, 8], dtype=\"float32\")))\n"
            "}\n";
    for (int level = 0; level <= 3; level += 3) {
        Ctx *ctx;
        VmExec *exe = compile_text(text, level, &ctx);
        rly_ctx_free(ctx);
        if (exe == NULL) continue;
        rng = seed | 1;
        Value *args[2] = {gen_desc(&exe->in_types[0]), gen_desc(&exe->in_types[1])};
        Vm *vm = vm_new(exe);
        char err[512] = "";
        Value *v = vm_invoke(vm, exe->entry, 2, args, err, sizeof err);
        CHECK(v != NULL && v->kind == VAL_TUPLE && RT_TUPLE(v)->n == 3,
              "-O%d: after the context is freed: %s", level, v ? "a wrong value" : err);
        StrBuf sb = {0};
        be_disasm(exe, &sb); /* every name and attribute string is read */
        CHECK(strstr(sb_cstr(&sb), "\"NCHW\"") != NULL, "-O%d: no layout in the disassembly",
              level);
        sb_free(&sb);
        rt_release(v);
        rt_release(args[0]);
        rt_release(args[1]);
        vm_free(vm);
        vm_exec_free(exe);
    }
}

/* A user-registered operator runs through its own kernel, alone and fused, as in the
 * interpreter; one without a kernel fails in both alike when it runs. */
static int scale_rel(rly_ctx *ctx, const rly_type *const *args, int n, const rly_type **out,
                     char *err, size_t len, void *user) {
    (void)ctx, (void)n, (void)err, (void)len, (void)user;
    *out = args[0];
    return 0;
}

static int scale_kernel(const DLTensor *args, int n, DLTensor *out, void *user) {
    if (n != 1 || args[0].dtype.code != kDLFloat || args[0].dtype.bits != 32) return 3;
    float k = *(const float *)user;
    int64_t m = 1;
    for (int d = 0; d < args[0].ndim; d++)
        m *= args[0].shape[d];
    const float *a = (const float *)((const char *)args[0].data + args[0].byte_offset);
    float *o = (float *)((char *)out->data + out->byte_offset);
    for (int64_t i = 0; i < m; i++)
        o[i] = a[i] * k;
    return 0;
}

static void test_user_op(void) {
    static float k = 2.5f;
    rly_op_def def = {.name = "vmtest.scale",
                      .n_args = 1,
                      .pattern = RLY_PATTERN_ELEMWISE,
                      .rel = scale_rel,
                      .kernel = scale_kernel,
                      .user = &k};
    CHECK(rly_op_register(&def) == RLY_STATUS_OK, "register: %s", rly_last_error());
    rly_op_def none = {
        .name = "vmtest.nokernel", .n_args = 1, .pattern = RLY_PATTERN_ELEMWISE, .rel = scale_rel};
    CHECK(rly_op_register(&none) == RLY_STATUS_OK, "register: %s", rly_last_error());
    const char *text = HDR "def @main(%x: Tensor[(2, 3), float32]) {\n"
                           "  %0 = vmtest.scale(%x);\n"
                           "  %1 = add(%0, 1f);\n"
                           "  (vmtest.scale(%1), exp(%0))\n"
                           "}\n";
    const char *bad = HDR "def @main(%x: Tensor[(2), float32]) {\n"
                          "  add(vmtest.nokernel(%x), 1f)\n"
                          "}\n";
    /* The VM prefixes a kernel's message with the operator's name from the builtin table
     * (sup_op_name), which has no registered operators: the texts differ in that prefix. */
    Expect ex = {0},
           ex_bad = {.error = "no kernel implements this operator yet", .same_place = true};
    for (int level = 0; level <= 3; level += 3) {
        Ctx *ctx = NULL;
        rly_ctx_new(&ctx);
        Module *m = load(ctx, text, "user_op.rly", false);
        if (m) check_module("user_op.rly", ctx, m, "main", level, &ex, false);
        rly_ctx_free(ctx);
        rly_ctx_new(&ctx);
        m = load(ctx, bad, "user_op_bad.rly", false);
        if (m) check_module("user_op_bad.rly", ctx, m, "main", level, &ex_bad, false);
        rly_ctx_free(ctx);
    }
}

/* ---- main -------------------------------------------------------------------------------------
 */

int main(int argc, char **argv) {
    const char *s = getenv("RLY_SEED");
    seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    if (argc >= 3 && strcmp(argv[1], "--disasm") == 0) {
        char *text = golden_read(argv[2], NULL);
        if (text == NULL) return 1;
        int level = argc >= 4 && argv[3][0] == '-' && argv[3][1] == 'O' ? atoi(argv[3] + 2) : 0;
        check_program(argv[2], text, level, true);
        free(text);
        return check_summary();
    }
    printf("seed %llu (RLY_SEED=%llu replays it)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    test_scalar_loop();
    test_match_tree();
    test_errors_located();
    test_interface();
    test_independent();
    test_user_op();
    if (getenv("VMC_SKIP_DEEP") == NULL) { /* for scanning many seeds quickly */
        double t0 = now_s();
        test_deep();
        printf("deep programs: %.1f s\n", now_s() - t0);
    }
    for (int i = 1; i < argc; i++) {
        char **names = NULL;
        size_t n = golden_list(argv[i], true, &names);
        CHECK(n > 0, "no programs in %s", argv[i]);
        for (size_t k = 0; k < n; k++) {
            check_file(argv[i], names[k]);
            free(names[k]);
        }
        free(names);
    }
    printf("%d programs compiled, %d runs compared\n", n_compiled, n_ran);
    return check_summary();
}
