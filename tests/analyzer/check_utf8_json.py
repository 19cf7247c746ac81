#!/usr/bin/env python3
"""check_utf8_json.py -- each file must be strict UTF-8, parse as JSON, and
contain U+FFFD (the replacement of the invalid bytes the test run holds).

usage: check_utf8_json.py FILE...
"""
import json, sys

for path in sys.argv[1:]:
    text = open(path, "rb").read().decode("utf-8")  # strict: raises on invalid bytes
    json.loads(text)
    assert "\ufffd" in text, f"{path}: no U+FFFD (invalid names not replaced?)"
print("ok")
