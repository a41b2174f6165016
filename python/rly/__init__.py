"""rly: Relay, the typed functional IR and compiler for deep learning, from Python.

    import rly
    sess = rly.InferenceSession("model.onnx")
    outputs = sess.run(None, {"input": x})

The package calls the C library (librly) through ctypes; see python/rly/_capi.py for how it is
found."""
from ._capi import RlyError, RlyInvalidArgument, version
from .session import InferenceSession, NodeArg

__version__ = version()
__all__ = ["InferenceSession", "NodeArg", "RlyError", "RlyInvalidArgument", "version"]
