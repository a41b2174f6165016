"""frontend.py - importers (TVM's tvm.relay.frontend): rly.frontend.from_onnx(path, shape=None)."""
from .ir import from_onnx

__all__ = ["from_onnx"]
