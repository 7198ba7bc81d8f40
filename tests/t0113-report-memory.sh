#!/bin/sh
# vmtrace report and vmtrace timeline keep their memory flat: on recordings
# of the same real code repeated 4 and 32 times (tests/aux-repeat.py: a
# timeless per-thread synth recording's AUX data over and over, each copy
# padded to 1 MiB with PAD packets, cheap to decode: 4 and 32 MiB files)
# the report of the 8 times longer trace needs at most 8 MiB more peak RSS,
# and so does the timeline - nothing is kept per branch, exit or slice (what
# grows is bounded by the code: aggregates per function and vCPU, the code
# images' pages the instruction counts touch; and latencies, exact up to
# 65536 exits per vCPU, then a fixed histogram; exit groups: analyze.h).  The longer report counts
# 8 times the exits and instructions (within 5%: the seams between copies
# differ): it did decode it all.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
code_recording base 64K --vcpus 2 --timeless --psb-period 1 --seed 11 || finish
for n in 4 32; do
	cp -r "$TMP/base.data" "$TMP/x$n.data" &&
		"$PYTHON3" "$top_srcdir/tests/aux-repeat.py" "$TMP/base.data/data" "$TMP/x$n.data/data" $n 1048576 ||
		fail "aux-repeat $n"
done
# rss OUT CMD...: CMD's peak RSS in KiB (-1: it failed; decode errors -
# report's exit 22, timeline's 3 - are expected: a copy's end meets the
# next one's PSB), stdout in OUT
rss() {
	rss_out=$1
	shift
	/usr/bin/time -f %M -o "$TMP/rss" "$@" >"$rss_out" 2>"$rss_out.err"
	rc=$?
	if [ $rc -eq 0 ] || [ $rc -eq 22 ] || [ $rc -eq 3 ]; then tail -1 "$TMP/rss"; else echo -1; fi
}
for n in 4 32; do
	# shellcheck disable=SC2086
	eval "rep$n=\$(rss '$TMP/x$n.report' '$VMTRACE' report '$TMP/x$n.data' $G --json --top 1000000)"
	eval "tl$n=\$(rss '$TMP/x$n.tl' '$VMTRACE' timeline '$TMP/x$n.data' --guest '$GUEST_CODE' -o '$TMP/x$n.perfetto-trace')"
done
echo "# peak RSS KiB: report $rep4 / $rep32, timeline $tl4 / $tl32 (4 / 32 copies)"
check "report: 32 copies $rep32 KiB <= 4 copies $rep4 KiB + 8 MiB" test "$rep4" -gt 0 -a "$rep32" -gt 0 -a "$rep32" -le $((rep4 + 8192))
check "timeline: 32 copies $tl32 KiB <= 4 copies $tl4 KiB + 8 MiB" test "$tl4" -gt 0 -a "$tl32" -gt 0 -a "$tl32" -le $((tl4 + 8192))
"$PYTHON3" - "$TMP/x4.report" "$TMP/x32.report" >"$TMP/scale" 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def tot(r):
    return (sum(v["exits"] for v in r["vcpus"]), sum(v["guest_insns"] + v["host_insns"] for v in r["vcpus"]))
x, y = tot(a), tot(b)
print("exits, instructions %s -> %s" % (x, y))
sys.exit(0 if all(0 < p and abs(q - 8 * p) <= 0.05 * 8 * p for p, q in zip(x, y)) else 1)
PY
ck_rc=$?
check "report: 8 times the exits and instructions ($(head -1 "$TMP/scale"))" test $ck_rc -eq 0 || sed 's/^/#   /' "$TMP/scale"
finish
