"""tensor.py - arrays in and out without copies.

rly.Tensor is a view of memory rly or another library owns, described by a DLPack DLTensor:
- out: InferenceSession.run(..., views=True) returns Tensors over the session's own output
  buffers (valid until the session's next run or its end); np.asarray(t) (the
  `__array_interface__`) and np.from_dlpack(t) (`__dlpack__`) view them without a copy;
- in: rly.from_dlpack(x) takes any DLPack producer (numpy >= 1.22, PyTorch, ...) and
  InferenceSession.run accepts the Tensor as an input without a copy.
Every dtype rly has maps to numpy's but bfloat16 (numpy has none: its views are uint16 bits)."""
import ctypes

import numpy as np

from . import _capi

# (DLPack code, bits) -> numpy dtype
_NP = {(0, 8): np.int8, (0, 16): np.int16, (0, 32): np.int32, (0, 64): np.int64,
       (1, 8): np.uint8, (1, 16): np.uint16, (1, 32): np.uint32, (1, 64): np.uint64,
       (2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64, (6, 8): np.bool_,
       (4, 16): np.uint16}
_TYPESTR = {np.dtype(v).str for v in _NP.values()}


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", _capi.DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Managed tensors handed out through __dlpack__, kept alive until their consumer calls the
# deleter (id of the struct -> (struct, the Tensor it views, its shape array)).
_exported = {}


@_DELETER
def _export_deleter(p):
    _exported.pop(ctypes.addressof(p.contents), None)


class Tensor:
    """A DLPack view (data pointer, shape, dtype) that keeps its owner alive."""

    def __init__(self, data, shape, code, bits, owner):
        self.data, self.shape, self._code, self._bits = data, tuple(int(d) for d in shape), code, bits
        self._owner = owner  # whatever keeps the memory alive (a session, a managed tensor)
        if (code, bits) not in _NP:
            raise _capi.RlyError("DLPack dtype (code %d, %d bits) is not one of rly's" % (code, bits))
        self.dtype = np.dtype(_NP[(code, bits)])

    def __class_getitem__(cls, item):
        """rly.Tensor[(3, 4), "float32"]: a parameter annotation for @rly.script."""
        from .script import tensor_annotation
        return tensor_annotation(item)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def __array_interface__(self):
        return {"version": 3, "shape": self.shape, "typestr": self.dtype.str,
                "data": (self.data or 0, True), "strides": None}

    def numpy(self):
        """A numpy array viewing the same memory (no copy)."""
        return np.asarray(self)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def __dlpack__(self, stream=None, **kwargs):
        del stream, kwargs
        m = DLManagedTensor()
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        m.dl_tensor = _capi.DLTensor(data=self.data, device=_capi.DLDevice(1, 0),
                                     ndim=len(self.shape),
                                     dtype=_capi.DLDataType(self._code, self._bits, 1),
                                     shape=shape, strides=None, byte_offset=0)
        m.deleter = _export_deleter
        _exported[ctypes.addressof(m)] = (m, self, shape)
        return _api.PyCapsule_New(ctypes.addressof(m), b"dltensor", None)

    def dltensor(self):
        """A DLTensor describing this view (with its shape array, to keep alive with it)."""
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        t = _capi.DLTensor(data=self.data, device=_capi.DLDevice(1, 0), ndim=len(self.shape),
                           dtype=_capi.DLDataType(self._code, self._bits, 1), shape=shape,
                           strides=None, byte_offset=0)
        return t, shape

    def __repr__(self):
        return "rly.Tensor(shape=%s, dtype=%s)" % (self.shape, self.dtype)


class _Imported:
    """A DLManagedTensor taken from a producer's capsule: its deleter runs when this goes."""

    def __init__(self, ptr):
        self.ptr = ctypes.cast(ptr, ctypes.POINTER(DLManagedTensor))

    def __del__(self):
        m = self.ptr.contents
        if m.deleter:
            m.deleter(self.ptr)


def from_dlpack(x):
    """A Tensor viewing x's memory without a copy; x has __dlpack__ (numpy >= 1.22, PyTorch,
    JAX, ...) or is a DLPack capsule. The memory must be on the CPU and C-contiguous."""
    if isinstance(x, Tensor):
        return x
    if hasattr(x, "__dlpack_device__") and x.__dlpack_device__()[0] != 1:
        raise _capi.RlyError("from_dlpack: the tensor is not in CPU memory")
    cap = x.__dlpack__() if hasattr(x, "__dlpack__") else x
    if not _api.PyCapsule_IsValid(cap, b"dltensor"):
        raise _capi.RlyError("from_dlpack: not a DLPack capsule (or one used already)")
    ptr = _api.PyCapsule_GetPointer(cap, b"dltensor")
    _api.PyCapsule_SetName(cap, b"used_dltensor")
    owner = _Imported(ptr)
    t = owner.ptr.contents.dl_tensor
    if t.device.device_type != 1:
        raise _capi.RlyError("from_dlpack: the tensor is not in CPU memory")
    if t.dtype.lanes != 1:
        raise _capi.RlyError("from_dlpack: vector dtypes (%d lanes) are not supported"
                             % t.dtype.lanes)
    shape = [t.shape[i] for i in range(t.ndim)]
    if t.strides:
        want = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != want:
                raise _capi.RlyError("from_dlpack: the tensor is not C-contiguous (copy it first)")
            want *= shape[i]
    return Tensor((t.data or 0) + t.byte_offset, shape, t.dtype.code, t.dtype.bits, owner)
