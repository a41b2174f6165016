/* packed.c - operator calls: a Primitive=1 function (FuseOps's group) or a lone operator call
 * (at -O0) becomes a packed function, a dataflow program of operator calls whose attributes are
 * lowered once (op_lower_attrs), or, when every input, output and intermediate value is an
 * unboxed scalar and every operator has a VM_SCALAR form, straight-line VM_SCALAR code.
 *
 * Lone operator calls with equal operators and attributes share one packed function; its node
 * then has no location of its own (loc 0), and a kernel error is reported at the invoking
 * instruction's location, which is the call's. A fused function keeps each node's location. */
#include <stdio.h>

#include "backend/be.h"

/* ---- VM_SCALAR forms ------------------------------------------------------------------------ */

static bool is_num(uint8_t k) {
    return k == VM_RK_I32 || k == VM_RK_I64 || k == VM_RK_F32 || k == VM_RK_F64;
}
static bool is_int(uint8_t k) { return k == VM_RK_I32 || k == VM_RK_I64; }

/* The VM_SCALAR operation computing operator op_id on operands of kinds ak[0..n) into a result
 * of kind rk, exactly as the reference kernel does; -1 when there is none. */
static int scalar_sub(uint32_t op_id, const uint8_t *ak, uint32_t n, uint8_t rk) {
    if (rk == VM_RK_VALUE) return -1;
    for (uint32_t i = 0; i < n; i++)
        if (ak[i] == VM_RK_VALUE) return -1;
    if (n == 2 && ak[0] != ak[1]) return -1;
    switch (op_id) {
    case OP_ID_ADD: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_ADD : -1;
    case OP_ID_SUBTRACT: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_SUB : -1;
    case OP_ID_MULTIPLY: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_MUL : -1;
    case OP_ID_DIVIDE: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_DIV : -1;
    case OP_ID_MOD: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_MOD : -1;
    case OP_ID_FLOOR_DIVIDE: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_FLOOR_DIV : -1;
    case OP_ID_FLOOR_MOD: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_FLOOR_MOD : -1;
    case OP_ID_MAXIMUM: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_MAX : -1;
    case OP_ID_MINIMUM: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_MIN : -1;
    case OP_ID_POWER: return n == 2 && is_num(rk) && ak[0] == rk ? VM_SC_POW : -1;
    case OP_ID_EQUAL: return n == 2 && rk == VM_RK_BOOL ? VM_SC_EQ : -1;
    case OP_ID_NOT_EQUAL: return n == 2 && rk == VM_RK_BOOL ? VM_SC_NE : -1;
    case OP_ID_LESS: return n == 2 && rk == VM_RK_BOOL ? VM_SC_LT : -1;
    case OP_ID_LESS_EQUAL: return n == 2 && rk == VM_RK_BOOL ? VM_SC_LE : -1;
    case OP_ID_GREATER: return n == 2 && rk == VM_RK_BOOL ? VM_SC_GT : -1;
    case OP_ID_GREATER_EQUAL: return n == 2 && rk == VM_RK_BOOL ? VM_SC_GE : -1;
    case OP_ID_LOGICAL_AND:
        return n == 2 && rk == VM_RK_BOOL && ak[0] == VM_RK_BOOL ? VM_SC_AND : -1;
    case OP_ID_LOGICAL_OR: return n == 2 && rk == VM_RK_BOOL && ak[0] == VM_RK_BOOL ? VM_SC_OR : -1;
    case OP_ID_LOGICAL_XOR:
        return n == 2 && rk == VM_RK_BOOL && ak[0] == VM_RK_BOOL ? VM_SC_XOR : -1;
    case OP_ID_LOGICAL_NOT:
        return n == 1 && rk == VM_RK_BOOL && ak[0] == VM_RK_BOOL ? VM_SC_NOT : -1;
    case OP_ID_BITWISE_AND: return n == 2 && is_int(rk) && ak[0] == rk ? VM_SC_AND : -1;
    case OP_ID_BITWISE_OR: return n == 2 && is_int(rk) && ak[0] == rk ? VM_SC_OR : -1;
    case OP_ID_BITWISE_XOR: return n == 2 && is_int(rk) && ak[0] == rk ? VM_SC_XOR : -1;
    case OP_ID_NEGATIVE: return n == 1 && is_num(rk) && ak[0] == rk ? VM_SC_NEG : -1;
    case OP_ID_ABS: return n == 1 && is_num(rk) && ak[0] == rk ? VM_SC_ABS : -1;
    case OP_ID_CAST: return n == 1 ? VM_SC_CAST : -1;
    default: return -1;
    }
}

/* The operator of a call (NULL with an error when unknown). */
static const OpDef *call_op(Be *be, Call *c) {
    const OpDef *op = op_def_of(c->op);
    if (op == NULL) be_error(be, c->base.span, "unknown operator %s", AS_OP(c->op)->name);
    return op;
}

/* ---- packed nodes --------------------------------------------------------------------------- */

/* ---- user-registered operators --------------------------------------------------------------
 * A user operator (rly_op_register) has a C kernel of its own signature, and its result is
 * allocated from the call's static type, as the interpreter does. Its node is bound here to
 * user_kernel_call, which finds the operator by its id and reads the result's dtype and shape
 * from three attribute rows the compiler appends after the schema's (the id, the dtype, the
 * shape). Such an executable
 * lives in memory only: the kernel is a pointer into this process. */

#define BE_USER_OP "__rly_user_op"
#define BE_USER_DTYPE "__rly_user_out_dtype"
#define BE_USER_SHAPE "__rly_user_out_shape"

static int user_kernel_call(KCall *kc) {
    const KAttr *id = NULL, *dt = NULL, *shape = NULL;
    for (uint32_t i = 0; i < kc->n_attrs; i++) {
        if (strcmp(kc->attrs[i].name, BE_USER_OP) == 0) id = &kc->attrs[i];
        if (strcmp(kc->attrs[i].name, BE_USER_DTYPE) == 0) dt = &kc->attrs[i];
        if (strcmp(kc->attrs[i].name, BE_USER_SHAPE) == 0) shape = &kc->attrs[i];
    }
    if (id == NULL || dt == NULL || shape == NULL)
        return k_error(kc, "internal error: no result type");
    const OpDef *op = id->i >= 0 ? op_at((size_t)id->i) : NULL;
    if (op == NULL || op->user_kernel == NULL)
        return k_error(kc, "no kernel implements this operator yet");
    DLTensor *o = k_out(kc, 0, (rly_dtype)dt->i, shape->n, shape->ints);
    if (o == NULL) return -1;
    DLTensor *targs = sup_malloc(sizeof(DLTensor) * (kc->n_in ? kc->n_in : 1));
    for (uint32_t i = 0; i < kc->n_in; i++)
        targs[i] = *kc->in[i];
    rly_kernel_fn kf = (rly_kernel_fn)(uintptr_t)op->user_kernel;
    int rc = kf(targs, (int)kc->n_in, o, op->user_data);
    free(targs);
    if (rc != 0) return k_error(kc, "the user kernel failed (status %d)", rc);
    return 0;
}

/* The attribute rows of a user operator's call: the schema's, then the result type's. False
 * after an error (a result that is not a tensor of static shape). */
static bool user_attrs(Be *be, Call *c, const OpDef *op, KAttr *schema, VmNode *nd) {
    Type *ty = c->base.checked_type;
    if (ty == NULL || ty->kind != TYPE_TENSOR) {
        be_error(be, c->base.span, "%s: a user operator must return a tensor", op->name);
        return false;
    }
    TensorType *tt = AS_TENSOR_TYPE(ty);
    for (uint32_t d = 0; d < tt->ndim; d++)
        if (tt->shape[d] < 0) {
            be_error(be, c->base.span, "%s: a user operator needs a static result shape", op->name);
            return false;
        }
    KAttr *rows = arena_array(be->arena, op->n_attrs + 3, sizeof(KAttr));
    if (op->n_attrs) memcpy(rows, schema, sizeof(KAttr) * op->n_attrs);
    KAttr *d = &rows[op->n_attrs], *s = &rows[op->n_attrs + 1], *o = &rows[op->n_attrs + 2];
    o->name = BE_USER_OP;
    o->kind = KA_INT;
    o->i = op->id;
    o->f = (double)op->id;
    d->name = BE_USER_DTYPE;
    d->kind = KA_INT;
    d->i = tt->dtype;
    d->f = (double)tt->dtype;
    s->name = BE_USER_SHAPE;
    s->kind = KA_INTS;
    s->n = tt->ndim;
    s->ints = be_dup(be, tt->shape, tt->ndim, sizeof(int64_t));
    double *fl = arena_array(be->arena, tt->ndim ? tt->ndim : 1, sizeof(double));
    for (uint32_t i = 0; i < tt->ndim; i++)
        fl[i] = (double)tt->shape[i];
    s->floats = fl;
    nd->attrs = rows;
    nd->n_attrs = op->n_attrs + 3;
    nd->fn = user_kernel_call;
    return true;
}

/* Make the lowered rows independent of the module: their strings are the context's interned
 * ones (the executable may outlive the context). */
static void own_strings(Be *be, KAttr *a, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        a[i].name = be_strdup(be, a[i].name);
        if (a[i].kind == KA_STR && a[i].s) a[i].s = be_strdup(be, a[i].s);
        if (a[i].kind == KA_STRS && a[i].n > 0) {
            const char **strs = arena_array(be->arena, a[i].n, sizeof(char *));
            for (uint32_t j = 0; j < a[i].n; j++)
                strs[j] = be_strdup(be, a[i].strs[j]);
            a[i].strs = strs;
        }
    }
}

/* Fill a VM_NODE_CALL for call c of op (attributes lowered into the executable's arena). False
 * after an error. */
static bool call_node(Be *be, Call *c, const OpDef *op, const uint32_t *args, VmNode *nd) {
    StrBuf msg = {0};
    Span where;
    KAttr *attrs = op_lower_attrs(op, c->attrs, be->arena, &msg, &where);
    if (attrs == NULL) {
        be_error(be, where.file ? where : c->base.span, "%s: %s", op->name, sb_cstr(&msg));
        sb_free(&msg);
        return false;
    }
    sb_free(&msg);
    own_strings(be, attrs, op->n_attrs);
    Type *ty = c->base.checked_type;
    nd->kind = VM_NODE_CALL;
    nd->op_id = op->id;
    nd->n_args = c->n_args;
    nd->args = be_dup(be, args, c->n_args, sizeof(uint32_t));
    nd->n_attrs = op->n_attrs;
    nd->attrs = attrs;
    nd->out_tuple = ty != NULL && ty->kind == TYPE_TUPLE;
    nd->n_out = nd->out_tuple ? AS_TUPLE_TYPE(ty)->n : 1;
    nd->loc = be_loc(be, c->base.span);
    if (op->id >= OP_ID_COUNT) return user_attrs(be, c, op, attrs, nd);
    return true;
}

static void key_attrs(StrBuf *k, const KAttr *a, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        sb_printf(k, "|%u:%lld:%a:%s:%u", a[i].kind, (long long)a[i].i, a[i].f,
                  a[i].s ? a[i].s : "", a[i].n);
        if (a[i].kind == KA_INTS)
            for (uint32_t j = 0; j < a[i].n; j++)
                sb_printf(k, ",%lld", (long long)a[i].ints[j]);
        if (a[i].kind == KA_FLOATS)
            for (uint32_t j = 0; j < a[i].n; j++)
                sb_printf(k, ",%a", a[i].floats[j]);
        if (a[i].kind == KA_STRS)
            for (uint32_t j = 0; j < a[i].n; j++)
                sb_printf(k, ",%zu:%s", strlen(a[i].strs[j]), a[i].strs[j]);
    }
}

static void op_packed_name(StrBuf *sb, const char *op) {
    for (const char *p = op; *p; p++)
        sb_putc(sb, *p == '.' ? '_' : *p);
}

/* The packed function of one operator call (shared between equal calls). -1 after an error. */
static int32_t single_packed(Be *be, Call *c, const OpDef *op) {
    uint32_t *ids = sup_malloc(sizeof(uint32_t) * (c->n_args ? c->n_args : 1));
    for (uint32_t i = 0; i < c->n_args; i++)
        ids[i] = i;
    VmNode nd = {0};
    bool ok = call_node(be, c, op, ids, &nd);
    free(ids);
    if (!ok) return -1;
    StrBuf key = {0};
    sb_printf(&key, "%u/%u/%d/%u/%s", op->id, c->n_args, nd.out_tuple, nd.n_out, op->name);
    key_attrs(&key, nd.attrs, nd.n_attrs);
    uintptr_t hit = (uintptr_t)strmap_get(&be->packed_key, key.data, key.len);
    if (hit != 0) {
        sb_free(&key);
        return (int32_t)(hit - 1);
    }
    nd.loc = 0; /* shared: errors are located at the invoking instruction */
    StrBuf name = {0};
    op_packed_name(&name, op->name);
    VmPacked p = {
        .name = be_strdup(be, sb_cstr(&name)),
        .n_inputs = c->n_args,
        .n_nodes = 1,
        .nodes = be_dup(be, &nd, 1, sizeof nd),
        .result = c->n_args,
    };
    sb_free(&name);
    vec_push(&be->packed, p);
    vec_push(&be->packed_types, NULL);
    strmap_put(&be->packed_key, key.data, key.len, (void *)(uintptr_t)be->packed.len);
    sb_free(&key);
    return (int32_t)be->packed.len - 1;
}

/* Box the arguments, invoke packed p, convert the result to the call's kind. */
static uint32_t invoke_packed(FB *fb, Call *call, int32_t p, const uint32_t *args, uint32_t n,
                              uint32_t dst) {
    Span span = call->base.span;
    uint32_t buf[16] = {0};
    uint32_t *ops = n <= 16 ? buf : sup_malloc(sizeof(uint32_t) * n);
    for (uint32_t i = 0; i < n; i++)
        ops[i] = fb_as_kind(fb, args[i], VM_RK_VALUE, span);
    uint32_t at = fb_pool(fb, ops, n);
    if (ops != buf) free(ops);
    uint8_t rk = be_kind_of(call->base.checked_type);
    uint32_t r = dst != BE_NOREG && fb_kind(fb, dst) == VM_RK_VALUE ? dst : fb_reg(fb, VM_RK_VALUE);
    vec_push(&fb_be(fb)->site_types, call->base.checked_type);
    fb_emit(fb,
            (VmInstr){.op = VM_INVOKE_PACKED,
                      .dst = r,
                      .a = (uint32_t)p,
                      .n = n,
                      .args = at,
                      .imm = (int64_t)fb_be(fb)->site_types.len},
            span);
    if (rk == VM_RK_VALUE) return r;
    if (dst != BE_NOREG && fb_kind(fb, dst) == rk) {
        fb_move(fb, dst, r, span);
        return dst;
    }
    return fb_as_kind(fb, r, rk, span);
}

uint32_t be_emit_op_call(FB *fb, Call *call, const uint32_t *args, uint32_t n, uint32_t dst) {
    Be *be = fb_be(fb);
    const OpDef *op = call_op(be, call);
    if (op == NULL) return BE_NOREG;
    uint8_t rk = be_kind_of(call->base.checked_type);
    uint8_t ak[4];
    int sub = -1;
    if (n <= 2) {
        for (uint32_t i = 0; i < n; i++)
            ak[i] = fb_kind(fb, args[i]);
        sub = scalar_sub(op->id, ak, n, rk);
    }
    if (sub >= 0 && op->user_kernel == NULL) {
        uint32_t r = dst != BE_NOREG && fb_kind(fb, dst) == rk ? dst : fb_reg(fb, rk);
        fb_emit(fb,
                (VmInstr){.op = VM_SCALAR,
                          .sub = (uint8_t)sub,
                          .rk = ak[0],
                          .dst = r,
                          .a = args[0],
                          .b = n == 2 ? args[1] : args[0]},
                call->base.span);
        return r;
    }
    int32_t p = single_packed(be, call, op);
    if (p < 0) return BE_NOREG;
    return invoke_packed(fb, call, p, args, n, dst);
}

/* ---- Primitive functions ------------------------------------------------------------------------
 * A Primitive function's body is walked once into a topologically ordered list of dataflow
 * nodes (an explicit stack: fused bodies can be long chains). */

typedef struct DfNode {
    Expr *e;          /* a Call of an operator, a Tuple, a TupleGetItem or a Constant */
    uint32_t n_args;  /* value ids of its operands */
    uint32_t args_at; /* in Df.args */
} DfNode;

typedef struct Df {
    uint32_t n_inputs;
    Vec(DfNode) nodes; /* value n_inputs + i is nodes[i] */
    Vec(uint32_t) args;
    uint32_t result; /* the body's value id */
} Df;

typedef struct DfFrame {
    Expr *e;
    uint32_t step;
} DfFrame;

/* The dataflow program of fn's body; false when the body is something else (a control
 * construct, a call of a function, a free variable). */
static bool df_build(Function *fn, Df *df) {
    PtrMap id = {0}; /* Expr (or Var) -> value id + 1 */
    Vec(DfFrame) st = {0};
    bool ok = true;
    df->n_inputs = fn->n_params;
    for (uint32_t i = 0; i < fn->n_params; i++)
        ptrmap_put(&id, fn->params[i], (void *)(uintptr_t)(i + 1));
    DfFrame first = {fn->body, 0};
    vec_push(&st, first);
    while (st.len > 0 && ok) {
        DfFrame *f = &vec_last(&st);
        Expr *e = f->e;
        if (f->step == 0 && ptrmap_has(&id, e)) {
            st.len--;
            continue;
        }
        switch (e->kind) {
        case EXPR_VAR:
            ok = false; /* a free variable (parameters and let variables are in the map) */
            break;
        case EXPR_LET: {
            Let *l = AS_LET(e);
            if (f->step == 0) {
                f->step = 1;
                DfFrame nx = {l->value, 0};
                vec_push(&st, nx);
            } else if (f->step == 1) {
                f->step = 2;
                ptrmap_put(&id, l->var, ptrmap_get(&id, l->value));
                DfFrame nx = {l->body, 0};
                vec_push(&st, nx);
            } else {
                ptrmap_put(&id, e, ptrmap_get(&id, l->body));
                st.len--;
            }
            break;
        }
        case EXPR_CONSTANT:
        case EXPR_CALL:
        case EXPR_TUPLE:
        case EXPR_TUPLE_GET_ITEM: {
            uint32_t n = 0;
            Expr **kids = NULL;
            Expr *one = NULL;
            if (e->kind == EXPR_CALL) {
                if (AS_CALL(e)->op->kind != EXPR_OP) {
                    ok = false;
                    break;
                }
                n = AS_CALL(e)->n_args;
                kids = AS_CALL(e)->args;
            } else if (e->kind == EXPR_TUPLE) {
                n = AS_TUPLE(e)->n;
                kids = AS_TUPLE(e)->fields;
            } else if (e->kind == EXPR_TUPLE_GET_ITEM) {
                n = 1;
                one = AS_TUPLE_GET_ITEM(e)->tuple;
                kids = &one;
            }
            if (f->step < n) {
                Expr *k = kids[f->step++];
                if (k->kind == EXPR_VAR && !ptrmap_has(&id, k)) {
                    ok = false;
                    break;
                }
                DfFrame nx = {k, 0};
                vec_push(&st, nx);
                break;
            }
            DfNode nd = {.e = e, .n_args = n, .args_at = (uint32_t)df->args.len};
            for (uint32_t i = 0; i < n; i++)
                vec_push(&df->args, (uint32_t)(uintptr_t)ptrmap_get(&id, kids[i]) - 1);
            vec_push(&df->nodes, nd);
            ptrmap_put(&id, e, (void *)(uintptr_t)(df->n_inputs + df->nodes.len));
            st.len--;
            break;
        }
        default: ok = false; break;
        }
    }
    if (ok) df->result = (uint32_t)(uintptr_t)ptrmap_get(&id, fn->body) - 1;
    ptrmap_free(&id);
    vec_free(&st);
    return ok;
}

static void df_free(Df *df) {
    vec_free(&df->nodes);
    vec_free(&df->args);
}

/* The kind of each value of df when all are scalars with VM_SCALAR forms; false otherwise. */
static bool df_scalar(Function *fn, const Df *df, uint8_t *kinds) {
    for (uint32_t i = 0; i < fn->n_params; i++) {
        Type *t = fn->params[i]->base.checked_type;
        kinds[i] = be_kind_of(t);
        if (kinds[i] == VM_RK_VALUE) return false;
    }
    for (size_t i = 0; i < df->nodes.len; i++) {
        const DfNode *nd = &df->nodes.data[i];
        Expr *e = nd->e;
        uint8_t rk = be_kind_of(e->checked_type);
        uint32_t v = df->n_inputs + (uint32_t)i;
        kinds[v] = rk;
        if (rk == VM_RK_VALUE) return false;
        if (e->kind == EXPR_CONSTANT) {
            Constant *k = AS_CONSTANT(e);
            if (k->ndim != 0 || be_kind_of_dtype(k->dtype) != rk) return false;
            continue;
        }
        if (e->kind != EXPR_CALL || nd->n_args > 2) return false;
        const OpDef *op = op_def_of(AS_CALL(e)->op);
        if (op == NULL || op->user_kernel != NULL) return false;
        uint8_t ak[2];
        for (uint32_t j = 0; j < nd->n_args; j++)
            ak[j] = kinds[df->args.data[nd->args_at + j]];
        if (scalar_sub(op->id, ak, nd->n_args, rk) < 0) return false;
    }
    return true;
}

static void scalar_imm(VmInstr *in, Constant *k, uint8_t rk) {
    if (rk == VM_RK_F32 || rk == VM_RK_F64)
        in->fimm = ir_constant_as_f64(k);
    else
        in->imm = ir_constant_as_i64(k);
}

/* Inline VM_SCALAR code for df on args; the result register. */
static uint32_t emit_scalar(FB *fb, const Df *df, const uint8_t *kinds, const uint32_t *args,
                            uint32_t dst) {
    uint32_t nv = df->n_inputs + (uint32_t)df->nodes.len;
    uint32_t *reg = sup_malloc(sizeof(uint32_t) * (nv ? nv : 1));
    for (uint32_t i = 0; i < df->n_inputs; i++)
        reg[i] = args[i];
    for (size_t i = 0; i < df->nodes.len; i++) {
        const DfNode *nd = &df->nodes.data[i];
        uint32_t v = df->n_inputs + (uint32_t)i;
        uint8_t rk = kinds[v];
        bool last = v == df->result;
        uint32_t r = last && dst != BE_NOREG && fb_kind(fb, dst) == rk ? dst : fb_reg(fb, rk);
        reg[v] = r;
        if (nd->e->kind == EXPR_CONSTANT) {
            VmInstr in = {.op = VM_LOAD_IMM, .rk = rk, .dst = r};
            scalar_imm(&in, AS_CONSTANT(nd->e), rk);
            fb_emit(fb, in, nd->e->span);
            continue;
        }
        const OpDef *op = op_def_of(AS_CALL(nd->e)->op);
        uint8_t ak[2];
        uint32_t a[2];
        for (uint32_t j = 0; j < nd->n_args; j++) {
            a[j] = reg[df->args.data[nd->args_at + j]];
            ak[j] = fb_kind(fb, a[j]);
        }
        int sub = scalar_sub(op->id, ak, nd->n_args, rk);
        RLY_CHECK(sub >= 0, "emit_scalar: no scalar form");
        fb_emit(fb,
                (VmInstr){.op = VM_SCALAR,
                          .sub = (uint8_t)sub,
                          .rk = ak[0],
                          .dst = r,
                          .a = a[0],
                          .b = nd->n_args == 2 ? a[1] : a[0]},
                nd->e->span);
    }
    uint32_t r = reg[df->result];
    free(reg);
    return r;
}

int32_t be_packed_of_prim(Be *be, Function *fn) {
    uintptr_t hit = (uintptr_t)ptrmap_get(&be->packed_of, fn);
    if (hit != 0) return (int32_t)hit - 1; /* 0 stored as "not dataflow": -1 */
    Df df = {0};
    int32_t result = -1;
    if (!df_build(fn, &df)) goto out;
    VmNode *nodes = arena_array(be->arena, df.nodes.len ? df.nodes.len : 1, sizeof(VmNode));
    StrBuf name = {0};
    sb_puts(&name, "fused");
    for (size_t i = 0; i < df.nodes.len; i++) {
        const DfNode *nd = &df.nodes.data[i];
        const uint32_t *args = df.args.data + nd->args_at;
        VmNode *vn = &nodes[i];
        Expr *e = nd->e;
        vn->loc = be_loc(be, e->span);
        switch (e->kind) {
        case EXPR_CALL: {
            const OpDef *op = call_op(be, AS_CALL(e));
            if (op == NULL || !call_node(be, AS_CALL(e), op, args, vn)) {
                sb_free(&name);
                goto out;
            }
            if (name.len < 80) {
                sb_putc(&name, '_');
                op_packed_name(&name, op->name);
            }
            break;
        }
        case EXPR_TUPLE:
            vn->kind = VM_NODE_TUPLE;
            vn->n_args = nd->n_args;
            vn->args = be_dup(be, args, nd->n_args, sizeof(uint32_t));
            break;
        case EXPR_TUPLE_GET_ITEM:
            vn->kind = VM_NODE_FIELD;
            vn->n_args = 1;
            vn->args = be_dup(be, args, 1, sizeof(uint32_t));
            vn->index = AS_TUPLE_GET_ITEM(e)->index;
            break;
        case EXPR_CONSTANT:
            vn->kind = VM_NODE_CONST;
            vn->index = be_const(be, AS_CONSTANT(e));
            break;
        default: RLY_UNREACHABLE();
        }
    }
    VmPacked p = {
        .name = be_strdup(be, sb_cstr(&name)),
        .n_inputs = df.n_inputs,
        .n_nodes = (uint32_t)df.nodes.len,
        .nodes = nodes,
        .result = df.result,
    };
    sb_free(&name);
    vec_push(&be->packed, p);
    Type **types = sup_malloc(sizeof(Type *) * (df.nodes.len ? df.nodes.len : 1));
    for (size_t i = 0; i < df.nodes.len; i++)
        types[i] = df.nodes.data[i].e->checked_type;
    vec_push(&be->packed_types, types);
    result = (int32_t)be->packed.len - 1;
out:
    if (!be->failed) ptrmap_put(&be->packed_of, fn, (void *)(uintptr_t)(result + 1));
    df_free(&df);
    return result;
}

/* A Primitive function that only views its one argument: one squeeze, expand_dims or reshape
 * (of the argument or of a field of it) with a static tensor result. It runs as a view
 * (VM_RESHAPE_TENSOR: a header over the same storage; the plan keeps the storage live while
 * the view is): no packed call and no copy. LSTM and GRU steps squeeze their slice of the input
 * projection this way (31 packed calls and 4 KB copies per run). Returns the result register,
 * or BE_NOREG when df is not such a view. */
static uint32_t emit_view(FB *fb, Call *call, const Df *df, const uint32_t *args, uint32_t dst) {
    Be *be = fb_be(fb);
    size_t nn = df->nodes.len;
    if (df->n_inputs != 1 || nn < 1 || nn > 2 || df->result != df->n_inputs + nn - 1)
        return BE_NOREG;
    const DfNode *v = &df->nodes.data[nn - 1], *fl = nn == 2 ? &df->nodes.data[0] : NULL;
    if (v->e->kind != EXPR_CALL || v->n_args != 1 || df->args.data[v->args_at] != nn - 1)
        return BE_NOREG;
    if (fl && (fl->e->kind != EXPR_TUPLE_GET_ITEM || df->args.data[fl->args_at] != 0))
        return BE_NOREG;
    const OpDef *op = op_def_of(AS_CALL(v->e)->op);
    if (op == NULL || op->user_kernel != NULL ||
        (op->id != OP_ID_SQUEEZE && op->id != OP_ID_EXPAND_DIMS && op->id != OP_ID_RESHAPE))
        return BE_NOREG;
    Type *rt = v->e->checked_type, *at = AS_CALL(v->e)->args[0]->checked_type;
    if (rt == NULL || rt->kind != TYPE_TENSOR || at == NULL || at->kind != TYPE_TENSOR ||
        be_kind_of(rt) != VM_RK_VALUE || be_kind_of(call->base.checked_type) != VM_RK_VALUE)
        return BE_NOREG;
    const TensorType *tt = AS_TENSOR_TYPE(rt);
    if (tt->ndim > K_MAX_DIMS) return BE_NOREG;
    for (uint32_t d = 0; d < tt->ndim; d++)
        if (tt->shape[d] < 0) return BE_NOREG;
    Span span = call->base.span;
    uint32_t src = fb_as_kind(fb, args[0], VM_RK_VALUE, span);
    if (fl != NULL) {
        uint32_t r = fb_reg(fb, VM_RK_VALUE);
        fb_emit(
            fb,
            (VmInstr){.op = VM_GET_FIELD, .dst = r, .a = src, .b = AS_TUPLE_GET_ITEM(fl->e)->index},
            span);
        src = r;
    }
    int64_t nd = tt->ndim;
    Expr *k = ir_constant_new(be->ctx, RLY_DTYPE_I64, 1, &nd, tt->shape, span);
    uint32_t rs = fb_reg(fb, VM_RK_VALUE);
    fb_emit(fb, (VmInstr){.op = VM_LOAD_CONST, .dst = rs, .a = be_const(be, AS_CONSTANT(k))}, span);
    uint32_t r = dst != BE_NOREG && fb_kind(fb, dst) == VM_RK_VALUE ? dst : fb_reg(fb, VM_RK_VALUE);
    fb_emit(fb, (VmInstr){.op = VM_RESHAPE_TENSOR, .dst = r, .a = src, .b = rs}, span);
    return r;
}

uint32_t be_emit_prim_call(FB *fb, Call *call, Function *fn, const uint32_t *args, uint32_t n,
                           uint32_t dst) {
    Be *be = fb_be(fb);
    if (n != fn->n_params) {
        be_error(be, call->base.span,
                 "internal error: a Primitive function of %u parameters "
                 "called with %u arguments",
                 fn->n_params, n);
        return BE_NOREG;
    }
    Df df = {0};
    uint32_t r = BE_NOREG;
    if (!df_build(fn, &df)) goto out;
    uint32_t nv = df.n_inputs + (uint32_t)df.nodes.len;
    uint8_t *kinds = sup_malloc(nv ? nv : 1);
    bool scalar = df_scalar(fn, &df, kinds) && df.result >= df.n_inputs;
    if (scalar) {
        uint32_t *conv = sup_malloc(sizeof(uint32_t) * (n ? n : 1));
        for (uint32_t i = 0; i < n; i++)
            conv[i] = fb_as_kind(fb, args[i], kinds[i], call->base.span);
        r = emit_scalar(fb, &df, kinds, conv, dst);
        free(conv);
        uint8_t want = be_kind_of(call->base.checked_type);
        if (fb_kind(fb, r) != want) r = fb_as_kind(fb, r, want, call->base.span);
    }
    free(kinds);
    if (scalar) goto out;
    if ((r = emit_view(fb, call, &df, args, dst)) != BE_NOREG) goto out;
    int32_t p = be_packed_of_prim(be, fn);
    if (p >= 0) r = invoke_packed(fb, call, p, args, n, dst);
out:
    df_free(&df);
    return r;
}
