"""test_zero_size_onnx.py - ONNX operators on tensors with zero-sized dims, rly against
onnxruntime (issue 18, item 2).

Each case is a one-node ONNX model (built with onnx.helper) whose inputs have a 0 somewhere: an
empty batch, an empty reduced axis, empty indices, zero repeats or split sizes. rly imports and
runs it on the interpreter and on the VM (-O3); the outputs must match onnxruntime's in shape,
dtype and value. Reductions over an empty axis give ONNX's identities (ReduceSum 0, ReduceProd
1, ReduceMean NaN, ReduceMax -inf, ReduceMin +inf, ReduceLogSumExp -inf, ReduceL2 0), whether
the axes come as an attribute (opset 13) or as a constant or run-time input (opsets 13 and 18).
ArgMax over an empty axis is an error at the node (ONNX has no index to give).

Adding a case is adding a line to CASES: (id, op_type, inputs {name: array}, attributes,
constant inputs {name: array} (initializers), opset).
"""
import os
import subprocess
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

RLY = os.environ.get("RLY_BIN", "rly")
F = np.float32


def z(*shape, dtype=F):
    n = int(np.prod(shape)) if shape else 1
    return (np.arange(n) % 7 - 3).astype(dtype).reshape(shape)


def i64(*v):
    return np.array(v, dtype=np.int64)


E = z(2, 0, 4)

# (id, op, inputs, attrs, initializers, opset, outputs); the node's inputs are the inputs then
# the initializers, in the order given ("" skips an optional input).
CASES = [
    ("Add", "Add", {"a": E, "b": z(1, 1, 4)}, {}, {}, 13, 1),
    ("Relu", "Relu", {"x": z(0, 3)}, {}, {}, 13, 1),
    ("MatMul-k0", "MatMul", {"a": z(3, 0), "b": z(0, 2)}, {}, {}, 13, 1),
    ("MatMul-batch0", "MatMul", {"a": z(0, 3, 4), "b": z(4, 2)}, {}, {}, 13, 1),
    ("Gemm-batch0", "Gemm", {"a": z(0, 4)}, {"transB": 1}, {"w": z(3, 4), "c": z(3)}, 13, 1),
    ("Conv-batch0", "Conv", {"x": z(0, 2, 5, 5)}, {"pads": [1, 1, 1, 1]},
     {"w": z(3, 2, 3, 3)}, 13, 1),
    ("MaxPool-batch0", "MaxPool", {"x": z(0, 2, 4, 4)}, {"kernel_shape": [2, 2]}, {}, 13, 1),
    ("GlobalAveragePool-batch0", "GlobalAveragePool", {"x": z(0, 3, 2, 2)}, {}, {}, 13, 1),
    ("Concat-empty-piece", "Concat", {"a": z(0, 3), "b": z(2, 3)}, {"axis": 0}, {}, 13, 1),
    ("Split-zero-sizes-13", "Split", {"x": z(4, 2)}, {"axis": 0}, {"split": i64(0, 4, 0)}, 13, 3),
    ("Split-of-empty-18", "Split", {"x": z(0, 2)}, {"axis": 0, "num_outputs": 2}, {}, 18, 2),
    ("Tile-zero-repeats", "Tile", {"x": z(2, 3)}, {}, {"r": i64(0, 2)}, 13, 1),
    ("Tile-of-empty", "Tile", {"x": z(0, 3)}, {}, {"r": i64(3, 2)}, 13, 1),
    ("Reshape-to-empty", "Reshape", {"x": E}, {}, {"s": i64(-1, 4)}, 13, 1),
    ("Reshape-allowzero", "Reshape", {"x": z(0, 3, 4)}, {"allowzero": 1},
     {"s": i64(3, 4, 0)}, 14, 1),
    ("Slice-empty", "Slice", {"x": z(4, 3)}, {}, {"st": i64(2), "en": i64(2)}, 13, 1),
    ("Gather-empty-indices", "Gather", {"x": z(4, 3)}, {"axis": 0},
     {"i": np.zeros((0, 2), np.int64)}, 13, 1),
    ("Expand-to-empty", "Expand", {"x": z(1, 3)}, {}, {"s": i64(0, 3)}, 13, 1),
    ("Transpose", "Transpose", {"x": E}, {"perm": [2, 0, 1]}, {}, 13, 1),
    ("Softmax-batch0", "Softmax", {"x": z(0, 5)}, {}, {}, 13, 1),
    ("LayerNormalization-batch0", "LayerNormalization", {"x": z(0, 4)}, {},
     {"g": z(4), "b": z(4)}, 17, 1),
    ("Pad-empty", "Pad", {"x": z(0, 2)}, {}, {"p": i64(1, 0, 1, 0)}, 13, 1),
    ("Where", "Where", {"c": np.zeros((0, 3), bool), "a": z(0, 3), "b": z(3)}, {}, {}, 13, 1),
    ("Cast", "Cast", {"x": E}, {"to": onnx.TensorProto.INT32}, {}, 13, 1),
    ("CumSum", "CumSum", {"x": E}, {}, {"ax": np.array(1, np.int64)}, 14, 1),
    ("TopK-k0", "TopK", {"x": z(2, 5)}, {}, {"k": i64(0)}, 13, 2),
    ("NonZero-none", "NonZero", {"x": np.zeros((2, 3), F)}, {}, {}, 13, 1),
    ("ConstantOfShape-0", "ConstantOfShape", {}, {}, {"s": i64(2, 0)}, 13, 1),
    ("Range-empty", "Range", {}, {}, {"a": np.array(3, F), "b": np.array(3, F),
                                      "d": np.array(1, F)}, 13, 1),
    ("Unsqueeze", "Unsqueeze", {"x": z(0, 3)}, {}, {"ax": i64(0)}, 13, 1),
    ("Flatten", "Flatten", {"x": z(0, 2, 3)}, {"axis": 1}, {}, 13, 1),
    ("ArgMax-kept-empty", "ArgMax", {"x": z(0, 3)}, {"axis": 1}, {}, 13, 1),
    ("ConvTranspose-batch0", "ConvTranspose", {"x": z(0, 2, 3, 3)}, {},
     {"w": z(2, 3, 2, 2)}, 13, 1),
    ("BatchNormalization-batch0", "BatchNormalization", {"x": z(0, 3, 2)}, {},
     {"s": z(3), "b": z(3), "m": z(3), "v": np.ones(3, F)}, 15, 1),
    ("InstanceNormalization-batch0", "InstanceNormalization", {"x": z(0, 3, 4)}, {},
     {"s": z(3), "b": z(3)}, 13, 1),
    ("Resize-batch0", "Resize", {"x": z(0, 1, 2, 2)}, {"mode": "nearest"},
     {"": None, "sc": np.array([1, 1, 2, 2], F)}, 13, 1),
    ("DepthToSpace-batch0", "DepthToSpace", {"x": z(0, 4, 2, 2)}, {"blocksize": 2}, {}, 13, 1),
    ("GatherND-empty", "GatherND", {"x": z(3, 4)}, {}, {"i": np.zeros((0, 1), np.int64)}, 13, 1),
    ("GatherElements-empty", "GatherElements", {"x": z(3, 4)}, {"axis": 1},
     {"i": np.zeros((3, 0), np.int64)}, 13, 1),
    ("ScatterND-empty-updates", "ScatterND", {"x": z(3, 4)}, {},
     {"i": np.zeros((0, 1), np.int64), "u": z(0, 4)}, 13, 1),
    ("ScatterElements-empty", "ScatterElements", {"x": z(3, 4)}, {"axis": 0},
     {"i": np.zeros((0, 4), np.int64), "u": z(0, 4)}, 13, 1),
    ("OneHot-empty", "OneHot", {"i": np.zeros((0,), np.int64)}, {},
     {"d": np.array(3, np.int64), "v": np.array([0, 1], F)}, 11, 1),
    ("Compress-none", "Compress", {"x": z(3, 2)}, {"axis": 0},
     {"c": np.zeros(3, bool)}, 11, 1),
    ("Einsum-k0", "Einsum", {"a": z(2, 0), "b": z(0, 3)}, {"equation": "ij,jk->ik"}, {}, 12, 1),
    ("Sum-variadic", "Sum", {"a": z(0, 3), "b": z(3), "c": z(1, 3)}, {}, {}, 13, 1),
    ("Max-variadic", "Max", {"a": z(0, 3), "b": z(3)}, {}, {}, 13, 1),
    ("Hardmax-batch0", "Hardmax", {"x": z(0, 4)}, {}, {}, 13, 1),
    ("LogSoftmax-batch0", "LogSoftmax", {"x": z(0, 4)}, {}, {}, 13, 1),
    ("Size", "Size", {"x": E}, {}, {}, 13, 1),
    ("Shape", "Shape", {"x": E}, {}, {}, 13, 1),
    ("QuantizeLinear", "QuantizeLinear", {"x": z(0, 3)}, {},
     {"s": np.array(0.5, F), "zp": np.array(3, np.uint8)}, 13, 1),
    ("LSTM-batch0", "LSTM", {"x": z(2, 0, 3)}, {"hidden_size": 4},
     {"w": z(1, 16, 3), "r": z(1, 16, 4)}, 14, 1),
    ("NonMaxSuppression-no-boxes", "NonMaxSuppression", {"b": z(1, 0, 4), "s": z(1, 1, 0)}, {},
     {"m": np.array([3], np.int64)}, 11, 1),
    ("Det-0x0", "Det", {"x": z(2, 0, 0)}, {}, {}, 11, 1),
    ("Mod", "Mod", {"a": z(0, 2, dtype=np.int32), "b": np.array([3, 5], np.int32)}, {}, {},
     13, 1),
    # reductions over the empty axis 1 of (2, 0, 4): attribute axes (opset 11), constant and
    # run-time input axes (13 for ReduceSum, 18 for the rest), keepdims 1 and 0
]
for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]:
    input_opset = 13 if op == "ReduceSum" else 18
    for keep in (1, 0):
        CASES.append(("%s-attr-keep%d" % (op, keep), op, {"x": E},
                      {"axes": [1], "keepdims": keep}, {}, 11, 1))
        CASES.append(("%s-const-keep%d" % (op, keep), op, {"x": E}, {"keepdims": keep},
                      {"axes": i64(1)}, input_opset, 1))
        CASES.append(("%s-input-keep%d" % (op, keep), op, {"x": E, "axes": i64(1)},
                      {"keepdims": keep}, {}, input_opset, 1))
    CASES.append(("%s-all" % op, op, {"x": E}, {"keepdims": 0}, {}, 11, 1))
CASES.append(("ReduceSum-noop-empty-axes", "ReduceSum", {"x": E, "axes": np.zeros(0, np.int64)},
              {"noop_with_empty_axes": 1}, {}, 13, 1))
CASES.append(("ReduceSum-empty-axes", "ReduceSum", {"x": E, "axes": np.zeros(0, np.int64)},
              {}, {}, 13, 1))

# Expected outputs where onnxruntime cannot give them (its LSTM aborts on an empty batch).
WANT = {"LSTM-batch0": [np.zeros((2, 1, 0, 4), F)]}

ENGINES = [("interp", ["--engine", "interp"]), ("vm", ["--engine", "vm", "-O3"])]


def make_model(op, inputs, attrs, inits, opset, n_out):
    names = list(inputs) + list(inits)
    inits = {n: a for n, a in inits.items() if a is not None}  # "": an omitted input
    vis = [helper.make_tensor_value_info(
        n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
        for n, a in inputs.items()]
    outs = ["y%d" % i for i in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph([node], "g", vis,
                              [helper.make_empty_tensor_value_info(o) for o in outs],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def run_rly(path, inputs, flags):
    with tempfile.TemporaryDirectory() as d:
        cmd = [RLY, "run", path, "--output", os.path.join(d, "out.npz")] + flags
        if inputs:
            np.savez(os.path.join(d, "in.npz"), **inputs)
            cmd += ["--inputs", os.path.join(d, "in.npz")]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise AssertionError("rly failed (%d): %s" % (p.returncode, p.stderr))
        with np.load(os.path.join(d, "out.npz")) as zf:
            return {k: zf[k] for k in zf.files}


@pytest.mark.parametrize("eng", ENGINES, ids=[e[0] for e in ENGINES])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_zero_size_onnx(case, eng, tmp_path):
    cid, op, inputs, attrs, inits, opset, n_out = case
    m = make_model(op, inputs, attrs, inits, opset, n_out)
    path = str(tmp_path / "model.onnx")
    onnx.save(m, path)
    if cid in WANT:
        want = WANT[cid]
    else:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        want = sess.run(None, inputs)
    if op == "ReduceMean" and E.shape[1] == 0:  # the spec's NaN (onnxruntime gives 0)
        want = [np.full(w.shape, np.nan, w.dtype) for w in want]
    got = run_rly(path, inputs, eng[1])
    for i, w in enumerate(want):
        g = got["y%d" % i]
        assert g.shape == w.shape, "y%d: shape %s, expected %s" % (i, g.shape, w.shape)
        assert g.dtype == w.dtype, "y%d: dtype %s, expected %s" % (i, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("eng", ENGINES, ids=[e[0] for e in ENGINES])
def test_argmax_over_empty_axis_is_an_error(eng, tmp_path):
    m = make_model("ArgMax", {"x": z(0, 3)}, {"axis": 0}, {}, 13, 1)
    path = str(tmp_path / "model.onnx")
    onnx.save(m, path)
    with pytest.raises(AssertionError) as e:
        run_rly(path, {"x": z(0, 3)}, eng[1])
    msg = str(e.value)
    assert "empty" in msg and "model.onnx:" in msg and "Sanitizer" not in msg, msg


@pytest.mark.parametrize("eng", ENGINES, ids=[e[0] for e in ENGINES])
@pytest.mark.parametrize("noop", [0, 1])
@pytest.mark.parametrize("axes", [[1], [], [0, 2], [-1]], ids=str)
@pytest.mark.parametrize("shape", [(2, 0, 4), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceSum"])
def test_reduce_axes_of_runtime_length(op, shape, axes, noop, eng, tmp_path):
    """Reduce*-18 with an `axes` input whose length is only known at run time (dim 'n'): the
    per-axis `if` chain, with noop_with_empty_axes both ways."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(shape))
    a = helper.make_tensor_value_info("axes", onnx.TensorProto.INT64, ["n"])
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1, noop_with_empty_axes=noop)
    graph = helper.make_graph([node], "g", [x, a], [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = str(tmp_path / "model.onnx")
    onnx.save(m, path)
    feeds = {"x": z(*shape), "axes": np.array(axes, np.int64)}
    (want,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = run_rly(path, feeds, eng[1])["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)
