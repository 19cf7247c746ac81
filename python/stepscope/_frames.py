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
    """A DataFrame of a list of flat dicts, keeping the JSON's key order (and
    `columns` when there are no rows)."""
    pd = pandas()
    if not rows:
        return pd.DataFrame(columns=columns or [])
    return pd.DataFrame.from_records(rows)
