#!/bin/sh
# Signals leave no temporaries (issue #11): SIGINT, SIGTERM or SIGHUP while
# `correlate -o` copies a 256 MiB trace, while `synth` writes one, or while
# `record` records, removes every temporary; what SIGKILL leaves is removed
# by the next run writing there; record stops cleanly on SIGHUP too.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python
cd "$TMP" || exit 1
export SOURCE_DATE_EPOCH=1700000000

# temporaries beside OUT: .OUT.vmtrace-tmp.PID.XXXXXX (and the names
# earlier versions used: OUT.tmp.XXXXXX, .OUT.XXXXXX)
temps() { ls -A | grep "^\.\{0,1\}$1\." ; }
# a background job of a non-interactive shell ignores SIGINT, and a suite
# run under nohup ignores SIGHUP: undo that
bg() { env --default-signal=INT,QUIT,HUP "$@" & }
# wait (up to 30 s) until a temporary of $1 exists
wait_temp() { for _ in $(seq 300); do [ -n "$(temps "$1")" ] && return 0; sleep 0.1; done; return 1; }

"$VMTRACE" synth -o big.data --size 256M --per-cpu --vcpus 8 --cpus 2 2>/dev/null

for sig in INT TERM HUP; do
	rm -f o.data
	# slowed patch writes (test hook) keep the temporary around long enough
	bg VMTRACE_TEST_APPLY_DELAY_US=200 "$VMTRACE" correlate big.data -o o.data >/dev/null 2>&1
	pid=$!
	wait_temp o.data || fail "SIG$sig: correlate -o made no temporary"
	kill -$sig $pid; wait $pid; st=$?
	check "SIG$sig during correlate -o: killed by it (status $st)" test $st -gt 128
	check "  ... no temporary left, no output" test -z "$(temps o.data)" -a ! -e o.data
done

"$VMTRACE" synth -o d.d --dir --size 64M 2>/dev/null
bg VMTRACE_TEST_APPLY_DELAY_US=200 "$VMTRACE" correlate d.d -o dcorr.d >/dev/null 2>&1
pid=$!
wait_temp dcorr.d || fail "correlate DIR -o made no temporary directory"
kill -TERM $pid; wait $pid
check "SIGTERM during correlate DIR -o: no temporary directory left" test -z "$(temps dcorr.d)" -a ! -e dcorr.d

bg "$VMTRACE" synth -o s.data --truth s.json --size 2G 2>/dev/null
pid=$!
wait_temp s.data || fail "synth made no temporary"
kill -INT $pid; wait $pid; st=$?
check "SIGINT during synth: killed by it (status $st)" test $st -gt 128
check "  ... nothing left" test -z "$(temps s.data)" -a ! -e s.data -a ! -e s.json

# SIGKILL cannot be handled: the next run removes what it left
bg VMTRACE_TEST_APPLY_DELAY_US=200 "$VMTRACE" correlate big.data -o k.data >/dev/null 2>&1
pid=$!
wait_temp k.data
kill -KILL $pid; wait $pid
check "SIGKILL during correlate -o leaves a temporary" test -n "$(temps k.data)"
"$VMTRACE" synth -o small.data --size 64K 2>/dev/null
"$VMTRACE" correlate small.data -o k2.data >/dev/null 2>&1
check "the next correlate -o in that directory removes it" test -z "$(temps k.data)"

# a temporary of a live process, and a stale one whose PID is reused by a
# process started after it was written
sh -c 'sleep 60' & live=$!
touch ".l.data.vmtrace-tmp.$live.abcdef"
touch -d '2 hours ago' ".r.data.vmtrace-tmp.$live.ghijkl"
sh -c 'exit 0' & dead=$!; wait $dead
touch ".x.data.vmtrace-tmp.$dead.mnopqr"
"$VMTRACE" synth -o small.data --size 64K 2>/dev/null
check "a dead process's temporary is removed by the next run" test ! -e ".x.data.vmtrace-tmp.$dead.mnopqr"
check "  ... one older than its PID's process too" test ! -e ".r.data.vmtrace-tmp.$live.ghijkl"
check "  ... a live process's temporary is kept" test -e ".l.data.vmtrace-tmp.$live.abcdef"
# the same for correlate -o (its own helper is the same: src/fs/tempfile.h)
touch ".c.data.vmtrace-tmp.$live.abcdef" ".c.data.vmtrace-tmp.$dead.mnopqr"
"$VMTRACE" correlate small.data -o c.data >/dev/null 2>&1
check "correlate -o: a dead process's temporary is removed, a live one's kept" \
	sh -c "test ! -e '.c.data.vmtrace-tmp.$dead.mnopqr' -a -e '.c.data.vmtrace-tmp.$live.abcdef'"
kill $live 2>/dev/null

# record: SIGHUP stops cleanly like SIGINT; nothing left behind
fake_qemu || { fail "fake QEMU did not start"; finish; }
"$VMTRACE" record --pid $FAKE_QEMU --source synth --synth-size 64M --synth-rate 4M -t 60 -o hup.data >hup.out 2>hup.err &
pid=$!
for _ in $(seq 100); do grep -q "Ctrl-C stops" hup.err && break; sleep 0.1; done
sleep 0.5; kill -HUP $pid; wait $pid; st=$?
check "SIGHUP during record: exit 0, a complete recording" sh -c "[ $st = 0 ] && '$VMTRACE' correlate --dry-run hup.data >/dev/null 2>&1"
check "  ... no temporary left" test -z "$(temps hup.data)"
bg "$VMTRACE" record --pid $FAKE_QEMU --source synth --synth-size 64M --synth-rate 4M -t 60 -o hup2.data >/dev/null 2>hup2.err
pid=$!
for _ in $(seq 100); do grep -q "Ctrl-C stops" hup2.err && break; sleep 0.1; done
# two signals at once (delivered together when it continues): the first
# stops the recording, the second ends the run
sleep 0.3; kill -STOP $pid; kill -INT $pid; kill -TERM $pid; kill -CONT $pid; wait $pid; st=$?
check "SIGINT then SIGTERM during record: the second ends it (status $st)" test $st = 143
check "  ... no temporary left, no output" test -z "$(temps hup2.data)" -a ! -e hup2.data
# record: what a killed record left (a temporary directory) goes, a live one's stays
sh -c 'sleep 60' & live=$!
sh -c 'exit 0' & dead=$!; wait $dead
mkdir ".st.data.vmtrace-tmp.$dead.abcdef" ".st.data.vmtrace-tmp.$live.ghijkl"
head -c 100000 /dev/zero > ".st.data.vmtrace-tmp.$dead.abcdef/data"
"$VMTRACE" record --pid $FAKE_QEMU --source synth --synth-size 4M -t 1 -o st.data >/dev/null 2>&1
check "record: a dead process's temporary directory is removed, a live one's kept" \
	sh -c "test -e st.data -a ! -e '.st.data.vmtrace-tmp.$dead.abcdef' -a -d '.st.data.vmtrace-tmp.$live.ghijkl'"
kill $live
kill $FAKE_QEMU 2>/dev/null
finish
