#!/usr/bin/env python3
# tests/main-thread-share.py CMD ARGS...: run CMD (its output drained and
# dropped) and print its exit status, the share (percent) of its user CPU
# time that its main thread used (sampled from /proc every 5 ms), and its
# CPU seconds - t0107: the decoding threads do the printing work.  User
# time only: the main thread's system time is the pipe's (vmsplice's huge
# pages zeroed by the kernel), which varies with how fast the host backs
# fresh memory - under two test suites at once it took the share from
# ~15% to 37%.
import os, resource, subprocess, sys, threading, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def drain():
    while p.stdout.read(1 << 16):
        pass
t = threading.Thread(target=drain)
t.start()
main, path = 0, '/proc/%d/task/%d/stat' % (p.pid, p.pid)
while p.poll() is None:
    try:
        f = open(path).read().rsplit(')', 1)[1].split()
        main = int(f[11])
    except (OSError, IndexError):
        pass
    time.sleep(0.005)
t.join()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
total = ru.ru_utime + ru.ru_stime
print(p.returncode, int(100 * main / os.sysconf('SC_CLK_TCK') / max(ru.ru_utime, 0.01)), '%.2f' % total)
