#!/bin/sh
# vmtrace report on bad input and bad options: a missing kernel image is a
# usage error naming the command that provides it (as script), corrupt AUX
# data still gives a report - its health section counts the errors - and
# exit 22, a recording without the vCPU asked for exits 23, option errors
# exit 2 (as JSON under --json); --vcpu and --time select.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
code_recording rec 64K --vcpus 2 --psb-period 1 --seed 5 || finish
f=$TMP/rec.data

# --- images --------------------------------------------------------------
"$VMTRACE" report "$f" >"$TMP/out" 2>&1
check "no guest image: usage error naming vmtrace guest fetch" sh -c "test $? -eq 2 && grep -q 'vmtrace guest fetch' '$TMP/out'"
"$VMTRACE" report "$f" --guest "$TMP" >"$TMP/out" 2>&1
check "guest dir without kcore: usage error naming the file" sh -c "test $? -eq 2 && grep -q '$TMP/kcore is missing' '$TMP/out'"
"$VMTRACE" synth -o "$TMP/plain.data" --size 64K 2>/dev/null
# shellcheck disable=SC2086
"$VMTRACE" report "$TMP/plain.data" $G >"$TMP/out" 2>&1
check "no kcore_dir: usage error naming vmtrace record --kcore" sh -c "test $? -eq 2 && grep -q 'vmtrace record --kcore' '$TMP/out'"
# shellcheck disable=SC2086
"$VMTRACE" report "$TMP/missing.data" $G --kcore "$HOST_CODE/kcore" --kallsyms "$HOST_CODE/kallsyms" >"$TMP/out" 2>&1
check "missing recording: exit 3" test $? -eq 3

# --- corrupt AUX: 48 random bytes at 1/3 and 2/3 of every AUX payload ------
cp -r "$f" "$TMP/bad.data"
"$PYTHON3" - "$TMP/bad.data/data" <<'PY'
import random, struct, sys
d = bytearray(open(sys.argv[1], 'rb').read())
off, size = struct.unpack_from('<QQ', d, 40)
pos, rng = off, random.Random(7)
while pos < off + size:
    typ, misc, sz = struct.unpack_from('<IHH', d, pos)
    if typ == 71:                       # AUXTRACE: the payload follows
        n = struct.unpack_from('<Q', d, pos + 8)[0]
        for at in (n // 3, 2 * n // 3):
            d[pos + sz + at:pos + sz + at + 48] = bytes(rng.randrange(256) for _ in range(48))
        pos += sz + n
    else:
        pos += sz
open(sys.argv[1], 'wb').write(d)
PY
# shellcheck disable=SC2086
timeout 120 "$VMTRACE" report "$TMP/bad.data" $G --json >"$TMP/bad.json" 2>"$TMP/bad.err"
rc=$?
check "corrupt AUX: exit 22 (decode errors), not a crash or timeout (got $rc)" test $rc -eq 22
check "corrupt AUX: the error count on stderr" grep -q 'decode errors (decoding resumed at the next PSB' "$TMP/bad.err"
check "corrupt AUX: a report whose health counts the errors, per libipt code" \
	json_check "$TMP/bad.json" "j['health']['errors'] > 0 and sum(j['health']['error_codes'].values()) == j['health']['errors'] and j['vcpus']"
# shellcheck disable=SC2086
timeout 120 "$VMTRACE" report "$TMP/bad.data" $G >"$TMP/bad.txt" 2>&1
check "corrupt AUX, text: the health section names the errors" sh -c \
	"grep -q '^  branches [0-9]*, decode errors [1-9]' '$TMP/bad.txt' && grep -q '^  [0-9]* x ' '$TMP/bad.txt'"

# --- selection -------------------------------------------------------------
# shellcheck disable=SC2086
"$VMTRACE" report "$f" $G --json --top 1000000 >"$TMP/all.json"
# shellcheck disable=SC2086
"$VMTRACE" report "$f" $G --json --top 1000000 --vcpu 1 >"$TMP/v1.json"
"$PYTHON3" - "$TMP/all.json" "$TMP/v1.json" >"$TMP/sel.check" 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
av = {v['vcpu']: v for v in a['vcpus']}
assert [v['vcpu'] for v in b['vcpus']] == [1], b['vcpus']
v = b['vcpus'][0]
for k in ('exits', 'guest', 'host', 'latency'):
    assert v[k] == av[1][k], k
mine = sorted((f['sym'], f['self'], f['inclusive']) for f in a['functions'] if f['vcpu'] == 1)
only = sorted((f['sym'], f['self'], f['inclusive']) for f in b['functions'] if f['vcpu'] == 1)
assert mine == only, 'functions'
print('ok')
PY
check "--vcpu 1: vCPU 1's numbers, as in the full report" grep -q '^ok' "$TMP/sel.check" || sed 's/^/#   /' "$TMP/sel.check"
# --time: the middle third of vCPU 0's wall time
range=$("$PYTHON3" -c 'import json,sys
v = json.load(open(sys.argv[1]))["vcpus"][0]
a, b = v["first"] + v["wall"] // 3, v["first"] + 2 * v["wall"] // 3
print("%d.%09d,%d.%09d %d %d" % (a // 10**9, a % 10**9, b // 10**9, b % 10**9, a, b))' "$TMP/all.json")
# shellcheck disable=SC2086
set -- $range
# shellcheck disable=SC2086
"$VMTRACE" report "$f" $G --json --time "$1" >"$TMP/t.json"
all_exits=$("$PYTHON3" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vcpus"][0]["exits"])' "$TMP/all.json")
check "--time A,B ($1): fewer exits, the longest in range, mode time within it" json_check "$TMP/t.json" \
	"0 < j['vcpus'][0]['exits'] < $all_exits and all($2 <= x['exit_time'] <= $3 for v in j['vcpus'] for x in v['longest']) and j['vcpus'][0]['guest'] + j['vcpus'][0]['host'] <= $3 - $2"

# --- options ---------------------------------------------------------------
# shellcheck disable=SC2086
"$VMTRACE" report "$f" $G --vcpu 7 >"$TMP/out" 2>&1
check "--vcpu 7 (no such vCPU): exit 23 naming it" sh -c "test $? -eq 23 && grep -q 'CPU 7/KVM' '$TMP/out'"
code_recording tl 64K --vcpus 1 --timeless || finish
# shellcheck disable=SC2086
"$VMTRACE" report "$TMP/tl.data" $G --time 1,2 >"$TMP/out" 2>&1
check "--time on a timeless recording: usage error" sh -c "test $? -eq 2 && grep -q timeless '$TMP/out'"
# shellcheck disable=SC2086
"$VMTRACE" report "$TMP/tl.data" $G >"$TMP/tl.txt" 2>&1
check "timeless: instruction counts" sh -c "test $? -eq 0 && grep -q '^vCPUs (insns' '$TMP/tl.txt'"
for bad in "--top 0" "--time 2,1" "--time x" "--jobs -1" "--guest $TMP --guestkallsyms $GUEST_CODE/kallsyms" "--kcore x"; do
	# shellcheck disable=SC2086
	"$VMTRACE" report "$f" $bad >"$TMP/out" 2>&1
	check "$bad: usage error" test $? -eq 2
done
"$VMTRACE" report "$f" --top 0 --json >"$TMP/out" 2>/dev/null
check "usage error under --json: a JSON error object, exit status 2" json_check "$TMP/out" "j['exit_status'] == 2"
"$VMTRACE" report >"$TMP/out" 2>&1
check "no REC: usage error" test $? -eq 2
finish
