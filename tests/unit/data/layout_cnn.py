"""layout_cnn.py - writes layout_cnn.onnx, the small CNN that tests/unit/test_passes_layout.c
converts with ConvertLayout and runs against the original: Conv+bias, Relu, MaxPool, a residual
Conv+BatchNormalization+Relu+Add, a 1x1 Conv, Concat on channels, AveragePool with padding,
GlobalAveragePool, Flatten, Gemm. Random weights, fixed seed; run it again to regenerate:
    .venv/bin/python tests/unit/data/layout_cnn.py tests/unit/data/layout_cnn.onnx"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


def init(name, *shape, positive=False):
    a = rng.standard_normal(shape).astype(np.float32) * 0.3
    if positive:
        a = np.abs(a) + 0.5
    return numpy_helper.from_array(a, name)


inits = [
    init("w1", 16, 8, 3, 3), init("b1", 16),
    init("w2", 16, 16, 3, 3), init("b2", 16),
    init("bn_s", 16, positive=True), init("bn_b", 16), init("bn_m", 16),
    init("bn_v", 16, positive=True),
    init("w3", 8, 16, 1, 1),
    init("fc_w", 10, 24), init("fc_b", 10),
]
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"]),
    helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["c2", "bn_s", "bn_b", "bn_m", "bn_v"], ["n2"]),
    helper.make_node("Relu", ["n2"], ["r2"]),
    helper.make_node("Add", ["r2", "p1"], ["a2"]),
    helper.make_node("Conv", ["a2", "w3"], ["c3"]),
    helper.make_node("Concat", ["a2", "c3"], ["cat"], axis=1),
    helper.make_node("AveragePool", ["cat"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                     strides=[1, 1]),
    helper.make_node("GlobalAveragePool", ["ap"], ["gp"]),
    helper.make_node("Flatten", ["gp"], ["fl"]),
    helper.make_node("Gemm", ["fl", "fc_w", "fc_b"], ["y"], transB=1),
]
graph = helper.make_graph(
    nodes, "layout_cnn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
