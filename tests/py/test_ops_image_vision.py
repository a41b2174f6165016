"""test_ops_image_vision.py - the image.* and vision.* operators against numpy references.

The references below are written from TVM's topi semantics (python/tvm/topi/image/*.py,
python/tvm/topi/vision/**.py), as the reference kernels document them:
- "round" is round half away from zero (TVM's round is llvm.round); grid_sample's nearest uses
  round half to even (nearbyint);
- resize coordinates and weights are computed in double; a single output along an axis maps to
  0 (align_corners) or the box centre (tf_crop_and_resize);
- NMS sorts are stable (ties keep index order).

Random inputs come from a generator seeded by each case's parameters (zlib.crc32), so every case
is reproducible on its own. Tolerances: float32 rtol = atol = 1e-5, float16 1e-3, float64 1e-10,
integers exact.
"""
import itertools
import math
import zlib

import numpy as np
import pytest

from harness import assert_close, op_call, run_op, run_op_error

# ---- helpers ----------------------------------------------------------------------------------


def rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def f32(v):
    """A float attribute as the kernel sees it: attributes hold float32 values (as TVM's)."""
    if isinstance(v, (list, tuple)):
        return [f32(x) for x in v]
    return float(np.float32(v))


def round_away(x):
    return math.copysign(math.floor(abs(x) + 0.5), x)


TOL = {np.dtype("float16"): (1e-3, 1e-3), np.dtype("float32"): (1e-5, 1e-5),
       np.dtype("float64"): (1e-10, 1e-10)}


def check(got, want):
    want = np.asarray(want)
    rtol, atol = TOL.get(want.dtype, (0, 0))
    assert_close(got, want, rtol=rtol, atol=atol)


def cast_to(v, dtype):
    """A double converted to dtype as the kernels' stores do (truncate and saturate for ints)."""
    dtype = np.dtype(dtype)
    v = np.asarray(v, dtype=np.float64)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        v = np.where(np.isnan(v), 0, np.trunc(v))
        return np.clip(v, info.min, info.max).astype(dtype)
    return v.astype(dtype)


# ==== image.resize1d / 2d / 3d ===================================================================

MODES = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
         "tf_half_pixel_for_nn", "tf_crop_and_resize"]
ROUNDINGS = ["", "round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil"]


def resize_coord(mode, x, n_in, n_out, start, end):
    scale = n_in / n_out
    if mode == "half_pixel":
        return (x + 0.5) * scale - 0.5
    if mode == "align_corners":
        return (n_in - 1) / (n_out - 1) * x if n_out > 1 else 0.0
    if mode == "asymmetric":
        return scale * x
    if mode == "pytorch_half_pixel":
        return (x + 0.5) * scale - 0.5 if n_out > 1 else 0.0
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) * scale
    if n_out > 1:
        return start * (n_in - 1) + x * (end - start) * (n_in - 1) / (n_out - 1)
    return 0.5 * (start + end) * (n_in - 1)


def nearest_index(c, rounding):
    if rounding == "round":
        return round_away(c)
    if rounding == "floor":
        return math.floor(c + 1e-5)
    if rounding == "ceil":
        return math.ceil(c - 1e-5)
    if rounding == "round_prefer_floor":
        return math.ceil(c - 0.5)
    return math.floor(c + 0.5)


def cubic_w(t, a):
    t2, t3 = t * t, t * t * t
    return [a * (t3 - 2 * t2 + t), (a + 2) * t3 - (3 + a) * t2 + 1,
            -(a + 2) * t3 + (3 + 2 * a) * t2 - a * t, -a * t3 + a * t2]


def resize_taps(method, mode, rounding, alpha, exclude, x, n_in, n_out, start, end, int_div):
    c = resize_coord(mode, x, n_in, n_out, start, end)
    outside = mode == "tf_crop_and_resize" and (c < 0 or c > n_in - 1)

    def clamp(v):
        return int(min(max(v, 0), n_in - 1))

    if method == "nearest_neighbor":
        i = x // (n_out // n_in) if int_div else nearest_index(c, rounding)
        return [(clamp(i), 1.0)], outside
    f = math.floor(c)
    t = c - f
    if method == "linear":
        return [(clamp(f), 1.0 - t), (clamp(f + 1), t)], outside
    w = cubic_w(t, alpha)
    if exclude:
        w = [0.0 if (f - 1 + i < 0 or f - 1 + i >= n_in) else w[i] for i in range(4)]
        s = sum(w)
        w = [v / s for v in w]
    return [(clamp(f - 1 + i), w[i]) for i in range(4)], outside


def resize_ref(x, layout, spatial, size, method="linear", mode="half_pixel", rounding="round",
               alpha=-0.5, exclude=0, extrap=0.0, roi=None, out_dtype=None):
    n_sp = len(spatial)
    roi = f32(roi or [0.0] * (2 * n_sp))
    alpha, extrap = f32(alpha), f32(extrap)
    axes = [layout.index(a) for a in spatial]
    if rounding == "":
        rounding = "round" if mode == "align_corners" else "floor"
    out_shape = list(x.shape)
    taps = []
    for d, ax in enumerate(axes):
        out_shape[ax] = size[d]
        n_in, n_out = x.shape[ax], size[d]
        int_div = (n_sp == 2 and method == "nearest_neighbor" and mode == "asymmetric"
                   and n_out % n_in == 0 and (n_out // n_in) <= 1 / (1e-5 * n_in + 1e-5))
        taps.append([resize_taps(method, mode, rounding, alpha, exclude, o, n_in, n_out, roi[d],
                                 roi[n_sp + d], int_div) for o in range(n_out)])
    out_dtype = np.dtype(out_dtype or x.dtype)
    y = np.zeros(out_shape, dtype=out_dtype)
    xf = x.astype(np.float64)
    for idx in np.ndindex(*out_shape):
        per = [taps[d][idx[ax]] for d, ax in enumerate(axes)]
        if any(p[1] for p in per):
            y[idx] = cast_to(extrap, out_dtype)
            continue
        lists = [p[0] for p in per] + [[(0, 1.0)]] * (3 - n_sp)
        src = list(idx)
        if method == "nearest_neighbor":
            for d, ax in enumerate(axes):
                src[ax] = lists[d][0][0]
            y[idx] = x[tuple(src)].astype(out_dtype) if x.dtype.kind == "f" or \
                out_dtype.kind != "f" else x[tuple(src)]
            continue
        acc = 0.0
        for ia, wa in lists[2]:
            for ib, wb in lists[1]:
                for ic, wc in lists[0]:
                    w = wa * wb * wc
                    for d, ax in enumerate(axes):
                        src[ax] = (ic, ib, ia)[d]
                    acc += w * xf[tuple(src)]
        y[idx] = cast_to(acc, out_dtype)
    return y


def run_resize(op, x, layout, spatial, size, **kw):
    attrs = dict(size=size, layout=layout)
    names = dict(method="method", mode="coordinate_transformation_mode",
                 rounding="rounding_method", alpha="cubic_alpha", exclude="cubic_exclude",
                 extrap="extrapolation_value", roi="roi", out_dtype="out_dtype")
    for k, v in kw.items():
        attrs[names[k]] = v
    got = run_op(op_call(op, 1, **attrs), x)[0]
    check(got, resize_ref(x, layout, spatial, size, **kw))


ROI2 = [0.1, 0.2, 0.9, 0.7]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_resize2d_nearest(mode, rounding):
    x = rng("r2n", mode, rounding).standard_normal((1, 2, 4, 5)).astype(np.float32)
    for size in ([7, 9], [2, 3], [8, 10]):
        run_resize("image.resize2d", x, "NCHW", "HW", size, method="nearest_neighbor",
                   mode=mode, rounding=rounding, roi=ROI2, extrap=-7.0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [[7, 9], [2, 3], [1, 1]])
def test_resize2d_linear(mode, size):
    x = rng("r2l", mode, tuple(size)).standard_normal((2, 3, 4, 5)).astype(np.float32)
    run_resize("image.resize2d", x, "NCHW", "HW", size, method="linear", mode=mode, roi=ROI2,
               extrap=0.5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("alpha", [-0.5, -0.75])
def test_resize2d_cubic(mode, exclude, alpha):
    x = rng("r2c", mode, exclude, alpha).standard_normal((1, 2, 5, 4)).astype(np.float32)
    run_resize("image.resize2d", x, "NCHW", "HW", [8, 3], method="cubic", mode=mode,
               exclude=exclude, alpha=alpha, roi=ROI2)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW4c", "HWNC"])
@pytest.mark.parametrize("method", ["nearest_neighbor", "linear", "cubic"])
def test_resize2d_layouts(layout, method):
    shape = {"NHWC": (2, 4, 3, 3), "NCHW4c": (1, 2, 4, 3, 4), "HWNC": (4, 3, 2, 2)}[layout]
    x = rng("r2lay", layout, method).standard_normal(shape).astype(np.float32)
    run_resize("image.resize2d", x, layout, "HW", [6, 5], method=method, mode="align_corners")


@pytest.mark.parametrize("dtype,out_dtype,method", [
    ("float16", None, "linear"), ("float64", None, "cubic"), ("uint8", None, "linear"),
    ("uint8", None, "nearest_neighbor"), ("int32", "float32", "linear"),
    ("float32", "float16", "cubic"), ("int8", None, "cubic"), ("int64", None, "nearest_neighbor"),
])
def test_resize2d_dtypes(dtype, out_dtype, method):
    r = rng("r2dt", dtype, out_dtype, method)
    if np.dtype(dtype).kind == "f":
        x = r.standard_normal((1, 2, 3, 4)).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = r.integers(max(info.min, -100), min(info.max, 200), (1, 2, 3, 4)).astype(dtype)
    kw = dict(method=method, mode="half_pixel")
    if out_dtype:
        kw["out_dtype"] = out_dtype
    run_resize("image.resize2d", x, "NCHW", "HW", [5, 7], **kw)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("method", ["nearest_neighbor", "linear", "cubic"])
def test_resize1d(mode, method):
    x = rng("r1", mode, method).standard_normal((2, 3, 6)).astype(np.float32)
    for size in ([11], [4]):
        run_resize("image.resize1d", x, "NCW", "W", size, method=method, mode=mode,
                   roi=[0.2, 0.9], rounding="round_prefer_ceil", extrap=2.0)


def test_resize1d_nwc_int_div_not_applied():
    # TVM's 1-D resize maps nearest asymmetric by multiplication and rounding, even for integer
    # factors (only resize2d uses an integer division there).
    x = rng("r1nwc").standard_normal((1, 3, 2)).astype(np.float32)
    run_resize("image.resize1d", x, "NWC", "W", [9], method="nearest_neighbor",
               mode="asymmetric", rounding="round")


@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "asymmetric",
                                  "tf_crop_and_resize"])
@pytest.mark.parametrize("method", ["nearest_neighbor", "linear", "cubic"])
def test_resize3d(mode, method):
    x = rng("r3", mode, method).standard_normal((1, 2, 3, 4, 3)).astype(np.float32)
    run_resize("image.resize3d", x, "NCDHW", "DHW", [5, 3, 4], method=method, mode=mode,
               roi=[0.1, 0.0, 0.2, 0.8, 1.0, 0.9], extrap=-1.0, exclude=1)


def test_resize3d_ndhwc():
    x = rng("r3ndhwc").standard_normal((2, 3, 2, 4, 3)).astype(np.float32)
    run_resize("image.resize3d", x, "NDHWC", "DHW", [4, 4, 2], method="linear",
               mode="pytorch_half_pixel")


def test_resize2d_int_div_nearest():
    # Integer upscale with nearest/asymmetric: TVM's resize2d uses x // factor, whatever the
    # rounding method; "round" would give other indices.
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    got = run_op(op_call("image.resize2d", 1, size=[6, 8], method="nearest_neighbor",
                         coordinate_transformation_mode="asymmetric",
                         rounding_method="round"), x)[0]
    want = x[:, :, [0, 0, 1, 1, 2, 2]][:, :, :, [0, 0, 1, 1, 2, 2, 3, 3]]
    assert_close(got, want)


def test_resize2d_known_values():
    # align_corners bilinear 2x2 -> 3x3 is the midpoint average.
    x = np.array([[[[0.0, 2.0], [4.0, 6.0]]]], dtype=np.float32)
    got = run_op(op_call("image.resize2d", 1, size=[3, 3], method="linear",
                         coordinate_transformation_mode="align_corners"), x)[0]
    assert_close(got, np.array([[[[0, 1, 2], [2, 3, 4], [4, 5, 6]]]], dtype=np.float32))


def test_resize2d_onnx_nearest_example():
    # ONNX's resize_upsample_scales_nearest: half_pixel, round_prefer_floor, 2x2 -> 4x6.
    x = np.array([[[[1, 2], [3, 4]]]], dtype=np.float32)
    got = run_op(op_call("image.resize2d", 1, size=[4, 6], method="nearest_neighbor",
                         rounding_method="round_prefer_floor"), x)[0]
    want = np.array([[1, 1, 1, 2, 2, 2]] * 2 + [[3, 3, 3, 4, 4, 4]] * 2, dtype=np.float32)
    assert_close(got, want[None, None])


def test_resize2d_onnx_linear_align_corners_example():
    # ONNX's resize_upsample_scales_linear_align_corners: 2x2 -> 4x4.
    x = np.array([[[[1, 2], [3, 4]]]], dtype=np.float32)
    got = run_op(op_call("image.resize2d", 1, size=[4, 4],
                         coordinate_transformation_mode="align_corners"), x)[0]
    t = 1.0 / 3.0
    row = np.array([0, t, 2 * t, 1.0])
    want = 1 + row[None, :] + 2 * row[:, None]
    assert_close(got, want.astype(np.float32)[None, None], rtol=1e-6, atol=1e-6)


# ==== image.crop_and_resize ======================================================================


def crop_ref(x, boxes, box_ind, crop, layout, method, extrap, out_dtype=None):
    an, ah, aw = layout.index("N"), layout.index("H"), layout.index("W")
    ih, iw = x.shape[ah], x.shape[aw]
    out_shape = list(x.shape)
    out_shape[an], out_shape[ah], out_shape[aw] = len(boxes), crop[0], crop[1]
    out_dtype = np.dtype(out_dtype or x.dtype)
    y = np.zeros(out_shape, dtype=out_dtype)

    def coord(s, e, o, n_in, n_out):
        if n_out > 1:
            return s * (n_in - 1) + o * (e - s) * (n_in - 1) / (n_out - 1)
        return 0.5 * (s + e) * (n_in - 1)

    for idx in np.ndindex(*out_shape):
        b = idx[an]
        y1, x1, y2, x2 = [float(v) for v in boxes[b]]
        cy = coord(y1, y2, idx[ah], ih, crop[0])
        cx = coord(x1, x2, idx[aw], iw, crop[1])
        if not (0 <= cy <= ih - 1 and 0 <= cx <= iw - 1):
            y[idx] = cast_to(extrap, out_dtype)
            continue
        src = list(idx)
        src[an] = int(box_ind[b])

        def px(yy, xx):
            s = list(src)
            s[ah] = int(min(max(yy, 0), ih - 1))
            s[aw] = int(min(max(xx, 0), iw - 1))
            return float(x[tuple(s)])

        if method == "nearest_neighbor":
            y[idx] = cast_to(px(round_away(cy), round_away(cx)), out_dtype)
            continue
        fy, fx = math.floor(cy), math.floor(cx)
        ty, tx = cy - fy, cx - fx
        top = px(fy, fx) * (1 - tx) + px(fy, fx + 1) * tx
        bottom = px(fy + 1, fx) * (1 - tx) + px(fy + 1, fx + 1) * tx
        y[idx] = cast_to(top * (1 - ty) + bottom * ty, out_dtype)
    return y


BOXES = np.array([[0.0, 0.0, 1.0, 1.0], [0.1, 0.2, 0.6, 0.9], [-0.2, 0.3, 0.5, 1.3],
                  [0.7, 0.8, 0.2, 0.1]], dtype=np.float32)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("method", ["bilinear", "nearest_neighbor"])
@pytest.mark.parametrize("crop", [[3, 4], [1, 1], [5, 2]])
def test_crop_and_resize(layout, method, crop):
    shape = (2, 3, 5, 6) if layout == "NCHW" else (2, 5, 6, 3)
    x = rng("crop", layout, method, tuple(crop)).standard_normal(shape).astype(np.float32)
    ind = np.array([0, 1, 1, 0], dtype=np.int32)
    got = run_op(op_call("image.crop_and_resize", 3, crop_size=crop, layout=layout, method=method,
                         extrapolation_value=-3.5), x, BOXES, ind)[0]
    check(got, crop_ref(x, BOXES, ind, crop, layout, method, -3.5))


def test_crop_and_resize_out_dtype_int64_indices():
    x = rng("crop64").integers(0, 255, (2, 4, 4, 1)).astype(np.uint8)
    ind = np.array([1, 0, 1, 0], dtype=np.int64)
    got = run_op(op_call("image.crop_and_resize", 3, crop_size=[3, 3], layout="NHWC",
                         out_dtype="float32"), x, BOXES, ind)[0]
    check(got, crop_ref(x, BOXES, ind, [3, 3], "NHWC", "bilinear", 0.0, "float32"))


def test_crop_and_resize_bad_box_index():
    x = np.zeros((2, 1, 3, 3), dtype=np.float32)
    err = run_op_error(op_call("image.crop_and_resize", 3, crop_size=[2, 2]), x, BOXES,
                       np.array([0, 1, 2, 0], dtype=np.int32))
    assert "box_indices" in err and "out of range" in err


# ==== image.affine_grid ==========================================================================


def affine_ref(theta, h, w):
    ys = (2.0 - 1e-7) / (h - 1) if h > 1 else 0.0
    xs = (2.0 - 1e-7) / (w - 1) if w > 1 else 0.0
    gy = -1.0 + np.arange(h) * ys
    gx = -1.0 + np.arange(w) * xs
    t = theta.astype(np.float64)
    out = (t[:, :, 0, None, None] * gx[None, None, None, :]
           + t[:, :, 1, None, None] * gy[None, None, :, None] + t[:, :, 2, None, None])
    return out.astype(theta.dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("target", [[3, 4], [5, 5], [2, 7]])
def test_affine_grid(dtype, target):
    theta = rng("affine", dtype, tuple(target)).standard_normal((2, 2, 3)).astype(dtype)
    got = run_op(op_call("image.affine_grid", 1, target_shape=target), theta)[0]
    check(got, affine_ref(theta, *target))


def test_affine_grid_identity():
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], dtype=np.float64)
    got = run_op(op_call("image.affine_grid", 1, target_shape=[3, 3]), theta)[0]
    lin = -1.0 + np.arange(3) * (2.0 - 1e-7) / 2
    assert_close(got[0, 0], np.tile(lin, (3, 1)), rtol=1e-12, atol=1e-12)
    assert_close(got[0, 1], np.tile(lin[:, None], (1, 3)), rtol=1e-12, atol=1e-12)


# ==== image.grid_sample ==========================================================================


def gs_reflect(x, size, align):
    corner = 0.0 if align else -0.5
    span = size - 1 if align else size
    if corner <= x <= span + corner:
        return x
    if span <= 0:
        return 0.0
    d = abs(corner - x)
    times = int(d) // span
    extra = d - times * span
    return extra + corner if times % 2 == 0 else span - extra + corner


def gs_clip(x, size):
    return min(max(x, 0.0), size - 1.0)


def gs_cubic(t):
    a = -0.75
    u, v, z = t + 1, 1 - t, 2 - t
    return [((a * u - 5 * a) * u + 8 * a) * u - 4 * a, ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * v - (a + 3)) * v * v + 1, ((a * z - 5 * a) * z + 8 * a) * z - 4 * a]


def grid_sample_ref(x, grid, method, pad, align):
    n_sp = x.ndim - 2
    sizes = x.shape[2:]
    out = np.zeros(x.shape[:2] + grid.shape[2:], dtype=np.float64)
    xf = x.astype(np.float64)
    for idx in np.ndindex(*out.shape):
        b, c, sp = idx[0], idx[1], idx[2:]
        coords = []
        for d in range(n_sp):
            v = float(grid[(b, n_sp - 1 - d) + sp])
            s = sizes[d]
            cc = (v + 1) * (s - 1) / 2 if align else -0.5 + (v + 1) * s / 2
            if method != "bicubic":
                if pad == "reflection":
                    cc = gs_clip(gs_reflect(cc, s, align), s)
                elif pad == "border":
                    cc = gs_clip(cc, s)
            coords.append(cc)

        def pixel(p):
            if all(0 <= p[d] < sizes[d] for d in range(n_sp)):
                return xf[(b, c) + tuple(int(v) for v in p)]
            return 0.0

        if method == "nearest":
            out[idx] = pixel([float(np.rint(v)) for v in coords])
        elif method == "bilinear":
            f = [math.floor(v) for v in coords]
            t = [coords[d] - f[d] for d in range(n_sp)]
            acc = 0.0
            for hi in itertools.product([0, 1], repeat=n_sp):
                w = 1.0
                for d in range(n_sp):
                    w *= t[d] if hi[d] else 1 - t[d]
                acc += pixel([f[d] + hi[d] for d in range(n_sp)]) * w
            out[idx] = acc
        else:
            fy, fx = math.floor(coords[0]), math.floor(coords[1])
            wy, wx = gs_cubic(coords[0] - fy), gs_cubic(coords[1] - fx)
            acc = 0.0
            for a in range(4):
                row = 0.0
                for bb in range(4):
                    p = [fy - 1 + a, fx - 1 + bb]
                    for d in range(2):
                        if pad == "reflection":
                            p[d] = gs_reflect(p[d], sizes[d], align)
                        if pad != "zeros":
                            p[d] = math.trunc(gs_clip(p[d], sizes[d]))
                    row += pixel(p) * wx[bb]
                acc += row * wy[a]
            out[idx] = acc
    return out.astype(x.dtype)


@pytest.mark.parametrize("method", ["nearest", "bilinear", "bicubic"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [True, False])
def test_grid_sample_2d(method, pad, align):
    r = rng("gs2", method, pad, align)
    x = r.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = (r.uniform(-1.6, 1.6, (2, 2, 3, 6))).astype(np.float32)
    grid[0, :, 0, 0] = [1.0, -1.0]  # exact corners
    grid[0, :, 0, 1] = [0.25, 0.5]
    got = run_op(op_call("image.grid_sample", 2, method=method, padding_mode=pad,
                         align_corners=align), x, grid)[0]
    check(got, grid_sample_ref(x, grid, method, pad, align))


@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [True, False])
def test_grid_sample_3d(method, pad, align):
    r = rng("gs3", method, pad, align)
    x = r.standard_normal((1, 2, 3, 4, 3)).astype(np.float32)
    grid = r.uniform(-1.5, 1.5, (1, 3, 2, 3, 2)).astype(np.float32)
    got = run_op(op_call("image.grid_sample", 2, method=method, padding_mode=pad,
                         align_corners=align, layout="NCDHW"), x, grid)[0]
    check(got, grid_sample_ref(x, grid, method, pad, align))


@pytest.mark.parametrize("method", ["nearest", "bilinear", "bicubic"])
def test_grid_sample_nhwc_layout(method):
    r = rng("gsnhwc", method)
    x = r.standard_normal((2, 4, 5, 3)).astype(np.float32)
    grid = r.uniform(-1.2, 1.2, (2, 2, 3, 4)).astype(np.float32)
    got = run_op(op_call("image.grid_sample", 2, method=method, layout="NHWC",
                         padding_mode="border"), x, grid)[0]
    want = grid_sample_ref(np.transpose(x, (0, 3, 1, 2)), grid, method, "border", True)
    check(got, np.transpose(want, (0, 2, 3, 1)))


def test_grid_sample_affine_identity():
    # affine_grid of the identity then bilinear sampling with align_corners gives the input back
    # (up to the 1e-7 step fudge).
    x = rng("gsid").standard_normal((1, 2, 4, 5)).astype(np.float64)
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], dtype=np.float64)
    grid = run_op(op_call("image.affine_grid", 1, target_shape=[4, 5]), theta)[0]
    got = run_op(op_call("image.grid_sample", 2), x, grid)[0]
    assert_close(got, x, rtol=1e-5, atol=1e-5)


# ==== image.dilation2d ===========================================================================


def dilation_ref(x, w, strides, padding, dilations, dl, kl, out_dtype=None):
    xc = np.transpose(x, [dl.index(a) for a in "NCHW"])
    wc = np.transpose(w, [kl.index(a) for a in "IHW"])
    if len(padding) == 1:
        pt = pl = pb = pr = padding[0]
    elif len(padding) == 2:
        pt, pl = padding
        pb, pr = padding
    else:
        pt, pl, pb, pr = padding
    out_dtype = np.dtype(out_dtype or x.dtype)
    n, c, h, wd = xc.shape
    _, kh, kw = wc.shape
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr), dtype=np.float64)
    xp[:, :, pt:pt + h, pl:pl + wd] = xc
    oh = (h + pt + pb - ((kh - 1) * dilations[0] + 1)) // strides[0] + 1
    ow = (wd + pl + pr - ((kw - 1) * dilations[1] + 1)) // strides[1] + 1
    out = np.full((n, c, oh, ow), -np.inf)
    for ry in range(kh):
        for rx in range(kw):
            ys = ry * dilations[0]
            xs = rx * dilations[1]
            win = xp[:, :, ys:ys + (oh - 1) * strides[0] + 1:strides[0],
                     xs:xs + (ow - 1) * strides[1] + 1:strides[1]]
            out = np.maximum(out, win + wc[None, :, ry, rx, None, None])
    out = cast_to(out, out_dtype)
    return np.transpose(out, ["NCHW".index(a) for a in dl])


@pytest.mark.parametrize("dl,kl", [("NCHW", "IHW"), ("NHWC", "HWI")])
@pytest.mark.parametrize("strides,padding,dilations", [
    ([1, 1], [0, 0], [1, 1]), ([2, 1], [1, 1], [1, 1]), ([1, 2], [1, 0, 2, 1], [2, 1]),
    ([1, 1], [2], [2, 2]),
])
def test_dilation2d(dl, kl, strides, padding, dilations):
    r = rng("dil", dl, tuple(strides), tuple(padding), tuple(dilations))
    xs = {"NCHW": (2, 3, 6, 7), "NHWC": (2, 6, 7, 3)}[dl]
    ws = {"IHW": (3, 2, 3), "HWI": (2, 3, 3)}[kl]
    x = r.standard_normal(xs).astype(np.float32)
    w = r.standard_normal(ws).astype(np.float32)
    got = run_op(op_call("image.dilation2d", 2, strides=strides, padding=padding,
                         dilations=dilations, data_layout=dl, kernel_layout=kl), x, w)[0]
    check(got, dilation_ref(x, w, strides, padding, dilations, dl, kl))


def test_dilation2d_int32():
    r = rng("dil32")
    x = r.integers(-50, 50, (1, 2, 5, 5)).astype(np.int32)
    w = r.integers(-5, 5, (2, 3, 3)).astype(np.int32)
    got = run_op(op_call("image.dilation2d", 2, padding=[1, 1]), x, w)[0]
    check(got, dilation_ref(x, w, [1, 1], [1, 1], [1, 1], "NCHW", "IHW"))


# ==== vision.roi_align / roi_pool ================================================================

ROIS = np.array([[0, 1.0, 1.0, 6.0, 5.0], [1, 0.5, 2.0, 3.5, 7.5], [0, 4.0, 3.0, 4.2, 3.1],
                 [1, -2.0, -1.0, 9.0, 10.0], [0, 6.5, 6.5, 12.0, 12.0]], dtype=np.float32)


def to_nchw(x, layout):
    return x if layout == "NCHW" else np.transpose(x, (0, 3, 1, 2))


def from_nchw(y, layout):
    return y if layout == "NCHW" else np.transpose(y, (0, 2, 3, 1))


def roi_align_ref(x, rois, pooled, scale, sample_ratio, mode, layout):
    xc = to_nchw(x, layout).astype(np.float64)
    scale = f32(scale)
    _, c, h, w = xc.shape
    ph_n, pw_n = pooled
    out = np.zeros((len(rois), c, ph_n, pw_n))

    def bil(b, ch, yy, xx):
        if yy < -1 or xx < -1 or yy > h or xx > w:
            return 0.0
        yy = min(max(yy, 0.0), h - 1)
        xx = min(max(xx, 0.0), w - 1)
        y0, x0 = int(yy), int(xx)
        y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
        ly, lx = yy - y0, xx - x0
        return (xc[b, ch, y0, x0] * (1 - lx) * (1 - ly) + xc[b, ch, y0, x1] * lx * (1 - ly)
                + xc[b, ch, y1, x0] * (1 - lx) * ly + xc[b, ch, y1, x1] * lx * ly)

    for r, roi in enumerate(rois.astype(np.float64)):
        b = int(roi[0])
        sw, sh, ew, eh = roi[1] * scale, roi[2] * scale, roi[3] * scale, roi[4] * scale
        rh, rw = max(eh - sh, 1.0), max(ew - sw, 1.0)
        bh, bw = rh / ph_n, rw / pw_n
        gh = sample_ratio if sample_ratio > 0 else int(math.ceil(rh / ph_n))
        gw = sample_ratio if sample_ratio > 0 else int(math.ceil(rw / pw_n))
        for ch in range(c):
            for ph in range(ph_n):
                for pw in range(pw_n):
                    vals = [bil(b, ch, sh + ph * bh + (iy + 0.5) * bh / gh,
                                sw + pw * bw + (ix + 0.5) * bw / gw)
                            for iy in range(gh) for ix in range(gw)]
                    out[r, ch, ph, pw] = max(vals) if mode == "max" else \
                        sum(v / (gh * gw) for v in vals)
    return from_nchw(out, layout).astype(x.dtype)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("sample_ratio", [-1, 2])
@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_roi_align(layout, mode, sample_ratio, scale):
    shape = (2, 3, 8, 9) if layout == "NCHW" else (2, 8, 9, 3)
    x = rng("ra", layout, mode, sample_ratio, scale).standard_normal(shape).astype(np.float32)
    got = run_op(op_call("vision.roi_align", 2, pooled_size=[3, 2], spatial_scale=scale,
                         sample_ratio=sample_ratio, layout=layout, mode=mode), x, ROIS)[0]
    check(got, roi_align_ref(x, ROIS, [3, 2], scale, sample_ratio, mode, layout))


def roi_pool_ref(x, rois, pooled, scale, layout):
    xc = to_nchw(x, layout)
    scale = f32(scale)
    _, c, h, w = xc.shape
    ph_n, pw_n = pooled
    out = np.zeros((len(rois), c, ph_n, pw_n), dtype=x.dtype)
    for r, roi in enumerate(rois.astype(np.float64)):
        b = int(roi[0])
        sw, sh, ew, eh = [int(round_away(v * scale)) for v in roi[1:]]
        rh, rw = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        bh, bw = rh / ph_n, rw / pw_n
        for ph in range(ph_n):
            for pw in range(pw_n):
                hs = min(max(math.floor(ph * bh + 1e-5) + sh, 0), h)
                he = min(max(math.ceil((ph + 1) * bh - 1e-5) + sh, 0), h)
                ws = min(max(math.floor(pw * bw + 1e-5) + sw, 0), w)
                we = min(max(math.ceil((pw + 1) * bw - 1e-5) + sw, 0), w)
                if hs < he and ws < we:
                    out[r, :, ph, pw] = xc[b, :, hs:he, ws:we].max(axis=(1, 2))
    return from_nchw(out, layout)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("pooled,scale", [([2, 2], 1.0), ([3, 4], 0.5), ([1, 1], 1.0)])
def test_roi_pool(layout, pooled, scale):
    shape = (2, 2, 8, 9) if layout == "NCHW" else (2, 8, 9, 2)
    x = rng("rp", layout, tuple(pooled), scale).standard_normal(shape).astype(np.float32)
    got = run_op(op_call("vision.roi_pool", 2, pooled_size=pooled, spatial_scale=scale,
                         layout=layout), x, ROIS)[0]
    check(got, roi_pool_ref(x, ROIS, pooled, scale, layout))


def test_roi_pool_int_data():
    x = rng("rpi").integers(-100, 100, (2, 2, 8, 9)).astype(np.int16)
    got = run_op(op_call("vision.roi_pool", 2, pooled_size=[2, 3], spatial_scale=1.0), x, ROIS)[0]
    check(got, roi_pool_ref(x, ROIS, [2, 3], 1.0, "NCHW"))


@pytest.mark.parametrize("op", ["vision.roi_align", "vision.roi_pool"])
def test_roi_batch_index_out_of_range(op):
    x = np.zeros((2, 1, 4, 4), dtype=np.float32)
    rois = np.array([[2, 0, 0, 2, 2]], dtype=np.float32)
    err = run_op_error(op_call(op, 2, pooled_size=[1, 1], spatial_scale=1.0), x, rois)
    assert "batch index" in err


# ==== vision.get_valid_counts / non_max_suppression ==============================================


def boxes_data(key, b, n, k=6, n_cls=3, neg_ids=True):
    """(b, n, k) rows (class id, score, x1, y1, x2, y2, ...) with clustered, overlapping boxes."""
    r = rng(*key)
    d = np.zeros((b, n, k), dtype=np.float32)
    d[:, :, 0] = r.integers(-1 if neg_ids else 0, n_cls, (b, n))
    d[:, :, 1] = r.permutation(b * n).reshape(b, n) / (b * n) + 0.01  # distinct scores
    centers = r.uniform(0.2, 0.8, (b, n, 2)).round(1)
    size = r.uniform(0.1, 0.4, (b, n, 2))
    d[:, :, 2:4] = centers - size / 2
    d[:, :, 4:6] = centers + size / 2
    swap = r.random((b, n)) < 0.2  # some boxes with their corners given in the other order
    d[swap, 2:6] = d[swap][:, [4, 5, 2, 3]]
    if k > 6:
        d[:, :, 6:] = r.standard_normal((b, n, k - 6))
    return d


def gvc_ref(data, thr, id_index, score_index):
    b, n, k = data.shape
    out = np.full_like(data, -1)
    idx = np.full((b, n), -1, dtype=np.int32)
    cnt = np.zeros(b, dtype=np.int32)
    for i in range(b):
        for j in range(n):
            if data[i, j, score_index] > thr and (id_index < 0 or data[i, j, id_index] >= 0):
                out[i, cnt[i]] = data[i, j]
                idx[i, cnt[i]] = j
                cnt[i] += 1
    return cnt, out, idx


@pytest.mark.parametrize("thr", [0.0, 0.3, 0.7, 2.0])
@pytest.mark.parametrize("id_index,score_index", [(0, 1), (-1, 1), (1, 0)])
def test_get_valid_counts(thr, id_index, score_index):
    data = boxes_data(("gvc", thr, id_index), 2, 7)
    got = run_op(op_call("vision.get_valid_counts", 2, id_index=id_index, score_index=score_index),
                 data, np.float32(thr))
    want = gvc_ref(data, thr, id_index, score_index)
    for g, w in zip(got, want):
        check(g, w)


def iou_corners(a, b):
    al, at, ar, ab = min(a[0], a[2]), min(a[1], a[3]), max(a[0], a[2]), max(a[1], a[3])
    bl, bt, br, bb = min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])
    w = max(0.0, min(ar, br) - max(al, bl))
    h = max(0.0, min(ab, bb) - max(at, bt))
    area = w * h
    u = (ar - al) * (ab - at) + (br - bl) * (bb - bt) - area
    return 0.0 if u <= 0 else area / u


def stable_desc(scores):
    return sorted(range(len(scores)), key=lambda j: -scores[j])


def nms_ref(data, valid_count, indices, max_out, iou_thr, force, top_k, cs, si, ii, ret_idx,
            to_bottom):
    b_n, n, k = data.shape
    data64 = data.astype(np.float64)
    outs, idx_out, cnt_out = [], np.full((b_n, n), -1, dtype=np.int32), np.zeros((b_n, 1),
                                                                                  np.int32)
    for i in range(b_n):
        vc = int(valid_count[i])
        work = np.full((n, k), -1.0)
        box_idx = [-1] * n
        if iou_thr > 0:
            if vc > 0:
                order = stable_desc([data64[i, j, si] for j in range(vc)])
                keep = top_k if 0 < top_k < vc else vc
                for j in range(keep):
                    work[j] = data64[i, order[j]]
                    box_idx[j] = order[j]
            kept = 0
            for j in range(vc):
                if kept == max_out:
                    work[j], box_idx[j] = -1.0, -1
                    continue
                if not work[j, si] > 0:
                    continue
                valid = True
                for q in range(j):
                    if not valid:
                        break
                    if not work[q, si] > 0:
                        continue
                    if ii >= 0 and not work[q, ii] >= 0:
                        continue
                    if not force and ii >= 0 and work[j, ii] != work[q, ii]:
                        continue
                    if iou_corners(work[j, cs:cs + 4], work[q, cs:cs + 4]) >= iou_thr:
                        valid = False
                if valid:
                    kept += 1
                else:
                    work[j], box_idx[j] = -1.0, -1
        else:
            for j in range(vc):
                work[j] = data64[i, j]
                box_idx[j] = j
        if ret_idx:
            sel = [int(indices[i, box_idx[j]]) for j in range(vc) if box_idx[j] >= 0]
            idx_out[i, :len(sel)] = sel
            cnt_out[i, 0] = len(sel)
        elif to_bottom:
            rows = [work[j] for j in range(n) if work[j, 0] >= 0]
            packed = np.full((n, k), -1.0)
            if rows:
                packed[:len(rows)] = rows
            outs.append(packed)
        else:
            outs.append(work)
    if ret_idx:
        return [idx_out, cnt_out]
    return [np.array(outs).astype(data.dtype)]


NMS_CASES = [
    dict(),
    dict(force_suppress=True),
    dict(top_k=3),
    dict(top_k=3, force_suppress=True, return_indices=False),
    dict(return_indices=False),
    dict(return_indices=False, invalid_to_bottom=True),
    dict(id_index=-1),
    dict(id_index=-1, return_indices=False, invalid_to_bottom=True),
    dict(max_output_size=2),
    dict(max_output_size=0, return_indices=False),
    dict(iou_threshold=0.0),
    dict(iou_threshold=-1.0, return_indices=False),
    dict(iou_threshold=0.05, top_k=5),
    dict(iou_threshold=0.9, max_output_size=4, force_suppress=True),
]


@pytest.mark.parametrize("case", range(len(NMS_CASES)))
@pytest.mark.parametrize("use_gvc", [True, False])
def test_non_max_suppression(case, use_gvc):
    kw = dict(NMS_CASES[case])
    max_out = kw.pop("max_output_size", -1)
    iou = kw.pop("iou_threshold", 0.3)
    data = boxes_data(("nms", case, use_gvc), 2, 9)
    if use_gvc:
        vc, data_in, indices = gvc_ref(data, 0.2, 0, 1)
    else:
        vc = np.array([9, 6], dtype=np.int32)
        data_in, indices = data, np.tile(np.arange(9, dtype=np.int32), (2, 1))
    full = dict(force_suppress=False, top_k=-1, coord_start=2, score_index=1, id_index=0,
                return_indices=True, invalid_to_bottom=False)
    full.update(kw)
    got = run_op(op_call("vision.non_max_suppression", 5, **kw), data_in, vc, indices,
                 np.int32(max_out), np.float32(iou))
    want = nms_ref(data_in, vc, indices, max_out, iou, full["force_suppress"], full["top_k"],
                   full["coord_start"], full["score_index"], full["id_index"],
                   full["return_indices"], full["invalid_to_bottom"])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


def test_nms_int64_counts_float64_data():
    data = boxes_data(("nms64",), 2, 6).astype(np.float64)
    vc = np.array([6, 4], dtype=np.int64)
    ind = np.tile(np.arange(6, dtype=np.int64)[::-1], (2, 1))
    got = run_op(op_call("vision.non_max_suppression", 5, force_suppress=True), data, vc, ind,
                 np.int32(3), np.float64(0.25))
    want = nms_ref(data, vc, ind, 3, 0.25, True, -1, 2, 1, 0, True, False)
    for g, w in zip(got, want):
        check(g, w)


def test_get_valid_counts_float64():
    data = boxes_data(("gvc64",), 1, 5, k=7).astype(np.float64)
    got = run_op(op_call("vision.get_valid_counts", 2), data, np.float64(0.4))
    for g, w in zip(got, gvc_ref(data, 0.4, 0, 1)):
        check(g, w)


def test_nms_coord_start_and_score_index():
    # boxes laid out as (score, x1, y1, x2, y2, id): coord_start 1, score 0, id 5
    d = boxes_data(("nms_cs",), 1, 8)
    data = np.concatenate([d[:, :, 1:2], d[:, :, 2:6], d[:, :, 0:1]], axis=2)
    vc = np.array([8], dtype=np.int32)
    ind = np.arange(8, dtype=np.int32)[None]
    got = run_op(op_call("vision.non_max_suppression", 5, coord_start=1, score_index=0, id_index=5,
                         return_indices=False), data, vc, ind, np.int64(-1), np.float32(0.2))
    want = nms_ref(data, vc, ind, -1, 0.2, False, -1, 1, 0, 5, False, False)
    check(got[0], want[0])


def test_nms_bad_valid_count():
    data = boxes_data(("nms_bad",), 1, 4)
    err = run_op_error(op_call("vision.non_max_suppression", 5), data,
                       np.array([5], dtype=np.int32), np.zeros((1, 4), np.int32), np.int32(-1),
                       np.float32(0.5))
    assert "valid_count" in err


def test_get_valid_counts_then_nms_known():
    # Two overlapping boxes of class 0 and one separate: the lower-scored overlap goes.
    data = np.array([[[0, 0.9, 0, 0, 1, 1], [0, 0.8, 0.1, 0.1, 1.1, 1.1],
                      [1, 0.7, 0.1, 0.1, 1.1, 1.1], [0, 0.05, 3, 3, 4, 4]]], dtype=np.float32)
    vc, d2, ind = run_op(op_call("vision.get_valid_counts", 2), data, np.float32(0.1))
    assert_close(vc, np.array([3], dtype=np.int32))
    sel, cnt = run_op(op_call("vision.non_max_suppression", 5), d2, vc, ind, np.int32(-1),
                      np.float32(0.5))
    assert_close(sel, np.array([[0, 2, -1, -1]], dtype=np.int32))
    assert_close(cnt, np.array([[2]], dtype=np.int32))


# ==== vision.all_class_non_max_suppression =======================================================


def all_class_ref(boxes, scores, max_out, iou_thr, score_thr, fmt):
    b_n, n, _ = boxes.shape
    c_n = scores.shape[1]
    b64, s64 = boxes.astype(np.float64), scores.astype(np.float64)
    onnx_rows, tf_idx, tf_sc, tf_cnt = [], np.zeros((b_n, c_n * n, 2), np.int64), \
        np.zeros((b_n, c_n * n), np.float32), np.zeros(b_n, np.int64)
    for b in range(b_n):
        row = 0
        for c in range(c_n):
            order = stable_desc(list(s64[b, c]))
            live = [s64[b, c, j] for j in order]
            cand = sum(1 for v in live if v > score_thr)
            limit = max_out if max_out > 0 else cand
            sel = 0
            for j in range(cand):
                if not (iou_thr > 0 and sel < limit):
                    break
                if not live[j] > -1.0:
                    continue
                if fmt == "onnx":
                    onnx_rows.append([b, c, order[j]])
                else:
                    tf_idx[b, row] = [c, order[j]]
                    tf_sc[b, row] = live[j]
                    row += 1
                sel += 1
                for q in range(j + 1, cand):
                    if live[q] > 0 and iou_corners(b64[b, order[j]], b64[b, order[q]]) >= iou_thr:
                        live[q] = -1.0
        tf_cnt[b] = row
    if fmt == "onnx":
        sel = np.zeros((b_n * c_n * n, 3), np.int64)
        if onnx_rows:
            sel[:len(onnx_rows)] = onnx_rows
        return [sel, np.array([len(onnx_rows)], np.int64)]
    return [tf_idx, tf_sc, tf_cnt]


@pytest.mark.parametrize("fmt", ["onnx", "tensorflow"])
@pytest.mark.parametrize("max_out,iou,score_thr", [
    (10, 0.5, 0.0), (2, 0.5, 0.2), (-1, 0.3, 0.1), (0, 0.7, -1.0), (3, 0.0, 0.0),
    (1, 1.0, 0.5),
])
def test_all_class_nms(fmt, max_out, iou, score_thr):
    r = rng("acnms", fmt, max_out, iou, score_thr)
    d = boxes_data(("acnms_b", fmt, max_out, iou, score_thr), 2, 8)
    boxes = d[:, :, 2:6].copy()
    scores = r.permutation(2 * 3 * 8).reshape(2, 3, 8).astype(np.float32) / 48.0
    got = run_op(op_call("vision.all_class_non_max_suppression", 5, output_format=fmt), boxes,
                 scores, np.int64(max_out), np.float32(iou), np.float32(score_thr))
    want = all_class_ref(boxes, scores, max_out, iou, score_thr, fmt)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


def test_all_class_nms_known():
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11],
                       [0, 10.1, 1, 11.1], [0, 100, 1, 101]]], dtype=np.float32)
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], dtype=np.float32)
    sel, n = run_op(op_call("vision.all_class_non_max_suppression", 5), boxes, scores,
                    np.int64(3), np.float32(0.5), np.float32(0.0))
    assert int(n[0]) == 3
    assert_close(sel[:3], np.array([[0, 0, 3], [0, 0, 0], [0, 0, 5]], dtype=np.int64))


# ==== vision.regular_non_max_suppression =========================================================


def tfl_iou(a, b):
    aa = (a[2] - a[0]) * (a[3] - a[1])
    ab = (b[2] - b[0]) * (b[3] - b[1])
    if not (aa > 0 and ab > 0):
        return 0.0
    ih = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    iw = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = ih * iw
    return inter / (aa + ab - inter)


def regular_nms_ref(boxes, scores, per_class, max_det, n_cls, iou_thr, score_thr):
    b_n, n, c_all = scores.shape
    iou_thr, score_thr = f32(iou_thr), f32(score_thr)
    off = c_all - n_cls
    b64, s64 = boxes.astype(np.float64), scores.astype(np.float64)
    ob = np.zeros((b_n, max_det, 4), np.float32)
    oc = np.zeros((b_n, max_det), np.float32)
    os_ = np.zeros((b_n, max_det), np.float32)
    on = np.zeros(b_n, np.int32)
    for b in range(b_n):
        merged = []  # (score, box, class)
        for c in range(n_cls):
            cand = [j for j in range(n) if s64[b, j, c + off] >= score_thr]
            cand = sorted(cand, key=lambda j: -s64[b, j, c + off])  # stable
            active = [True] * len(cand)
            sel = []
            for i in range(len(cand)):
                if len(sel) >= min(per_class, len(cand)) or not active[i]:
                    continue
                sel.append(cand[i])
                active[i] = False
                for q in range(i + 1, len(cand)):
                    if active[q] and tfl_iou(b64[b, cand[i]], b64[b, cand[q]]) > iou_thr:
                        active[q] = False
            merged = merged + [(s64[b, j, c + off], j, c) for j in sel]
            merged = sorted(merged, key=lambda t: -t[0])[:max_det]
        for r, (s, j, c) in enumerate(merged):
            ob[b, r] = b64[b, j]
            oc[b, r] = c
            os_[b, r] = s
        on[b] = len(merged)
    return [ob, oc, os_, on]


@pytest.mark.parametrize("per_class,max_det,n_cls,iou,score_thr", [
    (3, 5, 3, 0.5, 0.1), (1, 4, 2, 0.3, 0.0), (10, 10, 3, 0.6, 0.4), (2, 2, 1, 0.5, 0.0),
    (4, 6, 3, 0.0, 0.2),
])
def test_regular_nms(per_class, max_det, n_cls, iou, score_thr):
    r = rng("rnms", per_class, max_det, n_cls, iou, score_thr)
    centers = r.uniform(0.2, 0.8, (2, 8, 2)).round(1)
    size = r.uniform(0.1, 0.4, (2, 8, 2))
    boxes = np.concatenate([centers - size / 2, centers + size / 2], axis=2).astype(np.float32)
    scores = (r.permutation(2 * 8 * 4).reshape(2, 8, 4) / 64.0).astype(np.float32)
    got = run_op(op_call("vision.regular_non_max_suppression", 2,
                         max_detections_per_class=per_class, max_detections=max_det,
                         num_classes=n_cls, iou_threshold=iou, score_threshold=score_thr),
                 boxes, scores)
    want = regular_nms_ref(boxes, scores, per_class, max_det, n_cls, iou, score_thr)
    assert len(got) == 4
    for g, w in zip(got, want):
        check(g, w)


# ==== vision.multibox_prior / multibox_transform_loc =============================================


def prior_ref(shape, sizes, ratios, steps, offsets, clip, dtype):
    sizes, ratios, steps, offsets = f32(sizes), f32(ratios), f32(steps), f32(offsets)
    h, w = shape[2], shape[3]
    sh = steps[0] if steps[0] > 0 else 1.0 / h
    sw = steps[1] if steps[1] > 0 else 1.0 / w
    out = []
    for i in range(h):
        cy = (i + offsets[0]) * sh
        for j in range(w):
            cx = (j + offsets[1]) * sw
            for k in range(len(sizes) + len(ratios) - 1):
                if k < len(sizes):
                    bw, bh = sizes[k] * h / w / 2.0, sizes[k] / 2.0
                else:
                    rr = math.sqrt(ratios[k - len(sizes) + 1])
                    bw, bh = sizes[0] * h / w * rr / 2.0, sizes[0] / rr / 2.0
                out.append([cx - bw, cy - bh, cx + bw, cy + bh])
    out = np.array(out)[None]
    if clip:
        out = np.clip(out, 0, 1)
    return out.astype(dtype)


@pytest.mark.parametrize("sizes,ratios,steps,offsets,clip", [
    ([1.0], [1.0], [-1.0, -1.0], [0.5, 0.5], False),
    ([0.3, 0.6], [1.0, 2.0, 0.5], [-1.0, -1.0], [0.5, 0.5], True),
    ([0.5], [1.0, 3.0], [0.1, 0.2], [0.0, 0.25], False),
    ([0.2, 0.9, 1.4], [1.0], [0.25, -1.0], [0.5, 0.5], True),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_multibox_prior(sizes, ratios, steps, offsets, clip, dtype):
    x = np.zeros((1, 3, 3, 4), dtype=dtype)
    got = run_op(op_call("vision.multibox_prior", 1, sizes=sizes, ratios=ratios, steps=steps,
                         offsets=offsets, clip=clip), x)[0]
    check(got, prior_ref(x.shape, sizes, ratios, steps, offsets, clip, dtype))


def transform_loc_ref(cls, loc, anchor, clip, threshold, var, keep_bg):
    threshold, var = f32(threshold), f32(var)
    b_n, c_n, n = cls.shape
    out = np.full((b_n, n, 6), -1.0)
    cnt = np.zeros(b_n, np.int32)
    c64, l64, a64 = cls.astype(np.float64), loc.astype(np.float64), anchor.astype(np.float64)
    for i in range(b_n):
        for j in range(n):
            score, cid = -1.0, 0
            for k in range(0 if keep_bg else 1, c_n):
                t = c64[i, k, j]
                if t > score:
                    cid = k
                score = max(t, score)
            if cid > 0 and score < threshold:
                cid = 0
            if not keep_bg and cid == 0:
                continue
            al, at, ar, ab = a64[0, j]
            px, py, pw, ph = l64[i, 4 * j:4 * j + 4]
            aw, ah, ax, ay = ar - al, ab - at, (al + ar) / 2, (at + ab) / 2
            ox, oy = px * var[0] * aw + ax, py * var[1] * ah + ay
            ow, oh = math.exp(pw * var[2]) * aw / 2, math.exp(ph * var[3]) * ah / 2
            box = [ox - ow, oy - oh, ox + ow, oy + oh]
            if clip:
                box = [min(max(v, 0.0), 1.0) for v in box]
            out[i, cnt[i]] = [cid if keep_bg else cid - 1, score] + box
            cnt[i] += 1
    return [out.astype(cls.dtype), cnt]


@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("threshold", [0.01, 0.3])
@pytest.mark.parametrize("keep_bg", [False, True])
def test_multibox_transform_loc(clip, threshold, keep_bg):
    r = rng("mtl", clip, threshold, keep_bg)
    logits = r.standard_normal((2, 4, 6))
    cls = (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(np.float32)
    loc = (r.standard_normal((2, 24)) * 0.5).astype(np.float32)
    anchor = prior_ref((1, 1, 2, 3), [0.4], [1.0], [-1, -1], [0.5, 0.5], False, np.float32)
    var = [0.1, 0.1, 0.2, 0.2] if clip else [0.2, 0.1, 0.3, 0.1]
    got = run_op(op_call("vision.multibox_transform_loc", 3, clip=clip, threshold=threshold,
                         variances=var, keep_background=keep_bg), cls, loc, anchor)
    want = transform_loc_ref(cls, loc, anchor, clip, threshold, var, keep_bg)
    for g, w in zip(got, want):
        check(g, w)


# ==== vision.proposal ============================================================================


def proposal_ref(cls, bbox, info, scales, ratios, stride, thr, pre_n, post_n, min_size,
                 iou_loss):
    b_n, _, h, w = cls.shape
    scales, ratios, thr = f32(scales), f32(ratios), f32(thr)
    a_n = len(scales) * len(ratios)
    n_box = h * w * a_n
    pre_n = min(pre_n, n_box) if pre_n > 0 else n_box
    out = np.zeros((b_n * post_n, 5))
    c64, d64, i64 = cls.astype(np.float64), bbox.astype(np.float64), info.astype(np.float64)

    def anchor(ratio, scale):
        base = float(stride)
        ctr = 0.5 * (base - 1.0)
        size_ratios = math.floor(base * base / ratio)
        nw = math.floor(math.sqrt(size_ratios) + 0.5) * scale
        nh = math.floor(nw / scale * ratio + 0.5) * scale
        return [ctr - 0.5 * (nw - 1), ctr - 0.5 * (nh - 1), ctr + 0.5 * (nw - 1),
                ctr + 0.5 * (nh - 1)]

    def iou(a, b):
        ww = max(0.0, min(a[2], b[2]) - max(a[0], b[0]) + 1.0)
        hh = max(0.0, min(a[3], b[3]) - max(a[1], b[1]) + 1.0)
        i = ww * hh
        u = (a[2] - a[0] + 1) * (a[3] - a[1] + 1) + (b[2] - b[0] + 1) * (b[3] - b[1] + 1) - i
        return 0.0 if u <= 0 else i / u

    for b in range(b_n):
        im_h, im_w, im_s = i64[b]
        min_sz = im_s * min_size
        real_h, real_w = int(im_h / stride), int(im_w / stride)
        boxes = []
        for y in range(h):
            for x in range(w):
                for k in range(a_n):
                    an = anchor(ratios[k // len(scales)], scales[k % len(scales)])
                    x1, y1 = an[0] + x * stride, an[1] + y * stride
                    x2, y2 = an[2] + x * stride, an[3] + y * stride
                    dl = [d64[b, k * 4 + q, y, x] for q in range(4)]
                    if iou_loss:
                        p = [x1 + dl[0], y1 + dl[1], x2 + dl[2], y2 + dl[3]]
                    else:
                        bw, bh = x2 - x1 + 1, y2 - y1 + 1
                        cx, cy = x1 + 0.5 * (bw - 1), y1 + 0.5 * (bh - 1)
                        pcx, pcy = dl[0] * bw + cx, dl[1] * bh + cy
                        pw, ph = math.exp(dl[2]) * bw, math.exp(dl[3]) * bh
                        p = [pcx - 0.5 * (pw - 1), pcy - 0.5 * (ph - 1), pcx + 0.5 * (pw - 1),
                             pcy + 0.5 * (ph - 1)]
                    p = [max(min(p[0], im_w - 1), 0.0), max(min(p[1], im_h - 1), 0.0),
                         max(min(p[2], im_w - 1), 0.0), max(min(p[3], im_h - 1), 0.0)]
                    s = c64[b, a_n + k, y, x]
                    if y >= real_h or x >= real_w:
                        s = -1.0
                    if p[2] - p[0] + 1 < min_sz or p[3] - p[1] + 1 < min_sz:
                        p = [p[0] - min_sz / 2, p[1] - min_sz / 2, p[2] + min_sz / 2,
                             p[3] + min_sz / 2]
                        s = -1.0
                    boxes.append(p + [s])
        order = stable_desc([bx[4] for bx in boxes])[:pre_n]
        removed = [False] * pre_n
        for l in range(pre_n - 1):
            if removed[l]:
                continue
            for i in range(l + 1, pre_n):
                if not removed[i] and iou(boxes[order[l]], boxes[order[i]]) > thr:
                    removed[i] = True
        kept = [order[i] for i in range(pre_n) if not removed[i]]
        for r in range(post_n if kept else 0):
            out[b * post_n + r] = [b] + boxes[kept[r % len(kept)]][:4]
    return out.astype(cls.dtype)


@pytest.mark.parametrize("scales,ratios,stride,thr,pre_n,post_n,min_size,iou_loss", [
    ([2.0, 4.0], [0.5, 1.0], 4, 0.7, 30, 12, 2, False),
    ([1.0], [1.0, 2.0], 8, 0.3, -1, 20, 4, False),
    ([2.0], [1.0], 4, 0.5, 10, 7, 1, True),
    ([4.0, 8.0], [0.5, 1.0, 2.0], 16, 0.6, 100, 40, 16, False),
])
def test_proposal(scales, ratios, stride, thr, pre_n, post_n, min_size, iou_loss):
    a_n = len(scales) * len(ratios)
    r = rng("prop", tuple(scales), tuple(ratios), stride, thr, pre_n)
    cls = r.permutation(2 * 2 * a_n * 4 * 5).reshape(2, 2 * a_n, 4, 5).astype(np.float32) / 200
    bbox = (r.standard_normal((2, 4 * a_n, 4, 5)) * (2.0 if iou_loss else 0.2)).astype(
        np.float32)
    info = np.array([[16 * stride / 4, 20 * stride / 4, 1.0], [12 * stride / 4, 15 * stride / 4,
                                                               0.5]], dtype=np.float32)
    got = run_op(op_call("vision.proposal", 3, scales=scales, ratios=ratios, feature_stride=stride,
                         threshold=thr, rpn_pre_nms_top_n=pre_n, rpn_post_nms_top_n=post_n,
                         rpn_min_size=min_size, iou_loss=iou_loss), cls, bbox, info)[0]
    want = proposal_ref(cls, bbox, info, scales, ratios, stride, thr, pre_n, post_n, min_size,
                        iou_loss)
    check(got, want)


# ==== vision.yolo_reorg ==========================================================================


def reorg_ref(x, s):
    b_n, c, h, w = x.shape
    oc = c // (s * s)
    flat = x.reshape(-1)
    out = np.empty(x.size, dtype=x.dtype)
    cnt = 0
    for b in range(b_n):
        for k in range(c):
            for j in range(h):
                for i in range(w):
                    c2, off = k % oc, k // oc
                    w2, h2 = i * s + off % s, j * s + off // s
                    out[cnt] = flat[w2 + w * s * (h2 + h * s * (c2 + oc * b))]
                    cnt += 1
    return out.reshape(b_n, c * s * s, h // s, w // s)


def test_yolo_reorg_doc_example():
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
    got = run_op(op_call("vision.yolo_reorg", 1, stride=2), x)[0]
    want = np.array([0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15],
                    dtype=np.float32).reshape(1, 16, 1, 1)
    assert_close(got, want)


@pytest.mark.parametrize("shape,stride,dtype", [
    ((2, 4, 4, 6), 2, "float32"), ((1, 9, 6, 3), 3, "int8"), ((2, 3, 2, 2), 1, "float64"),
    ((1, 8, 4, 4), 2, "uint16"),
])
def test_yolo_reorg(shape, stride, dtype):
    x = rng("reorg", shape, stride).integers(-100, 100, shape).astype(dtype)
    if np.dtype(dtype).kind == "u":
        x = np.abs(x.astype(np.int64)).astype(dtype)
    got = run_op(op_call("vision.yolo_reorg", 1, stride=stride), x)[0]
    check(got, reorg_ref(x, stride))


def test_yolo_reorg_channels_not_divisible():
    err = run_op_error(op_call("vision.yolo_reorg", 1, stride=2),
                       np.zeros((1, 2, 4, 4), np.float32))
    assert "divisible" in err
