#!/bin/sh
# vmtrace script streams: its peak RSS does not grow with the number of
# branches.  Two timeless recordings of real kernel code, 256 KiB and 2 MiB
# of AUX (~0.4 and ~3.5 million branch lines): the larger one may cost its
# AUX bytes (decoded from memory) and the caches of the more code it runs
# (libipt's block caches, the decoders' instruction caches: they grow with
# the code a trace covers, up to the kernel's size), not the ~80 bytes per
# branch a decoder that keeps its branches needs (~280 MB more here).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
# peak_rss FILE ARGS...: vmtrace script's peak RSS in KiB; its line count in
# FILE.lines (counted in 1 MiB reads, not line by line: millions of lines),
# or with FILE - its output to /dev/null, uncounted (--call-ret-trace's
# lines are indented by call depth: 23 GB of text here, 80 CPU s through a
# pipe into Python for a count no check reads)
peak_rss() {
	out=$1
	shift
	"$PYTHON3" - "$out" "$@" <<'PY'
import resource, subprocess, sys
out = sys.argv[1]
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL if out == '-' else subprocess.PIPE,
                     stderr=subprocess.DEVNULL)
if out != '-':
    n = sum(b.count(b'\n') for b in iter(lambda: p.stdout.read(1 << 20), b''))
    open(out + '.lines', 'w').write('%d\n' % n)
p.wait()
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if p.returncode == 0 else -1)
PY
}
for size in 256K 2M; do
	"$VMTRACE" synth -o "$TMP/$size.data" --size $size --vcpus 2 --timeless --host-code "$HOST_CODE" \
		--guest-code "$GUEST_CODE" 2>/dev/null || fail "synth $size"
done
# shellcheck disable=SC2086
small=$(peak_rss "$TMP/small" "$VMTRACE" script "$TMP/256K.data" $G)
# shellcheck disable=SC2086
large=$(peak_rss "$TMP/large" "$VMTRACE" script "$TMP/2M.data" $G)
lines=$(cat "$TMP/large.lines")
check "2 MiB: $lines lines (many branches)" test "$lines" -gt 2000000
if asan_build; then
	echo "# ASan build: the memory bounds are checked by the normal build (256 KiB: $small KiB, 2 MiB: $large KiB)"
	finish
fi
check "peak RSS 256 KiB: $small KiB, 2 MiB: $large KiB - grows by less than 100 MiB" \
	test "$small" -gt 0 -a "$large" -gt 0 -a $((large - small)) -lt 102400
# shellcheck disable=SC2086
large_j1=$(peak_rss - "$VMTRACE" script "$TMP/2M.data" $G --jobs 1 --call-ret-trace)
check "--jobs 1 --call-ret-trace: the same bound ($large_j1 KiB)" test "$large_j1" -gt 0 -a $((large_j1 - small)) -lt 102400
finish
