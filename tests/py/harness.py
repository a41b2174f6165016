"""harness.py - run Relay programs through `rly run` and get numpy arrays back.

The operator tests (test_ops_*.py) build a one-call Relay program per case, run it through the
interpreter with `rly run FILE --inputs in.npz --output out.npz`, and compare the outputs with a
numpy reference. RLY_BIN names the rly executable (CTest sets it; scripts/test.sh too). The
helpers they share live here too: call text (op_call), seeded random data (case_rng, rand_array)
and comparisons with a per-dtype tolerance table (check); each file keeps its own seed and table.
"""
import os
import subprocess
import tempfile
import zlib

import numpy as np

RLY = os.environ.get("RLY_BIN", "rly")

# The dtype lists of the elementwise tests (binary, unary, reduce).
FLOATS = ["float16", "float32", "float64"]
SIGNED = ["int8", "int16", "int32", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS

_DT = {
    np.dtype("bool"): "bool", np.dtype("int8"): "int8", np.dtype("int16"): "int16",
    np.dtype("int32"): "int32", np.dtype("int64"): "int64", np.dtype("uint8"): "uint8",
    np.dtype("uint16"): "uint16", np.dtype("uint32"): "uint32", np.dtype("uint64"): "uint64",
    np.dtype("float16"): "float16", np.dtype("float32"): "float32", np.dtype("float64"): "float64",
}


def tensor_type(a, dyn=False):
    """The Relay type text of a numpy array: Tensor[(2, 3), float32]; with dyn every dim is
    unknown: Tensor[(?, ?), float32]."""
    a = np.asarray(a)
    dims = ", ".join("?" if dyn else str(d) for d in a.shape)
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
        # -O0: the program as written, so each operator's own kernel is what is tested (the
        # optimizer would rewrite layer_norm, batch_norm, ... into other operators)
        cmd = [RLY, "run", src, "-O0", "--output", os.path.join(d, "out.npz")]
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


def op_program(call, args, dyn=False):
    """The text of `def @main(%x0: T0, ...) { CALL }` where CALL has {0}, {1}, ... for the
    arguments. An argument that is a list or tuple of arrays becomes a tuple parameter; returns
    (text, inputs) with the inputs named x0, x1, ... (tuple fields x1_0, x1_1, ...). With dyn
    every dim of the parameter types is `?`."""
    params, names, inputs = [], [], {}
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)):
            fields = []
            for j, f in enumerate(a):
                nm = "x%d_%d" % (i, j)
                params.append("%%%s: %s" % (nm, tensor_type(f, dyn)))
                inputs[nm] = np.asarray(f)
                fields.append("%" + nm)
            names.append("(" + ", ".join(fields) + ("," if len(fields) == 1 else "") + ")")
        else:
            nm = "x%d" % i
            params.append("%%%s: %s" % (nm, tensor_type(a, dyn)))
            inputs[nm] = np.asarray(a)
            names.append("%" + nm)
    body = call.format(*names)
    text = '#[version = "0.0.5"]\ndef @main(%s) {\n  %s\n}\n' % (", ".join(params), body)
    return text, inputs


def run_op(call, *args, dyn=False):
    """Run one operator call: run_op("nn.conv2d({0}, {1}, padding=[1, 1])", x, w). Returns a
    list of outputs (one array, or a tuple's fields). dyn: as op_program's."""
    text, inputs = op_program(call, args, dyn)
    return run_relay(text, inputs)


def run_op_error(call, *args, dyn=False):
    """Run a call that must fail at run time; returns rly's stderr."""
    text, inputs = op_program(call, args, dyn)
    try:
        run_relay(text, inputs)
    except RlyError as e:
        return e.stderr
    raise AssertionError("expected `rly run` to fail for " + call)


def run_dyn(call, *args):
    """run_op with every dim of the parameters unknown (`?`)."""
    return run_op(call, *args, dyn=True)


def run_dyn_error(call, *args):
    """run_op_error with every dim of the parameters unknown (`?`)."""
    return run_op_error(call, *args, dyn=True)


def one(call, *args):
    """Run a call that has one result; returns that array."""
    out = run_op(call, *args)
    assert len(out) == 1
    return out[0]


def fmt_attr(v):
    """An attribute value as Relay text: True, "NCHW", [1, 2], 0.5, None."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt_attr(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(float(v))
    return str(v)


def op_call(op, n_args, **attrs):
    """The call text for run_op: op_call("nn.dense", 2, units=5) is
    'nn.dense({0}, {1}, units=5)'."""
    args = ", ".join("{%d}" % i for i in range(n_args))
    kw = "".join(", %s=%s" % (k, fmt_attr(v)) for k, v in attrs.items())
    return "%s(%s%s)" % (op, args, kw)


def run_call(op, args, **attrs):
    """Run op on the list args with attributes: run_call("nn.dense", [x, w], units=5). Returns
    the list of outputs."""
    return run_op(op_call(op, len(args), **attrs), *args)


def run1(op, args, **attrs):
    """run_call's first output."""
    return run_call(op, args, **attrs)[0]


def case_rng(seed, *key):
    """A generator seeded by the file's seed and the case's key (crc32 of its repr), so every
    case is reproducible on its own."""
    return np.random.default_rng([seed, zlib.crc32(repr(key).encode())])


def rand_array(r, shape, dtype, floats=(-10.0, 10.0), ints=(None, None)):
    """Random data of a dtype from generator r: bools; floats uniform in floats = (lo, hi);
    integers uniform in ints = (lo, hi), both included, within the dtype's range (a None bound
    is the dtype's own)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return r.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "f":
        return r.uniform(floats[0], floats[1], size=shape).astype(dt)
    info = np.iinfo(dt)
    lo = info.min if ints[0] is None else max(ints[0], info.min)
    hi = info.max if ints[1] is None else min(ints[1], info.max)
    return r.integers(lo, hi, size=shape, dtype=dt, endpoint=True)


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


def check(got, want, dtype, tol):
    """assert_close with the (rtol, atol) that the table tol ({"float32": (rtol, atol), ...})
    gives the dtype; assert_close's defaults for a dtype it lacks (exact for integers)."""
    if str(np.dtype(dtype)) in tol:
        rtol, atol = tol[str(np.dtype(dtype))]
        assert_close(got, want, rtol=rtol, atol=atol)
    else:
        assert_close(got, want)


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
