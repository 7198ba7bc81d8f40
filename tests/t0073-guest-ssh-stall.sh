#!/bin/sh
# vmtrace guest fetch over SSH against a scripted guest (a real sshd on
# 127.0.0.1 whose every command is tests/fake-guest.sh, serving a prepared
# tree): kallsyms that changes at every read, files over their limit.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/guest-lib.sh"
need_ssh

T=$TMP/guest
"$PYTHON3" "$top_srcdir/tests/fake-kernel-tree.py" "$T"
bid=101112131415161718191a1b1c1d1e1f20212223
K=$TMP/keys
ssh_keys "$K"
port=$(free_port)
start_fake_guest "$K" "$port" "$T" || skip "cannot start sshd on 127.0.0.1:$port (see $K/sshd.log)"
known_hosts_for "$K" "$port" > "$K/known_hosts"
ssh_args="--ssh $(id -un)@127.0.0.1:$port -i $K/id_ed25519 --known-hosts $K/known_hosts --batch"
mode() { echo "$1" > "$K/state/mode"; }

timeout 180 "$VMTRACE" guest fetch $ssh_args -o "$TMP/c0" --no-kcore >"$TMP/out" 2>"$TMP/err"
check "the scripted guest serves its tree: fetch --no-kcore works" \
	sh -c "test $? -eq 0 && cmp -s \"\$(cat '$TMP/out')\" '$T/proc/kallsyms'"

# a guest whose kallsyms changes at every read (a BPF program per read, as
# on a busy guest): 5 attempts, then exit 13 and nothing stored
mode changing
timeout 300 "$VMTRACE" guest fetch $ssh_args -o "$TMP/c13" --no-kcore >/dev/null 2>"$TMP/err"
rc=$?
check "kallsyms changing at every read: exit 13, says so" sh -c "test $rc -eq 13 && grep -q 'kallsyms changed during the copy' '$TMP/err'"
[ $rc -eq 13 ] || { echo "# exit $rc:"; sed "s/^/# /" "$TMP/err"; }
check "... after 5 attempts (10 reads)" sh -c "grep -q '5 attempts: kallsyms changed' '$TMP/err' && test \$(cat '$K/state/count') -eq 10"
check "... and nothing stored" test -z "$(ls -A "$TMP/c13/[kernel.kcore]/$bid" 2>/dev/null)"
mode normal

# a guest file larger than its limit: refused, the rest never read
cp "$T/sys/kernel/notes" "$TMP/notes.good"
head -c 1048576 /dev/zero >> "$T/sys/kernel/notes"
timeout 180 "$VMTRACE" guest fetch $ssh_args -o "$TMP/c1" --no-kcore >/dev/null 2>"$TMP/err"
check "a 1 MiB notes file over SSH: exit 3, larger than 64 KiB" \
	sh -c "test $? -eq 3 && grep -q 'notes in the guest is larger than 64 KiB' '$TMP/err'"
cp "$TMP/notes.good" "$T/sys/kernel/notes"

# A guest that stops answering: every wait ends after --timeout with one
# line and exit 16, within a few seconds.  $1 mode, $2 what it stalls in,
# $3... fetch options.
stalled() {
	m=$1 what=$2; shift 2
	mode "$m"
	start=$(date +%s)
	timeout 60 "$VMTRACE" guest fetch $ssh_args --timeout 2 -o "$TMP/c-$m" "$@" >/dev/null 2>"$TMP/err"
	rc=$? took=$(($(date +%s) - start))
	check "$m: --timeout 2 ends the wait ($took s), exit 16, one line" \
		sh -c "test $rc -eq 16 && test $took -le 8 && test \$(wc -l < '$TMP/err') -eq 1 &&
		       grep -q 'did not answer for 2 s while $what (--timeout)' '$TMP/err'" ||
		{ echo "# exit $rc:"; sed "s/^/# /" "$TMP/err"; }
	check "... nothing left in the cache" test -z "$(ls -A "$TMP/c-$m/[kernel.kcore]/$bid" 2>/dev/null)"
	mode normal
}
stalled stall-kallsyms "reading /proc/kallsyms" --no-kcore   # exec cat stops mid-file
stalled sleep "reading /proc/sys/kernel/osrelease" --no-kcore   # ForceCommand sleep: no command answers
stalled stall-sftp "reading /proc/kcore"   # SFTP never says hello (sftp_init)

# A signal ends a stalled fetch (default timeout: 30 s) within about a
# second, exit 1 "interrupted", and removes the temporary snapshot.
mode stall-sftp
for sig in TERM INT HUP; do
	rm -rf "$TMP/cs"
	# a background job of a script ignores SIGINT: start it in its own shell
	"$PYTHON3" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
		timeout 60 "$VMTRACE" guest fetch $ssh_args -o "$TMP/cs" >/dev/null 2>"$TMP/err" &
	job=$!
	# until the snapshot's temporary exists and the copy waits for SFTP
	for _ in $(seq 100); do
		[ -n "$(ls -A "$TMP/cs/[kernel.kcore]/$bid" 2>/dev/null)" ] && break
		sleep 0.1
	done
	sleep 1
	pid=$(pgrep -P "$job" -f 'vmtrace guest fetch' || pgrep -f "vmtrace guest fetch .*-o $TMP/cs" | head -1)
	start=$(date +%s%N)
	kill -s "$sig" "$pid"
	wait "$job"
	rc=$? took=$((($(date +%s%N) - start) / 1000000))
	check "SIG$sig ends a stalled fetch in $took ms (< 2 s), exit 1, interrupted" \
		sh -c "test $rc -eq 1 && test $took -lt 2000 && grep -q 'interrupted while reading /proc/kcore' '$TMP/err'"
	[ $rc -eq 1 ] || { echo "# exit $rc:"; sed "s/^/# /" "$TMP/err"; }
	check "... and leaves nothing in the cache" test -z "$(ls -A "$TMP/cs/[kernel.kcore]/$bid" 2>/dev/null)"
done
mode normal
finish
