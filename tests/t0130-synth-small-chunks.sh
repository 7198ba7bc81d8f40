#!/bin/sh
# Per-CPU real-code recordings in small AUX chunks (8, 16 and 64 KiB
# buffers) decode with no error in vmtrace script and perf script, and
# both equal synth's ground truth.  synth makes the queues' chunks in
# turns, each reaching past where the others are in time; a vCPU that
# moved to another CPU had its guest walk continued there while the CPU
# that ran it before still walked it in its next chunk - two traces with
# halves of one walk (13 vmtrace and 17 perf errors at 8 KiB).  Also the
# truth itself: a vCPU's guest branches stay in one queue from a VM entry
# to the next.  perf needs host time: corrected with the truth's offset
# (per-CPU real code has PSB+ mostly at vCPU switches, in the host: a VMCS
# may have no guest TSC packet, and correlate rightly calls it
# undetermined - checked: undetermined exactly where the truth has none).
# The sanitizer build runs the 8 and 16 KiB rows with 4 vCPUs (asan_skip).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
make_code_dirs

FIELDS=comm,tid,cpu,time,ip,sym,symoff,dso,addr
while read -r name opts; do
	[ -n "$name" ] || continue
	asan_skip "$name" cpu-3vcpu-2cpu-16k cpu-4vcpu-2cpu-64k && continue
	f=$TMP/$name.data
	# shellcheck disable=SC2086
	"$VMTRACE" synth -o "$f" --per-cpu --host-code "$HOST_CODE" --guest-code "$GUEST_CODE" \
		--branches "$TMP/$name.branches" -t "$TMP/$name.json" $opts 2>/dev/null || { fail "$name: synth"; continue; }
	check "$name: the truth moves a vCPU's guest walk to another CPU only at a VM entry" \
		awk '!/^#/ && $6 == "guest" { if (q[$7] != "" && q[$7] != $1) exit 1; q[$7] = $1 }
		     $3 == "vmentry" { q[$7] = "" }' "$TMP/$name.branches"
	check "$name: a vCPU runs on several CPUs" sh -c \
		"awk '!/^#/ && \$3 == \"vmentry\" { print \$1, \$7 }' '$TMP/$name.branches' | sort -u |
		 awk '{ n[\$2]++ } END { for (v in n) if (n[v] > 1) m++; exit !m }'"
	"$VMTRACE" script "$f" --guestkallsyms "$GUEST_CODE/kallsyms" --itrace=e --json >"$TMP/$name.err.json" 2>&1
	check "$name: vmtrace script: no decode error" test ! -s "$TMP/$name.err.json" ||
		head -3 "$TMP/$name.err.json" | sed 's/^/#   /'
	"$VMTRACE" correlate --dry-run --json "$f" >"$TMP/$name.dry" 2>/dev/null
	check "$name: correlate's guest TSC packets per VMCS = truth's, undetermined where 0" "$PYTHON3" -c '
import json, sys
d, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
got = {int(x["vmcs"], 16): (x["guest_tsc_packets"], x["status"] == "undetermined") for x in d["vmcs"]}
want = {int(v["vmcs"], 16): (v["guest_tsc_packets"], v["guest_tsc_packets"] == 0) for v in t["vcpus"]}
sys.exit(got != want and "%r != %r" % (got, want))' "$TMP/$name.dry" "$TMP/$name.json"
	off=$("$PYTHON3" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vms"][0]["tsc_offset56"])' \
		"$TMP/$name.json")
	"$VMTRACE" correlate --in-place --offset "$off" "$f" >"$TMP/$name.corr" 2>&1
	check "$name: vmtrace correlate --in-place --offset (the truth's)" test $? -eq 0
	timeout 300 "$PERF" script -i "$f" --guestkallsyms "$GUEST_CODE/kallsyms" --itrace=be -F "$FIELDS" \
		>"$TMP/$name.perf" 2>"$TMP/$name.perf.err"
	check "$name: perf script exit 0" test $? -eq 0
	check "$name: perf: no out of order events" sh -c "! grep -q 'out of order' '$TMP/$name.perf.err'"
	check "$name: perf script: no decode error" sh -c "! grep -q 'instruction trace error' '$TMP/$name.perf'"
	"$VMTRACE" script "$f" --guestkallsyms "$GUEST_CODE/kallsyms" >"$TMP/$name.vt" 2>"$TMP/$name.vt.err"
	check "$name: vmtrace script exit 0" test $? -eq 0
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time "$TMP/$name.perf" "$TMP/$name.vt" "$TMP/$name.branches" \
		--per-cpu >"$TMP/$name.cmp" 2>&1
	ck_rc=$?
	check "$name: vmtrace = perf = ground truth ($(head -1 "$TMP/$name.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$name.cmp" | head -40
done <<'CONFIGS'
cpu-4vcpu-2cpu-8k     --vcpus 4 --cpus 2 --buffer-size 8K --size 96K --psb-period 0
cpu-4vcpu-2cpu-16k    --vcpus 4 --cpus 2 --buffer-size 16K --size 128K --psb-period 1 --seed 2
cpu-3vcpu-2cpu-16k    --vcpus 3 --cpus 2 --buffer-size 16K --size 96K --psb-period 0
cpu-4vcpu-2cpu-64k    --vcpus 4 --cpus 2 --buffer-size 64K --size 192K --psb-period 0 --seed 4
CONFIGS
finish
