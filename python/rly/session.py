"""session.py - rly.InferenceSession: ONNX Runtime's session interface over rly's VM.

    sess = rly.InferenceSession("model.onnx")          # or .rly (Relay text), .rlyx, or bytes
    sess.get_inputs()[0].name, .shape, .type           # shape: ints, None for `?` dims
    outs = sess.run(None, {"input": array})            # a list of numpy arrays

.onnx and .rly files are imported, optimized (opt_level, default 3) and compiled in memory;
.rlyx executables are loaded as compiled. Inputs are bound without a copy when they are
C-contiguous, aligned and of the input's dtype; otherwise they are copied once (a numpy
conversion, as onnxruntime does). Outputs are returned as new arrays (a run's outputs live in
the session until the next run)."""
import ctypes
import os
import tempfile
import threading

import numpy as np

from . import _capi
from ._capi import RlyError, check, lib
from .tensor import Tensor, from_dlpack

# rly_dtype -> numpy dtype and ONNX Runtime's type string
_DTYPES = [
    ("bool", np.bool_, "tensor(bool)"),
    ("int8", np.int8, "tensor(int8)"),
    ("int16", np.int16, "tensor(int16)"),
    ("int32", np.int32, "tensor(int32)"),
    ("int64", np.int64, "tensor(int64)"),
    ("uint8", np.uint8, "tensor(uint8)"),
    ("uint16", np.uint16, "tensor(uint16)"),
    ("uint32", np.uint32, "tensor(uint32)"),
    ("uint64", np.uint64, "tensor(uint64)"),
    ("float16", np.float16, "tensor(float16)"),
    ("float32", np.float32, "tensor(float)"),
    ("float64", np.float64, "tensor(double)"),
    ("bfloat16", None, "tensor(bfloat16)"),  # numpy has none: passed as raw uint16 bits
]
_DL = [(6, 8), (0, 8), (0, 16), (0, 32), (0, 64), (1, 8), (1, 16), (1, 32), (1, 64), (2, 16),
       (2, 32), (2, 64), (4, 16)]  # (DLPack code, bits) per rly_dtype


class NodeArg:
    """An input or output: name, shape (ints; None for a dim known only at run time) and type
    ("tensor(float)"), as onnxruntime.NodeArg."""

    def __init__(self, name, shape, type_, rly_type):
        self.name, self.shape, self.type, self.rly_type = name, shape, type_, rly_type

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


def _node_arg(name, info):
    text = info.type.decode() if info.type else ""
    if not info.is_tensor:
        return NodeArg(name, None, text, text), None
    shape = [None if info.shape[i] < 0 else int(info.shape[i]) for i in range(info.ndim)]
    return NodeArg(name, shape, _DTYPES[info.dtype][2], text), info.dtype


class InferenceSession:
    """A compiled model and a session of rly's VM over it.

    path_or_bytes: a path to a .onnx, .rly or .rlyx file, or the bytes of an ONNX model.
    threads: kernel threads (None: RLY_NUM_THREADS, else the cores this process may use).
    opt_level: the optimizer's level (0-3) for .onnx and .rly (a .rlyx is compiled already).
    input_shapes: for ONNX models with dynamic dims, {"name": (1, 3, 224, 224)}."""

    def __init__(self, path_or_bytes, threads=None, opt_level=3, input_shapes=None):
        self._ctx = self._exe = self._sess = None
        if not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
            raise ValueError("opt_level must be 0, 1, 2 or 3, not %r" % (opt_level,))
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ValueError("threads must be a positive integer or None, not %r" % (threads,))
        tmp = None
        try:
            if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
                fd, tmp = tempfile.mkstemp(suffix=".onnx")
                with os.fdopen(fd, "wb") as f:
                    f.write(bytes(path_or_bytes))
                path = tmp
            else:
                path = os.fspath(path_or_bytes)
                if not os.path.exists(path):
                    raise FileNotFoundError("rly: no such file: %s" % path)
            self._exe = self._compile(path, opt_level, input_shapes)
        finally:
            if tmp:
                os.unlink(tmp)
        self._open(self._exe, threads)

    def _open(self, exe, threads):
        self._exe_handle, self._threads = exe, threads
        self._lock, self._tls, self._others = threading.Lock(), threading.local(), []
        self._owner_thread = threading.get_ident()
        s = self._new_session()
        self._sess = s
        self._inputs, self._in_dtypes = self._args(lib.rly_session_num_inputs,
                                                   lib.rly_session_input_name,
                                                   lib.rly_session_input_info)
        self._outputs, self._out_dtypes = self._args(lib.rly_session_num_outputs,
                                                     lib.rly_session_output_name,
                                                     lib.rly_session_output_info)
        self._bound = {}

    def _new_session(self):
        opts = _capi.SessionOptions(threads=self._threads or 0)
        s = ctypes.c_void_p()
        check(lib.rly_session_new(self._exe_handle, ctypes.byref(opts), ctypes.byref(s)))
        return s

    def _session(self):
        """The C session of the calling thread: the first one for the thread that made this
        object, one more per other thread that runs it (sessions of one executable run at
        once; a C session itself runs one call at a time)."""
        if threading.get_ident() == self._owner_thread:
            return self._sess, self._bound
        tls = self._tls
        if getattr(tls, "sess", None) is None:
            tls.sess, tls.bound = self._new_session(), {}
            with self._lock:
                self._others.append(tls.sess)
        return tls.sess, tls.bound

    @classmethod
    def _from_executable(cls, exe, threads=None):
        """A session over an rly.Executable (which it keeps alive)."""
        self = cls.__new__(cls)
        self._ctx, self._exe, self._sess, self._owner = None, None, None, exe
        self._open(exe._p, threads)
        return self

    def _compile(self, path, opt_level, input_shapes):
        exe = ctypes.c_void_p()
        if path.endswith(".rlyx"):
            check(lib.rly_executable_load(path.encode(), ctypes.byref(exe)))
            return exe
        ctx, mod = ctypes.c_void_p(), ctypes.c_void_p()
        check(lib.rly_ctx_new(ctypes.byref(ctx)))
        self._ctx = ctx
        with open(path, "rb") as f:
            head = f.read(64)
        is_text = path.endswith(".rly") or head.lstrip().startswith(b"#[version")
        if is_text:
            check(lib.rly_module_parse_file(ctx, path.encode(), ctypes.byref(mod)))
        else:
            shapes = None
            if input_shapes:
                shapes = " ".join("%s:[%s]" % (k, ",".join(str(int(d)) for d in v))
                                  for k, v in input_shapes.items()).encode()
            check(lib.rly_module_import_onnx(ctx, path.encode(), shapes, ctypes.byref(mod)))
        check(lib.rly_module_compile(mod, opt_level, None, ctypes.byref(exe)))
        return exe

    def _args(self, count, name_of, info_of):
        args, dtypes = [], []
        for i in range(count(self._sess)):
            info = _capi.TensorInfo()
            check(info_of(self._sess, i, ctypes.byref(info)))
            a, dt = _node_arg(name_of(self._sess, i).decode(), info)
            args.append(a)
            dtypes.append(dt)
        return args, dtypes

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_threads(self):
        return lib.rly_session_threads(self._sess)

    def _bind(self, sess, bound, i, value):
        arg, dt = self._inputs[i], self._in_dtypes[i]
        if dt is None:
            raise RlyError("input '%s' has type %s: only tensors can be fed" % (arg.name,
                                                                                 arg.rly_type))
        if isinstance(value, Tensor) or (not isinstance(value, np.ndarray)
                                         and hasattr(value, "__dlpack__")):
            t = from_dlpack(value)  # any DLPack producer, without a copy
            self._check(arg, dt, t.dtype, t.shape)
            dl, shape = t.dltensor()
            check(lib.rly_session_set_input(sess, arg.name.encode(), ctypes.byref(dl)),
                  "input '%s'" % arg.name)
            bound[arg.name] = (t, shape)
            return
        a = value if isinstance(value, np.ndarray) else np.asarray(value)
        self._check(arg, dt, a.dtype, a.shape)
        if not a.flags.c_contiguous:  # copied once (np.ascontiguousarray would make 0-d 1-d)
            a = a.copy(order="C")
        if a.ctypes.data % 64 and a.size:  # rly's tensors are 64-byte aligned
            b = np.empty(a.size * a.itemsize + 64, np.uint8)
            off = (-b.ctypes.data) % 64
            a = np.frombuffer(b[off:off + a.size * a.itemsize], a.dtype).reshape(a.shape)
            a[...] = value
        shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
        code, bits = _DL[dt]
        t = _capi.DLTensor(data=a.ctypes.data if a.size else None,
                           device=_capi.DLDevice(1, 0), ndim=a.ndim,
                           dtype=_capi.DLDataType(code, bits, 1), shape=shape, strides=None,
                           byte_offset=0)
        check(lib.rly_session_set_input(sess, arg.name.encode(), ctypes.byref(t)),
              "input '%s'" % arg.name)
        bound[arg.name] = (a, shape)  # alive while bound (the session borrows them)

    @staticmethod
    def _check(arg, dt, dtype, shape):
        want = _DTYPES[dt][1]
        if want is None:  # bfloat16: raw 16-bit patterns
            if dtype != np.uint16:
                raise RlyError("input '%s' is bfloat16: feed its bits as a uint16 array" % arg.name)
        elif dtype != want:
            raise RlyError("Unexpected input data type. Actual: (%s) , expected: (%s)"
                           % (_ort_type(dtype), arg.type))
        if len(shape) != len(arg.shape):
            raise RlyError("Invalid rank for input: %s Got: %d Expected: %d Please fix either "
                           "the inputs/outputs or the model." % (arg.name, len(shape),
                                                                 len(arg.shape)))
        bad = [(k, shape[k], d) for k, d in enumerate(arg.shape) if d is not None
               and shape[k] != d]
        if bad:
            raise RlyError("Got invalid dimensions for input: %s for the following indices\n"
                           % arg.name + "\n".join(" index: %d Got: %d Expected: %d" % b
                                                  for b in bad)
                           + "\n Please fix either the inputs/outputs or the model.")

    def run(self, output_names, input_feed, run_options=None, views=False):
        """Run with input_feed ({name: array, or any DLPack tensor}) and return the outputs
        named by output_names (None: all), in that order: new numpy arrays, or with views=True
        rly.Tensor views of the session's own buffers (no copy; valid until this thread's next
        run). Thread-safe: each thread runs its own C session of the same executable (the
        weights and their packed forms are shared), so threads run at once."""
        del run_options
        names = [a.name for a in self._inputs]
        unknown = [k for k in input_feed if k not in names]
        if unknown:
            raise RlyError("Invalid input name: %s" % unknown[0])
        missing = [n for n in names if n not in input_feed]
        if missing:
            raise RlyError("Required inputs (%s) are missing from input feed (%s)."
                           % (missing, list(input_feed)))
        outs = [a.name for a in self._outputs]
        if output_names is None:
            idx = list(range(len(outs)))
        else:
            idx = []
            for n in output_names:
                if n not in outs:
                    raise RlyError("Invalid output name: %s" % n)
                idx.append(outs.index(n))
        sess, bound = self._session()
        for i, n in enumerate(names):
            self._bind(sess, bound, i, input_feed[n])
        check(lib.rly_session_run(sess))
        return [self._output(sess, i, views) for i in idx]

    def _output(self, sess, i, view=False):
        p = ctypes.POINTER(_capi.DLTensor)()
        check(lib.rly_session_get_output(sess, i, ctypes.byref(p)))
        t = p.contents
        dt = _DTYPES[self._out_dtypes[i]][1] if self._out_dtypes[i] is not None else None
        if dt is None:
            dt = np.uint16
        shape = tuple(t.shape[k] for k in range(t.ndim))
        if view:
            return Tensor((t.data or 0) + t.byte_offset, shape, t.dtype.code, t.dtype.bits, self)
        n = int(np.prod(shape, dtype=np.int64))
        if n == 0:
            return np.zeros(shape, dt)
        buf = (ctypes.c_char * (n * np.dtype(dt).itemsize)).from_address(t.data + t.byte_offset)
        return np.frombuffer(buf, dt).reshape(shape).copy()

    def close(self):
        for s in getattr(self, "_others", []):
            lib.rly_session_free(s)
        self._others = []
        if self._sess:
            lib.rly_session_free(self._sess)
            self._sess = None
        if self._exe:
            lib.rly_executable_free(self._exe)
            self._exe = None
        if self._ctx:
            lib.rly_ctx_free(self._ctx)
            self._ctx = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _ort_type(dt):
    for name, npd, ort_name in _DTYPES:
        if npd is not None and np.dtype(npd) == dt:
            return ort_name
    return str(dt)
