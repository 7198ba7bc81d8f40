#!/usr/bin/env python3
# first-errors.py VMTRACE PERF: vmtrace script's and perf script's
# --itrace=e error lines compared: each thread's first vmtrace error
# against perf's errors at the same ip and tid with the same code and
# message (the closest one's time within 10 us: timeless recordings have
# time 0 in both; a "Bad packet" at any ip: perf names where its walk
# stands when it reads the bad packet, libipt - reading ahead - the branch
# whose packet came before it, t0099's table).  Prints one line:
#   NERR ZERO NOTID THREADS NEAR NPERF PFOUND MISSED
# vmtrace's error lines, those with time 0, those without a thread (tid 0
# or -1), threads with an error, threads whose first error perf prints,
# perf's error lines, those of them vmtrace prints too (ip and tid, exactly -
# a Bad packet's too), and
# the threads whose first error perf does not print ("tid T ip IP code N,
# ..." or -).
import re, sys

PAT = re.compile(r'time (\S+) cpu (-?\d+) pid (-?\d+) tid (-?\d+) ip (0x[0-9a-f]+|0) code (\d+: .*)$')


def errors(path):
    return [m.groups() for m in map(PAT.search, open(path)) if m]


vt, perf = errors(sys.argv[1]), errors(sys.argv[2])
firsts = {}
for e in vt:
    firsts.setdefault(e[3], e)
near, missed = 0, []
for t, _, _, tid, ip, code in firsts.values():
    d = [abs(float(pt) - float(t)) for pt, _, _, ptid, pip, pcode in perf
         if (pip == ip or code.startswith('3:')) and ptid == tid and pcode == code]
    if d and min(d) < 10e-6:
        near += 1
    else:
        missed.append('tid %s ip %s code %s' % (tid, ip, code))
found = sum(any(v[3] == p[3] and v[4] == p[4] for v in vt) for p in perf)
print(len(vt), sum(float(e[0]) == 0 for e in vt), sum(e[3] in ('0', '-1') for e in vt), len(firsts), near,
      len(perf), found, ', '.join(missed) or '-')
