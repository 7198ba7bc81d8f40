#!/bin/sh
# vmtrace record --domain / check --domain against a real libvirtd (started
# here when the machine has none): QEMU domains of type 'qemu' (TCG: "CPU
# n/TCG" threads) and 'kvm' (debugfs vcpuN/pid and tsc-offset, which the
# recording's metadata must hold).  The trace comes from the synthetic
# source; everything else is real.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python
[ "$(id -u)" = 0 ] || skip "needs root (starts libvirtd, opens perf events on QEMU)"
command -v libvirtd >/dev/null && command -v virsh >/dev/null ||
	skip "no libvirtd/virsh (apt-get install libvirt-daemon-system libvirt-clients)"
command -v qemu-system-x86_64 >/dev/null || skip "no QEMU (apt-get install qemu-system-x86)"
URI=qemu:///system
started=
cleanup() {
	for dom in vt-rec-tcg vt-rec-kvm; do virsh -c $URI destroy $dom >/dev/null 2>&1; done
	if [ -n "$started" ]; then
		kill "$(cat "$TMP/libvirtd.pid" 2>/dev/null)" "$(cat "$TMP/virtlogd.pid" 2>/dev/null)" 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
if ! virsh -c $URI version >/dev/null 2>&1; then
	# KVM must be usable by libvirt's QEMU user, or libvirt re-probes QEMU on
	# every start (45 s each); a normal host has this from udev.
	[ -e /dev/kvm ] && getent group kvm >/dev/null && chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
	mkdir -p /run/libvirt
	virtlogd -d -p "$TMP/virtlogd.pid" || skip "virtlogd does not start"
	libvirtd -d -p "$TMP/libvirtd.pid" || skip "libvirtd does not start"
	started=1
	for _ in $(seq 120); do virsh -c $URI version >/dev/null 2>&1 && break; sleep 0.5; done
	virsh -c $URI version >/dev/null 2>&1 || skip "libvirtd does not answer on $URI"
fi
need_debugfs

# define_start NAME TYPE: a domain with no disk (it idles in the BIOS)
define_start() {
	cat >"$TMP/$1.xml" <<X
<domain type='$2'>
  <name>$1</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  $( [ "$2" = kvm ] && echo "<cpu mode='custom' match='exact' check='none'><model>qemu64</model><feature policy='disable' name='svm'/></cpu>" )
  <on_poweroff>destroy</on_poweroff><on_crash>destroy</on_crash>
  <devices><memballoon model='none'/></devices>
</domain>
X
	virsh -c $URI create "$TMP/$1.xml" >"$TMP/virsh.log" 2>&1 || { cat "$TMP/virsh.log"; return 1; }
	pid=$(cat /run/libvirt/qemu/$1.pid)
	for _ in $(seq 100); do
		[ "$(grep -l "CPU [01]/" /proc/$pid/task/*/comm 2>/dev/null | wc -l)" = 2 ] &&
			{ [ "$2" = qemu ] || ! grep -qx 0 /sys/kernel/debug/kvm/$pid-*/vcpu*/pid 2>/dev/null; } && break
		sleep 0.1
	done
	tids=$(for t in /proc/$pid/task/*; do case $(cat $t/comm 2>/dev/null) in "CPU "*) echo ${t##*/};; esac; done | sort -n | paste -sd' ')
}
jtids() { "$PYTHON3" -c 'import json,sys; print(" ".join(str(v["tid"]) for v in json.load(open(sys.argv[1]))["vcpus"]))' "$1"; }

cd "$TMP" || exit 1
if define_start vt-rec-tcg qemu; then
	"$VMTRACE" record --domain vt-rec-tcg --connect $URI --source synth --synth-size 2M -o tcg.data --json >tcg.json 2>tcg.err
	check "TCG domain: record exit 0" test $? = 0
	check "TCG domain: the QEMU pid from libvirt ($pid)" grep -q "\"qemu_pid\": $pid," tcg.json
	check "TCG domain: every vCPU thread ($tids)" test "$(jtids tcg.json)" = "$tids"
	check "TCG domain: threads found by name (CPU n/TCG)" sh -c "grep -o 'thread name' tcg.json | wc -l | grep -qx 2"
	check "TCG domain: metadata names the domain" grep -qx "domain=vt-rec-tcg" tcg.data/vmtrace-kvm.ini
	check "TCG domain: correlate reads the recording" sh -c "'$VMTRACE' correlate --dry-run tcg.data >/dev/null 2>&1"
	"$VMTRACE" check --domain vt-rec-tcg --connect $URI --json >chk.json 2>/dev/null
	check "check --domain: vCPU threads OK" sh -c "$PYTHON3 -c 'import json; c={x[\"name\"]: x[\"status\"] for x in json.load(open(\"chk.json\"))[\"checks\"]}; assert c[\"vcpu_threads\"] == \"OK\" and c[\"domain_kvm\"] == \"WARN\"'"
	virsh -c $URI destroy vt-rec-tcg >/dev/null 2>&1
else
	fail "libvirt could not start a TCG domain"
fi

if [ -w /dev/kvm ] && define_start vt-rec-kvm kvm; then
	"$VMTRACE" record --domain vt-rec-kvm --connect $URI --source synth --synth-size 2M -o kvm.data --json >kvm.json 2>kvm.err
	check "KVM domain: record exit 0" test $? = 0
	check "KVM domain: every vCPU thread ($tids)" test "$(jtids kvm.json)" = "$tids"
	check "KVM domain: threads from debugfs vcpuN/pid" sh -c "grep -o '\"debugfs\"' kvm.json | wc -l | grep -qx 2"
	for v in 0 1; do
		off=$(cat /sys/kernel/debug/kvm/$pid-*/vcpu$v/tsc-offset)
		check "KVM domain: metadata vcpu$v start.tsc_offset = debugfs ($off)" sh -c "grep -A4 '^\[vcpu$v\]' kvm.data/vmtrace-kvm.ini | grep -qx 'start.tsc_offset=$off'"
	done
	"$VMTRACE" check --domain vt-rec-kvm --connect $URI --json >chk.json 2>/dev/null
	check "check --domain (KVM): vCPU threads and KVM debugfs OK" sh -c "$PYTHON3 -c 'import json; c={x[\"name\"]: x[\"status\"] for x in json.load(open(\"chk.json\"))[\"checks\"]}; assert c[\"vcpu_threads\"] == \"OK\" and c[\"kvm_debugfs\"] == \"OK\"'"
	virsh -c $URI destroy vt-rec-kvm >/dev/null 2>&1
else
	echo "# /dev/kvm not usable: no KVM domain test"
fi
finish
