/* bench_vm.c - the VM executor's overheads on hand-assembled executables (not a test).
 *
 *   bench_vm [-r REPS] [N]     default: N = 1000000, REPS = 5
 *
 * Times (best of REPS, vm_invoke alone; the executable is built and validated outside):
 *   loop:    a tail-recursive function of two int32 scalars, N iterations of a compare, an add
 *            and a tail invoke (issue 15's target: <= 10 ns per iteration);
 *   deep:    non-tail recursion N deep on int64 scalars (frames on the heap stack);
 *   closure: N calls of a closure capturing one value, through InvokeClosure in a loop;
 *   chain:   1000 tiny elementwise operators (add on 4 float32s), each its own InvokePacked
 *            (and a KillRegister of its operand, as a compiler with liveness emits it),
 *            then the same 1000 as one packed function of 1000 nodes (issue 15's target: per-op
 *            overhead under 100 ns; the kernel's own work on 4 elements is a few ns).
 * Prints one line per case: N, seconds, ns per iteration or per operator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "runtime/vm.h"

enum { MAXF = 4, MAXC = 2100, MAXR = 1100 };

/* One executable's storage (static: the chain case has thousands of instructions). */
static struct {
    VmFunction f[MAXF];
    VmInstr code[MAXF][MAXC];
    uint32_t pool[MAXF][MAXC * 2];
    uint8_t kinds[MAXF][MAXR];
    VmPacked p[2];
    VmNode nodes[2][1000];
    uint32_t node_args[2][1000][2];
    const char *strs[1];
    const char *names[4];
    VmTypeDesc types[4];
} S;

static void reset(void) { memset(&S, 0, sizeof S); }

static VmFunction *fn(uint32_t i, const char *name, uint32_t n_params, uint32_t n_captured,
                      uint8_t result, uint32_t n_regs, uint8_t kind) {
    VmFunction *f = &S.f[i];
    f->name = name;
    f->n_params = n_params;
    f->n_captured = n_captured;
    f->n_regs = n_regs;
    for (uint32_t r = 0; r < n_regs; r++)
        S.kinds[i][r] = kind;
    f->reg_kind = S.kinds[i];
    f->result_kind = result;
    f->code = S.code[i];
    f->pool = S.pool[i];
    return f;
}

static void emit(uint32_t fi, VmInstr in) { S.code[fi][S.f[fi].n_code++] = in; }

static uint32_t regs(uint32_t fi, uint32_t n, const uint32_t *r) {
    uint32_t start = S.f[fi].n_pool;
    for (uint32_t i = 0; i < n; i++)
        S.pool[fi][S.f[fi].n_pool++] = r[i];
    return start;
}

static VmExec *make_exec(uint32_t n_funcs, uint32_t n_packed) {
    VmExec *exe = calloc(1, sizeof *exe);
    S.strs[0] = "";
    exe->n_funcs = n_funcs;
    exe->funcs = S.f;
    exe->n_packed = n_packed;
    exe->packed = S.p;
    exe->n_strs = 1;
    exe->strs = S.strs;
    exe->n_inputs = S.f[0].n_params;
    for (uint32_t i = 0; i < 4; i++)
        S.names[i] = "x";
    exe->in_names = exe->out_names = S.names;
    exe->in_types = exe->out_types = S.types;
    exe->n_outputs = 1;
    char err[512];
    if (!vm_exec_validate(exe, err, sizeof err) || !vm_exec_bind(exe, err, sizeof err)) {
        fprintf(stderr, "bench_vm: %s\n", err);
        exit(1);
    }
    return exe;
}

static Value *scalar_i(rly_dtype dt, int64_t v) {
    char err[256];
    RtTensor *t = rt_tensor_new(dt, 0, NULL, err, sizeof err);
    k_storei(rt_tensor_data(t), dt, 0, v);
    return &t->hdr;
}

/* Best time of reps runs of exe's function 0 on args; checks the printed result. */
static double time_runs(VmExec *exe, int reps, uint32_t n, Value **args, const char *want) {
    Vm *vm = vm_new(exe);
    RtLimits lim = rt_limits_default();
    lim.max_depth = 0;
    vm_set_limits(vm, &lim);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        char err[512];
        double t0 = bench_now();
        Value *v = vm_invoke(vm, 0, n, args, err, sizeof err);
        double t = bench_now() - t0;
        if (v == NULL) {
            fprintf(stderr, "bench_vm: %s\n", err);
            exit(1);
        }
        StrBuf sb = {0};
        vm_print_value(exe, v, 4, &sb);
        if (want && strcmp(sb_cstr(&sb), want) != 0) {
            fprintf(stderr, "bench_vm: wrong result %s (expected %s)\n", sb_cstr(&sb), want);
            exit(1);
        }
        sb_free(&sb);
        rt_release(v);
        if (t < best) best = t;
    }
    vm_free(vm);
    return best;
}

static void free_exec(VmExec *exe) {
    arena_free(&exe->arena);
    free(exe);
}

/* loop(i, n) = i < n ? loop(i + 1, n) : i */
static void bench_loop(long n, int reps) {
    reset();
    fn(0, "loop", 2, 0, VM_RK_I32, 4, VM_RK_I32);
    S.kinds[0][2] = VM_RK_BOOL;
    emit(0, (VmInstr){.op = VM_SCALAR, .sub = VM_SC_LT, .rk = VM_RK_I32, .dst = 2, .a = 0, .b = 1});
    emit(0, (VmInstr){.op = VM_IF, .a = 2, .b = 5});
    emit(0, (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_I32, .dst = 3, .imm = 1});
    emit(0,
         (VmInstr){.op = VM_SCALAR, .sub = VM_SC_ADD, .rk = VM_RK_I32, .dst = 3, .a = 0, .b = 3});
    emit(0, (VmInstr){.op = VM_INVOKE,
                      .flags = VM_F_TAIL,
                      .a = 0,
                      .n = 2,
                      .args = regs(0, 2, (uint32_t[]){3, 1})});
    emit(0, (VmInstr){.op = VM_RET, .a = 0});
    VmExec *exe = make_exec(1, 0);
    Value *args[2] = {scalar_i(RLY_DTYPE_I32, 0), scalar_i(RLY_DTYPE_I32, n)};
    char want[32];
    snprintf(want, sizeof want, "%ld", n);
    double t = time_runs(exe, reps, 2, args, want);
    printf("loop     N=%-8ld %8.4f s  %7.2f ns/iteration\n", n, t, t * 1e9 / (double)n);
    rt_release(args[0]);
    rt_release(args[1]);
    free_exec(exe);
}

/* down(n) = n == 0 ? 0 : n + down(n - 1) */
static void bench_deep(long n, int reps) {
    reset();
    fn(0, "down", 1, 0, VM_RK_I64, 4, VM_RK_I64);
    S.kinds[0][2] = VM_RK_BOOL;
    emit(0, (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_I64, .dst = 1, .imm = 0});
    emit(0, (VmInstr){.op = VM_SCALAR, .sub = VM_SC_EQ, .rk = VM_RK_I64, .dst = 2, .a = 0, .b = 1});
    emit(0, (VmInstr){.op = VM_IF, .a = 2, .b = 4});
    emit(0, (VmInstr){.op = VM_RET, .a = 1});
    emit(0, (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_I64, .dst = 3, .imm = 1});
    emit(0,
         (VmInstr){.op = VM_SCALAR, .sub = VM_SC_SUB, .rk = VM_RK_I64, .dst = 3, .a = 0, .b = 3});
    emit(0,
         (VmInstr){.op = VM_INVOKE, .dst = 3, .a = 0, .n = 1, .args = regs(0, 1, (uint32_t[]){3})});
    emit(0,
         (VmInstr){.op = VM_SCALAR, .sub = VM_SC_ADD, .rk = VM_RK_I64, .dst = 3, .a = 0, .b = 3});
    emit(0, (VmInstr){.op = VM_RET, .a = 3});
    VmExec *exe = make_exec(1, 0);
    Value *args[1] = {scalar_i(RLY_DTYPE_I64, n)};
    char want[64];
    snprintf(want, sizeof want, "%lldi64", (long long)n * (n + 1) / 2);
    double t = time_runs(exe, reps, 1, args, want);
    printf("deep     N=%-8ld %8.4f s  %7.2f ns/level\n", n, t, t * 1e9 / (double)n);
    rt_release(args[0]);
    free_exec(exe);
}

/* main(n): c = closure(inc, k); i = 0; while i < n: i = c(i)  (inc(k, i) = i + 1) */
static void bench_closure(long n, int reps) {
    reset();
    VmFunction *m = fn(0, "main", 2, 0, VM_RK_I32, 6, VM_RK_I32);
    S.kinds[0][0] = S.kinds[0][1] = VM_RK_VALUE; /* n boxed, the captured value */
    S.kinds[0][2] = VM_RK_VALUE;                 /* the closure */
    S.kinds[0][4] = VM_RK_BOOL;
    (void)m;
    fn(1, "inc", 2, 1, VM_RK_I32, 3, VM_RK_I32);
    S.kinds[1][0] = VM_RK_VALUE;
    emit(1, (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_I32, .dst = 2, .imm = 1});
    emit(1,
         (VmInstr){.op = VM_SCALAR, .sub = VM_SC_ADD, .rk = VM_RK_I32, .dst = 2, .a = 1, .b = 2});
    emit(1, (VmInstr){.op = VM_RET, .a = 2});
    /* r0 n (value) r1 k (value) r2 closure r3 i r4 cond r5 n unboxed */
    emit(
        0,
        (VmInstr){
            .op = VM_ALLOC_CLOSURE, .dst = 2, .a = 1, .n = 1, .args = regs(0, 1, (uint32_t[]){1})});
    emit(0, (VmInstr){.op = VM_UNBOX, .dst = 5, .a = 0});
    emit(0, (VmInstr){.op = VM_LOAD_IMM, .rk = VM_RK_I32, .dst = 3, .imm = 0});
    emit(0, (VmInstr){.op = VM_SCALAR, .sub = VM_SC_LT, .rk = VM_RK_I32, .dst = 4, .a = 3, .b = 5});
    emit(0, (VmInstr){.op = VM_IF, .a = 4, .b = 7});
    emit(0, (VmInstr){.op = VM_INVOKE_CLOSURE,
                      .dst = 3,
                      .a = 2,
                      .n = 1,
                      .args = regs(0, 1, (uint32_t[]){3})});
    emit(0, (VmInstr){.op = VM_GOTO, .a = 3});
    emit(0, (VmInstr){.op = VM_RET, .a = 3});
    VmExec *exe = make_exec(2, 0);
    Value *args[2] = {scalar_i(RLY_DTYPE_I32, n), scalar_i(RLY_DTYPE_I32, 0)};
    char want[32];
    snprintf(want, sizeof want, "%ld", n);
    double t = time_runs(exe, reps, 2, args, want);
    printf("closure  N=%-8ld %8.4f s  %7.2f ns/call\n", n, t, t * 1e9 / (double)n);
    rt_release(args[0]);
    rt_release(args[1]);
    free_exec(exe);
}

/* x -> add(add(add(x, x), x), x) ... 1000 times: as 1000 InvokePacked, and as one packed. */
static void bench_chain(int reps) {
    enum { N_OPS = 1000 };
    reset();
    /* packed 0: add(a, b); packed 1: the whole chain over its one input */
    S.p[0] =
        (VmPacked){.name = "add", .n_inputs = 2, .n_nodes = 1, .nodes = S.nodes[0], .result = 2};
    S.node_args[0][0][0] = 0;
    S.node_args[0][0][1] = 1;
    S.nodes[0][0] =
        (VmNode){.kind = VM_NODE_CALL, .op_id = OP_ID_ADD, .n_args = 2, .args = S.node_args[0][0]};
    S.p[1] = (VmPacked){
        .name = "chain", .n_inputs = 1, .n_nodes = N_OPS, .nodes = S.nodes[1], .result = N_OPS};
    for (uint32_t k = 0; k < N_OPS; k++) {
        S.node_args[1][k][0] = k; /* the previous value */
        S.node_args[1][k][1] = 0; /* the input */
        S.nodes[1][k] = (VmNode){
            .kind = VM_NODE_CALL, .op_id = OP_ID_ADD, .n_args = 2, .args = S.node_args[1][k]};
    }
    /* function 0: 1000 InvokePacked, each in its own register */
    fn(0, "chain", 1, 0, VM_RK_VALUE, N_OPS + 1, VM_RK_VALUE);
    for (uint32_t k = 0; k < N_OPS; k++) {
        emit(0, (VmInstr){.op = VM_INVOKE_PACKED,
                          .dst = k + 1,
                          .a = 0,
                          .n = 2,
                          .args = regs(0, 2, (uint32_t[]){k, 0})});
        if (k > 0) emit(0, (VmInstr){.op = VM_KILL, .a = k}); /* its last use, as compiled */
    }
    emit(0, (VmInstr){.op = VM_RET, .a = N_OPS});
    /* function 1: one InvokePacked of the fused chain */
    fn(1, "fused", 1, 0, VM_RK_VALUE, 2, VM_RK_VALUE);
    emit(
        1,
        (VmInstr){
            .op = VM_INVOKE_PACKED, .dst = 1, .a = 1, .n = 1, .args = regs(1, 1, (uint32_t[]){0})});
    emit(1, (VmInstr){.op = VM_RET, .a = 1});
    VmExec *exe = make_exec(2, 2);
    char err[256];
    RtTensor *x = rt_tensor_new(RLY_DTYPE_F32, 1, (int64_t[]){4}, err, sizeof err);
    for (int i = 0; i < 4; i++)
        ((float *)rt_tensor_data(x))[i] = (float)i;
    Value *args[1] = {&x->hdr};
    const char *want = "Tensor[(4), float32] [0, 1001, 2002, 3003]";
    Vm *vm = vm_new(exe);
    int inner = 100; /* runs per timing, so that one timing is long enough */
    for (uint32_t fi = 0; fi < 2; fi++) {
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now();
            for (int i = 0; i < inner; i++) {
                Value *v = vm_invoke(vm, fi, 1, args, err, sizeof err);
                if (v == NULL) {
                    fprintf(stderr, "bench_vm: %s\n", err);
                    exit(1);
                }
                if (i == 0) {
                    StrBuf sb = {0};
                    vm_print_value(exe, v, 4, &sb);
                    if (strcmp(sb_cstr(&sb), want) != 0) {
                        fprintf(stderr, "bench_vm: chain gives %s\n", sb_cstr(&sb));
                        exit(1);
                    }
                    sb_free(&sb);
                }
                rt_release(v);
            }
            double t = (bench_now() - t0) / inner;
            if (t < best) best = t;
        }
        printf(fi == 0 ? "chain    %d InvokePacked of add(4 x f32): %8.2f us  %7.1f ns/op\n"
                       : "chain    1 packed of %d add nodes:          %8.2f us  %7.1f ns/op\n",
               N_OPS, best * 1e6, best * 1e9 / N_OPS);
    }
    vm_free(vm);
    double best;
    /* the kernel alone, for reference: the same adds called directly */
    KernelFn add = kern_ref_lookup(OP_ID_ADD);
    best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        for (int i = 0; i < inner; i++) {
            RtTensor *prev = x;
            prev->hdr.rc++;
            for (int k = 0; k < N_OPS; k++) {
                const DLTensor *in[2] = {&prev->t, &x->t};
                uint32_t start[2] = {0, 1}, len[2] = {1, 1};
                uint8_t tup[2] = {0, 0};
                DLTensor *out[1] = {NULL};
                RtTensor *o = rt_tensor_new(RLY_DTYPE_F32, 1, (int64_t[]){4}, err, sizeof err);
                out[0] = &o->t;
                KCall kc = {.op = "add",
                            .n_args = 2,
                            .arg_start = start,
                            .arg_len = len,
                            .arg_tuple = tup,
                            .in = in,
                            .n_in = 2,
                            .out = out,
                            .n_out = 1,
                            .err = err,
                            .err_cap = sizeof err};
                add(&kc);
                rt_release(&prev->hdr);
                prev = o;
            }
            rt_release(&prev->hdr);
        }
        double t = (bench_now() - t0) / inner;
        if (t < best) best = t;
    }
    printf("chain    the kernel alone (+ its output):   %8.2f us  %7.1f ns/op\n", best * 1e6,
           best * 1e9 / N_OPS);
    rt_release(&x->hdr);
    free_exec(exe);
}

int main(int argc, char **argv) {
    long sizes[16];
    int reps;
    int n_sizes = bench_sizes(argc, argv, &reps, sizes);
    if (argc == 1) { /* the defaults of this benchmark */
        n_sizes = 1;
        sizes[0] = 1000000;
        reps = 5;
    }
    for (int i = 0; i < n_sizes; i++) {
        bench_loop(sizes[i], reps);
        bench_deep(sizes[i], reps);
        bench_closure(sizes[i], reps);
    }
    bench_chain(reps);
    return 0;
}
