/* test_vm_plan.c - the VM's static memory plans (docs/vm.md, "Memory planning"): buffers
 * reused across disjoint lifetimes (peak below the sum), in place only where the input dies,
 * a function with a branch, a recursive function left unplanned, planned and unplanned runs
 * bit for bit equal, and CNNs (tests/unit/data/layout_cnn.onnx, a .rly one at -O0 and -O3) that
 * make no tensor allocation and no kernel scratch malloc per run after the first; kernel scratch
 * (k_scratch) from a workspace, too small a one, and none. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "backend/backend.h"
#include "kernels/fast/gemm.h" /* kern_conv_maxpool_taken */
#include "ir/ir.h"
#include "passes/passes.h"
#include "types/types.h"

static const char *data_dir;

/* level -1: types only (one packed function per operator call); else pass_run's level. */
static VmExec *compile_module(Module *m, int level) {
    bool ok;
    if (level < 0)
        ok = pass_module_typed(m) || ty_infer_module(m);
    else {
        PassOptions po = {.opt_level = level};
        ok = pass_run(m, &po);
    }
    CHECK(ok, "the module does not optimize");
    if (!ok) return NULL;
    VmExec *exe = be_compile(m, NULL);
    CHECK(exe != NULL, "the module does not compile");
    return exe;
}

static VmExec *compile_text(const char *text, int level) {
    Ctx *ctx = NULL;
    rly_ctx_new(&ctx);
    rly_module *m = NULL;
    VmExec *exe = NULL;
    if (rly_module_parse(ctx, text, strlen(text), "plan.rly", &m) != RLY_STATUS_OK)
        CHECK(false, "does not parse: %s\n%s", rly_last_error(), text);
    else
        exe = compile_module(m, level);
    rly_ctx_free(ctx); /* executables do not depend on their module */
    return exe;
}

static uint64_t sum_bytes(const VmPlan *pl) {
    uint64_t s = 0;
    for (uint32_t b = 0; b < pl->n_bufs; b++)
        s += (pl->bufs[b].nbytes + 63) / 64 * 64;
    return s;
}

/* The buffer planned for output 0 of node 0 at the k-th site of f (VM_PLAN_NONE if none). */
static uint32_t site_buf(const VmPlan *pl, uint32_t k) {
    return k < pl->n_sites && pl->sites[k].n > 0 ? pl->slots[pl->sites[k].first] : VM_PLAN_NONE;
}

static uint32_t find_func(const VmExec *exe, const char *name) {
    for (uint32_t i = 0; i < exe->n_funcs; i++)
        if (exe->funcs[i].name && strcmp(exe->funcs[i].name, name) == 0) return i;
    return UINT32_MAX;
}

/* A deterministic input of type d. */
static Value *input(const VmTypeDesc *d, unsigned seed) {
    char err[256];
    if (!d->is_tensor) return NULL;
    RtTensor *t = rt_tensor_new((rly_dtype)d->dtype, d->ndim, d->shape, err, sizeof err);
    for (int64_t i = 0; t && i < k_numel(&t->t); i++)
        k_storef(rt_tensor_data(t), (rly_dtype)d->dtype, i,
                 (double)((i * 7919 + seed * 104729) % 201) / 100.0 - 1.0);
    return t ? &t->hdr : NULL;
}

/* Run exe `runs` times on the same inputs; the printed last result. With strip, the plans are
 * taken away first (the unplanned machine, for comparison). */
typedef struct RunCounts {
    uint64_t allocs[2];  /* tensor allocations in the first and second runs */
    uint64_t scratch[2]; /* kernel scratch mallocs (k_scratch_mallocs) in the same */
} RunCounts;

static char *run_counted(VmExec *exe, int runs, bool strip, RunCounts *rc);

static char *run_text(VmExec *exe, int runs, bool strip, uint64_t *allocs_after_first) {
    RunCounts rc = {.allocs = {0}};
    char *s = run_counted(exe, runs, strip, &rc);
    if (allocs_after_first) *allocs_after_first = rc.allocs[1];
    return s;
}

static char *run_counted(VmExec *exe, int runs, bool strip, RunCounts *rc) {
    const VmPlan **saved = calloc(exe->n_funcs + 1, sizeof *saved);
    for (uint32_t i = 0; i < exe->n_funcs; i++) {
        saved[i] = exe->funcs[i].plan;
        if (strip) ((VmFunction *)exe->funcs)[i].plan = NULL;
    }
    Vm *vm = vm_new(exe);
    Value *args[16] = {0};
    for (uint32_t i = 0; i < exe->n_inputs && i < 16; i++)
        args[i] = input(&exe->in_types[i], i);
    char err[1024];
    StrBuf sb = {0};
    for (int r = 0; r < runs; r++) {
        uint64_t a0 = rt_tensor_new_count(), s0 = k_scratch_mallocs();
        Value *v = vm_invoke(vm, exe->entry, exe->n_inputs, args, err, sizeof err);
        if (r < 2) {
            rc->allocs[r] = rt_tensor_new_count() - a0;
            rc->scratch[r] = k_scratch_mallocs() - s0;
        }
        CHECK(v != NULL, "run %d fails: %s", r, err);
        if (v == NULL) break;
        if (r == runs - 1) vm_print_value(exe, v, 1000000, &sb);
        rt_release(v);
    }
    for (uint32_t i = 0; i < exe->n_inputs && i < 16; i++)
        rt_release(args[i]);
    vm_free(vm);
    for (uint32_t i = 0; i < exe->n_funcs; i++)
        ((VmFunction *)exe->funcs)[i].plan = saved[i];
    free(saved);
    char *s = strdup(sb_cstr(&sb));
    sb_free(&sb);
    return s;
}

/* Planned and unplanned runs print the same result, run after run. */
static void same_as_unplanned(VmExec *exe, const char *what) {
    char *a = run_text(exe, 3, false, NULL), *b = run_text(exe, 1, true, NULL);
    CHECK(strcmp(a, b) == 0, "%s: the planned run differs:\n%.300s\n%.300s", what, a, b);
    free(a);
    free(b);
}

/* A chain of dense layers: two buffers alternate, the peak is below the sum. */
static void test_reuse(void) {
    VmExec *exe = compile_text(
        HDR "def @main(%x: Tensor[(32, 32), float32], %w: Tensor[(32, 32), float32]) {\n"
            "  %0 = nn.dense(%x, %w);\n  %1 = nn.dense(%0, %w);\n  %2 = nn.dense(%1, %w);\n"
            "  %3 = nn.dense(%2, %w);\n  nn.dense(%3, %w)\n}\n",
        -1);
    if (exe == NULL) return;
    const VmPlan *pl = exe->funcs[exe->entry].plan;
    CHECK(pl != NULL, "the dense chain is not planned: %s", exe->funcs[exe->entry].no_plan);
    if (pl) {
        CHECK(pl->n_bufs == 5, "%u buffers", pl->n_bufs);
        CHECK(pl->arena_bytes < sum_bytes(pl), "peak %llu, sum %llu",
              (unsigned long long)pl->arena_bytes, (unsigned long long)sum_bytes(pl));
        CHECK(pl->arena_bytes == 2 * 32 * 32 * 4 + 32 * 32 * 4 - 32 * 32 * 4 ||
                  pl->arena_bytes <= 3 * 32 * 32 * 4,
              "peak %llu", (unsigned long long)pl->arena_bytes);
    }
    same_as_unplanned(exe, "dense chain");
    vm_exec_free(exe);
}

/* relu and exp write over inputs that die; not over one used later. */
static void test_inplace(void) {
    VmExec *exe = compile_text(
        HDR "def @main(%x: Tensor[(16, 16), float32], %w: Tensor[(16, 16), float32]) {\n"
            "  %0 = nn.dense(%x, %w);\n  %1 = nn.relu(%0);\n  %2 = exp(%1);\n"
            "  %3 = nn.dense(%2, %w);\n  %4 = nn.relu(%3);\n  add(%4, %3)\n}\n",
        -1);
    if (exe == NULL) return;
    const VmPlan *pl = exe->funcs[exe->entry].plan;
    CHECK(pl != NULL, "not planned");
    if (pl && pl->n_sites == 6) {
        uint32_t b0 = site_buf(pl, 0), b1 = site_buf(pl, 1), b2 = site_buf(pl, 2);
        uint32_t b3 = site_buf(pl, 3), b4 = site_buf(pl, 4), b5 = site_buf(pl, 5);
        CHECK(b1 != VM_PLAN_NONE && pl->bufs[b1].inplace == b0, "relu not in place");
        CHECK(b2 != VM_PLAN_NONE && pl->bufs[b2].inplace == b1, "exp not in place");
        CHECK(b4 != VM_PLAN_NONE && pl->bufs[b4].inplace == VM_PLAN_NONE,
              "relu in place over a value used later");
        CHECK(b4 != VM_PLAN_NONE && pl->bufs[b4].offset != pl->bufs[b3].offset,
              "relu's output shares bytes with its live input");
        CHECK(b5 != VM_PLAN_NONE && pl->bufs[b5].inplace != VM_PLAN_NONE, "add not in place");
        CHECK(pl->n_inplace == 3, "%u in place", pl->n_inplace);
    } else if (pl) {
        CHECK(false, "%u sites", pl->n_sites);
    }
    same_as_unplanned(exe, "in place");
    vm_exec_free(exe);
}

/* Inside a fused function, a node may write in place over an input that the node is the last
 * to read, even when later nodes of the function run after it: the reshape of a product's
 * result (BERT's attention scores) copies nothing. An input that a later node of the function
 * still reads is not written over. */
static void test_inplace_input(void) {
    VmExec *exe = compile_text(
        HDR "def @main(%a: Tensor[(2, 8, 4), float32], %b: Tensor[(2, 4, 8), float32]) {\n"
            "  %0 = nn.batch_matmul(%a, %b);\n  %1 = reshape(%0, newshape=[1, 2, 8, 8]);\n"
            "  %2 = exp(%1);\n  nn.softmax(%2, axis=3)\n}\n",
        3);
    if (exe == NULL) return;
    const VmPlan *pl = exe->funcs[exe->entry].plan;
    CHECK(pl != NULL, "not planned");
    if (pl && pl->n_sites == 3 && pl->sites[1].n == 2) {
        uint32_t b0 = site_buf(pl, 0), r = site_buf(pl, 1);
        CHECK(r != VM_PLAN_NONE && pl->bufs[r].inplace == b0,
              "the reshape is not in place over the product's result");
    } else if (pl) {
        CHECK(false, "%u sites (%u slots at the second)", pl->n_sites,
              pl->n_sites > 1 ? pl->sites[1].n : 0);
    }
    same_as_unplanned(exe, "in place over an input");
    vm_exec_free(exe);
    /* %0 is read by the first reshape, then by the second after exp: the first may not be in
     * place over it (exp would then write over %0 before the second reshape reads it) */
    exe = compile_text(
        HDR "def @main(%x: Tensor[(8, 8), float32], %w: Tensor[(8, 8), float32]) {\n"
            "  %0 = nn.dense(%x, %w);\n  %1 = reshape(%0, newshape=[64]);\n  %2 = exp(%1);\n"
            "  %3 = reshape(%0, newshape=[1, 64]);\n  %4 = squeeze(%3, axis=[0]);\n"
            "  add(%2, %4)\n}\n",
        3);
    if (exe == NULL) return;
    same_as_unplanned(exe, "an input read again later");
    vm_exec_free(exe);
}

/* A concatenate whose inputs die there: each input (a fused relu over its convolution's
 * output, an in-place chain) is made inside the result's bytes (VM_PLAN_PIECE), so the
 * concatenate copies nothing; the validator accepts the plan and refuses a piece moved out of
 * its result or given a result that no concatenate makes. Not pieces: an input still read after
 * the concatenate, and inputs that are not contiguous runs of the result (axis 2). */
static void test_concat_pieces(void) {
    VmExec *exe = compile_text(
        HDR "def @main(%x: Tensor[(1, 8, 6, 6), float32], %w: Tensor[(16, 8, 1, 1), float32],\n"
            "          %v: Tensor[(16, 8, 3, 3), float32]) {\n"
            "  %0 = nn.relu(nn.conv2d(%x, %w, padding=[0, 0, 0, 0]));\n"
            "  %1 = nn.relu(nn.conv2d(%x, %v, padding=[1, 1, 1, 1]));\n"
            "  %2 = concatenate((%0, %1), axis=1);\n  nn.max_pool2d(%2, pool_size=[2, 2])\n}\n",
        3);
    if (exe == NULL) return;
    VmFunction *f = (VmFunction *)&exe->funcs[exe->entry];
    VmPlan *pl = (VmPlan *)f->plan;
    CHECK(pl != NULL, "not planned");
    uint32_t pieces = 0, piece = VM_PLAN_NONE;
    for (uint32_t b = 0; pl && b < pl->n_bufs; b++) {
        uint32_t r = vm_plan_piece_of(pl->bufs[b].inplace);
        if (r == VM_PLAN_NONE) continue;
        pieces++, piece = b;
        CHECK(r < pl->n_bufs && pl->bufs[b].offset >= pl->bufs[r].offset &&
                  pl->bufs[b].offset + pl->bufs[b].nbytes <=
                      pl->bufs[r].offset + pl->bufs[r].nbytes,
              "piece %u lies outside its result %u", b, r);
    }
    CHECK(pieces == 2, "%u pieces", pieces);
    char err[512];
    CHECK(vm_plan_validate(exe, f, err, sizeof err), "the plan does not validate: %s", err);
    if (piece != VM_PLAN_NONE) {
        VmPlanBuf *pb = (VmPlanBuf *)&pl->bufs[piece], saved = *pb;
        pb->offset += 64 * ((pl->bufs[vm_plan_piece_of(pb->inplace)].nbytes + 63) / 64);
        CHECK(!vm_plan_validate(exe, f, err, sizeof err), "a piece outside its result validates");
        *pb = saved;
        pb->inplace = (piece == 0 ? 1 : 0) | VM_PLAN_PIECE;
        CHECK(!vm_plan_validate(exe, f, err, sizeof err), "a piece of another buffer validates");
        *pb = saved;
    }
    same_as_unplanned(exe, "concatenate pieces");
    vm_exec_free(exe);
    static const char *const none[2] = {
        HDR "def @main(%x: Tensor[(1, 8, 6, 6), float32], %w: Tensor[(8, 8, 1, 1), float32],\n"
            "          %u: Tensor[(8, 16, 1, 1), float32]) {\n"
            "  %0 = nn.relu(nn.conv2d(%x, %w, padding=[0, 0, 0, 0]));\n"
            "  %1 = nn.relu(nn.conv2d(%0, %w, padding=[0, 0, 0, 0]));\n"
            "  %2 = concatenate((%0, %1), axis=1);\n"
            "  %3 = nn.relu(nn.conv2d(%2, %u, padding=[0, 0, 0, 0]));\n"
            "  %4 = nn.conv2d(%3, %w, padding=[0, 0, 0, 0]);\n  add(%4, %0)\n}\n",
        HDR "def @main(%x: Tensor[(1, 8, 6, 6), float32], %w: Tensor[(8, 8, 1, 1), float32],\n"
            "          %v: Tensor[(8, 8, 1, 1), float32]) {\n"
            "  %0 = nn.relu(nn.conv2d(%x, %w, padding=[0, 0, 0, 0]));\n"
            "  %1 = nn.relu(nn.conv2d(%x, %v, padding=[0, 0, 0, 0]));\n"
            "  nn.max_pool2d(concatenate((%0, %1), axis=2), pool_size=[2, 2])\n}\n"};
    for (int i = 0; i < 2; i++) {
        exe = compile_text(none[i], 3);
        if (exe == NULL) return;
        pl = (VmPlan *)exe->funcs[exe->entry].plan;
        for (uint32_t b = 0; pl && b < pl->n_bufs; b++)
            CHECK(vm_plan_piece_of(pl->bufs[b].inplace) == VM_PLAN_NONE,
                  "program %d: buffer %u is a piece", i, b);
        same_as_unplanned(exe, i ? "a concatenate along axis 2" : "inputs read again");
        vm_exec_free(exe);
    }
}

/* A primitive function that only squeezes a field of a split runs as a view (VM_RESHAPE_TENSOR,
 * no packed call); the split's outputs are pieces of its input (it dies there), which the
 * validator accepts, and refuses once a piece is moved out of it; the planned run equals the
 * unplanned one. */
static void test_view_calls(void) {
    VmExec *exe = compile_text(
        HDR "def @main(%x: Tensor[(2, 1, 8), float32], %w: Tensor[(16, 8), float32],\n"
            "          %h: Tensor[(1, 16), float32], %v: Tensor[(16, 16), float32]) {\n"
            "  %0 = split(nn.dense(%x, %w), indices_or_sections=2, axis=0);\n"
            "  %1 = tanh(add(nn.dense(%h, %v), squeeze(%0.0, axis=[0])));\n"
            "  tanh(add(nn.dense(%1, %v), squeeze(%0.1, axis=[0])))\n}\n",
        3);
    if (exe == NULL) return;
    const VmFunction *f = &exe->funcs[exe->entry];
    uint32_t views = 0;
    for (uint32_t pc = 0; pc < f->n_code; pc++)
        views += f->code[pc].op == VM_RESHAPE_TENSOR;
    for (uint32_t i = 0; i < exe->n_packed; i++)
        CHECK(strcmp(exe->packed[i].name, "fused_squeeze") != 0, "a squeeze is a packed call");
    CHECK(views == 2, "%u views", views);
    VmPlan *pl = (VmPlan *)f->plan;
    uint32_t pieces = 0, piece = VM_PLAN_NONE;
    for (uint32_t b = 0; pl && b < pl->n_bufs; b++)
        if (vm_plan_piece_of(pl->bufs[b].inplace) != VM_PLAN_NONE) pieces++, piece = b;
    CHECK(pieces == 2, "%u pieces of the split's input", pieces);
    char err[512];
    CHECK(vm_plan_validate(exe, f, err, sizeof err), "the plan does not validate: %s", err);
    if (piece != VM_PLAN_NONE) {
        VmPlanBuf *pb = (VmPlanBuf *)&pl->bufs[piece], saved = *pb;
        pb->offset += 64 * ((pl->bufs[vm_plan_piece_of(pb->inplace)].nbytes + 63) / 64);
        CHECK(!vm_plan_validate(exe, f, err, sizeof err), "a split piece outside its input");
        *pb = saved;
    }
    same_as_unplanned(exe, "view calls");
    vm_exec_free(exe);
}

/* A branch on a scalar: both arms planned, the join's value lives past both. */
static void test_branch(void) {
    const char *text = HDR "def @main(%c: bool, %x: Tensor[(8, 8), float32]) {\n"
                           "  %0 = nn.dense(%x, %x);\n"
                           "  %1 = if (%c) { nn.relu(nn.dense(%0, %x)) } else { exp(%0) };\n"
                           "  add(%1, %0)\n}\n";
    for (int level = -1; level <= 3; level += 4) {
        VmExec *exe = compile_text(text, level);
        if (exe == NULL) continue;
        const VmPlan *pl = exe->funcs[exe->entry].plan;
        CHECK(pl != NULL, "the branch is not planned: %s", exe->funcs[exe->entry].no_plan);
        for (unsigned c = 0; c < 2; c++) { /* input() gives c = 0 (false); flip by hand too */
            same_as_unplanned(exe, c ? "branch (true)" : "branch (false)");
        }
        vm_exec_free(exe);
    }
}

/* A recursive function is not planned; the entry calling it still is. */
static void test_recursive(void) {
    VmExec *exe = compile_text(
        HDR "def @f(%n: int32, %x: Tensor[(4, 4), float32]) -> Tensor[(4, 4), float32] {\n"
            "  if (%n == 0) { %x } else { @f(%n - 1, exp(%x) * 0.5f) }\n}\n"
            "def @main(%x: Tensor[(4, 4), float32]) {\n"
            "  %0 = nn.dense(%x, %x);\n  %1 = @f(3, %0);\n  nn.relu(%1 + %0)\n}\n",
        -1);
    if (exe == NULL) return;
    uint32_t f = find_func(exe, "f");
    CHECK(f != UINT32_MAX && exe->funcs[f].plan == NULL && exe->funcs[f].no_plan &&
              strstr(exe->funcs[f].no_plan, "recursive"),
          "@f: %s", f != UINT32_MAX && exe->funcs[f].no_plan ? exe->funcs[f].no_plan : "planned");
    CHECK(exe->funcs[exe->entry].plan != NULL, "@main not planned: %s",
          exe->funcs[exe->entry].no_plan);
    same_as_unplanned(exe, "recursive");
    vm_exec_free(exe);
}

/* The CNN: a planned entry, no tensor allocation and no kernel scratch malloc per run after the
 * first (the VM's workspace grows to the kernels' scratch on the first run). */
static void test_cnn(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/layout_cnn.onnx", data_dir);
    Ctx *ctx = NULL;
    rly_ctx_new(&ctx);
    rly_module *m = NULL;
    if (rly_module_import_onnx(ctx, path, NULL, &m) != RLY_STATUS_OK) {
        CHECK(false, "%s: %s", path, rly_last_error());
        rly_ctx_free(ctx);
        return;
    }
    VmExec *exe = compile_module(m, 3);
    rly_ctx_free(ctx);
    if (exe == NULL) return;
    const VmPlan *pl = exe->funcs[exe->entry].plan;
    CHECK(pl != NULL, "the CNN is not planned: %s", exe->funcs[exe->entry].no_plan);
    if (pl) CHECK(pl->arena_bytes < sum_bytes(pl), "no reuse in the CNN");
    RunCounts rc = {.allocs = {0}};
    char *a = run_counted(exe, 3, false, &rc);
    CHECK(rc.allocs[1] == 0, "%llu tensor allocations in the second run",
          (unsigned long long)rc.allocs[1]);
    CHECK(rc.scratch[0] > 0, "the first run takes no kernel scratch: the counter is broken");
    CHECK(rc.scratch[1] == 0, "%llu kernel scratch mallocs in the second run",
          (unsigned long long)rc.scratch[1]);
    uint64_t allocs_off = 0;
    char *b = run_text(exe, 3, true, &allocs_off);
    CHECK(allocs_off > 0, "the unplanned run allocates nothing: the counter is broken");
    CHECK(strcmp(a, b) == 0, "the planned CNN differs");
    free(a);
    free(b);
    vm_exec_free(exe);
}

/* A CNN in text with conv2d, batch_norm, pools, dense and softmax, at -O0 (batch_norm a kernel)
 * and -O3 (fused): planned, and after the first run no tensor allocation, no scratch malloc. */
static void test_cnn_text(int level) {
    VmExec *exe = compile_text(
        HDR "def @main(%x: Tensor[(2, 3, 8, 8), float32], %w: Tensor[(8, 3, 3, 3), float32],\n"
            "          %g: Tensor[(8), float32], %b: Tensor[(8), float32],\n"
            "          %mm: Tensor[(8), float32], %mv: Tensor[(8), float32],\n"
            "          %dw: Tensor[(10, 32), float32]) {\n"
            "  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]);\n"
            "  %1 = nn.batch_norm(%0, %g, %b, %mm, abs(%mv));\n"
            "  %2 = nn.relu(%1.0);\n"
            "  %3 = nn.max_pool2d(%2, pool_size=[2, 2], strides=[2, 2]);\n"
            "  %4 = nn.avg_pool2d(%3, pool_size=[2, 2], strides=[2, 2]);\n"
            "  %5 = nn.batch_flatten(%4);\n"
            "  %6 = nn.dense(%5, %dw);\n"
            "  %7 = nn.softmax(%6);\n"
            "  %8 = sum(%7, axis=[1]);\n"
            "  (%7, %8)\n"
            "}\n",
        level);
    if (exe == NULL) return;
    CHECK(exe->funcs[exe->entry].plan != NULL, "-O%d: the CNN is not planned: %s", level,
          exe->funcs[exe->entry].no_plan);
    RunCounts rc = {.allocs = {0}};
    char *a = run_counted(exe, 3, false, &rc);
    CHECK(rc.allocs[1] == 0, "-O%d: %llu tensor allocations in the second run", level,
          (unsigned long long)rc.allocs[1]);
    CHECK(rc.scratch[0] > 0, "-O%d: the first run takes no kernel scratch", level);
    CHECK(rc.scratch[1] == 0, "-O%d: %llu kernel scratch mallocs in the second run", level,
          (unsigned long long)rc.scratch[1]);
    /* unplanned, the workspace is reused all the same */
    RunCounts ru = {.allocs = {0}};
    char *b = run_counted(exe, 3, true, &ru);
    CHECK(ru.scratch[1] == 0, "-O%d unplanned: %llu scratch mallocs in the second run", level,
          (unsigned long long)ru.scratch[1]);
    CHECK(strcmp(a, b) == 0, "-O%d: the planned CNN differs:\n%.300s\n%.300s", level, a, b);
    free(a);
    free(b);
    vm_exec_free(exe);
}

/* A convolution's group whose result only a max pool reads runs as one kernel (vm_pair.c,
 * kern_fast_conv_maxpool) at AVX-512: taken on the parameter's chain, the same bits as the two
 * calls (RLY_VM_PAIRS=0), planned or not; on the chain whose input is a planned buffer the pool's
 * result lies over it, and the pair then runs as the two calls (17 pool rows: two bands, the
 * second reading input rows the first band's result would have overwritten). */
static void test_conv_pool_pair(void) {
    VmExec *exe = compile_text(
        HDR "def @main(%x: Tensor[(2, 3, 71, 71), float32], %w: Tensor[(48, 3, 3, 3), float32],\n"
            "          %b: Tensor[(48, 1, 1), float32]) {\n"
            "  %0 = nn.relu(add(nn.conv2d(%x, %w, strides=[2, 2]), %b));\n"
            "  %1 = nn.max_pool2d(%0, pool_size=[3, 3], strides=[2, 2], ceil_mode=True);\n"
            "  %2 = nn.relu(add(%b, nn.conv2d(nn.relu(%x), %w, strides=[2, 2])));\n"
            "  %3 = nn.max_pool2d(%2, pool_size=[3, 3], strides=[2, 2]);\n"
            "  (%1, %3)\n"
            "}\n",
        3);
    if (exe == NULL) return;
    uint64_t n0 = kern_conv_maxpool_taken();
    char *a = run_text(exe, 2, false, NULL), *b = run_text(exe, 1, true, NULL);
    if (sup_isa() == SUP_ISA_AVX512 && getenv("RLY_KERNELS") == NULL)
        CHECK(kern_conv_maxpool_taken() >= n0 + 3, "the pair ran %llu times in 3 runs",
              (unsigned long long)(kern_conv_maxpool_taken() - n0));
    setenv("RLY_VM_PAIRS", "0", 1);
    uint64_t n1 = kern_conv_maxpool_taken();
    char *c = run_text(exe, 1, false, NULL);
    CHECK(kern_conv_maxpool_taken() == n1, "RLY_VM_PAIRS=0: the pair ran");
    unsetenv("RLY_VM_PAIRS");
    CHECK(strcmp(a, b) == 0, "the pair planned and not differ:\n%.300s\n%.300s", a, b);
    CHECK(strcmp(a, c) == 0, "the pair and the two calls differ:\n%.300s\n%.300s", a, c);
    free(a), free(b), free(c);
    vm_exec_free(exe);
}

/* k_scratch itself: from the workspace while it fits, 64-byte aligned and zeroed; past it, a
 * counted malloc; marks give scratch back; scratch_need is the peak. */
static void test_scratch_api(void) {
    static _Alignas(64) uint8_t ws[256];
    memset(ws, 0xAB, sizeof ws);
    char err[128] = "";
    KCall kc = {.op = "test", .err = err, .err_cap = sizeof err, .ws = ws, .ws_cap = sizeof ws};
    uint64_t m0 = k_scratch_mallocs();
    uint8_t *a = k_scratch(&kc, 100); /* 128 of the workspace */
    CHECK(a == ws && a[0] == 0 && a[99] == 0, "the first scratch is not the zeroed workspace");
    KScratchMark mk = k_scratch_mark(&kc);
    uint8_t *b = k_scratch(&kc, 64), *c = k_scratch(&kc, 200); /* 64 fits, 200 does not */
    CHECK(b == ws + 128, "the second scratch is not next in the workspace");
    CHECK(c != NULL && (c < ws || c >= ws + sizeof ws), "too big a scratch is in the workspace");
    CHECK(c != NULL && (uintptr_t)c % 64 == 0, "a fallback block is not 64-byte aligned");
    CHECK(c != NULL && c[0] == 0 && c[199] == 0, "a fallback block is not zeroed");
    if (c) memset(c, 1, 200); /* ASan: the whole block is ours */
    CHECK(k_scratch_mallocs() - m0 == 1, "%llu fallback mallocs, not 1",
          (unsigned long long)(k_scratch_mallocs() - m0));
    CHECK(kc.scratch_need == 128 + 64 + 256, "need %zu", kc.scratch_need);
    k_scratch_reset(&kc, mk); /* frees c, gives back b */
    CHECK(kc.heap == NULL && kc.ws_used == 128, "the reset kept %zu bytes", kc.ws_used);
    uint8_t *d = k_scratch(&kc, 64);
    CHECK(d == ws + 128 && d[0] == 0, "scratch after a reset is not reused, zeroed");
    CHECK(k_scratch_n(&kc, INT64_MAX, 8) == NULL && strstr(err, "out of memory"),
          "an overflowing count: %s", err);
    CHECK(k_scratch_n(&kc, -1, 8) == NULL, "a negative count is accepted");
    (void)k_scratch(&kc, 1000); /* left for k_call_release (ASan's leak check) */
    k_call_release(&kc);
    CHECK(kc.heap == NULL && kc.ws_used == 0 && kc.scratch_cur == 0, "release left scratch");
    CHECK(kc.scratch_need == 128 + 64 + 1024, "the peak is %zu", kc.scratch_need);
}

static DLTensor *dense_out;
static RtTensor *dense_t; /* dense_out's tensor */
static int dense_alloc(KCall *kc, uint32_t i, rly_dtype dt, uint32_t ndim, const int64_t *shape) {
    char err[128];
    RtTensor *t = rt_tensor_new(dt, ndim, shape, err, sizeof err);
    if (t == NULL) return k_error(kc, "%s", err);
    dense_t = t;
    kc->out[i] = dense_out = &t->t;
    return 0;
}

/* nn.dense (its GEMM packs panels in scratch) with no workspace, too small a one and one of the
 * measured size: the same result, a naive product's; mallocs only where the workspace is short. */
static void test_scratch_dense(void) {
    enum { M = 9, K = 300, N = 37 }; /* K past one GEMM block */
    int64_t xs[2] = {M, K}, ws_shape[2] = {N, K};
    char err[256] = "";
    RtTensor *x = rt_tensor_new(RLY_DTYPE_F32, 2, xs, err, sizeof err);
    RtTensor *w = rt_tensor_new(RLY_DTYPE_F32, 2, ws_shape, err, sizeof err);
    if (x == NULL || w == NULL) {
        CHECK(false, "%s", err);
        return;
    }
    float *xp = rt_tensor_data(x), *wp = rt_tensor_data(w);
    for (int i = 0; i < M * K; i++)
        xp[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    for (int i = 0; i < N * K; i++)
        wp[i] = (float)((i * 11) % 13) / 6.0f - 1.0f;
    KernelFn fn = kern_ref_lookup(OP_ID_NN_DENSE);
    KAttr attrs[2] = {{.name = "units", .kind = KA_NONE},
                      {.name = "out_dtype", .kind = KA_INT, .i = -1, .f = -1}};
    const DLTensor *in[2] = {&x->t, &w->t};
    uint32_t start[2] = {0, 1}, len[2] = {1, 1};
    uint8_t tup[2] = {0, 0};
    size_t need = 0;
    uint8_t *ws = NULL;
    for (int mode = 0; mode < 3; mode++) { /* none, half the need, the need */
        DLTensor *out[1] = {NULL};
        size_t cap = mode == 0 ? 0 : mode == 1 ? (need / 2 + 63) / 64 * 64 : need;
        if (mode > 0) ws = aligned_alloc(64, cap ? cap : 64);
        KCall kc = {.op = "nn.dense",
                    .attrs = attrs,
                    .n_attrs = 2,
                    .n_args = 2,
                    .arg_start = start,
                    .arg_len = len,
                    .arg_tuple = tup,
                    .in = in,
                    .n_in = 2,
                    .out = out,
                    .n_out = 1,
                    .alloc = dense_alloc,
                    .err = err,
                    .err_cap = sizeof err,
                    .ws = ws,
                    .ws_cap = cap};
        dense_out = NULL;
        dense_t = NULL;
        uint64_t m0 = k_scratch_mallocs();
        int r = fn(&kc);
        k_call_release(&kc);
        uint64_t mallocs = k_scratch_mallocs() - m0;
        CHECK(r == 0, "dense with workspace mode %d: %s", mode, err);
        if (mode == 0) need = kc.scratch_need;
        CHECK(kc.scratch_need == need && need > 0, "mode %d: need %zu, then %zu", mode, need,
              kc.scratch_need);
        CHECK(mode == 2 ? mallocs == 0 : mallocs > 0, "mode %d: %llu scratch mallocs", mode,
              (unsigned long long)mallocs);
        double worst = 0;
        for (int i = 0; r == 0 && dense_out && i < M; i++)
            for (int j = 0; j < N; j++) {
                double acc = 0;
                for (int p = 0; p < K; p++)
                    acc += (double)xp[i * K + p] * wp[j * K + p];
                double got = ((const float *)dense_out->data)[i * N + j];
                double e = fabs(got - acc);
                if (e > worst) worst = e;
            }
        CHECK(dense_out != NULL && worst < 1e-3, "mode %d: dense is off by %g", mode, worst);
        if (dense_t) rt_release(&dense_t->hdr);
        free(ws);
        ws = NULL;
    }
    rt_release(&x->hdr);
    rt_release(&w->hdr);
}

/* k_attr remembers where (operator, name) was found; rows in another order, or fewer rows, for
 * the same operator still give the right row. */
static void test_attr_positions(void) {
    const char *op = "test.attr_op"; /* one operator name pointer for every call */
    KAttr ab[3] = {{.name = "alpha", .kind = KA_INT, .i = 1},
                   {.name = "beta", .kind = KA_INT, .i = 2},
                   {.name = "gamma", .kind = KA_INT, .i = 3}};
    KAttr ba[2] = {{.name = "gamma", .kind = KA_INT, .i = 30},
                   {.name = "alpha", .kind = KA_INT, .i = 10}};
    KCall k1 = {.op = op, .attrs = ab, .n_attrs = 3}, k2 = {.op = op, .attrs = ba, .n_attrs = 2};
    for (int round = 0; round < 3; round++) {
        CHECK(k_int(&k1, "gamma") == 3 && k_int(&k1, "alpha") == 1 && k_int(&k1, "beta") == 2,
              "round %d: the schema-ordered rows read wrong", round);
        CHECK(k_int(&k2, "gamma") == 30 && k_int(&k2, "alpha") == 10,
              "round %d: the reordered rows read wrong", round);
    }
}

int main(int argc, char **argv) {
    data_dir = argc > 1 ? argv[1] : "tests/unit/data";
    test_reuse();
    test_inplace();
    test_inplace_input();
    test_concat_pieces();
    test_view_calls();
    test_branch();
    test_recursive();
    test_cnn();
    test_cnn_text(0);
    test_cnn_text(3);
    test_conv_pool_pair();
    test_scratch_api();
    test_scratch_dense();
    test_attr_positions();
    return check_summary();
}
