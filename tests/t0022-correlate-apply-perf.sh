#!/bin/sh
# One-step `vmtrace correlate FILE -o OUT` on the whole synth matrix: the
# result equals, byte for byte, what `perf inject --vm-time-correlation=<the
# same offsets> --force` writes on a copy (vmtrace only appends its marker
# after the last section); a second dry run finds no guest offsets left; perf
# still reads the corrected file (in the normal build: perf's dump of
# each 2-4 MiB file is most of the sanitizer build's time, and the bytes it
# reads are perf's own rewrite's there too).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python

while read -r name opts; do
	case $name in ""|\#*) continue ;; esac
	f="$TMP/$name.data"
	# shellcheck disable=SC2086
	"$VMTRACE" synth -o "$f" --size 2M $opts 2>/dev/null || { fail "$name: synth"; continue; }
	cp "$f" "$TMP/perf.data"
	rm -f "$TMP/vt.data" "$TMP/vt2.data"     # -o writes a new file
	if ! "$VMTRACE" correlate "$f" -o "$TMP/vt.data" --json >"$TMP/apply.json" 2>"$TMP/err"; then
		fail "$name: vmtrace correlate -o failed: $(cat "$TMP/err")"
		continue
	fi
	offs=$("$PYTHON3" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(o["tsc_offset"]+":"+o["vmcs"] for o in d["offsets"]))' "$TMP/apply.json")
	timeout 300 "$PERF" inject -i "$TMP/perf.data" --vm-time-correlation="$offs" --force >/dev/null 2>&1
	size=$(stat -c %s "$TMP/perf.data")
	n=$("$PYTHON3" -c 'import json,sys; print(json.load(open(sys.argv[1]))["tsc_packets_corrected"])' "$TMP/apply.json")
	if ! cmp -s "$f" "$TMP/perf.data" && cmp -s -n "$size" "$TMP/vt.data" "$TMP/perf.data"; then
		ok "$name: $n TSC packets rewritten, identical to perf's rewrite"
	else
		fail "$name: differs from perf's rewrite (or perf changed nothing)"; cmp -n "$size" "$TMP/vt.data" "$TMP/perf.data" | head -3
	fi
	VMTRACE_TWO_PASS=1 "$VMTRACE" correlate "$f" -o "$TMP/vt2.data" >/dev/null 2>&1
	check "$name: single-pass and two-pass corrections agree" cmp -s -n "$size" "$TMP/vt.data" "$TMP/vt2.data"
	"$VMTRACE" correlate --dry-run --json "$TMP/vt.data" >"$TMP/again.json" 2>/dev/null
	rc=$?
	check "$name: second dry run: exit 0, every VMCS no-offset" sh -c "[ $rc -eq 0 ] && '$PYTHON3' -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"vmcs\"] and all(v[\"status\"]==\"no-offset\" for v in d[\"vmcs\"])' '$TMP/again.json'"
	asan_build && continue
	timeout 120 "$PERF" script -D -i "$TMP/vt.data" >"$TMP/dump" 2>&1
	check "$name: perf script -D reads the corrected file, no bad packet" sh -c "[ $? -eq 0 ] && ! grep -q 'Bad packet' '$TMP/dump' && grep -q 'TSC 0x' '$TMP/dump'"
done <"$top_srcdir/tests/matrix.txt"
timeout 60 "$PERF" report --header-only -i "$TMP/vt.data" >"$TMP/hdr" 2>&1
check "perf report --header-only reads a corrected file" grep -q "os release" "$TMP/hdr"
finish
