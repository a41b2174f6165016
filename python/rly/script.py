"""script.py - @rly.script: a Python function translated to Relay (the 2018 paper's decorator).

    @rly.script
    def f(x: rly.Tensor[(3, 4), "float32"], n: rly.Tensor[(), "int32"]):
        i = 0
        while i < n:
            x = rly.op.tanh(x) * 2.0
            i = i + 1
        return x

The function's source is parsed with `ast` and translated through the IR builder (expr.py):
parameters typed by annotations (rly.Tensor[shape, dtype], or a Relay type as a string),
assignments as lets, if/else (as an expression when both branches return, else joining the
variables the branches assign), `while` and `for i in range(...)` as local recursive functions
over the variables the loop changes, return, tuples (and indexing them), numbers, arithmetic and
comparisons (+ - * / @ unary -, < <= > >= == !=, and/or/not on booleans) mapped to operators,
calls of rly.op.* (attributes by keyword) and of other script functions (globals, recursion:
annotate the return type), nested def and lambda (closures). Anything else is an
rly.ScriptError at the Python file, line and column. The decorated object is callable with
numpy arrays (compiled on first call, once per argument types) and has .module and .text."""
import ast
import inspect
import re
import textwrap

import numpy as np

from . import expr as E
from ._capi import RlyError


class ScriptError(RlyError):
    """A construct @rly.script does not translate, or a type error in the translation; the
    message starts with file:line:col."""


class TensorAnnotation:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype

    def relay(self):
        return E.tensor_type(self.shape, self.dtype)


def tensor_annotation(item):
    """rly.Tensor[(3, 4), "float32"] (shape, dtype; dtype defaults to float32)."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str):
        shape, dtype = item
    else:
        shape, dtype = item, "float32"
    if isinstance(shape, int):
        shape = (shape,)
    return TensorAnnotation(shape, dtype)


_BINOPS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide",
           ast.MatMult: "nn_matmul", ast.FloorDiv: "floor_divide", ast.Mod: "floor_mod",
           ast.Pow: "power"}
_CMPOPS = {ast.Lt: "less", ast.LtE: "less_equal", ast.Gt: "greater", ast.GtE: "greater_equal",
           ast.Eq: "equal", ast.NotEq: "not_equal"}


class _Return(Exception):
    pass


class _Translator:
    def __init__(self, fn, registry):
        self.fn, self.registry = fn, registry
        self.file = inspect.getsourcefile(fn) or "<script>"
        lines, self.first = inspect.getsourcelines(fn)
        self.tree = ast.parse(textwrap.dedent("".join(lines)))
        self.globals = fn.__globals__
        self.closure = dict(zip(fn.__code__.co_freevars,
                                [c.cell_contents for c in (fn.__closure__ or ())]))
        self.counter = 0

    def err(self, node, msg):
        line = self.first + getattr(node, "lineno", 1) - 1
        col = getattr(node, "col_offset", 0) + 1
        return ScriptError("%s:%d:%d: %s" % (self.file, line, col, msg))

    def fresh(self, base):
        self.counter += 1
        return "%s_%d" % (base, self.counter)

    # ---- the function ----------------------------------------------------------------------

    def function(self, node, env, name=None):
        params = []
        inner = dict(env)
        for a in node.args.args:
            t = self.annotation(a.annotation, a) if a.annotation is not None else None
            v = E.Var(a.arg, t)
            params.append(v)
            inner[a.arg] = v
        if node.args.vararg or node.args.kwarg or node.args.kwonlyargs or node.args.defaults:
            raise self.err(node, "only plain positional parameters are supported")
        ret = self.annotation(node.returns, node) if getattr(node, "returns", None) else None
        if isinstance(node, ast.Lambda):
            body = self.expr(node.body, inner)
        else:
            body = self.block(node.body, inner, node)
        return E.Function(params, body, ret_type=ret or body.type)

    def annotation(self, node, where):
        try:
            value = eval(compile(ast.Expression(node), self.file, "eval"), self.globals,
                         self.closure)
        except Exception as ex:  # noqa: BLE001 - any failure is the user's annotation
            raise self.err(where, "cannot evaluate the annotation: %s" % ex)
        if isinstance(value, TensorAnnotation):
            return value.relay()
        if isinstance(value, str):
            return value
        raise self.err(where, "an annotation must be rly.Tensor[shape, dtype] or a Relay type "
                              "as a string, not %r" % (value,))

    # ---- statements: a block is an expression built from the back ------------------------

    def block(self, stmts, env, where):
        """The value of a statement list ending in `return`."""
        if not stmts:
            raise self.err(where, "the block does not end with a return")
        s, rest = stmts[0], stmts[1:]
        if isinstance(s, ast.Return):
            if s.value is None:
                raise self.err(s, "return needs a value")
            return self.expr(s.value, env)
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and \
                isinstance(s.value.value, str):
            return self.block(rest, env, where)  # a docstring
        if isinstance(s, ast.Pass):
            return self.block(rest, env, where)
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            return self.assign(s, rest, env, where)
        if isinstance(s, ast.FunctionDef):
            env2 = dict(env)
            v = E.Var(s.name, None)
            env2[s.name] = v  # recursion of a nested function through its own name
            f = self.function(s, env2)
            v.type = f.type
            return E.Let(v, f, self.block(rest, env2, where))
        if isinstance(s, ast.If):
            return self.if_stmt(s, rest, env, where)
        if isinstance(s, ast.While):
            return self.loop(s, s.test, s.body, None, rest, env, where)
        if isinstance(s, _LoopWithStep):
            return self.loop(s.loop, s.loop.test, s.loop.body, s.step, rest, env, where)
        if isinstance(s, ast.For):
            return self.for_range(s, rest, env, where)
        if isinstance(s, ast.Match):
            return self.match(s, rest, env, where)
        raise self.err(s, "@rly.script does not translate %s statements" % type(s).__name__)

    def match(self, s, rest, env, where):
        """match v: case C(a, b): ... -> Relay's match; every case returns."""
        data = self.expr(s.subject, env)
        clauses = []
        for case in s.cases:
            if case.guard is not None:
                raise self.err(case.guard, "match guards (`if`) are not supported")
            if not self.returns(case.body):
                raise self.err(case.pattern, "every case of a match must return")
            inner = dict(env)
            pat = self.pattern(case.pattern, inner, data.type)
            clauses.append((pat, self.block(case.body, inner, case)))
        return E.Match(data, clauses)  # Relay checks that the cases are exhaustive

    def pattern(self, p, env, type_):
        """A Relay pattern from a Python one: C(p, ...), a name, _, or a tuple of them."""
        if isinstance(p, ast.MatchAs):
            if p.pattern is not None:
                raise self.err(p, "`as` patterns are not supported")
            if p.name is None:
                return E.PatternWildcard()
            v = E.Var(p.name, type_)
            env[p.name] = v
            return E.PatternVar(v)
        if isinstance(p, ast.MatchSequence):
            return E.PatternTuple([self.pattern(q, env, _tuple_field(type_, i))
                                   for i, q in enumerate(p.patterns)])
        if isinstance(p, ast.MatchClass):
            if p.kwd_patterns:
                raise self.err(p, "keyword patterns are not supported")
            ctor = self.constructor(p.cls)
            fields = _ctor_fields(ctor.name, type_, len(p.patterns))
            return E.PatternConstructor(ctor, [self.pattern(q, env, fields[i])
                                               for i, q in enumerate(p.patterns)])
        raise self.err(p, "this pattern is not supported (constructors, names, _, tuples)")

    def constructor(self, node):
        try:
            value = eval(compile(ast.Expression(node), self.file, "eval"), self.globals,
                         self.closure)
        except Exception:  # noqa: BLE001 - reported as the user's pattern
            value = None
        if not isinstance(value, E.Constructor):
            raise self.err(node, "a pattern's class must be a constructor (rly.adt.Cons, ...)")
        return value

    def bind(self, name, value, env):
        v = E.Var(name, value.type)
        env[name] = v
        return v

    def assign(self, s, rest, env, where):
        if isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name):
                raise self.err(s, "only names can be assigned")
            value = self.binop(s.op, self.expr(s.target, env), self.expr(s.value, env), s)
            targets = [s.target]
        else:
            value = self.expr(s.value, env)
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        if len(targets) != 1:
            raise self.err(s, "chained assignment is not supported")
        t = targets[0]
        env2 = dict(env)
        if isinstance(t, ast.Name):
            v = self.bind(t.id, value, env2)
            return E.Let(v, value, self.block(rest, env2, where))
        if isinstance(t, ast.Tuple) and all(isinstance(x, ast.Name) for x in t.elts):
            tmp = E.Var(self.fresh("tup"), value.type)
            lets = []
            for i, x in enumerate(t.elts):
                item = E.TupleGetItem(tmp, i)
                lets.append((self.bind(x.id, item, env2), item))
            body = self.block(rest, env2, where)
            for v, item in reversed(lets):
                body = E.Let(v, item, body)
            return E.Let(tmp, value, body)
        raise self.err(t, "only names and tuples of names can be assigned")

    @staticmethod
    def assigned(stmts):
        out = []
        for s in stmts:
            for n in ast.walk(s):
                if isinstance(n, (ast.FunctionDef, ast.Lambda)):
                    continue
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in out:
                    out.append(n.id)
        return out

    @staticmethod
    def returns(stmts):
        return bool(stmts) and isinstance(stmts[-1], ast.Return) or (
            bool(stmts) and isinstance(stmts[-1], ast.If) and _Translator.returns(stmts[-1].body)
            and _Translator.returns(stmts[-1].orelse))

    def if_stmt(self, s, rest, env, where):
        cond = self.expr(s.test, env)
        if self.returns(s.body) and self.returns(s.orelse):
            return E.If(cond, self.block(s.body, dict(env), s), self.block(s.orelse, dict(env), s))
        if self.returns(s.body) or self.returns(s.orelse):  # the other branch goes on
            then_ = s.body if self.returns(s.body) else s.body + rest
            else_ = s.orelse if self.returns(s.orelse) else s.orelse + rest
            return E.If(cond, self.block(then_, dict(env), s), self.block(else_, dict(env), s))
        names = [n for n in self.assigned(s.body + s.orelse) if n in env]
        for n in self.assigned(s.body + s.orelse):
            if n not in env and any(isinstance(x, ast.Name) and x.id == n
                                    for r in rest for x in ast.walk(r)):
                raise self.err(s, "%r is assigned in an if but not before it" % n)
        ret = ast.Return(value=ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Load()) for n in names],
                                         ctx=ast.Load()))
        ast.copy_location(ret, s)
        ast.fix_missing_locations(ret)
        then_ = self.block(s.body + [ret], dict(env), s)
        else_ = self.block(s.orelse + [ret], dict(env), s)
        joined = E.If(cond, then_, else_)
        return self.rebind(joined, names, rest, env, where)

    def rebind(self, tuple_expr, names, rest, env, where):
        tmp = E.Var(self.fresh("join"), tuple_expr.type)
        env2 = dict(env)
        lets = []
        for i, n in enumerate(names):
            item = E.TupleGetItem(tmp, i)
            lets.append((self.bind(n, item, env2), item))
        body = self.block(rest, env2, where)
        for v, item in reversed(lets):
            body = E.Let(v, item, body)
        return E.Let(tmp, tuple_expr, body)

    def loop(self, s, test, body, step, rest, env, where):
        """while test: body (then step): a local recursive function over the loop's
        variables."""
        if s.orelse:
            raise self.err(s, "else on a loop is not supported")
        names = [n for n in self.assigned(body + ([step] if step else [])) if n in env]
        params = [E.Var(n, env[n].type) for n in names]
        inner = dict(env)
        inner.update(zip(names, params))
        state_type = "(%s%s)" % (", ".join(p.type for p in params), "," if len(params) == 1 else "")
        loop_var = E.Var(self.fresh("loop"), "fn (%s) -> %s" % (", ".join(p.type for p in params),
                                                              state_type))
        inner[loop_var.name] = loop_var
        again = ast.Return(value=ast.Call(func=ast.Name(id=loop_var.name, ctx=ast.Load()),
                                          args=[ast.Name(id=n, ctx=ast.Load()) for n in names],
                                          keywords=[]))
        done = ast.Return(value=ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Load()) for n in names],
                                          ctx=ast.Load()))
        for r in (again, done):
            ast.copy_location(r, s)
            ast.fix_missing_locations(r)
        if self.returns(body):
            raise self.err(s, "return inside a loop is not supported")
        cond = self.expr(test, inner)
        stmts = body + ([step] if step else []) + [again]
        fn_body = E.If(cond, self.block(stmts, dict(inner), s), self.block([done], inner, s))
        fn = E.Function(params, fn_body, ret_type=state_type)
        call = E.Call(loop_var, [env[n] for n in names], type_=state_type)
        return E.Let(loop_var, fn, self.rebind(call, names, rest, env, where))

    def for_range(self, s, rest, env, where):
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and
                it.func.id == "range"):
            return self.for_list(s, rest, env, where)
        if not (1 <= len(it.args) <= 2 and not it.keywords):
            raise self.err(s, "for loops go over range(stop), range(start, stop) or a List")
        if not isinstance(s.target, ast.Name):
            raise self.err(s, "the loop variable must be a name")
        start = it.args[0] if len(it.args) == 2 else ast.Constant(value=0)
        stop = it.args[-1]
        i = s.target.id
        init = ast.Assign(targets=[ast.Name(id=i, ctx=ast.Store())], value=start)
        stop_name = self.fresh("stop")
        init_stop = ast.Assign(targets=[ast.Name(id=stop_name, ctx=ast.Store())], value=stop)
        test = ast.Compare(left=ast.Name(id=i, ctx=ast.Load()), ops=[ast.Lt()],
                           comparators=[ast.Name(id=stop_name, ctx=ast.Load())])
        step = ast.AugAssign(target=ast.Name(id=i, ctx=ast.Store()), op=ast.Add(),
                             value=ast.Constant(value=1))
        loop = ast.While(test=test, body=s.body, orelse=[])
        for n in (init, init_stop, test, step, loop):
            ast.copy_location(n, s)
            ast.fix_missing_locations(n)
        return self.block([init_stop, init, _LoopWithStep(loop, step)] + rest, env, where)

    def for_list(self, s, rest, env, where):
        """for x in xs (a List): a local recursive function matching Cons / Nil."""
        if s.orelse:
            raise self.err(s, "else on a loop is not supported")
        if not isinstance(s.target, ast.Name):
            raise self.err(s, "the loop variable must be a name")
        lst = self.expr(s.iter, env)
        m = re_list(lst.type)
        if m is None:
            raise self.err(s.iter, "for loops go over range(stop), range(start, stop) or a "
                                   "List (this is %s)" % (lst.type or "of unknown type"))
        if self.returns(s.body):
            raise self.err(s, "return inside a loop is not supported")
        names = [n for n in self.assigned(s.body) if n in env and n != s.target.id]
        state = [E.Var(n, env[n].type) for n in names]
        xs = E.Var(self.fresh("xs"), lst.type)
        state_type = "(%s%s)" % (", ".join(p.type for p in state), "," if len(state) == 1 else "")
        loop_var = E.Var(self.fresh("loop"), "fn (%s) -> %s" % (
            ", ".join([lst.type] + [p.type for p in state]), state_type))
        inner = dict(env)
        inner.update(zip(names, state))
        inner[loop_var.name] = loop_var
        x = E.Var(s.target.id, m)
        tail = E.Var(self.fresh("rest"), lst.type)
        body_env = dict(inner)
        body_env[s.target.id] = x
        body_env[tail.name] = tail
        again = ast.Return(value=ast.Call(
            func=ast.Name(id=loop_var.name, ctx=ast.Load()),
            args=[ast.Name(id=tail.name, ctx=ast.Load())] +
            [ast.Name(id=n, ctx=ast.Load()) for n in names], keywords=[]))
        done = ast.Return(value=ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Load()) for n in names],
                                          ctx=ast.Load()))
        for r in (again, done):
            ast.copy_location(r, s)
            ast.fix_missing_locations(r)
        fn_body = E.Match(xs, [
            (E.PatternConstructor(E.Cons, [E.PatternVar(x), E.PatternVar(tail)]),
             self.block(s.body + [again], body_env, s)),
            (E.PatternConstructor(E.Nil), self.block([done], inner, s))])
        fn = E.Function([xs] + state, fn_body, ret_type=state_type)
        call = E.Call(loop_var, [lst] + [env[n] for n in names], type_=state_type)
        return E.Let(loop_var, fn, self.rebind(call, names, rest, env, where))

    # ---- expressions ------------------------------------------------------------------------

    def binop(self, op, a, b, node):
        name = _BINOPS.get(type(op))
        if name is None:
            raise self.err(node, "operator %s is not supported" % type(op).__name__)
        a, b = self.coerce(a, b, node)
        from . import op as ops
        try:
            return getattr(ops, name)(a, b)
        except RlyError as ex:
            raise self.err(node, str(ex).split(": ", 1)[-1])

    def coerce(self, a, b, node):
        """Numbers take the other operand's dtype."""
        if not isinstance(a, E.Expr) and not isinstance(b, E.Expr):
            raise self.err(node, "an operation on two Python numbers (compute it in Python)")
        if not isinstance(a, E.Expr):
            a = E.const(a, E._scalar_dtype(b))
        if not isinstance(b, E.Expr):
            b = E.const(b, E._scalar_dtype(a))
        return a, b

    def expr(self, n, env):
        e = self._expr(n, env)
        if isinstance(e, (int, float, bool)) and not isinstance(e, E.Expr):
            return E.const(e)
        return e

    def _expr(self, n, env):
        if isinstance(n, ast.Constant):
            if isinstance(n.value, bool):
                return E.const(n.value)
            if isinstance(n.value, (int, float)):
                return n.value  # typed by its use
            raise self.err(n, "constant %r is not supported" % (n.value,))
        if isinstance(n, ast.Name):
            if n.id in env:
                return env[n.id]
            if n.id in self.registry:
                return self.registry[n.id].global_var()
            value = self.closure.get(n.id, self.globals.get(n.id))
            if isinstance(value, (int, float, bool)):
                return value
            if isinstance(value, np.ndarray):
                return E.const(value)
            if isinstance(value, ScriptFunction):
                self.registry[n.id] = value
                return value.global_var()
            if isinstance(value, E.Constructor):
                return value
            raise self.err(n, "name %r is not a variable of the script" % n.id)
        if isinstance(n, ast.BinOp):
            return self.binop(n.op, self._expr(n.left, env), self._expr(n.right, env), n)
        if isinstance(n, ast.UnaryOp):
            v = self._expr(n.operand, env)
            from . import op as ops
            if isinstance(n.op, ast.USub):
                return -v if not isinstance(v, E.Expr) else ops.negative(v)
            if isinstance(n.op, ast.UAdd):
                return v
            if isinstance(n.op, ast.Not):
                return ops.logical_not(self.expr(n.operand, env))
            raise self.err(n, "unary %s is not supported" % type(n.op).__name__)
        if isinstance(n, ast.BoolOp):
            from . import op as ops
            f = ops.logical_and if isinstance(n.op, ast.And) else ops.logical_or
            out = self.expr(n.values[0], env)
            for v in n.values[1:]:
                out = f(out, self.expr(v, env))
            return out
        if isinstance(n, ast.Compare):
            if len(n.ops) != 1:
                raise self.err(n, "chained comparisons are not supported")
            name = _CMPOPS.get(type(n.ops[0]))
            if name is None:
                raise self.err(n, "comparison %s is not supported" % type(n.ops[0]).__name__)
            a, b = self.coerce(self._expr(n.left, env), self._expr(n.comparators[0], env), n)
            from . import op as ops
            return getattr(ops, name)(a, b)
        if isinstance(n, ast.Tuple):
            return E.Tuple([self.expr(x, env) for x in n.elts])
        if isinstance(n, ast.List):  # the prelude's List
            items = [self.expr(x, env) for x in n.elts]
            out = E.Call(E.Nil, [])
            if items and items[0].type:
                out.type = "List[%s]" % items[0].type
            for item in reversed(items):
                out = E.Cons(item, out)
            return out
        if isinstance(n, ast.Subscript):
            idx = n.slice
            if isinstance(idx, ast.Constant) and isinstance(idx.value, int):
                return E.TupleGetItem(self.expr(n.value, env), idx.value)
            raise self.err(n, "only tuples indexed by a constant are supported")
        if isinstance(n, ast.Lambda):
            return self.function(n, env)
        if isinstance(n, ast.IfExp):
            return E.If(self.expr(n.test, env), self.expr(n.body, env), self.expr(n.orelse, env))
        if isinstance(n, ast.Call):
            return self.call(n, env)
        raise self.err(n, "@rly.script does not translate %s expressions" % type(n).__name__)

    def call(self, n, env):
        if n.keywords and not self.op_target(n.func):
            raise self.err(n, "keyword arguments are for rly.op.* calls only")
        target = self.op_target(n.func)
        if target is not None:
            args = [self._expr(a, env) for a in n.args]
            first = next((a for a in args if isinstance(a, E.Expr)), None)
            args = [a if isinstance(a, E.Expr) else
                    E.const(a, E._scalar_dtype(first) if first is not None else None)
                    for a in args]
            kw = {}
            for k in n.keywords:  # constants: literals, or Python over the globals
                try:
                    v = eval(compile(ast.Expression(k.value), self.file, "eval"),
                             self.globals, self.closure)
                except Exception:  # noqa: BLE001 - a local (a Relay value), or a failure
                    raise self.err(k.value, "attribute %s must be a constant of Python (a "
                                            "literal, or computed from globals)" % k.arg)
                if isinstance(v, tuple):
                    v = list(v)
                if not isinstance(v, (int, float, str, bool, list)) and v is not None:
                    raise self.err(k.value, "attribute %s is a %s, not a number, string or "
                                            "list" % (k.arg, type(v).__name__))
                kw[k.arg] = v
            try:
                return target(*args, **kw)
            except (RlyError, TypeError) as ex:
                raise self.err(n, str(ex).split(": ", 1)[-1] if isinstance(ex, RlyError)
                               else str(ex))
        fn = self.expr(n.func, env)
        return E.Call(fn, [self.expr(a, env) for a in n.args])

    def op_target(self, f):
        """The rly.op function a call's target names (rly.op.x, op.nn.y, ...), or None."""
        parts = []
        while isinstance(f, ast.Attribute):
            parts.append(f.attr)
            f = f.value
        if not isinstance(f, ast.Name):
            return None
        parts.append(f.id)
        parts.reverse()
        if f.id in self.closure or f.id in self.globals:
            obj = self.closure.get(f.id, self.globals.get(f.id))
        else:
            return None
        for p in parts[1:]:
            obj = getattr(obj, p, None)
        from . import op as ops
        if callable(obj) and getattr(obj, "__module__", "") == ops.__name__ and \
                not isinstance(obj, ScriptFunction):
            return obj
        return None


def _tuple_field(t, i):
    return E._tuple_field(t, i)


def _ctor_fields(name, t, n):
    """The field types of constructor `name` of the prelude in a value of type t (None where
    unknown)."""
    inner = t[t.index("[") + 1:-1] if t and "[" in t and t.endswith("]") else None
    known = {"Cons": [inner, t], "Some": [inner], "Rose": [inner, "List[%s]" % t if t else None],
             "succ": ["nat"]}
    fields = known.get(name, [])
    return [fields[i] if i < len(fields) else None for i in range(n)]


def re_list(t):
    """X of a type "List[X]", or None."""
    if t and t.startswith("List[") and t.endswith("]"):
        return t[5:-1]
    return None


class _LoopWithStep(ast.stmt):
    """A while loop whose step runs at the end of each iteration (for ... in range)."""
    _fields = ()

    def __init__(self, loop, step):
        super().__init__()
        self.loop, self.step = loop, step
        ast.copy_location(self, loop)




class ScriptFunction:
    """A function translated to Relay. Call it with arrays (compiled on first call, once per
    argument types); .module is the Relay module, .text its text."""

    def __init__(self, fn):
        self.fn, self.name = fn, fn.__name__
        self.__doc__, self.__name__ = fn.__doc__, fn.__name__
        self._module, self._func, self._compiled = None, None, {}
        self._building = self._recursive = False

    def global_var(self):
        if self._building:
            self._recursive = True
        if self._func is None and not self._building:
            self._translate({})
        ret = self._func.ret_type if self._func is not None else self._ret_annotation()
        return E.GlobalVar(self.name, ret_type=ret)

    def _ret_annotation(self):
        t = _Translator(self.fn, {})
        node = t.tree.body[0]
        if node.returns is None:
            raise t.err(node, "a recursive script function needs its return type annotated")
        return t.annotation(node.returns, node)

    def _translate(self, registry):
        self._building = True
        try:
            registry[self.name] = self
            t = _Translator(self.fn, registry)
            node = t.tree.body[0]
            if not isinstance(node, ast.FunctionDef):
                raise t.err(node, "@rly.script applies to a def")
            for a in node.args.args:
                if a.annotation is None:
                    raise t.err(a, "parameter %r needs a type annotation" % a.arg)
            self._func = t.function(node, {})
        finally:
            self._building = False
        return registry

    @property
    def module(self):
        if self._module is None:
            registry = {}
            self._translate(registry)
            funcs = {"main": self._func}
            for name, sf in list(registry.items()):
                if sf is not self:
                    if sf._func is None:
                        sf._translate(registry)
                    funcs[name] = sf._func
            if self._recursive and self.name != "main":  # @main calls @name, which recurses
                params = [E.Var(p.name, p.type) for p in self._func.params]
                funcs[self.name] = self._func
                funcs["main"] = E.Function(params, E.Call(E.GlobalVar(
                    self.name, ret_type=self._func.ret_type), params), self._func.ret_type)
            self._names = list(funcs)
            self._module = E.module_from_functions(funcs, prelude=True)
        return self._module

    @property
    def text(self):
        """The Relay text of the script's own functions (@main and the script functions it
        calls; the prelude the module also holds is left out)."""
        full = str(self.module)
        keep = set(self._names)
        parts = re.split(r"(?m)^(?=def @|type )", full)
        out = [parts[0].rstrip("\n")]
        for part in parts[1:]:
            m = re.match(r"def @([A-Za-z_][A-Za-z0-9_]*)", part)
            if m and m.group(1) in keep:
                out.append(part.rstrip("\n"))
        return "\n".join(out) + "\n"

    def __call__(self, *args):
        key = tuple((np.asarray(a).shape, np.asarray(a).dtype.str) for a in args)
        exe = self._compiled.get(key)
        if exe is None:
            from .build import build
            exe = self._compiled[key] = build(self.module)
        return exe(*args)


def script(fn):
    """Decorator: translate fn to Relay (see the module's docstring)."""
    return ScriptFunction(fn)
