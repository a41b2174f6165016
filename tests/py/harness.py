"""harness.py - run Relay programs through `rly run` and get numpy arrays back.

The operator tests (test_ops_*.py) build a one-call Relay program per case, run it through the
interpreter with `rly run FILE --inputs in.npz --output out.npz`, and compare the outputs with a
numpy reference. RLY_BIN names the rly executable (CTest sets it; scripts/test.sh too).
"""
import os
import subprocess
import tempfile

import numpy as np

RLY = os.environ.get("RLY_BIN", "rly")

_DT = {
    np.dtype("bool"): "bool", np.dtype("int8"): "int8", np.dtype("int16"): "int16",
    np.dtype("int32"): "int32", np.dtype("int64"): "int64", np.dtype("uint8"): "uint8",
    np.dtype("uint16"): "uint16", np.dtype("uint32"): "uint32", np.dtype("uint64"): "uint64",
    np.dtype("float16"): "float16", np.dtype("float32"): "float32", np.dtype("float64"): "float64",
}


def tensor_type(a):
    """The Relay type text of a numpy array: Tensor[(2, 3), float32]."""
    a = np.asarray(a)
    dims = ", ".join(str(d) for d in a.shape)
    if a.ndim == 1:
        dims += ","
    return "Tensor[(%s), %s]" % (dims, _DT[a.dtype])


class RlyError(Exception):
    """`rly run` failed: .stderr holds its message."""

    def __init__(self, stderr, code):
        super().__init__(stderr)
        self.stderr = stderr
        self.code = code


def run_relay(text, inputs=None, entry=None, extra=()):
    """Run a Relay module's @main (or `entry`) on inputs {name: array}; returns the flattened
    outputs as a list of arrays. Raises RlyError when rly exits nonzero."""
    inputs = inputs or {}
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "prog.rly")
        with open(src, "w") as f:
            f.write(text)
        cmd = [RLY, "run", src, "--output", os.path.join(d, "out.npz")]
        if inputs:
            np.savez(os.path.join(d, "in.npz"), **inputs)
            cmd += ["--inputs", os.path.join(d, "in.npz")]
        if entry:
            cmd += ["--entry", entry]
        cmd += list(extra)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise RlyError(p.stderr, p.returncode)
        with np.load(os.path.join(d, "out.npz")) as z:
            n = len(z.files)
            return [z["output_%d" % i] for i in range(n)]


def op_program(call, args):
    """The text of `def @main(%x0: T0, ...) { CALL }` where CALL has {0}, {1}, ... for the
    arguments. An argument that is a list or tuple of arrays becomes a tuple parameter; returns
    (text, inputs) with the inputs named x0, x1, ... (tuple fields x1_0, x1_1, ...)."""
    params, names, inputs = [], [], {}
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)):
            fields = []
            for j, f in enumerate(a):
                nm = "x%d_%d" % (i, j)
                params.append("%%%s: %s" % (nm, tensor_type(f)))
                inputs[nm] = np.asarray(f)
                fields.append("%" + nm)
            names.append("(" + ", ".join(fields) + ("," if len(fields) == 1 else "") + ")")
        else:
            nm = "x%d" % i
            params.append("%%%s: %s" % (nm, tensor_type(a)))
            inputs[nm] = np.asarray(a)
            names.append("%" + nm)
    body = call.format(*names)
    text = '#[version = "0.0.5"]\ndef @main(%s) {\n  %s\n}\n' % (", ".join(params), body)
    return text, inputs


def run_op(call, *args):
    """Run one operator call: run_op("nn.conv2d({0}, {1}, padding=[1, 1])", x, w). Returns a
    list of outputs (one array, or a tuple's fields)."""
    text, inputs = op_program(call, args)
    return run_relay(text, inputs)


def run_op_error(call, *args):
    """Run a call that must fail at run time; returns rly's stderr."""
    text, inputs = op_program(call, args)
    try:
        run_relay(text, inputs)
    except RlyError as e:
        return e.stderr
    raise AssertionError("expected `rly run` to fail for " + call)


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    """Compare with numpy semantics: same shape and dtype, values within tolerance (exact for
    integers and bools; NaNs must match)."""
    want = np.asarray(want)
    assert got.shape == want.shape, "shape %s, expected %s" % (got.shape, want.shape)
    assert got.dtype == want.dtype, "dtype %s, expected %s" % (got.dtype, want.dtype)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True)


def run_text(text, *extra, inputs=None):
    """Run a Relay file with `rly run FILE EXTRA...` and return its stdout (the printed result).
    Raises RlyError when rly exits nonzero."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "prog.rly")
        with open(src, "w") as f:
            f.write(text)
        cmd = [RLY, "run", src] + list(extra)
        if inputs:
            np.savez(os.path.join(d, "in.npz"), **inputs)
            cmd += ["--inputs", os.path.join(d, "in.npz")]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise RlyError(p.stderr, p.returncode)
        return p.stdout
