#!/bin/sh
# vmtrace script --insn-trace keeps its instructions' text in a bounded
# table (src/decode/disasm.c): its peak RSS stays under 120 MiB however much
# code the trace runs.  A recording of real kernel code, 640 KiB of AUX,
# over a million distinct instructions walked at random through host and
# guest kernels (synth's default walk: --host-steps 6 now makes short exit
# handlers, ~600 K distinct): a cache that kept every instruction it
# formatted (before: a hash table of allocations) needed ~140 MB here and
# more with every MiB (~170 MB at 1 MiB); the bounded one ~90 MB at any size.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
"$VMTRACE" synth -o "$TMP/r.data" --size 640K --vcpus 4 --timeless --seed 7 \
	--host-code "$HOST_CODE" --guest-code "$GUEST_CODE" 2>/dev/null
check "synth 640 KiB of real-code walks: exit 0" test $? -eq 0
# shellcheck disable=SC2086
rss=$("$PYTHON3" - "$TMP/r" "$VMTRACE" script "$TMP/r.data" $G --insn-trace <<'PY'
import resource, subprocess, sys
out = sys.argv[1]
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
n = 0
ips = set()
for line in p.stdout:
    n += 1
    ips.add(line.split(b' insn:')[0][-60:])     # the IP, symbol and DSO
p.wait()
open(out + '.lines', 'w').write('%d %d\n' % (n, len(ips)))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if p.returncode == 0 else -1)
PY
)
set -- $(cat "$TMP/r.lines")
check "--insn-trace: $1 instruction lines, $2 distinct instructions (more than a million)" test "$2" -gt 1000000
if asan_build; then
	echo "# ASan build: the memory bound is checked by the normal build ($rss KiB)"
	finish
fi
check "--insn-trace: peak RSS $rss KiB, under 120 MiB" test "$rss" -gt 0 -a "$rss" -lt 122880
finish
