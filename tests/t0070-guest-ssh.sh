#!/bin/sh
# vmtrace guest fetch/check over SSH against a real sshd on 127.0.0.1 with
# throwaway keys: kallsyms and modules of this machine, host-key refusal
# (unknown, changed), bad key files, a closed port, hostile targets.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/guest-lib.sh"
need_ssh
[ -r /proc/kallsyms ] || skip "no /proc/kallsyms"

K=$TMP/keys
ssh_keys "$K"
port=$(free_port)
start_sshd "$K" "$port" || skip "cannot start sshd on 127.0.0.1:$port (see $K/sshd.log)"
known_hosts_for "$K" "$port" > "$K/known_hosts"
me=$(id -un)
C=$TMP/cache
ssh_args="--ssh $me@127.0.0.1:$port -i $K/id_ed25519 --known-hosts $K/known_hosts --batch"

# This machine's kallsyms changes when BPF programs come and go (it is shared):
# fetch_local OUT ERR [ARGS]: fetch, retried until /proc/kallsyms was the same
# before and after it; $TMP/ks.local is that kallsyms.  (cmp trusts st_size,
# which is 0 for /proc files: compare copies.)  $reuse is the snapshot that
# existed before the last attempt with exactly that kallsyms, or empty: the
# churn can bring back the kallsyms of any earlier snapshot, not just the last.
fetch_local() {
	o=$1 e=$2
	shift 2
	for _ in $(seq 20); do
		ls -d "$C/[kernel.kcore]"/*/* 2>/dev/null > "$TMP/snaps.before"
		cat /proc/kallsyms > "$TMP/ks.before"
		$VMTRACE guest fetch $ssh_args --no-kcore -o "$C" "$@" >"$o" 2>"$e"
		rc=$?
		cat /proc/kallsyms > "$TMP/ks.local"
		cmp -s "$TMP/ks.before" "$TMP/ks.local" && [ $rc -ne 13 ] && break
		echo "# /proc/kallsyms changed during the fetch: again"; sleep 0.3
	done
	reuse=
	while read -r d; do
		cmp -s "$d/kallsyms" "$TMP/ks.local" && reuse=$d
	done < "$TMP/snaps.before"
}

# --- fetch --no-kcore: this machine's kallsyms and modules ---------------
fetch_local "$TMP/out" "$TMP/err"
check "fetch --no-kcore: exit 0" test $rc -eq 0
ks=$(cat "$TMP/out")
snap=$(dirname "$ks")
check "prints the kallsyms path of the snapshot" test -f "$ks"
check "stderr names it for --guestkallsyms" grep -qF -- "--guestkallsyms=$ks" "$TMP/err"
check "kallsyms equals this machine's /proc/kallsyms" cmp -s "$ks" "$TMP/ks.local"
if [ -r /proc/modules ]; then
	check "modules equals /proc/modules" cmp -s "$snap/modules" /proc/modules
else
	check "no /proc/modules here: empty modules file" test -f "$snap/modules" -a ! -s "$snap/modules"
fi
check "no kcore with --no-kcore" test ! -e "$snap/kcore"
bid=$(basename "$(dirname "$snap")")
check "perf layout CACHE/[kernel.kcore]/<build-id>/<YYYYmmddHHMMSShh>" \
	sh -c "echo '$snap' | grep -Eq '^$C/\\[kernel\\.kcore\\]/[0-9a-f]{40}/[0-9]{16}\$'"
if [ -r /sys/kernel/notes ]; then
	check "build-id is the GNU note of /sys/kernel/notes" "$PYTHON3" -c "
import struct
d, ids = open('/sys/kernel/notes', 'rb').read(), []
while len(d) >= 12:
    nsz, dsz, typ = struct.unpack('<III', d[:12])
    name, desc = d[12:12 + nsz], d[12 + (nsz + 3) // 4 * 4:][:dsz]
    if typ == 3 and name == b'GNU\\0':
        ids.append(desc.hex())
    d = d[12 + (nsz + 3) // 4 * 4 + (dsz + 3) // 4 * 4:]
assert ids == ['$bid'], ids
"
fi
check "files are 0600" test "$(stat -c %a "$snap/kallsyms") $(stat -c %a "$snap/modules")" = "600 600"
check "no temporary directory left" sh -c "! ls -a '$C/[kernel.kcore]/$bid' | grep -q tmp"

fetch_local "$TMP/out2" "$TMP/err2"
nsnap=$(wc -l < "$TMP/snaps.before")
if [ -n "$reuse" ]; then
	check "second fetch reuses the identical snapshot" sh -c "test \"\$(cat '$TMP/out2')\" = '$reuse/kallsyms' && grep -qF 'same snapshot found in $reuse' '$TMP/err2'"
	check "no snapshot added" test "$(ls "$C/[kernel.kcore]/$bid" | wc -l)" -eq "$nsnap"
else
	check "kallsyms changed since: a new snapshot" sh -c "! grep -qxF \"\$(dirname \"\$(cat '$TMP/out2')\")\" '$TMP/snaps.before' && grep -q 'new snapshot' '$TMP/err2'"
	check "one snapshot added" test "$(ls "$C/[kernel.kcore]/$bid" | wc -l)" -eq $((nsnap + 1))
fi
fetch_local "$TMP/json" "$TMP/err" --json
reused=False
[ -n "$reuse" ] && reused=True
check "--json: kallsyms, build-id, reused ($reused), kcore null" "$PYTHON3" -c "
import json, sys
j = json.load(open('$TMP/json'))
assert j['build_id'] == '$bid' and j['reused'] is $reused and j['kcore'] is None, j
assert j['dir'] == ('$reuse' or j['dir']), (j['dir'], '$reuse')
assert open(j['kallsyms'], 'rb').read() == open('$TMP/ks.local', 'rb').read()
assert j['symbols'] == sum(1 for _ in open('$TMP/ks.local')), j['symbols']
"

# --- guest check over SSH: this host has no /proc/kcore -------------------
$VMTRACE guest check $ssh_args >"$TMP/chk" 2>&1
rc=$?
cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)
check "check reports the real clocksource ($cs)" grep -q "^[A-Z]* *clocksource .*clocksource $cs" "$TMP/chk"
check "check reports the login user" grep -q "^OK   login .*uid $(id -u)\|^WARN login .*uid $(id -u)" "$TMP/chk"
if [ -r /proc/kcore ]; then
	check "check: kcore readable" grep -q '^OK   kcore' "$TMP/chk"
else
	check "check: no /proc/kcore here: FAIL with the fix, exit 1" \
		sh -c "grep -q '^FAIL kcore' '$TMP/chk' && grep -q 'fix: .*--no-kcore' '$TMP/chk' && test $rc -eq 1"
fi

# --- host keys: unknown and changed are refused -----------------------------
fp=$(ssh-keygen -lf "$K/host_ed25519.pub" | cut -d' ' -f2)
: > "$K/empty_kh"
$VMTRACE guest fetch --ssh "$me@127.0.0.1:$port" -i "$K/id_ed25519" --known-hosts "$K/empty_kh" --batch --no-kcore \
	-o "$TMP/c2" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "unknown host key: exit 9" test $rc -eq 9
check "unknown host key: shows the fingerprint $fp" grep -qF "$fp" "$TMP/err"
check "unknown host key: nothing fetched" test ! -e "$TMP/c2"
# the printed fix accepts the key
fix=$(sed -n "s/.*accept it with: echo '\\(.*\\)' >> .*/\\1/p" "$TMP/err")
echo "$fix" >> "$K/empty_kh"
$VMTRACE guest fetch --ssh "$me@127.0.0.1:$port" -i "$K/id_ed25519" --known-hosts "$K/empty_kh" --batch --no-kcore \
	-o "$TMP/c2" >/dev/null 2>&1
check "the printed known_hosts line accepts the key" test $? -eq 0

ssh-keygen -q -t ed25519 -N '' -f "$K/other"
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$K/other.pub")" > "$K/changed_kh"
$VMTRACE guest check --ssh "$me@127.0.0.1:$port" -i "$K/id_ed25519" --known-hosts "$K/changed_kh" --batch >"$TMP/out" 2>"$TMP/err"
rc=$?
check "changed host key: exit 10" test $rc -eq 10
check "changed host key: fingerprint and ssh-keygen -R" sh -c "grep -qF '$fp' '$TMP/err' && grep -qF 'ssh-keygen -R' '$TMP/err'"
check "changed host key: no check output" test ! -s "$TMP/out"

# --- bad keys, wrong port ---------------------------------------------------
$VMTRACE guest fetch --ssh "$me@127.0.0.1:$port" -i "$K/missing" --known-hosts "$K/known_hosts" --batch --no-kcore -o "$C" 2>"$TMP/err"
check "missing key file: exit 11, says so" sh -c "test $? -eq 11 && grep -q 'cannot read the key file $K/missing' '$TMP/err'"
# a FIFO as key or known_hosts: refused at once, never opened for reading (it blocked for ever)
mkfifo "$K/fifo"
timeout 10 $VMTRACE guest fetch --ssh "$me@127.0.0.1:$port" -i "$K/fifo" --known-hosts "$K/known_hosts" --batch --no-kcore -o "$C" 2>"$TMP/err"
check "a FIFO as -i KEY: exit 11 at once, says it is a FIFO" sh -c "test $? -eq 11 && grep -q 'cannot read the key file $K/fifo: it is a FIFO' '$TMP/err'"
timeout 10 $VMTRACE guest fetch --ssh "$me@127.0.0.1:$port" -i "$K/id_ed25519" --known-hosts "$K/fifo" --batch --no-kcore -o "$C" 2>"$TMP/err"
check "a FIFO as --known-hosts: exit 9 at once, says it is not a regular file" \
	sh -c "test $? -eq 9 && grep -q 'known_hosts file: $K/fifo is not a regular file (a FIFO)' '$TMP/err'"
mkdir -p "$TMP/fifohome/.ssh" && mkfifo "$TMP/fifohome/.ssh/id_ed25519"
HOME=$TMP/fifohome timeout 10 $VMTRACE guest fetch --ssh "$me@127.0.0.1:$port" --known-hosts "$K/known_hosts" --batch --no-kcore -o "$C" 2>"$TMP/err"
check "a FIFO as the default key ~/.ssh/id_ed25519: exit 11 at once" \
	sh -c "test $? -eq 11 && grep -q 'id_ed25519 is not a regular file (a FIFO)' '$TMP/err'"
$VMTRACE guest fetch --ssh "$me@127.0.0.1:$port" -i "$K/known_hosts" --known-hosts "$K/known_hosts" --batch --no-kcore -o "$C" 2>"$TMP/err"
check "a file that is no key: exit 11" sh -c "test $? -eq 11 && grep -q 'not a usable private key' '$TMP/err'"
ssh-keygen -q -t ed25519 -N 'secret' -f "$K/encrypted"
cp "$K/encrypted.pub" "$K/authorized_keys"
$VMTRACE guest fetch --ssh "$me@127.0.0.1:$port" -i "$K/encrypted" --known-hosts "$K/known_hosts" --batch --no-kcore -o "$C" \
	</dev/null 2>"$TMP/err"
check "encrypted key with --batch: no prompt, exit 11" sh -c "test $? -eq 11 && grep -q 'batch' '$TMP/err'"
# the default keys (no -i) come from $HOME/.ssh; an encrypted one there must
# not prompt on the terminal in --batch mode (script(1) gives us one)
if command -v script >/dev/null; then
	mkdir -p "$TMP/home/.ssh"
	ssh-keygen -q -t rsa -b 2048 -m PEM -N 'secret' -f "$TMP/home/.ssh/id_rsa"
	cp "$TMP/home/.ssh/id_rsa.pub" "$K/authorized_keys"
	HOME=$TMP/home timeout 30 script -qec "$VMTRACE guest fetch --ssh $me@127.0.0.1:$port --known-hosts $K/known_hosts --batch --no-kcore -o $TMP/c3" \
		/dev/null </dev/null >"$TMP/tty" 2>&1
	check "default encrypted key, --batch, on a terminal: exit 11, no prompt" \
		sh -c "grep -q 'public-key authentication as $me' '$TMP/tty' && ! grep -qi 'pass' '$TMP/tty' && test ! -e '$TMP/c3'"
	{ sleep 3; echo secret; sleep 10; } | HOME=$TMP/home timeout 30 script -qec \
		"$VMTRACE guest fetch --ssh $me@127.0.0.1:$port --known-hosts $K/known_hosts --no-kcore -o $TMP/c3" /dev/null >"$TMP/tty" 2>&1
	check "default encrypted key without --batch: asks for the passphrase and logs in" \
		sh -c "grep -q 'Passphrase' '$TMP/tty' && test -s \"\$(find '$TMP/c3' -name kallsyms | head -1)\""
fi
cp "$K/id_ed25519.pub" "$K/authorized_keys"
$VMTRACE guest fetch --ssh "$me@127.0.0.1:$port" -i "$K/other" --known-hosts "$K/known_hosts" --batch --no-kcore -o "$C" 2>"$TMP/err"
check "key not authorized: exit 11" sh -c "test $? -eq 11 && grep -q 'authentication as $me' '$TMP/err'"
closed=$(free_port)
$VMTRACE guest fetch --ssh "$me@127.0.0.1:$closed" -i "$K/id_ed25519" --known-hosts "$K/known_hosts" --batch --no-kcore -o "$C" 2>"$TMP/err"
check "closed port: exit 12, connection refused" sh -c "test $? -eq 12 && grep -qi 'port $closed.*refused' '$TMP/err'"

# --- hostile strings never reach a shell -------------------------------------
for target in "$me@127.0.0.1:$port;touch $TMP/pwned" "\$(touch $TMP/pwned)@127.0.0.1:$port" \
	"$me@127.0.0.1 -oProxyCommand=touch_$TMP/pwned" "$me@\`touch $TMP/pwned\`"; do
	$VMTRACE guest fetch --ssh "$target" -i "$K/id_ed25519" --known-hosts "$K/known_hosts" --batch --no-kcore -o "$C" \
		>/dev/null 2>"$TMP/err"
	rc=$?
	check "hostile target refused (exit $rc): $target" sh -c "test $rc -ne 0 && grep -q 'bad SSH target' '$TMP/err'"
done
check "nothing ran" test ! -e "$TMP/pwned"
$VMTRACE guest fetch --no-kcore -o "$C" 2>"$TMP/err"
check "neither --ssh nor --root: usage error 2" test $? -eq 2
finish
