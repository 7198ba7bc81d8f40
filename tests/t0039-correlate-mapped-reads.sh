#!/bin/sh
# correlate's system time: the AUX data is looked at in mapped windows of
# the file (8 MiB chunks, t0052), not copied with one pread per AUX record, and the
# record headers between AUX payloads are read 512 bytes at a time, not
# 4 KiB (a 256 MiB per-CPU recording with 16 KiB AUX buffers copied 64 MiB
# of headers, and its system time was a quarter of its user time); the
# answer is the same with one thread or two, and the copy is corrected.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
command -v strace >/dev/null || skip "strace not installed (apt-get install strace)"

"$VMTRACE" synth -o "$TMP/t.data" --size 32M --per-cpu --vcpus 16 --cpus 2 --buffer-size 16K 2>/dev/null ||
	fail "synth"
aux=$("$VMTRACE" correlate --dry-run --json "$TMP/t.data" | sed -n 's/.*"aux_bytes": \([0-9]*\).*/\1/p')
# system calls on the data file during a dry run: "SYSCALL LENGTH" lines
# (a file per thread: no "unfinished ... resumed" lines)
strace -ff -qq -y -e trace=pread64,mmap -o "$TMP/st" "$VMTRACE" correlate --dry-run "$TMP/t.data" >/dev/null 2>&1
cat "$TMP"/st.* | sed -n 's/^\(pread64\)(.*t\.data>, .*, \([0-9]*\), [0-9]*) = .*/\1 \2/p
	s/^\(mmap\)(.*, \([0-9]*\), .*t\.data>.*/\1 \2/p' >"$TMP/calls"
maps=$(grep -c '^mmap' "$TMP/calls")
big=$(awk '$1 == "pread64" && $2 > 4096' "$TMP/calls" | wc -l)
hdr=$(awk '$1 == "pread64" && $2 == 4096' "$TMP/calls" | wc -l)
echo "# $aux bytes of AUX data in 16 KiB buffers: $maps mmaps, $big preads > 4 KiB, $hdr of 4 KiB"
check "the AUX data is mapped, at most one mmap per MiB ($maps)" test "$maps" -ge 1 -a "$maps" -le $((aux / (1 << 20) + 8))
check "...not read ($big preads of more than 4 KiB)" test "$big" -le 2
check "record headers after an AUX payload are read 512 bytes at a time, not 4 KiB ($hdr)" test "$hdr" -le 2
# the same with VMTRACE_AUX_PREAD (pread, as before: for comparing): no mmap
VMTRACE_AUX_PREAD=1 strace -ff -qq -y -e trace=pread64,mmap -o "$TMP/sp" "$VMTRACE" correlate --dry-run --json \
	"$TMP/t.data" >"$TMP/pread.json" 2>"$TMP/pread.err"    # (not 2>&1: LeakSanitizer complains under strace)
cat "$TMP"/sp.* >"$TMP/sp"
# (the session's records are looked at in mapped 8 MiB windows either way:
# t0053; with pread the AUX data is read 16 KiB at a time)
pmaps=$(grep -c '^mmap(.*t\.data>' "$TMP/sp")
preads=$(grep -c '^pread64(.*t\.data>, .*, 16[0-9][0-9][0-9], ' "$TMP/sp")
size=$(wc -c <"$TMP/t.data")
check "VMTRACE_AUX_PREAD: the AUX data is read ($preads preads of 16 KiB), not mapped ($pmaps mmaps: the records' windows)" \
	sh -c "test $preads -ge $((aux / 16384 / 2)) && test $pmaps -le $((size / 8388608 + 2))"
"$VMTRACE" correlate --dry-run --json "$TMP/t.data" >"$TMP/map.json" 2>"$TMP/map.err"
check "...with the same answer" cmp "$TMP/map.json" "$TMP/pread.json"
for j in 1 2; do
	"$VMTRACE" correlate --dry-run --json --jobs $j "$TMP/t.data" >"$TMP/j$j" 2>&1
done
check "the same answer with 1 and 2 threads" cmp "$TMP/j1" "$TMP/j2"
"$VMTRACE" correlate "$TMP/t.data" -o "$TMP/fixed.data" >/dev/null 2>&1
"$VMTRACE" correlate --dry-run "$TMP/fixed.data" >"$TMP/again" 2>&1
check "the corrected copy's 16 VMCS have no offset left" test "$(grep -c ' no-offset$' "$TMP/again")" = 16
finish
