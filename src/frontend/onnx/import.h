/* import.h - the ONNX importer: an OxModel (onnx.h) to a Relay module whose @main takes the
 * graph inputs that are not initializers and returns the graph outputs (one output: the tensor;
 * several: a tuple). Initializers become constants that borrow the mapped weights.
 *
 * The core (import.c) walks the nodes in dependency order (its own topological sort; cycles
 * and dangling inputs are errors naming the node), keeps a map from ONNX value names to Relay
 * expressions, and calls a converter per node. Every expression a converter builds through
 * imp_call gets its type at once from the operator's relation, and a call whose arguments are
 * all constants is folded by the reference kernels at import time, so shape computations
 * (Shape -> Gather -> Concat -> Reshape) become constant attributes. Diagnostics carry the
 * node's span: a line "OpType 'name' (node N)" of a pseudo source named after the model, so an
 * error prints as `model.onnx:13:1: error: Conv 'conv1': ...`.
 *
 * Converters live in import_<category>.c, one table each (ImpConv rows); they read inputs and
 * attributes through the imp_* accessors and set outputs with imp_out. A converter returns false
 * after reporting an error with imp_error (or after imp_call reported one). */
#ifndef RLY_ONNX_IMPORT_H
#define RLY_ONNX_IMPORT_H

#include "frontend/onnx/onnx.h"
#include "ir/ir.h"
#include "ops/ops.h"

typedef struct Imp Imp;

typedef bool (*ImpConvFn)(Imp *imp);

typedef struct ImpConv {
    const char *op_type; /* "Conv" */
    const char *domain;  /* "" = ai.onnx, "com.microsoft", ... */
    int since;           /* lowest opset version this row handles (rows of one op in any order) */
    ImpConvFn fn;
} ImpConv;

/* Converter tables, each terminated by a row with op_type NULL. */
extern const ImpConv imp_conv_elem[];   /* import_elem.c: unary, binary, logical, cast, ... */
extern const ImpConv imp_conv_shape[];  /* import_shape.c: reshape, transpose, slice, gather, ... */
extern const ImpConv imp_conv_reduce[]; /* import_reduce.c: Reduce*, ArgMax, TopK, CumSum, ... */
extern const ImpConv imp_conv_nn[];     /* import_nn.c: Conv, pools, norms, Gemm, activations */
extern const ImpConv imp_conv_rnn[];    /* import_rnn.c: LSTM, GRU, RNN */
extern const ImpConv imp_conv_misc[];   /* import_misc.c: Resize, NMS, RoiAlign, quantization */
extern const ImpConv
    imp_conv_extra[];                /* import_extra.c: Det, TfIdfVectorizer, training optimizers */
extern const ImpConv imp_conv_seq[]; /* import_seq.c: sequences and optionals */
extern const ImpConv imp_conv_control[]; /* import.c: If, Loop, Scan, Constant, Identity */

/* The newest ai.onnx opset the converters handle (every operator whose semantics changed up to
 * it has its row); a model importing a newer one is refused before any node is converted, and
 * `rly info` reports it (imp_opset_unsupported). */
#define IMP_OPSET_MAX 22
/* When model m imports an ai.onnx opset newer than IMP_OPSET_MAX: that opset; else 0. */
int64_t imp_opset_unsupported(const OxModel *m);

/* The converter for op_type/domain at an opset (the row with the greatest `since` <= opset);
 * NULL when none. */
const ImpConv *imp_find_conv(const char *op_type, const char *domain, int64_t opset);

/* ---- the node being converted ------------------------------------------------------------ */

const OxNode *imp_node(Imp *imp);
int64_t imp_opset(Imp *imp); /* the model's opset for the node's domain */
Span imp_span(Imp *imp);     /* the node's span */
Ctx *imp_ctx(Imp *imp);
uint32_t imp_n_inputs(Imp *imp);  /* node inputs, counting omitted ("") ones */
uint32_t imp_n_outputs(Imp *imp); /* node outputs, counting omitted ones */

/* Input i, or NULL when omitted or i >= the number of inputs. */
Expr *imp_in(Imp *imp, uint32_t i);
/* Input i, reporting "input i (what) is required" when it is missing. */
Expr *imp_in_req(Imp *imp, uint32_t i, const char *what);
/* Set output i (ignored when the node does not name output i). */
void imp_out(Imp *imp, uint32_t i, Expr *e);
/* imp_out for a result that may be NULL (an error was reported): false then, true otherwise. */
bool imp_set_out(Imp *imp, uint32_t i, Expr *e);
/* Does the node name output i (an optional output left out is "")? */
bool imp_wants_out(Imp *imp, uint32_t i);
/* Required input i, which must be a tensor (reports and gives NULL otherwise). */
Expr *imp_tin(Imp *imp, uint32_t i, const char *what);

/* Report an error at the node: "OpType 'name': <message>". Returns false. */
bool imp_error(Imp *imp, const char *fmt, ...) RLY_PRINTF(2, 3);

/* ---- attributes (of the current node) ------------------------------------------------------ */

const OxAttr *imp_attr(Imp *imp, const char *name); /* NULL when absent */
int64_t imp_attr_int(Imp *imp, const char *name, int64_t dflt);
double imp_attr_float(Imp *imp, const char *name, double dflt);
const char *imp_attr_str(Imp *imp, const char *name, const char *dflt);
/* ints attribute: number of values and *out (NULL and 0 when absent). */
uint32_t imp_attr_ints(Imp *imp, const char *name, const int64_t **out);
uint32_t imp_attr_floats(Imp *imp, const char *name, const float **out);

/* ---- types and constants of expressions ------------------------------------------------------ */

Type *imp_type(Expr *e); /* the type computed on creation (never NULL for imp-made exprs) */
/* The tensor type of e, or NULL (not a tensor). */
TensorType *imp_tt(Expr *e);
/* Rank of a tensor expression (its type always has a known rank). */
uint32_t imp_rank(Expr *e);
rly_dtype imp_dtype(Expr *e);
/* e as a constant (NULL when its value is not known at import time). */
Constant *imp_const(Expr *e);
/* A constant integer tensor (any integer dtype, rank <= 1) as int64 values in the import arena.
 * False when e is not constant or not integer. */
bool imp_const_ints(Imp *imp, Expr *e, const int64_t **vals, uint32_t *n);
/* A constant scalar (or one-element tensor) as double; false when not constant. */
bool imp_const_f64(Expr *e, double *v);

/* rly dtype of an ONNX data type; -1 (after reporting) when Relay has none. The float8 types
 * give float32 and INT4/UINT4 int8/uint8: their values are carried emulated, exactly, in those
 * dtypes (docs/onnx.md, "float8 and int4 emulation"). */
int imp_onnx_dtype(Imp *imp, int32_t onnx_type);
/* Record that e holds values of the emulated ONNX type onnx_type (ignored for other types) /
 * the emulated ONNX type recorded for e, 0 when none (initializers, Constant values, graph
 * inputs and the results of Cast and QuantizeLinear to these types are recorded). */
void imp_emul_mark(Imp *imp, Expr *e, int32_t onnx_type);
int32_t imp_emul_type(Imp *imp, Expr *e);
/* x cast to the ONNX data type `to`, emulated types included: a float8 type rounds x (as
 * float32) to the format's nearest value, ties to even, overflow saturating to the largest
 * finite value when `saturate`, else giving inf (e5m2) or NaN (the others); INT4/UINT4 round
 * float x half to even and clip to [-8, 7] / [0, 15] (integers are clipped). The result is
 * recorded (imp_emul_mark). NULL after reporting (a type Relay lacks and does not emulate). */
Expr *imp_cast_onnx(Imp *imp, Expr *x, int32_t to, bool saturate);

/* ---- building expressions ---------------------------------------------------------------------
 */

/* Attribute lists for imp_call: `ImpAttrs a = {0}; ia_int(&a, "axis", 1); ...`. */
typedef struct ImpAttrs {
    uint32_t n;
    const char *keys[24];
    AttrValue *vals[24];
} ImpAttrs;
void ia_int(Imp *imp, ImpAttrs *a, const char *key, int64_t v);
void ia_float(Imp *imp, ImpAttrs *a, const char *key, double v);
void ia_bool(Imp *imp, ImpAttrs *a, const char *key, bool v);
void ia_str(Imp *imp, ImpAttrs *a, const char *key, const char *v);
void ia_ints(Imp *imp, ImpAttrs *a, const char *key, uint32_t n, const int64_t *v);
void ia_floats(Imp *imp, ImpAttrs *a, const char *key, uint32_t n, const double *v);
void ia_none(Imp *imp, ImpAttrs *a, const char *key);
/* A nested list of pairs [[v0, v1], [v2, v3], ...] (nn.pad's pad_width): n_pairs pairs. */
void ia_pairs(Imp *imp, ImpAttrs *a, const char *key, uint32_t n_pairs, const int64_t *v);

/* Call operator `op` (a name of the operator table) on args with attributes a (NULL for none).
 * A NULL argument (the result of a failed call, already reported) gives NULL, so converters can
 * chain calls and check once.
 * Types it with the operator's relation at once; folds it when every argument is a constant
 * and the result is small. Returns NULL after reporting a located error (the relation's
 * message) when the call does not type-check. */
Expr *imp_call(Imp *imp, const char *op, uint32_t n_args, Expr *const *args, const ImpAttrs *a);
/* A run-time error as a value: a `trap` call of type Tensor[shape, dt] (DIM_ANY dims: `?`) whose
 * message is "<op_type> '<node name>': <what>", the form of every converter's run-time check. */
Expr *imp_trap(Imp *imp, uint32_t ndim, const int64_t *shape, rly_dtype dt, const char *what);
/* Shorthands for one and two arguments. */
Expr *imp_call1(Imp *imp, const char *op, Expr *x, const ImpAttrs *a);
Expr *imp_call2(Imp *imp, const char *op, Expr *x, Expr *y, const ImpAttrs *a);

Expr *imp_tuple(Imp *imp, uint32_t n, Expr *const *fields);
Expr *imp_get(Imp *imp, Expr *tuple, uint32_t i); /* tuple field (folds over a Tuple node) */

/* Constants (typed, spanned at the node). */
Expr *imp_scalar(Imp *imp, rly_dtype dt, double v);
Expr *imp_scalar_i(Imp *imp, rly_dtype dt, int64_t v);
Expr *imp_const_tensor(Imp *imp, rly_dtype dt, uint32_t ndim, const int64_t *shape,
                       const void *data);                     /* copies data */
Expr *imp_const_i64s(Imp *imp, uint32_t n, const int64_t *v); /* 1-D int64 */

/* Cast e to dt (no-op when it already has that dtype). */
Expr *imp_cast(Imp *imp, Expr *e, rly_dtype dt);

/* x as a value of type t, a less precise type of x's (dims `?`): an annotated let when x's type
 * differs (NULL when x is NULL). */
Expr *imp_upcast(Imp *imp, Expr *x, Type *t);
/* `if (cond) { then_e } else { else_e }` typed with the join of the branches' types (differing
 * dims `?`), each branch upcast to it; NULL when an argument is NULL or they cannot join. */
Expr *imp_if(Imp *imp, Expr *cond, Expr *then_e, Expr *else_e);

/* Memory for a converter's temporaries (freed with the importer). */
void *imp_alloc(Imp *imp, size_t n);

/* ---- entry point (for the API and the CLI) -----------------------------------------------------
 */

typedef struct ImpShape {
    const char *name; /* graph input */
    uint32_t ndim;
    int64_t dims[32];
} ImpShape;

typedef struct ImpOptions {
    const ImpShape *shapes; /* --input-shapes: concrete shapes for graph inputs */
    uint32_t n_shapes;
    bool no_fold; /* keep calls on constants (tests of the converters themselves) */
    /* The main graph's floating-point initializers of rank >= 1 become parameters of @main
     * after the graph inputs (rly import --params-as-inputs); the others, and those a node
     * reads as a setting (Resize scales, Clip bounds, ...: settings_read), stay constants. */
    bool params_as_inputs;
    /* Graph inputs given values (`rly test`, for a test that feeds as an input what the
     * converter needs at import: Col2Im's image_shape, AffineGrid's size): each named input
     * becomes a constant of its tensor instead of a parameter of @main. */
    const char *const *bind_names;
    const OxTensor *const *bind_vals;
    uint32_t n_binds;
} ImpOptions;

/* Import m into a new module of ctx (@main). NULL after reporting every error into ctx->diags
 * (all unsupported operators at once, with their domains and opsets). The module's constants
 * borrow m's memory: keep m alive as long as ctx (ir_ctx_keep). */
Module *imp_import(Ctx *ctx, const OxModel *m, const ImpOptions *opts);

/* A constant for an ONNX tensor (borrowing its bytes when borrow is set); NULL after an error. */
Expr *imp_tensor_const(Imp *imp, const OxTensor *t, bool borrow);
/* rly dtype of an ONNX data type, -1 when none. */
int ox_to_rly_dtype(int32_t onnx_type);

/* ==== added for sequences and optionals (import_seq.c; implemented in import.c) ===============
 * An ONNX seq(tensor(T)) is the prelude's List[Tensor[(?, ..., ?), T]] and optional(V) is
 * Option[V], with V's tensors typed all-`?` the same way: the elements of one sequence differ in
 * shape, so only dtype and rank are part of the type (see import_seq.c for the whole design).
 * An element type can be unknown for a while: an IncompleteType (an "ElemVar" of import.c)
 * fixed by the first tensor put in (imp_elem_unify, imp_join) or by a rank hint (imp_force). */

/* The module being built, holding the prelude (parsed into it on first use): List, Option, their
 * constructors and functions. Globals @main does not use are dropped at the end. */
Module *imp_module(Imp *imp);
Type *imp_list_type(Imp *imp, Type *elem); /* List[elem] */
Type *imp_option_type(Imp *imp, Type *t);  /* Option[t] */
/* The element type of List[E] / the value type of Option[T] (resolved); NULL for other types. */
Type *imp_list_elem(Imp *imp, Type *t);
Type *imp_option_elem(Imp *imp, Type *t);
/* A new unknown element type: tensors of rly dtype `dtype` (-1: unknown too) whose rank is
 * rank_hint when nothing else fixes it (-1: no hint). what names it in messages. */
Type *imp_elem_new(Imp *imp, int dtype, int32_t rank_hint, const char *what);
/* t with the element types fixed so far substituted (t itself when none). */
Type *imp_resolve(Imp *imp, Type *t);
/* imp_resolve, and every unknown element type takes its hint; NULL after reporting (at the node)
 * that one has none. For converters that need the tensors' type (SequenceAt, ...). */
Type *imp_force(Imp *imp, Type *t);
/* Make two element types one (an unknown one takes the other's dtype and rank, all-`?`);
 * false when their dtypes or ranks differ. */
bool imp_elem_unify(Imp *imp, Type *a, Type *b);
/* Join two types of one value (If branches, loop iterations): differing dims become `?`,
 * containers are joined element-wise; NULL when dtypes, ranks or kinds differ. */
Type *imp_join(Imp *imp, Type *a, Type *b);
/* t with every tensor dim `?` (inside tuples and containers too). */
Type *imp_any_dims(Imp *imp, Type *t);
/* The Relay type of an ONNX type (a TypeProto attribute): tensors keep their dims; the tensors of
 * sequences and optionals are all-`?`. NULL after reporting at the node; what names the value. */
Type *imp_onnx_type(Imp *imp, const OxType *t, const char *what);
/* A variable annotated (and typed) t. */
Var *imp_var(Imp *imp, const char *name, Type *t);
/* Convert subgraph g as the body of a function (SequenceMap): a boundary scope where its first n
 * inputs are bound to vals (the function's variables); values of enclosing graphs it reads become
 * new variables appended to *cap_inner, standing for the expressions appended to *cap_outer,
 * which the caller passes in. Returns g's outputs, NULL after an error. */
Expr **imp_convert_body(Imp *imp, const OxGraph *g, uint32_t n, Expr *const *vals,
                        PtrVec *cap_outer, PtrVec *cap_inner);

/* ---- row accumulators (import_seq.c): the scan outputs of Loop and Scan ----------------------
 * A scan output grows by one row per iteration. Concatenating each row onto the result so far
 * copies that result every time (quadratic in the iterations); instead the rows are collected
 * in a List (a Cons each, newest first) and joined once at the end, by log2(n) passes that
 * concatenate neighbours (@seq_merge: n - 1 concatenations, each row copied about log2(n)
 * times). The rows of one output share a type: elem, Tensor[(?, row dims...), dtype]. */
Type *imp_rows_elem(Imp *imp, const TensorType *row); /* (?, row...) */
Type *imp_rows_type(Imp *imp, Type *elem);            /* List[elem], the accumulator */
Expr *imp_rows_empty(Imp *imp, Type *elem);           /* no rows yet */
/* rows with row (a tensor of the row type) pushed; NULL when an argument is NULL. */
Expr *imp_rows_push(Imp *imp, Expr *rows, Expr *row, Type *elem);
/* The rows as one tensor of type elem, the first pushed first; (0, row...) when there are none
 * (a `?` row dim counts 0 then). */
Expr *imp_rows_join(Imp *imp, Expr *rows, Type *elem);
/* ==== end of the block added for sequences and optionals ===================================== */

#endif /* RLY_ONNX_IMPORT_H */
