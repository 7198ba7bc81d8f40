#!/bin/sh
# vmtrace guest fetch's cache and vmtrace script's guest snapshot are
# trusted only if they are the user's (or root's) and writable by no one
# else, with no symbolic link below the cache directory: another user's
# snapshot (a non-ELF "kcore") is never reused, a planted
# CACHE/[kernel.kcore] link never followed.  What killed runs left there is
# removed by the next run.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/guest-lib.sh"
need_python
[ "$(id -u)" -eq 0 ] || skip "needs root (files of another user: chown nobody)"
nobody=$(id -u nobody 2>/dev/null) || skip "no user nobody"

T=$TMP/guest
"$PYTHON3" "$top_srcdir/tests/fake-kernel-tree.py" "$T"
bid=101112131415161718191a1b1c1d1e1f20212223
fetch() { "$VMTRACE" guest fetch --root "$T" -o "$1" >"$TMP/out" 2>"$TMP/err"; }
refused() {   # refused DESCRIPTION TEXT FIX: the last fetch failed saying TEXT and FIX
	check "$1: refused (exit 1, one line naming the fix)" \
		sh -c "test $rc -eq 1 && test \$(wc -l < '$TMP/err') -eq 1 &&
		       grep -qF \"refusing the guest cache: $2\" '$TMP/err' && grep -qF \"$3\" '$TMP/err'"
	[ $rc -eq 1 ] || { echo "# exit $rc:"; sed "s/^/# /" "$TMP/err"; }
}

C=$TMP/c0
fetch "$C"
check "a private cache: new snapshot" sh -c "test $? -eq 0 && grep -q 'new snapshot' '$TMP/err'"
snap=$(dirname "$(cat "$TMP/out")")
fetch "$C"
check "... reused the second time" sh -c "test $? -eq 0 && grep -qF 'same snapshot found in $snap' '$TMP/err'"

chmod o+w "$C"
fetch "$C"; rc=$?
refused "a cache writable by everyone" "$C is writable by everyone (mode 0757)" "chmod go-w"
chmod o-w "$C"
chmod g+w "$C/[kernel.kcore]/$bid"
fetch "$C"; rc=$?
refused "a group-writable build-id directory" "$C/[kernel.kcore]/$bid is writable by its group" "chmod go-w"
chmod g-w "$C/[kernel.kcore]/$bid"

# another user's snapshot: a non-ELF kcore with the same kallsyms and modules
chown -R nobody "$snap"
printf 'not a kcore' > "$snap/kcore.x" && mv "$snap/kcore.x" "$snap/kcore" && chown nobody "$snap/kcore"
fetch "$C"; rc=$?
refused "another user's snapshot (non-ELF kcore)" "$snap belongs to uid $nobody, not to you or root" "chown -R"
check "... not reused" sh -c "! grep -q 'same snapshot' '$TMP/err'"
chown -R root "$snap"
fetch "$C"
check "our own snapshot with a non-ELF kcore: not reused, a new snapshot" \
	sh -c "test $? -eq 0 && grep -q 'new snapshot' '$TMP/err' && test \"\$(dirname \"\$(cat '$TMP/out')\")\" != '$snap'"
ln -s /etc/passwd "$snap/modules.l" && mv -T "$snap/modules.l" "$snap/modules"
fetch "$C"; rc=$?
refused "a symbolic link in a snapshot" "$snap/modules is a symbolic link" "rm "
rm "$snap/modules"

# CACHE/[kernel.kcore] a link to somewhere else: never followed
C=$TMP/c1 E=$TMP/elsewhere
mkdir -p "$C" "$E"
ln -s "$E" "$C/[kernel.kcore]"
fetch "$C"; rc=$?
refused "a symbolic link CACHE/[kernel.kcore]" "$C/[kernel.kcore] is a symbolic link" "rm "
check "... nothing written where it points" test -z "$(ls -A "$E")"
rm "$C/[kernel.kcore]"
mkdir -p "$C/[kernel.kcore]/$bid" && chown nobody "$C/[kernel.kcore]/$bid"
fetch "$C"; rc=$?
refused "a build-id directory of another user" "$C/[kernel.kcore]/$bid belongs to uid $nobody" "rm -r"
check "... nothing written into it" test -z "$(ls -A "$C/[kernel.kcore]/$bid")"

# what a killed fetch left (.snapshot.vmtrace-tmp.PID.XXXXXX) is removed by
# the next fetch, reusing or not - unless its process still runs
B=$TMP/c0/[kernel.kcore]/$bid
sh -c 'sleep 60' & live=$!
sh -c 'exit 0' & dead=$!; wait $dead
mkdir "$B/.snapshot.vmtrace-tmp.$dead.abcdef" "$B/.snapshot.vmtrace-tmp.$live.ghijkl"
head -c 100000 /dev/zero > "$B/.snapshot.vmtrace-tmp.$dead.abcdef/kcore"
fetch "$TMP/c0"
check "a killed fetch's temporary snapshot: removed by the next fetch (it reused a snapshot)" \
	sh -c "test $? -eq 0 && grep -q 'same snapshot' '$TMP/err' && test ! -e '$B/.snapshot.vmtrace-tmp.$dead.abcdef'"
check "... one of a running fetch: kept" test -d "$B/.snapshot.vmtrace-tmp.$live.ghijkl"
"$VMTRACE" guest fetch --root "$T" -o "$TMP/c5" >/dev/null 2>&1   # no reuse: a new snapshot
mkdir -p "$TMP/c5/[kernel.kcore]/$bid/.snapshot.vmtrace-tmp.$dead.stuvwx"
rm -rf "$TMP/c5/[kernel.kcore]/$bid/"2*
fetch "$TMP/c5"
check "... and by a fetch that makes a new snapshot" \
	sh -c "test $? -eq 0 && grep -q 'new snapshot' '$TMP/err' && test ! -e '$TMP/c5/[kernel.kcore]/$bid/.snapshot.vmtrace-tmp.$dead.stuvwx'"
check "no temporary of this run left" test -z "$(ls -A "$TMP/c5/[kernel.kcore]/$bid" | grep vmtrace-tmp)"
kill $live

# CACHE itself may be a link (the user chose it); its target is checked
ln -s "$TMP/c0" "$TMP/c0link"
fetch "$TMP/c0link"
check "CACHE given as a link to a private cache: works" test $? -eq 0
finish
