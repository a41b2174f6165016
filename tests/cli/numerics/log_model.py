"""log_model.py OUT.onnx - the three-node ONNX model test_numerics.sh and test_viz.sh share:
y = relu(log(x - 3)) on a 2x2 float input, nodes named shift_down, the_log, relu_out (ones as
input make the log NaN at the_log)."""
import sys

import onnx
from onnx import TensorProto, helper

g = helper.make_graph(
    [helper.make_node('Sub', ['x', 'three'], ['t'], name='shift_down'),
     helper.make_node('Log', ['t'], ['l'], name='the_log'),
     helper.make_node('Relu', ['l'], ['y'], name='relu_out')],
    'g', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 2])],
    [helper.make_tensor_value_info('y', TensorProto.FLOAT, [2, 2])],
    [helper.make_tensor('three', TensorProto.FLOAT, [], [3.0])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), sys.argv[1])
