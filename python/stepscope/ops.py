"""ops.py — stepscope.ops(): every op of a run as one pandas DataFrame, for
analyses the report does not make. The C library returns the ops as a
columnar binary table (stepscope_api.h, ss_api_ops_open/_write), written
straight into a numpy array; this file views its columns with
numpy.frombuffer (no parsing, no copy, no per-op Python work) and hands the
views to the DataFrame, names and kinds as pandas Categoricals over the
table's strings."""

from . import _lib
from ._frames import pandas
from ._options import analysis_options

MAGIC = b"SSOPS\x00v1"
KINDS = ["kernel", "memcpy", "memset", "host"]           # codes 1..4 of ssa_op_kind
CATEGORIES = ["compute", "comm", "memcpy", "memset"]     # codes 1..4 of ssa_class (SPEC §4)

# The table's columns, in the order of stepscope_api.h (SS_OPS_*), with their
# numpy types and the DataFrame column each one becomes.
COLUMNS = [
    ("start_ns", "=i8"), ("end_ns", "=i8"), ("stream", "=i8"), ("bytes", "=i8"),
    ("comm_id", "=u8"), ("coll_seq", "=i8"), ("step", "=i8"), ("rank", "=i4"),
    ("name", "=i4"), ("kind", "u1"), ("category", "u1"),
]
ORDER = ["rank", "stream", "kind", "category", "name", "start_ns", "end_ns", "step", "comm_id",
         "coll_seq", "bytes"]
HEADER_WORDS = 6 + len(COLUMNS)  # header_bytes, nops, nstrings, strings_offset, strings_bytes,
                                 # ncolumns, column_offset[]


def _codes(np, values, n):
    """Category codes of 1-based values (0 or out of range: missing, -1)."""
    c = values.astype(np.int8) - 1
    c[(values == 0) | (values > n)] = -1
    return c


def frame_of_table(buf):
    """The DataFrame of an op table (any object with the buffer protocol; its
    columns are views of it, so it must not change afterwards)."""
    pd = pandas()
    import numpy as np  # pandas needs it, so it is there
    mv = memoryview(buf).cast("B")
    if len(mv) < 8 + 8 * HEADER_WORDS or bytes(mv[:8]) != MAGIC:
        raise _lib.StepscopeError("stepscope ops: the library returned a table this package "
                                  "cannot read (wrong magic or version)")
    h = np.frombuffer(mv, dtype=np.uint64, count=HEADER_WORDS, offset=8)
    nops, nstrings, str_off, str_len, ncols = (int(x) for x in h[1:6])
    if ncols != len(COLUMNS):
        raise _lib.StepscopeError("stepscope ops: the table has %d columns, want %d"
                                  % (ncols, len(COLUMNS)))
    cols = {}
    for (name, dtype), off in zip(COLUMNS, h[6:]):
        cols[name] = np.frombuffer(mv, dtype=dtype, count=nops, offset=int(off))
    raw = bytes(mv[str_off:str_off + str_len]).split(b"\x00")[:nstrings]
    names = [s.decode("utf-8", "surrogateescape") for s in raw]
    data = {
        "rank": cols["rank"],
        "stream": cols["stream"],
        "kind": pd.Categorical.from_codes(_codes(np, cols["kind"], len(KINDS)), KINDS),
        "category": pd.Categorical.from_codes(_codes(np, cols["category"], len(CATEGORIES)),
                                              CATEGORIES),
        "name": pd.Categorical.from_codes(cols["name"], names, validate=False),
    }
    for name in ORDER[5:]:
        data[name] = cols[name]
    # copy=False: one block per column, each a view of the table (no copy)
    return pd.DataFrame(data, columns=ORDER, copy=False)


def ops(run, steps=None, comm_kernels=None, compute_kernels=None, *, rank=None, step_range=None,
        threads=None, options=()):
    """Every op of a run (kernels, copies, memsets, CPU-backend host ops), one
    row each, ordered by rank then start: rank, stream (stream id), kind
    (kernel/memcpy/memset/host), category (compute/comm/memcpy/memset, as the
    analyzer classifies it), name, start_ns and end_ns (aligned across
    ranks, relative to the run's origin, as the report's *_ns times), step
    (the step it belongs to, -1 none), comm_id and coll_seq (the collective it
    executed: 0 and -1 if none) and bytes (copies, memsets, host ops).

    steps keeps only the ops of those steps (as analyze's steps); rank only
    that rank's; step_range names the step ranges; comm_kernels and
    compute_kernels (regular expressions) change the category as they change
    analyze's. Raises StepscopeError."""
    argv = analysis_options(steps, comm_kernels, compute_kernels, step_range, None, threads,
                            options)
    if rank is not None:
        argv += ["--rank", str(int(rank))]
    return frame_of_table(_lib.ops_buffer(run, argv))
