#!/bin/sh
# vmtrace script on an injected recording (vmtrace inject): guest branches
# carry the guest thread running on their vCPU, as perf script prints them
# (-F ...,machine_pid,vcpu: "VM: 4000 VCPU:001 comm tid"), and as the guest's
# switch records say.
#
# Host: a synth recording of real kernel code (tests/code-lib.sh; per CPU,
# 2 vCPUs on 2 CPUs).  Guest: a REAL `perf record -a --switch-events` file
# of THIS host standing in for the guest's (as in t0100: no guest here runs
# perf fast enough for a test; its TIME_CONV made a no-kvmclock guest's by
# tests/perf-edit.py, its kernel MMAP moved to the guest code's _text), in a
# directory whose kcore_dir is the guest code - so the injected recording
# has kcore_dir__4000, from which perf takes the guest machine's kernel.
# The offset puts the guest's records from 5 ms before the host trace on,
# so every vCPU has had a guest switch-in before its first guest branch
# (perf 6.1 fails to decode guest code before that, with tid -1).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
[ "$(nproc)" -ge 2 ] || skip "needs 2 CPUs for a 2-vCPU stand-in guest file"
"$PERF" record -q -e cpu-clock -F 2000 -a -C 0-1 --sample-identifier --switch-events -o "$TMP/g0.data" -- \
	sh -c 'sleep 0.01; ls / >/dev/null; cat /proc/version >/dev/null; sleep 0.01' >/dev/null 2>&1 ||
	skip "perf record -a does not work here (perf_event_paranoid? not root?)"
make_code_dirs
text=0x$(awk '$3 == "_text" {print $1; exit}' "$GUEST_CODE/kallsyms")
mkdir -p "$TMP/gd"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g1.data" time-conv 10 341 0 1 &&
	"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g1.data" "$TMP/gd/data" kernel-mmap "$text" 0x7cffffff &&
	cp -r "$GUEST_CODE" "$TMP/gd/kcore_dir" || { echo "cannot build the guest directory"; exit 1; }
OFF=$("$PYTHON3" -c '
import re, subprocess, sys
out = subprocess.run([sys.argv[1], "script", "-i", sys.argv[2], "-D"], capture_output=True, text=True).stdout
t = next(int(m.group(1)) for m in re.finditer(r"^\d+ (\d+) 0x", out, re.M) if int(m.group(1)))
tsc = ((t // 341) << 10) + ((t % 341) << 10) // 341
print(hex((tsc - (0x100000000000 - 15000000)) % 2**64))' "$PERF" "$TMP/gd/data")

"$VMTRACE" synth -o "$TMP/h.data" --size 256K --seed 2 --per-cpu --vcpus 2 --cpus 2 --host-code "$HOST_CODE" \
	--guest-code "$GUEST_CODE" --offset "$OFF" 2>/dev/null
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/gd" -o "$TMP/v.data" --offset "$OFF" >/dev/null 2>&1
check "vmtrace inject: the guest's kcore_dir as kcore_dir__4000" test -f "$TMP/v.data/kcore_dir__4000/kcore"
"$VMTRACE" correlate --in-place "$TMP/v.data" >/dev/null 2>&1

F=comm,tid,cpu,time,ip,sym,symoff,dso,addr,machine_pid,vcpu
timeout 300 "$PERF" script -i "$TMP/v.data" --itrace=be -F $F >"$TMP/perf" 2>/dev/null
check "perf script -F ...,machine_pid,vcpu: exit 0" test $? -eq 0
"$VMTRACE" script "$TMP/v.data" --guest "$TMP/v.data/kcore_dir__4000" -F $F >"$TMP/vt" 2>"$TMP/vt.err"
check "vmtrace script -F ...,machine_pid,vcpu: exit 0" test $? -eq 0
"$VMTRACE" script "$TMP/v.data" -F $F >"$TMP/vt2" 2>/dev/null
check "without --guest: REC/kcore_dir__4000 is the guest kernel, the same output" cmp -s "$TMP/vt" "$TMP/vt2"
check "guest branches name guest threads (VM: 4000 VCPU:000 and VCPU:001)" \
	sh -c "grep -q '^VM: 4000 VCPU:000 ' '$TMP/vt' && grep -q '^VM: 4000 VCPU:001 ' '$TMP/vt'"
"$PERF" script -i "$TMP/v.data" --show-switch-events --itrace= --ns -F +machine_pid,+vcpu 2>/dev/null >"$TMP/switches"
"$PYTHON3" "$top_srcdir/tests/guest-threads-check.py" "$TMP/perf" "$TMP/vt" "$TMP/switches" >"$TMP/cmp" 2>&1
check "vmtrace = perf line for line (guest thread aside at switches), both = the guest switch records" test $? -eq 0
sed 's/^/# /' "$TMP/cmp"

"$VMTRACE" script "$TMP/v.data" --guest "$TMP/v.data/kcore_dir__4000" --json --guest-only >"$TMP/json" 2>/dev/null
check "--json: guest branches carry machine_pid 4000, guest_pid, guest_tid and guest_comm" "$PYTHON3" -c "
import json, sys
n = 0
for line in open('$TMP/json'):
    j = json.loads(line)
    if j.get('kind') == 'error' or 'machine_pid' not in j:
        continue
    assert j['machine_pid'] == 4000 and j['guest_tid'] >= 0 and 'guest_comm' in j and j['vcpu'] in (0, 1), j
    n += 1
assert n > 1000, n
"
finish
