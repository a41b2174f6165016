"""npy_numpy_check.py - check rly's .npy/.npz code (src/runtime/npy.c) against real numpy.

Both directions go through the CLI modes of the test_npy program (tests/unit/test_npy.c):
files numpy writes are loaded by rly and written back (--roundtrip), and numpy must load what
rly wrote with the same dtype, shape and bytes; the sample archive rly writes on its own
(--gen) is checked value by value against the formula both sides share.

Run under pytest (the program comes from $RLY_TEST_NPY, else the first build*/**/test_npy
found; the tests skip when neither exists or numpy is missing), or as a script:
    python3 tests/unit/npy_numpy_check.py path/to/test_npy
which prints "N passed, N failed" last and exits non-zero on failure.
"""
import glob
import io
import os
import pathlib
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

try:
    import numpy as np
except ImportError:  # pragma: no cover - pytest skips below
    np = None

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

ROOT = pathlib.Path(__file__).resolve().parents[2]
_BINARY = None

DTYPES = ["|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8"]
SHAPES = [(), (0,), (1,), (7,), (3, 0), (2, 3), (2, 3, 4), (0, 5, 2), (1, 2, 1, 3),
          (2, 1, 2, 1, 3), (1, 2, 1, 2, 3, 2)]


def _find_binary():
    if _BINARY:
        return _BINARY
    env = os.environ.get("RLY_TEST_NPY")
    if env:
        return env
    hits = sorted(glob.glob(str(ROOT / "build*" / "**" / "test_npy"), recursive=True))
    hits = [h for h in hits if os.access(h, os.X_OK) and os.path.isfile(h)]
    return hits[0] if hits else None


def _binary():
    b = _find_binary()
    if b is None or np is None:
        raise unittest.SkipTest("test_npy binary or numpy not available")  # pytest skips too
    return b


def _run(*args, expect_ok=True):
    p = subprocess.run([_binary(), *map(str, args)], capture_output=True, text=True)
    if expect_ok:
        assert p.returncode == 0, f"test_npy {' '.join(map(str, args))} failed: {p.stderr}"
    return p


def _random_array(dtype, shape, rng):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    if dt.kind == "f":
        a = rng.standard_normal(size=shape).astype(dt)
        if a.size > 2:
            a.flat[0], a.flat[1] = np.inf, np.nan
        return a
    native = dt.newbyteorder("=")
    info = np.iinfo(native)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=native).astype(dt)


def _same(a, b):
    """Equal dtype, shape and bytes (so NaNs compare equal and -0.0 differs from 0.0)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _header(path):
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(f)
        return np.lib.format.read_array_header_2_0(f)


def _roundtrip_npy(tmp, a, name, version=None):
    src, dst = tmp / f"{name}_in.npy", tmp / f"{name}_out.npy"
    if version is None:
        np.save(src, a)
    else:
        with open(src, "wb") as f:
            np.lib.format.write_array(f, a, version=version)
    _run("--roundtrip", src, dst)
    shape, fortran, dtype = _header(dst)
    assert not fortran, f"{name}: rly wrote fortran_order True"
    return np.load(dst, allow_pickle=False)


# ---- numpy -> rly -> numpy ----------------------------------------------------------------------


def test_npy_every_dtype_and_shape(tmp_path):
    rng = np.random.default_rng(1)
    for dt in DTYPES:
        for i, shape in enumerate(SHAPES):
            a = _random_array(dt, shape, rng)
            b = _roundtrip_npy(tmp_path, a, f"{dt[1:]}_{i}")
            assert _same(a, b), f"{dt} {shape}: {a!r} != {b!r}"


def test_npy_fortran_order(tmp_path):
    rng = np.random.default_rng(2)
    for dt in ["<f4", "<i8", "|u1", "<f2", "|b1"]:
        for shape in [(3, 4), (2, 3, 4), (2, 1, 3, 5), (4, 0)]:
            a = np.asfortranarray(_random_array(dt, shape, rng))
            src = tmp_path / "f_in.npy"
            np.save(src, a)
            if a.ndim > 1 and a.size > 0 and not a.flags.c_contiguous:
                assert _header(src)[1], "numpy did not write fortran_order True"
            b = _roundtrip_npy(tmp_path, a, "f")
            assert _same(np.array(a, order="C"), b), f"fortran {dt} {shape}"


def test_npy_big_endian(tmp_path):
    rng = np.random.default_rng(3)
    for dt in [">i2", ">i4", ">i8", ">u2", ">u4", ">u8", ">f2", ">f4", ">f8"]:
        a = _random_array(dt, (3, 5), rng)
        b = _roundtrip_npy(tmp_path, a, "be")
        assert b.dtype == a.dtype.newbyteorder("<"), f"{dt} came back as {b.dtype}"
        assert _same(a.astype(b.dtype), b), f"big-endian {dt}"
    # big-endian and Fortran order at once
    a = np.asfortranarray(np.arange(24, dtype=">i4").reshape(2, 3, 4))
    b = _roundtrip_npy(tmp_path, a, "bef")
    assert np.array_equal(a, b) and b.dtype == np.dtype("<i4")


def test_npy_versions(tmp_path):
    a = np.arange(12, dtype="<f4").reshape(3, 4)
    for version in [(1, 0), (2, 0), (3, 0)]:
        b = _roundtrip_npy(tmp_path, a, f"v{version[0]}", version=version)
        assert _same(a, b), f"version {version}"


def test_npz_from_numpy(tmp_path):
    rng = np.random.default_rng(4)
    arrays = {f"a_{dt[1:]}_{i}": _random_array(dt, s, rng)
              for i, (dt, s) in enumerate(zip(DTYPES * 2, SHAPES * 3))}
    arrays["big"] = rng.standard_normal((512, 300)).astype("<f4")  # ~600 KB
    arrays["zeros"] = np.zeros((1000, 1000), dtype="<f8")          # compresses ~1000:1
    arrays["dir/weight"] = np.arange(10, dtype="<i8")
    arrays["fortran"] = np.asfortranarray(rng.standard_normal((4, 6)))
    arrays["bigend"] = np.arange(6, dtype=">u4")
    for writer in [np.savez, np.savez_compressed]:
        src = tmp_path / f"{writer.__name__}.npz"
        writer(src, **arrays)
        for flags in [[], ["--compress"], ["--zip64"], ["--compress", "--zip64"]]:
            dst = tmp_path / f"{writer.__name__}_{'_'.join(f[2:] for f in flags)}_out.npz"
            _run("--roundtrip", *flags, src, dst)
            with zipfile.ZipFile(dst) as zf:
                assert zf.testzip() is None, "bad CRC in rly's archive"
                want = zipfile.ZIP_DEFLATED if "--compress" in flags else zipfile.ZIP_STORED
                assert all(i.compress_type == want for i in zf.infolist())
            with np.load(dst, allow_pickle=False) as z:
                assert sorted(z.files) == sorted(arrays), (z.files, list(arrays))
                for k, a in arrays.items():
                    want = np.array(a, order="C").astype(a.dtype.newbyteorder("<"))
                    assert _same(want, z[k]), f"{writer.__name__} {flags} {k}"


def test_npz_non_npy_members_are_skipped(tmp_path):
    src, dst = tmp_path / "extra.npz", tmp_path / "extra_out.npz"
    np.savez(src, x=np.arange(3), y=np.ones((2, 2), dtype="<f4"))
    with zipfile.ZipFile(src, "a") as zf:
        zf.writestr("README.txt", "not an array")
        zf.writestr("sub/", "")
    _run("--roundtrip", src, dst)
    with np.load(dst) as z:
        assert sorted(z.files) == ["x", "y"]


class _Unseekable(io.RawIOBase):
    """A write-only stream without seek, so zipfile writes data descriptors (flag bit 3)."""

    def __init__(self):
        self.buf = io.BytesIO()

    def writable(self):
        return True

    def write(self, b):
        return self.buf.write(b)


def test_npz_with_data_descriptors(tmp_path):
    arrays = {"x": np.arange(7, dtype="<i2"), "y": np.linspace(0, 1, 50, dtype="<f8")}
    for writer in [np.savez, np.savez_compressed]:
        stream = _Unseekable()
        writer(stream, **arrays)
        src, dst = tmp_path / "dd.npz", tmp_path / "dd_out.npz"
        src.write_bytes(stream.buf.getvalue())
        with zipfile.ZipFile(src) as zf:
            assert all(i.flag_bits & 8 for i in zf.infolist()), "no data descriptors written"
        _run("--roundtrip", src, dst)
        with np.load(dst) as z:
            assert all(_same(a, z[k]) for k, a in arrays.items())


def test_bfloat16(tmp_path):
    if ml_dtypes is None:
        raise unittest.SkipTest("ml_dtypes not installed")
    a = np.array([[1.0, -2.5, 3.25], [0.0, -0.0, 1e30]], dtype=ml_dtypes.bfloat16)
    b = _roundtrip_npy(tmp_path, a, "bf16")
    assert b.dtype == np.dtype("V2")
    assert b.view(np.uint16).tobytes() == a.view(np.uint16).tobytes()
    assert np.array_equal(b.view(ml_dtypes.bfloat16), a)


# ---- rly -> numpy -------------------------------------------------------------------------------

_NAMES = {"bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
          "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "float16": "<f2",
          "float32": "<f4", "float64": "<f8", "bfloat16": "|V2"}


def _expected(name, index, shape):
    """The sample formula of test_npy.c: (i*7+3) % 100, negated at odd i for signed types."""
    dt = _NAMES[name]
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.int64)
    v = (i * 7 + 3) % 100
    if dt == "|b1":
        return (i % 3 == 0).reshape(shape)
    if dt[1] in "if" or name == "bfloat16":
        v = np.where(i & 1, -v, v)
    if name == "bfloat16":  # small integers are exact in bfloat16: the top half of the float32
        return (v.astype("<f4").view("<u4") >> 16).astype("<u2").reshape(shape)
    return v.astype(dt).reshape(shape)


def test_rly_written_npz_loads_in_numpy(tmp_path):
    for flags in [[], ["--compress"], ["--zip64"], ["--compress", "--zip64"]]:
        dst = tmp_path / f"gen{len(flags)}{''.join(flags)}.npz"
        _run("--gen", *flags, dst)
        with zipfile.ZipFile(dst) as zf:
            assert zf.testzip() is None
        with np.load(dst, allow_pickle=False) as z:
            assert sorted(z.files) == sorted(list(_NAMES) + ["empty", "dir/weight", "caf\u00e9"])
            for k, name in enumerate(_NAMES):  # dtype k is written with ndim k % 4
                shape = (2, 3, k % 4 + 1)[: k % 4]
                got = z[name]
                assert got.shape == shape, (name, got.shape)
                if name == "bfloat16":
                    assert got.dtype == np.dtype("V2")
                    assert np.array_equal(got.view("<u2"), _expected(name, k, shape)), name
                    if ml_dtypes is not None:
                        assert np.array_equal(got.view(ml_dtypes.bfloat16).astype("<f4"),
                                              _expected("float32", k, shape))
                else:
                    assert got.dtype == np.dtype(_NAMES[name]), (name, got.dtype)
                    assert np.array_equal(got, _expected(name, k, shape)), name
            assert z["empty"].shape == (0, 4) and z["empty"].dtype == np.float32
            w = z["dir/weight"]
            assert w.shape == (300, 257)
            assert np.array_equal(w.ravel(), (np.arange(300 * 257) % 1000 * 0.5).astype("<f4"))
            assert z["caf\u00e9"].shape == (5,)


# ---- errors -------------------------------------------------------------------------------------


def test_errors_are_reported(tmp_path):
    cases = {}
    cases["complex.npy"] = lambda p: np.save(p, np.zeros(3, dtype=np.complex64))
    cases["strings.npy"] = lambda p: np.save(p, np.array(["ab", "c"]))
    cases["struct.npy"] = lambda p: np.save(p, np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))

    def corrupt_compressed(p):
        buf = io.BytesIO()
        np.savez_compressed(buf, x=np.arange(1000.0))
        data = bytearray(buf.getvalue())
        data[len(data) // 3] ^= 0x55  # inside the deflate stream
        p.write_bytes(bytes(data))

    cases["corrupt.npz"] = corrupt_compressed

    def truncated(p):
        buf = io.BytesIO()
        np.savez(buf, x=np.arange(100))
        p.write_bytes(buf.getvalue()[:-30])

    cases["truncated.npz"] = truncated
    huge = b"{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }"
    cases["huge.npy"] = lambda p: p.write_bytes(
        b"\x93NUMPY\x01\x00" + struct.pack("<H", 70) + huge.ljust(69) + b"\n")
    for name, make in cases.items():
        p = tmp_path / name
        make(p)
        r = _run("--expect-error", p, expect_ok=False)
        assert r.returncode == 0, f"{name}: rly loaded it ({r.stderr.strip()})"
        assert r.stdout.strip(), f"{name}: no message"


# ---- script mode --------------------------------------------------------------------------------

def main(argv):
    global _BINARY
    if len(argv) > 1:
        _BINARY = argv[1]
    if np is None or _find_binary() is None:
        print("numpy or the test_npy binary is missing")
        return 2
    passed = failed = 0
    for name, fn in sorted(globals().items()):
        if not name.startswith("test_") or not callable(fn):
            continue
        with tempfile.TemporaryDirectory() as d:
            try:
                fn(pathlib.Path(d))
                passed += 1
                print(f"ok   {name}")
            except unittest.SkipTest as e:
                print(f"skip {name}: {e}")
            except Exception as e:  # report and go on
                failed += 1
                print(f"FAIL {name}: {type(e).__name__}: {e}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
