#!/bin/sh
# Crash safety of `vmtrace correlate --in-place`: SIGKILL at 50+ random
# moments on a 128 MiB trace; afterwards, and after the documented
# `vmtrace correlate --recover FILE`, the file's digest is either the
# original's or the fully corrected one's - never a mix.
# VMTRACE_TEST_APPLY_DELAY_US (test hook) slows the patch writes in half
# of the runs so that kills also land while the trace is being modified;
# the other half are killed within the first half of an unslowed run, most
# of which is the scan before anything is written (kills there leave the
# original; drawn over the slowed run's length, as they were, the scan's
# 0.1 s of 1.5 s was missed by all 16 kills of the sanitizer suite).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
export SOURCE_DATE_EPOCH=1700000000
# (the sanitizer suite: 16 - the sanitizers check memory, not kill moments,
# and make each run 3x slower)
KILLS=${VMTRACE_CRASH_KILLS:-50}
[ -z "${VMTRACE_CRASH_KILLS:-}" ] && asan_build && KILLS=16

"$VMTRACE" synth -o "$TMP/orig.data" --size 128M --per-cpu --vcpus 8 --cpus 2 2>/dev/null
orig=$(sha256sum <"$TMP/orig.data" | cut -d' ' -f1)
cp "$TMP/orig.data" "$TMP/ref.data"
"$VMTRACE" correlate --in-place "$TMP/ref.data" >"$TMP/ref.out" 2>&1 || { cat "$TMP/ref.out"; fail "reference correction"; finish; }
corrected=$(sha256sum <"$TMP/ref.data" | cut -d' ' -f1)
check "the correction changes the file" test "$orig" != "$corrected"
cp "$TMP/orig.data" "$TMP/t.data"
start=$(date +%s%N)
VMTRACE_TEST_APPLY_DELAY_US=50 "$VMTRACE" correlate --in-place "$TMP/t.data" >/dev/null 2>&1
span=$(( ($(date +%s%N) - start) / 1000000 ))   # ms, one slowed run
cp "$TMP/orig.data" "$TMP/t.data"
start=$(date +%s%N)
"$VMTRACE" correlate --in-place "$TMP/t.data" >/dev/null 2>&1
span0=$(( ($(date +%s%N) - start) / 1000000 ))   # ms, one unslowed run
echo "# one slowed run takes ${span} ms, an unslowed one ${span0} ms"

n_orig=0 n_corr=0 n_journal=0 n_mixed=0 i=0
rm -f "$TMP/t.data"
while [ $i -lt "$KILLS" ]; do
	i=$((i + 1))
	cp "$TMP/orig.data" "$TMP/t.data"
	delay="" len=$((span0 / 2)); [ $((i % 2)) = 0 ] && delay=50 len=$span
	at=$(awk -v i=$i -v span=$len 'BEGIN { srand(i); printf "%.3f\n", 0.01 + rand() * (span / 1000.0 - 0.01) }')
	VMTRACE_TEST_APPLY_DELAY_US=$delay "$VMTRACE" correlate --in-place "$TMP/t.data" >/dev/null 2>&1 &
	pid=$!
	sleep "$at"
	kill -KILL $pid 2>/dev/null
	wait $pid 2>/dev/null
	[ -e "$TMP/t.data.vmtrace-journal" ] && n_journal=$((n_journal + 1))
	"$VMTRACE" correlate --recover "$TMP/t.data" >/dev/null 2>&1 || { fail "kill $i: --recover failed"; continue; }
	if cmp -s "$TMP/t.data" "$TMP/orig.data"; then
		n_orig=$((n_orig + 1))
	elif cmp -s "$TMP/t.data" "$TMP/ref.data"; then
		n_corr=$((n_corr + 1))
	else
		n_mixed=$((n_mixed + 1)); fail "kill $i at ${at}s: file is neither original nor corrected"
	fi
	check "kill $i: no journal or journal temporary left after --recover" \
		sh -c "test ! -e '$TMP/t.data.vmtrace-journal' && ! ls -A '$TMP' | grep -q '^\.t\.data\.vmtrace-journal\.'"
done
echo "# $KILLS kills: $n_orig original, $n_corr corrected ($n_journal completed from the journal), $n_mixed mixed"
check "$KILLS kills, never a mix" test $n_mixed -eq 0 -a $((n_orig + n_corr)) -eq "$KILLS"
check "some kills interrupted the writing (journal recoveries: $n_journal)" test $n_journal -gt 0
check "some kills left the original" test $n_orig -gt 0
finish
