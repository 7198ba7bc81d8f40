#!/bin/sh
# Decode errors are named as perf names them: on corrected, timed
# recordings with corrupt AUX data (seeds 1-4; exit 3), every error line of
# `vmtrace script --itrace=e` names its vCPU thread and a time, and each
# thread's first error is one perf prints at the same ip and tid, within
# 10 us of perf's time, with perf's code and message (until session 26
# libipt's: "code 13: no memory mapped at this address" where perf says
# "code 5: Failed to get instruction"; before that: time 0, pid -1, tid 0 -
# the error's time was never set; and where corruption sent the flow to
# code that cannot be read, vmtrace named the last branch it decoded, perf
# the address it could not read: the corrupt TIP's target - seeds 1-3 had
# such a first error).
#
# perf 6.1's error ip (intel-pt-decoder.c: state.from_ip = decoder->ip at
# the error), by libipt's error kind:
#   nomap, bad insn   perf code 5 "Failed to get instruction" at the
#                     instruction it could not read; vmtrace the same ip
#   bad query, bad    perf code 6 "Trace doesn't match instruction" at the
#   retcomp           branch whose packet did not fit; vmtrace the same ip
#   bad opcode        perf code 3 "Bad packet" where its walk stands when
#                     it reads the packet (after the last good one); libipt
#                     reads ahead and fails at the branch whose packet came
#                     before it: vmtrace names that branch (differs:
#                     first-errors.py matches a Bad packet at any ip -
#                     seed 4's thread 4010 since session 33's stub)
#   overflow          perf code 7 "Overflow packet" at the ip before the
#                     OVF; vmtrace prints no error line (counts OVFs only)
#   lost              perf code 8 "Lost trace data", ip 0, for a truncated
#                     AUX record; vmtrace prints no error line
# Resynchronisation differs: perf resumes at the next TIP or FUP, vmtrace
# (libipt) at the next PSB.  On these recordings (7 corrupt spots per
# queue, 2 queues) vmtrace prints 14 error lines each (one per spot, 14
# resyncs), perf 62-69 (it resumes 28-35 times inside the corrupt data and
# errs again); 11-14 of vmtrace's 14 have a perf error at the same ip and
# tid.  Past the first error the two walks are in different places, and
# perf's clock goes astray (its later error times jump by seconds): only
# first errors are compared.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
need_perf
make_code_dirs

for seed in 1 2 3 4; do
	code_recording err$seed 256K --vcpus 2 --seed $seed || continue
	"$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/err$seed.data/data"
	"$VMTRACE" script "$TMP/err$seed.data" --guestkallsyms "$GUEST_CODE/kallsyms" --itrace=e \
		>"$TMP/vt$seed" 2>/dev/null
	rc=$?
	"$PERF" script -i "$TMP/err$seed.data" --guestkallsyms "$GUEST_CODE/kallsyms" --itrace=e \
		>"$TMP/perf$seed" 2>/dev/null
	"$PYTHON3" "$top_srcdir/tests/first-errors.py" "$TMP/vt$seed" "$TMP/perf$seed" >"$TMP/cmp$seed"
	read -r nerr zero notid threads near nperf _ missed <"$TMP/cmp$seed"
	check "seed $seed: corrupt AUX: vmtrace prints decode errors ($nerr; perf $nperf)" test "$nerr" -gt 0
	check "seed $seed: exit 3 (got $rc)" test "$rc" -eq 3
	check "seed $seed: no error line has time 0 ($zero of $nerr)" test "$zero" -eq 0
	check "seed $seed: every error line names its vCPU thread ($notid of $nerr without)" test "$notid" -eq 0
	check "seed $seed: each thread's first error is one perf prints (ip - any for a Bad packet -, tid, code and message) within 10 us ($near of $threads; not: $missed)" \
		test "$near" -eq "$threads"
done
finish
