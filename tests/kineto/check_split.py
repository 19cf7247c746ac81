#!/usr/bin/env python3
"""check_split.py STEPSCOPE MAKE_KINETO WORKDIR — one Kineto document
tokenized on two threads (analyzer/src/import/kineto/kineto_split.c) must give exactly
what the sequential import gives: the analysis JSON, the exit status and
every message (warnings, errors with their byte offsets). Each document is
analysed with STEPSCOPE_KINETO_SPLIT=off and =on (the split forced, any
size); STEPSCOPE_KINETO_SPLIT_TRACE says what the split did ("used": the
helper's events were converted, "abandoned": the caller met the split
point in another state and read on alone, "alone": no split point), and
the test checks that each path is really taken where it should be, so it
cannot pass by never splitting.

Documents: generated runs (make_kineto.py) of several sizes, plain and
gzip, NCCL metadata on kernels or on record_param_comms ops, keys after
`traceEvents`; the array form; one line, compact or not (the point after
"}," instead of a newline), and one where that falls inside a string;
pretty-printed events whose args hold arrays of objects (lines that
start with '{' inside events: the point may fall inside an event); and in
the second half: a JSON error, a truncated text, a `ts` that overflows,
invalid UTF-8, a name longer than the import keeps, a non-object element; a
truncated gzip file."""
import gzip
import json
import os
import shutil
import subprocess
import sys

exe, gen, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
fail = 0
verdicts = {}


def check(cond, what):
    global fail
    if not cond:
        print("FAILED:", what)
        fail += 1


def analyze(path, mode, at=None):
    env = dict(os.environ)
    env["STEPSCOPE_KINETO_SPLIT"] = mode
    env["STEPSCOPE_KINETO_SPLIT_TRACE"] = "1"
    env.pop("STEPSCOPE_KINETO_SPLIT_AT", None)
    if at:
        env["STEPSCOPE_KINETO_SPLIT_AT"] = at
    out = path + "." + mode + ".report.json"
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run([exe, "analyze", path, "--json", out, "--quiet"], env=env, capture_output=True, text=True)
    lines = r.stderr.splitlines()
    trace = [ln for ln in lines if ln.startswith("kineto split: ")]
    rest = "\n".join(ln for ln in lines if not ln.startswith("kineto split: "))
    report = open(out).read() if os.path.exists(out) else None
    return r.returncode, rest, report, [t.split()[2] for t in trace]


def same(path, expect=None, at=None, what=""):
    """Both ways alike; `expect`: the split's verdict wanted (or None)."""
    a = analyze(path, "off")
    b = analyze(path, "on", at)
    name = os.path.basename(path) + (" at " + at if at else "") + (" (" + what + ")" if what else "")
    check(a[3] == [], "%s: no split when it is off" % name)
    check(a[0] == b[0], "%s: exit status %d vs %d" % (name, a[0], b[0]))
    check(a[1] == b[1], "%s: messages differ:\n--- off\n%s\n--- on\n%s" % (name, a[1], b[1]))
    check(a[2] == b[2], "%s: the analysis JSON differs" % name)
    check(len(b[3]) == 1, "%s: one split verdict, got %s" % (name, b[3]))
    v = b[3][0] if b[3] else None
    verdicts.setdefault(v, []).append(name)
    if expect:
        check(v == expect, "%s: split %s, expected %s" % (name, v, expect))
    return a


def write(path, text, gz=False):
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
    return path


def make(name, *opts):
    d = os.path.join(work, name)
    subprocess.run([sys.executable, gen, d, "--ranks", "1"] + list(opts), check=True)
    return d


# generated runs of several sizes, plain and gzip
for steps, layers, extra in [(2, 4, []), (6, 8, ["--base-ns"]), (20, 16, ["--graphs"]),
                             (8, 8, ["--param-comms"]), (40, 24, ["--missing-corr", "3"])]:
    for gz in (False, True):
        d = make("s%d_l%d%s" % (steps, layers, "_gz" if gz else ""), "--steps", str(steps), "--layers", str(layers),
                 *(extra + (["--gzip"] if gz else [])))
        f = os.path.join(d, "rank-0.json" + (".gz" if gz else ""))
        same(f, "used")
        same(f, "used", at="0.2")
        same(f, "used", at="0.85")

base = os.path.join(work, "s20_l16", "rank-0.json")
text = open(base, encoding="utf-8").read()
doc = json.loads(text)
n = len(text)


def second_half(s, needle, frac=0.85):
    """The first `needle` after frac of s (past the split point, which is at
    0.65-0.75 of the text by default)."""
    i = s.index(needle, int(len(s) * frac))
    return i


# the array form (depth 1)
events = doc["traceEvents"]
arr = "[\n" + ",\n".join("  " + json.dumps(e) for e in events) + "\n]\n"
same(write(os.path.join(work, "array.json"), arr), "used")
# one line (no newline: json.dump's output, as in TraceLens' xdit and sglang
# traces), compact and with blanks: the point is a '{' after "}," or "}, "
for name, sep in (("compact.json", (",", ":")), ("one_line.json", (", ", ": "))):
    for gz in (False, True):
        one = json.dumps(doc, separators=sep)
        same(write(os.path.join(work, name + (".gz" if gz else "")), one, gz), "used")
# ... and where the first such '{' after the point's fraction is inside a
# string (an event name holding "}, {"): the caller meets the point inside
# that string and reads on alone
trap = dict(doc)
trap["traceEvents"] = list(events)
mid = len(events) // 2
trap["traceEvents"][mid] = dict(events[mid], name="trap}, {not an event")
one = json.dumps(trap)
t = one.index("trap}, {") + len("trap}, ")
for gz in (False, True):
    same(write(os.path.join(work, "trap.json" + (".gz" if gz else "")), one, gz), "abandoned",
         at=repr((t - 1.5) / len(one)), what="'}, {' in a string")
# no '{' after the point's fraction (a long string closes the document): no
# split point, the caller reads alone
tail = dict(doc, zzz="x" * (len(text) // 3))
same(write(os.path.join(work, "no_point.json"), json.dumps(tail, separators=(",", ":"))), "alone", at="0.9")
# pretty-printed events whose args hold arrays of objects: lines starting
# with '{' inside events, where the point may fall
pretty = dict(doc)
pretty["traceEvents"] = [dict(e, args=dict(e.get("args", {}), nested=[{"a": i}, {"b": [{"c": 1}]}]))
                         for i, e in enumerate(events)]
p = write(os.path.join(work, "pretty.json"), json.dumps(pretty, indent=1))
for at in ("0.3", "0.45", "0.5", "0.55", "0.7"):
    same(p, None, at=at, what="pretty")
same(write(os.path.join(work, "pretty.json.gz"), json.dumps(pretty, indent=1), gz=True), None, at="0.5",
     what="pretty gzip")
check("abandoned" in verdicts, "the point met inside an event (abandoned) at least once: %s" % list(verdicts))

# errors and oddities in the second half
i = second_half(text, '"ts": ')
bad_json = text[:i + 4] + ";" + text[i + 5:]
for gz in (False, True):
    sfx = ".gz" if gz else ""
    r = same(write(os.path.join(work, "json_error.json" + sfx), bad_json, gz), None, what="JSON error")
    check(r[0] != 0 and "byte %d of the JSON text" % (i + 4) in r[1], "JSON error at byte %d: %s" % (i + 4, r[1]))
    same(write(os.path.join(work, "truncated.json" + sfx), text[:int(n * 0.8)], gz), None, what="truncated text")
    j = second_half(text, '"ts": ')
    k = text.index(",", j)
    same(write(os.path.join(work, "ts_overflow.json" + sfx), text[:j + 6] + "9" * 22 + text[k:], gz), None,
         what="ts overflow")
    j = second_half(text, '"name": "') + 9
    j2 = second_half(text, '"name": "', 0.3) + 9
    bad_utf8 = (text[:j2].encode() + b"\xff\xfe" + text[j2:j].encode() + b"\xc3(" + text[j:].encode())
    r = same(write(os.path.join(work, "bad_utf8.json" + sfx), bad_utf8, gz), None, what="invalid UTF-8")
    check("invalid UTF-8" in (r[2] or "") or "invalid UTF-8" in r[1], "invalid UTF-8 reported")
    only2 = text[:j].encode() + b"\xc3(" + text[j:].encode()
    same(write(os.path.join(work, "bad_utf8_2.json" + sfx), only2, gz), "used", what="invalid UTF-8 after the point")
    long_name = text[:j] + "x" * 5000 + text[j:]
    same(write(os.path.join(work, "long_name.json" + sfx), long_name, gz), "used", what="long name")
    j = second_half(text, "},\n  {") + 2
    same(write(os.path.join(work, "scalar.json" + sfx), text[:j] + "\n  5," + text[j:], gz), "used",
         what="a number among the events")
    esc = text[:j] + '\n  {"ph": "X", "cat": "kernel", "name": "k\\u00e9\\"q\\n", "ts": 1, "dur": 2, "pid": 0, ' \
                     '"tid": 7, "args": {"stream": 7, "device": 0}},' + text[j:]
    same(write(os.path.join(work, "escapes.json" + sfx), esc, gz), "used", what="escapes")
# the last event of the array is the helper's last: a kernel long enough
# to lead the kernel table, which must be there
end = text.index("\n  ],\n  \"traceName\"")
j = second_half(text, '"ts": ')
ts = text[j + 6:text.index(",", j)]
last = text[:end] + ',\n  {"ph": "X", "cat": "kernel", "name": "the_last_kernel", "ts": %s, "dur": 900000, ' \
                    '"pid": 0, "tid": 7, "args": {"stream": 7, "device": 0, "correlation": 1}}' % ts + text[end:]
for gz in (False, True):
    r = same(write(os.path.join(work, "last.json" + (".gz" if gz else "")), last, gz), "used", what="last event")
    check(r[2] is not None and "the_last_kernel" in r[2], "the last event is in the report")
# a truncated or damaged gzip file (its last 4 bytes still the text's
# length, so that the split is tried): the pipe's message, at the same offset
raw = open(os.path.join(work, "s20_l16_gz", "rank-0.json.gz"), "rb").read()
for cut in (0.5, 0.9):
    r = same(write(os.path.join(work, "cut%d.json.gz" % int(cut * 100)), raw[:int(len(raw) * cut)] + raw[-4:]),
             None, what="truncated gzip")
    check(r[0] != 0, "truncated gzip: an error")
    mid = int(len(raw) * cut)
    damaged = raw[:mid] + bytes(b ^ 0x55 for b in raw[mid:mid + 64]) + raw[mid + 64:]
    same(write(os.path.join(work, "damaged%d.json.gz" % int(cut * 100)), damaged), None, what="damaged gzip")
# two gzip members: more text than the trailer's ISIZE (the last member's)
two = gzip.compress(text[:n // 2].encode()) + gzip.compress(text[n // 2:].encode())
same(write(os.path.join(work, "members.json.gz"), two), "used", what="two members")

print("verdicts:", {k: len(v) for k, v in verdicts.items()})
if fail:
    print("%d check(s) failed" % fail)
    sys.exit(1)
print("ok")
