#!/bin/sh
# KVM time metadata stored with a recording (DIR/vmtrace-kvm.ini or
# FILE.vmtrace-kvm.ini): its TSC scaling is used without --tsc-scale, its
# tsc-offsets are shown beside the discovered ones and a disagreement is
# warned about; a malformed file is a clear error.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python
digest() { "$PYTHON3" "$top_srcdir/tests/aux-digest.py" "$1"; }
truth() { "$PYTHON3" -c 'import json,sys; print(json.load(open(sys.argv[1]))["corrected_aux_sha256"])' "$1"; }
# meta FILE OFFSET [RATIO]: what vmtrace record writes, for synth's 4 vCPUs (tids 4010..)
meta() {
	printf '[vmtrace-kvm]\nversion=1\ndomain=synth\nqemu_pid=4000\n' >"$1"
	for v in 0 1 2 3; do
		printf '\n[vcpu%d]\ntid=%d\nstart.tsc_offset=%s\nend.tsc_offset=%s\n' $v $((4010 + v)) "$2" "$2" >>"$1"
		[ -n "${3:-}" ] && printf 'tsc_scaling_ratio=%s\ntsc_scaling_frac_bits=48\n' "$3" >>"$1"
	done
}

"$VMTRACE" synth -o "$TMP/d" --dir --size 2M --tsc-scale 0x1400000000000 --offset 0xffffff0000000000 --truth "$TMP/d.json" 2>/dev/null
"$VMTRACE" correlate --dry-run "$TMP/d" >/dev/null 2>&1
check "scaled trace without metadata: inconsistent (exit 5)" test $? -eq 5
meta "$TMP/d/vmtrace-kvm.ini" -1099511627776 $((0x1400000000000))
"$VMTRACE" correlate --dry-run --json "$TMP/d" >"$TMP/out" 2>"$TMP/err"
check "with metadata: exit 0 (scaling taken from it)" test $? -eq 0
check "with metadata: every VMCS ok, KVM offset shown and agreeing" "$PYTHON3" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["vmcs"]) == 4
for v in d["vmcs"]:
    assert v["status"] == "ok" and v["kvm_tsc_offset"] == "0xffffff0000000000" and v["kvm_agrees"], v' "$TMP/out"
check "with metadata: nothing on stderr" test ! -s "$TMP/err"
"$VMTRACE" correlate "$TMP/d" -o "$TMP/d.corr" >/dev/null
check "with metadata: the correction is exact" test "$(digest "$TMP/d.corr")" = "$(truth "$TMP/d.json")"
check "the metadata is copied with the directory" test -f "$TMP/d.corr/vmtrace-kvm.ini"

"$VMTRACE" synth -o "$TMP/f.data" --size 1M --offset 0xffffff0000000000 2>/dev/null
meta "$TMP/f.data.vmtrace-kvm.ini" -1099511627000
"$VMTRACE" correlate --dry-run "$TMP/f.data" >"$TMP/out" 2>"$TMP/err"
check "disagreeing KVM offset: still exit 0 (the trace decides)" test $? -eq 0
check "disagreeing KVM offset: table says DIFFERS" grep -q "KVM tsc-offset -1099511627000 .* DIFFERS from the trace" "$TMP/out"
check "disagreeing KVM offset: one warning per VMCS naming both values" test "$(grep -c "shows TSC offset 0xffffff0000000000, but KVM reported 0xffffff0000000308 for vCPU" "$TMP/err")" = 4

printf '[vmtrace-kvm]\nversion=2\n' >"$TMP/f.data.vmtrace-kvm.ini"
"$VMTRACE" correlate --dry-run "$TMP/f.data" >/dev/null 2>"$TMP/err"
check "unknown metadata version: exit 3" test $? -eq 3
check "  ... names the file" grep -q "f.data.vmtrace-kvm.ini: not vmtrace KVM metadata" "$TMP/err"
printf '[vmtrace-kvm]\nversion=1\n[vcpuX]\ntid=1\n' >"$TMP/f.data.vmtrace-kvm.ini"
"$VMTRACE" correlate --dry-run "$TMP/f.data" >/dev/null 2>"$TMP/err"
check "bad vCPU group: exit 3, names it" sh -c "grep -q 'bad group \[vcpuX\]' '$TMP/err'"
"$VMTRACE" correlate --dry-run --kvm-metadata "$TMP/nope.ini" "$TMP/f.data" >/dev/null 2>&1
check "--kvm-metadata missing file: exit 3" test $? -eq 3
finish
