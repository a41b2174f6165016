/* vm_print.c - vm_print_value: the text of a VM value, as the interpreter's ev_print_value
 * writes it (both are rt_print_value, runtime/print.h), with constructor names from the
 * executable (RtAdt.ctor points at one of exe->ctors). */
#include "runtime/print.h"
#include "runtime/vm_impl.h"

static const char *vm_ctor_name(const void *ctor, const void *ud) {
    const VmExec *exe = ud;
    const VmCtor *ct = ctor;
    bool known = exe != NULL && ct != NULL && ct >= exe->ctors && ct < exe->ctors + exe->n_ctors;
    return known ? ct->name : NULL;
}

void vm_print_value(const VmExec *exe, const Value *root, size_t max_elems, StrBuf *out) {
    rt_print_value(root, max_elems, vm_ctor_name, exe, out);
}
