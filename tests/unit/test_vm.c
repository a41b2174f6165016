/* test_vm.c - the VM executor (src/runtime/vm*.c) on hand-assembled executables: every opcode,
 * the validator refusing each kind of bad index, kind and jump, closures with captures and
 * kind conversions, references and cycles (no leak under LeakSanitizer), recursion 10^6 deep,
 * a 10^6-iteration tail loop, the three run limits, kernel and VM errors with locations,
 * printing, and VM_SCALAR against the reference kernels for every op and kind on edge values.
 *
 * Run as `test_vm` (everything) or `test_vm NAME` (one group). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "eval/eval.h"
#include "kernels/kernel.h"
#include "runtime/vm.h"

/* ---- a small assembler ------------------------------------------------------------------------
 * A TB holds up to MAXF functions and MAXP packed functions in fixed arrays; tb_exec wraps them
 * in a VmExec (validated and bound). The arrays belong to the TB, so it outlives the exe. */

enum { MAXF = 8, MAXC = 128, MAXPOOL = 256, MAXR = 64, MAXP = 4, MAXN = 16, MAXK = 16 };

typedef struct TB {
    VmFunction f[MAXF];
    uint32_t n_f;
    VmInstr code[MAXF][MAXC];
    uint32_t loc[MAXF][MAXC];
    uint32_t pool[MAXF][MAXPOOL];
    uint8_t kinds[MAXF][MAXR];
    VmPacked p[MAXP];
    uint32_t n_p;
    VmNode nodes[MAXP][MAXN];
    uint32_t node_args[MAXP][MAXN][4];
    Value *consts[MAXK];
    uint32_t n_consts;
    VmCtor ctors[MAXK];
    uint32_t n_ctors;
    const char *strs[MAXK];
    uint32_t n_strs;
    const char *in_names[MAXR];
    VmTypeDesc in_types[MAXR];
    const char *out_names[1];
    VmTypeDesc out_types[1];
} TB;

static TB *tb_new(void) {
    TB *b = calloc(1, sizeof *b);
    b->strs[b->n_strs++] = "";
    return b;
}

/* The register kinds as letters: v value, b bool, i int32, l int64, f float32, d float64. */
static uint8_t kind_of(char c) {
    switch (c) {
    case 'b': return VM_RK_BOOL;
    case 'i': return VM_RK_I32;
    case 'l': return VM_RK_I64;
    case 'f': return VM_RK_F32;
    case 'd': return VM_RK_F64;
    default: return VM_RK_VALUE;
    }
}

static uint32_t tb_fn(TB *b, const char *name, uint32_t n_params, uint32_t n_captured, char result,
                      const char *kinds) {
    uint32_t i = b->n_f++;
    VmFunction *f = &b->f[i];
    f->name = name;
    f->n_params = n_params;
    f->n_captured = n_captured;
    f->n_regs = (uint32_t)strlen(kinds);
    for (uint32_t r = 0; r < f->n_regs; r++)
        b->kinds[i][r] = kind_of(kinds[r]);
    f->reg_kind = b->kinds[i];
    f->result_kind = kind_of(result);
    f->code = b->code[i];
    f->pool = b->pool[i];
    f->loc = b->loc[i];
    return i;
}

static uint32_t tb_str(TB *b, const char *s) {
    b->strs[b->n_strs] = s;
    return b->n_strs++;
}

/* Append an instruction to function fi (at location string loc, 0 for none); its index. */
static uint32_t emit_at(TB *b, uint32_t fi, uint32_t loc, VmInstr in) {
    VmFunction *f = &b->f[fi];
    b->loc[fi][f->n_code] = loc;
    b->code[fi][f->n_code] = in;
    return f->n_code++;
}
#define emit(b, fi, ...) emit_at(b, fi, 0, (VmInstr){__VA_ARGS__})

/* Operand registers; the pool slice's start. */
static uint32_t regs(TB *b, uint32_t fi, uint32_t n, ...) {
    VmFunction *f = &b->f[fi];
    uint32_t start = f->n_pool;
    va_list ap;
    va_start(ap, n);
    for (uint32_t i = 0; i < n; i++)
        b->pool[fi][f->n_pool++] = va_arg(ap, uint32_t);
    va_end(ap);
    return start;
}

static Value *tensor_f32(uint32_t ndim, const int64_t *shape, const float *data) {
    char err[256];
    RtTensor *t = rt_tensor_new(RLY_DTYPE_F32, ndim, shape, err, sizeof err);
    memcpy(rt_tensor_data(t), data, sizeof(float) * (size_t)k_numel(&t->t));
    return &t->hdr;
}

static Value *scalar(rly_dtype dt, double v) {
    char err[256];
    RtTensor *t = rt_tensor_new(dt, 0, NULL, err, sizeof err);
    k_storef(rt_tensor_data(t), dt, 0, v);
    return &t->hdr;
}

static Value *scalar_i(rly_dtype dt, int64_t v) {
    char err[256];
    RtTensor *t = rt_tensor_new(dt, 0, NULL, err, sizeof err);
    k_storei(rt_tensor_data(t), dt, 0, v);
    return &t->hdr;
}

static uint32_t tb_const(TB *b, Value *v) {
    v->rc = RT_IMMORTAL;
    b->consts[b->n_consts] = v;
    return b->n_consts++;
}

static uint32_t tb_ctor(TB *b, const char *name, int32_t tag, uint32_t arity) {
    b->ctors[b->n_ctors] = (VmCtor){name, "T", tag, arity};
    return b->n_ctors++;
}

/* A packed function of n_inputs; nodes are added with tb_node. */
static uint32_t tb_packed(TB *b, const char *name, uint32_t n_inputs) {
    uint32_t i = b->n_p++;
    b->p[i].name = name;
    b->p[i].n_inputs = n_inputs;
    b->p[i].nodes = b->nodes[i];
    return i;
}

/* Add a node (its args as value ids); its value id. The packed result is the last node. */
static uint32_t tb_node(TB *b, uint32_t pi, VmNode n, uint32_t n_args, ...) {
    VmPacked *p = &b->p[pi];
    uint32_t k = p->n_nodes++;
    va_list ap;
    va_start(ap, n_args);
    for (uint32_t i = 0; i < n_args; i++)
        b->node_args[pi][k][i] = va_arg(ap, uint32_t);
    va_end(ap);
    n.n_args = n_args;
    n.args = b->node_args[pi][k];
    b->nodes[pi][k] = n;
    p->result = p->n_inputs + k;
    return p->n_inputs + k;
}

/* The executable of b (entry function 0), not yet validated. */
static VmExec *tb_raw(TB *b) {
    VmExec *exe = sup_calloc(1, sizeof *exe);
    arena_init(&exe->arena);
    exe->n_funcs = b->n_f;
    exe->funcs = b->f;
    exe->n_packed = b->n_p;
    exe->packed = b->p;
    exe->n_consts = b->n_consts;
    exe->consts = b->consts;
    exe->n_ctors = b->n_ctors;
    exe->ctors = b->ctors;
    exe->n_strs = b->n_strs;
    exe->strs = b->strs;
    exe->entry = 0;
    exe->n_inputs = b->n_f ? b->f[0].n_params : 0;
    for (uint32_t i = 0; i < exe->n_inputs; i++)
        b->in_names[i] = "x";
    exe->in_names = b->in_names;
    exe->in_types = b->in_types;
    exe->n_outputs = 1;
    b->out_names[0] = "output_0";
    exe->out_names = b->out_names;
    exe->out_types = b->out_types;
    return exe;
}

/* Validated and bound; NULL (and a failed check) otherwise. */
static VmExec *tb_exec(TB *b) {
    VmExec *exe = tb_raw(b);
    char err[512];
    bool ok = vm_exec_validate(exe, err, sizeof err) && vm_exec_bind(exe, err, sizeof err);
    CHECK(ok, "the executable does not validate: %s", err);
    if (!ok) {
        exe->n_consts = 0;
        vm_exec_free(exe);
        return NULL;
    }
    return exe;
}

static void tb_free(TB *b, VmExec *exe) {
    vm_exec_free(exe); /* frees the constants */
    free(b);
}

/* Run function fi of exe on args (borrowed); the printed result, or "ERR:" and the message. */
static char *run_fn(VmExec *exe, const RtLimits *lim, uint32_t fi, uint32_t n, Value **args) {
    Vm *vm = vm_new(exe);
    if (lim) vm_set_limits(vm, lim);
    char err[1024];
    Value *v = vm_invoke(vm, fi, n, args, err, sizeof err);
    StrBuf sb = {0};
    if (v == NULL) {
        sb_printf(&sb, "ERR:%s", err);
    } else {
        vm_print_value(exe, v, 100, &sb);
        rt_release(v);
    }
    vm_free(vm);
    return sb_take(&sb);
}

static void expect_run(VmExec *exe, const RtLimits *lim, uint32_t n, Value **args, const char *want,
                       const char *what) {
    if (exe == NULL) return;
    char *got = run_fn(exe, lim, 0, n, args);
    CHECK(strcmp(got, want) == 0 || (want[0] == '~' && strstr(got, want + 1) != NULL),
          "%s: expected %s, got %s", what, want, got);
    free(got);
}

static void release_all(uint32_t n, Value **v) {
    for (uint32_t i = 0; i < n; i++)
        rt_release(v[i]);
}

/* ---- calls, scalars, control --------------------------------------------------------------- */

/* sum(i, acc, n) = i < n ? sum(i + 1, acc + i, n) : acc, as a tail loop over int32 scalars. */
static uint32_t build_tail_sum(TB *b, char k) {
    char kinds[16];
    snprintf(kinds, sizeof kinds, "%c%c%cb%c%c%c", k, k, k, k, k, k);
    uint32_t f = tb_fn(b, "sum", 3, 0, k, kinds);
    uint8_t rk = kind_of(k);
    emit(b, f, .op = VM_SCALAR, .sub = VM_SC_LT, .rk = rk, .dst = 3, .a = 0, .b = 2);
    emit(b, f, .op = VM_IF, .a = 3, .b = 6);
    emit(b, f, .op = VM_SCALAR, .sub = VM_SC_ADD, .rk = rk, .dst = 4, .a = 1, .b = 0);
    emit(b, f, .op = VM_LOAD_IMM, .rk = rk, .dst = 6, .imm = 1);
    emit(b, f, .op = VM_SCALAR, .sub = VM_SC_ADD, .rk = rk, .dst = 5, .a = 0, .b = 6);
    emit(b, f, .op = VM_INVOKE, .flags = VM_F_TAIL, .a = f, .n = 3, .args = regs(b, f, 3, 5, 4, 2));
    emit(b, f, .op = VM_RET, .a = 1);
    return f;
}

static void test_tail_loop(void) {
    TB *b = tb_new();
    build_tail_sum(b, 'l');
    VmExec *exe = tb_exec(b);
    Value *a[3] = {scalar_i(RLY_DTYPE_I64, 0), scalar_i(RLY_DTYPE_I64, 0),
                   scalar_i(RLY_DTYPE_I64, 1000000)};
    expect_run(exe, NULL, 3, a, "499999500000i64", "tail loop 10^6 (int64)");
    release_all(3, a);
    tb_free(b, exe);

    /* int32 wraps as the kernels do: the sum passes 2^31 */
    b = tb_new();
    build_tail_sum(b, 'i');
    exe = tb_exec(b);
    Value *c[3] = {scalar_i(RLY_DTYPE_I32, 0), scalar_i(RLY_DTYPE_I32, 0),
                   scalar_i(RLY_DTYPE_I32, 100000)};
    char want[64];
    snprintf(want, sizeof want, "%d", (int32_t)(uint32_t)(4999950000ull & 0xffffffffu));
    expect_run(exe, NULL, 3, c, want, "tail loop (int32 wraps)");
    release_all(3, c);
    tb_free(b, exe);
}

/* down(n) = n == 0 ? 0 : n + down(n - 1): non-tail recursion 10^6 deep. */
static void test_deep_recursion(void) {
    TB *b = tb_new();
    uint32_t f = tb_fn(b, "down", 1, 0, 'l', "llbl");
    emit(b, f, .op = VM_LOAD_IMM, .rk = VM_RK_I64, .dst = 1, .imm = 0);
    emit(b, f, .op = VM_SCALAR, .sub = VM_SC_EQ, .rk = VM_RK_I64, .dst = 2, .a = 0, .b = 1);
    emit(b, f, .op = VM_IF, .a = 2, .b = 4);
    emit(b, f, .op = VM_RET, .a = 1);
    emit(b, f, .op = VM_LOAD_IMM, .rk = VM_RK_I64, .dst = 3, .imm = 1);
    emit(b, f, .op = VM_SCALAR, .sub = VM_SC_SUB, .rk = VM_RK_I64, .dst = 3, .a = 0, .b = 3);
    emit(b, f, .op = VM_INVOKE, .dst = 3, .a = f, .n = 1, .args = regs(b, f, 1, 3));
    emit(b, f, .op = VM_SCALAR, .sub = VM_SC_ADD, .rk = VM_RK_I64, .dst = 3, .a = 0, .b = 3);
    emit(b, f, .op = VM_RET, .a = 3);
    VmExec *exe = tb_exec(b);
    Value *a[1] = {scalar_i(RLY_DTYPE_I64, 1000000)};
    expect_run(exe, NULL, 1, a, "500000500000i64", "recursion 10^6 deep");
    RtLimits lim = {.max_depth = 1000};
    expect_run(exe, &lim, 1, a,
               "ERR:error: call depth limit of 1000 exceeded (--max-depth)\n"
               "note: while running @down (call depth 1000)",
               "depth limit");
    release_all(1, a);
    tb_free(b, exe);

    /* The same with boxed values: each frame holds tensors, released on return. */
    b = tb_new();
    f = tb_fn(b, "down", 1, 0, 'v', "vlbllv");
    emit(b, f, .op = VM_UNBOX, .dst = 1, .a = 0);
    emit(b, f, .op = VM_LOAD_IMM, .rk = VM_RK_I64, .dst = 3, .imm = 0);
    emit(b, f, .op = VM_SCALAR, .sub = VM_SC_EQ, .rk = VM_RK_I64, .dst = 2, .a = 1, .b = 3);
    emit(b, f, .op = VM_IF, .a = 2, .b = 5);
    emit(b, f, .op = VM_RET, .a = 0);
    emit(b, f, .op = VM_LOAD_IMM, .rk = VM_RK_I64, .dst = 4, .imm = 1);
    emit(b, f, .op = VM_SCALAR, .sub = VM_SC_SUB, .rk = VM_RK_I64, .dst = 4, .a = 1, .b = 4);
    emit(b, f, .op = VM_BOX, .dst = 5, .a = 4);
    emit(b, f, .op = VM_INVOKE, .dst = 5, .a = f, .n = 1, .args = regs(b, f, 1, 5));
    emit(b, f, .op = VM_UNBOX, .dst = 4, .a = 5);
    emit(b, f, .op = VM_SCALAR, .sub = VM_SC_ADD, .rk = VM_RK_I64, .dst = 4, .a = 1, .b = 4);
    emit(b, f, .op = VM_BOX, .dst = 5, .a = 4);
    emit(b, f, .op = VM_RET, .a = 5);
    exe = tb_exec(b);
    a[0] = scalar_i(RLY_DTYPE_I64, 200000);
    expect_run(exe, NULL, 1, a, "20000100000i64", "boxed recursion");
    RtLimits mem = {.max_memory = 100000};
    expect_run(exe, &mem, 1, a, "~memory limit of 100000 bytes exceeded (--max-memory)",
               "memory limit");
    release_all(1, a);
    tb_free(b, exe);
}

static void test_timeout(void) {
    TB *b = tb_new();
    uint32_t f = tb_fn(b, "spin", 0, 0, 'i', "i");
    emit_at(b, f, tb_str(b, "spin.rly:2:3"), (VmInstr){.op = VM_GOTO, .a = 0});
    VmExec *exe = tb_exec(b);
    RtLimits lim = {.timeout = 0.05};
    expect_run(exe, &lim, 0, NULL,
               "ERR:spin.rly:2:3: error: time limit of 0.05 s exceeded (--timeout)\n"
               "spin.rly:2:3: note: while running @spin (call depth 1)",
               "timeout");
    tb_free(b, exe);
}

/* Tuples, constructors, fields, tags, if on a boxed bool, goto, constants, kill, move. */
static void test_data(void) {
    TB *b = tb_new();
    uint32_t nil = tb_ctor(b, "Nil", 0, 0), cons = tb_ctor(b, "Cons", 1, 2);
    float d3[3] = {1, 2, 3};
    uint32_t k = tb_const(b, tensor_f32(1, (int64_t[]){3}, d3));
    uint32_t t = tb_const(b, scalar_i(RLY_DTYPE_BOOL, 1));
    /* r0 x; r1 nil; r2 cons(x, nil); r3 tuple(r2, const); r4 field; r5 tag; r6 bool; r7 out */
    uint32_t f = tb_fn(b, "main", 1, 0, 'v', "vvvvvivvv");
    emit(b, f, .op = VM_ALLOC_ADT, .dst = 1, .a = nil);
    emit(b, f, .op = VM_ALLOC_ADT, .dst = 2, .a = cons, .n = 2, .args = regs(b, f, 2, 0, 1));
    emit(b, f, .op = VM_LOAD_CONST, .dst = 8, .a = k);
    emit(b, f, .op = VM_ALLOC_TUPLE, .dst = 3, .n = 2, .args = regs(b, f, 2, 2, 8));
    emit(b, f, .op = VM_KILL, .a = 2);
    emit(b, f, .op = VM_GET_FIELD, .dst = 4, .a = 3, .b = 0);
    emit(b, f, .op = VM_GET_TAG, .dst = 5, .a = 4);
    emit(b, f, .op = VM_LOAD_CONST, .dst = 6, .a = t);
    emit(b, f, .op = VM_IF, .a = 6, .b = 11);
    emit(b, f, .op = VM_GET_FIELD, .dst = 4, .a = 4, .b = 1); /* Nil */
    emit(b, f, .op = VM_GOTO, .a = 12);
    emit(b, f, .op = VM_FATAL, .a = 0);
    emit(b, f, .op = VM_BOX, .dst = 7, .a = 5);
    emit(b, f, .op = VM_MOVE, .dst = 1, .a = 3);
    emit(b, f, .op = VM_ALLOC_TUPLE, .dst = 7, .n = 4, .args = regs(b, f, 4, 7, 4, 1, 6));
    emit(b, f, .op = VM_RET, .a = 7);
    VmExec *exe = tb_exec(b);
    Value *a[1] = {scalar(RLY_DTYPE_F32, 2.5)};
    expect_run(exe, NULL, 1, a, "(1, Nil, (Cons(2.5f, Nil), Tensor[(3), float32] [1, 2, 3]), True)",
               "data");
    release_all(1, a);
    tb_free(b, exe);
}

/* ---- closures and references ------------------------------------------------------------- */

static void test_closures(void) {
    TB *b = tb_new();
    /* main(x: f32 scalar value): add = closure(adder, x); add(1.5f as an f32 register) twice,
     * once in tail position. adder's captured x is an unboxed f32 register (converted from the
     * captured value) and its parameter is a value (boxed from the caller's register). */
    uint32_t m = tb_fn(b, "main", 1, 0, 'f', "vvfff");
    uint32_t ad = tb_fn(b, "main$lambda0", 2, 1, 'f', "fvff");
    emit(b, m, .op = VM_ALLOC_CLOSURE, .dst = 1, .a = ad, .n = 1, .args = regs(b, m, 1, 0));
    emit(b, m, .op = VM_LOAD_IMM, .rk = VM_RK_F32, .dst = 2, .fimm = 1.5);
    emit(b, m, .op = VM_INVOKE_CLOSURE, .dst = 3, .a = 1, .n = 1, .args = regs(b, m, 1, 2));
    emit(b, m, .op = VM_INVOKE_CLOSURE, .flags = VM_F_TAIL, .a = 1, .n = 1,
         .args = regs(b, m, 1, 3));
    emit(b, ad, .op = VM_UNBOX, .dst = 2, .a = 1);
    emit(b, ad, .op = VM_SCALAR, .sub = VM_SC_ADD, .rk = VM_RK_F32, .dst = 3, .a = 0, .b = 2);
    emit(b, ad, .op = VM_RET, .a = 3);
    VmExec *exe = tb_exec(b);
    Value *a[1] = {scalar(RLY_DTYPE_F32, 0.25)};
    expect_run(exe, NULL, 1, a, "2f", "closure with a capture");
    release_all(1, a);
    /* a wrong argument dtype: the unboxing conversion fails */
    a[0] = scalar(RLY_DTYPE_F64, 0.25);
    expect_run(exe, NULL, 1, a,
               "ERR:error: expected a Tensor[(), float32], got Tensor[(), float64]",
               "closure capture of the wrong dtype");
    release_all(1, a);
    tb_free(b, exe);

    /* Ret converts a closure's result to the kind its caller expects, also after a tail call:
     * main -> mid (result f32) -> tail call of boxer (result a value) returns into main's f32
     * register, so the value is unboxed there. */
    b = tb_new();
    m = tb_fn(b, "main", 1, 0, 'f', "vvf");
    uint32_t mid = tb_fn(b, "mid", 1, 0, 'f', "vf");
    uint32_t boxer = tb_fn(b, "boxer", 2, 1, 'v', "vfv");
    emit(b, m, .op = VM_ALLOC_CLOSURE, .dst = 1, .a = boxer, .n = 1, .args = regs(b, m, 1, 0));
    emit(b, m, .op = VM_INVOKE, .dst = 2, .a = mid, .n = 1, .args = regs(b, m, 1, 1));
    emit(b, m, .op = VM_RET, .a = 2);
    emit(b, mid, .op = VM_LOAD_IMM, .rk = VM_RK_F32, .dst = 1, .fimm = 1.5);
    emit(b, mid, .op = VM_INVOKE_CLOSURE, .flags = VM_F_TAIL, .a = 0, .n = 1,
         .args = regs(b, mid, 1, 1));
    emit(b, boxer, .op = VM_BOX, .dst = 2, .a = 1);
    emit(b, boxer, .op = VM_RET, .a = 2);
    exe = tb_exec(b);
    a[0] = scalar(RLY_DTYPE_F32, 0.25);
    expect_run(exe, NULL, 1, a, "1.5f", "closure result converted after a tail call");
    release_all(1, a);
    tb_free(b, exe);

    /* Calling a value that is not a closure, and a closure with the wrong arity. */
    b = tb_new();
    m = tb_fn(b, "main", 1, 0, 'v', "vvv");
    ad = tb_fn(b, "id", 1, 0, 'v', "v");
    emit(b, ad, .op = VM_RET, .a = 0);
    emit(b, m, .op = VM_ALLOC_CLOSURE, .dst = 1, .a = ad);
    emit_at(
        b, m, tb_str(b, "c.rly:4:5"),
        (VmInstr){.op = VM_INVOKE_CLOSURE, .dst = 2, .a = 1, .n = 2, .args = regs(b, m, 2, 0, 0)});
    emit(b, m, .op = VM_RET, .a = 2);
    exe = tb_exec(b);
    a[0] = scalar(RLY_DTYPE_F32, 1);
    expect_run(exe, NULL, 1, a,
               "ERR:c.rly:4:5: error: function of 1 parameters called with 2 arguments", "arity");
    release_all(1, a);
    tb_free(b, exe);
}

/* A reference cell holding a closure that captures the cell: a cycle, broken at vm_free. */
static void test_refs(void) {
    TB *b = tb_new();
    /* main(x): r = ref(x); c = closure(get, r); r := c; (ref_read(r) is c); c() reads r
     * (now the closure) and returns it: the result is <closure>; then r := x, read r. */
    uint32_t m = tb_fn(b, "main", 1, 0, 'v', "vvvvvv");
    uint32_t get = tb_fn(b, "get", 1, 1, 'v', "vv");
    emit(b, get, .op = VM_REF_READ, .dst = 1, .a = 0);
    emit(b, get, .op = VM_RET, .a = 1);
    emit(b, m, .op = VM_REF_NEW, .dst = 1, .a = 0);
    emit(b, m, .op = VM_ALLOC_CLOSURE, .dst = 2, .a = get, .n = 1, .args = regs(b, m, 1, 1));
    emit(b, m, .op = VM_REF_WRITE, .dst = 3, .a = 1, .b = 2);
    emit(b, m, .op = VM_INVOKE_CLOSURE, .dst = 4, .a = 2);
    emit(b, m, .op = VM_ALLOC_TUPLE, .dst = 5, .n = 3, .args = regs(b, m, 3, 4, 3, 1));
    emit(b, m, .op = VM_RET, .a = 5);
    VmExec *exe = tb_exec(b);
    Value *a[1] = {scalar_i(RLY_DTYPE_I32, 7)};
    expect_run(exe, NULL, 1, a, "(<closure>, (), ref(<closure>))", "ref cycle");
    release_all(1, a);
    tb_free(b, exe);
}

/* ---- packed functions ---------------------------------------------------------------------- */

static void test_packed(void) {
    TB *b = tb_new();
    uint32_t l = tb_str(b, "p.rly:7:9");
    /* fused(x, y) = (add(x, y), split(x, 3)[1], x); divide(y, y) on ints elsewhere */
    uint32_t p = tb_packed(b, "fused_add_split", 2);
    uint32_t s = tb_node(b, p, (VmNode){.kind = VM_NODE_CALL, .op_id = OP_ID_ADD}, 2, 0, 1);
    static const int64_t three[1] = {3};
    static const double three_f[1] = {3};
    static KAttr split_attrs[2];
    split_attrs[0] = (KAttr){.name = "indices_or_sections",
                             .kind = KA_INT,
                             .i = 3,
                             .f = 3,
                             .n = 1,
                             .ints = three,
                             .floats = three_f};
    split_attrs[1] = (KAttr){.name = "axis", .kind = KA_INT, .i = 0, .f = 0};
    uint32_t sp = tb_node(b, p,
                          (VmNode){.kind = VM_NODE_CALL,
                                   .op_id = OP_ID_SPLIT,
                                   .n_attrs = 2,
                                   .attrs = split_attrs,
                                   .out_tuple = true,
                                   .n_out = 3},
                          1, 0);
    uint32_t fl = tb_node(b, p, (VmNode){.kind = VM_NODE_FIELD, .index = 1}, 1, sp);
    tb_node(b, p, (VmNode){.kind = VM_NODE_TUPLE}, 3, s, fl, 0);
    uint32_t q = tb_packed(b, "divide", 2);
    tb_node(b, q, (VmNode){.kind = VM_NODE_CALL, .op_id = OP_ID_DIVIDE, .loc = l}, 2, 0, 1);
    uint32_t m = tb_fn(b, "main", 2, 0, 'v', "vvv");
    emit(b, m, .op = VM_INVOKE_PACKED, .dst = 2, .a = p, .n = 2, .args = regs(b, m, 2, 0, 1));
    emit(b, m, .op = VM_RET, .a = 2);
    uint32_t d = tb_fn(b, "div", 2, 0, 'v', "vvv");
    emit_at(
        b, d, tb_str(b, "p.rly:1:1"),
        (VmInstr){.op = VM_INVOKE_PACKED, .dst = 2, .a = q, .n = 2, .args = regs(b, d, 2, 0, 1)});
    emit(b, d, .op = VM_RET, .a = 2);
    VmExec *exe = tb_exec(b);
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {10, 20, 30, 40, 50, 60};
    Value *a[2] = {tensor_f32(1, (int64_t[]){6}, x), tensor_f32(1, (int64_t[]){6}, y)};
    expect_run(exe, NULL, 2, a,
               "(Tensor[(6), float32] [11, 22, 33, 44, 55, 66], Tensor[(2), float32] [3, 4], "
               "Tensor[(6), float32] [1, 2, 3, 4, 5, 6])",
               "packed add, split, field, tuple");
    /* a kernel error at the node's location */
    Value *ints[2] = {scalar_i(RLY_DTYPE_I32, 1), scalar_i(RLY_DTYPE_I32, 0)};
    if (exe) {
        char *got = run_fn(exe, NULL, d, 2, ints);
        CHECK(strcmp(got, "ERR:p.rly:7:9: error: divide: integer division by zero") == 0,
              "kernel error: %s", got);
        free(got);
        /* shapes the kernel refuses */
        Value *bad2[2] = {a[0], tensor_f32(1, (int64_t[]){4}, x)};
        got = run_fn(exe, NULL, 0, 2, bad2);
        CHECK(strstr(got, "ERR:error: add: shapes (6,) and (4,) are not broadcastable") == got,
              "kernel shape error: %s", got);
        free(got);
        rt_release(bad2[1]);
    }
    release_all(2, ints);
    release_all(2, a);
    tb_free(b, exe);

    /* A kernel failing after others: their values are released (LeakSanitizer checks). */
    b = tb_new();
    p = tb_packed(b, "add_divide", 2);
    s = tb_node(b, p, (VmNode){.kind = VM_NODE_CALL, .op_id = OP_ID_ADD}, 2, 0, 1);
    uint32_t t2 = tb_node(b, p, (VmNode){.kind = VM_NODE_TUPLE}, 2, s, 0);
    tb_node(b, p, (VmNode){.kind = VM_NODE_CALL, .op_id = OP_ID_DIVIDE}, 2, s, 1);
    (void)t2;
    m = tb_fn(b, "main", 2, 0, 'v', "vvv");
    emit(b, m, .op = VM_INVOKE_PACKED, .dst = 2, .a = p, .n = 2, .args = regs(b, m, 2, 0, 1));
    emit(b, m, .op = VM_RET, .a = 2);
    exe = tb_exec(b);
    Value *z[2] = {scalar_i(RLY_DTYPE_I64, 5), scalar_i(RLY_DTYPE_I64, 0)};
    expect_run(exe, NULL, 2, z, "ERR:error: divide: integer division by zero",
               "a kernel error after other nodes");
    rt_release(z[1]);
    z[1] = scalar_i(RLY_DTYPE_I64, 2);
    expect_run(exe, NULL, 2, z, "3i64", "add then divide");
    release_all(2, z);
    tb_free(b, exe);
}

/* ---- shapes, scalar errors, fatal ----------------------------------------------------------- */

static void test_shapes(void) {
    TB *b = tb_new();
    uint32_t m = tb_fn(b, "main", 2, 0, 'v', "vvvvv");
    emit(b, m, .op = VM_SHAPE_OF, .dst = 2, .a = 0);
    emit(b, m, .op = VM_RESHAPE_TENSOR, .dst = 3, .a = 0, .b = 1);
    emit(b, m, .op = VM_ALLOC_TUPLE, .dst = 4, .n = 2, .args = regs(b, m, 2, 2, 3));
    emit(b, m, .op = VM_RET, .a = 4);
    VmExec *exe = tb_exec(b);
    float x[6] = {1, 2, 3, 4, 5, 6};
    char err[128];
    RtTensor *shp = rt_tensor_new(RLY_DTYPE_I64, 1, (int64_t[]){2}, err, sizeof err);
    ((int64_t *)rt_tensor_data(shp))[0] = 3;
    ((int64_t *)rt_tensor_data(shp))[1] = 2;
    Value *a[2] = {tensor_f32(2, (int64_t[]){2, 3}, x), &shp->hdr};
    expect_run(exe, NULL, 2, a,
               "(Tensor[(2), int64] [2, 3], Tensor[(3, 2), float32] [[1, 2],\n[3, 4],\n[5, 6]])",
               "shape_of, reshape_tensor");
    ((int64_t *)rt_tensor_data(shp))[0] = 4;
    expect_run(exe, NULL, 2, a, "ERR:error: reshape_tensor: cannot view (2, 3) as 8 elements",
               "reshape to a wrong size");
    release_all(2, a);
    tb_free(b, exe);

    b = tb_new();
    m = tb_fn(b, "main", 2, 0, 'i', "iii");
    emit_at(
        b, m, tb_str(b, "s.rly:3:4"),
        (VmInstr){
            .op = VM_SCALAR, .sub = VM_SC_FLOOR_MOD, .rk = VM_RK_I32, .dst = 2, .a = 0, .b = 1});
    emit(b, m, .op = VM_RET, .a = 2);
    exe = tb_exec(b);
    Value *c[2] = {scalar_i(RLY_DTYPE_I32, -7), scalar_i(RLY_DTYPE_I32, 0)};
    expect_run(exe, NULL, 2, c, "ERR:s.rly:3:4: error: floor_mod: integer division by zero",
               "scalar division by zero");
    rt_release(c[1]);
    c[1] = scalar_i(RLY_DTYPE_I32, 3);
    expect_run(exe, NULL, 2, c, "2", "scalar floor_mod");
    rt_release(c[1]);
    c[1] = scalar_i(RLY_DTYPE_I64, 3);
    expect_run(exe, NULL, 2, c,
               "ERR:error: argument 1 of @main: expected a Tensor[(), int32], got Tensor[(), "
               "int64]",
               "argument of the wrong dtype");
    release_all(2, c);
    tb_free(b, exe);

    b = tb_new();
    m = tb_fn(b, "main", 0, 0, 'v', "v");
    emit_at(b, m, tb_str(b, "m.rly:9:2"),
            (VmInstr){.op = VM_FATAL,
                      .a = tb_str(b, "no clause of this match accepts the "
                                     "value")});
    exe = tb_exec(b);
    expect_run(exe, NULL, 0, NULL,
               "ERR:m.rly:9:2: error: no clause of this match accepts the value", "fatal");
    tb_free(b, exe);
}

/* ---- validation: one bad executable per kind of mistake ------------------------------------- */

typedef void (*Breaker)(TB *b);

/* A valid base: main(x) calls g(x) (value), packed add, a closure, a constructor. */
static void base_exec(TB *b) {
    uint32_t m = tb_fn(b, "main", 1, 0, 'v', "vvvib");
    uint32_t g = tb_fn(b, "g", 1, 0, 'v', "v");
    tb_ctor(b, "Nil", 0, 0);
    tb_const(b, scalar_i(RLY_DTYPE_I32, 1));
    uint32_t p = tb_packed(b, "add", 2);
    tb_node(b, p, (VmNode){.kind = VM_NODE_CALL, .op_id = OP_ID_ADD}, 2, 0, 1);
    emit(b, g, .op = VM_RET, .a = 0);
    emit(b, m, .op = VM_INVOKE, .dst = 1, .a = g, .n = 1, .args = regs(b, m, 1, 0));
    emit(b, m, .op = VM_INVOKE_PACKED, .dst = 2, .a = p, .n = 2, .args = regs(b, m, 2, 1, 1));
    emit(b, m, .op = VM_LOAD_IMM, .rk = VM_RK_I32, .dst = 3, .imm = 5);
    emit(b, m, .op = VM_LOAD_IMM, .rk = VM_RK_BOOL, .dst = 4, .imm = 1);
    emit(b, m, .op = VM_IF, .a = 4, .b = 6);
    emit(b, m, .op = VM_LOAD_CONST, .dst = 1, .a = 0);
    emit(b, m, .op = VM_RET, .a = 2);
}

static void brk_reg(TB *b) { b->code[0][0].dst = 9; }
static void brk_arg_kind(TB *b) { b->pool[0][0] = 3; }
static void brk_arg_count(TB *b) { b->code[0][0].n = 2; }
static void brk_dst_kind(TB *b) { b->code[0][0].dst = 3; }
static void brk_jump(TB *b) { b->code[0][4].b = 7; }
static void brk_pool(TB *b) { b->code[0][1].args = 250; }
static void brk_const(TB *b) { b->code[0][5].a = 1; }
static void brk_func(TB *b) { b->code[0][0].a = 5; }
static void brk_packed(TB *b) { b->code[0][1].a = 1; }
static void brk_end(TB *b) { b->f[0].n_code = 4; }
static void brk_entry(TB *b) { (void)b; }
static void brk_node_arg(TB *b) { b->node_args[0][0][1] = 2; }
static void brk_imm(TB *b) { b->code[0][3].imm = 2; }
static void brk_scalar(TB *b) {
    b->code[0][3] =
        (VmInstr){.op = VM_SCALAR, .sub = VM_SC_NEG, .rk = VM_RK_BOOL, .dst = 4, .a = 4};
}
static void brk_opcode(TB *b) { b->code[0][3].op = 200; }
static void brk_reserved(TB *b) { b->code[0][3].op = VM_ALLOC_STORAGE; }
static void brk_ret_kind(TB *b) { b->code[0][6].a = 3; }
static void brk_ctor(TB *b) { b->code[0][5] = (VmInstr){.op = VM_ALLOC_ADT, .dst = 1, .a = 3}; }
static void brk_str(TB *b) { b->loc[0][2] = 40; }
static void brk_if_kind(TB *b) { b->code[0][4].a = 3; }
static void brk_if_back(TB *b) { b->code[0][4].b = 2; }

static void test_validate(void) {
    static const struct {
        const char *name;
        Breaker brk;
        const char *want;
    } cases[] = {
        {"register", brk_reg, "function main, instruction 0: dst register 9 out of range"},
        {"argument kind", brk_arg_kind, "argument register 3 is of kind int32, value needed"},
        {"argument count", brk_arg_count, "invoke of g with 2 arguments, it takes 1"},
        {"dst kind", brk_dst_kind, "dst register 3 is of kind int32, value needed"},
        {"jump", brk_jump, "instruction 4: jump to 7 (7 instructions)"},
        {"pool", brk_pool, "outside the operand pool"},
        {"constant", brk_const, "constant 1 (1 constants)"},
        {"function", brk_func, "invoke of function 5 (2 functions)"},
        {"packed", brk_packed, "packed function 1 (1 of them)"},
        {"end", brk_end, "does not end the function"},
        {"entry", brk_entry, "entry function 7 (2 functions)"},
        {"node argument", brk_node_arg, "argument 1 is value 2, not an earlier one"},
        {"bool immediate", brk_imm, "bool immediate 2"},
        {"scalar kinds", brk_scalar, "scalar negative takes no bool operands"},
        {"opcode", brk_opcode, "unknown opcode 200"},
        {"reserved", brk_reserved, "alloc_storage is reserved"},
        {"result kind", brk_ret_kind, "result register 3 is of kind int32, value needed"},
        {"constructor", brk_ctor, "constructor 3 (1 constructors)"},
        {"location", brk_str, "location string 40"},
        {"if kind", brk_if_kind, "condition register 3 is of kind int32"},
        {"backward if", brk_if_back, "instruction 4: a conditional jump back to 2"},
    };
    /* the base is valid */
    TB *b = tb_new();
    base_exec(b);
    VmExec *exe = tb_exec(b);
    Value *a[1] = {tensor_f32(1, (int64_t[]){2}, (float[]){1, 2})};
    expect_run(exe, NULL, 1, a, "Tensor[(2), float32] [2, 4]", "the validation base");
    rt_release(a[0]);
    tb_free(b, exe);
    for (size_t i = 0; i < RLY_ARRAY_LEN(cases); i++) {
        b = tb_new();
        base_exec(b);
        if (cases[i].brk == brk_imm) b->code[0][3].rk = VM_RK_BOOL;
        cases[i].brk(b);
        exe = tb_raw(b);
        if (cases[i].brk == brk_entry) exe->entry = 7;
        char err[512] = "";
        bool ok = vm_exec_validate(exe, err, sizeof err);
        CHECK(!ok && strstr(err, cases[i].want) != NULL &&
                  strncmp(err, "invalid executable: ", 20) == 0,
              "validation case %s: expected '%s', got %s", cases[i].name, cases[i].want,
              ok ? "(accepted)" : err);
        vm_exec_free(exe);
        free(b);
    }
}

/* ---- mutations: whatever the validator accepts runs without a crash ------------------------- */

/* A program that touches most opcodes: main(x: a float32 tensor of 2 elements). */
static void rich_exec(TB *b) {
    uint32_t cons = tb_ctor(b, "Cons", 1, 2), nil = tb_ctor(b, "Nil", 0, 0);
    tb_const(b, scalar_i(RLY_DTYPE_I64, 2));
    uint32_t p = tb_packed(b, "add", 2);
    tb_node(b, p, (VmNode){.kind = VM_NODE_CALL, .op_id = OP_ID_ADD}, 2, 0, 1);
    /* r0 x r1 nil r2 cons r3 tag(i) r4 cond(b) r5 ref r6 clo r7 res r8 f32 r9 tmp r10 shape */
    uint32_t m = tb_fn(b, "main", 1, 0, 'v', "vvvibvvvfvvv");
    uint32_t g = tb_fn(b, "g", 2, 1, 'v', "vvv");
    emit(b, g, .op = VM_REF_READ, .dst = 2, .a = 0);
    emit(b, g, .op = VM_INVOKE_PACKED, .dst = 2, .a = p, .n = 2, .args = regs(b, g, 2, 2, 1));
    emit(b, g, .op = VM_RET, .a = 2);
    emit(b, m, .op = VM_ALLOC_ADT, .dst = 1, .a = nil);
    emit(b, m, .op = VM_ALLOC_ADT, .dst = 2, .a = cons, .n = 2, .args = regs(b, m, 2, 0, 1));
    emit(b, m, .op = VM_GET_TAG, .dst = 3, .a = 2);
    emit(b, m, .op = VM_LOAD_IMM, .rk = VM_RK_I32, .dst = 9 - 6, .imm = 1);
    emit(b, m, .op = VM_REF_NEW, .dst = 5, .a = 0);
    emit(b, m, .op = VM_ALLOC_CLOSURE, .dst = 6, .a = g, .n = 1, .args = regs(b, m, 1, 5));
    emit(b, m, .op = VM_GET_FIELD, .dst = 9, .a = 2, .b = 0);
    emit(b, m, .op = VM_INVOKE_CLOSURE, .dst = 7, .a = 6, .n = 1, .args = regs(b, m, 1, 9));
    emit(b, m, .op = VM_REF_WRITE, .dst = 9, .a = 5, .b = 7);
    emit(b, m, .op = VM_SHAPE_OF, .dst = 10, .a = 7);
    emit(b, m, .op = VM_RESHAPE_TENSOR, .dst = 11, .a = 7, .b = 10);
    emit(b, m, .op = VM_LOAD_IMM, .rk = VM_RK_F32, .dst = 8, .fimm = 2);
    emit(b, m, .op = VM_SCALAR, .sub = VM_SC_MUL, .rk = VM_RK_F32, .dst = 8, .a = 8, .b = 8);
    emit(b, m, .op = VM_BOX, .dst = 9, .a = 8);
    emit(b, m, .op = VM_UNBOX, .dst = 8, .a = 9);
    emit(b, m, .op = VM_LOAD_CONST, .dst = 9, .a = 0);
    emit(b, m, .op = VM_SCALAR, .sub = VM_SC_EQ, .rk = VM_RK_I32, .dst = 4, .a = 3, .b = 3);
    emit(b, m, .op = VM_IF, .a = 4, .b = 19);
    emit(b, m, .op = VM_ALLOC_TUPLE, .dst = 7, .n = 4, .args = regs(b, m, 4, 11, 2, 5, 9));
    emit(b, m, .op = VM_RET, .a = 7);
}

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

static void mutate(TB *b) {
    uint32_t fi = rnd(b->n_f);
    VmFunction *f = &b->f[fi];
    switch (rnd(8)) {
    case 0: b->pool[fi][rnd(f->n_pool ? f->n_pool : 1)] = rnd(14); return;
    case 1: b->kinds[fi][rnd(f->n_regs)] = (uint8_t)rnd(VM_RK_COUNT); return;
    case 2:
        if (b->n_p) b->node_args[0][0][rnd(2)] = rnd(4);
        return;
    default: break;
    }
    VmInstr *in = &b->code[fi][rnd(f->n_code)];
    uint32_t v = rnd(14);
    switch (rnd(10)) {
    case 0: in->op = (uint8_t)rnd(VM_OPCODE_COUNT); break;
    case 1: in->sub = (uint8_t)rnd(VM_SC_COUNT); break;
    case 2: in->rk = (uint8_t)rnd(VM_RK_COUNT); break;
    case 3: in->flags = (uint8_t)rnd(2); break;
    case 4: in->dst = v; break;
    case 5: in->a = v; break;
    case 6: in->b = v; break;
    case 7: in->n = rnd(4); break;
    case 8: in->args = rnd(8); break;
    default: in->imm = (int64_t)rnd(3) - 1; break;
    }
}

static void test_mutations(void) {
    const char *env = getenv("RLY_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : 1795678138u; /* a seed that once hung */
    printf("mutations: seed %llu (RLY_SEED=%llu replays it)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    rng_state = seed;
    TB *b = tb_new();
    rich_exec(b);
    VmExec *exe = tb_exec(b);
    float xs[2] = {1, 2};
    Value *a[1] = {tensor_f32(1, (int64_t[]){2}, xs)};
    expect_run(exe, NULL, 1, a,
               "(Tensor[(2), float32] [2, 4], Cons(Tensor[(2), float32] [1, 2], Nil), "
               "ref(Tensor[(2), float32] [2, 4]), 2i64)",
               "the mutation base");
    tb_free(b, exe);
    int n_valid = 0, n_ok = 0;
    RtLimits lim = {.max_depth = 200, .max_memory = 1 << 20, .timeout = 0.002};
    for (int it = 0; it < 3000; it++) {
        b = tb_new();
        rich_exec(b);
        for (uint32_t k = 1 + rnd(3); k > 0; k--)
            mutate(b);
        exe = tb_raw(b);
        char err[512];
        if (vm_exec_validate(exe, err, sizeof err) && vm_exec_bind(exe, err, sizeof err)) {
            n_valid++;
            char *got = run_fn(exe, &lim, 0, 1, a);
            n_ok += strncmp(got, "ERR:", 4) != 0;
            free(got);
        }
        vm_exec_free(exe); /* frees the constants */
        free(b);
    }
    printf("mutations: %d of 3000 valid, %d of them ran to a result\n", n_valid, n_ok);
    CHECK(n_valid > 0, "no mutation validated");
    rt_release(a[0]);
}

/* ---- VM_SCALAR against the reference kernels ------------------------------------------------ */

/* The kernel an op and kind are checked against (logical ops on bools, bitwise on ints). */
static uint32_t kernel_op(uint8_t sub, uint8_t rk) {
    bool bl = rk == VM_RK_BOOL;
    switch (sub) {
    case VM_SC_ADD: return OP_ID_ADD;
    case VM_SC_SUB: return OP_ID_SUBTRACT;
    case VM_SC_MUL: return OP_ID_MULTIPLY;
    case VM_SC_DIV: return OP_ID_DIVIDE;
    case VM_SC_MOD: return OP_ID_MOD;
    case VM_SC_FLOOR_DIV: return OP_ID_FLOOR_DIVIDE;
    case VM_SC_FLOOR_MOD: return OP_ID_FLOOR_MOD;
    case VM_SC_MAX: return OP_ID_MAXIMUM;
    case VM_SC_MIN: return OP_ID_MINIMUM;
    case VM_SC_POW: return OP_ID_POWER;
    case VM_SC_EQ: return OP_ID_EQUAL;
    case VM_SC_NE: return OP_ID_NOT_EQUAL;
    case VM_SC_LT: return OP_ID_LESS;
    case VM_SC_LE: return OP_ID_LESS_EQUAL;
    case VM_SC_GT: return OP_ID_GREATER;
    case VM_SC_GE: return OP_ID_GREATER_EQUAL;
    case VM_SC_AND: return bl ? OP_ID_LOGICAL_AND : OP_ID_BITWISE_AND;
    case VM_SC_OR: return bl ? OP_ID_LOGICAL_OR : OP_ID_BITWISE_OR;
    case VM_SC_XOR: return bl ? OP_ID_LOGICAL_XOR : OP_ID_BITWISE_XOR;
    case VM_SC_NOT: return bl ? OP_ID_LOGICAL_NOT : OP_ID_BITWISE_NOT;
    case VM_SC_NEG: return OP_ID_NEGATIVE;
    case VM_SC_ABS: return OP_ID_ABS;
    default: return OP_ID_CAST;
    }
}

static bool sc_unary(uint8_t sub) {
    return sub == VM_SC_NOT || sub == VM_SC_NEG || sub == VM_SC_ABS || sub == VM_SC_CAST;
}
static bool sc_cmp(uint8_t sub) { return sub >= VM_SC_EQ && sub <= VM_SC_GE; }

static RtTensor *kout;
static int kalloc(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    kout = rt_tensor_new(dt, ndim, shape, kc->err, kc->err_cap);
    if (kout == NULL) return -1;
    kc->out[i] = &kout->t;
    return 0;
}

/* The kernel's result on 0-d a (and b), as a printed value; or "ERR:message". */
static char *kernel_result(uint32_t op, const char *opname, Value *a, Value *b, rly_dtype to) {
    KernelFn fn = kern_ref_lookup(op);
    const DLTensor *in[2] = {&RT_TENSOR(a)->t, b ? &RT_TENSOR(b)->t : NULL};
    uint32_t start[2] = {0, 1}, len[2] = {1, 1};
    uint8_t tup[2] = {0, 0};
    DLTensor *out[1] = {NULL};
    char err[256] = "";
    KAttr dt_attr = {.name = "dtype", .kind = KA_INT, .i = (int64_t)to, .f = (double)to};
    KCall kc = {.op = opname,
                .attrs = &dt_attr,
                .n_attrs = op == OP_ID_CAST ? 1 : 0,
                .n_args = b ? 2 : 1,
                .arg_start = start,
                .arg_len = len,
                .arg_tuple = tup,
                .in = in,
                .n_in = b ? 2 : 1,
                .out = out,
                .n_out = 1,
                .alloc = kalloc,
                .err = err,
                .err_cap = sizeof err};
    kout = NULL;
    StrBuf sb = {0};
    int rc = fn(&kc);
    k_call_release(&kc); /* any scratch the kernel took */
    if (rc != 0) {
        sb_printf(&sb, "ERR:%s: %s", opname, err);
        if (kout) rt_release(&kout->hdr);
        return sb_take(&sb);
    }
    vm_print_value(NULL, &kout->hdr, 10, &sb);
    rt_release(&kout->hdr);
    return sb_take(&sb);
}

/* Edge values of each kind. */
static const double f_edges[] = {
    0.0,           -0.0,     1.0,       -1.0, 2.5,        -2.5,
    3.0,           -7.0,     0.1,       1e30, -1e30,      3.4028234663852886e38,
    1e-40,         INFINITY, -INFINITY, NAN,  16777217.0, 2147483648.0,
    -2147483649.0, 9.3e18,   0.5};
static const int64_t i_edges[] = {0,
                                  1,
                                  -1,
                                  2,
                                  -2,
                                  3,
                                  -7,
                                  7,
                                  31,
                                  32,
                                  63,
                                  64,
                                  100,
                                  -100,
                                  INT32_MAX,
                                  INT32_MIN,
                                  (int64_t)INT32_MAX + 1,
                                  INT64_MAX,
                                  INT64_MIN,
                                  (int64_t)1 << 40};

static Value *edge_value(uint8_t rk, size_t i) {
    rly_dtype dt = vm_rk_dtype(rk);
    if (rk == VM_RK_F32 || rk == VM_RK_F64) return scalar(dt, f_edges[i]);
    return scalar_i(dt, rk == VM_RK_BOOL ? (int64_t)(i & 1) : i_edges[i]);
}

static size_t n_edges(uint8_t rk) {
    if (rk == VM_RK_BOOL) return 2;
    if (rk == VM_RK_F32 || rk == VM_RK_F64) return RLY_ARRAY_LEN(f_edges);
    return RLY_ARRAY_LEN(i_edges);
}

/* Same printed value, or both NaN of the same dtype. */
static bool same_result(const char *x, const char *y) {
    if (strcmp(x, y) == 0) return true;
    return strncmp(x, "nan", 3) == 0 && strncmp(y, "nan", 3) == 0 && strcmp(x + 3, y + 3) == 0;
}

static void test_scalar_diff(void) {
    size_t n_cases = 0;
    for (uint8_t sub = 0; sub < VM_SC_COUNT; sub++)
        for (uint8_t rk = VM_RK_BOOL; rk < VM_RK_COUNT; rk++)
            for (uint8_t to = VM_RK_BOOL; to < VM_RK_COUNT; to++) {
                uint8_t dst = sub == VM_SC_CAST ? to : sc_cmp(sub) ? VM_RK_BOOL : rk;
                if (sub != VM_SC_CAST && to != VM_RK_BOOL) continue; /* one pass per (sub, rk) */
                bool ok_kind = true;
                bool is_int = rk == VM_RK_BOOL || rk == VM_RK_I32 || rk == VM_RK_I64;
                if ((sub == VM_SC_AND || sub == VM_SC_OR || sub == VM_SC_XOR || sub == VM_SC_NOT) &&
                    !is_int)
                    ok_kind = false;
                if ((sub == VM_SC_NEG || sub == VM_SC_ABS) && rk == VM_RK_BOOL) ok_kind = false;
                /* the executable: f(a, b) = sub(a, b) */
                TB *b = tb_new();
                char kinds[4] = {"vbilfd"[rk], "vbilfd"[rk], "vbilfd"[dst], 0};
                tb_fn(b, "f", sc_unary(sub) ? 1 : 2, 0, kinds[2], kinds);
                emit(b, 0, .op = VM_SCALAR, .sub = sub, .rk = rk, .dst = 2, .a = 0, .b = 1);
                emit(b, 0, .op = VM_RET, .a = 2);
                if (sc_unary(sub)) b->f[0].n_params = 1;
                VmExec *exe = tb_raw(b);
                char err[256];
                bool valid = vm_exec_validate(exe, err, sizeof err);
                CHECK(valid == ok_kind, "scalar %u on kind %u: validation %d, expected %d (%s)",
                      sub, rk, valid, ok_kind, err);
                if (!valid) {
                    vm_exec_free(exe);
                    free(b);
                    continue;
                }
                Vm *vm = vm_new(exe);
                uint32_t op = kernel_op(sub, rk);
                const char *opname = sup_op_name(op);
                size_t ne = n_edges(rk);
                for (size_t i = 0; i < ne; i++)
                    for (size_t j = 0; j < (sc_unary(sub) ? 1 : ne); j++) {
                        Value *x = edge_value(rk, i), *y = sc_unary(sub) ? NULL : edge_value(rk, j);
                        Value *args[2] = {x, y};
                        char *want = kernel_result(op, opname, x, y, vm_rk_dtype(dst));
                        Value *r = vm_invoke(vm, 0, sc_unary(sub) ? 1 : 2, args, err, sizeof err);
                        StrBuf sb = {0};
                        if (r) {
                            vm_print_value(exe, r, 10, &sb);
                            rt_release(r);
                        } else {
                            sb_printf(&sb, "ERR:%s", strncmp(err, "error: ", 7) ? err : err + 7);
                        }
                        const char *got = sb_cstr(&sb);
                        n_cases++;
                        char xs[64] = "", ys[64] = "";
                        StrBuf t = {0};
                        vm_print_value(exe, x, 10, &t);
                        snprintf(xs, sizeof xs, "%s", sb_cstr(&t));
                        sb_free(&t);
                        if (y) {
                            vm_print_value(exe, y, 10, &t);
                            snprintf(ys, sizeof ys, "%s", sb_cstr(&t));
                            sb_free(&t);
                        }
                        CHECK(same_result(got, want),
                              "%s(%s, %s) as %s: the VM gives %s, the "
                              "kernel %s",
                              opname, xs, ys, sup_dtype_name(vm_rk_dtype(rk)), got, want);
                        sb_free(&sb);
                        free(want);
                        rt_release(x);
                        rt_release(y);
                    }
                vm_free(vm);
                vm_exec_free(exe);
                free(b);
            }
    printf("scalar differential: %zu cases\n", n_cases);
}

/* ---- printing ------------------------------------------------------------------------------ */

static void test_print(void) {
    /* vm_print_value and ev_print_value agree on tensors of every printed form and tuples */
    float x[10] = {1, -2.5f, 3, NAN, INFINITY, 6, 7, 8, 9, 10};
    Value *t = tensor_f32(2, (int64_t[]){2, 5}, x);
    Value *s = scalar_i(RLY_DTYPE_I64, -3);
    Value *e = tensor_f32(2, (int64_t[]){0, 4}, x);
    RtTuple *tu = rt_tuple_new(4);
    tu->f[0] = t;
    tu->f[1] = s;
    tu->f[2] = e;
    RtTuple *one = rt_tuple_new(1);
    one->f[0] = scalar(RLY_DTYPE_BOOL, 1);
    tu->f[3] = &one->hdr;
    for (size_t max = 3; max <= 100; max += 97) {
        StrBuf a = {0}, b = {0};
        vm_print_value(NULL, &tu->hdr, max, &a);
        ev_print_value(&tu->hdr, max, &b);
        CHECK(strcmp(sb_cstr(&a), sb_cstr(&b)) == 0, "print: vm %s, eval %s", sb_cstr(&a),
              sb_cstr(&b));
        sb_free(&a);
        sb_free(&b);
    }
    rt_release(&tu->hdr);
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        void (*fn)(void);
    } groups[] = {
        {"tail_loop", test_tail_loop}, {"deep", test_deep_recursion}, {"timeout", test_timeout},
        {"data", test_data},           {"closures", test_closures},   {"refs", test_refs},
        {"packed", test_packed},       {"shapes", test_shapes},       {"validate", test_validate},
        {"scalar", test_scalar_diff},  {"print", test_print},         {"mutations", test_mutations},
    };
    for (size_t i = 0; i < RLY_ARRAY_LEN(groups); i++)
        if (argc < 2 || strcmp(argv[1], groups[i].name) == 0) groups[i].fn();
    return check_summary();
}
