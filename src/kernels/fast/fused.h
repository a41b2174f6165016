/* fused.h - fused elementwise programs (issue 16, "fused groups"): a group of elementwise float32
 * operators that FuseOps put in one primitive function, evaluated in one pass over memory in
 * cache-sized blocks, in float32, instead of one operator (and one full-size intermediate
 * tensor) at a time. The VM builds a program per primitive function when it binds an executable
 * (src/runtime/vm_fuse.c) and runs it when the call's tensors fit (fx_shape), else it runs the
 * nodes one by one.
 *
 * A program reads n_operands tensors (inputs of the primitive, its constants, the output of its
 * anchor operator: a conv2d or dense whose result the program finishes) and computes steps; value
 * v < n_operands is operand v, value n_operands + s the result of step s; the program's result is
 * its last step. Each step's result has the program's result shape: operands broadcast to it
 * (numpy rules), steps do not (a step narrower than the result is not supported: fx_shape says
 * no). Semantics are the reference kernels' for float32 (relu(NaN) = 0, maximum/minimum
 * propagate NaN, clip keeps NaN); add, subtract, multiply, divide, sqrt, maximum, minimum, relu,
 * clip, negative and abs give the reference's bits; the transcendental steps differ by a few ulp
 * (docs/kernels_fused.md). */
#ifndef RLY_KERNELS_FAST_FUSED_H
#define RLY_KERNELS_FAST_FUSED_H

#include "kernels/kernel.h"

typedef enum FxOp {
    /* binary: a, b */
    FX_ADD,
    FX_SUB,
    FX_MUL,
    FX_DIV,
    FX_MAX,
    FX_MIN,
    FX_POW,
    /* unary: a */
    FX_RELU,
    FX_LEAKY, /* p0: alpha */
    FX_CLIP,  /* p0, p1: the bounds (float32) */
    FX_SIGMOID,
    FX_TANH,
    FX_EXP,
    FX_ERF,
    FX_SQRT,
    FX_RSQRT,
    FX_NEG,
    FX_ABS,
    FX_COPY,
    FX_N_OPS
} FxOp;

enum { FX_MAX_STEPS = 48, FX_MAX_OPERANDS = 16, FX_BLOCK = 256 /* elements per block */ };

typedef struct FxStep {
    uint8_t op;    /* FxOp */
    uint16_t a, b; /* values (b: binary ops only) */
    float p0, p1;  /* parameters */
} FxStep;

typedef struct FxProgram {
    uint32_t n_operands, n_steps;
    FxStep step[FX_MAX_STEPS];
} FxProgram;

/* The step operator `op_id` (support/ops.def) with attributes attrs makes, as a float32 step: true
 * with *st's op and parameters set (its values left to the caller) when op_id is one of the
 * operators above; *arity gets its argument count. */
bool fx_step_of(uint32_t op_id, const KAttr *attrs, uint32_t n_attrs, FxStep *st, uint32_t *arity);

/* The result shape of p on these operands (p->n_operands tensors): false when an operand is not
 * float32, the shapes do not broadcast, a step's shape is not the result's, or the rank is over
 * K_MAX_DIMS. */
bool fx_shape(const FxProgram *p, const DLTensor *const *ops, uint32_t *ndim, int64_t *shape);

/* How a block reads an operand: in place (kind 0: the result's shape), one value (kind 1), or
 * gathered over merged dims (kind 2: size[d], stride[d], the innermost a run of stride 1 or 0). */
typedef struct FxSrc {
    const float *data;
    int kind;
    uint32_t nd;
    int64_t size[K_MAX_DIMS], stride[K_MAX_DIMS];
} FxSrc;

/* A program bound to its operands and result (fx_bind), evaluated by ranges of the result's
 * elements (fx_range; ranges may run concurrently when disjoint). An anchor kernel applies it to
 * each block of its output as soon as the block is final (KCall.epi). */
typedef struct FxBound {
    const FxProgram *p;
    FxSrc src[FX_MAX_OPERANDS];
    float splat[FX_MAX_OPERANDS][FX_BLOCK]; /* a scalar operand's value, FX_BLOCK times */
    float *out;
    int64_t total;
    void (*fn)(void); /* the step loop of the instruction-set level */
    /* A bias tail (fx_bind found the program x + bias, then maybe relu or clip, x of the result's
     * shape, bias gathered with an innermost stride of 0 or 1 over at most 2 merged dims): each
     * run of the bias is applied in one pass (no gathered copy, no intermediate block). */
    bool bias;
    bool bias_first;    /* the program adds bias + x (x86 keeps the first NaN's payload) */
    uint8_t bias_clamp; /* 0 none, FX_RELU or FX_CLIP (bounds bias_lo, bias_hi) */
    uint16_t bias_x, bias_b;
    float bias_lo, bias_hi;
    void (*bias_fn)(void); /* the run loop of the instruction-set level */
} FxBound;
void fx_bind(FxBound *b, const FxProgram *p, const DLTensor *const *ops, float *out, uint32_t ndim,
             const int64_t *shape);
/* Elements [lo, lo + n) of the result (row-major flat indices). */
void fx_range(const FxBound *b, int64_t lo, int64_t n);
/* rows ranges of cols elements, the first at flat index f0, each ld after the one before. */
void fx_range2(const FxBound *b, int64_t f0, int64_t rows, int64_t cols, int64_t ld);

/* Evaluate p into out (float32, of the shape fx_shape gave, compact), on pool's threads (NULL:
 * this thread). out may be one of the operands of its shape (in place): every block is read
 * before it is written. */
void fx_run(const FxProgram *p, const DLTensor *const *ops, float *out, uint32_t ndim,
            const int64_t *shape, SupPool *pool);

#endif /* RLY_KERNELS_FAST_FUSED_H */
