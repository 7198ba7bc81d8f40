#!/bin/bash
# correlate and synth output: JSON stays strict UTF-8 when paths are not,
# errors under --json are JSON objects with the exit status, the text table
# is what it was, and stdout that cannot be written is reported.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python

bad=$'trace\xff'
"$VMTRACE" synth -o "$TMP/$bad.data" --size 256K --vcpus 2 --json >"$TMP/synth.json" 2>/dev/null
check "synth --json on a path with byte 0xff: strict UTF-8, U+FFFD for the byte" \
	json_check "$TMP/synth.json" 'j["output"].endswith("trace\ufffd.data") and j["queues"] == 2'
"$VMTRACE" correlate -n --json "$TMP/$bad.data" >"$TMP/dry.json" 2>/dev/null
check "correlate -n --json on that path: strict UTF-8, U+FFFD" \
	json_check "$TMP/dry.json" 'j["file"].endswith("trace\ufffd.data") and len(j["vmcs"]) == 2'
"$VMTRACE" correlate --json "$TMP/$bad.data" -o "$TMP/$bad.out" >"$TMP/apply.json" 2>/dev/null
check "correlate -o --json: strict UTF-8, both paths with U+FFFD" \
	json_check "$TMP/apply.json" 'j["output"].endswith("trace\ufffd.out") and j["file"].endswith("trace\ufffd.data") and j["tsc_packets_corrected"] > 0'

# Errors under --json: one JSON object on stdout, nothing on stderr, same status.
"$VMTRACE" correlate -n --json "$TMP/$bad.missing" >"$TMP/e1" 2>"$TMP/e1.err"; rc=$?
check "missing input under --json: exit 3" test $rc = 3
check "missing input under --json: a JSON error object naming the file, exit_status 3" \
	json_check "$TMP/e1" 'j["exit_status"] == 3 and "trace\ufffd.missing" in j["error"]'
check "missing input under --json: nothing on stderr" test ! -s "$TMP/e1.err"
"$VMTRACE" correlate -n --format=json --jobs 5000 x >"$TMP/e2" 2>"$TMP/e2.err"; rc=$?
check "bad option value under --format=json: exit 2" test $rc = 2
check "bad option value under --format=json: the object says --jobs" \
	json_check "$TMP/e2" 'j["exit_status"] == 2 and "--jobs" in j["error"]'
"$VMTRACE" synth --json --vcpus -3 -o "$TMP/x" >"$TMP/e3" 2>/dev/null; rc=$?
check "synth usage error under --json: exit 2 and a JSON object" \
	sh -c "[ $rc = 2 ]" 
check "synth usage error under --json: exit_status 2" json_check "$TMP/e3" 'j["exit_status"] == 2'

# The table through the table helper: same layout as before.
cat >"$TMP/expect" <<'EOT'
VMCS           VCPU             TSC-OFFSET            GUEST-TSC   SPREAD  STATUS
0x12340        0 (tid 4010)     0xfffffeb7b0b5654e           16        0  ok
0x12451        1 (tid 4011)     0xfffffeb7b0b5654e           20        0  ok
0x12562        2 (tid 4012)     0xfffffeb7b0b5654e           30        0  ok
0x12673        3 (tid 4013)     0xfffffeb7b0b5654e           17        0  ok
EOT
"$VMTRACE" correlate -n "$top_srcdir/examples/kvm-4vcpu.data" | tail -n +2 >"$TMP/actual"
check "the example's table, column for column" test_cmp "$TMP/expect" "$TMP/actual"

# --recover of a file that does not exist is an error, not "as it was".
"$VMTRACE" correlate --recover "$TMP/nonexistent.data" >"$TMP/r.out" 2>"$TMP/r.err"; rc=$?
check "--recover of a missing file: exit 3" test $rc = 3
check "--recover of a missing file: says so" grep -q "nonexistent.data: no such file" "$TMP/r.err"

if [ -w /dev/full ]; then
	"$VMTRACE" correlate -n "$TMP/$bad.data" >/dev/full 2>"$TMP/f.err"; rc=$?
	check "dry run > /dev/full: exit 1 (its output is lost)" test $rc = 1
	check "dry run > /dev/full: says stdout could not be written" grep -q "cannot write standard output" "$TMP/f.err"
	cp "$TMP/$bad.data" "$TMP/inplace.data"
	"$VMTRACE" correlate --in-place "$TMP/inplace.data" >/dev/full 2>"$TMP/i.err"; rc=$?
	check "--in-place > /dev/full: exit 0 (the correction is done)" test $rc = 0
	check "--in-place > /dev/full: says the file is corrected, the report lost" \
		grep -q "inplace.data: corrected; the report could not be written" "$TMP/i.err"
	"$VMTRACE" correlate -n --json "$TMP/inplace.data" >"$TMP/again.json" 2>/dev/null
	check "--in-place > /dev/full: the file is corrected (a new dry run finds no offset left)" \
		json_check "$TMP/again.json" 'j["vmcs"] and all(v["status"] == "no-offset" for v in j["vmcs"])' 
fi
finish
