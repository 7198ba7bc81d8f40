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
finish
