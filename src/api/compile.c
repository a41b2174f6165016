/* compile.c - executables in the public API: rly_module_compile (the optimizer, then the VM
 * compiler of src/backend), rly_executable_save, and rly_executable_describe, which counts an
 * executable's parts (`rly compile --stats`) and shows its bytecode (`--disasm`, be_disasm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "backend/backend.h"
#include "passes/passes.h"
#include "runtime/session.h"
#include "types/types.h"

RLY_API rly_status rly_module_compile(rly_module *mod, int opt_level, const char *entry,
                                      rly_executable **out) {
    if (out) *out = NULL;
    if (mod == NULL || out == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_module_compile: NULL argument");
    if (opt_level < 0 || opt_level > 3)
        return api_fail(RLY_STATUS_INVALID, "rly_module_compile: opt level %d is not 0..3",
                        opt_level);
    Ctx *ctx = mod->ctx;
    rly_status st = RLY_STATUS_OK;
    RLY_TRY;
    PassOptions po = {.opt_level = opt_level};
    VmExec *exe = NULL;
    if (!ir_well_formed(mod) ||
        !(opt_level > 0 ? pass_run(mod, &po) : pass_module_typed(mod) || ty_infer_module(mod)) ||
        (exe = be_compile(mod, mod->is_expr ? NULL : entry)) == NULL)
        st = api_fail_diags(ctx);
    else
        *out = rt_executable_wrap(exe);
    RLY_END_TRY;
    return st;
}

#define PREPARE_SECONDS 10.0

RLY_API rly_status rly_executable_save(const rly_executable *exe, const char *path) {
    return rly_executable_save_with(exe, path, 0);
}

RLY_API rly_status rly_executable_save_with(const rly_executable *exe, const char *path,
                                            unsigned flags) {
    if (exe == NULL || path == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_executable_save: NULL argument");
    if (flags & ~(unsigned)RLY_SAVE_NO_PREPACK)
        return api_fail(RLY_STATUS_INVALID, "rly_executable_save_with: unknown flags 0x%x", flags);
    char err[1024] = "";
    if (!(flags & RLY_SAVE_NO_PREPACK)) /* not possible (a `?` input): packed at first use */
        (void)vm_exec_prepare(exe->exe, PREPARE_SECONDS, err, sizeof err);
    if (!vm_exec_save_with(exe->exe, path, !(flags & RLY_SAVE_NO_PREPACK), err, sizeof err))
        return api_fail(RLY_STATUS_ERROR, "%s", err[0] ? err : "cannot save the executable");
    return RLY_STATUS_OK;
}

/* ---- describing --------------------------------------------------------------------------- */

static uint64_t tensor_bytes(const Value *v) {
    if (v == NULL || v->kind != VAL_TENSOR) return 0;
    const RtTensor *t = RT_TENSOR(v);
    return (uint64_t)k_numel(&t->t) * sup_dtype_size(rt_tensor_dtype(t));
}

/* Memory plans (vm.h, "memory plans"): the entry's arena (its peak activation bytes) against
 * the sum of its buffers, all plans together, and why the functions without one have none. */
static void plan_stats(const VmExec *e, StrBuf *sb) {
    uint64_t arena_all = 0, sum_all = 0, n_bufs = 0, n_inplace = 0;
    uint32_t n_planned = 0;
    for (uint32_t f = 0; f < e->n_funcs; f++) {
        const VmPlan *pl = e->funcs[f].plan;
        if (pl == NULL) continue;
        n_planned++;
        arena_all += pl->arena_bytes;
        n_bufs += pl->n_bufs;
        n_inplace += pl->n_inplace;
        for (uint32_t b = 0; b < pl->n_bufs; b++)
            sum_all += pl->bufs[b].nbytes;
    }
    const VmPlan *ep = e->entry < e->n_funcs ? e->funcs[e->entry].plan : NULL;
    if (ep != NULL) {
        uint64_t sum = 0;
        for (uint32_t b = 0; b < ep->n_bufs; b++)
            sum += ep->bufs[b].nbytes;
        sb_printf(sb, "peak activation bytes (entry arena): %llu (all its %u buffers: %llu)\n",
                  (unsigned long long)ep->arena_bytes, ep->n_bufs, (unsigned long long)sum);
    } else {
        sb_puts(sb, "peak activation bytes (entry arena): none (the entry is not planned)\n");
    }
    sb_printf(sb,
              "memory plans: %u of %u functions, arenas %llu bytes, %llu planned buffers "
              "(%llu bytes), %llu calls in place\n",
              n_planned, e->n_funcs, (unsigned long long)arena_all, (unsigned long long)n_bufs,
              (unsigned long long)sum_all, (unsigned long long)n_inplace);
    for (uint32_t f = 0; f < e->n_funcs; f++) {
        const VmFunction *fn = &e->funcs[f];
        if (fn->plan != NULL) continue;
        sb_printf(sb, "  not planned: @%s: %s\n", fn->name ? fn->name : "?",
                  fn->no_plan ? fn->no_plan : "no plan in the file");
    }
}

static void stats(const VmExec *e, StrBuf *sb) {
    uint64_t n_code = 0, n_regs = 0, n_nodes = 0, n_calls = 0, n_storage = 0, storage_bytes = 0;
    uint64_t n_scalar = 0, const_bytes = 0;
    for (uint32_t f = 0; f < e->n_funcs; f++) {
        const VmFunction *fn = &e->funcs[f];
        n_code += fn->n_code;
        n_regs += fn->n_regs;
        for (uint32_t i = 0; i < fn->n_code; i++) {
            if (fn->code[i].op == VM_ALLOC_STORAGE) {
                n_storage++;
                storage_bytes += (uint64_t)fn->code[i].imm;
            }
            n_scalar += fn->code[i].op == VM_SCALAR;
        }
    }
    for (uint32_t p = 0; p < e->n_packed; p++) {
        n_nodes += e->packed[p].n_nodes;
        for (uint32_t k = 0; k < e->packed[p].n_nodes; k++)
            n_calls += e->packed[p].nodes[k].kind == VM_NODE_CALL;
    }
    for (uint32_t c = 0; c < e->n_consts; c++)
        const_bytes += tensor_bytes(e->consts[c]);
    sb_printf(sb, "functions: %u\n", e->n_funcs);
    sb_printf(sb, "instructions: %llu (%llu scalar)\n", (unsigned long long)n_code,
              (unsigned long long)n_scalar);
    sb_printf(sb, "registers: %llu\n", (unsigned long long)n_regs);
    sb_printf(sb, "packed functions: %u (%llu operator calls in %llu nodes)\n", e->n_packed,
              (unsigned long long)n_calls, (unsigned long long)n_nodes);
    sb_printf(sb, "constants: %u (%llu bytes)\n", e->n_consts, (unsigned long long)const_bytes);
    size_t n_prep = 0;
    uint64_t prep_bytes = 0;
    KPrepItem *items = k_prep_cache_list(e->prep, &n_prep);
    for (size_t i = 0; i < n_prep; i++)
        prep_bytes += items[i].bytes;
    free(items);
    sb_printf(sb, "prepared constants: %zu (%llu bytes)\n", n_prep, (unsigned long long)prep_bytes);
    sb_printf(sb, "constructors: %u\n", e->n_ctors);
    sb_printf(sb, "inputs: %u, outputs: %u\n", e->n_inputs, e->n_outputs);
    (void)n_storage, (void)storage_bytes; /* VM_ALLOC_STORAGE stays reserved: plans are tables */
    plan_stats(e, sb);
}

RLY_API rly_status rly_executable_describe(const rly_executable *exe, int what, char **out) {
    if (out) *out = NULL;
    if (exe == NULL || out == NULL)
        return api_fail(RLY_STATUS_INVALID, "rly_executable_describe: NULL argument");
    if (what & ~(RLY_DESCRIBE_STATS | RLY_DESCRIBE_DISASM))
        return api_fail(RLY_STATUS_INVALID, "rly_executable_describe: unknown bits in %d", what);
    StrBuf sb = {0};
    if (what & RLY_DESCRIBE_DISASM) be_disasm(exe->exe, &sb);
    if (what & RLY_DESCRIBE_STATS) stats(exe->exe, &sb);
    *out = sb_take(&sb);
    if (*out == NULL) *out = strdup("");
    return RLY_STATUS_OK;
}
