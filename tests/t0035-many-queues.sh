#!/bin/sh
# correlate: memory does not grow with the number of AUX queues by more
# than a few dozen bytes per queue (issue #11 item 19: a file of a million
# one-packet queues took 1.2 GB).  A bound on peak RSS, not a timing.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python

"$VMTRACE" synth -o "$TMP/small.data" --size 256K 2>/dev/null || fail "synth"
"$PYTHON3" "$top_srcdir/tests/many-queues.py" "$TMP/small.data" "$TMP/mq.data" 1000000 || fail "many-queues.py"

# peak_rss_kb CMD...: runs CMD (output to $TMP/out, $TMP/err), prints its
# peak RSS in KiB and its exit status
peak_rss_kb() {
	"$PYTHON3" -c 'import os, subprocess, sys
with open(sys.argv[1], "wb") as out, open(sys.argv[2], "wb") as err:
    p = subprocess.Popen(sys.argv[3:], stdout=out, stderr=err)
    _, status, ru = os.wait4(p.pid, 0)
print(ru.ru_maxrss, os.waitstatus_to_exitcode(status))' "$TMP/out" "$TMP/err" "$@"
}

set -- $(peak_rss_kb "$VMTRACE" correlate -n "$TMP/mq.data")
echo "# 1,000,000 queues: peak RSS $1 KiB, exit $2"
check "dry run of 1M one-buffer queues: exit 6 (no guest) - exit $2" test "$2" = 6
check "it saw every queue" grep -q "1000000 per-thread AUX queues" "$TMP/out"
if asan_build; then
	echo "# ASan build: the memory bound is checked by the normal build (peak RSS here $1 KiB)"
	finish
fi
check "peak RSS under 128 MiB ($1 KiB)" test "$1" -lt 131072
set -- $(peak_rss_kb "$VMTRACE" correlate -n -J 1 "$TMP/mq.data")
check "the same with --jobs 1 ($1 KiB)" test "$1" -lt 131072
finish
