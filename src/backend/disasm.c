/* disasm.c - the text form of an executable, for debugging and `rly compile --disasm`: the
 * entry's interface, then each function (parameters, register kinds, one line per
 * instruction with its source location) and each packed function (one line per node). */
#include <stdio.h>

#include "backend/backend.h"

static const char *const rk_names[VM_RK_COUNT] = {"v", "bool", "i32", "i64", "f32", "f64"};

static const char *const sc_names[VM_SC_COUNT] = {
    "add", "sub", "mul", "div", "mod", "floor_div", "floor_mod", "max", "min", "pow", "eq",  "ne",
    "lt",  "le",  "gt",  "ge",  "and", "or",        "xor",       "not", "neg", "abs", "cast"};

static const char *rk_name(uint8_t k) { return k < VM_RK_COUNT ? rk_names[k] : "?"; }

static const char *str_at(const VmExec *exe, uint32_t i) {
    return i < exe->n_strs ? exe->strs[i] : "?";
}

static const char *func_name(const VmExec *exe, uint32_t i) {
    return i < exe->n_funcs ? exe->funcs[i].name : "?";
}

static void regs(const VmFunction *f, const VmInstr *in, StrBuf *out) {
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t at = in->args + i;
        if (at < f->n_pool)
            sb_printf(out, "%sr%u", i ? ", " : "", f->pool[at]);
        else
            sb_printf(out, "%s?", i ? ", " : "");
    }
}

static void instr(const VmExec *exe, const VmFunction *f, const VmInstr *in, StrBuf *out) {
    switch (in->op) {
    case VM_MOVE: sb_printf(out, "r%u = r%u", in->dst, in->a); break;
    case VM_RET: sb_printf(out, "ret r%u", in->a); break;
    case VM_INVOKE:
        sb_printf(out, "r%u = %sinvoke @%s(", in->dst, in->flags & VM_F_TAIL ? "tail " : "",
                  func_name(exe, in->a));
        regs(f, in, out);
        sb_puts(out, ")");
        break;
    case VM_INVOKE_CLOSURE:
        sb_printf(out, "r%u = %sinvoke_closure r%u(", in->dst, in->flags & VM_F_TAIL ? "tail " : "",
                  in->a);
        regs(f, in, out);
        sb_puts(out, ")");
        break;
    case VM_INVOKE_PACKED:
        sb_printf(out, "r%u = invoke_packed %s(", in->dst,
                  in->a < exe->n_packed ? exe->packed[in->a].name : "?");
        regs(f, in, out);
        sb_puts(out, ")");
        break;
    case VM_ALLOC_STORAGE:
        sb_printf(out, "r%u = alloc_storage %lld", in->dst, (long long)in->imm);
        break;
    case VM_ALLOC_TENSOR:
        sb_printf(out, "r%u = alloc_tensor %s r%u+%u [", in->dst,
                  sup_dtype_name((rly_dtype)in->dtype), in->a, in->b);
        for (uint32_t i = 0; i < in->n && in->args + i < f->n_pool; i++)
            sb_printf(out, "%s%u", i ? ", " : "", f->pool[in->args + i]);
        sb_puts(out, "]");
        break;
    case VM_ALLOC_TENSOR_REG:
        sb_printf(out, "r%u = alloc_tensor_reg %s r%u+%u shape r%u", in->dst,
                  sup_dtype_name((rly_dtype)in->dtype), in->a, in->c, in->b);
        break;
    case VM_ALLOC_ADT:
        sb_printf(out, "r%u = %s(", in->dst, in->a < exe->n_ctors ? exe->ctors[in->a].name : "?");
        regs(f, in, out);
        sb_puts(out, ")");
        break;
    case VM_ALLOC_TUPLE:
        sb_printf(out, "r%u = tuple(", in->dst);
        regs(f, in, out);
        sb_puts(out, ")");
        break;
    case VM_ALLOC_CLOSURE:
        sb_printf(out, "r%u = closure @%s[", in->dst, func_name(exe, in->a));
        regs(f, in, out);
        sb_puts(out, "]");
        break;
    case VM_GET_FIELD: sb_printf(out, "r%u = r%u.%u", in->dst, in->a, in->b); break;
    case VM_GET_TAG: sb_printf(out, "r%u = tag r%u", in->dst, in->a); break;
    case VM_IF: sb_printf(out, "if not r%u goto %u", in->a, in->b); break;
    case VM_GOTO: sb_printf(out, "goto %u", in->a); break;
    case VM_LOAD_CONST: sb_printf(out, "r%u = const %u", in->dst, in->a); break;
    case VM_LOAD_IMM:
        if (in->rk == VM_RK_F32 || in->rk == VM_RK_F64)
            sb_printf(out, "r%u = %s %.17g", in->dst, rk_name(in->rk), in->fimm);
        else
            sb_printf(out, "r%u = %s %lld", in->dst, rk_name(in->rk), (long long)in->imm);
        break;
    case VM_SHAPE_OF: sb_printf(out, "r%u = shape_of r%u", in->dst, in->a); break;
    case VM_RESHAPE_TENSOR:
        sb_printf(out, "r%u = reshape r%u to r%u", in->dst, in->a, in->b);
        break;
    case VM_KILL: sb_printf(out, "kill r%u", in->a); break;
    case VM_FATAL: sb_printf(out, "fatal \"%s\"", str_at(exe, in->a)); break;
    case VM_REF_NEW: sb_printf(out, "r%u = ref r%u", in->dst, in->a); break;
    case VM_REF_READ: sb_printf(out, "r%u = !r%u", in->dst, in->a); break;
    case VM_REF_WRITE: sb_printf(out, "r%u = (r%u := r%u)", in->dst, in->a, in->b); break;
    case VM_BOX: sb_printf(out, "r%u = box r%u", in->dst, in->a); break;
    case VM_UNBOX: sb_printf(out, "r%u = unbox r%u", in->dst, in->a); break;
    case VM_SCALAR:
        if (in->sub == VM_SC_NOT || in->sub == VM_SC_NEG || in->sub == VM_SC_ABS ||
            in->sub == VM_SC_CAST)
            sb_printf(out, "r%u = %s.%s r%u", in->dst,
                      in->sub < VM_SC_COUNT ? sc_names[in->sub] : "?", rk_name(in->rk), in->a);
        else
            sb_printf(out, "r%u = %s.%s r%u, r%u", in->dst,
                      in->sub < VM_SC_COUNT ? sc_names[in->sub] : "?", rk_name(in->rk), in->a,
                      in->b);
        break;
    default: sb_printf(out, "opcode %u", in->op); break;
    }
}

static void type_desc(const VmTypeDesc *t, StrBuf *out) { sb_puts(out, t->text ? t->text : "?"); }

void be_disasm(const VmExec *exe, StrBuf *out) {
    sb_printf(out, "entry @%s(", func_name(exe, exe->entry));
    for (uint32_t i = 0; i < exe->n_inputs; i++) {
        sb_printf(out, "%s%s: ", i ? ", " : "", exe->in_names[i]);
        type_desc(&exe->in_types[i], out);
    }
    sb_puts(out, ") -> ");
    if (exe->out_tuple) sb_puts(out, "(");
    for (uint32_t i = 0; i < exe->n_outputs; i++) {
        sb_printf(out, "%s%s: ", i ? ", " : "", exe->out_names[i]);
        type_desc(&exe->out_types[i], out);
    }
    if (exe->out_tuple) sb_puts(out, ")");
    sb_puts(out, "\n");
    for (uint32_t fi = 0; fi < exe->n_funcs; fi++) {
        const VmFunction *f = &exe->funcs[fi];
        sb_printf(out, "\nfunc %u @%s(", fi, f->name);
        for (uint32_t i = 0; i < f->n_params && i < f->n_regs; i++)
            sb_printf(out, "%sr%u: %s%s", i ? ", " : "", i, rk_name(f->reg_kind[i]),
                      i < f->n_captured ? " (captured)" : "");
        sb_printf(out, ") -> %s, %u registers\n", rk_name(f->result_kind), f->n_regs);
        bool any = false;
        for (uint32_t r = f->n_params; r < f->n_regs; r++)
            if (f->reg_kind[r] != VM_RK_VALUE) {
                sb_printf(out, "%sr%u: %s", any ? ", " : "  scalars: ", r, rk_name(f->reg_kind[r]));
                any = true;
            }
        if (any) sb_puts(out, "\n");
        for (uint32_t pc = 0; pc < f->n_code; pc++) {
            size_t start = out->len;
            sb_printf(out, "  %4u  ", pc);
            instr(exe, f, &f->code[pc], out);
            if (f->loc && f->loc[pc] != 0) {
                size_t w = out->len - start;
                sb_indent(out, w < 56 ? (int)(56 - w) : 1);
                sb_printf(out, "; %s", str_at(exe, f->loc[pc]));
            }
            sb_puts(out, "\n");
        }
    }
    for (uint32_t pi = 0; pi < exe->n_packed; pi++) {
        const VmPacked *p = &exe->packed[pi];
        sb_printf(out, "\npacked %u %s(%u inputs) -> %%%u\n", pi, p->name, p->n_inputs, p->result);
        for (uint32_t k = 0; k < p->n_nodes; k++) {
            const VmNode *nd = &p->nodes[k];
            size_t start = out->len;
            sb_printf(out, "  %%%u = ", p->n_inputs + k);
            switch (nd->kind) {
            case VM_NODE_CALL: {
                const char *name = sup_op_name(nd->op_id);
                sb_printf(out, "%s(", name ? name : "?");
                for (uint32_t a = 0; a < nd->n_args; a++)
                    sb_printf(out, "%s%%%u", a ? ", " : "", nd->args[a]);
                for (uint32_t a = 0; a < nd->n_attrs; a++) {
                    const KAttr *at = &nd->attrs[a];
                    sb_printf(out, ", %s=", at->name);
                    switch (at->kind) {
                    case KA_NONE: sb_puts(out, "None"); break;
                    case KA_INT: sb_printf(out, "%lld", (long long)at->i); break;
                    case KA_FLOAT: sb_printf(out, "%g", at->f); break;
                    case KA_STR: sb_printf(out, "\"%s\"", at->s); break;
                    case KA_INTS:
                        sb_puts(out, "[");
                        for (uint32_t j = 0; j < at->n; j++)
                            sb_printf(out, "%s%lld", j ? ", " : "", (long long)at->ints[j]);
                        sb_puts(out, "]");
                        break;
                    case KA_FLOATS:
                        sb_puts(out, "[");
                        for (uint32_t j = 0; j < at->n; j++)
                            sb_printf(out, "%s%g", j ? ", " : "", at->floats[j]);
                        sb_puts(out, "]");
                        break;
                    case KA_STRS:
                        sb_puts(out, "[");
                        for (uint32_t j = 0; j < at->n; j++)
                            sb_printf(out, "%s\"%s\"", j ? ", " : "", at->strs[j]);
                        sb_puts(out, "]");
                        break;
                    }
                }
                sb_puts(out, ")");
                if (nd->out_tuple) sb_printf(out, " -> %u outputs", nd->n_out);
                break;
            }
            case VM_NODE_TUPLE:
                sb_puts(out, "(");
                for (uint32_t a = 0; a < nd->n_args; a++)
                    sb_printf(out, "%s%%%u", a ? ", " : "", nd->args[a]);
                sb_puts(out, nd->n_args == 1 ? ",)" : ")");
                break;
            case VM_NODE_FIELD: sb_printf(out, "%%%u.%u", nd->args[0], nd->index); break;
            case VM_NODE_CONST: sb_printf(out, "const %u", nd->index); break;
            }
            if (nd->loc != 0) {
                size_t w = out->len - start;
                sb_indent(out, w < 56 ? (int)(56 - w) : 1);
                sb_printf(out, "; %s", str_at(exe, nd->loc));
            }
            sb_puts(out, "\n");
        }
    }
    for (uint32_t c = 0; c < exe->n_consts; c++) {
        const RtTensor *t = RT_TENSOR(exe->consts[c]);
        char s[128];
        sb_printf(out, "%sconst %u: Tensor[%s, %s]\n", c == 0 ? "\n" : "", c,
                  k_shape_str(&t->t, s, sizeof s), sup_dtype_name(rt_tensor_dtype(t)));
    }
}
