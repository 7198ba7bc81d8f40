# tests/lib.sh - shared helpers for the shell tests (sourced).
# Each test script runs a few focused checks, prints TAP-like lines and
# exits 0 (all passed), 1 (some failed) or 77 (skipped, with the reason).
set -u
: "${VMTRACE:?VMTRACE must point at the vmtrace binary (run through make check)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
PERF=${PERF:-$(command -v perf || true)}
PYTHON3=${PYTHON3:-$(command -v python3 || true)}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vmtrace-test.XXXXXX")
export TMP PERF PYTHON3 VMTRACE
trap 'rm -rf "$TMP"' EXIT
n=0
fails=0

ok() { n=$((n + 1)); echo "ok $n - $*"; }
fail() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
# check DESCRIPTION COMMAND...: passes when COMMAND succeeds; returns 1 when
# it fails, so that `check ... || show-why` shows why (it returned fail's 0
# before: no failure printed its diff)
check() { local d=$1; shift; if "$@"; then ok "$d"; else fail "$d"; return 1; fi; }
# finish: the summary, and the CPU time of the test's waited-for children
# (run-tests.sh sums it: what the suite costs, apart from waiting)
finish() {
	echo "# $n checks, $fails failed"
	times >"$TMP/.times" && sed -n '2s/^/# cpu of children (user sys): /p' "$TMP/.times"
	[ "$fails" -eq 0 ] && exit 0
	exit 1
}
skip() { echo "SKIP: $*"; exit 77; }
need_perf() { [ -n "$PERF" ] && "$PERF" version >/dev/null 2>&1 || skip "perf not installed (apt-get install linux-perf)"; }
# An ASan/UBSan build: its allocator's redzones and quarantine make peak-RSS
# bounds meaningless there (the normal build checks them).
asan_build() { grep -q __asan_init "$VMTRACE" 2>/dev/null; }
# need_python: python3 or skip; PYTHON3 the interpreter itself, not a
# version manager's shim in front of it (pyenv's costs a bash script and
# twice python's start-up, on each of the hundreds of calls of the suite)
need_python() {
	[ -n "$PYTHON3" ] || skip "python3 not installed"
	np_exe=$("$PYTHON3" -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$np_exe" ] && PYTHON3=$np_exe
	return 0
}
# asan_skip NAME SKIPPED...: true in an ASan/UBSan build when NAME is one of
# SKIPPED - matrix rows the sanitizer suite leaves out: their time is
# almost all perf's and the comparison scripts', which the sanitizers do not
# check, and the rows it runs take vmtrace through the same code paths
asan_skip() {
	[ -n "${as_asan:-}" ] || { asan_build && as_asan=1 || as_asan=0; }
	[ "$as_asan" = 1 ] || return 1
	as_name=$1
	shift
	for as_row in "$@"; do [ "$as_row" = "$as_name" ] && return 0; done
	return 1
}
# test_cmp EXPECT ACTUAL: git's test_cmp - succeeds when the two files are
# equal; otherwise prints a unified diff (expected -, actual +) as "# "
# lines and fails.  A missing file fails too, with diff's message.
test_cmp() {
	[ $# -eq 2 ] || { echo "# test_cmp: usage: test_cmp EXPECT ACTUAL"; return 2; }
	diff -u -- "$1" "$2" >"$TMP/.test_cmp" 2>&1 && return 0
	sed 's/^/# /' "$TMP/.test_cmp"
	return 1
}


# perf's dry run (always under timeout: perf hangs on some inputs)
# u64 EXPR: EXPR (Python; 0x... values) modulo 2^64, in hex.  dash's $((...))
# refuses numbers above 2^63 - 1 ("Illegal number"), and a TSC offset taken
# from this host's TSC is one whenever the host's TSC is past the guest's
# (a negative offset, as 64 bits); bash wraps them.  Needs need_python.
u64() { "$PYTHON3" -c 'import sys; print("0x%x" % (eval(sys.argv[1]) % 2**64))' "$1"; }
# s64 VALUE: VALUE as a signed 64-bit decimal (KVM's tsc_offset as printed)
s64() { "$PYTHON3" -c 'import sys; v = int(sys.argv[1], 0) % 2**64; print(v - 2**64 if v >= 2**63 else v)' "$1"; }
perf_dry_run() { timeout 120 "$PERF" inject -i "$1" --vm-time-correlation=dry-run 2>&1 >/dev/null; }

# json_check FILE EXPR: FILE holds one JSON document, valid UTF-8 (strict
# decoding, as JSON requires), and the Python expression EXPR is true of it
# (as j); otherwise says why on stderr.
json_check() {
	"$PYTHON3" -c 'import json, sys
try:
    j = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
except ValueError as e:
    sys.exit("json_check: %s: %s" % (sys.argv[1], e))
if not eval(sys.argv[2]):
    sys.exit("json_check: %s: not true of %r" % (sys.argv[2], j))' "$1" "$2"
}

# stopped_domain_xml FILE: a libvirt test-driver node (test://FILE) with one
# defined, shut-off domain named "stopped"
stopped_domain_xml() {
	cat >"$1" <<'X'
<node>
  <domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>
    <name>stopped</name><memory>1048576</memory><vcpu>2</vcpu><os><type>hvm</type></os>
    <test:runstate>5</test:runstate>
  </domain>
</node>
X
}

# fake_qemu [rename|-] [NAME]: start a stand-in for QEMU - a process with two
# threads named "CPU 0/KVM" and "CPU 1/KVM" (what record finds vCPUs by when
# there is no KVM debugfs) - and wait for the names.  With "rename", each
# thread renames itself and straight back every 20 ms (sideband COMM
# records).  With NAME (any bytes), the process is named NAME (its comm).
# Sets FAKE_QEMU to its pid; the caller kills it.
fake_qemu() {
	"$PYTHON3" -c '
import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None)
if len(sys.argv) > 2:
    libc.prctl(15, os.fsencode(sys.argv[2]))   # PR_SET_NAME of the main thread
def vcpu(i):
    k = 0
    while True:
        if sys.argv[1] == "rename":
            libc.prctl(15, ("vcpu-%d-%d" % (i, k)).encode())   # PR_SET_NAME
        libc.prctl(15, ("CPU %d/KVM" % i).encode())
        k += 1
        time.sleep(0.02 if sys.argv[1] == "rename" else 60)
for i in range(2):
    threading.Thread(target=vcpu, args=(i,), daemon=True).start()
time.sleep(300)' "${1:-}" ${2+"$2"} &
	FAKE_QEMU=$!
	for _ in $(seq 50); do
		[ "$(grep -l "CPU [01]/KVM" /proc/$FAKE_QEMU/task/*/comm 2>/dev/null | wc -l)" = 2 ] && return 0
		sleep 0.1
	done
	return 1
}

# need_debugfs: KVM's debugfs (vcpuN/pid, tsc-offset) mounted if it is not.
# It stays mounted: tests run in parallel (make -j), and one that unmounted
# it at its end pulled it from under another's KVM checks.
need_debugfs() {
	[ -d /sys/kernel/debug/kvm ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
}

# The QEMU boots of record --source tcg.  need_tcg: skips without QEMU;
# make check's vmtrace-tcg.so and tests/tcg-count.so (VMTRACE_TCG_PLUGIN,
# TCG_COUNT) must be set.  tcg_image: $TMP/img/vmlinux, the test kernel
# (tests/guest-image.sh --vmlinux), or skip.
need_tcg() {
	command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86 (apt-get install qemu-system-x86)"
	: "${VMTRACE_TCG_PLUGIN:?run through make check (VMTRACE_TCG_PLUGIN)}"
	: "${TCG_COUNT:?run through make check (TCG_COUNT)}"
}
tcg_image() {
	"$top_srcdir/tests/guest-image.sh" --vmlinux "$TMP/img" 2>"$TMP/image.err" ||
		skip "cannot get the guest kernel: $(tail -1 "$TMP/image.err")"
}

# tcg_boot_record SMP COUNT-OPTS RECORD-OPTS...: $TMP/rec, vmtrace record
# --source tcg RECORD-OPTS --json (JSON in $TMP/rec.json, stderr in
# $TMP/rec.err) of QEMU (TCG, SMP vCPUs) booting tcg_image's kernel to its
# panic (no root; console in $TMP/console), tests/tcg-count.so counting
# the instructions on its own into $TMP/count (COUNT-OPTS: more of its
# options, as ",percpu=1"); $TCG_QEMU_OPTS: more QEMU options).  Returns
# record's status.
tcg_boot_record() {
	tb_smp=$1 tb_count=$2
	shift 2
	# shellcheck disable=SC2086
	timeout 900 "$VMTRACE" record --source tcg "$@" -o "$TMP/rec" --json \
		-- qemu-system-x86_64 -accel tcg ${TCG_QEMU_OPTS:-} -m 256 -smp "$tb_smp" -nodefaults -no-user-config -display none \
		-serial "file:$TMP/console" -no-reboot -kernel "$TMP/img/vmlinux" -append "console=ttyS0 panic=-1 quiet" \
		-plugin "$TCG_COUNT,out=$TMP/count$tb_count" >"$TMP/rec.json" 2>"$TMP/rec.err"
}

# need_guest_standin OUT [CMD...]: in OUT a real `perf record -a` of this
# host's CPUs 0-1 (switch events, no samples) while CMD runs (default:
# sleep 0.01), standing in for a 2-vCPU guest's perf.data (see t0100);
# skips without 2 CPUs or where perf record -a does not work.
need_guest_standin() {
	[ "$(nproc)" -ge 2 ] || skip "needs 2 CPUs for a 2-vCPU stand-in guest file"
	gs_out=$1
	shift
	[ $# -gt 0 ] || set -- sleep 0.01
	"$PERF" record -q -N -e dummy -a -C 0-1 --sample-identifier --switch-events -o "$gs_out" -- "$@" >/dev/null 2>&1 ||
		skip "perf record -a does not work here (perf_event_paranoid? not root?)"
}

# inject_refused GUEST HOST STATUS WORDS DESCRIPTION [OPTIONS...]: exit STATUS, one
# line on stderr containing WORDS, no $TMP/out, no temporary (t0089, t0101)
inject_refused() {
	g=$1 h=$2 st=$3 words=$4 d=$5
	shift 5
	rm -rf "$TMP/out"
	"$VMTRACE" inject "$h" --guest-data "$g" -o "$TMP/out" "$@" >"$TMP/o" 2>"$TMP/e"
	rc=$?
	if [ "$rc" -eq "$st" ] && [ "$(wc -l <"$TMP/e")" -eq 1 ] && grep -q -- "$words" "$TMP/e" &&
	   [ ! -e "$TMP/out" ] && ! ls -a "$TMP" | grep -q vmtrace-tmp; then
		ok "$d: exit $st, one line ($(cut -c1-150 "$TMP/e"))"
	else
		fail "$d: want exit $st and one line with '$words', got exit $rc:"
		sed 's/^/#   /' "$TMP/e"
	fi
}
