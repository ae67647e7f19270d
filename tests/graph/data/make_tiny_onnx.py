#!/usr/bin/env python3
"""Writes tiny_cnn.onnx, the small ONNX model the spec and CLI tests import: conv 3->8 3x3/2 with
bias, ReLU, depthwise 3x3, global average pool, flatten, fc 8->10 (Gemm). Built with onnx.helper
(Debian's python3-onnx), random weights from a fixed seed; opset 13. Run it from this directory:
    /usr/bin/python3 make_tiny_onnx.py"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(1)


def weight(name, *shape):
    return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)


nodes = [
    helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], name="/stem/Conv",
                     kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"], name="/stem/Relu"),
    helper.make_node("Conv", ["r1", "w2"], ["c2"], name="/dw/Conv", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], group=8),
    helper.make_node("GlobalAveragePool", ["c2"], ["p"], name="/pool"),
    helper.make_node("Flatten", ["p"], ["f"], name="/flatten", axis=1),
    helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], name="/fc/Gemm", transB=1),
]
graph = helper.make_graph(
    nodes, "tiny_cnn",
    [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
    [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 8, 1, 3, 3), weight("w3", 10, 8),
     weight("b3", 10)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="carb tests")
onnx.checker.check_model(model)
onnx.save(model, "tiny_cnn.onnx")
