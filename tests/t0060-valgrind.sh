#!/bin/sh
# Every command under valgrind memcheck: no invalid access and no use of
# uninitialised memory (which ASan does not see: it once hid a table field
# that was never set).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
command -v valgrind >/dev/null || skip "valgrind not installed (apt-get install valgrind)"
grep -q __asan_init "$VMTRACE" && skip "ASan build: valgrind cannot run it (the normal build runs this test)"
V="valgrind -q --error-exitcode=99 --track-origins=yes"
vg() { # vg DESCRIPTION EXPECTED_RC ARGS...
	d=$1 want=$2; shift 2
	$V "$VMTRACE" "$@" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	if [ $rc -eq "$want" ]; then ok "$d (exit $rc, memcheck clean)"; else fail "$d: exit $rc"; grep '==' "$TMP/err" | head -20; fi
}
vg "synth per-CPU, CYC" 0 synth -o "$TMP/a.data" --per-cpu --vcpus 4 --cyc --size 256K --truth "$TMP/a.json"
vg "synth offset change + TSC scaling" 0 synth -o "$TMP/b.data" --size 256K --psb-period 0 --offset-change 0:0xffffff0000000000@0.5 --tsc-scale 0x1400000000000
vg "correlate --dry-run, 2 threads" 0 correlate --dry-run -J 2 "$TMP/a.data"
vg "correlate --dry-run --json, epochs + scaling" 0 correlate --dry-run --json --tsc-scale 0x1400000000000 "$TMP/b.data"
vg "correlate -o" 0 correlate "$TMP/a.data" -o "$TMP/a.corr"
cp "$TMP/a.data" "$TMP/c.data"
vg "correlate --in-place" 0 correlate --in-place "$TMP/c.data"
vg "correlate --recover" 0 correlate --recover "$TMP/c.data"
vg "correlate on a corrected file (refused)" 7 correlate --in-place "$TMP/c.data"
vg "correlate bad offset string" 2 correlate --vm-time-correlation="dry-run zz" "$TMP/a.data"
head -c 50000 "$TMP/a.data" >"$TMP/t.data"
vg "correlate truncated file" 3 correlate --dry-run "$TMP/t.data"
vg "check --domain (libvirt test driver)" 1 check --domain test --connect test:///default
vg "record: usage error" 2 record --pid 1 --timeless --per-cpu
if [ "$(id -u)" = 0 ] && [ -n "$PYTHON3" ]; then
	fake_qemu
	fake=$FAKE_QEMU
	vg "record --source synth (per-thread, snapshot)" 0 record --pid $fake --source synth --synth-size 512K --snapshot=64K --aux-size 64K -o "$TMP/r.data" -q
	vg "record --source synth (per-CPU, cyc)" 0 record --pid $fake --source synth --synth-size 512K --per-cpu --cyc -o "$TMP/r2.data" -q
	vg "record without Intel PT" 14 record --pid $fake -o "$TMP/r3.data" -q
	kill $fake
fi
finish
