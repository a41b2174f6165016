"""ir.py - modules of Relay code (TVM's tvm.IRModule, the parts rly has): rly.parse(text),
rly.load(path), mod.infer(), str(mod) (Relay text), mod.astext(show_types=True)."""
import ctypes
import os
import tempfile

from . import _capi
from ._capi import check, lib, take_string


class Context:
    """An rly_ctx: owns the IR of the modules made in it (alive while any of them is)."""

    def __init__(self):
        self._p = ctypes.c_void_p()
        check(lib.rly_ctx_new(ctypes.byref(self._p)))

    def __del__(self):
        if getattr(self, "_p", None):
            try:
                lib.rly_ctx_free(self._p)
            except Exception:  # interpreter shutdown
                pass
            self._p = None


class IRModule:
    """A Relay module (its functions, @main first among them, and type definitions). Made by
    rly.parse, rly.load or rly.frontend.from_onnx; passes change it in place."""

    def __init__(self, ctx, handle, name=None):
        self._ctx, self._p, self.name = ctx, handle, name

    def __str__(self):
        out = ctypes.c_void_p()
        check(lib.rly_module_print(self._p, ctypes.byref(out)))
        return take_string(out.value)

    def astext(self, show_types=False):
        """The module as Relay text; with show_types, each expression's inferred type as a
        /*ty=...*/ comment."""
        if not show_types:
            return str(self)
        out = ctypes.c_void_p()
        check(lib.rly_module_print_typed(self._p, ctypes.byref(out)))
        return take_string(out.value)

    def infer(self):
        """Infer and check the types of the whole module (rly.RlyError with every error,
        located); returns the module."""
        check(lib.rly_module_infer(self._p))
        return self

    @staticmethod
    def from_expr(expr, functions=None, prelude=False):
        """A module whose @main is expr (a Function, or an expression of no free variables),
        with the other global functions {name: Function} given; prelude: with Relay's standard
        library (List, Option, Tree, nat and their functions)."""
        from .expr import Function, module_from_functions
        main = expr if isinstance(expr, Function) else Function([], expr)
        funcs = {"main": main}
        funcs.update(functions or {})
        return module_from_functions(funcs, prelude)

    def copy(self):
        """An independent copy (through its text and the side .npz of its tensor constants)."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "copy.rly")
            check(lib.rly_module_save(self._p, path.encode()))
            ctx = Context()
            mod = ctypes.c_void_p()
            check(lib.rly_module_parse_file(ctx._p, path.encode(), ctypes.byref(mod)))
            return IRModule(ctx, mod, self.name)

    def save(self, path):
        """Write the module as Relay text to path (its tensor constants to the .npz beside it)."""
        check(lib.rly_module_save(self._p, os.fspath(path).encode()))

    def __repr__(self):
        return "IRModule(%r)" % (self.name or "<module>")


def parse(text, name="<string>"):
    """Parse Relay text (`#[version = "0.0.5"]` ...; a bare expression too) into a module.
    Syntax errors are rly.RlyError with name:line:col."""
    ctx = Context()
    data = text.encode() if isinstance(text, str) else bytes(text)
    mod = ctypes.c_void_p()
    check(lib.rly_module_parse(ctx._p, data, len(data), name.encode(), ctypes.byref(mod)))
    return IRModule(ctx, mod, name)


def load(path, shape=None):
    """A module from a file: Relay text (.rly) or an ONNX model (.onnx; shape: {input: dims}
    for inputs with dynamic dims)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError("rly: no such file: %s" % path)
    with open(path, "rb") as f:
        head = f.read(64)
    if path.endswith(".rly") or head.lstrip().startswith(b"#[version"):
        ctx = Context()
        mod = ctypes.c_void_p()
        check(lib.rly_module_parse_file(ctx._p, path.encode(), ctypes.byref(mod)))
        return IRModule(ctx, mod, path)
    return from_onnx(path, shape)


def shapes_arg(shape):
    if not shape:
        return None
    return " ".join("%s:[%s]" % (k, ",".join(str(int(d)) for d in v))
                    for k, v in shape.items()).encode()


def from_onnx(path, shape=None):
    """Import an ONNX model (rly.frontend.from_onnx): a type-checked module whose @main takes the
    graph's inputs and returns its outputs. shape: {input name: dims} for dynamic dims."""
    ctx = Context()
    mod = ctypes.c_void_p()
    check(lib.rly_module_import_onnx(ctx._p, os.fspath(path).encode(), shapes_arg(shape),
                                     ctypes.byref(mod)))
    return IRModule(ctx, mod, os.fspath(path))


def gradient(mod, mode="higher", entry=None, name=None):
    """mod: a module, an rly.Function (its @main) or an @rly.script function. A copy of mod whose @name (default: @main) is the gradient of @entry (default: @main):
    fn(T1..Tn) -> (R, (T1..Tn)), the result and the gradient of the sum of its elements with
    respect to each parameter (docs/autodiff.md). mode "higher" takes the whole language,
    "first" dataflow programs."""
    if mode not in ("higher", "first"):
        raise ValueError("mode must be 'higher' or 'first', not %r" % (mode,))
    from .expr import Function
    from .script import ScriptFunction
    if isinstance(mod, ScriptFunction):
        mod = mod.module
    elif isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    out = mod.copy()
    check(lib.rly_module_gradient(out._p, entry.encode() if entry else None, mode.encode(),
                                  name.encode() if name else None))
    return out


_capi.IRModule = IRModule
