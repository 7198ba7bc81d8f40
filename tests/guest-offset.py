#!/usr/bin/env python3
# tests/guest-offset.py PERF GUEST.data HOST_START [RATIO] - the TSC offset
# that puts the guest file's first timed record 200000 ticks after
# HOST_START (host TSC), with TSC scaling RATIO/2^48 (default 1.0):
# guest = (host * RATIO >> 48) + offset.  The guest file's TIME_CONV is
# time_shift 10, time_mult 341, zero 0 (perf-edit.py time-conv 10 341 0 1).
import re, subprocess, sys

out = subprocess.run([sys.argv[1], "script", "-i", sys.argv[2], "-D"], capture_output=True, text=True).stdout
t = next(int(m.group(1)) for m in re.finditer(r"^\d+ (\d+) 0x", out, re.M) if int(m.group(1)))
tsc = ((t // 341) << 10) + ((t % 341) << 10) // 341
ratio = int(sys.argv[4], 0) if len(sys.argv) > 4 else 1 << 48
print(hex((tsc - ((int(sys.argv[3], 0) + 200000) * ratio >> 48)) % 2**64))
