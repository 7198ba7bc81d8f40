#!/bin/sh
# vmtrace script: guest user code per guest process - two processes with
# different code at the same address both decode (issue #13).
#
# Two static non-PIE programs, tests/guest-user-prog.c built with -O1 (gA)
# and with -O0 (gB): both link their code at 0x401000, with different
# instructions and symbols there.  synth --guest-user gA --guest-user gB:
# vCPU 0 runs gA, vCPU 1 runs gB (each its own guest CR3), on 2 host CPUs.
# The guest file is a real `perf record -a` of this host standing in for
# the guest's (as in t0082), its task sideband replaced: process gA (500)
# on vCPU 0, process gB (600) on vCPU 1, each with its own MMAP2 of its
# file at the same address, and - mid-trace - a switch of each vCPU's
# thread to a process of its own (502 on vCPU 0: a fork of 500; 601 on
# vCPU 1: a fork of 600) that inherits its parent's mapping.  vmtrace
# script must take each branch's code from the mapping of the process on
# its vCPU then: = synth's truth for both programs, queue by queue.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_guest_user
check "gA and gB: different code at the same address" \
	sh -c "readelf -lW '$TMP/gA' | grep -q 'LOAD.* 0x0*401000 .*R E' && readelf -lW '$TMP/gB' | grep -q 'LOAD.* 0x0*401000 .*R E' &&
	       ! cmp -s '$TMP/gA' '$TMP/gB'"
make_code_dirs

guest_user_synth
check "synth with two --guest-user files: exit 0" test $? -eq 0
grep '^# guest-user ' "$TMP/truth" >"$TMP/maps"
check "synth --branches names both mappings ($(awk '{printf "%s %s; ", $3, $4}' "$TMP/maps"))" \
	test "$(wc -l <"$TMP/maps")" -eq 2 -a "$(awk '{print $4, $5, $6}' "$TMP/maps" | sort -u | wc -l)" -eq 1
guest_user_maps || skip "the compiler wrote no build id (readelf?)"

# the guest's sideband: the trace starts at TSC 0x100000000000 + OFF; each
# vCPU's process forks a child at 0.2 ms that runs on the vCPU from 1 ms on
# (synth's trace: about 2.4 ms)
guest_user_fork_sideband "$TMP/sb"
guest_data_dir g "$TMP/sb"
guest_user_inject
check "vmtrace correlate and inject: exit 0" test $? -eq 0
mkdir -p "$TMP/home"

F=comm,tid,cpu,time,ip,sym,symoff,dso,addr,machine_pid,vcpu
HOME=$TMP/empty "$VMTRACE" script "$TMP/i.data" -F $F --guestmount "$TMP/gm" >"$TMP/v.txt" 2>"$TMP/v.err"
rc=$?
check "vmtrace script --guestmount: exit 0 ($rc), no decode error" \
	sh -c "test $rc -eq 0 && ! grep -q 'instruction trace error' '$TMP/v.txt'"
# where each vCPU's process switches: both before and after must be there
for t in "500 gA" "502 gA" "600 gB" "601 gB"; do
	set -- $t
	cnt=$(grep -c "^VM: 4000 VCPU:00[01] *[^ ]* *$1 .*(/opt/gbin/$2)" "$TMP/v.txt")
	check "guest thread $1 runs /opt/gbin/$2: $cnt lines in it" test "$cnt" -ge 100
done
check "... and never the other program" \
	sh -c "! grep -qE '^VM: 4000 VCPU:00[01] *[^ ]* *(500|502) .*\(/opt/gbin/gB\)|^VM: 4000 VCPU:00[01] *[^ ]* *(600|601) .*\(/opt/gbin/gA\)' '$TMP/v.txt'"
# symbols from each process's file: gA's mix is at another address than gB's
for p in A B; do
	a=$(nm "$TMP/g$p" | awk '$3 == "mix" {print $1}' | sed 's/^0*//')
	check "g$p's mix (0x$a) named in g$p's lines" grep -q " $a mix+0x0 (/opt/gbin/g$p)" "$TMP/v.txt"
done

# = synth's truth: every branch inside the user code, queue by queue
grep -v '^#' "$TMP/truth" | awk 'length($4) < 15 && length($5) < 15 && $4 != "0x0" && $5 != "0x0" {
	print $1, substr($4, 3), substr($5, 3) }' | sort -s -k1,1 >"$TMP/user.truth"
HOME=$TMP/empty "$VMTRACE" script "$TMP/i.data" -F cpu,ip,addr --guest-only --guestmount "$TMP/gm" 2>/dev/null |
	awk '$2 != "0" && $4 != "0" && length($2) < 13 && length($4) < 13 { c = $1; gsub(/[][]/, "", c); print c + 0, $2, $4 }' |
	sort -s -k1,1 >"$TMP/user.vt"
check "both programs' branches = synth's truth, queue by queue ($(wc -l <"$TMP/user.truth"))" \
	sh -c "test -s '$TMP/user.truth' && cmp -s '$TMP/user.truth' '$TMP/user.vt'"

# --insn-trace: each guest user instruction's bytes are its process's
# file's at that address
HOME=$TMP/empty "$VMTRACE" script "$TMP/i.data" --guestmount "$TMP/gm" --insn-trace -F tid,ip,sym,dso,insn \
	--guest-only >"$TMP/it.txt" 2>/dev/null
"$PYTHON3" - "$TMP/it.txt" "$TMP/gA" "$TMP/gB" >"$TMP/it.check" 2>&1 <<'PY'
import re, struct, sys
def code(path):
    b = open(path, "rb").read()
    phoff, = struct.unpack_from("<Q", b, 32)
    phentsize, phnum = struct.unpack_from("<HH", b, 54)
    segs = []
    for i in range(phnum):
        typ, flags, off, va, pa, fsz = struct.unpack_from("<IIQQQQ", b, phoff + i * phentsize)
        if typ == 1 and flags & 1:
            segs.append((va, off, fsz))
    return b, segs
files = {"gA": code(sys.argv[2]), "gB": code(sys.argv[3])}
n = {"gA": 0, "gB": 0}
for line in open(sys.argv[1]):
    m = re.match(r"\s*(\d+)\s+([0-9a-f]+) .*\(/opt/gbin/(g[AB])\) insn: ([0-9a-f ]+)$", line)
    if not m:
        continue
    ip, f, got = int(m.group(2), 16), m.group(3), bytes.fromhex(m.group(4))
    b, segs = files[f]
    va, off, size = next(s for s in segs if s[0] <= ip < s[0] + s[2])
    assert b[off + ip - va:off + ip - va + len(got)] == got, line
    n[f] += 1
assert n["gA"] and n["gB"], n
print("# --insn-trace: %d instructions of gA, %d of gB, each its file's bytes" % (n["gA"], n["gB"]))
PY
check "--insn-trace: each process's instructions are its own file's" test $? -eq 0
cat "$TMP/it.check"

# perf 6.1 keys guest user maps on the guest thread too (the files from
# its build-id cache: it ignores --guestmount for user DSOs, see t0082)
HOME=$TMP/home "$PERF" buildid-cache --add "$TMP/gA" >/dev/null 2>&1 &&
	HOME=$TMP/home "$PERF" buildid-cache --add "$TMP/gB" >/dev/null 2>&1
HOME=$TMP/home "$VMTRACE" script "$TMP/i.data" -F $F >"$TMP/b.txt" 2>/dev/null
check "vmtrace script, the files from perf's build-id cache: the same lines" cmp -s "$TMP/v.txt" "$TMP/b.txt"
HOME=$TMP/home timeout 300 "$PERF" script -i "$TMP/i.data" --itrace=be -F $F >"$TMP/p.txt" 2>/dev/null
check "perf script: exit 0" test $? -eq 0
for t in 500 502 600 601; do
	echo "# thread $t: perf $(grep -c "^VM: 4000 VCPU:00[01] *[^ ]* *$t " "$TMP/p.txt") lines," \
		"vmtrace $(grep -c "^VM: 4000 VCPU:00[01] *[^ ]* *$t " "$TMP/v.txt")"
done
check "perf script: no decode error either" test "$(grep -c 'instruction trace error' "$TMP/p.txt")" -eq 0
# per host CPU the same lines, times aside (the two decoders estimate a
# branch's time differently, t0102), and the thread aside on the few lines
# where that puts a branch on the other side of a guest switch (the
# thread's parent or child: the same program)
for c in 000 001; do
	for x in p v; do
		grep -F "[$c]" "$TMP/$x.txt" | sed -E 's/ [0-9]+\.[0-9]+: / T: /' >"$TMP/$x.$c"
		sed -E 's/^(VM: 4000 VCPU:00[01] +[^ ]+) +[0-9]+ /\1 TID /' "$TMP/$x.$c" >"$TMP/$x.$c.notid"
	done
done
ndiff=$(cat "$TMP/p.000" "$TMP/p.001" | wc -l)
nthr=$( (diff "$TMP/p.000" "$TMP/v.000"; diff "$TMP/p.001" "$TMP/v.001") | grep -c '^<')
check "vmtrace script = perf script, both programs' dso and symbols included ($ndiff lines; time aside, $nthr with the other thread of the program, near its switch)" \
	sh -c "cmp -s '$TMP/p.000.notid' '$TMP/v.000.notid' && cmp -s '$TMP/p.001.notid' '$TMP/v.001.notid' && test $nthr -le 5"
finish
