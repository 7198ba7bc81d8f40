#!/bin/sh
# Long symbol names in branch and instruction lines.  script writes a
# side ("ADDR SYM+0xOFF (DSO)") into room it takes once, and part by part
# when the name is longer than a piece of its buffer (4 KiB): the guest's
# busiest function renamed to 500 characters (under perf's limit of 511:
# KSYM_NAME_LEN) gives the lines perf gives; renamed to 5,000 it gives,
# name for name, the lines of the original (perf cuts such a name at 511
# bytes - no kernel has one).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf
code_recording rec 128K --vcpus 2 --call-depth 16 --psb-period 0 --seed 9 || finish
F=comm,tid,cpu,time,ip,sym,symoff,dso,addr
# shellcheck disable=SC2086
"$VMTRACE" script "$TMP/rec.data" $G >"$TMP/orig.b" 2>/dev/null
check "vmtrace script exit 0" test $? -eq 0
# shellcheck disable=SC2086
"$VMTRACE" script "$TMP/rec.data" $G --insn-trace >"$TMP/orig.i" 2>/dev/null
# the guest function most lines name
top=$(awk '/guest.kernel.kallsyms/ {for (i = 1; i <= NF; i++) if ($i ~ /\+0x/) {sub(/\+0x.*/, "", $i); n[$i]++}}
	END {for (f in n) if (n[f] > best) {best = n[f]; name = f}; print name}' "$TMP/orig.b")
check "a guest function to rename: '$top'" test -n "$top"
rename() {   # rename LEN DIR: DIR, the guest code with $top named LEN characters long
	cp -r "$GUEST_CODE" "$2" &&
		awk -v old="$top" -v new="$top$(printf '%*s' $(($1 - ${#top})) '' | tr ' ' x)" \
			'$3 == old {$3 = new} {print}' "$GUEST_CODE/kallsyms" >"$2/kallsyms"
}
rename 500 "$TMP/g500" && rename 5000 "$TMP/g5000"
check "the renamed function in the guest's kallsyms" grep -q "^[0-9a-f]* [tT] ${top}xxxxx" "$TMP/g5000/kallsyms"
timeout 300 "$PERF" script -i "$TMP/rec.data" --guestkallsyms "$TMP/g500/kallsyms" --itrace=be -F $F \
	>"$TMP/g500.perf" 2>/dev/null
check "perf script exit 0" test $? -eq 0
"$VMTRACE" script "$TMP/rec.data" --guestkallsyms "$TMP/g500/kallsyms" >"$TMP/g500.vt" 2>/dev/null
check "500-character name: lines with it" grep -q "${top}xxxx" "$TMP/g500.vt"
"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time "$TMP/g500.perf" "$TMP/g500.vt" "$TMP/rec.branches" \
	>"$TMP/g500.cmp" 2>&1
ck_rc=$?
check "500-character name: vmtrace = perf = ground truth ($(head -1 "$TMP/g500.cmp"))" test $ck_rc -eq 0 ||
	sed 's/^/#   /' "$TMP/g500.cmp"
for mode in b i; do
	opt=
	[ $mode = i ] && opt=--insn-trace
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/rec.data" --guestkallsyms "$TMP/g5000/kallsyms" $opt >"$TMP/g5000.$mode" 2>/dev/null
	check "5,000-character name ($mode): exit 0" test $? -eq 0
	long=$(awk 'length($0) > 5000 {n++} END {print n + 0}' "$TMP/g5000.$mode")
	check "5,000-character name ($mode): $long lines with it" test "$long" -gt 0
	sed "s/${top}x*+0x/$top+0x/g" "$TMP/g5000.$mode" >"$TMP/g5000.$mode.back"
	check "5,000-character name ($mode): the original's lines, name for name" \
		cmp -s "$TMP/g5000.$mode.back" "$TMP/orig.$mode"
done
finish
