#!/bin/sh
# vmtrace script's progress line on stderr: with --progress always, else
# only on a terminal while the output goes elsewhere (stderr a pty and
# stdout a file; not when both are terminals, nor when neither is).  The
# share grows to 100% at the end, the output is the same as without it
# (text, call trace, JSON).  report's, timeline's and correlate's the same
# way (timeline and correlate -o write OUT: on a terminal whatever stdout
# is); correlate's counts the AUX bytes its decoders read; inject's, the
# AUX bytes of its offsets' search, then REC's bytes it merged.  $VMTRACE_PROGRESS_MS=1: an update every
# millisecond, so a short run shows several.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs
code_recording rec 256K --vcpus 4 --psb-period 1 || finish
r=$TMP/rec.data
G="--guestkallsyms $GUEST_CODE/kallsyms"

# shellcheck disable=SC2086
"$VMTRACE" script "$r" $G >"$TMP/branches" 2>"$TMP/plain.err"
check "without --progress, stderr no terminal: nothing on it" test ! -s "$TMP/plain.err"
cp "$TMP/branches" "$TMP/plain"

# lines: the progress updates (\r-separated) as "PCT SIZE" (of command $2)
updates() {
	tr '\r' '\n' <"$1" |
		sed -n "s/^\[ vmtrace ${2:-script}: *\([0-9]*\)% of \([0-9.]* [KMG]*i*B\) of trace, [0-9.]* s \]\$/\1 \2/p"
}
# grows: the updates in $1 grow to a last 100% of about REC's size, and the
# line ends once
grows() {
	"$PYTHON3" -c "
import os, sys
p = [l.split(None, 1) for l in open('$1')]
pct = [int(a) for a, _ in p]
size = os.path.getsize('$r/data') / 1024.0
assert len(p) >= 3 and pct == sorted(pct) and pct[-1] == 100 and any(0 < x < 100 for x in pct), pct
assert p[-1][1].strip().endswith('KiB') and abs(float(p[-1][1].split()[0]) - size) < size / 4, (p[-1], size)
data = open('$2', newline='').read()
assert data.endswith(' ]\n') and data.count('\n') == 1, repr(data[-80:])
"
}
# grows_lines PCT: the updates in PCT (of a 32 MiB file) grow to a last 100%
grows_lines() {
	"$PYTHON3" -c "
p = [l.split(None, 1) for l in open('$1')]
pct = [int(a) for a, _ in p]
assert len(p) >= 3 and pct == sorted(pct) and pct[-1] == 100 and any(0 < x < 100 for x in pct), pct
assert p[-1][1].strip() == '32.0 MiB', p[-1]
"
}
for mode in "" --call-trace --json; do
	# shellcheck disable=SC2086
	VMTRACE_PROGRESS_MS=1 "$VMTRACE" script "$r" $G $mode --progress >"$TMP/out" 2>"$TMP/err"
	check "--progress ${mode:-(branches)}: exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	[ -z "$mode" ] || "$VMTRACE" script "$r" $G $mode >"$TMP/plain" 2>/dev/null
	check "--progress ${mode:-(branches)}: the same output as without" cmp -s "$TMP/out" "$TMP/plain"
	updates "$TMP/err" >"$TMP/pct"
	check "--progress ${mode:-(branches)}: $(wc -l <"$TMP/pct") updates, growing, the last 100% of the trace's size and ending the line" \
		grows "$TMP/pct" "$TMP/err"
done

# report and timeline
# shellcheck disable=SC2086
"$VMTRACE" report "$r" $G --json >"$TMP/rep" 2>"$TMP/rep.err"
check "report: nothing on stderr without --progress (no terminal)" test ! -s "$TMP/rep.err"
# shellcheck disable=SC2086
VMTRACE_PROGRESS_MS=1 "$VMTRACE" report "$r" $G --json --progress >"$TMP/out" 2>"$TMP/err"
check "report --progress: exit 0, the same report" sh -c "[ $? = 0 ] && cmp -s '$TMP/out' '$TMP/rep'"
updates "$TMP/err" report >"$TMP/pct"
check "report --progress: $(wc -l <"$TMP/pct") updates, growing to 100%" grows "$TMP/pct" "$TMP/err"
# shellcheck disable=SC2086
VMTRACE_PROGRESS_MS=1 "$VMTRACE" timeline "$r" $G -o "$TMP/t.html" --progress >/dev/null 2>"$TMP/err"
check "timeline --progress: exit 0, the page written" sh -c "[ $? = 0 ] && [ -s '$TMP/t.html' ]"
grep -v '^vmtrace timeline: wrote ' "$TMP/err" >"$TMP/err.p"
updates "$TMP/err.p" timeline >"$TMP/pct"
check "timeline --progress: $(wc -l <"$TMP/pct") updates, growing to 100%" grows "$TMP/pct" "$TMP/err.p"

# correlate (a 32 MiB recording: its decoders run at ~1 GB/s)
"$VMTRACE" synth -o "$TMP/big.data" --size 32M --vcpus 4 2>/dev/null
"$VMTRACE" correlate --dry-run "$TMP/big.data" >"$TMP/dry" 2>"$TMP/dry.err"
check "correlate: nothing on stderr without --progress (no terminal)" test ! -s "$TMP/dry.err"
VMTRACE_PROGRESS_MS=1 "$VMTRACE" correlate --dry-run "$TMP/big.data" --progress >"$TMP/out" 2>"$TMP/err"
check "correlate --dry-run --progress: exit 0, the same table" sh -c "[ $? = 0 ] && cmp -s '$TMP/out' '$TMP/dry'"
updates "$TMP/err" correlate >"$TMP/pct"
check "correlate --dry-run --progress: $(wc -l <"$TMP/pct") updates, growing to 100% of the file" \
	"$PYTHON3" -c "
import os
p = [l.split(None, 1) for l in open('$TMP/pct')]
pct = [int(a) for a, _ in p]
size = os.path.getsize('$TMP/big.data') / 1048576.0
assert len(p) >= 3 and pct == sorted(pct) and pct[-1] == 100 and any(0 < x < 100 for x in pct), pct
assert p[-1][1].strip().endswith('MiB') and abs(float(p[-1][1].split()[0]) - size) < 0.1, (p[-1], size)
assert open('$TMP/err', newline='').read().endswith(' ]\n')
"
# (SOURCE_DATE_EPOCH: the correction's marker holds its time)
SOURCE_DATE_EPOCH=1700000000 "$VMTRACE" correlate "$TMP/big.data" -o "$TMP/fixed1" >/dev/null 2>&1
SOURCE_DATE_EPOCH=1700000000 VMTRACE_PROGRESS_MS=1 "$VMTRACE" correlate "$TMP/big.data" -o "$TMP/fixed2" --progress \
	>/dev/null 2>"$TMP/err"
check "correlate -o --progress: the same corrected file, a last line at 100%" sh -c "
	cmp -s '$TMP/fixed1' '$TMP/fixed2' && tr '\r' '\n' <'$TMP/err' | grep -q '^\[ vmtrace correlate: 100% of'"
rm -f "$TMP/big.data" "$TMP/fixed1" "$TMP/fixed2"

# inject: a line while it searches the TSC offsets (the AUX data decoded),
# then one while it merges (REC's bytes written); a stand-in guest file
# (tests/lib.sh), a 32 MiB host recording with switch records
if [ "$(nproc)" -ge 2 ] && [ -n "$PERF" ] &&
   "$PERF" record -q -N -e dummy -a -C 0-1 --sample-identifier --switch-events -o "$TMP/g0.data" -- sleep 0.01 \
	>/dev/null 2>&1; then
	"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g.data" time-conv 10 341 0 1
	"$VMTRACE" synth -o "$TMP/h.data" --dir --per-cpu --vcpus 2 --cpus 2 --size 32M 2>/dev/null
	r=$TMP/h.data
	"$VMTRACE" inject "$r" --guest-data "$TMP/g.data" -o "$TMP/i1" --json >"$TMP/i1.json" 2>"$TMP/i1.err"
	check "inject: exit 0, no progress line without --progress (no terminal)" \
		sh -c "[ $? = 0 ] && ! grep -q '\[ vmtrace inject' '$TMP/i1.err'"
	VMTRACE_PROGRESS_MS=1 "$VMTRACE" inject "$r" --guest-data "$TMP/g.data" -o "$TMP/i2" --json --progress \
		>"$TMP/i2.json" 2>"$TMP/i2.err"
	check "inject --progress: exit 0, the same recording written" sh -c "[ $? = 0 ] && cmp -s '$TMP/i1/data' '$TMP/i2/data'"
	# (the report names its OUT)
	check "... and the same report" sh -c "sed 's|/i2|/i1|g' '$TMP/i2.json' | cmp -s - '$TMP/i1.json'"
	grep -v '^vmtrace inject: ' "$TMP/i2.err" >"$TMP/i2.p"    # (a warning: the stand-in's times)
	tr '\r' '\n' <"$TMP/i2.p" | grep '^\[ vmtrace inject (TSC offsets):' | sed 's/inject (TSC offsets):/inject-offsets:/' \
		>"$TMP/i2.a"
	tr '\r' '\n' <"$TMP/i2.p" | grep '^\[ vmtrace inject:' >"$TMP/i2.b"
	updates "$TMP/i2.a" inject-offsets >"$TMP/pct"
	check "inject --progress: the offsets' search, $(wc -l <"$TMP/pct") updates growing to 100%" \
		grows_lines "$TMP/pct"
	updates "$TMP/i2.b" inject >"$TMP/pct"
	check "inject --progress: the merge, $(wc -l <"$TMP/pct") updates growing to 100%" grows_lines "$TMP/pct"
	check "inject --progress: two lines, each ended" sh -c "
		[ \$(grep -c . '$TMP/i2.p') = 2 ] && tail -c 3 '$TMP/i2.p' | grep -q ' ]'"
	# --offset: no search, no line for it
	VMTRACE_PROGRESS_MS=1 "$VMTRACE" inject "$r" --guest-data "$TMP/g.data" -o "$TMP/i3" --progress \
		--offset 0xfffffe3c8291b532 >/dev/null 2>"$TMP/i3.err"
	check "inject --offset --progress: the merge's line only" sh -c "[ $? = 0 ] &&
		! grep -q 'TSC offsets' '$TMP/i3.err' && tr '\r' '\n' <'$TMP/i3.err' | grep -q '^\[ vmtrace inject: 100% of'"
	# a trace without timing packets: the search finds no offset (its line
	# ends short of 100%), KVM's metadata has them, the merge goes on
	"$VMTRACE" synth -o "$TMP/ht" --dir --per-cpu --vcpus 2 --cpus 2 --size 1M --timeless 2>/dev/null
	printf '[vmtrace-kvm]\nversion=1\ndomain=synth\nqemu_pid=4000\n' >"$TMP/ht/vmtrace-kvm.ini"
	for v in 0 1; do
		printf '\n[vcpu%s]\ntid=401%s\nstart.tsc_offset=-2000000\nend.tsc_offset=-2000000\n' $v $v \
			>>"$TMP/ht/vmtrace-kvm.ini"
	done
	VMTRACE_PROGRESS_MS=1 "$VMTRACE" inject "$TMP/ht" --guest-data "$TMP/g.data" -o "$TMP/i4" --progress \
		>/dev/null 2>"$TMP/i4.err"
	ck_rc=$?
	grep -v '^vmtrace inject: ' "$TMP/i4.err" >"$TMP/i4.p"
	check "inject --progress, offsets from KVM's metadata (exit $ck_rc): the search's line ended before the merge's" \
		"$PYTHON3" -c "
d = open('$TMP/i4.p', newline='').read()
assert $ck_rc == 0
i = d.index('\r[ vmtrace inject:')
assert 'TSC offsets' in d[:i] and d[i - 1] == '\n', repr(d[:i][-120:])
assert d.endswith(' ]\n') and d.count('\n') == 2, repr(d[-200:])
"
	rm -rf "$TMP/i1" "$TMP/i2" "$TMP/i3" "$TMP/i4" "$TMP/ht"
	r=$TMP/rec.data
else
	echo "# SKIP inject's progress: needs perf record -a on 2 CPUs (a stand-in guest file)"
fi

# on a terminal: stderr a pty (python's pty module)
pty_run() {
	"$PYTHON3" - "$@" <<'PY'
import os, pty, select, subprocess, sys
out_tty = sys.argv[1] == 'tty'
m, s = pty.openpty()
m2, s2 = pty.openpty()
env = dict(os.environ, VMTRACE_PROGRESS_MS='1')
with open(sys.argv[2], 'wb') as f:
    p = subprocess.Popen(sys.argv[4:], stdout=s2 if out_tty else f, stderr=s, env=env)
    os.close(s)
    os.close(s2)
    err = b''
    for fd in (m, m2):
        os.set_blocking(fd, False)
    while True:
        select.select([m, m2], [], [], 0.05)
        done = p.poll() is not None
        for fd, keep in ((m, True), (m2, False)):
            try:
                while True:
                    b = os.read(fd, 65536)
                    if not b:
                        break
                    if keep:
                        err += b
            except (BlockingIOError, OSError):
                pass
        if done:
            break
open(sys.argv[3], 'wb').write(err)
sys.exit(p.returncode)
PY
}
# shellcheck disable=SC2086
pty_run file "$TMP/out" "$TMP/err" "$VMTRACE" script "$r" $G
check "stderr a terminal, output to a file: exit 0, the same output" sh -c "[ $? = 0 ] && cmp -s '$TMP/out' '$TMP/branches'"
updates "$TMP/err" >"$TMP/pct"
check "... and a progress line ($(wc -l <"$TMP/pct") updates, the last 100%)" sh -c "
	[ \$(wc -l <'$TMP/pct') -ge 2 ] && tail -1 '$TMP/pct' | grep -q '^100 '"
# shellcheck disable=SC2086
pty_run tty "$TMP/out" "$TMP/err" "$VMTRACE" script "$r" $G --itrace=c
check "stderr and output on terminals: no progress line" sh -c "[ $? = 0 ] && ! grep -q 'vmtrace script:' '$TMP/err'"
# shellcheck disable=SC2086
pty_run tty "$TMP/out" "$TMP/err" "$VMTRACE" timeline "$r" $G -o "$TMP/t2.html"
check "timeline, stderr and stdout terminals (its output is OUT): a progress line" sh -c "
	[ $? = 0 ] && tr '\r' '\n' <'$TMP/err' | grep -q '^\[ vmtrace timeline: 100% of'"
if [ -d "$TMP/h.data" ]; then
	pty_run tty "$TMP/out" "$TMP/err" "$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/i3"
	check "inject, stderr and stdout terminals (its output is OUT): both progress lines" sh -c "
		[ $? = 0 ] && tr '\r' '\n' <'$TMP/err' | grep -q '^\[ vmtrace inject (TSC offsets): 100% of' &&
		tr '\r' '\n' <'$TMP/err' | grep -q '^\[ vmtrace inject: 100% of'"
fi
finish
