#!/usr/bin/env python3
"""results_table.py -- turns bench_analyzer output into the Markdown table of
RESULTS.md: one row per (ranks, events) with the 1-thread and all-thread
load+analyze rates (wall and CPU), peak memory per event and export MB/s.

usage: bench_analyzer ... | results_table.py
"""
import re, sys

rows, order = {}, []
for line in sys.stdin:
    m = re.search(r"(\d+) ranks\s+(\d+) events\s+threads\s+(\d+): load\+analyze wall\s+([\d.]+) s =\s+([\d.]+) M events/s, "
                  r"CPU\s+([\d.]+) s =\s+([\d.]+) M events/s per core\s+peak RSS\s+([\d.]+) MB =\s+([\d.]+) bytes/event", line)
    if m:
        key = (int(m[1]), int(m[2]))
        if key not in rows:
            rows[key] = {}
            order.append(key)
        rows[key][int(m[3])] = m
        continue
    m = re.search(r"(\d+) ranks\s+(\d+) events\s+export:\s+([\d.]+) MB in\s+([\d.]+) s =\s+([\d.]+) MB/s", line)
    if m:
        key = (int(m[1]), int(m[2]))
        rows.setdefault(key, {})["export"] = m
print("| ranks | events | 1 thread: wall s | 1 thread: M ev/s (wall) | 1 thread: M ev/s per core (CPU) "
      "| 2 threads: wall s | 2 threads: M ev/s (wall) | 2 threads: M ev/s per core (CPU) | peak RSS MB | bytes/event | export MB/s |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for key in order:
    r = rows[key]
    one, two = r.get(1), r.get(max(k for k in r if k != "export"))
    ex = r.get("export")
    print(f"| {key[0]} | {key[1]:,} | {one[4]} | {one[5]} | {one[7]} | {two[4]} | {two[5]} | {two[7]} | "
          f"{max(float(one[8]), float(two[8])):.1f} | {max(float(one[9]), float(two[9])):.1f} | "
          f"{ex[5] if ex else 'not run'} |")
