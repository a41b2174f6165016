"""test_ops_reduce.py - the reductions (src/ops/op_reduce.c, src/kernels/ref/reduce.c) against
numpy references, through `rly run`.

Every reduction is covered over its dtypes and the axis attributes (None, [], single, several,
negative, exclude, keepdims), rank-0 and size-0 inputs, and the cases chosen in the kernels:
empty reductions (identities; max/min the dtype's lowest/highest), integer mean (exact sum,
truncating division), NaN in max/min/argmax/argmin,
select_last_index, unbiased variance, logsumexp with infinities.
"""
import numpy as np
import pytest

from harness import (FLOATS, INTS, NUMERIC, assert_close, case_rng, check, rand_array, run_op,
                     run_op_error)

SEED = 5150

TOL = {"float16": (3e-3, 3e-3), "float32": (2e-6, 1e-6), "float64": (1e-12, 1e-12)}

# (axis, exclude, keepdims) on a (2, 3, 4) tensor.
AXES = [
    (None, False, False),
    (None, False, True),
    ([], False, False),
    ([1], False, False),
    ([1], False, True),
    ([-1], False, False),
    ([0, 2], False, False),
    ([2, 0], False, True),
    ([1], True, False),
    ([0, -1], True, True),
    ([], True, False),
    ([0, 1, 2], False, False),
]
AXES_IDS = ["%s%s%s" % (a, "-excl" if e else "", "-keep" if k else "") for a, e, k in AXES]


def rng_for(*key):
    return case_rng(SEED, *key)


def rand(shape, dtype, key, lo=None, hi=None):
    """Random data; lo, hi bound integers and floats (floats in [-5, 5) by default)."""
    floats = (-5, 5) if lo is None else (lo, hi)
    return rand_array(rng_for(shape, dtype, key, lo, hi), shape, dtype, floats, (lo, hi))


def reduced_axes(ndim, axis, exclude):
    """The reduced axes as TVM's ReduceAttrs define them (a sorted tuple)."""
    if axis is None or len(axis) == 0:
        return tuple(range(ndim))
    given = {a % ndim for a in axis}
    if exclude:
        return tuple(d for d in range(ndim) if d not in given)
    return tuple(sorted(given))


def attr_text(axis, exclude, keepdims, extra=""):
    s = "axis=None" if axis is None else "axis=[%s]" % ", ".join(str(a) for a in axis)
    if exclude:
        s += ", exclude=True"
    if keepdims:
        s += ", keepdims=True"
    return s + extra


def finish(r, x, axes, keepdims):
    """numpy's result over `axes` -> the op's shape (keepdims or not)."""
    r = np.asarray(r)
    if keepdims:
        for a in axes:
            r = np.expand_dims(r, a)
    return r


# ---- sum, prod, mean, max, min --------------------------------------------------------------


def int_mean(x, axes):
    """Exact sum (in Python ints) divided by the count, truncating toward zero."""
    moved = np.moveaxis(x, axes, list(range(x.ndim - len(axes), x.ndim)))
    kept = moved.shape[: x.ndim - len(axes)]
    flat = moved.reshape(kept + (-1,))
    out = np.empty(kept, dtype=object)
    n = flat.shape[-1]
    for idx in np.ndindex(*kept):
        s = sum(int(v) for v in flat[idx])
        q = abs(s) // n
        out[idx] = q if s >= 0 else -q
    return out.astype(x.dtype) if kept else np.array(out[()], dtype=x.dtype)


def reduce_ref(op, x, axes, dtype):
    if dtype in FLOATS:
        x64 = x.astype(np.float64)
        f = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min}[op]
        return np.asarray(f(x64, axis=axes)).astype(dtype)
    if op == "mean":
        return int_mean(x, axes)
    if op in ("sum", "prod"):
        with np.errstate(all="ignore"):
            return np.asarray(getattr(np, op)(x, axis=axes, dtype=x.dtype))
    return np.asarray(getattr(np, op)(x, axis=axes))


def reduce_input(op, dtype, shape):
    if op == "prod":
        if dtype in FLOATS:
            return rand(shape, dtype, op, 0.5, 1.8)
        return rand(shape, dtype, op, -3, 3)
    if op == "mean" and dtype in ("int64", "uint64"):  # the exact sum must fit in 64 bits
        return rand(shape, dtype, op, -(2**58), 2**58)
    return rand(shape, dtype, op)


@pytest.mark.parametrize("attrs", AXES, ids=AXES_IDS)
@pytest.mark.parametrize("op", ["sum", "prod", "mean", "max", "min"])
def test_reduce_axes(op, attrs):
    axis, exclude, keepdims = attrs
    for dtype in ["float32", "int32"]:
        x = reduce_input(op, dtype, (2, 3, 4))
        axes = reduced_axes(3, axis, exclude)
        (got,) = run_op("%s({0}, %s)" % (op, attr_text(axis, exclude, keepdims)), x)
        check(got, finish(reduce_ref(op, x, axes, dtype), x, axes, keepdims), dtype, TOL)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", ["sum", "prod", "mean", "max", "min"])
def test_reduce_dtypes(op, dtype):
    x = reduce_input(op, dtype, (3, 5, 2))
    for axis in ([1], None):
        axes = reduced_axes(3, axis, False)
        (got,) = run_op("%s({0}, %s)" % (op, attr_text(axis, False, False)), x)
        check(got, reduce_ref(op, x, axes, dtype), dtype, TOL)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_bool(op):
    x = rand((4, 3), "bool", op)
    x[0] = [True, False, True]
    (got,) = run_op("%s({0}, axis=[0])" % op, x)
    assert_close(got, getattr(np, op)(x, axis=0))


@pytest.mark.parametrize("op", ["sum", "prod", "mean", "max", "min"])
@pytest.mark.parametrize("dtype", ["float64", "int16"])
def test_reduce_scalar(op, dtype):
    x = np.array(3, dtype=dtype)
    for text in ["%s({0})", "%s({0}, keepdims=True)", "%s({0}, axis=[])"]:
        (got,) = run_op(text % op, x)
        assert_close(got, x)


def test_sum_wraps_in_dtype():
    x = np.array([100, 100, 100], dtype="int8")
    (got,) = run_op("sum({0})", x)
    assert_close(got, np.array(300 - 256, dtype="int8"))


def test_mean_int_exact_sum_truncates():
    """The sum is exact (no int8 overflow) and the division truncates toward zero."""
    x = np.array([[100, 100, 101], [-100, -100, -101], [-1, -1, 0]], dtype="int8")
    (got,) = run_op("mean({0}, axis=[1])", x)
    assert_close(got, np.array([100, -100, 0], dtype="int8"))


@pytest.mark.parametrize("op", ["sum", "prod", "mean", "max", "min"])
def test_reduce_empty_output(op):
    """A size-0 kept axis: an empty result, no error even for max/min."""
    x = np.zeros((0, 3), dtype="float32")
    (got,) = run_op("%s({0}, axis=[1])" % op, x)
    assert got.shape == (0,) and got.dtype == np.float32


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("op", ["sum", "prod", "mean"])
def test_reduce_empty_axis(op, dtype):
    x = np.zeros((0, 3), dtype=dtype)
    if op == "mean" and dtype == "int32":
        assert "division by zero" in run_op_error("mean({0}, axis=[0])", x)
        return
    (got,) = run_op("%s({0}, axis=[0])" % op, x)
    want = {"sum": 0, "prod": 1, "mean": np.nan}[op]
    assert_close(got, np.full((3,), want, dtype=dtype))


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint8", "bool"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_reduce_empty_axis_extreme(op, dtype):
    """max/min over an empty axis: the dtype's lowest/highest (-inf/+inf), as ONNX-20 and TVM."""
    x = np.zeros((0, 3), dtype=dtype)
    (got,) = run_op("%s({0}, axis=[0])" % op, x)
    if dtype == "bool":
        want = op == "min"
    elif dtype == "float32":
        want = -np.inf if op == "max" else np.inf
    else:
        want = np.iinfo(dtype).min if op == "max" else np.iinfo(dtype).max
    assert_close(got, np.full((3,), want, dtype=dtype))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_reduce_empty_axis_error(op):
    x = np.zeros((0, 3), dtype="float32")
    assert "empty" in run_op_error("%s({0}, axis=[0])" % op, x)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_nan(op):
    x = np.array([[1.0, np.nan, 3.0], [2.0, 5.0, -1.0], [np.nan, np.nan, 0.0]], dtype="float32")
    (got,) = run_op("%s({0}, axis=[1])" % op, x)
    assert_close(got, getattr(np, op)(x, axis=1))


# ---- all, any --------------------------------------------------------------------------------


@pytest.mark.parametrize("attrs", AXES, ids=AXES_IDS)
@pytest.mark.parametrize("op", ["all", "any"])
def test_all_any(op, attrs):
    axis, exclude, keepdims = attrs
    x = rand((2, 3, 4), "bool", op)
    x[0, 0, :] = op == "all"  # a full row, so both outcomes occur
    axes = reduced_axes(3, axis, exclude)
    (got,) = run_op("%s({0}, %s)" % (op, attr_text(axis, exclude, keepdims)), x)
    assert_close(got, finish(getattr(np, op)(x, axis=axes), x, axes, keepdims))


@pytest.mark.parametrize("shape", [(), (0,), (0, 4), (5, 0)])
@pytest.mark.parametrize("op", ["all", "any"])
def test_all_any_shapes(op, shape):
    x = np.ones(shape, dtype=bool)
    (got,) = run_op("%s({0})" % op, x)
    assert_close(got, np.asarray(getattr(np, op)(x)))
    if len(shape) == 2:
        (got,) = run_op("%s({0}, axis=[1])" % op, x)
        assert_close(got, getattr(np, op)(x, axis=1))


# ---- argmax, argmin ----------------------------------------------------------------------------


def arg_ref(op, x, axes, last, keepdims):
    """Index into the row-major flattening of the reduced axes; first (or last) extreme."""
    moved = np.moveaxis(x, axes, list(range(x.ndim - len(axes), x.ndim)))
    kept = moved.shape[: x.ndim - len(axes)]
    flat = moved.reshape(kept + (-1,))
    f = getattr(np, op)
    if last:
        n = flat.shape[-1]
        r = n - 1 - f(flat[..., ::-1], axis=-1)
    else:
        r = f(flat, axis=-1)
    return finish(np.asarray(r).astype("int32"), x, axes, keepdims)


@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("attrs", AXES, ids=AXES_IDS)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_axes(op, attrs, last):
    axis, exclude, keepdims = attrs
    x = rand((2, 3, 4), "int8", op, -3, 3)  # small range: ties
    axes = reduced_axes(3, axis, exclude)
    extra = ", select_last_index=True" if last else ""
    (got,) = run_op("%s({0}, %s)" % (op, attr_text(axis, exclude, keepdims, extra)), x)
    assert_close(got, arg_ref(op, x, axes, last, keepdims))


@pytest.mark.parametrize("dtype", ["bool"] + NUMERIC)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_dtypes(op, dtype):
    x = rand((3, 6), dtype, op)
    if dtype in INTS:
        x[0, 2] = np.iinfo(dtype).max
        x[1, 4] = np.iinfo(dtype).min
    for last in (False, True):
        extra = ", select_last_index=True" if last else ""
        (got,) = run_op("%s({0}, axis=[1]%s)" % (op, extra), x)
        assert_close(got, arg_ref(op, x, (1,), last, False))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_nan(op):
    """NaN is the extreme both ways: the first NaN wins (numpy), the last with
    select_last_index."""
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, -1.0, 5.0]], dtype="float32")
    (got,) = run_op("%s({0}, axis=[1])" % op, x)
    assert_close(got, getattr(np, op)(x, axis=1).astype("int32"))
    (got,) = run_op("%s({0}, axis=[1], select_last_index=True)" % op, x)
    want = {"argmax": [3, 3], "argmin": [3, 2]}[op]
    assert_close(got, np.array(want, dtype="int32"))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_1d(op):
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], dtype="float64")
    (got,) = run_op("%s({0})" % op, x)
    assert_close(got, np.array(getattr(np, op)(x), dtype="int32"))
    (got,) = run_op("%s({0}, axis=[0], keepdims=True)" % op, x)
    assert_close(got, np.array([getattr(np, op)(x)], dtype="int32"))


# ---- variance, std -------------------------------------------------------------------------------


def moment_ref(x, m, axes, unbiased, is_std):
    x64, m64 = x.astype(np.float64), m.astype(np.float64)
    n = int(np.prod([x.shape[a] for a in axes]))
    with np.errstate(all="ignore"):
        v = np.sum((x64 - m64) ** 2, axis=axes) / max(n - int(unbiased), 0)
        return np.sqrt(v) if is_std else v


@pytest.mark.parametrize("unbiased", [False, True])
@pytest.mark.parametrize("attrs", AXES, ids=AXES_IDS)
@pytest.mark.parametrize("op", ["variance", "std"])
def test_moment_axes(op, attrs, unbiased):
    axis, exclude, keepdims = attrs
    x = rand((2, 3, 4), "float32", op)
    axes = reduced_axes(3, axis, exclude)
    m = np.mean(x.astype(np.float64), axis=axes, keepdims=True).astype("float32")
    extra = ", unbiased=True" if unbiased else ""
    (got,) = run_op("%s({0}, {1}, %s)" % (op, attr_text(axis, exclude, keepdims, extra)), x, m)
    want = finish(moment_ref(x, m, axes, unbiased, op == "std"), x, axes, keepdims)
    check(got, want.astype("float32"), "float32", TOL)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_variance_dtypes(dtype):
    if dtype in FLOATS:
        x = rand((4, 6), dtype, "var")
        m = np.mean(x.astype(np.float64), axis=1, keepdims=True).astype(dtype)
    else:
        x = rand((4, 6), dtype, "var", 0, 100)
        m = np.array([[50], [10], [0], [90]], dtype=dtype)
    (got,) = run_op("variance({0}, {1}, axis=[1])", x, m)
    if dtype in FLOATS:
        check(got, moment_ref(x, m, (1,), False, False).astype(dtype), dtype, TOL)
    else:
        d = x.astype(np.int64) - m.astype(np.int64)
        assert_close(got, (np.sum(d * d, axis=1) // 6).astype(dtype))  # truncating (>= 0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_std_dtypes(dtype):
    x = rand((5, 4), dtype, "std")
    m = np.mean(x.astype(np.float64), axis=0, keepdims=True).astype(dtype)
    for unbiased in (False, True):
        extra = ", unbiased=True" if unbiased else ""
        (got,) = run_op("std({0}, {1}, axis=[0]%s)" % extra, x, m)
        check(got, moment_ref(x, m, (0,), unbiased, True).astype(dtype), dtype, TOL)


def test_variance_full_mean():
    """mean need not be reduced: it may have data's full shape."""
    x = rand((3, 4), "float64", "full")
    m = rand((3, 4), "float64", "fullm")
    (got,) = run_op("variance({0}, {1}, axis=[1])", x, m)
    assert_close(got, np.sum((x - m) ** 2, axis=1) / 4, rtol=1e-12)


def test_variance_unbiased_single_element():
    x = np.array([[2.0], [3.0]], dtype="float32")
    (got,) = run_op("variance({0}, {1}, axis=[1], unbiased=True)", x, x)
    assert_close(got, np.array([np.nan, np.nan], dtype="float32"))
    xi = x.astype("int32")
    assert "division by zero" in run_op_error(
        "variance({0}, {1}, axis=[1], unbiased=True)", xi, xi)


# ---- logsumexp --------------------------------------------------------------------------------


def lse_ref(x, axes):
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        m = np.max(x64, axis=axes, keepdims=True) if x.size else np.array(-np.inf)
        mf = np.where(np.isfinite(m), m, 0.0)
        s = np.log(np.sum(np.exp(x64 - mf), axis=axes, keepdims=True)) + mf
        s = np.where(np.isfinite(m), s, m)
    return np.squeeze(s, axis=axes) if axes else s


LSE_AXES = [(None, False), ([1], False), ([1], True), ([-1, 0], False), ([0], True)]


@pytest.mark.parametrize("attrs", LSE_AXES, ids=["%s%s" % (a, "-keep" if k else "")
                                                 for a, k in LSE_AXES])
@pytest.mark.parametrize("dtype", FLOATS)
def test_logsumexp(dtype, attrs):
    axis, keepdims = attrs
    x = rand((2, 3, 4), dtype, "lse", -20, 20)
    axes = reduced_axes(3, axis, False)
    (got,) = run_op("logsumexp({0}, %s)" % attr_text(axis, False, keepdims), x)
    check(got, finish(lse_ref(x, axes), x, axes, keepdims).astype(dtype), dtype, TOL)


def test_logsumexp_large_and_infinite():
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf], [np.inf, 1.0], [-np.inf, 0.0]],
                 dtype="float32")
    (got,) = run_op("logsumexp({0}, axis=[1])", x)
    assert_close(got, np.array([1000 + np.log(2), -np.inf, np.inf, 0.0], dtype="float32"))


def test_logsumexp_empty():
    x = np.zeros((0, 3), dtype="float32")
    (got,) = run_op("logsumexp({0}, axis=[0])", x)
    assert_close(got, np.full((3,), -np.inf, dtype="float32"))


# ---- bfloat16 (through cast: npz has no bfloat16) -------------------------------------------


def bf16_round(x):
    """float64 -> float32 -> bfloat16 (round to nearest even), returned as float64."""
    b = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return b.view(np.float32).astype(np.float64)


BF16_RED = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
            "logsumexp": lambda v, axis: lse_ref(v, axis)}


@pytest.mark.parametrize("op", sorted(BF16_RED))
def test_bfloat16(op):
    x = rand((3, 4), "float32", "bf16" + op, 0.5, 1.5)
    (got,) = run_op('cast(%s(cast({0}, dtype="bfloat16"), axis=[1]), dtype="float32")' % op, x)
    want = bf16_round(BF16_RED[op](bf16_round(x), axis=(1,))).astype("float32")
    assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_bfloat16_arg(op):
    x = rand((3, 4), "float32", "bf16" + op)
    (got,) = run_op('%s(cast({0}, dtype="bfloat16"), axis=[1])' % op, x)
    assert_close(got, getattr(np, op)(bf16_round(x), axis=1).astype("int32"))


def test_bfloat16_variance_std():
    x = rand((3, 4), "float32", "bf16var")
    rx = bf16_round(x)
    m = bf16_round(np.mean(rx, axis=1, keepdims=True))
    for op in ("variance", "std"):
        call = 'cast(%s(cast({0}, dtype="bfloat16"), cast({1}, dtype="bfloat16"), axis=[1]), ' \
               'dtype="float32")' % op
        (got,) = run_op(call, x, m.astype("float32"))
        want = bf16_round(moment_ref(rx, m, (1,), False, op == "std")).astype("float32")
        assert_close(got, want, rtol=0, atol=0)
