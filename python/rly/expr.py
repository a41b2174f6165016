"""expr.py - building Relay programs from Python (TVM's relay.var / relay.Function / ...).

    x = rly.var("x", shape=(1, 16), dtype="float32")
    w = rly.const(np.ones((8, 16), np.float32))
    y = rly.op.nn.relu(rly.op.nn.dense(x, w))
    mod = rly.IRModule.from_expr(rly.Function([x], y))

Expressions render to Relay text; a module is parsed from that text (tensor constants go to the
side .npz the parser reads) and type-checked. Each operator call is type-checked when it is made,
from its arguments' types, so a wrong shape or attribute is an rly.RlyError naming the Python
file and line of the call (the operator's relation says what is wrong)."""
import ctypes
import inspect
import os
import re
import tempfile

import numpy as np

from ._capi import RlyError, check, lib, take_string

_NP_NAME = {np.dtype(k): v for k, v in [
    (np.bool_, "bool"), (np.int8, "int8"), (np.int16, "int16"), (np.int32, "int32"),
    (np.int64, "int64"), (np.uint8, "uint8"), (np.uint16, "uint16"), (np.uint32, "uint32"),
    (np.uint64, "uint64"), (np.float16, "float16"), (np.float32, "float32"),
    (np.float64, "float64")]}


def _caller():
    """The first frame outside this package: (file, line)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for f in inspect.stack()[2:]:
        if not os.path.abspath(f.filename).startswith(here):
            return f.filename, f.lineno
    return "<unknown>", 0


def tensor_type(shape, dtype="float32"):
    dims = ", ".join("?" if d is None or d == -1 else str(int(d)) for d in shape)
    if len(shape) == 1:
        dims += ""
    return "Tensor[(%s), %s]" % (dims, dtype) if shape else dtype


class Expr:
    """A Relay expression; `type` is its type as Relay text (known when it was made)."""
    type = None

    def _bin(self, op, other, swap=False):
        from . import op as ops
        other = other if isinstance(other, Expr) else const(other, _scalar_dtype(self))
        a, b = (other, self) if swap else (self, other)
        return getattr(ops, op)(a, b)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("subtract", o)
    def __rsub__(self, o): return self._bin("subtract", o, True)
    def __mul__(self, o): return self._bin("multiply", o)
    def __rmul__(self, o): return self._bin("multiply", o, True)
    def __truediv__(self, o): return self._bin("divide", o)
    def __rtruediv__(self, o): return self._bin("divide", o, True)
    def __matmul__(self, o): return self._bin("nn_matmul", o)
    def __lt__(self, o): return self._bin("less", o)
    def __le__(self, o): return self._bin("less_equal", o)
    def __gt__(self, o): return self._bin("greater", o)
    def __ge__(self, o): return self._bin("greater_equal", o)

    def __neg__(self):
        from . import op as ops
        return ops.negative(self)

    def __getitem__(self, i):
        return TupleGetItem(self, i)

    def __call__(self, *args):
        return Call(self, list(args))

    __hash__ = object.__hash__


def _scalar_dtype(e):
    m = re.search(r"(\w+)\]$", e.type or "") if e.type else None
    if m:
        return m.group(1)
    return e.type if e.type and re.fullmatch(r"[a-z]+\d*", e.type) else "float32"


class Var(Expr):
    def __init__(self, name, type_):
        self.name, self.type = name, type_


class Constant(Expr):
    def __init__(self, value, dtype=None):
        a = np.asarray(value, dtype=dtype)
        if a.dtype not in _NP_NAME:
            raise RlyError("rly.const: numpy dtype %s has no Relay equivalent" % a.dtype)
        self.value = a
        self.type = tensor_type(a.shape, _NP_NAME[a.dtype])


class Call(Expr):
    def __init__(self, fn, args, attrs=None, type_=None):
        self.fn, self.args, self.attrs, self.type = fn, list(args), dict(attrs or {}), type_
        if type_ is None and isinstance(fn, (Function, GlobalVar)) and fn.ret_type:
            self.type = fn.ret_type


class Tuple(Expr):
    def __init__(self, fields):
        self.fields = [f if isinstance(f, Expr) else const(f) for f in fields]
        types = [f.type for f in self.fields]
        self.type = "(%s%s)" % (", ".join(types), "," if len(types) == 1 else "") \
            if all(types) else None


class TupleGetItem(Expr):
    def __init__(self, tup, index):
        self.tuple, self.index = tup, int(index)
        self.type = _tuple_field(tup.type, self.index)


class Function(Expr):
    def __init__(self, params, body, ret_type=None):
        self.params, self.body = list(params), body
        self.ret_type = ret_type or body.type
        self.type = "fn (%s) -> %s" % (", ".join(p.type for p in self.params), self.ret_type)


class Let(Expr):
    def __init__(self, var, value, body):
        self.var, self.value, self.body = var, value, body
        self.type = body.type


class If(Expr):
    def __init__(self, cond, then_, else_):
        self.cond, self.then_, self.else_ = cond, then_, else_
        self.type = then_.type or else_.type


class GlobalVar(Expr):
    def __init__(self, name, type_=None, ret_type=None):
        self.name, self.type, self.ret_type = name, type_, ret_type


def var(name, shape=None, dtype="float32", type_annotation=None):
    """A variable: of a tensor type (shape, dtype; None or -1 for a `?` dim, () for a scalar), or
    of any Relay type given as text (type_annotation="(Tensor[(2), float32], int32)")."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise RlyError("rly.var: %r is not a Relay variable name" % name)
    return Var(name, type_annotation or tensor_type(tuple(shape or ()), dtype))


def const(value, dtype=None):
    """A constant from a Python number or a numpy array (its dtype, or dtype)."""
    if dtype is None and isinstance(value, float):
        dtype = "float32"
    if dtype is None and isinstance(value, bool):
        dtype = "bool"
    elif dtype is None and isinstance(value, int):
        dtype = "int32"
    return Constant(value, dtype)


def _tuple_field(t, i):
    if not t or not t.startswith("("):
        return None
    depth, start, fields = 0, 1, []
    for k, c in enumerate(t):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if (c == "," and depth == 1) or (depth == 0 and c == ")"):
            part = t[start:k].strip()
            if part:
                fields.append(part)
            start = k + 1
    return fields[i] if 0 <= i < len(fields) else None


# ---- rendering ---------------------------------------------------------------------------------

def _attr(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v)) + "f"
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, (list, tuple)):
        return "[%s]" % ", ".join(_attr(x) for x in v)
    if isinstance(v, np.dtype):
        return '"%s"' % _NP_NAME[v]
    raise RlyError("an attribute value of type %s cannot be written in Relay" % type(v).__name__)


class _Printer:
    """Relay text for expressions: tensor constants as meta[relay.Constant][i] (collected in
    self.consts), scalars inline, variables by name (uniquified per object), everything else
    nested (sharing is kept only through Let, as written)."""

    def __init__(self):
        self.consts, self.names, self.used = [], {}, set()

    def name(self, v):
        if id(v) not in self.names:
            base, k = v.name, 0
            n = base
            while n in self.used:
                k += 1
                n = "%s_%d" % (base, k)
            self.used.add(n)
            self.names[id(v)] = (n, v)
        return "%" + self.names[id(v)][0]

    def expr(self, e):
        if isinstance(e, Var):
            return self.name(e)
        if isinstance(e, GlobalVar):
            return "@" + e.name
        if isinstance(e, Constant):
            a = e.value
            if a.ndim == 0 and a.dtype in (np.float32, np.int32, np.bool_, np.float64, np.int64):
                x = a.item()
                if a.dtype == np.bool_:
                    return "True" if x else "False"
                if a.dtype == np.float32 and np.isfinite(x):
                    return repr(float(x)) + "f"
                if a.dtype == np.float64 and np.isfinite(x):
                    return repr(float(x)) + "f64"
                if a.dtype == np.int32:
                    return str(int(x))
                if a.dtype == np.int64:
                    return str(int(x)) + "i64"
            self.consts.append(a)
            return "meta[relay.Constant][%d]" % (len(self.consts) - 1)
        if isinstance(e, Call):
            fn = e.fn if isinstance(e.fn, str) else self.expr(e.fn)
            parts = [self.expr(a) for a in e.args]
            parts += ["%s=%s" % (k, _attr(v)) for k, v in e.attrs.items() if v is not None]
            return "%s(%s)" % (fn, ", ".join(parts))
        if isinstance(e, Tuple):
            items = [self.expr(f) for f in e.fields]
            return "(%s%s)" % (", ".join(items), "," if len(items) == 1 else "")
        if isinstance(e, TupleGetItem):
            return "%s.%d" % (self.expr(e.tuple), e.index)
        if isinstance(e, Function):
            ps = ", ".join("%s: %s" % (self.name(p), p.type) for p in e.params)
            ret = " -> %s" % e.ret_type if e.ret_type else ""
            return "fn (%s)%s {\n%s\n}" % (ps, ret, self.expr(e.body))
        if isinstance(e, Let):
            ann = ": %s" % e.var.type if e.var.type else ""
            return "let %s%s = %s;\n%s" % (self.name(e.var), ann, self.expr(e.value),
                                           self.expr(e.body))
        if isinstance(e, If):
            return "if (%s) {\n%s\n} else {\n%s\n}" % (self.expr(e.cond), self.expr(e.then_),
                                                      self.expr(e.else_))
        raise RlyError("not a Relay expression: %r" % (e,))


def _module_text(funcs, printer):
    out = ['#[version = "0.0.5"]']
    for name, fn in funcs.items():
        ps = ", ".join("%s: %s" % (printer.name(p), p.type) for p in fn.params)
        ret = " -> %s" % fn.ret_type if fn.ret_type else ""
        out.append("def @%s(%s)%s {\n%s\n}" % (name, ps, ret, printer.expr(fn.body)))
    return "\n".join(out) + "\n"


def module_from_functions(funcs, prelude=False):
    """An rly.IRModule (type-checked) of global functions {name: Function}."""
    from .ir import Context, IRModule
    p = _Printer()
    text = _module_text(funcs, p)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "module.rly")
        with open(path, "w") as f:
            f.write(text)
        if p.consts:
            np.savez(os.path.join(d, "module.npz"),
                     **{"constant_%d" % i: a for i, a in enumerate(p.consts)})
        ctx = Context()
        mod = ctypes.c_void_p()
        check(lib.rly_module_parse_file(ctx._p, path.encode(), ctypes.byref(mod)))
        m = IRModule(ctx, mod, "<rly builder>")
    return m.infer()


# ---- operator calls, type-checked as they are made -------------------------------------------

def op_call(name, args, attrs):
    """Call operator `name` on args (Exprs or numbers) with attrs, its result type inferred from
    the arguments' types; a type error is raised at the Python caller's file and line."""
    file, line = _caller()
    args = [a if isinstance(a, Expr) else const(a, _scalar_dtype(args[0]) if args and
                                                 isinstance(args[0], Expr) else None)
            for a in args]
    c = Call(name, args, attrs)
    if any(a.type is None for a in args):
        return c  # an argument of unknown type: checked with the whole module
    params = [Var("a%d" % i, a.type) for i, a in enumerate(args)]
    probe = Call(name, params, attrs)
    p = _Printer()
    text = _module_text({"main": Function(params, probe, ret_type=None)}, p)
    from .ir import Context
    ctx = Context()
    mod = ctypes.c_void_p()
    st = lib.rly_module_parse(ctx._p, text.encode(), len(text.encode()), b"<op>",
                              ctypes.byref(mod))
    if st == 0:
        st = lib.rly_module_infer(mod)
    if st != 0:
        from ._capi import last_error
        msg = last_error()
        m = re.search(r"error: (.*)", msg)
        why = m.group(1) if m else msg
        if not why.startswith(name + ":"):
            why = "%s: %s" % (name, why)
        raise RlyError("%s:%d: %s" % (file, line, why))
    out = ctypes.c_void_p()
    check(lib.rly_module_print_typed(mod, ctypes.byref(out)))
    typed = take_string(out.value)
    m = re.findall(r"/\* ty=(.*?) \*/", typed)
    c.type = m[-1] if m else None
    return c
