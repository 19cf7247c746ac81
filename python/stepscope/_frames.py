"""_frames.py — the small helpers that turn the JSON documents of the C
library into pandas DataFrames: importing pandas with a clear message when it
is missing (the JSON needs no pandas), and flattening nested objects into
dotted column names ("launch.p50_ns")."""


def pandas():
    """The pandas module, or an ImportError that says what needs it."""
    try:
        import pandas as pd
    except ImportError as e:
        raise ImportError("stepscope: DataFrames need pandas (pip install pandas); the reports "
                          "themselves (.json) work without it") from e
    return pd


def flatten(obj, prefix="", out=None, skip=()):
    """A flat dict of a nested one: {"a": {"b": 1}} -> {"a.b": 1}. Lists stay
    values; keys in `skip` (at the top level) are left out."""
    if out is None:
        out = {}
    for k, v in obj.items():
        if not prefix and k in skip:
            continue
        key = prefix + k
        if isinstance(v, dict):
            flatten(v, key + ".", out)
        else:
            out[key] = v
    return out


def frame(rows, columns=None):
    """A DataFrame of a list of flat dicts, keeping the JSON's key order.
    columns: the table's columns, for a table without rows (column selections
    work on an empty table too). An object that is null in some rows ("a":
    null in a diff row of a kernel only B ran) is no column of its own: its
    fields ("a.mean_ns" ...) are NaN in those rows; a column "a" would be
    NaN everywhere else, and all NaN where every row has the object."""
    pd = pandas()
    if not rows:
        return pd.DataFrame(columns=columns or [])
    f = pd.DataFrame.from_records(rows)
    null_objects = [c for c in f.columns
                    if f[c].isna().all() and any(o.startswith(c + ".") for o in f.columns)]
    return f.drop(columns=null_objects)
