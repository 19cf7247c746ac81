"""harness.py — shared plumbing for the viewer's browser tests and bench.

What it is for: start `stepscope view` on a free port, start headless Chromium
through Selenium (Debian's chromium + chromium-driver + python3-selenium), wait for
the page to become interactive, and collect console errors.

How it works: the server is started with --port 0 and its first stdout line gives
the URL with its access token as the first path segment, http://127.0.0.1:P/t/TOKEN/
(Server.page() builds page URLs under it; raw HTTP clients prefix their paths with
Server.prefix). Chromium runs with --headless=new --no-sandbox --disable-gpu (it runs as
root in CI) and browser logging enabled, so console errors can be asserted on.
Missing Chromium or Selenium makes the tests exit 77 (CTest SKIP), never pass.
"""

import os
import re
import shutil
import subprocess
import sys
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "..", "viewer", "make_sample.py")


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


def make_sample(out_dir, *args):
    if not os.path.exists(os.path.join(out_dir, "trace.json")):
        subprocess.run([sys.executable, SAMPLE, out_dir] + list(args), check=True,
                       stderr=subprocess.DEVNULL)
    return out_dir


class Server:
    def __init__(self, stepscope, run, compare=None, extra=()):
        cmd = [stepscope, "view", run, "--port", "0"] + list(extra)
        if compare:
            cmd += ["--compare", compare]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"(http://[^ ]+?/)t/([0-9a-f]+)/", line)
        if not m:
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError("stepscope view printed no URL with a token: %r %s" % (line, err))
        self.url = m.group(1)      # the server's root, without the token
        self.token = m.group(2)    # the access token printed in the URL
        self.port = int(re.search(r":(\d+)/", self.url).group(1))
        self.prefix = "/t/" + self.token  # what every path starts with
        self.banner = [line]

    def page(self, query=""):
        """The viewer's URL with the access token (as printed) and an optional
        query ("chunk=7" or "?chunk=7")."""
        query = query.lstrip("?")
        return self.url + self.prefix[1:] + "/" + ("?" + query if query else "")

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def browser(width=1400, height=900):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip("python3-selenium is not installed")
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chrome or not driver_path:
        skip("chromium / chromium-driver are not installed")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=%d,%d" % (width, height), "--allow-file-access-from-files"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver_path), options=opts)


def wait_state(driver, states=("ready",), timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        s = driver.execute_script("return document.body && document.body.dataset.state")
        if s in states:
            return s
        if s == "error":
            raise AssertionError("viewer error: " + driver.find_element("id", "error").text)
        time.sleep(0.05)
    raise AssertionError("viewer not %s after %ds (state %r, status %r)" % (
        states, timeout, s, driver.execute_script("var e = document.getElementById('status'); return e ? e.textContent : null")))


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok: " + what)
