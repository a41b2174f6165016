/* vm_validate.c - an executable's checks and kernel binding (vm.h): vm_exec_validate proves
 * every index, kind and jump once so that the run loop (vm.c) never checks bounds; the kernel
 * registry binds each packed node to a kernel; scalar kinds and boxes; vm_exec_free. */
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>

#include "kernels/fast/fast.h"
#include "runtime/vm_impl.h"

/* ---- scalar kinds ---------------------------------------------------------------------------- */

rly_dtype vm_rk_dtype(uint8_t rk) {
    switch (rk) {
    case VM_RK_BOOL: return RLY_DTYPE_BOOL;
    case VM_RK_I32: return RLY_DTYPE_I32;
    case VM_RK_I64: return RLY_DTYPE_I64;
    case VM_RK_F32: return RLY_DTYPE_F32;
    case VM_RK_F64: return RLY_DTYPE_F64;
    default: RLY_UNREACHABLE();
    }
}

uint8_t vm_rk_of_dtype(rly_dtype dt) {
    switch (dt) {
    case RLY_DTYPE_BOOL: return VM_RK_BOOL;
    case RLY_DTYPE_I32: return VM_RK_I32;
    case RLY_DTYPE_I64: return VM_RK_I64;
    case RLY_DTYPE_F32: return VM_RK_F32;
    case RLY_DTYPE_F64: return VM_RK_F64;
    default: return VM_RK_VALUE;
    }
}

Value *vm_box(uint8_t rk, VmReg r, char *err, size_t cap) {
    RtTensor *t = rt_tensor_new(vm_rk_dtype(rk), 0, NULL, err, cap);
    if (t == NULL) return NULL;
    void *p = rt_tensor_data(t);
    switch (rk) {
    case VM_RK_BOOL: *(uint8_t *)p = r.i != 0; break;
    case VM_RK_I32: *(int32_t *)p = (int32_t)r.i; break;
    case VM_RK_I64: *(int64_t *)p = r.i; break;
    case VM_RK_F32: *(float *)p = r.f; break;
    default: *(double *)p = r.d; break;
    }
    return &t->hdr;
}

/* "Tensor[(2, 3), float32]", "a tuple", ... for messages. */
static void describe(const Value *v, char *buf, size_t cap) {
    if (v == NULL) {
        snprintf(buf, cap, "no value");
        return;
    }
    switch (v->kind) {
    case VAL_TENSOR: {
        char s[256];
        snprintf(buf, cap, "Tensor[%s, %s]", k_shape_str(&RT_TENSOR(v)->t, s, sizeof s),
                 sup_dtype_name(rt_tensor_dtype(RT_TENSOR(v))));
        return;
    }
    case VAL_TUPLE: snprintf(buf, cap, "a tuple"); return;
    case VAL_CLOSURE: snprintf(buf, cap, "a function"); return;
    case VAL_ADT: snprintf(buf, cap, "a constructor value"); return;
    default: snprintf(buf, cap, "a reference"); return;
    }
}

bool vm_unbox(uint8_t rk, const Value *v, VmReg *out, char *err, size_t cap) {
    rly_dtype dt = vm_rk_dtype(rk);
    if (v == NULL || v->kind != VAL_TENSOR || RT_TENSOR(v)->t.ndim != 0 ||
        rt_tensor_dtype(RT_TENSOR(v)) != dt) {
        char got[300];
        describe(v, got, sizeof got);
        snprintf(err, cap, "expected a Tensor[(), %s], got %s", sup_dtype_name(dt), got);
        return false;
    }
    const void *p = rt_tensor_data(RT_TENSOR(v));
    switch (rk) {
    case VM_RK_BOOL: out->i = *(const uint8_t *)p != 0; break;
    case VM_RK_I32: out->i = *(const int32_t *)p; break;
    case VM_RK_I64: out->i = *(const int64_t *)p; break;
    case VM_RK_F32: out->f = *(const float *)p; break;
    default: out->d = *(const double *)p; break;
    }
    return true;
}

/* ---- validation ------------------------------------------------------------------------------ */

typedef struct Check {
    const VmExec *exe;
    char *err;
    size_t cap;
    /* where: the function and instruction, or the packed function and node */
    const char *what;
    const char *name;
    uint32_t at;
    bool at_set;
} Check;

static const char *const opcode_names[VM_OPCODE_COUNT] = {
    [VM_MOVE] = "move",
    [VM_RET] = "ret",
    [VM_INVOKE] = "invoke",
    [VM_INVOKE_CLOSURE] = "invoke_closure",
    [VM_INVOKE_PACKED] = "invoke_packed",
    [VM_ALLOC_STORAGE] = "alloc_storage",
    [VM_ALLOC_TENSOR] = "alloc_tensor",
    [VM_ALLOC_TENSOR_REG] = "alloc_tensor_reg",
    [VM_ALLOC_ADT] = "alloc_adt",
    [VM_ALLOC_TUPLE] = "alloc_tuple",
    [VM_ALLOC_CLOSURE] = "alloc_closure",
    [VM_GET_FIELD] = "get_field",
    [VM_GET_TAG] = "get_tag",
    [VM_IF] = "if",
    [VM_GOTO] = "goto",
    [VM_LOAD_CONST] = "load_const",
    [VM_LOAD_IMM] = "load_imm",
    [VM_SHAPE_OF] = "shape_of",
    [VM_RESHAPE_TENSOR] = "reshape_tensor",
    [VM_KILL] = "kill",
    [VM_FATAL] = "fatal",
    [VM_REF_NEW] = "ref_new",
    [VM_REF_READ] = "ref_read",
    [VM_REF_WRITE] = "ref_write",
    [VM_BOX] = "box",
    [VM_UNBOX] = "unbox",
    [VM_SCALAR] = "scalar",
};
_Static_assert(VM_OPCODE_COUNT == 27, "update opcode_names");

static const char *const rk_names[VM_RK_COUNT] = {"value", "bool",    "int32",
                                                  "int64", "float32", "float64"};

static bool bad(Check *c, const char *fmt, ...) RLY_PRINTF(2, 3);
static bool bad(Check *c, const char *fmt, ...) {
    char where[256] = "";
    if (c->what != NULL && c->at_set)
        snprintf(where, sizeof where, "%s %s, %s %u: ", c->what, c->name ? c->name : "?",
                 c->what[0] == 'p' ? "node" : "instruction", c->at);
    else if (c->what != NULL)
        snprintf(where, sizeof where, "%s %s: ", c->what, c->name ? c->name : "?");
    int n = snprintf(c->err, c->cap, "invalid executable: %s", where);
    if (n >= 0 && (size_t)n < c->cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return false;
}

static const char *rk_name(uint8_t rk) { return rk < VM_RK_COUNT ? rk_names[rk] : "?"; }

/* Register r exists in f, and (when want >= 0) has kind want. */
static bool reg(Check *c, const VmFunction *f, uint32_t r, int want, const char *role) {
    if (r >= f->n_regs)
        return bad(c, "%s register %u out of range (%u registers)", role, r, f->n_regs);
    if (want >= 0 && f->reg_kind[r] != want)
        return bad(c, "%s register %u is of kind %s, %s needed", role, r, rk_name(f->reg_kind[r]),
                   rk_name((uint8_t)want));
    return true;
}

static bool slice(Check *c, const VmFunction *f, const VmInstr *in) {
    if (in->n > f->n_pool || in->args > f->n_pool - in->n)
        return bad(c, "operands [%u, %u + %u) outside the operand pool of %u", in->args, in->args,
                   in->n, f->n_pool);
    return true;
}

/* Every variable operand a register of kind want (-1: any). */
static bool arg_regs(Check *c, const VmFunction *f, const VmInstr *in, int want) {
    if (!slice(c, f, in)) return false;
    for (uint32_t i = 0; i < in->n; i++)
        if (!reg(c, f, f->pool[in->args + i], want, "operand")) return false;
    return true;
}

static bool is_terminator(const VmInstr *in) {
    return in->op == VM_RET || in->op == VM_GOTO || in->op == VM_FATAL ||
           ((in->op == VM_INVOKE || in->op == VM_INVOKE_CLOSURE) && (in->flags & VM_F_TAIL));
}

static bool check_instr(Check *c, const VmFunction *f, const VmInstr *in) {
    const VmExec *exe = c->exe;
    if (in->op >= VM_OPCODE_COUNT) return bad(c, "unknown opcode %u", in->op);
    bool invoke = in->op == VM_INVOKE || in->op == VM_INVOKE_CLOSURE;
    if (in->flags & ~(invoke ? VM_F_TAIL : 0u))
        return bad(c, "%s: unknown flags 0x%x", opcode_names[in->op], in->flags);
    bool tail = (in->flags & VM_F_TAIL) != 0;
    switch (in->op) {
    case VM_MOVE:
        return reg(c, f, in->a, -1, "source") && reg(c, f, in->dst, f->reg_kind[in->a], "dst");
    case VM_RET: return reg(c, f, in->a, f->result_kind, "result");
    case VM_INVOKE: {
        if (in->a >= exe->n_funcs)
            return bad(c, "invoke of function %u (%u functions)", in->a, exe->n_funcs);
        const VmFunction *g = &exe->funcs[in->a];
        if (in->n != g->n_params)
            return bad(c, "invoke of %s with %u arguments, it takes %u", g->name ? g->name : "?",
                       in->n, g->n_params);
        if (!slice(c, f, in)) return false;
        for (uint32_t i = 0; i < in->n; i++)
            if (!reg(c, f, f->pool[in->args + i], g->reg_kind[i], "argument")) return false;
        return tail || reg(c, f, in->dst, g->result_kind, "dst");
    }
    case VM_INVOKE_CLOSURE:
        return reg(c, f, in->a, VM_RK_VALUE, "closure") && arg_regs(c, f, in, -1) &&
               (tail || reg(c, f, in->dst, -1, "dst"));
    case VM_INVOKE_PACKED: {
        if (in->a >= exe->n_packed)
            return bad(c, "packed function %u (%u of them)", in->a, exe->n_packed);
        const VmPacked *p = &exe->packed[in->a];
        if (in->n != p->n_inputs)
            return bad(c, "packed function %s with %u arguments, it takes %u",
                       p->name ? p->name : "?", in->n, p->n_inputs);
        return arg_regs(c, f, in, VM_RK_VALUE) && reg(c, f, in->dst, VM_RK_VALUE, "dst");
    }
    case VM_ALLOC_STORAGE:
    case VM_ALLOC_TENSOR:
    case VM_ALLOC_TENSOR_REG:
        return bad(c, "%s is reserved for memory planning and not supported yet",
                   opcode_names[in->op]);
    case VM_ALLOC_ADT:
        if (in->a >= exe->n_ctors)
            return bad(c, "constructor %u (%u constructors)", in->a, exe->n_ctors);
        if (in->n != exe->ctors[in->a].arity)
            return bad(c, "constructor %s with %u fields, it takes %u",
                       exe->ctors[in->a].name ? exe->ctors[in->a].name : "?", in->n,
                       exe->ctors[in->a].arity);
        return arg_regs(c, f, in, VM_RK_VALUE) && reg(c, f, in->dst, VM_RK_VALUE, "dst");
    case VM_ALLOC_TUPLE:
        return arg_regs(c, f, in, VM_RK_VALUE) && reg(c, f, in->dst, VM_RK_VALUE, "dst");
    case VM_ALLOC_CLOSURE:
        if (in->a >= exe->n_funcs)
            return bad(c, "closure of function %u (%u functions)", in->a, exe->n_funcs);
        if (in->n != exe->funcs[in->a].n_captured)
            return bad(c, "closure capturing %u values, its function takes %u", in->n,
                       exe->funcs[in->a].n_captured);
        return arg_regs(c, f, in, VM_RK_VALUE) && reg(c, f, in->dst, VM_RK_VALUE, "dst");
    case VM_GET_FIELD:
    case VM_SHAPE_OF:
    case VM_REF_NEW:
    case VM_REF_READ:
        return reg(c, f, in->a, VM_RK_VALUE, "source") && reg(c, f, in->dst, VM_RK_VALUE, "dst");
    case VM_GET_TAG:
        return reg(c, f, in->a, VM_RK_VALUE, "source") && reg(c, f, in->dst, VM_RK_I32, "dst");
    case VM_IF:
        if (!reg(c, f, in->a, -1, "condition")) return false;
        if (f->reg_kind[in->a] != VM_RK_BOOL && f->reg_kind[in->a] != VM_RK_VALUE)
            return bad(c, "condition register %u is of kind %s", in->a,
                       rk_name(f->reg_kind[in->a]));
        if (in->b >= f->n_code) return bad(c, "jump to %u (%u instructions)", in->b, f->n_code);
        /* Only Goto, calls and kernels poll the run's limits, so a loop must pass through one
         * of them: a conditional jump goes forward (the compiler's always do). */
        if (in->b <= c->at) return bad(c, "a conditional jump back to %u", in->b);
        return true;
    case VM_GOTO:
        if (in->a >= f->n_code) return bad(c, "jump to %u (%u instructions)", in->a, f->n_code);
        return true;
    case VM_LOAD_CONST:
        if (in->a >= exe->n_consts)
            return bad(c, "constant %u (%u constants)", in->a, exe->n_consts);
        return reg(c, f, in->dst, VM_RK_VALUE, "dst");
    case VM_LOAD_IMM:
        if (in->rk == VM_RK_VALUE || in->rk >= VM_RK_COUNT)
            return bad(c, "load_imm of kind %s", rk_name(in->rk));
        if (in->rk == VM_RK_BOOL && in->imm != 0 && in->imm != 1)
            return bad(c, "bool immediate %lld", (long long)in->imm);
        if (in->rk == VM_RK_I32 && (in->imm < INT32_MIN || in->imm > INT32_MAX))
            return bad(c, "int32 immediate %lld out of range", (long long)in->imm);
        return reg(c, f, in->dst, in->rk, "dst");
    case VM_RESHAPE_TENSOR:
    case VM_REF_WRITE:
        return reg(c, f, in->a, VM_RK_VALUE, "first operand") &&
               reg(c, f, in->b, VM_RK_VALUE, "second operand") &&
               reg(c, f, in->dst, VM_RK_VALUE, "dst");
    case VM_KILL: return reg(c, f, in->a, -1, "killed");
    case VM_FATAL:
        if (in->a >= exe->n_strs) return bad(c, "string %u (%u strings)", in->a, exe->n_strs);
        return true;
    case VM_BOX:
        if (!reg(c, f, in->a, -1, "source")) return false;
        if (f->reg_kind[in->a] == VM_RK_VALUE) return bad(c, "box of a value register");
        return reg(c, f, in->dst, VM_RK_VALUE, "dst");
    case VM_UNBOX:
        if (!reg(c, f, in->a, VM_RK_VALUE, "source") || !reg(c, f, in->dst, -1, "dst"))
            return false;
        if (f->reg_kind[in->dst] == VM_RK_VALUE) return bad(c, "unbox into a value register");
        return true;
    case VM_SCALAR:
        if (in->sub >= VM_SC_COUNT) return bad(c, "unknown scalar operation %u", in->sub);
        if (in->rk == VM_RK_VALUE || in->rk >= VM_RK_COUNT)
            return bad(c, "scalar %s on kind %s", vm_scalar_op_name(in->sub), rk_name(in->rk));
        if (!reg(c, f, in->a, in->rk, "operand") ||
            (!vm_scalar_unary(in->sub) && !reg(c, f, in->b, in->rk, "operand")) ||
            !reg(c, f, in->dst, -1, "dst"))
            return false;
        if (!vm_scalar_kinds_ok(in->sub, in->rk, f->reg_kind[in->dst]))
            return bad(c, "scalar %s takes no %s operands into a %s register",
                       vm_scalar_op_name(in->sub), rk_name(in->rk), rk_name(f->reg_kind[in->dst]));
        return true;
    default: return bad(c, "unknown opcode %u", in->op);
    }
}

static bool check_function(Check *c, const VmFunction *f) {
    c->what = "function";
    c->name = f->name;
    c->at_set = false;
    if (f->n_params > f->n_regs || f->n_captured > f->n_params)
        return bad(c, "%u parameters (%u captured) in %u registers", f->n_params, f->n_captured,
                   f->n_regs);
    if (f->n_regs > 0 && f->reg_kind == NULL) return bad(c, "no register kinds");
    for (uint32_t r = 0; r < f->n_regs; r++)
        if (f->reg_kind[r] >= VM_RK_COUNT)
            return bad(c, "register %u has kind %u", r, f->reg_kind[r]);
    if (f->result_kind >= VM_RK_COUNT) return bad(c, "result kind %u", f->result_kind);
    if (f->n_code == 0 || f->code == NULL) return bad(c, "no code");
    if (f->n_pool > 0 && f->pool == NULL) return bad(c, "no operand pool");
    for (uint32_t i = 0; i < f->n_code; i++) {
        c->at = i;
        c->at_set = true;
        if (f->loc != NULL && f->loc[i] >= c->exe->n_strs)
            return bad(c, "location string %u (%u strings)", f->loc[i], c->exe->n_strs);
        if (!check_instr(c, f, &f->code[i])) return false;
    }
    c->at = f->n_code - 1;
    if (!is_terminator(&f->code[f->n_code - 1]))
        return bad(c,
                   "the last instruction (%s) does not end the function: ret, goto, fatal "
                   "or a tail call needed",
                   opcode_names[f->code[f->n_code - 1].op]);
    return true;
}

static bool check_attrs(Check *c, const VmNode *n) {
    if (n->n_attrs > 0 && n->attrs == NULL) return bad(c, "no attributes");
    for (uint32_t i = 0; i < n->n_attrs; i++) {
        const KAttr *a = &n->attrs[i];
        if (a->name == NULL) return bad(c, "attribute %u has no name", i);
        bool ok = true;
        switch (a->kind) {
        case KA_NONE:
        case KA_INT:
        case KA_FLOAT: break;
        case KA_STR: ok = a->s != NULL; break;
        case KA_INTS: ok = a->n == 0 || (a->ints != NULL && a->floats != NULL); break;
        case KA_FLOATS: ok = a->n == 0 || a->floats != NULL; break;
        case KA_STRS:
            ok = a->n == 0 || a->strs != NULL;
            for (uint32_t j = 0; ok && j < a->n; j++)
                ok = a->strs[j] != NULL;
            break;
        default: return bad(c, "attribute %s has kind %u", a->name, a->kind);
        }
        if (!ok) return bad(c, "attribute %s has missing items", a->name);
    }
    return true;
}

static bool check_packed(Check *c, const VmPacked *p) {
    c->what = "packed function";
    c->name = p->name;
    c->at_set = false;
    if (p->n_nodes > 0 && p->nodes == NULL) return bad(c, "no nodes");
    if (p->n_inputs > UINT32_MAX - p->n_nodes) return bad(c, "too many values");
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        const VmNode *n = &p->nodes[k];
        uint32_t id = p->n_inputs + k;
        c->at = k;
        c->at_set = true;
        if (n->n_args > 0 && n->args == NULL) return bad(c, "no arguments");
        for (uint32_t i = 0; i < n->n_args; i++)
            if (n->args[i] >= id)
                return bad(c, "argument %u is value %u, not an earlier one (this is value %u)", i,
                           n->args[i], id);
        if (n->loc >= c->exe->n_strs)
            return bad(c, "location string %u (%u strings)", n->loc, c->exe->n_strs);
        switch (n->kind) {
        case VM_NODE_CALL:
            if (!check_attrs(c, n)) return false;
            if (!n->out_tuple && n->n_out > 1)
                return bad(c, "a tensor result with n_out %u", n->n_out);
            /* The VM sizes one scratch array by the largest n_out: bound it (split/unique
             * give as many outputs as their attributes say, never this many). */
            if (n->out_tuple && n->n_out > (1u << 16))
                return bad(c, "a tuple result of %u tensors (at most 65536)", n->n_out);
            break;
        case VM_NODE_TUPLE: break;
        case VM_NODE_FIELD:
            if (n->n_args != 1) return bad(c, "a field of %u values", n->n_args);
            break;
        case VM_NODE_CONST:
            if (n->index >= c->exe->n_consts)
                return bad(c, "constant %u (%u constants)", n->index, c->exe->n_consts);
            break;
        default: return bad(c, "unknown node kind %u", n->kind);
        }
    }
    c->at_set = false;
    if (p->result >= p->n_inputs + p->n_nodes)
        return bad(c, "result value %u (%u values)", p->result, p->n_inputs + p->n_nodes);
    return true;
}

static bool check_type(Check *c, const VmTypeDesc *t, const char *role, uint32_t i) {
    if (!t->is_tensor) return true;
    if (t->dtype >= RLY_DTYPE_COUNT) return bad(c, "%s %u has dtype %u", role, i, t->dtype);
    if (t->ndim > K_MAX_DIMS) return bad(c, "%s %u has rank %u", role, i, t->ndim);
    if (t->ndim > 0 && t->shape == NULL) return bad(c, "%s %u has no shape", role, i);
    for (uint32_t d = 0; d < t->ndim; d++)
        if (t->shape[d] < -1 || t->shape[d] > SUP_DIM_MAX)
            return bad(c, "%s %u has dim %lld", role, i, (long long)t->shape[d]);
    return true;
}

bool vm_exec_validate(const VmExec *exe, char *err, size_t cap) {
    Check c = {.exe = exe, .err = err, .cap = cap};
    if (exe == NULL) return bad(&c, "no executable");
    if (exe->n_strs == 0 || exe->strs == NULL) return bad(&c, "no string table");
    for (uint32_t i = 0; i < exe->n_strs; i++)
        if (exe->strs[i] == NULL) return bad(&c, "string %u missing", i);
    if (exe->strs[0][0] != '\0') return bad(&c, "string 0 is not empty");
    if ((exe->n_funcs > 0 && exe->funcs == NULL) || (exe->n_packed > 0 && exe->packed == NULL) ||
        (exe->n_consts > 0 && exe->consts == NULL) || (exe->n_ctors > 0 && exe->ctors == NULL))
        return bad(&c, "a table is missing");
    for (uint32_t i = 0; i < exe->n_consts; i++)
        if (exe->consts[i] == NULL || exe->consts[i]->kind != VAL_TENSOR)
            return bad(&c, "constant %u is not a tensor", i);
    for (uint32_t i = 0; i < exe->n_ctors; i++)
        if (exe->ctors[i].name == NULL) return bad(&c, "constructor %u has no name", i);
    for (uint32_t i = 0; i < exe->n_funcs; i++)
        if (!check_function(&c, &exe->funcs[i])) return false;
    for (uint32_t i = 0; i < exe->n_packed; i++)
        if (!check_packed(&c, &exe->packed[i])) return false;
    for (uint32_t i = 0; i < exe->n_funcs; i++)
        if (!vm_plan_validate(exe, &exe->funcs[i], err, cap)) return false;
    c.what = NULL;
    if (exe->entry >= exe->n_funcs)
        return bad(&c, "entry function %u (%u functions)", exe->entry, exe->n_funcs);
    const VmFunction *e = &exe->funcs[exe->entry];
    if (e->n_captured != 0) return bad(&c, "the entry function captures values");
    if (exe->n_inputs != e->n_params)
        return bad(&c, "%u inputs described, the entry takes %u", exe->n_inputs, e->n_params);
    if (exe->n_inputs > 0 && (exe->in_names == NULL || exe->in_types == NULL))
        return bad(&c, "input descriptors missing");
    if (exe->n_outputs > 0 && (exe->out_names == NULL || exe->out_types == NULL))
        return bad(&c, "output descriptors missing");
    if (!exe->out_tuple && exe->n_outputs != 1)
        return bad(&c, "%u outputs described for a result that is not a tuple", exe->n_outputs);
    for (uint32_t i = 0; i < exe->n_inputs; i++)
        if (exe->in_names[i] == NULL || !check_type(&c, &exe->in_types[i], "input", i))
            return exe->in_names[i] == NULL ? bad(&c, "input %u has no name", i) : false;
    for (uint32_t i = 0; i < exe->n_outputs; i++)
        if (exe->out_names[i] == NULL || !check_type(&c, &exe->out_types[i], "output", i))
            return exe->out_names[i] == NULL ? bad(&c, "output %u has no name", i) : false;
    return true;
}

/* ---- the kernel registry ---------------------------------------------------------------------
 * Issue 15 item 1: a packed node's kernel is chosen by operator id, dtypes, layout, static
 * shapes and CPU features, with the reference kernel as the fallback. A candidate is a row:
 * the operator, a predicate over the node and the machine, the kernel. The first row whose
 * predicate holds wins; none: kern_ref_lookup. Only the reference kernels exist so far, so
 * the table is empty; fast kernels (issue 16) add rows here. */

typedef struct VmCpu {
    bool avx2, fma, avx512f;
} VmCpu;

typedef struct KernelCand {
    uint32_t op;                                     /* OP_ID_* */
    bool (*fits)(const VmNode *n, const VmCpu *cpu); /* NULL: always */
    KernelFn fn;
    const char *name; /* for --stats and messages */
} KernelCand;

static const KernelCand kernel_cands[] = {
    {0, NULL, NULL, NULL}, /* terminator */
};

static VmCpu cpu_features(void) {
    VmCpu c = {0};
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2") != 0;
    c.fma = __builtin_cpu_supports("fma") != 0;
    c.avx512f = __builtin_cpu_supports("avx512f") != 0;
#endif
    return c;
}

static KernelFn kernel_for(const VmNode *n, const VmCpu *cpu) {
    for (const KernelCand *k = kernel_cands; k->fn != NULL; k++)
        if (k->op == n->op_id && (k->fits == NULL || k->fits(n, cpu))) return k->fn;
    /* a fast kernel (issue 16) hands the calls it does not cover to the reference kernel */
    KernelFn fast = kern_fast_lookup(n->op_id);
    return fast != NULL ? fast : kern_ref_lookup(n->op_id);
}

bool vm_exec_bind(VmExec *exe, char *err, size_t cap) {
    VmCpu cpu = cpu_features();
    if (exe->prep == NULL) {
        exe->prep = k_prep_cache_new();
        for (uint32_t i = 0; i < exe->n_preps; i++) { /* from a file: kernels find them made */
            const VmPrep *p = &exe->preps[i];
            const Value *v = p->konst < exe->n_consts ? exe->consts[p->konst] : NULL;
            if (v == NULL || v->kind != VAL_TENSOR) continue;
            KPrepItem it = {rt_tensor_data(RT_TENSOR(v)), p->key, (size_t)p->bytes, p->blob};
            (void)k_prep_cache_seed(exe->prep, &it); /* not seeded: packed at first use */
        }
    }
    for (uint32_t p = 0; p < exe->n_packed; p++) {
        const VmPacked *pk = &exe->packed[p];
        for (uint32_t k = 0; k < pk->n_nodes; k++) {
            /* The nodes array is the executable's own (arena or decoded copy): binding writes
             * the one field that is not serialized. */
            VmNode *n = (VmNode *)(uintptr_t)&pk->nodes[k];
            if (n->kind != VM_NODE_CALL || n->fn != NULL) continue;
            n->fn = kernel_for(n, &cpu);
            if (n->fn == NULL) {
                const char *op = sup_op_name(n->op_id);
                if (op != NULL)
                    snprintf(err, cap, "packed function %s: operator %s (id %u) has no kernel",
                             pk->name ? pk->name : "?", op, n->op_id);
                else
                    snprintf(err, cap, "packed function %s: operator id %u has no kernel",
                             pk->name ? pk->name : "?", n->op_id);
                return false;
            }
        }
    }
    return true;
}

/* ---- freeing --------------------------------------------------------------------------------- */

void vm_exec_free(VmExec *exe) {
    if (exe == NULL) return;
    PtrMap seen = {0}; /* a constant listed twice is freed once */
    for (uint32_t i = 0; exe->consts != NULL && i < exe->n_consts; i++) {
        Value *v = exe->consts[i];
        if (v == NULL || ptrmap_has(&seen, v)) continue;
        ptrmap_put(&seen, v, v);
        rt_value_free_immortal(v);
    }
    ptrmap_free(&seen);
    k_prep_cache_free(exe->prep);
    arena_free(&exe->arena);
    if (exe->mapping != NULL) munmap(exe->mapping, exe->mapping_len);
    free(exe);
}
