#!/bin/sh
# vmtrace report's decode health counts lost data, overall and per vCPU,
# against synth's ground truth: OVF packets (synth --ovf-every N writes an
# OVF and the FUP where tracing resumes, as Intel PT does when its internal
# buffer overflowed; the decoder marks the branch after them) and
# PERF_RECORD_AUX records flagged TRUNCATED (synth --aux-truncated-every N),
# on real-code recordings timeless and timed per thread, and timed per CPU
# (the vCPU from the thread the switch sideband names); perf sees the same
# OVFs (but one in a thousand: not yet understood)
# ("Overflow packet" errors), and vmtrace script prints them as perf does
# (no decode error), as it prints perf's "Lost trace data" line of each
# truncated record; a recording without lost data counts none.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
while read -r name size opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	code_recording "$name" "$size" --truth "$TMP/$name.json" $opts || continue
	# shellcheck disable=SC2086
	"$VMTRACE" report "$TMP/$name.data" $G --json >"$TMP/$name.report" 2>"$TMP/$name.err"
	check "$name: vmtrace report --json exit 0" test $? -eq 0 || sed 's/^/#   /' "$TMP/$name.err"
	"$PYTHON3" - "$TMP/$name.json" "$TMP/$name.report" >"$TMP/$name.cmp" 2>&1 <<'PY'
import json, sys
truth, rep = (json.load(open(p)) for p in sys.argv[1:3])
h = rep["health"]
want = {v["vcpu"]: (v["overflows"], v["aux_truncated"]) for v in truth["vcpus"]}
got = {v["vcpu"]: (v["overflows"], v["aux_truncated"]) for v in h["vcpus"]}
bad = []
for vcpu, (ovf, trunc) in want.items():
    g = got.get(vcpu, (0, 0))
    if g != (ovf, trunc):
        bad.append("vCPU %d: OVF %d, truncated %d; truth %d, %d" % (vcpu, g[0], g[1], ovf, trunc))
if got.get(-1, (0, 0)) != (0, 0):
    bad.append("lost data outside vCPU threads: %s" % (got[-1],))
tot = (sum(o for o, _ in want.values()), sum(t for _, t in want.values()))
if (h["overflows"], h["aux_truncated"]) != tot:
    bad.append("overall OVF %d, truncated %d; truth %d, %d" % (h["overflows"], h["aux_truncated"], *tot))
if h["aux_records"] != h["aux_truncated"] or h["aux_collision"] or h["aux_partial"] or h["lost_records"]:
    bad.append("AUX records %d (synth writes only truncated ones), collision %d, partial %d, lost %d"
               % (h["aux_records"], h["aux_collision"], h["aux_partial"], h["lost_records"]))
if h["errors"] or not all(v["branches"] for v in h["vcpus"]):
    bad.append("decode errors %d, or a vCPU without branches" % h["errors"])
print("OVF %d, truncated %d" % tot if not bad else "\n".join(bad))
print(tot[0])
sys.exit(1 if bad else 0)
PY
	ck_rc=$?
	check "$name: lost data per vCPU = ground truth ($(head -1 "$TMP/$name.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$name.cmp"
	# truncated AUX records: perf's "Lost trace data" lines (since session
	# 37), in perf's order, one per record of the truth - where perf puts
	# them: by the record's time among the branches, before all on a
	# timeless recording - no decode error
	if [ -n "$PERF" ]; then
		ft=comm,tid,cpu,time,ip,sym,symoff,dso,addr
		case " $opts " in *" --timeless "*) ft=comm,tid,cpu,ip,sym,symoff,dso,addr ;; esac
		# shellcheck disable=SC2086
		"$PERF" script -i "$TMP/$name.data" $G --itrace=be -F $ft >"$TMP/$name.pbe" 2>/dev/null
		# shellcheck disable=SC2086
		"$VMTRACE" script "$TMP/$name.data" $G --itrace=be -F $ft >"$TMP/$name.vbe" 2>"$TMP/$name.vbe.err"
		rc=$?
		trunc=$("$PYTHON3" -c 'import json,sys; print(sum(v["aux_truncated"] for v in json.load(open(sys.argv[1]))["vcpus"]))' \
			"$TMP/$name.json")
		check "$name: $trunc 'Lost trace data' lines, perf's in its order; exit 0, nothing on stderr" \
			sh -c "test $rc -eq 0 && ! test -s '$TMP/$name.vbe.err' &&
				grep 'Lost trace data' '$TMP/$name.pbe' >'$TMP/$name.plost'; grep 'Lost trace data' '$TMP/$name.vbe' >'$TMP/$name.vlost';
				test \$(wc -l <'$TMP/$name.vlost') -eq $trunc && cmp -s '$TMP/$name.plost' '$TMP/$name.vlost'" ||
			diff "$TMP/$name.plost" "$TMP/$name.vlost" | head -5 | sed 's/^/#   /'
		check "$name: each where perf puts it (by its time among the branches; timeless: all first)" \
			"$PYTHON3" - "$TMP/$name.vbe" "$trunc" "$ft" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
lost = [i for i, l in enumerate(lines) if 'Lost trace data' in l]
bad = []
if ',time,' not in sys.argv[3]:
    bad = [i for k, i in enumerate(lost) if i != k]           # timeless: before every branch
else:
    def t(l):
        m = re.search(r' (\d+\.\d{6}): ', l)
        return float(m.group(1)) if m else None
    for i in lost:
        lt = float(re.search(r' time (\d+\.\d+) ', lines[i]).group(1))
        before = next((t(l) for l in reversed(lines[:i]) if t(l) is not None), 0)
        after = next((t(l) for l in lines[i + 1:] if t(l) is not None), 1e18)
        if not (before <= lt + 1e-6 and lt < after + 1e-6):
            bad.append(i)
print(len(lost), 'lines,', len(bad), 'misplaced', bad[:3])
sys.exit(1 if bad or len(lost) != int(sys.argv[2]) else 0)
PY
	fi
	# ... and nothing else: the instruction flow and call stacks go on
	# across them (the same recording without the TRUNCATED flags prints
	# the same, those lines aside)
	case " $opts " in *" --aux-truncated-every "*)
		rm -rf "$TMP/$name.u" && cp -r "$TMP/$name.data" "$TMP/$name.u"
		"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/$name.data/data" "$TMP/$name.u/data" aux-untruncate
		for o in --insn-trace --call-ret-trace; do
			# shellcheck disable=SC2086
			"$VMTRACE" script "$TMP/$name.data" $G $o 2>/dev/null | grep -v 'Lost trace data' >"$TMP/$name.t$o"
			# shellcheck disable=SC2086
			"$VMTRACE" script "$TMP/$name.u" $G $o >"$TMP/$name.u$o" 2>/dev/null
			check "$name $o: the lines of the same recording without TRUNCATED flags ($(wc -l <"$TMP/$name.u$o"))" \
				sh -c "test -s '$TMP/$name.u$o' && ! grep -q 'Lost trace data' '$TMP/$name.u$o' &&
					cmp -s '$TMP/$name.t$o' '$TMP/$name.u$o'"
		done ;;
	esac
	case " $opts " in
	*" --ovf-every "*)
		[ -n "$PERF" ] || continue
		ovf=$(tail -1 "$TMP/$name.cmp")
		# shellcheck disable=SC2086
		"$PERF" script -i "$TMP/$name.data" $G --itrace=e 2>/dev/null | grep 'Overflow packet' | sort >"$TMP/$name.povf"
		perf_ovf=$(wc -l <"$TMP/$name.povf")
		check "$name: perf reports the same $ovf overflows, within 1 in 500 ($perf_ovf)" \
			test "$ovf" -gt 0 -a "$perf_ovf" -le "$ovf" -a $((ovf - perf_ovf)) -le $((ovf / 500))
		# vmtrace script prints them as perf does (since session 37): an
		# error line per OVF, at the IP where tracing resumed, at the OVF's
		# time - yet no decode error (exit 0, no count on stderr)
		# shellcheck disable=SC2086
		"$VMTRACE" script "$TMP/$name.data" $G --itrace=e >"$TMP/$name.e" 2>"$TMP/$name.e.err"
		rc=$?
		grep 'Overflow packet' "$TMP/$name.e" | sort >"$TMP/$name.vovf"
		check "$name: vmtrace script --itrace=e: exit 0, nothing on stderr, $ovf 'Overflow packet' lines ($(wc -l <"$TMP/$name.vovf")), perf's $perf_ovf among them" \
			sh -c "test $rc -eq 0 && ! test -s '$TMP/$name.e.err' && test \$(wc -l <'$TMP/$name.vovf') -eq $ovf &&
				test -z \"\$(comm -23 '$TMP/$name.povf' '$TMP/$name.vovf')\"" ||
			comm -23 "$TMP/$name.povf" "$TMP/$name.vovf" | head -5 | sed 's/^/#   perf only: /'
		# shellcheck disable=SC2086
		"$VMTRACE" script "$TMP/$name.data" $G --itrace=e --json >"$TMP/$name.ej" 2>/dev/null
		check "$name: --json: $ovf objects with overflow true, code 7, no libipt code (none is libipt's error)" \
			"$PYTHON3" -c "
import json, sys
o = [j for j in map(json.loads, open('$TMP/$name.ej')) if j.get('overflow')]
sys.exit(0 if len(o) == $ovf and all(j['kind'] == 'error' and j['code'] == 7 and 'libipt_code' not in j for j in o) else 1)" ;;
	esac
done <<'CONFIGS'
thread-2vcpu-timeless 128K --vcpus 2 --timeless --ovf-every 400 --aux-truncated-every 3 --buffer-size 8K
thread-4vcpu-timed    256K --vcpus 4 --psb-period 0 --ovf-every 300 --aux-truncated-every 2 --buffer-size 8K
cpu-4vcpu-2cpu-timed  256K --vcpus 4 --per-cpu --cpus 2 --psb-period 0 --ovf-every 300 --aux-truncated-every 1
thread-2vcpu-clean    64K  --vcpus 2 --psb-period 1
CONFIGS

# the text report shows the same
"$VMTRACE" report "$TMP/thread-2vcpu-timeless.data" $G >"$TMP/text" 2>&1
ovf=$("$PYTHON3" -c 'import json,sys; print(json.load(open(sys.argv[1]))["health"]["overflows"])' \
	"$TMP/thread-2vcpu-timeless.report")
check "text report: '$ovf overflow packets' in the health section" grep -q "lost data: $ovf overflow packets" "$TMP/text"
check "text report: the per-vCPU lost data table" grep -q '^VCPU  *BRANCHES  *ERRORS  *BREAKS  *OVF' "$TMP/text"
finish
