#!/bin/sh
# Pipe-mode perf.data (what `perf inject -o -` and `perf record -o -` write):
# records of any size (perf 6.1 writes HEADER_FEATURE records of 84 bytes,
# so later records are not 8-byte aligned), no sections.  vmtrace reads it
# like the file-mode original, corrects it to the same AUX bytes, and writes
# no trailer marker into the record stream (which made its own output
# unreadable).  A second correction finds nothing to do.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
digest() { "$PYTHON3" "$top_srcdir/tests/aux-digest.py" "$1"; }

"$VMTRACE" synth -o "$TMP/a.data" --size 1M --vcpus 4 2>/dev/null
"$PERF" inject -i "$TMP/a.data" -o - >"$TMP/p.data" 2>"$TMP/perf.err"
check "perf inject -o - wrote a pipe-mode file" "$PYTHON3" -c '
import struct, sys
b = open(sys.argv[1], "rb").read(16)
sys.exit(not (b[:8] == b"PERFILE2" and struct.unpack("<Q", b[8:])[0] == 16))' "$TMP/p.data"
check "it holds records that are not 8-byte aligned (the case that was refused)" "$PYTHON3" -c '
import struct, sys
b = open(sys.argv[1], "rb").read()
pos, odd = 16, 0
while pos < len(b):
    t, m, s = struct.unpack_from("<IHH", b, pos)
    odd += pos % 8 != 0
    pos += s + (struct.unpack_from("<Q", b, pos + 8)[0] if t == 71 else 0)
sys.exit(odd == 0)' "$TMP/p.data"

"$VMTRACE" correlate --dry-run "$TMP/a.data" | sed 1d >"$TMP/file.table"
"$VMTRACE" correlate --dry-run "$TMP/p.data" >"$TMP/pipe.out" 2>"$TMP/err"
check "dry run of the pipe-mode file: exit 0" test $? -eq 0
sed 1d "$TMP/pipe.out" >"$TMP/pipe.table"
check "dry run of the pipe-mode file: the same table as the file-mode original" test_cmp "$TMP/file.table" "$TMP/pipe.table"

"$VMTRACE" correlate "$TMP/a.data" -o "$TMP/a.out" >/dev/null
"$VMTRACE" correlate "$TMP/p.data" -o "$TMP/p.out" >/dev/null 2>"$TMP/err"
check "correct the pipe-mode file (-o): exit 0" test $? -eq 0
check "-o: the same AUX bytes as the corrected file-mode original" test "$(digest "$TMP/p.out")" = "$(digest "$TMP/a.out")"
check "-o: only TSC payloads changed, nothing appended" test "$(stat -c %s "$TMP/p.out")" = "$(stat -c %s "$TMP/p.data")"
"$VMTRACE" correlate --dry-run "$TMP/p.out" >"$TMP/again" 2>&1
check "vmtrace reads its own pipe-mode output" test $? -eq 0
check "... and every VMCS shows host time already" sh -c '[ "$(grep -c "no-offset$" "$TMP/again")" = 4 ]'
"$VMTRACE" correlate "$TMP/p.out" -o "$TMP/p.twice" >/dev/null 2>&1
check "a second correction finds nothing to do (exit 7)" test $? -eq 7

cp "$TMP/p.data" "$TMP/inplace.data"
"$VMTRACE" correlate --in-place "$TMP/inplace.data" >/dev/null 2>&1
check "--in-place on a pipe-mode file: exit 0" test $? -eq 0
check "--in-place: the same bytes as -o" cmp -s "$TMP/inplace.data" "$TMP/p.out"
# perf reads as much of the corrected stream as of its own
"$PERF" report -D -i - <"$TMP/p.data" 2>/dev/null | grep -c '^0x[0-9a-f]*@pipe' >"$TMP/n.in"
"$PERF" report -D -i - <"$TMP/p.out" 2>/dev/null | grep -c '^0x[0-9a-f]*@pipe' >"$TMP/n.out"
check "perf reads as many records of the corrected stream as of the original" test_cmp "$TMP/n.in" "$TMP/n.out"
finish
