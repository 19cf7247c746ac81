"""_options.py — turns the keyword arguments of stepscope.analyze, ops and
diff into the command line's option strings, which the C library parses with
the command's own parser (so values are checked, and rejected with the same
messages, exactly as `stepscope analyze` does)."""


def steps_option(steps):
    """--steps value of `steps`: None, an int, "A:B", (A, B) with None for an
    open end, or a range with step 1."""
    if steps is None:
        return None
    if isinstance(steps, bool):
        raise TypeError("steps: want an int, 'A:B', (A, B) or a range, not a bool")
    if isinstance(steps, int):
        return str(steps)
    if isinstance(steps, str):
        return steps
    if isinstance(steps, range):
        if steps.step != 1 or len(steps) == 0:
            raise ValueError("steps: a range must be non-empty with step 1, not %r" % (steps,))
        return "%d:%d" % (steps.start, steps.stop - 1)
    if isinstance(steps, (tuple, list)) and len(steps) == 2:
        a, b = steps
        return "%s:%s" % ("" if a is None else int(a), "" if b is None else int(b))
    raise TypeError("steps: want an int, 'A:B', (A, B) or a range, not %r" % (steps,))


def _regexes(name, value):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    out = list(value)
    for v in out:
        if not isinstance(v, str):
            raise TypeError("%s: want regular expressions (str), not %r" % (name, v))
    return out


def analysis_options(steps=None, comm_kernels=None, compute_kernels=None, step_range=None,
                     launch_gap_us=None, threads=None, options=()):
    """The shared analysis options (analyzer/src/metrics/analysis_options.c) as argv."""
    argv = []
    s = steps_option(steps)
    if s is not None:
        argv += ["--steps", s]
    for r in _regexes("comm_kernels", comm_kernels):
        argv += ["--comm-kernel", r]
    for r in _regexes("compute_kernels", compute_kernels):
        argv += ["--compute-kernel", r]
    if step_range is not None:
        argv += ["--step-range", str(step_range)]
    if launch_gap_us is not None:
        argv += ["--launch-gap-us", str(launch_gap_us)]
    if threads is not None:
        argv += ["--threads", str(int(threads))]
    if isinstance(options, str):
        raise TypeError("options: want a list of strings such as ['--steps', '2:9']")
    argv += list(options)
    return argv


def report_options(rank=None, top=None):
    """--rank R and --top N of the report (analyze(), merge()) as argv."""
    argv = []
    if rank is not None:
        argv += ["--rank", str(int(rank))]
    if top is not None:
        argv += ["--top", str(int(top))]
    return argv
