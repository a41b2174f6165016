"""op.py - one Python function per operator of rly's table (generated from it when the package
loads; `rly ops` prints the same table): rly.op.add(x, y), rly.op.nn.conv2d(data, weight,
strides=(1, 1), ...). Each takes the operator's arguments positionally and its attributes by
keyword (defaults as the table gives them; None leaves an attribute to its default), checks the
call's types at once (expr.op_call) and has the table's description as its docstring."""
import ctypes
import re
import sys
import types

from ._capi import check, lib, take_string
from .expr import op_call

_HEAD = re.compile(r"^(\S+)\((.*?)\)\s+\[([^\]]*)\]\s*(.*)$")
_ATTR = re.compile(r"^    (\w+): (\S+) = (.*?)(?:  \{(.*)\})?$")


def _table():
    out = ctypes.c_void_p()
    check(lib.rly_ops_describe(None, ctypes.byref(out)))
    ops, cur = [], None
    for line in take_string(out.value).splitlines():
        m = _HEAD.match(line)
        if m:
            args = [a.strip() for a in m.group(2).split(",") if a.strip()]
            cur = {"name": m.group(1), "args": args, "pattern": m.group(3), "doc": m.group(4),
                   "attrs": []}
            ops.append(cur)
            continue
        m = _ATTR.match(line)
        if m and cur is not None:
            choices = m.group(4).split("|") if m.group(4) is not None else None
            cur["attrs"].append((m.group(1), m.group(2), m.group(3), choices))
    return ops


def _make(info):
    name, args, attrs = info["name"], info["args"], info["attrs"]
    names = [a[0] for a in attrs]

    def fn(*call_args, **kw):
        if len(call_args) != len(args):
            raise TypeError("%s takes %d arguments (%s), %d given"
                            % (name, len(args), ", ".join(args), len(call_args)))
        for k, v in kw.items():
            if k not in names:
                raise TypeError("%s has no attribute %r (it has: %s)"
                                % (name, k, ", ".join(names) or "none"))
            choices = attrs[names.index(k)][3]
            if choices is not None and v is not None and v not in choices:
                raise ValueError("%s: attribute %s is %r, not one of %s"
                                 % (name, k, v, ", ".join(repr(c) for c in choices)))
        return op_call(name, list(call_args), {k: v for k, v in kw.items() if v is not None})

    fn.__name__ = name.split(".")[-1]
    fn.__qualname__ = name
    lines = ["%s(%s) [%s]: %s" % (name, ", ".join(args), info["pattern"], info["doc"])]
    if attrs:
        lines.append("")
        lines.append("Attributes:")
        for a_name, a_type, a_default, choices in attrs:
            line = "    %s: %s = %s" % (a_name, a_type, a_default)
            if choices is not None:
                line += " (one of: %s)" % ", ".join('"%s"' % c for c in choices)
            lines.append(line)
    fn.__doc__ = "\n".join(lines)
    return fn


_OPS = _table()
_module = sys.modules[__name__]
_spaces = {}
for _info in _OPS:
    *_path, _leaf = _info["name"].split(".")
    target = _module
    for k in range(len(_path)):
        key = ".".join(_path[:k + 1])
        if key not in _spaces:
            _spaces[key] = types.ModuleType(__name__ + "." + key)
            setattr(target, _path[k], _spaces[key])
        target = _spaces[key]
    setattr(target, _leaf, _make(_info))

# the `@` of expr.Expr
nn_matmul = getattr(getattr(_module, "nn"), "matmul")
names = sorted(i["name"] for i in _OPS)
