#!/bin/sh
# correlate's threads: with fewer queues than twice the threads, every
# thread gets queues of its own (before, a thread always took two queues,
# so 2 queues and --jobs 2 left the second thread idle); the answer is
# the same as with one thread.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
command -v strace >/dev/null || skip "strace not installed (apt-get install strace)"

"$VMTRACE" synth -o "$TMP/q2.data" --size 8M --vcpus 2 2>/dev/null
"$VMTRACE" synth -o "$TMP/q3.data" --size 8M --vcpus 3 2>/dev/null
# the number of threads that read the file (with VMTRACE_AUX_PREAD the AUX
# data is read by the thread that decodes it; mapped, a chunk of the file
# is mapped by the first thread that reads in it and shared - t0052)
readers() {
	VMTRACE_AUX_PREAD=1 strace -f -qq -y -e trace=pread64,mmap -o "$TMP/st" "$VMTRACE" correlate --dry-run "$@" >/dev/null 2>&1
	grep '\.data>' "$TMP/st" | awk '{print $1}' | sort -u | wc -l
}
# most_readers ARGS...: the most threads that read in up to 5 runs (work
# units are taken as threads come: on a loaded machine the first thread can
# take them all before the second one runs - it failed so under load)
most_readers() {
	m=0
	for _ in 1 2 3 4 5; do
		n=$(readers "$@")
		[ "$n" -gt "$m" ] && m=$n
		[ "$m" -ge 2 ] && break
	done
	echo "$m"
}
check "2 queues, --jobs 2: both threads decode" test "$(most_readers --jobs 2 "$TMP/q2.data")" -eq 2
check "3 queues, --jobs 2: both threads decode" test "$(most_readers --jobs 2 "$TMP/q3.data")" -eq 2
check "2 queues, --jobs 1: one thread" test "$(readers --jobs 1 "$TMP/q2.data")" -eq 1
for q in q2 q3; do
	for j in 1 2 3; do
		"$VMTRACE" correlate --dry-run --json --jobs $j "$TMP/$q.data" >"$TMP/$q.$j" 2>&1
	done
	check "$q: the same answer with 1, 2 and 3 threads" \
		sh -c "cmp '$TMP/$q.1' '$TMP/$q.2' && cmp '$TMP/$q.1' '$TMP/$q.3'"
done
finish
