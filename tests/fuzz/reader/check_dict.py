#!/usr/bin/env python3
"""check_dict.py — the reader fuzzer's dictionary names every metadata key and member of
model/trace_metadata.h (issue 34: the seeds and dictionary once carried only {"dp":2}, and
the fuzzer never reached the schedule's stage count).

usage: check_dict.py TRACE_METADATA_H DICT
"""
import re
import sys

header, dict_path = sys.argv[1], sys.argv[2]
text = open(header).read()
words = set(re.findall(r'#define TM_KEY_\w+\s+"([^"]+)"', text))
for path in re.findall(r'X\(\w+,\s*"([^"]+)"', text):
    words.update(path.split("."))
entries = set(re.findall(r'^\w*="(.*)"\s*$', open(dict_path).read(), re.M))
missing = sorted(w for w in words if '\\"%s\\"' % w not in entries)
if not words:
    print("FAIL: no key found in " + header)
    sys.exit(1)
if missing:
    print("FAIL: the dictionary lacks %s" % ", ".join('"%s"' % m for m in missing))
    sys.exit(1)
print("OK: %d keys and members, all in the dictionary" % len(words))
