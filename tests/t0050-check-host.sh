#!/bin/sh
# vmtrace check: on this machine (no Intel PT) it FAILs with the fix; on
# prepared sysfs/procfs/dev trees (--root) it reports each condition.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python

"$VMTRACE" check >"$TMP/out" 2>&1
rc=$?
if [ -d /sys/bus/event_source/devices/intel_pt ]; then
	check "this machine has intel_pt: no intel_pt FAIL" sh -c "! grep -q '^FAIL intel_pt' '$TMP/out'"
else
	check "this machine: exit 1" test $rc -eq 1
	check "this machine: intel_pt FAIL with a fix" sh -c "grep -q '^FAIL intel_pt .*no intel_pt PMU' '$TMP/out' && grep -q 'fix: run on an Intel CPU' '$TMP/out'"
fi

# A host where everything is right.
good="$TMP/good"
mkdir -p "$good/sys/bus/event_source/devices/intel_pt/caps" "$good/sys/bus/event_source/devices/intel_pt/format" \
	"$good/sys/module/kvm_intel/parameters" "$good/proc/sys/kernel" "$good/sys/kernel/security" \
	"$good/sys/kernel/debug/kvm" "$good/dev/cpu/0"
echo 8 >"$good/sys/bus/event_source/devices/intel_pt/type"
for c in mtc:1 psb_cyc:1 mtc_periods:249 tsc_art_ratio:2:168 ip_filtering:1; do
	echo "${c#*:}" >"$good/sys/bus/event_source/devices/intel_pt/caps/${c%%:*}"
done
echo config:10 >"$good/sys/bus/event_source/devices/intel_pt/format/tsc"
echo config:14-17 >"$good/sys/bus/event_source/devices/intel_pt/format/mtc_period"
echo 0 >"$good/sys/module/kvm_intel/parameters/pt_mode"
echo 1 >"$good/proc/sys/kernel/perf_event_paranoid"
echo 0 >"$good/proc/sys/kernel/kptr_restrict"
echo "[none] integrity confidentiality" >"$good/sys/kernel/security/lockdown"
# IA32_VMX_MISC (MSR 0x485) with bit 14 set, at its offset in /dev/cpu/0/msr
msr() { "$PYTHON3" -c 'import struct,sys; f=open(sys.argv[1],"wb"); f.seek(0x485); f.write(struct.pack("<Q", int(sys.argv[2],0)))' "$1" "$2"; }
msr "$good/dev/cpu/0/msr" 0x4000

tree() { rm -rf "$TMP/t"; cp -a "$good" "$TMP/t"; }
run() { "$VMTRACE" check --root "$TMP/t" --json >"$TMP/out" 2>"$TMP/err"; echo $?; }
status() { "$PYTHON3" -c 'import json,sys; print({c["name"]: c["status"] for c in json.load(open(sys.argv[1]))["checks"]}.get(sys.argv[2]))' "$TMP/out" "$1"; }
fix() { "$PYTHON3" -c 'import json,sys; print({c["name"]: c["fix"] for c in json.load(open(sys.argv[1]))["checks"]}.get(sys.argv[2]))' "$TMP/out" "$1"; }

tree
check "good tree: exit 0" test "$(run)" = 0
for c in intel_pt vmx_misc pt_mode perf_event_paranoid kptr_restrict lockdown debugfs; do
	check "good tree: $c OK" test "$(status $c)" = OK
done
check "good tree: caps are reported" grep -q "mtc=1.*psb_cyc=1.*mtc_periods=249" "$TMP/out"

# --root DIR whose name is not UTF-8 (a byte 0xff): the JSON stays valid
# UTF-8 with U+FFFD for the byte; the text keeps the path as it is
bad="$TMP/$(printf 't\377')"
cp -a "$good" "$bad" && rm -r "$bad/sys/kernel/debug/kvm"
"$VMTRACE" check --root "$bad" --json >"$TMP/out" 2>"$TMP/err"
check "--root with a byte 0xff: exit 0, nothing on stderr" sh -c "test $? -eq 0 && test ! -s '$TMP/err'"
check "--root with a byte 0xff: JSON in strict UTF-8, the path with U+FFFD" json_check "$TMP/out" \
	"[c['what'] for c in j['checks'] if c['name'] == 'debugfs'][0].startswith('KVM debugfs not found ($TMP/t\\ufffd/sys/kernel/debug/kvm)')"
"$VMTRACE" check --root "$bad" >"$TMP/out" 2>&1
check "--root with a byte 0xff: the text names the path byte for byte" grep -qF "WARN debugfs              KVM debugfs not found ($bad/sys/kernel/debug/kvm)" "$TMP/out"
rm -rf "$bad"

tree; echo 1 >"$TMP/t/sys/module/kvm_intel/parameters/pt_mode"
check "pt_mode=1: exit 1" test "$(run)" = 1
check "pt_mode=1: FAIL" test "$(status pt_mode)" = FAIL
check "pt_mode=1: the fix reloads kvm_intel with pt_mode=0" sh -c "'$PYTHON3' -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any(\"pt_mode=0\" in (c[\"fix\"] or \"\") for c in d[\"checks\"])' '$TMP/out'"

tree; msr "$TMP/t/dev/cpu/0/msr" 0x3fff
check "VMX_MISC[14]=0: exit 1" test "$(run)" = 1
check "VMX_MISC[14]=0: FAIL" test "$(status vmx_misc)" = FAIL
tree; rm "$TMP/t/dev/cpu/0/msr"
run >/dev/null
check "no /dev/cpu/0/msr: WARN" test "$(status vmx_misc)" = WARN
check "no /dev/cpu/0/msr: says it could not be checked" grep -q "could not be checked" "$TMP/out"

tree; echo 2 >"$TMP/t/proc/sys/kernel/kptr_restrict"
run >/dev/null
check "kptr_restrict=2: WARN" test "$(status kptr_restrict)" = WARN
check "kptr_restrict=2: the fix is the sysctl" test "$(fix kptr_restrict)" = "sudo sysctl -w kernel.kptr_restrict=0"
tree; echo "none [integrity] confidentiality" >"$TMP/t/sys/kernel/security/lockdown"
run >/dev/null
check "lockdown=integrity: WARN" test "$(status lockdown)" = WARN
tree; echo "none integrity [confidentiality]" >"$TMP/t/sys/kernel/security/lockdown"
check "lockdown=confidentiality: exit 1" test "$(run)" = 1
check "lockdown=confidentiality: FAIL" test "$(status lockdown)" = FAIL
tree; echo 0 >"$TMP/t/sys/bus/event_source/devices/intel_pt/caps/mtc"
run >/dev/null
check "no MTC capability: WARN" test "$(status intel_pt_mtc)" = WARN
check "no MTC capability: fix is timeless recording" sh -c "echo '$(fix intel_pt_mtc)' | grep -q timeless"
tree; rm -r "$TMP/t/sys/kernel/debug/kvm"
run >/dev/null
check "no KVM debugfs: WARN" test "$(status debugfs)" = WARN
check "no KVM debugfs: fix mounts it" test "$(fix debugfs)" = "sudo mount -t debugfs none /sys/kernel/debug"
tree; echo 2 >"$TMP/t/proc/sys/kernel/perf_event_paranoid"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	chmod -R a+rX "$TMP"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$VMTRACE" check --root "$TMP/t" --json >"$TMP/out" 2>/dev/null
	check "perf_event_paranoid=2, not root: FAIL" test "$(status perf_event_paranoid)" = FAIL
	check "perf_event_paranoid=2, not root: fix is the sysctl" sh -c "echo '$(fix perf_event_paranoid)' | grep -q 'perf_event_paranoid=1'"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$VMTRACE" check --root "$TMP/good" --json >"$TMP/out" 2>/dev/null
	check "perf_event_paranoid=1, not root: OK" test "$(status perf_event_paranoid)" = OK
fi
run >/dev/null
check "perf_event_paranoid=2 as root: OK" test "$(status perf_event_paranoid)" = OK
finish
