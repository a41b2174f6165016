"""test_ops_qnn.py - the qnn.* operators against numpy references of TVM's QNN lowering.

The references follow TVM's canonicalization (src/relay/qnn/op/*.cc) as the kernels document it:
- quantize: clip(roundf(x / scale) + zp) in float32, round half away from zero;
- dequantize: float32(int32(q) - zp) * scale;
- requantize, int64 compute (the default): int32 arithmetic with the fixed-point multiplier of
  in_scale / out_scale (31-bit significand from frexp, rounded half away from zero), rounded
  UPWARD (the default, ties toward +inf) or TONEAREST (ties away from zero); float32/float64
  compute: the same steps in that float type;
- conv2d / dense: exact sum((q - zp_x) * (w - zp_w)) wrapped to out_dtype;
- add / subtract: both operands requantized to the output parameters, then combined in int32;
  mul: (a - zp_a) * (b - zp_b) requantized from float32(s_a * s_b);
- concatenate: inputs whose parameters differ from the output's are requantized.
All integer results are compared exactly. Each case seeds its own generator (zlib.crc32 of its
parameters).
"""
import math
import zlib

import numpy as np
import pytest

from harness import assert_close, op_call, run_op, run_op_error

# ---- helpers ----------------------------------------------------------------------------------


def rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def round_away(x):
    return math.copysign(math.floor(abs(x) + 0.5), x)


def wrap32(v):
    return ((int(v) + 2**31) % 2**32) - 2**31


def wrap64(v):
    return ((int(v) + 2**63) % 2**64) - 2**63


QRANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
          "uint16": (0, 65535), "int32": (-2**31, 2**31 - 1), "int64": (-2**31, 2**31 - 1)}


def clip(v, dtype):
    lo, hi = QRANGE[dtype]
    return min(max(v, lo), hi)


def qdata(r, dtype, shape):
    lo, hi = QRANGE[dtype] if dtype != "int64" else (-2**40, 2**40)
    lo, hi = max(lo, -300), min(hi, 300)
    return r.integers(lo, hi + 1, shape).astype(dtype)


def scalar_f(v):
    return np.float32(v)


def scalar_i(v):
    return np.int32(v)


def per_axis(arr, shape, axis):
    """Index of each element's channel along axis (0 for scalars)."""
    if np.ndim(arr) == 0 or len(shape) == 0:
        return lambda idx: 0
    axis = axis % len(shape)
    return lambda idx: idx[axis]


def pick(arr, c):
    a = np.asarray(arr)
    return a.reshape(-1)[0] if a.size == 1 else a[c]


# ---- fixed point (TVM's GetFixedPointMultiplierShift and q_multiply_shift) --------------------


def wrap_to(out, dtype):
    """int64 results wrapped to an integer dtype (two's complement)."""
    info = np.iinfo(dtype)
    if info.bits == 64:
        return out.astype(dtype)
    return ((out - info.min) % (2**info.bits) + info.min).astype(dtype)


def fixed_point(mult):
    if mult == 0.0:
        return 0, 0
    sig, e = math.frexp(mult)
    m = int(round_away(sig * 2.0**31))
    if m == 2**31:
        m //= 2
        e += 1
    return m, e


def fixed_mul(x, mult, upward):
    m, shift = fixed_point(mult)
    ls, rs = max(shift, 0), max(-shift, 0)
    total = rs + 31
    if total >= 63:
        return 0
    v = wrap64(wrap64(x << ls) * m)
    rnd = 1 << (total - 1)
    if not upward and v < 0:
        rnd -= 1
    return wrap32(wrap64(v + rnd) >> total)


def requant_one(q, s_in, zp_in, s_out, zp_out, upward=True, compute="int64"):
    """One value requantized to int32 (before the output clip)."""
    s_in, s_out = np.float32(s_in), np.float32(s_out)
    mult = float(s_in) / float(s_out)
    if compute == "float32":
        t = np.float32(q) - np.float32(zp_in)
        t = np.float32(mult) * t
        t = t + np.float32(zp_out)
        t = float(np.floor(t + np.float32(0.5))) if upward else round_away(float(t))
        return int(min(max(t, -2**31), 2**31 - 1))
    if compute == "float64":
        t = float(q) - float(zp_in)
        t = mult * t
        t = t + float(zp_out)
        t = math.floor(t + 0.5) if upward else round_away(t)
        return int(min(max(t, -2**31), 2**31 - 1))
    t = wrap32(wrap32(q) - int(zp_in))
    t = fixed_mul(t, mult, upward)
    return wrap32(t + int(zp_out))


# ==== qnn.quantize ===============================================================================


def quantize_ref(x, scale, zp, axis, out_dtype):
    chan = per_axis(scale if np.ndim(scale) else zp, x.shape, axis)
    out = np.zeros(x.shape, dtype=out_dtype)
    for idx in np.ndindex(*x.shape):
        c = chan(idx)
        s, z = pick(scale, c), pick(zp, c)
        if x.dtype == np.float64:
            v = round_away(float(x[idx]) / float(np.float32(s))) + int(z)
        else:
            r = round_away(float(np.float32(x[idx]) / np.float32(s)))
            v = float(np.float32(r) + np.float32(z))
        out[idx] = clip(int(v), out_dtype)
    return out


@pytest.mark.parametrize("out_dtype", ["int8", "uint8", "int16", "uint16", "int32"])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("axis", [-1, 1])
def test_quantize(out_dtype, per_channel, axis):
    r = rng("q", out_dtype, per_channel, axis)
    x = (r.standard_normal((2, 3, 4)) * 40).astype(np.float32)
    x[0, 0, :] = [2.5, -2.5, 3.5, -0.5]  # ties (with scale 1 below): away from zero
    dim = x.shape[axis]
    if per_channel:
        scale = r.uniform(0.2, 2.0, dim).astype(np.float32)
        scale[0] = 1.0
        zp = r.integers(-5, 20, dim).astype(np.int32)
        if out_dtype.startswith("u"):
            zp = np.abs(zp).astype(np.int32)
    else:
        scale, zp = np.float32(1.0 if axis == -1 else 0.37), np.int32(3)
    got = run_op(op_call("qnn.quantize", 3, out_dtype=out_dtype, axis=axis), x, scale, zp)[0]
    assert_close(got, quantize_ref(x, scale, zp, axis, out_dtype))


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_quantize_input_dtypes(dtype):
    x = (rng("qdt", dtype).standard_normal((3, 5)) * 30).astype(dtype)
    got = run_op(op_call("qnn.quantize", 3), x, np.float32(0.25), np.int32(-4))[0]
    assert_close(got, quantize_ref(x, np.float32(0.25), np.int32(-4), -1, "int8"))


def test_quantize_default_is_int8_and_saturates():
    x = np.array([-1000.0, -0.5, 0.5, 1.5, 1000.0], dtype=np.float32)
    got = run_op(op_call("qnn.quantize", 3), x, np.float32(1.0), np.int32(0))[0]
    assert_close(got, np.array([-128, -1, 1, 2, 127], dtype=np.int8))


def test_quantize_axis_ignored_for_scalar_params():
    # As in TVM's relation, the axis is only checked when a parameter is per-channel.
    x = np.array([[0.4, -1.6], [2.4, 7.0]], dtype=np.float32)
    got = run_op(op_call("qnn.quantize", 3, axis=7), x, np.float32(0.8), np.int32(1))[0]
    assert_close(got, quantize_ref(x, np.float32(0.8), np.int32(1), -1, "int8"))


# ==== qnn.dequantize =============================================================================


def dequantize_ref(q, scale, zp, axis, out_dtype):
    chan = per_axis(scale if np.ndim(scale) else zp, q.shape, axis)
    out = np.zeros(q.shape, dtype=np.float32)
    for idx in np.ndindex(*q.shape):
        c = chan(idx)
        shifted = wrap32(wrap32(int(q[idx])) - int(pick(zp, c)))
        out[idx] = np.float32(shifted) * np.float32(pick(scale, c))
    return out.astype(out_dtype)


@pytest.mark.parametrize("in_dtype", ["int8", "uint8", "int16", "uint16", "int32"])
@pytest.mark.parametrize("out_dtype", ["float32", "float16"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_dequantize(in_dtype, out_dtype, per_channel):
    r = rng("dq", in_dtype, out_dtype, per_channel)
    q = qdata(r, in_dtype, (3, 4))
    if per_channel:
        scale = r.uniform(0.01, 1.0, 4).astype(np.float32)
        zp = r.integers(-10, 10, 4).astype(np.int32)
    else:
        scale, zp = np.float32(0.0625), np.int32(7)
    got = run_op(op_call("qnn.dequantize", 3, out_dtype=out_dtype), q, scale, zp)[0]
    tol = 1e-3 if out_dtype == "float16" else 1e-6
    assert_close(got, dequantize_ref(q, scale, zp, -1, out_dtype), rtol=tol, atol=tol)


def test_dequantize_axis0_int32_wraps():
    q = np.array([[2**31 - 1, 5], [-2**31, -5]], dtype=np.int32)
    scale = np.array([1.0, 2.0], dtype=np.float32)
    zp = np.array([-1, 1], dtype=np.int32)
    got = run_op(op_call("qnn.dequantize", 3, axis=0), q, scale, zp)[0]
    assert_close(got, dequantize_ref(q, scale, zp, 0, "float32"))


# ==== qnn.requantize =============================================================================


def requantize_ref(q, s_in, zp_in, s_out, zp_out, axis, rounding, compute, out_dtype):
    upward = rounding != "TONEAREST"
    compute = "int64" if compute == "None" else compute
    chan = per_axis(s_in if np.ndim(s_in) else zp_in, q.shape, axis)
    out = np.zeros(q.shape, dtype=out_dtype)
    for idx in np.ndindex(*q.shape):
        c = chan(idx)
        v = requant_one(int(q[idx]), pick(s_in, c), pick(zp_in, c), s_out, zp_out, upward,
                        compute)
        out[idx] = clip(v, out_dtype)
    return out


@pytest.mark.parametrize("rounding", ["None", "UPWARD", "TONEAREST"])
@pytest.mark.parametrize("compute", ["None", "int64", "float32", "float64"])
@pytest.mark.parametrize("s_in,s_out", [(0.5, 1.0), (0.3, 0.7), (2.0, 0.25), (1.0, 1.0)])
def test_requantize_modes(rounding, compute, s_in, s_out):
    r = rng("rq", rounding, compute, s_in, s_out)
    q = r.integers(-300, 300, (4, 9)).astype(np.int32)
    q[0, :8] = [-5, -3, -1, 1, 3, 5, -7, 7]  # ties when the multiplier is 0.5
    got = run_op(op_call("qnn.requantize", 5, rounding=rounding, compute_dtype=compute,
                         out_dtype="int16"), q, np.float32(s_in), np.int32(2), np.float32(s_out),
                 np.int32(-3))[0]
    assert_close(got, requantize_ref(q, s_in, 2, s_out, -3, -1, rounding, compute, "int16"))


@pytest.mark.parametrize("in_dtype", ["int8", "uint8", "int16", "int32", "int64"])
@pytest.mark.parametrize("out_dtype", ["int8", "uint8", "int16", "int32"])
def test_requantize_dtypes(in_dtype, out_dtype):
    r = rng("rqdt", in_dtype, out_dtype)
    q = qdata(r, in_dtype, (2, 3, 4))
    got = run_op(op_call("qnn.requantize", 5, out_dtype=out_dtype), q, np.float32(0.8),
                 np.int32(10), np.float32(0.3), np.int32(20))[0]
    assert_close(got, requantize_ref(q, 0.8, 10, 0.3, 20, -1, "None", "None", out_dtype))


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("rounding", ["UPWARD", "TONEAREST"])
@pytest.mark.parametrize("compute", ["int64", "float32"])
def test_requantize_per_channel(axis, rounding, compute):
    r = rng("rqpc", axis, rounding, compute)
    q = r.integers(-2000, 2000, (3, 4, 5)).astype(np.int32)
    dim = q.shape[axis]
    s_in = r.uniform(0.001, 0.2, dim).astype(np.float32)
    s_in[0] = 0.5
    zp = r.integers(-10, 10, dim).astype(np.int32)
    got = run_op(op_call("qnn.requantize", 5, axis=axis, rounding=rounding, compute_dtype=compute,
                         out_dtype="uint8"), q, s_in, zp, np.float32(0.05), np.int32(128))[0]
    assert_close(got, requantize_ref(q, s_in, zp, 0.05, 128, axis, rounding, compute, "uint8"))


def test_requantize_rounding_known():
    # multiplier 0.5 exactly: ties; UPWARD rounds them toward +inf, TONEAREST away from zero.
    q = np.array([-5, -3, -1, 1, 3, 5], dtype=np.int32)
    up = run_op(op_call("qnn.requantize", 5, rounding="UPWARD", out_dtype="int32"), q,
                np.float32(1.0), np.int32(0), np.float32(2.0), np.int32(0))[0]
    near = run_op(op_call("qnn.requantize", 5, rounding="TONEAREST", out_dtype="int32"), q,
                  np.float32(1.0), np.int32(0), np.float32(2.0), np.int32(0))[0]
    assert_close(up, np.array([-2, -1, 0, 1, 2, 3], dtype=np.int32))
    assert_close(near, np.array([-3, -2, -1, 1, 2, 3], dtype=np.int32))


@pytest.mark.parametrize("mult", [1e-12, 3.0e-10, 0.999999, 1.0, 1.5, 7.3, 1000.25])
def test_requantize_extreme_multipliers(mult):
    q = np.array([-2**31, -123456, -1, 0, 1, 99999, 2**31 - 1], dtype=np.int32)
    got = run_op(op_call("qnn.requantize", 5, out_dtype="int32"), q, np.float32(mult),
                 np.int32(0), np.float32(1.0), np.int32(0))[0]
    assert_close(got, requantize_ref(q, mult, 0, 1.0, 0, -1, "None", "None", "int32"))


def test_requantize_fixed_point_matches_exact_rounding():
    # An independent check of the fixed point: for multipliers that are exact in 31 bits the
    # UPWARD result is floor(q * m + 1/2) of the exact product.
    q = np.arange(-64, 65, dtype=np.int32)
    for m in (0.25, 0.75, 1.25, 3.0):
        got = run_op(op_call("qnn.requantize", 5, out_dtype="int32"), q, np.float32(m), np.int32(0),
                     np.float32(1.0), np.int32(0))[0]
        want = np.floor(q.astype(np.float64) * m + 0.5).astype(np.int32)
        assert_close(got, want)


# ==== qnn.conv2d =================================================================================


def conv_ref(x, w, izp, kzp, strides, padding, dilation, groups, dl, kl, out_dtype, ol=None):
    ol = ol or dl
    xc = np.transpose(x, [dl.index(a) for a in "NCHW"]).astype(np.int64)
    depthwise = kl == "HWOI" and groups > 1 and xc.shape[1] == groups and \
        w.shape[kl.index("O")] == groups
    if depthwise:  # (H, W, C, M) -> (C * M, 1, H, W)
        hw_cm = np.transpose(w, [kl.index(a) for a in "HWOI"]).astype(np.int64)
        kh, kw, c, m = hw_cm.shape
        wc = np.transpose(hw_cm, (2, 3, 0, 1)).reshape(c * m, 1, kh, kw)
    else:
        wc = np.transpose(w, [kl.index(a) for a in "OIHW"]).astype(np.int64)
    n, c, h, wd = xc.shape
    oc, cin_g, kh, kw = wc.shape
    pad = {1: padding * 4, 2: padding * 2, 4: padding}[len(padding)]
    pt, pl, pb, pr = pad
    xp = np.full((n, c, h + pt + pb, wd + pl + pr), int(izp), dtype=np.int64)
    xp[:, :, pt:pt + h, pl:pl + wd] = xc
    oh = (h + pt + pb - ((kh - 1) * dilation[0] + 1)) // strides[0] + 1
    ow = (wd + pl + pr - ((kw - 1) * dilation[1] + 1)) // strides[1] + 1
    kz = np.broadcast_to(np.asarray(kzp, dtype=np.int64).reshape(-1), (oc,))
    out = np.zeros((n, oc, oh, ow), dtype=np.int64)
    cout_g = oc // groups
    for o in range(oc):
        g = o // cout_g
        for ry in range(kh):
            for rx in range(kw):
                ys, xs = ry * dilation[0], rx * dilation[1]
                win = xp[:, g * cin_g:(g + 1) * cin_g, ys:ys + (oh - 1) * strides[0] + 1:strides[0],
                         xs:xs + (ow - 1) * strides[1] + 1:strides[1]]
                wt = wc[o, :, ry, rx] - kz[o]
                out[:, o] += np.einsum("ncyx,c->nyx", win - int(izp), wt)
    return np.transpose(wrap_to(out, out_dtype), ["NCHW".index(a) for a in ol])


CONV_CASES = [
    # (data shape NCHW, out channels, kernel, strides, padding, dilation, groups)
    ((1, 3, 6, 7), 4, (3, 3), [1, 1], [0, 0], [1, 1], 1),
    ((2, 4, 7, 6), 6, (3, 2), [2, 1], [1, 2], [1, 1], 2),
    ((1, 2, 8, 8), 3, (2, 3), [1, 2], [1, 0, 2, 1], [2, 1], 1),
    ((1, 4, 5, 5), 4, (3, 3), [1, 1], [1], [1, 1], 4),
    ((1, 1, 5, 6), 2, (1, 1), [2, 2], [0, 0], [1, 1], 1),
]
KERNEL_OF = {"OIHW": "OIHW", "HWIO": "HWIO", "OHWI": "OHWI"}


def make_conv(r, case, kl, dl, dtype, wdtype):
    shape, oc, (kh, kw), st, pad, dil, groups = case
    n, c, h, w = shape
    x = qdata(r, dtype, shape)
    x = np.transpose(x, ["NCHW".index(a) for a in dl])
    wt = qdata(r, wdtype, (oc, c // groups, kh, kw))
    wt = np.transpose(wt, ["OIHW".index(a) for a in kl])
    return x, wt


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
@pytest.mark.parametrize("dl,kl", [("NCHW", "OIHW"), ("NHWC", "HWIO"), ("NHWC", "OHWI")])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qnn_conv2d(case, dl, kl, per_channel):
    r = rng("conv", case, dl, kl, per_channel)
    x, w = make_conv(r, CONV_CASES[case], kl, dl, "uint8", "int8")
    oc = CONV_CASES[case][1]
    kzp = r.integers(-3, 4, oc).astype(np.int32) if per_channel else np.int32(2)
    ksc = np.full(oc, 0.05, np.float32) if per_channel else np.float32(0.05)
    _, _, kern, st, pad, dil, groups = CONV_CASES[case]
    got = run_op(op_call("qnn.conv2d", 6, strides=st, padding=pad, dilation=dil, groups=groups,
                         channels=oc, kernel_size=list(kern), data_layout=dl, kernel_layout=kl),
                 x, w, np.int32(100), kzp, np.float32(0.1), ksc)[0]
    assert_close(got, conv_ref(x, w, 100, kzp, st, pad, dil, groups, dl, kl, "int32"))


@pytest.mark.parametrize("dtype,wdtype,out_dtype", [
    ("int8", "int8", "int32"), ("int16", "int16", "int64"), ("uint8", "uint8", "int16"),
    ("int16", "int8", None),
])
@pytest.mark.parametrize("out_layout", ["", "NCHW"])
def test_qnn_conv2d_dtypes(dtype, wdtype, out_dtype, out_layout):
    r = rng("convdt", dtype, wdtype, out_dtype, out_layout)
    x, w = make_conv(r, CONV_CASES[1], "HWIO", "NHWC", dtype, wdtype)
    kw = dict(strides=[2, 1], padding=[1, 2], groups=2, data_layout="NHWC", kernel_layout="HWIO",
              out_layout=out_layout)
    if out_dtype:
        kw["out_dtype"] = out_dtype
    got = run_op(op_call("qnn.conv2d", 6, **kw), x, w, np.int32(-7), np.int32(3), np.float32(0.1),
                 np.float32(0.2))[0]
    assert_close(got, conv_ref(x, w, -7, 3, [2, 1], [1, 2], [1, 1], 2, "NHWC", "HWIO",
                               out_dtype or "int32", out_layout or "NHWC"))


@pytest.mark.parametrize("mult", [1, 2])
def test_qnn_conv2d_depthwise_hwoi(mult):
    r = rng("convdw", mult)
    x = qdata(r, "uint8", (1, 5, 6, 3))
    w = qdata(r, "int8", (3, 3, 3, mult))  # HWOI: O holds the input channels, I the multiplier
    kzp = r.integers(-2, 3, 3 * mult).astype(np.int32)
    got = run_op(op_call("qnn.conv2d", 6, padding=[1, 1], groups=3, data_layout="NHWC",
                         kernel_layout="HWOI"), x, w, np.int32(128), kzp, np.float32(0.1),
                 np.full(3 * mult, 0.1, np.float32))[0]
    assert_close(got, conv_ref(x, w, 128, kzp, [1, 1], [1, 1], [1, 1], 3, "NHWC", "HWOI",
                               "int32"))


def test_qnn_conv2d_known():
    x = np.full((1, 1, 3, 3), 10, dtype=np.uint8)
    w = np.full((1, 1, 2, 2), 3, dtype=np.int8)
    got = run_op(op_call("qnn.conv2d", 6), x, w, np.int32(8), np.int32(1), np.float32(1.0),
                 np.float32(1.0))[0]
    assert_close(got, np.full((1, 1, 2, 2), 4 * (10 - 8) * (3 - 1), dtype=np.int32))


# ==== qnn.dense ==================================================================================


def dense_ref(x, w, izp, kzp, out_dtype):
    kz = np.broadcast_to(np.asarray(kzp, np.int64).reshape(-1), (w.shape[0],))
    out = (x.astype(np.int64) - int(izp)) @ (w.astype(np.int64) - kz[:, None]).T
    return wrap_to(out, out_dtype)


@pytest.mark.parametrize("dtype,wdtype", [("uint8", "int8"), ("int8", "int8"),
                                          ("int16", "uint8"), ("uint16", "int8")])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("shape", [(3, 7), (2, 2, 5), (6,)])
@pytest.mark.parametrize("out_dtype", [None, "int64"])
def test_qnn_dense(dtype, wdtype, per_channel, shape, out_dtype):
    r = rng("dense", dtype, wdtype, per_channel, shape, out_dtype)
    x = qdata(r, dtype, shape)
    w = qdata(r, wdtype, (4, shape[-1]))
    kzp = r.integers(-5, 5, 4).astype(np.int32) if per_channel else np.int32(-2)
    ksc = np.full(4, 0.5, np.float32) if per_channel else np.float32(0.5)
    kw = dict(units=4)
    if out_dtype:
        kw["out_dtype"] = out_dtype
    got = run_op(op_call("qnn.dense", 6, **kw), x, w, np.int32(12), kzp, np.float32(0.1), ksc)[0]
    assert_close(got, dense_ref(x, w, 12, kzp, out_dtype or "int32"))


# ==== qnn.add / subtract / mul ===================================================================


def side_values(q, scale, zp, axis):
    """(values, scales, zero points) per element of one operand (axis 0 for rank <= 1)."""
    ax = 0 if q.ndim <= 1 else axis
    chan = per_axis(scale if np.ndim(scale) else zp, q.shape, ax)
    s = np.zeros(q.shape, dtype=np.float32)
    z = np.zeros(q.shape, dtype=np.int64)
    for idx in np.ndindex(*q.shape):
        s[idx] = pick(scale, chan(idx))
        z[idx] = pick(zp, chan(idx))
    return q.astype(np.int64), s, z


def binary_ref(op, a, b, sa, za, sb, zb, so, zo, lhs_axis=-1, rhs_axis=-1):
    dtype = a.dtype.name
    va, sa_, za_ = side_values(a, sa, za, lhs_axis)
    vb, sb_, zb_ = side_values(b, sb, zb, rhs_axis)
    va, sa_, za_, vb, sb_, zb_ = np.broadcast_arrays(va, sa_, za_, vb, sb_, zb_)
    out = np.zeros(va.shape, dtype=dtype)
    for idx in np.ndindex(*va.shape):
        if op == "mul":
            la = wrap32(wrap32(va[idx]) - int(za_[idx]))
            lb = wrap32(wrap32(vb[idx]) - int(zb_[idx]))
            prod = wrap32(la * lb)
            s_new = np.float32(sa_[idx]) * np.float32(sb_[idx])
            v = requant_one(prod, s_new, 0, so, zo)
        else:
            qa = requant_one(int(va[idx]), sa_[idx], za_[idx], so, zo)
            qb = requant_one(int(vb[idx]), sb_[idx], zb_[idx], so, zo)
            v = wrap32(wrap32(qa + qb) - int(zo)) if op == "add" else \
                wrap32(wrap32(qa - qb) + int(zo))
        out[idx] = clip(v, dtype)
    return out


BIN_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((1, 4), (3, 1)), ((), (2, 3)), ((5,), ())]


@pytest.mark.parametrize("op", ["add", "subtract", "mul"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32"])
@pytest.mark.parametrize("shapes", range(len(BIN_SHAPES)))
def test_qnn_binary(op, dtype, shapes):
    r = rng("bin", op, dtype, shapes)
    sa_shape, sb_shape = BIN_SHAPES[shapes]
    a, b = qdata(r, dtype, sa_shape), qdata(r, dtype, sb_shape)
    sa, sb, so = np.float32(0.07), np.float32(0.13), np.float32(0.1 if op != "mul" else 0.9)
    za, zb, zo = np.int32(3), np.int32(-2), np.int32(5 if dtype != "uint8" else 120)
    got = run_op(op_call("qnn." + op, 8), a, b, sa, za, sb, zb, so, zo)[0]
    want = binary_ref("add" if op == "add" else "sub" if op == "subtract" else "mul", a, b, sa,
                      za, sb, zb, so, zo)
    assert_close(got, want)


@pytest.mark.parametrize("op", ["add", "subtract", "mul"])
@pytest.mark.parametrize("lhs_axis,rhs_axis", [(1, -1), (-1, 0), (0, 1)])
def test_qnn_binary_per_channel(op, lhs_axis, rhs_axis):
    r = rng("binpc", op, lhs_axis, rhs_axis)
    a = qdata(r, "int8", (3, 4))
    b = qdata(r, "int8", (3, 4))
    da, db = a.shape[lhs_axis], b.shape[rhs_axis]
    sa = r.uniform(0.01, 0.2, da).astype(np.float32)
    za = r.integers(-4, 4, da).astype(np.int32)
    sb = r.uniform(0.01, 0.2, db).astype(np.float32)
    zb = r.integers(-4, 4, db).astype(np.int32)
    so, zo = np.float32(0.15 if op != "mul" else 0.01), np.int32(-1)
    got = run_op(op_call("qnn." + op, 8, lhs_axis=lhs_axis, rhs_axis=rhs_axis), a, b, sa, za, sb,
                 zb, so, zo)[0]
    want = binary_ref({"add": "add", "subtract": "sub", "mul": "mul"}[op], a, b, sa, za, sb, zb,
                      so, zo, lhs_axis, rhs_axis)
    assert_close(got, want)


def test_qnn_add_axis_ignored_for_scalar_params():
    a = np.array([[1, 2], [3, 4]], dtype=np.int8)
    got = run_op(op_call("qnn.add", 8, lhs_axis=9, rhs_axis=-9), a, a, np.float32(0.5),
                 np.int32(0), np.float32(0.5), np.int32(0), np.float32(0.5), np.int32(0))[0]
    assert_close(got, a * 2)


def test_qnn_add_same_params_is_saturating_add():
    a = np.array([100, -100, 50, 0], dtype=np.int8)
    b = np.array([100, -100, -60, 7], dtype=np.int8)
    s, z = np.float32(0.5), np.int32(0)
    got = run_op(op_call("qnn.add", 8), a, b, s, z, s, z, s, z)[0]
    assert_close(got, np.array([127, -128, -10, 7], dtype=np.int8))


def test_qnn_mul_known():
    a = np.array([10, 20], dtype=np.uint8)
    b = np.array([4, 6], dtype=np.uint8)
    # (10-2)*(4-0) * (0.5*0.25)/0.5 + 1 = 9 ; (20-2)*(6-0)*0.25 + 1 = 28
    got = run_op(op_call("qnn.mul", 8), a, b, np.float32(0.5), np.int32(2), np.float32(0.25),
                 np.int32(0), np.float32(0.5), np.int32(1))[0]
    assert_close(got, np.array([9, 28], dtype=np.uint8))


# ==== qnn.concatenate ============================================================================


def concat_ref(xs, scales, zps, so, zo, axis):
    parts = []
    for x, s, z in zip(xs, scales, zps):
        if np.float32(s) == np.float32(so) and int(z) == int(zo):
            parts.append(x)
            continue
        y = np.zeros(x.shape, dtype=x.dtype)
        for idx in np.ndindex(*x.shape):
            y[idx] = clip(requant_one(int(x[idx]), s, z, so, zo), x.dtype.name)
        parts.append(y)
    return np.concatenate(parts, axis=axis)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("same", [False, True])
def test_qnn_concatenate(dtype, axis, same):
    r = rng("cat", dtype, axis, same)
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    shapes = [tuple(s[d] + (k if d == axis % 3 else 0) for d in range(3))
              for k, s in enumerate(shapes)]
    xs = [qdata(r, dtype, s) for s in shapes]
    so, zo = np.float32(0.25), np.int32(3)
    if same:
        scales = [so, so, np.float32(0.5)]
        zps = [zo, zo, np.int32(1)]
    else:
        scales = [np.float32(v) for v in r.uniform(0.05, 1.0, 3)]
        zps = [np.int32(v) for v in r.integers(-5, 5, 3)]
    got = run_op(op_call("qnn.concatenate", 5, axis=axis), xs, scales, zps, so, zo)[0]
    assert_close(got, concat_ref(xs, scales, zps, so, zo, axis))


def test_qnn_concatenate_single_input():
    x = np.array([[1, 2], [3, 4]], dtype=np.int8)
    got = run_op(op_call("qnn.concatenate", 5, axis=1), [x], [np.float32(0.5)], [np.int32(0)],
                 np.float32(0.25), np.int32(0))[0]
    assert_close(got, np.array([[2, 4], [6, 8]], dtype=np.int8))


# ==== errors =====================================================================================


def test_requantize_zero_output_scale():
    err = run_op_error(op_call("qnn.requantize", 5), np.zeros(3, np.int32), np.float32(1.0),
                       np.int32(0), np.float32(0.0), np.int32(0))
    assert "output_scale" in err
