#!/bin/sh
# vmtrace inject leaves nothing half-written when it is stopped (issue #13:
# "nothing half-written on any error (temp directory + rename)"): SIGINT,
# SIGTERM or SIGHUP while it writes OUT's temporary directory remove it, no
# OUT appears; what SIGKILL leaves is removed by the next inject writing
# there, which then succeeds.  The refusals (t0101, t0089) and a full disk
# (t0077) are the other errors.
# Guest file: a real `perf record -a` of this host standing in for a
# guest's (see t0100); host recording from vmtrace synth, large enough that
# inject takes a while (about 1 s per 256 MiB idle).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
cd "$TMP" || exit 1

"$PERF" record -q -N -e dummy -a -C 0-1 --sample-identifier --switch-events -o g0.data -- sleep 0.01 >/dev/null 2>&1 ||
	skip "perf record -a does not work here (perf_event_paranoid? not root?)"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" g0.data g.data time-conv 10 341 0 1
"$VMTRACE" synth -o h.data --size 128M --per-cpu --vcpus 2 --cpus 2 2>/dev/null

# temporaries beside OUT: .OUT.vmtrace-tmp.PID.XXXXXX
temps() { ls -A | grep "^\.$1\.vmtrace-tmp\." ; }
# a background job of a non-interactive shell ignores SIGINT, and a suite
# run under nohup ignores SIGHUP: undo that
bg() { env --default-signal=INT,QUIT,HUP "$@" & }
# wait (up to 30 s) until a temporary of $1 exists
wait_temp() { for _ in $(seq 3000); do [ -n "$(temps "$1")" ] && return 0; sleep 0.01; done; return 1; }

for sig in INT TERM HUP; do
	rm -rf o
	bg "$VMTRACE" inject h.data --guest-data g.data --offset 0 -o o >/dev/null 2>&1
	pid=$!
	wait_temp o || fail "SIG$sig: inject made no temporary directory"
	kill -$sig $pid
	wait $pid
	st=$?
	check "SIG$sig while inject writes OUT: killed by it (status $st), no temporary left, no OUT" \
		test $st -gt 128 -a -z "$(temps o)" -a ! -e o
done

rm -rf o
bg "$VMTRACE" inject h.data --guest-data g.data --offset 0 -o o >/dev/null 2>&1
pid=$!
wait_temp o || fail "SIGKILL: inject made no temporary directory"
kill -KILL $pid
wait $pid
left=$(temps o)
check "SIGKILL: no OUT, its temporary directory stays ($left)" test -n "$left" -a ! -e o
"$VMTRACE" inject h.data --guest-data g.data --offset 0 -o o >/dev/null 2>&1
check "... the next inject to OUT removes it and writes OUT (exit $?)" test $? -eq 0 -a -z "$(temps o)" -a -f o/data
finish
