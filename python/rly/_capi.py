"""_capi.py - the C library (librly) through ctypes: loading it, the few C structs the session API
uses (DLPack's DLTensor, rly_session_options, rly_tensor_info), function signatures, and C status
codes turned into exceptions that carry rly_last_error().

The library is looked for, in order: $RLY_LIBRARY (a path); next to this package (an installed
wheel); the repository's build folders (build/release, build/debug, build/asan) when the package
is used from a checkout."""
import ctypes
import os

c_int64_p = ctypes.POINTER(ctypes.c_int64)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", c_int64_p), ("strides", c_int64_p),
                ("byte_offset", ctypes.c_uint64)]


class SessionOptions(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("max_memory", ctypes.c_uint64),
                ("max_depth", ctypes.c_uint64), ("timeout", ctypes.c_double)]


class TensorInfo(ctypes.Structure):
    _fields_ = [("is_tensor", ctypes.c_int), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", c_int64_p), ("type", ctypes.c_char_p)]


class OptOptions(ctypes.Structure):
    _fields_ = [("opt_level", ctypes.c_int), ("passes", ctypes.c_char_p),
                ("required_passes", ctypes.c_char_p), ("disabled_passes", ctypes.c_char_p),
                ("print_ir_after", ctypes.c_char_p), ("time_passes", ctypes.c_int),
                ("verify_types", ctypes.c_int)]


OK, ERROR, NOMEM, IO, INVALID = 0, 1, 2, 3, 4


class RlyError(Exception):
    """An error reported by the rly library; the message is the library's (located where the
    input has a location: file:line:col, an ONNX node name)."""


class RlyInvalidArgument(RlyError, ValueError):
    """An argument of a call is invalid (RLY_STATUS_INVALID)."""


def _candidates():
    env = os.environ.get("RLY_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "librly.so")
    root = os.path.dirname(os.path.dirname(here))
    for preset in ("release", "debug", "asan"):
        yield os.path.join(root, "build", preset, "librly.so")


def _load():
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            return ctypes.CDLL(path)
        tried.append(path)
    raise ImportError("rly: librly.so not found (set RLY_LIBRARY, or build it with "
                      "`cmake --preset release && cmake --build --preset release`); looked at: "
                      + ", ".join(tried))


lib = _load()

_V, _P, _S, _I = None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
_PP = ctypes.POINTER(ctypes.c_void_p)
_SIGS = {
    "rly_last_error": (_S, []),
    "rly_version": (_S, []),
    "rly_free": (_V, [_P]),
    "rly_ctx_new": (_I, [_PP]),
    "rly_ctx_free": (_V, [_P]),
    "rly_module_parse": (_I, [_P, _S, ctypes.c_size_t, _S, _PP]),
    "rly_module_parse_file": (_I, [_P, _S, _PP]),
    "rly_module_import_onnx": (_I, [_P, _S, _S, _PP]),
    "rly_module_compile": (_I, [_P, _I, _S, _PP]),
    "rly_executable_load": (_I, [_S, _PP]),
    "rly_executable_free": (_V, [_P]),
    "rly_executable_save": (_I, [_P, _S]),
    "rly_session_new": (_I, [_P, ctypes.POINTER(SessionOptions), _PP]),
    "rly_session_free": (_V, [_P]),
    "rly_session_threads": (_I, [_P]),
    "rly_session_num_inputs": (_I, [_P]),
    "rly_session_num_outputs": (_I, [_P]),
    "rly_session_input_name": (_S, [_P, _I]),
    "rly_session_output_name": (_S, [_P, _I]),
    "rly_session_input_info": (_I, [_P, _I, ctypes.POINTER(TensorInfo)]),
    "rly_session_output_info": (_I, [_P, _I, ctypes.POINTER(TensorInfo)]),
    "rly_session_set_input": (_I, [_P, _S, ctypes.POINTER(DLTensor)]),
    "rly_session_run": (_I, [_P]),
    "rly_session_get_output": (_I, [_P, _I, ctypes.POINTER(ctypes.POINTER(DLTensor))]),
    "rly_module_print": (_I, [_P, ctypes.POINTER(ctypes.c_void_p)]),
    "rly_module_print_typed": (_I, [_P, ctypes.POINTER(ctypes.c_void_p)]),
    "rly_module_infer": (_I, [_P]),
    "rly_module_is_expr": (_I, [_P]),
    "rly_module_gradient": (_I, [_P, _S, _S, _S]),
    "rly_module_optimize": (_I, [_P, ctypes.POINTER(OptOptions), ctypes.POINTER(ctypes.c_void_p)]),
    "rly_passes_describe": (_I, [ctypes.POINTER(ctypes.c_void_p)]),
    "rly_executable_describe": (_I, [_P, _I, ctypes.POINTER(ctypes.c_void_p)]),
    "rly_ops_describe": (_I, [_S, ctypes.POINTER(ctypes.c_void_p)]),
    "rly_module_save": (_I, [_P, _S]),
    "rly_module_prelude": (_I, [_P, _PP]),
    "rly_module_parse_file_into": (_I, [_P, _S]),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args


def last_error():
    msg = lib.rly_last_error()
    return msg.decode("utf-8", "replace") if msg else "unknown error"


def check(status, what=None):
    """Raise for a failed status: RlyInvalidArgument for RLY_STATUS_INVALID, MemoryError for
    RLY_STATUS_NOMEM, OSError for RLY_STATUS_IO, RlyError otherwise."""
    if status == OK:
        return
    msg = last_error()
    if what:
        msg = "%s: %s" % (what, msg)
    if status == INVALID:
        raise RlyInvalidArgument(msg)
    if status == NOMEM:
        raise MemoryError(msg)
    if status == IO:
        raise OSError(msg)
    raise RlyError(msg)


def version():
    return lib.rly_version().decode()


def take_string(p):
    """The text of a malloc'ed C string (freed here), or None."""
    if not p:
        return None
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        lib.rly_free(p)
