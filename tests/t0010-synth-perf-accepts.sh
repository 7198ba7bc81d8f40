#!/bin/sh
# perf accepts every kind of file vmtrace synth writes: perf script -D shows
# no bad packets and the same number of TSC/PIP/VMCS packets vmtrace counts;
# perf report --header-only works.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python

while read -r name opts; do
	[ -n "$name" ] || continue
	# (the sanitizer suite: four rows - perf's dump takes the time there)
	asan_skip "$name" dir nomtc tip-dense exit-heavy user-exits && continue
	f="$TMP/$name.data"
	# shellcheck disable=SC2086
	"$VMTRACE" synth -o "$f" --truth "$TMP/$name.json" --size 1M $opts 2>/dev/null || { fail "$name: synth"; continue; }
	[ -d "$f" ] && data="$f/data" || data="$f"
	timeout 120 "$PERF" script -D -i "$f" >"$TMP/dump" 2>"$TMP/dump.err"
	check "$name: perf script -D exit 0" test $? -eq 0
	check "$name: no Bad packet" sh -c "! grep -q 'Bad packet' '$TMP/dump'"
	check "$name: no perf errors" sh -c "! grep -qi 'error\|failed\|invalid' '$TMP/dump.err'"
	# TSC packet count in perf's dump == synth's ground truth
	want=$("$PYTHON3" -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print(t["guest_tsc_packets"]+t["host_tsc_packets"])' "$TMP/$name.json")
	got=$(grep -c ' TSC 0x' "$TMP/dump")
	check "$name: perf sees $want TSC packets (got $got)" test "$got" = "$want"
	timeout 60 "$PERF" report --header-only -i "$f" >"$TMP/hdr" 2>&1
	check "$name: perf report --header-only" sh -c "grep -q 'os release : 6.1.0-synthetic' '$TMP/hdr' && grep -q 'intel_pt\|type = 8\|type: 8' '$TMP/hdr'"
done <<'M'
thread        --vcpus 2
cpu           --per-cpu --vcpus 4 --cyc
dir           --vcpus 2 --dir
timeless      --vcpus 2 --timeless --cyc
nomtc         --vcpus 1 --no-mtc
two-vms       --vms 2 --vcpus 2 --per-cpu
tip-dense     --vcpus 2 --tip-percent 90
exit-heavy    --vcpus 2 --host-steps 6
user-exits    --vcpus 2 --user-exit-percent 60
M

# the packet-mix knobs do what they say, as perf counts the packets
# the mix knobs' packets (the sanitizer suite leaves these to the normal
# build: five more synth runs, each dumped by perf)
count() { grep -cE "^\. +[0-9a-f]+: +([0-9a-f]{2} )+ +$2( |\$)" "$TMP/$1.dump"; }
if ! asan_build; then
	for m in "base --vcpus 2" "tip --vcpus 2 --tip-percent 90" "notip --vcpus 2 --tip-percent 0" \
		 "exits --vcpus 2 --host-steps 6" "user --vcpus 2 --user-exit-percent 60"; do
		set -- $m
		nm=$1; shift
		"$VMTRACE" synth -o "$TMP/$nm.data" --size 1M "$@" 2>/dev/null
		timeout 120 "$PERF" script -D -i "$TMP/$nm.data" >"$TMP/$nm.dump" 2>/dev/null
	done
	check "--tip-percent 90: more TIPs than TNTs (default: fewer)" \
		sh -c "[ $(count tip TIP) -gt $(count tip TNT) ] && [ $(count base TIP) -lt $(count base TNT) ]"
	check "--tip-percent 0: TIPs only at VM entries and exits" \
		sh -c "[ $(count notip TIP) -lt $(( $(count notip TNT) / 20 )) ]"
	check "--host-steps 6: over 4x the VM exits (FUP) of the default" sh -c "[ $(count exits FUP) -gt $(( 4 * $(count base FUP) )) ]"
	check "--user-exit-percent 60: TIP.PGD and TIP.PGE in pairs (none by default)" \
		sh -c "[ $(count user TIP.PGD) -gt 100 ] && [ $(count user TIP.PGD) = $(count user TIP.PGE) ] && [ $(count base TIP.PGD) = 0 ]"
fi

# perf decodes a directory as fully as a file (a directory with
# HEADER_DIR_FORMAT is read as a --threads recording whose AUX decoders
# perf 6.1 never flushes: it decoded next to nothing)
for mode in "" "--timeless"; do
	"$VMTRACE" synth -o "$TMP/f.data" --vcpus 2 --size 1M $mode >/dev/null 2>&1
	"$VMTRACE" synth -o "$TMP/d.data" --dir --vcpus 2 --size 1M $mode >/dev/null 2>&1
	nf=$(timeout 120 "$PERF" script -i "$TMP/f.data" --itrace=p 2>/dev/null | wc -l)
	nd=$(timeout 120 "$PERF" script -i "$TMP/d.data" --itrace=p 2>/dev/null | wc -l)
	check "perf script decodes a directory like a file ${mode:-(timed)}: $nd == $nf events" sh -c "[ $nf -gt 10 ] && [ $nd = $nf ]"
	rm -rf "$TMP/f.data" "$TMP/d.data"
done
finish
