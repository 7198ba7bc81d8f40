#!/bin/sh
# Command line: help, version, usage errors and their exit codes.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

rc() { "$@" >"$TMP/out" 2>"$TMP/err"; echo $?; }

check "vmtrace --help lists the commands" sh -c '"$VMTRACE" --help | grep -q "correlate" && "$VMTRACE" --help | grep -q synth'
check "vmtrace --version names libipt" sh -c '"$VMTRACE" --version | grep -q "vmtrace .* (libipt 2\."'
check "no command: usage, exit 2" test "$(rc "$VMTRACE")" = 2
check "unknown command: exit 2" test "$(rc "$VMTRACE" frobnicate)" = 2
check "unknown command: message names it" grep -q "unknown command 'frobnicate'" "$TMP/err"
for c in synth correlate script; do
	check "$c --help teaches (examples, exit status)" sh -c "\"\$VMTRACE\" $c --help | grep -q Examples"
	check "$c: unknown option: exit 2" test "$(rc "$VMTRACE" $c --no-such-option)" = 2
	check "$c: unknown option: one line on stderr" test "$(wc -l <"$TMP/err")" = 1
done
check "correlate without FILE: exit 2" test "$(rc "$VMTRACE" correlate --dry-run)" = 2
check "correlate --format=xml: exit 2" test "$(rc "$VMTRACE" correlate --dry-run --format=xml x)" = 2
check "correlate without --dry-run says so: exit 2" test "$(rc "$VMTRACE" correlate x.data)" = 2
check "correlate missing file: exit 3" test "$(rc "$VMTRACE" correlate --dry-run "$TMP/nope.data")" = 3
check "correlate missing file: message names the file" grep -q "nope.data" "$TMP/err"
check "synth without -o: exit 2" test "$(rc "$VMTRACE" synth)" = 2
check "synth --vcpus 0: exit 2" test "$(rc "$VMTRACE" synth -o "$TMP/x" --vcpus 0)" = 2
check "synth --mtc-period 16: exit 2" test "$(rc "$VMTRACE" synth -o "$TMP/x" --mtc-period 16)" = 2
check "synth --size 12Q: exit 2" test "$(rc "$VMTRACE" synth -o "$TMP/x" --size 12Q)" = 2
check "synth --size 12Q: one line naming option, value and the form" grep -qx "vmtrace synth: --size '12Q': expected a size in bytes, like 64M, 256K or 1G (see vmtrace synth --help)" "$TMP/err"
check "synth --seed -1: exit 2" test "$(rc "$VMTRACE" synth -o "$TMP/x" --seed -1)" = 2
check "synth --seed -1: says a number is expected" grep -q "'-1': expected a number" "$TMP/err"
check "correlate --tolerance 1e3: exit 2" test "$(rc "$VMTRACE" correlate --dry-run --tolerance 1e3 x)" = 2
check "record --synth-size 1T: exit 2" test "$(rc "$VMTRACE" record --pid 1 --source synth --synth-size 1T)" = 2
check "record --synth-size 1T: names option and value" grep -q "synth-size '1T'" "$TMP/err"
check "synth --offset zz: exit 2" test "$(rc "$VMTRACE" synth -o "$TMP/x" --offset zz)" = 2
check "synth --tsc-ctc-ratio 1/0: exit 2" test "$(rc "$VMTRACE" synth -o "$TMP/x" --tsc-ctc-ratio 1/0)" = 2
check "failed synth leaves no file" test ! -e "$TMP/x"
check "synth --truth into a missing directory: exit 1" test "$(rc "$VMTRACE" synth -o "$TMP/t.data" --size 64K --truth "$TMP/no/t.json")" = 1
check "failed --truth leaves no recording either" test ! -e "$TMP/t.data"
check "synth into a missing directory: exit 1, names it" sh -c '"$VMTRACE" synth -o "$TMP/no/dir/x.data" 2>&1 >/dev/null | grep -q "no/dir"; test $? -eq 0'
for o in --vcpus --vms --cpus --mtc-period --psb-period --guest-percent; do
	check "synth $o -1: exit 2, says a number >= 0 is expected" sh -c "[ \$(\"\$VMTRACE\" synth -o '$TMP/x' $o -1 2>'$TMP/err' >/dev/null; echo \$?) = 2 ] && grep -q -- '$o -1: expected a number >= 0' '$TMP/err'"
done
for o in --offset --tsc-scale --offset-change --tsc-ctc-ratio; do
	check "synth $o '': usage error (exit 2), no crash" test "$(rc "$VMTRACE" synth -o "$TMP/x" $o "")" = 2
	check "synth $o '': names the option" grep -q -- "$o ''" "$TMP/err"
done
for o in --offset --tsc-scale; do
	check "correlate $o '': usage error (exit 2), no crash" test "$(rc "$VMTRACE" correlate -n "$top_srcdir/examples/kvm-4vcpu.data" $o "")" = 2
done
if [ -w /dev/full ]; then
	check "synth --json > /dev/full: exit 1" test "$("$VMTRACE" synth -o "$TMP/full.data" --size 64K --json >/dev/full 2>"$TMP/err"; echo $?)" = 1
	check "synth --json > /dev/full: says stdout could not be written" grep -q "cannot write standard output" "$TMP/err"
	# every command, through the dispatcher: guest fetch printed its path into /dev/full and exited 0
	if [ -n "$PYTHON3" ]; then
		"$PYTHON3" "$top_srcdir/tests/fake-kernel-tree.py" "$TMP/guest" >/dev/null
		check "guest fetch > /dev/full: exit 1" test "$("$VMTRACE" guest fetch --root "$TMP/guest" --no-kcore -o "$TMP/cache" >/dev/full 2>"$TMP/err"; echo $?)" = 1
		check "guest fetch > /dev/full: says stdout could not be written" grep -q "vmtrace guest fetch: cannot write standard output" "$TMP/err"
	fi
fi
finish
