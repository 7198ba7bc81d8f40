#!/bin/sh
# The times t0047 holds (a queue's time never goes back: src/decode/queue.c
# monotonic()) do not depend on where the AUX data is cut into decode
# windows: with a window per PSB segment (VMTRACE_DECODE_WINDOW=1: a fresh
# libipt decoder at every PSB, warmed up on the segment before it) every
# JSON field - times included - is what one window of the whole queue
# gives, on recordings where libipt's own time steps back (CYC threshold,
# per thread and per CPU; guest time not corrected).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G=$GUEST_CODE/kallsyms
while read -r name opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	config_recording "$name" 128K $opts || continue
	same_text "$name" VMTRACE_DECODE_WINDOW=0 VMTRACE_DECODE_WINDOW=1 "the same, times too, with a window per PSB segment" \
		"$TMP/$name.data" --guestkallsyms "$G" --itrace=bep --json
	check "$name: exit 0" test "$st_r1" -eq 0
done <<'CONFIGS'
thread-cyc-thresh8    --vcpus 2 --cyc --cyc-thresh 8 --mtc-period 0 --psb-period 0
cpu-cyc-thresh6       --vcpus 4 --per-cpu --cpus 2 --cyc --cyc-thresh 6 --psb-period 0 --seed 4
raw-thread-cyc        --vcpus 4 --cyc --mtc-period 0 --psb-period 0
CONFIGS
finish
