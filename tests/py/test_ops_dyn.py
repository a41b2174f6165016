"""test_ops_dyn.py - the dynamic-shape operators (src/kernels/ref/dyn.c) against numpy and against
their static twins.

Each dyn operator takes as a tensor what its static twin takes as an attribute (dyn.reshape's
newshape, dyn.tile's reps, ...). Every case runs the dyn call through `rly run` with the shape-like
values as an input tensor, compares it with a numpy reference, and runs the static twin on the
same values: the two results must be identical (same dtype, shape and bytes). The runtime-error
cases check that bad values stop the run with a located message. Inputs come from a generator
seeded by the case's own key; the base seed is printed and RLY_SEED overrides it.
"""
import os

import numpy as np
import pytest

from harness import (RlyError, assert_close, case_rng, fmt_attr, rand_array, run_op, run_op_error,
                     run_relay, tensor_type)

SEED = int(os.environ.get("RLY_SEED", "20240611"))
print("test_ops_dyn: RLY_SEED=%d" % SEED)

INDEX_DTYPES = ["int64", "int32", "int8", "uint8", "uint64", "int16"]


def rand(shape, dtype, *key):
    """Random data: floats in [-8, 8), integers in [-50, 50) (>= 0 for unsigned), bools."""
    return rand_array(case_rng(SEED, shape, dtype, *key), shape, dtype, (-8.0, 8.0), (-50, 49))


def vec(values, dtype="int64"):
    return np.array(values, dtype=dtype)


def attrs_text(**attrs):
    return "".join(", %s=%s" % (k, fmt_attr(v)) for k, v in attrs.items())


def same(got, want):
    """Identical results: dtype, shape and bytes."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        assert g.tobytes() == w.tobytes()


def run_unknown_data(call, data, *rest):
    """Run call with the data parameter (argument 0) typed with `?` dims and the shape-like
    arguments with their static types (their length fixes the result rank)."""
    args = [data] + list(rest)
    params = ", ".join("%%x%d: %s" % (i, tensor_type(a, dyn=(i == 0))) for i, a in enumerate(args))
    body = call.format(*["%%x%d" % i for i in range(len(args))])
    text = '#[version = "0.0.5"]\ndef @main(%s) {\n  %s\n}\n' % (params, body)
    return run_relay(text, {"x%d" % i: np.asarray(a) for i, a in enumerate(args)})


def twin(dyn_call, dyn_args, static_call, static_args):
    """Run the dyn call and its static twin; they must agree exactly. Returns the outputs."""
    got = run_op(dyn_call, *dyn_args)
    same(got, run_op(static_call, *static_args))
    return got


# ---- dyn.reshape --------------------------------------------------------------------------------


def reshape_ref(x, newshape, allowzero=False):
    shape = [x.shape[i] if v == 0 and not allowzero else v for i, v in enumerate(newshape)]
    return x.reshape(shape)


RESHAPE = [
    ((2, 3, 4), [6, 4]),
    ((2, 3, 4), [-1]),
    ((2, 3, 4), [4, -1, 2]),
    ((2, 3, 4), [0, -1]),
    ((2, 3, 4), [2, 0, 0]),
    ((2, 3, 4), [1, 24, 1]),
    ((6,), [3, 2]),
    ((1,), []),
    ((), [1, 1]),
    ((0, 3), [-1, 3]),
]


@pytest.mark.parametrize("shape,newshape", RESHAPE)
@pytest.mark.parametrize("idt", ["int64", "int32"])
def test_reshape(shape, newshape, idt):
    x = rand(shape, "float32", "reshape")
    got = twin("dyn.reshape({0}, {1})", [x, vec(newshape, idt)],
               "reshape({0}, newshape=%s)" % fmt_attr(newshape), [x])
    assert_close(got[0], reshape_ref(x, newshape))


@pytest.mark.parametrize("idt", ["uint8", "int8", "uint64", "int16", "uint32"])
def test_reshape_index_dtypes(idt):
    x = rand((4, 6), "int32", "reshape-dt")
    got = run_op("dyn.reshape({0}, {1})", x, vec([2, 0, 2] if idt[0] == "u" else [-1, 8], idt))
    want = x.reshape(2, 6, 2) if idt[0] == "u" else x.reshape(-1, 8)
    assert_close(got[0], want)


def test_reshape_allowzero():
    x = np.zeros((0, 3), "float32")
    got = twin("dyn.reshape({0}, {1}, allowzero=True)", [x, vec([3, 0])],
               "reshape({0}, newshape=[3, 0], allowzero=True)", [x])
    assert got[0].shape == (3, 0)


def test_reshape_unknown_input_dims():
    x = rand((2, 3, 4), "float64", "reshape-dyn")
    assert_close(run_unknown_data("dyn.reshape({0}, {1})", x, vec([4, -1]))[0], x.reshape(4, 6))


@pytest.mark.parametrize("newshape,allowzero,msg", [
    ([2, -1, -1], False, "dyn.reshape: newshape [2, -1, -1] has two -1"),
    ([4, 5], False, "cannot reshape (2, 3, 4) (24 elements) into (4, 5) (20 elements)"),
    ([5, -1], False, "cannot infer the -1"),
    ([2, -2], False, "entry 1 is -2; the entries must be sizes, 0 (copy) or -1 (infer)"),
    ([0, 0, 0, 0], False, "entry 3 is 0 (copy input dimension 3), but data has rank 3"),
    ([0, -1], True, "cannot infer the -1"),
    ([1 << 40, 1 << 40, 0], True, "makes a result of more than 2^62 elements"),
])
def test_reshape_errors(newshape, allowzero, msg):
    x = rand((2, 3, 4), "float32", "reshape-err")
    err = run_op_error("dyn.reshape({0}, {1}%s)" % attrs_text(allowzero=allowzero), x,
                       vec(newshape))
    assert msg in err and "error: dyn.reshape:" in err and "prog.rly:" in err, err


def test_reshape_uint64_too_large():
    err = run_op_error("dyn.reshape({0}, {1})", rand((2,), "float32", "r64"),
                       vec([2 ** 64 - 1], "uint64"))
    assert "newshape[0] = 18446744073709551615 is too large" in err


# ---- dyn.broadcast_to ---------------------------------------------------------------------------


BROADCAST = [((3,), [2, 3]), ((1, 3), [4, 2, 3]), ((), [2, 2]), ((2, 1), [2, 5]),
             ((0, 1), [0, 4]), ((2, 3), [2, 3]), ((1,), [1])]


@pytest.mark.parametrize("shape,target", BROADCAST)
@pytest.mark.parametrize("dtype", ["float32", "int8", "bool"])
def test_broadcast_to(shape, target, dtype):
    x = rand(shape, dtype, "bcast")
    got = twin("dyn.broadcast_to({0}, {1})", [x, vec(target, "int32")],
               "broadcast_to({0}, shape=%s)" % fmt_attr(target), [x])
    assert_close(got[0], np.broadcast_to(x, target))


@pytest.mark.parametrize("target,msg", [
    ([2, 4], "cannot broadcast (2, 3) to shape [2, 4] (dimension 1: 3 vs 4)"),
    ([3], "cannot broadcast (2, 3) to a shape of 1 entries: the target has lower rank"),  # types
    ([2, -3], "shape [2, -3] has a negative size"),
])
def test_broadcast_to_errors(target, msg):
    err = run_op_error("dyn.broadcast_to({0}, {1})", rand((2, 3), "float32", "bc"), vec(target))
    assert "error: dyn.broadcast_to: " + msg in err, err


# ---- dyn.strided_slice --------------------------------------------------------------------------

BIG = 2 ** 63 - 1
SLICES = [
    ((10, 8), [2, 0], [8, 8], [1, 1], {}),
    ((10, 8), [8, 7], [2, -9], [-2, -1], {}),
    ((10, 8), [-3], [10], [1], {}),
    ((10, 8), [0, 1], [BIG, BIG], [3, 2], {}),
    ((10, 8), [9], [-BIG - 1], [-1], {}),
    ((10, 8), [5, 0], [2, 8], [1, 1], {}),
    ((4, 5, 6), [1, 2], [4, 5], [1, 1], {"axes": [2, 0]}),
    ((4, 5, 6), [-1], [0], [-1], {"axes": [-2]}),
    ((10, 8), [2, 3], [4, -1], [1, 1], {"slice_mode": "size"}),
    ((10, 8), [1, 2], [3, 4], [], {}),
]


def slice_ref(x, b, e, s, attrs):
    axes = attrs.get("axes", list(range(len(b))))
    idx = [slice(None)] * x.ndim
    for i, a in enumerate(axes):
        if attrs.get("slice_mode") == "size":
            end = x.shape[a] if e[i] < 0 else b[i] + e[i]
            idx[a] = slice(b[i], end)
        else:
            idx[a] = slice(b[i], e[i], s[i] if i < len(s) else 1)
    return x[tuple(idx)]


@pytest.mark.parametrize("shape,b,e,s,attrs", SLICES)
def test_strided_slice(shape, b, e, s, attrs):
    x = rand(shape, "float32", "slice")
    static = "strided_slice({0}, begin=%s, end=%s%s%s)" % (
        fmt_attr(b), fmt_attr(e), ", strides=%s" % fmt_attr(s) if s else "", attrs_text(**attrs))
    got = twin("dyn.strided_slice({0}, {1}, {2}, {3}%s)" % attrs_text(**attrs),
               [x, vec(b), vec(e), vec(s)], static, [x])
    assert_close(got[0], slice_ref(x, b, e, s, attrs))


def test_strided_slice_mixed_index_dtypes():
    x = rand((6, 7), "int16", "slice-dt")
    got = run_op("dyn.strided_slice({0}, {1}, {2}, {3})", x, vec([1, 6], "int32"),
                 vec([5, 0], "int64"), vec([2, -3], "int8"))
    assert_close(got[0], x[1:5:2, 6:0:-3])


def test_strided_slice_zero_stride():
    err = run_op_error("dyn.strided_slice({0}, {1}, {2}, {3})", rand((4, 4), "float32", "ss0"),
                       vec([0, 0]), vec([4, 4]), vec([1, 0]))
    assert "error: dyn.strided_slice: strides [1, 0] has a 0; strides must be nonzero" in err


def test_strided_slice_too_many_entries_unknown_length():
    # `?` lengths are allowed by the relation; the kernel checks them
    x = rand((4, 4), "float32", "ss-len")
    text = ('#[version = "0.0.5"]\ndef @main(%x: Tensor[(4, 4), float32], '
            '%b: Tensor[(?,), int64]) {\n  dyn.strided_slice(%x, %b, %b, %b)\n}\n')
    with pytest.raises(RlyError) as e:
        run_relay(text, {"x": x, "b": vec([0, 0, 0])})
    assert "begin has 3 entries but data has rank 2" in e.value.stderr
    out = run_relay(text, {"x": x, "b": vec([1])})
    assert out[0].shape == (0, 4)


# ---- dyn.tile ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,reps", [((2, 3), [2, 2]), ((2, 3), [3]), ((3,), [2, 1, 2]),
                                        ((), [3]), ((2, 3), []), ((2, 3), [0, 2]),
                                        ((1, 2, 2), [2, 1, 3])])
def test_tile(shape, reps):
    x = rand(shape, "int32", "tile")
    if reps and min(reps) > 0:  # tile's relation takes positive reps only; numpy also takes 0
        got = twin("dyn.tile({0}, {1})", [x, vec(reps, "int32")],
                   "tile({0}, reps=%s)" % fmt_attr(reps), [x])
    else:
        got = run_op("dyn.tile({0}, {1})", x, vec(reps, "int32"))
    assert_close(got[0], np.tile(x, reps))


def test_tile_negative():
    err = run_op_error("dyn.tile({0}, {1})", rand((2,), "float32", "tile-n"), vec([2, -1]))
    assert "error: dyn.tile: reps [2, -1] has a negative entry" in err


# ---- dyn.full, dyn.zeros, dyn.ones --------------------------------------------------------------


@pytest.mark.parametrize("shape", [[2, 3], [4], [], [0, 5], [1, 2, 3, 1]])
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
def test_full(shape, dtype):
    fill = np.array(7, "int32")
    got = twin('dyn.full({0}, {1}, dtype="%s")' % dtype, [fill, vec(shape)],
               'full({0}, shape=%s, dtype="%s")' % (fmt_attr(shape), dtype), [fill])
    assert_close(got[0], np.full(shape, 7, dtype))


def test_full_fill_dtype():
    got = run_op("dyn.full({0}, {1})", np.array(-2.5, "float16"), vec([3, 2], "uint16"))
    assert_close(got[0], np.full((3, 2), -2.5, "float16"))


@pytest.mark.parametrize("op,fn", [("zeros", np.zeros), ("ones", np.ones)])
@pytest.mark.parametrize("shape,dtype", [([2, 3], "float32"), ([5], "int8"), ([], "float64"),
                                         ([3, 0], "int32"), ([2, 2, 2], "bool")])
def test_zeros_ones(op, fn, shape, dtype):
    got = twin('dyn.%s({0}, dtype="%s")' % (op, dtype), [vec(shape, "int32")],
               '%s(shape=%s, dtype="%s")' % (op, fmt_attr(shape), dtype), [])
    assert_close(got[0], fn(shape, dtype))


@pytest.mark.parametrize("call,args,msg", [
    ('dyn.zeros({0}, dtype="float32")', [vec([2, -1])], "shape [2, -1] has a negative size"),
    ('dyn.ones({0}, dtype="float32")', [vec([1 << 40, 1 << 40])],
     "shape [1099511627776, 1099511627776] makes a result of more than 2^62 elements"),
    ("dyn.full({0}, {1})", [np.array(1.0, "float32"), vec([-3])], "negative size"),
])
def test_init_errors(call, args, msg):
    err = run_op_error(call, *args)
    assert msg in err, err


# ---- dyn.one_hot ---------------------------------------------------------------------------------


def one_hot_ref(ind, on, off, depth, axis, dtype):
    hot = ind[..., None] == np.arange(depth)
    out = np.where(hot, on, off).astype(dtype)
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("shape,depth,axis", [((4,), 3, -1), ((2, 3), 5, 0), ((2, 3), 4, 1),
                                              ((), 3, 0), ((3,), 1, -1)])
def test_one_hot(shape, depth, axis):
    ind = np.asarray(case_rng(SEED, "oh", shape, depth).integers(-1, depth + 1, size=shape),
                     "int32")
    on, off = np.array(3.0, "float32"), np.array(-1.0, "float32")
    got = twin("dyn.one_hot({0}, {1}, {2}, {3}, axis=%d)" % axis,
               [ind, on, off, np.array(depth, "int64")],
               "one_hot({0}, {1}, {2}, depth=%d, axis=%d)" % (depth, axis), [ind, on, off])
    assert_close(got[0], one_hot_ref(ind, on, off, depth, axis, "float32"))


def test_one_hot_bad_depth():
    err = run_op_error("dyn.one_hot({0}, {1}, {2}, {3})", vec([0, 1], "int32"),
                       np.array(1, "int8"), np.array(0, "int8"), np.array(0, "int32"))
    assert "error: dyn.one_hot: depth must be positive, got 0" in err


# ---- dyn.topk ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,axis,k,ret,ascend", [
    ((5,), -1, 2, "both", False), ((3, 6), 1, 3, "values", False), ((3, 6), 0, 2, "indices", True),
    ((4, 5), -1, 0, "both", True), ((2, 3, 4), 1, 1, "both", False), ((4, 5), 1, 5, "values", True),
])
def test_topk(shape, axis, k, ret, ascend):
    x = case_rng(SEED, "topk", shape).permutation(int(np.prod(shape))).reshape(shape)
    x = x.astype("float32")
    attrs = 'axis=%d, ret_type="%s", is_ascend=%s, dtype="int64"' % (axis, ret, ascend)
    got = twin("dyn.topk({0}, {1}, %s)" % attrs, [x, np.array(k, "int32")],
               "topk({0}, k=%d, %s)" % (k, attrs), [x])
    order = np.argsort(x if ascend else -x, axis=axis, kind="stable")
    order = np.take(order, range(k if k >= 1 else shape[axis]), axis)
    want = {"both": [np.take_along_axis(x, order, axis), order],
            "values": [np.take_along_axis(x, order, axis)], "indices": [order]}[ret]
    for g, w in zip(got, want):
        assert_close(g, w)


def test_topk_k_too_large():
    err = run_op_error("dyn.topk({0}, {1})", rand((3, 4), "float32", "tk"), np.array(6, "int64"))
    assert "error: dyn.topk: k=6 is larger than axis 1 of size 4" in err


# ---- dyn.nn.pad ----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,pw,mode", [
    ((3, 4), [[1, 2], [0, 3]], "constant"),
    ((2, 3, 4), [[0, 0], [1, 1], [2, 0]], "edge"),
    ((3, 4), [[2, 1], [3, 3]], "reflect"),
    ((5, 4), [[-1, -2], [1, 0]], "constant"),
    ((4,), [[0, 0]], "constant"),
])
@pytest.mark.parametrize("idt", ["int64", "int32"])
def test_pad(shape, pw, mode, idt):
    x = rand(shape, "float32", "pad")
    value = np.array(1.5, "float32")
    got = twin('dyn.nn.pad({0}, {1}, {2}, pad_mode="%s")' % mode, [x, vec(pw, idt), value],
               'nn.pad({0}, {1}, pad_width=%s, pad_mode="%s")' % (fmt_attr(pw), mode),
               [x, value])
    if min(min(p) for p in pw) >= 0:
        kw = {"constant_values": 1.5} if mode == "constant" else {}
        assert_close(got[0], np.pad(x, pw, mode=mode, **kw))
    else:
        assert_close(got[0], np.pad(x, [[0, 0], [1, 0]], constant_values=1.5)[1:-2])


@pytest.mark.parametrize("pw,mode,msg", [
    ([[0, 0], [-5, 0]], "constant", "pad_width [-5, 0] on axis 1 removes more than its 4 elements"),
    ([[0, 0], [4, 0]], "reflect", "cannot pad axis 1 of extent 4 by [4, 0]"),
    ([[-1, 0], [0, 0]], "edge", "needs non-negative pad_width"),
    ([[0, 1 << 40], [0, 0]], "constant", "has an entry beyond 2^31 - 1"),
])
def test_pad_errors(pw, mode, msg):
    err = run_op_error('dyn.nn.pad({0}, {1}, {2}, pad_mode="%s")' % mode,
                       rand((3, 4), "float32", "pad-e"), vec(pw), np.array(0, "float32"))
    assert "error: dyn.nn.pad: " in err and msg in err, err


def test_pad_width_rows_checked_at_run_time():
    text = ('#[version = "0.0.5"]\ndef @main(%x: Tensor[(3, 4), float32], '
            '%p: Tensor[(?, 2), int64]) {\n  dyn.nn.pad(%x, %p, 0f)\n}\n')
    with pytest.raises(RlyError) as e:
        run_relay(text, {"x": rand((3, 4), "float32", "pr"), "p": vec([[1, 1]])})
    assert "pad_width has shape (1, 2) but data has rank 2" in e.value.stderr


# ---- dyn.squeeze, dyn.expand_dims ----------------------------------------------------------------


@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 4), [0]), ((1, 3, 1, 4), [2, 0]),
                                        ((1, 3, 1, 4), [-2]), ((1, 1), [0, 1]), ((2, 3), [])])
def test_squeeze(shape, axes):
    x = rand(shape, "float32", "sq")
    got = twin("dyn.squeeze({0}, {1})", [x, vec(axes, "int32")],
               "squeeze({0}, axis=%s)" % fmt_attr(axes), [x])
    assert_close(got[0], np.squeeze(x, tuple(axes)))


@pytest.mark.parametrize("axes,msg", [([1], "cannot squeeze axis 1 of size 3"),
                                      ([0, -3], "axis [0, -3] names axis 0 twice"),
                                      ([3], "axis [3]: 3 is out of range for a tensor of rank 3")])
def test_squeeze_errors(axes, msg):
    err = run_op_error("dyn.squeeze({0}, {1})", rand((1, 3, 1), "float32", "sq-e"), vec(axes))
    assert "error: dyn.squeeze: " in err and msg in err, err


@pytest.mark.parametrize("shape,axis,k", [((2, 3), 0, 1), ((2, 3), 2, 1), ((2, 3), -1, 2),
                                          ((2, 3), -3, 1), ((), 0, 3), ((2, 3), 1, 0)])
def test_expand_dims(shape, axis, k):
    x = rand(shape, "int8", "ed")
    got = twin("dyn.expand_dims({0}, {1}, num_newaxis=%d)" % k, [x, np.array(axis, "int64")],
               "expand_dims({0}, axis=%d, num_newaxis=%d)" % (axis, k), [x])
    pivot = axis if axis >= 0 else x.ndim + axis + 1
    assert_close(got[0], x.reshape(shape[:pivot] + (1,) * k + shape[pivot:]))


def test_expand_dims_axis_out_of_range():
    err = run_op_error("dyn.expand_dims({0}, {1})", rand((2, 3), "float32", "ed-e"),
                       np.array(4, "int32"))
    assert "error: dyn.expand_dims: axis 4 is out of range" in err


# ---- dyn.image.resize2d, dyn.nn.upsampling -------------------------------------------------------


@pytest.mark.parametrize("size,method,mode,layout", [
    ([8, 8], "nearest_neighbor", "asymmetric", "NCHW"),
    ([3, 7], "linear", "half_pixel", "NCHW"),
    ([6, 2], "cubic", "align_corners", "NHWC"),
    ([4, 4], "linear", "pytorch_half_pixel", "NHWC"),
])
def test_resize2d(size, method, mode, layout):
    x = rand((1, 3, 4, 4) if layout == "NCHW" else (1, 4, 4, 3), "float32", "rs", method)
    attrs = 'layout="%s", method="%s", coordinate_transformation_mode="%s"' % (layout, method, mode)
    got = twin("dyn.image.resize2d({0}, {1}, %s)" % attrs, [x, vec(size)],
               "image.resize2d({0}, size=%s, %s)" % (fmt_attr(size), attrs), [x])
    h, w = (2, 3) if layout == "NCHW" else (1, 2)
    assert got[0].shape[h] == size[0] and got[0].shape[w] == size[1]
    if method == "nearest_neighbor":  # integer factor 2: every pixel repeated
        want = x.repeat(2, axis=h).repeat(2, axis=w)
        assert_close(got[0], want)


def test_resize2d_bad_size():
    err = run_op_error("dyn.image.resize2d({0}, {1})", rand((1, 1, 2, 2), "float32", "rs-e"),
                       vec([0, 3]))
    assert "error: dyn.image.resize2d: size [0, 3] must be positive" in err


@pytest.mark.parametrize("sh,sw,method,align,sdt", [
    (2.0, 2.0, "nearest_neighbor", False, "float32"),
    (2.0, 3.0, "nearest_neighbor", False, "int32"),
    (1.5, 2.0, "bilinear", False, "float64"),
    (2.0, 1.0, "bilinear", True, "float32"),
    (0.5, 1.5, "bicubic", False, "float32"),
])
def test_upsampling(sh, sw, method, align, sdt):
    x = rand((2, 3, 4, 4), "float32", "up", method)
    attrs = 'method="%s", align_corners=%s' % (method, align)
    got = twin("dyn.nn.upsampling({0}, {1}, {2}, %s)" % attrs,
               [x, np.array(sh, sdt), np.array(sw, sdt)],
               "nn.upsampling({0}, scale_h=%r, scale_w=%r, %s)" % (sh, sw, attrs), [x])
    assert got[0].shape == (2, 3, int(np.round(4 * sh)), int(np.round(4 * sw)))
    if method == "nearest_neighbor":
        assert_close(got[0], x.repeat(int(sh), axis=2).repeat(int(sw), axis=3))


@pytest.mark.parametrize("sh,msg", [(-1.0, "scale_h must be a positive number, got -1"),
                                    (0.0, "scale_h must be a positive number"),
                                    (float("nan"), "scale_h must be a positive number"),
                                    (1e300, "scale_h 1e+300 makes a dimension of")])
def test_upsampling_bad_scale(sh, msg):
    err = run_op_error("dyn.nn.upsampling({0}, {1}, {2})", rand((1, 1, 2, 2), "float32", "up-e"),
                       np.array(sh, "float64"), np.array(2.0, "float32"))
    assert "error: dyn.nn.upsampling: " in err and msg in err, err


# ---- unknown input dims --------------------------------------------------------------------------


def test_all_ops_with_unknown_data_dims():
    """The data parameters typed with `?` dims: the kernels compute the shapes."""
    x = rand((2, 3), "float32", "dyn-all")
    assert_close(run_unknown_data("dyn.broadcast_to({0}, {1})", x, vec([4, 2, 3]))[0],
                 np.broadcast_to(x, (4, 2, 3)))
    assert_close(run_unknown_data("dyn.tile({0}, {1})", x, vec([2, 1]))[0], np.tile(x, (2, 1)))
    assert_close(run_unknown_data("dyn.strided_slice({0}, {1}, {2}, {3})", x, vec([1]), vec([2]),
                                  vec([1]))[0], x[1:2])
    assert_close(run_unknown_data("dyn.squeeze({0}, {1})", x[None], vec([0]))[0], x)
    assert_close(run_unknown_data("dyn.expand_dims({0}, {1})", x, np.array(1, "int32"))[0],
                 x[:, None])
    assert_close(run_unknown_data("dyn.nn.pad({0}, {1}, {2})", x, vec([[0, 1], [1, 0]]),
                                  np.array(0, "float32"))[0], np.pad(x, [[0, 1], [1, 0]]))
    got = run_unknown_data('dyn.topk({0}, {1}, ret_type="values")', x, np.array(2, "int64"))
    assert_close(got[0], -np.sort(-x, axis=1)[:, :2])
