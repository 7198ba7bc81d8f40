#!/bin/sh
# Time on timed CYC recordings of real kernel code: per thread (per CPU and
# thread) it never goes backwards, in vmtrace script's output and in perf
# script's, and every branch's time is close to the truth - synth's branch
# list says when each branch was taken (host TSC).  Before s10, synth wrote
# the MTCs a stretch of time crossed and then one CYC for all of it: libipt
# added those cycles on top of the last MTC (and calibrated its cycle ratio
# from them), ran ahead, and the next MTC set it back - 148 backward steps
# on a 128 KiB recording; perf (which takes only CYCs right before an MTC
# as its reference) printed none.  Now a CYC times every TNT, TIP, MTC and
# PSB, as hardware with a CYC threshold of 0 writes them.
# Bounds (TSC ticks; tests/time-check.py): the truth's time of a branch
# that needs no packet (a direct call) is its walk step's, while a decoder
# can only place it between the packets around it; the longest packet-free
# stretch synth writes is before a VM exit's FUP (400..655 ticks plus a
# step): 800 ticks from the truth; and perf's time to the nanosecond
# (since session 26; with --cbr-vary within 800 ticks of perf's: libipt
# and perf estimate time from cycles their own ways when the ratio
# changes).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
make_code_dirs

time_rows <<'CONFIGS'
thread-cyc-mtc0       --vcpus 4 --cyc --mtc-period 0 --psb-period 0
thread-cyc-mtc3       --vcpus 2 --cyc --mtc-period 3 --psb-period 0 --seed 5
cpu-cyc-mtc0          --vcpus 4 --per-cpu --cyc --mtc-period 0 --psb-period 0
cpu-cyc-mtc3          --vcpus 3 --per-cpu --cpus 2 --cyc --psb-period 0 --seed 3
thread-cyc-cbr-vary   --vcpus 2 --cyc --cbr-vary --mtc-period 0 --psb-period 0
CONFIGS
finish
