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
import os
import re
import sys
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
    f = sys._getframe(1)
    while f is not None:
        if not os.path.abspath(f.f_code.co_filename).startswith(here):
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return "<unknown>", 0


def tensor_type(shape, dtype="float32"):
    dims = ", ".join("?" if d is None or d == -1 else str(int(d)) for d in shape)
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


def _fn_ret(t):
    """R of a function type "fn (A, B) -> R", or None."""
    if not t or not t.startswith("fn ("):
        return None
    depth = 0
    for k in range(3, len(t)):
        if t[k] in "([":
            depth += 1
        elif t[k] in ")]":
            depth -= 1
            if depth == 0:
                rest = t[k + 1:].strip()
                return rest[2:].strip() if rest.startswith("->") else None
    return None


class Call(Expr):
    def __init__(self, fn, args, attrs=None, type_=None):
        self.fn, self.args, self.attrs, self.type = fn, list(args), dict(attrs or {}), type_
        if type_ is None and isinstance(fn, (Function, GlobalVar)) and fn.ret_type:
            self.type = fn.ret_type
        elif type_ is None and isinstance(fn, Expr):
            self.type = _fn_ret(fn.type)


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
        known = self.ret_type and all(p.type for p in self.params)
        self.type = "fn (%s) -> %s" % (", ".join(p.type for p in self.params),
                                       self.ret_type) if known else None


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


class Constructor(Expr):
    """A constructor of an algebraic data type, by name (the prelude's Cons, Nil, Some, None,
    Rose, zero, succ, or one a module defines). Call it to build a value: Cons(x, Nil)."""

    def __init__(self, name):
        self.name, self.type = name, None

    def __call__(self, *args):
        c = Call(self, list(args))
        first = args[0].type if args and isinstance(args[0], Expr) else None
        if self.name == "Cons" and first:
            c.type = "List[%s]" % first
        elif self.name == "Some" and first:
            c.type = "Option[%s]" % first
        return c


class PatternVar:
    def __init__(self, var):
        self.var = var


class PatternWildcard:
    pass


class PatternConstructor:
    def __init__(self, ctor, patterns=()):
        self.ctor, self.patterns = ctor, list(patterns)


class PatternTuple:
    def __init__(self, patterns):
        self.patterns = list(patterns)


class Match(Expr):
    """match (data) { pattern => body, ... }: clauses [(pattern, body)]; complete=False is
    Relay's `match?` (a value no clause takes fails at run time)."""

    def __init__(self, data, clauses, complete=True):
        self.data, self.clauses, self.complete = data, list(clauses), complete
        self.type = next((b.type for _, b in self.clauses if b.type), None)


# the prelude's constructors
Cons, Nil, Some, Nothing, Rose, zero, succ = (Constructor(n) for n in
                                              ("Cons", "Nil", "Some", "None", "Rose", "zero",
                                               "succ"))


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
    """Relay text for expressions, in A-normal form: in each block (a function body, an if
    branch) every call, tuple, projection, if and function literal the block's dataflow reaches
    is let-bound once, in dependency order, and referred to by name; so an expression used
    twice is computed once, and the printing is iterative (a chain of 10^5 operators prints
    without deep recursion). Nodes reached only inside an if branch or a function body are bound
    there. Tensor constants become meta[relay.Constant][i] (collected in self.consts), scalars are
    inline, variables print by name (made unique per object)."""

    def __init__(self):
        self.consts, self.names, self.used, self.bound, self.n = [], {}, set(), {}, 0

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

    @staticmethod
    def _children(e):
        """The sub-expressions of e in its own block (not inside if branches or fn bodies; a
        Let's body is visited after its binding, see block)."""
        if isinstance(e, Call):
            return ([e.fn] if isinstance(e.fn, Expr) else []) + list(e.args)
        if isinstance(e, Tuple):
            return list(e.fields)
        if isinstance(e, TupleGetItem):
            return [e.tuple]
        if isinstance(e, If):
            return [e.cond]
        if isinstance(e, Match):
            return [e.data]
        return []

    def block(self, e):
        """The text of block e: its lets, then its result (iterative: no recursion over the
        length of a dataflow chain or of a let chain)."""
        saved = dict(self.bound)
        lines, seen = [], set()
        tasks = [("visit", e)]
        while tasks:
            kind, n = tasks.pop()
            if kind == "visit":
                if id(n) in seen or id(n) in self.bound:
                    continue
                seen.add(id(n))
                if isinstance(n, Let):  # value, the binding, body, then the Let's value
                    tasks += [("letdone", n), ("visit", n.body), ("letline", n)]
                    if not isinstance(n.value, Function):  # a function: inline (recursion)
                        tasks.append(("visit", n.value))
                    continue
                tasks.append(("post", n))
                tasks += [("visit", c) for c in reversed(self._children(n))]
            elif kind == "letline":
                ann = ": %s" % n.var.type if n.var.type else ""
                value = self.node(n.value) if isinstance(n.value, Function) else self.ref(n.value)
                lines.append("let %s%s = %s;" % (self.name(n.var), ann, value))
            elif kind == "letdone":
                self.bound[id(n)] = self.ref(n.body)
            elif isinstance(n, (Call, Tuple, TupleGetItem, If, Function, Match)) and n is not e:
                self.n += 1
                name = "%%_%d" % self.n
                lines.append("let %s = %s;" % (name, self.node(n)))
                self.bound[id(n)] = name
        result = self.ref(e)
        self.bound = saved
        return "\n".join(lines + [result])

    def ref(self, e):
        """A reference to e: its bound name, or e itself when it is a leaf."""
        if id(e) in self.bound:
            return self.bound[id(e)]
        return self.node(e)

    def node(self, e):
        """e's own text, its sub-expressions by reference."""
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
            fn = e.fn if isinstance(e.fn, str) else self.ref(e.fn)
            parts = [self.ref(a) for a in e.args]
            parts += ["%s=%s" % (k, _attr(v)) for k, v in e.attrs.items() if v is not None]
            return "%s(%s)" % (fn, ", ".join(parts))
        if isinstance(e, Tuple):
            items = [self.ref(f) for f in e.fields]
            return "(%s%s)" % (", ".join(items), "," if len(items) == 1 else "")
        if isinstance(e, TupleGetItem):
            return "%s.%d" % (self.ref(e.tuple), e.index)
        if isinstance(e, Function):
            ps = ", ".join(self.name(p) + (": %s" % p.type if p.type else "") for p in e.params)
            ret = " -> %s" % e.ret_type if e.ret_type else ""
            return "fn (%s)%s {\n%s\n}" % (ps, ret, self.block(e.body))
        if isinstance(e, If):
            return "if (%s) {\n%s\n} else {\n%s\n}" % (self.ref(e.cond), self.block(e.then_),
                                                         self.block(e.else_))
        if isinstance(e, Constructor):
            return e.name
        if isinstance(e, Match):
            clauses = ",\n".join("%s => {\n%s\n}" % (self.pattern(p), self.block(b))
                                  for p, b in e.clauses)
            return "match%s (%s) {\n%s\n}" % ("" if e.complete else "?", self.ref(e.data),
                                              clauses)
        raise RlyError("not a Relay expression: %r" % (e,))

    def pattern(self, p):
        if isinstance(p, PatternWildcard):
            return "_"
        if isinstance(p, PatternVar):
            return self.name(p.var)
        if isinstance(p, PatternTuple):
            return "(%s)" % ", ".join(self.pattern(q) for q in p.patterns)
        if isinstance(p, PatternConstructor):
            if not p.patterns:
                return p.ctor.name
            return "%s(%s)" % (p.ctor.name, ", ".join(self.pattern(q) for q in p.patterns))
        raise RlyError("not a pattern: %r" % (p,))

    expr = block


def _module_text(funcs, printer):
    out = ['#[version = "0.0.5"]']
    for name, fn in funcs.items():
        ps = ", ".join("%s: %s" % (printer.name(p), p.type) for p in fn.params)
        ret = " -> %s" % fn.ret_type if fn.ret_type else ""
        out.append("def @%s(%s)%s {\n%s\n}" % (name, ps, ret, printer.block(fn.body)))
    return "\n".join(out) + "\n"


def module_from_functions(funcs, prelude=False):
    """An rly.IRModule (type-checked) of global functions {name: Function}; with prelude, in
    a module that holds Relay's standard library (List, Option, Tree, nat, @map, @foldl, ...)."""
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
        if prelude:
            check(lib.rly_module_prelude(ctx._p, ctypes.byref(mod)))
            check(lib.rly_module_parse_file_into(mod, path.encode()))
        else:
            check(lib.rly_module_parse_file(ctx._p, path.encode(), ctypes.byref(mod)))
        m = IRModule(ctx, mod, "<rly builder>")
    return m.infer()


# ---- operator calls, type-checked as they are made -------------------------------------------

def op_call(name, args, attrs):
    """Call operator `name` on args (Exprs or numbers) with attrs, its result type inferred from
    the arguments' types; a type error is raised at the Python caller's file and line."""
    args = [a if isinstance(a, Expr) else const(a, _scalar_dtype(args[0]) if args and
                                                 isinstance(args[0], Expr) else None)
            for a in args]
    c = Call(name, args, attrs)
    if any(a.type is None for a in args):
        return c  # an argument of unknown type: checked with the whole module
    key = (name, tuple(a.type for a in args), _attr_key(attrs))
    if key in _TYPE_CACHE:
        c.type = _TYPE_CACHE[key]
        return c
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
        file, line = _caller()
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
    if len(_TYPE_CACHE) > 4096:
        _TYPE_CACHE.clear()
    _TYPE_CACHE[key] = c.type
    return c


_TYPE_CACHE = {}  # (op, argument types, attributes) -> result type


def _attr_key(attrs):
    try:
        return tuple(sorted((k, _attr(v)) for k, v in attrs.items() if v is not None))
    except RlyError:
        return None
