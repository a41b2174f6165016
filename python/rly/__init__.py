"""rly: Relay, the typed functional IR and compiler for deep learning, from Python.

    import rly
    sess = rly.InferenceSession("model.onnx")           # onnxruntime's interface
    outputs = sess.run(None, {"input": x})

    mod = rly.parse(text)                               # TVM's interface
    mod = rly.transform.FoldConstant()(mod)
    exe = rly.build(mod, opt_level=3)
    y = exe(x)

The package calls the C library (librly) through ctypes; python/rly/_capi.py says where it is
looked for."""
from . import frontend, op, transform
from ._capi import RlyError, RlyInvalidArgument, version
from .build import Executable, build
from .ir import IRModule, gradient, load, parse
from .session import InferenceSession, NodeArg
from .tensor import Tensor, from_dlpack
from .script import ScriptError, script
from .expr import (Call, Constant, Constructor, Expr, Function, GlobalVar, If, Let, Match,
                   PatternConstructor, PatternTuple, PatternVar, PatternWildcard, Tuple,
                   TupleGetItem, Var, const, var)
from . import adt  # rly.adt.Cons, Nil, Some, Nothing (None), Rose, zero, succ

__version__ = version()
__all__ = ["adt", "Constructor", "Match", "PatternConstructor", "PatternTuple", "PatternVar",
           "PatternWildcard", "Call", "Constant", "Expr", "Function", "GlobalVar", "If", "Let", "Tuple",
           "TupleGetItem", "Var", "const", "op", "var", "ScriptError", "script", "Executable", "IRModule", "InferenceSession", "NodeArg", "RlyError",
           "RlyInvalidArgument", "Tensor", "build", "from_dlpack", "frontend", "gradient", "load",
           "parse", "transform", "version"]
