#!/bin/sh
# vmtrace script prints the same bytes on every run, whatever the number of
# decoding threads: the queue threads share libipt's block cache, and where
# a block ends depends on which thread filled the cache first - no printed
# field may depend on that (aux_offset did: the decoder's position was
# taken after the next block).  A timed recording of real kernel code, four
# per-thread queues: 5 runs with --jobs 2, one with --jobs 1, JSON (every
# field, aux_offset included) and perf's text lines; the same with
# corrupt AUX data (errors, resyncs).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
t=$TMP/rec.data
"$VMTRACE" synth -o "$t" --size 48K --vcpus 4 --psb-period 0 --seed 7 --host-code "$HOST_CODE" \
	--guest-code "$GUEST_CODE" >/dev/null 2>&1 && "$VMTRACE" correlate --in-place "$t" >/dev/null 2>&1 ||
	{ fail "timed recording"; finish; }

"$VMTRACE" script "$t" $G --json --jobs 1 >"$TMP/j1.json" 2>&1
check "--json --jobs 1: exit 0, branches of four vCPUs" sh -c "test $? -eq 0 && test \"\$(grep -o '\"vcpu\": [0-9]*' '$TMP/j1.json' | sort -u | wc -l)\" -eq 4"
for i in 1 2 3 4 5; do
	"$VMTRACE" script "$t" $G --json --jobs 2 >"$TMP/j2.json" 2>&1
	check "--json --jobs 2, run $i: the --jobs 1 output byte for byte (aux_offset too)" test_cmp "$TMP/j1.json" "$TMP/j2.json"
done
"$VMTRACE" script "$t" $G --jobs 1 >"$TMP/t1.out" 2>&1
"$VMTRACE" script "$t" $G --jobs 2 >"$TMP/t2.out" 2>&1
check "text lines: --jobs 2 prints what --jobs 1 prints" test_cmp "$TMP/t1.out" "$TMP/t2.out"
# power events (psb, cbr) carry an aux_offset too: where the PSB, and the
# CBR packet, were read
p=$TMP/power.data
"$VMTRACE" synth -o "$p" --size 48K --vcpus 4 --psb-period 0 --seed 7 --cbr-vary --host-code "$HOST_CODE" \
	--guest-code "$GUEST_CODE" >/dev/null 2>&1 && "$VMTRACE" correlate --in-place "$p" >/dev/null 2>&1 ||
	fail "timed recording with changing CBR"
"$VMTRACE" script "$p" $G --itrace=bep --json --jobs 1 >"$TMP/p1.json" 2>&1
check "--itrace=bep --json: psb and cbr events" sh -c "grep -q '\"kind\": \"psb\"' '$TMP/p1.json' && grep -q '\"kind\": \"cbr\"' '$TMP/p1.json'"
for i in 1 2 3; do
	"$VMTRACE" script "$p" $G --itrace=bep --json --jobs 2 >"$TMP/p2.json" 2>&1
	check "--itrace=bep --json --jobs 2, run $i: the --jobs 1 output byte for byte" test_cmp "$TMP/p1.json" "$TMP/p2.json"
done

# corrupt AUX (32 random bytes at 7 places in each buffer): the decode
# errors and resyncs, with their offsets, are repeatable too
cp -r "$t" "$TMP/bad.data"
"$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/bad.data/data"
"$VMTRACE" script "$TMP/bad.data" $G --json --jobs 1 >"$TMP/b1.json" 2>/dev/null
check "corrupt AUX, --jobs 1: exit 3, decode errors" sh -c "test $? -eq 3 && grep -q '\"kind\": \"error\"' '$TMP/b1.json'"
"$VMTRACE" script "$TMP/bad.data" $G --json --jobs 2 >"$TMP/b2.json" 2>/dev/null
check "corrupt AUX, --jobs 2: the --jobs 1 output byte for byte" test_cmp "$TMP/b1.json" "$TMP/b2.json"

# aux_offset is where the decoder stood after the packet that decided the
# branch: it never goes back within a queue (a thread here)
"$PYTHON3" - "$TMP/j1.json" >"$TMP/mono" 2>&1 <<'PY'
import json, sys
last, n = {}, 0
for l in open(sys.argv[1]):
    e = json.loads(l)
    off = int(e["aux_offset"], 16)
    assert off >= last.get(e["tid"], 0), (e, last)
    last[e["tid"]] = off
    n += 1
assert n > 1000 and len(last) == 4 and min(last.values()) > 0, (n, last)
print("ok", n)
PY
check "aux_offset never decreases within a queue ($(tail -1 "$TMP/mono"))" grep -q '^ok' "$TMP/mono"
finish
