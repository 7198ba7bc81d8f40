#!/bin/sh
# correlate's system time: the AUX data and the records between it are
# looked at in mapped windows of the file (4 MiB each), not copied with
# one pread per AUX record and per record header (a 256 MiB per-CPU
# recording with 16 KiB AUX buffers took 16,000 preads and 64 MiB of
# header copies, its system time a quarter of its user time); the answer
# is the same as reading (one thread or two, the -o copy byte for byte).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
command -v strace >/dev/null || skip "strace not installed (apt-get install strace)"

"$VMTRACE" synth -o "$TMP/t.data" --size 32M --per-cpu --vcpus 16 --cpus 2 --buffer-size 16K 2>/dev/null ||
	fail "synth"
aux=$("$VMTRACE" correlate --dry-run --json "$TMP/t.data" | sed -n 's/.*"aux_bytes": \([0-9]*\).*/\1/p')
# system calls on the data file during a dry run
calls() {
	strace -f -qq -y -e trace=pread64,read,mmap -o "$TMP/st" "$VMTRACE" correlate --dry-run "$@" >/dev/null 2>&1
	grep -c "t\.data>" "$TMP/st"
}
calls_n=$(calls "$TMP/t.data")
echo "# $calls_n preads/mmaps of the file for $aux bytes of AUX data in 16 KiB buffers"
check "at most one system call per MiB of AUX data ($calls_n)" test "$calls_n" -le $((aux / (1 << 20) + 8))
check "...and no pread of AUX payloads" sh -c "! grep -q 'pread64(.*, 16[0-9][0-9][0-9], ' '$TMP/st'"
for j in 1 2; do
	"$VMTRACE" correlate --dry-run --json --jobs $j "$TMP/t.data" >"$TMP/j$j" 2>&1
done
check "the same answer with 1 and 2 threads" cmp "$TMP/j1" "$TMP/j2"
"$VMTRACE" correlate "$TMP/t.data" -o "$TMP/fixed.data" >/dev/null 2>&1
"$VMTRACE" correlate --dry-run "$TMP/fixed.data" >"$TMP/again" 2>&1
check "the corrected copy's 16 VMCS have no offset left" test "$(grep -c ' no-offset$' "$TMP/again")" = 16
finish
