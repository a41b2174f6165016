/* ops.h - the operator table: one row (OpDef) per operator, with its arity, attribute schema
 * (types, defaults, allowed values), type relation, fusion pattern and a doc line. The
 * interface of src/ops/.
 *
 * Every builtin operator has a dense id (OP_ID_*, support/ops.def). Rows (OP_ROW, one shape for
 * all) live in per-category tables (op_unary.c, op_binary.c, op_reduce.c, op_transform.c,
 * op_nn.c, op_conv_pool.c, op_image_vision.c, op_qnn.c, ...), each next to the relations it
 * uses; ops.c collects them into one registry, indexed by id, at first use. Users add rows at
 * run time through rly_op_register (include/rly/rly.h); they get the ids after the builtins.
 *
 * A type relation is a function of the argument types (and the attributes) that computes the
 * result type. It is run by the type solver (src/types) whenever its arguments may have become
 * known, until a fixpoint:
 *   - REL_OK: rc->out holds the result type;
 *   - REL_DEFER: an argument's type is not known yet (an IncompleteType): try again later;
 *   - REL_ERROR: the arguments are invalid; rc->msg says why, in words, without the op name
 *     (the solver prefixes it: "nn.conv2d: data has 3 channels but weight expects 4").
 * Relations never see the solver's error type: a call with an erroneous argument is not run.
 *
 * Dimensions follow ir.h: d >= 0 constant, DIM_ANY (`?`), d <= DIM_SYM_BASE symbolic. Every
 * relation accepts `?` and symbolic dims: a check that cannot be decided passes, and a result
 * that cannot be computed is `?` (the dim_* helpers below do this). */
#ifndef RLY_OPS_H
#define RLY_OPS_H

#include "ir/ir.h"

/* Fusion patterns, numbered as Relay numbers TOpPattern. */
typedef enum OpPattern {
    OP_ELEMWISE = 0,
    OP_BROADCAST = 1,
    OP_INJECTIVE = 2,
    OP_COMM_REDUCE = 3,
    OP_OUT_EWISE_FUSABLE = 4,
    OP_TUPLE = 7,
    OP_OPAQUE = 8,
} OpPattern;
const char *op_pattern_name(OpPattern p); /* "elemwise", "broadcast", ... */

/* ---- attribute schema ------------------------------------------------------------------ */

typedef enum AttrType {
    AT_INT,       /* integer literal (bool literals accepted as 0/1) */
    AT_FLOAT,     /* number literal */
    AT_BOOL,      /* True/False (integer literals accepted) */
    AT_STR,       /* string; `choices` restricts it */
    AT_DTYPE,     /* string naming a dtype ("float32"), or "" for "same as input" */
    AT_INTS,      /* list of integers (a single integer is taken as a list of one) */
    AT_FLOATS,    /* list of numbers */
    AT_STRS,      /* list of strings */
    AT_OPT_INT,   /* integer or None */
    AT_OPT_INTS,  /* list of integers, or None */
    AT_OPT_FLOAT, /* number or None */
    AT_ANY,       /* any attribute value (not interpreted by the relation) */
} AttrType;

typedef struct AttrSpec {
    const char *name;
    AttrType type;
    const char *dflt;    /* default, written as in Relay text: "0", "[1, 1]", "\"NCHW\"", "None",
                          * "True", "\"\""; NULL means the attribute is required */
    const char *choices; /* AT_STR: allowed values separated by '|', NULL for any */
} AttrSpec;

/* ---- relations --------------------------------------------------------------------------- */

typedef enum RelResult { REL_OK, REL_DEFER, REL_ERROR } RelResult;

typedef struct OpDef OpDef;
typedef struct RelCall {
    Ctx *ctx;
    const OpDef *op;
    uint32_t n_args;
    Type *const *args;             /* resolved argument types; IncompleteType where not yet known */
    const AttrValue *const *attrs; /* one per schema row: the given value or the default */
    Type *out;                     /* REL_OK: the result type */
    StrBuf *msg;                   /* REL_ERROR: the reason */
    int err_arg;                   /* REL_ERROR: the argument at fault, or -1 for the call */
    RelResult status;              /* set by the rel_* helpers that fail */
} RelCall;

typedef RelResult (*RelFn)(RelCall *rc);

struct OpDef {
    uint32_t id;           /* OP_ID_* (support/ops.def); registered operators: OP_ID_COUNT and up */
    const char *name;      /* TVM's name: "add", "nn.conv2d"; builtins: set by the registry */
    int n_args;            /* number of arguments, or OP_VARIADIC */
    uint8_t pattern;       /* OpPattern */
    RelFn rel;             /* the type relation */
    const AttrSpec *attrs; /* schema, terminated by a row with name NULL; NULL when none */
    const char *arg_names; /* "data, weight" (for messages and docs) */
    const char *doc;       /* one line */
    /* filled by the registry */
    uint32_t n_attrs;
    const AttrValue **defaults; /* per schema row; NULL for required attributes */
    /* user-registered operators (rly_op_register) */
    const void *user_rel;
    const void *user_kernel;
    void *user_data;
};
#define OP_VARIADIC (-1)

/* The one shape of a builtin row: OP_ROW(ID, n_args, pattern, rel, attrs, arg_names, doc), ID as
 * in support/ops.def (LOG, NN_CONV2D), which also gives the row its name. */
#define OP_ROW(ID, N_ARGS, PATTERN, REL, ATTRS, ARG_NAMES, DOC)                                    \
    {                                                                                              \
        .id = OP_ID_##ID, .n_args = (N_ARGS), .pattern = (PATTERN), .rel = (REL),                  \
        .attrs = (ATTRS), .arg_names = (ARG_NAMES), .doc = (DOC)                                   \
    }

/* Each category file defines one table of OP_ROWs, terminated by a row {0} (rel NULL); together
 * they hold one row per id of support/ops.def, which the registry checks at first use. */
extern OpDef ops_unary_table[], ops_binary_table[], ops_reduce_table[], ops_transform_table[],
    ops_nn_table[], ops_conv_pool_table[], ops_image_vision_table[], ops_qnn_table[],
    ops_misc_table[], ops_index_table[], ops_dyn_table[];

/* ---- the registry --------------------------------------------------------------------------- */

/* The row for `name` (builtin or registered), NULL when unknown. Thread-safe after first use. */
const OpDef *op_lookup(const char *name, size_t len);
/* Every operator by id: the builtin ones (OP_ID_*), then the registered ones in registration
 * order, so op_at(i)->id == i. op_at returns NULL for i >= op_count(). */
size_t op_count(void);
const OpDef *op_at(size_t i);
/* Add a row at run time and give it the next id; the row and what it points to must outlive the
 * process's use of it. Returns false (with a message) when the name is taken or the schema's
 * defaults are invalid. */
bool op_register(OpDef *def, StrBuf *msg);
/* The row of the operator an Op node names (resolved by name once per context and kept in
 * Op.info); NULL when no operator has that name. Inline: the interpreter asks at every call. */
const OpDef *op_resolve(Expr *op); /* the lookup op_def_of makes while Op.info is unset */
static inline const OpDef *op_def_of(Expr *op) {
    const OpDef *d = AS_OP(op)->info;
    return d != NULL ? d : op_resolve(op);
}
/* The id of the operator e calls (a Call whose callee is a known operator), or -1. */
int op_call_id(Expr *e);
/* The operator names closest to `name` (for "did you mean"): writes up to one suggestion. */
const char *op_suggest(const char *name, size_t len);

/* Validate a call's attributes against the schema and fill vals[0..op->n_attrs) with the given
 * values or the defaults. On error returns false, writes the reason to msg and the offending
 * value's span (or SPAN_NONE) to *where. */
bool op_bind_attrs(const OpDef *op, const Attrs *attrs, const AttrValue **vals, StrBuf *msg,
                   Span *where);

/* Lower a call's attributes to kernel attributes (kernels/kernel.h): validated as op_bind_attrs
 * does, then one KAttr per schema row in schema order, the defaults filled in; nested lists
 * (nn.pad's pad_width) are flattened row by row, dtype attributes become the rly_dtype (-1 for
 * ""). Done once per call site: the interpreter caches the result per call node, a compiled
 * program per instruction. Everything is allocated in `arena`. Returns the rows (op->n_attrs of
 * them; never NULL on success, even for none), or NULL with the reason in msg and the offending
 * value's span (or SPAN_NONE) in *where. */
typedef struct KAttr KAttr;
KAttr *op_lower_attrs(const OpDef *op, const Attrs *attrs, Arena *arena, StrBuf *msg, Span *where);

/* Run the relation of `op` on resolved argument types. */
RelResult op_relate(Ctx *ctx, const OpDef *op, const AttrValue *const *vals, uint32_t n_args,
                    Type *const *args, Type **out, StrBuf *msg, int *err_arg);

/* ---- helpers for relations ------------------------------------------------------------------ */

/* Argument i as a tensor type. NULL (and rc->status set) when it is not known yet or not a
 * tensor; the caller returns rc->status. */
TensorType *rel_tensor(RelCall *rc, uint32_t i);
#define REL_TENSOR(var, rc, i)                                                                     \
    TensorType *var = rel_tensor((rc), (i));                                                       \
    if (var == NULL) return (rc)->status
/* Argument i as a tuple of tensors (n fields written to *n); NULL like rel_tensor. */
TensorType **rel_tensor_tuple(RelCall *rc, uint32_t i, uint32_t *n);
/* Fail: formats the reason into rc->msg; returns REL_ERROR. */
RelResult rel_error(RelCall *rc, const char *fmt, ...) RLY_PRINTF(2, 3);
RelResult rel_error_arg(RelCall *rc, int arg, const char *fmt, ...) RLY_PRINTF(3, 4);
/* Succeed with a type / a tensor type. */
RelResult rel_out(RelCall *rc, Type *t);
RelResult rel_out_tensor(RelCall *rc, rly_dtype dt, uint32_t ndim, const int64_t *shape);
/* Text of a type or a shape for messages (in the ctx arena). */
const char *rel_type_str(RelCall *rc, Type *t);
const char *rel_shape_str(RelCall *rc, uint32_t ndim, const int64_t *shape);
const char *rel_dim_str(RelCall *rc, int64_t d);
/* Normalize axis (negative counts from the end) into [0, ndim); REL_ERROR message when out of
 * range. `what` names the attribute ("axis"). Returns false on error (rc->status set). */
bool rel_axis(RelCall *rc, int64_t axis, uint32_t ndim, const char *what, int64_t *out);
/* Scratch array of n int64 in the ctx arena. */
int64_t *rel_dims(RelCall *rc, uint32_t n);
/* The dtype class checks used by many relations. */
bool rel_is_float(rly_dtype dt);
bool rel_is_integer(rly_dtype dt); /* signed or unsigned integer (not bool) */

/* Checked dimension arithmetic for results: a constant over DIM_LIMIT is an error ("too
 * large"); `?` and symbolic operands give `?` as dim_add/dim_mul do. False when rc->status is
 * set. DIM_LIMIT is the shape limit of support.h ("shapes"), which op_relate also enforces on
 * every argument and result type, so a relation never sees a dim over 2^62. */
#define DIM_LIMIT SUP_DIM_MAX
bool rel_dim_add(RelCall *rc, int64_t a, int64_t b, int64_t *out);
bool rel_dim_mul(RelCall *rc, int64_t a, int64_t b, int64_t *out);

/* Data layouts (support.h, "data layouts": the one parser, shared with the kernels). */
#define LAYOUT_MAX SUP_LAYOUT_MAX
typedef SupLayout Layout;
/* Parse `text` (the value of attribute `attr`); false with an error when it is not a layout. */
bool rel_layout_parse(RelCall *rc, const char *attr, const char *text, Layout *l);
/* The position of axis `a` in l, or -1. */
static inline int layout_find(const Layout *l, char a) { return sup_layout_find(l, a); }
/* t (argument `arg`, called `what` in messages) has l's rank and l's block sizes. */
bool rel_layout_fits(RelCall *rc, int arg, const TensorType *t, const Layout *l, const char *what);

/* Attribute values by schema name (the name must be in the op's schema: a bug otherwise). */
int64_t attr_int(const RelCall *rc, const char *name);
double attr_float(const RelCall *rc, const char *name);
bool attr_bool(const RelCall *rc, const char *name);
const char *attr_str(const RelCall *rc, const char *name);
bool attr_is_none(const RelCall *rc, const char *name);
/* AT_DTYPE: the dtype, or -1 for "" (same as the input). */
int attr_dtype(const RelCall *rc, const char *name);
/* AT_DTYPE: the dtype, or dflt for "". */
rly_dtype attr_dtype_or(const RelCall *rc, const char *name, rly_dtype dflt);
/* Lists: the number of items; the values in an arena array written to *out (never NULL). */
uint32_t attr_ints(const RelCall *rc, const char *name, const int64_t **out);
uint32_t attr_floats(const RelCall *rc, const char *name, const double **out);
const AttrValue *attr_value(const RelCall *rc, const char *name);

/* ---- dimension arithmetic: exact on constants, `?` when unknowable ------------------------- */

static inline bool dim_known(int64_t d) { return d >= 0; }
/* a and b may be equal at run time (equal, or either not a constant). */
static inline bool dim_compat(int64_t a, int64_t b) {
    return a == b || !dim_known(a) || !dim_known(b);
}
/* Of two compatible dims, the more precise (constant, then symbolic, then `?`). */
int64_t dim_merge(int64_t a, int64_t b);
/* Numpy broadcasting of one dim pair; false when they cannot broadcast. */
bool dim_broadcast(int64_t a, int64_t b, int64_t *out);
int64_t dim_add(int64_t a, int64_t b);
int64_t dim_sub(int64_t a, int64_t b);
int64_t dim_mul(int64_t a, int64_t b);
int64_t dim_floordiv(int64_t a, int64_t b); /* b > 0 when known */
int64_t dim_ceildiv(int64_t a, int64_t b);
/* Broadcast two shapes (numpy rules) into out (arena); false when they do not broadcast (the
 * message names the first failing pair). */
bool rel_broadcast(RelCall *rc, uint32_t na, const int64_t *a, uint32_t nb, const int64_t *b,
                   uint32_t *nout, int64_t **out);

#endif /* RLY_OPS_H */
