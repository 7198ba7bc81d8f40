#!/bin/sh
# correlate's mappings of the AUX data are shared by the queues being
# decoded: with 4 queues whose buffers interleave in the file, each queue
# mapped its own 4 MiB windows, so every byte of the file was mapped (and
# its page tables built and torn down) once per queue - 4 mmaps and
# munmaps per 4 MiB, 3-4% of the dry run's time in the kernel.  Now the
# file is mapped in 8 MiB chunks that all queues read in, and a chunk is
# unmapped once no queue reads in it: about one mmap per 8 MiB, peak RSS
# still small, the same answer with 1 and 2 threads and with pread.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
command -v strace >/dev/null || skip "strace not installed (apt-get install strace)"
need_python

"$VMTRACE" synth -o "$TMP/t.data" --size 64M --vcpus 4 --tip-percent 90 2>/dev/null || fail "synth"
size=$(stat -c %s "$TMP/t.data")
# mmap/munmap of the data file (munmap has no fd: count those of its length or more)
strace -f -qq -y -e trace=mmap,munmap -o "$TMP/st" "$VMTRACE" correlate --dry-run --jobs 2 "$TMP/t.data" >/dev/null 2>&1
maps=$(grep -c '^[0-9]* *mmap(.*t\.data>' "$TMP/st")
unmaps=$(sed -n 's/^[0-9]* *munmap(0x[0-9a-f]*, \([0-9]*\)).*/\1/p' "$TMP/st" | awk '$1 >= 4194304' | wc -l)
mib8=$((size / (8 << 20) + 1))
echo "# $size bytes, 4 queues: $maps mmaps of the data file, $unmaps munmaps of >= 4 MiB ($mib8 chunks of 8 MiB)"
# (and the records are looked at in 8 MiB windows too, before: t0053)
check "the data file is mapped about once per 8 MiB, not once per queue ($maps <= 3 * $mib8)" \
	test "$maps" -ge 1 -a "$maps" -le $((3 * mib8))
check "...and unmapped as often ($unmaps)" test "$unmaps" -le $((3 * mib8))
rss=$("$PYTHON3" -c '
import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1); os.dup2(fd, 2)
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
print(ru.ru_maxrss // 1024 if os.waitstatus_to_exitcode(status) == 0 else -1)' \
	"$VMTRACE" correlate --dry-run "$TMP/t.data")
check "peak RSS stays small ($rss MiB <= 48)" test "$rss" -ge 0 -a "$rss" -le 48
for j in 1 2; do
	"$VMTRACE" correlate --dry-run --json --jobs $j "$TMP/t.data" >"$TMP/j$j" 2>&1
done
VMTRACE_AUX_PREAD=1 "$VMTRACE" correlate --dry-run --json "$TMP/t.data" >"$TMP/pread" 2>&1
check "the same answer with 1 and 2 threads" cmp "$TMP/j1" "$TMP/j2"
check "...and with pread" cmp "$TMP/j1" "$TMP/pread"
finish
