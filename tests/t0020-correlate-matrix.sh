#!/bin/sh
# vmtrace correlate --dry-run --format=perf agrees with perf inject
# --vm-time-correlation=dry-run on a matrix of synthetic recordings, and both
# agree with synth's ground truth.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python


while read -r name opts; do
	case $name in ""|\#*) continue ;; esac
	f="$TMP/$name.data"
	# shellcheck disable=SC2086
	if ! "$VMTRACE" synth -o "$f" --truth "$TMP/$name.json" --size 2M $opts 2>"$TMP/synth.err"; then
		fail "$name: synth failed: $(cat "$TMP/synth.err")"
		continue
	fi
	"$VMTRACE" correlate --dry-run --format=perf "$f" >"$TMP/$name.vt" 2>"$TMP/$name.vterr"
	rc=$?
	perf_dry_run "$f" >"$TMP/$name.perf"
	prc=$?
	if [ $rc -ne 0 ]; then
		fail "$name: vmtrace exit $rc: $(cat "$TMP/$name.vterr")"
	elif [ $prc -ne 0 ]; then
		fail "$name: perf exit $prc"
	elif "$PYTHON3" "$top_srcdir/tests/check-matrix.py" "$TMP/$name.json" "$TMP/$name.vt" "$TMP/$name.perf" >"$TMP/cmp" 2>&1; then
		ok "$name: $(wc -l <"$TMP/$name.vt") VMCS, same as perf and ground truth"
	else
		fail "$name: mismatch"; cat "$TMP/cmp"
	fi
done <"$top_srcdir/tests/matrix.txt"
finish
