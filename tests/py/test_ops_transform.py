"""test_ops_transform.py - the transform operators (src/kernels/ref/transform.c) against numpy.

Each case runs one operator call through `rly run`. Inputs come from a generator seeded by the
case's own id (zlib.crc32), so every case is reproducible on its own; the base seed is printed
and RLY_SEED overrides it.
"""
import itertools
import os

import numpy as np
import pytest

from harness import (assert_close, case_rng, one, rand_array, run_dyn, run_dyn_error, run_op,
                     run_op_error, run_relay)

SEED = int(os.environ.get("RLY_SEED", "20240601"))
print("test_ops_transform: RLY_SEED=%d" % SEED)

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
ALL = ["bool"] + INTS + FLOATS


def rng_for(*key):
    return case_rng(SEED, *key)


def rand(shape, dtype, *key, lo=-50, hi=50):
    """Random data: bools, integers in [lo, hi) (>= 0 for unsigned), floats in [-8, 8)."""
    return rand_array(rng_for(shape, dtype, *key), shape, dtype, (-8.0, 8.0), (lo, hi - 1))


# ---- casts -------------------------------------------------------------------------------------


def cast_input(src, dst):
    """Values whose conversion numpy defines: in range of dst for float sources."""
    x = rand((3, 4), src, "cast", dst)
    if np.dtype(src).kind == "f":
        dk = np.dtype(dst)
        if dk.kind == "u":
            x = np.abs(x)
        if dk in (np.dtype("int8"), np.dtype("uint8")):
            x = np.clip(x, -100 if dk.kind == "i" else 0, 100).astype(src)
    return x


@pytest.mark.parametrize("src,dst", list(itertools.product(ALL, ALL)))
def test_cast(src, dst):
    x = cast_input(src, dst)
    got = one('cast({0}, dtype="%s")' % dst, x)
    with np.errstate(all="ignore"):
        want = x.astype(dst)
    assert_close(got, want, rtol=1e-3 if "float16" in (src, dst) else 1e-6)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int8", "float64"),
                                     ("uint8", "bool"), ("float64", "float16")])
def test_cast_like(src, dst):
    x = cast_input(src, dst)
    like = np.zeros((2,), dst)
    assert_close(one("cast_like({0}, {1})", x, like), x.astype(dst), rtol=1e-3)


@pytest.mark.parametrize("src,dst", [("int32", "float32"), ("float32", "int32"),
                                     ("uint32", "int32"), ("int64", "float64"),
                                     ("float64", "uint64"), ("int16", "float16"),
                                     ("uint8", "int8"), ("float16", "uint16")])
def test_reinterpret(src, dst):
    x = rand((2, 5), src, "reinterpret")
    got = one('reinterpret({0}, dtype="%s")' % dst, x)
    want = x.view(dst)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


# ---- expand_dims, squeeze, reshape, reshape_like ----------------------------------------------


@pytest.mark.parametrize("axis,k", [(0, 1), (1, 1), (3, 1), (-1, 1), (-4, 1), (1, 2), (2, 0),
                                    (0, 3)])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_expand_dims(axis, k, dtype):
    x = rand((2, 3, 4), dtype, "expand_dims")
    got = one("expand_dims({0}, axis=%d, num_newaxis=%d)" % (axis, k), x)
    want = x
    pivot = axis if axis >= 0 else x.ndim + axis + 1
    for _ in range(k):
        want = np.expand_dims(want, pivot)
    assert_close(got, want)


@pytest.mark.parametrize("shape,axis", [((1, 3, 1, 2), None), ((1, 3, 1, 2), [0]),
                                        ((1, 3, 1, 2), [-2]), ((1, 3, 1, 2), [0, 2]),
                                        ((1, 1), None), ((4,), None)])
def test_squeeze(shape, axis):
    x = rand(shape, "float64", "squeeze")
    call = "squeeze({0})" if axis is None else "squeeze({0}, axis=%s)" % axis
    want = np.squeeze(x) if axis is None else np.squeeze(x, tuple(axis))
    assert_close(one(call, x), want)


RESHAPES = [
    ((2, 3, 4), [6, 4], (6, 4)),
    ((2, 3, 4), [-1], (24,)),
    ((2, 3, 4), [4, -1], (4, 6)),
    ((2, 3, 4), [0, -1], (2, 12)),
    ((2, 3, 4), [0, 0, 0], (2, 3, 4)),
    ((2, 3, 4), [-2], (2, 3, 4)),
    ((2, 3, 4), [2, -2], (2, 3, 4)),
    ((2, 3, 4), [-3, 4], (6, 4)),
    ((2, 3, 4), [0, -3], (2, 12)),
    ((2, 3, 4), [-4, 1, 2, -2], (1, 2, 3, 4)),
    ((2, 3, 4), [-4, -1, 1, -2], (2, 1, 3, 4)),
    ((2, 3, 4), [0, 0, -4, 2, 2], (2, 3, 2, 2)),
    ((2, 3, 4), [0, -4, 3, -1, 4], (2, 3, 1, 4)),
    ((6, 4), [-1, 0], (6, 4)),
    ((2, 3, 4), [1, 1, -1, 1], (1, 1, 24, 1)),
    ((24,), [2, 3, 4], (2, 3, 4)),
    ((), [1, 1], (1, 1)),
    ((1, 1), [], ()),
]


@pytest.mark.parametrize("shape,newshape,want", RESHAPES)
@pytest.mark.parametrize("dtype", ["float32", "uint16"])
def test_reshape(shape, newshape, want, dtype):
    x = rand(shape, dtype, "reshape")
    got = one("reshape({0}, newshape=%s)" % newshape, x)
    assert_close(got, x.reshape(want))


def test_reshape_allowzero():
    x = np.zeros((0, 3), np.float32)
    got = one("reshape({0}, newshape=[3, 0], allowzero=True)", x)
    assert got.shape == (3, 0)


def test_reshape_runtime_mismatch():
    x = rand((2, 3, 4), "float32", "reshape-rt")
    err = run_dyn_error("reshape({0}, newshape=[5, -1])", x)
    assert "reshape" in err or "infer" in err


def test_reshape_dynamic():
    x = rand((2, 3, 4), "float32", "reshape-dyn")
    out = run_dyn("reshape({0}, newshape=[0, -1])", x)
    assert_close(out[0], x.reshape(2, 12))


@pytest.mark.parametrize("lb,le,rb,re,like_shape,want", [
    (0, None, 0, None, (4, 6), (4, 6)),
    (1, 3, 0, 1, (12, 7), (2, 12)),
    (0, 2, 1, 3, (9, 2, 3), (2, 3, 4)),
    (-2, None, -1, None, (5, 12), (2, 12)),
])
def test_reshape_like(lb, le, rb, re, like_shape, want):
    x = rand((2, 3, 4), "int32", "reshape_like")
    like = np.zeros(like_shape, np.float32)
    attrs = "lhs_begin=%d, rhs_begin=%d" % (lb, rb)
    if le is not None:
        attrs += ", lhs_end=%d" % le
    if re is not None:
        attrs += ", rhs_end=%d" % re
    assert_close(one("reshape_like({0}, {1}, %s)" % attrs, x, like), x.reshape(want))


# ---- transpose -------------------------------------------------------------------------------


@pytest.mark.parametrize("axes", [None] + [list(p) for p in itertools.permutations(range(3))] +
                         [[-1, 0, 1]])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_transpose(axes, dtype):
    x = rand((2, 3, 4), dtype, "transpose")
    call = "transpose({0})" if axes is None else "transpose({0}, axes=%s)" % axes
    assert_close(one(call, x), np.transpose(x, axes))


def test_transpose_4d():
    x = rand((2, 3, 4, 5), "float16", "transpose4")
    assert_close(one("transpose({0}, axes=[0, 2, 3, 1])", x), x.transpose(0, 2, 3, 1))


# ---- concatenate, stack, split -------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint64"])
def test_concatenate(axis, dtype):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for i, s in enumerate(shapes):
        s[axis] = i + 1
    xs = [rand(tuple(s), dtype, "concat", i) for i, s in enumerate(shapes)]
    assert_close(one("concatenate({0}, axis=%d)" % axis, xs), np.concatenate(xs, axis))


def test_concatenate_single_and_empty():
    a = rand((2, 3), "float32", "c1")
    b = np.zeros((0, 3), np.float32)
    assert_close(one("concatenate({0}, axis=0)", [a]), a)
    assert_close(one("concatenate({0}, axis=0)", [a, b, a]), np.concatenate([a, b, a]))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("dtype", ["float64", "int16"])
def test_stack(axis, dtype):
    xs = [rand((2, 3), dtype, "stack", i) for i in range(4)]
    assert_close(one("stack({0}, axis=%d)" % axis, xs), np.stack(xs, axis))


@pytest.mark.parametrize("ios,axis", [(3, 0), (2, 1), (1, 1), (4, -1), ([1, 3], 0),
                                      ([2], 1), ([1, 2, 3], -1), ([], 0)])
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_split(ios, axis, dtype):
    x = rand((6, 4, 4), dtype, "split")
    outs = run_op("split({0}, indices_or_sections=%s, axis=%d)" % (ios, axis), x)
    want = np.split(x, ios, axis) if ios != [] else [x]
    assert len(outs) == len(want)
    for g, w in zip(outs, want):
        assert_close(g, w)


def test_split_runtime_not_divisible():
    x = rand((5, 4), "float32", "split-rt")
    err = run_dyn_error("split({0}, indices_or_sections=2, axis=0)", x)
    assert "divide" in err


# ---- tile, repeat, reverse, reverse_sequence ------------------------------------------------


@pytest.mark.parametrize("reps", [[1], [2], [2, 1], [1, 3], [2, 2, 2], [3, 1, 1, 2], [1, 1]])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_tile(reps, dtype):
    x = rand((2, 3), dtype, "tile")
    assert_close(one("tile({0}, reps=%s)" % reps, x), np.tile(x, reps))


@pytest.mark.parametrize("repeats,axis", [(1, 0), (2, 0), (3, 1), (2, -1), (4, 2)])
def test_repeat(repeats, axis):
    x = rand((2, 3, 2), "float64", "repeat")
    assert_close(one("repeat({0}, repeats=%d, axis=%d)" % (repeats, axis), x),
                 np.repeat(x, repeats, axis))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", ["float32", "bool", "int32"])
def test_reverse(axis, dtype):
    x = rand((2, 3, 4), dtype, "reverse")
    assert_close(one("reverse({0}, axis=%d)" % axis, x), np.flip(x, axis))


def reverse_sequence_ref(x, lens, seq_axis, batch_axis):
    out = x.copy()
    n = x.shape[seq_axis]
    for b, ln in enumerate(lens):
        ln = int(ln)
        if ln <= 1:
            continue
        ln = min(ln, n)
        src = [slice(None)] * x.ndim
        src[batch_axis] = b
        src[seq_axis] = slice(0, ln)
        dst = list(src)
        out[tuple(dst)] = np.flip(x[tuple(src)], axis=seq_axis - (seq_axis > batch_axis))
    return out


@pytest.mark.parametrize("seq_axis,batch_axis,lens", [
    (1, 0, [1, 2, 3, 4]), (1, 0, [0, 5, 4, 9]), (0, 1, [2, 3, 1, 4, 5]),
    (2, 0, [3, 1, 2, 0]), (-1, 0, [2, 2, 2, 2])])
@pytest.mark.parametrize("ldt", ["int32", "int64"])
def test_reverse_sequence(seq_axis, batch_axis, lens, ldt):
    shape = {(1, 0): (4, 5, 2), (0, 1): (5, 5, 2), (2, 0): (4, 2, 5), (-1, 0): (4, 2, 5)}
    x = rand(shape[(seq_axis, batch_axis)], "float32", "revseq")
    lens = np.array(lens, ldt)
    got = one("reverse_sequence({0}, {1}, seq_axis=%d, batch_axis=%d)" % (seq_axis, batch_axis),
              x, lens)
    assert_close(got, reverse_sequence_ref(x, lens, seq_axis % x.ndim, batch_axis))


# ---- where, broadcast_to(_like), collapse_sum_like/to ---------------------------------------


@pytest.mark.parametrize("cs,xs,ys", [((2, 3), (2, 3), (2, 3)), ((2, 1), (1, 3), (2, 3)),
                                      ((), (2, 3), (3,)), ((3,), (2, 1), ()),
                                      ((4, 1, 3), (2, 1), (1, 3))])
@pytest.mark.parametrize("cdt,dtype", [("bool", "float32"), ("int32", "int8"),
                                       ("float32", "uint16")])
def test_where(cs, xs, ys, cdt, dtype):
    c = rand(cs, cdt, "where-c", lo=-1, hi=2)
    x = rand(xs, dtype, "where-x")
    y = rand(ys, dtype, "where-y")
    assert_close(one("where({0}, {1}, {2})", c, x, y), np.where(c != 0, x, y))


def test_where_nan_condition():
    c = np.array([np.nan, 0.0, -0.0, 1.0], np.float32)
    x = np.arange(4, dtype=np.int32)
    y = -x
    assert_close(one("where({0}, {1}, {2})", c, x, y), np.array([0, -1, -2, 3], np.int32))


@pytest.mark.parametrize("shape,to", [((3,), [2, 3]), ((1, 3), [4, 3]), ((2, 1), [2, 5]),
                                      ((), [2, 2]), ((2, 1, 3), [4, 2, 2, 3]), ((2, 3), [2, 3])])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_broadcast_to(shape, to, dtype):
    x = rand(shape, dtype, "bcast")
    assert_close(one("broadcast_to({0}, shape=%s)" % to, x), np.broadcast_to(x, to))


@pytest.mark.parametrize("shape,to", [((3,), (2, 3)), ((2, 1), (2, 5)), ((1,), (3, 1))])
def test_broadcast_to_like(shape, to):
    x = rand(shape, "int16", "bcast-like")
    like = np.zeros(to, np.int16)
    assert_close(one("broadcast_to_like({0}, {1})", x, like), np.broadcast_to(x, to))


def collapse_ref(x, to):
    lead = x.ndim - len(to)
    axes = list(range(lead)) + [lead + i for i, d in enumerate(to)
                                if d == 1 and x.shape[lead + i] != 1]
    s = x.sum(axis=tuple(axes), dtype=np.float64 if x.dtype.kind == "f" else None)
    return s.reshape(to).astype(x.dtype)


@pytest.mark.parametrize("shape,to", [((2, 3), (3,)), ((2, 3), (2, 1)), ((4, 2, 3), (1, 3)),
                                      ((2, 3), (2, 3)), ((2, 3), ()), ((3, 1, 4), (1, 1, 4))])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_collapse_sum_like(shape, to, dtype):
    x = rand(shape, dtype, "collapse")
    like = np.zeros(to, dtype)
    assert_close(one("collapse_sum_like({0}, {1})", x, like), collapse_ref(x, to), rtol=1e-5)


@pytest.mark.parametrize("shape,to", [((2, 3), (3,)), ((4, 2, 3), (2, 1)), ((2, 3), ())])
@pytest.mark.parametrize("with_attr", [True, False])
def test_collapse_sum_to(shape, to, with_attr):
    x = rand(shape, "float64", "collapse-to")
    s = np.array(to, np.int64)
    if with_attr:
        got = one("collapse_sum_to({0}, {1}, shape=%s)" % list(to), x, s)
    else:
        got = run_op("collapse_sum_to({0}, {1})", x, s)[0]
    assert_close(got, collapse_ref(x, to))


def test_collapse_sum_int_wraps():
    x = np.full((300,), 100, np.int8)
    like = np.zeros((1,), np.int8)
    want = np.array([np.int64(100 * 300)], np.int64).astype(np.int8)
    assert_close(one("collapse_sum_like({0}, {1})", x, like), want)


# ---- layout_transform -----------------------------------------------------------------------


def to_primal(x, layout):
    """An array in a layout such as NCHW4c back to its primal axes (in the order of first
    appearance), plus that order."""
    axes = [c for c in layout if c.isupper()]
    import re
    items = re.findall(r"(\d*)([A-Za-z])", layout)
    x = np.asarray(x)
    # move each sub-axis right after its primal and merge
    names = [c for _, c in items]
    for _, c in items:
        if c.islower():
            p = names.index(c.upper())
            s = names.index(c)
            x = np.moveaxis(x, s, p + 1)
            names.insert(p + 1, names.pop(s))
            shp = list(x.shape)
            shp[p:p + 2] = [shp[p] * shp[p + 1]]
            x = x.reshape(shp)
            names.pop(p + 1)
    return x, axes


def layout_ref(x, src, dst):
    import re
    prim, axes = to_primal(x, src)
    items = re.findall(r"(\d*)([A-Za-z])", dst)
    order = [c for _, c in items if c.isupper()]
    prim = np.transpose(prim, [axes.index(c) for c in order])
    # split with zero padding
    shape = {c: prim.shape[i] for i, c in enumerate(order)}
    blocks = {c.upper(): int(f) for f, c in items if c.islower()}
    pad = [(0, (-shape[c]) % blocks.get(c, 1)) for c in order]
    prim = np.pad(prim, pad)
    new_shape, perm_names = [], []
    for c in order:
        if c in blocks:
            new_shape += [prim.shape[order.index(c)] // blocks[c], blocks[c]]
            perm_names += [c, c.lower()]
        else:
            new_shape.append(prim.shape[order.index(c)])
            perm_names.append(c)
    y = prim.reshape(new_shape)
    return np.transpose(y, [perm_names.index(c) for _, c in items])


@pytest.mark.parametrize("shape,src,dst", [
    ((2, 3, 4, 5), "NCHW", "NHWC"),
    ((2, 4, 5, 3), "NHWC", "NCHW"),
    ((2, 8, 3, 3), "NCHW", "NCHW4c"),
    ((2, 8, 3, 3), "NCHW", "NCHW8c"),
    ((2, 6, 3, 3), "NCHW", "NCHW4c"),
    ((2, 2, 3, 3, 4), "NCHW4c", "NCHW"),
    ((2, 2, 3, 3, 4), "NCHW4c", "NCHW2c"),
    ((2, 3, 3, 3, 2), "NCHW2c", "NCHW4c"),
    ((2, 2, 3, 3, 4), "NCHW4c", "NHWC"),
    ((2, 3, 3, 8), "NHWC", "NCHW4c"),
    ((4, 6, 3, 3), "OIHW", "OIHW2i4o"),
    ((3, 4), "NC", "CN"),
    ((3, 4), "NC", "NC"),
])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_layout_transform(shape, src, dst, dtype):
    x = rand(shape, dtype, "layout")
    got = one('layout_transform({0}, src_layout="%s", dst_layout="%s")' % (src, dst), x)
    assert_close(got, layout_ref(x, src, dst))


# ---- strided_slice, slice_like -------------------------------------------------------------


def slice_ref(x, begin, end, strides, axes=None, mode="end"):
    sl = [slice(None)] * x.ndim
    axes = list(range(len(begin))) if axes is None else axes
    for i, a in enumerate(axes):
        b = begin[i] if i < len(begin) else None
        e = end[i] if i < len(end) else None
        s = strides[i] if strides is not None and i < len(strides) else 1
        if mode == "size":
            d = x.shape[a]
            b = b + d if b < 0 else b
            b = min(max(b, 0), d)
            e = d if e is None or e < 0 else min(b + e, d)
            s = 1
        sl[a] = slice(b, e, s)
    return x[tuple(sl)]


SLICES = [
    ([0, 0, 0], [2, 3, 4], [1, 1, 1], None),
    ([1, 1, 1], [2, 3, 4], [1, 1, 1], None),
    ([0, 0, 0], [2, 3, 4], [1, 2, 3], None),
    ([1], [2], [1], None),
    ([0, 1], [2, 3], None, None),
    ([-1, -1, -1], [-3, -4, -5], [-1, -1, -1], None),
    ([1, 2, 3], [-10, -10, -10], [-1, -2, -3], None),
    ([0, -2, 1], [100, 100, 100], [1, 1, 1], None),
    ([-100, -100, -100], [100, 100, 100], [2, 2, 2], None),
    ([2, 0, 0], [0, 3, 4], [1, 1, 1], None),
    ([1, 2], [2, 4], [1, 1], [0, 2]),
    ([3], [0], [-1], [-1]),
    ([0, 1], [1, 3], None, [1, 0]),
]


@pytest.mark.parametrize("begin,end,strides,axes", SLICES)
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_strided_slice(begin, end, strides, axes, dtype):
    x = rand((2, 3, 4), dtype, "slice")
    call = "strided_slice({0}, begin=%s, end=%s" % (begin, end)
    if strides is not None:
        call += ", strides=%s" % strides
    if axes is not None:
        call += ", axes=%s" % axes
    assert_close(one(call + ")", x), slice_ref(x, begin, end, strides, axes))


@pytest.mark.parametrize("begin,size,axes", [([0, 1, 1], [2, 2, 2], None), ([1, 0], [-1, 2], None),
                                             ([-2, 1], [1, 100], None), ([1], [2], [2]),
                                             ([0, 0, 0], [-1, -1, -1], None)])
def test_strided_slice_size(begin, size, axes):
    x = rand((2, 3, 4), "int32", "slice-size")
    call = 'strided_slice({0}, begin=%s, end=%s, slice_mode="size"' % (begin, size)
    if axes is not None:
        call += ", axes=%s" % axes
    assert_close(one(call + ")", x), slice_ref(x, begin, size, None, axes, "size"))


def test_strided_slice_dynamic():
    x = rand((5, 6), "float32", "slice-dyn")
    out = run_dyn("strided_slice({0}, begin=[1, -1], end=[4, 0], strides=[2, -2])", x)
    assert_close(out[0], x[1:4:2, -1:0:-2])


@pytest.mark.parametrize("like_shape,axes", [((1, 2, 3), None), ((2, 2), None), ((1, 2, 3), [2]),
                                             ((1, 1, 1), [0, 2]), ((9, 1, 2), [-1])])
def test_slice_like(like_shape, axes):
    x = rand((2, 3, 4), "float32", "slice-like")
    like = np.zeros(like_shape, np.int32)
    call = "slice_like({0}, {1})" if axes is None else "slice_like({0}, {1}, axes=%s)" % axes
    sl = [slice(None)] * 3
    use = range(min(3, len(like_shape))) if axes is None else [a % 3 for a in axes]
    for a in use:
        sl[a] = slice(0, like_shape[a])
    assert_close(one(call, x, like), x[tuple(sl)])


# ---- meshgrid, einsum ----------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [[3], [2, 3], [2, 3, 4], [1, 4], [0, 2], [None, 3]])
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(sizes, indexing):
    xs = [rand(() if s is None else (s,), "float32", "mesh", i) for i, s in enumerate(sizes)]
    outs = run_op('meshgrid({0}, indexing="%s")' % indexing, xs)
    want = np.meshgrid(*[np.atleast_1d(x) for x in xs], indexing=indexing)
    assert len(outs) == len(want)
    for g, w in zip(outs, want):
        assert_close(g, w)


EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 4)]),
    ("...i,...i", [(2, 3), (1, 3)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ij,ij,ij->i", [(2, 3), (2, 3), (2, 3)]),
    ("Ab,bA->A", [(2, 3), (3, 2)]),
    ("i...->...", [(2, 3, 4)]),
    ("iij->j", [(2, 2, 3)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUMS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
def test_einsum(eq, shapes, dtype):
    xs = [rand(s, dtype, "einsum", eq, i, lo=-5, hi=5) for i, s in enumerate(shapes)]
    got = one('einsum({0}, equation="%s")' % eq, xs)
    want = np.einsum(eq, *xs)
    assert_close(got, np.asarray(want, dtype), rtol=1e-5, atol=1e-5)


# ---- trilu, matrix_set_diag, sliding_window, invert_permutation ------------------------------


@pytest.mark.parametrize("k", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 3)])
def test_trilu(k, upper, shape):
    x = rand(shape, "float32", "trilu")
    got = one("trilu({0}, {1}, upper=%s)" % upper, x, np.array(k, np.int64))
    assert_close(got, np.triu(x, k) if upper else np.tril(x, k))


def matrix_set_diag_ref(x, diag, k1, k2, super_right, sub_right):
    out = x.copy()
    m, n = x.shape[-2:]
    max_len = diag.shape[-1]
    for k in range(k1, k2 + 1):
        length = min(n - k, m) if k >= 0 else min(n, m + k)
        right = super_right if k >= 0 else sub_right
        off = max_len - length if (right and k1 != k2) else 0
        for t in range(length):
            i, j = (t, t + k) if k >= 0 else (t - k, t)
            pos = (i if k >= 0 else j) + off
            d = diag[..., pos] if k1 == k2 else diag[..., k2 - k, pos]
            out[..., i, j] = d
    return out


@pytest.mark.parametrize("shape,k1,k2", [((3, 4), 0, 0), ((3, 4), 1, 1), ((3, 4), -1, -1),
                                         ((2, 4, 3), 0, 0), ((3, 4), -1, 1), ((4, 4), -2, 0),
                                         ((2, 3, 5), 0, 2), ((4, 3), -3, -1)])
@pytest.mark.parametrize("align", [(True, False), (False, True), (True, True), (False, False)])
def test_matrix_set_diag(shape, k1, k2, align):
    x = rand(shape, "float32", "msd")
    m, n = shape[-2:]
    max_len = max(min(n - k, m) if k >= 0 else min(n, m + k) for k in range(k1, k2 + 1))
    dshape = shape[:-2] + ((max_len,) if k1 == k2 else (k2 - k1 + 1, max_len))
    diag = rand(dshape, "float32", "msd-d") + 100
    got = one("matrix_set_diag({0}, {1}, k1=%d, k2=%d, super_diag_right_align=%s, "
              "sub_diag_right_align=%s)" % (k1, k2, align[0], align[1]), x, diag)
    assert_close(got, matrix_set_diag_ref(x, diag, k1, k2, *align))


def sliding_window_ref(x, axis, window, strides):
    outs = [(x.shape[axis + i] - w) // s + 1 for i, (w, s) in enumerate(zip(window, strides))]
    out = np.zeros(x.shape[:axis] + tuple(outs) + tuple(window), x.dtype)
    for pos in itertools.product(*[range(o) for o in outs]):
        sl = tuple(slice(p * s, p * s + w) for p, s, w in zip(pos, strides, window))
        out[(Ellipsis,) * 0 + tuple([slice(None)] * axis) + pos] = x[tuple([slice(None)] * axis)
                                                                     + sl]
    return out


@pytest.mark.parametrize("shape,axis,window,strides", [
    ((6,), 0, [3], [1]), ((6,), 0, [2], [2]), ((2, 5, 4), 1, [2, 2], [1, 2]),
    ((2, 5, 4), 0, [1, 3, 2], [1, 1, 1]), ((3, 4), -1, [4], [1]), ((3, 7), 1, [3], [3])])
def test_sliding_window(shape, axis, window, strides):
    x = rand(shape, "int32", "sw")
    got = one("sliding_window({0}, axis=%d, window_shape=%s, strides=%s)" % (axis, window, strides),
              x)
    assert_close(got, sliding_window_ref(x, axis % len(shape), window, strides))


@pytest.mark.parametrize("n,dtype", [(1, "int32"), (5, "int32"), (8, "int64"), (6, "uint8")])
def test_invert_permutation(n, dtype):
    p = rng_for("perm", n).permutation(n).astype(dtype)
    assert_close(one("invert_permutation({0})", p), np.argsort(p).astype(dtype))


@pytest.mark.parametrize("p", [[0, 3, 1], [0, -1, 1], [1, 1, 0]])
def test_invert_permutation_errors(p):
    err = run_op_error("invert_permutation({0})", np.array(p, np.int32))
    assert "out of range" in err or "not a permutation" in err


# ---- run-time shape errors, bfloat16 ---------------------------------------------------------


def test_broadcast_to_runtime_mismatch():
    x = rand((3, 2), "float32", "bcast-rt")
    assert "broadcast" in run_dyn_error("broadcast_to({0}, shape=[3, 4])", x)


def test_concatenate_runtime_mismatch():
    a = rand((2, 3), "float32", "cat-rt-a")
    b = rand((2, 4), "float32", "cat-rt-b")
    assert "differs" in run_dyn_error("concatenate(({0}, {1}), axis=0)", a, b)


def test_where_runtime_mismatch():
    c = np.ones((3,), bool)
    x = rand((4,), "float32", "where-rt")
    assert "broadcast" in run_dyn_error("where({0}, {1}, {1})", c, x)


def bf16_round(x):
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)


def test_bfloat16_through_data_movement():
    x = rand((2, 3, 4), "float32", "bf16")
    text = ('#[version = "0.0.5"]\ndef @main(%x: Tensor[(2, 3, 4), float32]) {\n'
            '  %0 = cast(%x, dtype="bfloat16");\n'
            '  %1 = transpose(%0, axes=[2, 0, 1]);\n'
            '  %2 = strided_slice(%1, begin=[3, 0, 2], end=[0, 2, 0], strides=[-1, 1, -1]);\n'
            '  %3 = concatenate((%2, %2), axis=1);\n'
            '  cast(%3, dtype="float32")\n}\n')
    got = run_relay(text, {"x": x})[0]
    r = bf16_round(x).transpose(2, 0, 1)[3:0:-1, 0:2, 2:0:-1]
    assert_close(got, np.concatenate([r, r], 1), rtol=0, atol=0)
