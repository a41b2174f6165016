"""test_zero_size.py - operators on tensors with zero-sized dims (issue 18, item 2).

Each case is one Relay call on inputs whose shapes have a 0 somewhere (an empty batch, an empty
channel or feature axis, an empty reduced axis, an empty piece of a concatenation), run through
`rly run` on every engine: the interpreter (-O0), the VM as written (-O0) and optimized (-O3,
fused kernels), and the VM at each fast-kernel level (RLY_ISA=scalar|avx2|avx512, a cap: a
level the CPU lacks runs the best it has). The result must match numpy: shape, dtype and
values. Reductions over an empty axis give ONNX's identities (sum 0, prod 1, mean NaN, max the
dtype's lowest, min its highest, all true, any false, logsumexp -inf); argmax/argmin over one
are an error at the call.

Adding a case is adding a line to CASES: (id, call text with {0}, {1}... for the arguments,
argument arrays, numpy function giving the expected outputs as a list).
"""
import os

import numpy as np
import pytest

from harness import RlyError, assert_close, op_program, run_relay

F = "float32"


def z(*shape, dtype=F):
    """An array of shape filled with small distinct values (empty when a dim is 0)."""
    n = int(np.prod(shape)) if shape else 1
    return (np.arange(n) % 7 - 3).astype(dtype).reshape(shape)


def np_softmax(x, axis=-1):
    if x.size == 0:
        return x.copy()
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def lowest(dt):
    dt = np.dtype(dt)
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def highest(dt):
    dt = np.dtype(dt)
    return np.inf if dt.kind == "f" else np.iinfo(dt).max


def full(shape, v, dt=F):
    return np.full(shape, v, dtype=dt)


E = z(2, 0, 3)  # the common empty input: an empty middle axis
E0 = z(0, 4)  # an empty batch

CASES = [
    # ---- elementwise, unary and binary, broadcasting against empty dims
    ("exp", "exp({0})", [E], lambda x: [np.exp(x)]),
    ("negative", "negative({0})", [E0], lambda x: [-x]),
    ("sigmoid", "sigmoid({0})", [E0], lambda x: [1 / (1 + np.exp(-x))]),
    ("tanh", "tanh({0})", [E], lambda x: [np.tanh(x)]),
    ("relu", "nn.relu({0})", [E0], lambda x: [np.maximum(x, 0)]),
    ("clip", "clip({0}, a_min=-1.0, a_max=1.0)", [E], lambda x: [np.clip(x, -1, 1)]),
    ("cast", 'cast({0}, dtype="int32")', [E], lambda x: [x.astype("int32")]),
    ("add", "add({0}, {1})", [E, z(2, 0, 3)], lambda a, b: [a + b]),
    ("add-bcast", "add({0}, {1})", [E, z(1, 1, 3)], lambda a, b: [a + b]),
    ("add-bcast-1to0", "add({0}, {1})", [z(2, 1), z(2, 0)], lambda a, b: [a + b]),
    ("multiply-rank", "multiply({0}, {1})", [z(0, 4), z(4)], lambda a, b: [a * b]),
    ("divide", "divide({0}, {1})", [E, full((3,), 2.0)], lambda a, b: [a / b]),
    ("maximum", "maximum({0}, {1})", [E0, z(0, 4)], lambda a, b: [np.maximum(a, b)]),
    ("power", "power({0}, {1})", [E0, z(0, 4)], lambda a, b: [np.power(a, b)]),
    ("less", "less({0}, {1})", [E, z(2, 0, 3)], lambda a, b: [a < b]),
    ("where", "where({0}, {1}, {2})", [np.zeros((2, 0, 3), bool), E, z(2, 0, 3)],
     lambda c, a, b: [np.where(c, a, b)]),
    ("add-int", "add({0}, {1})", [z(0, 3, dtype="int64"), z(3, dtype="int64")],
     lambda a, b: [a + b]),
    # ---- reductions: over an empty axis (identities) and keeping an empty axis
    ("sum-empty", "sum({0}, axis=[1])", [E], lambda x: [x.sum(axis=1)]),
    ("sum-empty-keep", "sum({0}, axis=[1], keepdims=True)", [E],
     lambda x: [x.sum(axis=1, keepdims=True)]),
    ("sum-all", "sum({0})", [E], lambda x: [np.array(x.sum(), F)]),
    ("sum-kept-empty", "sum({0}, axis=[2])", [E], lambda x: [x.sum(axis=2)]),
    ("sum-last-empty", "sum({0}, axis=[1])", [z(3, 0)], lambda x: [x.sum(axis=1)]),
    ("mean-empty", "mean({0}, axis=[1])", [E], lambda x: [full((2, 3), np.nan)]),
    ("mean-last-empty", "mean({0}, axis=[-1], keepdims=True)", [z(3, 0)],
     lambda x: [full((3, 1), np.nan)]),
    ("prod-empty", "prod({0}, axis=[1])", [E], lambda x: [x.prod(axis=1)]),
    ("max-empty", "max({0}, axis=[1])", [E], lambda x: [full((2, 3), -np.inf)]),
    ("min-empty", "min({0}, axis=[1])", [E], lambda x: [full((2, 3), np.inf)]),
    ("max-empty-last", "max({0}, axis=[1])", [z(4, 0)], lambda x: [full((4,), -np.inf)]),
    ("max-empty-int8", "max({0}, axis=[0])", [z(0, 3, dtype="int8")],
     lambda x: [full((3,), -128, "int8")]),
    ("min-empty-int8", "min({0}, axis=[0])", [z(0, 3, dtype="int8")],
     lambda x: [full((3,), 127, "int8")]),
    ("max-empty-uint16", "max({0}, axis=[0])", [z(0, 3, dtype="uint16")],
     lambda x: [full((3,), 0, "uint16")]),
    ("min-empty-uint16", "min({0}, axis=[0])", [z(0, 3, dtype="uint16")],
     lambda x: [full((3,), 65535, "uint16")]),
    ("min-empty-int64", "min({0}, axis=[0])", [z(0, 2, dtype="int64")],
     lambda x: [full((2,), np.iinfo("int64").max, "int64")]),
    ("max-empty-float64", "max({0})", [z(0, 2, dtype="float64")],
     lambda x: [np.array(-np.inf)]),
    ("max-empty-bool", "max({0}, axis=[0])", [np.zeros((0, 2), bool)],
     lambda x: [np.zeros(2, bool)]),
    ("min-empty-bool", "min({0}, axis=[0])", [np.zeros((0, 2), bool)],
     lambda x: [np.ones(2, bool)]),
    ("all-empty", "all({0}, axis=[1])", [np.zeros((2, 0), bool)], lambda x: [x.all(axis=1)]),
    ("any-empty", "any({0}, axis=[1])", [np.zeros((2, 0), bool)], lambda x: [x.any(axis=1)]),
    ("logsumexp-empty", "logsumexp({0}, axis=[1])", [E], lambda x: [full((2, 3), -np.inf)]),
    ("argmax-kept-empty", "argmax({0}, axis=[1])", [z(0, 3)],
     lambda x: [np.zeros((0,), "int32")]),
    ("variance-kept-empty", "variance({0}, {1}, axis=[1])", [z(0, 3), z(0, 1)],
     lambda x, m: [np.zeros((0,), F)]),
    # ---- transforms
    ("reshape", "reshape({0}, newshape=[-1, 3])", [E], lambda x: [x.reshape(-1, 3)]),
    ("reshape-minus1", "reshape({0}, newshape=[2, -1, 3])", [z(0, 3)],
     lambda x: [x.reshape(2, 0, 3)]),
    ("transpose", "transpose({0}, axes=[2, 0, 1])", [E], lambda x: [x.transpose(2, 0, 1)]),
    ("concat-empty-piece", "concatenate(({0}, {1}), axis=0)", [z(0, 3), z(2, 3)],
     lambda a, b: [np.concatenate([a, b])]),
    ("concat-all-empty", "concatenate(({0}, {1}), axis=1)", [z(2, 0), z(2, 0)],
     lambda a, b: [np.concatenate([a, b], axis=1)]),
    ("stack", "stack(({0}, {1}), axis=1)", [E0, z(0, 4)], lambda a, b: [np.stack([a, b], 1)]),
    ("split", "split({0}, indices_or_sections=2, axis=2)", [z(0, 3, 4)],
     lambda x: np.split(x, 2, axis=2)),
    ("split-of-empty", "split({0}, indices_or_sections=2, axis=0)", [z(0, 4)],
     lambda x: np.split(x, 2, axis=0)),
    ("strided-slice-empty", "strided_slice({0}, begin=[1], end=[1])", [z(4, 3)],
     lambda x: [x[1:1]]),
    ("strided-slice-of-empty", "strided_slice({0}, begin=[0, 0], end=[2, 2])", [z(0, 3)],
     lambda x: [x[0:2, 0:2]]),
    ("expand-dims", "expand_dims({0}, axis=1)", [E0], lambda x: [x[:, None]]),
    ("squeeze", "squeeze({0}, axis=[1])", [z(0, 1, 3)], lambda x: [x.squeeze(1)]),
    ("tile", "tile({0}, reps=[2, 3])", [z(0, 2)], lambda x: [np.tile(x, (2, 3))]),
    ("tile-zero-reps", "tile({0}, reps=[0, 1])", [z(2, 2)], lambda x: [np.tile(x, (0, 1))]),
    ("repeat", "repeat({0}, repeats=2, axis=0)", [z(0, 3)], lambda x: [np.repeat(x, 2, 0)]),
    ("reverse", "reverse({0}, axis=0)", [E0], lambda x: [x[::-1]]),
    ("broadcast-to", "broadcast_to({0}, shape=[0, 3])", [z(1, 3)],
     lambda x: [np.broadcast_to(x, (0, 3))]),
    ("take-empty-indices", "take({0}, {1}, axis=0)", [z(4, 3), np.zeros((0,), "int32")],
     lambda x, i: [np.take(x, i, axis=0)]),
    ("take-from-empty-axis1", "take({0}, {1}, axis=1)", [z(0, 3), np.array([2, 0], "int32")],
     lambda x, i: [np.take(x, [2, 0], axis=1)]),
    ("cumsum", "cumsum({0}, axis=1)", [E], lambda x: [np.cumsum(x, axis=1)]),
    ("sort", "sort({0}, axis=0)", [E0], lambda x: [np.sort(x, axis=0)]),
    ("argsort", 'argsort({0}, axis=1, dtype="int32")', [E],
     lambda x: [np.argsort(x, axis=1).astype("int32")]),
    ("one-hot-empty", 'one_hot({0}, {1}, {2}, depth=3, axis=-1, dtype="float32")',
     [np.zeros((0,), "int32"), np.array(1, F), np.array(0, F)],
     lambda i, on, off: [np.zeros((0, 3), F)]),
    ("zeros-like", "zeros_like({0})", [E], lambda x: [np.zeros_like(x)]),
    ("full-like", "full_like({0}, {1})", [E, np.array(2.0, F)], lambda x, v: [full(x.shape, 2)]),
    ("trilu", "trilu({0}, {1}, upper=True)", [z(0, 3, 3), np.array(0, "int64")],
     lambda x, k: [np.triu(x)]),
    ("shape-of", "shape_of({0})", [E], lambda x: [np.array(x.shape, "int32")]),
    # ---- nn
    ("dense-batch0", "nn.dense({0}, {1})", [z(0, 4), z(5, 4)], lambda x, w: [x @ w.T]),
    ("dense-k0", "nn.dense({0}, {1})", [z(3, 0), z(5, 0)], lambda x, w: [x @ w.T]),
    ("dense-units0", "nn.dense({0}, {1})", [z(3, 4), z(0, 4)], lambda x, w: [x @ w.T]),
    ("matmul-k0", "nn.matmul({0}, {1})", [z(3, 0), z(0, 2)], lambda a, b: [a @ b]),
    ("batch-matmul-b0", "nn.batch_matmul({0}, {1}, transpose_b=True)", [z(0, 2, 3), z(0, 4, 3)],
     lambda a, b: [a @ b.transpose(0, 2, 1)]),
    ("batch-matmul-k0", "nn.batch_matmul({0}, {1}, transpose_b=True)", [z(2, 2, 0), z(2, 4, 0)],
     lambda a, b: [a @ b.transpose(0, 2, 1)]),
    ("bias-add", "nn.bias_add({0}, {1}, axis=1)", [z(0, 3, 2), z(3)],
     lambda x, b: [x + b[None, :, None]]),
    ("softmax", "nn.softmax({0}, axis=-1)", [E0], lambda x: [np_softmax(x)]),
    ("softmax-empty-axis", "nn.softmax({0}, axis=1)", [E], lambda x: [x.copy()]),
    ("log-softmax", "nn.log_softmax({0})", [E0], lambda x: [x.copy()]),
    ("layer-norm-batch0", "nn.layer_norm({0}, {1}, {2})", [z(0, 4), z(4), z(4)],
     lambda x, g, b: [x.copy()]),
    # SimplifyInference keeps group_norm on an empty tensor (its reshape would read 0 as "keep")
    ("group-norm-empty", "nn.group_norm({0}, {1}, {2}, num_groups=2)",
     [z(1, 4, 0, 3), z(4), z(4)], lambda x, g, b: [x.copy()]),
    ("instance-norm-empty", "nn.instance_norm({0}, {1}, {2})", [z(1, 4, 0, 3), z(4), z(4)],
     lambda x, g, b: [x.copy()]),
    ("conv2d-batch0", "nn.conv2d({0}, {1}, padding=[1, 1])", [z(0, 2, 5, 5), z(3, 2, 3, 3)],
     lambda x, w: [np.zeros((0, 3, 5, 5), F)]),
    ("conv2d-out0", "nn.conv2d({0}, {1}, padding=[1, 1])", [z(1, 2, 5, 5), z(0, 2, 3, 3)],
     lambda x, w: [np.zeros((1, 0, 5, 5), F)]),
    ("conv2d-in0", "nn.conv2d({0}, {1}, padding=[1, 1])", [z(1, 0, 4, 4), z(2, 0, 3, 3)],
     lambda x, w: [np.zeros((1, 2, 4, 4), F)]),
    ("max-pool2d-batch0", "nn.max_pool2d({0}, pool_size=[2, 2], strides=[2, 2])",
     [z(0, 2, 4, 4)], lambda x: [np.zeros((0, 2, 2, 2), F)]),
    ("avg-pool2d-batch0", "nn.avg_pool2d({0}, pool_size=[2, 2], strides=[2, 2])",
     [z(0, 2, 4, 4)], lambda x: [np.zeros((0, 2, 2, 2), F)]),
    ("global-avg-pool-batch0", "nn.global_avg_pool2d({0})", [z(0, 3, 2, 2)],
     lambda x: [np.zeros((0, 3, 1, 1), F)]),
    ("global-avg-pool-hw0", "nn.global_avg_pool2d({0})", [z(1, 3, 0, 2)],
     lambda x: [full((1, 3, 1, 1), np.nan)]),
    # the pools start from TVM's min_value, the lowest finite value (src/kernels/ref/conv_pool.c)
    ("global-max-pool-hw0", "nn.global_max_pool2d({0})", [z(1, 3, 2, 0)],
     lambda x: [full((1, 3, 1, 1), np.finfo(F).min)]),
    ("batch-norm-batch0", "nn.batch_norm({0}, {1}, {2}, {3}, {4}).0",
     [z(0, 3, 2, 2), full(3, 1.0), full(3, 0.0), full(3, 0.0), full(3, 1.0)],
     lambda x, g, b, m, v: [x.copy()]),
    ("pad-batch0", "nn.pad({0}, {1}, pad_width=[[0, 0], [1, 1]])", [z(0, 2), np.array(0, F)],
     lambda x, v: [np.zeros((0, 4), F)]),
    ("pad-empty-axis", "nn.pad({0}, {1}, pad_width=[[1, 1], [0, 0]])",
     [z(0, 2), np.array(5, F)], lambda x, v: [full((2, 2), 5.0)]),
    ("batch-flatten", "nn.batch_flatten({0})", [z(0, 2, 3)], lambda x: [x.reshape(0, 6)]),
    ("upsampling-batch0", "nn.upsampling({0}, scale_h=2.0, scale_w=2.0)", [z(0, 1, 2, 2)],
     lambda x: [np.zeros((0, 1, 4, 4), F)]),
    ("leaky-relu", "nn.leaky_relu({0}, alpha=0.1)", [E0], lambda x: [np.where(x > 0, x, 0.1 * x)]),
    # ---- fusible chains (the optimizer fuses these at -O3)
    ("chain", "nn.relu(add(multiply({0}, {1}), {1}))", [E0, z(0, 4)],
     lambda a, b: [np.maximum(a * b + b, 0)]),
    ("chain-reduce", "sum(exp(add({0}, {1})), axis=[1])", [E, z(2, 0, 3)],
     lambda a, b: [np.exp(a + b).sum(axis=1)]),
    ("dense-relu", "nn.relu(nn.bias_add(nn.dense({0}, {1}), {2}))", [z(0, 4), z(5, 4), z(5)],
     lambda x, w, b: [np.zeros((0, 5), F)]),
]

ERROR_CASES = [
    ("argmax-empty", "argmax({0}, axis=[1])", [E], "empty"),
    ("argmin-empty", "argmin({0}, axis=[0])", [z(0, 3)], "empty"),
]

# (engine flags, environment): the interpreter, the VM unoptimized and optimized, and the VM at
# each fast-kernel level.
ENGINES = [
    ("interp", ["--engine", "interp", "-O0"], {}),
    ("vm-O0", ["--engine", "vm", "-O0"], {}),
    ("vm-O3", ["--engine", "vm", "-O3"], {}),
    ("vm-O3-scalar", ["--engine", "vm", "-O3"], {"RLY_ISA": "scalar"}),
    ("vm-O3-avx2", ["--engine", "vm", "-O3"], {"RLY_ISA": "avx2"}),
    ("vm-O3-avx512", ["--engine", "vm", "-O3"], {"RLY_ISA": "avx512"}),
]


def run_case(call, args, flags, env):
    text, inputs = op_program(call, args)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        # run_relay passes -O0; the later -O and --engine flags win
        return run_relay(text, inputs, extra=flags)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.mark.parametrize("eng", ENGINES, ids=[e[0] for e in ENGINES])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_zero_size(case, eng):
    _, call, args, ref = case
    _, flags, env = eng
    got = run_case(call, args, flags, env)
    want = [np.asarray(w) for w in ref(*args)]
    assert len(got) == len(want), "%d outputs, expected %d" % (len(got), len(want))
    for g, w in zip(got, want):
        assert_close(g, w)


@pytest.mark.parametrize("eng", ENGINES[:3], ids=[e[0] for e in ENGINES[:3]])
@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_zero_size_error(case, eng):
    _, call, args, word = case
    _, flags, env = eng
    with pytest.raises(RlyError) as e:
        run_case(call, args, flags, env)
    msg = e.value.stderr
    assert word in msg and "prog.rly:" in msg, msg  # located at the call
    assert "Sanitizer" not in msg and e.value.code == 1, msg
