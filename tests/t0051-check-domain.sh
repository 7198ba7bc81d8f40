#!/bin/sh
# vmtrace check --domain / --pid: libvirt lookups on the test driver
# (unknown, inactive, running), and vCPU thread discovery on real QEMU
# processes: TCG ("CPU n/TCG" thread names) and KVM (debugfs vcpuN/pid).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python
status() { "$PYTHON3" -c 'import json,sys; print({c["name"]: c["status"] for c in json.load(open(sys.argv[1]))["checks"]}.get(sys.argv[2]))' "$TMP/out" "$1"; }
what() { "$PYTHON3" -c 'import json,sys; print({c["name"]: c["what"] for c in json.load(open(sys.argv[1]))["checks"]}.get(sys.argv[2]))' "$TMP/out" "$1"; }

"$VMTRACE" check --domain test --connect test:///default --json >"$TMP/out" 2>/dev/null
what domain >"$TMP/w"
check "test:///default: domain 'test' found running" grep -q "domain 'test' running on test:///default (driver TEST, 2 vCPUs" "$TMP/w"
check "test:///default: no QEMU process -> FAIL" test "$(status qemu_pid)" = FAIL
"$VMTRACE" check --domain nosuch --connect test:///default >"$TMP/out" 2>&1
check "unknown domain: exit 1" test $? -eq 1
check "unknown domain: names it and lists the domains" grep -q "no domain named 'nosuch' on test:///default (domains: test)" "$TMP/out"
stopped_domain_xml "$TMP/node.xml"
"$VMTRACE" check --domain stopped --connect "test://$TMP/node.xml" >"$TMP/out" 2>&1
check "inactive domain: exit 1" test $? -eq 1
check "inactive domain: says so and how to start it" grep -q "domain 'stopped' is not running (shut off); start it: virsh -c test://.* start stopped" "$TMP/out"
LIBVIRT_DEFAULT_URI=test:///default "$VMTRACE" check --domain test --json >"$TMP/out" 2>/dev/null
what domain >"$TMP/w"
check "LIBVIRT_DEFAULT_URI is honoured" grep -q "on test:///default" "$TMP/w"
"$VMTRACE" check --domain x --connect bogus:///nothing >"$TMP/out" 2>&1
check "bad URI: FAIL with a clear message" grep -q "FAIL domain.*cannot connect to bogus:///nothing" "$TMP/out"
check "--domain with --pid: usage error" sh -c '"$VMTRACE" check --domain a --pid 1 2>/dev/null; test $? -eq 2'

"$VMTRACE" check --domain a --pid 1 --json >"$TMP/out" 2>"$TMP/err"
rc=$?
check "--domain with --pid under --json: exit 2, nothing on stderr" sh -c "[ $rc = 2 ] && test ! -s '$TMP/err'"
check "... the error as a JSON object on stdout, with the exit status" json_check "$TMP/out" \
	"j == {'error': 'vmtrace check: --domain and --pid exclude each other', 'exit_status': 2}"

# a process name (comm) that is not UTF-8 reaches check's JSON: the JSON
# stays valid UTF-8, the byte 0xff becomes U+FFFD
fake_qemu - "$(printf 'qemu\377')"
"$VMTRACE" check --pid $FAKE_QEMU --json >"$TMP/out" 2>/dev/null
kill $FAKE_QEMU
check "a process named qemu+0xff: JSON in strict UTF-8, its name with U+FFFD" json_check "$TMP/out" \
	"[c['what'] for c in j['checks'] if c['name'] == 'domain'][0].startswith('QEMU process pid $FAKE_QEMU (qemu\\ufffd), 2 vCPU threads')"
check "... and its vCPU threads were found" json_check "$TMP/out" \
	"[c['status'] for c in j['checks'] if c['name'] == 'vcpu_threads'] == ['OK']"

command -v qemu-system-x86_64 >/dev/null || { echo "# no QEMU: skipping the process checks"; finish; }
# check_qemu ACCEL [OPTS]: start QEMU with 2 vCPUs (no disk: it idles in the BIOS), check, kill
check_qemu() {
	# shellcheck disable=SC2086
	qemu-system-x86_64 -name "vt-$1,debug-threads=on" -accel "$1" ${2:-} -smp 2 -m 64 -nodefaults -no-user-config \
		-display none >"$TMP/qemu.log" 2>&1 &
	qpid=$!
	for _ in $(seq 100); do
		[ "$(grep -l "CPU [01]/" /proc/$qpid/task/*/comm 2>/dev/null | wc -l)" = 2 ] &&
			{ [ "$1" = tcg ] || ! grep -qx 0 /sys/kernel/debug/kvm/$qpid-*/vcpu*/pid 2>/dev/null; } && break
		kill -0 $qpid 2>/dev/null || break
		sleep 0.1
	done
	"$VMTRACE" check --pid $qpid --json >"$TMP/out" 2>/dev/null
	want=$(for t in /proc/$qpid/task/*; do c=$(cat $t/comm 2>/dev/null); case $c in "CPU "*) echo "vCPU ${c#CPU } = tid ${t##*/}" ;; esac; done | sed 's#/[A-Z]* = # = #' | sort | paste -sd, | sed 's/,/, /g')
	kill $qpid 2>/dev/null; wait $qpid 2>/dev/null
}
check_qemu tcg
check "TCG QEMU: both vCPU threads found" test "$(status vcpu_threads)" = OK
check "TCG QEMU: threads match /proc ($want)" sh -c "echo '$(what vcpu_threads)' | grep -qF '$want'"
check "TCG QEMU: not KVM -> WARN" test "$(status domain_kvm)" = WARN

if [ -w /dev/kvm ] && [ "$(id -u)" = 0 ]; then
	need_debugfs
	check_qemu kvm "-cpu qemu64"
	if grep -q "failed to initialize kvm\|Could not access KVM" "$TMP/qemu.log"; then
		echo "# KVM unusable here: $(head -1 "$TMP/qemu.log")"
	elif [ -d /sys/kernel/debug/kvm ]; then
		check "KVM QEMU: vCPU threads from debugfs" sh -c "echo '$(what vcpu_threads)' | grep -q 'from debugfs'"
		check "KVM QEMU: debugfs threads match /proc ($want)" sh -c "echo '$(what vcpu_threads)' | grep -qF '$want'"
		check "KVM QEMU: kvm_debugfs OK with the vCPU's tsc-offset" sh -c "[ '$(status kvm_debugfs)' = OK ] && echo '$(what kvm_debugfs)' | grep -q 'tsc-offset'"
	fi
else
	echo "# /dev/kvm not usable as root here: skipping the KVM process check"
fi
finish
