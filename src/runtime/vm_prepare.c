/* vm_prepare.c - vm_exec_prepare: the kernels prepare what they derive from constants (packed
 * weights, kernel.h k_prepared) before an executable is saved, by one run of the entry on
 * zero-filled inputs. The run asks each kernel for exactly what it will ask for later (the same
 * calls, shapes and attributes, on the same instruction-set level), so the file's section PREP
 * holds the kernels' own layouts, keyed as they look them up. */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/vm.h"

int64_t vm_exec_prepare(VmExec *exe, double seconds, char *why, size_t cap) {
    if (exe->prep == NULL) {
        snprintf(why, cap, "the executable is not bound to kernels");
        return -1;
    }
    if (exe->entry >= exe->n_funcs) {
        snprintf(why, cap, "the executable has no entry");
        return -1;
    }
    for (uint32_t i = 0; i < exe->n_inputs; i++) {
        const VmTypeDesc *t = &exe->in_types[i];
        if (!t->is_tensor) {
            snprintf(why, cap, "input %u (%s) is not a tensor", i, t->text ? t->text : "a value");
            return -1;
        }
        for (uint32_t d = 0; d < t->ndim; d++)
            if (t->shape[d] < 0) {
                snprintf(why, cap, "input %u (%s) has a `?` dim", i, t->text ? t->text : "?");
                return -1;
            }
    }
    Value **args = sup_calloc(exe->n_inputs ? exe->n_inputs : 1, sizeof *args);
    Vm *vm = vm_new(exe);
    RtLimits lim = rt_limits_default();
    lim.timeout = seconds;
    vm_set_limits(vm, &lim);
    bool ok = true;
    char err[512];
    for (uint32_t i = 0; i < exe->n_inputs && ok; i++) {
        const VmTypeDesc *t = &exe->in_types[i];
        RtTensor *x = rt_tensor_new((rly_dtype)t->dtype, t->ndim, t->shape, err, sizeof err);
        if (x == NULL)
            ok = false; /* too large for memory: nothing is prepared */
        else
            args[i] = &x->hdr;
    }
    if (ok) rt_release(vm_invoke(vm, exe->entry, exe->n_inputs, args, err, sizeof err));
    for (uint32_t i = 0; i < exe->n_inputs; i++)
        rt_release(args[i]);
    free(args);
    vm_free(vm);
    size_t n = 0;
    free(k_prep_cache_list(exe->prep, &n));
    return (int64_t)n;
}
