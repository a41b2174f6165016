/* test_vm_plan.c - the VM's static memory plans (docs/vm.md, "Memory planning"): buffers
 * reused across disjoint lifetimes (peak below the sum), in place only where the input dies,
 * a function with a branch, a recursive function left unplanned, planned and unplanned runs
 * bit for bit equal, and a CNN (tests/unit/data/layout_cnn.onnx) that makes no tensor
 * allocation per run after the first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "backend/backend.h"
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
static char *run_text(VmExec *exe, int runs, bool strip, uint64_t *allocs_after_first) {
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
        uint64_t a0 = rt_tensor_new_count();
        Value *v = vm_invoke(vm, exe->entry, exe->n_inputs, args, err, sizeof err);
        if (r == 1 && allocs_after_first) *allocs_after_first = rt_tensor_new_count() - a0;
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

/* The CNN: a planned entry, no tensor allocation per run after the first. (Kernel scratch
 * still comes from malloc: see docs/vm.md, "Memory planning".) */
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
    uint64_t allocs = 1;
    char *a = run_text(exe, 3, false, &allocs);
    CHECK(allocs == 0, "%llu tensor allocations in the second run", (unsigned long long)allocs);
    uint64_t allocs_off = 0;
    char *b = run_text(exe, 3, true, &allocs_off);
    CHECK(allocs_off > 0, "the unplanned run allocates nothing: the counter is broken");
    CHECK(strcmp(a, b) == 0, "the planned CNN differs");
    free(a);
    free(b);
    vm_exec_free(exe);
}

int main(int argc, char **argv) {
    data_dir = argc > 1 ? argv[1] : "tests/unit/data";
    test_reuse();
    test_inplace();
    test_branch();
    test_recursive();
    test_cnn();
    return check_summary();
}
