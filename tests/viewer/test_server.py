#!/usr/bin/env python3
"""test_server.py — `stepscope view`'s HTTP server refuses what it must refuse.

  test_server.py STEPSCOPE_EXE WORK_DIR CASE
      CASE: traversal | methods | serve | ranges | concurrent | cli | token | heads |
            slowloris | symlinks

Requests are written on raw sockets so that paths reach the server exactly as
typed (no client-side normalisation of "..", "%2e%2e" or "//"). A secret file is
placed next to the run directory and a symbolic link to it inside the run: no
request may return its content. Every request path starts with the access
token (PREFIX, /t/TOKEN from the URL the server printed) unless a case says otherwise.
Exit 0 pass, 1 fail.
"""

import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser"))
import harness  # noqa: E402
from harness import check  # noqa: E402

SECRET = b"TOP-SECRET-do-not-serve"
PREFIX = ""  # "/t/<token>" of the server under test


def start(exe, run, **kw):
    global PREFIX
    srv = harness.Server(exe, run, **kw)
    PREFIX = srv.prefix
    return srv


def raw(port, request, host="127.0.0.1"):
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(request)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0
    return status, head.decode("latin-1"), body


def get(port, path, method="GET", headers="", prefix=None):
    """A request for PREFIX + path (path as typed when it does not start with '/')."""
    prefix = PREFIX if prefix is None else prefix
    target = prefix + path if path.startswith("/") else path
    return raw(port, ("%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n" %
                      (method, target, port, headers)).encode("latin-1"))


def setup(work):
    work = os.path.abspath(work)
    run = harness.make_sample(os.path.join(work, "srv_run"), "--dp", "1", "--pp", "2", "--steps", "1", "--layers", "1")
    with open(os.path.join(work, "secret.txt"), "wb") as f:
        f.write(SECRET)
    link = os.path.join(run, "leak.json")
    if not os.path.islink(link):
        os.symlink(os.path.join(work, "secret.txt"), link)
    inner = os.path.join(run, "inner-link.json")
    if not os.path.islink(inner):
        os.symlink("report.json", inner)
    return run


def case_traversal(exe, work):
    run = setup(work)
    with start(exe, run) as srv:
        p = srv.port
        attacks = ["/run/a/../../secret.txt", "/run/a/..%2f..%2fsecret.txt", "/run/a/%2e%2e/%2e%2e/secret.txt",
                   "/run/a/%2E%2E/secret.txt", "/run/a/%2e%2e%2f%2e%2e%2fsecret.txt", "/run/a/leak.json",
                   "/run/a//etc/passwd", "/run/a/%2fetc%2fpasswd", "/run/a/..\\..\\secret.txt",
                   "/run/a/%5c..%5csecret.txt", "/run/a/trace.json%00.png", "/run/a/./trace.json",
                   "/../secret.txt", "/js/../../secret.txt", "//etc/passwd", "/etc/passwd",
                   "/run/c/trace.json", "/run/a/sub/trace.json", "/run/a/.hidden", "/%2e%2e/secret.txt",
                   "http://127.0.0.1/run/a/trace.json", "/run/a/" + "A" * 5000]
        for a in attacks:
            status, head, body = get(p, a)
            check(status in (400, 404) and SECRET not in body, "%s refused (%d)" % (a[:60], status))
        status, _, body = get(p, "/run/a/inner-link.json")
        check(status == 404, "a link inside the run is not served either: only the export and report are")
        check(srv.proc.poll() is None, "the server survived every attempt")


def case_methods(exe, work):
    run = setup(work)
    with start(exe, run) as srv:
        p = srv.port
        for m in ("POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"):
            status, _, _ = get(p, "/run/a/trace.json", method=m)
            check(status == 405, "%s refused with 405" % m)
        status, head, body = get(p, "/run/a/trace.json", method="HEAD")
        size = os.path.getsize(os.path.join(run, "trace.json"))
        check(status == 200 and ("Content-Length: %d" % size) in head and body == b"", "HEAD gives the length, no body")
        status, _, _ = raw(p, ("GET %s/index.html HTTP/1.1\r\nHost: evil.example.com\r\n\r\n" % PREFIX).encode())
        check(status == 403, "a foreign Host header is refused (DNS rebinding)")
        status, _, _ = raw(p, b"garbage\r\n\r\n")
        check(status == 400, "a malformed request line is refused")
        # binds to loopback only: the listening socket in /proc/net/tcp is 127.0.0.1
        with open("/proc/net/tcp") as f:
            listen = [l.split() for l in f.readlines()[1:] if l.split()[3] == "0A"]
        mine = [l for l in listen if int(l[1].split(":")[1], 16) == p]
        check(mine and all(l[1].split(":")[0] == "0100007F" for l in mine), "listening on 127.0.0.1 only")


def case_serve(exe, work):
    run = setup(work)
    with start(exe, run) as srv:
        p = srv.port
        check(srv.url.startswith("http://127.0.0.1:"), "prints the URL (%s)" % srv.url.strip())
        status, head, body = get(p, "/")
        check(status == 200 and b"stepscope viewer" in body and "text/html" in head, "the viewer page is served")
        status, head, body = get(p, "/js/app.js")
        check(status == 200 and "javascript" in head, "its scripts are served")
        status, _, body = get(p, "/run/a/trace.json?x=1")
        with open(os.path.join(run, "trace.json"), "rb") as f:
            check(status == 200 and body == f.read(), "the run's export is served byte for byte")
        status, _, body = get(p, "/api/runs")
        check(status == 200 and b'"trace":"run/a/trace.json"' in body, "the run listing names the files")
        status, head, _ = get(p, "/")
        check("Content-Security-Policy: " in head and "frame-ancestors 'none'" in head and
              "X-Frame-Options: DENY" in head, "a Content-Security-Policy with frame-ancestors 'none'")
        csp = [l for l in head.split("\r\n") if l.startswith("Content-Security-Policy:")][0]
        check("script-src 'self' blob:" in csp and "connect-src 'self'" in csp and "'unsafe-eval'" not in csp,
              "scripts and workers from this origin (and blob: workers), connections to it only")
        status, _, _ = get(p, "/nothing-here")
        check(status == 404, "unknown paths are 404")


def case_ranges(exe, work):
    run = setup(work)
    with open(os.path.join(run, "trace.json"), "rb") as f:
        whole = f.read()
    n = len(whole)
    with start(exe, run) as srv:
        p = srv.port
        status, head, body = get(p, "/run/a/trace.json")
        check(status == 200 and "Accept-Ranges: bytes" in head and body == whole, "files announce byte ranges")
        for rng, lo, hi in (("bytes=0-99", 0, 99), ("bytes=100-", 100, n - 1), ("bytes=-50", n - 50, n - 1),
                            ("bytes=10-%d" % (n + 1000), 10, n - 1), ("bytes=-%d" % (n + 5), 0, n - 1)):
            status, head, body = get(p, "/run/a/trace.json", headers="Range: %s\r\n" % rng)
            check(status == 206 and body == whole[lo:hi + 1] and
                  ("Content-Range: bytes %d-%d/%d" % (lo, hi, n)) in head and
                  ("Content-Length: %d" % (hi - lo + 1)) in head, "Range %s gives bytes %d-%d (%d)" % (rng, lo, hi, status))
        status, head, body = get(p, "/run/a/trace.json", headers="range:  bytes=5-9 \r\n")
        check(status == 206 and body == whole[5:10], "the header name is case-insensitive")
        status, head, _ = get(p, "/run/a/trace.json", headers="Range: bytes=%d-\r\n" % n)
        check(status == 416 and ("Content-Range: bytes */%d" % n) in head, "a range past the end is 416")
        for odd in ("bytes=0-1,5-9", "items=0-9", "bytes=9-1", "bytes=x-", "bytes=-", "bytes=--5"):
            status, _, body = get(p, "/run/a/trace.json", headers="Range: %s\r\n" % odd)
            check(status == 200 and body == whole, "Range %s is ignored: the whole file" % odd)
        status, head, body = get(p, "/run/a/trace.json", "HEAD", "Range: bytes=0-9\r\n")
        check(status == 206 and "Content-Length: 10" in head and body == b"", "HEAD with a range: head only")


def case_concurrent(exe, work):
    """A client that connects and says nothing must not hold up the others, and
    many simultaneous downloads all complete intact."""
    import threading
    import time
    run = setup(work)
    with open(os.path.join(run, "trace.json"), "rb") as f:
        whole = f.read()
    with start(exe, run) as srv:
        p = srv.port
        silent = [socket.create_connection(("127.0.0.1", p), timeout=10) for _ in range(3)]
        t0 = time.monotonic()
        status, _, body = get(p, "/run/a/trace.json")
        took = time.monotonic() - t0
        check(status == 200 and body == whole and took < 2.0,
              "served while 3 silent connections are open (%.2f s; the receive timeout is 5 s)" % took)
        results = []

        def fetch():
            results.append(get(p, "/run/a/trace.json"))
        threads = [threading.Thread(target=fetch) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(len(results) == 40 and all(r[0] == 200 and r[2] == whole for r in results),
              "40 simultaneous downloads (more than the 32 served at once) all complete intact")
        for s in silent:
            s.close()
        check(srv.proc.poll() is None, "the server is still up")


def case_cli(exe, work):
    run = setup(work)
    r = subprocess.run([exe, "view", "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--compare" in r.stdout and "--html" in r.stdout, "--help exits 0 and documents options")
    r = subprocess.run([exe, "view"], capture_output=True, text=True)
    check(r.returncode == 2, "no run: usage error 2")
    r = subprocess.run([exe, "view", run, "--port", "99999"], capture_output=True, text=True)
    check(r.returncode == 2, "bad port: usage error 2")
    r = subprocess.run([exe, "view", os.path.join(work, "no-such-run")], capture_output=True, text=True)
    check(r.returncode == 1 and "no-such-run" in r.stderr, "missing run: error 1 naming it")
    empty = os.path.join(work, "empty_run")
    os.makedirs(empty, exist_ok=True)
    r = subprocess.run([exe, "view", empty], capture_output=True, text=True)
    check(r.returncode == 1 and "trace.json" in r.stderr, "empty run: says what is missing (%s)" % r.stderr.strip())
    only = os.path.join(work, "trace_only")
    os.makedirs(only, exist_ok=True)
    with open(os.path.join(run, "trace.json"), "rb") as f, open(os.path.join(only, "trace.json"), "wb") as g:
        g.write(f.read())
    with start(exe, only) as srv:
        status, _, body = get(srv.port, "/api/runs")
        check(b'"report":null' in body and b"report.json" in body, "a run without report.json is served and the gap is named")
    # a busy port: the message says how to get another (issue 34 rough edges)
    import socket
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    busy = holder.getsockname()[1]
    r = subprocess.run([exe, "view", run, "--port", str(busy)], capture_output=True, text=True, timeout=60)
    holder.close()
    check(r.returncode == 1 and "--port 0" in r.stderr, "a busy port suggests --port 0 (%s)" % r.stderr.strip())
    out = os.path.join(work, "page.html")
    r = subprocess.run([exe, "view", run, "--html", out], capture_output=True, text=True)
    page = open(out, encoding="utf-8").read()
    check(r.returncode == 0 and '<script src=' not in page and 'id="data-a-trace"' in page and "</script" not in
          page.split('id="data-a-trace">')[1].split("</script>")[0], "--html writes one self-contained page")


def case_token(exe, work):
    """Without the token as the first path segment nothing is served; no
    response sets a cookie (a cookie of 127.0.0.1 goes to every port of
    127.0.0.1, issue 34 defect 5) and every one says Referrer-Policy:
    no-referrer (the token must not reach another server in a Referer); only
    the export and report of a run are served, not other files lying in the
    run directory."""
    run = setup(work)
    with open(os.path.join(run, "notes.txt"), "wb") as f:
        f.write(SECRET)
    with open(os.path.join(run, "other.json"), "wb") as f:
        f.write(SECRET)
    with start(exe, run) as srv:
        p = srv.port
        check(len(srv.token) == 32, "the printed URL carries a 128-bit token")
        check(srv.url + "t/" + srv.token + "/" in srv.banner[0], "as its first path segment (%s)" % srv.banner[0].strip())
        heads = []
        for path in ("/", "/index.html", "/js/app.js", "/api/runs", "/run/a/trace.json", "/run/a/report.json"):
            status, head, body = get(p, path, prefix="")
            heads.append(head)
            check(status == 403 and SECRET not in body and b"traceEvents" not in body, "%s without the token: 403" % path)
            for wrong in ("/t/" + "0" * 32, "/t/" + srv.token[:-1], "/t/" + srv.token + "0", "/x/" + srv.token,
                          "/t/" + srv.token.upper()):
                status, head, _ = get(p, path, prefix=wrong)
                heads.append(head)
                check(status == 403, "%s under a wrong token %s: 403" % (path, wrong[:12]))
            status, _, _ = get(p, path + "?token=" + srv.token, prefix="")
            check(status == 403, "%s with the token in the query instead of the path: 403" % path)
            status, _, _ = get(p, path, prefix="", headers="Cookie: stepscope-%d=%s\r\n" % (p, srv.token))
            check(status == 403, "%s with the token in a cookie: 403 (no cookie opens anything)" % path)
            status, head, body = get(p, path)
            heads.append(head)
            check(status == 200 and SECRET not in body, "%s under /t/<token>: 200" % path)
        status, head, _ = get(p, srv.prefix + "?chunk=7", prefix="")
        heads.append(head)
        check(status == 303 and ("Location: %s/?chunk=7\r\n" % srv.prefix) in head,
              "/t/<token> without its slash redirects to /t/<token>/, keeping the query")
        status, head, _ = get(p, srv.prefix, prefix="")
        check(status == 303 and ("Location: %s/\r\n" % srv.prefix) in head, "and without a query to /t/<token>/")
        heads.append(head)
        status, _, body = get(p, "/api/runs")
        check(status == 200 and b'"trace":"run/a/trace.json"' in body,
              "the listing's file URLs are relative: the page fetches them under /t/<token>/")
        check(all("Set-Cookie" not in h and "set-cookie" not in h.lower() for h in heads),
              "no response sets a cookie (%d responses)" % len(heads))
        check(all("Referrer-Policy: no-referrer" in h for h in heads), "every response says Referrer-Policy: no-referrer")
        status, _, body = get(p, "/run/a/trace.json")
        check(status == 200 and b"traceEvents" in body, "with the token the export is served")
        for name in ("notes.txt", "other.json", "rank-00000.trace.zst", "inner-link.json"):
            status, _, body = get(p, "/run/a/" + name)
            check(status == 404 and SECRET not in body, "%s in the run directory is not served (%d)" % (name, status))


def case_heads(exe, work):
    """Malformed heads are refused at once: NUL 400, oversized 431, duplicate,
    empty or folded Host 400."""
    import time
    run = setup(work)
    with start(exe, run) as srv:
        p = srv.port
        s = socket.create_connection(("127.0.0.1", p), timeout=5)
        t0 = time.monotonic()
        s.sendall(b"GET / HT\x00")  # no end of head: the NUL alone must end it
        data = s.recv(4096)
        s.close()
        check(data.startswith(b"HTTP/1.1 400") and time.monotonic() - t0 < 2, "a NUL byte: 400 at once")
        status, _, _ = raw(p, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 9000 + b"\r\n\r\n")
        check(status == 431, "an oversized head: 431 (%d)" % status)
        status, _, _ = raw(p, ("GET %s/ HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example.com\r\n\r\n" % PREFIX).encode())
        check(status == 400, "two Host headers: 400 (%d)" % status)
        status, _, _ = raw(p, ("GET %s/ HTTP/1.1\r\nHost: 127.0.0.1\r\n evil.example.com\r\n\r\n" % PREFIX).encode())
        check(status == 400, "a folded Host header: 400 (%d)" % status)
        status, _, _ = raw(p, ("GET %s/ HTTP/1.1\r\nX-A: 1\r\n\tfolded\r\nHost: 127.0.0.1\r\n\r\n" % PREFIX).encode())
        check(status == 400, "any folded line: 400 (%d)" % status)
        status, _, _ = raw(p, ("GET %s/ HTTP/1.1\r\n\r\n" % PREFIX).encode())
        check(status == 400, "HTTP/1.1 without Host: 400 (%d)" % status)
        status, _, _ = get(p, "/")
        check(status == 200, "a well-formed request still works")
        check(srv.proc.poll() is None, "the server is still up")


def case_slowloris(exe, work):
    """32 (and 300) connections trickling their heads a byte at a time do not
    keep other clients out, and each gets 408 once its head deadline passes."""
    import time
    run = setup(work)
    with start(exe, run) as srv:
        p = srv.port
        slow = []
        for _ in range(300):
            c = socket.create_connection(("127.0.0.1", p), timeout=15)
            c.sendall(b"G")
            slow.append(c)
        t0 = time.monotonic()
        for i in range(5):
            for c in slow:
                try:
                    c.sendall(b"E")
                except OSError:
                    pass
            status, _, body = get(p, "/api/runs")
            check(status == 200 and b"runs" in body, "request %d served beside 300 trickling connections" % i)
            time.sleep(0.5)
        check(time.monotonic() - t0 < 6, "five requests in %.1f s" % (time.monotonic() - t0))
        # the 32 newest still trickle; past the deadline each is answered 408 and closed
        live = slow[-32:]
        deadline = time.monotonic() + 14
        answered = 0
        for c in live:
            c.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                data = c.recv(100)
                answered += data.startswith(b"HTTP/1.1 408")
            except OSError:
                pass
        check(answered == 32, "each trickling head ends with 408 after its deadline (%d of 32)" % answered)
        for c in slow:
            c.close()
        check(srv.proc.poll() is None, "the server is still up")


def case_symlinks(exe, work):
    """An export or report of the run directory that is a symbolic link is never
    followed (issue 34 defect 11: trace.json -> /etc/passwd gave an empty page with
    no note): the page says why it is not used, and what the ranks give is
    generated instead; without ranks, view says why there is nothing to show."""
    import glob
    import shutil
    src = setup(work)
    run = os.path.join(work, "linked_run")
    shutil.rmtree(run, ignore_errors=True)
    os.makedirs(run)
    ranks = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples", "cpu-dp2pp2-1f1b")
    for f in glob.glob(os.path.join(ranks, "rank-*.trace.zst")):
        shutil.copy(f, run)
    os.symlink(os.path.join(work, "secret.txt"), os.path.join(run, "trace.json"))
    os.symlink(os.path.join(src, "report.json"), os.path.join(run, "report.json"))  # a good one: still not followed
    with start(exe, run) as srv:
        status, _, body = get(srv.port, "/api/runs")
        check(status == 200 and body.count(b"is a symbolic link (never followed)") == 2,
              "the listing's notes say both links are not used (%s)" % body[:400])
        check(b"generated by `stepscope export`" in body and b"generated by `stepscope analyze`" in body,
              "the export and report are made from the ranks instead")
        status, _, body = get(srv.port, "/run/a/trace.json")
        check(status == 200 and SECRET not in body and b"traceEvents" in body, "the generated export is served")
    page = os.path.join(work, "linked.html")
    r = subprocess.run([exe, "view", run, "--html", page], capture_output=True, text=True)
    text = open(page, encoding="utf-8").read() if r.returncode == 0 else ""
    check(r.returncode == 0 and "symbolic link" in text and SECRET.decode() not in text,
          "--html: the page is written from the ranks and says why the links were not used (%s)" % r.stderr)
    odd = os.path.join(work, "linked_odd")  # a dangling link and a link to a directory
    shutil.rmtree(odd, ignore_errors=True)
    os.makedirs(odd)
    for f in glob.glob(os.path.join(ranks, "rank-*.trace.zst")):
        shutil.copy(f, odd)
    os.symlink("/nonexistent/trace.json", os.path.join(odd, "trace.json"))
    os.symlink("/etc", os.path.join(odd, "report.json"))
    page = os.path.join(work, "linked_odd.html")
    r = subprocess.run([exe, "view", odd, "--html", page], capture_output=True, text=True)
    text = open(page, encoding="utf-8").read() if r.returncode == 0 else ""
    check(text.count("is a symbolic link (never followed)") == 2,
          "a dangling link and a link to a directory are named as links too (%s)" % r.stderr)
    bare = os.path.join(work, "linked_bare")
    shutil.rmtree(bare, ignore_errors=True)
    os.makedirs(bare)
    os.symlink("/etc/passwd", os.path.join(bare, "trace.json"))
    for extra in ([], ["--html", os.path.join(work, "bare.html")]):
        r = subprocess.run([exe, "view", bare, "--port", "0"] + extra, capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and "symbolic link" in r.stderr and "root:" not in r.stderr + r.stdout,
              "no ranks, trace.json -> /etc/passwd: error 1 saying it is a link (%s)" % r.stderr.strip())


CASES = {"traversal": case_traversal, "methods": case_methods, "serve": case_serve, "ranges": case_ranges,
         "concurrent": case_concurrent, "cli": case_cli, "token": case_token, "heads": case_heads,
         "slowloris": case_slowloris, "symlinks": case_symlinks}

if __name__ == "__main__":
    exe, work, case = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    CASES[case](exe, work)
    print("PASS " + case)
