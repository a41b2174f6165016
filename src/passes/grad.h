/* grad.h - reverse-mode automatic differentiation: the per-operator gradients (grad_ops*.c)
 * and the program transform (gradient.c).
 *
 * An operator's gradient is a C function that builds Relay expressions: given the primal call
 * y = op(a0..an-1) (its attributes and checked types) and the adjoint dy of its result, it
 * builds the adjoint of every argument (the vector-Jacobian product dy^T * dy/dai). The
 * expressions it builds are untyped; the transform type-checks the whole program it emits.
 * Arguments, the result and dy are atoms (variables or constants), so a gradient may use each
 * of them any number of times; a subexpression a gradient uses twice should be let-bound
 * (ir_let_new) so it is computed once. */
#ifndef RLY_PASSES_GRAD_H
#define RLY_PASSES_GRAD_H

#include "ir/ir.h"
#include "ops/ops.h"

typedef struct GradCall {
    Ctx *ctx;
    const Call *call;   /* the primal call (op, attrs, type args); its args are not atoms */
    const OpDef *op;    /* the operator's row */
    const Attrs *attrs; /* call->attrs (may be NULL: defaults apply) */
    uint32_t n_args;
    Expr *const *args;      /* atoms holding the primal arguments */
    Type *const *arg_types; /* their checked types */
    Expr *out;              /* atom holding the primal result y */
    Type *out_type;         /* its checked type (a tuple type for tuple-valued ops) */
    Expr *dout;             /* atom holding dy (same type as y; for a tuple, a tuple of adjoints) */
    Span span;              /* the primal call's span: give it to every node built */
} GradCall;

/* Writes the adjoint of argument i to dargs[i] for i < g->n_args, NULL where no gradient flows
 * (an integer or boolean argument, an index, a shape). Returns false with a message in msg
 * when it cannot differentiate this call (e.g. an attribute value it does not handle). */
typedef bool (*OpGradFn)(const GradCall *g, Expr **dargs, StrBuf *msg);

/* The gradient of operator `op`, NULL when it has none: an array access by op->id (the gradient
 * tables are indexed by operator id once, at first use). */
OpGradFn grad_of(const OpDef *op);
/* The same by name (a registry lookup first), for callers that hold only a name; NULL for
 * unknown names too. */
OpGradFn grad_lookup(const char *name);
/* Number of operators with a gradient row (zero ones included), and the i-th one's name in
 * table order (for `rly ops` and tests). */
size_t grad_count(void);
const char *grad_name_at(size_t i);
/* Whether the gradient of operator `name` is identically zero (comparisons, rounding, argmax,
 * creation ops, shape queries): it gives NULL for every argument. False for unknown names. */
bool grad_is_zero(const char *name);

/* ======================================================================================
 * For the gradient files (grad_ops*.c) only: a builder of adjoint expressions.
 *
 * Every gradient is a GradImpl run by one dispatcher (grad_ops.c), which binds the call's
 * attributes, makes the builder, and afterwards drops the adjoint of every argument that holds
 * no floating-point tensor (integers, bools, indices: no gradient flows). A call whose result
 * holds no floating-point tensor gets NULL for every argument without running the GradImpl.
 * ====================================================================================== */

#define GRAD_MAX_LETS 64

typedef struct GradBuilder {
    const GradCall *g;
    Ctx *ctx;
    Span span;
    RelCall rc; /* the call's attributes (defaults filled): attr_int(&b->rc, "axis") etc. */
    StrBuf *msg;
    /* pending let bindings of the adjoint being built (grad_begin .. grad_end) */
    uint32_t n_lets;
    Var *let_vars[GRAD_MAX_LETS];
    Expr *let_vals[GRAD_MAX_LETS];
} GradBuilder;

/* Writes the adjoints of b->g's arguments into d (already NULL); false with grad_fail on
 * refusal. */
typedef bool (*GradImpl)(GradBuilder *b, Expr **d);

typedef struct GradDef {
    uint32_t op;   /* OP_ID_* */
    GradImpl impl; /* NULL: the gradient is zero (every adjoint NULL) */
} GradDef;

/* Per-family tables, each terminated by GRAD_END; an operator has at most one row in all. */
#define GRAD_END                                                                                   \
    { OP_ID_COUNT, NULL }
extern const GradDef grad_math_table[], grad_transform_table[], grad_nn_table[];

/* Refuse: the message (it should name the attribute at fault); returns false. */
bool grad_fail(GradBuilder *b, const char *fmt, ...) RLY_PRINTF(2, 3);

/* Let bindings: grad_let binds value to a fresh variable (returned; an atom is returned as it
 * is) inside the adjoint begun by grad_begin; grad_end wraps body in the bindings made since.
 * One adjoint at a time: a variable bound for one adjoint must not appear in another. */
void grad_begin(GradBuilder *b);
Expr *grad_let(GradBuilder *b, Expr *value);
Expr *grad_end(GradBuilder *b, Expr *body);

/* Calls (attrs may be NULL) and attributes. */
Expr *grad_call(GradBuilder *b, const char *op, uint32_t n, Expr *const *args, const Attrs *attrs);
Expr *grad_op1(GradBuilder *b, const char *op, Expr *x);
Expr *grad_op2(GradBuilder *b, const char *op, Expr *x, Expr *y);
Expr *grad_op1a(GradBuilder *b, const char *op, Expr *x, const Attrs *attrs);
Expr *grad_op2a(GradBuilder *b, const char *op, Expr *x, Expr *y, const Attrs *attrs);
/* n pairs: const char *key, AttrValue *value. */
const Attrs *grad_attrs(GradBuilder *b, uint32_t n, ...);
AttrValue *grad_ai(GradBuilder *b, int64_t v);
AttrValue *grad_af(GradBuilder *b, double v);
AttrValue *grad_ab(GradBuilder *b, bool v);
AttrValue *grad_as(GradBuilder *b, const char *s);
AttrValue *grad_ais(GradBuilder *b, uint32_t n, const int64_t *v);
AttrValue *grad_anone(GradBuilder *b);
/* The call's attribute `key` as given (or its default): for passing attributes through. */
AttrValue *grad_attr_same(GradBuilder *b, const char *key);

/* Arithmetic on expressions (broadcasting operators). */
Expr *grad_add(GradBuilder *b, Expr *x, Expr *y);
Expr *grad_sub(GradBuilder *b, Expr *x, Expr *y);
Expr *grad_mul(GradBuilder *b, Expr *x, Expr *y);
Expr *grad_div(GradBuilder *b, Expr *x, Expr *y);
Expr *grad_neg(GradBuilder *b, Expr *x);
/* A scalar constant of dtype dt. */
Expr *grad_scalar(GradBuilder *b, rly_dtype dt, double v);
/* where(cond, x, zeros_like(x)). */
Expr *grad_mask(GradBuilder *b, Expr *cond, Expr *x);
/* sum(x, axis=axes, keepdims, exclude). */
Expr *grad_sum(GradBuilder *b, Expr *x, uint32_t n_axes, const int64_t *axes, bool keepdims,
               bool exclude);
/* reshape(x, newshape) with a static shape. */
Expr *grad_reshape(GradBuilder *b, Expr *x, uint32_t n, const int64_t *shape);
/* collapse_sum_like(x, like) unless the two types are equal. */
Expr *grad_collapse(GradBuilder *b, Expr *x, Type *x_type, Expr *like, Type *like_type);

/* size(x) / size(y) as a scalar of dtype dt (elements of x per element of y), computed at run
 * time (for shapes with `?` dims). */
Expr *grad_size_ratio(GradBuilder *b, Expr *x, Expr *y, rly_dtype dt);

/* Types: argument i / the result as a tensor type (NULL when not a tensor). */
TensorType *grad_arg_tensor(GradBuilder *b, uint32_t i);
TensorType *grad_out_tensor(GradBuilder *b);
/* Every dim of t is a constant; otherwise grad_fail naming `what` and returns false. */
bool grad_need_static(GradBuilder *b, const TensorType *t, const char *what);
/* Element count of a static shape. */
int64_t grad_numel(const TensorType *t);
/* The reduced axes of a reduce-style call (attributes axis, exclude when has_exclude) on a
 * tensor of rank ndim: red[i] true for reduced axis i. */
void grad_reduce_axes(GradBuilder *b, uint32_t ndim, bool has_exclude, bool *red);
/* dy of a reduction (shape with the reduced axes dropped unless keepdims) reshaped to keep
 * them as 1s, so that it broadcasts against the input. */
Expr *grad_keep_dims(GradBuilder *b, Expr *dy, uint32_t ndim, const bool *red, bool keepdims);
/* v, a 1-D vector along `axis` of a rank-ndim tensor, reshaped to broadcast against it. */
Expr *grad_along(GradBuilder *b, Expr *v, uint32_t ndim, int64_t axis);

#endif /* RLY_PASSES_GRAD_H */
