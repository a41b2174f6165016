"""test_ops_index.py - the index operators (src/kernels/ref/index.c) against numpy.

Each case runs one operator call through `rly run`. Inputs come from a generator seeded by the
case's own id (zlib.crc32), so every case is reproducible on its own; the base seed is printed
and RLY_SEED overrides it. Out-of-range indices that TVM leaves undefined must fail at run time
with "index I out of range for axis A of size N".
"""
import itertools
import os

import numpy as np
import pytest

from harness import assert_close, case_rng, one, rand_array, run_dyn_error, run_op, run_op_error

SEED = int(os.environ.get("RLY_SEED", "20240601"))
print("test_ops_index: RLY_SEED=%d" % SEED)

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
ALL = ["bool"] + INTS + FLOATS
IDX = ["int32", "int64", "uint8", "int8"]


def rng_for(*key):
    return case_rng(SEED, *key)


def rand(shape, dtype, *key, lo=-50, hi=50):
    """Random data: bools, integers in [lo, hi) (>= 0 for unsigned), floats in [-8, 8)."""
    return rand_array(rng_for(shape, dtype, *key), shape, dtype, (-8.0, 8.0), (lo, hi - 1))


def randint(shape, lo, hi, dtype, *key):
    return rng_for(shape, lo, hi, dtype, *key).integers(lo, hi, size=shape).astype(dtype)


def wrap(v, dtype):
    """A Python integer wrapped to an integer dtype (two's complement), or a float rounded."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.bool_(v != 0)
    if dt.kind == "f":
        return dt.type(v)
    bits = dt.itemsize * 8
    v = int(v) % (1 << bits)
    if dt.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return dt.type(v)


# ---- take -----------------------------------------------------------------------------------


def take_ref(x, ind, axis, bd, mode):
    def norm(i, n):
        if mode == "clip":
            return np.clip(i, 0, n - 1)
        if mode == "wrap":
            return np.mod(i.astype(np.int64), n)
        return i
    if axis is None:
        f = x.ravel()
        return f[norm(ind.astype(np.int64), f.size)]
    axis %= x.ndim
    ind = norm(ind.astype(np.int64), x.shape[axis])
    if bd == 0:
        return np.take(x, ind, axis)
    bshape = x.shape[:bd]
    xb = x.reshape((-1,) + x.shape[bd:])
    ib = ind.reshape((-1,) + ind.shape[bd:])
    outs = [np.take(xb[b], ib[b], axis - bd) for b in range(xb.shape[0])]
    return np.stack(outs).reshape(bshape + outs[0].shape)


TAKES = [
    ((5,), (3,), 0, 0), ((4, 5), (2, 3), 0, 0), ((4, 5), (2, 3), 1, 0), ((4, 5), (6,), -1, 0),
    ((2, 3, 4), (), 1, 0), ((2, 3, 4), (2, 2), 2, 0), ((3, 4, 5), (3, 2), 1, 1),
    ((3, 4, 5), (3, 6), 2, 1), ((2, 3, 4, 5), (2, 3, 2), 2, 2), ((4, 5), (2, 3), None, 0),
    ((3, 4, 5), (3, 2), 2, -1),
]


@pytest.mark.parametrize("xs,is_,axis,bd", TAKES)
@pytest.mark.parametrize("mode", ["clip", "wrap", "fast"])
def test_take(xs, is_, axis, bd, mode):
    x = rand(xs, "float32", "take")
    n = x.size if axis is None else xs[axis]
    lo, hi = (0, n) if mode == "fast" else (-2 * n, 2 * n)
    ind = randint(is_, lo, hi, "int32", "take", xs, axis, mode)
    call = "take({0}, {1}, mode=\"%s\"" % mode
    if axis is not None:
        call += ", axis=%d, batch_dims=%d" % (axis, bd)
    bd = bd + len(is_) if bd < 0 else bd
    assert_close(one(call + ")", x, ind), take_ref(x, ind, axis, bd, mode))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("idt", IDX)
def test_take_dtypes(dtype, idt):
    x = rand((4, 3), dtype, "take-dt")
    ind = np.array([[3, 0], [1, 1], [2, 3]], idt)
    assert_close(one("take({0}, {1}, axis=0)", x, ind), np.take(x, ind.astype(np.int64), 0))


@pytest.mark.parametrize("v", [5, -1, 100])
def test_take_fast_out_of_range(v):
    x = rand((5, 2), "float32", "take-err")
    err = run_op_error('take({0}, {1}, axis=0, mode="fast")', x, np.array([0, v], np.int32))
    assert "index %d out of range for axis 0 of size 5" % v in err


def test_take_empty_axis():
    x = np.zeros((0, 3), np.float32)
    err = run_op_error("take({0}, {1}, axis=0)", x, np.array([0], np.int32))
    assert "out of range" in err


# ---- gather, gather_nd ----------------------------------------------------------------------


def gather_ref(x, ind, axis):
    sl = tuple(slice(0, ind.shape[d]) if d != axis else slice(None) for d in range(x.ndim))
    return np.take_along_axis(x[sl], ind.astype(np.int64), axis)


@pytest.mark.parametrize("xs,is_,axis", [((5,), (3,), 0), ((3, 4), (3, 4), 0), ((3, 4), (3, 2), 1),
                                         ((3, 4), (2, 6), 1), ((2, 3, 4), (2, 3, 4), -1),
                                         ((2, 3, 4), (1, 5, 2), 1), ((2, 3, 4), (2, 3, 1), 0)])
@pytest.mark.parametrize("dtype,idt", [("float32", "int32"), ("int8", "int64"),
                                       ("float16", "uint16"), ("bool", "int32")])
def test_gather(xs, is_, axis, dtype, idt):
    x = rand(xs, dtype, "gather")
    ind = randint(is_, 0, xs[axis], idt, "gather", xs, axis)
    assert_close(one("gather({0}, {1}, axis=%d)" % axis, x, ind), gather_ref(x, ind, axis % len(xs)))


@pytest.mark.parametrize("v", [3, -1])
def test_gather_out_of_range(v):
    x = rand((2, 3), "float32", "gather-err")
    ind = np.array([[0, v], [1, 2]], np.int32)
    assert "index %d out of range for axis 1 of size 3" % v in run_op_error(
        "gather({0}, {1}, axis=1)", x, ind)


def gather_nd_ref(x, ind, bd):
    m = ind.shape[0]
    ys = ind.shape[1:]
    out = np.zeros(ys + x.shape[bd + m:], x.dtype)
    for pos in np.ndindex(*ys):
        coords = tuple(int(c) for c in ind[(slice(None),) + pos])
        out[pos] = x[pos[:bd] + coords]
    return out


@pytest.mark.parametrize("xs,is_,bd", [((4, 5), (2, 3), 0), ((4, 5), (1, 3), 0),
                                       ((4, 5, 6), (2,), 0), ((4, 5, 6), (3, 2, 2), 0),
                                       ((2, 3), (1, 2), 1), ((2, 3, 4), (1, 2), 1),
                                       ((2, 3, 4), (2, 2, 5), 1), ((2, 3, 4, 5), (1, 2, 3), 2)])
@pytest.mark.parametrize("dtype,idt", [("float32", "int32"), ("uint8", "int64")])
def test_gather_nd(xs, is_, bd, dtype, idt):
    x = rand(xs, dtype, "gnd")
    m = is_[0]
    ind = np.stack([randint(is_[1:], 0, xs[bd + r], idt, "gnd", r) for r in range(m)])
    got = one("gather_nd({0}, {1}, batch_dims=%d)" % bd, x, ind)
    assert_close(got, gather_nd_ref(x, ind, bd))


def test_gather_nd_index_rank():
    x = rand((4, 5), "float32", "gnd-ir")
    ind = np.array([[1, 3], [0, 4]], np.int32)
    assert_close(one("gather_nd({0}, {1}, index_rank=2)", x, ind), gather_nd_ref(x, ind, 0))


def test_gather_nd_out_of_range():
    x = rand((4, 5), "float32", "gnd-err")
    ind = np.array([[1, 3], [0, 5]], np.int32)
    assert "index 5 out of range for axis 1 of size 5" in run_op_error("gather_nd({0}, {1})", x,
                                                                        ind)


# ---- scatter_elements, scatter_nd -----------------------------------------------------------


def apply_red(a, b, red, dtype):
    dt = np.dtype(dtype)
    if red == "update":
        return b
    if dt.kind == "f":
        a, b = float(a), float(b)
        v = {"add": a + b, "mul": a * b, "mean": (a + b) / 2, "min": min(a, b),
             "max": max(a, b)}[red]
        return dt.type(v)
    a, b = int(a), int(b)
    if red == "mean":
        s = a + b
        v = abs(s) // 2 * (1 if s >= 0 else -1)
    else:
        v = {"add": a + b, "mul": a * b, "min": min(a, b), "max": max(a, b)}[red]
    return wrap(v, dtype)


def scatter_elements_ref(x, ind, upd, axis, red):
    out = x.copy()
    n = x.shape[axis]
    for pos in np.ndindex(*ind.shape):
        v = int(ind[pos])
        v = v + n if v < 0 else v
        tgt = pos[:axis] + (v,) + pos[axis + 1:]
        out[tgt] = apply_red(out[tgt], upd[pos], red, x.dtype)
    return out


@pytest.mark.parametrize("xs,is_,axis", [((6,), (4,), 0), ((3, 4), (2, 4), 0), ((3, 4), (3, 3), 1),
                                         ((2, 3, 4), (2, 2, 4), -1), ((2, 3, 4), (2, 5, 2), 1)])
@pytest.mark.parametrize("red", ["update", "add", "mul", "mean", "min", "max"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int8", "uint16"])
def test_scatter_elements(xs, is_, axis, red, dtype):
    x = rand(xs, dtype, "se", lo=-5, hi=5)
    ax = axis % len(xs)
    n = xs[ax]
    ind = randint(is_, -n, n, "int64", "se", xs, axis)
    if red == "update" and is_[ax] <= n:  # distinct targets along the axis, as TVM requires
        ind = np.zeros(is_, np.int64)
        for pos in np.ndindex(*[d for i, d in enumerate(is_) if i != ax]):
            perm = rng_for("se-perm", pos).permutation(n)[:is_[ax]]
            sl = list(pos)
            sl.insert(ax, slice(None))
            ind[tuple(sl)] = perm
    upd = rand(is_, dtype, "se-upd", lo=-5, hi=5)
    got = one('scatter_elements({0}, {1}, {2}, axis=%d, reduction="%s")' % (axis, red), x, ind,
              upd)
    assert_close(got, scatter_elements_ref(x, ind, upd, ax, red), rtol=1e-5)


def test_scatter_elements_out_of_range():
    x = np.zeros((3, 4), np.float32)
    ind = np.array([[0, 4]], np.int32)
    upd = np.ones((1, 2), np.float32)
    err = run_op_error("scatter_elements({0}, {1}, {2}, axis=1)", x, ind, upd)
    assert "index 4 out of range for axis 1 of size 4" in err
    ind = np.array([[0, -5]], np.int32)
    err = run_op_error("scatter_elements({0}, {1}, {2}, axis=1)", x, ind, upd)
    assert "index -5 out of range for axis 1 of size 4" in err


def scatter_nd_ref(x, ind, upd, mode):
    out = x.copy()
    m = ind.shape[0]
    for pos in np.ndindex(*ind.shape[1:]):
        coords = tuple(int(c) for c in ind[(slice(None),) + pos])
        src = upd[pos]
        tail = out[coords]
        if np.ndim(tail) == 0:
            out[coords] = apply_red(out[coords], src, mode, x.dtype)
        else:
            for z in np.ndindex(*tail.shape):
                out[coords + z] = apply_red(out[coords + z], src[z], mode, x.dtype)
    return out


@pytest.mark.parametrize("xs,is_", [((6,), (1, 4)), ((4, 5), (2, 3)), ((4, 5), (1, 3)),
                                    ((4, 5, 2), (2, 2, 2)), ((4, 5), (2,)), ((3, 4), (1,))])
@pytest.mark.parametrize("mode", ["update", "add", "mul", "min", "max"])
@pytest.mark.parametrize("dtype", ["float64", "int16"])
def test_scatter_nd(xs, is_, mode, dtype):
    x = rand(xs, dtype, "snd", lo=-5, hi=5)
    m = is_[0]
    ind = np.stack([randint(is_[1:], 0, xs[r], "int32", "snd", r) for r in range(m)])
    if mode == "update":  # distinct targets
        flat = rng_for("snd-perm", xs, is_).permutation(int(np.prod(xs[:m])))
        flat = flat[:int(np.prod(is_[1:]))]
        ind = np.array(np.unravel_index(flat, xs[:m]), np.int32).reshape(is_)
    upd = rand(is_[1:] + xs[m:], dtype, "snd-upd", lo=-5, hi=5)
    got = one('scatter_nd({0}, {1}, {2}, mode="%s")' % mode, x, ind, upd)
    assert_close(got, scatter_nd_ref(x, ind, upd, mode))


def test_scatter_nd_out_of_range():
    x = np.zeros((3, 4), np.float32)
    ind = np.array([[0, 3], [1, 1]], np.int64)
    upd = np.ones((2,), np.float32)
    assert "index 3 out of range for axis 0 of size 3" in run_op_error(
        "scatter_nd({0}, {1}, {2})", x, ind, upd)


# ---- adv_index --------------------------------------------------------------------------------


@pytest.mark.parametrize("xs,ishapes", [((5,), [(3,)]), ((4, 5), [(2, 3)]), ((4, 5), [(3,), (3,)]),
                                        ((4, 5, 6), [(2, 1), (1, 3)]), ((4, 5, 6), [(2,), ()]),
                                        ((4, 5, 6), [(2, 2), (2, 2), (2, 2)])])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_adv_index(xs, ishapes, dtype):
    x = rand(xs, dtype, "adv")
    inds = [randint(s, -xs[i], xs[i], "int64", "adv", i) for i, s in enumerate(ishapes)]
    got = one("adv_index({0})", [x] + inds)
    assert_close(got, x[tuple(inds)])


def test_adv_index_out_of_range():
    x = rand((4, 5), "float32", "adv-err")
    err = run_op_error("adv_index({0})", [x, np.array([1, 4], np.int32),
                                          np.array([5, 0], np.int32)])
    assert "index 5 out of range for axis 1 of size 5" in err


# ---- creation: full, full_like, zeros, ones, arange, one_hot ------------------------------


@pytest.mark.parametrize("shape", [[2, 3], [], [0, 4], [5]])
@pytest.mark.parametrize("fill,fdt,dtype", [(3.0, "float32", None), (2.75, "float64", "int32"),
                                            (-7, "int8", None), (5, "int32", "float16"),
                                            (1, "bool", "uint8"), (0.5, "float32", "bool")])
def test_full(shape, fill, fdt, dtype):
    v = np.array(fill, fdt)
    call = "full({0}, shape=%s" % shape + (', dtype="%s"' % dtype if dtype else "") + ")"
    want = np.full(shape, v, dtype or fdt) if dtype != "bool" else np.full(shape, v != 0)
    assert_close(one(call, v), want)


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint64", "bool"])
def test_full_like(dtype):
    x = rand((2, 3), dtype, "full-like")
    v = np.array(1.0, np.float64)
    want = np.full((2, 3), 1, dtype)
    assert_close(one("full_like({0}, {1})", x, np.array(1, dtype)), want)
    if dtype != "bool":
        assert_close(one("full_like({0}, {1})", x, np.array(7, dtype)), np.full((2, 3), 7, dtype))
    del v


@pytest.mark.parametrize("op", ["zeros", "ones"])
@pytest.mark.parametrize("dtype", ALL)
def test_zeros_ones(op, dtype):
    got = one('%s(shape=[2, 3], dtype="%s")' % (op, dtype))
    assert_close(got, getattr(np, op)((2, 3), dtype))


@pytest.mark.parametrize("start,stop,step", [(0, 10, 1), (2, 11, 3), (10, 0, -2), (5, 5, 1),
                                             (5, 0, 1), (-3, 4, 2), (0, 1, 7)])
@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "float32", "float64", "uint16"])
def test_arange(start, stop, step, dtype):
    if np.dtype(dtype).kind == "u" and (start < 0 or stop < 0 or step < 0):
        pytest.skip("negative values in an unsigned dtype")
    a = [np.array(v, dtype) for v in (start, stop, step)]
    got = one("arange({0}, {1}, {2})", *a)
    assert_close(got, np.arange(start, stop, step, dtype=dtype))


@pytest.mark.parametrize("start,stop,step", [(0.0, 1.0, 0.1), (1.5, -2.0, -0.25), (0.0, 3.0, 0.7)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_arange_float(start, stop, step, dtype):
    a = [np.array(v, dtype) for v in (start, stop, step)]
    got = one('arange({0}, {1}, {2}, dtype="%s")' % dtype, *a)
    want = np.arange(a[0], a[1], a[2], dtype=dtype)
    assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_arange_step_zero():
    a = [np.array(v, "int32") for v in (0, 4, 0)]
    assert "step" in run_op_error("arange({0}, {1}, {2})", *a)


def one_hot_ref(ind, on, off, depth, axis, dtype):
    axis = axis % (ind.ndim + 1)
    e = np.expand_dims(ind.astype(np.int64), axis)
    shp = [1] * (ind.ndim + 1)
    shp[axis] = depth
    r = np.arange(depth).reshape(shp)
    return np.where(e == r, on, off).astype(dtype)


@pytest.mark.parametrize("is_,depth,axis", [((4,), 5, -1), ((4,), 3, 0), ((2, 3), 4, -1),
                                            ((2, 3), 4, 1), ((2, 3), 4, 0), ((), 3, 0)])
@pytest.mark.parametrize("odt,dtype", [("float32", None), ("int32", "float32"),
                                       ("int8", None), ("float64", "int64")])
def test_one_hot(is_, depth, axis, odt, dtype):
    ind = randint(is_, -1, depth + 1, "int32", "oh")  # includes indices outside [0, depth)
    on, off = np.array(3, odt), np.array(-1, odt)
    call = "one_hot({0}, {1}, {2}, depth=%d, axis=%d" % (depth, axis)
    call += (', dtype="%s")' % dtype) if dtype else ")"
    assert_close(one(call, ind, on, off), one_hot_ref(ind, on, off, depth, axis, dtype or odt))


# ---- cumsum, cumprod ----------------------------------------------------------------------


def scan_ref(op, x, axis, dtype, exclusive):
    f = np.cumsum if op == "cumsum" else np.cumprod
    if axis is None:
        x, axis = x.ravel(), 0
    x = x.astype(dtype) if dtype else x
    if exclusive:
        ident = np.zeros if op == "cumsum" else np.ones
        shp = list(x.shape)
        shp[axis] = 1
        x = np.concatenate([ident(shp, x.dtype), x], axis)
        x = np.take(x, range(x.shape[axis] - 1), axis)
    with np.errstate(all="ignore"):
        return f(x, axis=axis, dtype=x.dtype)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("dtype,out", [("float32", None), ("int32", None), ("int8", None),
                                       ("int32", "int64"), ("uint8", "float64"),
                                       ("float64", None)])
def test_scan(op, axis, exclusive, dtype, out):
    x = rand((3, 4), dtype, "scan", lo=-3, hi=4)
    call = "%s({0}" % op
    if axis is not None:
        call += ", axis=%d" % axis
    if out:
        call += ', dtype="%s"' % out
    call += ", exclusive=%s)" % exclusive
    assert_close(one(call, x), scan_ref(op, x, axis, out, exclusive), rtol=1e-4, atol=1e-4)


def test_cumsum_3d_wraps():
    x = np.full((2, 40, 3), 100, np.int8)
    assert_close(one("cumsum({0}, axis=1)", x), np.cumsum(x, axis=1, dtype=np.int8))


# ---- sort, argsort, topk, searchsorted ------------------------------------------------------


def argsort_ref(x, axis, ascend):
    if ascend or x.size == 0:
        return np.argsort(x, axis=axis, kind="stable")

    def row(r):
        _, inv = np.unique(r, return_inverse=True)
        return np.argsort(-inv.reshape(r.shape), kind="stable")
    return np.apply_along_axis(row, axis, x)


def sort_data(shape, dtype, key):
    """Random data with ties (and NaNs for floats)."""
    x = rand(shape, dtype, key, lo=-3, hi=4)
    if np.dtype(dtype).kind == "f":
        x = np.round(x).astype(dtype)
        r = rng_for(key, "nan").random(shape) < 0.15
        x[r] = np.nan
    return x


SORT_SHAPES = [((7,), -1), ((3, 5), 0), ((3, 5), 1), ((2, 3, 4), 1), ((2, 3, 4), -1), ((0, 3), 1)]
SORT_DTYPES = ["float32", "int32", "uint8", "int64", "float16", "bool", "uint64"]


@pytest.mark.parametrize("shape,axis", SORT_SHAPES)
@pytest.mark.parametrize("ascend", [True, False])
@pytest.mark.parametrize("dtype", SORT_DTYPES)
def test_argsort(shape, axis, ascend, dtype):
    x = sort_data(shape, dtype, "argsort")
    got = one("argsort({0}, axis=%d, is_ascend=%s)" % (axis, ascend), x)
    assert_close(got, argsort_ref(x, axis, ascend).astype(np.int32))


@pytest.mark.parametrize("shape,axis", SORT_SHAPES[:5])
@pytest.mark.parametrize("ascend", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int16", "float64"])
def test_sort(shape, axis, ascend, dtype):
    x = sort_data(shape, dtype, "sort")
    got = one("sort({0}, axis=%d, is_ascend=%s)" % (axis, ascend), x)
    assert_close(got, np.take_along_axis(x, argsort_ref(x, axis, ascend), axis))


def test_argsort_int64_dtype():
    x = np.array([3, 1, 2, 1], np.int32)
    got = one('argsort({0}, dtype="int64")', x)
    assert_close(got, np.array([1, 3, 2, 0], np.int64))


@pytest.mark.parametrize("shape,axis,k", [((7,), -1, 3), ((3, 5), 1, 2), ((3, 5), 0, 3),
                                          ((2, 3, 4), 1, 1), ((4, 6), -1, 0), ((4, 6), 1, 6)])
@pytest.mark.parametrize("ret_type", ["both", "values", "indices"])
@pytest.mark.parametrize("ascend", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_topk(shape, axis, k, ret_type, ascend, dtype):
    x = sort_data(shape, dtype, "topk")
    outs = run_op('topk({0}, k=%d, axis=%d, ret_type="%s", is_ascend=%s, dtype="int64")'
                  % (k, axis, ret_type, ascend), x)
    order = argsort_ref(x, axis, ascend)
    kk = k if k >= 1 else shape[axis]
    order = np.take(order, range(kk), axis)
    vals = np.take_along_axis(x, order, axis)
    want = {"both": [vals, order.astype(np.int64)], "values": [vals],
            "indices": [order.astype(np.int64)]}[ret_type]
    assert len(outs) == len(want)
    for g, w in zip(outs, want):
        assert_close(g, w)


def test_topk_k_too_large_at_run_time():
    x = rand((3, 4), "float32", "topk-err")
    err = run_dyn_error("topk({0}, k=6, axis=1)", x)
    assert "larger" in err


@pytest.mark.parametrize("seq_shape,val_shape", [((6,), (4,)), ((6,), (2, 3)), ((3, 6), (3, 4)),
                                                 ((2, 2, 5), (2, 2, 3)), ((1,), (5,))])
@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "float64"])
def test_searchsorted(seq_shape, val_shape, right, dtype):
    seq = np.sort(rand(seq_shape, dtype, "ss", lo=0, hi=8), axis=-1)
    val = rand(val_shape, dtype, "ss-v", lo=-1, hi=10)
    if np.dtype(dtype).kind == "f":
        seq, val = np.round(seq).astype(dtype), np.round(val).astype(dtype)
    got = one("searchsorted({0}, {1}, right=%s)" % right, seq, val)
    side = "right" if right else "left"
    if seq.ndim == 1:
        want = np.searchsorted(seq, val, side)
    else:
        s2 = seq.reshape(-1, seq.shape[-1])
        v2 = val.reshape(-1, val.shape[-1])
        want = np.stack([np.searchsorted(s2[i], v2[i], side) for i in range(len(s2))])
        want = want.reshape(val.shape)
    assert_close(got, want.astype(np.int32))


def test_searchsorted_nan_and_dtype():
    seq = np.array([1.0, 2.0, np.nan], np.float32)
    val = np.array([np.nan, 2.0, 5.0], np.float32)
    got = one('searchsorted({0}, {1}, dtype="int64")', seq, val)
    assert_close(got, np.searchsorted(seq, val).astype(np.int64))


# ---- unravel_index, sequence_mask, argwhere, unique, sparse_to_dense -------------------------


@pytest.mark.parametrize("shape", [[5], [3, 4], [2, 3, 4], [1, 7, 1]])
@pytest.mark.parametrize("scalar", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_unravel_index(shape, scalar, dtype):
    n = int(np.prod(shape))
    ind = randint(() if scalar else (6,), 0, n, dtype, "unravel", shape)
    got = one("unravel_index({0}, {1})", ind, np.array(shape, dtype))
    want = np.array(np.unravel_index(ind, shape)).astype(dtype)
    assert_close(got, want)


def test_unravel_index_out_of_range():
    err = run_op_error("unravel_index({0}, {1})", np.array([3, 12], np.int32),
                       np.array([3, 4], np.int32))
    assert "index 12 out of range" in err


@pytest.mark.parametrize("shape,axis", [((5, 3), 0), ((3, 5), 1), ((4, 2, 3), 0), ((2, 4, 3), 1)])
@pytest.mark.parametrize("mask", [0.0, -1.5])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_sequence_mask(shape, axis, mask, dtype):
    x = rand(shape, dtype, "smask")
    nb, nt = shape[1 - axis], shape[axis]
    lens = randint((nb,), 0, nt + 2, "int32", "smask")
    got = one("sequence_mask({0}, {1}, mask_value=%s, axis=%d)" % (mask, axis), x, lens)
    want = x.copy()
    for b in range(nb):
        for t in range(int(lens[b]), nt):
            idx = (t, b) if axis == 0 else (b, t)
            want[idx] = want.dtype.type(mask)
    assert_close(got, want)


@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 4), (), (0, 3)])
@pytest.mark.parametrize("dtype", ["bool", "float32", "int8", "uint64"])
def test_argwhere(shape, dtype):
    x = rand(shape, dtype, "argwhere", lo=-1, hi=2)
    assert_close(one("argwhere({0})", x), np.argwhere(x).astype(np.int32))


def unique_ref(x, is_sorted, counts):
    n = len(x)
    u, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    if not is_sorted:
        order = np.argsort(idx, kind="stable")
        rank_of = np.argsort(order)
        u, idx, cnt, inv = u[order], idx[order], cnt[order], rank_of[inv]
    k = len(u)

    def pad(a, dt):
        out = np.zeros(n, dt)
        out[:k] = a
        return out
    res = [pad(u, x.dtype), pad(idx, np.int32), inv.astype(np.int32), np.array([k], np.int32)]
    if counts:
        res.append(pad(cnt, np.int32))
    return res


@pytest.mark.parametrize("n", [1, 8, 20])
@pytest.mark.parametrize("is_sorted", [True, False])
@pytest.mark.parametrize("counts", [True, False])
@pytest.mark.parametrize("dtype", ["int32", "float32", "uint8", "int64"])
def test_unique(n, is_sorted, counts, dtype):
    x = rand((n,), dtype, "unique", lo=0, hi=6)
    if np.dtype(dtype).kind == "f":
        x = np.round(x).astype(dtype)
    outs = run_op("unique({0}, sorted=%s, return_counts=%s)" % (is_sorted, counts), x)
    want = unique_ref(x, is_sorted, counts)
    assert len(outs) == len(want)
    for g, w in zip(outs, want):
        assert_close(g, w)


def test_unique_tvm_example():
    x = np.array([4, 5, 1, 2, 3, 3, 4, 5], np.int32)
    outs = run_op("unique({0}, sorted=False, return_counts=True)", x)
    assert list(outs[0][:5]) == [4, 5, 1, 2, 3]
    assert list(outs[1][:5]) == [0, 1, 2, 3, 4]
    assert list(outs[2]) == [0, 1, 2, 3, 4, 4, 0, 1]
    assert list(outs[3]) == [5]
    assert list(outs[4][:5]) == [2, 2, 1, 1, 2]


def sparse_to_dense_ref(ind, val, dflt, shape):
    out = np.full(shape, dflt, val.dtype)
    ind2 = np.asarray(ind).reshape(-1, len(shape)) if np.ndim(ind) != 1 else \
        np.asarray(ind).reshape(-1, 1)
    for j, c in enumerate(ind2):
        if all(0 <= c[d] < shape[d] for d in range(len(shape))):
            out[tuple(c)] = val if np.ndim(val) == 0 else val[j]
    return out


@pytest.mark.parametrize("ind,shape", [([1, 3, 4], [6]), ([[0, 1], [2, 2], [1, 0]], [3, 4]),
                                       (2, [5]), ([[0, 0, 1], [1, 2, 0]], [2, 3, 2]),
                                       ([1, 9, 3], [5]), ([[0, 1], [0, 1]], [2, 2])])
@pytest.mark.parametrize("dtype,scalar_vals", [("float32", False), ("int64", False),
                                               ("int8", True)])
def test_sparse_to_dense(ind, shape, dtype, scalar_vals):
    ind = np.array(ind, np.int32)
    n = 1 if ind.ndim == 0 else ind.shape[0]
    val = np.array(7, dtype) if scalar_vals else rand((n,), dtype, "s2d") + 1
    dflt = np.array(-3, dtype)
    got = one("sparse_to_dense({0}, {1}, {2}, output_shape=%s)" % shape, ind, val, dflt)
    assert_close(got, sparse_to_dense_ref(ind, val, dflt, shape))
