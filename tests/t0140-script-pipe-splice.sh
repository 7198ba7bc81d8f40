#!/bin/sh
# vmtrace script's output into a pipe goes by vmsplice from 2 MiB huge
# pages dropped after use (src/cli/textbuf.c), branch and instruction
# lines (the threads' text) by writev from the threads' chunks since
# session 29: what a pipe's reader gets is byte for byte what a file gets
# - for call traces (printed in the main thread), branches and
# instructions - through `cat`, through a slow reader that sleeps between
# small reads for its first 8 MiB (the writer blocks), with
# VMTRACE_NO_SPLICE=1 (write) and into `head -n 3` (the reader gone:
# vmtrace ends, as perf does, and the first lines are the file's).  The
# outputs are tens of MiB: the huge page's range is reused many times.
# (test-textbuf's splice-tee shows that no page given to the pipe is
# written again: its reader keeps them with tee().)
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs
grep -q '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null &&
	echo "# transparent huge pages are off here: the pipe gets write()s, not vmsplice"

code_recording rec 256K --vcpus 2 --call-depth 16
G="--guestkallsyms $GUEST_CODE/kallsyms"
cat >"$TMP/slow.py" <<'PY'
import sys, time
n = 0
while True:
    b = sys.stdin.buffer.read1(3000)
    if not b:
        break
    sys.stdout.buffer.write(b)
    n += len(b)
    if n < (8 << 20) and n % (1 << 20) < 3000:
        time.sleep(0.02)
PY
for mode in --call-trace --itrace=b --insn-trace; do
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/rec.data" $G $mode >"$TMP/file$mode" 2>/dev/null
	cp "$TMP/file$mode" "$TMP/file"
	size=$(wc -c <"$TMP/file")
	check "script $mode into a file: $size bytes (several huge pages' worth)" test "$size" -gt 4000000
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/rec.data" $G $mode 2>/dev/null | cat >"$TMP/pipe"
	check "script $mode | cat: the file's bytes" cmp -s "$TMP/file" "$TMP/pipe"
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/rec.data" $G $mode 2>/dev/null | "$PYTHON3" "$TMP/slow.py" >"$TMP/slow"
	check "script $mode | a slow reader: the file's bytes" cmp -s "$TMP/file" "$TMP/slow"
	# shellcheck disable=SC2086
	VMTRACE_NO_SPLICE=1 "$VMTRACE" script "$TMP/rec.data" $G $mode 2>/dev/null | cat >"$TMP/write"
	check "VMTRACE_NO_SPLICE=1 script $mode | cat: the file's bytes" cmp -s "$TMP/file" "$TMP/write"
done
# shellcheck disable=SC2086
"$VMTRACE" script "$TMP/rec.data" $G --call-trace 2>/dev/null | head -n 3 >"$TMP/head"
head -n 3 "$TMP/file--call-trace" >"$TMP/head.want"
check "script --call-trace | head -n 3: the file's first 3 lines, and it ends" cmp "$TMP/head.want" "$TMP/head" || diff "$TMP/head.want" "$TMP/head" | head -5 | sed "s/^/#   /"
finish
