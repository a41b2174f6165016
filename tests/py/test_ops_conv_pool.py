"""test_ops_conv_pool.py - the conv/pool operators (src/ops/op_conv_pool.c) run through `rly run`
against numpy references written here.

Every case builds a one-call program (harness.run_op) on inputs from a fixed seed. References
work in the reference layout (NC + spatial, OI/IO + kernel) in float64 or int64; inputs and
results in other layouts (NHWC, HWIO, NCHW4c, ...) are converted with to_layout. Tolerances:
float64 rtol 1e-9; float32 rtol/atol 1e-4 (float32 accumulation over up to a few hundred terms);
float16 rtol/atol 2e-3 (the reference is rounded once to float16, the kernel accumulates wider);
integers exact.

Semantics the references encode (TVM's, see src/kernels/ref/conv_pool.c): depthwise weights
(C, M, k...) give output channel c * M + m; transposed outputs are stride * (in - 1) + window -
pads + output_padding; max pools treat padding as the dtype's lowest finite value; the average's
divisor counts the taps inside the explicitly padded input (count_include_pad) or inside the input,
at least 1; integer averages truncate; upsampling follows topi.image.resize.
"""
import itertools
import math
import re

import numpy as np
import pytest

from harness import (assert_close, case_rng, check, fmt_attr, op_call, rand_array, run1,
                     run_op, run_op_error)

SEED = 20240611
print("test_ops_conv_pool: seed", SEED)

TOL = {"float64": (1e-9, 1e-9), "float32": (1e-4, 1e-4), "float16": (2e-3, 2e-3)}


def rng_for(*key):
    """A generator seeded from SEED and the case's parameters (stable across runs)."""
    return case_rng(SEED, *key)


def rand(rng, shape, dtype, lo=-1.0, hi=1.0):
    """Random data: floats in [lo, hi), integers in [-4, 4] ([0, 4] unsigned)."""
    return rand_array(rng, shape, dtype, (lo, hi), (-4, 4))


def acc_type(dtype):
    return np.int64 if np.dtype(dtype).kind in "biu" else np.float64


# ---- layouts --------------------------------------------------------------------------------


def _tokens(layout):
    return [(int(f) if f else 0, a) for f, a in re.findall(r"(\d*)([A-Za-z])", layout)]


def to_layout(a, ref, layout):
    """Array a in reference order `ref` ("NCHW") as layout `layout` ("NHWC", "NCHW4c")."""
    toks = _tokens(layout)
    factor = {a_.upper(): f for f, a_ in toks if a_.islower()}
    shape, names = [], []
    for i, ax in enumerate(ref):
        f = factor.get(ax)
        if f:
            shape += [a.shape[i] // f, f]
            names += [ax, ax.lower()]
        else:
            shape.append(a.shape[i])
            names.append(ax)
    return a.reshape(shape).transpose([names.index(t) for _, t in toks])


# ---- reference convolutions ----------------------------------------------------------------


def pads_of(padding, nsp):
    """padding as (befores, afters): 1 value for every side, nsp for both sides of each axis,
    2 * nsp for the befores then the afters."""
    p = list(padding)
    if len(p) == 1:
        return p * nsp, p * nsp
    if len(p) == 2 * nsp:
        return p[:nsp], p[nsp:]
    return p, p


def conv_ref(x, w, strides, padding, dilation, groups):
    nsp = x.ndim - 2
    n, c = x.shape[:2]
    o, ig = w.shape[:2]
    ks = w.shape[2:]
    if groups > 1 and c == groups and o == groups:  # depthwise: (C, M, k) read as (C*M, 1, k)
        w = w.reshape((o * ig, 1) + ks)
        o, ig = o * ig, 1
    pb, pa = pads_of(padding, nsp)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pb, pa)))
    osz = [(xp.shape[2 + i] - (dilation[i] * (ks[i] - 1) + 1)) // strides[i] + 1
           for i in range(nsp)]
    out = np.zeros((n, o) + tuple(osz), dtype=x.dtype)
    og = o // groups
    for g in range(groups):
        xg = xp[:, g * ig:(g + 1) * ig]
        for k in itertools.product(*[range(e) for e in ks]):
            sl = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + strides[i] * (osz[i] - 1) + 1,
                             strides[i]) for i in range(nsp))
            patch = xg[(slice(None), slice(None)) + sl]
            wk = w[(slice(g * og, (g + 1) * og), slice(None)) + k]
            out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch, wk)
    return out


def conv_t_ref(x, w, strides, padding, dilation, groups, opad):
    nsp = x.ndim - 2
    n, c = x.shape[:2]
    sp = x.shape[2:]
    og = w.shape[1]
    ks = w.shape[2:]
    ig = c // groups
    pb, pa = pads_of(padding, nsp)
    full = [(sp[i] - 1) * strides[i] + dilation[i] * (ks[i] - 1) + 1 + opad[i] for i in range(nsp)]
    big = np.zeros((n, og * groups) + tuple(full), dtype=x.dtype)
    for g in range(groups):
        xg = x[:, g * ig:(g + 1) * ig]
        for k in itertools.product(*[range(e) for e in ks]):
            contrib = np.einsum("nc...,co->no...", xg, w[(slice(g * ig, (g + 1) * ig), slice(None)) + k])
            sl = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + strides[i] * (sp[i] - 1) + 1,
                             strides[i]) for i in range(nsp))
            big[(slice(None), slice(g * og, (g + 1) * og)) + sl] += contrib
    crop = tuple(slice(pb[i], full[i] - pa[i]) for i in range(nsp))
    return big[(slice(None), slice(None)) + crop]


def conv_bw_ref(grad, x, ks, strides, padding, dilation, groups):
    pb, pa = pads_of(padding, 2)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pb, pa)))
    o, c = grad.shape[1], x.shape[1]
    og, ig = o // groups, c // groups
    osz = grad.shape[2:]
    dw = np.zeros((o, ig) + tuple(ks), dtype=x.dtype)
    for g in range(groups):
        for k in itertools.product(*[range(e) for e in ks]):
            sl = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + strides[i] * (osz[i] - 1) + 1,
                             strides[i]) for i in range(2))
            patch = xp[(slice(None), slice(g * ig, (g + 1) * ig)) + sl]
            dw[(slice(g * og, (g + 1) * og), slice(None)) + k] = np.einsum(
                "nohw,nihw->oi", grad[:, g * og:(g + 1) * og], patch)
    return dw


DATA_REF = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
OI_REF = {1: "OIW", 2: "OIHW", 3: "OIDHW"}
IO_REF = {1: "IOW", 2: "IOHW", 3: "IODHW"}


def conv_case(op, nsp, xshape, wshape, dtype, attrs, transposed=False, wdtype=None):
    """Run op on random data (reference layouts xshape/wshape, converted to the attrs' layouts)
    and compare with the reference."""
    rng = rng_for(op, xshape, wshape, dtype, sorted(attrs.items()))
    out_dtype = attrs.get("out_dtype") or dtype
    x = rand(rng, xshape, dtype)
    w = rand(rng, wshape, wdtype or dtype)
    dl = attrs.get("data_layout", DATA_REF[nsp])
    kl = attrs.get("kernel_layout", (IO_REF if transposed else OI_REF)[nsp])
    ol = attrs.get("out_layout") or dl
    strides = attrs.get("strides", [1] * nsp)
    dilation = attrs.get("dilation", [1] * nsp)
    strides = strides * nsp if len(strides) == 1 else strides
    dilation = dilation * nsp if len(dilation) == 1 else dilation
    padding = attrs.get("padding", [0] * (nsp if transposed else 2 * nsp))
    groups = attrs.get("groups", 1)
    at = acc_type(out_dtype)
    xr, wr = x.astype(out_dtype).astype(at), w.astype(out_dtype).astype(at)
    if transposed:
        opad = attrs.get("output_padding", [0] * nsp)
        opad = opad * nsp if len(opad) == 1 else opad
        want = conv_t_ref(xr, wr, strides, padding, dilation, groups, opad)
    else:
        want = conv_ref(xr, wr, strides, padding, dilation, groups)
    got = run1(op, [to_layout(x, DATA_REF[nsp], dl),
                    to_layout(w, (IO_REF if transposed else OI_REF)[nsp], kl)], **attrs)
    check(got, to_layout(want, DATA_REF[nsp], ol).astype(out_dtype), out_dtype, TOL)


# ---- nn.conv2d ---------------------------------------------------------------------------------

CONV2D = [
    # (x NCHW, w OIHW, attrs)
    ((1, 3, 7, 7), (4, 3, 3, 3), {}),
    ((2, 3, 7, 6), (4, 3, 3, 3), {"padding": [1, 1]}),
    ((1, 3, 7, 7), (4, 3, 3, 3), {"padding": [1]}),
    ((1, 3, 7, 7), (5, 3, 3, 2), {"padding": [1, 0, 2, 1]}),
    ((1, 3, 9, 8), (4, 3, 3, 3), {"strides": [2, 2], "padding": [1, 1]}),
    ((1, 3, 9, 8), (4, 3, 3, 3), {"strides": [2, 1]}),
    ((1, 3, 9, 9), (4, 3, 3, 3), {"dilation": [2, 2], "padding": [2, 2]}),
    ((1, 3, 9, 9), (4, 3, 2, 3), {"dilation": [1, 2], "strides": [2, 1], "padding": [0, 1, 1, 2]}),
    ((1, 4, 6, 6), (6, 2, 3, 3), {"groups": 2, "padding": [1, 1]}),
    ((2, 6, 5, 5), (6, 2, 1, 1), {"groups": 3}),
    ((1, 4, 6, 6), (4, 1, 3, 3), {"groups": 4, "padding": [1, 1]}),  # depthwise
    ((1, 3, 6, 6), (3, 2, 3, 3), {"groups": 3, "padding": [1, 1]}),  # depthwise, multiplier 2
    ((1, 3, 5, 5), (8, 3, 1, 1), {}),
    ((1, 3, 5, 5), (4, 3, 5, 5), {}),
    ((1, 3, 6, 6), (4, 3, 3, 3), {"channels": 4, "kernel_size": [3, 3], "padding": [1, 1]}),
    ((1, 1, 1, 1), (1, 1, 1, 1), {}),
    ((1, 2, 5, 5), (3, 2, 3, 3), {"padding": [2, 2], "strides": [3, 3]}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("xs,ws,attrs", CONV2D)
def test_conv2d(xs, ws, attrs, dtype):
    conv_case("nn.conv2d", 2, xs, ws, dtype, attrs)


LAYOUTS2D = [
    {"data_layout": "NHWC", "kernel_layout": "HWIO"},
    {"data_layout": "NHWC", "kernel_layout": "OHWI"},
    {"data_layout": "NHWC", "kernel_layout": "HWOI"},
    {"data_layout": "NCHW", "kernel_layout": "HWIO"},
    {"data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NHWC"},
    {"data_layout": "NHWC", "kernel_layout": "HWIO", "out_layout": "NCHW"},
    {"data_layout": "NCHW4c", "kernel_layout": "OIHW4i4o"},
    {"data_layout": "NCHW2c", "kernel_layout": "OIHW", "out_layout": "NCHW4c"},
    {"data_layout": "HWCN", "kernel_layout": "IOHW"},
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lay", LAYOUTS2D)
def test_conv2d_layouts(lay, dtype):
    conv_case("nn.conv2d", 2, (2, 4, 6, 5), (8, 4, 3, 3), dtype,
              dict(lay, padding=[1, 1], strides=[1, 2]))


def test_conv2d_depthwise_nhwc_hwoi():
    conv_case("nn.conv2d", 2, (1, 4, 6, 6), (4, 2, 3, 3), "float32",
              {"groups": 4, "padding": [1, 1], "data_layout": "NHWC", "kernel_layout": "HWOI"})


INT_CONV = [
    ("int8", "int8", "int32"),
    ("uint8", "int8", "int32"),
    ("int8", "int8", "int64"),
    ("int32", "int32", None),
    ("int16", "int16", "int32"),
    ("int8", "int8", "float32"),
    ("float16", "float16", "float32"),
    ("float32", "float32", "float64"),
]


@pytest.mark.parametrize("dt,wdt,out", INT_CONV)
@pytest.mark.parametrize("attrs", [{"padding": [1, 1]}, {"groups": 2, "strides": [2, 2]},
                                   {"groups": 4, "padding": [1, 1], "data_layout": "NHWC",
                                    "kernel_layout": "HWOI"}])
def test_conv2d_mixed_dtypes(dt, wdt, out, attrs):
    a = dict(attrs)
    if out:
        a["out_dtype"] = out
    ws = (4, 1, 3, 3) if a.get("groups") == 4 else (4, 4 // a.get("groups", 1), 3, 3)
    conv_case("nn.conv2d", 2, (2, 4, 6, 6), ws, dt, a, wdtype=wdt)


def test_conv2d_int8_exact_large_sums():
    """int8 x int8 -> int32 accumulates exactly (sums far beyond int16)."""
    x = np.full((1, 64, 3, 3), 127, dtype=np.int8)
    w = np.full((2, 64, 3, 3), -128, dtype=np.int8)
    got = run1("nn.conv2d", [x, w], out_dtype="int32")
    assert_close(got, np.full((1, 2, 1, 1), 127 * -128 * 64 * 9, dtype=np.int32))


def test_conv2d_float32_larger():
    """Big enough to cross the GEMM's blocks (K > 256, more than 256 output positions)."""
    conv_case("nn.conv2d", 2, (1, 40, 18, 17), (12, 40, 3, 3), "float32", {"padding": [1, 1]})


def test_conv2d_error_channels():
    x = np.zeros((1, 3, 5, 5), "float32")
    w = np.zeros((4, 3, 3, 3), "float32")
    err = run_op_error(op_call("nn.conv2d", 2, channels=5), x, w)
    assert "channels" in err


# ---- nn.conv1d / conv3d ------------------------------------------------------------------------

CONV1D = [
    ((2, 3, 9), (4, 3, 3), {}),
    ((1, 3, 9), (4, 3, 3), {"padding": [1]}),
    ((1, 3, 9), (4, 3, 3), {"padding": [2, 1]}),
    ((1, 3, 10), (4, 3, 3), {"strides": [2], "padding": [1, 1]}),
    ((1, 3, 10), (4, 3, 2), {"dilation": [3]}),
    ((1, 4, 8), (6, 2, 3), {"groups": 2}),
    ((1, 4, 8), (4, 1, 3), {"groups": 4, "padding": [1, 1]}),
    ((1, 3, 8), (4, 3, 3), {"data_layout": "NWC", "kernel_layout": "WIO", "padding": [1, 1]}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ws,attrs", CONV1D)
def test_conv1d(xs, ws, attrs, dtype):
    conv_case("nn.conv1d", 1, xs, ws, dtype, attrs)


def test_conv1d_int8():
    conv_case("nn.conv1d", 1, (2, 3, 9), (4, 3, 3), "int8", {"out_dtype": "int32", "padding": [1, 1]})


CONV3D = [
    ((1, 2, 4, 5, 5), (3, 2, 3, 3, 3), {}),
    ((1, 2, 4, 5, 5), (3, 2, 3, 3, 3), {"padding": [1, 1, 1]}),
    ((1, 2, 4, 5, 5), (3, 2, 2, 3, 3), {"padding": [1, 0, 1, 0, 1, 2]}),
    ((1, 2, 5, 6, 6), (3, 2, 3, 3, 3), {"strides": [2, 2, 1], "dilation": [1, 1, 2]}),
    ((1, 4, 3, 4, 4), (4, 2, 1, 3, 3), {"groups": 2, "padding": [0, 1, 1]}),
    ((1, 2, 3, 4, 4), (3, 2, 3, 3, 3), {"data_layout": "NDHWC", "kernel_layout": "DHWIO",
                                        "padding": [1, 1, 1]}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ws,attrs", CONV3D)
def test_conv3d(xs, ws, attrs, dtype):
    conv_case("nn.conv3d", 3, xs, ws, dtype, attrs)


def test_conv3d_float16():
    conv_case("nn.conv3d", 3, (1, 2, 3, 4, 4), (2, 2, 2, 2, 2), "float16", {"padding": [1, 1, 1]})


# ---- transposed convolutions ------------------------------------------------------------------

CONV2D_T = [
    # (x NCHW, w IOHW, attrs)
    ((1, 3, 4, 4), (3, 2, 3, 3), {}),
    ((2, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2]}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "padding": [1, 1]}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "padding": [1, 1], "output_padding": [1, 1]}),
    ((1, 3, 4, 4), (3, 2, 4, 4), {"strides": [2, 3], "padding": [1, 0, 2, 1],
                                  "output_padding": [1, 2]}),
    ((1, 3, 4, 4), (3, 2, 3, 2), {"dilation": [2, 2]}),
    ((1, 4, 3, 3), (4, 3, 3, 3), {"groups": 2, "strides": [2, 2]}),
    ((1, 4, 3, 3), (4, 1, 3, 3), {"groups": 4, "padding": [1, 1]}),
    ((1, 3, 4, 4), (3, 4, 1, 1), {}),
    ((1, 3, 3, 3), (3, 2, 3, 3), {"channels": 2, "kernel_size": [3, 3]}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"data_layout": "NHWC", "kernel_layout": "HWOI",
                                  "strides": [2, 2]}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"kernel_layout": "OIHW", "padding": [1, 1]}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ws,attrs", CONV2D_T)
def test_conv2d_transpose(xs, ws, attrs, dtype):
    conv_case("nn.conv2d_transpose", 2, xs, ws, dtype, attrs, transposed=True)


@pytest.mark.parametrize("dt,out", [("int8", "int32"), ("int32", None), ("float16", None)])
def test_conv2d_transpose_dtypes(dt, out):
    a = {"strides": [2, 2], "padding": [1, 1]}
    if out:
        a["out_dtype"] = out
    conv_case("nn.conv2d_transpose", 2, (1, 3, 4, 4), (3, 2, 3, 3), dt, a, transposed=True)


CONV1D_T = [
    ((1, 3, 5), (3, 2, 3), {}),
    ((2, 3, 5), (3, 2, 3), {"strides": [2], "padding": [1]}),
    ((1, 3, 5), (3, 2, 4), {"strides": [3], "padding": [1, 2], "output_padding": [2]}),
    ((1, 4, 5), (4, 2, 3), {"groups": 2, "dilation": [2]}),
    ((1, 3, 5), (3, 2, 3), {"data_layout": "NWC", "kernel_layout": "WOI", "strides": [2]}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ws,attrs", CONV1D_T)
def test_conv1d_transpose(xs, ws, attrs, dtype):
    conv_case("nn.conv1d_transpose", 1, xs, ws, dtype, attrs, transposed=True)


CONV3D_T = [
    ((1, 2, 3, 3, 3), (2, 2, 2, 2, 2), {}),
    ((1, 2, 3, 3, 3), (2, 2, 3, 3, 3), {"strides": [2, 2, 2], "padding": [1, 1, 1],
                                        "output_padding": [1, 0, 1]}),
    ((1, 4, 2, 3, 3), (4, 1, 2, 3, 3), {"groups": 2, "strides": [1, 2, 1]}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ws,attrs", CONV3D_T)
def test_conv3d_transpose(xs, ws, attrs, dtype):
    conv_case("nn.conv3d_transpose", 3, xs, ws, dtype, attrs, transposed=True)


# ---- nn.conv2d_backward_weight -------------------------------------------------------------------

BW = [
    # (x NCHW, kernel (kh, kw), cout, attrs)
    ((2, 3, 6, 6), (3, 3), 4, {}),
    ((1, 3, 7, 7), (3, 3), 4, {"padding": [1, 1]}),
    ((1, 3, 7, 8), (3, 2), 4, {"strides": [2, 2], "padding": [1, 0, 0, 1]}),
    ((1, 3, 8, 8), (2, 2), 2, {"dilation": [2, 2]}),
    ((1, 4, 6, 6), (3, 3), 6, {"groups": 2, "padding": [1, 1]}),
    ((1, 4, 6, 6), (3, 3), 4, {"groups": 4, "channels": 4, "padding": [1, 1]}),
    ((1, 3, 6, 6), (3, 3), 4, {"data_layout": "NHWC", "kernel_layout": "NHWC", "out_layout": "HWIO",
                               "padding": [1, 1]}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ks,cout,attrs", BW)
def test_conv2d_backward_weight(xs, ks, cout, attrs, dtype):
    rng = rng_for("bw", xs, ks, cout, dtype, sorted(attrs.items()))
    strides = attrs.get("strides", [1, 1])
    dilation = attrs.get("dilation", [1, 1])
    padding = attrs.get("padding", [0, 0])
    groups = attrs.get("groups", 1)
    pb, pa = pads_of(padding, 2)
    osz = [(xs[2 + i] + pb[i] + pa[i] - dilation[i] * (ks[i] - 1) - 1) // strides[i] + 1
           for i in range(2)]
    x = rand(rng, xs, dtype)
    grad = rand(rng, (xs[0], cout) + tuple(osz), dtype)
    want = conv_bw_ref(grad.astype(np.float64), x.astype(np.float64), ks, strides, padding,
                       dilation, groups)
    dl = attrs.get("data_layout", "NCHW")
    xl = attrs.get("kernel_layout", "OIHW")
    xl = dl if xl == "OIHW" else xl
    ol = attrs.get("out_layout") or "OIHW"
    got = run1("nn.conv2d_backward_weight", [to_layout(grad, "NCHW", dl), to_layout(x, "NCHW", xl)],
               kernel_size=list(ks), **attrs)
    check(got, to_layout(want, "OIHW", ol).astype(dtype), dtype, TOL)


# ---- pools -------------------------------------------------------------------------------------

LOWEST = {"float16": -65504.0, "float32": float(np.finfo(np.float32).min),
          "float64": float(np.finfo(np.float64).min), "int8": -128, "int32": -(2 ** 31),
          "uint8": 0}


def pool_ref(x, kind, ks, strides, dil, padding, ceil_mode, cip, dtype):
    """Pooling over the last len(ks) axes of x (float64 or int64)."""
    nsp = len(ks)
    pb, pa = pads_of(padding, nsp)
    sp = x.shape[-nsp:]
    osz = []
    for i in range(nsp):
        win = dil[i] * (ks[i] - 1) + 1
        osz.append((sp[i] + pb[i] + pa[i] - win + (strides[i] - 1 if ceil_mode else 0))
                   // strides[i] + 1)
    out = np.zeros(x.shape[:-nsp] + tuple(osz), dtype=x.dtype)
    lowest = LOWEST[dtype]
    for o in np.ndindex(*osz):
        vals, count = [], 1
        for i in range(nsp):
            start = o[i] * strides[i] - pb[i]
            taps = [start + t * dil[i] for t in range(ks[i])]
            if cip:
                count *= max(0, len([p for p in taps if p <= sp[i] + pa[i] - 1]))
            else:
                count *= len([p for p in taps if 0 <= p < sp[i]])
        for k in itertools.product(*[range(e) for e in ks]):
            pos = [o[i] * strides[i] - pb[i] + k[i] * dil[i] for i in range(nsp)]
            inside = all(0 <= pos[i] < sp[i] for i in range(nsp))
            if inside:
                vals.append(x[(Ellipsis,) + tuple(pos)])
            elif kind == "max":
                vals.append(np.full(x.shape[:-nsp], lowest, dtype=x.dtype))
        if kind == "max":
            out[(Ellipsis,) + o] = np.max(np.stack(vals), axis=0)
        else:
            s = np.sum(np.stack(vals), axis=0) if vals else np.zeros(x.shape[:-nsp], x.dtype)
            d = max(count, 1)
            out[(Ellipsis,) + o] = (np.trunc(s / d) if x.dtype == np.int64 else s / d)
    return out


SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def pool_case(op, nsp, xshape, dtype, attrs, kind):
    rng = rng_for(op, xshape, dtype, sorted(attrs.items()))
    layout = attrs.get("layout", DATA_REF[nsp])
    ref = DATA_REF[nsp]
    x = rand(rng, xshape, dtype, -4, 4)
    ks = attrs["pool_size"]
    ks = ks * nsp if len(ks) == 1 else ks
    strides = attrs.get("strides", [1])
    strides = strides * nsp if len(strides) == 1 else strides
    dil = attrs.get("dilation", [1])
    dil = dil * nsp if len(dil) == 1 else dil
    padding = attrs.get("padding", [0])
    at = acc_type(dtype)
    want = pool_ref(x.astype(at), kind, ks, strides, dil, padding, attrs.get("ceil_mode", False),
                    attrs.get("count_include_pad", False), dtype)
    got = run1(op, [to_layout(x, ref, layout)], **attrs)
    check(got, to_layout(want, ref, layout).astype(dtype), dtype, TOL)


POOL2D = [
    {"pool_size": [2, 2]},
    {"pool_size": [3, 3], "strides": [2, 2]},
    {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1]},
    {"pool_size": [3, 2], "strides": [1, 2], "padding": [1, 0, 2, 1]},
    {"pool_size": [3, 3], "strides": [2, 2], "padding": [1], "ceil_mode": True},
    {"pool_size": [2, 2], "strides": [3, 3], "ceil_mode": True},
    {"pool_size": [2, 2], "dilation": [2, 2], "padding": [1, 1]},
    {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1], "count_include_pad": True},
    {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1], "ceil_mode": True,
     "count_include_pad": True},
    {"pool_size": [2, 3], "layout": "NHWC", "padding": [1, 1], "strides": [2, 1]},
    {"pool_size": [2, 2], "layout": "NCHW4c", "strides": [2, 2]},
    {"pool_size": [2, 2], "layout": "HWCN", "padding": [1, 0]},
]


def kinds(attr_list):
    """(kind, attrs) pairs: every attrs for avg, those without count_include_pad for max."""
    return [("max", a) for a in attr_list if "count_include_pad" not in a] + \
        [("avg", a) for a in attr_list]


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("kind,attrs", kinds(POOL2D))
def test_pool2d(kind, attrs, dtype):
    pool_case("nn.%s_pool2d" % kind, 2, (2, 4, 7, 6), dtype, attrs, kind)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8"])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool2d_int(kind, dtype):
    a = {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1]}
    pool_case("nn.%s_pool2d" % kind, 2, (1, 2, 7, 7), dtype, a, kind)


POOL1D = [
    {"pool_size": [2]},
    {"pool_size": [3], "strides": [2], "padding": [1]},
    {"pool_size": [3], "strides": [2], "padding": [1, 2], "ceil_mode": True},
    {"pool_size": [2], "dilation": [3], "padding": [1, 1]},
    {"pool_size": [3], "padding": [1], "count_include_pad": True},
    {"pool_size": [2], "layout": "NWC", "strides": [2]},
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind,attrs", kinds(POOL1D))
def test_pool1d(kind, attrs, dtype):
    pool_case("nn.%s_pool1d" % kind, 1, (2, 3, 9), dtype, attrs, kind)


POOL3D = [
    {"pool_size": [2, 2, 2]},
    {"pool_size": [2, 3, 3], "strides": [1, 2, 2], "padding": [0, 1, 1]},
    {"pool_size": [2, 2, 2], "strides": [2, 2, 2], "padding": [1, 0, 1, 0, 1, 1],
     "ceil_mode": True},
    {"pool_size": [2, 2, 2], "dilation": [1, 2, 2], "padding": [1], "count_include_pad": True},
    {"pool_size": [2, 2, 2], "layout": "NDHWC", "strides": [2, 1, 2]},
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind,attrs", kinds(POOL3D))
def test_pool3d(kind, attrs, dtype):
    pool_case("nn.%s_pool3d" % kind, 3, (1, 2, 4, 5, 5), dtype, attrs, kind)


def test_max_pool_window_of_padding_only():
    """ceil_mode can leave a window on padding alone: TVM's lowest finite value."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    got = run1("nn.max_pool2d", [x], pool_size=[1, 1], strides=[3, 3], padding=[0, 0, 1, 1],
               ceil_mode=True)
    assert got.shape == (1, 1, 3, 3)
    assert got[0, 0, 2, 2] == np.finfo(np.float32).min
    assert got[0, 0, 1, 1] == 15


def test_avg_pool_window_of_padding_only():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) + 1
    got = run1("nn.avg_pool2d", [x], pool_size=[1, 1], strides=[3, 3], padding=[0, 0, 1, 1],
               ceil_mode=True)
    assert got[0, 0, 2, 2] == 0 and got[0, 0, 1, 1] == 16


# ---- pool gradients ----------------------------------------------------------------------------


def pool_grad_ref(og, x, kind, ks, strides, dil, padding, ceil_mode, cip, dtype):
    pb, pa = pads_of(padding, 2)
    sp = x.shape[-2:]
    dx = np.zeros_like(x)
    lowest = LOWEST[dtype]
    for idx in np.ndindex(*x.shape[:-2]):
        for o in np.ndindex(*og.shape[-2:]):
            g = og[idx + o]
            taps = [(o[0] * strides[0] - pb[0] + a * dil[0], o[1] * strides[1] - pb[1] + b * dil[1])
                    for a in range(ks[0]) for b in range(ks[1])]
            inside = [0 <= p < sp[0] and 0 <= q < sp[1] for p, q in taps]
            if kind == "max":
                vals = [x[idx + t] if ins else lowest for t, ins in zip(taps, inside)]
                best = int(np.argmax(vals))  # the first maximum
                if inside[best]:
                    dx[idx + taps[best]] += g
            else:
                if cip:
                    c0 = len([1 for a in range(ks[0]) if o[0] * strides[0] - pb[0] + a * dil[0] <= sp[0] + pa[0] - 1])
                    c1 = len([1 for b in range(ks[1]) if o[1] * strides[1] - pb[1] + b * dil[1] <= sp[1] + pa[1] - 1])
                    count = c0 * c1
                else:
                    count = sum(inside)
                for t, ins in zip(taps, inside):
                    if ins:
                        dx[idx + t] += g / max(count, 1)
    return dx


POOL_GRAD = [
    {"pool_size": [2, 2], "strides": [2, 2]},
    {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1]},
    {"pool_size": [3, 3], "strides": [1, 1], "padding": [1, 1]},
    {"pool_size": [3, 2], "strides": [2, 1], "padding": [1, 0, 0, 1], "ceil_mode": True},
    {"pool_size": [2, 2], "strides": [2, 2], "layout": "NHWC"},
]


@pytest.mark.parametrize("kind,cip", [("max", False), ("avg", False), ("avg", True)])
@pytest.mark.parametrize("attrs", POOL_GRAD)
def test_pool2d_grad(kind, attrs, cip):
    dtype = "float32"
    a = dict(attrs)
    if kind == "avg":
        a["count_include_pad"] = cip
    rng = rng_for("grad", kind, sorted(a.items()))
    layout = a.get("layout", "NCHW")
    x = rng.permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6).astype(dtype)  # no ties
    pb, pa = pads_of(a.get("padding", [0]), 2)
    ks, st = a["pool_size"], a["strides"]
    osz = [(x.shape[2 + i] + pb[i] + pa[i] - ks[i] + (st[i] - 1 if a.get("ceil_mode") else 0))
           // st[i] + 1 for i in range(2)]
    og = rand(rng, (2, 3) + tuple(osz), dtype)
    want = pool_grad_ref(og.astype(np.float64), x.astype(np.float64), kind, ks, st, [1, 1],
                         a.get("padding", [0]), a.get("ceil_mode", False), cip, dtype)
    got = run1("nn.%s_pool2d_grad" % kind,
               [to_layout(og, "NCHW", layout), to_layout(x, "NCHW", layout)], **a)
    check(got, to_layout(want, "NCHW", layout).astype(dtype), dtype, TOL)


# ---- global and adaptive pools ---------------------------------------------------------------


def adaptive_ref(x, out_size, kind):
    nsp = len(out_size)
    sp = x.shape[-nsp:]
    out = np.zeros(x.shape[:-nsp] + tuple(out_size), dtype=x.dtype)
    for o in np.ndindex(*out_size):
        sl = tuple(slice(o[i] * sp[i] // out_size[i], -(-(o[i] + 1) * sp[i] // out_size[i]))
                   for i in range(nsp))
        win = x[(Ellipsis,) + sl].reshape(x.shape[:-nsp] + (-1,))
        if kind == "max":
            out[(Ellipsis,) + o] = win.max(-1)
        else:
            s = win.sum(-1)
            out[(Ellipsis,) + o] = np.trunc(s / win.shape[-1]) if x.dtype == np.int64 else s / win.shape[-1]
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "NCHW2c"])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_global_pool2d(kind, layout, dtype):
    rng = rng_for("global", kind, layout, dtype)
    x = rand(rng, (2, 4, 5, 3), dtype, -3, 3)
    want = adaptive_ref(x.astype(acc_type(dtype)), [1, 1], kind)
    got = run1("nn.global_%s_pool2d" % kind, [to_layout(x, "NCHW", layout)], layout=layout)
    check(got, to_layout(want, "NCHW", layout).astype(dtype), dtype, TOL)


ADAPTIVE = [
    (1, (2, 3, 10), [4], "NCW"),
    (1, (2, 3, 7), [3], "NWC"),
    (1, (1, 2, 5), [], "NCW"),
    (2, (1, 3, 7, 9), [3, 4], "NCHW"),
    (2, (1, 3, 7, 9), [2], "NCHW"),
    (2, (1, 3, 5, 6), [7, 8], "NCHW"),
    (2, (2, 3, 6, 5), [4, 3], "NHWC"),
    (3, (1, 2, 5, 4, 6), [2, 3, 4], "NCDHW"),
    (3, (1, 2, 4, 4, 5), [3], "NDHWC"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("nsp,xs,size,layout", ADAPTIVE)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_adaptive_pool(kind, nsp, xs, size, layout, dtype):
    rng = rng_for("adaptive", kind, xs, size, layout, dtype)
    x = rand(rng, xs, dtype, -3, 3)
    out_size = list(xs[2:]) if not size else (size * nsp if len(size) == 1 else size)
    want = adaptive_ref(x.astype(acc_type(dtype)), out_size, kind)
    ref = DATA_REF[nsp]
    got = run1("nn.adaptive_%s_pool%dd" % (kind, nsp), [to_layout(x, ref, layout)],
               output_size=size, layout=layout)
    check(got, to_layout(want, ref, layout).astype(dtype), dtype, TOL)


def test_adaptive_avg_pool2d_int8():
    x = np.array([[[[1, 2, 3], [4, 5, -7]]]], dtype=np.int8)
    got = run1("nn.adaptive_avg_pool2d", [x], output_size=[1, 2])
    # windows [[1, 2], [4, 5]] -> 3 and [[2, 3], [5, -7]] -> 3 / 4 -> 0 (truncated)
    assert_close(got, np.array([[[[3, 0]]]], dtype=np.int8))


# ---- upsampling ---------------------------------------------------------------------------------


def taps_ref(method, ct, x, n_in, n_out):
    scale = n_in / n_out
    if ct == "half_pixel":
        f = (x + 0.5) * scale - 0.5
    elif ct == "align_corners":
        f = (n_in - 1) / (n_out - 1) * x if n_out > 1 else 0.0
    else:
        f = scale * x
    clamp = lambda i: min(max(i, 0), n_in - 1)
    if method == "nearest_neighbor":
        r = np.round(f) if ct == "align_corners" else math.floor(f + 1e-5)
        return [(clamp(int(r)), 1.0)]
    f0 = math.floor(f)
    u = f - f0
    if method in ("bilinear", "trilinear"):
        return [(clamp(f0), 1 - u), (clamp(f0 + 1), u)]
    a = -0.5
    w = [a * (u ** 3 - 2 * u ** 2 + u), (a + 2) * u ** 3 - (a + 3) * u ** 2 + 1,
         -(a + 2) * u ** 3 + (3 + 2 * a) * u ** 2 - a * u, -a * u ** 3 + a * u ** 2]
    return [(clamp(f0 + i - 1), w[i]) for i in range(4)]


def resize_ref(x, out_size, method, ct):
    """Resize the last len(out_size) axes of x (float64)."""
    out = x
    for ax in range(len(out_size)):
        axis = x.ndim - len(out_size) + ax
        n_in = out.shape[axis]
        mats = np.zeros((out_size[ax], n_in))
        for o in range(out_size[ax]):
            for i, w in taps_ref(method, ct, o, n_in, out_size[ax]):
                mats[o, i] += w
        out = np.moveaxis(np.tensordot(out, mats, axes=([axis], [1])), -1, axis)
    return out


UPSAMPLING = [
    (2.0, 2.0, "nearest_neighbor", False, "NCHW"),
    (3.0, 2.0, "nearest_neighbor", False, "NCHW"),
    (1.5, 2.5, "nearest_neighbor", False, "NCHW"),
    (2.0, 3.0, "nearest_neighbor", True, "NCHW"),
    (2.0, 2.0, "bilinear", False, "NCHW"),
    (1.5, 2.0, "bilinear", True, "NCHW"),
    (2.0, 2.0, "bicubic", False, "NCHW"),
    (2.0, 1.5, "bicubic", True, "NCHW"),
    (2.0, 2.0, "nearest_neighbor", False, "NHWC"),
    (2.0, 3.0, "bilinear", True, "NHWC"),
    (0.5, 0.5, "bilinear", False, "NCHW"),
    (2.0, 2.0, "bilinear", False, "NCHW2c"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sh,sw,method,align,layout", UPSAMPLING)
def test_upsampling(sh, sw, method, align, layout, dtype):
    rng = rng_for("up", sh, sw, method, align, layout, dtype)
    x = rand(rng, (2, 4, 4, 5), dtype)
    out_size = [int(np.round(4 * sh)), int(np.round(5 * sw))]
    want = resize_ref(x.astype(np.float64), out_size, method,
                      "align_corners" if align else "asymmetric")
    got = run1("nn.upsampling", [to_layout(x, "NCHW", layout)], scale_h=sh, scale_w=sw,
               layout=layout, method=method, align_corners=align)
    check(got, to_layout(want, "NCHW", layout).astype(dtype), dtype, TOL)


@pytest.mark.parametrize("dtype", ["int8", "int32", "float16"])
@pytest.mark.parametrize("method", ["nearest_neighbor", "bilinear"])
def test_upsampling_dtypes(method, dtype):
    rng = rng_for("upd", method, dtype)
    x = rand(rng, (1, 2, 3, 4), dtype)
    want = resize_ref(x.astype(np.float64), [6, 8], method, "asymmetric")
    if np.dtype(dtype).kind == "i":
        want = np.trunc(want)  # integer results truncate
    got = run1("nn.upsampling", [x], scale_h=2.0, scale_w=2.0, method=method)
    check(got, want.astype(dtype), dtype, TOL)


UPSAMPLING3D = [
    (2.0, 2.0, 2.0, "nearest_neighbor", "half_pixel", "NCDHW"),
    (2.0, 1.5, 2.0, "nearest_neighbor", "asymmetric", "NCDHW"),
    (2.0, 2.0, 3.0, "nearest_neighbor", "align_corners", "NCDHW"),
    (2.0, 2.0, 2.0, "trilinear", "half_pixel", "NCDHW"),
    (1.5, 2.0, 2.0, "trilinear", "align_corners", "NCDHW"),
    (2.0, 2.0, 1.0, "trilinear", "asymmetric", "NCDHW"),
    (2.0, 2.0, 2.0, "trilinear", "half_pixel", "NDHWC"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sd,sh,sw,method,ct,layout", UPSAMPLING3D)
def test_upsampling3d(sd, sh, sw, method, ct, layout, dtype):
    rng = rng_for("up3", sd, sh, sw, method, ct, layout, dtype)
    x = rand(rng, (1, 2, 3, 4, 3), dtype)
    out_size = [int(np.round(3 * sd)), int(np.round(4 * sh)), int(np.round(3 * sw))]
    want = resize_ref(x.astype(np.float64), out_size, method, ct)
    got = run1("nn.upsampling3d", [to_layout(x, "NCDHW", layout)], scale_d=sd, scale_h=sh,
               scale_w=sw, layout=layout, method=method, coordinate_transformation_mode=ct)
    check(got, to_layout(want, "NCDHW", layout).astype(dtype), dtype, TOL)


# ---- padding and dilation ----------------------------------------------------------------------


PAD = [
    ((3, 4), [[1, 2], [0, 3]], "constant"),
    ((2, 3, 4), [[0, 0], [1, 1], [2, 0]], "constant"),
    ((3, 5), [[-1, 1], [2, -2]], "constant"),
    ((3, 4), [[2, 1], [3, 0]], "edge"),
    ((2, 3, 4), [[1, 0], [2, 2], [0, 1]], "edge"),
    ((2, 3), [[5, 4], [0, 3]], "edge"),  # edge widths may exceed the extent
    ((3, 4), [[2, 1], [3, 2]], "reflect"),
    ((2, 3, 4), [[1, 1], [2, 2], [3, 0]], "reflect"),
    ((5,), [[0, 0]], "reflect"),
]


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "int8"])
@pytest.mark.parametrize("shape,widths,mode", PAD)
def test_pad(shape, widths, mode, dtype):
    rng = rng_for("pad", shape, widths, mode, dtype)
    x = rand(rng, shape, dtype, -5, 5)
    value = np.array(7, dtype=dtype)
    grow = [[max(b, 0), max(a, 0)] for b, a in widths]
    if mode == "constant":
        want = np.pad(x, grow, mode="constant", constant_values=value)
    else:
        want = np.pad(x, grow, mode=mode)
    crop = tuple(slice(-min(b, 0), want.shape[i] - (-min(a, 0))) for i, (b, a) in enumerate(widths))
    want = want[crop]
    got = run_op("nn.pad({0}, {1}, pad_width=%s, pad_mode=\"%s\")" % (fmt_attr(widths), mode),
                 x, value)[0]
    check(got, want, dtype, TOL)


def test_pad_value_cast():
    """pad_value is converted to the data's dtype."""
    x = np.zeros((2, 2), "int32")
    got = run_op("nn.pad({0}, {1}, pad_width=[[1, 0], [0, 1]])", x, np.array(2.75, "float32"))[0]
    assert_close(got, np.pad(x, [[1, 0], [0, 1]], constant_values=2))


MIRROR = [
    ((3, 4), [[1, 2], [0, 3]], "SYMMETRIC"),
    ((3, 4), [[2, 2], [3, 3]], "REFLECT"),
    ((2, 3, 4), [[1, 1], [3, 0], [0, 4]], "SYMMETRIC"),
    ((2, 3, 4), [[0, 1], [2, 2], [1, 3]], "REFLECT"),
]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("shape,widths,mode", MIRROR)
def test_mirror_pad(shape, widths, mode, dtype):
    rng = rng_for("mirror", shape, widths, mode, dtype)
    x = rand(rng, shape, dtype, -5, 5)
    want = np.pad(x, widths, mode="symmetric" if mode == "SYMMETRIC" else "reflect")
    got = run1("nn.mirror_pad", [x], pad_width=widths, mode=mode)
    check(got, want, dtype, TOL)


DILATE = [
    ((3, 4), [2, 3], 0.0),
    ((2, 3, 4), [1, 2, 1], 0.0),
    ((2, 1, 3), [3, 2, 2], -1.5),
    ((4,), [1], 0.0),
]


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
@pytest.mark.parametrize("shape,strides,value", DILATE)
def test_dilate(shape, strides, value, dtype):
    rng = rng_for("dilate", shape, strides, dtype)
    x = rand(rng, shape, dtype, -5, 5)
    oshape = [(d - 1) * s + 1 if d > 1 else d for d, s in zip(shape, strides)]
    want = np.full(oshape, value).astype(dtype)
    want[tuple(slice(None, None, s) for s in strides)] = x
    got = run1("nn.dilate", [x], strides=strides, dilation_value=value)
    check(got, want, dtype, TOL)
