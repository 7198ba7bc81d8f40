#!/bin/sh
# correlate: a file truncated while it is read gives a clear error (exit 3,
# "FILE: changed size while being read" or another message naming the
# file), never SIGBUS (exit 135: the AUX data used to be mapped).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

"$VMTRACE" synth -o "$TMP/big.data" --size 64M 2>/dev/null || fail "synth"
size=$(stat -c %s "$TMP/big.data")
bus=0 errors=0 changed=0 others=
for delay in 0.01 0.02 0.04 0.06 0.08 0.1 0.13 0.17; do
	for mode in -n "-n -J 1"; do
		cp "$TMP/big.data" "$TMP/t.data"
		# shellcheck disable=SC2086
		"$VMTRACE" correlate $mode "$TMP/t.data" >/dev/null 2>"$TMP/err" &
		pid=$!
		sleep $delay
		truncate -s $((size / 4)) "$TMP/t.data"
		wait $pid
		rc=$?
		echo "# $delay $mode: exit $rc $(cat "$TMP/err")"
		case $rc in
		135|138) bus=$((bus + 1)) ;;
		3)	errors=$((errors + 1))
			grep -q "changed size while being read" "$TMP/err" && changed=$((changed + 1))
			grep -q "^vmtrace correlate: .*$TMP/t.data" "$TMP/err" || others="$others [no file name: $(cat "$TMP/err")]"
			[ "$(wc -l <"$TMP/err")" = 1 ] || others="$others [not one line: $(cat "$TMP/err")]" ;;
		0)	;;    # finished before the truncation
		*)	others="$others [exit $rc: $(cat "$TMP/err")]" ;;
		esac
	done
done
echo "# SIGBUS $bus, exit 3 $errors (changed size: $changed), other:$others"
check "never SIGBUS ($bus of 16 runs)" test "$bus" = 0
check "exit 3 (or 0 when done before) with one line naming the file" test -z "$others"
check "the truncation was seen while reading ($changed times 'changed size while being read')" test "$changed" -gt 0
finish
