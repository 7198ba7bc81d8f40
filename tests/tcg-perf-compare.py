#!/usr/bin/env python3
"""tcg-perf-compare.py - perf script vs vmtrace script on a TCG recording.

    tcg-perf-compare.py PERF.OUT VMTRACE.OUT POKED-PAGES

perf 6.1 ignores guest-kernel TEXT_POKE records, so it decodes the first
bytes of code that the guest patched: it errs there and resyncs at the
next PSB.  Prints one JSON object: perf's errors, how many of them lie on
a poked page (the error's ip or the source of perf's branch before it),
perf's branch lines, how many of them vmtrace printed in the same order
(time aside), and how many unmatched perf lines lie in an error stretch
(up to 64 branches before an error, to its resync).
"""
import bisect
import json
import re
import sys

TIME = re.compile(r" +[0-9]+\.[0-9]+: ")
ERR = re.compile(r"instruction trace error .* ip (0x[0-9a-f]+)")


def page_of(line):
    m = re.search(r"\]\s+([0-9a-f]+) ", line)
    return int(m.group(1), 16) >> 12 << 12 if m else None


def main():
    perf = [TIME.sub(" ", l.rstrip("\n")) for l in open(sys.argv[1])]
    vt = [TIME.sub(" ", l.rstrip("\n")) for l in open(sys.argv[2])]
    poked = {int(l, 16) for l in open(sys.argv[3]) if l.strip()}
    errors = on_poked = 0
    near_error = set()
    for i, line in enumerate(perf):
        m = ERR.search(line)
        if not m:
            continue
        errors += 1
        prev = page_of(perf[i - 1]) if i else None
        on_poked += int(m.group(1), 16) >> 12 << 12 in poked or prev in poked
        near_error.update(range(max(0, i - 64), i + 1))
        for k in range(i + 1, min(len(perf), i + 3)):     # the resync line
            near_error.add(k)
            if " 0 [unknown]" in perf[k]:
                break
    branches = [i for i, l in enumerate(perf) if not ERR.search(l)]
    at, matched, stray = 0, 0, 0
    index = {}
    for k, l in enumerate(vt):
        index.setdefault(l, []).append(k)
    for i in branches:
        ks = index.get(perf[i], [])
        j = bisect.bisect_left(ks, at)
        nxt = ks[j] if j < len(ks) and ks[j] - at < 20000 else None
        if nxt is None:
            stray += i not in near_error
            continue
        matched += 1
        at = nxt + 1
    print(json.dumps({"perf_errors": errors, "errors_on_poked_pages": on_poked, "perf_branches": len(branches),
                      "matched": matched, "unmatched_outside_error_stretches": stray,
                      "vmtrace_errors": sum(1 for l in vt if ERR.search(l))}))


main()
