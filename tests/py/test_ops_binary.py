"""test_ops_binary.py - the broadcasting binary operators (src/ops/op_binary.c,
src/kernels/ref/binary.c) against numpy references, through `rly run`.

Every operator is covered over its dtypes and numpy broadcasting (rank 0, size-0 dims, both sides
broadcasting), plus the cases TVM and C define differently from numpy: truncating integer
division and remainder, the most negative integer divided by -1, shifts by out-of-range amounts,
integer powers with negative exponents, NaN in maximum/minimum, bool arithmetic, and the runtime
errors (integer division by zero, `?` dims that do not broadcast).
"""
import numpy as np
import pytest

from harness import (FLOATS, INTS, NUMERIC, SIGNED, RlyError, assert_close, case_rng, check,
                     rand_array, run_op, run_op_error, run_relay)

SEED = 77031

TOL = {"float16": (2e-3, 1e-3), "float32": (1e-6, 1e-6), "float64": (1e-13, 1e-13)}

# (lhs shape, rhs shape): equal, trailing broadcast, both sides broadcasting, scalars, size 0.
BCAST = [
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((4, 1, 3), (2, 1)),
    ((), (3,)),
    ((3, 2), ()),
    ((), ()),
    ((2, 0, 3), (3,)),
    ((0,), (1,)),
    ((1, 3, 1), (2, 1, 4)),
]
SHAPE_IDS = ["%s-%s" % (a, b) for a, b in BCAST]


def rng_for(*key):
    return case_rng(SEED, *key)


def rand(shape, dtype, key, lo=None, hi=None):
    """Random data; lo, hi bound integers and floats (floats in [-10, 10) by default)."""
    floats = (-10, 10) if lo is None else (lo, hi)
    return rand_array(rng_for(shape, dtype, key, lo, hi), shape, dtype, floats, (lo, hi))


# ---- references ---------------------------------------------------------------------------------


def trunc_div(a, b):
    return (a - np.fmod(a, b)) // b


FLOAT_REF = {  # on float64 operands
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "power": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "mod": np.fmod,
    "floor_divide": lambda a, b: np.floor(a / b),
    "floor_mod": lambda a, b: a - np.floor(a / b) * b,
    "trunc_divide": lambda a, b: np.trunc(a / b),
    "trunc_mod": lambda a, b: a - np.trunc(a / b) * b,
}

INT_REF = {  # on operands of the dtype, wrapping as numpy does
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": trunc_div,
    "power": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "mod": np.fmod,
    "floor_divide": np.floor_divide,
    "floor_mod": np.mod,
    "trunc_divide": trunc_div,
    "trunc_mod": np.fmod,
}

DIVISION = ["divide", "mod", "floor_divide", "floor_mod", "trunc_divide", "trunc_mod"]
ARITH = ["add", "subtract", "multiply", "power", "maximum", "minimum"] + DIVISION


def arith_inputs(op, dtype, sa, sb):
    if op == "power":
        if dtype in FLOATS:
            return rand(sa, dtype, "pa", 0.5, 3.0), rand(sb, dtype, "pb", -2.0, 2.0)
        return rand(sa, dtype, "pa", -3, 3), rand(sb, dtype, "pb", 0, 6)
    a, b = rand(sa, dtype, op + "a"), rand(sb, dtype, op + "b")
    if op in DIVISION:
        if dtype in FLOATS:
            b = np.where(np.abs(b) < 0.25, np.asarray(0.5, dtype), b).astype(dtype)
        else:
            b = np.where(b == 0, np.asarray(1, dtype), b).astype(dtype)
            if dtype in SIGNED:  # INT_MIN / -1 is tested on its own
                b = np.where(b == -1, np.asarray(3, dtype), b).astype(dtype)
    return a, b


def arith_ref(op, a, b, dtype):
    if dtype in FLOATS:
        with np.errstate(all="ignore"):
            return FLOAT_REF[op](a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    with np.errstate(all="ignore"):
        return np.asarray(INT_REF[op](a, b)).astype(dtype)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", ARITH)
def test_arith_dtypes(op, dtype):
    sa, sb = (4, 1, 3), (2, 1)
    a, b = arith_inputs(op, dtype, sa, sb)
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    check(got, arith_ref(op, a, b, dtype), dtype, TOL)


@pytest.mark.parametrize("shapes", BCAST, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("op", ARITH)
def test_arith_broadcast(op, dtype, shapes):
    a, b = arith_inputs(op, dtype, *shapes)
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    check(got, arith_ref(op, a, b, dtype), dtype, TOL)


@pytest.mark.parametrize("op", ARITH)
def test_arith_bool(op):
    """Bools are integers 0/1 stored back as != 0: add is or, subtract xor, multiply and."""
    a = np.array([[False, False, True, True]])
    b = np.array([[False, True, False, True]])
    if op in DIVISION:
        b = np.array([[True, True, True, True]])
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    want = arith_ref(op, a.astype(np.int64), b.astype(np.int64), "int64") != 0
    assert_close(got, want)


@pytest.mark.parametrize("op", DIVISION)
@pytest.mark.parametrize("dtype", SIGNED)
def test_int_min_by_minus_one(op, dtype):
    """The most negative value divided by -1 wraps to itself; the remainder is 0."""
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min, -7, 7, -7, 7], dtype=dtype)
    b = np.array([-1, 1, 2, -2, -2, 2], dtype=dtype)
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    quot = {"divide": [info.min, info.min, -3, -3, 3, 3],
            "trunc_divide": [info.min, info.min, -3, -3, 3, 3],
            "floor_divide": [info.min, info.min, -4, -4, 3, 3],
            "mod": [0, 0, -1, 1, -1, 1], "trunc_mod": [0, 0, -1, 1, -1, 1],
            "floor_mod": [0, 0, 1, -1, -1, 1]}[op]
    assert_close(got, np.array(quot, dtype=dtype))


@pytest.mark.parametrize("op", DIVISION)
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint64", "bool"])
def test_int_division_by_zero(op, dtype):
    a = np.array([4, 5, 6], dtype=dtype)
    b = np.array([1, 0, 2], dtype=dtype)
    err = run_op_error("%s({0}, {1})" % op, a, b)
    assert "division by zero" in err


@pytest.mark.parametrize("op", DIVISION)
def test_float_division_by_zero(op):
    """Floats follow IEEE: no error, inf or NaN."""
    a = np.array([1.0, -1.0, 0.0, 2.5], dtype="float32")
    b = np.zeros(4, dtype="float32")
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    check(got, arith_ref(op, a, b, "float32"), "float32", TOL)


@pytest.mark.parametrize("dtype", SIGNED)
def test_power_negative_exponent(dtype):
    """Integer x ** -n is the truncated 1 / x ** n: 1, +-1, 0; 0 ** -n is an error."""
    a = np.array([1, -1, -1, 2, -3, 5, 0], dtype=dtype)
    b = np.array([-3, -3, -2, -1, -2, 0, 0], dtype=dtype)
    (got,) = run_op("power({0}, {1})", a, b)
    assert_close(got, np.array([1, -1, 1, 0, 0, 1, 1], dtype=dtype))
    err = run_op_error("power({0}, {1})", np.array([0], dtype=dtype), np.array([-1], dtype=dtype))
    assert "negative power" in err


@pytest.mark.parametrize("dtype", INTS)
def test_power_wraps(dtype):
    a = np.array([3, 7, 2, 1], dtype=dtype)
    b = np.array([40, 23, 63, 1000], dtype="int64").astype(dtype)
    (got,) = run_op("power({0}, {1})", a, b)
    bits = np.iinfo(dtype).bits
    want = [pow(int(x), int(y), 1 << bits) for x, y in zip(a, b)]
    assert_close(got, np.array(want, dtype=np.uint64).astype(dtype))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_max_min_nan(op, dtype):
    a = np.array([np.nan, 1.0, np.nan, -np.inf, 2.0], dtype=dtype)
    b = np.array([1.0, np.nan, np.nan, 3.0, -0.5], dtype=dtype)
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    assert_close(got, getattr(np, op)(a, b))


# ---- shifts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["left_shift", "right_shift"])
def test_shift(op, dtype):
    """Amounts < 0 or >= the bit width give 0, or -1 for right_shift of a negative (numpy)."""
    bits = np.iinfo(dtype).bits
    a = rand((3, 8), dtype, op)
    a[0, :2] = [np.iinfo(dtype).min, np.iinfo(dtype).max]
    amounts = [0, 1, 3, bits - 1, bits, bits + 5, -1 if dtype in SIGNED else 2, 7]
    b = np.array(amounts, dtype=dtype)
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    assert_close(got, getattr(np, op)(a, b))


@pytest.mark.parametrize("shapes", BCAST, ids=SHAPE_IDS)
@pytest.mark.parametrize("op", ["left_shift", "right_shift"])
def test_shift_broadcast(op, shapes):
    a = rand(shapes[0], "int16", op)
    b = rand(shapes[1], "int16", op, -2, 18)
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    assert_close(got, getattr(np, op)(a, b))


def test_shift_explicit():
    a = np.array([-8, -8, -8, 1, 1, 64], dtype="int8")
    b = np.array([1, 7, 8, 7, 8, -1], dtype="int8")
    (got,) = run_op("right_shift({0}, {1})", a, b)
    assert_close(got, np.array([-4, -1, -1, 0, 0, 0], dtype="int8"))
    (got,) = run_op("left_shift({0}, {1})", a, b)
    assert_close(got, np.array([-16, 0, 0, -128, 0, 0], dtype="int8"))


# ---- logical and bitwise ---------------------------------------------------------------------

LOGIC = {"logical_and": np.logical_and, "logical_or": np.logical_or,
         "logical_xor": np.logical_xor, "bitwise_and": np.bitwise_and,
         "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}


@pytest.mark.parametrize("dtype", ["bool"] + INTS)
@pytest.mark.parametrize("op", sorted(LOGIC))
def test_logic_dtypes(op, dtype):
    a = rand((4, 1, 3), dtype, op + "a", -2, 2)
    b = rand((2, 1), dtype, op + "b", -2, 2)
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    assert_close(got, LOGIC[op](a, b).astype(dtype))


@pytest.mark.parametrize("shapes", BCAST, ids=SHAPE_IDS)
@pytest.mark.parametrize("op", sorted(LOGIC))
def test_logic_broadcast(op, shapes):
    a, b = rand(shapes[0], "bool", op + "a"), rand(shapes[1], "bool", op + "b")
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    assert_close(got, LOGIC[op](a, b))


# ---- comparisons ---------------------------------------------------------------------------

CMP = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less,
       "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal}


def cmp_inputs(dtype, key):
    if dtype in FLOATS:
        vals = np.array([-2.0, -0.0, 0.0, 1.5, np.nan, np.inf, -np.inf], dtype=dtype)
        r = rng_for(dtype, key)
        return r.choice(vals, size=(4, 1, 5)), r.choice(vals, size=(3, 1))
    if dtype == "bool":
        return rand((4, 1, 5), dtype, key + "a"), rand((3, 1), dtype, key + "b")
    info = np.iinfo(dtype)
    vals = np.array([info.min, info.min + 1, 0, 1, 2, info.max - 1, info.max], dtype=dtype)
    r = rng_for(dtype, key)
    return r.choice(vals, size=(4, 1, 5)), r.choice(vals, size=(3, 1))


@pytest.mark.parametrize("dtype", ["bool"] + NUMERIC)
@pytest.mark.parametrize("op", sorted(CMP))
def test_compare_dtypes(op, dtype):
    a, b = cmp_inputs(dtype, op)
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    assert_close(got, CMP[op](a, b))


@pytest.mark.parametrize("shapes", BCAST, ids=SHAPE_IDS)
@pytest.mark.parametrize("op", sorted(CMP))
def test_compare_broadcast(op, shapes):
    a, b = rand(shapes[0], "int8", op, -2, 2), rand(shapes[1], "int8", op + "b", -2, 2)
    (got,) = run_op("%s({0}, {1})" % op, a, b)
    assert_close(got, CMP[op](a, b))


# ---- `?` dims checked at run time ---------------------------------------------------------------

DYN = '#[version = "0.0.5"]\ndef @main(%%x0: %s, %%x1: %s) {\n  %s(%%x0, %%x1)\n}\n'


@pytest.mark.parametrize("op", ["add", "less", "bitwise_and"])
def test_dynamic_dims_incompatible(op):
    text = DYN % ("Tensor[(?,), int32]", "Tensor[(?,), int32]", op)
    with pytest.raises(RlyError) as e:
        run_relay(text, {"x0": np.zeros(4, "int32"), "x1": np.zeros(3, "int32")})
    assert "broadcast" in e.value.stderr


@pytest.mark.parametrize("op", ["add", "multiply", "greater"])
def test_dynamic_dims_compatible(op):
    text = DYN % ("Tensor[(?, 3), float32]", "Tensor[(?, 1), float32]", op)
    a = rand((4, 3), "float32", "dyn")
    b = rand((4, 1), "float32", "dyn2")
    (got,) = run_relay(text, {"x0": a, "x1": b})
    assert_close(got, CMP[op](a, b) if op == "greater" else getattr(np, op)(a, b))


def test_dynamic_dims_one_broadcasts():
    text = DYN % ("Tensor[(?, 3), float32]", "Tensor[(?, 3), float32]", "subtract")
    a = rand((1, 3), "float32", "d1")
    b = rand((5, 3), "float32", "d2")
    (got,) = run_relay(text, {"x0": a, "x1": b})
    assert_close(got, a - b)


# ---- bfloat16 (through cast: npz has no bfloat16) -------------------------------------------


def bf16_round(x):
    """float64 -> float32 -> bfloat16 (round to nearest even), returned as float64."""
    b = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return b.view(np.float32).astype(np.float64)


@pytest.mark.parametrize("op", ARITH + sorted(CMP))
def test_bfloat16(op):
    a, b = arith_inputs(op, "float32", (2, 3), (3,))
    call = '%s(cast({0}, dtype="bfloat16"), cast({1}, dtype="bfloat16"))' % op
    if op not in CMP:
        call = 'cast(%s, dtype="float32")' % call
    (got,) = run_op(call, a, b)
    ra, rb = bf16_round(a), bf16_round(b)
    if op in CMP:
        want = CMP[op](ra, rb)
    else:
        want = bf16_round(FLOAT_REF[op](ra, rb)).astype("float32")
    assert_close(got, want, rtol=0, atol=0)
