"""transform.py - Relay's passes (docs/passes.md) as TVM's tvm.relay.transform has them:
rly.transform.FoldConstant(), rly.transform.FuseOps(fuse_opt_level=2), ..., one per registered
pass (rly opt --list), and rly.transform.Sequential([...], opt_level=3). A pass object is
applied to a module with pass(mod), which changes mod in place and returns it."""
import ctypes

from ._capi import OptOptions, check, lib, take_string


def _registered():
    out = ctypes.c_void_p()
    check(lib.rly_passes_describe(ctypes.byref(out)))
    passes = {}
    name = None
    for line in take_string(out.value).splitlines():
        if line.startswith("default pipeline:"):
            continue
        if line.startswith(" ") and name and "parameters:" in line:
            for p in line.split("parameters:", 1)[1].strip().split(","):
                pname, rest = p.split(":", 1)
                passes[name]["params"][pname] = rest
        elif line and not line.startswith(" "):
            parts = line.split(None, 3)
            name = parts[0]
            passes[name] = {"level": int(parts[1][2:]), "doc": parts[-1], "params": {}}
    return passes


_PASSES = _registered()


def _value(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, str):
        return v
    return repr(v)


class Pass:
    """One registered pass with its parameters."""

    def __init__(self, name, **params):
        info = _PASSES[name]
        for k in params:
            if k not in info["params"]:
                raise TypeError("%s() has no parameter %r (it has: %s)"
                                % (name, k, ", ".join(info["params"]) or "none"))
        self.name, self.params, self.opt_level = name, params, info["level"]
        self.__doc__ = info["doc"]

    def spec(self):
        if not self.params:
            return self.name
        return "%s(%s)" % (self.name, ",".join("%s=%s" % (k, _value(v))
                                               for k, v in self.params.items()))

    def __call__(self, mod):
        return _run(mod, self.spec(), self.opt_level)

    def __repr__(self):
        return "rly.transform.%s" % self.spec()


class Sequential:
    """Passes run in order (the given ones, whatever their level: TVM runs a listed pass only
    when its level is at most opt_level; here the list is run as written)."""

    def __init__(self, passes, opt_level=2):
        self.passes, self.opt_level = list(passes), opt_level

    def __call__(self, mod):
        if not self.passes:
            return mod
        return _run(mod, ",".join(p.spec() for p in self.passes), self.opt_level)


def _run(mod, passes, level):
    opts = OptOptions(opt_level=max(0, min(3, level)), passes=passes.encode())
    check(lib.rly_module_optimize(mod._p, ctypes.byref(opts), None))
    return mod


def optimize(mod, opt_level=3):
    """The default pipeline of opt_level (0-3) over mod, in place (rly opt -O N)."""
    opts = OptOptions(opt_level=opt_level)
    check(lib.rly_module_optimize(mod._p, ctypes.byref(opts), None))
    return mod


def _factory(name):
    def make(**params):
        return Pass(name, **params)
    make.__name__ = name
    make.__doc__ = _PASSES[name]["doc"] + (
        "\nParameters: " + ", ".join("%s: %s" % kv for kv in _PASSES[name]["params"].items())
        if _PASSES[name]["params"] else "")
    return make


for _n in _PASSES:
    globals()[_n] = _factory(_n)

__all__ = ["Pass", "Sequential", "optimize"] + sorted(_PASSES)
