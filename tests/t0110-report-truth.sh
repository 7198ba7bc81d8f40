#!/bin/sh
# vmtrace report against synth's ground truth: on recordings of real kernel
# code (timed after correction and timeless; per thread and per CPU; 1, 2 and
# 4 vCPUs) every number tests/report-truth.py recomputes from the truth
# (QUEUE TID KIND FROM TO WHERE VCPU INSNS RET: the branches, the
# instructions run, the calls' return addresses) equals the report's - VM
# exits and their latencies per vCPU (count, percentiles, max, the longest
# ones), guest/host time, exits per handler, every function's calls, self
# and inclusive time and instructions, the guest's first calls in order,
# syscalls.  The branch order and times are the decoder's (script --json).
# The sanitizer build leaves out the 128K timeless and the 256K per-CPU
# rows (asan_skip: the other four have every mode).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
while read -r name size opts; do
	[ -n "$name" ] || continue
	asan_skip "$name" thread-4vcpu-timeless cpu-4vcpu-2cpu-timed && continue
	# shellcheck disable=SC2086
	code_recording "$name" "$size" $opts || continue
	report_truth "$name"
done <<'CONFIGS'
thread-1vcpu-timeless   64K  --vcpus 1 --timeless
thread-4vcpu-timeless   128K --vcpus 4 --timeless --seed 3
thread-1vcpu-timed      64K  --vcpus 1 --psb-period 1 --seed 7
thread-4vcpu-timed-cyc  256K --vcpus 4 --cyc
cpu-2vcpu-2cpu-timed    64K  --vcpus 2 --per-cpu --cpus 2 --psb-period 0
cpu-4vcpu-2cpu-timed    256K --vcpus 4 --per-cpu --cpus 2 --psb-period 0
CONFIGS

# the text report: its sections, and the same numbers as the JSON
f=$TMP/thread-1vcpu-timed.data
# shellcheck disable=SC2086
"$VMTRACE" report "$f" $G >"$TMP/text" 2>&1
check "text report: exit 0" test $? -eq 0
for s in 'vCPUs (ns' 'VM exits by host handler' 'Longest VM exits' 'Top guest kernel functions' \
	'Top host functions' 'First calls of guest functions' 'Guest system calls' 'Decode health'; do
	check "text report: section '$s'" grep -q "^$s" "$TMP/text"
done
exits=$("$PYTHON3" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vcpus"][0]["exits"])' "$TMP/thread-1vcpu-timed.report")
check "text report: vCPU 0's $exits exits as in the JSON" sh -c "grep -A1 '^VCPU  *TID' '$TMP/text' | grep -q '^0 .* $exits '"
finish
