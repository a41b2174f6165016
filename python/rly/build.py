"""build.py - compiled executables: rly.build(mod, opt_level=3) -> Executable (TVM's
relay.build with the VM executor), exe.save(path), rly.Executable.load(path), and calling one
with arrays: exe(x, y) runs its entry on a session (made on first call) and returns its outputs
(one array, or a tuple of them)."""
import ctypes
import os

from ._capi import check, lib, take_string
from .session import InferenceSession


class Executable:
    """A program compiled for rly's VM (bytecode, constants, memory plans)."""

    def __init__(self, handle, keep=None):
        self._p, self._keep, self._sess = handle, keep, None

    @staticmethod
    def load(path):
        exe = ctypes.c_void_p()
        check(lib.rly_executable_load(os.fspath(path).encode(), ctypes.byref(exe)))
        return Executable(exe)

    def save(self, path):
        """Write an .rlyx file (with the weights in the kernels' layouts), whole or not at all."""
        check(lib.rly_executable_save(self._p, os.fspath(path).encode()))

    def stats(self):
        """What `rly compile --stats` prints: counts, constant bytes, memory plans."""
        out = ctypes.c_void_p()
        check(lib.rly_executable_describe(self._p, 1, ctypes.byref(out)))
        return take_string(out.value)

    def disasm(self):
        out = ctypes.c_void_p()
        check(lib.rly_executable_describe(self._p, 2, ctypes.byref(out)))
        return take_string(out.value)

    def session(self, threads=None):
        """An InferenceSession over this executable."""
        return InferenceSession._from_executable(self, threads)

    def __call__(self, *args, **kwargs):
        if self._sess is None:
            self._sess = self.session()
        names = [a.name for a in self._sess.get_inputs()]
        if len(args) > len(names):
            raise TypeError("the entry takes %d inputs, %d given" % (len(names), len(args)))
        feed = dict(zip(names, args))
        for k, v in kwargs.items():
            if k in feed:
                raise TypeError("input %r given twice" % k)
            feed[k] = v
        outs = self._sess.run(None, feed)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __del__(self):
        if getattr(self, "_p", None):
            self._sess = None
            try:
                lib.rly_executable_free(self._p)
            except Exception:  # interpreter shutdown
                pass
            self._p = None


def build(mod, opt_level=3, entry=None):
    """Optimize a copy of mod with the default pipeline of opt_level and compile it for the VM
    with @entry (default @main) as the executable's entry. mod itself is left as it was."""
    if not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
        raise ValueError("opt_level must be 0, 1, 2 or 3, not %r" % (opt_level,))
    work = mod.copy()
    exe = ctypes.c_void_p()
    check(lib.rly_module_compile(work._p, opt_level, entry.encode() if entry else None,
                                 ctypes.byref(exe)))
    return Executable(exe)
