/* ir.h - the Relay IR: expression, pattern and type nodes, attributes, modules, the context that
 * owns them, and the one traversal engine every pass uses. The interface of src/ir/.
 *
 * Invariants:
 * - Every node lives in its context's arena and is immutable after construction, except
 *   Expr.checked_type (write-once, by type inference) and the parts of module-level objects that
 *   are filled while a module is being built (Constructor.inputs, GlobalTypeVar.def).
 * - Types are hash-consed: two calls that build the same TensorType/TupleType/FuncType/TypeCall/
 *   RefType return the same pointer, so type equality is ==. TypeVar, GlobalTypeVar,
 *   IncompleteType and TypeRelation have identity and are never shared by construction.
 * - Var, GlobalVar, Constructor, TypeVar, GlobalTypeVar are compared by pointer; their names are
 *   hints for printing only.
 * - Every Expr, Pattern and Type has a dense per-context id (side tables are arrays by id).
 * - Nothing recurses over expression depth: use ir_rewrite / ir_visit (explicit stacks). Nothing
 *   recurses over type depth either, and types are DAGs (interning shares equal parts, so a type
 *   of n nodes may print as 2^n): walk them with ir_type_rewrite / ir_type_visit (explicit
 *   stacks, each node once), never as trees. Patterns are small and may be walked recursively. */
#ifndef RLY_IR_H
#define RLY_IR_H

#include "support/support.h"

typedef struct Expr Expr;
typedef struct Type Type;
typedef struct Pattern Pattern;
typedef struct rly_module Module;
typedef struct TypeData TypeData;
typedef struct Attrs Attrs;
typedef struct rly_ctx Ctx;

/* ======================================================================================
 * Types
 * ====================================================================================== */

typedef enum TypeKind {
    TYPE_TENSOR,     /* TensorType */
    TYPE_TUPLE,      /* TupleType */
    TYPE_FUNC,       /* FuncType */
    TYPE_VAR,        /* TypeVar */
    TYPE_GLOBAL_VAR, /* GlobalTypeVar: names an ADT */
    TYPE_CALL,       /* TypeCall: ADT applied to arguments */
    TYPE_REF,        /* RefType */
    TYPE_INCOMPLETE, /* IncompleteType: unification variable, `_` in source */
    TYPE_RELATION,   /* TypeRelation: a constraint inside a FuncType */
    TYPE_KIND_COUNT
} TypeKind;

/* TypeVar kinds, numbered as Relay numbers them. */
typedef enum TypeVarKind {
    KIND_TYPE = 0,
    KIND_SHAPE_VAR = 1,
    KIND_BASE_TYPE = 2,
    KIND_CONSTRAINT = 4,
    KIND_ADT_HANDLE = 5,
    KIND_TYPE_DATA = 6,
} TypeVarKind;

struct Type {
    uint8_t kind;  /* TypeKind */
    uint8_t flags; /* TYPE_HAS_* / TYPE_IS_*: what the type mentions, set at construction */
    uint16_t size; /* node count of the type written out as a tree, saturating at TYPE_SIZE_MAX */
    uint32_t id;
    uint64_t hash; /* structural hash for interning (identity nodes: from id) */
};

/* Type.flags, computed from the children (ir_type_child) when a node is built, so a walk can
 * skip a part that cannot matter (a type without TYPE_HAS_INCOMPLETE needs no resolving). */
enum {
    TYPE_HAS_INCOMPLETE = 1, /* an IncompleteType other than an error type occurs */
    TYPE_HAS_ERROR = 2,      /* an error type (ir_type_error_new) occurs */
    TYPE_HAS_VAR = 4,        /* a TypeVar occurs */
    TYPE_HAS_ADT = 8,        /* a GlobalTypeVar or TypeCall occurs */
    TYPE_IS_DATA = 16,       /* a tensor, or a tuple whose fields are all data */
    TYPE_HAS_FLOAT = 32,     /* a floating-point tensor, itself or in a tuple field (any depth) */
    /* On an IncompleteType only, and the one flag set after construction: it has become a part
     * of another type (set by type.c when that type is built) or another IncompleteType's
     * binding (set by inference). Until then no other type can contain it: an occurs check
     * against it needs no walk. */
    TYPE_PLACED = 64,
};
#define TYPE_SIZE_MAX 65535u

/* Dimensions: d >= 0 is a constant; DIM_ANY is `?`; d <= DIM_SYM_BASE is the symbolic dimension
 * named ctx->dim_names[DIM_SYM_BASE - d] (interned per context, so equal names give equal dims). */
#define DIM_ANY ((int64_t)-1)
#define DIM_SYM_BASE ((int64_t)-2)
static inline bool dim_is_sym(int64_t d) { return d <= DIM_SYM_BASE; }

typedef struct TensorType {
    Type base;
    rly_dtype dtype;
    uint32_t ndim;  /* 0 = scalar */
    int64_t *shape; /* ndim dims; never NULL (a scalar's points at an empty array) */
} TensorType;

typedef struct TupleType {
    Type base;
    uint32_t n;
    Type **fields;
} TupleType;

typedef struct TypeVar {
    Type base;
    const char *name; /* interned */
    uint8_t tkind;    /* TypeVarKind */
} TypeVar;

typedef struct FuncType {
    Type base;
    uint32_t n_params;
    Type **params;
    Type *ret;
    uint32_t n_tparams;
    TypeVar **tparams; /* bound in params, ret and constraints */
    uint32_t n_constraints;
    Type **constraints; /* TypeRelation nodes */
} FuncType;

typedef struct GlobalTypeVar {
    Type base;
    const char *name; /* interned */
    uint8_t tkind;    /* KIND_ADT_HANDLE for ADTs */
    TypeData *def;    /* the definition, once known */
} GlobalTypeVar;

typedef struct TypeCall {
    Type base;
    Type *func; /* a GlobalTypeVar (or a TypeVar of higher kind) */
    uint32_t n_args;
    Type **args;
} TypeCall;

typedef struct RefType {
    Type base;
    Type *value;
} RefType;

typedef struct IncompleteType {
    Type base;
    uint8_t tkind;
} IncompleteType;

typedef struct TypeRelation {
    Type base;
    const char *name; /* interned relation name, e.g. "Broadcast" */
    uint32_t n_args;
    Type **args;
    uint32_t n_inputs;
    const Attrs *attrs;
} TypeRelation;

#define AS_TENSOR_TYPE(t) ((TensorType *)ir_type_cast((t), TYPE_TENSOR))
#define AS_TUPLE_TYPE(t) ((TupleType *)ir_type_cast((t), TYPE_TUPLE))
#define AS_FUNC_TYPE(t) ((FuncType *)ir_type_cast((t), TYPE_FUNC))
#define AS_TYPE_VAR(t) ((TypeVar *)ir_type_cast((t), TYPE_VAR))
#define AS_GLOBAL_TYPE_VAR(t) ((GlobalTypeVar *)ir_type_cast((t), TYPE_GLOBAL_VAR))
#define AS_TYPE_CALL(t) ((TypeCall *)ir_type_cast((t), TYPE_CALL))
#define AS_REF_TYPE(t) ((RefType *)ir_type_cast((t), TYPE_REF))
#define AS_INCOMPLETE_TYPE(t) ((IncompleteType *)ir_type_cast((t), TYPE_INCOMPLETE))
#define AS_TYPE_RELATION(t) ((TypeRelation *)ir_type_cast((t), TYPE_RELATION))
static inline Type *ir_type_cast(Type *t, TypeKind k) {
    RLY_ASSERT(t != NULL && t->kind == k);
    (void)k;
    return t;
}

/* Interned constructors (the arrays are copied). */
Type *ir_type_tensor(Ctx *ctx, rly_dtype dtype, uint32_t ndim, const int64_t *shape);
Type *ir_type_scalar(Ctx *ctx, rly_dtype dtype);
Type *ir_type_tuple(Ctx *ctx, uint32_t n, Type *const *fields);
Type *ir_type_func(Ctx *ctx, uint32_t n_params, Type *const *params, Type *ret, uint32_t n_tparams,
                   TypeVar *const *tparams, uint32_t n_constraints, Type *const *constraints);
Type *ir_type_call(Ctx *ctx, Type *func, uint32_t n_args, Type *const *args);
Type *ir_type_ref(Ctx *ctx, Type *value);
/* Identity nodes (fresh on every call). */
TypeVar *ir_type_var_new(Ctx *ctx, const char *name, TypeVarKind kind);
GlobalTypeVar *ir_global_type_var_new(Ctx *ctx, const char *name, TypeVarKind kind);
Type *ir_type_incomplete_new(Ctx *ctx, TypeVarKind kind);
/* An IncompleteType that stands for "already reported": flagged TYPE_HAS_ERROR (not
 * TYPE_HAS_INCOMPLETE), as is every type built with it. */
Type *ir_type_error_new(Ctx *ctx);
Type *ir_type_relation_new(Ctx *ctx, const char *name, uint32_t n_args, Type *const *args,
                           uint32_t n_inputs, const Attrs *attrs);
/* The children of a type node, in order: a tuple's fields; a function's parameters then its
 * result (type parameters and constraints are not children); a TypeCall's callee then its
 * arguments; a reference's value; a relation's arguments. Other kinds have none. */
uint32_t ir_type_n_children(const Type *t);
Type *ir_type_child(const Type *t, uint32_t i);
/* t with its children replaced by kids[0..ir_type_n_children(t)) (interned); t itself when
 * every kid is the same. Not for relations (they have identity). */
Type *ir_type_with_children(Ctx *ctx, Type *t, Type *const *kids);

/* The one traversal engine for types: an explicit stack (no recursion over type depth) and a
 * memo, so a DAG-shaped type costs its number of distinct nodes, not its tree size.
 * ir_type_rewrite rebuilds t bottom-up: each node is first offered to `pre` (optional), which
 * returns the type that stands for it: NULL aborts the whole rewrite (the result is NULL); with
 * *stop set the returned type is the node's result as it is; otherwise the returned type (the
 * node itself, or another, such as what a bound IncompleteType resolves to) has its children
 * rewritten and is rebuilt with them (a relation, an identity node, is never rebuilt: it stays
 * as it is). The memo (node -> result) is kept between calls, so a
 * caller may rewrite many types sharing parts and free it once (ptrmap_free(&rw->memo)). */
typedef struct TypeRewriter TypeRewriter;
struct TypeRewriter {
    Ctx *ctx;
    Type *(*pre)(TypeRewriter *rw, Type *t, bool *stop);
    PtrMap memo;
    void *state;
};
Type *ir_type_rewrite(TypeRewriter *rw, Type *t);
/* Visit every node reachable from t that is not yet in `seen` (which it adds them to; the caller
 * frees it), children before parents. pre (optional) returning false skips the node's
 * children (post still runs); post may be NULL. */
void ir_type_visit(Type *t, PtrMap *seen, bool (*pre)(void *st, Type *t),
                   void (*post)(void *st, Type *t), void *st);

/* The symbolic dimension named `name` (interned per context). */
int64_t ir_dim_sym(Ctx *ctx, const char *name, size_t len);
const char *ir_dim_sym_name(const Ctx *ctx, int64_t dim);

/* ======================================================================================
 * Attributes: generic dictionaries on calls and functions (`padding=[1, 1]`, `Primitive=1`).
 * ====================================================================================== */

typedef enum AttrKind {
    ATTR_INT,   /* i, with dtype giving the literal's suffix type */
    ATTR_FLOAT, /* f, with dtype */
    ATTR_BOOL,  /* b */
    ATTR_STR,   /* s (interned) */
    ATTR_LIST,  /* list */
    ATTR_NONE,  /* None / nullptr */
    ATTR_EXPR,  /* expr: any other expression (meta references, vars, ...) */
    ATTR_TYPE,  /* type */
} AttrKind;

typedef struct AttrValue {
    uint8_t kind; /* AttrKind */
    rly_dtype dtype;
    Span span;
    union {
        int64_t i;
        double f;
        bool b;
        const char *s;
        struct {
            uint32_t n;
            struct AttrValue **items;
        } list;
        Expr *expr;
        Type *type;
    };
} AttrValue;

typedef struct AttrEntry {
    const char *key; /* interned */
    AttrValue *value;
} AttrEntry;

struct Attrs {
    uint32_t n;
    AttrEntry *entries; /* in source order; keys are distinct */
};

AttrValue *ir_attr_int(Ctx *ctx, int64_t v, rly_dtype dt, Span span);
AttrValue *ir_attr_float(Ctx *ctx, double v, rly_dtype dt, Span span);
AttrValue *ir_attr_bool(Ctx *ctx, bool v, Span span);
AttrValue *ir_attr_str(Ctx *ctx, const char *s, size_t n, Span span);
AttrValue *ir_attr_list(Ctx *ctx, uint32_t n, AttrValue *const *items, Span span);
AttrValue *ir_attr_none(Ctx *ctx, Span span);
AttrValue *ir_attr_expr(Ctx *ctx, Expr *e, Span span);
AttrValue *ir_attr_type(Ctx *ctx, Type *t, Span span);
/* Copies the arrays; keys must be interned in ctx. NULL when n == 0. */
const Attrs *ir_attrs_new(Ctx *ctx, uint32_t n, const char *const *keys, AttrValue *const *values);
const AttrValue *ir_attrs_get(const Attrs *a, const char *key); /* NULL if absent */

/* ======================================================================================
 * Expressions
 * ====================================================================================== */

typedef enum ExprKind {
#define X(E, S, N) EXPR_##E,
#include "ir/expr_kinds.def"
#undef X
    EXPR_KIND_COUNT
} ExprKind;
extern const char *const ir_expr_kind_names[EXPR_KIND_COUNT];

struct Expr {
    uint8_t kind; /* ExprKind */
    uint8_t flags;
    uint32_t id;
    Span span;
    Type *checked_type; /* NULL until type inference; write-once */
};

typedef struct Var {
    Expr base;
    const char *name; /* interned hint, without the '%' */
    Type *ann;        /* type annotation, NULL when none */
} Var;

typedef struct GlobalVar {
    Expr base;
    const char *name; /* interned, without the '@'; one node per name per module */
} GlobalVar;

typedef struct Constant {
    Expr base;
    rly_dtype dtype;
    uint32_t ndim; /* 0 = scalar, printed inline; otherwise a meta[relay.Constant][i] */
    int64_t *shape;
    void *data; /* row-major, sup_dtype_size(dtype) bytes per element; bool is one byte */
    size_t nbytes;
} Constant;

typedef struct Tuple {
    Expr base;
    uint32_t n;
    Expr **fields;
} Tuple;

typedef struct TupleGetItem {
    Expr base;
    Expr *tuple;
    uint32_t index;
} TupleGetItem;

typedef struct Let {
    Expr base;
    Var *var; /* in scope in body; also in value when value is a Function (let-rec) */
    Expr *value;
    Expr *body;
} Let;

typedef struct Function {
    Expr base;
    uint32_t n_params;
    Var **params;
    Expr *body;
    Type *ret_type; /* NULL when not annotated */
    uint32_t n_tparams;
    TypeVar **tparams;
    const Attrs *attrs; /* NULL when none */
} Function;

typedef struct Call {
    Expr base;
    Expr *op; /* Op, Function, GlobalVar, Constructor, Var or any expression */
    uint32_t n_args;
    Expr **args;
    const Attrs *attrs; /* NULL when none */
    uint32_t n_type_args;
    Type **type_args; /* filled by type inference for polymorphic callees */
} Call;

typedef struct If {
    Expr base;
    Expr *cond;
    Expr *then_branch;
    Expr *else_branch;
} If;

typedef struct Clause {
    Pattern *lhs;
    Expr *rhs;
    Span span;
} Clause;

typedef struct Match {
    Expr base;
    Expr *data;
    uint32_t n_clauses;
    Clause *clauses;
    bool complete; /* false for `match?` */
} Match;

typedef struct RefCreate {
    Expr base;
    Expr *value;
} RefCreate;

typedef struct RefRead {
    Expr base;
    Expr *ref;
} RefRead;

typedef struct RefWrite {
    Expr base;
    Expr *ref;
    Expr *value;
} RefWrite;

typedef struct Constructor {
    Expr base;
    const char *name; /* interned */
    uint32_t n_inputs;
    Type **inputs; /* may mention the TypeData's type vars */
    GlobalTypeVar *belong_to;
    int32_t tag; /* unique within the module */
} Constructor;

typedef struct Op {
    Expr base;
    const char *name; /* interned, e.g. "nn.conv2d"; one node per name per context */
    const void *info; /* the operator-table row, NULL for unknown operators */
} Op;

#define IR_DOWNCAST(T, KIND, e) ((T *)ir_expr_cast((e), (KIND)))
#define AS_VAR(e) IR_DOWNCAST(Var, EXPR_VAR, e)
#define AS_GLOBAL_VAR(e) IR_DOWNCAST(GlobalVar, EXPR_GLOBAL_VAR, e)
#define AS_CONSTANT(e) IR_DOWNCAST(Constant, EXPR_CONSTANT, e)
#define AS_TUPLE(e) IR_DOWNCAST(Tuple, EXPR_TUPLE, e)
#define AS_TUPLE_GET_ITEM(e) IR_DOWNCAST(TupleGetItem, EXPR_TUPLE_GET_ITEM, e)
#define AS_LET(e) IR_DOWNCAST(Let, EXPR_LET, e)
#define AS_FUNCTION(e) IR_DOWNCAST(Function, EXPR_FUNCTION, e)
#define AS_CALL(e) IR_DOWNCAST(Call, EXPR_CALL, e)
#define AS_IF(e) IR_DOWNCAST(If, EXPR_IF, e)
#define AS_MATCH(e) IR_DOWNCAST(Match, EXPR_MATCH, e)
#define AS_REF_CREATE(e) IR_DOWNCAST(RefCreate, EXPR_REF_CREATE, e)
#define AS_REF_READ(e) IR_DOWNCAST(RefRead, EXPR_REF_READ, e)
#define AS_REF_WRITE(e) IR_DOWNCAST(RefWrite, EXPR_REF_WRITE, e)
#define AS_CONSTRUCTOR(e) IR_DOWNCAST(Constructor, EXPR_CONSTRUCTOR, e)
#define AS_OP(e) IR_DOWNCAST(Op, EXPR_OP, e)
static inline Expr *ir_expr_cast(Expr *e, ExprKind k) {
    RLY_ASSERT(e != NULL && e->kind == k);
    (void)k;
    return e;
}

/* Constructors. Arrays are copied into the arena; a span may be SPAN_NONE. */
Var *ir_var_new(Ctx *ctx, const char *name, Type *ann, Span span);
Expr *ir_constant_new(Ctx *ctx, rly_dtype dtype, uint32_t ndim, const int64_t *shape,
                      const void *data, Span span); /* copies the data */
/* A constant over borrowed bytes (not copied): data must hold nbytes = elements x dtype size,
 * be aligned to the dtype's size, and outlive the context (see ir_ctx_keep). */
Expr *ir_constant_borrow(Ctx *ctx, rly_dtype dtype, uint32_t ndim, const int64_t *shape,
                         const void *data, Span span);
Expr *ir_scalar_i64(Ctx *ctx, rly_dtype dtype, int64_t v,
                    Span span);                                      /* any integer or bool dtype */
Expr *ir_scalar_f64(Ctx *ctx, rly_dtype dtype, double v, Span span); /* any float dtype */
Expr *ir_tuple_new(Ctx *ctx, uint32_t n, Expr *const *fields, Span span);
Expr *ir_tuple_get_item_new(Ctx *ctx, Expr *tuple, uint32_t index, Span span);
Expr *ir_let_new(Ctx *ctx, Var *var, Expr *value, Expr *body, Span span);
Expr *ir_function_new(Ctx *ctx, uint32_t n_params, Var *const *params, Expr *body, Type *ret_type,
                      uint32_t n_tparams, TypeVar *const *tparams, const Attrs *attrs, Span span);
Expr *ir_call_new(Ctx *ctx, Expr *op, uint32_t n_args, Expr *const *args, const Attrs *attrs,
                  uint32_t n_type_args, Type *const *type_args, Span span);
Expr *ir_if_new(Ctx *ctx, Expr *cond, Expr *then_branch, Expr *else_branch, Span span);
Expr *ir_match_new(Ctx *ctx, Expr *data, uint32_t n_clauses, const Clause *clauses, bool complete,
                   Span span);
Expr *ir_ref_create_new(Ctx *ctx, Expr *value, Span span);
Expr *ir_ref_read_new(Ctx *ctx, Expr *ref, Span span);
Expr *ir_ref_write_new(Ctx *ctx, Expr *ref, Expr *value, Span span);
/* The one Op node for `name` in this context. */
Expr *ir_op_get(Ctx *ctx, const char *name, size_t len);

/* Scalar value of a 0-d constant as int64 / double (any dtype; converts). */
int64_t ir_constant_as_i64(const Constant *c);
double ir_constant_as_f64(const Constant *c);

/* ======================================================================================
 * Patterns
 * ====================================================================================== */

typedef enum PatternKind {
    PAT_WILDCARD, /* _ */
    PAT_VAR,      /* var: %x or %x: T */
    PAT_CTOR,     /* ctor(pats...) */
    PAT_TUPLE,    /* (pats...) */
} PatternKind;

struct Pattern {
    uint8_t kind; /* PatternKind */
    uint32_t id;
    Span span;
    Var *var;          /* PAT_VAR */
    Constructor *ctor; /* PAT_CTOR */
    uint32_t n;        /* PAT_CTOR, PAT_TUPLE */
    Pattern **pats;
};

Pattern *ir_pattern_wildcard(Ctx *ctx, Span span);
Pattern *ir_pattern_var(Ctx *ctx, Var *var, Span span);
Pattern *ir_pattern_ctor(Ctx *ctx, Constructor *ctor, uint32_t n, Pattern *const *pats, Span span);
Pattern *ir_pattern_tuple(Ctx *ctx, uint32_t n, Pattern *const *pats, Span span);
/* Append every variable bound by p, left to right. */
void ir_pattern_vars(Pattern *p, PtrVec *out);

/* ======================================================================================
 * Module
 * ====================================================================================== */

struct TypeData {
    GlobalTypeVar *header;
    uint32_t n_tvars;
    TypeVar **tvars;
    uint32_t n_ctors;
    Constructor **ctors;
    bool is_extern; /* `extern type`: no constructors */
    Span span;
};

typedef struct FuncDef {
    GlobalVar *gvar;
    Function *func; /* NULL while only declared (forward reference) */
    Span span;      /* the `def` */
} FuncDef;

struct rly_module {
    Ctx *ctx;
    Vec(FuncDef) funcs;    /* in definition order */
    Vec(TypeData *) types; /* in definition order */
    StrMap global_by_name; /* name -> FuncDef index + 1 (as uintptr_t) */
    StrMap type_by_name;   /* name -> TypeData* */
    StrMap ctor_by_name;   /* name -> Constructor* */
    int32_t next_tag;
    bool is_expr; /* parsed from a bare expression: `expr` holds it */
    Expr *expr;
    Vec(Constant *) meta; /* tensor constants referenced as meta[relay.Constant][i] */
};

Module *ir_module_new(Ctx *ctx);
/* Find or declare the global @name (declared globals have func == NULL). */
GlobalVar *ir_module_global(Module *m, const char *name, size_t len, Span span);
FuncDef *ir_module_lookup(const Module *m, const char *name, size_t len); /* NULL if absent */
FuncDef *ir_module_def_of(const Module *m, const GlobalVar *gv);          /* NULL if absent */
/* Define (or redefine) the body of a global. */
void ir_module_define(Module *m, GlobalVar *gv, Function *f, Span span);
/* Declare an ADT; constructors are added with ir_module_add_ctor. */
TypeData *ir_module_add_type(Module *m, GlobalTypeVar *header, uint32_t n_tvars,
                             TypeVar *const *tvars, bool is_extern, Span span);
Constructor *ir_module_add_ctor(Module *m, TypeData *td, const char *name, size_t len,
                                uint32_t n_inputs, Type *const *inputs, Span span);
TypeData *ir_module_lookup_type(const Module *m, const char *name, size_t len);
Constructor *ir_module_lookup_ctor(const Module *m, const char *name, size_t len);
void ir_module_free(Module *m); /* frees the module's maps and vectors (nodes stay in the arena) */

/* ======================================================================================
 * The context
 * ====================================================================================== */

struct rly_ctx {
    Arena arena;   /* every node */
    Interner strs; /* names */
    struct TypeTable {
        Type **slots;
        size_t len, cap;
    } types;     /* hash-consed types */
    StrMap ops;  /* name -> Op */
    StrMap dims; /* symbolic dim name -> index + 1 */
    Vec(const char *) dim_names;
    Diags diags;
    uint32_t next_id; /* ids of Expr, Pattern and Type, shared */
    PtrVec modules;   /* every Module created here, freed with the context */
    /* Objects whose memory nodes borrow (an mmapped model whose weights constants point into),
     * released with the context, last first. */
    Vec(struct CtxKeep {
        void *obj;
        void (*release)(void *obj);
    }) keep;
};

Ctx *ir_ctx_new(void);
void ir_ctx_free(Ctx *ctx);
/* Keep obj alive until the context is freed, then call release(obj). */
void ir_ctx_keep(Ctx *ctx, void *obj, void (*release)(void *obj));
static inline const char *ir_intern(Ctx *ctx, const char *s, size_t n) {
    return intern(&ctx->strs, s, n);
}

/* ======================================================================================
 * The traversal engine (visit.c, rewrite.c): iterative, memoized, DAG-aware.
 *
 * Children of a node, in order: Tuple fields; TupleGetItem tuple; Let var, value, body;
 * Function params, body; Call op, args; If cond, then, else; Match data, then each clause's
 * rhs; RefCreate value; RefRead ref; RefWrite ref, value. Binders (Let var, Function params)
 * are children so that a rewrite can rename them; pattern variables are not.
 * ====================================================================================== */

uint32_t ir_expr_n_children(const Expr *e);
Expr *ir_expr_child(const Expr *e, uint32_t i);
/* A copy of e with its children replaced by kids[0..n) (same span, attrs, type args). */
Expr *ir_expr_with_children(Ctx *ctx, Expr *e, Expr *const *kids);

typedef enum VisitResult { VISIT_CONTINUE, VISIT_SKIP, VISIT_STOP } VisitResult;
typedef struct Visitor Visitor;
struct Visitor {
    VisitResult (*pre)(Visitor *v, Expr *e); /* optional; SKIP: children and post skipped */
    void (*post)(Visitor *v, Expr *e);       /* optional; after all children */
    void *state;
};
/* Visit every node reachable from e once (DAG-aware), pre-order then post-order callbacks.
 * Returns false when a callback stopped the walk. */
bool ir_visit(Visitor *v, Expr *e);

typedef struct Rewriter Rewriter;
struct Rewriter {
    Ctx *ctx;
    Expr *(*pre)(Rewriter *rw, Expr *e); /* optional: non-NULL replaces e, children skipped */
    Expr *(*post)(Rewriter *rw, Expr *orig, Expr *e); /* optional: e == orig if no child changed */
    PtrMap memo;                                      /* orig -> result; keeps DAG sharing */
    void *state;
};
/* Rewrite e bottom-up. The memo persists across calls on the same Rewriter until
 * ir_rewriter_free. */
Expr *ir_rewrite(Rewriter *rw, Expr *e);
/* Rewrite every function of m (and its expression, for a bare expression) into a new module;
 * untouched functions are shared. */
Module *ir_rewrite_module(Rewriter *rw, Module *m);
void ir_rewriter_free(Rewriter *rw);

/* ======================================================================================
 * Analyses (analysis.c, equal.c, hash.c)
 * ====================================================================================== */

/* Variables used in e but not bound in it, in order of first use (deterministic). */
void ir_free_vars(Expr *e, PtrVec *out);
/* Variables bound in e (let, fn params, patterns), in traversal order. */
void ir_bound_vars(Expr *e, PtrVec *out);
/* Well-formedness: each Var bound once; each use inside its binder's scope; free variables only
 * in a bare expression. Reports into ctx->diags; returns false on any error. */
bool ir_well_formed(Module *m);

/* Structural equality up to alpha-equivalence (bound local and type variables are matched by
 * binding position; free variables must be the same node, or, with map_free_vars, are matched
 * in order of first occurrence). */
bool ir_expr_equal(Expr *a, Expr *b, bool map_free_vars);
bool ir_type_equal(Type *a, Type *b);
bool ir_module_equal(const Module *a, const Module *b);
/* The same, saying where they first differ: the two spans (SPAN_NONE where a definition is
 * missing) and what differs, in words. */
typedef struct IrDiff {
    Span a, b;
    char what[256];
} IrDiff;
bool ir_module_equal_diff(const Module *a, const Module *b, IrDiff *d);
uint64_t ir_expr_hash(Expr *e);
uint64_t ir_type_hash(Type *t);
uint64_t ir_module_hash(const Module *m);

/* ======================================================================================
 * Printer (printer.c): canonical Relay text.
 * ====================================================================================== */

typedef struct PrintOptions {
    bool show_types; /* append checked types as / * ty=... * / comments */
} PrintOptions;

/* Print a module, or a bare expression module, as text into out (appends). Tensor constants
 * are printed as meta[relay.Constant][i]: their indexes are those of m->meta, and constants not
 * yet there are appended to it in order of first print. */
void ir_print_module(Module *m, const PrintOptions *opts, StrBuf *out);
/* Print a type (`Tensor[(1, 2), float32]`, `(int32, bool)`, `List[A]`, ...), for messages: a
 * type longer than IR_PRINT_TYPE_MAX characters (a DAG-shaped type prints exponentially long)
 * is cut there and ends with `...`. ir_print_type_max: the same with a given limit (0: none,
 * for text that must parse back). */
#define IR_PRINT_TYPE_MAX 1000
void ir_print_type(const Ctx *ctx, Type *t, StrBuf *out);
void ir_print_type_max(const Ctx *ctx, Type *t, size_t max, StrBuf *out);
/* The text of a scalar constant (`42`, `42i64`, `3f`, `True`, ...). */
void ir_print_scalar(const Constant *c, StrBuf *out);

#endif /* RLY_IR_H */
