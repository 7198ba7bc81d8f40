#!/bin/sh
# correlate: documented exit codes and messages for traces it cannot use.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

run() { "$VMTRACE" correlate --dry-run "$@" >"$TMP/out" 2>"$TMP/err"; echo $?; }

"$VMTRACE" synth -o "$TMP/timeless.data" --timeless --cyc --size 256K 2>/dev/null
check "timeless trace: exit 4" test "$(run "$TMP/timeless.data")" = 4
check "timeless trace: says no time information + what to do" grep -q "no time information.*timeless" "$TMP/err"
check "timeless trace: one line" test "$(wc -l <"$TMP/err")" = 1

"$VMTRACE" synth -o "$TMP/nomtc.data" --no-mtc --size 256K 2>/dev/null
check "no MTC: exit 4" test "$(run "$TMP/nomtc.data")" = 4
check "no MTC: says MTC" grep -q "MTC packets were not enabled" "$TMP/err"

"$VMTRACE" synth -o "$TMP/host.data" --guest-percent 0 --size 256K 2>/dev/null
rc=$(run "$TMP/host.data")
check "guest-less trace: its VMCS has no offset -> exit 5 ($rc)" test "$rc" = 5
check "guest-less trace: STATUS undetermined" grep -q "undetermined" "$TMP/out"

"$VMTRACE" synth -o "$TMP/ok.data" --vcpus 2 --size 512K --truth "$TMP/ok.json" 2>/dev/null
check "good trace: exit 0" test "$(run "$TMP/ok.data")" = 0
check "good trace: table has 2 ok VMCS rows" test "$(grep -c ' ok$' "$TMP/out")" = 2
check "good trace: vCPU names come from CPU n/KVM" grep -q "^0x12340 *0 (tid 4010)" "$TMP/out"
check "good trace: nothing on stderr" test ! -s "$TMP/err"
check "--json parses and has 2 VMCS" sh -c '"$VMTRACE" correlate --dry-run --json "$TMP/ok.data" | "$PYTHON3" -c "import json,sys; d=json.load(sys.stdin); assert len(d[\"vmcs\"])==2 and all(v[\"status\"]==\"ok\" for v in d[\"vmcs\"])"'
check "directory input (DIR/data) works" sh -c '"$VMTRACE" synth -o "$TMP/d" --dir --size 256K 2>/dev/null && "$VMTRACE" correlate --dry-run "$TMP/d" >/dev/null'
check "--jobs 1 and --jobs 2 print the same" sh -c '"$VMTRACE" correlate --dry-run -J 1 "$TMP/ok.data" >"$TMP/j1" && "$VMTRACE" correlate --dry-run -J 2 "$TMP/ok.data" >"$TMP/j2" && cmp -s "$TMP/j1" "$TMP/j2"'
finish
