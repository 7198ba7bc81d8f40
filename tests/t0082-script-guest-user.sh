#!/bin/sh
# vmtrace script: guest user space of an injected recording (vmtrace inject)
# = perf script = synth's truth.
#
# Host: synth of real kernel code (tests/code-lib.sh; per CPU, 2 vCPUs on 2
# CPUs) with --guest-user: half the VM entries go to the user code of a
# real ELF program (tests/guest-user-prog.c, built here: static, with
# symbols and a build id) at its link address, PIP with the process's own
# guest CR3.  Guest: a real `perf record -a` file of this host standing in
# for the guest's (as in t0102), its task sideband replaced: process gtool
# (500) on vCPU 0, its thread 501 on vCPU 1, the whole trace, and the MMAP2
# of /opt/gbin/gtool where synth's branch list says - a path this host
# does not have.  b.data: the MMAP2 carries the build id (perf record
# --buildid-mmap), the file is in $TMP/home/.debug (perf buildid-cache):
# how perf 6.1 finds guest user files.  n.data: no build id - perf 6.1
# cannot find the file (it ignores --guestmount for user DSOs), vmtrace
# takes it from --guestmount DIR/4000/opt/gbin/gtool.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
need_user_standin "$TMP/g0.data"
"${CC:-cc}" -O1 -static -nostdlib -no-pie -fno-pic -fno-stack-protector -o "$TMP/gtool" \
	"$top_srcdir/tests/guest-user-prog.c" || skip "cannot build a static program"
make_code_dirs
OFF=0x123456789

"$VMTRACE" synth -o "$TMP/h.data" --size 256K --seed 3 --per-cpu --vcpus 2 --cpus 2 --host-code "$HOST_CODE" \
	--guest-code "$GUEST_CODE" --offset "$OFF" --guest-user "$TMP/gtool" --branches "$TMP/truth" 2>/dev/null
check "synth --guest-user: exit 0" test $? -eq 0
set -- $(grep '^# guest-user ' "$TMP/truth")
START=$4 LEN=$5 PGOFF=$6
check "synth --branches names the mapping ($START $LEN $PGOFF)" test -n "$PGOFF"

BID=$(readelf -n "$TMP/gtool" 2>/dev/null | awk '/Build ID/ {print $3}')
[ -n "$BID" ] || skip "the compiler wrote no build id (readelf?)"
# guest_dir NAME [BUILDID]: $TMP/NAME, the guest directory; the MMAP2 with
# the file's build id in it when given (perf record --buildid-mmap)
guest_dir() {
	cat >"$TMP/sb.$1" <<SB
-3000000 0 comm 500 500 gtool
-2950000 0 mmap2 500 500 $START $LEN $PGOFF /opt/gbin/gtool ${2:-}
-2900000 0 fork 500 500 501 500
-2000000 0 in 500 500 0 0
-2000000 1 in 500 501 0 0
SB
	guest_data_dir "$1" "$TMP/sb.$1"
}
guest_dir gb "$BID"
guest_dir gn
for x in b n; do
	"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g$x" -o "$TMP/$x.data" --offset "$OFF" >"$TMP/inject.$x" 2>&1
	check "vmtrace inject ($x): exit 0" test $? -eq 0
done
# perf 6.1 finds a guest user file by its build id in $HOME/.debug (perf
# buildid-cache --add), else at its path on the host - never under
# --guestmount (strace: it stats /opt/gbin/gtool only); vmtrace reads the
# build-id cache too, and --guestmount DIR/4000/opt/gbin/gtool
mkdir -p "$TMP/home" "$TMP/empty" "$TMP/gm/4000/opt/gbin" && cp "$TMP/gtool" "$TMP/gm/4000/opt/gbin/gtool" &&
	HOME=$TMP/home "$PERF" buildid-cache --add "$TMP/gtool" >/dev/null 2>&1
check "perf buildid-cache --add into \$TMP/home/.debug" test -f "$TMP/home/.debug/.build-id/$(echo "$BID" | cut -c1-2)/$(echo "$BID" | cut -c3-)/elf"

F=comm,tid,cpu,time,ip,sym,symoff,dso,addr,machine_pid,vcpu
HOME=$TMP/home timeout 300 "$PERF" script -i "$TMP/b.data" --itrace=be -F $F >"$TMP/b.perf" 2>/dev/null
check "perf script (build-id cache): exit 0" test $? -eq 0
HOME=$TMP/home "$VMTRACE" script "$TMP/b.data" -F $F >"$TMP/b.vt" 2>"$TMP/b.vt.err"
check "vmtrace script (build-id cache): exit 0" test $? -eq 0
nuser=$(grep -c '(/opt/gbin/gtool)' "$TMP/b.vt")
nsym=$(grep -c ' mix+0x[0-9a-f]* (/opt/gbin/gtool)' "$TMP/b.vt")
check "guest user lines with the dso /opt/gbin/gtool: $nuser (at least 10000), $nsym in mix" \
	test "$nuser" -ge 10000 -a "$nsym" -ge 100
# perf's choice among symbols at one address: square (not _square_local),
# twice (not the weak twice_weak), digits_long_alias_name (the longer), the
# label gt_label (zero-sized: up to the next symbol)
for sym in square twice digits_long_alias_name gt_label; do
	check "symbol $sym: $(grep -c " $sym+0x[0-9a-f]* (/opt/gbin/gtool)" "$TMP/b.vt") lines" \
		grep -q " $sym+0x[0-9a-f]* (/opt/gbin/gtool)" "$TMP/b.vt"
done
# same_as A B: per host CPU the same lines, times aside (the two decoders
# estimate a branch's time differently, t0102)
same_as() {
	for c in 000 001; do
		grep -F "[$c]" "$1" | sed -E 's/ [0-9]+\.[0-9]+: / T: /' >"$1.$c"
		grep -F "[$c]" "$2" | sed -E 's/ [0-9]+\.[0-9]+: / T: /' >"$2.$c"
		cmp -s "$1.$c" "$2.$c" || { diff "$1.$c" "$2.$c" | head -6 | sed "s/^/# cpu $c: /"; return 1; }
	done
}
check "vmtrace script = perf script, guest user dso and symbols included ($(wc -l <"$TMP/b.vt") lines; time aside)" \
	same_as "$TMP/b.perf" "$TMP/b.vt"
# = synth's truth: every branch inside the user code, queue by queue
grep -v '^#' "$TMP/truth" | awk 'length($4) < 15 && length($5) < 15 && $4 != "0x0" && $5 != "0x0" {
	print $1, substr($4, 3), substr($5, 3) }' | sort -s -k1,1 >"$TMP/user.truth"
HOME=$TMP/home "$VMTRACE" script "$TMP/b.data" -F cpu,ip,addr --guest-only 2>/dev/null |
	awk '$2 != "0" && $4 != "0" && length($2) < 13 && length($4) < 13 { c = $1; gsub(/[][]/, "", c); print c + 0, $2, $4 }' |
	sort -s -k1,1 >"$TMP/user.vt"
check "the user code's branches = synth's truth, queue by queue ($(wc -l <"$TMP/user.truth"))" \
	sh -c "test -s '$TMP/user.truth' && cmp -s '$TMP/user.truth' '$TMP/user.vt'"

# --guestmount: what perf 6.1 does not read (no build id in the MMAP2, no
# cache): vmtrace finds the file there and prints what perf prints with the
# cache; perf loses the user code ("Failed to get instruction")
HOME=$TMP/empty "$VMTRACE" script "$TMP/n.data" -F $F --guestmount "$TMP/gm" >"$TMP/n.vt" 2>/dev/null
rc=$?
check "vmtrace --guestmount DIR (DIR/4000/opt/gbin/gtool): exit 0 ($rc), the lines of the build-id run" \
	sh -c "test $rc -eq 0 && cmp -s '$TMP/b.vt' '$TMP/n.vt'"
HOME=$TMP/empty timeout 300 "$PERF" script -i "$TMP/n.data" --itrace=be -F $F --guestmount "$TMP/gm" >"$TMP/n.perf" 2>/dev/null
nerr=$(grep -c 'instruction trace error .*ip 0x40[0-9a-f]* code 5: Failed to get instruction' "$TMP/n.perf")
check "perf --guestmount DIR: not read for guest user files ($nerr 'Failed to get instruction' in the user code)" \
	test "$nerr" -ge 1

# a missing file: no crash; the dso named, no symbols, decode errors (exit 3)
HOME=$TMP/empty "$VMTRACE" script "$TMP/n.data" -F $F >"$TMP/m.vt" 2>"$TMP/m.err"
rc=$?
check "missing file: exit 3 (decode errors), no crash (rc $rc)" test "$rc" -eq 3
# perf prints the VM entry into the missing code ("=> 40108b [unknown]
# (/opt/gbin/gtool)"), one error at that IP and resyncs at the next IP
# packet (the VM exit's FUP); libipt's block decoder cannot fetch the
# entry's target, so vmtrace reports the error at the VMRESUME (the entry
# line is not printed) and resyncs at the next PSB: more errors, fewer lines
check "missing file: perf names the dso with '[unknown]' on the VM entry line" \
	grep -q '=>  *40[0-9a-f]* \[unknown\] (/opt/gbin/gtool)' "$TMP/n.perf"
nvt=$(grep -c 'instruction trace error .*code 5: Failed to get instruction' "$TMP/m.vt")
check "missing file: vmtrace's errors are perf's kind, 'code 5: Failed to get instruction' ($nvt), at the VM entries into it" \
	test "$nvt" -ge 1
HOME=$TMP/empty "$VMTRACE" script "$TMP/n.data" --json >"$TMP/m.json" 2>/dev/null
check "missing file: --json has perf's code and message and libipt's (no memory mapped)" \
	grep -q '"code": 5, "message": "Failed to get instruction", "libipt": "no memory mapped at this address"' "$TMP/m.json"
echo "# missing file: perf $nerr errors, $(wc -l <"$TMP/n.perf") lines (resyncs at the next IP packet);" \
	"vmtrace $nvt errors, $(wc -l <"$TMP/m.vt") lines (libipt resyncs at the next PSB)"

# --json: guest user addresses with the file and the symbol
HOME=$TMP/home "$VMTRACE" script "$TMP/b.data" --json --guest-only 2>/dev/null | grep -c '"dso": "/opt/gbin/gtool", "sym": "mix"' >"$TMP/json.n"
check "--json: user addresses carry dso and sym ($(cat "$TMP/json.n") in mix)" test "$(cat "$TMP/json.n")" -ge 100

# filters on user threads
HOME=$TMP/home "$VMTRACE" script "$TMP/b.data" -F $F --guest-only >"$TMP/go.vt" 2>/dev/null
grep '^VM: ' "$TMP/b.vt" >"$TMP/go.want"
check "--guest-only: the guest lines ($(wc -l <"$TMP/go.want"))" cmp -s "$TMP/go.want" "$TMP/go.vt"
HOME=$TMP/home "$VMTRACE" script "$TMP/b.data" -F $F --tid 501 >"$TMP/tid.vt" 2>/dev/null
HOME=$TMP/home timeout 300 "$PERF" script -i "$TMP/b.data" --itrace=be -F $F --tid 501 2>/dev/null |
	grep -v 'instruction trace error' >"$TMP/tid.perf"
grep ' 501 \[' "$TMP/b.vt" >"$TMP/tid.want"
check "--tid 501 (the user thread on vCPU 1): its lines ($(wc -l <"$TMP/tid.want"), $(grep -c gtool "$TMP/tid.want") in gtool)" \
	sh -c "grep -q '(/opt/gbin/gtool)' '$TMP/tid.want' && cmp -s '$TMP/tid.want' '$TMP/tid.vt'"
check "--tid 501: perf --tid 501's lines (time aside)" same_as "$TMP/tid.perf" "$TMP/tid.vt"
finish
