#!/bin/sh
# vmtrace script: guest user code of guest processes with no known parent
# (issue #13) - processes forked before the guest's recording began: no
# FORK record, only a COMM, or nothing at all - and of a vCPU before its
# first guest switch-in (no process known).
#
# Rule (src/decode/guest-user.c): a process's own MMAP2s, else its
# parent's at the fork, else those of the processes with its comm if they
# all map the same file there, else none; no process known: every
# process's if they agree, else none.  None means decode errors at those
# addresses and one line on stderr naming the process - never another
# program's code.
#
# t0083's shape: two static programs with different code at 0x401000, gA
# (-O1) and gB (-O0); synth --guest-user gA --guest-user gB: vCPU 0 runs
# gA, vCPU 1 runs gB.  The guest's sideband (a real `perf record -a` of
# this host standing in for the guest's, task records replaced):
#   vCPU 0: process 500 "gA" - a COMM, no MMAP2, no FORK - runs from the
#           start; process 510 "gA" (not running) has the MMAP2 of gA.
#   vCPU 1: process 600 "gB" with its MMAP2 of gB, switched in at 0.5 ms
#           (before: no process known - and gA's mapping is the last one
#           at 0x401000, so "any process's" code would be gA's); at 1.5 ms
#           process 700, of which the guest file says nothing.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_guest_user
make_code_dirs
guest_user_synth
check "synth with two --guest-user files: exit 0" test $? -eq 0
guest_user_maps || skip "the compiler wrote no build id (readelf?)"
cat >"$TMP/sb" <<SB
-3000000 0 comm 500 500 gA
-2950000 1 comm 600 600 gB
-2900000 1 mmap2 600 600 $START $LEN $PGOFF /opt/gbin/gB $BIDB
-2850000 0 comm 510 510 gA
-2800000 0 mmap2 510 510 $START $LEN $PGOFF /opt/gbin/gA $BIDA
-2000000 0 in 500 500 0 0
1500000 1 in 600 600 0 0
4500000 1 out 600 600 700 700
4500000 1 in 700 700 600 600
SB
guest_data_dir g "$TMP/sb"
guest_user_inject
check "vmtrace correlate and inject: exit 0" test $? -eq 0

F=comm,tid,cpu,time,ip,sym,symoff,dso,addr,machine_pid,vcpu
HOME=$TMP/empty "$VMTRACE" script "$TMP/i.data" -F $F --guestmount "$TMP/gm" >"$TMP/v.txt" 2>"$TMP/v.err"
# user branches (FROM and TO below 2^47 and not 0) of a vCPU, queue by queue
grep -v '^#' "$TMP/truth" | awk 'length($4) < 15 && length($5) < 15 && $4 != "0x0" && $5 != "0x0" {
	print $7, $1, substr($4, 3), substr($5, 3) }' | sort -s -k1,2 >"$TMP/user.truth"
user() {
	HOME=$TMP/empty "$VMTRACE" script "$TMP/i.data" -F cpu,ip,addr --guest-only --vcpu "$1" --guestmount "$TMP/gm" \
		2>/dev/null | awk -v v="$1" '!/trace error/ && $2 != "0" && $4 != "0" && length($2) < 13 && length($4) < 13 {
		c = $1; gsub(/[][]/, "", c); print v, c + 0, $2, $4 }' | sort -s -k1,2
}
user 0 >"$TMP/user0.vt"
grep '^0 ' "$TMP/user.truth" >"$TMP/user0.truth"
check "vCPU 0: process 500 (a COMM, no MMAP2, no FORK) decodes with its comm's file: = synth's truth ($(wc -l <"$TMP/user0.truth") user branches)" \
	sh -c "test -s '$TMP/user0.truth' && cmp -s '$TMP/user0.truth' '$TMP/user0.vt'"
cnt=$(grep -c "^VM: 4000 VCPU:000 *[^ ]* *500 .*(/opt/gbin/gA)" "$TMP/v.txt")
check "... its lines name gA's file and symbols ($cnt lines)" test "$cnt" -ge 100
check "... no decode error on vCPU 0 (its thread 4010)" \
	sh -c "! grep 'instruction trace error' '$TMP/v.txt' | grep -q ' pid 4000 tid 4010 '"

# vCPU 1: what is decoded is in the truth; gA's code never
user 1 >"$TMP/user1.vt"
grep '^1 ' "$TMP/user.truth" | sort -u >"$TMP/user1.truth"
sort -u "$TMP/user1.vt" >"$TMP/user1.vtu"
n600=$(grep -c "^VM: 4000 VCPU:001 *[^ ]* *600 .*(/opt/gbin/gB)" "$TMP/v.txt")
check "vCPU 1: process 600 runs gB ($n600 lines), every user branch decoded on vCPU 1 is one of synth's ($(wc -l <"$TMP/user1.vtu") of $(wc -l <"$TMP/user1.truth"))" \
	sh -c "test $n600 -ge 100 && test -s '$TMP/user1.vtu' && test -z \"\$(comm -23 '$TMP/user1.vtu' '$TMP/user1.truth')\""
check "... no line on vCPU 1 names gA (no process known, or process 700: not another program's code)" \
	sh -c "! grep -q '^VM: 4000 VCPU:001 .*(/opt/gbin/gA)' '$TMP/v.txt' && ! grep -q ' -1 .*(/opt/gbin/gA)' '$TMP/v.txt'"
nerr=$(grep 'instruction trace error' "$TMP/v.txt" | grep -c ' pid 4000 tid 4011 ')
check "... decode errors on vCPU 1 where the code is unknown ($nerr), and one line each on stderr: no process known, process 700" \
	sh -c "test $nerr -ge 1 && grep -q 'before its vCPU.s first guest switch-in (no process known): the guest.s processes map different files there' '$TMP/v.err' &&
	       grep -q 'guest process 700 (no COMM): no code for 0x' '$TMP/v.err'"
sed 's/^/# /' "$TMP/v.err"
finish
