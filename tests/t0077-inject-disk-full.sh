#!/bin/sh
# vmtrace inject on a full disk: exit 1 with one line that says so, and
# nothing half-written - no OUT, no temporary left in OUT's directory (the
# output is built in a temporary directory and renamed into place only when
# complete; issue #13: "nothing half-written on any error").  A tmpfs of our
# own (unshare -m), sized below what the injected recording needs; the same
# inject into a tmpfs with room must succeed (the check can fail).
# Guest file: a real `perf record` file of this host standing in for a
# guest's (see t0100); host recording from vmtrace synth.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
	skip "needs root and unshare -m for a tmpfs of its own"
fi
NV=$(nproc); [ "$NV" -gt 2 ] && NV=2
"$PERF" record -q -N -e dummy -a -C "0-$((NV - 1))" --sample-identifier -o "$TMP/g0.data" -- sleep 0.01 >/dev/null 2>&1 ||
	skip "perf record -a does not work here (perf_event_paranoid? not root?)"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g.data" time-conv 10 341 0 1
"$VMTRACE" synth -o "$TMP/h.data" --per-cpu --vcpus "$NV" --cpus "$NV" --size 4M 2>/dev/null
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/ok.data" >/dev/null 2>&1
check "the inputs inject (exit 0)" test $? -eq 0
need=$(du -sk "$TMP/ok.data" | cut -f1)
check "the injected recording takes space ($need KiB)" test "$need" -gt 1024

# inject_into KIB NAME: inject into a tmpfs of KIB KiB; NAME.rc, NAME.err,
# NAME.ls (what the tmpfs holds afterwards)
inject_into() {
	mkdir -p "$TMP/mnt"
	unshare -m sh -c '
		mount -t tmpfs -o size=$1k none "$2/mnt" || exit 99
		"$3" inject "$2/h.data" --guest-data "$2/g.data" -o "$2/mnt/out.data" >/dev/null 2>"$2/$4.err"
		echo $? >"$2/$4.rc"
		ls -A "$2/mnt" >"$2/$4.ls"
		umount "$2/mnt"' sh "$1" "$TMP" "$VMTRACE" "$2"
}
inject_into $((need / 2)) full
rc=$(cat "$TMP/full.rc")
check "a disk with half the room: exit 1, one line that says no space" \
	sh -c "test $rc -eq 1 && test \$(wc -l <'$TMP/full.err') -eq 1 && grep -q 'No space left' '$TMP/full.err'"
sed 's/^/# /' "$TMP/full.err"
check "...and nothing is left on it: no OUT, no temporary ($(tr '\n' ' ' <"$TMP/full.ls"))" \
	test ! -s "$TMP/full.ls"
inject_into $((need * 2 + 1024)) room
check "a disk with room: exit 0, OUT there ($(tr '\n' ' ' <"$TMP/room.ls"))" \
	sh -c "test \$(cat '$TMP/room.rc') -eq 0 && test \"\$(cat '$TMP/room.ls')\" = out.data"
finish
