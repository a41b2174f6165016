/* misc.c - reference kernels of the misc operators (see src/ops/op_misc.c): the annotations and
 * debug, which return their argument unchanged. The argument may be a tensor or a tuple (the
 * caller flattens its fields into in[] and expects the same fields back in out[]), so the kernel
 * copies each input tensor into the output of the same position. debug's debug_func is a hook
 * for the caller; the kernel ignores it. */
#include <string.h>

#include "kernels/kernel.h"

static int identity(KCall *kc) {
    if (kc->n_out != kc->n_in)
        return k_error(kc, "the result has %u field%s but the argument %u", kc->n_out,
                       kc->n_out == 1 ? "" : "s", kc->n_in);
    for (uint32_t i = 0; i < kc->n_in; i++) {
        const DLTensor *x = kc->in[i];
        rly_dtype dt = k_dtype(x);
        DLTensor *y = k_out(kc, i, dt, (uint32_t)x->ndim, x->shape);
        if (y == NULL) return -1;
        size_t bytes = (size_t)k_numel(x) * sup_dtype_size(dt);
        if (bytes > 0 && k_ptr(y) != k_ptr(x)) memcpy(k_ptr(y), k_ptr(x), bytes);
    }
    return 0;
}

static int trap(KCall *kc) {
    const char *msg = k_str(kc, "message");
    return k_error(kc, "%s", msg ? msg : "unreachable");
}

const KernelDef kern_ref_misc[] = {
    {"trap", trap},
    {"annotation.stop_fusion", identity},
    {"annotation.checkpoint", identity},
    {"debug", identity},
    {NULL, NULL},
};
