"""_lib.py — finds and loads libstepscope_analyzer.so with ctypes and wraps
its C API (analyzer/api/stepscope_api.h) in calls that return Python
values: analyze_json, diff_json, op_perf_json, op_modules_json,
op_memory_json and ops_buffer. The C library does all the
work; this file only converts arguments and results and turns the C error
message into a StepscopeError.

The library is looked for, in order: the file named by the environment
variable STEPSCOPE_LIB, then libstepscope_analyzer.so next to this file (the
wheel bundles it there)."""

import ctypes
import os
import threading

LIBRARY_NAME = "libstepscope_analyzer.so"
API_VERSION = 1


class StepscopeError(Exception):
    """An error reported by the stepscope library. `code` is the command
    line's exit code for it: 1 the run could not be loaded or analysed, 2 a
    usage error (a bad option or argument)."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


_lib = None
_lib_lock = threading.Lock()


def library_path():
    """The path of the library that is (or would be) loaded."""
    env = os.environ.get("STEPSCOPE_LIB")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)


def _load():
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = library_path()
        if not os.path.exists(path):
            raise StepscopeError(
                "stepscope: the analyzer library %s was not found: build it (cmake --build build "
                "--target stepscope_analyzer) and set STEPSCOPE_LIB to its path, or install the "
                "wheel of scripts/build-wheel.sh, which bundles it" % path, 2)
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise StepscopeError("stepscope: cannot load %s: %s" % (path, e), 1) from e
        lib.ss_api_version.restype = ctypes.c_int
        lib.ss_api_version.argtypes = []
        version = lib.ss_api_version()
        if version != API_VERSION:
            raise StepscopeError("stepscope: %s has API version %d, this package wants %d"
                                 % (path, version, API_VERSION), 1)
        lib.ss_api_free.restype = None
        lib.ss_api_free.argtypes = [ctypes.c_void_p]
        argv_t = ctypes.POINTER(ctypes.c_char_p)
        out_t = ctypes.POINTER(ctypes.c_void_p)
        lib.ss_api_analyze.restype = ctypes.c_int
        lib.ss_api_analyze.argtypes = [ctypes.c_char_p, ctypes.c_int, argv_t, out_t, out_t]
        lib.ss_api_diff.restype = ctypes.c_int
        lib.ss_api_diff.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, argv_t, out_t,
                                    out_t]
        lib.ss_api_op_perf.restype = ctypes.c_int
        lib.ss_api_op_perf.argtypes = [ctypes.c_char_p, ctypes.c_int, argv_t, ctypes.c_char_p,
                                       out_t, out_t]
        lib.ss_api_op_modules.restype = ctypes.c_int
        lib.ss_api_op_modules.argtypes = [ctypes.c_char_p, ctypes.c_int, argv_t, out_t, out_t]
        lib.ss_api_op_memory.restype = ctypes.c_int
        lib.ss_api_op_memory.argtypes = [ctypes.c_char_p, ctypes.c_int, argv_t, ctypes.c_int, out_t,
                                         out_t]
        lib.ss_api_replay.restype = ctypes.c_int
        lib.ss_api_replay.argtypes = [ctypes.c_char_p, ctypes.c_int, argv_t, ctypes.c_int, argv_t,
                                      out_t, out_t]
        lib.ss_api_ops_open.restype = ctypes.c_int
        lib.ss_api_ops_open.argtypes = [ctypes.c_char_p, ctypes.c_int, argv_t, out_t,
                                        ctypes.POINTER(ctypes.c_size_t), out_t]
        lib.ss_api_ops_write.restype = ctypes.c_int
        lib.ss_api_ops_write.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, out_t]
        lib.ss_api_ops_close.restype = None
        lib.ss_api_ops_close.argtypes = [ctypes.c_void_p]
        lib.ss_api_analyze_partial.restype = ctypes.c_int
        lib.ss_api_analyze_partial.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                               ctypes.c_char_p, ctypes.c_int, argv_t, out_t]
        lib.ss_api_merge.restype = ctypes.c_int
        lib.ss_api_merge.argtypes = [ctypes.c_int, argv_t, ctypes.c_int, argv_t, out_t, out_t]
        lib.ss_api_analyze_partial_cross.restype = ctypes.c_int
        lib.ss_api_analyze_partial_cross.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                                     ctypes.c_char_p, ctypes.c_char_p,
                                                     ctypes.c_int, argv_t, out_t]
        lib.ss_api_merge_cross.restype = ctypes.c_int
        lib.ss_api_merge_cross.argtypes = [ctypes.c_int, argv_t, ctypes.c_char_p, ctypes.c_int,
                                           argv_t, out_t]
        _lib = lib
        return lib


def _no_nul(b, what):
    """b, refused when it holds a NUL: C would read it only up to there (another path,
    another value), so it fails as open() does."""
    if b"\0" in b:
        raise ValueError("embedded null byte in %s %r" % (what, b))
    return b


def _path_bytes(p):
    if not isinstance(p, (str, bytes, os.PathLike)):
        raise TypeError("a run is a path (str or os.PathLike), not %s" % type(p).__name__)
    return _no_nul(os.fsencode(p), "the run's path")


def _argv(options):
    """A C array of the option strings (and the Python bytes it points to)."""
    items = []
    for o in options:
        if not isinstance(o, str):
            raise TypeError("options are strings, not %s" % type(o).__name__)
        items.append(_no_nul(o.encode("utf-8"), "an option"))
    arr = (ctypes.c_char_p * (len(items) + 1))(*items, None)
    return len(items), arr


def _take_string(lib, ptr):
    """The C string at ptr, decoded, and the memory freed."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.ss_api_free(ptr)


def _check(lib, rc, err):
    message = _take_string(lib, err.value)
    if rc != 0:
        raise StepscopeError(message or "stepscope: error %d" % rc, rc)


def analyze_json(run, options):
    """The text of `stepscope analyze RUN OPTIONS --json -`."""
    lib = _load()
    n, argv = _argv(options)
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    rc = lib.ss_api_analyze(_path_bytes(run), n, argv, ctypes.byref(out), ctypes.byref(err))
    _check(lib, rc, err)
    return _take_string(lib, out.value)


def analyze_partial(run, part_index, part_count, out_path, options, cross=None):
    """`stepscope analyze RUN --part K/N --partial OUT OPTIONS [--cross FILE]`."""
    lib = _load()
    n, argv = _argv(options)
    err = ctypes.c_void_p()
    rc = lib.ss_api_analyze_partial_cross(_path_bytes(run), int(part_index), int(part_count),
                                          None if cross is None else _path_bytes(cross),
                                          _path_bytes(out_path), n, argv, ctypes.byref(err))
    _check(lib, rc, err)


def merge_cross(paths, out_dir, options):
    """`stepscope merge OPTIONS --cross-out DIR PARTIALS`."""
    lib = _load()
    items = [_path_bytes(p) for p in paths]
    arr = (ctypes.c_char_p * (len(items) + 1))(*items, None)
    n, argv = _argv(options)
    err = ctypes.c_void_p()
    rc = lib.ss_api_merge_cross(len(items), arr, _path_bytes(out_dir), n, argv,
                                ctypes.byref(err))
    _check(lib, rc, err)


def merge_json(paths, options):
    """The text of `stepscope merge OPTIONS --json - PARTIALS`."""
    lib = _load()
    items = [_path_bytes(p) for p in paths]
    arr = (ctypes.c_char_p * (len(items) + 1))(*items, None)
    n, argv = _argv(options)
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    rc = lib.ss_api_merge(len(items), arr, n, argv, ctypes.byref(out), ctypes.byref(err))
    _check(lib, rc, err)
    return _take_string(lib, out.value)


def diff_json(run_a, run_b, options):
    """The text of `stepscope diff A B OPTIONS --json -`."""
    lib = _load()
    n, argv = _argv(options)
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    rc = lib.ss_api_diff(_path_bytes(run_a), _path_bytes(run_b), n, argv, ctypes.byref(out),
                         ctypes.byref(err))
    _check(lib, rc, err)
    return _take_string(lib, out.value)


def op_perf_json(run, options, peak=None):
    """The text of `stepscope ops RUN OPTIONS [--peak PEAK] --json -` (docs/ops.md)."""
    lib = _load()
    n, argv = _argv(options)
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    peak_b = _no_nul(peak.encode("utf-8"), "peak") if peak is not None else None
    rc = lib.ss_api_op_perf(_path_bytes(run), n, argv, peak_b, ctypes.byref(out), ctypes.byref(err))
    _check(lib, rc, err)
    return _take_string(lib, out.value)


def _ops_table_json(function, run, options, *more):
    lib = _load()
    n, argv = _argv(options)
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    rc = getattr(lib, function)(_path_bytes(run), n, argv, *more, ctypes.byref(out),
                                ctypes.byref(err))
    _check(lib, rc, err)
    return _take_string(lib, out.value)


def replay_json(run, options, edits):
    """The text of `stepscope replay RUN OPTIONS --what-if EDIT ... --json -` (docs/replay.md)."""
    lib = _load()
    n, argv = _argv(options)
    ne, edits_argv = _argv(edits)
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    rc = lib.ss_api_replay(_path_bytes(run), n, argv, ne, edits_argv, ctypes.byref(out),
                           ctypes.byref(err))
    _check(lib, rc, err)
    return _take_string(lib, out.value)


def op_modules_json(run, options):
    """The text of `stepscope ops RUN OPTIONS --by module --json -` (docs/ops.md)."""
    return _ops_table_json("ss_api_op_modules", run, options)


def op_memory_json(run, options, series=False):
    """The text of `stepscope ops RUN OPTIONS --memory [--series] --json -` (docs/ops.md)."""
    return _ops_table_json("ss_api_op_memory", run, options, 1 if series else 0)


def ops_buffer(run, options):
    """The columnar op table of every op of the run (see stepscope_api.h) in
    a numpy uint8 array that the library writes directly (ss_api_ops_open,
    ss_api_ops_write): the DataFrame's columns can then be views of it, with
    no copy."""
    import numpy as np
    lib = _load()
    n, argv = _argv(options)
    handle, err = ctypes.c_void_p(), ctypes.c_void_p()
    size = ctypes.c_size_t()
    rc = lib.ss_api_ops_open(_path_bytes(run), n, argv, ctypes.byref(handle), ctypes.byref(size),
                             ctypes.byref(err))
    _check(lib, rc, err)
    try:
        buf = np.empty(max(size.value, 8), dtype=np.uint8)
        err = ctypes.c_void_p()
        rc = lib.ss_api_ops_write(handle, buf.ctypes.data_as(ctypes.c_void_p), buf.size,
                                  ctypes.byref(err))
        _check(lib, rc, err)
    finally:
        lib.ss_api_ops_close(handle)
    return buf[:size.value]
