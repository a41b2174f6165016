"""test_ops_unary.py - the unary operators (src/ops/op_unary.c, src/kernels/ref/unary.c) against
numpy references, through `rly run`.

Every operator of the unary table is covered over its dtypes, shapes (rank 0, size-0 dims,
several ranks) and attribute combinations. Floats are computed by the kernels in double and
rounded once, so the references compute in float64 and cast; tolerances are per dtype (float16
looser). Where TVM's semantics differ from numpy's (sign of NaN) the reference computes TVM's.
"""
import math

import numpy as np
import pytest

from harness import FLOATS, INTS, NUMERIC, SIGNED, assert_close, case_rng, rand_array, run_op

SEED = 20240611

ALL = ["bool"] + NUMERIC

SHAPES = [(), (0,), (7,), (2, 3), (2, 0, 3), (2, 3, 4)]

# rtol, atol per float dtype: the kernels round a float64 result once; numpy's float64 functions
# may differ from libm by an ulp or so.
TOL = {"float16": (2e-3, 2e-3), "float32": (2e-6, 1e-6), "float64": (1e-12, 1e-13)}


def rng_for(*key):
    """A generator seeded by the fixed SEED and the case, so each case is reproducible alone."""
    return case_rng(SEED, *key)


def rand_float(shape, dtype, lo, hi, *key):
    return rand_array(rng_for("f", shape, dtype, lo, hi, *key), shape, dtype, (lo, hi))


def rand_int(shape, dtype, *key, lo=None, hi=None):
    """Integers over the dtype's whole range (or [lo, hi])."""
    return rand_array(rng_for("i", shape, dtype, lo, hi, *key), shape, dtype, ints=(lo, hi))


def rand_any(shape, dtype, *key):
    if dtype == "bool":
        return rand_array(rng_for("b", shape, *key), shape, dtype)
    if dtype in FLOATS:
        return rand_float(shape, dtype, -10, 10, *key)
    return rand_int(shape, dtype, *key)


def check_float(got, want, dtype):
    rtol, atol = TOL[dtype]
    assert_close(got, want, rtol=rtol, atol=atol)


# ---- transcendental math: float dtypes only -------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])

# op -> (numpy reference on float64, input range inside the domain)
MATH = {
    "log": (np.log, 0.05, 20.0),
    "log2": (np.log2, 0.05, 20.0),
    "log10": (np.log10, 0.05, 20.0),
    "exp": (np.exp, -6.0, 6.0),
    "fast_exp": (np.exp, -6.0, 6.0),
    "erf": (_erf, -3.0, 3.0),
    "fast_erf": (_erf, -3.0, 3.0),
    "sqrt": (np.sqrt, 0.0, 50.0),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), 0.05, 50.0),
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), -12.0, 12.0),
    "tanh": (np.tanh, -5.0, 5.0),
    "fast_tanh": (np.tanh, -5.0, 5.0),
    "sin": (np.sin, -6.0, 6.0),
    "cos": (np.cos, -6.0, 6.0),
    "tan": (np.tan, -1.4, 1.4),
    "sinh": (np.sinh, -5.0, 5.0),
    "cosh": (np.cosh, -5.0, 5.0),
    "asin": (np.arcsin, -0.99, 0.99),
    "acos": (np.arccos, -0.99, 0.99),
    "atan": (np.arctan, -10.0, 10.0),
    "asinh": (np.arcsinh, -10.0, 10.0),
    "acosh": (np.arccosh, 1.01, 10.0),
    "atanh": (np.arctanh, -0.95, 0.95),
}


@pytest.mark.parametrize("shape", [(), (2, 3), (0, 4)])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(MATH))
def test_math(op, dtype, shape):
    ref, lo, hi = MATH[op]
    x = rand_float(shape, dtype, lo, hi, op)
    (got,) = run_op("%s({0})" % op, x)
    want = ref(x.astype(np.float64)).astype(dtype)
    check_float(got, want, dtype)


def sigmoid_ref(v):
    e = np.exp(-np.abs(v))
    return np.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@pytest.mark.parametrize("op", ["sigmoid", "exp", "tanh"])
def test_math_extremes(op):
    """Large magnitudes: no overflow inside sigmoid, inf from exp, +-1 from tanh."""
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype="float32")
    (got,) = run_op("%s({0})" % op, x)
    with np.errstate(over="ignore"):
        ref = {"sigmoid": sigmoid_ref, "exp": np.exp, "tanh": np.tanh}[op]
        want = ref(x.astype(np.float64)).astype("float32")
    assert_close(got, want, rtol=1e-6, atol=0)


def test_math_nan_domain():
    """Outside the domain libm and numpy agree on NaN / inf."""
    x = np.array([-1.0, 0.0, 2.0], dtype="float64")
    with np.errstate(all="ignore"):
        (got,) = run_op("log({0})", x)
        assert_close(got, np.log(x))
        (got,) = run_op("sqrt({0})", x)
        assert_close(got, np.sqrt(x))
        (got,) = run_op("rsqrt({0})", x)
        assert_close(got, 1.0 / np.sqrt(x))
        (got,) = run_op("asin({0})", x)
        assert_close(got, np.arcsin(x))


# ---- rounding, sign, abs, negative: numeric dtypes ------------------------------------------

HALVES = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.4, 0.6, 1.49, -2.51])


def numeric_input(shape, dtype, key):
    if dtype in FLOATS:
        x = rand_float(shape, dtype, -20, 20, key)
        flat = x.reshape(-1)
        k = min(flat.size, HALVES.size)
        flat[:k] = HALVES[:k]  # ties, for round
        return flat.reshape(shape)
    return rand_int(shape, dtype, key)


ROUNDING = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.round}


@pytest.mark.parametrize("shape", [(), (12,), (2, 0), (3, 5)])
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", sorted(ROUNDING))
def test_rounding(op, dtype, shape):
    x = numeric_input(shape, dtype, op)
    (got,) = run_op("%s({0})" % op, x)
    want = ROUNDING[op](x) if dtype in FLOATS else x  # integers pass through unchanged
    assert_close(got, want, rtol=0, atol=0)


def test_round_ties_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e300, -np.inf, np.inf, np.nan])
    (got,) = run_op("round({0})", x)
    assert_close(got, np.array([0, 2, 2, -0.0, -2, -2, 1e300, -np.inf, np.inf, np.nan]))


@pytest.mark.parametrize("shape", [(), (9,), (0, 3), (2, 3, 2)])
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", ["sign", "abs", "negative"])
def test_sign_abs_negative(op, dtype, shape):
    x = numeric_input(shape, dtype, op)
    if dtype in SIGNED and x.size > 1:
        x.reshape(-1)[0] = np.iinfo(dtype).min  # abs and negative wrap here, as numpy
        x.reshape(-1)[1] = 0
    (got,) = run_op("%s({0})" % op, x)
    with np.errstate(over="ignore"):
        want = {"sign": np.sign, "abs": np.abs, "negative": np.negative}[op](x)
    assert_close(got, want, rtol=0, atol=0)


def test_sign_nan_is_zero():
    """TVM computes sign with two selects (x < 0, x > 0): NaN gives 0 (numpy: NaN)."""
    x = np.array([np.nan, -np.inf, -0.0, 0.0, 3.0], dtype="float32")
    (got,) = run_op("sign({0})", x)
    assert_close(got, np.array([0, -1, 0, 0, 1], dtype="float32"))


# ---- logical and bitwise not -------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_logical_not(shape):
    x = rand_any(shape, "bool", "lnot")
    (got,) = run_op("logical_not({0})", x)
    assert_close(got, np.logical_not(x))


@pytest.mark.parametrize("shape", [(), (6,), (2, 0), (2, 3)])
@pytest.mark.parametrize("dtype", ["bool"] + INTS)
def test_bitwise_not(dtype, shape):
    x = rand_any(shape, dtype, "bnot")
    (got,) = run_op("bitwise_not({0})", x)
    assert_close(got, np.invert(x))


# ---- predicates ---------------------------------------------------------------------------

SPECIAL = np.array([0.0, -1.5, np.nan, np.inf, -np.inf, 3e4, -0.0, 1e-3])


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", ["isnan", "isfinite", "isinf"])
def test_predicates(op, dtype):
    if dtype in FLOATS:
        x = SPECIAL.astype(dtype).reshape(2, 4)
    else:
        x = rand_int((2, 4), dtype, op)
    (got,) = run_op("%s({0})" % op, x)
    assert_close(got, {"isnan": np.isnan, "isfinite": np.isfinite, "isinf": np.isinf}[op](x))


@pytest.mark.parametrize("op", ["isnan", "isfinite", "isinf"])
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2)])
def test_predicates_shapes(op, shape):
    x = np.full(shape, np.inf, dtype="float32")
    (got,) = run_op("%s({0})" % op, x)
    assert_close(got, {"isnan": np.isnan, "isfinite": np.isfinite, "isinf": np.isinf}[op](x))


# ---- creators and copy ----------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (0,), (2, 3), (1, 0, 2)])
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["zeros_like", "ones_like", "copy"])
def test_like_and_copy(op, dtype, shape):
    x = rand_any(shape, dtype, op)
    (got,) = run_op("%s({0})" % op, x)
    want = {"zeros_like": np.zeros_like, "ones_like": np.ones_like, "copy": np.copy}[op](x)
    assert_close(got, want, rtol=0, atol=0)


# ---- clip -------------------------------------------------------------------------------------


def relay_float(v):
    """A float attribute in Relay text."""
    if v == np.inf:
        return "inff"
    if v == -np.inf:
        return "-inff"
    return repr(float(v)) + "f"


def cast_bound(v, dtype):
    """clip's bound cast to the dtype: integers truncate toward zero and saturate."""
    if dtype in FLOATS:
        with np.errstate(over="ignore"):
            return np.array(v).astype(dtype)
    info = np.iinfo(dtype)
    if v == np.inf or v >= info.max:
        return info.max
    if v == -np.inf or v <= info.min:
        return info.min
    return int(math.trunc(v))


CLIP_BOUNDS = [(0.0, 6.0), (-1.5, 2.5), (5.0, 1.0), (-1e10, 1e10), (-np.inf, 3.75), (-300.0, 300.0)]


@pytest.mark.parametrize("bounds", CLIP_BOUNDS, ids=lambda b: "%g_%g" % b)
@pytest.mark.parametrize("dtype", NUMERIC)
def test_clip(dtype, bounds):
    lo, hi = bounds
    if dtype in FLOATS:
        x = rand_float((3, 4), dtype, -8, 8, "clip")
    else:
        x = rand_int((3, 4), dtype, "clip", lo=max(-9, np.iinfo(dtype).min), hi=9)
        if x.size:
            x.reshape(-1)[0] = np.iinfo(dtype).max
    (got,) = run_op("clip({0}, a_min=%s, a_max=%s)" % (relay_float(lo), relay_float(hi)), x)
    blo, bhi = cast_bound(lo, dtype), cast_bound(hi, dtype)
    want = np.minimum(np.maximum(x, np.array(blo, dtype=dtype)), np.array(bhi, dtype=dtype))
    assert_close(got, want.astype(dtype), rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(), (0, 3), (5,)])
def test_clip_shapes_and_nan(shape):
    x = rand_float(shape, "float32", -3, 3, "clipnan")
    if x.size:
        x.reshape(-1)[0] = np.nan
    (got,) = run_op("clip({0}, a_min=-1f, a_max=1f)", x)
    assert_close(got, np.clip(x, -1, 1))  # NaN stays NaN


# ---- fixed_point_multiply -----------------------------------------------------------------


def fpm_ref(x, dtype, mult, shift):
    """round(x * mult * 2**(shift - 31)), ties toward +inf, exact, wrapped to the dtype."""
    bits = np.iinfo(dtype).bits
    out = []
    for v in x.reshape(-1).tolist():
        p = int(v) * mult
        if shift > 31:
            r = p << (shift - 31)
        else:
            t = 31 - shift
            r = (p + (1 << (t - 1))) >> t if t > 0 else p
        r &= (1 << bits) - 1
        if np.iinfo(dtype).min < 0 and r >= 1 << (bits - 1):
            r -= 1 << bits
        out.append(r)
    return np.array(out, dtype=dtype).reshape(x.shape)


FPM_ATTRS = [(1073741824, 0), (1395864371, -3), (-1717986918, 2), (2147483647, -31),
             (1 << 30, 33), (-(1 << 31), 1), (12345, 63), (1 << 30, -63), (1 << 29, 31)]


@pytest.mark.parametrize("attrs", FPM_ATTRS, ids=lambda a: "m%d_s%d" % a)
@pytest.mark.parametrize("dtype", INTS)
def test_fixed_point_multiply(dtype, attrs):
    mult, shift = attrs
    info = np.iinfo(dtype)
    x = rand_int((4, 5), dtype, "fpm", lo=max(info.min, -1000), hi=min(info.max, 1000))
    x.reshape(-1)[:4] = [info.max, info.min, 0, 1]
    (got,) = run_op("fixed_point_multiply({0}, multiplier=%d, shift=%d)" % (mult, shift), x)
    assert_close(got, fpm_ref(x, dtype, mult, shift))


def test_fixed_point_multiply_ties():
    """Halves round toward +inf: 3 * 2^30 * 2^-31 = 1.5 -> 2, -1.5 -> -1, -2.5 -> -2."""
    x = np.array([3, -3, -5, 5, 1, -1], dtype="int32")
    (got,) = run_op("fixed_point_multiply({0}, multiplier=1073741824, shift=0)", x)
    assert_close(got, np.array([2, -1, -2, 3, 1, 0], dtype="int32"))


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 1)])
def test_fixed_point_multiply_shapes(shape):
    x = rand_int(shape, "int32", "fpms", lo=-100, hi=100)
    (got,) = run_op("fixed_point_multiply({0}, multiplier=1518500250, shift=1)", x)
    assert_close(got, fpm_ref(x, "int32", 1518500250, 1))


# ---- shape_of, ndarray_size -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [None, "int64", "int8", "uint16"])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 0, 3), (2, 3, 4, 5), (300,)])
def test_shape_of(shape, dtype):
    x = np.zeros(shape, dtype="float32")
    attr = "" if dtype is None else ', dtype="%s"' % dtype
    (got,) = run_op("shape_of({0}%s)" % attr, x)
    dt = dtype or "int32"
    if len(shape) == 0:
        want = np.array(0, dtype=dt)  # a scalar argument gives a scalar (holding 0)
    else:
        want = np.array([d % 2 ** np.iinfo(dt).bits for d in shape]).astype(dt)
    assert_close(got, want)


@pytest.mark.parametrize("dtype", [None, "int64", "uint8"])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 0, 3), (2, 3, 4, 5)])
def test_ndarray_size(shape, dtype):
    x = np.zeros(shape, dtype="int16")
    attr = "" if dtype is None else ', dtype="%s"' % dtype
    (got,) = run_op("ndarray_size({0}%s)" % attr, x)
    dt = dtype or "int32"
    assert_close(got, np.array(int(np.prod(shape)) % 2 ** np.iinfo(dt).bits, dtype=dt))


def test_shape_of_dtypes_of_input():
    for dt in ALL:
        x = np.zeros((3, 1), dtype=dt)
        (got,) = run_op("shape_of({0})", x)
        assert_close(got, np.array([3, 1], dtype="int32"))


# ---- bfloat16 (through cast: npz has no bfloat16) -------------------------------------------


def bf16_round(x):
    """float64 -> float32 -> bfloat16 (round to nearest even), returned as float64."""
    b = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return b.view(np.float32).astype(np.float64)


BF16_OPS = {"exp": (np.exp, -3, 3), "log": (np.log, 0.1, 9), "sqrt": (np.sqrt, 0, 9),
            "tanh": (np.tanh, -3, 3), "sigmoid": (sigmoid_ref, -5, 5), "floor": (np.floor, -9, 9),
            "round": (np.round, -9, 9), "abs": (np.abs, -9, 9), "negative": (np.negative, -9, 9),
            "sin": (np.sin, -3, 3), "erf": (_erf, -2, 2), "rsqrt": (lambda v: 1 / np.sqrt(v), 0.1, 9)}


@pytest.mark.parametrize("op", sorted(BF16_OPS))
def test_bfloat16(op):
    ref, lo, hi = BF16_OPS[op]
    x = rand_float((3, 4), "float32", lo, hi, "bf16", op)
    call = 'cast(%s(cast({0}, dtype="bfloat16")), dtype="float32")' % op
    (got,) = run_op(call, x)
    want = bf16_round(ref(bf16_round(x))).astype("float32")
    assert_close(got, want, rtol=0, atol=0)


def test_bfloat16_clip_and_predicates():
    x = np.array([-3.0, 0.5, np.inf, np.nan, 7.0], dtype="float32")
    (got,) = run_op('cast(clip(cast({0}, dtype="bfloat16"), a_min=-1f, a_max=2f), '
                    'dtype="float32")', x)
    assert_close(got, np.array([-1.0, 0.5, 2.0, np.nan, 2.0], dtype="float32"))
    (got,) = run_op('isnan(cast({0}, dtype="bfloat16"))', x)
    assert_close(got, np.isnan(x))


# ---- annotations and debug (src/kernels/ref/misc.c): identity on tensors and tuples ----------


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint64", "float16", "float64"])
@pytest.mark.parametrize("op", ["annotation.stop_fusion", "annotation.checkpoint", "debug"])
def test_identity_annotations(op, dtype):
    x = rand_any((2, 3), dtype, op)
    (got,) = run_op("%s({0})" % op, x)
    assert_close(got, x, rtol=0, atol=0)


@pytest.mark.parametrize("op", ["annotation.stop_fusion", "annotation.checkpoint", "debug"])
def test_identity_annotations_tuple(op):
    a, b = rand_any((), "float32", op), rand_any((0, 2), "int16", op)
    got = run_op("%s({0})" % op, [a, b])
    assert len(got) == 2
    assert_close(got[0], a, rtol=0, atol=0)
    assert_close(got[1], b)
