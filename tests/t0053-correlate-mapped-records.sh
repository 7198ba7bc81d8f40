#!/bin/sh
# correlate reads a recording's records (AUX index, sideband) from 8 MiB
# windows of the file mapped in turn, not with a pread per record (issue
# #10): a per-CPU trace with 16 KiB AUX buffers made one pread per 16 KiB
# (4087 in 64 MiB, ~3 ms of system time before any decoding, on one
# thread).  Same answer as perf and as with --jobs 1 (a file that shrinks
# while it is read: t0036).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
command -v strace >/dev/null || skip "strace not installed (apt-get install strace)"
need_perf

"$VMTRACE" synth -o "$TMP/t.data" --size 4M --per-cpu --vcpus 8 --cpus 2 --buffer-size 16K 2>/dev/null ||
	fail "synth"
naux=$("$PERF" report -D -i "$TMP/t.data" 2>/dev/null | grep -c 'PERF_RECORD_AUXTRACE ')
# (LeakSanitizer cannot run under ptrace: an ASan build aborts at exit there)
asan_build && { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"; export ASAN_OPTIONS; }
strace -f -qq -e trace=pread64 -o "$TMP/st" "$VMTRACE" correlate --dry-run --format=perf "$TMP/t.data" >"$TMP/vt" 2>&1
preads=$(grep -c 'pread64(' "$TMP/st")
echo "# $naux AUXTRACE records, $preads preads"
check "the trace has many small AUX records ($naux >= 200)" test "$naux" -ge 200
check "records are not read one pread each ($preads < 20)" test "$preads" -lt 20
perf_dry_run "$TMP/t.data" | grep '^VMCS' >"$TMP/perf"
check "the offsets are perf's" test_cmp "$TMP/perf" "$TMP/vt"
"$VMTRACE" correlate --dry-run --format=perf --jobs 1 "$TMP/t.data" >"$TMP/vt1" 2>&1
check "...with one thread too" test_cmp "$TMP/vt" "$TMP/vt1"
finish
