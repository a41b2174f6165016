"""test_ops_misc.py - the misc operators (src/ops/op_misc.c) run through `rly run` against numpy
references written here.

det is checked against np.linalg.det in float64 on well-conditioned matrices (random + 3 I; the
kernel factors in double and rounds once), plus exact small cases (singular, pivoting needed,
0 x 0). tfidf_vectorizer is checked against a reference written from the ONNX TfIdfVectorizer
specification that works the other way round from the kernel: it enumerates the n-grams of the
input (every start, every skip distance 1 .. max_skip_count + 1, 1-grams once) and looks them
up among the pool's n-grams, where the kernel scans the input for each pool n-gram. Weights
belong to pool n-grams (the i-th weight to the i-th n-gram, as the specification says); IDF
counts a found n-gram once. trap fails with its message (the identities annotation.* and debug
are tested in test_ops_unary.py).
"""
import numpy as np
import pytest

from harness import (assert_close, case_rng, check, fmt_attr, one, rand_array, run_dyn_error,
                     run_op_error)

SEED = 20250301
print("test_ops_misc: seed", SEED)

TOL = {"float64": (1e-9, 1e-9), "float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3)}


def rng_for(*key):
    return case_rng(SEED, *key)


# ---- det ------------------------------------------------------------------------------------------


def det_ref(x):
    """Determinants in float64 rounded to x's dtype (numpy's det of an empty stack is empty)."""
    x64 = x.astype(np.float64)
    n = x.shape[-1]
    if n == 0:
        return np.ones(x.shape[:-2]).astype(x.dtype)
    return np.linalg.det(x64).astype(x.dtype)


DET_SHAPES = [(1, 1), (2, 2), (3, 3), (4, 4), (6, 6), (2, 3, 3), (2, 2, 4, 4), (5, 1, 1), (0, 0),
              (0, 3, 3), (3, 0, 0)]


# float16 stays at n <= 4: larger determinants of these matrices overflow it
DET_CASES = [(s, dt) for dt in ["float32", "float64", "float16"] for s in DET_SHAPES
             if dt != "float16" or s[-1] <= 4]


@pytest.mark.parametrize("shape,dtype", DET_CASES)
def test_det(shape, dtype):
    rng = rng_for("det", shape, dtype)
    n = shape[-1]
    x = (rand_array(rng, shape, "float64", (-1.0, 1.0)) + 3 * np.eye(n)).astype(dtype)
    check(one("det({0})", x), det_ref(x), dtype, TOL)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_det_exact(dtype):
    cases = [
        ([[0, 1], [2, 3]], -2),                   # ONNX test_det_2d
        ([[0, 1], [1, 0]], -1),                   # a zero pivot: rows swap
        ([[1, 2], [2, 4]], 0),                    # singular
        ([[0, 0], [0, 0]], 0),
        ([[2, 0, 0], [0, 3, 0], [0, 0, 4]], 24),
        ([[0, 0, 1], [0, 1, 0], [1, 0, 0]], -1),  # an odd permutation
        ([[1, 2, 3], [4, 5, 6], [7, 8, 10]], -3),
    ]
    for m, want in cases:
        got = one("det({0})", np.array(m, dtype))
        assert got.shape == () and got.dtype == np.dtype(dtype)
        assert abs(float(got) - want) <= 1e-5 * max(1, abs(want)), (m, got)
    x = np.array([[[1, 2], [3, 4]], [[1, 2], [2, 1]], [[1, 3], [3, 1]]], dtype)  # test_det_nd
    assert_close(one("det({0})", x), np.array([-2, -3, -8], dtype))


def test_det_nan():
    got = one("det({0})", np.array([[0, 1], [np.nan, 2]], np.float32))
    assert np.isnan(got)


def test_det_errors():
    err = run_op_error("det({0})", np.zeros((2, 3), np.float32))
    assert "the matrices must be square, got 2 x 3" in err
    assert "rank 2 or more" in run_op_error("det({0})", np.zeros((3,), np.float32))
    assert "floating-point" in run_op_error("det({0})", np.zeros((2, 2), np.int32))
    # a dim the relation cannot see: the kernel checks it
    err = run_dyn_error("det({0})", np.zeros((2, 3, 4), np.float64))
    assert "error: det: the matrices must be square, got 3 x 4" in err


# ---- tfidf_vectorizer ---------------------------------------------------------------------------


def pool_grams(counts, pool):
    """The pool's n-grams in order, as tuples."""
    grams = []
    for s, start in enumerate(counts):
        end = counts[s + 1] if s + 1 < len(counts) else len(pool)
        for p in range(start, end, s + 1):
            grams.append(tuple(pool[p:p + s + 1]))
    return grams


def tfidf_ref(x, mode="TF", min_gram_length=1, max_gram_length=1, max_skip_count=0,
              ngram_counts=(), ngram_indexes=(), pool=(), weights=()):
    grams = pool_grams(ngram_counts, pool)
    assert len(grams) == len(ngram_indexes)
    where = {}
    for i, g in enumerate(grams):
        if min_gram_length <= len(g) <= max_gram_length:
            where.setdefault(g, []).append(i)
    rows = x if x.ndim == 2 else x[None]
    cols = max(ngram_indexes) + 1
    out = np.zeros((len(rows), cols), np.float64)
    for r, row in enumerate(rows):
        row = [int(v) for v in row]
        found = [0] * len(grams)
        for d in range(1, max_skip_count + 2):
            for s in range(len(row)):
                for k in range(1 if d == 1 else 2, max_gram_length + 1):
                    last = s + (k - 1) * d
                    if last >= len(row):
                        break
                    for i in where.get(tuple(row[s:last + 1:d]), []):
                        found[i] += 1
        for i, n in enumerate(found):
            w = weights[i] if len(weights) and mode != "TF" else 1.0
            v = (1.0 if n > 0 else 0.0) if mode == "IDF" else float(n)
            out[r, ngram_indexes[i]] += np.float32(v * w)
    out = out.astype(np.float32)
    return out if x.ndim == 2 else out[0]


def tfidf(x, **attrs):
    call = "tfidf_vectorizer({0}%s)" % "".join(", %s=%s" % (k, fmt_attr(v))
                                                for k, v in attrs.items())
    return one(call, x)


POOL = dict(ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6],
            pool=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7])
ROW = [1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8]

# The ONNX backend tests test_tfidfvectorizer_* (their inputs and expected outputs).
ONNX_CASES = [
    (ROW, dict(POOL, min_gram_length=2, max_gram_length=2), [0, 0, 0, 0, 1, 1, 1]),
    (ROW, dict(POOL, min_gram_length=2, max_gram_length=2, max_skip_count=5),
     [0, 0, 0, 0, 1, 3, 1]),
    (ROW, dict(POOL, min_gram_length=1, max_gram_length=2, max_skip_count=5),
     [0, 3, 1, 0, 1, 3, 1]),
    (ROW, dict(min_gram_length=2, max_gram_length=2, ngram_counts=[0, 0], ngram_indexes=[0, 1, 2],
               pool=[5, 6, 7, 8, 6, 7]), [1, 1, 1]),
    ([ROW[:6], ROW[6:]], dict(POOL, min_gram_length=2, max_gram_length=2),
     [[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0, 1]]),
    ([ROW[:6], ROW[6:]], dict(POOL, min_gram_length=2, max_gram_length=2, max_skip_count=5),
     [[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1]]),
    ([ROW[:6], ROW[6:]], dict(POOL, min_gram_length=1, max_gram_length=2, max_skip_count=5),
     [[0, 3, 0, 0, 0, 0, 0], [0, 0, 1, 0, 1, 1, 1]]),
]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("case", range(len(ONNX_CASES)))
def test_tfidf_onnx_cases(case, dtype):
    data, attrs, want = ONNX_CASES[case]
    x = np.array(data, dtype)
    want = np.array(want, np.float32)
    assert_close(tfidf_ref(x, **attrs), want)  # the reference agrees with ONNX's data
    assert_close(tfidf(x, mode="TF", **attrs), want)


def random_pool(rng, alphabet):
    """A pool of 1-, 2- and 3-grams (some sizes possibly empty) over range(alphabet)."""
    counts, pool = [], []
    for k in (1, 2, 3)[:1 + int(rng.integers(0, 3))]:
        counts.append(len(pool))
        for _ in range(int(rng.integers(0 if k > 1 else 1, 5))):
            pool += [int(v) for v in rng.integers(0, alphabet, size=k)]
    return counts, pool


@pytest.mark.parametrize("trial", range(40))
def test_tfidf_random(trial):
    rng = rng_for("tfidf", trial)
    alphabet = int(rng.integers(2, 5))
    counts, pool = random_pool(rng, alphabet)
    n_grams = len(pool_grams(counts, pool))
    cols = int(rng.integers(1, n_grams + 3))
    idx = [int(v) for v in rng.integers(0, cols, size=n_grams)]  # duplicates allowed
    lo = int(rng.integers(1, 4))
    attrs = dict(mode=["TF", "IDF", "TFIDF"][trial % 3], min_gram_length=lo,
                 max_gram_length=lo + int(rng.integers(0, 3)),
                 max_skip_count=int(rng.integers(0, 4)), ngram_counts=counts,
                 ngram_indexes=idx, pool=pool)
    if trial % 2:
        attrs["weights"] = [float(v) for v in np.round(rng.uniform(0, 2, size=n_grams), 2)]
    shape = [(int(rng.integers(0, 14)),), (int(rng.integers(1, 4)), int(rng.integers(0, 10)))][
        trial % 4 == 0]
    x = rng.integers(0, alphabet, size=shape).astype(["int32", "int64"][trial % 5 == 0])
    assert_close(tfidf(x, **attrs), tfidf_ref(x, **attrs), rtol=1e-6, atol=1e-6)


def test_tfidf_weights():
    """TFIDF scales counts by the n-gram's weight; IDF counts a found n-gram once; TF ignores
    weights. ngram_indexes permutes and merges columns."""
    x = np.array([4, 4, 5, 4, 5, 9], np.int64)
    attrs = dict(ngram_counts=[0, 2], ngram_indexes=[2, 0, 0], pool=[4, 5, 4, 5],
                 weights=[0.5, 2.0, 10.0], max_gram_length=2)
    assert_close(tfidf(x, mode="TF", **attrs), np.array([4, 0, 3], np.float32))
    assert_close(tfidf(x, mode="TFIDF", **attrs), np.array([2 * 2 + 10 * 2, 0, 1.5], np.float32))
    assert_close(tfidf(x, mode="IDF", **attrs), np.array([12, 0, 0.5], np.float32))


def test_tfidf_huge_limits():
    """max_skip_count and max_gram_length far beyond the row act as the row's length."""
    x = np.array([[1, 2, 1, 2], [2, 1, 2, 2]], np.int32)
    attrs = dict(mode="TF", min_gram_length=2, ngram_counts=[0, 0], ngram_indexes=[0],
                 pool=[1, 2])
    want = tfidf_ref(x, max_gram_length=2, max_skip_count=3, **attrs)
    assert want.tolist() == [[3], [2]]
    assert_close(tfidf(x, max_gram_length=2**62, max_skip_count=2**62, **attrs), want)


def test_tfidf_errors():
    x = np.array([1, 2, 3], np.int32)
    base = dict(ngram_counts=[0], ngram_indexes=[0, 1], pool=[1, 2])
    assert "ngram_indexes[1] is -1" in run_op_error(
        "tfidf_vectorizer({0}, ngram_counts=[0], ngram_indexes=[0, -1], pool=[1, 2])", x)
    assert "not a multiple of 2" in run_op_error(
        "tfidf_vectorizer({0}, ngram_counts=[0, 1], ngram_indexes=[0], pool=[1, 2, 3, 4])", x)
    assert "the pool holds 2 n-grams but ngram_indexes has 1 values" in run_op_error(
        "tfidf_vectorizer({0}, ngram_counts=[0], ngram_indexes=[0], pool=[1, 2])", x)
    assert "int32 or int64" in run_op_error(
        "tfidf_vectorizer({0}, ngram_counts=[0], ngram_indexes=[0, 1], pool=[1, 2])",
        x.astype(np.float32))
    assert "rank 1 [C] or 2 [N, C]" in run_op_error(
        "tfidf_vectorizer({0}, ngram_counts=[0], ngram_indexes=[0, 1], pool=[1, 2])",
        np.zeros((1, 2, 3), np.int64))
    assert tfidf(x, **base).tolist() == [1, 1]


# ---- trap (the identities annotation.* and debug: test_ops_unary.py) ---------------------------


def test_trap():
    err = run_op_error('trap(shape=[2], dtype="float32", message="no way here")')
    assert "error: trap: no way here" in err
